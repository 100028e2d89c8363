//! Coordination recipes built on the `redis` crate, and the harness that
//! runs every test on each backend: embedded coordis, a real `redis-server`,
//! and an external server from `COORDIS_TEST_URL`.
//!
//! - [`backend`]: starting and naming the backends, and the
//!   [`on_every_backend!`] macro that gives each test one body for all of them.
//! - [`lock`]: a lock with an owner, released and extended by Lua.
//! - [`fencing`]: fencing tokens and a resource that refuses stale writes.
//! - [`failover`]: locks and leader leases across a primary's death and a
//!   replica's promotion (fencing from the resource's store, WAIT, Sentinel).
//! - [`semaphore`]: K-key and sorted-set semaphores.
//! - [`limits`]: a fixed-window rate limiter and a barrier.
//! - [`watchdog`]: renews a held lock and reports its loss.
//! - [`leader`]: heartbeat leader election (the `coordis-pod` binary runs it).
//! - [`redlock`]: Redlock over N independent servers.
//! - [`cluster`]: a coordis or a Redis cluster for the cluster recipes and
//!   clients, and a slot moved step by step as `redis-cli` moves it.
//! - [`functions`]: the canonical scripts as one Redis 7 function library,
//!   called with FCALL.
//! - [`queues`]: a re-entrant hash lock, a lock that signals waiters through
//!   a list, a sliding-window limiter on a list, and a job queue of hashes,
//!   lists and a set.
//! - [`streams`]: a consumer-group work queue with takeover (XREADGROUP,
//!   XACK, XAUTOCLAIM) and a capped events stream read by blocking listeners.
//! - [`waiting`]: recipes on blocking commands: a fair lock (BLPOP), a
//!   reliable queue (BLMOVE) and a delayed queue (BZPOPMIN).
//! - [`durable`]: backends with the append-only file on that a test
//!   crashes and restarts from their files (embedded coordis,
//!   `coordis-server`, `redis-server`), and [`on_every_durable_backend!`].

pub mod backend;
pub mod cluster;
pub mod durable;
pub mod failover;
pub mod fencing;
pub mod functions;
pub mod leader;
pub mod limits;
pub mod lock;
pub mod queues;
pub mod redlock;
pub mod semaphore;
pub mod streams;
pub mod waiting;
pub mod watchdog;
