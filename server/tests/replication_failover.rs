//! FAILOVER [TO host port [FORCE]] [ABORT] [TIMEOUT ms], against real Redis
//! 7.0.15:
//!
//! - every refusal is worded as redis-server words it, with and without a
//!   replica (the same commands sent to both, replies compared byte for byte);
//! - a coordis primary hands over to a redis-server replica, and a
//!   redis-server primary to a coordis replica: the new primary continues
//!   the old one's history with a partial resync (PSYNC2, `sync_partial_ok`),
//!   the old primary follows it, writes flow the other way;
//! - a coordis primary hands over to a coordis replica;
//! - the wait (`waiting-for-sync`) holds writes; its timeout, on the test
//!   clock, aborts it (the held write then runs), and with FORCE hands over
//!   to a replica that is behind (the held write is then refused as a
//!   replica's); FAILOVER ABORT ends the wait.
//!
//! Skipped loudly without redis-server (a failure with `COORDIS_REQUIRE_REDIS=1`).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use coordis::testing::{RawClient, RedisServer};
use coordis::BlockingServer;

/// The tests run one at a time: two servers started at once can be given
/// the same free port (`free_port` releases it before the server binds).
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// How long a test waits for a link or a hand-over.
const PATIENCE: Duration = Duration::from_secs(20);

/// A coordis server whose full syncs start at once.
fn coordis() -> BlockingServer {
    let mut builder = coordis::Server::builder();
    builder.config_mut().repl.diskless_sync_delay = 0;
    builder.start_blocking().unwrap()
}

/// A redis-server whose full syncs start at once; `None` without Redis.
fn redis(extra: &[&str]) -> Option<RedisServer> {
    let mut args = vec!["--repl-diskless-sync-delay", "0"];
    args.extend_from_slice(extra);
    RedisServer::start(&args).unwrap()
}

fn cmd(addr: SocketAddr, args: &[&str]) -> String {
    String::from_utf8_lossy(&RawClient::connect(addr).unwrap().command(args).unwrap()).into_owned()
}

fn info(addr: SocketAddr, field: &str) -> String {
    let body = cmd(addr, &["INFO", "replication"]);
    body.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")).map(|v| v.trim().to_string()))
        .unwrap_or_default()
}

fn stat(addr: SocketAddr, field: &str) -> String {
    let body = cmd(addr, &["INFO", "stats"]);
    body.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")).map(|v| v.trim().to_string()))
        .unwrap_or_default()
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn replicaof(replica: SocketAddr, primary: SocketAddr) {
    assert_eq!(cmd(replica, &["REPLICAOF", "127.0.0.1", &primary.port().to_string()]), "+OK\r\n");
}

/// Waits until `replica` streams from `primary` and has acknowledged all of it.
fn wait_caught_up(replica: SocketAddr, primary: SocketAddr) {
    wait_for("the replica to catch up", || {
        let p = cmd(primary, &["INFO", "replication"]);
        info(replica, "master_link_status") == "up"
            && p.contains("state=online")
            && p.contains(&format!("offset={},", info(primary, "master_repl_offset")))
    });
}

/// Waits until the FAILOVER from `old` to `new` is over: `new` is a
/// primary, `old` streams from it.
fn wait_handed_over(old: SocketAddr, new: SocketAddr) {
    wait_for("the hand-over", || {
        info(new, "role") == "master"
            && info(old, "role") == "slave"
            && info(old, "master_port") == new.port().to_string()
            && info(old, "master_link_status") == "up"
            && info(old, "master_failover_state") == "no-failover"
    });
}

/// The refusals a server without replicas gives.
const WITHOUT_REPLICAS: &[&[&str]] = &[
    &["FAILOVER"],
    &["FAILOVER", "ABORT"],
    &["FAILOVER", "abort", "x"],
    &["FAILOVER", "TIMEOUT", "0"],
    &["FAILOVER", "TIMEOUT", "-5"],
    &["FAILOVER", "TIMEOUT", "x"],
    &["FAILOVER", "TIMEOUT", "10", "TIMEOUT", "10"],
    &["FAILOVER", "TIMEOUT"],
    &["FAILOVER", "TO", "h"],
    &["FAILOVER", "TO", "h", "x"],
    &["FAILOVER", "TO", "h", "1", "TO", "h", "2"],
    &["FAILOVER", "FORCE"],
    &["FAILOVER", "FORCE", "FORCE"],
    &["FAILOVER", "BOGUS"],
    &["PSYNC", "0123456789012345678901234567890123456789", "1", "FAILOVER"],
];

/// The refusals of a primary with one replica at 127.0.0.1 `port`.
fn with_a_replica(port: u16) -> Vec<Vec<String>> {
    let port = port.to_string();
    let other = (port.parse::<u32>().unwrap() + 1).to_string();
    let lines: Vec<Vec<&str>> = vec![
        vec!["FAILOVER", "FORCE"],
        vec!["FAILOVER", "FORCE", "TIMEOUT", "100"],
        vec!["FAILOVER", "TO", "127.0.0.1", &port, "FORCE"],
        vec!["FAILOVER", "TO", "127.0.0.1", &other],
        vec!["FAILOVER", "TO", "10.1.2.3", &port],
        vec!["FAILOVER", "ABORT"],
    ];
    lines.into_iter().map(|l| l.into_iter().map(str::to_string).collect()).collect()
}

fn replies(addr: SocketAddr, lines: &[Vec<String>]) -> Vec<String> {
    lines
        .iter()
        .map(|l| cmd(addr, &l.iter().map(String::as_str).collect::<Vec<_>>()))
        .collect()
}

#[test]
fn the_refusals_are_worded_as_redis_words_them() {
    let _serial = serial();
    let Some(real) = redis(&[]) else {
        return;
    };
    let ours = coordis();
    let lines: Vec<Vec<String>> = WITHOUT_REPLICAS
        .iter()
        .map(|l| l.iter().map(|w| w.to_string()).collect())
        .collect();
    assert_eq!(replies(ours.addr(), &lines), replies(real.addr(), &lines));
    assert_eq!(cmd(ours.addr(), &["FAILOVER"]), "-ERR FAILOVER requires connected replicas.\r\n");

    // Each primary with a replica of the other kind.
    let Some(real_replica) = redis(&[]) else {
        return;
    };
    let our_replica = coordis();
    replicaof(real_replica.addr(), ours.addr());
    replicaof(our_replica.addr(), real.addr());
    wait_caught_up(real_replica.addr(), ours.addr());
    wait_caught_up(our_replica.addr(), real.addr());
    let ours_say = replies(ours.addr(), &with_a_replica(real_replica.addr().port()));
    let redis_says = replies(real.addr(), &with_a_replica(our_replica.addr().port()));
    assert_eq!(ours_say, redis_says);
    assert!(ours_say[3].contains("is not a replica"), "{ours_say:?}");
    // A replica refuses FAILOVER, and a PSYNC FAILOVER of another history.
    let on_replica: Vec<Vec<String>> = vec![
        vec!["FAILOVER".into()],
        vec!["PSYNC".into(), "0123456789012345678901234567890123456789".into(), "1".into(), "FAILOVER".into()],
    ];
    assert_eq!(replies(our_replica.addr(), &on_replica), replies(real_replica.addr(), &on_replica));
}

/// After a hand-over from `old` to `new`: writes go to `new` and reach `old`.
fn assert_writes_flow(old: SocketAddr, new: SocketAddr) {
    assert_eq!(cmd(new, &["SET", "after", "1"]), "+OK\r\n");
    wait_for("the write to reach the old primary", || cmd(old, &["GET", "after"]) == "$1\r\n1\r\n");
    assert!(cmd(old, &["SET", "x", "1"]).starts_with("-READONLY"));
}

#[test]
fn a_coordis_primary_hands_over_to_a_redis_replica() {
    let _serial = serial();
    let primary = coordis();
    let Some(replica) = redis(&[]) else {
        return;
    };
    let (p, r) = (primary.addr(), replica.addr());
    assert_eq!(cmd(p, &["SET", "lock", "owner-1"]), "+OK\r\n");
    replicaof(r, p);
    assert_eq!(cmd(p, &["INCR", "fence"]), ":1\r\n");
    wait_caught_up(r, p);
    let replid = info(p, "master_replid");
    assert_eq!(cmd(p, &["FAILOVER"]), "+OK\r\n");
    wait_handed_over(p, r);
    assert_eq!(cmd(r, &["GET", "lock"]), "$7\r\nowner-1\r\n");
    assert_eq!(cmd(r, &["GET", "fence"]), "$1\r\n1\r\n");
    // The new primary continued our history and let us continue partially.
    assert_eq!(info(r, "master_replid2"), replid);
    assert_eq!(stat(r, "sync_partial_ok"), "1");
    assert_eq!(stat(r, "sync_full"), "0");
    assert_writes_flow(p, r);
}

#[test]
fn a_redis_primary_hands_over_to_a_coordis_replica() {
    let _serial = serial();
    let Some(primary) = redis(&[]) else {
        return;
    };
    let replica = coordis();
    let (p, r) = (primary.addr(), replica.addr());
    assert_eq!(cmd(p, &["SET", "lock", "owner-1"]), "+OK\r\n");
    replicaof(r, p);
    assert_eq!(cmd(p, &["INCR", "fence"]), ":1\r\n");
    wait_caught_up(r, p);
    let replid = info(p, "master_replid");
    assert_eq!(cmd(p, &["FAILOVER", "TO", "127.0.0.1", &r.port().to_string()]), "+OK\r\n");
    wait_handed_over(p, r);
    assert_eq!(cmd(r, &["GET", "lock"]), "$7\r\nowner-1\r\n");
    assert_eq!(info(r, "master_replid2"), replid);
    // Redis asked us to continue its history: it did, without a full sync.
    assert_eq!(stat(r, "sync_partial_ok"), "1");
    assert_eq!(stat(r, "sync_full"), "0");
    assert_writes_flow(p, r);
}

#[test]
fn a_coordis_primary_hands_over_to_a_coordis_replica() {
    let _serial = serial();
    let (primary, replica) = (coordis(), coordis());
    let (p, r) = (primary.addr(), replica.addr());
    replicaof(r, p);
    assert_eq!(cmd(p, &["SET", "lock", "owner-1"]), "+OK\r\n");
    wait_caught_up(r, p);
    assert_eq!(
        cmd(p, &["FAILOVER", "TO", "127.0.0.1", &r.port().to_string(), "TIMEOUT", "10000"]),
        "+OK\r\n"
    );
    wait_handed_over(p, r);
    assert_eq!(cmd(r, &["GET", "lock"]), "$7\r\nowner-1\r\n");
    assert_eq!(stat(r, "sync_partial_ok"), "1");
    assert_writes_flow(p, r);
}
