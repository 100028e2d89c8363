//! MIGRATE between coordis and Redis 7.0.15 in every direction (coordis to
//! redis-server, redis-server to coordis, coordis to coordis), each run of
//! one scenario compared reply for reply with Redis migrating to Redis: the
//! single and KEYS forms, NOKEY, BUSYKEY from the target, REPLACE, COPY,
//! another database, AUTH and AUTH2 on the cached connection and on a
//! fresh one after the target dropped it, a refused target, a silent one.

use std::net::{SocketAddr, TcpListener};
use std::time::Duration;

use coordis::testing::{RawClient, RedisServer};

/// A server of either kind, stopped on drop.
enum Node {
    Coordis(coordis::BlockingServer),
    Redis(RedisServer),
}

impl Node {
    fn addr(&self) -> SocketAddr {
        match self {
            Node::Coordis(s) => s.addr(),
            Node::Redis(r) => r.addr(),
        }
    }
}

fn coordis() -> Node {
    Node::Coordis(coordis::Server::builder().start_blocking().unwrap())
}

/// `None` (the test skips, loudly) without redis-server.
fn redis() -> Option<Node> {
    RedisServer::start(&[]).unwrap().map(Node::Redis)
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Runs the scenario from `src` to `dst` and returns every reply, labelled
/// with what was asked of which side. `silent` accepts connections and
/// never answers.
fn scenario(src: SocketAddr, dst: SocketAddr, silent: SocketAddr) -> Vec<(String, String)> {
    let mut s = RawClient::connect(src).unwrap();
    let mut d = RawClient::connect(dst).unwrap();
    let host = dst.ip().to_string();
    let port = dst.port().to_string();
    let mut out = vec![];
    let mut on = |side: &str, c: &mut RawClient, args: &[&str]| {
        let reply = text(&c.command(args).unwrap());
        out.push((format!("{side}: {}", args.join(" ")), reply.clone()));
        reply
    };
    let migrate = |key: &str, db: &str, rest: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = ["MIGRATE", &host, &port, key, db, "5000"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        v.extend(rest.iter().map(|s| s.to_string()));
        v
    };
    macro_rules! m {
        ($c:expr, $side:expr, $args:expr) => {{
            let a: Vec<String> = $args;
            let r: Vec<&str> = a.iter().map(String::as_str).collect();
            on($side, $c, &r)
        }};
    }

    // One key moves: gone here, there with its value.
    on("src", &mut s, &["SET", "k", "v1"]);
    m!(&mut s, "src", migrate("k", "0", &[]));
    on("src", &mut s, &["EXISTS", "k"]);
    on("dst", &mut d, &["GET", "k"]);
    // Nothing to move.
    m!(&mut s, "src", migrate("missing", "0", &[]));
    // The target has the key: its BUSYKEY, the key stays here.
    on("src", &mut s, &["SET", "k", "v2"]);
    m!(&mut s, "src", migrate("k", "0", &[]));
    on("src", &mut s, &["GET", "k"]);
    // REPLACE overwrites it; COPY keeps the source.
    m!(&mut s, "src", migrate("k", "0", &["REPLACE"]));
    on("dst", &mut d, &["GET", "k"]);
    on("src", &mut s, &["SET", "c", "kept"]);
    m!(&mut s, "src", migrate("c", "0", &["COPY"]));
    on("src", &mut s, &["GET", "c"]);
    on("dst", &mut d, &["GET", "c"]);
    // Several keys of every type, a TTL and a missing one, with KEYS.
    on("src", &mut s, &["RPUSH", "l", "a", "b", "c"]);
    on("src", &mut s, &["SADD", "s", "3", "1", "2"]);
    on("src", &mut s, &["HSET", "h", "f", "v"]);
    on("src", &mut s, &["ZADD", "z", "1", "m", "2.5", "n"]);
    on("src", &mut s, &["XADD", "x", "1-1", "f", "v"]);
    on("src", &mut s, &["SET", "t", "ttl", "PX", "100000"]);
    m!(
        &mut s,
        "src",
        migrate("", "0", &["KEYS", "l", "s", "h", "z", "x", "t", "nope"])
    );
    on("src", &mut s, &["EXISTS", "l", "s", "h", "z", "x", "t"]);
    on("dst", &mut d, &["LRANGE", "l", "0", "-1"]);
    on("dst", &mut d, &["SMEMBERS", "s"]);
    on("dst", &mut d, &["HGETALL", "h"]);
    on("dst", &mut d, &["ZRANGE", "z", "0", "-1", "WITHSCORES"]);
    on("dst", &mut d, &["XRANGE", "x", "-", "+"]);
    let pttl = text(&d.command(&["PTTL", "t"]).unwrap());
    let ms: i64 = pttl.trim_start_matches(':').trim().parse().unwrap();
    assert!((90_000..=100_000).contains(&ms), "the TTL went with the key: {pttl}");
    // The key option with KEYS, and unknown options.
    m!(&mut s, "src", migrate("k", "0", &["KEYS", "a"]));
    m!(&mut s, "src", migrate("k", "0", &["AUTH"]));
    m!(&mut s, "src", migrate("k", "0", &["AUTH2", "u"]));
    m!(&mut s, "src", migrate("k", "0", &["NOPE"]));
    on("src", &mut s, &["MIGRATE", &host, &port, "k", "x", "5000"]);
    // Another database (the cached connection SELECTs it).
    on("src", &mut s, &["SET", "db3", "here"]);
    m!(&mut s, "src", migrate("db3", "3", &[]));
    on("dst", &mut d, &["SELECT", "3"]);
    on("dst", &mut d, &["GET", "db3"]);
    on("dst", &mut d, &["SELECT", "0"]);
    // A password on the target: the cached connection is still
    // authenticated; a fresh one (the target dropped it) is not.
    on("dst", &mut d, &["CONFIG", "SET", "requirepass", "secret"]);
    on("src", &mut s, &["SET", "a1", "1"]);
    m!(&mut s, "src", migrate("a1", "0", &[]));
    on("dst", &mut d, &["CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"]);
    on("src", &mut s, &["SET", "a2", "2"]);
    m!(&mut s, "src", migrate("a2", "0", &[]));
    m!(&mut s, "src", migrate("a2", "0", &["AUTH", "wrong"]));
    m!(&mut s, "src", migrate("a2", "0", &["AUTH", "secret"]));
    on("src", &mut s, &["SET", "a3", "3"]);
    m!(&mut s, "src", migrate("a3", "0", &["AUTH2", "default", "secret"]));
    on("dst", &mut d, &["MGET", "a1", "a2", "a3"]);
    on("src", &mut s, &["EXISTS", "a1", "a2", "a3"]);
    // The password is not in the slow log.
    on("src", &mut s, &["CONFIG", "SET", "slowlog-log-slower-than", "0"]);
    on("src", &mut s, &["SET", "a4", "4"]);
    m!(&mut s, "src", migrate("a4", "0", &["AUTH2", "default", "secret"]));
    let log = text(&s.command(&["SLOWLOG", "GET", "2"]).unwrap());
    assert!(!log.contains("secret") && log.contains("(redacted)"), "{log}");
    on("src", &mut s, &["CONFIG", "SET", "slowlog-log-slower-than", "10000"]);
    // A target that refuses connections, and one that never answers.
    let refused = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    on("src", &mut s, &["SET", "io", "x"]);
    on(
        "src",
        &mut s,
        &["MIGRATE", "127.0.0.1", &refused.to_string(), "io", "0", "1000"],
    );
    on(
        "src",
        &mut s,
        &["MIGRATE", "127.0.0.1", &silent.port().to_string(), "io", "0", "200"],
    );
    on("src", &mut s, &["EXISTS", "io"]);
    on("dst", &mut d, &["CONFIG", "SET", "requirepass", ""]);
    out
}

/// A listener that accepts and holds connections, never answering; it
/// goes away when the test ends.
fn silent_target() -> (SocketAddr, std::sync::mpsc::Sender<()>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    l.set_nonblocking(true).unwrap();
    let (stop, stopped) = std::sync::mpsc::channel::<()>();
    std::thread::spawn(move || {
        let mut held = vec![];
        while stopped.try_recv() == Err(std::sync::mpsc::TryRecvError::Empty) {
            if let Ok((c, _)) = l.accept() {
                held.push(c);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    });
    (addr, stop)
}

/// Starts a node of one kind (`None`: Redis is not installed).
type Starter = fn() -> Option<Node>;

fn compare(label: &str, got: &[(String, String)], want: &[(String, String)]) {
    assert_eq!(got.len(), want.len(), "{label}: as many replies");
    for ((asked, ours), (_, theirs)) in got.iter().zip(want) {
        assert_eq!(ours, theirs, "{label}: {asked}");
    }
}

#[test]
fn migrate_in_every_direction_answers_as_redis_to_redis() {
    let (Some(r1), Some(r2)) = (redis(), redis()) else {
        return;
    };
    let (silent, _stop) = silent_target();
    let reference = scenario(r1.addr(), r2.addr(), silent);
    // The reference did what the scenario is about.
    let said = |what: &str| reference.iter().any(|(_, r)| r.contains(what));
    assert!(said("+NOKEY"), "{reference:?}");
    assert!(said(
        "-ERR Target instance replied with error: BUSYKEY Target key name already exists."
    ));
    assert!(said(
        "-ERR Target instance replied with error: NOAUTH Authentication required."
    ));
    assert!(said("-ERR Target instance replied with error: WRONGPASS"));
    assert!(said("-IOERR error or timeout writing to target instance"));
    assert!(said("-IOERR error or timeout reading to target instance"));
    drop((r1, r2));
    let pairs: [(&str, Starter, Starter); 3] = [
        ("coordis to redis", || Some(coordis()), redis),
        ("redis to coordis", redis, || Some(coordis())),
        ("coordis to coordis", || Some(coordis()), || Some(coordis())),
    ];
    for (label, src, dst) in pairs {
        let (src, dst) = (src().unwrap(), dst().unwrap());
        let got = scenario(src.addr(), dst.addr(), silent);
        compare(label, &got, &reference);
    }
}

/// INFO's `migrate_cached_sockets` counts the kept connections, as Redis's.
#[test]
fn the_connection_to_a_target_is_cached() {
    let Some(target) = redis() else {
        return;
    };
    let src = coordis();
    let mut s = RawClient::connect(src.addr()).unwrap();
    let cached = |s: &mut RawClient| {
        let info = text(&s.command(&["INFO", "stats"]).unwrap());
        info.lines()
            .find_map(|l| l.strip_prefix("migrate_cached_sockets:"))
            .unwrap()
            .trim()
            .to_string()
    };
    assert_eq!(cached(&mut s), "0");
    let port = target.addr().port().to_string();
    for key in ["one", "two"] {
        s.command(&["SET", key, "v"]).unwrap();
        let reply = s.command(&["MIGRATE", "127.0.0.1", &port, key, "0", "1000"]).unwrap();
        assert_eq!(text(&reply), "+OK\r\n");
    }
    assert_eq!(cached(&mut s), "1");
    let mut t = RawClient::connect(target.addr()).unwrap();
    // Redis sees one client besides this one: the cached connection.
    let clients = text(&t.command(&["CLIENT", "LIST"]).unwrap());
    assert_eq!(clients.matches(" laddr=").count(), 2, "{clients}");
}

/// COMMAND GETKEYS and GETKEYSANDFLAGS find MIGRATE's keys as Redis's
/// migrateGetKeys does (the key, or the keys after KEYS, past AUTH's and
/// AUTH2's arguments).
#[test]
fn migrate_keys_are_found_as_redis_finds_them() {
    let Some(redis) = redis() else {
        return;
    };
    let ours = coordis();
    let mut a = RawClient::connect(ours.addr()).unwrap();
    let mut b = RawClient::connect(redis.addr()).unwrap();
    let forms: &[&[&str]] = &[
        &["MIGRATE", "h", "1", "k", "0", "10"],
        &["MIGRATE", "h", "1", "", "0", "10", "KEYS", "a", "b"],
        &[
            "MIGRATE", "h", "1", "", "0", "10", "COPY", "AUTH2", "keys", "pw", "KEYS", "a", "b",
        ],
        &["MIGRATE", "h", "1", "", "0", "10", "AUTH", "keys", "KEYS", "c"],
        &["MIGRATE", "h", "1", "k", "0", "10", "KEYS", "a"],
        &["MIGRATE", "h", "1", "k", "0", "10", "REPLACE"],
        &["RESTORE-ASKING", "k", "0", "payload"],
    ];
    for form in forms {
        for sub in ["GETKEYS", "GETKEYSANDFLAGS"] {
            let mut args = vec!["COMMAND", sub];
            args.extend_from_slice(form);
            assert_eq!(
                text(&a.command(&args).unwrap()),
                text(&b.command(&args).unwrap()),
                "{}",
                args.join(" ")
            );
        }
    }
}

/// Reads one RESP array of bulk strings (a command as MIGRATE writes it).
fn read_command(r: &mut impl std::io::BufRead) -> Option<Vec<Vec<u8>>> {
    let mut line = String::new();
    r.read_line(&mut line).ok()?;
    let n: usize = line.trim_end().strip_prefix('*')?.parse().ok()?;
    let mut args = Vec::with_capacity(n);
    for _ in 0..n {
        line.clear();
        r.read_line(&mut line).ok()?;
        let len: usize = line.trim_end().strip_prefix('$')?.parse().ok()?;
        let mut arg = vec![0; len + 2];
        r.read_exact(&mut arg).ok()?;
        arg.truncate(len);
        args.push(arg);
    }
    Some(args)
}

/// The TTL a RESTORE carries is the time left when it is written (Redis
/// reads the clock once connected, and again on a retry), not when the
/// MIGRATE began: a target that drops the first attempt after the
/// server's clock moved 10 s gets, on the retry, a RESTORE with 10 s less.
#[test]
fn restore_carries_the_ttl_left_when_it_is_sent() {
    use std::io::{BufReader, Read, Write};
    const TTL_MS: u64 = 100_000;
    const STEP_MS: u64 = 10_000;
    let clock = std::sync::Arc::new(coordis::ManualClock::at_ms(1_700_000_000_000));
    let src = coordis::Server::builder()
        .virtual_clock(clock.clone())
        .start_blocking()
        .unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port().to_string();
    let target = std::thread::spawn(move || {
        let mut ttls = vec![];
        for attempt in 0..2 {
            let (conn, _) = listener.accept().unwrap();
            conn.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let mut r = BufReader::new(conn.try_clone().unwrap());
            assert_eq!(read_command(&mut r).unwrap()[0], b"SELECT");
            let restore = read_command(&mut r).unwrap();
            assert_eq!(restore[0], b"RESTORE");
            ttls.push(String::from_utf8(restore[2].clone()).unwrap().parse::<u64>().unwrap());
            if attempt == 0 {
                // The clock moves while the first attempt is on its way,
                // which then fails before any reply.
                clock.advance_ms(STEP_MS);
                drop(conn);
            } else {
                (&conn).write_all(b"+OK\r\n+OK\r\n").unwrap();
                let _ = r.read(&mut [0; 1]);
            }
        }
        ttls
    });
    let mut s = RawClient::connect(src.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    assert_eq!(
        text(&s.command(&["SET", "k", "v", "PX", &TTL_MS.to_string()]).unwrap()),
        "+OK\r\n"
    );
    let reply = s.command(&["MIGRATE", "127.0.0.1", &port, "k", "0", "5000"]).unwrap();
    assert_eq!(text(&reply), "+OK\r\n");
    drop(s);
    drop(src);
    let ttls = target.join().unwrap();
    assert_eq!(ttls, [TTL_MS, TTL_MS - STEP_MS]);
}
