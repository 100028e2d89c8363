//! List values: Redis's quicklist shape, a deque of [`Packed`] nodes.
//!
//! Each node holds up to `list-max-listpack-size` entries (a positive
//! value) or bytes (-1 .. -5: 4, 8, 16, 32, 64 KB), as Redis's nodes do, so
//! an element costs its bytes plus a byte or two, pushes and pops at both
//! ends are O(1) amortized (within a node of bounded size), and an index
//! walks nodes by their counts: O(distance from the nearer end / node size
//! + node size). Redis 7.0 reports every list as `quicklist`.

use std::collections::VecDeque;

use super::packed;

/// A list node: packed entries with back-lengths (pops at both ends).
type Packed = packed::Packed<true>;

/// The node size limit (`list-max-listpack-size`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fill(pub i64);

impl Fill {
    /// The bytes a node may hold, for a size-limited fill.
    fn max_bytes(self) -> Option<usize> {
        match self.0 {
            n if n > 0 => None,
            -1 => Some(4096),
            -2 => Some(8192),
            -3 => Some(16384),
            -4 => Some(32768),
            _ => Some(65536),
        }
    }

    /// Whether a node may grow by an entry of `len` bytes.
    fn room(self, node: &Packed, len: usize) -> bool {
        if node.is_empty() {
            return true;
        }
        match self.max_bytes() {
            None => node.len() < self.0 as usize,
            // Room for the entry and its two lengths.
            Some(max) => node.bytes() + len + 4 <= max,
        }
    }
}

/// A list value (see the module docs).
#[derive(Clone, Debug, Default)]
pub struct List {
    nodes: VecDeque<Packed>,
    len: usize,
}

/// An end of a list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    Head,
    Tail,
}

impl List {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Nodes (quicklist nodes in Redis: a lazy free's effort).
    pub(crate) fn node_count(&self) -> usize {
        self.nodes.len()
    }

    pub fn push(&mut self, end: End, value: &[u8], fill: Fill) {
        let node = match end {
            End::Head => self.nodes.front_mut(),
            End::Tail => self.nodes.back_mut(),
        };
        match node {
            Some(node) if fill.room(node, value.len()) => match end {
                End::Head => node.push_front(value),
                End::Tail => node.push_back(value),
            },
            full => {
                // The node at this end is done growing: give back its slack.
                if let Some(full) = full {
                    full.fit();
                }
                // A list's first node grows as it fills (a small list stays
                // small); once a list spans nodes, each new node is allocated
                // at its full size once, then filled (growing node after node
                // by doubling left a fragmented heap: 18 MB rather than 16 for
                // a million 14-byte elements).
                let capacity = match fill.max_bytes() {
                    Some(max) if !self.nodes.is_empty() => max.max(value.len() + 4),
                    _ => 0,
                };
                let mut node = Packed::with_capacity(capacity);
                node.push_back(value);
                if self.nodes.is_empty() {
                    // One slot for a one-node list, rather than a deque's
                    // default four: most lists (a job's queue) are small.
                    self.nodes.reserve_exact(1);
                }
                match end {
                    End::Head => self.nodes.push_front(node),
                    End::Tail => self.nodes.push_back(node),
                }
            }
        }
        self.len += 1;
    }

    pub fn pop(&mut self, end: End) -> Option<Vec<u8>> {
        let node = match end {
            End::Head => self.nodes.front_mut()?,
            End::Tail => self.nodes.back_mut()?,
        };
        let at = match end {
            End::Head => 0,
            End::Tail => node.last_offset().expect("nodes are never empty"),
        };
        let value = node.entry_at(at).0.to_vec();
        node.remove_at(at, 1);
        if node.is_empty() {
            match end {
                End::Head => self.nodes.pop_front(),
                End::Tail => self.nodes.pop_back(),
            };
        }
        self.len -= 1;
        Some(value)
    }

    /// The node holding element `index` and the index within it.
    fn locate(&self, index: usize) -> (usize, usize) {
        if index < self.len / 2 {
            let mut i = index;
            for (n, node) in self.nodes.iter().enumerate() {
                if i < node.len() {
                    return (n, i);
                }
                i -= node.len();
            }
        } else {
            let mut from_end = self.len - 1 - index;
            for (n, node) in self.nodes.iter().enumerate().rev() {
                if from_end < node.len() {
                    return (n, node.len() - 1 - from_end);
                }
                from_end -= node.len();
            }
        }
        unreachable!("index {index} within a list of {}", self.len)
    }

    /// Element `index` (0-based from the head).
    pub fn get(&self, index: usize) -> Option<&[u8]> {
        if index >= self.len {
            return None;
        }
        let (n, i) = self.locate(index);
        let node = &self.nodes[n];
        Some(node.entry_at(node.offset_of(i)).0)
    }

    /// Replaces element `index` (which must exist).
    pub fn set(&mut self, index: usize, value: &[u8]) {
        let (n, i) = self.locate(index);
        let node = &mut self.nodes[n];
        let at = node.offset_of(i);
        node.replace_at(at, value);
    }

    /// Inserts `value` before element `index` (`index == len`: at the tail).
    pub fn insert(&mut self, index: usize, value: &[u8], fill: Fill) {
        if index == 0 {
            return self.push(End::Head, value, fill);
        }
        if index == self.len {
            return self.push(End::Tail, value, fill);
        }
        let (n, i) = self.locate(index);
        let node = &mut self.nodes[n];
        if !fill.room(node, value.len()) {
            // Split the full node where the value goes, as quicklist does.
            let tail = node.split_off(i);
            self.nodes.insert(n + 1, tail);
        }
        let node = &mut self.nodes[n];
        if i <= node.len() && fill.room(node, value.len()) {
            let at = node.offset_of(i);
            node.insert_at(at, &[value]);
        } else {
            let mut fresh = Packed::default();
            fresh.push_back(value);
            self.nodes.insert(n + 1, fresh);
        }
        self.len += 1;
    }

    /// Removes elements `start..start + count`.
    pub fn remove_range(&mut self, start: usize, count: usize) {
        let mut left = count;
        let mut skip = start;
        let mut n = 0;
        while left > 0 && n < self.nodes.len() {
            let node_len = self.nodes[n].len();
            if skip >= node_len {
                skip -= node_len;
                n += 1;
                continue;
            }
            let take = left.min(node_len - skip);
            if skip == 0 && take == node_len {
                self.nodes.remove(n);
            } else {
                let node = &mut self.nodes[n];
                let at = node.offset_of(skip);
                node.remove_at(at, take);
                n += 1;
            }
            left -= take;
            skip = 0;
            self.len -= take;
        }
    }

    /// Elements from the head.
    pub fn iter(&self) -> impl Iterator<Item = &[u8]> + '_ {
        self.nodes.iter().flat_map(|node| node.iter().map(|(_, e)| e))
    }

    /// Elements `start..=stop` (valid indexes), from the head.
    pub fn range(&self, start: usize, stop: usize) -> Vec<&[u8]> {
        if start > stop || start >= self.len {
            return vec![];
        }
        let (first, i) = self.locate(start);
        let mut out = Vec::with_capacity(stop - start + 1);
        let mut skip = i;
        for node in self.nodes.iter().skip(first) {
            for (_, e) in node.iter().skip(skip) {
                if out.len() == stop - start + 1 {
                    return out;
                }
                out.push(e);
            }
            skip = 0;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn items(l: &List) -> Vec<String> {
        l.iter().map(|e| String::from_utf8_lossy(e).into_owned()).collect()
    }

    #[test]
    fn a_list_behaves_as_a_deque_across_nodes() {
        let fill = Fill(3);
        let mut l = List::default();
        let mut model: VecDeque<String> = VecDeque::new();
        for i in 0..20 {
            let v = i.to_string();
            if i % 3 == 0 {
                l.push(End::Head, v.as_bytes(), fill);
                model.push_front(v);
            } else {
                l.push(End::Tail, v.as_bytes(), fill);
                model.push_back(v);
            }
        }
        assert_eq!(items(&l), Vec::from(model.clone()));
        for (i, expected) in model.iter().enumerate() {
            assert_eq!(l.get(i), Some(expected.as_bytes()));
        }
        l.insert(5, b"x", fill);
        model.insert(5, "x".into());
        l.insert(0, b"h", fill);
        model.push_front("h".into());
        l.insert(l.len(), b"t", fill);
        model.push_back("t".into());
        assert_eq!(items(&l), Vec::from(model.clone()));
        l.set(7, b"seven");
        model[7] = "seven".into();
        l.remove_range(2, 9);
        model.drain(2..11);
        assert_eq!(items(&l), Vec::from(model.clone()));
        assert_eq!(l.len(), model.len());
        let r: Vec<&[u8]> = l.range(1, 4);
        assert_eq!(r.len(), 4);
        assert_eq!(r[0], model[1].as_bytes());
        while let Some(v) = l.pop(End::Tail) {
            assert_eq!(Some(String::from_utf8(v).unwrap()), model.pop_back());
        }
        assert!(l.is_empty() && model.is_empty());
        let mut big = List::default();
        for _ in 0..10 {
            big.push(End::Tail, &[b'x'; 3000], Fill(-1));
        }
        assert_eq!(big.nodes.len(), 10, "4 KB nodes hold one 3000-byte entry each");
    }
}
