//! Zipmaps (Redis's `zipmap.c`), read only: hashes in RDB files of Redis
//! 2.x (HASH_ZIPMAP). Reading validates as `zipmapValidateIntegrity`.

use super::codec::{Corrupt, Result};

/// A length's first byte at this value means four more bytes follow.
const BIGLEN: u8 = 254;
/// The terminator.
const END: u8 = 255;

fn bad(what: &str) -> Corrupt {
    Corrupt::bad(format!("Zipmap integrity check failed: {what}"))
}

/// The field-value pairs of a zipmap.
pub(crate) fn decode(zm: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    if zm.len() < 2 || zm[zm.len() - 1] != END {
        return Err(bad("too short or no terminator"));
    }
    let last = zm.len() - 1;
    let get = |i: usize| -> Result<u8> {
        if i <= last {
            Ok(zm[i])
        } else {
            Err(bad("out of range"))
        }
    };
    let length = |p: usize| -> Result<(usize, usize)> {
        if get(p)? < BIGLEN {
            Ok((zm[p] as usize, p + 1))
        } else {
            let b = [get(p + 1)?, get(p + 2)?, get(p + 3)?, get(p + 4)?];
            Ok((u32::from_le_bytes(b) as usize, p + 5))
        }
    };
    let mut out = vec![];
    let mut p = 1;
    while get(p)? != END {
        let (klen, k) = length(p)?;
        let kend = k
            .checked_add(klen)
            .filter(|&e| e <= last)
            .ok_or_else(|| bad("out of range"))?;
        let (vlen, v) = length(kend)?;
        let free = get(v)? as usize;
        let vstart = v + 1;
        let vend = vstart
            .checked_add(vlen)
            .filter(|&e| e <= last)
            .ok_or_else(|| bad("out of range"))?;
        p = vend
            .checked_add(free)
            .filter(|&e| e <= last)
            .ok_or_else(|| bad("out of range"))?;
        out.push((zm[k..kend].to_vec(), zm[vstart..vend].to_vec()));
    }
    if p != last {
        return Err(bad("terminator inside"));
    }
    if out.is_empty() {
        return Err(bad("empty"));
    }
    if zm[0] != BIGLEN && zm[0] as usize != out.len() {
        return Err(bad("count differs"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_and_free_space() {
        // {"a": "xy", "bc": ""} with one free byte after "xy".
        let zm = b"\x02\x01a\x02\x01xy\x00\x02bc\x00\x00\xff";
        assert_eq!(
            decode(zm).unwrap(),
            vec![(b"a".to_vec(), b"xy".to_vec()), (b"bc".to_vec(), b"".to_vec())]
        );
        for cut in 0..zm.len() {
            assert!(decode(&zm[..cut]).is_err());
        }
        let mut count = zm.to_vec();
        count[0] = 3;
        assert!(decode(&count).is_err());
        assert!(decode(b"\x00\xff").is_err());
    }
}
