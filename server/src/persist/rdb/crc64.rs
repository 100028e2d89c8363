//! Redis's CRC-64 (Jones polynomial, reflected, as `crc64.c`): the RDB
//! file's and DUMP payload's checksum. Pure function over bytes.

/// The Jones polynomial, reflected.
const POLY: u64 = 0x95AC_9329_AC4B_C9B5;

/// Bytes folded in per step of the table-driven loop (slice-by-8, as
/// Redis's `crc64.c`'s crcspeed): one table per byte of the step.
const SLICE: usize = 8;

/// The tables, built once: `t[0]` is the byte-at-a-time table, `t[k][b]`
/// the CRC of byte `b` followed by `k` zero bytes, so eight bytes are
/// folded with eight independent lookups instead of eight chained ones.
fn tables() -> &'static [[u64; 256]; SLICE] {
    static TABLES: std::sync::OnceLock<[[u64; 256]; SLICE]> = std::sync::OnceLock::new();
    TABLES.get_or_init(|| {
        let mut t = [[0u64; 256]; SLICE];
        for (i, slot) in t[0].iter_mut().enumerate() {
            let mut c = i as u64;
            for _ in 0..8 {
                c = if c & 1 == 1 { (c >> 1) ^ POLY } else { c >> 1 };
            }
            *slot = c;
        }
        for k in 1..SLICE {
            for i in 0..256 {
                let prev = t[k - 1][i];
                t[k][i] = (prev >> 8) ^ t[0][(prev & 0xFF) as usize];
            }
        }
        t
    })
}

/// The CRC-64 of `data`, continuing from `crc` (0 to start), as Redis's
/// `crc64(crc, data, len)`.
pub(crate) fn crc64(mut crc: u64, data: &[u8]) -> u64 {
    let t = tables();
    let mut chunks = data.chunks_exact(SLICE);
    for chunk in &mut chunks {
        let mut word = [0u8; SLICE];
        word.copy_from_slice(chunk);
        let x = crc ^ u64::from_le_bytes(word);
        crc = t[7][(x & 0xFF) as usize]
            ^ t[6][((x >> 8) & 0xFF) as usize]
            ^ t[5][((x >> 16) & 0xFF) as usize]
            ^ t[4][((x >> 24) & 0xFF) as usize]
            ^ t[3][((x >> 32) & 0xFF) as usize]
            ^ t[2][((x >> 40) & 0xFF) as usize]
            ^ t[1][((x >> 48) & 0xFF) as usize]
            ^ t[0][(x >> 56) as usize];
    }
    for &b in chunks.remainder() {
        crc = t[0][((crc ^ b as u64) & 0xFF) as usize] ^ (crc >> 8);
    }
    crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redis_self_test_value() {
        // Redis's crc64.c self-test value.
        assert_eq!(crc64(0, b"123456789"), 0xe9c6d914c4b8d9ca);
        // Continuing over a split gives the same value.
        assert_eq!(crc64(crc64(0, b"1234"), b"56789"), 0xe9c6d914c4b8d9ca);
        assert_eq!(crc64(0, b""), 0);
    }

    /// The bit-at-a-time definition, to check the tables against.
    fn crc64_bitwise(mut crc: u64, data: &[u8]) -> u64 {
        for &b in data {
            crc ^= b as u64;
            for _ in 0..8 {
                crc = if crc & 1 == 1 { (crc >> 1) ^ POLY } else { crc >> 1 };
            }
        }
        crc
    }

    #[test]
    fn sliced_loop_agrees_with_the_definition_at_every_length_and_split() {
        let data: Vec<u8> = (0..300u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        for len in 0..data.len() {
            assert_eq!(crc64(0, &data[..len]), crc64_bitwise(0, &data[..len]), "length {len}");
        }
        for split in 0..data.len() {
            let (a, b) = data.split_at(split);
            assert_eq!(crc64(crc64(0, a), b), crc64_bitwise(0, &data), "split at {split}");
        }
    }
}
