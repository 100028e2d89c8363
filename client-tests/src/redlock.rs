//! Redlock over N independent servers: try `SET resource owner NX PX ttl`
//! on every server (each with a short timeout; a lost reply is asked again
//! with `SET ... NX GET`, so the client recognises its own lock); the lock
//! is held when a
//! quorum (N/2 + 1) said yes and time is left: validity = ttl − elapsed −
//! drift, with drift = ttl·1% + 2 ms. Otherwise release everywhere and retry
//! after a random delay.

use std::time::{Duration, Instant};

use redis::Script;

const UNLOCK: &str = include_str!("../../scripts/lua/unlock.lua");

pub struct Redlock {
    pub clients: Vec<redis::Client>,
    pub retries: usize,
    pub retry_delay: Duration,
    /// How long one server may take to answer before it counts as down.
    pub node_timeout: Duration,
}

impl Redlock {
    pub fn new(urls: &[String]) -> Redlock {
        Redlock {
            clients: urls
                .iter()
                .map(|u| redis::Client::open(u.as_str()).expect("url"))
                .collect(),
            retries: 3,
            retry_delay: Duration::from_millis(50),
            node_timeout: Duration::from_millis(50),
        }
    }

    pub fn quorum(&self) -> usize {
        self.clients.len() / 2 + 1
    }

    /// `SET resource owner NX PX ttl` on one server. If the reply is lost
    /// (the connection fails: did the SET land?), it asks once more with
    /// `SET ... NX GET`, which answers the value already there: its own
    /// owner id means the first SET landed, and the lock is this client's.
    async fn try_node(&self, client: &redis::Client, resource: &str, owner: &str, ttl: Duration) -> bool {
        let set = |get: bool| async move {
            let mut conn = client.get_multiplexed_async_connection().await?;
            let mut cmd = redis::cmd("SET");
            cmd.arg(resource)
                .arg(owner)
                .arg("NX")
                .arg("PX")
                .arg(ttl.as_millis() as u64);
            if get {
                cmd.arg("GET");
            }
            cmd.query_async::<Option<String>>(&mut conn).await
        };
        match tokio::time::timeout(self.node_timeout, set(false)).await {
            Ok(Ok(reply)) => reply.is_some(),
            Ok(Err(e)) if e.is_connection_dropped() || e.is_io_error() => {
                // With GET, a nil reply means the key was absent (now set).
                let retry = tokio::time::timeout(self.node_timeout, set(true)).await;
                matches!(retry, Ok(Ok(None))) || matches!(retry, Ok(Ok(Some(ref held))) if held == owner)
            }
            _ => false,
        }
    }

    /// Acquires `resource` for `owner`; returns the validity left, or `None`.
    pub async fn lock(&self, resource: &str, owner: &str, ttl: Duration) -> Option<Duration> {
        for _ in 0..self.retries {
            let start = Instant::now();
            let mut granted = 0;
            for client in &self.clients {
                if self.try_node(client, resource, owner, ttl).await {
                    granted += 1;
                }
            }
            let drift = ttl / 100 + Duration::from_millis(2);
            let validity = ttl.checked_sub(start.elapsed() + drift);
            if granted >= self.quorum() {
                if let Some(validity) = validity {
                    return Some(validity);
                }
            }
            self.unlock(resource, owner).await;
            tokio::time::sleep(self.retry_delay.mul_f64(fastrand_jitter())).await;
        }
        None
    }

    /// Releases `resource` on every server where `owner` holds it.
    pub async fn unlock(&self, resource: &str, owner: &str) {
        for client in &self.clients {
            let release = async {
                let mut conn = client.get_multiplexed_async_connection().await?;
                Script::new(UNLOCK)
                    .key(resource)
                    .arg(owner)
                    .invoke_async::<i64>(&mut conn)
                    .await
            };
            let _ = tokio::time::timeout(self.node_timeout, release).await;
        }
    }
}

/// A factor in [0.5, 1.5) so that competing clients do not retry in lockstep.
fn fastrand_jitter() -> f64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    0.5 + (nanos % 1000) as f64 / 1000.0
}
