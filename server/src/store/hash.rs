//! Hash values, in the two encodings Redis 7.0 gives them.
//!
//! - **listpack** while the hash has at most `hash-max-listpack-entries`
//!   fields and no field or value is longer than `hash-max-listpack-value`:
//!   fields and values alternate in one [`Packed`] buffer, in insertion
//!   order (the order HGETALL, HKEYS and HSCAN return, as Redis's listpack).
//! - **hashtable** once either limit is passed (and never back, as in
//!   Redis): field/value pairs, each [`SmallBytes`] (inline up to 22
//!   bytes), in an [`Arena`]. Its order is coordis's own, as a Redis dict's is
//!   Redis's: README lists it among the known differences.

use super::arena::{Arena, Keyed};
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
    /// Boxed: a small hash (the common case) stays one listpack wide.
    Table(Box<Table>),
}

/// The hashtable encoding: field/value pairs in an [`Arena`].
pub type Table = Arena<Pair>;

/// A field and its value.
#[derive(Clone, Debug)]
pub struct Pair(SmallBytes, SmallBytes);

impl Keyed for Pair {
    fn key(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

impl Default for Hash {
    fn default() -> Self {
        Hash::Listpack(Packed::default())
    }
}

/// Sets a field of a hashtable; true if it is new.
fn table_set(t: &mut Table, field: &[u8], value: &[u8]) -> bool {
    match t.get_mut(field) {
        Some(pair) => {
            pair.1 = SmallBytes::new(value);
            false
        }
        None => {
            t.insert_new(Pair(SmallBytes::new(field), SmallBytes::new(value)));
            true
        }
    }
}

impl Hash {
    pub fn len(&self) -> usize {
        match self {
            Hash::Listpack(p) => p.len() / 2,
            Hash::Table(t) => t.len(),
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
            Hash::Table(t) => t.get(field).map(|p| p.1.as_bytes()),
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
                    p.reserve_exact_for(&[value]);
                    p.replace_at(value_at, value);
                    return false;
                }
                None if fits && p.len() / 2 < limits.max_entries => {
                    p.reserve_exact_for(&[field, value]);
                    p.insert_at(p.bytes(), &[field, value]);
                    return true;
                }
                _ => self.convert(),
            }
        }
        match self {
            Hash::Table(t) => table_set(t, field, value),
            Hash::Listpack(_) => unreachable!("converted above"),
        }
    }

    /// The listpack becomes a hashtable (Redis's `hashTypeConvert`).
    fn convert(&mut self) {
        let table = match self {
            Hash::Listpack(p) => {
                let mut table = Table::with_capacity(p.len() / 2 + 1);
                let mut entries = p.iter();
                while let (Some((_, f)), Some((_, v))) = (entries.next(), entries.next()) {
                    table_set(&mut table, f, v);
                }
                table
            }
            Hash::Table(_) => return,
        };
        *self = Hash::Table(Box::new(table));
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
            Hash::Table(t) => t.remove(field).is_some(),
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
            Hash::Table(t) => Box::new(t.iter().map(|p| (p.0.as_bytes(), p.1.as_bytes()))),
        }
    }

    /// The pair at position `i` of [`Hash::iter`]'s order (HRANDFIELD).
    pub fn nth(&self, i: usize) -> Option<(&[u8], &[u8])> {
        match self {
            Hash::Listpack(_) => self.iter().nth(i),
            Hash::Table(t) => t.nth(i).map(|p| (p.0.as_bytes(), p.1.as_bytes())),
        }
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
