//! The multi-part append-only file of Redis 7.0.15: under `dir`, the
//! directory `appenddirname` with the manifest (`<appendfilename>.manifest`),
//! one base file (the dataset at the last rewrite) and the incremental
//! files (every effect since), named and written as Redis names and writes
//! them, so either server loads the other's.
//!
//! The incremental file is the effects feed written down
//! ([`crate::exec::feed`]): what a replica receives, in the same order
//! (SELECT, MULTI/EXEC around a unit's several effects), without what is
//! for replicas only, with `#TS:` annotations under `aof-timestamp-enabled`.
//! [`writer`] writes and fsyncs it on a thread of its own; a reply leaves
//! only once its batch is written, and under `appendfsync always` fsynced
//! ([`Durability`], waited on by the connections).
//!
//! This module owns the files' life: loading them at start (the manifest,
//! the base, the incremental files replayed through the execution core as
//! [`crate::exec::Caller::Control`], `aof-load-truncated`), the rewrite
//! (BGREWRITEAOF, the automatic one, turning the file on with CONFIG SET),
//! INFO's `aof_*` fields and the staged power loss of the test-control
//! plane ([`crash`]).
//!
//! The base is an RDB file (`<prefix>.<seq>.base.rdb`, aux `aof-base 1`)
//! under `aof-use-rdb-preamble yes`, the default, else commands
//! (`.base.aof`, [`rewrite`]); either loads, whatever the directive says.
//!
//! A rewrite runs in the background as Redis's forked child does, from the
//! forkless snapshot ([`crate::persist::snapshot::start_aof_rewrite`]):
//! under one lock hold the feed switches to a new incremental file (named
//! in the manifest at once) and the snapshot's start is marked; the walk
//! writes the new base to a temporary file while commands keep running;
//! at its end, under the lock, the base is renamed into place, the
//! manifest names it and makes the older files history, and they are
//! removed ([`rewrite_done`], Redis's `backgroundRewriteDoneHandler`).
//! Turning the file on with CONFIG SET writes to a temporary incremental
//! file until its first rewrite is done (Redis's `AOF_WAIT_REWRITE`).
//!
//! Differences from Redis: the rewrite's temporary base is named after the
//! process and the rewrite's number (there is no child pid).
//!
//! What must never happen here: a loaded command recorded as an effect, or
//! the engine lock held while waiting for anything but the writer.

pub(crate) mod load;
pub(crate) mod manifest;
pub(crate) mod rewrite;
pub(crate) mod writer;

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::Instant;

use bytes::Bytes;

use crate::lua::Scripting;
use crate::state::ServerState;
use crate::store::db::Db;
use manifest::Manifest;
pub(crate) use writer::{Durability, Fsync, Sink, Wrote};

/// The append-only file's state in the engine.
#[derive(Debug)]
pub(crate) struct Aof {
    /// The files are written (Redis's `AOF_ON`).
    pub(crate) on: bool,
    /// The manifest as last persisted (read at start even with the file
    /// off, as Redis does, so turning it on continues its sequences).
    manifest: Manifest,
    /// The base file's size (INFO `aof_base_size`).
    base_size: u64,
    /// The files' size after the last rewrite: auto rewrite measures growth from it.
    rewrite_base_size: u64,
    rewrites: u64,
    /// Seconds the last rewrite took, -1 before the first.
    last_rewrite_secs: i64,
    last_rewrite_ok: bool,
    consecutive_failures: u64,
    /// The file was turned on and its first rewrite is not done yet
    /// (Redis's `AOF_WAIT_REWRITE`): the feed goes to the temporary
    /// incremental file, which the rewrite's end names in the manifest.
    pub(crate) waiting: bool,
    /// A rewrite is to start once no walk runs (INFO `aof_rewrite_scheduled`).
    pub(crate) scheduled: bool,
    /// The running rewrite: when it started, its temporary base and
    /// whether that is an RDB file (the directive may change meanwhile).
    running: Option<Running>,
    /// Rewrites started so far: names each one's temporary base, so a
    /// killed rewrite's walk never touches its successor's file.
    serial: u64,
    /// Redis's `aofRewriteLimited`: after repeated failures the automatic
    /// and scheduled rewrites wait this many minutes, doubling.
    limit_minutes: u64,
    /// When the limit ends (unix seconds; 0: not limited now).
    limit_until: u64,
    /// Commands of the files are being replayed: a DEBUG LOADAOF among
    /// them (a hand-made file's) is refused instead of loading the files
    /// again from inside their own load, without end.
    replaying: bool,
}

/// A rewrite in progress.
#[derive(Debug)]
struct Running {
    started: Instant,
    temp: PathBuf,
    rdb: bool,
}

/// Consecutive failures after which rewrites are limited (Redis's
/// `AOF_REWRITE_LIMITE_THRESHOLD`), and the longest wait then
/// (`AOF_REWRITE_LIMITE_MAX_MINUTES`).
const LIMIT_THRESHOLD: u64 = 3;
const LIMIT_MAX_MINUTES: u64 = 60;
const SECS_PER_MINUTE: u64 = 60;

impl Default for Aof {
    fn default() -> Aof {
        Aof {
            on: false,
            manifest: Manifest::default(),
            base_size: 0,
            rewrite_base_size: 0,
            rewrites: 0,
            last_rewrite_secs: -1,
            last_rewrite_ok: true,
            consecutive_failures: 0,
            waiting: false,
            scheduled: false,
            running: None,
            serial: 0,
            limit_minutes: 0,
            limit_until: 0,
            replaying: false,
        }
    }
}

impl Aof {
    /// Commands of the files are being replayed: a DEBUG LOADAOF among them
    /// is refused, and each is obeyed as written
    /// ([`crate::cmd::Ctx::must_obey`]).
    pub(crate) fn replaying(&self) -> bool {
        self.replaying
    }
}

/// The directory of the files: `dir/appenddirname`. (`dir` is still an
/// accepted-only directive; the RDB work makes it a field.)
pub(crate) fn directory(state: &ServerState) -> PathBuf {
    Path::new(&state.config.dir).join(&state.config.aof.dirname)
}

fn prefix(state: &ServerState) -> &str {
    &state.config.aof.filename
}

/// At start, before any client: reads the manifest and, with `appendonly
/// yes`, loads the files and opens the incremental one for writing (Redis's
/// `aofLoadManifestFromDisk`, `loadDataFromDisk` and
/// `aofOpenIfNeededOnServerStart`), all at once (a server with clients
/// loads through [`prepare_load`] and [`load_step`] instead). `Err`: the
/// server must not start (Redis exits with status 1; the reason is logged).
pub(crate) fn start(dbs: &mut [Db], state: &mut ServerState, scripting: &mut Scripting) -> Result<(), ()> {
    if let Some(mut load) = prepare_load(state)? {
        while !load_step(dbs, state, scripting, &mut load, usize::MAX)? {}
        loaded(state, &load);
    }
    open_at_start(dbs, state, scripting)
}

/// After the files loaded (or with none to load): the incremental file
/// opened for writing, or created with a base when there are no files.
pub(crate) fn open_at_start(dbs: &mut [Db], state: &mut ServerState, scripting: &mut Scripting) -> Result<(), ()> {
    if state.config.aof.enabled {
        open_on_start(dbs, state, scripting)?;
    }
    // History a manifest still lists goes, the file on or off (Redis's
    // start calls `aofDelHistoryFiles` after the load).
    delete_history(state);
    Ok(())
}

/// The history files go (Redis's `aofDelHistoryFiles`), unless
/// `aof-disable-auto-gc` keeps them: out of the manifest first, then off
/// the disk; a failure here harms nothing. After a rewrite, at start, and
/// when `aof-disable-auto-gc` is turned off.
pub(crate) fn delete_history(state: &mut ServerState) {
    if state.config.aof.disable_auto_gc || state.aof.manifest.history.is_empty() {
        return;
    }
    let dir = directory(state);
    let prefix = prefix(state).to_string();
    let m = &mut state.aof.manifest;
    let history = std::mem::take(&mut m.history);
    if let Err(e) = m.persist(&dir, &prefix) {
        tracing::warn!("Can't persist the AOF manifest file: {e}");
        m.history = history;
        return;
    }
    for f in history {
        tracing::info!("Removing the history file {} in the background", f.name);
        let _ = std::fs::remove_file(dir.join(&f.name));
    }
}

/// The first half of the start: the manifest read and, with `appendonly
/// yes` and files to load, the load to run ([`load_step`] until done,
/// then [`loaded`]). `None`: nothing to load.
pub(crate) fn prepare_load(state: &mut ServerState) -> Result<Option<AofLoad>, ()> {
    state.aof.manifest = read_manifest(state)?;
    if !state.config.aof.enabled {
        return Ok(None);
    }
    upgrade_old_file(state)?;
    new_load(state)
}

/// Commands replayed per hold of the engine lock while the files load at
/// start: between two, clients are answered `-LOADING`.
pub(crate) const LOAD_SLICE_COMMANDS: usize = 256;

/// An append-only file load in progress: the manifest's files, replayed a
/// slice of commands at a time so a server loading at start answers
/// `-LOADING` between slices (Redis processes events every
/// `loading-process-events-interval-bytes` while it loads).
pub(crate) struct AofLoad {
    dir: PathBuf,
    /// (name, is the base, size), base first.
    files: Vec<(String, bool, u64)>,
    /// The next file to open.
    next: usize,
    /// The file being loaded.
    current: Option<Current>,
    /// Bytes of the files done (INFO `loading_loaded_bytes`).
    done_bytes: u64,
    /// Every file's size (INFO `loading_total_bytes`).
    pub(crate) total_bytes: u64,
    started: Instant,
}

/// The file a load is in.
enum Current {
    /// An RDB base, parsed a slice of bytes at a time.
    Base(BaseLoad),
    /// A file of commands.
    Commands(Box<FileReplay>),
}

/// Bytes of an RDB base parsed per slice of a load at start at most
/// (about a millisecond's work; fewer under a smaller
/// `loading-process-events-interval-bytes`): the keys go to databases of
/// the load's own, installed when the file is complete, so clients see
/// none before.
const BASE_SLICE_BYTES: usize = 64 * 1024;

/// An RDB base file (`aof-use-rdb-preamble yes`) being parsed.
struct BaseLoad {
    name: String,
    is_base: bool,
    size: u64,
    data: Vec<u8>,
    /// Bytes of `data` handed to the parser so far.
    fed: usize,
    parser: Box<crate::persist::rdb::disk::SocketLoad>,
    started: Instant,
}

/// One incremental file's commands, replayed as one client of its own
/// (SELECT carries over between slices), as Redis's fake AOF client.
struct FileReplay {
    name: String,
    path: PathBuf,
    is_base: bool,
    last: bool,
    size: u64,
    commands: Vec<Vec<Bytes>>,
    at: usize,
    end: load::End,
    client: crate::net::clients::ClientState,
    started: Instant,
}

impl AofLoad {
    /// The bytes replayed so far (the current file's share by commands).
    pub(crate) fn loaded_bytes(&self) -> u64 {
        let current = match &self.current {
            None => 0,
            Some(Current::Base(b)) => b.fed as u64,
            Some(Current::Commands(f)) if f.commands.is_empty() => 0,
            Some(Current::Commands(f)) => f.size * f.at as u64 / f.commands.len() as u64,
        };
        self.done_bytes + current
    }
}

/// The manifest's files as a load; `None` without files or with empty ones.
fn new_load(state: &ServerState) -> Result<Option<AofLoad>, ()> {
    let dir = directory(state);
    let m = &state.aof.manifest;
    let mut files = Vec::new();
    for (name, is_base) in m
        .base
        .iter()
        .map(|f| (&f.name, true))
        .chain(m.incr.iter().map(|f| (&f.name, false)))
    {
        match std::fs::metadata(dir.join(name)) {
            Ok(meta) => files.push((name.clone(), is_base, meta.len())),
            Err(e) => {
                tracing::warn!("The append log file {name} doesn't exist: {e}");
                return Err(());
            }
        }
    }
    let total_bytes: u64 = files.iter().map(|f| f.2).sum();
    if total_bytes == 0 {
        return Ok(None);
    }
    Ok(Some(AofLoad {
        dir,
        files,
        next: 0,
        current: None,
        done_bytes: 0,
        total_bytes,
        started: Instant::now(),
    }))
}

/// Loads the base and incremental files of the manifest at once (Redis's
/// `loadAppendOnlyFiles`; a staged crash's restart).
fn load_files(dbs: &mut [Db], state: &mut ServerState, scripting: &mut Scripting) -> Result<(), ()> {
    if let Some(mut load) = new_load(state)? {
        while !load_step(dbs, state, scripting, &mut load, usize::MAX)? {}
    }
    Ok(())
}

/// One slice of a load: up to `budget` commands replayed, or
/// [`BASE_SLICE_BYTES`] of an RDB base parsed (all of it with an
/// unbounded `budget`), with the feed suspended. `Ok(true)`: every file is
/// loaded.
pub(crate) fn load_step(
    dbs: &mut [Db],
    state: &mut ServerState,
    scripting: &mut Scripting,
    load: &mut AofLoad,
    budget: usize,
) -> Result<bool, ()> {
    let suspended = state.effects.suspend();
    let replaying = std::mem::replace(&mut state.aof.replaying, true);
    let result = step(dbs, state, scripting, load, budget);
    state.aof.replaying = replaying;
    state.effects.resume(suspended);
    result
}

fn step(
    dbs: &mut [Db],
    state: &mut ServerState,
    scripting: &mut Scripting,
    load: &mut AofLoad,
    budget: usize,
) -> Result<bool, ()> {
    if load.current.is_none() {
        let Some((name, is_base, size)) = load.files.get(load.next).cloned() else {
            return Ok(true);
        };
        load.next += 1;
        let last = load.next == load.files.len();
        let path = load.dir.join(&name);
        let started = Instant::now();
        let data = std::fs::read(&path).map_err(|e| {
            tracing::warn!("Fatal error: can't open the append log file {name} for reading: {e}");
        })?;
        if data.starts_with(b"REDIS") {
            tracing::info!("Reading RDB base file on AOF loading...");
            load.current = Some(Current::Base(BaseLoad {
                name,
                is_base,
                size,
                data,
                fed: 0,
                parser: Box::new(crate::persist::rdb::disk::SocketLoad::new(
                    &state.config,
                    LOAD_EVERY_KEY,
                )),
                started,
            }));
            return base_step(dbs, state, scripting, load, budget);
        }
        let parsed = load::parse(&data);
        use std::net::{Ipv4Addr, SocketAddr};
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        let signal = std::sync::Arc::new(crate::net::clients::ConnSignal::default());
        let outbox = crate::net::clients::Outbox::new(signal.clone());
        let mut client = crate::net::clients::ClientState::new(0, addr, addr, state.clock.now_ms(), signal, outbox);
        client.authenticated = true;
        load.current = Some(Current::Commands(Box::new(FileReplay {
            name,
            path,
            is_base,
            last,
            size,
            commands: parsed.commands,
            at: 0,
            end: parsed.end,
            client,
            started,
        })));
    }
    let Some(Current::Commands(f)) = load.current.as_mut() else {
        return base_step(dbs, state, scripting, load, budget);
    };
    let until = f.at.saturating_add(budget).min(f.commands.len());
    replay(dbs, state, scripting, &mut f.client, &f.commands[f.at..until], &f.name)?;
    f.at = until;
    if f.at < f.commands.len() {
        return Ok(false);
    }
    let Some(Current::Commands(f)) = load.current.take() else {
        unreachable!("the file replayed above");
    };
    let truncated = file_end(state, &f.path, &f.name, f.end)?;
    if truncated && !f.last {
        tracing::warn!("Fatal error: the truncated file is not the last file");
        return Err(());
    }
    file_loaded(load, &f.name, f.is_base, f.size, f.started);
    Ok(load.next == load.files.len())
}

fn file_loaded(load: &mut AofLoad, name: &str, is_base: bool, size: u64, started: Instant) {
    load.done_bytes += size;
    tracing::info!(
        "DB loaded from {} file {name}: {:.3} seconds",
        if is_base { "base" } else { "incr" },
        started.elapsed().as_secs_f64()
    );
}

/// The load is done: the sizes INFO reports from (Redis's
/// `aof_current_size` and `aof_rewrite_base_size` after loading).
pub(crate) fn loaded(state: &mut ServerState, load: &AofLoad) {
    tracing::info!(
        "DB loaded from append only file: {:.3} seconds",
        load.started.elapsed().as_secs_f64()
    );
    let base = load.files.first().filter(|f| f.1).map_or(0, |f| f.2);
    state.aof.base_size = base;
    state.aof.rewrite_base_size = base;
}

/// A single-file append-only file of Redis before 7.0 (`dir/appendonly.aof`)
/// becomes the base of a new manifest and moves into the directory, as
/// Redis 7.0's `aofUpgradePrepare` does when the directory or its manifest
/// is missing, or the manifest names only that file as a base and it is
/// not in the directory yet (an upgrade cut short).
fn upgrade_old_file(state: &mut ServerState) -> Result<(), ()> {
    let name = prefix(state).to_string();
    let old = Path::new(&state.config.dir).join(&name);
    let dir = directory(state);
    let m = &state.aof.manifest;
    let interrupted = m.incr.is_empty() && m.base.as_ref().is_some_and(|b| b.name == name) && !dir.join(&name).exists();
    let none = m.base.is_none() && m.incr.is_empty();
    if !old.is_file() || !(none || interrupted) {
        return Ok(());
    }
    let dir_name = &state.config.aof.dirname;
    std::fs::create_dir_all(&dir)
        .map_err(|e| tracing::warn!("Can't open or create append-only dir {dir_name}: {e}"))?;
    let m = &mut state.aof.manifest;
    m.base = Some(manifest::FileInfo {
        name: name.clone(),
        seq: 1,
        kind: manifest::Kind::Base,
    });
    m.base_seq = 1;
    m.persist(&dir, &name)
        .map_err(|e| tracing::warn!("Can't persist the AOF manifest file: {e}"))?;
    std::fs::rename(&old, dir.join(&name)).map_err(|e| {
        tracing::warn!("Error trying to move the old AOF file {name} into dir {dir_name}: {e}");
    })?;
    tracing::info!("Successfully migrated an old-style AOF file ({name}) into the AOF directory ({dir_name}).");
    Ok(())
}

/// The manifest on disk, or an empty one when there is none.
fn read_manifest(state: &ServerState) -> Result<Manifest, ()> {
    let dir = directory(state);
    let path = dir.join(manifest::manifest_name(prefix(state)));
    if !dir.is_dir() || !path.exists() {
        return Ok(Manifest::default());
    }
    let text = std::fs::read(&path).map_err(|e| {
        tracing::warn!(
            "Fatal error: can't open the AOF manifest file {} for reading: {e}",
            path.display()
        );
    })?;
    Manifest::parse(&text).map_err(|(why, at)| {
        tracing::warn!("\n*** FATAL AOF MANIFEST FILE ERROR ***\n");
        if let Some((line, text)) = at {
            tracing::warn!("Reading the manifest file, at line {line}\n");
            tracing::warn!(">>> '{text}'\n");
        }
        tracing::warn!("{why}\n");
    })
}

/// How an incremental file ended; `Ok(true)`: it was cut short and
/// truncated to its last whole command (`aof-load-truncated`).
fn file_end(state: &ServerState, path: &Path, name: &str, end: load::End) -> Result<bool, ()> {
    match end {
        load::End::Clean => Ok(false),
        load::End::Format => {
            tracing::warn!(
                "Bad file format reading the append only file {name}: make a backup of your AOF file, then use ./redis-check-aof --fix <filename.manifest>"
            );
            Err(())
        }
        load::End::Truncated { valid_up_to, in_multi } => {
            if in_multi {
                tracing::warn!("Revert incomplete MULTI/EXEC transaction in AOF file {name}");
            }
            if state.config.aof.load_truncated {
                tracing::warn!("!!! Warning: short read while loading the AOF file {name}!!!");
                tracing::warn!("!!! Truncating the AOF {name} at offset {valid_up_to} !!!");
                let cut = OpenOptions::new()
                    .write(true)
                    .open(path)
                    .and_then(|f| f.set_len(valid_up_to));
                match cut {
                    Ok(()) => {
                        tracing::warn!("AOF {name} loaded anyway because aof-load-truncated is enabled");
                        return Ok(true);
                    }
                    Err(e) => tracing::warn!("Error truncating the AOF file {name}: {e}"),
                }
            }
            tracing::warn!(
                "Unexpected end of file reading the append only file {name}. You can: 1) Make a backup of your AOF file, then use ./redis-check-aof --fix <filename.manifest>. 2) Alternatively you can set the 'aof-load-truncated' configuration option to yes and restart the server."
            );
            Err(())
        }
    }
}

/// Nothing is past its deadline at time 0: an RDB base's keys past their
/// deadline are loaded too, as Redis loads a preamble (the incremental
/// files may still act on them; expiry then removes them).
const LOAD_EVERY_KEY: u64 = 0;

/// One slice of the RDB base being loaded ([`Current::Base`]); at its end
/// its keys and libraries are installed.
fn base_step(
    dbs: &mut [Db],
    state: &mut ServerState,
    scripting: &mut Scripting,
    load: &mut AofLoad,
    budget: usize,
) -> Result<bool, ()> {
    let Some(Current::Base(b)) = load.current.as_mut() else {
        unreachable!("called with a base being loaded");
    };
    let failed = |name: &str, why: &dyn std::fmt::Display| {
        tracing::warn!("Error reading the RDB base file {name}, AOF loading aborted: {why}");
    };
    let slice = if budget == usize::MAX {
        b.data.len()
    } else {
        BASE_SLICE_BYTES.min(state.config.loading_process_events_interval_bytes)
    };
    let to = b.fed.saturating_add(slice).min(b.data.len());
    let last = to == b.data.len();
    b.parser
        .feed(&b.data[b.fed..to], last, None)
        .map_err(|e| failed(&b.name, &e))?;
    b.fed = to;
    if !last {
        return Ok(false);
    }
    let Some(Current::Base(b)) = load.current.take() else {
        unreachable!("the base parsed above");
    };
    if !b.parser.done() {
        failed(&b.name, &crate::persist::rdb::Corrupt::ShortRead);
        return Err(());
    }
    let loaded = b.parser.finish();
    if !loaded.functions.is_empty() {
        scripting
            .restore_libraries(loaded.functions, crate::lua::functions::RestorePolicy::Replace)
            .map_err(|e| failed(&b.name, &format!("{e:?}")))?;
    }
    crate::store::access::stamp(dbs, &state.config, state.clock.now_ms());
    crate::persist::rdb::disk::install(loaded.dbs, dbs);
    file_loaded(load, &b.name, b.is_base, b.size, b.started);
    Ok(load.next == load.files.len())
}

/// Replays `commands` through the execution core as `client` (the
/// file's own: SELECT carries over), as Redis's fake AOF client runs them.
fn replay(
    dbs: &mut [Db],
    state: &mut ServerState,
    scripting: &mut Scripting,
    client: &mut crate::net::clients::ClientState,
    commands: &[Vec<Bytes>],
    name: &str,
) -> Result<(), ()> {
    for (i, args) in commands.iter().enumerate() {
        crate::persist::rdb::disk::sleep_key_delay(state.config.key_load_delay, i);
        if let Err(crate::cmd::Unresolved::Unknown(_)) = crate::cmd::resolve(args) {
            tracing::warn!(
                "Unknown command '{}' reading the append only file {name}",
                String::from_utf8_lossy(&args[0])
            );
            return Err(());
        }
        let now = state.clock.now_ms();
        let mut ctx = crate::cmd::Ctx {
            dbs,
            client,
            server: state,
            now,
            scripting: Some(scripting),
            caller: crate::exec::Caller::Control,
        };
        let reply = crate::exec::call_control(&mut ctx, args);
        let name = ctx.client.last_cmd.clone();
        let panics = crate::exec::unexpected_errors(ctx.server, crate::exec::Propagated::Aof, &name, &reply);
        crate::exec::end_unit(&mut ctx);
        if panics {
            // The server does not start (Redis panics).
            for line in crate::errors::propagation_panic("server", "AOF-loading-client", &name) {
                tracing::warn!("{line}");
            }
            return Err(());
        }
    }
    Ok(())
}

/// Opens (or creates) the incremental file and starts the writer; with
/// no files at all a base of the (empty) dataset is written first
/// (Redis's `aofOpenIfNeededOnServerStart`).
fn open_on_start(dbs: &mut [Db], state: &mut ServerState, scripting: &mut Scripting) -> Result<(), ()> {
    let dir = directory(state);
    if let Err(e) = std::fs::create_dir_all(&dir) {
        tracing::warn!("Can't open or create append-only dir {}: {e}", dir.display());
        return Err(());
    }
    let prefix = prefix(state).to_string();
    let mut m = state.aof.manifest.clone();
    let had_incr = !m.incr.is_empty();
    if m.base.is_none() && !had_incr {
        let name = m.new_base(&prefix, state.config.aof.use_rdb_preamble);
        let size = write_base(dbs, state, scripting, &dir, &name).map_err(|e| {
            tracing::warn!("Write error writing append only file on disk: {e}");
        })?;
        state.aof.base_size = size;
        state.aof.rewrite_base_size = size;
        tracing::info!("Creating AOF base file {name} on server start");
    }
    let name = match m.last_incr() {
        Some(name) => name.to_string(),
        None => m.new_incr(&prefix),
    };
    let file = open_append(&dir.join(&name)).map_err(|e| {
        tracing::warn!("Can't open the append-only file {name}: {e}");
    })?;
    m.persist(&dir, &prefix).map_err(|e| {
        tracing::warn!("Can't persist the AOF manifest file: {e}");
    })?;
    state.aof.manifest = m;
    attach(state, file)?;
    if had_incr {
        tracing::info!("Opening AOF incr file {name} on server start");
    } else {
        tracing::info!("Creating AOF incr file {name} on server start");
    }
    Ok(())
}

fn open_append(path: &Path) -> std::io::Result<File> {
    OpenOptions::new().create(true).append(true).open(path)
}

/// Starts the writer on `file` and attaches it to the feed.
fn attach(state: &mut ServerState, file: File) -> Result<(), ()> {
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    let durability = state.shared.aof.clone();
    let sink = writer::start(file, size, durability, state.clock.clone()).map_err(|e| {
        tracing::warn!("Can't start the AOF writer: {e}");
    })?;
    state.effects.set_aof(Some(sink));
    state.aof.on = true;
    configure(state);
    Ok(())
}

/// The writer's policy from the configuration (CONFIG SET reaches it
/// here) and from whether a save or rewrite walks (a walk's start and end
/// reach it too, for `no-appendfsync-on-rewrite`).
pub(crate) fn configure(state: &ServerState) {
    let c = &state.config.aof;
    let walking = state.bgsave.walking();
    let skip_fsync = c.no_fsync_on_rewrite && walking;
    state
        .shared
        .aof
        .configure(Fsync::parse(&c.fsync), c.timestamps, state.aof.on, walking, skip_fsync);
}

/// Writes the dataset as a base file `name` in `dir` (through a temporary
/// file, fsynced, renamed); its size. An RDB under `aof-use-rdb-preamble`
/// (the caller named it `.base.rdb`), else commands. Under the engine
/// lock: at start, before any client, or where no thread can walk.
fn write_base(dbs: &[Db], state: &ServerState, scripting: &Scripting, dir: &Path, name: &str) -> std::io::Result<u64> {
    let temp = dir.join(format!("temp-rewriteaof-{}.aof", std::process::id()));
    let size = write_base_file(dbs, state, scripting, &temp, state.config.aof.use_rdb_preamble)?;
    std::fs::rename(&temp, dir.join(name))?;
    Ok(size)
}

/// The dataset at once into `path`, fsynced; its size.
fn write_base_file(
    dbs: &[Db],
    state: &ServerState,
    scripting: &Scripting,
    path: &Path,
    rdb: bool,
) -> std::io::Result<u64> {
    use std::io::Write;
    let now = state.clock.now_ms();
    let bytes = if rdb {
        let libraries: Vec<Bytes> = scripting.libraries().iter().map(|l| l.code.clone()).collect();
        let used = crate::process::allocator().allocated;
        use crate::persist::rdb::disk::{write_dataset, Purpose};
        write_dataset(Vec::new(), dbs, &libraries, &state.config, now, used, Purpose::AofBase)
            .map_err(|e| std::io::Error::other(e.to_string()))?
    } else {
        rewrite::dataset(dbs, scripting.libraries(), now, state.config.aof.timestamps).to_vec()
    };
    let mut file =
        crate::persist::rdb::disk::AutoSync::new(File::create(path)?, state.config.aof.rewrite_incremental_fsync);
    file.write_all(&bytes)?;
    file.into_inner().sync_all()?;
    Ok(bytes.len() as u64)
}

/// The temporary incremental file written while the first rewrite after
/// turning the file on runs (Redis's `getTempIncrAofName`).
fn temp_incr_name(state: &ServerState) -> String {
    format!("temp-{}.incr", prefix(state))
}

/// A rewrite is running (INFO `aof_rewrite_in_progress`).
pub(crate) fn rewriting(state: &ServerState) -> bool {
    state.aof.running.is_some()
}

/// Starts a rewrite in the background (BGREWRITEAOF, the automatic and
/// the scheduled one, turning the file on; Redis's
/// `rewriteAppendOnlyFileBackground`): what ran before this point goes to
/// the current incremental file, what runs after to a new one (named in
/// the manifest now, or the temporary one while the file waits for its
/// first rewrite), and the new base is the dataset at this point, written
/// by the snapshot's walk. `Err`: it did not start (logged; the last
/// rewrite's status is an error).
pub(crate) fn start_rewrite(dbs: &mut [Db], state: &mut ServerState, scripting: &Scripting) -> Result<(), String> {
    let result = begin_rewrite(dbs, state, scripting);
    if let Err(e) = &result {
        tracing::warn!("{e}");
        state.aof.last_rewrite_ok = false;
    }
    result
}

fn begin_rewrite(dbs: &mut [Db], state: &mut ServerState, scripting: &Scripting) -> Result<(), String> {
    if state.bgsave.walking() {
        return Err("Can't rewrite append only file in background: a background save is running".into());
    }
    let dir = directory(state);
    std::fs::create_dir_all(&dir)
        .map_err(|e| format!("Can't open or create append-only dir {}: {e}", dir.display()))?;
    if state.aof.on {
        switch_incr(state, &dir)?;
    }
    state.aof.serial += 1;
    let temp = Path::new(&state.config.dir).join(format!(
        "temp-rewriteaof-bg-{}-{}.aof",
        std::process::id(),
        state.aof.serial
    ));
    let rdb = state.config.aof.use_rdb_preamble;
    let libraries: Vec<Bytes> = scripting.libraries().iter().map(|l| l.code.clone()).collect();
    state.aof.rewrites += 1;
    state.aof.scheduled = false;
    state.aof.running = Some(Running {
        started: Instant::now(),
        temp: temp.clone(),
        rdb,
    });
    match crate::persist::snapshot::start_aof_rewrite(dbs, state, libraries, temp.clone()) {
        Ok(()) => Ok(()),
        Err(crate::persist::snapshot::NotStarted::NoServer) => {
            // No thread can take the engine lock: the base is written now.
            let written = write_base_file(dbs, state, scripting, &temp, rdb);
            if let Err(e) = &written {
                tracing::warn!("Write error writing append only file on disk: {e}");
            }
            rewrite_done(dbs, state, written.is_ok());
            Ok(())
        }
        Err(crate::persist::snapshot::NotStarted::InProgress) => {
            state.aof.running = None;
            Err("Can't rewrite append only file in background: a background save is running".into())
        }
    }
}

/// The feed's next effects go to a new incremental file (Redis's
/// `openNewIncrAofForAppend`): the writer finishes the old one first (it
/// takes its messages in order, so nothing here waits for it).
fn switch_incr(state: &mut ServerState, dir: &Path) -> Result<(), String> {
    let prefix = prefix(state).to_string();
    let mut m = state.aof.manifest.clone();
    let name = if state.aof.waiting {
        temp_incr_name(state)
    } else {
        m.new_incr(&prefix)
    };
    // Appending, as every incr file is written (a staged crash cuts it
    // back, and the next write must land at the cut); empty, should a
    // temp file of an earlier try be left.
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(&name))
        .and_then(|f| f.set_len(0).map(|()| f))
        .map_err(|e| format!("Can't open the append-only file {name}: {e}"))?;
    if !state.aof.waiting {
        m.persist(dir, &prefix)
            .map_err(|e| format!("Can't persist the AOF manifest file: {e}"))?;
    }
    tracing::info!("Creating AOF incr file {name} on background rewrite");
    state.flush_effects();
    match state.effects.aof() {
        Some(sink) => sink.post(|done| writer::Msg::Switch { file, done }),
        None => attach(state, file).map_err(|()| "Can't start the AOF writer".to_string())?,
    }
    state.aof.manifest = m;
    Ok(())
}

/// A rewrite's walk ended, under the engine lock (`ok`: its temporary base
/// is written and fsynced): the base renamed into place, the temporary
/// incremental file too while the file waited for this rewrite, the
/// manifest persisted with the older files as history, and those removed
/// (Redis's `backgroundRewriteDoneHandler`). A failed rewrite leaves the
/// files as they were; one the file waited for is scheduled again.
pub(crate) fn rewrite_done(dbs: &mut [Db], state: &mut ServerState, ok: bool) {
    crate::persist::snapshot::release(dbs, state);
    let Some(run) = state.aof.running.take() else {
        return;
    };
    let installed = if ok {
        tracing::info!("Background AOF rewrite terminated with success");
        install(state, &run)
    } else {
        tracing::warn!("Background AOF rewrite terminated with error");
        Err(())
    };
    let _ = std::fs::remove_file(&run.temp);
    let a = &mut state.aof;
    a.last_rewrite_secs = run.started.elapsed().as_secs() as i64;
    a.last_rewrite_ok = installed.is_ok();
    if installed.is_ok() {
        a.consecutive_failures = 0;
        a.waiting = false;
        tracing::info!("Background AOF rewrite finished successfully");
    } else {
        a.consecutive_failures += 1;
        if a.waiting {
            let _ = std::fs::remove_file(directory(state).join(temp_incr_name(state)));
            state.aof.scheduled = true;
        }
    }
}

fn install(state: &mut ServerState, run: &Running) -> Result<(), ()> {
    let dir = directory(state);
    let prefix = prefix(state).to_string();
    let mut m = state.aof.manifest.clone();
    let temp_name = run
        .temp
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let base = m.new_base(&prefix, run.rdb);
    let base_path = dir.join(&base);
    std::fs::rename(&run.temp, &base_path).map_err(|e| {
        tracing::warn!(
            "Error trying to rename the temporary AOF base file {temp_name} into {}: {e}",
            base_path.display()
        );
    })?;
    tracing::info!("Successfully renamed the temporary AOF base file {temp_name} into {base}");
    let mut new_incr = None;
    if state.aof.waiting {
        let temp_incr = temp_incr_name(state);
        let incr = m.new_incr(&prefix);
        if let Err(e) = std::fs::rename(dir.join(&temp_incr), dir.join(&incr)) {
            tracing::warn!("Error trying to rename the temporary AOF incr file {temp_incr} into {incr}: {e}");
            let _ = std::fs::remove_file(&base_path);
            return Err(());
        }
        tracing::info!("Successfully renamed the temporary AOF incr file {temp_incr} into {incr}");
        new_incr = Some(dir.join(incr));
    }
    m.rewritten(state.effects.aof().is_some());
    if let Err(e) = m.persist(&dir, &prefix) {
        tracing::warn!("Can't persist the AOF manifest file: {e}");
        let _ = std::fs::remove_file(&base_path);
        if let Some(incr) = new_incr {
            let _ = std::fs::remove_file(incr);
        }
        return Err(());
    }
    let size = std::fs::metadata(&base_path).map_or(0, |meta| meta.len());
    if state.aof.on {
        state.aof.base_size = size;
        state.aof.rewrite_base_size = size + state.shared.aof.incr_size.load(Ordering::Relaxed);
    }
    state.aof.manifest = m;
    delete_history(state);
    Ok(())
}

/// A running rewrite was killed ([`crate::persist::snapshot::kill_rewrite`]:
/// the file turned off, shutdown, a staged crash): its temporary base is
/// removed; the last rewrite's status is unchanged (Redis's child
/// killed by SIGUSR1). One the file waited for starts again later.
pub(crate) fn rewrite_killed(state: &mut ServerState) {
    let Some(run) = state.aof.running.take() else {
        return;
    };
    // As Redis's `aofRemoveTempFile`: gone now, even if the process stops
    // before the walk sees the kill.
    let _ = std::fs::remove_file(&run.temp);
    if state.aof.waiting {
        let name = temp_incr_name(state);
        tracing::info!("Removing the temp incr aof file {name} in the background");
        let _ = std::fs::remove_file(directory(state).join(name));
        state.aof.scheduled = true;
    }
}

/// Rewrites wait after repeated failures (Redis's `aofRewriteLimited`):
/// 1 minute, then 2, 4, ... up to an hour; BGREWRITEAOF is never limited.
fn limited(state: &mut ServerState) -> bool {
    let a = &mut state.aof;
    if a.consecutive_failures < LIMIT_THRESHOLD {
        (a.limit_minutes, a.limit_until) = (0, 0);
        return false;
    }
    let now = state.clock.now_ms() / 1000;
    if a.limit_until != 0 {
        if now < a.limit_until {
            return true;
        }
        a.limit_until = 0;
        return false;
    }
    a.limit_minutes = if a.limit_minutes == 0 { 1 } else { a.limit_minutes * 2 }.min(LIMIT_MAX_MINUTES);
    a.limit_until = now + a.limit_minutes * SECS_PER_MINUTE;
    tracing::warn!(
        "Background AOF rewrite has repeatedly failed and triggered the limit, will retry in {} minutes",
        a.limit_minutes
    );
    true
}

/// BGREWRITEAOF, as Redis's `bgrewriteaofCommand`: refused while one runs,
/// scheduled while a save runs or inside a transaction, else started.
pub(crate) fn bgrewriteaof(
    dbs: &mut [Db],
    state: &mut ServerState,
    scripting: &Scripting,
    in_exec: bool,
) -> Result<Requested, ()> {
    if rewriting(state) {
        return Ok(Requested::InProgress);
    }
    if state.bgsave.walking() || in_exec {
        state.aof.scheduled = true;
        state.aof.consecutive_failures = 0;
        return Ok(Requested::Scheduled);
    }
    start_rewrite(dbs, state, scripting)
        .map(|()| Requested::Started)
        .map_err(|_| ())
}

/// What BGREWRITEAOF did.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Requested {
    Started,
    Scheduled,
    InProgress,
}

/// CONFIG SET appendonly: on rewrites first (the new base and incremental
/// file), as Redis's `startAppendOnly`, scheduled while a save runs (a
/// rewrite running already is replaced: it was not keeping the feed); off
/// kills a running rewrite and stops the writer after a last fsync
/// (`stopAppendOnly`). The files stay.
pub(crate) fn set_enabled(dbs: &mut [Db], state: &mut ServerState, scripting: &Scripting) -> Result<(), String> {
    match (state.config.aof.enabled, state.aof.on) {
        (true, false) => {
            state.shared.aof.reopened();
            state.aof.on = true;
            state.aof.waiting = true;
            configure(state);
            if state.bgsave.in_progress {
                state.aof.scheduled = true;
                tracing::warn!("AOF was enabled but there is already another background operation. An AOF background was scheduled to start when possible.");
                return Ok(());
            }
            if rewriting(state) {
                tracing::warn!("AOF was enabled but there is already an AOF rewriting in background. Stopping background AOF and starting a rewrite now.");
                crate::persist::snapshot::kill_rewrite(dbs, state);
            }
            start_rewrite(dbs, state, scripting).inspect_err(|_| {
                tracing::warn!("Redis needs to enable the AOF but can't trigger a background AOF rewrite operation. Check the above logs for more info about the error.");
                stop(state);
            })
        }
        (false, true) => {
            crate::persist::snapshot::kill_rewrite(dbs, state);
            stop(state);
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Writes and fsyncs what the writer holds, and stops it (AOF off, shutdown).
pub(crate) fn stop(state: &mut ServerState) {
    if let Some(sink) = state.effects.set_aof(None) {
        state.flush_effects();
        sink.ask(|done| writer::Msg::Stop { done });
    }
    state.aof.on = false;
    state.aof.waiting = false;
    state.aof.scheduled = false;
    configure(state);
}

/// The rewrite timer (Redis's `serverCron`): a scheduled rewrite starts
/// once no walk runs; else the automatic one when the files grew by
/// `auto-aof-rewrite-percentage` since the last rewrite and are at least
/// `auto-aof-rewrite-min-size`.
pub(crate) fn cron(dbs: &mut [Db], state: &mut ServerState, scripting: &Scripting) {
    if state.bgsave.walking() {
        return;
    }
    if state.aof.scheduled {
        if !limited(state) {
            let _ = start_rewrite(dbs, state, scripting);
        }
        return;
    }
    let c = &state.config.aof;
    if !state.aof.on || state.aof.waiting || c.auto_rewrite_percentage == 0 {
        return;
    }
    let size = current_size(state);
    let base = state.aof.rewrite_base_size.max(1);
    let growth = (size.saturating_sub(base)) * 100 / base;
    if size >= c.auto_rewrite_min_size && growth >= c.auto_rewrite_percentage && !limited(state) {
        tracing::info!("Starting automatic rewriting of AOF on {growth}% growth");
        let _ = start_rewrite(dbs, state, scripting);
    }
}

fn current_size(state: &ServerState) -> u64 {
    state.aof.base_size + state.shared.aof.incr_size.load(Ordering::Relaxed)
}

/// A staged power loss (the test-control plane's CRASH): the writer cuts
/// the incremental file back to what `appendfsync` had made durable (or,
/// with `lose_ms`, to the writes older than that), every connection is
/// dropped, and the engine restarts from its files. Without the file on,
/// the data is lost, as with no persistence. The offset kept, if any.
pub(crate) fn crash(
    dbs: &mut [Db],
    state: &mut ServerState,
    scripting: &mut Scripting,
    lose_ms: Option<u64>,
) -> Option<u64> {
    state.flush_effects();
    let now_ms = state.clock.now_ms();
    let kept = state
        .effects
        .aof()
        .and_then(|sink| sink.ask(|done| writer::Msg::Crash { lose_ms, now_ms, done }));
    let kept = match kept {
        Some(Ok(offset)) => Some(offset),
        Some(Err(e)) => {
            tracing::warn!("staged crash: can't cut the AOF back: {e}");
            None
        }
        None => None,
    };
    crate::engine::restart(dbs, state, scripting, true);
    // A file still waiting for its first rewrite holds nothing to load
    // yet (the caller loads the RDB file); its rewrite starts again.
    if state.aof.on && !state.aof.waiting && load_files(dbs, state, scripting).is_err() {
        tracing::warn!("staged crash: the AOF did not load; the server goes on empty");
    }
    kept
}

/// DEBUG LOADAOF, as Redis's: what the writer has is written and fsynced,
/// the databases and the function libraries are emptied, and the files of
/// the manifest on disk are loaded back (whether `appendonly` is on or
/// not), without propagating anything. `Err`: there was nothing to load or
/// it did not load (Redis exits then; the caller answers an error).
pub(crate) fn reload(dbs: &mut [Db], state: &mut ServerState, scripting: &mut Scripting) -> Result<(), ()> {
    if state.aof.replaying {
        return Err(());
    }
    state.flush_effects();
    if let Some(sink) = state.effects.aof() {
        sink.ask(|done| writer::Msg::Flush { done });
    }
    for db in dbs.iter_mut() {
        db.clear();
    }
    scripting.flush_functions(&state.lazyfree, false);
    state.aof.manifest = read_manifest(state)?;
    match new_load(state)? {
        Some(mut load) => {
            while !load_step(dbs, state, scripting, &mut load, usize::MAX)? {}
            Ok(())
        }
        // Redis's `loadAppendOnlyFiles` finds no file: it exits.
        None if state.aof.manifest.base.is_none() && state.aof.manifest.incr.is_empty() => Err(()),
        None => Ok(()),
    }
}

/// INFO persistence's `aof_*` fields, as Redis 7.0.15 lists them.
pub(crate) fn info(state: &ServerState) -> String {
    let a = &state.aof;
    let d = &state.shared.aof;
    let mut out = format!(
        "aof_enabled:{}\r\naof_rewrite_in_progress:{}\r\naof_rewrite_scheduled:{}\r\naof_last_rewrite_time_sec:{}\r\naof_current_rewrite_time_sec:{}\r\naof_last_bgrewrite_status:{}\r\naof_rewrites:{}\r\naof_rewrites_consecutive_failures:{}\r\naof_last_write_status:{}\r\naof_last_cow_size:0\r\nmodule_fork_in_progress:0\r\nmodule_fork_last_cow_size:0\r\n",
        u8::from(a.on),
        u8::from(rewriting(state)),
        u8::from(a.scheduled),
        a.last_rewrite_secs,
        a.running.as_ref().map_or(-1, |r| r.started.elapsed().as_secs() as i64),
        if a.last_rewrite_ok { "ok" } else { "err" },
        a.rewrites,
        a.consecutive_failures,
        if d.error().is_some() { "err" } else { "ok" },
    );
    // Redis shows the sizes when the directive says yes; the base size is
    // the files' size after the last rewrite (`aof_rewrite_base_size`).
    if state.config.aof.enabled {
        out.push_str(&format!(
            "aof_current_size:{}\r\naof_base_size:{}\r\naof_pending_rewrite:{}\r\naof_buffer_length:{}\r\naof_pending_bio_fsync:{}\r\naof_delayed_fsync:{}\r\n",
            current_size(state),
            a.rewrite_base_size,
            u8::from(a.scheduled),
            d.buffered.load(Ordering::Relaxed),
            u8::from(d.fsync_running.load(Ordering::Relaxed)),
            d.delayed_fsync.load(Ordering::Relaxed),
        ));
    }
    out
}
