//! Client-side caching (Redis's `tracking.c`): CLIENT TRACKING, CACHING,
//! GETREDIR and TRACKINGINFO, the tracking table of keys clients read, the
//! BCAST prefix table, and the invalidation messages.
//!
//! How a write is known: every change to a key goes through
//! [`crate::store::Db::touch`] (Redis's `signalModifiedKey`, the hook WATCH
//! already relies on: stores, deletes, in-place changes, deadlines, lazy
//! and active expiry). While anything is tracked, each database logs the
//! touched keys; the logs are drained right after each handler by the
//! execution core's one hook ([`after_call`]), and after active expiry and
//! each batch ([`end_batch`]). The dirty counter says *how many* changes
//! but not which keys, and the effects feed and keyspace events exist only
//! while someone reads them, so neither would catch every write.
//!
//! When messages go out, as in Redis: an invalidation for another client
//! is queued on its outbox at once; one for the client running the
//! command waits until that top-level command (EXEC, the script) has
//! replied ([`flush_pending`]), so keys invalidated inside MULTI follow
//! EXEC's reply; BCAST clients get the keys of a whole batch in one
//! message once the batch is done. FLUSHDB and FLUSHALL send every
//! tracking client a null invalidation ([`flushed`]).
//!
//! What must never happen here: I/O, or a handler run.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use bytes::{BufMut, Bytes, BytesMut};

use crate::cmd::{flags, CommandSpec, Ctx};
use crate::errors;
use crate::exec::Caller;
use crate::net::clients::ClientState;
use crate::protocol::Reply;
use crate::state::ServerState;
use crate::store::Db;

/// The Pub/Sub channel RESP2 clients hear invalidations on (through
/// REDIRECT to a subscribed connection).
const INVALIDATE_CHANNEL: &[u8] = b"__redis__:invalidate";

/// How much harder each consecutive call tries to bring the table under
/// `tracking-table-max-keys` (Redis's effort per call: keys per attempt).
const LIMIT_EFFORT_STEP: usize = 100;

/// One client's CLIENT TRACKING settings (present while tracking is on).
#[derive(Debug, Default, Clone)]
pub struct ClientTracking {
    /// REDIRECT target's id; 0 for none (messages come to this client).
    pub redirect: u64,
    pub bcast: bool,
    pub optin: bool,
    pub optout: bool,
    pub noloop: bool,
    /// CLIENT CACHING YES/NO was given: it applies to the next command (or
    /// transaction) only.
    pub caching: bool,
    /// The REDIRECT target was gone when a message was due (flag `R`).
    pub broken_redirect: bool,
    /// BCAST prefixes, in byte order as Redis's radix tree lists them.
    pub prefixes: BTreeSet<Bytes>,
    /// The script or function command running now (EVAL, FCALL, ...) and
    /// its arguments: a read-only command inside it remembers the keys the
    /// script declared, not its own (Redis's `trackingRememberKeys` of the
    /// script's caller).
    pub(crate) script: Option<(&'static CommandSpec, Vec<Bytes>)>,
}

/// A BCAST prefix: its clients and the keys changed under it since the
/// last broadcast, each with the client that changed it last (0 for
/// expiry), so a NOLOOP client does not hear its own changes.
#[derive(Debug, Default)]
struct Prefix {
    clients: BTreeSet<u64>,
    keys: BTreeMap<Bytes, u64>,
}

/// The server's tracking state.
#[derive(Debug, Default)]
pub struct Tracking {
    /// Key -> ids of the clients that may cache it (Redis's TrackingTable;
    /// one namespace for every database, as Redis's).
    table: HashMap<Bytes, BTreeSet<u64>>,
    /// Ids across `table` (INFO `tracking_total_items`).
    items: usize,
    prefixes: BTreeMap<Bytes, Prefix>,
    /// Clients with tracking on (INFO `tracking_clients`).
    clients: usize,
    /// Invalidations for the running client, sent after its command has
    /// replied (`None`: a flush's null).
    pending: Vec<Option<Bytes>>,
    /// Invalidations for the running client of keys evicted before its
    /// command ran: written ahead of its reply, as Redis sends what happens
    /// outside `call()` at once ([`after_eviction`]).
    before_reply: Vec<Option<Bytes>>,
    /// Consecutive calls that could not bring the table under its limit.
    over_limit_calls: usize,
}

impl Tracking {
    /// Whether writes must be logged: keys are tracked or prefixes wait.
    fn active(&self) -> bool {
        !self.table.is_empty() || !self.prefixes.is_empty()
    }

    /// INFO's `tracking_clients`.
    pub(crate) fn client_count(&self) -> usize {
        self.clients
    }

    /// INFO's `tracking_total_keys`, `tracking_total_items`, `tracking_total_prefixes`.
    pub(crate) fn totals(&self) -> (usize, usize, usize) {
        (self.table.len(), self.items, self.prefixes.len())
    }
}

/// Turns logging of touched keys on or off in every database, as the
/// tracking state now needs.
fn sync_logging(dbs: &mut [Db], tracking: &Tracking) {
    let on = tracking.active();
    for db in dbs {
        db.log_touched = on;
    }
}

/// What an invalidation carries.
enum Payload<'a> {
    Key(&'a [u8]),
    /// A flush: RESP null in the tracking client's protocol.
    Null {
        resp3: bool,
    },
    /// BCAST: an encoded array of keys.
    Raw(&'a [u8]),
}

fn push_bulk(out: &mut BytesMut, b: &[u8]) {
    out.put_slice(format!("${}\r\n", b.len()).as_bytes());
    out.put_slice(b);
    out.put_slice(b"\r\n");
}

/// The message for a receiver in `resp3` (a push) or RESP2 (a Pub/Sub
/// message on [`INVALIDATE_CHANNEL`]).
fn message(payload: &Payload, resp3: bool) -> Bytes {
    let mut out = BytesMut::new();
    if resp3 {
        out.put_slice(b">2\r\n");
        push_bulk(&mut out, b"invalidate");
    } else {
        out.put_slice(b"*3\r\n");
        push_bulk(&mut out, b"message");
        push_bulk(&mut out, INVALIDATE_CHANNEL);
    }
    match payload {
        Payload::Key(key) => {
            out.put_slice(b"*1\r\n");
            push_bulk(&mut out, key);
        }
        Payload::Null { resp3: true } => out.put_slice(b"_\r\n"),
        Payload::Null { resp3: false } => out.put_slice(b"$-1\r\n"),
        Payload::Raw(raw) => out.put_slice(raw),
    }
    out.freeze()
}

/// Queues `bytes` for client `id`: the running client's go to `out` when
/// given (after its reply), else to its outbox; a client over its output
/// limit is closed.
fn deliver(
    server: &ServerState,
    current: &ClientState,
    id: u64,
    bytes: Bytes,
    now: u64,
    out: &mut Option<&mut BytesMut>,
) {
    if id == current.id {
        if let Some(out) = out.as_deref_mut() {
            out.put_slice(&bytes);
            return;
        }
    }
    let client = if id == current.id {
        Some(current)
    } else {
        server.clients.get(id)
    };
    if let Some(client) = client {
        if !client.outbox.push(bytes, now, server.client_limits.of(client)) {
            crate::net::client_mem::closed_for_output(client, now);
        }
    }
}

/// Sends one invalidation to tracking client `target` (Redis's
/// `sendTrackingMessage`): to its REDIRECT client if it has one (a RESP2
/// one only while subscribed), else to itself if it speaks RESP3; a gone
/// REDIRECT client marks the redirect broken and tells a RESP3 target.
fn send(
    server: &mut ServerState,
    current: &mut ClientState,
    target: u64,
    payload: &Payload,
    now: u64,
    out: &mut Option<&mut BytesMut>,
) {
    let (redirect, target_resp3) = {
        let client = if target == current.id {
            Some(&*current)
        } else {
            server.clients.get(target)
        };
        match client.and_then(|c| c.tracking.as_ref().map(|t| (t.redirect, c.resp3))) {
            Some(found) => found,
            None => return,
        }
    };
    let receiver = if redirect != 0 {
        let exists = redirect == current.id || server.clients.get(redirect).is_some();
        if !exists {
            let client = if target == current.id {
                Some(current as &mut ClientState)
            } else {
                server.clients.get_mut(target)
            };
            if let Some(t) = client.and_then(|c| c.tracking.as_mut()) {
                t.broken_redirect = true;
            }
            if target_resp3 {
                let mut msg = BytesMut::new();
                Reply::Push(vec![Reply::bulk("tracking-redir-broken"), Reply::Int(redirect as i64)])
                    .encode(&mut msg, true);
                deliver(server, current, target, msg.freeze(), now, out);
            }
            return;
        }
        redirect
    } else {
        target
    };
    let (resp3, subscribed) = {
        let client = if receiver == current.id {
            Some(&*current)
        } else {
            server.clients.get(receiver)
        };
        match client {
            Some(c) => (c.resp3, c.is_subscribed()),
            None => return,
        }
    };
    if !(resp3 || (redirect != 0 && subscribed)) {
        // RESP2 without a subscribed REDIRECT client: nowhere to say it.
        return;
    }
    deliver(server, current, receiver, message(payload, resp3), now, out);
}

/// A key changed (Redis's `trackingInvalidateKey`): it is noted for the
/// prefixes it falls under, and every client that read it is told and
/// forgotten. `writer` is the client that changed it (0: expiry, the
/// table's limit); `in_call`: `current` is running a command, so a NOLOOP
/// `current` is spared and its own messages wait for its reply.
fn invalidate_key(
    server: &mut ServerState,
    current: &mut ClientState,
    key: &Bytes,
    writer: u64,
    now: u64,
    in_call: bool,
) {
    if !server.tracking.prefixes.is_empty() && writer != LIMIT_WRITER {
        for (prefix, state) in server.tracking.prefixes.iter_mut() {
            if key.starts_with(prefix) {
                state.keys.insert(key.clone(), writer);
            }
        }
    }
    let Some(ids) = server.tracking.table.remove(key) else {
        return;
    };
    server.tracking.items -= ids.len();
    for id in ids {
        let is_current = in_call && id == current.id;
        let eligible = {
            let client = if id == current.id {
                Some(&*current)
            } else {
                server.clients.get(id)
            };
            client
                .and_then(|c| c.tracking.as_ref())
                .is_some_and(|t| !(t.bcast || (t.noloop && is_current)))
        };
        if !eligible {
            continue;
        }
        if is_current {
            server.tracking.pending.push(Some(key.clone()));
        } else {
            send(server, current, id, &Payload::Key(key), now, &mut None);
        }
    }
}

/// The `writer` of an invalidation the table's limit makes: not a change
/// of the key, so no prefix hears of it.
const LIMIT_WRITER: u64 = u64::MAX;

/// Sends the invalidations of the keys the databases logged as touched
/// since the last drain. `in_call`: a command of `current` is running, so
/// its own invalidations wait for its reply.
fn drain(dbs: &mut [Db], server: &mut ServerState, current: &mut ClientState, writer: u64, now: u64, in_call: bool) {
    for db in dbs.iter_mut() {
        if !db.has_touched() {
            continue;
        }
        for (key, by_expiry) in db.take_touched() {
            let writer = if by_expiry { 0 } else { writer };
            invalidate_key(server, current, &key, writer, now, in_call);
            if !in_call {
                flush_pending_to_outbox(server, current, now);
            }
        }
    }
}

fn flush_pending_to_outbox(server: &mut ServerState, current: &mut ClientState, now: u64) {
    if !server.tracking.pending.is_empty() {
        send_pending(server, current, now, &mut None);
    }
}

fn send_pending(server: &mut ServerState, current: &mut ClientState, now: u64, out: &mut Option<&mut BytesMut>) {
    let pending = std::mem::take(&mut server.tracking.pending);
    for key in pending {
        let payload = match &key {
            Some(key) => Payload::Key(key),
            None => Payload::Null { resp3: current.resp3 },
        };
        send(server, current, current.id, &payload, now, out);
    }
}

/// The execution core's hook after every handler ([`crate::exec::call`]):
/// the invalidations of what the command changed, then the keys a tracking
/// client's read-only command read are remembered (not for a row whose
/// inner commands do the reading, EVAL_RO and FCALL_RO, nor for shard
/// channels, which are keys only for routing); after a client's top-level
/// command, CLIENT CACHING's one-command window closes. A read-only command of a
/// script remembers the keys the script declares, as Redis's (a script
/// that reads nothing makes its caller remember nothing).
pub(crate) fn after_call(ctx: &mut Ctx, caller: Caller, spec: &'static CommandSpec, args: &[Bytes]) {
    let top_level = caller == Caller::Client;
    let server = &mut *ctx.server;
    if !server.tracking.active() && ctx.client.tracking.is_none() {
        return;
    }
    let writer = ctx.client.id;
    drain(ctx.dbs, server, ctx.client, writer, ctx.now, true);
    let in_script = matches!(caller, Caller::Script { .. });
    let reads = spec.has(flags::READONLY) && !spec.has(flags::NO_PROPAGATE) && !spec.has(flags::PUBSUB);
    if in_script && reads {
        let script = ctx.client.tracking.as_mut().and_then(|t| t.script.take());
        if let Some((script_spec, script_args)) = script {
            remember(server, ctx.client, script_spec, &script_args);
            if let Some(t) = ctx.client.tracking.as_mut() {
                t.script = Some((script_spec, script_args));
            }
        }
    } else if reads {
        remember(server, ctx.client, spec, args);
    }
    if !in_script && spec.declared.is_some() {
        if let Some(t) = ctx.client.tracking.as_mut() {
            t.script = None;
        }
    }
    if top_level {
        if let Some(t) = ctx.client.tracking.as_mut() {
            if ctx.client.multi.is_none() && !crate::cmd::client::is_client_subcommand(spec) {
                t.caching = false;
            }
        }
    }
    sync_logging(ctx.dbs, &server.tracking);
}

/// Before a script or function command of a tracking client runs: keeps
/// the command for [`after_call`] of the commands its script runs.
pub(crate) fn before_call(ctx: &mut Ctx, caller: Caller, spec: &'static CommandSpec, args: &[Bytes]) {
    if spec.declared.is_none() || matches!(caller, Caller::Script { .. }) {
        return;
    }
    if let Some(t) = ctx.client.tracking.as_mut() {
        t.script = Some((spec, args.to_vec()));
    }
}

/// Remembers the keys of `args` for `client` (Redis's `trackingRememberKeys`).
fn remember(server: &mut ServerState, client: &ClientState, spec: &CommandSpec, args: &[Bytes]) {
    let Some(t) = client.tracking.as_ref() else {
        return;
    };
    if t.bcast || (t.optin && !t.caching) || (t.optout && t.caching) {
        return;
    }
    for i in crate::cmd::keyspecs::command_keys(spec, args) {
        let Some(key) = args.get(i) else { continue };
        let ids = server.tracking.table.entry(crate::store::db::owned(key)).or_default();
        if ids.insert(client.id) {
            server.tracking.items += 1;
        }
    }
}

/// Brings the table under `tracking-table-max-keys` by invalidating keys
/// (Redis's `trackingLimitUsedSlots`: an effort that grows while it fails).
/// Nothing is done while no client tracks, as in Redis: the keys of
/// clients that turned tracking off stay until someone tracks again.
/// `in_call`: `current`'s command is being admitted, so its own messages
/// are queued (and a NOLOOP `current` is spared, as Redis spares its
/// `current_client`).
fn limit(server: &mut ServerState, current: &mut ClientState, now: u64, in_call: bool) {
    let max = server.config.tracking_table_max_keys as usize;
    if server.tracking.clients == 0 {
        return;
    }
    if max == 0 || server.tracking.table.len() <= max {
        server.tracking.over_limit_calls = 0;
        return;
    }
    let mut effort = LIMIT_EFFORT_STEP * (server.tracking.over_limit_calls + 1);
    while effort > 0 {
        effort -= 1;
        let Some(key) = server.tracking.table.keys().next().cloned() else {
            break;
        };
        invalidate_key(server, current, &key, LIMIT_WRITER, now, in_call);
        if server.tracking.table.len() <= max {
            server.tracking.over_limit_calls = 0;
            return;
        }
    }
    server.tracking.over_limit_calls += 1;
}

/// Admission's step after the OOM check (Redis's `processCommand`): the
/// table is brought under its limit before the command runs, and the
/// running client's invalidations go ahead of its reply
/// ([`flush_before_reply`]).
pub(crate) fn limit_at_admission(ctx: &mut Ctx) {
    let server = &mut *ctx.server;
    if server.tracking.clients == 0 {
        return;
    }
    limit(server, ctx.client, ctx.now, true);
    let early = std::mem::take(&mut server.tracking.pending);
    server.tracking.before_reply.extend(early);
    sync_logging(ctx.dbs, &server.tracking);
}

/// The server's periodic tick (Redis's `serverCron`): the table is brought
/// under its limit even when no command comes (CONFIG SET lowered it).
pub(crate) fn cron(dbs: &mut [Db], server: &mut ServerState, now: u64) {
    if server.tracking.clients == 0 {
        return;
    }
    let mut placeholder = internal_client(now);
    limit(server, &mut placeholder, now, false);
    sync_logging(dbs, &server.tracking);
}

/// After admission's eviction (Redis's `performEvictions`, before the
/// command): the evicted keys' invalidations; those for the running client
/// go ahead of its reply ([`flush_before_reply`]).
pub(crate) fn after_eviction(ctx: &mut Ctx) {
    let server = &mut *ctx.server;
    if !server.tracking.active() && ctx.client.tracking.is_none() {
        return;
    }
    drain(ctx.dbs, server, ctx.client, 0, ctx.now, true);
    let evicted = std::mem::take(&mut server.tracking.pending);
    server.tracking.before_reply.extend(evicted);
    sync_logging(ctx.dbs, &server.tracking);
}

/// Writes the running client's invalidations of keys evicted before its
/// command ran, ahead of its reply.
pub(crate) fn flush_before_reply(server: &mut ServerState, client: &mut ClientState, now: u64, out: &mut BytesMut) {
    if server.tracking.before_reply.is_empty() {
        return;
    }
    let early = std::mem::take(&mut server.tracking.before_reply);
    let later = std::mem::replace(&mut server.tracking.pending, early);
    send_pending(server, client, now, &mut Some(out));
    server.tracking.pending = later;
}

/// After a client's command has replied into `out`: the invalidations
/// that waited for it (Redis's `trackingHandlePendingKeyInvalidations`).
pub(crate) fn flush_pending(server: &mut ServerState, client: &mut ClientState, now: u64, out: &mut BytesMut) {
    if !server.tracking.pending.is_empty() {
        send_pending(server, client, now, &mut Some(out));
    }
}

/// The end of a batch, active expiry or a control-plane call: what was
/// touched outside a command is invalidated, and BCAST clients get the
/// keys changed under their prefixes (Redis's
/// `trackingBroadcastInvalidationMessages`, run before it sleeps).
pub(crate) fn end_batch(dbs: &mut [Db], server: &mut ServerState, current: Option<&mut ClientState>, now: u64) {
    if !server.tracking.active() {
        return;
    }
    let mut placeholder;
    let current = match current {
        Some(c) => c,
        None => {
            placeholder = internal_client(now);
            &mut placeholder
        }
    };
    drain(dbs, server, current, 0, now, false);
    flush_pending_to_outbox(server, current, now);
    broadcast(server, current, now);
    sync_logging(dbs, &server.tracking);
}

/// A stand-in "running client" for work no client runs (expiry): it
/// tracks nothing, so every message goes to its receiver's outbox.
fn internal_client(now: u64) -> ClientState {
    use std::net::{Ipv4Addr, SocketAddr};
    use std::sync::Arc;
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
    let signal = Arc::new(crate::net::clients::ConnSignal::default());
    let outbox = crate::net::clients::Outbox::new(signal.clone());
    ClientState::new(0, addr, addr, now, signal, outbox)
}

/// The keys of `keys` as a RESP array, leaving out those `skip` changed.
fn key_array(keys: &BTreeMap<Bytes, u64>, skip: Option<u64>) -> Option<Vec<u8>> {
    let chosen: Vec<&Bytes> = keys
        .iter()
        .filter(|(_, &w)| skip.is_none_or(|s| w != s))
        .map(|(k, _)| k)
        .collect();
    if chosen.is_empty() {
        return None;
    }
    let mut out = BytesMut::new();
    out.put_slice(format!("*{}\r\n", chosen.len()).as_bytes());
    for k in chosen {
        push_bulk(&mut out, k);
    }
    Some(out.to_vec())
}

fn broadcast(server: &mut ServerState, current: &mut ClientState, now: u64) {
    if server.tracking.clients == 0 {
        return;
    }
    let mut sends: Vec<(u64, Vec<u8>)> = Vec::new();
    for state in server.tracking.prefixes.values_mut() {
        if state.keys.is_empty() {
            continue;
        }
        let common = key_array(&state.keys, None);
        for &id in &state.clients {
            let noloop = if id == current.id {
                current.tracking.as_ref().is_some_and(|t| t.noloop)
            } else {
                server
                    .clients
                    .get(id)
                    .and_then(|c| c.tracking.as_ref())
                    .is_some_and(|t| t.noloop)
            };
            let raw = if noloop {
                key_array(&state.keys, Some(id))
            } else {
                common.clone()
            };
            if let Some(raw) = raw {
                sends.push((id, raw));
            }
        }
        state.keys.clear();
    }
    for (id, raw) in sends {
        send(server, current, id, &Payload::Raw(&raw), now, &mut None);
    }
}

/// FLUSHDB / FLUSHALL (Redis's `trackingInvalidateKeysOnFlush`): every
/// tracking client gets a null invalidation (the running one after its
/// command), and the table is emptied.
pub(crate) fn flushed(ctx: &mut Ctx) {
    let server = &mut *ctx.server;
    if server.tracking.clients > 0 {
        if ctx.client.tracking.is_some() {
            server.tracking.pending.push(None);
        }
        let mut ids: Vec<(u64, bool)> = server
            .clients
            .values()
            .filter(|c| c.tracking.is_some())
            .map(|c| (c.id, c.resp3))
            .collect();
        // In Redis's order: its list of clients, oldest first.
        ids.sort_unstable();
        for (id, resp3) in ids {
            if id != ctx.client.id {
                send(server, ctx.client, id, &Payload::Null { resp3 }, ctx.now, &mut None);
            }
        }
    }
    server.tracking.table.clear();
    server.tracking.items = 0;
    sync_logging(ctx.dbs, &server.tracking);
}

/// Turns tracking off for `client` (CLIENT TRACKING OFF, RESET,
/// disconnect): out of its prefixes; its keys stay in the table until
/// they are next invalidated, as in Redis.
pub(crate) fn disable(server: &mut ServerState, client: &mut ClientState) {
    let Some(t) = client.tracking.take() else {
        return;
    };
    server.tracking.clients -= 1;
    for prefix in &t.prefixes {
        if let Some(state) = server.tracking.prefixes.get_mut(prefix) {
            state.clients.remove(&client.id);
            if state.clients.is_empty() {
                server.tracking.prefixes.remove(prefix);
            }
        }
    }
}

fn is(arg: &[u8], word: &str) -> bool {
    arg.eq_ignore_ascii_case(word.as_bytes())
}

/// CLIENT TRACKING ON|OFF [REDIRECT id] [BCAST] [PREFIX p ...] [OPTIN]
/// [OPTOUT] [NOLOOP], with Redis's checks in Redis's order.
pub(crate) fn client_tracking(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let mut redirect: u64 = 0;
    let (mut bcast, mut optin, mut optout, mut noloop) = (false, false, false, false);
    let mut prefixes: Vec<Bytes> = Vec::new();
    let mut j = 3;
    while j < args.len() {
        let more = j + 1 < args.len();
        let arg = &args[j];
        if is(arg, "redirect") && more {
            j += 1;
            if redirect != 0 {
                return errors::err(errors::TRACKING_ONE_REDIRECT);
            }
            let Some(id) = crate::store::num::parse_i64(&args[j]) else {
                return errors::err(errors::NOT_INTEGER);
            };
            let exists = id > 0 && (id as u64 == ctx.client.id || ctx.server.clients.get(id as u64).is_some());
            if !exists {
                return errors::err(errors::TRACKING_NO_REDIRECT_CLIENT);
            }
            redirect = id as u64;
        } else if is(arg, "bcast") {
            bcast = true;
        } else if is(arg, "optin") {
            optin = true;
        } else if is(arg, "optout") {
            optout = true;
        } else if is(arg, "noloop") {
            noloop = true;
        } else if is(arg, "prefix") && more {
            j += 1;
            prefixes.push(args[j].clone());
        } else {
            return errors::err(errors::SYNTAX);
        }
        j += 1;
    }
    if is(&args[2], "on") {
        if !bcast && !prefixes.is_empty() {
            return errors::err(errors::TRACKING_PREFIX_NEEDS_BCAST);
        }
        if let Some(t) = ctx.client.tracking.as_ref() {
            if t.bcast != bcast {
                return errors::err(errors::TRACKING_BCAST_SWITCH);
            }
        }
        if bcast && (optin || optout) {
            return errors::err(errors::TRACKING_OPT_WITH_BCAST);
        }
        if optin && optout {
            return errors::err(errors::TRACKING_OPTIN_AND_OPTOUT);
        }
        if let Some(t) = ctx.client.tracking.as_ref() {
            if (optin && t.optout) || (optout && t.optin) {
                return errors::err(errors::TRACKING_OPT_SWITCH);
            }
        }
        if bcast {
            if let Some(reply) = prefix_collision(ctx.client.tracking.as_deref(), &prefixes) {
                return reply;
            }
        }
        enable(ctx, redirect, bcast, optin, optout, noloop, prefixes);
    } else if is(&args[2], "off") {
        disable(ctx.server, ctx.client);
    } else {
        return errors::err(errors::SYNTAX);
    }
    sync_logging(ctx.dbs, &ctx.server.tracking);
    Reply::Ok
}

/// Two prefixes overlap when one starts the other.
fn overlap(a: &[u8], b: &[u8]) -> bool {
    let n = a.len().min(b.len());
    a[..n] == b[..n]
}

/// Redis's `checkPrefixCollisionsOrReply`: each new prefix against the
/// client's, then against the new ones after it.
fn prefix_collision(current: Option<&ClientTracking>, prefixes: &[Bytes]) -> Option<Reply> {
    for (i, p) in prefixes.iter().enumerate() {
        if let Some(t) = current {
            if let Some(existing) = t.prefixes.iter().find(|e| overlap(e, p)) {
                return Some(errors::tracking_prefix_overlaps_existing(p, existing));
            }
        }
        if let Some(other) = prefixes[i + 1..].iter().find(|o| overlap(p, o)) {
            return Some(errors::tracking_prefix_overlaps_other(p, other));
        }
    }
    None
}

/// Redis's `enableTracking`: the mode flags are set afresh (CACHING and a
/// broken redirect kept as they are), prefixes added to those the client has.
fn enable(ctx: &mut Ctx, redirect: u64, bcast: bool, optin: bool, optout: bool, noloop: bool, prefixes: Vec<Bytes>) {
    let server = &mut *ctx.server;
    let client = &mut *ctx.client;
    if client.tracking.is_none() {
        server.tracking.clients += 1;
    }
    let t = client.tracking.get_or_insert_with(Default::default);
    t.broken_redirect = false;
    t.redirect = redirect;
    t.bcast = bcast;
    t.optin = optin;
    t.optout = optout;
    t.noloop = noloop;
    if bcast {
        let empty = [Bytes::new()];
        let wanted: &[Bytes] = if prefixes.is_empty() { &empty } else { &prefixes };
        for p in wanted {
            let p = crate::store::db::owned(p);
            let state = server.tracking.prefixes.entry(p.clone()).or_default();
            if state.clients.insert(client.id) {
                t.prefixes.insert(p);
            }
        }
    }
}

/// CLIENT CACHING YES|NO.
pub(crate) fn client_caching(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let Some(t) = ctx.client.tracking.as_mut() else {
        return errors::err(errors::CACHING_NOT_TRACKING);
    };
    if is(&args[2], "yes") {
        if !t.optin {
            return errors::err(errors::CACHING_YES_NOT_OPTIN);
        }
    } else if is(&args[2], "no") {
        if !t.optout {
            return errors::err(errors::CACHING_NO_NOT_OPTOUT);
        }
    } else {
        return errors::err(errors::SYNTAX);
    }
    t.caching = true;
    Reply::Ok
}

/// CLIENT GETREDIR: the REDIRECT id, 0 without one, -1 when not tracking.
pub(crate) fn client_getredir(ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    Reply::Int(ctx.client.tracking.as_ref().map_or(-1, |t| t.redirect as i64))
}

/// CLIENT TRACKINGINFO: a map of `flags` (a set), `redirect`, `prefixes`.
pub(crate) fn client_trackinginfo(ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    let t = ctx.client.tracking.as_deref();
    let mut flags = vec![Reply::bulk(if t.is_some() { "on" } else { "off" })];
    if let Some(t) = t {
        for (on, word) in [
            (t.bcast, "bcast"),
            (t.optin, "optin"),
            (t.optin && t.caching, "caching-yes"),
            (t.optout, "optout"),
            (t.optout && t.caching, "caching-no"),
            (t.noloop, "noloop"),
            (t.broken_redirect, "broken_redirect"),
        ] {
            if on {
                flags.push(Reply::bulk(word));
            }
        }
    }
    Reply::Map(vec![
        (Reply::bulk("flags"), Reply::Set(flags)),
        (Reply::bulk("redirect"), Reply::Int(t.map_or(-1, |t| t.redirect as i64))),
        (
            Reply::bulk("prefixes"),
            Reply::Array(t.map_or_else(Vec::new, |t| t.prefixes.iter().cloned().map(Reply::Bulk).collect())),
        ),
    ])
}
