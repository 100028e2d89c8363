//! Requests answered while a script is busy (past `busy-reply-threshold`).
//!
//! The script holds the keyspace for its whole run, so a connection answers
//! its own requests meanwhile, without the engine, as Redis answers them
//! from inside the script's timeout hook: the same checks as [`super::call`]
//! in the same order, then `-BUSY` for every command without the
//! `allow_busy` flag. An `allow_busy` command is answered by its row's busy
//! handler (MULTI, DISCARD, WATCH inside MULTI, QUIT, SCRIPT KILL, SHUTDOWN
//! NOSAVE), or waits for the script to end and then runs normally (HELLO,
//! AUTH, WATCH outside MULTI, UNWATCH and RESET, which Redis serves at once:
//! README's known differences). A refused EXEC ends the transaction. What
//! these answers change in the client's transaction state is recorded as
//! [`TxChange`]s and applied to the client before its next batch on the
//! engine.

use std::sync::atomic::Ordering;

use bytes::Bytes;

use super::{flags, resolve, Unresolved};
use crate::clients::CloseSignal;
use crate::errors::{self, err};
use crate::lua::ScriptState;
use crate::protocol::Reply;

/// What a connection knows of its client between batches (the engine
/// reports it after each one), enough to apply [`super::call`]'s checks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClientView {
    pub authenticated: bool,
    pub in_multi: bool,
    /// RESP2 and subscribed: only the pub/sub commands are allowed.
    pub subscribed_resp2: bool,
}

/// A change to the client's transaction made while the engine was busy.
#[derive(Clone, Debug, PartialEq)]
pub enum TxChange {
    /// MULTI was accepted.
    Begin,
    /// A command was queued.
    Queue(Vec<Bytes>),
    /// A command was refused inside MULTI: EXEC will answer EXECABORT.
    Fail,
    /// DISCARD, or a refused EXEC: the transaction ended (watches dropped).
    End,
}

/// What a busy handler may touch.
pub struct BusyCtx<'a> {
    pub view: &'a mut ClientView,
    pub changes: &'a mut Vec<TxChange>,
    pub script: &'a ScriptState,
    /// The server's shutdown signal (SHUTDOWN NOSAVE).
    pub shutdown: &'a CloseSignal,
    /// Set to close the connection after the reply.
    pub close: bool,
}

/// A row's busy handler.
pub type Handler = fn(&mut BusyCtx, &[Bytes]) -> Answer;

/// How one request fared.
pub enum Answer {
    Reply(Reply),
    /// It must wait for the script to end (an `allow_busy` command without
    /// a busy handler).
    Wait,
}

/// Answers one request while a script is busy.
pub fn answer(ctx: &mut BusyCtx, args: &[Bytes]) -> Answer {
    let spec = match resolve(args) {
        Ok(spec) => spec,
        Err(Unresolved::Unknown(reply)) => return Answer::Reply(refuse(ctx, false, reply)),
        Err(Unresolved::Arity(spec)) => {
            return Answer::Reply(refuse(ctx, spec.name == "exec", errors::wrong_args(spec.name)));
        }
    };
    let is_exec = spec.name == "exec";
    let view = &ctx.view;
    let refusal = super::gate(spec, view.authenticated, view.in_multi, view.subscribed_resp2)
        .or_else(|| (!spec.has(flags::ALLOW_BUSY)).then(|| busy(ctx.script)));
    if let Some(reply) = refusal {
        return Answer::Reply(refuse(ctx, is_exec, reply));
    }
    if ctx.view.in_multi && !spec.has(flags::TX_CONTROL) {
        ctx.changes.push(TxChange::Queue(args.to_vec()));
        return Answer::Reply(Reply::status("QUEUED"));
    }
    match spec.busy {
        Some(handler) => handler(ctx, args),
        None => Answer::Wait,
    }
}

/// [`super::call`]'s refusal, on the view: inside MULTI the transaction is
/// doomed; a refused EXEC ends it with `EXECABORT`.
fn refuse(ctx: &mut BusyCtx, is_exec: bool, reply: Reply) -> Reply {
    if is_exec {
        ctx.view.in_multi = false;
        ctx.changes.push(TxChange::End);
        return match &reply {
            Reply::Error(text) => errors::exec_abort(text),
            _ => reply,
        };
    }
    if ctx.view.in_multi {
        ctx.changes.push(TxChange::Fail);
    }
    reply
}

/// SCRIPT KILL while a script is busy.
pub fn script_kill(ctx: &mut BusyCtx, _args: &[Bytes]) -> Answer {
    kill(ctx, false)
}

/// FUNCTION KILL while a function (or a script) is busy.
pub fn function_kill(ctx: &mut BusyCtx, _args: &[Bytes]) -> Answer {
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
pub fn busy(script: &ScriptState) -> Reply {
    if script.function.load(Ordering::Relaxed) {
        err(errors::BUSY_FUNCTION)
    } else {
        err(errors::BUSY)
    }
}
