//! Streams: entries in packed nodes, and the consumer groups that read them
//! (the data of Redis's `t_stream.c`; the commands are in `cmd/stream.rs`).
//!
//! Memory is what a stream is judged on (an events stream of a million
//! small entries), so the layout is Redis's: entries sit in nodes of up to
//! `stream-node-max-entries` (100), kept in an ordered map by each node's
//! first ID. A node is one byte buffer: the field names of its first entry
//! (the *master* fields), then its entries, each `[flags][ms delta][seq
//! delta]` against the node's first ID, then either only the values (the
//! entry has the master's field names: the usual case, one job type's events
//! all alike) or the field count and every field and value. Lengths and
//! deltas are LEB128, so a three-field entry of short values costs about
//! fifteen bytes.
//!
//! Node boundaries are Redis's: a node takes an entry while it has fewer
//! than `stream-node-max-entries` entries (deleted ones included) and its
//! listpack, *sized as Redis encodes it* ([`lp_str_size`]), stays under
//! `stream-node-max-bytes`. So approximate trimming (`MAXLEN ~`, `MINID ~`),
//! which removes whole nodes only, removes what Redis removes, and XINFO's
//! `radix-tree-keys` is the node count Redis shows.
//!
//! XDEL and exact trimming mark entries deleted in place (the flag bit
//! Redis uses); a node whose entries are all deleted goes, as in Redis.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use bytes::Bytes;

use super::packed::{read_varint, write_varint};

/// An entry ID: milliseconds and a sequence number, ordered as a pair.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamId {
    pub ms: u64,
    pub seq: u64,
}

impl StreamId {
    pub const ZERO: StreamId = StreamId { ms: 0, seq: 0 };
    pub const MAX: StreamId = StreamId {
        ms: u64::MAX,
        seq: u64::MAX,
    };

    pub fn new(ms: u64, seq: u64) -> StreamId {
        StreamId { ms, seq }
    }

    /// The ID right after this one (`streamIncrID`); `None` after the last.
    pub fn incr(self) -> Option<StreamId> {
        match (self.ms, self.seq) {
            (u64::MAX, u64::MAX) => None,
            (ms, u64::MAX) => Some(StreamId::new(ms + 1, 0)),
            (ms, seq) => Some(StreamId::new(ms, seq + 1)),
        }
    }

    /// The ID right before this one (`streamDecrID`); `None` before 0-0.
    pub fn decr(self) -> Option<StreamId> {
        match (self.ms, self.seq) {
            (0, 0) => None,
            (ms, 0) => Some(StreamId::new(ms - 1, u64::MAX)),
            (ms, seq) => Some(StreamId::new(ms, seq - 1)),
        }
    }

    pub fn is_zero(self) -> bool {
        self == StreamId::ZERO
    }

    /// `ms-seq` as a reply's bytes.
    pub fn to_bytes(self) -> Bytes {
        Bytes::from(self.to_string())
    }
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.ms, self.seq)
    }
}

/// When a node is full (`stream-node-max-bytes`, `stream-node-max-entries`;
/// 0: no limit).
#[derive(Clone, Copy, Debug)]
pub struct NodeLimits {
    pub max_bytes: usize,
    pub max_entries: usize,
}

/// Entry flag: deleted (XDEL, exact trimming), still in the buffer.
const DELETED: u8 = 1;
/// Entry flag: the master's field names; only values are stored.
const SAME_FIELDS: u8 = 2;
/// Redis's cap on a stream listpack when `stream-node-max-bytes` is 0.
const LISTPACK_MAX: usize = 1 << 30;
/// A listpack's header (total bytes, element count) and end marker.
const LP_OVERHEAD: usize = 6 + 1;

/// Bytes a listpack element's back-length takes for an element of `len`.
fn lp_backlen_size(len: usize) -> usize {
    match len {
        0..=127 => 1,
        128..=16382 => 2,
        16383..=2097150 => 3,
        2097151..=268435454 => 4,
        _ => 5,
    }
}

/// Bytes an integer takes as a listpack element (Redis's `lpEncodeIntegerGetType`).
fn lp_int_size(v: i64) -> usize {
    let encoded = match v {
        0..=127 => 1,
        -4096..=4095 => 2,
        -32768..=32767 => 3,
        -8388608..=8388607 => 4,
        -2147483648..=2147483647 => 5,
        _ => 9,
    };
    encoded + 1
}

/// Bytes `s` takes as a listpack element: as an integer when it reads as
/// one strictly (as Redis stores `"12"`), otherwise as a string.
pub(crate) fn lp_str_size(s: &[u8]) -> usize {
    if let Some(v) = super::num::parse_i64(s) {
        return lp_int_size(v);
    }
    let encoded = match s.len() {
        0..=63 => 1 + s.len(),
        64..=4095 => 2 + s.len(),
        _ => 5 + s.len(),
    };
    encoded + lp_backlen_size(encoded)
}

/// A node: entries from its first ID (its key in [`Stream`]'s map) on.
#[derive(Clone, Debug)]
struct Node {
    /// `[master field count][master fields]` then the entries (module docs).
    buf: Vec<u8>,
    /// Entries not deleted, and deleted ones still in `buf` (Redis's node
    /// `count` and `deleted`).
    live: u32,
    deleted: u32,
    /// Where the first entry starts in `buf`.
    entries_at: u32,
    /// The last entry's ID, deleted or not: MINID trimming removes a node
    /// whose last ID is below its target, as Redis reads it from the node.
    last: StreamId,
    /// Whether that last entry is deleted (so the stream's last live entry
    /// is found without decoding a node, unless XDEL took it).
    last_deleted: bool,
    /// The size of Redis's listpack for this node, less its header and its
    /// count and deleted elements (their size changes as they do).
    lp_rest: u32,
}

impl Node {
    /// A node whose master fields are the names of `fields` (name, value...).
    fn new(fields: &[Bytes]) -> Node {
        let names: Vec<&[u8]> = fields.iter().step_by(2).map(|n| n.as_ref()).collect();
        Node::with_master(&names)
    }

    /// A node with these master field names.
    fn with_master(names: &[&[u8]]) -> Node {
        let mut buf = Vec::new();
        write_varint(&mut buf, names.len());
        let mut lp_rest = lp_int_size(names.len() as i64) + lp_int_size(0);
        for name in names {
            write_varint(&mut buf, name.len());
            buf.extend_from_slice(name);
            lp_rest += lp_str_size(name);
        }
        Node {
            entries_at: buf.len() as u32,
            buf,
            live: 0,
            deleted: 0,
            last: StreamId::ZERO,
            last_deleted: false,
            lp_rest: lp_rest as u32,
        }
    }

    /// The size of Redis's listpack for this node.
    fn lp_bytes(&self) -> usize {
        LP_OVERHEAD + lp_int_size(self.live as i64) + lp_int_size(self.deleted as i64) + self.lp_rest as usize
    }

    /// The master field names.
    fn master(&self) -> impl Iterator<Item = &[u8]> + '_ {
        let (count, mut at) = read_varint(&self.buf, 0);
        (0..count).map(move |_| {
            let (len, start) = read_varint(&self.buf, at);
            at = start + len;
            &self.buf[start..at]
        })
    }

    fn has_master_fields<F: AsRef<[u8]>>(&self, fields: &[F]) -> bool {
        let (count, _) = read_varint(&self.buf, 0);
        count == fields.len() / 2
            && self
                .master()
                .zip(fields.iter().step_by(2))
                .all(|(a, b)| a == b.as_ref())
    }

    /// Appends an entry (`first` is the node's first ID).
    fn push<F: AsRef<[u8]>>(&mut self, first: StreamId, id: StreamId, fields: &[F]) {
        let same = self.has_master_fields(fields);
        let ms_delta = id.ms.wrapping_sub(first.ms);
        let seq_delta = id.seq.wrapping_sub(first.seq);
        self.buf.push(if same { SAME_FIELDS } else { 0 });
        write_varint(&mut self.buf, ms_delta as usize);
        write_varint(&mut self.buf, seq_delta as usize);
        let pairs = fields.len() / 2;
        let mut lp = lp_int_size(if same { SAME_FIELDS } else { 0 } as i64)
            + lp_int_size(ms_delta as i64)
            + lp_int_size(seq_delta as i64);
        let mut pieces = pairs + 3;
        if !same {
            write_varint(&mut self.buf, pairs);
            lp += lp_int_size(pairs as i64);
            pieces += pairs + 1;
        }
        for (i, part) in fields.iter().enumerate() {
            if same && i % 2 == 0 {
                continue;
            }
            let part = part.as_ref();
            write_varint(&mut self.buf, part.len());
            self.buf.extend_from_slice(part);
            lp += lp_str_size(part);
        }
        lp += lp_int_size(pieces as i64);
        self.lp_rest = self.lp_rest.saturating_add(lp.min(u32::MAX as usize) as u32);
        self.live += 1;
        self.last = id;
        self.last_deleted = false;
    }

    /// Every entry in the node, deleted ones included, in order.
    fn entries(&self, first: StreamId) -> NodeEntries<'_> {
        NodeEntries {
            node: self,
            first,
            at: self.entries_at as usize,
        }
    }
}

/// A walk over a node's entries (see [`Node::entries`]).
struct NodeEntries<'a> {
    node: &'a Node,
    first: StreamId,
    at: usize,
}

/// One entry as the walk finds it: where its flags byte is, and the entry.
struct RawEntry<'a> {
    flags_at: usize,
    deleted: bool,
    entry: Entry<'a>,
}

impl<'a> Iterator for NodeEntries<'a> {
    type Item = RawEntry<'a>;

    fn next(&mut self) -> Option<RawEntry<'a>> {
        let buf = &self.node.buf;
        if self.at >= buf.len() {
            return None;
        }
        let flags_at = self.at;
        let flags = buf[flags_at];
        let (ms_delta, at) = read_varint(buf, flags_at + 1);
        let (seq_delta, at) = read_varint(buf, at);
        let id = StreamId::new(
            self.first.ms.wrapping_add(ms_delta as u64),
            self.first.seq.wrapping_add(seq_delta as u64),
        );
        let same = flags & SAME_FIELDS != 0;
        let (pairs, fields_at) = if same {
            (read_varint(buf, 0).0, at)
        } else {
            read_varint(buf, at)
        };
        let parts = if same { pairs } else { pairs * 2 };
        let mut end = fields_at;
        for _ in 0..parts {
            let (len, start) = read_varint(buf, end);
            end = start + len;
        }
        self.at = end;
        Some(RawEntry {
            flags_at,
            deleted: flags & DELETED != 0,
            entry: Entry {
                id,
                node: self.node,
                pairs,
                at: fields_at,
                same,
            },
        })
    }
}

/// A stream entry, borrowed: its ID and its field-value pairs.
#[derive(Clone, Copy)]
pub struct Entry<'a> {
    pub id: StreamId,
    node: &'a Node,
    /// Field-value pairs.
    pairs: usize,
    /// Where its stored parts (values only when `same`) start.
    at: usize,
    same: bool,
}

impl<'a> Entry<'a> {
    /// Number of field-value pairs.
    pub fn len(&self) -> usize {
        self.pairs
    }

    pub fn is_empty(&self) -> bool {
        self.pairs == 0
    }

    /// Fields and values in order.
    pub fn fields(&self) -> impl Iterator<Item = (&'a [u8], &'a [u8])> + 'a {
        let buf: &'a [u8] = &self.node.buf;
        let mut names = self.same.then(|| self.node.master());
        let mut at = self.at;
        let mut part = move || {
            let (len, start) = read_varint(buf, at);
            at = start + len;
            &buf[start..at]
        };
        (0..self.pairs).map(move |_| {
            let name = match names.as_mut() {
                Some(names) => names.next().unwrap_or_default(),
                None => part(),
            };
            (name, part())
        })
    }
}

impl fmt::Debug for Entry<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let fields: Vec<(String, String)> = self
            .fields()
            .map(|(k, v)| (String::from_utf8_lossy(k).into(), String::from_utf8_lossy(v).into()))
            .collect();
        f.debug_struct("Entry")
            .field("id", &self.id)
            .field("fields", &fields)
            .finish()
    }
}

/// How XADD and XTRIM trim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trim {
    /// Keep at most this many entries.
    MaxLen(u64),
    /// Drop entries below this ID.
    MinId(StreamId),
}

/// A consumer group's pending entry (Redis's `streamNACK`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pending {
    /// The consumer that holds it.
    pub consumer: Bytes,
    /// Unix ms of its last delivery (XPENDING's idle time counts from it).
    pub delivered_at: u64,
    pub deliveries: u64,
}

/// A consumer of a group.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Consumer {
    /// Unix ms it last read or claimed (XINFO CONSUMERS `idle`).
    pub seen_at: u64,
    /// Its pending entries (the group's PEL holds the details).
    pub pending: BTreeSet<StreamId>,
}

/// A consumer group (Redis's `streamCG`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    /// Delivered up to here: `>` reads what comes after.
    pub last_id: StreamId,
    /// Entries the group has read, or `None` when unknown (Redis's
    /// `SCG_INVALID_ENTRIES_READ`): the base of XINFO's `lag`.
    pub entries_read: Option<u64>,
    /// Delivered but not acknowledged, by ID (Redis's group PEL).
    pub pending: BTreeMap<StreamId, Pending>,
    /// By name, in name order as Redis's radix tree keeps them.
    pub consumers: BTreeMap<Bytes, Consumer>,
}

impl Group {
    pub fn new(last_id: StreamId, entries_read: Option<u64>) -> Group {
        Group {
            last_id,
            entries_read,
            pending: BTreeMap::new(),
            consumers: BTreeMap::new(),
        }
    }
}

/// A stream (see the module docs).
#[derive(Clone, Debug, Default)]
pub struct Stream {
    /// Nodes by their first ID.
    nodes: BTreeMap<StreamId, Node>,
    /// Live entries.
    length: u64,
    /// The greatest ID ever added (or set by XSETID): new IDs come after it.
    pub last_id: StreamId,
    /// The first live entry's ID (0-0 when empty), as Redis records it.
    pub first_id: StreamId,
    /// The greatest ID deleted by XDEL (or set by XSETID): `lag` is unknown
    /// past it.
    pub max_deleted: StreamId,
    /// Entries ever added (XINFO `entries-added`).
    pub entries_added: u64,
    /// Consumer groups by name, in name order (an empty map allocates
    /// nothing).
    groups: BTreeMap<Bytes, Group>,
}

impl PartialEq for Stream {
    fn eq(&self, other: &Stream) -> bool {
        self.length == other.length
            && self.last_id == other.last_id
            && self
                .iter()
                .zip(other.iter())
                .all(|(a, b)| a.id == b.id && a.fields().eq(b.fields()))
            && self.groups == other.groups
    }
}

impl Stream {
    /// Live entries (XLEN).
    pub fn len(&self) -> u64 {
        self.length
    }

    pub fn is_empty(&self) -> bool {
        self.length == 0
    }

    /// Nodes (XINFO `radix-tree-keys`).
    pub fn nodes(&self) -> usize {
        self.nodes.len()
    }

    /// Heap bytes this stream holds, for MEMORY USAGE: the first `samples`
    /// nodes' buffers measured and the rest estimated from them (as Redis
    /// samples), plus every group's bookkeeping (PEL entries and consumers,
    /// counted from their lengths; the map nodes are approximate).
    pub fn heap_bytes(&self, samples: usize) -> usize {
        const MAP_ENTRY: usize = 48;
        let sampled: Vec<usize> = self
            .nodes
            .values()
            .take(samples.max(1))
            .map(|n| n.buf.capacity() + std::mem::size_of::<Node>() + MAP_ENTRY)
            .collect();
        let nodes = match sampled.len() {
            0 => 0,
            n => sampled.iter().sum::<usize>() / n * self.nodes.len(),
        };
        let groups: usize = self
            .groups
            .iter()
            .map(|(name, g)| {
                let consumers: usize = g
                    .consumers
                    .iter()
                    .map(|(name, c)| MAP_ENTRY + name.len() + c.pending.len() * 24)
                    .sum();
                MAP_ENTRY + name.len() + g.pending.len() * (MAP_ENTRY + 16) + consumers
            })
            .sum();
        std::mem::size_of::<Stream>() + nodes + groups
    }

    /// The next automatic ID at `now_ms` (`streamNextID`): now, or the last
    /// ID's successor when the clock is not past it; `None` when the last
    /// possible ID is taken.
    pub fn next_id(&self, now_ms: u64) -> Option<StreamId> {
        if now_ms > self.last_id.ms {
            Some(StreamId::new(now_ms, 0))
        } else {
            self.last_id.incr()
        }
    }

    /// Appends an entry of `fields` (name, value, name, value...) with `id`,
    /// which the caller has checked is above [`Stream::last_id`].
    pub fn append(&mut self, id: StreamId, fields: &[Bytes], limits: NodeLimits) {
        let max_bytes = match limits.max_bytes {
            0 => LISTPACK_MAX,
            n => n.min(LISTPACK_MAX),
        };
        let raw: usize = fields.iter().map(|f| f.len()).sum();
        let full = self.nodes.last_key_value().is_none_or(|(_, node)| {
            node.lp_bytes() + raw >= max_bytes
                || (limits.max_entries != 0 && (node.live + node.deleted) as usize >= limits.max_entries)
        });
        if full {
            // A node that takes no more entries gives back its spare room.
            if let Some(mut last) = self.nodes.last_entry() {
                last.get_mut().buf.shrink_to_fit();
            }
            self.nodes.insert(id, Node::new(fields));
        }
        let mut last = self.nodes.last_entry().expect("a node was just ensured");
        let first = *last.key();
        let node = last.get_mut();
        node.push(first, id, fields);
        if self.length == 0 {
            self.first_id = id;
        }
        self.length += 1;
        self.entries_added += 1;
        self.last_id = id;
    }

    /// Live entries in ID order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = Entry<'_>> + '_ {
        self.range(StreamId::ZERO, StreamId::MAX)
    }

    /// Live entries with IDs in `start..=end`, in ID order (`.rev()` for
    /// XREVRANGE).
    pub fn range(&self, start: StreamId, end: StreamId) -> Range<'_> {
        // The node holding `start` begins at or before it.
        let from = self.nodes.range(..=start).next_back().map_or(start, |(k, _)| *k);
        let nodes = if start > end {
            self.nodes.range(StreamId::MAX..StreamId::MAX)
        } else {
            self.nodes.range(from..=end)
        };
        Range {
            nodes,
            front: Front::Buffered(Vec::new().into_iter()),
            back: Vec::new().into_iter(),
            start,
            end,
        }
    }

    /// The last live entry's ID (Redis's `streamLastValidID`); 0-0 when
    /// empty.
    pub fn last_entry_id(&self) -> StreamId {
        match self.nodes.last_key_value() {
            None => StreamId::ZERO,
            Some((_, node)) if !node.last_deleted => node.last,
            Some(_) => self.iter().next_back().map_or(StreamId::ZERO, |e| e.id),
        }
    }

    /// The first entry's ID, deleted or not (the first node's first ID;
    /// the greatest ID when empty): Redis's `streamGetEdgeID` with
    /// tombstones, what a trim's effect names as its MINID.
    pub fn first_raw_id(&self) -> StreamId {
        self.nodes.first_key_value().map_or(StreamId::MAX, |(id, _)| *id)
    }

    /// The entry with `id`, if live.
    pub fn get(&self, id: StreamId) -> Option<Entry<'_>> {
        self.range(id, id).next()
    }

    /// Deletes the entry with `id`; false when there is no live one.
    pub fn delete(&mut self, id: StreamId) -> bool {
        let Some((&first, node)) = self.nodes.range_mut(..=id).next_back() else {
            return false;
        };
        let Some(flags_at) = node
            .entries(first)
            .find(|e| e.entry.id == id && !e.deleted)
            .map(|e| e.flags_at)
        else {
            return false;
        };
        node.buf[flags_at] |= DELETED;
        node.live -= 1;
        node.deleted += 1;
        node.last_deleted |= node.last == id;
        if node.live == 0 {
            self.nodes.remove(&first);
        }
        self.length -= 1;
        self.refresh_first_id();
        true
    }

    /// Records the first live entry's ID (0-0 when empty).
    fn refresh_first_id(&mut self) {
        let first = self.iter().next().map_or(StreamId::ZERO, |e| e.id);
        self.first_id = first;
    }

    /// Trims as Redis's `streamTrim`: whole nodes from the front while the
    /// rule allows, then (unless `approx`) entries inside the next node.
    /// `limit` (0: none) caps the entries removed, counted in whole nodes.
    /// Returns how many entries went.
    pub fn trim(&mut self, rule: Trim, approx: bool, limit: u64) -> u64 {
        let mut removed = 0u64;
        while let Some(mut first) = self.nodes.first_entry() {
            if let Trim::MaxLen(max) = rule {
                if self.length <= max {
                    break;
                }
            }
            let node = first.get();
            let live = node.live as u64;
            if limit != 0 && removed + live > limit {
                break;
            }
            let whole = match rule {
                Trim::MaxLen(max) => self.length - live >= max,
                Trim::MinId(min) => node.last < min,
            };
            if whole {
                first.remove();
                self.length -= live;
                removed += live;
                continue;
            }
            if approx {
                break;
            }
            let node_first = *first.key();
            let node = first.get_mut();
            let mut marks = vec![];
            let mut length = self.length;
            for e in node.entries(node_first) {
                let stop = match rule {
                    Trim::MaxLen(max) => length <= max,
                    Trim::MinId(min) => e.entry.id >= min,
                };
                if stop {
                    break;
                }
                if !e.deleted {
                    marks.push(e.flags_at);
                    length -= 1;
                }
            }
            for at in &marks {
                node.buf[*at] |= DELETED;
            }
            node.live -= marks.len() as u32;
            node.deleted += marks.len() as u32;
            self.length = length;
            removed += marks.len() as u64;
            break;
        }
        self.refresh_first_id();
        removed
    }

    /// The consumer groups, by name.
    pub fn groups(&self) -> impl Iterator<Item = (&Bytes, &Group)> + '_ {
        self.groups.iter()
    }

    pub fn group_count(&self) -> usize {
        self.groups.len()
    }

    pub fn group(&self, name: &[u8]) -> Option<&Group> {
        self.groups.get(name)
    }

    pub fn group_mut(&mut self, name: &[u8]) -> Option<&mut Group> {
        self.groups.get_mut(name)
    }

    /// Adds a group; false when the name is taken.
    pub fn add_group(&mut self, name: &[u8], group: Group) -> bool {
        if self.groups.contains_key(name) {
            return false;
        }
        self.groups.insert(Bytes::copy_from_slice(name), group);
        true
    }

    /// Removes a group; false when there is none of that name.
    pub fn remove_group(&mut self, name: &[u8]) -> bool {
        self.groups.remove(name).is_some()
    }

    /// The number of entries from the first ever added to `id` when it can
    /// be known (Redis's `streamEstimateDistanceFromFirstEverEntry`).
    pub fn entries_up_to(&self, id: StreamId) -> Option<u64> {
        if self.entries_added == 0 {
            return Some(0);
        }
        if self.length == 0 && id <= self.last_id {
            return Some(self.entries_added);
        }
        if id == self.last_id {
            return Some(self.entries_added);
        }
        if id > self.last_id {
            return None;
        }
        if self.max_deleted.is_zero() || self.max_deleted < self.first_id {
            if id < self.first_id {
                return Some(self.entries_added - self.length);
            }
            if id == self.first_id {
                return Some(self.entries_added - self.length + 1);
            }
        }
        None
    }

    /// Whether an XDEL tombstone may lie at or after `from` (Redis's
    /// `streamRangeHasTombstones` with no end).
    pub fn tombstones_from(&self, from: StreamId) -> bool {
        !(self.length == 0 || self.max_deleted.is_zero() || self.first_id > self.max_deleted || from > self.max_deleted)
    }

    /// A group's lag (XINFO GROUPS), `None` when it cannot be known
    /// (Redis's `streamReplyWithCGLag`).
    pub fn lag(&self, group: &Group) -> Option<u64> {
        if self.entries_added == 0 {
            return Some(0);
        }
        if let Some(read) = group.entries_read {
            if !self.tombstones_from(group.last_id) {
                return Some(self.entries_added.wrapping_sub(read));
            }
        }
        self.entries_up_to(group.last_id)
            .map(|read| self.entries_added.wrapping_sub(read))
    }

    /// Records that `group` delivered `id` to a `>` reader: its last ID and
    /// read counter move on (Redis's `streamReplyWithRange` with a group).
    pub fn advance_group(&mut self, group: &[u8], id: StreamId) {
        let tombstones = self.tombstones_from(id);
        let estimate = self.entries_up_to(id);
        let added = self.entries_added;
        let Some(g) = self.group_mut(group) else {
            return;
        };
        if id <= g.last_id {
            return;
        }
        match g.entries_read {
            Some(read) if !tombstones => g.entries_read = Some(read + 1),
            _ if added != 0 => g.entries_read = estimate,
            _ => {}
        }
        g.last_id = id;
    }
}

/// One node as Redis's listpack lays it out, for the RDB codec
/// ([`Stream::raw_nodes`]).
pub(crate) struct RawNode<'a> {
    /// The node's key: its first entry's ID, which every entry's ID is a
    /// delta from (Redis's master ID).
    pub(crate) master_id: StreamId,
    /// Live and deleted entries (the master entry's `count` and `deleted`).
    pub(crate) live: u32,
    pub(crate) deleted: u32,
    node: &'a Node,
}

/// An entry of a [`RawNode`], deleted or not.
pub(crate) struct RawNodeEntry<'a> {
    pub(crate) deleted: bool,
    /// Stored with only its values: its field names are the master's.
    pub(crate) same_fields: bool,
    pub(crate) entry: Entry<'a>,
}

impl<'a> RawNode<'a> {
    /// The master field names.
    pub(crate) fn master_fields(&self) -> impl Iterator<Item = &'a [u8]> + 'a {
        self.node.master()
    }

    /// Every entry, deleted ones included, in order.
    pub(crate) fn entries(&self) -> impl Iterator<Item = RawNodeEntry<'a>> + 'a {
        self.node.entries(self.master_id).map(|e| RawNodeEntry {
            deleted: e.deleted,
            same_fields: e.entry.same,
            entry: e.entry,
        })
    }
}

/// An entry of a node being loaded ([`Stream::load_node`]).
pub(crate) struct LoadedEntry<'a> {
    pub(crate) id: StreamId,
    pub(crate) deleted: bool,
    /// Field, value, field, value...
    pub(crate) fields: Vec<&'a [u8]>,
}

/// The stream-wide fields an RDB value stores after its nodes
/// ([`Stream::finish_load`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct LoadedMeta {
    pub(crate) length: u64,
    pub(crate) last_id: StreamId,
    pub(crate) first_id: StreamId,
    pub(crate) max_deleted: StreamId,
    pub(crate) entries_added: u64,
}

impl Stream {
    /// The nodes in ID order, as Redis's radix tree of listpacks holds them.
    pub(crate) fn raw_nodes(&self) -> impl Iterator<Item = RawNode<'_>> + '_ {
        self.nodes.iter().map(|(&master_id, node)| RawNode {
            master_id,
            live: node.live,
            deleted: node.deleted,
            node,
        })
    }

    /// Adds a node read from a file after the ones before it: the entries
    /// as stored (deleted ones flagged), their IDs above every ID already
    /// loaded and not below `master_id`. A node with no live entry is
    /// dropped (Redis removes such a node). The error says what is wrong.
    pub(crate) fn load_node(
        &mut self,
        master_id: StreamId,
        master_fields: &[&[u8]],
        entries: &[LoadedEntry<'_>],
    ) -> Result<(), &'static str> {
        if self
            .nodes
            .last_key_value()
            .is_some_and(|(_, last)| master_id <= last.last)
        {
            return Err("stream node IDs out of order");
        }
        if entries.is_empty() {
            return Err("empty stream node");
        }
        let mut node = Node::with_master(master_fields);
        let mut previous: Option<StreamId> = None;
        for e in entries {
            if e.id < master_id || previous.is_some_and(|p| e.id <= p) {
                return Err("stream entry IDs out of order");
            }
            if e.fields.len() % 2 != 0 {
                return Err("stream entry with an odd field count");
            }
            previous = Some(e.id);
            let flags_at = node.buf.len();
            node.push(master_id, e.id, &e.fields);
            if e.deleted {
                node.buf[flags_at] |= DELETED;
                node.live -= 1;
                node.deleted += 1;
                node.last_deleted = true;
            }
        }
        self.length += node.live as u64;
        if node.live > 0 {
            self.nodes.insert(master_id, node);
        }
        Ok(())
    }

    /// Sets the fields stored after the nodes, checking that the length is
    /// the number of live entries loaded and that no entry is past the last
    /// ID (new IDs must come after every stored one).
    pub(crate) fn finish_load(&mut self, meta: LoadedMeta) -> Result<(), &'static str> {
        if meta.length != self.length {
            return Err("stream length does not match its entries");
        }
        if self
            .nodes
            .last_key_value()
            .is_some_and(|(_, last)| last.last > meta.last_id)
        {
            return Err("stream entry past the stream's last ID");
        }
        self.last_id = meta.last_id;
        self.first_id = meta.first_id;
        self.max_deleted = meta.max_deleted;
        self.entries_added = meta.entries_added;
        Ok(())
    }

    /// The first live entry's ID, 0-0 when empty (what a file without the
    /// recorded first ID, stream version 1, gives it).
    pub(crate) fn first_live_id(&self) -> StreamId {
        self.iter().next().map_or(StreamId::ZERO, |e| e.id)
    }
}

/// Live entries in an ID range (see [`Stream::range`]). Walking forwards
/// decodes a node only as far as it is read (XREADGROUP's `COUNT 1` reads
/// one entry); walking backwards decodes a node at a time.
pub struct Range<'a> {
    nodes: std::collections::btree_map::Range<'a, StreamId, Node>,
    /// The node being walked from the front.
    front: Front<'a>,
    /// Entries of the node being walked from the back.
    back: std::vec::IntoIter<Entry<'a>>,
    start: StreamId,
    end: StreamId,
}

/// The front of a [`Range`]: a node read lazily, or (once the back has
/// reached it) its remaining entries decoded.
enum Front<'a> {
    Lazy(NodeEntries<'a>),
    Buffered(std::vec::IntoIter<Entry<'a>>),
}

impl<'a> Range<'a> {
    /// Whether a walked entry is a live one in the range.
    fn wanted(&self, e: &RawEntry<'a>) -> bool {
        !e.deleted && e.entry.id >= self.start && e.entry.id <= self.end
    }

    /// A node's live entries within the range.
    fn load(&self, first: StreamId, node: &'a Node) -> std::vec::IntoIter<Entry<'a>> {
        node.entries(first)
            .filter(|e| self.wanted(e))
            .map(|e| e.entry)
            .collect::<Vec<_>>()
            .into_iter()
    }

    /// The front node's next entry in the range.
    fn front_next(&mut self) -> Option<Entry<'a>> {
        match &mut self.front {
            Front::Buffered(entries) => entries.next(),
            Front::Lazy(entries) => {
                let (start, end) = (self.start, self.end);
                for e in entries.by_ref() {
                    if e.entry.id > end {
                        // Everything after is past the range.
                        self.front = Front::Buffered(Vec::new().into_iter());
                        return None;
                    }
                    if !e.deleted && e.entry.id >= start {
                        return Some(e.entry);
                    }
                }
                None
            }
        }
    }
}

impl<'a> Iterator for Range<'a> {
    type Item = Entry<'a>;

    fn next(&mut self) -> Option<Entry<'a>> {
        loop {
            if let Some(e) = self.front_next() {
                return Some(e);
            }
            match self.nodes.next() {
                Some((first, node)) => self.front = Front::Lazy(node.entries(*first)),
                None => return self.back.next(),
            }
        }
    }
}

impl DoubleEndedIterator for Range<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(e) = self.back.next_back() {
                return Some(e);
            }
            match self.nodes.next_back() {
                Some((first, node)) => self.back = self.load(*first, node),
                None => {
                    if let Front::Lazy(_) = self.front {
                        let rest: Vec<Entry> = std::iter::from_fn(|| self.front_next()).collect();
                        self.front = Front::Buffered(rest.into_iter());
                    }
                    return match &mut self.front {
                        Front::Buffered(entries) => entries.next_back(),
                        // (Made Buffered just above.)
                        Front::Lazy(_) => None,
                    };
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: NodeLimits = NodeLimits {
        max_bytes: 4096,
        max_entries: 100,
    };

    fn fields(parts: &[&str]) -> Vec<Bytes> {
        parts.iter().map(|p| Bytes::copy_from_slice(p.as_bytes())).collect()
    }

    fn filled(n: u64) -> Stream {
        let mut s = Stream::default();
        for i in 1..=n {
            s.append(StreamId::new(i, 0), &fields(&["a", "1", "b", &i.to_string()]), LIMITS);
        }
        s
    }

    fn ids(it: impl Iterator<Item = Entry<'static>>) -> Vec<u64> {
        it.map(|e| e.id.ms).collect()
    }

    #[test]
    fn entries_read_back_with_their_fields() {
        let mut s = Stream::default();
        s.append(StreamId::new(1, 0), &fields(&["a", "1", "b", "2"]), LIMITS);
        s.append(StreamId::new(1, 1), &fields(&["a", "3", "b", "4"]), LIMITS);
        s.append(StreamId::new(5, 0), &fields(&["x", "", "a", "y"]), LIMITS);
        type Fields<'a> = Vec<(&'a [u8], &'a [u8])>;
        let all: Vec<(StreamId, Fields)> = s.iter().map(|e| (e.id, e.fields().collect())).collect();
        assert_eq!(all[0].1, vec![(&b"a"[..], &b"1"[..]), (b"b", b"2")]);
        assert_eq!(all[1].1, vec![(&b"a"[..], &b"3"[..]), (b"b", b"4")]);
        assert_eq!(all[2], (StreamId::new(5, 0), vec![(&b"x"[..], &b""[..]), (b"a", b"y")]));
        assert_eq!(s.len(), 3);
        assert_eq!(s.nodes(), 1);
    }

    #[test]
    fn nodes_split_at_redis_boundaries() {
        let s = filled(250);
        assert_eq!(s.nodes(), 3);
        let s = filled(101);
        assert_eq!(s.nodes(), 2);
        // Five 1000-byte values: four fit in 4096 bytes, as in Redis.
        let mut s = Stream::default();
        let big = "x".repeat(1000);
        for i in 1..=5 {
            s.append(StreamId::new(i, 1), &fields(&["f", &big]), LIMITS);
        }
        assert_eq!(s.nodes(), 2);
    }

    #[test]
    fn ranges_forward_backward_and_across_nodes() {
        let s = filled(250);
        let s: &'static Stream = Box::leak(Box::new(s));
        assert_eq!(
            ids(s.range(StreamId::new(98, 0), StreamId::new(103, 0))),
            vec![98, 99, 100, 101, 102, 103]
        );
        assert_eq!(
            ids(s.range(StreamId::new(98, 0), StreamId::new(103, 0)).rev()),
            vec![103, 102, 101, 100, 99, 98]
        );
        assert_eq!(ids(s.range(StreamId::new(5, 1), StreamId::new(7, 0))), vec![6, 7]);
        assert_eq!(
            ids(s.range(StreamId::new(9, 0), StreamId::new(3, 0))),
            Vec::<u64>::new()
        );
        assert_eq!(s.iter().count(), 250);
        assert_eq!(s.iter().rev().count(), 250);
        // Mixed ends meet without repeating an entry.
        let mut r = s.range(StreamId::new(1, 0), StreamId::new(3, 0));
        assert_eq!(r.next().map(|e| e.id.ms), Some(1));
        assert_eq!(r.next_back().map(|e| e.id.ms), Some(3));
        assert_eq!(r.next().map(|e| e.id.ms), Some(2));
        assert!(r.next().is_none() && r.next_back().is_none());
    }

    #[test]
    fn delete_marks_and_drops_empty_nodes() {
        let mut s = filled(3);
        assert!(s.delete(StreamId::new(1, 0)));
        assert!(!s.delete(StreamId::new(1, 0)));
        assert_eq!(s.first_id, StreamId::new(2, 0));
        assert!(s.delete(StreamId::new(2, 0)) && s.delete(StreamId::new(3, 0)));
        assert_eq!((s.len(), s.nodes(), s.first_id), (0, 0, StreamId::ZERO));
        assert_eq!(s.last_id, StreamId::new(3, 0));
    }

    #[test]
    fn trimming_as_redis() {
        let mut s = filled(250);
        // Approximate: whole nodes only.
        assert_eq!(s.trim(Trim::MaxLen(120), true, 0), 100);
        assert_eq!(s.len(), 150);
        assert_eq!(s.trim(Trim::MaxLen(120), true, 0), 0);
        // Exact: into the node.
        assert_eq!(s.trim(Trim::MaxLen(120), false, 0), 30);
        assert_eq!(s.first_id, StreamId::new(131, 0));
        let mut s = filled(250);
        assert_eq!(s.trim(Trim::MinId(StreamId::new(150, 0)), false, 0), 149);
        assert_eq!(s.first_id, StreamId::new(150, 0));
        let mut s = filled(250);
        assert_eq!(s.trim(Trim::MinId(StreamId::new(150, 0)), true, 0), 100);
        // A limit smaller than a node stops before it.
        let mut s = filled(250);
        assert_eq!(s.trim(Trim::MaxLen(0), true, 50), 0);
        assert_eq!(s.trim(Trim::MaxLen(0), true, 200), 200);
    }

    #[test]
    fn next_id_follows_clock_and_never_goes_back() {
        let mut s = Stream::default();
        assert_eq!(s.next_id(10), Some(StreamId::new(10, 0)));
        s.append(StreamId::new(10, 0), &fields(&["a", "b"]), LIMITS);
        assert_eq!(s.next_id(5), Some(StreamId::new(10, 1)));
        s.last_id = StreamId::MAX;
        assert_eq!(s.next_id(5), None);
    }
}
