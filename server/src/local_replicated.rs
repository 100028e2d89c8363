//! In-process replicated sets for tests ([`ReplicatedBuilder`],
//! [`crate::ServerSet::replicated`]): one coordis primary, N coordis
//! replicas following it (`REPLICAOF`), and optionally S coordis Sentinels
//! monitoring it, all on one test clock, ready before the start returns:
//! every replica's link up and caught up with the primary's offset, every
//! Sentinel seeing the primary, its replicas and the other Sentinels.
//!
//! Nothing here is a shortcut around the real protocol: the replicas sync
//! over TCP with PSYNC as any replica does, and the Sentinels find the
//! replicas in the primary's INFO and each other by hello messages. The
//! start only moves the shared clock (when there are several Sentinels) so
//! the hellos, which go out every 2 s of Sentinel time, need not be waited
//! for in real time.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::local_cluster::{run, start_member, text, wait};
use crate::sentinel::Sentinel;
use crate::{Config, OwnedDir, Server, ServerSet, VirtualClock};

/// The name the Sentinels monitor the primary under unless the builder
/// says otherwise (Redis's examples' name, which clients default to).
pub(crate) const DEFAULT_MASTER_NAME: &str = "mymaster";

/// Longest real-time wait for the links and the Sentinels.
const READY_WAIT: Duration = Duration::from_secs(30);

/// How far the start moves the shared clock at each look while Sentinels
/// still have to hear of one another: half of Sentinel's hello period
/// (2 s), so each look lets a hello go out.
const HELLO_STEP_MS: u64 = 1_000;

/// Real time between two clock steps while Sentinels wait for hellos
/// (a hello has to travel through the primary's pub/sub and back).
const HELLO_POLL: Duration = Duration::from_millis(50);

/// Attempts at free ports before giving up (another process may take a
/// port between the check and the bind).
const PORT_ATTEMPTS: usize = 20;

/// Settings for a replicated set (from [`ServerSet::replicated_builder`]).
#[derive(Debug, Clone)]
pub struct ReplicatedBuilder {
    replicas: usize,
    sentinels: usize,
    /// 0: each member on a free port.
    base_port: u16,
    /// Every server's settings (its port, directory and replication
    /// source are the builder's); the Sentinels have their own file.
    config: Option<Config>,
    clock: Option<Arc<VirtualClock>>,
    master_name: String,
    /// `None`: a majority of the Sentinels.
    quorum: Option<usize>,
    down_after_ms: u64,
    failover_timeout_ms: u64,
    /// Wait for the Sentinels' hellos in real time instead of moving the clock.
    real_time: bool,
}

impl ReplicatedBuilder {
    pub(crate) fn new(replicas: usize, sentinels: usize) -> ReplicatedBuilder {
        ReplicatedBuilder {
            replicas,
            sentinels,
            base_port: 0,
            config: None,
            clock: None,
            master_name: DEFAULT_MASTER_NAME.to_string(),
            quorum: None,
            down_after_ms: crate::sentinel::DEFAULT_DOWN_AFTER_MS,
            failover_timeout_ms: crate::sentinel::DEFAULT_FAILOVER_TIMEOUT_MS,
            real_time: false,
        }
    }

    /// Members on consecutive ports from `port`: the primary, its replicas,
    /// then the Sentinels; 0 (the default) picks free ports.
    pub fn port(mut self, port: u16) -> Self {
        self.base_port = port;
        self
    }

    /// Every server's settings (as `coordis-server` reads them). The port,
    /// `dir` (each server has a temp dir of its own, removed with it) and
    /// `replicaof` are the builder's.
    pub fn config(mut self, config: Config) -> Self {
        self.config = Some(config);
        self
    }

    /// The test clock every server and Sentinel runs on (default: a fresh
    /// one that follows real time until moved).
    pub fn clock(mut self, clock: Arc<VirtualClock>) -> Self {
        self.clock = Some(clock);
        self
    }

    /// The name the Sentinels monitor the primary under (default `mymaster`).
    pub fn master_name(mut self, name: &str) -> Self {
        self.master_name = name.to_string();
        self
    }

    /// How many Sentinels must agree the primary is down (default: a
    /// majority of them).
    pub fn quorum(mut self, quorum: usize) -> Self {
        self.quorum = Some(quorum);
        self
    }

    /// `sentinel down-after-milliseconds` (default Redis's 30000), on the
    /// shared clock.
    pub fn down_after(mut self, ms: u64) -> Self {
        self.down_after_ms = ms;
        self
    }

    /// `sentinel failover-timeout` (default Redis's 180000), on the shared clock.
    pub fn failover_timeout(mut self, ms: u64) -> Self {
        self.failover_timeout_ms = ms;
        self
    }

    /// Waits for the Sentinels to hear of one another in real time (a
    /// hello every 2 s) rather than moving the shared clock.
    pub fn real_time(mut self, real_time: bool) -> Self {
        self.real_time = real_time;
        self
    }

    /// Starts the primary and the replicas, points each replica at the
    /// primary (`REPLICAOF`), starts the Sentinels, and returns once every
    /// replica reports `master_link_status:up` at the primary's offset and
    /// every Sentinel sees the primary, each replica with its link up, and
    /// the other Sentinels. The primary's full syncs start once all
    /// replicas are connected (`repl-diskless-sync-max-replicas` is the
    /// replica count unless the configuration sets it). Any member's error
    /// stops those already started and is returned.
    pub async fn start(self) -> io::Result<ServerSet> {
        let clock = self.clock.clone().unwrap_or_else(|| Arc::new(VirtualClock::real()));
        let mut set = ServerSet {
            servers: Vec::with_capacity(1 + self.replicas),
            cluster: None,
            replicated: None,
        };
        match self.start_members(&mut set, &clock).await {
            Ok(()) => Ok(set),
            Err(e) => {
                set.shutdown().await;
                Err(e)
            }
        }
    }

    async fn start_members(&self, set: &mut ServerSet, clock: &Arc<VirtualClock>) -> io::Result<()> {
        for i in 0..=self.replicas {
            set.servers.push(self.start_server(i, clock).await?);
        }
        let primary = set.servers[0].addr();
        for replica in &set.servers[1..] {
            let reply = run(
                replica,
                &["REPLICAOF", &primary.ip().to_string(), &primary.port().to_string()],
            );
            if let crate::protocol::Reply::Error(e) = reply {
                return Err(io::Error::other(e.into_owned()));
            }
        }
        let deadline = Instant::now() + READY_WAIT;
        wait(deadline, "the replicas did not sync in time", || {
            caught_up(&set.servers)
        })
        .await?;
        let dir = OwnedDir::create()?;
        let mut info = crate::ReplicatedInfo {
            master_name: self.master_name.clone(),
            clock: clock.clone(),
            sentinels: Vec::with_capacity(self.sentinels),
            dir,
        };
        let quorum = self.quorum.unwrap_or(self.sentinels / 2 + 1);
        for i in 0..self.sentinels {
            let conf = info.dir.0.join(format!("sentinel-{i}.conf"));
            std::fs::write(
                &conf,
                format!(
                    "sentinel monitor {name} {ip} {port} {quorum}\n\
                     sentinel down-after-milliseconds {name} {}\n\
                     sentinel failover-timeout {name} {}\n",
                    self.down_after_ms,
                    self.failover_timeout_ms,
                    name = self.master_name,
                    ip = primary.ip(),
                    port = primary.port(),
                ),
            )?;
            let sentinel = self.start_sentinel(i, &conf, clock).await?;
            info.sentinels.push(sentinel);
        }
        let replicas: Vec<SocketAddr> = set.servers[1..].iter().map(Server::addr).collect();
        let sentinels = &info.sentinels;
        let others = self.sentinels.saturating_sub(1);
        let mut last_step = Instant::now();
        wait(deadline, "the Sentinels did not see the set in time", || {
            let seen = sentinels
                .iter()
                .all(|s| s.sees(&self.master_name, primary, &replicas, others));
            if !seen && others > 0 && !self.real_time && last_step.elapsed() >= HELLO_POLL {
                clock.advance_ms(HELLO_STEP_MS);
                last_step = Instant::now();
            }
            seen
        })
        .await?;
        set.replicated = Some(info);
        Ok(())
    }

    /// Member `i`'s port: the builder's consecutive one, or a free one.
    fn port_of(&self, i: usize) -> io::Result<u16> {
        if self.base_port == 0 {
            return Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port());
        }
        u16::try_from(usize::from(self.base_port) + i)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "the set's ports do not fit"))
    }

    fn attempts(&self) -> usize {
        if self.base_port == 0 {
            PORT_ATTEMPTS
        } else {
            1
        }
    }

    async fn start_server(&self, i: usize, clock: &Arc<VirtualClock>) -> io::Result<Server> {
        start_member(
            self.config.as_ref(),
            clock,
            self.attempts(),
            || self.port_of(i),
            |config| {
                config.replica.replicaof.clear();
                // The primary knows how many replicas it gets: their full sync
                // starts once all are connected, rather than after
                // `repl-diskless-sync-delay` (5 s of real time).
                if i == 0 && self.replicas > 0 && config.repl.diskless_sync_max_replicas == 0 {
                    config.repl.diskless_sync_max_replicas = self.replicas as u64;
                }
            },
        )
        .await
    }

    async fn start_sentinel(
        &self,
        i: usize,
        conf: &std::path::Path,
        clock: &Arc<VirtualClock>,
    ) -> io::Result<Sentinel> {
        let mut last = String::new();
        for _ in 0..self.attempts() {
            let port = self.port_of(1 + self.replicas + i)?;
            let args: Vec<String> = vec![
                conf.display().to_string(),
                "--port".into(),
                port.to_string(),
                "--bind".into(),
                "127.0.0.1".into(),
            ];
            match Sentinel::start_with_clock(&args, clock.clone()).await {
                Ok(s) => return Ok(s),
                Err(e) => last = e,
            }
        }
        Err(io::Error::new(io::ErrorKind::AddrInUse, last))
    }
}

/// Every replica's link is up at the primary's offset, and the primary
/// counts each one online.
fn caught_up(servers: &[Server]) -> bool {
    let primary = text(&run(&servers[0], &["INFO", "replication"]));
    let Some(offset) = field(&primary, "master_repl_offset") else {
        return false;
    };
    let online = primary.matches("state=online").count();
    online == servers.len() - 1
        && servers[1..].iter().all(|s| {
            let info = text(&run(s, &["INFO", "replication"]));
            info.contains("master_link_status:up") && field(&info, "slave_repl_offset") == Some(offset)
        })
}

/// An INFO field's value.
fn field<'a>(info: &'a str, name: &str) -> Option<&'a str> {
    info.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .map(str::trim)
}
