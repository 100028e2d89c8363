//! The keyspace: databases of keys with values and absolute expiry deadlines.
//!
//! # Concurrency model
//!
//! coordis follows Redis's own model: **one executor thread owns the whole
//! keyspace** (see [`crate::engine`]). Connection tasks on the tokio runtime
//! parse requests and send each read's batch of commands to that thread; it
//! applies them in order and hands back the encoded replies. Consequences:
//!
//! - Every command is linearizable, and a batch sent by MULTI/EXEC or a Lua
//!   script (later) is atomic across all keys for free: nothing else runs on the
//!   executor meanwhile.
//! - Nothing here is shared or locked: `Db` is a plain `HashMap`. There is no
//!   lock to hold across an `.await` and no dashmap shard to deadlock on.
//! - A long-running script occupies only the executor thread, never a tokio
//!   worker: connection tasks keep reading and can answer `-BUSY` from an atomic
//!   flag the executor publishes, as Redis does.
//! - The cost is one cross-thread hand-off per batch, not per command; under
//!   pipelining or many clients the executor drains batches back to back.
//!
//! The alternatives in the design notes (a dashmap keyspace with a gate, one
//! mutex around the keyspace) make atomic scripts either block tokio workers
//! or need a second locking scheme for BUSY; see README "Design".
//!
//! # Expiry
//!
//! Deadlines are absolute unix milliseconds (EXPIREAT and PEXPIRETIME need
//! wall time) read from the [`Clock`]. Expiry is lazy (every lookup checks the
//! deadline) and active ([`Db::expire_step`] removes due keys in deadline order,
//! a bounded number per step). This module never performs I/O.

pub mod clock;
pub mod db;
pub mod glob;
pub mod num;

pub use clock::{Clock, SystemClock};
pub use db::{Db, Entry, Value};
