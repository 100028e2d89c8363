//! `maxmemory`: the eight policies and Redis 7.0.15's approximations of
//! them (`evict.c`): keys sampled `maxmemory-samples` at a time from every
//! database into a 16-entry pool ordered by score (idle time under LRU,
//! inverted frequency under LFU, nearness of the deadline under
//! volatile-ttl), the best taken; random policies take a random key from
//! the next database in turn. [`perform`] runs before a command is admitted
//! (Redis's `performEvictions` in `processCommand`) and after CONFIG SET
//! lowers the limit; its time is bounded by `maxmemory-eviction-tenacity`
//! as Redis bounds it (what is left is done before the next command, where
//! Redis runs a timer: a command in between is not refused).
//!
//! An evicted key is deleted as DEL would (WATCH, blocked clients, client
//! tracking), raises the `evicted` keyspace event and propagates as DEL,
//! as an expired key does. What this module must never do: evict when
//! `maxmemory` is 0, or evict for a caller that is not a client's command
//! (EXEC, scripts and the test-control plane were admitted already).

use bytes::Bytes;

use crate::cmd::Ctx;
use crate::store::access;

/// Entries in the eviction pool (Redis's `EVPOOL_SIZE`).
pub(crate) const POOL_SIZE: usize = 16;

/// `maxmemory-policy`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Policy {
    /// The least recently used of the keys with a deadline.
    VolatileLru,
    /// The least frequently used of the keys with a deadline.
    VolatileLfu,
    /// Any key with a deadline.
    VolatileRandom,
    /// The key with the nearest deadline.
    VolatileTtl,
    /// The least recently used key.
    AllkeysLru,
    /// The least frequently used key.
    AllkeysLfu,
    /// Any key.
    AllkeysRandom,
    /// Nothing: writes that would grow memory get `-OOM`.
    #[default]
    NoEviction,
}

impl Policy {
    /// Every policy with its directive text, in redis.conf's order.
    pub(crate) const ALL: [(Policy, &'static str); 8] = [
        (Policy::VolatileLru, "volatile-lru"),
        (Policy::VolatileLfu, "volatile-lfu"),
        (Policy::VolatileRandom, "volatile-random"),
        (Policy::VolatileTtl, "volatile-ttl"),
        (Policy::AllkeysLru, "allkeys-lru"),
        (Policy::AllkeysLfu, "allkeys-lfu"),
        (Policy::AllkeysRandom, "allkeys-random"),
        (Policy::NoEviction, "noeviction"),
    ];

    /// The directive's text (CONFIG GET, INFO `maxmemory_policy`).
    pub fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(p, _)| *p == self)
            .map_or("noeviction", |(_, n)| n)
    }

    /// The policy named `text` (any case).
    pub fn parse(text: &str) -> Option<Policy> {
        Self::ALL
            .iter()
            .find(|(_, n)| n.eq_ignore_ascii_case(text))
            .map(|(p, _)| *p)
    }

    /// Redis's `MAXMEMORY_FLAG_LFU`: accesses count frequencies.
    pub fn lfu(self) -> bool {
        matches!(self, Policy::VolatileLfu | Policy::AllkeysLfu)
    }

    /// Redis's `MAXMEMORY_FLAG_LRU`.
    pub fn lru(self) -> bool {
        matches!(self, Policy::VolatileLru | Policy::AllkeysLru)
    }

    /// Redis's `MAXMEMORY_FLAG_ALLKEYS`: every key may go, not only those
    /// with a deadline.
    pub fn allkeys(self) -> bool {
        matches!(self, Policy::AllkeysLru | Policy::AllkeysLfu | Policy::AllkeysRandom)
    }

    /// Keys are chosen through the pool (not at random).
    fn pooled(self) -> bool {
        self.lru() || self.lfu() || self == Policy::VolatileTtl
    }
}

/// One pool entry: a candidate key and its score (higher goes first).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Candidate {
    /// The database index.
    pub db: usize,
    pub key: Bytes,
    /// Idle milliseconds (LRU), 255 minus the frequency (LFU), or
    /// `u64::MAX` minus the deadline (volatile-ttl).
    pub score: u64,
}

/// The eviction state kept between commands (Redis's `EvictionPoolLRU`
/// and the random policies' `next_db`), and INFO's counter.
#[derive(Debug, Default)]
pub(crate) struct Evictor {
    /// Ascending by score: the best candidate is the last (Redis's order).
    pool: Vec<Candidate>,
    /// The database the random policies try next.
    next_db: usize,
    /// Keys evicted (INFO `evicted_keys`).
    pub evicted_keys: u64,
}

/// What [`perform`] found (Redis's `EVICT_OK`, `EVICT_RUNNING`, `EVICT_FAIL`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Under the limit (or no limit).
    Ok,
    /// Over the limit, the time bound reached: continued before the next command.
    Running,
    /// Over the limit and nothing may go (noeviction, or no candidate key).
    Fail,
}

/// The limit that applies now (0: none) and the bytes counted against
/// it: used memory less what Redis leaves out (`mem_not_counted_for_evict`).
fn over_limit(ctx: &Ctx) -> Option<u64> {
    let max = ctx.server.config.memory.maxmemory;
    if max == 0 {
        return None;
    }
    // Redis's `performEvictions` on a replica under `replica-ignore-maxmemory
    // yes`: no eviction and no OOM (the primary's stream decides its keys).
    if ctx.server.config.memory.replica_ignores && ctx.server.replica.is_replica() {
        return None;
    }
    let used = crate::process::used_memory();
    if used <= max {
        return None;
    }
    let counted = used.saturating_sub(not_counted(ctx));
    (counted > max).then(|| counted - max)
}

/// Memory not counted against `maxmemory` (Redis's
/// `freeMemoryGetNotCountedMemory`): the AOF's buffer, the replication
/// buffer past the backlog's size that replicas still need, and the effects
/// recorded and not yet handed to those two.
pub(crate) fn not_counted(ctx: &Ctx) -> u64 {
    ctx.server.effects.pending_bytes() as u64
        + crate::cmd::memory::aof_buffer(ctx.server)
        + ctx.server.repl.buffer_memory().replicas
}

/// Redis's `evictionTimeLimitUs` for a tenacity of `tenacity`.
fn time_limit_us(tenacity: u32) -> u64 {
    const LINEAR_STEP_US: u64 = 50;
    const LINEAR_UP_TO: u32 = 10;
    const BASE_US: f64 = 500.0;
    const GROWTH: f64 = 1.15;
    const UNBOUNDED: u32 = 100;
    if tenacity <= LINEAR_UP_TO {
        LINEAR_STEP_US * tenacity as u64
    } else if tenacity < UNBOUNDED {
        (BASE_US * GROWTH.powf((tenacity - LINEAR_UP_TO) as f64)) as u64
    } else {
        u64::MAX
    }
}

/// How often (in evicted keys) the time bound is checked, as Redis's.
const CHECK_EVERY: u64 = 16;

/// Evicts keys until used memory is under `maxmemory` (Redis's
/// `performEvictions`; see the module docs). A cycle that may evict (not
/// under `noeviction`) is the `eviction-cycle` latency event past
/// `latency-monitor-threshold`.
pub(crate) fn perform(ctx: &mut Ctx) -> Outcome {
    let Some(to_free) = over_limit(ctx) else {
        return Outcome::Ok;
    };
    if ctx.server.config.memory.policy == Policy::NoEviction {
        return Outcome::Fail;
    }
    let started = LatencyMonitor::start();
    let outcome = evict_until(ctx, to_free, std::time::Instant::now());
    started.end(ctx, "eviction-cycle");
    outcome
}

/// Redis's `latencyStartMonitor` / `latencyEndMonitor` around eviction's
/// work: the difference of two wall-clock milliseconds, so work of less
/// than a millisecond that crosses one counts as 1 ms, as in Redis.
struct LatencyMonitor(u64);

impl LatencyMonitor {
    fn start() -> LatencyMonitor {
        LatencyMonitor(wall_ms())
    }

    /// Records the event `event` of the work since [`LatencyMonitor::start`].
    fn end(self, ctx: &mut Ctx, event: &'static str) {
        let ms = wall_ms().saturating_sub(self.0);
        crate::cmd::observe::latency_event(ctx.server, event, ctx.now, ms);
    }
}

/// Unix time in milliseconds on the machine's clock (not the server
/// clock a test may hold still: eviction's work takes real time).
fn wall_ms() -> u64 {
    crate::store::Clock::now_ms(&crate::store::SystemClock)
}

/// [`perform`]'s loop: keys evicted until `to_free` bytes are freed, or
/// the time bound since `started` is reached.
fn evict_until(ctx: &mut Ctx, to_free: u64, started: std::time::Instant) -> Outcome {
    let memory = &ctx.server.config.memory;
    let limit_us = time_limit_us(memory.tenacity);
    let lazy = memory.lazy.eviction;
    let mut freed: i64 = 0;
    let mut evicted = 0u64;
    while freed < to_free as i64 {
        let Some((db, key)) = next_victim(ctx) else {
            return wait_for_lazy_free(ctx, started, limit_us);
        };
        let before = crate::process::used_memory() as i64;
        evict(ctx, db, &key, lazy);
        freed += before - crate::process::used_memory() as i64;
        evicted += 1;
        if evicted.is_multiple_of(CHECK_EVERY) {
            // Lazily evicted values free on the thread, after `freed` was
            // measured: the memory may be under the limit already.
            if lazy && over_limit(ctx).is_none() {
                break;
            }
            if started.elapsed().as_micros() as u64 > limit_us {
                return Outcome::Running;
            }
        }
    }
    Outcome::Ok
}

/// Nothing left to evict: values the lazy-free thread is still freeing
/// may bring the memory under the limit, so wait for them a little (up
/// to the eviction's time bound, as Redis's `cant_free`): the wait is the
/// `eviction-lazyfree` latency event.
fn wait_for_lazy_free(ctx: &mut Ctx, started: std::time::Instant, limit_us: u64) -> Outcome {
    const POLL_US: u64 = 1000;
    let waiting = LatencyMonitor::start();
    let mut outcome = Outcome::Fail;
    while ctx.server.lazyfree.pending() > 0 && (started.elapsed().as_micros() as u64) < limit_us {
        if over_limit(ctx).is_none() {
            outcome = Outcome::Ok;
            break;
        }
        std::thread::sleep(std::time::Duration::from_micros(limit_us.min(POLL_US)));
    }
    waiting.end(ctx, "eviction-lazyfree");
    outcome
}

/// Deletes one key as eviction does: as DEL would (UNLINK with
/// `lazyfree-lazy-eviction`), with its event and its propagated deletion.
/// The deletion is the `eviction-del` latency event (timed only while
/// `latency-monitor-threshold` is set).
fn evict(ctx: &mut Ctx, db: usize, key: &Bytes, lazy: bool) {
    let started = (ctx.server.config.latency_monitor_threshold > 0).then(LatencyMonitor::start);
    let deleted = ctx.dbs[db].delete(key, lazy);
    if let Some(started) = started {
        started.end(ctx, "eviction-del");
    }
    if !deleted {
        return;
    }
    ctx.server.evictor.evicted_keys += 1;
    let command: &'static [u8] = if lazy { b"UNLINK" } else { b"DEL" };
    let del = vec![Bytes::from_static(command), key.clone()];
    ctx.server.effects.record_alone(db, del);
    ctx.notify_in(db, crate::notify::EVICTED, "evicted", key);
}

/// The next key to evict (`performEvictions`' choice), or none.
fn next_victim(ctx: &mut Ctx) -> Option<(usize, Bytes)> {
    let policy = ctx.server.config.memory.policy;
    if policy.pooled() {
        loop {
            if !populate(ctx) {
                return None;
            }
            // Best first; a key gone since it was sampled is a ghost.
            while let Some(c) = ctx.server.evictor.pool.pop() {
                let db = &ctx.dbs[c.db];
                if db.peek(&c.key).is_some_and(|i| policy.allkeys() || i.expire_at() != 0) {
                    return Some((c.db, c.key));
                }
            }
        }
    }
    let n = ctx.dbs.len();
    for _ in 0..n {
        ctx.server.evictor.next_db = (ctx.server.evictor.next_db + 1) % n;
        let i = ctx.server.evictor.next_db;
        let mut one = Vec::with_capacity(1);
        ctx.dbs[i].sample(1, !policy.allkeys(), &mut one);
        if one.is_empty() && !policy.allkeys() {
            if let Some(key) = ctx.dbs[i].earliest_volatile() {
                return Some((i, key));
            }
        }
        if let Some((key, _, _)) = one.pop() {
            return Some((i, key));
        }
    }
    None
}

/// Samples every database into the pool (`evictionPoolPopulate` over the
/// databases). False when no database has a key the policy may take.
fn populate(ctx: &mut Ctx) -> bool {
    let memory = &ctx.server.config.memory;
    let (policy, samples) = (memory.policy, memory.samples as usize);
    let mode = access_mode(&ctx.server.config);
    let now = ctx.now;
    let mut any = false;
    let mut sampled = Vec::with_capacity(samples);
    for (i, db) in ctx.dbs.iter().enumerate() {
        let keys = if policy.allkeys() { db.len() } else { db.expires_len() };
        if keys == 0 {
            continue;
        }
        any = true;
        sampled.clear();
        db.sample(samples, !policy.allkeys(), &mut sampled);
        if sampled.is_empty() {
            // Few volatile keys among many: the deadline index has one.
            if let Some(key) = db.earliest_volatile() {
                let at = db.peek(&key).map_or(0, |i| i.expire_at());
                sampled.push((key, 0, at));
            }
        }
        for (key, word, expire_at) in sampled.drain(..) {
            let score = if policy == Policy::VolatileTtl {
                u64::MAX - expire_at
            } else {
                access::idle_score(word, mode, now)
            };
            insert(&mut ctx.server.evictor.pool, Candidate { db: i, key, score });
        }
    }
    any
}

/// Inserts into the pool as Redis does: a candidate worse than all of a
/// full pool is dropped; a full pool drops its worst to make room.
fn insert(pool: &mut Vec<Candidate>, c: Candidate) {
    if pool.iter().any(|p| p.db == c.db && p.key == c.key) {
        return;
    }
    let k = pool.iter().position(|p| p.score >= c.score).unwrap_or(pool.len());
    if pool.len() < POOL_SIZE {
        pool.insert(k, c);
    } else if k > 0 {
        pool.remove(0);
        pool.insert(k - 1, c);
    }
}

/// The access mode the configuration asks for ([`access::Mode`]).
pub(crate) fn access_mode(config: &crate::config::Config) -> access::Mode {
    let m = &config.memory;
    access::Mode {
        lfu: m.policy.lfu(),
        log_factor: m.lfu_log_factor,
        decay_time: m.lfu_decay_time,
    }
}

/// The candidates the next eviction would consider, best first, without
/// evicting (the test-control plane's `COORDIS.MEMORY CANDIDATES`): the
/// first is the key the next eviction takes; after it, the pool one round
/// of sampling leaves (later evictions of the same run sample again, so
/// they may take a fresh key before these). Random policies answer the
/// keys they would draw in turn, the first being the next taken.
///
/// Asking changes nothing: the generator's state (seeded by
/// `COORDIS.SERVER SEED`, or the thread's own), the pool and the random
/// policies' next database are put back as they were, so the eviction
/// that follows draws the same samples.
pub(crate) fn candidates(ctx: &mut Ctx, count: usize) -> Vec<Candidate> {
    let rng = fastrand::get_seed();
    let pool = ctx.server.evictor.pool.clone();
    let next_db = ctx.server.evictor.next_db;
    let out = predict(ctx, count);
    fastrand::seed(rng);
    ctx.server.evictor.pool = pool;
    ctx.server.evictor.next_db = next_db;
    out
}

/// [`candidates`]' answer, drawing from the generator and filling the pool.
fn predict(ctx: &mut Ctx, count: usize) -> Vec<Candidate> {
    let policy = ctx.server.config.memory.policy;
    if policy == Policy::NoEviction {
        return Vec::new();
    }
    if policy.pooled() {
        populate(ctx);
        let policy_allows = |ctx: &Ctx, c: &Candidate| {
            ctx.dbs[c.db]
                .peek(&c.key)
                .is_some_and(|i| policy.allkeys() || i.expire_at() != 0)
        };
        let pool = ctx.server.evictor.pool.clone();
        return pool
            .into_iter()
            .rev()
            .filter(|c| policy_allows(ctx, c))
            .take(count)
            .collect();
    }
    let mut out = Vec::new();
    while out.len() < count {
        let Some((db, key)) = next_victim(ctx) else {
            break;
        };
        if out.iter().any(|c: &Candidate| c.db == db && c.key == key) {
            break;
        }
        out.push(Candidate { db, key, score: 0 });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(score: u64) -> Candidate {
        Candidate {
            db: 0,
            key: Bytes::from(score.to_string()),
            score,
        }
    }

    #[test]
    fn the_pool_keeps_the_best_sixteen_in_ascending_order() {
        let mut pool = Vec::new();
        for s in [5, 1, 9, 3, 7, 30, 2, 8, 6, 4, 10, 11, 12, 13, 14, 15, 16, 0, 40] {
            insert(&mut pool, c(s));
        }
        let scores: Vec<u64> = pool.iter().map(|c| c.score).collect();
        assert_eq!(scores, vec![3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 30, 40]);
        // Worse than every entry of a full pool: dropped.
        insert(&mut pool, c(1));
        assert_eq!(pool[0].score, 3);
    }

    #[test]
    fn tenacity_bounds_as_redis() {
        assert_eq!(time_limit_us(0), 0);
        assert_eq!(time_limit_us(10), 500);
        assert_eq!(time_limit_us(11), 575);
        assert_eq!(time_limit_us(100), u64::MAX);
    }

    #[test]
    fn policies_round_trip_their_names() {
        for (p, name) in Policy::ALL {
            assert_eq!(Policy::parse(name), Some(p));
            assert_eq!(p.name(), name);
        }
        assert_eq!(Policy::parse("ALLKEYS-LRU"), Some(Policy::AllkeysLru));
    }
}
