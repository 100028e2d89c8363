//! Lazy free (Redis's `lazyfree.c`): values with many allocations, and
//! whole key tables a FLUSHALL/FLUSHDB ASYNC let go, are dropped on a
//! background freeing thread instead of under the engine lock, so a 1M-
//! element set deleted by UNLINK costs the command an O(1) hand-off.
//!
//! What goes: a value whose free effort ([`effort`]) is above
//! [`THRESHOLD`] (Redis's `LAZYFREE_THRESHOLD`), when the deletion is lazy
//! — UNLINK, FLUSH ASYNC, or the `lazyfree-lazy-*` directive that governs
//! it ([`Lazy`]); smaller values are freed at once, which is cheaper than
//! the hand-off. Memory freed on the thread is accounted exactly: the
//! counting allocator ([`crate::alloc`]) is one process-wide counter, so
//! `used_memory` falls as the thread frees, and counts what is still
//! pending until then (as Redis's does).
//!
//! One thread serves the process (Redis's `BIO_LAZY_FREE`), started on
//! first use and living as long as the process (it holds nothing but its
//! queue). Each server counts its own jobs ([`LazyFree`]): INFO's
//! `lazyfree_pending_objects` and `lazyfreed_objects`. What it must never
//! do: run a destructor that takes the engine lock, or free anything the
//! keyspace still refers to (a job owns what it frees).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, OnceLock};

use crate::store::item::Item;
use crate::store::ValueRef;

/// Free effort above which a lazy deletion hands the value to the thread
/// (Redis's `LAZYFREE_THRESHOLD`).
pub(crate) const THRESHOLD: usize = 64;

/// The freeing thread's name (as `top -H` shows it).
const THREAD_NAME: &str = "coordis-lazyfree";

/// Something the thread drops, and how many objects it counts for.
struct Job {
    garbage: Box<dyn Send>,
    objects: u64,
    counters: Arc<Counters>,
}

/// One server's lazy-free figures.
#[derive(Debug, Default)]
struct Counters {
    /// Objects handed to the thread and not freed yet.
    pending: AtomicU64,
    /// Objects the thread freed since the start (or CONFIG RESETSTAT).
    freed: AtomicU64,
}

/// One server's handle on the freeing thread (cheap to clone: each
/// database holds one, so expiry inside the keyspace can free lazily).
#[derive(Clone, Debug, Default)]
pub(crate) struct LazyFree {
    counters: Arc<Counters>,
}

/// Which deletions are lazy (the `lazyfree-lazy-*` directives), stamped
/// into every database at the start of a batch with the clock.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Lazy {
    /// `lazyfree-lazy-eviction`: keys evicted under `maxmemory`.
    pub eviction: bool,
    /// `lazyfree-lazy-expire`: keys removed for a past deadline.
    pub expire: bool,
    /// `lazyfree-lazy-server-del`: values a command overwrites or deletes
    /// as a side effect (SET over a set, RENAME over a key, ...).
    pub server_del: bool,
    /// `lazyfree-lazy-user-del`: DEL (and GETDEL) as UNLINK.
    pub user_del: bool,
    /// `lazyfree-lazy-user-flush`: FLUSHALL/FLUSHDB without SYNC/ASYNC.
    pub user_flush: bool,
}

impl Lazy {
    /// The directives' current values.
    pub(crate) fn of(config: &crate::config::Config) -> Lazy {
        config.memory.lazy
    }
}

/// The queue to the thread, `None` if it could not be started (then
/// everything is freed at once).
fn queue() -> Option<&'static Sender<Job>> {
    static QUEUE: OnceLock<Option<Sender<Job>>> = OnceLock::new();
    QUEUE
        .get_or_init(|| {
            let (tx, rx) = channel::<Job>();
            let spawned = std::thread::Builder::new().name(THREAD_NAME.into()).spawn(move || {
                for job in rx {
                    drop(job.garbage);
                    job.counters.pending.fetch_sub(job.objects, Ordering::Relaxed);
                    job.counters.freed.fetch_add(job.objects, Ordering::Relaxed);
                }
            });
            spawned.ok().map(|_| tx)
        })
        .as_ref()
}

/// The work freeing `value` takes, in allocations or a figure
/// proportional to them (Redis's `lazyfreeGetFreeEffort`): 1 for a value
/// in one allocation (strings, listpacks, intsets), the element count of
/// a hashtable or skiplist, the node count of a list or stream (and a
/// stream's consumer groups with the first group's pending entries).
pub(crate) fn effort(value: ValueRef<'_>) -> usize {
    match value {
        ValueRef::Str(_) => 1,
        ValueRef::List(l) => l.node_count(),
        ValueRef::Set(crate::store::set::Set::Table(t)) => t.len(),
        ValueRef::Set(crate::store::set::Set::Ints(_)) => 1,
        ValueRef::ZSet(z) if z.encoding() == "skiplist" => z.len(),
        ValueRef::ZSet(_) => 1,
        ValueRef::Hash(crate::store::hash::HashRef::Table(t)) => t.len(),
        ValueRef::Hash(crate::store::hash::HashRef::Listpack(_)) => 1,
        ValueRef::Stream(s) => {
            let groups = s.group_count();
            let first_pel = s.groups().next().map_or(0, |(_, g)| g.pending.len());
            s.nodes() + groups * (1 + first_pel)
        }
    }
}

impl LazyFree {
    /// Frees `item` (a key removed from its table): on the thread when
    /// `lazy` and its value is worth it, here otherwise (Redis's
    /// `freeObjAsync` when lazy, `decrRefCount` when not).
    pub(crate) fn free(&self, item: Item, lazy: bool) {
        if lazy && effort(item.value()) > THRESHOLD {
            self.send(Box::new(item), 1);
        }
    }

    /// Frees a whole key table of `objects` keys on the thread (Redis's
    /// `emptyDbAsync`: always, whatever its size).
    pub(crate) fn free_table(&self, table: Box<dyn Send>, objects: u64) {
        self.send(table, objects);
    }

    /// Frees a collection of `objects` entries that is not a key (the
    /// script cache, the function libraries): on the thread when `lazy` and
    /// it holds more than [`THRESHOLD`] entries, here otherwise (Redis's
    /// `freeLuaScriptsAsync` and `freeFunctionsAsync`).
    pub(crate) fn free_collection(&self, garbage: Box<dyn Send>, objects: usize, lazy: bool) {
        if lazy && objects > THRESHOLD {
            self.send(garbage, objects as u64);
        }
    }

    fn send(&self, garbage: Box<dyn Send>, objects: u64) {
        let Some(queue) = queue() else {
            return;
        };
        self.counters.pending.fetch_add(objects, Ordering::Relaxed);
        let job = Job {
            garbage,
            objects,
            counters: self.counters.clone(),
        };
        if let Err(back) = queue.send(job) {
            // The thread is gone: free here and undo the count.
            let job = back.0;
            job.counters.pending.fetch_sub(job.objects, Ordering::Relaxed);
            drop(job.garbage);
        }
    }

    /// Objects handed to the thread and not freed yet
    /// (`lazyfree_pending_objects`).
    pub(crate) fn pending(&self) -> u64 {
        self.counters.pending.load(Ordering::Relaxed)
    }

    /// Objects the thread has freed (`lazyfreed_objects`).
    pub(crate) fn freed(&self) -> u64 {
        self.counters.freed.load(Ordering::Relaxed)
    }

    /// CONFIG RESETSTAT (Redis's `lazyfreeResetStats`: the freed count only).
    pub(crate) fn reset_stats(&self) {
        self.counters.freed.store(0, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Value;
    use bytes::Bytes;

    fn big_set(n: usize) -> Value {
        let mut set = crate::store::set::Set::Ints(Vec::new());
        for i in 0..n {
            set.add(format!("m{i}").as_bytes(), usize::MAX);
        }
        Value::Set(Box::new(set))
    }

    fn wait_freed(lf: &LazyFree, n: u64) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while lf.freed() < n {
            assert!(std::time::Instant::now() < deadline, "the thread never freed the job");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    #[test]
    fn only_large_values_go_to_the_thread_and_only_when_lazy() {
        let lf = LazyFree::default();
        lf.free(Item::new(b"s", Value::Str(Bytes::from_static(b"v")), 0), true);
        lf.free(Item::new(b"small", big_set(THRESHOLD), 0), true);
        lf.free(Item::new(b"eager", big_set(THRESHOLD + 1), 0), false);
        assert_eq!((lf.pending(), lf.freed()), (0, 0));
        lf.free(Item::new(b"big", big_set(THRESHOLD + 1), 0), true);
        wait_freed(&lf, 1);
        assert_eq!((lf.pending(), lf.freed()), (0, 1));
        lf.free_table(Box::new(vec![1u8; 10]), 7);
        wait_freed(&lf, 8);
        assert_eq!(lf.pending(), 0);
        lf.reset_stats();
        assert_eq!(lf.freed(), 0);
    }
}
