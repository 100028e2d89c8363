//! One database: a hash table of [`Item`]s (key, value and deadline in one
//! allocation each) plus a deadline index for active expiry, and a
//! point-in-time snapshot's hold on the table while a background save runs
//! ([`DbSnap`], copy-before-write).
//!
//! # The snapshot invariant
//!
//! While [`Db::snap`] is set, no key's value or deadline changes, and no
//! key is created or removed, before [`Db::before_write`] has run for it:
//! the old value is copied for the snapshot first when the walk has not
//! reached it, and a key created after the start is marked so the walk
//! leaves it out. Every `&mut` access to the table's items is in this file
//! (`map` is private) and each of those paths calls `before_write` first:
//! `live` (lazy expiry), `lookup_mut`, `lookup_or_insert_mut`, `insert`
//! (and `replace_value`), `overwrite_str`, `long_str_mut`, `set_expire`,
//! `remove`, `expire_step`; `clear` hands the whole table to the snapshot
//! instead, and `swap` moves the snapshot with its table.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::hash::BuildHasher;

use bytes::Bytes;
use foldhash::fast::RandomState;
use hashbrown::HashTable;

use super::hash::Hash;
use super::item::{Item, ValueMut, ValueRef};
use super::list::List;
use super::set::Set;
use super::stream::Stream;
use super::zset::ZSet;

/// Spare bytes of the copy [`Db::edit_str`] gives an edit of a short string.
const EDIT_SLACK: usize = 8;

/// A value to store. Strings are kept as their bytes (Redis's integer encoding
/// is an optimisation clients cannot observe, except through OBJECT ENCODING).
#[derive(Clone, Debug)]
pub enum Value {
    /// A string.
    Str(Bytes),
    /// The other types are boxed so that the common string case keeps
    /// `Value` small.
    ZSet(Box<ZSet>),
    /// A hash.
    Hash(Box<Hash>),
    /// A list.
    List(Box<List>),
    /// A set.
    Set(Box<Set>),
    /// A stream.
    Stream(Box<Stream>),
}

impl Value {
    /// The value borrowed as a stored one is (what serializers take).
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn as_value_ref(&self) -> ValueRef<'_> {
        match self {
            Value::Str(s) => ValueRef::Str(s),
            Value::ZSet(z) => ValueRef::ZSet(z),
            Value::Hash(h) => ValueRef::Hash(Hash::as_ref(h)),
            Value::List(l) => ValueRef::List(l),
            Value::Set(s) => ValueRef::Set(s),
            Value::Stream(s) => ValueRef::Stream(s),
        }
    }

    /// The name TYPE reports.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Str(_) => "string",
            Value::ZSet(_) => "zset",
            Value::Hash(_) => "hash",
            Value::List(_) => "list",
            Value::Set(_) => "set",
            Value::Stream(_) => "stream",
        }
    }
}

/// A key's value and deadline, owned (what [`Db::remove`] hands back).
#[derive(Clone, Debug)]
pub struct Entry {
    pub value: Value,
    /// Absolute deadline in unix milliseconds; 0 means no expiry.
    pub expire_at: u64,
}

/// A live key's value and deadline, borrowed from the database.
#[derive(Clone, Copy, Debug)]
pub struct EntryRef<'a> {
    pub value: ValueRef<'a>,
    pub expire_at: u64,
}

impl EntryRef<'_> {
    pub fn to_owned(self) -> Entry {
        Entry {
            value: self.value.to_value(),
            expire_at: self.expire_at,
        }
    }
}

/// The keyspace's hasher: one random seed per process, so that databases
/// (two servers of one test process among them) built by the same commands
/// lay their keys out alike, which RANDOMKEY's replay under a seed relies
/// on (`COORDIS.SERVER SEED`); random per process, so no fixed set of
/// colliding keys. (A seed per database made that replay depend on where
/// the allocator placed each server's thread.)
#[derive(Clone, Debug)]
struct KeyHasher(RandomState);

impl Default for KeyHasher {
    fn default() -> Self {
        static SEED: std::sync::OnceLock<RandomState> = std::sync::OnceLock::new();
        KeyHasher(SEED.get_or_init(RandomState::default).clone())
    }
}

impl std::ops::Deref for KeyHasher {
    type Target = RandomState;
    fn deref(&self) -> &RandomState {
        &self.0
    }
}

/// A database (SELECT index). Every read goes through [`Db::lookup`] /
/// [`Db::lookup_mut`], which remove an expired key before answering (lazy
/// expiry); [`Db::expire_step`] removes due keys nobody reads (active expiry).
///
/// Memory: a key costs one `Item` allocation, an 8-byte slot in the hash
/// table, and (with a deadline) 8 bytes in the deadline index.
#[derive(Debug, Default)]
pub struct Db {
    /// The keys. foldhash: seeded per process (no fixed collision set to
    /// attack) and several times faster than SipHash on short keys.
    map: HashTable<Item>,
    hasher: KeyHasher,
    /// Deadline (unix ms) -> hashes of the keys that had it when it was set.
    /// Keys loaded together share deadlines, so this stays near 8 bytes per
    /// key. Entries are not removed when a key's deadline changes or the key
    /// goes: a popped entry only counts if a key with that hash still has
    /// that deadline, and the index is rebuilt when stale entries pile up.
    expires: BTreeMap<u64, Vec<u64>>,
    /// Hashes in `expires`, stale ones included.
    index_len: usize,
    /// Keys that have a deadline (INFO keyspace `expires=`).
    with_deadline: usize,
    /// Keys removed because their deadline passed (INFO `expired_keys`).
    pub expired_count: u64,
    /// Modification counters of WATCHed keys (only those): every change to
    /// such a key, including its expiry or a flush, bumps its version, and
    /// EXEC compares versions with those seen at WATCH time.
    watched: HashMap<Bytes, Watched, RandomState>,
    /// Record keys removed by expiry (for `expired` keyspace notifications).
    pub log_expired: bool,
    /// Keys removed by expiry since the last [`Db::take_expired`].
    expired_log: Vec<Bytes>,
    /// Record keys created (for `new` keyspace notifications, class `n`).
    pub log_new: bool,
    /// Keys created since the last [`Db::take_new`].
    new_log: Vec<Bytes>,
    /// Clients blocked on each key (BLPOP ...), first come first served:
    /// Redis's `db->blocking_keys`. Kept by [`crate::blocked`].
    waiters: HashMap<Bytes, VecDeque<u64>, RandomState>,
    /// Keys with waiters that were stored since the blocking layer last
    /// looked, in order, each once (Redis's `ready_keys`): the only keys that
    /// can serve a waiter, since a client blocks only on a key that is
    /// absent or empty.
    ready: Vec<Bytes>,
    ready_set: HashSet<Bytes, RandomState>,
    /// Log every touched key (client-side caching tracks keys: see
    /// the `tracking` module); set only while anything is tracked.
    pub log_touched: bool,
    /// Keys touched since the last [`Db::take_touched`], each with whether
    /// expiry removed it (then no client wrote it).
    touched_log: Vec<(Bytes, bool)>,
    /// CLIENT PAUSE is in force: a key past its deadline reads as absent but
    /// stays, as in Redis 7 (expiry would be a write).
    pub keep_expired: bool,
    /// The primary's replication stream is being applied: a key past its
    /// deadline is still live, as for Redis's master client (the primary
    /// decides expiry; its DEL must find the key).
    pub obey_primary: bool,
    /// A background save's hold on this table (None when none runs).
    pub(crate) snap: Option<Box<DbSnap>>,
    /// How lookups record accesses (LRU or LFU and its directives), set
    /// with [`Db::clock_ms`] at the start of each batch.
    pub(crate) access: super::access::Mode,
    /// The server clock (unix ms) at the start of the running batch: the
    /// time accesses and new keys are stamped with (Redis's cached
    /// `server.lruclock`, here on the server clock a test can move).
    pub(crate) clock_ms: u64,
    /// Set while a command that must not touch access data reads (Redis's
    /// `LOOKUP_NOTOUCH`: TYPE, EXISTS, TTL and friends, OBJECT).
    pub(crate) notouch: bool,
    /// Which deletions free lazily (the `lazyfree-lazy-*` directives),
    /// set with [`Db::clock_ms`] at the start of each batch: expiry and
    /// overwrites happen in here, out of the commands' sight.
    pub(crate) lazy: crate::lazyfree::Lazy,
    /// The server's lazy-free handle (its counters), shared by its databases.
    pub(crate) freer: crate::lazyfree::LazyFree,
}

/// A point-in-time snapshot of one database while its walk runs: the
/// walk's order and position, and the old values writes copied before
/// changing them (see the module docs).
#[derive(Debug)]
pub(crate) struct DbSnap {
    /// The database index the image writes these keys under (SWAPDB moves
    /// the snapshot with the table, so this stays the start's index).
    pub(crate) origin: usize,
    /// The clock at the start: a key past its deadline then is not in it.
    start_ms: u64,
    /// In which order the walk goes, and how far it is.
    order: WalkOrder,
    /// Keys the walk must skip: copied before a write, or created after
    /// the start.
    done: HashSet<Bytes, RandomState>,
    /// Old values copied before a write (with their access words), for
    /// the walker to write out.
    copied: Vec<(Bytes, Entry, u32)>,
    /// Old items a write replaced whole, handed over instead of copied
    /// (an overwrite: SET, RESTORE REPLACE...), for the walker too.
    handed: Vec<Item>,
    /// The table as FLUSHDB/FLUSHALL left it during the snapshot: walked
    /// instead of the live one, which is then not in the image at all.
    frozen: Option<HashTable<Item>>,
    /// Keys and keys with a deadline at the start (RESIZEDB hints).
    pub(crate) start_len: usize,
    pub(crate) start_expires: usize,
}

/// The order of a snapshot's walk, which decides whether a key has been
/// written out yet.
#[derive(Debug)]
enum WalkOrder {
    /// The table's own slots, `..next` done. Marking the start costs
    /// nothing, and items stay in their slots as long as the table does
    /// not grow: removals leave them, and inserts take free slots. Before an
    /// insert could grow it (`len == capacity`), the walk changes to
    /// [`WalkOrder::Hashes`] ([`Db::before_write`]).
    Slots { next: usize },
    /// Hashes of the keys not walked yet, sorted and deduplicated:
    /// `hashes[..next]` done. Slot order does not survive the table's
    /// growth; hash order does.
    Hashes { hashes: Vec<u64>, next: usize },
}

/// How many slots ahead of the one it reads a snapshot's walk prefetches
/// the item: about a memory latency's worth of items written out.
const PREFETCH_SLOTS: usize = 8;

/// Empty slots a snapshot's slice passes over per key it may write out:
/// a sparse table still takes short slices.
const SLOTS_PER_KEY: usize = 16;

/// Slots [`Db::sample`] looks at per key it is asked for (Redis's
/// `dictGetSomeKeys` gives up after `count * 10` steps).
const SAMPLE_STEPS_PER_KEY: usize = 10;

/// A watched key's modification count and how many clients watch it.
#[derive(Debug, Default)]
struct Watched {
    version: u64,
    watchers: usize,
    /// SWAPDB brought the key in past its deadline where it was missing,
    /// at this version: to the clients watching it then it is as if it had
    /// been past its deadline at WATCH (Redis's `wk->expired` set by
    /// `touchAllWatchedKeysInDb`), so its expiry is no change.
    swapped_stale: Option<u64>,
}

/// Copies argument bytes into their own allocation before they are stored:
/// arguments are slices of a connection's read buffer, and keeping a slice
/// would keep the whole buffer alive.
pub(crate) fn owned(b: &Bytes) -> Bytes {
    Bytes::copy_from_slice(b)
}

/// Appends `hash` to one deadline's list in the deadline index, growing it
/// by an eighth rather than doubling it: keys set in the same millisecond
/// share a list, and with doubling a quarter of the index stood unused on
/// average (a million lock keys set with `EX`: 11.9 bytes a key where the
/// hashes take 8). An eighth leaves at most that much unused, for more
/// copies as a list grows (still amortized O(1)).
fn push_deadline(list: &mut Vec<u64>, hash: u64) {
    const MIN_GROWTH: usize = 4;
    if list.len() == list.capacity() {
        list.reserve_exact(list.len() / 8 + MIN_GROWTH);
    }
    list.push(hash);
}

/// Redis's rule: a key lives through its deadline millisecond and is expired
/// once the clock is past it (`now > when`).
pub(crate) fn is_expired(expire_at: u64, now: u64) -> bool {
    expire_at != 0 && expire_at < now
}

/// The walk's remaining work in hash order, from slot `next` on: the
/// hashes of the keys in the slots not walked yet. A key walked already
/// whose hash one of those shares is marked `done`, so that the walk by
/// hash does not write it out twice. Costs a hash per key, as the
/// growth that follows does.
fn hash_order(
    map: &HashTable<Item>,
    hasher: &RandomState,
    next: usize,
    done: &mut HashSet<Bytes, RandomState>,
) -> WalkOrder {
    let slots = map.num_buckets();
    let mut hashes: Vec<u64> = (next..slots)
        .filter_map(|slot| map.get_bucket(slot))
        .map(|item| hasher.hash_one(item.key()))
        .collect();
    hashes.sort_unstable();
    hashes.dedup();
    for item in (0..next.min(slots)).filter_map(|slot| map.get_bucket(slot)) {
        if hashes.binary_search(&hasher.hash_one(item.key())).is_ok() {
            done.insert(Bytes::copy_from_slice(item.key()));
        }
    }
    WalkOrder::Hashes { hashes, next: 0 }
}

/// Counts a change for every watched key present in one of `tables`
/// (FLUSHDB, SWAPDB).
fn bump_watched_present(
    watched: &mut HashMap<Bytes, Watched, RandomState>,
    tables: &[(&HashTable<Item>, &RandomState)],
) {
    for (key, w) in watched.iter_mut() {
        let present = tables
            .iter()
            .any(|(map, hasher)| map.find(hasher.hash_one(&key[..]), |i| i.key() == &key[..]).is_some());
        if present {
            w.version += 1;
        }
    }
}

/// SWAPDB's watch bookkeeping for the keys watched in one database: a
/// key changes if `here` holds it (live or not) or `incoming` holds it
/// live at `now`.
fn bump_watched_swapped(
    watched: &mut HashMap<Bytes, Watched, RandomState>,
    here: (&HashTable<Item>, &RandomState),
    incoming: (&HashTable<Item>, &RandomState),
    now: u64,
) {
    let find = |(map, hasher): (&HashTable<Item>, &RandomState), key: &[u8]| {
        map.find(hasher.hash_one(key), |i| i.key() == key)
            .map(|i| i.expire_at())
    };
    for (key, w) in watched.iter_mut() {
        match (find(here, key), find(incoming, key)) {
            (None, None) => {}
            (None, Some(expire_at)) if is_expired(expire_at, now) => w.swapped_stale = Some(w.version),
            _ => w.version += 1,
        }
    }
}

impl Db {
    /// Queues `key` for the blocking layer when clients wait on it (Redis's
    /// `signalKeyAsReady`). Free when nobody is blocked in this database.
    #[inline]
    pub fn signal_ready(&mut self, key: &[u8]) {
        if !self.waiters.is_empty() && self.waiters.contains_key(key) && !self.ready_set.contains(key) {
            let key = Bytes::copy_from_slice(key);
            self.ready_set.insert(key.clone());
            self.ready.push(key);
        }
    }

    /// Adds `client` at the back of `key`'s queue of waiters.
    pub fn add_waiter(&mut self, key: &Bytes, client: u64) {
        self.waiters.entry(owned(key)).or_default().push_back(client);
    }

    /// Removes `client` from `key`'s queue of waiters.
    pub fn remove_waiter(&mut self, key: &[u8], client: u64) {
        if let Some(queue) = self.waiters.get_mut(key) {
            queue.retain(|&c| c != client);
            if queue.is_empty() {
                self.waiters.remove(key);
            }
        }
    }

    /// The clients waiting on `key`, longest waiting first.
    pub fn waiters(&self, key: &[u8]) -> Vec<u64> {
        self.waiters
            .get(key)
            .map_or_else(Vec::new, |q| q.iter().copied().collect())
    }

    /// Keys that clients wait on (INFO, tests).
    pub fn waited_keys(&self) -> usize {
        self.waiters.len()
    }

    /// The keys signalled ready since the last call, in signal order.
    pub fn take_ready(&mut self) -> Vec<Bytes> {
        self.ready_set.clear();
        std::mem::take(&mut self.ready)
    }

    /// Whether a key was signalled ready since the last [`Db::take_ready`].
    pub fn has_ready(&self) -> bool {
        !self.ready.is_empty()
    }

    /// Signals every waited key that exists (SWAPDB brought in new content:
    /// Redis's `scanDatabaseForReadyKeys`).
    pub fn signal_all_waited(&mut self) {
        let keys: Vec<Bytes> = self.waiters.keys().cloned().collect();
        for key in keys {
            if self.get(&key).is_some() {
                self.signal_ready(&key);
            }
        }
    }

    /// Records that `key` changed (Redis's `signalModifiedKey`). Free when
    /// nobody watches anything in this database.
    pub fn touch(&mut self, key: &[u8]) {
        if self.log_touched {
            self.touched_log.push((Bytes::copy_from_slice(key), false));
        }
        self.touch_watched(key);
    }

    /// Keys touched since the last call, in order (empty unless `log_touched`).
    pub fn take_touched(&mut self) -> Vec<(Bytes, bool)> {
        std::mem::take(&mut self.touched_log)
    }

    /// Whether a key was touched since the last [`Db::take_touched`].
    pub fn has_touched(&self) -> bool {
        !self.touched_log.is_empty()
    }

    fn touch_watched(&mut self, key: &[u8]) {
        if !self.watched.is_empty() {
            if let Some(w) = self.watched.get_mut(key) {
                w.version += 1;
            }
        }
    }

    /// WATCH: starts counting changes to `key`; returns the current count.
    pub fn watch(&mut self, key: &Bytes) -> u64 {
        let w = self.watched.entry(owned(key)).or_default();
        w.watchers += 1;
        w.version
    }

    /// Ends one client's watch of `key`.
    pub fn unwatch(&mut self, key: &[u8]) {
        if let Some(w) = self.watched.get_mut(key) {
            w.watchers -= 1;
            if w.watchers == 0 {
                self.watched.remove(key);
            }
        }
    }

    /// Whether keys expired or were created since the last
    /// [`Db::take_expired`] / [`Db::take_new`]: after every command each
    /// database is asked, and most have nothing.
    #[inline]
    pub(crate) fn has_logged(&self) -> bool {
        !(self.expired_log.is_empty() && self.new_log.is_empty())
    }

    /// Keys created since the last call (empty unless `log_new`).
    pub fn take_new(&mut self) -> Vec<Bytes> {
        std::mem::take(&mut self.new_log)
    }

    /// Keys expired since the last call (empty unless `log_expired`).
    pub fn take_expired(&mut self) -> Vec<Bytes> {
        std::mem::take(&mut self.expired_log)
    }

    /// Whether any client watches `key`.
    pub fn is_watched(&self, key: &[u8]) -> bool {
        self.watched.contains_key(key)
    }

    /// The change count of a watched key (0 when nobody watches it), which
    /// EXEC compares with the count WATCH returned.
    pub fn watch_version(&self, key: &[u8]) -> u64 {
        self.watched.get(key).map_or(0, |w| w.version)
    }

    /// Whether a client that watched `key` at `version` sees it as past
    /// its deadline at WATCH because SWAPDB brought it in so (see
    /// [`Watched::swapped_stale`]).
    pub(crate) fn swapped_in_stale(&self, key: &[u8], version: u64) -> bool {
        self.watched.get(key).is_some_and(|w| w.swapped_stale == Some(version))
    }

    /// Number of keys held (DBSIZE); a key past its deadline counts until expiry removes it.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// DEBUG HTSTATS's report, as Redis's: the key table's
    /// ([`super::htstats`]), then the deadlines'. coordis keeps those in a
    /// deadline-ordered tree, not a hash table: its part says so, with the
    /// count of keys that have one (Redis's words when there are none).
    pub(crate) fn htstats(&self) -> String {
        let expires = if self.with_deadline == 0 {
            super::htstats::EMPTY.to_owned()
        } else {
            format!(
                "Not represented using an hash table (a deadline-ordered tree):\n number of elements: {}\n",
                self.with_deadline
            )
        };
        format!(
            "[Dictionary HT]\n{}[Expires HT]\n{expires}",
            super::htstats::report(&self.map)
        )
    }

    /// Whether the database holds no key.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Number of keys with a deadline (INFO keyspace `expires=`).
    pub fn expires_len(&self) -> usize {
        self.with_deadline
    }

    fn hash(&self, key: &[u8]) -> u64 {
        self.hasher.hash_one(key)
    }

    /// Marks the start of a point-in-time snapshot of this database (as
    /// database `origin`) at clock time `now`: O(1), the walk goes in slot
    /// order.
    pub(crate) fn begin_snapshot(&mut self, origin: usize, now: u64) {
        self.snap = Some(Box::new(DbSnap {
            origin,
            start_ms: now,
            order: WalkOrder::Slots { next: 0 },
            done: HashSet::default(),
            copied: Vec::new(),
            handed: Vec::new(),
            frozen: None,
            start_len: self.map.len(),
            start_expires: self.with_deadline,
        }));
    }

    /// Copy-before-write, the snapshot's one choke point (see the module
    /// docs): runs before anything changes, creates or removes `key`
    /// (whose hash is `hash`).
    fn before_write(&mut self, hash: u64, key: &[u8]) {
        self.before_write_as(hash, key, false);
    }

    /// [`Db::before_write`]; with `replacing` (the write puts a new item in
    /// the old one's place) the old value is not copied: true when the
    /// snapshot wants the old item, which the caller then hands over with
    /// [`Db::hand_over`] instead of freeing it.
    fn before_write_as(&mut self, hash: u64, key: &[u8], replacing: bool) -> bool {
        let Some(snap) = self.snap.as_deref_mut() else {
            return false;
        };
        if snap.frozen.is_some() || (!snap.done.is_empty() && snap.done.contains(key)) {
            return false;
        }
        if let WalkOrder::Slots { next } = snap.order {
            if self.map.len() >= self.map.capacity() {
                // This write may insert and grow the table, which moves
                // every item to another slot.
                snap.order = hash_order(&self.map, &self.hasher, next, &mut snap.done);
            }
        }
        let found = match snap.order {
            WalkOrder::Slots { next } => match self.map.find_bucket_index(hash, |i| i.key() == key) {
                // Behind the walk's position: written out already.
                Some(slot) if slot < next => return false,
                Some(slot) => self.map.get_bucket(slot),
                None => None,
            },
            WalkOrder::Hashes { ref hashes, next } => {
                // Past the walk's position: written out already, or never
                // in the image.
                if hashes[next..].binary_search(&hash).is_err() {
                    return false;
                }
                self.map.find(hash, |i| i.key() == key)
            }
        };
        // Not done and still ahead of the walk: present now means present
        // at the start and unchanged since (any change would have marked
        // it). Absent now, it is created by this write: marked done, the
        // walk leaves it out. One copy of the name serves both.
        let key = Bytes::copy_from_slice(key);
        let wanted = found.is_some_and(|item| !is_expired(item.expire_at(), snap.start_ms));
        if let (Some(item), true, false) = (found, wanted, replacing) {
            let entry = EntryRef {
                value: item.value(),
                expire_at: item.expire_at(),
            };
            snap.copied.push((key.clone(), entry.to_owned(), item.access()));
        }
        snap.done.insert(key);
        wanted && replacing
    }

    /// Gives the snapshot an item [`Db::before_write_as`] said it wants,
    /// taken out of the table whole (no copy of its value).
    fn hand_over(&mut self, old: Item) {
        if let Some(snap) = self.snap.as_deref_mut() {
            snap.handed.push(old);
        }
    }

    /// One slice of the snapshot's walk: the copied old values, then up to
    /// `budget` of the start's keys not written yet, each given to `emit`
    /// (key, value and deadline, access word). True when the walk is
    /// complete (the hold is then released: later writes copy nothing).
    pub(crate) fn snapshot_step(&mut self, budget: usize, mut emit: impl FnMut(&[u8], EntryRef<'_>, u32)) -> bool {
        let Some(snap) = self.snap.as_deref_mut() else {
            return true;
        };
        for (key, entry, access) in snap.copied.drain(..) {
            emit(
                &key,
                EntryRef {
                    value: entry.value.as_value_ref(),
                    expire_at: entry.expire_at,
                },
                access,
            );
        }
        for item in snap.handed.drain(..) {
            emit(
                item.key(),
                EntryRef {
                    value: item.value(),
                    expire_at: item.expire_at(),
                },
                item.access(),
            );
            // Freed as the overwrite would have freed it.
            self.freer.free(item, self.lazy.server_del);
        }
        let table = snap.frozen.as_ref().unwrap_or(&self.map);
        let skip = |item: &Item| {
            (!snap.done.is_empty() && snap.done.contains(item.key())) || is_expired(item.expire_at(), snap.start_ms)
        };
        let mut emit_item = |item: &Item| {
            emit(
                item.key(),
                EntryRef {
                    value: item.value(),
                    expire_at: item.expire_at(),
                },
                item.access(),
            )
        };
        let mut spent = 0;
        let walked = match &mut snap.order {
            WalkOrder::Slots { next } => {
                let slots = table.num_buckets();
                let mut passed = 0;
                while spent < budget && passed < budget * SLOTS_PER_KEY && *next < slots {
                    if let Some(ahead) = table.get_bucket(*next + PREFETCH_SLOTS) {
                        ahead.prefetch();
                    }
                    if let Some(item) = table.get_bucket(*next) {
                        if !skip(item) {
                            spent += 1;
                            emit_item(item);
                        }
                    }
                    *next += 1;
                    passed += 1;
                }
                *next == slots
            }
            WalkOrder::Hashes { hashes, next } => {
                while spent < budget && *next < hashes.len() {
                    let hash = hashes[*next];
                    *next += 1;
                    for item in table.iter_hash(hash) {
                        if self.hasher.hash_one(item.key()) != hash || skip(item) {
                            continue;
                        }
                        spent += 1;
                        emit_item(item);
                    }
                }
                *next == hashes.len()
            }
        };
        let finished = walked && snap.copied.is_empty() && snap.handed.is_empty();
        if finished {
            self.snap = None;
        }
        finished
    }

    fn get(&self, key: &[u8]) -> Option<&Item> {
        self.map.find(self.hash(key), |item| item.key() == key)
    }

    /// Lazy expiry: finds `key`, removing it first if its deadline has
    /// passed. Returns the key's hash when it is live, so the caller's
    /// lookup does not hash it again.
    fn live(&mut self, key: &[u8], now: u64) -> Option<u64> {
        let hash = self.hash(key);
        let item = self.map.find_mut(hash, |item| item.key() == key)?;
        if !is_expired(item.expire_at(), now) || self.obey_primary {
            // An access (Redis's `lookupKey`), unless the command says not.
            if !self.notouch {
                item.set_access(super::access::touched(item.access(), self.access, self.clock_ms));
            }
            return Some(hash);
        }
        if self.keep_expired {
            return None;
        }
        self.before_write(hash, key);
        if let Ok(found) = self.map.find_entry(hash, |item| item.key() == key) {
            let item = found.remove().0;
            self.record_expired(&item);
            self.freer.free(item, self.lazy.expire);
        }
        None
    }

    /// The bookkeeping for a key removed because its deadline passed.
    fn record_expired(&mut self, item: &Item) {
        self.with_deadline -= 1;
        if self.log_touched {
            self.touched_log.push((Bytes::copy_from_slice(item.key()), true));
        }
        self.touch_watched(item.key());
        self.signal_ready(item.key());
        if self.log_expired {
            self.expired_log.push(Bytes::copy_from_slice(item.key()));
        }
        self.expired_count += 1;
    }

    /// The item stored under `key`, even past its deadline (Redis's
    /// `dictFind`: MEMORY USAGE neither expires nor touches a key).
    pub fn peek(&self, key: &[u8]) -> Option<&Item> {
        self.map.find(self.hash(key), |item| item.key() == key)
    }

    /// Bytes of the key table and of the deadline index (MEMORY STATS
    /// `overhead.hashtable.main` and `.expires`): a pointer and a control
    /// byte per slot; 8 bytes per indexed deadline and a map entry per
    /// distinct deadline.
    pub fn overhead(&self) -> (usize, usize) {
        (self.map.capacity() * 9, self.index_len * 8 + self.expires.len() * 48)
    }

    /// The live entry of `key`, if any.
    pub fn lookup(&mut self, key: &[u8], now: u64) -> Option<EntryRef<'_>> {
        let hash = self.live(key, now)?;
        self.map.find(hash, |item| item.key() == key).map(|item| EntryRef {
            value: item.value(),
            expire_at: item.expire_at(),
        })
    }

    /// The live value of `key` for modification (sorted sets are changed in
    /// place; strings are replaced with [`Db::replace_value`]).
    pub fn lookup_mut(&mut self, key: &[u8], now: u64) -> Option<ValueMut<'_>> {
        let hash = self.live(key, now)?;
        self.before_write(hash, key);
        self.map
            .find_mut(hash, |item| item.key() == key)
            .map(|item| item.value_mut())
    }

    /// The live value of `key` for modification, storing `make()` (with no
    /// deadline) first when the key is absent: a push or add that creates
    /// its collection.
    pub fn lookup_or_insert_mut(&mut self, key: &[u8], now: u64, make: impl FnOnce() -> Value) -> ValueMut<'_> {
        let hash = match self.live(key, now) {
            Some(hash) => {
                self.before_write(hash, key);
                hash
            }
            None => {
                self.insert(key, make(), 0);
                self.hash(key)
            }
        };
        self.map
            .find_mut(hash, |item| item.key() == key)
            .map(|item| item.value_mut())
            .expect("live or just inserted")
    }

    /// A live string value as `Bytes` (long values are shared, not copied):
    /// `Some(Err(()))` when the key holds another type.
    pub fn lookup_str(&mut self, key: &[u8], now: u64) -> Option<Result<Bytes, ()>> {
        let hash = self.live(key, now)?;
        self.map
            .find(hash, |item| item.key() == key)
            .map(|item| item.str_bytes().ok_or(()))
    }

    /// [`Db::contains`] without touching the key's access data.
    pub(crate) fn contains_notouch(&mut self, key: &[u8], now: u64) -> bool {
        let saved = std::mem::replace(&mut self.notouch, true);
        let found = self.live(key, now).is_some();
        self.notouch = saved;
        found
    }

    /// Whether `key` is live at `now` (a key past its deadline is removed, as in [`Db::lookup`]).
    pub fn contains(&mut self, key: &[u8], now: u64) -> bool {
        self.lookup(key, now).is_some()
    }

    /// Stores `value` under `key` with deadline `expire_at` (0: none),
    /// replacing any previous value and deadline.
    pub fn insert(&mut self, key: &[u8], value: Value, expire_at: u64) {
        let mut item = Item::new(key, value, expire_at);
        item.set_access(super::access::initial(self.access, self.clock_ms));
        self.insert_item(key, item, self.access.lfu);
    }

    /// [`Db::insert`] of a whole item (whose key is `key`), access word
    /// included; with `keep_lfu`, over a key present the old LFU counter
    /// is kept (Redis's `dbOverwrite`).
    fn insert_item(&mut self, key: &[u8], mut item: Item, keep_lfu: bool) {
        debug_assert_eq!(item.key(), key);
        self.touch(key);
        self.signal_ready(key);
        let hash = self.hash(key);
        let hand_over = self.before_write_as(hash, key, true);
        let expire_at = item.expire_at();
        let hasher = &self.hasher;
        let (old, replaced) = match self.map.entry(hash, |i| i.key() == key, |i| hasher.hash_one(i.key())) {
            hashbrown::hash_table::Entry::Occupied(mut e) => {
                let old = e.get().expire_at();
                // An overwrite keeps the LFU counter (Redis's `dbOverwrite`).
                if keep_lfu {
                    item.set_access(e.get().access());
                }
                (old, Some(std::mem::replace(e.get_mut(), item)))
            }
            hashbrown::hash_table::Entry::Vacant(e) => {
                e.insert(item);
                if self.log_new {
                    self.new_log.push(Bytes::copy_from_slice(key));
                }
                (0, None)
            }
        };
        self.deadline_changed(hash, old, expire_at);
        // The value overwritten goes as a server-side deletion does, or to
        // the snapshot that wants it.
        if let Some(replaced) = replaced {
            if hand_over {
                self.hand_over(replaced);
            } else {
                self.freer.free(replaced, self.lazy.server_del);
            }
        }
    }

    /// Overwrites the string under `key` in place, keeping its deadline,
    /// when `value` has the old value's length and both are stored inline.
    /// Returns false, changing nothing, otherwise ([`Db::replace_value`]
    /// then does it). Saves INCR an allocation and two lookups.
    pub fn overwrite_str(&mut self, key: &[u8], value: &[u8]) -> bool {
        let hash = self.hash(key);
        self.before_write(hash, key);
        let done = self
            .map
            .find_mut(hash, |i| i.key() == key)
            .is_some_and(|item| item.overwrite_str(value));
        if done {
            self.touch(key);
        }
        done
    }

    /// The boxed bytes of a long string value of `key`, to be changed in
    /// place (the caller marks a change with [`Db::touch`]). `None` for a
    /// short string (change it with [`Db::overwrite_str`] or
    /// [`Db::replace_value`]), another type, or no key. The caller has
    /// looked the key up (and so expired it).
    pub fn long_str_mut(&mut self, key: &[u8]) -> Option<&mut Bytes> {
        let hash = self.hash(key);
        self.before_write(hash, key);
        self.map.find_mut(hash, |i| i.key() == key)?.boxed_str_mut()
    }

    /// Edits the live string under `key` in its slot, with one lookup
    /// (Redis changes `o->ptr` in place once `dbUnshareStringValue` has
    /// made it its own): `edit` gets the bytes as a `Vec` (a long string's
    /// own buffer when nothing else holds it, a short string's copied once)
    /// and the string's [`StrEncoding`](super::StrEncoding) to change, and
    /// says whether it changed the bytes. They are stored back under the
    /// same deadline and access word. `None`: no such key; `Err(())`: it
    /// holds another type.
    pub(crate) fn edit_str<R>(
        &mut self,
        key: &[u8],
        now: u64,
        edit: impl FnOnce(&mut Vec<u8>, &mut super::StrEncoding) -> (R, bool),
    ) -> Option<Result<R, ()>> {
        let hash = self.live(key, now)?;
        self.before_write(hash, key);
        let item = self.map.find_mut(hash, |i| i.key() == key)?;
        let boxed = item.boxed_str_mut().is_some();
        let mut bytes: Vec<u8> = match item.boxed_str_mut() {
            Some(slot) => std::mem::take(slot).into(),
            None => match item.value() {
                ValueRef::Str(s) => {
                    // Room for an edit that grows it a little (a sparse
                    // HLL's split adds up to 4 bytes) without a realloc.
                    let mut v = Vec::with_capacity(s.len() + EDIT_SLACK);
                    v.extend_from_slice(s);
                    v
                }
                _ => return Some(Err(())),
            },
        };
        let mut encoding = item.str_encoding();
        let (out, changed) = edit(&mut bytes, &mut encoding);
        let mut replaced = None;
        if boxed && bytes.len() > super::item::INLINE_MAX {
            *item.boxed_str_mut().expect("a long string") = Bytes::from(bytes);
        } else if (changed || boxed) && !item.overwrite_str(&bytes) {
            // A short string changed to another length, or a long one
            // shrunk: a new item in the same slot.
            let mut fresh = Item::new(key, Value::Str(Bytes::from(bytes)), item.expire_at());
            fresh.set_access(item.access());
            replaced = Some(std::mem::replace(item, fresh));
        }
        // (After `overwrite_str`, which resets it.)
        item.set_str_encoding(encoding);
        if let Some(old) = replaced {
            self.freer.free(old, false);
        }
        if changed {
            self.touch(key);
        }
        Some(Ok(out))
    }

    /// Replaces the value of an existing key, keeping its deadline (KEEPTTL,
    /// APPEND, INCR...). Inserts without deadline when the key is absent.
    pub fn replace_value(&mut self, key: &[u8], value: Value) {
        let expire_at = self.get(key).map_or(0, |item| item.expire_at());
        self.insert(key, value, expire_at);
    }

    /// Makes room for `additional` more keys at once (a load that knows
    /// its count), so the table does not rehash its way up to the size.
    pub(crate) fn reserve(&mut self, additional: usize) {
        if let Some(snap) = self.snap.as_deref_mut() {
            if let (None, WalkOrder::Slots { next }) = (&snap.frozen, &snap.order) {
                if self.map.len() + additional > self.map.capacity() {
                    snap.order = hash_order(&self.map, &self.hasher, *next, &mut snap.done);
                }
            }
        }
        let hasher = &self.hasher;
        self.map.reserve(additional, |i| hasher.hash_one(i.key()));
    }

    /// Stores a key read from a file in a database being built apart (no
    /// client sees it yet; [`Db::absorb`] installs it): the key with its
    /// access word, `word` or a fresh one. False, storing nothing, when
    /// the key is here already (a duplicate in the file).
    pub(crate) fn insert_new_loaded(&mut self, key: &[u8], value: Value, expire_at: u64, word: Option<u32>) -> bool {
        let hash = self.hash(key);
        let hasher = &self.hasher;
        match self.map.entry(hash, |i| i.key() == key, |i| hasher.hash_one(i.key())) {
            hashbrown::hash_table::Entry::Occupied(_) => false,
            hashbrown::hash_table::Entry::Vacant(slot) => {
                let mut item = Item::new(key, value, expire_at);
                item.set_access(word.unwrap_or_else(|| super::access::initial(self.access, self.clock_ms)));
                slot.insert(item);
                self.deadline_changed(hash, 0, expire_at);
                true
            }
        }
    }

    /// Installs the keys of `loaded`, a database built apart from a file
    /// ([`Db::insert_new_loaded`]). Into an empty database with no
    /// snapshot running, the table itself is taken (no key is copied or
    /// hashed again; a watched key is then changed as by SWAPDB). Else key
    /// by key, as [`Db::insert`] stores them: a key here already is
    /// replaced, or with `refuse_duplicates` refused (`Err` with its name,
    /// the keys before it installed, as Redis's load stops there).
    pub(crate) fn absorb(&mut self, mut loaded: Db, refuse_duplicates: bool) -> Result<(), Bytes> {
        if self.map.is_empty() && self.snap.is_none() {
            std::mem::swap(&mut self.map, &mut loaded.map);
            std::mem::swap(&mut self.hasher, &mut loaded.hasher);
            std::mem::swap(&mut self.expires, &mut loaded.expires);
            self.index_len = loaded.index_len;
            self.with_deadline = loaded.with_deadline;
            bump_watched_present(&mut self.watched, &[(&self.map, &*self.hasher)]);
            return Ok(());
        }
        for item in loaded.map.drain() {
            if refuse_duplicates && self.peek(item.key()).is_some() {
                return Err(Bytes::copy_from_slice(item.key()));
            }
            let key = Bytes::copy_from_slice(item.key());
            self.insert_item(&key, item, false);
        }
        Ok(())
    }

    /// Sets the access word of `key` (RESTORE IDLETIME/FREQ, an RDB's LRU
    /// and LFU opcodes, RENAME and MOVE). False if absent.
    pub(crate) fn set_access(&mut self, key: &[u8], word: u32) -> bool {
        let hash = self.hash(key);
        match self.map.find_mut(hash, |item| item.key() == key) {
            Some(item) => {
                item.set_access(word);
                true
            }
            None => false,
        }
    }

    /// Changes the deadline of an existing key. Returns false if absent.
    pub fn set_expire(&mut self, key: &[u8], expire_at: u64) -> bool {
        self.touch(key);
        let hash = self.hash(key);
        self.before_write(hash, key);
        let Some(item) = self.map.find_mut(hash, |item| item.key() == key) else {
            return false;
        };
        let old = item.expire_at();
        item.set_expire_at(expire_at);
        self.deadline_changed(hash, old, expire_at);
        true
    }

    /// Keeps the counts and the index in step with one key's deadline change.
    fn deadline_changed(&mut self, hash: u64, old: u64, new: u64) {
        if old == new {
            return;
        }
        match (old, new) {
            (0, _) => self.with_deadline += 1,
            (_, 0) => self.with_deadline -= 1,
            _ => {}
        }
        if new != 0 {
            push_deadline(self.expires.entry(new).or_default(), hash);
            self.index_len += 1;
            // Stale entries (old deadlines) are dropped by a rebuild once they
            // outnumber the live ones: amortized O(1) per change.
            if self.index_len > 2 * self.with_deadline + 1024 {
                self.rebuild_index();
            }
        }
    }

    fn rebuild_index(&mut self) {
        let mut expires: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
        for item in self.map.iter() {
            if item.expire_at() != 0 {
                let list = expires.entry(item.expire_at()).or_default();
                push_deadline(list, self.hasher.hash_one(item.key()));
            }
        }
        self.index_len = self.with_deadline;
        self.expires = expires;
    }

    /// Removes `key` (whether or not it is expired) and returns its entry.
    pub fn remove(&mut self, key: &[u8]) -> Option<Entry> {
        self.take(key).map(Item::into_entry)
    }

    /// Removes `key` (whether or not it is expired) and frees its value:
    /// on the lazy-free thread when `lazy` and the value is large (Redis's
    /// `dbAsyncDelete`), here otherwise (`dbSyncDelete`). False if absent.
    pub(crate) fn delete(&mut self, key: &[u8], lazy: bool) -> bool {
        let Some(item) = self.take(key) else {
            return false;
        };
        self.freer.free(item, lazy);
        true
    }

    /// A deletion a command makes on the side (a STORE's destination, an
    /// emptied collection, RESTORE REPLACE): lazy as
    /// `lazyfree-lazy-server-del` says (Redis's `dbDelete`).
    pub(crate) fn server_del(&mut self, key: &[u8]) -> bool {
        self.delete(key, self.lazy.server_del)
    }

    fn take(&mut self, key: &[u8]) -> Option<Item> {
        let hash = self.hash(key);
        self.before_write(hash, key);
        let item = self.map.find_entry(hash, |item| item.key() == key).ok()?.remove().0;
        self.touch(key);
        // A group reader blocked on a deleted stream is told so.
        self.signal_ready(key);
        if item.expire_at() != 0 {
            self.with_deadline -= 1;
        }
        Some(item)
    }

    /// The access word of `key` (RENAME and MOVE carry it to the new
    /// name, as Redis moves the object itself), even past its deadline.
    pub(crate) fn access_of(&self, key: &[u8]) -> Option<u32> {
        self.get(key).map(Item::access)
    }

    /// How `key`'s string is encoded beyond its content (the default for
    /// a missing key or another type).
    pub(crate) fn str_encoding(&self, key: &[u8]) -> super::StrEncoding {
        self.peek(key).map(Item::str_encoding).unwrap_or_default()
    }

    /// Marks `key`'s string as `encoding` says (after the write that made it).
    pub(crate) fn set_str_encoding(&mut self, key: &[u8], encoding: super::StrEncoding) {
        let hash = self.hash(key);
        if let Some(item) = self.map.find_mut(hash, |i| i.key() == key) {
            item.set_str_encoding(encoding);
        }
    }

    /// Removes every key.
    pub fn clear(&mut self) {
        self.clear_with(false);
    }

    /// Removes every key; with `lazy` the old table is freed on the
    /// lazy-free thread, whatever its size (Redis's `emptyDbAsync`).
    pub(crate) fn clear_with(&mut self, lazy: bool) {
        self.signal_all_waited();
        bump_watched_present(&mut self.watched, &[(&self.map, &*self.hasher)]);
        let old = std::mem::take(&mut self.map);
        let expires = std::mem::take(&mut self.expires);
        // A snapshot walking this table keeps it (the image is the start's).
        let old = match self.snap.as_deref_mut() {
            Some(snap) if snap.frozen.is_none() => {
                snap.frozen = Some(old);
                None
            }
            _ => Some(old),
        };
        if let Some(old) = old {
            if lazy {
                let keys = old.len() as u64;
                self.freer.free_table(Box::new((old, expires)), keys);
            }
        }
        self.index_len = 0;
        self.with_deadline = 0;
    }

    /// Active expiry: removes due keys (deadline `< now`) in deadline order.
    /// Each removal, and each stale index entry passed over, costs one unit
    /// of `budget`; returns the units spent, so fewer than `budget` means
    /// nothing more is due now.
    pub fn expire_step(&mut self, now: u64, budget: usize) -> usize {
        let mut spent = 0;
        while spent < budget {
            let Some(mut first) = self.expires.first_entry() else {
                break;
            };
            let deadline = *first.key();
            if deadline >= now {
                break;
            }
            let Some(hash) = first.get_mut().pop() else {
                first.remove();
                continue;
            };
            self.index_len -= 1;
            spent += 1;
            let hasher = &self.hasher;
            let found = self.map.find(hash, |item| {
                item.expire_at() == deadline && hasher.hash_one(item.key()) == hash
            });
            let Some(key) = found.map(|item| Bytes::copy_from_slice(item.key())) else {
                continue;
            };
            self.before_write(hash, &key);
            let Ok(found) = self.map.find_entry(hash, |item| item.key() == &key[..]) else {
                continue;
            };
            let item = found.remove().0;
            self.record_expired(&item);
            self.freer.free(item, self.lazy.expire);
        }
        spent
    }

    /// The earliest deadline in the index (possibly a stale one), if any.
    pub fn next_deadline(&self) -> Option<u64> {
        self.expires.first_key_value().map(|(d, _)| *d)
    }

    /// Iterates over live keys (KEYS, SCAN). Expired-but-unremoved keys are skipped.
    pub fn live_keys(&self, now: u64) -> impl Iterator<Item = (&[u8], EntryRef<'_>)> {
        self.map
            .iter()
            .filter(move |item| !is_expired(item.expire_at(), now))
            .map(|item| {
                (
                    item.key(),
                    EntryRef {
                        value: item.value(),
                        expire_at: item.expire_at(),
                    },
                )
            })
    }

    /// [`Db::live_keys`] with each key's access word (an RDB file's hints).
    pub(crate) fn live_items(&self, now: u64) -> impl Iterator<Item = (&[u8], EntryRef<'_>, u32)> {
        self.map
            .iter()
            .filter(move |item| !is_expired(item.expire_at(), now))
            .map(|item| {
                (
                    item.key(),
                    EntryRef {
                        value: item.value(),
                        expire_at: item.expire_at(),
                    },
                    item.access(),
                )
            })
    }

    /// Iterates over every stored key, each with whether its deadline has
    /// passed (SCAN counts those in its page and deletes them, as Redis does).
    pub fn all_keys(&self, now: u64) -> impl Iterator<Item = (&[u8], EntryRef<'_>, bool)> {
        self.map.iter().map(move |item| {
            (
                item.key(),
                EntryRef {
                    value: item.value(),
                    expire_at: item.expire_at(),
                },
                is_expired(item.expire_at(), now),
            )
        })
    }

    /// The hash SCAN orders keys by. Stable for the life of this database, so
    /// a cursor ("every key with hash >= cursor") survives inserts, deletes and
    /// rehashing: a key present for the whole scan is always returned.
    pub fn scan_hash(&self, key: &[u8]) -> u64 {
        self.hash(key)
    }

    /// A uniformly random live key (RANDOMKEY). O(n).
    pub fn random_key(&mut self, now: u64) -> Option<Bytes> {
        loop {
            if self.map.is_empty() {
                return None;
            }
            let idx = fastrand::usize(..self.map.len());
            let (key, expire_at) = self
                .map
                .iter()
                .nth(idx)
                .map(|item| (Bytes::copy_from_slice(item.key()), item.expire_at()))?;
            if is_expired(expire_at, now) {
                self.live(&key, now);
                continue;
            }
            return Some(key);
        }
    }

    /// Up to `count` keys sampled for eviction (Redis's `dictGetSomeKeys`):
    /// a run of slots from a random one, so the sample is cheap and roughly
    /// uniform; `volatile` takes only keys with a deadline. Each comes with
    /// its access word and deadline. At most `count * 10` slots are looked
    /// at (a table of few volatile keys may give fewer).
    pub(crate) fn sample(&self, count: usize, volatile: bool, out: &mut Vec<(Bytes, u32, u64)>) {
        let buckets = self.map.num_buckets();
        if self.map.is_empty() || buckets == 0 {
            return;
        }
        let mut at = fastrand::usize(..buckets);
        let mut taken = 0;
        for _ in 0..count.saturating_mul(SAMPLE_STEPS_PER_KEY).min(buckets) {
            if let Some(item) = self.map.get_bucket(at) {
                if !volatile || item.expire_at() != 0 {
                    out.push((Bytes::copy_from_slice(item.key()), item.access(), item.expire_at()));
                    taken += 1;
                    if taken == count {
                        return;
                    }
                }
            }
            at = (at + 1) % buckets;
        }
    }

    /// A key with a deadline, if any: the earliest in the deadline index
    /// (volatile policies' last resort when sampling found none).
    pub(crate) fn earliest_volatile(&self) -> Option<Bytes> {
        for hashes in self.expires.values() {
            for &hash in hashes {
                if let Some(item) = self
                    .map
                    .find(hash, |i| i.expire_at() != 0 && self.hasher.hash_one(i.key()) == hash)
                {
                    return Some(Bytes::copy_from_slice(item.key()));
                }
            }
        }
        None
    }

    /// Swaps this database's content with `other` (SWAPDB) at `now`.
    pub fn swap(&mut self, other: &mut Db, now: u64) {
        // As Redis's touchAllWatchedKeysInDb: a watched key changes if it
        // exists on either side of the swap, unless it was missing and
        // the key swapped in is past its deadline (no logical change; a
        // key past its deadline at WATCH is judged at EXEC).
        bump_watched_swapped(
            &mut self.watched,
            (&self.map, &*self.hasher),
            (&other.map, &*other.hasher),
            now,
        );
        bump_watched_swapped(
            &mut other.watched,
            (&other.map, &*other.hasher),
            (&self.map, &*self.hasher),
            now,
        );
        std::mem::swap(&mut self.map, &mut other.map);
        std::mem::swap(&mut self.hasher, &mut other.hasher);
        std::mem::swap(&mut self.expires, &mut other.expires);
        std::mem::swap(&mut self.index_len, &mut other.index_len);
        std::mem::swap(&mut self.with_deadline, &mut other.with_deadline);
        // The snapshots follow their tables (each keeps its origin index).
        std::mem::swap(&mut self.snap, &mut other.snap);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    /// What a snapshot's walk emits, as (key, string value) pairs, sorted.
    fn walk(db: &mut Db) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut out = vec![];
        while !db.snapshot_step(2, |k, e, _| {
            let ValueRef::Str(v) = e.value else {
                panic!("strings only")
            };
            out.push((k.to_vec(), v.to_vec()));
        }) {}
        out.sort();
        out
    }

    /// Every mutation path copies before writing: the walk emits the
    /// start's keys with their start values, whatever happened since.
    #[test]
    fn a_snapshot_is_the_start_s_dataset() {
        let mut db = Db::default();
        for i in 0..20 {
            db.insert(&k(&format!("k{i}")), Value::Str(k(&format!("v{i}"))), 0);
        }
        db.insert(&k("ttl"), Value::Str(k("t")), 1000);
        db.begin_snapshot(0, 10);
        // A first slice, then writes to keys walked and not walked.
        let mut early = vec![];
        db.snapshot_step(3, |key, _, _| early.push(key.to_vec()));
        for i in 0..20 {
            match i % 4 {
                0 => db.insert(&k(&format!("k{i}")), Value::Str(k("new")), 0),
                1 => {
                    db.remove(format!("k{i}").as_bytes());
                }
                2 => {
                    db.overwrite_str(format!("k{i}").as_bytes(), b"nw");
                }
                _ => {
                    db.set_expire(format!("k{i}").as_bytes(), 5);
                }
            }
        }
        db.insert(&k("created"), Value::Str(k("x")), 0);
        db.expire_step(2000, 100);
        let mut all = walk(&mut db);
        let mut expect: Vec<(Vec<u8>, Vec<u8>)> = (0..20)
            .map(|i| (format!("k{i}").into_bytes(), format!("v{i}").into_bytes()))
            .collect();
        expect.push((b"ttl".to_vec(), b"t".to_vec()));
        expect.sort();
        // The first slice's keys were emitted to the first closure.
        all.retain(|(key, _)| !early.contains(key));
        expect.retain(|(key, _)| !early.contains(key));
        assert_eq!(all, expect);
        assert!(db.snap.is_none(), "the hold is released at the end");
    }

    /// The table grows mid-walk (slot order is lost; the walk goes on by
    /// hash): every start key is written out once, with its start value,
    /// and no key created since is.
    #[test]
    fn a_snapshot_survives_the_table_growing_mid_walk() {
        for walked_first in [0, 1, 5, 40] {
            let mut db = Db::default();
            for i in 0..100 {
                db.insert(&k(&format!("k{i}")), Value::Str(k(&format!("v{i}"))), 0);
            }
            db.begin_snapshot(0, 10);
            let mut out = vec![];
            let mut take = |key: &[u8], e: EntryRef<'_>| {
                let ValueRef::Str(v) = e.value else {
                    panic!("strings only")
                };
                out.push((key.to_vec(), v.to_vec()));
            };
            for _ in 0..walked_first {
                db.snapshot_step(2, |key, e, _| take(key, e));
            }
            let capacity = db.map.capacity();
            for i in 0..1000 {
                db.insert(&k(&format!("new{i}")), Value::Str(k("x")), 0);
            }
            assert!(db.map.capacity() > capacity, "the table grew");
            for i in (0..100).step_by(2) {
                db.overwrite_str(format!("k{i}").as_bytes(), b"changed");
            }
            for i in (0..100).step_by(3) {
                db.remove(format!("k{i}").as_bytes());
            }
            while !db.snapshot_step(7, |key, e, _| take(key, e)) {}
            out.sort();
            let mut expect: Vec<(Vec<u8>, Vec<u8>)> = (0..100)
                .map(|i| (format!("k{i}").into_bytes(), format!("v{i}").into_bytes()))
                .collect();
            expect.sort();
            assert_eq!(out, expect, "after {walked_first} slices");
        }
    }

    /// Waits until the database's lazy-free thread has freed `n` objects.
    fn freed(db: &Db, n: u64) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while db.freer.freed() < n {
            assert!(std::time::Instant::now() < deadline, "never freed");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert_eq!(db.freer.pending(), 0);
    }

    fn big_set() -> Value {
        let mut set = crate::store::set::Set::Ints(Vec::new());
        for i in 0..100 {
            set.add(format!("m{i}").as_bytes(), 0);
        }
        Value::Set(Box::new(set))
    }

    /// Each deletion path frees lazily only as its directive says:
    /// overwrites (server-del), expiry (lazy and active), deletes, flushes.
    #[test]
    fn deletions_free_lazily_as_the_directives_say() {
        let mut db = Db::default();
        db.insert(&k("s"), big_set(), 0);
        db.insert(&k("s"), Value::Str(k("v")), 0);
        db.insert(&k("e"), big_set(), 5);
        assert!(db.lookup(b"e", 10).is_none());
        assert!(db.delete(b"s", false));
        assert_eq!((db.freer.pending(), db.freer.freed()), (0, 0));
        db.lazy.server_del = true;
        db.lazy.expire = true;
        db.insert(&k("s"), big_set(), 0);
        db.insert(&k("s"), Value::Str(k("v")), 0);
        freed(&db, 1);
        db.insert(&k("e"), big_set(), 5);
        assert!(db.lookup(b"e", 10).is_none());
        freed(&db, 2);
        db.insert(&k("e"), big_set(), 5);
        db.expire_step(10, 10);
        assert!(db.peek(b"e").is_none(), "active expiry removed it");
        freed(&db, 3);
        db.insert(&k("d"), big_set(), 0);
        assert!(db.delete(b"d", true));
        freed(&db, 4);
        db.clear_with(true);
        freed(&db, 5);
        assert!(db.is_empty());
    }

    #[test]
    fn lazy_and_active_expiry() {
        let mut db = Db::default();
        db.insert(&k("a"), Value::Str(k("1")), 100);
        db.insert(&k("b"), Value::Str(k("2")), 200);
        db.insert(&k("c"), Value::Str(k("3")), 0);
        assert!(db.lookup(b"a", 99).is_some());
        // Alive through its deadline millisecond, as in Redis.
        assert!(db.lookup(b"a", 100).is_some());
        assert!(db.lookup(b"a", 101).is_none());
        assert_eq!(db.expires_len(), 1);
        assert_eq!(db.expired_count, 1);
        // Passes over a's index entry (already removed lazily).
        assert_eq!(db.expire_step(150, 10), 1);
        assert_eq!(db.len(), 2);
        assert_eq!(db.expire_step(250, 10), 1);
        assert_eq!(db.len(), 1);
        assert_eq!(db.expired_count, 2);
        assert_eq!(db.expire_step(1000, 10), 0);
    }

    #[test]
    fn deadline_changes_keep_index_in_step() {
        let mut db = Db::default();
        db.insert(&k("a"), Value::Str(k("1")), 100);
        db.set_expire(b"a", 300);
        db.insert(&k("a"), Value::Str(k("2")), 0);
        assert_eq!(db.expires_len(), 0);
        db.set_expire(b"a", 50);
        assert_eq!(db.next_deadline(), Some(50));
        db.remove(b"a");
        assert_eq!(db.expires_len(), 0);
        assert_eq!(db.expire_step(1000, 100), 3, "three stale index entries passed over");
        assert_eq!(db.expired_count, 0);
    }

    #[test]
    fn stale_index_entries_are_bounded() {
        let mut db = Db::default();
        db.insert(&k("a"), Value::Str(k("1")), 10);
        for at in 11..100_000 {
            db.set_expire(b"a", at);
        }
        assert!(db.index_len <= 2 * db.with_deadline + 1024, "{}", db.index_len);
        let entries = db.index_len;
        assert_eq!(db.expire_step(200_000, 10_000), entries);
        assert_eq!(db.len(), 0);
        assert_eq!(db.expired_count, 1);
    }
}
