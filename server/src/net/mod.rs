//! The network side: listeners, connection tasks, graceful shutdown.
//!
//! A connection task reads bytes, parses every complete request already
//! buffered, runs them on the engine as one batch, and writes all replies
//! with one write. It never touches the keyspace. Accept errors (for example
//! running out of file descriptors) are logged and retried after a short
//! back-off; they never stop the server.
//!
//! A connection accepted on a TLS listener (`tls-port`) does its handshake
//! in its own task first ([`tls`] builds the configuration); then the same
//! serving loop runs on the TLS stream: the loop is generic over the stream.
//! So is the Unix-domain listener's ([`unix`], `unixsocket`): its clients
//! are shown by the socket's path and count as local.

pub(crate) mod bus;
pub(crate) mod client_mem;
pub(crate) mod clients;
pub(crate) mod listeners;
pub(crate) mod outgoing;
pub(crate) mod tls;
pub(crate) mod unix;

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::Poll;

use parking_lot::{Mutex, MutexGuard};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::config::Config;
use crate::engine::{BatchEnd, Engine};
use crate::errors;
use crate::exec::busy::{self, BusyCtx, ClientView, TxChange};
use crate::lua::ScriptState;
use crate::net::clients::{ClientAddr, ClientState, CloseSignal, ConnSignal, Outbox};
use crate::protocol::{ProtocolLimits, RequestParser, Requests};
use crate::state::Shared;
use crate::store::Clock;

/// How long shutdown waits for connections to finish their in-flight batch.
pub const DRAIN_DEADLINE: Duration = Duration::from_secs(5);

/// How long a script stopped at shutdown gets to reach its next hook and
/// return: shutdown stops a busy script this long before the drain
/// deadline, so the drain ends by then; one still running after it is
/// left behind.
pub const SCRIPT_STOP_GRACE: Duration = Duration::from_millis(500);

/// How long a connection task waits for the engine before it looks at the
/// script state again.
const BUSY_POLL: Duration = Duration::from_millis(1);

/// Initial read buffer per connection.
const READ_BUFFER: usize = 16 * 1024;

/// Replies a connection collects before it writes them and runs the rest of
/// a pipeline (see [`Engine::batch`]). A client that pipelines without
/// reading therefore holds at most about this much output (plus one reply)
/// in the server: once the socket's send buffer is full, its task stops
/// running and reading its requests until the client reads.
const MAX_BATCH_OUTPUT: usize = 64 * 1024;

/// At shutdown, how long a connection waits for what its client sent
/// before the stop (one last read).
const LAST_READ_WAIT: Duration = Duration::from_millis(20);

/// A connection keeps its output buffer from batch to batch unless it grew
/// past this (a large reply); then it is freed once written.
const OUTPUT_BUFFER_KEEP: usize = 2 * MAX_BATCH_OUTPUT;

/// A bound, not yet running server.
pub(crate) struct Bound {
    /// The first plain listener's address; with TLS only, the first TLS one's.
    pub addr: SocketAddr,
    /// The first TLS listener's address (`tls-port`).
    pub tls_addr: Option<SocketAddr>,
    clock: Arc<dyn Clock>,
    /// Made at bind time, so the embedding API holds it (the test clock
    /// settles the server through it) before the first connection.
    pub engine: Arc<Mutex<Engine>>,
    /// Holds the listening sockets too (CONFIG SET rebinds them).
    shared: Arc<Shared>,
    /// The RDB file's bytes, parsed once serving starts (clients that
    /// connect meanwhile get `-LOADING`).
    pending_load: Option<crate::engine::PendingLoad>,
    /// Cluster mode: the bus's listener ([`bus`]).
    bus: Option<tokio::net::TcpListener>,
    /// `unixsocket`: the Unix-domain listener.
    unix: Option<unix::UnixListen>,
}

/// Binds every address of `config.bind` on `config.port` (the port of the
/// first listener is reused for the others when it was 0) and, with a TLS
/// port, on it for TLS; TLS is configured first, as Redis does at start
/// (the reason logged, then Redis's line, and an error for the caller to
/// exit on).
pub(crate) async fn bind(config: Config, clock: Arc<dyn Clock>, shutdown: Arc<CloseSignal>) -> io::Result<Bound> {
    let shared = Arc::new(Shared::default());
    if tls::wanted(&config.tls) {
        match tls::configure(&config.tls) {
            Ok(acceptors) => shared.tls.install(acceptors),
            Err(line) => {
                tracing::warn!("{line}");
                tracing::warn!("{}", errors::tls::STARTUP_FAILED);
                return Err(io::Error::new(io::ErrorKind::InvalidInput, errors::tls::STARTUP_FAILED));
            }
        }
    }
    shared.tls.set_auth(tls::AuthClients::parse(&config.tls.auth_clients));
    let tls_port = (config.tls.port != 0 || config.tls.free_port).then_some(config.tls.port);
    // `port 0` beside a TLS port: TLS only, as Redis. Otherwise 0 is a free port.
    let plain_port = (config.port != 0 || config.tls.port == 0).then_some(config.port);
    let options = listeners::ListenOptions::of(&config);
    options.warn_if_capped();
    let (plain, tls_addr) = shared
        .listeners
        .bind_at_start(&config.bind, plain_port, tls_port, options)
        .inspect_err(|_| {
            if let Some(port) = tls_port {
                tracing::warn!("{}", errors::tls::listen_failed(port));
            }
        })?;
    let addr = plain
        .or(tls_addr)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no bind address"))?;
    let port = plain.map_or(0, |a| a.port());
    let bus = if config.cluster.enabled {
        let port = if config.cluster.port != 0 {
            config.cluster.port
        } else {
            port.checked_add(crate::cluster::PORT_INCR).ok_or_else(|| {
                io::Error::other(
                    "Redis port number too high. Cluster communication port is 10,000 port numbers higher \
                     than your Redis port. Your Redis port number must be 55535 or less.",
                )
            })?
        };
        let listener = listeners::tokio_listen(SocketAddr::new(addr.ip(), port), options)
            .inspect_err(|_| tracing::warn!("Failed listening on port {port} (cluster), aborting."))?;
        Some(listener)
    } else {
        None
    };
    // After the TCP and TLS listeners, as Redis opens them.
    let unix = match config.unixsocket.as_str() {
        "" => None,
        path => Some(unix::UnixListen::bind(path, config.unixsocketperm, options.backlog)?),
    };
    let mut engine = Engine::new(config, clock.clone(), port, shared.clone(), shutdown);
    let pending_load = engine.load_at_start()?;
    let engine = Arc::new(Mutex::new(engine));
    let _ = shared.engine.set(Arc::downgrade(&engine));
    Ok(Bound {
        addr,
        tls_addr,
        clock,
        engine,
        shared,
        pending_load,
        bus,
        unix,
    })
}

impl Bound {
    /// The Unix socket's path as configured (`unixsocket`), if bound.
    /// The server's shared state (read without the engine's lock).
    pub(crate) fn shared(&self) -> Arc<Shared> {
        self.shared.clone()
    }

    pub(crate) fn unix_path(&self) -> Option<Arc<str>> {
        self.unix.as_ref().map(|u| u.path.clone())
    }
}

/// Loads the file at start while the server answers `-LOADING`: an RDB
/// file is parsed off the engine lock, then installed under it; the
/// append-only files are replayed a slice at a time, the lock handed to
/// the waiting connections between slices.
async fn finish_load(
    engine: Arc<Mutex<Engine>>,
    shared: Arc<Shared>,
    pending: crate::engine::PendingLoad,
) -> io::Result<()> {
    let bytes = match pending {
        crate::engine::PendingLoad::Rdb(bytes) => bytes,
        crate::engine::PendingLoad::Aof(mut load) => {
            let replaying = tokio::task::spawn_blocking(move || loop {
                let mut e = engine.lock();
                if e.aof_load_step(&mut load)? {
                    return e.finish_aof_load(&load);
                }
                parking_lot::MutexGuard::unlock_fair(e);
                let_waiters_in(&shared.script);
            });
            return replaying.await.unwrap_or_else(|e| Err(io::Error::other(e)));
        }
    };
    let (config, now) = engine.lock().load_inputs();
    let parsing = tokio::task::spawn_blocking(move || {
        crate::persist::rdb::disk::parse(&bytes, &config, now, Some(&shared.loading))
    });
    let parsed = parsing.await.unwrap_or_else(|e| Err(io::Error::other(e)));
    // No script runs while loading (EVAL is refused): the lock is free in
    // microseconds.
    engine.lock().finish_load(parsed)
}

/// One task counted in [`ScriptState::engine_waiters`] while it lives.
struct Waiting<'a>(&'a std::sync::atomic::AtomicUsize);

impl<'a> Waiting<'a> {
    fn new(count: &'a std::sync::atomic::AtomicUsize) -> Self {
        count.fetch_add(1, Ordering::AcqRel);
        Waiting(count)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Between two slices of the loader: connections waiting for the lock get
/// it first. One parked on the lock has it already (the unlock was fair);
/// one between two of its timed waits, as on a loaded machine, is given
/// up to [`LET_IN_FOR`] to take it, or the loader could take the lock back
/// slice after slice until the load ends, every client kept waiting.
fn let_waiters_in(script: &ScriptState) {
    let since = std::time::Instant::now();
    while script.engine_waiters.load(Ordering::Acquire) > 0 && since.elapsed() < LET_IN_FOR {
        std::thread::sleep(Duration::from_micros(50));
    }
}

/// The longest the loader waits for the lock's waiters between two slices.
const LET_IN_FOR: Duration = Duration::from_millis(2);

impl Bound {
    /// Serves until `shutdown` is triggered (by the owner or by SHUTDOWN),
    /// then drains connections. `loaded` hears once the dataset is loaded
    /// (at once without a file to load); a file that fails to load stops
    /// the server, as Redis exits.
    pub(crate) async fn serve(mut self, shutdown: Arc<CloseSignal>, loaded: impl FnOnce(io::Result<()>)) {
        let (shared, engine) = (self.shared.clone(), self.engine.clone());
        let (stop_tx, stop_rx) = watch::channel(false);
        let expiry = tokio::spawn(active_expiry(engine.clone(), shared.clone(), stop_rx.clone()));
        let bus = self
            .bus
            .map(|l| tokio::spawn(bus::serve(engine.clone(), l, stop_rx.clone())));
        let timer = tokio::spawn(blocked_timeouts(
            engine.clone(),
            shared.clone(),
            self.clock.clone(),
            stop_rx.clone(),
        ));
        let replica = tokio::spawn(crate::replica::link::run(
            engine.clone(),
            shared.clone(),
            stop_rx.clone(),
        ));
        let mut accepts = JoinSet::new();
        let ctx = ConnCtx {
            engine: engine.clone(),
            shared: shared.clone(),
            stop: stop_rx.clone(),
            clock: self.clock.clone(),
            shutdown: shutdown.clone(),
        };
        // With nothing to load, ready before the first connection is served.
        let pending_load = self.pending_load.take();
        let mut loaded = Some(loaded);
        if pending_load.is_none() {
            if let Some(ready) = loaded.take() {
                ready(Ok(()));
            }
        }
        let (slots, mut rebound) = shared.listeners.serve();
        for slot in slots {
            accepts.spawn(accept_loop(slot, ctx.clone()));
        }
        let unix_path = self.unix.as_ref().map(|u| u.path.clone());
        if let Some(listener) = self.unix.take() {
            accepts.spawn(accept_loop(Arc::new(listener), ctx.clone()));
        }
        if let Some(pending) = pending_load {
            let load = tokio::select! {
                r = finish_load(engine.clone(), shared.clone(), pending) => Some(r),
                // Stopped while loading: a clean stop, never announced ready.
                () = shutdown.closed() => None,
            };
            // Ended before the announcement: an embedded server's owner
            // gets it loaded.
            shared.loading.end();
            if let Some(load) = load {
                if load.is_err() {
                    shutdown.close();
                }
                if let Some(ready) = loaded.take() {
                    ready(load);
                }
            }
        }
        // Until shutdown, sockets CONFIG SET binds get their accept loop.
        // A failure of the append-only file under `always` stops the
        // server as SHUTDOWN NOSAVE would (Redis exits; the reason is logged).
        loop {
            tokio::select! {
                () = shutdown.closed() => break,
                () = shared.aof.fatal.closed() => {
                    shared.shutdown_nosave.store(true, Ordering::Release);
                    shutdown.close();
                    break;
                }
                Some(slot) = rebound.recv() => {
                    accepts.spawn(accept_loop(slot, ctx.clone()));
                }
            }
        }
        // Stopped by a failure of the append-only file: its reason is
        // logged, and Redis would have exited on the spot.
        let fatal = shared.aof.fatal.is_closed();
        if !fatal {
            crate::supervised::stopping(&shared);
        }
        let _ = stop_tx.send(true);
        // A script in flight may finish within the drain deadline (its client
        // gets the real reply); past it, it is stopped, even one that wrote,
        // so the engine frees. SHUTDOWN NOSAVE has stopped it already.
        let deadline = tokio::time::Instant::now() + DRAIN_DEADLINE;
        while shared.script.is_running()
            && !shared.script.must_stop()
            && tokio::time::Instant::now() + SCRIPT_STOP_GRACE < deadline
        {
            tokio::time::sleep(BUSY_POLL).await;
        }
        shared.script.stop_for_shutdown();
        let stopped = tokio::time::Instant::now();
        while shared.script.is_running() && stopped.elapsed() < SCRIPT_STOP_GRACE {
            tokio::time::sleep(BUSY_POLL).await;
        }
        if shared.script.is_running() {
            // A script inside one long C call (a pattern search that
            // backtracks for hours, say) never reaches its hook. The tasks
            // waiting for the engine would wait as long: leave them all
            // behind, so the server still stops.
            tracing::warn!("a script did not stop; shutting down without waiting for it");
            return;
        }
        // Connections have the drain deadline; a script started meanwhile is
        // stopped at its first hook.
        let drained = tokio::time::timeout_at(deadline + SCRIPT_STOP_GRACE, async {
            while accepts.join_next().await.is_some() {}
            let _ = expiry.await;
            let _ = timer.await;
            let _ = replica.await;
            if let Some(bus) = bus {
                let _ = bus.await;
            }
        })
        .await;
        if drained.is_err() {
            tracing::warn!("the drain did not finish in time; shutting down without it");
        }
        engine.lock().stop_persistence();
        if let Some(path) = unix_path {
            unix::UnixListen::remove_file(&path);
        }
        if !fatal {
            tracing::warn!("coordis is now ready to exit, bye bye...");
        }
    }
}

/// How often a shutdown looks again whether its replicas caught up.
const SHUTDOWN_REPLICA_POLL: Duration = Duration::from_millis(10);

/// A signal's shutdown (Redis's `prepareForShutdown` with the signal's
/// flags): unless NOW, it waits up to `shutdown-timeout` for replicas that
/// have not acknowledged the whole stream, writes held; then the final
/// save. True when the server is to stop; false when the save failed
/// without FORCE (it keeps serving, as Redis does).
pub(crate) async fn signal_shutdown(engine: &Mutex<Engine>, shared: &Shared, signal: crate::StopSignal) -> bool {
    // A busy script holds the engine the decision needs: as at any
    // shutdown, it may finish within the drain deadline, and is then
    // stopped, even one that wrote.
    if shared.script.is_running() {
        let deadline = tokio::time::Instant::now() + DRAIN_DEADLINE;
        while shared.script.is_running() && tokio::time::Instant::now() + SCRIPT_STOP_GRACE < deadline {
            tokio::time::sleep(BUSY_POLL).await;
        }
    }
    // From here any script is stopped at its next hook (one started while
    // the decision waits for lagging replicas too), so the decision gets
    // the engine; one stuck in a C call never frees it, and the server
    // stops without its final save rather than hang.
    shared.script.stop_for_shutdown();
    let go = signal_shutdown_decided(engine, shared, signal).await;
    if !go {
        // The server keeps serving: scripts run again.
        shared.script.resume_after_refused_shutdown();
    }
    go
}

/// The engine for a signal's shutdown, once the script holding it (told
/// to stop) has ended; `None` when it has not within [`SCRIPT_STOP_GRACE`].
async fn engine_for_shutdown<'a>(engine: &'a Mutex<Engine>, shared: &Shared) -> Option<MutexGuard<'a, Engine>> {
    let got = tokio::time::timeout(SCRIPT_STOP_GRACE, lock_engine(engine, &shared.script)).await;
    if got.is_err() {
        tracing::warn!("a script did not stop; shutting down without the final save");
    }
    got.ok()
}

/// [`signal_shutdown`]'s decision, scripts told to stop: it begins, waits
/// for lagging replicas if it must (until they caught up, its time is
/// over or SHUTDOWN ABORT cancels it), then makes its final save
/// ([`crate::shutdown`]).
async fn signal_shutdown_decided(engine: &Mutex<Engine>, shared: &Shared, signal: crate::StopSignal) -> bool {
    let Some(begun) = engine_for_shutdown(engine, shared)
        .await
        .map(|mut e| e.begin_signal_shutdown(signal))
    else {
        return true;
    };
    if let Some(go) = begun {
        return go;
    }
    loop {
        tokio::time::sleep(SHUTDOWN_REPLICA_POLL).await;
        match engine_for_shutdown(engine, shared)
            .await
            .map(|e| e.signal_shutdown_ready())
        {
            Some(Some(true)) => break,
            Some(Some(false)) => {}
            // Aborted: the server goes on.
            Some(None) => return false,
            None => return true,
        }
    }
    engine_for_shutdown(engine, shared)
        .await
        .is_none_or(|mut e| e.finish_signal_shutdown())
}

/// Active expiry: every 1000/hz ms a slow cycle removes due keys in
/// bounded steps, releasing the lock between steps so commands interleave,
/// for as long as `active-expire-effort` allows
/// ([`crate::engine::ExpireCycle`]); fast
/// cycles follow between ticks while one stopped with keys still due.
/// Each tick then closes the clients idle past `timeout` and runs the
/// other crons. DEBUG PAUSE-CRON holds the ticks.
async fn active_expiry(engine: Arc<Mutex<Engine>>, shared: Arc<Shared>, mut stop: watch::Receiver<bool>) {
    // Read again each round, unless a script holds the engine.
    let mut cycle = engine.lock().expire_cycle();
    let mut tick = tokio::time::Instant::now() + cycle.interval;
    // When the last cycle started, if it stopped at its limit with keys
    // still due: the next fast cycle starts two fast cycles' time after it.
    let mut behind: Option<tokio::time::Instant> = None;
    loop {
        if let Some(e) = engine.try_lock() {
            cycle = e.expire_cycle();
        }
        let wake = behind.map_or(tick, |started| (started + cycle.fast * 2).min(tick));
        tokio::select! {
            _ = stopped(&mut stop) => return,
            _ = tokio::time::sleep_until(wake) => {}
        }
        let started = tokio::time::Instant::now();
        let slow = started >= tick;
        if slow {
            tick = started + cycle.interval;
        }
        // Nothing expires or saves while the files at start load (as
        // Redis's serverCron does not run then): a replayed command may
        // still act on a key past its deadline.
        if shared.loading.is_active() {
            behind = None;
            continue;
        }
        // DEBUG PAUSE-CRON 1 holds the tick (Redis's `serverCron`): no
        // slow cycle, no cron. Fast cycles are not the tick's (Redis runs
        // them before each sleep of its event loop): a run of them under
        // way goes on until it catches up. A tick that finds the engine
        // taken (a script runs) is skipped: it could not tell.
        if slow && engine.try_lock().is_none_or(|e| e.cron_paused()) {
            continue;
        }
        let limit = if slow { cycle.slow } else { cycle.fast };
        behind = expire_cycle(&engine, limit).await.then_some(started);
        if !slow {
            continue;
        }
        if let Some(mut e) = engine.try_lock().filter(|e| !e.cron_paused()) {
            e.shutdown_cron();
            e.close_idle_clients();
            e.clients_cron();
            e.tracking_cron();
            e.sample_rates();
            e.persistence_cron();
            e.replication_cron();
            e.cluster_cron();
        }
    }
}

/// One active-expiry cycle of at most `limit` of work, in lock holds of
/// [`crate::engine::EXPIRE_STEP_KEYS`] keys with a yield between them;
/// true when it stopped at the limit with keys still due.
/// The cycle is accounted (INFO, the `expire-cycle` latency event) under
/// its last step's hold of the lock.
async fn expire_cycle(engine: &Mutex<Engine>, limit: Duration) -> bool {
    let mut spent = Duration::ZERO;
    loop {
        let ended = {
            let started = std::time::Instant::now();
            // A running script holds the engine: expiry waits for the next cycle.
            let Some(mut e) = engine.try_lock() else {
                return false;
            };
            let more = e.active_expire_step();
            spent += started.elapsed();
            let ended = !more || spent >= limit;
            if ended {
                e.expire_cycle_done(spent, more);
            }
            ended.then_some(more)
        };
        if let Some(capped) = ended {
            return capped;
        }
        tokio::task::yield_now().await;
    }
}

/// Times blocked clients out: sleeps until the earliest deadline of a
/// blocked client, has the engine answer those past it, and again. Woken
/// early when a client blocks with an earlier deadline, or when a manual
/// clock is moved. Without deadlines it sleeps until woken: idle blocked
/// clients cost nothing.
async fn blocked_timeouts(
    engine: Arc<Mutex<Engine>>,
    shared: Arc<Shared>,
    clock: Arc<dyn Clock>,
    mut stop: watch::Receiver<bool>,
) {
    let mut moved = clock.moved();
    loop {
        let next = lock_engine(&engine, &shared.script).await.expire_blocked();
        // The clock runs in milliseconds: a deadline is passed once the
        // clock is past it, so wake one millisecond after it. A frozen test
        // clock reaches no deadline by itself: only its moves wake us.
        let frozen = clock.as_virtual().is_some_and(|c| c.is_frozen());
        let wait = next
            .filter(|_| !frozen)
            .map(|at| Duration::from_millis(at.saturating_sub(clock.now_ms()) + 1));
        let clock_moved = async {
            match moved.as_mut() {
                Some(rx) => {
                    if rx.changed().await.is_err() {
                        std::future::pending::<()>().await
                    }
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = stopped(&mut stop) => return,
            _ = shared.block_timer.notified() => {}
            _ = clock_moved => {}
            _ = async {
                match wait {
                    Some(wait) => tokio::time::sleep(wait).await,
                    None => std::future::pending().await,
                }
            } => {}
        }
    }
}

/// What every connection task of a listener shares.
#[derive(Clone)]
struct ConnCtx {
    engine: Arc<Mutex<Engine>>,
    shared: Arc<Shared>,
    stop: watch::Receiver<bool>,
    clock: Arc<dyn Clock>,
    /// Triggered by SHUTDOWN NOSAVE while a script keeps the engine busy.
    shutdown: Arc<CloseSignal>,
}

/// Where an accepted client is, as the engine shows it.
struct Endpoint {
    peer: ClientAddr,
    local: ClientAddr,
    /// Accepted on a TLS listener: the handshake comes first.
    tls: bool,
}

/// A listening socket an accept loop serves: a TCP one (plain or TLS) or
/// the Unix-domain one.
trait Listen: Send + Sync + 'static {
    type Stream: AsyncRead + AsyncWrite + Unpin + Send + 'static;

    /// The next connection; `None` once the socket is closed.
    fn accept(&self) -> impl std::future::Future<Output = Option<io::Result<(Self::Stream, Endpoint)>>> + Send;

    /// Sets the socket options of an accepted connection.
    fn prepare(_stream: &Self::Stream, _ctx: &ConnCtx) {}

    /// Closes the socket now, at shutdown: a client that connects while
    /// the connections drain is refused, as by a Redis that exited, not
    /// accepted into the backlog and never answered (the TCP slots are
    /// also held by the listener registry, so dropping this handle alone
    /// would not close them).
    fn close(&self) {}
}

impl Listen for listeners::Slot {
    type Stream = TcpStream;

    async fn accept(&self) -> Option<io::Result<(TcpStream, Endpoint)>> {
        let accepted = listeners::Slot::accept(self).await?;
        Some(accepted.map(|(socket, peer)| {
            let local = socket.local_addr().unwrap_or(peer);
            let end = Endpoint {
                peer: peer.into(),
                local: local.into(),
                tls: self.tls,
            };
            (socket, end)
        }))
    }

    fn close(&self) {
        listeners::Slot::close(self);
    }

    fn prepare(socket: &TcpStream, ctx: &ConnCtx) {
        let _ = socket.set_nodelay(true);
        set_keepalive(socket, ctx.shared.tcp_keepalive.load(Ordering::Relaxed));
    }
}

impl Listen for unix::UnixListen {
    type Stream = tokio::net::UnixStream;

    async fn accept(&self) -> Option<io::Result<(tokio::net::UnixStream, Endpoint)>> {
        let accepted = unix::UnixListen::accept(self).await;
        Some(accepted.map(|stream| {
            let end = Endpoint {
                peer: ClientAddr::Unix(self.path.clone()),
                local: ClientAddr::Unix(self.path.clone()),
                tls: false,
            };
            (stream, end)
        }))
    }
}

/// Accepts on `slot` until it is closed (CONFIG SET rebinding) and serves
/// its connections until shutdown: they outlive their listening socket.
async fn accept_loop<L: Listen>(slot: Arc<L>, ctx: ConnCtx) {
    let mut conns = JoinSet::new();
    // Every connection's signal, to stop them all at shutdown.
    let mut signals: HashMap<tokio::task::Id, Arc<ConnSignal>> = HashMap::new();
    let mut stop = ctx.stop.clone();
    let mut backoff = Duration::from_millis(5);
    let mut accepting = true;
    loop {
        tokio::select! {
            _ = stopped(&mut stop) => break,
            Some(done) = conns.join_next_with_id(), if !conns.is_empty() => {
                signals.remove(&done.map_or_else(|e| e.id(), |(id, ())| id));
            }
            accepted = slot.accept(), if accepting => match accepted {
                None => accepting = false,
                Some(Ok((socket, end))) => {
                    backoff = Duration::from_millis(5);
                    L::prepare(&socket, &ctx);
                    let signal = Arc::new(ConnSignal::default());
                    let task = conns.spawn(connection(socket, end, ctx.clone(), signal.clone()));
                    signals.insert(task.id(), signal);
                }
                Some(Err(e)) => {
                    tracing::warn!("accept error: {e}; retrying in {backoff:?}");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(1));
                }
            }
        }
    }
    slot.close();
    drop(slot);
    for signal in signals.values() {
        signal.stop();
    }
    let drained = tokio::time::timeout(DRAIN_DEADLINE, async { while conns.join_next().await.is_some() {} }).await;
    if drained.is_err() {
        tracing::warn!("drain deadline passed; closing {} connection(s)", conns.len());
        conns.abort_all();
    }
}

/// Decrements the open-connection count however the task ends.
struct ConnectedGuard(Arc<Shared>);

impl Drop for ConnectedGuard {
    fn drop(&mut self) {
        self.0.connected.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Serves one accepted connection; on a TLS listener (`tls`), after its
/// handshake. As in Redis, the client exists (CLIENT LIST, `timeout`)
/// from the accept on, so a handshake that stalls is closed as an idle
/// client would be, and one that fails is logged and dropped; neither
/// holds up other clients (each connection is a task of its own).
async fn connection<S: AsyncRead + AsyncWrite + Unpin + Send>(
    mut socket: S,
    end: Endpoint,
    ctx: ConnCtx,
    signal: Arc<ConnSignal>,
) {
    let Endpoint { peer, local, tls } = end;
    if ctx.shared.is_down() {
        // "The server is down" (test-control plane): the connection closes
        // at once, before a word is exchanged.
        return;
    }
    let open = ctx.shared.connected.fetch_add(1, Ordering::Relaxed) + 1;
    let _guard = ConnectedGuard(ctx.shared.clone());
    if open > ctx.shared.maxclients.load(Ordering::Relaxed) {
        ctx.shared.rejected.fetch_add(1, Ordering::Relaxed);
        // Before a TLS handshake nothing can be said: the connection just
        // drops, as in Redis.
        if !tls {
            let mut out = BytesMut::new();
            errors::err(errors::MAX_CLIENTS).encode(&mut out, false);
            let _ = socket.write_all(&out).await;
        }
        return;
    }
    if !tls && refused_by_protected_mode(&ctx, &peer) {
        let _ = socket.write_all(&denied()).await;
        return;
    }
    let acceptor = match tls.then(|| ctx.shared.tls.acceptor()) {
        None => None,
        Some(Some(acceptor)) => Some(acceptor),
        Some(None) => {
            tracing::warn!(
                "{}: no TLS configuration to verify client certificates with",
                errors::tls::ACCEPT_FAILED
            );
            return;
        }
    };
    let id = ctx.shared.client_ids.fetch_add(1, Ordering::Relaxed) + 1;
    let now = ctx.clock.now_ms();
    let outbox = Outbox::new(signal.clone());
    let client = ClientState::new(id, peer.clone(), local, now, signal.clone(), outbox.clone());
    // Registered with the engine now if it is free, so that CLIENT LIST,
    // INFO and CLIENT KILL see a client before its first request, as in
    // Redis. While a script runs, on its first batch instead (see
    // `execute`): it can still be answered -BUSY meanwhile.
    let mut pending = Some(client);
    if !ctx.shared.script.is_running() {
        if let Some(mut engine) = ctx.engine.try_lock_for(BUSY_POLL) {
            engine.connect(pending.take().expect("a new client"));
        }
    }
    // Each arm ends with its socket closed, before the engine lock is
    // taken below: a command waiting for this connection's end
    // (`clients::wait_gone`) does not wait behind the engine.
    let served = match acceptor {
        None => {
            let served = serve_connection(&mut socket, id, &peer, &ctx, &signal, &mut pending, &outbox).await;
            drop(socket);
            served
        }
        Some(acceptor) => {
            let handshake = tokio::select! {
                r = acceptor.accept(socket) => Some(r),
                // The idle-client timeout, CLIENT KILL, shutdown.
                () = signal.ended() => None,
            };
            match handshake {
                None => Ok(()),
                Some(Err(e)) => {
                    tracing::warn!("{}: {e}", errors::tls::ACCEPT_FAILED);
                    Ok(())
                }
                Some(Ok(mut stream)) => {
                    if refused_by_protected_mode(&ctx, &peer) {
                        let _ = stream.write_all(&denied()).await;
                        let _ = stream.shutdown().await;
                        Ok(())
                    } else {
                        serve_connection(&mut stream, id, &peer, &ctx, &signal, &mut pending, &outbox).await
                    }
                }
            }
        }
    };
    signal.set_gone();
    if let Err(e) = served {
        tracing::debug!("client {id} ({peer}): {e}");
    }
    if pending.is_none() {
        let mut engine = lock_engine(&ctx.engine, &ctx.shared.script).await;
        engine.replica_gone(id);
        engine.disconnect(id);
    }
}

/// Whether protected mode refuses `peer` (logged); never a Unix-domain
/// client, as in Redis.
fn refused_by_protected_mode(ctx: &ConnCtx, peer: &ClientAddr) -> bool {
    let refused = ctx.shared.protected_mode.load(Ordering::Relaxed)
        && !ctx.shared.auth_required.load(Ordering::Relaxed)
        && match peer {
            ClientAddr::Tcp(addr) => !is_loopback_client(addr),
            ClientAddr::Unix(_) => false,
        };
    if refused {
        tracing::warn!("refused client {peer}: protected mode (no password set)");
    }
    refused
}

/// Protected mode's `-DENIED` reply, encoded.
fn denied() -> BytesMut {
    let mut out = BytesMut::new();
    errors::err(errors::DENIED).encode(&mut out, false);
    out
}

/// Takes the engine lock without pinning a worker thread behind a running
/// script: waits asynchronously while one runs. A wait is counted in
/// [`ScriptState::engine_waiters`].
pub(crate) async fn lock_engine<'a>(engine: &'a Mutex<Engine>, script: &ScriptState) -> MutexGuard<'a, Engine> {
    if let Some(guard) = engine.try_lock() {
        return guard;
    }
    let _counted = Waiting::new(&script.engine_waiters);
    loop {
        let running = script.is_running();
        {
            let guard = if running {
                engine.try_lock()
            } else {
                engine.try_lock_for(BUSY_POLL)
            };
            if let Some(guard) = guard {
                return guard;
            }
        }
        if running {
            tokio::time::sleep(BUSY_POLL).await;
        }
    }
}

/// Whether protected mode lets `peer` in: Redis 7.0 accepts exactly
/// 127.0.0.1 and ::1 (not the rest of 127.0.0.0/8).
fn is_loopback_client(peer: &SocketAddr) -> bool {
    match peer.ip() {
        std::net::IpAddr::V4(ip) => ip == std::net::Ipv4Addr::LOCALHOST,
        std::net::IpAddr::V6(ip) => ip == std::net::Ipv6Addr::LOCALHOST,
    }
}

/// The serving loop, for a plain socket and a TLS stream alike.
async fn serve_connection<S: AsyncRead + AsyncWrite + Unpin>(
    socket: &mut S,
    id: u64,
    peer: &ClientAddr,
    ctx: &ConnCtx,
    signal: &ConnSignal,
    pending: &mut Option<ClientState>,
    outbox: &Outbox,
) -> io::Result<()> {
    let mut parser = RequestParser::new();
    let mut buf = BytesMut::with_capacity(READ_BUFFER);
    let mut out = BytesMut::new();
    let mut requests = Requests::default();
    let mut conn = ConnState {
        view: ClientView {
            authenticated: !ctx.shared.auth_required.load(Ordering::Relaxed),
            local: peer.is_local(),
            ..ClientView::default()
        },
        ..ConnState::default()
    };
    // Shutdown's one last read from the kernel has been made.
    let mut last_read_done = false;
    // The most the read buffer held since the cron last trimmed it, and
    // whether it gave back everything to an idle client (which gets room
    // again when it next sends).
    let mut peak = 0;
    let mut trimmed = false;
    loop {
        let shared = &ctx.shared;
        let limits = ProtocolLimits {
            max_bulk_len: shared.proto_max_bulk_len.load(Ordering::Relaxed),
            max_multibulk_len: shared.proto_max_multibulk_len.load(Ordering::Relaxed),
            pre_auth: !conn.view.authenticated,
            ..ProtocolLimits::default()
        };
        let mut protocol_error = None;
        let unparsed = buf.len();
        // Before AUTH succeeds, one request at a time: the limits change with it.
        while conn.view.authenticated || requests.is_empty() {
            match parser.next_into(&mut buf, &limits, &mut requests) {
                Ok(true) => {}
                Ok(false) => break,
                Err(e) => {
                    tracing::debug!("client {id}: protocol error: {e}");
                    protocol_error = Some(e);
                    break;
                }
            }
        }
        // While the batch runs its bytes still count, as Redis trims its
        // query buffer only once the commands read are processed (CLIENT
        // LIST shows `qbuf=26` for its own request).
        let parsed = unparsed - buf.len();
        outbox
            .mem
            .set_query(buf.len() + parsed, buf.capacity() + parsed, parser.partial_len());
        if requests.is_empty() && protocol_error.is_none() {
            let limit = shared.client_query_buffer_limit.load(Ordering::Relaxed);
            if buf.len() > limit {
                tracing::warn!(
                    "closing client {id} ({peer}) that reached max query buffer length: {} bytes (client-query-buffer-limit {limit})",
                    buf.len()
                );
                return Ok(());
            }
            if !trimmed && buf.capacity() - buf.len() < 4096 {
                buf.reserve(READ_BUFFER);
            }
            let read = tokio::select! {
                biased;
                wake = woken(signal, outbox, false) => match wake {
                    Woken::TrimQuery(how) => {
                        trimmed = trim_query_buffer(&mut buf, &mut peak, how, parser.partial_len());
                        outbox.mem.set_query(buf.len(), buf.capacity(), parser.partial_len());
                        continue;
                    }
                    Woken::Ended if signal.is_closed() || last_read_done => return Ok(()),
                    Woken::Ended => {
                        // Shutdown: what the client sent before it is in
                        // flight too (the stop can be seen before the
                        // socket's readiness, say after a script held the
                        // worker): one more short read, then serve what
                        // came and end.
                        last_read_done = true;
                        match tokio::time::timeout(LAST_READ_WAIT, socket.read_buf(&mut buf)).await {
                            Ok(Ok(read @ 1..)) => read,
                            _ => return Ok(()),
                        }
                    }
                    Woken::Messages | Woken::Unblocked => {
                        write_messages(socket, outbox, signal, shared).await?;
                        continue;
                    }
                },
                // An idle client is closed by the engine, on the server clock.
                r = socket.read_buf(&mut buf) => r?,
                // What busy answers left for the engine (ACL log entries,
                // refusal counts) and neither the script's hook nor its end
                // applied is applied once the script ends, as Redis
                // records it at once, not at this client's next request.
                () = script_ended(&shared.script), if conn.posted || !conn.changes.is_empty() => {
                    let end = execute(ctx, id, pending, &mut conn, &mut Requests::default(), &mut None, &mut out).await;
                    if end.close {
                        return Ok(());
                    }
                    continue;
                }
            };
            if read == 0 {
                return Ok(());
            }
            trimmed = false;
            peak = peak.max(buf.len());
            shared.net_input_bytes.fetch_add(read as u64, Ordering::Relaxed);
            shared.reads_processed.fetch_add(1, Ordering::Relaxed);
            if shared.client_eviction.load(Ordering::Relaxed) && pending.is_none() {
                // Redis counts a client's query buffer after each read: one
                // that grows without a request to run can be evicted now.
                outbox.mem.set_query(buf.len(), buf.capacity(), parser.partial_len());
                lock_engine(&ctx.engine, &shared.script).await.evict_clients();
            }
            continue;
        }
        while !requests.is_empty() || protocol_error.is_some() {
            let pipelined = requests.len() > 1;
            let mut end = execute(
                ctx,
                id,
                pending,
                &mut conn,
                &mut requests,
                &mut protocol_error,
                &mut out,
            )
            .await;
            outbox.mem.set_query(buf.len(), buf.capacity(), parser.partial_len());
            // A pipelining client's replies are written after every other
            // ready connection has run its batch, as Redis writes replies in
            // `beforeSleep`: a yielded task runs again after the runtime's
            // next I/O poll. Replies then leave in one burst, and clients
            // send their next requests in one burst too, so the server wakes
            // once for many. Measured at -P 16: +10% on SET, +10-20% on ZADD.
            // A single request is answered at once: there the yield cost a
            // task re-poll (about 500 instructions, 5% of the request's CPU)
            // and gained nothing at -c 50 or -c 500.
            if pipelined {
                tokio::task::yield_now().await;
            }
            if end.reply_fault.delay_ms > 0 {
                // A fault rule delays these replies.
                tokio::time::sleep(Duration::from_millis(end.reply_fault.delay_ms)).await;
            }
            // With the append-only file on, no reply leaves before the
            // effects of its batch (and of every batch before it) are
            // written, and under `appendfsync always` fsynced. When that
            // failed (fatal under `always`), they never leave: the server
            // stops, as Redis exits, and the client sees the drop.
            if shared.aof.waits() && !shared.aof.wait().await {
                return Ok(());
            }
            if !end.killed.is_empty() {
                clients::wait_gone(&end.killed).await;
            }
            outbox.mem.set_writing(out.len(), out.capacity());
            // Only a kill ends the write; at shutdown, replies to requests
            // already read are still written, within the drain deadline.
            let written = match end.reply_fault.slice {
                None => tokio::select! {
                    r = socket.write_all(&out) => Some(r),
                    _ = signal.closed() => None,
                },
                Some((bytes, pause_ms)) => tokio::select! {
                    r = write_sliced(socket, &out, bytes, pause_ms) => Some(r),
                    _ = signal.closed() => None,
                },
            };
            match written {
                Some(r) => r?,
                None => return Ok(()),
            }
            outbox.mem.set_writing(0, out.capacity());
            shared.net_output_bytes.fetch_add(out.len() as u64, Ordering::Relaxed);
            shared.writes_processed.fetch_add(1, Ordering::Relaxed);
            if let Some(handoff) = end.handoff.take() {
                let link = crate::repl::link::LinkCtx {
                    engine: &ctx.engine,
                    script: &ctx.shared.script,
                    signal,
                    stop: ctx.stop.clone(),
                };
                return crate::repl::link::run(socket, std::mem::take(&mut buf), *handoff, link).await;
            }
            if end.close {
                let _ = socket.shutdown().await;
                return Ok(());
            }
            if out.capacity() > OUTPUT_BUFFER_KEEP {
                out = BytesMut::new();
                outbox.mem.reset_reply_buffer();
            }
            out.clear();
            if end.blocked && !wait_unblocked(socket, &mut buf, signal, outbox, shared).await? {
                return Ok(());
            }
        }
    }
}

/// Writes a batch's replies a piece of `bytes` at a time with a pause
/// between pieces (a fault rule's slicing).
async fn write_sliced<S: AsyncWrite + Unpin>(
    socket: &mut S,
    out: &[u8],
    bytes: usize,
    pause_ms: u64,
) -> io::Result<()> {
    for (i, piece) in out.chunks(bytes.max(1)).enumerate() {
        if i > 0 {
            tokio::time::sleep(Duration::from_millis(pause_ms)).await;
        }
        socket.write_all(piece).await?;
        socket.flush().await?;
    }
    Ok(())
}

/// Runs requests on the engine (as many as [`MAX_BATCH_OUTPUT`] allows).
/// While a script runs, the engine is locked for its whole duration: the
/// task waits without blocking its thread, and once the script has run past
/// the busy threshold it answers the requests itself, as Redis does
/// (`-BUSY`, and SCRIPT KILL / SHUTDOWN NOSAVE served), and leaves those
/// only the engine can answer (HELLO, AUTH, WATCH, ...) for the script's
/// hook ([`at_hook`]).
async fn execute(
    ctx: &ConnCtx,
    id: u64,
    pending: &mut Option<ClientState>,
    conn: &mut ConnState,
    requests: &mut Requests,
    protocol_error: &mut Option<String>,
    out: &mut BytesMut,
) -> BatchEnd {
    let script = &ctx.shared.script;
    if ctx.shared.is_frozen() {
        ctx.shared.until_thawed().await;
    }
    // Counted in `engine_waiters` from the first failed try to the batch.
    let mut waiting = None;
    loop {
        // A script told to stop (SCRIPT KILL, FUNCTION KILL, shutdown) ends
        // at its next hook: requests that come after wait for it, as in
        // Redis, where it ends before the next request is read.
        if script.is_running() && script.is_busy(ctx.clock.now_ms()) && !script.must_stop() {
            let refresh = match busy_batch(ctx, &mut conn.view, &mut conn.changes, requests, protocol_error, out) {
                Busy::Answered(end) => {
                    // What the answers changed goes to the script's hook,
                    // to be counted and logged while the script runs, as
                    // Redis does at once (a client the engine has not met
                    // yet keeps its changes for its first batch).
                    if !conn.changes.is_empty() && pending.is_none() {
                        script.inbox.post(busy::Hooked {
                            id,
                            pending: None,
                            changes: std::mem::take(&mut conn.changes),
                            request: None,
                            done: None,
                        });
                        conn.posted = true;
                    }
                    return end;
                }
                Busy::Engine { refresh } => refresh,
            };
            let request = if refresh { None } else { requests.pop_front() };
            match at_hook(ctx, id, pending, conn, request).await {
                Ok(served) => {
                    out.extend_from_slice(&served.out);
                    if let Some(args) = served.held {
                        requests.push_front(args);
                    }
                    let mut end = served.end;
                    if let Some(view) = end.view.take() {
                        conn.view = view;
                    }
                    if refresh && !end.close {
                        // Answer again, with the client's view as it is now.
                        continue;
                    }
                    return end;
                }
                // The script ended, or is stopping, first: the engine runs
                // it after the script.
                Err(request) => {
                    if let Some(args) = request {
                        requests.push_front(args);
                    }
                }
            }
        }
        {
            // Without a script the lock is held for microseconds at a time
            // (or a slice of a load); the bound keeps a script that starts
            // meanwhile from pinning us.
            let guard = ctx.engine.try_lock().or_else(|| {
                waiting.get_or_insert_with(|| Waiting::new(&script.engine_waiters));
                if script.is_running() {
                    None
                } else {
                    ctx.engine.try_lock_for(BUSY_POLL)
                }
            });
            if let Some(mut engine) = guard {
                if conn.posted {
                    // No script runs: what the hook has not taken is ours.
                    conn.posted = false;
                    if let Some(hooked) = script.inbox.withdraw(id) {
                        conn.changes.splice(0..0, hooked.changes);
                    }
                }
                if let Some(client) = pending.take() {
                    engine.connect(client);
                }
                let changes = std::mem::take(&mut conn.changes);
                let mut end = engine
                    .batch()
                    .run(id, changes, requests, protocol_error, MAX_BATCH_OUTPUT, out);
                if let Some(view) = end.view.take() {
                    conn.view = view;
                }
                return end;
            }
        }
        if script.is_running() {
            tokio::time::sleep(BUSY_POLL).await;
        }
    }
}

/// Resolves once no script runs.
async fn script_ended(script: &crate::lua::ScriptState) {
    while script.is_running() {
        tokio::time::sleep(BUSY_POLL).await;
    }
}

/// What a connection keeps of its client between batches, for answering
/// while a script is busy ([`crate::exec::busy`]).
#[derive(Debug, Default)]
struct ConnState {
    /// The client as the engine last reported it, updated by busy answers.
    view: ClientView,
    /// Transaction changes made by busy answers, applied at the next batch.
    changes: Vec<TxChange>,
    /// Changes were left in the script's inbox ([`busy::Inbox`]): the
    /// next batch on the engine takes back what the hook did not apply.
    posted: bool,
}

/// How [`busy_batch`] ended.
enum Busy {
    /// Every request is answered (or the connection is to close).
    Answered(BatchEnd),
    /// The request at the front needs the engine (it stays queued), or,
    /// with `refresh`, the client's view does ([`busy::Answer::Refresh`]).
    Engine { refresh: bool },
}

/// Answers queued requests while a script is busy, without the engine
/// ([`crate::exec::busy`]), up to one that needs the engine.
fn busy_batch(
    ctx: &ConnCtx,
    view: &mut ClientView,
    changes: &mut Vec<TxChange>,
    requests: &mut Requests,
    protocol_error: &mut Option<String>,
    out: &mut BytesMut,
) -> Busy {
    let mut busy = BusyCtx {
        view,
        changes,
        script: &ctx.shared.script,
        shutdown: &ctx.shutdown,
        nosave: &ctx.shared.shutdown_nosave,
        guards: ctx.shared.guards(),
        running_function: &ctx.shared.running_function,
        close: false,
    };
    let resp3 = busy.view.resp3;
    while let Some(args) = requests.pop_front() {
        match busy::answer(&mut busy, &args) {
            busy::Answer::Reply(reply) => reply.encode(out, resp3),
            busy::Answer::Engine => {
                requests.push_front(args);
                return Busy::Engine { refresh: false };
            }
            busy::Answer::Refresh => {
                requests.push_front(args);
                return Busy::Engine { refresh: true };
            }
        }
        if busy.close {
            break;
        }
    }
    let mut close = busy.close;
    if let Some(text) = protocol_error.take() {
        if !close {
            errors::protocol(text).encode(out, resp3);
        }
        close = true;
    }
    Busy::Answered(BatchEnd {
        close,
        ..BatchEnd::default()
    })
}

/// Leaves `request` (with `None`, only the client's pending changes, to
/// refresh its view) for the busy script's hook ([`busy::Inbox`]) and
/// waits for its answer. `Err` gives the request back when the script ends,
/// or is told to stop, before its hook took it: the engine runs it then.
async fn at_hook(
    ctx: &ConnCtx,
    id: u64,
    pending: &mut Option<ClientState>,
    conn: &mut ConnState,
    request: Option<Vec<Bytes>>,
) -> Result<busy::Served, Option<Vec<Bytes>>> {
    let script = &ctx.shared.script;
    let (done, mut answer) = tokio::sync::oneshot::channel();
    script.inbox.post(busy::Hooked {
        id,
        pending: pending.take(),
        changes: std::mem::take(&mut conn.changes),
        request,
        done: Some(done),
    });
    // Whatever this client left before is now part of this entry.
    conn.posted = false;
    // The answer is polled, not awaited: awaiting would have the script's
    // thread wake this task, and while that thread is still a tokio worker
    // (its hook has not managed to leave it) tokio queues the task in the
    // worker's own slot, where no other worker takes it.
    loop {
        tokio::time::sleep(BUSY_POLL).await;
        match answer.try_recv() {
            Ok(served) => return Ok(served),
            // The hook dropped the request without an answer only if its
            // batch could not run: the connection ends.
            Err(tokio::sync::oneshot::error::TryRecvError::Closed) => {
                return Ok(busy::Served {
                    end: BatchEnd::closed(),
                    out: BytesMut::new(),
                    held: None,
                })
            }
            Err(tokio::sync::oneshot::error::TryRecvError::Empty) => {}
        }
        if script.is_running() && !script.must_stop() {
            continue;
        }
        if let Some(hooked) = script.inbox.withdraw(id) {
            *pending = hooked.pending;
            conn.changes = hooked.changes;
            return Err(hooked.request);
        }
        // Taken by the hook: its answer is on its way.
    }
}

/// Why a connection task waiting for its next request (or for the reply
/// to a blocking command) was woken other than by its socket.
enum Woken {
    /// Its [`ConnSignal`] was closed or stopped: CLIENT KILL, an output
    /// limit, shutdown.
    Ended,
    /// Messages were published to it.
    Messages,
    /// The client is no longer blocked (only while waiting for that).
    Unblocked,
    /// The cron asks for read-buffer space back (only while waiting for a
    /// request): [`crate::net::clients::TRIM_TO_PEAK`] or `TRIM_IDLE`.
    TrimQuery(u8),
}

/// Gives back read-buffer space as Redis's `clientsCronResizeQueryBuffer`
/// does, when more than 4 KB of it is free: all of it for a client idle for
/// more than 2 s (`TRIM_IDLE`), else, for a buffer past 32 KB and twice
/// the most it held lately (`peak`), down to that (never below what it
/// holds or the request being read, `partial`). The peak starts over.
/// Returns whether an idle client's buffer was emptied, to leave it so
/// until the client sends again.
fn trim_query_buffer(buf: &mut BytesMut, peak: &mut usize, how: u8, partial: usize) -> bool {
    const FREE_WORTH_TRIMMING: usize = 4 * 1024;
    const RESIZE_THRESHOLD: usize = 32 * 1024;
    let cap = buf.capacity();
    let keep = if cap - buf.len() <= FREE_WORTH_TRIMMING {
        None
    } else if how == crate::net::clients::TRIM_IDLE {
        Some(buf.len())
    } else if cap > RESIZE_THRESHOLD && cap / 2 > *peak {
        Some(buf.len().max(*peak).max(partial))
    } else {
        None
    };
    if let Some(keep) = keep {
        let mut fresh = BytesMut::with_capacity(keep);
        fresh.extend_from_slice(buf);
        *buf = fresh;
    }
    *peak = buf.len().max(partial);
    keep.is_some() && how == crate::net::clients::TRIM_IDLE
}

/// Resolves when the connection's signal is closed or stopped, or messages
/// arrive, or (`blocked`: the client waits in a blocking command) the
/// client is unblocked.
fn woken<'a>(
    signal: &'a ConnSignal,
    outbox: &'a Outbox,
    blocked: bool,
) -> impl std::future::Future<Output = Woken> + 'a {
    std::future::poll_fn(move |cx| {
        signal.register(cx);
        if signal.is_ended() {
            Poll::Ready(Woken::Ended)
        } else if outbox.has_messages() {
            Poll::Ready(Woken::Messages)
        } else if blocked && !signal.is_blocked() {
            Poll::Ready(Woken::Unblocked)
        } else if let Some(how) = (!blocked).then(|| signal.take_trim()).flatten() {
            Poll::Ready(Woken::TrimQuery(how))
        } else {
            Poll::Pending
        }
    })
}

/// Waits while the client is blocked in a command ([`crate::blocked`]):
/// writes what its outbox receives (its reply comes that way), keeps reading
/// the socket to see the client leave (what it sends waits in `buf`), and
/// returns true once the client is unblocked and its reply written; false
/// when the connection is to end (the client left or was killed, shutdown,
/// or its query buffer passed the limit).
async fn wait_unblocked<S: AsyncRead + AsyncWrite + Unpin>(
    socket: &mut S,
    buf: &mut BytesMut,
    signal: &ConnSignal,
    outbox: &Outbox,
    shared: &Shared,
) -> io::Result<bool> {
    loop {
        if buf.capacity() - buf.len() < 4096 {
            buf.reserve(READ_BUFFER);
        }
        let wake = tokio::select! {
            biased;
            wake = woken(signal, outbox, true) => wake,
            read = socket.read_buf(buf) => {
                if read? == 0 {
                    return Ok(false);
                }
                outbox.mem.set_query(buf.len(), buf.capacity(), 0);
                if buf.len() > shared.client_query_buffer_limit.load(Ordering::Relaxed) {
                    tracing::warn!("closing a blocked client that reached max query buffer length");
                    return Ok(false);
                }
                continue;
            }
        };
        match wake {
            Woken::Ended => {
                // A stopped connection (shutdown, or a client unblocked to
                // be closed after its reply) writes what it was answered.
                if !signal.is_closed() && outbox.has_messages() {
                    write_messages(socket, outbox, signal, shared).await?;
                }
                return Ok(false);
            }
            Woken::Messages => write_messages(socket, outbox, signal, shared).await?,
            Woken::TrimQuery(_) => {}
            Woken::Unblocked => {
                if outbox.has_messages() {
                    write_messages(socket, outbox, signal, shared).await?;
                }
                return Ok(true);
            }
        }
    }
}

/// Writes every message waiting in `outbox` with one write. A subscriber
/// that stops reading blocks this write; its output limit (which closes the
/// signal) or shutdown still ends it.
async fn write_messages<S: AsyncWrite + Unpin>(
    socket: &mut S,
    outbox: &Outbox,
    signal: &ConnSignal,
    shared: &Shared,
) -> io::Result<()> {
    // A served blocked client's reply comes this way: written first (and
    // never, should that fail under `always`).
    if shared.aof.waits() && !shared.aof.wait().await {
        return Err(io::Error::other("the append-only file cannot be written"));
    }
    let messages = outbox.take();
    let mut batch = BytesMut::with_capacity(messages.iter().map(Bytes::len).sum());
    for message in &messages {
        batch.extend_from_slice(message);
    }
    // The write first: a connection stopped after its last answer (a
    // demoted primary's blocked client) still writes it if it can.
    tokio::select! {
        biased;
        r = socket.write_all(&batch) => r?,
        _ = signal.ended() => return Err(io::Error::other("closed while writing messages")),
    }
    outbox.written(messages.len(), batch.len());
    shared.net_output_bytes.fetch_add(batch.len() as u64, Ordering::Relaxed);
    shared.writes_processed.fetch_add(1, Ordering::Relaxed);
    Ok(())
}

/// Resolves once the server-wide stop flag is set.
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// Enables TCP keepalive probes as Redis's `anetKeepAlive` sets them: the
/// first after `secs` seconds idle, then every `secs / 3` (at least 1),
/// three unanswered closing the connection (0: leave off). A refusal is
/// logged; the connection goes on without.
fn set_keepalive(socket: &TcpStream, secs: u64) {
    if secs == 0 {
        return;
    }
    let idle = Duration::from_secs(secs.min(i32::MAX as u64));
    let keepalive = socket2::TcpKeepalive::new()
        .with_time(idle)
        .with_interval((idle / 3).max(Duration::from_secs(1)));
    #[cfg(any(target_os = "linux", target_os = "macos", target_os = "freebsd"))]
    let keepalive = keepalive.with_retries(3);
    if let Err(e) = socket2::SockRef::from(socket).set_tcp_keepalive(&keepalive) {
        tracing::debug!("tcp-keepalive {secs}: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn keepalive_is_set_as_redis_sets_it() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let _client = TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
        let (accepted, _) = listener.accept().await.unwrap();
        set_keepalive(&accepted, 30);
        let socket = socket2::SockRef::from(&accepted);
        assert!(socket.keepalive().unwrap());
        #[cfg(target_os = "linux")]
        {
            assert_eq!(socket.tcp_keepalive_time().unwrap(), Duration::from_secs(30));
            assert_eq!(socket.tcp_keepalive_interval().unwrap(), Duration::from_secs(10));
            assert_eq!(socket.tcp_keepalive_retries().unwrap(), 3);
        }
    }
}
