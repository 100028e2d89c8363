//! coordis as a replica of a real redis-server 7.0.15: full resyncs (the
//! diskless `$EOF:` and the disk-based `$len` framing), the stream after a
//! random workload over every family (DEBUG DIGEST equal), a cut link that
//! continues partially (Redis's `sync_partial_ok`), a primary with a new
//! replication ID that gives a full one, READONLY and MASTERDOWN worded as
//! a real Redis replica words them, expiry through the primary's DELs, and
//! REPLICAOF NO ONE; INFO's `master_sync_*` lines while a full sync is held
//! mid-transfer and `master_link_down_since_seconds` after it, beside a
//! redis-server replica of the same scripted primary. Every test skips
//! loudly without redis-server.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use coordis::testing::{compare_digests, RawClient, RedisServer};
use coordis::BlockingServer;

/// The tests run one at a time: two servers started at once can be given
/// the same free port (`free_port` releases it before the server binds),
/// and a Redis that lost that race would be another test's server.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// How long a test waits for the replica to reach a state.
const PATIENCE: Duration = Duration::from_secs(20);

/// A Redis primary that syncs at once (no diskless delay), with DEBUG.
fn redis_primary(extra: &[&str]) -> Option<RedisServer> {
    let mut args = vec!["--repl-diskless-sync-delay", "0", "--enable-debug-command", "yes"];
    args.extend_from_slice(extra);
    RedisServer::start(&args).unwrap()
}

/// An embedded coordis with DEBUG, to be made a replica by the test.
fn coordis() -> BlockingServer {
    let mut builder = coordis::Server::builder();
    builder.config_mut().enable_debug_command = "yes".into();
    builder.start_blocking().unwrap()
}

fn text(reply: &[u8]) -> String {
    String::from_utf8_lossy(reply).into_owned()
}

fn cmd(addr: SocketAddr, args: &[&str]) -> String {
    text(&RawClient::connect(addr).unwrap().command(args).unwrap())
}

/// One field of `INFO <section>` (`None` when absent).
fn info(addr: SocketAddr, section: &str, field: &str) -> Option<String> {
    let body = cmd(addr, &["INFO", section]);
    body.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")).map(|v| v.trim().to_string()))
}

fn info_num(addr: SocketAddr, section: &str, field: &str) -> i64 {
    info(addr, section, field)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("INFO {section} has no number {field}"))
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn replicaof(replica: SocketAddr, primary: SocketAddr) -> String {
    cmd(replica, &["REPLICAOF", "127.0.0.1", &primary.port().to_string()])
}

/// Whether the primary streams to every replica it has (after a diskless
/// transfer Redis starts the stream at the replica's next ACK, which a
/// replica sends once a second, as Redis's own).
/// A coordis replica following a fresh Redis primary, caught up; `None`
/// without redis-server.
fn following_redis() -> Option<(RedisServer, BlockingServer)> {
    let redis = redis_primary(&[])?;
    let replica = coordis();
    assert_eq!(replicaof(replica.addr(), redis.addr()), "+OK\r\n");
    wait_caught_up(replica.addr(), redis.addr());
    Some((redis, replica))
}

fn all_online(primary: SocketAddr) -> bool {
    let body = cmd(primary, &["INFO", "replication"]);
    let mut replicas = body.lines().filter(|l| l.starts_with("slave") && l.contains("state="));
    replicas.all(|l| l.contains("state=online"))
}

/// Waits until `replica`'s link is up and it has applied everything
/// `primary` has sent.
fn wait_caught_up(replica: SocketAddr, primary: SocketAddr) {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if info(replica, "replication", "master_link_status").as_deref() == Some("up")
            && all_online(primary)
            && info_num(replica, "replication", "slave_repl_offset")
                == info_num(primary, "replication", "master_repl_offset")
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for the replica to catch up: replica {}\nprimary {}",
            cmd(replica, &["INFO", "replication"]),
            cmd(primary, &["INFO", "replication"])
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn assert_same_digest(a: SocketAddr, b: SocketAddr) {
    let diff = compare_digests(a, b, &[0, 1, 2]).unwrap();
    assert!(diff.is_empty(), "datasets differ:\n{}", diff.join("\n"));
    assert_ne!(
        coordis::testing::debug_digest(a).unwrap(),
        "0000000000000000000000000000000000000000",
        "the workload left data"
    );
}

/// A seeded random workload over every family, in databases 0..3, with
/// relative TTLs, transactions and scripts (what the primary rewrites
/// into its effects), sent as one pipeline.
fn workload(seed: u64, n: usize) -> Vec<Vec<String>> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let key = |rng: &mut fastrand::Rng, kind: &str| format!("{kind}:{}", rng.u32(0..12));
    let mut out: Vec<Vec<String>> = Vec::new();
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    for _ in 0..n {
        let v = rng.u32(0..1000).to_string();
        let f = format!("f{}", rng.u32(0..6));
        let c = match rng.u32(0..24) {
            0 => s(&["SET", &key(&mut rng, "s"), &v]),
            1 => s(&["INCRBY", &key(&mut rng, "n"), &v]),
            2 => s(&["APPEND", &key(&mut rng, "s"), &v]),
            3 => s(&["SET", &key(&mut rng, "t"), &v, "EX", "1000"]),
            4 => s(&["RPUSH", &key(&mut rng, "l"), &v, &f]),
            5 => s(&["LPOP", &key(&mut rng, "l")]),
            6 => s(&["HSET", &key(&mut rng, "h"), &f, &v]),
            7 => s(&["HINCRBYFLOAT", &key(&mut rng, "h"), "x", "1.5"]),
            8 => s(&["SADD", &key(&mut rng, "set"), &v, &f]),
            9 => s(&["SPOP", &key(&mut rng, "set")]),
            10 => s(&["ZADD", &key(&mut rng, "z"), &v, &f]),
            11 => s(&["ZINCRBY", &key(&mut rng, "z"), "2", &f]),
            12 => s(&["XADD", &key(&mut rng, "x"), "*", &f, &v]),
            13 => s(&["PFADD", &key(&mut rng, "hll"), &v, &f]),
            14 => s(&["SETBIT", &key(&mut rng, "b"), &v, "1"]),
            15 => s(&["GEOADD", &key(&mut rng, "g"), "13.36", "38.11", &f]),
            16 => s(&["EXPIRE", &key(&mut rng, "s"), "500"]),
            17 => s(&["DEL", &key(&mut rng, "l")]),
            18 => s(&["SELECT", &rng.u32(0..3).to_string()]),
            19 => s(&[
                "EVAL",
                "redis.call('incr', KEYS[1]); return redis.call('rpush', KEYS[2], ARGV[1])",
                "2",
                &key(&mut rng, "n"),
                &key(&mut rng, "l"),
                &v,
            ]),
            20 => s(&["INCRBYFLOAT", &key(&mut rng, "fl"), "0.25"]),
            21 => s(&["RENAME", &key(&mut rng, "s"), &key(&mut rng, "s")]),
            22 => s(&["LMOVE", &key(&mut rng, "l"), &key(&mut rng, "l"), "LEFT", "RIGHT"]),
            _ => {
                let k = key(&mut rng, "h");
                out.push(s(&["MULTI"]));
                out.push(s(&["HSET", &k, &f, &v]));
                out.push(s(&["SADD", &key(&mut rng, "set"), &v]));
                s(&["EXEC"])
            }
        };
        out.push(c);
    }
    out
}

/// Sends a workload as one pipeline and reads every reply.
fn run_workload(addr: SocketAddr, commands: &[Vec<String>]) {
    let mut c = RawClient::connect(addr).unwrap();
    let mut bytes = Vec::new();
    for command in commands {
        let args: Vec<&[u8]> = command.iter().map(|a| a.as_bytes()).collect();
        bytes.extend(RawClient::encode(&args));
    }
    c.send(&bytes).unwrap();
    for _ in commands {
        c.read_reply().unwrap();
    }
}

#[test]
fn coordis_follows_a_redis_primary_through_full_and_partial_resyncs() {
    let _serial = serial();
    let Some(redis) = redis_primary(&[]) else {
        return;
    };
    let replica = coordis();
    let (p, r) = (redis.addr(), replica.addr());
    // Data of every type before the sync travels in the (diskless) RDB,
    // with a function library.
    run_workload(p, &workload(1, 400));
    cmd(
        p,
        &[
            "FUNCTION",
            "LOAD",
            "#!lua name=lib\nredis.register_function{function_name='f', callback=function() return 1 end, flags={'no-writes'}}",
        ],
    );
    assert_eq!(replicaof(r, p), "+OK\r\n");
    assert_eq!(replicaof(r, p), "+OK Already connected to specified master\r\n");
    wait_caught_up(r, p);
    assert_eq!(info_num(p, "stats", "sync_full"), 1);
    assert_same_digest(p, r);
    assert_eq!(cmd(r, &["FCALL", "f", "0"]), ":1\r\n", "the RDB's library loaded");
    // The stream: a random workload over every family.
    run_workload(p, &workload(2, 2000));
    wait_caught_up(r, p);
    assert_same_digest(p, r);
    let role = cmd(r, &["ROLE"]);
    assert!(
        role.starts_with(&format!(
            "*5\r\n$5\r\nslave\r\n$9\r\n127.0.0.1\r\n:{}\r\n$9\r\nconnected\r\n",
            p.port()
        )),
        "{role:?}"
    );
    // The primary's replication ID is the replica's.
    assert_eq!(
        info(r, "replication", "master_replid"),
        info(p, "replication", "master_replid")
    );

    // A cut link continues partially.
    let partial_before = info_num(p, "stats", "sync_partial_ok");
    assert_eq!(cmd(p, &["CLIENT", "KILL", "TYPE", "replica"]), ":1\r\n");
    run_workload(p, &workload(3, 300));
    wait_for("a partial resync", || {
        info_num(p, "stats", "sync_partial_ok") > partial_before
    });
    wait_caught_up(r, p);
    assert_same_digest(p, r);
    assert_eq!(info_num(p, "stats", "sync_full"), 1, "no full resync for a cut link");

    // A primary with a new history (as after a restart) answers a full one.
    assert_eq!(cmd(p, &["DEBUG", "CHANGE-REPL-ID"]), "+OK\r\n");
    cmd(r, &["SET", "ignored", "1"]);
    assert_eq!(cmd(p, &["CLIENT", "KILL", "TYPE", "replica"]), ":1\r\n");
    run_workload(p, &workload(4, 300));
    wait_for("a full resync", || info_num(p, "stats", "sync_full") == 2);
    wait_caught_up(r, p);
    assert_same_digest(p, r);
}

#[test]
fn a_disk_based_full_sync_and_the_acknowledged_offset() {
    let _serial = serial();
    let Some(redis) = redis_primary(&["--repl-diskless-sync", "no"]) else {
        return;
    };
    let replica = coordis();
    let (p, r) = (redis.addr(), replica.addr());
    run_workload(p, &workload(5, 600));
    assert_eq!(replicaof(r, p), "+OK\r\n");
    wait_caught_up(r, p);
    assert_same_digest(p, r);
    // The replica's acknowledgements reach the primary: WAIT counts it.
    run_workload(p, &workload(6, 200));
    let mut c = RawClient::connect(p).unwrap();
    c.command(&["SET", "acked", "1"]).unwrap();
    let asked = Instant::now();
    assert_eq!(text(&c.command(&["WAIT", "1", "5000"]).unwrap()), ":1\r\n");
    // WAIT sends REPLCONF GETACK: the replica answers at once, not at its
    // next once-a-second ACK.
    assert!(asked.elapsed() < Duration::from_millis(500), "{:?}", asked.elapsed());
    // Every ACK is an offset the primary sent: after it, the replica's
    // acknowledged offset is the primary's.
    wait_for("the acknowledged offset", || {
        let slave0 = info(p, "replication", "slave0").unwrap();
        slave0.contains(&format!("offset={},", info_num(p, "replication", "master_repl_offset")))
    });
    wait_caught_up(r, p);
    assert_same_digest(p, r);
    let slave0 = info(p, "replication", "slave0").unwrap();
    assert!(slave0.contains(&format!("port={}", r.port())), "{slave0}");
}

/// The refusals a client gets from a replica, asked of coordis and of a
/// real Redis replica of the same primary.
fn refusals(replica: SocketAddr) -> Vec<String> {
    let mut c = RawClient::connect(replica).unwrap();
    let mut out = vec![];
    for args in [
        &["SET", "k", "v"][..],
        &["GET", "k"],
        &["INCR", "n"],
        &["EVAL", "return redis.call('set', 'k', 'v')", "0"],
        &["EVAL", "return redis.call('get', 'k')", "0"],
        &["MULTI"],
        &["SET", "k", "v"],
        &["EXEC"],
        &["MULTI"],
        &["GET", "k"],
        &["EXEC"],
        // A shebang's flags decide: without no-writes it is a write.
        &["EVAL", "#!lua\nreturn redis.call('get', 'k')", "0"],
        &["EVAL", "#!lua flags=no-writes\nreturn redis.call('get', 'k')", "0"],
        &["FCALL", "w", "0"],
        &["FCALL", "r", "0"],
        &["FCALL_RO", "r", "0"],
    ] {
        out.push(text(&c.command(args).unwrap()));
    }
    out
}

/// A library with a function that may write and one that declares
/// `no-writes` and `allow-stale`.
const LIBRARY: &str = "#!lua name=lib\n\
    redis.register_function('w', function() return redis.call('get', 'k') end)\n\
    redis.register_function{function_name='r', callback=function() return redis.call('get', 'k') end, flags={'no-writes', 'allow-stale'}}";

/// What a replica with `replica-serve-stale-data no` answers while its
/// link is down.
fn stale_answers(replica: SocketAddr) -> Vec<String> {
    let mut c = RawClient::connect(replica).unwrap();
    let mut out = vec![];
    for args in [
        &["GET", "k"][..],
        &["SET", "k", "v"],
        &["PING"],
        &["ECHO", "e"],
        &["DBSIZE"],
        &["EVAL", "return 1", "0"],
        &["EVAL", "#!lua\nreturn 1", "0"],
        &["EVAL", "#!lua flags=no-writes,allow-stale\nreturn 1", "0"],
        &["FCALL", "w", "0"],
        &["FCALL_RO", "r", "0"],
    ] {
        out.push(text(&c.command(args).unwrap()));
    }
    out
}

#[test]
fn refusals_on_a_replica_are_worded_as_a_redis_replica_words_them() {
    let _serial = serial();
    let Some(redis) = redis_primary(&[]) else {
        return;
    };
    let Some(redis_replica) = RedisServer::start(&[]).unwrap() else {
        return;
    };
    let replica = coordis();
    let (p, theirs, ours) = (redis.addr(), redis_replica.addr(), replica.addr());
    cmd(p, &["SET", "k", "from-primary"]);
    assert_eq!(cmd(p, &["FUNCTION", "LOAD", LIBRARY]), "$3\r\nlib\r\n");
    for r in [theirs, ours] {
        assert_eq!(replicaof(r, p), "+OK\r\n");
        wait_caught_up(r, p);
    }
    let expected = refusals(theirs);
    assert!(expected[0].starts_with("-READONLY You can't write against a read only replica."));
    assert_eq!(refusals(ours), expected);
    // replica-read-only no: writes are accepted (and stay local).
    for r in [theirs, ours] {
        assert_eq!(cmd(r, &["CONFIG", "SET", "replica-read-only", "no"]), "+OK\r\n");
        assert_eq!(cmd(r, &["SET", "local", "1"]), "+OK\r\n");
        assert_eq!(cmd(r, &["CONFIG", "SET", "replica-read-only", "yes"]), "+OK\r\n");
    }
    // The link down with replica-serve-stale-data no: MASTERDOWN, but for
    // the commands flagged stale.
    // A "primary" that accepts connections and never answers: the links
    // stay down, and no other test's server can take its port meanwhile.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let nobody = silent.local_addr().unwrap().port().to_string();
    for r in [theirs, ours] {
        assert_eq!(cmd(r, &["CONFIG", "SET", "replica-serve-stale-data", "no"]), "+OK\r\n");
        assert_eq!(cmd(r, &["REPLICAOF", "127.0.0.1", &nobody]), "+OK\r\n");
        assert_eq!(info(r, "replication", "master_link_status").as_deref(), Some("down"));
    }
    let expected = stale_answers(theirs);
    assert!(expected[0].starts_with("-MASTERDOWN"), "{expected:?}");
    assert_eq!(stale_answers(ours), expected);
    // With stale data served, reads answer from the old dataset.
    assert_eq!(
        cmd(ours, &["CONFIG", "SET", "replica-serve-stale-data", "yes"]),
        "+OK\r\n"
    );
    assert_eq!(cmd(ours, &["GET", "k"]), "$12\r\nfrom-primary\r\n");
    // Back to the real primary: the handshake stuck on the silent one is
    // dropped at once (within the wait, well before its timeout).
    assert_eq!(replicaof(ours, p), "+OK\r\n");
    cmd(p, &["SET", "k", "again"]);
    wait_caught_up(ours, p);
    assert_eq!(cmd(ours, &["GET", "k"]), "$5\r\nagain\r\n");
    drop(silent);
}

#[test]
fn keys_expire_on_a_replica_through_the_primarys_dels() {
    let _serial = serial();
    let Some((redis, replica)) = following_redis() else {
        return;
    };
    let (p, r) = (redis.addr(), replica.addr());
    // The primary does not expire by itself for now: the replica hides
    // the key once past its deadline, but keeps it (no expiry of its own).
    assert_eq!(cmd(p, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]), "+OK\r\n");
    assert_eq!(cmd(p, &["SET", "short", "v", "PX", "1000"]), "+OK\r\n");
    assert_eq!(cmd(p, &["SET", "long", "v"]), "+OK\r\n");
    wait_caught_up(r, p);
    assert_eq!(cmd(r, &["GET", "short"]), "$1\r\nv\r\n");
    std::thread::sleep(Duration::from_millis(1200));
    assert_eq!(
        cmd(r, &["GET", "short"]),
        "$-1\r\n",
        "a logically expired key reads as absent"
    );
    assert_eq!(cmd(r, &["EXISTS", "short"]), ":0\r\n");
    assert_eq!(
        cmd(r, &["DBSIZE"]),
        ":2\r\n",
        "the replica keeps it for the primary's DEL"
    );
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(cmd(r, &["DBSIZE"]), ":2\r\n", "no active expiry on a replica");
    // The primary expires it and its DEL removes it on the replica.
    assert_eq!(cmd(p, &["DEBUG", "SET-ACTIVE-EXPIRE", "1"]), "+OK\r\n");
    wait_for("the primary's DEL", || cmd(r, &["DBSIZE"]) == ":1\r\n");
    assert_eq!(info_num(p, "stats", "expired_keys"), 1);
    wait_caught_up(r, p);
    assert_same_digest(p, r);
}

/// The primary's approximate trim with LIMIT arrives rewritten as the
/// exact trim it made (`MAXLEN = n LIMIT m`): the replica obeys it as
/// written, as a Redis replica does, where a client would be refused.
#[test]
fn an_approximate_trim_with_limit_from_the_primary_is_applied_as_written() {
    let _serial = serial();
    let Some((redis, replica)) = following_redis() else {
        return;
    };
    let (p, r) = (redis.addr(), replica.addr());
    assert_eq!(cmd(p, &["CONFIG", "SET", "stream-node-max-entries", "10"]), "+OK\r\n");
    for i in 1..=100 {
        cmd(p, &["XADD", "s", &format!("0-{i}"), "item", "v"]);
    }
    cmd(
        p,
        &["XADD", "s", "MAXLEN", "~", "5", "LIMIT", "30", "0-101", "item", "v"],
    );
    assert_eq!(cmd(p, &["XLEN", "s"]), ":71\r\n", "three nodes of ten went");
    wait_caught_up(r, p);
    assert_eq!(cmd(r, &["XLEN", "s"]), ":71\r\n");
    assert_same_digest(p, r);
}

/// Strings and bit offsets past the replica's own proto-max-bulk-len are
/// applied from the primary's stream (its server allowed them), as a Redis
/// replica applies them, while a client of the replica is refused.
#[test]
fn the_primarys_long_strings_pass_the_replicas_size_limit() {
    let _serial = serial();
    let Some((redis, replica)) = following_redis() else {
        return;
    };
    let (p, r) = (redis.addr(), replica.addr());
    assert_eq!(cmd(r, &["CONFIG", "SET", "proto-max-bulk-len", "1mb"]), "+OK\r\n");
    assert_eq!(cmd(p, &["SETRANGE", "range", "2000000", "x"]), ":2000001\r\n");
    assert_eq!(cmd(p, &["SETBIT", "bits", "16000000", "1"]), ":0\r\n");
    cmd(p, &["SET", "appended", "a"]);
    cmd(p, &["APPEND", "appended", &"b".repeat(1_100_000)]);
    wait_caught_up(r, p);
    assert_eq!(cmd(r, &["STRLEN", "range"]), ":2000001\r\n");
    assert_eq!(cmd(r, &["STRLEN", "bits"]), ":2000001\r\n");
    assert_eq!(cmd(r, &["STRLEN", "appended"]), ":1100001\r\n");
    assert_same_digest(p, r);
    assert_eq!(cmd(r, &["REPLICAOF", "NO", "ONE"]), "+OK\r\n");
    assert_eq!(
        cmd(r, &["SETRANGE", "other", "2000000", "x"]),
        "-ERR string exceeds maximum allowed size (proto-max-bulk-len)\r\n"
    );
}

#[test]
fn replicaof_no_one_promotes_and_shifts_the_replication_ids() {
    let _serial = serial();
    let Some(redis) = redis_primary(&[]) else {
        return;
    };
    let replica = coordis();
    let (p, r) = (redis.addr(), replica.addr());
    run_workload(p, &workload(7, 200));
    assert_eq!(replicaof(r, p), "+OK\r\n");
    wait_caught_up(r, p);
    assert!(cmd(r, &["SET", "x", "1"]).starts_with("-READONLY"));
    let primary_id = info(p, "replication", "master_replid").unwrap();
    let offset = info_num(r, "replication", "master_repl_offset");
    assert_eq!(cmd(r, &["REPLICAOF", "NO", "ONE"]), "+OK\r\n");
    assert_eq!(cmd(r, &["REPLICAOF", "NO", "ONE"]), "+OK\r\n", "already a primary");
    assert_eq!(cmd(r, &["SET", "x", "1"]), "+OK\r\n");
    assert_eq!(info(r, "replication", "role").as_deref(), Some("master"));
    assert_eq!(info(r, "replication", "master_replid2"), Some(primary_id.clone()));
    assert_ne!(info(r, "replication", "master_replid"), Some(primary_id));
    assert_eq!(info_num(r, "replication", "second_repl_offset"), offset + 1);
    assert!(cmd(r, &["ROLE"]).starts_with("*3\r\n$6\r\nmaster\r\n"));
    // The stream stopped: the primary's writes no longer arrive.
    cmd(p, &["SET", "after", "1"]);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(cmd(r, &["GET", "after"]), "$-1\r\n");
    // Bad REPLICAOF arguments, worded as Redis's.
    assert_eq!(
        cmd(r, &["REPLICAOF", "127.0.0.1", "port"]),
        "-ERR Invalid master port\r\n"
    );
    assert_eq!(
        cmd(r, &["REPLICAOF", "127.0.0.1", "65536"]),
        "-ERR Invalid master port\r\n"
    );
    assert_eq!(
        cmd(r, &["SLAVEOF", "a"]),
        "-ERR wrong number of arguments for 'slaveof' command\r\n"
    );
}

/// A command on a server that wants `AUTH user pass` first.
fn authed(addr: SocketAddr, auth: &[&str], args: &[&str]) -> String {
    let mut c = RawClient::connect(addr).unwrap();
    let mut login = vec!["AUTH"];
    login.extend_from_slice(auth);
    assert_eq!(text(&c.command(&login).unwrap()), "+OK\r\n");
    text(&c.command(args).unwrap())
}

#[test]
fn the_replicaof_directive_with_masteruser_and_masterauth_syncs_at_start() {
    let _serial = serial();
    let Some(redis) = redis_primary(&[
        "--requirepass",
        "secret",
        "--user",
        "repl",
        "on",
        ">pw",
        "~*",
        "&*",
        "+@all",
    ]) else {
        return;
    };
    let p = redis.addr();
    let admin = ["default", "secret"];
    assert_eq!(authed(p, &admin, &["SET", "k", "before"]), "+OK\r\n");
    let start = |user: &str, pass: &str| {
        let mut builder = coordis::Server::builder();
        let config = builder.config_mut();
        config.replica.replicaof = format!("127.0.0.1 {}", p.port());
        config.replica.masteruser = user.into();
        config.replica.masterauth = pass.into();
        builder.start_blocking().unwrap()
    };
    // A wrong password: the link never comes up.
    let refused = start("repl", "wrong");
    // masteruser and masterauth: AUTH user pass.
    let replica = start("repl", "pw");
    let r = replica.addr();
    assert!(cmd(r, &["CONFIG", "GET", "replicaof"]).contains(&format!("127.0.0.1 {}", p.port())));
    wait_for("the link", || {
        info(r, "replication", "master_link_status").as_deref() == Some("up")
    });
    assert_eq!(cmd(r, &["GET", "k"]), "$6\r\nbefore\r\n");
    assert_eq!(authed(p, &admin, &["SET", "k", "after"]), "+OK\r\n");
    wait_for("the stream", || cmd(r, &["GET", "k"]) == "$5\r\nafter\r\n");
    // masterauth alone: the one-argument AUTH (the default user).
    let default_user = start("", "secret");
    wait_for("the second link", || {
        info(default_user.addr(), "replication", "master_link_status").as_deref() == Some("up")
    });
    assert_eq!(cmd(default_user.addr(), &["GET", "k"]), "$5\r\nafter\r\n");
    assert_eq!(
        info(refused.addr(), "replication", "master_link_status").as_deref(),
        Some("down")
    );
    assert_eq!(cmd(refused.addr(), &["GET", "k"]), "$-1\r\n");
    let slaves = authed(p, &admin, &["INFO", "replication"]);
    assert!(slaves.contains("connected_slaves:2"), "{slaves}");
}

/// A scripted primary for one replica: it answers the handshake and
/// `+FULLRESYNC`, then writes each chunk the test sends it and holds the
/// rest of the transfer; the test dropping its sender closes the link.
fn scripted_primary() -> (
    SocketAddr,
    std::sync::mpsc::Sender<Vec<u8>>,
    std::thread::JoinHandle<()>,
) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<Vec<u8>>();
    let thread = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        drop(listener);
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        // Commands arrive as RESP arrays; each gets its reply in order.
        let mut answered = 0;
        loop {
            let n = s.read(&mut buf).unwrap();
            assert!(n > 0, "the replica left during the handshake");
            seen.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&seen).to_uppercase();
            let names: Vec<&str> = text
                .split("\r\n")
                .filter(|w| ["PING", "REPLCONF", "PSYNC"].contains(w))
                .collect();
            for name in &names[answered..] {
                let reply: &[u8] = match *name {
                    "PING" => b"+PONG\r\n",
                    "REPLCONF" => b"+OK\r\n",
                    _ => b"+FULLRESYNC 0123456789abcdef0123456789abcdef01234567 0\r\n",
                };
                s.write_all(reply).unwrap();
            }
            answered = names.len();
            if names.contains(&"PSYNC") {
                break;
            }
        }
        while let Ok(chunk) = rx.recv() {
            s.write_all(&chunk).unwrap();
        }
    });
    (addr, tx, thread)
}

/// A replica's link lines of INFO replication (`role` to
/// `replica_announced`), the primary's port left out, and each seconds
/// count checked to be at most 1 and shown as `<s>` (two servers' clocks
/// tick at different instants).
fn link_lines(replica: SocketAddr) -> Vec<String> {
    let body = cmd(replica, &["INFO", "replication"]);
    body.lines()
        .skip_while(|l| !l.starts_with("role:"))
        .take_while(|l| !l.starts_with("connected_slaves:"))
        .filter(|l| !l.starts_with("master_port:"))
        .map(|l| match l.split_once(':') {
            Some((k, v)) if k.ends_with("_seconds_ago") || k.ends_with("_since_seconds") => {
                let secs: i64 = v.parse().unwrap();
                assert!(secs <= 1, "{l}");
                if secs >= 0 {
                    format!("{k}:<s>")
                } else {
                    l.to_string()
                }
            }
            _ => l.to_string(),
        })
        .collect()
}

/// A full sync held at each step of its transfer, as `replica` shows it:
/// before the RDB's framing line, after `chunk` (the framing line and part
/// of the RDB), and once the primary closed the link.
fn held_sync(replica: SocketAddr, chunk: &[u8], read: &str) -> Vec<Vec<String>> {
    let (primary, tx, thread) = scripted_primary();
    assert_eq!(replicaof(replica, primary), "+OK\r\n");
    wait_for("the transfer to start", || {
        info(replica, "replication", "master_sync_in_progress").as_deref() == Some("1")
    });
    let mut steps = vec![link_lines(replica)];
    tx.send(chunk.to_vec()).unwrap();
    wait_for("the transfer's bytes", || {
        info(replica, "replication", "master_sync_read_bytes").as_deref() == Some(read)
    });
    steps.push(link_lines(replica));
    drop(tx);
    thread.join().unwrap();
    wait_for("the link to drop", || {
        info(replica, "replication", "master_sync_in_progress").as_deref() == Some("0")
    });
    steps.push(link_lines(replica));
    assert_eq!(cmd(replica, &["REPLICAOF", "NO", "ONE"]), "+OK\r\n");
    steps
}

#[test]
fn a_held_full_sync_shows_its_progress_as_a_redis_replica_does() {
    let _serial = serial();
    let Some(redis) = RedisServer::start(&[]).unwrap() else {
        return;
    };
    let replica = coordis();
    let mut sized = b"$1000\r\nREDIS0010".to_vec();
    sized.resize(7 + 300, b'x');
    let mut streamed = b"$EOF:ffffffffffffffffffffffffffffffffffffffff\r\nREDIS0010".to_vec();
    streamed.resize(47 + 300, b'x');
    for (chunk, total, left, perc) in [(&sized, "1000", "700", "30.00"), (&streamed, "0", "-300", "0.00")] {
        let expected = held_sync(redis.addr(), chunk, "300");
        // What redis-server shows: before the framing line the size is -1
        // (its percentage -0.00), then the announced one.
        assert!(
            expected[0].contains(&"master_sync_total_bytes:-1".to_string()),
            "{expected:?}"
        );
        assert!(
            expected[0].contains(&"master_sync_perc:-0.00".to_string()),
            "{expected:?}"
        );
        for line in [
            format!("master_sync_total_bytes:{total}"),
            "master_sync_read_bytes:300".into(),
            format!("master_sync_left_bytes:{left}"),
            format!("master_sync_perc:{perc}"),
        ] {
            assert!(expected[1].contains(&line), "{line} in {expected:?}");
        }
        assert!(!expected[2].iter().any(|l| l.starts_with("master_sync_total")));
        // A primary made a replica had no link to lose.
        assert!(
            expected[2].contains(&"master_link_down_since_seconds:-1".to_string()),
            "{expected:?}"
        );
        assert_eq!(held_sync(replica.addr(), chunk, "300"), expected);
    }
}

#[test]
fn a_lost_link_shows_since_when_as_a_redis_replica_does() {
    let _serial = serial();
    let (Some(primary), Some(redis)) = (redis_primary(&[]), RedisServer::start(&[]).unwrap()) else {
        return;
    };
    let replica = coordis();
    let p = primary.addr();
    cmd(p, &["SET", "k", "v"]);
    for r in [redis.addr(), replica.addr()] {
        assert_eq!(replicaof(r, p), "+OK\r\n");
        wait_caught_up(r, p);
    }
    assert!(!link_lines(replica.addr())
        .iter()
        .any(|l| l.starts_with("master_link_down")));
    drop(primary);
    for r in [redis.addr(), replica.addr()] {
        wait_for("the link to drop", || {
            info(r, "replication", "master_link_status").as_deref() == Some("down")
        });
    }
    let expected = link_lines(redis.addr());
    assert!(
        expected.contains(&"master_link_down_since_seconds:<s>".to_string()),
        "{expected:?}"
    );
    assert_eq!(link_lines(replica.addr()), expected);
}

/// The fields of `CLIENT LIST TYPE master`'s line (none: no line).
fn master_client(replica: SocketAddr) -> Vec<(String, String)> {
    let list = cmd(replica, &["CLIENT", "LIST", "TYPE", "master"]);
    let body = list.split("\r\n").nth(1).unwrap_or_default();
    body.split_whitespace()
        .filter_map(|f| f.split_once('=').map(|(k, v)| (k.to_string(), v.to_string())))
        .collect()
}

fn get<'a>(fields: &'a [(String, String)], key: &str) -> &'a str {
    fields.iter().find(|(k, _)| k == key).map_or("", |(_, v)| v.as_str())
}

/// The primary's link on a replica is a client, as Redis lists its master:
/// CLIENT LIST (all, TYPE master, ID) shows it with flag `M`, the
/// primary's address, the last command it ran and `user=(superuser)`;
/// INFO counts it; CLIENT KILL TYPE master (or its ID, never USER) closes
/// the link, which continues partially under the same id. A coordis
/// replica and a redis-server replica of the same redis-server primary,
/// compared field by field where the values are deterministic.
#[test]
fn the_primarys_link_is_listed_as_a_redis_replica_lists_its_master() {
    let _serial = serial();
    let Some(redis) = redis_primary(&[]) else {
        return;
    };
    let p = redis.addr();
    let port = p.port().to_string();
    let reference = RedisServer::start(&["--replicaof", "127.0.0.1", &port])
        .unwrap()
        .expect("redis-server ran for the primary");
    let ours = coordis();
    assert_eq!(replicaof(ours.addr(), p), "+OK\r\n");
    let replicas = [reference.addr(), ours.addr()];
    for &r in &replicas {
        wait_caught_up(r, p);
    }
    // The stream's last command, in database 3 (the link's client selected it).
    let mut c = RawClient::connect(p).unwrap();
    for args in [&["SET", "k", "v"][..], &["SELECT", "3"], &["LPUSH", "q", "x"]] {
        c.command(args).unwrap();
    }
    for &r in &replicas {
        wait_caught_up(r, p);
    }
    let lines: Vec<Vec<(String, String)>> = replicas.iter().map(|&r| master_client(r)).collect();
    for (fields, r) in lines.iter().zip(replicas) {
        assert_eq!(get(fields, "addr"), p.to_string(), "{r}: {fields:?}");
        // Its local end is the address the primary sees the replica at.
        let seen = cmd(p, &["CLIENT", "LIST", "TYPE", "replica"]);
        assert!(
            seen.contains(&format!("addr={} ", get(fields, "laddr"))),
            "{r}: {fields:?} not in {seen}"
        );
        // INFO counts it beside the connection asking.
        wait_for("the primary's client and the asking one counted", || {
            info(r, "clients", "connected_clients").as_deref() == Some("2")
        });
        // Listed in the whole list and by its id.
        let id = get(fields, "id");
        assert!(cmd(r, &["CLIENT", "LIST"]).contains(&format!("id={id} addr={p} ")));
        assert!(cmd(r, &["CLIENT", "LIST", "ID", id]).contains(&format!("id={id} addr={p} ")));
    }
    for key in [
        "name", "flags", "db", "sub", "psub", "ssub", "multi", "events", "cmd", "user", "redir", "resp",
    ] {
        assert_eq!(
            get(&lines[1], key),
            get(&lines[0], key),
            "{key}: coordis {:?}, redis {:?}",
            lines[1],
            lines[0]
        );
    }
    assert_eq!(get(&lines[1], "flags"), "M");
    assert_eq!(get(&lines[1], "cmd"), "lpush");
    assert_eq!(get(&lines[1], "db"), "3");

    // Killed: not by USER (it runs as none), by TYPE master; the link
    // comes back by a partial resync, the client under the same id.
    let partial_before = info_num(p, "stats", "sync_partial_ok");
    for (&r, fields) in replicas.iter().zip(&lines) {
        assert_eq!(cmd(r, &["CLIENT", "KILL", "USER", "default"]), ":0\r\n", "{r}");
        assert_eq!(cmd(r, &["CLIENT", "KILL", "TYPE", "master"]), ":1\r\n", "{r}");
        wait_for("the link to come back", || {
            get(&master_client(r), "laddr") != get(fields, "laddr") && !master_client(r).is_empty()
        });
        assert_eq!(get(&master_client(r), "id"), get(fields, "id"), "{r}");
        wait_caught_up(r, p);
    }
    assert_eq!(info_num(p, "stats", "sync_partial_ok"), partial_before + 2);
    // By id too.
    let id = get(&lines[1], "id").to_string();
    assert_eq!(cmd(ours.addr(), &["CLIENT", "KILL", "ID", &id]), ":1\r\n");
    wait_for("the link to come back", || !master_client(ours.addr()).is_empty());
    // Once the replica is a primary, no such client.
    assert_eq!(cmd(ours.addr(), &["REPLICAOF", "NO", "ONE"]), "+OK\r\n");
    assert!(master_client(ours.addr()).is_empty());
    // (The connection that asked last may still be closing.)
    wait_for("only the asking connection counted", || {
        info(ours.addr(), "clients", "connected_clients").as_deref() == Some("1")
    });
}

/// `replica-announce-ip` and `replica-announce-port` reach the primary in
/// the handshake (`REPLCONF ip-address`, `listening-port`), as from a
/// Redis replica: a Redis primary, and a coordis one, list the replica
/// with the announced address (they were accepted and ignored).
#[test]
fn the_announced_address_reaches_the_primary_as_from_a_redis_replica() {
    let _one = serial();
    let announced = |primary: SocketAddr| {
        let replica = coordis();
        let r = replica.addr();
        assert_eq!(cmd(r, &["CONFIG", "SET", "replica-announce-ip", "10.9.8.7"]), "+OK\r\n");
        assert_eq!(cmd(r, &["CONFIG", "SET", "replica-announce-port", "4321"]), "+OK\r\n");
        assert_eq!(replicaof(r, primary), "+OK\r\n");
        wait_caught_up(r, primary);
        let body = cmd(primary, &["INFO", "replication"]);
        let line = body
            .lines()
            .find(|l| l.starts_with("slave0:"))
            .unwrap_or_default()
            .to_string();
        line.split(',').take(2).collect::<Vec<_>>().join(",")
    };
    let primary = coordis();
    assert_eq!(announced(primary.addr()), "slave0:ip=10.9.8.7,port=4321");
    if let Some(redis) = redis_primary(&[]) {
        assert_eq!(announced(redis.addr()), "slave0:ip=10.9.8.7,port=4321");
    }
}

/// `bind-source-addr`: a replica's link leaves from that address, so the
/// primary lists the replica there (INFO replication, CLIENT LIST), as
/// from a Redis replica with the same setting; an address this machine
/// lacks is best effort, the link made without it, as Redis makes it (it
/// was accepted and ignored).
#[test]
fn bind_source_addr_is_where_the_link_leaves_from_as_in_redis() {
    let _one = serial();
    // What `primary` shows of its one replica: INFO's ip, CLIENT LIST's host.
    let seen_by = |primary: SocketAddr, replica: SocketAddr| {
        // Protected mode lets in 127.0.0.1 only, as Redis's.
        assert_eq!(
            cmd(
                primary,
                &["CONFIG", "SET", "protected-mode", "no", "repl-diskless-sync-delay", "0"]
            ),
            "+OK\r\n"
        );
        assert_eq!(replicaof(replica, primary), "+OK\r\n");
        wait_caught_up(replica, primary);
        let body = cmd(primary, &["INFO", "replication"]);
        let ip = body
            .lines()
            .find_map(|l| l.strip_prefix("slave0:ip="))
            .and_then(|rest| rest.split(',').next())
            .unwrap_or_default()
            .to_string();
        let list = cmd(primary, &["CLIENT", "LIST", "TYPE", "replica"]);
        let host = list
            .split(' ')
            .find_map(|f| f.strip_prefix("addr="))
            .and_then(|a| a.rsplit_once(':'))
            .map(|(host, _)| host.to_string())
            .unwrap_or_default();
        assert_eq!(cmd(replica, &["REPLICAOF", "NO", "ONE"]), "+OK\r\n");
        format!("{ip} {host}")
    };
    let from = |source: &str| {
        let replica = coordis();
        assert_eq!(
            cmd(replica.addr(), &["CONFIG", "SET", "bind-source-addr", source]),
            "+OK\r\n"
        );
        replica
    };
    let primary = coordis();
    assert_eq!(seen_by(primary.addr(), from("127.0.0.2").addr()), "127.0.0.2 127.0.0.2");
    // Not an address of this machine: the link leaves from the usual one.
    assert_eq!(seen_by(primary.addr(), from("192.0.2.1").addr()), "127.0.0.1 127.0.0.1");
    if let Some(redis) = redis_primary(&[]) {
        assert_eq!(seen_by(redis.addr(), from("127.0.0.2").addr()), "127.0.0.2 127.0.0.2");
    }
    for (source, expected) in [
        ("127.0.0.3", "127.0.0.3 127.0.0.3"),
        ("192.0.2.1", "127.0.0.1 127.0.0.1"),
    ] {
        if let Some(redis_replica) = redis_primary(&["--bind-source-addr", source]) {
            assert_eq!(
                seen_by(primary.addr(), redis_replica.addr()),
                expected,
                "a Redis replica"
            );
        }
    }
}

/// What a full resync does to a replica's own dataset and files, the
/// replica (at `r`, persisting nothing) holding 500 keys of its own with
/// `replica-lazy-flush` and `rdb-del-sync-files` as `lazy` and `delete`:
/// the keys freed lazily (`lazyfreed_objects`), and whether the RDB file
/// the transfer wrote to disk is still there.
fn after_full_sync(r: SocketAddr, primary: SocketAddr, lazy: &str, delete: &str) -> String {
    for (name, value) in [
        ("replica-lazy-flush", lazy),
        ("rdb-del-sync-files", delete),
        ("repl-diskless-load", "disabled"),
        ("save", ""),
    ] {
        assert_eq!(cmd(r, &["CONFIG", "SET", name, value]), "+OK\r\n", "{name}");
    }
    assert_eq!(cmd(r, &["DEBUG", "POPULATE", "500", "own"]), "+OK\r\n");
    let dir = cmd(r, &["CONFIG", "GET", "dir"]);
    let dir = dir.split("\r\n").nth(4).unwrap().to_string();
    let dump = std::path::Path::new(&dir).join("dump.rdb");
    let _ = std::fs::remove_file(&dump);
    let freed_before = info_num(r, "memory", "lazyfreed_objects");
    assert_eq!(replicaof(r, primary), "+OK\r\n");
    wait_caught_up(r, primary);
    assert_eq!(cmd(r, &["DBSIZE"]), ":3\r\n");
    // The lazy-free thread may still be at it.
    let deadline = Instant::now() + PATIENCE;
    while info_num(r, "memory", "lazyfree_pending_objects") != 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let freed = info_num(r, "memory", "lazyfreed_objects") - freed_before;
    assert_eq!(cmd(r, &["REPLICAOF", "NO", "ONE"]), "+OK\r\n");
    format!("freed lazily {freed}, file kept {}", dump.exists())
}

/// `replica-lazy-flush` frees the dataset a full resync replaces on the
/// lazy-free thread, and `rdb-del-sync-files` removes the RDB file the
/// transfer wrote when the replica persists nothing, as on a Redis replica
/// (both were accepted and ignored).
#[test]
fn a_full_resync_follows_replica_lazy_flush_and_rdb_del_sync_files_as_in_redis() {
    let _one = serial();
    let primary = coordis();
    let p = primary.addr();
    assert_eq!(cmd(p, &["CONFIG", "SET", "repl-diskless-sync-delay", "0"]), "+OK\r\n");
    assert_eq!(cmd(p, &["DEBUG", "POPULATE", "3", "theirs"]), "+OK\r\n");
    let cases = [("no", "no"), ("yes", "yes")];
    let expected = ["freed lazily 0, file kept true", "freed lazily 500, file kept false"];
    for ((lazy, delete), expected) in cases.iter().zip(expected) {
        let replica = coordis();
        assert_eq!(after_full_sync(replica.addr(), p, lazy, delete), expected, "coordis");
        if let Some(redis) = redis_primary(&[]) {
            assert_eq!(after_full_sync(redis.addr(), p, lazy, delete), expected, "redis-server");
        }
    }
}

/// What a replica (at `r`) does with a command of its primary's stream
/// that fails on its own data: counted and logged with
/// `replica-read-only no`; with `replica-read-only yes` and
/// `propagation-error-behavior panic-on-replicas`, whether the replica
/// stopped.
fn on_a_failing_stream(r: SocketAddr, primary: SocketAddr) -> (String, bool) {
    assert_eq!(cmd(r, &["CONFIG", "SET", "replica-read-only", "no"]), "+OK\r\n");
    assert_eq!(replicaof(r, primary), "+OK\r\n");
    wait_caught_up(r, primary);
    // The replica's own writes make the primary's INCRs fail here.
    assert_eq!(cmd(r, &["LPUSH", "counted", "a"]), ":1\r\n");
    assert_eq!(cmd(r, &["LPUSH", "fatal", "a"]), ":1\r\n");
    assert_eq!(cmd(primary, &["INCR", "counted"]), ":1\r\n");
    wait_caught_up(r, primary);
    let counted = info(r, "stats", "unexpected_error_replies").unwrap_or_default();
    for (name, value) in [
        ("replica-read-only", "yes"),
        ("propagation-error-behavior", "panic-on-replicas"),
    ] {
        assert_eq!(cmd(r, &["CONFIG", "SET", name, value]), "+OK\r\n");
    }
    assert_eq!(cmd(primary, &["INCR", "fatal"]), ":1\r\n");
    let deadline = Instant::now() + PATIENCE;
    let stopped = loop {
        if RawClient::connect(r).and_then(|mut c| c.command(&["PING"])).is_err() {
            break true;
        }
        if Instant::now() > deadline {
            break false;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    (counted, stopped)
}

/// A command of the primary's stream that fails on the replica is counted
/// (`unexpected_error_replies`) and logged; on a read-only replica under
/// `propagation-error-behavior panic-on-replicas` it stops the replica, as
/// Redis's panics (it was accepted and ignored, the error unseen).
#[test]
fn a_failing_command_of_the_stream_is_counted_or_stops_the_replica_as_in_redis() {
    let _one = serial();
    // A fresh primary for each replica.
    let primary = || {
        let primary = coordis();
        let p = primary.addr();
        assert_eq!(cmd(p, &["CONFIG", "SET", "repl-diskless-sync-delay", "0"]), "+OK\r\n");
        primary
    };
    let (ours, replica) = (primary(), coordis());
    assert_eq!(
        on_a_failing_stream(replica.addr(), ours.addr()),
        ("1".to_string(), true)
    );
    if let Some(redis) = redis_primary(&[]) {
        let ours = primary();
        assert_eq!(
            on_a_failing_stream(redis.addr(), ours.addr()),
            ("1".to_string(), true),
            "redis-server"
        );
    }
}
