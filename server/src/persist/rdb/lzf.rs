//! LZF, as Redis's RDB strings use it (liblzf 3.6 built with Redis's
//! settings: `HLOG` 16, `VERY_FAST`). Compression reproduces liblzf's
//! output byte for byte so a DUMP equals Redis's; decompression checks
//! every reference and never reads or writes out of bounds.

/// Bits of the match-finder's hash table (liblzf's `HLOG`).
const HLOG: u32 = 16;
/// Slots of the hash table.
const HSIZE: usize = 1 << HLOG;
/// The longest literal run one control byte covers.
const MAX_LIT: usize = 1 << 5;
/// The farthest a back reference reaches.
const MAX_OFF: usize = 1 << 13;
/// The longest back reference.
const MAX_REF: usize = (1 << 8) + (1 << 3);

fn idx(h: u32) -> usize {
    // VERY_FAST's hash.
    ((h >> (3 * 8 - HLOG)).wrapping_sub(h.wrapping_mul(5)) as usize) & (HSIZE - 1)
}

/// Compresses `input` into at most `max_out` bytes, as liblzf's
/// `lzf_compress`; `None` when the output would not fit (Redis then
/// stores the string plain).
pub(crate) fn compress(input: &[u8], max_out: usize) -> Option<Vec<u8>> {
    let in_len = input.len();
    if in_len == 0 || max_out == 0 {
        return None;
    }
    // Positions + 1 (0 = empty): liblzf keeps pointers and tests
    // `ref > in_data`, so position 0 is never a match source.
    let mut htab = vec![0u32; HSIZE];
    let mut out: Vec<u8> = Vec::with_capacity(max_out);
    let mut ip = 0usize;
    let mut lit: usize = 0;
    // The control byte of the literal run under way.
    out.push(0);
    let first = |p: usize| ((input[p] as u32) << 8) | input.get(p + 1).copied().unwrap_or(0) as u32;
    let next = |v: u32, p: usize| (v << 8) | input[p + 2] as u32;
    let mut hval = first(ip);
    while ip + 2 < in_len {
        hval = next(hval, ip);
        let slot = idx(hval);
        let reference = htab[slot] as usize;
        htab[slot] = ip as u32 + 1;
        let matched = reference > 1 && {
            let r = reference - 1;
            let off = ip - r - 1;
            off < MAX_OFF && input[r + 2] == input[ip + 2] && input[r] == input[ip] && input[r + 1] == input[ip + 1]
        };
        if matched {
            let r = reference - 1;
            let off = ip - r - 1;
            let mut len = 2usize;
            let maxlen = (in_len - ip - len).min(MAX_REF);
            // liblzf's conservative room test before writing a reference.
            if out.len() + 3 + 1 >= max_out && out.len() - usize::from(lit == 0) + 3 + 1 >= max_out {
                return None;
            }
            let run_at = out.len() - lit - 1;
            out[run_at] = (lit as u8).wrapping_sub(1);
            if lit == 0 {
                out.pop();
            }
            // liblzf's loop: sixteen unchecked steps when far from the
            // end (which may overshoot `maxlen` by two), then checked ones.
            let mut mismatch = false;
            if maxlen > 16 {
                for _ in 0..16 {
                    len += 1;
                    if input[r + len] != input[ip + len] {
                        mismatch = true;
                        break;
                    }
                }
            }
            if !mismatch {
                loop {
                    len += 1;
                    if !(len < maxlen && input[r + len] == input[ip + len]) {
                        break;
                    }
                }
            }
            len -= 2;
            ip += 1;
            if len < 7 {
                out.push(((off >> 8) + (len << 5)) as u8);
            } else {
                out.push(((off >> 8) + (7 << 5)) as u8);
                out.push((len - 7) as u8);
            }
            out.push(off as u8);
            lit = 0;
            out.push(0);
            ip += len + 1;
            if ip + 2 >= in_len {
                break;
            }
            // VERY_FAST: hash the two positions before the new one.
            ip -= 2;
            hval = first(ip);
            hval = next(hval, ip);
            htab[idx(hval)] = ip as u32 + 1;
            ip += 1;
            hval = next(hval, ip);
            htab[idx(hval)] = ip as u32 + 1;
            ip += 1;
        } else {
            if out.len() >= max_out {
                return None;
            }
            lit += 1;
            out.push(input[ip]);
            ip += 1;
            if lit == MAX_LIT {
                let run_at = out.len() - lit - 1;
                out[run_at] = (lit - 1) as u8;
                lit = 0;
                out.push(0);
            }
        }
    }
    if out.len() + 3 > max_out {
        return None;
    }
    while ip < in_len {
        lit += 1;
        out.push(input[ip]);
        ip += 1;
        if lit == MAX_LIT {
            let run_at = out.len() - lit - 1;
            out[run_at] = (lit - 1) as u8;
            lit = 0;
            out.push(0);
        }
    }
    let run_at = out.len() - lit - 1;
    out[run_at] = (lit as u8).wrapping_sub(1);
    if lit == 0 {
        out.pop();
    }
    (out.len() <= max_out).then_some(out)
}

/// Decompresses `input` that must expand to exactly `len` bytes (liblzf's
/// `lzf_decompress` with Redis's check of the size); `None` on a
/// malformed input or another size.
pub(crate) fn decompress(input: &[u8], len: usize) -> Option<Vec<u8>> {
    let mut out: Vec<u8> = Vec::with_capacity(len.min(input.len().saturating_mul(MAX_REF)));
    let mut ip = 0;
    while ip < input.len() {
        let ctrl = input[ip] as usize;
        ip += 1;
        if ctrl < MAX_LIT {
            let run = ctrl + 1;
            if out.len() + run > len {
                return None;
            }
            out.extend_from_slice(input.get(ip..ip + run)?);
            ip += run;
        } else {
            let mut run = ctrl >> 5;
            if run == 7 {
                run += *input.get(ip)? as usize;
                ip += 1;
            }
            let back = ((ctrl & 0x1F) << 8) + *input.get(ip)? as usize + 1;
            ip += 1;
            if out.len() + run + 2 > len {
                return None;
            }
            let from = out.len().checked_sub(back)?;
            for i in 0..run + 2 {
                out.push(out[from + i]);
            }
        }
    }
    (out.len() == len).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_and_back_references() {
        // "abcabcabcabc": a literal run of 3, then a back reference of 9.
        let compressed = [2, b'a', b'b', b'c', (7 << 5), 0, 2];
        assert_eq!(decompress(&compressed, 12).unwrap(), b"abcabcabcabc");
        assert!(decompress(&compressed, 11).is_none());
        assert!(decompress(&compressed, 13).is_none());
        // A reference before the start.
        assert!(decompress(&[0, b'a', 0x20, 5], 4).is_none());
        // Truncated.
        assert!(decompress(&[5, b'a'], 6).is_none());
    }

    #[test]
    fn compress_round_trips_and_gives_up_on_noise() {
        let samples: Vec<Vec<u8>> = vec![
            b"a".repeat(100),
            b"hello world hello world hello world hello world".to_vec(),
            (0..5000u32).map(|i| (i % 251) as u8).collect(),
            (0..3000u32).flat_map(|i| i.to_string().into_bytes()).collect(),
        ];
        for s in samples {
            let c = compress(&s, s.len() - 4).expect("compressible");
            assert_eq!(decompress(&c, s.len()).unwrap(), s);
        }
        // Pseudo-random bytes do not shrink by four.
        let mut x: u32 = 12345;
        let noise: Vec<u8> = (0..200)
            .map(|_| {
                x = x.wrapping_mul(1103515245).wrapping_add(12345);
                (x >> 16) as u8
            })
            .collect();
        assert!(compress(&noise, noise.len() - 4).is_none());
    }

    #[test]
    fn redis_s_bytes_for_a_run() {
        // What Redis 7.0.15 stores for SET k <"a" x 30> (DUMP's LZF blob).
        assert_eq!(
            compress(&b"a".repeat(30), 26).unwrap(),
            b"\x01aa\xe0\x11\x00\x01aa".to_vec()
        );
        let s = b"hello world hello world hello world hello world";
        assert_eq!(
            compress(s, s.len() - 4).unwrap(),
            b"\x0chello world h\xe0\x17\x0b\x01ld".to_vec()
        );
    }
}
