//! Keyspace notifications: the same commands on coordis and on a real Redis
//! must publish the same `__keyspace@0__:<key>` / `__keyevent@0__:<event>`
//! messages, in the same order; an expiring lock key announces `expired`.

use std::net::SocketAddr;
use std::time::Duration;

use coordis::testing::{RawClient, RedisServer};

/// Every message the subscriber has received, until 300 ms pass without one.
fn drain(sub: &mut RawClient) -> Vec<String> {
    let mut out = vec![];
    // RawClient has a 10 s read timeout; shorten it by reading on a clone.
    loop {
        match read_with_timeout(sub, Duration::from_millis(300)) {
            Some(frame) => out.push(String::from_utf8_lossy(&frame).replace("\r\n", " ")),
            None => return out,
        }
    }
}

fn read_with_timeout(sub: &mut RawClient, timeout: Duration) -> Option<Vec<u8>> {
    sub.set_read_timeout(Some(timeout)).unwrap();
    let r = sub.read_reply().ok();
    sub.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    r
}

/// A flushed server with `notify-keyspace-events` set to `flags`, an admin
/// connection, and a subscriber to every keyspace and keyevent channel.
fn listening(addr: SocketAddr, flags: &str) -> (RawClient, RawClient) {
    let mut admin = RawClient::connect(addr).unwrap();
    admin.command(&["FLUSHALL"]).unwrap();
    admin
        .command(&["CONFIG", "SET", "notify-keyspace-events", flags])
        .unwrap();
    let mut sub = RawClient::connect(addr).unwrap();
    sub.command(&["PSUBSCRIBE", "__key*__:*"]).unwrap();
    (admin, sub)
}

fn session(addr: SocketAddr) -> Vec<String> {
    let (mut admin, mut sub) = listening(addr, "KEA");
    let commands: &[&[&str]] = &[
        &["SET", "lock:a", "pod-1", "NX", "PX", "30000"],
        &["SET", "lock:a", "pod-2", "NX", "PX", "30000"],
        &["PEXPIRE", "lock:a", "60000"],
        &["PERSIST", "lock:a"],
        &["INCR", "fence"],
        &["INCRBYFLOAT", "f", "1.5"],
        &["APPEND", "s", "x"],
        &["SETRANGE", "s", "3", "y"],
        &["MSET", "m1", "1", "m2", "2"],
        &["GETSET", "m1", "3"],
        &["GETDEL", "m2"],
        &["GETEX", "m1", "EX", "100"],
        &["RENAME", "m1", "m3"],
        &["COPY", "m3", "m4"],
        &["DEL", "m3", "m4", "nokey"],
        &["ZADD", "sem", "1", "a", "2", "b"],
        &["ZADD", "sem", "INCR", "5", "a"],
        &["ZINCRBY", "sem", "1", "b"],
        &["ZREM", "sem", "a"],
        &["ZPOPMIN", "sem"],
        &["ZADD", "z", "1", "a", "2", "b", "3", "c"],
        &["ZREMRANGEBYSCORE", "z", "0", "1"],
        &["ZREMRANGEBYRANK", "z", "0", "0"],
        &["ZUNIONSTORE", "u", "1", "z"],
        &["ZRANGESTORE", "r", "z", "0", "-1"],
        &["ZINTERSTORE", "u", "2", "z", "nokey"],
        &["EXPIRE", "r", "-1"],
        &["SET", "mv", "1"],
        &["MOVE", "mv", "1"],
        &["HSET", "h", "f", "1", "g", "2"],
        &["HSETNX", "h", "f", "x"],
        &["HSETNX", "h", "n", "x"],
        &["HINCRBY", "h", "f", "2"],
        &["HINCRBYFLOAT", "h", "g", "0.5"],
        &["HDEL", "h", "f", "g", "n"],
        &["RPUSH", "l", "a", "b", "c", "d"],
        &["LPUSH", "l", "z"],
        &["LSET", "l", "0", "y"],
        &["LINSERT", "l", "AFTER", "y", "x"],
        &["LREM", "l", "1", "x"],
        &["LTRIM", "l", "0", "2"],
        &["LPOP", "l"],
        &["RPOP", "l", "2"],
        &["RPUSH", "q", "1", "2"],
        &["LMOVE", "q", "q2", "LEFT", "RIGHT"],
        &["RPOPLPUSH", "q", "q2"],
        &["LMPOP", "1", "q2", "LEFT", "COUNT", "5"],
        &["SADD", "s1", "1", "2", "3"],
        &["SREM", "s1", "1"],
        &["SMOVE", "s1", "s2", "2"],
        &["SPOP", "s1"],
        &["SADD", "s3", "7"],
        &["SINTERSTORE", "s4", "s2", "s3"],
        &["SUNIONSTORE", "s4", "s2", "s3"],
        &["SDIFFSTORE", "s5", "s2", "s3"],
        &[
            "EVAL",
            "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0",
            "1",
            "s",
            "xy",
        ],
        &["SET", "lease", "pod", "PX", "50"],
    ];
    for cmd in commands {
        admin.command(cmd).unwrap();
    }
    std::thread::sleep(Duration::from_millis(150));
    admin.command(&["GET", "lease"]).unwrap();
    let messages = drain(&mut sub);
    admin.command(&["CONFIG", "SET", "notify-keyspace-events", ""]).unwrap();
    messages
}

#[test]
fn notifications_match_redis() {
    let server = coordis::Server::builder().start_blocking().unwrap();
    let ours = session(server.addr());
    let expired = ours
        .iter()
        .filter(|m| m.contains("__keyevent@0__:expired") && m.contains("lease"))
        .count();
    assert_eq!(expired, 1, "{ours:#?}");
    assert!(
        ours.iter().any(|m| m.contains("__keyspace@0__:lock:a $3 set")),
        "{ours:#?}"
    );
    if let Some(redis) = RedisServer::start(&[]).unwrap() {
        let theirs = session(redis.addr());
        assert_eq!(ours, theirs);
    }
}

/// The `n` class: `new` when a command creates a key (before the command's
/// own event), never when it overwrites one.
fn new_key_session(addr: SocketAddr) -> Vec<String> {
    let (mut admin, mut sub) = listening(addr, "KEAn");
    let commands: &[&[&str]] = &[
        &["SET", "a", "1"],
        &["SET", "a", "2"],
        &["INCR", "counter"],
        &["APPEND", "s", "x"],
        &["HSET", "h", "f", "v"],
        &["HSET", "h", "g", "v"],
        &["LPUSH", "l", "x"],
        &["SADD", "set", "1"],
        &["ZADD", "z", "1", "m"],
        &["COPY", "a", "a2"],
        &["RENAME", "a2", "a3"],
        &["MOVE", "a3", "1"],
        &["SORT", "l", "ALPHA", "STORE", "sorted"],
        &["SETBIT", "bits", "3", "1"],
        &["BITOP", "OR", "bits2", "bits"],
        &["LMOVE", "l", "l2", "LEFT", "LEFT"],
        &["SUNIONSTORE", "set2", "set"],
        &["ZUNIONSTORE", "z2", "1", "z"],
        &["SMOVE", "set", "set3", "1"],
    ];
    for cmd in commands {
        admin.command(cmd).unwrap();
    }
    let messages = drain(&mut sub);
    admin.command(&["CONFIG", "SET", "notify-keyspace-events", ""]).unwrap();
    messages
}

#[test]
fn new_key_notifications_match_redis() {
    let server = coordis::Server::builder().start_blocking().unwrap();
    let ours = new_key_session(server.addr());
    assert!(ours.iter().any(|m| m.contains("__keyevent@0__:new $1 h")), "{ours:#?}");
    if let Some(redis) = RedisServer::start(&[]).unwrap() {
        let theirs = new_key_session(redis.addr());
        assert_eq!(ours, theirs);
    }
}

/// A RESP3 client subscribed to every key's events in database 0, and an
/// admin connection, on a flushed server announcing every event.
fn own_events_client(addr: SocketAddr) -> (RawClient, RawClient) {
    let mut admin = RawClient::connect(addr).unwrap();
    admin.command(&["FLUSHALL"]).unwrap();
    admin
        .command(&["CONFIG", "SET", "notify-keyspace-events", "KEA"])
        .unwrap();
    let mut client = RawClient::connect(addr).unwrap();
    client.command(&["HELLO", "3"]).unwrap();
    client.command(&["PSUBSCRIBE", "__keyspace@0__:*"]).unwrap();
    (admin, client)
}

/// Sends one command without reading its reply.
fn send(client: &mut RawClient, cmd: &[&str]) {
    let args: Vec<&[u8]> = cmd.iter().map(|a| a.as_bytes()).collect();
    client.send(&RawClient::encode(&args)).unwrap();
}

/// Every byte `client` receives until the reply to an ECHO sent now: what
/// the command before left on the connection, its reply and its events
/// in the order they came (the ECHO's reply follows them on one
/// connection, so no timeout decides where they end).
fn until_echo(client: &mut RawClient, n: usize) -> String {
    let marker = format!("end-{n}");
    client.send(&RawClient::encode(&[b"ECHO", marker.as_bytes()])).unwrap();
    let echoed = format!("${}\r\n{marker}\r\n", marker.len());
    let mut got = Vec::new();
    loop {
        let frame = client.read_reply().unwrap();
        if frame == echoed.as_bytes() {
            return String::from_utf8_lossy(&got).into_owned();
        }
        got.extend_from_slice(&frame);
    }
}

/// Commands run by the subscriber itself, each with the bytes it got: its
/// reply and its own keys' events, before, amid or after the reply where
/// the server wrote them. `setup` commands run on the admin connection
/// first (their events are read and left out).
fn own_events_session(addr: SocketAddr) -> Vec<(String, String)> {
    let (mut admin, mut client) = own_events_client(addr);
    let cases: &[(&[&[&str]], &[&str])] = &[
        (&[], &["SET", "s", "v"]),
        (&[], &["SET", "s", "w", "EX", "100", "GET"]),
        (&[], &["GETSET", "s", "x"]),
        (&[], &["GETEX", "s", "PERSIST"]),
        (&[], &["EXPIRE", "s", "100"]),
        (&[], &["GETDEL", "s"]),
        (&[], &["INCR", "n"]),
        (&[], &["RPUSH", "l", "a", "b", "c"]),
        (&[], &["LPUSHX", "l", "z"]),
        (&[], &["LSET", "l", "0", "y"]),
        (&[], &["LPOP", "l"]),
        (&[], &["LMOVE", "l", "l2", "LEFT", "RIGHT"]),
        (&[], &["RPOP", "l", "5"]),
        (&[], &["HSET", "h", "f", "v"]),
        (&[], &["HINCRBY", "h", "n", "2"]),
        (&[], &["HDEL", "h", "f", "n"]),
        (&[], &["SADD", "st", "1", "2"]),
        (&[], &["SUNIONSTORE", "st2", "st"]),
        (&[], &["SINTERSTORE", "st2", "nosuch"]),
        (&[], &["SPOP", "st", "5"]),
        (&[], &["ZADD", "z", "1", "a", "2", "b", "3", "c"]),
        (&[], &["ZINCRBY", "z", "1", "a"]),
        (&[], &["ZPOPMIN", "z"]),
        (&[], &["ZMPOP", "1", "z", "MAX", "COUNT", "5"]),
        (&[], &["ZADD", "z", "1", "a"]),
        (&[], &["BZPOPMAX", "z", "0"]),
        (&[], &["GEOADD", "g", "13.361389", "38.115556", "Palermo"]),
        (&[], &["XADD", "x", "1-1", "f", "v"]),
        (
            &[&["XGROUP", "CREATE", "x", "g", "0"]],
            &["XREADGROUP", "GROUP", "g", "c", "STREAMS", "x", ">"],
        ),
        (&[], &["XGROUP", "SETID", "x", "g", "0"]),
        (&[], &["BITFIELD", "b", "SET", "u8", "0", "1"]),
        (&[], &["DEL", "x", "b", "g", "nosuch"]),
        (
            &[],
            &[
                "EVAL",
                "redis.call('rpush', 'k4', 'a'); return redis.call('lpop', 'k4')",
                "1",
                "k4",
            ],
        ),
    ];
    // A transaction: sent in one go (an ECHO inside MULTI would be queued).
    let transaction: &[&[&str]] = &[
        &["MULTI"],
        &["SET", "k", "v"],
        &["RPUSH", "k2", "v"],
        &["ZADD", "k3", "1", "a"],
        &["ZPOPMIN", "k3"],
        &["EXEC"],
    ];
    let mut got = vec![];
    until_echo(&mut client, got.len());
    for cmd in transaction {
        send(&mut client, cmd);
    }
    got.push(("MULTI ... EXEC".to_string(), until_echo(&mut client, got.len())));
    for (setup, cmd) in cases {
        for s in *setup {
            admin.command(s).unwrap();
        }
        until_echo(&mut client, got.len());
        send(&mut client, cmd);
        got.push((cmd.join(" "), until_echo(&mut client, got.len())));
    }
    // Blocked, then served by the admin's push: the pusher's event comes
    // first, then the served reply with its own events.
    let blocked: &[(&[&str], &[&str])] = &[
        (&["BLPOP", "bl", "0"], &["RPUSH", "bl", "x"]),
        (&["BLMOVE", "bl", "bl2", "LEFT", "RIGHT", "0"], &["RPUSH", "bl", "x"]),
        (&["BZPOPMIN", "bz", "0"], &["ZADD", "bz", "1", "x"]),
        (&["BZMPOP", "0", "1", "bz", "MAX"], &["ZADD", "bz", "1", "x"]),
    ];
    for (block, push) in blocked {
        until_echo(&mut client, got.len());
        send(&mut client, block);
        // Pushed once the server has it blocked.
        let blocked_at = std::time::Instant::now();
        while admin.info_field("clients", "blocked_clients") != "1" {
            assert!(
                blocked_at.elapsed() < Duration::from_secs(30),
                "{block:?} never blocked"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        admin.command(push).unwrap();
        got.push((
            format!("served {}", block.join(" ")),
            until_echo(&mut client, got.len()),
        ));
    }
    admin.command(&["CONFIG", "SET", "notify-keyspace-events", ""]).unwrap();
    got
}

/// The event a subscriber's own command causes is written where Redis
/// writes it: SET announces before its `+OK`, RPUSH and HSET after their
/// reply, ZPOPMIN after its reply's header, a served BLPOP after its reply;
/// byte for byte the same on coordis and Redis 7.0.15 over one connection.
#[test]
fn own_events_come_where_redis_writes_them() {
    let server = coordis::Server::builder().start_blocking().unwrap();
    let ours = own_events_session(server.addr());
    let of = |name: &str| &ours.iter().find(|(c, _)| c == name).unwrap().1;
    let event = |key: &str, ev: &str| {
        format!(
            ">4\r\n$8\r\npmessage\r\n$16\r\n__keyspace@0__:*\r\n${}\r\n__keyspace@0__:{key}\r\n${}\r\n{ev}\r\n",
            15 + key.len(),
            ev.len()
        )
    };
    assert_eq!(of("SET s v"), &format!("{}+OK\r\n", event("s", "set")));
    assert_eq!(of("RPUSH l a b c"), &format!(":3\r\n{}", event("l", "rpush")));
    assert_eq!(of("HSET h f v"), &format!(":1\r\n{}", event("h", "hset")));
    assert_eq!(
        of("ZPOPMIN z"),
        &format!("*2\r\n{}$1\r\na\r\n,2\r\n", event("z", "zpopmin"))
    );
    assert_eq!(
        of("served BLPOP bl 0"),
        &format!(
            "{}*2\r\n$2\r\nbl\r\n$1\r\nx\r\n{}{}",
            event("bl", "rpush"),
            event("bl", "lpop"),
            event("bl", "del")
        )
    );
    if let Some(redis) = RedisServer::start(&[]).unwrap() {
        let theirs = own_events_session(redis.addr());
        for ((command, ours), (_, theirs)) in ours.iter().zip(&theirs) {
            assert_eq!(ours, theirs, "{command}");
        }
        assert_eq!(ours.len(), theirs.len());
    }
}
