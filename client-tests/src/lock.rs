//! A lock with an owner: `SET key owner NX PX ttl` to acquire; release and
//! extend by Lua scripts that check the owner first, so a holder whose lease
//! ran out (a "zombie") cannot release or extend someone else's lock.
//!
//! The scripts are the ones in `scripts/lua/`; `redis::Script` sends EVALSHA
//! and falls back to EVAL on `NOSCRIPT`. Any async connection will do: a
//! plain one, or a cluster client's (which follows `-MOVED` and `-ASK`).

use std::time::Duration;

use redis::aio::ConnectionLike;
use redis::{RedisResult, Script};

const UNLOCK: &str = include_str!("../../scripts/lua/unlock.lua");
const EXTEND: &str = include_str!("../../scripts/lua/extend.lua");

/// A lock key and the owner id of this holder (unique per holder).
#[derive(Clone, Debug)]
pub struct Lock {
    pub key: String,
    pub owner: String,
}

impl Lock {
    pub fn new(key: impl Into<String>, owner: impl Into<String>) -> Lock {
        Lock {
            key: key.into(),
            owner: owner.into(),
        }
    }

    /// Tries once to take the lock for `ttl`. True if this holder now has it.
    pub async fn acquire(&self, conn: &mut impl ConnectionLike, ttl: Duration) -> RedisResult<bool> {
        let reply: Option<String> = redis::cmd("SET")
            .arg(&self.key)
            .arg(&self.owner)
            .arg("NX")
            .arg("PX")
            .arg(ttl.as_millis() as u64)
            .query_async(conn)
            .await?;
        Ok(reply.is_some())
    }

    /// Releases the lock if this holder still owns it. True if it did.
    pub async fn release(&self, conn: &mut impl ConnectionLike) -> RedisResult<bool> {
        let released: i64 = Script::new(UNLOCK)
            .key(&self.key)
            .arg(&self.owner)
            .invoke_async(conn)
            .await?;
        Ok(released == 1)
    }

    /// Extends the lease to `ttl` if this holder still owns the lock.
    pub async fn extend(&self, conn: &mut impl ConnectionLike, ttl: Duration) -> RedisResult<bool> {
        let extended: i64 = Script::new(EXTEND)
            .key(&self.key)
            .arg(&self.owner)
            .arg(ttl.as_millis() as u64)
            .invoke_async(conn)
            .await?;
        Ok(extended == 1)
    }

    /// The WRONG way to release, kept to show why: between the GET and the
    /// DEL the lease can expire and another holder take the lock, which this
    /// DEL then removes.
    pub async fn naive_release(&self, conn: &mut impl ConnectionLike, pause: Duration) -> RedisResult<bool> {
        let holder: Option<String> = redis::cmd("GET").arg(&self.key).query_async(conn).await?;
        if holder.as_deref() != Some(self.owner.as_str()) {
            return Ok(false);
        }
        tokio::time::sleep(pause).await;
        let deleted: i64 = redis::cmd("DEL").arg(&self.key).query_async(conn).await?;
        Ok(deleted == 1)
    }

    /// Who holds `key` now, if anyone.
    pub async fn holder(conn: &mut impl ConnectionLike, key: &str) -> RedisResult<Option<String>> {
        redis::cmd("GET").arg(key).query_async(conn).await
    }
}
