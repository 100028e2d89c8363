//! coordis as a replication primary, against real Redis 7.0.15:
//!
//! - the stream a replica gets after its RDB is byte for byte what
//!   redis-server sends for the same workload (a raw `PSYNC ? -1` on both;
//!   PINGs, whose timing differs, left out);
//! - a real `redis-server --replicaof` coordis gets the same dataset (DEBUG
//!   DIGEST) after a random workload over every family;
//! - a cut link resumes with a partial resync, a gap larger than the backlog
//!   gets a full one;
//! - WAIT counts real acknowledgements; `min-replicas-to-write` refuses with
//!   Redis's text.
//!
//! Skipped loudly without redis-server (a failure with `COORDIS_REQUIRE_REDIS=1`).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use coordis::testing::{compare_digests, RawClient, RedisServer};

/// How long a replica may take to catch up before a test fails.
const CATCH_UP: Duration = Duration::from_secs(20);

/// A coordis primary allowing DEBUG, whose full syncs start at once.
fn coordis_primary(configure: impl FnOnce(&mut coordis::Config)) -> coordis::BlockingServer {
    let mut builder = coordis::Server::builder();
    let config = builder.config_mut();
    config.enable_debug_command = "yes".into();
    config.repl.diskless_sync_delay = 0;
    configure(config);
    builder.start_blocking().unwrap()
}

/// A real redis-server replicating from `primary`; `None` without Redis.
fn redis_replica_of(primary: SocketAddr) -> Option<RedisServer> {
    let port = primary.port().to_string();
    RedisServer::start(&["--replicaof", "127.0.0.1", &port, "--enable-debug-command", "yes"]).unwrap()
}

fn command(addr: SocketAddr, args: &[&str]) -> String {
    let mut c = RawClient::connect(addr).unwrap();
    String::from_utf8_lossy(&c.command(args).unwrap()).into_owned()
}

/// One field of INFO `section`.
fn info(addr: SocketAddr, section: &str, field: &str) -> String {
    let text = command(addr, &["INFO", section]);
    let prefix = format!("{field}:");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no {field} in INFO {section}: {text}"))
        .trim()
        .to_string()
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < CATCH_UP, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until the replica is linked and has applied all of the primary's stream.
fn wait_caught_up(primary: SocketAddr, replica: SocketAddr) {
    wait_until("the replica to catch up", || {
        info(replica, "replication", "master_link_status") == "up"
            && info(replica, "replication", "master_repl_offset") == info(primary, "replication", "master_repl_offset")
    });
}

fn assert_same_dataset(replica: SocketAddr, primary: SocketAddr) {
    let differences = compare_digests(replica, primary, &(0..16).collect::<Vec<_>>()).unwrap();
    assert!(differences.is_empty(), "{}", differences.join("\n"));
}

/// Sends every command on one connection, reading each reply.
fn run(addr: SocketAddr, commands: &[Vec<Vec<u8>>]) {
    let mut c = RawClient::connect(addr).unwrap();
    for cmd in commands {
        let args: Vec<&[u8]> = cmd.iter().map(Vec::as_slice).collect();
        c.command_bytes(&args).unwrap();
    }
}

fn words(line: &str) -> Vec<Vec<u8>> {
    line.split(' ').map(|w| w.as_bytes().to_vec()).collect()
}

/// A random workload over every family, with the commands whose effects
/// Redis rewrites (relative TTLs, SPOP, INCRBYFLOAT, served blocking
/// pops, scripts, MULTI/EXEC), several databases and expiring keys.
fn random_workload(seed: u64, n: usize) -> Vec<Vec<Vec<u8>>> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut out = vec![];
    for _ in 0..n {
        let k = rng.u32(0..20);
        let v = rng.u32(0..1000);
        let line = match rng.u32(0..34) {
            0 => format!("SET s{k} {v}"),
            1 => format!("SET s{k} {v} EX {}", rng.u32(100..1000)),
            2 => format!("INCRBYFLOAT f{k} 1.5"),
            3 => format!("APPEND s{k} x{v}"),
            4 => format!("EXPIRE s{k} {}", rng.u32(100..1000)),
            5 => format!("DEL s{k} l{k}"),
            6 => format!("RPUSH l{k} {v} {}", v + 1),
            7 => format!("LPOP l{k}"),
            8 => format!("BLPOP l{k} 0.01"),
            9 => format!("LMOVE l{k} l{} LEFT RIGHT", rng.u32(0..20)),
            10 => format!("HSET h{k} f{v} {v}"),
            11 => format!("HINCRBYFLOAT h{k} f{} 2.5", v % 5),
            12 => format!("HDEL h{k} f{v}"),
            13 => format!("SADD t{k} {v} m{v}"),
            14 => format!("SPOP t{k}"),
            15 => format!("SREM t{k} {v}"),
            16 => format!("ZADD z{k} {} m{v}", rng.i32(-100..100)),
            17 => format!("ZINCRBY z{k} 1.25 m{}", v % 7),
            18 => format!("ZPOPMIN z{k}"),
            19 => format!("XADD x{k} * f {v}"),
            20 => format!("XTRIM x{k} MAXLEN 3"),
            21 => format!("PFADD p{k} {v} {}", v * 7),
            22 => format!("SETBIT b{k} {} 1", rng.u32(0..200)),
            23 => format!("GEOADD g{k} {}.5 {}.25 m{v}", rng.i32(-170..170), rng.i32(-80..80)),
            24 => format!("SELECT {}", rng.u32(0..4)),
            25 => format!("PEXPIRE h{k} {}", rng.u32(50_000..90_000)),
            26 => format!("PERSIST h{k}"),
            27 => "EVAL".to_string(),
            28 => format!("GETDEL s{k}"),
            29 => format!("COPY h{k} h{}", rng.u32(0..20)),
            30 => format!("RENAME z{k} z{}", rng.u32(0..20)),
            31 => "SWAPDB 1 2".to_string(),
            32 => format!("INCR c{k}"),
            _ => format!("SET u{k} {v} PX {}", rng.u32(60_000..90_000)),
        };
        if line.starts_with("EVAL") {
            let script = "redis.call('incr',KEYS[1]);return redis.call('rpush',KEYS[2],'e')";
            out.push(vec![
                b"EVAL".to_vec(),
                script.as_bytes().to_vec(),
                b"2".to_vec(),
                format!("c{k}").into_bytes(),
                format!("l{k}").into_bytes(),
            ]);
        } else if rng.u32(0..10) == 0 {
            out.push(words("MULTI"));
            out.push(words(&line));
            out.push(words(&format!("INCR c{v}")));
            out.push(words("EXEC"));
        } else {
            out.push(words(&line));
        }
    }
    out
}

#[test]
fn a_redis_replica_of_coordis_has_the_same_dataset_after_a_random_workload() {
    let primary = coordis_primary(|_| {});
    // Data before the replica: it comes in the RDB of the full sync.
    run(primary.addr(), &random_workload(1, 300));
    let Some(replica) = redis_replica_of(primary.addr()) else {
        return;
    };
    wait_caught_up(primary.addr(), replica.addr());
    assert_same_dataset(replica.addr(), primary.addr());
    // Data after: it comes in the stream.
    for seed in 2..=4 {
        run(primary.addr(), &random_workload(seed, 500));
        wait_caught_up(primary.addr(), replica.addr());
        assert_same_dataset(replica.addr(), primary.addr());
    }
    assert_eq!(info(primary.addr(), "stats", "sync_full"), "1");
    assert_eq!(info(primary.addr(), "replication", "connected_slaves"), "1");
    let line = info(primary.addr(), "replication", "slave0");
    let port = replica.addr().port();
    assert!(
        line.starts_with(&format!("ip=127.0.0.1,port={port},state=online,offset=")),
        "{line}"
    );
    let role = command(primary.addr(), &["ROLE"]);
    assert!(role.contains("master") && role.contains(&port.to_string()), "{role}");
}

#[test]
fn a_cut_link_resumes_with_a_partial_resync() {
    let primary = coordis_primary(|_| {});
    let Some(replica) = redis_replica_of(primary.addr()) else {
        return;
    };
    run(primary.addr(), &random_workload(7, 200));
    wait_caught_up(primary.addr(), replica.addr());
    let replid = info(primary.addr(), "replication", "master_replid");
    for round in 1..=2 {
        assert_eq!(
            command(primary.addr(), &["CLIENT", "KILL", "TYPE", "replica"]),
            ":1\r\n"
        );
        // Written while the replica is away: it comes from the backlog.
        run(primary.addr(), &random_workload(100 + round, 100));
        wait_until("the partial resync", || {
            info(primary.addr(), "stats", "sync_partial_ok") == round.to_string()
        });
        wait_caught_up(primary.addr(), replica.addr());
        assert_same_dataset(replica.addr(), primary.addr());
    }
    assert_eq!(info(primary.addr(), "stats", "sync_full"), "1");
    assert_eq!(info(primary.addr(), "stats", "sync_partial_err"), "0");
    // The replica kept its primary's history: the same ID, no full resync.
    assert_eq!(info(replica.addr(), "replication", "master_replid"), replid);
    assert_eq!(info(replica.addr(), "replication", "master_link_status"), "up");
}

/// Stops a process (SIGSTOP) until dropped (SIGCONT), even on failure.
struct Stopped(String);

impl Stopped {
    fn new(addr: SocketAddr) -> Stopped {
        let pid = info(addr, "server", "process_id");
        let status = std::process::Command::new("kill")
            .args(["-STOP", &pid])
            .status()
            .unwrap();
        assert!(status.success());
        Stopped(pid)
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = std::process::Command::new("kill").args(["-CONT", &self.0]).status();
    }
}

#[test]
fn a_gap_larger_than_the_backlog_gets_a_full_resync() {
    let primary = coordis_primary(|_| {});
    let Some(replica) = redis_replica_of(primary.addr()) else {
        return;
    };
    wait_caught_up(primary.addr(), replica.addr());
    assert_eq!(
        command(primary.addr(), &["CONFIG", "SET", "repl-backlog-size", "16384"]),
        "+OK\r\n"
    );
    assert_eq!(info(primary.addr(), "replication", "repl_backlog_size"), "16384");
    let big = "v".repeat(64 * 1024);
    let mut c = RawClient::connect(primary.addr()).unwrap();
    {
        // The replica cannot reconnect until the gap is written.
        let _stopped = Stopped::new(replica.addr());
        assert_eq!(c.command(&["CLIENT", "KILL", "TYPE", "replica"]).unwrap(), b":1\r\n");
        wait_until("the link to end", || {
            info(primary.addr(), "replication", "connected_slaves") == "0"
        });
        for i in 0..4 {
            c.command(&["SET", &format!("big{i}"), &big]).unwrap();
        }
        let histlen: u64 = info(primary.addr(), "replication", "repl_backlog_histlen")
            .parse()
            .unwrap();
        assert!(histlen <= 16384, "{histlen}");
    }
    wait_until("the full resync", || info(primary.addr(), "stats", "sync_full") == "2");
    assert_eq!(info(primary.addr(), "stats", "sync_partial_err"), "1");
    wait_caught_up(primary.addr(), replica.addr());
    assert_same_dataset(replica.addr(), primary.addr());
}

#[test]
fn wait_counts_real_acknowledgements() {
    let primary = coordis_primary(|_| {});
    let mut c = RawClient::connect(primary.addr()).unwrap();
    // No replica: 0 at once for WAIT 0, 0 after the timeout for WAIT 1.
    assert_eq!(c.command(&["WAIT", "0", "0"]).unwrap(), b":0\r\n");
    let started = Instant::now();
    assert_eq!(c.command(&["WAIT", "1", "200"]).unwrap(), b":0\r\n");
    assert!(started.elapsed() >= Duration::from_millis(200));
    let Some(replica) = redis_replica_of(primary.addr()) else {
        return;
    };
    wait_caught_up(primary.addr(), replica.addr());
    for i in 0..20 {
        c.command(&["SET", &format!("k{i}"), "v"]).unwrap();
        // The replica acknowledges the write (asked by REPLCONF GETACK).
        let started = Instant::now();
        assert_eq!(c.command(&["WAIT", "1", "5000"]).unwrap(), b":1\r\n");
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "WAIT waited for the replica's own ACK period"
        );
    }
    // Already acknowledged: answered at once, even for more replicas than there are.
    wait_caught_up(primary.addr(), replica.addr());
    std::thread::sleep(Duration::from_millis(1200));
    assert_eq!(c.command(&["WAIT", "0", "0"]).unwrap(), b":1\r\n");
    let started = Instant::now();
    assert_eq!(c.command(&["WAIT", "2", "300"]).unwrap(), b":1\r\n");
    assert!(started.elapsed() >= Duration::from_millis(300));
    // Inside MULTI: the count at once.
    c.command(&["MULTI"]).unwrap();
    c.command(&["WAIT", "5", "0"]).unwrap();
    assert_eq!(c.command(&["EXEC"]).unwrap(), b"*1\r\n:1\r\n");
}

#[test]
fn min_replicas_to_write_refuses_with_redis_text() {
    let Some(redis) = RedisServer::start(&[]).unwrap() else {
        return;
    };
    let primary = coordis_primary(|_| {});
    let script = "return redis.call('set','k','v')";
    let cases: Vec<Vec<&str>> = vec![
        vec!["CONFIG", "SET", "min-replicas-to-write", "1"],
        vec!["SET", "k", "v"],
        vec!["GET", "k"],
        vec!["EVAL", script, "0"],
        vec!["MULTI"],
        vec!["SET", "k", "v"],
        vec!["EXEC"],
        vec!["MULTI"],
        vec!["GET", "k"],
        vec!["EXEC"],
        vec!["INFO", "replication"],
        vec!["CONFIG", "SET", "min-replicas-max-lag", "0"],
        vec!["SET", "k", "v"],
        vec!["CONFIG", "SET", "min-replicas-max-lag", "10"],
        vec!["CONFIG", "SET", "min-replicas-to-write", "0"],
        vec!["SET", "k", "v"],
    ];
    let (mut a, mut b) = (
        RawClient::connect(redis.addr()).unwrap(),
        RawClient::connect(primary.addr()).unwrap(),
    );
    for case in cases {
        let (ra, rb) = (a.command(&case).unwrap(), b.command(&case).unwrap());
        let (ra, rb) = (String::from_utf8_lossy(&ra), String::from_utf8_lossy(&rb));
        if case[0] == "INFO" {
            let field = |t: &str| {
                t.lines()
                    .find(|l| l.starts_with("min_slaves_good_slaves"))
                    .map(str::to_string)
            };
            assert_eq!(field(&ra), field(&rb), "{case:?}");
        } else {
            assert_eq!(ra, rb, "{case:?}");
        }
    }
    // With a good replica, writes go through.
    b.command(&["CONFIG", "SET", "min-replicas-to-write", "1"]).unwrap();
    let Some(replica) = redis_replica_of(primary.addr()) else {
        return;
    };
    wait_caught_up(primary.addr(), replica.addr());
    wait_until("a good replica", || {
        b.command(&["SET", "k", "w"]).unwrap() == b"+OK\r\n"
    });
}

/// A raw replica: `PSYNC ? -1` (after `handshake`), the +FULLRESYNC line
/// and the RDB read; returns the socket, positioned at the stream.
fn raw_replica(addr: SocketAddr, handshake: &[&[&str]]) -> (TcpStream, Vec<u8>) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(CATCH_UP)).unwrap();
    for args in handshake {
        s.write_all(&RawClient::encode(
            &args.iter().map(|a| a.as_bytes()).collect::<Vec<_>>(),
        ))
        .unwrap();
        let mut ok = [0u8; 5];
        s.read_exact(&mut ok).unwrap();
        assert_eq!(&ok, b"+OK\r\n");
    }
    s.write_all(b"PSYNC ? -1\r\n").unwrap();
    let line = read_line(&mut s);
    assert!(line.starts_with("+FULLRESYNC "), "{line}");
    // Newlines keep the link alive while the snapshot is made.
    let mut head = read_line(&mut s);
    while head.is_empty() {
        head = read_line(&mut s);
    }
    let rdb = if let Some(mark) = head.strip_prefix("$EOF:") {
        let mut rdb = vec![];
        let mut byte = [0u8; 1];
        while !rdb.ends_with(mark.as_bytes()) {
            s.read_exact(&mut byte).unwrap();
            rdb.push(byte[0]);
        }
        rdb.truncate(rdb.len() - mark.len());
        rdb
    } else {
        let len: usize = head.strip_prefix('$').unwrap().parse().unwrap();
        let mut rdb = vec![0u8; len];
        s.read_exact(&mut rdb).unwrap();
        rdb
    };
    assert!(rdb.starts_with(b"REDIS"), "an RDB file");
    (s, rdb)
}

fn read_line(s: &mut TcpStream) -> String {
    let mut line = vec![];
    let mut byte = [0u8; 1];
    loop {
        s.read_exact(&mut byte).unwrap();
        if byte[0] == b'\n' {
            break;
        }
        line.push(byte[0]);
    }
    String::from_utf8_lossy(line.strip_suffix(b"\r").unwrap_or(&line)).into_owned()
}

/// The stream's commands (each whole RESP array as bytes) read until the
/// socket is quiet for `quiet`, or for `most` at most.
fn stream_commands(s: &mut TcpStream, quiet: Duration, most: Duration) -> Vec<Vec<u8>> {
    s.set_read_timeout(Some(quiet)).unwrap();
    let started = Instant::now();
    let mut bytes = vec![];
    let mut buf = [0u8; 65536];
    while started.elapsed() < most {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => bytes.extend_from_slice(&buf[..n]),
            Err(_) => break,
        }
    }
    split_commands(&bytes)
}

fn split_commands(bytes: &[u8]) -> Vec<Vec<u8>> {
    let mut out = vec![];
    let mut at = 0;
    let line_end = |from: usize| from + bytes[from..].windows(2).position(|w| w == b"\r\n").unwrap();
    while at < bytes.len() {
        let start = at;
        assert_eq!(
            bytes[at],
            b'*',
            "a command at {at}: {:?}",
            String::from_utf8_lossy(&bytes[at..])
        );
        let end = line_end(at);
        let n: usize = std::str::from_utf8(&bytes[at + 1..end]).unwrap().parse().unwrap();
        at = end + 2;
        for _ in 0..n {
            let end = line_end(at);
            let len: usize = std::str::from_utf8(&bytes[at + 1..end]).unwrap().parse().unwrap();
            at = end + 2 + len + 2;
        }
        out.push(bytes[start..at].to_vec());
    }
    out
}

/// A workload whose effects are the same bytes on any server: absolute
/// times, no random choices, but every rewrite Redis makes.
fn deterministic_workload() -> Vec<Vec<Vec<u8>>> {
    let lines = [
        "SET a 1",
        "SET b 2 PXAT 99999999999999",
        "EXPIREAT a 99999999999",
        "INCRBYFLOAT f 1.5",
        "INCRBYFLOAT f 2",
        "HSET h x 1 y 2",
        "HINCRBYFLOAT h x 0.5",
        "RPUSH l 1 2 3",
        "BLPOP l 0",
        "BRPOPLPUSH l m 0",
        "LMOVE m l LEFT RIGHT",
        "DEL nosuchkey",
        "SELECT 3",
        "SET c 3",
        "ZADD z 1 a 2 b",
        "ZINCRBY z 1.5 a",
        "BZPOPMIN z 0",
        "SADD s a",
        "SREM s nosuch",
        "SELECT 0",
        "MULTI",
        "SET d 4",
        "SELECT 5",
        "SET e 5",
        "EXEC",
        "PFADD p a b c",
        "SETBIT bits 7 1",
        "GEOADD g 13.361389 38.115556 palermo",
        "XADD x 1-1 f v",
        "XADD x 2-1 f w",
        "XTRIM x MAXLEN 1",
        "GETDEL a",
        "GETEX b PERSIST",
        "COPY h h2",
        "RENAME h2 h3",
        "SWAPDB 0 1",
        "SELECT 1",
        "FLUSHDB",
        "PUBLISH chan msg",
        "FLUSHALL",
        "SET after flush",
    ];
    let mut out: Vec<Vec<Vec<u8>>> = lines.iter().map(|l| words(l)).collect();
    out.push(vec![
        b"EVAL".to_vec(),
        b"redis.call('set',KEYS[1],'x'); redis.call('incr',KEYS[2]); return 1".to_vec(),
        b"2".to_vec(),
        b"ev1".to_vec(),
        b"ev2".to_vec(),
    ]);
    out.push(words("SET last 1"));
    out
}

#[test]
fn the_stream_after_the_rdb_is_what_redis_sends() {
    let Some(redis) = RedisServer::start(&["--repl-diskless-sync", "no"]).unwrap() else {
        return;
    };
    let primary = coordis_primary(|c| c.repl.diskless_sync = false);
    let mut streams = vec![];
    for addr in [redis.addr(), primary.addr()] {
        let (mut s, _rdb) = raw_replica(addr, &[&["REPLCONF", "capa", "psync2"]]);
        run(addr, &deterministic_workload());
        let commands: Vec<Vec<u8>> = stream_commands(&mut s, Duration::from_millis(500), CATCH_UP)
            .into_iter()
            .filter(|c| c.as_slice() != b"*1\r\n$4\r\nPING\r\n")
            .collect();
        streams.push(commands);
    }
    let text = |cs: &[Vec<u8>]| {
        cs.iter()
            .map(|c| String::from_utf8_lossy(c).replace("\r\n", " "))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        text(&streams[1]),
        text(&streams[0]),
        "coordis's stream (left) vs Redis's (right)"
    );
    assert!(streams[0].len() > 20, "the workload has effects");
}

#[test]
fn a_diskless_sync_uses_the_eof_framing_and_pings_advance_the_offset() {
    let primary = coordis_primary(|c| c.repl.ping_period = 1);
    let (mut s, rdb) = raw_replica(
        primary.addr(),
        &[
            &["REPLCONF", "listening-port", "7777"],
            &["REPLCONF", "capa", "eof", "capa", "psync2"],
        ],
    );
    assert!(rdb.len() > 9);
    // The stream starts at the first ACK after a diskless sync.
    s.write_all(&RawClient::encode(&[b"REPLCONF", b"ACK", b"0"])).unwrap();
    run(primary.addr(), &[words("SET k v")]);
    let before: u64 = info(primary.addr(), "replication", "master_repl_offset")
        .parse()
        .unwrap();
    let commands = stream_commands(&mut s, Duration::from_millis(2500), Duration::from_millis(2500));
    let text: Vec<String> = commands
        .iter()
        .map(|c| String::from_utf8_lossy(c).replace("\r\n", " "))
        .collect();
    assert_eq!(text[0], "*2 $6 SELECT $1 0 ");
    assert_eq!(text[1], "*3 $3 SET $1 k $1 v ");
    assert!(text[2..].iter().any(|t| t == "*1 $4 PING "), "{text:?}");
    let after: u64 = info(primary.addr(), "replication", "master_repl_offset")
        .parse()
        .unwrap();
    assert!(after > before, "PINGs are stream bytes");
    let line = info(primary.addr(), "replication", "slave0");
    assert!(
        line.starts_with("ip=127.0.0.1,port=7777,state=online,offset=0,"),
        "{line}"
    );
    // Bad REPLCONF options are refused with Redis's texts.
    let mut c = RawClient::connect(primary.addr()).unwrap();
    assert_eq!(
        c.command(&["REPLCONF", "nope", "1"]).unwrap(),
        b"-ERR Unrecognized REPLCONF option: nope\r\n"
    );
    assert_eq!(c.command(&["REPLCONF", "capa"]).unwrap(), b"-ERR syntax error\r\n");
}

/// Reads until the primary closes the link; false if it stays open past `most`.
fn closed_within(s: &mut TcpStream, most: Duration) -> bool {
    s.set_read_timeout(Some(most)).unwrap();
    let started = Instant::now();
    let mut buf = [0u8; 65536];
    while started.elapsed() < most {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
            Err(_) => return false,
        }
    }
    false
}

#[test]
fn a_replica_that_stops_acknowledging_is_dropped_after_repl_timeout() {
    let primary = coordis_primary(|c| c.repl.timeout = 1);
    let (mut s, _) = raw_replica(primary.addr(), &[&["REPLCONF", "capa", "psync2"]]);
    assert_eq!(info(primary.addr(), "replication", "connected_slaves"), "1");
    let started = Instant::now();
    assert!(
        closed_within(&mut s, Duration::from_secs(10)),
        "the silent replica was kept"
    );
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "dropped before repl-timeout"
    );
    wait_until("the replica to be forgotten", || {
        info(primary.addr(), "replication", "connected_slaves") == "0"
    });
}

#[test]
fn a_replica_past_its_output_limit_is_disconnected_and_never_holds_the_primary() {
    let primary = coordis_primary(|_| {});
    // A replica that never reads its socket.
    let (mut s, _) = raw_replica(primary.addr(), &[&["REPLCONF", "capa", "psync2"]]);
    let mut c = RawClient::connect(primary.addr()).unwrap();
    let limit = "replica 1mb 0 0";
    assert_eq!(
        c.command(&["CONFIG", "SET", "client-output-buffer-limit", limit])
            .unwrap(),
        b"+OK\r\n"
    );
    let value = "v".repeat(256 * 1024);
    let started = Instant::now();
    for i in 0..64 {
        assert_eq!(c.command(&["SET", &format!("k{i}"), &value]).unwrap(), b"+OK\r\n");
    }
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "writes waited for the replica"
    );
    wait_until("the slow replica to be dropped", || {
        info(primary.addr(), "replication", "connected_slaves") == "0"
    });
    let histlen: u64 = info(primary.addr(), "replication", "repl_backlog_histlen")
        .parse()
        .unwrap();
    assert!(
        histlen <= 1 << 20,
        "the backlog let the dropped replica's bytes go: {histlen}"
    );
    assert!(closed_within(&mut s, Duration::from_secs(10)));
}

/// A key that expires on the primary reaches its replicas as a DEL, found
/// by a read (lazily) or by the expiry cycle (actively), with keyspace
/// notifications off, as from Redis: a replica never expires keys itself,
/// so without the DEL it would keep the key for good.
#[test]
fn expired_keys_reach_a_replica_as_del_without_keyspace_notifications() {
    let args = ["--repl-diskless-sync", "no", "--enable-debug-command", "yes"];
    let Some(redis) = RedisServer::start(&args).unwrap() else {
        return;
    };
    let primary = coordis_primary(|c| c.repl.diskless_sync = false);
    let mut streams = vec![];
    for addr in [redis.addr(), primary.addr()] {
        let (mut s, _rdb) = raw_replica(addr, &[&["REPLCONF", "capa", "psync2"]]);
        let notify = command(addr, &["CONFIG", "GET", "notify-keyspace-events"]);
        assert_eq!(notify, "*2\r\n$22\r\nnotify-keyspace-events\r\n$0\r\n\r\n");
        // Lazily: the cycle is off until the read found the key expired.
        command(addr, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
        command(addr, &["SET", "read", "v", "PX", "50"]);
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(command(addr, &["GET", "read"]), "$-1\r\n");
        command(addr, &["DEBUG", "SET-ACTIVE-EXPIRE", "1"]);
        command(addr, &["SET", "left", "v", "PX", "50"]);
        wait_until("the expiry cycle to take the key left alone", || {
            command(addr, &["DBSIZE"]) == ":0\r\n"
        });
        let dels: Vec<String> = stream_commands(&mut s, Duration::from_millis(500), CATCH_UP)
            .into_iter()
            .map(|c| String::from_utf8_lossy(&c).replace("\r\n", " "))
            .filter(|c| c.contains("DEL") || c.contains("del"))
            .collect();
        streams.push(dels);
    }
    assert_eq!(streams[1], streams[0], "coordis's DELs (left) vs Redis's (right)");
    assert_eq!(streams[0].len(), 2, "one DEL per expired key: {:?}", streams[0]);
}

/// INFO memory's replication and AOF buffers hold real figures, on coordis
/// as on Redis (they were always 0): with a replica linked and writes made,
/// `mem_replication_backlog` covers the backlog's history and MEMORY STATS
/// agrees; `mem_aof_buffer` holds a small buffer after a small write and
/// gives a large one back after a 100 KB write.
#[test]
fn info_memory_reports_the_replication_and_aof_buffers_as_redis_does() {
    let check = |primary: SocketAddr, replica: SocketAddr| {
        wait_caught_up(primary, replica);
        let mut c = RawClient::connect(primary).unwrap();
        for i in 0..2000 {
            c.command(&["SET", &format!("key:{i}"), &"v".repeat(100)]).unwrap();
        }
        wait_caught_up(primary, replica);
        let field = |f: &str| info(primary, "memory", f).parse::<u64>().unwrap();
        let histlen: u64 = info(primary, "replication", "repl_backlog_histlen").parse().unwrap();
        let backlog = field("mem_replication_backlog");
        assert!(
            histlen > 200_000 && backlog >= histlen,
            "backlog {backlog} for a history of {histlen}"
        );
        assert!(field("mem_total_replication_buffers") >= histlen);
        let stats = command(primary, &["MEMORY", "STATS"]);
        assert!(stats.contains("replication.backlog"), "{stats}");

        assert_eq!(command(primary, &["CONFIG", "SET", "appendonly", "yes"]), "+OK\r\n");
        wait_until("the AOF rewrite to end", || {
            info(primary, "persistence", "aof_rewrite_in_progress") == "0"
                && info(primary, "persistence", "aof_rewrite_scheduled") == "0"
        });
        c.command(&["SET", "small", "v"]).unwrap();
        let small = field("mem_aof_buffer");
        c.command(&["SET", "big", &"x".repeat(100_000)]).unwrap();
        let after_big = field("mem_aof_buffer");
        assert!(small > 0 && small < 4000, "after a small write: {small}");
        assert!(after_big < 4000, "after a 100 KB write: {after_big}");
    };
    let primary = coordis_primary(|_| {});
    let mut replica_builder = coordis::Server::builder();
    replica_builder.config_mut().replica.replicaof = format!("127.0.0.1 {}", primary.addr().port());
    let replica = replica_builder.start_blocking().unwrap();
    check(primary.addr(), replica.addr());

    let Some(redis) = RedisServer::start(&[]).unwrap() else {
        return;
    };
    let Some(redis_replica) = redis_replica_of(redis.addr()) else {
        return;
    };
    check(redis.addr(), redis_replica.addr());
}

/// SYNC or PSYNC pipelined behind another command, whose reply is not
/// written yet, is refused, as Redis refuses it (coordis started the sync
/// and lost the earlier reply among the transfer's bytes).
#[test]
fn sync_behind_a_pending_reply_is_refused_as_in_redis() {
    let pipelined = b"REPLCONF listening-port 1\r\nPSYNC ? -1\r\nPING\r\nSYNC\r\n";
    let expected: &[u8] = b"+OK\r\n-ERR SYNC and PSYNC are invalid with pending output\r\n+PONG\r\n-ERR SYNC and PSYNC are invalid with pending output\r\n";
    let ours = coordis_primary(|_| {});
    let got = coordis::testing::exchange(ours.addr(), pipelined, Duration::from_millis(300));
    assert_eq!(String::from_utf8_lossy(&got), String::from_utf8_lossy(expected));
    if let Some(redis) = RedisServer::start(&[]).unwrap() {
        let got = coordis::testing::exchange(redis.addr(), pipelined, Duration::from_millis(300));
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(expected),
            "redis-server"
        );
    }
}
