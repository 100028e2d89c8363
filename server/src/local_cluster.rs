//! In-process clusters for tests ([`ClusterBuilder`], [`crate::ServerSet::cluster`]):
//! N coordis nodes with `cluster-enabled yes` in one process, wired by the
//! same binary bus separate processes use, slots assigned evenly, met, and
//! ready (`cluster_state:ok` on every node) before the start returns.

use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::cluster::bus::CRON_MS;
use crate::cluster::{PORT_INCR, SLOTS};
use crate::protocol::Reply;
use crate::{Builder, Config, Server, ServerSet, VirtualClock};

/// Highest client port a node may take: its bus port (+10000) must fit too,
/// and stay below the ephemeral range where the system hands out ports.
const MAX_CLIENT_PORT: u16 = 55_000;

/// Attempts at a free port pair before giving up (another process may take
/// the bus port between the check and the bind).
const PORT_ATTEMPTS: usize = 20;

/// Longest real-time wait for every node to know the others and report
/// `cluster_state:ok`.
const READY_WAIT: Duration = Duration::from_secs(30);

/// Real time between two looks at the nodes while waiting.
const POLL: Duration = Duration::from_millis(5);

/// What a start that ran out of [`READY_WAIT`] says.
const FORM_LATE: &str = "the cluster did not form in time";

/// How far the start moves the cluster's test clock once the nodes agree on
/// the slots: past Redis's writable delay (a primary's 2 s after its first
/// state check, `CLUSTER_WRITABLE_DELAY`) and the shortest rejoin delay
/// (500 ms), which run on the server clock.
const STATE_DELAYS_MS: u64 = 2_500;

/// Settings for an in-process cluster (from [`ServerSet::cluster_builder`]).
#[derive(Debug, Clone)]
pub struct ClusterBuilder {
    masters: usize,
    replicas_per_master: usize,
    /// 0: each node on a free port (below 55000, its bus port free too).
    base_port: u16,
    /// Every node's settings (its port, directory and cluster switches are the builder's).
    config: Option<Config>,
    clock: Option<Arc<VirtualClock>>,
    /// Wait for the state delays in real time instead of moving the clock.
    real_time: bool,
}

impl ClusterBuilder {
    pub(crate) fn new(masters: usize, replicas_per_master: usize) -> ClusterBuilder {
        ClusterBuilder {
            masters,
            replicas_per_master,
            base_port: 0,
            config: None,
            clock: None,
            real_time: false,
        }
    }

    /// Nodes on consecutive ports from `port` (primaries first, then each
    /// primary's replicas); 0 (the default) picks free ports.
    pub fn port(mut self, port: u16) -> Self {
        self.base_port = port;
        self
    }

    /// Every node's settings (as `coordis-server` reads them). The port,
    /// `dir` (each node has a temp dir of its own, removed with it) and
    /// `cluster-enabled` / `cluster-port` are the builder's.
    pub fn config(mut self, config: Config) -> Self {
        self.config = Some(config);
        self
    }

    /// The test clock every node runs on (default: a fresh one that follows
    /// real time until moved).
    pub fn clock(mut self, clock: Arc<VirtualClock>) -> Self {
        self.clock = Some(clock);
        self
    }

    /// Waits out Redis's state delays (about 2.5 s) in real time, as a
    /// Redis cluster does, rather than moving the cluster's clock past them.
    pub fn real_time(mut self, real_time: bool) -> Self {
        self.real_time = real_time;
        self
    }

    /// Starts the nodes, assigns the slots evenly over the primaries, MEETs
    /// them, attaches the replicas (`CLUSTER REPLICATE`) and returns once
    /// every node reports `cluster_state:ok`, every replica's link is up
    /// (`master_link_status:up`) and every node's CLUSTER NODES shows each
    /// replica as `slave <primary-id>`. A primary with replicas starts their
    /// full sync once all of them are connected
    /// (`repl-diskless-sync-max-replicas` is the replica count unless the
    /// configuration sets it). Any node's error stops the nodes already
    /// started and is returned.
    pub async fn start(self) -> io::Result<ServerSet> {
        if self.masters == 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "a cluster needs a primary"));
        }
        let total = self.masters * (1 + self.replicas_per_master);
        let clock = self.clock.clone().unwrap_or_else(|| Arc::new(VirtualClock::real()));
        let mut set = ServerSet {
            servers: Vec::with_capacity(total),
            cluster: None,
            replicated: None,
        };
        for i in 0..total {
            match self.start_node(i, &clock).await {
                Ok(s) => set.servers.push(s),
                Err(e) => {
                    set.shutdown().await;
                    return Err(e);
                }
            }
        }
        match self.form(&set, &clock).await {
            Ok(ids) => {
                set.cluster = Some(crate::ClusterInfo {
                    ids,
                    masters: self.masters,
                    clock,
                });
                Ok(set)
            }
            Err(e) => {
                set.shutdown().await;
                Err(e)
            }
        }
    }

    async fn start_node(&self, i: usize, clock: &Arc<VirtualClock>) -> io::Result<Server> {
        let attempts = if self.base_port == 0 { PORT_ATTEMPTS } else { 1 };
        let port = || {
            if self.base_port == 0 {
                return free_cluster_port();
            }
            u16::try_from(usize::from(self.base_port) + i)
                .ok()
                .filter(|p| p.checked_add(PORT_INCR).is_some())
                .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "the cluster's ports do not fit"))
        };
        start_member(self.config.as_ref(), clock, attempts, port, |config| {
            config.cluster.enabled = true;
            config.cluster.port = 0;
            // A primary knows how many replicas it gets: their full sync
            // starts once all are connected, rather than after
            // `repl-diskless-sync-delay` (5 s of real time) with none to wait for.
            if i < self.masters && self.replicas_per_master > 0 && config.repl.diskless_sync_max_replicas == 0 {
                config.repl.diskless_sync_max_replicas = self.replicas_per_master as u64;
            }
        })
        .await
    }

    /// Epochs, slots, MEET, replicas, then the wait; the node IDs.
    async fn form(&self, set: &ServerSet, clock: &Arc<VirtualClock>) -> io::Result<Vec<String>> {
        let servers = &set.servers;
        let ids: Vec<String> = servers.iter().map(|s| text(&run(s, &["CLUSTER", "MYID"]))).collect();
        for (i, s) in servers.iter().enumerate() {
            // Distinct epochs, as `redis-cli --cluster create` sets them: no
            // collision to resolve before the slots settle.
            check(run(s, &["CLUSTER", "SET-CONFIG-EPOCH", &(i + 1).to_string()]))?;
        }
        for (i, s) in servers.iter().take(self.masters).enumerate() {
            let first = i * SLOTS / self.masters;
            let last = (i + 1) * SLOTS / self.masters - 1;
            check(run(
                s,
                &["CLUSTER", "ADDSLOTSRANGE", &first.to_string(), &last.to_string()],
            ))?;
        }
        // Every pair meets at once: no waiting for the gossip (a random
        // node a second) to introduce them.
        for (i, a) in servers.iter().enumerate() {
            for b in &servers[i + 1..] {
                let (ip, port) = (b.addr().ip().to_string(), b.addr().port().to_string());
                check(run(a, &["CLUSTER", "MEET", &ip, &port]))?;
            }
        }
        let deadline = Instant::now() + READY_WAIT;
        wait(deadline, FORM_LATE, || {
            servers.iter().all(|s| knows_all(s, servers.len()))
        })
        .await?;
        for (k, s) in servers.iter().enumerate().skip(self.masters) {
            check(run(s, &["CLUSTER", "REPLICATE", &ids[self.primary_of(k)]]))?;
        }
        if !self.real_time {
            wait(deadline, FORM_LATE, || {
                servers.iter().all(|s| info(s).contains("cluster_slots_assigned:16384"))
            })
            .await?;
            clock.advance_ms(STATE_DELAYS_MS);
            for s in servers {
                s.control.engine.lock().settle();
            }
        }
        wait(deadline, FORM_LATE, || {
            servers.iter().all(|s| info(s).contains("cluster_state:ok"))
        })
        .await?;
        // Every replica's link is up and every node shows every replica
        // under its primary: a test may fail a primary at once.
        if !self.real_time && self.replicas_per_master > 0 {
            // A node learns a replica's role from its PONG, and a node it
            // heard from lately gets a PING only every so often (Redis's
            // gossip, up to `cluster-node-timeout` / 2): past that on the
            // clock, every node pings every other at once.
            let timeout = match &self.config {
                Some(c) => c.cluster.node_timeout,
                None => Config::default().cluster.node_timeout,
            };
            wait(deadline, FORM_LATE, || {
                servers[self.masters..]
                    .iter()
                    .all(|s| text(&run(s, &["INFO", "replication"])).contains("master_link_status:up"))
            })
            .await?;
            clock.advance_ms(timeout / 2 + CRON_MS);
        }
        let replicas: Vec<(&str, &str)> = (self.masters..servers.len())
            .map(|k| (ids[k].as_str(), ids[self.primary_of(k)].as_str()))
            .collect();
        wait(deadline, FORM_LATE, || {
            servers[self.masters..]
                .iter()
                .all(|s| text(&run(s, &["INFO", "replication"])).contains("master_link_status:up"))
                && servers.iter().all(|s| {
                    let nodes = text(&run(s, &["CLUSTER", "NODES"]));
                    replicas.iter().all(|&(id, primary)| shows_replica(&nodes, id, primary))
                })
        })
        .await?;
        Ok(ids)
    }

    /// The primary of replica node `k` (each primary's replicas follow
    /// the primaries, in primary order).
    fn primary_of(&self, k: usize) -> usize {
        (k - self.masters) / self.replicas_per_master
    }
}

/// CLUSTER NODES shows node `id` as a connected replica of `primary`
/// (flags `slave` or `myself,slave`).
fn shows_replica(nodes: &str, id: &str, primary: &str) -> bool {
    nodes.lines().any(|line| {
        let fields: Vec<&str> = line.split(' ').collect();
        fields.len() >= 8
            && fields[0] == id
            && fields[2].split(',').any(|f| f == "slave")
            && fields[3] == primary
            && fields[7] == "connected"
    })
}

/// Starts one member of a local set on `config` (or the defaults) with a
/// temp dir of its own, on `clock`, on the port `port` gives, after
/// `adjust` changed what the set decides; tries `attempts` ports while
/// they turn out taken.
pub(crate) async fn start_member(
    config: Option<&Config>,
    clock: &Arc<VirtualClock>,
    attempts: usize,
    mut port: impl FnMut() -> io::Result<u16>,
    adjust: impl Fn(&mut Config),
) -> io::Result<Server> {
    let mut last = None;
    for _ in 0..attempts {
        let mut builder = match config {
            Some(c) => Builder::from_config(c.clone()),
            None => Builder::default(),
        };
        builder = builder.port(port()?).dir("").virtual_clock(clock.clone());
        adjust(builder.config_mut());
        match builder.start().await {
            Ok(s) => return Ok(s),
            Err(e) if e.kind() == io::ErrorKind::AddrInUse => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::other("no free port")))
}

/// A free client port below 55000 whose bus port is free too.
pub(crate) fn free_cluster_port() -> io::Result<u16> {
    for _ in 0..PORT_ATTEMPTS * 10 {
        let p = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        if p < MAX_CLIENT_PORT && std::net::TcpListener::bind(("127.0.0.1", p + PORT_INCR)).is_ok() {
            return Ok(p);
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AddrInUse,
        "no free port pair below 55000",
    ))
}

/// Polls `done` until it holds; an error saying `late` at `deadline`.
pub(crate) async fn wait(deadline: Instant, late: &str, mut done: impl FnMut() -> bool) -> io::Result<()> {
    while !done() {
        if Instant::now() > deadline {
            return Err(io::Error::new(io::ErrorKind::TimedOut, late.to_string()));
        }
        tokio::time::sleep(POLL).await;
    }
    Ok(())
}

/// Runs one command on `server` as the test-control plane does.
pub(crate) fn run(server: &Server, args: &[&str]) -> Reply {
    let args: Vec<Bytes> = args.iter().map(|a| Bytes::copy_from_slice(a.as_bytes())).collect();
    server.control.engine.lock().run_internal(0, &args)
}

fn check(reply: Reply) -> io::Result<()> {
    match reply {
        Reply::Error(e) => Err(io::Error::other(e.into_owned())),
        _ => Ok(()),
    }
}

/// A bulk, status or verbatim reply's text.
pub(crate) fn text(reply: &Reply) -> String {
    match reply {
        Reply::Bulk(b) => String::from_utf8_lossy(b).into_owned(),
        Reply::Status(s) | Reply::Error(s) => s.to_string(),
        Reply::Verbatim(_, b) => String::from_utf8_lossy(b).into_owned(),
        _ => String::new(),
    }
}

fn info(server: &Server) -> String {
    text(&run(server, &["CLUSTER", "INFO"]))
}

/// The node knows `n` nodes, none of them still in the handshake.
fn knows_all(server: &Server, n: usize) -> bool {
    let nodes = text(&run(server, &["CLUSTER", "NODES"]));
    nodes.lines().count() == n && !nodes.contains("handshake") && !nodes.contains("noaddr")
}
