//! The effects feed (`ServerControl::effects`): what every write leaves for
//! a replica or the append-only file, encoded as Redis 7.0.15's replication
//! stream carries it. The shapes asserted here are those a real Redis sends
//! its replicas for the same commands (captured with
//! `coordis::testing::ReplicationCapture`; the `effects_<family>.rs` tests
//! compare the two streams family by family).

use std::time::Duration;

use coordis::testing::RawClient;

/// A fixed start for the frozen test clock, so deadlines are exact.
const T0: u64 = 1_900_000_000_000;

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
/// replicas for the same workload (deadlines normalised): SELECT placement,
/// MULTI/EXEC around a transaction's and a script's effects, no effect for
/// reads and no-ops, PUBLISH and FUNCTION forced or counted, FLUSHDB.
#[test]
fn the_feed_carries_what_redis_sends_its_replicas() {
    use coordis::testing::{normalize_times, parse_commands, show_command, RedisServer, ReplicationCapture};
    let Some(redis) = RedisServer::start(&[]).unwrap() else {
        return;
    };
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
    let run_all = |addr| {
        let mut c = RawClient::connect(addr).unwrap();
        for args in workload {
            c.command(args).unwrap();
        }
    };
    let now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64
    };
    let mut capture = ReplicationCapture::start(redis.addr()).unwrap();
    let around = now();
    run_all(redis.addr());
    let theirs = normalize_times(&capture.take().unwrap(), around + 100_000, 5_000);

    let server = coordis::Server::builder().start_blocking().unwrap();
    let mut feed = server.control().effects();
    let around = now();
    run_all(server.addr());
    let ours = normalize_times(&parse_commands(&feed.try_bytes()), around + 100_000, 5_000);
    let show = |cmds: &[Vec<Vec<u8>>]| cmds.iter().map(|c| show_command(c)).collect::<Vec<_>>();
    assert_eq!(
        show(&ours),
        show(&theirs),
        "coordis's feed (left) and Redis's stream (right)"
    );
}
