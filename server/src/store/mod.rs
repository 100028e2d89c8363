//! The keyspace: databases of keys with values and absolute expiry deadlines.
//!
//! # Concurrency model
//!
//! The whole keyspace (every [`Db`] plus the server state) sits behind **one
//! mutex** (`Mutex<Engine>`, see [`crate::engine`]), held only while a batch
//! of already-parsed commands is applied, never across an `.await` or any I/O.
//! A connection task reads, parses every complete request, takes the lock
//! once, applies the batch, releases it, and writes all replies at once.
//!
//! - Every command is linearizable, and anything run under one lock hold
//!   (a pipeline batch, a MULTI/EXEC, a Lua script or function) is atomic across all
//!   keys: no other client's command can interleave.
//! - Inside, nothing is shared: `Db` is a plain hash table, with no dashmap
//!   shard to deadlock on and no `Ref` to hold across an await.
//! - A script holds the lock for its whole run. Connection tasks never block
//!   behind it: they poll the lock asynchronously and, once the script is past
//!   the busy threshold, answer `-BUSY` from atomics (`crate::lua::ScriptState`);
//!   a long script also hands its tokio worker to a fresh thread
//!   (`block_in_place`) so tasks queued there keep running.
//!
//! Measured alternative: a dedicated executor thread owning the keyspace
//! (Redis's model), fed batches over a channel. On a 2-core machine it reached
//! only 0.53–0.82× Redis in redis-benchmark (two thread wake-ups per batch:
//! a quarter of the profile was `finish_task_switch`), against ~1.0× for this
//! design. A dashmap keyspace would still need a global gate for atomic
//! scripts, i.e. this lock plus shard locks.
//!
//! # Expiry
//!
//! Deadlines are absolute unix milliseconds (EXPIREAT and PEXPIRETIME need
//! wall time) read from the [`Clock`]. Expiry is lazy (every lookup checks the
//! deadline) and active ([`Db::expire_step`] removes due keys in deadline order,
//! a bounded number per step). This module never performs I/O.
//!
//! # Memory
//!
//! A key is one [`item::Item`] allocation (deadline, key and value together),
//! an 8-byte slot in its database's hash table and, with a deadline, about 8
//! bytes in the deadline index: about 110 bytes for a `lock:<id>` key with a
//! 36-byte owner, against about 180 in Redis 7.0.

pub(crate) mod access;
pub(crate) mod arena;
pub(crate) mod clock;
pub(crate) mod db;
pub(crate) mod digest;
pub(crate) mod geohash;
pub(crate) mod glob;
pub(crate) mod hash;
pub(crate) mod hll;
pub(crate) mod htstats;
pub(crate) mod item;
pub(crate) mod list;
pub(crate) mod num;
pub(crate) mod packed;
pub(crate) mod set;
pub(crate) mod small;
pub(crate) mod stream;
pub mod zset;

pub use clock::{Clock, ManualClock, SystemClock, VirtualClock};
pub(crate) use db::{is_expired as expired, EntryRef};
pub use db::{Db, Value};
pub(crate) use item::{HashMut, StrEncoding, ValueMut, ValueRef};
