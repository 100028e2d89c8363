//! Pub/sub across connections, in RESP2 and RESP3, compared byte for byte
//! with a real Redis; and the output limit that disconnects a subscriber
//! that does not read.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use coordis::testing::{RawClient, RedisServer};

fn session(addr: SocketAddr) -> Vec<Vec<u8>> {
    let mut sub = RawClient::connect(addr).unwrap();
    let mut sub3 = RawClient::connect(addr).unwrap();
    let mut publisher = RawClient::connect(addr).unwrap();
    let mut out = vec![sub.command(&["SUBSCRIBE", "orders"]).unwrap()];
    out.push(sub.command(&["PSUBSCRIBE", "ord*"]).unwrap());
    out.push(sub.command(&["GET", "k"]).unwrap());
    out.push(sub.command(&["PING"]).unwrap());
    out.push(
        sub3.command(&["HELLO", "3"])
            .unwrap()
            .starts_with(b"%7")
            .to_string()
            .into_bytes(),
    );
    out.push(sub3.command(&["SUBSCRIBE", "orders"]).unwrap());
    out.push(sub3.command(&["SET", "k", "v"]).unwrap());
    out.push(publisher.command(&["PUBLISH", "orders", "o-1"]).unwrap());
    out.push(sub.read_reply().unwrap());
    out.push(sub.read_reply().unwrap());
    out.push(sub3.read_reply().unwrap());
    out.push(publisher.command(&["PUBSUB", "NUMSUB", "orders"]).unwrap());
    out.push(publisher.command(&["PUBSUB", "NUMPAT"]).unwrap());
    out.push(publisher.command(&["PUBSUB", "CHANNELS", "ord*"]).unwrap());
    out.push(
        publisher
            .command(&[
                "EVAL",
                "return redis.call('publish', KEYS[1], ARGV[1])",
                "1",
                "orders",
                "from-lua",
            ])
            .unwrap(),
    );
    out.push(sub.read_reply().unwrap());
    out.push(sub.read_reply().unwrap());
    out.push(sub3.read_reply().unwrap());
    out.push(sub.command(&["UNSUBSCRIBE", "orders"]).unwrap());
    out.push(sub.command(&["PUNSUBSCRIBE"]).unwrap());
    out.push(sub.command(&["GET", "k"]).unwrap());
    drop(sub3);
    std::thread::sleep(Duration::from_millis(100));
    out.push(publisher.command(&["PUBLISH", "orders", "nobody"]).unwrap());
    out
}

#[test]
fn messages_reach_subscribers_as_redis_sends_them() {
    let server = coordis::Server::builder().start_blocking().unwrap();
    let ours = session(server.addr());
    assert_eq!(ours[7], b":3\r\n", "two channel subscribers and one pattern");
    assert_eq!(ours[8], b"*3\r\n$7\r\nmessage\r\n$6\r\norders\r\n$3\r\no-1\r\n");
    assert_eq!(ours[10], b">3\r\n$7\r\nmessage\r\n$6\r\norders\r\n$3\r\no-1\r\n");
    assert_eq!(ours.last().unwrap(), b":0\r\n");
    if let Some(redis) = RedisServer::start(&[]).unwrap() {
        let theirs = session(redis.addr());
        for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
            assert_eq!(String::from_utf8_lossy(a), String::from_utf8_lossy(b), "step {i}");
        }
    }
}

#[test]
fn a_subscriber_that_does_not_read_is_disconnected_at_the_output_limit() {
    let server = coordis::Server::builder().start_blocking().unwrap();
    let mut idle = RawClient::connect(server.addr()).unwrap();
    idle.command(&["SUBSCRIBE", "firehose"]).unwrap();
    let mut publisher = RawClient::connect(server.addr()).unwrap();
    let payload = "x".repeat(1024 * 1024);
    let deadline = Instant::now() + Duration::from_secs(30);
    // 32 MB is the hard limit; socket buffers absorb a few MB more.
    let mut published = 0;
    loop {
        let reply = publisher.command(&["PUBLISH", "firehose", &payload]).unwrap();
        published += 1;
        if reply == b":0\r\n" {
            break;
        }
        assert!(
            published < 200 && Instant::now() < deadline,
            "subscriber never disconnected"
        );
    }
    assert!(published > 32, "disconnected too early: after {published} MB");
    assert_eq!(
        publisher.command(&["PUBSUB", "NUMSUB", "firehose"]).unwrap(),
        b"*2\r\n$8\r\nfirehose\r\n:0\r\n"
    );
}

#[test]
fn shutdown_does_not_wait_for_a_subscriber_that_does_not_read() {
    let server = coordis::Server::builder().start_blocking().unwrap();
    let mut idle = RawClient::connect(server.addr()).unwrap();
    idle.command(&["SUBSCRIBE", "firehose"]).unwrap();
    let mut publisher = RawClient::connect(server.addr()).unwrap();
    // 8 MB, under the output limit but more than the socket buffers hold:
    // the subscriber's connection is left stuck in a write.
    let payload = "x".repeat(1024 * 1024);
    for _ in 0..8 {
        assert_eq!(
            publisher.command(&["PUBLISH", "firehose", &payload]).unwrap(),
            b":1\r\n"
        );
    }
    let started = Instant::now();
    server.shutdown();
    // Without ending that write, shutdown waits out its 5 s drain deadline.
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "took {:?}",
        started.elapsed()
    );
}
