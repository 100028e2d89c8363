//! Number parsing and printing with Redis's exact rules.
//!
//! Integers follow Redis's `string2ll` (no `+`, no leading zeros, no spaces).
//! Floats go through a small C helper (`csrc/redisnum.c`) because Redis uses
//! `strtod`/`strtold`, `long double` arithmetic and `printf` formats that Rust
//! does not reproduce byte for byte.

use std::os::raw::{c_char, c_int};

extern "C" {
    fn coordis_incrbyfloat(
        cur: *const c_char,
        curlen: usize,
        incr: *const c_char,
        incrlen: usize,
        out: *mut c_char,
        outcap: usize,
        outlen: *mut usize,
    ) -> c_int;
    fn coordis_string2d(s: *const c_char, slen: usize, out: *mut f64) -> c_int;
    fn coordis_fmt_g17(d: f64, out: *mut c_char, outcap: usize) -> c_int;
    fn coordis_strtod_range(s: *const c_char, slen: usize, out: *mut f64) -> c_int;
    fn coordis_timeout_ms(s: *const c_char, slen: usize, ms: *mut i64) -> c_int;
}

/// Parses a signed 64-bit integer exactly as Redis's `string2ll` does.
pub(crate) fn parse_i64(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    if s == b"0" {
        return Some(0);
    }
    let (neg, digits) = if s[0] == b'-' { (true, &s[1..]) } else { (false, s) };
    if digits.is_empty() || !(b'1'..=b'9').contains(&digits[0]) {
        return None;
    }
    let mut v: u64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add((c - b'0') as u64)?;
    }
    if neg {
        if v > (i64::MAX as u64) + 1 {
            return None;
        }
        Some((v as i64).wrapping_neg())
    } else {
        i64::try_from(v).ok()
    }
}

/// Outcome of INCRBYFLOAT's arithmetic.
#[derive(Debug, PartialEq)]
pub(crate) enum FloatIncr {
    Ok(Vec<u8>),
    NotAFloat,
    NanOrInfinity,
}

/// `cur + incr` in `long double`, printed as Redis prints it (`%.17Lf`,
/// trailing zeros removed). `cur` is `None` for a missing key.
pub(crate) fn incr_by_float(cur: Option<&[u8]>, incr: &[u8]) -> FloatIncr {
    let mut out = vec![0u8; 5 * 1024 + 32];
    let mut len = 0usize;
    let (cp, cl) = match cur {
        Some(c) => (c.as_ptr() as *const c_char, c.len()),
        None => (std::ptr::null(), 0),
    };
    // SAFETY: pointers and lengths describe live slices; the C side never
    // writes past `outcap` and only reads `curlen`/`incrlen` bytes.
    let rc = unsafe {
        coordis_incrbyfloat(
            cp,
            cl,
            incr.as_ptr() as *const c_char,
            incr.len(),
            out.as_mut_ptr() as *mut c_char,
            out.len(),
            &mut len,
        )
    };
    match rc {
        0 => {
            out.truncate(len);
            FloatIncr::Ok(out)
        }
        2 => FloatIncr::NanOrInfinity,
        _ => FloatIncr::NotAFloat,
    }
}

/// Parses a double as Redis's `getDoubleFromObject` (`strtod`; accepts `inf`,
/// `-inf`, hex floats; rejects NaN, spaces, trailing bytes, overflow).
pub(crate) fn parse_f64(s: &[u8]) -> Option<f64> {
    if let Some(v) = parse_plain_decimal(s) {
        return Some(v);
    }
    let mut v = 0f64;
    // SAFETY: the C side reads exactly `s.len()` bytes and writes one f64.
    let ok = unsafe { coordis_string2d(s.as_ptr() as *const c_char, s.len(), &mut v) };
    (ok == 1).then_some(v)
}

/// Longest argument [`parse_plain_decimal`] reads: too short for a plain
/// decimal to overflow or to underflow to zero (each needs 300 digits).
const PLAIN_DECIMAL_MAX: usize = 40;

/// A plain decimal (`-`? digits, at most one `.`, at least one digit, no
/// exponent, no spaces) parsed in Rust, which rounds correctly to the
/// nearest double as glibc's `strtod` does, so the value is the same: a
/// few dozen instructions where `strtod` took thousands (GEOSEARCH's
/// coordinates, ZADD's scores). `None`: anything else, for `strtod`.
fn parse_plain_decimal(s: &[u8]) -> Option<f64> {
    let digits = s.strip_prefix(b"-").unwrap_or(s);
    let plain = s.len() <= PLAIN_DECIMAL_MAX
        && digits.iter().any(u8::is_ascii_digit)
        && digits.iter().all(|&b| b.is_ascii_digit() || b == b'.')
        && digits.iter().filter(|&&b| b == b'.').count() <= 1;
    if !plain {
        return None;
    }
    std::str::from_utf8(s).ok()?.parse().ok()
}

/// Parses one bound of a score range as Redis's `zslParseRange` does (plain
/// `strtod`: an empty string is 0, overflow is ±inf, NaN is refused).
pub(crate) fn parse_range_f64(s: &[u8]) -> Option<f64> {
    let mut v = 0f64;
    // SAFETY: the C side reads exactly `s.len()` bytes and writes one f64.
    let ok = unsafe { coordis_strtod_range(s.as_ptr() as *const c_char, s.len(), &mut v) };
    (ok == 1).then_some(v)
}

/// C's `strtod` over the whole argument, as SORT reads its scores: leading
/// spaces, hex floats and `inf` are accepted; trailing bytes, overflow
/// (`ERANGE`) and NaN are not.
pub(crate) fn strtod_whole(s: &[u8]) -> Option<f64> {
    let text = std::ffi::CString::new(s).ok()?;
    let mut end: *mut c_char = std::ptr::null_mut();
    // SAFETY: `text` is NUL-terminated and outlives the call; `end` points
    // into it afterwards. errno is this thread's own.
    let (v, consumed, range_error) = unsafe {
        *libc::__errno_location() = 0;
        let v = libc::strtod(text.as_ptr(), &mut end);
        (
            v,
            end.offset_from(text.as_ptr()) as usize,
            *libc::__errno_location() == libc::ERANGE,
        )
    };
    (consumed == s.len() && !range_error && !v.is_nan()).then_some(v)
}

/// A blocking command's timeout in seconds, as Redis reads it
/// (`getTimeoutFromObjectOrReply`): a `long double`, times 1000, rounded up
/// to whole milliseconds. `None` when it is not a float; a negative result
/// (`-1`, but also `inf` and values past `long long`) is Redis's "timeout is
/// negative".
pub(crate) fn timeout_ms(s: &[u8]) -> Option<i64> {
    let mut ms = 0i64;
    // SAFETY: the C side reads exactly `s.len()` bytes and writes one i64.
    let ok = unsafe { coordis_timeout_ms(s.as_ptr() as *const c_char, s.len(), &mut ms) };
    (ok == 1).then_some(ms)
}

/// C's `atof`: the longest number at the start of `s` (after spaces), 0
/// when there is none, as Redis reads DEBUG's arguments.
pub(crate) fn atof(s: &[u8]) -> f64 {
    let Ok(text) = std::ffi::CString::new(s) else {
        return 0.0;
    };
    // SAFETY: `text` is NUL-terminated and outlives the call.
    unsafe { libc::atof(text.as_ptr()) }
}

/// C's `atoi`: the integer at the start of `s` (after spaces), 0 when
/// there is none, as Redis reads DEBUG's switches (`1x` is 1, `0x1` is 0).
pub(crate) fn atoi(s: &[u8]) -> i32 {
    // C reads up to the first NUL (Redis's arguments may hold one).
    let text = s.split(|&b| b == 0).next().unwrap_or_default();
    let Ok(text) = std::ffi::CString::new(text) else {
        return 0;
    };
    // SAFETY: `text` is NUL-terminated and outlives the call.
    unsafe { libc::atoi(text.as_ptr()) }
}

/// `printf("%.17g", d)`.
pub(crate) fn fmt_g17(d: f64) -> String {
    let mut buf = [0u8; 64];
    // SAFETY: the C side writes at most `buf.len()` bytes including the NUL.
    let len = unsafe { coordis_fmt_g17(d, buf.as_mut_ptr() as *mut c_char, buf.len()) };
    String::from_utf8_lossy(&buf[..len.max(0) as usize]).into_owned()
}

/// A double as Redis's human-friendly long double text (`ld2string` in
/// `LD_STR_HUMAN` mode, what GEOPOS and WITHCOORD reply): `%.17Lf` (the
/// long double holds the double exactly), trailing zeros and a bare point
/// trimmed, `-0` as `0`, infinities spelled `inf`/`-inf`. Rust's fixed
/// formatting rounds the exact value half to even, as glibc's `printf`.
pub(crate) fn fmt_human(d: f64) -> String {
    if d.is_infinite() {
        return if d > 0.0 { "inf".into() } else { "-inf".into() };
    }
    let mut text = format!("{d:.17}");
    if text.contains('.') {
        let kept = text.trim_end_matches('0').trim_end_matches('.').len();
        text.truncate(kept);
    }
    if text == "-0" {
        text = "0".into();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atoi_reads_as_c_reads_a_switch() {
        for (text, n) in [
            (&b"1"[..], 1),
            (b"1x", 1),
            (b" 7", 7),
            (b"-1", -1),
            (b"0x1", 0),
            (b"0.9", 0),
            (b"abc", 0),
            (b"", 0),
            (b"1\0 2", 1),
        ] {
            assert_eq!(atoi(text), n, "{text:?}");
        }
    }

    #[test]
    fn plain_decimals_parse_as_strtod_parses_them() {
        let strtod = |s: &str| {
            let mut v = 0f64;
            // SAFETY: as in `parse_f64`.
            let ok = unsafe { coordis_string2d(s.as_ptr() as *const c_char, s.len(), &mut v) };
            (ok == 1).then_some(v)
        };
        let mut rng = fastrand::Rng::with_seed(11);
        let mut cases: Vec<String> = [
            "0",
            "-0",
            "1.",
            ".5",
            "-.5",
            "13.5",
            "38.5",
            "0.1",
            "1.7976931348623157",
            ".",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        for _ in 0..20_000 {
            let int: String = (0..rng.usize(0..20)).map(|_| rng.digit(10)).collect();
            let frac: String = (0..rng.usize(0..20)).map(|_| rng.digit(10)).collect();
            let sign = if rng.bool() { "-" } else { "" };
            cases.push(format!("{sign}{int}.{frac}"));
            cases.push(format!("{sign}{int}"));
        }
        for case in cases {
            let fast = parse_plain_decimal(case.as_bytes());
            if let Some(v) = fast {
                assert_eq!(Some(v.to_bits()), strtod(&case).map(f64::to_bits), "{case:?}");
            } else {
                assert!(
                    strtod(&case).is_none() || !case.bytes().any(|b| b.is_ascii_digit()),
                    "{case:?}"
                );
            }
        }
    }

    #[test]
    fn human_doubles_trim_like_ld2string() {
        assert_eq!(fmt_human(13.361389338970184), "13.36138933897018433");
        assert_eq!(fmt_human(180.0), "180");
        assert_eq!(fmt_human(-0.0), "0");
        assert_eq!(fmt_human(0.5), "0.5");
        assert_eq!(fmt_human(-1e-20), "0");
        assert_eq!(fmt_human(f64::NEG_INFINITY), "-inf");
    }

    #[test]
    fn string2ll_rules() {
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"-12"), Some(-12));
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        for bad in [
            &b""[..],
            b"+1",
            b"01",
            b"-0",
            b" 1",
            b"1 ",
            b"9223372036854775808",
            b"1a",
            b"-",
        ] {
            assert_eq!(parse_i64(bad), None, "{:?}", bad);
        }
    }

    #[test]
    fn long_double_increments_print_like_redis() {
        assert_eq!(incr_by_float(Some(b"10.5"), b"0.1"), FloatIncr::Ok(b"10.6".to_vec()));
        assert_eq!(
            incr_by_float(Some(b"10.6"), b"1e10"),
            FloatIncr::Ok(b"10000000010.59999999962747097".to_vec())
        );
        assert_eq!(incr_by_float(Some(b"3.0e3"), b"0"), FloatIncr::Ok(b"3000".to_vec()));
        assert_eq!(incr_by_float(None, b"-0"), FloatIncr::Ok(b"0".to_vec()));
        assert_eq!(incr_by_float(Some(b"1"), b" 1"), FloatIncr::NotAFloat);
        assert_eq!(incr_by_float(Some(b"1"), b"nan"), FloatIncr::NotAFloat);
    }

    #[test]
    fn doubles() {
        assert_eq!(parse_f64(b"inf"), Some(f64::INFINITY));
        assert_eq!(parse_f64(b"0x1p3"), Some(8.0));
        assert_eq!(parse_f64(b"1e400"), None);
        assert_eq!(parse_f64(b"1 "), None);
        assert_eq!(fmt_g17(0.1), "0.10000000000000001");
        assert_eq!(fmt_g17(1e20), "1e+20");
        assert_eq!(fmt_g17(2.5), "2.5");
        assert_eq!(parse_range_f64(b""), Some(0.0));
        assert_eq!(parse_range_f64(b" 1"), Some(1.0));
        assert_eq!(parse_range_f64(b"1e400"), Some(f64::INFINITY));
        assert_eq!(parse_range_f64(b"nan"), None);
        assert_eq!(parse_range_f64(b"1x"), None);
    }
}
