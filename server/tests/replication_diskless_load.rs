//! `repl-diskless-load` on a coordis replica, as Redis 7.0.15 applies it:
//!
//! - every mode ends with the primary's dataset (DEBUG DIGEST), from a
//!   coordis primary and from a redis-server one, the replica's own key
//!   gone;
//!
//! The redis-server leg is skipped loudly without it (a failure with
//! `COORDIS_REQUIRE_REDIS=1`).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use coordis::testing::{compare_digests, RawClient, RedisServer};
use coordis::{BlockingServer, DisklessLoad};

const PATIENCE: Duration = Duration::from_secs(20);

const MODES: [DisklessLoad; 3] = [DisklessLoad::Disabled, DisklessLoad::OnEmptyDb, DisklessLoad::Swapdb];

fn cmd(addr: SocketAddr, args: &[&str]) -> String {
    String::from_utf8_lossy(&RawClient::connect(addr).unwrap().command(args).unwrap()).into_owned()
}

fn info(addr: SocketAddr, section: &str, field: &str) -> String {
    let body = cmd(addr, &["INFO", section]);
    body.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")).map(|v| v.trim().to_string()))
        .unwrap_or_else(|| panic!("no {field} in INFO {section}: {body}"))
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A coordis replica-to-be in `mode`, with its own `dir`, holding key `old`
/// unless `empty`.
fn replica(mode: DisklessLoad, dir: &std::path::Path, empty: bool) -> BlockingServer {
    let mut builder = coordis::Server::builder();
    let c = builder.config_mut();
    c.enable_debug_command = "yes".into();
    c.replica.diskless_load = mode;
    c.dir = dir.to_string_lossy().into_owned();
    let server = builder.start_blocking().unwrap();
    if !empty {
        assert_eq!(cmd(server.addr(), &["SET", "old", "1"]), "+OK\r\n");
    }
    server
}

/// A fresh directory under the system's temp dir, removed on drop.
struct TempDir(std::path::PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!(
            "coordis-diskless-load-{name}-{}-{}",
            std::process::id(),
            fastrand::u64(..)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Follows `primary` until caught up; the dataset must be the primary's.
fn sync_and_compare(replica: SocketAddr, primary: SocketAddr) {
    cmd(replica, &["REPLICAOF", "127.0.0.1", &primary.port().to_string()]);
    wait_for("the replica to catch up", || {
        info(replica, "replication", "master_link_status") == "up"
            && info(replica, "replication", "slave_repl_offset") == info(primary, "replication", "master_repl_offset")
    });
    let diff = compare_digests(replica, primary, &[0, 1]).unwrap();
    assert!(diff.is_empty(), "datasets differ:\n{}", diff.join("\n"));
    assert_eq!(cmd(replica, &["EXISTS", "old"]), ":0\r\n");
}

fn fill(primary: SocketAddr) {
    assert_eq!(cmd(primary, &["DEBUG", "POPULATE", "500"]), "+OK\r\n");
    cmd(primary, &["HSET", "h", "f", "v"]);
    cmd(primary, &["SELECT", "1"]);
    cmd(primary, &["RPUSH", "l", "a", "b"]);
}

#[test]
fn every_mode_ends_with_the_primarys_dataset() {
    let mut builder = coordis::Server::builder();
    builder.config_mut().enable_debug_command = "yes".into();
    builder.config_mut().repl.diskless_sync_delay = 0;
    let primary = builder.start_blocking().unwrap();
    fill(primary.addr());
    let redis = RedisServer::start(&["--enable-debug-command", "yes", "--repl-diskless-sync-delay", "0"]).unwrap();
    if let Some(redis) = &redis {
        fill(redis.addr());
    }
    for mode in MODES {
        for empty in [false, true] {
            let dir = TempDir::new("end");
            let r = replica(mode, &dir.0, empty);
            sync_and_compare(r.addr(), primary.addr());
            if let Some(redis) = &redis {
                let dir = TempDir::new("end-redis");
                let r = replica(mode, &dir.0, empty);
                sync_and_compare(r.addr(), redis.addr());
            }
        }
    }
}
