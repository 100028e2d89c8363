//! Counters (INCR and friends), which coordis rewrites in place when the
//! number keeps its digits: the same replies, deadlines, WATCH behaviour and
//! keyspace hit/miss statistics as Redis 7.0.15, checked side by side.

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
    // Commands that change a string do not count keyspace hits or misses
    // (Redis's lookupKeyWrite); GET, STRLEN and GETRANGE do.
    run(&mut c, &["CONFIG", "RESETSTAT"]);
    run(&mut c, &["INCR", "n"]);
    run(&mut c, &["INCR", "absent"]);
    run(&mut c, &["APPEND", "s", "x"]);
    run(&mut c, &["SETRANGE", "s", "3", "y"]);
    run(&mut c, &["INCRBYFLOAT", "f", "1.5"]);
    run(&mut c, &["GET", "n"]);
    run(&mut c, &["STRLEN", "s"]);
    run(&mut c, &["GETRANGE", "nothing", "0", "1"]);
    let info = String::from_utf8_lossy(&c.command(&["INFO", "stats"]).unwrap()).into_owned();
    let counters = info
        .lines()
        .filter(|l| l.starts_with("keyspace_hits:") || l.starts_with("keyspace_misses:"))
        .collect::<Vec<_>>()
        .join(" ");
    (replies, counters)
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
