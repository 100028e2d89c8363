//! When saves happen and what the server says about them, against Redis
//! 7.0.15 where it can be compared: save points on the virtual clock, the
//! `-MISCONF` refusals after a failed background save, SHUTDOWN's final
//! save and its refusal, FLUSHALL's save, the save when the owner stops
//! the server, and a staged crash with RDB persistence only.

use coordis::testing::TempDir;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use coordis::testing::{RawClient, RedisServer};

/// An embedded server keeping its files in `dir`, with `save` set to
/// `save` (Redis's syntax), on a frozen virtual clock.
fn embedded(dir: &TempDir, save: &str) -> coordis::BlockingServer {
    let mut builder = coordis::Server::builder();
    let config = builder.config_mut();
    config.apply("dir", &[dir.text().to_string()]).unwrap();
    config.apply("save", &[save.to_string()]).unwrap();
    let server = builder.start_blocking().unwrap();
    server.clock().unwrap().freeze();
    server
}

/// Moves the virtual clock, then waits for a background save that a save
/// point started to end (it runs on a thread of its own, as Redis's child).
fn advance(clock: &coordis::ServerClock, c: &mut RawClient, by: Duration) {
    clock.advance(by);
    let deadline = Instant::now() + Duration::from_secs(30);
    while info_field(c, "rdb_bgsave_in_progress") != "0" {
        assert!(Instant::now() < deadline, "the background save did not end");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn cmd(c: &mut RawClient, args: &[&str]) -> Vec<u8> {
    c.command(args).unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// One INFO persistence field.
fn info_field(c: &mut RawClient, name: &str) -> String {
    let info = text(&cmd(c, &["INFO", "persistence"]));
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("no {name} in {info}"))
        .to_string()
}

#[test]
fn save_points_fire_on_the_virtual_clock_and_config_shows_them() {
    let dir = TempDir::new("points");
    let server = embedded(&dir, "10 2");
    let clock = server.clock().unwrap();
    let mut c = RawClient::connect(server.addr()).unwrap();
    assert_eq!(
        cmd(&mut c, &["CONFIG", "GET", "save"]),
        b"*2\r\n$4\r\nsave\r\n$4\r\n10 2\r\n"
    );
    cmd(&mut c, &["SET", "a", "1"]);
    advance(&clock, &mut c, Duration::from_secs(11));
    assert!(!dir.dump().exists(), "one change is not two");
    assert_eq!(info_field(&mut c, "rdb_changes_since_last_save"), "1");
    cmd(&mut c, &["SET", "b", "2"]);
    // Exactly `seconds` since the last save is not enough: Redis wants more.
    advance(&clock, &mut c, Duration::from_millis(1));
    assert!(dir.dump().exists(), "2 changes in more than 10 seconds: saved");
    assert_eq!(info_field(&mut c, "rdb_changes_since_last_save"), "0");
    assert_eq!(info_field(&mut c, "rdb_saves"), "1");
    assert_eq!(info_field(&mut c, "rdb_last_bgsave_status"), "ok");
    let lastsave = text(&cmd(&mut c, &["LASTSAVE"]));
    assert_eq!(lastsave, format!(":{}\r\n", clock.now_ms() / 1000));
    // CONFIG SET save "" turns them off; the defaults are Redis's.
    assert_eq!(cmd(&mut c, &["CONFIG", "SET", "save", ""]), b"+OK\r\n");
    assert_eq!(
        cmd(&mut c, &["CONFIG", "GET", "save"]),
        b"*2\r\n$4\r\nsave\r\n$0\r\n\r\n"
    );
    std::fs::remove_file(dir.dump()).unwrap();
    cmd(&mut c, &["SET", "c", "3"]);
    advance(&clock, &mut c, Duration::from_secs(100_000));
    assert!(!dir.dump().exists(), "no save points: no save");
    assert_eq!(
        cmd(&mut c, &["CONFIG", "SET", "save", "0 1"]),
        b"-ERR CONFIG SET failed (possibly related to argument 'save') - Invalid save parameters\r\n"
    );
    assert_eq!(
        coordis::Config::default().save_points.len(),
        3,
        "Redis's defaults: 3600 1 300 100 60 10000"
    );
}

/// Makes `c`'s server fail its next saves: its `dir` (asked over the
/// wire) is removed (works as root too, unlike permissions; `dir` is a
/// protected config, so it cannot be moved). Returns the path.
fn break_dir(c: &mut RawClient) -> PathBuf {
    let reply = text(&cmd(c, &["CONFIG", "GET", "dir"]));
    let dir = PathBuf::from(reply.lines().nth(4).expect("CONFIG GET dir's value"));
    assert!(dir.is_dir(), "{reply:?}");
    std::fs::remove_dir_all(&dir).unwrap();
    dir
}

/// What a server answers while its last background save failed, and
/// after a save succeeds again.
fn misconf_transcript(c: &mut RawClient) -> Vec<String> {
    let mut out = vec![];
    let mut run = |c: &mut RawClient, args: &[&str]| out.push(format!("{args:?} -> {}", text(&cmd(c, args))));
    run(c, &["SET", "k", "v"]);
    run(c, &["PING"]);
    run(c, &["GET", "a"]);
    run(c, &["DEL", "a"]);
    // A script's write (Redis's `scriptVerifyWriteCommandAllow`).
    run(c, &["EVAL", "return redis.call('set','s','1')", "0"]);
    run(c, &["MULTI"]);
    run(c, &["SET", "k", "v"]);
    run(c, &["EXEC"]);
    run(c, &["MULTI"]);
    run(c, &["GET", "a"]);
    run(c, &["EXEC"]);
    run(c, &["CONFIG", "SET", "stop-writes-on-bgsave-error", "no"]);
    run(c, &["SET", "k", "v"]);
    run(c, &["PING"]);
    run(c, &["CONFIG", "SET", "stop-writes-on-bgsave-error", "yes"]);
    run(c, &["INCR", "n"]);
    run(c, &["SAVE"]);
    run(c, &["INCR", "n"]);
    // Without save points writes are accepted again.
    run(c, &["CONFIG", "SET", "save", ""]);
    run(c, &["INCR", "n"]);
    run(c, &["PING"]);
    out
}

#[test]
fn a_failed_background_save_refuses_writes_and_ping_as_redis() {
    let Some(redis) = RedisServer::start(&["--save", "1 1"]).unwrap() else {
        return;
    };
    let mut r = RawClient::connect(redis.addr()).unwrap();
    cmd(&mut r, &["SET", "a", "1"]);
    break_dir(&mut r);
    // Redis's cron starts the background save within about a second.
    let deadline = Instant::now() + Duration::from_secs(10);
    while info_field(&mut r, "rdb_last_bgsave_status") != "err" {
        assert!(Instant::now() < deadline, "Redis never failed its save");
        std::thread::sleep(Duration::from_millis(50));
    }
    let expected = misconf_transcript(&mut r);

    let dir = TempDir::new("misconf");
    let server = embedded(&dir, "1 1");
    let clock = server.clock().unwrap();
    let mut c = RawClient::connect(server.addr()).unwrap();
    cmd(&mut c, &["SET", "a", "1"]);
    break_dir(&mut c);
    advance(&clock, &mut c, Duration::from_secs(2));
    assert_eq!(info_field(&mut c, "rdb_last_bgsave_status"), "err");
    let got = misconf_transcript(&mut c);
    assert_eq!(got, expected);
    assert!(
        got[0].contains("-MISCONF Redis is configured to save RDB snapshots"),
        "{got:?}"
    );
}

/// A failed background save and a failed write of the append-only file at
/// once: the save's `-MISCONF` comes first, as Redis's
/// `writeCommandsDeniedByDiskError` asks about it first; without it, the
/// append-only file's (the text of Redis's `writeCommandsGetDiskErrorMessage`).
#[test]
fn a_failed_save_takes_precedence_over_a_failed_aof_write() {
    let dir = TempDir::new("misconf-both");
    let mut builder = coordis::Server::builder();
    let config = builder.config_mut();
    config.apply("dir", &[dir.text().to_string()]).unwrap();
    config.apply("save", &["1 1".to_string()]).unwrap();
    config.aof.enabled = true;
    let server = builder.start_blocking().unwrap();
    let clock = server.clock().unwrap();
    clock.freeze();
    let mut c = RawClient::connect(server.addr()).unwrap();
    cmd(&mut c, &["SET", "a", "1"]);
    server.control().disk_full(true);
    assert_eq!(cmd(&mut c, &["SET", "b", "2"]), b"+OK\r\n");
    let deadline = Instant::now() + Duration::from_secs(10);
    while info_field(&mut c, "aof_last_write_status") != "err" {
        assert!(Instant::now() < deadline, "the write never failed");
        std::thread::sleep(Duration::from_millis(5));
    }
    break_dir(&mut c);
    advance(&clock, &mut c, Duration::from_secs(2));
    assert_eq!(info_field(&mut c, "rdb_last_bgsave_status"), "err");
    let rdb = text(&cmd(&mut c, &["SET", "k", "v"]));
    assert!(
        rdb.starts_with("-MISCONF Redis is configured to save RDB snapshots"),
        "{rdb}"
    );
    cmd(&mut c, &["CONFIG", "SET", "stop-writes-on-bgsave-error", "no"]);
    assert_eq!(
        text(&cmd(&mut c, &["PING"])),
        "-MISCONF Errors writing to the AOF file: No space left on device\r\n"
    );
    server.control().disk_full(false);
    while info_field(&mut c, "aof_last_write_status") != "ok" {
        assert!(Instant::now() < deadline, "the write never succeeded again");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(cmd(&mut c, &["PING"]), b"+PONG\r\n");
}

#[test]
fn a_failed_save_point_waits_the_retry_delay() {
    let dir = TempDir::new("retry");
    let server = embedded(&dir, "1 1");
    let clock = server.clock().unwrap();
    let mut c = RawClient::connect(server.addr()).unwrap();
    cmd(&mut c, &["SET", "a", "1"]);
    break_dir(&mut c);
    advance(&clock, &mut c, Duration::from_secs(2));
    assert_eq!(info_field(&mut c, "rdb_saves"), "1");
    assert_eq!(info_field(&mut c, "rdb_last_bgsave_status"), "err");
    std::fs::create_dir_all(&dir.0).unwrap();
    advance(&clock, &mut c, Duration::from_secs(5));
    assert_eq!(info_field(&mut c, "rdb_saves"), "1", "not again within 5 seconds");
    assert!(!dir.dump().exists());
    advance(&clock, &mut c, Duration::from_secs(1));
    assert_eq!(
        info_field(&mut c, "rdb_saves"),
        "2",
        "retried after more than 5 seconds"
    );
    assert!(dir.dump().exists());
    assert_eq!(info_field(&mut c, "rdb_last_bgsave_status"), "ok");
    assert_eq!(cmd(&mut c, &["SET", "b", "2"]), b"+OK\r\n");
}

/// SHUTDOWN's refusals and its failed save, byte for byte.
fn shutdown_transcript(c: &mut RawClient) -> Vec<String> {
    let mut out = vec![];
    for args in [
        &["SHUTDOWN", "SAVE", "NOSAVE"][..],
        &["SHUTDOWN", "ABORT"],
        &["SHUTDOWN", "ABORT", "NOW"],
        &["SHUTDOWN", "BOGUS"],
        &["SHUTDOWN"],
        &["SHUTDOWN", "SAVE", "NOW"],
        &["PING"],
    ] {
        out.push(format!("{args:?} -> {}", text(&cmd(c, args))));
    }
    out
}

#[test]
fn shutdown_refuses_when_its_save_fails_as_redis_and_force_goes_on() {
    let Some(redis) = RedisServer::start(&["--save", "3600 1"]).unwrap() else {
        return;
    };
    let mut r = RawClient::connect(redis.addr()).unwrap();
    break_dir(&mut r);
    let expected = shutdown_transcript(&mut r);

    let dir = TempDir::new("shut");
    let server = embedded(&dir, "3600 1");
    let mut c = RawClient::connect(server.addr()).unwrap();
    break_dir(&mut c);
    let got = shutdown_transcript(&mut c);
    assert_eq!(got, expected);
    assert!(got[4].contains("Errors trying to SHUTDOWN"), "{got:?}");
    // FORCE stops anyway (no reply, the connection closes).
    c.send(&RawClient::encode(&[b"SHUTDOWN", b"FORCE"])).unwrap();
    assert_eq!(c.read_to_close().unwrap(), b"");
}

#[test]
fn shutdown_saves_with_save_points_or_save_and_nosave_does_not() {
    // Save points: the final save; the next start loads it.
    let dir = TempDir::new("final");
    let server = embedded(&dir, "3600 1");
    let mut c = RawClient::connect(server.addr()).unwrap();
    cmd(&mut c, &["SET", "kept", "1"]);
    c.send(&RawClient::encode(&[b"SHUTDOWN"])).unwrap();
    assert_eq!(c.read_to_close().unwrap(), b"");
    drop(server);
    assert!(dir.dump().exists());
    let server = embedded(&dir, "");
    let mut c = RawClient::connect(server.addr()).unwrap();
    assert_eq!(cmd(&mut c, &["GET", "kept"]), b"$1\r\n1\r\n");
    assert_eq!(info_field(&mut c, "rdb_last_load_keys_loaded"), "1");
    assert_eq!(info_field(&mut c, "rdb_last_load_keys_expired"), "0");
    // No save points: SHUTDOWN does not save, SHUTDOWN SAVE does.
    std::fs::remove_file(dir.dump()).unwrap();
    c.send(&RawClient::encode(&[b"SHUTDOWN"])).unwrap();
    assert_eq!(c.read_to_close().unwrap(), b"");
    drop(server);
    assert!(!dir.dump().exists(), "no save points: no final save");
    let server = embedded(&dir, "");
    let mut c = RawClient::connect(server.addr()).unwrap();
    cmd(&mut c, &["SET", "x", "1"]);
    c.send(&RawClient::encode(&[b"SHUTDOWN", b"SAVE"])).unwrap();
    assert_eq!(c.read_to_close().unwrap(), b"");
    drop(server);
    assert!(dir.dump().exists(), "SHUTDOWN SAVE saves");
    // NOSAVE with save points: nothing written.
    std::fs::remove_file(dir.dump()).unwrap();
    let server = embedded(&dir, "3600 1");
    let mut c = RawClient::connect(server.addr()).unwrap();
    cmd(&mut c, &["SET", "y", "1"]);
    c.send(&RawClient::encode(&[b"SHUTDOWN", b"NOSAVE"])).unwrap();
    assert_eq!(c.read_to_close().unwrap(), b"");
    drop(server);
    assert!(!dir.dump().exists(), "NOSAVE does not save");
}

#[test]
fn stopping_the_server_saves_when_save_points_exist() {
    let dir = TempDir::new("sigterm");
    let server = embedded(&dir, "3600 1");
    let mut c = RawClient::connect(server.addr()).unwrap();
    cmd(&mut c, &["SET", "k", "v"]);
    drop(c);
    server.shutdown();
    assert!(dir.dump().exists(), "the owner's stop (as SIGTERM) saves");
    let server = embedded(&dir, "");
    let mut c = RawClient::connect(server.addr()).unwrap();
    assert_eq!(cmd(&mut c, &["GET", "k"]), b"$1\r\nv\r\n");
    drop(c);
    std::fs::remove_file(dir.dump()).unwrap();
    server.shutdown();
    assert!(!dir.dump().exists(), "without save points the stop does not save");
}

#[test]
fn flushall_saves_with_save_points_as_redis() {
    let Some(redis) = RedisServer::start(&["--save", "3600 1"]).unwrap() else {
        return;
    };
    let mut r = RawClient::connect(redis.addr()).unwrap();
    let dir = TempDir::new("flush");
    let server = embedded(&dir, "3600 1");
    let mut c = RawClient::connect(server.addr()).unwrap();
    for s in [&mut r, &mut c] {
        cmd(s, &["SET", "a", "1"]);
        cmd(s, &["SET", "b", "1"]);
        cmd(s, &["FLUSHALL"]);
    }
    for field in ["rdb_changes_since_last_save", "rdb_saves", "rdb_last_bgsave_status"] {
        assert_eq!(info_field(&mut c, field), info_field(&mut r, field), "{field}");
    }
    assert_eq!(info_field(&mut c, "rdb_changes_since_last_save"), "0");
    assert!(dir.dump().exists(), "FLUSHALL saved the empty dataset");
}

#[test]
fn a_staged_crash_with_rdb_only_loses_everything_since_the_last_save() {
    let dir = TempDir::new("crash");
    let server = embedded(&dir, "");
    let mut c = RawClient::connect(server.addr()).unwrap();
    cmd(&mut c, &["SET", "saved", "1"]);
    assert_eq!(cmd(&mut c, &["SAVE"]), b"+OK\r\n");
    cmd(&mut c, &["SET", "lost", "2"]);
    drop(c);
    server.control().crash(None);
    let mut c = RawClient::connect(server.addr()).unwrap();
    assert_eq!(cmd(&mut c, &["MGET", "saved", "lost"]), b"*2\r\n$1\r\n1\r\n$-1\r\n");
    assert_eq!(info_field(&mut c, "rdb_changes_since_last_save"), "0");
}
