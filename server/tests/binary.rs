//! The `coordis-server` binary as a drop-in for `redis-server`.

use std::io::Read;
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use coordis::testing::{free_port, RawClient, TempDir};

const BIN: &str = env!("CARGO_BIN_EXE_coordis-server");

/// Kills the child if a test fails before stopping it.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn wait_ready(addr: SocketAddr) -> RawClient {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(mut c) = RawClient::connect(addr) {
            if c.command(&["PING"]).is_ok() {
                return c;
            }
        }
        assert!(Instant::now() < deadline, "coordis-server did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Starts coordis-server with `args` (and `--save ""` unless they set
/// `--save`: a stopped server must not leave a dump.rdb behind).
fn start(args: &[&str]) -> Running {
    let no_save: &[&str] = if args.contains(&"--save") { &[] } else { &["--save", ""] };
    Running(
        Command::new(BIN)
            .args(args)
            .args(no_save)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    )
}

#[test]
fn accepts_redis_server_flags_and_stops_on_sigterm() {
    let port = free_port().unwrap();
    let mut server = start(&[
        "--port",
        &port.to_string(),
        "--save",
        "",
        "--appendonly",
        "no",
        "--databases",
        "4",
    ]);
    let mut c = wait_ready(([127, 0, 0, 1], port).into());
    assert_eq!(
        c.command(&["SELECT", "4"]).unwrap(),
        b"-ERR DB index is out of range\r\n"
    );
    assert_eq!(
        c.command(&["CONFIG", "GET", "appendonly"]).unwrap(),
        b"*2\r\n$10\r\nappendonly\r\n$2\r\nno\r\n"
    );
    // SIGTERM: graceful shutdown, exit code 0.
    // SAFETY: signalling a child process this test started.
    unsafe { libc::kill(server.0.id() as i32, libc::SIGTERM) };
    let status = server.0.wait().unwrap();
    assert!(status.success(), "{status:?}");
}

#[test]
fn port_in_use_is_one_clear_error_and_exit_code_1() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let out = Command::new(BIN).args(["--port", &port]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    // The startup log lines, then one error line saying why.
    let lines: Vec<&str> = stderr.lines().filter(|l| !is_redis_log_line(l, out_pid(l))).collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(
        lines[0].contains(&port) && lines[0].to_lowercase().contains("in use"),
        "{stderr}"
    );
}

#[test]
fn config_file_then_flags() {
    let port = free_port().unwrap();
    let dir = std::env::temp_dir().join(format!("coordis-conf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let conf = dir.join("redis.conf");
    std::fs::write(
        &conf,
        format!("# test config\nport {port}\nrequirepass \"from file\"\nsave \"\"\ndaemonize no\n"),
    )
    .unwrap();
    let _server = start(&[conf.to_str().unwrap(), "--maxclients", "50"]);
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let mut c = wait_ready(addr);
    assert_eq!(
        c.command(&["GET", "x"]).unwrap(),
        b"-NOAUTH Authentication required.\r\n"
    );
    assert_eq!(c.command(&["AUTH", "from file"]).unwrap(), b"+OK\r\n");
    assert_eq!(
        c.command(&["CONFIG", "GET", "maxclients"]).unwrap(),
        b"*2\r\n$10\r\nmaxclients\r\n$2\r\n50\r\n"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn unknown_directive_fails_fast() {
    let out = Command::new(BIN)
        .args(["--port", "0", "--no-such-directive", "1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no-such-directive"));
}

#[test]
fn shutdown_command_stops_the_process() {
    let port = free_port().unwrap();
    let mut server = start(&["--port", &port.to_string()]);
    let mut c = wait_ready(([127, 0, 0, 1], port).into());
    c.send(&RawClient::encode(&[b"SHUTDOWN", b"NOSAVE"])).unwrap();
    // Redis closes the connection without a reply.
    assert_eq!(c.read_to_close().unwrap(), b"");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(status) = server.0.try_wait().unwrap() {
            assert!(status.success());
            break;
        }
        assert!(Instant::now() < deadline, "still running after SHUTDOWN");
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut err = String::new();
    server.0.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert!(err.contains("SHUTDOWN"), "{err}");
}

/// The directives README's table lists, with the value a default server
/// shows for each (so that every one is valid).
fn readme_directives() -> Vec<(String, String)> {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap();
    let table = readme
        .split("Directives coordis implements")
        .nth(1)
        .expect("README's directive table");
    let defaults = coordis::Server::builder().start_blocking().unwrap();
    let mut c = RawClient::connect(defaults.addr()).unwrap();
    let mut out = vec![];
    for line in table
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
    {
        let first = line.split('|').nth(1).unwrap_or_default();
        for name in first.split('`').skip(1).step_by(2) {
            if matches!(name, "port" | "bind") {
                continue;
            }
            let reply = c.command(&["CONFIG", "GET", name]).unwrap();
            let text = String::from_utf8(reply).unwrap();
            let value = text.split("\r\n").nth(4).unwrap_or_else(|| panic!("{name}: {text:?}"));
            out.push((name.to_string(), value.to_string()));
        }
    }
    assert!(out.len() > 20, "README table: {out:?}");
    out
}

/// Every directive in README's table starts the binary, on the command line
/// and in a config file, and reads back through CONFIG GET.
#[test]
fn every_readme_directive_starts_the_binary() {
    let directives = readme_directives();
    let dir = std::env::temp_dir().join(format!("coordis-directives-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let conf = dir.join("redis.conf");
    let mut file = String::new();
    for (name, value) in &directives {
        file.push_str(&format!("{name} \"{value}\"\n"));
    }
    std::fs::write(&conf, file).unwrap();
    for from_file in [false, true] {
        let port = free_port().unwrap();
        let port_text = port.to_string();
        let mut args: Vec<String> = vec![];
        if from_file {
            args.push(conf.to_str().unwrap().to_string());
        } else {
            for (name, value) in &directives {
                args.push(format!("--{name}"));
                args.extend(value.split(' ').filter(|w| !w.is_empty()).map(String::from));
                if value.is_empty() {
                    args.push(String::new());
                }
            }
        }
        args.extend(["--port".to_string(), port_text]);
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut server = start(&refs);
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut c = loop {
            if let Ok(Some(status)) = server.0.try_wait() {
                let mut err = String::new();
                server.0.stderr.take().unwrap().read_to_string(&mut err).unwrap();
                panic!("coordis-server exited ({status}) with {args:?}: {err}");
            }
            if let Ok(mut c) = RawClient::connect(addr) {
                if c.command(&["PING"]).is_ok() {
                    break c;
                }
            }
            assert!(Instant::now() < deadline, "coordis-server did not start");
            std::thread::sleep(Duration::from_millis(20));
        };
        for (name, value) in &directives {
            let reply = String::from_utf8(c.command(&["CONFIG", "GET", name]).unwrap()).unwrap();
            assert_eq!(
                reply.split("\r\n").nth(4),
                Some(value.as_str()),
                "{name} (from a file: {from_file})"
            );
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `--port 0` picks a free port; a fixture learns it from the JSON ready
/// line on stdout or from `--port-file`, which is removed at a clean exit.
#[test]
fn port_zero_announces_the_chosen_port() {
    use std::io::BufRead;
    let dir = std::env::temp_dir().join(format!("coordis-port-file-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let port_file = dir.join("port");
    let mut child = Running(
        Command::new(BIN)
            .args(["--port", "0", "--port-file", port_file.to_str().unwrap()])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut line = String::new();
    std::io::BufReader::new(child.0.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port: u16 = line
        .split("\"port\":")
        .nth(1)
        .and_then(|rest| rest.split(',').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("ready line: {line:?}"));
    assert_ne!(port, 0);
    assert!(line.starts_with("{\"ready\":true,"), "{line:?}");
    assert!(
        line.contains(&format!("\"addr\":\"127.0.0.1:{port}\"")) && line.contains(&format!("\"pid\":{}", child.0.id())),
        "{line:?}"
    );
    assert_eq!(std::fs::read_to_string(&port_file).unwrap(), format!("{port}\n"));
    let mut c = wait_ready(([127, 0, 0, 1], port).into());
    assert_eq!(c.command(&["CONFIG", "GET", "port-file"]).unwrap(), {
        let path = port_file.to_str().unwrap();
        format!("*2\r\n$9\r\nport-file\r\n${}\r\n{path}\r\n", path.len()).into_bytes()
    });
    assert!(
        c.command(&["SHUTDOWN", "NOSAVE"]).is_err(),
        "SHUTDOWN closes the connection"
    );
    let status = child.0.wait().unwrap();
    assert!(status.success(), "{status:?}");
    assert!(!port_file.exists(), "the port file is removed at exit");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Stops `server` with SIGTERM and returns what it wrote to stderr.
fn stop_and_read_stderr(mut server: Running) -> String {
    // SAFETY: signalling a child process this test started.
    unsafe { libc::kill(server.0.id() as i32, libc::SIGTERM) };
    let status = server.0.wait().unwrap();
    assert!(status.success(), "{status:?}");
    let mut err = String::new();
    server.0.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    err
}

/// The pid a log line starts with (0 if none).
fn out_pid(line: &str) -> u32 {
    line.split(':').next().and_then(|p| p.parse().ok()).unwrap_or(0)
}

/// `pid:M dd Mon yyyy hh:mm:ss.mmm <mark> message`, Redis's log line.
fn is_redis_log_line(line: &str, pid: u32) -> bool {
    let Some(rest) = line.strip_prefix(&format!("{pid}:M ")) else {
        return false;
    };
    let b = rest.as_bytes();
    // "01 Dec 2026 23:48:12.062 * "
    b.len() > 27
        && b[..2].iter().all(u8::is_ascii_digit)
        && b[3..6].iter().all(u8::is_ascii_alphabetic)
        && b[7..11].iter().all(u8::is_ascii_digit)
        && rest[12..24].chars().all(|c| c.is_ascii_digit() || c == ':' || c == '.')
        && matches!(b[25], b'.' | b'-' | b'*' | b'#')
        && b[26] == b' '
}

#[test]
fn logs_redis_lines_without_colour_and_the_startup_lines_tools_wait_for() {
    let port = free_port().unwrap();
    let server = start(&["--port", &port.to_string()]);
    let pid = server.0.id();
    wait_ready(([127, 0, 0, 1], port).into());
    let err = stop_and_read_stderr(server);
    assert!(!err.contains('\x1b'), "colour codes in a redirected log: {err:?}");
    for line in err.lines() {
        assert!(is_redis_log_line(line, pid), "not a Redis log line: {line:?}");
    }
    let messages: Vec<&str> = err.lines().map(|l| &l[pid.to_string().len() + 30..]).collect();
    let at = |m: &str| {
        messages
            .iter()
            .position(|l| l == &m)
            .unwrap_or_else(|| panic!("no {m:?} in {err}"))
    };
    assert!(at("Configuration loaded") < at("Server initialized"));
    assert!(at("Server initialized") < at("Ready to accept connections"));
    assert!(at(&format!("Running mode=standalone, port={port}.")) < at("Ready to accept connections"));
    assert!(at("Ready to accept connections") < at("Received SIGTERM scheduling shutdown..."));
    assert!(at("User requested shutdown...") < at("coordis is now ready to exit, bye bye..."));
}

#[test]
fn the_tracing_format_has_no_colour_when_redirected_or_with_no_color() {
    for no_color in [None, Some("1")] {
        let port = free_port().unwrap();
        let dir = coordis::testing::TempDir::new("tracing-format");
        let mut command = Command::new(BIN);
        command
            .args(["--port", &port.to_string(), "--log-format", "tracing", "--save", ""])
            .args(["--dir", dir.text()])
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if let Some(v) = no_color {
            command.env("NO_COLOR", v);
        }
        let server = Running(command.spawn().unwrap());
        wait_ready(([127, 0, 0, 1], port).into());
        let err = stop_and_read_stderr(server);
        assert!(err.contains("Ready to accept connections"), "{err}");
        assert!(!err.contains('\x1b'), "colour codes: {err:?}");
    }
}

#[test]
fn logfile_is_appended_to_and_an_unwritable_one_stops_the_start() {
    let dir = std::env::temp_dir().join(format!("coordis-logfile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("coordis.log");
    std::fs::write(&log, "an earlier line\n").unwrap();
    let port = free_port().unwrap();
    let server = start(&["--port", &port.to_string(), "--logfile", log.to_str().unwrap()]);
    wait_ready(([127, 0, 0, 1], port).into());
    let err = stop_and_read_stderr(server);
    let written = std::fs::read_to_string(&log).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(written.starts_with("an earlier line\n"), "{written}");
    assert!(written.contains("Ready to accept connections"), "{written}");
    assert_eq!(err, "", "with a logfile, nothing on stderr");

    let out = Command::new(BIN)
        .args(["--port", "0", "--logfile", "/nonexistent-dir/coordis.log"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("Can't open the log file"));
}

#[test]
fn version_and_help_answer_as_redis_server_does() {
    let out = Command::new(BIN).arg("--version").output().unwrap();
    let line = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success());
    assert!(
        line.starts_with(&format!("Redis server v={} sha=", coordis::REDIS_VERSION)),
        "{line}"
    );
    assert!(
        line.trim_end()
            .ends_with(&format!("build=coordis-{}", env!("CARGO_PKG_VERSION"))),
        "{line}"
    );
    let out = Command::new(BIN).arg("-h").output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("Usage: coordis-server [/path/to/redis.conf] [options]"));
}

/// Starts the binary on a copy of `conf` in a temp dir, with the flags a
/// packaged service would not have (port 0, the dir, stderr logging, no
/// daemon, no pid file) after the file, as redis-server reads them, and
/// returns its port and what it logged once stopped.
fn start_on_stock_file(conf: &std::path::Path, tag: &str) -> (u16, String, Vec<String>) {
    use std::io::BufRead;
    let dir = std::env::temp_dir().join(format!("coordis-stock-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let copy = dir.join("redis.conf");
    std::fs::copy(conf, &copy).unwrap();
    let dir_text = dir.to_str().unwrap();
    let mut child = Running(
        Command::new(BIN)
            .args([copy.to_str().unwrap(), "--port", "0", "--dir", dir_text])
            .args(["--logfile", "", "--daemonize", "no", "--pidfile", ""])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut line = String::new();
    std::io::BufReader::new(child.0.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port: u16 = line
        .split("\"port\":")
        .nth(1)
        .and_then(|rest| rest.split(',').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| {
            let mut err = String::new();
            child.0.stderr.take().unwrap().read_to_string(&mut err).unwrap();
            panic!("{} did not load: {err}", conf.display())
        });
    let mut c = wait_ready(([127, 0, 0, 1], port).into());
    let mut replies = vec![];
    for probe in [
        &["CONFIG", "GET", "repl-diskless-load"][..],
        &["CONFIG", "GET", "client-output-buffer-limit"],
        &["INFO", "server"],
    ] {
        replies.push(String::from_utf8(c.command(probe).unwrap()).unwrap());
    }
    let err = stop_and_read_stderr(child);
    let _ = std::fs::remove_dir_all(&dir);
    // The config file as INFO reports it: the copy's absolute path.
    assert!(
        replies[2].contains(&format!("config_file:{}\r\n", copy.display())),
        "{}",
        replies[2]
    );
    (port, err, replies)
}

/// Debian's `/etc/redis/redis.conf` (installed with redis-server) and the
/// `redis.conf` of Redis 7.0.15's source tree load unmodified; every
/// directive coordis does nothing with is logged once; the file's values
/// read back.
#[test]
fn the_stock_config_files_load() {
    let installed = std::path::Path::new("/etc/redis/redis.conf");
    let source = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/redis-7.0.15.conf"));
    let mut files = vec![(source, "source")];
    if installed.exists() {
        files.push((installed, "debian"));
    } else {
        let missing = "the installed /etc/redis/redis.conf: redis-server is not installed here";
        assert!(!coordis::testing::require_redis(), "{missing}");
        eprintln!("SKIPPED {missing}");
    }
    for (conf, tag) in files {
        let (port, log, replies) = start_on_stock_file(conf, tag);
        assert_ne!(port, 0);
        let ignored: Vec<&str> = log.lines().filter(|l| l.contains("has no effect in coordis")).collect();
        assert!(ignored.iter().any(|l| l.contains("'activerehashing'")), "{log}");
        // Read by the server, so not among them (they were).
        for effective in ["'client-output-buffer-limit'", "'tcp-backlog'"] {
            assert!(!ignored.iter().any(|l| l.contains(effective)), "{effective}: {log}");
        }
        let mut once = ignored.clone();
        once.sort();
        once.dedup();
        assert_eq!(once.len(), ignored.len(), "each ignored directive logged once: {log}");
        assert!(replies[0].ends_with("$8\r\ndisabled\r\n"), "{}", replies[0]);
        assert!(
            replies[1].contains("normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60"),
            "{}",
            replies[1]
        );
    }
}

/// `redis-server`, or `None` (a skip, or a failure under
/// `COORDIS_REQUIRE_REDIS=1`) when it is not installed.
fn redis_server_program() -> Option<&'static str> {
    let found = Command::new("redis-server")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok();
    if !found {
        assert!(!coordis::testing::require_redis(), "redis-server is not on PATH");
        eprintln!("SKIPPED against Redis: redis-server is not installed");
    }
    found.then_some("redis-server")
}

/// The same steps on redis-server, when it is installed, give `ours`
/// (what coordis-server gave).
fn same_on_redis<T: PartialEq + std::fmt::Debug>(ours: &T, steps: impl FnOnce(&str) -> T) {
    if let Some(redis) = redis_server_program() {
        assert_eq!(&steps(redis), ours, "redis-server (left) and coordis-server");
    }
}

/// `--daemonize yes --pidfile F` returns at once with status 0, the
/// server goes on in the background with its pid in F, and SHUTDOWN
/// removes F, as with redis-server (`redis-server --daemonize yes` is how
/// many CI scripts start Redis; it was accepted and ignored, so the
/// command never returned).
fn daemonized(program: &str) -> (bool, bool, bool, bool) {
    let dir = std::env::temp_dir().join(format!("coordis-daemonize-{}-{}", std::process::id(), program.len()));
    std::fs::create_dir_all(&dir).unwrap();
    let pidfile = dir.join("server.pid");
    let port = free_port().unwrap();
    let started = Instant::now();
    let status = Command::new(program)
        .args([
            "--port",
            &port.to_string(),
            "--save",
            "",
            "--daemonize",
            "yes",
            "--pidfile",
        ])
        .arg(&pidfile)
        .arg("--dir")
        .arg(&dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    let returned_at_once = status.success() && started.elapsed() < Duration::from_secs(5);
    let mut c = wait_ready(([127, 0, 0, 1], port).into());
    let server_pid = text_field(&c.command(&["INFO", "server"]).unwrap(), "process_id");
    let written = std::fs::read_to_string(&pidfile).unwrap_or_default();
    let pid_matches = written.trim() == server_pid;
    let _ = c.command(&["SHUTDOWN", "NOSAVE"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while pidfile.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let removed = !pidfile.exists();
    let _ = std::fs::remove_dir_all(&dir);
    (returned_at_once, written.ends_with('\n'), pid_matches, removed)
}

/// A field of an INFO reply.
fn text_field(reply: &[u8], name: &str) -> String {
    let text = String::from_utf8_lossy(reply);
    let prefix = format!("{name}:");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_default()
        .trim()
        .to_string()
}

#[test]
fn daemonize_and_pidfile_work_as_in_redis() {
    let ours = daemonized(BIN);
    assert_eq!(ours, (true, true, true, true), "coordis-server");
    if let Some(redis) = redis_server_program() {
        assert_eq!(daemonized(redis), ours, "redis-server (left) and coordis-server");
    }
}

/// What a `Type=notify` systemd unit hears from the server started with
/// `--supervised systemd` and a save point, until it is ready, then what
/// INFO says of it, then what it hears as SHUTDOWN stops the server.
fn systemd_messages(program: &str) -> Vec<String> {
    use std::os::unix::net::UnixDatagram;
    let dir = std::env::temp_dir().join(format!("coordis-notify-{}-{}", std::process::id(), program.len()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("notify");
    let socket = UnixDatagram::bind(&path).unwrap();
    socket.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let port = free_port().unwrap();
    let server = Running(
        Command::new(program)
            .args([
                "--port",
                &port.to_string(),
                "--save",
                "3600 1",
                "--supervised",
                "systemd",
            ])
            .arg("--dir")
            .arg(&dir)
            .env("NOTIFY_SOCKET", &path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut messages = vec![];
    let mut datagram = [0u8; 512];
    while !messages.iter().any(|m| m == "READY=1\n") {
        let n = socket.recv(&mut datagram).expect("a notification within 10 s");
        messages.push(String::from_utf8_lossy(&datagram[..n]).into_owned());
    }
    let mut c = wait_ready(([127, 0, 0, 1], port).into());
    let info = c.command(&["INFO", "server"]).unwrap();
    messages.push(format!(
        "INFO process_supervised:{}",
        text_field(&info, "process_supervised")
    ));
    let _ = c.command(&["SHUTDOWN"]);
    let mut server = server;
    let _ = server.0.wait();
    socket.set_nonblocking(true).unwrap();
    while let Ok(n) = socket.recv(&mut datagram) {
        messages.push(String::from_utf8_lossy(&datagram[..n]).into_owned());
    }
    let _ = std::fs::remove_dir_all(&dir);
    messages
}

#[test]
fn supervised_systemd_notifies_readiness_as_redis_does() {
    let ours = systemd_messages(BIN);
    assert_eq!(
        ours,
        [
            "STATUS=Redis is loading...\n",
            "STATUS=Ready to accept connections\n",
            "READY=1\n",
            "INFO process_supervised:systemd",
            "STOPPING=1\n",
            "STATUS=Saving the final RDB snapshot\n",
        ]
    );
    if let Some(redis) = redis_server_program() {
        assert_eq!(systemd_messages(redis), ours, "redis-server (left) and coordis-server");
    }
}

/// Starts `program` with `args` in `dir`, its `oom_score_adj` raised to
/// 100 first (so that `oom-score-adj relative` has a base to add to), and
/// a client once it answers.
fn start_program(program: &str, port: u16, args: &[&str], dir: &std::path::Path) -> (Running, RawClient) {
    let server = Running(
        Command::new("sh")
            .args([
                "-c",
                "echo 100 > /proc/self/oom_score_adj && exec \"$@\"",
                "sh",
                program,
            ])
            .args(["--port", &port.to_string(), "--save", ""])
            .args(args)
            .current_dir(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let client = wait_ready(([127, 0, 0, 1], port).into());
    (server, client)
}

/// The process's `oom_score_adj` after each step: at start (`relative`
/// over the base of 100), `absolute`, as a replica, as a primary again,
/// new values, `no` (the base back), and the replies to the steps.
fn oom_scores(program: &str) -> Vec<String> {
    // Removed when dropped, the test passing or not.
    let dir = TempDir::new("oom");
    let port = free_port().unwrap();
    let nowhere = free_port().unwrap().to_string();
    let (server, mut c) = start_program(
        program,
        port,
        &["--oom-score-adj-values", "10 20 30", "--oom-score-adj", "yes"],
        &dir.0,
    );
    let score_file = format!("/proc/{}/oom_score_adj", server.0.id());
    let score = || std::fs::read_to_string(&score_file).unwrap().trim().to_string();
    let mut seen = vec![score()];
    let steps: [&[&str]; 7] = [
        &["CONFIG", "SET", "oom-score-adj", "absolute"],
        &["REPLICAOF", "127.0.0.1", &nowhere],
        &["REPLICAOF", "NO", "ONE"],
        &["CONFIG", "SET", "oom-score-adj-values", "11 21 31"],
        &["CONFIG", "SET", "oom-score-adj", "no"],
        &["CONFIG", "SET", "oom-score-adj-values", "1 2 3000"],
        &["CONFIG", "GET", "oom-score-adj-values"],
    ];
    for step in steps {
        let reply = c.command(step).unwrap();
        seen.push(format!("{} -> {}", String::from_utf8_lossy(&reply).trim_end(), score()));
    }
    drop(server);
    seen
}

/// `oom-score-adj` and its values set the process's OOM-killer score for
/// its role, at start, on CONFIG SET and on REPLICAOF, as Redis does (they
/// were accepted and ignored).
#[test]
fn oom_score_adj_follows_the_role_as_in_redis() {
    let ours = oom_scores(BIN);
    assert_eq!(
        ours,
        [
            "110",
            "+OK -> 10",
            "+OK -> 20",
            "+OK -> 10",
            "+OK -> 11",
            "+OK -> 100",
            "-ERR CONFIG SET failed (possibly related to argument 'oom-score-adj-values') - Invalid oom-score-adj-values, elements must be between -2000 and 2000. -> 100",
            "*2\r\n$20\r\noom-score-adj-values\r\n$8\r\n11 21 31 -> 100",
        ]
    );
    if let Some(redis) = redis_server_program() {
        assert_eq!(oom_scores(redis), ours, "redis-server (left) and coordis-server");
    }
}

/// What `ss` shows of the sockets listening on `port` and on the Unix
/// socket `path`: the backlog (its Send-Q column), the mark and whether
/// an IPv6 socket is IPv6 only, one line a socket.
fn listening(port: u16, path: &std::path::Path) -> Vec<String> {
    let ss = |args: &[&str]| -> String {
        let out = Command::new("ss")
            .args(args)
            .output()
            .expect("`ss` (iproute2) shows the listening sockets");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let mut lines = vec![];
    for line in ss(&["-ltneH", &format!("sport = :{port}")]).lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let flags: Vec<&str> = words
            .iter()
            .copied()
            .filter(|w| w.starts_with("fwmark:") || w.starts_with("v6only:"))
            .collect();
        lines.push(format!("{} backlog {} {}", words[3], words[2], flags.join(" ")));
    }
    for line in ss(&["-lxH"]).lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        if words.get(4) == Some(&path.to_str().unwrap()) {
            lines.push(format!("unix backlog {}", words[3]));
        }
    }
    lines.sort();
    lines
}

fn listeners_of(program: &str) -> Vec<String> {
    // Removed when dropped, the test passing or not.
    let dir = TempDir::new("listen");
    let port = free_port().unwrap();
    let path = dir.0.join("server.sock");
    let (server, _c) = start_program(
        program,
        port,
        &[
            "--bind",
            "* -::*",
            "--tcp-backlog",
            "77",
            "--socket-mark-id",
            "5",
            "--unixsocket",
            path.to_str().unwrap(),
        ],
        &dir.0,
    );
    let seen = listening(port, &path);
    drop(server);
    seen
}

/// `tcp-backlog` is every listener's backlog and `socket-mark-id` the
/// TCP listeners' mark, and `bind * -::*` (Redis's own default) listens on
/// both families, as in Redis (the two were accepted and ignored, and that
/// bind failed with "Address already in use").
#[test]
fn listeners_take_the_backlog_and_the_mark_as_in_redis() {
    let ours = listeners_of(BIN);
    // A machine without IPv6 has no `[::]` listener (`-::*` is optional).
    let has_v6 = ours.iter().any(|l| l.starts_with("[::]"));
    let mut expected = vec!["0.0.0.0:PORT backlog 77 fwmark:0x5".to_string()];
    if has_v6 {
        expected.push("[::]:PORT backlog 77 fwmark:0x5 v6only:1".to_string());
    }
    expected.push("unix backlog 77".to_string());
    let unported = |lines: &[String]| -> Vec<String> {
        lines
            .iter()
            .map(|l| match l.split_once(' ') {
                Some((addr, rest)) if addr.contains(':') => {
                    format!("{}:PORT {rest}", addr.rsplit_once(':').unwrap().0)
                }
                _ => l.clone(),
            })
            .collect()
    };
    assert_eq!(unported(&ours), expected);
    if let Some(redis) = redis_server_program() {
        assert_eq!(unported(&listeners_of(redis)), expected, "redis-server");
    }
}

/// The role letters of `program`'s log lines (`pid:R ...`) that carry
/// these messages, started as a replica of `primary` with the log in a
/// file, made a primary, and stopped.
fn role_letters(program: &str, primary: u16) -> Vec<String> {
    // Removed when dropped, the test passing or not.
    let dir = TempDir::new("role");
    let log = dir.0.join("server.log");
    let port = free_port().unwrap();
    let server = Running(
        Command::new(program)
            .args(["--port", &port.to_string(), "--save", "", "--replicaof", "127.0.0.1"])
            .arg(primary.to_string())
            .arg("--logfile")
            .arg(&log)
            .arg("--dir")
            .arg(&dir.0)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut c = wait_ready(([127, 0, 0, 1], port).into());
    let deadline = Instant::now() + Duration::from_secs(10);
    while text_field(&c.command(&["INFO", "replication"]).unwrap(), "master_link_status") != "up" {
        assert!(Instant::now() < deadline, "{program}: the replica's link");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(c.command(&["REPLICAOF", "NO", "ONE"]).unwrap(), b"+OK\r\n");
    let _ = c.command(&["SHUTDOWN", "NOSAVE"]);
    let mut server = server;
    let _ = server.0.wait();
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let messages = [
        "Connecting to MASTER",
        "MASTER <-> REPLICA sync: Finished with success",
        "MASTER MODE enabled",
        "User requested shutdown...",
    ];
    messages
        .iter()
        .map(|m| {
            let line = text.lines().find(|l| l.contains(m)).unwrap_or_default();
            let role = line.split_once(':').map_or("", |(_, rest)| &rest[..1]);
            format!("{role} {m}")
        })
        .collect()
}

/// A replica's log lines carry Redis's `S`, a primary's `M` (they all
/// read `M`).
#[test]
fn log_lines_carry_the_role_as_redis_writes_it() {
    let primary = coordis::Server::builder().start_blocking().unwrap();
    let port = primary.addr().port();
    let mut c = RawClient::connect(primary.addr()).unwrap();
    assert_eq!(
        c.command(&["CONFIG", "SET", "repl-diskless-sync-delay", "0"]).unwrap(),
        b"+OK\r\n"
    );
    let ours = role_letters(BIN, port);
    assert_eq!(
        ours,
        [
            "S Connecting to MASTER",
            "S MASTER <-> REPLICA sync: Finished with success",
            "M MASTER MODE enabled",
            "M User requested shutdown...",
        ]
    );
    if let Some(redis) = redis_server_program() {
        assert_eq!(
            role_letters(redis, port),
            ours,
            "redis-server (left) and coordis-server"
        );
    }
}

/// `program` serving on a free port with `--shutdown-timeout secs`, its
/// log in a temp dir, and a replica online that never acknowledges what it
/// is sent (a raw connection after `PSYNC ? -1`).
struct LaggingPrimary {
    server: Running,
    /// Removed when dropped, the test passing or not.
    dir: TempDir,
    addr: SocketAddr,
    replica: std::net::TcpStream,
}

impl LaggingPrimary {
    fn start(program: &str, secs: u64) -> LaggingPrimary {
        use std::io::Write;
        let dir = TempDir::new("lagging");
        let port = free_port().unwrap();
        let server = Running(
            Command::new(program)
                .args([
                    "--port",
                    &port.to_string(),
                    "--save",
                    "",
                    "--shutdown-timeout",
                    &secs.to_string(),
                ])
                // No PING in the stream while a test counts its bytes.
                .args([
                    "--repl-diskless-sync",
                    "no",
                    "--repl-ping-replica-period",
                    "60",
                    "--logfile",
                ])
                .arg(dir.0.join("server.log"))
                .arg("--dir")
                .arg(&dir.0)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        let mut c = wait_ready(addr);
        let mut replica = std::net::TcpStream::connect(addr).unwrap();
        replica.write_all(b"REPLCONF listening-port 1\r\n").unwrap();
        let mut ok = [0u8; 5];
        replica.read_exact(&mut ok).unwrap();
        replica.write_all(b"PSYNC ? -1\r\n").unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while !String::from_utf8_lossy(&c.command(&["INFO", "replication"]).unwrap()).contains("state=online") {
            assert!(Instant::now() < deadline, "{program}: the replica online");
            std::thread::sleep(Duration::from_millis(20));
        }
        LaggingPrimary {
            server,
            dir,
            addr,
            replica,
        }
    }

    fn client(&self) -> RawClient {
        RawClient::connect(self.addr).unwrap()
    }

    /// Waits for the process to exit (10 s at most).
    fn wait_exit(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.server.0.try_wait().unwrap().is_none() {
            assert!(Instant::now() < deadline, "the server did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The messages of the log's lines holding one of `wanted`, in order
    /// (past the pid, role, time and level: `7:M 08 Dec 2026 02:44:24.395
    /// * `), numbers shown as `N` (offsets and lags differ between servers).
    fn log_lines(&self, wanted: &[&str]) -> Vec<String> {
        let text = std::fs::read_to_string(self.dir.0.join("server.log")).unwrap_or_default();
        text.lines()
            .filter(|l| wanted.iter().any(|w| l.contains(w)))
            .filter_map(|l| l.splitn(7, ' ').nth(6))
            .map(|l| {
                let mut out = String::new();
                for c in l.chars() {
                    if !c.is_ascii_digit() {
                        out.push(c);
                    } else if !out.ends_with('N') {
                        out.push('N');
                    }
                }
                out
            })
            .collect()
    }
}

/// The order of `program`'s log lines as SIGTERM stops it while a replica
/// lags behind.
fn shutdown_lines_with_a_lagging_replica(program: &str) -> Vec<String> {
    let mut p = LaggingPrimary::start(program, 1);
    assert_eq!(p.client().command(&["SET", "k", "v"]).unwrap(), b"+OK\r\n");
    // SAFETY: signalling a child process this test started.
    unsafe { libc::kill(p.server.0.id() as i32, libc::SIGTERM) };
    p.wait_exit();
    p.log_lines(&[
        "User requested shutdown...",
        "Waiting for replicas before shutting down.",
    ])
}

/// A signal's shutdown says it started before it waits for lagging
/// replicas, as Redis's `prepareForShutdown` logs it.
#[test]
fn a_shutdown_is_announced_before_it_waits_for_replicas_as_in_redis() {
    let ours = shutdown_lines_with_a_lagging_replica(BIN);
    assert_eq!(
        ours,
        [
            "User requested shutdown...",
            "Waiting for replicas before shutting down."
        ]
    );
    if let Some(redis) = redis_server_program() {
        assert_eq!(shutdown_lines_with_a_lagging_replica(redis), ours, "redis-server");
    }
}

/// A reply, `<no reply>` when none came within the read timeout, or
/// `<closed>`.
fn reply_or_silence(c: &mut RawClient) -> String {
    match c.read_reply() {
        Ok(reply) => String::from_utf8_lossy(&reply).into_owned(),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => "<closed>".into(),
        Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
            "<no reply>".into()
        }
        Err(e) => format!("<{e}>"),
    }
}

/// SHUTDOWN with a lagging replica on `program`: what the clients see
/// while it waits, ABORT, then a SHUTDOWN left to its timeout, and the
/// log lines.
fn shutdown_waiting_for_a_replica(program: &str) -> Vec<String> {
    const WAIT: Duration = Duration::from_millis(300);
    let mut p = LaggingPrimary::start(program, 2);
    let mut seen = vec![];
    let (mut a, mut b, mut c) = (p.client(), p.client(), p.client());
    assert_eq!(b.command(&["SET", "k", "1"]).unwrap(), b"+OK\r\n");
    a.send(&RawClient::encode(&[b"SHUTDOWN"])).unwrap();
    a.set_read_timeout(Some(WAIT)).unwrap();
    seen.push(format!("SHUTDOWN: {}", reply_or_silence(&mut a)));
    let left: i64 = c.info_field("server", "shutdown_in_milliseconds").parse().unwrap();
    seen.push(format!(
        "shutdown_in_milliseconds within the timeout: {}",
        (1..=2000).contains(&left)
    ));
    b.send(&RawClient::encode(&[b"SET", b"k", b"2"])).unwrap();
    b.set_read_timeout(Some(WAIT)).unwrap();
    seen.push(format!("a write meanwhile: {}", reply_or_silence(&mut b)));
    seen.push(format!(
        "a read meanwhile: {}",
        String::from_utf8_lossy(&c.command(&["GET", "k"]).unwrap())
    ));
    seen.push(format!(
        "ABORT: {}",
        String::from_utf8_lossy(&c.command(&["SHUTDOWN", "ABORT"]).unwrap())
    ));
    a.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    // (Redis 7.0.15 crashes on the next command of a client it unblocked
    // so: this one sends none.)
    seen.push(format!("the SHUTDOWN then: {}", reply_or_silence(&mut a)));
    b.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    seen.push(format!("the write then: {}", reply_or_silence(&mut b)));
    seen.push(format!(
        "ABORT again: {}",
        String::from_utf8_lossy(&c.command(&["SHUTDOWN", "ABORT"]).unwrap())
    ));
    let info = String::from_utf8_lossy(&c.command(&["INFO", "server"]).unwrap()).into_owned();
    seen.push(format!("INFO after: {}", info.contains("shutdown_in_milliseconds")));
    // Left to its timeout, the shutdown goes on without the replica.
    let mut last = p.client();
    let started = Instant::now();
    last.send(&RawClient::encode(&[b"SHUTDOWN"])).unwrap();
    last.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    seen.push(format!(
        "a SHUTDOWN left to its timeout: {}",
        reply_or_silence(&mut last)
    ));
    let took = started.elapsed();
    seen.push(format!(
        "after the timeout: {}",
        took >= Duration::from_millis(1500) && took < Duration::from_secs(8)
    ));
    p.wait_exit();
    seen.extend(p.log_lines(&[
        "User requested shutdown...",
        "Waiting for replicas before shutting down.",
        "Shutdown manually aborted.",
        "Lagging replica",
        "replicas are in sync when shutting down.",
    ]));
    seen
}

/// SHUTDOWN waits for a lagging replica up to `shutdown-timeout` with
/// writes held, SHUTDOWN ABORT cancels it, and the timeout ends the wait,
/// as in Redis 7.0 (coordis stopped at once).
#[test]
fn shutdown_waits_for_a_lagging_replica_until_abort_or_its_timeout_as_in_redis() {
    let ours = shutdown_waiting_for_a_replica(BIN);
    assert_eq!(
        ours,
        [
            "SHUTDOWN: <no reply>",
            "shutdown_in_milliseconds within the timeout: true",
            "a write meanwhile: <no reply>",
            "a read meanwhile: $1\r\n1\r\n",
            "ABORT: +OK\r\n",
            "the SHUTDOWN then: -ERR Errors trying to SHUTDOWN. Check logs.\r\n",
            "the write then: +OK\r\n",
            "ABORT again: -ERR No shutdown in progress.\r\n",
            "INFO after: false",
            "a SHUTDOWN left to its timeout: <closed>",
            "after the timeout: true",
            "User requested shutdown...",
            "Waiting for replicas before shutting down.",
            "Shutdown manually aborted.",
            "User requested shutdown...",
            "Waiting for replicas before shutting down.",
            "Lagging replica N.N.N.N:N reported offset N behind master, lag=N, state=online.",
            "N of N replicas are in sync when shutting down.",
        ]
    );
    same_on_redis(&ours, shutdown_waiting_for_a_replica);
}

/// SIGTERM with a lagging replica, then SHUTDOWN ABORT during its wait:
/// what the clients see and whether the process still runs past the
/// timeout.
fn signal_shutdown_aborted(program: &str) -> Vec<String> {
    let mut p = LaggingPrimary::start(program, 2);
    let mut c = p.client();
    assert_eq!(c.command(&["SET", "k", "1"]).unwrap(), b"+OK\r\n");
    // SAFETY: signalling a child process this test started.
    unsafe { libc::kill(p.server.0.id() as i32, libc::SIGTERM) };
    let deadline = Instant::now() + Duration::from_secs(5);
    while !p
        .log_lines(&["Waiting for replicas"])
        .iter()
        .any(|l| l.starts_with("Waiting"))
    {
        assert!(Instant::now() < deadline, "{program}: the signal's wait");
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut seen = vec![format!(
        "ABORT: {}",
        String::from_utf8_lossy(&c.command(&["SHUTDOWN", "ABORT"]).unwrap())
    )];
    std::thread::sleep(Duration::from_millis(2500));
    seen.push(format!(
        "running after the timeout: {}",
        p.server.0.try_wait().unwrap().is_none()
    ));
    seen.push(format!(
        "a write: {}",
        String::from_utf8_lossy(&c.command(&["SET", "k", "2"]).unwrap())
    ));
    seen.extend(p.log_lines(&["User requested shutdown...", "Waiting for replicas", "manually aborted"]));
    seen
}

/// SHUTDOWN ABORT cancels a signal's shutdown waiting for a replica too:
/// the server goes on, as Redis does.
#[test]
fn shutdown_abort_cancels_a_signals_wait_for_a_replica_as_in_redis() {
    let ours = signal_shutdown_aborted(BIN);
    assert_eq!(
        ours,
        [
            "ABORT: +OK\r\n",
            "running after the timeout: true",
            "a write: +OK\r\n",
            "User requested shutdown...",
            "Waiting for replicas before shutting down.",
            "Shutdown manually aborted.",
        ]
    );
    same_on_redis(&ours, signal_shutdown_aborted);
}

/// A FAILOVER and a SHUTDOWN both waiting for a lagging replica on
/// `program`, each aborted in turn: whether a write goes through after
/// each abort.
fn failover_and_shutdown_holds(program: &str) -> Vec<String> {
    const WAIT: Duration = Duration::from_millis(300);
    let p = LaggingPrimary::start(program, 5);
    let mut c = p.client();
    // The replica is behind from here on.
    assert_eq!(c.command(&["SET", "k", "0"]).unwrap(), b"+OK\r\n");
    let mut seen = vec![];
    // ABORT `what`, then a write from a new client: what it got within WAIT.
    let mut abort_then_write = |seen: &mut Vec<String>, what: &str| {
        let reply = c.command(&[what, "ABORT"]).unwrap();
        seen.push(format!("{what} ABORT: {}", String::from_utf8_lossy(&reply)));
        let mut w = p.client();
        w.send(&RawClient::encode(&[b"SET", b"k", b"v"])).unwrap();
        w.set_read_timeout(Some(WAIT)).unwrap();
        seen.push(format!("a write then: {}", reply_or_silence(&mut w)));
        w
    };
    for (first, second) in [("SHUTDOWN", "FAILOVER"), ("FAILOVER", "SHUTDOWN")] {
        let mut f = p.client();
        assert_eq!(f.command(&["FAILOVER"]).unwrap(), b"+OK\r\n", "{program}");
        let mut s = p.client();
        s.send(&RawClient::encode(&[b"SHUTDOWN"])).unwrap();
        s.set_read_timeout(Some(WAIT)).unwrap();
        assert_eq!(reply_or_silence(&mut s), "<no reply>", "{program}");
        let mut held = abort_then_write(&mut seen, first);
        abort_then_write(&mut seen, second);
        // The write held after the first abort goes on after the second.
        held.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        seen.push(format!("the held write: {}", reply_or_silence(&mut held)));
    }
    seen
}

/// A SHUTDOWN's hold of the writes and a FAILOVER's end apart, as Redis's
/// pause purposes do: aborting one leaves the writes held by the other.
#[test]
fn a_shutdown_and_a_failover_hold_writes_each_until_its_own_end_as_in_redis() {
    let ours = failover_and_shutdown_holds(BIN);
    assert_eq!(
        ours,
        [
            "SHUTDOWN ABORT: +OK\r\n",
            "a write then: <no reply>",
            "FAILOVER ABORT: +OK\r\n",
            "a write then: +OK\r\n",
            "the held write: +OK\r\n",
            "FAILOVER ABORT: +OK\r\n",
            "a write then: <no reply>",
            "SHUTDOWN ABORT: +OK\r\n",
            "a write then: +OK\r\n",
            "the held write: +OK\r\n",
        ]
    );
    same_on_redis(&ours, failover_and_shutdown_holds);
}

/// SHUTDOWN with a replica that catches up: how long it took, and the log
/// lines from the wait on.
fn shutdown_with_a_replica_catching_up(program: &str) -> (bool, Vec<String>) {
    use std::io::Write;
    let mut p = LaggingPrimary::start(program, 10);
    let mut c = p.client();
    assert_eq!(c.command(&["SET", "k", "1"]).unwrap(), b"+OK\r\n");
    let mut a = p.client();
    let started = Instant::now();
    a.send(&RawClient::encode(&[b"SHUTDOWN"])).unwrap();
    // The GETACK the wait sends, then the acknowledgement of everything.
    p.replica.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut stream = vec![];
    let mut chunk = [0u8; 4096];
    while !String::from_utf8_lossy(&stream).contains("GETACK") {
        let n = p.replica.read(&mut chunk).unwrap();
        assert!(n > 0, "{program}: the stream ended before GETACK");
        stream.extend_from_slice(&chunk[..n]);
    }
    let offset = c.info_field("replication", "master_repl_offset");
    p.replica
        .write_all(&RawClient::encode(&[b"REPLCONF", b"ACK", offset.as_bytes()]))
        .unwrap();
    a.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    assert_eq!(reply_or_silence(&mut a), "<closed>", "{program}");
    let soon = started.elapsed() < Duration::from_secs(5);
    p.wait_exit();
    let lines = p.log_lines(&[
        "Waiting for replicas before shutting down.",
        "Lagging replica",
        "replicas are in sync when shutting down.",
    ]);
    (soon, lines)
}

/// A SHUTDOWN waiting for a replica ends as soon as the replica has
/// acknowledged everything, as in Redis.
#[test]
fn shutdown_ends_its_wait_once_the_replica_caught_up_as_in_redis() {
    let ours = shutdown_with_a_replica_catching_up(BIN);
    assert_eq!(
        ours,
        (
            true,
            vec![
                "Waiting for replicas before shutting down.".to_string(),
                "N of N replicas are in sync when shutting down.".to_string()
            ]
        )
    );
    same_on_redis(&ours, shutdown_with_a_replica_catching_up);
}
