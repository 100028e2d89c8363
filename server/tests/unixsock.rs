//! The Unix-domain listener (`unixsocket`, `unixsocketperm`), side by side
//! with Redis 7.0.15 where it runs: the socket file's mode, how its clients
//! are shown (CLIENT INFO, MONITOR), killed (CLIENT KILL) and admitted
//! (protected mode, `enable-debug-command local`), the file removed at
//! SHUTDOWN, Redis's reasons when the path cannot be bound, and
//! `coordis-server`'s log and ready lines.

use std::io::{BufRead, Read, Write};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use coordis::testing::{parse_resp, RawClient, RedisServer, Resp, TempDir};

const BIN: &str = env!("CARGO_BIN_EXE_coordis-server");

/// How long a test waits for a server to act (a file to go, a process to end).
const WAIT: Duration = Duration::from_secs(10);

/// The mode both servers are given.
const PERM: u32 = 0o700;

/// A client on a Unix socket, speaking RESP2.
struct UnixClient(UnixStream);

impl UnixClient {
    fn connect(path: &Path) -> UnixClient {
        let stream = UnixStream::connect(path).unwrap_or_else(|e| panic!("connect {}: {e}", path.display()));
        stream.set_read_timeout(Some(WAIT)).unwrap();
        UnixClient(stream)
    }

    fn command(&mut self, args: &[&str]) -> Resp {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        self.0.write_all(&RawClient::encode(&args)).unwrap();
        self.reply()
    }

    fn reply(&mut self) -> Resp {
        let mut buf = vec![];
        let mut chunk = [0u8; 4096];
        loop {
            if let Some((reply, _)) = parse_resp(&buf).unwrap() {
                return reply;
            }
            let n = self.0.read(&mut chunk).unwrap();
            assert!(n > 0, "closed before a reply");
            buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// Whether the server closed the connection (within [`WAIT`]).
    fn closed(&mut self) -> bool {
        let mut byte = [0u8; 1];
        matches!(self.0.read(&mut byte), Ok(0))
    }
}

fn text(reply: &Resp) -> String {
    String::from_utf8(reply.bytes().unwrap_or_else(|| panic!("{reply:?}"))).unwrap()
}

/// CLIENT INFO's `name=value` fields.
fn field(info: &str, name: &str) -> String {
    info.trim_end()
        .split(' ')
        .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
        .unwrap_or_else(|| panic!("no {name} in {info:?}"))
        .to_string()
}

/// Waits for `path` to be gone.
fn gone(path: &Path) -> bool {
    let deadline = Instant::now() + WAIT;
    while path.exists() {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    true
}

/// What one server shows of a Unix client and its socket, with the
/// socket's path written `PATH` so the two servers compare.
fn observe(path: &Path, tcp: std::net::SocketAddr) -> Vec<String> {
    let p = path.to_str().unwrap();
    let mut seen = vec![];
    let meta = std::fs::metadata(path).unwrap();
    assert!(meta.file_type().is_socket(), "{p} is a socket");
    seen.push(format!("mode {:o}", meta.permissions().mode() & 0o777));
    let mut c = UnixClient::connect(path);
    let info = text(&c.command(&["CLIENT", "INFO"]));
    for name in ["addr", "laddr", "flags"] {
        seen.push(format!("{name}={}", field(&info, name).replace(p, "PATH")));
    }
    assert_eq!(text(&c.command(&["CLIENT", "TRACKING", "ON"])), "OK");
    let info = text(&c.command(&["CLIENT", "INFO"]));
    seen.push(format!("tracking flags={}", field(&info, "flags")));
    // A Unix client is local: `enable-debug-command local` lets it in.
    seen.push(format!("debug {}", text(&c.command(&["DEBUG", "SLEEP", "0"]))));
    for name in ["unixsocket", "unixsocketperm"] {
        let config = c.command(&["CONFIG", "GET", name]);
        let values: Vec<String> = config.items().iter().map(text).collect();
        seen.push(format!("config {}", values.join(" ").replace(p, "PATH")));
    }
    // MONITOR names a Unix client by its listener.
    let mut monitor = RawClient::connect(tcp).unwrap();
    assert_eq!(monitor.command(&["MONITOR"]).unwrap(), b"+OK\r\n");
    c.command(&["SET", "k", "v"]);
    let line = String::from_utf8(monitor.read_reply().unwrap()).unwrap();
    let client = line
        .split('[')
        .nth(1)
        .and_then(|r| r.split(']').next())
        .unwrap_or_default();
    seen.push(format!("monitor [{}]", client.replace(p, "PATH")));
    // CLIENT KILL by address, in both forms, from a TCP client.
    let mut admin = RawClient::connect(tcp).unwrap();
    let mut victim = UnixClient::connect(path);
    victim.command(&["PING"]);
    let addr = format!("{p}:0");
    let killed = admin.command(&["CLIENT", "KILL", "ADDR", &addr]).unwrap();
    seen.push(format!("kill addr {}", String::from_utf8_lossy(&killed).trim_end()));
    seen.push(format!("victim closed {}", victim.closed()));
    let mut old_form = UnixClient::connect(path);
    old_form.command(&["PING"]);
    let killed = admin.command(&["CLIENT", "KILL", &addr]).unwrap();
    seen.push(format!("kill old form {}", String::from_utf8_lossy(&killed).trim_end()));
    seen.push(format!("old-form victim closed {}", old_form.closed()));
    seen
}

/// The same observations on coordis and on Redis, each with a Unix socket
/// given `PERM`, in protected mode without a password and with DEBUG for
/// local clients only.
#[test]
fn unix_clients_are_served_shown_and_killed_as_redis_does() {
    let dir = TempDir::new("unixsock");
    let redis_sock = dir.0.join("redis.sock");
    let ours_sock = dir.0.join("coordis.sock");
    let perm = format!("{PERM:o}");
    let redis = RedisServer::start(&[
        "--unixsocket",
        redis_sock.to_str().unwrap(),
        "--unixsocketperm",
        &perm,
        "--enable-debug-command",
        "local",
        "--protected-mode",
        "yes",
    ])
    .unwrap();
    let mut builder = coordis::Server::builder().unix_socket(ours_sock.to_str().unwrap());
    builder.config_mut().unixsocketperm = PERM;
    builder.config_mut().enable_debug_command = "local".into();
    builder.config_mut().protected_mode = true;
    let server = builder.start_blocking().unwrap();
    assert_eq!(server.unix_socket(), Some(ours_sock.as_path()));
    let ours = observe(&ours_sock, server.addr());
    let expected: Vec<String> = [
        "mode 700",
        "addr=PATH:0",
        "laddr=PATH:0",
        "flags=U",
        "tracking flags=tU",
        "debug OK",
        "config unixsocket PATH",
        "config unixsocketperm 700",
        "monitor [0 unix:PATH]",
        // The observing client and the victim: both are PATH:0.
        "kill addr :2",
        "victim closed true",
        "kill old form +OK",
        "old-form victim closed true",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert_eq!(ours, expected);
    let Some(redis) = redis else {
        return;
    };
    let theirs = observe(&redis_sock, redis.addr());
    assert_eq!(ours, theirs);
}

/// redis-cli reaches coordis's socket as it reaches Redis's (`-s`).
#[test]
fn redis_cli_connects_with_dash_s() {
    let dir = TempDir::new("unixsock-cli");
    let sock = dir.0.join("c.sock");
    let server = coordis::Server::builder()
        .unix_socket(sock.to_str().unwrap())
        .start_blocking()
        .unwrap();
    let out = match Command::new("redis-cli")
        .args(["-s", sock.to_str().unwrap(), "CLIENT", "INFO"])
        .output()
    {
        Ok(out) => out,
        Err(e) if coordis::testing::require_redis() => panic!("COORDIS_REQUIRE_REDIS=1 but redis-cli: {e}"),
        Err(_) => {
            eprintln!("\n*** SKIPPED: redis-cli is not on PATH ***\n");
            return;
        }
    };
    let info = String::from_utf8(out.stdout).unwrap();
    assert_eq!(field(&info, "addr"), format!("{}:0", sock.display()), "{info}");
    assert_eq!(field(&info, "flags"), "U", "{info}");
    drop(server);
}

/// SHUTDOWN removes the socket file, on coordis as on Redis; a file left
/// at the path is replaced at start.
#[test]
fn shutdown_removes_the_socket_file() {
    let dir = TempDir::new("unixsock-shutdown");
    let ours_sock = dir.0.join("coordis.sock");
    std::fs::write(&ours_sock, b"left behind").unwrap();
    let server = coordis::Server::builder()
        .unix_socket(ours_sock.to_str().unwrap())
        .start_blocking()
        .unwrap();
    assert!(std::fs::metadata(&ours_sock).unwrap().file_type().is_socket());
    let mut c = UnixClient::connect(&ours_sock);
    c.0.write_all(&RawClient::encode(&[b"SHUTDOWN", b"NOSAVE"])).unwrap();
    assert!(c.closed(), "SHUTDOWN closes the connection");
    assert!(gone(&ours_sock), "coordis removed its socket file at shutdown");
    drop(server);

    let redis_sock = dir.0.join("redis.sock");
    let Some(mut redis) = RedisServer::start(&["--unixsocket", redis_sock.to_str().unwrap()]).unwrap() else {
        return;
    };
    let mut c = UnixClient::connect(&redis_sock);
    c.0.write_all(&RawClient::encode(&[b"SHUTDOWN", b"NOSAVE"])).unwrap();
    assert!(c.closed());
    assert!(redis.wait_exit(WAIT).unwrap().is_some());
    assert!(!redis_sock.exists(), "Redis removes its socket file at shutdown");
}

/// Redis's log line for a path it cannot bind (`None` without redis-server).
fn redis_open_failure(dir: &Path, path: &str) -> Option<String> {
    let log = dir.join("redis-fail.log");
    let status = Command::new("redis-server")
        .args(["--port", "0", "--save", "", "--unixsocket", path, "--logfile"])
        .arg(&log)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if status.is_err() {
        eprintln!("\n*** SKIPPED: redis-server is not on PATH; the Redis leg did not run ***\n");
        assert!(
            !coordis::testing::require_redis(),
            "COORDIS_REQUIRE_REDIS=1 but no redis-server"
        );
        return None;
    }
    let text = std::fs::read_to_string(&log).unwrap();
    let _ = std::fs::remove_file(&log);
    text.lines().find_map(|l| {
        l.split_once("# Failed opening Unix socket")
            .map(|(_, r)| format!("Failed opening Unix socket{r}"))
    })
}

/// A path that cannot be bound stops the start with Redis's reason.
#[test]
fn an_unbindable_path_fails_with_redis_reason() {
    let dir = TempDir::new("unixsock-fail");
    let missing = dir.0.join("no-such-dir").join("s.sock");
    let long: PathBuf = dir.0.join("x".repeat(120));
    for path in [missing, long] {
        let path = path.to_str().unwrap();
        let err = coordis::Server::builder()
            .unix_socket(path)
            .start_blocking()
            .unwrap_err();
        let ours = err.to_string();
        assert!(ours.starts_with("Failed opening Unix socket: "), "{ours}");
        if let Some(theirs) = redis_open_failure(&dir.0, path) {
            assert_eq!(ours, theirs);
        }
    }
}

/// `coordis-server --port 0 --unixsocket PATH`: the ready line names the
/// socket; the log has Redis's lines for it, in Redis's order; SIGTERM
/// removes the file.
#[test]
fn the_binary_announces_and_removes_its_socket() {
    let dir = TempDir::new("unixsock-bin");
    let sock = dir.0.join("bin.sock");
    let sock_text = sock.to_str().unwrap();
    let mut child = Command::new(BIN)
        .args([
            "--port",
            "0",
            "--save",
            "",
            "--unixsocket",
            sock_text,
            "--unixsocketperm",
            "770",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut child = {
        let stdout = child.stdout.take().unwrap();
        let guard = Kill(child);
        let mut line = String::new();
        std::io::BufReader::new(stdout).read_line(&mut line).unwrap();
        assert!(
            line.contains(&format!(",\"unixsocket\":\"{sock_text}\",")),
            "ready line: {line:?}"
        );
        guard
    };
    assert_eq!(std::fs::metadata(&sock).unwrap().permissions().mode() & 0o777, 0o770);
    assert_eq!(text(&UnixClient::connect(&sock).command(&["PING"])), "PONG");
    // SAFETY: signalling a child process this test started.
    unsafe { libc::kill(child.0.id() as i32, libc::SIGTERM) };
    let status = child.0.wait().unwrap();
    assert!(status.success(), "{status:?}");
    assert!(!sock.exists(), "the socket file is removed at exit");
    let mut log = String::new();
    child.0.stderr.take().unwrap().read_to_string(&mut log).unwrap();
    let at = |m: &str| log.find(m).unwrap_or_else(|| panic!("no {m:?} in {log}"));
    let ready = format!("The server is now ready to accept connections at {sock_text}");
    assert!(at("Ready to accept connections") < at(&ready));
    assert!(at("User requested shutdown...") < at("Removing the unix socket file."));
    assert!(at("Removing the unix socket file.") < at("coordis is now ready to exit, bye bye..."));
}
