//! Persistence: the files Redis 7.0.15 writes and reads.
//!
//! - [`rdb`]: the RDB format (version 10 written, every older encoding Redis
//!   7.0 loads read), shared by snapshots, DUMP/RESTORE and FUNCTION DUMP.
//! - [`aof`]: the multi-part append-only file (manifest, base and
//!   incremental files), written from the effects feed.
//! - [`loading`]: the RDB file loaded at start while clients get `-LOADING`.
//! - [`saves`]: when the RDB file is written (save points, SHUTDOWN,
//!   FLUSHALL) and the state Redis reports about it (MISCONF, INFO).
//! - [`DiskError`]: why writes are refused with `-MISCONF` (a failed
//!   background save, or a failed write or fsync of the append-only file).
//!
//! Nothing here holds the engine lock longer than a slice of work; the
//! formats are plain functions over bytes and values.

pub(crate) mod aof;
pub(crate) mod loading;
pub(crate) mod rdb;
pub(crate) mod saves;
pub(crate) mod snapshot;

use crate::protocol::Reply;
use crate::state::ServerState;

/// Why writes (and PING) are refused: Redis's
/// `writeCommandsDeniedByDiskError`, which admission asks once per command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DiskError {
    /// The last background save failed ([`saves::writes_denied`]).
    Rdb,
    /// The append-only file is on and its last write (else its last fsync)
    /// failed with this errno.
    Aof(i32),
}

impl DiskError {
    /// The error writes are refused with now, if any; the RDB's first, as
    /// in Redis.
    pub(crate) fn of(state: &ServerState) -> Option<DiskError> {
        if saves::writes_denied(state) {
            return Some(DiskError::Rdb);
        }
        if !state.aof.on {
            return None;
        }
        state.shared.aof.error().map(DiskError::Aof)
    }

    /// Its `-MISCONF` reply (Redis's `writeCommandsGetDiskErrorMessage`).
    pub(crate) fn reply(self) -> Reply {
        match self {
            DiskError::Rdb => crate::errors::err(crate::errors::MISCONF),
            DiskError::Aof(errno) => crate::errors::misconf_aof(errno),
        }
    }
}
