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
