//! The execution core, compared with Redis 7.0.15 where Redis can do it:
//! admission's order and callers (protected commands from the table, a
//! read-only script under CLIENT PAUSE WRITE, a RESP3 subscriber with its
//! replies off, commands Redis flags may-replicate under CLIENT PAUSE
//! WRITE), the bookkeeping every caller gets from the one `call()` (a
//! script's commands in commandstats and the slow log, every error counted
//! once), and the latency events of the work around commands (active
//! expiry, eviction).

use std::net::SocketAddr;
use std::time::Duration;

use coordis::testing::{RawClient, RedisServer};

fn run(c: &mut RawClient, args: &[&str]) -> String {
    String::from_utf8(c.command(args).unwrap()).unwrap()
}

/// What `c` receives within `wait` after sending `args`, or `None`.
fn answer_within(c: &mut RawClient, args: &[&str], wait: Duration) -> Option<String> {
    let raw: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    c.send(&RawClient::encode(&raw)).unwrap();
    c.set_read_timeout(Some(wait)).unwrap();
    let reply = c.read_reply().ok().map(|r| String::from_utf8(r).unwrap());
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    reply
}

/// The lines of INFO `section` whose field starts with one of `prefixes`,
/// with `usec` figures (timings) dropped.
fn info_lines(c: &mut RawClient, section: &str, prefixes: &[&str]) -> Vec<String> {
    let info = run(c, &["INFO", section]);
    info.lines()
        .filter(|l| prefixes.iter().any(|p| l.starts_with(p)))
        .map(|l| {
            l.split(',')
                .filter(|f| !f.contains("usec"))
                .collect::<Vec<_>>()
                .join(",")
        })
        .collect()
}

/// Runs `check` on a Redis 7.0.15 and on coordis (each fresh), and the two
/// must give the same answer.
fn same_on_both<T: PartialEq + std::fmt::Debug>(redis_args: &[&str], check: impl Fn(SocketAddr) -> T) {
    let Some(redis) = RedisServer::start(redis_args).unwrap() else {
        return;
    };
    let coordis = coordis::Server::builder().start_blocking().unwrap();
    assert_eq!(
        check(coordis.addr()),
        check(redis.addr()),
        "coordis (left) and Redis (right)"
    );
}

#[test]
fn a_script_flagged_no_writes_runs_under_client_pause_write_as_in_redis() {
    same_on_both(&[], |addr| {
        let mut admin = RawClient::connect(addr).unwrap();
        let mut c = RawClient::connect(addr).unwrap();
        run(
            &mut admin,
            &["FUNCTION", "LOAD", "#!lua name=lib\nredis.register_function{function_name='ro', callback=function() return 1 end, flags={'no-writes'}}\nredis.register_function('rw', function() return 2 end)"],
        );
        let sha = run(&mut admin, &["SCRIPT", "LOAD", "#!lua flags=no-writes\nreturn 3"]);
        let sha = sha.lines().nth(1).unwrap().to_string();
        run(&mut admin, &["CLIENT", "PAUSE", "60000", "WRITE"]);
        let wait = Duration::from_millis(300);
        let mut seen = vec![];
        for args in [
            &["EVAL", "#!lua flags=no-writes\nreturn 4", "0"][..],
            &["EVALSHA", &sha, "0"],
            &["FCALL", "ro", "0"],
            &["FCALL_RO", "ro", "0"],
            &["EVAL_RO", "return 5", "0"],
        ] {
            seen.push(answer_within(&mut c, args, wait));
        }
        // A script or function that may write is held until the pause ends.
        let mut held = RawClient::connect(addr).unwrap();
        seen.push(answer_within(&mut held, &["FCALL", "rw", "0"], wait));
        let mut held2 = RawClient::connect(addr).unwrap();
        seen.push(answer_within(&mut held2, &["EVAL", "return 6", "0"], wait));
        run(&mut admin, &["CLIENT", "UNPAUSE"]);
        seen.push(held.read_reply().ok().map(|r| String::from_utf8(r).unwrap()));
        seen
    });
}

#[test]
fn client_pause_write_holds_the_commands_that_may_replicate_as_in_redis() {
    // PUBLISH, SPUBLISH and PFCOUNT are not writes, but Redis flags them
    // may-replicate (a hidden flag: COMMAND INFO does not show it), and
    // CLIENT PAUSE WRITE holds them until the pause ends.
    same_on_both(&[], |addr| {
        let mut admin = RawClient::connect(addr).unwrap();
        run(&mut admin, &["PFADD", "hll", "a"]);
        run(&mut admin, &["CLIENT", "PAUSE", "60000", "WRITE"]);
        let wait = Duration::from_millis(300);
        let mut held = vec![];
        let mut seen = vec![];
        for args in [
            &["PUBLISH", "ch", "m"][..],
            &["SPUBLISH", "ch", "m"],
            &["PFCOUNT", "hll"],
            &["EXISTS", "hll"],
            &["PUBSUB", "NUMSUB", "ch"],
        ] {
            let mut c = RawClient::connect(addr).unwrap();
            seen.push(answer_within(&mut c, args, wait));
            held.push(c);
        }
        let info = run(&mut admin, &["INFO", "clients"]);
        seen.push(
            info.lines()
                .find(|l| l.starts_with("blocked_clients:"))
                .map(String::from),
        );
        run(&mut admin, &["CLIENT", "UNPAUSE"]);
        for c in held.iter_mut().take(3) {
            seen.push(c.read_reply().ok().map(|r| String::from_utf8(r).unwrap()));
        }
        seen
    });
}

/// Sets `n` keys `key:1..=n` to a small value, with `extra` options
/// (a TTL): deleting many keys at once is milliseconds of work.
fn many_keys(c: &mut RawClient, n: usize, extra: &str) {
    let script = format!("for i = 1, tonumber(ARGV[1]) do redis.call('SET', 'key:' .. i, 'v'{extra}) end");
    run(c, &["EVAL", &script, "0", &n.to_string()]);
}

/// The events LATENCY LATEST lists, by name.
fn latency_events(c: &mut RawClient) -> Vec<String> {
    let latest = run(c, &["LATENCY", "LATEST"]);
    let lines: Vec<&str> = latest.split("\r\n").collect();
    let mut names: Vec<String> = lines
        .windows(2)
        .filter(|w| {
            w[0].starts_with('$') && !w[1].is_empty() && w[1].chars().all(|ch| ch.is_ascii_lowercase() || ch == '-')
        })
        .map(|w| w[1].to_string())
        .collect();
    names.sort();
    names
}

#[test]
fn a_long_eviction_is_an_eviction_cycle_latency_event_as_in_redis() {
    same_on_both(&[], |addr| {
        let mut c = RawClient::connect(addr).unwrap();
        run(&mut c, &["CONFIG", "SET", "latency-monitor-threshold", "1"]);
        many_keys(&mut c, 200_000, "");
        let info = run(&mut c, &["INFO", "memory"]);
        let used: u64 = info
            .lines()
            .find_map(|l| l.strip_prefix("used_memory:"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        run(&mut c, &["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"]);
        run(&mut c, &["CONFIG", "SET", "maxmemory", &(used / 2).to_string()]);
        let set = run(&mut c, &["SET", "small", "v"]);
        run(&mut c, &["CONFIG", "SET", "maxmemory", "0"]);
        // The cycle's event: coordis evicts within CONFIG SET (its time is
        // the command's), Redis 7.0.15 on a timer right after it; one small
        // key's deletion (eviction-del) takes less than a millisecond.
        let mut events = latency_events(&mut c);
        events.retain(|e| e == "eviction-cycle");
        let evicted = run(&mut c, &["INFO", "stats"])
            .lines()
            .any(|l| l.starts_with("evicted_keys:") && l != "evicted_keys:0");
        (set, evicted, events)
    });
}

#[test]
fn a_long_active_expiry_cycle_is_a_latency_event_as_in_redis() {
    same_on_both(&[], |addr| {
        let mut c = RawClient::connect(addr).unwrap();
        run(&mut c, &["CONFIG", "SET", "latency-monitor-threshold", "1"]);
        let before = run(&mut c, &["LATENCY", "LATEST"]).contains("expire-cycle");
        many_keys(&mut c, 200_000, ", 'PX', 1");
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while run(&mut c, &["DBSIZE"]) != ":0\r\n" {
            assert!(std::time::Instant::now() < deadline, "the key never expired");
            std::thread::sleep(Duration::from_millis(20));
        }
        (before, run(&mut c, &["LATENCY", "LATEST"]).contains("expire-cycle"))
    });
}

#[test]
fn a_read_only_script_refuses_the_commands_that_may_replicate_as_redis_does() {
    same_on_both(&[], |addr| {
        let mut c = RawClient::connect(addr).unwrap();
        run(
            &mut c,
            &["FUNCTION", "LOAD", "#!lua name=lib\nredis.register_function{function_name='ro', callback=function() return redis.call('publish', 'ch', 'm') end, flags={'no-writes'}}"],
        );
        [
            &["EVAL_RO", "return redis.call('pfcount', 'h')", "0"][..],
            &["EVAL_RO", "return redis.call('publish', 'ch', 'm')", "0"],
            &["EVAL_RO", "return redis.call('spublish', 'ch', 'm')", "0"],
            &[
                "EVAL",
                "#!lua flags=no-writes\nreturn redis.call('publish', 'ch', 'm')",
                "0",
            ],
            &["FCALL_RO", "ro", "0"],
            &["FCALL", "ro", "0"],
            &["EVAL", "return redis.call('publish', 'ch', 'm')", "0"],
            &["EVAL", "return redis.call('pfcount', 'h')", "0"],
        ]
        .map(|args| run(&mut c, args))
    });
}

#[test]
fn a_resp3_subscriber_with_replies_off_still_gets_its_confirmations() {
    same_on_both(&[], |addr| {
        let mut c = RawClient::connect(addr).unwrap();
        run(&mut c, &["HELLO", "3"]);
        let off = answer_within(&mut c, &["CLIENT", "REPLY", "OFF"], Duration::from_millis(100));
        let sub = answer_within(&mut c, &["SUBSCRIBE", "a", "b"], Duration::from_secs(2));
        let ping = answer_within(&mut c, &["PING"], Duration::from_millis(100));
        (off, sub, ping)
    });
}

#[test]
fn test_commands_are_refused_from_the_table_when_disabled_as_debug_is() {
    // Redis: DEBUG with enable-debug-command no, refused before MULTI queues it.
    let Some(redis) = RedisServer::start(&["--enable-debug-command", "no"]).unwrap() else {
        return;
    };
    let mut r = RawClient::connect(redis.addr()).unwrap();
    let debug = run(&mut r, &["DEBUG", "HELP"]);
    assert!(debug.starts_with("-ERR DEBUG command not allowed."), "{debug}");
    run(&mut r, &["MULTI"]);
    assert!(run(&mut r, &["DEBUG", "HELP"]).starts_with("-ERR DEBUG command not allowed."));
    assert_eq!(
        run(&mut r, &["EXEC"]),
        "-EXECABORT Transaction discarded because of previous errors.\r\n"
    );

    let mut builder = coordis::Server::builder();
    builder.config_mut().enable_test_commands = "no".into();
    let coordis = builder.start_blocking().unwrap();
    let mut c = RawClient::connect(coordis.addr()).unwrap();
    // Every container of the family, as the command table lists it: a
    // container added later is covered without touching this test.
    let listed = run(&mut c, &["COMMAND", "LIST", "FILTERBY", "PATTERN", "coordis.*"]);
    let mut containers: Vec<String> = listed
        .split("\r\n")
        .filter(|line| line.starts_with("coordis.") && !line.contains('|'))
        .map(str::to_uppercase)
        .collect();
    containers.sort();
    for expected in [
        "COORDIS.CLOCK",
        "COORDIS.CLUSTER",
        "COORDIS.FAULT",
        "COORDIS.MEMORY",
        "COORDIS.REPLICATION",
        "COORDIS.SERVER",
    ] {
        assert!(
            containers.iter().any(|c| c == expected),
            "{expected} not in {containers:?}"
        );
    }
    let mut requests: Vec<Vec<&str>> = containers.iter().map(|c| vec![c.as_str(), "HELP"]).collect();
    requests.push(vec!["COORDIS.CLOCK", "GET"]);
    requests.push(vec!["COORDIS.FAULT", "LIST"]);
    requests.push(vec!["COORDIS.MEMORY", "USED"]);
    requests.push(vec!["COORDIS.REPLICATION", "LINKS"]);
    for args in &requests {
        let reply = run(&mut c, args);
        assert!(
            reply.starts_with(&format!("-ERR {} command not allowed.", args[0])),
            "{args:?}: {reply}"
        );
    }
    run(&mut c, &["MULTI"]);
    assert!(run(&mut c, &["COORDIS.CLOCK", "GET"]).starts_with("-ERR COORDIS.CLOCK command not allowed."));
    assert_eq!(
        run(&mut c, &["EXEC"]),
        "-EXECABORT Transaction discarded because of previous errors.\r\n"
    );
    // An unknown subcommand and a wrong arity are still answered first, as for DEBUG.
    assert!(run(&mut c, &["COORDIS.CLOCK"]).starts_with("-ERR wrong number of arguments"));
}

#[test]
fn a_scripts_commands_are_counted_and_every_error_once_as_in_redis() {
    same_on_both(&[], |addr| {
        let mut c = RawClient::connect(addr).unwrap();
        run(&mut c, &["CONFIG", "SET", "slowlog-log-slower-than", "0"]);
        run(&mut c, &["SET", "s", "a"]);
        run(
            &mut c,
            &[
                "EVAL",
                "redis.call('set', 'k', 'v'); return redis.call('get', 'k')",
                "0",
            ],
        );
        run(&mut c, &["EVAL", "return redis.call('incr', 's')", "0"]);
        run(&mut c, &["EVAL", "return redis.pcall('incr', 's')", "0"]);
        run(&mut c, &["EVAL", "redis.pcall('incr', 's'); return 1", "0"]);
        run(&mut c, &["EVAL", "return redis.error_reply('MY bad')", "0"]);
        run(&mut c, &["EVAL", "return redis.call('nosuch')", "0"]);
        run(&mut c, &["EVAL", "return redis.call('get')", "0"]);
        run(&mut c, &["MULTI"]);
        run(&mut c, &["INCR", "s"]);
        run(&mut c, &["SET", "t", "1"]);
        run(&mut c, &["EXEC"]);
        run(&mut c, &["NOSUCH"]);
        let mut lines = info_lines(
            &mut c,
            "commandstats",
            &["cmdstat_set", "cmdstat_get", "cmdstat_incr", "cmdstat_eval"],
        );
        // Redis lists commands in its dictionary's order.
        lines.sort();
        lines.extend(info_lines(&mut c, "errorstats", &["errorstat_"]));
        lines.extend(info_lines(&mut c, "stats", &["total_error_replies"]));
        // The slow log shows the script's own commands.
        let slow = run(&mut c, &["SLOWLOG", "GET", "100"]);
        let logged_set = slow.contains("$3\r\nset\r\n$1\r\nk\r\n");
        (lines, logged_set)
    });
}

#[test]
fn the_dirty_counter_counts_changes_as_redis_does() {
    same_on_both(&[], |addr| {
        let mut c = RawClient::connect(addr).unwrap();
        let mut seen = vec![];
        for args in [
            &["SET", "a", "1"][..],
            &["SET", "a", "1", "NX"],
            &["GET", "a"],
            &["MULTI"],
            &["SET", "b", "2"],
            &["SET", "c", "3"],
            &["EXEC"],
            &["EVAL", "redis.call('set', 'd', '4'); redis.call('set', 'e', '5')", "0"],
        ] {
            run(&mut c, args);
            seen.push(coordis::testing::conformance::dirty(&mut c));
        }
        seen
    });
}

#[test]
fn settling_the_clock_honours_active_expiry_off_from_inside_a_command() {
    let mut builder = coordis::Server::builder();
    builder.config_mut().enable_debug_command = "local".into();
    let server = builder.start_blocking().unwrap();
    let mut c = RawClient::connect(server.addr()).unwrap();
    run(&mut c, &["COORDIS.CLOCK", "FREEZE"]);
    run(&mut c, &["SET", "k", "v", "PX", "100"]);
    assert_eq!(run(&mut c, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]), "+OK\r\n");
    run(&mut c, &["COORDIS.CLOCK", "ADVANCE", "1000"]);
    // Not removed by the settle (active expiry is off): still counted by DBSIZE.
    assert_eq!(run(&mut c, &["DBSIZE"]), ":1\r\n");
    assert_eq!(run(&mut c, &["GET", "k"]), "$-1\r\n");
    assert_eq!(run(&mut c, &["DBSIZE"]), ":0\r\n");
}

/// FUNCTION STATS while a function is busy answers at once with the running
/// function (Redis flags it `allow_busy`); while a script is busy it is
/// refused `-BUSY`. Compared with Redis, the duration masked.
#[test]
fn function_stats_answers_at_once_while_busy_as_in_redis() {
    let Some(redis) = RedisServer::start(&["--busy-reply-threshold", "50"]).unwrap() else {
        return;
    };
    let mut builder = coordis::Server::builder();
    builder.config_mut().busy_reply_threshold = 50;
    let coordis = builder.start_blocking().unwrap();
    let check = |addr: SocketAddr| {
        let mut admin = RawClient::connect(addr).unwrap();
        run(
            &mut admin,
            &["FUNCTION", "LOAD", "#!lua name=spin\nredis.register_function('spin', function() local t = redis.call('time')[1] + 0; while redis.call('time')[1] + 0 < t + 2 do end return 1 end)"],
        );
        let mut seen = vec![];
        for (busy, stats_of) in [
            (&["FCALL", "spin", "0"][..], "function"),
            (
                &[
                    "EVAL",
                    "local t = redis.call('time')[1] + 0; while redis.call('time')[1] + 0 < t + 2 do end return 1",
                    "0",
                ],
                "script",
            ),
        ] {
            let mut runner = RawClient::connect(addr).unwrap();
            let raw: Vec<&[u8]> = busy.iter().map(|a| a.as_bytes()).collect();
            runner.send(&RawClient::encode(&raw)).unwrap();
            std::thread::sleep(Duration::from_millis(300));
            let started = std::time::Instant::now();
            let stats = run(&mut admin, &["FUNCTION", "STATS"]);
            // The busy command runs for two seconds from its start; an
            // answer that waited for it would take about 1.7 s more.
            assert!(
                started.elapsed() < Duration::from_millis(1200),
                "FUNCTION STATS waited for the {stats_of}"
            );
            let masked: String = stats
                .split("\r\n")
                .map(|l| if l.starts_with(':') && l.len() > 2 { ":#" } else { l })
                .collect::<Vec<_>>()
                .join("\r\n");
            seen.push(masked);
            // The runner's own reply once its command ends.
            seen.push(String::from_utf8(runner.read_reply().unwrap()).unwrap());
        }
        seen
    };
    assert_eq!(
        check(coordis.addr()),
        check(redis.addr()),
        "coordis (left) and Redis (right)"
    );
}

/// INFO memory asked from inside a script reports the VM's memory, as
/// Redis does (the VM is in use then).
#[test]
fn info_from_inside_a_script_reports_the_vms_memory() {
    same_on_both(&[], |addr| {
        let mut c = RawClient::connect(addr).unwrap();
        let info = run(&mut c, &["EVAL", "return redis.call('info', 'memory')", "0"]);
        let lua: u64 = info
            .lines()
            .find_map(|l| l.strip_prefix("used_memory_lua:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        lua > 0
    });
}

/// While a script is busy, a protected command its setting refuses is
/// refused for that (not `-BUSY`): the busy answers go through the same
/// admission, in Redis's order.
#[test]
fn a_protected_command_is_refused_for_its_setting_while_busy_as_in_redis() {
    let Some(redis) = RedisServer::start(&["--busy-reply-threshold", "50", "--enable-debug-command", "no"]).unwrap()
    else {
        return;
    };
    let mut builder = coordis::Server::builder();
    builder.config_mut().busy_reply_threshold = 50;
    builder.config_mut().enable_debug_command = "no".into();
    let coordis = builder.start_blocking().unwrap();
    let check = |addr: SocketAddr| {
        let mut runner = RawClient::connect(addr).unwrap();
        let body = "local t = redis.call('time')[1] + 0; while redis.call('time')[1] + 0 < t + 2 do end return 1";
        runner
            .send(&RawClient::encode(&[b"EVAL", body.as_bytes(), b"0"]))
            .unwrap();
        std::thread::sleep(Duration::from_millis(300));
        let mut c = RawClient::connect(addr).unwrap();
        let replies = [run(&mut c, &["DEBUG", "HELP"]), run(&mut c, &["GET", "k"])];
        runner.read_reply().unwrap();
        replies.map(|r| r.split(". ").next().unwrap_or_default().to_string())
    };
    assert_eq!(
        check(coordis.addr()),
        check(redis.addr()),
        "coordis (left) and Redis (right)"
    );
}

/// Waits until `blocked` clients are blocked (a blocking command reaches
/// the server a moment after it was sent).
fn wait_blocked(admin: &mut RawClient, blocked: &str) {
    let start = std::time::Instant::now();
    while admin.info_field("clients", "blocked_clients") != blocked {
        assert!(start.elapsed() < Duration::from_secs(5), "no client blocked");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// What INFO and the slow log say of blocked commands: the counters of the
/// commands involved (times masked), which of them have a latency
/// histogram, the error counts, and the slow log's entries of those
/// commands, newest first, each with its client's name (the waiter's id
/// masked).
fn blocking_stats(admin: &mut RawClient, waiter_id: &str) -> Vec<String> {
    const COMMANDS: [&str; 5] = ["blpop", "lpush", "client|unblock", "xreadgroup", "del"];
    let cmdstats: Vec<String> = COMMANDS.iter().map(|c| format!("cmdstat_{c}:")).collect();
    let cmdstats: Vec<&str> = cmdstats.iter().map(String::as_str).collect();
    let mut seen = info_lines(admin, "commandstats", &cmdstats);
    seen.sort();
    let latency: Vec<String> = COMMANDS
        .iter()
        .map(|c| format!("latency_percentiles_usec_{c}:"))
        .collect();
    let latency: Vec<&str> = latency.iter().map(String::as_str).collect();
    let mut histograms: Vec<String> = run(admin, &["INFO", "latencystats"])
        .lines()
        .filter(|l| latency.iter().any(|p| l.starts_with(p)))
        .map(|l| l.split(':').next().unwrap_or_default().to_string())
        .collect();
    histograms.sort();
    seen.extend(histograms);
    seen.extend(info_lines(admin, "errorstats", &["errorstat_"]));
    seen.extend(info_lines(admin, "stats", &["total_error_replies"]));
    let raw = admin.command(&["SLOWLOG", "GET", "-1"]).unwrap();
    let (log, _) = coordis::testing::parse_resp(&raw).unwrap().unwrap();
    for entry in log.items() {
        let fields = entry.items();
        let args: Vec<String> = fields[3]
            .items()
            .iter()
            .map(|a| String::from_utf8_lossy(&a.bytes().unwrap()).to_lowercase())
            .map(|a| if a == waiter_id { "<id>".to_string() } else { a })
            .collect();
        let name = String::from_utf8_lossy(&fields[5].bytes().unwrap()).into_owned();
        let listed = match args.first().map(String::as_str) {
            None => true,
            Some("client") => args.get(1).is_some_and(|a| a == "unblock"),
            Some(first) => COMMANDS.contains(&first),
        };
        if listed {
            seen.push(format!("slowlog: [{}] by {name:?}", args.join(" ")));
        }
    }
    seen
}

/// A blocked command's statistics as Redis 7.0.15 keeps them
/// (`updateStatsOnUnblock`): its call and time are counted when it blocks;
/// its latency histogram and its slow-log entry wait until it is served
/// (logged after the command that served it); a timeout adds nothing;
/// CLIENT UNBLOCK, TIMEOUT or ERROR, counts it failed and logs it without
/// arguments, and ERROR counts an `UNBLOCKED` error and CLIENT UNBLOCK
/// itself as failed; a waiter served an error (its stream deleted) counts
/// the error and fails.
#[test]
fn a_blocked_commands_stats_are_counted_when_it_is_unblocked_as_in_redis() {
    same_on_both(&[], |addr| {
        let mut admin = RawClient::connect(addr).unwrap();
        let mut waiter = RawClient::connect(addr).unwrap();
        run(&mut waiter, &["CLIENT", "SETNAME", "waiter"]);
        let id = String::from_utf8(waiter.command(&["CLIENT", "ID"]).unwrap()).unwrap();
        let id = id.trim_start_matches(':').trim_end().to_string();
        run(&mut admin, &["CLIENT", "SETNAME", "admin"]);
        run(&mut admin, &["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]);
        run(&mut admin, &["CONFIG", "SET", "slowlog-log-slower-than", "0"]);
        run(&mut admin, &["CONFIG", "RESETSTAT"]);
        run(&mut admin, &["SLOWLOG", "RESET"]);
        let mut seen = vec![];
        let block = |waiter: &mut RawClient, admin: &mut RawClient, args: &[&[u8]]| {
            waiter.send(&RawClient::encode(args)).unwrap();
            wait_blocked(admin, "1");
        };

        block(&mut waiter, &mut admin, &[b"BLPOP", b"l", b"0"]);
        seen.push("-- blocked".to_string());
        seen.extend(blocking_stats(&mut admin, &id));
        run(&mut admin, &["LPUSH", "l", "a"]);
        seen.push(String::from_utf8(waiter.read_reply().unwrap()).unwrap());
        seen.push("-- served".to_string());
        seen.extend(blocking_stats(&mut admin, &id));

        seen.push(run(&mut waiter, &["BLPOP", "l", "0.05"]));
        seen.push("-- timed out".to_string());
        seen.extend(blocking_stats(&mut admin, &id));

        for reason in ["ERROR", "TIMEOUT"] {
            block(&mut waiter, &mut admin, &[b"BLPOP", b"l", b"0"]);
            seen.push(run(&mut admin, &["CLIENT", "UNBLOCK", &id, reason]));
            seen.push(String::from_utf8(waiter.read_reply().unwrap()).unwrap());
            seen.push(format!("-- unblocked, {reason}"));
            seen.extend(blocking_stats(&mut admin, &id));
        }

        block(
            &mut waiter,
            &mut admin,
            &[
                b"XREADGROUP",
                b"GROUP",
                b"g",
                b"c",
                b"BLOCK",
                b"0",
                b"STREAMS",
                b"s",
                b">",
            ],
        );
        run(&mut admin, &["DEL", "s"]);
        seen.push(String::from_utf8(waiter.read_reply().unwrap()).unwrap());
        seen.push("-- served an error".to_string());
        seen.extend(blocking_stats(&mut admin, &id));
        seen
    });
}

/// Requests that reach the server together are served in the order they
/// arrived, as Redis's event loop serves them. tokio's scheduler ran the
/// connection it woke last first, so about half the time the later of two
/// requests sent back to back on two connections ran first: a blocked
/// XREADGROUP whose stream another client deleted right after got
/// `-NOGROUP` (the stream was already gone when it ran) instead of Redis's
/// `-UNBLOCKED`.
#[test]
fn requests_arriving_together_are_served_in_the_order_they_arrived_as_in_redis() {
    const TRIALS: usize = 100;
    let check = |addr: SocketAddr| {
        let mut a = RawClient::connect(addr).unwrap();
        let mut b = RawClient::connect(addr).unwrap();
        let mut in_order = 0;
        for _ in 0..TRIALS {
            run(&mut b, &["DEL", "k"]);
            // The server goes back to waiting, so both requests are found
            // in one poll.
            std::thread::sleep(Duration::from_millis(2));
            a.send(&RawClient::encode(&[b"RPUSH", b"k", b"first"])).unwrap();
            b.send(&RawClient::encode(&[b"RPUSH", b"k", b"second"])).unwrap();
            a.read_reply().unwrap();
            b.read_reply().unwrap();
            if run(&mut b, &["LINDEX", "k", "0"]).contains("first") {
                in_order += 1;
            }
        }
        let mut unblocked = Vec::new();
        for _ in 0..10 {
            run(&mut b, &["DEL", "s"]);
            run(&mut b, &["XADD", "s", "1-1", "f", "v"]);
            run(&mut b, &["XGROUP", "CREATE", "s", "g", "$"]);
            std::thread::sleep(Duration::from_millis(2));
            a.send(&RawClient::encode(&[
                b"XREADGROUP",
                b"GROUP",
                b"g",
                b"alice",
                b"BLOCK",
                b"0",
                b"STREAMS",
                b"s",
                b">",
            ]))
            .unwrap();
            b.send(&RawClient::encode(&[b"DEL", b"s"])).unwrap();
            b.read_reply().unwrap();
            unblocked.push(String::from_utf8(a.read_reply().unwrap()).unwrap());
        }
        unblocked.dedup();
        (in_order, unblocked)
    };
    let coordis = coordis::Server::builder().start_blocking().unwrap();
    assert_eq!(
        check(coordis.addr()),
        (
            TRIALS,
            vec!["-UNBLOCKED the stream key no longer exists\r\n".to_string()]
        )
    );
    same_on_both(&[], check);
}
