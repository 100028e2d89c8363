//! Requests answered while a script is busy (past `busy-reply-threshold`).
//!
//! The script holds the keyspace for its whole run, so a connection answers
//! its own requests meanwhile, without the engine, as Redis answers them
//! from inside the script's timeout hook: the same admission
//! ([`crate::exec::admit`], with the busy script as one of its facts), so
//! `-BUSY` for every command without the `allow_busy` flag. An `allow_busy`
//! command is answered by its row's busy handler (MULTI, DISCARD, WATCH
//! inside MULTI, QUIT, SCRIPT KILL, FUNCTION KILL, FUNCTION STATS,
//! SHUTDOWN NOSAVE) when the connection can answer it alone. What these
//! answers change in the client (its transaction, and the refusal counts
//! and ACL log entries Redis records at once) is recorded as [`TxChange`]s
//! and left in the script's [`Inbox`], where the script's hook applies it
//! within a few thousand instructions (or the script's end does); a
//! refused EXEC ends the transaction.
//!
//! The other `allow_busy` commands need the engine: HELLO, AUTH, WATCH
//! outside MULTI, UNWATCH, RESET, REPLCONF. The connection leaves such a
//! request in the script's [`Inbox`], and the script's instruction hook
//! serves it between two of the script's instructions, on the engine the
//! script holds — where Redis serves every request while a script is busy.
//! It runs as any request does ([`crate::engine::Batch`]: the client's
//! pending [`TxChange`]s first, then admission and the command), so WATCH
//! records the key as it is at that instant and a later write by the script
//! dooms the transaction, exactly as in Redis. A request the hook has not
//! taken when the script ends (or is told to stop) runs on the engine after
//! it, as any other.
//!
//! A restricted user's requests are checked against the ACL here too,
//! before the busy check as in Redis's `processCommand` (`-NOPERM`, logged
//! in the ACL log by the hook), from the user's rules as they
//! stood after the client's last batch; if any user changed since (ACL
//! SETUSER before the script), the hook refreshes the client's view first.
//!
//! What must never happen here: the connection side reading or changing
//! the engine's state (only the hook, inside the script's lock hold, does),
//! or a command picked by name rather than by the flags and busy handler
//! of its row.

use std::sync::atomic::{AtomicBool, Ordering};

use bytes::{Bytes, BytesMut};

use crate::engine::{Batch, BatchEnd};
use crate::errors::{self, err};
use crate::exec::{self, Caller, Facts, Guards, NoHolds, TxEffect, Verdict};
use crate::lua::ScriptState;
use crate::net::clients::{ClientState, CloseSignal};
use crate::protocol::Reply;
use crate::state::ServerState;
use crate::store::Db;

/// What a connection knows of its client between batches (the engine
/// reports it after each one), enough for admission's checks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClientView {
    pub authenticated: bool,
    pub in_multi: bool,
    /// RESP2 and subscribed: only the pub/sub commands are allowed.
    pub subscribed_resp2: bool,
    /// Connected over loopback (protected commands set to `local`).
    pub local: bool,
    /// RESP3 (HELLO 3): busy answers are encoded as the client speaks.
    pub resp3: bool,
    /// The client's ACL user, when it is restricted: the rules its
    /// requests are checked against while a script is busy.
    pub(crate) restricted: Option<crate::acl::Snapshot>,
}

impl ClientView {
    /// The view of `client` as the engine has it now.
    pub(crate) fn of(state: &ServerState, client: &ClientState) -> ClientView {
        ClientView {
            local: client.addr.is_local(),
            resp3: client.resp3,
            authenticated: client.authenticated,
            in_multi: client.multi.is_some(),
            subscribed_resp2: !client.resp3 && client.is_subscribed(),
            restricted: state.acl.snapshot(&client.user),
        }
    }
}

/// A change to the client's transaction made while the engine was busy.
#[derive(Clone, Debug)]
pub(crate) enum TxChange {
    /// MULTI was accepted.
    Begin,
    /// A command was queued.
    Queue(Vec<Bytes>),
    /// A command was refused inside MULTI: EXEC will answer EXECABORT.
    Fail,
    /// DISCARD, or a refused EXEC: the transaction ended (watches dropped).
    End,
    /// A command was refused (`-BUSY`, NOAUTH, ...): counted in the stats
    /// (rejected calls, errorstats) by the script's hook, as Redis counts it
    /// at once.
    Rejected(Option<&'static crate::cmd::CommandSpec>, Reply),
    /// A command the client's user may not run: an ACL log entry, added
    /// by the script's hook (Redis adds it at once).
    Denied {
        spec: &'static crate::cmd::CommandSpec,
        args: Vec<Bytes>,
        denied: crate::acl::Denied,
        context: crate::acl::Context,
    },
}

/// What a busy handler may touch.
pub struct BusyCtx<'a> {
    pub view: &'a mut ClientView,
    pub(crate) changes: &'a mut Vec<TxChange>,
    pub script: &'a ScriptState,
    /// The server's shutdown signal (SHUTDOWN NOSAVE).
    pub shutdown: &'a CloseSignal,
    /// Set with `shutdown` by SHUTDOWN NOSAVE: no final save.
    pub(crate) nosave: &'a std::sync::atomic::AtomicBool,
    /// Who may run the protected commands.
    pub guards: Guards,
    /// The function an FCALL runs, if that is what is busy (FUNCTION STATS).
    pub(crate) running_function: &'a parking_lot::Mutex<Option<crate::cmd::functions::RunningFunction>>,
    /// Set to close the connection after the reply.
    pub close: bool,
}

/// A row's busy handler.
pub(crate) type Handler = fn(&mut BusyCtx, &[Bytes]) -> Answer;

/// How one request fared.
pub enum Answer {
    Reply(Reply),
    /// Only the engine can answer it (an `allow_busy` command without a
    /// busy handler, WATCH outside MULTI): the script's hook serves it
    /// ([`Inbox`]).
    Engine,
    /// A user changed since the client's view was taken: the script's hook
    /// refreshes the view (the engine has the rules), then the request is
    /// answered again.
    Refresh,
}

/// Answers one request while a script is busy: admitted as on the
/// engine (the busy script is one of the facts), then queued inside MULTI,
/// answered by its row's busy handler, or left for the engine.
pub(crate) fn answer(ctx: &mut BusyCtx, args: &[Bytes]) -> Answer {
    let acl = match &ctx.view.restricted {
        None => None,
        Some(snapshot) => match snapshot.current() {
            Some(user) => Some(user),
            None => return Answer::Refresh,
        },
    };
    let facts = Facts {
        authenticated: ctx.view.authenticated,
        in_multi: ctx.view.in_multi,
        subscribed_resp2: ctx.view.subscribed_resp2,
        local: ctx.view.local,
        guards: &ctx.guards,
        busy: Some(ctx.script),
        // The save state lives in the engine, which the script holds;
        // Redis's busy script blocks its saves too.
        disk_error: None,
        queued_write: false,
        loading: false,
        // The replica's state lives in the engine too; while the script
        // runs the link applies nothing, so what held before it holds.
        replica_read_only: false,
        stale_refused: false,
        queued_not_stale: false,
        declared: None,
        acl,
        // Redis does not evict inside a yielding busy script.
        out_of_memory: false,
        denyoom_by_content: false,
        too_few_replicas: false,
        // Read by scripts' checks only.
        noscript_allowed: false,
    };
    match exec::admit(Caller::Client, args, &facts, &mut NoHolds) {
        Verdict::Refused { spec, reply } => refuse(ctx, spec, reply),
        Verdict::Denied { spec, denied } => {
            let context = if ctx.view.in_multi {
                crate::acl::Context::Multi
            } else {
                crate::acl::Context::Toplevel
            };
            ctx.changes.push(TxChange::Denied {
                spec,
                args: args.to_vec(),
                denied,
                context,
            });
            refuse(ctx, Some(spec), exec::denial(spec, denied))
        }
        Verdict::Queue(_) => {
            ctx.changes.push(TxChange::Queue(args.to_vec()));
            Answer::Reply(Reply::status("QUEUED"))
        }
        Verdict::Run(spec) => match spec.busy {
            Some(handler) => handler(ctx, args),
            None => Answer::Engine,
        },
        // The connection side holds nothing (the pause, the rules and the
        // slots are the engine's): never given here, the engine decides.
        Verdict::Postponed | Verdict::Fault(..) | Verdict::Redirected { .. } => Answer::Engine,
    }
}

/// A refused request: counted by the script's hook, and the
/// transaction doomed or ended as [`exec::refusal`] says.
fn refuse(ctx: &mut BusyCtx, spec: Option<&'static crate::cmd::CommandSpec>, reply: Reply) -> Answer {
    ctx.changes.push(TxChange::Rejected(spec, reply.clone()));
    let (reply, effect) = exec::refusal(spec, reply, ctx.view.in_multi);
    match effect {
        TxEffect::None => {}
        TxEffect::Doom => ctx.changes.push(TxChange::Fail),
        TxEffect::Abort => {
            ctx.view.in_multi = false;
            ctx.changes.push(TxChange::End);
        }
    }
    Answer::Reply(reply)
}

/// SCRIPT KILL while a script is busy.
pub(crate) fn script_kill(ctx: &mut BusyCtx, _args: &[Bytes]) -> Answer {
    kill(ctx, false)
}

/// FUNCTION KILL while a function (or a script) is busy.
pub(crate) fn function_kill(ctx: &mut BusyCtx, _args: &[Bytes]) -> Answer {
    kill(ctx, true)
}

/// Stops the busy script or function, as Redis's `scriptKill`: not one that
/// wrote, and SCRIPT KILL stops only a script, FUNCTION KILL only a function.
fn kill(ctx: &mut BusyCtx, function: bool) -> Answer {
    let running_function = ctx.script.function.load(Ordering::Relaxed);
    Answer::Reply(if ctx.script.wrote.load(Ordering::Relaxed) {
        err(errors::UNKILLABLE)
    } else if running_function != function {
        busy(ctx.script)
    } else {
        ctx.script.kill.store(true, Ordering::Relaxed);
        Reply::Ok
    })
}

/// `-BUSY`, naming the command that can stop what runs.
pub(crate) fn busy(script: &ScriptState) -> Reply {
    if script.function.load(Ordering::Relaxed) {
        err(errors::BUSY_FUNCTION)
    } else {
        err(errors::BUSY)
    }
}

/// What connections leave for the engine while a script is busy, for the
/// script's instruction hook to apply ([`serve_inbox`]): requests only the
/// engine can answer, and the [`TxChange`]s of busy answers, so their
/// counts and ACL log entries land while the script runs, as Redis records
/// them at once. One entry per client: what a client leaves joins its
/// entry the hook has not taken yet, in order. A connection takes its
/// entry back ([`Inbox::withdraw`]) if the script ends, or is told to stop,
/// before the hook took it; what only changes the client the script's end
/// applies ([`settle_inbox`]).
#[derive(Default)]
pub(crate) struct Inbox {
    /// Something waits: what the hook tests every few thousand
    /// instructions, without the lock.
    waiting: AtomicBool,
    queue: parking_lot::Mutex<Vec<Hooked>>,
}

/// One client's entry in the [`Inbox`].
pub(crate) struct Hooked {
    pub id: u64,
    /// The connection's client when it has not met the engine yet (a
    /// connection opened while the script runs): connected first.
    pub pending: Option<ClientState>,
    /// What the client's busy answers changed, applied first.
    pub changes: Vec<TxChange>,
    /// The request; `None` with `done` only refreshes the client's view
    /// ([`Answer::Refresh`]).
    pub request: Option<Vec<Bytes>>,
    /// Where the answer goes; `None`: only `changes`, nobody waits.
    pub done: Option<tokio::sync::oneshot::Sender<Served>>,
}

/// What the hook answered to a [`Hooked`] request.
pub(crate) struct Served {
    pub end: BatchEnd,
    /// The encoded reply.
    pub out: BytesMut,
    /// The request again when CLIENT PAUSE holds it: it runs once the
    /// pause ends.
    pub held: Option<Vec<Bytes>>,
}

impl std::fmt::Debug for Inbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inbox")
            .field("waiting", &self.waiting.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl Inbox {
    /// Leaves `hooked` for the hook, after what its client left before.
    pub(crate) fn post(&self, hooked: Hooked) {
        let mut queue = self.queue.lock();
        match queue.iter_mut().find(|h| h.id == hooked.id) {
            Some(earlier) => {
                earlier.changes.extend(hooked.changes);
                earlier.pending = earlier.pending.take().or(hooked.pending);
                earlier.request = hooked.request;
                earlier.done = hooked.done;
            }
            None => queue.push(hooked),
        }
        self.waiting.store(true, Ordering::Release);
    }

    /// Takes back client `id`'s entry if the hook has not taken it.
    pub(crate) fn withdraw(&self, id: u64) -> Option<Hooked> {
        let mut queue = self.queue.lock();
        let at = queue.iter().position(|h| h.id == id)?;
        let hooked = queue.remove(at);
        if queue.is_empty() {
            self.waiting.store(false, Ordering::Release);
        }
        Some(hooked)
    }

    /// Whether an entry waits (cheap: the hook asks often).
    pub(crate) fn has_requests(&self) -> bool {
        self.waiting.load(Ordering::Acquire)
    }

    /// The entries `which` selects.
    fn take(&self, which: fn(&Hooked) -> bool) -> Vec<Hooked> {
        let mut queue = self.queue.lock();
        let (taken, kept) = std::mem::take(&mut *queue).into_iter().partition(which);
        *queue = kept;
        self.waiting.store(!queue.is_empty(), Ordering::Release);
        taken
    }
}

/// Serves what connections left in the busy script's [`Inbox`], from its
/// hook, on the engine the script holds (`now`: the script's time): each
/// entry as a batch of its own for its client. Before the script is busy
/// nothing is served (Redis would not serve it either; no connection asks
/// then, but what was left for a script that ended may meet the next one).
pub(crate) fn serve_inbox(dbs: &mut [Db], server: &mut ServerState, now: u64) {
    let script = server.shared.script.clone();
    if script.is_busy(server.clock.now_ms()) {
        for hooked in script.inbox.take(|_| true) {
            apply_contained(dbs, server, &script, now, hooked);
        }
    }
}

/// At the script's end, under its lock hold: applies the entries that only
/// change their clients (their counts and ACL log entries come before the
/// script's reply, as in Redis). Requests stay for their connections to
/// take back and run on the engine.
pub(crate) fn settle_inbox(dbs: &mut [Db], server: &mut ServerState, now: u64) {
    // (Every script ends here: the test comes before the Arc's clone.)
    if !server.shared.script.inbox.has_requests() {
        return;
    }
    let script = server.shared.script.clone();
    for hooked in script.inbox.take(|h| h.done.is_none()) {
        apply_contained(dbs, server, &script, now, hooked);
    }
}

/// [`apply`], a panic contained to its entry: the entries taken with it
/// are still served (a connection whose entry panicked sees its answer
/// dropped and closes, as after a panic in any batch).
fn apply_contained(dbs: &mut [Db], server: &mut ServerState, script: &ScriptState, now: u64, hooked: Hooked) {
    let id = hooked.id;
    let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| apply(dbs, server, script, now, hooked)));
    if ran.is_err() {
        tracing::error!("serving client {id} while a script was busy panicked; closing the client");
    }
}

/// Runs one [`Inbox`] entry for its client, inside the script's unit.
fn apply(dbs: &mut [Db], server: &mut ServerState, script: &ScriptState, now: u64, hooked: Hooked) {
    let Hooked {
        id,
        pending,
        changes,
        request,
        done,
    } = hooked;
    if let Some(client) = pending {
        crate::engine::connect(server, client);
    }
    let mut requests = crate::protocol::Requests::default();
    request.into_iter().for_each(|r| requests.push_back(r));
    let mut out = BytesMut::new();
    let batch = Batch {
        dbs,
        state: server,
        scripting: None,
        busy: Some(script),
        now,
        server_shutdown: None,
    };
    let end = batch.run(id, changes, &mut requests, &mut None, usize::MAX, &mut out);
    if let Some(done) = done {
        // The connection stopped waiting only if its task ended.
        let _ = done.send(Served {
            end,
            out,
            held: requests.pop_front(),
        });
    }
}
