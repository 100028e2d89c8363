//! The effects of the string and bitmap writes (`ServerControl::effects`),
//! as a replica of Redis 7.0.15 receives them for the same commands.
//!
//! Every expected stream here was taken from a real Redis 7.0.15's
//! replication stream (`redis-cli --replica` attached to a `redis-server`
//! that ran the same commands); deadlines are exact because coordis runs on
//! a frozen clock at [`T0`]. What the rules come to: relative expiries are
//! replayed as absolute deadlines (`SET ... PXAT`, `PEXPIREAT`), GETSET as
//! SET, GETDEL and a GETEX whose deadline has passed as DEL (UNLINK under
//! the lazy-free directives), INCRBYFLOAT as `SET key result KEEPTTL`, and
//! a write that changed nothing (SETNX of an existing key, SETBIT to the
//! same value, BITFIELD writing what was there, SETRANGE of nothing, BITOP
//! of nothing over a missing key) leaves nothing.

use coordis::testing::RawClient;

/// A fixed start for the frozen test clock, so deadlines are exact.
const T0: u64 = 1_900_000_000_000;

/// A server on a frozen clock at [`T0`], a client, and a reader of its feed.
fn setup() -> (coordis::BlockingServer, RawClient, coordis::EffectReader) {
    let server = coordis::Server::builder().start_blocking().unwrap();
    let clock = server.clock().unwrap();
    clock.freeze();
    clock.set_ms(T0);
    let feed = server.control().effects();
    let client = RawClient::connect(server.addr()).unwrap();
    (server, client, feed)
}

/// The stream's commands, one per line, arguments space-separated.
fn commands(feed: &mut coordis::EffectReader) -> Vec<String> {
    let bytes = feed.try_bytes();
    parse(&bytes)
        .into_iter()
        .map(|args| {
            args.iter()
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

/// The RESP arrays of bulk strings in `bytes`.
fn parse(mut bytes: &[u8]) -> Vec<Vec<Vec<u8>>> {
    fn line<'a>(bytes: &mut &'a [u8]) -> &'a [u8] {
        let end = bytes.windows(2).position(|w| w == b"\r\n").expect("a CRLF");
        let (head, rest) = bytes.split_at(end);
        *bytes = &rest[2..];
        head
    }
    let mut commands = Vec::new();
    while !bytes.is_empty() {
        let head = line(&mut bytes);
        assert_eq!(head[0], b'*', "an array");
        let n: usize = std::str::from_utf8(&head[1..]).unwrap().parse().unwrap();
        let mut args = Vec::with_capacity(n);
        for _ in 0..n {
            let len: usize = std::str::from_utf8(&line(&mut bytes)[1..]).unwrap().parse().unwrap();
            args.push(bytes[..len].to_vec());
            bytes = &bytes[len + 2..];
        }
        commands.push(args);
    }
    commands
}

/// Runs each command (space-separated words; none has a space inside).
fn run_all(c: &mut RawClient, lines: &[&str]) {
    for line in lines {
        let args: Vec<&str> = line.split(' ').collect();
        c.command(&args).unwrap();
    }
}

/// `T0 + ms`, as the stream writes an absolute deadline.
fn at(ms: u64) -> String {
    (T0 + ms).to_string()
}

#[test]
fn set_relatives_leave_set_or_nothing() {
    let (_server, mut c, mut feed) = setup();
    run_all(
        &mut c,
        &[
            "SETNX a 1",
            "SETNX a 2",
            "SETEX b 100 v",
            "PSETEX c 5000 v",
            "SETEX d 0 v",
            "GETSET a 9",
            "GETSET fresh 9",
            "MSET m1 1 m2 2",
            "MSETNX m1 1 m3 3",
            "MSETNX m3 3 m4 4",
            "SET x y XX GET",
            "SET x y GET NX KEEPTTL",
        ],
    );
    assert_eq!(
        commands(&mut feed),
        [
            "SELECT 0".to_string(),
            "SETNX a 1".into(),
            format!("SET b v PXAT {}", at(100_000)),
            format!("SET c v PXAT {}", at(5_000)),
            "SET a 9".into(),
            "SET fresh 9".into(),
            "MSET m1 1 m2 2".into(),
            "MSETNX m3 3 m4 4".into(),
            "SET x y NX KEEPTTL".into(),
        ]
    );
}

#[test]
fn getdel_and_getex_become_del_pexpireat_or_persist() {
    let (_server, mut c, mut feed) = setup();
    run_all(
        &mut c,
        &[
            "SET g v",
            "GETEX g",
            "GETEX g PERSIST",
            "GETEX g EX 100",
            "GETEX g PERSIST",
            "GETEX g PERSIST",
            "GETEX g EXAT 99999999999",
            "GETEX g PX 250",
            "GETEX missing EX 100",
            "GETEX g PXAT 1",
            "GETDEL g",
            "SET d v",
            "GETDEL d",
            "GETDEL d",
        ],
    );
    assert_eq!(
        commands(&mut feed),
        [
            "SELECT 0".to_string(),
            "SET g v".into(),
            format!("PEXPIREAT g {}", at(100_000)),
            "PERSIST g".into(),
            "PEXPIREAT g 99999999999000".into(),
            format!("PEXPIREAT g {}", at(250)),
            "DEL g".into(),
            "SET d v".into(),
            "DEL d".into(),
        ]
    );
}

#[test]
fn lazy_free_directives_turn_the_deletions_into_unlink() {
    let (_server, mut c, mut feed) = setup();
    run_all(
        &mut c,
        &[
            "CONFIG SET lazyfree-lazy-user-del yes",
            "CONFIG SET lazyfree-lazy-expire yes",
            "SET u v",
            "GETDEL u",
            "SET u v",
            "GETEX u PXAT 1",
        ],
    );
    assert_eq!(
        commands(&mut feed),
        ["SELECT 0", "SET u v", "UNLINK u", "SET u v", "UNLINK u"]
    );
}

#[test]
fn counters_leave_themselves_and_incrbyfloat_leaves_set_keepttl() {
    let (_server, mut c, mut feed) = setup();
    run_all(
        &mut c,
        &[
            "INCR i",
            "DECR i",
            "INCRBY i 5",
            "DECRBY i 3",
            "INCRBY i abc",
            "SET s foo",
            "INCR s",
            "INCRBYFLOAT f 1.5",
            "INCRBYFLOAT f abc",
            "SET j 5",
            "INCRBYFLOAT j 1e2",
        ],
    );
    assert_eq!(
        commands(&mut feed),
        [
            "SELECT 0",
            "INCR i",
            "DECR i",
            "INCRBY i 5",
            "DECRBY i 3",
            "SET s foo",
            "SET f 1.5 KEEPTTL",
            "SET j 5",
            "SET j 105 KEEPTTL",
        ]
    );
}

#[test]
fn append_counts_even_nothing_and_setrange_of_nothing_leaves_nothing() {
    let (_server, mut c, mut feed) = setup();
    c.command(&["APPEND", "ap", ""]).unwrap();
    c.command(&["APPEND", "ap", "x"]).unwrap();
    c.command(&["SETRANGE", "sr", "0", ""]).unwrap();
    c.command(&["SETRANGE", "sr", "2", "ab"]).unwrap();
    c.command(&["SETRANGE", "sr", "0", ""]).unwrap();
    c.command(&["SETRANGE", "sr", "-1", "ab"]).unwrap();
    assert_eq!(
        commands(&mut feed),
        ["SELECT 0", "APPEND ap ", "APPEND ap x", "SETRANGE sr 2 ab"]
    );
}

#[test]
fn bit_writes_leave_an_effect_only_when_a_bit_changed_or_the_string_grew() {
    let (_server, mut c, mut feed) = setup();
    run_all(
        &mut c,
        &[
            "SETBIT sb 3 1",
            "SETBIT sb 3 1",
            "SETBIT sb 3 0",
            "SETBIT sb 20 0",
            "SETBIT sb 20 0",
            "BITFIELD bf SET u8 0 0",
            "BITFIELD bf SET u8 0 0",
            "BITFIELD bf SET u8 0 5 INCRBY u8 0 0 GET u8 0",
            "BITFIELD bf GET u8 0",
            "BITFIELD bf OVERFLOW SAT INCRBY u8 0 300",
            "BITFIELD bf OVERFLOW SAT INCRBY u8 0 300",
            // FAIL refused the only write: the string was created, but
            // nothing counts, so Redis replicates nothing.
            "BITFIELD bf2 OVERFLOW FAIL INCRBY u2 0 10",
            "BITOP OR dst sb nosuch",
            "BITOP AND dst2 nosuch",
            "BITOP AND dst nosuch",
            "BITOP AND dst nosuch",
        ],
    );
    assert_eq!(
        commands(&mut feed),
        [
            "SELECT 0",
            "SETBIT sb 3 1",
            "SETBIT sb 3 0",
            "SETBIT sb 20 0",
            "BITFIELD bf SET u8 0 0",
            "BITFIELD bf SET u8 0 5 INCRBY u8 0 0 GET u8 0",
            "BITFIELD bf OVERFLOW SAT INCRBY u8 0 300",
            "BITOP OR dst sb nosuch",
            "BITOP AND dst nosuch",
        ]
    );
}

#[test]
fn a_transaction_of_rewritten_string_writes_is_wrapped() {
    let (_server, mut c, mut feed) = setup();
    run_all(
        &mut c,
        &[
            "MULTI",
            "SET q 1",
            "INCRBYFLOAT q 2.5",
            "GETEX q EX 5",
            "SETNX q 0",
            "EXEC",
        ],
    );
    assert_eq!(
        commands(&mut feed),
        [
            "SELECT 0".to_string(),
            "MULTI".into(),
            "SET q 1".into(),
            "SET q 3.5 KEEPTTL".into(),
            format!("PEXPIREAT q {}", at(5_000)),
            "EXEC".into(),
        ]
    );
}
