//! Helpers for tests that talk to coordis and to a real Redis side by side.
//!
//! - [`RedisServer`] starts `redis-server` from PATH on a free loopback port
//!   (`--save '' --appendonly no`) and stops it on drop. It never touches a
//!   server it did not start.
//! - [`RawClient`] sends raw bytes and reads back exactly one RESP reply frame
//!   (split with the `redis-protocol` crate), for byte-for-byte assertions.
//! - [`require_redis`] says whether a missing redis-server is a failure
//!   (`COORDIS_REQUIRE_REDIS=1`) or a loud skip.
//! - [`LocalEngine`] runs commands on an engine directly, without a socket:
//!   the same code path as a connection's batch, for fuzzing and model tests.
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

/// A `redis-server` child process owned by the test.
#[derive(Debug)]
pub struct RedisServer {
    child: Child,
    addr: SocketAddr,
}

impl RedisServer {
    /// Starts `redis-server` from PATH with extra arguments. `Ok(None)` when it
    /// is not installed and `COORDIS_REQUIRE_REDIS` is not set (a skip line is
    /// printed to stderr); with it set, a missing Redis panics.
    pub fn start(extra_args: &[&str]) -> io::Result<Option<RedisServer>> {
        let which = Command::new("redis-server")
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        if which.is_err() {
            if require_redis() {
                panic!("COORDIS_REQUIRE_REDIS=1 but redis-server is not on PATH");
            }
            eprintln!("\n*** SKIPPED: redis-server is not on PATH; the real-Redis leg did not run (set COORDIS_REQUIRE_REDIS=1 to make this a failure) ***\n");
            return Ok(None);
        }
        let mut last_err = None;
        for _ in 0..5 {
            let port = free_port()?;
            let mut child = Command::new("redis-server")
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
                .args(extra_args)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()?;
            let addr: SocketAddr = ([127, 0, 0, 1], port).into();
            if wait_for_ping(&mut child, addr, Duration::from_secs(5)) {
                return Ok(Some(RedisServer { child, addr }));
            }
            let _ = child.kill();
            let _ = child.wait();
            last_err = Some(io::Error::other(format!("redis-server did not start on port {port}")));
        }
        Err(last_err.unwrap_or_else(|| io::Error::other("redis-server did not start")))
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn url(&self) -> String {
        format!("redis://{}", self.addr)
    }

    /// Waits up to `timeout` for the server to exit by itself (after
    /// SHUTDOWN, say); `None`: still running.
    pub fn wait_exit(&mut self, timeout: Duration) -> io::Result<Option<std::process::ExitStatus>> {
        wait_exit(&mut self.child, timeout)
    }
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
    }
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

/// A server process a test started (`coordis-server`, usually) on a free
/// loopback port. Its stderr is collected by a thread, so a chatty server
/// never blocks on a full pipe. Killed on drop.
#[derive(Debug)]
pub struct ServerProcess {
    child: Child,
    addr: SocketAddr,
    stderr: std::sync::Arc<std::sync::Mutex<String>>,
}

impl ServerProcess {
    /// Runs `command` with `--port <free port>` appended and waits until it
    /// answers PING.
    pub fn start(mut command: Command) -> io::Result<ServerProcess> {
        let port = free_port()?;
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
        let mut process = ServerProcess { child, addr, stderr };
        if !wait_for_ping(&mut process.child, addr, Duration::from_secs(10)) {
            return Err(io::Error::other(format!(
                "server did not start on port {port}: {}",
                process.stderr_text()
            )));
        }
        Ok(process)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Resident set size in KiB, from `/proc/<pid>/status` (Linux).
    pub fn rss_kb(&self) -> io::Result<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))?;
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .ok_or_else(|| io::Error::other("no VmRSS line"))
    }

    /// What the server wrote to stderr so far.
    pub fn stderr_text(&self) -> String {
        self.stderr.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Sends SIGTERM and waits up to `timeout` for the exit status (`None`:
    /// still running).
    pub fn terminate(&mut self, timeout: Duration) -> io::Result<Option<std::process::ExitStatus>> {
        // SAFETY: kill(2) on the pid of a child this value owns and has not reaped.
        if unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) } != 0 {
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

    pub fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes)
    }

    /// Sends one command and returns its reply's bytes.
    pub fn command(&mut self, args: &[&str]) -> io::Result<Vec<u8>> {
        let raw: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        self.command_bytes(&raw)
    }

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
    requests: std::collections::VecDeque<Vec<bytes::Bytes>>,
    /// Each client's outbox: where the reply to a blocking command lands.
    outboxes: std::collections::HashMap<u64, std::sync::Arc<crate::clients::Outbox>>,
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
            Arc::new(crate::engine::Shared::default()),
            Arc::new(crate::clients::CloseSignal::default()),
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
        let signal = Arc::new(crate::clients::ConnSignal::default());
        let outbox = crate::clients::Outbox::new(signal.clone());
        let now = self.clock.now_ms();
        self.engine.connect(crate::clients::ClientState::new(
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
        let mut queue: std::collections::VecDeque<_> = requests.into();
        let mut out = bytes::BytesMut::new();
        let end = self
            .engine
            .run_batch(id, Vec::new(), &mut queue, &mut None, usize::MAX, &mut out);
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
        self.requests.extend(requests);
        let mut out = bytes::BytesMut::new();
        let mut no_error = None;
        while !self.requests.is_empty() {
            let batch = self
                .engine
                .run_batch(1, Vec::new(), &mut self.requests, &mut no_error, usize::MAX, &mut out);
            if batch.close {
                self.requests.clear();
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
        pub name: String,
        pub commands: Vec<Vec<Vec<u8>>>,
    }

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
    /// compared. A line starting `±N ` (a remaining time or a deadline) has
    /// its integer reply compared within `N` by [`compare`].
    pub fn run(addr: SocketAddr, scenario: &Scenario, resp3: bool) -> Vec<Vec<u8>> {
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
        for args in &scenario.commands {
            if args[0] == b"!sleep" {
                let ms: u64 = String::from_utf8_lossy(&args[1]).parse().unwrap();
                std::thread::sleep(Duration::from_millis(ms));
                replies.push(vec![]);
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
        }
        replies
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
    /// reply before it, for context) and returns the number of commands compared.
    pub fn compare(
        redis: SocketAddr,
        coordis: SocketAddr,
        scenario: &Scenario,
        resp3: bool,
        mismatches: &mut Vec<String>,
    ) -> usize {
        let expected = run(redis, scenario, resp3);
        let actual = run(coordis, scenario, resp3);
        for (i, args) in scenario.commands.iter().enumerate() {
            let close =
                tolerance(args).is_some_and(
                    |n| match (non_negative_int(&expected[i]), non_negative_int(&actual[i])) {
                        (Some(a), Some(b)) => a.abs_diff(b) <= n,
                        _ => false,
                    },
                );
            if expected[i] != actual[i] && !close {
                let cmd: Vec<String> = args.iter().map(|a| String::from_utf8_lossy(a).into_owned()).collect();
                let before = if i > 0 { show(&expected[i - 1]) } else { String::new() };
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
