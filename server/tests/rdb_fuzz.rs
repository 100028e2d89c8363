//! The loader against damaged files: a `dump.rdb` coordis wrote over every
//! type, cut short at many positions and with one byte changed at many
//! positions (seeded, so a failure reproduces), must keep the server from
//! starting with an error, never a panic or a hang; and the lines
//! `coordis-server` logs for a cut file and a bad checksum are Redis
//! 7.0.15's (its source line numbers aside), with a non-zero exit as Redis's.

use coordis::testing::TempDir;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use coordis::testing::{RawClient, RedisServer};

const BIN: &str = env!("CARGO_BIN_EXE_coordis-server");

/// How long one damaged file may take to be refused (a hang fails).
const CASE_TIMEOUT: Duration = Duration::from_secs(20);

/// Cases of each kind (cut, changed byte) drawn from the seed.
const CASES_PER_KIND: usize = 400;

const SEED: u64 = 0x5eed_2602;

fn ok(c: &mut RawClient, args: &[&str]) {
    let reply = c.command(args).unwrap();
    assert!(
        !reply.starts_with(b"-"),
        "{args:?}: {}",
        String::from_utf8_lossy(&reply)
    );
}

/// The bytes of a `dump.rdb` coordis saves over every type and encoding:
/// strings (text, integer, LZF-compressed), lists of one and of several
/// nodes, intset and hashtable sets, listpack and hashtable hashes and
/// sorted sets, a stream with a consumer group and pending entries, a
/// function library, a key with a deadline and a second database.
fn dataset_file() -> Vec<u8> {
    let dir = TempDir::new("source");
    let mut builder = coordis::Server::builder();
    let config = builder.config_mut();
    config.apply("dir", &[dir.text().to_string()]).unwrap();
    config.apply("save", &[String::new()]).unwrap();
    let server = builder.start_blocking().unwrap();
    let mut c = RawClient::connect(server.addr()).unwrap();
    let long = "abc".repeat(200);
    let many: Vec<String> = (0..300).map(|i| format!("m{i}")).collect();
    let mut args = |head: &[&str], per: &dyn Fn(&str) -> Vec<String>| {
        let mut v: Vec<String> = head.iter().map(|s| s.to_string()).collect();
        for m in &many {
            v.extend(per(m));
        }
        let refs: Vec<&str> = v.iter().map(|s| s.as_str()).collect();
        ok(&mut c, &refs);
    };
    args(&["RPUSH", "biglist"], &|m| vec![format!("{m}-{}", "x".repeat(40))]);
    args(&["SADD", "bigset"], &|m| vec![m.to_string()]);
    args(&["HSET", "bighash"], &|m| vec![m.to_string(), "v".into()]);
    args(&["ZADD", "bigzset"], &|m| vec![m[1..].to_string(), m.to_string()]);
    for cmd in [
        vec!["SET", "s", "hello"],
        vec!["SET", "n", "12345"],
        vec!["SET", "lzf", &long],
        vec!["SET", "ttl", "v", "PX", "100000000"],
        vec!["RPUSH", "l", "a", "1", "-2", ""],
        vec!["SADD", "ints", "1", "2", "-3"],
        vec!["HSET", "h", "f", "v", "g", "2"],
        vec!["ZADD", "z", "1", "a", "2.5", "b"],
        vec!["XADD", "x", "1-1", "f", "v"],
        vec!["XADD", "x", "2-1", "g", "w"],
        vec!["XGROUP", "CREATE", "x", "grp", "0"],
        vec!["XREADGROUP", "GROUP", "grp", "alice", "COUNT", "1", "STREAMS", "x", ">"],
        vec![
            "FUNCTION",
            "LOAD",
            "#!lua name=fuzzlib\nredis.register_function('f', function() return 1 end)",
        ],
        vec!["SELECT", "3"],
        vec!["SET", "other-db", "v"],
        vec!["SAVE"],
    ] {
        ok(&mut c, &cmd);
    }
    drop(c);
    server.shutdown();
    std::fs::read(dir.0.join("dump.rdb")).unwrap()
}

/// Starts an embedded server on `bytes` as its `dump.rdb` and says how it
/// ended: `Ok(true)` refused with an error, `Ok(false)` started, `Err` a
/// panic or no answer within [`CASE_TIMEOUT`].
fn start_on(bytes: &[u8], panics: &'static AtomicUsize) -> Result<bool, String> {
    let dir = TempDir::new("case");
    std::fs::write(dir.0.join("dump.rdb"), bytes).unwrap();
    let (tx, rx) = mpsc::channel();
    let text = dir.text().to_string();
    let before = panics.load(Ordering::SeqCst);
    std::thread::spawn(move || {
        let mut builder = coordis::Server::builder();
        let config = builder.config_mut();
        config.apply("dir", &[text]).unwrap();
        config.apply("save", &[String::new()]).unwrap();
        let started = builder.start_blocking();
        let refused = started.is_err();
        if let Ok(server) = started {
            server.shutdown();
        }
        let _ = tx.send(refused);
    });
    let outcome = match rx.recv_timeout(CASE_TIMEOUT) {
        Ok(refused) => Ok(refused),
        Err(mpsc::RecvTimeoutError::Timeout) => Err("no answer within the case timeout (a hang)".into()),
        Err(mpsc::RecvTimeoutError::Disconnected) => Err("the starting thread panicked".into()),
    };
    if panics.load(Ordering::SeqCst) != before {
        return Err("a panic while loading".into());
    }
    outcome
}

#[test]
fn damaged_files_are_refused_without_a_panic_or_a_hang() {
    static PANICS: AtomicUsize = AtomicUsize::new(0);
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        PANICS.fetch_add(1, Ordering::SeqCst);
        default_hook(info);
    }));
    let file = dataset_file();
    assert_eq!(start_on(&file, &PANICS), Ok(false), "the undamaged file must load");
    let mut rng = fastrand::Rng::with_seed(SEED);
    let mut failures = vec![];
    // Every cut of the first bytes (magic, version, aux fields), then cuts
    // drawn over the rest; every cut is refused (the EOF opcode and the
    // checksum are last).
    let mut cuts: Vec<usize> = (0..24).collect();
    cuts.extend((0..CASES_PER_KIND).map(|_| rng.usize(24..file.len())));
    for cut in cuts {
        match start_on(&file[..cut], &PANICS) {
            Ok(true) => {}
            Ok(false) => failures.push(format!("cut at {cut} of {}: started", file.len())),
            Err(e) => failures.push(format!("cut at {cut} of {}: {e}", file.len())),
        }
    }
    // One byte changed: the parser refuses it or the checksum does.
    for _ in 0..CASES_PER_KIND {
        let at = rng.usize(..file.len());
        let mut damaged = file.clone();
        damaged[at] ^= rng.u8(1..=255);
        match start_on(&damaged, &PANICS) {
            Ok(true) => {}
            Ok(false) => failures.push(format!("byte {at} changed to {:#04x}: started", damaged[at])),
            Err(e) => failures.push(format!("byte {at} changed to {:#04x}: {e}", damaged[at])),
        }
    }
    assert!(
        failures.is_empty(),
        "{} damaged files:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// The warning lines (`#`) a server logs, with the `pid:role date time`
/// prefix and `rdb.c:<line>` numbers taken out.
fn warnings(log: &str) -> Vec<String> {
    log.lines()
        .filter_map(|l| l.split_once(" # ").map(|(_, text)| text))
        .filter(|t| t.contains("RDB") || t.contains("Short read"))
        .map(|t| match t.split_once("rdb.c:") {
            Some((head, tail)) => {
                let rest = tail.trim_start_matches(|c: char| c.is_ascii_digit());
                format!("{head}rdb.c:N{rest}")
            }
            None => t.to_string(),
        })
        .collect()
}

/// Runs `bin` on `dir` and returns its exit status's success and its log.
fn run_to_exit(bin: &str, dir: &Path) -> (bool, String) {
    let port = coordis::testing::free_port().unwrap().to_string();
    let mut child = Command::new(bin)
        .args(["--port", &port, "--bind", "127.0.0.1", "--save", "", "--dir"])
        .arg(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + CASE_TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{bin} still running on a damaged file");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = child.wait_with_output().unwrap();
    let log = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (status.success(), log)
}

#[test]
fn a_cut_file_and_a_bad_checksum_are_logged_as_redis_logs_them() {
    let Some(redis) = RedisServer::start(&[]).unwrap() else {
        return;
    };
    drop(redis);
    let file = dataset_file();
    let mut bad_crc = file.clone();
    *bad_crc.last_mut().unwrap() ^= 0x01;
    for (name, bytes) in [("cut", &file[..file.len() / 2]), ("checksum", &bad_crc[..])] {
        let dir = TempDir::new(name);
        std::fs::write(dir.0.join("dump.rdb"), bytes).unwrap();
        let (redis_ok, redis_log) = run_to_exit("redis-server", &dir.0);
        let (coordis_ok, coordis_log) = run_to_exit(BIN, &dir.0);
        assert!(!redis_ok && !coordis_ok, "{name}: both must exit with an error");
        let expected = warnings(&redis_log);
        // The reason's line, and before it the short read's or checksum's.
        assert_eq!(expected.len(), 2, "{name}: Redis's warnings:\n{redis_log}");
        assert_eq!(
            warnings(&coordis_log),
            expected,
            "{name}:\nredis:\n{redis_log}\ncoordis:\n{coordis_log}"
        );
    }
}
