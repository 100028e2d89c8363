//! The test-control plane over the wire: `COORDIS.CLOCK`,
//! `COORDIS.SERVER`, `COORDIS.FAULT`, `COORDIS.MEMORY` and
//! `COORDIS.REPLICATION` (a primary's replica links: delay, pause, cut,
//! drop writes; the primary dies; promote a replica), in coordis's own namespace, for test suites in any
//! language (the Rust side is [`crate::ServerClock`] and
//! `Server::pause`/`restart`). Refused unless `enable-test-commands` allows it
//! (`no`, `yes`, or `local`: loopback clients only), as Redis gates DEBUG
//! with `enable-debug-command`.
//!
//! Each move of the clock settles the server before the reply: keys due by
//! the new time expire (in deadline order, with their `expired` events) and
//! blocked clients past their deadline are answered.

use bytes::Bytes;

use super::args::{int, is};
use super::flags::*;
use super::{acl, CommandSpec, Ctx};
use crate::errors::{self, err};
use crate::faults::{FaultAction, FaultRule};
use crate::protocol::Reply;
use crate::store::VirtualClock;
use crate::tri;

macro_rules! spec {
    ($($row:tt)*) => { command!("coordis", $($row)*) };
}

#[rustfmt::skip]
pub(crate) static COMMANDS: &[CommandSpec] = &[
    spec!("coordis.clock", -2, 0, 0, "A container for the test clock's commands (coordis's own)", super::container, CLOCK),
    spec!("coordis.server", -2, 0, 0, "A container for server-wide faults (coordis's own)", super::container, SERVER),
    spec!("coordis.fault", -2, 0, 0, "A container for fault rules (coordis's own)", super::container, FAULT),
    spec!("coordis.memory", -2, 0, 0, "A container for memory limits and eviction (coordis's own)", super::container, MEMORY),
    spec!("coordis.replication", -2, 0, 0, "A container for replica link faults (coordis's own)", super::container, REPLICATION),
    command!("server", "debug", -2, ADMIN | NOSCRIPT | LOADING | STALE | PROTECTED | GUARD_DEBUG, 0, "A container for debugging commands", debug),
];

#[rustfmt::skip]
static FAULT: &[CommandSpec] = &[
    subcommand!("coordis", "coordis.fault|add", -3, PROTECTED | GUARD_TEST | NOSCRIPT | LOADING | STALE, acl::ADMIN, fault_add),
    subcommand!("coordis", "coordis.fault|list", 2, PROTECTED | GUARD_TEST | NOSCRIPT | LOADING | STALE, acl::ADMIN, fault_list),
    subcommand!("coordis", "coordis.fault|del", 3, PROTECTED | GUARD_TEST | NOSCRIPT | LOADING | STALE, acl::ADMIN, fault_del),
    subcommand!("coordis", "coordis.fault|clear", 2, PROTECTED | GUARD_TEST | NOSCRIPT | LOADING | STALE, acl::ADMIN, fault_clear),
    subcommand!("coordis", "coordis.fault|seed", 3, PROTECTED | GUARD_TEST | NOSCRIPT | LOADING | STALE, acl::ADMIN, fault_seed),
    subcommand!("coordis", "coordis.fault|help", 2, PROTECTED | GUARD_TEST | LOADING | STALE, acl::ADMIN, fault_help),
];

#[rustfmt::skip]
static MEMORY: &[CommandSpec] = &[
    subcommand!("coordis", "coordis.memory|limit", -3, PROTECTED | GUARD_TEST | NOSCRIPT | LOADING | STALE, acl::ADMIN, memory_limit),
    subcommand!("coordis", "coordis.memory|used", 2, PROTECTED | GUARD_TEST | NOSCRIPT | LOADING | STALE | FAST, acl::ADMIN, memory_used),
    subcommand!("coordis", "coordis.memory|fill", -3, PROTECTED | GUARD_TEST | NOSCRIPT | LOADING | STALE, acl::ADMIN, memory_fill),
    subcommand!("coordis", "coordis.memory|candidates", -2, PROTECTED | GUARD_TEST | NOSCRIPT | LOADING | STALE, acl::ADMIN, memory_candidates),
    subcommand!("coordis", "coordis.memory|help", 2, PROTECTED | GUARD_TEST | LOADING | STALE, acl::ADMIN, memory_help),
];

#[rustfmt::skip]
static REPLICATION: &[CommandSpec] = &[
    subcommand!("coordis", "coordis.replication|links", 2, PROTECTED | GUARD_TEST | NOSCRIPT | LOADING | STALE, acl::ADMIN, repl_links),
    subcommand!("coordis", "coordis.replication|pause", 3, PROTECTED | GUARD_TEST | NOSCRIPT | LOADING | STALE, acl::ADMIN, repl_pause),
    subcommand!("coordis", "coordis.replication|resume", 3, PROTECTED | GUARD_TEST | NOSCRIPT | LOADING | STALE, acl::ADMIN, repl_resume),
    subcommand!("coordis", "coordis.replication|delay", 4, PROTECTED | GUARD_TEST | NOSCRIPT | LOADING | STALE, acl::ADMIN, repl_delay),
    subcommand!("coordis", "coordis.replication|cut", 3, PROTECTED | GUARD_TEST | NOSCRIPT | LOADING | STALE, acl::ADMIN, repl_cut),
    subcommand!("coordis", "coordis.replication|drop", 4, PROTECTED | GUARD_TEST | NOSCRIPT | LOADING | STALE, acl::ADMIN, repl_drop),
    subcommand!("coordis", "coordis.replication|die", -2, PROTECTED | GUARD_TEST | NOSCRIPT | LOADING | STALE, acl::ADMIN, repl_die),
    subcommand!("coordis", "coordis.replication|promote", 3, PROTECTED | GUARD_TEST | NOSCRIPT | LOADING | STALE, acl::ADMIN, repl_promote),
    subcommand!("coordis", "coordis.replication|help", 2, PROTECTED | GUARD_TEST | LOADING | STALE, acl::ADMIN, repl_help),
];

#[rustfmt::skip]
static SERVER: &[CommandSpec] = &[
    subcommand!("coordis", "coordis.server|pause", 3, PROTECTED | GUARD_TEST | NOSCRIPT | LOADING | STALE, acl::ADMIN, server_pause),
    subcommand!("coordis", "coordis.server|restart", -2, PROTECTED | GUARD_TEST | NOSCRIPT | LOADING | STALE, acl::ADMIN, server_restart),
    subcommand!("coordis", "coordis.server|crash", -2, PROTECTED | GUARD_TEST | NOSCRIPT | LOADING | STALE, acl::ADMIN, server_crash),
    subcommand!("coordis", "coordis.server|down", 3, PROTECTED | GUARD_TEST | NOSCRIPT | LOADING | STALE, acl::ADMIN, server_down),
    subcommand!("coordis", "coordis.server|disk-full", 3, PROTECTED | GUARD_TEST | NOSCRIPT | LOADING | STALE, acl::ADMIN, server_disk_full),
    subcommand!("coordis", "coordis.server|fsync-stall", 3, PROTECTED | GUARD_TEST | NOSCRIPT | LOADING | STALE, acl::ADMIN, server_fsync_stall),
    subcommand!("coordis", "coordis.server|seed", 3, PROTECTED | GUARD_TEST | NOSCRIPT | LOADING | STALE, acl::ADMIN, server_seed),
    subcommand!("coordis", "coordis.server|help", 2, PROTECTED | GUARD_TEST | LOADING | STALE, acl::ADMIN, server_help),
];

#[rustfmt::skip]
static CLOCK: &[CommandSpec] = &[
    subcommand!("coordis", "coordis.clock|get", 2, PROTECTED | GUARD_TEST | NOSCRIPT | LOADING | STALE | FAST, acl::ADMIN, clock_get),
    subcommand!("coordis", "coordis.clock|advance", 3, PROTECTED | GUARD_TEST | NOSCRIPT | LOADING | STALE, acl::ADMIN, clock_advance),
    subcommand!("coordis", "coordis.clock|jump", 3, PROTECTED | GUARD_TEST | NOSCRIPT | LOADING | STALE, acl::ADMIN, clock_jump),
    subcommand!("coordis", "coordis.clock|set", 3, PROTECTED | GUARD_TEST | NOSCRIPT | LOADING | STALE, acl::ADMIN, clock_set),
    subcommand!("coordis", "coordis.clock|freeze", 2, PROTECTED | GUARD_TEST | NOSCRIPT | LOADING | STALE, acl::ADMIN, clock_freeze),
    subcommand!("coordis", "coordis.clock|resume", 2, PROTECTED | GUARD_TEST | NOSCRIPT | LOADING | STALE, acl::ADMIN, clock_resume),
    subcommand!("coordis", "coordis.clock|reset", 2, PROTECTED | GUARD_TEST | NOSCRIPT | LOADING | STALE, acl::ADMIN, clock_reset),
    subcommand!("coordis", "coordis.clock|help", 2, PROTECTED | GUARD_TEST | LOADING | STALE, acl::ADMIN, clock_help),
];

/// DEBUG: Redis's test hooks, gated by `enable-debug-command` as in Redis:
/// SLEEP seconds (the whole server stops, as Redis's does: the engine is
/// held), SET-ACTIVE-EXPIRE 0|1, PAUSE-CRON 0|1 (the periodic tick held:
/// [`crate::state::ServerState::pause_cron`]), SET-DISABLE-DENY-SCRIPTS
/// 0|1 (scripts may call `noscript` commands; like Redis, HELP does not
/// list it), OBJECT key, HTSTATS dbid,
/// HTSTATS-KEY key (Redis's report with coordis's own tables' figures:
/// [`crate::store::htstats`]), DIGEST, DIGEST-VALUE key...
/// (Redis's algorithm: [`crate::store::digest`]), RELOAD [MERGE] [NOFLUSH]
/// [NOSAVE], LOADAOF, POPULATE count [prefix] [size], PROTOCOL type,
/// QUICKLIST-PACKED-THRESHOLD size, HELP. Numbers are read as
/// Redis reads them here (`atof`, `atoi`: `abc` is 0).
fn debug(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    use crate::store::digest;
    let sub = args[1].to_ascii_lowercase();
    match (sub.as_slice(), args.len()) {
        (b"digest", 2) => Reply::Status(digest::hex(&digest::dataset_digest(ctx.dbs)).into()),
        // Any number of keys, none included; keys past their deadline are
        // read, not expired (Redis's `dictFind`).
        (b"digest-value", _) => {
            let db = ctx.db();
            let digests = args[2..].iter().map(|key| digest::hex(&digest::value_digest(db, key)));
            Reply::Array(digests.map(|d| Reply::Status(d.into())).collect())
        }
        (b"sleep", 3) => {
            let secs = crate::store::num::atof(&args[2]);
            if secs > 0.0 && secs.is_finite() {
                std::thread::sleep(std::time::Duration::from_secs_f64(secs.min(86_400.0)));
            }
            Reply::Ok
        }
        (b"set-active-expire", 3) => {
            ctx.server.active_expire = crate::store::num::atoi(&args[2]) != 0;
            Reply::Ok
        }
        (b"pause-cron", 3) => {
            ctx.server.pause_cron = crate::store::num::atoi(&args[2]) != 0;
            Reply::Ok
        }
        (b"set-disable-deny-scripts", 3) => {
            ctx.server.disable_deny_scripts = crate::store::num::atoi(&args[2]) != 0;
            Reply::Ok
        }
        (b"htstats", 3) => {
            let id = tri!(super::args::int(&args[2]));
            match usize::try_from(id).ok().and_then(|id| ctx.dbs.get(id)) {
                Some(db) => Reply::Verbatim(*b"txt", db.htstats().into()),
                None => err(errors::DEBUG_HTSTATS_DB_RANGE),
            }
        }
        (b"htstats-key", 3) => {
            let now = ctx.now;
            let item = tri!(debug_item(ctx.db(), &args[2], now));
            match item.value().htstats() {
                Some(text) => Reply::Verbatim(*b"txt", text.into()),
                None => err(errors::DEBUG_HTSTATS_NOT_TABLE),
            }
        }
        (b"object", 3) => {
            let now = ctx.now;
            let encodings = crate::persist::rdb::value::Encodings::of(&ctx.server.config);
            let mut out = crate::persist::rdb::Out::new(ctx.server.config.rdb_compression);
            let address = ctx.db().scan_hash(&args[2]) & 0xffff_ffff_ffff;
            // Redis's `dictFind`: a key past its deadline is shown, not
            // expired (HTSTATS-KEY's lookup expires it).
            let Some(item) = ctx.db().peek(&args[2]) else {
                return err(errors::NO_SUCH_KEY);
            };
            // No pointers to show: the address is the key's hash. The
            // serialized length is Redis's `rdbSavedObjectLen`: the value's
            // RDB encoding (compressed under `rdbcompression`), without
            // its type byte. `lru` is the key's access word
            // ([`crate::store::access`]).
            let serialized = match crate::persist::rdb::value::write(&mut out, item.value(), &encodings) {
                Ok(()) => out.buf.len().saturating_sub(1),
                Err(_) => 0,
            };
            let word = item.access();
            let text = format!(
                "Value at:0x{address:x} refcount:1 encoding:{} serializedlength:{serialized} lru:{word} lru_seconds_idle:{}",
                item.encoding(),
                crate::store::access::idle_ms(word, now) / 1000
            );
            Reply::Status(text.into())
        }
        (b"reload", _) => debug_reload(ctx, &args[2..]),
        (b"loadaof", _) => debug_loadaof(ctx),
        (b"protocol", 3) => debug_protocol(ctx, &args[2]),
        (b"quicklist-packed-threshold", 3) => debug_packed_threshold(&args[2]),
        (b"populate", 3..=5) => debug_populate(ctx, &args[2..]),
        (b"help", 2) => super::server::help_reply(&[
            "DEBUG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "DIGEST",
            "    Output a hex signature representing the current DB content.",
            "DIGEST-VALUE <key> [<key> ...]",
            "    Output a hex signature of the values of all the specified keys.",
            "HTSTATS <dbid>",
            "    Return hash table statistics of the specified Redis database.",
            "HTSTATS-KEY <key>",
            "    Like HTSTATS but for the hash table stored at <key>'s value.",
            "LOADAOF",
            "    Flush the AOF buffers on disk and reload the AOF in memory.",
            "OBJECT <key>",
            "    Show low level info about `key` and associated value.",
            "PAUSE-CRON <0|1>",
            "    Stop periodic cron job processing.",
            "POPULATE <count> [<prefix>] [<size>]",
            "    Create <count> string keys named key:<num>. If <prefix> is specified then",
            "    it is used instead of the 'key' prefix. These are not propagated to",
            "    replicas. Cluster slots are not respected so keys not belonging to the",
            "    current node can be created in cluster mode.",
            "PROTOCOL <type>",
            "    Reply with a test value of the specified type. <type> can be: string,",
            "    integer, double, bignum, null, array, set, map, attrib, push, verbatim,",
            "    true, false.",
            "QUICKLIST-PACKED-THRESHOLD <size>",
            "    Sets the threshold for elements to be inserted as plain vs packed nodes",
            "    Default value is 1GB, allows values up to 4GB. Setting to 0 restores to default.",
            "RELOAD [option ...]",
            "    Save the RDB on disk and reload it back to memory. Valid <option> values:",
            "    * MERGE: conflicting keys will be loaded from RDB.",
            "    * NOFLUSH: the existing database will not be removed before load, but",
            "      conflicting keys will generate an exception and kill the server.",
            "    * NOSAVE: the database will be loaded from an existing RDB file.",
            "    Examples:",
            "    * DEBUG RELOAD: verify that the server is able to persist, flush and reload",
            "      the database.",
            "    * DEBUG RELOAD NOSAVE: replace the current database with the contents of an",
            "      existing RDB file.",
            "    * DEBUG RELOAD NOSAVE NOFLUSH MERGE: add the contents of an existing RDB",
            "      file to the database.",
            "SET-ACTIVE-EXPIRE <0|1>",
            "    Setting it to 0 disables expiring keys in background when they are not",
            "    accessed (otherwise the Redis behavior). Setting it to 1 reenables back the",
            "    default.",
            "SLEEP <seconds>",
            "    Stop the server for <seconds>. Decimals allowed.",
        ]),
        _ => errors::sub_wrong_args(&args[1], "DEBUG"),
    }
}

/// The item of `key` for DEBUG HTSTATS-KEY: a key past its
/// deadline expires first, as in Redis's lookup; the item is then read
/// without touching its access data (Redis's `dictFind`).
fn debug_item<'a>(db: &'a mut crate::store::Db, key: &[u8], now: u64) -> Result<&'a crate::store::item::Item, Reply> {
    if !db.contains_notouch(key, now) {
        return Err(err(errors::NO_SUCH_KEY));
    }
    let db: &'a crate::store::Db = db;
    db.peek(key).ok_or_else(|| err(errors::NO_SUCH_KEY))
}

/// The longest key DEBUG POPULATE makes: Redis formats it in a 128-byte
/// buffer, so a longer `prefix:N` is cut to this.
const POPULATE_KEY_MAX: usize = 127;

/// DEBUG POPULATE count [prefix] [size], as Redis's: string keys
/// `prefix:N` (prefix `key`) holding `value:N` — or, with a size, that text
/// cut or padded with zero bytes to `size` — for N from 0 to count − 1,
/// skipping keys that exist. Like Redis's it changes no dirty counter and
/// propagates nothing; watchers of the keys see them touched.
fn debug_populate(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    // Redis's `getPositiveLongFromObjectOrReply`: one text for a
    // non-number and a negative one.
    let positive = |arg: &[u8]| match crate::store::num::parse_i64(arg) {
        Some(n) if n >= 0 => Ok(n as u64),
        _ => Err(err(errors::NOT_POSITIVE)),
    };
    let count = tri!(positive(&args[0]));
    let size = match args.get(2) {
        Some(size) => Some(tri!(positive(size)) as usize),
        None => None,
    };
    let prefix: &[u8] = args.get(1).map_or(b"key", |p| p);
    let now = ctx.now;
    let db = ctx.db();
    let mut key = Vec::with_capacity(prefix.len() + 21);
    for n in 0..count {
        key.clear();
        key.extend_from_slice(prefix);
        key.push(b':');
        key.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
        key.truncate(POPULATE_KEY_MAX);
        if db.contains(&key, now) {
            continue;
        }
        let text = format!("value:{n}");
        let value = match size {
            None | Some(0) => Bytes::from(text),
            Some(size) => {
                let mut v = vec![0u8; size];
                let shown = size.min(text.len());
                v[..shown].copy_from_slice(&text.as_bytes()[..shown]);
                Bytes::from(v)
            }
        };
        db.insert(&key, crate::store::Value::Str(value), 0);
    }
    Reply::Ok
}

/// DEBUG RELOAD [MERGE] [NOFLUSH] [NOSAVE], as Redis's: saves the RDB file
/// (unless NOSAVE), empties the databases and the function libraries
/// (unless NOFLUSH, as Redis's `emptyData`), and loads the file back. A
/// key or library of the file that exists already is an error unless MERGE
/// lets the file's replace it (Redis stops the server on such a key; an
/// error reply is as clear and keeps the test's server). Nothing is
/// propagated: the dataset is what it was.
fn debug_reload(ctx: &mut Ctx, options: &[Bytes]) -> Reply {
    use crate::lua::functions::RestorePolicy;
    use crate::persist::saves;
    let (mut merge, mut flush, mut save) = (false, true, true);
    for option in options {
        if super::args::is(option, "merge") {
            merge = true;
        } else if super::args::is(option, "noflush") {
            flush = false;
        } else if super::args::is(option, "nosave") {
            save = false;
        } else {
            return err(errors::DEBUG_RELOAD_OPTIONS);
        }
    }
    if save {
        let libraries = saves::libraries(ctx.scripting.as_deref());
        if saves::save_now(ctx.dbs, ctx.server, &libraries, ctx.now).is_err() {
            return err(errors::SAVE_FAILED);
        }
    }
    if flush {
        for db in ctx.dbs.iter_mut() {
            db.clear();
        }
        crate::tracking::flushed(ctx);
    }
    let reload_failed = || err(errors::DEBUG_RELOAD_FAILED);
    let Ok(Some(loaded)) = crate::persist::rdb::disk::load_at_start(&ctx.server.config, ctx.now) else {
        return reload_failed();
    };
    if flush || !loaded.functions.is_empty() {
        let policy = if flush {
            RestorePolicy::Flush
        } else if merge {
            RestorePolicy::Replace
        } else {
            RestorePolicy::Append
        };
        let restored = ctx
            .scripting
            .as_deref_mut()
            .map(|s| s.restore_libraries(loaded.functions, policy));
        if !matches!(restored, Some(Ok(_))) {
            return reload_failed();
        }
    }
    // A key present (past its deadline too, as Redis's `dbAddRDBLoad`
    // sees it) is replaced under MERGE, else refused.
    if let Err((db, key)) = crate::persist::rdb::disk::install_checked(loaded.dbs, ctx.dbs, !merge) {
        tracing::warn!("RDB has duplicated key '{}' in DB {db}", String::from_utf8_lossy(&key));
        return reload_failed();
    }
    tracing::warn!("DB reloaded by DEBUG RELOAD");
    Reply::Ok
}

/// DEBUG LOADAOF, as Redis's: the append-only files flushed, the dataset
/// emptied and loaded back from them ([`crate::persist::aof::reload`]).
/// What the replay changed is not a change (Redis sets its dirty counter
/// to 0): nothing is propagated — written to the file, the command would
/// load the files again at their next load — and INFO's
/// `rdb_changes_since_last_save` reads 0.
fn debug_loadaof(ctx: &mut Ctx) -> Reply {
    let Some(scripting) = ctx.scripting.as_deref_mut() else {
        return err(errors::NOT_FROM_SCRIPT);
    };
    let dirty = ctx.server.dirty;
    let loaded = crate::persist::aof::reload(ctx.dbs, ctx.server, scripting);
    ctx.server.dirty = dirty;
    ctx.server.dirty_at_save = dirty;
    crate::tracking::flushed(ctx);
    if loaded.is_err() {
        return err(errors::DEBUG_LOADAOF_FAILED);
    }
    tracing::warn!("Append Only File loaded by DEBUG LOADAOF");
    Reply::Ok
}

/// The double DEBUG PROTOCOL DOUBLE answers (Redis's test value, not π).
const DEBUG_DOUBLE: f64 = 3141.0 / 1000.0;

/// The big number DEBUG PROTOCOL BIGNUM answers.
const DEBUG_BIGNUM: &str = "1234567999999999999999999999999999999";

/// DEBUG PROTOCOL type: one reply of each RESP3 type, as Redis's, for
/// clients to test their parsers (RESP2 gets each type's RESP2 form).
fn debug_protocol(ctx: &mut Ctx, name: &[u8]) -> Reply {
    let is = |word| super::args::is(name, word);
    let ints = || (0..3).map(Reply::Int).collect::<Vec<_>>();
    if is("string") {
        Reply::bulk("Hello World")
    } else if is("integer") {
        Reply::Int(12345)
    } else if is("double") {
        Reply::Double(DEBUG_DOUBLE)
    } else if is("bignum") {
        Reply::BigNum(Bytes::from_static(DEBUG_BIGNUM.as_bytes()))
    } else if is("null") {
        Reply::Nil
    } else if is("array") {
        Reply::Array(ints())
    } else if is("set") {
        Reply::Set(ints())
    } else if is("map") {
        Reply::Map((0..3).map(|j| (Reply::Int(j), Reply::Bool(j == 1))).collect())
    } else if is("attrib") {
        // Attributes are not a reply: a real one follows (RESP2 gets only it).
        let popularity = Reply::Array(vec![Reply::bulk("key:123"), Reply::Int(90)]);
        Reply::Attribute(Box::new((
            vec![(Reply::bulk("key-popularity"), popularity)],
            Reply::bulk("Some real reply following the attribute"),
        )))
    } else if is("push") {
        if !ctx.client.resp3 {
            return err(errors::DEBUG_PROTOCOL_RESP2_PUSH);
        }
        // A push is not the reply: a real one follows it.
        Reply::Many(vec![
            Reply::Push(vec![Reply::bulk("server-cpu-usage"), Reply::Int(42)]),
            Reply::bulk("Some real reply following the push reply"),
        ])
    } else if is("true") {
        Reply::Bool(true)
    } else if is("false") {
        Reply::Bool(false)
    } else if is("verbatim") {
        Reply::Verbatim(*b"txt", Bytes::from_static(b"This is a verbatim\nstring"))
    } else {
        err(errors::DEBUG_PROTOCOL_TYPES)
    }
}

/// The largest DEBUG QUICKLIST-PACKED-THRESHOLD Redis takes (4 GiB less
/// 1 MiB: its `packed_threshold` limit).
const PACKED_THRESHOLD_MAX: u64 = (1 << 32) - (1 << 20);

/// DEBUG QUICKLIST-PACKED-THRESHOLD size: Redis's check of the size (a
/// memory value, at most [`PACKED_THRESHOLD_MAX`]; 0 is its default).
/// coordis's lists have no plain nodes, so the size changes nothing a
/// client can see.
fn debug_packed_threshold(size: &[u8]) -> Reply {
    match crate::config::parse_memory(&String::from_utf8_lossy(size)) {
        Some(size) if size <= PACKED_THRESHOLD_MAX => Reply::Ok,
        _ => err(errors::DEBUG_PACKED_THRESHOLD),
    }
}

/// The server's test clock (`enable-test-commands` let this client in:
/// admission refuses the `COORDIS.*` commands otherwise).
fn clock<'a>(ctx: &'a Ctx) -> Result<&'a VirtualClock, Reply> {
    ctx.server
        .clock
        .as_virtual()
        .ok_or_else(|| err(errors::NOT_A_TEST_CLOCK))
}

/// Settles the server at the clock's new time (see the module docs) and
/// answers with that time.
fn settled(ctx: &mut Ctx) -> Reply {
    ctx.now = ctx.server.clock.now_ms();
    crate::engine::settle(ctx);
    Reply::Int(ctx.now as i64)
}

/// The clock's time, unix ms, and whether it is frozen, running, or running
/// off real time by a jump: `[ms, "frozen"|"running", offset-ms]`.
fn clock_get(ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    let c = tri!(clock(ctx));
    let mode = if c.is_frozen() { "frozen" } else { "running" };
    Reply::Array(vec![
        Reply::Int(ctx.server.clock.now_ms() as i64),
        Reply::status(mode),
        Reply::Int(if c.is_frozen() { 0 } else { c.offset_ms() }),
    ])
}

fn non_negative(arg: &[u8]) -> Result<u64, Reply> {
    match int(arg)? {
        n if n < 0 => Err(err(errors::NOT_POSITIVE)),
        n => Ok(n as u64),
    }
}

/// ADVANCE ms: forward by `ms` (frozen or running); answers the new time.
fn clock_advance(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let ms = tri!(non_negative(&args[2]));
    tri!(clock(ctx)).advance_ms(ms);
    settled(ctx)
}

/// JUMP ms: a step either way (a wall-clock jump).
fn clock_jump(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let ms = tri!(int(&args[2]));
    tri!(clock(ctx)).jump_ms(ms);
    settled(ctx)
}

/// SET unix-ms.
fn clock_set(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let ms = tri!(non_negative(&args[2]));
    tri!(clock(ctx)).set_ms(ms);
    settled(ctx)
}

fn clock_freeze(ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    tri!(clock(ctx)).freeze();
    settled(ctx)
}

fn clock_resume(ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    tri!(clock(ctx)).resume();
    settled(ctx)
}

fn clock_reset(ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    tri!(clock(ctx)).reset();
    settled(ctx)
}

fn clock_help(_ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    super::server::help_reply(&[
        "COORDIS.CLOCK <subcommand> [<arg> ...]. Subcommands are:",
        "GET",
        "    Return the clock's time (unix ms), FROZEN or RUNNING, and its offset from real time (ms).",
        "ADVANCE <milliseconds>",
        "    Move the clock forward; due keys expire and due blocked clients are answered before the reply.",
        "JUMP <milliseconds>",
        "    Step the clock forwards or (negative) backwards, as a wall-clock jump.",
        "SET <unix-time-milliseconds>",
        "    Set the clock.",
        "FREEZE",
        "    Stop the clock: time moves only by ADVANCE, JUMP and SET.",
        "RESUME",
        "    Let a frozen clock run on from where it stands.",
        "RESET",
        "    Back to real time.",
    ])
}

/// ADD [COMMAND glob] [KEY glob] [CLIENT glob] [AFTER m] [TIMES n]
/// [PROBABILITY p] ERROR text | DROP | LOSE-REPLY | HANG | DELAY ms
/// [JITTER ms] | SLICE bytes [PAUSE ms]: the rule's id.
fn fault_add(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let text = |a: &Bytes| String::from_utf8_lossy(a).into_owned();
    let mut rule = FaultRule::new(FaultAction::Drop);
    let mut action = None;
    // DELAY's JITTER and SLICE's PAUSE, in any order.
    let (mut jitter, mut pause) = (0, 0);
    let mut i = 2;
    while i < args.len() {
        let word = args[i].to_ascii_lowercase();
        let value = args.get(i + 1);
        match (word.as_slice(), value) {
            (b"drop", _) => action = Some(FaultAction::Drop),
            (b"lose-reply", _) => action = Some(FaultAction::LoseReply),
            (b"hang", _) => action = Some(FaultAction::Hang),
            (b"error", Some(v)) => {
                let message = text(v);
                action = Some(FaultAction::Error(if message.is_empty() {
                    "ERR".into()
                } else {
                    message
                }));
                i += 1;
            }
            (b"delay", Some(v)) => {
                action = Some(FaultAction::Delay {
                    ms: tri!(non_negative(v)),
                    jitter_ms: 0,
                });
                i += 1;
            }
            (b"jitter", Some(v)) => {
                jitter = tri!(non_negative(v));
                i += 1;
            }
            (b"slice", Some(v)) => {
                action = Some(FaultAction::Slice {
                    bytes: tri!(non_negative(v)).max(1) as usize,
                    pause_ms: 0,
                });
                i += 1;
            }
            (b"pause", Some(v)) => {
                pause = tri!(non_negative(v));
                i += 1;
            }
            (b"command", Some(v)) => {
                rule = rule.command(&text(v));
                i += 1;
            }
            (b"key", Some(v)) => {
                rule.key = Some(v.clone());
                i += 1;
            }
            (b"client", Some(v)) => {
                rule.client = Some(v.clone());
                i += 1;
            }
            (b"after", Some(v)) => {
                rule.after = tri!(non_negative(v));
                i += 1;
            }
            (b"times", Some(v)) => {
                rule.times = Some(tri!(non_negative(v)));
                i += 1;
            }
            (b"probability", Some(v)) => match crate::store::num::parse_f64(v) {
                Some(p) if (0.0..=1.0).contains(&p) => {
                    rule.probability = Some(p);
                    i += 1;
                }
                _ => return err(errors::PROBABILITY),
            },
            _ => return err(errors::SYNTAX),
        }
        i += 1;
    }
    rule.action = match action {
        Some(FaultAction::Delay { ms, .. }) => FaultAction::Delay { ms, jitter_ms: jitter },
        Some(FaultAction::Slice { bytes, .. }) => FaultAction::Slice { bytes, pause_ms: pause },
        Some(other) if jitter == 0 && pause == 0 => other,
        _ => return err(errors::SYNTAX),
    };
    Reply::Int(ctx.server.faults.add(rule) as i64)
}

/// LIST: each rule as a map of its fields and counts.
fn fault_list(ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    let or_nil = |v: Option<Bytes>| v.map_or(Reply::Nil, Reply::Bulk);
    let rules = ctx.server.faults.list().into_iter().map(|e| {
        let action = match &e.rule.action {
            FaultAction::Error(text) => format!("error {text}"),
            FaultAction::Drop => "drop".into(),
            FaultAction::LoseReply => "lose-reply".into(),
            FaultAction::Hang => "hang".into(),
            FaultAction::Delay { ms, jitter_ms: 0 } => format!("delay {ms}"),
            FaultAction::Delay { ms, jitter_ms } => format!("delay {ms} jitter {jitter_ms}"),
            FaultAction::Slice { bytes, pause_ms } => format!("slice {bytes} pause {pause_ms}"),
        };
        let field = |name: &'static str, v: Reply| (Reply::bulk(Bytes::from_static(name.as_bytes())), v);
        Reply::Map(vec![
            field("id", Reply::Int(e.id as i64)),
            field("command", or_nil(e.rule.command.clone().map(Bytes::from))),
            field("key", or_nil(e.rule.key.clone())),
            field("client", or_nil(e.rule.client.clone())),
            field("after", Reply::Int(e.rule.after as i64)),
            field("times-left", e.rule.times.map_or(Reply::Nil, |n| Reply::Int(n as i64))),
            field("probability", e.rule.probability.map_or(Reply::Nil, Reply::Double)),
            field("action", Reply::bulk(Bytes::from(action))),
            field("matched", Reply::Int(e.matched as i64)),
            field("fired", Reply::Int(e.fired as i64)),
        ])
    });
    Reply::Array(rules.collect())
}

/// DEL id: 1 if it was there. Clients a hang rule held go on once no hang
/// rule is left.
fn fault_del(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let id = tri!(non_negative(&args[2]));
    Reply::Int(crate::engine::remove_faults(ctx.dbs, ctx.server, Some(id)) as i64)
}

fn fault_clear(ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    crate::engine::remove_faults(ctx.dbs, ctx.server, None);
    Reply::Ok
}

/// SEED n: reseeds the generator probabilities draw from.
fn fault_seed(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let seed = tri!(non_negative(&args[2]));
    ctx.server.faults.seed(seed);
    Reply::Ok
}

fn fault_help(_ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    super::server::help_reply(&[
        "COORDIS.FAULT <subcommand> [<arg> ...]. Subcommands are:",
        "ADD [COMMAND <glob>] [KEY <glob>] [CLIENT <name-glob>] [AFTER <m>] [TIMES <n>] [PROBABILITY <p>] <action>",
        "    Add a rule; returns its id. Actions: ERROR <text> | DROP | LOSE-REPLY | HANG |",
        "    DELAY <ms> [JITTER <ms>] | SLICE <bytes> [PAUSE <ms>].",
        "LIST",
        "    The rules, with how many commands each matched and how often it fired.",
        "DEL <id>",
        "    Remove a rule (commands a HANG rule held then run).",
        "CLEAR",
        "    Remove every rule.",
        "SEED <n>",
        "    Seed the generator PROBABILITY draws from.",
    ])
}

/// PAUSE ms: a stop-the-world pause for `ms` of real time (nothing could
/// lift it over the wire): no command runs, nothing expires, no waiter
/// times out. This command's own reply is written first.
fn server_pause(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let ms = tri!(non_negative(&args[2]));
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return err(errors::NO_RUNTIME);
    };
    let shared = ctx.server.shared.clone();
    shared.set_frozen(true);
    runtime.spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
        shared.set_frozen(false);
    });
    Reply::Ok
}

/// RESTART [KEEPDATA|FLUSH]: every connection is dropped (this one
/// without a reply, as a crashed server gives none); FLUSH loses the
/// keyspace and the script cache too. KEEPDATA is the default.
fn server_restart(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let lose_data = match args.get(2) {
        None => false,
        Some(a) if a.eq_ignore_ascii_case(b"keepdata") => false,
        Some(a) if a.eq_ignore_ascii_case(b"flush") && args.len() == 3 => true,
        Some(_) => return err(errors::SYNTAX),
    };
    if args.len() > 3 {
        return err(errors::SYNTAX);
    }
    let Some(scripting) = ctx.scripting.as_deref_mut() else {
        return err(errors::NOT_FROM_SCRIPT);
    };
    crate::engine::restart(ctx.dbs, ctx.server, scripting, lose_data);
    ctx.client.close_after_reply = true;
    Reply::NOTHING
}

/// CRASH [LOSE-MS ms]: a power loss, staged: every connection is dropped
/// (this one without a reply), the append-only file is cut back to what
/// `appendfsync` had made durable (with LOSE-MS: to the writes older than
/// `ms` of server time, as a late fsync would lose them; under `always` what
/// was fsynced stays), and the server restarts from its files. Without the
/// file on, every key is lost.
fn server_crash(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let lose_ms = match &args[2..] {
        [] => None,
        [opt, ms] if opt.eq_ignore_ascii_case(b"lose-ms") => Some(tri!(non_negative(ms))),
        _ => return err(errors::SYNTAX),
    };
    let Some(scripting) = ctx.scripting.as_deref_mut() else {
        return err(errors::NOT_FROM_SCRIPT);
    };
    crate::persist::aof::crash(ctx.dbs, ctx.server, scripting, lose_ms);
    ctx.client.close_after_reply = true;
    Reply::NOTHING
}

/// DOWN ms: the server plays gone for `ms` of real time (every connection
/// dropped, this one without a reply, as from a server that died; new ones
/// closed at once), then is back with its data.
fn server_down(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let ms = tri!(non_negative(&args[2]));
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return err(errors::NO_RUNTIME);
    };
    crate::engine::set_down(ctx.server, true);
    ctx.client.close_after_reply = true;
    let shared = ctx.server.shared.clone();
    runtime.spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
        shared.down.store(false, std::sync::atomic::Ordering::Release);
    });
    Reply::NOTHING
}

/// FSYNC-STALL ms: a slow disk, staged: every fsync of the append-only
/// file first waits `ms` of real time (0 ends it). See
/// [`crate::control::ServerControl::stall_fsync`].
fn server_fsync_stall(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let ms = tri!(non_negative(&args[2]));
    ctx.server.shared.aof.stall_fsync(ms);
    Reply::Ok
}

/// DISK-FULL ON|OFF: a full disk, staged: every write and fsync of the
/// append-only file fails with ENOSPC while it is on. See
/// [`crate::control::ServerControl::disk_full`].
fn server_disk_full(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let on = if is(&args[2], "on") {
        true
    } else if is(&args[2], "off") {
        false
    } else {
        return err(errors::SYNTAX);
    };
    ctx.server.shared.aof.stage_disk_full(on);
    Reply::Ok
}

/// SEED n: seeds every random choice the server makes (SPOP, SRANDMEMBER,
/// ZRANDMEMBER, HRANDFIELD, RANDOMKEY), from the next command on.
fn server_seed(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let seed = tri!(non_negative(&args[2]));
    // The engine carries the state from this batch's end on.
    fastrand::seed(seed);
    ctx.server.random = Some(seed);
    Reply::Ok
}

fn server_help(_ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    super::server::help_reply(&[
        "COORDIS.SERVER <subcommand> [<arg> ...]. Subcommands are:",
        "PAUSE <milliseconds>",
        "    Stop the world for that long (real time): no command runs, nothing expires.",
        "DOWN <milliseconds>",
        "    Play a dead server for that long (real time): connections dropped, new ones closed; data kept.",
        "CRASH [LOSE-MS <milliseconds>]",
        "    A power loss: connections dropped, the append-only file cut to what its fsync policy made durable",
        "    (LOSE-MS: to the writes older than that), then a restart from the files.",
        "DISK-FULL (ON|OFF)",
        "    A full disk: every write and fsync of the append-only file fails (ENOSPC) while ON.",
        "FSYNC-STALL <milliseconds>",
        "    A slow disk: every fsync of the append-only file first waits that long (real time); 0 ends it.",
        "RESTART [KEEPDATA|FLUSH]",
        "    Drop every connection; FLUSH also loses every key and script, as a crash without persistence.",
        "SEED <n>",
        "    Seed every random choice (SPOP, SRANDMEMBER, ZRANDMEMBER, HRANDFIELD, RANDOMKEY).",
    ])
}

/// Replica link `k` (0-based, in the order they connected, as INFO's
/// `slave<k>` lines).
fn link(ctx: &Ctx, k: &[u8]) -> Result<std::sync::Arc<crate::repl::Replica>, Reply> {
    let k = non_negative(k)?;
    let replicas = ctx.server.repl.replicas();
    usize::try_from(k)
        .ok()
        .and_then(|k| replicas.get(k).cloned())
        .ok_or_else(|| err(errors::NO_SUCH_LINK))
}

/// LINKS: each replica link, in INFO's order: `[ip, port, state, acked
/// offset, sent offset, paused (0|1), delay ms, writes still to drop]`.
fn repl_links(ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    use std::sync::atomic::Ordering::Acquire;
    let rows = ctx
        .server
        .repl
        .replicas()
        .iter()
        .map(|r| {
            let next = r.next.load(Acquire);
            let sent = if next == u64::MAX { 0 } else { next - 1 };
            Reply::Array(vec![
                Reply::bulk(r.ip.clone()),
                Reply::Int(r.port as i64),
                Reply::bulk(r.state().name()),
                Reply::Int(r.ack_offset() as i64),
                Reply::Int(sent as i64),
                Reply::Int(i64::from(r.faults.paused.load(Acquire))),
                Reply::Int(r.faults.delay_ms.load(Acquire) as i64),
                Reply::Int(r.faults.drop_units.load(Acquire) as i64),
            ])
        })
        .collect();
    Reply::Array(rows)
}

/// PAUSE k: link `k` writes nothing of the stream until RESUME (the bytes
/// wait in the backlog; the replica still acknowledges what it has).
fn repl_pause(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    tri!(link(ctx, &args[2])).faults.set_paused(true);
    Reply::Ok
}

/// RESUME k: lifts PAUSE and DELAY; what waited goes out at once.
fn repl_resume(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let r = tri!(link(ctx, &args[2]));
    r.faults.set_delay(0);
    r.faults.set_paused(false);
    Reply::Ok
}

/// DELAY k ms: from now on link `k` writes each byte `ms` of server clock
/// after it was published (0: no delay); a moved test clock releases them.
fn repl_delay(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let r = tri!(link(ctx, &args[2]));
    r.faults.set_delay(tri!(non_negative(&args[3])));
    Reply::Ok
}

/// CUT k: link `k` is closed; the replica reconnects and continues from
/// the backlog (a partial resync).
fn repl_cut(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    tri!(link(ctx, &args[2])).kill();
    Reply::Ok
}

/// DROP k n: link `k` leaves out the next `n` writes (the replica never
/// gets them, and never acknowledges the primary's offset again).
fn repl_drop(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let r = tri!(link(ctx, &args[2]));
    let n = tri!(non_negative(&args[3]));
    match ctx.server.repl.hub() {
        Some(hub) => hub.arm_drops(&r, n),
        None => r.faults.drop_next(n),
    }
    Reply::Ok
}

/// DIE [UNSENT|SENT]: the primary dies now (as COORDIS.SERVER DOWN, for
/// good: every connection dropped, this one without a reply, new ones
/// closed). UNSENT (the default): what the links had not written yet is
/// lost with it. SENT: each link first writes everything published, then
/// closes.
fn repl_die(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let sent = match &args[2..] {
        [] => false,
        [a] if a.eq_ignore_ascii_case(b"unsent") => false,
        [a] if a.eq_ignore_ascii_case(b"sent") => true,
        _ => return err(errors::SYNTAX),
    };
    die(ctx.server, sent);
    ctx.client.close_after_reply = true;
    Reply::NOTHING
}

/// The primary dies (see [`repl_die`]): its links end (at once, or once
/// they wrote the stream's end), every other connection is dropped and new
/// ones are refused.
pub(crate) fn die(server: &mut crate::state::ServerState, sent: bool) {
    let end = server.repl.offset() + 1;
    server.repl.died_with = server.repl.replicas().iter().map(|r| (r.ip.clone(), r.port)).collect();
    for r in server.repl.replicas() {
        if sent && r.state() == crate::repl::State::Online {
            r.faults.drain(end);
        } else {
            r.kill();
        }
    }
    tracing::warn!(
        "the primary dies (test-control plane), its last writes {}",
        if sent { "sent" } else { "unsent" }
    );
    server.shared.down.store(true, std::sync::atomic::Ordering::Release);
    server.clients.kill_where(|c| !(sent && c.replica));
}

/// PROMOTE k: replica `k` is sent `REPLICAOF NO ONE` (it is a primary
/// once its ROLE says so: the reply comes first); answers its address.
fn repl_promote(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let k = tri!(non_negative(&args[2]));
    let found = usize::try_from(k).ok().and_then(|k| ctx.server.repl.replica_address(k));
    let Some((ip, port)) = found else {
        return err(errors::NO_SUCH_LINK);
    };
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return err(errors::PROMOTE_NO_RUNTIME);
    };
    let addr = format!("{ip}:{port}");
    let target = addr.clone();
    runtime.spawn(async move {
        if let Err(e) = crate::repl::promote_at(&target).await {
            tracing::warn!("PROMOTE {target}: {e}");
        }
    });
    Reply::bulk(addr)
}

fn repl_help(_ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    super::server::help_reply(&[
        "COORDIS.REPLICATION <subcommand> [<arg> ...]. Subcommands are:",
        "LINKS",
        "    Each replica link: ip, port, state, acked offset, sent offset, paused, delay ms, writes to drop.",
        "PAUSE <k> | RESUME <k>",
        "    Link k writes nothing of the stream / goes on (RESUME also lifts DELAY).",
        "DELAY <k> <milliseconds>",
        "    Link k writes each byte that long (server clock) after it was published.",
        "CUT <k>",
        "    Close link k; the replica reconnects and resyncs partially.",
        "DROP <k> <n>",
        "    Link k leaves out the next n writes.",
        "DIE [UNSENT|SENT]",
        "    The primary dies now, with what its links had not written lost (UNSENT) or sent first (SENT).",
        "PROMOTE <k>",
        "    Send REPLICAOF NO ONE to replica k; answers its address.",
    ])
}

/// LIMIT <bytes> [POLICY <policy>]: `maxmemory` (0: none) and the policy
/// for a test, as CONFIG SET sets them (a limit below the memory in use
/// evicts before the reply).
fn memory_limit(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let bytes = tri!(non_negative(&args[2]));
    let policy = match &args[3..] {
        [] => ctx.server.config.memory.policy,
        [word, name] if word.eq_ignore_ascii_case(b"policy") => {
            match crate::evict::Policy::parse(&String::from_utf8_lossy(name)) {
                Some(p) => p,
                None => return err(errors::SYNTAX),
            }
        }
        _ => return err(errors::SYNTAX),
    };
    ctx.server.config.memory.policy = policy;
    ctx.server.config.memory.maxmemory = bytes;
    super::server::apply_config_effect(ctx, crate::config::Effect::Maxmemory);
    Reply::Ok
}

/// USED: the bytes counted against `maxmemory` now (INFO's `used_memory`
/// less `mem_not_counted_for_evict`).
fn memory_used(ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    let used = crate::process::used_memory().saturating_sub(crate::evict::not_counted(ctx));
    Reply::Int(used as i64)
}

/// FILL <percent> [SIZE <bytes>] [PREFIX <text>]: adds string keys
/// `<prefix><n>` of SIZE bytes (default 100, prefix `fill:`) until the
/// memory counted reaches that percent of `maxmemory` (no eviction: that
/// is the next command's). Answers the keys added.
fn memory_fill(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    const DEFAULT_SIZE: u64 = 100;
    const MAX_PERCENT: u64 = 1000;
    let percent = tri!(non_negative(&args[2]));
    let (mut size, mut prefix) = (DEFAULT_SIZE, Bytes::from_static(b"fill:"));
    let mut i = 3;
    while i < args.len() {
        match (args[i].to_ascii_lowercase().as_slice(), args.get(i + 1)) {
            (b"size", Some(n)) => size = tri!(non_negative(n)),
            (b"prefix", Some(p)) => prefix = p.clone(),
            _ => return err(errors::SYNTAX),
        }
        i += 2;
    }
    let max = ctx.server.config.memory.maxmemory;
    if max == 0 {
        return err(errors::FILL_NO_LIMIT);
    }
    if percent > MAX_PERCENT {
        return err(errors::FILL_PERCENT);
    }
    let target = (max as u128 * percent as u128 / 100) as u64;
    let value = vec![b'x'; size as usize];
    let mut added = 0u64;
    let mut n = 0u64;
    while crate::process::used_memory().saturating_sub(crate::evict::not_counted(ctx)) < target {
        let mut key = prefix.to_vec();
        key.extend_from_slice(n.to_string().as_bytes());
        n += 1;
        let now = ctx.now;
        if ctx.db().contains(&key, now) {
            continue;
        }
        // A copy per key: a shared buffer would leave the memory unfilled.
        let value = crate::store::Value::Str(Bytes::copy_from_slice(&value));
        ctx.db().insert(&key, value, 0);
        added += 1;
    }
    ctx.dirty(added);
    Reply::Int(added as i64)
}

/// CANDIDATES [count]: the keys the next eviction would consider, best
/// first, as `[db, key]` pairs (default all the pool holds): one round of
/// the sampler, from the seeded generator (`COORDIS.SERVER SEED`). The
/// first is the key the next eviction takes; asking changes nothing
/// ([`crate::evict::candidates`]).
fn memory_candidates(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let count = match args.get(2) {
        Some(n) => tri!(non_negative(n)) as usize,
        None => crate::evict::POOL_SIZE,
    };
    if args.len() > 3 {
        return err(errors::SYNTAX);
    }
    let out = crate::evict::candidates(ctx, count)
        .into_iter()
        .map(|c| Reply::Array(vec![Reply::Int(c.db as i64), Reply::Bulk(c.key)]))
        .collect();
    Reply::Array(out)
}

fn memory_help(_ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    super::server::help_reply(&[
        "COORDIS.MEMORY <subcommand> [<arg> ...]. Subcommands are:",
        "LIMIT <bytes> [POLICY <policy>]",
        "    Set maxmemory (0: none) and the eviction policy; a limit below the memory in use evicts at once.",
        "USED",
        "    The bytes counted against maxmemory now.",
        "FILL <percent> [SIZE <bytes>] [PREFIX <text>]",
        "    Add string keys until that percent of maxmemory is in use; answers the keys added.",
        "CANDIDATES [<count>]",
        "    The keys the next eviction would take, best first, as [db, key] (seed with COORDIS.SERVER SEED).",
    ])
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_family_is_in_the_table() {
        assert!(super::super::lookup(b"COORDIS.CLOCK|advance").is_some());
    }
}
