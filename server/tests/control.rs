//! The test clock (`Server::clock`, `COORDIS.CLOCK`): a move settles the
//! server before it returns — due keys expire in deadline order with their
//! events, blocked clients past their deadline are answered — so a test
//! never sleeps after it. Nothing here waits in real time for the server's
//! time to pass.

use std::time::{Duration, Instant};

use coordis::testing::RawClient;

fn pttl(c: &mut RawClient, key: &str) -> i64 {
    let r = String::from_utf8(c.command(&["PTTL", key]).unwrap()).unwrap();
    r.trim_start_matches(':').trim().parse().unwrap()
}

#[test]
fn advancing_expires_due_keys_in_deadline_order_with_their_events() {
    let server = coordis::Server::builder().start_blocking().unwrap();
    let clock = server.clock().expect("the embedded server's clock is a test clock");
    clock.freeze();
    let mut c = RawClient::connect(server.addr()).unwrap();
    let mut sub = RawClient::connect(server.addr()).unwrap();
    assert_eq!(
        c.command(&["CONFIG", "SET", "notify-keyspace-events", "Ex"]).unwrap(),
        b"+OK\r\n"
    );
    sub.command(&["SUBSCRIBE", "__keyevent@0__:expired"]).unwrap();
    for (key, ttl) in [
        ("lock:a", "30000"),
        ("lock:b", "10000"),
        ("lock:c", "20000"),
        ("kept", "90000"),
    ] {
        assert_eq!(c.command(&["SET", key, "owner", "PX", ttl]).unwrap(), b"+OK\r\n");
    }
    let started = Instant::now();
    clock.advance(Duration::from_secs(31));
    // Settled before advance returned: no sleep, no polling.
    assert_eq!(c.command(&["EXISTS", "lock:a", "lock:b", "lock:c"]).unwrap(), b":0\r\n");
    assert_eq!(c.command(&["DBSIZE"]).unwrap(), b":1\r\n");
    for key in ["lock:b", "lock:c", "lock:a"] {
        let message = String::from_utf8(sub.read_reply().unwrap()).unwrap();
        assert!(
            message.ends_with(&format!("${}\r\n{key}\r\n", key.len())),
            "{message:?}"
        );
    }
    assert_eq!(pttl(&mut c, "kept"), 59_000);
    assert!(started.elapsed() < Duration::from_secs(5));
    // A frozen clock does not move by itself.
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(pttl(&mut c, "kept"), 59_000);
}

#[test]
fn advancing_answers_blocked_clients_past_their_deadline() {
    let server = coordis::Server::builder().start_blocking().unwrap();
    let clock = server.clock().unwrap();
    clock.freeze();
    let mut waiter = RawClient::connect(server.addr()).unwrap();
    let mut patient = RawClient::connect(server.addr()).unwrap();
    let mut c = RawClient::connect(server.addr()).unwrap();
    waiter.send(&RawClient::encode(&[b"BLPOP", b"q", b"10"])).unwrap();
    patient.send(&RawClient::encode(&[b"BLPOP", b"q", b"60"])).unwrap();
    while !String::from_utf8(c.command(&["INFO", "clients"]).unwrap())
        .unwrap()
        .contains("blocked_clients:2\r\n")
    {
        std::thread::sleep(Duration::from_millis(2));
    }
    clock.advance(Duration::from_millis(10_001));
    assert_eq!(waiter.read_reply().unwrap(), b"*-1\r\n");
    assert_eq!(c.command(&["RPUSH", "q", "job"]).unwrap(), b":1\r\n");
    assert_eq!(patient.read_reply().unwrap(), b"*2\r\n$1\r\nq\r\n$3\r\njob\r\n");
}

#[test]
fn jumps_move_a_running_clock_either_way() {
    let server = coordis::Server::builder().start_blocking().unwrap();
    let clock = server.clock().unwrap();
    let mut c = RawClient::connect(server.addr()).unwrap();
    assert_eq!(c.command(&["SET", "lock", "me", "PX", "10000"]).unwrap(), b"+OK\r\n");
    // A backward wall-clock step: the key now has longer to live.
    clock.jump_ms(-5_000);
    let ttl = pttl(&mut c, "lock");
    assert!((14_000..=15_000).contains(&ttl), "{ttl}");
    // A forward step past its deadline: gone at once.
    clock.jump_ms(20_000);
    assert_eq!(c.command(&["EXISTS", "lock"]).unwrap(), b":0\r\n");
    clock.reset();
    let now = String::from_utf8(c.command(&["TIME"]).unwrap()).unwrap();
    let secs: u64 = now.split("\r\n").nth(2).unwrap().parse().unwrap();
    let real = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert!(secs.abs_diff(real) <= 2, "back on real time: {secs} vs {real}");
}

#[test]
fn the_clock_over_the_wire() {
    let server = coordis::Server::builder().start_blocking().unwrap();
    let mut c = RawClient::connect(server.addr()).unwrap();
    let mut w = RawClient::connect(server.addr()).unwrap();
    assert_eq!(c.command(&["COORDIS.CLOCK", "FREEZE"]).unwrap()[0], b':');
    assert_eq!(
        c.command(&["COORDIS.CLOCK", "SET", "1700000000000"]).unwrap(),
        b":1700000000000\r\n"
    );
    assert_eq!(
        c.command(&["COORDIS.CLOCK", "GET"]).unwrap(),
        b"*3\r\n:1700000000000\r\n+frozen\r\n:0\r\n"
    );
    assert_eq!(c.command(&["SET", "k", "v", "EX", "30"]).unwrap(), b"+OK\r\n");
    assert_eq!(c.command(&["TIME"]).unwrap(), b"*2\r\n$10\r\n1700000000\r\n$1\r\n0\r\n");
    w.send(&RawClient::encode(&[b"BZPOPMIN", b"z", b"5"])).unwrap();
    while !String::from_utf8(c.command(&["INFO", "clients"]).unwrap())
        .unwrap()
        .contains("blocked_clients:1\r\n")
    {
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(
        c.command(&["coordis.clock", "advance", "30001"]).unwrap(),
        b":1700000030001\r\n"
    );
    assert_eq!(c.command(&["EXISTS", "k"]).unwrap(), b":0\r\n");
    assert_eq!(w.read_reply().unwrap(), b"*-1\r\n");
    assert_eq!(
        c.command(&["COORDIS.CLOCK", "JUMP", "-1"]).unwrap(),
        b":1700000030000\r\n"
    );
    assert_eq!(
        c.command(&["COORDIS.CLOCK", "ADVANCE", "-5"]).unwrap(),
        b"-ERR value is out of range, must be positive\r\n"
    );
    assert_eq!(
        c.command(&["COORDIS.CLOCK", "ADVANCE", "x"]).unwrap(),
        b"-ERR value is not an integer or out of range\r\n"
    );
    assert!(c
        .command(&["COORDIS.CLOCK", "HELP"])
        .unwrap()
        .starts_with(b"*17\r\n+COORDIS.CLOCK <subcommand>"));
    assert_eq!(
        c.command(&["COORDIS.CLOCK", "NOSUCH"]).unwrap(),
        b"-ERR unknown subcommand 'NOSUCH'. Try COORDIS.CLOCK HELP.\r\n".to_vec()
    );
    assert_eq!(c.command(&["COORDIS.CLOCK", "RESUME"]).unwrap()[0], b':');
    let get = String::from_utf8(c.command(&["COORDIS.CLOCK", "GET"]).unwrap()).unwrap();
    assert!(get.contains("+running\r\n"), "{get}");
    assert!(c
        .command(&["EVAL", "return redis.call('coordis.clock', 'get')", "0"])
        .unwrap()
        .starts_with(b"-ERR This Redis command is not allowed from script"));
}

#[test]
fn test_commands_are_refused_unless_enabled() {
    let mut builder = coordis::Server::builder();
    builder.config_mut().enable_test_commands = "no".into();
    let server = builder.start_blocking().unwrap();
    let mut c = RawClient::connect(server.addr()).unwrap();
    assert_eq!(
        c.command(&["COORDIS.CLOCK", "ADVANCE", "1000"]).unwrap(),
        b"-ERR COORDIS.CLOCK command not allowed. If the enable-test-commands option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.\r\n".to_vec()
    );
    assert_eq!(
        c.command(&["CONFIG", "GET", "enable-test-commands"]).unwrap(),
        b"*2\r\n$20\r\nenable-test-commands\r\n$2\r\nno\r\n"
    );
}

#[test]
fn a_server_pause_stops_the_world_until_resumed() {
    let server = coordis::Server::builder().start_blocking().unwrap();
    let clock = server.clock().unwrap();
    clock.freeze();
    let mut c = RawClient::connect(server.addr()).unwrap();
    assert_eq!(c.command(&["SET", "lock", "me", "PX", "1000"]).unwrap(), b"+OK\r\n");
    server.pause();
    // The clock moves during the pause; nothing expires meanwhile.
    clock.advance(Duration::from_secs(5));
    c.send(&RawClient::encode(&[b"GET", b"lock"])).unwrap();
    c.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    assert!(c.read_reply().is_err(), "no answer while the server is paused");
    server.resume();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    // Lazy expiry on the first access after the pause.
    assert_eq!(c.read_reply().unwrap(), b"$-1\r\n");
}

#[test]
fn a_restart_drops_every_connection_and_may_lose_the_data() {
    let server = coordis::Server::builder().start_blocking().unwrap();
    let mut c = RawClient::connect(server.addr()).unwrap();
    assert_eq!(c.command(&["SET", "kept", "1"]).unwrap(), b"+OK\r\n");
    server.restart(false);
    assert!(c.command(&["PING"]).is_err(), "the connection was dropped");
    let mut c = RawClient::connect(server.addr()).unwrap();
    assert_eq!(c.command(&["GET", "kept"]).unwrap(), b"$1\r\n1\r\n");
    assert_eq!(c.command(&["SCRIPT", "LOAD", "return 1"]).unwrap()[0], b'$');
    server.restart(true);
    let mut c = RawClient::connect(server.addr()).unwrap();
    assert_eq!(c.command(&["DBSIZE"]).unwrap(), b":0\r\n");
    assert_eq!(
        c.command(&["SCRIPT", "EXISTS", "e0e1f9fabfc9d4800c877a703b823ac0578ff8db"])
            .unwrap(),
        b"*1\r\n:0\r\n"
    );
}

/// A registered plain connection, for [`closed_already`].
fn connected(addr: std::net::SocketAddr) -> std::net::TcpStream {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.write_all(b"PING\r\n").unwrap();
    let mut pong = [0u8; 7];
    s.read_exact(&mut pong).unwrap();
    assert_eq!(&pong, b"+PONG\r\n");
    s
}

/// Whether the server has already closed `s`, looking without waiting: a
/// close that is still on its way reads as not closed.
fn closed_already(s: &mut std::net::TcpStream) -> bool {
    use std::io::Read;
    s.set_nonblocking(true).unwrap();
    let mut buf = [0u8; 64];
    match s.read(&mut buf) {
        Ok(0) => true,
        Ok(n) => panic!("unexpected bytes {:?}", &buf[..n]),
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => false,
        Err(_) => true,
    }
}

/// A dropped connection is closed by the time the drop is reported: when
/// `Server::restart` returns, when the caller of `COORDIS.SERVER RESTART`
/// sees its own connection end, when CLIENT KILL answers (Redis frees a
/// killed client before it replies). A client library that checks its
/// pooled connection before reusing it then reconnects rather than send a
/// request into a socket about to be reset.
#[test]
fn a_dropped_connection_is_closed_before_the_drop_is_reported() {
    let server = coordis::Server::builder().start_blocking().unwrap();
    for round in 0..20 {
        let mut other = connected(server.addr());
        server.restart(round % 2 == 0);
        assert!(closed_already(&mut other), "round {round}: Server::restart");

        let mut other = connected(server.addr());
        let mut c = RawClient::connect(server.addr()).unwrap();
        c.send(&RawClient::encode(&[b"COORDIS.SERVER", b"RESTART", b"FLUSH"]))
            .unwrap();
        assert_eq!(c.read_to_close().unwrap(), b"");
        assert!(closed_already(&mut other), "round {round}: COORDIS.SERVER RESTART");
    }
    let redis = coordis::testing::RedisServer::start(&[]).unwrap();
    let mut addrs = vec![("coordis", server.addr())];
    addrs.extend(redis.as_ref().map(|r| ("redis", r.addr())));
    for (name, addr) in addrs {
        for round in 0..20 {
            let mut other = connected(addr);
            let mut c = RawClient::connect(addr).unwrap();
            let id = String::from_utf8(c.command(&["CLIENT", "ID"]).unwrap()).unwrap();
            let id: u64 = id.trim_start_matches(':').trim().parse().unwrap();
            let killed = c
                .command(&["CLIENT", "KILL", "ID", &(id - 1).to_string(), "SKIPME", "yes"])
                .unwrap();
            assert_eq!(killed, b":1\r\n", "{name}");
            assert!(closed_already(&mut other), "{name} round {round}: CLIENT KILL");
        }
    }
}

#[test]
fn server_faults_over_the_wire() {
    let server = coordis::Server::builder().start_blocking().unwrap();
    let mut c = RawClient::connect(server.addr()).unwrap();
    let mut other = RawClient::connect(server.addr()).unwrap();
    assert_eq!(c.command(&["SET", "k", "v"]).unwrap(), b"+OK\r\n");
    let started = Instant::now();
    assert_eq!(c.command(&["COORDIS.SERVER", "PAUSE", "300"]).unwrap(), b"+OK\r\n");
    assert_eq!(other.command(&["GET", "k"]).unwrap(), b"$1\r\nv\r\n");
    assert!(
        started.elapsed() >= Duration::from_millis(250),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        c.command(&["COORDIS.SERVER", "RESTART", "NOW"]).unwrap(),
        b"-ERR syntax error\r\n"
    );
    c.send(&RawClient::encode(&[b"COORDIS.SERVER", b"RESTART", b"FLUSH"]))
        .unwrap();
    assert!(c.read_reply().is_err(), "the caller is dropped too, without a reply");
    assert!(other.command(&["PING"]).is_err());
    let mut c = RawClient::connect(server.addr()).unwrap();
    assert_eq!(c.command(&["EXISTS", "k"]).unwrap(), b":0\r\n");
    assert!(c.command(&["COORDIS.SERVER", "HELP"]).unwrap().starts_with(b"*18\r\n"));
}

/// An embedded server with DEBUG enabled (`enable-debug-command yes`).
fn debug_server() -> coordis::BlockingServer {
    let mut builder = coordis::Server::builder();
    builder.config_mut().enable_debug_command = "yes".into();
    builder.start_blocking().unwrap()
}

/// A redis-server and an embedded coordis, both with DEBUG enabled;
/// `None` when redis-server is not installed.
fn debug_servers() -> Option<(coordis::testing::RedisServer, coordis::BlockingServer)> {
    let redis = coordis::testing::RedisServer::start(&["--enable-debug-command", "yes"]).unwrap()?;
    Some((redis, debug_server()))
}

/// A DEBUG POPULATE prefix whose keys Redis cuts at 127 bytes.
static LONG_PREFIX: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| format!("long{}", "x".repeat(130)));

/// DEBUG, enabled on both servers (`enable-debug-command yes`), answers as
/// Redis 7.0.15 does; `DEBUG OBJECT` shows the same fields (its address and
/// serialized length are coordis's own).
#[test]
fn debug_answers_as_redis_when_enabled() {
    let Some((redis, server)) = debug_servers() else {
        return;
    };
    let mut ours = RawClient::connect(server.addr()).unwrap();
    let mut theirs = RawClient::connect(redis.addr()).unwrap();
    for args in [
        &["DEBUG", "SLEEP", "0"][..],
        &["DEBUG", "SLEEP", "abc"],
        &["DEBUG", "sleep"],
        &["DEBUG", "SET-ACTIVE-EXPIRE", "1"],
        &["DEBUG", "set-active-expire"],
        &["DEBUG", "nosuch", "x", "y"],
        &["DEBUG", "OBJECT", "nokey"],
        &["DEBUG", "object"],
        &["DEBUG"],
        &["RPUSH", "list", "a"],
        // PAUSE-CRON reads its switch as C's atoi; HTSTATS and HTSTATS-KEY's
        // arguments and errors (a list has no hash table; no FULL in 7.0).
        &["DEBUG", "PAUSE-CRON", "1x"],
        &["DEBUG", "PAUSE-CRON", "0x1"],
        &["DEBUG", "pause-cron"],
        &["DEBUG", "PAUSE-CRON", "0", "1"],
        &["DEBUG", "HTSTATS", "1"],
        &["DEBUG", "HTSTATS", "16"],
        &["DEBUG", "HTSTATS", "-1"],
        &["DEBUG", "HTSTATS", "1.5"],
        &["DEBUG", "HTSTATS", "0", "full"],
        &["DEBUG", "htstats"],
        &["DEBUG", "HTSTATS-KEY", "nokey"],
        &["DEBUG", "HTSTATS-KEY", "list"],
        &["DEBUG", "HTSTATS-KEY", "list", "full"],
        &["DEBUG", "htstats-key"],
        // POPULATE: `key:N` = `value:N`, an existing key kept, a prefix,
        // a size cutting or zero-padding the value, a prefix past Redis's
        // 128-byte buffer, no dirty changes; Redis's argument errors.
        &["SET", "key:1", "mine"],
        &["DEBUG", "POPULATE", "3"],
        &["DEBUG", "POPULATE", "4", "p", "3"],
        &["DEBUG", "POPULATE", "2", "q", "12"],
        &["DEBUG", "POPULATE", "2", &LONG_PREFIX],
        &["DEBUG", "POPULATE", "0"],
        &["DEBUG", "POPULATE", "1", "r", "0"],
        &["MGET", "key:0", "key:1", "key:2", "key:3", "p:3", "q:0", "q:1", "r:0"],
        &["KEYS", "long*"],
        &["DBSIZE"],
        &["TYPE", "p:0"],
        &["DEBUG", "POPULATE", "-1"],
        &["DEBUG", "POPULATE", "x"],
        &["DEBUG", "POPULATE", "1", "k", "-5"],
        &["DEBUG", "POPULATE", "1", "k", "x"],
        &["DEBUG", "POPULATE", "1", "a", "2", "b"],
        &["DEBUG", "populate"],
        &["DEBUG", "DIGEST"],
    ] {
        assert_eq!(ours.command(args).unwrap(), theirs.command(args).unwrap(), "{args:?}");
    }
    for c in [&mut ours, &mut theirs] {
        let changes = c.info_field("persistence", "rdb_changes_since_last_save");
        assert_eq!(changes, "2", "SET and RPUSH are the only changes");
        // What follows counts the keys from here.
        assert_eq!(c.command(&["FLUSHALL"]).unwrap(), b"+OK\r\n");
        assert_eq!(c.command(&["RPUSH", "list", "a"]).unwrap(), b":1\r\n");
    }
    for c in [&mut ours, &mut theirs] {
        assert_eq!(c.command(&["SET", "k", "v"]).unwrap(), b"+OK\r\n");
        let line = String::from_utf8(c.command(&["DEBUG", "OBJECT", "k"]).unwrap()).unwrap();
        let fields: Vec<&str> = line
            .trim_end()
            .split(' ')
            .map(|f| f.split(':').next().unwrap())
            .collect();
        assert_eq!(
            fields,
            [
                "+Value",
                "at",
                "refcount",
                "encoding",
                "serializedlength",
                "lru",
                "lru_seconds_idle"
            ],
            "{line}"
        );
        assert!(line.contains(" encoding:embstr "), "{line}");
        // Active expiry off: a key past its deadline stays until touched.
        assert_eq!(c.command(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]).unwrap(), b"+OK\r\n");
        assert_eq!(c.command(&["SET", "gone", "v", "PX", "10"]).unwrap(), b"+OK\r\n");
    }
    std::thread::sleep(Duration::from_millis(400));
    for c in [&mut ours, &mut theirs] {
        assert_eq!(c.command(&["DBSIZE"]).unwrap(), b":3\r\n");
        assert_eq!(c.command(&["GET", "gone"]).unwrap(), b"$-1\r\n");
        assert_eq!(c.command(&["DBSIZE"]).unwrap(), b":2\r\n");
    }
    // The whole server sleeps, as Redis's does.
    let mut other = RawClient::connect(server.addr()).unwrap();
    ours.send(&RawClient::encode(&[b"DEBUG", b"SLEEP", b"0.3"])).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    let started = Instant::now();
    assert_eq!(other.command(&["PING"]).unwrap(), b"+PONG\r\n");
    assert!(
        started.elapsed() >= Duration::from_millis(150),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(ours.read_reply().unwrap(), b"+OK\r\n");
}

/// One seed for every random choice: the same seed and the same commands
/// give the same answers, on another server too, and over the wire.
#[test]
fn seeded_random_choices_replay() {
    let run = |seed_over_the_wire: bool| -> Vec<Vec<u8>> {
        let server = coordis::Server::builder().start_blocking().unwrap();
        let mut c = RawClient::connect(server.addr()).unwrap();
        let members: Vec<String> = (0..50).map(|i| format!("m{i}")).collect();
        let mut sadd = vec!["SADD", "s"];
        sadd.extend(members.iter().map(String::as_str));
        c.command(&sadd).unwrap();
        for (i, m) in members.iter().enumerate() {
            c.command(&["ZADD", "z", &i.to_string(), m]).unwrap();
            c.command(&["HSET", "h", m, "v"]).unwrap();
            c.command(&["SET", m, "v"]).unwrap();
        }
        if seed_over_the_wire {
            assert_eq!(c.command(&["COORDIS.SERVER", "SEED", "42"]).unwrap(), b"+OK\r\n");
        } else {
            server.control().seed_random(42);
        }
        let commands: [&[&str]; 6] = [
            &["SRANDMEMBER", "s", "5"],
            &["SPOP", "s", "3"],
            &["ZRANDMEMBER", "z", "-4", "WITHSCORES"],
            &["HRANDFIELD", "h", "3"],
            &["RANDOMKEY"],
            &["SPOP", "s"],
        ];
        commands.iter().map(|args| c.command(args).unwrap()).collect()
    };
    let first = run(false);
    assert_eq!(run(false), first, "the same seed replays");
    assert_eq!(run(true), first, "over the wire too");
}

/// The keyspace from the test, without a client: fixtures in, typed values
/// and TTLs out, a readable dump for assertion messages; writes are writes
/// (a blocked client is served).
#[test]
fn direct_keyspace_access() {
    use coordis::KeyValue;
    let server = coordis::Server::builder().start_blocking().unwrap();
    let clock = server.clock().unwrap();
    clock.freeze();
    let keyspace = server.control().keyspace();
    keyspace
        .load(
            "# a fixture\n\
             SET lock:job pod-a PX 30000\n\
             RPUSH queue a b\n\
             SADD members y x\n\
             HSET h f1 v1 f2 v2\n\
             ZADD z 2 b 1 a\n\
             XADD events 1-1 job 7 state done\n",
        )
        .unwrap();
    assert_eq!(
        keyspace.load("SET ok 1\nLPUSH lock:job x\n").unwrap_err(),
        "line 2: LPUSH lock:job x: WRONGTYPE Operation against a key holding the wrong kind of value"
    );
    assert_eq!(keyspace.get("lock:job"), Some(KeyValue::String("pod-a".into())));
    assert_eq!(
        keyspace.get("queue"),
        Some(KeyValue::List(vec!["a".into(), "b".into()]))
    );
    assert_eq!(
        keyspace.get("members"),
        Some(KeyValue::Set(vec!["x".into(), "y".into()]))
    );
    assert_eq!(
        keyspace.get("h"),
        Some(KeyValue::Hash(vec![
            ("f1".into(), "v1".into()),
            ("f2".into(), "v2".into())
        ]))
    );
    assert_eq!(
        keyspace.get("z"),
        Some(KeyValue::ZSet(vec![("a".into(), 1.0), ("b".into(), 2.0)]))
    );
    assert_eq!(
        keyspace.get("events"),
        Some(KeyValue::Stream(vec![(
            "1-1".into(),
            vec![("job".into(), "7".into()), ("state".into(), "done".into())]
        )]))
    );
    assert_eq!(keyspace.get("nokey"), None);
    assert_eq!(keyspace.ttl("lock:job"), Some(Some(Duration::from_secs(30))));
    assert_eq!(keyspace.ttl("queue"), Some(None));
    assert_eq!(keyspace.ttl("nokey"), None);
    assert_eq!(
        keyspace.keys(),
        ["events", "h", "lock:job", "members", "ok", "queue", "z"]
    );
    let dump = keyspace.dump();
    assert!(
        dump.contains("lock:job                 string    30000ms  \"pod-a\""),
        "{dump}"
    );
    assert!(
        dump.contains("queue                    list            -  [\"a\", \"b\"]"),
        "{dump}"
    );
    assert!(
        dump.contains("events                   stream          -  [1-1 {\"job\": \"7\", \"state\": \"done\"}]"),
        "{dump}"
    );
    // What a client sees, and what the keyspace sees of a client's writes.
    let mut c = RawClient::connect(server.addr()).unwrap();
    assert_eq!(c.command(&["GET", "lock:job"]).unwrap(), b"$5\r\npod-a\r\n");
    c.command(&["INCR", "counter"]).unwrap();
    assert_eq!(keyspace.get("counter"), Some(KeyValue::String("1".into())));
    // A write from the test serves a blocked client.
    let mut waiter = RawClient::connect(server.addr()).unwrap();
    waiter.send(&RawClient::encode(&[b"BLPOP", b"jobs", b"0"])).unwrap();
    while !String::from_utf8(c.command(&["INFO", "clients"]).unwrap())
        .unwrap()
        .contains("blocked_clients:1\r\n")
    {
        std::thread::sleep(Duration::from_millis(2));
    }
    keyspace.load("RPUSH jobs j1").unwrap();
    assert_eq!(waiter.read_reply().unwrap(), b"*2\r\n$4\r\njobs\r\n$2\r\nj1\r\n");
    keyspace.set("lease", "me", Some(Duration::from_millis(500)));
    clock.advance(Duration::from_millis(501));
    assert_eq!(keyspace.get("lease"), None);
    assert!(keyspace.delete("ok"));
    assert!(!keyspace.delete("ok"));
    assert_eq!(keyspace.clone().db(1).keys(), Vec::<String>::new());
}

/// "The server is down": connections dropped, new ones closed at once,
/// until it is up again with its data.
#[test]
fn a_server_plays_down_and_comes_back() {
    let server = coordis::Server::builder().start_blocking().unwrap();
    let control = server.control();
    let mut c = RawClient::connect(server.addr()).unwrap();
    assert_eq!(c.command(&["SET", "k", "v"]).unwrap(), b"+OK\r\n");
    control.set_down(true);
    assert!(c.command(&["PING"]).is_err(), "dropped");
    for _ in 0..3 {
        let mut fresh = RawClient::connect(server.addr()).unwrap();
        assert!(fresh.command(&["PING"]).is_err(), "closed at once");
    }
    control.set_down(false);
    let mut c = RawClient::connect(server.addr()).unwrap();
    assert_eq!(c.command(&["GET", "k"]).unwrap(), b"$1\r\nv\r\n");
    // Over the wire, for a while: the asking connection is dropped too.
    let mut watcher = RawClient::connect(server.addr()).unwrap();
    assert!(
        c.command(&["COORDIS.SERVER", "DOWN", "300"]).is_err(),
        "no reply from a dead server"
    );
    assert!(watcher.command(&["PING"]).is_err(), "dropped");
    assert!(RawClient::connect(server.addr()).unwrap().command(&["PING"]).is_err());
    let started = std::time::Instant::now();
    loop {
        if let Ok(reply) = RawClient::connect(server.addr()).and_then(|mut c| c.command(&["GET", "k"])) {
            assert_eq!(reply, b"$1\r\nv\r\n", "back, data kept");
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(5), "never came back");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The idle-client `timeout` runs on the server clock: a test moves time
/// past it and the idle client is closed, a subscriber and a blocked
/// client are not (as in Redis), all without a real wait.
#[test]
fn idle_clients_are_closed_on_the_test_clock() {
    let server = coordis::Server::builder().start_blocking().unwrap();
    let clock = server.clock().unwrap();
    clock.freeze();
    let mut admin = RawClient::connect(server.addr()).unwrap();
    assert_eq!(admin.command(&["CONFIG", "SET", "timeout", "10"]).unwrap(), b"+OK\r\n");
    let mut idle = RawClient::connect(server.addr()).unwrap();
    assert_eq!(idle.command(&["PING"]).unwrap(), b"+PONG\r\n");
    let mut subscriber = RawClient::connect(server.addr()).unwrap();
    subscriber.command(&["SUBSCRIBE", "news"]).unwrap();
    let mut blocked = RawClient::connect(server.addr()).unwrap();
    blocked.send(&RawClient::encode(&[b"BLPOP", b"q", b"0"])).unwrap();
    while !String::from_utf8(admin.command(&["INFO", "clients"]).unwrap())
        .unwrap()
        .contains("blocked_clients:1\r\n")
    {
        std::thread::sleep(Duration::from_millis(2));
    }
    clock.advance(Duration::from_secs(9));
    assert_eq!(idle.command(&["PING"]).unwrap(), b"+PONG\r\n", "not idle long enough");
    clock.advance(Duration::from_secs(11));
    assert_eq!(idle.read_to_close().unwrap(), b"", "closed, no reply");
    assert!(admin.command(&["PING"]).is_err(), "idle just as long");
    let mut admin = RawClient::connect(server.addr()).unwrap();
    assert_eq!(admin.command(&["PUBLISH", "news", "still here"]).unwrap(), b":1\r\n");
    assert!(String::from_utf8(subscriber.read_reply().unwrap())
        .unwrap()
        .contains("still here"));
    assert_eq!(admin.command(&["RPUSH", "q", "job"]).unwrap(), b":1\r\n");
    assert_eq!(blocked.read_reply().unwrap(), b"*2\r\n$1\r\nq\r\n$3\r\njob\r\n");
}

/// DEBUG PROTOCOL answers each RESP3 type in RESP2 and RESP3 with Redis's
/// bytes (attributes and pushes left out or refused in RESP2), a script
/// returns a big number as Redis converts it, and DEBUG
/// QUICKLIST-PACKED-THRESHOLD checks its size as Redis does.
#[test]
fn debug_protocol_and_packed_threshold_answer_as_redis() {
    let Some((redis, server)) = debug_servers() else {
        return;
    };
    let types = [
        "string", "integer", "double", "bignum", "null", "array", "set", "map", "attrib", "push", "verbatim", "true",
        "false", "TRUE", "nosuch",
    ];
    for addr in [server.addr(), redis.addr()] {
        let mut c = RawClient::connect(addr).unwrap();
        assert_eq!(
            c.command(&["DEBUG", "PROTOCOL", "attrib"]).unwrap(),
            b"$39\r\nSome real reply following the attribute\r\n"
        );
    }
    for resp in ["2", "3"] {
        let mut ours = RawClient::connect(server.addr()).unwrap();
        let mut theirs = RawClient::connect(redis.addr()).unwrap();
        for c in [&mut ours, &mut theirs] {
            assert!(!c.command(&["HELLO", resp]).unwrap().starts_with(b"-"));
        }
        let mut cases: Vec<Vec<&str>> = types.iter().map(|t| vec!["DEBUG", "PROTOCOL", t]).collect();
        cases.extend([
            vec!["DEBUG", "PROTOCOL"],
            vec!["DEBUG", "PROTOCOL", "string", "x"],
            vec!["EVAL", "return {big_number='123'}", "0"],
            vec!["EVAL", "return {big_number='1\r\n2'}", "0"],
            vec!["EVAL", "redis.setresp(3); return {big_number='9'}", "0"],
        ]);
        for size in ["1b", "0", "4095mb", "4gb", "5gb", "abc", "-1", "1kb"] {
            cases.push(vec!["DEBUG", "QUICKLIST-PACKED-THRESHOLD", size]);
        }
        cases.push(vec!["DEBUG", "QUICKLIST-PACKED-THRESHOLD"]);
        for args in &cases {
            let (a, b) = (ours.command(args).unwrap(), theirs.command(args).unwrap());
            assert_eq!(
                String::from_utf8_lossy(&a),
                String::from_utf8_lossy(&b),
                "RESP{resp} {args:?}"
            );
            if resp == "3" && args.get(2) == Some(&"push") {
                // The push, then the reply that follows it.
                let (a, b) = (ours.read_reply().unwrap(), theirs.read_reply().unwrap());
                assert_eq!(
                    String::from_utf8_lossy(&a),
                    String::from_utf8_lossy(&b),
                    "after the push"
                );
            }
        }
    }
}

/// The text of a bulk or verbatim reply (RESP2 or RESP3; a verbatim
/// string's `txt:` dropped).
fn reply_text(reply: &[u8]) -> String {
    let text = String::from_utf8(reply.to_vec()).unwrap();
    let (head, body) = text.split_once("\r\n").unwrap_or_else(|| panic!("{text:?}"));
    assert!(head.starts_with('$') || head.starts_with('='), "{text:?}");
    let body = body.strip_suffix("\r\n").unwrap();
    body.strip_prefix("txt:").unwrap_or(body).to_string()
}

/// A DEBUG HTSTATS(-KEY) report's lines down to the chain length
/// distribution, every number as `N`: the part whose shape does not
/// depend on how the table's entries fell.
fn htstats_shape(text: &str) -> Vec<String> {
    let end = text.find(" Chain length distribution:\n").map_or(text.len(), |at| at);
    text[..end]
        .lines()
        .map(|line| {
            let mut shape = String::new();
            for c in line.chars() {
                let number = c.is_ascii_digit() || c == '.';
                if !(number && shape.ends_with('N')) {
                    shape.push(if number { 'N' } else { c });
                }
            }
            shape
        })
        .collect()
}

/// Runs `read` until Redis's `report` shows no second table: Redis's dict
/// rehashes a step at each access (coordis's tables resize at once).
fn settle_rehash(redis: &mut RawClient, report: &[&str], read: &[&str]) {
    for _ in 0..10_000 {
        if !reply_text(&redis.command(report).unwrap()).contains("rehashing target") {
            return;
        }
        redis.command(read).unwrap();
    }
    panic!("Redis still rehashing after 10000 reads");
}

/// The figure a DEBUG HTSTATS(-KEY) report gives for `label`.
fn htstats_figure(text: &str, label: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(&format!(" {label}: ")))
        .unwrap_or_else(|| panic!("no {label} in {text}"))
        .parse()
        .unwrap()
}

/// DEBUG HTSTATS-KEY and HTSTATS report a hash table as Redis's do: the
/// same lines and labels for a set and a hash in the hashtable encoding,
/// a sorted set in the skiplist one and a database, and the same element
/// counts; the table's own figures are coordis's (its table size a power
/// of two that holds the elements). The other encodings get Redis's error.
#[test]
fn debug_htstats_has_redis_s_shape_with_coordis_s_figures() {
    let Some((redis, server)) = debug_servers() else {
        return;
    };
    // Past the listpack limits (512 fields, 128 members).
    let members: Vec<String> = (0..600).map(|i| format!("m{i}")).collect();
    let mut ours = RawClient::connect(server.addr()).unwrap();
    let mut theirs = RawClient::connect(redis.addr()).unwrap();
    for c in [&mut ours, &mut theirs] {
        for (cmd, key) in [("SADD", "set"), ("SADD", "intset")] {
            let mut args = vec![cmd, key];
            args.extend(if key == "set" {
                members.iter().map(String::as_str).collect()
            } else {
                vec!["1", "2"]
            });
            c.command(&args).unwrap();
        }
        for m in &members {
            c.command(&["HSET", "hash", m, "v"]).unwrap();
            c.command(&["ZADD", "zset", "1", m]).unwrap();
        }
        c.command(&["HSET", "smallhash", "f", "v"]).unwrap();
        c.command(&["ZADD", "smallzset", "1", "m"]).unwrap();
        c.command(&["SET", "string", "v", "EX", "100"]).unwrap();
        c.command(&["RPUSH", "list", "a"]).unwrap();
        c.command(&["XADD", "stream", "1-1", "f", "v"]).unwrap();
    }
    for (key, read) in [("set", "SISMEMBER"), ("hash", "HEXISTS"), ("zset", "ZSCORE")] {
        let args = ["DEBUG", "HTSTATS-KEY", key];
        // Redis rehashes a step at each access: read until it is done.
        settle_rehash(&mut theirs, &args, &[read, key, "m0"]);
        let (a, b) = (
            reply_text(&ours.command(&args).unwrap()),
            reply_text(&theirs.command(&args).unwrap()),
        );
        assert_eq!(htstats_shape(&a), htstats_shape(&b), "{key}:\n{a}\n{b}");
        assert_eq!(htstats_figure(&a, "number of elements"), 600, "{a}");
        assert_eq!(htstats_figure(&b, "number of elements"), 600, "{b}");
        let size = htstats_figure(&a, "table size");
        assert!(size.is_power_of_two() && size >= 600, "{a}");
    }
    // The database's nine keys, then the deadlines (a tree in coordis:
    // its own line, the same count).
    settle_rehash(&mut theirs, &["DEBUG", "HTSTATS", "0"], &["EXISTS", "set"]);
    let (a, b) = (
        reply_text(&ours.command(&["DEBUG", "HTSTATS", "0"]).unwrap()),
        reply_text(&theirs.command(&["DEBUG", "HTSTATS", "0"]).unwrap()),
    );
    let (keys_a, expires_a) = a.split_once("[Expires HT]\n").unwrap();
    let (keys_b, expires_b) = b.split_once("[Expires HT]\n").unwrap();
    assert_eq!(htstats_shape(keys_a), htstats_shape(keys_b), "{a}\n{b}");
    assert_eq!(htstats_figure(keys_a, "number of elements"), 9, "{a}");
    assert_eq!(htstats_figure(keys_b, "number of elements"), 9, "{b}");
    assert_eq!(htstats_figure(expires_a, "number of elements"), 1, "{a}");
    assert_eq!(htstats_figure(expires_b, "number of elements"), 1, "{b}");
    for resp in ["2", "3"] {
        for c in [&mut ours, &mut theirs] {
            assert!(!c.command(&["HELLO", resp]).unwrap().starts_with(b"-"));
        }
        for key in ["intset", "smallhash", "smallzset", "string", "list", "stream", "nokey"] {
            let args = ["DEBUG", "HTSTATS-KEY", key];
            assert_eq!(
                String::from_utf8_lossy(&ours.command(&args).unwrap()),
                String::from_utf8_lossy(&theirs.command(&args).unwrap()),
                "RESP{resp} {key}"
            );
        }
        // A verbatim string in RESP3, a bulk string in RESP2.
        let args = ["DEBUG", "HTSTATS-KEY", "set"];
        let (a, b) = (ours.command(&args).unwrap(), theirs.command(&args).unwrap());
        assert_eq!(a[..1], b[..1], "RESP{resp}");
        assert_eq!(a.starts_with(b"="), resp == "3");
    }
}

/// DEBUG HTSTATS-KEY follows coordis's table as it grows and shrinks:
/// the element count is the set's, the table size the table's, and it
/// falls when most members go.
#[test]
fn debug_htstats_follows_the_table_as_it_grows_and_shrinks() {
    let server = debug_server();
    let mut c = RawClient::connect(server.addr()).unwrap();
    let members: Vec<String> = (0..5000).map(|i| format!("m{i}")).collect();
    for chunk in members.chunks(500) {
        let mut args = vec!["SADD", "s"];
        args.extend(chunk.iter().map(String::as_str));
        c.command(&args).unwrap();
    }
    let stats = |c: &mut RawClient| reply_text(&c.command(&["DEBUG", "HTSTATS-KEY", "s"]).unwrap());
    let grown = stats(&mut c);
    assert_eq!(htstats_figure(&grown, "number of elements"), 5000, "{grown}");
    assert_eq!(
        htstats_figure(&grown, "different slots"),
        5000,
        "one member a slot: {grown}"
    );
    let big = htstats_figure(&grown, "table size");
    assert!(big.is_power_of_two() && big >= 5000, "{grown}");
    let mut srem = vec!["SREM", "s"];
    srem.extend(members[10..].iter().map(String::as_str));
    assert_eq!(c.command(&srem).unwrap(), b":4990\r\n");
    let shrunk = stats(&mut c);
    assert_eq!(htstats_figure(&shrunk, "number of elements"), 10, "{shrunk}");
    let small = htstats_figure(&shrunk, "table size");
    assert!(small < big && small >= 10, "the table shrank: {shrunk}");
    // The database's table holds the one key.
    let db = reply_text(&c.command(&["DEBUG", "HTSTATS", "0"]).unwrap());
    assert_eq!(htstats_figure(&db, "number of elements"), 1, "{db}");
    assert!(db
        .ends_with("[Expires HT]\nHash table 0 stats (main hash table):\nNo stats available for empty dictionaries\n"));
}

/// DEBUG PAUSE-CRON 1 holds the periodic tick, as Redis's holds its
/// `serverCron`: a key past its deadline stays (DBSIZE counts it, no
/// `expired_keys`) until DEBUG PAUSE-CRON 0, then the tick expires it.
/// Both servers on real time.
#[test]
fn debug_pause_cron_holds_active_expiry_as_in_redis() {
    let Some((redis, server)) = debug_servers() else {
        return;
    };
    let mut clients = [
        RawClient::connect(server.addr()).unwrap(),
        RawClient::connect(redis.addr()).unwrap(),
    ];
    for c in clients.iter_mut() {
        assert_eq!(c.command(&["SET", "kept", "v"]).unwrap(), b"+OK\r\n");
        assert_eq!(c.command(&["DEBUG", "PAUSE-CRON", "1"]).unwrap(), b"+OK\r\n");
        assert_eq!(c.command(&["SET", "gone", "v", "PX", "20"]).unwrap(), b"+OK\r\n");
    }
    // Several ticks at the default hz 10.
    std::thread::sleep(Duration::from_millis(500));
    for c in clients.iter_mut() {
        assert_eq!(c.command(&["DBSIZE"]).unwrap(), b":2\r\n");
        assert_eq!(c.info_field("stats", "expired_keys"), "0");
        assert_eq!(c.command(&["DEBUG", "PAUSE-CRON", "0"]).unwrap(), b"+OK\r\n");
    }
    for c in clients.iter_mut() {
        let deadline = Instant::now() + Duration::from_secs(5);
        while c.command(&["DBSIZE"]).unwrap() != b":1\r\n" {
            assert!(Instant::now() < deadline, "the tick expires the key once resumed");
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(c.info_field("stats", "expired_keys"), "1");
    }
}

/// On the test clock, DEBUG PAUSE-CRON 1 holds what a clock move does in
/// the tick's place: due keys stay (a read still expires one lazily), an
/// idle client past `timeout` stays; a blocked client's timeout is not the
/// tick's and is answered. Once resumed, the tick does the rest.
#[test]
fn debug_pause_cron_holds_the_tick_on_the_test_clock() {
    let server = debug_server();
    let clock = server.clock().unwrap();
    clock.freeze();
    let mut c = RawClient::connect(server.addr()).unwrap();
    assert_eq!(c.command(&["CONFIG", "SET", "timeout", "10"]).unwrap(), b"+OK\r\n");
    let mut idle = RawClient::connect(server.addr()).unwrap();
    assert_eq!(idle.command(&["PING"]).unwrap(), b"+PONG\r\n");
    for key in ["gone", "read"] {
        assert_eq!(c.command(&["SET", key, "v", "PX", "1000"]).unwrap(), b"+OK\r\n");
    }
    let mut waiter = RawClient::connect(server.addr()).unwrap();
    waiter.send(&RawClient::encode(&[b"BLPOP", b"q", b"5"])).unwrap();
    while c.info_field("clients", "blocked_clients") != "1" {
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(c.command(&["DEBUG", "PAUSE-CRON", "1"]).unwrap(), b"+OK\r\n");
    clock.advance(Duration::from_secs(20));
    assert_eq!(waiter.read_reply().unwrap(), b"*-1\r\n", "blocked timeouts go on");
    // Over real ticks too.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(c.command(&["DBSIZE"]).unwrap(), b":2\r\n");
    assert_eq!(c.command(&["GET", "read"]).unwrap(), b"$-1\r\n", "lazy expiry goes on");
    assert_eq!(c.command(&["DBSIZE"]).unwrap(), b":1\r\n");
    assert_eq!(
        c.info_field("clients", "connected_clients"),
        "3",
        "the idle client stays"
    );
    assert_eq!(c.command(&["DEBUG", "PAUSE-CRON", "0"]).unwrap(), b"+OK\r\n");
    assert_eq!(idle.read_to_close().unwrap(), b"", "closed by the next tick");
    let deadline = Instant::now() + Duration::from_secs(5);
    while c.command(&["DBSIZE"]).unwrap() != b":0\r\n" {
        assert!(Instant::now() < deadline, "the tick expires the key once resumed");
        std::thread::sleep(Duration::from_millis(10));
    }
}
