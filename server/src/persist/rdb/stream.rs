//! The stream value in RDB, as Redis 7.0.15 writes and reads it: written as
//! `RDB_TYPE_STREAM_LISTPACKS_2`; read as that and as the older
//! `RDB_TYPE_STREAM_LISTPACKS` (version 1, no first ID, deleted-entry ID or
//! entries-added counter: those are derived as Redis derives them). 7.0.15
//! knows no later stream type.
//!
//! The layout (after the type byte): the number of nodes, then per node its
//! master ID (16 bytes, big-endian ms then seq) and its listpack; then the
//! length, the last ID, the first ID, the greatest deleted ID, the entries
//! added; then the groups, each with its name, last ID, entries read
//! (`u64::MAX` when unknown), its PEL (raw IDs with delivery time in ms and
//! count) and its consumers (name, seen time, the IDs they hold).
//!
//! A node's listpack is Redis's: the master entry `[count][deleted]
//! [field count][fields...][0]`, then per entry `[flags][ms delta][seq
//! delta]`, `[field count][field value...]` or, with the master's field
//! names (the `SAMEFIELDS` flag), only the values, then the entry's element
//! count. coordis's nodes split where Redis's do ([`crate::store::stream`]),
//! so the nodes written are the ones Redis would hold.
//!
//! Every read is checked: a truncated or inconsistent value is an
//! [`Error`], never a panic.

// The value codec that dispatches on the type byte (DUMP/RESTORE, SAVE,
// loading) calls in here; until it does, only the tests do.
#![cfg_attr(not(test), allow(dead_code))]

use crate::store::stream::{Consumer, Group, LoadedEntry, LoadedMeta, Pending, Stream, StreamId};
use bytes::Bytes;

/// `RDB_TYPE_STREAM_LISTPACKS`: stream version 1 (Redis 5 and 6).
pub(crate) const RDB_TYPE_STREAM_LISTPACKS: u8 = 15;
/// `RDB_TYPE_STREAM_LISTPACKS_2`: what Redis 7.0 writes.
pub(crate) const RDB_TYPE_STREAM_LISTPACKS_2: u8 = 19;

/// Entry flag bits in a node's listpack (Redis's `STREAM_ITEM_FLAG_*`).
const FLAG_DELETED: i64 = 1;
const FLAG_SAME_FIELDS: i64 = 2;
/// The element ending the master entry.
const MASTER_END: i64 = 0;
/// An unknown entries-read counter (Redis's `SCG_INVALID_ENTRIES_READ`, -1).
const ENTRIES_READ_UNKNOWN: u64 = u64::MAX;
/// Bytes of a raw stream ID (rax keys, PEL entries).
const RAW_ID_LEN: usize = 16;

/// What is wrong with a stream value being read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Error(pub(crate) &'static str);

type Result<T> = std::result::Result<T, Error>;

/// The value writer's entry point: the type byte, then the value
/// ([`write`]). Its strings are not LZF-compressed yet (valid, and loaded
/// by Redis; not Redis's bytes under `rdbcompression yes`).
pub(crate) fn save(out: &mut super::codec::Out, stream: &Stream) -> std::result::Result<(), super::SaveError> {
    out.put_u8(RDB_TYPE_STREAM_LISTPACKS_2);
    let mut value = Vec::new();
    write(&mut value, stream);
    out.put_bytes(&value);
    Ok(())
}

/// The value reader's entry point: a stream of type `rdb_type` (the type
/// byte already read). Every packed part is validated whatever `deep`
/// says (`sanitize-dump-payload`).
pub(crate) fn load(input: &mut super::codec::Input<'_>, rdb_type: u8, _deep: bool) -> super::codec::Result<Stream> {
    let rest = input.rest();
    let mut own = prim::Input::new(rest);
    let stream = read(&mut own, rdb_type).map_err(|e| super::codec::Corrupt::bad(e.0))?;
    input.bytes(rest.len() - own.rest().len())?;
    Ok(stream)
}

/// Writes `stream` as an `RDB_TYPE_STREAM_LISTPACKS_2` value (without the
/// type byte, which is [`RDB_TYPE_STREAM_LISTPACKS_2`]).
pub(crate) fn write(out: &mut Vec<u8>, stream: &Stream) {
    prim::save_len(out, stream.nodes() as u64);
    for node in stream.raw_nodes() {
        prim::save_string(out, &raw_id(node.master_id));
        prim::save_string(out, &node_listpack(&node));
    }
    prim::save_len(out, stream.len());
    for id in [stream.last_id, stream.first_id, stream.max_deleted] {
        prim::save_len(out, id.ms);
        prim::save_len(out, id.seq);
    }
    prim::save_len(out, stream.entries_added);
    prim::save_len(out, stream.group_count() as u64);
    for (name, group) in stream.groups() {
        prim::save_string(out, name);
        prim::save_len(out, group.last_id.ms);
        prim::save_len(out, group.last_id.seq);
        prim::save_len(out, group.entries_read.unwrap_or(ENTRIES_READ_UNKNOWN));
        prim::save_len(out, group.pending.len() as u64);
        for (id, pending) in &group.pending {
            out.extend_from_slice(&raw_id(*id));
            out.extend_from_slice(&pending.delivered_at.to_le_bytes());
            prim::save_len(out, pending.deliveries);
        }
        prim::save_len(out, group.consumers.len() as u64);
        for (name, consumer) in &group.consumers {
            prim::save_string(out, name);
            out.extend_from_slice(&consumer.seen_at.to_le_bytes());
            prim::save_len(out, consumer.pending.len() as u64);
            for id in &consumer.pending {
                out.extend_from_slice(&raw_id(*id));
            }
        }
    }
}

/// A node's listpack, element for element as Redis builds it.
fn node_listpack(node: &crate::store::stream::RawNode<'_>) -> Vec<u8> {
    let mut lp = prim::Listpack::default();
    lp.int(node.live as i64);
    lp.int(node.deleted as i64);
    let master: Vec<&[u8]> = node.master_fields().collect();
    lp.int(master.len() as i64);
    master.iter().for_each(|f| lp.string(f));
    lp.int(MASTER_END);
    for e in node.entries() {
        let mut flags = 0;
        if e.deleted {
            flags |= FLAG_DELETED;
        }
        if e.same_fields {
            flags |= FLAG_SAME_FIELDS;
        }
        lp.int(flags);
        // Deltas as Redis computes them: unsigned differences read as
        // signed (a later ms with a lower seq gives a negative seq delta).
        lp.int(e.entry.id.ms.wrapping_sub(node.master_id.ms) as i64);
        lp.int(e.entry.id.seq.wrapping_sub(node.master_id.seq) as i64);
        let pairs = e.entry.len();
        if !e.same_fields {
            lp.int(pairs as i64);
        }
        for (field, value) in e.entry.fields() {
            if !e.same_fields {
                lp.string(field);
            }
            lp.string(value);
        }
        let elements = if e.same_fields { pairs + 3 } else { pairs * 2 + 4 };
        lp.int(elements as i64);
    }
    lp.finish()
}

/// A stream ID as Redis keys its radix trees: big-endian ms, then seq.
fn raw_id(id: StreamId) -> [u8; RAW_ID_LEN] {
    let mut raw = [0; RAW_ID_LEN];
    raw[..8].copy_from_slice(&id.ms.to_be_bytes());
    raw[8..].copy_from_slice(&id.seq.to_be_bytes());
    raw
}

fn parse_raw_id(raw: &[u8]) -> Result<StreamId> {
    let raw: &[u8; RAW_ID_LEN] = raw
        .try_into()
        .map_err(|_| Error("stream node key is not a stream ID"))?;
    let (ms, seq) = raw.split_at(8);
    Ok(StreamId::new(
        u64::from_be_bytes(ms.try_into().expect("8 bytes")),
        u64::from_be_bytes(seq.try_into().expect("8 bytes")),
    ))
}

/// Reads a stream value of type `rdb_type` ([`RDB_TYPE_STREAM_LISTPACKS`]
/// or [`RDB_TYPE_STREAM_LISTPACKS_2`]) from `input`.
pub(crate) fn read(input: &mut prim::Input<'_>, rdb_type: u8) -> Result<Stream> {
    let v2 = match rdb_type {
        RDB_TYPE_STREAM_LISTPACKS => false,
        RDB_TYPE_STREAM_LISTPACKS_2 => true,
        _ => return Err(Error("not a stream type")),
    };
    let mut stream = Stream::default();
    let nodes = input.len()?;
    for _ in 0..nodes {
        let master_id = parse_raw_id(&input.string()?)?;
        let lp = input.string()?;
        load_node(&mut stream, master_id, &lp)?;
    }
    let length = input.len()?;
    let last_id = StreamId::new(input.len()?, input.len()?);
    let meta = if v2 {
        let first_id = StreamId::new(input.len()?, input.len()?);
        let max_deleted = StreamId::new(input.len()?, input.len()?);
        LoadedMeta {
            length,
            last_id,
            first_id,
            max_deleted,
            entries_added: input.len()?,
        }
    } else {
        // As Redis migrates a version-1 stream: every entry counted as
        // added, no tombstone known, the first live entry's ID.
        LoadedMeta {
            length,
            last_id,
            first_id: stream.first_live_id(),
            max_deleted: StreamId::ZERO,
            entries_added: length,
        }
    };
    stream.finish_load(meta).map_err(Error)?;
    let groups = input.len()?;
    for _ in 0..groups {
        let name = input.string()?;
        let last_id = StreamId::new(input.len()?, input.len()?);
        let entries_read = if v2 {
            Some(input.len()?).filter(|&n| n != ENTRIES_READ_UNKNOWN)
        } else {
            stream.entries_up_to(last_id)
        };
        let mut group = Group::new(last_id, entries_read);
        // The PEL first, its owners resolved by the consumers after it.
        let mut unowned = std::collections::BTreeMap::new();
        for _ in 0..input.len()? {
            let id = parse_raw_id(input.bytes(RAW_ID_LEN)?)?;
            let delivered_at = input.u64_le()?;
            let deliveries = input.len()?;
            if unowned.insert(id, (delivered_at, deliveries)).is_some() {
                return Err(Error("duplicated global PEL entry"));
            }
        }
        for _ in 0..input.len()? {
            let consumer_name = Bytes::from(input.string()?);
            let mut consumer = Consumer {
                seen_at: input.u64_le()?,
                ..Consumer::default()
            };
            for _ in 0..input.len()? {
                let id = parse_raw_id(input.bytes(RAW_ID_LEN)?)?;
                let Some((delivered_at, deliveries)) = unowned.remove(&id) else {
                    return Err(Error("consumer PEL entry not in the group's PEL, or held twice"));
                };
                consumer.pending.insert(id);
                group.pending.insert(
                    id,
                    Pending {
                        consumer: consumer_name.clone(),
                        delivered_at,
                        deliveries,
                    },
                );
            }
            if group.consumers.insert(consumer_name, consumer).is_some() {
                return Err(Error("duplicate stream consumer"));
            }
        }
        if !unowned.is_empty() {
            return Err(Error("stream group PEL entry without consumer"));
        }
        if !stream.add_group(&name, group) {
            return Err(Error("duplicated consumer group name"));
        }
    }
    Ok(stream)
}

/// Decodes one node's listpack into `stream`.
fn load_node(stream: &mut Stream, master_id: StreamId, lp: &[u8]) -> Result<()> {
    let elements = prim::listpack_elements(lp)?;
    let mut it = elements.iter();
    let mut next_int = || -> Result<i64> {
        it.next()
            .ok_or(Error("stream listpack ends early"))?
            .as_int()
            .ok_or(Error("stream listpack: an integer expected"))
    };
    let live = next_int()?;
    let deleted = next_int()?;
    let master_count = next_int()?;
    let count = |n: i64| usize::try_from(n).map_err(|_| Error("stream listpack: a negative count"));
    let master_count = count(master_count)?;
    let rest = &elements[3..];
    if rest.len() < master_count + 1 {
        return Err(Error("stream listpack ends early"));
    }
    let master: Vec<&[u8]> = rest[..master_count].iter().map(|e| e.as_bytes()).collect();
    if rest[master_count].as_int() != Some(MASTER_END) {
        return Err(Error("stream listpack: master entry not terminated"));
    }
    let mut at = master_count + 1;
    let mut entries = vec![];
    let (mut seen_live, mut seen_deleted) = (0, 0);
    while at < rest.len() {
        let int_at = |i: usize| -> Result<i64> {
            rest.get(i)
                .ok_or(Error("stream listpack ends early"))?
                .as_int()
                .ok_or(Error("stream listpack: an integer expected"))
        };
        let flags = int_at(at)?;
        let ms = master_id.ms.wrapping_add(int_at(at + 1)? as u64);
        let seq = master_id.seq.wrapping_add(int_at(at + 2)? as u64);
        let same = flags & FLAG_SAME_FIELDS != 0;
        let (pairs, fields_at) = if same {
            (master_count, at + 3)
        } else {
            (count(int_at(at + 3)?)?, at + 4)
        };
        let stored = if same { pairs } else { pairs * 2 };
        let end = fields_at
            .checked_add(stored)
            .filter(|&end| end < rest.len())
            .ok_or(Error("stream listpack ends early"))?;
        let mut fields = Vec::with_capacity(pairs * 2);
        for i in 0..pairs {
            if same {
                fields.push(master[i]);
                fields.push(rest[fields_at + i].as_bytes());
            } else {
                fields.push(rest[fields_at + 2 * i].as_bytes());
                fields.push(rest[fields_at + 2 * i + 1].as_bytes());
            }
        }
        let elements_count = if same { pairs + 3 } else { pairs * 2 + 4 };
        if int_at(end)? != elements_count as i64 {
            return Err(Error("stream listpack: entry element count mismatch"));
        }
        let deleted = flags & FLAG_DELETED != 0;
        if deleted {
            seen_deleted += 1;
        } else {
            seen_live += 1;
        }
        entries.push(LoadedEntry {
            id: StreamId::new(ms, seq),
            deleted,
            fields,
        });
        at = end + 1;
    }
    if (seen_live, seen_deleted) != (live, deleted) {
        return Err(Error("stream listpack: entry counts do not match the master entry"));
    }
    stream.load_node(master_id, &master, &entries).map_err(Error)
}

/// The RDB and listpack primitives the stream value needs: length and
/// string encodings, listpack elements. (The general RDB codec has its
/// own; this is the subset, kept here until they are shared.)
pub(crate) mod prim {
    use super::{Error, Result};

    /// Length encodings (`RDB_6BITLEN`, `RDB_14BITLEN`, `RDB_32BITLEN`,
    /// `RDB_64BITLEN`) and special string encodings (`RDB_ENCVAL`).
    const LEN_6: u8 = 0;
    const LEN_14: u8 = 1;
    const LEN_32: u8 = 0x80;
    const LEN_64: u8 = 0x81;
    const ENCVAL: u8 = 3;
    const ENC_INT8: u8 = 0;
    const ENC_INT16: u8 = 1;
    const ENC_INT32: u8 = 2;
    const ENC_LZF: u8 = 3;
    /// Strings up to this long may be written as integers (`rdbSaveRawString`).
    const INT_ENCODABLE_MAX: usize = 11;

    pub(crate) fn save_len(out: &mut Vec<u8>, n: u64) {
        if n < 1 << 6 {
            out.push((LEN_6 << 6) | n as u8);
        } else if n < 1 << 14 {
            out.push((LEN_14 << 6) | (n >> 8) as u8);
            out.push(n as u8);
        } else if n <= u32::MAX as u64 {
            out.push(LEN_32);
            out.extend_from_slice(&(n as u32).to_be_bytes());
        } else {
            out.push(LEN_64);
            out.extend_from_slice(&n.to_be_bytes());
        }
    }

    /// `rdbSaveRawString` without compression: an integer encoding when
    /// the string is a short canonical integer, else length and bytes.
    pub(crate) fn save_string(out: &mut Vec<u8>, s: &[u8]) {
        if s.len() <= INT_ENCODABLE_MAX {
            if let Some(v) = crate::store::num::parse_i64(s) {
                if let Ok(v) = i8::try_from(v) {
                    out.extend_from_slice(&[(ENCVAL << 6) | ENC_INT8, v as u8]);
                    return;
                } else if let Ok(v) = i16::try_from(v) {
                    out.push((ENCVAL << 6) | ENC_INT16);
                    out.extend_from_slice(&v.to_le_bytes());
                    return;
                } else if let Ok(v) = i32::try_from(v) {
                    out.push((ENCVAL << 6) | ENC_INT32);
                    out.extend_from_slice(&v.to_le_bytes());
                    return;
                }
            }
        }
        save_len(out, s.len() as u64);
        out.extend_from_slice(s);
    }

    /// A cursor over RDB bytes; every read is bounds-checked.
    pub(crate) struct Input<'a> {
        buf: &'a [u8],
        at: usize,
    }

    impl<'a> Input<'a> {
        pub(crate) fn new(buf: &'a [u8]) -> Input<'a> {
            Input { buf, at: 0 }
        }

        /// Bytes not read yet.
        pub(crate) fn rest(&self) -> &'a [u8] {
            &self.buf[self.at..]
        }

        pub(crate) fn bytes(&mut self, n: usize) -> Result<&'a [u8]> {
            let end = self
                .at
                .checked_add(n)
                .filter(|&e| e <= self.buf.len())
                .ok_or(Error("short read"))?;
            let out = &self.buf[self.at..end];
            self.at = end;
            Ok(out)
        }

        fn byte(&mut self) -> Result<u8> {
            Ok(self.bytes(1)?[0])
        }

        pub(crate) fn u64_le(&mut self) -> Result<u64> {
            Ok(u64::from_le_bytes(self.bytes(8)?.try_into().expect("8 bytes")))
        }

        /// A length, or the special encoding it announces (`Err(kind)`).
        fn len_or_special(&mut self) -> Result<std::result::Result<u64, u8>> {
            let first = self.byte()?;
            Ok(match first >> 6 {
                0 => Ok((first & 0x3f) as u64),
                1 => Ok((((first & 0x3f) as u64) << 8) | self.byte()? as u64),
                2 if first == LEN_32 => Ok(u32::from_be_bytes(self.bytes(4)?.try_into().expect("4 bytes")) as u64),
                2 if first == LEN_64 => Ok(u64::from_be_bytes(self.bytes(8)?.try_into().expect("8 bytes"))),
                3 => Err(first & 0x3f),
                _ => return Err(Error("unknown length encoding")),
            })
        }

        pub(crate) fn len(&mut self) -> Result<u64> {
            self.len_or_special()?.map_err(|_| Error("a length expected"))
        }

        /// A string in any of its encodings (integer, LZF, plain).
        pub(crate) fn string(&mut self) -> Result<Vec<u8>> {
            match self.len_or_special()? {
                Ok(n) => Ok(self
                    .bytes(usize::try_from(n).map_err(|_| Error("string too long"))?)?
                    .to_vec()),
                Err(ENC_INT8) => Ok((self.byte()? as i8).to_string().into_bytes()),
                Err(ENC_INT16) => Ok(i16::from_le_bytes(self.bytes(2)?.try_into().expect("2 bytes"))
                    .to_string()
                    .into_bytes()),
                Err(ENC_INT32) => Ok(i32::from_le_bytes(self.bytes(4)?.try_into().expect("4 bytes"))
                    .to_string()
                    .into_bytes()),
                Err(ENC_LZF) => {
                    let compressed = self.len()?;
                    let plain = self.len()?;
                    let data = self.bytes(usize::try_from(compressed).map_err(|_| Error("string too long"))?)?;
                    lzf_decompress(data, usize::try_from(plain).map_err(|_| Error("string too long"))?)
                }
                Err(_) => Err(Error("unknown string encoding")),
            }
        }
    }

    /// LZF decompression (liblzf's format, as Redis writes it); the output
    /// must be exactly `len` bytes.
    fn lzf_decompress(data: &[u8], len: usize) -> Result<Vec<u8>> {
        const BAD: Error = Error("invalid LZF data");
        let mut out = Vec::with_capacity(len.min(data.len().saturating_mul(256)));
        let mut i = 0;
        while i < data.len() {
            let ctrl = data[i] as usize;
            i += 1;
            if ctrl < 32 {
                let n = ctrl + 1;
                let lit = data.get(i..i + n).ok_or(BAD)?;
                out.extend_from_slice(lit);
                i += n;
            } else {
                let mut n = ctrl >> 5;
                if n == 7 {
                    n += *data.get(i).ok_or(BAD)? as usize;
                    i += 1;
                }
                let back = ((ctrl & 0x1f) << 8) + *data.get(i).ok_or(BAD)? as usize + 1;
                i += 1;
                let from = out.len().checked_sub(back).ok_or(BAD)?;
                for k in 0..n + 2 {
                    let b = out[from + k];
                    out.push(b);
                }
            }
            if out.len() > len {
                return Err(BAD);
            }
        }
        if out.len() != len {
            return Err(BAD);
        }
        Ok(out)
    }

    /// Listpack element encodings (`LP_ENCODING_*`).
    const LP_7BIT_UINT_MAX: u8 = 0x7f;
    const LP_6BIT_STR: u8 = 0x80;
    const LP_13BIT_INT: u8 = 0xc0;
    const LP_12BIT_STR: u8 = 0xe0;
    const LP_32BIT_STR: u8 = 0xf0;
    const LP_16BIT_INT: u8 = 0xf1;
    const LP_24BIT_INT: u8 = 0xf2;
    const LP_32BIT_INT: u8 = 0xf3;
    const LP_64BIT_INT: u8 = 0xf4;
    const LP_EOF: u8 = 0xff;
    /// Total bytes (u32) and element count (u16) before the elements.
    const LP_HEADER: usize = 6;
    /// The element count when it does not fit the header's u16.
    const LP_COUNT_UNKNOWN: u16 = u16::MAX;
    /// Strings this long or longer are never stored as integers.
    const LP_INT_STR_MAX: usize = 20;

    /// A listpack being built, element by element, as `lpAppend` encodes.
    #[derive(Default)]
    pub(crate) struct Listpack {
        body: Vec<u8>,
        count: usize,
    }

    /// Bytes of a back-length for an element of `len` bytes (`lpEncodeBacklen`).
    fn push_backlen(out: &mut Vec<u8>, len: usize) {
        let l = len as u64;
        let groups = match l {
            0..=127 => 1,
            128..=16382 => 2,
            16383..=2097150 => 3,
            2097151..=268435454 => 4,
            _ => 5,
        };
        for g in (0..groups).rev() {
            let bits = ((l >> (7 * g)) & 0x7f) as u8;
            out.push(if g == groups - 1 {
                (l >> (7 * g)) as u8
            } else {
                bits | 0x80
            });
        }
    }

    impl Listpack {
        pub(crate) fn int(&mut self, v: i64) {
            let start = self.body.len();
            let b = &mut self.body;
            match v {
                0..=127 => b.push(v as u8),
                -4096..=4095 => {
                    let u = (v as u64) & 0x1fff;
                    b.extend_from_slice(&[(u >> 8) as u8 | LP_13BIT_INT, u as u8]);
                }
                -32768..=32767 => {
                    b.push(LP_16BIT_INT);
                    b.extend_from_slice(&(v as i16).to_le_bytes());
                }
                -8388608..=8388607 => {
                    b.push(LP_24BIT_INT);
                    b.extend_from_slice(&(v as i32).to_le_bytes()[..3]);
                }
                -2147483648..=2147483647 => {
                    b.push(LP_32BIT_INT);
                    b.extend_from_slice(&(v as i32).to_le_bytes());
                }
                _ => {
                    b.push(LP_64BIT_INT);
                    b.extend_from_slice(&v.to_le_bytes());
                }
            }
            let len = self.body.len() - start;
            push_backlen(&mut self.body, len);
            self.count += 1;
        }

        /// A string, stored as an integer when it is one (`lpStringToInt64`).
        pub(crate) fn string(&mut self, s: &[u8]) {
            if s.len() <= LP_INT_STR_MAX {
                if let Some(v) = crate::store::num::parse_i64(s) {
                    return self.int(v);
                }
            }
            let start = self.body.len();
            let b = &mut self.body;
            match s.len() {
                0..=63 => b.push(LP_6BIT_STR | s.len() as u8),
                64..=4095 => b.extend_from_slice(&[LP_12BIT_STR | (s.len() >> 8) as u8, s.len() as u8]),
                _ => {
                    b.push(LP_32BIT_STR);
                    b.extend_from_slice(&(s.len() as u32).to_le_bytes());
                }
            }
            b.extend_from_slice(s);
            let len = self.body.len() - start;
            push_backlen(&mut self.body, len);
            self.count += 1;
        }

        pub(crate) fn finish(self) -> Vec<u8> {
            let total = LP_HEADER + self.body.len() + 1;
            let mut out = Vec::with_capacity(total);
            out.extend_from_slice(&(total as u32).to_le_bytes());
            let count = u16::try_from(self.count).unwrap_or(LP_COUNT_UNKNOWN);
            out.extend_from_slice(&count.to_le_bytes());
            out.extend_from_slice(&self.body);
            out.push(LP_EOF);
            out
        }
    }

    /// A decoded listpack element: its bytes (an integer's as its decimal
    /// text, so a field or value stored as an integer reads back as the
    /// bytes written) and, when stored as one, the integer.
    pub(crate) struct Elem {
        int: Option<i64>,
        text: Vec<u8>,
    }

    impl Elem {
        fn int(v: i64) -> Elem {
            Elem {
                int: Some(v),
                text: v.to_string().into_bytes(),
            }
        }

        fn str(s: &[u8]) -> Elem {
            Elem {
                int: None,
                text: s.to_vec(),
            }
        }

        pub(crate) fn as_int(&self) -> Option<i64> {
            self.int
        }

        pub(crate) fn as_bytes(&self) -> &[u8] {
            &self.text
        }
    }

    /// Every element of a listpack, checked against its header, back
    /// lengths and end.
    pub(crate) fn listpack_elements(lp: &[u8]) -> Result<Vec<Elem>> {
        const BAD: Error = Error("listpack integrity check failed");
        if lp.len() < LP_HEADER + 1 || u32::from_le_bytes(lp[..4].try_into().expect("4 bytes")) as usize != lp.len() {
            return Err(BAD);
        }
        let count = u16::from_le_bytes(lp[4..6].try_into().expect("2 bytes"));
        let mut out = vec![];
        let mut at = LP_HEADER;
        loop {
            let first = *lp.get(at).ok_or(BAD)?;
            if first == LP_EOF {
                break;
            }
            let get = |from: usize, n: usize| lp.get(from..from + n).ok_or(BAD);
            let sign = |v: u64, bits: u32| -> i64 { ((v << (64 - bits)) as i64) >> (64 - bits) };
            let (element, len) = if first <= LP_7BIT_UINT_MAX {
                (Elem::int(first as i64), 1)
            } else if first & 0xc0 == LP_6BIT_STR {
                let n = (first & 0x3f) as usize;
                (Elem::str(get(at + 1, n)?), 1 + n)
            } else if first & 0xe0 == LP_13BIT_INT {
                let v = (((first & 0x1f) as u64) << 8) | *lp.get(at + 1).ok_or(BAD)? as u64;
                (Elem::int(sign(v, 13)), 2)
            } else if first & 0xf0 == LP_12BIT_STR {
                let n = (((first & 0x0f) as usize) << 8) | *lp.get(at + 1).ok_or(BAD)? as usize;
                (Elem::str(get(at + 2, n)?), 2 + n)
            } else {
                let int = |n: usize, bits: u32| -> Result<(Elem, usize)> {
                    let mut raw = [0u8; 8];
                    raw[..n].copy_from_slice(get(at + 1, n)?);
                    Ok((Elem::int(sign(u64::from_le_bytes(raw), bits)), 1 + n))
                };
                match first {
                    LP_16BIT_INT => int(2, 16)?,
                    LP_24BIT_INT => int(3, 24)?,
                    LP_32BIT_INT => int(4, 32)?,
                    LP_64BIT_INT => int(8, 64)?,
                    LP_32BIT_STR => {
                        let n = u32::from_le_bytes(get(at + 1, 4)?.try_into().expect("4 bytes")) as usize;
                        (Elem::str(get(at + 5, n)?), 5 + n)
                    }
                    _ => return Err(BAD),
                }
            };
            let mut backlen = vec![];
            push_backlen(&mut backlen, len);
            if get(at + len, backlen.len())? != backlen.as_slice() {
                return Err(BAD);
            }
            at += len + backlen.len();
            out.push(element);
        }
        if at + 1 != lp.len() || (count != LP_COUNT_UNKNOWN && count as usize != out.len()) {
            return Err(BAD);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::stream::{NodeLimits, Trim};
    use crate::testing::{parse_resp, RawClient, RedisServer, Resp};

    /// The RDB version a DUMP payload carries after the value (Redis 7.0).
    const RDB_VERSION: u16 = 10;
    /// A DUMP payload's trailer: the version (2 bytes) and CRC-64 (8).
    const TRAILER: usize = 10;

    fn reply(c: &mut RawClient, args: &[&[u8]]) -> Resp {
        let raw = c.command_bytes(args).unwrap();
        let (value, _) = parse_resp(&raw).unwrap().unwrap();
        if let Resp::Error(e) = &value {
            panic!(
                "{:?}: {}",
                args.iter().map(|a| String::from_utf8_lossy(a)).collect::<Vec<_>>(),
                String::from_utf8_lossy(e)
            );
        }
        value
    }

    fn run(c: &mut RawClient, words: &str) {
        let args: Vec<&[u8]> = words.split(' ').map(|w| w.as_bytes()).collect();
        reply(c, &args);
    }

    /// The value part of a DUMP payload (type byte and value), checked for
    /// the stream type.
    fn dump_body(c: &mut RawClient, key: &str) -> (u8, Vec<u8>) {
        let Resp::Bulk(payload) = reply(c, &[b"DUMP", key.as_bytes()]) else {
            panic!("DUMP {key}: no payload");
        };
        let body = &payload[..payload.len() - TRAILER];
        (body[0], body[1..].to_vec())
    }

    /// A DUMP payload of a stream value with a zero checksum (the test's
    /// Redis skips checksum validation).
    fn payload(rdb_type: u8, body: &[u8]) -> Vec<u8> {
        let mut p = vec![rdb_type];
        p.extend_from_slice(body);
        p.extend_from_slice(&RDB_VERSION.to_le_bytes());
        p.extend_from_slice(&[0; 8]);
        p
    }

    fn read_all(rdb_type: u8, body: &[u8]) -> Result<Stream> {
        let mut input = prim::Input::new(body);
        let s = read(&mut input, rdb_type)?;
        assert!(input.rest().is_empty(), "bytes left after the stream value");
        Ok(s)
    }

    /// Streams of every shape, made by Redis: many entries over several
    /// nodes (small node limits), deleted entries, both kinds of trimming,
    /// an emptied stream, groups with pending entries (fixed delivery times
    /// and counts through XCLAIM), consumers with and without any, a group
    /// whose read counter is unknown, integer-looking names.
    const WORKLOAD: &[&str] = &[
        "CONFIG SET stream-node-max-entries 7",
        "XGROUP CREATE s:groups g0 $ MKSTREAM",
        "XGROUP CREATE s:groups 123 0 ENTRIESREAD 0",
        "XADD s:groups 1-1 f v",
        "XADD s:groups 1-2 f w",
        "XADD s:groups 2-0 other 12 more -5",
        "XADD s:groups 3-0 f x",
        "XCLAIM s:groups 123 alice 0 1-1 TIME 1700000000000 RETRYCOUNT 3 FORCE JUSTID",
        "XCLAIM s:groups 123 bob 0 2-0 TIME 1700000000500 RETRYCOUNT 1 FORCE JUSTID",
        "XCLAIM s:groups 123 7 0 3-0 TIME 1700000000900 RETRYCOUNT 0 FORCE JUSTID",
        "XGROUP CREATECONSUMER s:groups 123 idle-one",
        "XGROUP SETID s:groups g0 2-0 ENTRIESREAD 2",
        "XDEL s:groups 1-2",
        "XGROUP CREATE s:groups unknown 1-2",
        "XADD s:empty 5-5 f v",
        "XTRIM s:empty MAXLEN 0",
        "XADD s:one 9-9 only-field 1",
    ];

    fn big_stream(c: &mut RawClient) {
        let long = "y".repeat(70);
        for i in 1..=120u64 {
            // A later ms with a lower seq gives a negative seq delta.
            let id = format!("{}-{}", 1000 + i / 4, (i * 7) % 5 + (i % 4) * 10);
            let words = match i % 5 {
                0 => format!("XADD s:big {id} other {i} x {long}"),
                1 => format!("XADD s:big {id} a {i} b 1.5 c -12345678901"),
                _ => format!("XADD s:big {id} a {i} b bee c {}", i * 1000),
            };
            run(c, &words);
        }
        run(c, "XDEL s:big 1002-14 1010-10 1020-0 1029-13");
        run(c, "XTRIM s:big MINID 1003-0");
        run(c, "XTRIM s:big MAXLEN ~ 95");
        run(c, "XTRIM s:big MAXLEN 90");
    }

    fn redis() -> Option<RedisServer> {
        RedisServer::start(&["--enable-debug-command", "yes", "--rdbcompression", "no"]).unwrap()
    }

    const KEYS: &[&str] = &["s:groups", "s:empty", "s:one", "s:big"];

    /// What Redis DUMPs reads back, and writes out again byte for byte.
    #[test]
    fn redis_dumps_read_and_write_back_identically() {
        let Some(redis) = redis() else {
            return;
        };
        let mut c = RawClient::connect(redis.addr()).unwrap();
        WORKLOAD.iter().for_each(|w| run(&mut c, w));
        big_stream(&mut c);
        for key in KEYS {
            let (rdb_type, body) = dump_body(&mut c, key);
            assert_eq!(rdb_type, RDB_TYPE_STREAM_LISTPACKS_2, "{key}");
            let stream = read_all(rdb_type, &body).unwrap_or_else(|e| panic!("{key}: {e:?}"));
            let mut out = vec![];
            write(&mut out, &stream);
            assert_eq!(out, body, "{key}: written bytes differ from Redis's");
        }
        // The loaded values, spot-checked.
        let (t, body) = dump_body(&mut c, "s:groups");
        let s = read_all(t, &body).unwrap();
        assert_eq!(
            (s.len(), s.last_id, s.first_id, s.max_deleted, s.entries_added),
            (3, StreamId::new(3, 0), StreamId::new(1, 1), StreamId::new(1, 2), 4)
        );
        let g = s.group(b"123").unwrap();
        assert_eq!(g.entries_read, Some(0));
        assert_eq!(
            g.pending[&StreamId::new(1, 1)],
            Pending {
                consumer: Bytes::from_static(b"alice"),
                delivered_at: 1_700_000_000_000,
                deliveries: 3
            }
        );
        assert_eq!(
            g.consumers.keys().map(|k| &k[..]).collect::<Vec<_>>(),
            [&b"7"[..], b"alice", b"bob", b"idle-one"]
        );
        assert_eq!(s.group(b"unknown").unwrap().entries_read, None);
        assert_eq!(s.group(b"g0").unwrap().entries_read, Some(2));
    }

    /// coordis's nodes are Redis's: the same commands on a coordis stream
    /// write the bytes Redis DUMPs (groups aside, their times being Redis's
    /// clock).
    #[test]
    fn coordis_streams_write_what_redis_dumps() {
        let Some(redis) = redis() else {
            return;
        };
        let mut c = RawClient::connect(redis.addr()).unwrap();
        run(&mut c, "CONFIG SET stream-node-max-entries 7");
        big_stream(&mut c);
        let (_, theirs) = dump_body(&mut c, "s:big");
        let limits = NodeLimits {
            max_bytes: 4096,
            max_entries: 7,
        };
        let mut s = Stream::default();
        let long = "y".repeat(70);
        let b = |t: &str| Bytes::copy_from_slice(t.as_bytes());
        for i in 1..=120u64 {
            let id = StreamId::new(1000 + i / 4, (i * 7) % 5 + (i % 4) * 10);
            let fields = match i % 5 {
                0 => vec![b("other"), b(&i.to_string()), b("x"), b(&long)],
                1 => vec![b("a"), b(&i.to_string()), b("b"), b("1.5"), b("c"), b("-12345678901")],
                _ => vec![
                    b("a"),
                    b(&i.to_string()),
                    b("b"),
                    b("bee"),
                    b("c"),
                    b(&(i * 1000).to_string()),
                ],
            };
            s.append(id, &fields, limits);
        }
        for (ms, seq) in [(1002, 14), (1010, 10), (1020, 0), (1029, 13)] {
            if s.delete(StreamId::new(ms, seq)) && StreamId::new(ms, seq) > s.max_deleted {
                s.max_deleted = StreamId::new(ms, seq);
            }
        }
        s.trim(Trim::MinId(StreamId::new(1003, 0)), false, 0);
        s.trim(Trim::MaxLen(95), true, 0);
        s.trim(Trim::MaxLen(90), false, 0);
        let mut ours = vec![];
        write(&mut ours, &s);
        assert_eq!(ours, theirs, "coordis's stream encodes differently from Redis's");
    }

    /// What coordis writes, Redis RESTOREs into the same stream: the same
    /// DEBUG DIGEST-VALUE and XINFO STREAM FULL as the key it came from,
    /// also when Redis's own DUMP was LZF-compressed.
    #[test]
    fn redis_restores_what_coordis_writes() {
        for compression in ["no", "yes"] {
            let Some(redis) =
                RedisServer::start(&["--enable-debug-command", "yes", "--rdbcompression", compression]).unwrap()
            else {
                return;
            };
            let mut c = RawClient::connect(redis.addr()).unwrap();
            run(&mut c, "DEBUG SET-SKIP-CHECKSUM-VALIDATION 1");
            WORKLOAD.iter().for_each(|w| run(&mut c, w));
            big_stream(&mut c);
            for key in KEYS {
                let (t, body) = dump_body(&mut c, key);
                let stream = read_all(t, &body).unwrap_or_else(|e| panic!("{key} (compression {compression}): {e:?}"));
                let mut out = vec![];
                write(&mut out, &stream);
                let copy = format!("{key}:copy");
                reply(
                    &mut c,
                    &[
                        b"RESTORE",
                        copy.as_bytes(),
                        b"0",
                        &payload(RDB_TYPE_STREAM_LISTPACKS_2, &out),
                    ],
                );
                for what in [&["DEBUG", "DIGEST-VALUE"][..], &["XINFO", "STREAM"]] {
                    let ask = |c: &mut RawClient, k: &str| {
                        let mut args: Vec<&[u8]> = what.iter().map(|w| w.as_bytes()).collect();
                        args.push(k.as_bytes());
                        if what[0] == "XINFO" {
                            args.extend([&b"FULL"[..]]);
                        }
                        c.command_bytes(&args).unwrap()
                    };
                    assert_eq!(
                        ask(&mut c, key),
                        ask(&mut c, &copy),
                        "{what:?} {key} (compression {compression})"
                    );
                }
            }
        }
    }

    /// A version-1 stream (Redis 5/6) loads with what Redis derives for it:
    /// entries added = length, no tombstone, the first live ID, read
    /// counters estimated.
    #[test]
    fn version_one_streams_load_as_redis_migrates_them() {
        let limits = NodeLimits {
            max_bytes: 4096,
            max_entries: 3,
        };
        let b = |t: &str| Bytes::copy_from_slice(t.as_bytes());
        let mut s = Stream::default();
        for i in 1..=8 {
            s.append(StreamId::new(i, 0), &[b("f"), b(&i.to_string())], limits);
        }
        s.delete(StreamId::new(1, 0));
        s.add_group(b"at-start", Group::new(StreamId::ZERO, None));
        s.add_group(b"at-end", Group::new(StreamId::new(8, 0), None));
        // The version-1 layout: v2's without the three stream fields and
        // the groups' read counters.
        let mut v1 = vec![];
        prim::save_len(&mut v1, s.nodes() as u64);
        for node in s.raw_nodes() {
            prim::save_string(&mut v1, &raw_id(node.master_id));
            prim::save_string(&mut v1, &node_listpack(&node));
        }
        prim::save_len(&mut v1, s.len());
        prim::save_len(&mut v1, 8);
        prim::save_len(&mut v1, 0);
        prim::save_len(&mut v1, 2);
        for (name, g) in s.groups() {
            prim::save_string(&mut v1, name);
            prim::save_len(&mut v1, g.last_id.ms);
            prim::save_len(&mut v1, g.last_id.seq);
            prim::save_len(&mut v1, 0);
            prim::save_len(&mut v1, 0);
        }
        let loaded = read_all(RDB_TYPE_STREAM_LISTPACKS, &v1).unwrap();
        assert_eq!(
            (loaded.len(), loaded.entries_added, loaded.first_id, loaded.max_deleted),
            (7, 7, StreamId::new(2, 0), StreamId::ZERO)
        );
        assert_eq!(loaded.group(b"at-end").unwrap().entries_read, Some(7));
        assert_eq!(loaded.group(b"at-start").unwrap().entries_read, Some(0));
        // And Redis 7.0 loads it the same way.
        let Some(redis) = redis() else {
            return;
        };
        let mut c = RawClient::connect(redis.addr()).unwrap();
        run(&mut c, "DEBUG SET-SKIP-CHECKSUM-VALIDATION 1");
        reply(
            &mut c,
            &[b"RESTORE", b"v1", b"0", &payload(RDB_TYPE_STREAM_LISTPACKS, &v1)],
        );
        let (t, body) = dump_body(&mut c, "v1");
        let migrated = read_all(t, &body).unwrap();
        assert_eq!(
            (
                migrated.len(),
                migrated.entries_added,
                migrated.first_id,
                migrated.max_deleted
            ),
            (7, 7, StreamId::new(2, 0), StreamId::ZERO)
        );
        for g in [&b"at-end"[..], b"at-start"] {
            assert_eq!(
                migrated.group(g).unwrap().entries_read,
                loaded.group(g).unwrap().entries_read,
                "{}",
                String::from_utf8_lossy(g)
            );
        }
    }

    /// Every truncation of a valid value, and every single-byte change, is
    /// an error or a stream: never a panic.
    #[test]
    fn damaged_values_are_errors_not_panics() {
        let limits = NodeLimits {
            max_bytes: 4096,
            max_entries: 4,
        };
        let b = |t: &str| Bytes::copy_from_slice(t.as_bytes());
        let mut s = Stream::default();
        for i in 1..=10 {
            s.append(
                StreamId::new(i, i),
                &[b("f"), b(&i.to_string()), b("g"), b("long value here")],
                limits,
            );
        }
        s.delete(StreamId::new(3, 3));
        let mut g = Group::new(StreamId::new(5, 5), Some(5));
        g.pending.insert(
            StreamId::new(4, 4),
            Pending {
                consumer: b("c"),
                delivered_at: 1,
                deliveries: 2,
            },
        );
        g.consumers.insert(
            b("c"),
            Consumer {
                seen_at: 3,
                pending: [StreamId::new(4, 4)].into(),
            },
        );
        s.add_group(b"g", g);
        let mut body = vec![];
        write(&mut body, &s);
        assert_eq!(read_all(RDB_TYPE_STREAM_LISTPACKS_2, &body).unwrap(), s);
        for cut in 0..body.len() {
            assert!(
                read(&mut prim::Input::new(&body[..cut]), RDB_TYPE_STREAM_LISTPACKS_2).is_err(),
                "cut at {cut}"
            );
        }
        for at in 0..body.len() {
            for flip in [0x01u8, 0x80, 0xff] {
                let mut bad = body.clone();
                bad[at] ^= flip;
                let _ = read(&mut prim::Input::new(&bad), RDB_TYPE_STREAM_LISTPACKS_2);
            }
        }
    }
}
