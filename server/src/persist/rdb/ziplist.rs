//! Ziplists (Redis's `ziplist.c`), read only: the encoding of lists,
//! hashes and sorted sets in RDB files older than Redis 7.0 (and of
//! quicklist-1 nodes). Reading validates as `ziplistValidateIntegrity`
//! with `deep` (every entry inside, prevlens agree, tail and count right).

use super::codec::{Corrupt, Result};

/// Total bytes (u32 LE), tail offset (u32 LE), count (u16 LE).
const HEADER: usize = 10;
/// The terminator.
const END: u8 = 0xFF;
/// A prevlen's first byte at or above this means four more bytes follow.
const BIG_PREVLEN: u8 = 254;
/// The count a header holds when the real one does not fit.
const COUNT_UNKNOWN: u16 = u16::MAX;

// Encodings (the entry's first byte after its prevlen).
const STR_MASK: u8 = 0xC0;
const STR_06B: u8 = 0x00;
const STR_14B: u8 = 0x40;
const STR_32B: u8 = 0x80;
const INT_16B: u8 = 0xC0;
const INT_32B: u8 = 0xD0;
const INT_64B: u8 = 0xE0;
const INT_24B: u8 = 0xF0;
const INT_8B: u8 = 0xFE;
const INT_IMM_MIN: u8 = 0xF1;
const INT_IMM_MAX: u8 = 0xFD;

fn bad(what: &str) -> Corrupt {
    Corrupt::bad(format!("Ziplist integrity check failed: {what}"))
}

/// Every entry of a ziplist as bytes (integers as their decimal text).
pub(crate) fn decode(zl: &[u8]) -> Result<Vec<Vec<u8>>> {
    if zl.len() < HEADER + 1 {
        return Err(bad("too short"));
    }
    let total = u32::from_le_bytes([zl[0], zl[1], zl[2], zl[3]]) as usize;
    if total != zl.len() {
        return Err(bad("size in header differs"));
    }
    let last = zl.len() - 1;
    if zl[last] != END {
        return Err(bad("no terminator"));
    }
    let tail = u32::from_le_bytes([zl[4], zl[5], zl[6], zl[7]]) as usize;
    if tail > last {
        return Err(bad("tail out of range"));
    }
    let header_count = u16::from_le_bytes([zl[8], zl[9]]);
    // Reads of entry headers stay before the terminator.
    let get = |i: usize| -> Result<u8> {
        if i < last {
            Ok(zl[i])
        } else {
            Err(bad("entry out of range"))
        }
    };
    let mut out = vec![];
    let mut p = HEADER;
    let mut prev_raw = 0usize;
    let mut prev_at = None;
    while p < last && zl[p] != END {
        let start = p;
        let (prevlen, mut q) = if get(p)? < BIG_PREVLEN {
            (zl[p] as usize, p + 1)
        } else {
            let b = [get(p + 1)?, get(p + 2)?, get(p + 3)?, get(p + 4)?];
            (u32::from_le_bytes(b) as usize, p + 5)
        };
        if prevlen != prev_raw {
            return Err(bad("prevlen mismatch"));
        }
        let enc = get(q)?;
        let int_bytes = |n: usize, q: usize| -> Result<u64> {
            let mut v = 0u64;
            for i in (0..n).rev() {
                v = (v << 8) | get(q + i)? as u64;
            }
            Ok(v)
        };
        let entry: Vec<u8> = if enc < STR_MASK {
            let (len, data) = match enc & STR_MASK {
                STR_06B => ((enc & 0x3F) as usize, q + 1),
                STR_14B => ((((enc & 0x3F) as usize) << 8) | get(q + 1)? as usize, q + 2),
                STR_32B if enc == STR_32B => {
                    let b = [get(q + 1)?, get(q + 2)?, get(q + 3)?, get(q + 4)?];
                    (u32::from_be_bytes(b) as usize, q + 5)
                }
                _ => return Err(bad("unknown encoding")),
            };
            let end = data
                .checked_add(len)
                .filter(|&e| e <= last)
                .ok_or_else(|| bad("entry out of range"))?;
            q = end;
            zl[data..end].to_vec()
        } else {
            let (v, n): (i64, usize) = match enc {
                INT_8B => (int_bytes(1, q + 1)? as u8 as i8 as i64, 1),
                INT_16B => (int_bytes(2, q + 1)? as u16 as i16 as i64, 2),
                INT_24B => (((int_bytes(3, q + 1)? as u32) << 8) as i32 as i64 >> 8, 3),
                INT_32B => (int_bytes(4, q + 1)? as u32 as i32 as i64, 4),
                INT_64B => (int_bytes(8, q + 1)? as i64, 8),
                INT_IMM_MIN..=INT_IMM_MAX => (((enc & 0x0F) as i64) - 1, 0),
                _ => return Err(bad("unknown encoding")),
            };
            q = q + 1 + n;
            if q > last {
                return Err(bad("entry out of range"));
            }
            v.to_string().into_bytes()
        };
        out.push(entry);
        prev_raw = q - start;
        prev_at = Some(start);
        p = q;
    }
    if p != last {
        return Err(bad("terminator inside"));
    }
    if let Some(at) = prev_at {
        if at != tail {
            return Err(bad("tail offset differs"));
        }
    }
    if header_count != COUNT_UNKNOWN && header_count as usize != out.len() {
        return Err(bad("count in header differs"));
    }
    Ok(out)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A ziplist of `items` (strings plain, integers in their smallest
    /// encoding), for tests of the readers.
    pub(crate) fn encode(items: &[&[u8]]) -> Vec<u8> {
        let mut body = vec![];
        let mut prev = 0usize;
        let mut tail = HEADER;
        for item in items {
            let start = body.len();
            tail = HEADER + start;
            if prev < BIG_PREVLEN as usize {
                body.push(prev as u8);
            } else {
                body.push(BIG_PREVLEN);
                body.extend_from_slice(&(prev as u32).to_le_bytes());
            }
            match crate::store::num::parse_i64(item) {
                Some(v @ 0..=12) => body.push(INT_IMM_MIN + v as u8),
                Some(v) if i8::try_from(v).is_ok() => body.extend_from_slice(&[INT_8B, v as u8]),
                Some(v) if i16::try_from(v).is_ok() => {
                    body.push(INT_16B);
                    body.extend_from_slice(&(v as i16).to_le_bytes());
                }
                Some(v) if (-(1 << 23)..(1 << 23)).contains(&v) => {
                    body.push(INT_24B);
                    body.extend_from_slice(&(v as i32).to_le_bytes()[..3]);
                }
                Some(v) if i32::try_from(v).is_ok() => {
                    body.push(INT_32B);
                    body.extend_from_slice(&(v as i32).to_le_bytes());
                }
                Some(v) => {
                    body.push(INT_64B);
                    body.extend_from_slice(&v.to_le_bytes());
                }
                None if item.len() < 64 => {
                    body.push(STR_06B | item.len() as u8);
                    body.extend_from_slice(item);
                }
                None if item.len() < 16384 => {
                    body.push(STR_14B | (item.len() >> 8) as u8);
                    body.push(item.len() as u8);
                    body.extend_from_slice(item);
                }
                None => {
                    body.push(STR_32B);
                    body.extend_from_slice(&(item.len() as u32).to_be_bytes());
                    body.extend_from_slice(item);
                }
            }
            prev = body.len() - start;
        }
        let mut zl = vec![];
        zl.extend_from_slice(&((HEADER + body.len() + 1) as u32).to_le_bytes());
        zl.extend_from_slice(&(tail as u32).to_le_bytes());
        zl.extend_from_slice(&(items.len() as u16).to_le_bytes());
        zl.extend_from_slice(&body);
        zl.push(END);
        zl
    }

    #[test]
    fn every_encoding_decodes() {
        let big = vec![b'b'; 300];
        let huge = vec![b'h'; 17000];
        let items: Vec<&[u8]> = vec![
            b"0",
            b"12",
            b"13",
            b"-5",
            b"300",
            b"-70000",
            b"8388607",
            b"2147483647",
            b"-9223372036854775808",
            b"abc",
            &big,
            &huge,
            b"",
        ];
        let zl = encode(&items);
        let back = decode(&zl).unwrap();
        assert_eq!(back, items.iter().map(|i| i.to_vec()).collect::<Vec<_>>());
    }

    #[test]
    fn corruption_is_an_error_never_a_panic() {
        let zl = encode(&[b"a", b"1234", &[b'x'; 70]]);
        for cut in 0..zl.len() {
            assert!(decode(&zl[..cut]).is_err());
        }
        for i in 0..zl.len() {
            let mut bad = zl.clone();
            bad[i] ^= 0x41;
            let _ = decode(&bad);
        }
        let mut tail = zl.clone();
        tail[4] += 1;
        assert!(decode(&tail).is_err());
    }
}
