//! BGREWRITEAOF in the background, from the forkless snapshot: the writes
//! that run while the new base is walked (overwrites, deletes, new keys, a
//! FLUSHDB, big collections changed) all survive a restart from the files
//! (DEBUG DIGEST as before), the files pass `redis-check-aof` and load into
//! redis-server with the same digest, in both base formats and when CONFIG
//! SET appendonly yes writes its first rewrite. The walk is slowed
//! (`bgsave-slice-keys`, `bgsave-slice-pause-us`) so the writes land
//! mid-walk, which the tests check (INFO `aof_rewrite_in_progress` after
//! them). A rewrite during a save is scheduled, a save during a rewrite
//! refused or scheduled, with Redis's texts.

use coordis::testing::TempDir;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use coordis::testing::{debug_digest, RawClient, RedisServer, ServerProcess};

const BIN: &str = env!("CARGO_BIN_EXE_coordis-server");
/// Keys before the rewrite: with the slowed walk, a rewrite of seconds.
const KEYS: usize = 20_000;
/// The walk: this many keys per slice, this long between slices.
const SLICE: &[&str] = &["--bgsave-slice-keys", "50", "--bgsave-slice-pause-us", "2000"];
const DEBUG: &[&str] = &["--enable-debug-command", "yes"];
/// Longest a slowed rewrite may take.
const REWRITE_TIMEOUT: Duration = Duration::from_secs(60);

fn coordis(dir: &TempDir, extra: &[&str]) -> ServerProcess {
    let mut cmd = Command::new(BIN);
    cmd.args(["--dir", dir.text()]).args(DEBUG).args(extra);
    ServerProcess::start(cmd).expect("coordis starts")
}

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

fn pipeline(c: &mut RawClient, commands: &[Vec<String>]) {
    for chunk in commands.chunks(1000) {
        let mut bytes = Vec::new();
        for cmd in chunk {
            let parts: Vec<&[u8]> = cmd.iter().map(|a| a.as_bytes()).collect();
            bytes.extend(RawClient::encode(&parts));
        }
        c.send(&bytes).unwrap();
        for cmd in chunk {
            let reply = c.read_reply().unwrap();
            assert!(!reply.starts_with(b"-"), "{cmd:?}: {}", String::from_utf8_lossy(&reply));
        }
    }
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

/// The dataset before the rewrite: strings, a list, a hash, a deadline,
/// a second database.
fn fill(c: &mut RawClient) {
    let mut batch: Vec<Vec<String>> = (0..KEYS)
        .map(|i| strings(&["SET", &format!("k:{i}"), &format!("value-{i}")]))
        .collect();
    for i in (0..2000).step_by(200) {
        let mut rpush = strings(&["RPUSH", "big:list"]);
        let mut hset = strings(&["HSET", "big:hash"]);
        for j in i..i + 200 {
            rpush.push(format!("e{j}"));
            hset.extend([format!("f{j}"), format!("v{j}")]);
        }
        batch.push(rpush);
        batch.push(hset);
    }
    batch.push(strings(&["SET", "ttl", "v", "EX", "100000"]));
    batch.push(strings(&["SELECT", "1"]));
    batch.extend((0..100).map(|i| strings(&["SET", &format!("one:{i}"), "x"])));
    batch.push(strings(&["SELECT", "0"]));
    pipeline(c, &batch);
}

/// Writes of every kind, spread over the keyspace (keys the walk has
/// passed and keys it has not reached).
fn write_during(c: &mut RawClient) {
    let mut batch = Vec::new();
    for i in (0..KEYS).step_by(7) {
        batch.push(strings(&["SET", &format!("k:{i}"), &format!("new-{i}")]));
    }
    for i in (3..KEYS).step_by(11) {
        batch.push(strings(&["DEL", &format!("k:{i}")]));
    }
    for i in 0..500 {
        batch.push(strings(&["SET", &format!("created:{i}"), "after the start"]));
    }
    batch.push(strings(&["LPOP", "big:list", "10"]));
    batch.push(strings(&["RPUSH", "big:list", "tail"]));
    batch.push(strings(&["HSET", "big:hash", "f5", "changed", "extra", "1"]));
    batch.push(strings(&["INCR", "counter"]));
    batch.push(strings(&["PEXPIRE", "k:1", "500000"]));
    batch.push(strings(&["SELECT", "1"]));
    batch.push(strings(&["FLUSHDB"]));
    batch.push(strings(&["SET", "one:new", "y"]));
    batch.push(strings(&["SELECT", "0"]));
    pipeline(c, &batch);
}

fn wait_until(c: &mut RawClient, what: &str, mut done: impl FnMut(&mut RawClient) -> bool) {
    let deadline = Instant::now() + REWRITE_TIMEOUT;
    while !done(c) {
        assert!(Instant::now() < deadline, "{what} did not happen");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn wait_for_rewrite(c: &mut RawClient) {
    wait_until(c, "the rewrite's end", |c| {
        info_field(c, "aof_rewrite_in_progress") == "0"
    });
    assert_eq!(info_field(c, "aof_last_bgrewrite_status"), "ok");
}

fn manifest(dir: &TempDir) -> String {
    std::fs::read_to_string(dir.aof_dir().join("appendonly.aof.manifest")).unwrap()
}

/// The directory holds the manifest's files and the manifest, nothing else.
fn only_manifest_files(dir: &TempDir) {
    let text = manifest(dir);
    let mut listed: Vec<String> = text.lines().map(|l| l.split(' ').nth(1).unwrap().to_string()).collect();
    listed.push("appendonly.aof.manifest".into());
    listed.sort();
    let mut present: Vec<String> = std::fs::read_dir(dir.aof_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    present.sort();
    assert_eq!(present, listed, "history and temporary files removed");
}

fn check_aof(dir: &Path) {
    let out = Command::new("redis-check-aof")
        .arg(dir.join("appendonly.aof.manifest"))
        .output()
        .expect("redis-check-aof runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && text.contains("All AOF files and manifest are valid"),
        "redis-check-aof: {text}"
    );
}

/// The files restart coordis with `digest`; then Redis, with the same one.
fn files_hold(dir: &TempDir, digest: &str) {
    let again = coordis(dir, &["--appendonly", "yes"]);
    assert_eq!(
        debug_digest(again.addr()).unwrap(),
        digest,
        "coordis restarted from its files"
    );
    drop(again);
    let Some(redis) = RedisServer::start(&["--appendonly", "yes", "--dir", dir.text(), DEBUG[0], DEBUG[1]]).unwrap()
    else {
        return;
    };
    check_aof(&dir.aof_dir());
    assert_eq!(
        debug_digest(redis.addr()).unwrap(),
        digest,
        "redis-server loaded coordis's files"
    );
}

#[test]
fn writes_during_a_background_rewrite_are_in_the_files() {
    for preamble in ["yes", "no"] {
        let dir = TempDir::new(&format!("rewrite-{preamble}"));
        let mut args = vec!["--appendonly", "yes", "--aof-use-rdb-preamble", preamble];
        args.extend(SLICE);
        let mut server = coordis(&dir, &args);
        let mut c = RawClient::connect(server.addr()).unwrap();
        fill(&mut c);
        assert_eq!(
            ok(&mut c, &["BGREWRITEAOF"]),
            b"+Background append only file rewriting started\r\n"
        );
        assert_eq!(info_field(&mut c, "aof_rewrite_in_progress"), "1");
        assert_eq!(info_field(&mut c, "rdb_bgsave_in_progress"), "0");
        // The new incremental file is in the manifest from the start.
        assert!(manifest(&dir).contains("appendonly.aof.2.incr.aof seq 2 type i"));
        write_during(&mut c);
        assert_eq!(
            c.command(&["BGREWRITEAOF"]).unwrap(),
            b"-ERR Background append only file rewriting already in progress\r\n"
        );
        assert_eq!(
            c.command(&["BGSAVE"]).unwrap(),
            b"-ERR Another child process is active (AOF?): can't BGSAVE right now. Use BGSAVE SCHEDULE in order to schedule a BGSAVE whenever possible.\r\n"
        );
        assert_eq!(ok(&mut c, &["BGSAVE", "SCHEDULE"]), b"+Background saving scheduled\r\n");
        assert_eq!(
            info_field(&mut c, "aof_rewrite_in_progress"),
            "1",
            "the writes ran while the rewrite did"
        );
        assert_ne!(info_field(&mut c, "aof_current_rewrite_time_sec"), "-1");
        wait_for_rewrite(&mut c);
        assert_eq!(info_field(&mut c, "aof_current_rewrite_time_sec"), "-1");
        // The scheduled save runs once the rewrite is done.
        wait_until(&mut c, "the scheduled save", |c| {
            info_field(c, "rdb_bgsave_in_progress") == "0" && Path::new(dir.text()).join("dump.rdb").exists()
        });
        ok(&mut c, &["SET", "after", "the rewrite"]);
        let base = if preamble == "yes" { "rdb" } else { "aof" };
        assert_eq!(
            manifest(&dir),
            format!("file appendonly.aof.2.base.{base} seq 2 type b\nfile appendonly.aof.2.incr.aof seq 2 type i\n")
        );
        only_manifest_files(&dir);
        let digest = debug_digest(server.addr()).unwrap();
        drop(c);
        server.terminate(Duration::from_secs(10)).unwrap();
        files_hold(&dir, &digest);
    }
}

#[test]
fn config_set_appendonly_yes_keeps_the_writes_of_its_first_rewrite() {
    let dir = TempDir::new("turn-on");
    let mut server = coordis(&dir, SLICE);
    let mut c = RawClient::connect(server.addr()).unwrap();
    fill(&mut c);
    ok(&mut c, &["CONFIG", "SET", "appendonly", "yes"]);
    assert_eq!(info_field(&mut c, "aof_enabled"), "1");
    assert_eq!(info_field(&mut c, "aof_rewrite_in_progress"), "1");
    write_during(&mut c);
    assert_eq!(info_field(&mut c, "aof_rewrite_in_progress"), "1");
    // Until the rewrite is done the writes go to the temporary incr file.
    assert!(dir.aof_dir().join("temp-appendonly.aof.incr").exists());
    assert!(!dir.aof_dir().join("appendonly.aof.manifest").exists());
    wait_for_rewrite(&mut c);
    ok(&mut c, &["SET", "after", "the rewrite"]);
    assert_eq!(
        manifest(&dir),
        "file appendonly.aof.1.base.rdb seq 1 type b\nfile appendonly.aof.1.incr.aof seq 1 type i\n"
    );
    only_manifest_files(&dir);
    let digest = debug_digest(server.addr()).unwrap();
    drop(c);
    server.terminate(Duration::from_secs(10)).unwrap();
    files_hold(&dir, &digest);
}

#[test]
fn a_rewrite_asked_for_during_a_save_or_a_transaction_is_scheduled() {
    let dir = TempDir::new("scheduled");
    let mut args = vec!["--appendonly", "yes"];
    args.extend(SLICE);
    let server = coordis(&dir, &args);
    let mut c = RawClient::connect(server.addr()).unwrap();
    fill(&mut c);
    ok(&mut c, &["BGSAVE"]);
    assert_eq!(
        ok(&mut c, &["BGREWRITEAOF"]),
        b"+Background append only file rewriting scheduled\r\n"
    );
    assert_eq!(info_field(&mut c, "aof_rewrite_scheduled"), "1");
    assert_eq!(info_field(&mut c, "aof_pending_rewrite"), "1");
    assert_eq!(info_field(&mut c, "aof_rewrite_in_progress"), "0");
    assert_eq!(info_field(&mut c, "rdb_bgsave_in_progress"), "1");
    // The save ends, then the scheduled rewrite runs.
    wait_until(&mut c, "the scheduled rewrite", |c| {
        info_field(c, "aof_rewrites") == "1"
            && info_field(c, "aof_rewrite_in_progress") == "0"
            && info_field(c, "aof_rewrite_scheduled") == "0"
    });
    assert_eq!(info_field(&mut c, "aof_last_bgrewrite_status"), "ok");
    assert!(manifest(&dir).contains("appendonly.aof.2.base.rdb seq 2 type b"));
    ok(&mut c, &["MULTI"]);
    ok(&mut c, &["BGREWRITEAOF"]);
    assert_eq!(
        ok(&mut c, &["EXEC"]),
        b"*1\r\n+Background append only file rewriting scheduled\r\n"
    );
    wait_until(&mut c, "the rewrite after EXEC", |c| {
        info_field(c, "aof_rewrites") == "2" && info_field(c, "aof_rewrite_in_progress") == "0"
    });
    assert!(manifest(&dir).contains("appendonly.aof.3.base.rdb seq 3 type b"));
    only_manifest_files(&dir);
}

/// The append-only directory's files and manifest.
fn files_and_manifest(dir: &TempDir) -> String {
    let mut present: Vec<String> = std::fs::read_dir(dir.aof_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    present.sort();
    format!("{}\n{}", present.join(" "), manifest(dir))
}

/// Starts a server with these arguments: a guard that stops it when
/// dropped, and its address.
type Start<'a> = &'a dyn Fn(&[&str]) -> (Box<dyn std::any::Any>, std::net::SocketAddr);

/// What `aof-disable-auto-gc yes` leaves after two rewrites, what turning
/// it off removes, and what a start without it removes, on the server
/// `start` runs in `dir` (a guard to drop, and its address).
fn auto_gc_story(dir: &TempDir, start: Start<'_>) -> Vec<String> {
    let mut seen = vec![];
    let rewrite = |c: &mut RawClient, key: &str| {
        ok(c, &["SET", key, "1"]);
        ok(c, &["BGREWRITEAOF"]);
        wait_for_rewrite(c);
    };
    let (server, addr) = start(&["--appendonly", "yes", "--aof-disable-auto-gc", "yes"]);
    let mut c = RawClient::connect(addr).unwrap();
    rewrite(&mut c, "a");
    rewrite(&mut c, "b");
    seen.push(files_and_manifest(dir));
    ok(&mut c, &["CONFIG", "SET", "aof-disable-auto-gc", "no"]);
    seen.push(files_and_manifest(dir));
    ok(&mut c, &["CONFIG", "SET", "aof-disable-auto-gc", "yes"]);
    rewrite(&mut c, "c");
    seen.push(files_and_manifest(dir));
    drop(c);
    drop(server);
    let (server, addr) = start(&["--appendonly", "yes"]);
    let mut c = RawClient::connect(addr).unwrap();
    assert_eq!(c.command(&["DBSIZE"]).unwrap(), b":3\r\n");
    seen.push(files_and_manifest(dir));
    drop(server);
    seen
}

/// `aof-disable-auto-gc yes` keeps the files a rewrite made history, on
/// disk and in the manifest; turning it off, or starting without it,
/// removes them; as in Redis, file for file (it was accepted and ignored).
#[test]
fn aof_disable_auto_gc_keeps_the_history_as_in_redis() {
    let dir = TempDir::new("aof-gc");
    let ours = auto_gc_story(&dir, &|extra| {
        let server = coordis(&dir, extra);
        let addr = server.addr();
        (Box::new(server), addr)
    });
    assert!(ours[0].contains("appendonly.aof.1.base.rdb seq 1 type h"), "{ours:?}");
    assert!(!ours[1].contains("type h"), "{ours:?}");
    assert!(ours[2].contains("appendonly.aof.3.base.rdb seq 3 type h"), "{ours:?}");
    assert!(!ours[3].contains("type h"), "{ours:?}");
    let redis_dir = TempDir::new("aof-gc-redis");
    // Whether redis-server is here (a skip, or a failure under
    // COORDIS_REQUIRE_REDIS=1, when it is not).
    if RedisServer::start(&["--dir", redis_dir.text()]).unwrap().is_none() {
        return;
    }
    let theirs = auto_gc_story(&redis_dir, &|extra| {
        let mut args = vec!["--dir", redis_dir.text()];
        args.extend_from_slice(extra);
        let server = RedisServer::start(&args).unwrap().expect("redis-server");
        let addr = server.addr();
        (Box::new(server), addr)
    });
    assert_eq!(ours, theirs, "coordis (left) and redis-server");
}
