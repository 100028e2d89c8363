//! A fixed-window rate limiter (INCR + EXPIRE) and a barrier (INCR arrived,
//! wait until N have).

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::RedisResult;

/// Admits at most `limit` calls per `window` for `key`.
pub async fn rate_limit(
    conn: &mut MultiplexedConnection,
    key: &str,
    limit: i64,
    window: Duration,
) -> RedisResult<bool> {
    let (count,): (i64,) = redis::pipe()
        .atomic()
        .cmd("INCR")
        .arg(key)
        .cmd("PEXPIRE")
        .arg(key)
        .arg(window.as_millis() as u64)
        .arg("NX")
        .ignore()
        .query_async(conn)
        .await?;
    Ok(count <= limit)
}

/// Registers arrival at barrier `key` and waits (polling every `poll`)
/// until `n` parties have arrived. Returns the arrival order (1-based).
pub async fn barrier(conn: &mut MultiplexedConnection, key: &str, n: i64, poll: Duration) -> RedisResult<i64> {
    let order: i64 = redis::cmd("INCR").arg(key).query_async(conn).await?;
    loop {
        let arrived: i64 = redis::cmd("GET").arg(key).query_async(conn).await?;
        if arrived >= n {
            return Ok(order);
        }
        tokio::time::sleep(poll).await;
    }
}
