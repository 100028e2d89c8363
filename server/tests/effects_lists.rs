//! The effects of list, set and hash writes (`ServerControl::effects`), as
//! a replica or the append-only file receives them.
//!
//! The expected streams are the ones a real Redis 7.0.15 sends its replicas
//! for the same commands, read with `redis-cli --replica` against
//! `redis-server --save '' --appendonly no`: a command's own arguments when
//! it changed something and nothing when it did not; LMPOP and a blocking
//! pop served at once as LPOP/RPOP (with the count taken for the *MPOP
//! forms); BLMOVE/BRPOPLPUSH served at once as LMOVE/RPOPLPUSH with the
//! client's words; a blocked client served later as the plain pop or move
//! after the write that served it, each its own unit (not wrapped), the
//! move's ends in Redis's lower-case words; SPOP as SREMs (wrapped in
//! MULTI/EXEC when several) or as DEL when a count takes the whole set;
//! HINCRBYFLOAT as HSET with the result. (A raw replication capture to
//! compare with Redis directly would replace these literals.)

use std::time::Duration;

use coordis::testing::RawClient;

/// A server, a client, and a reader of its feed.
fn setup() -> (coordis::BlockingServer, RawClient, coordis::EffectReader) {
    let server = coordis::Server::builder().start_blocking().unwrap();
    let feed = server.control().effects();
    let client = RawClient::connect(server.addr()).unwrap();
    (server, client, feed)
}

fn run(c: &mut RawClient, args: &[&str]) -> String {
    String::from_utf8(c.command(args).unwrap()).unwrap()
}

/// Sends `args` on a new client of `server` in database `db`, and returns
/// once the server reports the client blocked.
fn block(server: &coordis::BlockingServer, db: &str, args: &[&str]) -> RawClient {
    let mut waiter = RawClient::connect(server.addr()).unwrap();
    run(&mut waiter, &["SELECT", db]);
    let id = run(&mut waiter, &["CLIENT", "ID"]);
    let id = id.trim_start_matches(':').trim_end();
    let raw: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    waiter.send(&RawClient::encode(&raw)).unwrap();
    let mut admin = RawClient::connect(server.addr()).unwrap();
    let prefix = format!("id={id} ");
    for _ in 0..500 {
        let list = run(&mut admin, &["CLIENT", "LIST"]);
        let blocked = list.lines().any(|line| {
            let line = line.trim_start_matches(|c: char| !c.is_ascii_alphabetic());
            line.starts_with(&prefix)
                && line
                    .split(' ')
                    .any(|f| f.strip_prefix("flags=").is_some_and(|f| f.contains('b')))
        });
        if blocked {
            return waiter;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    panic!("{args:?} did not block");
}

/// The reply a blocked client got once served.
fn served(waiter: &mut RawClient) -> String {
    waiter.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    String::from_utf8(waiter.read_reply().unwrap()).unwrap()
}

#[test]
fn list_writes_leave_their_commands_and_no_op_writes_leave_nothing() {
    let (_server, mut c, mut feed) = setup();
    for args in [
        &["RPUSH", "l", "a", "b", "c", "d", "e"][..],
        &["LPUSHX", "nokey", "a"],
        &["LPOP", "l"],
        &["RPOP", "l", "2"],
        &["LPOP", "nokey"],
        &["LPOP", "l", "0"],
        &["LSET", "l", "0", "X"],
        &["LSET", "l", "9", "X"],
        &["LINSERT", "l", "BEFORE", "X", "y"],
        &["LINSERT", "l", "BEFORE", "nopivot", "y"],
        &["LREM", "l", "0", "nomatch"],
        &["LREM", "l", "1", "y"],
        &["LTRIM", "l", "0", "-1"],
        &["LTRIM", "nokey", "0", "1"],
        &["LTRIM", "l", "1", "0"],
        &["LRANGE", "l", "0", "-1"],
    ] {
        run(&mut c, args);
    }
    assert_eq!(
        feed.try_lines(),
        [
            "SELECT 0",
            "RPUSH l a b c d e",
            "LPOP l",
            "RPOP l 2",
            "LSET l 0 X",
            "LINSERT l BEFORE X y",
            "LREM l 1 y",
            "LTRIM l 1 0",
        ]
    );
}

#[test]
fn lmpop_is_a_plain_pop_with_the_count_taken_and_moves_are_themselves() {
    let (_server, mut c, mut feed) = setup();
    for args in [
        &["RPUSH", "src", "a", "b", "c"][..],
        &["LMPOP", "2", "nokey", "src", "RIGHT", "COUNT", "10"],
        &["LMPOP", "1", "nokey", "LEFT"],
        &["RPUSH", "src", "a", "b"],
        &["LMOVE", "src", "dst", "left", "RIGHT"],
        &["RPOPLPUSH", "src", "dst"],
        &["LMOVE", "nokey", "dst", "LEFT", "LEFT"],
        &["SET", "str", "v"],
        &["LMOVE", "dst", "str", "LEFT", "LEFT"],
    ] {
        run(&mut c, args);
    }
    assert_eq!(
        feed.try_lines(),
        [
            "SELECT 0",
            "RPUSH src a b c",
            "RPOP src 3",
            "RPUSH src a b",
            "LMOVE src dst left RIGHT",
            "RPOPLPUSH src dst",
            "SET str v",
        ]
    );
}

#[test]
fn blocking_commands_served_at_once_are_their_plain_forms() {
    let (_server, mut c, mut feed) = setup();
    for args in [
        &["RPUSH", "l", "a", "b", "c", "d", "e", "f", "g"][..],
        &["BLPOP", "nokey", "l", "0"],
        &["BRPOP", "l", "0"],
        &["BLMPOP", "0", "2", "nokey", "l", "LEFT", "COUNT", "2"],
        &["BLMOVE", "l", "d", "left", "RIGHT", "0"],
        &["BRPOPLPUSH", "l", "d", "0"],
        // Nothing to pop: a null inside MULTI, and no effect.
        &["MULTI"],
        &["BLPOP", "nokey", "0"],
        &["BLMOVE", "nokey", "d", "LEFT", "LEFT", "0"],
        &["EXEC"],
    ] {
        run(&mut c, args);
    }
    assert_eq!(
        feed.try_lines(),
        [
            "SELECT 0",
            "RPUSH l a b c d e f g",
            "LPOP l",
            "RPOP l",
            "LPOP l 2",
            "LMOVE l d left RIGHT",
            "RPOPLPUSH l d",
        ]
    );
}

#[test]
fn a_blocked_blpop_served_by_a_later_lpush_leaves_the_push_then_the_pop() {
    let (server, mut c, mut feed) = setup();
    let mut b = block(&server, "0", &["BLPOP", "q", "0"]);
    assert!(feed.try_lines().is_empty(), "a client that blocks changes nothing");
    run(&mut c, &["LPUSH", "q", "x", "y"]);
    assert_eq!(served(&mut b), "*2\r\n$1\r\nq\r\n$1\r\ny\r\n");
    let mut b1 = block(&server, "0", &["BLPOP", "q5", "0"]);
    let mut b2 = block(&server, "0", &["BRPOP", "q5", "0"]);
    run(&mut c, &["RPUSH", "q5", "a", "b", "c"]);
    served(&mut b1);
    served(&mut b2);
    let units = feed.try_lines();
    assert_eq!(
        units,
        [
            "SELECT 0",
            "LPUSH q x y",
            "LPOP q",
            "RPUSH q5 a b c",
            "LPOP q5",
            "RPOP q5"
        ],
        "each served client is a unit of its own, after the write that served it"
    );
    // A waiter in another database: its pop goes out in that database.
    let mut b3 = block(&server, "3", &["BLPOP", "k", "0"]);
    run(&mut c, &["SELECT", "3"]);
    run(&mut c, &["RPUSH", "k", "v"]);
    served(&mut b3);
    assert_eq!(feed.try_lines(), ["SELECT 3", "RPUSH k v", "LPOP k"]);
}

#[test]
fn a_blocked_blmove_served_later_leaves_an_lmove_in_redis_words() {
    let (server, mut c, mut feed) = setup();
    let mut b = block(&server, "0", &["BLMOVE", "q2", "d2", "RIGHT", "left", "0"]);
    run(&mut c, &["RPUSH", "q2", "a"]);
    assert_eq!(served(&mut b), "$1\r\na\r\n");
    let mut b = block(&server, "0", &["BRPOPLPUSH", "q3", "d3", "0"]);
    run(&mut c, &["RPUSH", "q3", "a", "b"]);
    assert_eq!(served(&mut b), "$1\r\nb\r\n");
    let mut b = block(&server, "0", &["BLMPOP", "0", "1", "q4", "RIGHT", "COUNT", "3"]);
    run(&mut c, &["RPUSH", "q4", "a", "b"]);
    served(&mut b);
    // A move that makes its destination ready serves the next waiter.
    let mut b1 = block(&server, "0", &["BLMOVE", "q6", "q7", "LEFT", "LEFT", "0"]);
    let mut b2 = block(&server, "0", &["BLPOP", "q7", "0"]);
    run(&mut c, &["RPUSH", "q6", "a"]);
    served(&mut b1);
    assert_eq!(served(&mut b2), "*2\r\n$2\r\nq7\r\n$1\r\na\r\n");
    assert_eq!(
        feed.try_lines(),
        [
            "SELECT 0",
            "RPUSH q2 a",
            "LMOVE q2 d2 right left",
            "RPUSH q3 a b",
            "RPOPLPUSH q3 d3",
            "RPUSH q4 a b",
            "RPOP q4 2",
            "RPUSH q6 a",
            "LMOVE q6 q7 left left",
            "LPOP q7",
        ]
    );
}

#[test]
fn spop_leaves_its_explicit_result_and_set_no_ops_leave_nothing() {
    let (_server, mut c, mut feed) = setup();
    run(&mut c, &["SADD", "s", "a", "b", "c", "d", "e"]);
    run(&mut c, &["SADD", "s", "a"]);
    run(&mut c, &["SREM", "s", "nomember"]);
    run(&mut c, &["SMOVE", "s", "s", "a"]);
    let two = coordis::testing::parse_commands(&c.command(&["SPOP", "s", "2"]).unwrap()).remove(0);
    let one = c.command(&["SPOP", "s"]).unwrap();
    let one = String::from_utf8(one).unwrap();
    let one = one.lines().nth(1).unwrap().to_string();
    run(&mut c, &["SPOP", "s", "5"]);
    run(&mut c, &["SPOP", "s"]);
    run(&mut c, &["SADD", "d", "1"]);
    run(&mut c, &["SINTERSTORE", "d", "nokey"]);
    run(&mut c, &["SINTERSTORE", "d", "nokey"]);
    run(&mut c, &["SADD", "u", "x"]);
    run(&mut c, &["SMOVE", "u", "v", "x"]);
    assert_eq!(
        feed.try_lines(),
        [
            "SELECT 0".to_string(),
            "SADD s a b c d e".into(),
            "MULTI".into(),
            format!("SREM s {}", String::from_utf8_lossy(&two[0])),
            format!("SREM s {}", String::from_utf8_lossy(&two[1])),
            "EXEC".into(),
            format!("SREM s {one}"),
            "DEL s".into(),
            "SADD d 1".into(),
            "SINTERSTORE d nokey".into(),
            "SADD u x".into(),
            "SMOVE u v x".into(),
        ]
    );
}

#[test]
fn hincrbyfloat_is_an_hset_of_the_result_and_hash_no_ops_leave_nothing() {
    let (_server, mut c, mut feed) = setup();
    for args in [
        &["HSET", "h", "a", "1"][..],
        &["HSET", "h", "a", "1"],
        &["HINCRBYFLOAT", "h", "a", "1.5"],
        &["HINCRBYFLOAT", "h", "f", "10.00000000000000000001"],
        &["HINCRBYFLOAT", "h", "f", "inf"],
        &["HSETNX", "h", "a", "2"],
        &["HDEL", "h", "nofield"],
        &["HDEL", "nokey", "a"],
        &["HDEL", "h", "a", "f"],
        &["HINCRBY", "h", "n", "3"],
        &["HINCRBY", "h", "n", "abc"],
        &["HMSET", "h", "x", "1"],
    ] {
        run(&mut c, args);
    }
    assert_eq!(
        feed.try_lines(),
        [
            "SELECT 0",
            "HSET h a 1",
            "HSET h a 1",
            "HSET h a 2.5",
            "HSET h f 10",
            "HDEL h a f",
            "HINCRBY h n 3",
            "HMSET h x 1",
        ]
    );
}
