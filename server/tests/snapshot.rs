//! Forkless BGSAVE: the file is the dataset at the moment BGSAVE was
//! accepted, whatever writes (overwrites, deletes, renames, expiry, a
//! FLUSHDB, a SWAPDB, big collections changed in place, keys created after
//! the start, MULTI, scripts, a blocked client served) run while its walk
//! goes on: Redis loading it has the DEBUG DIGEST coordis had when BGSAVE
//! answered. The walk is slowed (`bgsave-slice-keys`,
//! `bgsave-slice-pause-us`) so the writes land mid-walk, which the tests
//! check. A second BGSAVE is refused or scheduled with Redis's texts, SAVE
//! is refused during one; FLUSHALL and shutdown kill a running save as
//! Redis kills its child.

use coordis::testing::TempDir;
use std::time::{Duration, Instant};

use std::net::SocketAddr;

use coordis::testing::{compare_digests, debug_digest, RawClient, RedisServer};

/// Keys of the dataset before the save: enough for a walk of many slices.
const KEYS: usize = 60_000;
/// Elements of the big collections changed during the save.
const BIG: usize = 20_000;
const DBS: &[usize] = &[0, 1];

fn ok(c: &mut RawClient, args: &[&str]) -> Vec<u8> {
    let reply = c.command(args).unwrap();
    assert!(
        !reply.starts_with(b"-"),
        "{args:?}: {}",
        String::from_utf8_lossy(&reply)
    );
    reply
}

fn info_field(c: &mut RawClient, field: &str) -> String {
    c.info_field("persistence", field)
}

/// The dataset before the save, on either server (pipelined).
fn fill(c: &mut RawClient) {
    let mut batch: Vec<Vec<String>> = Vec::new();
    for i in 0..KEYS {
        batch.push(vec!["SET".into(), format!("k:{i}"), format!("value-{i}")]);
    }
    for i in (0..BIG).step_by(500) {
        let mut rpush = vec!["RPUSH".to_string(), "big:list".into()];
        let mut hset = vec!["HSET".to_string(), "big:hash".into()];
        for j in i..i + 500 {
            rpush.push(format!("e{j}"));
            hset.push(format!("f{j}"));
            hset.push(format!("v{j}"));
        }
        batch.push(rpush);
        batch.push(hset);
    }
    batch.push(vec![
        "SET".into(),
        "ttl".into(),
        "v".into(),
        "EX".into(),
        "100000".into(),
    ]);
    batch.push(vec!["SELECT".into(), "1".into()]);
    for i in 0..100 {
        batch.push(vec!["SET".into(), format!("one:{i}"), "x".into()]);
    }
    batch.push(vec!["SELECT".into(), "0".into()]);
    let args: Vec<Vec<&str>> = batch.iter().map(|c| c.iter().map(String::as_str).collect()).collect();
    for chunk in args.chunks(1000) {
        let mut bytes = Vec::new();
        for cmd in chunk {
            let parts: Vec<&[u8]> = cmd.iter().map(|a| a.as_bytes()).collect();
            bytes.extend(RawClient::encode(&parts));
        }
        c.send(&bytes).unwrap();
        for _ in chunk {
            let reply = c.read_reply().unwrap();
            assert!(!reply.starts_with(b"-"), "{}", String::from_utf8_lossy(&reply));
        }
    }
}

/// An embedded server keeping its files in `dir`, with DEBUG allowed, save
/// points `save` and a walk slowed to about 2 s for [`KEYS`] keys.
fn slow_saver(dir: &TempDir, save: &str) -> coordis::BlockingServer {
    let mut builder = coordis::Server::builder();
    let config = builder.config_mut();
    config.apply("dir", &[dir.text().to_string()]).unwrap();
    config.apply("save", &[save.to_string()]).unwrap();
    config.apply("bgsave-slice-keys", &["64".to_string()]).unwrap();
    config.apply("bgsave-slice-pause-us", &["2000".to_string()]).unwrap();
    config.enable_debug_command = "yes".into();
    builder.start_blocking().unwrap()
}

fn assert_saving(c: &mut RawClient, when: &str) {
    assert_eq!(
        info_field(c, "rdb_bgsave_in_progress"),
        "1",
        "the walk had ended {when}: the writes did not land mid-walk"
    );
}

/// Writes of every kind during the save, to keys the walk has and has not
/// reached; a client blocked before the save is served by one of them.
fn mutate(c: &mut RawClient, blocked: &mut RawClient) {
    // Pipelined, so they land while the walk runs.
    let mut bytes = Vec::new();
    let mut n = 0;
    for i in (0..KEYS).step_by(7) {
        bytes.extend(RawClient::encode(&[b"SET", format!("k:{i}").as_bytes(), b"changed"]));
        n += 1;
    }
    for i in (3..KEYS).step_by(11) {
        bytes.extend(RawClient::encode(&[b"DEL", format!("k:{i}").as_bytes()]));
        n += 1;
    }
    c.send(&bytes).unwrap();
    for _ in 0..n {
        let reply = c.read_reply().unwrap();
        assert!(!reply.starts_with(b"-"), "{}", String::from_utf8_lossy(&reply));
    }
    assert_saving(c, "after the pipelined writes");
    // Keys near the end of the table's order too: every thousandth key.
    for i in (1..KEYS).step_by(1000) {
        ok(c, &["APPEND", &format!("k:{i}"), "-more"]);
    }
    ok(c, &["RENAME", "k:5", "renamed"]);
    ok(c, &["RENAME", "k:12", "k:13"]);
    ok(c, &["PEXPIRE", "k:6", "1"]);
    ok(c, &["EXPIRE", "k:8", "100000"]);
    ok(c, &["SET", "created-after", "x"]);
    ok(c, &["RPUSH", "big:list", "more"]);
    ok(c, &["LPOP", "big:list"]);
    ok(c, &["LTRIM", "big:list", "0", "99"]);
    ok(c, &["HSET", "big:hash", "f1", "changed", "new-field", "x"]);
    ok(c, &["HDEL", "big:hash", "f2", "f3"]);
    ok(c, &["PERSIST", "ttl"]);
    ok(c, &["MULTI"]);
    c.command(&["INCR", "k:9"]).unwrap();
    c.command(&["DEL", "k:11"]).unwrap();
    ok(c, &["EXEC"]);
    ok(
        c,
        &[
            "EVAL",
            "redis.call('DEL', 'k:10'); return redis.call('SET', 'k:14', 'lua')",
            "0",
        ],
    );
    // The blocked client is served (its list is created after the start).
    ok(c, &["RPUSH", "queue", "job"]);
    let served = blocked.read_reply().unwrap();
    assert_eq!(served, b"*2\r\n$5\r\nqueue\r\n$3\r\njob\r\n");
    ok(c, &["SELECT", "1"]);
    ok(c, &["FLUSHDB"]);
    ok(c, &["SET", "one:after-flush", "y"]);
    ok(c, &["SELECT", "0"]);
    // The tables trade places; writes to both sides after.
    ok(c, &["SWAPDB", "0", "2"]);
    ok(c, &["SET", "in-2-after-swap", "x"]);
    ok(c, &["SELECT", "2"]);
    ok(c, &["DEL", "k:20", "k:21"]);
    ok(c, &["SET", "k:22", "changed-after-swap"]);
    ok(c, &["SELECT", "0"]);
    ok(c, &["SWAPDB", "0", "2"]);
    ok(c, &["DEL", "k:23"]);
    // k:6 expires mid-walk (lazily here, so the digests after are stable).
    std::thread::sleep(Duration::from_millis(5));
    assert_eq!(ok(c, &["EXISTS", "k:6"]), b":0\r\n");
    assert_saving(c, "after the last write");
}

fn wait_for_save(c: &mut RawClient) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while info_field(c, "rdb_bgsave_in_progress") != "0" {
        assert!(Instant::now() < deadline, "the save did not finish");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Loads `file` into a real Redis and returns its DEBUG DIGEST (with the
/// server, for diagnostics); `None` without Redis.
fn load_into_redis(file: &[u8]) -> Option<(String, RedisServer, TempDir)> {
    let loaded_dir = TempDir::new("redis-load");
    std::fs::write(loaded_dir.0.join("dump.rdb"), file).unwrap();
    let loaded = RedisServer::start(&[
        "--enable-debug-command",
        "yes",
        "--save",
        "",
        "--dir",
        loaded_dir.text(),
    ])
    .unwrap()?;
    let check = std::process::Command::new("redis-check-rdb")
        .arg(loaded_dir.0.join("dump.rdb"))
        .output()
        .unwrap();
    assert!(check.status.success(), "{}", String::from_utf8_lossy(&check.stdout));
    Some((debug_digest(loaded.addr()).unwrap(), loaded, loaded_dir))
}

/// Where a Redis given the same dataset (by [`fill`]) and `loaded` differ.
fn explain(loaded: SocketAddr) -> String {
    let reference = RedisServer::start(&["--enable-debug-command", "yes", "--save", ""])
        .unwrap()
        .expect("Redis started before");
    fill(&mut RawClient::connect(reference.addr()).unwrap());
    compare_digests(reference.addr(), loaded, DBS).unwrap().join("\n")
}

#[test]
fn bgsave_writes_the_dataset_as_it_was_at_the_start() {
    let dir = TempDir::new("pit");
    let server = slow_saver(&dir, "");
    let mut c = RawClient::connect(server.addr()).unwrap();
    fill(&mut c);
    let mut blocked = RawClient::connect(server.addr()).unwrap();
    blocked.send(&RawClient::encode(&[b"BLPOP", b"queue", b"0"])).unwrap();
    let before_save: u64 = info_field(&mut c, "rdb_last_save_time").parse().unwrap();
    let saves: u64 = info_field(&mut c, "rdb_saves").parse().unwrap();
    let at_start = debug_digest(server.addr()).unwrap();
    assert_eq!(ok(&mut c, &["BGSAVE"]), b"+Background saving started\r\n");
    let refused = c.command(&["BGSAVE"]).unwrap();
    assert_eq!(refused, b"-ERR Background save already in progress\r\n");
    assert_eq!(c.command(&["SAVE"]).unwrap(), refused);
    assert_eq!(info_field(&mut c, "rdb_bgsave_in_progress"), "1");
    assert_eq!(
        info_field(&mut c, "current_save_keys_total"),
        (KEYS + 3 + 100).to_string()
    );
    mutate(&mut c, &mut blocked);
    let changed = debug_digest(server.addr()).unwrap();
    assert_ne!(changed, at_start, "the writes changed the dataset");
    wait_for_save(&mut c);
    assert_eq!(info_field(&mut c, "rdb_last_bgsave_status"), "ok");
    assert_eq!(info_field(&mut c, "rdb_saves"), (saves + 1).to_string());
    assert!(info_field(&mut c, "rdb_last_save_time").parse::<u64>().unwrap() >= before_save);
    // The changes made during the save are still unsaved.
    assert_ne!(info_field(&mut c, "rdb_changes_since_last_save"), "0");
    let file = std::fs::read(dir.0.join("dump.rdb")).unwrap();
    let temps: Vec<_> = std::fs::read_dir(&dir.0)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(temps, vec![std::ffi::OsString::from("dump.rdb")], "only the file stays");
    // After the save, writes copy nothing and the live data is untouched.
    assert_eq!(debug_digest(server.addr()).unwrap(), changed);
    drop((c, blocked));
    drop(server);
    let Some((loaded_digest, loaded, _dir)) = load_into_redis(&file) else {
        return;
    };
    assert_eq!(
        loaded_digest,
        at_start,
        "the BGSAVE file is not the dataset at the start:\n{}",
        explain(loaded.addr())
    );
}

/// BGSAVE's answers while a save runs and inside a transaction, on
/// `server` (a save of its dataset takes about two seconds): SCHEDULE does
/// not queue a second save behind a running one, and in EXEC a BGSAVE is
/// only scheduled, started by the cron once the transaction is over.
fn bgsave_answers(server: SocketAddr) -> Vec<String> {
    let mut c = RawClient::connect(server).unwrap();
    let saves: u64 = info_field(&mut c, "rdb_saves").parse().unwrap();
    let mut replies = Vec::new();
    let mut say = |c: &mut RawClient, args: &[&str]| {
        replies.push(String::from_utf8_lossy(&c.command(args).unwrap()).into_owned());
    };
    say(&mut c, &["BGSAVE"]);
    say(&mut c, &["BGSAVE", "SCHEDULE"]);
    say(&mut c, &["BGSAVE"]);
    wait_for_save(&mut c);
    assert_eq!(
        info_field(&mut c, "rdb_saves"),
        (saves + 1).to_string(),
        "nothing was scheduled"
    );
    say(&mut c, &["MULTI"]);
    say(&mut c, &["BGSAVE"]);
    say(&mut c, &["EXEC"]);
    let deadline = Instant::now() + Duration::from_secs(30);
    while info_field(&mut c, "rdb_saves") != (saves + 2).to_string() {
        assert!(Instant::now() < deadline, "the save scheduled in EXEC never ran");
        std::thread::sleep(Duration::from_millis(10));
    }
    replies
}

#[test]
fn bgsave_during_a_save_and_in_exec_answers_as_redis() {
    let dir = TempDir::new("schedule");
    let server = slow_saver(&dir, "");
    let mut c = RawClient::connect(server.addr()).unwrap();
    ok(&mut c, &["DEBUG", "POPULATE", "60000"]);
    let ours = bgsave_answers(server.addr());
    assert_eq!(
        ours,
        [
            "+Background saving started\r\n",
            "-ERR Background save already in progress\r\n",
            "-ERR Background save already in progress\r\n",
            "+OK\r\n",
            "+QUEUED\r\n",
            "*1\r\n+Background saving scheduled\r\n",
        ]
    );
    let redis_dir = TempDir::new("schedule-redis");
    // 10 ms a key: Redis's save of 200 keys takes two seconds too.
    let Some(redis) = RedisServer::start(&[
        "--enable-debug-command",
        "yes",
        "--save",
        "",
        "--rdb-key-save-delay",
        "10000",
        "--dir",
        redis_dir.text(),
    ])
    .unwrap() else {
        return;
    };
    ok(
        &mut RawClient::connect(redis.addr()).unwrap(),
        &["DEBUG", "POPULATE", "200"],
    );
    assert_eq!(ours, bgsave_answers(redis.addr()));
}

/// FLUSHALL kills a running save, as Redis's `flushAllDataAndResetRDB`
/// kills its child (not an error); with save points it then saves the
/// empty dataset synchronously, and the killed save never replaces it.
#[test]
fn flushall_kills_a_running_save() {
    for save in ["", "3600 1"] {
        let dir = TempDir::new("flushall");
        let server = slow_saver(&dir, save);
        let mut c = RawClient::connect(server.addr()).unwrap();
        fill(&mut c);
        assert_eq!(ok(&mut c, &["BGSAVE"]), b"+Background saving started\r\n");
        ok(&mut c, &["SET", "k:1", "changed"]);
        assert_saving(&mut c, "before FLUSHALL");
        ok(&mut c, &["FLUSHALL"]);
        assert_eq!(info_field(&mut c, "rdb_bgsave_in_progress"), "0", "save {save:?}");
        assert_eq!(info_field(&mut c, "rdb_last_bgsave_status"), "ok");
        ok(&mut c, &["SET", "after", "x"]);
        // Longer than the whole walk would have taken.
        std::thread::sleep(Duration::from_millis(2500));
        let names: Vec<String> = std::fs::read_dir(&dir.0)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        if save.is_empty() {
            assert!(names.is_empty(), "the killed save left {names:?}");
        } else {
            assert_eq!(names, vec!["dump.rdb".to_string()]);
            let file = std::fs::read(dir.0.join("dump.rdb")).unwrap();
            drop(c);
            drop(server);
            if let Some((_, loaded, _dir)) = load_into_redis(&file) {
                let mut l = RawClient::connect(loaded.addr()).unwrap();
                assert_eq!(
                    l.command(&["DBSIZE"]).unwrap(),
                    b":0\r\n",
                    "FLUSHALL's save is the empty dataset"
                );
            }
        }
    }
}

#[test]
fn shutdown_during_a_save_stops_it() {
    let dir = TempDir::new("shutdown");
    let server = slow_saver(&dir, "");
    let mut c = RawClient::connect(server.addr()).unwrap();
    fill(&mut c);
    assert_eq!(ok(&mut c, &["BGSAVE"]), b"+Background saving started\r\n");
    assert_saving(&mut c, "before SHUTDOWN");
    let _ = c.command(&["SHUTDOWN", "NOSAVE"]);
    drop(c);
    drop(server);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let names: Vec<_> = std::fs::read_dir(&dir.0)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        if names.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "the save left {names:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}
