//! The RDB file on disk: SAVE's write of the whole dataset to
//! `dir/dbfilename` (through `temp-<pid>.rdb` and a rename, as Redis) and
//! the load at start, with Redis's log lines; [`SocketLoad`] parses a
//! replica's transfer as it arrives.

use std::hash::BuildHasher;
use std::io::{BufWriter, Write};
use std::path::PathBuf;

use bytes::Bytes;
use hashbrown::HashTable;

use super::crc64::crc64;
use super::file::{AccessHints, AuxValue, HintPolicy, Item, Reader, ReaderAt, WriteOptions, Writer};
use super::value::Encodings;
use super::{Corrupt, SaveError};
use crate::config::Config;
use crate::persist::loading::Loading;
use crate::store::{Db, Value};

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
    for (i, db) in dbs.iter().enumerate() {
        if db.is_empty() {
            continue;
        }
        w.begin_db(i, db.len() as u64, db.expires_len() as u64)?;
        for (key, entry, access) in db.live_items(now_ms) {
            w.key(i, key, entry.value, entry.expire_at, access)?;
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
        let file = std::fs::File::create(&temp)?;
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
        file.sync_all()?;
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

/// A key read from a file: (db, name, value, deadline, LRU/LFU hints).
pub(crate) type LoadedKey = (usize, Vec<u8>, Value, u64, AccessHints);

/// What a file held, ready to install.
#[derive(Debug, Default)]
pub(crate) struct Loaded {
    /// Every key still live at `now`, in the file's order.
    pub(crate) keys: Vec<LoadedKey>,
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

/// Empty keys logged by name, at most (Redis's limit).
const EMPTY_KEYS_LOGGED: u64 = 10;

/// `key-load-delay`: `delay` microseconds per key, or (negative `-n`) one
/// every `n` keys (Redis sleeps one microsecond with probability 1/n).
pub(crate) fn key_load_delay(delay: i64, item: usize) {
    let micros = match delay {
        0 => return,
        d if d > 0 => d as u64,
        d if (item as u64).is_multiple_of(d.unsigned_abs()) => 1,
        _ => return,
    };
    std::thread::sleep(std::time::Duration::from_micros(micros));
}

/// Keys parsed between two reports of a load's progress.
const PROGRESS_EVERY_KEYS: usize = 1024;

/// The fewest bytes a key takes in a file (its type, its name's length
/// and an empty string's length): a RESIZEDB count is believed only up
/// to what the rest of the file can hold, so a corrupt count cannot make
/// the load reserve memory the keys could never fill.
const MIN_KEY_BYTES: usize = 3;

/// Where a key read so far is kept: in [`Loaded::keys`], or among the keys
/// left out as expired.
#[derive(Clone, Copy, Debug)]
enum Kept {
    Live(usize),
    Expired(usize),
}

/// The keys read so far, to refuse a duplicate as Redis does. The table
/// holds where each key is already kept, with its hash: no key is copied
/// to be remembered, and growing the table reads no key.
#[derive(Default)]
struct SeenKeys {
    table: HashTable<(u64, Kept)>,
    hasher: foldhash::fast::RandomState,
    /// (db, name) of the keys left out because their deadline had passed
    /// (a duplicate of one is refused too).
    expired: Vec<(usize, Vec<u8>)>,
}

impl SeenKeys {
    fn reserve(&mut self, additional: usize) {
        self.table.reserve(additional, |&(hash, _)| hash);
    }

    /// Remembers key `key` of database `db`, to be kept as `expired` says
    /// (live ones at the end of `live`); false if it was read before.
    fn insert(&mut self, live: &[LoadedKey], db: usize, key: &[u8], expired: bool) -> bool {
        let hash = self.hasher.hash_one(key);
        let kept_expired = &self.expired;
        let same = |&(h, kept): &(u64, Kept)| {
            h == hash
                && match kept {
                    Kept::Live(i) => live[i].0 == db && live[i].1 == key,
                    Kept::Expired(i) => kept_expired[i].0 == db && kept_expired[i].1 == key,
                }
        };
        match self.table.entry(hash, same, |&(h, _)| h) {
            hashbrown::hash_table::Entry::Occupied(_) => false,
            hashbrown::hash_table::Entry::Vacant(slot) => {
                let kept = if expired {
                    Kept::Expired(self.expired.len())
                } else {
                    Kept::Live(live.len())
                };
                slot.insert((hash, kept));
                if expired {
                    self.expired.push((db, key.to_vec()));
                }
                true
            }
        }
    }
}

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
    let mut builder = Builder::default();
    while let Some(item) = reader.next_item()? {
        let room = (bytes.len() - reader.pos()) / MIN_KEY_BYTES;
        builder.add(item, reader.pos() as u64, room, config, now_ms, progress)?;
    }
    Ok(builder.loaded)
}

/// The dataset an RDB's items make, item by item ([`read_dataset`], and a
/// transfer parsed as it arrives, [`SocketLoad`]).
#[derive(Default)]
struct Builder {
    loaded: Loaded,
    seen: SeenKeys,
    items: usize,
}

impl Builder {
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
            Item::ResizeDb { keys, .. } => {
                let keys = usize::try_from(keys).unwrap_or(usize::MAX).min(room);
                self.seen.reserve(keys);
                loaded.keys.reserve(keys);
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
                let expired = expire_at != 0 && expire_at < now_ms;
                if !self.seen.insert(&loaded.keys, db, &key, expired) {
                    return Err(Corrupt::bad(format!(
                        "RDB has duplicated key '{}' in DB {db}",
                        String::from_utf8_lossy(&key)
                    )));
                }
                key_load_delay(config.key_load_delay, items);
                if expired {
                    loaded.expired += 1;
                } else {
                    loaded.keys.push((db, key, value, expire_at, hints));
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
    /// A partial item is retried once `pending` holds this many bytes: a
    /// large value arriving in many reads is parsed a bounded number of
    /// times, not once per read.
    retry_at: usize,
    /// The EOF opcode (and checksum) was read: the dataset is complete.
    done: bool,
}

impl SocketLoad {
    pub(crate) fn new(config: &Config, now_ms: u64) -> SocketLoad {
        SocketLoad {
            config: config.clone(),
            now_ms,
            builder: Builder::default(),
            pending: Vec::new(),
            parsed: 0,
            at: None,
            retry_at: 0,
            done: false,
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

    /// Takes `bytes` of the transfer and parses every item now complete;
    /// `last`: nothing follows them (a short item is then an error).
    pub(crate) fn feed(&mut self, bytes: &[u8], last: bool, progress: Option<&Loading>) -> Result<(), Corrupt> {
        if self.done {
            self.pending.extend_from_slice(bytes);
            return Ok(());
        }
        self.pending.extend_from_slice(bytes);
        if self.pending.len() < self.retry_at && !last {
            return Ok(());
        }
        let mut at = match self.at {
            Some(at) => at,
            None => {
                if self.pending.len() < HEADER_LEN && !last {
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
                    Err(Corrupt::ShortRead) if !last => break Ok(()),
                    Err(e) => break Err(e),
                }
            }
        };
        self.at = Some(at);
        self.pending.drain(..used);
        self.parsed += used as u64;
        self.retry_at = self.pending.len().saturating_mul(2);
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
                    loaded.keys.len(),
                    loaded.expired,
                    loaded.empty_skipped
                );
            } else {
                tracing::info!(
                    "Done loading RDB, keys loaded: {}, keys expired: {}.",
                    loaded.keys.len(),
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
