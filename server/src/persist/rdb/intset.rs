//! Intsets (Redis's `intset.c`): a sorted array of integers of one width
//! (2, 4 or 8 bytes), the SET_INTSET encoding. Writing uses the smallest
//! width that holds every member; reading validates as
//! `intsetValidateIntegrity` (width, size, sorted without duplicates).

use super::codec::{Corrupt, Result};

/// Width (u32 LE) and count (u32 LE).
const HEADER: usize = 8;

/// The intset of `members`, sorted by the caller or not.
pub(crate) fn encode(members: &[i64]) -> Vec<u8> {
    let mut sorted = members.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let width: usize = if sorted.iter().all(|&v| i16::try_from(v).is_ok()) {
        2
    } else if sorted.iter().all(|&v| i32::try_from(v).is_ok()) {
        4
    } else {
        8
    };
    let mut out = Vec::with_capacity(HEADER + width * sorted.len());
    out.extend_from_slice(&(width as u32).to_le_bytes());
    out.extend_from_slice(&(sorted.len() as u32).to_le_bytes());
    for v in sorted {
        out.extend_from_slice(&v.to_le_bytes()[..width]);
    }
    out
}

fn bad(what: &str) -> Corrupt {
    Corrupt::bad(format!("Intset integrity check failed: {what}"))
}

/// The members of an intset, after Redis's deep validation.
pub(crate) fn decode(is: &[u8]) -> Result<Vec<i64>> {
    if is.len() < HEADER {
        return Err(bad("too short"));
    }
    let width = u32::from_le_bytes([is[0], is[1], is[2], is[3]]) as usize;
    if !matches!(width, 2 | 4 | 8) {
        return Err(bad("bad width"));
    }
    let count = u32::from_le_bytes([is[4], is[5], is[6], is[7]]) as usize;
    if count.checked_mul(width).and_then(|n| n.checked_add(HEADER)) != Some(is.len()) {
        return Err(bad("size differs"));
    }
    if count == 0 {
        return Err(bad("empty"));
    }
    let mut out = Vec::with_capacity(count);
    for chunk in is[HEADER..].chunks_exact(width) {
        let v = match width {
            2 => i16::from_le_bytes([chunk[0], chunk[1]]) as i64,
            4 => i32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]) as i64,
            _ => i64::from_le_bytes(chunk.try_into().map_err(|_| bad("width"))?),
        };
        if out.last().is_some_and(|&last| last >= v) {
            return Err(bad("not sorted"));
        }
        out.push(v);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widths_and_order() {
        let is = encode(&[3, 1, 2]);
        assert_eq!(is, b"\x02\x00\x00\x00\x03\x00\x00\x00\x01\x00\x02\x00\x03\x00".to_vec());
        assert_eq!(decode(&is).unwrap(), vec![1, 2, 3]);
        assert_eq!(decode(&encode(&[70000, -1])).unwrap(), vec![-1, 70000]);
        assert_eq!(encode(&[70000])[0], 4);
        assert_eq!(encode(&[i64::MIN])[0], 8);
        assert_eq!(
            decode(&encode(&[i64::MIN, i64::MAX])).unwrap(),
            vec![i64::MIN, i64::MAX]
        );
    }

    #[test]
    fn corruption_is_an_error() {
        let is = encode(&[1, 2, 3]);
        for cut in 0..is.len() {
            assert!(decode(&is[..cut]).is_err());
        }
        let mut unsorted = is.clone();
        unsorted[8] = 9;
        assert!(decode(&unsorted).is_err());
        let mut width = is.clone();
        width[0] = 3;
        assert!(decode(&width).is_err());
        assert!(decode(&encode(&[])).is_err());
    }
}
