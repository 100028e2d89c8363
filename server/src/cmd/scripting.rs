//! Scripting commands: EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and SCRIPT.
//!
//! A script's `redis.call` runs through [`crate::exec::call_from_script`], the
//! same handlers a socket reaches, inside the same lock hold: no other
//! client's command can interleave with a script.

use std::sync::atomic::Ordering;

use bytes::Bytes;

use super::args::is;
use super::flags::*;
use super::{acl, CommandSpec, Ctx};
use crate::errors::{self, err};
use crate::protocol::Reply;
use crate::store::num;
use crate::tri;

macro_rules! spec {
    ($($row:tt)*) => { command!("scripting", $($row)*) };
}

#[rustfmt::skip]
pub(crate) static COMMANDS: &[CommandSpec] = &[
    spec!("eval", -3, NOSCRIPT | STALE | SKIP_MONITOR | NO_MANDATORY_KEYS | MOVABLEKEYS | MAY_REPLICATE | NO_PROPAGATE, acl::SCRIPTING, "Execute a Lua script server side", eval)
        .declared_by(eval_declared)
        .deny_oom_if(|_, args| crate::lua::body_denies_oom(&args[1])).keys_by(super::keyspecs::NUMKEYS_SECOND),
    spec!("evalsha", -3, NOSCRIPT | STALE | SKIP_MONITOR | NO_MANDATORY_KEYS | MOVABLEKEYS | MAY_REPLICATE | NO_PROPAGATE, acl::SCRIPTING, "Execute a Lua script server side", evalsha)
        .declared_by(evalsha_declared)
        .deny_oom_if(evalsha_denies_oom).keys_by(super::keyspecs::NUMKEYS_SECOND),
    spec!("eval_ro", -3, READONLY | NOSCRIPT | STALE | SKIP_MONITOR | NO_MANDATORY_KEYS | MOVABLEKEYS | NO_PROPAGATE, acl::SCRIPTING, "Execute a read-only Lua script server side", eval_ro)
        .declared_by(eval_declared).keys_by(super::keyspecs::NUMKEYS_SECOND),
    spec!("evalsha_ro", -3, READONLY | NOSCRIPT | STALE | SKIP_MONITOR | NO_MANDATORY_KEYS | MOVABLEKEYS | NO_PROPAGATE, acl::SCRIPTING, "Execute a read-only Lua script server side", evalsha_ro)
        .declared_by(evalsha_declared).keys_by(super::keyspecs::NUMKEYS_SECOND),
    spec!("script", -2, 0, 0, "A container for Lua scripts management commands", super::container, SCRIPT),
];

#[rustfmt::skip]
static SCRIPT: &[CommandSpec] = &[
    subcommand!("scripting", "script|load", 3, NOSCRIPT | STALE, acl::SCRIPTING, script_load),
    subcommand!("scripting", "script|exists", -3, NOSCRIPT, acl::SCRIPTING, script_exists),
    subcommand!("scripting", "script|flush", -2, NOSCRIPT, acl::SCRIPTING, script_flush),
    subcommand!("scripting", "script|kill", 2, NOSCRIPT | ALLOW_BUSY, acl::SCRIPTING, script_kill)
        .while_busy(crate::exec::busy::script_kill),
    subcommand!("scripting", "script|help", 2, LOADING | STALE, acl::SCRIPTING, script_help),
    subcommand!("scripting", "script|debug", 3, NOSCRIPT, acl::SCRIPTING, script_debug),
];

/// Splits `numkeys key... arg...` as Redis's `evalGenericCommand` (FCALL's
/// words a bad `numkeys` its own way: `not_integer`).
pub(super) fn keys_and_args<'a>(
    args: &'a [Bytes],
    not_integer: &'static str,
) -> Result<(&'a [Bytes], &'a [Bytes]), Reply> {
    let numkeys = num::parse_i64(&args[2]).ok_or_else(|| err(not_integer))?;
    let available = (args.len() - 3) as i64;
    if numkeys > available {
        return Err(err(errors::NUMKEYS_TOO_MANY));
    }
    if numkeys < 0 {
        return Err(err(errors::NUMKEYS_NEGATIVE));
    }
    let split = 3 + numkeys as usize;
    Ok((&args[3..split], &args[split..]))
}

/// How a script or function runs, from its flags and the command that
/// runs it.
#[derive(Debug, Clone, Copy)]
pub(super) struct RunAs {
    /// Write commands are refused: EVAL_RO, FCALL_RO, a `no-writes` script
    /// or function.
    pub read_only: bool,
    /// `allow-oom`: its commands run over `maxmemory`.
    pub allow_oom: bool,
    /// On a cluster node its commands may touch several slots
    /// ([`crate::exec::Caller::Script`]).
    pub cross_slot: bool,
}

/// A script or function flagged `no-cluster` is refused on a cluster node
/// (Redis's `scriptPrepareForRun`, before the `_RO` check).
pub(super) fn refused_on_cluster(ctx: &Ctx, no_cluster: bool) -> Option<Reply> {
    (no_cluster && ctx.server.cluster.is_some()).then(|| err(errors::SCRIPT_NO_CLUSTER))
}

/// Runs something on the VM (a script or a function, through `call`) with
/// the caller's database; SELECT inside it does not change the caller's
/// database, as in Redis 7. `None` from `call`: nothing to run.
pub(super) fn run_in_vm(
    ctx: &mut Ctx,
    run_as: RunAs,
    call: impl FnOnce(&mut crate::lua::Scripting, &mut crate::lua::Dispatch, u64) -> Option<Reply>,
) -> Option<Reply> {
    let RunAs {
        read_only,
        allow_oom,
        cross_slot,
    } = run_as;
    let caller = crate::exec::Caller::Script { read_only, cross_slot };
    let now = ctx.now;
    let Some(scripting) = ctx.scripting.take() else {
        return Some(err(errors::NOT_FROM_SCRIPT));
    };
    let caller_db = ctx.client.db;
    let state = scripting.state.clone();
    // The error replies the script got from its commands (already counted
    // in errorstats where they arose), to tell whether its own error reply
    // is one of them passed on.
    let mut inner_errors: Vec<Reply> = Vec::new();
    let reply = {
        let Ctx {
            dbs, client, server, ..
        } = &mut *ctx;
        let mut dispatch = |cmd: &[Bytes], mode: crate::lua::Mode| {
            match mode {
                crate::lua::Mode::AclCheck => return crate::exec::acl_check_from_script(server, client, cmd),
                crate::lua::Mode::Serve => {
                    crate::exec::busy::serve_inbox(dbs, server, now);
                    return Reply::NOTHING;
                }
                crate::lua::Mode::Call => {}
            }
            let mut inner = Ctx {
                dbs,
                client,
                server,
                now,
                scripting: None,
                caller,
            };
            // Over the limit found at the start, a command that grows
            // memory is refused until the script has written (it cannot
            // stop halfway), unless it is flagged `allow-oom`.
            let wrote = state.wrote.load(Ordering::Relaxed);
            let may_oom = !allow_oom && !wrote;
            // `redis.set_repl`: where this command's own effect may go.
            let withheld = state.repl_withheld.load(Ordering::Relaxed);
            let aof = withheld & crate::lua::REPL_AOF == 0;
            let replicas = withheld & crate::lua::REPL_REPLICA == 0;
            inner.server.effects.set_targets(aof, replicas);
            let (reply, wrote_now) = crate::exec::call_from_script(&mut inner, cmd, caller, may_oom, wrote);
            inner.server.effects.reset_targets();
            if wrote_now {
                state.wrote.store(true, Ordering::Relaxed);
            }
            if reply.is_error() && inner_errors.len() < MAX_INNER_ERRORS {
                inner_errors.push(reply.clone());
            }
            reply
        };
        call(scripting, &mut dispatch, now)
    };
    ctx.client.db = caller_db;
    ctx.scripting = Some(scripting);
    // What busy answers left for the engine and the hook did not take yet.
    crate::exec::busy::settle_inbox(ctx.dbs, ctx.server, now);
    // An error the script raised from (or returned as) a command's error
    // is counted once, where it arose (Redis marks such error tables
    // `ignore_error_stats_update`); the call still counts as failed.
    if let Some(Reply::Error(text)) = &reply {
        let passed_on = inner_errors
            .iter()
            .any(|inner| matches!(inner, Reply::Error(e) if text.starts_with(&**e)));
        if passed_on {
            ctx.server.observe.error_already_counted();
        }
    }
    reply
}

/// The inner error replies [`run_in_vm`] keeps to recognise one passed on.
const MAX_INNER_ERRORS: usize = 16;

/// What a shebang declares, as admission reads it. Without one (Redis's
/// compatibility mode) the script's writes are refused inside it, not at
/// admission, and it never runs on a replica serving no stale data
/// (Redis's `scriptPrepareForRun` answers `-MASTERDOWN` then).
fn declared(flags: crate::lua::ScriptFlags) -> Option<super::Declared> {
    Some(if flags.shebang {
        super::Declared {
            writes: !flags.no_writes,
            may_write: !flags.no_writes,
            stale_ok: flags.allow_stale,
        }
    } else {
        super::Declared {
            writes: false,
            may_write: true,
            stale_ok: false,
        }
    })
}

/// EVAL's body's shebang flags.
fn eval_declared(_vm: &crate::lua::Scripting, args: &[Bytes]) -> Option<super::Declared> {
    crate::lua::body_flags(&args[1]).and_then(declared)
}

/// The cached script's shebang flags (an unknown script is NOSCRIPT).
fn evalsha_declared(vm: &crate::lua::Scripting, args: &[Bytes]) -> Option<super::Declared> {
    vm.script_flags(&String::from_utf8_lossy(&args[1])).and_then(declared)
}

/// Whether EVALSHA of this script is refused under OOM: a cached script
/// with a shebang saying neither `allow-oom` nor `no-writes`.
fn evalsha_denies_oom(vm: &crate::lua::Scripting, args: &[Bytes]) -> bool {
    let sha = String::from_utf8_lossy(&args[1]);
    vm.script_flags(&sha)
        .is_some_and(|f| f.shebang && !f.no_writes && !f.allow_oom)
}

/// Runs the cached script `sha`, honouring its shebang flags: a
/// `no-writes` script runs read-only, and the `_RO` commands refuse a
/// script with a shebang that does not say `no-writes`.
fn run(ctx: &mut Ctx, sha: &str, keys: &[Bytes], argv: &[Bytes], ro_command: bool) -> Reply {
    let flags = ctx.scripting.as_ref().and_then(|s| s.script_flags(sha));
    let Some(flags) = flags else {
        return err(errors::NOSCRIPT);
    };
    if let Some(refused) = refused_on_cluster(ctx, flags.no_cluster) {
        return refused;
    }
    if ro_command && flags.shebang && !flags.no_writes {
        return err(errors::WRITE_FLAG_WITH_RO);
    }
    let run_as = RunAs {
        read_only: ro_command || flags.no_writes,
        allow_oom: flags.allow_oom,
        cross_slot: flags.cross_slot(),
    };
    run_in_vm(ctx, run_as, |scripting, dispatch, now| {
        scripting.run(sha, keys, argv, now, dispatch)
    })
    .unwrap_or_else(|| err(errors::NOSCRIPT))
}

/// Feeds EVAL / EVALSHA / FCALL to MONITOR clients before it runs, so the
/// commands it calls follow it (Redis does the same).
pub(super) fn feed_monitors_first(ctx: &Ctx, args: &[Bytes]) {
    if !ctx.server.monitors.is_empty() {
        super::server::feed_monitors(ctx, None, args);
    }
}

fn eval_generic(ctx: &mut Ctx, args: &[Bytes], read_only: bool) -> Reply {
    feed_monitors_first(ctx, args);
    let (keys, argv) = tri!(keys_and_args(args, errors::NOT_INTEGER));
    let sha = match ctx.scripting.as_mut() {
        Some(s) => tri!(s.load(&args[1])),
        None => return err(errors::NOT_FROM_SCRIPT),
    };
    run(ctx, &sha, keys, argv, read_only)
}

fn evalsha_generic(ctx: &mut Ctx, args: &[Bytes], read_only: bool) -> Reply {
    feed_monitors_first(ctx, args);
    // The cache is keyed by lower-case SHA1 hex; `Scripting::run` finds an
    // upper-case one too, and answers None (NOSCRIPT) for anything else. A
    // SHA of the wrong length is NOSCRIPT before `numkeys` is read.
    let sha = match std::str::from_utf8(&args[1]) {
        Ok(sha) if sha.len() == 40 => sha,
        _ => return err(errors::NOSCRIPT),
    };
    let (keys, argv) = tri!(keys_and_args(args, errors::NOT_INTEGER));
    run(ctx, sha, keys, argv, read_only)
}

fn eval(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    eval_generic(ctx, args, false)
}

fn eval_ro(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    eval_generic(ctx, args, true)
}

fn evalsha(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    evalsha_generic(ctx, args, false)
}

fn evalsha_ro(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    evalsha_generic(ctx, args, true)
}

fn script_load(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    match ctx.scripting.as_mut() {
        Some(s) => Reply::bulk(tri!(s.load(&args[2]))),
        None => err(errors::NOT_FROM_SCRIPT),
    }
}

fn script_exists(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let s = ctx.scripting.as_ref();
    Reply::Array(
        args[2..]
            .iter()
            .map(|sha| Reply::Int(s.is_some_and(|s| s.exists(sha)) as i64))
            .collect(),
    )
}

fn script_flush(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    // Without a mode, `lazyfree-lazy-user-flush` decides (Redis's scriptCommand).
    let lazy = match args.get(2) {
        None => ctx.server.config.memory.lazy.user_flush,
        Some(mode) if args.len() == 3 && is(mode, "sync") => false,
        Some(mode) if args.len() == 3 && is(mode, "async") => true,
        Some(_) => return err(errors::SCRIPT_FLUSH_MODE),
    };
    if let Some(s) = ctx.scripting.as_mut() {
        s.flush(&ctx.server.lazyfree, lazy);
    }
    Reply::Ok
}

/// SCRIPT KILL reaching the engine means no script is running (a running
/// script holds the engine; connection tasks answer SCRIPT KILL themselves).
fn script_kill(_ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    err(errors::NOT_BUSY)
}

/// SCRIPT DEBUG: NO is what coordis always is; YES and SYNC would start
/// Redis's Lua debugger, which coordis does not have, so they are refused
/// (README, known differences) rather than accepted and ignored.
fn script_debug(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    // Inside EXEC (scripts cannot call it: `noscript`). Redis refuses it
    // whenever earlier replies are still unsent, which EXEC's always are;
    // coordis does not refuse it within a pipeline.
    if ctx.deny_blocking() {
        return err(errors::SCRIPT_DEBUG_IN_MULTI);
    }
    if is(&args[2], "no") {
        Reply::Ok
    } else if is(&args[2], "yes") || is(&args[2], "sync") {
        err(errors::SCRIPT_DEBUG_UNSUPPORTED)
    } else {
        err(errors::SCRIPT_DEBUG_MODE)
    }
}

fn script_help(_ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    super::server::help_reply(&[
        "SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "DEBUG (YES|SYNC|NO)",
        "    Set the debug mode for subsequent scripts executed.",
        "EXISTS <sha1> [<sha1> ...]",
        "    Return information about the existence of the scripts in the script cache.",
        "FLUSH [ASYNC|SYNC]",
        "    Flush the Lua scripts cache. Very dangerous on replicas.",
        "    When called without the optional mode argument, the behavior is determined by the",
        "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
        "    * ASYNC: Asynchronously flush the scripts cache.",
        "    * SYNC: Synchronously flush the scripts cache.",
        "KILL",
        "    Kill the currently executing Lua script.",
        "LOAD <script>",
        "    Load a script into the scripts cache without executing it.",
    ])
}
