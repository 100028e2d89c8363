//! MEMORY: USAGE, STATS, DOCTOR, MALLOC-STATS, PURGE and HELP, with Redis
//! 7.0.15's arguments, errors and reply shapes.
//!
//! The figures are coordis's own: the process's allocator (see
//! [`crate::process`]) for STATS and DOCTOR, and for USAGE an estimate of
//! what a key holds in coordis's storage (its item, a long string's bytes,
//! a collection's elements) — not Redis's byte counts for the same data.
//! As Redis does, USAGE measures the first `SAMPLES` elements of a
//! collection (default 5, 0 for all) and extrapolates to its length.

use bytes::Bytes;

use super::args::is;
use super::flags::*;
use super::{acl, CommandSpec, Ctx};
use crate::errors::{self, err};
use crate::protocol::Reply;
use crate::store::hash::HashRef;
use crate::store::set::{Member, Set};
use crate::store::ValueRef;

#[rustfmt::skip]
pub(crate) static COMMANDS: &[CommandSpec] = &[
    command!("server", "memory", -2, 0, 0, "A container for memory diagnostics commands", super::container, MEMORY),
];

#[rustfmt::skip]
static MEMORY: &[CommandSpec] = &[
    command!("server", "memory|usage", -3, READONLY, acl::READ, "Estimate the memory usage of a key", memory_usage),
    command!("server", "memory|stats", 2, 0, 0, "Show memory usage details", memory_stats),
    command!("server", "memory|doctor", 2, 0, 0, "Outputs memory problems report", memory_doctor),
    command!("server", "memory|malloc-stats", 2, 0, 0, "Show allocator internal stats", memory_malloc_stats),
    command!("server", "memory|purge", 2, 0, 0, "Ask the allocator to release memory", memory_purge),
    command!("server", "memory|help", 2, LOADING | STALE, 0, "Show helpful text about the different subcommands", memory_help),
];

/// Elements USAGE measures by default (Redis's `OBJ_COMPUTE_SIZE_DEF_SAMPLES`).
const DEFAULT_SAMPLES: usize = 5;

/// What glibc's malloc takes for a request of `n` bytes: its 8-byte header,
/// rounded up to 16, at least 32.
fn malloc_size(n: usize) -> usize {
    (n + 8).div_ceil(16).max(2) * 16
}

/// The average of `sizes` over the first `samples` elements, times `len`.
fn extrapolate(sizes: impl Iterator<Item = usize>, samples: usize, len: usize) -> usize {
    let (mut total, mut taken) = (0, 0);
    for size in sizes.take(samples) {
        total += size;
        taken += 1;
    }
    total.checked_div(taken).map_or(0, |average| average * len)
}

/// Estimated heap bytes of a value's contents beyond its item (see the
/// module docs). Per element: the bytes plus a listpack entry's header (2)
/// in compact encodings, a node, bucket or slot in the others; an intset's
/// integers exactly.
fn contents_bytes(value: ValueRef<'_>, samples: usize, len: usize) -> usize {
    const PACKED: usize = 2;
    const TABLE_ENTRY: usize = 48;
    const TREE_NODE: usize = 64;
    const ARENA_SLOT: usize = 24;
    let member = |m: Member<'_>| match m {
        Member::Int(_) => 8,
        Member::Bytes(b) => b.len(),
    };
    match value {
        // A short string is inside the item, a long one counted by it.
        ValueRef::Str(_) => 0,
        // A listpack hash is inside the item.
        ValueRef::Hash(HashRef::Listpack(_)) => 0,
        ValueRef::Hash(h @ HashRef::Table(_)) => extrapolate(
            h.iter()
                .map(|(f, v)| malloc_size(f.len()) + malloc_size(v.len()) + TABLE_ENTRY),
            samples,
            len,
        ),
        ValueRef::List(l) => extrapolate(l.iter().map(|e| e.len() + PACKED), samples, len),
        ValueRef::Set(Set::Ints(ints)) => ints.capacity() * 8,
        ValueRef::Set(x @ Set::Table(_)) => extrapolate(x.iter().map(|m| member(m) + ARENA_SLOT), samples, len),
        ValueRef::ZSet(z) => {
            let per = if z.encoding() == "skiplist" {
                TREE_NODE
            } else {
                PACKED + 9
            };
            extrapolate(z.iter().map(|(m, _)| m.len() + per), samples, len)
        }
        ValueRef::Stream(x) => x.heap_bytes(samples),
    }
}

/// MEMORY USAGE key [SAMPLES count]: nil for a missing key (a key past its
/// deadline but not yet removed still counts, as in Redis).
fn memory_usage(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let mut samples = DEFAULT_SAMPLES;
    let mut i = 3;
    while i < args.len() {
        if is(&args[i], "samples") && i + 1 < args.len() {
            match crate::store::num::parse_i64(&args[i + 1]) {
                None => return err(errors::NOT_INTEGER),
                Some(n) if n < 0 => return err(errors::SYNTAX),
                Some(0) => samples = usize::MAX,
                Some(n) => samples = n as usize,
            }
            i += 2;
        } else {
            return err(errors::SYNTAX);
        }
    }
    let Some(item) = ctx.db().peek(&args[2]) else {
        return Reply::Nil;
    };
    let value = item.value();
    let len = value.length();
    // The item's own allocation and its slot in the key table.
    let bytes = malloc_size(item.own_bytes()) + 9 + contents_bytes(value, samples, len);
    Reply::Int(bytes as i64)
}

/// The figures INFO memory, MEMORY STATS and DOCTOR read (Redis's
/// `redisMemOverhead`): the overhead is the memory at start, the
/// replication and AOF buffers, the clients, the script and function
/// sources and the key tables; the dataset the rest.
pub(super) struct Overhead {
    pub peak: u64,
    pub total: u64,
    pub startup: u64,
    /// The replication buffer's backlog share (`mem_replication_backlog`).
    pub repl_backlog: u64,
    /// The whole replication buffer (`mem_total_replication_buffers`).
    pub repl_buffers: u64,
    /// The replication buffer beyond the backlog and the replicas'
    /// connections (`mem_clients_slaves`).
    pub clients_slaves: u64,
    pub clients_normal: u64,
    /// The AOF's own buffer (`mem_aof_buffer`).
    pub aof_buffer: u64,
    /// Bytes of the cached scripts' and the libraries' sources.
    pub lua_caches: u64,
    pub functions_caches: u64,
    /// Per database with keys: (index, main table, deadline index, keys).
    pub dbs: Vec<(usize, u64, u64, u64)>,
    pub overhead_total: u64,
    pub dataset: u64,
    pub allocator_active: u64,
    pub rss: u64,
    /// Cached scripts.
    pub scripts: usize,
}

/// Reads the allocator (see [`crate::process`]): for INFO and MEMORY only.
pub(super) fn overhead(ctx: &mut Ctx) -> Overhead {
    let (lua_caches, functions_caches, scripts) = ctx.scripting.as_ref().map_or((0, 0, 0), |l| {
        let functions: usize = l.libraries().iter().map(|lib| lib.code.len()).sum();
        (l.scripts_bytes() as u64, functions as u64, l.len())
    });
    let alloc = ctx.server.note_memory();
    let dbs: Vec<(usize, u64, u64, u64)> = ctx
        .dbs
        .iter()
        .enumerate()
        .filter(|(_, db)| !db.is_empty())
        .map(|(i, db)| {
            let (main, expires) = db.overhead();
            (i, main as u64, expires as u64, db.len() as u64)
        })
        .collect();
    let startup = ctx.server.memory_startup;
    let tables: u64 = dbs.iter().map(|d| d.1 + d.2).sum();
    let repl = ctx.server.repl.buffer_memory();
    let clients_slaves = repl.replicas + crate::net::client_mem::replica_clients_total(ctx.server, ctx.client);
    let clients_normal = crate::net::client_mem::normal_clients_total(ctx.server, ctx.client);
    let aof_buffer = aof_buffer(ctx.server);
    let overhead_total = (startup
        + repl.backlog
        + clients_slaves
        + clients_normal
        + aof_buffer
        + lua_caches
        + functions_caches
        + tables)
        .min(alloc.allocated);
    Overhead {
        peak: ctx.server.memory_peak,
        total: alloc.allocated,
        startup,
        repl_backlog: repl.backlog,
        repl_buffers: repl.backlog + repl.replicas,
        clients_slaves,
        clients_normal,
        aof_buffer,
        lua_caches,
        functions_caches,
        dbs,
        overhead_total,
        dataset: alloc.allocated - overhead_total,
        allocator_active: alloc.active,
        rss: crate::process::rss_bytes(),
        scripts,
    }
}

/// The memory of the AOF's buffer while the file is on (Redis's
/// `sdsZmallocSize(aof_buf)`).
pub(crate) fn aof_buffer(state: &crate::state::ServerState) -> u64 {
    if state.aof.on {
        state
            .shared
            .aof
            .buffer_memory
            .load(std::sync::atomic::Ordering::Relaxed)
    } else {
        0
    }
}

/// Redis computes MEMORY STATS's ratios in single precision.
fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        (a as f32 / b as f32) as f64
    }
}

fn memory_stats(ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    let m = overhead(ctx);
    let int = |n: u64| Reply::Int(n as i64);
    let diff = |a: u64, b: u64| Reply::Int(a as i64 - b as i64);
    let key = |k: &str| Reply::bulk(Bytes::copy_from_slice(k.as_bytes()));
    let keys: u64 = m.dbs.iter().map(|d| d.3).sum();
    let net = m.total.saturating_sub(m.startup);
    let mut pairs = vec![
        (key("peak.allocated"), int(m.peak)),
        (key("total.allocated"), int(m.total)),
        (key("startup.allocated"), int(m.startup)),
        (key("replication.backlog"), int(m.repl_backlog)),
        (key("clients.slaves"), int(m.clients_slaves)),
        (key("clients.normal"), int(m.clients_normal)),
        (key("cluster.links"), int(0)),
        (key("aof.buffer"), int(m.aof_buffer)),
        (key("lua.caches"), int(m.lua_caches)),
        (key("functions.caches"), int(m.functions_caches)),
    ];
    for &(i, main, expires, _) in &m.dbs {
        let db = vec![
            (key("overhead.hashtable.main"), int(main)),
            (key("overhead.hashtable.expires"), int(expires)),
            (key("overhead.hashtable.slot-to-keys"), int(0)),
        ];
        pairs.push((key(&format!("db.{i}")), Reply::Map(db)));
    }
    pairs.extend([
        (key("overhead.total"), int(m.overhead_total)),
        (key("keys.count"), int(keys)),
        (key("keys.bytes-per-key"), int(net.checked_div(keys).unwrap_or(0))),
        (key("dataset.bytes"), int(m.dataset)),
        (
            key("dataset.percentage"),
            Reply::Double(ratio(m.dataset, net.max(1)) * 100.0),
        ),
        (key("peak.percentage"), Reply::Double(ratio(m.total, m.peak) * 100.0)),
        (key("allocator.allocated"), int(m.total)),
        (key("allocator.active"), int(m.allocator_active)),
        (key("allocator.resident"), int(m.rss)),
        (
            key("allocator-fragmentation.ratio"),
            Reply::Double(ratio(m.allocator_active, m.total)),
        ),
        (key("allocator-fragmentation.bytes"), diff(m.allocator_active, m.total)),
        (
            key("allocator-rss.ratio"),
            Reply::Double(ratio(m.rss, m.allocator_active)),
        ),
        (key("allocator-rss.bytes"), diff(m.rss, m.allocator_active)),
        // The allocator's resident memory is the process's here.
        (key("rss-overhead.ratio"), Reply::Double(1.0)),
        (key("rss-overhead.bytes"), int(0)),
        (key("fragmentation"), Reply::Double(ratio(m.rss, m.total))),
        (key("fragmentation.bytes"), diff(m.rss, m.total)),
    ]);
    Reply::Map(pairs)
}

/// MEMORY DOCTOR: Redis's report, from the same thresholds on coordis's
/// figures (client buffers and replicas never trigger here).
fn memory_doctor(ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    let m = overhead(ctx);
    let text = if m.total < 5 << 20 {
        errors::MEMORY_DOCTOR_EMPTY.to_string()
    } else {
        let frag = ratio(m.rss, m.total);
        let alloc_frag = ratio(m.allocator_active, m.total);
        let alloc_rss = ratio(m.rss, m.allocator_active);
        let findings: Vec<&str> = [
            ((m.peak as f32 / m.total as f32) > 1.5, errors::MEMORY_DOCTOR_PEAK),
            (
                frag > 1.4 && m.rss.saturating_sub(m.total) > 10 << 20,
                errors::MEMORY_DOCTOR_HIGH_RSS,
            ),
            (
                alloc_frag > 1.1 && m.allocator_active.saturating_sub(m.total) > 10 << 20,
                errors::MEMORY_DOCTOR_ALLOCATOR_FRAG,
            ),
            (
                alloc_rss > 1.1 && m.rss.saturating_sub(m.allocator_active) > 10 << 20,
                errors::MEMORY_DOCTOR_ALLOCATOR_RSS,
            ),
            (m.scripts > 1000, errors::MEMORY_DOCTOR_MANY_SCRIPTS),
        ]
        .into_iter()
        .filter_map(|(found, text)| found.then_some(text))
        .collect();
        if findings.is_empty() {
            errors::MEMORY_DOCTOR_FINE.to_string()
        } else {
            let mut text = errors::MEMORY_DOCTOR_ISSUES.to_string();
            for finding in findings {
                text.push_str(finding);
            }
            text.push_str(errors::MEMORY_DOCTOR_END);
            text
        }
    };
    Reply::Verbatim(*b"txt", Bytes::from(text))
}

/// Redis built with libc malloc answers this; coordis uses it too.
fn memory_malloc_stats(_ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    Reply::bulk(Bytes::from_static(errors::MALLOC_STATS_UNSUPPORTED.as_bytes()))
}

/// MEMORY PURGE: returns free heap memory to the system (glibc's
/// `malloc_trim`; Redis asks jemalloc the same).
fn memory_purge(_ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    crate::process::purge();
    Reply::Ok
}

fn memory_help(_ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    super::server::help_reply(&[
        "MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "DOCTOR",
        "    Return memory problems reports.",
        "MALLOC-STATS",
        "    Return internal statistics report from the memory allocator.",
        "PURGE",
        "    Attempt to purge dirty pages for reclamation by the allocator.",
        "STATS",
        "    Return information about the memory usage of the server.",
        "USAGE <key> [SAMPLES <count>]",
        "    Return memory in bytes used by <key> and its value. Nested values are",
        "    sampled up to <count> times (default: 5, 0 means sample all).",
    ])
}
