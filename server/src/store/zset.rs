//! Sorted sets: a hash map (member → score) plus a skip list ordered by
//! (score, member), as in Redis.
//!
//! The skip list keeps Redis's `span` counts on every link, so rank lookups
//! and rank ranges cost O(log n); insert, delete and score lookup are
//! O(log n) (O(1) for the score); removing a range of m elements costs
//! O(log n + m). Nodes live in an arena (`Vec`) and link by index, which
//! keeps the structure in safe Rust and its memory compact.

use std::cmp::Ordering;
use std::collections::HashMap;

use bytes::Bytes;
use foldhash::fast::RandomState;

const MAX_LEVEL: usize = 32;
/// Probability of a node reaching the next level (Redis: 0.25).
const LEVEL_P: u32 = 4;
const NIL: u32 = u32::MAX;
const HEAD: u32 = 0;

#[derive(Clone, Copy, Debug)]
struct Link {
    forward: u32,
    /// Where `forward`'s links start in the arena, so a search moves on
    /// without reading `starts` (a second cache miss per step).
    forward_off: u32,
    /// Number of level-0 steps this link skips.
    span: u32,
    /// The score of `forward` (meaningless when it is NIL). A search compares
    /// against it without touching the forward node, so each step of a
    /// search reads one link: one cache miss, as with Redis's inline levels.
    fscore: f64,
}

const NO_LINK: Link = Link {
    forward: NIL,
    forward_off: 0,
    span: 0,
    fscore: 0.0,
};

#[derive(Clone, Debug)]
struct Node {
    member: Bytes,
    score: f64,
    backward: u32,
    level: u8,
}

/// A score interval, bounds possibly exclusive (`(1.5`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ScoreRange {
    pub min: f64,
    pub max: f64,
    pub minex: bool,
    pub maxex: bool,
}

impl ScoreRange {
    pub fn gte_min(&self, v: f64) -> bool {
        if self.minex {
            v > self.min
        } else {
            v >= self.min
        }
    }

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
    Inclusive(Bytes),
    Exclusive(Bytes),
}

/// A lexicographic interval (ZRANGEBYLEX and friends).
#[derive(Clone, Debug, PartialEq)]
pub struct LexRange {
    pub min: LexBound,
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
    pub fn gte_min(&self, m: &[u8]) -> bool {
        let order = cmp_bound(&self.min, m);
        if self.min.exclusive() {
            order == Ordering::Less
        } else {
            order != Ordering::Greater
        }
    }

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

/// The ordered index of a sorted set. Nodes live in one arena and their
/// links in another: node `x`'s links are `links[starts[x]..][..level]`.
/// `starts` is 4 bytes a node, small enough to stay in cache, so following
/// a link costs one read of the (large) link arena.
#[derive(Clone, Debug)]
struct SkipList {
    nodes: Vec<Node>,
    starts: Vec<u32>,
    links: Vec<Link>,
    /// Node slots freed by deletions, reused by insertions.
    free: Vec<u32>,
    /// Freed link blocks by level, reused by nodes of the same level.
    free_links: Vec<Vec<u32>>,
    level: usize,
    len: usize,
    tail: u32,
}

fn less(a_score: f64, a_member: &[u8], b_score: f64, b_member: &[u8]) -> bool {
    a_score < b_score || (a_score == b_score && a_member < b_member)
}

/// Spans are stored in 32 bits: a sorted set holds fewer than 2^32 members.
fn span32(n: usize) -> u32 {
    n as u32
}

// Level loops index several parallel arrays (links, update, rank), as Redis's t_zset.c does.
#[allow(clippy::needless_range_loop)]
impl SkipList {
    fn new() -> SkipList {
        let head = Node {
            member: Bytes::new(),
            score: 0.0,
            backward: NIL,
            level: MAX_LEVEL as u8,
        };
        SkipList {
            nodes: vec![head],
            starts: vec![0],
            links: vec![NO_LINK; MAX_LEVEL],
            free: Vec::new(),
            free_links: vec![Vec::new(); MAX_LEVEL + 1],
            level: 1,
            len: 0,
            tail: NIL,
        }
    }

    fn random_level() -> usize {
        let mut level = 1;
        while level < MAX_LEVEL && fastrand::u32(..LEVEL_P) == 0 {
            level += 1;
        }
        level
    }

    fn link(&self, x: u32, i: usize) -> &Link {
        &self.links[self.starts[x as usize] as usize + i]
    }

    fn link_mut(&mut self, x: u32, i: usize) -> &mut Link {
        &mut self.links[self.starts[x as usize] as usize + i]
    }

    fn fwd(&self, x: u32, i: usize) -> u32 {
        self.link(x, i).forward
    }

    fn node(&self, x: u32) -> &Node {
        &self.nodes[x as usize]
    }

    /// Whether the element `link` points to sorts before (score, member).
    fn points_before(&self, link: &Link, score: f64, member: &[u8]) -> bool {
        link.forward != NIL
            && (link.fscore < score
                || (link.fscore == score && self.nodes[link.forward as usize].member.as_ref() < member))
    }

    fn insert(&mut self, score: f64, member: Bytes) {
        let mut update = [HEAD; MAX_LEVEL];
        let mut rank = [0usize; MAX_LEVEL];
        let (mut x, mut x_off) = (HEAD, 0usize);
        for i in (0..self.level).rev() {
            rank[i] = if i == self.level - 1 { 0 } else { rank[i + 1] };
            loop {
                let l = self.links[x_off + i];
                if self.points_before(&l, score, &member) {
                    rank[i] += l.span as usize;
                    (x, x_off) = (l.forward, l.forward_off as usize);
                } else {
                    break;
                }
            }
            update[i] = x;
        }
        let level = Self::random_level();
        if level > self.level {
            for i in self.level..level {
                rank[i] = 0;
                update[i] = HEAD;
                self.link_mut(HEAD, i).span = span32(self.len);
            }
            self.level = level;
        }
        let node = Node {
            member,
            score,
            backward: NIL,
            level: level as u8,
        };
        let start = match self.free_links[level].pop() {
            Some(start) => start,
            None => {
                self.links.extend(std::iter::repeat_n(NO_LINK, level));
                (self.links.len() - level) as u32
            }
        };
        let x = match self.free.pop() {
            Some(slot) => {
                self.nodes[slot as usize] = node;
                self.starts[slot as usize] = start;
                slot
            }
            None => {
                self.nodes.push(node);
                self.starts.push(start);
                (self.nodes.len() - 1) as u32
            }
        };
        for i in 0..level {
            let ulink = *self.link(update[i], i);
            *self.link_mut(x, i) = Link {
                span: ulink.span - span32(rank[0] - rank[i]),
                ..ulink
            };
            *self.link_mut(update[i], i) = Link {
                forward: x,
                forward_off: start,
                span: span32(rank[0] - rank[i] + 1),
                fscore: score,
            };
        }
        for i in level..self.level {
            self.link_mut(update[i], i).span += 1;
        }
        self.nodes[x as usize].backward = if update[0] == HEAD { NIL } else { update[0] };
        let next = self.fwd(x, 0);
        if next != NIL {
            self.nodes[next as usize].backward = x;
        } else {
            self.tail = x;
        }
        self.len += 1;
    }

    /// Unlinks node `x`, given the rightmost node before it on every level.
    fn unlink(&mut self, x: u32, update: &[u32; MAX_LEVEL]) -> Bytes {
        for i in 0..self.level {
            let xl = if i < self.node(x).level as usize {
                Some(*self.link(x, i))
            } else {
                None
            };
            let ul = self.link_mut(update[i], i);
            match xl {
                Some(xl) if ul.forward == x => {
                    *ul = Link {
                        span: ul.span + xl.span - 1,
                        ..xl
                    };
                }
                _ => ul.span -= 1,
            }
        }
        let next = self.fwd(x, 0);
        let back = self.node(x).backward;
        if next != NIL {
            self.nodes[next as usize].backward = back;
        } else {
            self.tail = back;
        }
        while self.level > 1 && self.fwd(HEAD, self.level - 1) == NIL {
            self.level -= 1;
        }
        self.len -= 1;
        self.free.push(x);
        let level = self.node(x).level as usize;
        self.free_links[level].push(self.starts[x as usize]);
        std::mem::take(&mut self.nodes[x as usize].member)
    }

    /// Removes the element; returns its stored member bytes if it was there.
    fn delete(&mut self, score: f64, member: &[u8]) -> Option<Bytes> {
        let mut update = [HEAD; MAX_LEVEL];
        let (mut x, mut x_off) = (HEAD, 0usize);
        for i in (0..self.level).rev() {
            loop {
                let l = self.links[x_off + i];
                if self.points_before(&l, score, member) {
                    (x, x_off) = (l.forward, l.forward_off as usize);
                } else {
                    break;
                }
            }
            update[i] = x;
        }
        let x = self.fwd(x, 0);
        if x != NIL && self.node(x).score == score && self.node(x).member.as_ref() == member {
            Some(self.unlink(x, &update))
        } else {
            None
        }
    }

    /// 1-based rank of an element known to be present.
    fn rank(&self, score: f64, member: &[u8]) -> usize {
        let mut rank = 0;
        let (mut x, mut x_off) = (HEAD, 0usize);
        for i in (0..self.level).rev() {
            loop {
                let l = self.links[x_off + i];
                if l.forward != NIL && !less(score, member, l.fscore, &self.node(l.forward).member) {
                    rank += l.span as usize;
                    (x, x_off) = (l.forward, l.forward_off as usize);
                } else {
                    break;
                }
            }
            if x != HEAD && self.node(x).member.as_ref() == member {
                return rank;
            }
        }
        0
    }

    /// The node at 1-based `rank`.
    fn by_rank(&self, rank: usize) -> u32 {
        let mut traversed = 0;
        let (mut x, mut x_off) = (HEAD, 0usize);
        for i in (0..self.level).rev() {
            loop {
                let l = self.links[x_off + i];
                if l.forward != NIL && traversed + l.span as usize <= rank {
                    traversed += l.span as usize;
                    (x, x_off) = (l.forward, l.forward_off as usize);
                } else {
                    break;
                }
            }
            if traversed == rank {
                return x;
            }
        }
        NIL
    }

    /// Walks down from the head keeping, on each level, the last node for
    /// which `before` holds; returns those nodes (for unlinking) and the first
    /// node after them.
    fn seek(&self, before: impl Fn(&Node) -> bool) -> ([u32; MAX_LEVEL], u32) {
        let mut update = [HEAD; MAX_LEVEL];
        let mut x = HEAD;
        for i in (0..self.level).rev() {
            loop {
                let f = self.fwd(x, i);
                if f != NIL && before(self.node(f)) {
                    x = f;
                } else {
                    break;
                }
            }
            update[i] = x;
        }
        (update, self.fwd(x, 0))
    }

    /// The last node for which `upto` holds (NIL if none).
    fn seek_last(&self, upto: impl Fn(&Node) -> bool) -> u32 {
        let mut x = HEAD;
        for i in (0..self.level).rev() {
            loop {
                let f = self.fwd(x, i);
                if f != NIL && upto(self.node(f)) {
                    x = f;
                } else {
                    break;
                }
            }
        }
        if x == HEAD {
            NIL
        } else {
            x
        }
    }

    /// Removes the consecutive nodes starting at the first one where `before`
    /// fails, while `keep_going` holds; returns the removed members.
    fn delete_run(&mut self, before: impl Fn(&Node) -> bool, mut keep_going: impl FnMut(&Node) -> bool) -> Vec<Bytes> {
        let (update, mut x) = self.seek(before);
        let mut removed = Vec::new();
        while x != NIL && keep_going(self.node(x)) {
            let next = self.fwd(x, 0);
            removed.push(self.unlink(x, &update));
            x = next;
        }
        removed
    }
}

/// Redis keeps sorted sets of up to this many members in a compact encoding
/// (`zset-max-listpack-entries`)...
const COMPACT_MAX_ENTRIES: usize = 128;
/// ...when no member is longer than this (`zset-max-listpack-value`).
const COMPACT_MAX_VALUE: usize = 64;

/// A sorted set value.
#[derive(Clone, Debug)]
pub struct ZSet {
    scores: HashMap<Bytes, f64, RandomState>,
    list: SkipList,
    /// Whether Redis would still hold this set in its compact (listpack)
    /// encoding. The encoding is visible in one place: a listpack stores a
    /// score of -0 as the integer 0, so Redis replies `0` for it while a
    /// larger set replies `-0`. coordis tracks the same transition.
    compact: bool,
}

impl Default for ZSet {
    fn default() -> Self {
        ZSet {
            scores: HashMap::default(),
            list: SkipList::new(),
            compact: true,
        }
    }
}

/// An element position: an opaque cursor for walking the set in order.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Cursor(u32);

impl ZSet {
    pub fn len(&self) -> usize {
        self.scores.len()
    }

    pub fn is_empty(&self) -> bool {
        self.scores.is_empty()
    }

    pub fn score(&self, member: &[u8]) -> Option<f64> {
        self.scores.get(member).copied()
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
    pub fn from_items<'a>(items: impl IntoIterator<Item = (&'a Bytes, f64)>) -> ZSet {
        let items: Vec<(&Bytes, f64)> = items.into_iter().collect();
        let compact = items.len() <= COMPACT_MAX_ENTRIES && items.iter().all(|(m, _)| m.len() <= COMPACT_MAX_VALUE);
        let mut z = ZSet {
            compact,
            ..ZSet::default()
        };
        for (m, s) in items {
            z.insert(m, s);
        }
        z
    }

    /// Sets `member`'s score, adding it if absent. Returns true if it was added.
    pub fn insert(&mut self, member: &[u8], mut score: f64) -> bool {
        if self.compact
            && (member.len() > COMPACT_MAX_VALUE || (self.len() >= COMPACT_MAX_ENTRIES && self.score(member).is_none()))
        {
            self.compact = false;
        }
        if self.compact && score == 0.0 {
            score = 0.0; // -0 becomes 0, as in a listpack
        }
        match self.scores.get_mut(member) {
            Some(old) => {
                if *old != score {
                    let old_score = std::mem::replace(old, score);
                    let key = self.list.delete(old_score, member).expect("skip list mirrors the map");
                    self.list.insert(score, key);
                }
                false
            }
            None => {
                let key = Bytes::copy_from_slice(member);
                self.scores.insert(key.clone(), score);
                self.list.insert(score, key);
                true
            }
        }
    }

    pub fn remove(&mut self, member: &[u8]) -> bool {
        match self.scores.remove(member) {
            Some(score) => {
                self.list.delete(score, member);
                true
            }
            None => false,
        }
    }

    /// 0-based rank from the lowest score (or the highest when `rev`).
    pub fn rank(&self, member: &[u8], rev: bool) -> Option<usize> {
        let score = self.score(member)?;
        let rank = self.list.rank(score, member) - 1;
        Some(if rev { self.len() - 1 - rank } else { rank })
    }

    fn cursor(x: u32) -> Option<Cursor> {
        (x != NIL).then_some(Cursor(x))
    }

    /// The element at 0-based `rank` in ascending order.
    pub fn at_rank(&self, rank: usize) -> Option<Cursor> {
        if rank >= self.len() {
            return None;
        }
        Self::cursor(self.list.by_rank(rank + 1))
    }

    pub fn get(&self, c: Cursor) -> (&Bytes, f64) {
        let n = self.list.node(c.0);
        (&n.member, n.score)
    }

    /// The next element in ascending order (descending when `rev`).
    pub fn step(&self, c: Cursor, rev: bool) -> Option<Cursor> {
        Self::cursor(if rev {
            self.list.node(c.0).backward
        } else {
            self.list.fwd(c.0, 0)
        })
    }

    pub fn first(&self) -> Option<Cursor> {
        Self::cursor(self.list.fwd(HEAD, 0))
    }

    pub fn last(&self) -> Option<Cursor> {
        Self::cursor(self.list.tail)
    }

    /// First element with score in `r` (ascending).
    pub fn first_in_score_range(&self, r: &ScoreRange) -> Option<Cursor> {
        if !r.is_satisfiable() {
            return None;
        }
        let (_, x) = self.list.seek(|n| !r.gte_min(n.score));
        Self::cursor(x).filter(|c| r.lte_max(self.get(*c).1))
    }

    /// Last element with score in `r`.
    pub fn last_in_score_range(&self, r: &ScoreRange) -> Option<Cursor> {
        if !r.is_satisfiable() {
            return None;
        }
        Self::cursor(self.list.seek_last(|n| r.lte_max(n.score))).filter(|c| r.gte_min(self.get(*c).1))
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
    /// follows Redis: a linear scan for compact sets (deterministic), a skip
    /// list descent for large ones.
    pub fn first_in_lex_range(&self, r: &LexRange) -> Option<Cursor> {
        if !self.lex_range_overlaps(r) {
            return None;
        }
        let found = if self.compact {
            self.walk_until(false, |m| r.gte_min(m))
        } else {
            Self::cursor(self.list.seek(|n| !r.gte_min(&n.member)).1)
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
            Self::cursor(self.list.seek_last(|n| r.lte_max(&n.member)))
        };
        found.filter(|c| r.gte_min(self.get(*c).0))
    }

    pub fn score_in_range(r: &ScoreRange, score: f64) -> bool {
        r.gte_min(score) && r.lte_max(score)
    }

    pub fn member_in_range(r: &LexRange, member: &[u8]) -> bool {
        r.gte_min(member) && r.lte_max(member)
    }

    fn forget(&mut self, removed: &[Bytes]) {
        for m in removed {
            self.scores.remove(m);
        }
    }

    /// Removes every element with score in `r`; returns how many.
    pub fn remove_score_range(&mut self, r: &ScoreRange) -> usize {
        if !r.is_satisfiable() {
            return 0;
        }
        let removed = self.list.delete_run(|n| !r.gte_min(n.score), |n| r.lte_max(n.score));
        self.forget(&removed);
        removed.len()
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
        let rank_of = |c: Cursor| self.rank(self.get(c).0, false).unwrap_or(0) as i64;
        let mut count = self.len() as i64 - rank_of(first);
        if let Some(last) = self.last_in_lex_range(r) {
            count -= self.len() as i64 - rank_of(last) - 1;
        }
        count
    }

    /// Removes the run of elements that starts at the first element of the
    /// lexicographic range and continues while members are not above its max.
    pub fn remove_lex_range(&mut self, r: &LexRange) -> usize {
        let Some(first) = self.first_in_lex_range(r) else {
            return 0;
        };
        let (member, score) = {
            let (m, s) = self.get(first);
            (m.clone(), s)
        };
        let removed = self
            .list
            .delete_run(|n| less(n.score, &n.member, score, &member), |n| r.lte_max(&n.member));
        self.forget(&removed);
        removed.len()
    }

    /// Removes 0-based ranks `start..=end` (already clamped to the set).
    pub fn remove_rank_range(&mut self, start: usize, end: usize) -> usize {
        let Some(first) = self.at_rank(start) else {
            return 0;
        };
        let (score, member) = {
            let (m, s) = self.get(first);
            (s, m.clone())
        };
        let count = end - start + 1;
        let mut seen = 0;
        let removed = self.list.delete_run(
            |n| less(n.score, &n.member, score, &member),
            |_| {
                seen += 1;
                seen <= count
            },
        );
        self.forget(&removed);
        removed.len()
    }

    /// All elements in ascending order.
    pub fn iter(&self) -> impl Iterator<Item = (&Bytes, f64)> {
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

    fn check(z: &ZSet) {
        let items: Vec<(Bytes, f64)> = z.iter().map(|(m, s)| (m.clone(), s)).collect();
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
            back.push(z.get(cur).0.clone());
            c = z.step(cur, true);
        }
        back.reverse();
        assert_eq!(back, items.iter().map(|i| i.0.clone()).collect::<Vec<_>>());
    }

    #[test]
    fn random_operations_keep_invariants() {
        fastrand::seed(7);
        let mut z = ZSet::default();
        let mut model: std::collections::BTreeMap<Vec<u8>, f64> = Default::default();
        for step in 0..3000 {
            let m = format!("m{}", fastrand::u32(..200)).into_bytes();
            match fastrand::u32(..4) {
                0 | 1 => {
                    let s = fastrand::i32(-50..50) as f64;
                    assert_eq!(z.insert(&m, s), model.insert(m.clone(), s).is_none());
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
    fn lex_ranges() {
        let mut z = ZSet::default();
        for m in ["a", "b", "c", "d"] {
            z.insert(m.as_bytes(), 0.0);
        }
        let r = LexRange {
            min: LexBound::Exclusive(Bytes::from("a")),
            max: LexBound::Inclusive(Bytes::from("c")),
        };
        assert_eq!(z.get(z.first_in_lex_range(&r).unwrap()).0, "b");
        assert_eq!(z.get(z.last_in_lex_range(&r).unwrap()).0, "c");
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
