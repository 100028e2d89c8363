//! The failover recipes (issue 27, §6), on embedded coordis with its
//! replication test controls and on real redis-server processes:
//!
//! - the lost lock: a lock taken on the primary that dies before its replica
//!   has it is gone after the promotion, and a second client takes it; the
//!   fencing token (from the resource's own store) refuses the first
//!   holder's late write, while a token counter kept beside the lock is lost
//!   with it and hands the second holder the same token;
//! - WAIT as the mitigation and its limit: acknowledged, the lock survives
//!   the failover; with the replica's link held, WAIT answers 0 and the
//!   recipe treats the lock as not held;
//! - heartbeat leader election across a Sentinel failover (coordis Sentinel
//!   on a test clock, coordis primary and replica): the leader key is kept
//!   or lost as replication left it, and a leader acts only after its token
//!   check, so two leaders never act at once.
//!
//! On redis-server, a replica's link is held by stopping the replica
//! process (SIGSTOP) and, for the lost lock, closing its link on the primary
//! (`CLIENT KILL TYPE replica`) while it is stopped, so it cannot reconnect
//! before the primary is killed. Everything a test starts is stopped on
//! drop, failure or not; without redis-server the Redis legs skip loudly.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use coordis::testing::{RawClient, RedisServer, TempDir};
use coordis_client_tests::failover::{self, SentinelPrimary};
use coordis_client_tests::fencing;
use coordis_client_tests::leader::{Elector, Role};
use coordis_client_tests::lock::Lock;
use redis::aio::MultiplexedConnection;

/// How long a test waits for a link, a resync or a Sentinel failover.
const PATIENCE: Duration = Duration::from_secs(30);

/// The lease every lock here is taken for (it never runs out in a test).
const TTL: Duration = Duration::from_secs(30);

/// The tests start several servers each; two started at once could be
/// handed the same free port, so they run one at a time.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn connect(url: &str) -> MultiplexedConnection {
    redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .expect("connect")
}

fn cmd(addr: SocketAddr, args: &[&str]) -> String {
    match RawClient::connect(addr).and_then(|mut c| c.command(args)) {
        Ok(reply) => String::from_utf8_lossy(&reply).into_owned(),
        Err(e) => format!("<{e}>"),
    }
}

fn info(addr: SocketAddr, field: &str) -> String {
    cmd(addr, &["INFO", "replication"])
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")).map(|v| v.trim().to_string()))
        .unwrap_or_default()
}

async fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until `replica` streams from `primary` and has acknowledged all of it.
async fn wait_caught_up(replica: SocketAddr, primary: SocketAddr) {
    wait_for("the replica to catch up", || {
        let p = cmd(primary, &["INFO", "replication"]);
        info(replica, "master_link_status") == "up"
            && p.contains("state=online")
            && p.contains(&format!("offset={},", info(primary, "master_repl_offset")))
    })
    .await;
}

fn replicaof(replica: SocketAddr, primary: SocketAddr) {
    let port = primary.port().to_string();
    assert_eq!(cmd(replica, &["REPLICAOF", "127.0.0.1", &port]), "+OK\r\n");
}

/// A coordis server whose full syncs start at once.
async fn coordis() -> coordis::Server {
    let mut builder = coordis::Server::builder();
    builder.config_mut().repl.diskless_sync_delay = 0;
    builder.start().await.expect("start coordis")
}

/// A coordis primary and a coordis replica caught up on it.
async fn coordis_pair() -> (coordis::Server, coordis::Server) {
    let (primary, replica) = (coordis().await, coordis().await);
    replicaof(replica.addr(), primary.addr());
    wait_caught_up(replica.addr(), primary.addr()).await;
    (primary, replica)
}

/// "The primary dies now" without the writes its links had not sent, then
/// "promote replica 0": the control plane's calls block, so they run off
/// the runtime.
async fn die_and_promote(control: coordis::ServerControl, replica: SocketAddr) {
    let promoted = tokio::task::spawn_blocking(move || {
        control.primary_dies(false);
        control.promote_replica(0)
    })
    .await
    .unwrap();
    assert_eq!(promoted, Ok(replica));
    assert_eq!(info(replica, "role"), "master");
}

/// A redis-server primary and a redis-server replica caught up on it;
/// `None` without Redis.
async fn redis_pair() -> Option<(RedisServer, RedisServer)> {
    tokio::task::spawn_blocking(|| {
        let primary = RedisServer::start(&["--repl-diskless-sync-delay", "0"]).unwrap()?;
        let port = primary.addr().port().to_string();
        let replica = RedisServer::start(&["--replicaof", "127.0.0.1", &port])
            .unwrap()
            .expect("redis-server ran for the primary");
        Some((primary, replica))
    })
    .await
    .unwrap()
}

async fn redis() -> Option<RedisServer> {
    tokio::task::spawn_blocking(|| RedisServer::start(&[]).unwrap())
        .await
        .unwrap()
}

/// A redis-server process stopped with SIGSTOP; continued (SIGCONT) when
/// dropped, so a failing test leaves no stopped process behind.
struct Stopped(u32);

fn signal(pid: u32, which: &str) {
    let status = std::process::Command::new("kill")
        .args([which, &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill {which} {pid}");
}

impl Stopped {
    fn stop(server: &RedisServer) -> Stopped {
        signal(server.pid(), "-STOP");
        Stopped(server.pid())
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        signal(self.0, "-CONT");
    }
}

/// The lost lock, and fencing that survives it, once the primary (`a` is
/// connected to it) has died without sending the lock and the replica
/// (`b`) was promoted: `a_token` was `client-a`'s fenced token and
/// `a_colocated` the token of a counter kept beside the lock.
async fn second_client_takes_the_lock(
    b: &mut MultiplexedConnection,
    res_a: &mut MultiplexedConnection,
    res_b: &mut MultiplexedConnection,
    a_token: i64,
    a_colocated: i64,
) {
    assert_eq!(Lock::holder(b, "lock:job").await.unwrap(), None, "the lock was lost");
    let b_token = failover::acquire_fenced(b, res_b, "lock:job", "client-b", TTL)
        .await
        .unwrap()
        .expect("client-b takes the lock client-a still thinks it holds");
    assert!(b_token > a_token);
    // The counter beside the lock lost its increment with the primary.
    let b_colocated = fencing::acquire(b, "lock:colocated", "client-b", TTL)
        .await
        .unwrap()
        .expect("the colocated lock was lost too");
    assert_eq!(
        b_colocated, a_colocated,
        "a token counter that fails over with the lock hands out the same token twice"
    );
    fencing::write(res_b, "resource", b_token, "client-b's work")
        .await
        .unwrap();
    // client-a wakes up and writes late, to the resource it protects.
    let late = fencing::write(res_a, "resource", a_token, "client-a's late work").await;
    assert_eq!(
        late.unwrap_err().code(),
        Some("STALE"),
        "the late write was not refused"
    );
    let kept: String = redis::cmd("GET").arg("resource").query_async(res_a).await.unwrap();
    assert_eq!(kept, "client-b's work");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lost_lock_on_failover_embedded() {
    let _serial = ONE_AT_A_TIME.lock().await;
    let resource = coordis::Server::start().await.unwrap();
    let (primary, replica) = coordis_pair().await;
    let (p, r, control) = (primary.addr(), replica.addr(), primary.control());
    let mut a = connect(&primary.url()).await;
    let (mut res_a, mut res_b) = (connect(&resource.url()).await, connect(&resource.url()).await);
    control.pause_link(0).unwrap();
    let a_token = failover::acquire_fenced(&mut a, &mut res_a, "lock:job", "client-a", TTL)
        .await
        .unwrap()
        .expect("client-a takes the lock");
    let a_colocated = fencing::acquire(&mut a, "lock:colocated", "client-a", TTL)
        .await
        .unwrap()
        .unwrap();
    // The window: the lock is on the primary and not on the replica, and
    // stays so for as long as the link is held.
    for _ in 0..5 {
        assert_eq!(cmd(p, &["GET", "lock:job"]), "$8\r\nclient-a\r\n");
        assert_eq!(cmd(r, &["GET", "lock:job"]), "$-1\r\n");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let link = &control.replica_links()[0];
    assert!(link.paused && link.port == r.port(), "{link:?}");
    let published: u64 = info(p, "master_repl_offset").parse().unwrap();
    assert!(link.acked < published, "the replica acknowledged the lock: {link:?}");
    die_and_promote(control, r).await;
    let mut b = connect(&replica.url()).await;
    second_client_takes_the_lock(&mut b, &mut res_a, &mut res_b, a_token, a_colocated).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lost_lock_on_failover_redis() {
    let _serial = ONE_AT_A_TIME.lock().await;
    let Some(resource) = redis().await else { return };
    let Some((primary, replica)) = redis_pair().await else {
        return;
    };
    let (p, r) = (primary.addr(), replica.addr());
    wait_caught_up(r, p).await;
    let mut a = connect(&primary.url()).await;
    let (mut res_a, mut res_b) = (connect(&resource.url()).await, connect(&resource.url()).await);
    // Hold the replica's link: stop the replica, then close its link on the
    // primary; stopped, it cannot reconnect.
    let stopped = Stopped::stop(&replica);
    assert_eq!(cmd(p, &["CLIENT", "KILL", "TYPE", "replica"]), ":1\r\n");
    wait_for("the primary to drop its replica", || info(p, "connected_slaves") == "0").await;
    let a_token = failover::acquire_fenced(&mut a, &mut res_a, "lock:job", "client-a", TTL)
        .await
        .unwrap()
        .expect("client-a takes the lock");
    let a_colocated = fencing::acquire(&mut a, "lock:colocated", "client-a", TTL)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(cmd(p, &["GET", "lock:job"]), "$8\r\nclient-a\r\n");
    // The primary dies (SIGKILL), then the replica runs again.
    drop(primary);
    drop(stopped);
    wait_for("the replica to see its link down", || {
        info(r, "master_link_status") == "down"
    })
    .await;
    assert_eq!(cmd(r, &["GET", "lock:job"]), "$-1\r\n", "the lock reached the replica");
    assert_eq!(cmd(r, &["REPLICAOF", "NO", "ONE"]), "+OK\r\n");
    let mut b = connect(&replica.url()).await;
    second_client_takes_the_lock(&mut b, &mut res_a, &mut res_b, a_token, a_colocated).await;
}

/// After the failover to `b`'s server: the acknowledged lock survived.
async fn the_acknowledged_lock_survived(b: &mut MultiplexedConnection) {
    assert!(!Lock::new("lock:w", "client-b").acquire(b, TTL).await.unwrap());
    assert_eq!(Lock::holder(b, "lock:w").await.unwrap().as_deref(), Some("client-a"));
}

/// With the link held: a bare `SET NX` + `WAIT 1 100` answers 0, and the
/// recipe gives the lock up.
async fn an_unacknowledged_lock_is_not_held(a: &mut MultiplexedConnection) {
    let set: Option<String> = redis::cmd("SET")
        .arg("lock:bare")
        .arg("client-a")
        .arg("NX")
        .arg("PX")
        .arg(TTL.as_millis() as u64)
        .query_async(a)
        .await
        .unwrap();
    assert_eq!(set.as_deref(), Some("OK"));
    let acked: i64 = redis::cmd("WAIT").arg(1).arg(100).query_async(a).await.unwrap();
    assert_eq!(acked, 0);
    let held = failover::acquire_replicated(a, "lock:w", "client-a", TTL, 1, Duration::from_millis(100))
        .await
        .unwrap();
    assert!(!held, "a lock the replica did not acknowledge was treated as held");
    assert_eq!(Lock::holder(a, "lock:w").await.unwrap(), None, "and released");
}

/// How long an acquire waits for the replica's acknowledgement when the
/// link is up: WAIT answers as soon as it comes, and a loaded machine can
/// take more than 100 ms to deliver a redis-server replica's ACK.
const ACK_WAIT: Duration = Duration::from_millis(2000);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_keeps_the_lock_across_failover_unless_the_link_is_held_embedded() {
    let _serial = ONE_AT_A_TIME.lock().await;
    let (primary, replica) = coordis_pair().await;
    let mut a = connect(&primary.url()).await;
    let held = failover::acquire_replicated(&mut a, "lock:w", "client-a", TTL, 1, ACK_WAIT)
        .await
        .unwrap();
    assert!(held, "WAIT 1 2000 counted the replica");
    // Even a primary that dies with its unsent writes leaves this one behind.
    die_and_promote(primary.control(), replica.addr()).await;
    the_acknowledged_lock_survived(&mut connect(&replica.url()).await).await;

    let (primary, _replica) = coordis_pair().await;
    primary.control().pause_link(0).unwrap();
    an_unacknowledged_lock_is_not_held(&mut connect(&primary.url()).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_keeps_the_lock_across_failover_unless_the_link_is_held_redis() {
    let _serial = ONE_AT_A_TIME.lock().await;
    let Some((primary, replica)) = redis_pair().await else {
        return;
    };
    wait_caught_up(replica.addr(), primary.addr()).await;
    let mut a = connect(&primary.url()).await;
    let held = failover::acquire_replicated(&mut a, "lock:w", "client-a", TTL, 1, ACK_WAIT)
        .await
        .unwrap();
    assert!(held, "WAIT 1 2000 counted the replica");
    drop(primary);
    let r = replica.addr();
    wait_for("the replica to see its link down", || {
        info(r, "master_link_status") == "down"
    })
    .await;
    assert_eq!(cmd(r, &["REPLICAOF", "NO", "ONE"]), "+OK\r\n");
    the_acknowledged_lock_survived(&mut connect(&replica.url()).await).await;

    let Some((primary, replica)) = redis_pair().await else {
        return;
    };
    wait_caught_up(replica.addr(), primary.addr()).await;
    let mut a = connect(&primary.url()).await;
    let _stopped = Stopped::stop(&replica);
    an_unacknowledged_lock_is_not_held(&mut a).await;
}

/// The primary's address as `host:port`.
fn address(addr: SocketAddr) -> String {
    format!("127.0.0.1:{}", addr.port())
}

/// A pod of the election: its elector, its view of the primary, and its
/// connection to it (renewed after a failover).
struct Pod {
    elector: Elector,
    primary: SentinelPrimary,
    conn: MultiplexedConnection,
}

impl Pod {
    async fn new(name: &str, primary: &SentinelPrimary) -> Pod {
        Pod {
            elector: Elector::new("leader:svc", name, TTL),
            primary: primary.clone(),
            conn: primary.connect().await.unwrap(),
        }
    }

    async fn reconnect(&mut self) {
        self.conn = self.primary.connect().await.unwrap();
    }

    async fn tick(&mut self) -> Role {
        self.elector.tick(&mut self.conn).await.unwrap()
    }

    /// Acts as leader if it believes it is one and its token check passes;
    /// a failed check makes it step down. True if it acted.
    async fn act(&mut self, what: &str) -> bool {
        if self.elector.role() != Role::Leader {
            return false;
        }
        let acted = failover::act_as_leader(&mut self.conn, "leader:svc", &self.elector.pod, "leader:svc:log", what)
            .await
            .unwrap();
        if !acted {
            self.elector.is_leader.store(false, std::sync::atomic::Ordering::SeqCst);
        }
        acted
    }
}

/// Every pod acts once; at most one may have acted. Returns who did.
async fn round(pods: &mut [&mut Pod], what: &str) -> Vec<String> {
    let mut acted = vec![];
    for pod in pods.iter_mut() {
        if pod.act(&format!("{} {what}", pod.elector.pod)).await {
            acted.push(pod.elector.pod.clone());
        }
    }
    assert!(acted.len() <= 1, "two leaders acted at once: {acted:?}");
    acted
}

/// SENTINEL REPLICAS' `master-link-status` for each replica.
fn replica_links(sentinel: SocketAddr) -> Vec<String> {
    let reply = cmd(sentinel, &["SENTINEL", "REPLICAS", "mymaster"]);
    let lines: Vec<&str> = reply.lines().collect();
    lines
        .windows(4)
        .filter(|w| w[1] == "master-link-status")
        .map(|w| w[3].to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_election_across_a_sentinel_failover_embedded() {
    let _serial = ONE_AT_A_TIME.lock().await;
    for replicated in [true, false] {
        let (primary, replica) = coordis_pair().await;
        let (p, r, control) = (primary.addr(), replica.addr(), primary.control());
        let dir = TempDir::new("failover-sentinel");
        let conf = dir.0.join("sentinel.conf");
        std::fs::write(
            &conf,
            format!(
                "sentinel monitor mymaster 127.0.0.1 {} 1\nsentinel down-after-milliseconds mymaster 5000\nsentinel failover-timeout mymaster 20000\n",
                p.port()
            ),
        )
        .unwrap();
        let clock = Arc::new(coordis::VirtualClock::at_ms(1_700_000_000_000));
        let args: Vec<String> = vec![
            conf.display().to_string(),
            "--port".into(),
            "0".into(),
            "--bind".into(),
            "127.0.0.1".into(),
        ];
        let sentinel = coordis::sentinel::Sentinel::start_with_clock(&args, clock.clone())
            .await
            .unwrap();
        let s = sentinel.addr();
        // The Sentinel asks for INFO every 10 s of its clock: step it until
        // it knows the replica.
        let deadline = Instant::now() + PATIENCE;
        while replica_links(s) != ["ok"] {
            assert!(Instant::now() < deadline, "the Sentinel never found the replica");
            clock.advance_ms(1000);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let group = SentinelPrimary::new(&format!("redis://{s}"), "mymaster").unwrap();
        assert_eq!(group.address().await.unwrap(), address(p));
        let (mut a, mut b) = (Pod::new("pod-a", &group).await, Pod::new("pod-b", &group).await);
        if !replicated {
            control.pause_link(0).unwrap();
        }
        assert_eq!(a.tick().await, Role::Leader);
        assert_eq!(b.tick().await, Role::Follower);
        assert_eq!(round(&mut [&mut a, &mut b], "1").await, ["pod-a"]);
        let acked: i64 = redis::cmd("WAIT")
            .arg(1)
            .arg(100)
            .query_async(&mut a.conn)
            .await
            .unwrap();
        assert_eq!(acked, i64::from(replicated));

        let dies = control.clone();
        tokio::task::spawn_blocking(move || dies.primary_dies(false))
            .await
            .unwrap();
        let deadline = Instant::now() + PATIENCE;
        while group.address().await.unwrap() != address(r) {
            assert!(Instant::now() < deadline, "the Sentinel did not fail over");
            clock.advance_ms(1000);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        wait_for("the promoted replica", || info(r, "role") == "master").await;
        a.reconnect().await;
        b.reconnect().await;
        // pod-b ticks first: it takes the lease only if the failover lost it.
        let b_role = b.tick().await;
        assert_eq!(b_role == Role::Leader, !replicated, "replicated {replicated}");
        // pod-a still believes it leads; its token check decides.
        let acted = round(&mut [&mut a, &mut b], "2").await;
        let leader = if replicated { "pod-a" } else { "pod-b" };
        assert_eq!(acted, [leader]);
        assert_eq!(a.tick().await == Role::Leader, replicated);
        assert_eq!(round(&mut [&mut a, &mut b], "3").await, [leader]);
        let log: Vec<String> = redis::cmd("LRANGE")
            .arg("leader:svc:log")
            .arg(0)
            .arg(-1)
            .query_async(&mut b.conn)
            .await
            .unwrap();
        let expected: Vec<String> = if replicated {
            vec!["pod-a 1".into(), "pod-a 2".into(), "pod-a 3".into()]
        } else {
            vec!["pod-b 2".into(), "pod-b 3".into()]
        };
        assert_eq!(log, expected, "replicated {replicated}");
        sentinel.shutdown().await;
    }
}
