//! # coordis
//!
//! A Redis-protocol-compatible coordination server: start it inside a Rust
//! test on port 0 (nothing to install), or run the `coordis-server` binary
//! where you would run `redis-server`. Replies are byte-identical to Redis
//! 7.0.15 for every command coordis supports.
//!
//! ## Embedding in an async test
//!
//! ```
//! # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
//! # async fn main() -> std::io::Result<()> {
//! let server = coordis::Server::start().await?; // 127.0.0.1, free port
//! let url = server.url();                        // "redis://127.0.0.1:PORT"
//! # let _ = url;
//! // ... point any Redis client at `server.addr()` ...
//! server.shutdown().await;                       // graceful; Drop also stops it
//! # Ok(())
//! # }
//! ```
//!
//! ## Embedding in a plain `#[test]`
//!
//! ```
//! let server = coordis::Server::builder().requirepass("secret").start_blocking()?;
//! let mut conn = std::net::TcpStream::connect(server.addr())?;
//! # use std::io::{Read, Write};
//! conn.write_all(b"PING\r\n")?;
//! let mut reply = [0u8; 64];
//! let n = conn.read(&mut reply)?;
//! assert_eq!(&reply[..n], b"-NOAUTH Authentication required.\r\n");
//! server.shutdown();
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! # Layout
//!
//! The public API is the embedding API: [`Server`], [`Builder`],
//! [`BlockingServer`], [`Config`], [`Clock`] / [`VirtualClock`] (alias
//! [`ManualClock`]) / [`SystemClock`], [`ServerClock`], [`ServerControl`], [`runtime`] and [`testing`]. Everything else is the
//! crate's own:
//!
//! - `protocol`: RESP request parsing and reply encoding.
//! - `exec`: the execution core: admission (`processCommand`), the one
//!   `call()` around every handler, the answers while a script is busy,
//!   the effects feed.
//! - `cmd`: the command table and one module per command family.
//! - `store`: databases, values, expiry, the clock.
//! - `engine`: the keyspace and server state behind one lock, and running a
//!   batch of commands; `state`: the server-wide state and counters.
//! - `blocked`: clients blocked in BLPOP and friends: per-key queues, serving, timeouts.
//! - `faults`: fault rules (errors, lost requests and replies, hangs, delays) per command, key and client.
//! - `control`: the test-control plane's Rust handles ([`ServerClock`],
//!   [`ServerControl`]); `cmd/coordis.rs` is the same over the wire.
//! - `lua`: the Lua 5.1 VM for EVAL, its sandbox and conversions.
//! - `net`: listeners, connections, shutdown; `net/clients.rs`: per-connection
//!   state; `net/tls.rs`: the rustls configuration the `tls-*` directives make.
//! - [`certs`]: throw-away certificates for TLS tests ([`Builder::tls`]).
//! - `config`: the directive table, redis.conf, CONFIG GET/SET.
//! - `notify`: keyspace notification classes.
//! - `persist`: the RDB and append-only file formats and files.
//! - [`sentinel`]: Sentinel mode ([`sentinel::Sentinel`]): monitoring, failover, its own commands.
//! - `replica`: coordis as a replica: the link to a primary (handshake,
//!   full and partial resync, the stream applied as the primary's client,
//!   ACKs) and what it knows (the primary's replication ID, the offset).
//! - `alloc`: the counting global allocator `used_memory` and `maxmemory` read.
//! - `lazyfree`: the background freeing thread UNLINK, FLUSH ASYNC and the
//!   `lazyfree-lazy-*` directives hand large values and key tables to.
//! - `repl`: replication as a primary: IDs, offset, backlog, PSYNC, replica links, WAIT.
//! - `errors`: every error text, as Redis words it.
//! - `acl`: ACL users and rules, the permission check admission makes, the
//!   ACL log; `cmd/users.rs`: the ACL command family.
//! - [`testing`]: a real `redis-server` launcher and a raw RESP client for tests.
#![warn(unreachable_pub, missing_docs)]

mod acl;
mod alloc;
mod blocked;
pub mod certs;
mod cluster;
mod cmd;
mod config;
mod control;
mod engine;
mod errors;
mod evict;
mod exec;
mod faults;
mod lazyfree;
mod local_cluster;
mod local_replicated;
mod lua;
mod net;
mod notify;
mod persist;
mod process;
mod protocol;
mod repl;
mod replica;
pub mod sentinel;
mod shutdown;
mod state;
mod store;
mod supervised;
#[cfg(feature = "testing")]
pub mod testing;
mod tracking;

/// Internals the project's own benchmarks, fuzz targets and tests reach
/// into. Not part of the API: no stability promise.
#[doc(hidden)]
pub mod internals {
    pub use crate::cmd::all as commands;
    pub use crate::cmd::flags;
    pub use crate::cmd::CommandSpec;
    pub use crate::errors::{strerror, DENIED};
    pub use crate::lua::{sha1_hex, Mode as DispatchMode, ScriptState, Scripting};
    pub use crate::protocol::{ProtocolLimits, Reply, RequestParser};
    pub use crate::replica::role_letter;
    pub use crate::store::zset;
    pub use crate::store::{Db, Value};
    pub use crate::supervised::{notify_systemd, set as set_supervisor, Supervisor};
}

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::sync::oneshot;

use net::clients::CloseSignal;
/// The version coordis reports (HELLO, INFO, Lua's `redis.REDIS_VERSION`):
/// the Redis version whose behaviour it follows, byte for byte.
pub const REDIS_VERSION: &str = "7.0.15";
pub use certs::TestCertificates;
pub(crate) use cmd::tri;
pub use config::{
    AofConfig, ClusterConfig, Config, DisklessLoad, MemoryConfig, ReplConfig, ReplicaConfig, ShutdownFlags, TlsConfig,
};
pub use control::{KeyValue, Keyspace, ReplicaLink, ServerClock, ServerControl};
pub use evict::Policy as EvictionPolicy;
pub use exec::feed::{Op as Effect, Reader as EffectReader, Unit as EffectUnit};
pub use faults::{FaultAction, FaultEntry, FaultRule};
pub use local_cluster::ClusterBuilder;
pub use local_replicated::ReplicatedBuilder;
pub use net::{DRAIN_DEADLINE, SCRIPT_STOP_GRACE};
pub use store::{Clock, ManualClock, SystemClock, VirtualClock};

/// Settings for an embedded server. Defaults: 127.0.0.1, port 0 (a free
/// port), no password, 16 databases, Redis's limits.
#[derive(Debug, Clone)]
pub struct Builder {
    config: Config,
    clock: Arc<dyn Clock>,
    /// The clock again when it is a [`VirtualClock`] (the default): what
    /// [`Server::clock`] moves.
    virtual_clock: Option<Arc<VirtualClock>>,
    /// [`Builder::tls`]: certificates are made at start.
    tls: bool,
}

impl Default for Builder {
    fn default() -> Self {
        let config = Config {
            port: 0,
            enable_test_commands: "local".into(),
            // Empty: a directory of the server's own, made at start
            // (`Builder::dir`).
            dir: String::new(),
            // No automatic saves (`save ""`, as test setups run Redis): a
            // test's server saves when the test says so (SAVE, or `save`
            // points set through `config_mut`), not on every FLUSHALL.
            save_points: Vec::new(),
            ..Config::default()
        };
        let clock = Arc::new(VirtualClock::real());
        Builder {
            config,
            clock: clock.clone(),
            virtual_clock: Some(clock),
            tls: false,
        }
    }
}

impl Builder {
    /// Starts from a full configuration (as `coordis-server` reads it).
    pub fn from_config(config: Config) -> Self {
        Builder {
            config,
            ..Builder::default()
        }
    }

    /// Port to listen on (default 0: a free port the system picks; see [`Server::addr`]).
    pub fn port(mut self, port: u16) -> Self {
        self.config.port = port;
        self
    }

    /// Listen address (default 127.0.0.1).
    pub fn bind(mut self, addr: impl Into<String>) -> Self {
        self.config.bind = vec![addr.into()];
        self
    }

    /// Require `AUTH <password>` (user `default`).
    pub fn requirepass(mut self, password: impl Into<String>) -> Self {
        self.config.requirepass = Some(config::Secret(password.into()));
        self
    }

    /// `maxmemory` in bytes (0, the default: no limit) and the policy that
    /// meets it (`maxmemory-policy`, default `noeviction`: writes that
    /// would grow memory get `-OOM`, nothing is evicted).
    pub fn maxmemory(mut self, bytes: u64, policy: EvictionPolicy) -> Self {
        self.config.memory.maxmemory = bytes;
        self.config.memory.policy = policy;
        self
    }

    /// Number of databases SELECT can reach (`databases`; at least 1).
    pub fn databases(mut self, n: usize) -> Self {
        self.config.databases = n.max(1);
        self
    }

    /// Most clients connected at once (`maxclients`; at least 1).
    pub fn maxclients(mut self, n: usize) -> Self {
        self.config.maxclients = n.max(1);
        self
    }

    /// Replaces the clock every time-reading path uses (expiry, TIME,
    /// blocking timeouts...). With a clock of your own, [`Server::clock`]
    /// has nothing to move; prefer [`Builder::virtual_clock`].
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self.virtual_clock = None;
        self
    }

    /// Uses `clock` (one test clock may drive several servers, for
    /// Redlock). [`Server::clock`] moves it and settles that server.
    pub fn virtual_clock(mut self, clock: Arc<VirtualClock>) -> Self {
        self.clock = clock.clone();
        self.virtual_clock = Some(clock);
        self
    }

    /// Where the server keeps its files (`dir`): the RDB file (loaded at
    /// start when it exists, written by SAVE) and the append-only
    /// directory (`appenddirname`, loaded at start under `appendonly
    /// yes`). The directory is the caller's: the server never removes it,
    /// so a server started again on it loads what the last one wrote.
    ///
    /// Without one, the server makes a fresh directory of its own under
    /// the system's temp dir at start ([`Server::dir`] names it) and
    /// removes it, files and all, once it has stopped: it starts empty,
    /// and a crash staged with [`ServerControl::crash`] restarts from the
    /// files there.
    pub fn dir(mut self, dir: impl Into<String>) -> Self {
        self.config.dir = dir.into();
        self
    }

    /// The server's own directory when no `dir` was given (see
    /// [`Builder::dir`]), now named in the configuration.
    fn own_dir(&mut self) -> io::Result<Option<OwnedDir>> {
        if !self.config.dir.is_empty() {
            return Ok(None);
        }
        let owned = OwnedDir::create()?;
        self.config.dir = owned
            .0
            .to_str()
            .map(String::from)
            .ok_or_else(|| io::Error::other(format!("the temp dir {} is not UTF-8", owned.0.display())))?;
        Ok(Some(owned))
    }

    /// Serves TLS too, on a free port ([`Server::tls_port`]), with
    /// throw-away certificates made at start ([`Server::tls_certificates`]:
    /// the CA to trust, and a client certificate it signed). As Redis's
    /// default `tls-auth-clients yes`, clients must present a certificate;
    /// [`Builder::tls_auth_clients`] relaxes that.
    pub fn tls(mut self) -> Self {
        self.tls = true;
        self
    }

    /// Serves a Unix-domain socket at `path` too (`unixsocket`), beside the
    /// TCP port: a file already there is replaced, and the socket file is
    /// removed at shutdown. [`Server::unix_socket`] names it.
    pub fn unix_socket(mut self, path: impl Into<String>) -> Self {
        self.config.unixsocket = path.into();
        self
    }

    /// `tls-auth-clients`: `yes` (Redis's default), `optional` or `no`.
    pub fn tls_auth_clients(mut self, mode: &str) -> Self {
        self.config.tls.auth_clients = mode.to_ascii_lowercase();
        self
    }

    /// The TLS directives pointed at freshly made certificates (see [`Builder::tls`]).
    fn own_certificates(&mut self) -> io::Result<Option<Arc<TestCertificates>>> {
        if !self.tls {
            return Ok(None);
        }
        let certs = TestCertificates::generate()?;
        let text = |p: PathBuf| p.to_string_lossy().into_owned();
        let tls = &mut self.config.tls;
        tls.free_port = true;
        tls.cert_file = text(certs.server_cert_file());
        tls.key_file = text(certs.server_key_file());
        tls.ca_cert_file = text(certs.ca_cert_file());
        Ok(Some(Arc::new(certs)))
    }

    /// The Unix socket's path (`unixsocket`), if set.
    fn unix_path(&self) -> Option<PathBuf> {
        (!self.config.unixsocket.is_empty()).then(|| PathBuf::from(&self.config.unixsocket))
    }

    /// Mutable access to every setting.
    pub fn config_mut(&mut self) -> &mut Config {
        &mut self.config
    }

    /// Starts the server on threads of its own (a tokio runtime with
    /// `io_threads` workers) and returns once it listens. The caller's
    /// runtime only awaits that: its flavor (`#[tokio::test]` is
    /// single-threaded) and whatever else it runs cannot stall the server.
    pub async fn start(self) -> io::Result<Server> {
        let clock = self.virtual_clock.clone();
        let unix = self.unix_path();
        let (ready_rx, shutdown, thread, dir, certs) = self.spawn()?;
        let (addr, tls_addr, engine) = ready_rx
            .await
            .map_err(|_| io::Error::other("coordis thread exited"))??;
        Ok(Server {
            addr,
            tls_addr,
            unix,
            certs,
            dir,
            shutdown,
            thread: Some(thread),
            control: control::ServerControl { engine, clock },
        })
    }

    /// [`Builder::start`] for code without an async runtime.
    pub fn start_blocking(self) -> io::Result<BlockingServer> {
        let clock = self.virtual_clock.clone();
        let unix = self.unix_path();
        let (ready_rx, shutdown, thread, dir, certs) = self.spawn()?;
        let (addr, tls_addr, engine) = ready_rx
            .blocking_recv()
            .map_err(|_| io::Error::other("coordis thread exited"))??;
        Ok(BlockingServer {
            server: Some(Server {
                addr,
                tls_addr,
                unix,
                certs,
                dir,
                shutdown,
                thread: Some(thread),
                control: control::ServerControl { engine, clock },
            }),
        })
    }

    #[allow(clippy::type_complexity)]
    fn spawn(
        mut self,
    ) -> io::Result<(
        oneshot::Receiver<io::Result<(SocketAddr, Option<SocketAddr>, control::EngineRef)>>,
        Arc<CloseSignal>,
        std::thread::JoinHandle<()>,
        PathBuf,
        Option<Arc<TestCertificates>>,
    )> {
        let owned = self.own_dir()?;
        let certs = self.own_certificates()?;
        let dir = PathBuf::from(&self.config.dir);
        let (ready_tx, ready_rx) = oneshot::channel();
        let shutdown = Arc::new(CloseSignal::default());
        let signal = shutdown.clone();
        let thread = std::thread::Builder::new().name("coordis".into()).spawn(move || {
            let runtime = match runtime(self.config.io_threads) {
                Ok(rt) => rt,
                Err(e) => {
                    let _ = ready_tx.send(Err(e));
                    return;
                }
            };
            runtime.block_on(async move {
                match net::bind(self.config, self.clock, signal.clone()).await {
                    Ok(bound) => {
                        let (addr, tls_addr, engine) = (bound.addr, bound.tls_addr, bound.engine.clone());
                        let ready = move |loaded: io::Result<()>| {
                            let _ = ready_tx.send(loaded.map(|()| (addr, tls_addr, engine)));
                        };
                        bound.serve(signal, ready).await;
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                    }
                }
            });
            // The drain has had its deadline: a worker still inside a script
            // that never returns is left behind, not waited for.
            runtime.shutdown_timeout(net::SCRIPT_STOP_GRACE);
            // Only now are the files closed: the writer thread is gone.
            drop(owned);
        })?;
        Ok((ready_rx, shutdown, thread, dir, certs))
    }

    /// Serves on the current tokio runtime (which must be multi-threaded)
    /// until `stop` resolves or a client sends SHUTDOWN; `on_ready` gets the
    /// bound address and the TLS one (with a TLS port). Build your runtime
    /// with [`runtime`] to serve many busy connections in turn. A server
    /// that stops on an error it cannot recover from returns [`Fatal`]
    /// (in an `io::Error`).
    pub async fn serve(
        self,
        stop: impl Future<Output = ()>,
        on_ready: impl FnOnce(SocketAddr, Option<SocketAddr>),
    ) -> io::Result<()> {
        self.serve_until(stop, None, on_ready).await
    }

    /// [`Builder::serve`] until a client sends SHUTDOWN or a signal from
    /// `signals` shuts the server down as Redis's signal handling does
    /// (what `coordis-server` runs): with the flags of
    /// `shutdown-on-sigint` / `shutdown-on-sigterm`, waiting up to
    /// `shutdown-timeout` for lagging replicas; a final save that fails
    /// without `force` leaves the server running, and the next signal
    /// tries again. `stopping` hears each signal that does stop it, before
    /// the drain.
    pub async fn serve_signals(
        self,
        signals: tokio::sync::mpsc::UnboundedReceiver<StopSignal>,
        stopping: impl FnMut(),
        on_ready: impl FnOnce(SocketAddr, Option<SocketAddr>),
    ) -> io::Result<()> {
        self.serve_until(std::future::pending(), Some((signals, Box::new(stopping))), on_ready)
            .await
    }

    async fn serve_until(
        mut self,
        stop: impl Future<Output = ()>,
        mut signals: Option<SignalFeed<'_>>,
        on_ready: impl FnOnce(SocketAddr, Option<SocketAddr>),
    ) -> io::Result<()> {
        // Removed when serving is over (see `Builder::dir`).
        let _owned = self.own_dir()?;
        let _certs = self.own_certificates()?;
        let shutdown = Arc::new(CloseSignal::default());
        let bound = net::bind(self.config, self.clock, shutdown.clone()).await?;
        let (addr, tls_addr) = (bound.addr, bound.tls_addr);
        let unix = bound.unix_path();
        let engine = bound.engine.clone();
        let shared = bound.shared();
        // Ready once the dataset is loaded, as Redis logs it; a file that
        // fails to load ends serving with its error.
        let mut failed = None;
        {
            let serving = bound.serve(shutdown.clone(), |loaded| match loaded {
                Ok(()) => {
                    on_ready(addr, tls_addr);
                    // After `on_ready`'s "Ready to accept connections", as Redis logs it.
                    if let Some(path) = unix {
                        tracing::info!("{}", crate::errors::unix::ready(&path));
                    }
                }
                Err(e) => failed = Some(e),
            });
            tokio::pin!(serving);
            tokio::pin!(stop);
            loop {
                let signal = async {
                    match signals.as_mut() {
                        Some((rx, _)) => rx.recv().await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    () = &mut serving => {
                        if !shared.aof.fatal.is_closed() {
                            tracing::info!("SHUTDOWN received");
                        }
                        break;
                    }
                    () = &mut stop => {
                        shutdown.close();
                        serving.await;
                        break;
                    }
                    Some(signal) = signal => {
                        if net::signal_shutdown(&engine, &shared, signal).await {
                            if let Some((_, stopping)) = signals.as_mut() {
                                stopping();
                            }
                            shutdown.close();
                            serving.await;
                            break;
                        }
                    }
                }
            }
        }
        if shared.aof.fatal.is_closed() {
            return Err(io::Error::other(Fatal));
        }
        match failed {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// Why [`Builder::serve`] ended when the server stopped on an error it
/// cannot recover from, inside the `io::Error` it returns (the reason is
/// logged): a write or fsync of the append-only file failed under
/// `appendfsync always`, where Redis exits with status 1.
#[derive(Debug)]
pub struct Fatal;

impl std::fmt::Display for Fatal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the server stopped on an error it cannot recover from")
    }
}

impl std::error::Error for Fatal {}

/// The signals [`Builder::serve_signals`] hears, and whom it tells that
/// one stops the server.
type SignalFeed<'a> = (tokio::sync::mpsc::UnboundedReceiver<StopSignal>, Box<dyn FnMut() + 'a>);

/// A signal that asks a server to stop ([`Builder::serve_signals`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopSignal {
    /// SIGINT: `shutdown-on-sigint` says how.
    Interrupt,
    /// SIGTERM: `shutdown-on-sigterm` says how.
    Terminate,
}

/// The directory an embedded server keeps its files in when its builder
/// names none: made at start under the system's temp dir, removed with
/// everything in it once the server has stopped.
#[derive(Debug)]
struct OwnedDir(PathBuf);

impl OwnedDir {
    fn create() -> io::Result<OwnedDir> {
        // Tells apart the servers of one process; a name left by an
        // earlier process with the same pid is skipped.
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let base = std::env::temp_dir();
        loop {
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let path = base.join(format!("coordis-{}-{n}", std::process::id()));
            match std::fs::create_dir(&path) {
                Ok(()) => return Ok(OwnedDir(path)),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
    }
}

impl Drop for OwnedDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Most readiness events one poll of the I/O driver hands to the scheduler
/// (tokio's default: 1024). See [`runtime`].
const IO_EVENTS_PER_POLL: usize = 128;

/// Tasks a worker runs between two non-blocking polls of the I/O driver
/// when it is busy (tokio's default: 61). See [`runtime`].
const TASKS_PER_IO_POLL: u32 = 256;

/// The runtime coordis serves on, embedded or as `coordis-server`:
/// multi-threaded, so that a long script can leave its worker
/// (`block_in_place`) while others keep serving.
///
/// The I/O settings keep the connections served in turn. A tokio worker's
/// local queue holds 256 tasks; woken tasks beyond that move to a global
/// queue that a busy worker visits only now and then, and with 500 busy
/// connections (tokio's defaults) some waited 50–120 ms while the others
/// went round. Handing over at most 128 ready connections per poll, and
/// polling at most every 256 tasks, keeps every woken connection in the
/// local queue, served in the order it became ready, as Redis serves its
/// event loop. `redis-benchmark -c 500 -P 1`: p99 9–52 ms and max 48–127 ms
/// with the defaults, 8.7–10.1 ms and 15–19 ms with these (Redis 7.0.15 in
/// the same runs: 7.2–10.2 ms and 12–20 ms); throughput was unchanged.
///
/// tokio also runs the task woken last by a poll first (its "LIFO slot"),
/// so of two connections that became readable together the later one was
/// served first, about half the time: a request sent on one connection just
/// before another's was executed after it, where Redis serves them in the
/// order they arrived (a blocked XREADGROUP, then a DEL of its stream from
/// another client, got the wrong error). The slot is turned off, which
/// tokio allows only in a build with `--cfg tokio_unstable` (the
/// workspace's `.cargo/config.toml` sets it; a crate that embeds coordis
/// sets it in its own build to get the same order).
pub fn runtime(io_threads: usize) -> io::Result<tokio::runtime::Runtime> {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder
        .worker_threads(io_threads.max(1))
        .max_io_events_per_tick(IO_EVENTS_PER_POLL)
        .event_interval(TASKS_PER_IO_POLL)
        .thread_name("coordis-io")
        .enable_all();
    #[cfg(tokio_unstable)]
    builder.disable_lifo_slot();
    builder.build()
}

/// A running server. Dropping it triggers a shutdown without waiting;
/// [`Server::shutdown`] waits for it to finish.
#[derive(Debug)]
pub struct Server {
    addr: SocketAddr,
    /// The TLS listener's address, with a TLS port.
    tls_addr: Option<SocketAddr>,
    /// The Unix-domain socket's path ([`Builder::unix_socket`]).
    unix: Option<PathBuf>,
    /// [`Builder::tls`]'s certificates (their files live as long as the server).
    certs: Option<Arc<TestCertificates>>,
    /// `dir` as it started: the builder's, or the temp dir of its own.
    dir: PathBuf,
    shutdown: Arc<CloseSignal>,
    thread: Option<std::thread::JoinHandle<()>>,
    control: control::ServerControl,
}

impl Server {
    /// A builder for a server with other settings than [`Server::start`]'s.
    pub fn builder() -> Builder {
        Builder::default()
    }

    /// Starts a server with default settings on 127.0.0.1 and a free port.
    pub async fn start() -> io::Result<Server> {
        Builder::default().start().await
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `redis://HOST:PORT` for client libraries.
    pub fn url(&self) -> String {
        format!("redis://{}", self.addr)
    }

    /// The TLS port ([`Builder::tls`], or a `tls-port` in the config).
    pub fn tls_port(&self) -> Option<u16> {
        self.tls_addr.map(|a| a.port())
    }

    /// `rediss://HOST:PORT` for client libraries, with a TLS port.
    pub fn tls_url(&self) -> Option<String> {
        self.tls_addr.map(|a| format!("rediss://{a}"))
    }

    /// The Unix-domain socket's path ([`Builder::unix_socket`]).
    pub fn unix_socket(&self) -> Option<&Path> {
        self.unix.as_deref()
    }

    /// `redis+unix:///PATH` for client libraries, with a Unix socket.
    pub fn unix_url(&self) -> Option<String> {
        self.unix.as_ref().map(|p| format!("redis+unix://{}", p.display()))
    }

    /// The certificates [`Builder::tls`] made: the CA to trust and a client
    /// certificate it signed, as PEM and as files.
    pub fn tls_certificates(&self) -> Option<&TestCertificates> {
        self.certs.as_deref()
    }

    /// The directory of its files (`dir` at start; see [`Builder::dir`]).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The server's test clock: move it, and the server is settled before
    /// the call returns (see [`ServerClock`]). `None` when the builder was
    /// given a clock of its own ([`Builder::clock`]).
    pub fn clock(&self) -> Option<ServerClock> {
        self.control.clock()
    }

    /// A cloneable handle on this server's test controls (pause, resume,
    /// restart, clock), to move into the task that injects the fault.
    pub fn control(&self) -> ServerControl {
        self.control.clone()
    }

    /// A stop-the-world pause, as a GC pause or a SIGSTOP would make it: the
    /// server stops answering (connections stay open, requests wait), keys
    /// stop expiring and waiters stop timing out, until
    /// [`Server::resume`]. The test clock may still be moved meanwhile.
    pub fn pause(&self) {
        self.control.pause();
    }

    /// Lifts [`Server::pause`]: the waiting requests run, in order.
    pub fn resume(&self) {
        self.control.resume();
    }

    /// Drops every connection, as a restarted server would; with
    /// `lose_data`, the keyspace and the script cache are gone too, as
    /// after a crash of a Redis without persistence. The server keeps
    /// listening on the same port, so clients reconnect.
    pub fn restart(&self, lose_data: bool) {
        self.control.restart(lose_data);
    }

    /// Stops accepting, lets connections finish the batch they are running
    /// (up to [`DRAIN_DEADLINE`]; a script still running then is stopped,
    /// even one that wrote), and returns when the server has stopped.
    pub async fn shutdown(mut self) {
        self.shutdown.close();
        if let Some(thread) = self.thread.take() {
            let _ = tokio::task::spawn_blocking(move || thread.join()).await;
        }
    }

    /// Asks the server to shut down without waiting.
    pub fn trigger_shutdown(&self) {
        self.shutdown.close();
    }

    fn shutdown_blocking(&mut self) {
        self.shutdown.close();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shutdown.close();
    }
}

/// N independent servers on free ports, each with its own keyspace and its
/// own test clock, for Redlock-style tests: fault, pause, take down or move
/// the clock of any subset, by index.
///
/// ```no_run
/// # async fn demo() -> std::io::Result<()> {
/// use coordis::{FaultAction, FaultRule, ServerSet};
/// let set = ServerSet::start(5).await?;
/// let urls = set.urls(); // hand these to the Redlock client
/// set.pause(&[3, 4]); // two of five hang
/// set.add_fault(&[2], FaultRule::new(FaultAction::LoseReply).command("set").times(1));
/// set.clock(0).expect("a test clock").jump_ms(30_000); // one server's clock jumps
/// set.shutdown().await;
/// # Ok(()) }
/// ```
///
/// # A cluster in one process
///
/// [`ServerSet::cluster`] starts the nodes of a Redis Cluster instead
/// (`cluster-enabled yes`, the bus on port + 10000, slots spread evenly
/// over the primaries) and returns once every node reports
/// `cluster_state:ok`; hand [`ServerSet::urls`] to a cluster client as its
/// seed nodes.
///
/// ```no_run
/// # async fn demo() -> std::io::Result<()> {
/// let cluster = coordis::ServerSet::cluster(3, 0).await?;
/// let seeds = cluster.urls(); // "redis://127.0.0.1:PORT", one per node
/// # let _ = seeds;
/// let id = cluster.node_id(0).expect("a cluster node");
/// # let _ = id;
/// let mut cluster = cluster;
/// cluster.stop(2).await; // a primary goes away, bus and all
/// cluster.shutdown().await;
/// # Ok(()) }
/// ```
///
/// # A primary with replicas and Sentinels
///
/// [`ServerSet::replicated`] starts a primary (server 0), its replicas
/// (servers `1..=n`, each following it with `REPLICAOF`) and optionally
/// coordis Sentinels watching it, on one test clock, and returns once
/// every replica's link is up and caught up and every Sentinel sees the
/// primary, its replicas and the other Sentinels. The primary's
/// [`ServerControl`] holds the per-link controls (pause, delay, cut, drop,
/// "the primary dies now", promote).
///
/// ```no_run
/// # async fn demo() -> std::io::Result<()> {
/// let mut set = coordis::ServerSet::replicated_builder(1, 1)
///     .down_after(5_000)
///     .start()
///     .await?;
/// let primary = set.primary_url().expect("a replicated set"); // hand to the client
/// # let _ = primary;
/// let sentinels = set.sentinel_addrs(); // or these, with set.master_name()
/// # let _ = sentinels;
/// set.primary_control().expect("a replicated set").pause_link(0).expect("replica 0's link");
/// set.stop(0).await; // the primary dies; the Sentinel fails over on the clock
/// let clock = set.shared_clock().expect("one clock");
/// clock.advance_ms(6_000); // past down-after-milliseconds: +sdown, +odown
/// set.shutdown().await;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct ServerSet {
    /// A stopped one ([`ServerSet::stop`]) keeps its index.
    servers: Vec<Server>,
    /// What [`ServerSet::cluster`] set up; `None` for independent servers.
    cluster: Option<ClusterInfo>,
    /// What [`ServerSet::replicated`] set up; `None` otherwise.
    replicated: Option<ReplicatedInfo>,
}

/// A replicated set's shape: server 0 is the primary it started with,
/// the others its replicas.
#[derive(Debug)]
struct ReplicatedInfo {
    master_name: String,
    /// The one test clock every server and Sentinel of the set runs on.
    clock: Arc<VirtualClock>,
    sentinels: Vec<sentinel::Sentinel>,
    /// Holds the Sentinels' config files (they rewrite them), removed
    /// with the set. Declared after `sentinels` so they stop first.
    dir: OwnedDir,
}

/// A cluster set's shape.
#[derive(Debug)]
struct ClusterInfo {
    /// Each node's ID (CLUSTER MYID), in index order.
    ids: Vec<String>,
    /// Nodes `0..masters` are the primaries.
    masters: usize,
    /// The one test clock every node of the cluster runs on.
    clock: Arc<VirtualClock>,
}

impl ServerSet {
    /// Starts `n` servers with default settings.
    pub async fn start(n: usize) -> io::Result<ServerSet> {
        let mut servers = Vec::with_capacity(n);
        for _ in 0..n {
            servers.push(Server::start().await?);
        }
        Ok(ServerSet {
            servers,
            cluster: None,
            replicated: None,
        })
    }

    /// Starts a primary with `replicas` replicas and `sentinels` Sentinels
    /// watching it (as `mymaster`, quorum a majority of them, Redis's
    /// default timers on the shared clock), on free ports in one process,
    /// and returns once every replica's link is up at the primary's offset
    /// and every Sentinel sees the primary, its replicas and the other
    /// Sentinels (see [`ReplicatedBuilder::start`]).
    ///
    /// Server 0 is the primary, servers `1..=replicas` its replicas (in
    /// link order: replica `k`'s link is the primary's link `k - 1` only
    /// while they connected in that order; [`ServerControl::replica_links`]
    /// names each link's port). When there are several Sentinels the start
    /// moves the shared clock (a second at a time) until they have heard
    /// of one another, so its time may stand ahead of the wall clock.
    ///
    /// Several Sentinels on one clock see a dead primary at the same
    /// instant, each votes for itself and the election fails, as it would
    /// for real Sentinels with perfectly aligned timers; Redis's retry
    /// (after twice `failover-timeout`) is spread over a random second per
    /// Sentinel. A test that fails over with several Sentinels moves the
    /// clock in steps well under a second (and a short
    /// [`ReplicatedBuilder::failover_timeout`]), letting real time pass
    /// between them for the votes to travel.
    pub async fn replicated(replicas: usize, sentinels: usize) -> io::Result<ServerSet> {
        ReplicatedBuilder::new(replicas, sentinels).start().await
    }

    /// [`ServerSet::replicated`] with other settings (ports, every
    /// server's configuration, the clock, the master name, the quorum and
    /// the Sentinels' timers).
    pub fn replicated_builder(replicas: usize, sentinels: usize) -> ReplicatedBuilder {
        ReplicatedBuilder::new(replicas, sentinels)
    }

    /// A replicated set's primary's URL as it started (server 0); `None`
    /// for other sets.
    pub fn primary_url(&self) -> Option<String> {
        self.replicated.as_ref().map(|_| self.servers[0].url())
    }

    /// The per-link controls of a replicated set's primary as it started
    /// (server 0's [`ServerControl`]: `pause_link`, `delay_link`,
    /// `cut_link`, `drop_writes`, `primary_dies`, `promote_replica`).
    pub fn primary_control(&self) -> Option<ServerControl> {
        self.replicated.as_ref().map(|_| self.servers[0].control())
    }

    /// A replicated set's replicas' URLs as they started (servers
    /// `1..`); empty for other sets.
    pub fn replica_urls(&self) -> Vec<String> {
        match self.replicated {
            Some(_) => self.servers[1..].iter().map(Server::url).collect(),
            None => Vec::new(),
        }
    }

    /// Where a replicated set's Sentinels listen (hand them, with
    /// [`ServerSet::master_name`], to a Sentinel client); empty otherwise.
    pub fn sentinel_addrs(&self) -> Vec<SocketAddr> {
        self.replicated
            .as_ref()
            .map(|r| r.sentinels.iter().map(sentinel::Sentinel::addr).collect())
            .unwrap_or_default()
    }

    /// The name a replicated set's Sentinels monitor the primary under.
    pub fn master_name(&self) -> Option<&str> {
        self.replicated.as_ref().map(|r| r.master_name.as_str())
    }

    /// Sentinel `i` of a replicated set.
    pub fn sentinel(&self, i: usize) -> Option<&sentinel::Sentinel> {
        self.replicated.as_ref().and_then(|r| r.sentinels.get(i))
    }

    /// The test clock every member of a cluster or of a replicated set
    /// (its Sentinels too) runs on; `None` for independent servers.
    pub fn shared_clock(&self) -> Option<Arc<VirtualClock>> {
        self.cluster
            .as_ref()
            .map(|c| c.clock.clone())
            .or_else(|| self.replicated.as_ref().map(|r| r.clock.clone()))
    }

    /// Starts a cluster of `masters` primaries with `replicas_per_master`
    /// replicas each, on free ports in one process, and returns once every
    /// node reports `cluster_state:ok` (see [`ClusterBuilder::start`]).
    ///
    /// The nodes share one test clock. Redis's state delays (a primary
    /// turns `ok` 2 s after its first state check) run on it, and the start
    /// moves it 2.5 s ahead rather than waiting them out: the cluster's
    /// time then stands that far ahead of the wall clock
    /// ([`ClusterBuilder::real_time`] waits instead).
    ///
    /// Each primary's replicas follow the primaries (`primaries()` are the
    /// first indices); they are attached with `CLUSTER REPLICATE` and their
    /// links are up before this returns.
    pub async fn cluster(masters: usize, replicas_per_master: usize) -> io::Result<ServerSet> {
        ClusterBuilder::new(masters, replicas_per_master).start().await
    }

    /// [`ServerSet::cluster`] with other settings (ports, every node's
    /// configuration, the clock).
    pub fn cluster_builder(masters: usize, replicas_per_master: usize) -> ClusterBuilder {
        ClusterBuilder::new(masters, replicas_per_master)
    }

    /// Node `i`'s cluster ID; `None` for independent servers.
    pub fn node_id(&self, i: usize) -> Option<&str> {
        self.cluster.as_ref().map(|c| c.ids[i].as_str())
    }

    /// Indices of the cluster's primaries (the first nodes; each primary's
    /// replicas follow them); empty for independent servers.
    pub fn primaries(&self) -> std::ops::Range<usize> {
        0..self.cluster.as_ref().map_or(0, |c| c.masters)
    }

    /// The test clock every node of a cluster runs on.
    pub fn cluster_clock(&self) -> Option<Arc<VirtualClock>> {
        self.cluster.as_ref().map(|c| c.clock.clone())
    }

    /// Stops server `i` for good and waits: its port and (in a cluster) its
    /// bus stop answering, so the other nodes see it fail after
    /// `cluster-node-timeout`. Its index stays; stopping it again does nothing.
    pub async fn stop(&mut self, i: usize) {
        let server = &mut self.servers[i];
        server.shutdown.close();
        if let Some(thread) = server.thread.take() {
            let _ = tokio::task::spawn_blocking(move || thread.join()).await;
        }
    }

    /// Number of servers in the set.
    pub fn len(&self) -> usize {
        self.servers.len()
    }

    /// Whether the set has no server.
    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }

    /// Every server's `redis://` URL, in index order.
    pub fn urls(&self) -> Vec<String> {
        self.servers.iter().map(Server::url).collect()
    }

    /// Server `i`.
    pub fn server(&self, i: usize) -> &Server {
        &self.servers[i]
    }

    /// Server `i`'s test clock.
    pub fn clock(&self, i: usize) -> Option<ServerClock> {
        self.servers[i].clock()
    }

    /// Stop-the-world pauses the servers in `which` ([`Server::pause`]).
    pub fn pause(&self, which: &[usize]) {
        for &i in which {
            self.servers[i].pause();
        }
    }

    /// Resumes the servers in `which`.
    pub fn resume(&self, which: &[usize]) {
        for &i in which {
            self.servers[i].resume();
        }
    }

    /// Plays the servers in `which` down, or brings them back
    /// ([`ServerControl::set_down`]).
    pub fn set_down(&self, which: &[usize], down: bool) {
        for &i in which {
            self.servers[i].control().set_down(down);
        }
    }

    /// Adds `rule` to each server in `which`; the rule ids, in that order.
    pub fn add_fault(&self, which: &[usize], rule: FaultRule) -> Vec<u64> {
        which
            .iter()
            .map(|&i| self.servers[i].control().add_fault(rule.clone()))
            .collect()
    }

    /// Removes every fault rule everywhere and resumes every server.
    pub fn heal(&self) {
        for s in &self.servers {
            s.control().clear_faults();
            s.control().set_down(false);
            s.resume();
        }
    }

    /// Shuts every Sentinel and server down and waits.
    pub async fn shutdown(self) {
        if let Some(r) = self.replicated {
            for s in r.sentinels {
                s.shutdown().await;
            }
        }
        for s in self.servers {
            s.shutdown().await;
        }
    }
}

/// A running server for synchronous code; dropping it shuts it down and
/// waits.
#[derive(Debug)]
pub struct BlockingServer {
    server: Option<Server>,
}

impl BlockingServer {
    /// See [`Server::addr`].
    pub fn addr(&self) -> SocketAddr {
        self.server.as_ref().expect("running").addr()
    }

    /// See [`Server::url`].
    pub fn url(&self) -> String {
        self.server.as_ref().expect("running").url()
    }

    /// See [`Server::dir`].
    pub fn dir(&self) -> &Path {
        self.server.as_ref().expect("running").dir()
    }

    /// See [`Server::tls_port`].
    pub fn tls_port(&self) -> Option<u16> {
        self.server.as_ref().expect("running").tls_port()
    }

    /// See [`Server::unix_socket`].
    pub fn unix_socket(&self) -> Option<&Path> {
        self.server.as_ref().expect("running").unix_socket()
    }

    /// See [`Server::unix_url`].
    pub fn unix_url(&self) -> Option<String> {
        self.server.as_ref().expect("running").unix_url()
    }

    /// See [`Server::tls_certificates`].
    pub fn tls_certificates(&self) -> Option<&TestCertificates> {
        self.server.as_ref().expect("running").tls_certificates()
    }

    /// See [`Server::clock`].
    pub fn clock(&self) -> Option<ServerClock> {
        self.server.as_ref().expect("running").clock()
    }

    /// See [`Server::control`].
    pub fn control(&self) -> ServerControl {
        self.server.as_ref().expect("running").control()
    }

    /// See [`Server::pause`].
    pub fn pause(&self) {
        self.server.as_ref().expect("running").pause()
    }

    /// See [`Server::resume`].
    pub fn resume(&self) {
        self.server.as_ref().expect("running").resume()
    }

    /// See [`Server::restart`].
    pub fn restart(&self, lose_data: bool) {
        self.server.as_ref().expect("running").restart(lose_data)
    }

    /// Shuts down gracefully and waits for it.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        if let Some(mut server) = self.server.take() {
            server.shutdown_blocking();
        }
    }
}

impl Drop for BlockingServer {
    fn drop(&mut self) {
        self.stop();
    }
}
