//! The RDB file on disk: SAVE's write of the whole dataset to
//! `dir/dbfilename` (through `temp-<pid>.rdb` and a rename, as Redis) and
//! the load at start, with Redis's log lines; [`SocketLoad`] parses a
//! replica's transfer as it arrives.

use std::io::{BufWriter, Write};
use std::path::PathBuf;

use bytes::Bytes;

use super::crc64::crc64;
use super::file::{AuxValue, HintPolicy, Item, Reader, ReaderAt, WriteOptions, Writer};
use super::value::Encodings;
use super::{Corrupt, SaveError};
use crate::config::Config;
use crate::persist::loading::Loading;
use crate::store::Db;

/// Bytes a file being saved is written out to disk by, under
/// `rdb-save-incremental-fsync` and `aof-rewrite-incremental-fsync`
/// (Redis's `REDIS_AUTOSYNC_BYTES`): the kernel's dirty pages are written
/// out as the file grows, not all at the final fsync.
pub(crate) const AUTOSYNC_BYTES: u64 = 4 * 1024 * 1024;

/// A file being saved that is written out every `every` bytes (with
/// `None`, only when the caller syncs it at the end): Redis's
/// `rioSetAutoSync` with `rioFileWrite`. At each multiple of `every` the
/// range just written starts going to disk and the one before it is waited
/// for (`sync_file_range`), so at most two ranges are ever dirty. It is
/// data writeback only: an `fdatasync` of the growing file here committed
/// its size to the file system's journal every 4 MB, and the append-only
/// file's own writes, made on the serving thread meanwhile, waited for those
/// commits (a rewrite's p99 during it, README, Persistence).
pub(crate) struct AutoSync<F: SyncData> {
    file: F,
    every: Option<u64>,
    /// Bytes written since the last multiple of `every`.
    since: u64,
    /// Bytes written in all: the offset of the next byte.
    written: u64,
}

/// What [`AutoSync`] needs of its file.
pub(crate) trait SyncData: Write {
    /// Starts writing the `len` bytes at `offset` out to disk and, with
    /// `wait`, waits for them and for any writeback of them already running
    /// (Linux's `sync_file_range`, as Redis calls it).
    fn sync_range(&mut self, offset: u64, len: u64, wait: bool) -> std::io::Result<()>;
}

impl SyncData for std::fs::File {
    #[cfg(target_os = "linux")]
    fn sync_range(&mut self, offset: u64, len: u64, wait: bool) -> std::io::Result<()> {
        use std::os::fd::AsRawFd;
        let flags = if wait {
            libc::SYNC_FILE_RANGE_WAIT_BEFORE | libc::SYNC_FILE_RANGE_WRITE | libc::SYNC_FILE_RANGE_WAIT_AFTER
        } else {
            libc::SYNC_FILE_RANGE_WRITE
        };
        let (offset, len) = (offset as libc::off64_t, len as libc::off64_t);
        // SAFETY: a plain system call on this file's open descriptor.
        if unsafe { libc::sync_file_range(self.as_raw_fd(), offset, len, flags) } == -1 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }

    /// Without `sync_file_range`, Redis's `redis_fsync` of the whole file.
    #[cfg(not(target_os = "linux"))]
    fn sync_range(&mut self, _offset: u64, _len: u64, _wait: bool) -> std::io::Result<()> {
        std::fs::File::sync_data(self)
    }
}

impl<F: SyncData> AutoSync<F> {
    /// `file`, new and empty, written out every [`AUTOSYNC_BYTES`] when
    /// `incremental`.
    pub(crate) fn new(file: F, incremental: bool) -> AutoSync<F> {
        AutoSync {
            file,
            every: incremental.then_some(AUTOSYNC_BYTES),
            since: 0,
            written: 0,
        }
    }

    /// The file, to be synced whole and closed.
    pub(crate) fn into_inner(self) -> F {
        self.file
    }
}

impl<F: SyncData> Write for AutoSync<F> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let Some(every) = self.every else {
            return self.file.write(buf);
        };
        // Never past the next multiple of `every`: the ranges synced are
        // exactly those, as Redis cuts its writes at them.
        let room = usize::try_from(every - self.since).unwrap_or(usize::MAX);
        let n = self.file.write(&buf[..buf.len().min(room)])?;
        self.since += n as u64;
        self.written += n as u64;
        if self.since == every {
            self.file.flush()?;
            self.file.sync_range(self.written - every, every, false)?;
            if self.written >= 2 * every {
                self.file.sync_range(self.written - 2 * every, every, true)?;
            }
            self.since = 0;
        }
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

/// `redis-bits` (a pointer's width).
const REDIS_BITS: i64 = usize::BITS as i64;
/// Bytes per MB in Redis's "memory usage" log line.
const MB: f64 = 1024.0 * 1024.0;

/// `dir/dbfilename` (the current directory for an empty `dir`).
pub(crate) fn path(config: &Config) -> PathBuf {
    let dir = if config.dir.is_empty() { "." } else { &config.dir };
    PathBuf::from(dir).join(&config.dbfilename)
}

pub(crate) fn write_options(config: &Config, now_ms: u64) -> WriteOptions {
    let policy = config.memory.policy;
    let hints = if policy.lru() {
        HintPolicy::Lru { now_ms }
    } else if policy.lfu() {
        HintPolicy::Lfu {
            mode: crate::evict::access_mode(config),
            now_ms,
        }
    } else {
        HintPolicy::None
    };
    WriteOptions {
        compress: config.rdb_compression,
        checksum: config.rdb_checksum,
        encodings: Encodings::of(config),
        hints,
    }
}

/// What kind of file is written: `dir/dbfilename` or an append-only
/// file's base (the RDB preamble, aux `aof-base 1`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Purpose {
    Save,
    AofBase,
}

/// Starts a file: the header and the aux fields Redis 7.0.15 writes
/// (`rdbSaveInfoAuxFields`); `stream_db`, a replica's full sync for its
/// own replicas: `repl-stream-db`, the database its primary's stream has
/// selected.
pub(crate) fn start_file<W: Write>(
    sink: W,
    config: &Config,
    now_ms: u64,
    used_mem: u64,
    purpose: Purpose,
    stream_db: Option<usize>,
) -> Result<Writer<W>, SaveError> {
    let mut aux = vec![
        ("redis-ver", AuxValue::Str(crate::REDIS_VERSION)),
        ("redis-bits", AuxValue::Int(REDIS_BITS)),
        ("ctime", AuxValue::Int((now_ms / 1000) as i64)),
        ("used-mem", AuxValue::Int(used_mem as i64)),
    ];
    if let Some(db) = stream_db {
        aux.push(("repl-stream-db", AuxValue::Int(db as i64)));
    }
    aux.push(("aof-base", AuxValue::Int(i64::from(purpose == Purpose::AofBase))));
    Writer::start(sink, write_options(config, now_ms), &aux)
}

/// Writes the whole dataset as an RDB file into `sink`: the aux fields,
/// the function libraries, then every database with keys. `now_ms` is the
/// clock's time (keys already past their deadline are left out).
pub(crate) fn write_dataset<W: Write>(
    sink: W,
    dbs: &[Db],
    libraries: &[Bytes],
    config: &Config,
    now_ms: u64,
    used_mem: u64,
    purpose: Purpose,
) -> Result<W, SaveError> {
    let mut w = start_file(sink, config, now_ms, used_mem, purpose, None)?;
    for code in libraries {
        w.function(code)?;
    }
    let mut saved = 0;
    for (i, db) in dbs.iter().enumerate() {
        if db.is_empty() {
            continue;
        }
        w.begin_db(i, db.len() as u64, db.expires_len() as u64)?;
        for (key, entry, access) in db.live_items(now_ms) {
            w.key(i, key, entry.value, entry.expire_at, access)?;
            // A foreground save sleeps where it stands, as Redis's SAVE.
            sleep_key_delay(config.rdb_key_save_delay, saved);
            saved += 1;
        }
    }
    w.finish()
}

/// SAVE: writes `dir/dbfilename` atomically (a temp file in `dir`,
/// flushed and synced, then renamed over the old file).
pub(crate) fn save(dbs: &[Db], libraries: &[Bytes], config: &Config, now_ms: u64, used_mem: u64) -> Result<(), String> {
    let target = path(config);
    let dir = target.parent().map(PathBuf::from).unwrap_or_else(|| PathBuf::from("."));
    let temp = dir.join(format!("temp-{}.rdb", std::process::id()));
    let result = (|| -> Result<(), SaveError> {
        let file = AutoSync::new(std::fs::File::create(&temp)?, config.rdb_save_incremental_fsync);
        let w = write_dataset(
            BufWriter::new(file),
            dbs,
            libraries,
            config,
            now_ms,
            used_mem,
            Purpose::Save,
        )?;
        let file = w.into_inner().map_err(|e| SaveError::Io(e.into_error()))?;
        file.into_inner().sync_all()?;
        std::fs::rename(&temp, &target)?;
        Ok(())
    })();
    match result {
        Ok(()) => {
            tracing::info!("DB saved on disk");
            Ok(())
        }
        Err(e) => {
            let _ = std::fs::remove_file(&temp);
            tracing::warn!(
                "Failed opening the temp RDB file {} (in server root dir {}) for saving: {e}",
                temp.display(),
                dir.display()
            );
            Err(e.to_string())
        }
    }
}

/// What a file held, ready to install.
#[derive(Debug, Default)]
pub(crate) struct Loaded {
    /// The keys still live at `now`, by database (`dbs[i]` is database
    /// `i`; the databases after the file's last are absent), each built
    /// apart from the server's, so that installing an empty database's
    /// is taking its table ([`Db::absorb`]).
    pub(crate) dbs: Vec<Db>,
    pub(crate) functions: Vec<Bytes>,
    /// Keys left out because their deadline had passed.
    pub(crate) expired: u64,
    /// Keys left out because their value was empty (files from before
    /// Redis fixed #8453 can hold them).
    pub(crate) empty_skipped: u64,
    /// Aux `repl-stream-db`: the database a full sync's stream goes on in
    /// (a replica passing its primary's stream on selects none first).
    pub(crate) repl_stream_db: Option<usize>,
}

impl Loaded {
    /// The keys loaded (INFO's and the log's "keys loaded").
    pub(crate) fn keys(&self) -> usize {
        self.dbs.iter().map(Db::len).sum()
    }
}

/// Moves a file's databases ([`Loaded::dbs`]) into the server's `dbs`,
/// replacing any key present (see [`Db::absorb`]; a database the server
/// does not have is left out).
pub(crate) fn install(loaded: Vec<Db>, dbs: &mut [Db]) {
    // Replacing, no key is refused.
    let _ = install_checked(loaded, dbs, false);
}

/// [`install`]; with `refuse_duplicates` a key present already stops it:
/// `Err` with its database and name.
pub(crate) fn install_checked(loaded: Vec<Db>, dbs: &mut [Db], refuse_duplicates: bool) -> Result<(), (usize, Bytes)> {
    for (i, (db, loaded)) in dbs.iter_mut().zip(loaded).enumerate() {
        db.absorb(loaded, refuse_duplicates).map_err(|key| (i, key))?;
    }
    Ok(())
}

/// Empty keys logged by name, at most (Redis's limit).
const EMPTY_KEYS_LOGGED: u64 = 10;

/// `key-load-delay` and `rdb-key-save-delay` for the keys numbered
/// `from..to` of a load or a save: `delay` microseconds per key, or
/// (negative `-n`) one every `n` keys (Redis sleeps one microsecond with
/// probability 1/n).
pub(crate) fn key_delay(delay: i64, from: u64, to: u64) -> std::time::Duration {
    let micros = match delay {
        0 => 0,
        d if d > 0 => d as u64 * to.saturating_sub(from),
        d => {
            // The multiples of n in from..to.
            let n = d.unsigned_abs();
            to.div_ceil(n).saturating_sub(from.div_ceil(n))
        }
    };
    std::time::Duration::from_micros(micros)
}

/// Sleeps [`key_delay`] for key number `item` alone.
pub(crate) fn sleep_key_delay(delay: i64, item: usize) {
    let pause = key_delay(delay, item as u64, item as u64 + 1);
    if !pause.is_zero() {
        std::thread::sleep(pause);
    }
}

/// Keys parsed between two reports of a load's progress.
const PROGRESS_EVERY_KEYS: usize = 1024;

/// The fewest bytes a key takes in a file (its type, its name's length
/// and an empty string's length): a RESIZEDB count is believed only up
/// to what the rest of the file can hold, so a corrupt count cannot make
/// the load reserve memory the keys could never fill.
const MIN_KEY_BYTES: usize = 3;

/// Reads an RDB file's bytes (Redis's `rdbLoad`): every key live at
/// `now_ms` into a database below `databases`, and the libraries; how far
/// it has come goes to `progress` when given.
pub(crate) fn read_dataset(
    bytes: &[u8],
    config: &Config,
    now_ms: u64,
    progress: Option<&Loading>,
) -> Result<Loaded, Corrupt> {
    let mut reader = Reader::open(bytes, Encodings::of(config), config.rdb_checksum)?;
    let mut builder = Builder::new(config);
    while let Some(item) = reader.next_item()? {
        let room = (bytes.len() - reader.pos()) / MIN_KEY_BYTES;
        builder.add(item, reader.pos() as u64, room, config, now_ms, progress)?;
    }
    Ok(builder.loaded)
}

/// The dataset an RDB's items make, item by item ([`read_dataset`], and a
/// transfer parsed as it arrives, [`SocketLoad`]).
struct Builder {
    loaded: Loaded,
    items: usize,
    /// How the loading server records accesses (a key's access word:
    /// the file's hint under that policy, or a fresh one).
    access: crate::store::access::Mode,
}

impl Builder {
    fn new(config: &Config) -> Builder {
        Builder {
            loaded: Loaded::default(),
            items: 0,
            access: crate::evict::access_mode(config),
        }
    }

    /// Database `index` of the dataset, created (empty) when first named.
    fn db(&mut self, index: usize, now_ms: u64) -> &mut Db {
        while self.loaded.dbs.len() <= index {
            let mut db = Db::default();
            db.access = self.access;
            db.clock_ms = now_ms;
            self.loaded.dbs.push(db);
        }
        &mut self.loaded.dbs[index]
    }

    /// Takes one item, read up to byte `pos`; `room`: the most keys the
    /// rest of the input can hold (a RESIZEDB count is believed up to it).
    fn add(
        &mut self,
        item: Item,
        pos: u64,
        room: usize,
        config: &Config,
        now_ms: u64,
        progress: Option<&Loading>,
    ) -> Result<(), Corrupt> {
        self.items += 1;
        let items = self.items;
        let loaded = &mut self.loaded;
        if let Some(progress) = progress.filter(|_| items.is_multiple_of(PROGRESS_EVERY_KEYS)) {
            progress.progress(pos);
        }
        match item {
            Item::Aux(k, v) => match &k[..] {
                b"redis-ver" => tracing::info!("Loading RDB produced by version {}", String::from_utf8_lossy(&v)),
                b"ctime" => {
                    let ctime = std::str::from_utf8(&v)
                        .ok()
                        .and_then(|t| t.parse::<i64>().ok())
                        .unwrap_or(0);
                    let age = (now_ms / 1000) as i64 - ctime;
                    tracing::info!("RDB age {} seconds", age.max(0));
                }
                b"used-mem" => {
                    let used = std::str::from_utf8(&v)
                        .ok()
                        .and_then(|t| t.parse::<f64>().ok())
                        .unwrap_or(0.0);
                    tracing::info!("RDB memory usage when created {:.2} Mb", used / MB);
                    if let Some(progress) = progress {
                        progress.rdb_used_mem(used as u64);
                    }
                }
                b"repl-stream-db" => {
                    loaded.repl_stream_db = std::str::from_utf8(&v).ok().and_then(|t| t.parse().ok());
                }
                _ => {}
            },
            Item::Function(code) => loaded.functions.push(Bytes::from(code)),
            Item::ResizeDb { db, .. } | Item::EmptyKey { db, .. } if db >= config.databases => {
                return Err(too_many_databases(config));
            }
            Item::ResizeDb { db, keys, .. } => {
                let keys = usize::try_from(keys).unwrap_or(usize::MAX).min(room);
                self.db(db, now_ms).reserve(keys);
            }
            Item::EmptyKey { key, .. } => {
                if loaded.empty_skipped < EMPTY_KEYS_LOGGED {
                    tracing::warn!("rdbLoadObject skipping empty key: {}", String::from_utf8_lossy(&key));
                }
                loaded.empty_skipped += 1;
            }
            Item::Key {
                db,
                key,
                value,
                expire_at,
                hints,
            } => {
                if db >= config.databases {
                    return Err(too_many_databases(config));
                }
                sleep_key_delay(config.key_load_delay, items);
                // A key past its deadline is left out, and so never a
                // duplicate (Redis's `rdbLoadRio` checks the keys it adds).
                if expire_at != 0 && expire_at < now_ms {
                    self.loaded.expired += 1;
                    return Ok(());
                }
                let word = hints.word(self.access.lfu, now_ms);
                if !self.db(db, now_ms).insert_new_loaded(&key, value, expire_at, word) {
                    return Err(Corrupt::bad(format!(
                        "RDB has duplicated key '{}' in DB {db}",
                        String::from_utf8_lossy(&key)
                    )));
                }
            }
        }
        Ok(())
    }
}

fn too_many_databases(config: &Config) -> Corrupt {
    Corrupt::bad(format!(
        "FATAL: Data file was created with a Redis server configured to handle more than {} databases. Exiting\n",
        config.databases
    ))
}

/// The most keys a RESIZEDB count reserves room for while a transfer is
/// parsed as it arrives (the rest of the input is not known yet).
const STREAM_RESERVE_KEYS: usize = 1 << 16;

/// An RDB parsed as its bytes arrive (a replica's diskless load, Redis's
/// `rdbLoadRio` on the primary's socket): [`SocketLoad::feed`] parses every
/// complete item buffered and keeps the bytes of the one not complete yet;
/// only those are held, never the whole transfer.
pub(crate) struct SocketLoad {
    config: Config,
    now_ms: u64,
    builder: Builder,
    /// Bytes received and not yet parsed.
    pending: Vec<u8>,
    /// Bytes parsed so far (the progress INFO shows).
    parsed: u64,
    /// Where the reader stopped (`None` until the header is in).
    at: Option<ReaderAt>,
    /// A partial item is retried once `pending` holds this many bytes
    /// (see [`SocketLoad::parse`]).
    retry_at: usize,
    /// A retry cannot get past the partial item before `pending` holds
    /// this many bytes (the read that came up short needs them).
    need: usize,
    /// Bytes came that no parse has seen yet.
    unparsed: bool,
    /// The EOF opcode (and checksum) was read: the dataset is complete.
    done: bool,
    /// Parses started (a test bounds the retries).
    #[cfg(test)]
    attempts: usize,
}

impl SocketLoad {
    pub(crate) fn new(config: &Config, now_ms: u64) -> SocketLoad {
        SocketLoad {
            config: config.clone(),
            now_ms,
            builder: Builder::new(config),
            pending: Vec::new(),
            parsed: 0,
            at: None,
            retry_at: 0,
            need: 0,
            unparsed: false,
            done: false,
            #[cfg(test)]
            attempts: 0,
        }
    }

    /// Whether the RDB's end (EOF and checksum) was parsed.
    pub(crate) fn done(&self) -> bool {
        self.done
    }

    /// The bytes received after the RDB's end (the diskless end mark).
    pub(crate) fn trailing(&self) -> &[u8] {
        if self.done {
            &self.pending
        } else {
            &[]
        }
    }

    /// Takes `bytes` of the transfer and parses every item now complete
    /// (but see [`SocketLoad::settle`]); `last`: nothing follows them (a
    /// short item is then an error).
    pub(crate) fn feed(&mut self, bytes: &[u8], last: bool, progress: Option<&Loading>) -> Result<(), Corrupt> {
        self.pending.extend_from_slice(bytes);
        if self.done {
            return Ok(());
        }
        if self.pending.len() < self.retry_at && !last {
            self.unparsed |= !bytes.is_empty();
            return Ok(());
        }
        self.parse(last, progress)
    }

    /// Whether bytes wait that a parse could get further with, held back
    /// by the retry rule.
    pub(crate) fn unsettled(&self) -> bool {
        !self.done && self.unparsed && self.pending.len() >= self.need
    }

    /// Parses what came, the retry rule aside: the link calls it when the
    /// primary pauses, so that a pause never leaves complete items of a
    /// large value's fields unparsed (the retry rule can put a retry past
    /// the end of such an item).
    pub(crate) fn settle(&mut self, progress: Option<&Loading>) -> Result<(), Corrupt> {
        if self.unsettled() {
            self.parse(false, progress)
        } else {
            Ok(())
        }
    }

    /// Parses every complete item of `pending`.
    fn parse(&mut self, last: bool, progress: Option<&Loading>) -> Result<(), Corrupt> {
        self.unparsed = false;
        let mut at = match self.at {
            Some(at) => at,
            None => {
                if self.pending.len() < HEADER_LEN && !last {
                    (self.need, self.retry_at) = (HEADER_LEN, HEADER_LEN);
                    return Ok(());
                }
                let reader = Reader::open(&self.pending, Encodings::of(&self.config), self.config.rdb_checksum)?;
                let at = reader.at(crc64(0, &self.pending[..HEADER_LEN]));
                self.pending.drain(..HEADER_LEN);
                self.parsed += HEADER_LEN as u64;
                at
            }
        };
        let mut used = 0;
        #[cfg(test)]
        {
            self.attempts += 1;
        }
        let result = {
            let mut reader = Reader::resume(&self.pending, at);
            loop {
                match reader.next_item() {
                    Ok(Some(item)) => {
                        let pos = self.parsed + reader.pos() as u64;
                        if let Err(e) =
                            self.builder
                                .add(item, pos, STREAM_RESERVE_KEYS, &self.config, self.now_ms, progress)
                        {
                            break Err(e);
                        }
                        at = reader.at(crc64(at.crc, &self.pending[used..reader.pos()]));
                        used = reader.pos();
                    }
                    Ok(None) => {
                        self.done = true;
                        used = reader.pos();
                        break Ok(());
                    }
                    Err(Corrupt::ShortRead) if !last => {
                        // The partial item is retried once the read that
                        // failed can succeed (a long string or packed
                        // blob: when it is complete, not later, so a
                        // primary that pauses there sees it parsed), and
                        // not before what it took to get there has
                        // doubled: each retry re-reads the item from its
                        // start, and a large item of small fields is then
                        // re-read a bounded number of times, not once
                        // per read.
                        let (from, to) = reader.short();
                        self.need = to.saturating_sub(used);
                        self.retry_at = self.need.max(from.saturating_sub(used).saturating_mul(2));
                        break Ok(());
                    }
                    Err(e) => break Err(e),
                }
            }
        };
        self.at = Some(at);
        self.pending.drain(..used);
        self.parsed += used as u64;
        if let Some(progress) = progress {
            progress.progress(self.parsed);
        }
        result
    }

    /// The dataset, once [`SocketLoad::done`].
    pub(crate) fn finish(self) -> Loaded {
        self.builder.loaded
    }
}

/// The RDB header's length (`REDIS` and four version digits).
const HEADER_LEN: usize = 9;

/// The file at start: `Ok(None)` when there is none (Redis starts empty
/// without a word), else its bytes; an error is fatal, as in Redis.
pub(crate) fn read_file(config: &Config) -> std::io::Result<Option<Vec<u8>>> {
    match std::fs::read(path(config)) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => {
            tracing::warn!("Fatal error loading the DB: {e}. Exiting.");
            Err(e)
        }
    }
}

/// The file at start, read and parsed at once ([`read_file`], [`parse`]).
pub(crate) fn load_at_start(config: &Config, now_ms: u64) -> std::io::Result<Option<Loaded>> {
    match read_file(config)? {
        Some(bytes) => parse(&bytes, config, now_ms, None).map(Some),
        None => Ok(None),
    }
}

/// Parses a file's bytes with Redis's log lines; an error is fatal, as in Redis.
pub(crate) fn parse(bytes: &[u8], config: &Config, now_ms: u64, progress: Option<&Loading>) -> std::io::Result<Loaded> {
    let started = std::time::Instant::now();
    match read_dataset(bytes, config, now_ms, progress) {
        Ok(loaded) => {
            if loaded.empty_skipped > 0 {
                tracing::info!(
                    "Done loading RDB, keys loaded: {}, keys expired: {}, empty keys skipped: {}.",
                    loaded.keys(),
                    loaded.expired,
                    loaded.empty_skipped
                );
            } else {
                tracing::info!(
                    "Done loading RDB, keys loaded: {}, keys expired: {}.",
                    loaded.keys(),
                    loaded.expired
                );
            }
            tracing::info!("DB loaded from disk: {:.3} seconds", started.elapsed().as_secs_f64());
            Ok(loaded)
        }
        Err(e) => {
            // Redis's lines, but for its source line number (rdb.c:0 here).
            let (first, reason) = e.report();
            if let Some(first) = first {
                tracing::warn!("{first}");
            }
            tracing::warn!("Internal error in RDB reading offset 0, function at rdb.c:0 -> {reason}");
            Err(std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string()))
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::persist::rdb::codec::Out;
    use crate::persist::rdb::value;
    use crate::store::ManualClock;
    use crate::testing::{LocalEngine, RawClient, RedisServer, TempDir};

    /// Directives that give small values the large encodings, so that a
    /// small file holds every encoding (hashtable sets and hashes, skiplist
    /// sorted sets, many-node lists and streams).
    const SMALL_ENCODINGS: &[(&str, &str)] = &[
        ("hash-max-listpack-entries", "8"),
        ("zset-max-listpack-entries", "8"),
        ("set-max-intset-entries", "8"),
        ("list-max-listpack-size", "4"),
        ("stream-node-max-entries", "5"),
    ];

    /// The commands that make the dataset: every type in every encoding
    /// Redis 7.0.15 and coordis write (int-encoded strings of each width,
    /// plain and LZF strings, one large enough to arrive in many reads),
    /// deadlines, functions, streams with groups, PELs and consumers, and
    /// keys in a second database.
    fn workload() -> Vec<Vec<Vec<u8>>> {
        let mut rng = fastrand::Rng::with_seed(7);
        let noise: Vec<u8> = (0..300).map(|_| rng.u8(..)).collect();
        let mut cmds: Vec<Vec<Vec<u8>>> = vec![
            vec![b"SET".to_vec(), b"s:noise".to_vec(), noise],
            vec![b"SET".to_vec(), b"s:big".to_vec(), big()],
        ];
        let words = [
            "SET s:int8 12",
            "SET s:int16 300",
            "SET s:int32 -70000",
            "SET s:int64 4294967296",
            "SET s:short hello",
            "SET s:empty-looking 0",
            "SET s:ttl v",
            "PEXPIREAT s:ttl 4102444800000",
            "RPUSH l:small a 1 -5 300",
            "SADD set:ints 3 1 2",
            "SADD set:wide 1 5000000000 -3",
            "SADD set:table a b c",
            "SADD set:ints-table 1 2 3 4 5 6 7 8 9 10 11 12",
            "HSET h:small f v n 1",
            "ZADD z:small 1 a 2.5 b -0 c inf d",
            "XGROUP CREATE x:groups g0 $ MKSTREAM",
            "XGROUP CREATE x:groups 123 0 ENTRIESREAD 0",
            "XADD x:groups 1-1 f v",
            "XADD x:groups 1-2 f w",
            "XADD x:groups 2-0 other 12 more -5",
            "XADD x:groups 3-0 f x",
            "XCLAIM x:groups 123 alice 0 1-1 TIME 1700000000000 RETRYCOUNT 3 FORCE JUSTID",
            "XCLAIM x:groups 123 bob 0 2-0 TIME 1700000000500 RETRYCOUNT 1 FORCE JUSTID",
            "XGROUP CREATECONSUMER x:groups 123 idle-one",
            "XGROUP SETID x:groups g0 2-0 ENTRIESREAD 2",
            "XDEL x:groups 1-2",
            "XADD x:empty 5-5 f v",
            "XTRIM x:empty MAXLEN 0",
            "SELECT 3",
            "SET other db",
            "HSET h:other f v",
            "SELECT 0",
        ];
        cmds.extend(
            words
                .iter()
                .map(|w| w.split(' ').map(|a| a.as_bytes().to_vec()).collect()),
        );
        cmds.push(
            [
                "FUNCTION",
                "LOAD",
                "#!lua name=lib\nredis.register_function('f', function() return 7 end)",
            ]
            .iter()
            .map(|a| a.as_bytes().to_vec())
            .collect(),
        );
        let long = "y".repeat(100);
        let mut many = |cmd: &str, key: &str, n: usize, item: &dyn Fn(usize) -> Vec<String>| {
            let mut c = vec![cmd.as_bytes().to_vec(), key.as_bytes().to_vec()];
            c.extend((0..n).flat_map(item).map(String::into_bytes));
            cmds.push(c);
        };
        many("RPUSH", "l:big", 40, &|i| {
            vec![if i % 7 == 0 { long.clone() } else { format!("e{i}") }]
        });
        many("SADD", "set:big", 30, &|i| vec![format!("m{i}")]);
        many("HSET", "h:big", 30, &|i| vec![format!("f{i}"), format!("v{i}")]);
        many("HSET", "h:long", 1, &|_| vec!["f".into(), long.clone()]);
        many("ZADD", "z:big", 30, &|i| {
            vec![format!("{}", i as f64 / 3.0), format!("m{i}")]
        });
        for i in 1..=40u64 {
            let fields = match i % 3 {
                0 => format!("other {i} x {long}"),
                _ => format!("a {i} b bee c {}", i * 1000),
            };
            cmds.push(
                format!("XADD x:big {}-{} {fields}", 1000 + i / 4, i % 4)
                    .split(' ')
                    .map(|a| a.as_bytes().to_vec())
                    .collect(),
            );
        }
        cmds
    }

    /// A string long enough to arrive in many reads.
    fn big() -> Vec<u8> {
        (0..8_000u32)
            .flat_map(|i| format!("{:05}-", i % 977).into_bytes())
            .collect()
    }

    fn config(pairs: &[(&str, &str)]) -> Config {
        let mut config = Config::default();
        for (name, value) in SMALL_ENCODINGS.iter().chain(pairs) {
            config.apply(name, &[value.to_string()]).unwrap();
        }
        config
    }

    /// The file coordis saves of [`workload`] under `pairs`.
    fn coordis_file(pairs: &[(&str, &str)]) -> Vec<u8> {
        let dir = TempDir::new("socket-load");
        let mut config = config(pairs);
        config.dir = dir.text().to_string();
        config.dbfilename = "dump.rdb".into();
        let mut engine = LocalEngine::new(config, Arc::new(ManualClock::at_ms(1_700_000_000_000)));
        for cmd in workload() {
            let args: Vec<&[u8]> = cmd.iter().map(Vec::as_slice).collect();
            let reply = engine.command(&args);
            assert!(!reply.starts_with(b"-"), "{}", String::from_utf8_lossy(&reply));
        }
        assert_eq!(engine.command(&[b"SAVE"]), b"+OK\r\n");
        std::fs::read(dir.dump()).unwrap()
    }

    /// The file redis-server saves of [`workload`] under `pairs`, when it
    /// is installed.
    fn redis_file(pairs: &[(&str, &str)]) -> Option<Vec<u8>> {
        let dir = TempDir::new("socket-load-redis");
        let mut args = vec!["--dir".to_string(), dir.text().to_string()];
        for (name, value) in SMALL_ENCODINGS.iter().chain(pairs) {
            args.extend([format!("--{name}"), value.to_string()]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let redis = RedisServer::start(&args).unwrap()?;
        let mut c = RawClient::connect(redis.addr()).unwrap();
        for cmd in workload() {
            let args: Vec<&[u8]> = cmd.iter().map(Vec::as_slice).collect();
            let reply = c.command_bytes(&args).unwrap();
            assert!(!reply.starts_with(b"-"), "{}", String::from_utf8_lossy(&reply));
        }
        assert_eq!(c.command(&["SAVE"]).unwrap(), b"+OK\r\n");
        Some(std::fs::read(dir.dump()).unwrap())
    }

    /// A file being saved is written out every 4 MB under the incremental
    /// directives as Redis's `rioFileWrite` does it: no write straddles a
    /// multiple of 4 MB; at each, a flush, the writeback of the 4 MB just
    /// written started and the 4 MB before them waited for; nothing
    /// without the directives.
    #[test]
    fn a_file_being_saved_is_written_out_every_4_mb_when_incremental() {
        #[derive(Default)]
        struct Sink {
            bytes: u64,
            straddled: bool,
            flushed_at: Vec<u64>,
            /// (bytes written then, offset, length, wait)
            synced: Vec<(u64, u64, u64, bool)>,
        }
        impl Write for Sink {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                let end = self.bytes + buf.len() as u64;
                self.straddled |= self.bytes / AUTOSYNC_BYTES != (end - 1) / AUTOSYNC_BYTES;
                self.bytes = end;
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                self.flushed_at.push(self.bytes);
                Ok(())
            }
        }
        impl SyncData for Sink {
            fn sync_range(&mut self, offset: u64, len: u64, wait: bool) -> std::io::Result<()> {
                self.synced.push((self.bytes, offset, len, wait));
                Ok(())
            }
        }
        // 100,000-byte writes: not aligned with the 4 MB.
        let chunk = vec![0u8; 100_000];
        const MB4: u64 = AUTOSYNC_BYTES;
        for incremental in [true, false] {
            let mut file = BufWriter::new(AutoSync::new(Sink::default(), incremental));
            for _ in 0..160 {
                file.write_all(&chunk).unwrap();
            }
            let sink = file.into_inner().ok().unwrap().into_inner();
            assert_eq!(sink.bytes, 16_000_000);
            if incremental {
                assert!(!sink.straddled, "a write went past a multiple of 4 MB");
                assert_eq!(sink.flushed_at, [MB4, 2 * MB4, 3 * MB4]);
                assert_eq!(
                    sink.synced,
                    [
                        (MB4, 0, MB4, false),
                        (2 * MB4, MB4, MB4, false),
                        (2 * MB4, 0, MB4, true),
                        (3 * MB4, 2 * MB4, MB4, false),
                        (3 * MB4, MB4, MB4, true),
                    ]
                );
            } else {
                assert!(sink.straddled);
                assert!(sink.flushed_at.is_empty() && sink.synced.is_empty());
            }
        }
    }

    /// The same on a real file: the kernel takes the ranges, and the file
    /// holds every byte.
    #[test]
    fn a_real_file_is_written_out_as_it_grows() {
        let dir = TempDir::new("autosync");
        let path = dir.0.join("file");
        let mut file = BufWriter::new(AutoSync::new(std::fs::File::create(&path).unwrap(), true));
        let chunk: Vec<u8> = (0..100_000u32).map(|i| i as u8).collect();
        for _ in 0..90 {
            file.write_all(&chunk).unwrap();
        }
        file.into_inner().ok().unwrap().into_inner().sync_all().unwrap();
        let read = std::fs::read(&path).unwrap();
        assert_eq!(read.len(), 9_000_000);
        assert!(read.chunks(100_000).all(|c| c == chunk));
    }

    /// A file naming the same key twice (live both times) is refused with
    /// Redis's text; a key left out as past its deadline is no duplicate
    /// (Redis's `rdbLoadRio` checks only the keys it adds), nor is the
    /// same name in another database.
    #[test]
    fn a_duplicate_key_is_refused_unless_one_was_left_out() {
        let config = Config::default();
        let file = |keys: &[(usize, &str, u64)]| {
            let mut w = Writer::start(Vec::new(), write_options(&config, 0), &[]).unwrap();
            for &(db, key, expire_at) in keys {
                w.key(db, key.as_bytes(), crate::store::ValueRef::Str(b"v"), expire_at, 0)
                    .unwrap();
            }
            w.finish().unwrap()
        };
        let now = 1_000;
        let twice = read_dataset(&file(&[(0, "a", 0), (0, "b", 0), (0, "a", 0)]), &config, now, None);
        assert_eq!(
            twice.unwrap_err().to_string(),
            Corrupt::bad("RDB has duplicated key 'a' in DB 0".to_string()).to_string()
        );
        let loaded = read_dataset(&file(&[(0, "a", 500), (0, "a", 0), (1, "a", 0)]), &config, now, None).unwrap();
        assert_eq!((loaded.keys(), loaded.expired), (2, 1));
        let mut dbs: Vec<Db> = (0..2).map(|_| Db::default()).collect();
        install(loaded.dbs, &mut dbs);
        assert!(dbs.iter().all(|db| db.peek(b"a").is_some()));
    }

    /// What a load holds, comparable: each key with its deadline, access word,
    /// type, encoding and digest (a stream also with its encoding, which
    /// has the groups the digest leaves out).
    fn summary(loaded: &Loaded) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for (db, keys) in loaded.dbs.iter().enumerate() {
            for (key, entry, access) in keys.live_items(0) {
                let (v, expire_at) = (entry.value, entry.expire_at);
                let mut digest = crate::store::digest::Digest::default();
                crate::store::digest::mix_value(&mut digest, v, expire_at);
                let mut stream = Out::new(false);
                if let crate::store::ValueRef::Stream(_) = v {
                    value::write(&mut stream, v, &Encodings::of(&Config::default())).unwrap();
                }
                out.push(format!(
                    "{db} {} {expire_at} {access} {} {} {} {:x}",
                    String::from_utf8_lossy(key),
                    v.type_name(),
                    v.encoding(),
                    crate::store::digest::hex(&digest),
                    crc64(0, &stream.buf)
                ));
            }
        }
        // Table order depends on each database's hasher.
        out.sort();
        out.extend(loaded.functions.iter().map(|f| String::from_utf8_lossy(f).into_owned()));
        out.push(format!(
            "expired {} empty {} stream db {:?}",
            loaded.expired, loaded.empty_skipped, loaded.repl_stream_db
        ));
        out
    }

    /// `bytes` fed to a [`SocketLoad`] cut at `cuts` (increasing, the
    /// last one the length), `last` only with the final piece.
    fn feed(bytes: &[u8], cuts: &[usize], config: &Config) -> Result<Loaded, Corrupt> {
        let mut load = SocketLoad::new(config, 0);
        let mut start = 0;
        for &end in cuts {
            load.feed(&bytes[start..end], end == bytes.len(), None)?;
            start = end;
        }
        assert!(load.done(), "not done after the last piece");
        assert!(load.trailing().is_empty());
        Ok(load.finish())
    }

    /// Cuts every `size` bytes.
    fn every(size: usize, len: usize) -> Vec<usize> {
        (size..len).step_by(size).chain([len]).collect()
    }

    /// Cuts of random sizes, some empty, some large.
    fn random_cuts(rng: &mut fastrand::Rng, len: usize) -> Vec<usize> {
        let mut cuts = vec![];
        let mut at = 0;
        while at < len {
            let most = [4, 64, 4096][rng.usize(0..3)];
            at = (at + rng.usize(0..=most)).min(len);
            cuts.push(at);
        }
        cuts
    }

    #[test]
    fn a_file_fed_in_pieces_of_any_size_loads_as_the_whole_file() {
        let mut files = vec![];
        for compression in ["yes", "no"] {
            for checksum in ["yes", "no"] {
                let pairs = [("rdbcompression", compression), ("rdbchecksum", checksum)];
                files.push((format!("coordis {pairs:?}"), coordis_file(&pairs), config(&pairs)));
            }
        }
        // The access hints (IDLE, FREQ opcodes before a key).
        for policy in ["allkeys-lru", "allkeys-lfu"] {
            let pairs = [("maxmemory-policy", policy)];
            files.push((format!("coordis {policy}"), coordis_file(&pairs), config(&pairs)));
        }
        for compression in ["yes", "no"] {
            let pairs = [("rdbcompression", compression), ("maxmemory-policy", "allkeys-lfu")];
            if let Some(file) = redis_file(&pairs) {
                files.push((format!("redis {pairs:?}"), file, config(&pairs)));
            }
        }
        let mut rng = fastrand::Rng::with_seed(42);
        for (name, bytes, config) in &files {
            let whole = summary(&read_dataset(bytes, config, 0, None).unwrap());
            assert!(whole.len() > 25, "{name}: {whole:?}");
            let check = |cuts: &[usize], how: &str| match feed(bytes, cuts, config) {
                Ok(loaded) => assert_eq!(summary(&loaded), whole, "{name}, {how}"),
                Err(e) => panic!("{name}, {how}: {e:?}"),
            };
            for size in 1..=300 {
                check(&every(size, bytes.len()), &format!("pieces of {size} bytes"));
            }
            for _ in 0..100 {
                let cuts = random_cuts(&mut rng, bytes.len());
                check(&cuts, &format!("cut at {cuts:?}"));
            }
        }
    }

    #[test]
    fn a_corrupt_file_fed_in_pieces_is_still_an_error() {
        let pairs = [("rdbcompression", "yes"), ("rdbchecksum", "yes")];
        let (bytes, config) = (coordis_file(&pairs), config(&pairs));
        let mut bad_crc = bytes.clone();
        *bad_crc.last_mut().unwrap() ^= 1;
        // An unknown type byte where the first key's type is.
        let first_key = bytes.windows(7).position(|w| w == b"\x06s:int8").unwrap() - 1;
        let mut bad_type = bytes.clone();
        bad_type[first_key] = 100;
        for size in [1, 2, 7, 64, 300, bytes.len()] {
            let cuts = every(size, bytes.len());
            assert!(
                matches!(feed(&bad_crc, &cuts, &config), Err(Corrupt::Checksum { .. })),
                "{size}"
            );
            assert!(
                matches!(feed(&bad_type, &cuts, &config), Err(Corrupt::Bad(_))),
                "{size}"
            );
            // Cut short: the last piece ends inside an item.
            let short = &bytes[..bytes.len() - 20];
            let cuts = every(size, short.len());
            assert_eq!(feed(short, &cuts, &config).err(), Some(Corrupt::ShortRead), "{size}");
        }
    }

    #[test]
    fn a_value_arriving_in_many_pieces_is_retried_a_bounded_number_of_times() {
        let pairs = [("rdbcompression", "no")];
        let (bytes, config) = (coordis_file(&pairs), config(&pairs));
        let items = read_dataset(&bytes, &config, 0, None).unwrap().keys() + 10;
        for size in [1, 7, 100, 1000] {
            let mut load = SocketLoad::new(&config, 0);
            for (i, piece) in bytes.chunks(size).enumerate() {
                load.feed(piece, (i + 1) * size >= bytes.len(), None).unwrap();
            }
            assert!(load.done());
            // A few retries per item (their sizes' logarithm, at most),
            // where a parse per piece would be thousands.
            let pieces = bytes.len().div_ceil(size);
            assert!(
                load.attempts <= 4 * items,
                "{size}: {} parses for {pieces} pieces, {items} items",
                load.attempts
            );
        }
    }

    #[test]
    fn a_settled_load_has_parsed_every_complete_item() {
        let pairs = [("rdbcompression", "no")];
        let (bytes, config) = (coordis_file(&pairs), config(&pairs));
        let mut ends = vec![];
        let mut reader = Reader::open(&bytes, Encodings::of(&config), true).unwrap();
        while reader.next_item().unwrap().is_some() {
            ends.push(reader.pos());
        }
        for size in [1, 7, 100, 1000] {
            let mut load = SocketLoad::new(&config, 0);
            let mut fed = 0;
            for piece in bytes.chunks(size) {
                fed += piece.len();
                load.feed(piece, fed == bytes.len(), None).unwrap();
                // A primary that pauses after any piece.
                load.settle(None).unwrap();
                let complete = ends.iter().rev().find(|&&end| end <= fed).copied().unwrap_or(0);
                assert!(load.parsed >= complete as u64, "{size}: {} < {complete}", load.parsed);
            }
            assert!(load.done());
        }
    }
}
