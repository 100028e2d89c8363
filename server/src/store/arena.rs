//! [`Arena`]: the hashtable encoding of hashes and sets. Entries live in
//! one vector; a hash table of 4-byte positions indexes them by key. At a
//! million entries a table of whole entries would hold 2^21 slots of 24–48
//! bytes (hashbrown keeps at most 7/8 full, in powers of two); the index
//! holds 2^21 slots of 4 bytes, and the entries sit packed in the vector.
//! A random entry is one vector read (SPOP, HRANDFIELD).

use std::hash::BuildHasher;

use foldhash::fast::RandomState;
use hashbrown::HashTable;

/// An entry of an [`Arena`]: it knows its key.
pub trait Keyed {
    fn key(&self) -> &[u8];
}

/// Entries indexed by their key (see the module docs).
#[derive(Clone, Debug)]
pub struct Arena<T> {
    index: HashTable<u32>,
    hasher: RandomState,
    entries: Vec<T>,
}

impl<T> Default for Arena<T> {
    fn default() -> Self {
        Arena {
            index: HashTable::new(),
            hasher: RandomState::default(),
            entries: Vec::new(),
        }
    }
}

impl<T: Keyed> Arena<T> {
    pub fn with_capacity(n: usize) -> Self {
        Arena {
            index: HashTable::with_capacity(n),
            hasher: RandomState::default(),
            entries: Vec::with_capacity(n),
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn position(&self, key: &[u8]) -> Option<usize> {
        let entries = &self.entries;
        self.index
            .find(self.hasher.hash_one(key), |&i| entries[i as usize].key() == key)
            .map(|&i| i as usize)
    }

    pub fn get(&self, key: &[u8]) -> Option<&T> {
        self.position(key).map(|i| &self.entries[i])
    }

    pub fn get_mut(&mut self, key: &[u8]) -> Option<&mut T> {
        self.position(key).map(|i| &mut self.entries[i])
    }

    /// Adds `entry`, whose key must be absent.
    pub fn insert_new(&mut self, entry: T) {
        let at = u32::try_from(self.entries.len()).expect("at most 2^32 entries");
        let hash = self.hasher.hash_one(entry.key());
        self.entries.push(entry);
        let (entries, hasher) = (&self.entries, &self.hasher);
        self.index
            .insert_unique(hash, at, |&i| hasher.hash_one(entries[i as usize].key()));
    }

    /// Removes the entry of `key`; the last entry takes its place.
    pub fn remove(&mut self, key: &[u8]) -> Option<T> {
        let hash = self.hasher.hash_one(key);
        let entries = &self.entries;
        let at = match self.index.find_entry(hash, |&i| entries[i as usize].key() == key) {
            Ok(slot) => slot.remove().0 as usize,
            Err(_) => return None,
        };
        let removed = self.entries.swap_remove(at);
        if at < self.entries.len() {
            // The former last entry moved to `at`: point its slot there.
            let moved = self.hasher.hash_one(self.entries[at].key());
            let last = self.entries.len() as u32;
            if let Some(slot) = self.index.find_mut(moved, |&i| i == last) {
                *slot = at as u32;
            }
        }
        if self.entries.capacity() > 64 && self.entries.len() < self.entries.capacity() / 4 {
            self.entries.shrink_to_fit();
            let (entries, hasher) = (&self.entries, &self.hasher);
            self.index
                .shrink_to_fit(|&i| hasher.hash_one(entries[i as usize].key()));
        }
        Some(removed)
    }

    /// Entries in storage order.
    pub fn iter(&self) -> std::slice::Iter<'_, T> {
        self.entries.iter()
    }

    /// The entry at storage position `i` (a uniform pick needs one read).
    pub fn nth(&self, i: usize) -> Option<&T> {
        self.entries.get(i)
    }

    /// DEBUG HTSTATS-KEY's report on the index ([`super::htstats`]).
    pub(crate) fn htstats(&self) -> String {
        super::htstats::report(&self.index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Keyed for Vec<u8> {
        fn key(&self) -> &[u8] {
            self
        }
    }

    #[test]
    fn removal_keeps_every_position_right() {
        let mut a: Arena<Vec<u8>> = Arena::default();
        for i in 0..1000u32 {
            a.insert_new(i.to_string().into_bytes());
        }
        for i in (0..1000u32).step_by(3) {
            assert_eq!(a.remove(i.to_string().as_bytes()), Some(i.to_string().into_bytes()));
        }
        assert_eq!(a.remove(b"0"), None);
        for i in 0..1000u32 {
            assert_eq!(a.get(i.to_string().as_bytes()).is_some(), i % 3 != 0, "{i}");
        }
        assert_eq!(a.len(), 666);
        for i in 0..1000u32 {
            a.remove(i.to_string().as_bytes());
        }
        assert!(a.is_empty());
    }
}
