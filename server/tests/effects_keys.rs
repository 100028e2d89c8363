//! The effects of the generic keyspace commands (DEL, UNLINK, the EXPIRE
//! family, PERSIST, RENAME, RENAMENX, MOVE, COPY, SORT ... STORE, FLUSHDB,
//! FLUSHALL, SWAPDB, and the expired keys SCAN and RANDOMKEY delete), read
//! from the embedded server's feed (`ServerControl::effects`).
//!
//! The shapes asserted here are those a real Redis 7.0.15 sent its replica
//! for the same commands (read with `redis-cli --replica` against
//! `redis-server --save '' --appendonly no`): a write that changed something
//! leaves its own arguments as typed; relative and second-based deadlines
//! become `PEXPIREAT key <ms>` with the flags kept; a deadline already past
//! becomes `DEL key` (`UNLINK` under `lazyfree-lazy-expire yes`); FLUSHDB and
//! FLUSHALL leave their effect even on an empty dataset; SWAPDB of a
//! database with itself is still an effect; a no-op write, a read, TOUCH
//! and SELECT leave nothing; SCAN's and RANDOMKEY's expired keys leave one
//! `DEL` each, not wrapped in MULTI/EXEC.

use std::time::Duration;

use coordis::testing::RawClient;

/// A fixed start for the frozen test clock, so deadlines are exact.
const T0: u64 = 1_900_000_000_000;

/// A server on a frozen clock at [`T0`] with active expiry off (so keys
/// past their deadline stay until a command meets them), a client on
/// database 0, and a reader of its feed (its first SELECT read).
fn setup() -> (coordis::BlockingServer, RawClient, coordis::EffectReader) {
    let mut builder = coordis::Server::builder();
    builder.config_mut().enable_debug_command = "yes".into();
    let server = builder.start_blocking().unwrap();
    let clock = server.clock().unwrap();
    clock.freeze();
    clock.set_ms(T0);
    let mut client = RawClient::connect(server.addr()).unwrap();
    assert_eq!(run(&mut client, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]), "+OK\r\n");
    let mut feed = server.control().effects();
    // The stream's first SELECT goes out with a first effect, left behind.
    run(&mut client, &["SET", "setup", "1"]);
    run(&mut client, &["DEL", "setup"]);
    assert_eq!(feed.try_lines(), ["SELECT 0", "SET setup 1", "DEL setup"]);
    (server, client, feed)
}

fn run(c: &mut RawClient, args: &[&str]) -> String {
    String::from_utf8(c.command(args).unwrap()).unwrap()
}

fn run_all(c: &mut RawClient, lines: &[&[&str]]) {
    for args in lines {
        run(c, args);
    }
}

#[test]
fn del_and_unlink_leave_their_arguments_only_when_they_deleted_a_key() {
    let (server, mut c, mut feed) = setup();
    run_all(&mut c, &[&["SET", "a", "1"], &["SET", "b", "2"]]);
    feed.try_lines();
    assert_eq!(run(&mut c, &["DEL", "a", "nokey", "b"]), ":2\r\n");
    assert_eq!(run(&mut c, &["DEL", "a"]), ":0\r\n");
    run(&mut c, &["SET", "u", "1"]);
    assert_eq!(run(&mut c, &["UNLINK", "u", "nokey"]), ":1\r\n");
    assert_eq!(run(&mut c, &["UNLINK", "u"]), ":0\r\n");
    assert_eq!(feed.try_lines(), ["DEL a nokey b", "SET u 1", "UNLINK u nokey"]);
    // A key past its deadline is deleted by its expiry, not by DEL.
    run(&mut c, &["SET", "e", "1", "PX", "100"]);
    server.clock().unwrap().advance(Duration::from_millis(150));
    assert_eq!(run(&mut c, &["DEL", "e"]), ":0\r\n");
    assert_eq!(feed.try_lines(), [format!("SET e 1 PXAT {}", T0 + 100), "DEL e".into()]);
}

#[test]
fn the_expire_family_leaves_an_absolute_pexpireat_with_its_flags() {
    let (_server, mut c, mut feed) = setup();
    run(&mut c, &["SET", "k", "v"]);
    feed.try_lines();
    assert_eq!(run(&mut c, &["EXPIRE", "k", "100"]), ":1\r\n");
    assert_eq!(run(&mut c, &["EXPIRE", "k", "100", "NX"]), ":0\r\n");
    assert_eq!(run(&mut c, &["PEXPIRE", "k", "5000", "XX"]), ":1\r\n");
    assert_eq!(run(&mut c, &["EXPIRE", "k", "1", "GT"]), ":0\r\n");
    assert_eq!(run(&mut c, &["EXPIREAT", "k", "2000000000"]), ":1\r\n");
    assert_eq!(run(&mut c, &["pexpireat", "k", "2000000000123", "gt"]), ":1\r\n");
    assert_eq!(run(&mut c, &["EXPIRE", "nokey", "100"]), ":0\r\n");
    assert_eq!(
        feed.try_lines(),
        [
            format!("PEXPIREAT k {}", T0 + 100_000),
            format!("PEXPIREAT k {} XX", T0 + 5_000),
            "PEXPIREAT k 2000000000000".into(),
            // PEXPIREAT is its own effect, as typed.
            "pexpireat k 2000000000123 gt".into(),
        ]
    );
    assert_eq!(run(&mut c, &["PERSIST", "k"]), ":1\r\n");
    assert_eq!(run(&mut c, &["PERSIST", "k"]), ":0\r\n");
    assert_eq!(run(&mut c, &["PERSIST", "nokey"]), ":0\r\n");
    assert_eq!(feed.try_lines(), ["PERSIST k"]);
}

#[test]
fn a_deadline_already_past_leaves_a_del_or_an_unlink() {
    let (_server, mut c, mut feed) = setup();
    for past in [
        &["EXPIRE", "k", "-1"][..],
        &["PEXPIRE", "k", "0"],
        &["EXPIREAT", "k", "1"],
        &["PEXPIREAT", "k", "1", "NX"],
    ] {
        run(&mut c, &["SET", "k", "v"]);
        assert_eq!(run(&mut c, past), ":1\r\n", "{past:?}");
        assert_eq!(run(&mut c, &["EXISTS", "k"]), ":0\r\n");
    }
    assert_eq!(feed.try_lines(), ["SET k v", "DEL k"].repeat(4));
    run(&mut c, &["CONFIG", "SET", "lazyfree-lazy-expire", "yes"]);
    run(&mut c, &["SET", "k", "v"]);
    run(&mut c, &["EXPIRE", "k", "-1"]);
    assert_eq!(feed.try_lines(), ["SET k v", "UNLINK k"]);
}

#[test]
fn rename_move_and_copy_leave_their_arguments_unless_they_changed_nothing() {
    let (_server, mut c, mut feed) = setup();
    run_all(&mut c, &[&["SET", "k", "v"], &["SET", "other", "o"]]);
    feed.try_lines();
    for no_op in [
        &["RENAME", "k", "k"][..],
        &["RENAMENX", "k", "k"],
        &["RENAME", "nokey", "x"],
        &["RENAMENX", "k", "other"],
        &["MOVE", "nokey", "1"],
        &["COPY", "nokey", "x"],
        &["COPY", "k", "other"],
        &["TOUCH", "k", "nokey"],
        &["SELECT", "0"],
    ] {
        run(&mut c, no_op);
    }
    assert!(feed.try_lines().is_empty());
    run(&mut c, &["RENAME", "k", "k2"]);
    run(&mut c, &["RENAMENX", "k2", "k3"]);
    run(&mut c, &["COPY", "k3", "other", "REPLACE"]);
    run(&mut c, &["COPY", "k3", "c", "DB", "2"]);
    run(&mut c, &["MOVE", "k3", "1"]);
    run(&mut c, &["SELECT", "1"]);
    run(&mut c, &["MOVE", "k3", "0"]);
    assert_eq!(
        feed.try_lines(),
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
    let (_server, mut c, mut feed) = setup();
    run(&mut c, &["RPUSH", "l", "3", "1", "2"]);
    run(&mut c, &["SADD", "s", "b", "c", "a"]);
    feed.try_lines();
    run(&mut c, &["SORT", "l"]);
    run(&mut c, &["SORT_RO", "l"]);
    assert_eq!(run(&mut c, &["SORT", "l", "STORE", "d"]), ":3\r\n");
    assert_eq!(run(&mut c, &["SORT", "l", "LIMIT", "0", "0", "STORE", "d"]), ":0\r\n");
    assert_eq!(run(&mut c, &["SORT", "l", "LIMIT", "0", "0", "STORE", "d"]), ":0\r\n");
    // A set's own order differs between servers: BY a constant with STORE
    // stores it sorted, so the replayed command stores the same list.
    assert_eq!(run(&mut c, &["SORT", "s", "BY", "nosort", "STORE", "d"]), ":3\r\n");
    assert_eq!(
        run(&mut c, &["LRANGE", "d", "0", "-1"]),
        "*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n"
    );
    assert_eq!(
        feed.try_lines(),
        ["SORT l STORE d", "SORT l LIMIT 0 0 STORE d", "SORT s BY nosort STORE d",]
    );
}

#[test]
fn flushes_leave_their_effect_even_on_an_empty_dataset_and_swapdb_always() {
    let (_server, mut c, mut feed) = setup();
    run(&mut c, &["FLUSHDB"]);
    run(&mut c, &["FLUSHALL", "ASYNC"]);
    run(&mut c, &["FLUSHDB", "foo"]);
    run(&mut c, &["SELECT", "2"]);
    run(&mut c, &["SWAPDB", "0", "0"]);
    run(&mut c, &["SWAPDB", "0", "99"]);
    run(&mut c, &["SET", "a", "1"]);
    run(&mut c, &["SWAPDB", "2", "3"]);
    run(&mut c, &["FLUSHALL"]);
    assert_eq!(
        feed.try_lines(),
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
    let (server, mut c, mut feed) = setup();
    for key in ["a", "b", "m"] {
        run(&mut c, &["SET", key, "1", "PX", "100"]);
    }
    run(&mut c, &["SET", "live", "1"]);
    server.clock().unwrap().advance(Duration::from_millis(150));
    feed.try_lines();
    // MATCH keeps the keys it rejects, expired or not.
    assert_eq!(
        run(&mut c, &["SCAN", "0", "MATCH", "m", "COUNT", "100"]),
        "*2\r\n$1\r\n0\r\n*0\r\n"
    );
    assert_eq!(feed.try_lines(), ["DEL m"]);
    // TYPE rejects a key past its deadline only after deleting it.
    run(&mut c, &["SCAN", "0", "TYPE", "list", "COUNT", "100"]);
    let units = feed.try_units();
    assert_eq!(units.len(), 1, "{units:?}");
    assert!(units[0].unwrapped, "SCAN's DELs are not a transaction");
    let mut deleted: Vec<String> = units[0]
        .ops
        .iter()
        .map(|op| {
            assert_eq!(op.args[0], "DEL");
            String::from_utf8_lossy(&op.args[1]).into_owned()
        })
        .collect();
    deleted.sort();
    assert_eq!(deleted, ["a", "b"]);
    run(&mut c, &["SCAN", "0", "COUNT", "100"]);
    assert!(feed.try_units().is_empty());
    // RANDOMKEY deletes every expired key it draws until it finds a live one.
    run(&mut c, &["DEL", "live"]);
    for key in ["x", "y"] {
        run(&mut c, &["SET", key, "1", "PX", "100"]);
    }
    server.clock().unwrap().advance(Duration::from_millis(150));
    feed.try_lines();
    assert_eq!(run(&mut c, &["RANDOMKEY"]), "$-1\r\n");
    let units = feed.try_units();
    assert_eq!(units.len(), 1, "{units:?}");
    assert!(units[0].unwrapped);
    assert_eq!(units[0].ops.len(), 2);
}

#[test]
fn writes_in_a_transaction_are_wrapped_with_their_rewrites() {
    let (_server, mut c, mut feed) = setup();
    run(&mut c, &["SET", "h", "1"]);
    feed.try_lines();
    run_all(
        &mut c,
        &[
            &["MULTI"],
            &["EXPIRE", "h", "100"],
            &["PERSIST", "h"],
            &["DEL", "nokey"],
            &["MOVE", "h", "3"],
            &["EXEC"],
        ],
    );
    assert_eq!(
        feed.try_lines(),
        [
            "MULTI".to_string(),
            format!("PEXPIREAT h {}", T0 + 100_000),
            "PERSIST h".into(),
            "MOVE h 3".into(),
            "EXEC".into(),
        ]
    );
}
