//! Chained replicas (A primary, B its replica, C a replica of B) as Redis
//! 7.0.15 runs them: B passes A's stream on verbatim, so C shares A's
//! replication ID and offsets; B's INFO lists C, C's names B; B promoted
//! (REPLICAOF NO ONE) keeps C, which continues partially under B's new
//! ID. The same scenario runs on redis-servers only (the reference), on
//! coordis only, and with each kind in the middle and at the end; B's
//! link cut continues partially without C noticing. Every
//! test with a redis-server in it skips loudly without one.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use coordis::testing::{compare_digests, RawClient, RedisServer};
use coordis::BlockingServer;

/// The tests run one at a time: two servers started at once can be given
/// the same free port (`free_port` releases it before the server binds).
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// How long a test waits for a server to reach a state.
const PATIENCE: Duration = Duration::from_secs(20);

/// Which server a node of the chain is.
#[derive(Clone, Copy, Debug)]
enum Kind {
    Coordis,
    Redis,
}

/// A running node; dropping it stops the server.
enum Node {
    Coordis(BlockingServer),
    Redis(RedisServer),
}

impl Node {
    /// A node that syncs at once (no diskless delay), with DEBUG; `None`
    /// when redis-server is not installed.
    fn start(kind: Kind) -> Option<Node> {
        match kind {
            Kind::Coordis => {
                let mut builder = coordis::Server::builder();
                let config = builder.config_mut();
                config.enable_debug_command = "yes".into();
                config.repl.diskless_sync_delay = 0;
                Some(Node::Coordis(builder.start_blocking().unwrap()))
            }
            Kind::Redis => RedisServer::start(&["--repl-diskless-sync-delay", "0", "--enable-debug-command", "yes"])
                .unwrap()
                .map(Node::Redis),
        }
    }

    fn addr(&self) -> SocketAddr {
        match self {
            Node::Coordis(s) => s.addr(),
            Node::Redis(r) => r.addr(),
        }
    }
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
        .unwrap_or_else(|| panic!("INFO {section} of {addr} has no number {field}"))
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

/// Waits until `replica`'s link is up, `primary` streams to it and it has
/// applied everything `primary` has (a primary that is itself a replica
/// counts what it passed on).
fn wait_caught_up(replica: SocketAddr, primary: SocketAddr) {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let body = cmd(primary, &["INFO", "replication"]);
        let online = body
            .lines()
            .filter(|l| l.starts_with("slave") && l.contains("state="))
            .all(|l| l.contains("state=online"));
        if info(replica, "replication", "master_link_status").as_deref() == Some("up")
            && online
            && info_num(replica, "replication", "slave_repl_offset")
                == info_num(primary, "replication", "master_repl_offset")
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {replica} to catch up with {primary}: replica {}\nprimary {body}",
            cmd(replica, &["INFO", "replication"]),
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

/// The chain scenario on nodes of the given kinds (see the module docs).
fn chain(kinds: [Kind; 3]) {
    let _serial = serial();
    let mut nodes = Vec::new();
    for kind in kinds {
        let Some(node) = Node::start(kind) else {
            return;
        };
        nodes.push(node);
    }
    let (a, b, c) = (nodes[0].addr(), nodes[1].addr(), nodes[2].addr());
    run_workload(a, &workload(1, 300));
    assert_eq!(replicaof(b, a), "+OK\r\n");
    wait_caught_up(b, a);
    // C joins while A's stream has a database other than 0 selected: B's
    // image names it (repl-stream-db), as the stream B passes on after it
    // selects nothing.
    run_workload(a, &workload(2, 300));
    run_workload(
        a,
        &[
            vec!["SELECT".into(), "2".into()],
            vec!["SET".into(), "in2".into(), "x".into()],
        ],
    );
    assert_eq!(replicaof(c, b), "+OK\r\n");
    wait_caught_up(c, b);
    run_workload(
        a,
        &[
            vec!["SELECT".into(), "2".into()],
            vec!["SET".into(), "in2".into(), "y".into()],
        ],
    );
    run_workload(a, &workload(3, 1000));
    wait_caught_up(b, a);
    wait_caught_up(c, b);
    assert_same_digest(a, c);
    let mut in2 = RawClient::connect(c).unwrap();
    in2.command(&["SELECT", "2"]).unwrap();
    assert_eq!(text(&in2.command(&["GET", "in2"]).unwrap()), "$1\r\ny\r\n");

    // B lists C; C names B; C has A's history, byte for byte.
    assert_eq!(info_num(b, "replication", "connected_slaves"), 1);
    let slave0 = info(b, "replication", "slave0").unwrap();
    assert!(
        slave0.starts_with(&format!("ip=127.0.0.1,port={},state=online,", c.port())),
        "{slave0}"
    );
    assert_eq!(info(c, "replication", "master_host").as_deref(), Some("127.0.0.1"));
    assert_eq!(info_num(c, "replication", "master_port"), i64::from(b.port()));
    let a_id = info(a, "replication", "master_replid").unwrap();
    for n in [b, c] {
        assert_eq!(info(n, "replication", "master_replid"), Some(a_id.clone()));
        assert_eq!(
            info_num(n, "replication", "master_repl_offset"),
            info_num(a, "replication", "master_repl_offset")
        );
    }
    assert_eq!(info_num(b, "stats", "sync_full"), 1, "C's one full sync");

    // B's link to A cut: B continues partially, and C, still attached,
    // gets what A wrote meanwhile without a resync of its own.
    let a_partial = info_num(a, "stats", "sync_partial_ok");
    assert_eq!(cmd(a, &["CLIENT", "KILL", "TYPE", "replica"]), ":1\r\n");
    run_workload(a, &workload(5, 300));
    wait_for("B's partial resync with A", || {
        info_num(a, "stats", "sync_partial_ok") > a_partial
    });
    wait_caught_up(b, a);
    wait_caught_up(c, b);
    assert_same_digest(a, c);
    assert_eq!(info_num(a, "stats", "sync_full"), 1, "no full sync for B");
    assert_eq!(info_num(b, "stats", "sync_full"), 1, "no full sync for C");
    assert_eq!(info_num(b, "stats", "sync_partial_ok"), 0, "C never left");

    // B promoted: C continues partially under B's new ID.
    let partial_before = info_num(b, "stats", "sync_partial_ok");
    assert_eq!(cmd(b, &["REPLICAOF", "NO", "ONE"]), "+OK\r\n");
    let b_id = info(b, "replication", "master_replid").unwrap();
    assert_ne!(b_id, a_id);
    assert_eq!(info(b, "replication", "master_replid2"), Some(a_id.clone()));
    wait_for("C's partial resync with B", || {
        info_num(b, "stats", "sync_partial_ok") > partial_before
    });
    run_workload(b, &workload(4, 300));
    wait_caught_up(c, b);
    assert_same_digest(b, c);
    assert_eq!(info_num(b, "stats", "sync_full"), 1, "no full sync for C");
    assert_eq!(info(c, "replication", "master_replid"), Some(b_id));
    assert_eq!(info(c, "replication", "master_replid2"), Some(a_id));
    assert_eq!(info_num(b, "replication", "connected_slaves"), 1);
}

#[test]
fn a_chain_of_redis_servers_is_the_reference() {
    chain([Kind::Redis, Kind::Redis, Kind::Redis]);
}

#[test]
fn a_chain_of_coordis_servers() {
    chain([Kind::Coordis, Kind::Coordis, Kind::Coordis]);
}

#[test]
fn coordis_replicates_from_a_redis_replica() {
    chain([Kind::Coordis, Kind::Redis, Kind::Coordis]);
}

#[test]
fn redis_replicates_from_a_coordis_replica() {
    chain([Kind::Coordis, Kind::Coordis, Kind::Redis]);
}

#[test]
fn a_coordis_chain_under_a_redis_primary() {
    chain([Kind::Redis, Kind::Coordis, Kind::Coordis]);
}
