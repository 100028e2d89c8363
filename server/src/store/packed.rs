//! Byte strings packed one after another in one exact-size buffer, the
//! shape of Redis's listpack: small hashes and the nodes of lists.
//!
//! Each entry is `[length: LEB128][bytes]`, followed, when `BACK` is set,
//! by the entry's size as a LEB128 read backwards (a listpack's
//! back-length), so the last entry is found without a walk: list nodes pop
//! at both ends in O(1). Small hashes, walked only forwards, go without it.
//! The buffer holds nothing else, so a five-field hash of short strings
//! costs one allocation of about a hundred bytes. Walking is linear, as in
//! a listpack: the encodings that use it bound their size
//! (`hash-max-listpack-entries`, `list-max-listpack-size`).

/// Packed entries (see the module docs).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Packed<const BACK: bool = false> {
    buf: Vec<u8>,
    /// Entries in `buf`.
    count: usize,
}

/// Bytes a length takes as LEB128.
pub(crate) fn varint_len(mut n: usize) -> usize {
    let mut bytes = 1;
    while n >= 0x80 {
        n >>= 7;
        bytes += 1;
    }
    bytes
}

pub(crate) fn write_varint(out: &mut Vec<u8>, mut n: usize) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// Writes `n` as LEB128 in reverse byte order, to be read backwards.
fn write_back_varint(out: &mut Vec<u8>, n: usize) {
    let start = out.len();
    write_varint(out, n);
    out[start..].reverse();
}

/// Reads a back-length that ends at `end`; returns it and where it starts.
fn read_back_varint(buf: &[u8], end: usize) -> (usize, usize) {
    let mut at = end;
    let mut n = 0usize;
    let mut shift = 0;
    loop {
        at -= 1;
        let b = buf[at];
        n |= ((b & 0x7f) as usize) << shift;
        if b < 0x80 {
            return (n, at);
        }
        shift += 7;
    }
}

/// Reads a length at `at`; returns it and where its bytes start.
pub(crate) fn read_varint(buf: &[u8], mut at: usize) -> (usize, usize) {
    let mut n = 0usize;
    let mut shift = 0;
    loop {
        let b = buf[at];
        at += 1;
        n |= ((b & 0x7f) as usize) << shift;
        if b < 0x80 {
            return (n, at);
        }
        shift += 7;
    }
}

/// Packed entries borrowed from elsewhere (a small hash stored inside its
/// key's allocation): the read side of [`Packed`].
#[derive(Clone, Copy, Debug)]
pub struct PackedRef<'a, const BACK: bool = false> {
    buf: &'a [u8],
    count: usize,
}

impl<'a, const BACK: bool> PackedRef<'a, BACK> {
    pub fn new(buf: &'a [u8], count: usize) -> Self {
        PackedRef { buf, count }
    }

    pub fn len(&self) -> usize {
        self.count
    }

    /// The raw buffer (to store it elsewhere).
    pub fn raw(&self) -> &'a [u8] {
        self.buf
    }

    /// The entry starting at byte `at`, and where the next one starts.
    pub fn entry_at(&self, at: usize) -> (&'a [u8], usize) {
        let (len, start) = read_varint(self.buf, at);
        let end = start + len;
        let next = if BACK { end + varint_len(end - at) } else { end };
        (&self.buf[start..end], next)
    }

    /// Entries in order, each with its byte offset.
    pub fn iter(&self) -> impl Iterator<Item = (usize, &'a [u8])> + 'a {
        let this = *self;
        let mut at = 0;
        std::iter::from_fn(move || {
            if at >= this.buf.len() {
                return None;
            }
            let (entry, next) = this.entry_at(at);
            let here = at;
            at = next;
            Some((here, entry))
        })
    }

    /// An owned copy.
    pub fn to_owned(self) -> Packed<BACK> {
        Packed {
            buf: self.buf.to_vec(),
            count: self.count,
        }
    }
}

impl<const BACK: bool> Packed<BACK> {
    /// The entries, borrowed.
    pub fn as_ref(&self) -> PackedRef<'_, BACK> {
        PackedRef {
            buf: &self.buf,
            count: self.count,
        }
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Bytes of the buffer (what `list-max-listpack-size` bounds).
    pub fn bytes(&self) -> usize {
        self.buf.len()
    }

    /// The entry starting at byte `at`, and where the next one starts.
    pub fn entry_at(&self, at: usize) -> (&[u8], usize) {
        self.as_ref().entry_at(at)
    }

    /// The byte offset of the last entry: O(1) with back-lengths.
    pub fn last_offset(&self) -> Option<usize> {
        if self.buf.is_empty() {
            return None;
        }
        if BACK {
            let (size, back_start) = read_back_varint(&self.buf, self.buf.len());
            Some(back_start - size)
        } else {
            self.iter().last().map(|(at, _)| at)
        }
    }

    /// Bytes one entry of `len` bytes takes.
    fn entry_size(len: usize) -> usize {
        let front = varint_len(len) + len;
        if BACK {
            front + varint_len(front)
        } else {
            front
        }
    }

    /// Entries in order, each with its byte offset.
    pub fn iter(&self) -> impl Iterator<Item = (usize, &[u8])> + '_ {
        self.as_ref().iter()
    }

    /// The byte offset of entry `index` (or the end, for `index == len`).
    pub fn offset_of(&self, index: usize) -> usize {
        self.iter().nth(index).map_or(self.buf.len(), |(at, _)| at)
    }

    /// Replaces `remove_bytes` bytes at `at` with `insert`'s entries.
    fn splice(&mut self, at: usize, remove_bytes: usize, insert: &[&[u8]]) {
        let mut new = Vec::with_capacity(insert.iter().map(|e| Self::entry_size(e.len())).sum());
        for e in insert {
            let start = new.len();
            write_varint(&mut new, e.len());
            new.extend_from_slice(e);
            if BACK {
                let size = new.len() - start;
                write_back_varint(&mut new, size);
            }
        }
        let grow = new.len().saturating_sub(remove_bytes);
        // Amortized growth: a list node filled by pushes would otherwise be
        // reallocated at every push. Owners give the slack back with
        // `fit` once the buffer is done growing.
        self.buf.reserve(grow);
        self.buf.splice(at..at + remove_bytes, new);
    }

    /// Inserts entries before the byte offset `at`.
    pub fn insert_at(&mut self, at: usize, entries: &[&[u8]]) {
        self.splice(at, 0, entries);
        self.count += entries.len();
    }

    pub fn push_back(&mut self, entry: &[u8]) {
        self.insert_at(self.buf.len(), &[entry]);
    }

    pub fn push_front(&mut self, entry: &[u8]) {
        self.insert_at(0, &[entry]);
    }

    /// Removes `n` entries from the byte offset `at`.
    pub fn remove_at(&mut self, at: usize, n: usize) {
        let mut end = at;
        for _ in 0..n {
            end = self.entry_at(end).1;
        }
        self.splice(at, end - at, &[]);
        self.count -= n;
        self.shrink();
    }

    /// Replaces the entry at byte offset `at` with `entry`.
    pub fn replace_at(&mut self, at: usize, entry: &[u8]) {
        let end = self.entry_at(at).1;
        self.splice(at, end - at, &[entry]);
        self.shrink();
    }

    /// Splits off the entries from index `index` on into a new buffer.
    pub fn split_off(&mut self, index: usize) -> Packed<BACK> {
        let at = self.offset_of(index);
        let tail = Packed {
            buf: self.buf[at..].to_vec(),
            count: self.count - index,
        };
        self.buf.truncate(at);
        self.count = index;
        self.shrink();
        tail
    }

    /// Appends every entry of `other`.
    pub fn append(&mut self, other: &Packed<BACK>) {
        self.buf.reserve_exact(other.buf.len());
        self.buf.extend_from_slice(&other.buf);
        self.count += other.count;
    }

    /// An empty buffer with room for `bytes` (a list node about to be filled).
    pub fn with_capacity(bytes: usize) -> Packed<BACK> {
        Packed {
            buf: Vec::with_capacity(bytes),
            count: 0,
        }
    }

    /// Makes room for exactly `entries` more entries, so that the next
    /// insertion does not over-allocate (small hashes stay exact-size).
    pub fn reserve_exact_for(&mut self, entries: &[&[u8]]) {
        let bytes = entries.iter().map(|e| Self::entry_size(e.len())).sum();
        self.buf.reserve_exact(bytes);
    }

    /// Gives back every unused byte of capacity (a listpack is exact-size).
    pub fn fit(&mut self) {
        self.buf.shrink_to_fit();
    }

    /// Gives back capacity a removal left unused.
    fn shrink(&mut self) {
        if self.buf.capacity() > self.buf.len() + self.buf.len() / 4 + 16 {
            self.buf.shrink_to_fit();
        }
    }

    /// Heap bytes held (MEMORY-style accounting for tests).
    pub fn capacity(&self) -> usize {
        self.buf.capacity()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_through_every_edit() {
        edits::<false>();
        edits::<true>();
    }

    fn edits<const BACK: bool>() {
        let mut p = Packed::<BACK>::default();
        let long = vec![b'x'; 300];
        p.push_back(b"a");
        p.push_back(&long);
        p.push_front(b"");
        p.push_back(b"tail");
        let all: Vec<Vec<u8>> = p.iter().map(|(_, e)| e.to_vec()).collect();
        assert_eq!(all, vec![b"".to_vec(), b"a".to_vec(), long.clone(), b"tail".to_vec()]);
        assert_eq!(p.len(), 4);
        let at = p.offset_of(1);
        p.replace_at(at, b"changed");
        assert_eq!(p.entry_at(p.offset_of(1)).0, b"changed");
        p.remove_at(p.offset_of(2), 1);
        let all: Vec<&[u8]> = p.iter().map(|(_, e)| e).collect();
        assert_eq!(all, vec![&b""[..], b"changed", b"tail"]);
        let tail = p.split_off(1);
        assert_eq!((p.len(), tail.len()), (1, 2));
        p.append(&tail);
        assert_eq!(p.len(), 3);
        assert_eq!(p.entry_at(p.offset_of(2)).0, b"tail");
        p.insert_at(p.offset_of(1), &[b"x", b"y"]);
        let all: Vec<&[u8]> = p.iter().map(|(_, e)| e).collect();
        assert_eq!(all, vec![&b""[..], b"x", b"y", b"changed", b"tail"]);
        assert_eq!(p.last_offset(), Some(p.offset_of(4)));
        let mut big = Packed::<BACK>::default();
        big.push_back(&[b'z'; 200]);
        big.push_back(&[b'w'; 130]);
        assert_eq!(big.entry_at(big.last_offset().unwrap()).0, &[b'w'; 130][..]);
    }
}
