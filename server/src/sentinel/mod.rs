//! Sentinel mode (`coordis-server sentinel.conf --sentinel`): a process
//! that watches Redis (or coordis) primaries and their replicas, agrees
//! with other Sentinels that a primary is down, and fails over to a
//! replica, speaking the Sentinel interface clients and operators use.
//!
//! Owns: the Sentinel's listener and its command table (`commands`),
//! the monitoring state and failover state machine (`state`), the links
//! to the watched instances (`link`), and the config file Sentinel
//! reads and rewrites (`config`). Nothing here touches a keyspace: a
//! Sentinel has none, as Redis's has none.
//!
//! # Time
//!
//! Every timer (PING and INFO periods, down-after-milliseconds,
//! failover-timeout, the election timeout) reads the Sentinel's clock. The
//! timer runs every `TICK` (100 ms) of real time and again at once whenever a test
//! clock moves: advancing it past down-after-milliseconds marks the master
//! SDOWN (and, with quorum, ODOWN and the failover's first steps) within
//! the tick that follows the move. Steps that wait for an instance's reply
//! (the promoted replica's INFO saying `role:master`, the other replicas'
//! INFO saying their link is up) need those replies, and the INFO polls
//! fall due on the clock too: a test steps the clock (a second at a time)
//! and awaits the `+switch-master` event on the Sentinel's pub/sub rather
//! than assuming the failover ended when the advance returned. TILT mode
//! (Redis's guard against a jumping system clock) is left out: a test
//! clock's jumps would set it off.

mod commands;
mod config;
mod link;
mod state;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::broadcast;

use crate::store::{Clock, SystemClock};
use state::State;
pub(crate) use state::{DEFAULT_DOWN_AFTER_MS, DEFAULT_FAILOVER_TIMEOUT_MS};

/// The channel Sentinels announce themselves on.
pub(crate) const HELLO_CHANNEL: &str = "__sentinel__:hello";

/// How often the timer runs in real time (Redis runs `sentinelTimer` at
/// its `hz`, 10 by default).
const TICK: Duration = Duration::from_millis(100);

/// How many events a slow subscriber may fall behind before it misses some.
const EVENT_BACKLOG: usize = 4096;

/// The periods SENTINEL DEBUG shows and sets, in ms (Redis's defaults).
#[derive(Clone, Debug)]
pub(crate) struct Periods {
    pub(crate) info: u64,
    pub(crate) ping: u64,
    pub(crate) ask: u64,
    pub(crate) publish: u64,
    pub(crate) default_down_after: u64,
    pub(crate) default_failover_timeout: u64,
    pub(crate) tilt_trigger: u64,
    pub(crate) tilt_period: u64,
    pub(crate) slave_reconf_timeout: u64,
    pub(crate) min_link_reconnect: u64,
    pub(crate) election_timeout: u64,
    pub(crate) script_max_runtime: u64,
    pub(crate) script_retry_delay: u64,
}

impl Default for Periods {
    fn default() -> Periods {
        Periods {
            info: 10_000,
            ping: 1000,
            ask: 1000,
            publish: 2000,
            default_down_after: state::DEFAULT_DOWN_AFTER_MS,
            default_failover_timeout: state::DEFAULT_FAILOVER_TIMEOUT_MS,
            tilt_trigger: 2000,
            tilt_period: 30_000,
            slave_reconf_timeout: 10_000,
            min_link_reconnect: 15_000,
            election_timeout: 10_000,
            script_max_runtime: 60_000,
            script_retry_delay: 30_000,
        }
    }
}

/// What the listener, the timer and the link tasks share.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) state: Mutex<State>,
    pub(crate) clock: Arc<dyn Clock>,
    /// Events (`+sdown`, `+switch-master`, ...) for subscribed clients.
    pub(crate) events: broadcast::Sender<(String, String)>,
    pub(crate) config_path: PathBuf,
    pub(crate) other_lines: Vec<String>,
    pub(crate) requirepass: Option<String>,
    pub(crate) run_id: String,
    pub(crate) started_ms: u64,
    pub(crate) port: u16,
    pub(crate) counters: commands::Counters,
    /// Ends the listener (SHUTDOWN, or the embedding's stop).
    pub(crate) shutdown: tokio::sync::watch::Sender<bool>,
}

impl Shared {
    pub(crate) fn now(&self) -> u64 {
        self.clock.now_ms()
    }

    /// Runs `f` under the state lock, then publishes its events and writes
    /// the config file if it changed what the file records.
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut State, u64) -> R) -> R {
        let now = self.now();
        let mut st = self.state.lock();
        let r = f(&mut st, now);
        self.flush(&mut st);
        r
    }

    fn flush(&self, st: &mut State) {
        for (kind, msg) in st.g.events.drain(..) {
            let _ = self.events.send((kind, msg));
        }
        if st.g.dirty {
            st.g.dirty = false;
            if let Err(e) = self.save(st) {
                tracing::warn!("could not rewrite the Sentinel config file: {e}");
            }
        }
    }

    /// Writes the config file now (SENTINEL FLUSHCONFIG and friends).
    pub(crate) fn save(&self, st: &State) -> std::io::Result<()> {
        config::write(&self.config_path, &config::render(&self.other_lines, st))
    }

    pub(crate) fn link_event(&self, target: &link::Target, kind: link::Kind, gen: u64, event: link::Event) {
        self.with(|st, now| st.link_event(target, kind, gen, event, now));
    }

    pub(crate) fn pubsub_activity(&self, target: &link::Target, gen: u64) {
        let now = self.now();
        self.state.lock().pubsub_activity(target, gen, now);
    }
}

/// A running Sentinel: its address, and a way to stop it.
#[derive(Debug)]
pub struct Sentinel {
    shared: Arc<Shared>,
    addr: SocketAddr,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Sentinel {
    /// Starts a Sentinel from redis-server's arguments in sentinel mode
    /// (`sentinel.conf [--port N ...]`, without `--sentinel`): the file
    /// must exist and be writable, as Redis requires. Port 0 picks a free
    /// port. Timers read the system clock.
    pub async fn start(args: &[String]) -> Result<Sentinel, String> {
        Sentinel::start_with_clock(args, Arc::new(SystemClock)).await
    }

    /// [`Sentinel::start`] with its timers on `clock` (a
    /// [`crate::VirtualClock`] in tests).
    pub async fn start_with_clock(args: &[String], clock: Arc<dyn Clock>) -> Result<Sentinel, String> {
        let now = clock.now_ms();
        let g = state::Globals::new();
        let loaded = config::load(args, g, now)?;
        let bind = if loaded.bind.is_empty() {
            vec!["0.0.0.0".to_string()]
        } else {
            loaded.bind.clone()
        };
        let listener = tokio::net::TcpListener::bind((bind[0].trim_start_matches('-'), loaded.port))
            .await
            .map_err(|e| {
                format!(
                    "Could not create server TCP listening socket {}:{}: {e}",
                    bind[0], loaded.port
                )
            })?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        let mut st = loaded.state;
        st.g.port = addr.port();
        let fresh_id = st.g.myid.is_empty();
        if fresh_id {
            st.g.myid = random_hex40();
        }
        let (events, _) = broadcast::channel(EVENT_BACKLOG);
        let shared = Arc::new(Shared {
            state: Mutex::new(st),
            clock,
            events,
            config_path: loaded.path,
            other_lines: loaded.other_lines,
            requirepass: loaded.requirepass,
            run_id: random_hex40(),
            started_ms: now,
            port: addr.port(),
            counters: commands::Counters::default(),
            shutdown: tokio::sync::watch::Sender::new(false),
        });
        {
            let mut st = shared.state.lock();
            state::set_shared(&mut st, &shared);
            tracing::warn!("Sentinel ID is {}", st.g.myid);
            let monitors: Vec<String> = st
                .masters
                .values()
                .map(|m| {
                    format!(
                        "master {} {} {} quorum {}",
                        m.inst.name, m.inst.host, m.inst.port, m.quorum
                    )
                })
                .collect();
            for m in monitors {
                st.event("+monitor", m);
            }
            st.g.dirty = true;
            shared.flush(&mut st);
        }
        let task = tokio::spawn(run(shared.clone(), listener));
        Ok(Sentinel {
            shared,
            addr,
            task: Some(task),
        })
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// This Sentinel's id (SENTINEL MYID).
    pub fn myid(&self) -> String {
        self.shared.state.lock().g.myid.clone()
    }

    /// Whether this Sentinel watches `name` at `primary` over a live link
    /// with an INFO reply in hand, knows each of `replicas` with its link
    /// to the primary up (as SENTINEL REPLICAS says `master-link-status:ok`),
    /// and knows at least `others` other Sentinels: what a failover needs.
    pub(crate) fn sees(&self, name: &str, primary: SocketAddr, replicas: &[SocketAddr], others: usize) -> bool {
        let st = self.shared.state.lock();
        let Some(m) = st.masters.get(name) else {
            return false;
        };
        let live = |i: &state::Instance| !i.link.disconnected && i.info.is_some();
        m.inst.host == primary.ip().to_string()
            && m.inst.port == primary.port()
            && live(&m.inst)
            && m.sentinels.len() >= others
            && replicas.iter().all(|r| {
                m.replicas
                    .values()
                    .any(|i| i.host == r.ip().to_string() && i.port == r.port() && live(i) && i.master_link_up)
            })
    }

    /// Waits until SHUTDOWN (or [`Sentinel::shutdown`]) ends it.
    pub async fn wait(mut self) {
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }

    /// Stops it: the listener closes, the links end.
    pub async fn shutdown(mut self) {
        self.shared.shutdown.send_replace(true);
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }

    /// A handle that stops the Sentinel from elsewhere (a signal).
    pub fn stopper(&self) -> impl Fn() + Send + Sync + 'static {
        let shared = self.shared.clone();
        move || {
            shared.shutdown.send_replace(true);
        }
    }
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        self.shared.shutdown.send_replace(true);
    }
}

/// The listener and the timer, until shutdown; then the links are dropped.
async fn run(shared: Arc<Shared>, listener: tokio::net::TcpListener) {
    let mut stop = shared.shutdown.subscribe();
    let timer = tokio::spawn(timer(shared.clone()));
    loop {
        tokio::select! {
            _ = until_stopped(&mut stop) => break,
            accepted = listener.accept() => {
                if let Ok((stream, peer)) = accepted {
                    tokio::spawn(commands::serve(shared.clone(), stream, peer));
                }
            }
        }
    }
    timer.abort();
    let _ = timer.await;
    // Dropping the handles ends every link task.
    let mut st = shared.state.lock();
    for m in st.masters.values_mut() {
        m.inst.link = Default::default();
        for i in m.replicas.values_mut().chain(m.sentinels.values_mut()) {
            i.link = Default::default();
        }
    }
}

async fn timer(shared: Arc<Shared>) {
    let mut moved = shared.clock.moved();
    loop {
        shared.with(|st, now| st.tick(now));
        match &mut moved {
            Some(rx) => {
                tokio::select! {
                    _ = tokio::time::sleep(TICK) => {}
                    _ = rx.changed() => {}
                }
            }
            None => tokio::time::sleep(TICK).await,
        }
    }
}

/// Resolves once the Sentinel is told to stop.
pub(crate) async fn until_stopped(rx: &mut tokio::sync::watch::Receiver<bool>) {
    loop {
        if *rx.borrow_and_update() {
            return;
        }
        if rx.changed().await.is_err() {
            return;
        }
    }
}

fn random_hex40() -> String {
    (0..40)
        .map(|_| std::char::from_digit(fastrand::u32(..16), 16).unwrap_or('0'))
        .collect()
}
