//! The canonical scripts as one Redis 7 function library
//! (`scripts/lua/coordis.lua`), loaded once with FUNCTION LOAD and called
//! with FCALL: the way coordination libraries written for Redis 7 ship
//! their lock and semaphore logic.

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::RedisResult;

/// The library's code.
pub const LIBRARY: &str = include_str!("../../scripts/lua/coordis.lua");

/// Loads (or replaces) the library; returns its name.
pub async fn load(conn: &mut MultiplexedConnection) -> RedisResult<String> {
    redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg("REPLACE")
        .arg(LIBRARY)
        .query_async(conn)
        .await
}

async fn fcall<T: redis::FromRedisValue>(
    conn: &mut MultiplexedConnection,
    function: &str,
    keys: &[&str],
    args: &[String],
) -> RedisResult<T> {
    redis::cmd("FCALL")
        .arg(function)
        .arg(keys.len())
        .arg(keys)
        .arg(args)
        .query_async(conn)
        .await
}

fn ms(d: Duration) -> String {
    d.as_millis().to_string()
}

/// A lock taken, released and extended through the library's functions.
#[derive(Clone, Debug)]
pub struct FunctionLock {
    pub key: String,
}

impl FunctionLock {
    /// True if `owner` took it.
    pub async fn acquire(&self, conn: &mut MultiplexedConnection, owner: &str, ttl: Duration) -> RedisResult<bool> {
        let n: i64 = fcall(conn, "coordis_acquire", &[&self.key], &[owner.into(), ms(ttl)]).await?;
        Ok(n == 1)
    }

    /// True if `owner` held it and it is released.
    pub async fn release(&self, conn: &mut MultiplexedConnection, owner: &str) -> RedisResult<bool> {
        let n: i64 = fcall(conn, "coordis_unlock", &[&self.key], &[owner.into()]).await?;
        Ok(n == 1)
    }

    /// True if `owner` holds it and its lease is now `ttl`.
    pub async fn extend(&self, conn: &mut MultiplexedConnection, owner: &str, ttl: Duration) -> RedisResult<bool> {
        let n: i64 = fcall(conn, "coordis_extend", &[&self.key], &[owner.into(), ms(ttl)]).await?;
        Ok(n == 1)
    }
}

/// A sorted-set semaphore of `permits` through the library's functions.
#[derive(Clone, Debug)]
pub struct FunctionSemaphore {
    pub key: String,
    pub permits: usize,
    pub lease: Duration,
}

impl FunctionSemaphore {
    /// True if `holder` has a permit (taken or refreshed) at `now_ms`.
    pub async fn acquire(&self, conn: &mut MultiplexedConnection, holder: &str, now_ms: u64) -> RedisResult<bool> {
        let args = [
            holder.into(),
            self.permits.to_string(),
            ms(self.lease),
            now_ms.to_string(),
        ];
        let n: i64 = fcall(conn, "coordis_semaphore_acquire", &[&self.key], &args).await?;
        Ok(n == 1)
    }

    /// True if `holder` had a permit and gave it back.
    pub async fn release(&self, conn: &mut MultiplexedConnection, holder: &str) -> RedisResult<bool> {
        let n: i64 = fcall(conn, "coordis_semaphore_release", &[&self.key], &[holder.into()]).await?;
        Ok(n == 1)
    }
}

#[cfg(test)]
mod tests {
    /// Each function's body is its script's code word for word: the
    /// library and the scripts cannot drift apart.
    #[test]
    fn the_library_holds_each_canonical_script_verbatim() {
        let scripts = [
            include_str!("../../scripts/lua/unlock.lua"),
            include_str!("../../scripts/lua/extend.lua"),
            include_str!("../../scripts/lua/fenced_acquire.lua"),
            include_str!("../../scripts/lua/semaphore_acquire.lua"),
            include_str!("../../scripts/lua/semaphore_release.lua"),
        ];
        let library: Vec<&str> = super::LIBRARY.lines().map(str::trim).collect();
        for script in scripts {
            let code: Vec<&str> = script
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with("--"))
                .collect();
            assert!(
                library.windows(code.len()).any(|w| w == code.as_slice()),
                "not in coordis.lua verbatim:\n{}",
                code.join("\n")
            );
        }
    }
}
