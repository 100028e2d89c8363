//! One key's storage: its deadline, its name and its value in a single
//! allocation behind a thin pointer.
//!
//! Memory per key is what a coordination server is judged on (a million
//! `lock:<id>` keys with short owner tokens), so an [`Item`] is one
//! allocation of `[expire_at: u64][string encoding: 2 bits, key_len: 30
//! bits][tag: 4 bits, inline length: 28 bits][access: u32][key][payload]`
//! and the hash table holds only the
//! 8-byte pointer. The access word is Redis's 24-bit `lru` field (the LRU
//! clock or the LFU minute and counter, [`super::access`]); its four bytes
//! are all a key pays for eviction data (glibc's 16-byte chunk rounding
//! absorbs them for three key and value lengths in four).
//! The tag is a [`Tag`], matched exhaustively everywhere. The payload is
//!
//! - a string of up to [`INLINE_MAX`] bytes, stored inline;
//! - a longer string, as a pointer to a boxed [`Bytes`] (GET then clones a
//!   reference instead of copying megabytes);
//! - a hash in its listpack encoding, inline (a small hash is one
//!   allocation with its key, as the job-queue shape of a million 5-field
//!   hashes needs);
//! - a sorted set, large hash, list, set or stream, as a pointer to its
//!   boxed value.
//!
//! This module holds all of the store's `unsafe` code; everything else uses
//! the safe accessors below.

use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::ptr::NonNull;

use bytes::Bytes;

use super::db::{Entry, Value};
use super::hash::{Hash, HashRef, Table, LISTPACK_MAX_BYTES};
use super::list::List;
use super::packed::PackedRef;
use super::set::Set;
use super::stream::Stream;
use super::zset::ZSet;

/// Longest string Redis allocates with its object header (`embstr`).
const EMBSTR_MAX: usize = 44;

/// Longest string stored inside the item itself.
pub(crate) const INLINE_MAX: usize = 256;

const HEADER: usize = 20;
/// Where the access word sits in the header.
const ACCESS_AT: usize = 16;
/// The header's last word is `[tag: 4 bits][inline length: 28 bits]`.
const TAG_SHIFT: u32 = 28;
const LEN_MASK: u32 = (1 << TAG_SHIFT) - 1;
const POINTER: usize = std::mem::size_of::<usize>();
/// The key-length word's low bits; its top two say a string's
/// [`StrEncoding`].
const KEY_LEN_BITS: u32 = 30;
const KEY_LEN_MASK: u32 = (1 << KEY_LEN_BITS) - 1;

/// What OBJECT ENCODING says of a string beyond its content: Redis encodes
/// a string by its bytes when a command stores its argument (`int`,
/// `embstr` up to 44 bytes, `raw`), but some commands leave other
/// encodings, which the next write by content replaces.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum StrEncoding {
    /// By content (SET, INCR, a new key APPEND made, a loaded file...).
    #[default]
    ByContent = 0,
    /// `raw` whatever the content: APPEND to, SETRANGE, SETBIT, BITOP,
    /// BITFIELD and the PF commands change a string Redis made its own.
    Raw = 1,
    /// Never `int`: INCRBYFLOAT stores its result as text (`embstr` or `raw`).
    Text = 2,
}

/// How an item's payload is stored: one arm per storage form. Every `match`
/// on it is exhaustive, so a new value type (a new [`Value`] arm) does not
/// compile until each unsafe site below says how its payload is read,
/// moved out and freed. Four bits leave room for sixteen forms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tag {
    /// A string of up to [`INLINE_MAX`] bytes inside the allocation.
    InlineStr = 0,
    /// A pointer to a boxed [`Bytes`].
    BoxedStr = 1,
    /// A pointer to a boxed [`ZSet`].
    ZSet = 2,
    /// A hash in its listpack encoding, inside the allocation:
    /// `[field/value count: u32][packed entries]`. A small hash (a job's
    /// five fields) then costs one allocation with its key.
    HashPacked = 3,
    /// A pointer to a boxed hashtable-encoded hash ([`Table`]).
    HashTable = 4,
    /// A pointer to a boxed [`List`].
    List = 5,
    /// A pointer to a boxed [`Set`].
    Set = 6,
    /// A pointer to a boxed [`Stream`].
    Stream = 7,
}

const _: () = assert!((Tag::Stream as u32) < (1 << (32 - TAG_SHIFT)));
const _: () = assert!(LISTPACK_MAX_BYTES + 4 <= LEN_MASK as usize);

impl Tag {
    /// The storage form of `value` (before it is stored).
    fn of(value: &Value) -> Tag {
        match value {
            Value::Str(s) if s.len() <= INLINE_MAX => Tag::InlineStr,
            Value::Str(_) => Tag::BoxedStr,
            Value::ZSet(_) => Tag::ZSet,
            Value::Hash(h) => match **h {
                Hash::Listpack(_) => Tag::HashPacked,
                Hash::Table(_) => Tag::HashTable,
            },
            Value::List(_) => Tag::List,
            Value::Set(_) => Tag::Set,
            Value::Stream(_) => Tag::Stream,
        }
    }

    fn from_bits(bits: u32) -> Tag {
        match bits {
            0 => Tag::InlineStr,
            1 => Tag::BoxedStr,
            2 => Tag::ZSet,
            3 => Tag::HashPacked,
            4 => Tag::HashTable,
            5 => Tag::List,
            6 => Tag::Set,
            7 => Tag::Stream,
            // Only `Item::new` writes tags, and only from the arms above.
            other => unreachable!("corrupt item tag {other}"),
        }
    }

    /// Bytes of payload after the key: the inline string or listpack, or
    /// one pointer.
    fn payload_len(self, inline_len: usize) -> usize {
        match self {
            Tag::InlineStr | Tag::HashPacked => inline_len,
            Tag::BoxedStr | Tag::ZSet | Tag::HashTable | Tag::List | Tag::Set | Tag::Stream => POINTER,
        }
    }
}

/// A stored value, borrowed.
#[derive(Clone, Copy, Debug)]
pub enum ValueRef<'a> {
    Str(&'a [u8]),
    ZSet(&'a ZSet),
    Hash(HashRef<'a>),
    List(&'a List),
    Set(&'a Set),
    Stream(&'a Stream),
}

impl ValueRef<'_> {
    /// The name TYPE reports.
    pub fn type_name(&self) -> &'static str {
        match self {
            ValueRef::Str(_) => "string",
            ValueRef::ZSet(_) => "zset",
            ValueRef::Hash(_) => "hash",
            ValueRef::List(_) => "list",
            ValueRef::Set(_) => "set",
            ValueRef::Stream(_) => "stream",
        }
    }

    /// A hash, list, set or sorted set with no elements left.
    pub fn is_empty_collection(&self) -> bool {
        match self {
            ValueRef::Str(_) => false,
            ValueRef::ZSet(z) => z.is_empty(),
            ValueRef::Hash(h) => h.is_empty(),
            ValueRef::List(l) => l.is_empty(),
            ValueRef::Set(x) => x.is_empty(),
            // An empty stream is a value of its own (XADD MAXLEN 0 keeps it).
            ValueRef::Stream(_) => false,
        }
    }

    /// A string's bytes, or a collection's elements (DEBUG OBJECT).
    pub fn length(&self) -> usize {
        match self {
            ValueRef::Str(s) => s.len(),
            ValueRef::ZSet(z) => z.len(),
            ValueRef::Hash(h) => h.len(),
            ValueRef::List(l) => l.len(),
            ValueRef::Set(x) => x.len(),
            ValueRef::Stream(x) => x.len() as usize,
        }
    }

    /// `OBJECT ENCODING` (strings answer by their content and length).
    pub fn encoding(&self) -> &'static str {
        match self {
            ValueRef::Str(s) if s.len() <= 20 && crate::store::num::parse_i64(s).is_some() => "int",
            ValueRef::Str(s) if s.len() <= EMBSTR_MAX => "embstr",
            ValueRef::Str(_) => "raw",
            ValueRef::ZSet(z) => z.encoding(),
            ValueRef::Hash(h) => h.encoding(),
            ValueRef::List(_) => "quicklist",
            ValueRef::Set(x) => x.encoding(),
            ValueRef::Stream(_) => "stream",
        }
    }

    /// DEBUG HTSTATS-KEY's report on the value's hash table
    /// ([`super::htstats`]): a set or hash in the hashtable encoding, a
    /// sorted set in the skiplist one; `None` for the other encodings.
    pub(crate) fn htstats(&self) -> Option<String> {
        match self {
            ValueRef::Set(Set::Table(t)) => Some(t.htstats()),
            ValueRef::Hash(HashRef::Table(t)) => Some(t.htstats()),
            ValueRef::ZSet(z) => z.htstats(),
            _ => None,
        }
    }

    /// An owned copy.
    pub fn to_value(self) -> Value {
        match self {
            ValueRef::Str(s) => Value::Str(Bytes::copy_from_slice(s)),
            ValueRef::ZSet(z) => Value::ZSet(Box::new(z.clone())),
            ValueRef::Hash(h) => Value::Hash(Box::new(h.to_owned())),
            ValueRef::List(l) => Value::List(Box::new(l.clone())),
            ValueRef::Set(x) => Value::Set(Box::new(x.clone())),
            ValueRef::Stream(x) => Value::Stream(Box::new(x.clone())),
        }
    }
}

/// A stored value for modification: sorted sets are edited in place;
/// strings are replaced (`Db::replace_value`), so only their kind is given.
#[derive(Debug)]
pub enum ValueMut<'a> {
    Str,
    ZSet(&'a mut ZSet),
    /// A hash: a listpack (inside the item) is replaced as a whole, a
    /// hashtable edited in place.
    Hash(HashMut<'a>),
    List(&'a mut List),
    Set(&'a mut Set),
    Stream(&'a mut Stream),
}

/// A hash for modification (see [`ValueMut::Hash`]).
#[derive(Debug)]
pub enum HashMut<'a> {
    /// Read it with [`Item::value`], then replace it (`Db::replace_value`).
    Listpack,
    Table(&'a mut Table),
}

/// A key with its value and deadline, in one allocation (see the module docs).
pub struct Item {
    ptr: NonNull<u8>,
}

impl Item {
    /// Asks the CPU to bring this item's header into cache ahead of a read:
    /// a walk of the table in slot order meets items in no memory order,
    /// and each read would otherwise wait for memory (a snapshot's walk
    /// spent most of its time there). No effect where unsupported.
    #[inline]
    pub(crate) fn prefetch(&self) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: prefetching is a hint with no effect on memory; the
        // pointer is this item's live allocation.
        unsafe {
            std::arch::x86_64::_mm_prefetch(self.ptr.as_ptr().cast::<i8>(), std::arch::x86_64::_MM_HINT_T0);
        }
    }
}

// SAFETY: an Item exclusively owns its allocation and the boxed Bytes/ZSet it
// may point to, all of which are Send and Sync; it is a Box in all but layout.
unsafe impl Send for Item {}
unsafe impl Sync for Item {}

impl Item {
    pub fn new(key: &[u8], value: Value, expire_at: u64) -> Item {
        let key_len = u32::try_from(key.len())
            .ok()
            .filter(|&n| n <= KEY_LEN_MASK)
            .expect("key longer than 1 GB");
        let tag = Tag::of(&value);
        let inline_len = match &value {
            Value::Str(s) => s.len(),
            Value::Hash(h) => match &**h {
                Hash::Listpack(p) => 4 + p.as_ref().raw().len(),
                Hash::Table(_) => 0,
            },
            Value::ZSet(_) | Value::List(_) | Value::Set(_) | Value::Stream(_) => 0,
        };
        let payload_len = tag.payload_len(inline_len);
        let layout = Self::layout(key.len(), payload_len);
        // SAFETY: the layout has a non-zero size (at least the header).
        let raw = unsafe { alloc(layout) };
        let Some(ptr) = NonNull::new(raw) else {
            handle_alloc_error(layout);
        };
        // SAFETY: `ptr` points to `layout.size()` writable bytes, aligned to 8;
        // the header, key and payload are written inside those bounds.
        unsafe {
            ptr.as_ptr().cast::<u64>().write(expire_at);
            ptr.as_ptr().add(8).cast::<u32>().write(key_len);
            ptr.as_ptr()
                .add(12)
                .cast::<u32>()
                .write(((tag as u32) << TAG_SHIFT) | payload_len as u32);
            ptr.as_ptr().add(ACCESS_AT).cast::<u32>().write(0);
            std::ptr::copy_nonoverlapping(key.as_ptr(), ptr.as_ptr().add(HEADER), key.len());
            let payload = ptr.as_ptr().add(HEADER + key.len());
            match value {
                Value::Str(s) if tag == Tag::InlineStr => std::ptr::copy_nonoverlapping(s.as_ptr(), payload, s.len()),
                Value::Str(s) => payload.cast::<*mut Bytes>().write_unaligned(Box::into_raw(Box::new(s))),
                Value::ZSet(z) => payload.cast::<*mut ZSet>().write_unaligned(Box::into_raw(z)),
                Value::Hash(h) => match *h {
                    Hash::Listpack(p) => {
                        let p = p.as_ref();
                        payload.cast::<u32>().write_unaligned(p.len() as u32);
                        std::ptr::copy_nonoverlapping(p.raw().as_ptr(), payload.add(4), p.raw().len());
                    }
                    Hash::Table(t) => payload.cast::<*mut Table>().write_unaligned(Box::into_raw(t)),
                },
                Value::List(l) => payload.cast::<*mut List>().write_unaligned(Box::into_raw(l)),
                Value::Set(x) => payload.cast::<*mut Set>().write_unaligned(Box::into_raw(x)),
                Value::Stream(x) => payload.cast::<*mut Stream>().write_unaligned(Box::into_raw(x)),
            }
        }
        Item { ptr }
    }

    fn layout(key_len: usize, payload_len: usize) -> Layout {
        Layout::from_size_align(HEADER + key_len + payload_len, 8).expect("item size overflows")
    }

    /// The layout this item was allocated with.
    fn allocation(&self) -> Layout {
        let (key_len, tag, len) = self.header();
        Self::layout(key_len, tag.payload_len(len))
    }

    fn header(&self) -> (usize, Tag, usize) {
        // SAFETY: every Item starts with a header written by `new`.
        let (key_len, word) = unsafe {
            (
                self.ptr.as_ptr().add(8).cast::<u32>().read(),
                self.ptr.as_ptr().add(12).cast::<u32>().read(),
            )
        };
        (
            (key_len & KEY_LEN_MASK) as usize,
            Tag::from_bits(word >> TAG_SHIFT),
            (word & LEN_MASK) as usize,
        )
    }

    fn payload(&self) -> *mut u8 {
        let (key_len, _, _) = self.header();
        // SAFETY: the payload starts right after the key, inside the allocation.
        unsafe { self.ptr.as_ptr().add(HEADER + key_len) }
    }

    /// Bytes of this item's own allocation (header, key and inline
    /// payload), and for a long string its boxed bytes: what a key costs
    /// apart from a boxed collection's contents (MEMORY USAGE).
    pub fn own_bytes(&self) -> usize {
        let (_, tag, _) = self.header();
        let boxed = match (tag, self.value()) {
            (Tag::BoxedStr, ValueRef::Str(s)) => std::mem::size_of::<Bytes>() + s.len(),
            _ => 0,
        };
        self.allocation().size() + boxed
    }

    /// How OBJECT ENCODING reads this string ([`StrEncoding`]).
    pub(crate) fn str_encoding(&self) -> StrEncoding {
        // SAFETY: the header's key-length word, aligned to 4, written by `new`.
        let word = unsafe { self.ptr.as_ptr().add(8).cast::<u32>().read() };
        match word >> KEY_LEN_BITS {
            1 => StrEncoding::Raw,
            2 => StrEncoding::Text,
            _ => StrEncoding::ByContent,
        }
    }

    pub(crate) fn set_str_encoding(&mut self, encoding: StrEncoding) {
        // SAFETY: as in `str_encoding`; `&mut self` makes the write exclusive.
        unsafe {
            let at = self.ptr.as_ptr().add(8).cast::<u32>();
            at.write((at.read() & KEY_LEN_MASK) | ((encoding as u32) << KEY_LEN_BITS));
        }
    }

    /// The access word (see [`super::access`]).
    pub(crate) fn access(&self) -> u32 {
        // SAFETY: the header's access word, aligned to 4, written by `new`.
        unsafe { self.ptr.as_ptr().add(ACCESS_AT).cast::<u32>().read() }
    }

    pub(crate) fn set_access(&mut self, word: u32) {
        // SAFETY: as in `access`; `&mut self` makes the write exclusive.
        unsafe { self.ptr.as_ptr().add(ACCESS_AT).cast::<u32>().write(word) }
    }

    /// Absolute deadline in unix ms; 0 means none.
    pub fn expire_at(&self) -> u64 {
        // SAFETY: the first 8 bytes are the deadline, aligned to 8.
        unsafe { self.ptr.as_ptr().cast::<u64>().read() }
    }

    pub fn set_expire_at(&mut self, at: u64) {
        // SAFETY: as in `expire_at`; `&mut self` makes the write exclusive.
        unsafe { self.ptr.as_ptr().cast::<u64>().write(at) }
    }

    pub fn key(&self) -> &[u8] {
        let (key_len, _, _) = self.header();
        // SAFETY: `key_len` bytes of key follow the header; they live as long as `self`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().add(HEADER), key_len) }
    }

    pub fn value(&self) -> ValueRef<'_> {
        let (_, tag, len) = self.header();
        let payload = self.payload();
        // SAFETY: the tag says what the payload holds; boxed pointers were
        // made by `Box::into_raw` in `new` and stay valid until `drop`.
        unsafe {
            match tag {
                Tag::InlineStr => ValueRef::Str(std::slice::from_raw_parts(payload, len)),
                Tag::BoxedStr => ValueRef::Str(&*payload.cast::<*mut Bytes>().read_unaligned()),
                Tag::ZSet => ValueRef::ZSet(&*payload.cast::<*mut ZSet>().read_unaligned()),
                Tag::HashPacked => ValueRef::Hash(HashRef::Listpack(PackedRef::new(
                    std::slice::from_raw_parts(payload.add(4), len - 4),
                    payload.cast::<u32>().read_unaligned() as usize,
                ))),
                Tag::HashTable => ValueRef::Hash(HashRef::Table(&*payload.cast::<*mut Table>().read_unaligned())),
                Tag::List => ValueRef::List(&*payload.cast::<*mut List>().read_unaligned()),
                Tag::Set => ValueRef::Set(&*payload.cast::<*mut Set>().read_unaligned()),
                Tag::Stream => ValueRef::Stream(&*payload.cast::<*mut Stream>().read_unaligned()),
            }
        }
    }

    pub fn value_mut(&mut self) -> ValueMut<'_> {
        let (_, tag, _) = self.header();
        match tag {
            Tag::InlineStr | Tag::BoxedStr => ValueMut::Str,
            // SAFETY: as in `value`; `&mut self` makes the borrow exclusive.
            Tag::ZSet => ValueMut::ZSet(unsafe { &mut *self.payload().cast::<*mut ZSet>().read_unaligned() }),
            // SAFETY: as above.
            Tag::HashPacked => ValueMut::Hash(HashMut::Listpack),
            // SAFETY: as above.
            Tag::HashTable => ValueMut::Hash(HashMut::Table(unsafe {
                &mut *self.payload().cast::<*mut Table>().read_unaligned()
            })),
            // SAFETY: as above.
            Tag::List => ValueMut::List(unsafe { &mut *self.payload().cast::<*mut List>().read_unaligned() }),
            // SAFETY: as above.
            Tag::Set => ValueMut::Set(unsafe { &mut *self.payload().cast::<*mut Set>().read_unaligned() }),
            Tag::Stream => ValueMut::Stream(unsafe { &mut *self.payload().cast::<*mut Stream>().read_unaligned() }),
        }
    }

    /// Overwrites an inline string value with `new` of the same length, in
    /// place (INCR on a counter that keeps its number of digits). Returns
    /// false, changing nothing, for any other value or length.
    pub fn overwrite_str(&mut self, new: &[u8]) -> bool {
        let (_, tag, len) = self.header();
        if tag != Tag::InlineStr || len != new.len() {
            return false;
        }
        // SAFETY: an inline payload is `len` bytes inside the allocation;
        // `&mut self` makes the write exclusive, and no `Bytes` shares
        // inline bytes (`str_bytes` copies them).
        unsafe { std::ptr::copy_nonoverlapping(new.as_ptr(), self.payload(), len) };
        // A new value, encoded by its content unless the caller says more.
        self.set_str_encoding(StrEncoding::ByContent);
        true
    }

    /// OBJECT ENCODING of the value: a string's by its content and its
    /// [`StrEncoding`], a collection's by its own.
    pub(crate) fn encoding(&self) -> &'static str {
        match self.value() {
            ValueRef::Str(s) => match self.str_encoding() {
                StrEncoding::ByContent => ValueRef::Str(s).encoding(),
                StrEncoding::Raw => "raw",
                StrEncoding::Text if s.len() <= EMBSTR_MAX => "embstr",
                StrEncoding::Text => "raw",
            },
            other => other.encoding(),
        }
    }

    /// The boxed `Bytes` of a long string, to be changed in place (an HLL
    /// written register by register). `None` for a short (inline) string or
    /// another type.
    pub fn boxed_str_mut(&mut self) -> Option<&mut Bytes> {
        let (_, tag, _) = self.header();
        match tag {
            // SAFETY: a BoxedStr payload holds a live boxed Bytes (see
            // `value`); `&mut self` makes the borrow exclusive.
            Tag::BoxedStr => Some(unsafe { &mut *self.payload().cast::<*mut Bytes>().read_unaligned() }),
            Tag::InlineStr | Tag::ZSet | Tag::HashPacked | Tag::HashTable | Tag::List | Tag::Set | Tag::Stream => None,
        }
    }

    /// A string value as `Bytes`: a reference for long strings, a copy of
    /// short ones. `None` for other types.
    pub fn str_bytes(&self) -> Option<Bytes> {
        let (_, tag, len) = self.header();
        match tag {
            // SAFETY: an inline payload is `len` bytes inside the allocation.
            Tag::InlineStr => Some(Bytes::copy_from_slice(unsafe {
                std::slice::from_raw_parts(self.payload(), len)
            })),
            // SAFETY: a BoxedStr payload holds a live boxed Bytes (see `value`).
            Tag::BoxedStr => Some(unsafe { (*self.payload().cast::<*mut Bytes>().read_unaligned()).clone() }),
            Tag::ZSet | Tag::HashPacked | Tag::HashTable | Tag::List | Tag::Set | Tag::Stream => None,
        }
    }

    /// Takes the value and deadline out, freeing the item.
    pub fn into_entry(self) -> Entry {
        let this = std::mem::ManuallyDrop::new(self);
        let (_, tag, _) = this.header();
        let expire_at = this.expire_at();
        let payload = this.payload();
        // SAFETY: a boxed payload is moved out exactly once (`drop` never
        // runs for `this`), then the allocation is freed with its layout.
        unsafe {
            let value = match tag {
                Tag::InlineStr => this.value().to_value(),
                Tag::BoxedStr => Value::Str(*Box::from_raw(payload.cast::<*mut Bytes>().read_unaligned())),
                Tag::ZSet => Value::ZSet(Box::from_raw(payload.cast::<*mut ZSet>().read_unaligned())),
                Tag::HashPacked => this.value().to_value(),
                Tag::HashTable => Value::Hash(Box::new(Hash::Table(Box::from_raw(
                    payload.cast::<*mut Table>().read_unaligned(),
                )))),
                Tag::List => Value::List(Box::from_raw(payload.cast::<*mut List>().read_unaligned())),
                Tag::Set => Value::Set(Box::from_raw(payload.cast::<*mut Set>().read_unaligned())),
                Tag::Stream => Value::Stream(Box::from_raw(payload.cast::<*mut Stream>().read_unaligned())),
            };
            dealloc(this.ptr.as_ptr(), this.allocation());
            Entry { value, expire_at }
        }
    }
}

impl Drop for Item {
    fn drop(&mut self) {
        let (_, tag, _) = self.header();
        // SAFETY: frees the boxed payload this item owns, then what `new`
        // allocated, with the same layout.
        unsafe {
            let payload = self.payload();
            match tag {
                Tag::InlineStr => {}
                Tag::BoxedStr => drop(Box::from_raw(payload.cast::<*mut Bytes>().read_unaligned())),
                Tag::ZSet => drop(Box::from_raw(payload.cast::<*mut ZSet>().read_unaligned())),
                Tag::HashPacked => {}
                Tag::HashTable => drop(Box::from_raw(payload.cast::<*mut Table>().read_unaligned())),
                Tag::List => drop(Box::from_raw(payload.cast::<*mut List>().read_unaligned())),
                Tag::Set => drop(Box::from_raw(payload.cast::<*mut Set>().read_unaligned())),
                Tag::Stream => drop(Box::from_raw(payload.cast::<*mut Stream>().read_unaligned())),
            }
            dealloc(self.ptr.as_ptr(), self.allocation());
        }
    }
}

impl std::fmt::Debug for Item {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Item")
            .field("key", &String::from_utf8_lossy(self.key()))
            .field("expire_at", &self.expire_at())
            .field("value", &self.value())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::zset::Listpack;

    #[test]
    fn overwrite_str_only_rewrites_inline_strings_of_the_same_length() {
        let mut item = Item::new(b"counter", Value::Str(Bytes::from_static(b"41")), 1234);
        assert!(item.overwrite_str(b"42"));
        assert!(matches!(item.value(), ValueRef::Str(b"42")));
        assert_eq!((item.key(), item.expire_at()), (&b"counter"[..], 1234));
        assert!(!item.overwrite_str(b"100"), "a longer value needs a new item");
        assert!(matches!(item.value(), ValueRef::Str(b"42")));
        let long = Bytes::from(vec![b'9'; INLINE_MAX + 1]);
        let mut boxed = Item::new(b"k", Value::Str(long.clone()), 0);
        assert!(!boxed.overwrite_str(&long), "boxed strings are shared, never rewritten");
        let mut z = Item::new(b"z", Value::ZSet(Box::default()), 0);
        assert!(!z.overwrite_str(b""));
    }

    #[test]
    fn round_trips_every_kind() {
        let long = Bytes::from(vec![b'x'; INLINE_MAX + 1]);
        let mut z = ZSet::default();
        z.insert(b"m", 1.0, Listpack::default());
        let cases = [
            Value::Str(Bytes::new()),
            Value::Str(Bytes::from_static(b"pod-1234")),
            Value::Str(long.clone()),
            Value::ZSet(Box::new(z)),
        ];
        for value in cases {
            let kind = value.type_name();
            let mut item = Item::new(b"lock:1", value.clone(), 42);
            assert_eq!(item.key(), b"lock:1");
            assert_eq!(item.expire_at(), 42);
            item.set_expire_at(7);
            assert_eq!(item.expire_at(), 7);
            assert_eq!(item.value().type_name(), kind);
            match (&value, item.value()) {
                (Value::Str(a), ValueRef::Str(b)) => {
                    assert_eq!(&a[..], b);
                    assert_eq!(item.str_bytes().unwrap(), a);
                }
                (Value::ZSet(a), ValueRef::ZSet(b)) => assert_eq!(a.len(), b.len()),
                _ => panic!("kind changed"),
            }
            if let ValueMut::ZSet(z) = item.value_mut() {
                z.insert(b"n", 2.0, Listpack::default());
            }
            let again = Item::new(item.key(), item.value().to_value(), 1);
            drop(again);
            let entry = item.into_entry();
            assert_eq!(entry.expire_at, 7);
            assert_eq!(entry.value.type_name(), kind);
        }
        // A long string is shared, not copied, by `str_bytes`.
        let item = Item::new(b"k", Value::Str(long.clone()), 0);
        assert_eq!(item.str_bytes().unwrap().as_ptr(), long.as_ptr());
        // An empty key.
        assert_eq!(Item::new(b"", Value::Str(Bytes::from_static(b"v")), 0).key(), b"");
    }
}
