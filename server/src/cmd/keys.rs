//! Generic key commands: DEL, EXISTS, the EXPIRE family, TTL, TYPE, KEYS,
//! SCAN, RENAME, COPY, RANDOMKEY, DUMP and RESTORE.
//!
//! Each write counts its changes where Redis 7.0.15 raises `server.dirty`
//! (one per key deleted, renamed, moved, copied or given a new deadline;
//! nothing for a no-op), so the command's arguments are its effect; the
//! EXPIRE family's effect is rewritten as Redis rewrites it (an absolute
//! `PEXPIREAT`, or a `DEL` when the deadline is already past).

use bytes::Bytes;

use super::args::{db_index, int, int_arg, is};
use super::flags::*;
use super::{acl, CommandSpec, Ctx};
use crate::errors::{self, err};
use crate::notify;
use crate::persist::rdb;
use crate::protocol::Reply;
use crate::store::{glob, num, ValueRef};
use crate::tri;

macro_rules! spec {
    ($($row:tt)*) => { command!("generic", $($row)*) };
}

#[rustfmt::skip]
pub(crate) static COMMANDS: &[CommandSpec] = &[
    spec!("del", -2, WRITE, acl::KEYSPACE, "Delete a key", del),
    spec!("unlink", -2, WRITE | FAST, acl::KEYSPACE, "Delete a key asynchronously in another thread", unlink),
    spec!("exists", -2, READONLY | FAST, acl::KEYSPACE, "Determine if a key exists", exists),
    spec!("touch", -2, READONLY | FAST, acl::KEYSPACE, "Alters the last access time of a key(s)", touch),
    spec!("expire", -3, WRITE | FAST, acl::KEYSPACE, "Set a key's time to live in seconds", expire),
    spec!("pexpire", -3, WRITE | FAST, acl::KEYSPACE, "Set a key's time to live in milliseconds", pexpire),
    spec!("expireat", -3, WRITE | FAST, acl::KEYSPACE, "Set the expiration for a key as a UNIX timestamp", expireat),
    spec!("pexpireat", -3, WRITE | FAST, acl::KEYSPACE, "Set the expiration for a key as a UNIX timestamp specified in milliseconds", pexpireat),
    spec!("ttl", 2, READONLY | FAST, acl::KEYSPACE, "Get the time to live for a key in seconds", ttl),
    spec!("pttl", 2, READONLY | FAST, acl::KEYSPACE, "Get the time to live for a key in milliseconds", pttl),
    spec!("expiretime", 2, READONLY | FAST, acl::KEYSPACE, "Get the expiration Unix timestamp for a key", expiretime),
    spec!("pexpiretime", 2, READONLY | FAST, acl::KEYSPACE, "Get the expiration Unix timestamp for a key in milliseconds", pexpiretime),
    spec!("persist", 2, WRITE | FAST, acl::KEYSPACE, "Remove the expiration from a key", persist),
    spec!("type", 2, READONLY | FAST, acl::KEYSPACE, "Determine the type stored at key", type_),
    spec!("keys", 2, READONLY, acl::KEYSPACE | acl::DANGEROUS, "Find all keys matching the given pattern", keys),
    spec!("scan", -2, READONLY | TOUCHES_ARBITRARY_KEYS, acl::KEYSPACE, "Incrementally iterate the keys space", scan),
    spec!("rename", 3, WRITE, acl::KEYSPACE, "Rename a key", rename),
    spec!("renamenx", 3, WRITE | FAST, acl::KEYSPACE, "Rename a key, only if the new key does not exist", renamenx),
    spec!("copy", -3, WRITE | DENYOOM, acl::KEYSPACE, "Copy a key", copy),
    spec!("randomkey", 1, READONLY | TOUCHES_ARBITRARY_KEYS, acl::KEYSPACE, "Return a random key from the keyspace", randomkey),
    spec!("move", 3, WRITE | FAST, acl::KEYSPACE, "Move a key to another database", move_key),
    spec!("object", -2, 0, 0, "A container for object introspection commands", super::container, OBJECT),
    spec!("dump", 2, READONLY, acl::KEYSPACE, "Return a serialized version of the value stored at the specified key.", dump),
    spec!("restore", -4, WRITE | DENYOOM, acl::KEYSPACE | acl::DANGEROUS, "Create a key using the provided serialized value, previously obtained using DUMP.", restore),
];

#[rustfmt::skip]
static OBJECT: &[CommandSpec] = &[
    command!("generic", "object|encoding", 3, READONLY, acl::KEYSPACE, "Inspect the internal encoding of a Redis object", object_encoding),
    command!("generic", "object|refcount", 3, READONLY, acl::KEYSPACE, "Get the number of references to the value of the key", object_refcount),
    command!("generic", "object|idletime", 3, READONLY, acl::KEYSPACE, "Get the time since a Redis object was last accessed", object_idletime),
    command!("generic", "object|freq", 3, READONLY, acl::KEYSPACE, "Get the logarithmic access frequency counter of a Redis object", object_freq),
    subcommand!("generic", "object|help", 2, LOADING | STALE, acl::KEYSPACE, object_help),
];

/// DEL: lazy as `lazyfree-lazy-user-del` says (Redis's `delCommand`).
fn del(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let lazy = ctx.server.config.memory.lazy.user_del;
    delete_keys(ctx, args, lazy)
}

/// UNLINK: DEL with large values freed on the lazy-free thread.
fn unlink(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    delete_keys(ctx, args, true)
}

fn delete_keys(ctx: &mut Ctx, args: &[Bytes], lazy: bool) -> Reply {
    let now = ctx.now;
    let mut n = 0;
    for key in &args[1..] {
        if ctx.db().contains(key, now) {
            ctx.db().delete(key, lazy);
            ctx.dirty(1);
            ctx.notify(notify::GENERIC, "del", key);
            n += 1;
        }
    }
    Reply::Int(n)
}

fn exists(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    Reply::Int(args[1..].iter().filter(|k| ctx.lookup_notouch(k).is_some()).count() as i64)
}

/// TOUCH key...: the keys that exist, each read as a read command reads
/// it, so its access time (OBJECT IDLETIME, FREQ) moves, as Redis's (EXISTS
/// leaves it).
fn touch(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    Reply::Int(args[1..].iter().filter(|k| ctx.lookup_read(k).is_some()).count() as i64)
}

/// The EXPIRE family's NX/XX/GT/LT flags.
#[derive(Debug, Default, PartialEq)]
struct ExpireFlags {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
}

impl ExpireFlags {
    fn parse(args: &[Bytes]) -> Result<ExpireFlags, Reply> {
        let mut f = ExpireFlags::default();
        for a in args {
            if is(a, "nx") {
                f.nx = true;
            } else if is(a, "xx") {
                f.xx = true;
            } else if is(a, "gt") {
                f.gt = true;
            } else if is(a, "lt") {
                f.lt = true;
            } else {
                return Err(errors::unsupported_option(a));
            }
        }
        if f.nx && (f.xx || f.gt || f.lt) {
            return Err(err(errors::NX_XX_GT_LT));
        }
        if f.gt && f.lt {
            return Err(err(errors::GT_LT));
        }
        Ok(f)
    }
}

/// Redis's `expireGenericCommand`: `basetime` is added to the (unit-converted)
/// argument; a deadline already past deletes the key. The effect is
/// `PEXPIREAT key <ms> [flags]` (the command's own arguments for PEXPIREAT),
/// or `DEL key` (`UNLINK` under `lazyfree-lazy-expire`) for a past deadline.
fn expire_generic(ctx: &mut Ctx, args: &[Bytes], basetime: i64, seconds: bool, name: &str) -> Reply {
    let flags = tri!(ExpireFlags::parse(&args[3..]));
    let mut when = tri!(int(&args[2]));
    if seconds {
        if !(i64::MIN / 1000..=i64::MAX / 1000).contains(&when) {
            return errors::invalid_expire(name);
        }
        when *= 1000;
    }
    if when > i64::MAX - basetime {
        return errors::invalid_expire(name);
    }
    when += basetime;
    let now = ctx.now;
    let db = ctx.db();
    let Some(entry) = db.lookup(&args[1], now) else {
        return Reply::Int(0);
    };
    let current = if entry.expire_at == 0 {
        -1
    } else {
        entry.expire_at as i64
    };
    let refused = (flags.nx && current != -1)
        || (flags.xx && current == -1)
        || (flags.gt && (when <= current || current == -1))
        || (flags.lt && current != -1 && when >= current);
    if refused {
        return Reply::Int(0);
    }
    if when <= now as i64 {
        // A deadline already past deletes as expiry does (`lazyfree-lazy-expire`).
        let lazy = ctx.server.config.memory.lazy.expire;
        ctx.db().delete(&args[1], lazy);
        ctx.dirty(1);
        if ctx.propagating() {
            let delete: &'static [u8] = if lazy { b"UNLINK" } else { b"DEL" };
            ctx.propagate_as(|| vec![Bytes::from_static(delete), args[1].clone()]);
        }
        ctx.notify(notify::GENERIC, "del", &args[1]);
    } else {
        db.set_expire(&args[1], when as u64);
        ctx.dirty(1);
        // PEXPIREAT with an absolute deadline is its own effect; the others
        // become one (their flags kept).
        if basetime != 0 || seconds {
            ctx.propagate_as(|| {
                let mut effect = args.to_vec();
                effect[0] = Bytes::from_static(b"PEXPIREAT");
                effect[2] = int_arg(when);
                effect
            });
        }
        // Redis replies, then announces the new deadline.
        ctx.replied();
        ctx.notify(notify::GENERIC, "expire", &args[1]);
    }
    Reply::Int(1)
}

fn expire(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let now = ctx.now as i64;
    expire_generic(ctx, args, now, true, "expire")
}

fn pexpire(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let now = ctx.now as i64;
    expire_generic(ctx, args, now, false, "pexpire")
}

fn expireat(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    expire_generic(ctx, args, 0, true, "expireat")
}

fn pexpireat(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    expire_generic(ctx, args, 0, false, "pexpireat")
}

/// The key's deadline, for the TTL family (a read: counts a keyspace hit or
/// miss): `None` if absent, `Some(0)` if it has none.
fn deadline_of(ctx: &mut Ctx, key: &[u8]) -> Option<u64> {
    ctx.lookup_notouch(key).map(|e| e.expire_at)
}

fn ttl_generic(ctx: &mut Ctx, key: &[u8], millis: bool) -> Reply {
    match deadline_of(ctx, key) {
        None => Reply::Int(-2),
        Some(0) => Reply::Int(-1),
        Some(at) => {
            let ttl = at.saturating_sub(ctx.now) as i64;
            Reply::Int(if millis { ttl } else { (ttl + 500) / 1000 })
        }
    }
}

fn ttl(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    ttl_generic(ctx, &args[1], false)
}

fn pttl(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    ttl_generic(ctx, &args[1], true)
}

fn expiretime_generic(ctx: &mut Ctx, key: &[u8], millis: bool) -> Reply {
    match deadline_of(ctx, key) {
        None => Reply::Int(-2),
        Some(0) => Reply::Int(-1),
        Some(at) => Reply::Int(if millis { at as i64 } else { (at / 1000) as i64 }),
    }
}

fn expiretime(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    expiretime_generic(ctx, &args[1], false)
}

fn pexpiretime(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    expiretime_generic(ctx, &args[1], true)
}

fn persist(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let now = ctx.now;
    match ctx.db().lookup(&args[1], now).map(|e| e.expire_at) {
        None | Some(0) => Reply::Int(0),
        Some(_) => {
            ctx.db().set_expire(&args[1], 0);
            ctx.dirty(1);
            ctx.notify(notify::GENERIC, "persist", &args[1]);
            Reply::Int(1)
        }
    }
}

fn type_(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    Reply::status(ctx.lookup_notouch(&args[1]).map_or("none", |e| e.value.type_name()))
}

fn keys(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let now = ctx.now;
    let pattern = &args[1];
    let all = pattern.as_ref() == b"*";
    Reply::Array(
        ctx.db()
            .live_keys(now)
            .filter(|(k, _)| all || glob::matches(pattern, k, false))
            .map(|(k, _)| Reply::Bulk(Bytes::copy_from_slice(k)))
            .collect(),
    )
}

/// SCAN: the cursor is a position in the database's key-hash order (see
/// [`crate::store::Db::scan_hash`]); a call returns about COUNT keys with hash >=
/// cursor, and the next cursor is the first hash it did not return. A key
/// present for the whole iteration is returned at least once, whatever is
/// inserted or deleted meanwhile. Each call costs O(n) in the database size.
/// As in Redis, the page counts keys past their deadline, and those of them
/// MATCH lets through are deleted (their DELs are SCAN's only effects).
fn scan(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let opts = tri!(super::scan::Options::parse(args, 1, true));
    let now = ctx.now;
    let db = ctx.db();
    let every = db
        .all_keys(now)
        .map(|(k, e, expired)| (k, e.value.type_name(), expired));
    let (next, page) = super::scan::page(every, |(k, _, _)| db.scan_hash(k), opts.cursor, opts.count);
    let mut expired = vec![];
    let mut keys = vec![];
    for (k, t, past) in page {
        if !opts.matches(k) {
            continue;
        }
        if past {
            expired.push(Bytes::copy_from_slice(k));
        } else if opts.type_filter.is_none_or(|tf| tf.eq_ignore_ascii_case(t.as_bytes())) {
            keys.push(Reply::Bulk(Bytes::copy_from_slice(k)));
        }
    }
    for key in &expired {
        // A lookup deletes a key past its deadline (and records its DEL).
        db.contains(key, now);
    }
    super::scan::reply(next, keys)
}

fn rename_generic(ctx: &mut Ctx, args: &[Bytes], nx: bool) -> Reply {
    let now = ctx.now;
    let db = ctx.db();
    if !db.contains(&args[1], now) {
        return err(errors::NO_SUCH_KEY);
    }
    if args[1] == args[2] {
        return if nx { Reply::Int(0) } else { Reply::Ok };
    }
    if nx && db.contains(&args[2], now) {
        return Reply::Int(0);
    }
    // The value keeps its access word under the new name (Redis moves the
    // object itself), whatever the destination had.
    let word = db.access_of(&args[1]).expect("checked above");
    let encoding = db.str_encoding(&args[1]);
    let entry = db.remove(&args[1]).expect("checked above");
    db.insert(&args[2], entry.value, entry.expire_at);
    db.set_access(&args[2], word);
    db.set_str_encoding(&args[2], encoding);
    ctx.dirty(1);
    ctx.notify(notify::GENERIC, "rename_from", &args[1]);
    ctx.notify(notify::GENERIC, "rename_to", &args[2]);
    if nx {
        Reply::Int(1)
    } else {
        Reply::Ok
    }
}

fn rename(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    rename_generic(ctx, args, false)
}

fn renamenx(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    rename_generic(ctx, args, true)
}

fn copy(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let mut target_db = ctx.client.db;
    let mut replace = false;
    let mut i = 3;
    while i < args.len() {
        if is(&args[i], "replace") {
            replace = true;
        } else if is(&args[i], "db") && i + 1 < args.len() {
            target_db = tri!(db_index(&args[i + 1], ctx.dbs.len()));
            i += 1;
        } else {
            return err(errors::SYNTAX);
        }
        i += 1;
    }
    if target_db == ctx.client.db && args[1] == args[2] {
        return err(errors::SAME_OBJECT);
    }
    let now = ctx.now;
    // Redis reads COPY's source with lookupKeyRead (a keyspace hit or miss).
    let Some(entry) = ctx.lookup_read(&args[1]).map(|e| e.to_owned()) else {
        return Reply::Int(0);
    };
    let encoding = ctx.db().str_encoding(&args[1]);
    let target = &mut ctx.dbs[target_db];
    if target.contains(&args[2], now) {
        if !replace {
            return Reply::Int(0);
        }
        target.server_del(&args[2]);
    }
    // A copy is a new object: a fresh access word (Redis's `dbAdd` of a
    // duplicate), not the source's; a string keeps its encoding.
    target.insert(&args[2], entry.value, entry.expire_at);
    target.set_str_encoding(&args[2], encoding);
    ctx.dirty(1);
    ctx.notify_in(target_db, notify::GENERIC, "copy_to", &args[2]);
    Reply::Int(1)
}

/// MOVE key db: the key with its TTL, unless the target has it already.
fn move_key(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    if ctx.server.cluster.is_some() {
        return errors::err(errors::MOVE_IN_CLUSTER);
    }
    let target_db = tri!(db_index(&args[2], ctx.dbs.len()));
    if target_db == ctx.client.db {
        return err(errors::SAME_OBJECT);
    }
    let now = ctx.now;
    if !ctx.db().contains(&args[1], now) || ctx.dbs[target_db].contains(&args[1], now) {
        return Reply::Int(0);
    }
    // The value keeps its access word in the other database, as in RENAME.
    let word = ctx.db().access_of(&args[1]).expect("present");
    let encoding = ctx.db().str_encoding(&args[1]);
    let entry = ctx.db().remove(&args[1]).expect("present");
    ctx.dbs[target_db].insert(&args[1], entry.value, entry.expire_at);
    ctx.dbs[target_db].set_access(&args[1], word);
    ctx.dbs[target_db].set_str_encoding(&args[1], encoding);
    ctx.dirty(1);
    ctx.notify(notify::GENERIC, "move_from", &args[1]);
    ctx.notify_in(target_db, notify::GENERIC, "move_to", &args[1]);
    Reply::Int(1)
}

/// DUMP key: the value's RDB encoding, the RDB version and a CRC-64
/// (Redis's payload, byte for byte where the encoding is deterministic).
fn dump(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let compress = ctx.server.config.rdb_compression;
    let encodings = rdb::value::Encodings::of(&ctx.server.config);
    let Some(entry) = ctx.lookup_read(&args[1]) else {
        return Reply::Nil;
    };
    let mut out = rdb::Out::new(compress);
    match rdb::value::write(&mut out, entry.value, &encodings) {
        Ok(()) => Reply::Bulk(Bytes::from(rdb::payload::seal(out.buf))),
        Err(e) => Reply::Error(format!("ERR {e}").into()),
    }
}

/// RESTORE key ttl payload [REPLACE] [ABSTTL] [IDLETIME s] [FREQ f], with
/// Redis's checks in its order. IDLETIME sets the key's access time under
/// an LRU policy (or none), FREQ its counter under an LFU one; each is
/// ignored under the other (Redis's `objectSetLRUOrLFU`).
pub(super) fn restore(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let (mut replace, mut absttl) = (false, false);
    let (mut idle, mut freq): (Option<i64>, Option<i64>) = (None, None);
    let mut j = 4;
    while j < args.len() {
        let more = j + 1 < args.len();
        if is(&args[j], "replace") {
            replace = true;
        } else if is(&args[j], "absttl") {
            absttl = true;
        } else if is(&args[j], "idletime") && more && freq.is_none() {
            let v = tri!(int(&args[j + 1]));
            if v < 0 {
                return err(errors::INVALID_IDLETIME);
            }
            idle = Some(v);
            j += 1;
        } else if is(&args[j], "freq") && more && idle.is_none() {
            let v = tri!(int(&args[j + 1]));
            if !(0..=255).contains(&v) {
                return err(errors::INVALID_FREQ);
            }
            freq = Some(v);
            j += 1;
        } else {
            return err(errors::SYNTAX);
        }
        j += 1;
    }
    let now = ctx.now;
    if !replace && ctx.db().contains(&args[1], now) {
        return err(errors::BUSYKEY);
    }
    let mut ttl = tri!(int(&args[2]));
    if ttl < 0 {
        return err(errors::INVALID_TTL);
    }
    if rdb::payload::open(&args[3]).is_err() {
        return err(errors::DUMP_PAYLOAD_INVALID);
    }
    let encodings = rdb::value::Encodings::of(&ctx.server.config);
    let deep = ctx.server.config.sanitize_dump_payload != "no";
    // The value is read from the whole payload, footer included, as Redis
    // reads it: a value that runs into the version and CRC bytes loads.
    let mut input = rdb::Input::new(&args[3]);
    let value = match input
        .u8()
        .and_then(|t| rdb::value::read(&mut input, t, &encodings, deep))
    {
        Ok(v) => v,
        Err(_) => return err(errors::BAD_DATA_FORMAT),
    };
    let deleted = replace && ctx.db().server_del(&args[1]);
    if ttl != 0 && !absttl {
        ttl = ttl.saturating_add(now as i64);
    }
    if ttl != 0 && ttl <= now as i64 {
        if deleted {
            ctx.propagate_as(|| vec![Bytes::from_static(b"DEL"), args[1].clone()]);
            ctx.notify(notify::GENERIC, "del", &args[1]);
            ctx.dirty(1);
        } else {
            ctx.prevent_propagation();
        }
        return Reply::Ok;
    }
    ctx.db().insert(&args[1], value, ttl as u64);
    let lfu = ctx.server.config.memory.policy.lfu();
    let word = match (lfu, idle, freq) {
        (false, Some(idle), _) => Some(crate::store::access::from_idle(idle as u64, now)),
        (true, _, Some(freq)) => Some(crate::store::access::lfu_word(freq as u8, now)),
        _ => None,
    };
    if let Some(word) = word {
        ctx.db().set_access(&args[1], word);
    }
    if ttl != 0 && !absttl {
        ctx.propagate_as(|| {
            let mut v = args.to_vec();
            v[2] = Bytes::from(ttl.to_string());
            v.push(Bytes::from_static(b"ABSTTL"));
            v
        });
    }
    ctx.notify(notify::GENERIC, "restore", &args[1]);
    ctx.dirty(1);
    Reply::Ok
}

fn randomkey(ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    let now = ctx.now;
    ctx.db().random_key(now).map_or(Reply::Nil, Reply::Bulk)
}

/// OBJECT ENCODING: the encoding Redis would use for the value (strings by
/// content and length, `int`, `embstr` up to 44 bytes, `raw`, unless the
/// command that wrote one left another: [`crate::store::StrEncoding`]).
fn object_encoding(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    if ctx.lookup_notouch(&args[2]).is_none() {
        return Reply::Nil;
    }
    ctx.db()
        .peek(&args[2])
        .map_or(Reply::Nil, |item| Reply::bulk(item.encoding()))
}

/// OBJECT REFCOUNT: 1, except for an integer string from 0 to 9,999,
/// which Redis keeps as one of its shared integers (refcount `INT_MAX`)
/// unless a `maxmemory` with an LRU/LFU policy rules sharing out.
fn object_refcount(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let config = &ctx.server.config;
    let policy = config.maxmemory_policy();
    let shared = config.maxmemory() == 0 || !(policy.contains("lru") || policy.contains("lfu"));
    let shared = shared && ctx.db().str_encoding(&args[2]) == crate::store::StrEncoding::ByContent;
    match ctx.lookup_notouch(&args[2]) {
        Some(e) => match e.value {
            ValueRef::Str(s)
                if shared
                    && e.value.encoding() == "int"
                    && num::parse_i64(s).is_some_and(|n| (0..10_000).contains(&n)) =>
            {
                Reply::Int(i32::MAX as i64)
            }
            _ => Reply::Int(1),
        },
        None => Reply::Nil,
    }
}

/// The access word of a live key, read without touching it (OBJECT's
/// lookup: `None` for a missing key).
fn access_word(ctx: &mut Ctx, key: &[u8]) -> Option<u32> {
    ctx.lookup_notouch(key)?;
    ctx.db().peek(key).map(|item| item.access())
}

/// OBJECT IDLETIME: seconds since the key was last accessed; under an LFU
/// policy Redis's refusal.
fn object_idletime(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let lfu = ctx.server.config.memory.policy.lfu();
    let now = ctx.now;
    match access_word(ctx, &args[2]) {
        Some(_) if lfu => err(errors::LFU_NO_IDLETIME),
        Some(word) => Reply::Int((crate::store::access::idle_ms(word, now) / 1000) as i64),
        None => Reply::Nil,
    }
}

/// OBJECT FREQ: the key's LFU counter, decayed to now (not stored); without
/// an LFU policy Redis's refusal.
fn object_freq(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let mode = crate::evict::access_mode(&ctx.server.config);
    let now = ctx.now;
    match access_word(ctx, &args[2]) {
        Some(_) if !mode.lfu => err(errors::NO_LFU),
        Some(word) => Reply::Int(crate::store::access::lfu_decayed(word, mode, now) as i64),
        None => Reply::Nil,
    }
}

fn object_help(_ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    super::server::help_reply(&[
        "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "ENCODING <key>",
        "    Return the kind of internal representation used in order to store the value",
        "    associated with a <key>.",
        "FREQ <key>",
        "    Return the access frequency index of the <key>. The returned integer is",
        "    proportional to the logarithm of the recent access frequency of the key.",
        "IDLETIME <key>",
        "    Return the idle time of the <key>, that is the approximated number of",
        "    seconds elapsed since the last access to the key.",
        "REFCOUNT <key>",
        "    Return the number of references of the value associated with the specified",
        "    <key>.",
    ])
}
