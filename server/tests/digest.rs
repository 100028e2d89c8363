//! DEBUG DIGEST and DEBUG DIGEST-VALUE against a real Redis 7.0.15: the
//! same commands go to both servers (every type in every encoding, scores
//! that print differently, expiring keys, keys past their deadline that
//! active expiry left, several databases), and the dataset digest and each
//! key's value digest must be equal, byte for byte. Skipped loudly without
//! redis-server (a failure with `COORDIS_REQUIRE_REDIS=1`).

use std::net::SocketAddr;
use std::time::Duration;

use coordis::testing::{compare_digests, debug_digest, RawClient, RedisServer};

const ZEROS: &str = "0000000000000000000000000000000000000000";

/// A real Redis and a coordis, both allowing DEBUG; `None` when Redis is
/// not installed (the skip line is printed by `RedisServer::start`).
fn servers() -> Option<(RedisServer, coordis::BlockingServer)> {
    let redis = RedisServer::start(&["--enable-debug-command", "yes"]).unwrap()?;
    let mut builder = coordis::Server::builder();
    builder.config_mut().enable_debug_command = "yes".into();
    Some((redis, builder.start_blocking().unwrap()))
}

/// Sends `commands` to both servers over one connection each and asserts
/// the replies are equal (the workload did the same thing on both).
fn run_both(a: SocketAddr, b: SocketAddr, commands: &[Vec<String>]) {
    let (mut ca, mut cb) = (RawClient::connect(a).unwrap(), RawClient::connect(b).unwrap());
    for cmd in commands {
        let args: Vec<&[u8]> = cmd.iter().map(|s| s.as_bytes()).collect();
        let (ra, rb) = (ca.command_bytes(&args).unwrap(), cb.command_bytes(&args).unwrap());
        assert_eq!(
            String::from_utf8_lossy(&ra),
            String::from_utf8_lossy(&rb),
            "replies differ for {cmd:?}"
        );
    }
}

fn cmd(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| w.to_string()).collect()
}

/// Asserts both datasets have the same DEBUG DIGEST, and returns it.
fn assert_same_digest(redis: SocketAddr, ours: SocketAddr, dbs: &[usize], when: &str) -> String {
    let differences = compare_digests(redis, ours, dbs).unwrap();
    assert!(differences.is_empty(), "{when}:\n{}", differences.join("\n"));
    debug_digest(ours).unwrap()
}

/// The workload: in db 0 every type in each encoding Redis 7.0 gives it;
/// in dbs 3 and 9 keys with deadlines and copies of db 0's keys (the
/// database index is part of the digest).
fn every_type_and_encoding() -> Vec<Vec<String>> {
    let mut c: Vec<Vec<String>> = vec![];
    let long = "x".repeat(100);
    // Strings: int, embstr, raw, empty, binary, a negative and a huge integer.
    for (k, v) in [
        ("s:int", "12345"),
        ("s:neg", "-42"),
        ("s:big", "9223372036854775807"),
        ("s:notint", "012"),
        ("s:embstr", "hello"),
        ("s:raw", long.as_str()),
        ("s:empty", ""),
        ("s:bin", "a\u{0}b\r\n\u{7f}"),
    ] {
        c.push(cmd(&["SET", k, v]));
    }
    c.push(cmd(&["APPEND", "s:embstr", " world"]));
    c.push(cmd(&["INCRBYFLOAT", "s:float", "0.1"]));
    c.push(cmd(&["INCRBYFLOAT", "s:float", "0.2"]));
    // Lists: a small listpack, a quicklist of many nodes, integers, big elements.
    c.push(cmd(&["RPUSH", "l:small", "a", "1", "-7", "b", ""]));
    c.push(cmd(&["LPUSH", "l:small", "head"]));
    let mut big = vec!["RPUSH".to_string(), "l:big".to_string()];
    big.extend((0..1000).map(|i| format!("element-{i}")));
    c.push(big);
    c.push(cmd(&["LSET", "l:big", "500", &long]));
    c.push(cmd(&["LINSERT", "l:big", "BEFORE", "element-3", "inserted"]));
    c.push(cmd(&["LREM", "l:big", "1", "element-9"]));
    // Sets: intset (negative numbers too), hashtable, an intset grown into a hashtable.
    c.push(cmd(&["SADD", "set:ints", "5", "-3", "100", "0", "9223372036854775807"]));
    c.push(cmd(&["SADD", "set:strs", "a", "b", "c", "12", "-0"]));
    let mut many = vec!["SADD".to_string(), "set:grown".to_string()];
    many.extend((0..600).map(|i| i.to_string()));
    c.push(many);
    c.push(cmd(&["SREM", "set:grown", "17"]));
    // Sorted sets: listpack and skiplist, scores %.17g prints in every way.
    c.push(cmd(&[
        "ZADD",
        "z:small",
        "1",
        "one",
        "2.5",
        "two.5",
        "-0",
        "negzero",
        "inf",
        "top",
        "-inf",
        "bottom",
        "1e300",
        "huge",
        "0.1",
        "tenth",
        "123456789012345678",
        "long",
        "7",
        "8",
    ]));
    c.push(cmd(&["ZINCRBY", "z:small", "0.2", "tenth"]));
    let mut zbig = vec!["ZADD".to_string(), "z:big".to_string()];
    for i in 0..200 {
        zbig.push(format!("{}", i as f64 / 3.0));
        zbig.push(format!("m{i}"));
    }
    c.push(zbig);
    c.push(cmd(&["ZADD", "z:big", "-0", "negzero", "3.3e-10", "tiny"]));
    c.push(cmd(&["ZADD", "z:longmember", "1", &long]));
    // Hashes: listpack (integer fields and values too), hashtable by size and by value length.
    c.push(cmd(&["HSET", "h:small", "f", "v", "1", "2", "empty", "", "-5", "x"]));
    c.push(cmd(&["HINCRBYFLOAT", "h:small", "float", "1.5"]));
    let mut hbig = vec!["HSET".to_string(), "h:big".to_string()];
    for i in 0..600 {
        hbig.push(format!("field{i}"));
        hbig.push(format!("{i}"));
    }
    c.push(hbig);
    c.push(cmd(&["HSET", "h:longvalue", "f", &long]));
    c.push(cmd(&["HDEL", "h:big", "field7"]));
    // Streams: master fields and others, deleted entries, trimmed, empty, with groups.
    c.push(cmd(&["CONFIG", "SET", "stream-node-max-entries", "5"]));
    for i in 1..=40 {
        let id = format!("{}-{}", 1000 + i / 3, i % 3);
        if i % 4 == 0 {
            c.push(cmd(&["XADD", "x:s", &id, "other", &i.to_string(), "more", "fields"]));
        } else {
            c.push(cmd(&["XADD", "x:s", &id, "a", &i.to_string(), "b", "bee"]));
        }
    }
    c.push(cmd(&["XDEL", "x:s", "1003-1", "1005-0", "1013-1"]));
    c.push(cmd(&["XGROUP", "CREATE", "x:s", "g1", "0"]));
    c.push(cmd(&[
        "XREADGROUP",
        "GROUP",
        "g1",
        "alice",
        "COUNT",
        "3",
        "STREAMS",
        "x:s",
        ">",
    ]));
    c.push(cmd(&["XADD", "x:trimmed", "1-1", "f", "v"]));
    c.push(cmd(&["XADD", "x:trimmed", "2-1", "f", "w"]));
    c.push(cmd(&["XADD", "x:trimmed", "3-1", "g", "x", "h", "y"]));
    c.push(cmd(&["XTRIM", "x:trimmed", "MAXLEN", "1"]));
    c.push(cmd(&["XADD", "x:empty", "5-5", "f", "v"]));
    c.push(cmd(&["XTRIM", "x:empty", "MAXLEN", "0"]));
    c.push(cmd(&["CONFIG", "SET", "stream-node-max-entries", "100"]));
    // Other databases: deadlines (relative and absolute), and the same
    // key and value as in db 0.
    for db in ["3", "9"] {
        c.push(cmd(&["SELECT", db]));
        c.push(cmd(&["SET", "s:int", "12345"]));
        c.push(cmd(&["SET", "ttl:str", "v", "EX", "100000"]));
        c.push(cmd(&["RPUSH", "ttl:list", "a", "b"]));
        c.push(cmd(&["PEXPIREAT", "ttl:list", "99999999999999"]));
        c.push(cmd(&["SADD", "ttl:set", "m"]));
        c.push(cmd(&["EXPIRE", "ttl:set", "5000"]));
        c.push(cmd(&["ZADD", "ttl:zset", "1", "m"]));
        c.push(cmd(&["EXPIRE", "ttl:zset", "5000"]));
        c.push(cmd(&["HSET", "ttl:hash", "f", "v"]));
        c.push(cmd(&["EXPIRE", "ttl:hash", "5000"]));
        c.push(cmd(&["XADD", "ttl:stream", "1-1", "f", "v"]));
        c.push(cmd(&["EXPIRE", "ttl:stream", "5000"]));
        c.push(cmd(&["SET", "persisted", "v", "EX", "100"]));
        c.push(cmd(&["PERSIST", "persisted"]));
    }
    c.push(cmd(&["SELECT", "0"]));
    c
}

/// Every key the workload leaves in db 0 plus one that does not exist,
/// for DIGEST-VALUE.
const DB0_KEYS: &[&str] = &[
    "s:int",
    "s:neg",
    "s:big",
    "s:notint",
    "s:embstr",
    "s:raw",
    "s:empty",
    "s:bin",
    "s:float",
    "l:small",
    "l:big",
    "set:ints",
    "set:strs",
    "set:grown",
    "z:small",
    "z:big",
    "z:longmember",
    "h:small",
    "h:big",
    "h:longvalue",
    "x:s",
    "x:trimmed",
    "x:empty",
    "no-such-key",
];

#[test]
fn digests_match_redis_for_every_type_encoding_and_database() {
    let Some((redis, server)) = servers() else {
        return;
    };
    let (theirs, ours) = (redis.addr(), server.addr());
    assert_eq!(debug_digest(theirs).unwrap(), ZEROS);
    assert_eq!(debug_digest(ours).unwrap(), ZEROS, "an empty dataset digests to zeros");
    let all_dbs: Vec<usize> = (0..16).collect();

    run_both(theirs, ours, &every_type_and_encoding());
    let digest = assert_same_digest(theirs, ours, &all_dbs, "after the workload");
    assert_ne!(digest, ZEROS);

    // Encodings as Redis names them, so each encoding was really digested.
    let encodings = [
        ("s:int", "int"),
        ("s:raw", "raw"),
        ("l:small", "quicklist"),
        ("set:ints", "intset"),
        ("set:grown", "hashtable"),
        ("z:small", "listpack"),
        ("z:big", "skiplist"),
        ("z:longmember", "skiplist"),
        ("h:small", "listpack"),
        ("h:big", "hashtable"),
        ("h:longvalue", "hashtable"),
    ];
    let (mut ct, mut co) = (RawClient::connect(theirs).unwrap(), RawClient::connect(ours).unwrap());
    for (key, encoding) in encodings {
        let want = format!("${}\r\n{encoding}\r\n", encoding.len()).into_bytes();
        assert_eq!(ct.command(&["OBJECT", "ENCODING", key]).unwrap(), want, "Redis {key}");
        assert_eq!(co.command(&["OBJECT", "ENCODING", key]).unwrap(), want, "coordis {key}");
    }

    // DIGEST-VALUE, several keys at once (one missing), byte for byte, in
    // each database; and the argument forms.
    let mut args = vec!["DEBUG", "DIGEST-VALUE"];
    args.extend_from_slice(DB0_KEYS);
    let reply = co.command(&args).unwrap();
    assert_eq!(reply, ct.command(&args).unwrap());
    assert!(
        String::from_utf8_lossy(&reply).ends_with(&format!("+{ZEROS}\r\n")),
        "a missing key is zeros"
    );
    for db in ["3", "9"] {
        let keys = [
            "s:int",
            "ttl:str",
            "ttl:list",
            "ttl:set",
            "ttl:zset",
            "ttl:hash",
            "ttl:stream",
            "persisted",
        ];
        for c in [&mut ct, &mut co] {
            assert_eq!(c.command(&["SELECT", db]).unwrap(), b"+OK\r\n");
        }
        let mut args = vec!["DEBUG", "DIGEST-VALUE"];
        args.extend_from_slice(&keys);
        assert_eq!(co.command(&args).unwrap(), ct.command(&args).unwrap(), "db {db}");
    }
    for args in [
        &["DEBUG", "DIGEST-VALUE"][..],
        &["DEBUG", "DIGEST", "extra"],
        &["DEBUG", "digest"],
        &["DEBUG", "HELP"],
    ] {
        let (o, t) = (co.command(args).unwrap(), ct.command(args).unwrap());
        if args[1] == "HELP" {
            // coordis has a subset of DEBUG: each of its lines is Redis's.
            let theirs = String::from_utf8_lossy(&t).into_owned();
            for line in String::from_utf8_lossy(&o).lines().skip(1) {
                assert!(
                    theirs.contains(&format!("\r\n{line}\r\n")),
                    "HELP line {line:?} is not Redis's"
                );
            }
        } else {
            assert_eq!(String::from_utf8_lossy(&o), String::from_utf8_lossy(&t), "{args:?}");
        }
    }
}

/// Each kind of change moves the digest on both servers, and they stay
/// equal: an order change in a list, a score's last digit, a deadline
/// added, a stream entry deleted, a key moved to another database.
#[test]
fn every_change_moves_the_digest_the_same_way() {
    let Some((redis, server)) = servers() else {
        return;
    };
    let (theirs, ours) = (redis.addr(), server.addr());
    let dbs = [0, 1];
    run_both(theirs, ours, &every_type_and_encoding());
    let mut seen = vec![assert_same_digest(theirs, ours, &dbs, "after the workload")];
    for change in [
        cmd(&["LMOVE", "l:small", "l:small", "LEFT", "RIGHT"]),
        cmd(&["ZINCRBY", "z:small", "0.000000000000001", "one"]),
        cmd(&["ZADD", "z:big", "1", "negzero"]),
        cmd(&["EXPIRE", "h:small", "100000"]),
        cmd(&["XDEL", "x:s", "1004-0"]),
        cmd(&["SETRANGE", "s:raw", "99", "y"]),
        cmd(&["SMOVE", "set:strs", "set:ints", "a"]),
        cmd(&["HSET", "h:big", "field1", "changed"]),
        cmd(&["MOVE", "s:embstr", "1"]),
    ] {
        run_both(theirs, ours, std::slice::from_ref(&change));
        let digest = assert_same_digest(theirs, ours, &dbs, &format!("after {change:?}"));
        assert!(!seen.contains(&digest), "{change:?} did not change the digest");
        seen.push(digest);
    }
}

/// With active expiry off, a key past its deadline stays stored and is in
/// both digests (Redis walks the whole table); DIGEST-VALUE reads it
/// without expiring it.
#[test]
fn keys_past_their_deadline_are_digested_until_removed() {
    let Some((redis, server)) = servers() else {
        return;
    };
    let (theirs, ours) = (redis.addr(), server.addr());
    run_both(
        theirs,
        ours,
        &[
            cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]),
            cmd(&["SET", "live", "v"]),
            cmd(&["SET", "gone", "v", "PX", "1"]),
        ],
    );
    std::thread::sleep(Duration::from_millis(50));
    let with_gone = assert_same_digest(theirs, ours, &[0], "with an expired key stored");
    let (mut ct, mut co) = (RawClient::connect(theirs).unwrap(), RawClient::connect(ours).unwrap());
    let args = ["DEBUG", "DIGEST-VALUE", "gone"];
    let value = co.command(&args).unwrap();
    assert_eq!(value, ct.command(&args).unwrap());
    assert_ne!(value, format!("*1\r\n+{ZEROS}\r\n").into_bytes());
    run_both(theirs, ours, &[cmd(&["GET", "gone"])]);
    let without = assert_same_digest(theirs, ours, &[0], "once the read removed it");
    assert_ne!(with_gone, without);
}

/// Random writes over every type (fixed seeds), the digests compared after
/// each seed's run: float scores and increments, list order, deletions.
#[test]
fn random_workloads_digest_as_redis() {
    let Some((redis, server)) = servers() else {
        return;
    };
    let (theirs, ours) = (redis.addr(), server.addr());
    for seed in 1..=4u64 {
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut commands = vec![cmd(&["SELECT", &rng.usize(0..3).to_string()])];
        for _ in 0..400 {
            let key = format!("{}", rng.usize(0..12));
            let member = format!("m{}", rng.usize(0..150));
            let number = format!("{}", rng.i64(-1000..1000));
            let float = format!("{:.3}", rng.f64() * 10.0 - 5.0);
            let words: Vec<&str> = match rng.usize(0..14) {
                0 => vec!["SET", "s", &number],
                1 => vec!["APPEND", "s", &member],
                2 => vec!["RPUSH", "l", &member, &number],
                3 => vec!["LPOP", "l"],
                4 => vec!["SADD", "set", &number],
                5 => vec!["SADD", "set", &member],
                6 => vec!["SREM", "set", &number],
                7 => vec!["ZINCRBY", "z", &float, &member],
                8 => vec!["ZADD", "z", &number, &member],
                9 => vec!["HSET", "h", &member, &number],
                10 => vec!["HINCRBYFLOAT", "h", &member, &float],
                11 => vec!["DEL", "z"],
                12 => vec!["EXPIRE", "l", "10000"],
                _ => vec!["SELECT", if rng.bool() { "1" } else { "2" }],
            };
            // Each type keeps to its own keys (no WRONGTYPE).
            let mut words: Vec<String> = words.iter().map(|w| w.to_string()).collect();
            if words[0] != "SELECT" {
                words[1] = format!("{}:{key}", words[1]);
            }
            commands.push(words);
        }
        run_both(theirs, ours, &commands);
        assert_same_digest(theirs, ours, &[0, 1, 2], &format!("random workload seed {seed}"));
    }
}

/// The helper says where two datasets differ: a value changed on one side,
/// a key only one side has.
#[test]
fn compare_digests_names_the_keys_that_differ() {
    let Some((redis, server)) = servers() else {
        return;
    };
    let (theirs, ours) = (redis.addr(), server.addr());
    run_both(
        theirs,
        ours,
        &[cmd(&["SET", "same", "v"]), cmd(&["SET", "changed", "v"])],
    );
    assert!(compare_digests(theirs, ours, &[0]).unwrap().is_empty());
    let mut c = RawClient::connect(ours).unwrap();
    c.command(&["SET", "changed", "w"]).unwrap();
    c.command(&["SELECT", "2"]).unwrap();
    c.command(&["SET", "extra", "v"]).unwrap();
    let differences = compare_digests(theirs, ours, &[0, 2]).unwrap();
    assert!(differences[0].starts_with("DEBUG DIGEST differs"), "{differences:?}");
    assert_eq!(
        differences[1..],
        [
            "db 0 key changed: DEBUG DIGEST-VALUE differs".to_string(),
            "db 2 key extra: only in b".to_string()
        ],
        "{differences:?}"
    );
}
