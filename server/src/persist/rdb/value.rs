//! Values in the RDB format: the type byte and the encoding Redis 7.0.15
//! writes for the same content and directives, and every type Redis 7.0
//! loads, with Redis's conversions (a loaded value's OBJECT ENCODING is
//! what Redis would show).
//!
//! Written: strings; lists as QUICKLIST_2 of listpack nodes split as
//! `list-max-listpack-size` splits a list built by RPUSH (Redis's node
//! boundaries after LPUSH or LINSERT are not kept by coordis's lists);
//! sets as SET_INTSET (the narrowest width) or SET; hashes as
//! HASH_LISTPACK or HASH; sorted sets as ZSET_LISTPACK or ZSET_2.
//! Streams go to [`super::stream`].
//!
//! Packed encodings are always validated deeply (coordis's structures
//! cannot hold a corrupt one), and duplicates are always refused.

use std::collections::HashSet;

use super::codec::{Corrupt, Input, Out, Result};
use super::{intset, listpack, stream, types, ziplist, zipmap, SaveError};
use crate::config::Config;
use crate::store::hash::{Hash, HashRef, Limits as HashLimits};
use crate::store::list::{End, Fill, List};
use crate::store::set::{Member, Set};
use crate::store::zset::{Listpack as ZsetLimits, ZSet};
use crate::store::{Value, ValueRef};

/// A quicklist node's container (`QUICKLIST_NODE_CONTAINER_*`).
const CONTAINER_PLAIN: u64 = 1;
const CONTAINER_PACKED: u64 = 2;
/// Redis's estimate of an entry's overhead in a node (`SIZE_ESTIMATE_OVERHEAD`).
const NODE_ENTRY_OVERHEAD: usize = 8;
/// A count-limited node never passes this many bytes (`SIZE_SAFETY_LIMIT`).
const NODE_SAFETY_LIMIT: usize = 8192;
/// Size classes of negative fills (`optimization_level`).
const NODE_SIZE_CLASSES: [usize; 5] = [4096, 8192, 16384, 32768, 65536];
/// Elements this long go in a node of their own (`packed_threshold`).
const PLAIN_THRESHOLD: usize = 1 << 30;
/// The widest positive fill (`FILL_MAX`).
const FILL_MAX: i64 = (1 << 15) - 1;

/// The directives that decide encodings when writing and loading.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Encodings {
    pub(crate) zset: ZsetLimits,
    pub(crate) hash: HashLimits,
    pub(crate) max_intset: usize,
    pub(crate) fill: i64,
}

impl Encodings {
    pub(crate) fn of(config: &Config) -> Encodings {
        Encodings {
            zset: config.zset_listpack(),
            hash: config.hash_listpack(),
            max_intset: config.set_max_intset_entries,
            fill: config.list_max_listpack_size,
        }
    }
}

/// Whether a quicklist node of `node_bytes` (listpack size) and `count`
/// entries takes an entry of `len` bytes (`_quicklistNodeAllowInsert`).
fn node_allows(node_bytes: usize, count: usize, fill: i64, len: usize) -> bool {
    let fill = fill.clamp(-(NODE_SIZE_CLASSES.len() as i64), FILL_MAX);
    let new_sz = node_bytes + len + NODE_ENTRY_OVERHEAD;
    if fill < 0 {
        return new_sz <= NODE_SIZE_CLASSES[(-fill - 1) as usize];
    }
    new_sz <= NODE_SAFETY_LIMIT && (count as i64) < fill
}

fn write_list(out: &mut Out, list: &List, fill: i64) {
    enum Node {
        Packed(listpack::Builder),
        Plain(Vec<u8>),
    }
    let mut nodes: Vec<Node> = vec![];
    for item in list.iter() {
        if item.len() >= PLAIN_THRESHOLD {
            nodes.push(Node::Plain(item.to_vec()));
            continue;
        }
        match nodes.last_mut() {
            Some(Node::Packed(b)) if node_allows(b.bytes(), b.count(), fill, item.len()) => b.push(item),
            _ => {
                let mut b = listpack::Builder::new();
                b.push(item);
                nodes.push(Node::Packed(b));
            }
        }
    }
    out.put_u8(types::LIST_QUICKLIST_2);
    out.put_len(nodes.len() as u64);
    for node in nodes {
        match node {
            Node::Plain(item) => {
                out.put_len(CONTAINER_PLAIN);
                out.put_string(&item);
            }
            Node::Packed(b) => {
                out.put_len(CONTAINER_PACKED);
                out.put_string(&b.finish());
            }
        }
    }
}

/// A zset score as a listpack entry (Redis's `zzlInsertAt`: integral
/// scores as integers, others as `d2string` text).
fn push_score(b: &mut listpack::Builder, score: f64) {
    let half = (i64::MAX / 2) as f64;
    if (-half..=half).contains(&score) && (score as i64) as f64 == score {
        b.push_int(score as i64);
    } else if score.is_nan() {
        b.push_str(b"nan");
    } else if score.is_infinite() {
        b.push_str(if score < 0.0 { b"-inf" } else { b"inf" });
    } else {
        b.push_str(crate::store::num::fmt_g17(score).as_bytes());
    }
}

/// Writes a value: its type byte, then its encoding (see the module docs).
pub(crate) fn write(out: &mut Out, value: ValueRef<'_>, enc: &Encodings) -> std::result::Result<(), SaveError> {
    match value {
        ValueRef::Str(s) => {
            out.put_u8(types::STRING);
            out.put_string(s);
        }
        ValueRef::List(list) => write_list(out, list, enc.fill),
        ValueRef::Set(set) => match set {
            Set::Ints(v) => {
                out.put_u8(types::SET_INTSET);
                out.put_string(&intset::encode(v));
            }
            Set::Table(_) => {
                out.put_u8(types::SET);
                out.put_len(set.len() as u64);
                for m in set.iter() {
                    match m {
                        Member::Int(i) => out.put_int(i),
                        Member::Bytes(b) => out.put_string(b),
                    }
                }
            }
        },
        ValueRef::Hash(h) => match h {
            HashRef::Listpack(_) => {
                out.put_u8(types::HASH_LISTPACK);
                let mut b = listpack::Builder::new();
                for (f, v) in h.iter() {
                    b.push(f);
                    b.push(v);
                }
                out.put_string(&b.finish());
            }
            HashRef::Table(_) => {
                out.put_u8(types::HASH);
                out.put_len(h.len() as u64);
                for (f, v) in h.iter() {
                    out.put_string(f);
                    out.put_string(v);
                }
            }
        },
        ValueRef::ZSet(z) => {
            if z.encoding() == "listpack" {
                out.put_u8(types::ZSET_LISTPACK);
                let mut b = listpack::Builder::new();
                for (m, s) in z.iter() {
                    b.push(m);
                    push_score(&mut b, s);
                }
                out.put_string(&b.finish());
            } else {
                // Redis writes a skiplist from its greatest element down.
                out.put_u8(types::ZSET_2);
                out.put_len(z.len() as u64);
                let items: Vec<(&[u8], f64)> = z.iter().collect();
                for (m, s) in items.into_iter().rev() {
                    out.put_string(m);
                    out.put_double_bin(s);
                }
            }
        }
        ValueRef::Stream(s) => {
            out.put_u8(types::STREAM_LISTPACKS_2);
            stream::write(out, s);
        }
    }
    Ok(())
}

/// A count read from the input that cannot exceed what is left of it
/// (every element takes at least a byte), so a corrupt count cannot make
/// the reader reserve memory it will never fill.
fn count(input: &mut Input<'_>) -> Result<usize> {
    let n = input.len_usize()?;
    if n > input.rest().len() {
        return Err(input.short_of(n));
    }
    Ok(n)
}

fn list_of(items: impl IntoIterator<Item = Vec<u8>>, fill: Fill) -> Result<Value> {
    let mut list = List::default();
    for item in items {
        list.push(End::Tail, &item, fill);
    }
    if list.is_empty() {
        return Err(Corrupt::EmptyKey);
    }
    Ok(Value::List(Box::new(list)))
}

fn set_of(members: Vec<Vec<u8>>, max_intset: usize) -> Result<Value> {
    let first = members.first().ok_or(Corrupt::EmptyKey)?;
    let mut set = Set::for_member(first);
    for m in &members {
        if !set.add(m, max_intset) {
            return Err(Corrupt::bad("Duplicate set members detected"));
        }
    }
    Ok(Value::Set(Box::new(set)))
}

fn hash_of(pairs: Vec<(Vec<u8>, Vec<u8>)>, limits: HashLimits) -> Result<Value> {
    if pairs.is_empty() {
        return Err(Corrupt::EmptyKey);
    }
    let mut hash = Hash::default();
    let mut seen = HashSet::with_capacity(pairs.len());
    for (f, v) in &pairs {
        if !seen.insert(&f[..]) {
            return Err(Corrupt::bad("Duplicate hash fields detected"));
        }
        hash.set(f, v, limits);
    }
    Ok(Value::Hash(Box::new(hash)))
}

fn zset_of(items: Vec<(Vec<u8>, f64)>, limits: ZsetLimits) -> Result<Value> {
    if items.is_empty() {
        return Err(Corrupt::EmptyKey);
    }
    let mut seen = HashSet::with_capacity(items.len());
    for (m, s) in &items {
        if s.is_nan() {
            return Err(Corrupt::bad("Zset with NAN score detected"));
        }
        if !seen.insert(&m[..]) {
            return Err(Corrupt::bad("Duplicate zset fields detected"));
        }
    }
    Ok(Value::ZSet(Box::new(ZSet::from_items(
        items.iter().map(|(m, s)| (&m[..], *s)),
        limits,
    ))))
}

/// Pairs of a flat sequence (an even count, else corrupt).
fn pairs<T>(items: Vec<T>) -> Result<Vec<(T, T)>> {
    if !items.len().is_multiple_of(2) {
        return Err(Corrupt::bad("Odd number of entries in a pairs encoding"));
    }
    let mut out = Vec::with_capacity(items.len() / 2);
    let mut it = items.into_iter();
    while let (Some(a), Some(b)) = (it.next(), it.next()) {
        out.push((a, b));
    }
    Ok(out)
}

fn parse_score(s: &[u8]) -> Result<f64> {
    std::str::from_utf8(s)
        .ok()
        .and_then(|t| t.parse::<f64>().ok())
        .ok_or_else(|| Corrupt::bad("Invalid score in a sorted set encoding"))
}

/// Reads a value of RDB type `rdb_type` (the type byte already read) into
/// the encoding Redis would give it under `enc`'s directives. `deep` is
/// `sanitize-dump-payload`'s deep validation (packed encodings are
/// validated deeply whatever it says, the stream codec's too).
pub(crate) fn read(input: &mut Input<'_>, rdb_type: u8, enc: &Encodings, _deep: bool) -> Result<Value> {
    let fill = Fill(enc.fill);
    match rdb_type {
        types::STRING => Ok(Value::Str(bytes::Bytes::from(input.string()?.into_owned()))),
        types::LIST => {
            let n = count(input)?;
            let mut items = Vec::with_capacity(n);
            for _ in 0..n {
                items.push(input.string()?.into_owned());
            }
            list_of(items, fill)
        }
        types::LIST_ZIPLIST => list_of(ziplist::decode(&input.string()?)?, fill),
        types::LIST_QUICKLIST | types::LIST_QUICKLIST_2 => {
            let n = count(input)?;
            let mut items = vec![];
            for _ in 0..n {
                let container = if rdb_type == types::LIST_QUICKLIST_2 {
                    input.len()?
                } else {
                    CONTAINER_PACKED
                };
                let node = input.string()?;
                match container {
                    CONTAINER_PLAIN => items.push(node.into_owned()),
                    CONTAINER_PACKED if rdb_type == types::LIST_QUICKLIST => items.extend(ziplist::decode(&node)?),
                    CONTAINER_PACKED => items.extend(listpack::decode(&node)?.into_iter().map(|e| e.to_bytes())),
                    _ => return Err(Corrupt::bad("Quicklist integrity check failed.")),
                }
            }
            list_of(items, fill)
        }
        types::SET => {
            let n = count(input)?;
            let mut members = Vec::with_capacity(n);
            for _ in 0..n {
                members.push(input.string()?.into_owned());
            }
            set_of(members, enc.max_intset)
        }
        types::SET_INTSET => {
            let members = intset::decode(&input.string()?)?;
            set_of(
                members.iter().map(|i| i.to_string().into_bytes()).collect(),
                enc.max_intset,
            )
        }
        types::ZSET | types::ZSET_2 => {
            let n = count(input)?;
            let mut items = Vec::with_capacity(n);
            for _ in 0..n {
                let m = input.string()?.into_owned();
                let s = if rdb_type == types::ZSET_2 {
                    input.double_bin()?
                } else {
                    input.double_text()?
                };
                items.push((m, s));
            }
            zset_of(items, enc.zset)
        }
        types::ZSET_ZIPLIST => {
            let items = pairs(ziplist::decode(&input.string()?)?)?;
            let items = items
                .into_iter()
                .map(|(m, s)| Ok((m, parse_score(&s)?)))
                .collect::<Result<Vec<_>>>()?;
            zset_of(items, enc.zset)
        }
        types::ZSET_LISTPACK => {
            let lp = input.string()?;
            let items = pairs(listpack::decode(&lp)?)?;
            let items = items
                .into_iter()
                .map(|(m, s)| {
                    let score = match s {
                        listpack::Entry::Int(i) => i as f64,
                        listpack::Entry::Str(t) => parse_score(t)?,
                    };
                    Ok((m.to_bytes(), score))
                })
                .collect::<Result<Vec<_>>>()?;
            zset_of(items, enc.zset)
        }
        types::HASH => {
            let n = count(input)?;
            let mut items = Vec::with_capacity(n);
            for _ in 0..n {
                let f = input.string()?.into_owned();
                let v = input.string()?.into_owned();
                items.push((f, v));
            }
            hash_of(items, enc.hash)
        }
        types::HASH_ZIPMAP => hash_of(zipmap::decode(&input.string()?)?, enc.hash),
        types::HASH_ZIPLIST => hash_of(pairs(ziplist::decode(&input.string()?)?)?, enc.hash),
        types::HASH_LISTPACK => {
            let lp = input.string()?;
            let items = pairs(listpack::decode(&lp)?.into_iter().map(|e| e.to_bytes()).collect())?;
            hash_of(items, enc.hash)
        }
        types::STREAM_LISTPACKS | types::STREAM_LISTPACKS_2 => {
            // Every packed part of a stream is validated whatever `deep` says.
            Ok(Value::Stream(Box::new(stream::read(input, rdb_type)?)))
        }
        types::MODULE | types::MODULE_2 => Err(Corrupt::bad("Module values cannot be loaded: coordis has no modules")),
        other => Err(Corrupt::bad(format!("Unknown RDB encoding type {other}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc() -> Encodings {
        Encodings::of(&Config::default())
    }

    fn dump(v: &Value) -> Vec<u8> {
        let mut out = Out::new(true);
        write(&mut out, v.as_value_ref(), &enc()).unwrap();
        out.buf
    }

    fn load(bytes: &[u8]) -> Result<Value> {
        let mut input = Input::new(bytes);
        let t = input.u8()?;
        read(&mut input, t, &enc(), false)
    }

    #[test]
    fn bytes_equal_redis_s_dumps() {
        // Bodies of Redis 7.0.15 DUMPs (footer removed).
        let mut list = List::default();
        for v in ["a", "1", "-5", "300"] {
            list.push(End::Tail, v.as_bytes(), Fill(-2));
        }
        let v = Value::List(Box::new(list));
        let redis = b"\x12\x01\x02\x12\x12\x00\x00\x00\x04\x00\x81a\x02\x01\x01\xdf\xfb\x02\xc1,\x02\xff";
        assert_eq!(dump(&v), redis.to_vec());
        let z = ZSet::from_items([(&b"a"[..], -0.0), (b"b", 1.5), (b"c", 2.0), (b"d", 1e100)], enc().zset);
        let redis = b"\x11$$\x00\x00\x00\x08\x00\x81a\x02\x00\x01\x81b\x02\x831.5\x04\x81c\x02\x02\x01\x81d\x02\x861e+100\x07\xff";
        assert_eq!(dump(&Value::ZSet(Box::new(z))), redis.to_vec());
        for bytes in [
            &b"\x12\x01\x02\x12\x12\x00\x00\x00\x04\x00\x81a\x02\x01\x01\xdf\xfb\x02\xc1,\x02\xff"[..],
            redis,
        ] {
            let back = load(bytes).unwrap();
            assert_eq!(dump(&back), bytes.to_vec());
        }
    }

    #[test]
    fn every_truncation_is_an_error() {
        let mut hash = Hash::default();
        hash.set(b"f", b"v", enc().hash);
        hash.set(b"n", b"12", enc().hash);
        let values = [
            Value::Str(bytes::Bytes::from_static(b"hello")),
            Value::Hash(Box::new(hash)),
        ];
        for v in values {
            let bytes = dump(&v);
            assert!(load(&bytes).is_ok());
            for cut in 0..bytes.len() {
                assert!(load(&bytes[..cut]).is_err(), "{cut}");
            }
        }
    }
}
