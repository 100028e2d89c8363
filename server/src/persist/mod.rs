//! Persistence: the files Redis 7.0.15 writes and reads.
//!
//! - [`rdb`]: the RDB format (version 10 written, every older encoding Redis
//!   7.0 loads read), shared by snapshots, DUMP/RESTORE and FUNCTION DUMP.
//! - [`aof`]: the multi-part append-only file (manifest, base and
//!   incremental files), written from the effects feed.
//! - [`loading`]: the RDB file loaded at start while clients get `-LOADING`.
//! - [`saves`]: when the RDB file is written (save points, SHUTDOWN,
//!   FLUSHALL) and the state Redis reports about it (MISCONF, INFO).
//!
//! Nothing here holds the engine lock longer than a slice of work; the
//! formats are plain functions over bytes and values.

pub(crate) mod aof;
pub(crate) mod loading;
pub(crate) mod rdb;
pub(crate) mod saves;
pub(crate) mod snapshot;
