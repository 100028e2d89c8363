//! MULTI/EXEC/WATCH across clients, on coordis and (when installed) on a
//! real Redis: a transaction whose watched key another client changed
//! returns a null array, and optimistic retry loops lose no update.

use std::net::SocketAddr;

use coordis::testing::{RawClient, RedisServer};

/// A WATCHed key changed by another client aborts EXEC; an unchanged one does not.
fn watch_session(addr: SocketAddr) -> Vec<Vec<u8>> {
    let mut a = RawClient::connect(addr).unwrap();
    let mut b = RawClient::connect(addr).unwrap();
    let mut out = vec![a.command(&["FLUSHALL"]).unwrap()];
    out.push(a.command(&["SET", "balance", "10"]).unwrap());
    out.push(a.command(&["WATCH", "balance"]).unwrap());
    out.push(b.command(&["INCRBY", "balance", "5"]).unwrap());
    out.push(a.command(&["MULTI"]).unwrap());
    out.push(a.command(&["DECRBY", "balance", "10"]).unwrap());
    out.push(a.command(&["EXEC"]).unwrap());
    out.push(a.command(&["GET", "balance"]).unwrap());
    out.push(a.command(&["WATCH", "balance"]).unwrap());
    out.push(b.command(&["GET", "balance"]).unwrap());
    out.push(a.command(&["MULTI"]).unwrap());
    out.push(a.command(&["DECRBY", "balance", "10"]).unwrap());
    out.push(a.command(&["EXEC"]).unwrap());
    // Another client's DEL of a key that does not exist changes nothing.
    out.push(a.command(&["WATCH", "ghost"]).unwrap());
    out.push(b.command(&["DEL", "ghost"]).unwrap());
    out.push(a.command(&["MULTI"]).unwrap());
    out.push(a.command(&["PING"]).unwrap());
    out.push(a.command(&["EXEC"]).unwrap());
    out
}

#[test]
fn watch_aborts_exec_when_another_client_writes() {
    let server = coordis::Server::builder().start_blocking().unwrap();
    let ours = watch_session(server.addr());
    assert_eq!(ours[6], b"*-1\r\n", "EXEC after a concurrent write");
    assert_eq!(ours[7], b"$2\r\n15\r\n");
    assert_eq!(ours[12], b"*1\r\n:5\r\n");
    assert_eq!(ours[17], b"*1\r\n+PONG\r\n");
    if let Some(redis) = RedisServer::start(&[]).unwrap() {
        assert_eq!(ours, watch_session(redis.addr()));
    }
}

/// A key already past its deadline at WATCH (active expiry off, so it is
/// still there): its expiry at EXEC and its deletion are no change; a key
/// live at WATCH that expires before EXEC is one; another client's write
/// that revives the stale key is one.
fn stale_watch_session(addr: SocketAddr) -> Vec<Vec<u8>> {
    let mut a = RawClient::connect(addr).unwrap();
    let mut b = RawClient::connect(addr).unwrap();
    let mut out = vec![a.command(&["FLUSHALL"]).unwrap()];
    out.push(a.command(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]).unwrap());
    let transaction = |a: &mut RawClient, out: &mut Vec<Vec<u8>>| {
        out.push(a.command(&["MULTI"]).unwrap());
        out.push(a.command(&["PING"]).unwrap());
        out.push(a.command(&["EXEC"]).unwrap());
    };
    // Stale at WATCH, untouched.
    out.push(a.command(&["SET", "x", "foo", "PX", "1"]).unwrap());
    std::thread::sleep(std::time::Duration::from_millis(5));
    out.push(a.command(&["WATCH", "x"]).unwrap());
    transaction(&mut a, &mut out);
    // Stale at WATCH, deleted by another client.
    out.push(a.command(&["SET", "x", "foo", "PX", "1"]).unwrap());
    std::thread::sleep(std::time::Duration::from_millis(5));
    out.push(a.command(&["WATCH", "x"]).unwrap());
    out.push(b.command(&["DEL", "x"]).unwrap());
    transaction(&mut a, &mut out);
    // Live at WATCH, past its deadline at EXEC.
    out.push(a.command(&["SET", "x", "foo", "PX", "50"]).unwrap());
    out.push(a.command(&["WATCH", "x"]).unwrap());
    std::thread::sleep(std::time::Duration::from_millis(80));
    transaction(&mut a, &mut out);
    // SWAPDB: a missing key replaced with a stale one is no change; a
    // missing key replaced with a live one, and a stale key replaced with
    // a live one, are.
    for (incoming_ttl, stale_here) in [("1", false), ("100000", false), ("100000", true)] {
        out.push(a.command(&["FLUSHALL"]).unwrap());
        out.push(a.command(&["SET", "y", "foo", "PX", incoming_ttl]).unwrap());
        if stale_here {
            out.push(a.command(&["SELECT", "1"]).unwrap());
            out.push(a.command(&["SET", "y", "old", "PX", "1"]).unwrap());
            out.push(a.command(&["SELECT", "0"]).unwrap());
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
        out.push(a.command(&["SELECT", "1"]).unwrap());
        out.push(a.command(&["WATCH", "y"]).unwrap());
        out.push(a.command(&["SWAPDB", "0", "1"]).unwrap());
        transaction(&mut a, &mut out);
        out.push(a.command(&["SELECT", "0"]).unwrap());
    }
    out.push(a.command(&["DEBUG", "SET-ACTIVE-EXPIRE", "1"]).unwrap());
    out
}

#[test]
fn a_key_already_expired_at_watch_changes_nothing_as_in_redis() {
    let mut builder = coordis::Server::builder();
    builder.config_mut().enable_debug_command = "yes".into();
    let server = builder.start_blocking().unwrap();
    let ours = stale_watch_session(server.addr());
    let pong = b"*1\r\n+PONG\r\n".to_vec();
    assert_eq!(ours[6], pong, "a stale key's expiry at EXEC");
    assert_eq!(ours[12], pong, "a stale key's deletion");
    assert_eq!(ours[17], b"*-1\r\n", "a live key expired before EXEC");
    assert_eq!(ours[25], pong, "a missing key swapped for a stale one");
    assert_eq!(ours[34], b"*-1\r\n", "a missing key swapped for a live one");
    assert_eq!(ours[46], b"*-1\r\n", "a stale key swapped for a live one");
    if let Some(redis) = RedisServer::start(&["--enable-debug-command", "yes"]).unwrap() {
        assert_eq!(ours, stale_watch_session(redis.addr()));
    }
}

/// The redis-py pattern: WATCH, read, MULTI, write, EXEC, retry on a null reply.
fn optimistic_increments(addr: SocketAddr, workers: usize, each: usize) -> (i64, usize) {
    let mut c = RawClient::connect(addr).unwrap();
    c.command(&["SET", "counter", "0"]).unwrap();
    let handles: Vec<_> = (0..workers)
        .map(|_| {
            std::thread::spawn(move || {
                let mut c = RawClient::connect(addr).unwrap();
                let mut retries = 0;
                for _ in 0..each {
                    loop {
                        c.command(&["WATCH", "counter"]).unwrap();
                        let value = String::from_utf8(c.command(&["GET", "counter"]).unwrap()).unwrap();
                        let n: i64 = value.split("\r\n").nth(1).unwrap().parse().unwrap();
                        c.command(&["MULTI"]).unwrap();
                        c.command(&["SET", "counter", &(n + 1).to_string()]).unwrap();
                        if c.command(&["EXEC"]).unwrap() == b"*1\r\n+OK\r\n" {
                            break;
                        }
                        retries += 1;
                    }
                }
                retries
            })
        })
        .collect();
    let retries = handles.into_iter().map(|h| h.join().unwrap()).sum();
    let total = String::from_utf8(c.command(&["GET", "counter"]).unwrap()).unwrap();
    (total.split("\r\n").nth(1).unwrap().parse().unwrap(), retries)
}

#[test]
fn optimistic_locking_retries_and_loses_nothing() {
    let server = coordis::Server::builder().start_blocking().unwrap();
    let (total, retries) = optimistic_increments(server.addr(), 6, 60);
    assert_eq!(total, 360);
    println!("coordis: 360 optimistic increments, {retries} retries after lost races");
    if let Some(redis) = RedisServer::start(&[]).unwrap() {
        let (total, retries) = optimistic_increments(redis.addr(), 6, 60);
        assert_eq!(total, 360);
        println!("redis: 360 optimistic increments, {retries} retries after lost races");
    }
}

#[test]
fn exec_is_atomic_across_keys() {
    let server = coordis::Server::builder().start_blocking().unwrap();
    let addr = server.addr();
    let mut r = RawClient::connect(addr).unwrap();
    r.command(&["MSET", "x", "0", "y", "0"]).unwrap();
    let writer = std::thread::spawn(move || {
        let mut c = RawClient::connect(addr).unwrap();
        for _ in 0..300 {
            c.command(&["MULTI"]).unwrap();
            c.command(&["INCR", "x"]).unwrap();
            c.command(&["INCR", "y"]).unwrap();
            c.command(&["EXEC"]).unwrap();
        }
    });
    while !writer.is_finished() {
        let reply = String::from_utf8(r.command(&["MGET", "x", "y"]).unwrap()).unwrap();
        let values: Vec<&str> = reply.split("\r\n").filter(|l| !l.starts_with(['*', '$'])).collect();
        assert_eq!(values[0], values[1], "{reply}");
    }
    writer.join().unwrap();
}
