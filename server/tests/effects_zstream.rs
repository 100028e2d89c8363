//! The effects of the sorted-set and stream writes (`ServerControl::effects`),
//! as a Redis 7.0.15 replica receives them.
//!
//! Each workload runs on an embedded coordis and on a real redis-server
//! 7.0.15 (`effects_common::Pair`), blocked clients blocked on both, and at
//! each checkpoint coordis's feed must be what Redis sent its replicas; only
//! clock-dependent values differ, and are masked. coordis's clock is frozen
//! at `T0`, so in the literal streams asserted too a generated ID is `T0-0`
//! and a delivery `TIME` is `T0`. No-op writes (a ZADD of an existing member with its score, a ZREM
//! of a missing member, an approximate trim that removed nothing, a read of
//! a group's history) leave nothing.

mod effects_common;

use effects_common::{Pair, T0};

#[test]
fn sorted_set_writes_leave_their_changes_and_pops_become_zpop() {
    let mut pair = Pair::start();
    let mut c = pair.client();
    c.run_all(&[
        "ZADD z 1 a 2 b",
        "ZADD z 1 a",
        "ZADD z CH INCR 5 a",
        "ZINCRBY z 1 b",
        "ZADD z XX GT 0 a",
        "ZREM z nope",
        "ZREMRANGEBYSCORE z 100 200",
        "ZMPOP 1 z MIN COUNT 5",
        "ZADD z 1 a 2 b 3 c",
        "BZPOPMIN z 0",
        "BZMPOP 0 1 z MAX COUNT 9",
        "ZADD src 1 a 2 b",
        "ZUNIONSTORE dst 1 src",
        "ZINTERSTORE dst 2 src nope",
        "ZINTERSTORE dst 2 src nope",
        "ZRANGESTORE d2 src 0 0",
        "ZPOPMAX src 0",
        "ZPOPMAX nope",
    ]);
    assert_eq!(
        pair.take(),
        [
            "SELECT 0",
            "ZADD z 1 a 2 b",
            "ZADD z CH INCR 5 a",
            "ZINCRBY z 1 b",
            "ZPOPMIN z 2",
            "ZADD z 1 a 2 b 3 c",
            "ZPOPMIN z",
            "ZPOPMAX z 2",
            "ZADD src 1 a 2 b",
            "ZUNIONSTORE dst 1 src",
            "ZINTERSTORE dst 2 src nope",
            "ZRANGESTORE d2 src 0 0",
        ]
    );
}

#[test]
fn a_blocked_pop_served_later_leaves_the_plain_pop_after_the_push() {
    let mut pair = Pair::start();
    let mut c = pair.client();
    let mut one = pair.block(0, "BZPOPMAX q 0");
    let mut many = pair.block(0, "BZMPOP 0 1 q2 MIN COUNT 3");
    c.run_all(&["ZADD q 1 x 2 y", "ZADD q2 1 x 2 y"]);
    one.served();
    many.served();
    assert_eq!(
        pair.take(),
        [
            "SELECT 0",
            "ZADD q 1 x 2 y",
            "ZPOPMAX q",
            "ZADD q2 1 x 2 y",
            "ZPOPMIN q2 2"
        ]
    );
}

#[test]
fn xadd_names_its_id_and_an_approximate_trim_names_where_it_stopped() {
    let mut pair = Pair::start();
    let mut c = pair.client();
    c.run_all(&[
        "XADD s MAXLEN ~ 5 1-1 f v",
        "XADD s 5-* f v",
        "XADD s MINID ~ 0 LIMIT 10 7 f v",
        "XADD s MAXLEN 100 8-1 f v",
    ]);
    // A generated ID is each server's clock's: the replies differ.
    c.run_any("XADD s * f v");
    c.run("CONFIG SET stream-node-max-entries 4");
    for i in 1..=10 {
        c.run(&format!("XADD u {i}-1 f {i}"));
    }
    c.run_all(&["XTRIM u MAXLEN ~ 2", "XTRIM u MAXLEN ~ 2"]);
    c.run_any("XADD u MAXLEN ~ 2 * f x");
    c.run_all(&[
        "XDEL u 9-1",
        "XTRIM u MINID ~ 10",
        "XTRIM u MINID ~ 99999999999999",
        "XDEL u 1-1",
        "XTRIM u MAXLEN 0",
    ]);
    let mut expected = vec![
        "SELECT 0".to_string(),
        "XADD s MAXLEN = 1 1-1 f v".into(),
        "XADD s 5-0 f v".into(),
        "XADD s MINID = 1-1 LIMIT 10 7 f v".into(),
        // An exact trim with an explicit ID is its own effect.
        "XADD s MAXLEN 100 8-1 f v".into(),
        format!("XADD s {T0}-0 f v"),
    ];
    expected.extend((1..=10).map(|i| format!("XADD u {i}-1 f {i}")));
    expected.extend([
        "XTRIM u MAXLEN = 2".to_string(),
        format!("XADD u MAXLEN = 3 {T0}-0 f x"),
        "XDEL u 9-1".into(),
        "XTRIM u MINID = 18446744073709551615-18446744073709551615".into(),
    ]);
    assert_eq!(pair.take(), expected);
}

#[test]
fn group_reads_and_claims_become_xclaim_and_xgroup_setid() {
    let mut pair = Pair::start();
    let mut c = pair.client();
    for i in 1..=4 {
        c.run(&format!("XADD s {i}-0 f {i}"));
    }
    c.run_all(&[
        "XGROUP CREATE s g 0",
        "XREADGROUP GROUP g c1 COUNT 2 STREAMS s >",
        "XREADGROUP GROUP g c2 NOACK COUNT 1 STREAMS s >",
        "XREADGROUP GROUP g c1 STREAMS s 0",
        "XCLAIM s g c3 0 1 LASTID 3-5",
        "XCLAIM s g c3 0 99 LASTID 4-5",
        "XCLAIM s g c3 0 99 LASTID 1-0",
        "XDEL s 2-0",
        "XCLAIM s g c3 0 2-0",
        "XAUTOCLAIM s g c4 0 0",
        "XGROUP SETID s g 0",
        "XGROUP CREATECONSUMER s g c9",
        "XGROUP CREATECONSUMER s g c9",
        "XGROUP DELCONSUMER s g c9",
        "XGROUP DELCONSUMER s g c9",
        "XACK s g 1-0 3-0",
        "XACK s g 1-0",
        "XSETID s 9-9",
        "XGROUP DESTROY s g",
        "XGROUP DESTROY s g",
        "XGROUP CREATE s g $",
    ]);
    let xclaim = |consumer: &str, id: &str, count: u64, last: &str| {
        format!("XCLAIM s g {consumer} 0 {id} TIME {T0} RETRYCOUNT {count} FORCE JUSTID LASTID {last}")
    };
    let mut expected: Vec<String> = vec!["SELECT 0".into()];
    expected.extend((1..=4).map(|i| format!("XADD s {i}-0 f {i}")));
    expected.extend([
        "XGROUP CREATE s g 0".to_string(),
        "MULTI".into(),
        xclaim("c1", "1-0", 1, "1-0"),
        xclaim("c1", "2-0", 1, "2-0"),
        "EXEC".into(),
        "MULTI".into(),
        "XGROUP CREATECONSUMER s g c2".into(),
        "XGROUP SETID s g 3-0 ENTRIESREAD 3".into(),
        "EXEC".into(),
        // The ID as the client gave it; the history read counted a delivery.
        xclaim("c3", "1", 3, "3-5"),
        "XGROUP SETID s g 4-5 ENTRIESREAD 3".into(),
        "XDEL s 2-0".into(),
        // An entry deleted from the stream leaves the PEL as it was held.
        xclaim("c1", "2-0", 2, "4-5"),
        xclaim("c4", "1-0", 4, "4-5"),
        "XGROUP SETID s g 0".into(),
        "XGROUP CREATECONSUMER s g c9".into(),
        "XGROUP DELCONSUMER s g c9".into(),
        "XACK s g 1-0 3-0".into(),
        "XSETID s 9-9".into(),
        "XGROUP DESTROY s g".into(),
        "XGROUP CREATE s g $".into(),
    ]);
    assert_eq!(pair.take(), expected);
}

#[test]
fn a_blocked_group_read_served_later_leaves_its_claims() {
    let mut pair = Pair::start();
    let mut c = pair.client();
    c.run_all(&["XADD s 1-0 f v", "XGROUP CREATE s g $"]);
    let mut acked = pair.block(0, "XREADGROUP GROUP g c5 BLOCK 0 STREAMS s >");
    c.run("XADD s 20-1 a b");
    acked.served();
    let mut noack = pair.block(0, "XREADGROUP GROUP g c6 NOACK BLOCK 0 STREAMS s >");
    c.run("XADD s 20-2 a b");
    noack.served();
    assert_eq!(
        pair.take(),
        [
            "SELECT 0".to_string(),
            "XADD s 1-0 f v".into(),
            "XGROUP CREATE s g $".into(),
            "XADD s 20-1 a b".into(),
            format!("XCLAIM s g c5 0 20-1 TIME {T0} RETRYCOUNT 1 FORCE JUSTID LASTID 20-1"),
            "XADD s 20-2 a b".into(),
            "MULTI".into(),
            "XGROUP CREATECONSUMER s g c6".into(),
            "XGROUP SETID s g 20-2 ENTRIESREAD 3".into(),
            "EXEC".into(),
        ]
    );
}
