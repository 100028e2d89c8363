//! Hash values, in the two encodings Redis 7.0 gives them.
//!
//! - **listpack** while the hash has at most `hash-max-listpack-entries`
//!   fields and no field or value is longer than `hash-max-listpack-value`:
//!   fields and values alternate in one [`Packed`] buffer, in insertion
//!   order (the order HGETALL, HKEYS and HSCAN return, as Redis's listpack).
//! - **hashtable** once either limit is passed (and never back, as in
//!   Redis): a hash table of field/value pairs, each [`SmallBytes`] (inline
//!   up to 22 bytes). Its order is coordis's own, as a Redis dict's is
//!   Redis's: README lists it among the known differences.

use std::hash::BuildHasher;

use foldhash::fast::RandomState;
use hashbrown::HashTable;

use super::packed::Packed;
use super::small::SmallBytes;

/// The listpack thresholds (`hash-max-listpack-entries` / `-value`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    pub max_entries: usize,
    pub max_value: usize,
}

/// A hash value (see the module docs).
#[derive(Clone, Debug)]
pub enum Hash {
    Listpack(Packed),
    Table(Table),
}

/// The hashtable encoding.
#[derive(Clone, Debug, Default)]
pub struct Table {
    map: HashTable<(SmallBytes, SmallBytes)>,
    hasher: RandomState,
}

impl Default for Hash {
    fn default() -> Self {
        Hash::Listpack(Packed::default())
    }
}

impl Table {
    fn find(&self, field: &[u8]) -> Option<&(SmallBytes, SmallBytes)> {
        self.map
            .find(self.hasher.hash_one(field), |(f, _)| f.as_bytes() == field)
    }

    fn set(&mut self, field: &[u8], value: &[u8]) -> bool {
        let hash = self.hasher.hash_one(field);
        let hasher = &self.hasher;
        match self.map.entry(
            hash,
            |(f, _)| f.as_bytes() == field,
            |(f, _)| hasher.hash_one(f.as_bytes()),
        ) {
            hashbrown::hash_table::Entry::Occupied(mut e) => {
                e.get_mut().1 = SmallBytes::new(value);
                false
            }
            hashbrown::hash_table::Entry::Vacant(e) => {
                e.insert((SmallBytes::new(field), SmallBytes::new(value)));
                true
            }
        }
    }
}

impl Hash {
    pub fn len(&self) -> usize {
        match self {
            Hash::Listpack(p) => p.len() / 2,
            Hash::Table(t) => t.map.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `OBJECT ENCODING`.
    pub fn encoding(&self) -> &'static str {
        match self {
            Hash::Listpack(_) => "listpack",
            Hash::Table(_) => "hashtable",
        }
    }

    /// The byte offset of `field`'s entry in a listpack.
    fn listpack_find(p: &Packed, field: &[u8]) -> Option<usize> {
        let mut entries = p.iter();
        while let Some((at, f)) = entries.next() {
            entries.next();
            if f == field {
                return Some(at);
            }
        }
        None
    }

    pub fn get(&self, field: &[u8]) -> Option<&[u8]> {
        match self {
            Hash::Listpack(p) => {
                let at = Self::listpack_find(p, field)?;
                let next = p.entry_at(at).1;
                Some(p.entry_at(next).0)
            }
            Hash::Table(t) => t.find(field).map(|(_, v)| v.as_bytes()),
        }
    }

    pub fn contains(&self, field: &[u8]) -> bool {
        self.get(field).is_some()
    }

    /// Sets `field` to `value`; true if the field is new. Converts to a
    /// hashtable when the listpack limits would be passed.
    pub fn set(&mut self, field: &[u8], value: &[u8], limits: Limits) -> bool {
        if let Hash::Listpack(p) = self {
            let fits = field.len() <= limits.max_value && value.len() <= limits.max_value;
            match Self::listpack_find(p, field) {
                Some(at) if fits => {
                    let value_at = p.entry_at(at).1;
                    p.replace_at(value_at, value);
                    return false;
                }
                None if fits && p.len() / 2 < limits.max_entries => {
                    p.insert_at(p.bytes(), &[field, value]);
                    return true;
                }
                _ => self.convert(),
            }
        }
        match self {
            Hash::Table(t) => t.set(field, value),
            Hash::Listpack(_) => unreachable!("converted above"),
        }
    }

    /// The listpack becomes a hashtable (Redis's `hashTypeConvert`).
    fn convert(&mut self) {
        let table = match self {
            Hash::Listpack(p) => {
                let mut table = Table::default();
                table.map.reserve(p.len() / 2, |_| 0);
                let mut entries = p.iter();
                while let (Some((_, f)), Some((_, v))) = (entries.next(), entries.next()) {
                    table.set(f, v);
                }
                table
            }
            Hash::Table(_) => return,
        };
        *self = Hash::Table(table);
    }

    /// Removes `field`; true if it was there.
    pub fn remove(&mut self, field: &[u8]) -> bool {
        match self {
            Hash::Listpack(p) => match Self::listpack_find(p, field) {
                Some(at) => {
                    p.remove_at(at, 2);
                    true
                }
                None => false,
            },
            Hash::Table(t) => {
                let hash = t.hasher.hash_one(field);
                match t.map.find_entry(hash, |(f, _)| f.as_bytes() == field) {
                    Ok(e) => {
                        e.remove();
                        if t.map.capacity() > 64 && t.map.len() < t.map.capacity() / 8 {
                            let hasher = &t.hasher;
                            t.map.shrink_to_fit(|(f, _)| hasher.hash_one(f.as_bytes()));
                        }
                        true
                    }
                    Err(_) => false,
                }
            }
        }
    }

    /// Field/value pairs, in the encoding's order.
    pub fn iter(&self) -> Box<dyn Iterator<Item = (&[u8], &[u8])> + '_> {
        match self {
            Hash::Listpack(p) => {
                let mut entries = p.iter();
                Box::new(std::iter::from_fn(move || {
                    let (_, f) = entries.next()?;
                    let (_, v) = entries.next()?;
                    Some((f, v))
                }))
            }
            Hash::Table(t) => Box::new(t.map.iter().map(|(f, v)| (f.as_bytes(), v.as_bytes()))),
        }
    }

    /// The pair at position `i` of [`Hash::iter`]'s order (HRANDFIELD).
    pub fn nth(&self, i: usize) -> Option<(&[u8], &[u8])> {
        self.iter().nth(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: Limits = Limits {
        max_entries: 3,
        max_value: 8,
    };

    #[test]
    fn listpack_keeps_insertion_order_then_converts() {
        let mut h = Hash::default();
        assert!(h.set(b"b", b"1", SMALL));
        assert!(h.set(b"a", b"2", SMALL));
        assert!(!h.set(b"b", b"3", SMALL));
        let pairs: Vec<(&[u8], &[u8])> = h.iter().collect();
        assert_eq!(pairs, vec![(&b"b"[..], &b"3"[..]), (b"a", b"2")]);
        assert_eq!(h.encoding(), "listpack");
        assert!(h.set(b"c", b"4", SMALL));
        assert!(h.set(b"d", b"5", SMALL), "a fourth field converts");
        assert_eq!(h.encoding(), "hashtable");
        assert_eq!(
            (h.len(), h.get(b"b"), h.get(b"d")),
            (4, Some(&b"3"[..]), Some(&b"5"[..]))
        );
        assert!(h.remove(b"b") && !h.remove(b"b"));
        let mut long = Hash::default();
        long.set(b"f", b"123456789", SMALL);
        assert_eq!(long.encoding(), "hashtable", "a long value converts");
    }
}
