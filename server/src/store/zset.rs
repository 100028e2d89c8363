//! Sorted sets: a hash index (member → node) plus a skip list ordered by
//! (score, member), as in Redis.
//!
//! The skip list keeps Redis's `span` counts on every link, so rank lookups
//! and rank ranges cost O(log n); insert, delete and score lookup are
//! O(log n) (O(1) for the score); removing a range of m elements costs
//! O(log n + m). Nodes live in an arena (`Vec`) and link by index, which
//! keeps the structure in safe Rust and its memory compact.
//!
//! A large set does not fit in cache, so the layout is chosen to keep each
//! operation to as few cache misses as possible:
//! - a link carries its forward element's score and the first 8 bytes of its
//!   member, so a search step compares without reading the forward node, and
//!   a step that fails costs nothing more than the link already read;
//! - a member of up to 22 bytes is stored in its node, so reading the node
//!   gives the score, the member and the backward link at once;
//! - the hash index holds node numbers (4 bytes a slot), and a score update
//!   moves the node it found, keeping its level and link block.

use std::cmp::Ordering;
use std::hash::BuildHasher;

use bytes::Bytes;
use foldhash::fast::RandomState;
use hashbrown::HashTable;

const MAX_LEVEL: usize = 32;
/// Probability of a node reaching the next level (Redis: 0.25).
const LEVEL_P: u32 = 4;
const NIL: u32 = u32::MAX;
const HEAD: u32 = 0;

/// Members up to this long are stored inside their node.
const INLINE_MEMBER: usize = 22;

/// A member's bytes, inline when short (24 bytes either way).
#[derive(Clone, Debug)]
enum Member {
    Inline { len: u8, bytes: [u8; INLINE_MEMBER] },
    Heap(Box<[u8]>),
}

impl Member {
    fn new(m: &[u8]) -> Member {
        if m.len() <= INLINE_MEMBER {
            let mut bytes = [0; INLINE_MEMBER];
            bytes[..m.len()].copy_from_slice(m);
            Member::Inline {
                len: m.len() as u8,
                bytes,
            }
        } else {
            Member::Heap(m.into())
        }
    }

    const EMPTY: Member = Member::Inline {
        len: 0,
        bytes: [0; INLINE_MEMBER],
    };

    fn as_bytes(&self) -> &[u8] {
        match self {
            Member::Inline { len, bytes } => &bytes[..*len as usize],
            Member::Heap(b) => b,
        }
    }
}

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

#[derive(Clone, Copy, Debug)]
struct Link {
    /// The score of `forward` (meaningless when it is NIL). A search compares
    /// against it without touching the forward node, so each step of a
    /// search reads one link: one cache miss, as with Redis's inline levels.
    fscore: f64,
    /// [`prefix`] of `forward`'s member: ties on score are settled without
    /// reading the forward node unless the members share 8 bytes.
    fprefix: u64,
    forward: u32,
    /// Where `forward`'s links start in the arena, so a search moves on
    /// without reading `starts` (a second cache miss per step).
    forward_off: u32,
    /// Number of level-0 steps this link skips.
    span: u32,
}

const NO_LINK: Link = Link {
    fscore: 0.0,
    fprefix: 0,
    forward: NIL,
    forward_off: 0,
    span: 0,
};

#[derive(Clone, Debug)]
struct Node {
    score: f64,
    member: Member,
    backward: u32,
    level: u8,
}

/// What a search looks for: an element's sort key.
struct Key<'a> {
    score: f64,
    prefix: u64,
    member: &'a [u8],
}

impl Key<'_> {
    fn new(score: f64, member: &[u8]) -> Key<'_> {
        Key {
            score,
            prefix: prefix(member),
            member,
        }
    }
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

/// The rightmost node before a key on every level, and each one's rank.
struct Path {
    update: [u32; MAX_LEVEL],
    rank: [usize; MAX_LEVEL],
    /// The score and member prefix of `update[0]`, as read from the link
    /// that led to it (meaningless when it is the head): a score update
    /// checks its neighbours without reading their nodes.
    prev_score: f64,
    prev_prefix: u64,
}

// Level loops index several parallel arrays (links, update, rank), as Redis's t_zset.c does.
#[allow(clippy::needless_range_loop)]
impl SkipList {
    fn new() -> SkipList {
        let head = Node {
            member: Member::EMPTY,
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

    fn member(&self, x: u32) -> &[u8] {
        self.nodes[x as usize].member.as_bytes()
    }

    fn key(&self, x: u32) -> Key<'_> {
        Key::new(self.node(x).score, self.member(x))
    }

    /// Where the element `link` points to sorts relative to `k` (an absent
    /// element sorts last).
    fn cmp_forward(&self, link: &Link, k: &Key) -> Ordering {
        if link.forward == NIL {
            Ordering::Greater
        } else {
            self.cmp_node(link.forward, link.fscore, link.fprefix, k)
        }
    }

    /// Where node `x`, whose score and member prefix the caller already
    /// has, sorts relative to `k`. Reads the node only on a tie of both.
    fn cmp_node(&self, x: u32, score: f64, prefix: u64, k: &Key) -> Ordering {
        if score > k.score {
            Ordering::Greater
        } else if score < k.score {
            Ordering::Less
        } else {
            prefix.cmp(&k.prefix).then_with(|| self.member(x).cmp(k.member))
        }
    }

    /// Walks down from the head to the last element before `k` on each level.
    fn path(&self, k: &Key) -> Path {
        let mut p = Path {
            update: [HEAD; MAX_LEVEL],
            rank: [0; MAX_LEVEL],
            prev_score: 0.0,
            prev_prefix: 0,
        };
        let (mut x, mut x_off, mut rank) = (HEAD, 0usize, 0usize);
        // `below` is the current node's link one level down, read together
        // with the link at this level: both addresses are known as soon as
        // the node is, so the two reads (often in different cache lines)
        // are in flight at once, and descending costs no wait.
        let mut below = NO_LINK;
        for i in (0..self.level).rev() {
            let mut l = if i + 1 == self.level { self.links[i] } else { below };
            loop {
                if i > 0 {
                    below = self.links[x_off + i - 1];
                }
                if self.cmp_forward(&l, k) != Ordering::Less {
                    break;
                }
                rank += l.span as usize;
                (x, x_off) = (l.forward, l.forward_off as usize);
                (p.prev_score, p.prev_prefix) = (l.fscore, l.fprefix);
                l = self.links[x_off + i];
            }
            p.update[i] = x;
            p.rank[i] = rank;
        }
        p
    }

    /// A new node with a random level, not yet linked.
    fn alloc(&mut self, score: f64, member: &[u8]) -> u32 {
        let level = Self::random_level();
        let node = Node {
            member: Member::new(member),
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
        match self.free.pop() {
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
        }
    }

    /// Adds a new element; returns its node.
    fn insert(&mut self, score: f64, member: &[u8]) -> u32 {
        let x = self.alloc(score, member);
        let p = self.path(&self.key(x));
        self.link_in(x, p);
        x
    }

    /// Links node `x` (unlinked, score and member set) in after `p`.
    fn link_in(&mut self, x: u32, mut p: Path) {
        let level = self.node(x).level as usize;
        if level > self.level {
            for i in self.level..level {
                p.rank[i] = 0;
                p.update[i] = HEAD;
                self.link_mut(HEAD, i).span = span32(self.len);
            }
            self.level = level;
        }
        let (score, fprefix) = (self.node(x).score, prefix(self.member(x)));
        let start = self.starts[x as usize];
        for i in 0..level {
            let ulink = *self.link(p.update[i], i);
            *self.link_mut(x, i) = Link {
                span: ulink.span - span32(p.rank[0] - p.rank[i]),
                ..ulink
            };
            *self.link_mut(p.update[i], i) = Link {
                fscore: score,
                fprefix,
                forward: x,
                forward_off: start,
                span: span32(p.rank[0] - p.rank[i] + 1),
            };
        }
        for i in level..self.level {
            self.link_mut(p.update[i], i).span += 1;
        }
        self.nodes[x as usize].backward = if p.update[0] == HEAD { NIL } else { p.update[0] };
        let next = self.fwd(x, 0);
        if next != NIL {
            self.nodes[next as usize].backward = x;
        } else {
            self.tail = x;
        }
        self.len += 1;
    }

    /// Unlinks node `x`, given the rightmost node before it on every level.
    /// The node keeps its member and link block until [`SkipList::release`].
    fn unlink(&mut self, x: u32, update: &[u32; MAX_LEVEL]) {
        let x_level = self.node(x).level as usize;
        for i in 0..self.level {
            let xl = if i < x_level { Some(*self.link(x, i)) } else { None };
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
    }

    /// Frees an unlinked node's slot and link block for reuse.
    fn release(&mut self, x: u32) {
        let level = self.node(x).level as usize;
        self.free_links[level].push(self.starts[x as usize]);
        self.nodes[x as usize].member = Member::EMPTY;
        self.free.push(x);
    }

    /// Unlinks and frees node `x`.
    fn delete(&mut self, x: u32) {
        let p = self.path(&self.key(x));
        debug_assert_eq!(self.fwd(p.update[0], 0), x);
        self.unlink(x, &p.update);
        self.release(x);
    }

    /// Gives node `x` a new score. When the node stays between the same
    /// neighbours only the score and the links' copies of it change (Redis's
    /// `zslUpdateScore` does the same); otherwise the node moves, keeping its
    /// level and link block.
    fn set_score(&mut self, x: u32, score: f64) {
        let p = self.path(&self.key(x));
        debug_assert_eq!(self.fwd(p.update[0], 0), x);
        // The neighbours' scores and prefixes come from links already read;
        // their nodes are read only on a tie of both.
        let moved = Key::new(score, self.member(x));
        let prev = p.update[0];
        let after_prev = prev == HEAD || self.cmp_node(prev, p.prev_score, p.prev_prefix, &moved) == Ordering::Less;
        let before_next = self.cmp_forward(self.link(x, 0), &moved) == Ordering::Greater;
        if after_prev && before_next {
            self.nodes[x as usize].score = score;
            for i in 0..self.node(x).level as usize {
                self.link_mut(p.update[i], i).fscore = score;
            }
            return;
        }
        self.unlink(x, &p.update);
        self.nodes[x as usize].score = score;
        let p = self.path(&self.key(x));
        self.link_in(x, p);
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

    /// Unlinks the consecutive nodes starting at the first one where `before`
    /// fails, while `keep_going` holds; returns them, not yet released.
    fn unlink_run(&mut self, before: impl Fn(&Node) -> bool, mut keep_going: impl FnMut(&Node) -> bool) -> Vec<u32> {
        let (update, mut x) = self.seek(before);
        let mut removed = Vec::new();
        while x != NIL && keep_going(self.node(x)) {
            let next = self.fwd(x, 0);
            self.unlink(x, &update);
            removed.push(x);
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
    /// Member → node, hashed with `hasher` over the member's bytes. Slots hold
    /// only a node number; the node holds the member and its score.
    index: HashTable<u32>,
    hasher: RandomState,
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
            index: HashTable::new(),
            hasher: RandomState::default(),
            list: SkipList::new(),
            compact: true,
        }
    }
}

/// An element position: an opaque cursor for walking the set in order.
/// It stays valid until the set is next changed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Cursor(u32);

impl ZSet {
    pub fn len(&self) -> usize {
        self.list.len
    }

    pub fn is_empty(&self) -> bool {
        self.list.len == 0
    }

    /// The element whose member is `member`.
    pub fn find(&self, member: &[u8]) -> Option<Cursor> {
        let hash = self.hasher.hash_one(member);
        self.index
            .find(hash, |&x| self.list.member(x) == member)
            .map(|&x| Cursor(x))
    }

    pub fn score(&self, member: &[u8]) -> Option<f64> {
        self.find(member).map(|c| self.get(c).1)
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
    pub fn from_items<'a>(items: impl IntoIterator<Item = (&'a [u8], f64)>) -> ZSet {
        let items: Vec<(&[u8], f64)> = items.into_iter().collect();
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

    /// A listpack stores -0 as the integer 0; a skip list keeps it.
    fn stored_score(&self, score: f64) -> f64 {
        if self.compact && score == 0.0 {
            0.0
        } else {
            score
        }
    }

    /// Sets `member`'s score, adding it if absent. Returns true if it was added.
    pub fn insert(&mut self, member: &[u8], score: f64) -> bool {
        match self.find(member) {
            Some(c) => {
                self.set_score(c, score);
                false
            }
            None => {
                self.add(member, score);
                true
            }
        }
    }

    /// Gives the element at `c` a new score (nothing changes if it is equal).
    pub fn set_score(&mut self, c: Cursor, score: f64) {
        let score = self.stored_score(score);
        if self.list.node(c.0).score != score {
            self.list.set_score(c.0, score);
        }
    }

    /// Adds a member known to be absent.
    fn add(&mut self, member: &[u8], score: f64) {
        if self.compact && (member.len() > COMPACT_MAX_VALUE || self.len() >= COMPACT_MAX_ENTRIES) {
            self.compact = false;
        }
        let score = self.stored_score(score);
        let x = self.list.insert(score, member);
        let (list, hasher) = (&self.list, &self.hasher);
        self.index
            .insert_unique(hasher.hash_one(member), x, |&y| hasher.hash_one(list.member(y)));
    }

    pub fn remove(&mut self, member: &[u8]) -> bool {
        let hash = self.hasher.hash_one(member);
        let list = &self.list;
        match self.index.find_entry(hash, |&x| list.member(x) == member) {
            Ok(entry) => {
                let (x, _) = entry.remove();
                self.list.delete(x);
                true
            }
            Err(_) => false,
        }
    }

    /// Drops unlinked nodes from the index and frees them.
    fn forget(&mut self, removed: &[u32]) {
        for &x in removed {
            let hash = self.hasher.hash_one(self.list.member(x));
            let found = self.index.find_entry(hash, |&y| y == x).map(|entry| entry.remove());
            debug_assert!(found.is_ok(), "every linked node is indexed");
            self.list.release(x);
        }
    }

    /// 0-based rank from the lowest score (or the highest when `rev`).
    pub fn rank(&self, member: &[u8], rev: bool) -> Option<usize> {
        let rank = self.rank_at(self.find(member)?);
        Some(if rev { self.len() - 1 - rank } else { rank })
    }

    /// 0-based ascending rank of the element at `c`.
    pub fn rank_at(&self, c: Cursor) -> usize {
        // The path to an element ends on the one before it, whose 1-based
        // rank is the element's 0-based rank.
        self.list.path(&self.list.key(c.0)).rank[0]
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

    pub fn get(&self, c: Cursor) -> (&[u8], f64) {
        let n = self.list.node(c.0);
        (n.member.as_bytes(), n.score)
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
            Self::cursor(self.list.seek(|n| !r.gte_min(n.member.as_bytes())).1)
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
            Self::cursor(self.list.seek_last(|n| r.lte_max(n.member.as_bytes())))
        };
        found.filter(|c| r.gte_min(self.get(*c).0))
    }

    pub fn score_in_range(r: &ScoreRange, score: f64) -> bool {
        r.gte_min(score) && r.lte_max(score)
    }

    pub fn member_in_range(r: &LexRange, member: &[u8]) -> bool {
        r.gte_min(member) && r.lte_max(member)
    }

    /// Removes every element with score in `r`; returns how many.
    pub fn remove_score_range(&mut self, r: &ScoreRange) -> usize {
        if !r.is_satisfiable() {
            return 0;
        }
        let removed = self.list.unlink_run(|n| !r.gte_min(n.score), |n| r.lte_max(n.score));
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
        let Some(first) = self.first_in_lex_range(r) else {
            return 0;
        };
        let (member, score) = {
            let (m, s) = self.get(first);
            (m.to_vec(), s)
        };
        let removed = self.list.unlink_run(
            |n| less(n.score, n.member.as_bytes(), score, &member),
            |n| r.lte_max(n.member.as_bytes()),
        );
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
            (s, m.to_vec())
        };
        let count = end - start + 1;
        let mut seen = 0;
        let removed = self.list.unlink_run(
            |n| less(n.score, n.member.as_bytes(), score, &member),
            |_| {
                seen += 1;
                seen <= count
            },
        );
        self.forget(&removed);
        removed.len()
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
        // Every link's copies of its forward element's score and prefix are
        // current, and the index finds exactly the members in the list.
        let l = &z.list;
        let mut x = HEAD;
        while x != NIL {
            for i in 0..(l.node(x).level as usize).min(l.level) {
                let link = l.link(x, i);
                if link.forward != NIL {
                    assert_eq!(link.fscore.to_bits(), l.node(link.forward).score.to_bits());
                    assert_eq!(link.fprefix, prefix(l.member(link.forward)));
                }
            }
            x = l.fwd(x, 0);
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
            z.insert(&member(i), f64::from(i));
        }
        check(&z);
        // Within the neighbours: the in-place path. Past them: a move.
        z.insert(&member(10), 10.5);
        z.insert(&member(11), 1500.25);
        z.insert(&member(12), -3.0);
        check(&z);
        assert_eq!(z.rank(&member(12), false), Some(0));
        // Below 10.5: member 12 (now -3) and members 0..=9.
        assert_eq!(z.rank(&member(10), false), Some(11));
        // Equal scores order by member.
        for i in 0..300 {
            z.insert(&member(i), 7.0);
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
                    assert_eq!(z.insert(&m, s), model.insert(m.to_vec(), s).is_none());
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
