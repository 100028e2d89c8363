//! HyperLogLog commands: PFADD, PFCOUNT, PFMERGE, PFDEBUG, PFSELFTEST.
//!
//! An HLL is a plain string in Redis's format ([`crate::store::hll`] owns
//! the bytes), so GET and SET of one are Redis's bytes. Lookups, counters
//! and effects follow Redis 7.0.15's `hyperloglog.c`: PFADD counts one
//! change for creating the key and one per element that raised a register;
//! PFCOUNT of one key whose cached cardinality is stale writes the new one
//! into the string, counts a change and so is replicated as itself (a
//! read-only command that writes); PFMERGE always counts one change and
//! leaves a `pfadd` event; PFDEBUG GETREG and TODENSE count one when they
//! turned the string dense. A string that is not an HLL is
//! `WRONGTYPE Key is not a valid HyperLogLog string value.`, a sparse one
//! whose runs do not cover every register `INVALIDOBJ`.

use bytes::Bytes;

use super::args::is;
use super::flags::*;
use super::{acl, CommandSpec, Ctx};
use crate::errors::{self, err};
use crate::notify;
use crate::protocol::Reply;
use crate::store::hll::{self, Encoding};
use crate::store::{StrEncoding, Value};
use crate::tri;

macro_rules! spec {
    ($($row:tt)*) => { command!("hyperloglog", $($row)*) };
}

#[rustfmt::skip]
pub(crate) static COMMANDS: &[CommandSpec] = &[
    spec!("pfadd", -2, WRITE | DENYOOM | FAST, acl::HYPERLOGLOG, "Adds the specified elements to the specified HyperLogLog.", pfadd),
    spec!("pfcount", -2, READONLY | MAY_REPLICATE, acl::HYPERLOGLOG, "Return the approximated cardinality of the set(s) observed by the HyperLogLog at key(s).", pfcount),
    spec!("pfmerge", -2, WRITE | DENYOOM, acl::HYPERLOGLOG, "Merge N different HyperLogLogs into a single one.", pfmerge),
    spec!("pfdebug", 3, WRITE | DENYOOM | ADMIN, acl::HYPERLOGLOG, "Internal commands for debugging HyperLogLog values", pfdebug),
    spec!("pfselftest", 1, ADMIN, acl::HYPERLOGLOG, "An internal command for testing HyperLogLog values", pfselftest),
];

/// PFSELFTEST's sizes, Redis's: rounds of the register test, and elements
/// added in the estimate test.
const SELFTEST_CYCLES: u32 = 1000;
const SELFTEST_ELEMENTS: u64 = 10_000_000;

/// A string the PF commands were given: an HLL, or Redis's refusal.
fn checked(found: Option<Bytes>) -> Result<Option<Bytes>, Reply> {
    match found {
        Some(s) if !hll::is_hll(&s) => Err(err(errors::NOT_HLL)),
        other => Ok(other),
    }
}

/// The HLL at `key` for a command that reads it (a keyspace hit or miss
/// counted, as `lookupKeyRead`).
fn read(ctx: &mut Ctx, key: &[u8]) -> Result<Option<Bytes>, Reply> {
    checked(ctx.get_str(key)?)
}

/// Runs `change` on the bytes of the HLL at `key` in its slot (one
/// lookup, and no copy of a long string), which is a `raw` string from
/// then on, as Redis makes it its own (`dbUnshareStringValue`) whatever
/// happens. When `change` says it changed them, the key counts as
/// modified. `Ok(None)`: no such key; WRONGTYPE and not-an-HLL change
/// nothing. Nothing is counted as a keyspace hit or miss (`lookupKeyWrite`).
fn edit<R>(ctx: &mut Ctx, key: &[u8], change: impl FnOnce(&mut Vec<u8>) -> (R, bool)) -> Result<Option<R>, Reply> {
    let now = ctx.now;
    let edited = ctx.db().edit_str(key, now, |s, encoding| {
        if !hll::is_hll(s) {
            return (None, false);
        }
        *encoding = StrEncoding::Raw;
        let (out, changed) = change(s);
        (Some(out), changed)
    });
    match edited {
        None => Ok(None),
        Some(Err(())) => Err(err(errors::WRONGTYPE)),
        Some(Ok(None)) => Err(err(errors::NOT_HLL)),
        Some(Ok(Some(out))) => Ok(Some(out)),
    }
}

/// [`edit`] of a key the command has found holding an HLL.
fn modify<R>(ctx: &mut Ctx, key: &[u8], change: impl FnOnce(&mut Vec<u8>) -> (R, bool)) -> R {
    match edit(ctx, key, change) {
        Ok(Some(out)) => out,
        _ => unreachable!("modify() of a key the command found holding an HLL"),
    }
}

/// PFADD key [element ...]: 1 when a register changed (or the key was
/// created), else 0.
fn pfadd(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let key = &args[1];
    let sparse_max = ctx.server.config.hll_sparse_max_bytes;
    let elements = &args[2..];
    // Registers raised, and whether an element met a corrupt HLL (Redis
    // keeps what the elements before it changed, and counts nothing).
    let add_all = |s: &mut Vec<u8>, mut updated: u64| -> (u64, bool) {
        for e in elements {
            match hll::add(s, e, sparse_max) {
                Ok(true) => updated += 1,
                Ok(false) => {}
                Err(hll::Corrupt) => return (updated, true),
            }
        }
        if updated > 0 {
            hll::invalidate(s);
        }
        (updated, false)
    };
    let edited = tri!(edit(ctx, key, |s| {
        let out = add_all(s, 0);
        (out, out.0 > 0)
    }));
    let (updated, corrupt) = match edited {
        Some(out) => out,
        None => {
            let mut s = hll::new_sparse();
            let out = add_all(&mut s, 1);
            ctx.db().insert(key, Value::Str(Bytes::from(s)), 0);
            ctx.db().set_str_encoding(key, StrEncoding::Raw);
            out
        }
    };
    if corrupt {
        return err(errors::HLL_CORRUPT);
    }
    if updated > 0 {
        ctx.dirty(updated);
        ctx.notify(notify::STRING, "pfadd", key);
    }
    Reply::Int((updated > 0) as i64)
}

/// PFCOUNT key [key ...]: the estimate of one HLL (cached in its header),
/// or of the union of several (nothing cached).
fn pfcount(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    if args.len() > 2 {
        let mut max = vec![0u8; hll::REGISTERS];
        for key in &args[1..] {
            let Some(s) = tri!(read(ctx, key)) else {
                continue;
            };
            if hll::merge_into(&mut max, &s).is_err() {
                return err(errors::HLL_CORRUPT);
            }
        }
        return Reply::Int(hll::count_registers(&max) as i64);
    }
    // One key: its cached estimate, or one computed and cached, in one
    // lookup (counted as a read's hit or miss, `lookupKeyRead`).
    let key = &args[1];
    let counted = edit(ctx, key, |s| match hll::cached(s) {
        Some(card) => (Ok((card, false)), false),
        None => match hll::count(s) {
            Ok(card) => {
                hll::set_cached(s, card);
                (Ok((card, true)), true)
            }
            Err(hll::Corrupt) => (Err(()), false),
        },
    });
    let stats = &mut ctx.server.stats;
    match &counted {
        Ok(None) => stats.keyspace_misses += 1,
        _ => stats.keyspace_hits += 1,
    }
    match tri!(counted) {
        None => Reply::Int(0),
        Some(Err(())) => err(errors::HLL_CORRUPT),
        Some(Ok((card, computed))) => {
            if computed {
                ctx.dirty(1);
            }
            Reply::Int(card as i64)
        }
    }
}

/// PFMERGE destkey [sourcekey ...]: the union (the destination's own
/// registers included) stored at `destkey`, dense when any input was.
fn pfmerge(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let mut max = vec![0u8; hll::REGISTERS];
    let mut dense = false;
    for key in &args[1..] {
        let Some(s) = tri!(read(ctx, key)) else {
            continue;
        };
        dense |= hll::encoding(&s) == Encoding::Dense;
        if hll::merge_into(&mut max, &s).is_err() {
            return err(errors::HLL_CORRUPT);
        }
    }
    let key = &args[1];
    let sparse_max = ctx.server.config.hll_sparse_max_bytes;
    let write = |s: &mut Vec<u8>| {
        if dense {
            // The destination was merged above, so it is not corrupt.
            let _ = hll::to_dense(s);
        }
        hll::raise_all(s, &max, sparse_max);
        hll::invalidate(s);
    };
    let existed = tri!(ctx.get_str_for_write(key)).is_some();
    if existed {
        modify(ctx, key, |s| (write(s), true));
    } else {
        let mut s = hll::new_sparse();
        write(&mut s);
        ctx.db().insert(key, Value::Str(Bytes::from(s)), 0);
        ctx.db().set_str_encoding(key, StrEncoding::Raw);
    }
    ctx.dirty(1);
    // Redis names a merge a `pfadd`: a mass add of elements.
    ctx.notify(notify::STRING, "pfadd", key);
    Reply::Ok
}

/// Turns the sparse HLL `s` at `key` dense and stores it (one change);
/// `Ok(false)` when it was dense already.
fn store_dense(ctx: &mut Ctx, key: &[u8], s: &[u8]) -> Result<bool, Reply> {
    let mut bytes = s.to_vec();
    if !hll::to_dense(&mut bytes).map_err(|_| err(errors::HLL_CORRUPT))? {
        return Ok(false);
    }
    ctx.db().replace_value(key, Value::Str(Bytes::from(bytes)));
    ctx.dirty(1);
    Ok(true)
}

/// PFDEBUG GETREG|DECODE|ENCODING|TODENSE key.
fn pfdebug(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let (sub, key) = (&args[1], &args[2]);
    let Some(s) = tri!(ctx.get_str_for_write(key)) else {
        return err(errors::PFDEBUG_NO_KEY);
    };
    let s = tri!(checked(Some(s))).expect("checked keeps a found string");
    ctx.db().set_str_encoding(key, StrEncoding::Raw);
    if is(sub, "getreg") {
        let converted = tri!(store_dense(ctx, key, &s));
        let dense = if converted {
            tri!(ctx.get_str_for_write(key)).expect("just stored")
        } else {
            s
        };
        Reply::Array(hll::registers(&dense).map(|v| Reply::Int(v as i64)).collect())
    } else if is(sub, "decode") {
        if hll::encoding(&s) != Encoding::Sparse {
            return err(errors::PFDEBUG_NOT_SPARSE);
        }
        Reply::Bulk(Bytes::from(hll::decode(&s)))
    } else if is(sub, "encoding") {
        Reply::Status(
            match hll::encoding(&s) {
                Encoding::Dense => "dense",
                Encoding::Sparse => "sparse",
            }
            .into(),
        )
    } else if is(sub, "todense") {
        Reply::Int(tri!(store_dense(ctx, key, &s)) as i64)
    } else {
        errors::pfdebug_unknown(sub)
    }
}

/// PFSELFTEST: Redis's self-test of the register layout and the estimator.
fn pfselftest(ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    let sparse_max = ctx.server.config.hll_sparse_max_bytes;
    let mut rng = fastrand::Rng::new();
    match hll::selftest(SELFTEST_CYCLES, SELFTEST_ELEMENTS, sparse_max, &mut rng) {
        Ok(()) => Reply::Ok,
        Err(failure) => errors::pfselftest_failed(&failure),
    }
}
