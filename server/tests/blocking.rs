//! Blocked clients where the answer is coordis's own to pin (the replies
//! themselves are compared with Redis in `scenarios/blocking.txt`): what a
//! blocked client leaves behind when it goes, the server clock driving
//! timeouts, and what CLIENT LIST and INFO show.

use std::sync::Arc;
use std::time::{Duration, Instant};

use coordis::testing::RawClient;
use coordis::ManualClock;

fn client_id(c: &mut RawClient) -> String {
    let reply = c.command(&["CLIENT", "ID"]).unwrap();
    String::from_utf8_lossy(&reply[1..reply.len() - 2]).into_owned()
}

/// The `name:value` field of an INFO reply.
fn info_field(c: &mut RawClient, field: &str) -> String {
    let info = String::from_utf8(c.command(&["INFO", "clients"]).unwrap()).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("no {field} in {info}"))
        .to_string()
}

/// Polls INFO until `field` shows `value` (a blocked client's command
/// reaches the server a moment after it was sent).
fn wait_for_info(c: &mut RawClient, field: &str, value: &str) {
    let start = Instant::now();
    while info_field(c, field) != value {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "{field} stayed {} (wanted {value})",
            info_field(c, field)
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_blocked_client_that_leaves_gives_up_its_place() {
    let server = coordis::Server::builder().start_blocking().unwrap();
    let mut admin = RawClient::connect(server.addr()).unwrap();
    let mut first = RawClient::connect(server.addr()).unwrap();
    first.send(&RawClient::encode(&[b"BLPOP", b"k", b"0"])).unwrap();
    wait_for_info(&mut admin, "blocked_clients", "1");
    drop(first);
    wait_for_info(&mut admin, "blocked_clients", "0");
    let mut second = RawClient::connect(server.addr()).unwrap();
    second.send(&RawClient::encode(&[b"BLPOP", b"k", b"0"])).unwrap();
    wait_for_info(&mut admin, "blocked_clients", "1");
    assert_eq!(admin.command(&["RPUSH", "k", "x"]).unwrap(), b":1\r\n");
    assert_eq!(second.read_reply().unwrap(), b"*2\r\n$1\r\nk\r\n$1\r\nx\r\n");
    assert_eq!(admin.command(&["LLEN", "k"]).unwrap(), b":0\r\n");
}

#[test]
fn a_killed_blocked_client_is_closed_and_serves_nothing() {
    let server = coordis::Server::builder().start_blocking().unwrap();
    let mut admin = RawClient::connect(server.addr()).unwrap();
    let mut victim = RawClient::connect(server.addr()).unwrap();
    let id = client_id(&mut victim);
    victim.send(&RawClient::encode(&[b"BZPOPMIN", b"z", b"0"])).unwrap();
    wait_for_info(&mut admin, "blocked_clients", "1");
    let list = String::from_utf8(admin.command(&["CLIENT", "LIST"]).unwrap()).unwrap();
    let line = list.lines().find(|l| l.starts_with(&format!("id={id} "))).unwrap();
    assert!(line.contains(" flags=b ") && line.contains(" cmd=bzpopmin "), "{line}");
    assert_eq!(admin.command(&["CLIENT", "KILL", "ID", &id]).unwrap(), b":1\r\n");
    assert!(victim.read_reply().is_err(), "the killed client's connection is closed");
    wait_for_info(&mut admin, "blocked_clients", "0");
    assert_eq!(admin.command(&["ZADD", "z", "1", "m"]).unwrap(), b":1\r\n");
    assert_eq!(admin.command(&["ZCARD", "z"]).unwrap(), b":1\r\n");
}

#[test]
fn timeouts_follow_the_server_clock() {
    let clock = Arc::new(ManualClock::at_ms(1_700_000_000_000));
    let server = coordis::Server::builder()
        .clock(clock.clone())
        .start_blocking()
        .unwrap();
    let mut admin = RawClient::connect(server.addr()).unwrap();
    let mut waiter = RawClient::connect(server.addr()).unwrap();
    let mut forever = RawClient::connect(server.addr()).unwrap();
    waiter.send(&RawClient::encode(&[b"BLPOP", b"k", b"10"])).unwrap();
    forever.send(&RawClient::encode(&[b"BLPOP", b"k", b"0"])).unwrap();
    wait_for_info(&mut admin, "blocked_clients", "2");
    assert_eq!(info_field(&mut admin, "clients_in_timeout_table"), "1");
    // Real time passes; the server clock does not: nobody times out.
    waiter.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
    assert!(waiter.read_reply().is_err(), "timed out before its deadline");
    clock.advance_ms(9_999);
    assert!(waiter.read_reply().is_err(), "timed out before its deadline");
    // Past the deadline on the server clock: answered without a real wait.
    let moved = Instant::now();
    clock.advance_ms(2);
    waiter.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    assert_eq!(waiter.read_reply().unwrap(), b"*-1\r\n");
    assert!(moved.elapsed() < Duration::from_secs(5));
    wait_for_info(&mut admin, "blocked_clients", "1");
    assert_eq!(info_field(&mut admin, "clients_in_timeout_table"), "0");
    // The waiter goes on; the one without a timeout still waits and is served.
    assert_eq!(waiter.command(&["RPUSH", "k", "v"]).unwrap(), b":1\r\n");
    assert_eq!(forever.read_reply().unwrap(), b"*2\r\n$1\r\nk\r\n$1\r\nv\r\n");
}

#[test]
fn shutdown_closes_blocked_clients() {
    let server = coordis::Server::builder().start_blocking().unwrap();
    let mut admin = RawClient::connect(server.addr()).unwrap();
    let mut waiter = RawClient::connect(server.addr()).unwrap();
    waiter.send(&RawClient::encode(&[b"BRPOP", b"k", b"0"])).unwrap();
    wait_for_info(&mut admin, "blocked_clients", "1");
    let started = Instant::now();
    server.shutdown();
    assert!(waiter.read_reply().is_err(), "closed at shutdown");
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
}

#[test]
fn a_push_serves_many_waiters_in_arrival_order_without_losing_one() {
    let server = coordis::Server::builder().start_blocking().unwrap();
    let mut admin = RawClient::connect(server.addr()).unwrap();
    let mut waiters: Vec<RawClient> = (0..20).map(|_| RawClient::connect(server.addr()).unwrap()).collect();
    for (i, w) in waiters.iter_mut().enumerate() {
        w.send(&RawClient::encode(&[b"BLPOP", b"q", b"0"])).unwrap();
        wait_for_info(&mut admin, "blocked_clients", &(i + 1).to_string());
    }
    let values: Vec<String> = (0..25).map(|i| format!("v{i}")).collect();
    let mut push: Vec<&str> = vec!["RPUSH", "q"];
    push.extend(values.iter().map(String::as_str));
    assert_eq!(admin.command(&push).unwrap(), b":25\r\n");
    for (i, w) in waiters.iter_mut().enumerate() {
        let want = format!("*2\r\n$1\r\nq\r\n${}\r\nv{i}\r\n", format!("v{i}").len());
        assert_eq!(String::from_utf8(w.read_reply().unwrap()).unwrap(), want);
    }
    assert_eq!(admin.command(&["LLEN", "q"]).unwrap(), b":5\r\n");
    assert_eq!(info_field(&mut admin, "blocked_clients"), "0");
}

/// A key that a transaction pushes to and that expires while it runs (a
/// DEBUG SLEEP in it) serves no blocked client at the transaction's end:
/// the waiters are served against the clock then, as Redis updates its
/// cached time to serve them; the waiter stays blocked until unblocked.
#[test]
fn a_key_expired_during_the_transaction_that_readied_it_serves_nobody() {
    let session = |addr| -> Vec<String> {
        let mut a = RawClient::connect(addr).unwrap();
        let mut b = RawClient::connect(addr).unwrap();
        let text = |reply: Vec<u8>| String::from_utf8_lossy(&reply).into_owned();
        let mut out = vec![text(a.command(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]).unwrap())];
        let id = client_id(&mut b);
        b.send(&RawClient::encode(&[b"BRPOP", b"k", b"0"])).unwrap();
        wait_for_info(&mut a, "blocked_clients", "1");
        for args in [
            &["MULTI"][..],
            &["RPUSH", "k", "hello"],
            &["PEXPIRE", "k", "100"],
            &["DEBUG", "SLEEP", "0.2"],
            &["EXEC"],
        ] {
            out.push(text(a.command(args).unwrap()));
        }
        let list = text(a.command(&["CLIENT", "LIST", "ID", &id]).unwrap());
        out.push(format!("blocked: {}", list.contains(" flags=b ")));
        out.push(text(a.command(&["EXISTS", "k"]).unwrap()));
        out.push(text(a.command(&["CLIENT", "UNBLOCK", &id]).unwrap()));
        out.push(text(b.read_reply().unwrap()));
        out.push(text(a.command(&["DEBUG", "SET-ACTIVE-EXPIRE", "1"]).unwrap()));
        out
    };
    let mut builder = coordis::Server::builder();
    builder.config_mut().enable_debug_command = "yes".into();
    let server = builder.start_blocking().unwrap();
    let ours = session(server.addr());
    assert_eq!(ours[6], "blocked: true", "{ours:?}");
    assert_eq!(ours[9], "*-1\r\n", "{ours:?}");
    if let Some(redis) = coordis::testing::RedisServer::start(&["--enable-debug-command", "yes"]).unwrap() {
        assert_eq!(ours, session(redis.addr()));
    }
}
