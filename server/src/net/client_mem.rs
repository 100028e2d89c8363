//! Client memory: the buffer figures a connection task publishes for the
//! engine ([`ConnMem`]), what CLIENT LIST / CLIENT INFO make of them
//! (`qbuf`, `argv-mem`, `multi-mem`, `obl`, `oll`, `omem`, `tot-mem`), the
//! output buffer limits of the normal and pub/sub classes
//! (`client-output-buffer-limit`, Redis's `checkClientOutputBufferLimits`)
//! and client eviction under `maxmemory-clients` (Redis's `evictClients`).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use bytes::Bytes;

use crate::config::Config;
use crate::net::clients::{ClientState, ConnSignal, Outbox};
use crate::repl::OutputLimit;
use crate::state::ServerState;

/// The buffers a connection task owns, as it last saw them. The engine
/// cannot look at them (they live in the task), so the task stores these
/// after each read, parse and write; relaxed stores, read only by CLIENT
/// LIST, the limits and eviction, which need no exact instant.
#[derive(Debug, Default)]
pub(crate) struct ConnMem {
    /// Bytes read and not yet parsed into a request (`qbuf`).
    qbuf: AtomicUsize,
    /// The read buffer's capacity (`qbuf` + `qbuf-free`).
    qbuf_cap: AtomicUsize,
    /// Bytes of the arguments of a request only partly read (`argv-mem`
    /// of a client that is not the one asking).
    argv_partial: AtomicUsize,
    /// Bytes of replies the task is writing now (`obl`): the batch's one
    /// reply buffer, Redis's static reply buffer.
    obl: AtomicUsize,
    /// The reply buffer's capacity (`rbs`) and the largest batch of
    /// replies it held since it was last freed (`rbp`).
    rbs: AtomicUsize,
    rbp: AtomicUsize,
}

impl ConnMem {
    /// After a read or a parse: the read buffer's length and capacity, and
    /// the arguments of the request in progress.
    pub(crate) fn set_query(&self, len: usize, cap: usize, argv_partial: usize) {
        self.qbuf.store(len, Ordering::Relaxed);
        self.qbuf_cap.store(cap, Ordering::Relaxed);
        self.argv_partial.store(argv_partial, Ordering::Relaxed);
    }

    /// Before a batch's replies are written (`len`), and after (0).
    pub(crate) fn set_writing(&self, len: usize, cap: usize) {
        self.obl.store(len, Ordering::Relaxed);
        self.rbs.store(cap, Ordering::Relaxed);
        if len > self.rbp.load(Ordering::Relaxed) {
            self.rbp.store(len, Ordering::Relaxed);
        }
    }

    /// The reply buffer was freed (it had grown past what is kept).
    pub(crate) fn reset_reply_buffer(&self) {
        self.rbs.store(0, Ordering::Relaxed);
        self.rbp.store(0, Ordering::Relaxed);
    }

    pub(crate) fn obl(&self) -> usize {
        self.obl.load(Ordering::Relaxed)
    }
}

/// Redis's static reply buffer (`PROTO_REPLY_CHUNK_BYTES`, a fresh
/// client's `buf`): replies go there first and only what does not fit is
/// queued in the reply list, whose bytes alone the output limits count
/// (`getClientOutputBufferMemoryUsage`). So a reply of 10 KB passes a 1 KB
/// normal limit in Redis, and here.
const STATIC_REPLY_BYTES: usize = 16 * 1024;

/// The output of `used` bytes pending for a client, as the limits count
/// it: what the static reply buffer cannot hold.
fn counted_output(used: usize) -> usize {
    used.saturating_sub(STATIC_REPLY_BYTES)
}

/// Redis's smallest `maxmemory-clients` (`getClientEvictionLimit`): a
/// smaller one would leave no room to talk to the server at all.
const MIN_CLIENT_EVICTION_LIMIT: u64 = 128 * 1024;

/// Redis's client memory buckets (`CLIENT_MEM_USAGE_BUCKET_MIN_LOG` and
/// `_MAX_LOG`): a client's bucket is log2 of its memory, clamped to these;
/// eviction takes the clients of the highest bucket first.
const BUCKET_MIN_LOG: u32 = 15;
const BUCKET_MAX_LOG: u32 = 33;

/// The output limits of the classes coordis enforces here (the replicas'
/// is the backlog's, [`crate::repl`]) and the client eviction limit, read
/// from the configuration once per change rather than per message.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ClientLimits {
    pub(crate) normal: OutputLimit,
    pub(crate) pubsub: OutputLimit,
    /// Bytes all normal and pub/sub clients may use together before the
    /// largest are evicted (0: no client eviction).
    pub(crate) eviction: u64,
}

impl ClientLimits {
    pub(crate) fn from_config(config: &Config) -> ClientLimits {
        ClientLimits {
            normal: OutputLimit::for_class(config, "normal"),
            pubsub: OutputLimit::for_class(config, "pubsub"),
            eviction: eviction_limit(config),
        }
    }

    /// The limit of `client`'s class: pub/sub while it has a subscription
    /// (Redis's `CLIENT_PUBSUB`), normal otherwise (a MONITOR too, as
    /// Redis's `getClientType` counts it).
    pub(crate) fn of(&self, client: &ClientState) -> &OutputLimit {
        if client.is_subscribed() {
            &self.pubsub
        } else {
            &self.normal
        }
    }
}

/// `maxmemory-clients` in bytes (a percentage is of `maxmemory`; none
/// without one), at least [`MIN_CLIENT_EVICTION_LIMIT`]; 0 when off.
fn eviction_limit(config: &Config) -> u64 {
    let text = config
        .ignored
        .get("maxmemory-clients")
        .map(String::as_str)
        .unwrap_or("0");
    let bytes = match text.strip_suffix('%') {
        Some(percent) => {
            let percent: f64 = percent.parse().unwrap_or(0.0);
            (config.memory.maxmemory as f64 * percent / 100.0) as u64
        }
        None => text.parse().unwrap_or(0),
    };
    if bytes == 0 {
        0
    } else {
        bytes.max(MIN_CLIENT_EVICTION_LIMIT)
    }
}

/// Where a client's soft limit stands: the server-clock second it first
/// went over (Redis's `obuf_soft_limit_reached_time`), 0 while under.
#[derive(Debug, Default)]
pub(crate) struct SoftLimitState(AtomicU64);

impl SoftLimitState {
    /// Whether `used` bytes of pending output break `limit` now (Redis's
    /// rule: at or over the hard limit; or at or over the soft limit, seen
    /// continuously for more than its seconds, counted on the server
    /// clock), noting when the soft limit was first passed.
    pub(crate) fn breaks(&self, used: usize, now_ms: u64, limit: &OutputLimit) -> bool {
        let used = used as u64;
        if limit.hard != 0 && used >= limit.hard {
            return true;
        }
        if limit.soft != 0 && used >= limit.soft {
            // Stored as second + 1, so the zeroth second is not "under".
            let now_s = now_ms / 1000 + 1;
            let since = self.0.load(Ordering::Relaxed);
            if since == 0 {
                self.0.store(now_s, Ordering::Relaxed);
                return false;
            }
            return now_s - since > limit.soft_secs;
        }
        self.0.store(0, Ordering::Relaxed);
        false
    }
}

/// What one client uses, in the units CLIENT LIST shows (bytes).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct ClientMemory {
    pub(crate) qbuf: usize,
    pub(crate) qbuf_free: usize,
    pub(crate) argv_mem: usize,
    pub(crate) multi_mem: usize,
    pub(crate) rbs: usize,
    pub(crate) rbp: usize,
    pub(crate) obl: usize,
    pub(crate) oll: usize,
    pub(crate) omem: usize,
    pub(crate) tot_mem: usize,
}

/// The fixed part every client costs: its engine state and what it shares
/// with its connection task.
const CLIENT_FIXED: usize =
    std::mem::size_of::<ClientState>() + std::mem::size_of::<Outbox>() + std::mem::size_of::<ConnSignal>();

/// Bytes of a list of arguments: their lengths plus a handle each (Redis
/// counts an `robj*` per argument in `multi-mem`; ours is a [`Bytes`]).
fn args_mem<'a>(args: impl IntoIterator<Item = &'a Bytes>) -> usize {
    args.into_iter().map(|a| a.len() + std::mem::size_of::<Bytes>()).sum()
}

/// `client`'s memory as CLIENT LIST reports it and eviction counts it.
pub(crate) fn measure(client: &ClientState) -> ClientMemory {
    let mem = &client.outbox.mem;
    let qbuf = mem.qbuf.load(Ordering::Relaxed);
    let qbuf_cap = mem.qbuf_cap.load(Ordering::Relaxed).max(qbuf);
    // The command running now (CLIENT LIST asked by this client), else
    // the arguments of a request still arriving.
    let argv_mem = if client.argv_mem != 0 {
        client.argv_mem
    } else {
        mem.argv_partial.load(Ordering::Relaxed)
    };
    let multi_mem = client
        .multi
        .as_ref()
        .map_or(0, |queued| queued.iter().map(args_mem).sum());
    let obl = mem.obl();
    let (oll, omem) = client.outbox.backlog();
    let rbs = mem.rbs.load(Ordering::Relaxed);
    let rbp = mem.rbp.load(Ordering::Relaxed);
    let handle = std::mem::size_of::<Bytes>();
    let subscriptions =
        (client.channels.capacity() + client.patterns.capacity() + client.shard_channels.capacity()) * handle;
    let watched = client.watched.capacity() * std::mem::size_of::<crate::net::clients::WatchedKey>();
    let tot_mem = CLIENT_FIXED + qbuf_cap + argv_mem + multi_mem + watched + rbs.max(obl) + omem + subscriptions;
    ClientMemory {
        qbuf,
        qbuf_free: qbuf_cap - qbuf,
        argv_mem,
        multi_mem,
        rbs,
        rbp,
        obl,
        oll,
        omem,
        tot_mem,
    }
}

/// What the normal and pub/sub clients use together, `current` (the
/// client whose batch runs) included: INFO's `mem_clients_normal` and
/// MEMORY STATS' `clients.normal`.
pub(crate) fn normal_clients_total(state: &ServerState, current: &ClientState) -> u64 {
    clients_total(state, current, false)
}

/// What the replicas' connections use together (part of INFO's
/// `mem_clients_slaves`).
pub(crate) fn replica_clients_total(state: &ServerState, current: &ClientState) -> u64 {
    clients_total(state, current, true)
}

fn clients_total(state: &ServerState, current: &ClientState, replicas: bool) -> u64 {
    state
        .clients
        .values()
        .chain(std::iter::once(current))
        .filter(|c| c.replica == replicas)
        .map(|c| measure(c).tot_mem as u64)
        .sum()
}

/// Redis's bucket of a client using `mem` bytes (`getMemUsageBucket`).
fn bucket(mem: usize) -> u32 {
    let bits = usize::BITS - mem.leading_zeros();
    bits.clamp(BUCKET_MIN_LOG, BUCKET_MAX_LOG) - BUCKET_MIN_LOG
}

/// Whether eviction may take `client` (Redis's `clientEvictionAllowed`):
/// normal and pub/sub clients without CLIENT NO-EVICT; not a replica.
fn evictable(client: &ClientState) -> bool {
    !client.no_evict && !client.replica && !client.signal.is_closed()
}

/// Reads the client limits from the configuration again (at start and
/// when `client-output-buffer-limit`, `maxmemory-clients` or `maxmemory`
/// change) and tells the connection tasks whether eviction is on.
pub(crate) fn configure(state: &mut ServerState) {
    state.client_limits = ClientLimits::from_config(&state.config);
    state
        .shared
        .client_eviction
        .store(state.client_limits.eviction != 0, Ordering::Relaxed);
}

/// Seconds of history behind INFO's `client_recent_max_*_buffer`: one slot
/// per second of the server clock (Redis's `CLIENTS_PEAK_MEM_USAGE_SLOTS`).
const PEAK_SLOTS: usize = 8;

/// The biggest input and output buffers seen on any client in each of the
/// last [`PEAK_SLOTS`] seconds (Redis's `ClientsPeakMemInput/Output`),
/// sampled by [`cron`].
#[derive(Debug, Default)]
pub(crate) struct RecentPeaks {
    input: [usize; PEAK_SLOTS],
    output: [usize; PEAK_SLOTS],
    /// The second of the last sample: a test clock's jump empties every
    /// slot it skipped, as a second-by-second cron would have.
    last_sec: u64,
}

impl RecentPeaks {
    /// INFO's `client_recent_max_input_buffer` and `..._output_buffer`.
    pub(crate) fn max(&self) -> (usize, usize) {
        (
            self.input.iter().copied().max().unwrap_or(0),
            self.output.iter().copied().max().unwrap_or(0),
        )
    }

    /// One cron pass at `now_ms`: the slot after this second's is emptied
    /// (it is the oldest; after a jump, each skipped second's is), then
    /// each client's input (its query buffer's allocation and the
    /// arguments of the request arriving) and output (its queued replies,
    /// not the fixed buffer) raise this second's.
    fn sample<'a>(&mut self, now_ms: u64, clients: impl Iterator<Item = &'a ClientState>) {
        let now = now_ms / 1000;
        let first = self
            .last_sec
            .saturating_add(1)
            .max(now.saturating_sub(PEAK_SLOTS as u64))
            .min(now);
        for sec in first..=now {
            let oldest = (sec as usize + 1) % PEAK_SLOTS;
            self.input[oldest] = 0;
            self.output[oldest] = 0;
        }
        self.last_sec = now;
        let slot = now as usize % PEAK_SLOTS;
        for client in clients {
            let m = measure(client);
            self.input[slot] = self.input[slot].max(m.qbuf + m.qbuf_free + m.argv_mem);
            self.output[slot] = self.output[slot].max(m.omem);
        }
    }
}

/// The periodic check (Redis's `clientsCron` and `beforeSleep`): the
/// recent buffer peaks, each client's output against its class's limit on
/// the server clock (a soft limit can outlast its seconds without a new
/// message), then eviction.
pub(crate) fn cron(state: &mut ServerState, now_ms: u64) {
    state.client_peaks.sample(now_ms, state.clients.values());
    let limits = state.client_limits;
    for client in state.clients.values() {
        ask_trim(client, now_ms);
        let used = counted_output(client.outbox.used());
        if used == 0 || client.replica || client.signal.is_closed() {
            continue;
        }
        if client.outbox.soft.breaks(used, now_ms, limits.of(client)) {
            closed_for_output(client, now_ms);
        }
    }
    evict_clients(state, None, now_ms);
}

/// Asks `client`'s task to give back read-buffer space when Redis's
/// `clientsCronResizeQueryBuffer` would: more than 4 KB free, and the
/// client idle for more than 2 s or its buffer past 32 KB (the task knows
/// its recent peak and decides the rest). As Redis's `clientsCron` visits
/// each client once a second, a busy client is asked on one tick in ten
/// (the peak it is trimmed to is then a second's).
fn ask_trim(client: &ClientState, now_ms: u64) {
    let mem = &client.outbox.mem;
    let (qbuf, cap) = (mem.qbuf.load(Ordering::Relaxed), mem.qbuf_cap.load(Ordering::Relaxed));
    if cap.saturating_sub(qbuf) <= 4 * 1024 {
        return;
    }
    let idle_secs = now_ms.saturating_sub(client.last_cmd_ms) / 1000;
    if idle_secs > 2 {
        client.signal.trim_query(crate::net::clients::TRIM_IDLE);
    } else if cap > 32 * 1024 && (now_ms / 100) % 10 == client.id % 10 {
        client.signal.trim_query(crate::net::clients::TRIM_TO_PEAK);
    }
}

/// At a batch's end, before its `batch_out` bytes of replies are written:
/// closes `client` if that output breaks its class's limit (Redis checks
/// as replies are added), counts its memory, and evicts clients when all
/// of them are over `maxmemory-clients`. The caller sees a closed signal.
pub(crate) fn after_batch(state: &mut ServerState, client: &mut ClientState, batch_out: usize, now_ms: u64) {
    if client.replica {
        return;
    }
    let used = counted_output(client.outbox.used() + batch_out);
    if client.outbox.soft.breaks(used, now_ms, state.client_limits.of(client)) {
        closed_for_output(client, now_ms);
        return;
    }
    let limit = state.client_limits.eviction;
    if limit == 0 {
        return;
    }
    let mem = measure(client).tot_mem + batch_out;
    state.clients_mem = (state.clients_mem + mem as u64).saturating_sub(client.last_mem as u64);
    client.last_mem = mem;
    if state.clients_mem >= limit {
        evict_clients(state, Some(client), now_ms);
    }
}

/// A client left: its memory is no longer counted.
pub(crate) fn forget(state: &mut ServerState, client: &ClientState) {
    state.clients_mem = state.clients_mem.saturating_sub(client.last_mem as u64);
}

/// Closes `client` for its output buffer, with Redis's log line.
pub(crate) fn closed_for_output(client: &ClientState, now_ms: u64) {
    tracing::warn!(
        "Client {} closed for overcoming of output buffer limits.",
        client.info_line(now_ms)
    );
    client.signal.close();
}

/// Redis's `evictClients`: while the normal and pub/sub clients together
/// use at least `maxmemory-clients`, closes the evictable ones of the
/// highest memory bucket first (oldest connection first within a bucket,
/// where Redis takes the one that entered the bucket first). `current`
/// is the client whose batch runs (out of the registry). Measures every
/// client: it runs from the cron, and from a batch only when the running
/// total says the limit is reached.
pub(crate) fn evict_clients(state: &mut ServerState, mut current: Option<&mut ClientState>, now_ms: u64) {
    let limit = state.client_limits.eviction;
    if limit == 0 {
        return;
    }
    let mut total: u64 = 0;
    // (bucket, id, memory) of each client eviction may take.
    let mut candidates: Vec<(u32, u64, usize)> = Vec::new();
    for client in state.clients.values_mut().chain(current.as_deref_mut()) {
        if client.replica || client.signal.is_closed() {
            client.last_mem = 0;
            continue;
        }
        let mem = measure(client).tot_mem;
        client.last_mem = mem;
        total += mem as u64;
        if evictable(client) {
            candidates.push((bucket(mem), client.id, mem));
        }
    }
    state.clients_mem = total;
    if total < limit {
        return;
    }
    candidates.sort_by_key(|&(bucket, id, _)| (std::cmp::Reverse(bucket), id));
    for (_, id, mem) in candidates {
        if total < limit {
            break;
        }
        let client = match current.as_deref_mut() {
            Some(c) if c.id == id => Some(c),
            _ => state.clients.get_mut(id),
        };
        let Some(client) = client else { continue };
        tracing::info!("Evicting client: {}", client.info_line(now_ms));
        client.signal.close();
        client.last_mem = 0;
        total -= mem as u64;
        state.evicted_clients += 1;
    }
    state.clients_mem = total;
    if total >= limit {
        tracing::warn!("Over client maxmemory after evicting all evictable clients");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_redis_log2_clamped() {
        assert_eq!(bucket(0), 0);
        assert_eq!(bucket(1 << 15), 1);
        assert_eq!(bucket((1 << 16) - 1), 1);
        assert_eq!(bucket(1 << 16), 2);
        assert_eq!(bucket(usize::MAX), BUCKET_MAX_LOG - BUCKET_MIN_LOG);
    }

    #[test]
    fn soft_limit_must_outlast_its_seconds() {
        let limit = OutputLimit {
            hard: 100,
            soft: 10,
            soft_secs: 2,
        };
        let soft = SoftLimitState::default();
        assert!(soft.breaks(100, 0, &limit), "at the hard limit");
        assert!(!soft.breaks(10, 5_000, &limit), "first seen over the soft limit");
        assert!(!soft.breaks(10, 7_999, &limit), "two seconds over: not more than two");
        assert!(soft.breaks(10, 8_000, &limit), "three seconds over");
        assert!(!soft.breaks(9, 8_000, &limit), "under again");
        assert!(!soft.breaks(10, 20_000, &limit), "the count starts again");
    }
}
