//! Counting semaphores with K permits.
//!
//! - [`KeySemaphore`]: permit `i` is the key `<name>:<i>`, taken with
//!   `SET NX PX`; a crashed holder's permit frees when its key expires.
//! - [`ZSetSemaphore`]: one sorted set of holders scored by acquisition
//!   time; acquiring drops holders older than the lease and joins if fewer
//!   than K remain, all in one Lua script (scripts/lua/semaphore_acquire.lua).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redis::aio::MultiplexedConnection;
use redis::{RedisResult, Script};

const ACQUIRE: &str = include_str!("../../scripts/lua/semaphore_acquire.lua");
const RELEASE: &str = include_str!("../../scripts/lua/semaphore_release.lua");
const UNLOCK: &str = include_str!("../../scripts/lua/unlock.lua");
const EXTEND: &str = include_str!("../../scripts/lua/extend.lua");

/// K keys, one per permit.
#[derive(Clone, Debug)]
pub struct KeySemaphore {
    pub name: String,
    pub permits: usize,
    pub lease: Duration,
}

impl KeySemaphore {
    /// Tries each permit once; returns the permit index taken.
    pub async fn acquire(&self, conn: &mut MultiplexedConnection, holder: &str) -> RedisResult<Option<usize>> {
        for i in 1..=self.permits {
            let taken: Option<String> = redis::cmd("SET")
                .arg(format!("{}:{i}", self.name))
                .arg(holder)
                .arg("NX")
                .arg("PX")
                .arg(self.lease.as_millis() as u64)
                .query_async(conn)
                .await?;
            if taken.is_some() {
                return Ok(Some(i));
            }
        }
        Ok(None)
    }

    /// Gives back permit `i` if `holder` still has it.
    pub async fn release(&self, conn: &mut MultiplexedConnection, holder: &str, i: usize) -> RedisResult<bool> {
        let n: i64 = Script::new(UNLOCK)
            .key(format!("{}:{i}", self.name))
            .arg(holder)
            .invoke_async(conn)
            .await?;
        Ok(n == 1)
    }

    /// Renews permit `i`'s lease if `holder` still has it.
    pub async fn refresh(&self, conn: &mut MultiplexedConnection, holder: &str, i: usize) -> RedisResult<bool> {
        let n: i64 = Script::new(EXTEND)
            .key(format!("{}:{i}", self.name))
            .arg(holder)
            .arg(self.lease.as_millis() as u64)
            .invoke_async(conn)
            .await?;
        Ok(n == 1)
    }
}

/// One sorted set of holders.
#[derive(Clone, Debug)]
pub struct ZSetSemaphore {
    pub name: String,
    pub permits: usize,
    pub lease: Duration,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

impl ZSetSemaphore {
    /// Takes a permit (or refreshes the one `holder` has). True on success.
    pub async fn acquire(&self, conn: &mut MultiplexedConnection, holder: &str) -> RedisResult<bool> {
        let n: i64 = Script::new(ACQUIRE)
            .key(&self.name)
            .arg(holder)
            .arg(self.permits)
            .arg(self.lease.as_millis() as u64)
            .arg(now_ms())
            .invoke_async(conn)
            .await?;
        Ok(n == 1)
    }

    /// Renews `holder`'s permit; false if it has none (its lease ran out).
    pub async fn refresh(&self, conn: &mut MultiplexedConnection, holder: &str) -> RedisResult<bool> {
        let score: Option<f64> = redis::cmd("ZSCORE")
            .arg(&self.name)
            .arg(holder)
            .query_async(conn)
            .await?;
        if score.is_none() {
            return Ok(false);
        }
        self.acquire(conn, holder).await
    }

    pub async fn release(&self, conn: &mut MultiplexedConnection, holder: &str) -> RedisResult<bool> {
        let n: i64 = Script::new(RELEASE)
            .key(&self.name)
            .arg(holder)
            .invoke_async(conn)
            .await?;
        Ok(n == 1)
    }
}
