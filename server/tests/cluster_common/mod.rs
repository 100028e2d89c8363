//! Helpers shared by the cluster tests (`cluster.rs`, `cluster_replicas.rs`,
//! `cluster_reshard.rs`):
//! cluster nodes (coordis-server or redis-server processes on free ports
//! below 55000, bus port +10000, temp dirs, killed on drop), `redis-cli
//! --cluster` and the checks that a cluster formed.
#![allow(dead_code)] // each test crate uses a part

use std::net::SocketAddr;
use std::process::Command;
use std::time::{Duration, Instant};

use coordis::testing::{free_port, RawClient, TempDir};

pub const BIN: &str = env!("CARGO_BIN_EXE_coordis-server");

/// Longest wait for `cluster_state:ok` (Redis waits 2 s after start, then
/// the rejoin delay of at least 500 ms).
pub const STATE_WAIT: Duration = Duration::from_secs(15);

/// A free port whose bus port (+10000) is free too, below 55000.
pub fn cluster_port() -> u16 {
    loop {
        let p = free_port().unwrap();
        if p < 55000 && std::net::TcpListener::bind(("127.0.0.1", p + 10000)).is_ok() {
            return p;
        }
    }
}

pub fn client(addr: SocketAddr, resp3: bool) -> RawClient {
    let mut c = RawClient::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    if resp3 {
        c.command(&["HELLO", "3"]).unwrap();
    }
    c
}

pub fn wait_ok(addr: SocketAddr) {
    wait_state(addr, "ok");
}

/// Waits until the node at `addr` reports `cluster_state:<state>`.
pub fn wait_state(addr: SocketAddr, state: &str) {
    let mut c = client(addr, false);
    let start = Instant::now();
    let want = format!("cluster_state:{state}");
    loop {
        let info = String::from_utf8_lossy(&c.command(&["CLUSTER", "INFO"]).unwrap()).into_owned();
        if info.contains(&want) {
            return;
        }
        assert!(start.elapsed() < STATE_WAIT, "{addr} never reached {want}: {info}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A node of a bus test, coordis-server or redis-server, owned by the
/// test (killed on drop, its directory removed), with its client port
/// below 55000 and its bus port (+10000) free.
pub struct Node {
    pub child: std::process::Child,
    pub port: u16,
    pub _dir: TempDir,
}

impl Node {
    pub fn addr(&self) -> SocketAddr {
        ([127, 0, 0, 1], self.port).into()
    }

    pub fn spec(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub fn command(&self, args: &[&str]) -> String {
        String::from_utf8_lossy(&client(self.addr(), false).command(args).unwrap()).into_owned()
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Node timeout of the bus tests: short, so failure detection is quick,
/// and long enough for a handshake on a loaded machine (it times out after
/// one node timeout).
pub const BUS_NODE_TIMEOUT: &str = "3000";

/// Starts a cluster node: `program` is coordis-server or redis-server.
pub fn node(program: &str, tag: &str) -> Node {
    node_with(program, tag, &[])
}

/// [`node`] with more directives (`--name value` pairs).
pub fn node_with(program: &str, tag: &str, extra: &[&str]) -> Node {
    for _ in 0..5 {
        let dir = TempDir::new(tag);
        let port = cluster_port();
        let child = Command::new(program)
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .args(["--cluster-enabled", "yes", "--cluster-node-timeout", BUS_NODE_TIMEOUT])
            .arg("--dir")
            .arg(&dir.0)
            .args(extra)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let node = Node { child, port, _dir: dir };
        if wait_ping(port) {
            return node;
        }
    }
    panic!("{program} did not start as a cluster node");
}

pub fn wait_ping(port: u16) -> bool {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(5) {
        if let Ok(mut c) = RawClient::connect(([127, 0, 0, 1], port).into()) {
            if c.command(&["PING"]).is_ok_and(|r| r == b"+PONG\r\n") {
                return true;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// `redis-cli` with `args`; its output. `None` (the test skips loudly)
/// without redis-cli.
pub fn redis_cli(args: &[&str]) -> Option<String> {
    let out = match Command::new("redis-cli").args(args).output() {
        Ok(out) => out,
        Err(_) if !coordis::testing::require_redis() => {
            eprintln!("\n*** SKIPPED: redis-cli is not on PATH ***\n");
            return None;
        }
        Err(e) => panic!("redis-cli: {e}"),
    };
    Some(format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    ))
}

pub fn create(nodes: &[&Node]) -> Option<String> {
    let specs: Vec<String> = nodes.iter().map(|n| n.spec()).collect();
    let mut args = vec!["--cluster", "create"];
    args.extend(specs.iter().map(String::as_str));
    args.push("--cluster-yes");
    redis_cli(&args)
}

/// The three nodes report `cluster_state:ok` and list each other with the
/// same slots; `redis-cli --cluster check` passes against every one.
pub fn assert_formed(nodes: &[&Node]) {
    for n in nodes {
        wait_ok(n.addr());
    }
    let owners = |n: &Node| {
        let mut lines: Vec<String> = n
            .command(&["CLUSTER", "NODES"])
            .lines()
            .filter(|l| l.contains(':'))
            .map(|l| {
                let f: Vec<&str> = l.split(' ').collect();
                format!("{} {}", f[0], f[8..].join(" "))
            })
            .collect();
        lines.sort();
        lines
    };
    let first = owners(nodes[0]);
    assert_eq!(first.len(), nodes.len(), "{first:?}");
    for n in &nodes[1..] {
        assert_eq!(owners(n), first, "node {} disagrees", n.port);
    }
    for n in nodes {
        let check = redis_cli(&["--cluster", "check", &n.spec()]).unwrap();
        assert!(
            check.contains("[OK] All nodes agree about slots configuration."),
            "{check}"
        );
        assert!(check.contains("[OK] All 16384 slots covered."), "{check}");
    }
}

/// Waits (up to `within`) until `cond` holds; panics with `what()`.
pub fn wait_for(within: Duration, mut cond: impl FnMut() -> bool, what: impl Fn() -> String) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < within, "{}", what());
        std::thread::sleep(Duration::from_millis(100));
    }
}

impl Node {
    /// CLUSTER MYID.
    pub fn id(&self) -> String {
        self.command(&["CLUSTER", "MYID"]).lines().nth(1).unwrap().to_string()
    }

    /// Which node serves `slot` according to this node (CLUSTER NODES
    /// ranges): its ID, empty when none does.
    pub fn owner_of(&self, slot: u16) -> String {
        for line in self.command(&["CLUSTER", "NODES"]).lines() {
            let f: Vec<&str> = line.split(' ').collect();
            for range in f.iter().skip(8) {
                let (a, b) = range.split_once('-').unwrap_or((range, range));
                if let (Ok(a), Ok(b)) = (a.parse::<u16>(), b.parse::<u16>()) {
                    if (a..=b).contains(&slot) {
                        return f[0].to_string();
                    }
                }
            }
        }
        String::new()
    }

    /// The flags and master fields of `id`'s line in this node's CLUSTER
    /// NODES (`master -`, `slave <id>`, `myself,slave <id>` ...).
    pub fn role_of(&self, id: &str) -> String {
        let view = self.command(&["CLUSTER", "NODES"]);
        view.lines()
            .find(|l| l.starts_with(id))
            .map(|l| l.split(' ').skip(2).take(2).collect::<Vec<_>>().join(" "))
            .unwrap_or_default()
    }
}

/// Whether `program` runs; without it a test skips loudly (or fails when
/// the run requires Redis).
pub fn have(program: &str) -> bool {
    if Command::new(program).arg("--version").output().is_ok() {
        return true;
    }
    assert!(!coordis::testing::require_redis(), "{program} is not on PATH");
    eprintln!("\n*** SKIPPED: {program} is not on PATH ***\n");
    false
}

/// Sends `args` to `start` and follows -MOVED (at most a few hops): the
/// reply of the node that serves the key.
pub fn routed(start: SocketAddr, args: &[&str]) -> String {
    let mut addr = start;
    for _ in 0..4 {
        let reply = String::from_utf8_lossy(&client(addr, false).command(args).unwrap()).into_owned();
        let Some(rest) = reply.strip_prefix("-MOVED ") else {
            return reply;
        };
        let target = rest.trim_end().split(' ').nth(1).unwrap();
        addr = target.parse().unwrap();
    }
    panic!("{args:?}: too many redirections");
}
