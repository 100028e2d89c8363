//! Wire-level behaviour on a real listener: inline commands, pipelining,
//! protocol errors (reply, then close), and hostile declared lengths.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use coordis::testing::RawClient;

fn server() -> coordis::BlockingServer {
    coordis::Server::builder().start_blocking().unwrap()
}

/// Sends `input`, then reads until the server closes or goes quiet.
fn exchange(addr: std::net::SocketAddr, input: &[u8]) -> Vec<u8> {
    coordis::testing::exchange(addr, input, Duration::from_millis(300))
}

#[test]
fn inline_commands_and_quoting() {
    let s = server();
    assert_eq!(exchange(s.addr(), b"PING\r\n"), b"+PONG\r\n");
    assert_eq!(exchange(s.addr(), b"\r\n\r\nPING\n"), b"+PONG\r\n");
    assert_eq!(
        exchange(s.addr(), b"SET k \"a b\\x41\"\r\nGET k\r\n"),
        b"+OK\r\n$4\r\na bA\r\n"
    );
    assert_eq!(
        exchange(s.addr(), b"ECHO 'it''s'\r\n"),
        b"-ERR Protocol error: unbalanced quotes in request\r\n<closed>"
    );
    assert_eq!(
        exchange(s.addr(), b"PING \"abc\r\n"),
        b"-ERR Protocol error: unbalanced quotes in request\r\n<closed>"
    );
}

#[test]
fn pipelined_replies_arrive_in_order() {
    let s = server();
    let mut input = vec![];
    for i in 0..500 {
        input.extend_from_slice(&RawClient::encode(&[b"INCR", b"counter"]));
        if i % 100 == 0 {
            input.extend_from_slice(b"PING\r\n");
        }
    }
    let mut c = RawClient::connect(s.addr()).unwrap();
    c.send(&input).unwrap();
    for i in 1..=500 {
        assert_eq!(c.read_reply().unwrap(), format!(":{i}\r\n").into_bytes());
        if (i - 1) % 100 == 0 {
            assert_eq!(c.read_reply().unwrap(), b"+PONG\r\n");
        }
    }
}

#[test]
fn protocol_errors_reply_then_close() {
    let s = server();
    let cases: &[(&[u8], &[u8])] = &[
        (b"*x\r\n", b"-ERR Protocol error: invalid multibulk length\r\n<closed>"),
        (
            b"*1\r\n+a\r\n",
            b"-ERR Protocol error: expected '$', got '+'\r\n<closed>",
        ),
        (b"*1\r\n$x\r\n", b"-ERR Protocol error: invalid bulk length\r\n<closed>"),
        (
            b"*1\r\n$-5\r\n",
            b"-ERR Protocol error: invalid bulk length\r\n<closed>",
        ),
        (
            b"*1\r\n$600000000\r\n",
            b"-ERR Protocol error: invalid bulk length\r\n<closed>",
        ),
        // Commands before the error are executed and answered first.
        (
            b"SET a b\r\n*1\r\n$x\r\n",
            b"+OK\r\n-ERR Protocol error: invalid bulk length\r\n<closed>",
        ),
        // Empty multibulks are ignored, as in Redis.
        (b"*0\r\n*-1\r\nPING\r\n", b"+PONG\r\n"),
    ];
    for (input, expected) in cases {
        assert_eq!(
            exchange(s.addr(), input),
            *expected,
            "input {:?}",
            String::from_utf8_lossy(input)
        );
    }
}

#[test]
fn too_big_inline_request_closes() {
    let s = server();
    let big = vec![b'a'; 70 * 1024];
    let out = exchange(s.addr(), &big);
    assert_eq!(out, b"-ERR Protocol error: too big inline request\r\n<closed>");
}

#[test]
fn declared_huge_lengths_wait_without_allocating() {
    let s = server();
    // A client declaring a 500 MB bulk and a huge argument count gets no reply
    // until the bytes arrive; the server keeps serving others meanwhile.
    let mut hog = TcpStream::connect(s.addr()).unwrap();
    hog.write_all(b"*1000000\r\n$500000000\r\nabc").unwrap();
    let mut other = RawClient::connect(s.addr()).unwrap();
    assert_eq!(other.command(&["PING"]).unwrap(), b"+PONG\r\n");
    hog.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    let mut buf = [0u8; 16];
    assert!(
        hog.read(&mut buf).is_err(),
        "no reply expected before the request is complete"
    );
}

#[test]
fn quit_replies_ok_and_closes() {
    let s = server();
    assert_eq!(
        exchange(s.addr(), b"PING\r\nQUIT\r\nPING\r\n"),
        b"+PONG\r\n+OK\r\n<closed>"
    );
}

#[test]
fn resp3_types_after_hello() {
    let s = server();
    let mut c = RawClient::connect(s.addr()).unwrap();
    let hello = c.command(&["HELLO", "3"]).unwrap();
    assert!(hello
        .starts_with(b"%7\r\n$6\r\nserver\r\n$5\r\nredis\r\n$7\r\nversion\r\n$6\r\n7.0.15\r\n$5\r\nproto\r\n:3\r\n"));
    assert_eq!(c.command(&["GET", "missing"]).unwrap(), b"_\r\n");
    assert_eq!(
        c.command(&["CONFIG", "GET", "databases"]).unwrap(),
        b"%1\r\n$9\r\ndatabases\r\n$2\r\n16\r\n"
    );
    let info = c.command(&["CLIENT", "INFO"]).unwrap();
    assert!(
        info.starts_with(b"="),
        "verbatim string expected: {:?}",
        String::from_utf8_lossy(&info)
    );
    assert_eq!(c.command(&["HELLO", "2"]).unwrap()[..3], *b"*14");
    assert_eq!(c.command(&["GET", "missing"]).unwrap(), b"$-1\r\n");
}

#[test]
fn requirepass_gates_commands() {
    let s = coordis::Server::builder()
        .requirepass("s3cret")
        .start_blocking()
        .unwrap();
    let mut c = RawClient::connect(s.addr()).unwrap();
    assert_eq!(
        c.command(&["GET", "k"]).unwrap(),
        b"-NOAUTH Authentication required.\r\n"
    );
    assert_eq!(
        c.command(&["nosuch"]).unwrap(),
        b"-ERR unknown command 'nosuch', with args beginning with: \r\n"
    );
    assert_eq!(
        c.command(&["AUTH", "wrong"]).unwrap(),
        b"-WRONGPASS invalid username-password pair or user is disabled.\r\n"
    );
    assert_eq!(
        c.command(&["AUTH", "other", "s3cret"]).unwrap(),
        b"-WRONGPASS invalid username-password pair or user is disabled.\r\n"
    );
    assert!(c
        .command(&["HELLO", "3"])
        .unwrap()
        .starts_with(b"-NOAUTH HELLO must be called with the client already authenticated"));
    assert_eq!(c.command(&["AUTH", "s3cret"]).unwrap(), b"+OK\r\n");
    assert_eq!(c.command(&["GET", "k"]).unwrap(), b"$-1\r\n");
    assert_eq!(c.command(&["RESET"]).unwrap(), b"+RESET\r\n");
    assert_eq!(
        c.command(&["GET", "k"]).unwrap(),
        b"-NOAUTH Authentication required.\r\n"
    );
    let mut d = RawClient::connect(s.addr()).unwrap();
    assert!(d
        .command(&["HELLO", "3", "AUTH", "default", "s3cret", "SETNAME", "me"])
        .unwrap()
        .starts_with(b"%7"));
    assert_eq!(d.command(&["CLIENT", "GETNAME"]).unwrap(), b"$2\r\nme\r\n");
}
