//! Sorted-set commands, following Redis 7.0's `t_zset.c` argument by argument.
//!
//! Dirty counts and effects are Redis's: ZADD counts members added and
//! updated, removals count members removed, a STORE counts one (storing, or
//! deleting a destination that existed); ZMPOP and the blocking pops are
//! replayed as ZPOPMIN/ZPOPMAX (with the count popped, except BZPOPMIN and
//! BZPOPMAX), and a blocked client served later adds that pop as its effect.

use bytes::Bytes;

use super::args::{int, int_arg, is};
use super::flags::*;
use super::{acl, CommandSpec, Ctx};
use crate::blocked::{self, Serve};
use crate::errors::{self, err};
use crate::exec::Caller;
use crate::notify;
use crate::protocol::Reply;
use crate::store::num;
use crate::store::zset::{Cursor, LexBound, LexRange, Listpack, ScoreRange, ZSet};
use crate::store::{EntryRef, Value, ValueMut, ValueRef};
use crate::tri;

macro_rules! spec {
    ($($row:tt)*) => { command!("sorted_set", $($row)*) };
}

#[rustfmt::skip]
pub(crate) static COMMANDS: &[CommandSpec] = &[
    spec!("zadd", -4, WRITE | DENYOOM | FAST, acl::SORTEDSET, "Add one or more members to a sorted set, or update its score if it already exists", zadd),
    spec!("zincrby", 4, WRITE | DENYOOM | FAST, acl::SORTEDSET, "Increment the score of a member in a sorted set", zincrby),
    spec!("zcard", 2, READONLY | FAST, acl::SORTEDSET, "Get the number of members in a sorted set", zcard),
    spec!("zscore", 3, READONLY | FAST, acl::SORTEDSET, "Get the score associated with the given member in a sorted set", zscore),
    spec!("zmscore", -3, READONLY | FAST, acl::SORTEDSET, "Get the score associated with the given members in a sorted set", zmscore),
    spec!("zrem", -3, WRITE | FAST, acl::SORTEDSET, "Remove one or more members from a sorted set", zrem),
    spec!("zrank", 3, READONLY | FAST, acl::SORTEDSET, "Determine the index of a member in a sorted set", zrank),
    spec!("zrevrank", 3, READONLY | FAST, acl::SORTEDSET, "Determine the index of a member in a sorted set, with scores ordered from high to low", zrevrank),
    spec!("zcount", 4, READONLY | FAST, acl::SORTEDSET, "Count the members in a sorted set with scores within the given values", zcount),
    spec!("zlexcount", 4, READONLY | FAST, acl::SORTEDSET, "Count the number of members in a sorted set between a given lexicographical range", zlexcount),
    spec!("zrange", -4, READONLY, acl::SORTEDSET, "Return a range of members in a sorted set", zrange),
    spec!("zrangestore", -5, WRITE | DENYOOM, acl::SORTEDSET, "Store a range of members from sorted set into another key", zrangestore),
    spec!("zrangebyscore", -4, READONLY, acl::SORTEDSET, "Return a range of members in a sorted set, by score", zrangebyscore),
    spec!("zrevrangebyscore", -4, READONLY, acl::SORTEDSET, "Return a range of members in a sorted set, by score, with scores ordered from high to low", zrevrangebyscore),
    spec!("zrangebylex", -4, READONLY, acl::SORTEDSET, "Return a range of members in a sorted set, by lexicographical range", zrangebylex),
    spec!("zrevrangebylex", -4, READONLY, acl::SORTEDSET, "Return a range of members in a sorted set, by lexicographical range, ordered from higher to lower strings.", zrevrangebylex),
    spec!("zrevrange", -4, READONLY, acl::SORTEDSET, "Return a range of members in a sorted set, by index, with scores ordered from high to low", zrevrange),
    spec!("zremrangebyscore", 4, WRITE, acl::SORTEDSET, "Remove all members in a sorted set within the given scores", zremrangebyscore),
    spec!("zremrangebyrank", 4, WRITE, acl::SORTEDSET, "Remove all members in a sorted set within the given indexes", zremrangebyrank),
    spec!("zremrangebylex", 4, WRITE, acl::SORTEDSET, "Remove all members in a sorted set between the given lexicographical range", zremrangebylex),
    spec!("zpopmin", -2, WRITE | FAST, acl::SORTEDSET, "Remove and return members with the lowest scores in a sorted set", zpopmin),
    spec!("zpopmax", -2, WRITE | FAST, acl::SORTEDSET, "Remove and return members with the highest scores in a sorted set", zpopmax),
    spec!("zrandmember", -2, READONLY, acl::SORTEDSET, "Get one or multiple random elements from a sorted set", zrandmember),
    spec!("zunionstore", -4, WRITE | DENYOOM | MOVABLEKEYS, acl::SORTEDSET, "Add multiple sorted sets and store the resulting sorted set in a new key", zunionstore).keys_by(super::keyspecs::STORE_NUMKEYS),
    spec!("zinterstore", -4, WRITE | DENYOOM | MOVABLEKEYS, acl::SORTEDSET, "Intersect multiple sorted sets and store the resulting sorted set in a new key", zinterstore).keys_by(super::keyspecs::STORE_NUMKEYS),
    spec!("zdiffstore", -4, WRITE | DENYOOM | MOVABLEKEYS, acl::SORTEDSET, "Subtract multiple sorted sets and store the resulting sorted set in a new key", zdiffstore).keys_by(super::keyspecs::STORE_NUMKEYS),
    spec!("zunion", -3, READONLY | MOVABLEKEYS, acl::SORTEDSET, "Add multiple sorted sets", zunion).keys_by(super::keyspecs::NUMKEYS_FIRST),
    spec!("zinter", -3, READONLY | MOVABLEKEYS, acl::SORTEDSET, "Intersect multiple sorted sets", zinter).keys_by(super::keyspecs::NUMKEYS_FIRST),
    spec!("zdiff", -3, READONLY | MOVABLEKEYS, acl::SORTEDSET, "Subtract multiple sorted sets", zdiff).keys_by(super::keyspecs::NUMKEYS_FIRST),
    spec!("zintercard", -3, READONLY | MOVABLEKEYS, acl::SORTEDSET, "Intersect multiple sorted sets and return the cardinality of the result", zintercard).keys_by(super::keyspecs::NUMKEYS_FIRST),
    spec!("zscan", -3, READONLY, acl::SORTEDSET, "Incrementally iterate sorted sets elements and associated scores", zscan),
    spec!("zmpop", -4, WRITE | MOVABLEKEYS, acl::SORTEDSET, "Remove and return members with scores in a sorted set", zmpop).keys_by(super::keyspecs::NUMKEYS_FIRST),
    spec!("bzpopmin", -3, WRITE | NOSCRIPT | BLOCKING | FAST, acl::SORTEDSET, "Remove and return the member with the lowest score from one or more sorted sets, or block until one is available", bzpopmin),
    spec!("bzpopmax", -3, WRITE | NOSCRIPT | BLOCKING | FAST, acl::SORTEDSET, "Remove and return the member with the highest score from one or more sorted sets, or block until one is available", bzpopmax),
    spec!("bzmpop", -5, WRITE | BLOCKING | MOVABLEKEYS, acl::SORTEDSET, "Remove and return members with scores in a sorted set or block until one is available", bzmpop).keys_by(super::keyspecs::NUMKEYS_SECOND),
];

/// Looks up a sorted set a command reads: `Ok(None)` when the key is absent,
/// WRONGTYPE when it holds something else. Counts a keyspace hit or miss, as
/// Redis's `lookupKeyRead`; commands that change the set use [`write`].
fn read<'a>(ctx: &'a mut Ctx, key: &[u8]) -> Result<Option<&'a ZSet>, Reply> {
    match ctx.lookup_read(key) {
        None => Ok(None),
        Some(EntryRef {
            value: ValueRef::ZSet(z),
            ..
        }) => Ok(Some(z)),
        Some(_) => Err(err(errors::WRONGTYPE)),
    }
}

/// An input of ZUNION, ZINTER, ZDIFF and their STORE and CARD forms: a
/// sorted set, or a plain set whose members all score 1, as in Redis.
fn read_source(ctx: &mut Ctx, key: &[u8]) -> Result<Option<ZSet>, Reply> {
    match ctx.lookup_read(key) {
        None => Ok(None),
        Some(EntryRef {
            value: ValueRef::ZSet(z),
            ..
        }) => Ok(Some(z.clone())),
        Some(EntryRef {
            value: ValueRef::Set(s),
            ..
        }) => {
            let mut z = ZSet::scratch();
            for m in s.iter() {
                z.insert(&m.to_bytes(), 1.0, Listpack::default());
            }
            Ok(Some(z))
        }
        Some(_) => Err(err(errors::WRONGTYPE)),
    }
}

fn write<'a>(ctx: &'a mut Ctx, key: &[u8]) -> Result<Option<&'a mut ZSet>, Reply> {
    let now = ctx.now;
    match ctx.db().lookup_mut(key, now) {
        None => Ok(None),
        Some(ValueMut::ZSet(z)) => Ok(Some(z)),
        Some(_) => Err(err(errors::WRONGTYPE)),
    }
}

/// Deletes `key` if its sorted set became empty (Redis never keeps empty sets).
fn drop_if_empty(ctx: &mut Ctx, key: &[u8]) {
    let now = ctx.now;
    if let Some(EntryRef {
        value: ValueRef::ZSet(z),
        ..
    }) = ctx.db().lookup(key, now)
    {
        if z.is_empty() {
            ctx.db().server_del(key);
            ctx.notify(notify::GENERIC, "del", key);
        }
    }
}

/// Stores `z` under `dst` (replacing any value), or deletes `dst` when empty.
fn store(ctx: &mut Ctx, dst: &Bytes, z: ZSet, event: &str) -> Reply {
    let len = z.len() as i64;
    // Redis replies, then stores and announces it.
    ctx.replied();
    if z.is_empty() {
        if ctx.db().server_del(dst) {
            ctx.notify(notify::GENERIC, "del", dst);
            ctx.dirty(1);
        }
    } else {
        ctx.db().insert(dst, Value::ZSet(Box::new(z)), 0);
        ctx.notify(notify::ZSET, event, dst);
        ctx.dirty(1);
    }
    Reply::Int(len)
}

/// A score argument (ZADD, ZINCRBY): Redis's strict double parsing.
fn score_arg(arg: &[u8]) -> Result<f64, Reply> {
    num::parse_f64(arg).ok_or_else(|| err(errors::NOT_FLOAT))
}

/// Parses a score range as Redis's `zslParseRange`.
pub(crate) fn parse_score_range(min: &[u8], max: &[u8]) -> Result<ScoreRange, Reply> {
    fn bound(arg: &[u8]) -> Option<(f64, bool)> {
        match arg.first() {
            Some(b'(') => num::parse_range_f64(&arg[1..]).map(|v| (v, true)),
            _ => num::parse_range_f64(arg).map(|v| (v, false)),
        }
    }
    match (bound(min), bound(max)) {
        (Some((min, minex)), Some((max, maxex))) => Ok(ScoreRange { min, max, minex, maxex }),
        _ => Err(err(errors::MIN_MAX_NOT_FLOAT)),
    }
}

/// Parses a lexicographic range as Redis's `zslParseLexRange`.
pub(crate) fn parse_lex_range(min: &[u8], max: &[u8]) -> Result<LexRange, Reply> {
    fn bound(arg: &[u8]) -> Option<LexBound> {
        match arg.first()? {
            b'+' if arg.len() == 1 => Some(LexBound::Max),
            b'-' if arg.len() == 1 => Some(LexBound::Min),
            b'(' => Some(LexBound::Exclusive(Bytes::copy_from_slice(&arg[1..]))),
            b'[' => Some(LexBound::Inclusive(Bytes::copy_from_slice(&arg[1..]))),
            _ => None,
        }
    }
    match (bound(min), bound(max)) {
        (Some(min), Some(max)) => Ok(LexRange { min, max }),
        _ => Err(err(errors::MIN_MAX_NOT_STRING_RANGE)),
    }
}

/// ZADD/ZINCRBY options.
#[derive(Debug, Default)]
struct AddFlags {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
    ch: bool,
    incr: bool,
}

/// Outcome of adding one element (Redis's `zsetAdd`).
enum AddOutcome {
    Added(f64),
    Updated(f64),
    Unchanged(f64),
    Skipped,
    Nan,
}

fn add_one(z: &mut ZSet, member: &[u8], mut score: f64, f: &AddFlags, limits: Listpack) -> AddOutcome {
    match z.find(member) {
        Some(at) => {
            let current = z.score_of(at);
            if f.nx {
                return AddOutcome::Skipped;
            }
            if f.incr {
                score += current;
                if score.is_nan() {
                    return AddOutcome::Nan;
                }
            }
            if (f.lt && score >= current) || (f.gt && score <= current) {
                return AddOutcome::Skipped;
            }
            if score != current {
                z.set_score(at, score);
                AddOutcome::Updated(score)
            } else {
                AddOutcome::Unchanged(score)
            }
        }
        None if f.xx => AddOutcome::Skipped,
        None => {
            z.add(member, score, limits);
            AddOutcome::Added(score)
        }
    }
}

fn zadd_generic(ctx: &mut Ctx, args: &[Bytes], mut f: AddFlags) -> Reply {
    let mut i = 2;
    while i < args.len() {
        let a = &args[i];
        if is(a, "nx") {
            f.nx = true;
        } else if is(a, "xx") {
            f.xx = true;
        } else if is(a, "ch") {
            f.ch = true;
        } else if is(a, "incr") {
            f.incr = true;
        } else if is(a, "gt") {
            f.gt = true;
        } else if is(a, "lt") {
            f.lt = true;
        } else {
            break;
        }
        i += 1;
    }
    let elements = args.len() - i;
    if !elements.is_multiple_of(2) || elements == 0 {
        return err(errors::SYNTAX);
    }
    if f.nx && f.xx {
        return err(errors::XX_NX);
    }
    if ((f.gt || f.lt) && f.nx) || (f.gt && f.lt) {
        return err(errors::GT_LT_NX);
    }
    if f.incr && elements > 2 {
        return err(errors::INCR_SINGLE_PAIR);
    }
    let mut pairs = Vec::with_capacity(elements / 2);
    for pair in args[i..].chunks(2) {
        pairs.push((tri!(score_arg(&pair[0])), &pair[1]));
    }
    let key = &args[1];
    let exists = tri!(write(ctx, key)).is_some();
    if !exists {
        if f.xx {
            return if f.incr { Reply::Nil } else { Reply::Int(0) };
        }
        ctx.db().insert(key, Value::ZSet(Box::default()), 0);
    }
    let limits = ctx.server.config.zset_listpack();
    let z = tri!(write(ctx, key)).expect("present");
    let (mut added, mut updated, mut last) = (0, 0, None);
    for (score, member) in pairs {
        match add_one(z, member, score, &f, limits) {
            AddOutcome::Added(s) => {
                added += 1;
                last = Some(s);
            }
            AddOutcome::Updated(s) => {
                updated += 1;
                last = Some(s);
            }
            AddOutcome::Unchanged(s) => last = Some(s),
            AddOutcome::Skipped => {}
            // Redis counts nothing when it stops here (INCR's single pair).
            AddOutcome::Nan => return err(errors::NAN_SCORE),
        }
    }
    ctx.dirty(added as u64 + updated as u64);
    if added + updated > 0 {
        ctx.db().touch(key);
        // Redis replies, then announces the change.
        ctx.replied();
        ctx.notify(notify::ZSET, if f.incr { "zincr" } else { "zadd" }, key);
    }
    if f.incr {
        last.map_or(Reply::Nil, Reply::Double)
    } else {
        Reply::Int(if f.ch { added + updated } else { added })
    }
}

pub(crate) fn zadd(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    zadd_generic(ctx, args, AddFlags::default())
}

fn zincrby(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    zadd_generic(
        ctx,
        args,
        AddFlags {
            incr: true,
            ..AddFlags::default()
        },
    )
}

fn zcard(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    Reply::Int(tri!(read(ctx, &args[1])).map_or(0, |z| z.len() as i64))
}

fn zscore(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    tri!(read(ctx, &args[1]))
        .and_then(|z| z.score(&args[2]))
        .map_or(Reply::Nil, Reply::Double)
}

fn zmscore(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let z = tri!(read(ctx, &args[1]));
    Reply::Array(
        args[2..]
            .iter()
            .map(|m| z.and_then(|z| z.score(m)).map_or(Reply::Nil, Reply::Double))
            .collect(),
    )
}

fn zrem(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let Some(z) = tri!(write(ctx, &args[1])) else {
        return Reply::Int(0);
    };
    let removed = args[2..].iter().filter(|m| z.remove(m)).count();
    if removed > 0 {
        ctx.dirty(removed as u64);
        ctx.db().touch(&args[1]);
        ctx.notify(notify::ZSET, "zrem", &args[1]);
    }
    drop_if_empty(ctx, &args[1]);
    Reply::Int(removed as i64)
}

fn rank_generic(ctx: &mut Ctx, args: &[Bytes], rev: bool) -> Reply {
    tri!(read(ctx, &args[1]))
        .and_then(|z| z.rank(&args[2], rev))
        .map_or(Reply::Nil, |r| Reply::Int(r as i64))
}

fn zrank(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    rank_generic(ctx, args, false)
}

fn zrevrank(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    rank_generic(ctx, args, true)
}

/// Number of elements from `first` to `last` inclusive (ranks via spans).
fn count_between(z: &ZSet, first: Option<Cursor>, last: Option<Cursor>) -> i64 {
    match (first, last) {
        (Some(f), Some(l)) => {
            let (rf, rl) = (z.rank_at(f), z.rank_at(l));
            (rl as i64 - rf as i64 + 1).max(0)
        }
        _ => 0,
    }
}

fn zcount(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let range = tri!(parse_score_range(&args[2], &args[3]));
    let Some(z) = tri!(read(ctx, &args[1])) else {
        return Reply::Int(0);
    };
    Reply::Int(count_between(
        z,
        z.first_in_score_range(&range),
        z.last_in_score_range(&range),
    ))
}

fn zlexcount(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let range = tri!(parse_lex_range(&args[2], &args[3]));
    let Some(z) = tri!(read(ctx, &args[1])) else {
        return Reply::Int(0);
    };
    Reply::Int(z.lex_count(&range))
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum RangeKind {
    Rank,
    Score,
    Lex,
}

/// The elements a range selects, as ZRANGE and its relatives compute them.
enum Bounds {
    Rank(i64, i64),
    Score(ScoreRange),
    Lex(LexRange),
}

fn select(z: &ZSet, bounds: &Bounds, rev: bool, offset: i64, limit: i64) -> Vec<(Bytes, f64)> {
    let mut out = Vec::new();
    match bounds {
        Bounds::Rank(start, end) => {
            let len = z.len() as i64;
            let mut start = if *start < 0 { len + start } else { *start };
            let mut end = if *end < 0 { len + end } else { *end };
            start = start.max(0);
            if start > end || start >= len {
                return out;
            }
            end = end.min(len - 1);
            let first_rank = if rev { len - 1 - start } else { start };
            let mut cur = z.at_rank(first_rank as usize);
            for _ in start..=end {
                let Some(c) = cur else { break };
                let (m, s) = z.get(c);
                out.push((Bytes::copy_from_slice(m), s));
                cur = z.step(c, rev);
            }
        }
        Bounds::Score(_) | Bounds::Lex(_) => {
            if offset < 0 || (offset > 0 && offset as usize >= z.len()) {
                return out;
            }
            // Like Redis, only the far end is checked while walking: the walk
            // starts inside the range. (With mixed scores a lex walk can pass
            // members below the min; Redis returns them too.)
            let in_range = |c: Cursor| {
                let (m, s) = z.get(c);
                match (bounds, rev) {
                    (Bounds::Score(r), false) => r.lte_max(s),
                    (Bounds::Score(r), true) => r.gte_min(s),
                    (Bounds::Lex(r), false) => r.lte_max(m),
                    (Bounds::Lex(r), true) => r.gte_min(m),
                    (Bounds::Rank(..), _) => unreachable!(),
                }
            };
            let mut cur = match (bounds, rev) {
                (Bounds::Score(r), false) => z.first_in_score_range(r),
                (Bounds::Score(r), true) => z.last_in_score_range(r),
                (Bounds::Lex(r), false) => z.first_in_lex_range(r),
                (Bounds::Lex(r), true) => z.last_in_lex_range(r),
                (Bounds::Rank(..), _) => unreachable!(),
            };
            for _ in 0..offset {
                cur = cur.and_then(|c| z.step(c, rev));
            }
            // A negative limit means no limit, as in Redis.
            let mut remaining = limit;
            while let Some(c) = cur {
                if remaining == 0 || !in_range(c) {
                    break;
                }
                let (m, s) = z.get(c);
                out.push((Bytes::copy_from_slice(m), s));
                remaining -= 1;
                cur = z.step(c, rev);
            }
        }
    }
    out
}

fn members_reply(items: Vec<(Bytes, f64)>, withscores: bool) -> Reply {
    if withscores {
        Reply::ScorePairs(items)
    } else {
        Reply::Array(items.into_iter().map(|(m, _)| Reply::Bulk(m)).collect())
    }
}

/// Redis's `zrangeGenericCommand`: `src` is the index of the source key,
/// `dst` the destination for ZRANGESTORE, `kind`/`rev` preset by the legacy
/// commands (ZRANGEBYSCORE, ZREVRANGE, ...).
fn zrange_generic(
    ctx: &mut Ctx,
    args: &[Bytes],
    src: usize,
    dst: Option<&Bytes>,
    kind: Option<RangeKind>,
    rev: Option<bool>,
) -> Reply {
    let (mut kind, mut rev) = (kind, rev);
    let mut withscores = false;
    let (mut offset, mut limit) = (0i64, -1i64);
    let mut limit_given = false;
    let mut j = src + 3;
    while j < args.len() {
        let left = args.len() - j - 1;
        let a = &args[j];
        if dst.is_none() && is(a, "withscores") {
            withscores = true;
        } else if is(a, "limit") && left >= 2 {
            offset = tri!(int(&args[j + 1]));
            limit = tri!(int(&args[j + 2]));
            limit_given = true;
            j += 2;
        } else if rev.is_none() && is(a, "rev") {
            rev = Some(true);
        } else if kind.is_none() && is(a, "bylex") {
            kind = Some(RangeKind::Lex);
        } else if kind.is_none() && is(a, "byscore") {
            kind = Some(RangeKind::Score);
        } else {
            return err(errors::SYNTAX);
        }
        j += 1;
    }
    let rev = rev.unwrap_or(false);
    let kind = kind.unwrap_or(RangeKind::Rank);
    if limit_given && kind == RangeKind::Rank {
        return err(errors::LIMIT_NEEDS_BY);
    }
    if withscores && kind == RangeKind::Lex {
        return err(errors::WITHSCORES_BYLEX);
    }
    let (mut min, mut max) = (&args[src + 1], &args[src + 2]);
    if rev && kind != RangeKind::Rank {
        std::mem::swap(&mut min, &mut max);
    }
    let bounds = match kind {
        RangeKind::Rank => Bounds::Rank(tri!(int(min)), tri!(int(max))),
        RangeKind::Score => Bounds::Score(tri!(parse_score_range(min, max))),
        RangeKind::Lex => Bounds::Lex(tri!(parse_lex_range(min, max))),
    };
    let items = match tri!(read(ctx, &args[src])) {
        Some(z) => select(z, &bounds, rev, offset, limit),
        None => vec![],
    };
    match dst {
        Some(dst) => store(
            ctx,
            dst,
            ZSet::from_items(
                items.iter().map(|(m, s)| (m.as_ref(), *s)),
                ctx.server.config.zset_listpack(),
            ),
            "zrangestore",
        ),
        None => members_reply(items, withscores),
    }
}

fn zrange(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    zrange_generic(ctx, args, 1, None, None, None)
}

fn zrangestore(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let dst = args[1].clone();
    zrange_generic(ctx, args, 2, Some(&dst), None, None)
}

fn zrangebyscore(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    zrange_generic(ctx, args, 1, None, Some(RangeKind::Score), Some(false))
}

fn zrevrangebyscore(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    zrange_generic(ctx, args, 1, None, Some(RangeKind::Score), Some(true))
}

fn zrangebylex(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    zrange_generic(ctx, args, 1, None, Some(RangeKind::Lex), Some(false))
}

fn zrevrangebylex(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    zrange_generic(ctx, args, 1, None, Some(RangeKind::Lex), Some(true))
}

fn zrevrange(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    zrange_generic(ctx, args, 1, None, Some(RangeKind::Rank), Some(true))
}

fn zremrange_generic(ctx: &mut Ctx, args: &[Bytes], kind: RangeKind) -> Reply {
    let bounds = match kind {
        RangeKind::Rank => Bounds::Rank(tri!(int(&args[2])), tri!(int(&args[3]))),
        RangeKind::Score => Bounds::Score(tri!(parse_score_range(&args[2], &args[3]))),
        RangeKind::Lex => Bounds::Lex(tri!(parse_lex_range(&args[2], &args[3]))),
    };
    let Some(z) = tri!(write(ctx, &args[1])) else {
        return Reply::Int(0);
    };
    let removed = match bounds {
        Bounds::Rank(start, end) => {
            let len = z.len() as i64;
            let start = if start < 0 { len + start } else { start }.max(0);
            let end = if end < 0 { len + end } else { end };
            if start > end || start >= len {
                return Reply::Int(0);
            }
            z.remove_rank_range(start as usize, end.min(len - 1) as usize)
        }
        Bounds::Score(r) => z.remove_score_range(&r),
        Bounds::Lex(r) => z.remove_lex_range(&r),
    };
    if removed > 0 {
        ctx.dirty(removed as u64);
        ctx.db().touch(&args[1]);
        let event = match kind {
            RangeKind::Rank => "zremrangebyrank",
            RangeKind::Score => "zremrangebyscore",
            RangeKind::Lex => "zremrangebylex",
        };
        ctx.notify(notify::ZSET, event, &args[1]);
    }
    drop_if_empty(ctx, &args[1]);
    Reply::Int(removed as i64)
}

fn zremrangebyscore(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    zremrange_generic(ctx, args, RangeKind::Score)
}

fn zremrangebyrank(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    zremrange_generic(ctx, args, RangeKind::Rank)
}

fn zremrangebylex(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    zremrange_generic(ctx, args, RangeKind::Lex)
}

fn zpop_generic(ctx: &mut Ctx, args: &[Bytes], max: bool) -> Reply {
    if args.len() > 3 {
        return err(errors::SYNTAX);
    }
    let count = match args.get(2) {
        Some(a) => match num::parse_i64(a) {
            Some(n) if n >= 0 => Some(n as usize),
            _ => return err(errors::NOT_POSITIVE),
        },
        None => None,
    };
    // The key's type is checked before a zero count is answered, as Redis.
    if tri!(write(ctx, &args[1])).is_none() || count == Some(0) {
        return Reply::Array(vec![]);
    }
    let popped = pop_ends(ctx, &args[1], max, count.unwrap_or(1), 1);
    match count {
        None => Reply::Array(
            popped
                .into_iter()
                .flat_map(|(m, s)| [Reply::Bulk(m), Reply::Double(s)])
                .collect(),
        ),
        Some(_) => Reply::ScorePairs(popped),
    }
}

/// Pops up to `count` members from the low (or high, `max`) end of the
/// sorted set at `key`, with the pop event and the `del` when it empties.
/// Redis announces the pop amid its reply, once it has written the reply's
/// first `written` nodes (ZPOPMIN's `*n`; BZPOPMIN's `*3` and key), and
/// the `del` after the reply.
fn pop_ends(ctx: &mut Ctx, key: &Bytes, max: bool, count: usize, written: usize) -> Vec<(Bytes, f64)> {
    let mut popped = Vec::new();
    if let Ok(Some(z)) = write(ctx, key) {
        for _ in 0..count {
            let Some(c) = (if max { z.last() } else { z.first() }) else {
                break;
            };
            let (m, s) = z.get(c);
            let m = Bytes::copy_from_slice(m);
            z.remove(&m);
            popped.push((m, s));
        }
    }
    if !popped.is_empty() {
        ctx.dirty(popped.len() as u64);
        ctx.db().touch(key);
        ctx.replied_up_to(written);
        ctx.notify(notify::ZSET, if max { "zpopmax" } else { "zpopmin" }, key);
    }
    ctx.replied();
    drop_if_empty(ctx, key);
    popped
}

/// ZMPOP's and BZMPOP's arguments from `args[first..]` (MAX: true).
fn parse_mpop(args: &[Bytes], first: usize) -> Result<(std::ops::Range<usize>, bool, usize), Reply> {
    super::args::mpop(args, first, |word| {
        if is(word, "max") {
            Some(true)
        } else if is(word, "min") {
            Some(false)
        } else {
            None
        }
    })
}

/// `[key, [[member, score], ...]]`: what ZMPOP and BZMPOP answer for the
/// sorted set at `key`.
fn mpop_from(ctx: &mut Ctx, key: &Bytes, max: bool, count: usize) -> Reply {
    // `*2`, the key, `*n`.
    let popped = pop_ends(ctx, key, max, count, 3);
    let n = popped.len();
    pop_effect(ctx, || vec![pop_name(max), key.clone(), int_arg(n)]);
    Reply::Array(vec![
        Reply::Bulk(key.clone()),
        Reply::Array(
            popped
                .into_iter()
                .map(|(m, s)| Reply::Array(vec![Reply::Bulk(m), Reply::Double(s)]))
                .collect(),
        ),
    ])
}

/// ZPOPMIN or ZPOPMAX: what every pop is replayed as.
fn pop_name(max: bool) -> Bytes {
    Bytes::from_static(if max { b"ZPOPMAX" } else { b"ZPOPMIN" })
}

/// A ZMPOP's or blocking pop's effect: the command's own when it pops now
/// (Redis's `rewriteClientCommandVector`), an added one for a blocked client
/// served later (`alsoPropagate` in `serveClientsBlockedOnSortedSetKey`: the
/// blocking command is never an effect).
fn pop_effect(ctx: &mut Ctx, build: impl FnOnce() -> Vec<Bytes>) {
    if ctx.caller == Caller::Waiter {
        ctx.also_propagate(build);
    } else {
        ctx.propagate_as(build);
    }
}

/// Whether `key` holds a sorted set a blocking pop can take from now
/// (WRONGTYPE for another type).
fn zset_ready(ctx: &mut Ctx, key: &[u8]) -> Result<bool, Reply> {
    Ok(write(ctx, key)?.is_some_and(|z| !z.is_empty()))
}

/// Whether `key` can serve a waiter now.
fn holds_zset(ctx: &mut Ctx, key: &[u8]) -> bool {
    matches!(zset_ready(ctx, key), Ok(true))
}

/// ZMPOP numkeys key [key ...] MIN|MAX [COUNT count]: pops from the first
/// non-empty sorted set; `[key, [[member, score], ...]]` or a null array.
fn zmpop(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let (keys, max, count) = tri!(parse_mpop(args, 1));
    for key in &args[keys] {
        if tri!(zset_ready(ctx, key)) {
            return mpop_from(ctx, key, max, count);
        }
    }
    Reply::NilArray
}

/// BZMPOP timeout numkeys key [key ...] MIN|MAX [COUNT count].
fn bzmpop(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let (keys, _, _) = tri!(parse_mpop(args, 2));
    let deadline = tri!(blocked::deadline_secs(&args[1], ctx.now));
    let serve: Serve = |ctx, args, key| {
        let (_, max, count) = parse_mpop(args, 2).ok()?;
        holds_zset(ctx, key).then(|| mpop_from(ctx, key, max, count))
    };
    blocked::pop_or_block(ctx, args, &args[keys], deadline, zset_ready, serve, Reply::NilArray)
}

/// BZPOPMIN / BZPOPMAX key [key ...] timeout: `[key, member, score]`.
fn bzpop(ctx: &mut Ctx, args: &[Bytes], serve: Serve) -> Reply {
    let deadline = tri!(blocked::deadline_secs(&args[args.len() - 1], ctx.now));
    let keys = &args[1..args.len() - 1];
    blocked::pop_or_block(ctx, args, keys, deadline, zset_ready, serve, Reply::NilArray)
}

fn serve_bzpop(ctx: &mut Ctx, key: &Bytes, max: bool) -> Option<Reply> {
    if !holds_zset(ctx, key) {
        return None;
    }
    // `*3`, the key.
    let (member, score) = pop_ends(ctx, key, max, 1, 2).pop()?;
    pop_effect(ctx, || vec![pop_name(max), key.clone()]);
    Some(Reply::Array(vec![
        Reply::Bulk(key.clone()),
        Reply::Bulk(member),
        Reply::Double(score),
    ]))
}

fn bzpopmin(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    bzpop(ctx, args, |ctx, _, key| serve_bzpop(ctx, key, false))
}

fn bzpopmax(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    bzpop(ctx, args, |ctx, _, key| serve_bzpop(ctx, key, true))
}

fn zpopmin(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    zpop_generic(ctx, args, false)
}

fn zpopmax(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    zpop_generic(ctx, args, true)
}

fn zrandmember(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    // Redis's order: the count's range (-LONG_MAX..LONG_MAX), the syntax,
    // then WITHSCORES's narrower range.
    let count = match args.get(2) {
        Some(a) => Some(tri!(int(a).and_then(|n| if n == i64::MIN {
            Err(err(errors::LONG_OUT_OF_RANGE))
        } else {
            Ok(n)
        }))),
        None => None,
    };
    if args.len() > 4 || (args.len() == 4 && !is(&args[3], "withscores")) {
        return err(errors::SYNTAX);
    }
    let withscores = args.len() == 4;
    if withscores && count.is_some_and(|n| !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&n)) {
        return err(errors::VALUE_OUT_OF_RANGE);
    }
    let z = tri!(read(ctx, &args[1]));
    let Some(count) = count else {
        return match z {
            Some(z) => {
                let c = z.at_rank(fastrand::usize(..z.len())).expect("non-empty");
                Reply::Bulk(Bytes::copy_from_slice(z.get(c).0))
            }
            None => Reply::Nil,
        };
    };
    let Some(z) = z else {
        return Reply::Array(vec![]);
    };
    let pick = |rank: usize| {
        let (m, s) = z.get(z.at_rank(rank).expect("rank in range"));
        (Bytes::copy_from_slice(m), s)
    };
    let items: Vec<(Bytes, f64)> = if count < 0 {
        let n = tri!(super::set::bounded_count(count.unsigned_abs()));
        (0..n).map(|_| pick(fastrand::usize(..z.len()))).collect()
    } else {
        let mut ranks: Vec<usize> = (0..z.len()).collect();
        fastrand::shuffle(&mut ranks);
        ranks.truncate(count as usize);
        ranks.into_iter().map(pick).collect()
    };
    members_reply(items, withscores)
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum SetOp {
    Union,
    Inter,
    Diff,
}

#[derive(Clone, Copy, Debug)]
enum Aggregate {
    Sum,
    Min,
    Max,
}

fn aggregate(target: &mut f64, value: f64, how: Aggregate) {
    match how {
        Aggregate::Sum => {
            *target += value;
            if target.is_nan() {
                *target = 0.0;
            }
        }
        Aggregate::Min => *target = target.min(value),
        Aggregate::Max => *target = target.max(value),
    }
}

/// Redis's `zunionInterDiffGenericCommand`. `numkeys_at` is the index of the
/// numkeys argument; `dst` is set for the STORE variants; `card_only` for
/// ZINTERCARD.
fn setop_generic(
    ctx: &mut Ctx,
    args: &[Bytes],
    numkeys_at: usize,
    dst: Option<&Bytes>,
    op: SetOp,
    card_only: bool,
) -> Reply {
    let setnum = tri!(int(&args[numkeys_at]));
    if setnum < 1 {
        return errors::no_input_keys(&String::from_utf8_lossy(&args[0]).to_ascii_lowercase());
    }
    if setnum as u64 > (args.len() - numkeys_at - 1) as u64 {
        return err(errors::SYNTAX);
    }
    let setnum = setnum as usize;
    let keys = &args[numkeys_at + 1..numkeys_at + 1 + setnum];
    let mut sources: Vec<Option<ZSet>> = Vec::with_capacity(setnum);
    for key in keys {
        sources.push(tri!(read_source(ctx, key)));
    }
    let mut weights = vec![1.0f64; setnum];
    let mut how = Aggregate::Sum;
    let mut withscores = false;
    let mut limit = 0usize;
    let mut j = numkeys_at + 1 + setnum;
    while j < args.len() {
        let remaining = args.len() - j;
        if op != SetOp::Diff && !card_only && remaining > setnum && is(&args[j], "weights") {
            j += 1;
            for w in weights.iter_mut() {
                *w = tri!(num::parse_f64(&args[j]).ok_or_else(|| err(errors::WEIGHT_NOT_FLOAT)));
                j += 1;
            }
        } else if op != SetOp::Diff && !card_only && remaining >= 2 && is(&args[j], "aggregate") {
            how = if is(&args[j + 1], "sum") {
                Aggregate::Sum
            } else if is(&args[j + 1], "min") {
                Aggregate::Min
            } else if is(&args[j + 1], "max") {
                Aggregate::Max
            } else {
                return err(errors::SYNTAX);
            };
            j += 2;
        } else if dst.is_none() && !card_only && is(&args[j], "withscores") {
            withscores = true;
            j += 1;
        } else if card_only && remaining >= 2 && is(&args[j], "limit") {
            limit = match num::parse_i64(&args[j + 1]) {
                Some(n) if n >= 0 => n as usize,
                _ => return err(errors::LIMIT_NEGATIVE),
            };
            j += 2;
        } else {
            return err(errors::SYNTAX);
        }
    }
    let result = compute(sources, &weights, how, op, if card_only { limit } else { 0 }, card_only);
    if card_only {
        return Reply::Int(result.len() as i64);
    }
    match dst {
        Some(dst) => {
            let event = match op {
                SetOp::Union => "zunionstore",
                SetOp::Inter => "zinterstore",
                SetOp::Diff => "zdiffstore",
            };
            let z = ZSet::from_items(result.iter(), ctx.server.config.zset_listpack());
            store(ctx, dst, z, event)
        }
        None => members_reply(
            result.iter().map(|(m, s)| (Bytes::copy_from_slice(m), s)).collect(),
            withscores,
        ),
    }
}

/// Computes a union, intersection or difference. With `card_only`, stops at
/// `limit` elements (0: no limit) and leaves scores meaningless.
fn compute(
    sources: Vec<Option<ZSet>>,
    weights: &[f64],
    how: Aggregate,
    op: SetOp,
    limit: usize,
    card_only: bool,
) -> ZSet {
    // A scratch set is never compact, so the limits its inserts take go unread.
    let mut out = ZSet::scratch();
    let weighted = |w: f64, s: f64| {
        let v = w * s;
        if v.is_nan() {
            0.0
        } else {
            v
        }
    };
    match op {
        SetOp::Diff => {
            let Some(Some(first)) = sources.first() else {
                return out;
            };
            for (m, s) in first.iter() {
                if !sources[1..].iter().flatten().any(|o| o.score(m).is_some()) {
                    out.insert(m, s, Listpack::default());
                }
            }
        }
        SetOp::Inter => {
            if sources.iter().any(|s| s.as_ref().is_none_or(|z| z.is_empty())) {
                return out;
            }
            let mut order: Vec<usize> = (0..sources.len()).collect();
            order.sort_by_key(|&i| sources[i].as_ref().map_or(0, |z| z.len()));
            let first = sources[order[0]].as_ref().expect("checked");
            'outer: for (m, s) in first.iter() {
                let mut score = weighted(weights[order[0]], s);
                for &i in &order[1..] {
                    match sources[i].as_ref().and_then(|z| z.score(m)) {
                        Some(other) => aggregate(&mut score, weighted(weights[i], other), how),
                        None => continue 'outer,
                    }
                }
                out.insert(m, if card_only { 0.0 } else { score }, Listpack::default());
                if card_only && limit > 0 && out.len() >= limit {
                    break;
                }
            }
        }
        SetOp::Union => {
            let mut order: Vec<usize> = (0..sources.len()).collect();
            order.sort_by_key(|&i| sources[i].as_ref().map_or(0, |z| z.len()));
            let mut acc: std::collections::HashMap<Bytes, f64> = std::collections::HashMap::new();
            let mut seen_order: Vec<Bytes> = Vec::new();
            for &i in &order {
                let Some(z) = &sources[i] else { continue };
                for (m, s) in z.iter() {
                    let v = weighted(weights[i], s);
                    match acc.get_mut(m) {
                        Some(t) => aggregate(t, v, how),
                        None => {
                            let m = Bytes::copy_from_slice(m);
                            acc.insert(m.clone(), v);
                            seen_order.push(m);
                        }
                    }
                }
            }
            for m in seen_order {
                out.insert(&m, acc[&m], Listpack::default());
            }
        }
    }
    out
}

fn zunionstore(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let dst = args[1].clone();
    setop_generic(ctx, args, 2, Some(&dst), SetOp::Union, false)
}

fn zinterstore(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let dst = args[1].clone();
    setop_generic(ctx, args, 2, Some(&dst), SetOp::Inter, false)
}

fn zdiffstore(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let dst = args[1].clone();
    setop_generic(ctx, args, 2, Some(&dst), SetOp::Diff, false)
}

fn zunion(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    setop_generic(ctx, args, 1, None, SetOp::Union, false)
}

fn zinter(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    setop_generic(ctx, args, 1, None, SetOp::Inter, false)
}

fn zdiff(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    setop_generic(ctx, args, 1, None, SetOp::Diff, false)
}

fn zintercard(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    setop_generic(ctx, args, 1, None, SetOp::Inter, true)
}

/// ZSCAN: a set in its compact encoding is returned whole (in order), a
/// larger one paged by the SCAN family's cursor.
fn zscan(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let opts = tri!(super::scan::Options::parse(args, 2, false));
    let Some(z) = tri!(read(ctx, &args[1])) else {
        return super::scan::reply(0, vec![]);
    };
    let compact = z.encoding() == "listpack";
    let (next, page) = super::scan::collection_page(z.iter(), compact, |(m, _)| m, &opts);
    let items = page
        .into_iter()
        .flat_map(|(m, score)| {
            [
                Reply::Bulk(Bytes::copy_from_slice(m)),
                Reply::bulk(crate::protocol::format_double(score)),
            ]
        })
        .collect();
    super::scan::reply(next, items)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn score_ranges_parse_like_zslparserange() {
        let r = parse_score_range(b"(1", b"+inf").unwrap();
        assert!(r.minex && !r.maxex && r.max == f64::INFINITY);
        assert_eq!(parse_score_range(b"", b"(").unwrap().min, 0.0);
        assert_eq!(parse_score_range(b"a", b"1"), Err(err(errors::MIN_MAX_NOT_FLOAT)));
        assert_eq!(parse_score_range(b"1", b"nan"), Err(err(errors::MIN_MAX_NOT_FLOAT)));
    }

    #[test]
    fn lex_ranges_parse_like_zslparselexrange() {
        assert_eq!(
            parse_lex_range(b"-", b"+").unwrap(),
            LexRange {
                min: LexBound::Min,
                max: LexBound::Max
            }
        );
        assert_eq!(
            parse_lex_range(b"[a", b"(b").unwrap().max,
            LexBound::Exclusive(Bytes::from("b"))
        );
        for bad in [&b""[..], b"a", b"+x", b"-x"] {
            assert_eq!(parse_lex_range(bad, b"+"), Err(err(errors::MIN_MAX_NOT_STRING_RANGE)));
        }
    }
}
