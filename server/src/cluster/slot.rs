//! Hash slots: which of the 16384 slots a key (or a shard channel) belongs
//! to, as Redis 7.0.15's `keyHashSlot` computes it — CRC16 (XMODEM) of the
//! key, or of the first non-empty `{hash tag}` in it, modulo the slot count.

/// Slots in a cluster (Redis's `CLUSTER_SLOTS`).
pub(crate) const SLOTS: usize = 16384;

/// The CRC16 polynomial of the XMODEM variant Redis uses (x^16 + x^12 + x^5 + 1).
const POLY: u16 = 0x1021;

/// The byte-at-a-time table of the CRC, built at compile time.
static TABLE: [u16; 256] = table();

const fn table() -> [u16; 256] {
    let mut table = [0u16; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = (i as u16) << 8;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 0x8000 != 0 { (crc << 1) ^ POLY } else { crc << 1 };
            bit += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
}

/// CRC16/XMODEM of `data` (initial value 0, no reflection, no final xor).
pub(crate) fn crc16(data: &[u8]) -> u16 {
    data.iter()
        .fold(0u16, |crc, &b| (crc << 8) ^ TABLE[(((crc >> 8) as u8) ^ b) as usize])
}

/// The slot of `key`: only the part between the first `{` and the first
/// `}` after it is hashed when that part is not empty.
pub(crate) fn key_slot(key: &[u8]) -> u16 {
    let hashed = key
        .iter()
        .position(|&b| b == b'{')
        .and_then(|open| {
            let rest = &key[open + 1..];
            let close = rest.iter().position(|&b| b == b'}')?;
            (close > 0).then(|| &rest[..close])
        })
        .unwrap_or(key);
    crc16(hashed) & (SLOTS as u16 - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc16_is_xmodem() {
        // The check value of CRC-16/XMODEM.
        assert_eq!(crc16(b"123456789"), 0x31c3);
    }

    #[test]
    fn slots_follow_hash_tags_as_redis() {
        // Values from Redis 7.0.15's CLUSTER KEYSLOT.
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        assert_eq!(key_slot(b"foo{}{bar}"), key_slot(b"foo{}{bar}".as_slice()));
        assert_ne!(key_slot(b"foo{}{bar}"), key_slot(b"bar"));
        assert_eq!(key_slot(b"foo{{bar}}zap"), key_slot(b"{bar"));
        assert_eq!(key_slot(b"foo{bar}{zap}"), key_slot(b"bar"));
        assert_eq!(key_slot(b""), 0);
    }
}
