//! Backends a test runs against. One test body, one `#[tokio::test]` per
//! backend (see [`on_every_backend!`]):
//!
//! - `embedded`: coordis started in-process on a free port;
//! - `redis`: `redis-server` from PATH on a free loopback port (a loud skip
//!   without it, a failure with `COORDIS_REQUIRE_REDIS=1`);
//! - `external`: the server at `COORDIS_TEST_URL`, when that is set.

use coordis::testing::RedisServer;

/// A running backend; stops what it started when dropped.
pub enum Backend {
    Embedded(coordis::Server),
    Redis(RedisServer),
    External(String),
}

impl Backend {
    pub fn url(&self) -> String {
        match self {
            Backend::Embedded(s) => s.url(),
            Backend::Redis(r) => r.url(),
            Backend::External(url) => url.clone(),
        }
    }

    /// Stops the server (if this harness started it) and waits until it is down.
    pub async fn stop(self) {
        match self {
            Backend::Embedded(s) => s.shutdown().await,
            Backend::Redis(r) => drop(r),
            Backend::External(_) => {}
        }
    }

    /// The server's test controls (clock, pause, restart, faults): only the
    /// embedded backend has them. A test that needs them prints one line
    /// saying it is skipped elsewhere.
    pub fn test_control(&self) -> Option<coordis::ServerControl> {
        match self {
            Backend::Embedded(s) => Some(s.control()),
            Backend::Redis(_) | Backend::External(_) => {
                eprintln!("SKIPPED on this backend: the test needs coordis's test controls (Redis has none)");
                None
            }
        }
    }

    /// The server's test clock ([`Backend::test_control`]'s).
    pub fn test_clock(&self) -> Option<coordis::ServerClock> {
        self.test_control().and_then(|c| c.clock())
    }

    /// A client for this backend.
    pub fn client(&self) -> redis::Client {
        redis::Client::open(self.url()).expect("valid URL")
    }

    /// A fresh async connection.
    pub async fn connection(&self) -> redis::aio::MultiplexedConnection {
        self.client().get_multiplexed_async_connection().await.expect("connect")
    }
}

/// Starts the backend `name`; `None` means "skip" (already reported).
pub async fn start(name: &str) -> Option<Backend> {
    match name {
        "embedded" => Some(Backend::Embedded(
            coordis::Server::start().await.expect("start embedded coordis"),
        )),
        "redis" => tokio::task::spawn_blocking(|| RedisServer::start(&[]).expect("start redis-server"))
            .await
            .expect("redis starter")
            .map(Backend::Redis),
        "external" => match std::env::var("COORDIS_TEST_URL") {
            Ok(url) if !url.is_empty() => Some(Backend::External(url)),
            _ => {
                eprintln!("SKIPPED external backend: COORDIS_TEST_URL is not set");
                None
            }
        },
        other => panic!("unknown backend {other}"),
    }
}

/// Defines `mod $name` with one `#[tokio::test]` per backend, each running
/// `$body` (an async closure taking `&Backend`).
#[macro_export]
macro_rules! on_every_backend {
    ($name:ident, $body:expr) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            async fn run(backend_name: &str) {
                let Some(backend) = $crate::backend::start(backend_name).await else {
                    return;
                };
                let body = $body;
                body(&backend).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn embedded() {
                run("embedded").await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn redis() {
                run("redis").await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn external() {
                run("external").await;
            }
        }
    };
}
