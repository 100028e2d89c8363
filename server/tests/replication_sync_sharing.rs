//! Replicas arriving together share one full-sync snapshot, on a coordis
//! primary and, side by side, on a redis-server 7.0.15 primary:
//!
//! - disk-backed (`repl-diskless-sync no`): a replica that asks while
//!   another's snapshot is being made attaches to it (the same image and
//!   the stream from its offset), instead of waiting for the next one;
//! - diskless (`repl-diskless-sync yes`): replicas that ask within
//!   `repl-diskless-sync-delay` get one snapshot, and
//!   `repl-diskless-sync-max-replicas` starts it without waiting the delay.
//!
//! Counted by INFO `sync_full` and `rdb_saves` (which, as in Redis, counts
//! disk-target snapshots only); every dataset ends equal (DEBUG DIGEST). The replicas are coordis. Skipped loudly without
//! redis-server (a failure with `COORDIS_REQUIRE_REDIS=1`).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use coordis::testing::command_text as cmd;
use coordis::testing::{compare_digests, RawClient, RedisServer};
use coordis::BlockingServer;

/// How long a test waits for a state before it fails.
const PATIENCE: Duration = Duration::from_secs(30);

/// Keys on the primary: with one key per slice and a pause between
/// slices (or Redis's `rdb-key-save-delay`), the snapshot takes seconds.
const KEYS: &str = "100";

/// Microseconds per key of the slowed snapshot (100 keys: 2 s).
const KEY_DELAY_US: u64 = 20_000;

fn info(addr: SocketAddr, section: &str, field: &str) -> String {
    RawClient::connect(addr).unwrap().info_field(section, field)
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A coordis replica (not yet following anyone).
fn coordis_replica() -> BlockingServer {
    let mut builder = coordis::Server::builder();
    builder.config_mut().enable_debug_command = "yes".into();
    builder.start_blocking().unwrap()
}

/// A coordis primary whose snapshots are slow (one key per slice, a pause
/// between them); `diskless` and its delay as given.
fn coordis_primary(diskless: bool, delay_secs: u64, max_replicas: u64) -> BlockingServer {
    let mut builder = coordis::Server::builder();
    let c = builder.config_mut();
    c.enable_debug_command = "yes".into();
    c.repl.diskless_sync = diskless;
    c.repl.diskless_sync_delay = delay_secs;
    c.repl.diskless_sync_max_replicas = max_replicas;
    c.bgsave_slice_keys = 1;
    c.bgsave_slice_pause_us = KEY_DELAY_US;
    builder.start_blocking().unwrap()
}

/// The same on redis-server (`rdb-key-save-delay`); `None` without Redis.
fn redis_primary(diskless: bool, delay_secs: u64, max_replicas: u64) -> Option<RedisServer> {
    let (delay, max, key_delay) = (
        delay_secs.to_string(),
        max_replicas.to_string(),
        KEY_DELAY_US.to_string(),
    );
    RedisServer::start(&[
        "--enable-debug-command",
        "yes",
        "--repl-diskless-sync",
        if diskless { "yes" } else { "no" },
        "--repl-diskless-sync-delay",
        &delay,
        "--repl-diskless-sync-max-replicas",
        &max,
        "--rdb-key-save-delay",
        &key_delay,
    ])
    .unwrap()
}

fn replicaof(replica: SocketAddr, primary: SocketAddr) {
    assert_eq!(
        cmd(replica, &["REPLICAOF", "127.0.0.1", &primary.port().to_string()]),
        "+OK\r\n"
    );
}

fn caught_up(replica: SocketAddr, primary: SocketAddr) -> bool {
    let body = cmd(primary, &["INFO", "replication"]);
    let online = body
        .lines()
        .filter(|l| l.starts_with("slave") && l.contains("state="))
        .all(|l| l.contains("state=online"));
    online
        && info(replica, "replication", "master_link_status") == "up"
        && info(replica, "replication", "slave_repl_offset") == info(primary, "replication", "master_repl_offset")
}

/// What a primary counted once both replicas caught up: (`sync_full`, `rdb_saves`).
struct Counts {
    sync_full: String,
    rdb_saves: String,
}

/// Two replicas of `primary`: the first asks, `between` runs (it waits
/// for the first's snapshot, or not), writes go to the primary, the second
/// asks; both must end with the primary's dataset.
fn two_replicas(primary: SocketAddr, between: impl FnOnce()) -> Counts {
    assert_eq!(cmd(primary, &["DEBUG", "POPULATE", KEYS]), "+OK\r\n");
    let (a, b) = (coordis_replica(), coordis_replica());
    replicaof(a.addr(), primary);
    between();
    for i in 0..20 {
        cmd(primary, &["SET", &format!("during:{i}"), "x"]);
    }
    replicaof(b.addr(), primary);
    cmd(primary, &["INCR", "after"]);
    wait_for("both replicas to catch up", || {
        caught_up(a.addr(), primary) && caught_up(b.addr(), primary)
    });
    for replica in [a.addr(), b.addr()] {
        let diff = compare_digests(replica, primary, &[0]).unwrap();
        assert!(diff.is_empty(), "datasets differ:\n{}", diff.join("\n"));
    }
    Counts {
        sync_full: info(primary, "stats", "sync_full"),
        rdb_saves: info(primary, "persistence", "rdb_saves"),
    }
}

/// Waits until `primary` is making a snapshot.
fn snapshot_running(primary: SocketAddr) {
    wait_for("the snapshot to start", || {
        info(primary, "persistence", "rdb_bgsave_in_progress") == "1"
    });
}

#[test]
fn a_replica_arriving_during_a_disk_backed_sync_shares_its_snapshot() {
    let primary = coordis_primary(false, 0, 0);
    let ours = two_replicas(primary.addr(), || snapshot_running(primary.addr()));
    assert_eq!((ours.sync_full.as_str(), ours.rdb_saves.as_str()), ("2", "1"));
    let Some(redis) = redis_primary(false, 0, 0) else {
        return;
    };
    let theirs = two_replicas(redis.addr(), || snapshot_running(redis.addr()));
    assert_eq!((theirs.sync_full, theirs.rdb_saves), (ours.sync_full, ours.rdb_saves));
}

#[test]
fn replicas_arriving_within_the_diskless_delay_share_one_snapshot() {
    let primary = coordis_primary(true, 2, 0);
    let ours = two_replicas(primary.addr(), || {});
    assert_eq!((ours.sync_full.as_str(), ours.rdb_saves.as_str()), ("2", "0"));
    let Some(redis) = redis_primary(true, 2, 0) else {
        return;
    };
    let theirs = two_replicas(redis.addr(), || {});
    assert_eq!((theirs.sync_full, theirs.rdb_saves), (ours.sync_full, ours.rdb_saves));
}

#[test]
fn the_diskless_sync_starts_once_max_replicas_asked() {
    // A delay far beyond the test's patience: only the count starts it.
    let primary = coordis_primary(true, 600, 2);
    let ours = two_replicas(primary.addr(), || {});
    assert_eq!((ours.sync_full.as_str(), ours.rdb_saves.as_str()), ("2", "0"));
    let Some(redis) = redis_primary(true, 600, 2) else {
        return;
    };
    let theirs = two_replicas(redis.addr(), || {});
    assert_eq!((theirs.sync_full, theirs.rdb_saves), (ours.sync_full, ours.rdb_saves));
}

/// A replica arriving while a diskless snapshot goes to another one's
/// socket waits for the next snapshot, on both primaries.
#[test]
fn a_replica_arriving_during_a_diskless_transfer_waits_for_the_next() {
    let primary = coordis_primary(true, 0, 0);
    let ours = two_replicas(primary.addr(), || snapshot_running(primary.addr()));
    assert_eq!((ours.sync_full.as_str(), ours.rdb_saves.as_str()), ("2", "0"));
    let Some(redis) = redis_primary(true, 0, 0) else {
        return;
    };
    let theirs = two_replicas(redis.addr(), || snapshot_running(redis.addr()));
    assert_eq!((theirs.sync_full, theirs.rdb_saves), (ours.sync_full, ours.rdb_saves));
}
