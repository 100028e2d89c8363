//! A rewrite's base file in the append-only format: the dataset as the
//! commands that rebuild it, as Redis 7.0.15's `rewriteAppendOnlyFileRio`
//! writes them (functions first, then each database's keys: SET, RPUSH,
//! SADD, ZADD, HMSET in commands of at most 64 items, streams as XADD,
//! XSETID, XGROUP CREATE, XCLAIM and XGROUP CREATECONSUMER; a deadline as
//! PEXPIREAT). It reads only what it is given: the whole keyspace under
//! the engine lock ([`dataset`]), or a snapshot's walk a key at a time
//! ([`Commands`], from [`crate::persist::snapshot`]).

use bytes::{BufMut, BytesMut};

use crate::lua::functions::Libraries;
use crate::store::db::Db;
use crate::store::item::ValueRef;
use crate::store::stream::StreamId;

/// Items per command of a large collection (Redis's `AOF_REWRITE_ITEMS_PER_CMD`).
const ITEMS_PER_CMD: usize = 64;

/// A RESP array of bulk strings built piece by piece.
struct Out<'a>(&'a mut BytesMut);

impl Out<'_> {
    fn count(&mut self, n: usize) {
        self.0.put_u8(b'*');
        self.0.put_slice(itoa::Buffer::new().format(n).as_bytes());
        self.0.put_slice(b"\r\n");
    }
    fn bulk(&mut self, b: &[u8]) {
        self.0.put_u8(b'$');
        self.0.put_slice(itoa::Buffer::new().format(b.len()).as_bytes());
        self.0.put_slice(b"\r\n");
        self.0.put_slice(b);
        self.0.put_slice(b"\r\n");
    }
    fn int(&mut self, n: i64) {
        self.bulk(itoa::Buffer::new().format(n).as_bytes());
    }
    fn command(&mut self, args: &[&[u8]]) {
        self.count(args.len());
        for a in args {
            self.bulk(a);
        }
    }
    /// Items in commands of at most [`ITEMS_PER_CMD`]: `name key item...`,
    /// each item `width` arguments.
    fn batched<'i>(
        &mut self,
        name: &[u8],
        key: &[u8],
        len: usize,
        width: usize,
        items: impl Iterator<Item = Vec<Vec<u8>>> + 'i,
    ) {
        let mut left = len;
        let mut in_cmd = 0;
        for item in items {
            if in_cmd == 0 {
                let n = left.min(ITEMS_PER_CMD);
                self.count(2 + n * width);
                self.bulk(name);
                self.bulk(key);
            }
            for part in &item {
                self.bulk(part);
            }
            in_cmd += 1;
            left -= 1;
            if in_cmd == ITEMS_PER_CMD {
                in_cmd = 0;
            }
        }
    }
}

fn id_text(id: StreamId) -> Vec<u8> {
    id.to_string().into_bytes()
}

/// A base file in commands, written a key at a time (the snapshot's walk
/// feeds it a slice at a time; [`dataset`] the whole keyspace at once).
#[derive(Default)]
pub(crate) struct Commands {
    buf: BytesMut,
    /// The database the last SELECT chose: the next key of another one selects it.
    selected: Option<usize>,
}

impl Commands {
    /// A new file: the `#TS:` annotation first under `aof-timestamp-enabled`,
    /// then every function library.
    pub(crate) fn start<'c>(now: u64, timestamp: bool, libraries: impl Iterator<Item = &'c [u8]>) -> Commands {
        let mut c = Commands::default();
        if timestamp {
            c.buf.put_slice(format!("#TS:{}\r\n", now / 1000).as_bytes());
        }
        for code in libraries {
            Out(&mut c.buf).command(&[b"FUNCTION", b"LOAD", code]);
        }
        c
    }

    /// One key of database `db`, with its deadline (0: none).
    pub(crate) fn key(&mut self, db: usize, key: &[u8], entry: ValueRef, expire_at: u64) {
        let mut out = Out(&mut self.buf);
        if self.selected != Some(db) {
            out.count(2);
            out.bulk(b"SELECT");
            out.int(db as i64);
            self.selected = Some(db);
        }
        value(&mut out, key, entry);
        if expire_at != 0 {
            out.count(3);
            out.bulk(b"PEXPIREAT");
            out.bulk(key);
            out.int(expire_at as i64);
        }
    }

    /// The bytes written since the last take.
    pub(crate) fn take(&mut self) -> BytesMut {
        self.buf.split()
    }

    /// Moves the bytes written so far to the end of `out`, keeping the
    /// buffer's capacity for the next keys.
    pub(crate) fn drain_into(&mut self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.buf);
        self.buf.clear();
    }
}

/// The whole dataset at `now` as a base file's bytes; `timestamp`: the
/// `#TS:` annotation first (`aof-timestamp-enabled`).
pub(crate) fn dataset(dbs: &[Db], libraries: &Libraries, now: u64, timestamp: bool) -> BytesMut {
    let mut c = Commands::start(now, timestamp, libraries.iter().map(|l| &l.code[..]));
    for (index, db) in dbs.iter().enumerate() {
        for (key, entry) in db.live_keys(now) {
            c.key(index, key, entry.value, entry.expire_at);
        }
    }
    c.take()
}

fn value(out: &mut Out, key: &[u8], value: ValueRef) {
    match value {
        ValueRef::Str(s) => out.command(&[b"SET", key, s]),
        ValueRef::List(list) => out.batched(b"RPUSH", key, list.len(), 1, list.iter().map(|e| vec![e.to_vec()])),
        ValueRef::Set(set) => out.batched(
            b"SADD",
            key,
            set.len(),
            1,
            set.iter().map(|m| vec![m.to_bytes().to_vec()]),
        ),
        ValueRef::ZSet(zset) => out.batched(
            b"ZADD",
            key,
            zset.len(),
            2,
            zset.iter()
                .map(|(m, score)| vec![crate::protocol::format_double(score).into_bytes(), m.to_vec()]),
        ),
        ValueRef::Hash(hash) => {
            let pairs: Vec<Vec<Vec<u8>>> = hash.iter().map(|(f, v)| vec![f.to_vec(), v.to_vec()]).collect();
            out.batched(b"HMSET", key, pairs.len(), 2, pairs.into_iter());
        }
        ValueRef::Stream(stream) => {
            if !stream.is_empty() {
                for entry in stream.iter() {
                    let fields: Vec<(&[u8], &[u8])> = entry.fields().collect();
                    out.count(3 + fields.len() * 2);
                    out.bulk(b"XADD");
                    out.bulk(key);
                    out.bulk(&id_text(entry.id));
                    for (f, v) in fields {
                        out.bulk(f);
                        out.bulk(v);
                    }
                }
            } else {
                // An empty stream: XADD MAXLEN 0 makes it, as Redis does.
                out.command(&[b"XADD", key, b"MAXLEN", b"0", b"0-1", b"x", b"y"]);
            }
            let added = stream.entries_added.to_string();
            out.command(&[
                b"XSETID",
                key,
                &id_text(stream.last_id),
                b"ENTRIESADDED",
                added.as_bytes(),
                b"MAXDELETEDID",
                &id_text(stream.max_deleted),
            ]);
            for (name, group) in stream.groups() {
                let read = group.entries_read.map_or(-1, |n| n as i64).to_string();
                out.command(&[
                    b"XGROUP",
                    b"CREATE",
                    key,
                    name,
                    &id_text(group.last_id),
                    b"ENTRIESREAD",
                    read.as_bytes(),
                ]);
                for (consumer, state) in &group.consumers {
                    if state.pending.is_empty() {
                        out.command(&[b"XGROUP", b"CREATECONSUMER", key, name, consumer]);
                        continue;
                    }
                    for id in &state.pending {
                        let Some(nack) = group.pending.get(id) else { continue };
                        let (time, count) = (nack.delivered_at.to_string(), nack.deliveries.to_string());
                        out.command(&[
                            b"XCLAIM",
                            key,
                            name,
                            consumer,
                            b"0",
                            &id_text(*id),
                            b"TIME",
                            time.as_bytes(),
                            b"RETRYCOUNT",
                            count.as_bytes(),
                            b"JUSTID",
                            b"FORCE",
                        ]);
                    }
                }
            }
        }
    }
}
