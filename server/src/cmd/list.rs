//! Lists: LPUSH, RPUSH, LPUSHX, RPUSHX, LPOP, RPOP, LLEN, LRANGE, LINDEX,
//! LSET, LINSERT, LREM, LTRIM, LPOS, LMOVE, RPOPLPUSH, LMPOP, and the
//! blocking BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP.
//!
//! The value lives in [`crate::store::list`] (Redis's quicklist shape).
//! Events are Redis's (`lpush`, `rpush`, `lpop`, `rpop`, `lset`, `linsert`,
//! `lrem`, `ltrim`, then `del` when the last element goes). A blocking
//! command serves itself at once from the first of its keys holding a list;
//! otherwise it waits ([`crate::blocked`]) and the same serve function
//! runs when a key it waits on is stored.
//!
//! Changes are counted as Redis counts them (one per element pushed,
//! popped, removed or trimmed; one per LSET, LINSERT, LMOVE). Effects:
//! LMPOP is an LPOP/RPOP with the count it took; a blocking command served
//! at once is its plain form (BLPOP as LPOP, BLMOVE as LMOVE, BLMPOP as
//! LPOP/RPOP with a count); a waiter served later leaves that plain form as
//! an added effect, and changes only what Redis's `serveClientBlockedOnList`
//! counts (a BLMPOP's elements; a BLPOP's or BLMOVE's pop counts nothing).

use bytes::Bytes;

use super::args::{int, int_arg, is};
use super::flags::*;
use super::{acl, CommandSpec, Ctx};
use crate::blocked::{self, Serve};
use crate::errors::{self, err};
use crate::exec::Caller;
use crate::notify;
use crate::protocol::Reply;
use crate::store::list::{End, List};
use crate::store::Value;
use crate::tri;

macro_rules! spec {
    ($($row:tt)*) => { command!("list", $($row)*) };
}

#[rustfmt::skip]
pub(crate) static COMMANDS: &[CommandSpec] = &[
    spec!("lpush", -3, WRITE | DENYOOM | FAST, acl::LIST, "Prepend one or multiple elements to a list", lpush),
    spec!("rpush", -3, WRITE | DENYOOM | FAST, acl::LIST, "Append one or multiple elements to a list", rpush),
    spec!("lpushx", -3, WRITE | DENYOOM | FAST, acl::LIST, "Prepend an element to a list, only if the list exists", lpushx),
    spec!("rpushx", -3, WRITE | DENYOOM | FAST, acl::LIST, "Append an element to a list, only if the list exists", rpushx),
    spec!("lpop", -2, WRITE | FAST, acl::LIST, "Remove and get the first elements in a list", lpop),
    spec!("rpop", -2, WRITE | FAST, acl::LIST, "Remove and get the last elements in a list", rpop),
    spec!("llen", 2, READONLY | FAST, acl::LIST, "Get the length of a list", llen),
    spec!("lrange", 4, READONLY, acl::LIST, "Get a range of elements from a list", lrange),
    spec!("lindex", 3, READONLY, acl::LIST, "Get an element from a list by its index", lindex),
    spec!("lset", 4, WRITE | DENYOOM, acl::LIST, "Set the value of an element in a list by its index", lset),
    spec!("linsert", 5, WRITE | DENYOOM, acl::LIST, "Insert an element before or after another element in a list", linsert),
    spec!("lrem", 4, WRITE, acl::LIST, "Remove elements from a list", lrem),
    spec!("ltrim", 4, WRITE, acl::LIST, "Trim a list to the specified range", ltrim),
    spec!("lpos", -3, READONLY, acl::LIST, "Return the index of matching elements on a list", lpos),
    spec!("lmove", 5, WRITE | DENYOOM, acl::LIST, "Pop an element from a list, push it to another list and return it", lmove),
    spec!("rpoplpush", 3, WRITE | DENYOOM, acl::LIST, "Remove the last element in a list, prepend it to another list and return it", rpoplpush),
    spec!("lmpop", -4, WRITE | MOVABLEKEYS, acl::LIST, "Pop elements from a list", lmpop).keys_by(super::keyspecs::NUMKEYS_FIRST),
    spec!("blpop", -3, WRITE | NOSCRIPT | BLOCKING, acl::LIST, "Remove and get the first element in a list, or block until one is available", blpop),
    spec!("brpop", -3, WRITE | NOSCRIPT | BLOCKING, acl::LIST, "Remove and get the last element in a list, or block until one is available", brpop),
    spec!("blmove", 6, WRITE | DENYOOM | NOSCRIPT | BLOCKING, acl::LIST, "Pop an element from a list, push it to another list and return it; or block until one is available", blmove),
    spec!("brpoplpush", 4, WRITE | DENYOOM | NOSCRIPT | BLOCKING, acl::LIST, "Pop an element from a list, push it to another list and return it; or block until one is available", brpoplpush),
    spec!("blmpop", -5, WRITE | BLOCKING | MOVABLEKEYS, acl::LIST, "Pop elements from a list, or block until one is available", blmpop).keys_by(super::keyspecs::NUMKEYS_SECOND),
];

value_pickers!(List, List);

fn bulk(b: &[u8]) -> Reply {
    Reply::Bulk(Bytes::copy_from_slice(b))
}

/// Bulk replies of `items`, copied into one buffer and sliced from it:
/// one allocation for a whole LRANGE rather than one per element.
fn bulks(items: Vec<&[u8]>) -> Vec<Reply> {
    let mut buf = bytes::BytesMut::with_capacity(items.iter().map(|i| i.len()).sum());
    for item in &items {
        buf.extend_from_slice(item);
    }
    let buf = buf.freeze();
    let mut at = 0;
    items
        .iter()
        .map(|item| {
            at += item.len();
            Reply::Bulk(buf.slice(at - item.len()..at))
        })
        .collect()
}

/// The plain pop that is the effect of popping from `end` (Redis's shared
/// `LPOP` / `RPOP`).
fn pop_name(end: End) -> Bytes {
    Bytes::from_static(match end {
        End::Head => b"LPOP",
        End::Tail => b"RPOP",
    })
}

/// An end as a served blocking move's effect names it (Redis's shared
/// `left` / `right`, lower case).
fn end_word(end: End) -> Bytes {
    Bytes::from_static(match end {
        End::Head => b"left",
        End::Tail => b"right",
    })
}

/// A blocked client being served after it waited (not at once, from its
/// own command): its effect is added, as Redis's `serveClientBlockedOnList`.
fn served_later(ctx: &Ctx) -> bool {
    ctx.caller == Caller::Waiter
}

fn event(end: End, push: bool) -> &'static str {
    match (end, push) {
        (End::Head, true) => "lpush",
        (End::Tail, true) => "rpush",
        (End::Head, false) => "lpop",
        (End::Tail, false) => "rpop",
    }
}

/// Pushes `values` at `end` of `key`, creating the list unless `only_if_exists`.
fn push(ctx: &mut Ctx, args: &[Bytes], end: End, only_if_exists: bool) -> Reply {
    let fill = ctx.server.config.list_fill();
    let key = &args[1];
    if only_if_exists && tri!(ctx.write_as(key, pick_mut)).is_none() {
        return Reply::Int(0);
    }
    let l = tri!(ctx.write_or_insert(key, pick_mut, || Value::List(Box::default())));
    for v in &args[2..] {
        l.push(end, v, fill);
    }
    let len = l.len() as i64;
    ctx.dirty((args.len() - 2) as u64);
    ctx.db().touch(key);
    // Redis replies, then announces the push.
    ctx.replied();
    ctx.notify(notify::LIST, event(end, true), key);
    Reply::Int(len)
}

fn lpush(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    push(ctx, args, End::Head, false)
}

fn rpush(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    push(ctx, args, End::Tail, false)
}

fn lpushx(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    push(ctx, args, End::Head, true)
}

fn rpushx(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    push(ctx, args, End::Tail, true)
}

/// Pops up to `count` elements from `end` of `key` (which must hold a
/// list), with the pop event and the `del` when it empties, both after the
/// reply as Redis has them. The caller counts the changes (a served BLPOP
/// counts none).
fn pop_n(ctx: &mut Ctx, key: &[u8], end: End, count: usize) -> Vec<Vec<u8>> {
    let Ok(Some(l)) = ctx.write_as(key, pick_mut) else {
        return vec![];
    };
    let popped: Vec<Vec<u8>> = (0..count).map_while(|_| l.pop(end)).collect();
    if !popped.is_empty() {
        ctx.db().touch(key);
        ctx.replied();
        ctx.notify(notify::LIST, event(end, false), key);
        ctx.delete_if_empty(key);
    }
    popped
}

/// LPOP / RPOP key [count].
fn pop(ctx: &mut Ctx, args: &[Bytes], end: End) -> Reply {
    let count = match args.len() {
        2 => None,
        3 => match crate::store::num::parse_i64(&args[2]) {
            Some(n) if n >= 0 => Some(n as usize),
            _ => return err(errors::NOT_POSITIVE),
        },
        _ => return errors::wrong_args(event(end, false)),
    };
    if tri!(ctx.write_as(&args[1], pick_mut)).is_none() {
        return match count {
            None => Reply::Nil,
            Some(_) => Reply::NilArray,
        };
    }
    let popped = pop_n(ctx, &args[1], end, count.unwrap_or(1));
    ctx.dirty(popped.len() as u64);
    match count {
        None => popped.into_iter().next().map_or(Reply::Nil, |v| Reply::Bulk(v.into())),
        Some(_) => Reply::Array(popped.into_iter().map(|v| Reply::Bulk(v.into())).collect()),
    }
}

fn lpop(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    pop(ctx, args, End::Head)
}

fn rpop(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    pop(ctx, args, End::Tail)
}

fn llen(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let l = tri!(ctx.read_as(&args[1], pick));
    Reply::Int(l.map_or(0, |l| l.len()) as i64)
}

/// Redis's index rule: negative counts from the tail; `None` if outside.
fn index(len: usize, i: i64) -> Option<usize> {
    let i = if i < 0 { len as i64 + i } else { i };
    (0..len as i64).contains(&i).then_some(i as usize)
}

/// A `start stop` range clamped as LRANGE and LTRIM clamp it; `None` when empty.
fn clamp(len: usize, start: i64, stop: i64) -> Option<(usize, usize)> {
    let len = len as i64;
    let start = if start < 0 { (len + start).max(0) } else { start };
    let stop = if stop < 0 { len + stop } else { stop.min(len - 1) };
    (start <= stop && start < len).then_some((start as usize, stop as usize))
}

fn lrange(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let (start, stop) = (tri!(int(&args[2])), tri!(int(&args[3])));
    let Some(l) = tri!(ctx.read_as(&args[1], pick)) else {
        return Reply::Array(vec![]);
    };
    match clamp(l.len(), start, stop) {
        Some((a, b)) => Reply::Array(bulks(l.range(a, b))),
        None => Reply::Array(vec![]),
    }
}

/// LINDEX key index: the key is looked up before the index is read.
fn lindex(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let Some(l) = tri!(ctx.read_as(&args[1], pick)) else {
        return Reply::Nil;
    };
    let i = tri!(int(&args[2]));
    match index(l.len(), i).and_then(|i| l.get(i)) {
        Some(v) => bulk(v),
        None => Reply::Nil,
    }
}

/// LSET key index element: the key is looked up before the index is read.
fn lset(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let key = &args[1];
    let Some(l) = tri!(ctx.write_as(key, pick_mut)) else {
        return err(errors::NO_SUCH_KEY);
    };
    let i = tri!(int(&args[2]));
    let Some(i) = index(l.len(), i) else {
        return err(errors::INDEX_OUT_OF_RANGE);
    };
    l.set(i, &args[3]);
    ctx.dirty(1);
    ctx.db().touch(key);
    ctx.replied();
    ctx.notify(notify::LIST, "lset", key);
    Reply::Ok
}

fn linsert(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let after = if is(&args[2], "after") {
        true
    } else if is(&args[2], "before") {
        false
    } else {
        return err(errors::SYNTAX);
    };
    let fill = ctx.server.config.list_fill();
    let key = &args[1];
    let Some(l) = tri!(ctx.write_as(key, pick_mut)) else {
        return Reply::Int(0);
    };
    let Some(at) = l.iter().position(|e| e == args[3].as_ref()) else {
        return Reply::Int(-1);
    };
    l.insert(at + after as usize, &args[4], fill);
    let len = l.len() as i64;
    ctx.dirty(1);
    ctx.db().touch(key);
    ctx.notify(notify::LIST, "linsert", key);
    Reply::Int(len)
}

/// LREM key count element: count > 0 from the head, < 0 from the tail,
/// 0 all.
fn lrem(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let count = tri!(int(&args[2]));
    let key = &args[1];
    let Some(l) = tri!(ctx.write_as(key, pick_mut)) else {
        return Reply::Int(0);
    };
    let mut hits: Vec<usize> = l
        .iter()
        .enumerate()
        .filter(|(_, e)| *e == args[3].as_ref())
        .map(|(i, _)| i)
        .collect();
    let limit = count.unsigned_abs() as usize;
    if count < 0 {
        hits.reverse();
    }
    if count != 0 {
        hits.truncate(limit);
    }
    hits.sort_unstable();
    for (removed, i) in hits.iter().enumerate() {
        l.remove_range(i - removed, 1);
    }
    if !hits.is_empty() {
        ctx.dirty(hits.len() as u64);
        ctx.db().touch(key);
        ctx.notify(notify::LIST, "lrem", key);
        ctx.delete_if_empty(key);
    }
    Reply::Int(hits.len() as i64)
}

fn ltrim(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let (start, stop) = (tri!(int(&args[2])), tri!(int(&args[3])));
    let key = &args[1];
    let Some(l) = tri!(ctx.write_as(key, pick_mut)) else {
        return Reply::Ok;
    };
    let len = l.len();
    match clamp(len, start, stop) {
        Some((a, b)) => {
            l.remove_range(b + 1, len - b - 1);
            l.remove_range(0, a);
        }
        None => l.remove_range(0, len),
    }
    // Redis counts the elements trimmed from both ends (none: no effect).
    let trimmed = len - l.len();
    ctx.dirty(trimmed as u64);
    ctx.db().touch(key);
    ctx.notify(notify::LIST, "ltrim", key);
    ctx.delete_if_empty(key);
    Reply::Ok
}

/// LPOS key element [RANK rank] [COUNT num-matches] [MAXLEN len].
fn lpos(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let (mut rank, mut count, mut maxlen) = (1i64, None, 0usize);
    let mut i = 3;
    while i < args.len() {
        // The option is recognised before its value is read.
        if i + 1 >= args.len() || !["rank", "count", "maxlen"].iter().any(|o| is(&args[i], o)) {
            return err(errors::SYNTAX);
        }
        // COUNT and MAXLEN word a non-number as a negative one (Redis's
        // getPositiveLongFromObjectOrReply with their message).
        let n = match crate::store::num::parse_i64(&args[i + 1]) {
            Some(n) => n,
            None if is(&args[i], "count") => return err(errors::COUNT_NEGATIVE),
            None if is(&args[i], "maxlen") => return err(errors::MAXLEN_NEGATIVE),
            None => return err(errors::NOT_INTEGER),
        };
        if is(&args[i], "rank") {
            if n == 0 {
                return err(errors::RANK_ZERO);
            }
            // Redis negates the rank and i64::MIN stays negative: it then
            // takes the first match from the tail, as RANK -1.
            rank = if n == i64::MIN { -1 } else { n };
        } else if is(&args[i], "count") {
            if n < 0 {
                return err(errors::COUNT_NEGATIVE);
            }
            count = Some(n as usize);
        } else if is(&args[i], "maxlen") {
            if n < 0 {
                return err(errors::MAXLEN_NEGATIVE);
            }
            maxlen = n as usize;
        } else {
            return err(errors::SYNTAX);
        }
        i += 2;
    }
    let Some(l) = tri!(ctx.read_as(&args[1], pick)) else {
        return if count.is_some() {
            Reply::Array(vec![])
        } else {
            Reply::Nil
        };
    };
    let len = l.len();
    let scan = if maxlen == 0 { len } else { maxlen.min(len) };
    let wanted = match count {
        Some(0) => usize::MAX,
        Some(n) => n,
        None => 1,
    };
    let mut skip = rank.unsigned_abs() as usize - 1;
    let mut found = vec![];
    let all: Vec<&[u8]> = l.iter().collect();
    let elements: Box<dyn Iterator<Item = (usize, &&[u8])>> = if rank > 0 {
        Box::new(all.iter().enumerate().take(scan))
    } else {
        Box::new(all.iter().enumerate().rev().take(scan))
    };
    for (i, e) in elements {
        if *e == args[2].as_ref() {
            if skip > 0 {
                skip -= 1;
                continue;
            }
            found.push(Reply::Int(i as i64));
            if found.len() >= wanted {
                break;
            }
        }
    }
    match count {
        Some(_) => Reply::Array(found),
        None => found.pop().unwrap_or(Reply::Nil),
    }
}

fn parse_end(arg: &[u8]) -> Option<End> {
    if is(arg, "left") {
        Some(End::Head)
    } else if is(arg, "right") {
        Some(End::Tail)
    } else {
        None
    }
}

/// Pops from `from` of `src` and pushes to `to` of `dst`, as LMOVE: the
/// push's event comes before the reply, the pop's after it, as in Redis.
/// `Ok(None)`: `src` holds no list. Counts nothing (the callers count as Redis does).
fn move_one(ctx: &mut Ctx, src: &Bytes, dst: &Bytes, from: End, to: End) -> Result<Option<Vec<u8>>, Reply> {
    let fill = ctx.server.config.list_fill();
    if ctx.write_as(src, pick_mut)?.is_none() {
        return Ok(None);
    }
    // A destination of another type refuses before anything is popped.
    ctx.write_as(dst, pick_mut)?;
    let Some(value) = ctx.write_as(src, pick_mut)?.and_then(|l| l.pop(from)) else {
        return Ok(None);
    };
    ctx.db().touch(src);
    ctx.write_or_insert(dst, pick_mut, || Value::List(Box::default()))?
        .push(to, &value, fill);
    ctx.db().touch(dst);
    ctx.notify(notify::LIST, event(to, true), dst);
    ctx.replied();
    ctx.notify(notify::LIST, event(from, false), src);
    ctx.delete_if_empty(src);
    Ok(Some(value))
}

/// What a move answers: the element moved, or a null bulk.
fn moved_reply(moved: Result<Option<Vec<u8>>, Reply>) -> Reply {
    match moved {
        Ok(Some(value)) => Reply::Bulk(value.into()),
        Ok(None) => Reply::Nil,
        Err(reply) => reply,
    }
}

/// A move's effect built from the command's arguments (a blocking move
/// served at once as its plain form).
type MoveEffect = fn(&[Bytes]) -> Vec<Bytes>;

/// LMOVE / RPOPLPUSH (and a blocking move served at once): one change,
/// the effect `effect()` when it is not the command itself.
fn move_counted(
    ctx: &mut Ctx,
    src: &Bytes,
    dst: &Bytes,
    (from, to): (End, End),
    effect: Option<MoveEffect>,
    args: &[Bytes],
) -> Reply {
    let moved = move_one(ctx, src, dst, from, to);
    if matches!(moved, Ok(Some(_))) {
        ctx.dirty(1);
        if let Some(effect) = effect {
            ctx.propagate_as(|| effect(args));
        }
    }
    moved_reply(moved)
}

fn lmove(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let (Some(from), Some(to)) = (parse_end(&args[3]), parse_end(&args[4])) else {
        return err(errors::SYNTAX);
    };
    move_counted(ctx, &args[1], &args[2], (from, to), None, args)
}

fn rpoplpush(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    move_counted(ctx, &args[1], &args[2], (End::Tail, End::Head), None, args)
}

/// LMPOP's and BLMPOP's arguments from `args[first..]`.
fn parse_mpop(args: &[Bytes], first: usize) -> Result<(std::ops::Range<usize>, End, usize), Reply> {
    super::args::mpop(args, first, parse_end)
}

/// `[key, [elements]]`: what LMPOP and BLMPOP answer for the list at `key`.
/// Each element popped is a change (served later too); the effect is the
/// plain pop with the count taken: the command's own for LMPOP and a
/// BLMPOP served at once, an added one for a BLMPOP served later.
fn mpop_from(ctx: &mut Ctx, key: &Bytes, end: End, count: usize) -> Reply {
    let popped = pop_n(ctx, key, end, count);
    let taken = popped.len();
    ctx.dirty(taken as u64);
    let effect = || vec![pop_name(end), key.clone(), int_arg(taken)];
    if served_later(ctx) {
        ctx.also_propagate(effect);
    } else {
        ctx.propagate_as(effect);
    }
    Reply::Array(vec![
        Reply::Bulk(key.clone()),
        Reply::Array(popped.into_iter().map(|v| Reply::Bulk(v.into())).collect()),
    ])
}

/// LMPOP numkeys key [key ...] LEFT|RIGHT [COUNT count]: pops from the
/// first non-empty list; `[key, [elements]]` or a null array.
fn lmpop(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let (keys, end, count) = tri!(parse_mpop(args, 1));
    for key in &args[keys] {
        if tri!(list_ready(ctx, key)) {
            return mpop_from(ctx, key, end, count);
        }
    }
    Reply::NilArray
}

/// Whether `key` holds a list a blocking pop can take from now (WRONGTYPE
/// for another type).
fn list_ready(ctx: &mut Ctx, key: &[u8]) -> Result<bool, Reply> {
    Ok(ctx.write_as(key, pick_mut)?.is_some())
}

/// Whether `key` can serve a waiter now.
fn holds_list(ctx: &mut Ctx, key: &[u8]) -> bool {
    matches!(list_ready(ctx, key), Ok(true))
}

/// BLPOP / BRPOP key [key ...] timeout.
fn bpop(ctx: &mut Ctx, args: &[Bytes], serve: Serve) -> Reply {
    let deadline = tri!(blocked::deadline_secs(&args[args.len() - 1], ctx.now));
    let keys = &args[1..args.len() - 1];
    blocked::pop_or_block(ctx, args, keys, deadline, list_ready, serve, Reply::NilArray)
}

/// Pops one element for BLPOP / BRPOP: `[key, element]`. Served at once it
/// is an LPOP / RPOP (one change, that effect); served later the pop is an
/// added effect and counts nothing, as in Redis.
fn serve_pop(ctx: &mut Ctx, key: &Bytes, end: End) -> Option<Reply> {
    if !holds_list(ctx, key) {
        return None;
    }
    let value = pop_n(ctx, key, end, 1).pop()?;
    let effect = || vec![pop_name(end), key.clone()];
    if served_later(ctx) {
        ctx.also_propagate(effect);
    } else {
        ctx.dirty(1);
        ctx.propagate_as(effect);
    }
    Some(Reply::Array(vec![Reply::Bulk(key.clone()), Reply::Bulk(value.into())]))
}

fn blpop(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    bpop(ctx, args, |ctx, _, key| serve_pop(ctx, key, End::Head))
}

fn brpop(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    bpop(ctx, args, |ctx, _, key| serve_pop(ctx, key, End::Tail))
}

/// BLMOVE / BRPOPLPUSH: moves from the source at once if it holds a list,
/// otherwise waits for it. Inside MULTI or a script the answer is a null
/// bulk (LMOVE's nil), not the null array of a timeout.
fn bmove(ctx: &mut Ctx, args: &[Bytes], timeout: &Bytes, serve: Serve) -> Reply {
    let deadline = tri!(blocked::deadline_secs(timeout, ctx.now));
    blocked::pop_or_block(ctx, args, &args[1..2], deadline, list_ready, serve, Reply::Nil)
}

/// Serves a blocking move from `src`: at once it is the plain move
/// (`at_once(args)`, one change); served later the move is an added effect
/// (`later(src, dst)`) and counts nothing, as in Redis.
fn serve_move(
    ctx: &mut Ctx,
    args: &[Bytes],
    src: &Bytes,
    ends: (End, End),
    at_once: MoveEffect,
    later: fn(&Bytes, &Bytes, (End, End)) -> Vec<Bytes>,
) -> Option<Reply> {
    if !holds_list(ctx, src) {
        return None;
    }
    let dst = &args[2];
    if !served_later(ctx) {
        return Some(move_counted(ctx, src, dst, ends, Some(at_once), args));
    }
    let moved = move_one(ctx, src, dst, ends.0, ends.1);
    if matches!(moved, Ok(Some(_))) {
        ctx.also_propagate(|| later(src, dst, ends));
    }
    Some(moved_reply(moved))
}

/// BLMOVE source destination LEFT|RIGHT LEFT|RIGHT timeout.
fn blmove(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    if parse_end(&args[3]).is_none() || parse_end(&args[4]).is_none() {
        return err(errors::SYNTAX);
    }
    bmove(ctx, args, &args[5], |ctx, args, src| {
        let ends = (parse_end(&args[3])?, parse_end(&args[4])?);
        // At once: LMOVE with the ends as the client wrote them; later:
        // with Redis's shared lower-case words.
        let at_once = |args: &[Bytes]| {
            let mut effect = args[..5].to_vec();
            effect[0] = Bytes::from_static(b"LMOVE");
            effect
        };
        let later = |src: &Bytes, dst: &Bytes, (from, to): (End, End)| {
            vec![
                Bytes::from_static(b"LMOVE"),
                src.clone(),
                dst.clone(),
                end_word(from),
                end_word(to),
            ]
        };
        serve_move(ctx, args, src, ends, at_once, later)
    })
}

/// BRPOPLPUSH source destination timeout.
fn brpoplpush(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    bmove(ctx, args, &args[3], |ctx, args, src| {
        fn effect(src: &Bytes, dst: &Bytes) -> Vec<Bytes> {
            vec![Bytes::from_static(b"RPOPLPUSH"), src.clone(), dst.clone()]
        }
        let at_once = |args: &[Bytes]| effect(&args[1], &args[2]);
        let later = |src: &Bytes, dst: &Bytes, _| effect(src, dst);
        serve_move(ctx, args, src, (End::Tail, End::Head), at_once, later)
    })
}

/// BLMPOP timeout numkeys key [key ...] LEFT|RIGHT [COUNT count].
fn blmpop(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let (keys, _, _) = tri!(parse_mpop(args, 2));
    let deadline = tri!(blocked::deadline_secs(&args[1], ctx.now));
    let serve: Serve = |ctx, args, key| {
        let (_, end, count) = parse_mpop(args, 2).ok()?;
        holds_list(ctx, key).then(|| mpop_from(ctx, key, end, count))
    };
    blocked::pop_or_block(ctx, args, &args[keys], deadline, list_ready, serve, Reply::NilArray)
}
