//! Request parsing: RESP multibulk (`*N\r\n$len\r\n...`) and inline commands,
//! modelled on Redis 7.0's `processMultibulkBuffer` / `processInlineBuffer`.

use std::collections::VecDeque;

use bytes::{Buf, Bytes, BytesMut};

use crate::store::num::parse_i64;

/// Limits applied while parsing requests. Defaults are Redis 7.0.15's except
/// `max_multibulk_len` (see there).
#[derive(Clone, Debug)]
pub struct ProtocolLimits {
    /// Largest bulk string accepted (`proto-max-bulk-len`, default 512 MB).
    pub max_bulk_len: usize,
    /// Largest argument count of one multibulk request
    /// (`proto-max-multibulk-len`, coordis's own). Default 1,048,576, the
    /// limit Redis had before 7.0; Redis 7.0 accepts up to `INT_MAX`.
    pub max_multibulk_len: usize,
    /// Longest inline request line or `*N`/`$N` header without a newline (Redis: 64 KB).
    pub max_inline_len: usize,
    /// The client has not authenticated while a password is required: requests
    /// are capped at `PRE_AUTH_MAX_ARGS` (10) arguments of `PRE_AUTH_MAX_BULK`
    /// (16 KB) each, as Redis does since CVE-2021-32675.
    pub pre_auth: bool,
}

/// Most arguments an unauthenticated client may send in one request (Redis's value).
pub(super) const PRE_AUTH_MAX_ARGS: i64 = 10;
/// Longest argument an unauthenticated client may send (Redis's value).
pub(super) const PRE_AUTH_MAX_BULK: i64 = 16 * 1024;

impl Default for ProtocolLimits {
    fn default() -> Self {
        ProtocolLimits {
            max_bulk_len: 512 * 1024 * 1024,
            max_multibulk_len: 1024 * 1024,
            max_inline_len: 64 * 1024,
            pre_auth: false,
        }
    }
}

/// How many argument slots to reserve up front at most: a client declaring
/// `*1000000` gets its vector grown as arguments actually arrive.
const MAX_PREALLOC_ARGS: usize = 1024;

/// Incremental request parser. It keeps the state of a partly received
/// multibulk request between reads, so a large request arriving in many reads
/// is parsed in linear time.
#[derive(Debug, Default)]
pub struct RequestParser {
    /// Arguments still expected by the multibulk request in progress (0: none in progress).
    remaining: usize,
    /// Arguments of the multibulk request in progress.
    args: Vec<Bytes>,
    /// Length of the bulk whose `$len` header was read but whose bytes have not all arrived.
    bulk_len: Option<usize>,
}

impl RequestParser {
    /// A parser with no request in progress.
    pub fn new() -> Self {
        Self::default()
    }

    /// Bytes of the arguments already read of the request in progress
    /// (CLIENT LIST's `argv-mem` while the rest is still arriving).
    pub fn partial_len(&self) -> usize {
        self.args.iter().map(Bytes::len).sum()
    }

    /// Parses the next complete request from `buf`, consuming its bytes.
    ///
    /// `Ok(None)` means more bytes are needed. Empty requests (`*0`, `*-1`, a
    /// blank inline line) are consumed silently as Redis does. `Err` carries the
    /// exact error text (without the leading `-`); the connection must send it
    /// and close.
    pub fn next(&mut self, buf: &mut BytesMut, limits: &ProtocolLimits) -> Result<Option<Vec<Bytes>>, String> {
        let mut args = Vec::new();
        if self.remaining == 0 && !limits.pre_auth && complete_request(buf, limits, &mut args) {
            return Ok(Some(args));
        }
        self.next_in_steps(buf, limits)
    }

    /// [`next`](Self::next) onto the back of `requests`, in an argument
    /// vector a request already run left there: `Ok(false)` means more
    /// bytes are needed.
    pub(crate) fn next_into(
        &mut self,
        buf: &mut BytesMut,
        limits: &ProtocolLimits,
        requests: &mut Requests,
    ) -> Result<bool, String> {
        if buf.is_empty() {
            // Everything read is parsed (the common case after a batch).
            return Ok(false);
        }
        if self.remaining == 0 && !limits.pre_auth {
            let mut args = requests.spare.pop().unwrap_or_default();
            if complete_request(buf, limits, &mut args) {
                requests.queue.push_back(args);
                return Ok(true);
            }
            requests.done(args);
        }
        match self.next_in_steps(buf, limits)? {
            Some(args) => {
                requests.queue.push_back(args);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// [`next`](Self::next) a header at a time: any request, complete or
    /// not, with every limit and error.
    fn next_in_steps(&mut self, buf: &mut BytesMut, limits: &ProtocolLimits) -> Result<Option<Vec<Bytes>>, String> {
        loop {
            if self.remaining == 0 {
                if buf.is_empty() {
                    return Ok(None);
                }
                if buf[0] != b'*' {
                    match self.inline(buf, limits)? {
                        Some(args) if args.is_empty() => continue,
                        other => return Ok(other),
                    }
                }
                let Some(line_len) = line_length(buf, limits.max_inline_len, "too big mbulk count string")? else {
                    return Ok(None);
                };
                let parsed = parse_i64(&buf[1..line_len]);
                buf.advance(line_len + 2);
                let n = match parsed {
                    Some(n) if n <= limits.max_multibulk_len as i64 => n,
                    _ => return Err("Protocol error: invalid multibulk length".into()),
                };
                if limits.pre_auth && n > PRE_AUTH_MAX_ARGS {
                    return Err("Protocol error: unauthenticated multibulk length".into());
                }
                if n <= 0 {
                    continue;
                }
                self.remaining = n as usize;
                self.args = Vec::with_capacity(self.remaining.min(MAX_PREALLOC_ARGS));
            }
            while self.remaining > 0 {
                let len = match self.bulk_len {
                    Some(len) => len,
                    None => {
                        let Some(line_len) = line_length(buf, limits.max_inline_len, "too big bulk count string")?
                        else {
                            return Ok(None);
                        };
                        // An empty header line has the '\r' at its start: Redis
                        // prints that byte, and its error sanitizer turns CR/LF into spaces.
                        let first = if line_len == 0 { b'\r' } else { buf[0] };
                        if first != b'$' {
                            let shown = if first == b'\r' || first == b'\n' {
                                ' '
                            } else {
                                first as char
                            };
                            return Err(format!("Protocol error: expected '$', got '{shown}'"));
                        }
                        let parsed = parse_i64(&buf[1..line_len]);
                        buf.advance(line_len + 2);
                        let len = match parsed {
                            Some(n) if n >= 0 && n as u64 <= limits.max_bulk_len as u64 => n,
                            _ => return Err("Protocol error: invalid bulk length".into()),
                        };
                        if limits.pre_auth && len > PRE_AUTH_MAX_BULK {
                            return Err("Protocol error: unauthenticated bulk length".into());
                        }
                        let len = len as usize;
                        self.bulk_len = Some(len);
                        len
                    }
                };
                // Redis skips the two bytes after the payload without checking them.
                if buf.len() < len + 2 {
                    return Ok(None);
                }
                let arg = buf.split_to(len).freeze();
                buf.advance(2);
                self.bulk_len = None;
                self.args.push(arg);
                self.remaining -= 1;
            }
            return Ok(Some(std::mem::take(&mut self.args)));
        }
    }

    /// One inline request: a line split like `sdssplitargs` (quotes, escapes).
    fn inline(&mut self, buf: &mut BytesMut, limits: &ProtocolLimits) -> Result<Option<Vec<Bytes>>, String> {
        let Some(nl) = memchr(b'\n', buf) else {
            if buf.len() > limits.max_inline_len {
                return Err("Protocol error: too big inline request".into());
            }
            return Ok(None);
        };
        let line = buf.split_to(nl + 1);
        let mut end = nl;
        if end > 0 && line[end - 1] == b'\r' {
            end -= 1;
        }
        match split_args(&line[..end]) {
            Some(args) => Ok(Some(args.into_iter().map(Bytes::from).collect())),
            None => Err("Protocol error: unbalanced quotes in request".into()),
        }
    }
}

/// Most arguments a request may have to be taken by [`complete_request`]
/// (a larger one is parsed in steps).
const WHOLE_MAX_ARGS: usize = 16;

/// The common case in one pass, with no state kept: a whole multibulk
/// request of at most [`WHOLE_MAX_ARGS`] arguments already in `buf`, every
/// header well formed and within the limits. Its bytes leave `buf` in one
/// split and each argument is a slice of them, where the request taken in
/// steps advances the buffer at every header and splits it at every
/// argument (together about a third of a pipelined GET's instructions).
/// `false` leaves `buf` and `args` untouched for
/// [`RequestParser::next_in_steps`], which takes everything else — partial
/// requests, inline ones, errors, unauthenticated clients — so the two
/// agree on every input (a test feeds both the same bytes).
#[inline]
fn complete_request(buf: &mut BytesMut, limits: &ProtocolLimits, args: &mut Vec<Bytes>) -> bool {
    let mut spans = [(0usize, 0usize); WHOLE_MAX_ARGS];
    let Some((n, len)) = whole_request_spans(buf, limits, &mut spans) else {
        return false;
    };
    let request = buf.split_to(len).freeze();
    args.extend(spans[..n].iter().map(|&(start, end)| request.slice(start..end)));
    true
}

/// Where the arguments of the whole request at the start of `data` lie,
/// into `spans`: their number and the request's length.
#[inline]
fn whole_request_spans(
    data: &[u8],
    limits: &ProtocolLimits,
    spans: &mut [(usize, usize); WHOLE_MAX_ARGS],
) -> Option<(usize, usize)> {
    if data.first() != Some(&b'*') {
        return None;
    }
    let (n, mut pos) = header_value(data, 1)?;
    if n == 0 || n > WHOLE_MAX_ARGS || n > limits.max_multibulk_len {
        return None;
    }
    for span in &mut spans[..n] {
        if data.get(pos) != Some(&b'$') {
            return None;
        }
        let (len, start) = header_value(data, pos + 1)?;
        if len > limits.max_bulk_len {
            return None;
        }
        // As in steps: the two bytes after the payload are skipped unread.
        let end = start.checked_add(len)?;
        if data.len() < end.checked_add(2)? {
            return None;
        }
        *span = (start, end);
        pos = end + 2;
    }
    Some((n, pos))
}

/// Argument vectors [`Requests`] keeps for reuse, at most (with
/// [`SPARE_MAX_ARGS`], a few KB a connection at the most).
const SPARE_VECTORS: usize = 16;

/// The capacity above which a run request's argument vector is freed
/// rather than kept (an MSET of thousands of keys is not the common case).
const SPARE_MAX_ARGS: usize = 16;

/// The requests a connection has read and not yet run, in order, and the
/// emptied argument vectors of those it has run. A pipelined batch is
/// parsed whole before it runs; with a new vector for every request, the
/// allocator's per-thread cache (7 blocks of a size) overflowed at every
/// batch of more than 7 and each request paid about 170 instructions of
/// `malloc` and `free`. Reused, the vectors cost nothing after the first
/// batch.
#[derive(Debug, Default)]
pub(crate) struct Requests {
    queue: VecDeque<Vec<Bytes>>,
    spare: Vec<Vec<Bytes>>,
}

impl Requests {
    pub(crate) fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    pub(crate) fn len(&self) -> usize {
        self.queue.len()
    }

    /// The next request to run.
    pub(crate) fn pop_front(&mut self) -> Option<Vec<Bytes>> {
        self.queue.pop_front()
    }

    /// Puts back a request that did not run yet (it runs next).
    pub(crate) fn push_front(&mut self, args: Vec<Bytes>) {
        self.queue.push_front(args);
    }

    /// Queues a request after the others.
    pub(crate) fn push_back(&mut self, args: Vec<Bytes>) {
        self.queue.push_back(args);
    }

    /// A request has run: its arguments are dropped and its vector is kept
    /// for a later one.
    pub(crate) fn done(&mut self, mut args: Vec<Bytes>) {
        if self.spare.len() < SPARE_VECTORS && args.capacity() != 0 && args.capacity() <= SPARE_MAX_ARGS {
            args.clear();
            self.spare.push(args);
        }
    }
}

/// The value of a `*N` / `$N` header whose digits start at `at`, and where
/// the next header starts: `None` unless it is a canonical non-negative
/// number (no sign, no leading zero) of at most 18 digits followed by `\r`
/// and one more byte (skipped unread, as in steps).
#[inline]
fn header_value(data: &[u8], at: usize) -> Option<(usize, usize)> {
    let first = *data.get(at)?;
    if !first.is_ascii_digit() {
        return None;
    }
    let mut value = (first - b'0') as usize;
    let mut i = at + 1;
    loop {
        let c = *data.get(i)?;
        if c == b'\r' {
            return (i + 1 < data.len()).then_some((value, i + 2));
        }
        // A digit after a leading zero, or a 19th digit: in steps.
        if !c.is_ascii_digit() || value == 0 || i - at >= 18 {
            return None;
        }
        value = value * 10 + (c - b'0') as usize;
        i += 1;
    }
}

/// The length of the `\r`-terminated header line at the start of `buf`
/// (the caller consumes it and the two bytes after it, `\r` and whatever
/// follows, as Redis does). `None` when the line is incomplete.
fn line_length(buf: &BytesMut, max: usize, too_big: &str) -> Result<Option<usize>, String> {
    match memchr(b'\r', buf) {
        Some(pos) if pos + 1 < buf.len() => Ok(Some(pos)),
        Some(pos) if pos <= max => Ok(None),
        None if buf.len() <= max => Ok(None),
        _ => Err(format!("Protocol error: {too_big}")),
    }
}

fn memchr(needle: u8, haystack: &[u8]) -> Option<usize> {
    haystack.iter().position(|&b| b == needle)
}

fn is_hex(c: u8) -> bool {
    c.is_ascii_hexdigit()
}

fn hex_val(c: u8) -> u8 {
    (c as char).to_digit(16).unwrap_or(0) as u8
}

/// Splits a line into arguments exactly like Redis's `sdssplitargs`: spaces
/// separate, `"..."` supports `\n \r \t \b \a \\ \" \xHH`, `'...'` supports
/// `\'`; a closing quote must be followed by a space or the end. `None` on
/// unbalanced quotes.
pub(crate) fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut args = Vec::new();
    let mut p = 0;
    let n = line.len();
    loop {
        while p < n && is_space(line[p]) {
            p += 1;
        }
        if p >= n {
            return Some(args);
        }
        let mut current = Vec::new();
        let mut in_dq = false;
        let mut in_sq = false;
        loop {
            if in_dq {
                if p >= n {
                    return None;
                }
                if line[p] == b'\\' && p + 3 < n && line[p + 1] == b'x' && is_hex(line[p + 2]) && is_hex(line[p + 3]) {
                    current.push(hex_val(line[p + 2]) * 16 + hex_val(line[p + 3]));
                    p += 3;
                } else if line[p] == b'\\' && p + 1 < n {
                    p += 1;
                    current.push(match line[p] {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 8,
                        b'a' => 7,
                        c => c,
                    });
                } else if line[p] == b'"' {
                    if p + 1 < n && !is_space(line[p + 1]) {
                        return None;
                    }
                    p += 1;
                    break;
                } else {
                    current.push(line[p]);
                }
            } else if in_sq {
                if p >= n {
                    return None;
                }
                if line[p] == b'\\' && p + 1 < n && line[p + 1] == b'\'' {
                    p += 1;
                    current.push(b'\'');
                } else if line[p] == b'\'' {
                    if p + 1 < n && !is_space(line[p + 1]) {
                        return None;
                    }
                    p += 1;
                    break;
                } else {
                    current.push(line[p]);
                }
            } else {
                if p >= n {
                    break;
                }
                match line[p] {
                    b' ' | b'\n' | b'\r' | b'\t' | 0 => {
                        p += 1;
                        break;
                    }
                    b'"' => in_dq = true,
                    b'\'' => in_sq = true,
                    c => current.push(c),
                }
            }
            p += 1;
        }
        args.push(current);
    }
}

fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_all(input: &[u8]) -> (Vec<Vec<Bytes>>, Option<String>) {
        let mut p = RequestParser::new();
        let mut buf = BytesMut::from(input);
        let mut out = Vec::new();
        loop {
            match p.next(&mut buf, &ProtocolLimits::default()) {
                Ok(Some(req)) => out.push(req),
                Ok(None) => return (out, None),
                Err(e) => return (out, Some(e)),
            }
        }
    }

    #[test]
    fn multibulk_and_inline() {
        let (reqs, err) = parse_all(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\nPING\r\n\r\nECHO \"a\\x41\" 'b c'\n");
        assert_eq!(err, None);
        assert_eq!(reqs.len(), 3);
        assert_eq!(reqs[0], vec![Bytes::from("GET"), Bytes::from("k")]);
        assert_eq!(reqs[1], vec![Bytes::from("PING")]);
        assert_eq!(
            reqs[2],
            vec![Bytes::from("ECHO"), Bytes::from("aA"), Bytes::from("b c")]
        );
    }

    #[test]
    fn incremental_bytes() {
        let input = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nhello\r\n";
        let mut p = RequestParser::new();
        let mut buf = BytesMut::new();
        let mut got = None;
        for &b in input.iter() {
            buf.extend_from_slice(&[b]);
            if let Some(r) = p.next(&mut buf, &ProtocolLimits::default()).unwrap() {
                got = Some(r);
            }
        }
        assert_eq!(got.unwrap()[2], Bytes::from("hello"));
        assert!(buf.is_empty());
    }

    #[test]
    fn protocol_errors_have_redis_text() {
        let long = vec![b'a'; 70 * 1024];
        let cases: &[(&[u8], &str)] = &[
            (b"*x\r\n", "invalid multibulk length"),
            (b"*1\r\n+a\r\n", "expected '$', got '+'"),
            (b"*1\r\n\r\n", "expected '$', got ' '"),
            (b"*\r\n", "invalid multibulk length"),
            (b"*1\r\n$\r\n", "invalid bulk length"),
            (b"*1\r\n$-5\r\n", "invalid bulk length"),
            (b"*1\r\n$600000000\r\n", "invalid bulk length"),
            (b"*1048577\r\n", "invalid multibulk length"),
            (b"PING \"a\r\n", "unbalanced quotes in request"),
            (b"PING \"a\"b\r\n", "unbalanced quotes in request"),
            (&long, "too big inline request"),
        ];
        for (input, text) in cases {
            assert_eq!(parse_all(input).1.unwrap(), format!("Protocol error: {text}"));
        }
    }

    #[test]
    fn unauthenticated_requests_are_capped() {
        let pre_auth = ProtocolLimits {
            pre_auth: true,
            ..ProtocolLimits::default()
        };
        let next = |input: &[u8]| RequestParser::new().next(&mut BytesMut::from(input), &pre_auth);
        assert_eq!(next(b"*10\r\n"), Ok(None));
        assert_eq!(
            next(b"*11\r\n").unwrap_err(),
            "Protocol error: unauthenticated multibulk length"
        );
        assert_eq!(next(b"*2\r\n$16384\r\n"), Ok(None));
        assert_eq!(
            next(b"*2\r\n$16385\r\n").unwrap_err(),
            "Protocol error: unauthenticated bulk length"
        );
        // The general limits are checked first, as in Redis.
        assert_eq!(
            next(b"*1\r\n$600000000\r\n").unwrap_err(),
            "Protocol error: invalid bulk length"
        );
    }

    #[test]
    fn declared_lengths_do_not_allocate() {
        let mut p = RequestParser::new();
        let mut buf = BytesMut::from(&b"*1048576\r\n"[..]);
        assert!(p.next(&mut buf, &ProtocolLimits::default()).unwrap().is_none());
        assert!(p.args.capacity() <= MAX_PREALLOC_ARGS);
    }

    /// Random inputs from a protocol-heavy alphabet, fed in random pieces:
    /// the parser answers every one with requests, "need more" or an error,
    /// and never panics.
    #[test]
    fn random_inputs_never_panic() {
        let alphabet = b"*$\r\n0123456789-+ \"'\\xabPING";
        let mut rng = fastrand::Rng::with_seed(42);
        for _ in 0..20_000 {
            let len = rng.usize(0..40);
            let input: Vec<u8> = (0..len).map(|_| alphabet[rng.usize(..alphabet.len())]).collect();
            let mut p = RequestParser::new();
            let mut buf = BytesMut::new();
            let mut fed = 0;
            while fed < input.len() {
                let step = rng.usize(1..=input.len() - fed);
                buf.extend_from_slice(&input[fed..fed + step]);
                fed += step;
                while let Ok(Some(_)) = p.next(&mut buf, &ProtocolLimits::default()) {}
            }
        }
    }

    /// Random inputs from a protocol-heavy alphabet and mostly well-formed
    /// requests, fed in random pieces: [`RequestParser::next`] (whole
    /// requests in one pass where it can) and [`RequestParser::next_in_steps`]
    /// alone give the same requests, the same error and leave the same bytes.
    #[test]
    fn whole_requests_are_parsed_as_in_steps() {
        let alphabet = b"*$\r\n0123456789-+ \"'\\xabPING";
        let mut rng = fastrand::Rng::with_seed(7);
        let limits = ProtocolLimits {
            max_bulk_len: 64,
            max_multibulk_len: 12,
            ..ProtocolLimits::default()
        };
        for round in 0..20_000 {
            let mut input = Vec::new();
            for _ in 0..rng.usize(1..5) {
                if round % 2 == 0 {
                    let len = rng.usize(0..30);
                    input.extend((0..len).map(|_| alphabet[rng.usize(..alphabet.len())]));
                } else {
                    let n = rng.usize(0..20);
                    input.extend_from_slice(format!("*{n}\r\n").as_bytes());
                    for _ in 0..n {
                        let len = rng.usize(0..70);
                        input.extend_from_slice(format!("${len}\r\n").as_bytes());
                        input.extend((0..len).map(|_| rng.alphanumeric() as u8));
                        input.extend_from_slice(b"\r\n");
                    }
                    // Now and then a stray byte anywhere.
                    if rng.u8(..) < 40 {
                        let at = rng.usize(..input.len());
                        input[at] = alphabet[rng.usize(..alphabet.len())];
                    }
                }
            }
            let mut cuts: Vec<usize> = (0..rng.usize(0..4)).map(|_| rng.usize(..=input.len())).collect();
            cuts.push(input.len());
            cuts.sort_unstable();
            let run = |whole: bool| {
                let mut p = RequestParser::new();
                let mut buf = BytesMut::new();
                let mut got = Vec::new();
                let mut fed = 0;
                for &cut in &cuts {
                    buf.extend_from_slice(&input[fed..cut]);
                    fed = cut;
                    loop {
                        let r = if whole {
                            p.next(&mut buf, &limits)
                        } else {
                            p.next_in_steps(&mut buf, &limits)
                        };
                        match r {
                            Ok(Some(req)) => got.push(req),
                            Ok(None) => break,
                            Err(e) => return (got, Some(e), buf.to_vec()),
                        }
                    }
                }
                (got, None, buf.to_vec())
            };
            assert_eq!(
                run(true),
                run(false),
                "input {:?} cut at {cuts:?}",
                String::from_utf8_lossy(&input)
            );
        }
    }

    #[test]
    fn empty_requests_are_skipped() {
        let (reqs, err) = parse_all(b"*0\r\n*-1\r\n\r\nPING\r\n");
        assert_eq!(err, None);
        assert_eq!(reqs, vec![vec![Bytes::from("PING")]]);
    }
}
