//! Sorted sets: a hash index (member → element) plus an ordered index of
//! the elements by (score, member), with Redis's semantics.
//!
//! Elements (a member and its score) live in an arena and are named by
//! number. The ordered index is a B+-tree with element counts for ranks
//! (`tree.rs`): insert, delete, rank and score update are O(log n), a score
//! lookup O(1), and removing a range of m elements O(m log n).
//!
//! A large set does not fit in cache, so the layout keeps each operation to
//! few cache misses: the tree's entries carry each element's score and the
//! first 8 bytes of its member, so a search reads the element only on a tie
//! of both; a member of up to 22 bytes is stored inside its element; the
//! hash index holds 4-byte element numbers.

mod tree;

use std::cmp::Ordering;
use std::hash::BuildHasher;

use bytes::Bytes;
use foldhash::fast::RandomState;
use hashbrown::HashTable;

use super::small::SmallBytes as Member;
use tree::{Key, Members, Pos, Tree};

/// The first 8 bytes of a member, zero-padded, as a big-endian number.
/// Comparing two prefixes orders their members whenever the prefixes
/// differ: the first differing byte decides, and a zero pad only ever sits
/// where the shorter member has ended (a proper prefix sorts first). Equal
/// prefixes say nothing, and the members are compared in full.
fn prefix(m: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    let n = m.len().min(8);
    b[..n].copy_from_slice(&m[..n]);
    u64::from_be_bytes(b)
}

/// A score interval, bounds possibly exclusive (`(1.5`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ScoreRange {
    /// Lower bound.
    pub min: f64,
    /// Upper bound.
    pub max: f64,
    /// Whether `min` itself is excluded.
    pub minex: bool,
    /// Whether `max` itself is excluded.
    pub maxex: bool,
}

impl ScoreRange {
    /// Whether `v` is at or above the lower bound (above it when exclusive).
    pub fn gte_min(&self, v: f64) -> bool {
        if self.minex {
            v > self.min
        } else {
            v >= self.min
        }
    }

    /// Whether `v` is at or below the upper bound (below it when exclusive).
    pub fn lte_max(&self, v: f64) -> bool {
        if self.maxex {
            v < self.max
        } else {
            v <= self.max
        }
    }

    /// False when no score can be in the range.
    pub fn is_satisfiable(&self) -> bool {
        !(self.min > self.max || (self.min == self.max && (self.minex || self.maxex)))
    }
}

/// One end of a lexicographic range (`-`, `+`, `[a`, `(a`).
#[derive(Clone, Debug, PartialEq)]
pub enum LexBound {
    /// `-`: below every string.
    Min,
    /// `+`: above every string.
    Max,
    /// `[a`: `a` itself included.
    Inclusive(Bytes),
    /// `(a`: `a` itself excluded.
    Exclusive(Bytes),
}

/// A lexicographic interval (ZRANGEBYLEX and friends).
#[derive(Clone, Debug, PartialEq)]
pub struct LexRange {
    /// Lower bound.
    pub min: LexBound,
    /// Upper bound.
    pub max: LexBound,
}

/// Compares a bound's string with a member the way Redis's `sdscmplex` does.
fn cmp_bound(bound: &LexBound, member: &[u8]) -> Ordering {
    match bound {
        LexBound::Min => Ordering::Less,
        LexBound::Max => Ordering::Greater,
        LexBound::Inclusive(b) | LexBound::Exclusive(b) => b.as_ref().cmp(member),
    }
}

impl LexBound {
    /// `-` and `+` behave as exclusive bounds, as in Redis.
    fn exclusive(&self) -> bool {
        !matches!(self, LexBound::Inclusive(_))
    }
}

impl LexRange {
    /// Whether `m` is at or above the lower bound.
    pub fn gte_min(&self, m: &[u8]) -> bool {
        let order = cmp_bound(&self.min, m);
        if self.min.exclusive() {
            order == Ordering::Less
        } else {
            order != Ordering::Greater
        }
    }

    /// Whether `m` is at or below the upper bound.
    pub fn lte_max(&self, m: &[u8]) -> bool {
        let order = cmp_bound(&self.max, m);
        if self.max.exclusive() {
            order == Ordering::Greater
        } else {
            order != Ordering::Less
        }
    }

    /// False when no string can be in the range.
    pub fn is_satisfiable(&self) -> bool {
        let order = match (&self.min, &self.max) {
            (LexBound::Min, LexBound::Min) | (LexBound::Max, LexBound::Max) => Ordering::Equal,
            (LexBound::Min, _) | (_, LexBound::Max) => Ordering::Less,
            (LexBound::Max, _) | (_, LexBound::Min) => Ordering::Greater,
            (LexBound::Inclusive(a) | LexBound::Exclusive(a), LexBound::Inclusive(b) | LexBound::Exclusive(b)) => {
                a.cmp(b)
            }
        };
        let exclusive = self.min.exclusive() || self.max.exclusive();
        !(order == Ordering::Greater || (order == Ordering::Equal && exclusive))
    }
}

/// Redis keeps a sorted set in its compact (listpack) encoding while it has
/// at most `max_entries` members (`zset-max-listpack-entries`), none longer
/// than `max_value` bytes (`zset-max-listpack-value`). Passed in from the
/// configuration at every addition, as Redis reads its settings then.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Listpack {
    /// Most members (`zset-max-listpack-entries`).
    pub max_entries: usize,
    /// Longest member, in bytes (`zset-max-listpack-value`).
    pub max_value: usize,
}

impl Default for Listpack {
    /// The directives' defaults (for tests and benchmarks; commands pass
    /// the configured values).
    fn default() -> Self {
        static DEFAULT: std::sync::OnceLock<Listpack> = std::sync::OnceLock::new();
        *DEFAULT.get_or_init(|| crate::config::Config::default().zset_listpack())
    }
}

impl Listpack {
    fn holds(&self, len: usize, longest: usize) -> bool {
        len <= self.max_entries && longest <= self.max_value
    }
}

/// An element: its member and score. Elements live in an arena and are
/// named by number in the index and the tree.
#[derive(Clone, Debug)]
struct Element {
    score: f64,
    member: Member,
}

/// The element arena.
#[derive(Clone, Debug, Default)]
struct Elements {
    items: Vec<Element>,
    /// Numbers freed by removals, reused by additions.
    free: Vec<u32>,
}

impl Members for Elements {
    fn member(&self, e: u32) -> &[u8] {
        self.items[e as usize].member.as_bytes()
    }
}

impl Elements {
    fn get(&self, e: u32) -> &Element {
        &self.items[e as usize]
    }

    fn key(&self, e: u32) -> Key<'_> {
        let el = self.get(e);
        key(el.score, el.member.as_bytes())
    }

    fn add(&mut self, score: f64, member: &[u8]) -> u32 {
        let el = Element {
            score,
            member: Member::new(member),
        };
        tree::alloc(&mut self.items, &mut self.free, el)
    }

    fn release(&mut self, e: u32) {
        self.items[e as usize].member = Member::EMPTY;
        self.free.push(e);
    }
}

fn key(score: f64, member: &[u8]) -> Key<'_> {
    Key {
        score,
        prefix: prefix(member),
        member,
    }
}

/// A sorted set value.
#[derive(Clone, Debug)]
pub struct ZSet {
    /// Member → element number, hashed with `hasher` over the member's
    /// bytes. Slots hold only the number; the element holds the member.
    index: HashTable<u32>,
    hasher: RandomState,
    elems: Elements,
    /// The elements in (score, member) order.
    tree: Tree,
    /// Whether Redis would still hold this set in its compact (listpack)
    /// encoding. The encoding is visible in one place: a listpack stores a
    /// score of -0 as the integer 0, so Redis replies `0` for it while a
    /// larger set replies `-0`. coordis tracks the same transition.
    compact: bool,
}

impl Default for ZSet {
    fn default() -> Self {
        ZSet {
            index: HashTable::new(),
            hasher: RandomState::default(),
            elems: Elements::default(),
            tree: Tree::default(),
            compact: true,
        }
    }
}

/// An element position: an opaque cursor for walking the set in order.
/// It stays valid until the set is next changed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Cursor(Pos);

/// A member found in the set (by [`ZSet::find`]), whatever its position.
/// It stays valid until the set is next changed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Entry(u32);

impl ZSet {
    /// Number of members (ZCARD).
    pub fn len(&self) -> usize {
        self.tree.len()
    }

    /// Whether the set has no member.
    pub fn is_empty(&self) -> bool {
        self.tree.len() == 0
    }

    /// `OBJECT ENCODING`.
    pub fn encoding(&self) -> &'static str {
        if self.compact {
            "listpack"
        } else {
            "skiplist"
        }
    }

    /// DEBUG HTSTATS-KEY's report on the member index
    /// ([`crate::store::htstats`]); `None` while the set is in its listpack
    /// encoding, which Redis keeps without a hash table (coordis keeps
    /// its index all along, but answers as the encoding it reports).
    pub(crate) fn htstats(&self) -> Option<String> {
        (!self.compact).then(|| crate::store::htstats::report(&self.index))
    }

    /// Leaves the compact encoding for good, as SORT does to a listpack
    /// sorted set in Redis ("destructively convert encoded sorted sets").
    pub fn to_skiplist(&mut self) {
        self.compact = false;
    }

    /// The element whose member is `member`.
    pub fn find(&self, member: &[u8]) -> Option<Entry> {
        let hash = self.hasher.hash_one(member);
        self.index
            .find(hash, |&e| self.elems.member(e) == member)
            .map(|&e| Entry(e))
    }

    /// The score of a found member.
    pub fn score_of(&self, e: Entry) -> f64 {
        self.elems.get(e.0).score
    }

    /// `member`'s score, if it is in the set (ZSCORE).
    pub fn score(&self, member: &[u8]) -> Option<f64> {
        self.find(member).map(|e| self.score_of(e))
    }

    /// An intermediate result (ZUNION, ZINTER...): scores are kept exactly,
    /// as in the skip list Redis computes these into.
    pub fn scratch() -> ZSet {
        ZSet {
            compact: false,
            ..ZSet::default()
        }
    }

    /// Builds a set from computed elements with distinct members (ZUNIONSTORE,
    /// ZRANGESTORE...), in the encoding Redis would pick for the result's size.
    pub fn from_items<'a>(items: impl IntoIterator<Item = (&'a [u8], f64)>, limits: Listpack) -> ZSet {
        let items: Vec<(&[u8], f64)> = items.into_iter().collect();
        let longest = items.iter().map(|(m, _)| m.len()).max().unwrap_or(0);
        let compact = limits.holds(items.len(), longest);
        let mut z = ZSet {
            compact,
            ..ZSet::default()
        };
        for (m, s) in items {
            z.insert(m, s, limits);
        }
        z
    }

    /// A listpack stores -0 as the integer 0; a skip list keeps it.
    fn stored_score(&self, score: f64) -> f64 {
        if self.compact && score == 0.0 {
            0.0
        } else {
            score
        }
    }

    /// Sets `member`'s score, adding it if absent. Returns true if it was added.
    pub fn insert(&mut self, member: &[u8], score: f64, limits: Listpack) -> bool {
        match self.find(member) {
            Some(e) => {
                self.set_score(e, score);
                false
            }
            None => {
                self.add(member, score, limits);
                true
            }
        }
    }

    /// Gives a found member a new score (nothing changes if it is equal).
    /// The element stays in place when its neighbours allow, as Redis's
    /// `zslUpdateScore` does; otherwise it moves.
    pub fn set_score(&mut self, e: Entry, score: f64) {
        let score = self.stored_score(score);
        let el = self.elems.get(e.0);
        if el.score == score {
            return;
        }
        let member = el.member.as_bytes();
        self.tree
            .update(e.0, &key(el.score, member), &key(score, member), &self.elems);
        self.elems.items[e.0 as usize].score = score;
    }

    /// Adds a member known to be absent (found missing by [`ZSet::find`]).
    pub fn add(&mut self, member: &[u8], score: f64, limits: Listpack) {
        debug_assert!(self.find(member).is_none());
        if self.compact && !limits.holds(self.len() + 1, member.len()) {
            self.compact = false;
        }
        let score = self.stored_score(score);
        let e = self.elems.add(score, member);
        self.tree.insert(e, &self.elems.key(e), &self.elems);
        let (elems, hasher) = (&self.elems, &self.hasher);
        self.index
            .insert_unique(hasher.hash_one(member), e, |&y| hasher.hash_one(elems.member(y)));
    }

    /// Removes `member`; returns whether it was there.
    pub fn remove(&mut self, member: &[u8]) -> bool {
        let hash = self.hasher.hash_one(member);
        let elems = &self.elems;
        match self.index.find_entry(hash, |&e| elems.member(e) == member) {
            Ok(entry) => {
                let (e, _) = entry.remove();
                self.tree.remove(&self.elems.key(e), &self.elems);
                self.elems.release(e);
                true
            }
            Err(_) => false,
        }
    }

    /// Removes the elements from `start` on while `keep_going` holds for
    /// their member and score; returns how many.
    fn remove_run(&mut self, start: Option<Cursor>, mut keep_going: impl FnMut(&[u8], f64) -> bool) -> usize {
        let mut run = Vec::new();
        let mut cur = start;
        while let Some(c) = cur {
            let (m, s) = self.get(c);
            if !keep_going(m, s) {
                break;
            }
            run.push(self.tree.elem(c.0));
            cur = self.step(c, false);
        }
        for &e in &run {
            self.tree.remove(&self.elems.key(e), &self.elems);
            let hash = self.hasher.hash_one(self.elems.member(e));
            let found = self.index.find_entry(hash, |&y| y == e).map(|entry| entry.remove());
            debug_assert!(found.is_ok(), "every element is indexed");
            self.elems.release(e);
        }
        run.len()
    }

    /// 0-based rank from the lowest score (or the highest when `rev`).
    pub fn rank(&self, member: &[u8], rev: bool) -> Option<usize> {
        let e = self.find(member)?;
        let rank = self.tree.rank(&self.elems.key(e.0), &self.elems);
        Some(if rev { self.len() - 1 - rank } else { rank })
    }

    /// 0-based ascending rank of the element at `c`.
    pub fn rank_at(&self, c: Cursor) -> usize {
        self.tree.rank(&self.elems.key(self.tree.elem(c.0)), &self.elems)
    }

    /// The element at 0-based `rank` in ascending order.
    pub fn at_rank(&self, rank: usize) -> Option<Cursor> {
        (rank < self.len()).then(|| Cursor(self.tree.at_rank(rank)))
    }

    /// The member and score at `c`.
    pub fn get(&self, c: Cursor) -> (&[u8], f64) {
        (self.elems.member(self.tree.elem(c.0)), self.tree.score(c.0))
    }

    /// The next element in ascending order (descending when `rev`).
    pub fn step(&self, c: Cursor, rev: bool) -> Option<Cursor> {
        if rev {
            self.tree.prev(c.0).map(Cursor)
        } else {
            self.tree.next(c.0).map(Cursor)
        }
    }

    /// The element with the lowest score (and member), if any.
    pub fn first(&self) -> Option<Cursor> {
        self.tree.first().map(Cursor)
    }

    /// The element with the highest score (and member), if any.
    pub fn last(&self) -> Option<Cursor> {
        self.tree.last().map(Cursor)
    }

    /// The first element for which `before` fails, `before` holding for a
    /// prefix of the order.
    fn seek(&self, before: impl Fn(&Element) -> bool) -> Option<Cursor> {
        self.tree.seek(|e| before(self.elems.get(e))).map(Cursor)
    }

    /// The last element for which `upto` holds, `upto` holding for a prefix
    /// of the order.
    fn seek_last(&self, upto: impl Fn(&Element) -> bool) -> Option<Cursor> {
        self.tree.seek_last(|e| upto(self.elems.get(e))).map(Cursor)
    }

    /// First element with score in `r` (ascending).
    pub fn first_in_score_range(&self, r: &ScoreRange) -> Option<Cursor> {
        if !r.is_satisfiable() {
            return None;
        }
        self.seek(|el| !r.gte_min(el.score))
            .filter(|c| r.lte_max(self.get(*c).1))
    }

    /// Last element with score in `r`.
    pub fn last_in_score_range(&self, r: &ScoreRange) -> Option<Cursor> {
        if !r.is_satisfiable() {
            return None;
        }
        self.seek_last(|el| r.lte_max(el.score))
            .filter(|c| r.gte_min(self.get(*c).1))
    }

    /// Redis's `zslIsInLexRange`: the range is satisfiable, the last member
    /// is not below it and the first is not above it.
    fn lex_range_overlaps(&self, r: &LexRange) -> bool {
        match (self.first(), self.last()) {
            (Some(f), Some(l)) => r.is_satisfiable() && r.gte_min(self.get(l).0) && r.lte_max(self.get(f).0),
            _ => false,
        }
    }

    /// First element of a lexicographic range. Lex ranges presume equal
    /// scores; with mixed scores the answer depends on the encoding, so this
    /// follows Redis: a linear scan for compact sets (deterministic), a
    /// descent of the ordered index for large ones (Redis descends its skip
    /// list, whose answer then depends on its random levels).
    pub fn first_in_lex_range(&self, r: &LexRange) -> Option<Cursor> {
        if !self.lex_range_overlaps(r) {
            return None;
        }
        let found = if self.compact {
            self.walk_until(false, |m| r.gte_min(m))
        } else {
            self.seek(|el| !r.gte_min(el.member.as_bytes()))
        };
        found.filter(|c| r.lte_max(self.get(*c).0))
    }

    /// The first element, from the lowest (or with `rev` the highest), whose
    /// member satisfies `stop`: the linear scan Redis does on compact sets.
    fn walk_until(&self, rev: bool, stop: impl Fn(&[u8]) -> bool) -> Option<Cursor> {
        let mut cur = if rev { self.last() } else { self.first() };
        while let Some(c) = cur {
            if stop(self.get(c).0) {
                break;
            }
            cur = self.step(c, rev);
        }
        cur
    }

    /// Last element of a lexicographic range (see [`ZSet::first_in_lex_range`]).
    pub fn last_in_lex_range(&self, r: &LexRange) -> Option<Cursor> {
        if !self.lex_range_overlaps(r) {
            return None;
        }
        let found = if self.compact {
            self.walk_until(true, |m| r.lte_max(m))
        } else {
            self.seek_last(|el| r.lte_max(el.member.as_bytes()))
        };
        found.filter(|c| r.gte_min(self.get(*c).0))
    }

    /// Whether `score` is in `r`.
    pub fn score_in_range(r: &ScoreRange, score: f64) -> bool {
        r.gte_min(score) && r.lte_max(score)
    }

    /// Whether `member` is in `r`.
    pub fn member_in_range(r: &LexRange, member: &[u8]) -> bool {
        r.gte_min(member) && r.lte_max(member)
    }

    /// Removes every element with score in `r`; returns how many.
    pub fn remove_score_range(&mut self, r: &ScoreRange) -> usize {
        if !r.is_satisfiable() {
            return 0;
        }
        let start = self.seek(|el| !r.gte_min(el.score));
        self.remove_run(start, |_, s| r.lte_max(s))
    }

    /// ZLEXCOUNT: a walk from the first element of the range while members
    /// are not above its max (compact sets), or a difference of ranks (large
    /// sets), as Redis computes it for each encoding.
    pub fn lex_count(&self, r: &LexRange) -> i64 {
        let Some(first) = self.first_in_lex_range(r) else {
            return 0;
        };
        if self.compact {
            let mut count = 0;
            let mut cur = Some(first);
            while let Some(c) = cur {
                if !r.lte_max(self.get(c).0) {
                    break;
                }
                count += 1;
                cur = self.step(c, false);
            }
            return count;
        }
        let rank_of = |c: Cursor| self.rank_at(c) as i64;
        let mut count = self.len() as i64 - rank_of(first);
        if let Some(last) = self.last_in_lex_range(r) {
            count -= self.len() as i64 - rank_of(last) - 1;
        }
        count
    }

    /// Removes the run of elements that starts at the first element of the
    /// lexicographic range and continues while members are not above its max.
    pub fn remove_lex_range(&mut self, r: &LexRange) -> usize {
        let first = self.first_in_lex_range(r);
        self.remove_run(first, |m, _| r.lte_max(m))
    }

    /// Removes 0-based ranks `start..=end` (already clamped to the set).
    pub fn remove_rank_range(&mut self, start: usize, end: usize) -> usize {
        let first = self.at_rank(start);
        let mut left = end + 1 - start;
        self.remove_run(first, |_, _| {
            let go = left > 0;
            left = left.saturating_sub(1);
            go
        })
    }

    /// All elements in ascending order.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], f64)> {
        let mut cur = self.first();
        std::iter::from_fn(move || {
            let c = cur?;
            cur = self.step(c, false);
            Some(self.get(c))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn less(a_score: f64, a_member: &[u8], b_score: f64, b_member: &[u8]) -> bool {
        a_score < b_score || (a_score == b_score && a_member < b_member)
    }

    fn check(z: &ZSet) {
        let items: Vec<(Vec<u8>, f64)> = z.iter().map(|(m, s)| (m.to_vec(), s)).collect();
        assert_eq!(items.len(), z.len());
        for w in items.windows(2) {
            assert!(less(w[0].1, &w[0].0, w[1].1, &w[1].0), "order broken");
        }
        for (i, (m, _)) in items.iter().enumerate() {
            assert_eq!(z.rank(m, false), Some(i));
            assert_eq!(z.get(z.at_rank(i).unwrap()).0, m);
        }
        // Backward links mirror forward ones.
        let mut back = vec![];
        let mut c = z.last();
        while let Some(cur) = c {
            back.push(z.get(cur).0.to_vec());
            c = z.step(cur, true);
        }
        back.reverse();
        assert_eq!(back, items.iter().map(|i| i.0.clone()).collect::<Vec<_>>());
        // The tree's own invariants (counts, smallest-entry copies, sibling
        // links), its score copies against the elements, and an index that
        // finds exactly the members in the tree.
        z.tree.check(&z.elems);
        let mut cur = z.first();
        while let Some(c) = cur {
            let e = z.tree.elem(c.0);
            assert_eq!(z.tree.score(c.0).to_bits(), z.elems.get(e).score.to_bits());
            cur = z.step(c, false);
        }
        assert_eq!(z.index.len(), z.len());
        for (m, s) in &items {
            assert_eq!(z.score(m).map(f64::to_bits), Some(s.to_bits()));
        }
    }

    /// Members that exercise the prefix and inline/heap cases: short ones,
    /// ones sharing their first 8 bytes, long ones, and zero bytes (a zero
    /// pad must not make `a` and `a\0` compare equal by prefix alone).
    fn member(n: u32) -> Vec<u8> {
        match n % 4 {
            0 => format!("m{n}").into_bytes(),
            1 => format!("shared-prefix:{n}").into_bytes(),
            2 => format!("a-member-long-enough-to-live-on-the-heap:{n}").into_bytes(),
            _ => [b"a".as_slice(), &vec![0; (n % 7) as usize], &n.to_be_bytes()].concat(),
        }
    }

    #[test]
    fn prefixes_order_like_members() {
        let ms: Vec<Vec<u8>> = vec![
            b"".to_vec(),
            b"a".to_vec(),
            b"a\0".to_vec(),
            b"a\0\0\0\0\0\0\0\0".to_vec(),
            b"abcdefgh".to_vec(),
            b"abcdefghi".to_vec(),
            b"abcdefgi".to_vec(),
            vec![0xff; 9],
        ];
        for a in &ms {
            for b in &ms {
                if prefix(a) != prefix(b) {
                    assert_eq!(prefix(a).cmp(&prefix(b)), a.cmp(b), "{a:?} {b:?}");
                }
            }
        }
    }

    #[test]
    fn score_updates_in_place_and_moved() {
        let mut z = ZSet::scratch();
        for i in 0..2000u32 {
            z.insert(&member(i), f64::from(i), Listpack::default());
        }
        check(&z);
        // Within the neighbours: the in-place path. Past them: a move.
        z.insert(&member(10), 10.5, Listpack::default());
        z.insert(&member(11), 1500.25, Listpack::default());
        z.insert(&member(12), -3.0, Listpack::default());
        check(&z);
        assert_eq!(z.rank(&member(12), false), Some(0));
        // Below 10.5: member 12 (now -3) and members 0..=9.
        assert_eq!(z.rank(&member(10), false), Some(11));
        // Equal scores order by member.
        for i in 0..300 {
            z.insert(&member(i), 7.0, Listpack::default());
        }
        check(&z);
    }

    #[test]
    fn random_operations_keep_invariants() {
        fastrand::seed(7);
        let mut z = ZSet::default();
        let mut model: std::collections::BTreeMap<Vec<u8>, f64> = Default::default();
        for step in 0..3000 {
            let m = member(fastrand::u32(..200));
            match fastrand::u32(..4) {
                0 | 1 => {
                    let s = fastrand::i32(-50..50) as f64;
                    assert_eq!(
                        z.insert(&m, s, Listpack::default()),
                        model.insert(m.to_vec(), s).is_none()
                    );
                }
                2 => assert_eq!(z.remove(&m), model.remove(&m).is_some()),
                _ => {
                    let r = ScoreRange {
                        min: fastrand::i32(-60..60) as f64,
                        max: fastrand::i32(-60..60) as f64,
                        minex: fastrand::bool(),
                        maxex: fastrand::bool(),
                    };
                    let expected: Vec<Vec<u8>> = model
                        .iter()
                        .filter(|(_, s)| ZSet::score_in_range(&r, **s))
                        .map(|(m, _)| m.clone())
                        .collect();
                    if step % 2 == 0 {
                        assert_eq!(z.remove_score_range(&r), expected.len());
                        for m in expected {
                            model.remove(&m);
                        }
                    }
                }
            }
            if step % 100 == 0 {
                check(&z);
            }
        }
        check(&z);
        let n = z.len();
        if n > 10 {
            assert_eq!(z.remove_rank_range(2, 5), 4);
            check(&z);
        }
    }

    #[test]
    fn many_levels_of_splits_merges_and_moves_keep_invariants() {
        let mut rng = fastrand::Rng::with_seed(11);
        let mut z = ZSet::scratch();
        let mut model: std::collections::BTreeMap<Vec<u8>, f64> = Default::default();
        for step in 0..40_000 {
            let m = member(rng.u32(..4000));
            match rng.u32(..10) {
                0..=5 => {
                    let s = f64::from(rng.i32(-300..300));
                    assert_eq!(z.insert(&m, s, Listpack::default()), model.insert(m, s).is_none());
                }
                6..=8 => assert_eq!(z.remove(&m), model.remove(&m).is_some()),
                _ if step % 2 == 0 => {
                    let lo = f64::from(rng.i32(-300..300));
                    let r = ScoreRange {
                        min: lo,
                        max: lo + f64::from(rng.i32(0..3)),
                        minex: rng.bool(),
                        maxex: rng.bool(),
                    };
                    let doomed: Vec<Vec<u8>> = model
                        .iter()
                        .filter(|(_, s)| ZSet::score_in_range(&r, **s))
                        .map(|(m, _)| m.clone())
                        .collect();
                    let first = z.first_in_score_range(&r).map(|c| z.get(c).1);
                    let last = z.last_in_score_range(&r).map(|c| z.get(c).1);
                    let scores = doomed.iter().map(|m| model[m]);
                    assert_eq!(first, scores.clone().reduce(f64::min), "{r:?}");
                    assert_eq!(last, scores.reduce(f64::max), "{r:?}");
                    assert_eq!(z.remove_score_range(&r), doomed.len());
                    for m in doomed {
                        model.remove(&m);
                    }
                }
                _ => {
                    if z.len() > 20 {
                        let start = rng.usize(..z.len() - 10);
                        let doomed: Vec<Vec<u8>> = z.iter().skip(start).take(7).map(|(m, _)| m.to_vec()).collect();
                        assert_eq!(z.remove_rank_range(start, start + 6), 7);
                        for m in doomed {
                            model.remove(&m);
                        }
                    }
                }
            }
            if step % 4000 == 0 {
                check(&z);
                let mut expected: Vec<(Vec<u8>, f64)> = model.iter().map(|(m, s)| (m.clone(), *s)).collect();
                expected.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
                let got: Vec<(Vec<u8>, f64)> = z.iter().map(|(m, s)| (m.to_vec(), s)).collect();
                assert_eq!(got, expected);
            }
        }
        check(&z);
        // Drain in random order: leaves empty out, merge, and the root
        // collapses; then the set is usable again.
        let mut members: Vec<Vec<u8>> = model.keys().cloned().collect();
        rng.shuffle(&mut members);
        for (i, m) in members.iter().enumerate() {
            assert!(z.remove(m));
            if i % 500 == 0 {
                check(&z);
            }
        }
        assert!(z.is_empty());
        check(&z);
        for i in 0..100 {
            z.insert(&member(i), f64::from(i), Listpack::default());
        }
        check(&z);
        assert_eq!(z.rank(&member(42), false), Some(42));
    }

    #[test]
    fn lex_ranges() {
        let mut z = ZSet::default();
        for m in ["a", "b", "c", "d"] {
            z.insert(m.as_bytes(), 0.0, Listpack::default());
        }
        let r = LexRange {
            min: LexBound::Exclusive(Bytes::from("a")),
            max: LexBound::Inclusive(Bytes::from("c")),
        };
        assert_eq!(z.get(z.first_in_lex_range(&r).unwrap()).0, b"b");
        assert_eq!(z.get(z.last_in_lex_range(&r).unwrap()).0, b"c");
        let all = LexRange {
            min: LexBound::Min,
            max: LexBound::Max,
        };
        assert!(all.is_satisfiable());
        assert!(!LexRange {
            min: LexBound::Max,
            max: LexBound::Min
        }
        .is_satisfiable());
        assert_eq!(z.remove_lex_range(&r), 2);
        assert_eq!(z.len(), 2);
    }
}
