//! Streams on the server clock: automatic IDs, delivery and idle times and
//! XREAD BLOCK timeouts all follow the embedded server's test clock, so a
//! test moves time instead of sleeping. (Replies are compared with Redis in
//! `scenarios/stream.txt` and the random stream differential.)

use std::time::Duration;

use coordis::testing::RawClient;

const T0: u64 = 1_700_000_000_000;

fn frozen_server() -> (coordis::BlockingServer, coordis::ServerClock, RawClient) {
    let server = coordis::Server::builder().start_blocking().unwrap();
    let clock = server.clock().unwrap();
    clock.freeze();
    clock.set_ms(T0);
    let c = RawClient::connect(server.addr()).unwrap();
    (server, clock, c)
}

fn bulk(s: &str) -> Vec<u8> {
    format!("${}\r\n{s}\r\n", s.len()).into_bytes()
}

#[test]
fn automatic_ids_come_from_the_server_clock_and_never_go_back() {
    let (_server, clock, mut c) = frozen_server();
    assert_eq!(
        c.command(&["XADD", "s", "*", "f", "v"]).unwrap(),
        bulk(&format!("{T0}-0"))
    );
    assert_eq!(
        c.command(&["XADD", "s", "*", "f", "v"]).unwrap(),
        bulk(&format!("{T0}-1"))
    );
    clock.advance(Duration::from_millis(5));
    assert_eq!(
        c.command(&["XADD", "s", "*", "f", "v"]).unwrap(),
        bulk(&format!("{}-0", T0 + 5))
    );
    // A wall clock stepping back: IDs stay above the last one.
    clock.jump_ms(-60_000);
    assert_eq!(
        c.command(&["XADD", "s", "*", "f", "v"]).unwrap(),
        bulk(&format!("{}-1", T0 + 5))
    );
    assert_eq!(
        c.command(&["XADD", "s", &format!("{}-*", T0 + 5), "f", "v"]).unwrap(),
        bulk(&format!("{}-2", T0 + 5))
    );
}

#[test]
fn idle_times_and_takeover_follow_the_clock() {
    let (_server, clock, mut c) = frozen_server();
    c.command(&["XADD", "jobs", "1-1", "job", "a"]).unwrap();
    c.command(&["XGROUP", "CREATE", "jobs", "g", "0"]).unwrap();
    c.command(&["XREADGROUP", "GROUP", "g", "crashed", "STREAMS", "jobs", ">"])
        .unwrap();
    clock.advance(Duration::from_millis(29_999));
    let pending = c.command(&["XPENDING", "jobs", "g", "-", "+", "10"]).unwrap();
    assert_eq!(pending, b"*1\r\n*4\r\n$3\r\n1-1\r\n$7\r\ncrashed\r\n:29999\r\n:1\r\n");
    let none = c
        .command(&["XAUTOCLAIM", "jobs", "g", "rescuer", "30000", "0", "JUSTID"])
        .unwrap();
    assert_eq!(none, b"*3\r\n$3\r\n0-0\r\n*0\r\n*0\r\n");
    clock.advance(Duration::from_millis(1));
    let claimed = c
        .command(&["XAUTOCLAIM", "jobs", "g", "rescuer", "30000", "0"])
        .unwrap();
    assert_eq!(
        claimed,
        b"*3\r\n$3\r\n0-0\r\n*1\r\n*2\r\n$3\r\n1-1\r\n*2\r\n$3\r\njob\r\n$1\r\na\r\n*0\r\n"
    );
    let pending = c.command(&["XPENDING", "jobs", "g", "-", "+", "10"]).unwrap();
    assert_eq!(pending, b"*1\r\n*4\r\n$3\r\n1-1\r\n$7\r\nrescuer\r\n:0\r\n:2\r\n");
    clock.advance(Duration::from_millis(250));
    let consumers = c.command(&["XINFO", "CONSUMERS", "jobs", "g"]).unwrap();
    let text = String::from_utf8(consumers).unwrap();
    assert!(
        text.contains("$7\r\ncrashed\r\n$7\r\npending\r\n:0\r\n$4\r\nidle\r\n:30250\r\n"),
        "{text}"
    );
    assert!(
        text.contains("$7\r\nrescuer\r\n$7\r\npending\r\n:1\r\n$4\r\nidle\r\n:250\r\n"),
        "{text}"
    );
}

#[test]
fn a_blocked_xread_times_out_when_the_clock_passes_its_deadline() {
    let (server, clock, mut c) = frozen_server();
    let mut reader = RawClient::connect(server.addr()).unwrap();
    let mut group_reader = RawClient::connect(server.addr()).unwrap();
    c.command(&["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]).unwrap();
    reader
        .send(&RawClient::encode(&[
            b"XREAD", b"BLOCK", b"5000", b"STREAMS", b"s", b"$",
        ]))
        .unwrap();
    group_reader
        .send(&RawClient::encode(&[
            b"XREADGROUP",
            b"GROUP",
            b"g",
            b"c",
            b"BLOCK",
            b"60000",
            b"STREAMS",
            b"s",
            b">",
        ]))
        .unwrap();
    while !String::from_utf8(c.command(&["INFO", "clients"]).unwrap())
        .unwrap()
        .contains("blocked_clients:2\r\n")
    {
        std::thread::sleep(Duration::from_millis(2));
    }
    clock.advance(Duration::from_millis(5001));
    assert_eq!(reader.read_reply().unwrap(), b"*-1\r\n");
    c.command(&["XADD", "s", "7-7", "f", "v"]).unwrap();
    assert_eq!(
        group_reader.read_reply().unwrap(),
        b"*1\r\n*2\r\n$1\r\ns\r\n*1\r\n*2\r\n$3\r\n7-7\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n"
    );
}
