//! Replicated sets in one call: `ServerSet::replicated` (every replica's
//! link up and caught up, every Sentinel seeing the primary, its replicas
//! and the other Sentinels before it returns; the per-link controls on the
//! primary's handle; a Sentinel failover driven by the shared test clock)
//! and `coordis-server --replicas-local` (its ready line names every
//! member). Everything started is stopped when a test ends, failing or not.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use coordis::testing::RawClient;
use coordis::ServerSet;

const BIN: &str = env!("CARGO_BIN_EXE_coordis-server");

/// Longest real-time wait for a state the set reaches by itself.
const WAIT: Duration = Duration::from_secs(30);

use coordis::testing::command_text as command;

fn addr_of(url: &str) -> SocketAddr {
    url.trim_start_matches("redis://").parse().unwrap()
}

fn info_field(addr: SocketAddr, name: &str) -> String {
    let info = command(addr, &["INFO", "replication"]);
    info.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// SENTINEL GET-MASTER-ADDR-BY-NAME's port.
fn master_port(sentinel: SocketAddr, name: &str) -> u16 {
    let reply = command(sentinel, &["SENTINEL", "GET-MASTER-ADDR-BY-NAME", name]);
    reply.lines().nth(4).and_then(|p| p.parse().ok()).unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primary_with_replicas_and_sentinels_is_ready_in_one_call() {
    let started = Instant::now();
    let mut set = ServerSet::replicated_builder(2, 3)
        .down_after(5_000)
        .failover_timeout(5_000)
        .start()
        .await
        .unwrap();
    eprintln!("1 primary, 2 replicas, 3 Sentinels ready in {:?}", started.elapsed());
    let primary = addr_of(&set.primary_url().unwrap());
    let replicas: Vec<SocketAddr> = set.replica_urls().iter().map(|u| addr_of(u)).collect();
    let sentinels = set.sentinel_addrs();
    assert_eq!((replicas.len(), sentinels.len(), set.len()), (2, 3, 3));
    assert_eq!(set.master_name(), Some("mymaster"));
    // Ready: every link up at the primary's offset...
    let offset = info_field(primary, "master_repl_offset");
    for &r in &replicas {
        assert_eq!(info_field(r, "master_link_status"), "up");
        assert_eq!(info_field(r, "slave_repl_offset"), offset);
        assert_eq!(info_field(r, "master_port"), primary.port().to_string());
    }
    assert_eq!(info_field(primary, "connected_slaves"), "2");
    // ... and every Sentinel knows the primary, both replicas and the
    // other two Sentinels.
    for &s in &sentinels {
        assert_eq!(master_port(s, "mymaster"), primary.port());
        let master = command(s, &["SENTINEL", "MASTER", "mymaster"]);
        let fields: Vec<&str> = master.lines().filter(|l| !l.starts_with(['*', '$'])).collect();
        let get = |k: &str| fields.iter().position(|f| *f == k).map(|i| fields[i + 1]).unwrap();
        assert_eq!(get("num-slaves"), "2", "{s}: {master}");
        assert_eq!(get("num-other-sentinels"), "2", "{s}: {master}");
        assert_eq!(get("quorum"), "2", "{s}: {master}");
        assert_eq!(get("flags"), "master", "{s}: {master}");
        let reps = command(s, &["SENTINEL", "REPLICAS", "mymaster"]);
        assert_eq!(reps.matches("\r\nok\r\n").count(), 2, "{s}: {reps}");
    }
    // The per-link controls are the primary's: a paused link holds its
    // replica back, WAIT counts only the other.
    let control = set.primary_control().unwrap();
    assert_eq!(control.replica_links().len(), 2);
    // (WAIT counts for the writes of its own connection.)
    let mut c = RawClient::connect(primary).unwrap();
    let mut run = |args: &[&str]| String::from_utf8_lossy(&c.command(args).unwrap()).into_owned();
    assert_eq!(run(&["SET", "k", "v1"]), "+OK\r\n");
    assert_eq!(run(&["WAIT", "2", "5000"]), ":2\r\n");
    control.pause_link(0).unwrap();
    assert_eq!(run(&["SET", "k", "v2"]), "+OK\r\n");
    assert_eq!(run(&["WAIT", "2", "200"]), ":1\r\n");
    control.resume_link(0).unwrap();
    assert_eq!(run(&["WAIT", "2", "5000"]), ":2\r\n");
    drop(c);

    // The primary dies; the Sentinels fail over on the shared clock. It
    // moves in small steps: all three see the primary down at once, vote
    // for themselves and split the vote, and the retry (after twice the
    // failover timeout) is spread over a random second per Sentinel,
    // which only steps shorter than that let one of them ask first.
    // (A single jump past down-after-milliseconds would also leave the
    // replicas' last INFO too old for Sentinel to pick one.)
    set.stop(0).await;
    let clock = set.shared_clock().unwrap();
    let deadline = Instant::now() + WAIT;
    let new_port = loop {
        let ports: Vec<u16> = sentinels.iter().map(|&s| master_port(s, "mymaster")).collect();
        if ports.iter().all(|&p| p != primary.port() && p == ports[0]) {
            break ports[0];
        }
        assert!(Instant::now() < deadline, "no failover: the Sentinels say {ports:?}");
        clock.advance_ms(100);
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let (new, other) = if replicas[0].port() == new_port {
        (replicas[0], replicas[1])
    } else {
        (replicas[1], replicas[0])
    };
    assert_eq!(new.port(), new_port);
    assert_eq!(command(new, &["GET", "k"]), "$2\r\nv2\r\n");
    // The other replica follows the new primary and gets its writes.
    assert_eq!(command(new, &["SET", "after", "failover"]), "+OK\r\n");
    let deadline = Instant::now() + WAIT;
    while command(other, &["GET", "after"]) != "$8\r\nfailover\r\n" {
        assert!(
            Instant::now() < deadline,
            "the other replica never followed the new primary"
        );
        clock.advance_ms(1_000);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(info_field(other, "master_port"), new_port.to_string());
    set.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_without_sentinels_and_the_other_sets_accessors() {
    let set = ServerSet::replicated(1, 0).await.unwrap();
    assert!(set.sentinel_addrs().is_empty());
    assert!(set.sentinel(0).is_none());
    let replica = addr_of(&set.replica_urls()[0]);
    assert_eq!(info_field(replica, "master_link_status"), "up");
    assert_eq!(
        command(replica, &["SET", "k", "v"]),
        "-READONLY You can't write against a read only replica.\r\n"
    );
    set.shutdown().await;
    let plain = ServerSet::start(1).await.unwrap();
    assert_eq!(plain.primary_url(), None);
    assert!(plain.replica_urls().is_empty());
    assert_eq!(plain.master_name(), None);
    assert!(plain.primary_control().is_none());
    assert!(plain.shared_clock().is_none());
    plain.shutdown().await;
}

/// A `coordis-server --replicas-local` process, killed on drop.
struct Local(Child);

impl Drop for Local {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn coordis_server_starts_a_replicated_set_with_a_ready_line() {
    let mut child = Command::new(BIN)
        .args([
            "--replicas-local",
            "2",
            "--sentinels-local",
            "1",
            "--port",
            "0",
            "--enable-test-commands",
            "yes",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let local = Local(child);
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).unwrap();
    // Every "addr" in order: the top level's (the primary's), the
    // primary's, the two replicas', the Sentinel's.
    let addrs: Vec<SocketAddr> = line
        .split("\"addr\":\"")
        .skip(1)
        .map(|rest| rest[..rest.find('"').unwrap()].parse().unwrap())
        .collect();
    assert_eq!(addrs.len(), 5, "{line}");
    let (primary, replicas, sentinel) = (addrs[0], &addrs[2..4], addrs[4]);
    let member = |a: SocketAddr| format!("{{\"port\":{},\"addr\":\"{a}\",\"url\":\"redis://{a}\"}}", a.port());
    let expected = format!(
        "{{\"ready\":true,\"port\":{},\"addr\":\"{primary}\",\"url\":\"redis://{primary}\",\"master_name\":\"mymaster\",\"primary\":{},\"replicas\":[{},{}],\"sentinels\":[{{\"port\":{},\"addr\":\"{sentinel}\"}}],\"pid\":{}}}",
        primary.port(),
        member(primary),
        member(replicas[0]),
        member(replicas[1]),
        sentinel.port(),
        local.0.id()
    );
    assert_eq!(line.trim_end(), expected);
    for r in replicas {
        assert_eq!(info_field(*r, "master_link_status"), "up");
    }
    assert_eq!(master_port(sentinel, "mymaster"), primary.port());
    // One clock: COORDIS.CLOCK on a replica moves the Sentinel's too. The
    // primary dies (COORDIS.REPLICATION DIE), the clock passes
    // down-after-milliseconds (30 s) a second at a time (the replicas' INFO
    // stays fresh enough for Sentinel to pick one), and the Sentinel fails
    // over.
    let mut die = RawClient::connect(primary).unwrap();
    die.send(b"COORDIS.REPLICATION DIE\r\n").unwrap();
    assert!(die.read_reply().is_err(), "DIE answers by closing the connection");
    let deadline = Instant::now() + WAIT;
    while master_port(sentinel, "mymaster") == primary.port() {
        assert!(Instant::now() < deadline, "no failover on the clock");
        command(replicas[0], &["COORDIS.CLOCK", "ADVANCE", "1000"]);
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(replicas.iter().any(|r| r.port() == master_port(sentinel, "mymaster")));
    drop(local);
}
