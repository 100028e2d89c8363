//! Servers that keep their files across a crash, for the persistence
//! recipes: each runs with `appendonly yes` and the `appendfsync` policy
//! the test asks for, and [`Durable::crash`] kills it as `kill -9` would and
//! starts it again on the same files.
//!
//! - `embedded`: coordis in-process, in the directory its builder makes
//!   of its own (a temp dir, removed when it stops: the recipe has no files
//!   to manage); a crash is [`coordis::ServerControl::crash`]: every
//!   connection dropped, the append-only file cut back to what the policy
//!   had made durable, the dataset loaded again from it, on the same port.
//! - `coordis_server`: the `coordis-server` binary in a temp dir; a crash
//!   is `kill -9` and a new process on the same `--dir` (and a new port).
//! - `redis`: `redis-server` 7.0.15 the same way, on the same appendonlydir
//!   (a loud skip without it, a failure with `COORDIS_REQUIRE_REDIS=1`).
//!
//! [`Durable::crash_losing`] stages a power loss that drops the last N ms
//! of writes (`COORDIS.SERVER CRASH LOSE-MS`): coordis only, since a
//! `kill -9` of redis-server loses nothing the kernel already has.
//!
//! [`on_every_durable_backend!`] gives a recipe one `#[tokio::test]` per
//! backend, [`on_durable_backends!`] one per backend it names.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use coordis::testing::{free_port, RawClient, RedisServer, ServerProcess};

/// A backend the persistence recipes run on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Embedded,
    CoordisServer,
    Redis,
}

impl Kind {
    /// The backend a test named `embedded`, `coordis_server` or `redis` runs on.
    pub fn named(name: &str) -> Kind {
        match name {
            "embedded" => Kind::Embedded,
            "coordis_server" => Kind::CoordisServer,
            "redis" => Kind::Redis,
            other => panic!("unknown durable backend {other}"),
        }
    }
}

/// A temporary directory removed on drop (pass or fail).
#[derive(Debug)]
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> std::io::Result<TempDir> {
        let path = std::env::temp_dir().join(format!("coordis-recipe-{tag}-{}-{}", std::process::id(), free_port()?));
        std::fs::create_dir_all(&path)?;
        Ok(TempDir(path))
    }

    fn text(&self) -> &str {
        self.0.to_str().expect("a UTF-8 temp dir")
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[derive(Debug)]
enum Running {
    Embedded(coordis::Server),
    /// The binary, and the directory it and its successors run on.
    Process(ServerProcess, TempDir),
    Redis(RedisServer, TempDir),
}

/// A running backend with `appendonly yes`; stops what it started (and
/// removes its files) when dropped.
#[derive(Debug)]
pub struct Durable {
    kind: Kind,
    fsync: &'static str,
    /// `None` only inside [`Durable::crash`], between the kill and the start.
    running: Option<Running>,
}

impl Durable {
    /// Starts `kind` with `appendonly yes` and `appendfsync fsync`; `None`:
    /// skipped (redis-server is missing, already reported).
    pub async fn start(kind: Kind, fsync: &'static str) -> Option<Durable> {
        let running = match kind {
            Kind::Embedded => {
                let mut builder = coordis::Server::builder();
                let config = builder.config_mut();
                config.apply("appendonly", &["yes".to_string()]).expect("appendonly");
                config.apply("appendfsync", &[fsync.to_string()]).expect("appendfsync");
                Running::Embedded(builder.start().await.expect("start embedded coordis"))
            }
            Kind::CoordisServer => {
                let dir = TempDir::new("coordis").expect("a temp dir");
                let process = tokio::task::block_in_place(|| start_coordis_server(&dir, fsync));
                Running::Process(process, dir)
            }
            Kind::Redis => {
                let dir = TempDir::new("redis").expect("a temp dir");
                let redis = tokio::task::block_in_place(|| start_redis(&dir, fsync))?;
                Running::Redis(redis, dir)
            }
        };
        Some(Durable {
            kind,
            fsync,
            running: Some(running),
        })
    }

    pub fn kind(&self) -> Kind {
        self.kind
    }

    fn running(&self) -> &Running {
        self.running.as_ref().expect("a running server")
    }

    /// `redis://HOST:PORT` of the server running now (a restarted
    /// process listens on a new port).
    pub fn url(&self) -> String {
        match self.running() {
            Running::Embedded(s) => s.url(),
            Running::Process(p, _) => format!("redis://{}", p.addr()),
            Running::Redis(r, _) => r.url(),
        }
    }

    /// A fresh connection to the server running now.
    pub async fn connection(&self) -> redis::aio::MultiplexedConnection {
        redis::Client::open(self.url())
            .expect("valid URL")
            .get_multiplexed_async_connection()
            .await
            .expect("connect")
    }

    /// The directory holding the server's files (`dir`).
    pub fn dir(&self) -> &Path {
        match self.running() {
            Running::Embedded(s) => s.dir(),
            Running::Process(_, d) | Running::Redis(_, d) => &d.0,
        }
    }

    /// The embedded server's test clock (`None` elsewhere).
    pub fn clock(&self) -> Option<coordis::ServerClock> {
        match self.running() {
            Running::Embedded(s) => s.clock(),
            Running::Process(..) | Running::Redis(..) => None,
        }
    }

    /// The server dies as from `kill -9` and starts again from its files:
    /// what `appendfsync` had not made durable is lost (under `always`,
    /// nothing that was acknowledged). Connections to it are gone.
    pub async fn crash(&mut self) {
        let running = self.running.take().expect("a running server");
        let running = tokio::task::block_in_place(|| match running {
            Running::Embedded(s) => {
                s.control().crash(None);
                Running::Embedded(s)
            }
            Running::Process(p, dir) => {
                // ServerProcess's drop is SIGKILL, then a wait.
                drop(p);
                Running::Process(start_coordis_server(&dir, self.fsync), dir)
            }
            Running::Redis(r, dir) => {
                drop(r);
                let again = start_redis(&dir, self.fsync).expect("redis-server started before");
                Running::Redis(again, dir)
            }
        });
        self.running = Some(running);
    }

    /// A power loss that drops every write of the last `lose` of server
    /// time, fsynced or not, then a restart from the files (`COORDIS.SERVER
    /// CRASH LOSE-MS`). coordis only: `None` on redis-server, where no test
    /// can stage it (a `kill -9` loses nothing the kernel has; only a power
    /// or OS failure loses the page cache). Returns the length of the
    /// incremental file kept.
    pub async fn crash_losing(&mut self, lose: Duration) -> Option<u64> {
        match self.running() {
            Running::Embedded(s) => s.control().crash(Some(lose)),
            Running::Process(p, _) => {
                let addr = p.addr();
                let ms = lose.as_millis().to_string();
                tokio::task::block_in_place(|| {
                    let mut c = RawClient::connect(addr).expect("connect");
                    c.send(&RawClient::encode(&[
                        b"COORDIS.SERVER",
                        b"CRASH",
                        b"LOSE-MS",
                        ms.as_bytes(),
                    ]))
                    .expect("send CRASH");
                    let reply = c.read_to_close().expect("the server closes the connection");
                    assert_eq!(reply, b"", "no reply: the server crashed");
                });
                // Its length is on disk.
                Some(
                    std::fs::metadata(self.last_incr_file())
                        .expect("the incremental file")
                        .len(),
                )
            }
            Running::Redis(..) => None,
        }
    }

    /// The newest incremental file of the append-only directory, as the
    /// manifest names it.
    pub fn last_incr_file(&self) -> PathBuf {
        let aof_dir = self.dir().join("appendonlydir");
        let manifest = std::fs::read_to_string(aof_dir.join("appendonly.aof.manifest")).expect("the AOF manifest");
        let name = manifest
            .lines()
            .filter(|l| l.ends_with(" type i"))
            .rev()
            .find_map(|l| l.split(' ').nth(1))
            .expect("an incremental file in the manifest")
            .to_string();
        aof_dir.join(name)
    }

    /// Stops the server and removes its files.
    pub async fn stop(mut self) {
        match self.running.take() {
            Some(Running::Embedded(s)) => s.shutdown().await,
            other => drop(other),
        }
    }
}

fn start_coordis_server(dir: &TempDir, fsync: &str) -> ServerProcess {
    let mut cmd = Command::new(coordis_server_bin());
    cmd.args([
        "--appendonly",
        "yes",
        "--appendfsync",
        fsync,
        "--enable-test-commands",
        "yes",
        "--dir",
        dir.text(),
    ]);
    ServerProcess::start(cmd).expect("start coordis-server")
}

fn start_redis(dir: &TempDir, fsync: &str) -> Option<RedisServer> {
    RedisServer::start(&["--appendonly", "yes", "--appendfsync", fsync, "--dir", dir.text()])
        .expect("start redis-server")
}

/// The workspace's `coordis-server`, built (once per test process) into
/// the target directory the running test came from, as cargo would: the
/// recipes need the real binary to `kill -9`. `COORDIS_SERVER_BIN`
/// names another one.
pub fn coordis_server_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(path) = std::env::var_os("COORDIS_SERVER_BIN") {
            return PathBuf::from(path);
        }
        // A test runs as target/<profile>/deps/<name>-<hash>.
        let exe = std::env::current_exe().expect("the test's path");
        let profile_dir = exe
            .parent()
            .and_then(Path::parent)
            .expect("target/<profile>/deps")
            .to_path_buf();
        let target_dir = profile_dir.parent().expect("target/");
        let profile = profile_dir.file_name().and_then(|p| p.to_str()).expect("a profile");
        let mut cargo = Command::new(env!("CARGO"));
        cargo
            .args([
                "build",
                "--quiet",
                "-p",
                "coordis",
                "--bin",
                "coordis-server",
                "--target-dir",
            ])
            .arg(target_dir)
            .current_dir(env!("CARGO_MANIFEST_DIR"));
        match profile {
            "debug" => {}
            "release" => {
                cargo.arg("--release");
            }
            other => {
                cargo.args(["--profile", other]);
            }
        }
        let status = cargo.status().expect("run cargo");
        assert!(
            status.success(),
            "cargo build -p coordis --bin coordis-server: {status}"
        );
        profile_dir.join("coordis-server")
    })
    .clone()
}

/// Defines `mod $name` with one `#[tokio::test]` per backend listed
/// (`embedded`, `coordis_server`, `redis`), each running the async fn
/// `$body(&mut Durable)` on a server started with `appendfsync $fsync`.
#[macro_export]
macro_rules! on_durable_backends {
    ($name:ident, $fsync:expr, $body:path, [$($backend:ident),+]) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $backend() {
                    let kind = $crate::durable::Kind::named(stringify!($backend));
                    let Some(mut backend) = $crate::durable::Durable::start(kind, $fsync).await else {
                        return;
                    };
                    $body(&mut backend).await;
                    backend.stop().await;
                }
            )+
        }
    };
}

/// [`on_durable_backends!`] on all three backends.
#[macro_export]
macro_rules! on_every_durable_backend {
    ($name:ident, $fsync:expr, $body:path) => {
        $crate::on_durable_backends!($name, $fsync, $body, [embedded, coordis_server, redis]);
    };
}
