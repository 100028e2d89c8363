//! Forkless point-in-time snapshots and BGSAVE.
//!
//! coordis cannot fork, so a background save takes its image from the data
//! structures ([`crate::store::db::DbSnap`]): under the engine lock the
//! start is marked on every database (no work per key: the walk goes in
//! the table's slot order), the reply goes out,
//! and the keyspace is walked in slices of `bgsave-slice-keys` keys
//! ([`SLICE_KEYS`] by default), one hold of the engine lock each, by a task
//! on the server's runtime among the connections' tasks (yielding, or
//! sleeping `bgsave-slice-pause-us` and the slice's `rdb-key-save-delay`,
//! between slices); a thread of the save's own writes the slices' bytes to
//! the file. A write to a key the
//! walk has not reached copies the old value first (copy-before-write in
//! `Db::before_write`), so the file is the dataset at the moment BGSAVE was
//! accepted, as Redis's forked child sees it: keys created after the start
//! are not in it, deleted or changed ones are, with their old value.
//!
//! [`start_background_save`] is the one entry point of a save (BGSAVE, the
//! save points); a full sync's image ([`start_replication_snapshot`]) and an
//! append-only file rewrite's new base ([`start_aof_rewrite`]) are the same
//! walk with another destination. One walk runs at a time, as Redis runs
//! one child.

use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Instant;

use bytes::Bytes;
use parking_lot::Mutex;

use crate::config::Config;
use crate::engine::Engine;
use crate::persist::rdb::disk::{self, Purpose};
use crate::persist::rdb::SaveError;
use crate::state::ServerState;
use crate::store::Db;

/// Keys serialized per hold of the engine lock by default
/// (`bgsave-slice-keys`): bounds what a save adds to any command's latency.
/// The walk runs on the thread that serves the connections and takes a
/// slice each time they have had their turn, so under a load that keeps
/// that thread busy the slice is the save's share of it: with 64 small
/// keys (tens of microseconds) a loaded server's p99 stayed near idle's,
/// 256 doubled its median (README, Persistence).
pub(crate) const SLICE_KEYS: usize = 64;

/// BGSAVE's state and statistics (INFO persistence).
#[derive(Debug)]
pub(crate) struct BgSave {
    /// A save's walk is running (an RDB file or a full sync's image:
    /// Redis's `CHILD_TYPE_RDB`).
    pub(crate) in_progress: bool,
    /// A rewrite's walk is running (Redis's `CHILD_TYPE_AOF`); its own
    /// state is [`crate::persist::aof::Aof`]'s.
    pub(crate) rewriting: bool,
    /// When it started (INFO `rdb_current_bgsave_time_sec`).
    started: Option<Instant>,
    /// BGSAVE SCHEDULE arrived during a save: another starts when it ends.
    pub(crate) scheduled: bool,
    /// Seconds the last save took; -1 before any.
    pub(crate) last_secs: i64,
    /// Keys at the start of the running save, and those written so far.
    pub(crate) keys_total: u64,
    pub(crate) keys_processed: Arc<AtomicU64>,
    /// Set when the save is killed ([`kill`]: FLUSHALL, shutdown, a
    /// staged crash): the walk stops, its temp file is removed and it
    /// reports nothing. One flag per save, read and set under the engine
    /// lock, so a killed walk never renames its file over a newer one.
    cancel: Arc<AtomicBool>,
    /// Saves started so far: names each save's temp file, so a killed
    /// save's thread never removes the file of the save started after it.
    serial: u64,
}

impl Default for BgSave {
    fn default() -> Self {
        BgSave {
            in_progress: false,
            rewriting: false,
            started: None,
            scheduled: false,
            last_secs: -1,
            keys_total: 0,
            keys_processed: Arc::default(),
            cancel: Arc::default(),
            serial: 0,
        }
    }
}

impl BgSave {
    /// A walk of either kind runs: no other can start (the databases hold
    /// one snapshot at a time).
    pub(crate) fn walking(&self) -> bool {
        self.in_progress || self.rewriting
    }

    /// INFO `rdb_current_bgsave_time_sec` (-1 when none runs).
    pub(crate) fn current_secs(&self) -> i64 {
        if !self.in_progress {
            return -1;
        }
        self.started.map_or(-1, |s| s.elapsed().as_secs() as i64)
    }
}

/// The signal Redis's `killRDBChild` sends its saving child (SIGUSR1 on
/// Linux): the log line of a killed save names it, and as in Redis a save
/// killed so is not a failure.
const KILL_SIGNAL: i32 = 10;

/// Why a background save did not start.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum NotStarted {
    /// A walk is running already (a save's or a rewrite's).
    InProgress,
    /// The server is not running (an engine without its lock).
    NoServer,
}

/// What the walking thread needs, fixed at the start.
struct Job {
    engine: Weak<Mutex<Engine>>,
    /// The runtime the save was started on (a command's, the server
    /// cron's), which takes the walk's slices; none for a server driven
    /// by hand.
    runtime: Option<tokio::runtime::Handle>,
    /// Whether a script runs: the walking task waits for the engine as the
    /// connections do ([`crate::net::lock_engine`]).
    script: Arc<crate::lua::ScriptState>,
    config: Config,
    libraries: Vec<Bytes>,
    start_ms: u64,
    databases: usize,
    /// `dirty` at the start: what the file holds (Redis's `dirty_before_bgsave`).
    dirty: u64,
    processed: Arc<AtomicU64>,
    cancel: Arc<AtomicBool>,
    /// The save's number (its temp file's name).
    serial: u64,
    /// Where the image goes.
    target: Target,
    /// Batch buffers the writing thread has emptied, for the walk to fill
    /// again: the walk allocates nothing per batch (each batch grew by
    /// doubling on the serving thread and was freed on the writing one).
    spares: Mutex<Vec<Vec<u8>>>,
}

impl Job {
    /// Keys per slice: `bgsave-slice-keys`, or one at a time under a
    /// positive `rdb-key-save-delay`, so the walk's progress (INFO
    /// `current_save_keys_processed`) and a kill are seen key by key, as
    /// in Redis's sleeping child.
    fn slice_keys(&self) -> usize {
        if self.config.rdb_key_save_delay > 0 {
            1
        } else {
            self.config.bgsave_slice_keys
        }
    }

    /// What the walk sleeps after a slice that began with `before` keys
    /// processed: `bgsave-slice-pause-us` and the slice's keys'
    /// `rdb-key-save-delay`, outside the engine lock.
    fn pause_after(&self, before: u64) -> std::time::Duration {
        let now = self.processed.load(Ordering::Relaxed);
        std::time::Duration::from_micros(self.config.bgsave_slice_pause_us)
            + disk::key_delay(self.config.rdb_key_save_delay, before, now)
    }

    /// An empty batch buffer: one the writing thread gave back, or a new one.
    fn spare(&self) -> Vec<u8> {
        self.spares
            .lock()
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(BATCH_CAPACITY))
    }

    /// A batch written out, given back emptied for [`Job::spare`] (one the
    /// size of a large value's slice is freed instead).
    fn recycle(&self, mut buf: Vec<u8>) {
        let mut spares = self.spares.lock();
        if buf.capacity() <= BATCH_CAPACITY && spares.len() < SLICES_IN_FLIGHT + 2 {
            buf.clear();
            spares.push(buf);
        }
    }
}

/// Where a snapshot's image goes.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Target {
    /// `dir/dbfilename` (BGSAVE, save points).
    File,
    /// The replicas of a full sync, in memory; `eof`: they get the
    /// diskless framing ([`crate::repl::snapshot_done`]); `stream_db`: a
    /// replica's snapshot names the database its primary's stream has
    /// selected (aux `repl-stream-db`), as the stream it passes on after
    /// the image selects none until the primary changes database.
    Replicas { eof: bool, stream_db: Option<usize> },
    /// An append-only file rewrite's new base, written to the temporary
    /// file `temp` (an RDB file with `aof-base 1`, or commands: `rdb`) and
    /// handed to [`crate::persist::aof::rewrite_done`].
    AofBase { temp: PathBuf, rdb: bool },
}

/// Starts a background save of the dataset to `dir/dbfilename` (Redis's
/// `rdbSaveBackground`): marks the snapshot's start on every database and
/// starts the walking thread. Returns at once; the file is the dataset as
/// it is now.
pub(crate) fn start_background_save(
    dbs: &mut [Db],
    state: &mut ServerState,
    libraries: Vec<Bytes>,
) -> Result<(), NotStarted> {
    start(dbs, state, libraries, Target::File)
}

/// Starts the snapshot of a full sync (Redis's `startBgsaveForReplication`):
/// the image is the dataset as it is now, under the same lock hold that
/// took the replication offset, and goes to [`crate::repl::snapshot_done`]
/// when written. Counted as a save in progress (INFO, BGSAVE refuses), not
/// in the save statistics.
pub(crate) fn start_replication_snapshot(
    dbs: &mut [Db],
    state: &mut ServerState,
    libraries: Vec<Bytes>,
    eof: bool,
) -> Result<(), NotStarted> {
    let stream_db = state.replica.is_replica().then_some(state.replica.stream_db);
    start(dbs, state, libraries, Target::Replicas { eof, stream_db })
}

/// Starts the walk of an append-only file rewrite (Redis's
/// `rewriteAppendOnlyFileBackground` forking its child): the new base is
/// the dataset as it is now, written to `temp`; the caller switched the
/// incremental file under the same lock hold. Not a save: only
/// `current_save_keys_*` show it.
pub(crate) fn start_aof_rewrite(
    dbs: &mut [Db],
    state: &mut ServerState,
    libraries: Vec<Bytes>,
    temp: PathBuf,
) -> Result<(), NotStarted> {
    let rdb = state.config.aof.use_rdb_preamble;
    start(dbs, state, libraries, Target::AofBase { temp, rdb })
}

fn start(dbs: &mut [Db], state: &mut ServerState, libraries: Vec<Bytes>, target: Target) -> Result<(), NotStarted> {
    if state.bgsave.walking() {
        return Err(NotStarted::InProgress);
    }
    let Some(engine) = state.shared.engine.get().cloned() else {
        return Err(NotStarted::NoServer);
    };
    let now = state.clock.now_ms();
    let mut total = 0;
    for (i, db) in dbs.iter_mut().enumerate() {
        db.begin_snapshot(i, now);
        total += db.len() as u64;
    }
    let rewrite = matches!(target, Target::AofBase { .. });
    let b = &mut state.bgsave;
    b.in_progress = !rewrite;
    b.rewriting = rewrite;
    b.started = Some(Instant::now());
    b.keys_total = total;
    b.keys_processed = Arc::default();
    b.cancel = Arc::default();
    if !rewrite {
        b.scheduled = false;
    }
    b.serial += 1;
    walk_changed(state);
    let b = &mut state.bgsave;
    let fallback = target.clone();
    let job = Arc::new(Job {
        engine,
        runtime: tokio::runtime::Handle::try_current().ok(),
        script: state.shared.script.clone(),
        config: state.config.clone(),
        libraries,
        start_ms: now,
        databases: dbs.len(),
        dirty: state.dirty,
        processed: b.keys_processed.clone(),
        cancel: b.cancel.clone(),
        serial: b.serial,
        target,
        spares: Mutex::default(),
    });
    if rewrite {
        tracing::info!(
            "Background append only file rewriting started by pid {}",
            std::process::id()
        );
    } else {
        tracing::info!("Background saving started by pid {}", std::process::id());
    }
    let spawned = std::thread::Builder::new()
        .name("coordis-bgsave".into())
        .spawn(move || run(job));
    if spawned.is_err() {
        tracing::warn!("Can't save in background: the thread could not start");
        match fallback {
            Target::File => finished(dbs, state, false, 0),
            Target::Replicas { .. } => replication_finished(dbs, state, None, false),
            Target::AofBase { .. } => {
                release(dbs, state);
                return Err(NotStarted::NoServer);
            }
        }
    }
    Ok(())
}

/// The walking thread: the file through a temp file (written and fsynced
/// outside the lock), then, under the lock, the rename and the outcome
/// handed back, unless the save was killed meanwhile (then its temp file
/// is only removed: the kill did the bookkeeping).
fn run(job: Arc<Job>) {
    // The save's end may start the next one (a scheduled BGSAVE): it
    // finds the runtime to walk on as a command would.
    let _runtime = job.runtime.as_ref().map(tokio::runtime::Handle::enter);
    if let Target::AofBase { temp, .. } = &job.target {
        let written = write_file(&job, temp);
        if let Err(e) = &written {
            tracing::warn!("Error writing the AOF base in background: {e}");
        } else {
            tracing::info!("Successfully created the temporary AOF base file {}", file_name(temp));
        }
        let Some(engine) = job.engine.upgrade() else {
            let _ = std::fs::remove_file(temp);
            return;
        };
        let mut engine = engine.lock();
        if job.cancel.load(Ordering::Relaxed) {
            let _ = std::fs::remove_file(temp);
            return;
        }
        engine.aof_rewrite_done(written.is_ok());
        return;
    }
    if let Target::Replicas { eof, .. } = job.target {
        let mut image = Vec::new();
        let written = write(&job, &mut image);
        let Some(engine) = job.engine.upgrade() else {
            return;
        };
        let mut engine = engine.lock();
        if job.cancel.load(Ordering::Relaxed) {
            return;
        }
        if let Err(e) = &written {
            tracing::warn!("Background transfer error: {e}");
        }
        engine.replication_snapshot_done(written.ok().map(|()| image), eof);
        return;
    }
    let target = disk::path(&job.config);
    let dir = target.parent().map(PathBuf::from).unwrap_or_else(|| PathBuf::from("."));
    let temp = dir.join(format!("temp-bg-{}-{}.rdb", std::process::id(), job.serial));
    let written = write_file(&job, &temp);
    let Some(engine) = job.engine.upgrade() else {
        let _ = std::fs::remove_file(&temp);
        return;
    };
    let mut engine = engine.lock();
    if job.cancel.load(Ordering::Relaxed) {
        let _ = std::fs::remove_file(&temp);
        return;
    }
    let result = written.and_then(|()| std::fs::rename(&temp, &target).map_err(SaveError::Io));
    if let Err(e) = &result {
        let _ = std::fs::remove_file(&temp);
        tracing::warn!("Background saving error: {e}");
    } else {
        tracing::info!("DB saved on disk");
    }
    engine.background_save_done(result.is_ok(), job.dirty);
}

fn file_name(path: &std::path::Path) -> String {
    path.file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
}

/// The walk into the file `temp`, synced as it grows as the directive of
/// its kind says (`aof-rewrite-incremental-fsync` for a rewrite's base,
/// `rdb-save-incremental-fsync` for an RDB file), then whole at its end.
fn write_file(job: &Arc<Job>, temp: &std::path::Path) -> Result<(), SaveError> {
    let incremental = match job.target {
        Target::AofBase { .. } => job.config.aof.rewrite_incremental_fsync,
        _ => job.config.rdb_save_incremental_fsync,
    };
    let mut file = BufWriter::new(disk::AutoSync::new(std::fs::File::create(temp)?, incremental));
    write(job, &mut file)?;
    let file = file.into_inner().map_err(|e| SaveError::Io(e.into_error()))?;
    file.into_inner().sync_all()?;
    Ok(())
}

/// What the walk writes: an RDB file, or a base file in commands.
enum Image {
    Rdb(crate::persist::rdb::file::Writer<Vec<u8>>),
    Commands(crate::persist::aof::rewrite::Commands),
}

impl Image {
    fn start(job: &Job) -> Result<Image, SaveError> {
        let used = crate::process::allocator().allocated;
        let purpose = match job.target {
            Target::AofBase { rdb: false, .. } => {
                let c = crate::persist::aof::rewrite::Commands::start(
                    job.start_ms,
                    job.config.aof.timestamps,
                    job.libraries.iter().map(|l| &l[..]),
                );
                return Ok(Image::Commands(c));
            }
            Target::AofBase { rdb: true, .. } => Purpose::AofBase,
            Target::File | Target::Replicas { .. } => Purpose::Save,
        };
        let stream_db = match job.target {
            Target::Replicas { stream_db, .. } => stream_db,
            _ => None,
        };
        let mut w = disk::start_file(Vec::new(), &job.config, job.start_ms, used, purpose, stream_db)?;
        for code in &job.libraries {
            w.function(code)?;
        }
        Ok(Image::Rdb(w))
    }

    fn begin_db(&mut self, db: usize, len: u64, expires: u64) -> Result<(), SaveError> {
        match self {
            Image::Rdb(w) => w.begin_db(db, len, expires),
            Image::Commands(_) => Ok(()),
        }
    }

    fn key(&mut self, db: usize, key: &[u8], entry: crate::store::EntryRef<'_>, access: u32) -> Result<(), SaveError> {
        match self {
            Image::Rdb(w) => w.key(db, key, entry.value, entry.expire_at, access),
            Image::Commands(c) => {
                c.key(db, key, entry.value, entry.expire_at);
                Ok(())
            }
        }
    }

    /// The server clock the next keys' LRU/LFU hints are measured at (an
    /// AOF base in commands carries none).
    fn set_hint_clock(&mut self, now_ms: u64) {
        if let Image::Rdb(w) = self {
            w.set_hint_clock(now_ms);
        }
    }

    /// Moves the bytes written since the last drain to the end of `out`,
    /// keeping the image's own buffer for the next slice.
    fn drain_into(&mut self, out: &mut Vec<u8>) {
        match self {
            Image::Rdb(w) => {
                out.extend_from_slice(w.sink_mut());
                w.sink_mut().clear();
            }
            Image::Commands(c) => c.drain_into(out),
        }
    }

    fn finish(self) -> Result<Vec<u8>, SaveError> {
        match self {
            Image::Rdb(w) => w.finish(),
            Image::Commands(mut c) => Ok(c.take().to_vec()),
        }
    }
}

/// The walk's position: the image being written and the database it is in.
struct Walk {
    /// `None` once the trailer is written.
    image: Option<Image>,
    origin: usize,
    /// The current database's header is written (it is written with its
    /// first key: an empty database has none).
    began: bool,
}

/// Bytes of the image for the writing thread.
enum Slice {
    /// Bytes to write; more follow.
    More(Vec<u8>),
    /// The image's last bytes.
    Last(Vec<u8>),
}

/// Whether a step of the walk wrote the image's end.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Step {
    More,
    Last,
}

/// A save's end as the walk sees it: the server stopped, or the save was
/// killed (its holds are gone, so the walk would read the live tables).
fn stopped(what: &str) -> SaveError {
    SaveError::Io(std::io::Error::other(what.to_string()))
}

impl Walk {
    fn start(job: &Job) -> Result<Walk, SaveError> {
        Ok(Walk {
            image: Some(Image::start(job)?),
            origin: 0,
            began: false,
        })
    }

    /// One slice of `bgsave-slice-keys` keys, under the engine lock; its
    /// bytes are appended to `out`.
    fn step(&mut self, job: &Job, engine: &mut Engine, out: &mut Vec<u8>) -> Result<Step, SaveError> {
        // Checked under the lock: a killed save's holds are gone.
        if job.cancel.load(Ordering::Relaxed) {
            return Err(stopped("the save was killed"));
        }
        let w = self.image.as_mut().expect("a walk is stepped until its last slice");
        if self.origin < job.databases {
            let mut failed = None;
            w.set_hint_clock(engine.clock_ms());
            let (origin, began) = (self.origin, &mut self.began);
            let finished = engine.snapshot_slice(
                origin,
                job.slice_keys(),
                |start_len, start_expires, key, entry, access| {
                    if failed.is_some() {
                        return;
                    }
                    if !*began {
                        *began = true;
                        if let Err(e) = w.begin_db(origin, start_len as u64, start_expires as u64) {
                            failed = Some(e);
                            return;
                        }
                    }
                    if let Err(e) = w.key(origin, key, entry, access) {
                        failed = Some(e);
                    }
                    job.processed.fetch_add(1, Ordering::Relaxed);
                },
            );
            if let Some(e) = failed {
                return Err(e);
            }
            if finished {
                self.origin += 1;
                self.began = false;
            }
            if self.origin < job.databases {
                w.drain_into(out);
                return Ok(Step::More);
            }
        }
        w.drain_into(out);
        out.extend(self.image.take().expect("the image").finish()?);
        Ok(Step::Last)
    }
}

/// Slices of a walk handed from the walking task to the writing thread:
/// a few in flight keep both busy without holding the image in memory.
const SLICES_IN_FLIGHT: usize = 16;

/// Where a walk's slices come from.
enum Slices {
    /// A task on the server's runtime takes them ([`walk_task`]), so the
    /// engine lock passes between tasks on the connections' own threads: a
    /// command never waits for the writing thread to be scheduled, which on
    /// a loaded machine cost commands hundreds of milliseconds during a
    /// save. The writing thread only writes.
    Task(tokio::sync::mpsc::Receiver<Result<Slice, SaveError>>),
    /// Without a runtime (a server driven by hand), the writing thread
    /// takes them itself, one lock hold at a time.
    Inline(Walk),
}

/// Starts taking the walk's slices: on the runtime the save was started
/// on, if any.
fn slices(job: &Arc<Job>) -> Result<Slices, SaveError> {
    let walk = Walk::start(job)?;
    let Some(runtime) = &job.runtime else {
        return Ok(Slices::Inline(walk));
    };
    let (tx, rx) = tokio::sync::mpsc::channel(SLICES_IN_FLIGHT);
    runtime.spawn(walk_task(job.clone(), walk, tx));
    Ok(Slices::Task(rx))
}

/// Bytes the walking task gathers from its slices before it hands them to
/// the writing thread: one wake-up and one write per batch, not per slice.
const BATCH_BYTES: usize = 64 * 1024;

/// A batch buffer's capacity: a full batch plus a slice of small keys, so
/// the usual batch never reallocates.
const BATCH_CAPACITY: usize = 2 * BATCH_BYTES;

/// The walking task: a slice per hold of the engine lock, then a yield, so
/// the connections' requests and the I/O poll come between slices.
async fn walk_task(job: Arc<Job>, mut walk: Walk, tx: tokio::sync::mpsc::Sender<Result<Slice, SaveError>>) {
    let mut batch = job.spare();
    loop {
        let Some(engine) = job.engine.upgrade() else {
            return;
        };
        let before = job.processed.load(Ordering::Relaxed);
        let step = {
            let mut engine = crate::net::lock_engine(&engine, &job.script).await;
            walk.step(&job, &mut engine, &mut batch)
        };
        drop(engine);
        let send = match step {
            Ok(Step::More) => {
                (batch.len() >= BATCH_BYTES).then(|| Ok(Slice::More(std::mem::replace(&mut batch, job.spare()))))
            }
            Ok(Step::Last) => Some(Ok(Slice::Last(std::mem::take(&mut batch)))),
            Err(e) => Some(Err(e)),
        };
        if let Some(slice) = send {
            let last = !matches!(slice, Ok(Slice::More(_)));
            if tx.send(slice).await.is_err() || last {
                return;
            }
        }
        let pause = job.pause_after(before);
        if pause.is_zero() {
            tokio::task::yield_now().await;
        } else {
            tokio::time::sleep(pause).await;
        }
    }
}

impl Slices {
    /// The next slice; `None` after the last.
    fn next(&mut self, job: &Job) -> Result<Option<Slice>, SaveError> {
        match self {
            Slices::Task(rx) => match rx.blocking_recv() {
                Some(slice) => slice.map(Some),
                // The runtime dropped the task: the server stopped.
                None => Err(stopped("the server stopped")),
            },
            Slices::Inline(walk) => {
                if walk.image.is_none() {
                    return Ok(None);
                }
                let engine = job.engine.upgrade().ok_or_else(|| stopped("the server stopped"))?;
                let before = job.processed.load(Ordering::Relaxed);
                let mut bytes = job.spare();
                let mut engine = engine.lock();
                let slice = walk.step(job, &mut engine, &mut bytes).map(|step| match step {
                    Step::More => Slice::More(bytes),
                    Step::Last => Slice::Last(bytes),
                });
                // Handed to a waiting connection, if any: taken back at once
                // (the lock is not fair), the walk would keep the commands
                // waiting slice after slice.
                parking_lot::MutexGuard::unlock_fair(engine);
                let pause = job.pause_after(before);
                if !pause.is_zero() {
                    std::thread::sleep(pause);
                }
                slice.map(Some)
            }
        }
    }
}

/// The walk: the image, a slice at a time, into `file`.
fn write(job: &Arc<Job>, file: &mut impl Write) -> Result<(), SaveError> {
    let mut slices = slices(job)?;
    while let Some(slice) = slices.next(job)? {
        match slice {
            Slice::More(bytes) => {
                file.write_all(&bytes)?;
                job.recycle(bytes);
            }
            Slice::Last(bytes) => {
                file.write_all(&bytes)?;
                break;
            }
        }
    }
    Ok(())
}

/// Kills a running background save (Redis's `killRDBChild` and the end of
/// a child killed by [`KILL_SIGNAL`]): every hold is released at once, the
/// walk stops at its next slice and its temp file is removed; the last
/// save's status is unchanged, a scheduled save stays scheduled. FLUSHALL,
/// shutdown and a staged crash call it before anything else.
pub(crate) fn kill(dbs: &mut [Db], state: &mut ServerState) {
    kill_rewrite(dbs, state);
    kill_save(dbs, state);
}

/// Kills a running save's walk, not a rewrite's (FLUSHALL: Redis's
/// `killRDBChild` alone; a rewrite's base is the dataset at its start and
/// the flush is in the new incremental file).
pub(crate) fn kill_save(dbs: &mut [Db], state: &mut ServerState) {
    if !state.bgsave.in_progress {
        return;
    }
    for db in dbs.iter_mut() {
        db.snap = None;
    }
    let b = &mut state.bgsave;
    b.cancel.store(true, Ordering::Relaxed);
    b.in_progress = false;
    b.last_secs = b.started.take().map_or(-1, |s| s.elapsed().as_secs() as i64);
    b.keys_total = 0;
    walk_changed(state);
    tracing::warn!("Background saving terminated by signal {KILL_SIGNAL}");
    // A full sync's replicas lose their snapshot: they are dropped.
    crate::repl::snapshot_done(state, None, false);
}

/// Kills a running rewrite's walk (Redis's `killAppendOnlyChild`): the
/// holds released, the walk stops at its next slice and removes its temp
/// file; [`crate::persist::aof::rewrite_killed`] does the file's bookkeeping.
pub(crate) fn kill_rewrite(dbs: &mut [Db], state: &mut ServerState) {
    if !state.bgsave.rewriting {
        return;
    }
    tracing::info!("Killing running AOF rewrite child: {}", std::process::id());
    release(dbs, state);
    state.bgsave.cancel.store(true, Ordering::Relaxed);
    crate::persist::aof::rewrite_killed(state);
}

/// A rewrite's walk is over (done, failed or killed): every hold released.
pub(crate) fn release(dbs: &mut [Db], state: &mut ServerState) {
    for db in dbs.iter_mut() {
        db.snap = None;
    }
    let b = &mut state.bgsave;
    b.rewriting = false;
    b.started = None;
    b.keys_total = 0;
    walk_changed(state);
}

/// A walk started or ended: the AOF writer's `no-appendfsync-on-rewrite`
/// depends on it.
fn walk_changed(state: &ServerState) {
    crate::persist::aof::configure(state);
}

/// A replication snapshot's end under the engine lock: the holds released
/// (no save statistics move), the image handed to its replicas.
pub(crate) fn replication_finished(dbs: &mut [Db], state: &mut ServerState, image: Option<Vec<u8>>, eof: bool) {
    for db in dbs.iter_mut() {
        db.snap = None;
    }
    let b = &mut state.bgsave;
    b.in_progress = false;
    b.started = None;
    b.keys_total = 0;
    walk_changed(state);
    crate::repl::snapshot_done(state, image, eof);
}

/// A save's end under the engine lock: every database's hold released,
/// the statistics, LASTSAVE and the changes counter when it succeeded
/// (Redis's `backgroundSaveDoneHandler`); a scheduled save starts.
pub(crate) fn finished(dbs: &mut [Db], state: &mut ServerState, ok: bool, dirty: u64) {
    for db in dbs.iter_mut() {
        db.snap = None;
    }
    let b = &mut state.bgsave;
    b.in_progress = false;
    b.last_secs = b.started.take().map_or(-1, |s| s.elapsed().as_secs() as i64);
    b.keys_total = 0;
    walk_changed(state);
    state.saves.last_bgsave_ok = ok;
    if ok {
        tracing::info!("Background saving terminated with success");
        state.dirty_at_save = dirty;
        state.last_save_secs = state.clock.now_ms() / 1000;
    } else {
        tracing::warn!("Background saving error");
    }
}
