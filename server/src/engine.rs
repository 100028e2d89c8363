//! The engine: the keyspace plus server state, and the code that runs a
//! batch of commands against them.
//!
//! The server keeps one `Mutex<Engine>`. A connection task parses every
//! request of a read, takes the lock once, runs the whole batch with
//! [`Engine::batch`] (which encodes the replies into the connection's
//! output buffer), drops the lock and writes. A background task calls
//! [`Engine::active_expire_step`] in bounded steps. See [`crate::store`] for
//! why coordis is shaped this way.
//!
//! Nothing here performs I/O or awaits; the lock is never held across an
//! `.await`.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};

use crate::cmd::{self, Ctx};
use crate::config::Config;
use crate::errors;
use crate::exec::busy::{ClientView, TxChange};
use crate::exec::Caller;
use crate::lua::Scripting;
use crate::net::clients::{ClientState, Clients, CloseSignal};
use crate::protocol::{Reply, Requests};
use crate::state::{Rates, ServerState, Shared, Stats};
use crate::store::{Clock, Db};

/// Keys active expiry may remove in one lock hold before it lets commands
/// run again: bounds the latency a mass expiry adds to any command.
pub(crate) const EXPIRE_STEP_KEYS: usize = 500;

/// The share of an `hz` tick a slow active-expiry cycle may take at
/// `active-expire-effort 1`, in percent (Redis's 25), and what each
/// further step of effort adds (Redis's 2).
const SLOW_CYCLE_PERCENT: u64 = 25;
const SLOW_CYCLE_PERCENT_PER_EFFORT: u64 = 2;
/// A fast active-expiry cycle's time at effort 1 in µs (Redis's 1000),
/// and what each further step of effort adds (Redis's 250).
const FAST_CYCLE_US: u64 = 1000;
const FAST_CYCLE_US_PER_EFFORT: u64 = 250;

/// The time limits of active-expiry cycles, as `active-expire-effort`
/// scales Redis's: a slow cycle, once per `hz` tick, may work for
/// [`SLOW_CYCLE_PERCENT`] of the tick plus [`SLOW_CYCLE_PERCENT_PER_EFFORT`]
/// per effort above 1; while a cycle stops at its limit with keys still
/// due, fast cycles follow between ticks, each [`FAST_CYCLE_US`] plus
/// [`FAST_CYCLE_US_PER_EFFORT`] per effort above 1, one started at most
/// every two fast cycles' time. Redis's other two effort knobs (keys
/// sampled per loop, the share of stale keys a cycle may leave) have no
/// counterpart: the deadline index finds every due key without sampling,
/// and a cycle goes on until none is due or its time is up.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ExpireCycle {
    /// Between two slow cycles (1000 / hz ms).
    pub(crate) interval: Duration,
    pub(crate) slow: Duration,
    pub(crate) fast: Duration,
}

impl ExpireCycle {
    pub(crate) fn new(hz: u32, effort: u32) -> ExpireCycle {
        let interval = Duration::from_millis(1000 / hz.max(1) as u64);
        let extra = effort.clamp(1, 10) as u64 - 1;
        let percent = SLOW_CYCLE_PERCENT + SLOW_CYCLE_PERCENT_PER_EFFORT * extra;
        ExpireCycle {
            interval,
            slow: interval * percent as u32 / 100,
            fast: Duration::from_micros(FAST_CYCLE_US + FAST_CYCLE_US_PER_EFFORT * extra),
        }
    }
}

/// How a batch left the connection (its replies are in the output buffer).
#[derive(Debug, Default)]
pub(crate) struct BatchEnd {
    /// Close the connection after writing the replies (QUIT, CLIENT KILL, protocol error).
    pub close: bool,
    /// The last command blocked the client: its connection waits for the
    /// reply ([`crate::blocked`]) before it runs the requests left.
    pub blocked: bool,
    /// What fault rules do to this batch's replies (a delay, slicing).
    pub reply_fault: crate::faults::ReplyFault,
    /// The client after the batch (the parsing limits depend on whether it
    /// is authenticated; busy answers on the rest); `None` when the batch did
    /// not reach the engine.
    pub view: Option<ClientView>,
    /// PSYNC or SYNC made the client a replica: its connection becomes the
    /// replica's link ([`crate::repl::link`]).
    pub handoff: Option<Box<crate::repl::Handoff>>,
    /// Connections the batch's commands closed (CLIENT KILL, a staged
    /// restart): its replies wait until their sockets are closed.
    pub killed: Vec<Arc<crate::net::clients::ConnSignal>>,
}

impl BatchEnd {
    /// The client is gone (closed or killed): no replies, close.
    pub(crate) fn closed() -> BatchEnd {
        BatchEnd {
            close: true,
            ..BatchEnd::default()
        }
    }
}

/// The keyspace and server state. Shared as `Mutex<Engine>`; every method
/// runs with the lock held and returns quickly.
pub(crate) struct Engine {
    dbs: Vec<Db>,
    state: ServerState,
    scripting: Scripting,
    /// Triggered when a client runs SHUTDOWN.
    server_shutdown: Arc<CloseSignal>,
}

/// Shown by name only: the keyspace and the VM are not for debug output.
impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").finish_non_exhaustive()
    }
}

impl Engine {
    pub(crate) fn new(
        config: Config,
        clock: Arc<dyn Clock>,
        port: u16,
        shared: Arc<Shared>,
        server_shutdown: Arc<CloseSignal>,
    ) -> Engine {
        shared.publish(&config);
        crate::exec::monotonic::init();
        let guards = crate::exec::Guards::from_config(&config);
        shared.set_guards(guards);
        let run_id = new_run_id();
        let memory_startup = crate::process::allocator().allocated;
        let started_ms = clock.now_ms();
        let mut acl = crate::acl::Acl::new(config.acl_pubsub_allchannels);
        acl.set_default_password(config.requirepass.as_ref().map(|p| p.expose()));
        shared
            .auth_required
            .store(!acl.default_open(), std::sync::atomic::Ordering::Relaxed);
        let scripting = Scripting::new(config.lua_memory_limit, shared.script.clone()).expect("create the Lua VM");
        let repl_id = new_run_id();
        let replica = crate::replica::ReplicaState::new(&config, repl_id.clone());
        let is_replica = replica.is_replica();
        let client_limits = crate::net::client_mem::ClientLimits::from_config(&config);
        shared
            .client_eviction
            .store(client_limits.eviction != 0, std::sync::atomic::Ordering::Relaxed);
        let lazyfree = crate::lazyfree::LazyFree::default();
        let mut engine = Engine {
            dbs: (0..config.databases)
                .map(|_| {
                    let mut db = Db::default();
                    // A replica's keys expire by the primary's DELs only.
                    db.keep_expired = is_replica;
                    db.freer = lazyfree.clone();
                    db
                })
                .collect(),
            scripting,
            state: ServerState {
                config,
                clock,
                stats: Stats::default(),
                clients: Clients::default(),
                started_ms,
                run_id,
                port,
                pubsub: Default::default(),
                tracking: Default::default(),
                observe: Default::default(),
                rates: Rates::default(),
                memory_startup,
                lazyfree,
                memory_peak: memory_startup,
                replica,
                repl: crate::repl::Replication::new(is_replica),
                monitors: Vec::new(),
                blocking: Default::default(),
                active_expire: true,
                pause_cron: false,
                disable_deny_scripts: false,
                faults: Default::default(),
                random: None,
                oom_at_start: false,
                evictor: Default::default(),
                client_limits,
                client_peaks: Default::default(),
                evicted_clients: 0,
                clients_mem: 0,
                shutdown_requested: false,
                shutdown_pending: None,
                signal_saved: None,
                dirty: 0,
                last_save_secs: started_ms / 1000,
                dirty_at_save: 0,
                saves: Default::default(),
                effects: Default::default(),
                aof: Default::default(),
                bgsave: Default::default(),
                guards,
                acl,
                cluster: None,
                migrate_sockets: Default::default(),
                shared,
            },
            server_shutdown,
        };
        let (dbs, state) = (&mut engine.dbs, &engine.state);
        crate::notify::log_keys(dbs, &state.config, &state.effects);
        // `oom-score-adj` at start, as Redis's `main` sets it (a failure is
        // logged and the server goes on).
        let _ = crate::process::set_oom_score_adj(&state.config, is_replica);
        engine
    }

    /// Starts loading the dataset, as Redis's `loadDataFromDisk`: the
    /// append-only file when it is on (its base may be an RDB file),
    /// replayed now, then its writer started; otherwise `dir/dbfilename`
    /// when `dir` is set (coordis-server's default `.`; an embedded
    /// server's builder's, or its own temp dir): its bytes are returned
    /// for [`crate::persist::rdb::disk::parse`] off the lock, with the
    /// server in the loading state until [`Engine::finish_load`]. A missing
    /// file is an empty start; an unreadable one is an error (Redis exits).
    pub(crate) fn load_at_start(&mut self) -> std::io::Result<Option<PendingLoad>> {
        self.start_cluster()?;
        self.load_acl_at_start().map_err(std::io::Error::other)?;
        let now_secs = self.state.clock.now_ms() / 1000;
        if self.state.config.aof.enabled {
            let load = crate::persist::aof::prepare_load(&mut self.state).map_err(|()| aof_failed())?;
            if let Some(load) = load {
                self.state.shared.loading.begin(load.total_bytes, now_secs);
                return Ok(Some(PendingLoad::Aof(Box::new(load))));
            }
            self.open_persistence().map_err(|()| aof_failed())?;
            return Ok(None);
        }
        if !self.state.config.dir.is_empty() {
            if let Some(bytes) = crate::persist::rdb::disk::read_file(&self.state.config)? {
                self.state.shared.loading.begin(bytes.len() as u64, now_secs);
                return Ok(Some(PendingLoad::Rdb(bytes)));
            }
        }
        self.start_persistence().map_err(|()| aof_failed())?;
        Ok(None)
    }

    /// One slice of the append-only file's load at start (the caller
    /// releases the lock between slices: clients get `-LOADING`
    /// meanwhile); true once every file is loaded.
    pub(crate) fn aof_load_step(&mut self, load: &mut crate::persist::aof::AofLoad) -> std::io::Result<bool> {
        let done = crate::persist::aof::load_step(
            &mut self.dbs,
            &mut self.state,
            &mut self.scripting,
            load,
            crate::persist::aof::LOAD_SLICE_COMMANDS,
        )
        .map_err(|()| aof_failed())?;
        self.state.shared.loading.progress(load.loaded_bytes());
        Ok(done)
    }

    /// The append-only file loaded at start: its writer opened (the caller
    /// ends the loading state).
    pub(crate) fn finish_aof_load(&mut self, load: &crate::persist::aof::AofLoad) -> std::io::Result<()> {
        crate::persist::aof::loaded(&mut self.state, load);
        self.open_persistence().map_err(|()| aof_failed())
    }

    /// What parsing the file at start needs: the settings and the time
    /// keys are expired against.
    pub(crate) fn load_inputs(&self) -> (crate::config::Config, u64) {
        (self.state.config.clone(), self.state.clock.now_ms())
    }

    /// Installs what the file at start held (the caller ends the loading
    /// state).
    pub(crate) fn finish_load(
        &mut self,
        parsed: std::io::Result<crate::persist::rdb::disk::Loaded>,
    ) -> std::io::Result<()> {
        parsed.and_then(|loaded| self.install_rdb(loaded))?;
        self.start_persistence()
            .map_err(|()| std::io::Error::other("the append-only file could not be started (see the log)"))
    }

    /// The `user` directives, then the ACL file, as Redis's
    /// `ACLLoadUsersAtStartup` (an error stops the start).
    fn load_acl_at_start(&mut self) -> Result<(), String> {
        let state = &mut self.state;
        let pubsub_all = state.config.acl_pubsub_allchannels;
        if !state.config.aclfile.is_empty() && !state.config.users.is_empty() {
            return Err(crate::errors::acl::FILE_AND_USERS.into());
        }
        for words in state.config.users.clone() {
            let mut user = match state.acl.user(words[0].as_bytes()) {
                Some(existing) => {
                    let mut user = (**existing).clone();
                    let _ = user.apply(b"reset", pubsub_all);
                    user
                }
                None => crate::acl::User::new(words[0].as_bytes(), pubsub_all),
            };
            let ops: Vec<Bytes> = words[1..].iter().map(|w| Bytes::from(w.clone())).collect();
            let merged = crate::acl::merge_selectors(&ops).unwrap_or_default();
            for op in &merged {
                if let Err(e) = user.apply(op, pubsub_all) {
                    tracing::warn!(
                        "Error loading ACL rule '{}' for the user named '{}': {}",
                        String::from_utf8_lossy(op),
                        words[0],
                        e.text()
                    );
                    return Err("Critical error while loading ACLs. Exiting.".into());
                }
            }
            state.acl.put(user);
        }
        if !state.config.aclfile.is_empty() {
            let path = state.config.aclfile.clone();
            let text = std::fs::read_to_string(&path)
                .map_err(|e| crate::errors::acl::load_open_failed(&path, &crate::errors::strerror(&e)))?;
            state
                .acl
                .load_text(&path, &text, pubsub_all)
                .map_err(|e| format!("Aborting Redis startup because of ACL errors: {e}"))?;
        }
        state.sync_auth();
        Ok(())
    }

    /// In cluster mode, this node's view of the cluster from its nodes
    /// file, or a fresh one written there (Redis's `clusterInit`): the file
    /// is locked for the life of the server.
    fn start_cluster(&mut self) -> std::io::Result<()> {
        let config = &self.state.config;
        if !config.cluster.enabled {
            return Ok(());
        }
        let file = std::path::Path::new(&config.cluster.config_file);
        let path = if file.is_absolute() || config.dir.is_empty() {
            file.to_path_buf()
        } else {
            std::path::Path::new(&config.dir).join(file)
        };
        let fail = |why: String| {
            tracing::warn!("{why}");
            std::io::Error::other(why)
        };
        let mut cluster = match crate::cluster::Cluster::load(path.clone()).map_err(fail)? {
            Some(cluster) => cluster,
            None => {
                let cluster = crate::cluster::Cluster::fresh(path.clone());
                tracing::info!("No cluster configuration found, I'm {}", cluster.me().name);
                // As Redis, written before the ports are known.
                cluster
                    .save()
                    .map_err(|e| fail(format!("Fatal: can't update cluster config file: {e}")))?;
                cluster
            }
        };
        cluster.lock_file().map_err(|e| {
            fail(format!(
                "Sorry, the cluster configuration file {} is already used by a different Redis Cluster node. \
                 Please make sure that different nodes use different cluster configuration files. ({e})",
                path.display()
            ))
        })?;
        cluster.set_my_ports(&self.state.config.cluster, self.state.port);
        self.state.cluster = Some(Box::new(cluster));
        Ok(())
    }

    /// The cluster's periodic work (part of Redis's `clusterCron`): the
    /// state check.
    pub(crate) fn cluster_cron(&mut self) {
        let now = self.state.clock.now_ms();
        let config = &self.state.config.cluster;
        if let Some(cluster) = self.state.cluster.as_deref_mut() {
            cluster.update_state(config, now);
        }
    }

    /// The bus's cron (`clusterCron`); returns the links to open, each
    /// already registered with its sender.
    pub(crate) fn bus_cron(&mut self) -> Vec<crate::net::bus::Opening> {
        // Redis's `clusterCron` is part of its `serverCron`: DEBUG
        // PAUSE-CRON holds it too (messages are still read).
        if self.state.pause_cron {
            return vec![];
        }
        let now = self.state.clock.now_ms();
        let view = crate::cluster::failover::repl_view(&self.state);
        let config = &self.state.config.cluster;
        let Some(cluster) = self.state.cluster.as_deref_mut() else {
            return vec![];
        };
        cluster.repl = view;
        cluster.cron(config, now);
        cluster.failover_cron(config, now);
        let mut out = vec![];
        for (node, addr) in std::mem::take(&mut cluster.to_connect) {
            let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
            let id = cluster.add_link(Some(node), false, tx, now);
            // Queued before the connection opens, as Redis queues it: a
            // node that cannot be reached has a PING pending, and fails.
            cluster.link_created(config, id, now);
            let source_addr = self.state.config.bind_source_addr.clone();
            out.push(crate::net::bus::Opening {
                id,
                addr,
                rx,
                source_addr,
            });
        }
        self.after_bus();
        out
    }

    /// A link the bus accepted.
    pub(crate) fn bus_accepted(&mut self, tx: tokio::sync::mpsc::UnboundedSender<Vec<u8>>) -> Option<u64> {
        let now = self.state.clock.now_ms();
        let cluster = self.state.cluster.as_deref_mut()?;
        Some(cluster.add_link(None, true, tx, now))
    }

    /// A link closed (or could not open).
    pub(crate) fn bus_closed(&mut self, id: u64) {
        if let Some(cluster) = self.state.cluster.as_deref_mut() {
            cluster.free_link(id);
        }
    }

    /// Whether link `id` is still one of the cluster's (a freed link's task ends).
    pub(crate) fn bus_link_alive(&self, id: u64) -> bool {
        self.state.cluster.as_deref().is_some_and(|c| c.links.contains_key(&id))
    }

    /// One message from link `id`.
    pub(crate) fn bus_message(&mut self, id: u64, msg: &[u8], local: std::net::SocketAddr, peer: std::net::SocketAddr) {
        let now = self.state.clock.now_ms();
        let view = crate::cluster::failover::repl_view(&self.state);
        let config = &self.state.config.cluster;
        if let Some(cluster) = self.state.cluster.as_deref_mut() {
            cluster.repl = view;
            cluster.process(config, id, msg, local, peer, now);
        }
        self.after_bus();
    }

    /// After the bus changed something: messages published elsewhere reach
    /// this node's subscribers, the nodes file is written when it changed.
    fn after_bus(&mut self) {
        let now = self.state.clock.now_ms();
        let Some(cluster) = self.state.cluster.as_deref_mut() else {
            return;
        };
        let published = std::mem::take(&mut cluster.published);
        let dirty_slots = std::mem::take(&mut cluster.dirty_slots);
        let save = std::mem::take(&mut cluster.dirty_config);
        if save {
            cluster.update_state(&self.state.config.cluster, now);
            if let Err(e) = cluster.save() {
                tracing::warn!("Fatal: can't update cluster config file: {e}");
            }
        }
        for p in published {
            crate::cmd::pubsub::deliver_published(&self.state, None, &p.channel, &p.message, p.sharded, now);
        }
        if !dirty_slots.is_empty() {
            crate::cluster::delete_keys_in_slots(&mut self.dbs[0], &dirty_slots, now);
        }
        crate::cluster::failover::reconcile(&mut self.dbs, &mut self.state);
    }

    /// Loads `dir/dbfilename` under the lock (a staged crash's restart).
    fn load_rdb_at_start(&mut self) -> std::io::Result<()> {
        if self.state.config.dir.is_empty() {
            return Ok(());
        }
        let now = self.state.clock.now_ms();
        match crate::persist::rdb::disk::load_at_start(&self.state.config, now)? {
            Some(loaded) => self.install_rdb(loaded),
            None => Ok(()),
        }
    }

    /// Puts a parsed file's libraries and keys into the dataset.
    fn install_rdb(&mut self, loaded: crate::persist::rdb::disk::Loaded) -> std::io::Result<()> {
        self.state.saves.last_load_keys_loaded = loaded.keys() as u64;
        self.state.saves.last_load_keys_expired = loaded.expired;
        if !loaded.functions.is_empty() {
            self.scripting
                .restore_libraries(loaded.functions, crate::lua::functions::RestorePolicy::Replace)
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("{e:?}")))?;
        }
        let now = self.state.clock.now_ms();
        crate::store::access::stamp(&mut self.dbs, &self.state.config, now);
        crate::persist::rdb::disk::install(loaded.dbs, &mut self.dbs);
        Ok(())
    }

    /// Whether DEBUG PAUSE-CRON holds the periodic tick
    /// ([`ServerState::pause_cron`]).
    pub(crate) fn cron_paused(&self) -> bool {
        self.state.pause_cron
    }

    /// The active-expiry cycles' timing (`hz` as `dynamic-hz` adapts it,
    /// `active-expire-effort`).
    pub(crate) fn expire_cycle(&self) -> ExpireCycle {
        ExpireCycle::new(self.state.hz(), self.state.config.active_expire_effort)
    }

    /// An active-expiry cycle worked `spent`, and stopped at its time
    /// limit with keys still due when `capped` (INFO's counters, and the
    /// `expire-cycle` latency event past `latency-monitor-threshold`: the
    /// time its lock holds kept commands waiting).
    pub(crate) fn expire_cycle_done(&mut self, spent: Duration, capped: bool) {
        let stats = &mut self.state.stats;
        stats.expire_cycle_us += spent.as_micros() as u64;
        stats.expired_time_cap_reached_count += capped as u64;
        let now = self.state.clock.now_ms();
        cmd::observe::latency_event(&mut self.state, "expire-cycle", now, spent.as_millis() as u64);
    }

    /// Answers the blocked clients whose timeout has passed; returns the
    /// next deadline of a blocked client (the server's timer sleeps until it).
    pub(crate) fn expire_blocked(&mut self) -> Option<u64> {
        if self.state.shared.is_frozen() {
            return None;
        }
        let now = self.state.clock.now_ms();
        crate::blocked::expire(&mut self.dbs, &mut self.state, now);
        self.state.flush_effects();
        crate::blocked::next_deadline(&self.state.blocking)
    }

    /// Ends client `id`'s wait without another client: a blocking command is
    /// answered as its timeout would answer it, a CLIENT PAUSE holding it is
    /// ended. For a lone client driven without a socket (tests, fuzzing).
    pub(crate) fn end_block(&mut self, id: u64) {
        let Some(mut client) = self.state.clients.take(id) else {
            return;
        };
        let postponed = client.blocked.as_ref().is_some_and(|b| b.is_postponed());
        if postponed {
            self.state.clients.put_back(client);
            crate::blocked::unpause(&mut self.dbs, &mut self.state);
            return;
        }
        crate::blocked::unblock(&mut self.dbs, &mut self.state.blocking, &mut client, false);
        self.state.clients.put_back(client);
    }

    /// Whether client `id`'s replies are off (CLIENT REPLY OFF, or SKIP for
    /// its next command).
    pub(crate) fn replies_suppressed(&self, id: u64) -> bool {
        self.state.clients.get(id).is_some_and(|c| c.reply_off || c.reply_skip)
    }

    /// The settings and signals connection tasks share with the engine.
    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.state.shared
    }

    /// Starts a background save (a scheduled BGSAVE): through THE entry
    /// point, [`crate::persist::saves::background_save`].
    pub(crate) fn start_background_save(&mut self) -> Result<(), crate::persist::snapshot::NotStarted> {
        let libraries = crate::persist::saves::libraries(Some(&self.scripting));
        let now = self.state.clock.now_ms();
        crate::persist::saves::background_save(&mut self.dbs, &mut self.state, libraries, now)
    }

    /// The server clock now (unix ms).
    pub(crate) fn clock_ms(&self) -> u64 {
        self.state.clock.now_ms()
    }

    /// One slice of a background save's walk of database `origin` (the
    /// database it was at the start): `emit` gets the start's resize hints
    /// and each key. True once that database is written.
    pub(crate) fn snapshot_slice(
        &mut self,
        origin: usize,
        budget: usize,
        mut emit: impl FnMut(usize, usize, &[u8], crate::store::EntryRef<'_>, u32),
    ) -> bool {
        let Some(db) = self
            .dbs
            .iter_mut()
            .find(|d| d.snap.as_ref().is_some_and(|s| s.origin == origin))
        else {
            return true;
        };
        let (len, expires) = db.snap.as_ref().map_or((0, 0), |s| (s.start_len, s.start_expires));
        db.snapshot_step(budget, |key, entry, access| emit(len, expires, key, entry, access))
    }

    /// A background save ended (its thread reports): see
    /// [`crate::persist::snapshot::finished`]; a scheduled one starts.
    pub(crate) fn background_save_done(&mut self, ok: bool, dirty: u64) {
        crate::persist::snapshot::finished(&mut self.dbs, &mut self.state, ok, dirty);
        if std::mem::take(&mut self.state.bgsave.scheduled) && !self.state.shutdown_requested {
            let _ = self.start_background_save();
        }
    }

    /// An append-only file rewrite's walk ended (its thread reports): see
    /// [`crate::persist::aof::rewrite_done`]; a scheduled save starts.
    pub(crate) fn aof_rewrite_done(&mut self, ok: bool) {
        crate::persist::aof::rewrite_done(&mut self.dbs, &mut self.state, ok);
        if std::mem::take(&mut self.state.bgsave.scheduled) && !self.state.shutdown_requested {
            let _ = self.start_background_save();
        }
    }

    /// A full sync's snapshot ended: see [`crate::persist::snapshot::replication_finished`].
    pub(crate) fn replication_snapshot_done(&mut self, image: Option<Vec<u8>>, eof: bool) {
        crate::persist::snapshot::replication_finished(&mut self.dbs, &mut self.state, image, eof);
        if std::mem::take(&mut self.state.bgsave.scheduled) && !self.state.shutdown_requested {
            let _ = self.start_background_save();
        }
    }

    /// The replication cron ([`crate::repl::cron`]), every timer tick.
    pub(crate) fn replication_cron(&mut self) {
        let scripting = &self.scripting;
        crate::repl::cron(&mut self.dbs, &mut self.state, || {
            crate::persist::saves::libraries(Some(scripting))
        });
    }

    /// A replica acknowledged: the WAITs it satisfied are answered, the
    /// others' timeout replies count it.
    pub(crate) fn replication_acked(&mut self) {
        crate::repl::failover::update(&mut self.dbs, &mut self.state);
        for (id, count, done) in self.state.repl.waiter_counts() {
            let Some(mut client) = self.state.clients.take(id) else {
                self.state.repl.drop_waiter(id);
                continue;
            };
            if !crate::blocked::waits_for_replicas(&client) {
                self.state.repl.drop_waiter(id);
            } else if done {
                crate::blocked::answer(
                    &mut self.dbs,
                    &mut self.state.blocking,
                    &mut client,
                    crate::protocol::Reply::Int(count as i64),
                );
            } else {
                crate::blocked::set_timeout_reply(&mut client, crate::protocol::Reply::Int(count as i64));
            }
            self.state.clients.put_back(client);
        }
    }

    /// Replica `k`'s address ([`crate::repl::Replication::replica_address`]).
    pub(crate) fn replica_address(&self, k: usize) -> Option<(String, u64)> {
        self.state.repl.replica_address(k)
    }

    /// A replica's link ended.
    pub(crate) fn replica_gone(&mut self, id: u64) {
        self.state.repl.replica_gone(id);
    }

    /// A restart from the test-control plane ([`crate::Server::restart`]):
    /// every connection is dropped, and with `lose_data` the keyspace and
    /// the script cache are gone too, as after a crash of a Redis without
    /// persistence (a new run id, uptime from zero). The configuration stays.
    pub(crate) fn restart(&mut self, lose_data: bool) {
        restart(&mut self.dbs, &mut self.state, &mut self.scripting, lose_data);
    }

    /// Adds a fault rule; returns its id.
    pub(crate) fn add_fault(&mut self, rule: crate::faults::FaultRule) -> u64 {
        self.state.faults.add(rule)
    }

    /// Removes fault rule `id` (`None`: every rule); clients a hang rule
    /// held go on once no hang rule is left.
    pub(crate) fn remove_faults(&mut self, id: Option<u64>) -> bool {
        remove_faults(&mut self.dbs, &mut self.state, id)
    }

    pub(crate) fn fault_list(&self) -> Vec<crate::faults::FaultEntry> {
        self.state.faults.list()
    }

    pub(crate) fn seed_faults(&mut self, seed: u64) {
        self.state.faults.seed(seed);
    }

    /// Seeds the generator of the server's random choices (see
    /// [`ServerState::random`]).
    pub(crate) fn seed_random(&mut self, seed: u64) {
        self.state.random = Some(seed);
    }

    /// Plays the server down (every connection dropped, new ones closed
    /// at once) or up again; the data stays.
    pub(crate) fn set_down(&mut self, down: bool) {
        set_down(&mut self.state, down);
    }

    /// Brings the server up to its clock at once (the test clock moved):
    /// a CLIENT PAUSE whose time is over ends, blocked clients past their
    /// deadline are answered, and every key due by now expires, in deadline
    /// order, with its `expired` event; a save point reached starts its save.
    pub(crate) fn settle(&mut self) {
        settle_state(&mut self.dbs, &mut self.state, None, Some(&self.scripting));
        self.state.flush_effects();
    }

    /// Samples INFO's instantaneous rates (every expiry tick).
    pub(crate) fn sample_rates(&mut self) {
        let shared = &self.state.shared;
        let totals = [
            self.state.stats.total_commands_processed,
            shared.net_input_bytes.load(Ordering::Relaxed),
            shared.net_output_bytes.load(Ordering::Relaxed),
        ];
        self.state.rates.sample(totals);
    }

    /// Closes the clients idle for longer than `timeout` seconds on the
    /// server's clock (Redis's `clientsCronHandleTimeout`): not a blocked
    /// client (its own timeout rules it), a subscriber nor a replica. Nothing to do
    /// with `timeout 0`, the default.
    pub(crate) fn close_idle_clients(&mut self) {
        close_idle_clients(&mut self.state);
    }

    /// The clients' output limits on the server clock and client eviction
    /// ([`crate::net::client_mem::cron`]).
    pub(crate) fn clients_cron(&mut self) {
        let now = self.state.clock.now_ms();
        crate::net::client_mem::cron(&mut self.state, now);
    }

    /// The tracking table's limit on the periodic tick ([`crate::tracking::cron`]).
    pub(crate) fn tracking_cron(&mut self) {
        let now = self.state.clock.now_ms();
        crate::tracking::cron(&mut self.dbs, &mut self.state, now);
    }

    /// A connection's query buffer grew without a complete request: client
    /// eviction looks at every client (Redis's check after a read).
    pub(crate) fn evict_clients(&mut self) {
        let now = self.state.clock.now_ms();
        crate::net::client_mem::evict_clients(&mut self.state, None, now);
    }

    /// Removes up to [`EXPIRE_STEP_KEYS`] due keys; true if more are due.
    pub(crate) fn active_expire_step(&mut self) -> bool {
        let more = active_expire_step(&mut self.dbs, &mut self.state, None, EXPIRE_STEP_KEYS);
        self.state.flush_effects();
        more
    }

    /// Registers a new connection (before any of its batches).
    pub(crate) fn connect(&mut self, client: ClientState) {
        connect(&mut self.state, client);
    }

    pub(crate) fn disconnect(&mut self, id: u64) {
        if let Some(mut client) = self.state.clients.remove(id) {
            crate::net::client_mem::forget(&mut self.state, &client);
            crate::blocked::release(&mut self.dbs, &mut self.state.blocking, &mut client);
            cmd::tx::unwatch_all(&mut self.dbs, &mut client);
            self.state.pubsub.forget(&mut client);
            crate::tracking::disable(&mut self.state, &mut client);
            self.state.monitors.retain(|&m| m != id);
        }
    }

    /// A batch for one client on the engine ([`Batch::run`]).
    pub(crate) fn batch(&mut self) -> Batch<'_> {
        let now = self.state.clock.now_ms();
        Batch {
            dbs: &mut self.dbs,
            state: &mut self.state,
            scripting: Some(&mut self.scripting),
            busy: None,
            now,
            server_shutdown: Some(&*self.server_shutdown),
        }
    }

    /// Runs one command for the test-control plane's keyspace access, as a
    /// client of its own that no CLIENT LIST shows, in database `db` and
    /// RESP3 (so maps, sets and scores keep their shape). Its writes are
    /// writes like any (WATCH, events, blocked clients served); it cannot
    /// block (it answers as inside MULTI) and fault rules and pauses do not
    /// hold it.
    pub(crate) fn run_internal(&mut self, db: usize, args: &[Bytes]) -> Reply {
        use std::net::{Ipv4Addr, SocketAddr};
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        let signal = Arc::new(crate::net::clients::ConnSignal::default());
        let outbox = crate::net::clients::Outbox::new(signal.clone());
        let now = self.state.clock.now_ms();
        // A seeded generator (`seed_random`) reaches the controls as it
        // reaches a client's batch: RANDOMKEY, SPOP, eviction candidates.
        self.state.resume_random();
        crate::store::access::stamp(&mut self.dbs, &self.state.config, now);
        let mut client = ClientState::new(0, addr, addr, now, signal, outbox);
        client.db = db.min(self.dbs.len() - 1);
        client.resp3 = true;
        client.authenticated = true;
        let reply = {
            let mut ctx = Ctx {
                dbs: &mut self.dbs,
                client: &mut client,
                server: &mut self.state,
                now,
                scripting: Some(&mut self.scripting),
                caller: Caller::Control,
            };
            let reply = crate::exec::call_control(&mut ctx, args);
            crate::exec::end_unit(&mut ctx);
            reply
        };
        self.state.keep_random();
        crate::tracking::end_batch(&mut self.dbs, &mut self.state, None, now);
        self.state.flush_effects();
        reply
    }

    /// Reads the append-only file's manifest and, with `appendonly yes`,
    /// loads the files and opens the incremental one (before any client).
    /// `Err`: the server must not start (the reason is logged).
    pub(crate) fn start_persistence(&mut self) -> Result<(), ()> {
        crate::persist::aof::start(&mut self.dbs, &mut self.state, &mut self.scripting)?;
        self.persistence_started();
        Ok(())
    }

    /// The append-only file's incremental file opened after its files
    /// loaded ([`Engine::start_persistence`]'s second half).
    fn open_persistence(&mut self) -> Result<(), ()> {
        crate::persist::aof::open_at_start(&mut self.dbs, &mut self.state, &mut self.scripting)?;
        self.persistence_started();
        Ok(())
    }

    fn persistence_started(&mut self) {
        crate::notify::log_keys(&mut self.dbs, &self.state.config, &self.state.effects);
    }

    /// At shutdown: what the append-only file's writer holds is written
    /// and fsynced; then, when the server stops for its owner (not SHUTDOWN
    /// or a signal, which saved already) and save points exist, the
    /// final RDB save, as Redis's `finishShutdown` on SIGTERM. The server
    /// is past its drain here, so a failed save is logged and it stops
    /// anyway (Redis would keep running).
    pub(crate) fn stop_persistence(&mut self) {
        crate::persist::aof::stop(&mut self.state);
        crate::persist::snapshot::kill(&mut self.dbs, &mut self.state);
        let nosave = self.state.shared.shutdown_nosave.load(Ordering::Acquire);
        let wanted = match self.state.signal_saved {
            // The signal's save was made: again only for the drain's writes.
            Some(saved) => saved && self.state.dirty > self.state.dirty_at_save,
            None => crate::persist::saves::automatic_saves_on(&self.state),
        };
        if !self.state.shutdown_requested && !nosave && wanted {
            tracing::info!("Saving the final RDB snapshot before exiting.");
            crate::supervised::tell_systemd("STATUS=Saving the final RDB snapshot\n");
            let now = self.state.clock.now_ms();
            let libraries = crate::persist::saves::libraries(Some(&self.scripting));
            if crate::persist::saves::save_now(&self.dbs, &mut self.state, &libraries, now).is_err() {
                tracing::warn!("Error trying to save the DB. Exit anyway.");
            }
        }
    }

    /// A signal's shutdown begins (Redis's `prepareForShutdown` from its
    /// cron), with `shutdown-on-sigint`'s or `shutdown-on-sigterm`'s flags,
    /// as SHUTDOWN's ([`crate::shutdown::begin`]): `Some(go)` when it is
    /// decided (false: the final save failed without FORCE, or a SHUTDOWN
    /// waits already, and the server keeps running as Redis's does; a later
    /// signal tries again), `None` while it waits for lagging replicas
    /// ([`Engine::signal_shutdown_ready`]). No final save while the files
    /// at start load, as Redis forces NOSAVE then.
    pub(crate) fn begin_signal_shutdown(&mut self, signal: crate::StopSignal) -> Option<bool> {
        if self.state.shutdown_requested || self.state.shared.shutdown_nosave.load(Ordering::Acquire) {
            // SHUTDOWN came first and decided the save: the signal adds nothing.
            return Some(true);
        }
        let c = &self.state.config;
        let mut flags = match signal {
            crate::StopSignal::Interrupt => c.shutdown_on_sigint,
            crate::StopSignal::Terminate => c.shutdown_on_sigterm,
        };
        if self.state.shared.loading.is_active() {
            flags.save = false;
            flags.nosave = true;
        }
        let now = self.state.clock.now_ms();
        let libraries = crate::persist::saves::libraries(Some(&self.scripting));
        let saves = crate::persist::saves::final_save_wanted(&self.state, flags);
        match crate::shutdown::begin(&mut self.dbs, &mut self.state, &libraries, now, flags, true) {
            crate::shutdown::Begun::Finished => {
                self.signal_saved(saves);
                Some(true)
            }
            crate::shutdown::Begun::Failed | crate::shutdown::Begun::InProgress => Some(false),
            crate::shutdown::Begun::Waiting => None,
        }
    }

    /// A signal's shutdown waiting for replicas: whether it may finish
    /// ([`crate::shutdown::ready`]); `None` when SHUTDOWN ABORT cancelled it.
    pub(crate) fn signal_shutdown_ready(&self) -> Option<bool> {
        crate::shutdown::ready(&self.state)
    }

    /// A signal's shutdown done waiting: the final save. False when it
    /// failed without FORCE, or the shutdown was aborted meanwhile.
    pub(crate) fn finish_signal_shutdown(&mut self) -> bool {
        let Some(flags) = crate::shutdown::take_pending(&mut self.state) else {
            return false;
        };
        let now = self.state.clock.now_ms();
        let libraries = crate::persist::saves::libraries(Some(&self.scripting));
        let saves = crate::persist::saves::final_save_wanted(&self.state, flags);
        if crate::shutdown::finish(&mut self.dbs, &mut self.state, &libraries, now, flags).is_err() {
            return false;
        }
        self.signal_saved(saves);
        true
    }

    /// The signal's final save is decided: the stop saves again only what
    /// the drain writes after it.
    fn signal_saved(&mut self, saves: bool) {
        self.state.signal_saved = Some(saves);
    }

    /// The server's cron: a SHUTDOWN waiting for replicas finishes once
    /// they caught up or its time is over ([`crate::shutdown::cron`]).
    pub(crate) fn shutdown_cron(&mut self) {
        if self.state.shutdown_pending.is_none() {
            return;
        }
        let now = self.state.clock.now_ms();
        let libraries = crate::persist::saves::libraries(Some(&self.scripting));
        crate::shutdown::cron(&mut self.dbs, &mut self.state, &libraries, now, &self.server_shutdown);
    }

    /// The persistence timer (every expiry tick): the save points, then
    /// the automatic rewrite (Redis's `serverCron` order).
    pub(crate) fn persistence_cron(&mut self) {
        let now = self.state.clock.now_ms();
        crate::persist::saves::cron(&mut self.dbs, &mut self.state, Some(&self.scripting), now);
        crate::persist::aof::cron(&mut self.dbs, &mut self.state, &self.scripting);
    }

    /// A staged power loss ([`crate::persist::aof::crash`]). With the
    /// append-only file off, the restart loads `dir/dbfilename`, as a
    /// Redis with RDB persistence only: everything since the last save is
    /// lost. The restarted server has saved nothing yet (changes since the
    /// last save from 0, LASTSAVE its start, as Redis's).
    pub(crate) fn crash(&mut self, lose_ms: Option<u64>) -> Option<u64> {
        // A crashed process's saving child dies with it.
        crate::persist::snapshot::kill(&mut self.dbs, &mut self.state);
        let kept = crate::persist::aof::crash(&mut self.dbs, &mut self.state, &mut self.scripting, lose_ms);
        self.state.dirty_at_save = self.state.dirty;
        self.state.last_save_secs = self.state.clock.now_ms() / 1000;
        self.state.saves = Default::default();
        if !self.state.aof.on || self.state.aof.waiting {
            if let Err(e) = self.load_rdb_at_start() {
                tracing::warn!("staged crash: the RDB file did not load ({e}); the server goes on empty");
                for db in &mut self.dbs {
                    db.clear();
                }
            }
        }
        self.state.flush_effects();
        kept
    }

    /// The connections closed since the last take that may still have
    /// their sockets open ([`crate::net::clients::Clients::kill_where`]).
    pub(crate) fn take_killed(&mut self) -> Vec<Arc<crate::net::clients::ConnSignal>> {
        self.state.clients.take_killed()
    }

    /// A new reader of the effects feed ([`crate::exec::feed`]): from now
    /// on it receives every effect, in order. While one reads, expired keys
    /// are noted for their DELs.
    pub(crate) fn subscribe_effects(&mut self) -> crate::exec::feed::Reader {
        let reader = self.state.effects.subscribe();
        crate::notify::log_keys(&mut self.dbs, &self.state.config, &self.state.effects);
        reader
    }
}

/// The replica link's side of the engine ([`crate::replica::link`]):
/// every call names the link's generation and does nothing for a link
/// REPLICAOF has replaced since.
impl Engine {
    /// What the link needs to connect; `None` when this server is a primary.
    pub(crate) fn replica_target(&self) -> Option<crate::replica::link::Target> {
        let replica = &self.state.replica;
        let primary = replica.primary.clone()?;
        Some(crate::replica::link::Target {
            generation: replica.generation,
            primary,
            masterauth: self.state.config.replica.masterauth.clone(),
            masteruser: self.state.config.replica.masteruser.clone(),
            port: match self.state.config.replica.announce_port {
                0 => self.state.port,
                announced => announced,
            },
            announce_ip: self.state.config.replica.announce_ip.clone(),
            source_addr: self.state.config.bind_source_addr.clone(),
            psync: replica.psync_request(),
            failover: self.state.repl.failover.phase == crate::repl::failover::Phase::InProgress,
            transfer: replica.transfer.clone(),
        })
    }

    /// The target of this server's FAILOVER answered its PSYNC FAILOVER
    /// (`accepted`: +CONTINUE or +FULLRESYNC); see [`crate::repl::failover::handed_over`].
    pub(crate) fn replica_failover_answered(&mut self, generation: u64, accepted: bool) {
        if self.replica_current(generation) {
            crate::repl::failover::handed_over(&mut self.dbs, &mut self.state, accepted);
        }
    }

    fn replica_current(&self, generation: u64) -> bool {
        self.state.replica.is_replica() && self.state.replica.generation == generation
    }

    /// The link reached `state`; false when it was replaced.
    pub(crate) fn replica_set_state(&mut self, generation: u64, state: crate::replica::LinkState) -> bool {
        if !self.replica_current(generation) {
            return false;
        }
        let replica = &mut self.state.replica;
        if state == crate::replica::LinkState::Connecting && !std::mem::take(&mut replica.connect_announced) {
            if let Some(p) = &replica.primary {
                tracing::info!("Connecting to MASTER {}:{}", p.host, p.port);
            }
        }
        replica.state = state;
        true
    }

    /// The offset the link acknowledges.
    pub(crate) fn replica_offset(&self, generation: u64) -> Option<i64> {
        self.replica_current(generation).then_some(self.state.replica.offset)
    }

    /// A new client for the primary's stream (Redis's master client):
    /// authenticated, in database 0, with the next client id.
    fn new_primary_client(&self) -> ClientState {
        use std::net::{Ipv4Addr, SocketAddr};
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        let signal = Arc::new(crate::net::clients::ConnSignal::default());
        let outbox = crate::net::clients::Outbox::new(signal.clone());
        let id = self.state.shared.client_ids.fetch_add(1, Ordering::Relaxed) + 1;
        let mut client = ClientState::new(id, addr, addr, self.state.clock.now_ms(), signal, outbox);
        client.authenticated = true;
        client.primary = true;
        client
    }

    /// The link streams from `peer` over its local end `local`: the
    /// primary's client takes those addresses (and a fresh signal if
    /// CLIENT KILL closed the last one); the signal the link ends on.
    /// `None`: replaced.
    pub(crate) fn replica_link_up(
        &mut self,
        generation: u64,
        peer: std::net::SocketAddr,
        local: std::net::SocketAddr,
    ) -> Option<Arc<crate::net::clients::ConnSignal>> {
        if !self.replica_current(generation) {
            return None;
        }
        if self.state.replica.client.is_none() {
            self.state.replica.client = Some(self.new_primary_client());
        }
        let client = self.state.replica.client.as_mut()?;
        if client.signal.is_closed() {
            client.signal = Arc::new(crate::net::clients::ConnSignal::default());
            client.outbox = crate::net::clients::Outbox::new(client.signal.clone());
        }
        client.addr = peer.into();
        client.laddr = local.into();
        Some(client.signal.clone())
    }

    /// How a full resync's RDB is loaded (`repl-diskless-load`; Redis's
    /// `useDisklessLoad`), asked when the primary answered `+FULLRESYNC`:
    /// `None` when the link was replaced.
    pub(crate) fn replica_load_plan(&self, generation: u64) -> Option<crate::replica::link::LoadPlan> {
        use crate::config::DisklessLoad;
        use crate::replica::link::LoadPlan;
        if !self.replica_current(generation) {
            return None;
        }
        let config = &self.state.config;
        let empty = self.dbs.iter().all(|db| db.is_empty());
        Some(match config.replica.diskless_load {
            DisklessLoad::Swapdb => LoadPlan::Parser { swap: true },
            DisklessLoad::OnEmptyDb if empty => LoadPlan::Parser { swap: false },
            _ => LoadPlan::Disk {
                dir: crate::persist::rdb::disk::path(config)
                    .parent()
                    .map(std::path::Path::to_path_buf)
                    .unwrap_or_default(),
                now_secs: self.state.clock.now_ms() / 1000,
            },
        })
    }

    /// What parsing a full resync's RDB needs: the settings, the time keys
    /// are expired against (none: a replica's keys expire by its
    /// primary's DELs) and where the progress goes.
    pub(crate) fn replica_load_inputs(&self) -> (crate::config::Config, Arc<crate::state::Shared>) {
        (self.state.config.clone(), self.state.shared.clone())
    }

    /// The RDB is about to be loaded (Redis's part of `readSyncBulkPayload`
    /// before `rdbLoad`): unless it goes to a new dataset (`swap`), the old
    /// one is flushed; the server is loading from now on (`total` bytes,
    /// 0: not known), asynchronously when a swapped-in dataset continues
    /// the history this server has (`replid`: clients are served
    /// meanwhile). False when the link was replaced.
    pub(crate) fn replica_load_begin(&mut self, generation: u64, swap: bool, replid: &str, total: u64) -> bool {
        if !self.replica_current(generation) {
            return false;
        }
        if !swap {
            tracing::info!("MASTER <-> REPLICA sync: Flushing old data");
            self.replica_flush();
        }
        tracing::info!("MASTER <-> REPLICA sync: Loading DB in memory");
        let now_secs = self.state.clock.now_ms() / 1000;
        let asynchronous = swap && self.state.replica.replid == replid;
        self.state.shared.loading.begin_as(total, now_secs, asynchronous);
        true
    }

    /// Empties the dataset for a full resync's: a save in progress killed,
    /// every database and the functions cleared, tracking told.
    fn replica_flush(&mut self) {
        crate::persist::snapshot::kill(&mut self.dbs, &mut self.state);
        let lazy = self.state.config.replica.lazy_flush;
        for db in &mut self.dbs {
            db.clear_with(lazy);
        }
        let mut client = self.new_primary_client();
        let now = self.state.clock.now_ms();
        let mut ctx = Ctx {
            dbs: &mut self.dbs,
            client: &mut client,
            server: &mut self.state,
            now,
            scripting: Some(&mut self.scripting),
            caller: Caller::Primary,
        };
        crate::tracking::flushed(&mut ctx);
    }

    /// A full resync's dataset is in (Redis's end of `readSyncBulkPayload`):
    /// swapped in for the old one when loaded beside it (`swap`), installed
    /// in the flushed databases otherwise; the history is the primary's
    /// from `offset` on and the loading state ends. `Ok(false)` when the
    /// link was replaced.
    pub(crate) fn replica_load_end(
        &mut self,
        generation: u64,
        replid: String,
        offset: i64,
        loaded: crate::persist::rdb::disk::Loaded,
        swap: bool,
    ) -> Result<bool, String> {
        if !self.replica_current(generation) {
            self.state.shared.loading.end();
            return Ok(false);
        }
        tracing::info!(
            "Done loading RDB, keys loaded: {}, keys expired: {}.",
            loaded.keys(),
            loaded.expired
        );
        if swap {
            tracing::info!("MASTER <-> REPLICA sync: Swapping active DB with loaded DB");
            self.replica_flush();
        }
        let result = self.replica_install(replid, offset, loaded);
        self.state.shared.loading.end();
        if swap && result.is_ok() {
            tracing::info!("MASTER <-> REPLICA sync: Discarding old DB in background");
        }
        result.map(|()| true)
    }

    /// The RDB did not load (a cut transfer, a corrupt image): the loading
    /// state ends; a dataset loaded beside the old one is dropped, the old
    /// one stays.
    pub(crate) fn replica_load_failed(&mut self, swap: bool) {
        self.state.shared.loading.end();
        if swap {
            tracing::info!("MASTER <-> REPLICA sync: Discarding temporary DB in background");
        }
    }

    /// Installs a full resync's dataset in the (empty) databases and takes
    /// the primary's history.
    fn replica_install(
        &mut self,
        replid: String,
        offset: i64,
        loaded: crate::persist::rdb::disk::Loaded,
    ) -> Result<(), String> {
        let mut client = self.new_primary_client();
        let now = self.state.clock.now_ms();
        self.scripting
            .restore_libraries(loaded.functions, crate::lua::functions::RestorePolicy::Flush)
            .map_err(|e| format!("{e:?}"))?;
        // The stream goes on in the database the image names (a replica's
        // image: its primary's stream selects none first).
        client.db = loaded.repl_stream_db.filter(|&db| db < self.dbs.len()).unwrap_or(0);
        self.state.replica.stream_db = client.db;
        crate::persist::rdb::disk::install(loaded.dbs, &mut self.dbs);
        self.state
            .repl
            .proxy_resynced(&replid, offset.max(0) as u64, &self.state.config);
        self.state.replica.synced(replid, offset, now);
        self.state.replica.client = Some(client);
        crate::tracking::end_batch(&mut self.dbs, &mut self.state, None, now);
        self.state.flush_effects();
        tracing::info!("MASTER <-> REPLICA sync: Finished with success");
        Ok(())
    }

    /// The transfer is in the temp file `temp` (`repl-diskless-load
    /// disabled`): the dataset is flushed, the file renamed to
    /// `dir/dbfilename` and the server is loading (Redis's disk branch of
    /// `readSyncBulkPayload`). Returns the file's path to parse; `Ok(None)`
    /// when the link was replaced.
    pub(crate) fn replica_disk_load_begin(
        &mut self,
        generation: u64,
        temp: &std::path::Path,
    ) -> Result<Option<std::path::PathBuf>, String> {
        if !self.replica_current(generation) {
            return Ok(None);
        }
        // Renamed first, as Redis does: a rename that fails leaves the old
        // dataset in place.
        let path = crate::persist::rdb::disk::path(&self.state.config);
        if let Err(e) = std::fs::rename(temp, &path) {
            let why = format!(
                "Failed trying to rename the temp DB into {} in MASTER <-> REPLICA synchronization: {e}",
                self.state.config.dbfilename
            );
            tracing::warn!("{why}");
            return Err(why);
        }
        tracing::info!("MASTER <-> REPLICA sync: Flushing old data");
        self.replica_flush();
        tracing::info!("MASTER <-> REPLICA sync: Loading DB in memory");
        let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        let now_secs = self.state.clock.now_ms() / 1000;
        self.state.shared.loading.begin(size, now_secs);
        Ok(Some(path))
    }

    /// `rdb-del-sync-files`: the file a full resync loaded from disk
    /// (`path`, loaded or not) is removed when this server persists
    /// nothing, with Redis's line.
    pub(crate) fn replica_drop_sync_file(&self, path: &std::path::Path) {
        let config = &self.state.config;
        if config.replica.del_sync_files && config.save_points.is_empty() && !config.aof.enabled {
            tracing::info!("Removing the RDB file obtained from the master. This replica has persistence disabled");
            let _ = std::fs::remove_file(path);
        }
    }

    /// The primary accepted a partial resynchronization: the dataset stays,
    /// the stream continues from the cached position. False when replaced.
    pub(crate) fn replica_continue(&mut self, generation: u64, new_replid: Option<String>) -> bool {
        if !self.replica_current(generation) {
            return false;
        }
        let now = self.state.clock.now_ms();
        self.state.replica.continued(new_replid, now);
        let r = &self.state.replica;
        self.state.repl.proxy_continued(
            (&r.replid, &r.replid2, r.second_offset),
            r.offset.max(0) as u64,
            &self.state.config,
        );
        if self.state.replica.client.is_none() {
            self.state.replica.client = Some(self.new_primary_client());
        }
        true
    }

    /// The link ended: a streaming link's position is cached for a partial
    /// resync; a MULTI it left open is discarded.
    pub(crate) fn replica_link_lost(&mut self, generation: u64) {
        if !self.replica_current(generation) {
            return;
        }
        let now = self.state.clock.now_ms();
        self.state.replica.link_lost(now);
        if let Some(client) = self.state.replica.client.as_mut() {
            client.multi = None;
            client.multi_failed = false;
        }
    }

    /// Applies the complete commands of the primary's stream (each with its
    /// bytes as they came, `raw` in order) read with `read` more bytes,
    /// through admission and call as [`Caller::Primary`] (replies
    /// dropped); what the offset moves past is passed on to this server's
    /// replicas verbatim. `REPLCONF GETACK` is answered by the link: the
    /// offsets to acknowledge are returned (each before the GETACK's own
    /// bytes, as Redis's). `None`: replaced.
    pub(crate) fn replica_apply(
        &mut self,
        generation: u64,
        batch: Vec<(Vec<Bytes>, usize)>,
        raw: &[u8],
        read: usize,
    ) -> Option<Vec<i64>> {
        if !self.replica_current(generation) {
            return None;
        }
        let now = self.state.clock.now_ms();
        let replica = &mut self.state.replica;
        replica.read_offset += read as i64;
        if read > 0 {
            replica.last_io_ms = now;
        }
        let mut client = match self.state.replica.client.take() {
            Some(c) => c,
            None => self.new_primary_client(),
        };
        let mut acks = Vec::new();
        for db in &mut self.dbs {
            db.obey_primary = true;
        }
        let mut at = 0;
        for (args, len) in batch {
            let bytes = &raw[at..at + len];
            at += len;
            // REPLCONF is the primary side's command (it lands with it);
            // from the primary only GETACK comes, answered here.
            if args.first().is_some_and(|a| a.eq_ignore_ascii_case(b"replconf")) {
                if args.get(1).is_some_and(|a| a.eq_ignore_ascii_case(b"getack")) {
                    acks.push(self.state.replica.offset);
                }
                client.last_cmd = "replconf".into();
                client.last_cmd_ms = now;
            } else {
                let mut ctx = Ctx {
                    dbs: &mut self.dbs,
                    client: &mut client,
                    server: &mut self.state,
                    now,
                    scripting: Some(&mut self.scripting),
                    caller: Caller::Primary,
                };
                let _ = crate::exec::process_primary(&mut ctx, &args);
                crate::exec::end_unit(&mut ctx);
            }
            let in_multi = client.multi.is_some();
            let repl = &mut self.state.repl;
            self.state.replica.applied(bytes, in_multi, |done| repl.feed(done));
        }
        for db in &mut self.dbs {
            db.obey_primary = false;
        }
        crate::tracking::end_batch(&mut self.dbs, &mut self.state, Some(&mut client), now);
        self.state.flush_effects();
        self.state.repl.publish();
        self.state.replica.stream_db = client.db;
        self.state.replica.client = Some(client);
        Some(acks)
    }
}

/// [`Engine::remove_faults`], also from inside a command.
pub(crate) fn remove_faults(dbs: &mut [Db], state: &mut ServerState, id: Option<u64>) -> bool {
    let removed = match id {
        Some(id) => state.faults.remove(id),
        None => {
            state.faults.clear();
            true
        }
    };
    if !state.faults.hangs() {
        crate::blocked::release_hung(dbs, state);
    }
    removed
}

/// [`Engine::restart`], also from inside a command (the calling client,
/// out of the registry, is closed by its command).
pub(crate) fn restart(dbs: &mut [Db], state: &mut ServerState, scripting: &mut Scripting, lose_data: bool) {
    state.clients.kill_where(|_| true);
    if lose_data {
        crate::persist::snapshot::kill(dbs, state);
        for db in dbs.iter_mut() {
            db.clear();
        }
        scripting.flush(&state.lazyfree, false);
        state.run_id = new_run_id();
        // A new process: new replication IDs, no backlog (its replicas'
        // links were closed above and resync in full).
        state.effects.set_repl(None);
        crate::notify::log_keys(dbs, &state.config, &state.effects);
        state.repl = crate::repl::Replication::new(state.replica.is_replica());
        state.started_ms = state.clock.now_ms();
        state.stats = Stats::default();
    }
    tracing::warn!(
        "restart from the test-control plane (data {})",
        if lose_data { "lost" } else { "kept" }
    );
}

/// A random 40-hex-digit run id (INFO `run_id`; replication IDs).
pub(crate) fn new_run_id() -> String {
    (0..40)
        .map(|_| std::char::from_digit(fastrand::u32(..16), 16).unwrap_or('0'))
        .collect()
}

/// [`Engine::settle`] from inside a command (`COORDIS.CLOCK`): the
/// calling client is out of the registry, so its expired events go
/// through it.
pub(crate) fn settle(ctx: &mut Ctx) {
    settle_state(ctx.dbs, ctx.server, Some(ctx.client), ctx.scripting.as_deref());
}

/// Brings the server up to its clock (the one body of [`Engine::settle`]
/// and [`settle`]): a CLIENT PAUSE whose time is over ends, blocked clients
/// past their deadline are answered, every key due expires (in deadline
/// order, with its event and its DEL), idle clients are closed and a save
/// point reached saves, all as the timers would, unless active expiry is
/// off (DEBUG SET-ACTIVE-EXPIRE 0) or the server is frozen. DEBUG
/// PAUSE-CRON holds what the periodic tick does (from active expiry on);
/// blocked clients' timeouts are not the tick's in Redis either.
fn settle_state(
    dbs: &mut [Db],
    state: &mut ServerState,
    current: Option<&mut ClientState>,
    scripting: Option<&Scripting>,
) {
    if state.shared.is_frozen() {
        return;
    }
    let now = state.clock.now_ms();
    crate::blocked::expire(dbs, state, now);
    crate::repl::failover::update(dbs, state);
    state.repl.nudge_links();
    if state.pause_cron {
        return;
    }
    let mut current = current;
    while active_expire_step(dbs, state, current.as_deref_mut(), EXPIRE_STEP_KEYS) {}
    close_idle_clients(state);
    crate::net::client_mem::cron(state, now);
    crate::persist::saves::cron(dbs, state, scripting, now);
}

/// One bounded step of active expiry (see [`Engine::active_expire_step`]):
/// each expired key is an effect of its own (a DEL), as Redis's
/// `activeExpireCycle` propagates it.
fn active_expire_step(
    dbs: &mut [Db],
    state: &mut ServerState,
    current: Option<&mut ClientState>,
    budget: usize,
) -> bool {
    // A replica expires nothing itself: the primary's DELs remove its keys.
    if !state.active_expire
        || !crate::blocked::expiry_allowed(state)
        || state.shared.is_frozen()
        || state.replica.is_replica()
    {
        return false;
    }
    let now = state.clock.now_ms();
    let mut left = budget;
    for db in dbs.iter_mut() {
        left -= db.expire_step(now, left);
        if left == 0 {
            break;
        }
    }
    cmd::pubsub::publish_expired(dbs, state, current.as_deref(), now, true);
    crate::tracking::end_batch(dbs, state, current, now);
    left == 0
}

/// Closes the clients idle for longer than `timeout` seconds on the
/// server's clock (Redis's `clientsCronHandleTimeout`): not a blocked
/// client (its own timeout rules it) nor a subscriber. Nothing to do with
/// `timeout 0`, the default.
fn close_idle_clients(state: &mut ServerState) {
    let timeout_ms = state.config.timeout.saturating_mul(1000);
    if timeout_ms == 0 || state.shared.is_frozen() {
        return;
    }
    let now = state.clock.now_ms();
    for client in state.clients.values() {
        // Replicas are ruled by `repl-timeout` instead (Redis skips them too).
        let exempt = client.blocked.is_some() || client.is_subscribed() || client.replica;
        if !exempt && now.saturating_sub(client.last_cmd_ms) > timeout_ms {
            tracing::debug!("closing idle client {} after {}s", client.id, timeout_ms / 1000);
            client.signal.close();
        }
    }
}

/// Plays the server down (`true`: every registered connection dropped, new
/// ones closed at once) or brings it back (see [`Engine::set_down`]).
pub(crate) fn set_down(state: &mut ServerState, down: bool) {
    state.shared.down.store(down, Ordering::Release);
    if down {
        state.clients.kill_where(|_| true);
    }
}

/// What the start left to load while clients are served (`-LOADING`).
pub(crate) enum PendingLoad {
    /// `dir/dbfilename`'s bytes, parsed off the lock.
    Rdb(Vec<u8>),
    /// The append-only files, replayed a slice at a time.
    Aof(Box<crate::persist::aof::AofLoad>),
}

fn aof_failed() -> std::io::Error {
    std::io::Error::other("the append-only file could not be loaded (see the log)")
}

/// Registers a new connection (before any of its batches).
pub(crate) fn connect(state: &mut ServerState, mut client: ClientState) {
    state.stats.total_connections_received += 1;
    client.authenticated = state.acl.default_open();
    state.clients.insert(Box::new(client));
}

/// One client's batch on the engine's parts: what [`Engine::batch`]
/// runs, and what a busy script's hook runs for a request only the engine
/// can answer ([`crate::exec::busy`]).
pub(crate) struct Batch<'a> {
    pub dbs: &'a mut [Db],
    pub state: &'a mut ServerState,
    /// `None` inside a script: the VM is running it.
    pub scripting: Option<&'a mut Scripting>,
    /// The busy script whose hook serves the batch: admission refuses
    /// what is not `allow_busy` and evicts nothing, and the execution unit
    /// stays the script's (its effects, the clients its writes make ready,
    /// tracking's batch end and the seeded random are its own), as
    /// Redis's `processEventsWhileBlocked` leaves them.
    pub busy: Option<&'a crate::lua::ScriptState>,
    /// The batch's time (unix ms): a batch runs in an instant, as Redis's
    /// per-command time snapshot would see it; inside a script, the
    /// script's.
    pub now: u64,
    /// Triggered once a client's SHUTDOWN has run (never inside a script:
    /// SHUTDOWN is answered by the connection then).
    pub server_shutdown: Option<&'a CloseSignal>,
}

impl Batch<'_> {
    /// Runs client `id`'s requests from the front of `requests` until they
    /// are all done or the encoded replies reach `max_output` bytes; the
    /// rest stay queued for the next call, after the connection has written
    /// these replies. That bound is the backpressure for clients that
    /// pipeline without reading: a connection never holds more than about
    /// one chunk of replies. `protocol_error` is answered (and the
    /// connection closed) once every request before it has run.
    /// `busy_changes` (what the client's answers while a script was busy
    /// changed) are applied first. Replies are appended to `out`, which the
    /// connection reuses from batch to batch.
    pub(crate) fn run(
        mut self,
        id: u64,
        busy_changes: Vec<TxChange>,
        requests: &mut Requests,
        protocol_error: &mut Option<String>,
        max_output: usize,
        out: &mut BytesMut,
    ) -> BatchEnd {
        let Some(mut client) = self.state.clients.take(id) else {
            return BatchEnd::closed();
        };
        if client.signal.is_closed() {
            // Killed (CLIENT KILL) while this batch was on its way: no more replies.
            self.state.clients.put_back(client);
            return BatchEnd::closed();
        }
        let now = self.now;
        let own_unit = self.busy.is_none();
        if !busy_changes.is_empty() {
            cmd::tx::apply_busy_changes(self.dbs, &mut client, self.state, now, busy_changes);
        }
        if own_unit {
            self.state.resume_random();
            crate::store::access::stamp(self.dbs, &self.state.config, now);
        }
        let start = out.len();
        // A panic inside a command is contained (one boundary per batch, so
        // the common path pays nothing per command): it is logged, the
        // client gets `errors::INTERNAL` and is closed after the replies
        // (its state may be half changed), and its disconnect releases its
        // watches and subscriptions as for any client; the server goes on.
        let batch = std::panic::AssertUnwindSafe(|| {
            while out.len() - start < max_output
                && !client.close_after_reply
                && client.blocked.is_none()
                && client.handoff.is_none()
            {
                let Some(args) = requests.pop_front() else {
                    break;
                };
                client.reply_pending = out.len() > start || client.outbox.has_messages();
                self.execute(&mut client, &args, out);
                if client.blocked.as_ref().is_some_and(|b| b.is_postponed()) {
                    // Held by CLIENT PAUSE: it runs again once the pause ends.
                    requests.push_front(args);
                } else {
                    requests.done(args);
                }
            }
        });
        if let Err(panic) = std::panic::catch_unwind(batch) {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            tracing::error!(
                "command '{}' of client {} panicked: {what}; closing the client",
                client.last_cmd,
                client.id
            );
            client.close_after_reply = true;
            errors::err(errors::INTERNAL).encode(out, client.resp3);
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
        if own_unit {
            self.state.keep_random();
            crate::tracking::end_batch(self.dbs, self.state, Some(&mut client), now);
            self.state.flush_effects();
        }
        crate::net::client_mem::after_batch(self.state, &mut client, out.len() - start, now);
        if client.signal.is_closed() {
            // Over its output limit, or evicted: closed without these replies.
            out.truncate(start);
            close = true;
        }
        let blocked = client.blocked.is_some();
        let reply_fault = std::mem::take(&mut client.reply_fault);
        let handoff = client.handoff.take();
        let view = Some(ClientView::of(self.state, &client));
        self.state.clients.put_back(client);
        if let Some(shutdown) = self.server_shutdown.filter(|_| self.state.shutdown_requested) {
            crate::shutdown::stop_serving(self.dbs, self.state, shutdown);
        }
        BatchEnd {
            close,
            blocked,
            reply_fault,
            view,
            handoff,
            killed: self.state.clients.take_killed(),
        }
    }

    /// Runs one command for `client`, appending its reply to `out`.
    #[inline]
    fn execute(&mut self, client: &mut ClientState, args: &[Bytes], out: &mut BytesMut) {
        let now = self.now;
        // Messages that came before this command go before its reply.
        take_messages(client, out);
        let reply = {
            let mut ctx = Ctx {
                dbs: self.dbs,
                client,
                server: self.state,
                now,
                scripting: self.scripting.as_deref_mut(),
                caller: Caller::Client,
            };
            ctx.client.argv_mem = args.iter().map(Bytes::len).sum();
            let reply = crate::exec::process(&mut ctx, args, self.busy);
            if self.busy.is_none() {
                crate::exec::end_unit(&mut ctx);
            }
            ctx.client.argv_mem = 0;
            reply
        };
        // ASKING holds for the next command only, or the transaction it
        // opens (Redis's `resetClient`).
        if !std::mem::take(&mut client.asking_kept) && client.multi.is_none() {
            client.asking = false;
        }
        if self.state.shutdown_requested {
            // Redis closes the connection without replying to a successful SHUTDOWN.
            return;
        }
        // CLIENT REPLY OFF | SKIP: the reply is dropped; SKIP covers one
        // command. Pushes are not replies: a subscriber still gets its
        // subscribe confirmations, in RESP2 too (Redis 7.0's
        // `CLIENT_PUSHING` passes the silencing flags whatever the protocol).
        let silent = client.reply_off || client.reply_skip;
        client.reply_skip = std::mem::take(&mut client.reply_skip_next);
        // Invalidations of keys evicted before the command come first,
        // then what was published to the client while it ran (its own
        // PUBLISH to a channel it listens to): Redis writes a message into
        // the client's buffer as it is sent, ahead of the reply.
        crate::tracking::flush_before_reply(self.state, client, now, out);
        if !silent {
            // Or amid and after it, where the command marked its reply.
            let (messages, n) = client.encode_reply_among_messages(&reply, out);
            client.outbox.written(messages, n);
        } else {
            client.reply_marks.clear();
            take_messages(client, out);
            reply.encode_pushes(out, client.resp3);
        }
        // Invalidations of keys this client changed follow its reply.
        crate::tracking::flush_pending(self.state, client, now, out);
    }
}

/// Moves the messages waiting in `client`'s outbox into the batch's
/// replies, in order.
fn take_messages(client: &ClientState, out: &mut BytesMut) {
    if !client.outbox.has_messages() {
        return;
    }
    let messages = client.outbox.take();
    let mut n = 0;
    for message in &messages {
        out.extend_from_slice(message);
        n += message.len();
    }
    client.outbox.written(messages.len(), n);
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use super::*;
    use crate::net::clients::{ConnSignal, Outbox};
    use crate::store::SystemClock;

    fn client(id: u64) -> ClientState {
        let addr: SocketAddr = ([127, 0, 0, 1], 0).into();
        let signal = Arc::new(ConnSignal::default());
        let outbox = Outbox::new(signal.clone());
        ClientState::new(id, addr, addr, 0, signal, outbox)
    }

    fn run(engine: &mut Engine, id: u64, args: &[&str]) -> (String, bool) {
        let mut requests = Requests::default();
        requests.push_back(args.iter().map(|a| Bytes::copy_from_slice(a.as_bytes())).collect());
        let mut out = BytesMut::new();
        let end = engine
            .batch()
            .run(id, vec![], &mut requests, &mut None, usize::MAX, &mut out);
        (String::from_utf8_lossy(&out).into_owned(), end.close)
    }

    #[test]
    fn a_panicking_command_is_contained_and_its_client_released() {
        let mut engine = Engine::new(
            Config::default(),
            Arc::new(SystemClock),
            0,
            Arc::new(Shared::default()),
            Arc::new(CloseSignal::default()),
        );
        engine.connect(client(1));
        engine.connect(client(2));
        assert_eq!(run(&mut engine, 1, &["WATCH", "k"]).0, "+OK\r\n");
        run(&mut engine, 1, &["HELLO", "3"]);
        assert!(run(&mut engine, 1, &["SUBSCRIBE", "ch"]).0.contains("subscribe"));
        let (reply, close) = run(&mut engine, 1, &["coordis-test-panic"]);
        assert_eq!(
            (reply.as_str(), close),
            ("-ERR internal error running the command\r\n", true)
        );
        // The client is still registered until its connection disconnects.
        assert_eq!(
            run(&mut engine, 2, &["PUBSUB", "NUMSUB", "ch"]).0,
            "*2\r\n$2\r\nch\r\n:1\r\n"
        );
        assert!(engine.dbs[0].is_watched(b"k"));
        engine.disconnect(1);
        assert_eq!(
            run(&mut engine, 2, &["PUBSUB", "NUMSUB", "ch"]).0,
            "*2\r\n$2\r\nch\r\n:0\r\n"
        );
        assert!(!engine.dbs[0].is_watched(b"k"), "the watch was released");
        // The server goes on.
        assert_eq!(run(&mut engine, 2, &["SET", "k", "v"]).0, "+OK\r\n");
        assert_eq!(run(&mut engine, 2, &["GET", "k"]).0, "$1\r\nv\r\n");
    }
}
