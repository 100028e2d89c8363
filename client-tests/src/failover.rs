//! Locks and leases across a failover: what a replicated Redis loses when
//! its primary dies before the replica has a write, and the recipes that
//! survive it.
//!
//! - [`acquire_fenced`]: the lock on the replicated servers, its fencing
//!   token from the protected resource's own store. A token counter kept
//!   beside the lock fails over with it: the increment the dead primary
//!   never sent is lost too, and the second holder is handed the first
//!   holder's token (the tests show it), so it cannot fence.
//! - [`acquire_replicated`]: `SET NX PX` then `WAIT`; fewer acknowledgements
//!   than asked for means the lock is treated as not held (and released).
//! - [`SentinelPrimary`]: a connection to whatever primary a Sentinel names.
//! - [`act_as_leader`]: a leader's action, run only while the leader key on
//!   the current primary still names it (the token check of the heartbeat
//!   election in [`crate::leader`]).

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{RedisResult, Script};

use crate::lock::Lock;

const LEADER_ACT: &str = include_str!("../../scripts/lua/leader_act.lua");

/// Takes `lock` on `lock_conn` (the replicated servers) for `owner`, and
/// then the next fencing token from `token_conn` (the store the protected
/// resource checks tokens against, which does not fail over with the
/// lock). `None`: the lock is held.
pub async fn acquire_fenced(
    lock_conn: &mut MultiplexedConnection,
    token_conn: &mut MultiplexedConnection,
    lock: &str,
    owner: &str,
    ttl: Duration,
) -> RedisResult<Option<i64>> {
    if !Lock::new(lock, owner).acquire(lock_conn, ttl).await? {
        return Ok(None);
    }
    let token: i64 = redis::cmd("INCR")
        .arg(format!("{lock}:token"))
        .query_async(token_conn)
        .await?;
    Ok(Some(token))
}

/// Takes `lock` for `owner` and holds it only if at least `replicas`
/// replicas acknowledged it within `timeout` (`WAIT replicas timeout`).
/// With fewer, the lock is released again (owner-checked) and `false`
/// returned: a lock only the primary has is lost if the primary dies.
pub async fn acquire_replicated(
    conn: &mut MultiplexedConnection,
    lock: &str,
    owner: &str,
    ttl: Duration,
    replicas: usize,
    timeout: Duration,
) -> RedisResult<bool> {
    let lock = Lock::new(lock, owner);
    if !lock.acquire(conn, ttl).await? {
        return Ok(false);
    }
    let acked: usize = redis::cmd("WAIT")
        .arg(replicas)
        .arg(timeout.as_millis() as u64)
        .query_async(conn)
        .await?;
    if acked >= replicas {
        return Ok(true);
    }
    lock.release(conn).await?;
    Ok(false)
}

/// The primary a Sentinel names for a monitored group.
#[derive(Clone, Debug)]
pub struct SentinelPrimary {
    sentinel: redis::Client,
    name: String,
}

impl SentinelPrimary {
    /// The group `name` as the Sentinel at `sentinel_url` sees it.
    pub fn new(sentinel_url: &str, name: &str) -> RedisResult<SentinelPrimary> {
        Ok(SentinelPrimary {
            sentinel: redis::Client::open(sentinel_url)?,
            name: name.to_string(),
        })
    }

    /// `SENTINEL GET-MASTER-ADDR-BY-NAME`: the primary's `host:port`.
    pub async fn address(&self) -> RedisResult<String> {
        let mut s = self.sentinel.get_multiplexed_async_connection().await?;
        let (host, port): (String, u16) = redis::cmd("SENTINEL")
            .arg("GET-MASTER-ADDR-BY-NAME")
            .arg(&self.name)
            .query_async(&mut s)
            .await?;
        Ok(format!("{host}:{port}"))
    }

    /// A connection to the current primary.
    pub async fn connect(&self) -> RedisResult<MultiplexedConnection> {
        let address = self.address().await?;
        redis::Client::open(format!("redis://{address}"))?
            .get_multiplexed_async_connection()
            .await
    }
}

/// Appends `what` to the list `log` only if the leader key `leader_key`
/// still names `pod`, in one script on the current primary. `false`: `pod`
/// is not the leader there (any more) and must step down.
pub async fn act_as_leader(
    conn: &mut MultiplexedConnection,
    leader_key: &str,
    pod: &str,
    log: &str,
    what: &str,
) -> RedisResult<bool> {
    let done: i64 = Script::new(LEADER_ACT)
        .key(leader_key)
        .key(log)
        .arg(pod)
        .arg(what)
        .invoke_async(conn)
        .await?;
    Ok(done == 1)
}
