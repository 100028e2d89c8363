//! Redis 7 functions: FUNCTION LOAD / LIST / DELETE / FLUSH / DUMP /
//! RESTORE / KILL / STATS / HELP, FCALL and FCALL_RO.
//!
//! Libraries live on the scripting VM ([`crate::lua::functions`]); a
//! function runs exactly as a script does ([`super::scripting::run_in_vm`]:
//! the same dispatch, atomicity, BUSY and kill rules), read-only when it has
//! the `no-writes` flag. Functions survive SCRIPT FLUSH and FLUSHALL.

use bytes::Bytes;

use super::args::is;
use super::flags::*;
use super::{acl, CommandSpec, Ctx};
use crate::errors::{self, err};
use crate::lua::functions::{self as lib, RestorePolicy};
use crate::protocol::Reply;
use crate::store::glob;
use crate::tri;

macro_rules! spec {
    ($($row:tt)*) => { command!("scripting", $($row)*) };
}

#[rustfmt::skip]
pub(crate) static COMMANDS: &[CommandSpec] = &[
    spec!("fcall", -3, NOSCRIPT | STALE | SKIP_MONITOR | NO_MANDATORY_KEYS | MOVABLEKEYS | MAY_REPLICATE | NO_PROPAGATE, acl::SCRIPTING, "Invoke a function", fcall)
        .declared_by(fcall_declared)
        .deny_oom_if(fcall_denies_oom).keys_by(super::keyspecs::NUMKEYS_SECOND),
    spec!("fcall_ro", -3, READONLY | NOSCRIPT | STALE | SKIP_MONITOR | NO_MANDATORY_KEYS | MOVABLEKEYS | NO_PROPAGATE, acl::SCRIPTING, "Invoke a read-only function", fcall_ro)
        .declared_by(fcall_declared).keys_by(super::keyspecs::NUMKEYS_SECOND),
    spec!("function", -2, 0, 0, "A container for function commands", super::container, FUNCTION),
];

#[rustfmt::skip]
static FUNCTION: &[CommandSpec] = &[
    command!("scripting", "function|load", -3, WRITE | DENYOOM | NOSCRIPT, acl::SCRIPTING, "Create a function with the given arguments (name, code, description)", function_load),
    command!("scripting", "function|list", -2, NOSCRIPT, acl::SCRIPTING, "List information about all the functions", function_list),
    command!("scripting", "function|delete", 3, WRITE | NOSCRIPT, acl::SCRIPTING, "Delete a function by name", function_delete),
    command!("scripting", "function|flush", -2, WRITE | NOSCRIPT, acl::SCRIPTING, "Deleting all functions", function_flush),
    command!("scripting", "function|dump", 2, NOSCRIPT, acl::SCRIPTING, "Dump all functions into a serialized binary payload", function_dump),
    command!("scripting", "function|restore", -3, WRITE | DENYOOM | NOSCRIPT, acl::SCRIPTING, "Restore all the functions on the given payload", function_restore),
    command!("scripting", "function|kill", 2, NOSCRIPT | ALLOW_BUSY, acl::SCRIPTING, "Kill the function currently in execution.", function_kill)
        .while_busy(crate::exec::busy::function_kill),
    command!("scripting", "function|stats", 2, NOSCRIPT | ALLOW_BUSY, acl::SCRIPTING, "Return information about the function currently running (name, description, duration)", function_stats)
        .while_busy(function_stats_while_busy),
    command!("scripting", "function|help", 2, LOADING | STALE, acl::SCRIPTING, "Show helpful text about the different subcommands", function_help),
];

/// The VM, or the error a command that needs it gets from inside a script
/// (FUNCTION and FCALL are `noscript`, so this is only a guard).
fn vm<'a>(ctx: &'a mut Ctx) -> Result<&'a mut crate::lua::Scripting, Reply> {
    ctx.scripting.as_deref_mut().ok_or_else(|| err(errors::NOT_FROM_SCRIPT))
}

/// FCALL / FCALL_RO function numkeys [key ...] [arg ...]
fn fcall_generic(ctx: &mut Ctx, args: &[Bytes], ro_command: bool) -> Reply {
    super::scripting::feed_monitors_first(ctx, args);
    let name = String::from_utf8_lossy(&args[1]).into_owned();
    let (no_writes, run_as, no_cluster) = match tri!(vm(ctx)).libraries().function(&name) {
        Some(f) => (
            f.no_writes(),
            super::scripting::RunAs {
                read_only: ro_command || f.no_writes(),
                allow_oom: f.allow_oom(),
                cross_slot: f.allow_cross_slot(),
            },
            f.no_cluster(),
        ),
        None => return err(errors::FUNCTION_NOT_FOUND),
    };
    let (keys, argv) = tri!(super::scripting::keys_and_args(args, errors::BAD_NUMBER_OF_KEYS));
    if let Some(refused) = super::scripting::refused_on_cluster(ctx, no_cluster) {
        return refused;
    }
    if ro_command && !no_writes {
        return err(errors::WRITE_FLAG_WITH_RO);
    }
    // What FUNCTION STATS answers from a connection while this one is busy.
    let (libraries, functions) = {
        let libs = tri!(vm(ctx)).libraries();
        (libs.len(), libs.function_count())
    };
    *ctx.server.shared.running_function.lock() = Some(RunningFunction {
        name: name.clone(),
        command: args.to_vec(),
        started: std::time::Instant::now(),
        libraries,
        functions,
    });
    let reply = super::scripting::run_in_vm(ctx, run_as, |vm, dispatch, now| {
        vm.call_function(&name, keys, argv, now, dispatch)
    })
    .unwrap_or_else(|| err(errors::FUNCTION_NOT_FOUND));
    *ctx.server.shared.running_function.lock() = None;
    reply
}

/// The function an FCALL runs, for FUNCTION STATS asked while it is busy
/// (the engine is held by it: the connection answers from this).
#[derive(Debug, Clone)]
pub(crate) struct RunningFunction {
    name: String,
    /// The FCALL as its caller sent it.
    command: Vec<Bytes>,
    started: std::time::Instant,
    /// The engine's library and function counts when it started (a
    /// function cannot load libraries).
    libraries: usize,
    functions: usize,
}

/// Whether FCALL of this function is refused under OOM: flagged neither
/// `allow-oom` nor `no-writes` (Redis's `fcallGetCommandFlags`).
fn fcall_denies_oom(vm: &crate::lua::Scripting, args: &[Bytes]) -> bool {
    let name = String::from_utf8_lossy(&args[1]);
    vm.libraries()
        .function(&name)
        .is_some_and(|f| !f.no_writes() && !f.allow_oom())
}

fn fcall(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    fcall_generic(ctx, args, false)
}

fn fcall_ro(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    fcall_generic(ctx, args, true)
}

/// FUNCTION LOAD [REPLACE] code
fn function_load(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let mut replace = false;
    for opt in &args[2..args.len() - 1] {
        if is(opt, "replace") {
            replace = true;
        } else {
            return errors::unknown_option_given(opt);
        }
    }
    let code = &args[args.len() - 1];
    match tri!(vm(ctx)).load_library(code, replace) {
        Ok(name) => {
            ctx.dirty(1);
            Reply::Bulk(Bytes::from(name))
        }
        Err(e) => e,
    }
}

/// FUNCTION LIST [LIBRARYNAME pattern] [WITHCODE]. Libraries come in name
/// order (Redis lists them in its dictionary's order).
fn function_list(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let (mut with_code, mut pattern): (bool, Option<&Bytes>) = (false, None);
    let mut i = 2;
    while i < args.len() {
        if !with_code && is(&args[i], "withcode") {
            with_code = true;
        } else if pattern.is_none() && is(&args[i], "libraryname") {
            if i + 1 >= args.len() {
                return err(errors::LIBRARY_NAME_ARG_MISSING);
            }
            pattern = Some(&args[i + 1]);
            i += 1;
        } else {
            return errors::unknown_argument(&args[i]);
        }
        i += 1;
    }
    let field = |name: &'static str| Reply::Bulk(Bytes::from_static(name.as_bytes()));
    let libraries = tri!(vm(ctx))
        .libraries()
        .iter()
        .filter(|l| pattern.is_none_or(|p| glob::matches(p, l.name.as_bytes(), true)))
        .map(|l| {
            let functions = l
                .functions
                .iter()
                .map(|f| {
                    Reply::Map(vec![
                        (field("name"), Reply::Bulk(Bytes::from(f.name.clone()))),
                        (
                            field("description"),
                            f.description.clone().map_or(Reply::Nil, Reply::Bulk),
                        ),
                        (
                            field("flags"),
                            Reply::Set(f.flags.iter().map(|f| Reply::status(f)).collect()),
                        ),
                    ])
                })
                .collect();
            let mut out = vec![
                (field("library_name"), Reply::Bulk(Bytes::from(l.name.clone()))),
                (field("engine"), field("LUA")),
                (field("functions"), Reply::Array(functions)),
            ];
            if with_code {
                out.push((field("library_code"), Reply::Bulk(l.code.clone())));
            }
            Reply::Map(out)
        })
        .collect();
    Reply::Array(libraries)
}

/// FUNCTION DELETE library-name
fn function_delete(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let name = String::from_utf8_lossy(&args[2]).into_owned();
    if tri!(vm(ctx)).delete_library(&name) {
        ctx.dirty(1);
        Reply::Ok
    } else {
        err(errors::LIBRARY_NOT_FOUND)
    }
}

/// FUNCTION FLUSH [ASYNC|SYNC]
fn function_flush(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    if args.len() > 3 {
        return errors::sub_wrong_args(&args[1], "FUNCTION");
    }
    // Without a mode, `lazyfree-lazy-user-flush` decides (Redis's functionFlushCommand).
    let lazy = match args.get(2) {
        None => ctx.server.config.memory.lazy.user_flush,
        Some(mode) if is(mode, "sync") => false,
        Some(mode) if is(mode, "async") => true,
        Some(_) => return err(errors::FUNCTION_FLUSH_MODE),
    };
    let freer = ctx.server.lazyfree.clone();
    tri!(vm(ctx)).flush_functions(&freer, lazy);
    ctx.dirty(1);
    Reply::Ok
}

/// FUNCTION DUMP: Redis's serialized payload (see [`lib::dump`]).
fn function_dump(ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    let compress = ctx.server.config.rdb_compression;
    Reply::Bulk(Bytes::from(lib::dump(tri!(vm(ctx)).libraries(), compress)))
}

/// FUNCTION RESTORE payload [FLUSH|APPEND|REPLACE]
fn function_restore(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    if args.len() > 4 {
        return errors::sub_wrong_args(&args[1], "FUNCTION");
    }
    let policy = match args.get(3) {
        None => RestorePolicy::Append,
        Some(p) if is(p, "append") => RestorePolicy::Append,
        Some(p) if is(p, "replace") => RestorePolicy::Replace,
        Some(p) if is(p, "flush") => RestorePolicy::Flush,
        Some(_) => return err(errors::RESTORE_POLICY),
    };
    let Some(codes) = lib::restore(&args[2]) else {
        return err(errors::DUMP_PAYLOAD_INVALID);
    };
    match tri!(vm(ctx)).restore_libraries(codes, policy) {
        Ok(()) => {
            ctx.dirty(1);
            Reply::Ok
        }
        Err(e) => e,
    }
}

/// FUNCTION KILL reaching the engine means nothing runs (a running
/// function holds the engine; connections answer FUNCTION KILL then).
fn function_kill(_ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    err(errors::NOT_BUSY)
}

/// FUNCTION STATS: nothing is running when the engine answers (a busy
/// function's STATS waits for it to end).
fn function_stats(ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    let libraries = tri!(vm(ctx)).libraries();
    stats_reply(None, libraries.len(), libraries.function_count())
}

/// FUNCTION STATS while a script or function is busy, as Redis answers it
/// from inside the busy script: `-BUSY` for a script (EVAL), the running
/// function's name, command and duration for a function.
fn function_stats_while_busy(ctx: &mut crate::exec::busy::BusyCtx, _args: &[Bytes]) -> crate::exec::busy::Answer {
    let running = ctx.running_function.lock().clone();
    crate::exec::busy::Answer::Reply(match running {
        Some(f) => {
            let duration = f.started.elapsed().as_millis() as i64;
            stats_reply(Some((&f, duration)), f.libraries, f.functions)
        }
        None => err(errors::BUSY),
    })
}

/// FUNCTION STATS's map: the running function (or nil) and the engines.
fn stats_reply(running: Option<(&RunningFunction, i64)>, libraries: usize, functions: usize) -> Reply {
    let field = |name: &'static str| Reply::Bulk(Bytes::from_static(name.as_bytes()));
    let running = match running {
        None => Reply::Nil,
        Some((f, duration_ms)) => Reply::Map(vec![
            (field("name"), Reply::bulk(f.name.clone())),
            (
                field("command"),
                Reply::Array(f.command.iter().cloned().map(Reply::Bulk).collect()),
            ),
            (field("duration_ms"), Reply::Int(duration_ms)),
        ]),
    };
    Reply::Map(vec![
        (field("running_script"), running),
        (
            field("engines"),
            Reply::Map(vec![(
                field("LUA"),
                Reply::Map(vec![
                    (field("libraries_count"), Reply::Int(libraries as i64)),
                    (field("functions_count"), Reply::Int(functions as i64)),
                ]),
            )]),
        ),
    ])
}

fn function_help(_ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    super::server::help_reply(&[
        "FUNCTION <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "LOAD [REPLACE] <FUNCTION CODE>",
        "    Create a new library with the given library name and code.",
        "DELETE <LIBRARY NAME>",
        "    Delete the given library.",
        "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
        "    Return general information on all the libraries:",
        "    * Library name",
        "    * The engine used to run the Library",
        "    * Library description",
        "    * Functions list",
        "    * Library code (if WITHCODE is given)",
        "    It also possible to get only function that matches a pattern using LIBRARYNAME argument.",
        "STATS",
        "    Return information about the current function running:",
        "    * Function name",
        "    * Command used to run the function",
        "    * Duration in MS that the function is running",
        "    If no function is running, return nil",
        "    In addition, returns a list of available engines.",
        "KILL",
        "    Kill the current running function.",
        "FLUSH [ASYNC|SYNC]",
        "    Delete all the libraries.",
        "    When called without the optional mode argument, the behavior is determined by the",
        "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
        "    * ASYNC: Asynchronously flush the libraries.",
        "    * SYNC: Synchronously flush the libraries.",
        "DUMP",
        "    Return a serialized payload representing the current libraries, can be restored using FUNCTION RESTORE command",
        "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
        "    Restore the libraries represented by the given payload, it is possible to give a restore policy to",
        "    control how to handle existing libraries (default APPEND):",
        "    * FLUSH: delete all existing libraries.",
        "    * APPEND: appends the restored libraries to the existing libraries. On collision, abort.",
        "    * REPLACE: appends the restored libraries to the existing libraries, On collision, replace the old",
        "      libraries with the new libraries (notice that even on this option there is a chance of failure",
        "      in case of functions name collision with another library).",
    ])
}

/// What FCALL's function declares (a function always declares its flags;
/// an unknown one is FCALL's own error, so it declares nothing here).
fn fcall_declared(vm: &crate::lua::Scripting, args: &[Bytes]) -> Option<super::Declared> {
    let function = vm.libraries().function(&String::from_utf8_lossy(&args[1]))?;
    Some(super::Declared {
        writes: !function.no_writes(),
        may_write: !function.no_writes(),
        stale_ok: function.flags.contains(&"allow-stale"),
    })
}
