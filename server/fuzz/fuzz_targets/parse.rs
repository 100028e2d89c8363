//! The request parser on arbitrary bytes. Besides never panicking, parsing
//! must not depend on how the bytes are split into reads: the input fed in
//! one piece and fed in pieces (sized by the input's first byte) give the
//! same requests and the same error.
#![no_main]

use bytes::{Bytes, BytesMut};
use coordis::protocol::{ProtocolLimits, RequestParser};
use libfuzzer_sys::fuzz_target;

type Parsed = (Vec<Vec<Bytes>>, Option<String>);

fn parse_in_pieces(input: &[u8], piece: usize, limits: &ProtocolLimits) -> Parsed {
    let mut parser = RequestParser::new();
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    for chunk in input.chunks(piece) {
        buf.extend_from_slice(chunk);
        loop {
            match parser.next(&mut buf, limits) {
                Ok(Some(req)) => out.push(req),
                Ok(None) => break,
                Err(e) => return (out, Some(e)),
            }
        }
    }
    (out, None)
}

fuzz_target!(|data: &[u8]| {
    let Some((&first, input)) = data.split_first() else {
        return;
    };
    let limits = ProtocolLimits {
        pre_auth: first & 0x80 != 0,
        ..ProtocolLimits::default()
    };
    let whole = parse_in_pieces(input, input.len().max(1), &limits);
    let pieces = parse_in_pieces(input, (first & 0x7f) as usize + 1, &limits);
    // A "too big" error depends on how much is buffered when the parser
    // looks; everything else must agree exactly.
    let too_big = |p: &Parsed| p.1.as_deref().is_some_and(|e| e.contains("too big"));
    if too_big(&whole) || too_big(&pieces) {
        return;
    }
    assert_eq!(whole, pieces);
});
