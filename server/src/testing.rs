//! Helpers for tests that talk to coordis and to a real Redis side by side.
//!
//! - [`RedisServer`] starts `redis-server` from PATH on a free loopback port
//!   (`--save '' --appendonly no`, its own temp `--dir`) and stops it on
//!   drop. It never touches a server it did not start, and refuses one that
//!   is not Redis 7.0.x (the reference), naming the version it found.
//! - [`RawClient`] sends raw bytes and reads back exactly one RESP reply frame
//!   (split with the `redis-protocol` crate), for byte-for-byte assertions.
//! - [`require_redis`] says whether a missing redis-server is a failure
//!   (`COORDIS_REQUIRE_REDIS=1`) or a loud skip.
//! - [`LocalEngine`] runs commands on an engine directly, without a socket:
//!   the same code path as a connection's batch, for fuzzing and model tests.
//! - For the effects feed (what a write propagates): [`ReplicationCapture`]
//!   records a real Redis primary's replication stream as commands,
//!   [`parse_commands`] splits coordis's feed (the same RESP bytes) the same
//!   way, and [`normalize_times`] masks the absolute times in which two
//!   recordings differ. [`dataset`] reads two servers key by key with plain
//!   commands, and [`compare_datasets`] lists how they differ;
//!   [`compare_digests`] compares two whole datasets in one call by `DEBUG
//!   DIGEST` (naming the keys whose `DIGEST-VALUE` differs when they do).
//! - [`fuzz`]: the bodies of the cargo-fuzz targets, so the checked-in corpus
//!   also runs as a normal test.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// True when `COORDIS_REQUIRE_REDIS=1`: tests must fail, not skip, without Redis.
pub fn require_redis() -> bool {
    std::env::var("COORDIS_REQUIRE_REDIS").is_ok_and(|v| v == "1")
}

/// A free TCP port on 127.0.0.1 (bound then released).
pub fn free_port() -> io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// The cluster hash slot of `key` (CRC16 of its hash tag, as Redis's
/// `keyHashSlot`), for tests that place keys in the slots they move.
pub fn key_slot(key: &[u8]) -> u16 {
    crate::cluster::slot::key_slot(key)
}

/// The Redis release line every reply byte is compared against: a
/// `redis-server` whose version does not start with this is refused.
pub const REFERENCE_REDIS_LINE: &str = "7.0.";

/// A `redis-server` child process owned by the test.
#[derive(Debug)]
pub struct RedisServer {
    child: Child,
    addr: SocketAddr,
    /// `redis_version` as the running server reported it (INFO server), or
    /// as `redis-server --version` printed it when INFO needs a password.
    version: String,
    /// The server's `--dir`: a full sync (SYNC from [`ReplicationCapture`])
    /// writes an RDB file there, which must not land in the test's cwd.
    dir: std::path::PathBuf,
}

impl RedisServer {
    /// Starts `redis-server` from PATH with extra arguments (in its own temp
    /// `--dir`, removed on drop). `Ok(None)` when it is not installed and
    /// `COORDIS_REQUIRE_REDIS` is not set (a skip line is printed to stderr);
    /// with it set, a missing Redis panics. A `redis-server` that is not
    /// 7.0.x (the reference) is an error naming the version found.
    pub fn start(extra_args: &[&str]) -> io::Result<Option<RedisServer>> {
        Self::start_with(None, extra_args)
    }

    /// [`RedisServer::start`] reading the config file `config` first (as
    /// `redis-server <config> --port ...`), then the same flags.
    pub fn start_with_config(config: &std::path::Path, extra_args: &[&str]) -> io::Result<Option<RedisServer>> {
        Self::start_with(Some(config), extra_args)
    }

    fn start_with(config: Option<&std::path::Path>, extra_args: &[&str]) -> io::Result<Option<RedisServer>> {
        let which = Command::new("redis-server")
            .arg("--version")
            .stderr(Stdio::null())
            .output();
        let Ok(which) = which else {
            if require_redis() {
                panic!("COORDIS_REQUIRE_REDIS=1 but redis-server is not on PATH");
            }
            eprintln!("\n*** SKIPPED: redis-server is not on PATH; the real-Redis leg did not run (set COORDIS_REQUIRE_REDIS=1 to make this a failure) ***\n");
            return Ok(None);
        };
        // "Redis server v=7.0.15 sha=... malloc=..."
        let printed = String::from_utf8_lossy(&which.stdout).into_owned();
        let claimed = printed
            .split_whitespace()
            .find_map(|w| w.strip_prefix("v="))
            .unwrap_or("<unknown>")
            .to_string();
        check_reference_version(&claimed, "redis-server --version")?;
        let mut last_err = None;
        for _ in 0..5 {
            let port = free_port()?;
            let dir = std::env::temp_dir().join(format!("coordis-test-redis-{}-{port}", std::process::id()));
            std::fs::create_dir_all(&dir)?;
            let mut child = Command::new("redis-server")
                .args(config)
                .args([
                    "--port",
                    &port.to_string(),
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                    "--daemonize",
                    "no",
                ])
                .arg("--dir")
                .arg(&dir)
                .args(extra_args)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()?;
            let addr: SocketAddr = ([127, 0, 0, 1], port).into();
            if wait_for_ping(&mut child, addr, Duration::from_secs(5)) {
                let mut server = RedisServer {
                    child,
                    addr,
                    version: claimed.clone(),
                    dir,
                };
                match server_version(addr) {
                    Ok(running) => {
                        // Drop stops the server if it is refused.
                        check_reference_version(&running, "INFO server")?;
                        server.version = running;
                    }
                    // A server with a password: --version has to do.
                    Err(e) if e.to_string().contains("NOAUTH") => {}
                    Err(e) => return Err(e),
                }
                return Ok(Some(server));
            }
            let _ = child.kill();
            let _ = child.wait();
            let _ = std::fs::remove_dir_all(&dir);
            last_err = Some(io::Error::other(format!("redis-server did not start on port {port}")));
        }
        Err(last_err.unwrap_or_else(|| io::Error::other("redis-server did not start")))
    }

    /// The address it listens on (127.0.0.1).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `redis://HOST:PORT` for client libraries.
    pub fn url(&self) -> String {
        format!("redis://{}", self.addr)
    }

    /// The process id (for a test that stops and continues it with signals).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The running server's `redis_version` (always 7.0.x: see [`RedisServer::start`]).
    pub fn version(&self) -> &str {
        &self.version
    }

    /// Waits up to `timeout` for the server to exit by itself (after
    /// SHUTDOWN, say); `None`: still running.
    pub fn wait_exit(&mut self, timeout: Duration) -> io::Result<Option<std::process::ExitStatus>> {
        wait_exit(&mut self.child, timeout)
    }
}

/// Process `pid`'s resident set size in KiB, from `/proc/<pid>/status`
/// (Linux): a redis-server's ([`RedisServer::pid`]), a coordis-server's, or
/// the test's own, which an embedded server lives in.
pub fn rss_kb(pid: u32) -> io::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or_else(|| io::Error::other("no VmRSS line"))
}

/// Polls `child` until it exits or `timeout` passes.
fn wait_exit(child: &mut Child, timeout: Duration) -> io::Result<Option<std::process::ExitStatus>> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(Some(status));
        }
        if Instant::now() >= deadline {
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// An error naming `found` (and where it was read) unless it is on the
/// reference line.
fn check_reference_version(found: &str, source: &str) -> io::Result<()> {
    if found.starts_with(REFERENCE_REDIS_LINE) {
        return Ok(());
    }
    let what = if require_redis() {
        "COORDIS_REQUIRE_REDIS=1 and "
    } else {
        ""
    };
    Err(io::Error::other(format!(
        "{what}redis-server reports version {found} ({source}); the tests compare against Redis {REFERENCE_REDIS_LINE}x, so it is refused"
    )))
}

/// `redis_version` from `INFO server` on the server at `addr` (coordis
/// answers it too). An error carries the server's error reply.
pub fn server_version(addr: SocketAddr) -> io::Result<String> {
    let mut c = RawClient::connect(addr)?;
    let reply = c.command(&["INFO", "server"])?;
    if reply.starts_with(b"-") {
        return Err(io::Error::other(String::from_utf8_lossy(&reply).trim_end().to_string()));
    }
    String::from_utf8_lossy(&reply)
        .lines()
        .find_map(|l| l.strip_prefix("redis_version:"))
        .map(|v| v.trim().to_string())
        .ok_or_else(|| io::Error::other("INFO server has no redis_version line"))
}

/// Polls `addr` with PING until it answers or `child` exits or `timeout` passes.
fn wait_for_ping(child: &mut Child, addr: SocketAddr, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return false;
        }
        if let Ok(mut c) = RawClient::connect(addr) {
            // A server with a password answers NOAUTH: it is up all the same.
            if c.command(&["PING"])
                .is_ok_and(|r| r == b"+PONG\r\n" || r.starts_with(b"-NOAUTH"))
            {
                return true;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// A directory under the system's temp dir for one test, removed on drop
/// (pass or fail): `coordis-<tag>-<pid>-<n>`, unique within the process.
/// The path is `.0`.
#[derive(Debug)]
pub struct TempDir(pub std::path::PathBuf);

impl TempDir {
    /// Makes the directory.
    ///
    /// # Panics
    /// When it cannot be created (a test cannot go on without it).
    pub fn new(tag: &str) -> TempDir {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("coordis-{tag}-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&path).unwrap_or_else(|e| panic!("cannot create {}: {e}", path.display()));
        TempDir(path)
    }

    /// The path as text (for `--dir` and `dir`).
    ///
    /// # Panics
    /// When the temp dir's path is not UTF-8.
    pub fn text(&self) -> &str {
        self.0.to_str().expect("a UTF-8 temp dir")
    }

    /// `dump.rdb` inside it (Redis's default `dbfilename`).
    pub fn dump(&self) -> std::path::PathBuf {
        self.0.join("dump.rdb")
    }

    /// `appendonlydir` inside it (Redis's default `appenddirname`).
    pub fn aof_dir(&self) -> std::path::PathBuf {
        self.0.join("appendonlydir")
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A server process a test started (`coordis-server`, usually) on a free
/// loopback port. Its stderr is collected by a thread, so a chatty server
/// never blocks on a full pipe. Killed on drop.
#[derive(Debug)]
pub struct ServerProcess {
    child: Child,
    addr: SocketAddr,
    stderr: std::sync::Arc<std::sync::Mutex<String>>,
    /// The `--dir` made for it (removed on drop); `None` when the test
    /// gave its own.
    own_dir: Option<std::path::PathBuf>,
}

impl ServerProcess {
    /// Runs `command` with `--port <free port>` appended (and `--save ""`
    /// unless it sets `--save`, and a `--dir` of its own, removed on drop,
    /// unless it sets `--dir`: a test's server neither loads nor leaves a
    /// dump.rdb or an appendonlydir in the working directory) and waits
    /// until it answers PING.
    pub fn start(mut command: Command) -> io::Result<ServerProcess> {
        let port = free_port()?;
        if !command.get_args().any(|a| a == "--save") {
            command.args(["--save", ""]);
        }
        let mut own_dir = None;
        if !command.get_args().any(|a| a == "--dir") {
            let dir = std::env::temp_dir().join(format!("coordis-test-server-{}-{port}", std::process::id()));
            std::fs::create_dir_all(&dir)?;
            command.arg("--dir").arg(&dir);
            own_dir = Some(dir);
        }
        let mut child = command
            .args(["--port", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()?;
        let stderr = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        if let Some(mut pipe) = child.stderr.take() {
            let sink = stderr.clone();
            std::thread::spawn(move || {
                let mut chunk = [0u8; 4096];
                while let Ok(n @ 1..) = pipe.read(&mut chunk) {
                    sink.lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push_str(&String::from_utf8_lossy(&chunk[..n]));
                }
            });
        }
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        let mut process = ServerProcess {
            child,
            addr,
            stderr,
            own_dir,
        };
        if !wait_for_ping(&mut process.child, addr, Duration::from_secs(10)) {
            return Err(io::Error::other(format!(
                "server did not start on port {port}: {}",
                process.stderr_text()
            )));
        }
        Ok(process)
    }

    /// The address it listens on (127.0.0.1).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Resident set size in KiB, from `/proc/<pid>/status` (Linux).
    pub fn rss_kb(&self) -> io::Result<u64> {
        rss_kb(self.child.id())
    }

    /// What the server wrote to stderr so far.
    pub fn stderr_text(&self) -> String {
        self.stderr.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Sends SIGTERM and waits up to `timeout` for the exit status (`None`:
    /// still running).
    pub fn terminate(&mut self, timeout: Duration) -> io::Result<Option<std::process::ExitStatus>> {
        self.signal(libc::SIGTERM, timeout)
    }

    /// Sends SIGINT (Ctrl-C in a terminal) and waits up to `timeout` for
    /// the exit status (`None`: still running).
    pub fn interrupt(&mut self, timeout: Duration) -> io::Result<Option<std::process::ExitStatus>> {
        self.signal(libc::SIGINT, timeout)
    }

    fn signal(&mut self, signal: libc::c_int, timeout: Duration) -> io::Result<Option<std::process::ExitStatus>> {
        // SAFETY: kill(2) on the pid of a child this value owns and has not reaped.
        if unsafe { libc::kill(self.child.id() as libc::pid_t, signal) } != 0 {
            return Err(io::Error::last_os_error());
        }
        self.wait_exit(timeout)
    }

    /// Waits up to `timeout` for the server to exit by itself (after
    /// SHUTDOWN, say); `None`: still running.
    pub fn wait_exit(&mut self, timeout: Duration) -> io::Result<Option<std::process::ExitStatus>> {
        wait_exit(&mut self.child, timeout)
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(dir) = &self.own_dir {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// Sends `input` on a new connection and reads until the server closes
/// (`<closed>` is appended) or stays quiet for `quiet`.
pub fn exchange(addr: SocketAddr, input: &[u8], quiet: Duration) -> Vec<u8> {
    match TcpStream::connect(addr) {
        Ok(s) => exchange_on(s, input, quiet),
        Err(_) => b"<refused>".to_vec(),
    }
}

/// [`exchange`] on a connection the caller opened.
pub fn exchange_on(mut s: TcpStream, input: &[u8], quiet: Duration) -> Vec<u8> {
    let mut out = vec![];
    let _ = s.set_read_timeout(Some(quiet));
    if s.write_all(input).is_err() {
        out.extend_from_slice(b"<write failed>");
    }
    let mut chunk = [0u8; 4096];
    loop {
        match s.read(&mut chunk) {
            Ok(n @ 1..) => out.extend_from_slice(&chunk[..n]),
            Ok(0) => {
                out.extend_from_slice(b"<closed>");
                return out;
            }
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => {
                out.extend_from_slice(b"<closed>");
                return out;
            }
            Err(_) => return out,
        }
    }
}

/// Connects to `addr`, runs one command (waiting up to 5 s for its reply)
/// and returns the reply's raw RESP bytes as text. A test helper: it panics
/// on an I/O error.
pub fn command_text(addr: SocketAddr, args: &[&str]) -> String {
    let mut c = RawClient::connect(addr).expect("connect");
    c.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("set a read timeout");
    String::from_utf8_lossy(&c.command(args).expect("a reply")).into_owned()
}

/// A blocking connection that reads replies as raw bytes, one frame at a time.
#[derive(Debug)]
pub struct RawClient {
    stream: TcpStream,
    buf: Vec<u8>,
    /// Decode replies as RESP3 (after `HELLO 3`). Set by [`RawClient::command`]
    /// when it sees a successful HELLO.
    pub resp3: bool,
}

impl RawClient {
    /// Connects (5 s timeout; replies wait at most 10 s), in RESP2.
    pub fn connect(addr: SocketAddr) -> io::Result<RawClient> {
        let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
        stream.set_read_timeout(Some(Duration::from_secs(10)))?;
        stream.set_nodelay(true)?;
        Ok(RawClient {
            stream,
            buf: Vec::new(),
            resp3: false,
        })
    }

    /// Encodes arguments as a RESP multibulk request.
    pub fn encode(args: &[&[u8]]) -> Vec<u8> {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            out.extend_from_slice(a);
            out.extend_from_slice(b"\r\n");
        }
        out
    }

    /// Writes raw bytes, unframed (for malformed or pipelined input).
    pub fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes)
    }

    /// Sends one command and returns its reply's bytes.
    pub fn command(&mut self, args: &[&str]) -> io::Result<Vec<u8>> {
        let raw: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        self.command_bytes(&raw)
    }

    /// Sends one command of binary arguments and returns its reply's bytes;
    /// a successful `HELLO 2|3` switches how replies are read.
    pub fn command_bytes(&mut self, args: &[&[u8]]) -> io::Result<Vec<u8>> {
        self.send(&Self::encode(args))?;
        // HELLO's own reply already uses the protocol it asks for.
        let before = self.resp3;
        if args.len() >= 2 && args[0].eq_ignore_ascii_case(b"hello") {
            self.resp3 = args[1] == b"3";
        }
        let reply = self.read_reply()?;
        if reply.starts_with(b"-") {
            self.resp3 = before;
        }
        Ok(reply)
    }

    /// Reads exactly one reply frame.
    pub fn read_reply(&mut self) -> io::Result<Vec<u8>> {
        loop {
            let decoded = if self.resp3 {
                redis_protocol::resp3::decode::complete::decode(&self.buf).map(|o| o.map(|(_, n)| n))
            } else {
                redis_protocol::resp2::decode::decode(&self.buf).map(|o| o.map(|(_, n)| n))
            };
            match decoded {
                Ok(Some(n)) => return Ok(self.buf.drain(..n).collect()),
                Ok(None) => {}
                Err(e) => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("{e:?}: {:?}", String::from_utf8_lossy(&self.buf)),
                    ))
                }
            }
            let mut chunk = [0u8; 16384];
            let n = self.stream.read(&mut chunk)?;
            if n == 0 {
                return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed"));
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// Changes how long [`RawClient::read_reply`] waits for bytes.
    pub fn set_read_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.stream.set_read_timeout(timeout)
    }

    /// The value of `field` in `INFO section`, trimmed. A test helper: it
    /// panics on an I/O error, an error reply or a missing field.
    pub fn info_field(&mut self, section: &str, field: &str) -> String {
        let reply = self.command(&["INFO", section]).expect("INFO answers");
        let info = String::from_utf8_lossy(&reply);
        assert!(!info.starts_with('-'), "INFO {section}: {info}");
        info.lines()
            .find_map(|l| l.strip_prefix(field).and_then(|rest| rest.strip_prefix(':')))
            .unwrap_or_else(|| panic!("no {field} in INFO {section}: {info}"))
            .trim()
            .to_string()
    }

    /// Reads until the peer closes and returns whatever arrived (for
    /// protocol-error tests, where the server replies and then closes).
    pub fn read_to_close(&mut self) -> io::Result<Vec<u8>> {
        let mut out = std::mem::take(&mut self.buf);
        self.stream.read_to_end(&mut out)?;
        Ok(out)
    }
}

/// One client's view of the engine driven without
/// a listener. Each [`LocalEngine::run`] is one batch, exactly as a
/// connection task runs a read's requests.
pub struct LocalEngine {
    engine: crate::engine::Engine,
    requests: crate::protocol::Requests,
    /// Each client's outbox: where the reply to a blocking command lands.
    outboxes: std::collections::HashMap<u64, std::sync::Arc<crate::net::clients::Outbox>>,
    /// The clock the engine was made with.
    clock: std::sync::Arc<dyn crate::store::Clock>,
}

impl LocalEngine {
    /// An engine with `config` and `clock`, and one connected client (id 1).
    pub fn new(config: crate::Config, clock: std::sync::Arc<dyn crate::store::Clock>) -> LocalEngine {
        use std::sync::Arc;
        let engine = crate::engine::Engine::new(
            config,
            clock.clone(),
            0,
            Arc::new(crate::state::Shared::default()),
            Arc::new(crate::net::clients::CloseSignal::default()),
        );
        let mut local = LocalEngine {
            engine,
            requests: Default::default(),
            outboxes: Default::default(),
            clock,
        };
        local.connect();
        local
    }

    /// Connects another client and returns its id.
    pub fn connect(&mut self) -> u64 {
        use std::sync::Arc;
        let id = self.outboxes.len() as u64 + 1;
        let addr: SocketAddr = ([127, 0, 0, 1], 0).into();
        let signal = Arc::new(crate::net::clients::ConnSignal::default());
        let outbox = crate::net::clients::Outbox::new(signal.clone());
        let now = self.clock.now_ms();
        self.engine.connect(crate::net::clients::ClientState::new(
            id,
            addr,
            addr,
            now,
            signal,
            outbox.clone(),
        ));
        self.outboxes.insert(id, outbox);
        id
    }

    /// Runs one batch for client `id` as its connection would: the replies,
    /// and whether its last command blocked it (nothing more of it runs
    /// until it is served, times out or is unblocked: see
    /// [`LocalEngine::received`]).
    pub fn run_as(&mut self, id: u64, requests: Vec<Vec<bytes::Bytes>>) -> (Vec<u8>, bool) {
        let mut queue = crate::protocol::Requests::default();
        requests.into_iter().for_each(|r| queue.push_back(r));
        let mut out = bytes::BytesMut::new();
        let end = self
            .engine
            .batch()
            .run(id, Vec::new(), &mut queue, &mut None, usize::MAX, &mut out);
        (out.to_vec(), end.blocked)
    }

    /// What reached client `id` outside its batches (the reply a blocked
    /// client got when served, timed out or unblocked; published messages).
    pub fn received(&mut self, id: u64) -> Vec<u8> {
        self.outboxes.get(&id).map_or_else(Vec::new, |o| o.take().concat())
    }

    /// Answers the blocked clients whose timeout passed on the clock, as
    /// the server's timer task does.
    pub fn expire_blocked(&mut self) {
        self.engine.expire_blocked();
    }

    /// Runs `requests` as one batch and returns the encoded replies, and
    /// whether the connection would now be closed. With no other client to
    /// serve it, a command that blocks is answered as its timeout would
    /// answer it (and a CLIENT PAUSE that holds the client is ended).
    pub fn run(&mut self, requests: Vec<Vec<bytes::Bytes>>) -> (Vec<u8>, bool) {
        requests.into_iter().for_each(|r| self.requests.push_back(r));
        let mut out = bytes::BytesMut::new();
        let mut no_error = None;
        while !self.requests.is_empty() {
            let batch = self
                .engine
                .batch()
                .run(1, Vec::new(), &mut self.requests, &mut no_error, usize::MAX, &mut out);
            if batch.close {
                self.requests = Default::default();
                return (out.to_vec(), true);
            }
            if batch.blocked {
                self.engine.end_block(1);
                out.extend_from_slice(&self.received(1));
            }
        }
        (out.to_vec(), false)
    }

    /// Whether the client's replies are turned off (CLIENT REPLY OFF, or
    /// SKIP for the next command).
    pub fn replies_suppressed(&self) -> bool {
        self.engine.replies_suppressed(1)
    }

    /// Runs one command and returns its reply.
    pub fn command(&mut self, args: &[&[u8]]) -> Vec<u8> {
        let args = args.iter().map(|a| bytes::Bytes::copy_from_slice(a)).collect();
        self.run(vec![args]).0
    }
}

/// The fuzz targets' bodies (`server/fuzz`). They live here so that
/// `tests/fuzz_corpus.rs` can replay the checked-in corpus on every test run
/// without a nightly toolchain.
pub mod fuzz {
    use std::sync::{Arc, OnceLock};

    use bytes::{Bytes, BytesMut};

    use super::LocalEngine;
    use crate::protocol::{ProtocolLimits, RequestParser};
    use crate::store::ManualClock;

    type Parsed = (Vec<Vec<Bytes>>, Option<String>);

    fn parse_in_pieces(input: &[u8], piece: usize, limits: &ProtocolLimits) -> Parsed {
        let mut parser = RequestParser::new();
        let mut buf = BytesMut::new();
        let mut out = Vec::new();
        for chunk in input.chunks(piece) {
            buf.extend_from_slice(chunk);
            loop {
                match parser.next(&mut buf, limits) {
                    Ok(Some(req)) => out.push(req),
                    Ok(None) => break,
                    Err(e) => return (out, Some(e)),
                }
            }
        }
        (out, None)
    }

    /// The request parser on arbitrary bytes. Besides never panicking,
    /// parsing must not depend on how the bytes are split into reads: the
    /// input fed in one piece and in pieces (sized by the first byte, whose
    /// top bit also selects the pre-AUTH limits) give the same requests and
    /// the same error.
    pub fn parse(data: &[u8]) {
        let Some((&first, input)) = data.split_first() else {
            return;
        };
        let limits = ProtocolLimits {
            pre_auth: first & 0x80 != 0,
            ..ProtocolLimits::default()
        };
        let whole = parse_in_pieces(input, input.len().max(1), &limits);
        let pieces = parse_in_pieces(input, (first & 0x7f) as usize + 1, &limits);
        // A "too big" error depends on how much is buffered when the parser
        // looks; everything else must agree exactly.
        let too_big = |p: &Parsed| p.1.as_deref().is_some_and(|e| e.contains("too big"));
        if too_big(&whole) || too_big(&pieces) {
            return;
        }
        assert_eq!(whole, pieces);
    }

    fn names() -> &'static [&'static str] {
        static NAMES: OnceLock<Vec<&'static str>> = OnceLock::new();
        NAMES.get_or_init(|| {
            let skip = ["eval", "evalsha", "eval_ro", "evalsha_ro", "shutdown"];
            crate::cmd::all()
                .map(|c| c.name)
                .filter(|n| !skip.contains(n))
                .collect()
        })
    }

    /// Arbitrary command arrays through an engine without a socket.
    /// Requests are separated by 0x00 and arguments by 0x01; a request's
    /// first byte picks the command name from the command table, so every
    /// handler is reached. Scripting commands are left out (a fuzzed `while
    /// true do end` would only test the time limit, which the scripting
    /// tests cover), as is SHUTDOWN. Byte 0x02 at the start of a request
    /// moves the clock forward, to reach expiry paths. Every command must get
    /// a reply, except where CLIENT REPLY turns replies off.
    pub fn dispatch(data: &[u8]) {
        let clock = Arc::new(ManualClock::at_ms(1_700_000_000_000));
        // Keep single values small: SETRANGE at a 512 MB offset is legal, and
        // slow, and not what this target looks for.
        let config = crate::Config {
            proto_max_bulk_len: 1024 * 1024,
            ..crate::Config::default()
        };
        let mut engine = LocalEngine::new(config, clock.clone());
        for request in data.split(|&b| b == 0) {
            let Some((&first, rest)) = request.split_first() else {
                continue;
            };
            if first == 2 {
                clock.advance_ms(rest.first().copied().unwrap_or(1) as u64 * 10);
                continue;
            }
            let mut args = vec![Bytes::from_static(names()[first as usize % names().len()].as_bytes())];
            if !rest.is_empty() {
                args.extend(rest.split(|&b| b == 1).map(Bytes::copy_from_slice));
            }
            let silent = engine.replies_suppressed() || args[0] == "client";
            let (reply, closed) = engine.run(vec![args]);
            assert!(
                closed || !reply.is_empty() || silent || engine.replies_suppressed(),
                "every command gets a reply"
            );
            if closed {
                break;
            }
        }
    }
}

/// The differential machinery shared by the server's differential test and
/// the client-tests conformance suite: scenario files (`## name` headers,
/// one redis-cli-quoted command per line, `!sleep MS`), running a scenario
/// on a server in RESP2 or RESP3, and comparing two servers' replies.
pub mod conformance {
    use std::net::SocketAddr;
    use std::time::Duration;

    use super::RawClient;
    use crate::protocol::split_args;

    /// A named command sequence.
    pub struct Scenario {
        /// The `## name` header's name.
        pub name: String,
        /// Its lines, each split into arguments as redis-cli splits them.
        pub commands: Vec<Vec<Vec<u8>>>,
    }

    /// Splits a scenario file into its scenarios (`# ` lines are comments).
    pub fn parse_scenarios(text: &str) -> Vec<Scenario> {
        let mut out: Vec<Scenario> = vec![];
        for line in text.lines() {
            let line = line.trim();
            if line.is_empty() || line.starts_with("# ") || line == "#" {
                continue;
            }
            if let Some(name) = line.strip_prefix("## ") {
                out.push(Scenario {
                    name: name.to_string(),
                    commands: vec![],
                });
                continue;
            }
            let args = split_args(line.as_bytes()).unwrap_or_else(|| panic!("bad scenario line: {line}"));
            out.last_mut()
                .expect("command before first scenario")
                .commands
                .push(args);
        }
        out
    }

    /// Bytes as text for a failure message, CRLF shown as `\r\n`.
    pub fn show(bytes: &[u8]) -> String {
        String::from_utf8_lossy(bytes).replace("\r\n", "\\r\\n")
    }

    /// Runs one scenario against one server and returns every reply.
    ///
    /// Besides plain command lines, a scenario may drive more clients,
    /// named by the line's first word (each opened on first use, with
    /// `HELLO 3` in RESP3 runs):
    /// - `@b CMD ...` runs a command on client `b` and records its reply;
    /// - `@b> CMD ...` only sends it (a blocking command); nothing recorded;
    /// - `@b<` records the next reply of `b` (waiting up to 5 s);
    /// - `@b?` records what `b` received within 100 ms, or `<no reply>`
    ///   (a client still blocked).
    ///
    /// An argument `$id:b` is replaced by client `b`'s CLIENT ID (the ids of
    /// two servers differ). A line starting `~ ` is time-dependent: its
    /// reply is recorded with every number masked, so only its shape is
    /// compared, and its changes to the dataset are not compared. A line starting `±N ` (a remaining time or a deadline) has
    /// its integer reply compared within `N` by [`compare`].
    pub fn run(addr: SocketAddr, scenario: &Scenario, resp3: bool) -> Vec<Vec<u8>> {
        run_counting(addr, scenario, resp3).0
    }

    /// The server's dirty counter (INFO `rdb_changes_since_last_save`).
    pub fn dirty(admin: &mut RawClient) -> u64 {
        let info = admin.command(&["INFO", "persistence"]).unwrap_or_default();
        let info = String::from_utf8_lossy(&info);
        info.lines()
            .find_map(|l| l.strip_prefix("rdb_changes_since_last_save:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(u64::MAX)
    }

    /// [`run`], and the changes each line made to the dataset (the dirty
    /// counter's rise over the line, which decides whether a write leaves
    /// an effect; `u64::MAX` where it cannot be told).
    pub fn run_counting(addr: SocketAddr, scenario: &Scenario, resp3: bool) -> (Vec<Vec<u8>>, Vec<u64>) {
        let mut admin = RawClient::connect(addr).unwrap();
        assert_eq!(admin.command(&["FLUSHALL"]).unwrap(), b"+OK\r\n");
        let mut clients: Vec<(Vec<u8>, RawClient, Vec<u8>)> = vec![];
        let open = |name: &[u8], clients: &mut Vec<(Vec<u8>, RawClient, Vec<u8>)>| -> usize {
            if let Some(i) = clients.iter().position(|(n, _, _)| n == name) {
                return i;
            }
            let mut c = RawClient::connect(addr).unwrap();
            if resp3 {
                let hello = c.command(&["HELLO", "3"]).unwrap();
                assert!(hello.starts_with(b"%7\r\n"), "{}", show(&hello));
            }
            let id = c.command(&["CLIENT", "ID"]).unwrap();
            let id = id[1..id.len() - 2].to_vec();
            clients.push((name.to_vec(), c, id));
            clients.len() - 1
        };
        open(b"", &mut clients);
        let mut replies = vec![];
        let mut changes = vec![];
        let mut dirty_before = dirty(&mut admin);
        // After a CLIENT PAUSE the admin's INFO would wait for the pause,
        // and a MONITOR would see it: the scenario's changes are not
        // measured from there on.
        let mut measuring = true;
        let unmeasurable = |a: &[Vec<u8>]| {
            let word = |i: usize, w: &[u8]| a.get(i).is_some_and(|x| x.eq_ignore_ascii_case(w));
            word(0, b"monitor") || (word(0, b"client") && word(1, b"pause"))
        };
        for args in &scenario.commands {
            if args[0] == b"!sleep" {
                let ms: u64 = String::from_utf8_lossy(&args[1]).parse().unwrap();
                std::thread::sleep(Duration::from_millis(ms));
                replies.push(vec![]);
                changes.push(0);
                continue;
            }
            // `~ CMD ...`: a time-dependent reply, compared for its shape
            // only (every run of digits masked).
            let (shape_only, args) = match args[0].as_slice() {
                b"~" => (true, &args[1..]),
                _ if tolerance(args).is_some() => (false, &args[1..]),
                _ => (false, &args[..]),
            };
            let (who, mode, args) = match args[0].strip_prefix(b"@") {
                None => (&b""[..], b' ', args),
                Some(name) => match name.last() {
                    Some(m @ (b'>' | b'<' | b'?')) => (&name[..name.len() - 1], *m, &args[1..]),
                    _ => (name, b' ', &args[1..]),
                },
            };
            measuring &= !unmeasurable(args);
            let i = open(who, &mut clients);
            let args: Vec<Vec<u8>> = args
                .iter()
                .map(|a| match a.strip_prefix(b"$id:") {
                    Some(name) => {
                        let j = open(name, &mut clients);
                        clients[j].2.clone()
                    }
                    None => a.clone(),
                })
                .collect();
            let id = String::from_utf8_lossy(&clients[i].2).into_owned();
            let c = &mut clients[i].1;
            let raw: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
            let reply = match mode {
                b'>' => {
                    c.send(&RawClient::encode(&raw)).unwrap();
                    wait_until_blocked(&mut admin, &id);
                    vec![]
                }
                b'<' | b'?' => {
                    let wait = if mode == b'<' { 5000 } else { 100 };
                    c.set_read_timeout(Some(Duration::from_millis(wait))).unwrap();
                    let reply = c.read_reply().unwrap_or_else(|_| b"<no reply>".to_vec());
                    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                    reply
                }
                _ => c
                    .command_bytes(&raw)
                    .unwrap_or_else(|e| format!("<io error: {e}>").into_bytes()),
            };
            replies.push(if shape_only { mask_digits(&reply) } else { reply });
            if measuring {
                let dirty_after = dirty(&mut admin);
                // A time-dependent line's changes are not compared either
                // (what expired by then differs from run to run).
                changes.push(if shape_only {
                    u64::MAX
                } else {
                    dirty_after.wrapping_sub(dirty_before)
                });
                dirty_before = dirty_after;
            } else {
                changes.push(u64::MAX);
            }
        }
        (replies, changes)
    }

    /// The `N` of a line starting `±N` (see [`run`]).
    fn tolerance(args: &[Vec<u8>]) -> Option<u64> {
        std::str::from_utf8(args.first()?).ok()?.strip_prefix('±')?.parse().ok()
    }

    /// The value of an integer reply that is not negative (`-1`/`-2`, "no
    /// deadline" and "no key", must match exactly).
    fn non_negative_int(reply: &[u8]) -> Option<u64> {
        std::str::from_utf8(reply.strip_prefix(b":")?.strip_suffix(b"\r\n")?)
            .ok()?
            .parse()
            .ok()
    }

    /// `reply` with every run of ASCII digits replaced by one `#`.
    fn mask_digits(reply: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(reply.len());
        for (i, &b) in reply.iter().enumerate() {
            if !b.is_ascii_digit() {
                out.push(b);
            } else if i == 0 || !reply[i - 1].is_ascii_digit() {
                out.push(b'#');
            }
        }
        out
    }

    /// Waits (up to 300 ms) until CLIENT LIST shows client `id` blocked
    /// (`flags=` with `b`), so that a command sent without waiting has
    /// reached the server before the scenario's next line runs.
    fn wait_until_blocked(admin: &mut RawClient, id: &str) {
        let prefix = format!("id={id} ");
        for _ in 0..60 {
            let list = admin.command(&["CLIENT", "LIST"]).unwrap_or_default();
            let list = String::from_utf8_lossy(&list);
            let blocked = list.lines().any(|line| {
                let line = line.trim_start_matches(|c: char| !c.is_ascii_alphabetic());
                line.starts_with(&prefix)
                    && line
                        .split(' ')
                        .any(|f| f.strip_prefix("flags=").is_some_and(|f| f.contains('b')))
            });
            if blocked {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Runs `scenario` on both servers, records every differing reply (with the
    /// reply before it, for context) and every line whose changes to the
    /// dataset (the dirty counter's rise) differ, and returns the number of
    /// commands compared.
    pub fn compare(
        redis: SocketAddr,
        coordis: SocketAddr,
        scenario: &Scenario,
        resp3: bool,
        mismatches: &mut Vec<String>,
    ) -> usize {
        let (expected, expected_changes) = run_counting(redis, scenario, resp3);
        let (actual, actual_changes) = run_counting(coordis, scenario, resp3);
        for (i, args) in scenario.commands.iter().enumerate() {
            if expected_changes[i] != actual_changes[i] {
                let cmd: Vec<String> = args.iter().map(|a| String::from_utf8_lossy(a).into_owned()).collect();
                mismatches.push(format!(
                    "[{} RESP{}] {}\n    changes (rdb_changes_since_last_save): redis {}, coordis {}",
                    scenario.name,
                    if resp3 { 3 } else { 2 },
                    cmd.join(" "),
                    expected_changes[i],
                    actual_changes[i],
                ));
            }
            let close =
                tolerance(args).is_some_and(
                    |n| match (non_negative_int(&expected[i]), non_negative_int(&actual[i])) {
                        (Some(a), Some(b)) => a.abs_diff(b) <= n,
                        _ => false,
                    },
                );
            if expected[i] != actual[i] && !close {
                let cmd: Vec<String> = args.iter().map(|a| String::from_utf8_lossy(a).into_owned()).collect();
                let before = if i > 0 {
                    let prev: Vec<String> = scenario.commands[i - 1]
                        .iter()
                        .map(|a| String::from_utf8_lossy(a).into_owned())
                        .collect();
                    format!("{} -> {}", prev.join(" "), show(&expected[i - 1]))
                } else {
                    String::new()
                };
                mismatches.push(format!(
                    "[{} RESP{}] {}\n    redis:   {}\n    coordis: {}\n    (previous reply: {})",
                    scenario.name,
                    if resp3 { 3 } else { 2 },
                    cmd.join(" "),
                    show(&expected[i]),
                    show(&actual[i]),
                    before
                ));
            }
        }
        scenario.commands.len()
    }

    /// Every scenario in the `*.txt` files of `dir`, in file-name order.
    pub fn load_dir(dir: &std::path::Path) -> Vec<Scenario> {
        let mut files: Vec<_> = std::fs::read_dir(dir)
            .expect("scenario dir")
            .map(|e| e.expect("entry").path())
            .collect();
        files.sort();
        files
            .into_iter()
            .filter(|p| p.extension().is_some_and(|e| e == "txt"))
            .flat_map(|p| parse_scenarios(&std::fs::read_to_string(&p).expect("scenario file")))
            .collect()
    }
}

/// One RESP2 value, as a reply or a request carries it (for the tools below,
/// which need structure where [`RawClient`] gives bytes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resp {
    /// `+text`, without the CRLF.
    Simple(Vec<u8>),
    /// `-text`, without the CRLF.
    Error(Vec<u8>),
    /// `:n`.
    Int(i64),
    /// `$len` bulk string: its bytes.
    Bulk(Vec<u8>),
    /// `$-1` or `*-1`.
    Nil,
    /// `*n`: its elements.
    Array(Vec<Resp>),
}

impl Resp {
    /// The bytes of a simple string, bulk string or integer.
    pub fn bytes(&self) -> Option<Vec<u8>> {
        match self {
            Resp::Simple(b) | Resp::Bulk(b) => Some(b.clone()),
            Resp::Int(n) => Some(n.to_string().into_bytes()),
            _ => None,
        }
    }

    /// The elements of an array (an empty slice for anything else).
    pub fn items(&self) -> &[Resp] {
        match self {
            Resp::Array(items) => items,
            _ => &[],
        }
    }
}

fn invalid(what: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.into())
}

/// Parses the RESP2 value at the start of `buf`: `Ok(None)` when it is not
/// complete yet, else the value and how many bytes it took.
pub fn parse_resp(buf: &[u8]) -> io::Result<Option<(Resp, usize)>> {
    let Some(&kind) = buf.first() else {
        return Ok(None);
    };
    let Some(eol) = buf.windows(2).position(|w| w == b"\r\n") else {
        return Ok(None);
    };
    let line = &buf[1..eol];
    let after = eol + 2;
    let number = || -> io::Result<i64> {
        std::str::from_utf8(line)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| invalid(format!("bad RESP length/integer {:?}", String::from_utf8_lossy(line))))
    };
    match kind {
        b'+' => Ok(Some((Resp::Simple(line.to_vec()), after))),
        b'-' => Ok(Some((Resp::Error(line.to_vec()), after))),
        b':' => Ok(Some((Resp::Int(number()?), after))),
        b'$' => {
            let Ok(len) = usize::try_from(number()?) else {
                return Ok(Some((Resp::Nil, after)));
            };
            if buf.len() < after + len + 2 {
                return Ok(None);
            }
            if &buf[after + len..after + len + 2] != b"\r\n" {
                return Err(invalid("bulk string not followed by CRLF"));
            }
            Ok(Some((Resp::Bulk(buf[after..after + len].to_vec()), after + len + 2)))
        }
        b'*' => {
            let Ok(count) = usize::try_from(number()?) else {
                return Ok(Some((Resp::Nil, after)));
            };
            let mut items = Vec::with_capacity(count.min(1024));
            let mut at = after;
            for _ in 0..count {
                match parse_resp(&buf[at..])? {
                    Some((item, n)) => {
                        items.push(item);
                        at += n;
                    }
                    None => return Ok(None),
                }
            }
            Ok(Some((Resp::Array(items), at)))
        }
        other => Err(invalid(format!(
            "unexpected RESP type byte {:?} at {:?}",
            other as char,
            String::from_utf8_lossy(&buf[..buf.len().min(60)])
        ))),
    }
}

/// One command of a replication stream or effects feed: its arguments.
pub type StreamCommand = Vec<Vec<u8>>;

/// The command at the start of `buf` (a RESP array of bulk strings), as
/// [`parse_resp`] returns values.
fn parse_command(buf: &[u8]) -> io::Result<Option<(StreamCommand, usize)>> {
    let Some((value, n)) = parse_resp(buf)? else {
        return Ok(None);
    };
    let Resp::Array(items) = &value else {
        return Err(invalid(format!("expected a command array, got {value:?}")));
    };
    let args = items
        .iter()
        .map(|a| match a {
            Resp::Bulk(b) => Ok(b.clone()),
            other => Err(invalid(format!("expected a bulk string argument, got {other:?}"))),
        })
        .collect::<io::Result<_>>()?;
    Ok(Some((args, n)))
}

/// Splits a byte stream of RESP arrays of bulk strings (a replication
/// stream after its RDB payload, an AOF, coordis's effects feed) into
/// commands. Panics on anything else, including a stream that ends inside a
/// command: a test tool, where a malformed feed is the failure to report.
pub fn parse_commands(bytes: &[u8]) -> Vec<StreamCommand> {
    let mut out = vec![];
    let mut at = 0;
    while at < bytes.len() {
        match parse_command(&bytes[at..]) {
            Ok(Some((cmd, n))) => {
                out.push(cmd);
                at += n;
            }
            Ok(None) => panic!("the stream ends inside a command: {}", conformance::show(&bytes[at..])),
            Err(e) => panic!("malformed stream at byte {at}: {e}"),
        }
    }
    out
}

/// `args` as one readable line: each argument quoted as redis-cli prints it.
pub fn show_command(args: &[Vec<u8>]) -> String {
    args.iter().map(|a| quote(a)).collect::<Vec<_>>().join(" ")
}

/// A byte string as redis-cli quotes it: plain when it is printable ASCII
/// without spaces or quotes, else in double quotes with escapes.
fn quote(bytes: &[u8]) -> String {
    let plain = !bytes.is_empty()
        && bytes
            .iter()
            .all(|&b| b.is_ascii_graphic() && b != b'"' && b != b'\'' && b != b'\\');
    if plain {
        return String::from_utf8_lossy(bytes).into_owned();
    }
    let mut out = String::from("\"");
    for &b in bytes {
        match b {
            b'"' | b'\\' => {
                out.push('\\');
                out.push(b as char);
            }
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            b' '..=b'~' => out.push(b as char),
            _ => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    out.push('"');
    out
}

/// The channel [`ReplicationCapture::take`] publishes its markers on.
pub const CAPTURE_MARKER: &str = "__capture_marker__";

/// How long one read on the replication link may wait; a take or a quiet
/// period is made of several such reads.
const CAPTURE_READ_SLICE: Duration = Duration::from_millis(200);
/// How long the primary may take to produce and send the RDB payload.
const CAPTURE_SYNC_LIMIT: Duration = Duration::from_secs(30);
/// How long [`ReplicationCapture::take`] waits for its marker.
const CAPTURE_MARKER_LIMIT: Duration = Duration::from_secs(10);
/// Length of the delimiter of an EOF-marked (diskless) RDB transfer.
const RDB_EOF_MARK_LEN: usize = 40;

/// A connection to a Redis primary posing as a replica: what the primary
/// propagates (to replicas and its AOF) arrives here as commands.
///
/// [`ReplicationCapture::start`] sends a plain `SYNC`: the old-style full
/// sync that answers with no `+FULLRESYNC` line and expects no `REPLCONF
/// ACK`s, and, as the link does not announce `capa eof`, always as a disk
/// RDB (`$<len>\r\n<payload>`, no CRLF after it, maybe preceded by `\n`
/// keepalives) started at once, so the workload can follow as soon as
/// `start` returns. [`ReplicationCapture::start_diskless`] announces `capa
/// eof` instead, for a primary that should stream the RDB from its socket
/// (`$EOF:<40-byte mark>\r\n<payload><mark>`). Everything the primary runs
/// after `start` returns is in the stream.
///
/// Every read has a timeout and the link closing is an error: a capture
/// never hangs.
#[derive(Debug)]
pub struct ReplicationCapture {
    stream: TcpStream,
    /// Bytes received and not yet parsed into commands.
    buf: Vec<u8>,
    primary: SocketAddr,
    /// The connection markers are published from (db 0), opened on first use.
    marker_client: Option<RawClient>,
    /// The number the next marker carries, so a take never stops at an
    /// older marker.
    next_marker: u64,
    /// After a socket (EOF-marked) transfer the primary starts the command
    /// stream on a `REPLCONF ACK` that arrives once it has marked the link
    /// online, which can be after the payload's last byte: until stream
    /// bytes arrive, every quiet read slice sends one more ACK (as a real
    /// replica's once-a-second ACK would).
    ack_until_streaming: bool,
}

impl ReplicationCapture {
    /// Connects to the primary at `addr` and completes a full sync (the
    /// RDB payload is read and dropped).
    pub fn start(addr: SocketAddr) -> io::Result<ReplicationCapture> {
        Self::connect(addr, false)
    }

    /// As [`ReplicationCapture::start`], announcing `capa eof`: a primary
    /// with `repl-diskless-sync yes` then sends the RDB from its socket,
    /// after `repl-diskless-sync-delay` seconds.
    pub fn start_diskless(addr: SocketAddr) -> io::Result<ReplicationCapture> {
        Self::connect(addr, true)
    }

    fn connect(addr: SocketAddr, diskless: bool) -> io::Result<ReplicationCapture> {
        let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
        stream.set_read_timeout(Some(CAPTURE_READ_SLICE))?;
        stream.set_nodelay(true)?;
        let mut capture = ReplicationCapture {
            stream,
            buf: vec![],
            primary: addr,
            marker_client: None,
            next_marker: 1,
            ack_until_streaming: false,
        };
        if diskless {
            capture
                .stream
                .write_all(&RawClient::encode(&[b"REPLCONF", b"capa", b"eof"]))?;
            let deadline = Instant::now() + CAPTURE_SYNC_LIMIT;
            let line = capture.read_line(deadline)?;
            if line != b"+OK" {
                return Err(io::Error::other(format!(
                    "REPLCONF capa eof: {}",
                    String::from_utf8_lossy(&line)
                )));
            }
        }
        capture.stream.write_all(&RawClient::encode(&[b"SYNC"]))?;
        capture.ack_until_streaming = capture.skip_rdb(Instant::now() + CAPTURE_SYNC_LIMIT)?;
        capture.send_ack_if_waiting()?;
        Ok(capture)
    }

    /// See [`ReplicationCapture::ack_until_streaming`]. The offset is
    /// not tracked: a link that did not announce `psync2` is never asked
    /// to resume from it.
    fn send_ack_if_waiting(&mut self) -> io::Result<()> {
        if self.ack_until_streaming {
            self.stream
                .write_all(&RawClient::encode(&[b"REPLCONF", b"ACK", b"0"]))?;
        }
        Ok(())
    }

    /// Reads more bytes into `buf`; `false` when a read slice passed with
    /// none. The link closing is an error.
    fn fill(&mut self) -> io::Result<bool> {
        let mut chunk = [0u8; 16384];
        match self.stream.read(&mut chunk) {
            Ok(0) => Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the primary closed the replication link",
            )),
            Ok(n) => {
                self.buf.extend_from_slice(&chunk[..n]);
                self.ack_until_streaming = false;
                Ok(true)
            }
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                self.send_ack_if_waiting()?;
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    fn fill_before(&mut self, deadline: Instant, waiting_for: &str) -> io::Result<()> {
        if Instant::now() >= deadline {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("replication capture: timed out waiting for {waiting_for}"),
            ));
        }
        self.fill().map(|_| ())
    }

    /// The next line (without its CRLF), skipping the bare `\n` keepalives
    /// a primary sends while it prepares the RDB.
    fn read_line(&mut self, deadline: Instant) -> io::Result<Vec<u8>> {
        loop {
            let keepalives = self.buf.iter().take_while(|&&b| b == b'\n').count();
            self.buf.drain(..keepalives);
            if let Some(eol) = self.buf.windows(2).position(|w| w == b"\r\n") {
                let line = self.buf[..eol].to_vec();
                self.buf.drain(..eol + 2);
                return Ok(line);
            }
            self.fill_before(deadline, "the primary's reply to SYNC")?;
        }
    }

    /// Reads and drops the RDB payload; `true` when it came EOF-marked
    /// (from the primary's socket).
    fn skip_rdb(&mut self, deadline: Instant) -> io::Result<bool> {
        let line = self.read_line(deadline)?;
        let Some(header) = line.strip_prefix(b"$") else {
            return Err(io::Error::other(format!(
                "SYNC was answered {:?}, not an RDB payload",
                String::from_utf8_lossy(&line)
            )));
        };
        if let Some(mark) = header.strip_prefix(b"EOF:") {
            if mark.len() != RDB_EOF_MARK_LEN {
                return Err(invalid("EOF-marked RDB with a bad mark"));
            }
            let mark = mark.to_vec();
            loop {
                if let Some(at) = self.buf.windows(mark.len()).position(|w| w == mark) {
                    self.buf.drain(..at + mark.len());
                    return Ok(true);
                }
                self.fill_before(deadline, "the end of the diskless RDB payload")?;
            }
        }
        let len: usize = std::str::from_utf8(header)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| invalid(format!("bad RDB length {:?}", String::from_utf8_lossy(header))))?;
        let mut left = len;
        loop {
            let n = left.min(self.buf.len());
            self.buf.drain(..n);
            left -= n;
            if left == 0 {
                return Ok(false);
            }
            self.fill_before(deadline, "the RDB payload")?;
        }
    }

    /// The next command of the stream, if one arrives before `deadline`
    /// (`Ok(None)` when it passes). PINGs and REPLCONFs (GETACK) are link
    /// upkeep, not effects, and are dropped.
    fn next_command(&mut self, deadline: Instant) -> io::Result<Option<StreamCommand>> {
        loop {
            while let Some((cmd, n)) = parse_command(&self.buf)? {
                self.buf.drain(..n);
                let upkeep = cmd
                    .first()
                    .is_some_and(|c| c.eq_ignore_ascii_case(b"PING") || c.eq_ignore_ascii_case(b"REPLCONF"));
                if !upkeep {
                    return Ok(Some(cmd));
                }
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            self.fill()?;
        }
    }

    /// Everything the stream carries until it has been quiet for `quiet`
    /// (timing guesswork: prefer [`ReplicationCapture::take`]).
    pub fn commands_until_quiet(&mut self, quiet: Duration) -> io::Result<Vec<StreamCommand>> {
        let mut out = vec![];
        while let Some(cmd) = self.next_command(Instant::now() + quiet)? {
            out.push(cmd);
        }
        Ok(out)
    }

    /// Everything the primary propagated since the last take (or since
    /// `start`). It publishes `PUBLISH __capture_marker__ <n>` from its own
    /// connection in db 0 (PUBLISH is propagated to replicas and changes no
    /// data) and returns the commands before that marker arrives. The
    /// SELECT directly before the marker, if any, was the marker's own and
    /// is dropped too; so the stream is in db 0 after every take (the next
    /// write elsewhere brings its SELECT). Commands must have been answered
    /// before `take` is called, so that they ran before the marker.
    pub fn take(&mut self) -> io::Result<Vec<StreamCommand>> {
        let n = self.next_marker.to_string();
        self.next_marker += 1;
        if self.marker_client.is_none() {
            self.marker_client = Some(RawClient::connect(self.primary)?);
        }
        let client = self.marker_client.as_mut().expect("opened above");
        let reply = client.command(&["PUBLISH", CAPTURE_MARKER, &n])?;
        if !reply.starts_with(b":") {
            return Err(io::Error::other(format!(
                "PUBLISH marker: {}",
                String::from_utf8_lossy(&reply)
            )));
        }
        let marker: StreamCommand = vec![b"PUBLISH".to_vec(), CAPTURE_MARKER.into(), n.into_bytes()];
        let deadline = Instant::now() + CAPTURE_MARKER_LIMIT;
        let mut out = vec![];
        loop {
            let Some(cmd) = self.next_command(deadline)? else {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "replication capture: marker {} did not arrive; got {:?}",
                        show_command(&marker),
                        out.iter().map(|c: &StreamCommand| show_command(c)).collect::<Vec<_>>()
                    ),
                ));
            };
            let is_marker = cmd.len() == 3 && cmd[0].eq_ignore_ascii_case(b"PUBLISH") && cmd[1..] == marker[1..];
            if is_marker {
                if out
                    .last()
                    .is_some_and(|c: &StreamCommand| c[0].eq_ignore_ascii_case(b"SELECT"))
                {
                    out.pop();
                }
                return Ok(out);
            }
            out.push(cmd);
        }
    }
}

/// What [`normalize_times`] puts in place of a unix time in milliseconds.
pub const MS_PLACEHOLDER: &str = "<ms>";
/// What [`normalize_times`] puts in place of a unix time in seconds.
pub const S_PLACEHOLDER: &str = "<s>";

/// `cmds` with absolute times masked, so that two streams recorded at
/// different moments (Redis's and coordis's) compare equal when their times
/// agree within a tolerance of the moment each was recorded.
///
/// An argument (the command name excepted) that is a plain decimal integer
/// within `±tolerance_ms` of `around_ms` (a unix time in ms, usually the
/// time the workload ran) becomes `<ms>`; one within `±tolerance_ms` of
/// `around_ms / 1000` (in seconds: the tolerance rounded up to whole
/// seconds, at least one) becomes `<s>`. A stream ID whose ms part is such
/// a time (`1700000000123-0`) keeps its sequence: `<ms>-0`. Everything else
/// is left as it is, so relative values (`PX 100`) and far-away deadlines
/// (an `EXPIREAT` in 2100) still compare exactly.
pub fn normalize_times(cmds: &[StreamCommand], around_ms: u64, tolerance_ms: u64) -> Vec<StreamCommand> {
    let around_s = around_ms / 1000;
    let tolerance_s = tolerance_ms.div_ceil(1000).max(1);
    let as_number = |b: &[u8]| -> Option<u64> {
        let canonical = !b.is_empty() && b.iter().all(u8::is_ascii_digit) && (b[0] != b'0' || b.len() == 1);
        canonical.then(|| std::str::from_utf8(b).ok()?.parse().ok())?
    };
    let mask = |b: &[u8]| -> Option<&'static str> {
        let n = as_number(b)?;
        if n.abs_diff(around_ms) <= tolerance_ms {
            Some(MS_PLACEHOLDER)
        } else if n.abs_diff(around_s) <= tolerance_s {
            Some(S_PLACEHOLDER)
        } else {
            None
        }
    };
    cmds.iter()
        .map(|cmd| {
            cmd.iter()
                .enumerate()
                .map(|(i, arg)| {
                    if i == 0 {
                        return arg.clone();
                    }
                    if let Some(p) = mask(arg) {
                        return p.as_bytes().to_vec();
                    }
                    if let Some(dash) = arg.iter().position(|&b| b == b'-') {
                        let (ms, seq) = (&arg[..dash], &arg[dash + 1..]);
                        if as_number(seq).is_some() && mask(ms) == Some(MS_PLACEHOLDER) {
                            return [MS_PLACEHOLDER.as_bytes(), b"-", seq].concat();
                        }
                    }
                    arg.clone()
                })
                .collect()
        })
        .collect()
}

/// One key as [`dataset`] read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyDump {
    /// What TYPE answered: `string`, `list`, `set`, `zset`, `hash`, `stream`.
    pub kind: String,
    /// The contents, in an order that does not depend on the encoding:
    /// - string: `[value]` (GET);
    /// - list: the elements (LRANGE 0 -1);
    /// - set: the members, sorted (SMEMBERS);
    /// - zset: member, score, member, score... (ZRANGE 0 -1 WITHSCORES);
    /// - hash: field, value, ... sorted by field (HGETALL);
    /// - stream: one line per entry (`id field value ...`, XRANGE - +),
    ///   then `meta ...` (last-generated-id, max-deleted-entry-id,
    ///   entries-added, recorded-first-entry-id), then per group `group
    ///   <name> last-delivered-id=.. entries-read=.. lag=.. pel-count=..`,
    ///   its pending entries `pending <group> <id> consumer=..
    ///   delivery-count=..` and consumers `consumer <group> <name>
    ///   pel-count=..` (XINFO STREAM FULL COUNT 0; the delivery and seen
    ///   times are left out, being the moment each server ran the read).
    pub value: Vec<Vec<u8>>,
    /// PTTL when the key has a deadline; `None` when it is persistent.
    pub pttl: Option<u64>,
}

/// What `reply` is, or an error naming `what` (the command sent).
fn expect_reply(what: &str, reply: Vec<u8>) -> io::Result<Resp> {
    match parse_resp(&reply)? {
        Some((Resp::Error(e), _)) => Err(io::Error::other(format!("{what}: {}", String::from_utf8_lossy(&e)))),
        Some((value, _)) => Ok(value),
        None => Err(invalid(format!("{what}: incomplete reply"))),
    }
}

fn bulk_list(what: &str, value: &Resp) -> io::Result<Vec<Vec<u8>>> {
    value
        .items()
        .iter()
        .map(|v| {
            v.bytes()
                .ok_or_else(|| invalid(format!("{what}: unexpected element {v:?}")))
        })
        .collect()
}

/// A flat `key, value, key, value` array (a RESP2 map) looked up by key.
fn map_field<'a>(map: &'a Resp, key: &str) -> Option<&'a Resp> {
    map.items()
        .chunks(2)
        .find(|kv| kv[0].bytes().is_some_and(|k| k == key.as_bytes()))
        .and_then(|kv| kv.get(1))
}

/// A scalar as text (`nil` for a null), for the stream metadata lines.
fn scalar_text(value: Option<&Resp>) -> String {
    match value {
        Some(Resp::Nil) | None => "nil".into(),
        Some(v) => v.bytes().map_or_else(|| format!("{v:?}"), |b| quote(&b)),
    }
}

/// Every key of databases `dbs` of the server at `addr`, read with plain
/// commands both coordis and Redis answer (SELECT, SCAN, TYPE, then per
/// type as [`KeyDump::value`] says, and PTTL). A key that expires between
/// SCAN and its reads is left out. Reading may expire keys (as any read
/// does), so it is for comparing two servers after a workload, not during.
pub fn dataset(addr: SocketAddr, dbs: &[usize]) -> io::Result<std::collections::BTreeMap<(usize, Vec<u8>), KeyDump>> {
    let mut c = RawClient::connect(addr)?;
    let mut out = std::collections::BTreeMap::new();
    for &db in dbs {
        let db_text = db.to_string();
        expect_reply("SELECT", c.command(&["SELECT", &db_text])?)?;
        for key in scan_keys(&mut c)? {
            if let Some(dump) = dump_key(&mut c, &key)? {
                out.insert((db, key), dump);
            }
        }
    }
    Ok(out)
}

/// Every key of the selected database (SCAN to the end), sorted.
fn scan_keys(c: &mut RawClient) -> io::Result<std::collections::BTreeSet<Vec<u8>>> {
    let mut keys = std::collections::BTreeSet::new();
    let mut cursor = b"0".to_vec();
    loop {
        let reply = expect_reply("SCAN", c.command_bytes(&[b"SCAN", &cursor, b"COUNT", b"1000"])?)?;
        let [next, batch] = reply.items() else {
            return Err(invalid(format!("SCAN: unexpected reply {reply:?}")));
        };
        keys.extend(bulk_list("SCAN", batch)?);
        cursor = next.bytes().ok_or_else(|| invalid("SCAN: bad cursor"))?;
        if cursor == b"0" {
            return Ok(keys);
        }
    }
}

/// How long [`debug_digest`] waits for its reply: a SHA-1 per element,
/// tens of thousands of keys took 5–8 s in a debug build on a loaded
/// machine, past a client's usual read timeout.
const DIGEST_TIMEOUT: Duration = Duration::from_secs(60);

/// `DEBUG DIGEST` of the server at `addr`: 40 hex digits, all zeros for an
/// empty dataset. The server must allow DEBUG (`enable-debug-command yes`;
/// coordis: `Config::enable_debug_command`).
pub fn debug_digest(addr: SocketAddr) -> io::Result<String> {
    let mut c = RawClient::connect(addr)?;
    c.set_read_timeout(Some(DIGEST_TIMEOUT))?;
    match expect_reply("DEBUG DIGEST", c.command(&["DEBUG", "DIGEST"])?)? {
        Resp::Simple(d) => Ok(String::from_utf8_lossy(&d).into_owned()),
        other => Err(invalid(format!("DEBUG DIGEST: unexpected reply {other:?}"))),
    }
}

/// Compares the whole datasets of two servers in one call, by `DEBUG
/// DIGEST` (Redis's signature of every key, value and the fact of an
/// expiry, in every database; coordis computes the same). Empty when the
/// digests agree. Otherwise the first line gives both digests and the next
/// ones say where they differ: each key of databases `dbs` that only one
/// side has or whose `DEBUG DIGEST-VALUE` differs. Both servers must allow
/// DEBUG; the sides are called `a` and `b`, as passed.
pub fn compare_digests(a: SocketAddr, b: SocketAddr, dbs: &[usize]) -> io::Result<Vec<String>> {
    let (digest_a, digest_b) = (debug_digest(a)?, debug_digest(b)?);
    if digest_a == digest_b {
        return Ok(vec![]);
    }
    let mut out = vec![format!("DEBUG DIGEST differs: a {digest_a}, b {digest_b}")];
    let (mut ca, mut cb) = (RawClient::connect(a)?, RawClient::connect(b)?);
    for &db in dbs {
        let mut values = vec![];
        for c in [&mut ca, &mut cb] {
            expect_reply("SELECT", c.command(&["SELECT", &db.to_string()])?)?;
            let keys = scan_keys(c)?;
            let mut digests = std::collections::BTreeMap::new();
            for key in keys {
                let reply = expect_reply(
                    "DEBUG DIGEST-VALUE",
                    c.command_bytes(&[b"DEBUG", b"DIGEST-VALUE", &key])?,
                )?;
                let digest = reply.items().first().and_then(Resp::bytes).unwrap_or_default();
                digests.insert(key, digest);
            }
            values.push(digests);
        }
        let (va, vb) = (&values[0], &values[1]);
        for key in va.keys().chain(vb.keys()).collect::<std::collections::BTreeSet<_>>() {
            let name = format!("db {db} key {}", quote(key));
            match (va.get(key), vb.get(key)) {
                (Some(_), None) => out.push(format!("{name}: only in a")),
                (None, Some(_)) => out.push(format!("{name}: only in b")),
                (Some(x), Some(y)) if x != y => out.push(format!("{name}: DEBUG DIGEST-VALUE differs")),
                _ => {}
            }
        }
    }
    Ok(out)
}

/// One key's [`KeyDump`], `None` when it no longer exists.
fn dump_key(c: &mut RawClient, key: &[u8]) -> io::Result<Option<KeyDump>> {
    let mut ask = |args: &[&[u8]]| -> io::Result<Resp> {
        let what = String::from_utf8_lossy(args[0]).into_owned();
        expect_reply(&what, c.command_bytes(args)?)
    };
    let kind = ask(&[b"TYPE", key])?.bytes().unwrap_or_default();
    let kind = String::from_utf8_lossy(&kind).into_owned();
    let value = match kind.as_str() {
        "none" => return Ok(None),
        "string" => match ask(&[b"GET", key])? {
            Resp::Nil => return Ok(None),
            v => vec![v.bytes().unwrap_or_default()],
        },
        "list" => bulk_list("LRANGE", &ask(&[b"LRANGE", key, b"0", b"-1"])?)?,
        "set" => {
            let mut members = bulk_list("SMEMBERS", &ask(&[b"SMEMBERS", key])?)?;
            members.sort();
            members
        }
        "zset" => bulk_list("ZRANGE", &ask(&[b"ZRANGE", key, b"0", b"-1", b"WITHSCORES"])?)?,
        "hash" => {
            let flat = bulk_list("HGETALL", &ask(&[b"HGETALL", key])?)?;
            let mut pairs: Vec<_> = flat.chunks(2).map(|p| p.to_vec()).collect();
            pairs.sort();
            pairs.concat()
        }
        "stream" => {
            let mut lines = vec![];
            for entry in ask(&[b"XRANGE", key, b"-", b"+"])?.items() {
                let [id, fields] = entry.items() else {
                    return Err(invalid(format!("XRANGE: unexpected entry {entry:?}")));
                };
                let mut line = scalar_text(Some(id));
                for f in bulk_list("XRANGE", fields)? {
                    line.push(' ');
                    line.push_str(&quote(&f));
                }
                lines.push(line.into_bytes());
            }
            let info = ask(&[b"XINFO", b"STREAM", key, b"FULL", b"COUNT", b"0"])?;
            let meta: Vec<String> = [
                "last-generated-id",
                "max-deleted-entry-id",
                "entries-added",
                "recorded-first-entry-id",
            ]
            .iter()
            .map(|f| format!("{f}={}", scalar_text(map_field(&info, f))))
            .collect();
            lines.push(format!("meta {}", meta.join(" ")).into_bytes());
            for group in map_field(&info, "groups").map_or(&[][..], Resp::items) {
                let name = scalar_text(map_field(group, "name"));
                let fields: Vec<String> = ["last-delivered-id", "entries-read", "lag", "pel-count"]
                    .iter()
                    .map(|f| format!("{f}={}", scalar_text(map_field(group, f))))
                    .collect();
                lines.push(format!("group {name} {}", fields.join(" ")).into_bytes());
                // [id, consumer, delivery-time, delivery-count]
                for p in map_field(group, "pending").map_or(&[][..], Resp::items) {
                    let p = p.items();
                    lines.push(
                        format!(
                            "pending {name} {} consumer={} delivery-count={}",
                            scalar_text(p.first()),
                            scalar_text(p.get(1)),
                            scalar_text(p.get(3))
                        )
                        .into_bytes(),
                    );
                }
                for consumer in map_field(group, "consumers").map_or(&[][..], Resp::items) {
                    lines.push(
                        format!(
                            "consumer {name} {} pel-count={}",
                            scalar_text(map_field(consumer, "name")),
                            scalar_text(map_field(consumer, "pel-count"))
                        )
                        .into_bytes(),
                    );
                }
            }
            lines
        }
        other => return Err(invalid(format!("TYPE {}: unknown type {other}", quote(key)))),
    };
    let pttl = match ask(&[b"PTTL", key])? {
        Resp::Int(-2) => return Ok(None),
        Resp::Int(ms) => u64::try_from(ms).ok(),
        other => return Err(invalid(format!("PTTL: unexpected reply {other:?}"))),
    };
    Ok(Some(KeyDump { kind, value, pttl }))
}

/// The differences between two [`dataset`]s, one readable line each (empty
/// when they agree): a key only one side has, a type or value mismatch, one
/// side persistent and the other not, remaining times further apart than
/// `ttl_tolerance_ms`. The sides are called `a` and `b`, as passed.
pub fn compare_datasets(
    a: &std::collections::BTreeMap<(usize, Vec<u8>), KeyDump>,
    b: &std::collections::BTreeMap<(usize, Vec<u8>), KeyDump>,
    ttl_tolerance_ms: u64,
) -> Vec<String> {
    let show_value = |d: &KeyDump| show_command(&d.value);
    let show_ttl = |t: Option<u64>| t.map_or_else(|| "persistent".to_string(), |ms| format!("pttl {ms}"));
    let mut out = vec![];
    let keys: std::collections::BTreeSet<_> = a.keys().chain(b.keys()).collect();
    for k in keys {
        let name = format!("db {} key {}", k.0, quote(&k.1));
        match (a.get(k), b.get(k)) {
            (Some(x), None) => out.push(format!("{name}: only in a ({} {})", x.kind, show_value(x))),
            (None, Some(y)) => out.push(format!("{name}: only in b ({} {})", y.kind, show_value(y))),
            (Some(x), Some(y)) => {
                if x.kind != y.kind {
                    out.push(format!("{name}: type {} in a, {} in b", x.kind, y.kind));
                } else if x.value != y.value {
                    out.push(format!(
                        "{name}: {} values differ\n    a: {}\n    b: {}",
                        x.kind,
                        show_value(x),
                        show_value(y)
                    ));
                }
                let ttl_differs = match (x.pttl, y.pttl) {
                    (Some(p), Some(q)) => p.abs_diff(q) > ttl_tolerance_ms,
                    (p, q) => p != q,
                };
                if ttl_differs {
                    out.push(format!(
                        "{name}: {} in a, {} in b (tolerance {ttl_tolerance_ms} ms)",
                        show_ttl(x.pttl),
                        show_ttl(y.pttl)
                    ));
                }
            }
            (None, None) => unreachable!("the key came from one of the maps"),
        }
    }
    out
}
