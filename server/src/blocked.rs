//! Blocked clients (BLPOP, BLMOVE, BZPOPMIN, WAIT, ...): who waits on which
//! key, serving them when a key becomes ready, and their timeouts.
//!
//! The shape is Redis's (`blocked.c`). Each database keeps, per key, the
//! clients blocked on it in arrival order, and the keys with waiters that
//! were stored since the blocking layer last looked (see [`Db`]'s waiters
//! and ready list). A client blocks only on keys that are absent or empty,
//! so a key can serve a waiter only after something stores it.
//!
//! - A command that must wait calls [`block`]: its client records a
//!   [`Blocked`] and the command answers [`Reply::NOTHING`]. The engine stops
//!   the client's batch there; its connection waits for the reply.
//! - After every command a connection runs (a whole MULTI/EXEC or script
//!   counts as one, so `MULTI; LPUSH k x; DEL k; EXEC` wakes nobody),
//!   [`serve_ready`] walks the ready keys in order and offers each key to
//!   its waiters, longest waiting first. The family's [`Serve`] function pops
//!   for a waiter, or declines (the key is absent, empty or of another type)
//!   and the waiter keeps waiting. Serving may make another key ready
//!   (BLMOVE pushes to its destination): the walk goes on until no key is.
//! - A served, timed-out or unblocked client gets its reply through its
//!   outbox ([`crate::net::clients::Outbox`]); its connection writes it and goes
//!   on with whatever it had pipelined behind the blocking command.
//! - Timeouts are deadlines on the server's clock, in one ordered index. The
//!   server's timer task sleeps until the earliest ([`next_deadline`]); the
//!   engine then answers every waiter past its deadline ([`expire`]).
//!   Nothing polls: a blocked client costs no CPU until its key or its
//!   deadline comes.
//!
//! Inside MULTI/EXEC and scripts (Redis's `CLIENT_DENY_BLOCKING`) a
//! blocking command does not block: it answers what it would answer on a
//! timeout right away (a null), which [`block`] returns.

use std::collections::BTreeSet;

use bytes::{Bytes, BytesMut};

use crate::cmd::{CommandSpec, Ctx};
use crate::errors;
use crate::net::clients::ClientState;
use crate::protocol::Reply;
use crate::state::ServerState;
use crate::store::{num, Db};

/// What a blocking command does for a waiter once one of its keys is ready:
/// the command's arguments and the ready key in, the reply out, or `None`
/// when the key cannot serve it (absent, empty or of another type) and the
/// client keeps waiting. The family's non-blocking code does the work, so
/// events, WATCH and chained readiness are the same as for a direct call.
pub(crate) type Serve = fn(&mut Ctx, &[Bytes], &Bytes) -> Option<Reply>;

/// A blocked client's command, kept in its [`ClientState`].
#[derive(Debug)]
pub struct Blocked {
    /// The database its keys are in (the client's selected one).
    db: usize,
    /// The keys it waits on, each once.
    keys: Vec<Bytes>,
    /// The command, copied out of the connection's read buffer.
    args: Vec<Bytes>,
    /// Unix ms on the server clock after which it times out; 0: never.
    deadline: u64,
    /// `None`: nothing serves it but its timeout or CLIENT UNBLOCK (WAIT).
    serve: Option<Serve>,
    /// Its reply on timeout, and for `CLIENT UNBLOCK id TIMEOUT`.
    timeout_reply: Reply,
    /// Held by CLIENT PAUSE rather than blocked by its command: the command
    /// has not run, and runs once the pause ends.
    postponed: bool,
    /// WAIT: answered when enough replicas acknowledge ([`crate::repl`]).
    for_replicas: bool,
    /// SHUTDOWN waiting for lagging replicas: the server stops, or the
    /// shutdown is cancelled ([`crate::shutdown::cancel`]).
    for_shutdown: bool,
    /// The row and the µs of the call that blocked (Redis's `c->lastcmd`
    /// and `c->duration`): its latency and slow-log entry wait for the
    /// unblock, which adds this time to the serving time
    /// ([`crate::cmd::observe::unblocked`]). `None` for a client held by a
    /// pause or a hang rule, whose command has not run.
    ran: Option<(&'static CommandSpec, u64)>,
}

impl Blocked {
    /// Held by CLIENT PAUSE (its command runs once the pause ends).
    pub fn is_postponed(&self) -> bool {
        self.postponed
    }

    /// Notes the call that blocked: its row and how long it took.
    pub(crate) fn ran(&mut self, spec: &'static CommandSpec, usec: u64) {
        self.ran = Some((spec, usec));
    }

    /// The call that blocked, if the command ran ([`Blocked::ran`]).
    pub(crate) fn call(&self) -> Option<(&'static CommandSpec, u64)> {
        self.ran
    }
}

/// A CLIENT PAUSE in force.
#[derive(Debug, Clone, Copy)]
struct Pause {
    /// Unix ms on the server clock; the pause ends once the clock passes it.
    until: u64,
    /// ALL rather than WRITE.
    all: bool,
}

/// Server-wide blocked-client bookkeeping (the per-key queues are in [`Db`]).
#[derive(Debug, Default)]
pub struct Blocking {
    /// (deadline, client id) of every blocked client that has a timeout:
    /// Redis's `clients_timeout_table`.
    timeouts: BTreeSet<(u64, u64)>,
    /// Clients blocked now (INFO `blocked_clients`), postponed ones included.
    count: usize,
    /// The CLIENT PAUSE in force, if any.
    pause: Option<Pause>,
    /// What holds writes besides CLIENT PAUSE, one bit per [`Hold`]
    /// (Redis's pause purposes): each ends on its own, so CLIENT UNPAUSE
    /// ends none of them and the end of one ends neither the others nor a
    /// CLIENT PAUSE.
    held: u8,
    /// Clients whose command waits for the pause to end, in arrival order.
    postponed: Vec<u64>,
    /// Clients whose command a hang fault rule holds ([`crate::faults`]).
    hung: Vec<u64>,
}

impl Blocking {
    /// Clients blocked now.
    pub fn blocked(&self) -> usize {
        self.count
    }

    /// Blocked clients that have a timeout (INFO `clients_in_timeout_table`).
    pub fn with_timeout(&self) -> usize {
        self.timeouts.len()
    }

    /// Whether a CLIENT PAUSE holds a command (Redis's `processCommand`:
    /// everything under ALL; under WRITE, what `writes` says may write).
    /// False once the pause's time is over, even before the timer task has
    /// ended it. `writes` runs only while a WRITE pause is in force.
    pub fn holds(&self, now: u64, writes: impl FnOnce() -> bool) -> bool {
        let pause = self.pause.filter(|p| now <= p.until);
        if pause.is_some_and(|p| p.all) {
            return true;
        }
        (pause.is_some() || self.held != 0) && writes()
    }
}

/// A timeout in seconds (a float, `0.1`; 0 waits forever) as an absolute
/// deadline at `now`, with Redis's errors. 0 means no deadline.
pub(crate) fn deadline_secs(arg: &[u8], now: u64) -> Result<u64, Reply> {
    let ms = num::timeout_ms(arg).ok_or_else(|| errors::err(errors::TIMEOUT_NOT_FLOAT))?;
    deadline_after(ms, now)
}

/// A timeout in whole milliseconds (WAIT, CLIENT PAUSE) as an absolute
/// deadline at `now`; 0 means no deadline.
pub(crate) fn deadline_ms(arg: &[u8], now: u64) -> Result<u64, Reply> {
    let ms = num::parse_i64(arg).ok_or_else(|| errors::err(errors::TIMEOUT_NOT_INTEGER))?;
    deadline_after(ms, now)
}

fn deadline_after(ms: i64, now: u64) -> Result<u64, Reply> {
    match ms {
        ..=-1 => Err(errors::err(errors::TIMEOUT_NEGATIVE)),
        0 => Ok(0),
        // Redis adds without a check; a sum past the clock's range never comes.
        _ => Ok(now.saturating_add(ms as u64)),
    }
}

/// Blocks the calling client on `keys` (none for WAIT) until `serve` serves
/// it from one of them, `deadline` passes (0: never) or it is unblocked; it
/// then gets `timeout_reply`. Inside MULTI/EXEC or a script nothing blocks:
/// the answer is `denied` at once.
pub(crate) fn block(
    ctx: &mut Ctx,
    args: &[Bytes],
    keys: &[Bytes],
    deadline: u64,
    serve: Option<Serve>,
    timeout_reply: Reply,
    denied: Reply,
) -> Reply {
    if ctx.deny_blocking() {
        return denied;
    }
    let id = ctx.client.id;
    let db = ctx.client.db;
    let mut unique: Vec<Bytes> = Vec::with_capacity(keys.len());
    for key in keys {
        if !unique.contains(key) {
            ctx.dbs[db].add_waiter(key, id);
            unique.push(Bytes::copy_from_slice(key));
        }
    }
    let blocking = &mut ctx.server.blocking;
    if deadline != 0 {
        let earliest = blocking.timeouts.first().is_none_or(|&(first, _)| deadline < first);
        blocking.timeouts.insert((deadline, id));
        if earliest {
            ctx.server.shared.block_timer.notify_one();
        }
    }
    blocking.count += 1;
    ctx.client.blocked = Some(Box::new(Blocked {
        db,
        keys: unique,
        args: args.iter().map(|a| Bytes::copy_from_slice(a)).collect(),
        deadline,
        serve,
        timeout_reply,
        postponed: false,
        for_replicas: false,
        for_shutdown: false,
        ran: None,
    }));
    ctx.client.signal.set_blocked(true);
    Reply::NOTHING
}

/// Holds the calling client's command until the CLIENT PAUSE ends (Redis's
/// `blockPostponeClient`): the engine puts the request back in front of the
/// client's queue, and it runs once [`unpause`] releases the client.
pub(crate) fn postpone(ctx: &mut Ctx) -> Reply {
    hold(ctx, |b| &mut b.postponed)
}

/// Holds the calling client's command for a hang fault rule, the way a
/// CLIENT PAUSE holds it ([`postpone`]), until [`release_hung`].
pub(crate) fn hang(ctx: &mut Ctx) -> Reply {
    hold(ctx, |b| &mut b.hung)
}

/// Which list of held clients (postponed by a pause, or hung by a rule).
type HeldList = fn(&mut Blocking) -> &mut Vec<u64>;

/// Holds the calling client's command, listed in `list`: the engine puts
/// the request back in front of the client's queue ([`Blocked::is_postponed`]),
/// and it runs once [`let_go`] releases the client.
fn hold(ctx: &mut Ctx, list: HeldList) -> Reply {
    let blocking = &mut ctx.server.blocking;
    blocking.count += 1;
    list(blocking).push(ctx.client.id);
    ctx.client.blocked = Some(Box::new(Blocked {
        db: ctx.client.db,
        keys: Vec::new(),
        args: Vec::new(),
        deadline: 0,
        serve: None,
        timeout_reply: Reply::NOTHING,
        postponed: true,
        for_replicas: false,
        for_shutdown: false,
        ran: None,
    }));
    ctx.client.signal.set_blocked(true);
    Reply::NOTHING
}

/// Lets every client held in `list` go on, in the order they were held.
fn let_go(dbs: &mut [Db], server: &mut ServerState, list: HeldList) {
    for id in std::mem::take(list(&mut server.blocking)) {
        if let Some(client) = server.clients.get_mut(id) {
            release(dbs, &mut server.blocking, client);
            client.signal.set_blocked(false);
        }
    }
}

/// Lets the clients hang rules held go on (their commands run now).
pub(crate) fn release_hung(dbs: &mut [Db], server: &mut ServerState) {
    let_go(dbs, server, |b| &mut b.hung);
}

/// CLIENT PAUSE: pauses other clients until `until` (a later end or ALL
/// over WRITE extends a pause in force, as Redis's `pauseClients`). While
/// paused, expiry deletes nothing (expired keys read as absent), as in
/// Redis 7.
pub(crate) fn pause(ctx: &mut Ctx, until: u64, all: bool) {
    // A pause whose time is over (not yet ended by the timer) is gone: it
    // neither extends nor widens the new one.
    let pause = match ctx.server.blocking.pause.filter(|p| p.until >= ctx.now) {
        Some(p) => Pause {
            until: p.until.max(until),
            all: p.all || all,
        },
        None => Pause { until, all },
    };
    ctx.server.blocking.pause = Some(pause);
    for db in ctx.dbs.iter_mut() {
        db.keep_expired = true;
    }
    ctx.server.shared.block_timer.notify_one();
}

/// Ends the CLIENT PAUSE (CLIENT UNPAUSE, or its time is over): postponed
/// clients go on, in the order they were held.
pub(crate) fn unpause(dbs: &mut [Db], server: &mut ServerState) {
    server.blocking.pause = None;
    // A replica keeps expired keys for the primary's DELs; a hold of the
    // writes keeps them too.
    let keep = server.replica.is_replica() || server.blocking.held != 0;
    for db in dbs.iter_mut() {
        db.keep_expired = keep;
    }
    let_go(dbs, server, |b| &mut b.postponed);
}

/// Whether a CLIENT PAUSE or a [`Hold`] is in force (Redis's
/// `areClientsPaused`).
pub(crate) fn clients_paused(server: &ServerState) -> bool {
    server.blocking.pause.is_some() || server.blocking.held != 0
}

/// Whether expiry may delete keys (not while clients are paused).
pub(crate) fn expiry_allowed(server: &ServerState) -> bool {
    !clients_paused(server)
}

/// Why writes are held, besides CLIENT PAUSE (Redis's pause purposes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Hold {
    /// A FAILOVER, until it ends (Redis's `PAUSE_DURING_FAILOVER`).
    Failover,
    /// A shutdown waiting for lagging replicas, until it ends or is
    /// aborted (Redis's `PAUSE_DURING_SHUTDOWN`).
    Shutdown,
}

impl Hold {
    fn bit(self) -> u8 {
        1 << self as u8
    }
}

/// `why` holds every write from now until [`release_writes`] (Redis's
/// `pauseClients(purpose, LLONG_MAX, WRITE)`): nothing expires meanwhile,
/// so the dataset stands still.
pub(crate) fn hold_writes(dbs: &mut [Db], server: &mut ServerState, why: Hold) {
    server.blocking.held |= why.bit();
    for db in dbs.iter_mut() {
        db.keep_expired = true;
    }
}

/// `why` no longer holds writes: they go on (a FAILOVER's, as a replica's,
/// are refused now if it handed the primary role over), unless another
/// hold or a CLIENT PAUSE still holds them.
pub(crate) fn release_writes(dbs: &mut [Db], server: &mut ServerState, why: Hold) {
    if server.blocking.held & why.bit() == 0 {
        return;
    }
    server.blocking.held &= !why.bit();
    if server.blocking.held == 0 && server.blocking.pause.is_none() {
        unpause(dbs, server);
    }
}

/// The shape of every blocking pop (BLPOP, BLMOVE, BZPOPMIN, ...), as
/// Redis looks before it blocks: the first of `keys` that `ready` says can
/// serve now is served at once (`ready`'s error, WRONGTYPE, stops the look
/// at that key); otherwise the client blocks on all of them, to get a null
/// array on timeout, or `denied` at once inside MULTI or a script.
pub(crate) fn pop_or_block(
    ctx: &mut Ctx,
    args: &[Bytes],
    keys: &[Bytes],
    deadline: u64,
    ready: fn(&mut Ctx, &[u8]) -> Result<bool, Reply>,
    serve: Serve,
    denied: Reply,
) -> Reply {
    for key in keys {
        match ready(ctx, key) {
            Err(wrongtype) => return wrongtype,
            Ok(true) => return serve(ctx, args, key).unwrap_or(denied),
            Ok(false) => {}
        }
    }
    block(ctx, args, keys, deadline, Some(serve), Reply::NilArray, denied)
}

/// Blocks the calling client in WAIT until replicas acknowledge (the engine
/// answers it, [`crate::engine::Engine::replication_acked`]) or `deadline`
/// passes: then `timeout_reply`, which the acknowledgements keep current.
pub(crate) fn block_for_replicas(ctx: &mut Ctx, args: &[Bytes], deadline: u64, timeout_reply: Reply) -> Reply {
    let reply = block(ctx, args, &[], deadline, None, timeout_reply.clone(), timeout_reply);
    if let Some(b) = ctx.client.blocked.as_mut() {
        b.for_replicas = true;
    }
    reply
}

/// Blocks the calling client in SHUTDOWN until the server stops or the
/// shutdown is cancelled (then Redis's error, also its reply to CLIENT
/// UNBLOCK ... TIMEOUT, where Redis 7.0.15 panics). A client that cannot
/// block gets Redis's refusal.
pub(crate) fn block_for_shutdown(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let failed = errors::err(errors::SHUTDOWN_FAILED);
    let reply = block(
        ctx,
        args,
        &[],
        0,
        None,
        failed,
        errors::err(errors::SHUTDOWN_DENY_BLOCKING),
    );
    if let Some(b) = ctx.client.blocked.as_mut() {
        b.for_shutdown = true;
    }
    reply
}

/// Whether `client` is blocked in SHUTDOWN.
pub(crate) fn waits_for_shutdown(client: &ClientState) -> bool {
    client.blocked.as_ref().is_some_and(|b| b.for_shutdown)
}

/// Whether `client` is blocked in WAIT.
pub(crate) fn waits_for_replicas(client: &ClientState) -> bool {
    client.blocked.as_ref().is_some_and(|b| b.for_replicas)
}

/// Changes what a blocked client gets on timeout.
pub(crate) fn set_timeout_reply(client: &mut ClientState, reply: Reply) {
    if let Some(b) = client.blocked.as_mut() {
        b.timeout_reply = reply;
    }
}

/// Takes `client` out of every queue it waits in, without a reply (its
/// connection is gone).
pub(crate) fn release(dbs: &mut [Db], blocking: &mut Blocking, client: &mut ClientState) {
    let Some(blocked) = client.blocked.take() else {
        return;
    };
    for key in &blocked.keys {
        dbs[blocked.db].remove_waiter(key, client.id);
    }
    if blocked.deadline != 0 {
        blocking.timeouts.remove(&(blocked.deadline, client.id));
    }
    if blocked.postponed {
        blocking.postponed.retain(|&id| id != client.id);
        blocking.hung.retain(|&id| id != client.id);
    }
    blocking.count -= 1;
}

/// Unblocks `client` with `reply`: released from its queues, the reply
/// handed to its connection, which then goes on.
pub(crate) fn answer(dbs: &mut [Db], blocking: &mut Blocking, client: &mut ClientState, reply: Reply) {
    release(dbs, blocking, client);
    if !client.reply_off && reply != Reply::NOTHING {
        let mut out = BytesMut::new();
        if client.reply_marks.is_empty() {
            reply.encode(&mut out, client.resp3);
        } else {
            // Serving it published to it where Redis writes amid or after
            // the reply: the messages waiting are rewritten around it.
            let (messages, n) = client.encode_reply_among_messages(&reply, &mut out);
            client.outbox.written(messages, n);
        }
        client.outbox.push_reply(out.freeze());
    }
    client.reply_marks.clear();
    client.signal.set_blocked(false);
}

/// Unblocks `client` as its timeout would (`CLIENT UNBLOCK id TIMEOUT`) or
/// with the `-UNBLOCKED` error. False when it is not blocked.
pub(crate) fn unblock(dbs: &mut [Db], blocking: &mut Blocking, client: &mut ClientState, error: bool) -> bool {
    let Some(blocked) = client.blocked.as_ref() else {
        return false;
    };
    let reply = if error {
        errors::err(errors::UNBLOCKED)
    } else {
        blocked.timeout_reply.clone()
    };
    answer(dbs, blocking, client, reply);
    true
}

/// Unblocks every client blocked in a command (not one a CLIENT PAUSE or a
/// fault rule holds: its command has not run) with the error `text`, and
/// closes each once the error is written (Redis's
/// `disconnectAllBlockedClients`, when a primary becomes a replica).
pub(crate) fn unblock_all_with_error(dbs: &mut [Db], server: &mut ServerState, text: &'static str) {
    let mut waits = Vec::new();
    for client in server.clients.values_mut() {
        if client.blocked.as_ref().is_some_and(|b| !b.postponed) {
            if waits_for_replicas(client) {
                waits.push(client.id);
            }
            answer(dbs, &mut server.blocking, client, errors::err(text));
            client.signal.stop();
        }
    }
    for id in waits {
        server.repl.drop_waiter(id);
    }
}

/// The earliest deadline of a blocked client or of the pause.
pub(crate) fn next_deadline(blocking: &Blocking) -> Option<u64> {
    let first = blocking.timeouts.first().map(|&(deadline, _)| deadline);
    match (first, blocking.pause) {
        (Some(a), Some(p)) => Some(a.min(p.until)),
        (a, p) => a.or(p.map(|p| p.until)),
    }
}

/// Ends a pause whose time is over, and answers every blocked client whose
/// deadline is before `now` with its timeout reply, earliest first.
pub(crate) fn expire(dbs: &mut [Db], server: &mut ServerState, now: u64) {
    if server.blocking.pause.is_some_and(|p| p.until < now) {
        unpause(dbs, server);
    }
    while let Some(&(deadline, id)) = server.blocking.timeouts.first() {
        if deadline >= now {
            break;
        }
        let Some(mut client) = server.clients.take(id) else {
            // Not registered (cannot happen: release removes the entry).
            server.blocking.timeouts.remove(&(deadline, id));
            continue;
        };
        let reply = client.blocked.as_ref().map(|b| b.timeout_reply.clone());
        if let Some(reply) = reply {
            answer(dbs, &mut server.blocking, &mut client, reply);
        }
        server.clients.put_back(client);
    }
}

/// Serves the clients blocked on keys that became ready, in Redis's order
/// (`handleClientsBlockedOnKeys`): ready keys in the order they were
/// signalled, each key's waiters first come first served, and again while
/// serving makes more keys ready. `current` is the client whose command
/// just ran (out of the registry while it runs).
pub(crate) fn serve_ready(dbs: &mut [Db], server: &mut ServerState, current: &mut ClientState, now: u64) {
    loop {
        let Some(db) = dbs.iter().position(Db::has_ready) else {
            return;
        };
        for key in dbs[db].take_ready() {
            for id in dbs[db].waiters(&key) {
                // A waiter the key's type does not serve (a BZPOPMIN on a
                // key that is now a list, a BLPOP on a deleted key) is
                // passed over; a group reader on a deleted stream is
                // answered with an error.
                if id == current.id {
                    serve_one(dbs, server, current, &key, now);
                } else if let Some(mut waiter) = server.clients.take(id) {
                    serve_one(dbs, server, &mut waiter, &key, now);
                    server.clients.put_back(waiter);
                }
            }
        }
    }
}

/// Offers `key` to one blocked client; true if it was served.
fn serve_one(dbs: &mut [Db], server: &mut ServerState, client: &mut ClientState, key: &Bytes, now: u64) -> bool {
    let Some(blocked) = client.blocked.as_ref() else {
        return false;
    };
    let Some(serve) = blocked.serve else {
        return false;
    };
    let args = blocked.args.clone();
    let reply = {
        let mut ctx = Ctx {
            dbs: &mut *dbs,
            client: &mut *client,
            server: &mut *server,
            scripting: None,
            now,
            caller: crate::exec::Caller::Waiter,
        };
        crate::exec::serve_waiter(&mut ctx, serve, &args, key)
    };
    match reply {
        Some(reply) => {
            answer(dbs, &mut server.blocking, client, reply);
            true
        }
        None => false,
    }
}
