//! The append-only file (Redis 7.0.15's multi-part layout): coordis's files
//! pass `redis-check-aof` and load into redis-server with the same dataset,
//! Redis's files load into coordis, a cut-short file loads as
//! `aof-load-truncated` says, `kill -9` under `appendfsync always` loses no
//! acknowledged write (coordis and Redis alike), and a staged crash under
//! `everysec` loses exactly the writes of the last N ms.

use coordis::testing::TempDir;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use coordis::testing::{compare_datasets, compare_digests, dataset, RawClient, RedisServer, ServerProcess};

const BIN: &str = env!("CARGO_BIN_EXE_coordis-server");
const DBS: &[usize] = &[0, 1, 2];
/// PTTLs read on two servers a moment apart differ by about that moment.
const TTL_TOLERANCE_MS: u64 = 5000;

fn coordis(dir: &TempDir, extra: &[&str]) -> std::io::Result<ServerProcess> {
    let mut cmd = Command::new(BIN);
    cmd.args(["--appendonly", "yes", "--dir", dir.text()]).args(extra);
    ServerProcess::start(cmd)
}

/// A redis-server with its append-only files in `dir`, as [`coordis`]
/// starts ours; `None` without redis-server.
fn redis(dir: &TempDir, extra: &[&str]) -> Option<RedisServer> {
    let mut args = vec!["--appendonly", "yes", "--dir", dir.text()];
    args.extend_from_slice(extra);
    RedisServer::start(&args).unwrap()
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

/// Every type, several databases, a deadline, a transaction, a stream with
/// a group and a pending entry; `part` varies the keys.
fn workload(c: &mut RawClient, part: &str) {
    let k = |name: &str| format!("{name}:{part}");
    ok(c, &["SET", &k("s"), "hello"]);
    ok(c, &["INCR", &k("n")]);
    ok(c, &["INCRBYFLOAT", &k("f"), "1.5"]);
    ok(c, &["SET", &k("ttl"), "v", "EX", "1000"]);
    let items: Vec<String> = (0..100).map(|i| format!("e{i}")).collect();
    let mut rpush = vec!["RPUSH".to_string(), k("l")];
    rpush.extend(items.iter().cloned());
    let rpush: Vec<&str> = rpush.iter().map(String::as_str).collect();
    ok(c, &rpush);
    ok(c, &["LPOP", &k("l")]);
    ok(c, &["SADD", &k("set"), "1", "2", "x"]);
    ok(c, &["SPOP", &k("set")]);
    ok(c, &["ZADD", &k("z"), "1.5", "a", "-2", "b", "3", "c"]);
    ok(c, &["HSET", &k("h"), "f1", "v1", "f2", "v2"]);
    ok(c, &["XADD", &k("st"), "1-1", "f", "v"]);
    ok(c, &["XADD", &k("st"), "2-1", "f", "w"]);
    ok(c, &["XGROUP", "CREATE", &k("st"), "g", "0"]);
    ok(
        c,
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "alice",
            "COUNT",
            "1",
            "STREAMS",
            &k("st"),
            ">",
        ],
    );
    ok(c, &["XGROUP", "CREATECONSUMER", &k("st"), "g", "bob"]);
    ok(c, &["MULTI"]);
    c.command(&["SET", &k("tx1"), "a"]).unwrap();
    c.command(&["SET", &k("tx2"), "b"]).unwrap();
    ok(c, &["EXEC"]);
    ok(c, &["SELECT", "1"]);
    ok(c, &["SET", &k("db1"), "one"]);
    ok(c, &["SELECT", "0"]);
    ok(c, &["SET", &k("gone"), "x"]);
    ok(c, &["DEL", &k("gone")]);
}

fn info_field(c: &mut RawClient, field: &str) -> String {
    c.info_field("persistence", field)
}

fn check_aof(dir: &Path) {
    let manifest = dir.join("appendonly.aof.manifest");
    let out = Command::new("redis-check-aof")
        .arg(&manifest)
        .output()
        .expect("redis-check-aof runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && text.contains("All AOF files and manifest are valid"),
        "redis-check-aof: {text}"
    );
}

#[test]
fn coordis_files_pass_redis_check_aof_and_load_into_redis_and_back() {
    let dir = TempDir::new("to-redis");
    let mut server = coordis(
        &dir,
        &[
            "--appendfsync",
            "always",
            "--aof-timestamp-enabled",
            "yes",
            "--aof-use-rdb-preamble",
            "no",
        ],
    )
    .unwrap();
    let mut c = RawClient::connect(server.addr()).unwrap();
    workload(&mut c, "before");
    assert_eq!(
        ok(&mut c, &["BGREWRITEAOF"]),
        b"+Background append only file rewriting started\r\n"
    );
    // The rewrite runs in the background: these writes land while it may
    // still run, in the new incremental file.
    workload(&mut c, "after");
    wait_for_rewrite(&mut c, 1);
    assert_eq!(info_field(&mut c, "aof_enabled"), "1");
    assert_eq!(info_field(&mut c, "aof_last_bgrewrite_status"), "ok");
    let manifest = std::fs::read_to_string(dir.aof_dir().join("appendonly.aof.manifest")).unwrap();
    assert_eq!(
        manifest,
        "file appendonly.aof.2.base.aof seq 2 type b\nfile appendonly.aof.2.incr.aof seq 2 type i\n"
    );
    let base = std::fs::read(dir.aof_dir().join("appendonly.aof.2.base.aof")).unwrap();
    assert!(base.starts_with(b"#TS:"), "aof-timestamp-enabled annotates the base");
    assert!(
        !dir.aof_dir().join("appendonly.aof.1.incr.aof").exists(),
        "history removed"
    );
    // coordis reloads its own files.
    let before = dataset(server.addr(), DBS).unwrap();
    drop(c);
    server.terminate(Duration::from_secs(10)).unwrap();
    let again = coordis(&dir, &[]).unwrap();
    let after = dataset(again.addr(), DBS).unwrap();
    drop(again);
    // The one difference a replay makes, in Redis as here: a group read
    // after the rewrite is in the file as XCLAIM ... LASTID, which leaves
    // the group's entries-read unknown.
    let diff = compare_datasets(&before, &after, TTL_TOLERANCE_MS);
    assert!(
        diff.len() == 1 && diff[0].contains("key st:after") && diff[0].contains("entries-read=nil"),
        "coordis reloaded:\n{}",
        diff.join("\n")
    );
    // Redis: the checker, then the server on the same directory.
    let Some(redis) = redis(&dir, &[]) else {
        return;
    };
    check_aof(&dir.aof_dir());
    let theirs = dataset(redis.addr(), DBS).unwrap();
    let diff = compare_datasets(&after, &theirs, TTL_TOLERANCE_MS);
    assert!(
        diff.is_empty(),
        "redis-server loaded coordis's files:\n{}",
        diff.join("\n")
    );
    assert!(before.len() > 20);
}

/// A copy of `from`'s append-only directory in a new temporary directory
/// (so a second server loads the files without sharing them).
fn copy_aof_dir(from: &TempDir, tag: &str) -> TempDir {
    let to = TempDir::new(tag);
    std::fs::create_dir_all(to.aof_dir()).unwrap();
    for entry in std::fs::read_dir(from.aof_dir()).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.aof_dir().join(entry.file_name())).unwrap();
    }
    to
}

/// The file names of the manifest, base first.
fn manifest_files(dir: &TempDir) -> Vec<String> {
    let text = std::fs::read_to_string(dir.aof_dir().join("appendonly.aof.manifest")).unwrap();
    text.lines().map(|l| l.split(' ').nth(1).unwrap().to_string()).collect()
}

fn digest(c: &mut RawClient) -> Vec<u8> {
    ok(c, &["DEBUG", "DIGEST"])
}

/// Waits for Redis's background rewrite number `n` to be done.
fn wait_for_rewrite(c: &mut RawClient, n: u64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while info_field(c, "aof_rewrite_in_progress") != "0" || info_field(c, "aof_rewrites") != n.to_string() {
        assert!(Instant::now() < deadline, "the rewrite did not finish");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `aof-use-rdb-preamble yes`, the default: coordis's base is an RDB file
/// (`.base.rdb`, `aof-base 1`) that passes redis-check-aof and that Redis
/// and coordis load to the same DEBUG DIGEST; Redis's own such directory
/// loads into coordis with Redis's digest.
#[test]
fn the_rdb_preamble_loads_both_ways_with_the_same_digest() {
    const DEBUG: [&str; 2] = ["--enable-debug-command", "yes"];
    // coordis's files.
    let dir = TempDir::new("preamble-out");
    let mut server = coordis(&dir, &["--appendfsync", "always", DEBUG[0], DEBUG[1]]).unwrap();
    let mut c = RawClient::connect(server.addr()).unwrap();
    workload(&mut c, "before");
    ok(&mut c, &["BGREWRITEAOF"]);
    wait_for_rewrite(&mut c, 1);
    workload(&mut c, "after");
    let files = manifest_files(&dir);
    assert_eq!(files, ["appendonly.aof.2.base.rdb", "appendonly.aof.2.incr.aof"]);
    let base = std::fs::read(dir.aof_dir().join(&files[0])).unwrap();
    assert!(base.starts_with(b"REDIS0010"), "the base is an RDB file");
    assert!(
        base.windows(b"aof-base".len()).any(|w| w == b"aof-base"),
        "the base carries aof-base"
    );
    let written = digest(&mut c);
    drop(c);
    server.terminate(Duration::from_secs(10)).unwrap();
    let again = coordis(&dir, &[DEBUG[0], DEBUG[1]]).unwrap();
    let mut c = RawClient::connect(again.addr()).unwrap();
    assert_eq!(digest(&mut c), written, "coordis reloads its own files");
    let copy = copy_aof_dir(&dir, "preamble-redis");
    let Some(redis) = redis(&copy, &DEBUG) else {
        return;
    };
    check_aof(&dir.aof_dir());
    let diff = compare_digests(again.addr(), redis.addr(), DBS).unwrap();
    assert!(
        diff.is_empty(),
        "redis-server loaded coordis's files:\n{}",
        diff.join("\n")
    );
    drop((c, again, redis));
    // Redis's files.
    let theirs_dir = TempDir::new("preamble-in");
    let args = [
        "--appendonly",
        "yes",
        "--dir",
        theirs_dir.text(),
        "--appendfsync",
        "always",
        DEBUG[0],
        DEBUG[1],
    ];
    let redis = RedisServer::start(&args).unwrap().expect("Redis started before");
    let mut c = RawClient::connect(redis.addr()).unwrap();
    workload(&mut c, "before");
    ok(&mut c, &["BGREWRITEAOF"]);
    wait_for_rewrite(&mut c, 1);
    workload(&mut c, "after");
    assert!(
        manifest_files(&theirs_dir)[0].ends_with(".base.rdb"),
        "Redis wrote an RDB base"
    );
    let copy = copy_aof_dir(&theirs_dir, "preamble-coordis");
    let ours = coordis(&copy, &[DEBUG[0], DEBUG[1]]).unwrap();
    let diff = compare_digests(redis.addr(), ours.addr(), DBS).unwrap();
    assert!(diff.is_empty(), "coordis loaded Redis's files:\n{}", diff.join("\n"));
    assert!(dataset(ours.addr(), DBS).unwrap().len() > 20);
}

#[test]
fn redis_files_load_into_coordis() {
    let dir = TempDir::new("from-redis");
    let args = [
        "--appendonly",
        "yes",
        "--dir",
        dir.text(),
        "--aof-use-rdb-preamble",
        "no",
        "--appendfsync",
        "always",
    ];
    let Some(redis) = RedisServer::start(&args).unwrap() else {
        return;
    };
    let mut c = RawClient::connect(redis.addr()).unwrap();
    workload(&mut c, "before");
    ok(&mut c, &["BGREWRITEAOF"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while info_field(&mut c, "aof_rewrite_in_progress") != "0" || info_field(&mut c, "aof_rewrites") != "1" {
        assert!(Instant::now() < deadline, "Redis's rewrite did not finish");
        std::thread::sleep(Duration::from_millis(20));
    }
    workload(&mut c, "after");
    drop(c);
    drop(redis);
    // What Redis itself loads from its files is the reference (a group's
    // entries-read, say, does not survive Redis's own replay).
    let reloaded = RedisServer::start(&args).unwrap().expect("Redis started before");
    let theirs = dataset(reloaded.addr(), DBS).unwrap();
    drop(reloaded);
    let ours = coordis(&dir, &[]).unwrap();
    let loaded = dataset(ours.addr(), DBS).unwrap();
    assert!(theirs.len() > 20);
    let diff = compare_datasets(&theirs, &loaded, TTL_TOLERANCE_MS);
    assert!(diff.is_empty(), "coordis loaded Redis's files:\n{}", diff.join("\n"));
}

#[test]
fn a_cut_short_last_command_is_dropped_or_refused_as_aof_load_truncated_says() {
    let dir = TempDir::new("truncated");
    let mut server = coordis(&dir, &["--appendfsync", "always"]).unwrap();
    let mut c = RawClient::connect(server.addr()).unwrap();
    ok(&mut c, &["SET", "kept", "1"]);
    drop(c);
    server.terminate(Duration::from_secs(10)).unwrap();
    let incr = dir.aof_dir().join("appendonly.aof.1.incr.aof");
    let whole = std::fs::metadata(&incr).unwrap().len();
    let mut bytes = std::fs::read(&incr).unwrap();
    bytes.extend_from_slice(b"*3\r\n$3\r\nSET\r\n$4\r\nlost\r\n$1");
    std::fs::write(&incr, &bytes).unwrap();
    // aof-load-truncated no: Redis's error, and no server.
    let mut cmd = Command::new(BIN);
    cmd.args([
        "--appendonly",
        "yes",
        "--dir",
        dir.text(),
        "--aof-load-truncated",
        "no",
        "--port",
        "0",
    ]);
    let out = cmd.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "refused to start: {err}");
    assert!(
        err.contains("Unexpected end of file reading the append only file appendonly.aof.1.incr.aof"),
        "{err}"
    );
    // The default (yes): the last command dropped, the file cut back to it.
    let server = coordis(&dir, &[]).unwrap();
    let mut c = RawClient::connect(server.addr()).unwrap();
    assert_eq!(ok(&mut c, &["MGET", "kept", "lost"]), b"*2\r\n$1\r\n1\r\n$-1\r\n");
    let log = server.stderr_text();
    assert!(
        log.contains("AOF appendonly.aof.1.incr.aof loaded anyway because aof-load-truncated is enabled"),
        "{log}"
    );
    assert_eq!(std::fs::metadata(&incr).unwrap().len(), whole);
}

#[test]
fn an_open_transaction_at_the_end_is_reverted() {
    let dir = TempDir::new("multi");
    let mut server = coordis(&dir, &["--appendfsync", "always"]).unwrap();
    let mut c = RawClient::connect(server.addr()).unwrap();
    ok(&mut c, &["SET", "kept", "1"]);
    drop(c);
    server.terminate(Duration::from_secs(10)).unwrap();
    let incr = dir.aof_dir().join("appendonly.aof.1.incr.aof");
    let mut bytes = std::fs::read(&incr).unwrap();
    bytes.extend_from_slice(b"*1\r\n$5\r\nMULTI\r\n*3\r\n$3\r\nSET\r\n$4\r\nlost\r\n$1\r\n2\r\n");
    std::fs::write(&incr, &bytes).unwrap();
    let server = coordis(&dir, &[]).unwrap();
    let mut c = RawClient::connect(server.addr()).unwrap();
    assert_eq!(ok(&mut c, &["MGET", "kept", "lost"]), b"*2\r\n$1\r\n1\r\n$-1\r\n");
    assert!(server
        .stderr_text()
        .contains("Revert incomplete MULTI/EXEC transaction in AOF file appendonly.aof.1.incr.aof"));
}

/// A client INCRs as fast as it can, counting the replies it got, until
/// the server is killed; the count it reached.
fn incr_until_killed(addr: std::net::SocketAddr, kill: impl FnOnce()) -> u64 {
    let acked = Arc::new(AtomicU64::new(0));
    let writer = {
        let acked = acked.clone();
        std::thread::spawn(move || {
            let Ok(mut c) = RawClient::connect(addr) else { return };
            let _ = c.set_read_timeout(Some(Duration::from_secs(5)));
            while let Ok(reply) = c.command(&["INCR", "counter"]) {
                if !reply.starts_with(b":") {
                    break;
                }
                acked.fetch_add(1, Ordering::SeqCst);
            }
        })
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while acked.load(Ordering::SeqCst) < 200 {
        assert!(Instant::now() < deadline, "the client got no replies");
        std::thread::sleep(Duration::from_millis(5));
    }
    kill();
    writer.join().unwrap();
    acked.load(Ordering::SeqCst)
}

fn counter(c: &mut RawClient) -> u64 {
    let reply = ok(c, &["GET", "counter"]);
    let text = String::from_utf8_lossy(&reply);
    text.lines().nth(1).and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// Every policy writes a batch to the file before its replies leave (Redis
/// writes its AOF buffer before it sends replies): a killed process loses
/// no acknowledged write; only a power loss loses what was not fsynced.
/// (Under `everysec` a write made while an fsync runs is held back, as
/// Redis holds it: the kill here comes long before the first fsync, a
/// second after the start, and the tests below stage that case.)
const POLICIES: &[&str] = &["always", "everysec", "no"];

#[test]
fn kill_9_loses_no_acknowledged_write_under_every_appendfsync() {
    for policy in POLICIES {
        let dir = TempDir::new("kill9");
        let server = coordis(&dir, &["--appendfsync", policy]).unwrap();
        let addr = server.addr();
        let acked = incr_until_killed(addr, move || drop(server));
        let again = coordis(&dir, &[]).unwrap();
        let mut c = RawClient::connect(again.addr()).unwrap();
        let got = counter(&mut c);
        assert!(
            got >= acked && got <= acked + 1,
            "{policy}: acknowledged {acked}, after the restart {got}"
        );
    }
}

#[test]
fn kill_9_loses_no_acknowledged_write_under_every_appendfsync_on_redis() {
    for policy in POLICIES {
        let dir = TempDir::new("kill9-redis");
        let args = ["--appendonly", "yes", "--dir", dir.text(), "--appendfsync", policy];
        let Some(redis) = RedisServer::start(&args).unwrap() else {
            return;
        };
        let addr = redis.addr();
        let acked = incr_until_killed(addr, move || drop(redis));
        let again = RedisServer::start(&args).unwrap().expect("Redis started before");
        let mut c = RawClient::connect(again.addr()).unwrap();
        let got = counter(&mut c);
        assert!(
            got >= acked && got <= acked + 1,
            "{policy}: acknowledged {acked}, after the restart {got}"
        );
    }
}

fn embedded(dir: &TempDir, fsync: &str) -> coordis::BlockingServer {
    let mut builder = coordis::Server::builder();
    let config = builder.config_mut();
    config.aof.enabled = true;
    config.aof.fsync = fsync.into();
    config.apply("dir", &[dir.text().to_string()]).unwrap();
    builder.start_blocking().unwrap()
}

#[test]
fn a_staged_crash_under_everysec_loses_exactly_the_last_ms() {
    let dir = TempDir::new("crash");
    let server = embedded(&dir, "everysec");
    let clock = server.clock().unwrap();
    clock.freeze();
    let mut c = RawClient::connect(server.addr()).unwrap();
    ok(&mut c, &["SET", "old", "1"]);
    clock.advance(Duration::from_millis(600));
    ok(&mut c, &["SET", "new", "2"]);
    ok(&mut c, &["INCR", "new-too"]);
    let kept = server.control().crash(Some(Duration::from_millis(500)));
    assert!(kept.is_some_and(|k| k > 0));
    assert!(
        c.command(&["PING"]).is_err() || c.read_to_close().is_ok(),
        "the connection was dropped"
    );
    let mut c = RawClient::connect(server.addr()).unwrap();
    assert_eq!(
        ok(&mut c, &["MGET", "old", "new", "new-too"]),
        b"*3\r\n$1\r\n1\r\n$-1\r\n$-1\r\n"
    );
    // Over the wire, losing nothing older than 100 ms: a write 200 ms old stays.
    ok(&mut c, &["SET", "again", "3"]);
    clock.advance(Duration::from_millis(200));
    let mut w = RawClient::connect(server.addr()).unwrap();
    w.send(&RawClient::encode(&[b"COORDIS.SERVER", b"CRASH", b"LOSE-MS", b"100"]))
        .unwrap();
    assert_eq!(w.read_to_close().unwrap(), b"", "no reply: the server crashed");
    let mut c = RawClient::connect(server.addr()).unwrap();
    assert_eq!(ok(&mut c, &["MGET", "old", "again"]), b"*2\r\n$1\r\n1\r\n$1\r\n3\r\n");
}

#[test]
fn a_staged_crash_under_always_keeps_every_acknowledged_write() {
    let dir = TempDir::new("crash-always");
    let server = embedded(&dir, "always");
    let mut c = RawClient::connect(server.addr()).unwrap();
    for i in 0..50 {
        ok(&mut c, &["SET", &format!("k{i}"), "v"]);
    }
    server.control().crash(None);
    let mut c = RawClient::connect(server.addr()).unwrap();
    assert_eq!(ok(&mut c, &["DBSIZE"]), b":50\r\n");
}

/// `no-appendfsync-on-rewrite yes` under `always`: while a rewrite walks,
/// writes are acknowledged without an fsync, so a crash then loses them
/// (what the directive trades, as in Redis); with `no`, or once the
/// rewrite is over, an acknowledged write survives the crash.
#[test]
fn no_appendfsync_on_rewrite_loses_the_writes_acknowledged_during_a_rewrite() {
    for skip in ["no", "yes"] {
        let dir = TempDir::new("no-fsync-on-rewrite");
        let mut builder = coordis::Server::builder();
        let config = builder.config_mut();
        config.aof.enabled = true;
        config.aof.fsync = "always".into();
        config.enable_debug_command = "yes".into();
        config.apply("dir", &[dir.text().to_string()]).unwrap();
        // A walk of the keys below takes about two seconds.
        config.apply("bgsave-slice-keys", &["64".to_string()]).unwrap();
        config.apply("bgsave-slice-pause-us", &["2000".to_string()]).unwrap();
        let server = builder.start_blocking().unwrap();
        let mut c = RawClient::connect(server.addr()).unwrap();
        ok(&mut c, &["CONFIG", "SET", "no-appendfsync-on-rewrite", skip]);
        ok(&mut c, &["DEBUG", "POPULATE", "60000"]);
        ok(&mut c, &["SET", "before", "1"]);
        ok(&mut c, &["BGREWRITEAOF"]);
        ok(&mut c, &["SET", "during", "1"]);
        assert_eq!(
            info_field(&mut c, "aof_rewrite_in_progress"),
            "1",
            "the write came after the rewrite"
        );
        server.control().crash(None);
        let mut c = RawClient::connect(server.addr()).unwrap();
        let expected: &[u8] = if skip == "yes" {
            b"*2\r\n$1\r\n1\r\n$-1\r\n"
        } else {
            b"*2\r\n$1\r\n1\r\n$1\r\n1\r\n"
        };
        assert_eq!(
            ok(&mut c, &["MGET", "before", "during"]),
            expected,
            "no-appendfsync-on-rewrite {skip}"
        );
        // No walk runs now: a write is fsynced before its reply again.
        ok(&mut c, &["SET", "after", "1"]);
        server.control().crash(None);
        let mut c = RawClient::connect(server.addr()).unwrap();
        assert_eq!(
            ok(&mut c, &["GET", "after"]),
            b"$1\r\n1\r\n",
            "no-appendfsync-on-rewrite {skip}"
        );
    }
}

#[test]
fn config_set_appendonly_yes_rewrites_first() {
    let dir = TempDir::new("config-set");
    let mut builder = coordis::Server::builder();
    builder.config_mut().apply("dir", &[dir.text().to_string()]).unwrap();
    let server = builder.start_blocking().unwrap();
    let mut c = RawClient::connect(server.addr()).unwrap();
    ok(&mut c, &["SET", "before", "1"]);
    assert_eq!(info_field(&mut c, "aof_enabled"), "0");
    assert!(!dir.aof_dir().exists());
    ok(&mut c, &["CONFIG", "SET", "appendonly", "yes"]);
    assert_eq!(info_field(&mut c, "aof_enabled"), "1");
    wait_for_rewrite(&mut c, 1);
    let base = std::fs::read(dir.aof_dir().join("appendonly.aof.1.base.rdb")).unwrap();
    assert!(base.windows(6).any(|w| w == b"before"), "the base holds the dataset");
    ok(&mut c, &["SET", "after", "2"]);
    ok(&mut c, &["CONFIG", "SET", "appendonly", "no"]);
    let incr = std::fs::read(dir.aof_dir().join("appendonly.aof.1.incr.aof")).unwrap();
    assert!(
        incr.windows(5).any(|w| w == b"after"),
        "the incr file has the write after it"
    );
    assert_eq!(info_field(&mut c, "aof_enabled"), "0");
    assert_eq!(
        ok(&mut c, &["CONFIG", "GET", "appenddirname"]),
        b"*2\r\n$13\r\nappenddirname\r\n$13\r\nappendonlydir\r\n"
    );
}

#[test]
fn the_files_are_rewritten_once_they_grow_past_the_thresholds() {
    let dir = TempDir::new("auto");
    let server = embedded(&dir, "no");
    let mut c = RawClient::connect(server.addr()).unwrap();
    ok(&mut c, &["CONFIG", "SET", "auto-aof-rewrite-min-size", "1kb"]);
    ok(&mut c, &["CONFIG", "SET", "auto-aof-rewrite-percentage", "100"]);
    assert_eq!(info_field(&mut c, "aof_rewrites"), "0");
    let value = "x".repeat(100);
    for i in 0..30 {
        ok(&mut c, &["SET", "k", &format!("{value}{i}")]);
    }
    // The persistence timer runs every expiry tick (100 ms at hz 10).
    let deadline = Instant::now() + Duration::from_secs(10);
    while info_field(&mut c, "aof_rewrites") == "0" || info_field(&mut c, "aof_rewrite_in_progress") != "0" {
        assert!(Instant::now() < deadline, "no automatic rewrite");
        std::thread::sleep(Duration::from_millis(20));
    }
    let base: u64 = info_field(&mut c, "aof_base_size").parse().unwrap();
    assert!(base < 1024, "the rewritten base holds one key ({base} bytes)");
    let manifest = std::fs::read_to_string(dir.aof_dir().join("appendonly.aof.manifest")).unwrap();
    assert!(
        manifest.contains("appendonly.aof.2.base.rdb seq 2 type b"),
        "{manifest}"
    );
}

/// The directory's file names, sorted.
fn file_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn an_old_single_file_aof_is_migrated_into_the_directory_as_redis() {
    let mut old = Vec::new();
    for cmd in [
        &["SET", "k", "v"][..],
        &["RPUSH", "l", "a", "b", "c"],
        &["MULTI"],
        &["INCRBY", "n", "5"],
        &["EXEC"],
        &["SELECT", "1"],
        &["HSET", "h", "f", "v"],
    ] {
        let args: Vec<&[u8]> = cmd.iter().map(|a| a.as_bytes()).collect();
        old.extend(RawClient::encode(&args));
    }
    let ours_dir = TempDir::new("old-aof-coordis");
    let theirs_dir = TempDir::new("old-aof-redis");
    for dir in [&ours_dir, &theirs_dir] {
        std::fs::write(dir.0.join("appendonly.aof"), &old).unwrap();
    }
    let ours = coordis(&ours_dir, &[]).unwrap();
    let loaded = dataset(ours.addr(), DBS).unwrap();
    assert_eq!(loaded.len(), 4, "{loaded:?}");
    let Some(redis) = redis(&theirs_dir, &[]) else {
        return;
    };
    let theirs = dataset(redis.addr(), DBS).unwrap();
    let diff = compare_datasets(&theirs, &loaded, TTL_TOLERANCE_MS);
    assert!(diff.is_empty(), "{}", diff.join("\n"));
    for dir in [&ours_dir, &theirs_dir] {
        assert!(!dir.0.join("appendonly.aof").exists(), "{}", dir.text());
    }
    assert_eq!(file_names(&ours_dir.aof_dir()), file_names(&theirs_dir.aof_dir()));
    let manifest = |dir: &TempDir| std::fs::read_to_string(dir.aof_dir().join("appendonly.aof.manifest")).unwrap();
    assert_eq!(manifest(&ours_dir), manifest(&theirs_dir));
}

/// DEBUG LOADAOF, as Redis's: what the writer holds is flushed (here under
/// `appendfsync everysec`), the dataset is emptied and read back from the
/// base and the incremental file, so every database ends as it was; a
/// FUNCTION library comes back from the files too.
#[test]
fn debug_loadaof_reads_the_files_back_as_redis_does() {
    const DEBUG: [&str; 2] = ["--enable-debug-command", "yes"];
    let library = "#!lua name=lib\nredis.register_function('f', function() return 1 end)";
    let check = |c: &mut RawClient| {
        ok(c, &["FUNCTION", "LOAD", library]);
        workload(c, "before");
        ok(c, &["BGREWRITEAOF"]);
        wait_for_rewrite(c, 1);
        workload(c, "after");
        let written = digest(c);
        let keys = c.command(&["DBSIZE"]).unwrap();
        assert_eq!(c.command(&["DEBUG", "LOADAOF"]).unwrap(), b"+OK\r\n");
        assert_eq!(digest(c), written, "the dataset read back");
        assert_eq!(c.command(&["DBSIZE"]).unwrap(), keys);
        assert_eq!(c.command(&["FCALL", "f", "0"]).unwrap(), b":1\r\n");
        // What the load replayed is no change: nothing to save, nothing
        // written to the file (were it, the next load would load again).
        assert_eq!(info_field(c, "rdb_changes_since_last_save"), "0");
        assert_eq!(c.command(&["DEBUG", "LOADAOF"]).unwrap(), b"+OK\r\n");
        assert_eq!(digest(c), written, "the dataset read back twice");
    };
    let no_loadaof_written = |dir: &TempDir| {
        let files = dir.aof_dir();
        for name in file_names(&files) {
            let bytes = std::fs::read(files.join(&name)).unwrap();
            let text = String::from_utf8_lossy(&bytes).to_lowercase();
            assert!(!text.contains("loadaof"), "{name} holds the DEBUG LOADAOF");
        }
    };
    let dir = TempDir::new("loadaof");
    let written = {
        let server = coordis(&dir, &["--appendfsync", "everysec", DEBUG[0], DEBUG[1]]).unwrap();
        let mut c = RawClient::connect(server.addr()).unwrap();
        check(&mut c);
        digest(&mut c)
    };
    no_loadaof_written(&dir);
    let again = coordis(&dir, &[DEBUG[0], DEBUG[1]]).unwrap();
    assert_eq!(
        digest(&mut RawClient::connect(again.addr()).unwrap()),
        written,
        "the restart"
    );
    let theirs = TempDir::new("loadaof-redis");
    if let Some(redis) = redis(&theirs, &DEBUG) {
        check(&mut RawClient::connect(redis.addr()).unwrap());
        no_loadaof_written(&theirs);
    }
}

/// A file that holds a DEBUG LOADAOF (made by hand: neither server writes
/// one) loads: the command is refused inside the load, which goes on,
/// instead of loading the files again from within their own load until the
/// stack runs out.
#[test]
fn a_debug_loadaof_inside_the_files_is_refused_while_they_load() {
    let dir = TempDir::new("loadaof-inside");
    {
        let server = coordis(&dir, &["--enable-debug-command", "yes"]).unwrap();
        let mut c = RawClient::connect(server.addr()).unwrap();
        ok(&mut c, &["SET", "before", "1"]);
    }
    let files = dir.aof_dir();
    let incr = file_names(&files)
        .into_iter()
        .find(|n| n.ends_with(".incr.aof"))
        .unwrap();
    let mut bytes = std::fs::read(files.join(&incr)).unwrap();
    bytes.extend_from_slice(b"*2\r\n$5\r\nDEBUG\r\n$7\r\nLOADAOF\r\n*3\r\n$3\r\nSET\r\n$5\r\nafter\r\n$1\r\n2\r\n");
    std::fs::write(files.join(&incr), bytes).unwrap();
    let server = coordis(&dir, &["--enable-debug-command", "yes"]).unwrap();
    let mut c = RawClient::connect(server.addr()).unwrap();
    assert_eq!(
        c.command(&["MGET", "before", "after"]).unwrap(),
        b"*2\r\n$1\r\n1\r\n$1\r\n2\r\n"
    );
}

/// An approximate trim with LIMIT is written as the exact trim it made
/// (`MAXLEN = n` or `MINID = id`, LIMIT kept), and loading the files
/// replays it whole, as Redis's loader obeys it: the stream has the same
/// length after DEBUG LOADAOF, even with other node sizes.
#[test]
fn an_approximate_trim_with_limit_loads_back_as_it_went() {
    let run = |c: &mut RawClient| -> Vec<Vec<u8>> {
        ok(c, &["CONFIG", "SET", "stream-node-max-entries", "100"]);
        let mut out = vec![];
        for (key, trim) in [("bylen", ["MAXLEN", "~", "55"]), ("byid", ["MINID", "~", "0-56"])] {
            for i in 1..=100 {
                ok(c, &["XADD", key, &format!("0-{i}"), "item", "v"]);
            }
            let mut args = vec!["XADD", key];
            args.extend(trim);
            args.extend(["LIMIT", "30", "0-101", "item", "v"]);
            ok(c, &args);
            out.push(c.command(&["XLEN", key]).unwrap());
        }
        ok(c, &["CONFIG", "SET", "stream-node-max-entries", "1"]);
        assert_eq!(c.command(&["DEBUG", "LOADAOF"]).unwrap(), b"+OK\r\n");
        for key in ["bylen", "byid"] {
            out.push(c.command(&["XLEN", key]).unwrap());
        }
        out
    };
    let dir = TempDir::new("xadd-limit");
    let server = coordis(&dir, &["--enable-debug-command", "yes"]).unwrap();
    let ours = run(&mut RawClient::connect(server.addr()).unwrap());
    assert_eq!(
        ours,
        vec![b":101\r\n".to_vec(); 4],
        "nothing trimmed under the limit, and the same after the load"
    );
    let theirs = TempDir::new("xadd-limit-redis");
    if let Some(redis) = redis(&theirs, &["--enable-debug-command", "yes"]) {
        assert_eq!(run(&mut RawClient::connect(redis.addr()).unwrap()), ours);
    }
}

/// Polls `field` of INFO persistence until it reads `want` (5 s at most).
fn wait_info(c: &mut RawClient, field: &str, want: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while info_field(c, field) != want {
        assert!(Instant::now() < deadline, "{field} never read {want}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Under `everysec`, a write made while the file's fsync runs is held back
/// in memory and acknowledged at once, then written as soon as the fsync
/// ends; one held back 2 s goes ahead and counts in `aof_delayed_fsync`.
/// Redis's `flushAppendOnlyFile` does both; its fsync cannot be slowed from
/// a test, coordis's can (`COORDIS.SERVER FSYNC-STALL`).
#[test]
fn everysec_holds_writes_back_while_a_slow_fsync_runs_as_redis_does() {
    let dir = TempDir::new("fsync-stall");
    let server = embedded(&dir, "everysec");
    let clock = server.clock().unwrap();
    let mut c = RawClient::connect(server.addr()).unwrap();
    assert_eq!(ok(&mut c, &["COORDIS.SERVER", "FSYNC-STALL", "1500"]), b"+OK\r\n");
    ok(&mut c, &["SET", "a", "1"]);
    // The thread's fsync of `a` starts within a second, then stalls.
    wait_info(&mut c, "aof_pending_bio_fsync", "1");
    let size = info_field(&mut c, "aof_current_size");
    let sent = Instant::now();
    ok(&mut c, &["SET", "b", "2"]);
    assert!(
        sent.elapsed() < Duration::from_millis(1000),
        "the reply did not wait for the fsync"
    );
    assert_ne!(info_field(&mut c, "aof_buffer_length"), "0", "held in memory");
    assert_eq!(info_field(&mut c, "aof_current_size"), size, "not yet written");
    // Once the fsync is over, the thread writes it.
    wait_info(&mut c, "aof_buffer_length", "0");
    assert_ne!(info_field(&mut c, "aof_current_size"), size);
    assert_eq!(info_field(&mut c, "aof_delayed_fsync"), "0");

    // Held back 2 s of server time: the next write goes ahead.
    server.control().stall_fsync(Duration::from_millis(3000));
    ok(&mut c, &["SET", "c", "3"]);
    wait_info(&mut c, "aof_pending_bio_fsync", "1");
    let size = info_field(&mut c, "aof_current_size");
    ok(&mut c, &["SET", "d", "4"]);
    assert_ne!(info_field(&mut c, "aof_buffer_length"), "0");
    clock.advance(Duration::from_millis(2500));
    ok(&mut c, &["SET", "e", "5"]);
    assert_eq!(info_field(&mut c, "aof_delayed_fsync"), "1");
    assert_eq!(info_field(&mut c, "aof_buffer_length"), "0");
    assert_ne!(info_field(&mut c, "aof_current_size"), size, "written during the fsync");
    assert_eq!(info_field(&mut c, "aof_pending_bio_fsync"), "1");
    server.control().stall_fsync(Duration::ZERO);
    wait_info(&mut c, "aof_pending_bio_fsync", "0");
    ok(&mut c, &["CONFIG", "RESETSTAT"]);
    assert_eq!(info_field(&mut c, "aof_delayed_fsync"), "0");
    let mut c = RawClient::connect(server.addr()).unwrap();
    assert_eq!(
        ok(&mut c, &["MGET", "a", "b", "c", "d", "e"]),
        b"*5\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n$1\r\n4\r\n$1\r\n5\r\n"
    );
}

/// The failure a slow disk stages: an acknowledged write held back behind a
/// stalled fsync is lost by a crash, with `everysec` losing more than its
/// second (a lock taken then is gone after the restart).
#[test]
fn a_crash_behind_a_stalled_fsync_loses_the_writes_held_back() {
    let dir = TempDir::new("fsync-stall-crash");
    let server = embedded(&dir, "everysec");
    let mut c = RawClient::connect(server.addr()).unwrap();
    server.control().stall_fsync(Duration::from_millis(1500));
    ok(&mut c, &["SET", "before", "1"]);
    wait_info(&mut c, "aof_pending_bio_fsync", "1");
    assert_eq!(ok(&mut c, &["SET", "lock", "me", "NX", "PX", "30000"]), b"+OK\r\n");
    server.control().stall_fsync(Duration::ZERO);
    server.control().crash(None);
    let mut c = RawClient::connect(server.addr()).unwrap();
    assert_eq!(ok(&mut c, &["MGET", "before", "lock"]), b"*2\r\n$1\r\n1\r\n$-1\r\n");
}

/// What Redis 7.0.15 answers writes and PING while its last write (or
/// background fsync) of the append-only file failed: the text of server.c's
/// `writeCommandsGetDiskErrorMessage`, with the errno's `strerror`. A test
/// cannot fill Redis's disk portably; coordis stages it
/// (`COORDIS.SERVER DISK-FULL`).
const DISK_FULL: &[u8] = b"-MISCONF Errors writing to the AOF file: No space left on device\r\n";

/// Under `everysec`, a full disk: the write that meets it was made in
/// memory and is acknowledged (Redis writes its buffer after the command
/// ran); then writes and PING are refused until a write succeeds again,
/// which the writer tries at least once a second (Redis's `serverCron`),
/// and the effects held back meanwhile reach the file.
#[test]
fn a_full_disk_refuses_writes_and_ping_until_the_held_back_writes_are_written() {
    let dir = TempDir::new("disk-full");
    let server = embedded(&dir, "everysec");
    let mut c = RawClient::connect(server.addr()).unwrap();
    ok(&mut c, &["SET", "before", "1"]);
    assert_eq!(ok(&mut c, &["COORDIS.SERVER", "DISK-FULL", "ON"]), b"+OK\r\n");
    assert_eq!(ok(&mut c, &["SET", "held", "2"]), b"+OK\r\n");
    // Its write failed there and then, or, behind a running fsync, as soon
    // as that ended.
    wait_info(&mut c, "aof_last_write_status", "err");
    assert_ne!(info_field(&mut c, "aof_buffer_length"), "0", "kept for the next try");
    assert_eq!(c.command(&["SET", "k", "v"]).unwrap(), DISK_FULL);
    assert_eq!(c.command(&["PING"]).unwrap(), DISK_FULL);
    // A lock cannot be taken while the disk is full.
    assert_eq!(
        c.command(&["SET", "lock", "me", "NX", "PX", "30000"]).unwrap(),
        DISK_FULL
    );
    // A script's write, as Redis's `scriptVerifyWriteCommandAllow` refuses it.
    let script = c.command(&["EVAL", "return redis.call('set','s','1')", "0"]).unwrap();
    assert!(
        script.starts_with(&DISK_FULL[..DISK_FULL.len() - 2])
            && script.ends_with(b" script: 331f1eab19bd8416f59ae02df4f687b1fb44edb5, on @user_script:1.\r\n"),
        "{}",
        String::from_utf8_lossy(&script)
    );
    // Reads go on.
    assert_eq!(
        ok(&mut c, &["MGET", "before", "held", "k"]),
        b"*3\r\n$1\r\n1\r\n$1\r\n2\r\n$-1\r\n"
    );

    server.control().disk_full(false);
    wait_info(&mut c, "aof_last_write_status", "ok");
    assert_eq!(info_field(&mut c, "aof_buffer_length"), "0");
    assert_eq!(ok(&mut c, &["PING"]), b"+PONG\r\n");
    assert_eq!(ok(&mut c, &["SET", "lock", "me", "NX", "PX", "30000"]), b"+OK\r\n");
    // Everything written reaches the restart (a crash that loses no write
    // keeps what was written, not what was only in memory).
    server.control().crash(Some(Duration::ZERO));
    let mut c = RawClient::connect(server.addr()).unwrap();
    assert_eq!(
        ok(&mut c, &["MGET", "before", "held", "lock", "k"]),
        b"*4\r\n$1\r\n1\r\n$1\r\n2\r\n$2\r\nme\r\n$-1\r\n"
    );
}

/// A failed fsync refuses writes as a failed write does (Redis's
/// `aof_bio_fsync_status`): here the disk fills while the fsync of a
/// written batch runs (slowed, so the test knows when); once an fsync
/// succeeds, writes are accepted again.
#[test]
fn a_failed_fsync_refuses_writes_until_one_succeeds() {
    let dir = TempDir::new("disk-full-fsync");
    let server = embedded(&dir, "everysec");
    let mut c = RawClient::connect(server.addr()).unwrap();
    server.control().stall_fsync(Duration::from_millis(1500));
    ok(&mut c, &["SET", "a", "1"]);
    wait_info(&mut c, "aof_pending_bio_fsync", "1");
    server.control().disk_full(true);
    server.control().stall_fsync(Duration::ZERO);
    wait_info(&mut c, "aof_last_write_status", "err");
    assert_eq!(info_field(&mut c, "aof_buffer_length"), "0", "no write failed");
    assert_eq!(c.command(&["INCR", "n"]).unwrap(), DISK_FULL);
    server.control().disk_full(false);
    // The next fsync (within a second) covers `a` again.
    wait_info(&mut c, "aof_last_write_status", "ok");
    assert_eq!(ok(&mut c, &["INCR", "n"]), b":1\r\n");
}

/// Under `always` a failed write cannot be taken back and its reply must
/// not leave: Redis logs "Can't recover from AOF write error when the AOF
/// fsync policy is 'always'. Exiting..." and exits; an embedded server
/// stops, its client's connection dropped without the reply.
#[test]
fn a_full_disk_under_always_stops_the_server() {
    let dir = TempDir::new("disk-full-always");
    let server = embedded(&dir, "always");
    let mut c = RawClient::connect(server.addr()).unwrap();
    ok(&mut c, &["SET", "a", "1"]);
    let mut reader = RawClient::connect(server.addr()).unwrap();
    server.control().disk_full(true);
    let reply = c.command(&["SET", "b", "2"]);
    assert!(reply.is_err() || c.read_to_close().is_ok(), "the reply left: {reply:?}");
    // Every other client sees the drop, and the listener is gone.
    assert!(reader.command(&["GET", "a"]).is_err() || reader.read_to_close().is_ok());
    let deadline = Instant::now() + Duration::from_secs(10);
    while RawClient::connect(server.addr()).is_ok_and(|mut c| c.command(&["PING"]).is_ok()) {
        assert!(Instant::now() < deadline, "the server still answers");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `coordis-server` under `always` exits with status 1 after Redis's line.
#[test]
fn coordis_server_exits_1_when_a_write_fails_under_always() {
    let dir = TempDir::new("disk-full-exit");
    let mut server = coordis(&dir, &["--appendfsync", "always", "--enable-test-commands", "yes"]).unwrap();
    let mut c = RawClient::connect(server.addr()).unwrap();
    ok(&mut c, &["SET", "a", "1"]);
    ok(&mut c, &["COORDIS.SERVER", "DISK-FULL", "ON"]);
    let reply = c.command(&["SET", "b", "2"]);
    assert!(reply.is_err() || c.read_to_close().is_ok(), "the reply left: {reply:?}");
    let status = server.wait_exit(Duration::from_secs(15)).unwrap().expect("it exits");
    assert_eq!(status.code(), Some(1));
    let log = server.stderr_text();
    assert!(
        log.contains("Can't recover from AOF write error when the AOF fsync policy is 'always'. Exiting..."),
        "{log}"
    );
}

/// Polls until `done` (10 s at most).
fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A replica whose append-only file cannot be written gets its primary's
/// next write: with `replica-ignore-disk-write-errors no` (the default) it
/// stops, as Redis panics ("Replica was unable to write command to
/// disk."); with `yes` it applies the stream while its own clients get
/// `-MISCONF`, as Redis's.
#[test]
fn a_replica_whose_disk_fails_stops_at_its_primarys_next_write_unless_told_to_ignore_it() {
    for ignore in ["no", "yes"] {
        let primary = coordis::Server::builder().start_blocking().unwrap();
        let dir = TempDir::new("replica-disk-full");
        let replica = embedded(&dir, "everysec");
        let mut p = RawClient::connect(primary.addr()).unwrap();
        let mut r = RawClient::connect(replica.addr()).unwrap();
        ok(&mut p, &["CONFIG", "SET", "repl-diskless-sync-delay", "0"]);
        ok(&mut r, &["CONFIG", "SET", "replica-ignore-disk-write-errors", ignore]);
        ok(&mut r, &["REPLICAOF", "127.0.0.1", &primary.addr().port().to_string()]);
        ok(&mut p, &["SET", "synced", "1"]);
        wait_until("the replica to sync", || {
            r.command(&["GET", "synced"]).unwrap() == b"$1\r\n1\r\n"
        });
        replica.control().disk_full(true);
        // The first write fails in the replica's file, in memory still.
        ok(&mut p, &["SET", "a", "1"]);
        wait_until("the replica's write to fail", || {
            info_field(&mut r, "aof_last_write_status") == "err"
        });
        ok(&mut p, &["SET", "b", "2"]);
        if ignore == "no" {
            wait_until("the replica to stop", || {
                RawClient::connect(replica.addr()).map_or(true, |mut c| c.command(&["PING"]).is_err())
            });
        } else {
            wait_until("the replica to apply the write", || {
                r.command(&["GET", "b"]).unwrap() == b"$1\r\n2\r\n"
            });
            assert_eq!(
                r.command(&["PING"]).unwrap(),
                b"-MISCONF Errors writing to the AOF file: No space left on device\r\n"
            );
        }
    }
}

/// An append-only directory whose one incremental file holds `LPUSH k a`
/// then `INCR k`: the INCR fails as the file loads, as it would where a
/// file and the data it was written over disagree.
fn failing_aof(tag: &str) -> TempDir {
    let dir = TempDir::new(tag);
    std::fs::create_dir_all(dir.aof_dir()).unwrap();
    std::fs::write(
        dir.aof_dir().join("appendonly.aof.manifest"),
        "file appendonly.aof.1.incr.aof seq 1 type i\n",
    )
    .unwrap();
    std::fs::write(
        dir.aof_dir().join("appendonly.aof.1.incr.aof"),
        "*3\r\n$5\r\nLPUSH\r\n$1\r\nk\r\n$1\r\na\r\n*2\r\n$4\r\nINCR\r\n$1\r\nk\r\n",
    )
    .unwrap();
    dir
}

/// Redis's log lines for the INCR of [`failing_aof`]: the error, and the
/// panic under `propagation-error-behavior panic`.
const AOF_ERROR_LINE: &str = "== CRITICAL == This server is sending an error to its AOF-loading-client: '-WRONGTYPE Operation against a key holding the wrong kind of value' after processing the command 'incr'";
const AOF_PANIC_LINE: &str =
    "Guru Meditation: This server panicked sending an error to its AOF-loading-client after processing the command 'incr'";

/// A command of the file that fails as it loads is logged and counted
/// (`unexpected_error_replies`) and the load goes on; under
/// `propagation-error-behavior panic` the server does not start; as in
/// Redis (the directive was accepted and ignored, the error unseen).
#[test]
fn an_error_loading_the_file_is_counted_or_stops_the_start_as_propagation_error_behavior_says() {
    let dir = failing_aof("propagation-ignore");
    let server = coordis(&dir, &[]).unwrap();
    let mut c = RawClient::connect(server.addr()).unwrap();
    assert_eq!(ok(&mut c, &["LRANGE", "k", "0", "-1"]), b"*1\r\n$1\r\na\r\n");
    assert_eq!(c.info_field("stats", "unexpected_error_replies"), "1");
    let log = server.stderr_text();
    assert!(log.contains(AOF_ERROR_LINE), "{log}");
    drop(c);
    drop(server);
    let dir = failing_aof("propagation-panic");
    let out = Command::new(BIN)
        .args(["--appendonly", "yes", "--dir", dir.text(), "--port", "0"])
        .args(["--propagation-error-behavior", "panic"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "refused to start: {err}");
    assert!(err.contains(AOF_PANIC_LINE), "{err}");

    let dir = failing_aof("propagation-ignore-redis");
    let Some(redis) = redis(&dir, &[]) else {
        return;
    };
    let mut c = RawClient::connect(redis.addr()).unwrap();
    assert_eq!(ok(&mut c, &["LRANGE", "k", "0", "-1"]), b"*1\r\n$1\r\na\r\n");
    assert_eq!(c.info_field("stats", "unexpected_error_replies"), "1", "redis-server");
    drop(redis);
    let dir = failing_aof("propagation-panic-redis");
    let port = coordis::testing::free_port().unwrap().to_string();
    let out = Command::new("redis-server")
        .args(["--appendonly", "yes", "--dir", dir.text(), "--port", &port])
        .args(["--propagation-error-behavior", "panic"])
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(!out.status.success(), "redis-server refused to start: {log}");
    assert!(log.contains(AOF_ERROR_LINE) && log.contains(AOF_PANIC_LINE), "{log}");
}
