//! The effects feed (`ServerControl::effects`): what every write leaves for
//! a replica or the append-only file, encoded as Redis 7.0.15's replication
//! stream carries it. The shapes asserted here are those a real Redis sends
//! its replicas for the same commands; the tests at the end (the core's
//! shapes, functions, scripts) compare the two streams live, as the
//! `effects_<family>.rs` tests do family by family (`effects_common::Pair`).

use std::time::Duration;

use coordis::testing::RawClient;

mod effects_common;

use effects_common::{at, Pair, T0};

/// A server on a frozen clock at [`T0`], a client, and a reader of its feed.
fn setup() -> (coordis::BlockingServer, RawClient, coordis::EffectReader) {
    let mut builder = coordis::Server::builder();
    builder.config_mut().enable_debug_command = "local".into();
    let server = builder.start_blocking().unwrap();
    let clock = server.clock().unwrap();
    clock.freeze();
    clock.set_ms(T0);
    let feed = server.control().effects();
    let client = RawClient::connect(server.addr()).unwrap();
    (server, client, feed)
}

fn run(c: &mut RawClient, args: &[&str]) -> String {
    String::from_utf8(c.command(args).unwrap()).unwrap()
}

#[test]
fn a_write_leaves_its_effect_after_a_select_and_a_read_leaves_none() {
    let (_server, mut c, mut feed) = setup();
    run(&mut c, &["SET", "k", "v"]);
    run(&mut c, &["GET", "k"]);
    run(&mut c, &["SET", "k", "w", "GET"]);
    assert_eq!(feed.try_lines(), ["SELECT 0", "SET k v", "SET k w"]);
}

#[test]
fn relative_expiry_becomes_an_absolute_deadline() {
    let (_server, mut c, mut feed) = setup();
    run(&mut c, &["SET", "lock", "me", "NX", "PX", "30000"]);
    run(&mut c, &["SET", "lock2", "me", "EX", "10", "GET"]);
    let pxat = |ms: u64| (T0 + ms).to_string();
    assert_eq!(
        feed.try_lines(),
        [
            "SELECT 0".to_string(),
            format!("SET lock me PXAT {}", pxat(30_000)),
            format!("SET lock2 me PXAT {}", pxat(10_000)),
        ]
    );
    // NX that did not set changes nothing: no effect.
    run(&mut c, &["SET", "lock", "other", "NX", "PX", "30000"]);
    assert!(feed.try_lines().is_empty());
}

#[test]
fn a_transaction_with_several_effects_is_wrapped_and_one_with_a_single_effect_is_not() {
    let (_server, mut c, mut feed) = setup();
    for args in [
        &["MULTI"][..],
        &["SET", "a", "1"],
        &["GET", "a"],
        &["SET", "b", "2"],
        &["EXEC"],
    ] {
        run(&mut c, args);
    }
    for args in [&["MULTI"][..], &["SET", "c", "3"], &["GET", "c"], &["EXEC"]] {
        run(&mut c, args);
    }
    assert_eq!(
        feed.try_lines(),
        ["SELECT 0", "MULTI", "SET a 1", "SET b 2", "EXEC", "SET c 3"]
    );
}

#[test]
fn a_script_leaves_the_effects_of_the_commands_it_ran_in_its_spelling() {
    let (_server, mut c, mut feed) = setup();
    let script = "redis.call('set', KEYS[1], ARGV[1]); redis.call('get', KEYS[1]); redis.call('set', KEYS[2], ARGV[1]); return 1";
    run(&mut c, &["EVAL", script, "2", "x", "y", "7"]);
    run(&mut c, &["EVAL", "return redis.call('get', KEYS[1])", "1", "x"]);
    assert_eq!(feed.try_lines(), ["SELECT 0", "MULTI", "set x 7", "set y 7", "EXEC"]);
}

#[test]
fn the_database_is_selected_when_it_changes() {
    let (_server, mut c, mut feed) = setup();
    run(&mut c, &["SET", "a", "1"]);
    run(&mut c, &["SELECT", "3"]);
    run(&mut c, &["SET", "b", "2"]);
    run(&mut c, &["SET", "c", "3"]);
    assert_eq!(
        feed.try_lines(),
        ["SELECT 0", "SET a 1", "SELECT 3", "SET b 2", "SET c 3"]
    );
}

#[test]
fn an_expired_key_leaves_a_del_lazily_and_actively() {
    let (server, mut c, mut feed) = setup();
    let clock = server.clock().unwrap();
    run(&mut c, &["SET", "lazy", "v", "PX", "100"]);
    run(&mut c, &["SET", "active", "v", "PX", "200"]);
    feed.try_lines();
    assert_eq!(run(&mut c, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]), "+OK\r\n");
    clock.advance(Duration::from_millis(150));
    // Not removed by the clock's move: active expiry is off.
    assert_eq!(run(&mut c, &["DBSIZE"]), ":2\r\n");
    assert!(feed.try_lines().is_empty());
    // Read after its deadline: DEL before the read (which leaves nothing).
    assert_eq!(run(&mut c, &["GET", "lazy"]), "$-1\r\n");
    assert_eq!(feed.try_lines(), ["DEL lazy"]);
    run(&mut c, &["DEBUG", "SET-ACTIVE-EXPIRE", "1"]);
    clock.advance(Duration::from_millis(100));
    assert_eq!(feed.try_lines(), ["DEL active"]);
}

#[test]
fn a_second_reader_starts_with_a_select_and_a_dropped_one_is_forgotten() {
    let (server, mut c, mut feed) = setup();
    run(&mut c, &["SELECT", "2"]);
    run(&mut c, &["SET", "a", "1"]);
    let mut late = server.control().effects();
    run(&mut c, &["SET", "b", "2"]);
    assert_eq!(feed.try_lines(), ["SELECT 2", "SET a 1", "SET b 2"]);
    assert_eq!(late.try_lines(), ["SELECT 2", "SET b 2"]);
    drop(late);
    drop(feed);
    // Nobody reads: the server goes on (nothing is recorded).
    assert_eq!(run(&mut c, &["SET", "c", "3"]), "+OK\r\n");
}

#[test]
fn a_reader_waits_for_the_next_batch() {
    let (server, _c, mut feed) = setup();
    let addr = server.addr();
    let writer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        let mut c = RawClient::connect(addr).unwrap();
        c.command(&["SET", "late", "1"]).unwrap();
    });
    let units = feed.units_timeout(Duration::from_secs(5));
    writer.join().unwrap();
    assert_eq!(units.len(), 1);
    assert_eq!(units[0].ops[0].args[0], "SET");
}

/// The core's shapes, compared with what a real Redis 7.0.15 sends its
/// replicas for the same workload (deadlines masked): SELECT placement,
/// MULTI/EXEC around a transaction's and a script's effects, no effect for
/// reads and no-ops, PUBLISH and FUNCTION forced or counted, FLUSHDB.
#[test]
fn the_feed_carries_what_redis_sends_its_replicas() {
    let mut pair = Pair::start();
    let mut c = pair.client();
    let workload: &[&[&str]] = &[
        &["SET", "a", "1"],
        &["SET", "a", "1", "NX"],
        &["SET", "k", "v", "EX", "100"],
        &["SELECT", "1"],
        &["SET", "one", "1"],
        &["FLUSHDB"],
        &["FLUSHDB"],
        &["SELECT", "0"],
        &["MULTI"],
        &["SET", "b", "2"],
        &["SET", "c", "3"],
        &["EXEC"],
        &["MULTI"],
        &["SET", "d", "4"],
        &["GET", "d"],
        &["EXEC"],
        &[
            "EVAL",
            "redis.call('set', KEYS[1], '1'); redis.call('set', KEYS[2], '2')",
            "2",
            "e",
            "f",
        ],
        &["EVAL", "return redis.call('get', KEYS[1])", "1", "e"],
        &["PUBLISH", "ch", "hi"],
        &[
            "FUNCTION",
            "LOAD",
            "#!lua name=lib\nredis.register_function('f', function() return 1 end)",
        ],
        &["FUNCTION", "DELETE", "lib"],
        &["FUNCTION", "DELETE", "lib"],
        &["GET", "a"],
    ];
    for args in workload {
        c.run_args(args);
    }
    assert_eq!(
        pair.take(),
        [
            "SELECT 0".to_string(),
            "SET a 1".into(),
            format!("SET k v PXAT {}", at(100_000)),
            "SELECT 1".into(),
            "SET one 1".into(),
            "FLUSHDB".into(),
            "FLUSHDB".into(),
            "SELECT 0".into(),
            "MULTI".into(),
            "SET b 2".into(),
            "SET c 3".into(),
            "EXEC".into(),
            "SET d 4".into(),
            "MULTI".into(),
            "set e 1".into(),
            "set f 2".into(),
            "EXEC".into(),
            "PUBLISH ch hi".into(),
            format!("FUNCTION LOAD {}", workload[19][2]),
            "FUNCTION DELETE lib".into(),
        ]
    );
}

/// A library for [`functions_leave_the_effects_of_what_they_ran`]: one
/// write, several (with rewrites), writes that change nothing, a read only
/// (`no-writes`, for FCALL_RO), a write and then an error, and writes in
/// two databases.
const LIBRARY: &str = "#!lua name=effects
redis.register_function('set1', function(keys, args)
    return redis.call('set', keys[1], args[1])
end)
redis.register_function('setmany', function(keys, args)
    for _, key in ipairs(keys) do
        redis.call('set', key, args[1])
    end
    redis.call('incrbyfloat', keys[1], '1.5')
    redis.call('expire', keys[1], 100)
    redis.call('get', keys[1])
    return #keys
end)
redis.register_function('noop', function(keys, args)
    redis.call('setnx', keys[1], 'other')
    redis.call('del', 'missing')
    return redis.call('get', keys[1])
end)
redis.register_function{function_name='peek', callback=function(keys, args)
    return redis.call('get', keys[1])
end, flags={'no-writes'}}
redis.register_function('then_fail', function(keys, args)
    redis.call('set', keys[1], args[1])
    return redis.call('lpush', keys[1], 'x')
end)
redis.register_function('elsewhere', function(keys, args)
    redis.call('set', keys[1], 'here')
    redis.call('select', 1)
    redis.call('set', keys[1], 'there')
    return 1
end)
";

#[test]
fn functions_leave_the_effects_of_what_they_ran() {
    let mut pair = Pair::start();
    let mut c = pair.client();
    assert_eq!(c.run_args(&["FUNCTION", "LOAD", LIBRARY]), "$7\r\neffects\r\n");
    assert_eq!(
        pair.take(),
        ["SELECT 0".to_string(), format!("FUNCTION LOAD {LIBRARY}")]
    );
    c.run_all(&["FCALL set1 1 a 1", "FCALL set1 1 a 1"]);
    assert_eq!(pair.take(), ["set a 1", "set a 1"]);
    assert_eq!(c.run("FCALL setmany 3 a b c 7"), ":3\r\n");
    assert_eq!(
        pair.take(),
        [
            "MULTI".to_string(),
            "set a 7".into(),
            "set b 7".into(),
            "set c 7".into(),
            "SET a 8.5 KEEPTTL".into(),
            format!("PEXPIREAT a {}", at(100_000)),
            "EXEC".into(),
        ]
    );
    c.run_all(&[
        "FCALL noop 1 a",
        "FCALL_RO peek 1 a",
        "FCALL peek 1 a",
        "FCALL_RO set1 1 a 2",
    ]);
    assert!(pair.take().is_empty(), "functions that changed nothing leave nothing");
    assert!(c.run("FCALL then_fail 1 t v").starts_with("-WRONGTYPE"));
    assert_eq!(pair.take(), ["set t v"], "a write before an error stays");
    c.run("FCALL elsewhere 1 w");
    // The caller's database is its own again after the function.
    c.run("SET after 1");
    assert_eq!(
        pair.take(),
        [
            "MULTI",
            "set w here",
            "SELECT 1",
            "set w there",
            "EXEC",
            "SELECT 0",
            "SET after 1"
        ]
    );
    // Inside a transaction: one MULTI/EXEC around everything.
    c.run_all(&["MULTI", "FCALL set1 1 m 1", "FCALL noop 1 m", "SET n 2", "EXEC"]);
    assert_eq!(pair.take(), ["MULTI", "set m 1", "SET n 2", "EXEC"]);
    c.run_all(&["FUNCTION DELETE effects", "FUNCTION DELETE effects", "FUNCTION FLUSH"]);
    assert_eq!(pair.take(), ["FUNCTION DELETE effects", "FUNCTION FLUSH"]);
}

#[test]
fn a_script_of_several_writes_leaves_them_wrapped_with_their_rewrites() {
    let mut pair = Pair::start();
    let mut c = pair.client();
    let script = "redis.call('set', KEYS[1], '1')
        redis.call('incrbyfloat', KEYS[1], '0.5')
        redis.call('rpush', KEYS[2], 'a', 'b')
        redis.call('lpop', KEYS[2])
        redis.call('hincrbyfloat', KEYS[3], 'f', '2.5')
        redis.call('pexpire', KEYS[2], 5000)
        redis.call('set', KEYS[1], 'x', 'EX', 100)
        redis.call('del', 'missing')
        return redis.call('getex', KEYS[1], 'PERSIST')";
    assert_eq!(c.run_args(&["EVAL", script, "3", "s", "l", "h"]), "$1\r\nx\r\n");
    assert_eq!(
        pair.take(),
        [
            "SELECT 0".to_string(),
            "MULTI".into(),
            "set s 1".into(),
            "SET s 1.5 KEEPTTL".into(),
            "rpush l a b".into(),
            "lpop l".into(),
            "HSET h f 2.5".into(),
            format!("PEXPIREAT l {}", at(5_000)),
            format!("SET s x PXAT {}", at(100_000)),
            "PERSIST s".into(),
            "EXEC".into(),
        ]
    );
    // One write: no MULTI/EXEC; none (a no-op write, a read): nothing.
    c.run_args(&["EVAL", "return redis.call('set', KEYS[1], 'y')", "1", "s"]);
    c.run_args(&["EVAL", "return redis.call('setnx', KEYS[1], 'z')", "1", "s"]);
    c.run_args(&["EVAL_RO", "return redis.call('get', KEYS[1])", "1", "s"]);
    assert_eq!(pair.take(), ["set s y"]);
    // A write, then an error the script raises: the write stays.
    let failing = "redis.call('set', KEYS[1], 'v'); redis.call('incr', KEYS[1])";
    assert!(c
        .run_args(&["EVAL", failing, "1", "s"])
        .starts_with("-ERR value is not an integer"));
    assert_eq!(pair.take(), ["set s v"]);
    // What a script runs while it asks for no replication is no effect;
    // for the append-only file only (off here, as on the Redis compared
    // with), none either, nor a MULTI/EXEC for the one effect left.
    let quiet = "redis.set_repl(redis.REPL_NONE)
        redis.call('set', KEYS[1], 'hidden')
        redis.set_repl(redis.REPL_ALL)
        redis.call('set', KEYS[2], 'shown')";
    c.run_args(&["EVAL", quiet, "2", "q1", "q2"]);
    assert_eq!(pair.take(), ["set q2 shown"]);
    let aof_only = "redis.set_repl(redis.REPL_AOF)
        redis.call('set', KEYS[1], 'aof')
        redis.set_repl(redis.REPL_REPLICA)
        redis.call('set', KEYS[2], 'replicas')";
    c.run_args(&["EVAL", aof_only, "2", "q1", "q2"]);
    assert_eq!(pair.take(), ["set q2 replicas"]);
    // The flags last only for the script that set them.
    c.run_args(&["EVAL", "redis.set_repl(redis.REPL_NONE)", "0"]);
    c.run_args(&["EVAL", "redis.call('set', KEYS[1], 'again')", "1", "q1"]);
    assert_eq!(pair.take(), ["set q1 again"]);
    // Redis's errors, and what is not a number meaning REPL_NONE.
    for bad in [
        "redis.set_repl()",
        "redis.set_repl(1, 2)",
        "redis.set_repl(7)",
        "redis.set_repl(-1)",
    ] {
        assert!(c.run_args(&["EVAL", bad, "0"]).starts_with("-ERR"), "{bad}");
    }
    let not_a_number = "redis.set_repl('x'); redis.call('set', KEYS[1], 'no')";
    c.run_args(&["EVAL", not_a_number, "1", "q1"]);
    assert!(pair.take().is_empty());
}

#[test]
fn a_function_may_keep_its_writes_from_replicas_too() {
    let mut pair = Pair::start();
    let mut c = pair.client();
    let library = "#!lua name=quiet
redis.register_function('quiet', function(keys, args)
    redis.set_repl(redis.REPL_NONE)
    redis.call('set', keys[1], 'hidden')
    redis.set_repl(redis.REPL_ALL)
    return redis.call('set', keys[2], 'shown')
end)";
    c.run_args(&["FUNCTION", "LOAD", library]);
    c.run("FCALL quiet 2 a b");
    assert_eq!(
        pair.take(),
        [
            "SELECT 0".to_string(),
            format!("FUNCTION LOAD {library}"),
            "set b shown".into()
        ]
    );
}
