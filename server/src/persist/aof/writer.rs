//! The append-only file's writer: a thread of its own that receives the
//! effects feed's batches (outside the engine lock), writes them to the
//! incremental file and fsyncs them as `appendfsync` says (Redis's
//! `flushAppendOnlyFile` and its background fsync):
//!
//! - `always`: every batch is written and fsynced before any reply to a
//!   command of it leaves (the connections wait on [`Durability`]; batches
//!   queued together share one fsync, a group commit);
//! - `everysec`: written before the replies leave (as Redis writes its
//!   AOF buffer before it sends replies: a killed process loses no
//!   acknowledged write but those held back, below), fsynced once a second
//!   by the thread, off the file's lock. While that fsync runs, writes are
//!   held back in memory
//!   for up to 2 seconds and their replies leave, as Redis postpones its
//!   write then: on Linux the write would wait for the fsync, and the
//!   engine with it. A process killed then loses those writes, as Redis
//!   loses its AOF buffer;
//! - `no`: written before the replies leave, the kernel decides when they
//!   reach the disk.
//!
//! Under `everysec` and `no` the engine writes each batch itself, under
//! its lock, as Redis's event loop writes its AOF buffer: handing every
//! batch to the thread cost two thread wake-ups per write and doubled the
//! p99 of writes on a loaded machine (README, Persistence). A batch goes
//! to the thread instead when messages are queued there (a rewrite's
//! switch to a new file, batches of `always`), so nothing overtakes what
//! was sent before it.
//!
//! A failed write keeps its effects in the buffer and is tried again at
//! least once a second; until a write (and the last fsync) succeeds,
//! writes and PING are refused with `-MISCONF` ([`Durability::error`],
//! Redis's `writeCommandsDeniedByDiskError`). Under `always` a failed
//! write or fsync is fatal, as Redis's `exit(1)`: the replies waiting for
//! it never leave and the server stops ([`Durability::fatal`]).
//!
//! For crash staging the writer remembers, for each write, the server-clock
//! time of its batch and the file offset after it, and the offset of the
//! last fsync: [`Msg::Crash`] cuts the file back to what a power loss would
//! have left. What must never happen here: the engine lock taken, or a
//! reply released before its batch is written (and fsynced, under
//! `always`), but for a batch held in memory as Redis holds its buffer
//! (behind a running fsync, or after a failed write, under `everysec` and
//! `no`).

use std::collections::VecDeque;
use std::fs::File;
use std::io::{Seek, Write};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use parking_lot::Mutex;

use crate::errors;
use crate::exec::feed::{self, Unit};
use crate::net::clients::CloseSignal;

/// How often `everysec` fsyncs.
const EVERYSEC: Duration = Duration::from_secs(1);

/// Writes remembered for crash staging (their times and offsets): enough
/// for many seconds of writes at any rate a test drives; older ones are
/// forgotten (a crash then cannot lose more than they cover).
const CRASH_HISTORY: usize = 1 << 16;

/// At most one log line of failed writes per this long (Redis's
/// `AOF_WRITE_LOG_ERROR_RATE`): a full disk is retried every second.
const WRITE_ERROR_LOG_EVERY: Duration = Duration::from_secs(30);

/// `appendfsync`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fsync {
    Always = 0,
    EverySec = 1,
    No = 2,
}

impl Fsync {
    pub(crate) fn parse(text: &str) -> Fsync {
        match text {
            "always" => Fsync::Always,
            "no" => Fsync::No,
            _ => Fsync::EverySec,
        }
    }

    fn from_u8(n: u8) -> Fsync {
        match n {
            0 => Fsync::Always,
            2 => Fsync::No,
            _ => Fsync::EverySec,
        }
    }
}

/// What the writer has made durable, shared with the connections (in
/// [`crate::state::Shared`]) so that under `always` a reply waits for its
/// batch, without the engine lock.
#[derive(Debug, Default)]
pub(crate) struct Durability {
    /// The last batch given to the writer (its sequence number).
    sent: AtomicU64,
    /// The last batch written and, under `always`, fsynced.
    durable: AtomicU64,
    /// The file is on: replies wait for their batch's write.
    on: AtomicBool,
    /// The writer's policy and annotations, as CONFIG SET leaves them.
    policy: AtomicU8,
    timestamps: AtomicBool,
    /// Bytes of the incremental file written (INFO `aof_current_size` is
    /// the base's plus this).
    pub(crate) incr_size: AtomicU64,
    /// The thread's `everysec` fsync runs (INFO `aof_pending_bio_fsync`,
    /// Redis's pending background fsync job). Changed only under the
    /// writer's lock, so a write that finds it set knows the fsync has not
    /// ended meanwhile.
    pub(crate) fsync_running: AtomicBool,
    /// Writes made after waiting 2 s for an fsync (INFO `aof_delayed_fsync`).
    pub(crate) delayed_fsync: AtomicU64,
    /// Bytes of effects held back while an fsync runs (INFO
    /// `aof_buffer_length`, Redis's `aof_buf`).
    pub(crate) buffered: AtomicU64,
    /// The memory that buffer holds (INFO `mem_aof_buffer`; left out of
    /// `maxmemory`'s count, as Redis leaves out its `aof_buf`).
    pub(crate) buffer_memory: AtomicU64,
    /// A save or rewrite walks the keyspace (the latency event of a write
    /// then is `aof-write-active-child`, as when Redis has a child).
    walking: AtomicBool,
    /// A staged slow disk: every fsync of the file first waits this many
    /// ms of real time (`COORDIS.SERVER FSYNC-STALL`; 0: none).
    fsync_stall_ms: AtomicU64,
    /// The errno of the last write, 0 when it succeeded (Redis's
    /// `aof_last_write_status` and `aof_last_write_errno`).
    write_errno: AtomicI32,
    /// The errno of the last fsync, 0 when it succeeded (Redis's
    /// `aof_bio_fsync_status` and `aof_bio_fsync_errno`).
    fsync_errno: AtomicI32,
    /// A staged full disk: every write and fsync of the file fails with
    /// ENOSPC (`COORDIS.SERVER DISK-FULL`).
    disk_full: AtomicBool,
    /// Closed when a write or fsync failed under `always`: the server
    /// stops, as Redis exits, and no waiting reply leaves.
    pub(crate) fatal: CloseSignal,
    /// Writes are not fsynced for now: `no-appendfsync-on-rewrite` is on
    /// and a save or rewrite walks the keyspace (Redis skips the fsync
    /// while a child runs, so a crash then loses acknowledged writes even
    /// under `always`).
    skip_fsync: AtomicBool,
    notify: tokio::sync::Notify,
}

impl Durability {
    /// Sets the writer's policy (`appendfsync`, `aof-timestamp-enabled`),
    /// whether replies wait (`on`: the file is written), whether a save or
    /// rewrite walks and whether fsyncs are skipped for now
    /// ([`Durability::skip_fsync`]).
    pub(crate) fn configure(&self, fsync: Fsync, timestamps: bool, on: bool, walking: bool, skip_fsync: bool) {
        self.policy.store(fsync as u8, Ordering::Relaxed);
        self.walking.store(walking, Ordering::Relaxed);
        self.skip_fsync.store(skip_fsync, Ordering::Relaxed);
        self.timestamps.store(timestamps, Ordering::Relaxed);
        self.on.store(on, Ordering::Release);
        if !on {
            self.release();
        }
    }

    /// CONFIG RESETSTAT: `aof_delayed_fsync` from 0, as Redis's `resetServerStats`.
    pub(crate) fn reset_stats(&self) {
        self.delayed_fsync.store(0, Ordering::Relaxed);
    }

    /// Stages a slow disk: every fsync first waits `ms` of real time (0: none).
    pub(crate) fn stall_fsync(&self, ms: u64) {
        self.fsync_stall_ms.store(ms, Ordering::Relaxed);
    }

    /// Stages a full disk (`on`) or ends it: every write and fsync of the
    /// file fails with ENOSPC meanwhile.
    pub(crate) fn stage_disk_full(&self, on: bool) {
        self.disk_full.store(on, Ordering::Relaxed);
    }

    /// The errno of the failed write, else of the failed fsync, that
    /// refuses writes (Redis's `writeCommandsDeniedByDiskError` for the
    /// AOF); `None` when both last succeeded.
    pub(crate) fn error(&self) -> Option<i32> {
        [&self.write_errno, &self.fsync_errno]
            .into_iter()
            .map(|errno| errno.load(Ordering::Relaxed))
            .find(|&errno| errno != 0)
    }

    /// The file is turned on again (CONFIG SET appendonly yes): past
    /// errors are forgotten, as Redis's `startAppendOnly` does.
    pub(crate) fn reopened(&self) {
        if self.fsync_errno.swap(0, Ordering::Relaxed) != 0 {
            tracing::warn!("AOF reopen, just ignore the AOF fsync error in bio job");
        }
        if self.write_errno.swap(0, Ordering::Relaxed) != 0 {
            tracing::warn!("AOF reopen, just ignore the last error.");
        }
    }

    /// Replies wait for the file (it is on, whatever `appendfsync` says).
    #[inline]
    pub(crate) fn waits(&self) -> bool {
        self.on.load(Ordering::Acquire)
    }

    /// Waits until every batch given to the writer so far is written (and
    /// fsynced, under `always`). `false`: it never will be, the write or
    /// fsync failed under `always` and the server stops; the replies must
    /// not leave (Redis exits before it sends them).
    pub(crate) async fn wait(&self) -> bool {
        let target = self.sent.load(Ordering::Acquire);
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.fatal.is_closed() {
                return false;
            }
            if self.durable.load(Ordering::Acquire) >= target || !self.waits() {
                return true;
            }
            notified.await;
        }
    }

    fn policy(&self) -> Fsync {
        Fsync::from_u8(self.policy.load(Ordering::Relaxed))
    }

    /// An error a staged full disk makes of a write or fsync.
    fn staged_failure(&self) -> std::io::Result<()> {
        if self.disk_full.load(Ordering::Relaxed) {
            return Err(std::io::Error::from_raw_os_error(libc::ENOSPC));
        }
        Ok(())
    }

    /// The server stops on an error it cannot recover from, where Redis
    /// logs `line` and exits (a write or fsync failed under `always`: the
    /// replies in its buffers never leave, the writes cannot be taken
    /// back; a replica's disk failed, [`crate::exec::process_primary`]).
    /// The waiting replies are dropped and the server stops.
    pub(crate) fn die(&self, line: &str) {
        tracing::warn!("{line}");
        self.fatal.close();
        self.notify.notify_waiters();
    }

    /// Every waiter goes on (the file is off, or a crash dropped them).
    fn release(&self) {
        self.durable.store(self.sent.load(Ordering::Acquire), Ordering::Release);
        self.notify.notify_waiters();
    }

    fn reached(&self, seq: u64) {
        self.durable.fetch_max(seq, Ordering::AcqRel);
        self.notify.notify_waiters();
    }
}

/// A message to the writer, in the feed's order.
#[derive(Debug)]
pub(crate) enum Msg {
    /// A batch of the feed: its sequence and its server-clock time (unix ms).
    Batch { units: Arc<[Unit]>, seq: u64, at_ms: u64 },
    /// A rewrite started: what came before is written and fsynced to the
    /// old file, what comes after goes to `file` (answered when done).
    Switch { file: File, done: mpsc::SyncSender<()> },
    /// A staged power loss at `now_ms`: the file is cut back to what was
    /// fsynced, or with `lose_ms` to the writes older than that many ms;
    /// answered with the offset kept.
    Crash {
        lose_ms: Option<u64>,
        now_ms: u64,
        done: mpsc::SyncSender<std::io::Result<u64>>,
    },
    /// Write and fsync everything, then stop (answered when done).
    Stop { done: mpsc::SyncSender<()> },
    /// Write and fsync everything so far and go on (answered when done):
    /// DEBUG LOADAOF reads the files back next.
    Flush { done: mpsc::SyncSender<()> },
}

/// The engine's end: in [`crate::exec::feed::Effects`], given every batch
/// (always under the engine lock, so in the feed's order).
#[derive(Debug)]
pub(crate) struct Sink {
    tx: mpsc::Sender<Msg>,
    /// The file's state, shared with the thread: the engine writes a batch
    /// in place when nothing is queued ([`Sink::send`]).
    writer: Arc<Mutex<Writer>>,
    /// Messages sent to the thread and not yet done with (written, synced
    /// under `always`, their waiters released).
    queued: Arc<AtomicUsize>,
    durability: Arc<Durability>,
    clock: Arc<dyn crate::store::Clock>,
}

impl Sink {
    /// Gives the writer a batch of the feed: written here and now under
    /// `everysec` and `no` when the thread has nothing queued (or held back
    /// while its fsync runs, see [`Writer::flush_unless_fsyncing`]), else
    /// queued to the thread behind what it has. The write made here, for
    /// the latency monitor.
    pub(crate) fn send(&self, units: Arc<[Unit]>) -> Option<Wrote> {
        let seq = self.durability.sent.fetch_add(1, Ordering::AcqRel) + 1;
        let at_ms = self.clock.now_ms();
        let policy = Fsync::from_u8(self.durability.policy.load(Ordering::Relaxed));
        // Only senders add to `queued`, and they all hold the engine lock:
        // once it reads 0, nothing sent before this batch is still queued.
        if policy != Fsync::Always && self.queued.load(Ordering::Acquire) == 0 {
            let mut w = self.writer.lock();
            w.encode(&units, at_ms);
            let wrote = w.flush_unless_fsyncing(policy, at_ms / 1000);
            drop(w);
            self.durability.reached(seq);
            return wrote;
        }
        self.queue(Msg::Batch { units, seq, at_ms });
        None
    }

    fn queue(&self, msg: Msg) -> bool {
        self.queued.fetch_add(1, Ordering::AcqRel);
        if self.tx.send(msg).is_err() {
            self.queued.fetch_sub(1, Ordering::AcqRel);
            return false;
        }
        true
    }

    /// Sends a marker without waiting for its answer (the writer takes its
    /// messages in order: what is sent after it comes after it).
    pub(crate) fn post<T>(&self, make: impl FnOnce(mpsc::SyncSender<T>) -> Msg) {
        let (done, _answer) = mpsc::sync_channel(1);
        self.queue(make(done));
    }

    /// Sends a marker and waits for its answer (the writer never waits for
    /// the engine, so holding the lock meanwhile is safe).
    pub(crate) fn ask<T>(&self, make: impl FnOnce(mpsc::SyncSender<T>) -> Msg) -> Option<T> {
        let (done, answer) = mpsc::sync_channel(1);
        if !self.queue(make(done)) {
            return None;
        }
        answer.recv().ok()
    }
}

/// A write of the file the engine made, for Redis's latency events: the
/// event (`aof-write-pending-fsync`, `aof-write-active-child` or
/// `aof-write-alone`; each is also an `aof-write`) and its milliseconds.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Wrote {
    pub(crate) event: &'static str,
    pub(crate) ms: u64,
}

/// The largest [`Writer::buf`] kept once written (Redis's
/// `flushAppendOnlyFile` frees an `aof_buf` of 4000 bytes or more).
const KEEP_BUF_BYTES: usize = 4000;

/// Starts a writer appending to `file` (of `size` bytes, all durable).
pub(crate) fn start(
    file: File,
    size: u64,
    durability: Arc<Durability>,
    clock: Arc<dyn crate::store::Clock>,
) -> std::io::Result<Sink> {
    let (tx, rx) = mpsc::channel();
    durability.incr_size.store(size, Ordering::Relaxed);
    durability.buffered.store(0, Ordering::Relaxed);
    durability.buffer_memory.store(0, Ordering::Relaxed);
    let writer = Arc::new(Mutex::new(Writer {
        file,
        generation: 0,
        offset: size,
        synced: size,
        selected: None,
        last_ts: 0,
        history: VecDeque::new(),
        history_base: size,
        durability: durability.clone(),
        buf: BytesMut::new(),
        marks: Vec::new(),
        postponed_since: None,
        error_logged: None,
    }));
    let queued = Arc::new(AtomicUsize::new(0));
    let (thread_writer, thread_queued) = (writer.clone(), queued.clone());
    std::thread::Builder::new()
        .name("coordis-aof".into())
        .spawn(move || run(&thread_writer, &thread_queued, rx))?;
    Ok(Sink {
        tx,
        writer,
        queued,
        durability,
        clock,
    })
}

/// The writer's thread: the messages in order, and `everysec`'s fsync.
fn run(writer: &Mutex<Writer>, queued: &AtomicUsize, rx: mpsc::Receiver<Msg>) {
    let durability = writer.lock().durability.clone();
    let mut next_sync = Instant::now() + EVERYSEC;
    loop {
        let policy = Fsync::from_u8(durability.policy.load(Ordering::Relaxed));
        let wait = match policy {
            Fsync::EverySec => next_sync.saturating_duration_since(Instant::now()),
            _ => EVERYSEC,
        };
        let first = match rx.recv_timeout(wait) {
            Ok(msg) => Some(msg),
            Err(mpsc::RecvTimeoutError::Timeout) => None,
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                writer.lock().sync();
                return;
            }
        };
        // Everything already queued goes with it: one fsync for all
        // (a group commit under `always`).
        let mut msgs: Vec<Msg> = first.into_iter().collect();
        while let Ok(msg) = rx.try_recv() {
            msgs.push(msg);
        }
        let handled = msgs.len();
        let mut w = writer.lock();
        let mut last_seq = None;
        for msg in msgs {
            match msg {
                Msg::Batch { units, seq, at_ms } => {
                    w.encode(&units, at_ms);
                    w.flush();
                    last_seq = Some(seq);
                }
                Msg::Switch { file, done } => {
                    w.sync();
                    w.file = file;
                    w.generation += 1;
                    (w.offset, w.synced, w.history_base) = (0, 0, 0);
                    w.history.clear();
                    w.selected = None;
                    durability.incr_size.store(0, Ordering::Relaxed);
                    let _ = done.send(());
                }
                Msg::Crash { lose_ms, now_ms, done } => {
                    let _ = done.send(w.crash(policy, lose_ms, now_ms));
                    durability.release();
                }
                Msg::Flush { done } => {
                    w.sync();
                    if let Some(seq) = last_seq.take() {
                        durability.reached(seq);
                    }
                    let _ = done.send(());
                }
                Msg::Stop { done } => {
                    w.sync();
                    if let Some(seq) = last_seq {
                        durability.reached(seq);
                    }
                    queued.fetch_sub(handled, Ordering::AcqRel);
                    let _ = done.send(());
                    return;
                }
            }
            // A failure under `always`: nothing after it is written, and
            // what waits for an answer gets none (the server stops).
            if durability.fatal.is_closed() {
                return;
            }
        }
        // What a failed write left (it is tried again here, at least once
        // a second, as Redis's cron does).
        w.flush();
        let skip = durability.skip_fsync.load(Ordering::Relaxed);
        let periodic = policy == Fsync::EverySec && Instant::now() >= next_sync;
        if periodic {
            next_sync = Instant::now() + EVERYSEC;
        }
        match policy {
            _ if skip => {}
            Fsync::Always => w.sync(),
            Fsync::EverySec if periodic => {
                // The engine goes on meanwhile: the fsync runs on its own
                // handle of the file, off the lock, and what the engine
                // writes meanwhile waits for it (as Redis postpones its
                // write while its background fsync runs).
                let pending = w.pending_sync();
                if let Some((file, generation, offset)) = pending {
                    durability.fsync_running.store(true, Ordering::Relaxed);
                    drop(w);
                    let synced = fsync(&file, &durability);
                    w = writer.lock();
                    durability.fsync_running.store(false, Ordering::Relaxed);
                    w.synced_to(synced, generation, offset);
                    w.flush();
                }
            }
            Fsync::EverySec | Fsync::No => {}
        }
        drop(w);
        if durability.fatal.is_closed() {
            return;
        }
        if let Some(seq) = last_seq {
            durability.reached(seq);
        }
        // Done with: the engine may write in place again.
        queued.fetch_sub(handled, Ordering::AcqRel);
    }
}

/// An fsync of the file (data only, as Redis's `redis_fsync` on Linux),
/// after the stall a test staged; a staged full disk fails it.
fn fsync(file: &File, durability: &Durability) -> std::io::Result<()> {
    let stall = durability.fsync_stall_ms.load(Ordering::Relaxed);
    if stall > 0 {
        std::thread::sleep(Duration::from_millis(stall));
    }
    durability.staged_failure()?;
    file.sync_data()
}

#[derive(Debug)]
struct Writer {
    file: File,
    /// Files written so far (a rewrite's switch moves to the next): an
    /// fsync that ran off the lock counts only for the file it synced.
    generation: u64,
    /// The file's length (what was written).
    offset: u64,
    /// What the last fsync covered.
    synced: u64,
    /// The database the file last selected (`None`: a new file, or one cut
    /// back: the next effect selects its database).
    selected: Option<usize>,
    /// The second of the last `#TS:` annotation.
    last_ts: u64,
    /// (server-clock ms, offset after) of each write, oldest first.
    history: VecDeque<(u64, u64)>,
    /// The offset before the oldest remembered write.
    history_base: u64,
    durability: Arc<Durability>,
    /// Encoded effects not yet written (Redis's `aof_buf`): empty but while
    /// a write is held back for an fsync, or after a failed write.
    buf: BytesMut,
    /// (server-clock ms, end in `buf`) of each batch in `buf`: the history
    /// entries its write will add.
    marks: Vec<(u64, usize)>,
    /// The server-clock second a write was first held back for an fsync
    /// (Redis's `aof_flush_postponed_start`).
    postponed_since: Option<u64>,
    /// When a failed write was last logged ([`WRITE_ERROR_LOG_EVERY`]).
    error_logged: Option<Instant>,
}

impl Writer {
    /// Adds a batch to [`Writer::buf`] as the replication stream carries it
    /// (without what is for replicas only), with a `#TS:` annotation when
    /// the second changed.
    fn encode(&mut self, units: &[Unit], at_ms: u64) {
        let before = self.buf.len();
        if self.durability.timestamps.load(Ordering::Relaxed) && at_ms / 1000 > self.last_ts {
            self.last_ts = at_ms / 1000;
            self.buf
                .extend_from_slice(format!("#TS:{}\r\n", self.last_ts).as_bytes());
        }
        for unit in units {
            let buf = &mut self.buf;
            feed::stream(
                &mut self.selected,
                &unit.ops,
                unit.unwrapped,
                feed::Op::for_aof,
                |args| feed::encode_command(args, buf),
            );
        }
        if self.buf.len() > before {
            self.marks.push((at_ms, self.buf.len()));
            self.durability.buffered.store(self.buf.len() as u64, Ordering::Relaxed);
            self.durability
                .buffer_memory
                .store(self.buf.capacity() as u64, Ordering::Relaxed);
        }
    }

    /// Empties [`Writer::buf`] once its bytes are written (or lost to a
    /// staged crash): a small buffer is kept for the next batch, a large
    /// one freed, as Redis keeps an `aof_buf` under [`KEEP_BUF_BYTES`], so
    /// one large write does not hold its size for good.
    fn empty_buf(&mut self) {
        if self.buf.capacity() < KEEP_BUF_BYTES {
            self.buf.clear();
        } else {
            self.buf = BytesMut::new();
        }
        self.durability.buffered.store(0, Ordering::Relaxed);
        self.durability
            .buffer_memory
            .store(self.buf.capacity() as u64, Ordering::Relaxed);
    }

    /// Redis's `flushAppendOnlyFile(0)`: under `everysec`, while the
    /// thread's fsync runs, the buffer is kept for up to 2 seconds (on
    /// Linux the write would wait behind the fsync, holding the engine),
    /// and written by the thread as soon as the fsync ends. A write that
    /// has waited 2 seconds goes ahead and counts in `aof_delayed_fsync`.
    fn flush_unless_fsyncing(&mut self, policy: Fsync, now_s: u64) -> Option<Wrote> {
        let fsyncing = self.durability.fsync_running.load(Ordering::Relaxed);
        if policy == Fsync::EverySec && fsyncing && !self.buf.is_empty() {
            match self.postponed_since {
                None => {
                    self.postponed_since = Some(now_s);
                    return None;
                }
                Some(since) if now_s.saturating_sub(since) < 2 => return None,
                Some(_) => {
                    self.durability.delayed_fsync.fetch_add(1, Ordering::Relaxed);
                    tracing::info!(
                        "Asynchronous AOF fsync is taking too long (disk is busy?). Writing the AOF buffer without waiting for fsync to complete, this may slow down Redis."
                    );
                }
            }
        }
        let started = Instant::now();
        if !self.flush() {
            return None;
        }
        let event = if fsyncing {
            "aof-write-pending-fsync"
        } else if self.durability.walking.load(Ordering::Relaxed) {
            "aof-write-active-child"
        } else {
            "aof-write-alone"
        };
        let ms = started.elapsed().as_millis() as u64;
        Some(Wrote { event, ms })
    }

    /// Writes [`Writer::buf`] in one write; whether anything was written. A
    /// failed write leaves the file as it was and the buffer for the next
    /// try (writes are refused and INFO `aof_last_write_status` says `err`
    /// meanwhile), as Redis's; under `always` it is fatal.
    fn flush(&mut self) -> bool {
        self.postponed_since = None;
        if self.buf.is_empty() {
            return false;
        }
        let written = self
            .durability
            .staged_failure()
            .and_then(|()| self.file.write_all(&self.buf));
        if let Err(e) = written {
            self.write_failed(&e);
            return false;
        }
        if self.durability.write_errno.swap(0, Ordering::Relaxed) != 0 {
            tracing::warn!("AOF write error looks solved, Redis can write again.");
        }
        for (at_ms, end) in self.marks.drain(..) {
            if self.history.len() == CRASH_HISTORY {
                if let Some((_, offset)) = self.history.pop_front() {
                    self.history_base = offset;
                }
            }
            self.history.push_back((at_ms, self.offset + end as u64));
        }
        self.offset += self.buf.len() as u64;
        self.empty_buf();
        self.durability.incr_size.store(self.offset, Ordering::Relaxed);
        true
    }

    /// A failed write, as Redis's `flushAppendOnlyFile` takes it: logged
    /// (at most once per [`WRITE_ERROR_LOG_EVERY`]), what part of it was
    /// written cut off again, its errno kept for `-MISCONF` (a short write
    /// counts as a full disk, as in Redis); fatal under `always`.
    fn write_failed(&mut self, e: &std::io::Error) {
        let errno = e.raw_os_error().unwrap_or(libc::ENOSPC);
        let log = self.error_logged.is_none_or(|at| at.elapsed() > WRITE_ERROR_LOG_EVERY);
        if log {
            self.error_logged = Some(Instant::now());
            tracing::warn!("Error writing to the AOF file: {}", errors::strerror(e));
        }
        if let Err(e) = self.file.set_len(self.offset) {
            if log {
                tracing::warn!("Could not remove short write from the append-only file.  Redis may refuse to load the AOF the next time it starts.  ftruncate: {}", errors::strerror(&e));
            }
        }
        let _ = self.file.seek(std::io::SeekFrom::Start(self.offset));
        if self.durability.policy() == Fsync::Always {
            self.durability.die(errors::AOF_WRITE_FATAL);
            return;
        }
        self.durability.write_errno.store(errno, Ordering::Relaxed);
    }

    /// Writes what is buffered and fsyncs the file.
    fn sync(&mut self) {
        self.flush();
        if self.offset == self.synced {
            return;
        }
        let (generation, offset) = (self.generation, self.offset);
        let synced = fsync(&self.file, &self.durability);
        self.synced_to(synced, generation, offset);
    }

    /// What an fsync off the lock needs: a handle of the file, which file
    /// it is and the offset the fsync will cover; `None` when all is synced.
    fn pending_sync(&self) -> Option<(File, u64, u64)> {
        if self.offset == self.synced {
            return None;
        }
        match self.file.try_clone() {
            Ok(file) => Some((file, self.generation, self.offset)),
            Err(e) => {
                tracing::warn!("Fail to fsync the AOF file: {e}");
                None
            }
        }
    }

    /// An fsync of file `generation` that began at `offset` ended. A
    /// failure refuses writes until an fsync succeeds (Redis's
    /// `aof_bio_fsync_status`; it is tried again within a second, what it
    /// covers being still unsynced); under `always` it is fatal.
    fn synced_to(&mut self, synced: std::io::Result<()>, generation: u64, offset: u64) {
        if let Err(e) = synced {
            if self.durability.policy() == Fsync::Always {
                self.durability.die(&errors::aof_fsync_fatal(&e));
            } else {
                let errno = e.raw_os_error().unwrap_or(libc::EIO);
                if self.durability.fsync_errno.swap(errno, Ordering::Relaxed) == 0 {
                    tracing::warn!("Fail to fsync the AOF file: {}", errors::strerror(&e));
                }
            }
            return;
        }
        self.durability.fsync_errno.store(0, Ordering::Relaxed);
        // A crash cut the file back meanwhile: what is left was synced.
        if generation != self.generation || offset < self.synced {
            return;
        }
        self.synced = offset.min(self.offset);
    }

    /// Cuts the file back as a power loss at `now_ms` would (see [`Msg::Crash`]).
    fn crash(&mut self, policy: Fsync, lose_ms: Option<u64>, now_ms: u64) -> std::io::Result<u64> {
        let keep = match lose_ms {
            None => self.synced,
            Some(ms) => {
                let before = now_ms.saturating_sub(ms);
                let kept = self
                    .history
                    .iter()
                    .rev()
                    .find(|(at, _)| *at <= before)
                    .map_or(self.history_base, |&(_, offset)| offset);
                // Under `always` what was fsynced was acknowledged: it stays.
                if policy == Fsync::Always {
                    kept.max(self.synced)
                } else {
                    kept
                }
            }
        };
        // A killed process loses what it had not written yet.
        self.empty_buf();
        self.marks.clear();
        self.postponed_since = None;
        self.file.set_len(keep)?;
        // The next write goes at the cut, not past a hole (were the file
        // not opened to append).
        self.file.seek(std::io::SeekFrom::Start(keep))?;
        self.file.sync_all()?;
        self.generation += 1;
        self.offset = keep;
        self.synced = keep;
        self.history.retain(|&(_, offset)| offset <= keep);
        self.history_base = self.history_base.min(keep);
        self.selected = None;
        self.durability.incr_size.store(keep, Ordering::Relaxed);
        Ok(keep)
    }
}
