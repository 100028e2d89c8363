//! DUMP payloads (Redis's `createDumpPayload` / `verifyDumpPayload`): an
//! RDB body, then the RDB version (u16 LE) and a CRC-64 (LE) of all before
//! it. Shared by DUMP/RESTORE and FUNCTION DUMP/RESTORE.

use super::codec::RDB_VERSION;
use super::crc64::crc64;

/// The version and checksum after the body.
const FOOTER: usize = 10;
/// The checksum's size.
const CRC: usize = 8;

/// Why a payload's footer is refused (RESTORE's one text for both).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BadFooter {
    /// Shorter than a footer, or a version newer than ours.
    Version,
    /// The checksum differs.
    Checksum,
}

/// `body` with its footer.
pub(crate) fn seal(mut body: Vec<u8>) -> Vec<u8> {
    body.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = crc64(0, &body);
    body.extend_from_slice(&crc.to_le_bytes());
    body
}

/// The body of a payload whose version and checksum are right.
pub(crate) fn open(payload: &[u8]) -> Result<&[u8], BadFooter> {
    if payload.len() < FOOTER {
        return Err(BadFooter::Version);
    }
    let at = payload.len() - FOOTER;
    let version = u16::from_le_bytes([payload[at], payload[at + 1]]);
    if version > RDB_VERSION {
        return Err(BadFooter::Version);
    }
    let crc = crc64(0, &payload[..payload.len() - CRC]);
    if payload[payload.len() - CRC..] != crc.to_le_bytes() {
        return Err(BadFooter::Checksum);
    }
    Ok(&payload[..at])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redis_s_footer() {
        // DUMP of SET k 12 from Redis 7.0.15.
        let redis = b"\x00\xc0\x0c\n\x00<*\xf8Q\\\x04\xbc\xd5";
        assert_eq!(seal(b"\x00\xc0\x0c".to_vec()), redis.to_vec());
        assert_eq!(open(redis), Ok(&b"\x00\xc0\x0c"[..]));
        let mut bad = redis.to_vec();
        bad[1] ^= 1;
        assert_eq!(open(&bad), Err(BadFooter::Checksum));
        let mut newer = redis.to_vec();
        newer[3] = 11;
        assert_eq!(open(&newer), Err(BadFooter::Version));
        assert_eq!(open(b"short"), Err(BadFooter::Version));
    }
}
