//! Streams: XADD, XLEN, XRANGE, XREVRANGE, XDEL, XTRIM, XREAD, XSETID, the
//! consumer groups (XGROUP, XREADGROUP, XACK, XPENDING, XCLAIM, XAUTOCLAIM)
//! and XINFO, answering as Redis 7.0.15's `t_stream.c`, argument checks in
//! its order.
//!
//! The value lives in [`crate::store::stream`]. Every time read (new IDs,
//! delivery and idle times) is the command's `ctx.now`, the server clock, so
//! a virtual clock drives IDs and XAUTOCLAIM's idle times. Events are
//! Redis's, class `t`: `xadd`, `xtrim`, `xdel`, `xsetid`, `xgroup-create`,
//! `xgroup-setid`, `xgroup-destroy`, `xgroup-createconsumer`,
//! `xgroup-delconsumer`.
//!
//! Dirty counts and effects are Redis's: XADD counts one and is replayed
//! with its ID explicit; an approximate trim (`~`, XADD's or XTRIM's) is
//! replayed as the exact trim it came to (`MAXLEN = <length>` or
//! `MINID = <first ID>`); group reads and claims are replayed as the
//! `XCLAIM ... FORCE JUSTID LASTID` of each entry delivered, claimed or
//! dropped, `XGROUP SETID` when only the group's position moved, and
//! `XGROUP CREATECONSUMER` for a NOACK reader's new consumer
//! (`streamPropagateXCLAIM`, `streamPropagateGroupID`,
//! `streamPropagateConsumerCreation`), never as themselves.
//!
//! XREAD and XREADGROUP with BLOCK wait through [`crate::blocked`]: the
//! client blocks with `$` already resolved to the stream's last ID, and
//! [`serve_read`] answers it once an XADD (or XGROUP DESTROY, for a group
//! reader: `-NOGROUP`) signals the key.

use bytes::Bytes;

use super::args::{int, int_arg, is};
use super::flags::*;
use super::{acl, CommandSpec, Ctx};
use crate::blocked;
use crate::errors::{self, err};
use crate::notify;
use crate::protocol::Reply;
use crate::store::num;
use crate::store::stream::{Consumer, Entry, Group, Pending, Stream, StreamId, Trim};
use crate::store::Value;
use crate::tri;

macro_rules! spec {
    ($($row:tt)*) => { command!("stream", $($row)*) };
}

#[rustfmt::skip]
pub(crate) static COMMANDS: &[CommandSpec] = &[
    spec!("xadd", -5, WRITE | DENYOOM | FAST, acl::STREAM, "Appends a new entry to a stream", xadd),
    spec!("xlen", 2, READONLY | FAST, acl::STREAM, "Return the number of entries in a stream", xlen),
    spec!("xrange", -4, READONLY, acl::STREAM, "Return a range of elements in a stream, with IDs matching the specified IDs interval", xrange),
    spec!("xrevrange", -4, READONLY, acl::STREAM, "Return a range of elements in a stream, with IDs matching the specified IDs interval, in reverse order (from greater to smaller IDs) compared to XRANGE", xrevrange),
    spec!("xdel", -3, WRITE | FAST, acl::STREAM, "Removes the specified entries from the stream. Returns the number of items actually deleted, that may be different from the number of IDs passed in case certain IDs do not exist.", xdel),
    spec!("xtrim", -4, WRITE, acl::STREAM, "Trims the stream to (approximately if '~' is passed) a certain size", xtrim),
    spec!("xread", -4, READONLY | BLOCKING | MOVABLEKEYS, acl::STREAM, "Return never seen elements in multiple streams, with IDs greater than the ones reported by the caller for each stream. Can block.", xread).keys_by(super::keyspecs::xread_keys),
    spec!("xreadgroup", -7, WRITE | BLOCKING | MOVABLEKEYS, acl::STREAM, "Return new entries from a stream using a consumer group, or access the history of the pending entries for a given consumer. Can block.", xreadgroup).keys_by(super::keyspecs::xread_keys),
    spec!("xack", -4, WRITE | FAST, acl::STREAM, "Marks a pending message as correctly processed, effectively removing it from the pending entries list of the consumer group. Return value of the command is the number of messages successfully acknowledged, that is, the IDs we were actually able to resolve in the PEL.", xack),
    spec!("xpending", -3, READONLY, acl::STREAM, "Return information and entries from a stream consumer group pending entries list, that are messages fetched but never acknowledged.", xpending),
    spec!("xclaim", -6, WRITE | FAST, acl::STREAM, "Changes (or acquires) ownership of a message in a consumer group, as if the message was delivered to the specified consumer.", xclaim),
    spec!("xautoclaim", -6, WRITE | FAST, acl::STREAM, "Changes (or acquires) ownership of messages in a consumer group, as if the messages were delivered to the specified consumer.", xautoclaim),
    spec!("xsetid", -3, WRITE | DENYOOM | FAST, acl::STREAM, "An internal command for replicating stream values", xsetid),
    spec!("xgroup", -2, 0, 0, "A container for consumer groups commands", super::container, XGROUP),
    spec!("xinfo", -2, 0, 0, "A container for stream introspection commands", super::container, XINFO),
];

#[rustfmt::skip]
static XGROUP: &[CommandSpec] = &[
    command!("stream", "xgroup|create", -5, WRITE | DENYOOM, acl::STREAM, "Create a consumer group.", xgroup),
    command!("stream", "xgroup|setid", -5, WRITE, acl::STREAM, "Set a consumer group to an arbitrary last delivered ID value.", xgroup),
    command!("stream", "xgroup|destroy", 4, WRITE, acl::STREAM, "Destroy a consumer group.", xgroup),
    command!("stream", "xgroup|createconsumer", 5, WRITE | DENYOOM, acl::STREAM, "Create a consumer in a consumer group.", xgroup),
    command!("stream", "xgroup|delconsumer", 5, WRITE, acl::STREAM, "Delete a consumer from a consumer group.", xgroup),
    command!("stream", "xgroup|help", 2, LOADING | STALE, acl::STREAM, "Show helpful text about the different subcommands", xgroup_help),
];

#[rustfmt::skip]
static XINFO: &[CommandSpec] = &[
    command!("stream", "xinfo|stream", -3, READONLY, acl::STREAM, "Get information about a stream", xinfo_stream),
    command!("stream", "xinfo|groups", 3, READONLY, acl::STREAM, "List the consumer groups of a stream", xinfo_groups),
    command!("stream", "xinfo|consumers", 4, READONLY, acl::STREAM, "List the consumers in a consumer group", xinfo_consumers),
    command!("stream", "xinfo|help", 2, LOADING | STALE, acl::STREAM, "Show helpful text about the different subcommands", xinfo_help),
];

value_pickers!(Stream, Stream);

/// XREAD's COUNT for a blocked reader that gave none (Redis's
/// `XREAD_BLOCKED_DEFAULT_COUNT`).
const BLOCKED_DEFAULT_COUNT: usize = 1000;
/// XAUTOCLAIM looks at up to COUNT × this many pending entries.
const AUTOCLAIM_ATTEMPTS_FACTOR: i64 = 10;
/// An approximate trim without LIMIT removes up to this many nodes' worth
/// of entries (`100 * stream-node-max-entries`)...
const TRIM_DEFAULT_NODES: u64 = 100;
/// ...this many when that is 0...
const TRIM_LIMIT_WHEN_UNSET: u64 = 10_000;
/// ...and never more than this many (Redis's `streamParseAddOrTrimArgsOrReply`).
const TRIM_LIMIT_MAX: u64 = 1_000_000;

// ---- IDs -----------------------------------------------------------------

/// An unsigned number as Redis's `string2ull` reads it: a strict integer,
/// or what `strtoull` accepts (leading spaces, a sign) within range.
fn parse_u64(s: &[u8]) -> Option<u64> {
    if let Some(v) = num::parse_i64(s) {
        return u64::try_from(v).ok();
    }
    let text = std::str::from_utf8(s).ok()?;
    let text = text.trim_start_matches([' ', '\t', '\n', '\x0b', '\x0c', '\r']);
    let (negative, digits) = match text.as_bytes().first()? {
        b'+' => (false, &text[1..]),
        b'-' => (true, &text[1..]),
        _ => (false, text),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let v: u64 = digits.parse().ok()?;
    Some(if negative { v.wrapping_neg() } else { v })
}

/// What [`parse_id`] accepts besides `ms-seq`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum IdForm {
    /// `-` and `+` as the least and greatest IDs.
    Range,
    /// Only numbers (Redis's strict parse).
    Strict,
    /// Strict, and `ms-*` (XADD): the flag says the sequence was given.
    Add,
}

/// A stream ID as Redis's `streamGenericParseIDOrReply` reads it: `ms-seq`,
/// or `ms` with `missing_seq` as the sequence.
fn parse_id_form(arg: &[u8], missing_seq: u64, form: IdForm) -> Result<(StreamId, bool), Reply> {
    let bad = || err(errors::STREAM_BAD_ID);
    // Redis copies into a 128-byte buffer and reads it as a C string.
    if arg.len() > 127 {
        return Err(bad());
    }
    let arg = arg.split(|&b| b == 0).next().unwrap_or_default();
    match (arg, form) {
        (b"-" | b"+", IdForm::Strict | IdForm::Add) => return Err(bad()),
        (b"-", IdForm::Range) => return Ok((StreamId::ZERO, true)),
        (b"+", IdForm::Range) => return Ok((StreamId::MAX, true)),
        _ => {}
    }
    let (ms, seq) = match arg.iter().position(|&b| b == b'-') {
        Some(dash) => (&arg[..dash], Some(&arg[dash + 1..])),
        None => (arg, None),
    };
    let ms = parse_u64(ms).ok_or_else(bad)?;
    match seq {
        Some(b"*") if form == IdForm::Add => Ok((StreamId::new(ms, 0), false)),
        Some(seq) => Ok((StreamId::new(ms, parse_u64(seq).ok_or_else(bad)?), true)),
        None => Ok((StreamId::new(ms, missing_seq), true)),
    }
}

fn parse_id(arg: &[u8], missing_seq: u64) -> Result<StreamId, Reply> {
    parse_id_form(arg, missing_seq, IdForm::Range).map(|(id, _)| id)
}

fn parse_strict_id(arg: &[u8]) -> Result<StreamId, Reply> {
    parse_id_form(arg, 0, IdForm::Strict).map(|(id, _)| id)
}

/// A range bound, `(` making it exclusive (Redis's
/// `streamParseIntervalIDOrReply` and the step past an exclusive bound).
fn parse_bound(arg: &[u8], start: bool) -> Result<StreamId, Reply> {
    let missing_seq = if start { 0 } else { u64::MAX };
    if arg.len() > 1 && arg[0] == b'(' {
        let (id, _) = parse_id_form(&arg[1..], missing_seq, IdForm::Strict)?;
        let stepped = if start { id.incr() } else { id.decr() };
        return stepped.ok_or_else(|| {
            err(if start {
                errors::INVALID_START_ID
            } else {
                errors::INVALID_END_ID
            })
        });
    }
    parse_id(arg, missing_seq)
}

fn id_reply(id: StreamId) -> Reply {
    Reply::Bulk(id.to_bytes())
}

/// `[id, [field, value, ...]]`.
fn entry_reply(e: Entry<'_>) -> Reply {
    let mut fields = Vec::with_capacity(e.len() * 2);
    for (f, v) in e.fields() {
        fields.push(Reply::Bulk(Bytes::copy_from_slice(f)));
        fields.push(Reply::Bulk(Bytes::copy_from_slice(v)));
    }
    Reply::Array(vec![id_reply(e.id), Reply::Array(fields)])
}

// ---- XADD, XTRIM ---------------------------------------------------------

/// XADD's and XTRIM's options (Redis's `streamAddTrimArgs`).
#[derive(Default)]
struct AddTrim {
    trim: Option<Trim>,
    approx: bool,
    limit: u64,
    no_mkstream: bool,
    /// XADD's explicit ID, and whether its sequence was given (not `ms-*`).
    id: Option<(StreamId, bool)>,
    /// Where the trim's threshold is (after `~` or `=`): an approximate
    /// trim's effect rewrites it.
    trim_at: usize,
    /// Where XADD's field-value pairs start.
    fields_at: usize,
}

/// Parses from `args[2..]` as Redis's `streamParseAddOrTrimArgsOrReply`.
fn parse_add_trim(ctx: &Ctx, args: &[Bytes], xadd: bool) -> Result<AddTrim, Reply> {
    let mut out = AddTrim::default();
    let mut limit_given = None;
    let mut i = 2;
    while i < args.len() {
        let more = args.len() - 1 - i;
        let opt = &args[i];
        if xadd && opt.as_ref() == b"*" {
            break;
        } else if (is(opt, "maxlen") || is(opt, "minid")) && more > 0 {
            if out.trim.is_some() {
                return Err(err(errors::MAXLEN_AND_MINID));
            }
            out.approx = false;
            let next = args[i + 1].as_ref();
            if more >= 2 && (next == b"~" || next == b"=") {
                out.approx = next == b"~";
                i += 1;
            }
            let threshold = &args[i + 1];
            out.trim_at = i + 1;
            out.trim = Some(if is(opt, "maxlen") {
                let n = int(threshold)?;
                if n < 0 {
                    return Err(err(errors::MAXLEN_NEGATIVE_STREAM));
                }
                Trim::MaxLen(n as u64)
            } else {
                Trim::MinId(parse_strict_id(threshold)?)
            });
            i += 1;
        } else if is(opt, "limit") && more > 0 {
            let n = int(&args[i + 1])?;
            if n < 0 {
                return Err(err(errors::LIMIT_NEGATIVE_STREAM));
            }
            limit_given = Some(n as u64);
            i += 1;
        } else if xadd && is(opt, "nomkstream") {
            out.no_mkstream = true;
        } else if xadd {
            out.id = Some(parse_id_form(opt, 0, IdForm::Add)?);
            break;
        } else {
            return Err(err(errors::SYNTAX));
        }
        i += 1;
    }
    out.fields_at = i + 1;
    if limit_given.is_some_and(|n| n != 0) && out.trim.is_none() {
        return Err(err(errors::LIMIT_WITHOUT_STRATEGY));
    }
    if !xadd && out.trim.is_none() {
        return Err(err(errors::XTRIM_NO_STRATEGY));
    }
    out.limit = match limit_given {
        // The trim was rewritten exactly as it went (`MAXLEN = n`, LIMIT
        // kept) by the server that ran it: replayed whole, as Redis's.
        _ if ctx.must_obey() => 0,
        Some(_) if !out.approx => return Err(err(errors::LIMIT_WITHOUT_TILDE)),
        Some(n) => n,
        None if out.approx => {
            let per_node = ctx.server.config.stream_node_max_entries as u64;
            match per_node.saturating_mul(TRIM_DEFAULT_NODES) {
                0 => TRIM_LIMIT_WHEN_UNSET,
                n => n.min(TRIM_LIMIT_MAX),
            }
        }
        None => 0,
    };
    Ok(out)
}

/// Trims `key` as the options say, with the `xtrim` event when anything went.
fn trim_key(ctx: &mut Ctx, key: &[u8], opts: &AddTrim) -> u64 {
    let Some(rule) = opts.trim else { return 0 };
    let Ok(Some(s)) = ctx.write_as(key, pick_mut) else {
        return 0;
    };
    let removed = s.trim(rule, opts.approx, opts.limit);
    if removed > 0 {
        ctx.notify(notify::STREAM, "xtrim", key);
    }
    removed
}

/// The effect of a command that trimmed approximately (`~`): the same
/// arguments with the trim exact at what it came to (`=` and the length
/// for MAXLEN, the first ID, tombstones included, for MINID: Redis's
/// `streamRewriteApproxSpecifier` / `streamRewriteTrimArgument`), and with
/// `id` at `id_at` (XADD's generated ID).
fn rewritten(ctx: &mut Ctx, args: &[Bytes], opts: &AddTrim, id: Option<(usize, StreamId)>) -> Option<Vec<Bytes>> {
    let mut effect = args.to_vec();
    if opts.approx {
        let s = ctx.write_as(&args[1], pick_mut).ok()??;
        effect[opts.trim_at - 1] = Bytes::from_static(b"=");
        effect[opts.trim_at] = match opts.trim? {
            Trim::MaxLen(_) => int_arg(s.len()),
            Trim::MinId(_) => s.first_raw_id().to_bytes(),
        };
    }
    if let Some((at, id)) = id {
        effect[at] = id.to_bytes();
    }
    Some(effect)
}

/// XADD key [NOMKSTREAM] [MAXLEN|MINID [=|~] threshold [LIMIT count]] *|id field value [field value ...]
fn xadd(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let opts = tri!(parse_add_trim(ctx, args, true));
    let fields = args.get(opts.fields_at..).unwrap_or_default();
    if fields.len() < 2 || fields.len() % 2 == 1 {
        return errors::wrong_args("xadd");
    }
    if opts.id == Some((StreamId::ZERO, true)) {
        return err(errors::XADD_ID_ZERO);
    }
    let key = &args[1];
    let now = ctx.now;
    let limits = ctx.server.config.stream_limits();
    let s = if opts.no_mkstream {
        match tri!(ctx.write_as(key, pick_mut)) {
            Some(s) => s,
            None => return Reply::Nil,
        }
    } else {
        tri!(ctx.write_or_insert(key, pick_mut, || Value::Stream(Box::default())))
    };
    if s.last_id == StreamId::MAX {
        return err(errors::STREAM_EXHAUSTED);
    }
    let id = match opts.id {
        None => s.next_id(now),
        Some((id, true)) => Some(id),
        // `ms-*` on the last ID's milliseconds takes the next sequence; none
        // is left after the greatest (Redis's answer is this one).
        Some((id, false)) if id.ms == s.last_id.ms && s.last_id.seq == u64::MAX => {
            return err(errors::ELEMENTS_TOO_LARGE);
        }
        Some((id, false)) if id.ms == s.last_id.ms => s.last_id.incr(),
        Some((id, false)) => Some(id),
    };
    let Some(id) = id.filter(|&id| id > s.last_id) else {
        return err(errors::XADD_ID_TOO_SMALL);
    };
    s.append(id, fields, limits);
    ctx.db().touch(key);
    // Redis replies with the ID, then announces the entry (and the trim).
    ctx.replied();
    ctx.notify(notify::STREAM, "xadd", key);
    ctx.dirty(1);
    trim_key(ctx, key, &opts);
    // `*` and `ms-*` are replayed as the ID they gave.
    let generated = !matches!(opts.id, Some((_, true)));
    if ctx.propagating() && (opts.approx || generated) {
        let id_at = generated.then_some((opts.fields_at - 1, id));
        if let Some(effect) = rewritten(ctx, args, &opts, id_at) {
            ctx.propagate_as(|| effect);
        }
    }
    ctx.db().signal_ready(key);
    id_reply(id)
}

/// XTRIM key MAXLEN|MINID [=|~] threshold [LIMIT count]
fn xtrim(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let opts = tri!(parse_add_trim(ctx, args, false));
    if tri!(ctx.write_as(&args[1], pick_mut)).is_none() {
        return Reply::Int(0);
    }
    let removed = trim_key(ctx, &args[1], &opts);
    if removed > 0 {
        ctx.db().touch(&args[1]);
        ctx.dirty(removed);
        if opts.approx && ctx.propagating() {
            if let Some(effect) = rewritten(ctx, args, &opts, None) {
                ctx.propagate_as(|| effect);
            }
        }
    }
    Reply::Int(removed as i64)
}

// ---- XLEN, XRANGE, XREVRANGE, XDEL, XSETID -------------------------------

fn xlen(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    Reply::Int(tri!(ctx.read_as(&args[1], pick)).map_or(0, |s| s.len() as i64))
}

/// XRANGE key start end [COUNT n] / XREVRANGE key end start [COUNT n].
fn range(ctx: &mut Ctx, args: &[Bytes], rev: bool) -> Reply {
    let (start_arg, end_arg) = if rev {
        (&args[3], &args[2])
    } else {
        (&args[2], &args[3])
    };
    let start = tri!(parse_bound(start_arg, true));
    let end = tri!(parse_bound(end_arg, false));
    let mut count: Option<usize> = None;
    let mut j = 4;
    while j < args.len() {
        if is(&args[j], "count") && j + 1 < args.len() {
            count = Some(tri!(int(&args[j + 1])).max(0) as usize);
            j += 2;
        } else {
            return err(errors::SYNTAX);
        }
    }
    let Some(s) = tri!(ctx.read_as(&args[1], pick)) else {
        return Reply::Array(vec![]);
    };
    if count == Some(0) {
        return Reply::NilArray;
    }
    let limit = count.unwrap_or(usize::MAX);
    let entries = s.range(start, end);
    let out: Vec<Reply> = if rev {
        entries.rev().take(limit).map(entry_reply).collect()
    } else {
        entries.take(limit).map(entry_reply).collect()
    };
    Reply::Array(out)
}

fn xrange(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    range(ctx, args, false)
}

fn xrevrange(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    range(ctx, args, true)
}

/// XDEL key id [id ...]
fn xdel(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    if tri!(ctx.write_as(&args[1], pick_mut)).is_none() {
        return Reply::Int(0);
    }
    let mut ids = Vec::with_capacity(args.len() - 2);
    for arg in &args[2..] {
        ids.push(tri!(parse_strict_id(arg)));
    }
    let Ok(Some(s)) = ctx.write_as(&args[1], pick_mut) else {
        return Reply::Int(0);
    };
    let mut deleted = 0;
    for id in ids {
        if s.delete(id) {
            deleted += 1;
            s.max_deleted = s.max_deleted.max(id);
        }
    }
    if deleted > 0 {
        ctx.db().touch(&args[1]);
        ctx.notify(notify::STREAM, "xdel", &args[1]);
        ctx.dirty(deleted as u64);
    }
    Reply::Int(deleted)
}

/// XSETID key last-id [ENTRIESADDED n] [MAXDELETEDID id]
fn xsetid(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let id = tri!(parse_strict_id(&args[2]));
    let (mut added, mut max_deleted) = (None, StreamId::ZERO);
    let mut i = 3;
    while i < args.len() {
        let more = i + 1 < args.len();
        if is(&args[i], "entriesadded") && more {
            let n = tri!(int(&args[i + 1]));
            if n < 0 {
                return err(errors::ENTRIES_ADDED_NEGATIVE);
            }
            added = Some(n as u64);
        } else if is(&args[i], "maxdeletedid") && more {
            max_deleted = tri!(parse_strict_id(&args[i + 1]));
            if id < max_deleted {
                return err(errors::XSETID_BELOW_MAX_DELETED_ARG);
            }
        } else {
            return err(errors::SYNTAX);
        }
        i += 2;
    }
    let Some(s) = tri!(ctx.write_as(&args[1], pick_mut)) else {
        return err(errors::NO_SUCH_KEY);
    };
    if !s.is_empty() {
        if id < s.last_entry_id() {
            return err(errors::XSETID_SMALLER);
        }
        if added.is_some_and(|n| n < s.len()) {
            return err(errors::XSETID_ENTRIES_ADDED);
        }
    }
    s.last_id = id;
    if let Some(n) = added {
        s.entries_added = n;
    }
    if !max_deleted.is_zero() {
        s.max_deleted = max_deleted;
    }
    // (Redis 7.0.15's XSETID does not touch WATCH.)
    ctx.dirty(1);
    ctx.replied();
    ctx.notify(notify::STREAM, "xsetid", &args[1]);
    Reply::Ok
}

// ---- XREAD, XREADGROUP ---------------------------------------------------

/// XREAD's and XREADGROUP's options.
struct Read<'a> {
    /// Milliseconds; `None`: no BLOCK.
    block: Option<&'a Bytes>,
    count: usize,
    group: Option<(&'a Bytes, &'a Bytes)>,
    noack: bool,
    /// Where the keys start; as many IDs follow them.
    streams_at: usize,
    streams: usize,
}

/// Parses XREAD / XREADGROUP as Redis's `xreadCommand` does, up to the IDs.
fn parse_read<'a>(ctx: &Ctx, args: &'a [Bytes], group_cmd: bool) -> Result<Read<'a>, Reply> {
    let mut read = Read {
        block: None,
        count: 0,
        group: None,
        noack: false,
        streams_at: 0,
        streams: 0,
    };
    let mut i = 1;
    while i < args.len() {
        let more = args.len() - 1 - i;
        let opt = &args[i];
        if is(opt, "block") && more > 0 {
            if ctx.in_script() {
                return Err(errors::xread_block_in_script(&args[0]));
            }
            // Checked here for its error; the deadline is taken later.
            blocked::deadline_ms(&args[i + 1], 0)?;
            read.block = Some(&args[i + 1]);
            i += 1;
        } else if is(opt, "count") && more > 0 {
            read.count = int(&args[i + 1])?.max(0) as usize;
            i += 1;
        } else if is(opt, "streams") && more > 0 {
            read.streams_at = i + 1;
            let n = args.len() - read.streams_at;
            if !n.is_multiple_of(2) {
                return Err(err(errors::XREAD_UNBALANCED));
            }
            read.streams = n / 2;
            break;
        } else if is(opt, "group") && more >= 2 {
            if !group_cmd {
                return Err(err(errors::XREAD_GROUP_OPTION));
            }
            read.group = Some((&args[i + 1], &args[i + 2]));
            i += 2;
        } else if is(opt, "noack") {
            if !group_cmd {
                return Err(err(errors::XREAD_NOACK_OPTION));
            }
            read.noack = true;
        } else {
            return Err(err(errors::SYNTAX));
        }
        i += 1;
    }
    if read.streams_at == 0 {
        return Err(err(errors::SYNTAX));
    }
    if group_cmd && read.group.is_none() {
        return Err(err(errors::XREADGROUP_MISSING_GROUP));
    }
    Ok(read)
}

/// Where a read starts for one key: after an ID, or `>` (new entries of the
/// group).
#[derive(Clone, Copy, PartialEq, Eq)]
enum From {
    After(StreamId),
    New,
}

/// XREAD [COUNT n] [BLOCK ms] STREAMS key [key ...] id [id ...]
fn xread(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    read(ctx, args, false)
}

/// XREADGROUP GROUP group consumer [COUNT n] [BLOCK ms] [NOACK] STREAMS key [key ...] id [id ...]
fn xreadgroup(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    read(ctx, args, true)
}

fn read(ctx: &mut Ctx, args: &[Bytes], group_cmd: bool) -> Reply {
    // A group read's effects are the claims and positions it adds
    // (`read_key`), never the read itself.
    ctx.prevent_propagation();
    let read = tri!(parse_read(ctx, args, group_cmd));
    let keys = &args[read.streams_at..read.streams_at + read.streams];
    let id_args = &args[read.streams_at + read.streams..];
    let mut froms = Vec::with_capacity(keys.len());
    for (key, id) in keys.iter().zip(id_args) {
        let stream = tri!(ctx.read_as(key, pick));
        if let Some((group, _)) = read.group {
            if stream.and_then(|s| s.group(group)).is_none() {
                return errors::nogroup_xreadgroup(key, group);
            }
        }
        froms.push(match id.as_ref() {
            b"$" if group_cmd => return err(errors::XREADGROUP_DOLLAR),
            b"$" => From::After(stream.map_or(StreamId::ZERO, |s| s.last_id)),
            b">" if !group_cmd => return err(errors::XREAD_GT_ID),
            b">" => From::New,
            _ => From::After(tri!(parse_strict_id(id))),
        });
    }
    let mut served = vec![];
    // The reply's nodes before the next key's entries: Redis makes a
    // group's consumer once it has written the stream's key.
    let marking = ctx.client.is_subscribed();
    let mut written = 1;
    for (key, from) in keys.iter().zip(&froms) {
        if let Some(entries) = read_key(ctx, key, *from, &read, Some(written + 1)) {
            if marking {
                written += 1 + entries.nodes(ctx.client.resp3);
            }
            served.push((Reply::Bulk(key.clone()), entries));
        }
    }
    if !served.is_empty() {
        return Reply::KeyedPairs(served);
    }
    let Some(block) = read.block else {
        return Reply::NilArray;
    };
    let deadline = tri!(blocked::deadline_ms(block, ctx.now));
    // The waiter keeps its command with `$` resolved: it reads what comes
    // after the stream's last ID at the time it blocked.
    let mut kept = args.to_vec();
    for (i, from) in froms.iter().enumerate() {
        if let From::After(id) = from {
            kept[read.streams_at + read.streams + i] = id.to_bytes();
        }
    }
    blocked::block(
        ctx,
        &kept,
        keys,
        deadline,
        Some(if group_cmd { serve_read_group } else { serve_read_plain }),
        Reply::NilArray,
        Reply::NilArray,
    )
}

/// The entries one key answers a read with, or `None` when it has nothing
/// for it (the key is then left out of the reply). For a group, delivery
/// moves the group on and fills the PELs. `written`: the nodes of the
/// reply written before these entries when served at once; `None` for a
/// blocked client being served (the group's position decides, a deleted
/// group is an error, and a new consumer is announced before the reply).
fn read_key(ctx: &mut Ctx, key: &Bytes, from: From, read: &Read, written: Option<usize>) -> Option<Reply> {
    let waiter = written.is_none();
    let now = ctx.now;
    let count = match read.count {
        0 if waiter => BLOCKED_DEFAULT_COUNT,
        0 => usize::MAX,
        n => n,
    };
    let s = ctx.write_as(key, pick_mut).ok()??;
    let Some((group, consumer)) = read.group else {
        let From::After(after) = from else { return None };
        let top = if waiter { s.last_id } else { s.last_entry_id() };
        if top <= after {
            return None;
        }
        let start = after.incr()?;
        let entries = s.range(start, StreamId::MAX).take(count).map(entry_reply).collect();
        return Some(Reply::Array(entries));
    };
    let g = s.group(group)?;
    let after = match from {
        From::After(id) => id,
        From::New => g.last_id,
    };
    if from == From::New {
        let top = if waiter { s.last_id } else { s.last_entry_id() };
        if top <= after {
            return None;
        }
    }
    if let Some(written) = written {
        ctx.replied_up_to(written);
    }
    if touch_consumer(ctx, key, group, consumer, now) {
        ctx.dirty(1);
        if read.noack {
            // Without claims to carry it, the new consumer is its own effect.
            ctx.also_propagate(|| {
                vec![
                    Bytes::from_static(b"XGROUP"),
                    Bytes::from_static(b"CREATECONSUMER"),
                    key.clone(),
                    group.clone(),
                    consumer.clone(),
                ]
            });
        }
    }
    // Served at once: one change per stream (a served waiter counts only
    // the consumer it made, as Redis's `serveClientsBlockedOnStreamKey`).
    if !waiter {
        ctx.dirty(1);
    }
    let propagating = ctx.propagating();
    let s = ctx.write_as(key, pick_mut).ok()??;
    let start = after.incr()?;
    if let From::After(_) = from {
        return Some(Reply::Array(history(s, group, consumer, start, count, now)));
    }
    let entries: Vec<(StreamId, Reply)> = s
        .range(start, StreamId::MAX)
        .take(count)
        .map(|e| (e.id, entry_reply(e)))
        .collect();
    let mut out = Vec::with_capacity(entries.len());
    let mut effects = vec![];
    let mut moved = false;
    for (id, entry) in entries {
        moved |= s.group(group).is_some_and(|g| id > g.last_id);
        s.advance_group(group, id);
        out.push(entry);
        if !read.noack {
            let g = s.group_mut(group)?;
            deliver(g, id, consumer, now);
            if propagating {
                let p = &g.pending[&id];
                effects.push(xclaim_effect(key, group, id.to_bytes(), p, g.last_id));
            }
        }
    }
    if propagating && read.noack && moved {
        // NOACK leaves no claims to carry the group's new position.
        effects.push(setid_effect(key, group, s.group(group)?));
    }
    for effect in effects {
        ctx.also_propagate(|| effect);
    }
    Some(Reply::Array(out))
}

/// The effect of an entry delivered, claimed or dropped from a group's
/// pending list (Redis's `streamPropagateXCLAIM`): replayed, it gives the
/// pending entry this holder, time and count, and the group `last_id`.
fn xclaim_effect(key: &Bytes, group: &Bytes, id: Bytes, p: &Pending, last_id: StreamId) -> Vec<Bytes> {
    vec![
        Bytes::from_static(b"XCLAIM"),
        key.clone(),
        group.clone(),
        p.consumer.clone(),
        Bytes::from_static(b"0"),
        id,
        Bytes::from_static(b"TIME"),
        int_arg(p.delivered_at),
        Bytes::from_static(b"RETRYCOUNT"),
        int_arg(p.deliveries),
        Bytes::from_static(b"FORCE"),
        Bytes::from_static(b"JUSTID"),
        Bytes::from_static(b"LASTID"),
        last_id.to_bytes(),
    ]
}

/// The effect of a group's position moving without a claim to carry it
/// (Redis's `streamPropagateGroupID`); an unknown read counter is `-1`.
fn setid_effect(key: &Bytes, name: &Bytes, g: &Group) -> Vec<Bytes> {
    vec![
        Bytes::from_static(b"XGROUP"),
        Bytes::from_static(b"SETID"),
        key.clone(),
        name.clone(),
        g.last_id.to_bytes(),
        Bytes::from_static(b"ENTRIESREAD"),
        g.entries_read.map_or(Bytes::from_static(b"-1"), int_arg),
    ]
}

/// Records `id` as delivered to `consumer` now: a new pending entry, or one
/// taken over from whoever held it (Redis's NACK reassignment).
fn deliver(g: &mut Group, id: StreamId, consumer: &Bytes, now: u64) {
    let previous = g.pending.insert(
        id,
        Pending {
            consumer: consumer.clone(),
            delivered_at: now,
            deliveries: 1,
        },
    );
    if let Some(old) = previous {
        if let Some(c) = g.consumers.get_mut(&old.consumer) {
            c.pending.remove(&id);
        }
    }
    if let Some(c) = g.consumers.get_mut(consumer) {
        c.pending.insert(id);
    }
}

/// A consumer's own pending entries from `start`: each delivered again (its
/// count and time updated), a deleted entry as `[id, nil]`.
fn history(s: &mut Stream, group: &[u8], consumer: &[u8], start: StreamId, count: usize, now: u64) -> Vec<Reply> {
    let Some(g) = s.group_mut(group) else { return vec![] };
    let ids: Vec<StreamId> = g
        .consumers
        .get(consumer)
        .map(|c| c.pending.range(start..).take(count).copied().collect())
        .unwrap_or_default();
    for id in &ids {
        if let Some(p) = g.pending.get_mut(id) {
            p.delivered_at = now;
            p.deliveries += 1;
        }
    }
    ids.iter()
        .map(|&id| match s.get(id) {
            Some(e) => entry_reply(e),
            None => Reply::Array(vec![id_reply(id), Reply::NilArray]),
        })
        .collect()
}

/// Marks `consumer` of `group` seen now, creating it (with its event) if
/// new: true then.
fn touch_consumer(ctx: &mut Ctx, key: &[u8], group: &[u8], consumer: &Bytes, now: u64) -> bool {
    let Ok(Some(s)) = ctx.write_as(key, pick_mut) else {
        return false;
    };
    let Some(g) = s.group_mut(group) else { return false };
    match g.consumers.get_mut(consumer) {
        Some(c) => {
            c.seen_at = now;
            false
        }
        None => {
            g.consumers.insert(
                consumer.clone(),
                Consumer {
                    seen_at: now,
                    pending: Default::default(),
                },
            );
            ctx.notify(notify::STREAM, "xgroup-createconsumer", key);
            true
        }
    }
}

/// Serves a blocked XREAD from `key` ([`serve_read`]).
fn serve_read_plain(ctx: &mut Ctx, args: &[Bytes], key: &Bytes) -> Option<Reply> {
    serve_read(ctx, args, key, false)
}

/// Serves a blocked XREADGROUP from `key` ([`serve_read`]).
fn serve_read_group(ctx: &mut Ctx, args: &[Bytes], key: &Bytes) -> Option<Reply> {
    serve_read(ctx, args, key, true)
}

/// Serves a blocked XREAD / XREADGROUP (`group_cmd`) from `key` once it is
/// signalled (Redis's `serveClientBlockedOnKey` for streams).
fn serve_read(ctx: &mut Ctx, args: &[Bytes], key: &Bytes, group_cmd: bool) -> Option<Reply> {
    let read = parse_read(ctx, args, group_cmd).ok()?;
    let keys = &args[read.streams_at..read.streams_at + read.streams];
    let at = keys.iter().position(|k| k == key)?;
    let id = &args[read.streams_at + read.streams + at];
    let stream = ctx.write_as(key, pick_mut).ok().flatten();
    let from = if let Some((group, _)) = read.group {
        // Deleted, or another type now under the key.
        let Some(s) = stream else {
            return Some(err(errors::UNBLOCKED_STREAM_GONE));
        };
        if s.group(group).is_none() {
            return Some(err(errors::NOGROUP_DESTROYED));
        }
        From::New
    } else {
        // An XREAD waits through deletes and other types.
        stream?;
        From::After(parse_strict_id(id).ok()?)
    };
    let entries = read_key(ctx, key, from, &read, None)?;
    Some(Reply::KeyedPairs(vec![(Reply::Bulk(key.clone()), entries)]))
}

// ---- XGROUP --------------------------------------------------------------

/// Every XGROUP subcommand but HELP, in Redis's order of checks.
fn xgroup(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let sub = &args[1];
    let (key, name) = (&args[2], &args[3]);
    let mut mkstream = false;
    let mut entries_read: Option<u64> = None;
    let parse_entries_read = |arg: &[u8]| -> Result<Option<u64>, Reply> {
        match int(arg)? {
            -1 => Ok(None),
            n if n < 0 => Err(err(errors::ENTRIESREAD_NEGATIVE)),
            n => Ok(Some(n as u64)),
        }
    };
    if is(sub, "create") {
        let mut i = 5;
        while i < args.len() {
            if is(&args[i], "mkstream") {
                mkstream = true;
                i += 1;
            } else if is(&args[i], "entriesread") && i + 1 < args.len() {
                entries_read = tri!(parse_entries_read(&args[i + 1]));
                i += 2;
            } else {
                return errors::sub_wrong_args(sub, "XGROUP");
            }
        }
    } else if is(sub, "setid") {
        match args.len() {
            7 if is(&args[5], "entriesread") => entries_read = tri!(parse_entries_read(&args[6])),
            5 => {}
            _ => return errors::sub_wrong_args(sub, "XGROUP"),
        }
    }
    let exists = tri!(ctx.write_as(key, pick_mut)).is_some();
    let creates = is(sub, "create") && mkstream;
    if !exists && !creates {
        return err(errors::XGROUP_KEY_MISSING);
    }
    let group_exists = exists
        && ctx
            .write_as(key, pick_mut)
            .ok()
            .flatten()
            .is_some_and(|s| s.group(name).is_some());
    if !group_exists && (is(sub, "setid") || is(sub, "createconsumer") || is(sub, "delconsumer")) {
        return errors::nogroup_for_key(name, key);
    }
    let now = ctx.now;
    if is(sub, "create") && args.len() <= 8 {
        let last = ctx
            .write_as(key, pick_mut)
            .ok()
            .flatten()
            .map_or(StreamId::ZERO, |s| s.last_id);
        let id = match args[4].as_ref() {
            b"$" => last,
            other => tri!(parse_strict_id(other)),
        };
        let s = tri!(ctx.write_or_insert(key, pick_mut, || Value::Stream(Box::default())));
        if !s.add_group(name, Group::new(id, entries_read)) {
            return err(errors::BUSYGROUP);
        }
        ctx.dirty(1);
        ctx.replied();
        ctx.notify(notify::STREAM, "xgroup-create", key);
        return Reply::Ok;
    }
    let Ok(Some(s)) = ctx.write_as(key, pick_mut) else {
        return errors::sub_wrong_args(sub, "XGROUP");
    };
    if is(sub, "setid") {
        let id = match args[4].as_ref() {
            b"$" => s.last_id,
            other => tri!(parse_id(other, 0)),
        };
        let g = s.group_mut(name).expect("checked above");
        g.last_id = id;
        g.entries_read = entries_read;
        ctx.dirty(1);
        ctx.replied();
        ctx.notify(notify::STREAM, "xgroup-setid", key);
        Reply::Ok
    } else if is(sub, "destroy") {
        if !s.remove_group(name) {
            return Reply::Int(0);
        }
        ctx.dirty(1);
        ctx.replied();
        ctx.notify(notify::STREAM, "xgroup-destroy", key);
        // Readers blocked on the group get -NOGROUP.
        ctx.db().signal_ready(key);
        Reply::Int(1)
    } else if is(sub, "createconsumer") {
        let g = s.group_mut(name).expect("checked above");
        if g.consumers.contains_key(&args[4]) {
            return Reply::Int(0);
        }
        g.consumers.insert(
            args[4].clone(),
            Consumer {
                seen_at: now,
                pending: Default::default(),
            },
        );
        ctx.dirty(1);
        ctx.notify(notify::STREAM, "xgroup-createconsumer", key);
        Reply::Int(1)
    } else if is(sub, "delconsumer") {
        let g = s.group_mut(name).expect("checked above");
        let Some(c) = g.consumers.remove(&args[4]) else {
            return Reply::Int(0);
        };
        for id in &c.pending {
            g.pending.remove(id);
        }
        ctx.dirty(1);
        ctx.notify(notify::STREAM, "xgroup-delconsumer", key);
        Reply::Int(c.pending.len() as i64)
    } else {
        errors::sub_wrong_args(sub, "XGROUP")
    }
}

fn xgroup_help(_ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    super::server::help_reply(&[
        "XGROUP <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "CREATE <key> <groupname> <id|$> [option]",
        "    Create a new consumer group. Options are:",
        "    * MKSTREAM",
        "      Create the empty stream if it does not exist.",
        "    * ENTRIESREAD entries_read",
        "      Set the group's entries_read counter (internal use).",
        "CREATECONSUMER <key> <groupname> <consumer>",
        "    Create a new consumer in the specified group.",
        "DELCONSUMER <key> <groupname> <consumer>",
        "    Remove the specified consumer.",
        "DESTROY <key> <groupname>",
        "    Remove the specified group.",
        "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
        "    Set the current group ID and entries_read counter.",
    ])
}

// ---- XACK, XPENDING, XCLAIM, XAUTOCLAIM ----------------------------------

/// XACK key group id [id ...]
fn xack(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let has_group = tri!(ctx.read_as(&args[1], pick)).is_some_and(|s| s.group(&args[2]).is_some());
    if !has_group {
        return Reply::Int(0);
    }
    let mut ids = Vec::with_capacity(args.len() - 3);
    for arg in &args[3..] {
        ids.push(tri!(parse_strict_id(arg)));
    }
    let Ok(Some(s)) = ctx.write_as(&args[1], pick_mut) else {
        return Reply::Int(0);
    };
    let g = s.group_mut(&args[2]).expect("checked above");
    let mut acked = 0;
    for id in ids {
        if let Some(p) = g.pending.remove(&id) {
            if let Some(c) = g.consumers.get_mut(&p.consumer) {
                c.pending.remove(&id);
            }
            acked += 1;
        }
    }
    ctx.dirty(acked as u64);
    Reply::Int(acked)
}

/// XPENDING key group [[IDLE min-idle] start end count [consumer]]
fn xpending(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let argc = args.len();
    if argc != 3 && !(6..=9).contains(&argc) {
        return err(errors::SYNTAX);
    }
    let mut range = None;
    if argc >= 6 {
        let mut at = 3;
        let mut min_idle = 0i64;
        if is(&args[3], "idle") {
            min_idle = tri!(int(&args[4]));
            if argc < 8 {
                return err(errors::SYNTAX);
            }
            at += 2;
        }
        let count = tri!(int(&args[at + 2])).max(0) as usize;
        let start = tri!(parse_bound(&args[at], true));
        let end = tri!(parse_bound(&args[at + 1], false));
        let consumer = args.get(at + 3);
        range = Some((min_idle, start, end, count, consumer));
    }
    let (key, name) = (&args[1], &args[2]);
    let now = ctx.now;
    let Some(g) = tri!(ctx.read_as(key, pick)).and_then(|s| s.group(name)) else {
        return errors::nogroup_key(key, name);
    };
    let Some((min_idle, start, end, count, consumer)) = range else {
        let (Some((first, _)), Some((last, _))) = (g.pending.first_key_value(), g.pending.last_key_value()) else {
            return Reply::Array(vec![Reply::Int(0), Reply::Nil, Reply::Nil, Reply::NilArray]);
        };
        let holders = g
            .consumers
            .iter()
            .filter(|(_, c)| !c.pending.is_empty())
            .map(|(n, c)| {
                Reply::Array(vec![
                    Reply::Bulk(n.clone()),
                    Reply::Bulk(c.pending.len().to_string().into()),
                ])
            })
            .collect();
        return Reply::Array(vec![
            Reply::Int(g.pending.len() as i64),
            id_reply(*first),
            id_reply(*last),
            Reply::Array(holders),
        ]);
    };
    if start > end {
        return Reply::Array(vec![]);
    }
    let ids: Vec<StreamId> = match consumer {
        Some(name) => match g.consumers.get(name) {
            Some(c) => c.pending.range(start..=end).copied().collect(),
            None => return Reply::Array(vec![]),
        },
        None => g.pending.range(start..=end).map(|(id, _)| *id).collect(),
    };
    let mut out = vec![];
    for id in ids {
        if out.len() >= count {
            break;
        }
        let p = &g.pending[&id];
        let idle = now as i64 - p.delivered_at as i64;
        if min_idle != 0 && idle < min_idle {
            continue;
        }
        out.push(Reply::Array(vec![
            id_reply(id),
            Reply::Bulk(p.consumer.clone()),
            Reply::Int(idle.max(0)),
            Reply::Int(p.deliveries as i64),
        ]));
    }
    Reply::Array(out)
}

/// A claim's new holder and delivery (XCLAIM, XAUTOCLAIM).
struct Claim<'a> {
    consumer: &'a Bytes,
    now: u64,
    delivered_at: u64,
    /// The new delivery count, if it changes.
    deliveries: Option<u64>,
}

/// Moves pending `id` to the claiming consumer, which is seen now (and made
/// if new: true then).
fn claim(g: &mut Group, id: StreamId, to: &Claim) -> bool {
    let created = !g.consumers.contains_key(to.consumer);
    g.consumers.entry(to.consumer.clone()).or_default().seen_at = to.now;
    let Some(p) = g.pending.get_mut(&id) else {
        return created;
    };
    if p.consumer != *to.consumer {
        if let Some(old) = g.consumers.get_mut(&p.consumer) {
            old.pending.remove(&id);
        }
        p.consumer = to.consumer.clone();
    }
    p.delivered_at = to.delivered_at;
    if let Some(n) = to.deliveries {
        p.deliveries = n;
    }
    if let Some(c) = g.consumers.get_mut(to.consumer) {
        c.pending.insert(id);
    }
    created
}

/// The claimed entries (or their IDs, JUSTID), after a consumer made by the
/// claim is announced (and counted). (Group changes do not touch WATCH, as in Redis.)
/// Redis makes the consumer as it claims the first entry, when it has
/// written the reply's first `written` nodes (XCLAIM's `*n`; XAUTOCLAIM's
/// `*3`, cursor, `*n`).
fn claimed_replies(
    ctx: &mut Ctx,
    key: &Bytes,
    ids: &[StreamId],
    justid: bool,
    created: bool,
    written: usize,
) -> Vec<Reply> {
    if created {
        ctx.replied_up_to(written);
        ctx.dirty(1);
        ctx.notify(notify::STREAM, "xgroup-createconsumer", key);
    }
    let Ok(Some(s)) = ctx.write_as(key, pick_mut) else {
        return vec![];
    };
    ids.iter()
        .map(|&id| match (justid, s.get(id)) {
            (false, Some(e)) => entry_reply(e),
            _ => id_reply(id),
        })
        .collect()
}

/// Drops pending `id` (its entry is gone from the stream).
fn forget(g: &mut Group, id: StreamId) {
    if let Some(p) = g.pending.remove(&id) {
        if let Some(c) = g.consumers.get_mut(&p.consumer) {
            c.pending.remove(&id);
        }
    }
}

/// XCLAIM key group consumer min-idle-time id [id ...] [IDLE ms] [TIME unix-ms] [RETRYCOUNT n] [FORCE] [JUSTID] [LASTID id]
fn xclaim(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let (key, name, consumer) = (&args[1], &args[2], &args[3]);
    let has_group = tri!(ctx.read_as(key, pick)).is_some_and(|s| s.group(name).is_some());
    if !has_group {
        return errors::nogroup_key(key, name);
    }
    let min_idle = tri!(num::parse_i64(&args[4]).ok_or_else(|| err(errors::XCLAIM_MIN_IDLE))).max(0);
    let mut j = 5;
    let mut ids = vec![];
    while j < args.len() {
        match parse_strict_id(&args[j]) {
            Ok(id) => ids.push(id),
            Err(_) => break,
        }
        j += 1;
    }
    let now = ctx.now as i64;
    let (mut force, mut justid) = (false, false);
    let (mut delivered_at, mut retry_count) = (None::<i64>, None::<i64>);
    let mut last_id = StreamId::ZERO;
    while j < args.len() {
        let more = j + 1 < args.len();
        let opt = &args[j];
        let number = |arg: &[u8], text: &'static str| num::parse_i64(arg).ok_or_else(|| err(text));
        if is(opt, "force") {
            force = true;
        } else if is(opt, "justid") {
            justid = true;
        } else if is(opt, "idle") && more {
            j += 1;
            delivered_at = Some(now - tri!(number(&args[j], errors::XCLAIM_IDLE)));
        } else if is(opt, "time") && more {
            j += 1;
            delivered_at = Some(tri!(number(&args[j], errors::XCLAIM_TIME)));
        } else if is(opt, "retrycount") && more {
            j += 1;
            retry_count = Some(tri!(number(&args[j], errors::XCLAIM_RETRYCOUNT)));
        } else if is(opt, "lastid") && more {
            j += 1;
            last_id = tri!(parse_strict_id(&args[j]));
        } else {
            return errors::xclaim_option(opt);
        }
        j += 1;
    }
    let delivered_at = match delivered_at {
        Some(t) if (0..=now).contains(&t) => t as u64,
        _ => now as u64,
    };
    let propagating = ctx.propagating();
    let Ok(Some(s)) = ctx.write_as(key, pick_mut) else {
        return Reply::Array(vec![]);
    };
    let mut created = false;
    let mut out = vec![];
    // Each change is replayed as an XCLAIM naming the ID as given; a LASTID
    // that moved the group, with nothing claimed to carry it, as XGROUP SETID.
    let mut effects = vec![];
    let mut changes = 0u64;
    {
        let exists: Vec<bool> = ids.iter().map(|&id| s.get(id).is_some()).collect();
        let g = s.group_mut(name).expect("checked above");
        let mut moved = false;
        if last_id > g.last_id {
            g.last_id = last_id;
            moved = true;
        }
        for ((&id, exists), id_arg) in ids.iter().zip(exists).zip(&args[5..]) {
            if !exists {
                if let Some(p) = g.pending.get(&id) {
                    if propagating {
                        effects.push(xclaim_effect(key, name, id_arg.clone(), p, g.last_id));
                    }
                    changes += 1;
                    moved = false;
                }
                forget(g, id);
                continue;
            }
            // A FORCE-made entry has no holder yet and ignores the idle time.
            let made = force && !g.pending.contains_key(&id);
            if made {
                g.pending.insert(
                    id,
                    Pending {
                        consumer: consumer.clone(),
                        delivered_at: now as u64,
                        deliveries: 1,
                    },
                );
            }
            let Some(p) = g.pending.get(&id) else { continue };
            if !made && min_idle != 0 && (now - p.delivered_at as i64) < min_idle {
                continue;
            }
            let deliveries = match retry_count {
                Some(n) if n >= 0 => Some(n as u64),
                _ if !justid => Some(p.deliveries + 1),
                _ => None,
            };
            let to = Claim {
                consumer,
                now: now as u64,
                delivered_at,
                deliveries,
            };
            created |= claim(g, id, &to);
            out.push(id);
            if propagating {
                effects.push(xclaim_effect(key, name, id_arg.clone(), &g.pending[&id], g.last_id));
            }
            changes += 1;
            moved = false;
        }
        if moved {
            if propagating {
                effects.push(setid_effect(key, name, g));
            }
            changes += 1;
        }
    }
    ctx.dirty(changes);
    ctx.prevent_propagation();
    for effect in effects {
        ctx.also_propagate(|| effect);
    }
    Reply::Array(claimed_replies(ctx, key, &out, justid, created, 1))
}

/// XAUTOCLAIM key group consumer min-idle-time start [COUNT count] [JUSTID]
fn xautoclaim(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let (key, name, consumer) = (&args[1], &args[2], &args[3]);
    let min_idle = tri!(num::parse_i64(&args[4]).ok_or_else(|| err(errors::XAUTOCLAIM_MIN_IDLE))).max(0);
    let start = tri!(parse_bound(&args[5], true));
    let (mut count, mut justid) = (100i64, false);
    let mut j = 6;
    while j < args.len() {
        if is(&args[j], "count") && j + 1 < args.len() {
            let max = i64::MAX / (std::mem::size_of::<StreamId>() as i64).max(AUTOCLAIM_ATTEMPTS_FACTOR);
            count = match num::parse_i64(&args[j + 1]) {
                Some(n) if (1..=max).contains(&n) => n,
                _ => return err(errors::XAUTOCLAIM_COUNT),
            };
            j += 1;
        } else if is(&args[j], "justid") {
            justid = true;
        } else {
            return err(errors::SYNTAX);
        }
        j += 1;
    }
    let has_group = tri!(ctx.read_as(key, pick)).is_some_and(|s| s.group(name).is_some());
    if !has_group {
        return errors::nogroup_key(key, name);
    }
    let now = ctx.now;
    let propagating = ctx.propagating();
    let Ok(Some(s)) = ctx.write_as(key, pick_mut) else {
        return Reply::Array(vec![]);
    };
    let pending: Vec<StreamId> = s
        .group(name)
        .map(|g| g.pending.range(start..).map(|(id, _)| *id).collect())
        .unwrap_or_default();
    let exists: Vec<bool> = pending.iter().map(|&id| s.get(id).is_some()).collect();
    let g = s.group_mut(name).expect("checked above");
    let mut attempts = count * AUTOCLAIM_ATTEMPTS_FACTOR;
    let (mut claimed, mut deleted) = (vec![], vec![]);
    let mut created = false;
    let mut next = 0;
    // Each claim and each dropped entry is a change, replayed as an XCLAIM.
    let mut effects = vec![];
    let mut changes = 0u64;
    while attempts > 0 && count > 0 && next < pending.len() {
        attempts -= 1;
        let id = pending[next];
        next += 1;
        if !exists[next - 1] {
            if propagating {
                effects.push(xclaim_effect(key, name, id.to_bytes(), &g.pending[&id], g.last_id));
            }
            changes += 1;
            forget(g, id);
            deleted.push(id);
            count -= 1;
            continue;
        }
        let p = &g.pending[&id];
        if min_idle != 0 && (now as i64 - p.delivered_at as i64) < min_idle {
            continue;
        }
        let deliveries = (!justid).then_some(p.deliveries + 1);
        let to = Claim {
            consumer,
            now,
            delivered_at: now,
            deliveries,
        };
        created |= claim(g, id, &to);
        claimed.push(id);
        if propagating {
            effects.push(xclaim_effect(key, name, id.to_bytes(), &g.pending[&id], g.last_id));
        }
        changes += 1;
        count -= 1;
    }
    ctx.dirty(changes);
    ctx.prevent_propagation();
    for effect in effects {
        ctx.also_propagate(|| effect);
    }
    let cursor = pending.get(next).copied().unwrap_or(StreamId::ZERO);
    let claimed = claimed_replies(ctx, key, &claimed, justid, created, 3);
    Reply::Array(vec![
        id_reply(cursor),
        Reply::Array(claimed),
        Reply::Array(deleted.into_iter().map(id_reply).collect()),
    ])
}

// ---- XINFO ---------------------------------------------------------------

fn field(name: &'static str, value: Reply) -> (Reply, Reply) {
    (Reply::Bulk(Bytes::from_static(name.as_bytes())), value)
}

/// The stream's own fields, the start of both forms of XINFO STREAM.
fn stream_fields(s: &Stream) -> Vec<(Reply, Reply)> {
    vec![
        field("length", Reply::Int(s.len() as i64)),
        field("radix-tree-keys", Reply::Int(s.nodes() as i64)),
        field("radix-tree-nodes", Reply::Int(radix_tree_nodes(s))),
        field("last-generated-id", id_reply(s.last_id)),
        field("max-deleted-entry-id", id_reply(s.max_deleted)),
        field("entries-added", Reply::Int(s.entries_added as i64)),
        field("recorded-first-entry-id", id_reply(s.first_id)),
    ]
}

/// Redis's radix tree node count, which depends on its internal layout:
/// estimated as one node per key plus the inner nodes a tree of 128-bit
/// keys sharing their leading bytes needs (see README's known differences).
fn radix_tree_nodes(s: &Stream) -> i64 {
    match s.nodes() {
        0 => 1,
        n => 2 * n as i64,
    }
}

fn lag_reply(s: &Stream, g: &Group) -> Reply {
    s.lag(g).map_or(Reply::Nil, |n| Reply::Int(n as i64))
}

fn entries_read_reply(g: &Group) -> Reply {
    g.entries_read.map_or(Reply::Nil, |n| Reply::Int(n as i64))
}

/// XINFO STREAM key [FULL [COUNT count]]
fn xinfo_stream(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let Some(s) = tri!(ctx.read_as(&args[2], pick)) else {
        return err(errors::NO_SUCH_KEY);
    };
    let opts = &args[3..];
    let full = !opts.is_empty();
    let mut count = 10usize;
    if full {
        if (opts.len() != 1 && opts.len() != 3) || !is(&opts[0], "full") || (opts.len() == 3 && !is(&opts[1], "count"))
        {
            return errors::sub_wrong_args(&args[1], "XINFO");
        }
        if opts.len() == 3 {
            count = match tri!(int(&opts[2])) {
                n if n < 0 => 10,
                0 => usize::MAX,
                n => n as usize,
            };
        }
    }
    let mut out = stream_fields(s);
    if !full {
        out.push(field("groups", Reply::Int(s.group_count() as i64)));
        out.push(field("first-entry", s.iter().next().map_or(Reply::Nil, entry_reply)));
        out.push(field(
            "last-entry",
            s.iter().next_back().map_or(Reply::Nil, entry_reply),
        ));
        return Reply::Map(out);
    }
    out.push(field(
        "entries",
        Reply::Array(s.iter().take(count).map(entry_reply).collect()),
    ));
    let groups = s
        .groups()
        .map(|(name, g)| {
            let pending = g
                .pending
                .iter()
                .take(count)
                .map(|(id, p)| {
                    Reply::Array(vec![
                        id_reply(*id),
                        Reply::Bulk(p.consumer.clone()),
                        Reply::Int(p.delivered_at as i64),
                        Reply::Int(p.deliveries as i64),
                    ])
                })
                .collect();
            let consumers = g
                .consumers
                .iter()
                .map(|(cname, c)| {
                    let pending = c
                        .pending
                        .iter()
                        .take(count)
                        .map(|id| {
                            let p = &g.pending[id];
                            Reply::Array(vec![
                                id_reply(*id),
                                Reply::Int(p.delivered_at as i64),
                                Reply::Int(p.deliveries as i64),
                            ])
                        })
                        .collect();
                    Reply::Map(vec![
                        field("name", Reply::Bulk(cname.clone())),
                        field("seen-time", Reply::Int(c.seen_at as i64)),
                        field("pel-count", Reply::Int(c.pending.len() as i64)),
                        field("pending", Reply::Array(pending)),
                    ])
                })
                .collect();
            Reply::Map(vec![
                field("name", Reply::Bulk(name.clone())),
                field("last-delivered-id", id_reply(g.last_id)),
                field("entries-read", entries_read_reply(g)),
                field("lag", lag_reply(s, g)),
                field("pel-count", Reply::Int(g.pending.len() as i64)),
                field("pending", Reply::Array(pending)),
                field("consumers", Reply::Array(consumers)),
            ])
        })
        .collect();
    out.push(field("groups", Reply::Array(groups)));
    Reply::Map(out)
}

/// XINFO GROUPS key
fn xinfo_groups(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let Some(s) = tri!(ctx.read_as(&args[2], pick)) else {
        return err(errors::NO_SUCH_KEY);
    };
    let groups = s
        .groups()
        .map(|(name, g)| {
            Reply::Map(vec![
                field("name", Reply::Bulk(name.clone())),
                field("consumers", Reply::Int(g.consumers.len() as i64)),
                field("pending", Reply::Int(g.pending.len() as i64)),
                field("last-delivered-id", id_reply(g.last_id)),
                field("entries-read", entries_read_reply(g)),
                field("lag", lag_reply(s, g)),
            ])
        })
        .collect();
    Reply::Array(groups)
}

/// XINFO CONSUMERS key group
fn xinfo_consumers(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let now = ctx.now;
    let Some(s) = tri!(ctx.read_as(&args[2], pick)) else {
        return err(errors::NO_SUCH_KEY);
    };
    let Some(g) = s.group(&args[3]) else {
        return errors::nogroup_for_key(&args[3], &args[2]);
    };
    let consumers = g
        .consumers
        .iter()
        .map(|(name, c)| {
            Reply::Map(vec![
                field("name", Reply::Bulk(name.clone())),
                field("pending", Reply::Int(c.pending.len() as i64)),
                field("idle", Reply::Int((now as i64 - c.seen_at as i64).max(0))),
            ])
        })
        .collect();
    Reply::Array(consumers)
}

fn xinfo_help(_ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    super::server::help_reply(&[
        "XINFO <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "CONSUMERS <key> <groupname>",
        "    Show consumers of <groupname>.",
        "GROUPS <key>",
        "    Show the stream consumer groups.",
        "STREAM <key> [FULL [COUNT <count>]",
        "    Show information about the stream.",
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_parse_as_redis_reads_them() {
        let id = |s: &str| parse_id_form(s.as_bytes(), 7, IdForm::Add).map(|(id, given)| (id.ms, id.seq, given));
        assert_eq!(id("5-3").ok(), Some((5, 3, true)));
        assert_eq!(id("5").ok(), Some((5, 7, true)));
        assert_eq!(id("5-*").ok(), Some((5, 0, false)));
        assert_eq!(id("+5-+2").ok(), Some((5, 2, true)));
        assert_eq!(id(" 7-1").ok(), Some((7, 1, true)));
        assert_eq!(
            id("18446744073709551615-18446744073709551615").ok(),
            Some((u64::MAX, u64::MAX, true))
        );
        for bad in ["-", "+", "", "a-1", "1-a", "-1", "1--1", "18446744073709551616", "1-*-"] {
            assert!(id(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_id(b"-", 0).ok(), Some(StreamId::ZERO));
        assert_eq!(parse_id(b"+", 0).ok(), Some(StreamId::MAX));
        assert!(parse_bound(b"(18446744073709551615-18446744073709551615", true).is_err());
        assert_eq!(parse_bound(b"(1-1", true).ok(), Some(StreamId::new(1, 2)));
        assert_eq!(parse_bound(b"(1", false).ok(), Some(StreamId::new(1, u64::MAX - 1)));
        assert!(parse_bound(b"(-", true).is_err());
    }
}
