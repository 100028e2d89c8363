//! One database: a hash map of keys plus a deadline-ordered expiry index.

use std::collections::{BTreeSet, HashMap};

use foldhash::fast::RandomState;

use super::zset::ZSet;
use std::hash::BuildHasher;

use bytes::Bytes;

/// A stored value. Strings are kept as their bytes (Redis's integer encoding
/// is an optimisation clients cannot observe, except through OBJECT ENCODING).
#[derive(Clone, Debug)]
pub enum Value {
    Str(Bytes),
    /// Boxed so that the common string case keeps `Value` small.
    ZSet(Box<ZSet>),
}

impl Value {
    /// The name TYPE reports.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Str(_) => "string",
            Value::ZSet(_) => "zset",
        }
    }
}

/// A key's value and its expiry deadline.
#[derive(Clone, Debug)]
pub struct Entry {
    pub value: Value,
    /// Absolute deadline in unix milliseconds; 0 means no expiry.
    pub expire_at: u64,
}

/// A database (SELECT index). Every read goes through [`Db::lookup`] /
/// [`Db::lookup_mut`], which remove an expired key before answering (lazy
/// expiry); [`Db::expire_step`] removes due keys nobody reads (active expiry).
#[derive(Debug, Default)]
pub struct Db {
    /// Keys to entries. foldhash: seeded per map (no fixed collision set to
    /// attack) and several times faster than SipHash on short keys.
    map: HashMap<Bytes, Entry, RandomState>,
    /// `(deadline, key)` for every key with a deadline, so active expiry finds
    /// due keys in O(log n) without scanning, and removes them in deadline order.
    expires: BTreeSet<(u64, Bytes)>,
    /// Keys removed because their deadline passed (INFO `expired_keys`).
    pub expired_count: u64,
    /// Modification counters of WATCHed keys (only those): every change to
    /// such a key, including its expiry or a flush, bumps its version, and
    /// EXEC compares versions with those seen at WATCH time.
    watched: HashMap<Bytes, Watched, RandomState>,
    /// Record keys removed by expiry (for `expired` keyspace notifications).
    pub log_expired: bool,
    /// Keys removed by expiry since the last [`Db::take_expired`].
    expired_log: Vec<Bytes>,
}

/// A watched key's modification count and how many clients watch it.
#[derive(Debug, Default)]
struct Watched {
    version: u64,
    watchers: usize,
}

/// Copies argument bytes into their own allocation before they are stored:
/// arguments are slices of a connection's read buffer, and keeping a slice
/// would keep the whole buffer alive.
pub fn owned(b: &Bytes) -> Bytes {
    Bytes::copy_from_slice(b)
}

impl Db {
    /// Records that `key` changed (Redis's `signalModifiedKey`). Free when
    /// nobody watches anything in this database.
    pub fn touch(&mut self, key: &[u8]) {
        if !self.watched.is_empty() {
            if let Some(w) = self.watched.get_mut(key) {
                w.version += 1;
            }
        }
    }

    /// WATCH: starts counting changes to `key`; returns the current count.
    pub fn watch(&mut self, key: &Bytes) -> u64 {
        let w = self.watched.entry(owned(key)).or_default();
        w.watchers += 1;
        w.version
    }

    /// Ends one client's watch of `key`.
    pub fn unwatch(&mut self, key: &[u8]) {
        if let Some(w) = self.watched.get_mut(key) {
            w.watchers -= 1;
            if w.watchers == 0 {
                self.watched.remove(key);
            }
        }
    }

    /// Keys expired since the last call (empty unless `log_expired`).
    pub fn take_expired(&mut self) -> Vec<Bytes> {
        std::mem::take(&mut self.expired_log)
    }

    /// The change count of a watched key.
    pub fn watch_version(&self, key: &[u8]) -> u64 {
        self.watched.get(key).map_or(0, |w| w.version)
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Number of keys with a deadline (INFO keyspace `expires=`).
    pub fn expires_len(&self) -> usize {
        self.expires.len()
    }

    /// Redis's rule: a key lives through its deadline millisecond and is
    /// expired once the clock is past it (`now > when`).
    fn is_expired(entry: &Entry, now: u64) -> bool {
        entry.expire_at != 0 && entry.expire_at < now
    }

    /// Removes `key` if its deadline has passed. Returns true when it did.
    fn expire_if_due(&mut self, key: &[u8], now: u64) -> bool {
        let due = match self.map.get(key) {
            Some(e) => Self::is_expired(e, now),
            None => false,
        };
        if due {
            self.remove(key);
            self.expired_count += 1;
            if self.log_expired {
                self.expired_log.push(owned(&Bytes::copy_from_slice(key)));
            }
        }
        due
    }

    /// The live entry of `key`, if any.
    pub fn lookup(&mut self, key: &[u8], now: u64) -> Option<&Entry> {
        self.expire_if_due(key, now);
        self.map.get(key)
    }

    /// The live entry of `key` for modification. Do not change `expire_at`
    /// through it: use [`Db::set_expire`], which keeps the index in step.
    pub fn lookup_mut(&mut self, key: &[u8], now: u64) -> Option<&mut Entry> {
        self.expire_if_due(key, now);
        self.map.get_mut(key)
    }

    pub fn contains(&mut self, key: &[u8], now: u64) -> bool {
        self.lookup(key, now).is_some()
    }

    /// Stores `value` under `key` with deadline `expire_at` (0: none),
    /// replacing any previous value and deadline.
    pub fn insert(&mut self, key: &Bytes, value: Value, expire_at: u64) {
        self.touch(key);
        let old_deadline = match self.map.get_mut(&key[..]) {
            Some(entry) => {
                let old = entry.expire_at;
                entry.value = value;
                entry.expire_at = expire_at;
                old
            }
            None => {
                self.map.insert(owned(key), Entry { value, expire_at });
                0
            }
        };
        self.reindex(key, old_deadline, expire_at);
    }

    /// Replaces the value of an existing key, keeping its deadline (KEEPTTL,
    /// APPEND, INCR...). Inserts without deadline when the key is absent.
    pub fn replace_value(&mut self, key: &Bytes, value: Value) {
        self.touch(key);
        match self.map.get_mut(&key[..]) {
            Some(entry) => entry.value = value,
            None => {
                self.map.insert(owned(key), Entry { value, expire_at: 0 });
            }
        }
    }

    /// Changes the deadline of an existing key. Returns false if absent.
    pub fn set_expire(&mut self, key: &[u8], expire_at: u64) -> bool {
        self.touch(key);
        let Some(entry) = self.map.get_mut(key) else {
            return false;
        };
        let old = std::mem::replace(&mut entry.expire_at, expire_at);
        self.reindex(key, old, expire_at);
        true
    }

    fn reindex(&mut self, key: &[u8], old: u64, new: u64) {
        if old == new {
            return;
        }
        let Some((stored_key, _)) = self.map.get_key_value(key) else {
            return;
        };
        let stored_key = stored_key.clone();
        if old != 0 {
            self.expires.remove(&(old, stored_key.clone()));
        }
        if new != 0 {
            self.expires.insert((new, stored_key));
        }
    }

    /// Removes `key` (whether or not it is expired) and returns its entry.
    pub fn remove(&mut self, key: &[u8]) -> Option<Entry> {
        let (k, entry) = self.map.remove_entry(key)?;
        self.touch(key);
        if entry.expire_at != 0 {
            self.expires.remove(&(entry.expire_at, k));
        }
        Some(entry)
    }

    /// Removes every key.
    pub fn clear(&mut self) {
        for (key, w) in self.watched.iter_mut() {
            if self.map.contains_key(key) {
                w.version += 1;
            }
        }
        self.map = HashMap::default();
        self.expires = BTreeSet::new();
    }

    /// Active expiry: removes up to `budget` keys whose deadline is `< now`.
    /// Returns how many it removed; fewer than `budget` means none is due now.
    pub fn expire_step(&mut self, now: u64, budget: usize) -> usize {
        let mut removed = 0;
        while removed < budget {
            let Some((deadline, _)) = self.expires.first() else {
                break;
            };
            if *deadline >= now {
                break;
            }
            let (_, key) = self.expires.pop_first().expect("first exists");
            self.map.remove(&key[..]);
            self.touch(&key);
            if self.log_expired {
                self.expired_log.push(key.clone());
            }
            self.expired_count += 1;
            removed += 1;
        }
        removed
    }

    /// The earliest deadline in this database, if any.
    pub fn next_deadline(&self) -> Option<u64> {
        self.expires.first().map(|(d, _)| *d)
    }

    /// Iterates over live keys (KEYS). Expired-but-unremoved keys are skipped.
    pub fn live_keys(&self, now: u64) -> impl Iterator<Item = (&Bytes, &Entry)> {
        self.map.iter().filter(move |(_, e)| !Self::is_expired(e, now))
    }

    /// The hash SCAN orders keys by. Stable for the life of this database, so
    /// a cursor ("every key with hash >= cursor") survives inserts, deletes and
    /// rehashing: a key present for the whole scan is always returned.
    pub fn scan_hash(&self, key: &[u8]) -> u64 {
        self.map.hasher().hash_one(key)
    }

    /// A uniformly random live key (RANDOMKEY). O(n).
    pub fn random_key(&mut self, now: u64) -> Option<Bytes> {
        loop {
            if self.map.is_empty() {
                return None;
            }
            let idx = fastrand::usize(..self.map.len());
            let (key, entry) = self.map.iter().nth(idx).map(|(k, e)| (k.clone(), e.expire_at))?;
            if entry != 0 && entry < now {
                self.expire_if_due(&key, now);
                continue;
            }
            return Some(key);
        }
    }

    /// Swaps this database's content with `other` (SWAPDB).
    pub fn swap(&mut self, other: &mut Db) {
        // As Redis's touchAllWatchedKeysInDb: a watched key changes if it
        // exists on either side of the swap.
        for (key, w) in self.watched.iter_mut() {
            if self.map.contains_key(key) || other.map.contains_key(key) {
                w.version += 1;
            }
        }
        for (key, w) in other.watched.iter_mut() {
            if other.map.contains_key(key) || self.map.contains_key(key) {
                w.version += 1;
            }
        }
        std::mem::swap(&mut self.map, &mut other.map);
        std::mem::swap(&mut self.expires, &mut other.expires);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    #[test]
    fn lazy_and_active_expiry() {
        let mut db = Db::default();
        db.insert(&k("a"), Value::Str(k("1")), 100);
        db.insert(&k("b"), Value::Str(k("2")), 200);
        db.insert(&k("c"), Value::Str(k("3")), 0);
        assert!(db.lookup(b"a", 99).is_some());
        // Alive through its deadline millisecond, as in Redis.
        assert!(db.lookup(b"a", 100).is_some());
        assert!(db.lookup(b"a", 101).is_none());
        assert_eq!(db.expires_len(), 1);
        assert_eq!(db.expire_step(150, 10), 0);
        assert_eq!(db.expire_step(250, 10), 1);
        assert_eq!(db.len(), 1);
        assert_eq!(db.expired_count, 2);
    }

    #[test]
    fn deadline_changes_keep_index_in_step() {
        let mut db = Db::default();
        db.insert(&k("a"), Value::Str(k("1")), 100);
        db.set_expire(b"a", 300);
        db.insert(&k("a"), Value::Str(k("2")), 0);
        assert_eq!(db.expires_len(), 0);
        db.set_expire(b"a", 50);
        assert_eq!(db.next_deadline(), Some(50));
        db.remove(b"a");
        assert_eq!(db.expires_len(), 0);
    }
}
