//! The effects of list, set and hash writes (`ServerControl::effects`), as
//! a replica or the append-only file receives them.
//!
//! Each workload runs on an embedded coordis and on a real redis-server
//! (`effects_common::Pair`), and at each checkpoint coordis's feed must be
//! what Redis sent its replicas; blocked clients are blocked on both. The
//! literal streams asserted too are the ones Redis 7.0.15 sends: a
//! command's own arguments when it changed something and nothing when it
//! did not; LMPOP and a blocking pop served at once as LPOP/RPOP (with the count taken for the *MPOP
//! forms); BLMOVE/BRPOPLPUSH served at once as LMOVE/RPOPLPUSH with the
//! client's words; a blocked client served later as the plain pop or move
//! after the write that served it, each its own unit (not wrapped), the
//! move's ends in Redis's lower-case words; SPOP as SREMs (wrapped in
//! MULTI/EXEC when several) or as DEL when a count takes the whole set;
//! HINCRBYFLOAT as HSET with the result.

mod effects_common;

use effects_common::Pair;

#[test]
fn list_writes_leave_their_commands_and_no_op_writes_leave_nothing() {
    let mut pair = Pair::start();
    let mut c = pair.client();
    c.run_all(&[
        "RPUSH l a b c d e",
        "LPUSHX nokey a",
        "LPOP l",
        "RPOP l 2",
        "LPOP nokey",
        "LPOP l 0",
        "LSET l 0 X",
        "LSET l 9 X",
        "LINSERT l BEFORE X y",
        "LINSERT l BEFORE nopivot y",
        "LREM l 0 nomatch",
        "LREM l 1 y",
        "LTRIM l 0 -1",
        "LTRIM nokey 0 1",
        "LTRIM l 1 0",
        "LRANGE l 0 -1",
    ]);
    assert_eq!(
        pair.take(),
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
    let mut pair = Pair::start();
    let mut c = pair.client();
    c.run_all(&[
        "RPUSH src a b c",
        "LMPOP 2 nokey src RIGHT COUNT 10",
        "LMPOP 1 nokey LEFT",
        "RPUSH src a b",
        "LMOVE src dst left RIGHT",
        "RPOPLPUSH src dst",
        "LMOVE nokey dst LEFT LEFT",
        "SET str v",
        "LMOVE dst str LEFT LEFT",
    ]);
    assert_eq!(
        pair.take(),
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
    let mut pair = Pair::start();
    let mut c = pair.client();
    c.run_all(&[
        "RPUSH l a b c d e f g",
        "BLPOP nokey l 0",
        "BRPOP l 0",
        "BLMPOP 0 2 nokey l LEFT COUNT 2",
        "BLMOVE l d left RIGHT 0",
        "BRPOPLPUSH l d 0",
        // Nothing to pop: a null inside MULTI, and no effect.
        "MULTI",
        "BLPOP nokey 0",
        "BLMOVE nokey d LEFT LEFT 0",
        "EXEC",
    ]);
    assert_eq!(
        pair.take(),
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
    let mut pair = Pair::start();
    let mut c = pair.client();
    let mut b = pair.block(0, "BLPOP q 0");
    assert!(pair.take().is_empty(), "a client that blocks changes nothing");
    c.run("LPUSH q x y");
    assert_eq!(b.served(), "*2\r\n$1\r\nq\r\n$1\r\ny\r\n");
    let mut b1 = pair.block(0, "BLPOP q5 0");
    let mut b2 = pair.block(0, "BRPOP q5 0");
    c.run("RPUSH q5 a b c");
    b1.served();
    b2.served();
    // No SELECT: the checkpoint above left both streams in database 0.
    assert_eq!(
        pair.take(),
        ["LPUSH q x y", "LPOP q", "RPUSH q5 a b c", "LPOP q5", "RPOP q5"],
        "each served client is a unit of its own, after the write that served it"
    );
    // A waiter in another database: its pop goes out in that database.
    let mut b3 = pair.block(3, "BLPOP k 0");
    c.run("SELECT 3");
    c.run("RPUSH k v");
    b3.served();
    assert_eq!(pair.take(), ["SELECT 3", "RPUSH k v", "LPOP k"]);
}

#[test]
fn a_blocked_blmove_served_later_leaves_an_lmove_in_redis_words() {
    let mut pair = Pair::start();
    let mut c = pair.client();
    let mut b = pair.block(0, "BLMOVE q2 d2 RIGHT left 0");
    c.run("RPUSH q2 a");
    assert_eq!(b.served(), "$1\r\na\r\n");
    let mut b = pair.block(0, "BRPOPLPUSH q3 d3 0");
    c.run("RPUSH q3 a b");
    assert_eq!(b.served(), "$1\r\nb\r\n");
    let mut b = pair.block(0, "BLMPOP 0 1 q4 RIGHT COUNT 3");
    c.run("RPUSH q4 a b");
    b.served();
    // A move that makes its destination ready serves the next waiter.
    let mut b1 = pair.block(0, "BLMOVE q6 q7 LEFT LEFT 0");
    let mut b2 = pair.block(0, "BLPOP q7 0");
    c.run("RPUSH q6 a");
    b1.served();
    assert_eq!(b2.served(), "*2\r\n$2\r\nq7\r\n$1\r\na\r\n");
    assert_eq!(
        pair.take(),
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

/// The members a SPOP reply names (one bulk string, or an array of them).
fn popped(reply: &str) -> Vec<Vec<u8>> {
    let (value, _) = coordis::testing::parse_resp(reply.as_bytes()).unwrap().unwrap();
    match value.bytes() {
        Some(member) => vec![member],
        None => value.items().iter().filter_map(|v| v.bytes()).collect(),
    }
}

#[test]
fn spop_leaves_its_explicit_result_and_set_no_ops_leave_nothing() {
    let mut pair = Pair::start();
    let mut c = pair.client();
    c.run_all(&["SADD s a b c d e", "SADD s a", "SREM s nomember", "SMOVE s s a"]);
    assert_eq!(pair.take(), ["SELECT 0", "SADD s a b c d e"]);
    // Each server pops members of its own choosing: their effects are
    // compared with the members each one popped masked.
    let (two, two_theirs) = c.run_any("SPOP s 2");
    let (one, one_theirs) = c.run_any("SPOP s");
    c.run_any("SPOP s 5");
    c.run("SPOP s");
    let ours = [popped(&two), popped(&one)].concat();
    let theirs: Vec<Vec<u8>> = [two_theirs, one_theirs]
        .iter()
        .flatten()
        .flat_map(|r| popped(r))
        .collect();
    let [two, one] = [&two, &one].map(|r| popped(r).into_iter().map(|m| String::from_utf8(m).unwrap()));
    let mut expected = vec!["MULTI".to_string()];
    expected.extend(two.map(|m| format!("SREM s {m}")));
    expected.push("EXEC".into());
    expected.extend(one.map(|m| format!("SREM s {m}")));
    expected.push("DEL s".into());
    assert_eq!(pair.take_masking(&ours, &theirs), expected);
    c.run_all(&[
        "SADD d 1",
        "SINTERSTORE d nokey",
        "SINTERSTORE d nokey",
        "SADD u x",
        "SMOVE u v x",
    ]);
    assert_eq!(
        pair.take(),
        ["SADD d 1", "SINTERSTORE d nokey", "SADD u x", "SMOVE u v x"]
    );
}

#[test]
fn hincrbyfloat_is_an_hset_of_the_result_and_hash_no_ops_leave_nothing() {
    let mut pair = Pair::start();
    let mut c = pair.client();
    c.run_all(&[
        "HSET h a 1",
        "HSET h a 1",
        "HINCRBYFLOAT h a 1.5",
        "HINCRBYFLOAT h f 10.00000000000000000001",
        "HINCRBYFLOAT h f inf",
        "HSETNX h a 2",
        "HDEL h nofield",
        "HDEL nokey a",
        "HDEL h a f",
        "HINCRBY h n 3",
        "HINCRBY h n abc",
        "HMSET h x 1",
    ]);
    assert_eq!(
        pair.take(),
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
