//! Locks on a Redis Cluster, the failures a cluster adds, staged:
//!
//! - A lock whose slot moves to another shard while its holder's lease
//!   runs: the holder's renewals follow `-ASK` (key moved, slot still in
//!   flight) and `-MOVED` (slot moved), and no other client takes the lock
//!   at any step. On a coordis cluster and a redis-server one, the slot
//!   moved with the commands `redis-cli --cluster reshard` sends.
//! - A shard's primary dies while a lock is held: without WAIT the lock
//!   (and the fencing counter beside it) is lost with the writes the
//!   replica never got, and a second client holds the lock too; with
//!   `WAIT 1` answered before the holder goes on, the promoted replica
//!   still has the lock. On a coordis cluster, whose replica link is held
//!   and whose failure detection runs on the test clock.
//! - Redlock over the primaries of one cluster is not Redlock: the
//!   resource's key lives on one shard, the other "instances" answer
//!   `-MOVED`, and no quorum forms; over independent servers it does.

use std::time::{Duration, Instant};

use coordis::testing::key_slot;
use coordis::ServerSet;
use coordis_client_tests::cluster::{on_both, topology, Cluster, SlotMove, PATIENCE};
use coordis_client_tests::lock::Lock;
use coordis_client_tests::redlock::Redlock;
use redis::cluster::ClusterClient;

/// Longer than any test here runs, on the test clock too (a failover
/// moves it past `cluster-node-timeout`).
const LEASE: Duration = Duration::from_secs(600);

fn urls(nodes: &[(String, u16)]) -> Vec<String> {
    nodes.iter().map(|(h, p)| format!("redis://{h}:{p}")).collect()
}

async fn cluster_connection(nodes: &[(String, u16)]) -> ClusterConn {
    ClusterClient::new(urls(nodes))
        .unwrap()
        .get_async_connection()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_whose_slot_moves_mid_lease_is_renewed_and_never_held_twice() {
    on_both(|backend, nodes| async move {
        let key = "lock:{job42}";
        let mut holder_conn = cluster_connection(&nodes).await;
        let mut rival_conn = cluster_connection(&nodes).await;
        let holder = Lock::new(key, "holder");
        let rival = Lock::new(key, "rival");
        assert!(holder.acquire(&mut holder_conn, LEASE).await.unwrap(), "{backend}");
        let (host, port) = &nodes[0];
        let slot = key_slot(key.as_bytes());
        let moving = SlotMove::new(host, *port, slot).await;
        let mut conns = (&mut holder_conn, &mut rival_conn);
        let at = format!("{backend}, before the move");
        step(&at, &holder, &rival, &mut conns).await;
        moving.begin().await;
        let at = format!("{backend}, slot importing and migrating, key on the source");
        step(&at, &holder, &rival, &mut conns).await;
        moving.move_key(key).await;
        let at = format!("{backend}, key on the target, slot in flight (-ASK)");
        step(&at, &holder, &rival, &mut conns).await;
        moving.finish().await;
        let at = format!("{backend}, slot on the target (-MOVED)");
        step(&at, &holder, &rival, &mut conns).await;
        // The key and its lease are on the target now, and only there.
        let mut target = moving.target.connect().await;
        let ttl: i64 = redis::cmd("PTTL").arg(key).query_async(&mut target).await.unwrap();
        assert!(ttl > 0 && ttl <= LEASE.as_millis() as i64, "{backend}: PTTL {ttl}");
        let mut source = moving.source.connect().await;
        let asked: redis::RedisResult<i64> = redis::cmd("EXISTS").arg(key).query_async(&mut source).await;
        let moved = asked.expect_err("the source answers for a slot it gave away");
        assert_eq!(moved.kind(), redis::ErrorKind::Moved, "{backend}: {moved}");
        assert!(moved.to_string().contains(&moving.target.addr), "{backend}: {moved}");
        assert!(holder.release(&mut holder_conn).await.unwrap(), "{backend}");
        assert!(rival.acquire(&mut rival_conn, LEASE).await.unwrap(), "{backend}");
    })
    .await;
}

type ClusterConn = redis::cluster_async::ClusterConnection;

/// One step of a move: the holder renews its lease, the rival is refused
/// and sees the holder's name on the key.
async fn step(
    at: &str,
    holder: &Lock,
    rival: &Lock,
    (holder_conn, rival_conn): &mut (&mut ClusterConn, &mut ClusterConn),
) {
    assert!(
        holder.extend(*holder_conn, LEASE).await.unwrap(),
        "{at}: the holder's renewal"
    );
    assert!(
        !rival.acquire(*rival_conn, LEASE).await.unwrap(),
        "{at}: the rival took the lock"
    );
    assert_eq!(
        Lock::holder(*rival_conn, &holder.key).await.unwrap().as_deref(),
        Some("holder"),
        "{at}"
    );
}

/// The index in `set` of the primary serving `key`, and of its replica
/// (`ServerSet::cluster(3, 1)` numbers primary `p`'s replica `p + 3`).
async fn shard_of(set: &ServerSet, key: &str) -> (usize, usize) {
    let addr = set.server(0).addr();
    let nodes = topology(&addr.ip().to_string(), addr.port()).await;
    let owner = nodes
        .iter()
        .find(|n| n.primary && n.serves(key_slot(key.as_bytes())))
        .expect("the slot has an owner");
    let p = (0..3)
        .find(|&i| set.server(i).addr().to_string() == owner.addr)
        .unwrap();
    (p, p + 3)
}

/// Stops primary `p` and steps the cluster's clock until `replica` serves
/// `key`'s slot as a primary.
async fn fail_over(set: &mut ServerSet, p: usize, replica: usize, key: &str) {
    let replica_addr = set.server(replica).addr().to_string();
    let watcher = set.server((p + 1) % 3).addr();
    set.stop(p).await;
    let clock = set.cluster_clock().unwrap();
    let deadline = Instant::now() + PATIENCE;
    loop {
        clock.advance_ms(1_000);
        let nodes = topology(&watcher.ip().to_string(), watcher.port()).await;
        let promoted = nodes
            .iter()
            .any(|n| n.addr == replica_addr && n.primary && n.serves(key_slot(key.as_bytes())));
        if promoted {
            return;
        }
        assert!(Instant::now() < deadline, "the replica was never promoted");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A cluster client seeded with every node of `set` but the stopped `p`.
async fn survivors_connection(set: &ServerSet, p: usize) -> ClusterConn {
    let nodes: Vec<(String, u16)> = (0..set.len())
        .filter(|&i| i != p)
        .map(|i| set.server(i).addr())
        .map(|a| (a.ip().to_string(), a.port()))
        .collect();
    cluster_connection(&nodes).await
}

/// A plain connection to server `i` of `set`.
async fn connect(set: &ServerSet, i: usize) -> redis::aio::MultiplexedConnection {
    redis::Client::open(set.server(i).url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shard_failover_loses_a_lock_the_replica_never_got_and_keeps_one_it_acknowledged() {
    let (key, fence) = ("lock:{job42}", "fence:{job42}");
    // Without WAIT: the replica's link is held while the lock is taken.
    let mut set = ServerSet::cluster(3, 1).await.unwrap();
    let (p, replica) = shard_of(&set, key).await;
    let mut primary = connect(&set, p).await;
    let holder = Lock::new(key, "holder");
    set.server(p).control().pause_link(0).unwrap();
    assert!(holder.acquire(&mut primary, LEASE).await.unwrap());
    let token: i64 = redis::cmd("INCR").arg(fence).query_async(&mut primary).await.unwrap();
    assert_eq!(token, 1);
    fail_over(&mut set, p, replica, key).await;
    let mut rival_conn = survivors_connection(&set, p).await;
    let rival = Lock::new(key, "rival");
    assert!(
        rival.acquire(&mut rival_conn, LEASE).await.unwrap(),
        "the lock the replica never got is free on the promoted replica"
    );
    let rival_token: i64 = redis::cmd("INCR")
        .arg(fence)
        .query_async(&mut rival_conn)
        .await
        .unwrap();
    assert_eq!(
        rival_token, token,
        "the fencing counter lost its increment with the lock: a token kept on the same shard repeats"
    );
    Cluster::Coordis(set).shutdown().await;

    // With WAIT: the holder goes on only once the replica acknowledged.
    let mut set = ServerSet::cluster(3, 1).await.unwrap();
    let (p, replica) = shard_of(&set, key).await;
    let mut primary = connect(&set, p).await;
    assert!(holder.acquire(&mut primary, LEASE).await.unwrap());
    let acked: i64 = redis::cmd("WAIT")
        .arg(1)
        .arg(5_000)
        .query_async(&mut primary)
        .await
        .unwrap();
    assert_eq!(acked, 1, "the replica acknowledged the lock");
    fail_over(&mut set, p, replica, key).await;
    let mut rival_conn = survivors_connection(&set, p).await;
    assert!(
        !rival.acquire(&mut rival_conn, LEASE).await.unwrap(),
        "the acknowledged lock survived the failover"
    );
    assert_eq!(
        Lock::holder(&mut rival_conn, key).await.unwrap().as_deref(),
        Some("holder")
    );
    Cluster::Coordis(set).shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_over_one_clusters_primaries_never_forms_a_quorum() {
    on_both(|backend, nodes| async move {
        let redlock = Redlock::new(&urls(&nodes));
        assert_eq!(
            redlock.lock("lock:{job42}", "holder", Duration::from_secs(10)).await,
            None,
            "{backend}: one shard holds the key; the other primaries answer -MOVED"
        );
    })
    .await;
    // The same recipe over three independent servers takes the lock.
    let independent = ServerSet::start(3).await.unwrap();
    let redlock = Redlock::new(&independent.urls());
    assert!(redlock
        .lock("lock:{job42}", "holder", Duration::from_secs(10))
        .await
        .is_some());
    independent.shutdown().await;
}
