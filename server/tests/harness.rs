//! The effects-feed test tools of `coordis::testing` against a real Redis
//! 7.0: the replication-stream capture (the shapes Redis propagates for a
//! small workload, disk and diskless full syncs), the RESP command parser,
//! the time normaliser, the dataset snapshot and its comparison, and the
//! refusal of a `redis-server` that is not 7.0.x.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use coordis::testing::{
    compare_datasets, dataset, normalize_times, parse_commands, server_version, show_command, RawClient, RedisServer,
    ReplicationCapture, StreamCommand,
};

/// The environment variable that turns [`fake_redis_child`] on.
const FAKE_REDIS_CHILD: &str = "COORDIS_HARNESS_FAKE_REDIS_CHILD";

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64
}

fn cmd(words: &[&str]) -> StreamCommand {
    words.iter().map(|w| w.as_bytes().to_vec()).collect()
}

fn ok(c: &mut RawClient, args: &[&str]) {
    let reply = c.command(args).unwrap();
    assert!(
        !reply.starts_with(b"-"),
        "{args:?}: {}",
        String::from_utf8_lossy(&reply)
    );
}

fn lines(cmds: &[StreamCommand]) -> Vec<String> {
    cmds.iter().map(|c| show_command(c)).collect()
}

#[test]
fn the_replication_stream_of_a_small_workload_has_redis_shapes() {
    let Some(redis) = RedisServer::start(&[]).unwrap() else {
        return;
    };
    let mut capture = ReplicationCapture::start(redis.addr()).unwrap();
    let mut c = RawClient::connect(redis.addr()).unwrap();
    let before = now_ms();
    ok(&mut c, &["SET", "k", "v"]);
    ok(&mut c, &["EXPIRE", "k", "100"]);
    ok(&mut c, &["SET", "f", "1.5"]);
    ok(&mut c, &["INCRBYFLOAT", "f", "0.25"]);
    ok(&mut c, &["SELECT", "1"]);
    ok(&mut c, &["SET", "one", "1"]);
    ok(&mut c, &["SELECT", "0"]);
    ok(&mut c, &["MULTI"]);
    ok(&mut c, &["SET", "a", "1"]);
    ok(&mut c, &["SET", "b", "2"]);
    ok(&mut c, &["EXEC"]);
    // A read propagates nothing.
    ok(&mut c, &["GET", "a"]);
    let stream = capture.take().unwrap();
    let after = now_ms();

    // The deadline is absolute: now + 100 s, as the primary saw now.
    let deadline: u64 = String::from_utf8_lossy(&stream[2][2]).parse().unwrap();
    assert!(
        (before + 100_000..=after + 100_000).contains(&deadline),
        "{deadline} not within [{before}, {after}] + 100 s"
    );
    let masked = normalize_times(&stream, before + 100_000, after - before + 1000);
    assert_eq!(
        lines(&masked),
        [
            "SELECT 0",
            "SET k v",
            "PEXPIREAT k <ms>",
            "SET f 1.5",
            "SET f 1.75 KEEPTTL",
            "SELECT 1",
            "SET one 1",
            "SELECT 0",
            "MULTI",
            "SET a 1",
            "SET b 2",
            "EXEC",
        ]
    );

    // Nothing was propagated since: a take with no workload is empty, and
    // the stream is in db 0 again (the marker's SELECT was dropped).
    assert!(capture.take().unwrap().is_empty());
    ok(&mut c, &["SELECT", "1"]);
    ok(&mut c, &["DEL", "one"]);
    assert_eq!(lines(&capture.take().unwrap()), ["SELECT 1", "DEL one"]);
}

#[test]
fn a_diskless_full_sync_is_captured_too() {
    let Some(redis) = RedisServer::start(&["--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0"]).unwrap()
    else {
        return;
    };
    let mut c = RawClient::connect(redis.addr()).unwrap();
    // Something in the RDB, so the payload is not trivially small.
    ok(&mut c, &["SET", "before", "x"]);
    let mut capture = ReplicationCapture::start_diskless(redis.addr()).unwrap();
    ok(&mut c, &["SETEX", "k", "100", "v"]);
    let stream = capture.take().unwrap();
    let masked = normalize_times(&stream, now_ms() + 100_000, 5000);
    assert_eq!(lines(&masked), ["SELECT 0", "SET k v PXAT <ms>"]);
    let info = c.command(&["INFO", "replication"]).unwrap();
    assert!(
        String::from_utf8_lossy(&info).contains("state=online"),
        "the capture is an online replica: {}",
        String::from_utf8_lossy(&info)
    );
}

#[test]
fn a_capture_never_hangs() {
    let Some(redis) = RedisServer::start(&[]).unwrap() else {
        return;
    };
    let mut capture = ReplicationCapture::start(redis.addr()).unwrap();
    let started = std::time::Instant::now();
    assert!(capture
        .commands_until_quiet(Duration::from_millis(300))
        .unwrap()
        .is_empty());
    assert!(started.elapsed() < Duration::from_secs(5));
    // The primary going away is an error, not a wait.
    let mut admin = RawClient::connect(redis.addr()).unwrap();
    admin.send(&RawClient::encode(&[b"SHUTDOWN", b"NOSAVE"])).unwrap();
    let err = loop {
        match capture.commands_until_quiet(Duration::from_millis(200)) {
            Err(e) => break e,
            Ok(_) if started.elapsed() < Duration::from_secs(10) => continue,
            Ok(_) => panic!("no error 10 s after SHUTDOWN"),
        }
    };
    assert_eq!(err.kind(), std::io::ErrorKind::UnexpectedEof, "{err}");
}

#[test]
fn parse_commands_reads_a_feed_of_resp_arrays() {
    let mut bytes = RawClient::encode(&[b"SELECT", b"0"]);
    bytes.extend(RawClient::encode(&[b"SET", b"k", b"a\r\nb"]));
    bytes.extend(RawClient::encode(&[b"SET", b"", b"\x00"]));
    assert_eq!(
        parse_commands(&bytes),
        [
            cmd(&["SELECT", "0"]),
            cmd(&["SET", "k", "a\r\nb"]),
            vec![b"SET".to_vec(), vec![], vec![0]]
        ]
    );
    assert!(parse_commands(b"").is_empty());
    let truncated = &bytes[..bytes.len() - 1];
    assert!(std::panic::catch_unwind(|| parse_commands(truncated)).is_err());
    assert!(std::panic::catch_unwind(|| parse_commands(b"+OK\r\n")).is_err());
}

#[test]
fn normalize_times_masks_only_times_near_the_moment() {
    let around = 1_800_000_000_000;
    let cmds = vec![
        cmd(&["PEXPIREAT", "k", "1800000000250"]),
        cmd(&["EXPIREAT", "k", "1800000001"]),
        cmd(&["SET", "k", "v", "PXAT", "1799999999900"]),
        cmd(&["XADD", "s", "1800000000001-7", "f", "v"]),
        // Far from the moment, relative, or not canonical: kept.
        cmd(&["PEXPIREAT", "k", "4102444800000"]),
        cmd(&["SET", "k", "v", "PX", "100"]),
        cmd(&["SET", "k", "01800000000000"]),
        cmd(&["SET", "1800000000000", "-1800000000000"]),
    ];
    assert_eq!(
        lines(&normalize_times(&cmds, around, 1000)),
        [
            "PEXPIREAT k <ms>",
            "EXPIREAT k <s>",
            "SET k v PXAT <ms>",
            "XADD s <ms>-7 f v",
            "PEXPIREAT k 4102444800000",
            "SET k v PX 100",
            "SET k 01800000000000",
            "SET <ms> -1800000000000",
        ]
    );
    // Outside the tolerance: kept.
    assert_eq!(
        lines(&normalize_times(&cmds[..1], around, 100)),
        ["PEXPIREAT k 1800000000250"]
    );
}

/// The same writes, in two databases, with every type and deadlines.
fn feed(addr: std::net::SocketAddr) {
    let mut c = RawClient::connect(addr).unwrap();
    for args in [
        &["SET", "s", "v"][..],
        &["SET", "ttl", "v", "PX", "100000"],
        &["RPUSH", "l", "a", "b", "a"],
        &["SADD", "set", "c", "a", "b", "1", "2"],
        &["ZADD", "z", "2", "b", "1", "a", "1.5", "c"],
        &["HSET", "h", "f2", "2", "f1", "1"],
        &["XADD", "st", "1-1", "f", "v"],
        &["XADD", "st", "2-1", "g", "w"],
        &["XGROUP", "CREATE", "st", "g", "0"],
        &["XREADGROUP", "GROUP", "g", "c1", "COUNT", "1", "STREAMS", "st", ">"],
        &["SELECT", "1"],
        &["SET", "s", "one"],
        &["EXPIRE", "s", "500"],
    ] {
        ok(&mut c, args);
    }
}

#[test]
fn datasets_of_two_servers_fed_alike_compare_equal_and_differences_are_named() {
    let Some(a) = RedisServer::start(&[]).unwrap() else {
        return;
    };
    let Some(b) = RedisServer::start(&[]).unwrap() else {
        return;
    };
    feed(a.addr());
    feed(b.addr());
    let da = dataset(a.addr(), &[0, 1]).unwrap();
    let db = dataset(b.addr(), &[0, 1]).unwrap();
    assert_eq!(da.len(), 8, "{da:?}");
    assert_eq!(compare_datasets(&da, &db, 1000), Vec::<String>::new());

    let key = |db: usize, k: &str| (db, k.as_bytes().to_vec());
    let set = &da[&key(0, "set")];
    assert_eq!(set.kind, "set");
    assert_eq!(set.value, ["1", "2", "a", "b", "c"].map(|m| m.as_bytes().to_vec()));
    assert_eq!(da[&key(0, "s")].pttl, None);
    assert!(da[&key(1, "s")].pttl.is_some_and(|ms| ms > 400_000 && ms <= 500_000));
    let stream: Vec<String> = da[&key(0, "st")]
        .value
        .iter()
        .map(|l| String::from_utf8_lossy(l).into_owned())
        .collect();
    assert_eq!(
        stream,
        [
            "1-1 f v",
            "2-1 g w",
            "meta last-generated-id=2-1 max-deleted-entry-id=0-0 entries-added=2 recorded-first-entry-id=1-1",
            "group g last-delivered-id=1-1 entries-read=1 lag=1 pel-count=1",
            "pending g 1-1 consumer=c1 delivery-count=1",
            "consumer g c1 pel-count=1",
        ]
    );

    // Deliberate differences, one of each kind.
    let mut c = RawClient::connect(b.addr()).unwrap();
    ok(&mut c, &["RPUSH", "l", "extra"]);
    ok(&mut c, &["DEL", "h"]);
    ok(&mut c, &["SET", "only-b", "x"]);
    ok(&mut c, &["DEL", "z"]);
    ok(&mut c, &["SET", "z", "now a string"]);
    ok(&mut c, &["PERSIST", "ttl"]);
    ok(&mut c, &["XACK", "st", "g", "1-1"]);
    ok(&mut c, &["SELECT", "1"]);
    ok(&mut c, &["EXPIRE", "s", "100"]);
    let db = dataset(b.addr(), &[0, 1]).unwrap();
    let diffs = compare_datasets(&da, &db, 1000);
    assert_eq!(diffs.len(), 7, "{diffs:#?}");
    let expected = [
        "db 0 key h: only in a (hash f1 1 f2 2)",
        "db 0 key l: list values differ\n    a: a b a\n    b: a b a extra",
        "db 0 key only-b: only in b (string x)",
        "db 0 key z: type zset in a, string in b",
        "db 0 key ttl: pttl ",
        "db 0 key st: stream values differ",
        "db 1 key s: pttl ",
    ];
    for want in expected {
        assert!(diffs.iter().any(|d| d.starts_with(want)), "no {want:?} in {diffs:#?}");
    }
    assert!(diffs.iter().any(|d| d.contains("in a, persistent in b")), "{diffs:#?}");
}

#[test]
fn the_redis_server_is_the_reference_version() {
    let Some(redis) = RedisServer::start(&[]).unwrap() else {
        return;
    };
    assert!(redis.version().starts_with("7.0."), "{}", redis.version());
    assert_eq!(server_version(redis.addr()).unwrap(), redis.version());
    // Behind a password, the version comes from `redis-server --version`.
    let Some(locked) = RedisServer::start(&["--requirepass", "pw"]).unwrap() else {
        return;
    };
    assert_eq!(locked.version(), redis.version());
}

#[test]
fn a_redis_server_that_is_not_7_0_is_refused() {
    let dir = std::env::temp_dir().join(format!("coordis-fake-redis-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let fake = dir.join("redis-server");
    std::fs::write(
        &fake,
        "#!/bin/sh\necho 'Redis server v=6.2.14 sha=00000000:0 malloc=libc bits=64 build=0'\n",
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    // PATH is process-wide: the fake runs in a child test process, so the
    // other tests of this binary keep the real redis-server.
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "fake_redis_child", "--nocapture", "--test-threads=1"])
        .env("PATH", &dir)
        .env(FAKE_REDIS_CHILD, "1")
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("1 passed"), "the child ran the check: {text}");
}

/// Run by [`a_redis_server_that_is_not_7_0_is_refused`] with a fake 6.2
/// `redis-server` first on PATH; on its own it does nothing.
#[test]
fn fake_redis_child() {
    if std::env::var(FAKE_REDIS_CHILD).is_err() {
        return;
    }
    let err = RedisServer::start(&[]).expect_err("a 6.2 redis-server must be refused");
    let text = err.to_string();
    assert!(text.contains("6.2.14") && text.contains("7.0."), "{text}");
}
