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
//! [`Corrupt`], never a panic. Strings (node keys and listpacks, names)
//! are written with [`Out::put_string`], so LZF-compressed under
//! `rdbcompression` exactly as Redis's `rdbSaveRawString`.

use super::codec::{Corrupt, Input, Out, Result};
use super::listpack;
use super::types::{STREAM_LISTPACKS as RDB_TYPE_STREAM_LISTPACKS, STREAM_LISTPACKS_2 as RDB_TYPE_STREAM_LISTPACKS_2};
use crate::store::stream::{Consumer, Group, LoadedEntry, LoadedMeta, Pending, Stream, StreamId};
use bytes::Bytes;

/// Entry flag bits in a node's listpack (Redis's `STREAM_ITEM_FLAG_*`).
const FLAG_DELETED: i64 = 1;
const FLAG_SAME_FIELDS: i64 = 2;
/// The element ending the master entry.
const MASTER_END: i64 = 0;
/// An unknown entries-read counter (Redis's `SCG_INVALID_ENTRIES_READ`, -1).
const ENTRIES_READ_UNKNOWN: u64 = u64::MAX;
/// Bytes of a raw stream ID (rax keys, PEL entries).
const RAW_ID_LEN: usize = 16;

/// A damaged value's reason (the loader's log says it; RESTORE answers
/// Redis's one text).
fn bad(reason: &'static str) -> Corrupt {
    Corrupt::bad(reason)
}

/// Writes `stream` as an `RDB_TYPE_STREAM_LISTPACKS_2` value (without the
/// type byte, which is [`RDB_TYPE_STREAM_LISTPACKS_2`]).
pub(crate) fn write(out: &mut Out, stream: &Stream) {
    out.put_len(stream.nodes() as u64);
    for node in stream.raw_nodes() {
        out.put_string(&raw_id(node.master_id));
        out.put_string(&node_listpack(&node));
    }
    out.put_len(stream.len());
    for id in [stream.last_id, stream.first_id, stream.max_deleted] {
        out.put_len(id.ms);
        out.put_len(id.seq);
    }
    out.put_len(stream.entries_added);
    out.put_len(stream.group_count() as u64);
    for (name, group) in stream.groups() {
        out.put_string(name);
        out.put_len(group.last_id.ms);
        out.put_len(group.last_id.seq);
        out.put_len(group.entries_read.unwrap_or(ENTRIES_READ_UNKNOWN));
        out.put_len(group.pending.len() as u64);
        for (id, pending) in &group.pending {
            out.put_bytes(&raw_id(*id));
            out.put_bytes(&pending.delivered_at.to_le_bytes());
            out.put_len(pending.deliveries);
        }
        out.put_len(group.consumers.len() as u64);
        for (name, consumer) in &group.consumers {
            out.put_string(name);
            out.put_bytes(&consumer.seen_at.to_le_bytes());
            out.put_len(consumer.pending.len() as u64);
            for id in &consumer.pending {
                out.put_bytes(&raw_id(*id));
            }
        }
    }
}

/// A node's listpack, element for element as Redis builds it.
fn node_listpack(node: &crate::store::stream::RawNode<'_>) -> Vec<u8> {
    let mut lp = listpack::Builder::new();
    lp.push_int(node.live as i64);
    lp.push_int(node.deleted as i64);
    let master: Vec<&[u8]> = node.master_fields().collect();
    lp.push_int(master.len() as i64);
    master.iter().for_each(|f| lp.push(f));
    lp.push_int(MASTER_END);
    for e in node.entries() {
        let mut flags = 0;
        if e.deleted {
            flags |= FLAG_DELETED;
        }
        if e.same_fields {
            flags |= FLAG_SAME_FIELDS;
        }
        lp.push_int(flags);
        // Deltas as Redis computes them: unsigned differences read as
        // signed (a later ms with a lower seq gives a negative seq delta).
        lp.push_int(e.entry.id.ms.wrapping_sub(node.master_id.ms) as i64);
        lp.push_int(e.entry.id.seq.wrapping_sub(node.master_id.seq) as i64);
        let pairs = e.entry.len();
        if !e.same_fields {
            lp.push_int(pairs as i64);
        }
        for (field, value) in e.entry.fields() {
            if !e.same_fields {
                lp.push(field);
            }
            lp.push(value);
        }
        let elements = if e.same_fields { pairs + 3 } else { pairs * 2 + 4 };
        lp.push_int(elements as i64);
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
    let raw: &[u8; RAW_ID_LEN] = raw.try_into().map_err(|_| bad("stream node key is not a stream ID"))?;
    let (ms, seq) = raw.split_at(8);
    Ok(StreamId::new(
        u64::from_be_bytes(ms.try_into().expect("8 bytes")),
        u64::from_be_bytes(seq.try_into().expect("8 bytes")),
    ))
}

/// Reads a stream value of type `rdb_type` ([`RDB_TYPE_STREAM_LISTPACKS`]
/// or [`RDB_TYPE_STREAM_LISTPACKS_2`]) from `input`.
pub(crate) fn read(input: &mut Input<'_>, rdb_type: u8) -> Result<Stream> {
    let v2 = match rdb_type {
        RDB_TYPE_STREAM_LISTPACKS => false,
        RDB_TYPE_STREAM_LISTPACKS_2 => true,
        _ => return Err(bad("not a stream type")),
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
    stream.finish_load(meta).map_err(Corrupt::bad)?;
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
                return Err(bad("duplicated global PEL entry"));
            }
        }
        for _ in 0..input.len()? {
            let consumer_name = Bytes::from(input.string()?.into_owned());
            let mut consumer = Consumer {
                seen_at: input.u64_le()?,
                ..Consumer::default()
            };
            for _ in 0..input.len()? {
                let id = parse_raw_id(input.bytes(RAW_ID_LEN)?)?;
                let Some((delivered_at, deliveries)) = unowned.remove(&id) else {
                    return Err(bad("consumer PEL entry not in the group's PEL, or held twice"));
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
                return Err(bad("duplicate stream consumer"));
            }
        }
        if !unowned.is_empty() {
            return Err(bad("stream group PEL entry without consumer"));
        }
        if !stream.add_group(&name, group) {
            return Err(bad("duplicated consumer group name"));
        }
    }
    Ok(stream)
}

/// Decodes one node's listpack into `stream`.
fn load_node(stream: &mut Stream, master_id: StreamId, lp: &[u8]) -> Result<()> {
    let elements = listpack::decode(lp)?;
    // Every element as the bytes a command sees (an integer's as its text).
    let texts: Vec<Vec<u8>> = elements.iter().map(|e| e.to_bytes()).collect();
    let mut it = elements.iter();
    let mut next_int = || -> Result<i64> {
        it.next()
            .ok_or(bad("stream listpack ends early"))?
            .as_int()
            .ok_or(bad("stream listpack: an integer expected"))
    };
    let live = next_int()?;
    let deleted = next_int()?;
    let master_count = next_int()?;
    let count = |n: i64| usize::try_from(n).map_err(|_| bad("stream listpack: a negative count"));
    let master_count = count(master_count)?;
    let rest = &elements[3..];
    let rest_text = &texts[3..];
    if rest.len() < master_count + 1 {
        return Err(bad("stream listpack ends early"));
    }
    let master: Vec<&[u8]> = rest_text[..master_count].iter().map(|t| t.as_slice()).collect();
    if rest[master_count].as_int() != Some(MASTER_END) {
        return Err(bad("stream listpack: master entry not terminated"));
    }
    let mut at = master_count + 1;
    let mut entries = vec![];
    let (mut seen_live, mut seen_deleted) = (0, 0);
    while at < rest.len() {
        let int_at = |i: usize| -> Result<i64> {
            rest.get(i)
                .ok_or(bad("stream listpack ends early"))?
                .as_int()
                .ok_or(bad("stream listpack: an integer expected"))
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
            .ok_or(bad("stream listpack ends early"))?;
        let mut fields = Vec::with_capacity(pairs * 2);
        for i in 0..pairs {
            if same {
                fields.push(master[i]);
                fields.push(&rest_text[fields_at + i]);
            } else {
                fields.push(&rest_text[fields_at + 2 * i]);
                fields.push(&rest_text[fields_at + 2 * i + 1]);
            }
        }
        let elements_count = if same { pairs + 3 } else { pairs * 2 + 4 };
        if int_at(end)? != elements_count as i64 {
            return Err(bad("stream listpack: entry element count mismatch"));
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
        return Err(bad("stream listpack: entry counts do not match the master entry"));
    }
    stream.load_node(master_id, &master, &entries).map_err(Corrupt::bad)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::stream::{NodeLimits, Trim};
    use crate::testing::{parse_resp, RawClient, RedisServer, Resp};

    use crate::persist::rdb::RDB_VERSION;
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
        let mut input = Input::new(body);
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

    /// The `rdbcompression` settings every byte comparison runs under.
    const COMPRESSIONS: [&str; 2] = ["no", "yes"];

    fn redis_with(compression: &str) -> Option<RedisServer> {
        RedisServer::start(&["--enable-debug-command", "yes", "--rdbcompression", compression]).unwrap()
    }

    fn redis() -> Option<RedisServer> {
        redis_with("no")
    }

    /// `stream` as [`write`] encodes it under `rdbcompression`.
    fn encode(stream: &Stream, compression: &str) -> Vec<u8> {
        let mut out = Out::new(compression == "yes");
        write(&mut out, stream);
        out.buf
    }

    const KEYS: &[&str] = &["s:groups", "s:empty", "s:one", "s:big"];

    /// What Redis DUMPs reads back, and writes out again byte for byte.
    #[test]
    fn redis_dumps_read_and_write_back_identically() {
        for compression in COMPRESSIONS {
            let Some(redis) = redis_with(compression) else {
                return;
            };
            let mut c = RawClient::connect(redis.addr()).unwrap();
            WORKLOAD.iter().for_each(|w| run(&mut c, w));
            big_stream(&mut c);
            for key in KEYS {
                let (rdb_type, body) = dump_body(&mut c, key);
                assert_eq!(rdb_type, RDB_TYPE_STREAM_LISTPACKS_2, "{key}");
                let stream = read_all(rdb_type, &body).unwrap_or_else(|e| panic!("{key}: {e:?}"));
                assert_eq!(
                    encode(&stream, compression),
                    body,
                    "{key} (compression {compression}): written bytes differ from Redis's"
                );
            }
        }
        let Some(redis) = redis() else {
            return;
        };
        let mut c = RawClient::connect(redis.addr()).unwrap();
        WORKLOAD.iter().for_each(|w| run(&mut c, w));
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
        for compression in COMPRESSIONS {
            let Some(redis) = redis_with(compression) else {
                return;
            };
            let mut c = RawClient::connect(redis.addr()).unwrap();
            run(&mut c, "CONFIG SET stream-node-max-entries 7");
            big_stream(&mut c);
            let (_, theirs) = dump_body(&mut c, "s:big");
            assert_eq!(
                encode(&coordis_big_stream(), compression),
                theirs,
                "coordis's stream encodes differently from Redis's (compression {compression})"
            );
        }
    }

    /// [`big_stream`]'s commands run on a coordis stream.
    fn coordis_big_stream() -> Stream {
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
        s
    }

    /// What coordis writes, Redis RESTOREs into the same stream: the same
    /// DEBUG DIGEST-VALUE and XINFO STREAM FULL as the key it came from,
    /// also when Redis's own DUMP was LZF-compressed.
    #[test]
    fn redis_restores_what_coordis_writes() {
        for compression in COMPRESSIONS {
            let Some(redis) = redis_with(compression) else {
                return;
            };
            let mut c = RawClient::connect(redis.addr()).unwrap();
            run(&mut c, "DEBUG SET-SKIP-CHECKSUM-VALIDATION 1");
            WORKLOAD.iter().for_each(|w| run(&mut c, w));
            big_stream(&mut c);
            for key in KEYS {
                let (t, body) = dump_body(&mut c, key);
                let stream = read_all(t, &body).unwrap_or_else(|e| panic!("{key} (compression {compression}): {e:?}"));
                let out = encode(&stream, compression);
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
        let mut v1 = Out::new(false);
        v1.put_len(s.nodes() as u64);
        for node in s.raw_nodes() {
            v1.put_string(&raw_id(node.master_id));
            v1.put_string(&node_listpack(&node));
        }
        v1.put_len(s.len());
        v1.put_len(8);
        v1.put_len(0);
        v1.put_len(2);
        for (name, g) in s.groups() {
            v1.put_string(name);
            v1.put_len(g.last_id.ms);
            v1.put_len(g.last_id.seq);
            v1.put_len(0);
            v1.put_len(0);
        }
        let loaded = read_all(RDB_TYPE_STREAM_LISTPACKS, &v1.buf).unwrap();
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
            &[b"RESTORE", b"v1", b"0", &payload(RDB_TYPE_STREAM_LISTPACKS, &v1.buf)],
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
        let body = encode(&s, "yes");
        assert_eq!(read_all(RDB_TYPE_STREAM_LISTPACKS_2, &body).unwrap(), s);
        for cut in 0..body.len() {
            assert!(
                read(&mut Input::new(&body[..cut]), RDB_TYPE_STREAM_LISTPACKS_2).is_err(),
                "cut at {cut}"
            );
        }
        for at in 0..body.len() {
            for flip in [0x01u8, 0x80, 0xff] {
                let mut bad = body.clone();
                bad[at] ^= flip;
                let _ = read(&mut Input::new(&bad), RDB_TYPE_STREAM_LISTPACKS_2);
            }
        }
    }
}
