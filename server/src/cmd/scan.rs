//! The cursor protocol SCAN, HSCAN, SSCAN and ZSCAN share: option parsing
//! (`MATCH`, `COUNT`, and `TYPE` for SCAN), Redis's errors, paging, and the
//! `[cursor, items]` reply.
//!
//! A cursor is a position in the order of a stable hash of each element:
//! a call returns about COUNT elements whose hash is at least the cursor,
//! and the next cursor is the first hash it did not return, so an element
//! present for the whole iteration is returned at least once whatever is
//! added or removed meanwhile (Redis's guarantee). Each call costs O(n) in
//! the collection's size. Small encodings (listpack, intset) are returned
//! whole with cursor 0, as Redis does.

use std::hash::BuildHasher;

use bytes::Bytes;

use super::args::{int, is};
use crate::errors::{self, err};
use crate::protocol::Reply;
use crate::store::glob;

/// Parsed SCAN-family options.
pub(crate) struct Options<'a> {
    pub cursor: u64,
    pub count: usize,
    /// `None` for no pattern or a lone `*` (which Redis does not even match).
    pub pattern: Option<&'a [u8]>,
    /// SCAN's `TYPE`.
    pub type_filter: Option<&'a [u8]>,
}

impl<'a> Options<'a> {
    /// Parses `args[cursor_at]` (the cursor) and the options after it;
    /// `TYPE` is accepted only where `with_type`.
    pub(crate) fn parse(args: &'a [Bytes], cursor_at: usize, with_type: bool) -> Result<Options<'a>, Reply> {
        let mut opts = Options {
            cursor: parse_cursor(&args[cursor_at])?,
            count: 10,
            pattern: None,
            type_filter: None,
        };
        let mut i = cursor_at + 1;
        while i < args.len() {
            if i + 1 >= args.len() {
                return Err(err(errors::SYNTAX));
            }
            let value = &args[i + 1];
            if is(&args[i], "count") {
                let n = int(value)?;
                if n < 1 {
                    return Err(err(errors::SYNTAX));
                }
                opts.count = n as usize;
            } else if is(&args[i], "match") {
                opts.pattern = (value.as_ref() != b"*").then_some(value.as_ref());
            } else if with_type && is(&args[i], "type") {
                opts.type_filter = Some(value.as_ref());
            } else {
                return Err(err(errors::SYNTAX));
            }
            i += 2;
        }
        Ok(opts)
    }

    /// Whether `item` passes MATCH.
    pub(crate) fn matches(&self, item: &[u8]) -> bool {
        self.pattern.is_none_or(|p| glob::matches(p, item, false))
    }
}

/// A cursor as Redis's `parseScanCursorOrReply` reads it (`strtoul`: a
/// leading `-` negates, wrapping, so `-1` is the largest cursor).
fn parse_cursor(arg: &[u8]) -> Result<u64, Reply> {
    let text = std::str::from_utf8(arg)
        .ok()
        .filter(|t| !t.is_empty() && !t.starts_with(char::is_whitespace));
    let parse = |t: &str| -> Option<u64> {
        match t.strip_prefix('-') {
            Some(digits) if !digits.starts_with(['+', '-']) => digits.parse::<u64>().ok().map(u64::wrapping_neg),
            _ => t.strip_prefix('+').unwrap_or(t).parse::<u64>().ok(),
        }
    };
    text.and_then(parse).ok_or_else(|| err(errors::INVALID_CURSOR))
}

/// The hash elements are ordered by for paging: stable for the life of
/// the server, whatever the collection's own hasher.
pub(crate) fn position(bytes: &[u8]) -> u64 {
    foldhash::fast::FixedState::with_seed(0x636f_6f72_6469_7321).hash_one(bytes)
}

/// One page of `items` (each ordered by `hash_of`) from `cursor`: about
/// `count` items, and the next cursor (0 when done).
pub(crate) fn page<T>(
    items: impl Iterator<Item = T>,
    hash_of: impl Fn(&T) -> u64,
    cursor: u64,
    count: usize,
) -> (u64, Vec<T>) {
    let mut candidates: Vec<(u64, T)> = items.map(|t| (hash_of(&t), t)).filter(|(h, _)| *h >= cursor).collect();
    if candidates.len() <= count {
        return (0, candidates.into_iter().map(|(_, t)| t).collect());
    }
    candidates.select_nth_unstable_by_key(count, |c| c.0);
    let boundary = candidates[count].0;
    // Everything sharing the boundary hash goes in this page: the next
    // cursor must be greater than every hash returned.
    let next = candidates
        .iter()
        .filter(|c| c.0 > boundary)
        .map(|c| c.0)
        .min()
        .unwrap_or(0);
    let page = candidates
        .into_iter()
        .filter(|c| c.0 <= boundary)
        .map(|(_, t)| t)
        .collect();
    (next, page)
}

/// One page of a collection's elements for HSCAN, SSCAN or ZSCAN, MATCH
/// applied: a compact encoding (listpack, intset) is returned whole with
/// cursor 0, as Redis does; a hashtable is paged by [`page`].
pub(crate) fn collection_page<T>(
    items: impl Iterator<Item = T>,
    compact: bool,
    member_of: impl Fn(&T) -> &[u8],
    opts: &Options,
) -> (u64, Vec<T>) {
    let (next, mut found) = if compact {
        (0, items.collect())
    } else {
        page(items, |t| position(member_of(t)), opts.cursor, opts.count)
    };
    found.retain(|t| opts.matches(member_of(t)));
    (next, found)
}

/// `[cursor, items]`.
pub(crate) fn reply(next: u64, items: Vec<Reply>) -> Reply {
    let mut buf = itoa::Buffer::new();
    Reply::Array(vec![
        Reply::Bulk(Bytes::copy_from_slice(buf.format(next).as_bytes())),
        Reply::Array(items),
    ])
}
