//! The dataset loading at start while clients connect, compared with Redis
//! 7.0.15: `-LOADING` for commands not flagged `loading`, INFO's
//! `loading:1` and its progress fields, then the whole dataset. Both
//! servers load the same RDB file, or the same append-only files (replayed
//! a slice at a time), slowed down by `key-load-delay`.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use coordis::testing::{free_port, RawClient, RedisServer, TempDir};

/// Keys in the file: with `key-load-delay` 500 µs, a load of about 1.5 s.
const KEYS: usize = 3000;

/// Writes `dir/dump.rdb` with [`KEYS`] string keys, from an embedded server.
fn write_dump(dir: &TempDir) {
    let mut builder = coordis::Server::builder();
    builder.config_mut().apply("dir", &[dir.text().to_string()]).unwrap();
    let server = builder.start_blocking().unwrap();
    let mut c = RawClient::connect(server.addr()).unwrap();
    let mut pipeline = Vec::new();
    for i in 0..KEYS {
        let (key, value) = (format!("key:{i}"), format!("value:{i}"));
        pipeline.extend(RawClient::encode(&[b"SET", key.as_bytes(), value.as_bytes()]));
    }
    c.send(&pipeline).unwrap();
    for _ in 0..KEYS {
        assert_eq!(c.read_reply().unwrap(), b"+OK\r\n");
    }
    assert_eq!(c.command(&["SAVE"]).unwrap(), b"+OK\r\n");
}

/// Writes `dir/appendonlydir` with [`KEYS`] SETs in its incremental file,
/// from an embedded server.
fn write_aof(dir: &TempDir) {
    let mut builder = coordis::Server::builder();
    let config = builder.config_mut();
    config.apply("dir", &[dir.text().to_string()]).unwrap();
    config.apply("appendonly", &["yes".to_string()]).unwrap();
    let server = builder.start_blocking().unwrap();
    let mut c = RawClient::connect(server.addr()).unwrap();
    let mut pipeline = Vec::new();
    for i in 0..KEYS {
        let (key, value) = (format!("key:{i}"), format!("value:{i}"));
        pipeline.extend(RawClient::encode(&[b"SET", key.as_bytes(), value.as_bytes()]));
    }
    c.send(&pipeline).unwrap();
    for _ in 0..KEYS {
        assert_eq!(c.read_reply().unwrap(), b"+OK\r\n");
    }
    drop(c);
    drop(server);
    let incr = std::fs::metadata(dir.aof_dir().join("appendonly.aof.1.incr.aof")).unwrap();
    assert!(incr.len() > (KEYS * 20) as u64, "the writes are in the incr file");
}

/// [`write_aof`], then BGREWRITEAOF: the keys are in an RDB base file
/// (`aof-use-rdb-preamble yes`, the default).
fn write_aof_with_rdb_base(dir: &TempDir) {
    write_aof(dir);
    let mut builder = coordis::Server::builder();
    let config = builder.config_mut();
    config.apply("dir", &[dir.text().to_string()]).unwrap();
    config.apply("appendonly", &["yes".to_string()]).unwrap();
    let server = builder.start_blocking().unwrap();
    let mut c = RawClient::connect(server.addr()).unwrap();
    assert!(c.command(&["BGREWRITEAOF"]).unwrap().starts_with(b"+"));
    let deadline = Instant::now() + Duration::from_secs(20);
    while !String::from_utf8(c.command(&["INFO", "persistence"]).unwrap())
        .unwrap()
        .contains("aof_rewrite_in_progress:0\r\naof_rewrite_scheduled:0")
    {
        assert!(Instant::now() < deadline, "the rewrite did not end");
        std::thread::sleep(Duration::from_millis(10));
    }
    drop(c);
    drop(server);
    let base = std::fs::read(dir.aof_dir().join("appendonly.aof.2.base.rdb")).unwrap();
    assert!(
        base.starts_with(b"REDIS") && base.len() > KEYS * 10,
        "the keys are in the base"
    );
}

/// Kills the server however the test ends.
struct Stop(Child);

impl Drop for Stop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// What a client sees of a server started on `dir`: the first PING's reply
/// while it loads, the INFO persistence field names then, and DBSIZE once
/// PING answers PONG.
#[derive(Debug, PartialEq)]
struct Seen {
    ping_while_loading: Vec<u8>,
    loading_fields: Vec<String>,
    dbsize: Vec<u8>,
}

fn watch_load(program: &str, dir: &Path, extra: &[&str]) -> Seen {
    watch_load_timed(program, dir, extra).0
}

/// [`watch_load`], with how long the first PING waited for its reply.
fn watch_load_timed(program: &str, dir: &Path, extra: &[&str]) -> (Seen, Duration) {
    let port = free_port().unwrap();
    let child = Command::new(program)
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", ""])
        .arg("--dir")
        .arg(dir)
        .args([
            "--key-load-delay",
            "500",
            "--loading-process-events-interval-bytes",
            "1024",
        ])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _stop = Stop(child);
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut c = loop {
        if let Ok(c) = RawClient::connect(addr) {
            break c;
        }
        assert!(Instant::now() < deadline, "{program} did not listen");
        std::thread::sleep(Duration::from_millis(5));
    };
    let asked = Instant::now();
    let ping_while_loading = c.command(&["PING"]).unwrap();
    let waited = asked.elapsed();
    let info = String::from_utf8(c.command(&["INFO", "persistence"]).unwrap()).unwrap();
    assert!(info.contains("\r\nloading:1\r\n"), "{program}: {info}");
    let loading_fields = info
        .split("\r\n")
        .filter_map(|l| l.split_once(':'))
        .map(|(name, _)| name.to_string())
        .filter(|name| name.starts_with("loading"))
        .collect();
    while c.command(&["PING"]).unwrap() != b"+PONG\r\n" {
        assert!(Instant::now() < deadline, "{program} did not finish loading");
        std::thread::sleep(Duration::from_millis(20));
    }
    let info = String::from_utf8(c.command(&["INFO", "persistence"]).unwrap()).unwrap();
    assert!(info.contains("\r\nloading:0\r\n"), "{program}: {info}");
    assert!(!info.contains("loading_start_time"), "{program}: {info}");
    let seen = Seen {
        ping_while_loading,
        loading_fields,
        dbsize: c.command(&["DBSIZE"]).unwrap(),
    };
    (seen, waited)
}

/// Starts coordis-server on `dir` (with `extra`) and checks it answers
/// `-LOADING` while it loads, then has every key; then redis-server on the
/// same files must be seen the same way (neither writes: save ""). How long
/// coordis's first PING waited.
fn loads_as_redis(dir: &TempDir, extra: &[&str]) -> Duration {
    let (coordis, waited) = watch_load_timed(env!("CARGO_BIN_EXE_coordis-server"), &dir.0, extra);
    assert_eq!(
        coordis.ping_while_loading,
        b"-LOADING Redis is loading the dataset in memory\r\n"
    );
    assert_eq!(coordis.dbsize, format!(":{KEYS}\r\n").into_bytes());
    if RedisServer::start(&[]).unwrap().is_some() {
        assert_eq!(coordis, watch_load("redis-server", &dir.0, extra));
    }
    waited
}

#[test]
fn clients_get_loading_while_the_file_loads_then_the_dataset_as_redis() {
    let dir = TempDir::new("loading");
    write_dump(&dir);
    loads_as_redis(&dir, &[]);
}

#[test]
fn clients_get_loading_while_the_append_only_file_is_replayed_as_redis() {
    let dir = TempDir::new("loading-aof");
    write_aof(&dir);
    loads_as_redis(&dir, &["--appendonly", "yes"]);
}

/// The base is parsed a slice at a time too: clients get `-LOADING`
/// while its keys load, as from Redis, and see none of them before.
#[test]
fn clients_get_loading_while_an_rdb_base_loads_as_redis() {
    let dir = TempDir::new("loading-aof-base");
    write_aof_with_rdb_base(&dir);
    let waited = loads_as_redis(&dir, &["--appendonly", "yes"]);
    // The base takes about 1.5 s to load; a slice of 1024 bytes, some 25 ms.
    assert!(
        waited < Duration::from_millis(750),
        "PING waited {waited:?} for the base"
    );
}

#[test]
fn an_embedded_server_starts_once_its_file_is_loaded() {
    let dir = TempDir::new("loading-embedded");
    write_dump(&dir);
    let mut builder = coordis::Server::builder();
    let config = builder.config_mut();
    config.apply("dir", &[dir.text().to_string()]).unwrap();
    config.apply("key-load-delay", &["-10".to_string()]).unwrap();
    let server = builder.start_blocking().unwrap();
    let mut c = RawClient::connect(server.addr()).unwrap();
    assert_eq!(c.command(&["DBSIZE"]).unwrap(), format!(":{KEYS}\r\n").into_bytes());
    assert_eq!(c.command(&["GET", "key:7"]).unwrap(), b"$7\r\nvalue:7\r\n");
}

/// DEBUG RELOAD and its options: a reload flushes the libraries too; with
/// NOFLUSH a library of the file that exists already is an error without
/// MERGE (Redis's load fails) and replaced with it.
const RELOAD_SESSION: &[&[&str]] = &[
    &["SET", "k", "v"],
    &["HSET", "h", "f", "v"],
    &["SET", "t", "v", "EX", "1000"],
    &["DEBUG", "RELOAD"],
    &["GET", "k"],
    &["HGETALL", "h"],
    &["TTL", "t"],
    &["DEBUG", "RELOAD", "BOGUS"],
    &["SET", "x", "1"],
    &["DEBUG", "RELOAD", "NOSAVE"],
    &["GET", "x"],
    &["SET", "y", "1"],
    &["DEBUG", "RELOAD", "NOSAVE", "NOFLUSH", "MERGE"],
    &["MGET", "y", "k"],
    &["DBSIZE"],
    &[
        "FUNCTION",
        "LOAD",
        "#!lua name=lib\nredis.register_function('f', function() return 1 end)",
    ],
    &["DEBUG", "RELOAD"],
    &["DBSIZE"],
    &["DEBUG", "RELOAD", "NOSAVE", "NOFLUSH", "MERGE"],
    &["DBSIZE"],
    &["FCALL", "f", "0"],
    &["FUNCTION", "DELETE", "lib"],
    &[
        "FUNCTION",
        "LOAD",
        "#!lua name=lib\nredis.register_function('f', function() return 2 end)",
    ],
    &["FLUSHDB"],
    &["DEBUG", "RELOAD", "NOSAVE", "NOFLUSH"],
    &["FCALL", "f", "0"],
    &["DEBUG", "RELOAD", "NOSAVE", "NOFLUSH", "MERGE"],
    &["FCALL", "f", "0"],
];

fn reload_session(addr: SocketAddr) -> Vec<Vec<u8>> {
    let mut c = RawClient::connect(addr).unwrap();
    RELOAD_SESSION.iter().map(|cmd| c.command(cmd).unwrap()).collect()
}

#[test]
fn debug_reload_as_redis() {
    let dir = TempDir::new("debug-reload");
    let mut builder = coordis::Server::builder();
    let config = builder.config_mut();
    config.apply("dir", &[dir.text().to_string()]).unwrap();
    config.apply("enable-debug-command", &["yes".to_string()]).unwrap();
    let server = builder.start_blocking().unwrap();
    let ours = reload_session(server.addr());
    assert_eq!(ours[3], b"+OK\r\n");
    assert_eq!(ours[4], b"$1\r\nv\r\n");
    let Some(redis) = RedisServer::start(&["--enable-debug-command", "yes"]).unwrap() else {
        return;
    };
    let theirs = reload_session(redis.addr());
    for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
        assert_eq!(
            String::from_utf8_lossy(a),
            String::from_utf8_lossy(b),
            "{:?}",
            RELOAD_SESSION[i]
        );
    }
}
