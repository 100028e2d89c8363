//! The RDB format's primitives: lengths, strings, doubles and times, as
//! Redis 7.0.15's `rdb.c` writes and reads them. Values and whole files
//! are built from these; the stream codec uses them too.
//!
//! # API (stable: the stream codec and the file code build on it)
//!
//! Writer, [`Out`] (bytes appended to a `Vec<u8>`):
//! - `Out::new(compress)`: `compress` is `rdbcompression` (LZF for strings
//!   longer than 20 bytes, as Redis).
//! - `put_u8`, `put_bytes`, `put_u32_be`, `put_u64_be`: raw fields.
//! - `put_len(n)`: a length (6/14/32/64-bit form, the shortest as Redis).
//! - `put_string(s)`: a string: int-encoded (8/16/32-bit) when `s` is the
//!   canonical text of such an integer, else LZF when enabled and it
//!   shrinks by more than four bytes, else plain.
//! - `put_int(i)`: an integer as a string (Redis's
//!   `rdbSaveLongLongAsStringObject`).
//! - `put_double_bin(d)` (ZSET_2 scores), `put_double_text(d)` (old ZSET, tests only:
//!   Redis 7 writes ZSET_2),
//!   `put_ms(t)` (expiry and stream times, i64 LE).
//!
//! Reader, [`Input`] over `&[u8]` (every read is bounds-checked and returns
//! [`Corrupt`], never panics):
//! - `u8()`, `bytes(n)`, `u64_le()`, `u32_be()`,
//!   `u64_be()`, `i32_le()`.
//! - `len()`: a plain length (an encoded one is an error); `len_or_enc()`:
//!   [`Len`] (a length or a special string encoding's number).
//! - `string()`: any string (plain, int-encoded, LZF) as bytes.
//! - `double_bin()`, `double_text()`, `ms()`, `secs()`.
//! - `pos()`, `rest()`, `is_empty()`.

use std::borrow::Cow;
use std::fmt;

use super::lzf;
#[cfg(test)]
use crate::store::num::fmt_g17;
use crate::store::num::parse_i64;

/// The RDB version coordis writes (Redis 7.0's).
pub(crate) const RDB_VERSION: u16 = 10;

/// A length's first byte: the top two bits say the form.
const LEN_6BIT: u8 = 0;
const LEN_14BIT: u8 = 1;
const LEN_ENCVAL: u8 = 3;
const LEN_32BIT: u8 = 0x80;
const LEN_64BIT: u8 = 0x81;

/// Special string encodings (after a `LEN_ENCVAL` first byte).
pub(crate) const ENC_INT8: u8 = 0;
pub(crate) const ENC_INT16: u8 = 1;
pub(crate) const ENC_INT32: u8 = 2;
pub(crate) const ENC_LZF: u8 = 3;

/// Redis compresses only strings longer than this ("under 20 bytes it's
/// unable to compress even aaaaaaaaaaaaaaaaaa").
const LZF_MIN_LEN: usize = 20;
/// LZF must save at least this many bytes to be used.
const LZF_MIN_GAIN: usize = 4;
/// Strings this long or shorter are tried as integers.
const INT_MAX_TEXT: usize = 11;

/// Text doubles' special lengths.
const DOUBLE_NAN: u8 = 253;
const DOUBLE_POS_INF: u8 = 254;
const DOUBLE_NEG_INF: u8 = 255;

/// Why bytes are not a valid RDB (the reason goes to the log; RESTORE
/// answers Redis's one text whatever it is).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Corrupt {
    /// The input ended inside a field (Redis's "Short read").
    ShortRead,
    /// A field is malformed; the text says which.
    Bad(String),
    /// A value with no elements (Redis skips such a key when loading a
    /// file, and RESTORE refuses it).
    EmptyKey,
    /// The file's CRC-64 differs from its bytes': `expected` is the one
    /// computed, `got` the one stored (Redis's names in its log line).
    Checksum { expected: u64, got: u64 },
}

impl Corrupt {
    pub(crate) fn bad(reason: impl Into<String>) -> Corrupt {
        Corrupt::Bad(reason.into())
    }

    /// What Redis's loader logs for this failure: the line it writes first
    /// (for a short read and a checksum mismatch), and the reason its
    /// `rdbReportError` line gives after `->`.
    pub(crate) fn report(&self) -> (Option<String>, String) {
        match self {
            Corrupt::ShortRead => (Some(self.to_string()), "Unexpected EOF reading RDB file".into()),
            Corrupt::Checksum { .. } => (Some(self.to_string()), "RDB CRC error".into()),
            Corrupt::Bad(_) | Corrupt::EmptyKey => (None, self.to_string()),
        }
    }
}

impl fmt::Display for Corrupt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Corrupt::ShortRead => f.write_str("Short read or OOM loading DB. Unrecoverable error, aborting now."),
            Corrupt::Bad(reason) => f.write_str(reason),
            Corrupt::EmptyKey => f.write_str("Empty keys skipped"),
            Corrupt::Checksum { expected, got } => {
                write!(
                    f,
                    "Wrong RDB checksum expected: ({expected:x}) but got ({got:x}). Aborting now."
                )
            }
        }
    }
}

/// Results of the readers.
pub(crate) type Result<T> = std::result::Result<T, Corrupt>;

/// A length field: a plain length, or a special string encoding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Len {
    Len(u64),
    Enc(u8),
}

/// Appends RDB fields to a buffer (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct Out {
    pub(crate) buf: Vec<u8>,
    /// `rdbcompression`: strings longer than 20 bytes are LZF-compressed.
    pub(crate) compress: bool,
}

impl Out {
    pub(crate) fn new(compress: bool) -> Out {
        Out {
            buf: Vec::new(),
            compress,
        }
    }

    pub(crate) fn put_u8(&mut self, b: u8) {
        self.buf.push(b);
    }

    pub(crate) fn put_bytes(&mut self, b: &[u8]) {
        self.buf.extend_from_slice(b);
    }

    pub(crate) fn put_u32_be(&mut self, v: u32) {
        self.put_bytes(&v.to_be_bytes());
    }

    pub(crate) fn put_u64_be(&mut self, v: u64) {
        self.put_bytes(&v.to_be_bytes());
    }

    /// A length in its shortest form (Redis's `rdbSaveLen`).
    pub(crate) fn put_len(&mut self, len: u64) {
        if len < 1 << 6 {
            self.put_u8(len as u8 | (LEN_6BIT << 6));
        } else if len < 1 << 14 {
            self.put_u8(((len >> 8) as u8) | (LEN_14BIT << 6));
            self.put_u8(len as u8);
        } else if len <= u32::MAX as u64 {
            self.put_u8(LEN_32BIT);
            self.put_u32_be(len as u32);
        } else {
            self.put_u8(LEN_64BIT);
            self.put_u64_be(len);
        }
    }

    /// An integer's special encoding, if it fits 32 bits.
    fn put_encoded_int(&mut self, v: i64) -> bool {
        if let Ok(v) = i8::try_from(v) {
            self.put_bytes(&[(LEN_ENCVAL << 6) | ENC_INT8, v as u8]);
        } else if let Ok(v) = i16::try_from(v) {
            self.put_u8((LEN_ENCVAL << 6) | ENC_INT16);
            self.put_bytes(&v.to_le_bytes());
        } else if let Ok(v) = i32::try_from(v) {
            self.put_u8((LEN_ENCVAL << 6) | ENC_INT32);
            self.put_bytes(&v.to_le_bytes());
        } else {
            return false;
        }
        true
    }

    /// A string, as Redis's `rdbSaveRawString` (see the module docs).
    pub(crate) fn put_string(&mut self, s: &[u8]) {
        if s.len() <= INT_MAX_TEXT {
            if let Some(v) = parse_i64(s) {
                if self.put_encoded_int(v) {
                    return;
                }
            }
        }
        if self.compress && s.len() > LZF_MIN_LEN {
            if let Some(c) = lzf::compress(s, s.len() - LZF_MIN_GAIN) {
                self.put_u8((LEN_ENCVAL << 6) | ENC_LZF);
                self.put_len(c.len() as u64);
                self.put_len(s.len() as u64);
                self.put_bytes(&c);
                return;
            }
        }
        self.put_len(s.len() as u64);
        self.put_bytes(s);
    }

    /// An integer as a string (Redis's `rdbSaveLongLongAsStringObject`).
    pub(crate) fn put_int(&mut self, v: i64) {
        if !self.put_encoded_int(v) {
            let text = v.to_string();
            self.put_len(text.len() as u64);
            self.put_bytes(text.as_bytes());
        }
    }

    /// A binary double (little-endian IEEE 754), as ZSET_2 scores.
    pub(crate) fn put_double_bin(&mut self, d: f64) {
        self.put_bytes(&d.to_le_bytes());
    }

    /// A text double (old ZSET): a length byte, then the text (`%.17g`,
    /// or the integer's digits when the double is one), or 253/254/255
    /// for NaN, +inf and -inf.
    #[cfg(test)]
    pub(crate) fn put_double_text(&mut self, d: f64) {
        if d.is_nan() {
            self.put_u8(DOUBLE_NAN);
        } else if d.is_infinite() {
            self.put_u8(if d < 0.0 { DOUBLE_NEG_INF } else { DOUBLE_POS_INF });
        } else {
            // Redis's double2ll: integral and within ±LLONG_MAX/2.
            let half = (i64::MAX / 2) as f64;
            let text = if (-half..=half).contains(&d) && (d as i64) as f64 == d {
                (d as i64).to_string()
            } else {
                fmt_g17(d)
            };
            self.put_u8(text.len() as u8);
            self.put_bytes(text.as_bytes());
        }
    }

    /// A time in milliseconds (i64 little-endian).
    pub(crate) fn put_ms(&mut self, t: i64) {
        self.put_bytes(&t.to_le_bytes());
    }
}

/// Reads RDB fields from bytes (see the module docs).
#[derive(Clone, Debug)]
pub(crate) struct Input<'a> {
    buf: &'a [u8],
    pos: usize,
    /// The last read that came up short: where it started and the length
    /// the input would have needed for it ([`Input::short`]).
    short: (usize, usize),
}

impl<'a> Input<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Input<'a> {
        Input {
            buf,
            pos: 0,
            short: (0, 0),
        }
    }

    /// A short read of `n` bytes at the current position, remembered so
    /// that a caller fed more input later knows when retrying can get past
    /// it (a count of `n` elements needs `n` bytes at least).
    pub(crate) fn short_of(&mut self, n: usize) -> Corrupt {
        self.short = (self.pos, self.pos.saturating_add(n));
        Corrupt::ShortRead
    }

    /// After a [`Corrupt::ShortRead`]: where the read that failed started,
    /// and the input's length it needs (`usize::MAX`: more than memory).
    pub(crate) fn short(&self) -> (usize, usize) {
        self.short
    }

    /// Bytes consumed so far.
    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    /// The bytes not yet read.
    pub(crate) fn rest(&self) -> &'a [u8] {
        &self.buf[self.pos..]
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }

    pub(crate) fn bytes(&mut self, n: usize) -> Result<&'a [u8]> {
        let Some(out) = self.pos.checked_add(n).and_then(|end| self.buf.get(self.pos..end)) else {
            return Err(self.short_of(n));
        };
        self.pos += n;
        Ok(out)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let b = self.bytes(N)?;
        let mut out = [0u8; N];
        out.copy_from_slice(b);
        Ok(out)
    }

    pub(crate) fn u8(&mut self) -> Result<u8> {
        Ok(self.array::<1>()?[0])
    }

    pub(crate) fn i32_le(&mut self) -> Result<i32> {
        Ok(i32::from_le_bytes(self.array()?))
    }

    pub(crate) fn u64_le(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    pub(crate) fn u32_be(&mut self) -> Result<u32> {
        Ok(u32::from_be_bytes(self.array()?))
    }

    pub(crate) fn u64_be(&mut self) -> Result<u64> {
        Ok(u64::from_be_bytes(self.array()?))
    }

    /// A length or a special encoding (Redis's `rdbLoadLenByRef`).
    pub(crate) fn len_or_enc(&mut self) -> Result<Len> {
        let first = self.u8()?;
        Ok(match first >> 6 {
            LEN_ENCVAL => Len::Enc(first & 0x3F),
            LEN_6BIT => Len::Len((first & 0x3F) as u64),
            LEN_14BIT => Len::Len((((first & 0x3F) as u64) << 8) | self.u8()? as u64),
            _ if first == LEN_32BIT => Len::Len(self.u32_be()? as u64),
            _ if first == LEN_64BIT => Len::Len(self.u64_be()?),
            _ => {
                return Err(Corrupt::bad(format!(
                    "Unknown length encoding {} in rdbLoadLen()",
                    first >> 6
                )))
            }
        })
    }

    /// A plain length (a special encoding here is corrupt).
    pub(crate) fn len(&mut self) -> Result<u64> {
        match self.len_or_enc()? {
            Len::Len(n) => Ok(n),
            Len::Enc(e) => Err(Corrupt::bad(format!("Unexpected encoded length {e}"))),
        }
    }

    /// A length that must fit in memory (a count or size of what follows).
    pub(crate) fn len_usize(&mut self) -> Result<usize> {
        let n = self.len()?;
        usize::try_from(n).map_err(|_| self.short_of(usize::MAX))
    }

    /// A string in any of its forms (Redis's `rdbGenericLoadStringObject`).
    pub(crate) fn string(&mut self) -> Result<Cow<'a, [u8]>> {
        match self.len_or_enc()? {
            Len::Len(n) => {
                let n = usize::try_from(n).map_err(|_| self.short_of(usize::MAX))?;
                Ok(Cow::Borrowed(self.bytes(n)?))
            }
            Len::Enc(ENC_INT8) => Ok(Cow::Owned((self.u8()? as i8).to_string().into_bytes())),
            Len::Enc(ENC_INT16) => Ok(Cow::Owned(i16::from_le_bytes(self.array()?).to_string().into_bytes())),
            Len::Enc(ENC_INT32) => Ok(Cow::Owned(self.i32_le()?.to_string().into_bytes())),
            Len::Enc(ENC_LZF) => {
                let clen = self.len_usize()?;
                let len = self.len_usize()?;
                let c = self.bytes(clen)?;
                lzf::decompress(c, len)
                    .map(Cow::Owned)
                    .ok_or_else(|| Corrupt::bad("Invalid LZF compressed string"))
            }
            Len::Enc(e) => Err(Corrupt::bad(format!("Unknown RDB string encoding type {e}"))),
        }
    }

    /// A binary double (ZSET_2).
    pub(crate) fn double_bin(&mut self) -> Result<f64> {
        Ok(f64::from_le_bytes(self.array()?))
    }

    /// A text double (old ZSET; Redis's `rdbLoadDoubleValue`).
    pub(crate) fn double_text(&mut self) -> Result<f64> {
        match self.u8()? {
            DOUBLE_NEG_INF => Ok(f64::NEG_INFINITY),
            DOUBLE_POS_INF => Ok(f64::INFINITY),
            DOUBLE_NAN => Ok(f64::NAN),
            n => {
                let text = self.bytes(n as usize)?;
                std::str::from_utf8(text)
                    .ok()
                    .and_then(|t| t.trim().parse::<f64>().ok())
                    .ok_or_else(|| Corrupt::bad("Invalid double value"))
            }
        }
    }

    /// A time in milliseconds (i64 little-endian).
    pub(crate) fn ms(&mut self) -> Result<i64> {
        Ok(self.u64_le()? as i64)
    }

    /// An old time in seconds (i32 little-endian; `EXPIRETIME`).
    pub(crate) fn secs(&mut self) -> Result<i32> {
        self.i32_le()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(f: impl FnOnce(&mut Out)) -> Vec<u8> {
        let mut out = Out::new(true);
        f(&mut out);
        out.buf
    }

    #[test]
    fn lengths_in_every_form() {
        for (n, bytes) in [
            (0u64, vec![0x00]),
            (63, vec![0x3F]),
            (64, vec![0x40, 0x40]),
            (16383, vec![0x7F, 0xFF]),
            (16384, vec![0x80, 0, 0, 0x40, 0]),
            (u32::MAX as u64, vec![0x80, 0xFF, 0xFF, 0xFF, 0xFF]),
            (1 << 32, vec![0x81, 0, 0, 0, 1, 0, 0, 0, 0]),
        ] {
            assert_eq!(put(|o| o.put_len(n)), bytes, "{n}");
            let mut input = Input::new(&bytes);
            assert_eq!(input.len().unwrap(), n);
            assert!(input.is_empty());
            // Every truncation is a short read.
            for cut in 0..bytes.len() {
                assert_eq!(Input::new(&bytes[..cut]).len(), Err(Corrupt::ShortRead));
            }
        }
        assert!(matches!(Input::new(&[0x82]).len(), Err(Corrupt::Bad(_))));
        assert_eq!(Input::new(&[0xC3]).len_or_enc().unwrap(), Len::Enc(ENC_LZF));
        assert!(Input::new(&[0xC0, 1]).len().is_err());
    }

    #[test]
    fn strings_int_encoded_as_redis() {
        assert_eq!(put(|o| o.put_string(b"12")), vec![0xC0, 12]);
        assert_eq!(put(|o| o.put_string(b"-128")), vec![0xC0, 0x80]);
        assert_eq!(put(|o| o.put_string(b"300")), vec![0xC1, 0x2C, 0x01]);
        assert_eq!(put(|o| o.put_string(b"-70000")), vec![0xC2, 0x90, 0xEE, 0xFE, 0xFF]);
        // Not canonical, or too wide: plain.
        assert_eq!(put(|o| o.put_string(b"012")), b"\x03012".to_vec());
        assert_eq!(put(|o| o.put_string(b"+1")), b"\x02+1".to_vec());
        assert_eq!(put(|o| o.put_string(b"4294967296")), b"\x0a4294967296".to_vec());
        assert_eq!(put(|o| o.put_int(4294967296)), b"\x0a4294967296".to_vec());
        assert_eq!(put(|o| o.put_int(-1)), vec![0xC0, 0xFF]);
        for s in [&b"12"[..], b"-128", b"300", b"-70000", b"", b"abc"] {
            let bytes = put(|o| o.put_string(s));
            assert_eq!(&*Input::new(&bytes).string().unwrap(), s);
        }
    }

    #[test]
    fn strings_compressed_as_redis() {
        // Redis 7.0.15's DUMP of SET k <"a" x 30>, less the type byte and trailer.
        let a30 = b"a".repeat(30);
        let bytes = put(|o| o.put_string(&a30));
        assert_eq!(bytes, b"\xc3\x09\x1e\x01aa\xe0\x11\x00\x01aa".to_vec());
        assert_eq!(&*Input::new(&bytes).string().unwrap(), &a30[..]);
        // Not compressed without rdbcompression, nor at 20 bytes.
        let mut plain = Out::new(false);
        plain.put_string(&a30);
        assert_eq!(plain.buf[0], 30);
        assert_eq!(put(|o| o.put_string(&a30[..20]))[0], 20);
        // A compressed string that lies about its size.
        let mut bad = bytes.clone();
        bad[2] = 31;
        assert!(matches!(Input::new(&bad).string(), Err(Corrupt::Bad(_))));
        for cut in 0..bytes.len() {
            assert!(Input::new(&bytes[..cut]).string().is_err());
        }
    }

    #[test]
    fn doubles_and_times() {
        let bytes = put(|o| o.put_double_bin(1.5));
        assert_eq!(Input::new(&bytes).double_bin().unwrap(), 1.5);
        assert_eq!(put(|o| o.put_double_text(3.0)), b"\x013".to_vec());
        assert_eq!(put(|o| o.put_double_text(1.5)), b"\x031.5".to_vec());
        assert_eq!(put(|o| o.put_double_text(f64::INFINITY)), vec![254]);
        assert_eq!(put(|o| o.put_double_text(f64::NEG_INFINITY)), vec![255]);
        assert!(Input::new(&[253]).double_text().unwrap().is_nan());
        assert_eq!(Input::new(b"\x031.5").double_text().unwrap(), 1.5);
        assert!(Input::new(b"\x03abc").double_text().is_err());
        assert!(Input::new(b"\x031.").double_text().is_err());
        let bytes = put(|o| o.put_ms(1_700_000_000_123));
        assert_eq!(Input::new(&bytes).ms().unwrap(), 1_700_000_000_123);
        assert!(Input::new(&bytes[..7]).ms().is_err());
    }
}
