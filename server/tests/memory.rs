//! maxmemory, eviction and per-key access data, compared with Redis 7.0.15:
//! the OOM refusals byte for byte (which commands, in and out of MULTI,
//! EXEC, scripts and their shebang flags), OBJECT IDLETIME/FREQ rules, the
//! policies on CONFIG GET/SET; and as properties on both servers (each a
//! process of its own, so that nothing else allocates in it): under
//! allkeys-lru the most recently used keys survive a fill to twice the
//! limit, volatile-ttl takes the shortest deadlines first, volatile-*
//! never take a key without one, used memory stays near the limit.

use std::process::Command;
use std::time::Duration;

use coordis::testing::{RawClient, RedisServer, ServerProcess};

const BIN: &str = env!("CARGO_BIN_EXE_coordis-server");

/// A coordis-server process (its allocator counts only its own memory).
fn coordis_process(args: &[&str]) -> ServerProcess {
    let mut command = Command::new(BIN);
    command.args(args);
    ServerProcess::start(command).expect("coordis-server starts")
}

fn redis(args: &[&str]) -> Option<RedisServer> {
    let server = RedisServer::start(args).expect("redis-server starts when installed");
    if server.is_none() {
        eprintln!("SKIPPED against Redis: redis-server 7.0.15 is not installed");
    }
    server
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// An integer reply's value.
fn int_reply(reply: &[u8]) -> u64 {
    let t = text(reply);
    t.trim_start_matches(':')
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("an integer reply: {t:?}"))
}

/// Runs `steps` on two clients of each server (`(client, command)`) and
/// returns the replies.
fn run(addr: std::net::SocketAddr, steps: &[(usize, &[&str])]) -> Vec<String> {
    let mut clients = [RawClient::connect(addr).unwrap(), RawClient::connect(addr).unwrap()];
    steps
        .iter()
        .map(|(c, cmd)| text(&clients[*c].command(cmd).unwrap()))
        .collect()
}

/// The OOM steps: over the limit (1 byte: always), `denyoom` commands are
/// refused and others run; in MULTI everything but EXEC/DISCARD is; an
/// EXEC with a queued `denyoom` command aborts; scripts as their flags say.
const OOM_STEPS: &[(usize, &[&str])] = &[
    (0, &["SET", "k", "v"]),
    (0, &["RPUSH", "l", "a"]),
    (0, &["MULTI"]),
    (0, &["SET", "k", "v"]),
    (1, &["CONFIG", "SET", "maxmemory", "1"]),
    (0, &["EXEC"]),
    (0, &["SET", "k", "v2"]),
    (0, &["INCR", "n"]),
    (0, &["LPUSH", "l", "x"]),
    (0, &["SADD", "s", "x"]),
    (0, &["GET", "k"]),
    (0, &["EXPIRE", "k", "100"]),
    (0, &["PERSIST", "k"]),
    (0, &["APPEND", "k", "x"]),
    (0, &["SETRANGE", "k", "0", "x"]),
    (0, &["LPOP", "l"]),
    (0, &["PING"]),
    (0, &["MULTI"]),
    (0, &["GET", "k"]),
    (0, &["PING"]),
    (0, &["EXEC"]),
    (0, &["MULTI"]),
    (0, &["DISCARD"]),
    (0, &["EVAL", "return redis.call('get', KEYS[1])", "1", "k"]),
    (0, &["EVAL", "return redis.call('set', KEYS[1], 'x')", "1", "k"]),
    (
        0,
        &[
            "EVAL",
            "redis.call('del', KEYS[1]); return redis.call('set', KEYS[1], 'x')",
            "1",
            "k",
        ],
    ),
    (0, &["EVAL", "#!lua\nreturn redis.call('get', KEYS[1])", "1", "k"]),
    (
        0,
        &[
            "EVAL",
            "#!lua flags=no-writes\nreturn redis.call('get', KEYS[1])",
            "1",
            "k",
        ],
    ),
    (
        0,
        &[
            "EVAL",
            "#!lua flags=allow-oom\nreturn redis.call('set', KEYS[1], 'y')",
            "1",
            "k",
        ],
    ),
    (0, &["GET", "k"]),
    (0, &["DEL", "k"]),
    (0, &["INFO", "NOSUCHSECTION"]),
    (1, &["CONFIG", "SET", "maxmemory", "0"]),
    (0, &["SET", "k", "v"]),
];

#[test]
fn oom_refusals_are_redis_s() {
    let ours = coordis::Server::builder().start_blocking().unwrap();
    let got = run(ours.addr(), OOM_STEPS);
    // Present whether or not Redis is here: the refusal itself.
    assert_eq!(got[6], "-OOM command not allowed when used memory > 'maxmemory'.\r\n");
    let Some(theirs) = redis(&[]) else { return };
    let want = run(theirs.addr(), OOM_STEPS);
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g, w, "step {i}: {:?}", OOM_STEPS[i]);
    }
}

/// OBJECT FREQ and IDLETIME under each kind of policy, RESTORE's IDLETIME
/// and FREQ feeding them, and the policies' texts on CONFIG GET/SET.
const ACCESS_STEPS: &[(usize, &[&str])] = &[
    (0, &["SET", "k", "v"]),
    (0, &["OBJECT", "FREQ", "k"]),
    (0, &["OBJECT", "IDLETIME", "k"]),
    (0, &["OBJECT", "FREQ", "missing"]),
    (0, &["CONFIG", "SET", "maxmemory-policy", "ALLKEYS-LFU"]),
    (0, &["CONFIG", "GET", "maxmemory-policy"]),
    (0, &["OBJECT", "IDLETIME", "k"]),
    (0, &["SET", "f", "v"]),
    (0, &["OBJECT", "FREQ", "f"]),
    (0, &["DUMP", "f"]),
    (0, &["CONFIG", "SET", "maxmemory-policy", "volatile-lfu"]),
    (0, &["CONFIG", "SET", "maxmemory-policy", "nosuch"]),
    (0, &["CONFIG", "SET", "maxmemory-policy", "volatile-ttl"]),
    (0, &["CONFIG", "GET", "maxmemory-policy"]),
    (0, &["CONFIG", "SET", "maxmemory-samples", "0"]),
    (0, &["CONFIG", "SET", "maxmemory-samples", "7"]),
    (0, &["CONFIG", "SET", "maxmemory-eviction-tenacity", "101"]),
    (0, &["CONFIG", "SET", "lfu-log-factor", "-1"]),
    (0, &["CONFIG", "GET", "maxmemory-samples"]),
    (0, &["CONFIG", "SET", "maxmemory", "100mb"]),
    (0, &["CONFIG", "GET", "maxmemory"]),
    (0, &["CONFIG", "SET", "maxmemory", "0"]),
    (0, &["CONFIG", "SET", "maxmemory-policy", "noeviction"]),
];

#[test]
fn object_freq_idletime_and_policies_are_redis_s() {
    let ours = coordis::Server::builder().start_blocking().unwrap();
    let got = run(ours.addr(), ACCESS_STEPS);
    assert_eq!(got[2], ":0\r\n");
    let Some(theirs) = redis(&[]) else { return };
    let want = run(theirs.addr(), ACCESS_STEPS);
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g, w, "step {i}: {:?}", ACCESS_STEPS[i]);
    }
}

/// RESTORE IDLETIME sets the idle time (LRU), FREQ the counter (LFU), on
/// both servers; TYPE, EXISTS, TTL and OBJECT do not touch a key, GET does.
#[test]
fn restore_feeds_access_data_and_notouch_commands_leave_it() {
    let check = |addr| {
        let mut c = RawClient::connect(addr).unwrap();
        c.command(&["SET", "src", "v"]).unwrap();
        let dump = c.command(&["DUMP", "src"]).unwrap();
        let payload = &dump[dump.iter().position(|&b| b == b'\n').unwrap() + 1..dump.len() - 2];
        let restore = |c: &mut RawClient, key: &str, opt: &str, n: &str| {
            c.command_bytes(&[b"RESTORE", key.as_bytes(), b"0", payload, opt.as_bytes(), n.as_bytes()])
                .unwrap()
        };
        assert_eq!(restore(&mut c, "idle", "IDLETIME", "1000"), b"+OK\r\n");
        for cmd in [
            &["TYPE", "idle"][..],
            &["EXISTS", "idle"],
            &["TTL", "idle"],
            &["PTTL", "idle"],
            &["OBJECT", "ENCODING", "idle"],
        ] {
            c.command(cmd).unwrap();
        }
        let secs = int_reply(&c.command(&["OBJECT", "IDLETIME", "idle"]).unwrap());
        assert!((1000..1005).contains(&secs), "{secs}");
        c.command(&["GET", "idle"]).unwrap();
        assert_eq!(c.command(&["OBJECT", "IDLETIME", "idle"]).unwrap(), b":0\r\n");
        c.command(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lfu"])
            .unwrap();
        assert_eq!(restore(&mut c, "hot", "FREQ", "200"), b"+OK\r\n");
        assert_eq!(c.command(&["OBJECT", "FREQ", "hot"]).unwrap(), b":200\r\n");
        c.command(&["CONFIG", "SET", "maxmemory-policy", "noeviction"]).unwrap();
    };
    let ours = coordis::Server::builder().start_blocking().unwrap();
    check(ours.addr());
    if let Some(theirs) = redis(&[]) {
        check(theirs.addr());
    }
}

fn info_field(c: &mut RawClient, section: &str, field: &str) -> u64 {
    c.info_field(section, field).parse().unwrap()
}

/// The limit the property tests set: well above either server's base.
const LIMIT: u64 = 24 * 1024 * 1024;
const VALUE: usize = 1000;

/// Fills to twice the limit under allkeys-lru: nine tenths, then (two
/// LRU clock ticks later) the last tenth, the most recently used keys,
/// which survive; used memory stays near the limit. Returns (keys
/// written, survivors of the last tenth, the peak of used_memory seen).
fn lru_fill(addr: std::net::SocketAddr) -> (usize, usize, u64) {
    let mut c = RawClient::connect(addr).unwrap();
    c.command(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"])
        .unwrap();
    c.command(&["CONFIG", "SET", "maxmemory", &LIMIT.to_string()]).unwrap();
    let value = "x".repeat(VALUE);
    let n = (2 * LIMIT as usize) / VALUE;
    let recent = n / 10;
    let mut peak = 0;
    for i in 0..n {
        if i == n - recent {
            std::thread::sleep(Duration::from_millis(2100));
        }
        let reply = c.command(&["SET", &format!("k:{i}"), &value]).unwrap();
        assert_eq!(reply, b"+OK\r\n");
        if i % 1000 == 0 {
            peak = peak.max(info_field(&mut c, "memory", "used_memory"));
        }
    }
    peak = peak.max(info_field(&mut c, "memory", "used_memory"));
    let survivors = ((n - recent)..n)
        .filter(|j| c.command(&["EXISTS", &format!("k:{j}")]).unwrap() == b":1\r\n")
        .count();
    assert!(info_field(&mut c, "stats", "evicted_keys") > 0);
    (n, survivors, peak)
}

#[test]
fn allkeys_lru_keeps_the_recently_used_and_memory_near_the_limit() {
    let mut results = Vec::new();
    let ours = coordis_process(&["--enable-debug-command", "yes"]);
    results.push(("coordis", lru_fill(ours.addr())));
    if let Some(theirs) = redis(&[]) {
        results.push(("redis", lru_fill(theirs.addr())));
    }
    for (name, (n, survivors, peak)) in results {
        eprintln!(
            "{name}: {survivors} of {} recent keys survived, used_memory peaked at {peak}",
            n / 10
        );
        let recent = n / 10;
        // Nearly all of the recent tenth survives (sampling is approximate).
        assert!(
            survivors * 100 >= recent * 95,
            "{name}: {survivors} of {recent} recent keys survived"
        );
        // used_memory stays within a few percent of the limit.
        assert!(peak <= LIMIT + LIMIT / 20, "{name}: used_memory peaked at {peak}");
    }
}

/// Room above the base the volatile tests leave.
const VOLATILE_ROOM: u64 = 6 * 1024 * 1024;

/// Keys without a deadline, then twice the room in keys with deadlines
/// rising from 1 h: under volatile-ttl the shortest deadlines go first;
/// under volatile-* a key without a deadline is never evicted (and no
/// write is refused while volatile keys are left). Returns (keys without
/// a deadline kept, keys of the shorter-lived half left, refusals).
fn volatile_fill(addr: std::net::SocketAddr, policy: &str) -> (usize, usize, Vec<String>) {
    let mut c = RawClient::connect(addr).unwrap();
    c.command(&["FLUSHALL"]).unwrap();
    c.command(&["CONFIG", "SET", "maxmemory", "0"]).unwrap();
    c.command(&["CONFIG", "SET", "maxmemory-policy", policy]).unwrap();
    let value = "x".repeat(VALUE);
    for i in 0..KEEP {
        c.command(&["SET", &format!("keep:{i}"), &value]).unwrap();
    }
    let used = info_field(&mut c, "memory", "used_memory");
    c.command(&["CONFIG", "SET", "maxmemory", &(used + VOLATILE_ROOM).to_string()])
        .unwrap();
    let n = 2 * VOLATILE_ROOM as usize / VALUE;
    let mut refusals = Vec::new();
    for i in 0..n {
        let reply = c
            .command(&["SET", &format!("v:{i}"), &value, "EX", &(3600 + i).to_string()])
            .unwrap();
        if reply.starts_with(b"-") && refusals.is_empty() {
            refusals.push(text(&reply));
        }
    }
    let kept = (0..KEEP)
        .filter(|i| c.command(&["EXISTS", &format!("keep:{i}")]).unwrap() == b":1\r\n")
        .count();
    let early_left = (0..n / 2)
        .filter(|i| c.command(&["EXISTS", &format!("v:{i}")]).unwrap() == b":1\r\n")
        .count();
    (kept, early_left, refusals)
}

/// Keys without a deadline in the volatile tests.
const KEEP: usize = 2000;

#[test]
fn volatile_policies_take_only_keys_with_deadlines_and_ttl_the_shortest_first() {
    let ours = coordis_process(&[]);
    let theirs = redis(&[]);
    let mut servers = vec![("coordis", ours.addr())];
    if let Some(t) = &theirs {
        servers.push(("redis", t.addr()));
    }
    for (name, addr) in &servers {
        for policy in ["volatile-ttl", "volatile-lru", "volatile-random", "volatile-lfu"] {
            let (kept, early_left, errors) = volatile_fill(*addr, policy);
            assert_eq!(kept, KEEP, "{name} {policy}: a key without a deadline was evicted");
            assert!(errors.is_empty(), "{name} {policy}: {errors:?}");
            let half = VOLATILE_ROOM as usize / VALUE;
            eprintln!("{name} {policy}: {early_left} of the {half} shorter-lived keys left");
            if policy == "volatile-ttl" {
                assert!(
                    early_left * 10 < half,
                    "{name}: {early_left} of the {half} shortest TTLs left"
                );
            }
        }
    }
}

/// `evicted` keyspace events and the DEL effect of an evicted key, and the
/// test controls' candidates are what goes next.
#[test]
fn evictions_raise_events_and_propagate_del_and_candidates_predict_them() {
    let server = coordis::Server::builder().start_blocking().unwrap();
    let control = server.control();
    let mut effects = control.effects();
    let mut c = RawClient::connect(server.addr()).unwrap();
    c.command(&["CONFIG", "SET", "notify-keyspace-events", "Ee"]).unwrap();
    let mut sub = RawClient::connect(server.addr()).unwrap();
    sub.command(&["PSUBSCRIBE", "__keyevent@*__:evicted"]).unwrap();
    for i in 0..200 {
        c.command(&["SET", &format!("k:{i}"), "v"]).unwrap();
    }
    control.seed_random(7);
    c.command(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"])
        .unwrap();
    let candidates = control.eviction_candidates(16);
    assert!(!candidates.is_empty());
    // A limit of 1 byte under allkeys-lru evicts every key at once, the
    // predicted one first.
    control.set_memory_limit(1, "allkeys-lru").unwrap();
    assert_eq!(c.command(&["DBSIZE"]).unwrap(), b":0\r\n");
    sub.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let event = text(&sub.read_reply().unwrap());
    assert!(event.contains("__keyevent@0__:evicted"), "{event}");
    let first = event.lines().last().unwrap();
    assert_eq!(first.as_bytes(), &candidates[0].1[..], "{candidates:?}");
    let stream = text(&effects.try_bytes());
    assert!(stream.contains("$3\r\nDEL\r\n"), "{stream}");
    assert_eq!(info_field(&mut c, "stats", "evicted_keys"), 200);
    control.set_memory_limit(0, "noeviction").unwrap();
}

/// A file Redis saved under allkeys-lru carries each key's idle time (the
/// IDLE opcode), under allkeys-lfu its counter (FREQ): coordis loads them.
#[test]
fn rdb_access_hints_from_redis_are_loaded() {
    let Some(redis) = redis(&[]) else { return };
    let mut r = RawClient::connect(redis.addr()).unwrap();
    let dir_reply = text(&r.command(&["CONFIG", "GET", "dir"]).unwrap());
    let redis_dir = std::path::PathBuf::from(dir_reply.lines().nth(4).unwrap());
    for (policy, key, opt, n, ask, want) in [
        ("allkeys-lru", "idle", "IDLETIME", "5000", "IDLETIME", 5000..5005),
        ("allkeys-lfu", "hot", "FREQ", "123", "FREQ", 123..124),
    ] {
        r.command(&["FLUSHALL"]).unwrap();
        r.command(&["CONFIG", "SET", "maxmemory-policy", policy]).unwrap();
        r.command(&["SET", "src", "v"]).unwrap();
        let dump = r.command(&["DUMP", "src"]).unwrap();
        let payload = &dump[dump.iter().position(|&b| b == b'\n').unwrap() + 1..dump.len() - 2];
        r.command_bytes(&[b"RESTORE", key.as_bytes(), b"0", payload, opt.as_bytes(), n.as_bytes()])
            .unwrap();
        assert_eq!(r.command(&["SAVE"]).unwrap(), b"+OK\r\n");
        let dir = coordis::testing::TempDir::new("memory-hints");
        std::fs::copy(redis_dir.join("dump.rdb"), dir.0.join("dump.rdb")).unwrap();
        let server = coordis::Server::builder()
            .dir(dir.text())
            .maxmemory(0, coordis::EvictionPolicy::parse(policy).unwrap())
            .start_blocking()
            .unwrap();
        let mut c = RawClient::connect(server.addr()).unwrap();
        let got = int_reply(&c.command(&["OBJECT", ask, key]).unwrap());
        assert!(want.contains(&got), "{policy}: OBJECT {ask} {key} = {got}");
    }
}

/// The keys of a `COORDIS.MEMORY CANDIDATES` reply (`[db, key]` pairs), in order.
fn candidate_keys(reply: &[u8]) -> Vec<String> {
    let reply = text(reply);
    let mut lines = reply.split("\r\n");
    let mut keys = Vec::new();
    while let Some(line) = lines.next() {
        if line.starts_with('$') {
            keys.push(lines.next().unwrap().to_string());
        }
    }
    keys
}

/// Keys of the prediction test, each a value large enough that evicting
/// one brings memory under a limit set some KB below the memory in use.
const PREDICT_KEYS: usize = 200;
const PREDICT_VALUE: usize = 64 * 1024;
/// How far under the memory in use the prediction test sets the limit:
/// above what the commands in between allocate (a connection's buffers
/// move by some KB), well under a value.
const PREDICT_UNDER: u64 = 24 * 1024;

/// Fills a coordis-server (test clock frozen) under `policy` with keys of
/// varied idle times, frequencies and deadlines, seeds the generator, asks
/// twice for the candidates (the same answer: asking changes nothing),
/// then sets the limit just under the memory in use, which evicts one key.
/// Returns (the candidates, the keys evicted).
fn predicted_eviction(c: &mut RawClient, policy: &str) -> (Vec<String>, Vec<String>) {
    let ok = |reply: Vec<u8>| assert!(reply.starts_with(b"+OK") || reply.starts_with(b":"), "{}", text(&reply));
    ok(c.command(&["FLUSHALL"]).unwrap());
    // A limit far above the data (what setting one allocates the first
    // time is allocated now), lowered to just under the data at the end.
    ok(c.command(&["CONFIG", "SET", "maxmemory", "1gb"]).unwrap());
    ok(c.command(&["CONFIG", "SET", "maxmemory-policy", policy]).unwrap());
    let value = "x".repeat(PREDICT_VALUE);
    for i in 0..PREDICT_KEYS {
        if i % 20 == 0 {
            // LRU idle times five seconds apart per group; over a minute
            // in all, so the first keys' LFU counters decay.
            ok(c.command(&["COORDIS.CLOCK", "ADVANCE", "5000"]).unwrap());
        }
        let ttl = 3600 + (i * 7919) % PREDICT_KEYS;
        ok(c.command(&["SET", &format!("k:{i}"), &value, "EX", &ttl.to_string()])
            .unwrap());
    }
    for i in (0..PREDICT_KEYS).step_by(3) {
        for _ in 0..i % 7 {
            c.command(&["GET", &format!("k:{i}")]).unwrap();
        }
    }
    ok(c.command(&["COORDIS.SERVER", "SEED", "42"]).unwrap());
    let candidates = candidate_keys(&c.command(&["COORDIS.MEMORY", "CANDIDATES", "16"]).unwrap());
    let again = candidate_keys(&c.command(&["COORDIS.MEMORY", "CANDIDATES", "16"]).unwrap());
    assert_eq!(candidates, again, "{policy}: asking changed the answer");
    assert!(!candidates.is_empty(), "{policy}: no candidates");
    let used = int_reply(&c.command(&["COORDIS.MEMORY", "USED"]).unwrap());
    ok(
        c.command(&["CONFIG", "SET", "maxmemory", &(used - PREDICT_UNDER).to_string()])
            .unwrap(),
    );
    let evicted = (0..PREDICT_KEYS)
        .map(|i| format!("k:{i}"))
        .filter(|k| c.command(&["EXISTS", k]).unwrap() == b":0\r\n")
        .collect();
    let evicted: Vec<String> = evicted;
    assert_eq!(info_field(c, "stats", "evicted_keys") as usize, evicted.len());
    ok(c.command(&["CONFIG", "SET", "maxmemory", "0"]).unwrap());
    ok(c.command(&["CONFIG", "RESETSTAT"]).unwrap());
    (candidates, evicted)
}

/// `COORDIS.MEMORY CANDIDATES` names the key the next eviction takes, for
/// the sampled policies (LRU, LFU, volatile-ttl) and the random ones, and
/// asking leaves the generator and the pool as they were.
#[test]
fn candidates_name_the_key_the_next_eviction_takes() {
    let ours = coordis_process(&["--enable-test-commands", "yes"]);
    let mut c = RawClient::connect(ours.addr()).unwrap();
    assert!(c.command(&["COORDIS.CLOCK", "FREEZE"]).unwrap().starts_with(b":"));
    for policy in [
        "allkeys-lru",
        "allkeys-lfu",
        "allkeys-random",
        "volatile-ttl",
        "volatile-lru",
        "volatile-lfu",
        "volatile-random",
    ] {
        let (candidates, evicted) = predicted_eviction(&mut c, policy);
        assert_eq!(evicted, candidates[..1], "{policy}: candidates {candidates:?}");
    }
}

/// The seed a test sets from Rust reaches the controls' own commands
/// (`ServerControl::eviction_candidates`, which runs on the test-control
/// path) as it reaches clients' commands: the same seed, the same answer,
/// from Rust or over the wire, and the eviction that follows takes it.
#[test]
fn seed_random_reaches_the_test_controls() {
    let server = coordis::Server::builder().start_blocking().unwrap();
    let control = server.control();
    let mut c = RawClient::connect(server.addr()).unwrap();
    // The prediction stops at the first key drawn twice: with 20,000 keys
    // five draws repeat one about once in 2,000 layouts (the keyspace's
    // hash seed is random per process); with 500, once in 50.
    const KEYS: usize = 20_000;
    let mut pipeline = Vec::new();
    for i in 0..KEYS {
        pipeline.extend(RawClient::encode(&[b"SET", format!("k:{i}").as_bytes(), b"v"]));
    }
    c.send(&pipeline).unwrap();
    for _ in 0..KEYS {
        assert_eq!(c.read_reply().unwrap(), b"+OK\r\n");
    }
    control.set_memory_limit(0, "allkeys-random").unwrap();
    let ask = |seed: u64| {
        control.seed_random(seed);
        control.eviction_candidates(5)
    };
    let seven = ask(7);
    assert_eq!(seven.len(), 5);
    assert_eq!(ask(7), seven);
    assert_ne!(ask(8), seven, "another seed, the same draws");
    control.seed_random(7);
    let wire = candidate_keys(&c.command(&["COORDIS.MEMORY", "CANDIDATES", "5"]).unwrap());
    let rust: Vec<String> = seven.iter().map(|(_, k)| text(k)).collect();
    assert_eq!(wire, rust);
    // Seeded over the wire, asked from Rust.
    c.command(&["COORDIS.SERVER", "SEED", "7"]).unwrap();
    assert_eq!(control.eviction_candidates(5), seven);
    // The eviction the limit starts (on the same path) takes the predicted key first.
    let mut sub = RawClient::connect(server.addr()).unwrap();
    c.command(&["CONFIG", "SET", "notify-keyspace-events", "Ee"]).unwrap();
    sub.command(&["SUBSCRIBE", "__keyevent@0__:evicted"]).unwrap();
    control.seed_random(7);
    control.set_memory_limit(1, "allkeys-random").unwrap();
    sub.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let event = text(&sub.read_reply().unwrap());
    assert_eq!(event.lines().last().unwrap(), rust[0], "{event}");
    control.set_memory_limit(0, "noeviction").unwrap();
}

/// The limit the fill tests set, and the value size they fill with.
const FILL_LIMIT: u64 = 16 * 1024 * 1024;
const FILL_SIZE: u64 = 1000;

/// `COORDIS.MEMORY FILL` on a coordis-server: under noeviction it adds
/// `fill:<n>` keys of the size asked until the memory counted reaches the
/// fraction (one key past it at most), a second fill goes on from the
/// keys there, a fill past the limit leaves writes refused and nothing
/// evicted; under allkeys-lru the fill itself evicts nothing, the next
/// command brings memory back under the limit.
#[test]
fn fill_reaches_the_fraction_asked_with_the_keys_it_names() {
    let ours = coordis_process(&["--enable-test-commands", "yes"]);
    let mut c = RawClient::connect(ours.addr()).unwrap();
    let used = |c: &mut RawClient| int_reply(&c.command(&["COORDIS.MEMORY", "USED"]).unwrap());
    // A fill stops at the first key that reaches the fraction; the reply
    // and the next commands move the count by some hundred bytes either way.
    const SLACK: u64 = FILL_LIMIT / 100;
    let at = |percent: u64| FILL_LIMIT * percent / 100 - SLACK;
    let dbsize = |c: &mut RawClient| int_reply(&c.command(&["DBSIZE"]).unwrap());
    assert_eq!(
        text(&c.command(&["COORDIS.MEMORY", "FILL", "50"]).unwrap()),
        "-ERR COORDIS.MEMORY FILL needs a maxmemory limit (COORDIS.MEMORY LIMIT sets one)\r\n"
    );
    let limit = FILL_LIMIT.to_string();
    let size = FILL_SIZE.to_string();
    assert_eq!(
        c.command(&["COORDIS.MEMORY", "LIMIT", &limit, "POLICY", "noeviction"])
            .unwrap(),
        b"+OK\r\n"
    );
    assert_eq!(
        text(&c.command(&["COORDIS.MEMORY", "FILL", "1001"]).unwrap()),
        "-ERR COORDIS.MEMORY FILL percent must be at most 1000\r\n"
    );
    let base = used(&mut c);
    assert!(base < FILL_LIMIT / 4, "the server starts at {base} bytes");
    let half = int_reply(&c.command(&["COORDIS.MEMORY", "FILL", "50", "SIZE", &size]).unwrap());
    let after = used(&mut c);
    eprintln!("noeviction: {half} keys of {FILL_SIZE} B took {base} -> {after} bytes");
    // At the fraction, by at most a key and what the commands allocate.
    assert!(after >= at(50) && after < FILL_LIMIT / 2 + SLACK, "{after}");
    // Each key costs its value and some bytes of key and header, no more
    // than twice the value.
    let grown = after - base;
    assert!(
        half * FILL_SIZE <= grown && grown <= 2 * half * FILL_SIZE,
        "{half} keys, {grown} bytes"
    );
    assert_eq!(dbsize(&mut c), half);
    assert_eq!(
        c.command(&["STRLEN", "fill:0"]).unwrap(),
        format!(":{FILL_SIZE}\r\n").as_bytes()
    );
    let last = format!("fill:{}", half - 1);
    assert_eq!(c.command(&["EXISTS", &last]).unwrap(), b":1\r\n");
    assert_eq!(c.command(&["EXISTS", &format!("fill:{half}")]).unwrap(), b":0\r\n");
    // A second fill adds keys after those there, to 90 %.
    let more = int_reply(&c.command(&["COORDIS.MEMORY", "FILL", "90", "SIZE", &size]).unwrap());
    assert!(more > 0 && more < half, "{more} more keys after {half}");
    assert_eq!(dbsize(&mut c), half + more);
    assert_eq!(
        c.command(&["EXISTS", &format!("fill:{}", half + more - 1)]).unwrap(),
        b":1\r\n"
    );
    assert!(used(&mut c) >= at(90));
    // Past the limit (PREFIX names the keys): nothing is evicted, writes
    // that grow memory are refused, reads go on.
    let over = int_reply(
        &c.command(&["COORDIS.MEMORY", "FILL", "110", "SIZE", &size, "PREFIX", "over:"])
            .unwrap(),
    );
    assert_eq!(c.command(&["EXISTS", "over:0"]).unwrap(), b":1\r\n");
    let u = used(&mut c);
    assert!(u >= at(110), "{over} keys, {u} bytes");
    assert!(text(&c.command(&["SET", "one", "more"]).unwrap()).starts_with("-OOM "));
    assert_eq!(dbsize(&mut c), half + more + over);
    assert_eq!(info_field(&mut c, "stats", "evicted_keys"), 0);

    // allkeys-lru: the fill goes past the limit; the next command evicts.
    c.command(&["FLUSHALL"]).unwrap();
    assert_eq!(
        c.command(&["COORDIS.MEMORY", "LIMIT", &limit, "POLICY", "allkeys-lru"])
            .unwrap(),
        b"+OK\r\n"
    );
    let filled = int_reply(&c.command(&["COORDIS.MEMORY", "FILL", "150", "SIZE", &size]).unwrap());
    // The next commands evict (each run bounded by the tenacity's time,
    // the rest before the command after), down to the limit.
    let mut used_after = used(&mut c);
    for _ in 0..1000 {
        if used_after <= FILL_LIMIT {
            break;
        }
        used_after = used(&mut c);
    }
    assert!(used_after <= FILL_LIMIT, "{used_after}");
    assert_eq!(c.command(&["SET", "one", "more"]).unwrap(), b"+OK\r\n");
    // Every key the fill made is still there or was evicted (read at one
    // instant: a command between two reads may evict).
    c.command(&["MULTI"]).unwrap();
    c.command(&["DBSIZE"]).unwrap();
    c.command(&["INFO", "stats"]).unwrap();
    let both = text(&c.command(&["EXEC"]).unwrap());
    let keys = int_reply(both.lines().nth(1).unwrap().as_bytes());
    let evicted: u64 = both
        .lines()
        .find_map(|l| l.strip_prefix("evicted_keys:"))
        .unwrap()
        .parse()
        .unwrap();
    eprintln!("allkeys-lru: {filled} keys filled to 150 %, {evicted} evicted, {used_after} bytes used after");
    // A third of the fill's memory shed: at least a fifth of its keys.
    assert!(evicted * 5 >= filled, "{evicted} of {filled} evicted");
    assert_eq!(keys + evicted, filled + 1);
}

/// `ServerControl::fill_memory` in an embedded server: the keys it adds
/// are the keys it says, strings of the size asked, and the limit it
/// fills to is then in use (an embedded server counts its whole process:
/// the limit is set above what the process holds now).
#[test]
fn fill_memory_from_rust_adds_the_keys_it_counts() {
    let server = coordis::Server::builder().start_blocking().unwrap();
    let control = server.control();
    assert!(control
        .fill_memory(50, 100)
        .unwrap_err()
        .contains("needs a maxmemory limit"));
    let limit = control.used_memory() + FILL_LIMIT;
    control.set_memory_limit(limit, "noeviction").unwrap();
    let added = control.fill_memory(100, FILL_SIZE as usize).unwrap();
    assert!(control.used_memory() >= limit - FILL_LIMIT / 4);
    // The room was FILL_LIMIT: about that many bytes of keys (the rest of
    // the process allocates and frees meanwhile).
    assert!(
        added * FILL_SIZE > FILL_LIMIT / 4 && added * FILL_SIZE <= FILL_LIMIT + FILL_LIMIT / 4,
        "{added} keys"
    );
    let mut c = RawClient::connect(server.addr()).unwrap();
    assert_eq!(int_reply(&c.command(&["DBSIZE"]).unwrap()), added);
    let keyspace = control.keyspace();
    let last = format!("fill:{}", added - 1);
    for key in ["fill:0", last.as_str()] {
        match keyspace.get(key) {
            Some(coordis::KeyValue::String(v)) => assert_eq!(v.len(), FILL_SIZE as usize),
            other => panic!("{key}: {other:?}"),
        }
    }
    control.set_memory_limit(0, "noeviction").unwrap();
}

/// A replica over its maxmemory: under `replica-ignore-maxmemory yes` (the
/// default) it keeps every key its primary sends; with `no` the next write
/// from the primary makes it evict on its own (`replica`: its address,
/// already following `primary`). Returns the replica's DBSIZE after each
/// phase and the primary's.
fn replica_over_maxmemory(primary: std::net::SocketAddr, replica: std::net::SocketAddr) -> (u64, u64, u64) {
    let mut p = RawClient::connect(primary).unwrap();
    let mut r = RawClient::connect(replica).unwrap();
    let wait = |what: &str, done: &mut dyn FnMut() -> bool| {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while !done() {
            assert!(std::time::Instant::now() < deadline, "never: {what}");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    wait("the link is up", &mut || {
        r.info_field("replication", "master_link_status") == "up"
    });
    let used: u64 = r.info_field("memory", "used_memory").parse().unwrap();
    let limit = (used + 1024 * 1024).to_string();
    r.command(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"])
        .unwrap();
    r.command(&["CONFIG", "SET", "maxmemory", &limit]).unwrap();
    let value = "v".repeat(10_000);
    let caught_up = |p: &mut RawClient, r: &mut RawClient| {
        p.info_field("replication", "master_repl_offset") == r.info_field("replication", "master_repl_offset")
    };
    for i in 0..300 {
        p.command(&["SET", &format!("k{i}"), &value]).unwrap();
    }
    wait("the replica caught up", &mut || caught_up(&mut p, &mut r));
    let kept = int_reply(&r.command(&["DBSIZE"]).unwrap());
    r.command(&["CONFIG", "SET", "replica-ignore-maxmemory", "no"]).unwrap();
    p.command(&["SET", "k300", &value]).unwrap();
    wait("the replica caught up again", &mut || caught_up(&mut p, &mut r));
    let after = int_reply(&r.command(&["DBSIZE"]).unwrap());
    (kept, after, int_reply(&p.command(&["DBSIZE"]).unwrap()))
}

#[test]
fn a_replica_ignores_maxmemory_unless_told_otherwise() {
    let primary = coordis_process(&["--save", ""]);
    let port = primary.addr().port().to_string();
    let replica = coordis_process(&["--save", "", "--replicaof", "127.0.0.1", &port]);
    let (kept, after, total) = replica_over_maxmemory(primary.addr(), replica.addr());
    assert_eq!((kept, total), (300, 301), "coordis: every key kept under the default");
    assert!(
        after < total,
        "coordis: replica-ignore-maxmemory no evicts ({after} of {total})"
    );
    if let Some(redis_primary) = redis(&[]) {
        let port = redis_primary.addr().port().to_string();
        let redis_replica = redis(&["--replicaof", "127.0.0.1", &port]).unwrap();
        let (kept, after, total) = replica_over_maxmemory(redis_primary.addr(), redis_replica.addr());
        assert_eq!((kept, total), (300, 301), "Redis: every key kept under the default");
        assert!(
            after < total,
            "Redis: replica-ignore-maxmemory no evicts ({after} of {total})"
        );
    }
}
