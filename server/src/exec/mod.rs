//! The execution core: the one admission path (Redis's `processCommand`)
//! and the one [`call`] around every handler (Redis's `call()` with
//! `alsoPropagate`), for every caller.
//!
//! Every command — a client's request, a command EXEC runs, a script's
//! `redis.call`, a blocked client being served, the test-control plane —
//! is first *admitted* by [`admit`], in Redis's order and from the flags on
//! its row, and then *called* by [`call`], the only place a handler runs.
//! Around the handler, once: the client's last command, timing,
//! commandstats/errorstats/latency/slowlog ([`crate::cmd::observe`]),
//! MONITOR, the dirty counter, `expired` events and the effects the
//! command leaves for the feed ([`feed`]). The end of an *execution unit*
//! (one top-level command, with whatever EXEC or a script ran inside it)
//! serves blocked clients whose keys became ready and closes the unit's
//! effects ([`end_unit`]).
//!
//! The caller is an explicit [`Caller`]; each skips some checks, and
//! [`Caller::checks`] is the one table that says which. Admission never
//! touches the keyspace; [`call`] never refuses.
//!
//! What must never happen here: a handler invoked anywhere else, a policy
//! decided by comparing command names (flags on the rows decide), or I/O.

pub(crate) mod busy;
pub(crate) mod feed;
pub(crate) mod monotonic;

use bytes::Bytes;

use crate::cmd::{self, flags, observe, CommandSpec, Ctx, Unresolved};
use crate::errors;
use crate::faults::FaultAction;
use crate::protocol::Reply;

/// Who runs a command. Each caller skips some admission checks
/// ([`Caller::checks`]) and some bookkeeping ([`call`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Caller {
    /// A client's request from its connection (also answered on the
    /// connection while a script is busy, [`crate::cmd::busy`]).
    Client,
    /// A command queued in MULTI, run by EXEC: it was admitted when it
    /// was queued (Redis's `execCommand` calls `call()` directly).
    Exec,
    /// A script's or function's `redis.call`; `read_only` for EVAL_RO,
    /// FCALL_RO and `no-writes` scripts.
    Script { read_only: bool },
    /// The test-control plane's keyspace access ([`crate::Server`]'s
    /// typed API): an internal client no CLIENT LIST shows. Loading the
    /// append-only file runs its commands as this caller too: Redis's fake
    /// AOF client skips `processCommand`'s checks the same way, and the
    /// commands are not observed.
    Control,
    /// A blocked client being served from a key that became ready: its
    /// command was admitted and counted when it blocked ([`serve_waiter`]).
    Waiter,
}

/// The checks of [`admit`] a caller makes (the rows of one table).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Checks {
    /// Protected commands, AUTH, NO_MULTI, RESP2 subscriber context, busy
    /// script: the connection's checks.
    pub connection: bool,
    /// NOSCRIPT and writes from a read-only script, with the script texts.
    pub script: bool,
    /// CLIENT PAUSE and the test-control plane's fault rules.
    pub holds: bool,
    /// Queued while the client is in MULTI.
    pub queue: bool,
}

impl Caller {
    /// Which checks this caller makes. Blocking commands never block for
    /// anyone but a client ([`Caller::may_block`]).
    pub(crate) const fn checks(self) -> Checks {
        match self {
            Caller::Client => Checks {
                connection: true,
                script: false,
                holds: true,
                queue: true,
            },
            Caller::Exec | Caller::Control | Caller::Waiter => Checks {
                connection: false,
                script: false,
                holds: false,
                queue: false,
            },
            Caller::Script { .. } => Checks {
                connection: false,
                script: true,
                holds: false,
                queue: false,
            },
        }
    }

    /// Whether a blocking command may block (Redis's `CLIENT_DENY_BLOCKING`
    /// is set for everything else: inside EXEC, a script, the control plane).
    pub(crate) const fn may_block(self) -> bool {
        matches!(self, Caller::Client)
    }

    /// Whether the call is counted in the server's statistics (INFO
    /// commandstats, errorstats, total_commands_processed), MONITOR and the
    /// slow log: the control plane is not a client of the server.
    const fn observed(self) -> bool {
        !matches!(self, Caller::Control | Caller::Waiter)
    }
}

/// What admission knows of the client and the server at the site it runs
/// (the engine, or a connection answering while a script is busy).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Facts<'a> {
    pub authenticated: bool,
    pub in_multi: bool,
    /// RESP2 and subscribed: only the pub/sub commands are allowed.
    pub subscribed_resp2: bool,
    /// Connected over loopback (a `local` protected-command setting).
    pub local: bool,
    /// The settings that let protected commands in.
    pub guards: &'a Guards,
    /// The script or function that is busy (only on the connection side:
    /// the engine is not busy while it admits); `-BUSY` names it.
    pub busy: Option<&'a crate::lua::ScriptState>,
    /// Writes are refused after a failed background save
    /// ([`crate::persist::saves::writes_denied`]).
    pub disk_error: bool,
    /// With `disk_error`: the client's MULTI queue holds a write, so its
    /// EXEC is a write (Redis's `mstate.cmd_flags`).
    pub queued_write: bool,
    /// The dataset is loading: only `loading` commands run.
    pub loading: bool,
}

impl Facts<'static> {
    /// The facts of a caller without a connection of its own (a script's
    /// `redis.call`, the control plane): admission makes none of the
    /// connection's checks for them ([`Caller::checks`]).
    const INTERNAL: Facts<'static> = Facts {
        authenticated: true,
        in_multi: false,
        subscribed_resp2: false,
        local: true,
        guards: &Guards {
            debug: Allow::No,
            module: Allow::No,
            test: Allow::No,
        },
        busy: None,
        disk_error: false,
        queued_write: false,
        loading: false,
    };
}

/// `no | yes | local`: who may run a protected command.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Allow {
    #[default]
    No,
    Yes,
    Local,
}

impl Allow {
    /// Reads a `no|yes|local` directive's value.
    pub(crate) fn parse(setting: &str) -> Allow {
        match setting {
            "yes" => Allow::Yes,
            "local" => Allow::Local,
            _ => Allow::No,
        }
    }

    fn lets_in(self, local: bool) -> bool {
        match self {
            Allow::Yes => true,
            Allow::Local => local,
            Allow::No => false,
        }
    }
}

/// The settings of the protected commands: one entry per guard flag.
#[derive(Clone, Copy, Debug, Default)]
pub struct Guards {
    /// `enable-debug-command` (DEBUG).
    pub debug: Allow,
    /// `enable-module-command` (MODULE LOAD, LOADEX, UNLOAD).
    pub module: Allow,
    /// `enable-test-commands` (the `COORDIS.*` family).
    pub test: Allow,
}

impl Guards {
    pub(crate) fn from_config(config: &crate::config::Config) -> Guards {
        Guards {
            debug: Allow::parse(&config.enable_debug_command),
            module: Allow::parse(&config.enable_module_command),
            test: Allow::parse(&config.enable_test_commands),
        }
    }

    /// The refusal of a protected command whose setting does not let this
    /// client in (Redis's check right after arity), from its guard flag.
    fn refusal(&self, spec: &CommandSpec, local: bool) -> Option<Reply> {
        let (setting, refusal) = if spec.has(flags::GUARD_DEBUG) {
            (self.debug, errors::err(errors::DEBUG_DISABLED))
        } else if spec.has(flags::GUARD_MODULE) {
            (self.module, errors::err(errors::MODULE_DISABLED))
        } else {
            let family = spec.name.split('|').next().unwrap_or(spec.name);
            (self.test, errors::test_commands_disabled(&family.to_ascii_uppercase()))
        };
        (!setting.lets_in(local)).then_some(refusal)
    }
}

/// Admission's answer.
pub(crate) enum Verdict {
    /// Run it now ([`call`]).
    Run(&'static CommandSpec),
    /// Queue it: the client is in MULTI (answer `+QUEUED`).
    Queue(&'static CommandSpec),
    /// Refused with this reply (Redis's `rejectCommand`): inside MULTI the
    /// transaction is doomed; a refused EXEC ends it ([`refusal`]).
    Refused {
        spec: Option<&'static CommandSpec>,
        reply: Reply,
    },
    /// Held by CLIENT PAUSE until it ends (the request runs again then).
    Postponed,
    /// A fault rule matched: what it does instead of (or to) the command.
    Fault(&'static CommandSpec, FaultAction),
    /// Cluster mode: another node serves the keys, or the cluster cannot
    /// (Redis's `clusterRedirectClient`): inside MULTI the transaction is
    /// doomed; a redirected EXEC discards it, and its reply is the
    /// redirection itself, not an EXECABORT.
    Redirected { spec: &'static CommandSpec, reply: Reply },
}

/// The state-dependent checks only the engine can make ([`Checks::holds`]).
pub(crate) trait Holds {
    /// CLIENT PAUSE holds this command now.
    fn paused(&mut self, spec: &'static CommandSpec, args: &[Bytes]) -> bool;
    /// The fault rule that fires for this command, if any.
    fn fault(&mut self, spec: &'static CommandSpec, args: &[Bytes]) -> Option<FaultAction>;
    /// Cluster mode: the redirection or error when this node does not
    /// serve the command's keys ([`crate::cluster::route`]).
    fn redirect(&mut self, spec: &'static CommandSpec, args: &[Bytes]) -> Option<Reply>;
}

/// No holds: a connection answering while a script is busy (the pause and
/// the rules live in the engine, which the script holds).
pub(crate) struct NoHolds;

impl Holds for NoHolds {
    fn paused(&mut self, _: &'static CommandSpec, _: &[Bytes]) -> bool {
        false
    }
    fn fault(&mut self, _: &'static CommandSpec, _: &[Bytes]) -> Option<FaultAction> {
        None
    }
    fn redirect(&mut self, _: &'static CommandSpec, _: &[Bytes]) -> Option<Reply> {
        None
    }
}

/// Admission: whether the command `args` may run for `caller`, in Redis
/// 7.0.15's order (`processCommand`, and `scriptCall` for scripts). The
/// slots the next subsystems fill are marked where they go in that order.
pub(crate) fn admit(caller: Caller, args: &[Bytes], facts: &Facts, holds: &mut dyn Holds) -> Verdict {
    let checks = caller.checks();
    let refuse = |spec, reply| Verdict::Refused { spec, reply };
    // 1. Unknown command or subcommand, then arity.
    let spec = match cmd::resolve(args) {
        Ok(spec) => spec,
        Err(Unresolved::Unknown(reply)) => {
            let reply = if checks.script {
                errors::err(errors::SCRIPT_UNKNOWN_COMMAND)
            } else {
                reply
            };
            return refuse(None, reply);
        }
        Err(Unresolved::Arity(spec)) => {
            let reply = if checks.script {
                errors::err(errors::SCRIPT_WRONG_ARGS)
            } else {
                errors::wrong_args(spec.name)
            };
            return refuse(Some(spec), reply);
        }
    };
    if checks.script {
        // Scripts: NOSCRIPT, then writes from a read-only script. (ACL,
        // OOM, MISCONF, a read-only replica and the cluster's slot checks
        // follow here, in `scriptCall`'s order, as those land.)
        if spec.has(flags::NOSCRIPT) {
            return refuse(Some(spec), errors::err(errors::NOT_FROM_SCRIPT));
        }
        if matches!(caller, Caller::Script { read_only: true }) && spec.has(flags::WRITE) {
            return refuse(Some(spec), errors::err(errors::WRITE_IN_READ_ONLY_SCRIPT));
        }
        return Verdict::Run(spec);
    }
    if checks.connection {
        // 2. Protected commands (their setting), before MULTI queues them.
        if spec.has(flags::PROTECTED) {
            if let Some(reply) = facts.guards.refusal(spec, facts.local) {
                return refuse(Some(spec), reply);
            }
        }
        // 3. Authentication.
        if !facts.authenticated && !spec.has(flags::NO_AUTH) {
            return refuse(Some(spec), errors::err(errors::NOAUTH));
        }
        // 4. A command MULTI refuses.
        if facts.in_multi && spec.has(flags::NO_MULTI) {
            return refuse(Some(spec), errors::err(errors::NOT_IN_MULTI));
        }
        // (ACL permissions go here as they land.)
        // 5. Cluster mode: the keys' slot is served here.
        if let Some(reply) = holds.redirect(spec, args) {
            return Verdict::Redirected { spec, reply };
        }
        // (OOM under maxmemory goes here as it lands.)
        // 6. MISCONF: a failed background save refuses writes (an EXEC
        // that would run one too) and PING.
        if facts.disk_error
            && (spec.has(flags::WRITE | flags::DISK_ERROR_REFUSED) || (spec.has(flags::EXEC) && facts.queued_write))
        {
            return refuse(Some(spec), errors::err(errors::MISCONF));
        }
        // (min-replicas and a read-only replica go here as those land.)
        // 7. RESP2 subscriber context.
        if facts.subscribed_resp2 && !spec.has(flags::SUBSCRIBED_OK) {
            return refuse(Some(spec), errors::not_while_subscribed(spec.name));
        }
        // 8. Loading the dataset: only commands flagged `loading` (an EXEC
        // only when everything queued is).
        if facts.loading && !spec.has(flags::LOADING) {
            return refuse(Some(spec), errors::err(errors::LOADING));
        }
        // 9. A busy script or function: only ALLOW_BUSY commands.
        if let Some(script) = facts.busy {
            if !spec.has(flags::ALLOW_BUSY) {
                return refuse(Some(spec), busy::busy(script));
            }
        }
    }
    if checks.holds {
        // 10. CLIENT PAUSE, then the test-control plane's fault rules.
        if holds.paused(spec, args) {
            return Verdict::Postponed;
        }
        if let Some(action) = holds.fault(spec, args) {
            return Verdict::Fault(spec, action);
        }
    }
    // 11. Queued inside MULTI (all but EXEC, DISCARD, MULTI, WATCH, QUIT, RESET).
    if checks.queue && facts.in_multi && !spec.has(flags::TX_CONTROL) {
        return Verdict::Queue(spec);
    }
    Verdict::Run(spec)
}

/// What a refusal does to the client's transaction (Redis's
/// `rejectCommand` / `execCommandAbort`), for the site to apply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TxEffect {
    None,
    /// Inside MULTI: EXEC will answer EXECABORT.
    Doom,
    /// A refused EXEC: the transaction ends (watches dropped) and the
    /// refusal is worded `EXECABORT Transaction discarded because of: ...`.
    Abort,
}

/// The reply and the transaction effect of a refusal.
pub(crate) fn refusal(spec: Option<&CommandSpec>, reply: Reply, in_multi: bool) -> (Reply, TxEffect) {
    if spec.is_some_and(|s| s.has(flags::EXEC)) {
        let reply = match &reply {
            Reply::Error(text) => errors::exec_abort(text),
            _ => reply,
        };
        return (reply, TxEffect::Abort);
    }
    (reply, if in_multi { TxEffect::Doom } else { TxEffect::None })
}

/// The engine's holds: CLIENT PAUSE and fault rules, on the server state.
struct EngineHolds<'c, 'a> {
    ctx: &'c mut Ctx<'a>,
}

impl Holds for EngineHolds<'_, '_> {
    fn paused(&mut self, spec: &'static CommandSpec, args: &[Bytes]) -> bool {
        let ctx = &mut *self.ctx;
        let (now, client) = (ctx.now, &*ctx.client);
        let scripting = ctx.scripting.as_deref();
        ctx.server
            .blocking
            .holds(now, || may_write(spec, args, client, scripting))
    }

    fn fault(&mut self, spec: &'static CommandSpec, args: &[Bytes]) -> Option<FaultAction> {
        let ctx = &mut *self.ctx;
        if !ctx.server.faults.any() {
            return None;
        }
        ctx.server.faults.check(spec, args, ctx.client)
    }

    fn redirect(&mut self, spec: &'static CommandSpec, args: &[Bytes]) -> Option<Reply> {
        let ctx = &mut *self.ctx;
        let cluster = ctx.server.cluster.as_deref()?;
        let config = &ctx.server.config.cluster;
        let client = &mut *ctx.client;
        let commands: Vec<(&'static CommandSpec, &[Bytes])> = if spec.has(flags::EXEC) {
            // EXEC outside MULTI only answers its own error.
            let queue = client.multi.as_ref()?;
            queue
                .iter()
                .filter_map(|a| cmd::resolve(a).ok().map(|s| (s, a.as_slice())))
                .collect()
        } else {
            vec![(spec, args)]
        };
        let queued_write = commands.iter().any(|(s, _)| s.has(flags::WRITE));
        let query = crate::cluster::route::Query {
            spec,
            commands,
            queued_write,
        };
        let who = crate::cluster::route::ClientFlags {
            asking: client.asking,
            readonly: client.cluster_readonly,
        };
        let (db, now) = (&ctx.dbs[0], ctx.now);
        let mut exists = |key: &[u8]| {
            db.peek(key)
                .is_some_and(|item| !crate::store::expired(item.expire_at(), now))
        };
        match crate::cluster::route::check(cluster, config, &query, who, &mut exists) {
            Ok(slot) => {
                client.cluster_slot = slot;
                None
            }
            Err(redirect) => Some(crate::cluster::route::reply(cluster, config, redirect)),
        }
    }
}

/// A client's request on the engine: admission, then the command, queued
/// or held as admission says. The whole of Redis's `processCommand`.
pub(crate) fn process(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let guards = ctx.server.guards;
    let client = &*ctx.client;
    let disk_error = crate::persist::saves::writes_denied(ctx.server);
    let facts = Facts {
        authenticated: client.authenticated,
        in_multi: client.multi.is_some(),
        subscribed_resp2: !client.resp3 && client.is_subscribed(),
        local: client.addr.ip().is_loopback(),
        guards: &guards,
        busy: None,
        disk_error,
        queued_write: disk_error
            && client
                .multi
                .iter()
                .flatten()
                .any(|args| cmd::resolve(args).is_ok_and(|s| s.has(flags::WRITE))),
        loading: false,
    };
    let verdict = admit(Caller::Client, args, &facts, &mut EngineHolds { ctx: &mut *ctx });
    match verdict {
        Verdict::Run(spec) => call(ctx, Caller::Client, spec, args),
        Verdict::Queue(spec) => {
            let client = &mut *ctx.client;
            client.last_cmd = spec.name.into();
            client.last_cmd_ms = ctx.now;
            if let Some(queue) = client.multi.as_mut() {
                queue.push(args.to_vec());
            }
            Reply::status("QUEUED")
        }
        Verdict::Refused { spec, reply } => reject(ctx, spec, reply),
        Verdict::Redirected { spec, reply } => {
            observe::rejected(ctx, Some(spec), &reply);
            if spec.has(flags::EXEC) {
                cmd::tx::end(ctx);
            } else if ctx.client.multi.is_some() {
                ctx.client.multi_failed = true;
            }
            reply
        }
        Verdict::Postponed => crate::blocked::postpone(ctx),
        Verdict::Fault(spec, action) => match action {
            FaultAction::Error(text) => Reply::Error(text.into()),
            FaultAction::Drop => {
                ctx.client.close_after_reply = true;
                Reply::NOTHING
            }
            FaultAction::Hang => crate::blocked::hang(ctx),
            FaultAction::LoseReply => {
                call(ctx, Caller::Client, spec, args);
                ctx.client.close_after_reply = true;
                Reply::NOTHING
            }
            FaultAction::Delay { ms, .. } => {
                ctx.client.reply_fault.delay_ms = ctx.client.reply_fault.delay_ms.max(ms);
                call(ctx, Caller::Client, spec, args)
            }
            FaultAction::Slice { bytes, pause_ms } => {
                ctx.client.reply_fault.slice = Some((bytes, pause_ms));
                call(ctx, Caller::Client, spec, args)
            }
        },
    }
}

/// A refused command on the engine: counted as rejected, and the
/// transaction doomed or ended as [`refusal`] says.
fn reject(ctx: &mut Ctx, spec: Option<&'static CommandSpec>, reply: Reply) -> Reply {
    observe::rejected(ctx, spec, &reply);
    let (reply, effect) = refusal(spec, reply, ctx.client.multi.is_some());
    match effect {
        TxEffect::None => {}
        TxEffect::Doom => ctx.client.multi_failed = true,
        TxEffect::Abort => cmd::tx::end(ctx),
    }
    reply
}

/// A command EXEC runs: it was admitted when queued; resolved again (the
/// queue keeps arguments only).
pub(crate) fn call_queued(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    match cmd::resolve(args) {
        Ok(spec) => call(ctx, Caller::Exec, spec, args),
        // Cannot happen: the command was resolved when it was queued.
        Err(Unresolved::Unknown(reply)) => reply,
        Err(Unresolved::Arity(spec)) => errors::wrong_args(spec.name),
    }
}

/// A script's `redis.call`: admitted with the script checks, then called.
/// The flag says whether a write command ran (a script that wrote cannot
/// be killed).
pub(crate) fn call_from_script(ctx: &mut Ctx, args: &[Bytes], read_only: bool) -> (Reply, bool) {
    let caller = Caller::Script { read_only };
    match admit(caller, args, &Facts::INTERNAL, &mut NoHolds) {
        Verdict::Run(spec) => {
            if let Some(reply) = script_cluster_check(ctx, spec, args) {
                observe::rejected(ctx, Some(spec), &reply);
                return (reply, false);
            }
            let reply = call(ctx, caller, spec, args);
            let wrote = spec.has(flags::WRITE) && !reply.is_error();
            (reply, wrote)
        }
        Verdict::Refused { spec, reply } => {
            observe::rejected(ctx, spec, &reply);
            (reply, false)
        }
        // Scripts are never queued, held, faulted or redirected (their
        // checks say so; their slot check is `script_cluster_check`).
        Verdict::Queue(_) | Verdict::Postponed | Verdict::Fault(..) | Verdict::Redirected { .. } => {
            (errors::err(errors::INTERNAL), false)
        }
    }
}

/// A command of the test-control plane: only looked up and checked for
/// arity, then called (not observed; it cannot block).
pub(crate) fn call_control(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    match admit(Caller::Control, args, &Facts::INTERNAL, &mut NoHolds) {
        Verdict::Run(spec) => call(ctx, Caller::Control, spec, args),
        Verdict::Refused { reply, .. } => reply,
        Verdict::Queue(_) | Verdict::Postponed | Verdict::Fault(..) | Verdict::Redirected { .. } => {
            errors::err(errors::INTERNAL)
        }
    }
}

/// Cluster mode: a script's command may touch only keys this node serves,
/// all in one slot — the slot of the keys the script declared, or of the
/// first it touched (Redis 7.0.15's `scriptVerifyClusterState`). Scripts
/// flagged `allow-cross-slot-keys` are not told apart yet: they get the
/// one-slot rule too.
fn script_cluster_check(ctx: &mut Ctx, spec: &'static CommandSpec, args: &[Bytes]) -> Option<Reply> {
    use crate::cluster::route::{self, ClientFlags, Query, Redirect};
    let cluster = ctx.server.cluster.as_deref()?;
    let config = &ctx.server.config.cluster;
    let client = &mut *ctx.client;
    let query = Query {
        spec,
        commands: vec![(spec, args)],
        queued_write: false,
    };
    let who = ClientFlags {
        asking: client.asking,
        readonly: client.cluster_readonly,
    };
    let (db, now) = (&ctx.dbs[0], ctx.now);
    let mut exists = |key: &[u8]| {
        db.peek(key)
            .is_some_and(|item| !crate::store::expired(item.expire_at(), now))
    };
    match route::check(cluster, config, &query, who, &mut exists) {
        Err(Redirect::DownReadOnly) => Some(errors::err(errors::SCRIPT_CLUSTER_DOWN_READ_ONLY)),
        Err(Redirect::DownState) => Some(errors::err(errors::SCRIPT_CLUSTER_DOWN)),
        Err(_) => Some(errors::err(errors::SCRIPT_NON_LOCAL_KEY)),
        Ok(None) => None,
        Ok(Some(slot)) => match client.cluster_slot {
            None => {
                client.cluster_slot = Some(slot);
                None
            }
            Some(declared) if declared != slot => Some(errors::err(errors::SCRIPT_CROSS_SLOT)),
            Some(_) => None,
        },
    }
}

/// The only place a handler runs. Around it: the client's last command,
/// timing and the statistics, `expired` events, MONITOR, the dirty counter,
/// the command's effect ([`feed`]) and client-side caching's invalidations
/// and remembered keys ([`crate::tracking::after_call`]).
#[inline]
pub(crate) fn call(ctx: &mut Ctx, caller: Caller, spec: &'static CommandSpec, args: &[Bytes]) -> Reply {
    let outer_caller = std::mem::replace(&mut ctx.caller, caller);
    if !matches!(caller, Caller::Script { .. }) {
        let client = &mut *ctx.client;
        client.last_cmd = spec.name.into();
        client.last_cmd_ms = ctx.now;
    }
    let dirty_before = ctx.server.dirty;
    let frame = ctx.server.effects.enter();
    let started = monotonic::now();
    let reply = (spec.handler)(ctx, args);
    let took = monotonic::since(started);
    if ctx.server.config.notify_keyspace_events != 0 || ctx.server.effects.active() {
        ctx.flush_expired();
    }
    if caller.observed() {
        ctx.server.stats.total_commands_processed += 1;
        observe::record(ctx, spec, args, took, &reply);
        if !ctx.server.monitors.is_empty() && !spec.has(flags::SKIP_MONITOR | flags::ADMIN) {
            cmd::server::feed_monitors(ctx, args);
        }
    }
    let dirty = ctx.server.dirty - dirty_before;
    ctx.server.effects.leave(frame, dirty, spec, ctx.client.db, args);
    crate::tracking::after_call(ctx, caller, spec, args);
    ctx.caller = outer_caller;
    reply
}

/// The end of an execution unit (a top-level command with whatever it ran
/// inside): blocked clients whose keys became ready are served, in Redis's
/// order, and the unit's effects are closed (wrapped in MULTI/EXEC when
/// there are several).
pub(crate) fn end_unit(ctx: &mut Ctx) {
    ctx.server.effects.end_unit();
    if ctx.server.blocking.blocked() != 0 {
        crate::blocked::serve_ready(ctx.dbs, ctx.server, ctx.client, ctx.now);
    }
}

/// Serves one blocked client from `key` (a unit of its own, after the
/// unit that made the key ready, as Redis's `handleClientsBlockedOnKeys`):
/// `serve` pops or moves what the blocked command waited for and adds its
/// effect (the plain pop, the move) with [`Ctx::also_propagate`]; the
/// blocking command itself is never an effect.
pub(crate) fn serve_waiter(ctx: &mut Ctx, serve: crate::blocked::Serve, args: &[Bytes], key: &Bytes) -> Option<Reply> {
    let outer_caller = std::mem::replace(&mut ctx.caller, Caller::Waiter);
    let frame = ctx.server.effects.enter();
    let reply = serve(ctx, args, key);
    ctx.server.effects.prevent();
    ctx.flush_expired();
    ctx.server.effects.leave_waiter(frame);
    ctx.server.effects.end_unit();
    ctx.caller = outer_caller;
    reply
}

/// Whether CLIENT PAUSE WRITE holds this command: it may write (a write
/// command, or one that may replicate: EVAL and FCALL unless their script
/// or function is flagged `no-writes`), or it is the EXEC of a transaction
/// with a command that may.
fn may_write(
    spec: &CommandSpec,
    args: &[Bytes],
    client: &crate::net::clients::ClientState,
    scripting: Option<&crate::lua::Scripting>,
) -> bool {
    let writes = |s: &CommandSpec, args: &[Bytes]| {
        if s.has(flags::WRITE) {
            return true;
        }
        if !s.has(flags::MAY_REPLICATE) {
            return false;
        }
        // A script's own flags decide (Redis's `evalGetCommandFlags` and
        // `fcallGetCommandFlags`).
        match (s.may_write, scripting) {
            (Some(may_write), Some(vm)) => may_write(vm, args),
            _ => true,
        }
    };
    writes(spec, args)
        || (spec.has(flags::EXEC)
            && client
                .multi
                .iter()
                .flatten()
                .any(|args| cmd::resolve(args).is_ok_and(|s| writes(s, args))))
}
