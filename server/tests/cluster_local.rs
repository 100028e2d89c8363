//! In-process clusters: `ServerSet::cluster` (every node `cluster_state:ok`
//! before it returns, slots spread evenly, redirections between the nodes,
//! a stopped primary failing on the cluster's test clock; with replicas:
//! CLUSTER NODES/SHARDS/REPLICAS, READONLY reads on a replica, a stopped
//! primary's replica promoted on the test clock) and `coordis-server
//! --cluster-local` (its ready line lists every node and its role, on
//! consecutive ports).

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use coordis::testing::{free_port, RawClient};
use coordis::ServerSet;

const BIN: &str = env!("CARGO_BIN_EXE_coordis-server");

/// Longest real-time wait for a state the cluster reaches by itself.
const WAIT: Duration = Duration::from_secs(20);

use coordis::testing::command_text as command;

fn addr_of(url: &str) -> SocketAddr {
    url.trim_start_matches("redis://").parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_primaries_are_ready_and_redirect() {
    let started = Instant::now();
    let mut set = ServerSet::cluster(3, 0).await.unwrap();
    eprintln!("3 primaries ready in {:?}", started.elapsed());
    assert_eq!(set.len(), 3);
    assert_eq!(set.primaries(), 0..3);
    let urls = set.urls();
    for url in &urls {
        let info = command(addr_of(url), &["CLUSTER", "INFO"]);
        assert!(info.contains("cluster_state:ok"), "{url}: {info}");
        assert!(info.contains("cluster_known_nodes:3"), "{url}: {info}");
        assert!(info.contains("cluster_size:3"), "{url}: {info}");
    }
    // Even thirds, each served by the node that was given it.
    let slots = command(addr_of(&urls[0]), &["CLUSTER", "SHARDS"]);
    for range in [":0\r\n:5460\r\n", ":5461\r\n:10921\r\n", ":10922\r\n:16383\r\n"] {
        assert!(slots.contains(range), "{range:?} in {slots:?}");
    }
    // foo hashes to 12182: the third node's; the others redirect there.
    let third = addr_of(&urls[2]);
    assert_eq!(
        command(addr_of(&urls[0]), &["SET", "foo", "bar"]),
        format!("-MOVED 12182 {third}\r\n")
    );
    assert_eq!(command(third, &["SET", "foo", "bar"]), "+OK\r\n");
    let id = set.node_id(2).unwrap().to_owned();
    assert_eq!(
        command(third, &["CLUSTER", "MYID"]),
        format!("${}\r\n{id}\r\n", id.len())
    );

    // A stopped primary fails once the cluster's clock passes the node
    // timeout, and its slots take the cluster down.
    set.stop(2).await;
    let clock = set.cluster_clock().unwrap();
    let first = addr_of(&urls[0]);
    let deadline = Instant::now() + WAIT;
    loop {
        clock.advance_ms(1_000);
        if command(first, &["CLUSTER", "INFO"]).contains("cluster_state:fail") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the cluster never noticed the stopped primary"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let nodes = command(first, &["CLUSTER", "NODES"]);
    assert!(nodes.contains(&format!("{id} {third}@")), "{nodes}");
    assert!(nodes.contains("master,fail "), "{nodes}");
    set.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consecutive_ports_from_the_builder() {
    let mut tries = 0;
    let (base, set) = loop {
        let base = two_free_ports();
        match ServerSet::cluster_builder(2, 0).port(base).start().await {
            Ok(set) => break (base, set),
            // Another test took one of the ports after the check.
            Err(_) if tries < 5 => tries += 1,
            Err(e) => panic!("{e}"),
        }
    };
    let ports: Vec<u16> = set.urls().iter().map(|u| addr_of(u).port()).collect();
    assert_eq!(ports, vec![base, base + 1]);
    let nodes = command(addr_of(&set.urls()[0]), &["CLUSTER", "NODES"]);
    assert!(
        nodes.contains(&format!("127.0.0.1:{}@{} ", base + 1, base + 10_001)),
        "{nodes}"
    );
    set.shutdown().await;
}

/// A port below 50000 that is free, with the next one and both bus ports
/// (port + 10000). Another test may still take one before it is bound.
fn two_free_ports() -> u16 {
    let free = |p: u16| std::net::TcpListener::bind(("127.0.0.1", p)).is_ok();
    loop {
        let p = free_port().unwrap();
        if p < 50_000 && (0..2).all(|i| free(p + i) && free(p + i + 10_000)) {
            return p;
        }
    }
}

/// Polls `done` in real time until it holds; panics with `what` after [`WAIT`].
async fn until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !done() {
        assert!(Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The CLUSTER NODES line of the node with `id`.
fn line_of<'a>(nodes: &'a str, id: &str) -> &'a str {
    nodes
        .lines()
        .find(|l| l.starts_with(id))
        .unwrap_or_else(|| panic!("{id} in {nodes}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_primaries_with_a_replica_each() {
    let started = Instant::now();
    let mut set = ServerSet::cluster(3, 1).await.unwrap();
    eprintln!("3 primaries x 1 replica ready in {:?}", started.elapsed());
    assert_eq!(set.len(), 6);
    assert_eq!(set.primaries(), 0..3);
    let urls = set.urls();
    let addrs: Vec<SocketAddr> = urls.iter().map(|u| addr_of(u)).collect();
    let ids: Vec<String> = (0..6).map(|i| set.node_id(i).unwrap().to_owned()).collect();

    // Already on return: every replica's link up, every node's view whole.
    for (i, &addr) in addrs.iter().enumerate() {
        let info = command(addr, &["CLUSTER", "INFO"]);
        assert!(info.contains("cluster_state:ok"), "node {i}: {info}");
        assert!(info.contains("cluster_known_nodes:6"), "node {i}: {info}");
        assert!(info.contains("cluster_size:3"), "node {i}: {info}");
        let nodes = command(addr, &["CLUSTER", "NODES"]);
        let lines = nodes.lines().filter(|l| l.len() > 40).count();
        assert_eq!(lines, 6, "node {i}: {nodes}");
        for p in 0..3 {
            let l = line_of(&nodes, &ids[p]);
            let fields: Vec<&str> = l.split(' ').collect();
            assert_eq!(fields[1], format!("{}@{}", addrs[p], addrs[p].port() + 10_000), "{l}");
            assert!(fields[2].ends_with("master"), "{l}");
            assert_eq!(fields[3], "-", "{l}");
            assert_eq!(fields[7], "connected", "{l}");
            assert_eq!(fields.len(), 9, "a primary's line ends with its slot range: {l}");
            // A replica shows its primary's config epoch.
            let r = line_of(&nodes, &ids[p + 3]);
            let rf: Vec<&str> = r.split(' ').collect();
            assert_eq!(
                rf[1],
                format!("{}@{}", addrs[p + 3], addrs[p + 3].port() + 10_000),
                "{r}"
            );
            assert!(rf[2].ends_with("slave"), "{r}");
            assert_eq!(rf[3], ids[p], "{r}");
            assert_eq!(rf[6], fields[6], "{r} shows {l}'s epoch");
            assert_eq!(rf[7].trim_end(), "connected", "no slots on a replica: {r}");
            assert_eq!(rf.len(), 8, "{r}");
        }
        let myself = line_of(&nodes, &ids[i]);
        assert!(myself.split(' ').nth(2).unwrap().starts_with("myself,"), "{myself}");
    }
    for r in 3..6 {
        let info = command(addrs[r], &["INFO", "replication"]);
        assert!(info.contains("role:slave\r\n"), "{info}");
        assert!(info.contains("master_link_status:up"), "{info}");
        assert!(
            info.contains(&format!("master_port:{}\r\n", addrs[r - 3].port())),
            "{info}"
        );
    }
    // CLUSTER REPLICAS: the replica's own line, as CLUSTER NODES has it.
    for p in 0..3 {
        let replicas = command(addrs[0], &["CLUSTER", "REPLICAS", &ids[p]]);
        assert!(replicas.starts_with("*1\r\n$"), "{replicas}");
        assert!(
            replicas.contains(&format!("{} {}@", ids[p + 3], addrs[p + 3])),
            "{replicas}"
        );
        assert!(replicas.contains(&format!(" slave {} ", ids[p])), "{replicas}");
    }
    assert_eq!(
        command(addrs[0], &["CLUSTER", "REPLICAS", &ids[3]]),
        "-ERR The specified node is not a master\r\n"
    );
    // CLUSTER SHARDS: three shards of two, the primary first.
    let shards = command(addrs[1], &["CLUSTER", "SHARDS"]);
    assert!(shards.starts_with("*3\r\n"), "{shards}");
    assert_eq!(shards.matches("$5\r\nnodes\r\n*2\r\n").count(), 3, "{shards}");
    assert_eq!(shards.matches("$4\r\nrole\r\n$6\r\nmaster\r\n").count(), 3, "{shards}");
    assert_eq!(shards.matches("$4\r\nrole\r\n$7\r\nreplica\r\n").count(), 3, "{shards}");
    // A replica whose offset the node knows as 0 is `loading`, as in Redis
    // (no write has reached the shard yet); a primary is `online`.
    let online = shards.matches("$6\r\nhealth\r\n$6\r\nonline\r\n").count();
    let loading = shards.matches("$6\r\nhealth\r\n$7\r\nloading\r\n").count();
    assert!(online >= 3 && online + loading == 6, "{shards}");
    for p in 0..3 {
        let at = shards.find(&ids[p]).unwrap();
        let replica_at = shards.find(&ids[p + 3]).unwrap();
        assert!(at < replica_at, "the primary comes first in its shard: {shards}");
        assert!(
            !shards[at..replica_at].contains("$5\r\nslots\r\n"),
            "one shard: {shards}"
        );
    }

    // foo hashes to 12182, the third primary's: written there, readable
    // on its replica after READONLY, redirected there before it.
    let (third, its_replica) = (addrs[2], addrs[5]);
    assert_eq!(command(third, &["SET", "foo", "bar"]), "+OK\r\n");
    assert_eq!(
        command(its_replica, &["GET", "foo"]),
        format!("-MOVED 12182 {third}\r\n")
    );
    let mut reader = RawClient::connect(its_replica).unwrap();
    reader.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    assert_eq!(reader.command(&["READONLY"]).unwrap(), b"+OK\r\n");
    until("the write reached the replica", || {
        reader.command(&["GET", "foo"]).unwrap() == b"$3\r\nbar\r\n"
    })
    .await;
    assert_eq!(
        reader.command(&["SET", "foo", "other"]).unwrap(),
        format!("-MOVED 12182 {third}\r\n").into_bytes(),
        "READONLY reads only"
    );

    // The third primary stops: on the cluster's clock it fails, its
    // replica wins the election and takes its slots; clients are sent there.
    set.stop(2).await;
    let clock = set.cluster_clock().unwrap();
    let first = addrs[0];
    let promoted = format!("-MOVED 12182 {its_replica}\r\n");
    let deadline = Instant::now() + WAIT;
    loop {
        clock.advance_ms(1_000);
        if command(first, &["SET", "foo", "baz"]) == promoted {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the replica was never promoted: {}",
            command(first, &["CLUSTER", "NODES"])
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(command(its_replica, &["GET", "foo"]), "$3\r\nbar\r\n");
    assert_eq!(command(its_replica, &["SET", "foo", "baz"]), "+OK\r\n");
    let nodes = command(first, &["CLUSTER", "NODES"]);
    let old = line_of(&nodes, &ids[2]);
    assert!(old.contains(" master,fail - "), "{old}");
    let new = line_of(&nodes, &ids[5]);
    assert!(new.contains(" master - "), "{new}");
    assert!(new.trim_end().ends_with(" connected 10922-16383"), "{new}");
    until("the cluster is ok again", || {
        command(first, &["CLUSTER", "INFO"]).contains("cluster_state:ok")
    })
    .await;
    let info = command(its_replica, &["INFO", "replication"]);
    assert!(info.contains("role:master\r\n"), "{info}");
    set.shutdown().await;
}

struct Child_(Child);

impl Drop for Child_ {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The ready line's `"key":value` (a number or a string's text).
fn field<'a>(line: &'a str, key: &str) -> &'a str {
    let at = line
        .find(&format!("\"{key}\":"))
        .unwrap_or_else(|| panic!("{key} in {line}"))
        + key.len()
        + 3;
    let rest = line[at..].trim_start_matches('"');
    let end = rest.find(['"', ',', '}', ']']).unwrap();
    &rest[..end]
}

fn cluster_local(args: &[&str]) -> (Child_, String) {
    let mut child = Child_(
        Command::new(BIN)
            .arg("--cluster-local")
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut line = String::new();
    BufReader::new(child.0.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    (child, line)
}

#[test]
fn cluster_local_lists_every_node_in_its_ready_line() {
    let (_child, line) = cluster_local(&["3", "--port", "0"]);
    assert!(line.starts_with("{\"ready\":true,"), "{line:?}");
    assert_eq!(field(&line, "cluster_state"), "ok", "{line}");
    let nodes = &line[line.find("\"nodes\":[").expect("a nodes list")..];
    let entries: Vec<&str> = nodes.split("{\"port\":").skip(1).collect();
    assert_eq!(entries.len(), 3, "{line}");
    for (i, e) in entries.iter().enumerate() {
        let port: u16 = e.split(',').next().unwrap().parse().unwrap();
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        let info = command(addr, &["CLUSTER", "INFO"]);
        assert!(info.contains("cluster_state:ok"), "node {i}: {info}");
        let id = field(e, "id");
        assert_eq!(command(addr, &["CLUSTER", "MYID"]), format!("$40\r\n{id}\r\n"));
        assert_eq!(field(e, "role"), "master");
    }
    let first: u16 = field(&line, "port").parse().unwrap();
    assert_eq!(field(&line, "url"), format!("redis://127.0.0.1:{first}"));
}

/// Two nodes on `base` and `base + 1`. The ports are checked free (with
/// their bus ports) before the spawn, but another test may take one in
/// between: a start that printed nothing (it could not bind) is retried on
/// other ports.
#[test]
fn cluster_local_takes_consecutive_ports() {
    for _ in 0..5 {
        let base = two_free_ports();
        let (_child, line) = cluster_local(&["2", "--port", &base.to_string()]);
        if line.is_empty() {
            continue;
        }
        assert!(line.contains(&format!("{{\"port\":{base},")), "{line}");
        assert!(line.contains(&format!("{{\"port\":{},", base + 1)), "{line}");
        let info = command(([127, 0, 0, 1], base + 1).into(), &["CLUSTER", "INFO"]);
        assert!(info.contains("cluster_known_nodes:2"), "{info}");
        return;
    }
    panic!("no two consecutive free ports took the cluster in five tries");
}

/// With replicas: six nodes in the ready line, each with its role, the
/// replicas' links up when it is printed.
#[test]
fn cluster_local_with_replicas_lists_every_role() {
    let (_child, line) = cluster_local(&["3", "--cluster-replicas", "1", "--port", "0"]);
    assert!(line.starts_with("{\"ready\":true,"), "{line:?}");
    let nodes = &line[line.find("\"nodes\":[").expect("a nodes list")..];
    let entries: Vec<&str> = nodes.split("{\"port\":").skip(1).collect();
    assert_eq!(entries.len(), 6, "{line}");
    let ids: Vec<&str> = entries.iter().map(|e| field(e, "id")).collect();
    for (i, e) in entries.iter().enumerate() {
        let port: u16 = e.split(',').next().unwrap().parse().unwrap();
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        assert!(
            command(addr, &["CLUSTER", "INFO"]).contains("cluster_state:ok"),
            "node {i}"
        );
        let info = command(addr, &["INFO", "replication"]);
        if i < 3 {
            assert_eq!(field(e, "role"), "master", "{line}");
            assert!(info.contains("role:master\r\nconnected_slaves:1\r\n"), "{info}");
        } else {
            assert_eq!(field(e, "role"), "slave", "{line}");
            assert!(info.contains("master_link_status:up"), "{info}");
            let nodes = command(addr, &["CLUSTER", "NODES"]);
            assert!(
                line_of(&nodes, ids[i]).contains(&format!(" myself,slave {} ", ids[i - 3])),
                "{nodes}"
            );
        }
    }
}
