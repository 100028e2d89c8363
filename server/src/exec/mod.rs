//! The execution core: the one admission path (Redis's `processCommand`)
//! and the one [`call`] around every handler (Redis's `call()` with
//! `alsoPropagate`), for every caller.
//!
//! Every command — a client's request, a command EXEC runs, a script's
//! `redis.call`, a blocked client being served, the test-control plane,
//! the primary's replication stream on a replica —
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
use crate::evict::Outcome;
use crate::faults::FaultAction;
use crate::net::clients::ClientState;
use crate::persist::DiskError;
use crate::protocol::Reply;
use crate::state::ServerState;

/// Who runs a command. Each caller skips some admission checks
/// ([`Caller::checks`]) and some bookkeeping ([`call`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Caller {
    /// A client's request from its connection (also answered on the
    /// connection while a script is busy, [`crate::exec::busy`]).
    Client,
    /// A command queued in MULTI, run by EXEC: it was admitted when it
    /// was queued (Redis's `execCommand` calls `call()` directly).
    Exec,
    /// A script's or function's `redis.call`; `read_only` for EVAL_RO,
    /// FCALL_RO and `no-writes` scripts; `cross_slot` when, on a cluster
    /// node, its commands may touch keys of several slots
    /// (`allow-cross-slot-keys`, or a script without a shebang).
    Script { read_only: bool, cross_slot: bool },
    /// The test-control plane's keyspace access ([`crate::Server`]'s
    /// typed API): an internal client no CLIENT LIST shows. Loading the
    /// append-only file runs its commands as this caller too: Redis's fake
    /// AOF client skips `processCommand`'s checks the same way, and the
    /// commands are not observed.
    Control,
    /// A blocked client being served from a key that became ready: its
    /// command was admitted and counted when it blocked ([`serve_waiter`]).
    Waiter,
    /// A command of the primary's replication stream, applied by the
    /// replica link ([`crate::replica::link`]): as Redis's master client it
    /// gets no reply and skips authentication, the protected commands, the
    /// read-only replica, stale data, MISCONF and the holds; MULTI queues
    /// its commands as for any client, and it is counted in the statistics.
    Primary,
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
            Caller::Primary => Checks {
                connection: false,
                script: false,
                holds: false,
                queue: true,
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
    /// Writes are refused after a failed background save or a failed
    /// write or fsync of the append-only file ([`DiskError::of`]).
    pub disk_error: Option<DiskError>,
    /// With `disk_error`: the client's MULTI queue holds a write, so its
    /// EXEC is a write (Redis's `mstate.cmd_flags`).
    pub queued_write: bool,
    /// The dataset is loading: only `loading` commands run.
    pub loading: bool,
    /// A replica with `replica-read-only yes`: clients' writes (and an
    /// EXEC with a queued write, a script's write) are refused.
    pub replica_read_only: bool,
    /// A replica whose link is down, with `replica-serve-stale-data no`:
    /// only `stale` commands run (an EXEC only when everything queued is).
    pub stale_refused: bool,
    /// With `stale_refused`: the client's MULTI queue holds a command not
    /// flagged `stale` (Redis's `mstate.cmd_inv_flags`).
    pub queued_not_stale: bool,
    /// Looked up only on a replica, after a failed save or with too few
    /// replicas: what the script or function the command runs declared
    /// ([`CommandSpec::declared`]), which replaces its row's `write` and
    /// `stale` flags in those checks.
    pub declared: Option<cmd::Declared>,
    /// The client's ACL user when its commands need checking (`None`:
    /// it may run everything, the default user's fast path).
    pub acl: Option<&'a crate::acl::User>,
    /// Over `maxmemory` with nothing left to evict, as found before this
    /// command (Redis's `pre_command_oom_state`); for a script's command,
    /// only while the script may still be refused (no `allow-oom`, nothing
    /// written yet).
    pub out_of_memory: bool,
    /// With `out_of_memory`: the command is refused as a `denyoom` one is
    /// (an EXEC whose queue holds one; an EVAL or FCALL whose script or
    /// function is: [`CommandSpec::deny_oom`]).
    pub denyoom_by_content: bool,
    /// `min-replicas-to-write` is not met: writes are refused
    /// ([`crate::repl::Replication::too_few_replicas`]).
    pub too_few_replicas: bool,
    /// DEBUG SET-DISABLE-DENY-SCRIPTS is on: a script may call `noscript`
    /// commands ([`crate::state::ServerState::disable_deny_scripts`]).
    pub noscript_allowed: bool,
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
        disk_error: None,
        queued_write: false,
        loading: false,
        replica_read_only: false,
        stale_refused: false,
        queued_not_stale: false,
        declared: None,
        acl: None,
        out_of_memory: false,
        denyoom_by_content: false,
        too_few_replicas: false,
        noscript_allowed: false,
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
    /// Refused by the client's ACL user (`-NOPERM`; logged in the ACL log
    /// by the site, which knows the client).
    Denied {
        spec: &'static CommandSpec,
        denied: crate::acl::Denied,
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
    /// Past the OOM check: the tracking table is brought under
    /// `tracking-table-max-keys` ([`crate::tracking::limit_at_admission`]).
    fn limit_tracking(&mut self);
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
    fn limit_tracking(&mut self) {}
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
        // Scripts, in `scriptCall`'s order: NOSCRIPT, the ACL, writes from
        // a read-only script, then the server's state (a read-only replica,
        // MISCONF, too few replicas) and OOM; the cluster's slot checks
        // follow in `call_from_script`.
        if spec.has(flags::NOSCRIPT) && !facts.noscript_allowed {
            return refuse(Some(spec), errors::err(errors::NOT_FROM_SCRIPT));
        }
        // An `allow-stale` script on a replica serving no stale data may
        // run only `stale` commands (Redis's `scriptVerifyAllowStale`).
        if facts.stale_refused && !spec.has(flags::STALE) {
            return refuse(Some(spec), errors::err(errors::STALE_IN_SCRIPT));
        }
        if let Some(user) = facts.acl {
            if let Err(denied) = crate::acl::check(user, spec, args) {
                return Verdict::Denied { spec, denied };
            }
        }
        // May-replicate commands count as writes here (PUBLISH, PFCOUNT):
        // what lets a read-only script run under CLIENT PAUSE WRITE.
        if matches!(caller, Caller::Script { read_only: true, .. }) && spec.has(flags::WRITE | flags::MAY_REPLICATE) {
            return refuse(Some(spec), errors::err(errors::WRITE_IN_READ_ONLY_SCRIPT));
        }
        // A read-only replica refuses a script's writes (Redis's
        // `scriptVerifyWriteCommandAllow`; the script never wrote before,
        // since nothing here lets it).
        if facts.replica_read_only && spec.has(flags::WRITE) {
            return refuse(Some(spec), errors::err(errors::READONLY_REPLICA));
        }
        // MISCONF, for a script that did not write yet (its facts say).
        if let Some(disk_error) = facts.disk_error.filter(|_| spec.has(flags::WRITE)) {
            return refuse(Some(spec), disk_error.reply());
        }
        // Not enough good replicas (`scriptVerifyWriteCommandAllow`).
        if facts.too_few_replicas && spec.has(flags::WRITE) {
            return refuse(Some(spec), errors::err(errors::NOREPLICAS));
        }
        // OOM (Redis's `scriptVerifyOOM`): a `denyoom` command as the
        // script's first write, over the limit found when it started.
        if facts.out_of_memory && spec.has(flags::DENYOOM) {
            return refuse(Some(spec), errors::err(errors::OOM));
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
        // 5. The ACL: the command, its keys, its channels.
        if let Some(user) = facts.acl {
            if let Err(denied) = crate::acl::check(user, spec, args) {
                return Verdict::Denied { spec, denied };
            }
        }
        // 6. Cluster mode: the keys' slot is served here.
        if let Some(reply) = holds.redirect(spec, args) {
            return Verdict::Redirected { spec, reply };
        }
        // 7. OOM: over `maxmemory` after eviction, a `denyoom` command (or an
        // EXEC or script that is one), and in MULTI anything it would
        // queue (queuing grows memory too), are refused.
        if facts.out_of_memory
            && (spec.has(flags::DENYOOM)
                || facts.denyoom_by_content
                || (facts.in_multi && !spec.has(flags::OOM_OK_IN_MULTI)))
        {
            return refuse(Some(spec), errors::err(errors::OOM));
        }
        // 7b. The tracking table's limit (commands refused above leave it).
        holds.limit_tracking();
        // A script or function that declares flags is a write unless it
        // says `no-writes` (Redis's `scriptFlagsToCmdFlags`), for the
        // checks below as for Redis's `processCommand`.
        let writes = facts.declared.map_or(spec.has(flags::WRITE), |d| d.writes);
        // 8. MISCONF: a failed background save, or a failed write or fsync
        // of the append-only file, refuses writes (an EXEC that would run
        // one too) and PING.
        if let Some(disk_error) = facts.disk_error {
            if writes || spec.has(flags::DISK_ERROR_REFUSED) || (spec.has(flags::EXEC) && facts.queued_write) {
                return refuse(Some(spec), disk_error.reply());
            }
        }
        // 9. Not enough good replicas (`min-replicas-to-write`): writes,
        // and an EXEC that would run one.
        if facts.too_few_replicas && (writes || (spec.has(flags::EXEC) && facts.queued_write)) {
            return refuse(Some(spec), errors::err(errors::NOREPLICAS));
        }
        // 10. A read-only replica refuses writes (an EXEC that would run one).
        if facts.replica_read_only && (writes || (spec.has(flags::EXEC) && facts.queued_write)) {
            return refuse(Some(spec), errors::err(errors::READONLY_REPLICA));
        }
        // 11. RESP2 subscriber context.
        if facts.subscribed_resp2 && !spec.has(flags::SUBSCRIBED_OK) {
            return refuse(Some(spec), errors::not_while_subscribed(spec.name));
        }
        // 12. A replica whose link is down serves only `stale` commands
        // with `replica-serve-stale-data no`.
        let stale_ok = facts.declared.map_or(spec.has(flags::STALE), |d| d.stale_ok);
        if facts.stale_refused && (!stale_ok || (spec.has(flags::EXEC) && facts.queued_not_stale)) {
            return refuse(Some(spec), errors::err(errors::MASTERDOWN));
        }
        // 13. Loading the dataset: only commands flagged `loading` (an EXEC
        // only when everything queued is).
        if facts.loading && !spec.has(flags::LOADING) {
            return refuse(Some(spec), errors::err(errors::LOADING));
        }
        // 14. A busy script or function: only ALLOW_BUSY commands.
        if let Some(script) = facts.busy {
            if !spec.has(flags::ALLOW_BUSY) {
                return refuse(Some(spec), busy::busy(script));
            }
        }
    }
    if checks.holds {
        // 15. CLIENT PAUSE, then the test-control plane's fault rules.
        if holds.paused(spec, args) {
            return Verdict::Postponed;
        }
        if let Some(action) = holds.fault(spec, args) {
            return Verdict::Fault(spec, action);
        }
    }
    // 16. Queued inside MULTI (all but EXEC, DISCARD, MULTI, WATCH, QUIT, RESET).
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
    fn limit_tracking(&mut self) {
        crate::tracking::limit_at_admission(self.ctx);
    }

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
/// `busy`: the script whose hook serves the request ([`busy`]).
pub(crate) fn process(ctx: &mut Ctx, args: &[Bytes], busy: Option<&crate::lua::ScriptState>) -> Reply {
    // maxmemory: evict first (not inside a busy script, as Redis), then
    // admission refuses what OOM refuses.
    let out_of_memory = ctx.server.config.memory.maxmemory != 0 && busy.is_none() && {
        let outcome = crate::evict::perform(ctx);
        crate::tracking::after_eviction(ctx);
        outcome == Outcome::Fail
    };
    if busy.is_none() {
        // (Inside a busy script this is the script's own.)
        ctx.server.oom_at_start = out_of_memory;
    }
    let denyoom_by_content = out_of_memory && denyoom_by_content(ctx, args);
    let guards = ctx.server.guards;
    let client = &*ctx.client;
    let user = ctx.server.acl.restricted(&client.user);
    let disk_error = DiskError::of(ctx.server);
    let replica = ReplicaFacts::of(ctx.server);
    // Whether a queued command passes `test`, with what its script or
    // function declared, as Redis adds each queued command's flags (a
    // script's own among them) to its transaction's.
    let scripting = ctx.scripting.as_deref();
    let queued = |test: fn(&CommandSpec, Option<cmd::Declared>) -> bool| {
        client
            .multi
            .iter()
            .flatten()
            .any(|args| cmd::resolve(args).is_ok_and(|s| test(s, declared_flags(args, scripting))))
    };
    let too_few_replicas = ctx.server.repl.too_few_replicas(&ctx.server.config);
    let facts = Facts {
        authenticated: client.authenticated,
        in_multi: client.multi.is_some(),
        subscribed_resp2: !client.resp3 && client.is_subscribed(),
        local: client.addr.is_local(),
        guards: &guards,
        busy,
        disk_error,
        queued_write: (disk_error.is_some() || replica.read_only || too_few_replicas)
            && queued(|s, declared| declared.map_or(s.has(flags::WRITE), |d| d.writes)),
        loading: ctx.server.shared.loading.is_active(),
        replica_read_only: replica.read_only,
        stale_refused: replica.stale_refused,
        queued_not_stale: replica.stale_refused
            && queued(|s, declared| !declared.map_or(s.has(flags::STALE), |d| d.stale_ok)),
        // Only the states that read it pay for the lookup (the primary's
        // hot path does not).
        declared: if replica.read_only || replica.stale_refused || disk_error.is_some() || too_few_replicas {
            declared_flags(args, scripting)
        } else {
            None
        },
        acl: user.as_deref(),
        out_of_memory,
        denyoom_by_content,
        too_few_replicas,
        // Read by scripts' checks only.
        noscript_allowed: false,
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
        Verdict::Denied { spec, denied } => {
            let context = if ctx.client.multi.is_some() {
                crate::acl::Context::Multi
            } else {
                crate::acl::Context::Toplevel
            };
            log_denial(ctx, spec, args, denied, context);
            reject(ctx, Some(spec), denial(spec, denied))
        }
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

/// Whether `args` is refused under OOM for what it would run: an EXEC
/// whose queue holds a `denyoom` command (Redis's `mstate.cmd_flags`), an
/// EVAL or FCALL whose script says so ([`CommandSpec::deny_oom`]).
fn denyoom_by_content(ctx: &Ctx, args: &[Bytes]) -> bool {
    let Ok(spec) = cmd::resolve(args) else {
        return false;
    };
    let denies = |s: &CommandSpec, args: &[Bytes]| {
        s.has(flags::DENYOOM)
            || match (s.deny_oom, ctx.scripting.as_deref()) {
                (Some(deny_oom), Some(vm)) => deny_oom(vm, args),
                _ => false,
            }
    };
    if spec.has(flags::EXEC) {
        return ctx
            .client
            .multi
            .iter()
            .flatten()
            .any(|args| cmd::resolve(args).is_ok_and(|s| denies(s, args)));
    }
    spec.deny_oom.is_some() && denies(spec, args)
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

/// The `-NOPERM` reply to a client's command its user may not run.
pub(crate) fn denial(spec: &CommandSpec, denied: crate::acl::Denied) -> Reply {
    match denied {
        crate::acl::Denied::Command => errors::acl::noperm_command(spec.name),
        crate::acl::Denied::Key(_) => errors::err(errors::acl::NOPERM_KEY),
        crate::acl::Denied::Channel(_) => errors::err(errors::acl::NOPERM_CHANNEL),
    }
}

/// Adds a denial to the ACL log (Redis's `addACLLogEntry`): the command,
/// or the key or channel refused, with the client's user and info.
pub(crate) fn log_denial(
    ctx: &mut Ctx,
    spec: &CommandSpec,
    args: &[Bytes],
    denied: crate::acl::Denied,
    context: crate::acl::Context,
) {
    log_denial_of(ctx.server, ctx.client, ctx.now, spec, args, denied, context);
}

/// [`log_denial`] for `client` at `now`, outside a command (a denial
/// answered while a script was busy).
pub(crate) fn log_denial_of(
    server: &mut ServerState,
    client: &mut ClientState,
    now: u64,
    spec: &CommandSpec,
    args: &[Bytes],
    denied: crate::acl::Denied,
    context: crate::acl::Context,
) {
    use crate::acl::{Denied, Reason};
    let (reason, object) = match denied {
        Denied::Command => (Reason::Command, Bytes::from_static(spec.name.as_bytes())),
        Denied::Key(pos) => (Reason::Key, args[pos].clone()),
        Denied::Channel(pos) => (Reason::Channel, args[pos].clone()),
    };
    // Redis's client notes a command as its last one when it looks it up,
    // refused or not (a script's commands are its caller's EVAL).
    if context != crate::acl::Context::Lua {
        client.last_cmd = spec.name.into();
        client.last_cmd_ms = now;
    }
    let info = client.info_line(now);
    let max = server.config.acllog_max_len;
    let user = client.user.clone();
    server.acl.add_log(reason, context, object, user, now, info, max);
}

/// A command EXEC runs: it was admitted when queued; resolved again (the
/// queue keeps arguments only), and checked against the ACL again (the
/// rules may have changed since, as Redis's `execCommand` checks).
pub(crate) fn call_queued(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    match cmd::resolve(args) {
        Ok(spec) => {
            if let Some(user) = ctx.server.acl.restricted(&ctx.client.user) {
                if let Err(denied) = crate::acl::check(&user, spec, args) {
                    log_denial(ctx, spec, args, denied, crate::acl::Context::Multi);
                    let reply = errors::acl::exec_changed(match denied {
                        crate::acl::Denied::Command => errors::acl::EXEC_CMD,
                        crate::acl::Denied::Key(_) => errors::acl::EXEC_KEY,
                        crate::acl::Denied::Channel(_) => errors::acl::EXEC_CHANNEL,
                    });
                    observe::rejected(ctx, None, &reply);
                    return reply;
                }
            }
            call(ctx, Caller::Exec, spec, args)
        }
        // Cannot happen: the command was resolved when it was queued.
        Err(Unresolved::Unknown(reply)) => reply,
        Err(Unresolved::Arity(spec)) => errors::wrong_args(spec.name),
    }
}

/// A script's `redis.call`: admitted with the script checks, then called.
/// The flag says whether a write command ran (a script that wrote cannot
/// be killed). `wrote`: the script wrote before; it is not stopped halfway
/// by a disk error that arose since (Redis's `SCRIPT_WRITE_DIRTY`).
pub(crate) fn call_from_script(
    ctx: &mut Ctx,
    args: &[Bytes],
    caller: Caller,
    may_oom: bool,
    wrote: bool,
) -> (Reply, bool) {
    let replica = ReplicaFacts::of(ctx.server);
    let user = ctx.server.acl.restricted(&ctx.client.user);
    let facts = Facts {
        disk_error: if wrote { None } else { DiskError::of(ctx.server) },
        replica_read_only: replica.read_only,
        stale_refused: replica.stale_refused,
        acl: user.as_deref(),
        out_of_memory: may_oom && ctx.server.oom_at_start,
        too_few_replicas: ctx.server.repl.too_few_replicas(&ctx.server.config),
        noscript_allowed: ctx.server.disable_deny_scripts,
        ..Facts::INTERNAL
    };
    match admit(caller, args, &facts, &mut NoHolds) {
        Verdict::Run(spec) => {
            if let Some(reply) = script_cluster_check(ctx, caller, spec, args) {
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
        Verdict::Denied { spec, denied } => {
            log_denial(ctx, spec, args, denied, crate::acl::Context::Lua);
            let reply = errors::acl::script_denied(match denied {
                crate::acl::Denied::Command => errors::acl::SCRIPT_CMD,
                crate::acl::Denied::Key(_) => errors::acl::SCRIPT_KEY,
                crate::acl::Denied::Channel(_) => errors::acl::SCRIPT_CHANNEL,
            });
            observe::rejected(ctx, Some(spec), &reply);
            (reply, false)
        }
        // Scripts are never queued, held, faulted or redirected (their
        // checks say so; their slot check is `script_cluster_check`).
        Verdict::Queue(_) | Verdict::Postponed | Verdict::Fault(..) | Verdict::Redirected { .. } => {
            (errors::err(errors::INTERNAL), false)
        }
    }
}

/// What the script or function `args` runs declared, if anything.
fn declared_flags(args: &[Bytes], scripting: Option<&crate::lua::Scripting>) -> Option<cmd::Declared> {
    let spec = cmd::resolve(args).ok()?;
    spec.declared
        .zip(scripting)
        .and_then(|(declared, vm)| declared(vm, args))
}

/// What being a replica means for admission (for clients and scripts;
/// the primary's own stream is never refused for it).
#[derive(Clone, Copy)]
struct ReplicaFacts {
    read_only: bool,
    stale_refused: bool,
}

impl ReplicaFacts {
    fn of(server: &crate::state::ServerState) -> ReplicaFacts {
        let replica = &server.replica;
        let config = &server.config.replica;
        ReplicaFacts {
            read_only: replica.is_replica() && config.read_only,
            stale_refused: replica.is_replica() && !replica.link_up() && !config.serve_stale_data,
        }
    }
}

/// Whether a replica applies its primary's write while its disk fails
/// (`-MISCONF` for its clients; Redis's `processCommand` for the master
/// client): with `replica-ignore-disk-write-errors yes` it does, logging it
/// every 10 s; with `no` the server stops, as Redis panics.
fn disk_error_allows_primary(server: &mut ServerState) -> bool {
    if server.shared.aof.fatal.is_closed() {
        return false;
    }
    if DiskError::of(server).is_none() {
        return true;
    }
    if !server.config.replica.ignore_disk_write_errors {
        let [rule, failure, meditation] = errors::REPLICA_DISK_PANIC;
        tracing::warn!("{rule}");
        tracing::warn!("{failure}");
        server.shared.aof.die(meditation);
        return false;
    }
    let now = server.clock.now_ms();
    if now >= server.replica.disk_error_logged_ms + 10_000 || server.replica.disk_error_logged_ms == 0 {
        server.replica.disk_error_logged_ms = now;
        tracing::warn!("{}", errors::REPLICA_DISK_IGNORED);
    }
    true
}

/// Where a command that should not fail here came from (Redis's master
/// and AOF clients in `afterErrorReply`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Propagated {
    /// The primary's replication stream.
    Primary,
    /// The append-only file, loading.
    Aof,
}

/// The error replies to a command of the primary's stream or of the
/// append-only file (its own, or those of the commands an EXEC ran):
/// each counted (`unexpected_error_replies`) and logged as Redis logs it.
/// `true` when `propagation-error-behavior` says the server must stop, as
/// Redis panics ([`errors::propagation_panic`] says how): `panic`, or
/// `panic-on-replicas` for a read-only replica's stream.
pub(crate) fn unexpected_errors(server: &mut ServerState, from: Propagated, name: &str, reply: &Reply) -> bool {
    let errors_in = |r: &Reply| -> Vec<String> {
        match r {
            Reply::Error(text) => vec![text.to_string()],
            Reply::Array(items) if name == "exec" => items
                .iter()
                .filter_map(|i| match i {
                    Reply::Error(text) => Some(text.to_string()),
                    _ => None,
                })
                .collect(),
            _ => vec![],
        }
    };
    let found = errors_in(reply);
    if found.is_empty() {
        return false;
    }
    let (who, to) = match from {
        Propagated::Primary => ("replica", "master"),
        Propagated::Aof => ("server", "AOF-loading-client"),
    };
    for text in &found {
        tracing::warn!("{}", errors::propagation_error(who, to, text, name));
        server.stats.unexpected_error_replies += 1;
    }
    let behavior = server.config.replica.propagation_error_behavior.as_str();
    match from {
        Propagated::Primary => server.config.replica.read_only && behavior != "ignore",
        Propagated::Aof => behavior == "panic",
    }
}

/// A command of the primary's replication stream
/// ([`Caller::Primary`]): admitted without the client checks, queued
/// inside the link's MULTI, called; the reply is dropped by the caller.
/// An error reply is logged and counted, and stops the server under
/// `propagation-error-behavior panic` ([`unexpected_errors`]).
pub(crate) fn process_primary(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let reply = primary_command(ctx, args);
    let name = ctx.client.last_cmd.clone();
    if unexpected_errors(ctx.server, Propagated::Primary, &name, &reply) {
        // The server stops (the last line is logged as it does).
        let [rule, failure, meditation] = errors::propagation_panic("replica", "master", &name);
        tracing::warn!("{rule}");
        tracing::warn!("{failure}");
        ctx.server.shared.aof.die(&meditation);
    }
    reply
}

fn primary_command(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let facts = Facts {
        in_multi: ctx.client.multi.is_some(),
        ..Facts::INTERNAL
    };
    let verdict = admit(Caller::Primary, args, &facts, &mut NoHolds);
    if let Verdict::Run(spec) | Verdict::Queue(spec) = verdict {
        if spec.has(flags::WRITE) && !disk_error_allows_primary(ctx.server) {
            return Reply::NOTHING;
        }
    }
    match verdict {
        Verdict::Run(spec) => call(ctx, Caller::Primary, spec, args),
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
        // The primary's stream is never held or faulted (its checks say so).
        Verdict::Postponed | Verdict::Fault(..) | Verdict::Denied { .. } | Verdict::Redirected { .. } => {
            errors::err(errors::INTERNAL)
        }
    }
}

/// `redis.acl_check_cmd`: whether the script's client's user may run the
/// command (`Bool`), or an error for an unknown one or a wrong arity.
pub(crate) fn acl_check_from_script(
    server: &crate::state::ServerState,
    client: &crate::net::clients::ClientState,
    args: &[Bytes],
) -> Reply {
    // Redis looks the command up without checking its arity.
    let spec = match cmd::resolve(args) {
        Ok(spec) | Err(Unresolved::Arity(spec)) => spec,
        Err(Unresolved::Unknown(_)) => return errors::err(errors::acl::ACL_CHECK_CMD_INVALID),
    };
    Reply::Bool(match server.acl.user(&client.user) {
        Some(user) => crate::acl::check(user, spec, args).is_ok(),
        None => false,
    })
}

/// A command of the test-control plane: only looked up and checked for
/// arity, then called (not observed; it cannot block).
pub(crate) fn call_control(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    match admit(Caller::Control, args, &Facts::INTERNAL, &mut NoHolds) {
        Verdict::Run(spec) => call(ctx, Caller::Control, spec, args),
        Verdict::Refused { reply, .. } => reply,
        Verdict::Queue(_)
        | Verdict::Postponed
        | Verdict::Fault(..)
        | Verdict::Denied { .. }
        | Verdict::Redirected { .. } => errors::err(errors::INTERNAL),
    }
}

/// Cluster mode: a script's command may touch only keys this node serves,
/// all in one slot — the slot of the keys the script declared, or of the
/// first it touched (Redis 7.0.15's `scriptVerifyClusterState`); with
/// `cross_slot` (see [`Caller::Script`]) any slot this node serves.
fn script_cluster_check(ctx: &mut Ctx, caller: Caller, spec: &'static CommandSpec, args: &[Bytes]) -> Option<Reply> {
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
        Ok(Some(_)) if matches!(caller, Caller::Script { cross_slot: true, .. }) => None,
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
    if ctx.client.tracking.is_some() {
        crate::tracking::before_call(ctx, caller, spec, args);
    }
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
            cmd::server::feed_monitors(ctx, Some(spec), args);
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
    if let Some(offset) = ctx.server.effects.end_unit() {
        ctx.client.repl_offset = offset;
    }
    if ctx.server.blocking.blocked() != 0 {
        // Measured against the clock now, not the unit's start, as Redis
        // updates its cached time to serve them: a key that expired while
        // the unit ran (a DEBUG SLEEP in MULTI) serves nobody.
        let now = ctx.server.clock.now_ms();
        crate::blocked::serve_ready(ctx.dbs, ctx.server, ctx.client, now);
    }
}

/// Serves one blocked client from `key` (a unit of its own, after the
/// unit that made the key ready, as Redis's `handleClientsBlockedOnKeys`):
/// `serve` pops or moves what the blocked command waited for and adds its
/// effect (the plain pop, the move) with [`Ctx::also_propagate`]; the
/// blocking command itself is never an effect.
///
/// A served client's blocking call is counted now ([`observe::unblocked`]):
/// its time and the serving's, its failure (an error reply, counted in
/// errorstats too), its latency and slow-log entry.
pub(crate) fn serve_waiter(ctx: &mut Ctx, serve: crate::blocked::Serve, args: &[Bytes], key: &Bytes) -> Option<Reply> {
    let outer_caller = std::mem::replace(&mut ctx.caller, Caller::Waiter);
    let frame = ctx.server.effects.enter();
    let started = monotonic::now();
    let reply = serve(ctx, args, key);
    let serve_usec = monotonic::since(started).as_micros().min(u64::MAX as u128) as u64;
    if let Some(reply) = &reply {
        if reply.is_error() {
            observe::error_to_other(ctx.server, reply);
        }
        if let Some(call) = ctx.client.blocked.as_deref().and_then(|b| b.call()) {
            let how = observe::Unblock {
                call,
                serve_usec,
                failed: reply.is_error(),
                args,
            };
            observe::unblocked(ctx.server, ctx.client, ctx.now, how);
        }
    }
    ctx.server.effects.prevent();
    ctx.flush_expired();
    ctx.server.effects.leave_waiter(frame);
    if let Some(offset) = ctx.server.effects.end_unit() {
        ctx.client.repl_offset = offset;
    }
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
        declared_flags(args, scripting).is_none_or(|d| d.may_write)
    };
    writes(spec, args)
        || (spec.has(flags::EXEC)
            && client
                .multi
                .iter()
                .flatten()
                .any(|args| cmd::resolve(args).is_ok_and(|s| writes(s, args))))
}
