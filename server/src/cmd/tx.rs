//! Transactions: MULTI, EXEC, DISCARD, WATCH, UNWATCH.
//!
//! While a client is in MULTI, [`crate::exec::admit`] queues its commands
//! (after the same lookup, arity and auth checks a direct call gets; a
//! failure marks the transaction for EXECABORT) and EXEC runs them back to back under the one
//! engine lock, so no other client's command interleaves. WATCH records each
//! key's change count ([`crate::store::Db::watch`]); EXEC returns a null array
//! when any of them changed, expired or was flushed since.

use bytes::Bytes;

use super::flags::*;
use super::{acl, CommandSpec, Ctx};
use crate::errors::{self, err};
use crate::exec::busy::{Answer, BusyCtx, TxChange};
use crate::net::clients::ClientState;
use crate::protocol::Reply;
use crate::store::Db;

macro_rules! spec {
    ($($row:tt)*) => { command!("transactions", $($row)*) };
}

#[rustfmt::skip]
pub(crate) static COMMANDS: &[CommandSpec] = &[
    spec!("multi", 1, NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY | TX_CONTROL, acl::TRANSACTION, "Mark the start of a transaction block", multi)
        .while_busy(multi_while_busy),
    spec!("exec", 1, NOSCRIPT | LOADING | STALE | SKIP_SLOWLOG | TX_CONTROL | EXEC | NO_PROPAGATE | OOM_OK_IN_MULTI, acl::TRANSACTION, "Execute all commands issued after MULTI", exec),
    spec!("discard", 1, NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY | TX_CONTROL | OOM_OK_IN_MULTI, acl::TRANSACTION, "Discard all commands issued after MULTI", discard)
        .while_busy(discard_while_busy),
    spec!("watch", -2, NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY | TX_CONTROL, acl::TRANSACTION, "Watch the given keys to determine execution of the MULTI/EXEC block", watch)
        .while_busy(watch_while_busy),
    spec!("unwatch", 1, NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY, acl::TRANSACTION, "Forget about all watched keys", unwatch),
];

/// Stops watching every key the client watches.
pub(crate) fn unwatch_all(dbs: &mut [Db], client: &mut ClientState) {
    for w in client.watched.drain(..) {
        dbs[w.db].unwatch(&w.key);
    }
}

/// Unwatches everything and reports whether a watched key changed (or has
/// expired) since WATCH. A key already past its deadline at WATCH counts
/// as changed only if it is live now and was written since (Redis's
/// `wk->expired`: its expiry or deletion is no logical change); so does a
/// missing key that SWAPDB replaced with one past its deadline.
pub(crate) fn watched_keys_changed(dbs: &mut [Db], client: &mut ClientState, now: u64) -> bool {
    let mut changed = false;
    for w in &client.watched {
        let stale = w.stale || dbs[w.db].swapped_in_stale(&w.key, w.version);
        // A lookup removes the key if it has expired meanwhile, counting as a change.
        let live = dbs[w.db].contains(&w.key, now);
        let touched = dbs[w.db].watch_version(&w.key) != w.version;
        if touched && (live || !stale) {
            changed = true;
        }
    }
    unwatch_all(dbs, client);
    changed
}

fn multi(ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    if ctx.client.multi.is_some() {
        return err(errors::MULTI_NESTED);
    }
    ctx.client.multi = Some(Vec::new());
    ctx.client.multi_failed = false;
    Reply::Ok
}

/// EXEC: EXECABORT if queueing failed, a null array if a watched key
/// changed, otherwise every queued command's reply, all run in this one
/// lock hold.
fn exec(ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    let Some(queued) = ctx.client.multi.take() else {
        return err(errors::EXEC_WITHOUT_MULTI);
    };
    let failed = std::mem::take(&mut ctx.client.multi_failed);
    let changed = watched_keys_changed(ctx.dbs, ctx.client, ctx.now);
    if failed {
        return err(errors::EXECABORT);
    }
    if changed {
        return Reply::NilArray;
    }
    let mut replies = Vec::with_capacity(queued.len());
    // Redis writes EXEC's `*n` first, then each command's reply as it
    // runs: what a command publishes to this client goes before, amid or
    // after that command's reply, so its marks are moved past the replies
    // before it (node 0 being EXEC's header).
    let marking = ctx.client.is_subscribed();
    let mut written = 1;
    for args in &queued {
        let first = ctx.client.reply_marks.len();
        if marking {
            ctx.mark_reply(written);
        }
        let reply = crate::exec::call_queued(ctx, args);
        if marking {
            let nodes = reply.nodes(ctx.client.resp3);
            for mark in &mut ctx.client.reply_marks[first + 1..] {
                mark.nodes = written + mark.nodes.min(nodes);
            }
            written += nodes;
        }
        replies.push(reply);
    }
    ctx.client.last_cmd = "exec".into();
    Reply::Array(replies)
}

/// The transaction ends without running (a refused EXEC, Redis's
/// `execCommandAbort`): the queue and the watches are dropped.
pub(crate) fn end(ctx: &mut Ctx) {
    ctx.client.multi = None;
    ctx.client.multi_failed = false;
    unwatch_all(ctx.dbs, ctx.client);
}

fn discard(ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    if ctx.client.multi.take().is_none() {
        return err(errors::DISCARD_WITHOUT_MULTI);
    }
    ctx.client.multi_failed = false;
    unwatch_all(ctx.dbs, ctx.client);
    Reply::Ok
}

/// MULTI while a script is busy: accepted, as Redis does, so a pipelined
/// transaction is not half refused; its commands get -BUSY and doom it.
fn multi_while_busy(ctx: &mut BusyCtx, _args: &[Bytes]) -> Answer {
    if ctx.view.in_multi {
        return Answer::Reply(err(errors::MULTI_NESTED));
    }
    ctx.view.in_multi = true;
    ctx.changes.push(TxChange::Begin);
    Answer::Reply(Reply::Ok)
}

fn discard_while_busy(ctx: &mut BusyCtx, _args: &[Bytes]) -> Answer {
    if !ctx.view.in_multi {
        return Answer::Reply(err(errors::DISCARD_WITHOUT_MULTI));
    }
    ctx.view.in_multi = false;
    ctx.changes.push(TxChange::End);
    Answer::Reply(Reply::Ok)
}

/// WATCH while a script is busy: refused inside MULTI; otherwise served
/// by the script's hook on the engine, so the watch starts from the key as
/// it is at that instant and what the script writes later counts as a change.
fn watch_while_busy(ctx: &mut BusyCtx, _args: &[Bytes]) -> Answer {
    if ctx.view.in_multi {
        return Answer::Reply(err(errors::WATCH_IN_MULTI));
    }
    Answer::Engine
}

/// Applies what busy answers changed ([`TxChange`]) to the client, before
/// its next batch.
pub(crate) fn apply_busy_changes(
    dbs: &mut [Db],
    client: &mut ClientState,
    server: &mut crate::state::ServerState,
    now: u64,
    changes: Vec<TxChange>,
) {
    for change in changes {
        match change {
            TxChange::Begin => {
                client.multi = Some(Vec::new());
                client.multi_failed = false;
            }
            TxChange::Queue(args) => {
                if let Some(queue) = client.multi.as_mut() {
                    queue.push(args);
                }
            }
            TxChange::Fail => client.multi_failed = true,
            TxChange::Rejected(spec, reply) => server.observe.reject(spec, &reply),
            TxChange::Denied {
                spec,
                args,
                denied,
                context,
            } => crate::exec::log_denial_of(server, client, now, spec, &args, denied, context),
            TxChange::End => {
                client.multi = None;
                client.multi_failed = false;
                unwatch_all(dbs, client);
            }
        }
    }
}

fn watch(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    if ctx.client.multi.is_some() {
        return err(errors::WATCH_IN_MULTI);
    }
    let db = ctx.client.db;
    for key in &args[1..] {
        if ctx.client.watched.iter().any(|w| w.db == db && w.key == key) {
            continue;
        }
        // Past its deadline but not removed yet (WATCH removes nothing).
        let stale = ctx.dbs[db]
            .peek(key)
            .is_some_and(|item| crate::store::db::is_expired(item.expire_at(), ctx.now));
        let version = ctx.dbs[db].watch(key);
        ctx.client.watched.push(crate::net::clients::WatchedKey {
            db,
            key: crate::store::db::owned(key),
            version,
            stale,
        });
    }
    Reply::Ok
}

fn unwatch(ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    unwatch_all(ctx.dbs, ctx.client);
    Reply::Ok
}
