//! Listpacks (Redis 7.0's `listpack.c`): building them entry by entry with
//! Redis's choice of encoding, and reading them with Redis's deep
//! validation (`lpValidateIntegrity`). Pure functions over bytes.
//!
//! Layout: total bytes (u32 LE), element count (u16 LE, 65535 when it
//! does not fit), entries, 0xFF. An entry is its encoding and data, then
//! a "backlen" of 1-5 bytes giving the size of both (read right to left).

use super::codec::{Corrupt, Result};
use crate::store::num::parse_i64;

/// The header: total bytes and element count.
pub(crate) const HEADER: usize = 6;
/// The terminator.
const EOF: u8 = 0xFF;
/// The count a header holds when the real one does not fit in 16 bits.
const COUNT_UNKNOWN: u16 = u16::MAX;

// Entry encodings (first byte), as listpack.c names them.
const ENC_7BIT_UINT_MASK: u8 = 0x80;
const ENC_6BIT_STR: u8 = 0x80;
const ENC_6BIT_STR_MASK: u8 = 0xC0;
const ENC_13BIT_INT: u8 = 0xC0;
const ENC_13BIT_INT_MASK: u8 = 0xE0;
const ENC_12BIT_STR: u8 = 0xE0;
const ENC_12BIT_STR_MASK: u8 = 0xF0;
const ENC_32BIT_STR: u8 = 0xF0;
const ENC_16BIT_INT: u8 = 0xF1;
const ENC_24BIT_INT: u8 = 0xF2;
const ENC_32BIT_INT: u8 = 0xF3;
const ENC_64BIT_INT: u8 = 0xF4;

/// Longest string of the 6-bit and 12-bit string encodings (exclusive).
const STR_6BIT_LIMIT: usize = 1 << 6;
const STR_12BIT_LIMIT: usize = 1 << 12;

/// One listpack entry: a string or an integer (as Redis stores it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Entry<'a> {
    Str(&'a [u8]),
    Int(i64),
}

impl Entry<'_> {
    /// The entry as the string a command would see.
    pub(crate) fn to_bytes(self) -> Vec<u8> {
        match self {
            Entry::Str(s) => s.to_vec(),
            Entry::Int(i) => i.to_string().into_bytes(),
        }
    }

    /// The entry as an integer, if it is one (integer-encoded only).
    pub(crate) fn as_int(self) -> Option<i64> {
        match self {
            Entry::Int(i) => Some(i),
            Entry::Str(_) => None,
        }
    }
}

/// The size of a backlen for an entry of `len` bytes.
fn backlen_size(len: usize) -> usize {
    match len {
        0..=127 => 1,
        128..=16382 => 2,
        16383..=2097150 => 3,
        2097151..=268435454 => 4,
        _ => 5,
    }
}

/// Appends the backlen of an entry of `len` bytes.
fn put_backlen(out: &mut Vec<u8>, len: usize) {
    let n = backlen_size(len);
    for i in (0..n).rev() {
        let group = ((len >> (7 * i)) & 127) as u8;
        out.push(if i == n - 1 { group } else { group | 128 });
    }
}

/// The bytes an entry of `s` takes (encoding, data and backlen), with
/// Redis's choice of encoding.
#[cfg(test)]
pub(crate) fn entry_size(s: &[u8]) -> usize {
    let enc = match parse_i64(s) {
        Some(v) => int_encoding_size(v),
        None if s.len() < STR_6BIT_LIMIT => 1 + s.len(),
        None if s.len() < STR_12BIT_LIMIT => 2 + s.len(),
        None => 5 + s.len(),
    };
    enc + backlen_size(enc)
}

fn int_encoding_size(v: i64) -> usize {
    match v {
        0..=127 => 1,
        -4096..=4095 => 2,
        -32768..=32767 => 3,
        -8388608..=8388607 => 4,
        -2147483648..=2147483647 => 5,
        _ => 9,
    }
}

/// Builds a listpack entry by entry (Redis's `lpAppend`).
#[derive(Clone, Debug)]
pub(crate) struct Builder {
    buf: Vec<u8>,
    count: usize,
}

impl Default for Builder {
    fn default() -> Self {
        Builder::new()
    }
}

impl Builder {
    pub(crate) fn new() -> Builder {
        Builder {
            buf: vec![0; HEADER],
            count: 0,
        }
    }

    /// Entries so far.
    pub(crate) fn count(&self) -> usize {
        self.count
    }

    /// The listpack's total size so far, terminator included.
    pub(crate) fn bytes(&self) -> usize {
        self.buf.len() + 1
    }

    /// Appends a string; one that is an integer's canonical text is stored
    /// as the integer, as Redis does.
    pub(crate) fn push(&mut self, s: &[u8]) {
        match parse_i64(s) {
            Some(v) => self.push_int(v),
            None => self.push_str(s),
        }
    }

    /// Appends a string in a string encoding whatever it holds.
    pub(crate) fn push_str(&mut self, s: &[u8]) {
        let start = self.buf.len();
        if s.len() < STR_6BIT_LIMIT {
            self.buf.push(ENC_6BIT_STR | s.len() as u8);
        } else if s.len() < STR_12BIT_LIMIT {
            self.buf.push(ENC_12BIT_STR | (s.len() >> 8) as u8);
            self.buf.push(s.len() as u8);
        } else {
            self.buf.push(ENC_32BIT_STR);
            self.buf.extend_from_slice(&(s.len() as u32).to_le_bytes());
        }
        self.buf.extend_from_slice(s);
        let len = self.buf.len() - start;
        put_backlen(&mut self.buf, len);
        self.count += 1;
    }

    /// Appends an integer in its smallest encoding.
    pub(crate) fn push_int(&mut self, v: i64) {
        let start = self.buf.len();
        match int_encoding_size(v) {
            1 => self.buf.push(v as u8),
            2 => {
                let u = (v as u64) & 0x1FFF;
                self.buf.push(ENC_13BIT_INT | (u >> 8) as u8);
                self.buf.push(u as u8);
            }
            3 => {
                self.buf.push(ENC_16BIT_INT);
                self.buf.extend_from_slice(&(v as i16).to_le_bytes());
            }
            4 => {
                self.buf.push(ENC_24BIT_INT);
                self.buf.extend_from_slice(&(v as i32).to_le_bytes()[..3]);
            }
            5 => {
                self.buf.push(ENC_32BIT_INT);
                self.buf.extend_from_slice(&(v as i32).to_le_bytes());
            }
            _ => {
                self.buf.push(ENC_64BIT_INT);
                self.buf.extend_from_slice(&v.to_le_bytes());
            }
        }
        let len = self.buf.len() - start;
        put_backlen(&mut self.buf, len);
        self.count += 1;
    }

    /// The finished listpack.
    pub(crate) fn finish(mut self) -> Vec<u8> {
        self.buf.push(EOF);
        let total = self.buf.len() as u32;
        self.buf[0..4].copy_from_slice(&total.to_le_bytes());
        let count = u16::try_from(self.count).unwrap_or(COUNT_UNKNOWN);
        self.buf[4..6].copy_from_slice(&count.to_le_bytes());
        self.buf
    }
}

/// A listpack of `items` (each as [`Builder::push`]).
#[cfg(test)]
pub(crate) fn encode<'a>(items: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut b = Builder::new();
    for item in items {
        b.push(item);
    }
    b.finish()
}

fn bad(what: &str) -> Corrupt {
    Corrupt::bad(format!("Listpack integrity check failed: {what}"))
}

/// Sign-extends the low `bits` of `u`.
fn signed(u: u64, bits: u32) -> i64 {
    let shift = 64 - bits;
    ((u << shift) as i64) >> shift
}

/// Reads the entry at `p` (not the terminator): the entry and the size of
/// its encoding and data (backlen excluded), bounds-checked against `end`.
fn entry_at(lp: &[u8], p: usize, end: usize) -> Result<(Entry<'_>, usize)> {
    let byte = |i: usize| -> Result<u8> {
        if i < end {
            Ok(lp[i])
        } else {
            Err(bad("entry out of range"))
        }
    };
    let slice = |from: usize, n: usize| -> Result<&[u8]> {
        let to = from
            .checked_add(n)
            .filter(|&to| to <= end)
            .ok_or_else(|| bad("entry out of range"))?;
        Ok(&lp[from..to])
    };
    let le = |from: usize, n: usize| -> Result<u64> {
        Ok(slice(from, n)?.iter().rev().fold(0u64, |acc, &b| (acc << 8) | b as u64))
    };
    let b0 = byte(p)?;
    if b0 & ENC_7BIT_UINT_MASK == 0 {
        return Ok((Entry::Int(b0 as i64), 1));
    }
    if b0 & ENC_6BIT_STR_MASK == ENC_6BIT_STR {
        let n = (b0 & 0x3F) as usize;
        return Ok((Entry::Str(slice(p + 1, n)?), 1 + n));
    }
    if b0 & ENC_13BIT_INT_MASK == ENC_13BIT_INT {
        let u = (((b0 & 0x1F) as u64) << 8) | byte(p + 1)? as u64;
        return Ok((Entry::Int(signed(u, 13)), 2));
    }
    if b0 & ENC_12BIT_STR_MASK == ENC_12BIT_STR {
        let n = (((b0 & 0x0F) as usize) << 8) | byte(p + 1)? as usize;
        return Ok((Entry::Str(slice(p + 2, n)?), 2 + n));
    }
    match b0 {
        ENC_32BIT_STR => {
            let n = le(p + 1, 4)? as usize;
            Ok((Entry::Str(slice(p + 5, n)?), 5 + n))
        }
        ENC_16BIT_INT => Ok((Entry::Int(signed(le(p + 1, 2)?, 16)), 3)),
        ENC_24BIT_INT => Ok((Entry::Int(signed(le(p + 1, 3)?, 24)), 4)),
        ENC_32BIT_INT => Ok((Entry::Int(signed(le(p + 1, 4)?, 32)), 5)),
        ENC_64BIT_INT => Ok((Entry::Int(le(p + 1, 8)? as i64), 9)),
        _ => Err(bad("unknown entry encoding")),
    }
}

/// Reads the backlen ending at `last` (inclusive), right to left, as
/// `lpDecodeBacklen`.
fn backlen_at(lp: &[u8], last: usize, floor: usize) -> Option<usize> {
    let mut val = 0usize;
    let mut shift = 0;
    let mut p = last;
    loop {
        let b = lp[p];
        val |= ((b & 127) as usize) << shift;
        if b & 128 == 0 {
            return Some(val);
        }
        shift += 7;
        if shift > 28 || p <= floor {
            return None;
        }
        p -= 1;
    }
}

/// Every entry of a listpack, after Redis's deep validation: the header's
/// size equals the input's, the last byte is the terminator, every entry
/// and its backlen lie inside and agree, and the count matches the
/// header's (unless the header's says unknown).
pub(crate) fn decode(lp: &[u8]) -> Result<Vec<Entry<'_>>> {
    if lp.len() < HEADER + 1 {
        return Err(bad("too short"));
    }
    let total = u32::from_le_bytes([lp[0], lp[1], lp[2], lp[3]]) as usize;
    if total != lp.len() {
        return Err(bad("size in header differs"));
    }
    if lp[lp.len() - 1] != EOF {
        return Err(bad("no terminator"));
    }
    let header_count = u16::from_le_bytes([lp[4], lp[5]]);
    // Entries lie before the terminator.
    let end = lp.len() - 1;
    let mut out = vec![];
    let mut p = HEADER;
    while p < end && lp[p] != EOF {
        let (entry, len) = entry_at(lp, p, end)?;
        let back = backlen_size(len);
        let next = p
            .checked_add(len + back)
            .filter(|&n| n <= end)
            .ok_or_else(|| bad("entry out of range"))?;
        if backlen_at(lp, next - 1, p) != Some(len) {
            return Err(bad("backlen mismatch"));
        }
        out.push(entry);
        p = next;
    }
    if p != end {
        return Err(bad("terminator inside"));
    }
    if header_count != COUNT_UNKNOWN && header_count as usize != out.len() {
        return Err(bad("count in header differs"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_encoding_round_trips() {
        let long12 = vec![b'x'; 100];
        let long32 = vec![b'y'; 5000];
        let items: Vec<Vec<u8>> = vec![
            b"0".to_vec(),
            b"127".to_vec(),
            b"128".to_vec(),
            b"-4096".to_vec(),
            b"4095".to_vec(),
            b"-32768".to_vec(),
            b"32767".to_vec(),
            b"-8388608".to_vec(),
            b"8388607".to_vec(),
            b"-2147483648".to_vec(),
            b"2147483647".to_vec(),
            b"9223372036854775807".to_vec(),
            b"-9223372036854775808".to_vec(),
            b"".to_vec(),
            b"abc".to_vec(),
            b"007".to_vec(),
            long12.clone(),
            long32.clone(),
        ];
        let lp = encode(items.iter().map(|v| &v[..]));
        let entries = decode(&lp).unwrap();
        let back: Vec<Vec<u8>> = entries.iter().map(|e| e.to_bytes()).collect();
        assert_eq!(back, items);
        assert_eq!(entries[0], Entry::Int(0));
        assert_eq!(entries[15], Entry::Str(b"007"));
        // entry_size agrees with what the builder wrote.
        let sum: usize = items.iter().map(|i| entry_size(i)).sum();
        assert_eq!(sum + HEADER + 1, lp.len());
    }

    #[test]
    fn redis_s_bytes() {
        // OBJECT ENCODING listpack hash from HSET h a 1 in Redis 7.0.15:
        // DUMP's payload after the type byte is this listpack as a string.
        assert_eq!(
            encode([&b"a"[..], b"1"]),
            b"\x0c\x00\x00\x00\x02\x00\x81a\x02\x01\x01\xff".to_vec()
        );
        let b = vec![b'z'; 200];
        assert_eq!(entry_size(&b), 2 + 200 + 2);
    }

    #[test]
    fn corruption_is_an_error_never_a_panic() {
        let lp = encode([&b"hello"[..], b"12345", b"-3", &[b'q'; 300][..]]);
        assert!(decode(&lp).is_ok());
        for cut in 0..lp.len() {
            assert!(decode(&lp[..cut]).is_err());
        }
        for i in 0..lp.len() {
            for flip in [1u8, 0x80, 0xFF] {
                let mut bad = lp.clone();
                bad[i] ^= flip;
                let _ = decode(&bad);
            }
        }
        // A wrong count.
        let mut bad = lp.clone();
        bad[4] = 3;
        assert!(decode(&bad).is_err());
        // An unknown count is accepted.
        bad[4] = 0xFF;
        bad[5] = 0xFF;
        assert_eq!(decode(&bad).unwrap().len(), 4);
    }
}
