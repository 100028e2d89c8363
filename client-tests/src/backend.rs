//! Backends a test runs against. One test body, one `#[tokio::test]` per
//! backend (see [`on_every_backend!`]):
//!
//! - `embedded`: coordis started in-process on a free port;
//! - `redis`: `redis-server` from PATH on a free loopback port (a loud skip
//!   without it, a failure with `COORDIS_REQUIRE_REDIS=1`);
//! - `external`: the server at `COORDIS_TEST_URL`, when that is set.
//!
//! [`TlsBackend`] and [`on_every_tls_backend!`] are the same over TLS with
//! client certificates required (Redis's `tls-auth-clients yes`): embedded
//! coordis with `Builder::tls()`, and `redis-server --tls-port` with
//! throw-away certificates of the same kind.

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

    /// The server's process id, to read its resident set with
    /// `coordis::testing::rss_kb`: the test's own process for the embedded
    /// backend (the server lives in it), redis-server's for the redis
    /// backend; `None` for an external server (its process is not known here).
    pub fn server_pid(&self) -> Option<u32> {
        match self {
            Backend::Embedded(_) => Some(std::process::id()),
            Backend::Redis(r) => Some(r.pid()),
            Backend::External(_) => None,
        }
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

/// A backend serving TLS (see the module docs); stops what it started when dropped.
pub struct TlsBackend {
    /// Keeps the server running.
    _server: Backend,
    /// The certificate files of a redis-server (it reads them at start;
    /// removed on drop). The embedded server owns its own.
    _certs: Option<coordis::TestCertificates>,
    tls_port: u16,
    ca_cert_pem: String,
    client_cert_pem: String,
    client_key_pem: String,
}

impl TlsBackend {
    /// `rediss://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("rediss://127.0.0.1:{}", self.tls_port)
    }

    /// A client trusting the backend's CA, presenting the CA-signed client
    /// certificate when `with_certificate`.
    pub fn client(&self, with_certificate: bool) -> redis::Client {
        let certs = redis::TlsCertificates {
            client_tls: with_certificate.then(|| redis::ClientTlsConfig {
                client_cert: self.client_cert_pem.as_bytes().to_vec(),
                client_key: self.client_key_pem.as_bytes().to_vec(),
            }),
            root_cert: Some(self.ca_cert_pem.as_bytes().to_vec()),
        };
        redis::Client::build_with_tls(self.url(), certs).expect("valid TLS settings")
    }

    /// A fresh async connection with the client certificate.
    pub async fn connection(&self) -> redis::aio::MultiplexedConnection {
        self.client(true)
            .get_multiplexed_async_connection()
            .await
            .expect("connect over TLS")
    }
}

/// Starts the TLS backend `name` (`embedded` or `redis`); `None` means
/// "skip" (already reported).
pub async fn start_tls(name: &str) -> Option<TlsBackend> {
    match name {
        "embedded" => {
            let server = coordis::Builder::default()
                .tls()
                .start()
                .await
                .expect("start embedded coordis with TLS");
            let tls_port = server.tls_port().expect("a TLS port");
            let certs = server.tls_certificates().expect("generated certificates");
            let (ca_cert_pem, client_cert_pem, client_key_pem) = (
                certs.ca_cert_pem.clone(),
                certs.client_cert_pem.clone(),
                certs.client_key_pem.clone(),
            );
            Some(TlsBackend {
                _server: Backend::Embedded(server),
                _certs: None,
                tls_port,
                ca_cert_pem,
                client_cert_pem,
                client_key_pem,
            })
        }
        "redis" => {
            let certs = coordis::TestCertificates::generate().expect("certificates");
            let tls_port = coordis::testing::free_port().expect("a free port");
            let file = |p: std::path::PathBuf| p.to_string_lossy().into_owned();
            let args = [
                "--tls-port".to_string(),
                tls_port.to_string(),
                "--tls-cert-file".into(),
                file(certs.server_cert_file()),
                "--tls-key-file".into(),
                file(certs.server_key_file()),
                "--tls-ca-cert-file".into(),
                file(certs.ca_cert_file()),
            ];
            let server = tokio::task::spawn_blocking(move || {
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                RedisServer::start(&args).expect("start redis-server with TLS")
            })
            .await
            .expect("redis starter")?;
            Some(TlsBackend {
                _server: Backend::Redis(server),
                tls_port,
                ca_cert_pem: certs.ca_cert_pem.clone(),
                client_cert_pem: certs.client_cert_pem.clone(),
                client_key_pem: certs.client_key_pem.clone(),
                _certs: Some(certs),
            })
        }
        other => panic!("unknown TLS backend {other}"),
    }
}

/// [`on_every_backend!`] over TLS: one `#[tokio::test]` per TLS backend,
/// each running `$body` (an async closure taking `&TlsBackend`).
#[macro_export]
macro_rules! on_every_tls_backend {
    ($name:ident, $body:expr) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            async fn run(backend_name: &str) {
                let Some(backend) = $crate::backend::start_tls(backend_name).await else {
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
        }
    };
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
