//! The engine: the keyspace plus server state, and the code that runs a
//! batch of commands against them.
//!
//! The server keeps one `Mutex<Engine>`. A connection task parses every
//! request of a read, takes the lock once, runs the whole batch with
//! [`Engine::run_batch`] (which encodes the replies into the connection's
//! output buffer), drops the lock and writes. A background task calls
//! [`Engine::active_expire_step`] in bounded steps. See [`crate::store`] for
//! why coordis is shaped this way.
//!
//! Nothing here performs I/O or awaits; the lock is never held across an
//! `.await`.

use std::collections::HashMap;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};

use crate::clients::{ClientState, CloseSignal};
use crate::cmd::busy::{ClientView, TxChange};
use crate::cmd::{self, Ctx};
use crate::config::Config;
use crate::errors;
use crate::lua::{ScriptState, Scripting};
use crate::protocol::Reply;
use crate::store::{Clock, Db};

/// Keys active expiry may remove in one lock hold before it lets commands
/// run again: bounds the latency a mass expiry adds to any command.
pub const EXPIRE_STEP_KEYS: usize = 500;

/// Server counters reported by INFO.
#[derive(Debug, Default, Clone)]
pub struct Stats {
    pub total_connections_received: u64,
    pub total_commands_processed: u64,
    pub total_error_replies: u64,
    pub keyspace_hits: u64,
    pub keyspace_misses: u64,
    pub rejected_connections: u64,
}

/// Settings and counters the connection tasks read without asking the
/// engine lock (the engine updates them when CONFIG SET changes a setting).
#[derive(Debug, Default)]
pub struct Shared {
    pub maxclients: AtomicUsize,
    pub timeout_secs: AtomicU64,
    pub proto_max_bulk_len: AtomicUsize,
    pub proto_max_multibulk_len: AtomicUsize,
    pub client_query_buffer_limit: AtomicUsize,
    pub protected_mode: AtomicBool,
    /// `requirepass` is set: new clients start unauthenticated.
    pub auth_required: AtomicBool,
    pub tcp_keepalive: AtomicU64,
    /// Connections currently open.
    pub connected: AtomicUsize,
    /// Connections refused at maxclients.
    pub rejected: AtomicU64,
    /// The running script's start, kill flag and busy threshold.
    pub script: Arc<ScriptState>,
}

impl Shared {
    pub fn publish(&self, config: &Config) {
        self.maxclients.store(config.maxclients, Ordering::Relaxed);
        self.timeout_secs.store(config.timeout, Ordering::Relaxed);
        self.proto_max_bulk_len
            .store(config.proto_max_bulk_len, Ordering::Relaxed);
        self.proto_max_multibulk_len
            .store(config.proto_max_multibulk_len, Ordering::Relaxed);
        self.client_query_buffer_limit
            .store(config.client_query_buffer_limit, Ordering::Relaxed);
        self.protected_mode.store(config.protected_mode, Ordering::Relaxed);
        self.auth_required
            .store(config.requirepass.is_some(), Ordering::Relaxed);
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
    /// Every connected client except the one whose batch is running. Each
    /// batch takes its client out and puts it back, so these two lookups run
    /// for every request: foldhash rather than SipHash, and boxed so that
    /// they move a pointer rather than the whole state.
    pub clients: HashMap<u64, Box<ClientState>, foldhash::fast::RandomState>,
    /// Start time, unix ms (uptime, LASTSAVE).
    pub started_ms: u64,
    /// Random 40-hex-digit id of this server instance (INFO run_id).
    pub run_id: String,
    /// The port actually bound (INFO tcp_port; differs from config for port 0).
    pub port: u16,
    /// Pub/sub subscriptions.
    pub pubsub: cmd::pubsub::PubSub,
    /// Set by SHUTDOWN; the engine then triggers the server's shutdown.
    pub shutdown_requested: bool,
    pub shared: Arc<Shared>,
}

/// How a batch left the connection (its replies are in the output buffer).
#[derive(Debug)]
pub struct BatchEnd {
    /// Close the connection after writing the replies (QUIT, CLIENT KILL, protocol error).
    pub close: bool,
    /// The client after the batch (the parsing limits depend on whether it
    /// is authenticated; busy answers on the rest); `None` when the batch did
    /// not reach the engine.
    pub view: Option<ClientView>,
}

/// The keyspace and server state. Shared as `Mutex<Engine>`; every method
/// runs with the lock held and returns quickly.
pub struct Engine {
    dbs: Vec<Db>,
    state: ServerState,
    scripting: Scripting,
    /// Triggered when a client runs SHUTDOWN.
    server_shutdown: Arc<CloseSignal>,
}

impl Engine {
    pub fn new(
        config: Config,
        clock: Arc<dyn Clock>,
        port: u16,
        shared: Arc<Shared>,
        server_shutdown: Arc<CloseSignal>,
    ) -> Engine {
        shared.publish(&config);
        let run_id: String = (0..40)
            .map(|_| std::char::from_digit(fastrand::u32(..16), 16).unwrap_or('0'))
            .collect();
        let started_ms = clock.now_ms();
        let log_expired = expired_events_enabled(config.notify_keyspace_events);
        let scripting = Scripting::new(config.lua_memory_limit, shared.script.clone()).expect("create the Lua VM");
        Engine {
            dbs: (0..config.databases)
                .map(|_| {
                    let mut db = Db::default();
                    db.log_expired = log_expired;
                    db
                })
                .collect(),
            scripting,
            state: ServerState {
                config,
                clock,
                stats: Stats::default(),
                clients: HashMap::default(),
                started_ms,
                run_id,
                port,
                pubsub: Default::default(),
                shutdown_requested: false,
                shared,
            },
            server_shutdown,
        }
    }

    /// Time between active-expiry cycles (1000 / hz ms).
    pub fn expire_interval(&self) -> Duration {
        Duration::from_millis(1000 / self.state.config.hz.max(1) as u64)
    }

    /// Removes up to [`EXPIRE_STEP_KEYS`] due keys; true if more are due.
    pub fn active_expire_step(&mut self) -> bool {
        let now = self.state.clock.now_ms();
        let mut budget = EXPIRE_STEP_KEYS;
        for db in &mut self.dbs {
            budget -= db.expire_step(now, budget);
            if budget == 0 {
                break;
            }
        }
        let flags = self.state.config.notify_keyspace_events;
        if flags != 0 {
            cmd::pubsub::publish_expired(&mut self.dbs, &self.state, None, flags, now);
        }
        budget == 0
    }

    /// Registers a new connection (before any of its batches).
    pub fn connect(&mut self, mut client: ClientState) {
        self.state.stats.total_connections_received += 1;
        client.authenticated = self.state.config.requirepass.is_none();
        self.state.clients.insert(client.id, Box::new(client));
    }

    pub fn disconnect(&mut self, id: u64) {
        if let Some(mut client) = self.state.clients.remove(&id) {
            cmd::tx::unwatch_all(&mut self.dbs, &mut client);
            self.state.pubsub.forget(&mut client);
        }
    }

    /// Runs requests from the front of `requests` until they are all done or
    /// the encoded replies reach `max_output` bytes; the rest stay queued for
    /// the next call, after the connection has written these replies. That
    /// bound is the backpressure for clients that pipeline without reading:
    /// a connection never holds more than about one chunk of replies.
    /// `protocol_error` is answered (and the connection closed) once every
    /// request before it has run. `busy_changes` (what the client's answers
    /// while a script was busy changed) are applied first. Replies are appended to `out`, which the
    /// connection reuses from batch to batch.
    pub fn run_batch(
        &mut self,
        id: u64,
        busy_changes: Vec<TxChange>,
        requests: &mut VecDeque<Vec<Bytes>>,
        protocol_error: &mut Option<String>,
        max_output: usize,
        out: &mut BytesMut,
    ) -> BatchEnd {
        let closed = BatchEnd {
            close: true,
            view: None,
        };
        let Some(mut client) = self.state.clients.remove(&id) else {
            return closed;
        };
        if client.signal.is_closed() {
            // Killed (CLIENT KILL) while this batch was on its way: no more replies.
            self.state.clients.insert(id, client);
            return closed;
        }
        if !busy_changes.is_empty() {
            cmd::tx::apply_busy_changes(&mut self.dbs, &mut client, busy_changes);
        }
        // One clock read per batch: a batch runs in an instant, as Redis's
        // per-command time snapshot would see it.
        let now = self.state.clock.now_ms();
        let start = out.len();
        while out.len() - start < max_output && !client.close_after_reply {
            let Some(args) = requests.pop_front() else {
                break;
            };
            self.execute(&mut client, &args, now, out);
        }
        let mut close = client.close_after_reply;
        if requests.is_empty() || close {
            if let Some(text) = protocol_error.take() {
                if !close {
                    errors::protocol(text).encode(out, client.resp3);
                }
                close = true;
            }
        }
        let view = Some(ClientView {
            authenticated: client.authenticated,
            in_multi: client.multi.is_some(),
            subscribed_resp2: !client.resp3 && client.is_subscribed(),
        });
        self.state.clients.insert(id, client);
        if self.state.shutdown_requested {
            self.server_shutdown.close();
        }
        BatchEnd { close, view }
    }

    /// Runs one command for `client` at time `now` (unix ms), appending its reply to `out`.
    pub fn execute(&mut self, client: &mut ClientState, args: &[Bytes], now: u64, out: &mut BytesMut) {
        let reply = self.dispatch(client, args, now);
        self.state.stats.total_commands_processed += 1;
        if reply.is_error() {
            self.state.stats.total_error_replies += 1;
        }
        if self.state.shutdown_requested {
            // Redis closes the connection without replying to a successful SHUTDOWN.
            return;
        }
        reply.encode(out, client.resp3);
    }

    fn dispatch(&mut self, client: &mut ClientState, args: &[Bytes], now: u64) -> Reply {
        let mut ctx = Ctx {
            dbs: &mut self.dbs,
            client,
            server: &mut self.state,
            now,
            scripting: Some(&mut self.scripting),
        };
        cmd::call(&mut ctx, args)
    }
}

/// Whether `expired` events would reach anyone under these flags.
pub(crate) fn expired_events_enabled(flags: u32) -> bool {
    flags & crate::notify::EXPIRED != 0 && flags & (crate::notify::KEYSPACE | crate::notify::KEYEVENT) != 0
}

/// The text of INFO for the requested sections (none, `default`, `all` or
/// `everything` mean every section coordis has).
pub fn info_text(ctx: &mut Ctx, sections: &[String]) -> String {
    let all = sections.is_empty()
        || sections
            .iter()
            .any(|s| s == "all" || s == "everything" || s == "default");
    let want = |name: &str| all || sections.iter().any(|s| s == name);
    let s = &*ctx.server;
    let now = ctx.now;
    let uptime = now.saturating_sub(s.started_ms) / 1000;
    let mut parts: Vec<String> = vec![];
    if want("server") {
        parts.push(format!(
            "# Server\r\nredis_version:{}\r\nredis_git_sha1:00000000\r\nredis_git_dirty:0\r\nredis_build_id:0\r\nredis_mode:standalone\r\nos:{} {}\r\narch_bits:64\r\nmultiplexing_api:tokio\r\nprocess_id:{}\r\nprocess_supervised:no\r\nrun_id:{}\r\ntcp_port:{}\r\nserver_time_usec:{}\r\nuptime_in_seconds:{}\r\nuptime_in_days:{}\r\nhz:{}\r\nconfigured_hz:{}\r\nexecutable:{}\r\nconfig_file:\r\ncoordis_version:{}\r\n",
            cmd::server::REDIS_VERSION,
            std::env::consts::OS,
            std::env::consts::ARCH,
            std::process::id(),
            s.run_id,
            s.port,
            s.clock.now_us(),
            uptime,
            uptime / 86400,
            s.config.hz,
            s.config.hz,
            std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_default(),
            env!("CARGO_PKG_VERSION"),
        ));
    }
    if want("clients") {
        parts.push(format!(
            "# Clients\r\nconnected_clients:{}\r\ncluster_connections:0\r\nmaxclients:{}\r\nclient_recent_max_input_buffer:0\r\nclient_recent_max_output_buffer:0\r\nblocked_clients:0\r\ntracking_clients:0\r\nclients_in_timeout_table:0\r\n",
            s.clients.len() + 1,
            s.config.maxclients
        ));
    }
    if want("memory") {
        let rss = rss_bytes();
        let lua = ctx.scripting.as_ref().map_or(0, |l| l.used_memory());
        parts.push(format!(
            "# Memory\r\nused_memory:{rss}\r\nused_memory_human:{}\r\nused_memory_rss:{rss}\r\nused_memory_rss_human:{}\r\nused_memory_peak:{rss}\r\nused_memory_lua:{lua}\r\nused_memory_vm_eval:{lua}\r\nnumber_of_cached_scripts:{}\r\nmaxmemory:0\r\nmaxmemory_human:0B\r\nmaxmemory_policy:noeviction\r\nmem_allocator:system\r\n",
            human_bytes(rss),
            human_bytes(rss),
            ctx.scripting.as_ref().map_or(0, |l| l.len()),
        ));
    }
    if want("persistence") {
        parts.push(format!(
            "# Persistence\r\nloading:0\r\nasync_loading:0\r\nrdb_changes_since_last_save:0\r\nrdb_bgsave_in_progress:0\r\nrdb_last_save_time:{}\r\nrdb_last_bgsave_status:ok\r\naof_enabled:0\r\naof_rewrite_in_progress:0\r\n",
            s.started_ms / 1000
        ));
    }
    if want("stats") {
        let expired: u64 = ctx.dbs.iter().map(|d| d.expired_count).sum();
        let st = &s.stats;
        parts.push(format!(
            "# Stats\r\ntotal_connections_received:{}\r\ntotal_commands_processed:{}\r\ninstantaneous_ops_per_sec:0\r\nrejected_connections:{}\r\nexpired_keys:{}\r\nevicted_keys:0\r\nkeyspace_hits:{}\r\nkeyspace_misses:{}\r\npubsub_channels:{}\r\npubsub_patterns:{}\r\ntotal_error_replies:{}\r\n",
            st.total_connections_received,
            st.total_commands_processed,
            st.rejected_connections + s.shared.rejected.load(Ordering::Relaxed),
            expired,
            st.keyspace_hits,
            st.keyspace_misses,
            s.pubsub.channel_count(),
            s.pubsub.numpat(),
            st.total_error_replies
        ));
    }
    if want("replication") {
        parts.push("# Replication\r\nrole:master\r\nconnected_slaves:0\r\nmaster_failover_state:no-failover\r\nmaster_repl_offset:0\r\n".to_string());
    }
    if want("keyspace") {
        let mut text = String::from("# Keyspace\r\n");
        for (i, db) in ctx.dbs.iter().enumerate() {
            if !db.is_empty() {
                text.push_str(&format!(
                    "db{}:keys={},expires={},avg_ttl=0\r\n",
                    i,
                    db.len(),
                    db.expires_len()
                ));
            }
        }
        parts.push(text);
    }
    parts.join("\r\n")
}

/// Resident set size of this process, from /proc (0 where unavailable).
pub fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1).and_then(|p| p.parse::<u64>().ok()))
        .map_or(0, |pages| pages * 4096)
}

fn human_bytes(n: u64) -> String {
    if n >= 1 << 30 {
        format!("{:.2}G", n as f64 / (1u64 << 30) as f64)
    } else if n >= 1 << 20 {
        format!("{:.2}M", n as f64 / (1u64 << 20) as f64)
    } else if n >= 1 << 10 {
        format!("{:.2}K", n as f64 / 1024.0)
    } else {
        format!("{n}B")
    }
}
