//! Fault rules (`COORDIS.FAULT`, `ServerControl::add_fault`): which
//! commands, keys and clients they match, when they fire, and what each
//! action does to the client.

use std::time::{Duration, Instant};

use coordis::testing::RawClient;
use coordis::{FaultAction, FaultRule};

fn server() -> coordis::BlockingServer {
    coordis::Server::builder().start_blocking().unwrap()
}

#[test]
fn an_error_rule_matches_command_key_and_count() {
    let server = server();
    let mut c = RawClient::connect(server.addr()).unwrap();
    let add = c
        .command(&[
            "COORDIS.FAULT",
            "ADD",
            "COMMAND",
            "set",
            "KEY",
            "lock:*",
            "TIMES",
            "1",
            "ERROR",
            "READONLY You can't write against a read only replica.",
        ])
        .unwrap();
    assert_eq!(add, b":1\r\n");
    assert_eq!(c.command(&["SET", "other", "v"]).unwrap(), b"+OK\r\n");
    assert_eq!(
        c.command(&["SET", "lock:a", "me"]).unwrap(),
        b"-READONLY You can't write against a read only replica.\r\n"
    );
    assert_eq!(c.command(&["GET", "lock:a"]).unwrap(), b"$-1\r\n", "not run");
    assert_eq!(c.command(&["SET", "lock:a", "me"]).unwrap(), b"+OK\r\n", "fired once");
    let list = String::from_utf8(c.command(&["COORDIS.FAULT", "LIST"]).unwrap()).unwrap();
    assert!(list.contains("$7\r\nmatched\r\n:2\r\n$5\r\nfired\r\n:1\r\n"), "{list}");
    assert!(list.contains("$10\r\ntimes-left\r\n:0\r\n"), "{list}");
    let info = String::from_utf8(c.command(&["INFO", "faults"]).unwrap()).unwrap();
    assert!(
        info.contains("# Faults\r\nfault_rules:1\r\nfault_matches:2\r\nfault_fires:1\r\nrule_1:matched=2,fired=1\r\n"),
        "{info}"
    );
    assert_eq!(c.command(&["COORDIS.FAULT", "DEL", "1"]).unwrap(), b":1\r\n");
    assert_eq!(c.command(&["COORDIS.FAULT", "DEL", "1"]).unwrap(), b":0\r\n");
    let info = String::from_utf8(c.command(&["INFO"]).unwrap()).unwrap();
    assert!(!info.contains("# Faults"), "no section without rules unless asked");
    assert_eq!(c.command(&["COORDIS.FAULT", "LIST"]).unwrap(), b"*0\r\n");
}

#[test]
fn drop_loses_the_request_and_lose_reply_loses_the_reply() {
    let server = server();
    let control = server.control();
    let mut c = RawClient::connect(server.addr()).unwrap();
    control.add_fault(FaultRule::new(FaultAction::Drop).command("incr").times(1));
    assert!(c.command(&["INCR", "n"]).is_err(), "closed without a reply");
    let mut c = RawClient::connect(server.addr()).unwrap();
    assert_eq!(c.command(&["GET", "n"]).unwrap(), b"$-1\r\n", "the request never ran");
    // The "did my SET NX land?" case: it ran, the reply was lost.
    control.add_fault(
        FaultRule::new(FaultAction::LoseReply)
            .command("set")
            .key("lock:*")
            .times(1),
    );
    c.send(&RawClient::encode(&[
        b"SET",
        b"lock:job",
        b"me",
        b"NX",
        b"PX",
        b"30000",
    ]))
    .unwrap();
    assert!(c.read_reply().is_err(), "closed without a reply");
    let mut c = RawClient::connect(server.addr()).unwrap();
    assert_eq!(
        c.command(&["GET", "lock:job"]).unwrap(),
        b"$2\r\nme\r\n",
        "but it landed"
    );
    assert_eq!(control.faults().iter().map(|f| f.fired).collect::<Vec<_>>(), [1, 1]);
}

#[test]
fn hang_holds_until_the_rule_goes_and_delay_holds_the_reply() {
    let server = server();
    let control = server.control();
    let mut c = RawClient::connect(server.addr()).unwrap();
    let mut other = RawClient::connect(server.addr()).unwrap();
    let id = control.add_fault(FaultRule::new(FaultAction::Hang).command("get"));
    c.send(&RawClient::encode(&[b"GET", b"k"])).unwrap();
    c.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    assert!(c.read_reply().is_err(), "no answer while the rule stands");
    assert_eq!(other.command(&["SET", "k", "v"]).unwrap(), b"+OK\r\n");
    assert!(control.remove_fault(id));
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    assert_eq!(c.read_reply().unwrap(), b"$1\r\nv\r\n", "it ran once the rule went");
    control.add_fault(
        FaultRule::new(FaultAction::Delay { ms: 200, jitter_ms: 0 })
            .command("ping")
            .times(1),
    );
    let started = Instant::now();
    assert_eq!(c.command(&["PING"]).unwrap(), b"+PONG\r\n");
    assert!(
        started.elapsed() >= Duration::from_millis(180),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn after_client_and_seeded_probability() {
    let server = server();
    let mut c = RawClient::connect(server.addr()).unwrap();
    let mut worker = RawClient::connect(server.addr()).unwrap();
    assert_eq!(worker.command(&["CLIENT", "SETNAME", "worker-1"]).unwrap(), b"+OK\r\n");
    assert_eq!(
        c.command(&[
            "COORDIS.FAULT",
            "ADD",
            "CLIENT",
            "worker-*",
            "AFTER",
            "2",
            "ERROR",
            "ERR boom"
        ])
        .unwrap(),
        b":1\r\n"
    );
    for _ in 0..2 {
        assert_eq!(worker.command(&["PING"]).unwrap(), b"+PONG\r\n");
    }
    assert_eq!(worker.command(&["PING"]).unwrap(), b"-ERR boom\r\n");
    assert_eq!(c.command(&["PING"]).unwrap(), b"+PONG\r\n", "another client");
    // A seeded generator: the same seed fires on the same matches.
    let pattern = |c: &mut RawClient| -> Vec<bool> {
        assert_eq!(c.command(&["COORDIS.FAULT", "CLEAR"]).unwrap(), b"+OK\r\n");
        assert_eq!(c.command(&["COORDIS.FAULT", "SEED", "42"]).unwrap(), b"+OK\r\n");
        c.command(&[
            "COORDIS.FAULT",
            "ADD",
            "COMMAND",
            "incr",
            "PROBABILITY",
            "0.5",
            "ERROR",
            "ERR flaky",
        ])
        .unwrap();
        (0..32)
            .map(|_| c.command(&["INCR", "n"]).unwrap().starts_with(b"-"))
            .collect()
    };
    let first = pattern(&mut c);
    assert!(first.contains(&true) && first.contains(&false), "{first:?}");
    assert_eq!(pattern(&mut c), first);
    for bad in [
        &["COORDIS.FAULT", "ADD", "COMMAND", "get"][..],
        &["COORDIS.FAULT", "ADD", "NOSUCH"],
        &["COORDIS.FAULT", "ADD", "DELAY", "-1"],
    ] {
        assert!(c.command(bad).unwrap().starts_with(b"-ERR"), "{bad:?}");
    }
    assert_eq!(
        c.command(&["COORDIS.FAULT", "ADD", "PROBABILITY", "2", "DROP"])
            .unwrap(),
        b"-ERR probability must be a number from 0 to 1\r\n"
    );
}

#[test]
fn slice_writes_a_reply_in_pieces_and_jitter_adds_to_a_delay() {
    use std::io::{Read, Write};
    let server = server();
    let control = server.control();
    let mut c = RawClient::connect(server.addr()).unwrap();
    let value = "v".repeat(100);
    c.command(&["SET", "big", &value]).unwrap();
    let rule = control.add_fault(FaultRule::new(FaultAction::Slice { bytes: 7, pause_ms: 5 }).command("get"));
    let mut raw = std::net::TcpStream::connect(server.addr()).unwrap();
    raw.write_all(b"*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n").unwrap();
    let expected = format!("$100\r\n{value}\r\n").into_bytes();
    // A reader descheduled for longer than a pause finds two pieces at
    // once, so reads are checked to end where pieces end, not to be one
    // piece each; most are.
    let (mut got, mut reads) = (vec![], 0);
    while got.len() < expected.len() {
        let mut buf = [0u8; 4096];
        let n = raw.read(&mut buf).unwrap();
        assert!(n > 0, "closed early");
        got.extend_from_slice(&buf[..n]);
        assert!(
            got.len() % 7 == 0 || got.len() == expected.len(),
            "a read ended inside a piece: {} bytes",
            got.len()
        );
        reads += 1;
    }
    assert_eq!(got, expected, "the pieces make the reply");
    assert!(reads >= 8, "{reads} reads of 16 pieces");
    assert!(control.remove_fault(rule));
    // A delay with jitter holds the reply at least the delay, at most both.
    control.add_fault(
        FaultRule::new(FaultAction::Delay { ms: 50, jitter_ms: 100 })
            .command("ping")
            .times(1),
    );
    let started = Instant::now();
    assert_eq!(c.command(&["PING"]).unwrap(), b"+PONG\r\n");
    assert!(
        started.elapsed() >= Duration::from_millis(45),
        "{:?}",
        started.elapsed()
    );
    // Over the wire, and as LIST shows them.
    assert_eq!(
        c.command(&["COORDIS.FAULT", "ADD", "COMMAND", "echo", "SLICE", "3", "PAUSE", "1"])
            .unwrap(),
        b":3\r\n"
    );
    assert_eq!(
        c.command(&["COORDIS.FAULT", "ADD", "COMMAND", "time", "DELAY", "5", "JITTER", "5"])
            .unwrap(),
        b":4\r\n"
    );
    assert_eq!(
        c.command(&["COORDIS.FAULT", "ADD", "JITTER", "5", "DROP"]).unwrap(),
        b"-ERR syntax error\r\n"
    );
    let list = String::from_utf8(c.command(&["COORDIS.FAULT", "LIST"]).unwrap()).unwrap();
    assert!(
        list.contains("slice 3 pause 1") && list.contains("delay 5 jitter 5"),
        "{list}"
    );
    assert_eq!(c.command(&["ECHO", "hello"]).unwrap(), b"$5\r\nhello\r\n");
}
