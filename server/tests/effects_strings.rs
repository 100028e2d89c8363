//! The effects of the string and bitmap writes (`ServerControl::effects`),
//! compared with what a real Redis 7.0.15 sends its replicas for the same
//! commands.
//!
//! Each workload runs twice (`effects_common::check`): on an embedded
//! coordis on a frozen clock at `T0`, whose feed must be exactly the
//! expected stream (deadlines exact), and on a `redis-server` with a
//! replication capture attached, whose stream must equal coordis's once the
//! deadlines near each run's moment are masked. Without redis-server only
//! the first half runs (the expected streams were read from Redis's with
//! `redis-cli --replica`), unless `COORDIS_REQUIRE_REDIS=1`.
//!
//! What the rules come to: relative expiries are replayed as absolute
//! deadlines (`SET ... PXAT`, `PEXPIREAT`), GETSET as SET, GETDEL and a
//! GETEX whose deadline has passed as DEL (UNLINK under the lazy-free
//! directives), INCRBYFLOAT as `SET key result KEEPTTL`, and a write that
//! changed nothing (SETNX of an existing key, SETBIT to the same value,
//! BITFIELD writing what was there, SETRANGE of nothing, BITOP of nothing
//! over a missing key) leaves nothing.

mod effects_common;

use effects_common::{at, check};

#[test]
fn set_relatives_leave_set_or_nothing() {
    check(
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
        &[
            "SELECT 0".to_string(),
            "SETNX a 1".into(),
            format!("SET b v PXAT {}", at(100_000)),
            format!("SET c v PXAT {}", at(5_000)),
            "SET a 9".into(),
            "SET fresh 9".into(),
            "MSET m1 1 m2 2".into(),
            "MSETNX m3 3 m4 4".into(),
            "SET x y NX KEEPTTL".into(),
        ],
    );
}

#[test]
fn getdel_and_getex_become_del_pexpireat_or_persist() {
    check(
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
        &[
            "SELECT 0".to_string(),
            "SET g v".into(),
            format!("PEXPIREAT g {}", at(100_000)),
            "PERSIST g".into(),
            "PEXPIREAT g 99999999999000".into(),
            format!("PEXPIREAT g {}", at(250)),
            "DEL g".into(),
            "SET d v".into(),
            "DEL d".into(),
        ],
    );
}

#[test]
fn lazy_free_directives_turn_the_deletions_into_unlink() {
    check(
        &[
            "CONFIG SET lazyfree-lazy-user-del yes",
            "CONFIG SET lazyfree-lazy-expire yes",
            "SET u v",
            "GETDEL u",
            "SET u v",
            "GETEX u PXAT 1",
        ],
        &["SELECT 0", "SET u v", "UNLINK u", "SET u v", "UNLINK u"],
    );
}

#[test]
fn counters_leave_themselves_and_incrbyfloat_leaves_set_keepttl() {
    check(
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
        &[
            "SELECT 0",
            "INCR i",
            "DECR i",
            "INCRBY i 5",
            "DECRBY i 3",
            "SET s foo",
            "SET f 1.5 KEEPTTL",
            "SET j 5",
            "SET j 105 KEEPTTL",
        ],
    );
}

#[test]
fn append_counts_even_nothing_and_setrange_of_nothing_leaves_nothing() {
    check(
        &[
            r#"APPEND ap """#,
            "APPEND ap x",
            r#"SETRANGE sr 0 """#,
            "SETRANGE sr 2 ab",
            r#"SETRANGE sr 0 """#,
            "SETRANGE sr -1 ab",
        ],
        &["SELECT 0", "APPEND ap ", "APPEND ap x", "SETRANGE sr 2 ab"],
    );
}

#[test]
fn bit_writes_leave_an_effect_only_when_a_bit_changed_or_the_string_grew() {
    check(
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
        &[
            "SELECT 0",
            "SETBIT sb 3 1",
            "SETBIT sb 3 0",
            "SETBIT sb 20 0",
            "BITFIELD bf SET u8 0 0",
            "BITFIELD bf SET u8 0 5 INCRBY u8 0 0 GET u8 0",
            "BITFIELD bf OVERFLOW SAT INCRBY u8 0 300",
            "BITOP OR dst sb nosuch",
            "BITOP AND dst nosuch",
        ],
    );
}

#[test]
fn a_transaction_of_rewritten_string_writes_is_wrapped() {
    check(
        &[
            "MULTI",
            "SET q 1",
            "INCRBYFLOAT q 2.5",
            "GETEX q EX 5",
            "SETNX q 0",
            "EXEC",
        ],
        &[
            "SELECT 0".to_string(),
            "MULTI".into(),
            "SET q 1".into(),
            "SET q 3.5 KEEPTTL".into(),
            format!("PEXPIREAT q {}", at(5_000)),
            "EXEC".into(),
        ],
    );
}
