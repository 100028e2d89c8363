//! Replies and their RESP2/RESP3 encoding.
//!
//! A [`Reply`] is what a command produces; the connection's protocol version
//! decides the bytes. Where RESP2 has no type (map, set, double, boolean,
//! verbatim) the reply degrades exactly as Redis degrades it.

use std::borrow::Cow;

use bytes::{BufMut, Bytes, BytesMut};

/// A reply value. Errors hold the full text without the leading `-`, e.g.
/// `"ERR syntax error"` or `"WRONGTYPE Operation ..."`.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    /// `+OK`, the most common reply, without an allocation.
    Ok,
    /// Simple string: `+text`.
    Status(Cow<'static, str>),
    /// Error: `-text` (the full text, code included).
    Error(Cow<'static, str>),
    /// Integer: `:n`.
    Int(i64),
    /// Bulk string: `$len` and the bytes.
    Bulk(Bytes),
    /// Null bulk string: `$-1` in RESP2, `_` in RESP3.
    Nil,
    /// Null array: `*-1` in RESP2, `_` in RESP3.
    NilArray,
    /// Array of replies.
    Array(Vec<Reply>),
    /// RESP3 map; a flat array in RESP2.
    Map(Vec<(Reply, Reply)>),
    /// RESP3 set; an array in RESP2.
    Set(Vec<Reply>),
    /// RESP3 double; a bulk string (`%.17g`) in RESP2.
    Double(f64),
    /// A double in Redis's human-friendly form (`addReplyHumanLongDouble`:
    /// GEOPOS, WITHCOORD): a RESP3 double, a bulk string in RESP2, both
    /// with `%.17Lf`'s digits, trailing zeros trimmed.
    HumanDouble(f64),
    /// RESP3 boolean; `:1`/`:0` in RESP2.
    Bool(bool),
    /// RESP3 verbatim string with its 3-byte format (`txt`, or what a
    /// script's `verbatim_string` table gave); a bulk string in RESP2.
    Verbatim([u8; 3], Bytes),
    /// Out-of-band data (pub/sub messages): a RESP3 push, an array in RESP2.
    Push(Vec<Reply>),
    /// RESP3 big number (`(` and its digits); a bulk string in RESP2.
    BigNum(Bytes),
    /// A reply preceded by RESP3 attributes (`|` and key/value pairs), which
    /// RESP2 leaves out (DEBUG PROTOCOL ATTRIB; boxed: rare, and the enum
    /// stays small).
    Attribute(Box<(Vec<(Reply, Reply)>, Reply)>),
    /// Several replies to one command, written back to back (SUBSCRIBE a b).
    Many(Vec<Reply>),
    /// Members with scores (WITHSCORES): a flat `member, score, ...` array of
    /// bulk strings in RESP2, an array of `[member, double]` pairs in RESP3.
    ScorePairs(Vec<(Bytes, f64)>),
    /// Keys with their values (XREAD's streams): a RESP3 map, and in RESP2
    /// an array of `[key, value]` pairs rather than a flat array.
    KeyedPairs(Vec<(Reply, Reply)>),
}

/// A container's children still to be written (see [`Reply::encode`]).
enum Children<'a> {
    Items(std::slice::Iter<'a, Reply>),
    /// Keys and values in turn; `pair_header` writes `*2` before each pair
    /// (XREAD's pairs in RESP2).
    Pairs {
        pairs: std::slice::Iter<'a, (Reply, Reply)>,
        value: Option<&'a Reply>,
        pair_header: bool,
    },
}

impl<'a> Children<'a> {
    fn next(&mut self, out: &mut BytesMut) -> Option<&'a Reply> {
        match self {
            Children::Items(items) => items.next(),
            Children::Pairs {
                pairs,
                value,
                pair_header,
            } => {
                if let Some(v) = value.take() {
                    return Some(v);
                }
                let (k, v) = pairs.next()?;
                if *pair_header {
                    out.put_slice(b"*2\r\n");
                }
                *value = Some(v);
                Some(k)
            }
        }
    }
}

impl Reply {
    /// No bytes at all: a blocked client's command (answered later, see
    /// [`crate::blocked`]) or a reply CLIENT REPLY OFF | SKIP suppresses.
    pub const NOTHING: Reply = Reply::Many(Vec::new());

    /// A bulk string reply.
    pub fn bulk(b: impl Into<Bytes>) -> Reply {
        Reply::Bulk(b.into())
    }

    /// A status (simple string) reply from a constant.
    pub fn status(s: &'static str) -> Reply {
        Reply::Status(Cow::Borrowed(s))
    }

    /// Whether this is an error reply.
    pub fn is_error(&self) -> bool {
        matches!(self, Reply::Error(_))
    }

    /// Appends only the pushes of this reply (a subscribe's confirmations,
    /// arrays in RESP2): what a client with its replies off still receives,
    /// as from Redis 7.0 (pushes are not replies).
    pub fn encode_pushes(&self, out: &mut BytesMut, resp3: bool) {
        match self {
            Reply::Push(_) => self.encode(out, resp3),
            Reply::Many(items) => items.iter().for_each(|item| item.encode_pushes(out, resp3)),
            _ => {}
        }
    }

    /// Appends this reply's bytes for the given protocol version (2 or 3).
    /// Nested replies are walked with an explicit stack, not recursion: a
    /// script may return thousands of nested tables.
    pub fn encode(&self, out: &mut BytesMut, resp3: bool) {
        // A scalar (most replies) is written here and done.
        if let Some(children) = self.encode_head(out, resp3) {
            Self::encode_nested(children, out, resp3);
        }
    }

    /// Writes a container's children, and theirs, depth first.
    fn encode_nested(children: Children<'_>, out: &mut BytesMut, resp3: bool) {
        let mut stack: Vec<Children<'_>> = vec![children];
        while let Some(top) = stack.last_mut() {
            match top.next(out) {
                Some(child) => {
                    if let Some(grandchildren) = child.encode_head(out, resp3) {
                        stack.push(grandchildren);
                    }
                }
                None => {
                    stack.pop();
                }
            }
        }
    }

    /// How many nodes [`Reply::encode_with_inserts`] counts in this reply:
    /// itself, then its children depth first (the pairs of
    /// [`Reply::ScorePairs`] as the arrays, members and scores they are
    /// written as; an attribute's table not at all).
    pub(crate) fn nodes(&self, resp3: bool) -> usize {
        let mut n = 0;
        let mut stack = vec![self];
        while let Some(reply) = stack.pop() {
            n += 1;
            match reply {
                Reply::Array(items) | Reply::Push(items) | Reply::Many(items) | Reply::Set(items) => {
                    stack.extend(items)
                }
                Reply::Map(pairs) | Reply::KeyedPairs(pairs) => {
                    stack.extend(pairs.iter().flat_map(|(k, v)| [k, v]));
                }
                Reply::ScorePairs(pairs) => n += pairs.len() * if resp3 { 3 } else { 2 },
                Reply::Attribute(attributed) => {
                    n -= 1;
                    stack.push(&attributed.1);
                }
                Reply::Ok
                | Reply::Status(_)
                | Reply::Error(_)
                | Reply::Int(_)
                | Reply::Bulk(_)
                | Reply::Nil
                | Reply::NilArray
                | Reply::Double(_)
                | Reply::HumanDouble(_)
                | Reply::Bool(_)
                | Reply::Verbatim(..)
                | Reply::BigNum(_) => {}
            }
        }
        n
    }

    /// Appends this reply with other bytes written amid it: each
    /// `(node, bytes)` of `inserts` (in order of `node`) goes before the
    /// reply's node number `node`, counted as [`Reply::nodes`] counts them
    /// (0 before the reply; at or past the count, after it). This is where
    /// Redis writes a keyspace event to the client whose command caused it:
    /// into the client's buffer as the command publishes it, before, after
    /// or amid the command's reply, which Redis writes piece by piece. The
    /// slow path of [`Reply::encode`], taken only then.
    pub(crate) fn encode_with_inserts(&self, out: &mut BytesMut, resp3: bool, inserts: &[(usize, &[u8])]) {
        let mut inserts = inserts.iter().peekable();
        let mut node = 0;
        // Writes the inserts due before the next node, and counts it.
        let mut next_node = |out: &mut BytesMut| {
            while let Some((_, bytes)) = inserts.next_if(|(at, _)| *at <= node) {
                out.put_slice(bytes);
            }
            node += 1;
        };
        let mut stack: Vec<Children<'_>> = vec![];
        let mut pending = Some(self);
        loop {
            let reply = match pending.take() {
                Some(reply) => reply,
                None => match stack.last_mut() {
                    None => break,
                    Some(top) => match top.next(out) {
                        Some(child) => child,
                        None => {
                            stack.pop();
                            continue;
                        }
                    },
                },
            };
            next_node(out);
            if let Reply::ScorePairs(pairs) = reply {
                score_pairs_header(out, pairs.len(), resp3);
                for (member, score) in pairs {
                    if resp3 {
                        next_node(out);
                        out.put_slice(b"*2\r\n");
                    }
                    next_node(out);
                    bulk(out, b'$', member);
                    next_node(out);
                    Reply::Double(*score).encode(out, resp3);
                }
            } else if let Some(children) = reply.encode_head(out, resp3) {
                stack.push(children);
            }
        }
        // The inserts at or past the end.
        for (_, bytes) in inserts {
            out.put_slice(bytes);
        }
    }

    /// Writes a scalar reply, or a container's header and returns its
    /// children for [`Reply::encode`] to write.
    #[inline]
    fn encode_head<'a>(&'a self, out: &mut BytesMut, resp3: bool) -> Option<Children<'a>> {
        match self {
            Reply::Ok => out.put_slice(b"+OK\r\n"),
            Reply::Status(s) => line(out, b'+', s.as_bytes()),
            Reply::Error(s) => line(out, b'-', s.as_bytes()),
            Reply::Int(i) => int_line(out, b':', *i),
            Reply::Bulk(b) => bulk(out, b'$', b),
            Reply::Nil if resp3 => out.put_slice(b"_\r\n"),
            Reply::Nil => out.put_slice(b"$-1\r\n"),
            Reply::NilArray if resp3 => out.put_slice(b"_\r\n"),
            Reply::NilArray => out.put_slice(b"*-1\r\n"),
            Reply::Array(items) => {
                int_line(out, b'*', items.len() as i64);
                return Some(Children::Items(items.iter()));
            }
            Reply::Push(items) => {
                int_line(out, if resp3 { b'>' } else { b'*' }, items.len() as i64);
                return Some(Children::Items(items.iter()));
            }
            Reply::Many(items) => return Some(Children::Items(items.iter())),
            Reply::Set(items) => {
                int_line(out, if resp3 { b'~' } else { b'*' }, items.len() as i64);
                return Some(Children::Items(items.iter()));
            }
            Reply::KeyedPairs(pairs) if !resp3 => {
                int_line(out, b'*', pairs.len() as i64);
                return Some(Children::Pairs {
                    pairs: pairs.iter(),
                    value: None,
                    pair_header: true,
                });
            }
            Reply::Map(pairs) | Reply::KeyedPairs(pairs) => {
                if resp3 {
                    int_line(out, b'%', pairs.len() as i64);
                } else {
                    int_line(out, b'*', 2 * pairs.len() as i64);
                }
                return Some(Children::Pairs {
                    pairs: pairs.iter(),
                    value: None,
                    pair_header: false,
                });
            }
            Reply::Double(d) => {
                let text = format_double(*d);
                if resp3 {
                    line(out, b',', text.as_bytes());
                } else {
                    bulk(out, b'$', text.as_bytes());
                }
            }
            Reply::HumanDouble(d) => {
                let text = crate::store::num::fmt_human(*d);
                if resp3 {
                    line(out, b',', text.as_bytes());
                } else {
                    bulk(out, b'$', text.as_bytes());
                }
            }
            Reply::ScorePairs(pairs) => {
                score_pairs_header(out, pairs.len(), resp3);
                for (member, score) in pairs {
                    if resp3 {
                        out.put_slice(b"*2\r\n");
                    }
                    bulk(out, b'$', member);
                    Reply::Double(*score).encode(out, resp3);
                }
            }
            Reply::BigNum(digits) if resp3 => line(out, b'(', digits),
            Reply::BigNum(digits) => bulk(out, b'$', digits),
            Reply::Attribute(attributed) => {
                let (attributes, reply) = &**attributed;
                if resp3 {
                    int_line(out, b'|', attributes.len() as i64);
                    for (key, value) in attributes {
                        key.encode(out, resp3);
                        value.encode(out, resp3);
                    }
                }
                return reply.encode_head(out, resp3);
            }
            Reply::Bool(b) if resp3 => out.put_slice(if *b { b"#t\r\n" } else { b"#f\r\n" }),
            Reply::Bool(b) => out.put_slice(if *b { b":1\r\n" } else { b":0\r\n" }),
            Reply::Verbatim(format, text) => {
                if resp3 {
                    int_line(out, b'=', text.len() as i64 + 4);
                    out.put_slice(format);
                    out.put_u8(b':');
                    out.put_slice(text);
                    out.put_slice(b"\r\n");
                } else {
                    bulk(out, b'$', text);
                }
            }
        }
        None
    }
}

/// The array header of [`Reply::ScorePairs`]: pairs in RESP3, a flat
/// member, score, ... array in RESP2.
fn score_pairs_header(out: &mut BytesMut, pairs: usize, resp3: bool) {
    int_line(out, b'*', if resp3 { pairs } else { 2 * pairs } as i64);
}

fn line(out: &mut BytesMut, prefix: u8, text: &[u8]) {
    out.reserve(text.len() + 3);
    out.put_u8(prefix);
    out.put_slice(text);
    out.put_slice(b"\r\n");
}

fn int_line(out: &mut BytesMut, prefix: u8, value: i64) {
    let mut buf = itoa::Buffer::new();
    line(out, prefix, buf.format(value).as_bytes());
}

fn bulk(out: &mut BytesMut, prefix: u8, data: &[u8]) {
    int_line(out, prefix, data.len() as i64);
    out.reserve(data.len() + 2);
    out.put_slice(data);
    out.put_slice(b"\r\n");
}

/// Formats a double the way Redis 7.0 replies with one: `%.17g`, with
/// `inf`/`-inf` spelled out.
pub(crate) fn format_double(d: f64) -> String {
    if d.is_infinite() {
        return if d > 0.0 { "inf".into() } else { "-inf".into() };
    }
    crate::store::num::fmt_g17(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(r: &Reply, resp3: bool) -> Vec<u8> {
        let mut out = BytesMut::new();
        r.encode(&mut out, resp3);
        out.to_vec()
    }

    #[test]
    fn resp2_and_resp3_shapes() {
        let map = Reply::Map(vec![(Reply::bulk("a"), Reply::Int(1))]);
        assert_eq!(enc(&map, false), b"*2\r\n$1\r\na\r\n:1\r\n");
        assert_eq!(enc(&map, true), b"%1\r\n$1\r\na\r\n:1\r\n");
        assert_eq!(enc(&Reply::Nil, false), b"$-1\r\n");
        assert_eq!(enc(&Reply::Nil, true), b"_\r\n");
        assert_eq!(enc(&Reply::Double(0.1), false), b"$19\r\n0.10000000000000001\r\n");
        assert_eq!(enc(&Reply::Double(f64::INFINITY), true), b",inf\r\n");
        assert_eq!(enc(&Reply::HumanDouble(180.0), false), b"$3\r\n180\r\n");
        assert_eq!(enc(&Reply::HumanDouble(0.25), true), b",0.25\r\n");
        assert_eq!(
            enc(&Reply::Verbatim(*b"txt", Bytes::from("hi")), true),
            b"=6\r\ntxt:hi\r\n"
        );
    }
}
