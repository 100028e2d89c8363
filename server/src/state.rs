//! Server-wide state: what the handlers may read or change besides the
//! keyspace ([`ServerState`], behind the engine lock), the settings and
//! signals connection tasks read without the lock ([`Shared`]), and INFO's
//! counters ([`Stats`], [`Rates`]).
//!
//! Nothing here runs commands or performs I/O.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use crate::cmd;
use crate::config::Config;
use crate::lua::ScriptState;
use crate::net::clients::Clients;
use crate::store::Clock;

/// Server counters reported by INFO.
#[derive(Debug, Default, Clone)]
pub struct Stats {
    pub total_connections_received: u64,
    /// Error replies to the primary's stream or the append-only file's
    /// commands (INFO `unexpected_error_replies`): this server's data
    /// differs from where the commands came from.
    pub unexpected_error_replies: u64,
    pub total_commands_processed: u64,
    pub keyspace_hits: u64,
    pub keyspace_misses: u64,
    pub rejected_connections: u64,
    /// Active-expiry cycles that stopped at their time limit with keys
    /// still due (INFO `expired_time_cap_reached_count`): how often the
    /// cycles of `active-expire-effort` fell behind.
    pub expired_time_cap_reached_count: u64,
    /// Microseconds the active-expiry cycles worked (INFO
    /// `expire_cycle_cpu_milliseconds`, in ms).
    pub expire_cycle_us: u64,
}

/// Samples a rate keeps, as Redis's `STATS_METRIC_SAMPLES`.
const RATE_SAMPLES: usize = 16;

/// INFO's instantaneous rates (ops/sec, input and output bytes/sec): the
/// average of the last samples, each the change of a counter over the real
/// time since the one before (Redis's `trackInstantaneousMetric`).
#[derive(Debug, Default)]
pub struct Rates {
    last: Option<(std::time::Instant, [u64; 3])>,
    samples: std::collections::VecDeque<[f64; 3]>,
}

impl Rates {
    /// Takes a sample of `[commands, bytes in, bytes out]` so far.
    pub fn sample(&mut self, totals: [u64; 3]) {
        let now = std::time::Instant::now();
        if let Some((at, before)) = self.last {
            let secs = now.duration_since(at).as_secs_f64();
            if secs > 0.0 {
                let rate = |i: usize| totals[i].saturating_sub(before[i]) as f64 / secs;
                self.samples.push_back([rate(0), rate(1), rate(2)]);
                if self.samples.len() > RATE_SAMPLES {
                    self.samples.pop_front();
                }
            }
        }
        self.last = Some((now, totals));
    }

    /// The average per second of `[commands, bytes in, bytes out]`.
    pub fn per_second(&self) -> [f64; 3] {
        let n = self.samples.len().max(1) as f64;
        let mut sum = [0.0; 3];
        for s in &self.samples {
            for i in 0..3 {
                sum[i] += s[i];
            }
        }
        sum.map(|v| v / n)
    }
}

/// Settings and counters the connection tasks read without asking the
/// engine lock (the engine updates them when CONFIG SET changes a setting).
#[derive(Debug, Default)]
pub struct Shared {
    /// The engine, for the threads that take its lock by themselves (a
    /// background save's walk); set once when the server starts. Weak: the
    /// engine owns this.
    pub(crate) engine: std::sync::OnceLock<std::sync::Weak<parking_lot::Mutex<crate::engine::Engine>>>,
    /// What the append-only file's writer has made durable: under
    /// `appendfsync always` replies wait for it (outside the engine lock).
    pub(crate) aof: Arc<crate::persist::aof::Durability>,
    /// SHUTDOWN NOSAVE came while a script was busy (answered outside the
    /// engine): the stop makes no final save.
    pub(crate) shutdown_nosave: AtomicBool,
    /// "User requested shutdown..." was logged for the shutdown under way,
    /// when its final save was decided ([`crate::supervised`]).
    pub(crate) shutdown_announced: AtomicBool,
    pub maxclients: AtomicUsize,
    pub proto_max_bulk_len: AtomicUsize,
    pub proto_max_multibulk_len: AtomicUsize,
    pub client_query_buffer_limit: AtomicUsize,
    /// `maxmemory-clients` is set: a connection whose query buffer grew
    /// without a complete request has the engine check client eviction.
    pub(crate) client_eviction: AtomicBool,
    pub protected_mode: AtomicBool,
    /// The default user needs a password (or is off): new clients start
    /// unauthenticated ([`ServerState::sync_auth`]).
    pub auth_required: AtomicBool,
    pub tcp_keepalive: AtomicU64,
    /// Connections currently open.
    pub connected: AtomicUsize,
    /// The last client id handed out: connections and the primary's
    /// client on a replica draw from it, so ids never repeat.
    pub(crate) client_ids: AtomicU64,
    /// Connections refused at maxclients.
    pub rejected: AtomicU64,
    /// Bytes read from and written to clients, and the reads and writes
    /// (INFO `total_net_input_bytes`, `total_reads_processed`, ...).
    pub net_input_bytes: AtomicU64,
    pub net_output_bytes: AtomicU64,
    pub reads_processed: AtomicU64,
    pub writes_processed: AtomicU64,
    /// The running script's start, kill flag and busy threshold.
    pub script: Arc<ScriptState>,
    /// Wakes the server's timer task when a client blocks with a deadline
    /// earlier than any before ([`crate::blocked`]).
    pub block_timer: tokio::sync::Notify,
    /// A stop-the-world pause from the test-control plane
    /// ([`crate::Server::pause`]): no connection runs a batch, nothing
    /// expires and no waiter times out until it is lifted. Clients see only
    /// silence, as from a server stopped by the OS.
    pub frozen: AtomicBool,
    /// Wakes what waits for the pause to be lifted.
    pub thawed: tokio::sync::Notify,
    /// "The server is down" ([`crate::ServerControl::set_down`]): new
    /// connections are reset at once (existing ones were dropped).
    pub down: AtomicBool,
    /// Who may run the protected commands, for answers while a script is
    /// busy (set once when the engine starts: the settings are immutable).
    guards: parking_lot::Mutex<crate::exec::Guards>,
    /// The function an FCALL runs, set while it runs (FUNCTION STATS asked
    /// while it is busy is answered from this).
    pub(crate) running_function: parking_lot::Mutex<Option<cmd::functions::RunningFunction>>,
    /// Wakes the replica link's task when REPLICAOF changes the primary
    /// ([`crate::replica::link`]).
    pub(crate) replica_changed: tokio::sync::Notify,
    /// The listening sockets, which CONFIG SET `port` / `bind` rebinds.
    pub(crate) listeners: crate::net::listeners::Listeners,
    /// The RDB file being loaded at start (clients get `-LOADING`).
    pub(crate) loading: crate::persist::loading::Loading,
    /// The TLS configuration new TLS connections handshake with, and
    /// `tls-auth-clients` (CONFIG SET replaces both).
    pub(crate) tls: crate::net::tls::TlsState,
}

impl Shared {
    /// Whether the server plays down.
    pub fn is_down(&self) -> bool {
        self.down.load(Ordering::Acquire)
    }

    /// Whether a stop-the-world pause is in force.
    pub fn is_frozen(&self) -> bool {
        self.frozen.load(Ordering::Acquire)
    }

    /// Starts or lifts the stop-the-world pause.
    pub fn set_frozen(&self, frozen: bool) {
        self.frozen.store(frozen, Ordering::Release);
        if !frozen {
            self.thawed.notify_waiters();
            self.block_timer.notify_one();
        }
    }

    /// Resolves once no stop-the-world pause is in force.
    pub async fn until_thawed(&self) {
        loop {
            let thawed = self.thawed.notified();
            tokio::pin!(thawed);
            thawed.as_mut().enable();
            if !self.is_frozen() {
                return;
            }
            thawed.await;
        }
    }
}

impl Shared {
    pub(crate) fn set_guards(&self, guards: crate::exec::Guards) {
        *self.guards.lock() = guards;
    }

    pub(crate) fn guards(&self) -> crate::exec::Guards {
        *self.guards.lock()
    }

    pub fn publish(&self, config: &Config) {
        self.maxclients.store(config.maxclients, Ordering::Relaxed);
        self.proto_max_bulk_len
            .store(config.proto_max_bulk_len, Ordering::Relaxed);
        self.proto_max_multibulk_len
            .store(config.proto_max_multibulk_len, Ordering::Relaxed);
        self.client_query_buffer_limit
            .store(config.client_query_buffer_limit, Ordering::Relaxed);
        self.protected_mode.store(config.protected_mode, Ordering::Relaxed);
        self.tcp_keepalive.store(config.tcp_keepalive, Ordering::Relaxed);
        self.script
            .busy_after_ms
            .store(config.busy_reply_threshold, Ordering::Relaxed);
    }
}

/// Server-wide state the command handlers may read or change.
#[derive(Debug)]
pub struct ServerState {
    pub config: Config,
    pub clock: Arc<dyn Clock>,
    pub stats: Stats,
    /// Every connected client; the one whose batch is running is taken out
    /// while it runs (see [`Clients`]).
    pub clients: Clients,
    /// Start time, unix ms (uptime, LASTSAVE).
    pub started_ms: u64,
    /// Random 40-hex-digit id of this server instance (INFO run_id).
    pub run_id: String,
    /// The port actually bound (INFO tcp_port; differs from config for port 0).
    pub port: u16,
    /// Pub/sub subscriptions.
    pub pubsub: cmd::pubsub::PubSub,
    /// Client-side caching: the tracking table and BCAST prefixes.
    pub tracking: crate::tracking::Tracking,
    /// Per-command and per-error counters and the slow log.
    pub observe: cmd::observe::Observe,
    /// INFO's instantaneous rates, sampled by the expiry task.
    pub rates: Rates,
    /// INFO memory: allocated bytes when the server started
    /// (`used_memory_startup`) and the most seen since (`used_memory_peak`,
    /// noted whenever INFO or MEMORY reads the allocator: not on a timer,
    /// because reading glibc's figures walks its free lists under its
    /// locks).
    pub memory_startup: u64,
    pub memory_peak: u64,
    /// This server's handle on the lazy-free thread (its INFO counters);
    /// every database holds a clone.
    pub(crate) lazyfree: crate::lazyfree::LazyFree,
    /// The replica side: the link to a primary, the history's IDs and
    /// offset ([`crate::replica`]).
    pub(crate) replica: crate::replica::ReplicaState,
    /// Replication: IDs, offset, backlog, replicas ([`crate::repl`]).
    pub(crate) repl: crate::repl::Replication,
    /// Clients in MONITOR mode, in the order they asked.
    pub monitors: Vec<u64>,
    /// Blocked clients' timeouts and count (their queues are per database).
    pub blocking: crate::blocked::Blocking,
    /// Fault rules of the test-control plane ([`crate::faults`]).
    pub faults: crate::faults::Faults,
    /// Set by a test (`COORDIS.SERVER SEED`, `ServerControl::seed_random`):
    /// the state of the generator every random choice draws from (SPOP,
    /// SRANDMEMBER, ZRANDMEMBER, HRANDFIELD, RANDOMKEY, eviction's
    /// sampling), carried from batch to batch, and through the test
    /// controls' commands, so that a run replays whichever thread serves it. `None`
    /// (the default): the thread's own generator, unseeded.
    pub random: Option<u64>,
    /// `DEBUG SET-ACTIVE-EXPIRE 0` turns active expiry off (lazy expiry
    /// goes on), as Redis's tests do.
    pub active_expire: bool,
    /// `DEBUG PAUSE-CRON 1` stops the periodic tick (Redis's `serverCron`):
    /// slow active-expiry cycles, idle-client timeouts, the clients',
    /// tracking, persistence, replication and cluster crons, the rates'
    /// sampling, and the same work a test clock's move would do. What
    /// Redis runs outside its cron goes on: blocked clients' timeouts,
    /// fast expiry cycles already under way, lazy expiry.
    pub(crate) pause_cron: bool,
    /// `DEBUG SET-DISABLE-DENY-SCRIPTS 1` lets scripts call the commands
    /// flagged `noscript` (Redis's `script_disable_deny_script`), which
    /// Redis's tests use to reach DEBUG and CLIENT from a script.
    pub(crate) disable_deny_scripts: bool,
    /// Over `maxmemory` with nothing left to evict when the running client
    /// command was admitted (Redis's `pre_command_oom_state`): a script's
    /// first write is refused then.
    pub(crate) oom_at_start: bool,
    /// The eviction pool and counters ([`crate::evict`]).
    pub(crate) evictor: crate::evict::Evictor,
    /// The normal and pub/sub output limits and `maxmemory-clients`, read
    /// from `config` at start and at each change of them.
    pub(crate) client_limits: crate::net::client_mem::ClientLimits,
    /// INFO's `client_recent_max_*_buffer`, sampled by the clients' cron.
    pub(crate) client_peaks: crate::net::client_mem::RecentPeaks,
    /// Clients closed by `maxmemory-clients` (INFO `evicted_clients`).
    pub(crate) evicted_clients: u64,
    /// The normal and pub/sub clients' memory as last measured: the sum
    /// of their `last_mem`, kept up to date for the running client at each
    /// batch's end and recounted by each eviction check, so a batch need
    /// not measure every client to know whether eviction must look.
    pub(crate) clients_mem: u64,
    /// Set by SHUTDOWN; the engine then triggers the server's shutdown.
    pub shutdown_requested: bool,
    /// A shutdown waiting for lagging replicas ([`crate::shutdown`]).
    pub(crate) shutdown_pending: Option<crate::shutdown::Pending>,
    /// A signal's shutdown made its final save (Some(true)) or was told
    /// not to save (Some(false)). Unlike SHUTDOWN it leaves the requests in
    /// flight to be answered in the drain; the stop then saves again only
    /// if the drain wrote something after that save.
    pub(crate) signal_saved: Option<bool>,
    /// Changes to the dataset since the last save (Redis's `server.dirty`:
    /// INFO `rdb_changes_since_last_save`); raised by handlers through
    /// [`Ctx::dirty`], read around each call by [`crate::exec::call`].
    pub dirty: u64,
    /// LASTSAVE: unix seconds of the last successful save (the start
    /// time until one), as Redis's `lastsave`.
    pub last_save_secs: u64,
    /// `dirty` at the last save: INFO's `rdb_changes_since_last_save` is
    /// the difference (`dirty` itself only grows: calls measure deltas).
    pub dirty_at_save: u64,
    /// When the RDB file was saved and how it went ([`crate::persist::saves`]).
    pub(crate) saves: crate::persist::saves::Saves,
    /// The effects being recorded for the feed's readers ([`crate::exec::feed`]).
    pub(crate) effects: crate::exec::feed::Effects,
    /// The append-only file: its manifest, sizes and rewrite statistics.
    pub(crate) aof: crate::persist::aof::Aof,
    /// BGSAVE's state and statistics.
    pub(crate) bgsave: crate::persist::snapshot::BgSave,
    /// Who may run the protected commands (fixed at start: the settings
    /// are immutable, as Redis's).
    pub guards: crate::exec::Guards,
    /// ACL users and the ACL log.
    pub(crate) acl: crate::acl::Acl,
    /// This node's view of the cluster, in cluster mode (`cluster-enabled`).
    pub(crate) cluster: Option<Box<crate::cluster::Cluster>>,
    /// MIGRATE's connections to its targets, kept for the next MIGRATE.
    pub(crate) migrate_sockets: crate::cmd::migrate::Sockets,
    pub shared: Arc<Shared>,
}

/// Clients per timer tick beyond which `dynamic-hz` doubles the
/// frequency (Redis's `MAX_CLIENTS_PER_CLOCK_TICK`).
const CLIENTS_PER_TICK: usize = 200;

/// The highest frequency `dynamic-hz` reaches (Redis's `CONFIG_MAX_HZ`).
const MAX_HZ: u32 = 500;

impl ServerState {
    /// The timer's frequency now (INFO's `hz`; `configured_hz` is
    /// `hz`'s): with `dynamic-hz`, `hz` doubled until the clients are at
    /// most 200 per tick, up to 500, as Redis's `serverCron` adapts it.
    pub(crate) fn hz(&self) -> u32 {
        let mut hz = self.config.hz.max(1);
        if self.config.dynamic_hz {
            let clients = self.clients.len();
            while clients / hz as usize > CLIENTS_PER_TICK {
                hz *= 2;
                if hz > MAX_HZ {
                    return MAX_HZ;
                }
            }
        }
        hz
    }

    /// Sends the effects of the batch to their readers (the end of every
    /// engine batch); the append-only file's write, when the engine made
    /// one, is a latency event as Redis's `flushAppendOnlyFile` records it.
    pub(crate) fn flush_effects(&mut self) {
        if let Some(wrote) = self.effects.flush() {
            let now_ms = self.clock.now_ms();
            crate::cmd::observe::latency_event(self, wrote.event, now_ms, wrote.ms);
            crate::cmd::observe::latency_event(self, "aof-write", now_ms, wrote.ms);
        }
    }

    /// Tells the connections whether new clients start authenticated,
    /// after the default user changed.
    pub(crate) fn sync_auth(&self) {
        self.shared
            .auth_required
            .store(!self.acl.default_open(), Ordering::Relaxed);
    }

    /// The allocator's figures now, noted for `used_memory_peak` (costs a
    /// walk of the allocator's free lists: for INFO and MEMORY only).
    pub fn note_memory(&mut self) -> crate::process::Allocator {
        let now = crate::process::allocator();
        self.memory_peak = self.memory_peak.max(now.allocated);
        now
    }

    /// Before commands run on this thread: the thread's generator takes
    /// up the seeded state ([`ServerState::random`]), if a test set one.
    pub(crate) fn resume_random(&self) {
        if let Some(state) = self.random {
            fastrand::seed(state);
        }
    }

    /// After they ran: the seeded state is carried on from where the
    /// thread's generator left it ([`ServerState::resume_random`]).
    pub(crate) fn keep_random(&mut self) {
        if self.random.is_some() {
            self.random = Some(fastrand::get_seed());
        }
    }
}
