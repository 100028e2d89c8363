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
use super::packed::{Packed, PackedRef};
use super::small::SmallBytes;

/// The most bytes a listpack hash holds, whatever the directives allow: it
/// lives inside its key's allocation (`store/item.rs`), whose length field
/// has 28 bits. Past it the hash becomes a hashtable, as Redis converts a
/// listpack that would pass its own 1 GB cap (`lpSafeToAdd`).
pub(crate) const LISTPACK_MAX_BYTES: usize = 1 << 26;

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
pub(crate) type Table = Arena<Pair>;

/// A hash being changed: a whole value (a listpack may convert), or a
/// hashtable changed in place in its key's slot, with no copy.
pub(crate) enum HashEdit<'a> {
    Whole(&'a mut Hash),
    Table(&'a mut Table),
}

impl HashEdit<'_> {
    /// [`Hash::set`].
    pub(crate) fn set(&mut self, field: &[u8], value: &[u8], limits: Limits) -> bool {
        match self {
            HashEdit::Whole(h) => h.set(field, value, limits),
            HashEdit::Table(t) => table_set(t, field, value),
        }
    }

    /// [`Hash::remove`].
    pub(crate) fn remove(&mut self, field: &[u8]) -> bool {
        match self {
            HashEdit::Whole(h) => h.remove(field),
            HashEdit::Table(t) => t.remove(field).is_some(),
        }
    }
}

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

/// A hash value borrowed for reading: a listpack may live inside its key's
/// own allocation (see `store/item.rs`), so reads go through this view.
#[derive(Clone, Copy, Debug)]
pub enum HashRef<'a> {
    Listpack(PackedRef<'a>),
    Table(&'a Table),
}

/// The byte offset of `field`'s entry in a listpack.
fn listpack_find(p: PackedRef<'_>, field: &[u8]) -> Option<usize> {
    let mut entries = p.iter();
    while let Some((at, f)) = entries.next() {
        entries.next();
        if f == field {
            return Some(at);
        }
    }
    None
}

impl<'a> HashRef<'a> {
    pub fn len(&self) -> usize {
        match self {
            HashRef::Listpack(p) => p.len() / 2,
            HashRef::Table(t) => t.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `OBJECT ENCODING`.
    pub fn encoding(&self) -> &'static str {
        match self {
            HashRef::Listpack(_) => "listpack",
            HashRef::Table(_) => "hashtable",
        }
    }

    pub fn get(&self, field: &[u8]) -> Option<&'a [u8]> {
        match *self {
            HashRef::Listpack(p) => {
                let at = listpack_find(p, field)?;
                let next = p.entry_at(at).1;
                Some(p.entry_at(next).0)
            }
            HashRef::Table(t) => t.get(field).map(|p| p.1.as_bytes()),
        }
    }

    pub fn contains(&self, field: &[u8]) -> bool {
        self.get(field).is_some()
    }

    /// Field/value pairs, in the encoding's order.
    pub fn iter(&self) -> Box<dyn Iterator<Item = (&'a [u8], &'a [u8])> + 'a> {
        match *self {
            HashRef::Listpack(p) => {
                let mut entries = p.iter();
                Box::new(std::iter::from_fn(move || {
                    let (_, f) = entries.next()?;
                    let (_, v) = entries.next()?;
                    Some((f, v))
                }))
            }
            HashRef::Table(t) => Box::new(t.iter().map(|p| (p.0.as_bytes(), p.1.as_bytes()))),
        }
    }

    /// The pair at position `i` of [`HashRef::iter`]'s order (HRANDFIELD).
    pub fn nth(&self, i: usize) -> Option<(&'a [u8], &'a [u8])> {
        match *self {
            HashRef::Listpack(_) => self.iter().nth(i),
            HashRef::Table(t) => t.nth(i).map(|p| (p.0.as_bytes(), p.1.as_bytes())),
        }
    }

    /// An owned copy.
    pub fn to_owned(self) -> Hash {
        match self {
            HashRef::Listpack(p) => Hash::Listpack(p.to_owned()),
            HashRef::Table(t) => Hash::Table(Box::new(t.clone())),
        }
    }
}

impl Hash {
    /// The value, borrowed for reading.
    pub fn as_ref(&self) -> HashRef<'_> {
        match self {
            Hash::Listpack(p) => HashRef::Listpack(p.as_ref()),
            Hash::Table(t) => HashRef::Table(t),
        }
    }

    pub fn len(&self) -> usize {
        self.as_ref().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn get(&self, field: &[u8]) -> Option<&[u8]> {
        self.as_ref().get(field)
    }

    pub fn contains(&self, field: &[u8]) -> bool {
        self.get(field).is_some()
    }

    /// Sets `field` to `value`; true if the field is new. Converts to a
    /// hashtable when the listpack limits would be passed.
    pub fn set(&mut self, field: &[u8], value: &[u8], limits: Limits) -> bool {
        if let Hash::Listpack(p) = self {
            let fits = field.len() <= limits.max_value
                && value.len() <= limits.max_value
                && p.bytes() + field.len() + value.len() + 20 <= LISTPACK_MAX_BYTES;
            match listpack_find(p.as_ref(), field) {
                // An update converts too when the hash has more entries
                // than a lowered limit allows (Redis checks after any set).
                Some(at) if fits && p.len() / 2 <= limits.max_entries => {
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
            Hash::Listpack(p) => match listpack_find(p.as_ref(), field) {
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
        self.as_ref().iter()
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
        assert_eq!(h.as_ref().encoding(), "listpack");
        assert!(h.set(b"c", b"4", SMALL));
        assert!(h.set(b"d", b"5", SMALL), "a fourth field converts");
        assert_eq!(h.as_ref().encoding(), "hashtable");
        assert_eq!(
            (h.len(), h.get(b"b"), h.get(b"d")),
            (4, Some(&b"3"[..]), Some(&b"5"[..]))
        );
        assert!(h.remove(b"b") && !h.remove(b"b"));
        let mut long = Hash::default();
        long.set(b"f", b"123456789", SMALL);
        assert_eq!(long.as_ref().encoding(), "hashtable", "a long value converts");
    }
}
