//! The effects of the generic keyspace commands (DEL, UNLINK, the EXPIRE
//! family, PERSIST, RENAME, RENAMENX, MOVE, COPY, SORT ... STORE, FLUSHDB,
//! FLUSHALL, SWAPDB, and the expired keys SCAN and RANDOMKEY delete), read
//! from the embedded server's feed (`ServerControl::effects`) and compared,
//! checkpoint by checkpoint, with the replication stream of a real
//! redis-server running the same workload (`effects_common::Pair`;
//! deadlines near each run's moment masked, as coordis's clock is frozen).
//!
//! The literal shapes asserted here are those a real Redis 7.0.15 sends its
//! replicas for the same commands: a write that changed something
//! leaves its own arguments as typed; relative and second-based deadlines
//! become `PEXPIREAT key <ms>` with the flags kept; a deadline already past
//! becomes `DEL key` (`UNLINK` under `lazyfree-lazy-expire yes`); FLUSHDB and
//! FLUSHALL leave their effect even on an empty dataset; SWAPDB of a
//! database with itself is still an effect; a no-op write, a read, TOUCH
//! and SELECT leave nothing; SCAN's and RANDOMKEY's expired keys leave one
//! `DEL` each, not wrapped in MULTI/EXEC.

mod effects_common;

use effects_common::{at, Client, Pair};

/// Both servers ([`Pair`]: coordis on a frozen clock) with active expiry
/// off, so keys past their deadline stay until a command meets them, and a
/// client of each on database 0; the streams' first SELECT is left behind.
fn setup() -> (Pair, Client) {
    let mut pair = Pair::start();
    let mut client = pair.client();
    assert_eq!(client.run("DEBUG SET-ACTIVE-EXPIRE 0"), "+OK\r\n");
    client.run("SET setup 1");
    client.run("DEL setup");
    assert_eq!(pair.take(), ["SELECT 0", "SET setup 1", "DEL setup"]);
    (pair, client)
}

#[test]
fn del_and_unlink_leave_their_arguments_only_when_they_deleted_a_key() {
    let (mut pair, mut c) = setup();
    c.run_all(&["SET a 1", "SET b 2"]);
    pair.take();
    assert_eq!(c.run("DEL a nokey b"), ":2\r\n");
    assert_eq!(c.run("DEL a"), ":0\r\n");
    c.run("SET u 1");
    assert_eq!(c.run("UNLINK u nokey"), ":1\r\n");
    assert_eq!(c.run("UNLINK u"), ":0\r\n");
    assert_eq!(pair.take(), ["DEL a nokey b", "SET u 1", "UNLINK u nokey"]);
    // A key past its deadline is deleted by its expiry, not by DEL.
    c.run("SET e 1 PX 100");
    pair.advance(150);
    assert_eq!(c.run("DEL e"), ":0\r\n");
    assert_eq!(pair.take(), [format!("SET e 1 PXAT {}", at(100)), "DEL e".into()]);
}

#[test]
fn the_expire_family_leaves_an_absolute_pexpireat_with_its_flags() {
    let (mut pair, mut c) = setup();
    c.run("SET k v");
    pair.take();
    assert_eq!(c.run("EXPIRE k 100"), ":1\r\n");
    assert_eq!(c.run("EXPIRE k 100 NX"), ":0\r\n");
    assert_eq!(c.run("PEXPIRE k 5000 XX"), ":1\r\n");
    assert_eq!(c.run("EXPIRE k 1 GT"), ":0\r\n");
    assert_eq!(c.run("EXPIREAT k 2000000000"), ":1\r\n");
    assert_eq!(c.run("pexpireat k 2000000000123 gt"), ":1\r\n");
    assert_eq!(c.run("EXPIRE nokey 100"), ":0\r\n");
    assert_eq!(
        pair.take(),
        [
            format!("PEXPIREAT k {}", at(100_000)),
            format!("PEXPIREAT k {} XX", at(5_000)),
            "PEXPIREAT k 2000000000000".into(),
            // PEXPIREAT is its own effect, as typed.
            "pexpireat k 2000000000123 gt".into(),
        ]
    );
    assert_eq!(c.run("PERSIST k"), ":1\r\n");
    assert_eq!(c.run("PERSIST k"), ":0\r\n");
    assert_eq!(c.run("PERSIST nokey"), ":0\r\n");
    assert_eq!(pair.take(), ["PERSIST k"]);
}

#[test]
fn a_deadline_already_past_leaves_a_del_or_an_unlink() {
    let (mut pair, mut c) = setup();
    for past in ["EXPIRE k -1", "PEXPIRE k 0", "EXPIREAT k 1", "PEXPIREAT k 1 NX"] {
        c.run("SET k v");
        assert_eq!(c.run(past), ":1\r\n", "{past}");
        assert_eq!(c.run("EXISTS k"), ":0\r\n");
    }
    assert_eq!(pair.take(), ["SET k v", "DEL k"].repeat(4));
    c.run("CONFIG SET lazyfree-lazy-expire yes");
    c.run("SET k v");
    c.run("EXPIRE k -1");
    assert_eq!(pair.take(), ["SET k v", "UNLINK k"]);
}

#[test]
fn rename_move_and_copy_leave_their_arguments_unless_they_changed_nothing() {
    let (mut pair, mut c) = setup();
    c.run_all(&["SET k v", "SET other o"]);
    pair.take();
    c.run_all(&[
        "RENAME k k",
        "RENAMENX k k",
        "RENAME nokey x",
        "RENAMENX k other",
        "MOVE nokey 1",
        "COPY nokey x",
        "COPY k other",
        "TOUCH k nokey",
        "SELECT 0",
    ]);
    assert!(pair.take().is_empty());
    c.run("RENAME k k2");
    c.run("RENAMENX k2 k3");
    c.run("COPY k3 other REPLACE");
    c.run("COPY k3 c DB 2");
    c.run("MOVE k3 1");
    c.run("SELECT 1");
    c.run("MOVE k3 0");
    assert_eq!(
        pair.take(),
        [
            "RENAME k k2",
            "RENAMENX k2 k3",
            "COPY k3 other REPLACE",
            "COPY k3 c DB 2",
            "MOVE k3 1",
            "SELECT 1",
            "MOVE k3 0",
        ]
    );
}

#[test]
fn sort_store_leaves_its_arguments_when_it_stored_or_deleted() {
    let (mut pair, mut c) = setup();
    c.run("RPUSH l 3 1 2");
    c.run("SADD s b c a");
    pair.take();
    c.run("SORT l");
    c.run("SORT_RO l");
    assert_eq!(c.run("SORT l STORE d"), ":3\r\n");
    assert_eq!(c.run("SORT l LIMIT 0 0 STORE d"), ":0\r\n");
    assert_eq!(c.run("SORT l LIMIT 0 0 STORE d"), ":0\r\n");
    // A set's own order differs between servers: BY a constant with STORE
    // stores it sorted, so the replayed command stores the same list.
    assert_eq!(c.run("SORT s BY nosort STORE d"), ":3\r\n");
    assert_eq!(c.run("LRANGE d 0 -1"), "*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n");
    assert_eq!(
        pair.take(),
        ["SORT l STORE d", "SORT l LIMIT 0 0 STORE d", "SORT s BY nosort STORE d",]
    );
}

#[test]
fn flushes_leave_their_effect_even_on_an_empty_dataset_and_swapdb_always() {
    let (mut pair, mut c) = setup();
    c.run("FLUSHDB");
    c.run("FLUSHALL ASYNC");
    c.run("FLUSHDB foo");
    c.run("SELECT 2");
    c.run("SWAPDB 0 0");
    c.run("SWAPDB 0 99");
    c.run("SET a 1");
    c.run("SWAPDB 2 3");
    c.run("FLUSHALL");
    assert_eq!(
        pair.take(),
        [
            "FLUSHDB",
            "FLUSHALL ASYNC",
            "SELECT 2",
            "SWAPDB 0 0",
            "SET a 1",
            "SWAPDB 2 3",
            "FLUSHALL",
        ]
    );
}

#[test]
fn scan_and_randomkey_delete_expired_keys_with_unwrapped_dels() {
    let (mut pair, mut c) = setup();
    for key in ["a", "b", "m"] {
        c.run(&format!("SET {key} 1 PX 100"));
    }
    c.run("SET live 1");
    pair.advance(150);
    pair.take();
    // MATCH keeps the keys it rejects, expired or not.
    assert_eq!(c.run("SCAN 0 MATCH m COUNT 100"), "*2\r\n$1\r\n0\r\n*0\r\n");
    assert_eq!(pair.take(), ["DEL m"]);
    // TYPE rejects a key past its deadline only after deleting it.
    c.run("SCAN 0 TYPE list COUNT 100");
    // Each DEL a unit of its own (no MULTI/EXEC), in the order each
    // server's table gives the keys.
    let mut deleted = pair.take_unordered();
    deleted.sort();
    assert_eq!(deleted, ["DEL a", "DEL b"]);
    c.run("SCAN 0 COUNT 100");
    assert!(pair.take().is_empty());
    // RANDOMKEY deletes every expired key it draws until it finds a live one.
    c.run("DEL live");
    for key in ["x", "y"] {
        c.run(&format!("SET {key} 1 PX 100"));
    }
    pair.advance(150);
    pair.take();
    assert_eq!(c.run("RANDOMKEY"), "$-1\r\n");
    let mut deleted = pair.take_unordered();
    deleted.sort();
    assert_eq!(deleted, ["DEL x", "DEL y"]);
}

#[test]
fn writes_in_a_transaction_are_wrapped_with_their_rewrites() {
    let (mut pair, mut c) = setup();
    c.run("SET h 1");
    pair.take();
    c.run_all(&["MULTI", "EXPIRE h 100", "PERSIST h", "DEL nokey", "MOVE h 3", "EXEC"]);
    assert_eq!(
        pair.take(),
        [
            "MULTI".to_string(),
            format!("PEXPIREAT h {}", at(100_000)),
            "PERSIST h".into(),
            "MOVE h 3".into(),
            "EXEC".into(),
        ]
    );
}
