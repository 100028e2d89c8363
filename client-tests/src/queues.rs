//! The shapes lock, rate-limit and job-queue libraries build from hashes,
//! lists and sets (their scripts are in `scripts/lua/`):
//!
//! - [`ReentrantLock`]: a Redisson-style hash lock: the field is the holder,
//!   its value the re-entry count; release publishes on a channel.
//! - [`SignalLock`]: a lock whose release pushes a token onto a signal list,
//!   so waiters take turns by popping it (here without blocking).
//! - [`sliding_window`]: a rate limiter keeping admitted call times in a list.
//! - [`JobQueue`]: jobs in hashes, a pending list moved to a processing list
//!   (RPOPLPUSH, the reliable-queue pattern) and a set of live job ids.

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{RedisResult, Script};

const REENTRANT_ACQUIRE: &str = include_str!("../../scripts/lua/reentrant_acquire.lua");
const REENTRANT_RELEASE: &str = include_str!("../../scripts/lua/reentrant_release.lua");
const UNLOCK_SIGNAL: &str = include_str!("../../scripts/lua/unlock_signal.lua");
const SLIDING_WINDOW: &str = include_str!("../../scripts/lua/sliding_window.lua");

/// A re-entrant lock held in a hash (`holder -> count`).
#[derive(Clone, Debug)]
pub struct ReentrantLock {
    pub key: String,
    /// Where a full release is published.
    pub channel: String,
    pub holder: String,
    pub lease: Duration,
}

/// What a release did.
#[derive(Debug, PartialEq, Eq)]
pub enum Release {
    /// The lock is free (and the release was published).
    Released,
    /// This holder still holds it (it had re-entered).
    StillHeld,
    /// This holder did not hold it.
    NotHeld,
}

impl ReentrantLock {
    /// Takes or re-enters the lock: `Ok(None)` when held now, else the
    /// other holder's remaining lease.
    pub async fn acquire(&self, conn: &mut MultiplexedConnection) -> RedisResult<Option<i64>> {
        Script::new(REENTRANT_ACQUIRE)
            .key(&self.key)
            .arg(self.lease.as_millis() as u64)
            .arg(&self.holder)
            .invoke_async(conn)
            .await
    }

    pub async fn release(&self, conn: &mut MultiplexedConnection) -> RedisResult<Release> {
        let r: Option<i64> = Script::new(REENTRANT_RELEASE)
            .key(&self.key)
            .key(&self.channel)
            .arg(self.lease.as_millis() as u64)
            .arg(&self.holder)
            .invoke_async(conn)
            .await?;
        Ok(match r {
            None => Release::NotHeld,
            Some(0) => Release::StillHeld,
            Some(_) => Release::Released,
        })
    }
}

/// A lock whose release wakes one waiter through a signal list.
#[derive(Clone, Debug)]
pub struct SignalLock {
    pub key: String,
    pub signal: String,
}

impl SignalLock {
    pub async fn try_acquire(&self, conn: &mut MultiplexedConnection, owner: &str, ttl: Duration) -> RedisResult<bool> {
        let r: Option<String> = redis::cmd("SET")
            .arg(&self.key)
            .arg(owner)
            .arg("NX")
            .arg("PX")
            .arg(ttl.as_millis() as u64)
            .query_async(conn)
            .await?;
        Ok(r.is_some())
    }

    /// Releases if `owner` holds it, pushing one wake-up token.
    pub async fn release(&self, conn: &mut MultiplexedConnection, owner: &str) -> RedisResult<bool> {
        let r: i64 = Script::new(UNLOCK_SIGNAL)
            .key(&self.key)
            .key(&self.signal)
            .arg(owner)
            .invoke_async(conn)
            .await?;
        Ok(r == 1)
    }

    /// Takes a wake-up token if one is waiting.
    pub async fn take_signal(&self, conn: &mut MultiplexedConnection) -> RedisResult<bool> {
        let token: Option<String> = redis::cmd("RPOP").arg(&self.signal).query_async(conn).await?;
        Ok(token.is_some())
    }
}

/// Admits a call at `now_ms` if fewer than `limit` were admitted in the
/// `window` before it.
pub async fn sliding_window(
    conn: &mut MultiplexedConnection,
    key: &str,
    now_ms: u64,
    window: Duration,
    limit: u32,
) -> RedisResult<bool> {
    let admitted: i64 = Script::new(SLIDING_WINDOW)
        .key(key)
        .arg(now_ms)
        .arg(window.as_millis() as u64)
        .arg(limit)
        .invoke_async(conn)
        .await?;
    Ok(admitted == 1)
}

/// A job queue: `job:<id>` hashes, `<name>:pending` and `<name>:processing`
/// lists, and the `<name>:jobs` set of ids not yet finished.
#[derive(Clone, Debug)]
pub struct JobQueue {
    pub name: String,
}

impl JobQueue {
    fn pending(&self) -> String {
        format!("{}:pending", self.name)
    }
    fn processing(&self) -> String {
        format!("{}:processing", self.name)
    }
    fn jobs(&self) -> String {
        format!("{}:jobs", self.name)
    }
    fn job(&self, id: &str) -> String {
        format!("{}:job:{id}", self.name)
    }

    pub async fn enqueue(&self, conn: &mut MultiplexedConnection, id: &str, payload: &str) -> RedisResult<()> {
        redis::pipe()
            .atomic()
            .cmd("HSET")
            .arg(self.job(id))
            .arg("payload")
            .arg(payload)
            .arg("state")
            .arg("queued")
            .arg("attempts")
            .arg(0)
            .ignore()
            .cmd("SADD")
            .arg(self.jobs())
            .arg(id)
            .ignore()
            .cmd("LPUSH")
            .arg(self.pending())
            .arg(id)
            .ignore()
            .query_async(conn)
            .await
    }

    /// Moves the oldest pending job to processing and returns its id.
    pub async fn claim(&self, conn: &mut MultiplexedConnection) -> RedisResult<Option<String>> {
        let id: Option<String> = redis::cmd("RPOPLPUSH")
            .arg(self.pending())
            .arg(self.processing())
            .query_async(conn)
            .await?;
        if let Some(id) = &id {
            redis::pipe()
                .cmd("HSET")
                .arg(self.job(id))
                .arg("state")
                .arg("active")
                .ignore()
                .cmd("HINCRBY")
                .arg(self.job(id))
                .arg("attempts")
                .arg(1)
                .ignore()
                .query_async::<()>(conn)
                .await?;
        }
        Ok(id)
    }

    /// Marks a claimed job done: out of processing and of the live set.
    pub async fn complete(&self, conn: &mut MultiplexedConnection, id: &str) -> RedisResult<()> {
        redis::pipe()
            .atomic()
            .cmd("LREM")
            .arg(self.processing())
            .arg(1)
            .arg(id)
            .ignore()
            .cmd("SREM")
            .arg(self.jobs())
            .arg(id)
            .ignore()
            .cmd("HSET")
            .arg(self.job(id))
            .arg("state")
            .arg("done")
            .ignore()
            .query_async(conn)
            .await
    }

    /// Puts every job left in processing (its worker died) back in pending.
    pub async fn reap(&self, conn: &mut MultiplexedConnection) -> RedisResult<usize> {
        let mut moved = 0;
        loop {
            let id: Option<String> = redis::cmd("RPOPLPUSH")
                .arg(self.processing())
                .arg(self.pending())
                .query_async(conn)
                .await?;
            match id {
                Some(_) => moved += 1,
                None => return Ok(moved),
            }
        }
    }

    pub async fn job_field(
        &self,
        conn: &mut MultiplexedConnection,
        id: &str,
        field: &str,
    ) -> RedisResult<Option<String>> {
        redis::cmd("HGET").arg(self.job(id)).arg(field).query_async(conn).await
    }

    /// Ids not yet finished.
    pub async fn live(&self, conn: &mut MultiplexedConnection) -> RedisResult<usize> {
        redis::cmd("SCARD").arg(self.jobs()).query_async(conn).await
    }
}
