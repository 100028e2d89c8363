//! What tools look at a server with: SLOWLOG (GET, LEN, RESET, HELP, with
//! `slowlog-log-slower-than` and `slowlog-max-len`), LATENCY (LATEST,
//! HISTORY, RESET, DOCTOR, GRAPH, HELP, with `latency-monitor-threshold`:
//! the `command` and `fast-command` events), and the per-command and per-error counters
//! of INFO's `commandstats`, `errorstats` and `latencystats`.
//!
//! [`record`] is called by [`crate::exec::call`] for every command that
//! runs (EXEC's commands one by one, and a script's `redis.call`s, as
//! Redis counts them) with its time and reply; commands refused before
//! running count as rejected ([`rejected`]); a command that blocks is
//! counted again when it is served or unblocked ([`unblocked`]), as Redis's
//! `updateStatsOnUnblock`. Every error reply is counted
//! once, here: errorstats and `total_error_replies` are the same count. Durations are real time (the work the server did);
//! a slow-log entry's timestamp is the server clock's.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::Duration;

use bytes::Bytes;

use super::flags::*;
use super::{acl, CommandSpec, Ctx};
use crate::errors::{self, err};
use crate::net::clients::ClientState;
use crate::protocol::Reply;
use crate::state::ServerState;

#[rustfmt::skip]
pub(crate) static COMMANDS: &[CommandSpec] = &[
    command!("server", "slowlog", -2, 0, 0, "A container for slow log commands", super::container, SLOWLOG),
    command!("server", "latency", -2, 0, 0, "A container for latency diagnostics commands", super::container, LATENCY),
];

#[rustfmt::skip]
static LATENCY: &[CommandSpec] = &[
    command!("server", "latency|latest", 2, ADMIN | NOSCRIPT | LOADING | STALE, acl::ADMIN | acl::DANGEROUS, "Return the latest latency samples for all events.", latency_latest),
    command!("server", "latency|history", 3, ADMIN | NOSCRIPT | LOADING | STALE, acl::ADMIN | acl::DANGEROUS, "Return timestamp-latency samples for the event.", latency_history),
    command!("server", "latency|reset", -2, ADMIN | NOSCRIPT | LOADING | STALE, acl::ADMIN | acl::DANGEROUS, "Reset latency data for one or more events.", latency_reset),
    command!("server", "latency|histogram", -2, ADMIN | NOSCRIPT | LOADING | STALE, acl::ADMIN | acl::DANGEROUS, "Return the cumulative distribution of latencies of a subset of commands or all.", latency_histogram),
    command!("server", "latency|doctor", 2, ADMIN | NOSCRIPT | LOADING | STALE, acl::ADMIN | acl::DANGEROUS, "Return a human readable latency analysis report.", latency_doctor),
    command!("server", "latency|graph", 3, ADMIN | NOSCRIPT | LOADING | STALE, acl::ADMIN | acl::DANGEROUS, "Return a latency graph for the event.", latency_graph),
    command!("server", "latency|help", 2, LOADING | STALE, 0, "Show helpful text about the different subcommands.", latency_help),
];

/// Samples a latency event keeps (Redis's `LATENCY_TS_LEN`).
const LATENCY_SAMPLES: usize = 160;

/// One latency event's samples: (unix seconds, ms), newest last, and the
/// greatest ever.
#[derive(Debug, Default)]
struct LatencyEvent {
    samples: VecDeque<(u64, u64)>,
    max: u64,
}

#[rustfmt::skip]
static SLOWLOG: &[CommandSpec] = &[
    command!("server", "slowlog|get", -2, ADMIN | LOADING | STALE, acl::ADMIN | acl::DANGEROUS, "Get the slow log's entries", slowlog_get),
    command!("server", "slowlog|len", 2, ADMIN | LOADING | STALE, acl::ADMIN | acl::DANGEROUS, "Get the slow log's length", slowlog_len),
    command!("server", "slowlog|reset", 2, ADMIN | LOADING | STALE, acl::ADMIN | acl::DANGEROUS, "Clear all entries from the slow log", slowlog_reset),
    command!("server", "slowlog|help", 2, LOADING | STALE, 0, "Show helpful text about the different subcommands", slowlog_help),
];

/// Arguments a slow-log entry keeps (Redis's `SLOWLOG_ENTRY_MAX_ARGC`).
const ENTRY_MAX_ARGS: usize = 32;
/// Bytes an argument keeps (`SLOWLOG_ENTRY_MAX_STRING`).
const ENTRY_MAX_BYTES: usize = 128;

/// One command's counters (INFO `cmdstat_<name>`) and latency histogram
/// (`latency_percentiles_usec_<name>`).
#[derive(Debug, Default, Clone)]
struct CommandStats {
    calls: u64,
    usec: u64,
    rejected: u64,
    failed: u64,
    latency: Histogram,
}

/// Latencies in ns in the buckets of an HDR histogram of 2 significant
/// digits (256 sub-buckets), as Redis keeps per command: values below 256
/// exact, above that each power of two split in 128, so a value reads back
/// as the highest one its bucket holds (7,000 ns as 7,007), which is what
/// Redis prints.
#[derive(Debug, Default, Clone)]
struct Histogram {
    counts: Vec<u32>,
    total: u64,
}

impl Histogram {
    fn index(ns: u64) -> usize {
        if ns < 256 {
            return ns as usize;
        }
        let bucket = 63 - ns.leading_zeros() as usize - 7;
        256 + (bucket - 1) * 128 + ((ns >> bucket) as usize - 128)
    }

    /// The lowest value the bucket at `index` holds, and its width.
    fn bucket(index: usize) -> (u64, u64) {
        if index < 256 {
            return (index as u64, 1);
        }
        let bucket = (index - 256) / 128 + 1;
        let sub = ((index - 256) % 128 + 128) as u64;
        (sub << bucket, 1 << bucket)
    }

    /// The highest value the bucket at `index` holds.
    fn highest(index: usize) -> u64 {
        let (lowest, width) = Self::bucket(index);
        lowest + width - 1
    }

    /// Records a latency, kept within 1 ns ..= 1 s as Redis keeps it.
    fn record(&mut self, ns: u64) {
        let i = Self::index(ns.clamp(1, 1_000_000_000));
        if self.counts.len() <= i {
            self.counts.resize(i + 1, 0);
        }
        self.counts[i] = self.counts[i].saturating_add(1);
        self.total += 1;
    }

    /// LATENCY HISTOGRAM's cumulative distribution (Redis's
    /// `fillCommandCDF`: HDR's logarithmic iteration from 1024 ns by powers
    /// of two): per level reached, the highest value of its bucket in µs
    /// and the calls up to it, where that count grew.
    fn cdf(&self) -> Vec<(u64, u64)> {
        let mut out = vec![];
        let (mut level, mut seen, mut at) = (1024u64, 0u64, 0usize);
        while seen < self.total {
            let index = Self::index(level);
            while at <= index && at < self.counts.len() {
                seen += self.counts[at] as u64;
                at += 1;
            }
            if out.last().is_none_or(|&(_, before)| seen > before) && seen > 0 {
                out.push((Self::highest(index) / 1000, seen));
            }
            level *= 2;
        }
        out
    }

    /// The value at percentile `p` (HDR's `value_at_percentile`): the
    /// highest value of the bucket the call at that rank falls in, and at
    /// percentile 0 the lowest, as Redis prints them.
    fn at_percentile(&self, p: f64) -> u64 {
        let wanted = ((p.min(100.0) / 100.0 * self.total as f64) + 0.5).max(1.0) as u64;
        let mut seen = 0u64;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c as u64;
            if seen >= wanted {
                return if p == 0.0 { Self::bucket(i).0 } else { Self::highest(i) };
            }
        }
        0
    }
}

/// A slow command, as SLOWLOG GET shows it.
#[derive(Debug, Clone)]
struct SlowEntry {
    id: u64,
    /// Unix seconds (server clock).
    at: u64,
    usec: u64,
    args: Vec<Bytes>,
    addr: String,
    name: Bytes,
}

/// A row's identity in the statistics: its address. Every row lives in a
/// family's `static` table and every lookup hands out a reference into it
/// (`cmd::spec`'s tests check both), so one command has one address. A
/// word hashes and compares for less than a name: keyed by name, counting a
/// pipelined GET cost 88 instructions more, 4% of the request's.
fn row_key(spec: &'static CommandSpec) -> usize {
    std::ptr::from_ref(spec) as usize
}

/// The server's counters and slow log.
#[derive(Debug, Default)]
pub struct Observe {
    /// By command row, keyed by its address ([`row_key`]), with the row.
    commands: HashMap<usize, (&'static CommandSpec, CommandStats), foldhash::fast::RandomState>,
    /// Error replies by their first word (`ERR`, `WRONGTYPE`, ...).
    errors: BTreeMap<String, u64>,
    /// Every error reply counted in `errors` (INFO `total_error_replies`).
    total_errors: u64,
    /// The reply of the command now ending is an error already counted
    /// where it arose (a script passing on its command's error).
    counted: bool,
    /// The command now running sent an error to another client (CLIENT
    /// UNBLOCK ERROR), so it counts as failed whatever its own reply.
    raised: bool,
    slowlog: VecDeque<SlowEntry>,
    next_id: u64,
    /// Latency events by name.
    latency: BTreeMap<&'static str, LatencyEvent>,
}

impl Observe {
    /// A latency sample of `ms` at unix second `at` (Redis's
    /// `latencyAddSample`: one sample per second, the greatest).
    fn latency_sample(&mut self, event: &'static str, at: u64, ms: u64) {
        let e = self.latency.entry(event).or_default();
        e.max = e.max.max(ms);
        match e.samples.back_mut() {
            Some((t, m)) if *t == at => *m = (*m).max(ms),
            _ => {
                e.samples.push_back((at, ms));
                if e.samples.len() > LATENCY_SAMPLES {
                    e.samples.pop_front();
                }
            }
        }
    }

    fn stats(&mut self, spec: &'static CommandSpec) -> &mut CommandStats {
        &mut self
            .commands
            .entry(row_key(spec))
            .or_insert((spec, CommandStats::default()))
            .1
    }

    /// An error reply sent: counted by its code, and in the total.
    fn count_error(&mut self, reply: &Reply) {
        if let Reply::Error(text) = reply {
            let code = text.split(' ').next().unwrap_or_default();
            *self.errors.entry(code.to_string()).or_default() += 1;
            self.total_errors += 1;
        }
    }

    /// The error reply of the command now ending was counted already.
    pub(crate) fn error_already_counted(&mut self) {
        self.counted = true;
    }

    /// INFO's `total_error_replies`.
    pub fn total_errors(&self) -> u64 {
        self.total_errors
    }

    /// CONFIG RESETSTAT: the counters (not the slow log) start again.
    pub fn reset_stats(&mut self) {
        self.commands.clear();
        self.errors.clear();
        self.total_errors = 0;
    }

    /// INFO `commandstats`, by command name.
    pub fn commandstats(&self) -> String {
        let mut rows: Vec<(&str, &CommandStats)> = self.commands.values().map(|(s, c)| (s.name, c)).collect();
        rows.sort_by(|a, b| a.0.cmp(b.0));
        let mut out = String::from("# Commandstats\r\n");
        for (name, c) in rows {
            let per_call = if c.calls == 0 {
                0.0
            } else {
                c.usec as f64 / c.calls as f64
            };
            out.push_str(&format!(
                "cmdstat_{name}:calls={},usec={},usec_per_call={per_call:.2},rejected_calls={},failed_calls={}\r\n",
                c.calls, c.usec, c.rejected, c.failed
            ));
        }
        out
    }

    /// INFO `latencystats`: each command's percentiles in µs, those of
    /// `latency-tracking-info-percentiles` in its order; with
    /// `latency-tracking no`, the section's header alone.
    pub fn latencystats(&self, config: &crate::config::Config) -> String {
        let mut out = String::from("# Latencystats\r\n");
        if !config.latency_tracking {
            return out;
        }
        let mut rows: Vec<(&str, &Histogram)> = self
            .commands
            .values()
            .filter(|(_, c)| c.latency.total > 0)
            .map(|(s, c)| (s.name, &c.latency))
            .collect();
        rows.sort_by(|a, b| a.0.cmp(b.0));
        for (name, h) in rows {
            let shown: Vec<String> = config
                .latency_tracking_info_percentiles
                .iter()
                .map(|&p| {
                    let usec = h.at_percentile(p) as f64 / 1000.0;
                    format!("p{}={usec:.3}", crate::config::percentile_text(p))
                })
                .collect();
            out.push_str(&format!("latency_percentiles_usec_{name}:{}\r\n", shown.join(",")));
        }
        out
    }

    /// INFO `errorstats`, by error code.
    pub fn errorstats(&self) -> String {
        let mut out = String::from("# Errorstats\r\n");
        for (code, count) in &self.errors {
            out.push_str(&format!("errorstat_{code}:count={count}\r\n"));
        }
        out
    }
}

/// Records a command that ran (see the module docs): its call, time and
/// failure, the slow log and the latency monitor. A call that blocked its
/// client (a BLPOP that waits) counts its call and time now, and leaves its
/// latency and slow-log entry to its unblock ([`unblocked`]), as Redis's
/// `call()` does for a `CLIENT_BLOCKED` client.
pub(crate) fn record(ctx: &mut Ctx, spec: &'static CommandSpec, args: &[Bytes], took: Duration, reply: &Reply) {
    let usec = took.as_micros().min(u64::MAX as u128) as u64;
    let blocked = match ctx.client.blocked.as_deref_mut() {
        Some(b) => {
            b.ran(spec, usec);
            true
        }
        None => false,
    };
    let observe = &mut ctx.server.observe;
    let raised = std::mem::take(&mut observe.raised);
    let stats = observe.stats(spec);
    stats.calls += 1;
    stats.usec += usec;
    if !blocked && ctx.server.config.latency_tracking {
        // Redis times in µs and records ns: µs × 1000.
        stats.latency.record(usec.saturating_mul(1000));
    }
    if reply.is_error() {
        stats.failed += 1;
        if !std::mem::take(&mut observe.counted) {
            observe.count_error(reply);
        }
    } else if raised {
        stats.failed += 1;
    }
    let threshold = ctx.server.config.slowlog_log_slower_than;
    if !blocked && threshold >= 0 && usec >= threshold as u64 && !spec.has(SKIP_SLOWLOG) {
        log_slow(ctx.server, ctx.client, ctx.now, spec, args, usec);
    }
    let event = if spec.has(FAST) { "fast-command" } else { "command" };
    latency_event(ctx.server, event, ctx.now, usec / 1000);
}

/// A latency event (Redis's `latencyAddSampleIfNeeded`): `ms` is recorded
/// for LATENCY LATEST, HISTORY and DOCTOR at the second of `now_ms` on the
/// server clock when `latency-monitor-threshold` is set and `ms` reaches it.
pub(crate) fn latency_event(server: &mut ServerState, event: &'static str, now_ms: u64, ms: u64) {
    let threshold = server.config.latency_monitor_threshold;
    if threshold > 0 && ms >= threshold {
        server.observe.latency_sample(event, now_ms / 1000, ms);
    }
}

/// How a blocked command ended, for [`unblocked`].
pub(crate) struct Unblock<'a> {
    /// The row and µs of the call that blocked ([`crate::blocked::Blocked::call`]).
    pub(crate) call: (&'static CommandSpec, u64),
    /// µs the serving took (0 for CLIENT UNBLOCK).
    pub(crate) serve_usec: u64,
    /// Counted as a failed call: the served reply is an error, and always
    /// after CLIENT UNBLOCK (Redis passes `had_errors` 1 there).
    pub(crate) failed: bool,
    /// The slow-log entry's arguments: the command's when it is served,
    /// none after CLIENT UNBLOCK (Redis has reset the client's arguments
    /// before it logs the entry).
    pub(crate) args: &'a [Bytes],
}

/// A blocked command that is served, or unblocked by CLIENT UNBLOCK (Redis's
/// `updateStatsOnUnblock`; a timeout records nothing): its total time, the
/// blocking call's plus the serving's, is added to `usec` (so the blocking
/// call's time counts twice, as in Redis 7.0), to the latency histogram
/// and, past the threshold, to the slow log as `client`'s entry at `now`.
pub(crate) fn unblocked(server: &mut ServerState, client: &ClientState, now: u64, how: Unblock<'_>) {
    let (spec, call_usec) = how.call;
    let total = call_usec.saturating_add(how.serve_usec);
    let stats = server.observe.stats(spec);
    stats.usec = stats.usec.saturating_add(total);
    if how.failed {
        stats.failed += 1;
    }
    if server.config.latency_tracking {
        stats.latency.record(total.saturating_mul(1000));
    }
    let threshold = server.config.slowlog_log_slower_than;
    if threshold >= 0 && total >= threshold as u64 && !spec.has(SKIP_SLOWLOG) {
        log_slow(server, client, now, spec, how.args, total);
    }
    let latency = server.config.latency_monitor_threshold;
    if latency > 0 && how.serve_usec / 1000 >= latency {
        server
            .observe
            .latency_sample(UNBLOCKING_EVENT, now / 1000, how.serve_usec / 1000);
    }
}

/// The latency event of serving a blocked client (Redis's
/// `command-unblocking`).
const UNBLOCKING_EVENT: &str = "command-unblocking";

/// An error reply sent to another client than the one whose command runs
/// (CLIENT UNBLOCK's `-UNBLOCKED`, a served waiter's error): counted in
/// errorstats now.
pub(crate) fn error_to_other(server: &mut ServerState, reply: &Reply) {
    server.observe.count_error(reply);
}

/// [`error_to_other`] during the command now running, which therefore
/// counts as failed (Redis's `failed_calls` counts a call during which the
/// error total rose).
pub(crate) fn error_raised(server: &mut ServerState, reply: &Reply) {
    server.observe.count_error(reply);
    server.observe.raised = true;
}

/// A command refused before it ran (`spec` when the command is known).
pub(crate) fn rejected(ctx: &mut Ctx, spec: Option<&'static CommandSpec>, reply: &Reply) {
    ctx.server.observe.reject(spec, reply);
}

impl Observe {
    /// A command refused before it ran (`spec` when the command is known).
    pub(crate) fn reject(&mut self, spec: Option<&'static CommandSpec>, reply: &Reply) {
        if let Some(spec) = spec {
            self.stats(spec).rejected += 1;
        }
        self.count_error(reply);
    }
}

/// Appends `client`'s entry at `now`, dropping the oldest past `slowlog-max-len`.
fn log_slow(server: &mut ServerState, client: &ClientState, now: u64, spec: &CommandSpec, args: &[Bytes], usec: u64) {
    let mut kept: Vec<Bytes> = Vec::with_capacity(args.len().min(ENTRY_MAX_ARGS));
    for (i, arg) in args.iter().enumerate() {
        if args.len() > ENTRY_MAX_ARGS && i == ENTRY_MAX_ARGS - 1 {
            kept.push(Bytes::from(format!(
                "... ({} more arguments)",
                args.len() - ENTRY_MAX_ARGS + 1
            )));
            break;
        }
        // Passwords never reach the slow log (the row says which).
        if spec.hides_arg(args, i) {
            kept.push(Bytes::from_static(super::spec::REDACTED));
        } else if arg.len() > ENTRY_MAX_BYTES {
            let mut s = arg[..ENTRY_MAX_BYTES].to_vec();
            s.extend_from_slice(format!("... ({} more bytes)", arg.len() - ENTRY_MAX_BYTES).as_bytes());
            kept.push(Bytes::from(s));
        } else {
            kept.push(arg.clone());
        }
    }
    let max = server.config.slowlog_max_len;
    let observe = &mut server.observe;
    observe.slowlog.push_front(SlowEntry {
        id: observe.next_id,
        at: now / 1000,
        usec,
        args: kept,
        addr: client.addr.to_string(),
        name: client.name.clone().unwrap_or_default(),
    });
    observe.next_id += 1;
    observe.slowlog.truncate(max);
}

/// SLOWLOG GET [count]: the newest `count` entries (10; -1: all).
fn slowlog_get(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let count = match args.get(2) {
        None => 10,
        Some(a) => match crate::store::num::parse_i64(a) {
            Some(-1) => usize::MAX,
            Some(n) if n >= 0 => n as usize,
            _ => return err(errors::SLOWLOG_COUNT),
        },
    };
    if args.len() > 3 {
        return errors::sub_wrong_args(&args[1], "SLOWLOG");
    }
    let entries = ctx
        .server
        .observe
        .slowlog
        .iter()
        .take(count)
        .map(|e| {
            Reply::Array(vec![
                Reply::Int(e.id as i64),
                Reply::Int(e.at as i64),
                Reply::Int(e.usec as i64),
                Reply::Array(e.args.iter().cloned().map(Reply::Bulk).collect()),
                Reply::Bulk(Bytes::from(e.addr.clone())),
                Reply::Bulk(e.name.clone()),
            ])
        })
        .collect();
    Reply::Array(entries)
}

fn slowlog_len(ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    Reply::Int(ctx.server.observe.slowlog.len() as i64)
}

fn slowlog_reset(ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    ctx.server.observe.slowlog.clear();
    Reply::Ok
}

fn slowlog_help(_ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    super::server::help_reply(&[
        "SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "GET [<count>]",
        "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
        "    Entries are made of:",
        "    id, timestamp, time in microseconds, arguments array, client IP and port,",
        "    client name",
        "LEN",
        "    Return the length of the slowlog.",
        "RESET",
        "    Reset the slowlog.",
    ])
}

/// LATENCY LATEST: per event, [name, last sample's time, its ms, the max].
fn latency_latest(ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    let events = ctx
        .server
        .observe
        .latency
        .iter()
        .filter_map(|(name, e)| {
            let &(at, ms) = e.samples.back()?;
            Some(Reply::Array(vec![
                Reply::Bulk(Bytes::from_static(name.as_bytes())),
                Reply::Int(at as i64),
                Reply::Int(ms as i64),
                Reply::Int(e.max as i64),
            ]))
        })
        .collect();
    Reply::Array(events)
}

/// LATENCY HISTORY event: its samples, oldest first.
fn latency_history(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let samples = ctx
        .server
        .observe
        .latency
        .iter()
        .find(|(name, _)| name.as_bytes() == args[2].as_ref())
        .map(|(_, e)| {
            e.samples
                .iter()
                .map(|&(at, ms)| Reply::Array(vec![Reply::Int(at as i64), Reply::Int(ms as i64)]))
                .collect()
        })
        .unwrap_or_default();
    Reply::Array(samples)
}

/// LATENCY RESET [event ...]: how many events were reset.
fn latency_reset(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let latency = &mut ctx.server.observe.latency;
    if args.len() == 2 {
        let n = latency.len();
        latency.clear();
        return Reply::Int(n as i64);
    }
    let before = latency.len();
    latency.retain(|name, _| !args[2..].iter().any(|a| a.as_ref() == name.as_bytes()));
    Reply::Int((before - latency.len()) as i64)
}

/// LATENCY HISTOGRAM [command ...]: each named command (a container: its
/// subcommands) that has run, in the order named; with no names every
/// command that has run, by name (Redis: its table's hash order).
fn latency_histogram(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let observe = &ctx.server.observe;
    let ran = |spec: &'static CommandSpec| {
        observe
            .commands
            .get(&row_key(spec))
            .filter(|(_, stats)| stats.latency.total > 0)
            .map(|(spec, stats)| (*spec, &stats.latency))
    };
    let mut rows: Vec<(&'static CommandSpec, &Histogram)> = vec![];
    if args.len() == 2 {
        rows = observe
            .commands
            .values()
            .filter(|(_, stats)| stats.latency.total > 0)
            .map(|(spec, stats)| (*spec, &stats.latency))
            .collect();
        rows.sort_by_key(|(spec, _)| spec.name);
    } else {
        for name in &args[2..] {
            let Some(spec) = super::lookup(name) else { continue };
            rows.extend(ran(spec));
            rows.extend(spec.subcommands.iter().filter_map(ran));
        }
    }
    let int = |n: u64| Reply::Int(n as i64);
    Reply::Map(
        rows.into_iter()
            .map(|(spec, h)| {
                let cdf = h
                    .cdf()
                    .into_iter()
                    .map(|(usec, calls)| (int(usec), int(calls)))
                    .collect();
                let body = vec![
                    (Reply::bulk("calls"), int(h.total)),
                    (Reply::bulk("histogram_usec"), Reply::Map(cdf)),
                ];
                (Reply::bulk(spec.name), Reply::Map(body))
            })
            .collect(),
    )
}

/// What LATENCY DOCTOR may advise, in the order its report lists them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Advice {
    SlowlogEnable,
    SlowlogTuning,
    SlowlogInspect,
    Scheduler,
    LocalDisk,
    Ssd,
    DataWriteback,
    DiskContention,
    NoAppendfsync,
    RelaxFsync,
    WriteLoad,
    Hz,
    LargeObjects,
    MassEviction,
    DisableThp,
}

/// The advice each event brings (Redis's `createLatencyReport`), the
/// slow-log ones apart (they read the configuration).
const EVENT_ADVICE: &[(&str, &[Advice])] = {
    use Advice::*;
    &[
        ("command", &[SlowlogInspect, LargeObjects]),
        ("fast-command", &[Scheduler]),
        (
            "aof-write-pending-fsync",
            &[LocalDisk, DiskContention, Ssd, DataWriteback],
        ),
        ("aof-write-active-child", &[NoAppendfsync, DataWriteback, Ssd]),
        ("aof-write-alone", &[LocalDisk, DataWriteback, Ssd]),
        ("aof-fsync-always", &[RelaxFsync]),
        ("aof-fstat", &[DiskContention, LocalDisk]),
        ("rdb-unlink-temp-file", &[DiskContention, LocalDisk]),
        ("aof-rewrite-diff-write", &[WriteLoad, DataWriteback, Ssd, LocalDisk]),
        ("aof-rename", &[WriteLoad, DataWriteback, Ssd, LocalDisk]),
        ("expire-cycle", &[Hz, LargeObjects]),
        ("eviction-del", &[LargeObjects]),
        ("eviction-cycle", &[MassEviction]),
    ]
};

/// The `hz` below which DOCTOR suggests raising it.
const DOCTOR_HZ: u32 = 100;

/// An event's figures for DOCTOR (Redis's `analyzeLatencyForEvent`):
/// samples, average and mean absolute deviation (integer ms), and the
/// seconds since the oldest sample (at least 1).
fn analyze(e: &LatencyEvent, now_s: u64) -> (usize, u64, u64, u64) {
    let n = e.samples.len();
    if n == 0 {
        return (0, 0, 0, 0);
    }
    let avg = e.samples.iter().map(|&(_, ms)| ms).sum::<u64>() / n as u64;
    let mad = e.samples.iter().map(|&(_, ms)| ms.abs_diff(avg)).sum::<u64>() / n as u64;
    let oldest = e.samples.iter().map(|&(t, _)| t).min().unwrap_or(now_s);
    (n, avg, mad, now_s.saturating_sub(oldest).max(1))
}

/// Bytes of transparent huge pages the process uses (`AnonHugePages` of
/// /proc/self/smaps, as Redis reads it); 0 where there is no such file.
fn anon_huge_pages() -> u64 {
    let Ok(smaps) = std::fs::read_to_string("/proc/self/smaps") else {
        return 0;
    };
    smaps
        .lines()
        .filter_map(|l| l.strip_prefix("AnonHugePages:"))
        .filter_map(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .sum::<u64>()
        * 1024
}

/// LATENCY DOCTOR: Redis's report on the events and what to do.
fn latency_doctor(ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    use errors::latency as text;
    let config = &ctx.server.config;
    let events = &ctx.server.observe.latency;
    if events.is_empty() && config.latency_monitor_threshold == 0 {
        return Reply::Verbatim(*b"txt", Bytes::from_static(text::DISABLED.as_bytes()));
    }
    let now_s = ctx.now / 1000;
    let mut report = String::new();
    let mut advices: Vec<Advice> = vec![];
    for (i, (name, e)) in events.iter().enumerate() {
        if i == 0 {
            report.push_str(text::SPIKES);
        }
        let (samples, avg, mad, period) = analyze(e, now_s);
        let per_sample = period as f64 / samples as f64;
        report.push_str(&text::event(i + 1, name, samples, avg, mad, per_sample, e.max));
        if *name == "command" {
            if config.slowlog_log_slower_than < 0 {
                advices.push(Advice::SlowlogEnable);
            } else if config.slowlog_log_slower_than / 1000 > config.latency_monitor_threshold as i64 {
                advices.push(Advice::SlowlogTuning);
            }
        }
        if let Some((_, more)) = EVENT_ADVICE.iter().find(|(event, _)| event.eq_ignore_ascii_case(name)) {
            advices.extend_from_slice(more);
        }
        report.push('\n');
    }
    if anon_huge_pages() > 0 {
        advices.push(Advice::DisableThp);
    }
    if events.is_empty() && advices.is_empty() {
        report.push_str(text::NO_SPIKES);
    } else if advices.is_empty() {
        report.push_str(text::NO_FIX);
    } else {
        report.push_str(text::ADVICES);
        advices.sort();
        advices.dedup();
        let threshold_us = config.latency_monitor_threshold * 1000;
        for advice in advices {
            let line = match advice {
                Advice::SlowlogEnable => text::slowlog_enable(threshold_us),
                Advice::SlowlogTuning => text::slowlog_tuning(threshold_us),
                Advice::SlowlogInspect => text::SLOWLOG_INSPECT.into(),
                Advice::Scheduler => text::SCHEDULER.into(),
                Advice::LocalDisk => text::LOCAL_DISK.into(),
                Advice::Ssd => text::SSD.into(),
                Advice::DataWriteback => text::DATA_WRITEBACK.into(),
                Advice::DiskContention => text::DISK_CONTENTION.into(),
                Advice::NoAppendfsync => text::NO_APPENDFSYNC.into(),
                Advice::RelaxFsync if config.aof.fsync == "always" => text::RELAX_FSYNC.into(),
                Advice::WriteLoad => text::WRITE_LOAD.into(),
                Advice::Hz if config.hz < DOCTOR_HZ => text::HZ.into(),
                Advice::LargeObjects => text::LARGE_OBJECTS.into(),
                Advice::MassEviction => text::MASS_EVICTION.into(),
                Advice::DisableThp => text::DISABLE_THP.into(),
                Advice::RelaxFsync | Advice::Hz => String::new(),
            };
            report.push_str(&line);
        }
    }
    Reply::Verbatim(*b"txt", Bytes::from(report))
}

/// LATENCY GRAPH's width in columns (Redis's `LATENCY_GRAPH_COLS`) and
/// height in rows.
const GRAPH_COLS: usize = 80;
const GRAPH_ROWS: usize = 4;

/// LATENCY GRAPH event: the event's samples as Redis's ASCII sparkline,
/// each labelled with how long ago it was.
fn latency_graph(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let Some((name, e)) = ctx
        .server
        .observe
        .latency
        .iter()
        .find(|(name, _)| name.as_bytes() == args[2].as_ref())
    else {
        return errors::latency::no_samples(&String::from_utf8_lossy(&args[2]));
    };
    let now_s = (ctx.now / 1000) as i64;
    let samples: Vec<(f64, String)> = e
        .samples
        .iter()
        .map(|&(at, ms)| (ms as f64, ago(now_s - at as i64)))
        .collect();
    let high = e.samples.iter().map(|&(_, ms)| ms).max().unwrap_or(0);
    let low = e.samples.iter().map(|&(_, ms)| ms).min().unwrap_or(0);
    let mut graph = format!(
        "{name} - high {high} ms, low {low} ms (all time high {} ms)
",
        e.max
    );
    graph.push_str(&"-".repeat(GRAPH_COLS));
    graph.push('\n');
    sparkline(&mut graph, &samples, GRAPH_COLS, GRAPH_ROWS);
    Reply::Verbatim(*b"txt", Bytes::from(graph))
}

/// A sample's label: seconds, minutes, hours or days ago (`12s`, `3m`).
fn ago(secs: i64) -> String {
    const MINUTE: i64 = 60;
    const HOUR: i64 = 3600;
    const DAY: i64 = 24 * HOUR;
    match secs {
        s if s < MINUTE => format!("{s}s"),
        s if s < HOUR => format!("{}m", s / MINUTE),
        s if s < DAY => format!("{}h", s / HOUR),
        s => format!("{}d", s / DAY),
    }
}

/// Redis's filled sparkline (sparkline.c): `rows` rows of `_o#` with `|`
/// below a column's top, then a blank row and each sample's label
/// written downwards, `columns` samples per block, blocks separated by a
/// blank line.
fn sparkline(out: &mut String, samples: &[(f64, String)], columns: usize, rows: usize) {
    const FILL: [char; 3] = ['_', 'o', '#'];
    /// Blank rows between the graph and the labels.
    const LABEL_MARGIN: usize = 1;
    let min = samples.iter().map(|s| s.0).fold(f64::INFINITY, f64::min);
    let max = samples.iter().map(|s| s.0).fold(f64::NEG_INFINITY, f64::max);
    let range = if max - min == 0.0 { 1.0 } else { max - min };
    let steps = (FILL.len() * rows) as i64;
    for (block, chunk) in samples.chunks(columns).enumerate() {
        if block > 0 {
            out.push('\n');
        }
        let step_of = |value: f64| -> i64 {
            // As C computes it: the product truncated, then divided.
            let step = (((value - min) * steps as f64) as i64 as f64 / range) as i64;
            step.clamp(0, steps - 1)
        };
        for row in 0.. {
            let mut line = vec![' '; chunk.len()];
            let mut more = false;
            if row < rows {
                more = true;
                for (j, (value, _)) in chunk.iter().enumerate() {
                    let idx = step_of(*value) - ((rows - row - 1) * FILL.len()) as i64;
                    if (0..FILL.len() as i64).contains(&idx) {
                        line[j] = FILL[idx as usize];
                    } else if idx >= FILL.len() as i64 {
                        line[j] = '|';
                    }
                }
            } else if row - rows < LABEL_MARGIN {
                more = true;
            } else {
                let at = row - rows - LABEL_MARGIN;
                for (j, (_, label)) in chunk.iter().enumerate() {
                    if let Some(c) = label.chars().nth(at) {
                        more = true;
                        line[j] = c;
                    }
                }
            }
            if !more {
                break;
            }
            out.extend(line);
            out.push('\n');
        }
    }
}

fn latency_help(_ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    super::server::help_reply(&[
        "LATENCY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "DOCTOR",
        "    Return a human readable latency analysis report.",
        "GRAPH <event>",
        "    Return an ASCII latency graph for the <event> class.",
        "HISTORY <event>",
        "    Return time-latency samples for the <event> class.",
        "LATEST",
        "    Return the latest latency samples for all events.",
        "RESET [<event> ...]",
        "    Reset latency data of one or more <event> classes.",
        "    (default: reset all data for all event classes)",
        "HISTOGRAM [COMMAND ...]",
        "    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
        "    If no commands are specified then all histograms are replied.",
    ])
}

#[cfg(test)]
mod tests {
    use super::Histogram;

    #[test]
    fn histogram_values_read_back_as_redis_prints_them() {
        // INFO latencystats of Redis 7.0.15: 3 µs as 3.007, 7 µs as 7.007,
        // 12 µs as 12.031.
        for (ns, shown) in [
            (3000, 3007),
            (7000, 7007),
            (12000, 12031),
            (200, 200),
            (1_000_000, 1_003_519),
        ] {
            let mut h = Histogram::default();
            h.record(ns);
            assert_eq!(h.at_percentile(50.0), shown, "{ns}");
        }
        let mut h = Histogram::default();
        for ns in [5000, 6000, 6000, 100_000] {
            h.record(ns);
        }
        assert_eq!(h.at_percentile(50.0), 6015);
        assert_eq!(h.at_percentile(99.0), 100_351);
        // `p0` is its bucket's lowest value (Redis prints 5 µs as 4.992
        // there), `p100` the highest's (past 100 reads as 100).
        assert_eq!(h.at_percentile(0.0), 4992);
        assert_eq!(h.at_percentile(100.0), 100_351);
    }

    #[test]
    fn histogram_cdf_reads_as_redis_prints_it() {
        // LATENCY HISTOGRAM of Redis 7.0.15: levels from 1024 ns by powers of
        // two, keyed by their bucket's highest value in µs (131072 ns is
        // 132), counts cumulative, a level shown only when its count grew;
        // values kept within 1 ns ..= 1 s (the last level is 2^30 ns).
        let mut h = Histogram::default();
        for ns in [0, 900, 1500, 3000, 3000, 130_000, 2_000_000_000] {
            h.record(ns);
        }
        assert_eq!(h.cdf(), vec![(1, 2), (2, 3), (4, 5), (132, 6), (1_082_130, 7)]);
        assert_eq!(Histogram::default().cdf(), vec![]);
    }
}
