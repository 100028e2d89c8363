//! Set values, in the two encodings Redis 7.0 gives them.
//!
//! - **intset** while every member is an integer (as Redis's `string2ll`
//!   reads it) and there are at most `set-max-intset-entries`: a sorted
//!   vector, so SMEMBERS and SSCAN return ascending order, as Redis does.
//! - **hashtable** otherwise (and never back): [`SmallBytes`] members in an
//!   [`Arena`] (a random member is one read: SPOP, SRANDMEMBER). Its order is coordis's own (README's known
//!   differences). Redis 7.0 has no listpack encoding for sets.

use super::arena::{Arena, Keyed};
use super::num;
use super::small::SmallBytes;

/// A set value (see the module docs).
#[derive(Clone, Debug)]
pub enum Set {
    Ints(Vec<i64>),
    /// Boxed: a small set stays one vector wide.
    Table(Box<Table>),
}

/// The hashtable encoding: members in an [`Arena`].
pub(crate) type Table = Arena<SmallBytes>;

impl Keyed for SmallBytes {
    fn key(&self) -> &[u8] {
        self.as_bytes()
    }
}

/// A member as the set holds it: an integer, or bytes.
pub enum Member<'a> {
    Int(i64),
    Bytes(&'a [u8]),
}

impl Member<'_> {
    /// The member's bytes (integers formatted as Redis prints them).
    pub fn to_bytes(&self) -> bytes::Bytes {
        match self {
            Member::Int(n) => bytes::Bytes::from(n.to_string()),
            Member::Bytes(b) => bytes::Bytes::copy_from_slice(b),
        }
    }
}

impl Set {
    /// An empty set in the encoding Redis picks for a first member `first`
    /// (`setTypeCreate`).
    pub fn for_member(first: &[u8]) -> Set {
        if num::parse_i64(first).is_some() {
            Set::Ints(Vec::new())
        } else {
            Set::Table(Box::default())
        }
    }

    pub fn len(&self) -> usize {
        match self {
            Set::Ints(v) => v.len(),
            Set::Table(t) => t.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `OBJECT ENCODING`.
    pub fn encoding(&self) -> &'static str {
        match self {
            Set::Ints(_) => "intset",
            Set::Table(_) => "hashtable",
        }
    }

    pub fn contains(&self, m: &[u8]) -> bool {
        match self {
            Set::Ints(v) => num::parse_i64(m).is_some_and(|n| v.binary_search(&n).is_ok()),
            Set::Table(t) => t.get(m).is_some(),
        }
    }

    /// Adds `m`; true if it is new. `max_intset` is `set-max-intset-entries`.
    pub fn add(&mut self, m: &[u8], max_intset: usize) -> bool {
        if let Set::Ints(v) = self {
            match num::parse_i64(m) {
                Some(n) => match v.binary_search(&n) {
                    Ok(_) => return false,
                    Err(at) if v.len() < max_intset => {
                        v.insert(at, n);
                        return true;
                    }
                    Err(_) => self.convert(),
                },
                None => self.convert(),
            }
        }
        match self {
            Set::Table(t) if t.get(m).is_some() => false,
            Set::Table(t) => {
                t.insert_new(SmallBytes::new(m));
                true
            }
            Set::Ints(_) => unreachable!("converted above"),
        }
    }

    fn convert(&mut self) {
        let t = match self {
            Set::Ints(v) => {
                let mut t = Table::with_capacity(v.len() + 1);
                for n in v.iter() {
                    t.insert_new(SmallBytes::new(n.to_string().as_bytes()));
                }
                t
            }
            Set::Table(_) => return,
        };
        *self = Set::Table(Box::new(t));
    }

    pub fn remove(&mut self, m: &[u8]) -> bool {
        match self {
            Set::Ints(v) => match num::parse_i64(m).map(|n| v.binary_search(&n)) {
                Some(Ok(at)) => {
                    v.remove(at);
                    true
                }
                _ => false,
            },
            Set::Table(t) => t.remove(m).is_some(),
        }
    }

    /// Removes every member.
    pub fn clear(&mut self) {
        *self = Set::Ints(Vec::new());
    }

    /// Members in the encoding's order.
    pub fn iter(&self) -> Box<dyn Iterator<Item = Member<'_>> + '_> {
        match self {
            Set::Ints(v) => Box::new(v.iter().map(|&n| Member::Int(n))),
            Set::Table(t) => Box::new(t.iter().map(|m| Member::Bytes(m.as_bytes()))),
        }
    }

    /// The member at position `i` of [`Set::iter`]'s order (SPOP,
    /// SRANDMEMBER).
    pub fn nth(&self, i: usize) -> Option<Member<'_>> {
        match self {
            Set::Ints(v) => v.get(i).map(|&n| Member::Int(n)),
            Set::Table(t) => t.nth(i).map(|m| Member::Bytes(m.as_bytes())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intset_stays_sorted_then_converts() {
        let mut s = Set::for_member(b"5");
        for m in [&b"5"[..], b"-1", b"3", b"5"] {
            s.add(m, 3);
        }
        let members: Vec<_> = s.iter().map(|m| m.to_bytes()).collect();
        assert_eq!(members, vec!["-1", "3", "5"]);
        assert_eq!(s.encoding(), "intset");
        assert!(s.add(b"7", 3), "a fourth integer converts");
        assert_eq!((s.encoding(), s.len()), ("hashtable", 4));
        assert!(s.contains(b"-1") && s.remove(b"-1") && !s.contains(b"-1"));
        let mut t = Set::for_member(b"x");
        assert_eq!(t.encoding(), "hashtable");
        assert!(t.add(b"1", 512) && !t.add(b"1", 512));
        let mut i = Set::for_member(b"1");
        i.add(b"1", 512);
        assert!(i.add(b"01", 512), "'01' is not an integer to Redis");
        assert_eq!(i.encoding(), "hashtable");
    }
}
