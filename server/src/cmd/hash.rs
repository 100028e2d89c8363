//! Hashes: HSET, HSETNX, HMSET, HGET, HMGET, HGETALL, HDEL, HEXISTS, HLEN,
//! HKEYS, HVALS, HSTRLEN, HINCRBY, HINCRBYFLOAT, HRANDFIELD, HSCAN.
//!
//! The value lives in [`crate::store::hash`] (listpack or hashtable, as
//! Redis 7.0 encodes it); events are Redis's (`hset`, `hdel`, `hincrby`,
//! `hincrbyfloat`, then `del` when the last field goes).
//!
//! Changes are counted as Redis counts them: HSET and HMSET one per pair
//! given (new or not), HSETNX and HINCRBY one, HDEL one per field removed.
//! HINCRBYFLOAT's effect is `HSET key field <result>`, so a replica stores
//! the same text whatever its float arithmetic.

use bytes::Bytes;

use super::args::{int, is};
use super::flags::*;
use super::{acl, scan, CommandSpec, Ctx};
use crate::errors::{self, err};
use crate::notify;
use crate::protocol::Reply;
use crate::store::hash::{Hash, HashEdit, HashRef};
use crate::store::num::{self, FloatIncr};
use crate::store::{HashMut, Value, ValueMut, ValueRef};
use crate::tri;

macro_rules! spec {
    ($($row:tt)*) => { command!("hash", $($row)*) };
}

#[rustfmt::skip]
pub(crate) static COMMANDS: &[CommandSpec] = &[
    spec!("hset", -4, WRITE | DENYOOM | FAST, acl::HASH, "Set the string value of a hash field", hset),
    spec!("hsetnx", 4, WRITE | DENYOOM | FAST, acl::HASH, "Set the value of a hash field, only if the field does not exist", hsetnx),
    spec!("hmset", -4, WRITE | DENYOOM | FAST, acl::HASH, "Set multiple hash fields to multiple values", hset),
    spec!("hget", 3, READONLY | FAST, acl::HASH, "Get the value of a hash field", hget),
    spec!("hmget", -3, READONLY | FAST, acl::HASH, "Get the values of all the given hash fields", hmget),
    spec!("hgetall", 2, READONLY, acl::HASH, "Get all the fields and values in a hash", hgetall),
    spec!("hdel", -3, WRITE | FAST, acl::HASH, "Delete one or more hash fields", hdel),
    spec!("hexists", 3, READONLY | FAST, acl::HASH, "Determine if a hash field exists", hexists),
    spec!("hlen", 2, READONLY | FAST, acl::HASH, "Get the number of fields in a hash", hlen),
    spec!("hkeys", 2, READONLY, acl::HASH, "Get all the fields in a hash", hkeys),
    spec!("hvals", 2, READONLY, acl::HASH, "Get all the values in a hash", hvals),
    spec!("hstrlen", 3, READONLY | FAST, acl::HASH, "Get the length of the value of a hash field", hstrlen),
    spec!("hincrby", 4, WRITE | DENYOOM | FAST, acl::HASH, "Increment the integer value of a hash field by the given number", hincrby),
    spec!("hincrbyfloat", 4, WRITE | DENYOOM | FAST, acl::HASH, "Increment the float value of a hash field by the given amount", hincrbyfloat),
    spec!("hrandfield", -2, READONLY, acl::HASH, "Get one or multiple random fields from a hash", hrandfield),
    spec!("hscan", -3, READONLY, acl::HASH, "Incrementally iterate hash fields and associated values", hscan),
];

/// The hash at `key` to read (a keyspace hit or miss, as `lookupKeyRead`).
fn read<'a>(ctx: &'a mut Ctx, key: &[u8]) -> Result<Option<HashRef<'a>>, Reply> {
    match ctx.lookup_read(key) {
        None => Ok(None),
        Some(e) => match e.value {
            ValueRef::Hash(h) => Ok(Some(h)),
            _ => Err(err(errors::WRONGTYPE)),
        },
    }
}

/// The hash at `key` as a command about to change it looks at it (no
/// keyspace hit or miss, as `lookupKeyWrite`).
fn peek<'a>(ctx: &'a mut Ctx, key: &[u8]) -> Result<Option<HashRef<'a>>, Reply> {
    let now = ctx.now;
    match ctx.db().lookup(key, now) {
        None => Ok(None),
        Some(e) => match e.value {
            ValueRef::Hash(h) => Ok(Some(h)),
            _ => Err(err(errors::WRONGTYPE)),
        },
    }
}

/// Runs `f` on the hash at `key` to change it, created empty first when
/// absent and `create` (`Ok(None)`: absent). A hashtable is changed in
/// place; a listpack, which lives inside its key's allocation, is changed
/// as a copy and written back, as Redis reallocates a listpack. The key is
/// marked changed for WATCH either way.
fn update<R>(ctx: &mut Ctx, key: &[u8], create: bool, f: impl FnOnce(&mut HashEdit) -> R) -> Result<Option<R>, Reply> {
    let now = ctx.now;
    match ctx.db().lookup_mut(key, now) {
        Some(ValueMut::Hash(HashMut::Table(t))) => {
            let r = f(&mut HashEdit::Table(t));
            ctx.db().touch(key);
            Ok(Some(r))
        }
        Some(ValueMut::Hash(HashMut::Listpack)) => {
            let mut h = peek(ctx, key)?.expect("looked up above").to_owned();
            let r = f(&mut HashEdit::Whole(&mut h));
            ctx.db().replace_value(key, Value::Hash(Box::new(h)));
            Ok(Some(r))
        }
        Some(_) => Err(err(errors::WRONGTYPE)),
        None if create => {
            let mut h = Hash::default();
            let r = f(&mut HashEdit::Whole(&mut h));
            ctx.db().insert(key, Value::Hash(Box::new(h)), 0);
            Ok(Some(r))
        }
        None => Ok(None),
    }
}

/// HSET and HMSET: field/value pairs; HSET answers how many were new.
fn hset(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    if !args.len().is_multiple_of(2) {
        return errors::wrong_args(&String::from_utf8_lossy(&args[0]).to_ascii_lowercase());
    }
    let limits = ctx.server.config.hash_listpack();
    let key = &args[1];
    let added = tri!(update(ctx, key, true, |h| {
        args[2..]
            .chunks(2)
            .map(|pair| h.set(&pair[0], &pair[1], limits) as i64)
            .sum::<i64>()
    }))
    .unwrap_or(0);
    ctx.dirty(((args.len() - 2) / 2) as u64);
    // Redis replies, then announces the change.
    ctx.replied();
    ctx.notify(notify::HASH, "hset", key);
    if is(&args[0], "hmset") {
        Reply::Ok
    } else {
        Reply::Int(added)
    }
}

fn hsetnx(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let limits = ctx.server.config.hash_listpack();
    let key = &args[1];
    if tri!(peek(ctx, key)).is_some_and(|h| h.contains(&args[2])) {
        return Reply::Int(0);
    }
    tri!(update(ctx, key, true, |h| h.set(&args[2], &args[3], limits)));
    ctx.dirty(1);
    // Redis replies, then announces the change.
    ctx.replied();
    ctx.notify(notify::HASH, "hset", key);
    Reply::Int(1)
}

fn hget(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    match tri!(read(ctx, &args[1])).and_then(|h| h.get(&args[2])) {
        Some(v) => Reply::Bulk(Bytes::copy_from_slice(v)),
        None => Reply::Nil,
    }
}

fn hmget(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let h = tri!(read(ctx, &args[1]));
    Reply::Array(
        args[2..]
            .iter()
            .map(|f| match h.and_then(|h| h.get(f)) {
                Some(v) => Reply::Bulk(Bytes::copy_from_slice(v)),
                None => Reply::Nil,
            })
            .collect(),
    )
}

fn hgetall(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let Some(h) = tri!(read(ctx, &args[1])) else {
        return Reply::Map(vec![]);
    };
    Reply::Map(
        h.iter()
            .map(|(f, v)| {
                (
                    Reply::Bulk(Bytes::copy_from_slice(f)),
                    Reply::Bulk(Bytes::copy_from_slice(v)),
                )
            })
            .collect(),
    )
}

fn hkeys(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let h = tri!(read(ctx, &args[1]));
    Reply::Array(h.map_or(vec![], |h| {
        h.iter().map(|(f, _)| Reply::Bulk(Bytes::copy_from_slice(f))).collect()
    }))
}

fn hvals(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let h = tri!(read(ctx, &args[1]));
    Reply::Array(h.map_or(vec![], |h| {
        h.iter().map(|(_, v)| Reply::Bulk(Bytes::copy_from_slice(v))).collect()
    }))
}

fn hdel(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let key = &args[1];
    let present: Vec<&Bytes> = match tri!(peek(ctx, key)) {
        None => return Reply::Int(0),
        Some(h) => args[2..].iter().filter(|f| h.contains(f)).collect(),
    };
    // Only a hash that changes is written back (a miss is no write for WATCH).
    let removed = if present.is_empty() {
        0
    } else {
        tri!(update(ctx, key, false, |h| present
            .iter()
            .map(|f| h.remove(f) as i64)
            .sum::<i64>()))
        .unwrap_or(0)
    };
    if removed > 0 {
        ctx.dirty(removed as u64);
        ctx.notify(notify::HASH, "hdel", key);
        ctx.delete_if_empty(key);
    }
    Reply::Int(removed)
}

fn hexists(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let h = tri!(read(ctx, &args[1]));
    Reply::Int(h.is_some_and(|h| h.contains(&args[2])) as i64)
}

fn hlen(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let h = tri!(read(ctx, &args[1]));
    Reply::Int(h.map_or(0, |h| h.len()) as i64)
}

fn hstrlen(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let h = tri!(read(ctx, &args[1]));
    Reply::Int(h.and_then(|h| h.get(&args[2])).map_or(0, |v| v.len()) as i64)
}

fn hincrby(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let by = tri!(int(&args[3]));
    let limits = ctx.server.config.hash_listpack();
    let key = &args[1];
    let current = tri!(peek(ctx, key)).and_then(|h| h.get(&args[2]).map(|v| num::parse_i64(v).ok_or(())));
    let current = match current {
        None => 0,
        Some(Ok(n)) => n,
        Some(Err(())) => return err(errors::HASH_NOT_INTEGER),
    };
    let Some(new) = current.checked_add(by) else {
        return err(errors::OVERFLOW);
    };
    let mut buf = itoa::Buffer::new();
    let text = buf.format(new);
    tri!(update(ctx, key, true, |h| h.set(&args[2], text.as_bytes(), limits)));
    ctx.dirty(1);
    ctx.replied();
    ctx.notify(notify::HASH, "hincrby", key);
    Reply::Int(new)
}

fn hincrbyfloat(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    if let FloatIncr::NotAFloat = num::incr_by_float(None, &args[3]) {
        return err(errors::NOT_FLOAT);
    }
    let word = String::from_utf8_lossy(&args[3]).to_ascii_lowercase();
    if matches!(word.trim_start_matches(['+', '-']), "inf" | "infinity" | "nan") {
        return err(errors::NAN_OR_INF_VALUE);
    }
    let limits = ctx.server.config.hash_listpack();
    let key = &args[1];
    let current = tri!(peek(ctx, key)).and_then(|h| h.get(&args[2]).map(|v| v.to_vec()));
    let text = match num::incr_by_float(current.as_deref(), &args[3]) {
        FloatIncr::Ok(text) => text,
        FloatIncr::NotAFloat => return err(errors::HASH_NOT_FLOAT),
        FloatIncr::NanOrInfinity => return err(errors::NAN_OR_INF),
    };
    tri!(update(ctx, key, true, |h| h.set(&args[2], &text, limits)));
    ctx.dirty(1);
    ctx.replied();
    ctx.notify(notify::HASH, "hincrbyfloat", key);
    let text = Bytes::from(text);
    ctx.propagate_as(|| vec![Bytes::from_static(b"HSET"), key.clone(), args[2].clone(), text.clone()]);
    Reply::Bulk(text)
}

/// HRANDFIELD key [count [WITHVALUES]], as Redis 7.0: a positive count
/// gives distinct fields (all of them when it is not smaller than the
/// hash), a negative one may repeat.
fn hrandfield(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let resp3 = ctx.client.resp3;
    if args.len() == 2 {
        let h = tri!(read(ctx, &args[1]));
        return match h.and_then(|h| h.nth(fastrand::usize(..h.len()))) {
            Some((f, _)) => Reply::Bulk(Bytes::copy_from_slice(f)),
            None => Reply::Nil,
        };
    }
    let count = tri!(int(&args[2]));
    let with_values = match args.len() {
        3 => false,
        4 if is(&args[3], "withvalues") => true,
        _ => return err(errors::SYNTAX),
    };
    if count == i64::MIN {
        return err(errors::LONG_OUT_OF_RANGE);
    }
    if with_values && !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&count) {
        return err(errors::VALUE_OUT_OF_RANGE);
    }
    let Some(h) = tri!(read(ctx, &args[1])) else {
        return Reply::Array(vec![]);
    };
    let len = h.len();
    let picks: Vec<usize> = if count >= 0 {
        let n = (count as usize).min(len);
        if n == len {
            (0..len).collect()
        } else {
            let mut all: Vec<usize> = (0..len).collect();
            fastrand::shuffle(&mut all);
            all.truncate(n);
            all
        }
    } else {
        let n = tri!(super::set::bounded_count(count.unsigned_abs()));
        (0..n).map(|_| fastrand::usize(..len)).collect()
    };
    let pairs: Vec<(&[u8], &[u8])> = h.iter().collect();
    let field = |i: usize| Reply::Bulk(Bytes::copy_from_slice(pairs[i].0));
    let value = |i: usize| Reply::Bulk(Bytes::copy_from_slice(pairs[i].1));
    Reply::Array(match (with_values, resp3) {
        (false, _) => picks.into_iter().map(field).collect(),
        (true, true) => picks
            .into_iter()
            .map(|i| Reply::Array(vec![field(i), value(i)]))
            .collect(),
        (true, false) => picks.into_iter().flat_map(|i| [field(i), value(i)]).collect(),
    })
}

fn hscan(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let opts = tri!(scan::Options::parse(args, 2, false));
    let Some(h) = tri!(read(ctx, &args[1])) else {
        return scan::reply(0, vec![]);
    };
    let compact = matches!(h, HashRef::Listpack(_));
    let (next, page) = scan::collection_page(h.iter(), compact, |(f, _)| f, &opts);
    let items = page
        .into_iter()
        .flat_map(|(f, v)| {
            [
                Reply::Bulk(Bytes::copy_from_slice(f)),
                Reply::Bulk(Bytes::copy_from_slice(v)),
            ]
        })
        .collect();
    scan::reply(next, items)
}
