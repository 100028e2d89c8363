//! Bitmaps: SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP, BITFIELD, BITFIELD_RO.
//!
//! Bitmaps are strings, read and written bit by bit from the most
//! significant bit of the first byte, as Redis's `bitops.c` does; a write
//! past the end grows the string with zero bytes (up to
//! `proto-max-bulk-len`), and BITFIELD's overflow rules (WRAP, SAT, FAIL)
//! are ported from Redis's.
//!
//! The writes count their changes as `bitops.c` does, and their own
//! arguments are their effects: SETBIT when it created or grew the string or
//! flipped the bit, BITFIELD once per write that created or grew the string
//! or changed its field (when FAIL refused every write, the string it created
//! or grew counts nothing, as in Redis), BITOP when it stored or deleted its
//! target.

use bytes::Bytes;

use super::args::{int, is};
use super::flags::*;
use super::{acl, CommandSpec, Ctx};
use crate::errors::{self, err};
use crate::notify;
use crate::protocol::Reply;
use crate::store::{num, StrEncoding, Value};
use crate::tri;

macro_rules! spec {
    ($($row:tt)*) => { command!("bitmap", $($row)*) };
}

#[rustfmt::skip]
pub(crate) static COMMANDS: &[CommandSpec] = &[
    spec!("setbit", 4, WRITE | DENYOOM, acl::BITMAP, "Sets or clears the bit at offset in the string value stored at key", setbit),
    spec!("getbit", 3, READONLY | FAST, acl::BITMAP, "Returns the bit value at offset in the string value stored at key", getbit),
    spec!("bitcount", -2, READONLY, acl::BITMAP, "Count set bits in a string", bitcount),
    spec!("bitpos", -3, READONLY, acl::BITMAP, "Find first bit set or clear in a string", bitpos),
    spec!("bitop", -4, WRITE | DENYOOM, acl::BITMAP, "Perform bitwise operations between strings", bitop),
    spec!("bitfield", -2, WRITE | DENYOOM, acl::BITMAP, "Perform arbitrary bitfield integer operations on strings", bitfield).keys_by(super::keyspecs::bitfield_keys),
    spec!("bitfield_ro", -2, READONLY | FAST, acl::BITMAP, "Perform arbitrary bitfield integer operations on strings. Read-only variant of BITFIELD", bitfield_ro),
];

/// A bit offset as Redis's `getBitOffsetFromArgument` reads it (`#N` in
/// BITFIELD means N times the field's width): within the string size limit.
fn bit_offset(ctx: &Ctx, arg: &[u8], width: Option<u32>) -> Result<u64, Reply> {
    let (digits, scale) = match (arg.strip_prefix(b"#"), width) {
        (Some(rest), Some(bits)) => (rest, bits as i64),
        _ => (arg, 1),
    };
    let limit = ctx.server.config.proto_max_bulk_len as i64;
    // From the primary or the append-only file only the sign is checked
    // (its server allowed the size), as Redis's.
    let obey = ctx.must_obey();
    match num::parse_i64(digits).and_then(|n| n.checked_mul(scale)) {
        Some(n) if n >= 0 && (obey || (n >> 3) < limit) => Ok(n as u64),
        _ => Err(err(errors::BIT_OFFSET)),
    }
}

/// Writes `bytes` as the value of `key`, keeping its TTL.
fn store(ctx: &mut Ctx, key: &[u8], bytes: Vec<u8>, existed: bool) {
    if existed {
        if !ctx.db().overwrite_str(key, &bytes) {
            ctx.db().replace_value(key, Value::Str(Bytes::from(bytes)));
        }
    } else {
        ctx.db().insert(key, Value::Str(Bytes::from(bytes)), 0);
    }
    ctx.db().set_str_encoding(key, StrEncoding::Raw);
}

fn get_bit(bytes: &[u8], offset: u64) -> u8 {
    bytes
        .get((offset >> 3) as usize)
        .map_or(0, |b| (b >> (7 - (offset & 7))) & 1)
}

/// Set bits in `[first, last]`, whole bytes at a time in the middle.
fn count_bits(bytes: &[u8], first: u64, last: u64) -> u64 {
    let mut count = 0;
    let mut i = first;
    while i <= last {
        if i & 7 == 0 && i + 7 <= last {
            count += bytes[(i >> 3) as usize].count_ones() as u64;
            i += 8;
        } else {
            count += get_bit(bytes, i) as u64;
            i += 1;
        }
    }
    count
}

/// The first bit equal to `target` in `[first, last]`, skipping whole
/// bytes that cannot hold it.
fn find_bit(bytes: &[u8], first: u64, last: u64, target: u8) -> Option<u64> {
    let skip = if target == 1 { 0x00 } else { 0xff };
    let mut i = first;
    while i <= last {
        if i & 7 == 0 && i + 7 <= last && bytes[(i >> 3) as usize] == skip {
            i += 8;
            continue;
        }
        if get_bit(bytes, i) == target {
            return Some(i);
        }
        i += 1;
    }
    None
}

fn setbit(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let offset = tri!(bit_offset(ctx, &args[2], None));
    let on = match args[3].as_ref() {
        b"1" => true,
        b"0" => false,
        _ => return err(errors::BIT_VALUE),
    };
    let key = &args[1];
    let current = tri!(ctx.get_str_for_write(key));
    let existed = current.is_some();
    let mut bytes = current.map(|b| b.to_vec()).unwrap_or_default();
    let byte = (offset >> 3) as usize;
    // Created or grown: a change whatever the bit was.
    let grown = !existed || bytes.len() <= byte;
    if bytes.len() <= byte {
        bytes.resize(byte + 1, 0);
    }
    let mask = 1u8 << (7 - (offset & 7));
    let old = bytes[byte] & mask != 0;
    if !grown && old == on {
        // Unchanged, yet Redis has made the string its own (`raw`).
        ctx.db().set_str_encoding(key, StrEncoding::Raw);
        return Reply::Int(old as i64);
    }
    if on {
        bytes[byte] |= mask;
    } else {
        bytes[byte] &= !mask;
    }
    store(ctx, key, bytes, existed);
    ctx.dirty(1);
    ctx.notify(notify::STRING, "setbit", key);
    Reply::Int(old as i64)
}

fn getbit(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let offset = tri!(bit_offset(ctx, &args[2], None));
    let bytes = tri!(ctx.get_str(&args[1]));
    Reply::Int(bytes.map_or(0, |b| get_bit(&b, offset)) as i64)
}

/// A `start end [BYTE|BIT]` range over `len` bytes, as Redis resolves it:
/// the bit range `[first, last]` to look at, or `None` when empty.
fn bit_range(len: usize, start: i64, end: i64, bits: bool) -> Option<(u64, u64)> {
    let total = if bits { len as i64 * 8 } else { len as i64 };
    let fix = |i: i64| if i < 0 { (total + i).max(0) } else { i };
    let (start, end) = (fix(start), fix(end).min(total - 1));
    if start > end || total == 0 {
        return None;
    }
    if bits {
        Some((start as u64, end as u64))
    } else {
        Some((start as u64 * 8, end as u64 * 8 + 7))
    }
}

/// The optional `start end [BYTE|BIT]` of BITCOUNT and BITPOS, from `at`.
struct RangeArgs {
    start: i64,
    end: Option<i64>,
    bits: bool,
}

fn range_args(args: &[Bytes], at: usize) -> Result<RangeArgs, Reply> {
    let mut r = RangeArgs {
        start: 0,
        end: None,
        bits: false,
    };
    if args.len() > at {
        r.start = int(&args[at])?;
    }
    if args.len() > at + 1 {
        r.end = Some(int(&args[at + 1])?);
    }
    if args.len() > at + 2 {
        if args.len() > at + 3 {
            return Err(err(errors::SYNTAX));
        }
        r.bits = if is(&args[at + 2], "bit") {
            true
        } else if is(&args[at + 2], "byte") {
            false
        } else {
            return Err(err(errors::SYNTAX));
        };
    }
    Ok(r)
}

/// BITCOUNT key [start end [BYTE|BIT]]: the key is looked up (0 when
/// absent, WRONGTYPE) before the range is read, as in Redis 7.0.
fn bitcount(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let Some(bytes) = tri!(ctx.get_str(&args[1])) else {
        return Reply::Int(0);
    };
    if !matches!(args.len(), 2 | 4 | 5) {
        return err(errors::SYNTAX);
    }
    // Two negative indexes out of order count nothing, answered before the
    // unit is read (Redis 7.0.15: `BITCOUNT k -6 -7 foo` is 0, no error).
    if args.len() > 3 {
        let (start, end) = (tri!(int(&args[2])), tri!(int(&args[3])));
        if start < 0 && end < 0 && start > end {
            return Reply::Int(0);
        }
    }
    let r = tri!(range_args(args, 2));
    let (first, last) = match bit_range(bytes.len(), r.start, r.end.unwrap_or(-1), r.bits) {
        Some(range) => range,
        None => return Reply::Int(0),
    };
    Reply::Int(count_bits(&bytes, first, last) as i64)
}

fn bitpos(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let target = match args[2].as_ref() {
        b"1" => 1,
        b"0" => 0,
        _ if num::parse_i64(&args[2]).is_none() => return err(errors::NOT_INTEGER),
        _ => return err(errors::BIT_ARGUMENT),
    };
    // The bit first, then the key (absent: no range read), then the range.
    let Some(bytes) = tri!(ctx.get_str(&args[1])) else {
        return Reply::Int(if target == 1 { -1 } else { 0 });
    };
    let r = tri!(range_args(args, 3));
    let Some((first, last)) = bit_range(bytes.len(), r.start, r.end.unwrap_or(-1), r.bits) else {
        return Reply::Int(-1);
    };
    match find_bit(&bytes, first, last, target) {
        Some(i) => Reply::Int(i as i64),
        // Looking for a clear bit with no end given: the string is taken as
        // padded with zeros, so the first clear bit is just past it.
        None if target == 0 && r.end.is_none() => Reply::Int(last as i64 + 1),
        None => Reply::Int(-1),
    }
}

fn bitop(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let op = args[1].to_ascii_lowercase();
    if !matches!(op.as_slice(), b"and" | b"or" | b"xor" | b"not") {
        return err(errors::SYNTAX);
    }
    if op == b"not" && args.len() != 4 {
        return err(errors::BITOP_NOT_ONE_SOURCE);
    }
    let mut sources = Vec::with_capacity(args.len() - 3);
    for key in &args[3..] {
        sources.push(tri!(ctx.get_str(key)).unwrap_or_default());
    }
    let len = sources.iter().map(Bytes::len).max().unwrap_or(0);
    let at = |s: &Bytes, i: usize| s.get(i).copied().unwrap_or(0);
    let result: Vec<u8> = (0..len)
        .map(|i| match op.as_slice() {
            b"not" => !at(&sources[0], i),
            b"and" => sources.iter().fold(0xff, |acc, s| acc & at(s, i)),
            b"or" => sources.iter().fold(0, |acc, s| acc | at(s, i)),
            _ => sources.iter().fold(0, |acc, s| acc ^ at(s, i)),
        })
        .collect();
    let dst = &args[2];
    if result.is_empty() {
        if ctx.db().server_del(dst) {
            ctx.dirty(1);
            ctx.notify(notify::GENERIC, "del", dst);
        }
        return Reply::Int(0);
    }
    ctx.db().insert(dst, Value::Str(Bytes::from(result)), 0);
    ctx.db().set_str_encoding(dst, StrEncoding::Raw);
    ctx.dirty(1);
    ctx.notify(notify::STRING, "set", dst);
    Reply::Int(len as i64)
}

/// What BITFIELD does when a value does not fit its field.
#[derive(Clone, Copy, PartialEq)]
enum Overflow {
    Wrap,
    Sat,
    Fail,
}

/// One BITFIELD operation.
enum Op {
    Get,
    Set(i64),
    IncrBy(i64),
}

struct FieldOp {
    op: Op,
    signed: bool,
    bits: u32,
    offset: u64,
    overflow: Overflow,
}

/// `i1`..`i64` or `u1`..`u63`.
fn field_type(arg: &[u8]) -> Result<(bool, u32), Reply> {
    let signed = match arg.first() {
        Some(b'i' | b'I') => true,
        Some(b'u' | b'U') => false,
        _ => return Err(err(errors::BITFIELD_TYPE)),
    };
    match num::parse_i64(&arg[1..]) {
        Some(bits) if bits >= 1 && (signed && bits <= 64 || !signed && bits <= 63) => Ok((signed, bits as u32)),
        _ => Err(err(errors::BITFIELD_TYPE)),
    }
}

fn parse_ops(ctx: &Ctx, args: &[Bytes], read_only: bool) -> Result<Vec<FieldOp>, Reply> {
    let mut ops = vec![];
    let mut overflow = Overflow::Wrap;
    let mut i = 2;
    while i < args.len() {
        let left = args.len() - i - 1;
        let word = &args[i];
        if is(word, "overflow") && left >= 1 {
            overflow = if is(&args[i + 1], "wrap") {
                Overflow::Wrap
            } else if is(&args[i + 1], "sat") {
                Overflow::Sat
            } else if is(&args[i + 1], "fail") {
                Overflow::Fail
            } else {
                return Err(err(errors::BITFIELD_OVERFLOW));
            };
            i += 2;
            continue;
        }
        let arity = if is(word, "get") {
            2
        } else if is(word, "set") || is(word, "incrby") {
            3
        } else {
            return Err(err(errors::SYNTAX));
        };
        if left < arity {
            return Err(err(errors::SYNTAX));
        }
        let (signed, bits) = field_type(&args[i + 1])?;
        let offset = bit_offset(ctx, &args[i + 2], Some(bits))?;
        let op = if arity == 2 {
            Op::Get
        } else {
            let n = int(&args[i + 3])?;
            if is(word, "set") {
                Op::Set(n)
            } else {
                Op::IncrBy(n)
            }
        };
        ops.push(FieldOp {
            op,
            signed,
            bits,
            offset,
            overflow,
        });
        i += 1 + arity;
    }
    // Refused only once every operation parsed, as Redis does.
    if read_only && ops.iter().any(|o| !matches!(o.op, Op::Get)) {
        return Err(err(errors::BITFIELD_RO_ONLY_GET));
    }
    Ok(ops)
}

fn get_field(bytes: &[u8], offset: u64, bits: u32) -> u64 {
    (0..bits as u64).fold(0u64, |acc, i| (acc << 1) | get_bit(bytes, offset + i) as u64)
}

fn set_field(bytes: &mut [u8], offset: u64, bits: u32, value: u64) {
    for i in 0..bits as u64 {
        let bit = (value >> (bits as u64 - 1 - i)) & 1;
        let pos = offset + i;
        let mask = 1u8 << (7 - (pos & 7));
        let byte = &mut bytes[(pos >> 3) as usize];
        if bit == 1 {
            *byte |= mask;
        } else {
            *byte &= !mask;
        }
    }
}

fn sign_extend(value: u64, bits: u32) -> i64 {
    if bits == 64 {
        value as i64
    } else {
        let shift = 64 - bits;
        ((value << shift) as i64) >> shift
    }
}

/// Redis's `checkUnsignedBitfieldOverflow`: `Some(value)` to store (WRAP
/// and SAT), `None` when FAIL refuses; the value itself when it fits.
fn unsigned_result(value: u64, incr: i64, bits: u32, overflow: Overflow) -> Option<u64> {
    let max: u64 = if bits == 64 { u64::MAX } else { (1u64 << bits) - 1 };
    let maxincr = max.wrapping_sub(value) as i64;
    let minincr = (value as i64).wrapping_neg();
    let wrap = || Some(value.wrapping_add(incr as u64) & max);
    if value > max || (incr > 0 && incr > maxincr) {
        match overflow {
            Overflow::Wrap => wrap(),
            Overflow::Sat => Some(max),
            Overflow::Fail => None,
        }
    } else if incr < 0 && incr < minincr {
        match overflow {
            Overflow::Wrap => wrap(),
            Overflow::Sat => Some(0),
            Overflow::Fail => None,
        }
    } else {
        Some(value.wrapping_add(incr as u64))
    }
}

/// Redis's `checkSignedBitfieldOverflow`, in the same shape.
fn signed_result(value: i64, incr: i64, bits: u32, overflow: Overflow) -> Option<i64> {
    let max: i64 = if bits == 64 { i64::MAX } else { (1i64 << (bits - 1)) - 1 };
    let min = -max - 1;
    let maxincr = max.wrapping_sub(value);
    let minincr = min.wrapping_sub(value);
    let wrap = || {
        let c = (value as u64).wrapping_add(incr as u64);
        Some(sign_extend(c, bits))
    };
    if value > max || (bits != 64 && incr > maxincr) || (value >= 0 && incr > 0 && incr > maxincr) {
        match overflow {
            Overflow::Wrap => wrap(),
            Overflow::Sat => Some(max),
            Overflow::Fail => None,
        }
    } else if value < min || (bits != 64 && incr < minincr) || (value < 0 && incr < 0 && incr < minincr) {
        match overflow {
            Overflow::Wrap => wrap(),
            Overflow::Sat => Some(min),
            Overflow::Fail => None,
        }
    } else {
        Some(value.wrapping_add(incr))
    }
}

fn bitfield(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    bitfield_generic(ctx, args, false)
}

fn bitfield_ro(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    bitfield_generic(ctx, args, true)
}

fn bitfield_generic(ctx: &mut Ctx, args: &[Bytes], read_only: bool) -> Reply {
    let ops = tri!(parse_ops(ctx, args, read_only));
    let key = &args[1];
    let writes = ops.iter().any(|o| !matches!(o.op, Op::Get));
    let current = if writes {
        tri!(ctx.get_str_for_write(key))
    } else {
        tri!(ctx.get_str(key))
    };
    let existed = current.is_some();
    let mut bytes = current.map(|b| b.to_vec()).unwrap_or_default();
    // Created or grown: every write counts as a change (Redis's `dirty`
    // from `lookupStringForBitCommand`).
    let mut grown = writes && !existed;
    if writes {
        // Redis grows the string to the furthest field written, once, first.
        let needed = ops
            .iter()
            .filter(|o| !matches!(o.op, Op::Get))
            .map(|o| ((o.offset + o.bits as u64 - 1) >> 3) as usize + 1)
            .max()
            .unwrap_or(0);
        if bytes.len() < needed {
            bytes.resize(needed, 0);
            grown = true;
        }
    }
    let mut replies = Vec::with_capacity(ops.len());
    // Writes that created or grew the string or changed their field.
    let mut changes = 0;
    for o in &ops {
        let raw = get_field(&bytes, o.offset, o.bits);
        let (incr, old_reply) = match o.op {
            Op::Get => {
                replies.push(Reply::Int(if o.signed { sign_extend(raw, o.bits) } else { raw as i64 }));
                continue;
            }
            Op::Set(v) => (v, true),
            Op::IncrBy(n) => (n, false),
        };
        let stored = if o.signed {
            let old = sign_extend(raw, o.bits);
            let new = match o.op {
                Op::Set(v) => signed_result(v, 0, o.bits, o.overflow),
                _ => signed_result(old, incr, o.bits, o.overflow),
            };
            new.map(|n| (n as u64, if old_reply { old } else { n }))
        } else {
            let new = match o.op {
                Op::Set(v) => unsigned_result(v as u64, 0, o.bits, o.overflow),
                _ => unsigned_result(raw, incr, o.bits, o.overflow),
            };
            new.map(|n| (n, if old_reply { raw as i64 } else { n as i64 }))
        };
        match stored {
            Some((value, reply)) => {
                // Compared as stored (the field's bits), as Redis compares
                // the old and new values of the field.
                let width_mask = if o.bits == 64 { u64::MAX } else { (1u64 << o.bits) - 1 };
                if grown || raw != value & width_mask {
                    changes += 1;
                }
                set_field(&mut bytes, o.offset, o.bits, value);
                replies.push(Reply::Int(reply));
            }
            None => replies.push(Reply::Nil),
        }
    }
    if writes {
        // Stored even when FAIL refused every write: Redis has created or
        // grown the string already.
        store(ctx, key, bytes, existed);
        if changes > 0 {
            ctx.dirty(changes);
            // Redis replies, then announces the change.
            ctx.replied();
            ctx.notify(notify::STRING, "setbit", key);
        }
    }
    Reply::Array(replies)
}
