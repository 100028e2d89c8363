//! Sets: SADD, SREM, SMEMBERS, SISMEMBER, SMISMEMBER, SCARD, SPOP,
//! SRANDMEMBER, SMOVE, SINTER, SINTERCARD, SUNION, SDIFF, the STORE forms,
//! SSCAN.
//!
//! The value lives in [`crate::store::set`] (intset or hashtable, as Redis
//! 7.0 encodes it). Results are built the way Redis builds them, so their
//! order is Redis's wherever Redis's is defined: an intset's ascending
//! order, SINTER in the order of its smallest input.
//!
//! Changes are counted as Redis counts them (one per member added or
//! removed; SMOVE one for the removal and one more if the destination
//! gained the member; a STORE one for the stored result, or one for
//! deleting the destination when the result is empty). SPOP's random pick
//! leaves its explicit result as the effect: `SREM key member` for each
//! member popped (wrapped in MULTI/EXEC when several), `DEL key` when a
//! count took the whole set.

use bytes::Bytes;

use super::args::int;
use super::flags::*;
use super::{acl, scan, CommandSpec, Ctx};
use crate::errors::{self, err};
use crate::notify;
use crate::protocol::Reply;
use crate::store::set::Set;
use crate::store::Value;
use crate::tri;

macro_rules! spec {
    ($($row:tt)*) => { command!("set", $($row)*) };
}

#[rustfmt::skip]
pub(crate) static COMMANDS: &[CommandSpec] = &[
    spec!("sadd", -3, WRITE | DENYOOM | FAST, acl::SET, "Add one or more members to a set", sadd),
    spec!("srem", -3, WRITE | FAST, acl::SET, "Remove one or more members from a set", srem),
    spec!("smembers", 2, READONLY, acl::SET, "Get all the members in a set", smembers),
    spec!("sismember", 3, READONLY | FAST, acl::SET, "Determine if a given value is a member of a set", sismember),
    spec!("smismember", -3, READONLY | FAST, acl::SET, "Returns the membership associated with the given elements for a set", smismember),
    spec!("scard", 2, READONLY | FAST, acl::SET, "Get the number of members in a set", scard),
    spec!("spop", -2, WRITE | FAST, acl::SET, "Remove and return one or multiple random members from a set", spop),
    spec!("srandmember", -2, READONLY, acl::SET, "Get one or multiple random members from a set", srandmember),
    spec!("smove", 4, WRITE | FAST, acl::SET, "Move a member from one set to another", smove),
    spec!("sinter", -2, READONLY, acl::SET, "Intersect multiple sets", sinter),
    spec!("sintercard", -3, READONLY | MOVABLEKEYS, acl::SET, "Intersect multiple sets and return the cardinality of the result", sintercard).keys_by(super::keyspecs::NUMKEYS_FIRST),
    spec!("sinterstore", -3, WRITE | DENYOOM, acl::SET, "Intersect multiple sets and store the resulting set in a key", sinterstore),
    spec!("sunion", -2, READONLY, acl::SET, "Add multiple sets", sunion),
    spec!("sunionstore", -3, WRITE | DENYOOM, acl::SET, "Add multiple sets and store the resulting set in a key", sunionstore),
    spec!("sdiff", -2, READONLY, acl::SET, "Subtract multiple sets", sdiff),
    spec!("sdiffstore", -3, WRITE | DENYOOM, acl::SET, "Subtract multiple sets and store the resulting set in a key", sdiffstore),
    spec!("sscan", -3, READONLY, acl::SET, "Incrementally iterate Set elements", sscan),
];

value_pickers!(Set, Set);

fn bulk(b: Bytes) -> Reply {
    Reply::Bulk(b)
}

fn sadd(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let max = ctx.server.config.set_max_intset_entries;
    let key = &args[1];
    let s = tri!(ctx.write_or_insert(key, pick_mut, || Value::Set(Box::new(Set::for_member(&args[2])))));
    let added: i64 = args[2..].iter().map(|m| s.add(m, max) as i64).sum();
    ctx.dirty(added as u64);
    if added > 0 {
        ctx.db().touch(key);
        ctx.notify(notify::SET, "sadd", key);
    }
    Reply::Int(added)
}

fn srem(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let key = &args[1];
    let Some(s) = tri!(ctx.write_as(key, pick_mut)) else {
        return Reply::Int(0);
    };
    let mut removed = 0;
    for m in &args[2..] {
        removed += s.remove(m) as i64;
        if s.is_empty() {
            break;
        }
    }
    if removed > 0 {
        ctx.dirty(removed as u64);
        ctx.db().touch(key);
        ctx.notify(notify::SET, "srem", key);
        ctx.delete_if_empty(key);
    }
    Reply::Int(removed)
}

fn members(s: &Set) -> Vec<Reply> {
    s.iter().map(|m| bulk(m.to_bytes())).collect()
}

fn smembers(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let s = tri!(ctx.read_as(&args[1], pick));
    Reply::Set(s.map_or(vec![], members))
}

fn sismember(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let s = tri!(ctx.read_as(&args[1], pick));
    Reply::Int(s.is_some_and(|s| s.contains(&args[2])) as i64)
}

fn smismember(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let s = tri!(ctx.read_as(&args[1], pick));
    Reply::Array(
        args[2..]
            .iter()
            .map(|m| Reply::Int(s.is_some_and(|s| s.contains(m)) as i64))
            .collect(),
    )
}

fn scard(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let s = tri!(ctx.read_as(&args[1], pick));
    Reply::Int(s.map_or(0, |s| s.len()) as i64)
}

/// SPOP key [count].
fn spop(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let key = &args[1];
    let count = match args.len() {
        2 => None,
        3 => match crate::store::num::parse_i64(&args[2]) {
            Some(n) if n >= 0 => Some(n as usize),
            _ => return err(errors::NOT_POSITIVE),
        },
        _ => return err(errors::SYNTAX),
    };
    let Some(s) = tri!(ctx.write_as(key, pick_mut)) else {
        return match count {
            None => Reply::Nil,
            Some(_) => Reply::Set(vec![]),
        };
    };
    let n = count.unwrap_or(1).min(s.len());
    if n == 0 {
        return Reply::Set(vec![]);
    }
    let mut popped = Vec::with_capacity(n);
    let whole = count.is_some() && n == s.len();
    if whole {
        // The whole set, in its order, as Redis returns it.
        popped.extend(s.iter().map(|m| m.to_bytes()));
        s.clear();
    }
    while popped.len() < n {
        let m = s.nth(fastrand::usize(..s.len())).expect("non-empty").to_bytes();
        s.remove(&m);
        popped.push(m);
    }
    ctx.dirty(n as u64);
    ctx.db().touch(key);
    ctx.notify(notify::SET, "spop", key);
    // Redis deletes an emptied set after its reply.
    ctx.replied();
    ctx.delete_if_empty(key);
    let srem = |m: &Bytes| vec![Bytes::from_static(b"SREM"), key.clone(), m.clone()];
    match count {
        None => ctx.propagate_as(|| srem(&popped[0])),
        // The whole set: Redis rewrites it as a DEL of the key.
        Some(_) if whole => ctx.propagate_as(|| vec![Bytes::from_static(b"DEL"), key.clone()]),
        Some(_) => {
            for m in &popped {
                ctx.also_propagate(|| srem(m));
            }
            ctx.prevent_propagation();
        }
    }
    match count {
        None => bulk(popped.pop().expect("one")),
        Some(_) => Reply::Set(popped.into_iter().map(bulk).collect()),
    }
}

/// SRANDMEMBER key [count]: a positive count gives distinct members (the
/// whole set when it is not smaller), a negative one may repeat.
fn srandmember(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let count = match args.len() {
        2 => None,
        3 => {
            let n = tri!(int(&args[2]));
            if n == i64::MIN {
                return err(errors::LONG_OUT_OF_RANGE);
            }
            Some(n)
        }
        _ => return err(errors::SYNTAX),
    };
    let s = tri!(ctx.read_as(&args[1], pick));
    let Some(count) = count else {
        return match s {
            Some(s) => bulk(s.nth(fastrand::usize(..s.len())).expect("non-empty").to_bytes()),
            None => Reply::Nil,
        };
    };
    let Some(s) = s else {
        return Reply::Array(vec![]);
    };
    let len = s.len();
    if count < 0 {
        let n = tri!(bounded_count(count.unsigned_abs()));
        return Reply::Array(
            (0..n)
                .map(|_| bulk(s.nth(fastrand::usize(..len)).expect("in range").to_bytes()))
                .collect(),
        );
    }
    if count as usize >= len {
        return Reply::Array(members(s));
    }
    let mut picks: Vec<usize> = (0..len).collect();
    fastrand::shuffle(&mut picks);
    picks.truncate(count as usize);
    let all: Vec<Bytes> = s.iter().map(|m| m.to_bytes()).collect();
    Reply::Array(picks.into_iter().map(|i| bulk(all[i].clone())).collect())
}

/// Most elements a repeating random pick (a negative count) may ask for.
/// Redis would stream them until memory ran out; coordis answers its
/// out-of-range error instead.
pub(crate) const MAX_RANDOM_PICKS: u64 = 1 << 20;

pub(crate) fn bounded_count(n: u64) -> Result<usize, Reply> {
    if n > MAX_RANDOM_PICKS {
        return Err(err(errors::VALUE_OUT_OF_RANGE));
    }
    Ok(n as usize)
}

fn smove(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let (src, dst, member) = (&args[1], &args[2], &args[3]);
    let max = ctx.server.config.set_max_intset_entries;
    if tri!(ctx.write_as(src, pick_mut)).is_none() {
        return Reply::Int(0);
    }
    let dst_exists = tri!(ctx.write_as(dst, pick_mut)).is_some();
    if src == dst {
        let s = tri!(ctx.write_as(src, pick_mut)).expect("exists");
        return Reply::Int(s.contains(member) as i64);
    }
    if !tri!(ctx.write_as(src, pick_mut)).expect("exists").remove(member) {
        return Reply::Int(0);
    }
    ctx.notify(notify::SET, "srem", src);
    ctx.dirty(1);
    ctx.db().touch(src);
    ctx.delete_if_empty(src);
    if !dst_exists {
        ctx.db().insert(dst, Value::Set(Box::new(Set::for_member(member))), 0);
    }
    // The destination counts as changed (WATCH) only if the member is new there.
    if tri!(ctx.write_as(dst, pick_mut)).expect("exists").add(member, max) {
        ctx.db().touch(dst);
        ctx.dirty(1);
        ctx.notify(notify::SET, "sadd", dst);
    }
    Reply::Int(1)
}

/// The sets named by `keys` (`None` for a missing key), or WRONGTYPE.
fn inputs(ctx: &mut Ctx, keys: &[Bytes]) -> Result<Vec<Option<Set>>, Reply> {
    keys.iter().map(|k| ctx.read_as(k, pick).map(|s| s.cloned())).collect()
}

/// How sets combine.
#[derive(Clone, Copy, PartialEq)]
enum Op {
    Inter,
    Union,
    Diff,
}

/// The members of the combination, in the order Redis produces them:
/// SINTER walks its smallest input; SUNION and SDIFF build a set
/// (intset first) and walk it.
fn combine(sets: &[Option<Set>], op: Op, max_intset: usize, limit: usize) -> Vec<Bytes> {
    match op {
        Op::Inter => {
            if sets.iter().any(Option::is_none) {
                return vec![];
            }
            let mut sorted: Vec<&Set> = sets.iter().flatten().collect();
            sorted.sort_by_key(|s| s.len());
            let mut out = vec![];
            for m in sorted[0].iter() {
                let bytes = m.to_bytes();
                if sorted[1..].iter().all(|s| s.contains(&bytes)) {
                    out.push(bytes);
                    if limit > 0 && out.len() >= limit {
                        break;
                    }
                }
            }
            out
        }
        Op::Union | Op::Diff => {
            let mut result = Set::Ints(Vec::new());
            for (i, s) in sets.iter().enumerate() {
                let Some(s) = s else { continue };
                for m in s.iter() {
                    let bytes = m.to_bytes();
                    if op == Op::Union || i == 0 {
                        result.add(&bytes, max_intset);
                    } else {
                        result.remove(&bytes);
                    }
                }
                if op == Op::Diff && result.is_empty() {
                    break;
                }
            }
            result.iter().map(|m| m.to_bytes()).collect()
        }
    }
}

fn combine_reply(ctx: &mut Ctx, args: &[Bytes], op: Op) -> Reply {
    let sets = tri!(inputs(ctx, &args[1..]));
    let max = ctx.server.config.set_max_intset_entries;
    Reply::Set(combine(&sets, op, max, 0).into_iter().map(bulk).collect())
}

fn combine_store(ctx: &mut Ctx, args: &[Bytes], op: Op, event: &str) -> Reply {
    let dst = &args[1];
    let sets = tri!(inputs(ctx, &args[2..]));
    let max = ctx.server.config.set_max_intset_entries;
    let members = combine(&sets, op, max, 0);
    // Redis replies before it stores and announces the result, and before
    // it deletes the destination for an empty one, but for SINTERSTORE of
    // a missing key (its early way out deletes first).
    if op != Op::Inter || sets.iter().all(Option::is_some) {
        ctx.replied();
    }
    if members.is_empty() {
        if ctx.db().server_del(dst) {
            ctx.dirty(1);
            ctx.notify(notify::GENERIC, "del", dst);
        }
        return Reply::Int(0);
    }
    // The stored set is built as Redis builds it: an intset first.
    let mut result = Set::Ints(Vec::new());
    for m in &members {
        result.add(m, max);
    }
    let len = result.len() as i64;
    ctx.db().insert(dst, Value::Set(Box::new(result)), 0);
    ctx.dirty(1);
    ctx.notify(notify::SET, event, dst);
    Reply::Int(len)
}

fn sinter(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    combine_reply(ctx, args, Op::Inter)
}

fn sunion(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    combine_reply(ctx, args, Op::Union)
}

fn sdiff(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    combine_reply(ctx, args, Op::Diff)
}

fn sinterstore(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    combine_store(ctx, args, Op::Inter, "sinterstore")
}

fn sunionstore(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    combine_store(ctx, args, Op::Union, "sunionstore")
}

fn sdiffstore(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    combine_store(ctx, args, Op::Diff, "sdiffstore")
}

/// SINTERCARD numkeys key [key ...] [LIMIT limit].
fn sintercard(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let numkeys = match crate::store::num::parse_i64(&args[1]) {
        Some(n) if n > 0 => n,
        _ => return err(errors::NUMKEYS_NOT_POSITIVE),
    };
    if numkeys as u64 > (args.len() - 2) as u64 {
        return err(errors::NUMKEYS_TOO_MANY);
    }
    let keys_end = 2 + numkeys as usize;
    let mut limit = 0usize;
    let mut i = keys_end;
    while i < args.len() {
        if super::args::is(&args[i], "limit") && i + 1 < args.len() {
            // Redis's one text for a negative and a non-number.
            limit = match crate::store::num::parse_i64(&args[i + 1]) {
                Some(n) if n >= 0 => n as usize,
                _ => return err(errors::LIMIT_NEGATIVE),
            };
            i += 2;
        } else {
            return err(errors::SYNTAX);
        }
    }
    let sets = tri!(inputs(ctx, &args[2..keys_end]));
    let max = ctx.server.config.set_max_intset_entries;
    Reply::Int(combine(&sets, Op::Inter, max, limit).len() as i64)
}

fn sscan(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let opts = tri!(scan::Options::parse(args, 2, false));
    let Some(s) = tri!(ctx.read_as(&args[1], pick)) else {
        return scan::reply(0, vec![]);
    };
    let compact = matches!(s, Set::Ints(_));
    let (next, page) = scan::collection_page(s.iter().map(|m| m.to_bytes()), compact, |m| m, &opts);
    scan::reply(next, page.into_iter().map(bulk).collect())
}
