//! Whole RDB files: header `REDIS0010`, aux fields as Redis 7.0.15 writes
//! them, function libraries (FUNCTION2), databases (SELECTDB, RESIZEDB,
//! EXPIRETIME_MS), EOF and the CRC-64 (0 with `rdbchecksum no`, and a 0
//! is not checked on load, as Redis).
//!
//! [`Writer`] is fed key by key over any `impl Write` (a snapshot slices
//! its walk of the keyspace; it holds no lock itself, so a background
//! thread may drive it). [`Reader`] yields one [`Item`] at a time, so
//! loading can be sliced too.

use std::io::Write;

use super::codec::{Corrupt, Input, Out, Result, RDB_VERSION};
use super::crc64::crc64;
use super::value::{self, Encodings};
use super::{opcodes, SaveError};
use crate::store::{Value, ValueRef};

/// The magic at the start of a file.
const MAGIC: &[u8] = b"REDIS";
/// The version's digits after the magic.
const VERSION_DIGITS: usize = 4;
/// The first version with a checksum after EOF.
const FIRST_CHECKSUM_VERSION: u16 = 5;

/// The largest buffer a [`Writer`] keeps for the next key: one grown by a
/// big value is dropped, so a background save does not hold its size.
const KEPT_BUFFER_BYTES: usize = 64 * 1024;

/// `buf`, to keep for reuse, unless it grew past [`KEPT_BUFFER_BYTES`].
fn kept(buf: Vec<u8>) -> Vec<u8> {
    if buf.capacity() > KEPT_BUFFER_BYTES {
        Vec::new()
    } else {
        buf
    }
}

/// A function library: the FUNCTION2 opcode and the library's code.
pub(crate) fn put_function(out: &mut Out, code: &[u8]) {
    out.put_u8(opcodes::FUNCTION2);
    out.put_string(code);
}

/// An aux field's value: Redis writes numbers through its string encoding.
pub(crate) enum AuxValue<'a> {
    Str(&'a str),
    Int(i64),
}

/// How a file is written (from the directives).
#[derive(Clone, Copy, Debug)]
pub(crate) struct WriteOptions {
    /// `rdbcompression`.
    pub(crate) compress: bool,
    /// `rdbchecksum`.
    pub(crate) checksum: bool,
    pub(crate) encodings: Encodings,
    /// The keys' LRU/LFU hints to write (from `maxmemory-policy`).
    pub(crate) hints: HintPolicy,
}

/// Which access hint each key gets (Redis's `rdbSaveKeyValuePair`): the
/// IDLE opcode with the seconds idle under an LRU policy, the FREQ opcode
/// with the decayed counter under an LFU one, none under the others.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HintPolicy {
    None,
    /// Idle times measured at `now_ms` (the save's start).
    Lru {
        now_ms: u64,
    },
    /// Counters decayed as `mode` says at `now_ms`.
    Lfu {
        mode: crate::store::access::Mode,
        now_ms: u64,
    },
}

/// Writes an RDB file key by key (see the module docs).
pub(crate) struct Writer<W: Write> {
    sink: W,
    crc: u64,
    options: WriteOptions,
    /// The database of the last SELECTDB written.
    db: Option<usize>,
    /// A key's record and its value's encoding, kept from key to key so
    /// that writing a key allocates nothing once they have grown.
    record: Vec<u8>,
    body: Vec<u8>,
}

impl<W: Write> Writer<W> {
    /// Writes the header and `aux` fields (in order, as Redis: redis-ver,
    /// redis-bits, ctime, used-mem, aof-base).
    pub(crate) fn start(
        sink: W,
        options: WriteOptions,
        aux: &[(&str, AuxValue<'_>)],
    ) -> std::result::Result<Self, SaveError> {
        let mut w = Writer {
            sink,
            crc: 0,
            options,
            db: None,
            record: Vec::new(),
            body: Vec::new(),
        };
        let mut out = w.out();
        out.put_bytes(format!("REDIS{RDB_VERSION:04}").as_bytes());
        for (k, v) in aux {
            out.put_u8(opcodes::AUX);
            out.put_string(k.as_bytes());
            match v {
                AuxValue::Str(s) => out.put_string(s.as_bytes()),
                AuxValue::Int(i) => out.put_string(i.to_string().as_bytes()),
            }
        }
        w.emit(out)?;
        Ok(w)
    }

    fn out(&self) -> Out {
        Out::new(self.options.compress)
    }

    /// An [`Out`] over `buf` emptied (a buffer kept for reuse).
    fn reuse(&self, mut buf: Vec<u8>) -> Out {
        buf.clear();
        Out {
            buf,
            compress: self.options.compress,
        }
    }

    fn emit(&mut self, out: Out) -> std::result::Result<(), SaveError> {
        self.emit_bytes(&out.buf)
    }

    fn emit_bytes(&mut self, bytes: &[u8]) -> std::result::Result<(), SaveError> {
        if self.options.checksum {
            self.crc = crc64(self.crc, bytes);
        }
        self.sink.write_all(bytes)?;
        Ok(())
    }

    /// A function library's code.
    pub(crate) fn function(&mut self, code: &[u8]) -> std::result::Result<(), SaveError> {
        let mut out = self.out();
        put_function(&mut out, code);
        self.emit(out)
    }

    /// Starts database `db` with its resize hints (keys, keys with a TTL).
    pub(crate) fn begin_db(&mut self, db: usize, keys: u64, expires: u64) -> std::result::Result<(), SaveError> {
        let mut out = self.out();
        out.put_u8(opcodes::SELECTDB);
        out.put_len(db as u64);
        out.put_u8(opcodes::RESIZEDB);
        out.put_len(keys);
        out.put_len(expires);
        self.db = Some(db);
        self.emit(out)
    }

    /// One key of database `db` (SELECTDB first when it is another one
    /// than the last key's); `expire_at` in unix ms, 0 for none; `access`
    /// its access word (written as [`HintPolicy`] says).
    pub(crate) fn key(
        &mut self,
        db: usize,
        key: &[u8],
        value: ValueRef<'_>,
        expire_at: u64,
        access: u32,
    ) -> std::result::Result<(), SaveError> {
        let record = std::mem::take(&mut self.record);
        let mut out = self.reuse(record);
        if self.db != Some(db) {
            out.put_u8(opcodes::SELECTDB);
            out.put_len(db as u64);
            self.db = Some(db);
        }
        if expire_at != 0 {
            out.put_u8(opcodes::EXPIRETIME_MS);
            out.put_ms(expire_at as i64);
        }
        match self.options.hints {
            HintPolicy::None => {}
            HintPolicy::Lru { now_ms } => {
                out.put_u8(opcodes::IDLE);
                out.put_len(crate::store::access::idle_ms(access, now_ms) / 1000);
            }
            HintPolicy::Lfu { mode, now_ms } => {
                out.put_u8(opcodes::FREQ);
                out.put_u8(crate::store::access::lfu_decayed(access, mode, now_ms));
            }
        }
        // The value writer puts the type byte first, and Redis writes the
        // key between the type and the value: write the value apart.
        let body = std::mem::take(&mut self.body);
        let mut body = self.reuse(body);
        value::write(&mut body, value, &self.options.encodings)?;
        out.put_u8(body.buf[0]);
        out.put_string(key);
        out.put_bytes(&body.buf[1..]);
        self.body = kept(body.buf);
        self.emit_bytes(&out.buf)?;
        self.record = kept(out.buf);
        Ok(())
    }

    /// Measures the access hints at `now_ms` from here on: a walk that
    /// runs while keys are touched sets the clock of each slice, so that
    /// no key's last access is after the time it is measured at (it would
    /// read as a wrapped clock: 194 days idle, a fully decayed counter).
    pub(crate) fn set_hint_clock(&mut self, now: u64) {
        match &mut self.options.hints {
            HintPolicy::None => {}
            HintPolicy::Lru { now_ms } | HintPolicy::Lfu { now_ms, .. } => *now_ms = now,
        }
    }

    /// The sink, for a caller that drains what was written so far (a
    /// background save empties its buffer into the file between slices).
    pub(crate) fn sink_mut(&mut self) -> &mut W {
        &mut self.sink
    }

    /// EOF and the checksum; hands back the sink.
    pub(crate) fn finish(mut self) -> std::result::Result<W, SaveError> {
        let mut out = self.out();
        out.put_u8(opcodes::EOF);
        self.emit(out)?;
        let crc = if self.options.checksum { self.crc } else { 0 };
        self.sink.write_all(&crc.to_le_bytes())?;
        self.sink.flush()?;
        Ok(self.sink)
    }
}

/// One thing a file holds.
#[derive(Debug)]
pub(crate) enum Item {
    /// An aux field.
    Aux(Vec<u8>, Vec<u8>),
    /// A function library's code.
    Function(Vec<u8>),
    /// A database's resize hints: `keys` is the count of its keys the
    /// writer announced (a hint to pre-size tables with, not trusted as a
    /// fact); the count of keys with a deadline is read and dropped.
    ResizeDb { db: usize, keys: u64 },
    /// A key, with the file's LRU/LFU hints when it has them.
    Key {
        db: usize,
        key: Vec<u8>,
        value: Value,
        expire_at: u64,
        hints: AccessHints,
    },
    /// A key whose value is empty (Redis skips it with a log line).
    EmptyKey { db: usize, key: Vec<u8> },
}

/// A key's LRU/LFU hints in a file (the IDLE and FREQ opcodes), applied
/// as the loading server's policy says ([`AccessHints::word`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct AccessHints {
    /// Seconds since the last access (written under an LRU policy).
    pub idle_secs: Option<u64>,
    /// The LFU counter (written under an LFU policy).
    pub freq: Option<u8>,
}

impl AccessHints {
    /// The access word to give the key, if the hints apply under the
    /// loading server's policy (Redis's `objectSetLRUOrLFU`: the idle
    /// time under LRU or no policy, the counter under LFU).
    pub(crate) fn word(self, lfu: bool, now_ms: u64) -> Option<u32> {
        match (lfu, self.idle_secs, self.freq) {
            (false, Some(idle), _) => Some(crate::store::access::from_idle(idle, now_ms)),
            (true, _, Some(freq)) => Some(crate::store::access::lfu_word(freq, now_ms)),
            _ => None,
        }
    }
}

/// Reads an RDB file item by item (see the module docs).
pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
    input: Input<'a>,
    version: u16,
    db: usize,
    encodings: Encodings,
    /// `rdbchecksum` on the loading side.
    verify: bool,
    done: bool,
    /// The CRC-64 of the file's bytes before `bytes` (a reader resumed in
    /// the middle of a transfer, [`Reader::resume`]): the checksum at EOF
    /// covers them too.
    crc_before: u64,
}

/// Where a [`Reader`] stopped between two items, to resume on the bytes
/// that follow (a transfer parsed as it arrives).
#[derive(Clone, Copy, Debug)]
pub(crate) struct ReaderAt {
    pub(crate) version: u16,
    pub(crate) db: usize,
    pub(crate) encodings: Encodings,
    pub(crate) verify: bool,
    /// The CRC-64 of every byte before the resumed reader's first.
    pub(crate) crc: u64,
}

impl<'a> Reader<'a> {
    /// Checks the header (magic and a version up to 10).
    pub(crate) fn open(bytes: &'a [u8], encodings: Encodings, verify: bool) -> Result<Reader<'a>> {
        let mut input = Input::new(bytes);
        let head = input
            .bytes(MAGIC.len() + VERSION_DIGITS)
            .map_err(|_| Corrupt::bad("Wrong signature trying to load DB from file"))?;
        if &head[..MAGIC.len()] != MAGIC {
            return Err(Corrupt::bad("Wrong signature trying to load DB from file"));
        }
        let digits = std::str::from_utf8(&head[MAGIC.len()..]).ok();
        let version = digits.and_then(|d| d.parse::<u16>().ok()).unwrap_or(0);
        if !(1..=RDB_VERSION).contains(&version) {
            return Err(Corrupt::bad(format!("Can't handle RDB format version {version}")));
        }
        Ok(Reader {
            bytes,
            input,
            version,
            db: 0,
            encodings,
            verify,
            done: false,
            crc_before: 0,
        })
    }

    /// A reader of the bytes that follow an item boundary `at` describes.
    pub(crate) fn resume(bytes: &'a [u8], at: ReaderAt) -> Reader<'a> {
        Reader {
            bytes,
            input: Input::new(bytes),
            version: at.version,
            db: at.db,
            encodings: at.encodings,
            verify: at.verify,
            done: false,
            crc_before: at.crc,
        }
    }

    /// Where this reader stands (after the header, or after an item), for
    /// [`Reader::resume`]: `crc` covers the bytes before this reader's.
    pub(crate) fn at(&self, crc: u64) -> ReaderAt {
        ReaderAt {
            version: self.version,
            db: self.db,
            encodings: self.encodings,
            verify: self.verify,
            crc,
        }
    }

    /// Bytes of the file read so far.
    pub(crate) fn pos(&self) -> usize {
        self.input.pos()
    }

    /// After [`Corrupt::ShortRead`]: where the read that failed started
    /// and the length of input it needs ([`Input::short`]).
    pub(crate) fn short(&self) -> (usize, usize) {
        self.input.short()
    }

    /// The next item, or `None` after EOF (and the checksum's check).
    pub(crate) fn next_item(&mut self) -> Result<Option<Item>> {
        if self.done {
            return Ok(None);
        }
        let mut expire_at: u64 = 0;
        let mut hints = AccessHints::default();
        loop {
            let op = self.input.u8()?;
            match op {
                opcodes::EXPIRETIME => {
                    expire_at = (self.input.secs()? as i64 as u64).saturating_mul(1000);
                }
                opcodes::EXPIRETIME_MS => {
                    // Before version 9 Redis wrote host order, which on
                    // the little-endian hosts coordis runs on is the same.
                    expire_at = self.input.ms()?.max(0) as u64;
                }
                // LRU/LFU hints for the key that follows.
                opcodes::FREQ => {
                    hints.freq = Some(self.input.u8()?);
                }
                opcodes::IDLE => {
                    hints.idle_secs = Some(self.input.len()?);
                }
                opcodes::EOF => {
                    self.done = true;
                    if self.version >= FIRST_CHECKSUM_VERSION {
                        let at = self.input.pos();
                        let stored = self.input.u64_le()?;
                        if self.verify && stored != 0 {
                            let computed = crc64(self.crc_before, &self.bytes[..at]);
                            if computed != stored {
                                return Err(Corrupt::Checksum {
                                    expected: computed,
                                    got: stored,
                                });
                            }
                        }
                    }
                    return Ok(None);
                }
                opcodes::SELECTDB => {
                    self.db = self.input.len_usize()?;
                }
                opcodes::RESIZEDB => {
                    // The key and expire counts.
                    let keys = self.input.len()?;
                    self.input.len()?;
                    return Ok(Some(Item::ResizeDb { db: self.db, keys }));
                }
                opcodes::AUX => {
                    let k = self.input.string()?.into_owned();
                    let v = self.input.string()?.into_owned();
                    return Ok(Some(Item::Aux(k, v)));
                }
                opcodes::MODULE_AUX => {
                    return Err(Corrupt::bad("Module aux data cannot be loaded: coordis has no modules"))
                }
                opcodes::FUNCTION => return Err(Corrupt::bad("Pre-release function format not supported.")),
                opcodes::FUNCTION2 => {
                    return Ok(Some(Item::Function(self.input.string()?.into_owned())));
                }
                rdb_type => {
                    let key = self.input.string()?.into_owned();
                    return match value::read(&mut self.input, rdb_type, &self.encodings, false) {
                        Ok(value) => Ok(Some(Item::Key {
                            db: self.db,
                            key,
                            value,
                            expire_at,
                            hints,
                        })),
                        Err(Corrupt::EmptyKey) => Ok(Some(Item::EmptyKey { db: self.db, key })),
                        Err(e) => Err(e),
                    };
                }
            }
        }
    }
}
