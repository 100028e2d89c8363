//! String commands: SET and its relatives, GET family, counters, ranges.
//!
//! Every write counts its changes where Redis 7.0.15's `t_string.c` raises
//! `server.dirty` (a write that changed nothing leaves no effect), and
//! leaves the effect Redis replicates: relative expiries as `SET ... PXAT`
//! or `PEXPIREAT`, GETSET as SET, GETDEL as DEL, GETEX as PEXPIREAT,
//! PERSIST or DEL, INCRBYFLOAT as `SET key result KEEPTTL`.

use bytes::{Bytes, BytesMut};

use super::args::{int, int_arg, is};
use super::flags::*;
use super::{acl, CommandSpec, Ctx};
use crate::errors::{self, err};
use crate::notify;
use crate::protocol::Reply;
use crate::store::num::{self, FloatIncr};
use crate::store::{EntryRef, StrEncoding, Value, ValueRef};
use crate::tri;

macro_rules! spec {
    ($($row:tt)*) => { command!("string", $($row)*) };
}

#[rustfmt::skip]
pub(crate) static COMMANDS: &[CommandSpec] = &[
    spec!("get", 2, READONLY | FAST, acl::STRING, "Get the value of a key", get),
    spec!("set", -3, WRITE | DENYOOM, acl::STRING, "Set the string value of a key", set).keys_by(super::keyspecs::set_keys),
    spec!("setnx", 3, WRITE | DENYOOM | FAST, acl::STRING, "Set the value of a key, only if the key does not exist", setnx),
    spec!("setex", 4, WRITE | DENYOOM, acl::STRING, "Set the value and expiration of a key", setex),
    spec!("psetex", 4, WRITE | DENYOOM, acl::STRING, "Set the value and expiration in milliseconds of a key", psetex),
    spec!("getset", 3, WRITE | DENYOOM | FAST, acl::STRING, "Set the string value of a key and return its old value", getset),
    spec!("getdel", 2, WRITE | FAST, acl::STRING, "Get the value of a key and delete the key", getdel),
    spec!("getex", -2, WRITE | FAST, acl::STRING, "Get the value of a key and optionally set its expiration", getex),
    spec!("mget", -2, READONLY | FAST, acl::STRING, "Get the values of all the given keys", mget),
    spec!("mset", -3, WRITE | DENYOOM, acl::STRING, "Set multiple keys to multiple values", mset),
    spec!("msetnx", -3, WRITE | DENYOOM, acl::STRING, "Set multiple keys to multiple values, only if none of the keys exist", msetnx),
    spec!("incr", 2, WRITE | DENYOOM | FAST, acl::STRING, "Increment the integer value of a key by one", incr),
    spec!("decr", 2, WRITE | DENYOOM | FAST, acl::STRING, "Decrement the integer value of a key by one", decr),
    spec!("incrby", 3, WRITE | DENYOOM | FAST, acl::STRING, "Increment the integer value of a key by the given amount", incrby),
    spec!("decrby", 3, WRITE | DENYOOM | FAST, acl::STRING, "Decrement the integer value of a key by the given number", decrby),
    spec!("incrbyfloat", 3, WRITE | DENYOOM | FAST, acl::STRING, "Increment the float value of a key by the given amount", incrbyfloat),
    spec!("append", 3, WRITE | DENYOOM | FAST, acl::STRING, "Append a value to a key", append),
    spec!("strlen", 2, READONLY | FAST, acl::STRING, "Get the length of the value stored in a key", strlen),
    spec!("getrange", 4, READONLY, acl::STRING, "Get a substring of the string stored at a key", getrange),
    spec!("substr", 4, READONLY, acl::STRING, "Get a substring of the string stored at a key", getrange),
    spec!("setrange", 4, WRITE | DENYOOM, acl::STRING, "Overwrite part of a string at key starting at the specified offset", setrange),
    spec!("lcs", -3, READONLY, acl::STRING, "Find longest common substring", lcs),
];

/// How an expire argument is to be read.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum ExpireUnit {
    /// EX: seconds from now.
    Seconds,
    /// PX: milliseconds from now.
    Millis,
    /// EXAT: unix seconds.
    UnixSeconds,
    /// PXAT: unix milliseconds.
    UnixMillis,
}

/// Turns an expire argument into an absolute unix-ms deadline, exactly as
/// Redis's `getExpireMillisecondsOrReply` (non-positive or overflowing values
/// are "invalid expire time in '`<cmd>`' command").
pub(crate) fn deadline(now: u64, arg: &[u8], unit: ExpireUnit, cmd: &str) -> Result<u64, Reply> {
    let mut ms = int(arg)?;
    let seconds = matches!(unit, ExpireUnit::Seconds | ExpireUnit::UnixSeconds);
    if ms <= 0 || (seconds && ms > i64::MAX / 1000) {
        return Err(errors::invalid_expire(cmd));
    }
    if seconds {
        ms *= 1000;
    }
    if matches!(unit, ExpireUnit::Seconds | ExpireUnit::Millis) {
        ms = ms.checked_add(now as i64).ok_or_else(|| errors::invalid_expire(cmd))?;
    }
    Ok(ms as u64)
}

/// Options of SET (and, with `getex`, of GETEX), parsed as Redis's
/// `parseExtendedStringArgumentsOrReply`.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct SetOptions {
    pub nx: bool,
    pub xx: bool,
    pub get: bool,
    pub keepttl: bool,
    pub persist: bool,
    pub expire: Option<(ExpireUnit, Bytes)>,
}

impl SetOptions {
    /// Parses `args` (the options after key and value for SET, after key for
    /// GETEX). Any conflict or unknown word is `ERR syntax error`.
    pub(crate) fn parse(args: &[Bytes], getex: bool) -> Result<SetOptions, Reply> {
        let mut o = SetOptions::default();
        let mut i = 0;
        while i < args.len() {
            let a = &args[i];
            let has_next = i + 1 < args.len();
            let expire_set = o.expire.is_some();
            let unit = if is(a, "ex") {
                Some(ExpireUnit::Seconds)
            } else if is(a, "px") {
                Some(ExpireUnit::Millis)
            } else if is(a, "exat") {
                Some(ExpireUnit::UnixSeconds)
            } else if is(a, "pxat") {
                Some(ExpireUnit::UnixMillis)
            } else {
                None
            };
            if !getex && is(a, "nx") && !o.xx {
                o.nx = true;
            } else if !getex && is(a, "xx") && !o.nx {
                o.xx = true;
            } else if !getex && is(a, "get") {
                o.get = true;
            } else if !getex && is(a, "keepttl") && !expire_set {
                o.keepttl = true;
            } else if getex && is(a, "persist") && !expire_set {
                o.persist = true;
            } else if let Some(unit) = unit {
                // The same unit may repeat (the last value wins); another may not.
                let same_or_none = o.expire.as_ref().is_none_or(|(u, _)| *u == unit);
                if o.keepttl || o.persist || !same_or_none || !has_next {
                    return Err(err(errors::SYNTAX));
                }
                o.expire = Some((unit, args[i + 1].clone()));
                i += 1;
            } else {
                return Err(err(errors::SYNTAX));
            }
            i += 1;
        }
        Ok(o)
    }
}

fn get(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    match tri!(ctx.get_str(&args[1])) {
        Some(v) => Reply::Bulk(v),
        None => Reply::Nil,
    }
}

fn set(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let opts = tri!(SetOptions::parse(&args[3..], false));
    let expire_at = match &opts.expire {
        Some((unit, arg)) => tri!(deadline(ctx.now, arg, *unit, "set")),
        None => 0,
    };
    let old = if opts.get { tri!(ctx.get_str(&args[1])) } else { None };
    let now = ctx.now;
    let db = ctx.db();
    let found = db.contains(&args[1], now);
    if (opts.nx && found) || (opts.xx && !found) {
        return if opts.get {
            old.map_or(Reply::Nil, Reply::Bulk)
        } else {
            Reply::Nil
        };
    }
    let value = Value::Str(crate::store::db::owned(&args[2]));
    if opts.keepttl {
        db.replace_value(&args[1], value);
    } else {
        db.insert(&args[1], value, expire_at);
    }
    ctx.dirty(1);
    if opts.get {
        // Redis replies with the old value before it sets the new one.
        ctx.replied();
    }
    ctx.notify(notify::STRING, "set", &args[1]);
    if expire_at != 0 {
        // A relative or absolute expiry is replayed as SET key value PXAT ms.
        ctx.propagate_as(|| {
            vec![
                Bytes::from_static(b"SET"),
                args[1].clone(),
                args[2].clone(),
                Bytes::from_static(b"PXAT"),
                int_arg(expire_at),
            ]
        });
        ctx.notify(notify::GENERIC, "expire", &args[1]);
    } else if opts.get {
        // GET (however often given) is not part of the effect.
        ctx.propagate_as(|| {
            let mut effect = args[..3].to_vec();
            effect.extend(args[3..].iter().filter(|a| !is(a, "get")).cloned());
            effect
        });
    }
    if opts.get {
        old.map_or(Reply::Nil, Reply::Bulk)
    } else {
        Reply::Ok
    }
}

/// What a deleted key is replayed as: UNLINK when the deletion was lazy,
/// DEL otherwise (as Redis's `shared.unlink` / `shared.del` choice).
fn deletion(lazy: bool) -> Bytes {
    Bytes::from_static(if lazy { b"UNLINK" } else { b"DEL" })
}

/// Stores `value` under `key` with deadline `expire_at` (0: none) and counts
/// one change (Redis's `setKey` and `server.dirty++`).
fn set_plain(ctx: &mut Ctx, key: &Bytes, value: &Bytes, expire_at: u64) {
    ctx.db()
        .insert(key, Value::Str(crate::store::db::owned(value)), expire_at);
    ctx.dirty(1);
    ctx.notify(notify::STRING, "set", key);
    if expire_at != 0 {
        ctx.notify(notify::GENERIC, "expire", key);
    }
}

/// SETNX: its own arguments are its effect, only when it set the key.
fn setnx(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let now = ctx.now;
    if ctx.db().contains(&args[1], now) {
        return Reply::Int(0);
    }
    set_plain(ctx, &args[1], &args[2], 0);
    Reply::Int(1)
}

/// SETEX and PSETEX: replayed as `SET key value PXAT <deadline>`.
fn setex_generic(ctx: &mut Ctx, args: &[Bytes], unit: ExpireUnit, name: &str) -> Reply {
    let at = tri!(deadline(ctx.now, &args[2], unit, name));
    set_plain(ctx, &args[1], &args[3], at);
    ctx.propagate_as(|| {
        vec![
            Bytes::from_static(b"SET"),
            args[1].clone(),
            args[3].clone(),
            Bytes::from_static(b"PXAT"),
            int_arg(at),
        ]
    });
    Reply::Ok
}

fn setex(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    setex_generic(ctx, args, ExpireUnit::Seconds, "setex")
}

fn psetex(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    setex_generic(ctx, args, ExpireUnit::Millis, "psetex")
}

/// GETSET: replayed as `SET key value`.
fn getset(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let old = tri!(ctx.get_str(&args[1]));
    // Redis replies with the old value before it sets the new one.
    ctx.replied();
    set_plain(ctx, &args[1], &args[2], 0);
    ctx.propagate_as(|| vec![Bytes::from_static(b"SET"), args[1].clone(), args[2].clone()]);
    old.map_or(Reply::Nil, Reply::Bulk)
}

/// GETDEL: replayed as `DEL key` (UNLINK under `lazyfree-lazy-user-del`),
/// only when there was a key to delete.
fn getdel(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    match tri!(ctx.get_str(&args[1])) {
        Some(v) => {
            // `lazyfree-lazy-user-del` makes the deletion lazy.
            let lazy = ctx.server.config.memory.lazy.user_del;
            ctx.db().delete(&args[1], lazy);
            ctx.dirty(1);
            let del = deletion(lazy);
            ctx.propagate_as(|| vec![del, args[1].clone()]);
            // Redis replies with the value, then deletes the key.
            ctx.replied();
            ctx.notify(notify::GENERIC, "del", &args[1]);
            Reply::Bulk(v)
        }
        None => Reply::Nil,
    }
}

/// GETEX: the options' syntax is checked first, then the key is looked up
/// (a missing key answers nil whatever the expiry says), then the expiry's
/// value, as Redis does. Never replayed as itself: a deadline already past
/// is `DEL key` (UNLINK under `lazyfree-lazy-expire`), another deadline
/// `PEXPIREAT key <ms>`, PERSIST of a key with a deadline `PERSIST key`;
/// anything else changed nothing.
fn getex(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let opts = tri!(SetOptions::parse(&args[2..], true));
    let Some(value) = tri!(ctx.get_str(&args[1])) else {
        return Reply::Nil;
    };
    let expire_at = match &opts.expire {
        Some((unit, arg)) => Some(tri!(deadline(ctx.now, arg, *unit, "getex"))),
        None => None,
    };
    let now = ctx.now;
    let key = &args[1];
    // The event, the effect's command, and its deadline argument.
    let (event, effect, at) = match expire_at {
        Some(at) if at <= now => {
            // A deadline already past deletes as expiry does
            // (`lazyfree-lazy-expire`).
            let lazy = ctx.server.config.memory.lazy.expire;
            ctx.db().delete(key, lazy);
            ("del", deletion(lazy), None)
        }
        Some(at) => {
            ctx.db().set_expire(key, at);
            ("expire", Bytes::from_static(b"PEXPIREAT"), Some(at))
        }
        None if opts.persist => {
            let has_deadline = ctx.db().lookup(key, now).is_some_and(|e| e.expire_at != 0);
            if !has_deadline {
                return Reply::Bulk(value);
            }
            ctx.db().set_expire(key, 0);
            ("persist", Bytes::from_static(b"PERSIST"), None)
        }
        None => return Reply::Bulk(value),
    };
    ctx.dirty(1);
    ctx.propagate_as(|| {
        let mut args = vec![effect, key.clone()];
        args.extend(at.map(int_arg));
        args
    });
    // Redis replies with the value, then announces the change.
    ctx.replied();
    ctx.notify(notify::GENERIC, event, key);
    Reply::Bulk(value)
}

fn mget(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let now = ctx.now;
    let db = ctx.db();
    let (mut hits, mut misses) = (0, 0);
    let values = args[1..]
        .iter()
        .map(|k| match db.lookup_str(k, now) {
            Some(found) => {
                hits += 1;
                found.map_or(Reply::Nil, Reply::Bulk)
            }
            None => {
                misses += 1;
                Reply::Nil
            }
        })
        .collect();
    ctx.count_lookups(hits, misses);
    Reply::Array(values)
}

fn mset(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    if args.len().is_multiple_of(2) {
        return errors::wrong_args("mset");
    }
    for pair in args[1..].chunks(2) {
        set_plain(ctx, &pair[0], &pair[1], 0);
    }
    Reply::Ok
}

fn msetnx(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    if args.len().is_multiple_of(2) {
        return errors::wrong_args("msetnx");
    }
    let now = ctx.now;
    if args[1..].chunks(2).any(|pair| ctx.db().contains(&pair[0], now)) {
        return Reply::Int(0);
    }
    for pair in args[1..].chunks(2) {
        set_plain(ctx, &pair[0], &pair[1], 0);
    }
    Reply::Int(1)
}

/// INCR and friends: parse the stored value, check overflow, store the
/// result keeping the key's deadline. The value is read in place (no copy),
/// and a counter that keeps its number of digits is rewritten in place.
fn incr_by(ctx: &mut Ctx, key: &Bytes, by: i64) -> Reply {
    let now = ctx.now;
    let current = match ctx.db().lookup(key, now) {
        None => 0,
        Some(EntryRef {
            value: ValueRef::Str(v),
            ..
        }) => tri!(num::parse_i64(v).ok_or_else(|| err(errors::NOT_INTEGER))),
        Some(_) => return err(errors::WRONGTYPE),
    };
    let Some(new) = current.checked_add(by) else {
        return err(errors::OVERFLOW);
    };
    let mut buf = itoa::Buffer::new();
    let text = buf.format(new).as_bytes();
    if !ctx.db().overwrite_str(key, text) {
        ctx.db().replace_value(key, Value::Str(Bytes::copy_from_slice(text)));
    }
    ctx.dirty(1);
    ctx.notify(notify::STRING, "incrby", key);
    Reply::Int(new)
}

fn incr(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    incr_by(ctx, &args[1], 1)
}

fn decr(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    incr_by(ctx, &args[1], -1)
}

fn incrby(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let by = tri!(int(&args[2]));
    incr_by(ctx, &args[1], by)
}

fn decrby(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let by = tri!(int(&args[2]));
    if by == i64::MIN {
        return err(errors::DECR_OVERFLOW);
    }
    incr_by(ctx, &args[1], -by)
}

/// INCRBYFLOAT: replayed as `SET key <result> KEEPTTL`, so float precision
/// and formatting cannot make a replica differ.
fn incrbyfloat(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let current = tri!(ctx.get_str_for_write(&args[1]));
    match num::incr_by_float(current.as_deref(), &args[2]) {
        FloatIncr::Ok(text) => {
            let text = Bytes::from(text);
            ctx.db().replace_value(&args[1], Value::Str(text.clone()));
            ctx.db().set_str_encoding(&args[1], StrEncoding::Text);
            ctx.dirty(1);
            ctx.propagate_as(|| {
                vec![
                    Bytes::from_static(b"SET"),
                    args[1].clone(),
                    text.clone(),
                    Bytes::from_static(b"KEEPTTL"),
                ]
            });
            ctx.notify(notify::STRING, "incrbyfloat", &args[1]);
            Reply::Bulk(text)
        }
        FloatIncr::NotAFloat => err(errors::NOT_FLOAT),
        FloatIncr::NanOrInfinity => err(errors::NAN_OR_INF),
    }
}

/// Redis's `checkStringLength`: a string may not grow past proto-max-bulk-len
/// (unless the primary or the append-only file says so: its server allowed it).
fn check_length(ctx: &Ctx, size: u64, append: u64) -> Result<(), Reply> {
    if ctx.must_obey() {
        return Ok(());
    }
    match size.checked_add(append) {
        Some(total) if total <= ctx.server.config.proto_max_bulk_len as u64 => Ok(()),
        _ => Err(err(errors::STRING_TOO_LONG)),
    }
}

fn append(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let current = tri!(ctx.get_str_for_write(&args[1]));
    let existed = current.is_some();
    let new = match current {
        None => crate::store::db::owned(&args[2]),
        Some(cur) => {
            tri!(check_length(ctx, cur.len() as u64, args[2].len() as u64));
            let mut buf = BytesMut::with_capacity(cur.len() + args[2].len());
            buf.extend_from_slice(&cur);
            buf.extend_from_slice(&args[2]);
            buf.freeze()
        }
    };
    let len = new.len() as i64;
    ctx.db().replace_value(&args[1], Value::Str(new));
    if existed {
        ctx.db().set_str_encoding(&args[1], StrEncoding::Raw);
    }
    // Counted even when nothing was appended, as Redis does.
    ctx.dirty(1);
    ctx.notify(notify::STRING, "append", &args[1]);
    Reply::Int(len)
}

fn strlen(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    Reply::Int(tri!(ctx.get_str(&args[1])).map_or(0, |v| v.len() as i64))
}

fn getrange(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let mut start = tri!(int(&args[2]));
    let mut end = tri!(int(&args[3]));
    let Some(value) = tri!(ctx.get_str(&args[1])) else {
        return Reply::bulk("");
    };
    let len = value.len() as i64;
    if start < 0 && end < 0 && start > end {
        return Reply::bulk("");
    }
    if start < 0 {
        start += len;
    }
    if end < 0 {
        end += len;
    }
    start = start.max(0);
    end = end.max(0);
    if end >= len {
        end = len - 1;
    }
    if start > end || len == 0 {
        return Reply::bulk("");
    }
    Reply::Bulk(value.slice(start as usize..=end as usize))
}

fn setrange(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let offset = tri!(int(&args[2]));
    if offset < 0 {
        return err(errors::OFFSET_OUT_OF_RANGE);
    }
    let value = &args[3];
    let current = tri!(ctx.get_str_for_write(&args[1]));
    let cur_len = current.as_ref().map_or(0, |c| c.len());
    if value.is_empty() {
        return Reply::Int(cur_len as i64);
    }
    tri!(check_length(ctx, offset as u64, value.len() as u64));
    let offset = offset as usize;
    let mut buf = BytesMut::from(current.as_deref().unwrap_or(&[]));
    if buf.len() < offset + value.len() {
        buf.resize(offset + value.len(), 0);
    }
    buf[offset..offset + value.len()].copy_from_slice(value);
    let len = buf.len() as i64;
    ctx.db().replace_value(&args[1], Value::Str(buf.freeze()));
    ctx.db().set_str_encoding(&args[1], StrEncoding::Raw);
    ctx.dirty(1);
    ctx.notify(notify::STRING, "setrange", &args[1]);
    Reply::Int(len)
}

/// LCS key1 key2 [LEN] [IDX] [MINMATCHLEN len] [WITHMATCHLEN]: Redis's
/// dynamic-programming table (bounded by `proto-max-bulk-len`) and its
/// backtracking, so matches come out in Redis's order (from the ends).
fn lcs(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let a = match ctx.lookup_read(&args[1]) {
        None => Bytes::new(),
        Some(e) => match e.value {
            crate::store::ValueRef::Str(s) => Bytes::copy_from_slice(s),
            _ => return err(errors::LCS_NOT_STRINGS),
        },
    };
    let b = match ctx.lookup_read(&args[2]) {
        None => Bytes::new(),
        Some(e) => match e.value {
            crate::store::ValueRef::Str(s) => Bytes::copy_from_slice(s),
            _ => return err(errors::LCS_NOT_STRINGS),
        },
    };
    let (mut get_len, mut get_idx, mut with_len, mut min_len) = (false, false, false, 0u64);
    let mut i = 3;
    while i < args.len() {
        if is(&args[i], "idx") {
            get_idx = true;
        } else if is(&args[i], "len") {
            get_len = true;
        } else if is(&args[i], "withmatchlen") {
            with_len = true;
        } else if is(&args[i], "minmatchlen") && i + 1 < args.len() {
            min_len = tri!(int(&args[i + 1])).max(0) as u64;
            i += 1;
        } else {
            return err(errors::SYNTAX);
        }
        i += 1;
    }
    if get_idx && get_len {
        return err(errors::LCS_LEN_AND_IDX);
    }
    let (alen, blen) = (a.len(), b.len());
    let cells = (alen as u64 + 1) * (blen as u64 + 1);
    if cells * 4 > ctx.server.config.proto_max_bulk_len as u64 {
        return err(errors::LCS_TOO_BIG);
    }
    let width = blen + 1;
    let mut dp = vec![0u32; cells as usize];
    for x in 1..=alen {
        for y in 1..=blen {
            dp[x * width + y] = if a[x - 1] == b[y - 1] {
                dp[(x - 1) * width + y - 1] + 1
            } else {
                dp[(x - 1) * width + y].max(dp[x * width + y - 1])
            };
        }
    }
    let total = dp[alen * width + blen] as usize;
    if get_len {
        return Reply::Int(total as i64);
    }
    let mut result = vec![0u8; total];
    let mut idx = total;
    let mut matches = vec![];
    // Redis's walk back; `a_start == alen` means no range is open.
    let (mut a_start, mut a_end, mut b_start, mut b_end) = (alen, 0, 0, 0);
    let (mut x, mut y) = (alen, blen);
    while x > 0 && y > 0 {
        let mut emit = false;
        if a[x - 1] == b[y - 1] {
            result[idx - 1] = a[x - 1];
            if a_start == alen {
                (a_start, a_end, b_start, b_end) = (x - 1, x - 1, y - 1, y - 1);
            } else if a_start == x && b_start == y {
                a_start -= 1;
                b_start -= 1;
            } else {
                emit = true;
            }
            if a_start == 0 || b_start == 0 {
                emit = true;
            }
            idx -= 1;
            x -= 1;
            y -= 1;
        } else {
            if dp[(x - 1) * width + y] > dp[x * width + y - 1] {
                x -= 1;
            } else {
                y -= 1;
            }
            if a_start != alen {
                emit = true;
            }
        }
        if emit {
            let match_len = (a_end - a_start + 1) as u64;
            if min_len == 0 || match_len >= min_len {
                let range = |s: usize, e: usize| Reply::Array(vec![Reply::Int(s as i64), Reply::Int(e as i64)]);
                let mut m = vec![range(a_start, a_end), range(b_start, b_end)];
                if with_len {
                    m.push(Reply::Int(match_len as i64));
                }
                matches.push(Reply::Array(m));
            }
            a_start = alen;
        }
    }
    if get_idx {
        return Reply::Map(vec![
            (Reply::bulk("matches"), Reply::Array(matches)),
            (Reply::bulk("len"), Reply::Int(total as i64)),
        ]);
    }
    Reply::Bulk(Bytes::from(result))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(s: &str, getex: bool) -> Result<SetOptions, Reply> {
        let args: Vec<Bytes> = s
            .split_whitespace()
            .map(|w| Bytes::copy_from_slice(w.as_bytes()))
            .collect();
        SetOptions::parse(&args, getex)
    }

    #[test]
    fn set_option_conflicts_are_syntax_errors() {
        for bad in [
            "nx xx",
            "keepttl ex 10",
            "ex 10 keepttl",
            "ex 10 px 10",
            "ex",
            "foo",
            "persist",
        ] {
            assert_eq!(opts(bad, false), Err(err(errors::SYNTAX)), "{bad}");
        }
        assert!(opts("px 100 px 200 nx get", false).is_ok());
        assert!(opts("persist", true).is_ok());
        assert_eq!(opts("nx", true), Err(err(errors::SYNTAX)));
        assert_eq!(opts("persist ex 1", true), Err(err(errors::SYNTAX)));
    }

    #[test]
    fn deadlines() {
        assert_eq!(deadline(1000, b"2", ExpireUnit::Seconds, "set"), Ok(3000));
        assert_eq!(deadline(1000, b"5", ExpireUnit::UnixMillis, "set"), Ok(5));
        assert_eq!(
            deadline(1000, b"0", ExpireUnit::Seconds, "set"),
            Err(errors::invalid_expire("set"))
        );
        assert_eq!(
            deadline(1000, b"9223372036854775807", ExpireUnit::Millis, "set"),
            Err(errors::invalid_expire("set"))
        );
        assert_eq!(
            deadline(1000, b"x", ExpireUnit::Millis, "set"),
            Err(err(errors::NOT_INTEGER))
        );
    }
}
