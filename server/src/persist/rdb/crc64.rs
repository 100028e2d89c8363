//! Redis's CRC-64 (Jones polynomial, reflected, as `crc64.c`): the RDB
//! file's and DUMP payload's checksum. Pure function over bytes.

/// The Jones polynomial, reflected.
const POLY: u64 = 0x95AC_9329_AC4B_C9B5;

/// The byte-at-a-time table, built once.
fn table() -> &'static [u64; 256] {
    static TABLE: std::sync::OnceLock<[u64; 256]> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        let mut t = [0u64; 256];
        for (i, slot) in t.iter_mut().enumerate() {
            let mut c = i as u64;
            for _ in 0..8 {
                c = if c & 1 == 1 { (c >> 1) ^ POLY } else { c >> 1 };
            }
            *slot = c;
        }
        t
    })
}

/// The CRC-64 of `data`, continuing from `crc` (0 to start), as Redis's
/// `crc64(crc, data, len)`.
pub(crate) fn crc64(mut crc: u64, data: &[u8]) -> u64 {
    let table = table();
    for &b in data {
        crc = table[((crc ^ b as u64) & 0xFF) as usize] ^ (crc >> 8);
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
}
