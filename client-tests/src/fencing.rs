//! Fencing tokens: acquiring the lock also takes the next value of a
//! counter (INCR, in one script with the SET NX), and the protected resource
//! refuses writes carrying a token lower than the last one it accepted, so a
//! holder that stalled past its lease cannot overwrite newer work.

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{RedisResult, Script};

const FENCED_ACQUIRE: &str = include_str!("../../scripts/lua/fenced_acquire.lua");
const FENCED_WRITE: &str = include_str!("../../scripts/lua/fenced_write.lua");

/// Takes `lock` for `owner`; returns the fencing token, or `None` if it is held.
pub async fn acquire(
    conn: &mut MultiplexedConnection,
    lock: &str,
    owner: &str,
    ttl: Duration,
) -> RedisResult<Option<i64>> {
    Script::new(FENCED_ACQUIRE)
        .key(lock)
        .key(format!("{lock}:token"))
        .arg(owner)
        .arg(ttl.as_millis() as u64)
        .invoke_async(conn)
        .await
}

/// Writes `value` to `resource` with `token`. `Err` with code `STALE` when
/// a newer token has already written.
pub async fn write(conn: &mut MultiplexedConnection, resource: &str, token: i64, value: &str) -> RedisResult<()> {
    let _: String = Script::new(FENCED_WRITE)
        .key(resource)
        .key(format!("{resource}:token"))
        .arg(token)
        .arg(value)
        .invoke_async(conn)
        .await?;
    Ok(())
}
