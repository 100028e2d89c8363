//! SORT and SORT_RO over lists, sets and sorted sets: BY (with `nosort`
//! and `key->field` hash lookups), LIMIT, GET (`#` and patterns), ASC/DESC,
//! ALPHA, and STORE (a list) for SORT. BY a constant leaves a list or a
//! sorted set in its own order, reversed by DESC, as Redis's.
//!
//! Scores are read as Redis reads them (C's `strtod`, whole argument);
//! equal scores fall back to comparing the elements, as Redis does, so the
//! result is deterministic wherever Redis's is. A set sorted BY a constant
//! pattern with STORE, or from a script, is sorted ALPHA instead, as Redis
//! does, so that the command replayed elsewhere stores the same list.
//!
//! SORT ... STORE counts one change per element stored (or one for the
//! destination it deletes), as Redis does; its effect is its arguments.

use std::cmp::Ordering;

use bytes::Bytes;

use super::args::{int, is};
use super::flags::*;
use super::{acl, CommandSpec, Ctx};
use crate::errors::{self, err};
use crate::notify;
use crate::protocol::Reply;
use crate::store::list::{End, List};
use crate::store::{num, Value, ValueMut, ValueRef};
use crate::tri;

macro_rules! spec {
    ($($row:tt)*) => { command!("generic", $($row)*) };
}

#[rustfmt::skip]
pub(crate) static COMMANDS: &[CommandSpec] = &[
    spec!("sort", -2, WRITE | DENYOOM | MOVABLEKEYS, acl::SET | acl::SORTEDSET | acl::LIST | acl::DANGEROUS, "Sort the elements in a list, set or sorted set", sort).keys_by(super::keyspecs::sort_keys),
    spec!("sort_ro", -2, READONLY | MOVABLEKEYS, acl::SET | acl::SORTEDSET | acl::LIST | acl::DANGEROUS, "Sort the elements in a list, set or sorted set. Read-only variant of SORT", sort_ro).keys_by(super::keyspecs::sort_ro_keys),
];

fn sort(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    sort_generic(ctx, args, false)
}

fn sort_ro(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    sort_generic(ctx, args, true)
}

/// What a BY or GET pattern resolves to for one element.
fn lookup_pattern(ctx: &mut Ctx, pattern: &[u8], element: &[u8]) -> Option<Bytes> {
    if pattern == b"#" {
        return Some(Bytes::copy_from_slice(element));
    }
    let star = pattern.iter().position(|&c| c == b'*')?;
    // `key->field` reads a hash field (the arrow's first occurrence, with a
    // non-empty field after it).
    let arrow = pattern
        .windows(2)
        .position(|w| w == b"->")
        .filter(|&at| at + 2 < pattern.len() && at > star);
    let key_pattern = arrow.map_or(pattern, |at| &pattern[..at]);
    let mut key = Vec::with_capacity(key_pattern.len() + element.len());
    key.extend_from_slice(&key_pattern[..star]);
    key.extend_from_slice(element);
    key.extend_from_slice(&key_pattern[star + 1..]);
    let now = ctx.now;
    let entry = ctx.db().lookup(&key, now)?;
    match (arrow, entry.value) {
        (None, ValueRef::Str(s)) => Some(Bytes::copy_from_slice(s)),
        (Some(at), ValueRef::Hash(h)) => h.get(&pattern[at + 2..]).map(Bytes::copy_from_slice),
        _ => None,
    }
}

fn sort_generic(ctx: &mut Ctx, args: &[Bytes], read_only: bool) -> Reply {
    let (mut by, mut gets, mut desc, mut alpha, mut store) = (None, vec![], false, false, None);
    let (mut offset, mut count) = (0i64, -1i64);
    let mut i = 2;
    while i < args.len() {
        let left = args.len() - i - 1;
        if is(&args[i], "asc") {
            desc = false;
        } else if is(&args[i], "desc") {
            desc = true;
        } else if is(&args[i], "alpha") {
            alpha = true;
        } else if is(&args[i], "limit") && left >= 2 {
            offset = tri!(int(&args[i + 1]));
            count = tri!(int(&args[i + 2]));
            i += 2;
        } else if is(&args[i], "store") && left >= 1 && !read_only {
            store = Some(&args[i + 1]);
            i += 1;
        } else if is(&args[i], "by") && left >= 1 {
            by = Some(&args[i + 1]);
            i += 1;
        } else if is(&args[i], "get") && left >= 1 {
            gets.push(&args[i + 1]);
            i += 1;
        } else {
            return err(errors::SYNTAX);
        }
        i += 1;
    }
    // A BY pattern without `*` means "do not sort".
    let mut no_sort = by.is_some_and(|p| !p.contains(&b'*'));
    let mut is_set = false;
    let elements: Vec<Bytes> = match ctx.lookup_read(&args[1]) {
        None => vec![],
        Some(e) => match e.value {
            ValueRef::List(l) => l.iter().map(Bytes::copy_from_slice).collect(),
            ValueRef::Set(s) => {
                is_set = true;
                s.iter().map(|m| m.to_bytes()).collect()
            }
            ValueRef::ZSet(z) => z.iter().map(|(m, _)| Bytes::copy_from_slice(m)).collect(),
            _ => return err(errors::WRONGTYPE),
        },
    };
    // A set's own order is not the same on another server: what is stored
    // or seen by a script is sorted ALPHA (Redis's rule, for replication).
    if no_sort && is_set && (store.is_some() || ctx.in_script()) {
        no_sort = false;
        alpha = true;
        by = None;
    }
    // Redis converts a listpack sorted set it sorts to a skip list, for good
    // (OBJECT ENCODING shows it).
    let now = ctx.now;
    if let Some(ValueMut::ZSet(z)) = ctx.db().lookup_mut(&args[1], now) {
        z.to_skiplist();
    }
    let mut keyed: Vec<(Bytes, Option<Bytes>, f64)> = Vec::with_capacity(elements.len());
    for element in elements {
        let by_value = match by {
            Some(p) if !no_sort => lookup_pattern(ctx, p, &element),
            _ => None,
        };
        let score = if alpha || no_sort {
            0.0
        } else {
            let source = if by.is_some() {
                by_value.as_deref()
            } else {
                Some(element.as_ref())
            };
            match source {
                None => 0.0,
                Some(text) => match num::strtod_whole(text) {
                    Some(v) => v,
                    None => return err(errors::SORT_NOT_DOUBLE),
                },
            }
        };
        keyed.push((element, by_value, score));
    }
    if !no_sort {
        let by_pattern = by.is_some();
        keyed.sort_by(|a, b| {
            let cmp = if !alpha {
                a.2.partial_cmp(&b.2)
                    .unwrap_or(Ordering::Equal)
                    .then_with(|| a.0.cmp(&b.0))
            } else if by_pattern {
                match (&a.1, &b.1) {
                    (None, None) => Ordering::Equal,
                    (None, Some(_)) => Ordering::Less,
                    (Some(_), None) => Ordering::Greater,
                    (Some(x), Some(y)) => x.cmp(y),
                }
            } else {
                a.0.cmp(&b.0)
            };
            if desc {
                cmp.reverse()
            } else {
                cmp
            }
        });
    }
    // Not sorted, a list or a sorted set keeps its own order, reversed by
    // DESC (Redis walks it from the tail); a set's order stays as it is.
    if no_sort && desc && !is_set {
        keyed.reverse();
    }
    let len = keyed.len() as i64;
    let start = offset.max(0).min(len);
    let end = if count < 0 { len } else { (start + count).min(len) };
    let chosen = &keyed[start as usize..end as usize];
    let mut out: Vec<Option<Bytes>> = Vec::with_capacity(chosen.len() * gets.len().max(1));
    for (element, _, _) in chosen {
        if gets.is_empty() {
            out.push(Some(element.clone()));
        }
        for pattern in &gets {
            out.push(lookup_pattern(ctx, pattern, element));
        }
    }
    let Some(dst) = store else {
        return Reply::Array(out.into_iter().map(|v| v.map_or(Reply::Nil, Reply::Bulk)).collect());
    };
    let stored = out.len() as i64;
    if out.is_empty() {
        if ctx.db().server_del(dst) {
            ctx.dirty(1);
            ctx.notify(notify::GENERIC, "del", dst);
        }
        return Reply::Int(0);
    }
    let fill = ctx.server.config.list_fill();
    let mut list = List::default();
    for v in out {
        list.push(End::Tail, &v.unwrap_or_default(), fill);
    }
    ctx.db().insert(dst, Value::List(Box::new(list)), 0);
    ctx.dirty(stored as u64);
    ctx.notify(notify::LIST, "sortstore", dst);
    Reply::Int(stored)
}
