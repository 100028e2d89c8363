//! Directives that change what a client of Redis 7.0.15 sees, each against
//! real Redis doing the same: `latency-tracking` and
//! `latency-tracking-info-percentiles` (INFO `latencystats`),
//! `rdb-key-save-delay` (how long a save takes), `active-expire-effort`
//! (cycles a mass expiry takes), `shutdown-on-sigint` /
//! `shutdown-on-sigterm` (a signal's final save, a failed one keeping the
//! server running unless `force`), `dynamic-hz` (INFO's `hz` with many
//! clients).

use std::time::Duration;

use coordis::testing::{RawClient, RedisServer, ServerProcess, TempDir};

/// The body of a bulk-string reply (INFO's text).
fn bulk_text(reply: &[u8]) -> String {
    let text = String::from_utf8_lossy(reply).into_owned();
    assert!(text.starts_with('$'), "not a bulk string: {text:?}");
    let body = text.split_once("\r\n").map_or("", |(_, rest)| rest);
    body.strip_suffix("\r\n").unwrap_or(body).to_string()
}

/// INFO `latencystats` with every number after `=` masked, its lines sorted
/// (Redis lists commands in its table's hash order, coordis by name).
fn latencystats(c: &mut RawClient) -> Vec<String> {
    let text = bulk_text(&c.command(&["INFO", "latencystats"]).unwrap());
    let mut lines: Vec<String> = text
        .lines()
        .map(|line| {
            let mut masked = String::new();
            let mut in_number = false;
            for ch in line.chars() {
                if in_number && (ch.is_ascii_digit() || ch == '.') {
                    continue;
                }
                in_number = ch == '=';
                masked.push(ch);
                if in_number {
                    masked.push('N');
                }
            }
            masked
        })
        .collect();
    lines.sort();
    lines
}

/// Runs `commands` on both servers, each after CONFIG RESETSTAT, and
/// returns INFO `latencystats` of each, masked.
fn latency_after(ours: &mut RawClient, theirs: &mut RawClient, commands: &[&[&str]]) -> [Vec<String>; 2] {
    [ours, theirs].map(|c| {
        assert_eq!(c.command(&["CONFIG", "RESETSTAT"]).unwrap(), b"+OK\r\n");
        for args in commands {
            c.command(args).unwrap();
        }
        latencystats(c)
    })
}

#[test]
fn latency_tracking_and_its_percentiles_shape_info_as_redis() {
    let Some(redis) = RedisServer::start(&[]).unwrap() else {
        return;
    };
    let server = coordis::Server::builder().start_blocking().unwrap();
    let mut ours = RawClient::connect(server.addr()).unwrap();
    let mut theirs = RawClient::connect(redis.addr()).unwrap();
    let work: &[&[&str]] = &[&["SET", "k", "v"], &["GET", "k"], &["GET", "k"]];
    let set = |ours: &mut RawClient, theirs: &mut RawClient, name: &str, value: &str| {
        for c in [ours, theirs] {
            assert_eq!(c.command(&["CONFIG", "SET", name, value]).unwrap(), b"+OK\r\n");
        }
    };

    let [a, b] = latency_after(&mut ours, &mut theirs, work);
    assert_eq!(a, b, "default percentiles");
    assert!(
        a.contains(&"latency_percentiles_usec_get:p50=N,p99=N,p99.9=N".to_string()),
        "{a:?}"
    );

    set(
        &mut ours,
        &mut theirs,
        "latency-tracking-info-percentiles",
        "0 12.5 100 99.99",
    );
    let [a, b] = latency_after(&mut ours, &mut theirs, work);
    assert_eq!(a, b, "percentiles 0 12.5 100 99.99");
    assert!(
        a.contains(&"latency_percentiles_usec_set:p0=N,p12.5=N,p100=N,p99.99=N".to_string()),
        "{a:?}"
    );

    set(&mut ours, &mut theirs, "latency-tracking-info-percentiles", "");
    let [a, b] = latency_after(&mut ours, &mut theirs, work);
    assert_eq!(a, b, "no percentiles");
    assert!(a.contains(&"latency_percentiles_usec_get:".to_string()), "{a:?}");

    // Off: nothing recorded and an empty section; LATENCY HISTOGRAM finds
    // nothing for the commands run meanwhile.
    set(&mut ours, &mut theirs, "latency-tracking", "no");
    let [a, b] = latency_after(&mut ours, &mut theirs, work);
    assert_eq!(a, b, "latency-tracking no");
    assert_eq!(a, vec!["# Latencystats".to_string()]);
    for c in [&mut ours, &mut theirs] {
        assert_eq!(c.command(&["LATENCY", "HISTOGRAM", "get", "set"]).unwrap(), b"*0\r\n");
    }
    // On again: recorded from the next command.
    set(&mut ours, &mut theirs, "latency-tracking", "yes");
    set(&mut ours, &mut theirs, "latency-tracking-info-percentiles", "50");
    for c in [&mut ours, &mut theirs] {
        c.command(&["GET", "k"]).unwrap();
    }
    let (a, b) = (latencystats(&mut ours), latencystats(&mut theirs));
    assert_eq!(a, b, "latency-tracking yes again");
    assert!(a.contains(&"latency_percentiles_usec_get:p50=N".to_string()), "{a:?}");
}

/// Polls `INFO persistence`'s `rdb_bgsave_in_progress` until it reads `0`
/// or `limit` passes; the time it took.
fn bgsave_ends_within(c: &mut RawClient, limit: std::time::Duration) -> Option<std::time::Duration> {
    let start = std::time::Instant::now();
    while start.elapsed() < limit {
        if c.info_field("persistence", "rdb_bgsave_in_progress") == "0" {
            return Some(start.elapsed());
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    None
}

#[test]
fn rdb_key_save_delay_holds_a_background_save_open_as_redis() {
    use std::time::{Duration, Instant};
    let Some(redis) = RedisServer::start(&[]).unwrap() else {
        return;
    };
    let server = coordis::Server::builder().start_blocking().unwrap();
    let mut ours = RawClient::connect(server.addr()).unwrap();
    let mut theirs = RawClient::connect(redis.addr()).unwrap();
    const KEYS: usize = 10;
    const DELAY_US: u64 = 100_000;
    let mut mset = vec!["MSET".to_string()];
    for i in 0..KEYS {
        mset.extend([format!("key:{i}"), "v".to_string()]);
    }
    let mset: Vec<&str> = mset.iter().map(String::as_str).collect();
    let expected = Duration::from_micros(DELAY_US * KEYS as u64);
    for (name, c) in [("coordis", &mut ours), ("redis", &mut theirs)] {
        assert_eq!(c.command(&mset).unwrap(), b"+OK\r\n");
        let delay = DELAY_US.to_string();
        assert_eq!(
            c.command(&["CONFIG", "SET", "rdb-key-save-delay", &delay]).unwrap(),
            b"+OK\r\n"
        );
        // A background save sleeps per key: in progress for about
        // KEYS × DELAY, while the server answers at once.
        let started = Instant::now();
        assert_eq!(c.command(&["BGSAVE"]).unwrap(), b"+Background saving started\r\n");
        std::thread::sleep(expected / 3);
        assert_eq!(c.info_field("persistence", "rdb_bgsave_in_progress"), "1", "{name}");
        let ping = Instant::now();
        assert_eq!(c.command(&["PING"]).unwrap(), b"+PONG\r\n");
        assert!(ping.elapsed() < expected / 4, "{name}: PING took {:?}", ping.elapsed());
        std::thread::sleep(expected / 3);
        assert_eq!(c.info_field("persistence", "rdb_bgsave_in_progress"), "1", "{name}");
        let ended = bgsave_ends_within(c, expected * 5);
        assert!(ended.is_some(), "{name}: the save did not end");
        assert!(
            started.elapsed() >= expected,
            "{name}: ended after {:?}",
            started.elapsed()
        );
        assert_eq!(c.info_field("persistence", "rdb_last_bgsave_status"), "ok", "{name}");
        // A foreground save sleeps as long, holding the server.
        let small = (DELAY_US / 5).to_string();
        assert_eq!(
            c.command(&["CONFIG", "SET", "rdb-key-save-delay", &small]).unwrap(),
            b"+OK\r\n"
        );
        let started = Instant::now();
        assert_eq!(c.command(&["SAVE"]).unwrap(), b"+OK\r\n");
        assert!(
            started.elapsed() >= expected / 5,
            "{name}: SAVE took {:?}",
            started.elapsed()
        );
        assert_eq!(
            c.command(&["CONFIG", "SET", "rdb-key-save-delay", "0"]).unwrap(),
            b"+OK\r\n"
        );
    }
}

/// Keys the effort test expires at once.
const EXPIRING_KEYS: u64 = 200_000;

/// With active expiry held off, `EXPIRING_KEYS` keys set to expire at once
/// and left past their deadline; then active expiry on at
/// `active-expire-effort effort` until every one is gone. Returns the
/// cycles that stopped at their time limit meanwhile
/// (`expired_time_cap_reached_count`) and how long it took.
fn expire_all(c: &mut RawClient, effort: u32) -> (u64, std::time::Duration) {
    use std::time::{Duration, Instant};
    let ok = |c: &mut RawClient, args: &[&str]| {
        let reply = c.command(args).unwrap();
        assert_eq!(reply, b"+OK\r\n", "{args:?}: {}", String::from_utf8_lossy(&reply));
    };
    ok(c, &["FLUSHALL"]);
    ok(c, &["CONFIG", "SET", "active-expire-effort", &effort.to_string()]);
    ok(c, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
    let load = "for i = 1, tonumber(ARGV[1]) do redis.call('set', 'e:' .. i, 'v', 'px', 50) end return 1";
    assert_eq!(
        c.command(&["EVAL", load, "0", &EXPIRING_KEYS.to_string()]).unwrap(),
        b":1\r\n"
    );
    std::thread::sleep(Duration::from_millis(100));
    let stat = |c: &mut RawClient, name: &str| c.info_field("stats", name).parse::<u64>().unwrap();
    let (expired, capped) = (stat(c, "expired_keys"), stat(c, "expired_time_cap_reached_count"));
    let started = Instant::now();
    ok(c, &["DEBUG", "SET-ACTIVE-EXPIRE", "1"]);
    while stat(c, "expired_keys") - expired < EXPIRING_KEYS {
        assert!(started.elapsed() < Duration::from_secs(120), "the keys did not expire");
        std::thread::sleep(Duration::from_millis(10));
    }
    (stat(c, "expired_time_cap_reached_count") - capped, started.elapsed())
}

/// A higher `active-expire-effort` gives each active-expiry cycle more
/// time, so a mass expiry takes fewer cycles that stop at their limit, on
/// both servers (`hz 100` makes the cycles short enough for many of them).
#[test]
fn active_expire_effort_expires_in_fewer_cycles_as_redis() {
    let Some(redis) = RedisServer::start(&["--enable-debug-command", "yes", "--hz", "100"]).unwrap() else {
        return;
    };
    let mut builder = coordis::Server::builder();
    builder.config_mut().enable_debug_command = "yes".into();
    builder.config_mut().hz = 100;
    let server = builder.start_blocking().unwrap();
    let mut ours = RawClient::connect(server.addr()).unwrap();
    let mut theirs = RawClient::connect(redis.addr()).unwrap();
    for (name, c) in [("coordis", &mut ours), ("redis", &mut theirs)] {
        let low = expire_all(c, 1);
        let high = expire_all(c, 10);
        println!("{name}: effort 1 {low:?}, effort 10 {high:?} (capped cycles, time)");
        assert!(low.0 > 0, "{name}: effort 1 never reached its time limit");
        assert!(high.0 < low.0, "{name}: effort 10 {high:?}, effort 1 {low:?}");
    }
}

/// `coordis-server` and, when installed, `redis-server` (`None` when it is
/// not and `COORDIS_REQUIRE_REDIS` is not set).
fn binaries() -> Vec<&'static str> {
    let mut out = vec![env!("CARGO_BIN_EXE_coordis-server")];
    if std::process::Command::new("redis-server")
        .arg("--version")
        .output()
        .is_ok()
    {
        out.push("redis-server");
    } else {
        assert!(
            !coordis::testing::require_redis(),
            "COORDIS_REQUIRE_REDIS=1 but redis-server is not on PATH"
        );
        eprintln!("*** SKIPPED: redis-server is not on PATH; the real-Redis leg did not run ***");
    }
    out
}

/// Starts `program` in `dir` with `args`, writes a key, sends `signal`;
/// whether it exited (within a few seconds) and whether it left a
/// dump.rdb behind.
fn signalled(program: &str, dir: &TempDir, args: &[&str], signal: i32) -> (bool, bool) {
    let mut command = std::process::Command::new(program);
    command.args(["--dir", dir.text()]).args(args);
    let mut server = ServerProcess::start(command).unwrap();
    let mut c = RawClient::connect(server.addr()).unwrap();
    assert_eq!(c.command(&["SET", "k", "v"]).unwrap(), b"+OK\r\n");
    let status = if signal == libc::SIGINT {
        server.interrupt(Duration::from_secs(10))
    } else {
        server.terminate(Duration::from_secs(10))
    };
    let exited = status.unwrap().is_some_and(|s| s.success());
    (exited, dir.dump().exists())
}

#[test]
fn shutdown_on_signals_saves_as_their_directives_say_as_redis() {
    for program in binaries() {
        let cases: &[(&[&str], i32, bool)] = &[
            // Save points: the final save, unless `nosave`.
            (&["--save", "3600 1"], libc::SIGTERM, true),
            (
                &["--save", "3600 1", "--shutdown-on-sigterm", "nosave"],
                libc::SIGTERM,
                false,
            ),
            (
                &["--save", "3600 1", "--shutdown-on-sigint", "nosave now"],
                libc::SIGINT,
                false,
            ),
            // SIGTERM's flags leave SIGINT alone.
            (
                &["--save", "3600 1", "--shutdown-on-sigterm", "nosave"],
                libc::SIGINT,
                true,
            ),
            // No save points: no save, unless `save`.
            (&["--save", ""], libc::SIGINT, false),
            (&["--save", "", "--shutdown-on-sigint", "save"], libc::SIGINT, true),
            (
                &["--save", "", "--shutdown-on-sigterm", "save force"],
                libc::SIGTERM,
                true,
            ),
        ];
        for (args, signal, saved) in cases {
            let dir = TempDir::new("signals");
            let (exited, dump) = signalled(program, &dir, args, *signal);
            assert!(exited, "{program} {args:?}: did not exit cleanly on signal {signal}");
            assert_eq!(dump, *saved, "{program} {args:?}, signal {signal}: dump.rdb");
        }
    }
}

/// A final save that fails keeps the server running after a signal, until
/// `force` says to stop anyway; `shutdown-timeout` and `now` change
/// nothing without replicas.
#[test]
fn a_failed_final_save_keeps_the_server_running_unless_force_as_redis() {
    for program in binaries() {
        let dir = TempDir::new("signals-force");
        let mut command = std::process::Command::new(program);
        command.args(["--dir", dir.text(), "--save", "3600 1", "--shutdown-timeout", "1"]);
        let mut server = ServerProcess::start(command).unwrap();
        let mut c = RawClient::connect(server.addr()).unwrap();
        assert_eq!(c.command(&["SET", "k", "v"]).unwrap(), b"+OK\r\n");
        // The directory gone, the save cannot write its file.
        std::fs::remove_dir_all(&dir.0).unwrap();
        let status = server.terminate(Duration::from_secs(3)).unwrap();
        assert!(status.is_none(), "{program}: stopped with a failed save: {status:?}");
        let mut c = RawClient::connect(server.addr()).unwrap();
        assert_eq!(c.command(&["PING"]).unwrap(), b"+PONG\r\n", "{program}");
        assert_eq!(
            c.command(&["CONFIG", "SET", "shutdown-on-sigterm", "force now"])
                .unwrap(),
            b"+OK\r\n"
        );
        let status = server.terminate(Duration::from_secs(10)).unwrap();
        assert!(status.is_some_and(|s| s.success()), "{program}: {status:?}");
    }
}

/// INFO's `hz` and `configured_hz` on the server at `addr` (`hz 1`) with
/// 1, then 202 clients, with `dynamic-hz` as `dynamic`.
fn hz_with_clients(addr: std::net::SocketAddr, dynamic: &str) -> Vec<String> {
    let mut c = RawClient::connect(addr).unwrap();
    for (name, value) in [("hz", "1"), ("dynamic-hz", dynamic)] {
        assert_eq!(c.command(&["CONFIG", "SET", name, value]).unwrap(), b"+OK\r\n");
    }
    let hz = |c: &mut RawClient| {
        format!(
            "{} {}",
            c.info_field("server", "hz"),
            c.info_field("server", "configured_hz")
        )
    };
    let mut seen = vec![hz(&mut c)];
    let others: Vec<RawClient> = (0..201).map(|_| RawClient::connect(addr).unwrap()).collect();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while c.info_field("clients", "connected_clients") != "202" {
        assert!(std::time::Instant::now() < deadline, "202 clients connected");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Redis adapts it at its next timer tick (a second at hz 1): waited
    // for up to 5 s, or 1.5 s for a change that should not come.
    let patience = Duration::from_millis(if dynamic == "yes" { 5000 } else { 1500 });
    let deadline = std::time::Instant::now() + patience;
    while hz(&mut c) == seen[0] && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    seen.push(hz(&mut c));
    drop(others);
    seen
}

/// `dynamic-hz`: more than 200 clients per tick double the timer's
/// frequency (INFO `hz`; `configured_hz` stays), as Redis's timer adapts
/// it; `no` keeps it (it was accepted and ignored).
#[test]
fn dynamic_hz_follows_the_clients_as_redis() {
    let ours = coordis::Server::builder().start_blocking().unwrap();
    let dynamic = hz_with_clients(ours.addr(), "yes");
    assert_eq!(dynamic, ["1 1", "2 1"]);
    let fixed = coordis::Server::builder().start_blocking().unwrap();
    assert_eq!(hz_with_clients(fixed.addr(), "no"), ["1 1", "1 1"]);
    if let Some(redis) = RedisServer::start(&[]).unwrap() {
        assert_eq!(hz_with_clients(redis.addr(), "yes"), dynamic, "redis-server");
    }
}
