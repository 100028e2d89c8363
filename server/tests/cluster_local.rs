//! In-process clusters: `ServerSet::cluster` (every node `cluster_state:ok`
//! before it returns, slots spread evenly, redirections between the nodes,
//! a stopped primary failing on the cluster's test clock, the replicas'
//! error while CLUSTER REPLICATE is not served) and `coordis-server
//! --cluster-local` (its ready line lists every node, on consecutive ports).

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use coordis::testing::{free_port, RawClient};
use coordis::ServerSet;

const BIN: &str = env!("CARGO_BIN_EXE_coordis-server");

/// Longest real-time wait for a state the cluster reaches by itself.
const WAIT: Duration = Duration::from_secs(20);

fn command(addr: SocketAddr, args: &[&str]) -> String {
    let mut c = RawClient::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    String::from_utf8_lossy(&c.command(args).unwrap()).into_owned()
}

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
    let base = loop {
        let p = free_port().unwrap();
        if p < 50_000 && (0..2).all(|i| std::net::TcpListener::bind(("127.0.0.1", p + i)).is_ok()) {
            break p;
        }
    };
    let set = ServerSet::cluster_builder(2, 0).port(base).start().await.unwrap();
    let ports: Vec<u16> = set.urls().iter().map(|u| addr_of(u).port()).collect();
    assert_eq!(ports, vec![base, base + 1]);
    let nodes = command(addr_of(&set.urls()[0]), &["CLUSTER", "NODES"]);
    assert!(
        nodes.contains(&format!("127.0.0.1:{}@{} ", base + 1, base + 10_001)),
        "{nodes}"
    );
    set.shutdown().await;
}

/// Replicas in one process are refused for now (their links did not
/// settle on the shared clock): an error naming it, not a hang.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_are_refused_for_now() {
    let err = ServerSet::cluster(3, 1).await.unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::Unsupported, "{err}");
    assert!(err.to_string().contains("replicas in an in-process cluster"), "{err}");
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

#[test]
fn cluster_local_takes_consecutive_ports() {
    let base = loop {
        let p = free_port().unwrap();
        if p < 50_000 && (0..2).all(|i| std::net::TcpListener::bind(("127.0.0.1", p + i)).is_ok()) {
            break p;
        }
    };
    let (_child, line) = cluster_local(&["2", "--port", &base.to_string()]);
    assert!(line.contains(&format!("{{\"port\":{base},")), "{line}");
    assert!(line.contains(&format!("{{\"port\":{},", base + 1)), "{line}");
    let info = command(([127, 0, 0, 1], base + 1).into(), &["CLUSTER", "INFO"]);
    assert!(info.contains("cluster_known_nodes:2"), "{info}");
}

/// With replicas the start is refused for now: a message on stderr and
/// exit code 1, no ready line.
#[test]
fn cluster_local_with_replicas_is_refused_for_now() {
    let out = Command::new(BIN)
        .args(["--cluster-local", "3", "--cluster-replicas", "1", "--port", "0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty(), "{}", String::from_utf8_lossy(&out.stdout));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("replicas in an in-process cluster"), "{err}");
}
