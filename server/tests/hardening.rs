//! Hostile clients and limits: pre-auth request caps, protected mode, the
//! query buffer limit, backpressure for clients that never read, declared
//! lengths, connection storms and garbage, accept errors, and SIGTERM with
//! work in flight. Where Redis's behaviour is the reference, the same bytes
//! go to a real redis-server and the answers are compared.

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::process::Command;
use std::time::{Duration, Instant};

use coordis::testing::{exchange, exchange_on, RawClient, RedisServer, ServerProcess};

const BIN: &str = env!("CARGO_BIN_EXE_coordis-server");

fn coordis_process(args: &[&str]) -> ServerProcess {
    let mut cmd = Command::new(BIN);
    cmd.args(args);
    ServerProcess::start(cmd).unwrap()
}

/// Sends the same bytes to coordis and (when available) Redis on fresh
/// connections and asserts both answer identically; returns coordis's answer.
fn same_answer(coordis: SocketAddr, redis: Option<SocketAddr>, input: &[u8]) -> Vec<u8> {
    let quiet = Duration::from_millis(300);
    let ours = exchange(coordis, input, quiet);
    if let Some(redis) = redis {
        let theirs = exchange(redis, input, quiet);
        assert_eq!(
            String::from_utf8_lossy(&ours),
            String::from_utf8_lossy(&theirs),
            "input {:?}",
            String::from_utf8_lossy(&input[..input.len().min(80)])
        );
    }
    ours
}

#[test]
fn unauthenticated_requests_are_capped_like_redis() {
    let ours = coordis::Server::builder().requirepass("pw").start_blocking().unwrap();
    let redis = RedisServer::start(&["--requirepass", "pw"]).unwrap();
    let redis = redis.as_ref().map(|r| r.addr());
    let big = vec![b'x'; 20_000];
    let set_big = RawClient::encode(&[b"SET", b"k", &big]);
    assert_eq!(
        same_answer(ours.addr(), redis, b"*11\r\n"),
        b"-ERR Protocol error: unauthenticated multibulk length\r\n<closed>"
    );
    assert_eq!(
        same_answer(ours.addr(), redis, b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$16385\r\n"),
        b"-ERR Protocol error: unauthenticated bulk length\r\n<closed>"
    );
    // Within the caps, commands other than AUTH get NOAUTH.
    assert_eq!(
        same_answer(ours.addr(), redis, b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"),
        b"-NOAUTH Authentication required.\r\n"
    );
    // A failed AUTH keeps the caps.
    let mut input = b"AUTH nope\r\n".to_vec();
    input.extend_from_slice(&set_big);
    assert_eq!(
        same_answer(ours.addr(), redis, &input),
        b"-WRONGPASS invalid username-password pair or user is disabled.\r\n-ERR Protocol error: unauthenticated bulk length\r\n<closed>"
    );
    // AUTH lifts them, even for a request pipelined in the same write.
    let mut input = b"AUTH pw\r\n".to_vec();
    input.extend_from_slice(&set_big);
    input.extend_from_slice(b"STRLEN k\r\n");
    assert_eq!(same_answer(ours.addr(), redis, &input), b"+OK\r\n+OK\r\n:20000\r\n");
}

#[test]
fn multibulk_count_is_capped() {
    let s = coordis::Server::builder().start_blocking().unwrap();
    let quiet = Duration::from_millis(300);
    // Redis 7.0 would wait for 1,048,577 arguments; coordis refuses at once.
    assert_eq!(
        exchange(s.addr(), b"*1048577\r\n", quiet),
        b"-ERR Protocol error: invalid multibulk length\r\n<closed>"
    );
    let mut c = RawClient::connect(s.addr()).unwrap();
    assert_eq!(
        c.command(&["CONFIG", "SET", "proto-max-multibulk-len", "3"]).unwrap(),
        b"+OK\r\n"
    );
    assert_eq!(
        exchange(s.addr(), b"SET a b\r\n*4\r\n", quiet),
        b"+OK\r\n-ERR Protocol error: invalid multibulk length\r\n<closed>"
    );
    assert_eq!(c.command(&["GET", "a"]).unwrap(), b"$1\r\nb\r\n");
}

/// Connects to `addr` from the loopback address `source` (any 127.x.y.z
/// is loopback; Redis's protected mode trusts only 127.0.0.1 and ::1).
fn exchange_from(source: [u8; 4], addr: SocketAddr, input: &[u8]) -> Vec<u8> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let stream = rt.block_on(async {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind(SocketAddr::new(IpAddr::from(source), 0)).unwrap();
        socket.connect(addr).await.unwrap().into_std().unwrap()
    });
    stream.set_nonblocking(false).unwrap();
    exchange_on(stream, input, Duration::from_millis(300))
}

#[test]
fn protected_mode_refuses_other_addresses_like_redis() {
    let ours = coordis::Server::builder().start_blocking().unwrap();
    let redis = RedisServer::start(&[]).unwrap();
    let denied = format!("-{}\r\n<closed>", coordis::internals::DENIED);
    for (name, addr) in [
        ("coordis", Some(ours.addr())),
        ("redis", redis.as_ref().map(|r| r.addr())),
    ] {
        let Some(addr) = addr else { continue };
        assert_eq!(
            String::from_utf8_lossy(&exchange_from([127, 0, 0, 2], addr, b"PING\r\n")),
            denied,
            "{name}"
        );
        assert_eq!(exchange_from([127, 0, 0, 1], addr, b"PING\r\n"), b"+PONG\r\n", "{name}");
    }
    // With a password, or with protected mode off, other addresses get in.
    let mut c = RawClient::connect(ours.addr()).unwrap();
    assert_eq!(
        c.command(&["CONFIG", "SET", "protected-mode", "maybe"]).unwrap(),
        b"-ERR CONFIG SET failed (possibly related to argument 'protected-mode') - argument must be 'yes' or 'no'\r\n"
    );
    assert_eq!(c.command(&["CONFIG", "SET", "requirepass", "pw"]).unwrap(), b"+OK\r\n");
    assert_eq!(
        exchange_from([127, 0, 0, 2], ours.addr(), b"PING\r\n"),
        b"-NOAUTH Authentication required.\r\n"
    );
    assert_eq!(c.command(&["CONFIG", "SET", "requirepass", ""]).unwrap(), b"+OK\r\n");
    assert_eq!(
        c.command(&["CONFIG", "SET", "protected-mode", "no"]).unwrap(),
        b"+OK\r\n"
    );
    assert_eq!(exchange_from([127, 0, 0, 2], ours.addr(), b"PING\r\n"), b"+PONG\r\n");
}

#[test]
fn query_buffer_limit_disconnects_like_redis() {
    let ours = coordis::Server::builder().start_blocking().unwrap();
    let redis = RedisServer::start(&["--client-query-buffer-limit", "1mb"]).unwrap();
    let mut c = RawClient::connect(ours.addr()).unwrap();
    assert_eq!(
        c.command(&["CONFIG", "SET", "client-query-buffer-limit", "1000"]).unwrap(),
        b"-ERR CONFIG SET failed (possibly related to argument 'client-query-buffer-limit') - argument must be between 1048576 and 9223372036854775807 inclusive\r\n"
    );
    assert_eq!(
        c.command(&["CONFIG", "SET", "client-query-buffer-limit", "1mb"])
            .unwrap(),
        b"+OK\r\n"
    );
    // 1.5 MB of a declared 2 MB argument: past the limit, the connection is
    // closed without a reply.
    let mut input = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2000000\r\n".to_vec();
    input.extend(std::iter::repeat_n(b'v', 1_500_000));
    assert_eq!(
        same_answer(ours.addr(), redis.as_ref().map(|r| r.addr()), &input),
        b"<closed>"
    );
    assert_eq!(c.command(&["PING"]).unwrap(), b"+PONG\r\n");
}

#[test]
fn a_client_that_never_reads_does_not_grow_the_server() {
    let server = coordis_process(&[]);
    let value = vec![b'v'; 1024 * 1024];
    let mut c = RawClient::connect(server.addr()).unwrap();
    assert_eq!(c.command_bytes(&[b"SET", b"big", &value]).unwrap(), b"+OK\r\n");
    let before = server.rss_kb().unwrap();

    // Pipeline `GET big` for 10 s and never read a reply.
    let mut hog = TcpStream::connect(server.addr()).unwrap();
    hog.set_write_timeout(Some(Duration::from_millis(100))).unwrap();
    let chunk = b"GET big\r\n".repeat(1000);
    let started = Instant::now();
    let mut sent = 0usize;
    let mut peak = before;
    while started.elapsed() < Duration::from_secs(10) {
        match hog.write(&chunk) {
            Ok(n) => sent += n,
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
        peak = peak.max(server.rss_kb().unwrap());
    }
    // The server stopped reading from it (backpressure) yet serves others.
    assert!(sent < 100 * 1024 * 1024, "server kept reading: {sent} bytes");
    let mut other = RawClient::connect(server.addr()).unwrap();
    assert_eq!(other.command(&["STRLEN", "big"]).unwrap(), b":1048576\r\n");
    println!(
        "non-reading client: {} GETs sent in 10 s; server RSS {} MB before, {} MB peak",
        sent / 9,
        before / 1024,
        peak / 1024
    );
    assert!(peak < before + 200 * 1024, "RSS grew from {before} kB to {peak} kB");
    // Its replies are intact once it reads.
    hog.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut header = [0u8; 10];
    hog.read_exact(&mut header).unwrap();
    assert_eq!(&header, b"$1048576\r\n");
}

#[test]
fn declared_lengths_do_not_raise_memory() {
    let server = coordis_process(&[]);
    let before = server.rss_kb().unwrap();
    let hogs: Vec<TcpStream> = (0..200)
        .map(|_| {
            let mut s = TcpStream::connect(server.addr()).unwrap();
            s.write_all(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$500000000\r\nab").unwrap();
            s
        })
        .collect();
    let mut c = RawClient::connect(server.addr()).unwrap();
    assert_eq!(c.command(&["PING"]).unwrap(), b"+PONG\r\n");
    std::thread::sleep(Duration::from_millis(300));
    let after = server.rss_kb().unwrap();
    println!("200 connections declaring 500 MB each: RSS {before} kB -> {after} kB");
    assert!(after < before + 64 * 1024, "RSS grew from {before} kB to {after} kB");
    drop(hogs);
}

#[test]
fn connection_storm_and_garbage_leave_the_server_answering() {
    let server = coordis::Server::builder().start_blocking().unwrap();
    let addr = server.addr();
    // 2,000 connect/disconnect cycles from 4 threads.
    let threads: Vec<_> = (0..4)
        .map(|_| {
            std::thread::spawn(move || {
                for i in 0..500 {
                    let mut s = TcpStream::connect(addr).unwrap();
                    if i % 2 == 0 {
                        let _ = s.write_all(b"PING\r\n");
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    // 300 connections of random bytes, all open at once.
    let mut rng = fastrand::Rng::with_seed(7);
    let garbage: Vec<TcpStream> = (0..300)
        .map(|_| {
            let mut s = TcpStream::connect(addr).unwrap();
            let bytes: Vec<u8> = (0..rng.usize(1..4096)).map(|_| rng.u8(..)).collect();
            let _ = s.write_all(&bytes);
            s
        })
        .collect();
    let mut c = RawClient::connect(addr).unwrap();
    assert_eq!(c.command(&["SET", "alive", "yes"]).unwrap(), b"+OK\r\n");
    drop(garbage);
    // Every one of those connections is gone again.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let info = String::from_utf8(c.command(&["INFO", "clients"]).unwrap()).unwrap();
        if info.contains("connected_clients:1\r\n") {
            break;
        }
        assert!(Instant::now() < deadline, "{info}");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(c.command(&["GET", "alive"]).unwrap(), b"$3\r\nyes\r\n");
}

#[test]
fn accept_errors_back_off_and_serving_goes_on() {
    // A server allowed 48 file descriptors: connections past that fail in
    // accept (EMFILE) and wait in the listen backlog.
    let mut cmd = Command::new(BIN);
    // SAFETY: setrlimit is async-signal-safe; the closure touches nothing else.
    unsafe {
        use std::os::unix::process::CommandExt;
        cmd.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: 48,
                rlim_max: 48,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let server = ServerProcess::start(cmd).unwrap();
    let mut first = RawClient::connect(server.addr()).unwrap();
    let mut crowd: Vec<TcpStream> = (0..80).map(|_| TcpStream::connect(server.addr()).unwrap()).collect();
    for s in &mut crowd {
        s.write_all(b"PING\r\n").unwrap();
    }
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(first.command(&["PING"]).unwrap(), b"+PONG\r\n");
    // Free descriptors: the waiting connections are accepted and answered.
    let waiting = crowd.split_off(40);
    drop(crowd);
    for mut s in waiting {
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut reply = [0u8; 7];
        s.read_exact(&mut reply).unwrap();
        assert_eq!(&reply, b"+PONG\r\n");
    }
    assert_eq!(first.command(&["PING"]).unwrap(), b"+PONG\r\n");
    let log = server.stderr_text();
    assert!(log.contains("accept error"), "{log}");
}

#[test]
fn sigterm_answers_work_in_flight_then_exits_zero() {
    let mut server = coordis_process(&[]);
    let addr = server.addr();
    // An idle client must not hold the shutdown up.
    let _idle = RawClient::connect(addr).unwrap();
    // A pipelining client, accepted (one round trip) before anything else
    // starts: a connection still in the listen backlog at SIGTERM is not
    // work in flight, and on a loaded machine 50 ms do not make sure of it.
    let mut pipeline = TcpStream::connect(addr).unwrap();
    pipeline.write_all(b"PING\r\n").unwrap();
    let mut pong = [0u8; 7];
    pipeline.read_exact(&mut pong).unwrap();
    assert_eq!(&pong, b"+PONG\r\n");
    // A script that runs for 300 ms is in flight when SIGTERM arrives.
    let mut busy = RawClient::connect(addr).unwrap();
    busy.send(&RawClient::encode(&[
        b"EVAL",
        b"local t = redis.call('TIME') local start = t[1] * 1000000 + t[2] \
          repeat t = redis.call('TIME') until t[1] * 1000000 + t[2] - start > 300000 \
          return redis.call('INCR', 'done')",
        b"0",
    ]))
    .unwrap();
    // The pipelining client (writing and reading on two threads) is in flight too.
    let mut writer = pipeline.try_clone().unwrap();
    let writing = std::thread::spawn(move || {
        let chunk = b"INCR n\r\n".repeat(100);
        while writer.write_all(&chunk).is_ok() {}
    });
    let reading = std::thread::spawn(move || {
        let mut pipeline = pipeline;
        let mut replies = vec![];
        let _ = pipeline.read_to_end(&mut replies);
        replies
    });
    std::thread::sleep(Duration::from_millis(50));
    let started = Instant::now();
    let status = server.terminate(Duration::from_secs(10)).unwrap();
    let status = status.expect("coordis-server still running 10 s after SIGTERM");
    assert!(status.success(), "{status:?}");
    assert!(started.elapsed() < Duration::from_secs(7), "{:?}", started.elapsed());
    // The script finished and its reply was sent.
    assert_eq!(busy.read_reply().unwrap(), b":1\r\n");
    // Every pipelined reply is whole and in order.
    writing.join().unwrap();
    let text = String::from_utf8(reading.join().unwrap()).unwrap();
    assert!(
        text.len() > 1000,
        "{} bytes: {text:?}; the server's log:\n{}",
        text.len(),
        server.stderr_text()
    );
    assert!(text.ends_with("\r\n"), "cut reply: {:?}", &text[text.len() - 20..]);
    for (i, line) in text.split_terminator("\r\n").enumerate() {
        assert_eq!(line, format!(":{}", i + 1));
    }
}

#[test]
fn the_password_never_shows_in_logs_info_or_client_list() {
    let password = "pw-9f4c1e";
    let server = coordis_process(&["--requirepass", password, "--loglevel", "debug"]);
    let mut c = RawClient::connect(server.addr()).unwrap();
    assert_eq!(
        c.command(&["AUTH", "wrong-guess"]).unwrap(),
        b"-WRONGPASS invalid username-password pair or user is disabled.\r\n"
    );
    assert_eq!(c.command(&["AUTH", password]).unwrap(), b"+OK\r\n");
    let mut seen = String::new();
    for cmd in [&["INFO", "everything"][..], &["CLIENT", "LIST"], &["CLIENT", "INFO"]] {
        seen.push_str(&String::from_utf8_lossy(&c.command(cmd).unwrap()));
    }
    // A protocol error logs the client's query buffer in Redis; not here.
    let _ = exchange(
        server.addr(),
        format!("AUTH {password}\r\n*1\r\n$x\r\n").as_bytes(),
        Duration::from_millis(300),
    );
    seen.push_str(&server.stderr_text());
    assert!(seen.contains("cmd=client|info"), "{seen}");
    assert!(!seen.contains(password), "password shown: {seen}");
}

#[test]
fn idle_clients_are_closed_after_timeout() {
    let s = coordis::Server::builder().start_blocking().unwrap();
    let mut admin = RawClient::connect(s.addr()).unwrap();
    assert_eq!(admin.command(&["CONFIG", "SET", "timeout", "1"]).unwrap(), b"+OK\r\n");
    let mut idle = RawClient::connect(s.addr()).unwrap();
    assert_eq!(idle.command(&["PING"]).unwrap(), b"+PONG\r\n");
    let started = Instant::now();
    // The server closes the idle connection: no reply, end of stream.
    assert_eq!(idle.read_to_close().unwrap(), b"");
    let waited = started.elapsed();
    assert!(waited >= Duration::from_millis(900), "closed after {waited:?}");
    // A client that keeps talking stays.
    let mut busy = RawClient::connect(s.addr()).unwrap();
    for _ in 0..6 {
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(busy.command(&["PING"]).unwrap(), b"+PONG\r\n");
    }
}
