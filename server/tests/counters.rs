//! Counters (INCR and friends), which coordis rewrites in place when the
//! number keeps its digits: the same replies, deadlines and WATCH behaviour
//! as Redis 7.0.15, checked side by side; and the keyspace hit/miss
//! statistics (INFO stats) after each of a list of reads and writes.

use coordis::testing::{RawClient, RedisServer};

/// Runs the same session on a server; returns every reply and the keyspace
/// hit/miss counters from INFO at the end.
fn session(addr: std::net::SocketAddr) -> (Vec<String>, String) {
    let mut c = RawClient::connect(addr).unwrap();
    let mut other = RawClient::connect(addr).unwrap();
    let mut replies = Vec::new();
    let mut run = |c: &mut RawClient, args: &[&str]| {
        let reply = String::from_utf8_lossy(&c.command(args).unwrap()).into_owned();
        replies.push(format!("{args:?} -> {reply:?}"));
    };
    run(&mut c, &["FLUSHALL"]);
    // In place (same digits), across a digit boundary, negative, with a deadline.
    run(&mut c, &["SET", "n", "7", "EX", "100"]);
    for _ in 0..4 {
        run(&mut c, &["INCR", "n"]);
    }
    run(&mut c, &["TTL", "n"]);
    run(&mut c, &["DECRBY", "n", "25"]);
    run(&mut c, &["INCRBY", "n", "-1"]);
    run(&mut c, &["GET", "n"]);
    run(&mut c, &["TTL", "n"]);
    run(&mut c, &["INCR", "fresh"]);
    run(&mut c, &["SET", "big", "9223372036854775806"]);
    run(&mut c, &["INCR", "big"]);
    run(&mut c, &["INCR", "big"]);
    run(&mut c, &["SET", "text", "abc"]);
    run(&mut c, &["INCR", "text"]);
    run(&mut c, &["SET", "spaced", " 1"]);
    run(&mut c, &["INCR", "spaced"]);
    run(&mut c, &["ZADD", "z", "1", "m"]);
    run(&mut c, &["INCR", "z"]);
    // A counter changed in place still breaks another client's WATCH.
    run(&mut c, &["SET", "w", "10"]);
    run(&mut c, &["WATCH", "w"]);
    run(&mut other, &["INCR", "w"]);
    run(&mut c, &["MULTI"]);
    run(&mut c, &["GET", "w"]);
    run(&mut c, &["EXEC"]);
    // Reads count a keyspace hit (the key exists, of any type) or miss, as
    // Redis's lookupKeyRead does; commands that change a key count nothing.
    // The counters are read after every command.
    run(&mut c, &["CONFIG", "RESETSTAT"]);
    let commands: &[&[&str]] = &[
        &["INCR", "n"],
        &["INCR", "absent"],
        &["APPEND", "s", "x"],
        &["SETRANGE", "s", "3", "y"],
        &["INCRBYFLOAT", "f", "1.5"],
        &["SETNX", "n", "1"],
        &["GET", "n"],
        &["GET", "z"],
        &["STRLEN", "s"],
        &["GETRANGE", "nothing", "0", "1"],
        &["MGET", "s", "nothing", "z", "n"],
        &["SET", "n", "5", "GET"],
        &["GETEX", "n"],
        &["EXISTS", "n", "nothing", "z"],
        &["TOUCH", "n", "nothing"],
        &["TYPE", "z"],
        &["TYPE", "nothing"],
        &["TTL", "n"],
        &["PTTL", "nothing"],
        &["EXPIRETIME", "n"],
        &["PERSIST", "n"],
        &["EXPIRE", "n", "100"],
        &["COPY", "n", "n2"],
        &["COPY", "nothing", "n3"],
        &["RENAME", "n2", "n4"],
        &["DEL", "n4", "nothing"],
        &["ZADD", "z", "2", "m2"],
        &["ZINCRBY", "z", "1", "m"],
        &["ZSCORE", "z", "m"],
        &["ZMSCORE", "nothing", "m"],
        &["ZCARD", "z"],
        &["ZRANK", "z", "m"],
        &["ZCOUNT", "z", "-inf", "+inf"],
        &["ZRANGE", "z", "0", "-1"],
        &["ZRANGESTORE", "dst", "z", "0", "-1"],
        &["ZRANDMEMBER", "nothing"],
        &["ZUNION", "2", "z", "nothing"],
        &["ZINTERSTORE", "dst2", "2", "z", "dst"],
        &["ZREM", "dst", "m"],
        &["ZPOPMIN", "dst2"],
        &["ZREMRANGEBYRANK", "dst", "0", "0"],
        &["GETDEL", "s"],
    ];
    let mut counters = Vec::new();
    for args in commands {
        run(&mut c, args);
        let info = String::from_utf8_lossy(&c.command(&["INFO", "stats"]).unwrap()).into_owned();
        let line = info
            .lines()
            .filter(|l| l.starts_with("keyspace_hits:") || l.starts_with("keyspace_misses:"))
            .collect::<Vec<_>>()
            .join(" ");
        counters.push(format!("{args:?}: {line}"));
    }
    (replies, counters.join("\n"))
}

#[test]
fn counters_and_keyspace_statistics_match_redis() {
    let server = coordis::Server::builder().start_blocking().unwrap();
    let (ours, our_counters) = session(server.addr());
    assert!(ours.iter().any(|r| r.contains("[\"EXEC\"] -> \"*-1")), "{ours:#?}");
    assert!(our_counters.contains("keyspace_hits:"), "{our_counters}");
    if let Some(redis) = RedisServer::start(&[]).unwrap() {
        let (theirs, their_counters) = session(redis.addr());
        assert_eq!(ours, theirs);
        assert_eq!(our_counters, their_counters);
    }
}
