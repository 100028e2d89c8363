//! Transactions: MULTI, EXEC, DISCARD, WATCH, UNWATCH.
//!
//! While a client is in MULTI, the engine queues its commands (after the
//! same lookup, arity and auth checks a direct call gets; a failure marks the
//! transaction for EXECABORT) and EXEC runs them back to back under the one
//! engine lock, so no other client's command interleaves. WATCH records each
//! key's change count ([`crate::store::Db::watch`]); EXEC returns a null array
//! when any of them changed, expired or was flushed since.

use bytes::Bytes;

use super::flags::{FAST, NOSCRIPT};
use super::{CommandSpec, Ctx};
use crate::clients::ClientState;
use crate::errors::err;
use crate::protocol::Reply;
use crate::store::Db;

macro_rules! spec {
    ($($row:tt)*) => { command!("transactions", $($row)*) };
}

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    spec!("multi", 1, NOSCRIPT | FAST, (0, 0, 0), "Mark the start of a transaction block", multi),
    spec!("exec", 1, NOSCRIPT, (0, 0, 0), "Execute all commands issued after MULTI", exec),
    spec!("discard", 1, NOSCRIPT | FAST, (0, 0, 0), "Discard all commands issued after MULTI", discard),
    spec!("watch", -2, NOSCRIPT | FAST, (1, -1, 1), "Watch the given keys to determine execution of the MULTI/EXEC block", watch),
    spec!("unwatch", 1, NOSCRIPT | FAST, (0, 0, 0), "Forget about all watched keys", unwatch),
];

pub const EXECABORT: &str = "EXECABORT Transaction discarded because of previous errors.";

/// Commands that run at once even inside MULTI (everything else is queued).
pub fn runs_inside_multi(name: &str) -> bool {
    matches!(name, "exec" | "discard" | "multi" | "watch" | "quit" | "reset")
}

/// Stops watching every key the client watches.
pub fn unwatch_all(dbs: &mut [Db], client: &mut ClientState) {
    for (db, key, _) in client.watched.drain(..) {
        dbs[db].unwatch(&key);
    }
}

/// Unwatches everything and reports whether a watched key changed (or has
/// expired) since WATCH.
pub fn watched_keys_changed(dbs: &mut [Db], client: &mut ClientState, now: u64) -> bool {
    let mut changed = false;
    for (db, key, version) in &client.watched {
        // A lookup removes the key if it has expired meanwhile, counting as a change.
        dbs[*db].contains(key, now);
        if dbs[*db].watch_version(key) != *version {
            changed = true;
        }
    }
    unwatch_all(dbs, client);
    changed
}

fn multi(ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    if ctx.client.multi.is_some() {
        return err("ERR MULTI calls can not be nested");
    }
    ctx.client.multi = Some(Vec::new());
    ctx.client.multi_failed = false;
    Reply::Ok
}

/// EXEC outside MULTI (inside MULTI the engine runs the transaction itself).
fn exec(_ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    err("ERR EXEC without MULTI")
}

fn discard(ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    if ctx.client.multi.take().is_none() {
        return err("ERR DISCARD without MULTI");
    }
    ctx.client.multi_failed = false;
    unwatch_all(ctx.dbs, ctx.client);
    Reply::Ok
}

fn watch(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    if ctx.client.multi.is_some() {
        return err("ERR WATCH inside MULTI is not allowed");
    }
    let db = ctx.client.db;
    for key in &args[1..] {
        if ctx.client.watched.iter().any(|(d, k, _)| *d == db && k == key) {
            continue;
        }
        let version = ctx.dbs[db].watch(key);
        ctx.client.watched.push((db, crate::store::db::owned(key), version));
    }
    Reply::Ok
}

fn unwatch(ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    unwatch_all(ctx.dbs, ctx.client);
    Reply::Ok
}
