//! DEBUG DIGEST and DEBUG DIGEST-VALUE: Redis 7.0.15's dataset signature,
//! computed the same way so a test can compare a whole coordis keyspace with
//! a real Redis's in one call.
//!
//! Two operations on a 20-byte SHA1 state make it up: *xor* (add the SHA1 of
//! some bytes, order-free: set members, hash pairs, keys of a database) and
//! *mix* (xor, then replace the state by its own SHA1: order matters, as in
//! a list). A key contributes, xored into the dataset's state,
//! `mix(key) · mix(type code) · value · [xor "!!expire!!"]`, each database
//! with keys first mixes its index. Values:
//! - string: mix of its bytes (integers as their decimal text);
//! - list: mix of each element, head to tail;
//! - set: xor of each member;
//! - hash: xor, per pair, of a fresh state mixed with field then value;
//! - zset: xor, per member, of a fresh state mixed with the member then its
//!   score printed `%.17g`;
//! - stream: mix of each live entry's ID as `ms.seq` (a dot, as Redis's
//!   `"%U.%U"`), then of each field and value. Only the entries: groups,
//!   PELs, the last ID and deleted entries are not part of Redis's digest.
//!
//! The expiry adds only the fact that there is one, not its time. Like
//! Redis (which walks `db->dict`), keys past their deadline but not yet
//! removed are included. This module lives beside the keyspace because it is
//! a read of it, not a file format; it never changes a value.

use sha1::{Digest as _, Sha1};

use super::db::Db;
use super::item::ValueRef;
use super::num::fmt_g17;

/// A digest state: SHA1's 20 bytes.
pub(crate) type Digest = [u8; 20];

/// Redis's `OBJ_*` type codes, which a key's digest mixes in (big-endian).
const OBJ_STRING: u32 = 0;
const OBJ_LIST: u32 = 1;
const OBJ_SET: u32 = 2;
const OBJ_ZSET: u32 = 3;
const OBJ_HASH: u32 = 4;
const OBJ_STREAM: u32 = 6;

/// What a key with a deadline adds (Redis's literal).
const EXPIRE_MARK: &[u8] = b"!!expire!!";

/// `xorDigest`: the state xor SHA1(data).
fn xor(state: &mut Digest, data: &[u8]) {
    let hash = Sha1::digest(data);
    state.iter_mut().zip(hash.iter()).for_each(|(s, h)| *s ^= h);
}

/// `mixDigest`: SHA1(state xor SHA1(data)).
fn mix(state: &mut Digest, data: &[u8]) {
    xor(state, data);
    *state = Sha1::digest(&state[..]).into();
}

/// Adds a value (and the fact of a deadline) to `state`: Redis's
/// `xorObjectDigest`, what DIGEST-VALUE answers from a zero state.
pub(crate) fn mix_value(state: &mut Digest, value: ValueRef<'_>, expire_at: u64) {
    let code = match value {
        ValueRef::Str(_) => OBJ_STRING,
        ValueRef::List(_) => OBJ_LIST,
        ValueRef::Set(_) => OBJ_SET,
        ValueRef::ZSet(_) => OBJ_ZSET,
        ValueRef::Hash(_) => OBJ_HASH,
        ValueRef::Stream(_) => OBJ_STREAM,
    };
    mix(state, &code.to_be_bytes());
    match value {
        ValueRef::Str(s) => mix(state, s),
        ValueRef::List(l) => l.iter().for_each(|e| mix(state, e)),
        ValueRef::Set(s) => s.iter().for_each(|m| xor(state, &m.to_bytes())),
        ValueRef::ZSet(z) => {
            for (member, score) in z.iter() {
                let mut element = Digest::default();
                mix(&mut element, member);
                mix(&mut element, fmt_g17(score).as_bytes());
                xor(state, &element);
            }
        }
        ValueRef::Hash(h) => {
            for (field, v) in h.iter() {
                let mut pair = Digest::default();
                mix(&mut pair, field);
                mix(&mut pair, v);
                xor(state, &pair);
            }
        }
        ValueRef::Stream(s) => {
            for entry in s.iter() {
                mix(state, format!("{}.{}", entry.id.ms, entry.id.seq).as_bytes());
                for (field, v) in entry.fields() {
                    mix(state, field);
                    mix(state, v);
                }
            }
        }
    }
    if expire_at != 0 {
        xor(state, EXPIRE_MARK);
    }
}

/// DEBUG DIGEST-VALUE of one key of `db`: zeros when it is absent. Expired
/// keys not yet removed count, as in Redis.
pub(crate) fn value_digest(db: &Db, key: &[u8]) -> Digest {
    let mut state = Digest::default();
    if let Some(item) = db.peek(key) {
        mix_value(&mut state, item.value(), item.expire_at());
    }
    state
}

/// DEBUG DIGEST: `computeDatasetDigest` over every database (zeros when all
/// are empty).
pub(crate) fn dataset_digest(dbs: &[Db]) -> Digest {
    let mut total = Digest::default();
    for (index, db) in dbs.iter().enumerate().filter(|(_, db)| !db.is_empty()) {
        mix(&mut total, &(index as u32).to_be_bytes());
        // `now` 0: every stored key, past its deadline or not.
        for (key, entry, _) in db.all_keys(0) {
            let mut state = Digest::default();
            mix(&mut state, key);
            mix_value(&mut state, entry.value, entry.expire_at);
            xor(&mut total, &state);
        }
    }
    total
}

/// Lower-case hex, as DEBUG prints a digest.
pub(crate) fn hex(d: &Digest) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Value;
    use bytes::Bytes;

    #[test]
    fn an_empty_dataset_is_zeros() {
        let dbs: Vec<Db> = (0..16).map(|_| Db::default()).collect();
        assert_eq!(hex(&dataset_digest(&dbs)), "0".repeat(40));
    }

    #[test]
    fn a_key_changes_it_and_the_database_matters() {
        let mut dbs: Vec<Db> = (0..2).map(|_| Db::default()).collect();
        dbs[0].insert(b"k", Value::Str(Bytes::from_static(b"v")), 0);
        let in_0 = dataset_digest(&dbs);
        assert_ne!(in_0, Digest::default());
        let moved = dbs[0].remove(b"k").unwrap();
        dbs[1].insert(b"k", moved.value, 0);
        assert_ne!(dataset_digest(&dbs), in_0);
    }

    #[test]
    fn mixing_keeps_order_and_xor_does_not() {
        let (mut ab, mut ba) = (Digest::default(), Digest::default());
        mix(&mut ab, b"a");
        mix(&mut ab, b"b");
        mix(&mut ba, b"b");
        mix(&mut ba, b"a");
        assert_ne!(ab, ba);
        let (mut ab, mut ba) = (Digest::default(), Digest::default());
        xor(&mut ab, b"a");
        xor(&mut ab, b"b");
        xor(&mut ba, b"b");
        xor(&mut ba, b"a");
        assert_eq!(ab, ba);
    }
}
