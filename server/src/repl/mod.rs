//! Replication state and serving replicas, as a primary (Redis 7.0.15's
//! `replication.c`, master side).
//!
//! This module owns the replication IDs (the main one, random at start;
//! the secondary one and `second_repl_offset` that PSYNC2 continues
//! from), `master_repl_offset`, the backlog (`repl-backlog-size`,
//! `repl-backlog-ttl`), the replicas' records, SYNC/PSYNC/REPLCONF, the
//! replication cron (PINGs, `repl-timeout`, the backlog's time limit, the
//! pending full syncs), WAIT's acknowledgements and `min-replicas-*`.
//!
//! The stream is the effects feed ([`crate::exec::feed`]) encoded as
//! Redis writes it: SELECT at a replica stream's first write and whenever
//! the database changes, MULTI/EXEC around a unit's several effects, PING
//! and `REPLCONF GETACK *` without SELECT. It is encoded under the engine
//! lock as each unit closes ([`Hub::append`]): offsets must be exact at the
//! moment a snapshot for a full sync starts and at the moment a client's
//! write ends (WAIT waits for that offset), as they are in Redis. What is
//! outside the lock is everything slow: each replica's link is a task of
//! its own ([`link`]) that copies from the backlog to its socket, so a slow
//! replica never holds the engine; one too slow for
//! `client-output-buffer-limit replica` is disconnected as Redis does.
//!
//! The API the replica side uses: [`Replication::start_proxy`] (from
//! REPLICAOF on, the stream is the primary's), [`Replication::feed`] (a
//! primary's stream applied here goes verbatim to our own backlog, for
//! chained replicas, as Redis's `replicationFeedStreamFromMasterStream`),
//! [`Replication::proxy_resynced`] and [`Replication::proxy_continued`]
//! (the history after a full or partial resync; replicas are disconnected
//! when it changes), [`Replication::ids`], [`Replication::offset`],
//! [`Replication::shift_ids_on_promotion`], [`Replication::adopt`].
//!
//! Differences from Redis, for now: the full sync's RDB is built in memory
//! by the forkless snapshot (disk-backed syncs do not write `dump.rdb`; the
//! framing on the wire is the one the directive and the replica's `capa`
//! ask for), REPLCONF ACKs a replica sends after
//! PSYNC are read by its link (not counted in commandstats).
//!
//! What must never happen here: the engine lock taken by a link while it
//! holds the hub's lock, or a link task awaited under the engine lock.

pub(crate) mod failover;
pub(crate) mod link;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use parking_lot::Mutex;
use tokio::sync::{mpsc, watch, Notify};

use crate::exec::feed;

/// Length of a replication ID (Redis's `CONFIG_RUN_ID_SIZE`).
pub(crate) const ID_LEN: usize = 40;

/// The secondary ID when there is none (Redis's `clearReplicationId2`).
const NO_ID: &str = "0000000000000000000000000000000000000000";

/// Most bytes a link copies out of the backlog per write: bounds the hub
/// lock's hold and the link's buffer.
const LINK_CHUNK: usize = 1 << 20;

/// Milliseconds on a monotonic clock (ACK times, lags, timeouts: real time,
/// as Redis's `server.unixtime` for these, not the test clock).
pub(crate) fn now_ms() -> u64 {
    static BASE: OnceLock<Instant> = OnceLock::new();
    BASE.get_or_init(Instant::now).elapsed().as_millis() as u64
}

/// A random replication ID (40 hex characters, as Redis's `getRandomHexChars`).
pub(crate) fn random_id() -> String {
    (0..ID_LEN)
        .map(|_| std::char::from_digit(fastrand::u32(..16), 16).unwrap_or('0'))
        .collect()
}

/// A replica's state (Redis's `SLAVE_STATE_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum State {
    /// Waiting for a snapshot to start (diskless delay, or a save runs).
    WaitStart = 0,
    /// Its snapshot is being made; the stream is kept from its offset.
    WaitEnd = 1,
    /// The RDB is being written to it.
    SendBulk = 2,
    /// Streaming.
    Online = 3,
}

impl State {
    fn from_u8(n: u8) -> State {
        match n {
            0 => State::WaitStart,
            1 => State::WaitEnd,
            2 => State::SendBulk,
            _ => State::Online,
        }
    }

    /// INFO's `state=` (Redis's `replstateToString`).
    pub(crate) fn name(self) -> &'static str {
        match self {
            State::WaitStart | State::WaitEnd => "wait_bgsave",
            State::SendBulk => "send_bulk",
            State::Online => "online",
        }
    }
}

/// `client-output-buffer-limit replica`: what a replica may have pending
/// (bytes of the stream not yet written to it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct OutputLimit {
    /// Disconnected at once past this (0: no limit).
    pub(crate) hard: u64,
    /// Disconnected when past this for `soft_secs` seconds (0: no limit).
    pub(crate) soft: u64,
    pub(crate) soft_secs: u64,
}

impl OutputLimit {
    /// The `slave` group of the directive's text (`normal 0 0 0 slave h s t ...`).
    pub(crate) fn from_config(config: &crate::config::Config) -> OutputLimit {
        OutputLimit::for_class(config, "slave")
    }

    /// The group of `class` (`normal`, `slave`, `pubsub`) of the directive's text.
    pub(crate) fn for_class(config: &crate::config::Config, class: &str) -> OutputLimit {
        let text = config
            .ignored
            .get("client-output-buffer-limit")
            .map(String::as_str)
            .unwrap_or_default();
        let words: Vec<&str> = text.split_whitespace().collect();
        for group in words.chunks(4) {
            if group.len() == 4 && group[0] == class {
                let n = |w: &str| w.parse().unwrap_or(0);
                return OutputLimit {
                    hard: n(group[1]),
                    soft: n(group[2]),
                    soft_secs: n(group[3]),
                };
            }
        }
        OutputLimit::default()
    }
}

/// One replica, shared by the engine (INFO, ROLE, WAIT) and its link.
#[derive(Debug)]
pub(crate) struct Replica {
    /// Its client id (CLIENT LIST, CLIENT KILL).
    pub(crate) id: u64,
    /// The address INFO shows: REPLCONF ip-address, else the peer's.
    pub(crate) ip: String,
    /// REPLCONF listening-port (0 when not told).
    pub(crate) port: u64,
    /// It said `capa eof` (diskless framing possible) / `capa psync2`.
    pub(crate) capa_eof: bool,
    pub(crate) capa_psync2: bool,
    /// SYNC rather than PSYNC: no +FULLRESYNC line, no ACKs expected.
    pub(crate) pre_psync: bool,
    state: AtomicU8,
    /// The last offset it acknowledged (REPLCONF ACK).
    ack_offset: AtomicU64,
    /// [`now_ms`] of its last ACK (or of going online).
    ack_ms: AtomicU64,
    /// Offset of the next stream byte to write to it; `u64::MAX` before its
    /// snapshot starts (it holds nothing in the backlog until then).
    pub(crate) next: AtomicU64,
    /// [`now_ms`] since it has been over the soft output limit (0: not).
    soft_since: AtomicU64,
    /// Set when it must be disconnected (output limit, timeout, kill).
    killed: AtomicBool,
    /// Wakes its link: a kill, or an ACK that starts a diskless stream.
    wake: Notify,
    /// What the test-control plane does to its link ([`LinkFaults`]).
    pub(crate) faults: LinkFaults,
}

/// The test-control plane's faults on one replica's link
/// ([`crate::ServerControl::pause_link`] and the rest, `COORDIS.REPLICATION`):
/// the link reads them before each write, so a fault set under the engine
/// lock holds from the next byte on. None set costs the link two loads.
#[derive(Debug)]
pub(crate) struct LinkFaults {
    /// Nothing of the stream is written while set (it waits in the backlog).
    pub(crate) paused: AtomicBool,
    /// Stream bytes go out this many ms of server clock after the link saw
    /// them published (0: at once).
    pub(crate) delay_ms: AtomicU64,
    /// Writes (units of the stream) still to leave out of this link.
    pub(crate) drop_units: AtomicU64,
    /// The `[start, end)` offsets of the units left out, oldest first.
    skips: Mutex<VecDeque<(u64, u64)>>,
    /// A dying primary's last words: the link writes the stream up to this
    /// offset (exclusive) and ends; `u64::MAX`: no end.
    pub(crate) drain_to: AtomicU64,
    /// Wakes the link when a fault changes.
    pub(crate) changed: Notify,
}

impl Default for LinkFaults {
    fn default() -> Self {
        LinkFaults {
            paused: AtomicBool::new(false),
            delay_ms: AtomicU64::new(0),
            drop_units: AtomicU64::new(0),
            skips: Mutex::new(VecDeque::new()),
            drain_to: AtomicU64::new(u64::MAX),
            changed: Notify::new(),
        }
    }
}

impl LinkFaults {
    /// Sets or lifts the pause.
    pub(crate) fn set_paused(&self, paused: bool) {
        self.paused.store(paused, Ordering::Release);
        self.changed.notify_one();
    }

    pub(crate) fn set_delay(&self, ms: u64) {
        self.delay_ms.store(ms, Ordering::Release);
        self.changed.notify_one();
    }

    /// The next `n` writes are left out of this link.
    pub(crate) fn drop_next(&self, n: u64) {
        self.drop_units.store(n, Ordering::Release);
    }

    /// The link writes up to `end` (exclusive), at once, and ends.
    pub(crate) fn drain(&self, end: u64) {
        self.paused.store(false, Ordering::Release);
        self.delay_ms.store(0, Ordering::Release);
        self.drain_to.store(end, Ordering::Release);
        self.changed.notify_one();
    }

    /// Whether any fault is set (the link's fast path skips the rest).
    fn any(&self) -> bool {
        self.paused.load(Ordering::Acquire)
            || self.delay_ms.load(Ordering::Acquire) != 0
            || self.drain_to.load(Ordering::Acquire) != u64::MAX
            || !self.skips.lock().is_empty()
    }

    /// From `next`, past the units left out: where the link writes from,
    /// and the first offset it may not write yet (a left-out unit's start).
    fn skip_from(&self, mut next: u64) -> (u64, u64) {
        let mut skips = self.skips.lock();
        while let Some(&(start, end)) = skips.front() {
            if next < start {
                return (next, start);
            }
            next = next.max(end);
            skips.pop_front();
        }
        (next, u64::MAX)
    }
}

impl Replica {
    pub(crate) fn state(&self) -> State {
        State::from_u8(self.state.load(Ordering::Acquire))
    }

    fn set_state(&self, state: State) {
        self.state.store(state as u8, Ordering::Release);
    }

    pub(crate) fn ack_offset(&self) -> u64 {
        self.ack_offset.load(Ordering::Acquire)
    }

    /// Records a REPLCONF ACK (Redis keeps the highest offset).
    pub(crate) fn ack(&self, offset: u64) {
        self.ack_offset.fetch_max(offset, Ordering::AcqRel);
        self.ack_ms.store(now_ms(), Ordering::Release);
    }

    /// Seconds since its last ACK (INFO's `lag`).
    pub(crate) fn lag_secs(&self) -> u64 {
        now_ms().saturating_sub(self.ack_ms.load(Ordering::Acquire)) / 1000
    }

    /// Schedules its disconnection (its link ends at once).
    pub(crate) fn kill(&self) {
        self.killed.store(true, Ordering::Release);
        self.wake.notify_one();
    }

    pub(crate) fn is_killed(&self) -> bool {
        self.killed.load(Ordering::Acquire)
    }

    /// Whether it is the replica at `host` `port` (Redis's `findReplica`:
    /// the address it announced, or its peer's, and its listening port).
    pub(crate) fn matches(&self, host: &str, port: u64) -> bool {
        self.ip.eq_ignore_ascii_case(host) && self.port == port
    }
}

/// What a replica's link is told by the engine.
#[derive(Debug)]
pub(crate) enum LinkMsg {
    /// Write this line (`+FULLRESYNC ...` or `+CONTINUE ...`).
    Line(Bytes),
    /// The snapshot's RDB: write it framed (`$EOF:` with `eof`), then stream.
    Rdb { rdb: Arc<Vec<u8>>, eof: bool },
    /// Stream from the replica's offset (after +CONTINUE).
    Stream,
}

/// What a connection hands to [`link::run`] once PSYNC or SYNC made it a replica.
#[derive(Debug)]
pub(crate) struct Handoff {
    pub(crate) replica: Arc<Replica>,
    pub(crate) hub: Arc<Hub>,
    pub(crate) msgs: mpsc::UnboundedReceiver<LinkMsg>,
    /// The server clock: a delayed link's times are on it.
    pub(crate) clock: Arc<dyn crate::store::Clock>,
}

/// The backlog and the replicas' positions, behind the hub's lock.
#[derive(Debug)]
struct Backlog {
    /// The stream's last bytes.
    data: VecDeque<u8>,
    /// Offset of `data[0]` (Redis's `repl_backlog->offset`: 1-based).
    first: u64,
    /// `master_repl_offset`: bytes of stream ever produced.
    offset: u64,
    /// `repl-backlog-size`.
    size: u64,
    limit: OutputLimit,
    replicas: Vec<Arc<Replica>>,
}

impl Backlog {
    /// Drops what is past the size and not needed from offset `hold` on.
    fn trim(&mut self, hold: u64) {
        let end = self.offset + 1;
        let keep_from = end.saturating_sub(self.size).min(hold);
        if keep_from > self.first {
            let drop = ((keep_from - self.first) as usize).min(self.data.len());
            self.data.drain(..drop);
            self.first += drop as u64;
        }
        // What a burst grew (a replica far behind, a large write) is given
        // back once it is trimmed, as Redis frees its buffer's blocks.
        let wanted = (self.size as usize).max(self.data.len());
        if self.data.capacity() > 2 * wanted {
            self.data.shrink_to(wanted);
        }
    }
}

/// The stream's shared end: the engine appends (under its lock), the links
/// read. One per server; its backlog exists while [`Hub::active`].
#[derive(Debug)]
pub(crate) struct Hub {
    inner: Mutex<Backlog>,
    /// The offset, published at the end of each engine batch.
    published: watch::Sender<u64>,
    /// A link was told to drop writes ([`Hub::arm_drops`]): only then does
    /// a write look at the links.
    dropping: AtomicBool,
}

impl Hub {
    fn new(offset: u64, size: u64, limit: OutputLimit) -> Hub {
        Hub {
            inner: Mutex::new(Backlog {
                data: VecDeque::new(),
                first: offset + 1,
                offset,
                size,
                limit,
                replicas: Vec::new(),
            }),
            published: watch::channel(offset).0,
            dropping: AtomicBool::new(false),
        }
    }

    /// Replica `r` drops the next `n` writes.
    pub(crate) fn arm_drops(&self, r: &Replica, n: u64) {
        r.faults.drop_next(n);
        if n > 0 {
            self.dropping.store(true, Ordering::Release);
        }
    }

    /// `master_repl_offset`.
    pub(crate) fn offset(&self) -> u64 {
        self.inner.lock().offset
    }

    /// Appends a write's stream bytes ([`Hub::append`]); a link told to
    /// drop writes leaves this one out. True if one did (the next write
    /// selects its database again, for the link that dropped the SELECT).
    pub(crate) fn append_unit(&self, bytes: &[u8]) -> bool {
        if !self.dropping.load(Ordering::Acquire) {
            self.append(bytes);
            return false;
        }
        let start = self.offset() + 1;
        let end = self.append(bytes) + 1;
        let mut dropped = false;
        if end == start {
            return false;
        }
        let replicas = self.replicas();
        let still = replicas.iter().any(|r| r.faults.drop_units.load(Ordering::Acquire) > 1);
        self.dropping.store(still, Ordering::Release);
        for r in replicas {
            let left = r
                .faults
                .drop_units
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
            if left.is_ok() {
                r.faults.skips.lock().push_back((start, end));
                dropped = true;
            }
        }
        dropped
    }

    /// Wakes every link to look again (the test clock moved: a delayed
    /// link may write now).
    pub(crate) fn nudge(&self) {
        self.published.send_modify(|_| {});
    }

    /// Appends stream bytes: the offset moves, the backlog keeps its size
    /// (and what connected replicas have not been written yet), and a
    /// replica past its output limit is scheduled to be disconnected.
    pub(crate) fn append(&self, bytes: &[u8]) -> u64 {
        let mut b = self.inner.lock();
        if bytes.is_empty() {
            return b.offset;
        }
        b.data.extend(bytes);
        b.offset += bytes.len() as u64;
        let end = b.offset + 1;
        let now = now_ms();
        let limit = b.limit;
        let mut hold = end;
        for r in &b.replicas {
            let next = r.next.load(Ordering::Acquire);
            if next == u64::MAX || r.is_killed() {
                continue;
            }
            let pending = end.saturating_sub(next);
            let over_hard = limit.hard > 0 && pending > limit.hard;
            let over_soft = limit.soft > 0 && pending > limit.soft;
            let since = r.soft_since.load(Ordering::Acquire);
            let soft_expired = over_soft && since != 0 && now - since >= limit.soft_secs * 1000;
            if over_soft && since == 0 {
                r.soft_since.store(now.max(1), Ordering::Release);
            } else if !over_soft {
                r.soft_since.store(0, Ordering::Release);
            }
            if over_hard || soft_expired {
                tracing::warn!(
                    "Client id={} addr={}:{} scheduled to be closed ASAP for overcoming of output buffer limits.",
                    r.id,
                    r.ip,
                    r.port
                );
                r.kill();
                continue;
            }
            hold = hold.min(next);
        }
        b.trim(hold);
        b.offset
    }

    /// Wakes the links: what was appended in this batch may go out.
    pub(crate) fn publish(&self) {
        let offset = self.offset();
        self.published.send_if_modified(|published| {
            let moved = *published != offset;
            *published = offset;
            moved
        });
    }

    /// Up to [`LINK_CHUNK`] stream bytes from `from`; `None` when they are
    /// no longer in the backlog.
    fn read_from(&self, from: u64, upto: u64) -> Option<Vec<u8>> {
        let b = self.inner.lock();
        if from < b.first || from > b.offset + 1 {
            return None;
        }
        let skip = (from - b.first) as usize;
        let take = (b.data.len() - skip)
            .min(LINK_CHUNK)
            .min(upto.saturating_sub(from).try_into().unwrap_or(usize::MAX));
        Some(b.data.range(skip..skip + take).copied().collect())
    }

    /// Whether a partial resync from `offset` can be served (Redis's check
    /// in `masterTryPartialResynchronization`).
    fn covers(&self, offset: i64) -> bool {
        let b = self.inner.lock();
        let Ok(offset) = u64::try_from(offset) else {
            return false;
        };
        offset >= b.first && offset <= b.first + b.data.len() as u64
    }

    fn add(&self, replica: Arc<Replica>) {
        self.inner.lock().replicas.push(replica);
    }

    /// Removes replica `id` (its link ended); true if it was there.
    pub(crate) fn remove(&self, id: u64) -> bool {
        let mut b = self.inner.lock();
        let before = b.replicas.len();
        b.replicas.retain(|r| r.id != id);
        // What only it held goes at once.
        let hold = b
            .replicas
            .iter()
            .filter(|r| !r.is_killed())
            .map(|r| r.next.load(Ordering::Acquire))
            .min()
            .unwrap_or(u64::MAX);
        b.trim(hold);
        before != b.replicas.len()
    }

    /// Every replica, in the order they connected.
    pub(crate) fn replicas(&self) -> Vec<Arc<Replica>> {
        self.inner.lock().replicas.clone()
    }

    fn resize(&self, size: u64, limit: OutputLimit) {
        let mut b = self.inner.lock();
        b.size = size;
        b.limit = limit;
    }

    /// (first byte's offset, bytes held).
    fn extent(&self) -> (u64, u64) {
        let b = self.inner.lock();
        (b.first, b.data.len() as u64)
    }

    /// The memory the stream's buffer holds, split as Redis's
    /// `redisMemOverhead` splits its shared replication buffer: the
    /// backlog's share, and, while replicas are connected, the bytes they
    /// still need beyond `repl-backlog-size` (theirs).
    fn memory(&self) -> BufferMemory {
        let b = self.inner.lock();
        let held = b.data.capacity() as u64;
        let replicas = if b.replicas.is_empty() {
            0
        } else {
            (b.data.len() as u64).saturating_sub(b.size)
        };
        BufferMemory {
            backlog: held - replicas,
            replicas,
        }
    }
}

/// The replication buffer's memory ([`Replication::buffer_memory`]).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct BufferMemory {
    /// INFO `mem_replication_backlog`.
    pub(crate) backlog: u64,
    /// Past the backlog's size, kept for replicas: part of INFO
    /// `mem_clients_slaves` and left out of `maxmemory`'s count.
    pub(crate) replicas: u64,
}

/// The stream's encoder, in [`feed::Effects`]: the database the stream last
/// selected (Redis's `slaveseldb`) and whether a WAIT asked for ACKs.
#[derive(Debug)]
pub(crate) struct Encoder {
    pub(crate) hub: Arc<Hub>,
    /// `None`: the next effect selects its database (a new backlog, or a
    /// full sync just started).
    selected: Option<usize>,
    /// A WAIT blocked in this batch: `REPLCONF GETACK *` goes out at its end.
    get_ack: bool,
    buf: BytesMut,
}

impl Encoder {
    fn new(hub: Arc<Hub>) -> Encoder {
        Encoder {
            hub,
            selected: None,
            get_ack: false,
            buf: BytesMut::new(),
        }
    }

    /// Encodes one unit into the stream; the offset after it.
    pub(crate) fn unit(&mut self, unit: &feed::Unit) -> u64 {
        self.buf.clear();
        let buf = &mut self.buf;
        feed::stream(
            &mut self.selected,
            &unit.ops,
            unit.unwrapped,
            feed::Op::for_replicas,
            |args| feed::encode_command(args, buf),
        );
        if self.hub.append_unit(&self.buf) {
            self.selected = None;
        }
        self.hub.offset()
    }

    /// The end of an engine batch: GETACK if a WAIT asked, links woken.
    pub(crate) fn flush(&mut self) {
        if std::mem::take(&mut self.get_ack) {
            self.command(&[b"REPLCONF", b"GETACK", b"*"]);
        }
        self.hub.publish();
    }

    /// The next effect selects its database.
    pub(crate) fn reset_select(&mut self) {
        self.selected = None;
    }

    pub(crate) fn request_ack(&mut self) {
        self.get_ack = true;
    }

    /// A command outside any database (PING, GETACK): no SELECT.
    pub(crate) fn command(&mut self, args: &[&[u8]]) {
        self.buf.clear();
        let args: Vec<Bytes> = args.iter().map(|a| Bytes::copy_from_slice(a)).collect();
        feed::encode_command(&args, &mut self.buf);
        let _ = self.hub.append(&self.buf);
    }
}

/// A client blocked in WAIT.
#[derive(Debug)]
struct Waiter {
    client: u64,
    /// The offset its writes reached.
    offset: u64,
    wanted: u64,
}

/// The engine's replication state (in [`crate::state::ServerState`]).
#[derive(Debug)]
pub(crate) struct Replication {
    replid: String,
    replid2: String,
    /// Offset up to which `replid2` is valid (-1: none).
    second_offset: i64,
    /// `master_repl_offset` while there is no backlog.
    offset: u64,
    /// The stream's end while a backlog exists (also in the feed's encoder).
    hub: Option<Arc<Hub>>,
    /// Replicas waiting for a snapshot to start, with their links' senders.
    waiting: Vec<(Arc<Replica>, mpsc::UnboundedSender<LinkMsg>)>,
    /// Replicas of the snapshot being made.
    syncing: Vec<(Arc<Replica>, mpsc::UnboundedSender<LinkMsg>)>,
    /// The running full-sync snapshot's `+FULLRESYNC` offset and whether it
    /// goes to sockets (`eof`): a replica arriving while a disk-target one
    /// runs shares it from that offset (Redis's `psync_initial_offset` and
    /// `rdb_child_type`); `None` when no replication snapshot runs.
    snapshot: Option<(u64, bool)>,
    /// [`now_ms`] when the last replica left (the backlog's time limit).
    no_replicas_since: u64,
    /// [`now_ms`] of the last once-a-second cron run, and how many ran.
    cron_last: u64,
    cron_loops: u64,
    waiters: Vec<Waiter>,
    /// The FAILOVER in force, if any.
    pub(crate) failover: failover::Failover,
    /// The replicas' addresses when the test-control plane killed this
    /// primary: "promote replica k" still finds them once the links are gone.
    pub(crate) died_with: Vec<(String, u64)>,
    pub(crate) sync_full: u64,
    pub(crate) sync_partial_ok: u64,
    pub(crate) sync_partial_err: u64,
    /// This server is a replica: its IDs and offset are its primary's
    /// history, its stream is the primary's passed on verbatim (Redis's
    /// `replicationFeedStreamFromMasterStream`), so a sub-replica shares
    /// the primary's offsets; nothing this server runs itself is encoded
    /// (Redis feeds a replica's replicas nothing else), and its backlog is
    /// never freed (it serves PSYNCs once promoted).
    proxy: bool,
}

impl Default for Replication {
    fn default() -> Self {
        Replication {
            replid: random_id(),
            replid2: NO_ID.to_string(),
            second_offset: -1,
            offset: 0,
            hub: None,
            waiting: Vec::new(),
            syncing: Vec::new(),
            snapshot: None,
            no_replicas_since: now_ms(),
            cron_last: 0,
            cron_loops: 0,
            waiters: Vec::new(),
            failover: failover::Failover::default(),
            died_with: Vec::new(),
            sync_full: 0,
            sync_partial_ok: 0,
            sync_partial_err: 0,
            proxy: false,
        }
    }
}

impl Replication {
    /// The state at start of a replica (`replicaof` in the config) or a
    /// primary.
    pub(crate) fn new(replica: bool) -> Replication {
        Replication {
            proxy: replica,
            ..Default::default()
        }
    }

    /// (main ID, secondary ID, `second_repl_offset`).
    pub(crate) fn ids(&self) -> (&str, &str, i64) {
        (&self.replid, &self.replid2, self.second_offset)
    }

    /// `master_repl_offset`.
    pub(crate) fn offset(&self) -> u64 {
        self.hub.as_ref().map_or(self.offset, |h| h.offset())
    }

    /// Appends bytes to the stream as they are (a replica passing its
    /// primary's stream on); nothing without a backlog but the offset.
    pub(crate) fn feed(&mut self, bytes: &[u8]) {
        match &self.hub {
            Some(hub) => {
                let _ = hub.append(bytes);
            }
            None => self.offset += bytes.len() as u64,
        }
    }

    /// Wakes the links: what [`Replication::feed`] appended may go out.
    pub(crate) fn publish(&self) {
        if let Some(hub) = &self.hub {
            hub.publish();
        }
    }

    /// This server follows a primary (REPLICAOF host port, the
    /// `replicaof` directive, a FAILOVER's hand-over): from now on its
    /// stream is the primary's. Its replicas stay, to continue partially
    /// if the new primary continues this history (Redis's
    /// `replicationSetMaster`).
    pub(crate) fn start_proxy(&mut self, effects: &mut feed::Effects) {
        self.proxy = true;
        effects.set_repl(None);
    }

    /// The primary sent a full resynchronization: a new history from
    /// `offset`. The replicas resync with this server too, and the
    /// backlog starts again there (Redis's `replicationAttachToNewMaster`,
    /// then `createReplicationBacklog`: a replica keeps one to serve
    /// PSYNCs once promoted).
    pub(crate) fn proxy_resynced(&mut self, replid: &str, offset: u64, config: &crate::config::Config) {
        self.disconnect_replicas();
        self.set_from_primary(replid, offset);
        self.hub = Some(Arc::new(Hub::new(
            offset,
            config.repl.backlog_size,
            OutputLimit::from_config(config),
        )));
        self.no_replicas_since = now_ms();
    }

    /// The primary accepted a partial resynchronization: the history
    /// goes on at `offset` under `ids` (main, secondary, second offset).
    /// If the main ID changed (the primary was promoted), the replicas are
    /// disconnected to learn it; they continue partially (Redis's
    /// `slaveTryPartialResynchronization`).
    pub(crate) fn proxy_continued(&mut self, ids: (&str, &str, i64), offset: u64, config: &crate::config::Config) {
        if self.replid != ids.0 {
            self.disconnect_replicas();
        }
        self.replid = ids.0.to_string();
        self.replid2 = ids.1.to_string();
        self.second_offset = ids.2;
        if self.hub.as_ref().is_none_or(|h| h.offset() != offset) {
            self.disconnect_replicas();
            self.offset = offset;
            self.hub = Some(Arc::new(Hub::new(
                offset,
                config.repl.backlog_size,
                OutputLimit::from_config(config),
            )));
        }
    }

    /// Whether `replica` may share the running disk-target snapshot taken
    /// at `offset` (Redis's check in `syncCommand`): a replica of it still
    /// waits for its end, `replica` has at least that one's capabilities,
    /// and the backlog still holds the stream from the snapshot's offset.
    fn can_attach(&self, replica: &Replica, hub: &Hub, offset: u64) -> bool {
        let Some((first, _)) = self
            .syncing
            .iter()
            .find(|(r, _)| r.state() == State::WaitEnd && !r.is_killed())
        else {
            return false;
        };
        (replica.capa_eof || !first.capa_eof)
            && (replica.capa_psync2 || !first.capa_psync2)
            && hub.covers(offset as i64 + 1)
    }

    /// Drops every replica: they reconnect and ask a resync (Redis's
    /// `disconnectSlaves`).
    pub(crate) fn disconnect_replicas(&mut self) {
        for r in self.replicas() {
            r.kill();
        }
        for (r, _) in self.waiting.drain(..).chain(self.syncing.drain(..)) {
            r.kill();
        }
    }

    /// A replica became a primary (Redis's `shiftReplicationId`): the old
    /// ID becomes the secondary one, valid up to the current offset, so
    /// replicas of the old primary continue partially.
    pub(crate) fn shift_ids_on_promotion(&mut self) {
        self.replid2 = std::mem::replace(&mut self.replid, random_id());
        self.second_offset = self.offset() as i64 + 1;
    }

    /// A replica took its primary's ID and offset (after a full sync).
    pub(crate) fn set_from_primary(&mut self, replid: &str, offset: u64) {
        self.replid = replid.to_string();
        self.replid2 = NO_ID.to_string();
        self.second_offset = -1;
        self.offset = offset;
    }

    pub(crate) fn replicas(&self) -> Vec<Arc<Replica>> {
        self.hub.as_ref().map(|h| h.replicas()).unwrap_or_default()
    }

    /// Replicas that acknowledged `offset` (Redis's `replicationCountAcksByOffset`).
    pub(crate) fn acked(&self, offset: u64) -> u64 {
        self.replicas()
            .iter()
            .filter(|r| r.state() == State::Online && r.ack_offset() >= offset)
            .count() as u64
    }

    /// Online replicas that ACKed within `max_lag` seconds.
    fn good_replicas(&self, max_lag: u64) -> u64 {
        self.replicas()
            .iter()
            .filter(|r| r.state() == State::Online && r.lag_secs() <= max_lag)
            .count() as u64
    }

    /// `min-replicas-to-write` refuses writes now (Redis's
    /// `checkGoodReplicasStatus`, negated).
    pub(crate) fn too_few_replicas(&self, config: &crate::config::Config) -> bool {
        let c = &config.repl;
        c.min_replicas_to_write > 0
            && c.min_replicas_max_lag > 0
            && self.good_replicas(c.min_replicas_max_lag) < c.min_replicas_to_write
    }

    /// Creates the backlog (the first replica's full sync, Redis's
    /// `createReplicationBacklog`): new IDs, as there is no valid history.
    /// A replica keeps its primary's IDs (its history is the primary's).
    fn create_backlog(&mut self, effects: &mut feed::Effects, config: &crate::config::Config) {
        if self.hub.is_some() {
            return;
        }
        if self.proxy {
            self.hub = Some(Arc::new(Hub::new(
                self.offset,
                config.repl.backlog_size,
                OutputLimit::from_config(config),
            )));
            return;
        }
        self.replid = random_id();
        self.replid2 = NO_ID.to_string();
        self.second_offset = -1;
        let hub = Arc::new(Hub::new(
            self.offset,
            config.repl.backlog_size,
            OutputLimit::from_config(config),
        ));
        tracing::info!(
            "Replication backlog created, my new replication IDs are '{}' and '{}'",
            self.replid,
            self.replid2
        );
        effects.set_repl(Some(Encoder::new(hub.clone())));
        self.hub = Some(hub);
    }

    /// Frees the backlog (its time limit passed without replicas).
    fn free_backlog(&mut self, effects: &mut feed::Effects) {
        if self.proxy {
            return;
        }
        if let Some(hub) = self.hub.take() {
            self.offset = hub.offset();
            effects.set_repl(None);
            self.replid = random_id();
            self.replid2 = NO_ID.to_string();
            self.second_offset = -1;
        }
    }

    /// CONFIG SET changed `repl-backlog-size` or the output limits.
    pub(crate) fn configure(&mut self, config: &crate::config::Config) {
        if let Some(hub) = &self.hub {
            hub.resize(config.repl.backlog_size, OutputLimit::from_config(config));
        }
    }

    /// A replica's link ended: forgotten, and the time without replicas starts.
    pub(crate) fn replica_gone(&mut self, id: u64) {
        if let Some(hub) = &self.hub {
            hub.remove(id);
            if hub.replicas().is_empty() {
                self.no_replicas_since = now_ms();
            }
        }
        self.waiting.retain(|(r, _)| r.id != id);
        self.syncing.retain(|(r, _)| r.id != id);
    }

    /// The replication buffer's memory (none without a backlog).
    pub(crate) fn buffer_memory(&self) -> BufferMemory {
        self.hub.as_ref().map_or_else(BufferMemory::default, |h| h.memory())
    }

    /// INFO replication: `role_lines` (a primary's `role:master`, or a
    /// replica's link), then the replicas, IDs, offset and backlog.
    pub(crate) fn info(&self, config: &crate::config::Config, role_lines: &str) -> String {
        use std::fmt::Write;
        let replicas = self.replicas();
        let mut s = format!("# Replication\r\n{role_lines}connected_slaves:{}\r\n", replicas.len());
        let c = &config.repl;
        if c.min_replicas_to_write > 0 && c.min_replicas_max_lag > 0 {
            let _ = write!(
                s,
                "min_slaves_good_slaves:{}\r\n",
                self.good_replicas(c.min_replicas_max_lag)
            );
        }
        for (i, r) in replicas.iter().enumerate() {
            let _ = write!(
                s,
                "slave{i}:ip={},port={},state={},offset={},lag={}\r\n",
                r.ip,
                r.port,
                r.state().name(),
                r.ack_offset(),
                r.lag_secs()
            );
        }
        let (first, histlen) = self.hub.as_ref().map_or((0, 0), |h| h.extent());
        let _ = write!(
            s,
            "master_failover_state:{}\r\nmaster_replid:{}\r\nmaster_replid2:{}\r\nmaster_repl_offset:{}\r\nsecond_repl_offset:{}\r\nrepl_backlog_active:{}\r\nrepl_backlog_size:{}\r\nrepl_backlog_first_byte_offset:{}\r\nrepl_backlog_histlen:{}\r\n",
            self.failover.phase.word(),
            self.replid,
            self.replid2,
            self.offset(),
            self.second_offset,
            u8::from(self.hub.is_some()),
            c.backlog_size,
            first,
            histlen
        );
        s
    }

    /// This server continues the history `replid` up to `offset` as a
    /// primary (a replica promoted): the backlog starts again at that
    /// offset, so the old primary's replicas (and the old primary) continue
    /// partially from it; a backlog of another history is dropped with its
    /// replicas, which resync.
    pub(crate) fn adopt(
        &mut self,
        replid: &str,
        offset: u64,
        effects: &mut feed::Effects,
        config: &crate::config::Config,
    ) {
        self.proxy = false;
        self.set_from_primary(replid, offset);
        if let Some(hub) = self.hub.as_ref().filter(|h| h.offset() == offset) {
            // The stream this server passed on goes on as its own; the
            // next write selects its database (Redis's `slaveseldb = -1`).
            effects.set_repl(Some(Encoder::new(hub.clone())));
            self.no_replicas_since = now_ms();
            return;
        }
        if let Some(old) = self.hub.take() {
            for r in old.replicas() {
                r.kill();
            }
        }
        let hub = Arc::new(Hub::new(
            offset,
            config.repl.backlog_size,
            OutputLimit::from_config(config),
        ));
        effects.set_repl(Some(Encoder::new(hub.clone())));
        self.hub = Some(hub);
        self.no_replicas_since = now_ms();
    }

    /// ROLE's replicas: (ip, listening port, acknowledged offset) of the online ones.
    pub(crate) fn role_replicas(&self) -> Vec<(String, u64, u64)> {
        self.replicas()
            .iter()
            .filter(|r| r.state() == State::Online)
            .map(|r| (r.ip.clone(), r.port, r.ack_offset()))
            .collect()
    }

    /// Registers a WAIT (replaces any earlier one of the client).
    pub(crate) fn add_waiter(&mut self, effects: &mut feed::Effects, client: u64, offset: u64, wanted: u64) {
        self.waiters.retain(|w| w.client != client);
        self.waiters.push(Waiter { client, offset, wanted });
        effects.request_ack();
    }

    /// The WAITs ACKs may have answered: (client, count, answered).
    pub(crate) fn waiter_counts(&mut self) -> Vec<(u64, u64, bool)> {
        let counts: Vec<(u64, u64, bool)> = self
            .waiters
            .iter()
            .map(|w| {
                let n = self.acked(w.offset);
                (w.client, n, n >= w.wanted)
            })
            .collect();
        self.waiters
            .retain(|w| !counts.iter().any(|&(c, _, done)| done && c == w.client));
        counts
    }

    /// Replica `k`'s address: a live link's, else the one it had when this
    /// primary died.
    pub(crate) fn replica_address(&self, k: usize) -> Option<(String, u64)> {
        match self.replicas().get(k) {
            Some(r) => Some((r.ip.clone(), r.port)),
            None => self.died_with.get(k).cloned(),
        }
    }

    /// The backlog's end, while there is one.
    pub(crate) fn hub(&self) -> Option<&Arc<Hub>> {
        self.hub.as_ref()
    }

    /// The test clock moved: delayed links look again.
    pub(crate) fn nudge_links(&self) {
        if let Some(hub) = &self.hub {
            hub.nudge();
        }
    }

    /// Forgets client `id`'s WAIT (it ended otherwise).
    pub(crate) fn drop_waiter(&mut self, id: u64) {
        self.waiters.retain(|w| w.client != id);
    }
}

/// Sends `REPLICAOF NO ONE` to the server at `addr` ("ip:port") and reads
/// its reply (the test-control plane's "promote replica k").
pub(crate) async fn promote_at(addr: &str) -> std::io::Result<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await?;
    s.write_all(&crate::replica::link::encode(&[b"REPLICAOF", b"NO", b"ONE"]))
        .await?;
    let mut reply = vec![0u8; 256];
    let n = s.read(&mut reply).await?;
    Ok(String::from_utf8_lossy(&reply[..n]).trim_end().to_string())
}

/// The client's REPLCONF settings, kept until PSYNC makes it a replica.
#[derive(Clone, Debug, Default)]
pub(crate) struct ReplConf {
    pub(crate) listening_port: u64,
    pub(crate) ip: Option<String>,
    pub(crate) capa_eof: bool,
    pub(crate) capa_psync2: bool,
}

/// SYNC / PSYNC for `client` (Redis's `syncCommand`): a partial resync
/// when the ID and the offset allow, else a full one (now, or from the
/// cron once the diskless delay passed). Returns the link's handoff.
pub(crate) fn sync(
    dbs: &mut [crate::store::Db],
    state: &mut crate::state::ServerState,
    libraries: Vec<Bytes>,
    client: &crate::net::clients::ClientState,
    psync: Option<(&[u8], i64)>,
) -> Handoff {
    let conf = client.replconf.clone().unwrap_or_default();
    let replica = Arc::new(Replica {
        id: client.id,
        ip: conf.ip.clone().unwrap_or_else(|| client.addr.ip_text()),
        port: conf.listening_port,
        capa_eof: conf.capa_eof,
        capa_psync2: conf.capa_psync2,
        pre_psync: psync.is_none(),
        state: AtomicU8::new(State::WaitStart as u8),
        ack_offset: AtomicU64::new(0),
        ack_ms: AtomicU64::new(now_ms()),
        next: AtomicU64::new(u64::MAX),
        soft_since: AtomicU64::new(0),
        killed: AtomicBool::new(false),
        wake: Notify::new(),
        faults: LinkFaults::default(),
    });
    let (tx, msgs) = mpsc::unbounded_channel();
    tracing::info!("Replica {}:{} asks for synchronization", replica.ip, replica.port);
    let repl = &mut state.repl;
    if let Some((id, offset)) = psync {
        let id = String::from_utf8_lossy(id);
        let same_history = id == repl.replid || (id == repl.replid2 && offset <= repl.second_offset);
        if let Some(hub) = repl.hub.clone().filter(|h| same_history && h.covers(offset)) {
            let offset = offset as u64;
            replica.next.store(offset, Ordering::Release);
            replica.set_state(State::Online);
            hub.add(replica.clone());
            let line = if replica.capa_psync2 {
                format!("+CONTINUE {}\r\n", repl.replid)
            } else {
                "+CONTINUE\r\n".to_string()
            };
            let _ = tx.send(LinkMsg::Line(Bytes::from(line)));
            let _ = tx.send(LinkMsg::Stream);
            repl.sync_partial_ok += 1;
            tracing::info!(
                "Partial resynchronization request from {}:{} accepted. Sending {} bytes of backlog starting from offset {offset}.",
                replica.ip,
                replica.port,
                hub.offset() + 1 - offset
            );
            let clock = state.clock.clone();
            return Handoff {
                replica,
                hub,
                msgs,
                clock,
            };
        }
        if !id.starts_with('?') {
            repl.sync_partial_err += 1;
        }
    }
    repl.sync_full += 1;
    repl.create_backlog(&mut state.effects, &state.config);
    crate::notify::log_keys(dbs, &state.config, &state.effects);
    let hub = repl.hub.clone().expect("created above");
    hub.add(replica.clone());
    if state.bgsave.in_progress {
        // A save's walk runs (Redis's CASE 1 and 2 of `syncCommand`).
        match repl.snapshot {
            Some((offset, false)) if repl.can_attach(&replica, &hub, offset) => {
                // It gets the same image and the stream from its offset.
                replica.next.store(offset + 1, Ordering::Release);
                replica.set_state(State::WaitEnd);
                if !replica.pre_psync {
                    let _ = tx.send(LinkMsg::Line(Bytes::from(format!(
                        "+FULLRESYNC {} {offset}\r\n",
                        repl.replid
                    ))));
                }
                repl.syncing.push((replica.clone(), tx));
                tracing::info!("Waiting for end of BGSAVE for SYNC");
            }
            Some((_, true)) => {
                repl.waiting.push((replica.clone(), tx));
                tracing::info!("Current BGSAVE has socket target. Waiting for next BGSAVE for SYNC");
            }
            _ => {
                repl.waiting.push((replica.clone(), tx));
                tracing::info!("Can't attach the replica to the current BGSAVE. Waiting for next BGSAVE for SYNC");
            }
        }
    } else {
        repl.waiting.push((replica.clone(), tx));
        let c = &state.config.repl;
        if c.diskless_sync && replica.capa_eof && c.diskless_sync_delay > 0 {
            tracing::info!("Delay next BGSAVE for diskless SYNC");
        } else if state.bgsave.rewriting {
            tracing::info!("No BGSAVE in progress, but another BG operation is active. BGSAVE for replication delayed");
        } else {
            start_full_sync(dbs, state, libraries);
        }
    }
    Handoff {
        replica,
        hub,
        msgs,
        clock: state.clock.clone(),
    }
}

/// Starts the snapshot of the replicas waiting for one (Redis's
/// `startBgsaveForReplication`), unless a save runs: each gets
/// `+FULLRESYNC <replid> <offset>` now, the stream is kept from that
/// offset, and the next effect selects its database.
fn start_full_sync(dbs: &mut [crate::store::Db], state: &mut crate::state::ServerState, libraries: Vec<Bytes>) {
    if state.bgsave.walking() || state.repl.waiting.is_empty() {
        return;
    }
    let offset = state.repl.offset();
    let eof = state.config.repl.diskless_sync && state.repl.waiting.iter().all(|(r, _)| r.capa_eof);
    let waiting = std::mem::take(&mut state.repl.waiting);
    let line = Bytes::from(format!("+FULLRESYNC {} {offset}\r\n", state.repl.replid));
    for (r, tx) in &waiting {
        r.next.store(offset + 1, Ordering::Release);
        r.set_state(State::WaitEnd);
        if !r.pre_psync {
            let _ = tx.send(LinkMsg::Line(line.clone()));
        }
    }
    state.effects.reset_repl_select();
    state.repl.syncing.extend(waiting);
    tracing::info!(
        "Starting BGSAVE for SYNC with target: {}",
        if eof { "replicas sockets" } else { "disk" }
    );
    if crate::persist::snapshot::start_replication_snapshot(dbs, state, libraries, eof).is_err() {
        // The replicas' senders are dropped: their links close.
        state.repl.syncing.clear();
    } else {
        state.repl.snapshot = Some((offset, eof));
        // Redis counts the save its fork makes for a disk-target full sync
        // in `rdb_saves`, not one written to the replicas' sockets.
        if !eof {
            state.saves.rdb_saves += 1;
        }
    }
}

/// The replication snapshot ended (under the engine lock): its RDB goes to
/// every replica of it (`None`: it failed or was killed, they are dropped).
pub(crate) fn snapshot_done(state: &mut crate::state::ServerState, rdb: Option<Vec<u8>>, eof: bool) {
    state.repl.snapshot = None;
    let syncing = std::mem::take(&mut state.repl.syncing);
    if syncing.is_empty() {
        return;
    }
    let Some(rdb) = rdb else {
        tracing::warn!("Background RDB transfer terminated with error");
        for (r, _) in &syncing {
            r.kill();
        }
        return;
    };
    let rdb = Arc::new(rdb);
    for (r, tx) in syncing {
        r.set_state(State::SendBulk);
        let _ = tx.send(LinkMsg::Rdb { rdb: rdb.clone(), eof });
    }
}

/// The replication cron, every tick of the server's timer: the pending
/// full syncs start when they may; once a second (Redis's
/// `replicationCron`) PINGs every `repl-ping-replica-period` seconds,
/// replicas silent past `repl-timeout` are dropped and the backlog is
/// freed after `repl-backlog-ttl` seconds without replicas.
pub(crate) fn cron(
    dbs: &mut [crate::store::Db],
    state: &mut crate::state::ServerState,
    libraries: impl FnOnce() -> Vec<Bytes>,
) {
    let now = now_ms();
    failover::update(dbs, state);
    if !state.repl.waiting.is_empty() && !state.bgsave.walking() {
        let c = &state.config.repl;
        let waited = state
            .repl
            .waiting
            .iter()
            .map(|(r, _)| now.saturating_sub(r.ack_ms.load(Ordering::Acquire)))
            .max()
            .unwrap_or(0);
        let count = state.repl.waiting.len() as u64;
        if !c.diskless_sync
            || (c.diskless_sync_max_replicas > 0 && count >= c.diskless_sync_max_replicas)
            || waited >= c.diskless_sync_delay * 1000
        {
            start_full_sync(dbs, state, libraries());
        }
    }
    if now.saturating_sub(state.repl.cron_last) < 1000 {
        return;
    }
    state.repl.cron_last = now;
    let loops = state.repl.cron_loops;
    state.repl.cron_loops += 1;
    let replicas = state.repl.replicas();
    let c = state.config.repl.clone();
    if !replicas.is_empty() && loops.is_multiple_of(c.ping_period.max(1)) && !state.repl.failover.holds_pings() {
        state.effects.repl_command(&[b"PING"]);
    }
    for r in &replicas {
        if r.state() == State::Online && !r.pre_psync && r.lag_secs() > c.timeout {
            tracing::warn!("Disconnecting timedout replica (streaming sync): {}:{}", r.ip, r.port);
            r.kill();
        }
    }
    if replicas.is_empty() && c.backlog_ttl > 0 && state.repl.hub.is_some() {
        let idle = now.saturating_sub(state.repl.no_replicas_since) / 1000;
        if idle > c.backlog_ttl {
            state.repl.free_backlog(&mut state.effects);
            crate::notify::log_keys(dbs, &state.config, &state.effects);
            tracing::info!(
                "Replication backlog freed after {} seconds without connected replicas.",
                c.backlog_ttl
            );
        }
    }
    state.flush_effects();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replica(id: u64, next: u64) -> Arc<Replica> {
        Arc::new(Replica {
            id,
            ip: "127.0.0.1".into(),
            port: 0,
            capa_eof: false,
            capa_psync2: true,
            pre_psync: false,
            state: AtomicU8::new(State::Online as u8),
            ack_offset: AtomicU64::new(0),
            ack_ms: AtomicU64::new(now_ms()),
            next: AtomicU64::new(next),
            soft_since: AtomicU64::new(0),
            killed: AtomicBool::new(false),
            wake: Notify::new(),
            faults: LinkFaults::default(),
        })
    }

    #[test]
    fn the_backlog_keeps_its_size_and_what_replicas_still_need() {
        let hub = Hub::new(0, 10, OutputLimit::default());
        assert_eq!(hub.append(b"0123456789abcdef"), 16);
        // Only the last 10 bytes: offsets 7..=16.
        assert_eq!(hub.extent(), (7, 10));
        assert!(hub.covers(7) && hub.covers(17) && !hub.covers(6) && !hub.covers(18));
        assert_eq!(hub.read_from(15, u64::MAX).unwrap(), b"ef");
        assert_eq!(hub.read_from(17, u64::MAX).unwrap(), b"");
        assert!(hub.read_from(3, u64::MAX).is_none());
        // A replica at offset 9 holds its bytes past the size.
        hub.add(replica(1, 9));
        hub.append(b"ghijklmnop");
        assert_eq!(hub.extent(), (9, 18));
        assert_eq!(hub.read_from(9, u64::MAX).unwrap(), b"89abcdefghijklmnop");
        // Once it is gone the backlog shrinks back at once.
        assert!(hub.remove(1));
        assert_eq!(hub.extent(), (17, 10));
    }

    #[test]
    fn a_replica_past_the_hard_limit_is_disconnected_and_holds_nothing() {
        let limit = OutputLimit {
            hard: 8,
            soft: 0,
            soft_secs: 0,
        };
        let hub = Hub::new(100, 4, limit);
        let slow = replica(1, 101);
        let fast = replica(2, 101);
        hub.add(slow.clone());
        hub.add(fast.clone());
        hub.append(b"12345678");
        assert!(!slow.is_killed(), "8 pending bytes are within the limit");
        fast.next.store(109, Ordering::Release);
        hub.append(b"9");
        assert!(slow.is_killed() && !fast.is_killed());
        assert_eq!(hub.extent(), (106, 4), "the killed replica's bytes are let go");
    }

    #[test]
    fn promotion_keeps_the_old_history_as_the_secondary_id() {
        let mut repl = Replication::default();
        repl.feed(b"12345");
        let old = repl.ids().0.to_string();
        repl.shift_ids_on_promotion();
        let (id, id2, second) = repl.ids();
        assert_eq!((id2, second), (old.as_str(), 6));
        assert_ne!(id, old);
        assert_eq!(id.len(), ID_LEN);
    }
}
