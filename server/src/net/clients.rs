//! Per-connection state kept by the engine, the signal that reaches a
//! connection task (to close or stop it, or to hand it published messages),
//! and the server-wide shutdown signal; [`ClientAddr`], where a client
//! connected from (TCP, or the `unixsocket` listener).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use atomic_waker::AtomicWaker;
use bytes::{Bytes, BytesMut};
use parking_lot::Mutex;
use tokio::sync::Notify;

use crate::net::client_mem::{ConnMem, SoftLimitState};
use crate::protocol::Reply;
use crate::repl::OutputLimit;

/// Where a client is connected: a TCP peer (or local) address, or the
/// Unix-domain listener (`unixsocket`). Shown as Redis shows it: `ip:port`,
/// or the listener's path with port 0 (`/tmp/redis.sock:0`) on both ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientAddr {
    Tcp(SocketAddr),
    /// The listener's path, shared by all its clients.
    Unix(Arc<str>),
}

/// The IP Redis reports for a Unix-domain peer (`anetFdToString`): a
/// replica connected that way is listed under it.
const UNIX_PEER_IP: &str = "/unixsocket";

impl ClientAddr {
    /// Connected through the Unix-domain listener (CLIENT LIST flag `U`).
    pub fn is_unix(&self) -> bool {
        matches!(self, ClientAddr::Unix(_))
    }

    /// Whether the client counts as local for `enable-*-command local`
    /// and `enable-protected-configs local`: a loopback address, or the
    /// Unix socket (Redis's `islocalClient`).
    pub fn is_local(&self) -> bool {
        match self {
            ClientAddr::Tcp(a) => a.ip().is_loopback(),
            ClientAddr::Unix(_) => true,
        }
    }

    /// The peer's IP as text (a Unix-domain peer's is Redis's placeholder).
    pub fn ip_text(&self) -> String {
        match self {
            ClientAddr::Tcp(a) => a.ip().to_string(),
            ClientAddr::Unix(_) => UNIX_PEER_IP.to_string(),
        }
    }
}

impl From<SocketAddr> for ClientAddr {
    fn from(addr: SocketAddr) -> Self {
        ClientAddr::Tcp(addr)
    }
}

impl std::fmt::Display for ClientAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClientAddr::Tcp(a) => a.fmt(f),
            ClientAddr::Unix(path) => write!(f, "{path}:0"),
        }
    }
}

/// Asks a server to shut down (SHUTDOWN, or the owner of an embedded
/// server); any number of tasks may wait for it.
#[derive(Debug, Default)]
pub struct CloseSignal {
    closed: AtomicBool,
    notify: Notify,
}

impl CloseSignal {
    /// Sets the flag and wakes every task waiting in [`CloseSignal::closed`].
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.notify.notify_waiters();
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Resolves once [`CloseSignal::close`] has been called.
    pub async fn closed(&self) {
        loop {
            // Register interest before checking the flag, so a close between
            // the check and the await is not missed.
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.is_closed() {
                return;
            }
            notified.await;
        }
    }
}

/// How the server reaches one client's connection task outside its
/// request/reply cycle: to close it (CLIENT KILL, an output limit), to stop
/// it at shutdown once its batch in flight is answered, or to have it write
/// messages published to it (see [`Outbox`]).
///
/// Only the connection task waits on it, so one [`AtomicWaker`] holds its
/// waker. A task waiting for its next request polls this at every wake-up,
/// which for an unpipelined client is every request; polling costs a waker
/// comparison and an atomic load. (Polling a `Notify`, a `watch` and an mpsc
/// receiver instead cost about 1,300 instructions per request.)
#[derive(Debug, Default)]
pub struct ConnSignal {
    closed: AtomicBool,
    stopping: AtomicBool,
    /// The client is blocked in a command ([`crate::blocked`]): its
    /// connection runs nothing more until the engine clears this (after
    /// queueing the reply in the outbox).
    blocked: AtomicBool,
    /// The connection task has closed its socket (set once, at its end).
    gone: AtomicBool,
    /// The server's cron asks the task to give back read-buffer space
    /// ([`ConnSignal::trim_query`]): 0 no, [`TRIM_TO_PEAK`] or [`TRIM_IDLE`].
    trim: AtomicU8,
    waker: AtomicWaker,
}

/// [`ConnSignal::take_trim`]: the buffer is large for what the client sent
/// lately; give back down to that.
pub(crate) const TRIM_TO_PEAK: u8 = 1;
/// The client has sent nothing for more than 2 s: give back all free space.
pub(crate) const TRIM_IDLE: u8 = 2;

impl ConnSignal {
    /// Closes the connection: no more requests run, the reply being written
    /// is abandoned. Wakes the connection task.
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.wake();
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Server shutdown: the connection ends once it has answered the
    /// requests it has already read. Wakes the connection task.
    pub fn stop(&self) {
        self.stopping.store(true, Ordering::Release);
        self.wake();
    }

    /// Marks the client blocked, or (after its reply is queued) unblocked,
    /// which wakes the connection task.
    pub fn set_blocked(&self, blocked: bool) {
        self.blocked.store(blocked, Ordering::Release);
        if !blocked {
            self.wake();
        }
    }

    /// Asks the connection task to give back read-buffer space (Redis's
    /// `clientsCronResizeQueryBuffer`; `how` is [`TRIM_TO_PEAK`] or
    /// [`TRIM_IDLE`]). Wakes the task.
    pub(crate) fn trim_query(&self, how: u8) {
        self.trim.store(how, Ordering::Release);
        self.wake();
    }

    /// The trim asked for since the last call, if any.
    pub(crate) fn take_trim(&self) -> Option<u8> {
        if self.trim.load(Ordering::Relaxed) == 0 {
            return None;
        }
        Some(self.trim.swap(0, Ordering::AcqRel)).filter(|&how| how != 0)
    }

    /// The connection task closed its socket: its peer has seen the end.
    pub fn set_gone(&self) {
        self.gone.store(true, Ordering::Release);
    }

    pub fn is_gone(&self) -> bool {
        self.gone.load(Ordering::Acquire)
    }

    pub fn is_blocked(&self) -> bool {
        self.blocked.load(Ordering::Acquire)
    }

    /// Closed or stopping: the connection should end once it waits.
    pub fn is_ended(&self) -> bool {
        self.is_closed() || self.stopping.load(Ordering::Acquire)
    }

    /// Registers the calling task to be woken by [`ConnSignal::close`],
    /// [`ConnSignal::stop`] or a published message. Register first, then
    /// look at what it guards, so that a signal sent between the two is not
    /// missed.
    pub fn register(&self, cx: &Context<'_>) {
        self.waker.register(cx.waker());
    }

    fn wake(&self) {
        self.waker.wake();
    }

    /// Resolves once [`ConnSignal::close`] has been called.
    pub async fn closed(&self) {
        self.wait_until(Self::is_closed).await
    }

    /// Resolves once the connection is closed or stopping ([`ConnSignal::is_ended`]).
    pub async fn ended(&self) {
        self.wait_until(Self::is_ended).await
    }

    /// Resolves once `done` holds, checked after each wake-up.
    async fn wait_until(&self, done: fn(&Self) -> bool) {
        std::future::poll_fn(|cx: &mut Context<'_>| {
            self.register(cx);
            if done(self) {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
        .await
    }
}

/// Messages published to a client, waiting for its connection task to write
/// them.
#[derive(Debug)]
pub struct Outbox {
    queue: Mutex<Vec<Bytes>>,
    /// Whether `queue` has messages: set after a push, cleared by a take,
    /// both under the lock, so the connection task can look without it.
    queued: AtomicBool,
    /// Bytes queued and not yet written (CLIENT LIST `omem`).
    pending: AtomicUsize,
    /// Messages queued and not yet written (CLIENT LIST `oll`, Redis's
    /// reply list length).
    pending_messages: AtomicUsize,
    /// When the client's output first passed its soft limit.
    pub(crate) soft: SoftLimitState,
    /// The connection task's buffers, for CLIENT LIST and the limits.
    pub(crate) mem: ConnMem,
    /// Wakes the connection task when a message arrives.
    signal: Arc<ConnSignal>,
}

impl Outbox {
    pub fn new(signal: Arc<ConnSignal>) -> Arc<Outbox> {
        Arc::new(Outbox {
            queue: Mutex::new(Vec::new()),
            queued: AtomicBool::new(false),
            pending: AtomicUsize::new(0),
            pending_messages: AtomicUsize::new(0),
            soft: SoftLimitState::default(),
            mem: ConnMem::default(),
            signal,
        })
    }

    /// Queues a message and wakes the connection task. Returns false when
    /// the client is over `limit` (its class's `client-output-buffer-limit`)
    /// and must be disconnected; the message is then dropped.
    pub(crate) fn push(&self, data: Bytes, now_ms: u64, limit: &OutputLimit) -> bool {
        let used = self.used() + data.len();
        if self.soft.breaks(used, now_ms, limit) {
            return false;
        }
        self.pending.fetch_add(data.len(), Ordering::Relaxed);
        self.pending_messages.fetch_add(1, Ordering::Relaxed);
        {
            let mut queue = self.queue.lock();
            queue.push(data);
            self.queued.store(true, Ordering::Release);
        }
        self.signal.wake();
        true
    }

    /// Queues the reply of a command the client was blocked in. Replies are
    /// not held to the output limits here (the client asked for them; the
    /// next check counts them); the bytes count as pending until written.
    pub fn push_reply(&self, data: Bytes) {
        self.pending.fetch_add(data.len(), Ordering::Relaxed);
        self.pending_messages.fetch_add(1, Ordering::Relaxed);
        {
            let mut queue = self.queue.lock();
            queue.push(data);
            self.queued.store(true, Ordering::Release);
        }
        self.signal.wake();
    }

    /// How many messages are waiting.
    pub(crate) fn len(&self) -> usize {
        self.queue.lock().len()
    }

    /// Whether messages are waiting (register with the [`ConnSignal`]
    /// before asking, so a push after the answer still wakes the task).
    pub fn has_messages(&self) -> bool {
        self.queued.load(Ordering::Acquire)
    }

    /// Takes every waiting message, oldest first.
    pub fn take(&self) -> Vec<Bytes> {
        let mut queue = self.queue.lock();
        self.queued.store(false, Ordering::Relaxed);
        std::mem::take(&mut *queue)
    }

    /// Records that `messages` taken messages, `n` bytes, were written to
    /// the socket.
    pub fn written(&self, messages: usize, n: usize) {
        self.pending.fetch_sub(n, Ordering::Relaxed);
        self.pending_messages.fetch_sub(messages, Ordering::Relaxed);
    }

    /// Messages and bytes not yet written (`oll`, `omem`).
    pub(crate) fn backlog(&self) -> (usize, usize) {
        (
            self.pending_messages.load(Ordering::Relaxed),
            self.pending.load(Ordering::Relaxed),
        )
    }

    /// All output not yet written: messages and the batch being written
    /// (what the output limits count).
    pub(crate) fn used(&self) -> usize {
        self.pending.load(Ordering::Relaxed) + self.mem.obl()
    }
}

/// How long a reply waits for the sockets its command closed
/// ([`wait_gone`]). A connection task sees its close at once unless it is in
/// a write a fault rule slows or in the append-only file's wait; past this
/// the reply goes anyway rather than hang.
const GONE_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// How often [`wait_gone`] looks. The wait is rare (a kill, a staged
/// restart) and short (one task wake-up each), so polling beats a
/// per-connection notification every connection would carry.
const GONE_POLL: std::time::Duration = std::time::Duration::from_millis(1);

/// Resolves once every connection in `killed` has closed its socket (or
/// after [`GONE_WAIT`]), so the reply of the command that closed them
/// reaches its client after their peers have seen the end: a client that
/// reads "OK" from CLIENT KILL, or sees its own connection dropped by
/// `COORDIS.SERVER RESTART`, finds the others closed, as with Redis.
pub(crate) async fn wait_gone(killed: &[Arc<ConnSignal>]) {
    let deadline = tokio::time::Instant::now() + GONE_WAIT;
    while !killed.iter().all(|s| s.is_gone()) && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(GONE_POLL).await;
    }
}

/// [`wait_gone`] for a caller outside the runtime (the test-control plane's
/// blocking methods); it must not hold the engine lock.
pub(crate) fn wait_gone_blocking(killed: &[Arc<ConnSignal>]) {
    let deadline = std::time::Instant::now() + GONE_WAIT;
    while !killed.iter().all(|s| s.is_gone()) && std::time::Instant::now() < deadline {
        std::thread::sleep(GONE_POLL);
    }
}

/// Every connected client. While a batch runs, its client is taken out of
/// the registry (so a handler holding it can still reach the others through
/// the server state) and put back after: the client keeps its slot, so both
/// are array accesses where a map keyed by id would hash twice per batch.
/// Lookups by id (CLIENT KILL, pub/sub delivery, serving blocked clients)
/// go through an index.
#[derive(Debug, Default)]
pub struct Clients {
    slots: Vec<Option<Box<ClientState>>>,
    /// Client id -> slot, for every registered client (taken out or not).
    index: HashMap<u64, usize, foldhash::fast::RandomState>,
    /// Slots freed by disconnects, reused first.
    free: Vec<usize>,
    /// Connections a command closed ([`Clients::kill_where`]) whose sockets
    /// may still be open: that command's reply waits until they are
    /// ([`wait_gone`]), as Redis frees a killed client before it replies.
    /// Entries already gone are dropped at each kill, so the list stays
    /// bounded even where no reply takes it.
    killed: Vec<Arc<ConnSignal>>,
}

impl Clients {
    /// Registers a client in a free slot.
    pub fn insert(&mut self, mut client: Box<ClientState>) {
        let slot = self.free.pop().unwrap_or_else(|| {
            self.slots.push(None);
            self.slots.len() - 1
        });
        client.slot = slot;
        self.index.insert(client.id, slot);
        self.slots[slot] = Some(client);
    }

    /// Unregisters client `id` (its connection ended) and frees its slot.
    pub fn remove(&mut self, id: u64) -> Option<Box<ClientState>> {
        let slot = self.index.remove(&id)?;
        self.free.push(slot);
        self.slots[slot].take()
    }

    /// Takes client `id` out, keeping its slot for [`Clients::put_back`].
    pub fn take(&mut self, id: u64) -> Option<Box<ClientState>> {
        let slot = *self.index.get(&id)?;
        self.slots[slot].take()
    }

    /// Returns a client [`Clients::take`] took out to its slot.
    pub fn put_back(&mut self, client: Box<ClientState>) {
        let slot = client.slot;
        debug_assert!(self.slots[slot].is_none(), "slot {slot} is free");
        self.slots[slot] = Some(client);
    }

    /// Client `id`, unless it is taken out.
    pub fn get(&self, id: u64) -> Option<&ClientState> {
        self.slots[*self.index.get(&id)?].as_deref()
    }

    pub fn get_mut(&mut self, id: u64) -> Option<&mut ClientState> {
        self.slots[*self.index.get(&id)?].as_deref_mut()
    }

    /// Closes every client in the registry `selected` picks (not those
    /// taken out: the caller closes its own) and returns how many. Their
    /// sockets close as their tasks see it; [`Clients::take_killed`] hands
    /// them to whoever must not go on before that.
    pub fn kill_where(&mut self, mut selected: impl FnMut(&ClientState) -> bool) -> usize {
        self.killed.retain(|s| !s.is_gone());
        let mut killed = 0;
        for client in self.slots.iter().flatten() {
            if selected(client) {
                client.signal.close();
                self.killed.push(client.signal.clone());
                killed += 1;
            }
        }
        killed
    }

    /// The connections [`Clients::kill_where`] closed since the last call.
    pub fn take_killed(&mut self) -> Vec<Arc<ConnSignal>> {
        std::mem::take(&mut self.killed)
    }

    /// The clients in the registry (not those taken out), to change.
    pub(crate) fn values_mut(&mut self) -> impl Iterator<Item = &mut ClientState> {
        self.slots.iter_mut().flatten().map(|c| &mut **c)
    }

    /// The clients in the registry (not those taken out).
    pub fn values(&self) -> impl Iterator<Item = &ClientState> {
        self.slots.iter().flatten().map(|c| &**c)
    }

    /// Registered clients, those taken out included.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }
}

/// A key one client WATCHes (Redis's `watchedKey`).
#[derive(Debug, Clone)]
pub struct WatchedKey {
    pub db: usize,
    pub key: Bytes,
    /// The key's change count at WATCH ([`crate::store::Db::watch`]).
    pub version: u64,
    /// The key was there but past its deadline at WATCH (Redis's
    /// `wk->expired`): its removal by expiry, or a delete, is then no
    /// change, and only a write that makes it live again counts.
    pub stale: bool,
}

/// What the engine knows about one connection.
#[derive(Debug)]
pub struct ClientState {
    pub id: u64,
    /// Its slot in [`Clients`].
    pub slot: usize,
    pub addr: ClientAddr,
    pub laddr: ClientAddr,
    /// CLIENT SETNAME / HELLO SETNAME; `None` when unset or set to "".
    pub name: Option<Bytes>,
    /// Selected database index.
    pub db: usize,
    /// Protocol chosen by HELLO: false = RESP2, true = RESP3.
    pub resp3: bool,
    /// True once AUTH succeeded, or from the start when no password is set
    /// (decided by the engine when the connection registers).
    pub authenticated: bool,
    /// The ACL user the client runs as (`default` until AUTH or HELLO
    /// names another): CLIENT LIST's `user=`, ACL WHOAMI, the checks.
    pub user: Bytes,
    /// Connection time and last command time, unix ms (CLIENT LIST age/idle).
    pub created_ms: u64,
    pub last_cmd_ms: u64,
    /// Name of the last command run, as CLIENT LIST's `cmd=` prints it.
    pub last_cmd: std::borrow::Cow<'static, str>,
    /// Set by QUIT: the connection closes after this batch's replies are written.
    pub close_after_reply: bool,
    /// Commands queued since MULTI; `None` outside a transaction.
    pub multi: Option<Vec<Vec<Bytes>>>,
    /// A command was refused while queueing: EXEC answers EXECABORT.
    pub multi_failed: bool,
    /// WATCHed keys, in WATCH order.
    pub watched: Vec<WatchedKey>,
    /// Channels and patterns subscribed to, in subscription order.
    pub channels: Vec<Bytes>,
    pub patterns: Vec<Bytes>,
    /// Shard channels (SSUBSCRIBE): counted apart from `channels` and
    /// `patterns` in the subscribe replies, as Redis counts them.
    pub shard_channels: Vec<Bytes>,
    /// CLIENT TRACKING state ([`crate::tracking`]); `None` when off.
    pub tracking: Option<Box<crate::tracking::ClientTracking>>,
    /// The command this client is blocked in (BLPOP ...), if any.
    pub blocked: Option<Box<crate::blocked::Blocked>>,
    /// CLIENT REPLY OFF: no replies at all until CLIENT REPLY ON.
    pub reply_off: bool,
    /// CLIENT REPLY SKIP: no reply to the command running now / to the next one.
    pub reply_skip: bool,
    pub reply_skip_next: bool,
    /// CLIENT NO-EVICT ON: `maxmemory-clients` never evicts it.
    pub no_evict: bool,
    /// Bytes of the arguments of the command running now (CLIENT LIST's
    /// `argv-mem` for the client asking); 0 between commands.
    pub(crate) argv_mem: usize,
    /// Its `tot-mem` when last measured, as counted in the server's
    /// `clients_mem` (0: not counted).
    pub(crate) last_mem: usize,
    /// In MONITOR mode (CLIENT LIST flag `O`).
    pub monitor: bool,
    /// Cluster mode: ASKING was sent, for the next command (or the
    /// transaction it is in).
    pub asking: bool,
    /// ASKING itself ran: the flag survives the end of its own command.
    pub asking_kept: bool,
    /// Replies of the batch (or messages) wait to be written ahead of the
    /// command running now: SYNC and PSYNC refuse to start then (Redis's
    /// `clientHasPendingReplies`).
    pub reply_pending: bool,
    /// Cluster mode: READONLY (a replica serves its primary's reads).
    pub cluster_readonly: bool,
    /// Cluster mode: the slot of the keys the running command (or script)
    /// declared, for the script's own key checks (Redis's `c->slot`).
    pub cluster_slot: Option<u16>,
    /// What fault rules do to this batch's replies (none: the default).
    pub reply_fault: crate::faults::ReplyFault,
    /// What REPLCONF said before PSYNC (listening port, address, capa).
    pub(crate) replconf: Option<Box<crate::repl::ReplConf>>,
    /// A replica (PSYNC or SYNC made it one): CLIENT LIST flag `S`, CLIENT KILL TYPE replica.
    pub(crate) replica: bool,
    /// The primary's client on a replica (its stream's commands run as it):
    /// CLIENT LIST flag `M` and `user=(superuser)`, CLIENT KILL TYPE master.
    pub(crate) primary: bool,
    /// The replication offset after this client's last write (Redis's
    /// `woff`): what WAIT waits for.
    pub(crate) repl_offset: u64,
    /// Set by PSYNC/SYNC: the connection becomes the replica's link once
    /// the batch ends.
    pub(crate) handoff: Option<Box<crate::repl::Handoff>>,
    /// Where PUBLISH puts this client's messages.
    pub outbox: Arc<Outbox>,
    pub signal: Arc<ConnSignal>,
    /// The points of its running command's reply Redis had written when
    /// the command went on to publish to this very client (a subscriber's
    /// own RPUSH announces `rpush` after its reply): set through
    /// [`crate::cmd::Ctx::replied`], consumed with the reply by
    /// [`ClientState::encode_reply_among_messages`]; empty for a client
    /// that subscribes to nothing.
    pub(crate) reply_marks: Vec<ReplyMark>,
}

/// A point of a command's reply, for the messages published to the
/// client running it: those its outbox receives from the `messages`-th on
/// (until the next mark) are written after the reply's first `nodes`
/// nodes (as [`Reply::encode_with_inserts`] counts them), as Redis writes
/// them into the client's buffer behind what it has written of the reply.
/// Messages before the first mark precede the reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ReplyMark {
    pub(crate) messages: usize,
    pub(crate) nodes: usize,
}

impl ClientState {
    pub fn new(
        id: u64,
        addr: impl Into<ClientAddr>,
        laddr: impl Into<ClientAddr>,
        now_ms: u64,
        signal: Arc<ConnSignal>,
        outbox: Arc<Outbox>,
    ) -> Self {
        ClientState {
            id,
            slot: 0,
            addr: addr.into(),
            laddr: laddr.into(),
            name: None,
            db: 0,
            resp3: false,
            authenticated: false,
            user: Bytes::from_static(b"default"),
            created_ms: now_ms,
            last_cmd_ms: now_ms,
            last_cmd: "NULL".into(),
            close_after_reply: false,
            multi: None,
            multi_failed: false,
            watched: Vec::new(),
            channels: Vec::new(),
            patterns: Vec::new(),
            shard_channels: Vec::new(),
            tracking: None,
            blocked: None,
            reply_off: false,
            reply_skip: false,
            reply_skip_next: false,
            no_evict: false,
            argv_mem: 0,
            last_mem: 0,
            monitor: false,
            asking: false,
            asking_kept: false,
            reply_pending: false,
            cluster_readonly: false,
            cluster_slot: None,
            reply_fault: Default::default(),
            replconf: None,
            replica: false,
            primary: false,
            repl_offset: 0,
            handoff: None,
            outbox,
            signal,
            reply_marks: Vec::new(),
        }
    }

    /// Appends `reply` to `out` with the messages waiting in the outbox
    /// placed by [`ClientState::reply_marks`] (all before it when there
    /// are none), and consumes the marks. Returns how many messages, and
    /// bytes of them, it took from the outbox.
    pub(crate) fn encode_reply_among_messages(&mut self, reply: &Reply, out: &mut BytesMut) -> (usize, usize) {
        let marks = std::mem::take(&mut self.reply_marks);
        let messages = if self.outbox.has_messages() {
            self.outbox.take()
        } else {
            Vec::new()
        };
        let bytes = messages.iter().map(Bytes::len).sum();
        let before = marks.first().map_or(messages.len(), |m| m.messages.min(messages.len()));
        for message in &messages[..before] {
            out.extend_from_slice(message);
        }
        if before == messages.len() {
            reply.encode(out, self.resp3);
        } else {
            // Each mark's messages, up to the next mark's, after its nodes.
            let mut inserts: Vec<(usize, &[u8])> = Vec::new();
            for (i, mark) in marks.iter().enumerate() {
                let end = marks
                    .get(i + 1)
                    .map_or(messages.len(), |next| next.messages.min(messages.len()));
                for message in messages.get(mark.messages..end).unwrap_or_default() {
                    inserts.push((mark.nodes, message));
                }
            }
            reply.encode_with_inserts(out, self.resp3, &inserts);
        }
        (messages.len(), bytes)
    }

    /// Whether the client has any channel or pattern subscription.
    pub fn is_subscribed(&self) -> bool {
        !(self.channels.is_empty() && self.patterns.is_empty() && self.shard_channels.is_empty())
    }

    /// One CLIENT LIST / CLIENT INFO line (without the trailing newline).
    /// The memory and buffer fields are coordis's own bytes
    /// ([`crate::net::client_mem::measure`]), in Redis's units.
    pub fn info_line(&self, now_ms: u64) -> String {
        let name = self
            .name
            .as_ref()
            .map(|n| String::from_utf8_lossy(n).into_owned())
            .unwrap_or_default();
        // Redis's flag letters, in its order, for the states coordis has.
        let mut flags = String::new();
        for (on, letter) in [
            (self.replica, 'S'),
            (self.monitor, 'O'),
            (self.primary, 'M'),
            (self.is_subscribed(), 'P'),
            (self.multi.is_some(), 'x'),
            (self.blocked.is_some(), 'b'),
            (self.tracking.is_some(), 't'),
            (self.tracking.as_ref().is_some_and(|t| t.broken_redirect), 'R'),
            (self.tracking.as_ref().is_some_and(|t| t.bcast), 'B'),
            (self.addr.is_unix(), 'U'),
            (self.cluster_readonly, 'r'),
            (self.no_evict, 'e'),
        ] {
            if on {
                flags.push(letter);
            }
        }
        if flags.is_empty() {
            flags.push('N');
        }
        let mem = crate::net::client_mem::measure(self);
        format!(
            "id={} addr={} laddr={} fd=0 name={} age={} idle={} flags={} db={} sub={} psub={} ssub={} multi={} qbuf={} qbuf-free={} argv-mem={} multi-mem={} rbs={} rbp={} obl={} oll={} omem={} tot-mem={} events=r cmd={} user={} redir={} resp={}",
            self.id,
            self.addr,
            self.laddr,
            name,
            now_ms.saturating_sub(self.created_ms) / 1000,
            now_ms.saturating_sub(self.last_cmd_ms) / 1000,
            flags,
            self.db,
            self.channels.len(),
            self.patterns.len(),
            self.shard_channels.len(),
            self.multi.as_ref().map_or(-1, |q| q.len() as i64),
            mem.qbuf,
            mem.qbuf_free,
            mem.argv_mem,
            mem.multi_mem,
            mem.rbs,
            mem.rbp,
            mem.obl,
            mem.oll,
            mem.omem,
            mem.tot_mem,
            self.last_cmd,
            // Redis's master client runs as no user.
            if self.primary {
                "(superuser)".into()
            } else {
                String::from_utf8_lossy(&self.user)
            },
            self.tracking.as_ref().map_or(-1, |t| t.redirect as i64),
            if self.resp3 { 3 } else { 2 }
        )
    }
}
