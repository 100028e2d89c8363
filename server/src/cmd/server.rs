//! Connection and server commands: PING, ECHO, HELLO, AUTH, SELECT, QUIT,
//! RESET, COMMAND, CONFIG, TIME, DBSIZE, FLUSHDB/FLUSHALL, SWAPDB, MONITOR,
//! ROLE, the saves, the replication handshake, WAIT, SHUTDOWN. CLIENT's
//! subcommands are in [`super::client`], INFO in [`super::info`]; their
//! rows are here, in the table's order.

use bytes::Bytes;

use super::args::{db_index, is};
use super::flags::*;
use super::keyspecs::{Begin, Find, KeySpec};
use super::{acl, CommandSpec, Ctx};
use crate::blocked;
use crate::config::{Effect, SetError};
use crate::errors::{self, err};
use crate::exec::busy::{Answer, BusyCtx};
use crate::net::clients::ClientAddr;
use crate::persist::saves;
use crate::protocol::Reply;
use crate::store::{glob, num};
use crate::tri;

use crate::REDIS_VERSION;

#[rustfmt::skip]
pub(crate) static COMMANDS: &[CommandSpec] = &[
    command!("connection", "ping", -1, FAST | SUBSCRIBED_OK | DISK_ERROR_REFUSED, acl::CONNECTION, "Ping the server", ping),
    command!("connection", "echo", 2, LOADING | STALE | FAST, acl::CONNECTION, "Echo the given string", echo),
    command!("connection", "hello", -1, NOSCRIPT | LOADING | STALE | FAST | NO_AUTH | ALLOW_BUSY, acl::CONNECTION, "Handshake with Redis", hello).redacts(hello_redacts),
    command!("connection", "auth", -2, NOSCRIPT | LOADING | STALE | FAST | NO_AUTH | ALLOW_BUSY, acl::CONNECTION, "Authenticate to the server", auth).redacts(auth_redacts),
    command!("connection", "select", 2, LOADING | STALE | FAST, acl::CONNECTION, "Change the selected database for the current connection", select),
    command!("connection", "quit", -1, NOSCRIPT | LOADING | STALE | FAST | NO_AUTH | ALLOW_BUSY | TX_CONTROL | SUBSCRIBED_OK | OOM_OK_IN_MULTI, acl::CONNECTION, "Close the connection", quit)
        .while_busy(quit_while_busy),
    command!("connection", "reset", 1, NOSCRIPT | LOADING | STALE | FAST | NO_AUTH | ALLOW_BUSY | TX_CONTROL | SUBSCRIBED_OK | OOM_OK_IN_MULTI, acl::CONNECTION, "Reset the connection", reset),
    command!("connection", "client", -2, 0, 0, "A container for client connection commands", super::container, super::client::SUBCOMMANDS),
    command!("server", "command", -1, LOADING | STALE, acl::CONNECTION, "Get array of Redis command details", command, COMMAND),
    command!("server", "info", -1, LOADING | STALE, acl::DANGEROUS, "Get information and statistics about the server", super::info::info),
    command!("server", "config", -2, 0, 0, "A container for server configuration commands", super::container, CONFIG),
    command!("server", "time", 1, LOADING | STALE | FAST, 0, "Return the current server time", time),
    command!("server", "dbsize", 1, READONLY | FAST, acl::KEYSPACE, "Return the number of keys in the selected database", dbsize),
    command!("server", "flushdb", -1, WRITE, acl::KEYSPACE | acl::DANGEROUS, "Remove all keys from the current database", flushdb),
    command!("server", "flushall", -1, WRITE, acl::KEYSPACE | acl::DANGEROUS, "Remove all keys from all databases", flushall),
    command!("server", "swapdb", 3, WRITE | FAST, acl::KEYSPACE | acl::DANGEROUS, "Swaps two Redis databases", swapdb),
    command!("server", "monitor", 1, ADMIN | NOSCRIPT | LOADING | STALE, acl::ADMIN | acl::DANGEROUS, "Listen for all requests received by the server in real time", monitor),
    command!("server", "role", 1, NOSCRIPT | LOADING | STALE | FAST, acl::ADMIN | acl::DANGEROUS, "Return the role of the instance in the context of replication", role),
    command!("server", "bgrewriteaof", 1, NOSCRIPT | ADMIN | NO_ASYNC_LOADING, acl::ADMIN | acl::DANGEROUS, "Asynchronously rewrite the append-only file", bgrewriteaof),
    command!("server", "bgsave", -1, NOSCRIPT | ADMIN | NO_ASYNC_LOADING, acl::ADMIN | acl::DANGEROUS, "Asynchronously save the dataset to disk", bgsave),
    command!("server", "save", 1, ADMIN | NOSCRIPT | NO_ASYNC_LOADING | NO_MULTI, acl::ADMIN | acl::DANGEROUS, "Synchronously save the dataset to disk", save),
    command!("server", "lastsave", 1, LOADING | STALE | FAST, acl::ADMIN | acl::DANGEROUS, "Get the UNIX time stamp of the last successful save to disk", lastsave),
    command!("server", "psync", -3, NO_ASYNC_LOADING | ADMIN | NOSCRIPT | NO_MULTI | NO_PROPAGATE, acl::ADMIN | acl::DANGEROUS, "An internal command used in replication", psync),
    command!("server", "sync", 1, NO_ASYNC_LOADING | ADMIN | NOSCRIPT | NO_MULTI | NO_PROPAGATE, acl::ADMIN | acl::DANGEROUS, "An internal command used in replication", sync),
    command!("server", "replconf", -1, ADMIN | NOSCRIPT | LOADING | STALE | ALLOW_BUSY, acl::ADMIN | acl::DANGEROUS, "An internal command for configuring the replication stream", replconf),
    command!("generic", "wait", 3, NOSCRIPT, acl::CONNECTION, "Wait for the synchronous replication of all the write commands sent in the context of the current connection", wait),
    command!("server", "shutdown", -1, ADMIN | NOSCRIPT | LOADING | STALE | NO_MULTI | ALLOW_BUSY, 0, "Synchronously save the dataset to disk and then shut down the server", shutdown)
        .while_busy(shutdown_while_busy),
];

/// AUTH's slow-log entries and MONITOR lines hide every argument (Redis's
/// `authCommand`, which redacts after its syntax check: AUTH with more than
/// two arguments shows them).
fn auth_redacts(args: &[Bytes], i: usize) -> bool {
    args.len() <= 3 && i >= 1
}

/// HELLO's hide AUTH's user name and password, found as Redis's
/// `helloCommand` reads its options: none with a protocol version it
/// refuses, and none past a bad option.
fn hello_redacts(args: &[Bytes], i: usize) -> bool {
    if args.len() < 2 || !matches!(num::parse_i64(&args[1]), Some(2 | 3)) {
        return false;
    }
    let mut j = 2;
    while j < args.len() {
        let more = args.len() - 1 - j;
        if args[j].eq_ignore_ascii_case(b"auth") && more >= 2 {
            if i == j + 1 || i == j + 2 {
                return true;
            }
            j += 3;
        } else if args[j].eq_ignore_ascii_case(b"setname") && more >= 1 {
            j += 2;
        } else {
            return false;
        }
    }
    false
}

/// CONFIG SET's hide the values of the sensitive directives (Redis's
/// `SENSITIVE_CONFIG`: passwords), whatever else is wrong with the call,
/// unless the arguments do not come in pairs.
fn config_set_redacts(args: &[Bytes], i: usize) -> bool {
    args.len().is_multiple_of(2)
        && i >= 3
        && i % 2 == 1
        && std::str::from_utf8(&args[i - 1])
            .ok()
            .and_then(crate::config::lookup)
            .is_some_and(|d| d.sensitive)
}

#[rustfmt::skip]
static COMMAND: &[CommandSpec] = &[
    subcommand!("server", "command|count", 2, LOADING | STALE, acl::CONNECTION, command_count),
    subcommand!("server", "command|info", -2, LOADING | STALE, acl::CONNECTION, command_info_cmd),
    subcommand!("server", "command|docs", -2, LOADING | STALE, acl::CONNECTION, command_docs),
    subcommand!("server", "command|list", -2, LOADING | STALE, acl::CONNECTION, command_list),
    subcommand!("server", "command|getkeys", -4, LOADING | STALE, acl::CONNECTION, command_getkeys),
    subcommand!("server", "command|getkeysandflags", -4, LOADING | STALE, acl::CONNECTION, command_getkeysandflags),
    subcommand!("server", "command|help", 2, LOADING | STALE, acl::CONNECTION, command_help),
];

#[rustfmt::skip]
static CONFIG: &[CommandSpec] = &[
    subcommand!("server", "config|get", -3, ADMIN | NOSCRIPT | LOADING | STALE, 0, config_get),
    subcommand!("server", "config|set", -4, ADMIN | NOSCRIPT | LOADING | STALE, 0, config_set).redacts(config_set_redacts),
    subcommand!("server", "config|resetstat", 2, ADMIN | NOSCRIPT | LOADING | STALE, 0, config_resetstat),
    subcommand!("server", "config|rewrite", 2, ADMIN | NOSCRIPT | LOADING | STALE, 0, config_rewrite),
    subcommand!("server", "config|help", 2, LOADING | STALE, 0, config_help),
];

fn ping(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    if !ctx.client.resp3 && ctx.client.is_subscribed() {
        return super::pubsub::subscribed_ping(args);
    }
    match args.len() {
        1 => Reply::status("PONG"),
        2 => Reply::Bulk(args[1].clone()),
        _ => errors::wrong_args("ping"),
    }
}

fn echo(_ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    Reply::Bulk(args[1].clone())
}

/// Authenticates the client as `user` with `pass` (Redis's
/// `ACLAuthenticateUser`): on success the client runs as that user; a
/// failure is logged in the ACL log (object: the command as typed).
fn authenticate(ctx: &mut Ctx, command: &Bytes, user: &[u8], pass: &[u8]) -> bool {
    if let Some(found) = ctx.server.acl.user(user).filter(|u| u.accepts(pass)) {
        ctx.client.user = found.name.clone();
        ctx.client.authenticated = true;
        return true;
    }
    let context = if ctx.client.multi.is_some() {
        crate::acl::Context::Multi
    } else {
        crate::acl::Context::Toplevel
    };
    let info = ctx.client.info_line(ctx.now);
    let max = ctx.server.config.acllog_max_len;
    ctx.server.acl.add_log(
        crate::acl::Reason::Auth,
        context,
        command.clone(),
        Bytes::copy_from_slice(user),
        ctx.now,
        info,
        max,
    );
    false
}

fn auth(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    if args.len() > 3 {
        return err(errors::SYNTAX);
    }
    let (user, pass): (&[u8], &[u8]) = if args.len() == 2 {
        if ctx.server.acl.user(b"default").is_some_and(|u| u.nopass()) {
            return err(errors::AUTH_NOT_CONFIGURED);
        }
        (b"default", &args[1])
    } else {
        (&args[1], &args[2])
    };
    if authenticate(ctx, &args[0], user, pass) {
        Reply::Ok
    } else {
        err(errors::WRONGPASS)
    }
}

fn hello(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let mut version = None;
    let mut i = 1;
    if args.len() >= 2 {
        let v = tri!(num::parse_i64(&args[1]).ok_or_else(|| err(errors::PROTOCOL_VERSION_NOT_INTEGER)));
        if !(2..=3).contains(&v) {
            return err(errors::NOPROTO);
        }
        version = Some(v);
        i = 2;
    }
    let mut credentials = None;
    let mut name = None;
    while i < args.len() {
        let more = args.len() - 1 - i;
        if is(&args[i], "auth") && more >= 2 {
            credentials = Some((&args[i + 1], &args[i + 2]));
            i += 2;
        } else if is(&args[i], "setname") && more >= 1 {
            name = Some(&args[i + 1]);
            i += 1;
        } else {
            return errors::hello_option(&args[i]);
        }
        i += 1;
    }
    if let Some((user, pass)) = credentials {
        if !authenticate(ctx, &args[0], user, pass) {
            return err(errors::WRONGPASS);
        }
    }
    if !ctx.client.authenticated {
        return err(errors::HELLO_NOAUTH);
    }
    if let Some(name) = name {
        if !super::client::valid_name(name) {
            return err(errors::CLIENT_NAME_SPACES);
        }
        ctx.client.name = (!name.is_empty()).then(|| crate::store::db::owned(name));
    }
    if let Some(v) = version {
        ctx.client.resp3 = v == 3;
    }
    Reply::Map(vec![
        (Reply::bulk("server"), Reply::bulk("redis")),
        (Reply::bulk("version"), Reply::bulk(REDIS_VERSION)),
        (Reply::bulk("proto"), Reply::Int(if ctx.client.resp3 { 3 } else { 2 })),
        (Reply::bulk("id"), Reply::Int(ctx.client.id as i64)),
        (Reply::bulk("mode"), Reply::bulk("standalone")),
        (Reply::bulk("role"), Reply::bulk("master")),
        (Reply::bulk("modules"), Reply::Array(vec![])),
    ])
}

/// SELECT changes no data and is never an effect itself: the feed writes a
/// SELECT before any effect whose database differs from the last one.
fn select(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    if ctx.server.cluster.is_some() && super::args::int(&args[1]).is_ok_and(|db| db != 0) {
        return errors::err(errors::SELECT_IN_CLUSTER);
    }
    ctx.client.db = tri!(db_index(&args[1], ctx.dbs.len()));
    Reply::Ok
}

fn quit(ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    ctx.client.close_after_reply = true;
    Reply::Ok
}

/// RESET: leaves MULTI, unwatches, unsubscribes, and returns the
/// connection to its state after connecting.
fn quit_while_busy(ctx: &mut BusyCtx, _args: &[Bytes]) -> Answer {
    ctx.close = true;
    Answer::Reply(Reply::Ok)
}

fn reset(ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    ctx.client.multi = None;
    ctx.client.multi_failed = false;
    super::tx::unwatch_all(ctx.dbs, ctx.client);
    ctx.server.pubsub.forget(ctx.client);
    crate::tracking::disable(ctx.server, ctx.client);
    ctx.server.monitors.retain(|&id| id != ctx.client.id);
    ctx.client.monitor = false;
    ctx.client.asking = false;
    ctx.client.cluster_readonly = false;
    ctx.client.db = 0;
    ctx.client.resp3 = false;
    ctx.client.name = None;
    ctx.client.user = Bytes::from_static(b"default");
    ctx.client.authenticated = ctx.server.acl.default_open();
    ctx.client.reply_off = false;
    ctx.client.reply_skip_next = false;
    ctx.client.no_evict = false;
    Reply::status("RESET")
}

/// A HELP subcommand's reply: one status line per entry, then the HELP
/// entry itself, as Redis's `addReplyHelp` ends every help text.
pub(crate) fn help_reply(lines: &[&'static str]) -> Reply {
    let end = ["HELP", "    Prints this help."];
    Reply::Array(lines.iter().chain(&end).map(|l| Reply::status(l)).collect())
}

/// WAIT numreplicas timeout (Redis's `waitCommand`): the replicas that
/// acknowledged this client's last write, at once when they are enough
/// (or inside MULTI); else the client blocks until ACKs make them enough
/// (`REPLCONF GETACK *` asks for them) or the timeout passes on the server
/// clock (0: never), and gets the count then.
fn wait(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let wanted = tri!(super::args::int(&args[1]));
    let deadline = tri!(blocked::deadline_ms(&args[2], ctx.now));
    let offset = ctx.client.repl_offset;
    let acked = ctx.server.repl.acked(offset);
    if acked as i64 >= wanted || ctx.deny_blocking() {
        return Reply::Int(acked as i64);
    }
    let s = &mut *ctx.server;
    s.repl.add_waiter(&mut s.effects, ctx.client.id, offset, wanted as u64);
    blocked::block_for_replicas(ctx, args, deadline, Reply::Int(acked as i64))
}

/// COMMAND without a subcommand: every command's entry.
fn command(_ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    Reply::Array(super::all().map(command_info).collect())
}

/// One COMMAND INFO entry in Redis 7's ten-field shape, its tips and key
/// specs from [`keyspecs`]'s tables, subcommands included.
fn command_info(c: &CommandSpec) -> Reply {
    let names = |it: &mut dyn Iterator<Item = &'static str>| it.map(Reply::status).collect::<Vec<_>>();
    // Redis answers an empty set for a command without subcommands and an
    // array of them otherwise (they differ in RESP3).
    let subcommands = if c.subcommands.is_empty() {
        Reply::Set(vec![])
    } else {
        Reply::Array(c.subcommands.iter().map(command_info).collect())
    };
    Reply::Array(vec![
        Reply::bulk(c.name),
        Reply::Int(c.arity as i64),
        Reply::Set(names(&mut c.flag_names())),
        Reply::Int(c.keys.0 as i64),
        Reply::Int(c.keys.1 as i64),
        Reply::Int(c.keys.2 as i64),
        Reply::Set(names(&mut c.categories())),
        Reply::Set(c.tips.iter().map(|t| Reply::bulk(*t)).collect()),
        Reply::Set(c.key_specs.iter().map(key_spec_info).collect()),
        subcommands,
    ])
}

/// A key spec as COMMAND INFO shows it (Redis's `addReplyCommandKeySpecs`):
/// its notes when it has any, its flags, and where and how it finds keys,
/// each a `type` with its `spec` map.
fn key_spec_info(spec: &KeySpec) -> Reply {
    let field = |name: &'static str, value: Reply| (Reply::bulk(name), value);
    let int = |name: &'static str, n: i32| field(name, Reply::Int(n as i64));
    let search = |kind: &'static str, spec: Vec<(Reply, Reply)>| {
        Reply::Map(vec![field("type", Reply::bulk(kind)), field("spec", Reply::Map(spec))])
    };
    let begin = match spec.begin {
        Begin::Index(at) => search("index", vec![int("index", at)]),
        Begin::Keyword(word, from) => search(
            "keyword",
            vec![field("keyword", Reply::bulk(word)), int("startfrom", from)],
        ),
        Begin::Unknown => search("unknown", vec![]),
    };
    let find = match spec.find {
        Find::Range { lastkey, step, limit } => search(
            "range",
            vec![int("lastkey", lastkey), int("keystep", step), int("limit", limit)],
        ),
        Find::Keynum { index, first, step } => search(
            "keynum",
            vec![int("keynumidx", index), int("firstkey", first), int("keystep", step)],
        ),
        Find::Unknown => search("unknown", vec![]),
    };
    let mut fields = vec![];
    if let Some(notes) = spec.notes {
        fields.push(field("notes", Reply::bulk(notes)));
    }
    fields.push(field(
        "flags",
        Reply::Set(spec.flags.iter().map(|f| Reply::status(f)).collect()),
    ));
    fields.push(field("begin_search", begin));
    fields.push(field("find_keys", find));
    Reply::Map(fields)
}

fn command_count(_ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    Reply::Int(super::all().count() as i64)
}

fn command_info_cmd(_ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    if args.len() == 2 {
        return Reply::Array(super::all().map(command_info).collect());
    }
    Reply::Array(
        args[2..]
            .iter()
            .map(|n| super::lookup(n).map_or(Reply::Nil, command_info))
            .collect(),
    )
}

fn command_docs(_ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let specs: Vec<&CommandSpec> = if args.len() == 2 {
        super::all().collect()
    } else {
        args[2..].iter().filter_map(|n| super::lookup(n)).collect()
    };
    Reply::Map(specs.into_iter().map(|c| (Reply::bulk(c.name), docs_of(c))).collect())
}

/// A command's COMMAND DOCS entry: its summary and group, and a container's
/// subcommands with theirs, as Redis 7 lists them.
fn docs_of(c: &CommandSpec) -> Reply {
    let mut fields = vec![
        (Reply::bulk("summary"), Reply::bulk(c.summary)),
        (Reply::bulk("group"), Reply::bulk(c.group)),
    ];
    if !c.subcommands.is_empty() {
        let subs = c
            .subcommands
            .iter()
            .map(|s| (Reply::bulk(s.name), docs_of(s)))
            .collect();
        fields.push((Reply::bulk("subcommands"), Reply::Map(subs)));
    }
    Reply::Map(fields)
}

/// Every command and subcommand row, each container followed by its
/// subcommands (COMMAND LIST lists both, as Redis 7 does).
fn every_row() -> impl Iterator<Item = &'static CommandSpec> {
    super::all().flat_map(|c| std::iter::once(c).chain(c.subcommands.iter()))
}

/// COMMAND LIST [FILTERBY MODULE name | ACLCAT category | PATTERN glob]:
/// commands and subcommands; no core command is in a module.
fn command_list(_ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let names = |keep: &dyn Fn(&CommandSpec) -> bool| {
        Reply::Array(every_row().filter(|c| keep(c)).map(|c| Reply::bulk(c.name)).collect())
    };
    if args.len() == 2 {
        return names(&|_| true);
    }
    if args.len() != 5 || !is(&args[2], "filterby") {
        return err(errors::SYNTAX);
    }
    let value = &args[4];
    if is(&args[3], "pattern") {
        names(&|c| glob::matches(value, c.name.as_bytes(), true))
    } else if is(&args[3], "aclcat") {
        names(&|c| {
            c.categories()
                .any(|cat| cat.as_bytes()[1..].eq_ignore_ascii_case(value))
        })
    } else if is(&args[3], "module") {
        names(&|_| false)
    } else {
        err(errors::SYNTAX)
    }
}

fn command_help(_ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    help_reply(&[
        "COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "(no subcommand)",
        "    Return details about all Redis commands.",
        "COUNT",
        "    Return the total number of commands in this Redis server.",
        "LIST",
        "    Return a list of all commands in this Redis server.",
        "INFO [<command-name> ...]",
        "    Return details about multiple Redis commands.",
        "    If no command names are given, documentation details for all",
        "    commands are returned.",
        "DOCS [<command-name> ...]",
        "    Return documentation details about multiple Redis commands.",
        "    If no command names are given, documentation details for all",
        "    commands are returned.",
        "GETKEYS <full-command>",
        "    Return the keys from a full Redis command.",
        "GETKEYSANDFLAGS <full-command>",
        "    Return the keys and the access flags from a full Redis command.",
    ])
}

/// COMMAND GETKEYS / GETKEYSANDFLAGS command [arg ...]: the keys the
/// command would touch ([`super::keyspecs`]), with their access flags for
/// the second, and Redis's errors.
fn getkeys(args: &[Bytes], with_flags: bool) -> Reply {
    let target = &args[2..];
    let spec = match super::resolve(target) {
        Ok(spec) => spec,
        Err(super::Unresolved::Unknown(_)) => return err(errors::GETKEYS_UNKNOWN_COMMAND),
        Err(super::Unresolved::Arity(_)) => return err(errors::GETKEYS_ARITY),
    };
    // Redis's `doesCommandHaveKeys`: a spec not marked `not_key` (shard
    // channels are keys only for routing), or a key finder of its own.
    let has_keys = spec.key_specs.iter().any(|k| !k.flags.contains(&"not_key"));
    if !has_keys && !spec.has(MOVABLEKEYS) {
        return err(errors::GETKEYS_NO_KEYS);
    }
    let keys = super::keyspecs::keys(spec, target);
    if keys.is_empty() {
        return if spec.has(NO_MANDATORY_KEYS) {
            Reply::Array(vec![])
        } else {
            err(errors::GETKEYS_INVALID)
        };
    }
    Reply::Array(
        keys.into_iter()
            .map(|(at, flags)| {
                let key = Reply::Bulk(target[at].clone());
                if with_flags {
                    Reply::Array(vec![key, Reply::Set(flags.iter().map(|f| Reply::status(f)).collect())])
                } else {
                    key
                }
            })
            .collect(),
    )
}

fn command_getkeys(_ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    getkeys(args, false)
}

fn command_getkeysandflags(_ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    getkeys(args, true)
}

fn config_get(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let patterns: Vec<&[u8]> = args[2..].iter().map(|a| a.as_ref()).collect();
    Reply::Map(
        ctx.server
            .config
            .matching(&patterns)
            .into_iter()
            .map(|(n, v)| (Reply::bulk(n), Reply::bulk(v)))
            .collect(),
    )
}

/// CONFIG SET of one or more pairs, all or nothing; then each changed
/// directive's [`Effect`] reaches what it drives.
fn config_set(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    if !args.len().is_multiple_of(2) {
        return err(errors::SYNTAX);
    }
    let texts: Vec<(String, String)> = args[2..]
        .chunks(2)
        .map(|p| {
            (
                String::from_utf8_lossy(&p[0]).into_owned(),
                String::from_utf8_lossy(&p[1]).into_owned(),
            )
        })
        .collect();
    let pairs: Vec<(&str, &str)> = texts.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
    let before = ctx.server.config.clone();
    let local = ctx.client.addr.is_local();
    let effects = match ctx.server.config.set_runtime_by(&pairs, local) {
        Ok(effects) => effects,
        Err(SetError::Unknown(name)) => return errors::config_set_unknown(&name),
        Err(SetError::Refused(name, why)) => return errors::config_set_failed(&name, &why),
    };
    // All set: now applied in order, and on a failed apply all restored
    // and the applied ones applied again with the old values, as Redis's
    // restoreBackupConfig.
    for (i, effect) in effects.iter().enumerate() {
        if let Err((name, why)) = apply_fallible(ctx, *effect, &before, &pairs) {
            let failed = std::mem::replace(&mut ctx.server.config, before);
            for effect in &effects[..=i] {
                restore_effect(ctx, *effect, &failed);
            }
            return errors::config_set_failed(name, why);
        }
        apply_config_effect(ctx, *effect);
    }
    Reply::Ok
}

/// The part of applying a change that can fail: turning the append-only
/// file on, rebinding the listeners. `Err` is the directive to blame and
/// Redis's reason.
fn apply_fallible(
    ctx: &mut Ctx,
    effect: Effect,
    before: &crate::Config,
    pairs: &[(&str, &str)],
) -> Result<(), (&'static str, &'static str)> {
    match effect {
        Effect::AppendOnly => {
            let scripting = ctx.scripting.as_deref().expect("CONFIG is not run from a script");
            crate::persist::aof::set_enabled(ctx.dbs, ctx.server, scripting)
                .map_err(|_| ("appendonly", errors::AOF_TURN_ON_FAILED))
        }
        Effect::Listeners => {
            let config = &ctx.server.config;
            let port_changed = config.port != before.port;
            let bind_changed = config.bind != before.bind;
            if !port_changed && !bind_changed {
                return Ok(());
            }
            // Blamed as Redis blames its apply functions: the first of the
            // two changed, in the order given.
            let port_first = pairs
                .iter()
                .filter_map(|(name, _)| crate::config::lookup(name).map(|d| d.name))
                .find(|n| (*n == "port" && port_changed) || (*n == "bind" && bind_changed))
                == Some("port");
            let port = if port_changed { config.port } else { ctx.server.port };
            // Redis's changeBindAddr rebinds the TLS listeners too.
            let tls_port = ctx.server.shared.listeners.tls_port();
            let rebound = ctx.server.shared.listeners.rebind(&config.bind, port).and_then(|()| {
                if bind_changed && tls_port != 0 {
                    ctx.server.shared.listeners.rebind_tls(&config.bind, tls_port)
                } else {
                    Ok(())
                }
            });
            match rebound {
                Ok(()) => {
                    ctx.server.port = port;
                    Ok(())
                }
                Err(e) => {
                    tracing::warn!(
                        "Failed applying new configuration. Possibly related to new {} setting. Restoring previous settings. ({e})",
                        if port_first { "port" } else { "bind" }
                    );
                    Err(if port_first {
                        ("port", errors::directive::LISTEN_FAILED)
                    } else {
                        ("bind", errors::directive::BIND_FAILED)
                    })
                }
            }
        }
        Effect::Tls => apply_tls(ctx, before, pairs),
        Effect::OomScoreAdj => {
            // Blamed on the first of the two directives given, as Redis
            // blames the first whose apply failed.
            let name = pairs
                .iter()
                .filter_map(|(name, _)| crate::config::lookup(name))
                .find(|d| d.effect == Effect::OomScoreAdj)
                .map_or("oom-score-adj", |d| d.name);
            crate::process::set_oom_score_adj(&ctx.server.config, ctx.server.replica.is_replica())
                .map_err(|()| (name, errors::directive::OOM_SCORE_FAILED))
        }
        _ => Ok(()),
    }
}

/// A TLS setting changed: while TLS is wanted the configuration is built
/// again from the files, so CONFIG SET of the same certificate file
/// reloads it (Redis's `applyTlsCfg`); a changed `tls-port` then rebinds
/// the TLS listeners (`applyTLSPort`). New connections use the new
/// configuration; established ones keep theirs.
fn apply_tls(
    ctx: &mut Ctx,
    before: &crate::Config,
    pairs: &[(&str, &str)],
) -> Result<(), (&'static str, &'static str)> {
    let tls = &ctx.server.config.tls;
    // Blamed as Redis blames the first directive whose apply failed.
    let first_tls = pairs
        .iter()
        .filter_map(|(name, _)| crate::config::lookup(name))
        .find(|d| d.effect == Effect::Tls)
        .map_or("tls-port", |d| d.name);
    if crate::net::tls::wanted(tls) {
        match crate::net::tls::configure(tls) {
            Ok(acceptors) => ctx.server.shared.tls.install(acceptors),
            Err(line) => {
                tracing::warn!("{line}");
                return Err((first_tls, errors::directive::TLS_UNAVAILABLE));
            }
        }
    }
    if tls.port != before.tls.port {
        let bind = ctx.server.config.bind.clone();
        if let Err(e) = ctx
            .server
            .shared
            .listeners
            .rebind_tls(&bind, ctx.server.config.tls.port)
        {
            tracing::warn!("Failed to bind TLS port {}: {e}", ctx.server.config.tls.port);
            return Err(("tls-port", errors::directive::LISTEN_FAILED));
        }
    }
    Ok(())
}

/// Applies an effect again after the old settings are back (`failed`:
/// the settings that were being applied).
fn restore_effect(ctx: &mut Ctx, effect: Effect, failed: &crate::Config) {
    if effect == Effect::Listeners && (failed.port != ctx.server.config.port || failed.bind != ctx.server.config.bind) {
        let config = &ctx.server.config;
        let port = if failed.port != config.port {
            config.port
        } else {
            ctx.server.port
        };
        let port = if port == 0 { ctx.server.port } else { port };
        match ctx.server.shared.listeners.rebind(&config.bind, port) {
            Ok(()) => ctx.server.port = port,
            Err(e) => tracing::warn!("Failed applying restored failed CONFIG SET command: {e}"),
        }
        return;
    }
    if effect == Effect::OomScoreAdj {
        // Logged if it fails again.
        let _ = crate::process::set_oom_score_adj(&ctx.server.config, ctx.server.replica.is_replica());
        return;
    }
    if effect == Effect::Tls {
        let tls = &ctx.server.config.tls;
        if crate::net::tls::wanted(tls) {
            match crate::net::tls::configure(tls) {
                Ok(acceptors) => ctx.server.shared.tls.install(acceptors),
                Err(line) => tracing::warn!("Failed applying restored failed CONFIG SET command: {line}"),
            }
        }
        if failed.tls.port != tls.port {
            let (bind, port) = (ctx.server.config.bind.clone(), tls.port);
            if let Err(e) = ctx.server.shared.listeners.rebind_tls(&bind, port) {
                tracing::warn!("Failed applying restored failed CONFIG SET command: {e}");
            }
        }
        return;
    }
    apply_config_effect(ctx, effect);
}

/// Reads the client output limits and `maxmemory-clients` again, and
/// evicts clients over the new limit at once, as Redis's next
/// `beforeSleep` does.
fn refresh_client_limits(ctx: &mut Ctx) {
    crate::net::client_mem::configure(ctx.server);
    // An evicted caller is closed without its reply (the batch's end sees it).
    crate::net::client_mem::evict_clients(ctx.server, Some(&mut *ctx.client), ctx.now);
}

/// Makes a changed setting reach what reads it outside [`Config`](crate::Config).
pub(crate) fn apply_config_effect(ctx: &mut Ctx, effect: Effect) {
    let config = &ctx.server.config;
    match effect {
        // Applied by `set_runtime` itself (the backlog's minimum), or by
        // CONFIG SET before this (the listeners, TLS, the OOM score).
        Effect::None | Effect::Tls | Effect::Listeners | Effect::OomScoreAdj => {}
        Effect::TlsAuth => ctx
            .server
            .shared
            .tls
            .set_auth(crate::net::tls::AuthClients::parse(&config.tls.auth_clients)),
        // The minimum was applied by `set_runtime`; the backlog takes the size.
        Effect::ReplBacklog => ctx.server.repl.configure(config),
        Effect::OutputLimits => {
            ctx.server.repl.configure(config);
            refresh_client_limits(ctx);
        }
        Effect::Connections => ctx.server.shared.publish(config),
        Effect::DefaultPassword => {
            let password = config.requirepass.as_ref().map(|p| p.expose().to_string());
            ctx.server.acl.set_default_password(password.as_deref());
            ctx.server.sync_auth();
        }
        Effect::Notifications => crate::notify::log_keys(ctx.dbs, &ctx.server.config, &ctx.server.effects),
        Effect::LuaMemory => {
            if let Some(scripting) = ctx.scripting.as_deref_mut() {
                scripting.set_memory_limit(config.lua_memory_limit);
            }
        }
        // A limit below the memory in use evicts at once (Redis's
        // `updateMaxmemory`, its warning included), to the end rather than
        // in time-bounded runs: CONFIG SET returns with the limit met.
        Effect::Maxmemory => {
            let max = config.memory.maxmemory;
            let used = crate::process::used_memory().saturating_sub(crate::evict::not_counted(ctx));
            if max != 0 && max < used {
                tracing::warn!("{}", errors::maxmemory_below_used(max, used));
            }
            while crate::evict::perform(ctx) == crate::evict::Outcome::Running {}
            // A `maxmemory-clients` percentage is of `maxmemory`.
            refresh_client_limits(ctx);
        }
        // Turned on or off by CONFIG SET itself (it may fail); then, as
        // for the writer's settings, the writer and the connections learn
        // the policy, and expired keys are noted for their DELs.
        Effect::AofHistory => crate::persist::aof::delete_history(ctx.server),
        Effect::AppendOnly | Effect::AofWriter => {
            crate::persist::aof::configure(ctx.server);
            crate::notify::log_keys(ctx.dbs, &ctx.server.config, &ctx.server.effects);
        }
    }
}

fn config_resetstat(ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    ctx.server.stats = Default::default();
    ctx.server.evictor.evicted_keys = 0;
    ctx.server.evicted_clients = 0;
    ctx.server.observe.reset_stats();
    ctx.server.lazyfree.reset_stats();
    ctx.server.shared.aof.reset_stats();
    Reply::Ok
}

fn config_rewrite(ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    let config = &ctx.server.config;
    if config.config_file.is_empty() {
        return err(errors::NO_CONFIG_FILE);
    }
    match crate::config::rewrite::rewrite_file(std::path::Path::new(&config.config_file), config, &ctx.server.acl) {
        Ok(()) => {
            tracing::warn!("CONFIG REWRITE executed with success.");
            Reply::Ok
        }
        Err(e) => {
            let why = errors::strerror(&e);
            tracing::warn!("CONFIG REWRITE failed: {why}");
            errors::config_rewrite_failed(&why)
        }
    }
}

fn config_help(_ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    help_reply(&[
        "CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "GET <pattern>",
        "    Return parameters matching the glob-like <pattern> and their values.",
        "SET <directive> <value>",
        "    Set the configuration <directive> to <value>.",
        "RESETSTAT",
        "    Reset statistics reported by the INFO command.",
        "REWRITE",
        "    Rewrite the configuration file.",
    ])
}

fn time(ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    let us = ctx.server.clock.now_us();
    Reply::Array(vec![
        Reply::bulk((us / 1_000_000).to_string()),
        Reply::bulk((us % 1_000_000).to_string()),
    ])
}

fn dbsize(ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    Reply::Int(ctx.db().len() as i64)
}

/// FLUSHDB/FLUSHALL's one optional ASYNC or SYNC: whether the old keys are
/// freed on the lazy-free thread (`lazyfree-lazy-user-flush` without
/// either, as Redis's `getFlushCommandFlags`); `None` for a syntax error.
fn flush_lazily(ctx: &Ctx, args: &[Bytes]) -> Option<bool> {
    match args.len() {
        1 => Some(ctx.server.config.memory.lazy.user_flush),
        2 if is(&args[1], "async") => Some(true),
        2 if is(&args[1], "sync") => Some(false),
        _ => None,
    }
}

/// FLUSHDB: one change per key removed (keys past their deadline but not
/// yet deleted included, as Redis's `emptyData` counts them), and its
/// effect even when the database was already empty, as Redis forces it.
fn flushdb(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let Some(lazy) = flush_lazily(ctx, args) else {
        return err(errors::SYNTAX);
    };
    let removed = ctx.db().len() as u64;
    ctx.db().clear_with(lazy);
    crate::tracking::flushed(ctx);
    ctx.dirty(removed);
    ctx.force_propagation();
    Reply::Ok
}

/// FLUSHALL: as [`flushdb`], over every database.
fn flushall(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let Some(lazy) = flush_lazily(ctx, args) else {
        return err(errors::SYNTAX);
    };
    let mut removed = 0;
    for db in ctx.dbs.iter_mut() {
        removed += db.len() as u64;
        db.clear_with(lazy);
    }
    crate::tracking::flushed(ctx);
    ctx.dirty(removed);
    // A background save running is killed (its file would hold the data
    // just flushed), and with save points the empty dataset is saved at
    // once, synchronously (Redis's `flushAllDataAndResetRDB`): the changes
    // since the last save are 0.
    crate::persist::snapshot::kill_save(ctx.dbs, ctx.server);
    if saves::automatic_saves_on(ctx.server) {
        let libraries = saves::libraries(ctx.scripting.as_deref());
        let _ = saves::save_now(ctx.dbs, ctx.server, &libraries, ctx.now);
    }
    ctx.force_propagation();
    Reply::Ok
}

fn swapdb(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    if ctx.server.cluster.is_some() {
        return errors::err(errors::SWAPDB_IN_CLUSTER);
    }
    // Each index must be a C int (Redis's getIntFromObject).
    let int = |a: &[u8]| num::parse_i64(a).filter(|n| i32::try_from(*n).is_ok());
    let Some(a) = int(&args[1]) else {
        return err(errors::INVALID_FIRST_DB);
    };
    let Some(b) = int(&args[2]) else {
        return err(errors::INVALID_SECOND_DB);
    };
    let n = ctx.dbs.len() as i64;
    if a < 0 || a >= n || b < 0 || b >= n {
        return err(errors::DB_OUT_OF_RANGE);
    }
    let (a, b) = (a as usize, b as usize);
    if a != b {
        let (lo, hi) = (a.min(b), a.max(b));
        let (left, right) = ctx.dbs.split_at_mut(hi);
        left[lo].swap(&mut right[0], ctx.now);
        // New content under keys clients wait on may serve them.
        left[lo].signal_all_waited();
        right[0].signal_all_waited();
    }
    // One change, even for a database swapped with itself (as Redis).
    ctx.dirty(1);
    Reply::Ok
}

/// ROLE: a replica's link ([`crate::replica::ReplicaState::role`]), or a
/// master, its replication offset and its online replicas (address,
/// listening port, acknowledged offset).
fn role(ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    if let Some(reply) = ctx.server.replica.role() {
        return reply;
    }
    let repl = &ctx.server.repl;
    let replicas = repl
        .role_replicas()
        .into_iter()
        .map(|(ip, port, offset)| {
            Reply::Array(vec![
                Reply::bulk(ip),
                Reply::bulk(port.to_string()),
                Reply::bulk(offset.to_string()),
            ])
        })
        .collect();
    Reply::Array(vec![
        Reply::bulk("master"),
        Reply::Int(repl.offset() as i64),
        Reply::Array(replicas),
    ])
}

/// PSYNC replid offset: the connection becomes a replica's link, with a
/// partial or a full resync ([`crate::repl::sync`]).
fn psync(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    if ctx.client.replica {
        return Reply::NOTHING;
    }
    // PSYNC replid offset FAILOVER: the primary hands its role over to this
    // replica, which continues its history (Redis's `syncCommand`).
    if args.len() > 3 && is(&args[3], "failover") {
        tracing::warn!(
            "Failover request received for replid {}.",
            String::from_utf8_lossy(&args[1])
        );
        if !ctx.server.replica.is_replica() {
            return err(errors::failover::PSYNC_TO_PRIMARY);
        }
        if !args[1].eq_ignore_ascii_case(ctx.server.replica.replid.as_bytes()) {
            return err(errors::failover::PSYNC_REPLID);
        }
        super::replicaof::promote_server(ctx.dbs, ctx.server);
        tracing::info!(
            "MASTER MODE enabled (failover request from '{}')",
            ctx.client.info_line(ctx.now)
        );
    }
    if let Some(refused) = sync_refused(ctx) {
        return refused;
    }
    let offset = tri!(super::args::int(&args[2]));
    start_sync(ctx, Some((&args[1], offset)))
}

/// Why this server serves no replica now: it fails over, or it is a
/// replica whose own link is down, or the client has replies still to
/// read (Redis's `syncCommand`).
fn sync_refused(ctx: &Ctx) -> Option<Reply> {
    if ctx.server.repl.failover.active() {
        return Some(err(errors::failover::NO_SYNC_FAILING_OVER));
    }
    let replica = &ctx.server.replica;
    if replica.is_replica() && !replica.link_up() {
        return Some(err(errors::failover::NO_SYNC_LINK_DOWN));
    }
    if ctx.client.reply_pending {
        return Some(err(errors::failover::NO_SYNC_PENDING_OUTPUT));
    }
    None
}

/// SYNC: the old protocol's full sync (no +FULLRESYNC line).
fn sync(ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    if ctx.client.replica {
        return Reply::NOTHING;
    }
    if let Some(refused) = sync_refused(ctx) {
        return refused;
    }
    start_sync(ctx, None)
}

fn start_sync(ctx: &mut Ctx, psync: Option<(&[u8], i64)>) -> Reply {
    let libraries = crate::persist::saves::libraries(ctx.scripting.as_deref());
    let handoff = crate::repl::sync(ctx.dbs, ctx.server, libraries, ctx.client, psync);
    ctx.client.replica = true;
    ctx.client.handoff = Some(Box::new(handoff));
    Reply::NOTHING
}

/// REPLCONF option value ...: what a replica tells before PSYNC
/// (listening-port, ip-address, capa); ACK and GETACK get no reply.
fn replconf(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    if args.len().is_multiple_of(2) {
        return err(errors::SYNTAX);
    }
    let mut conf = ctx.client.replconf.take().unwrap_or_default();
    let mut reply = Reply::Ok;
    for pair in args[1..].chunks(2) {
        let (option, value) = (&pair[0], &pair[1]);
        if is(option, "listening-port") {
            match super::args::int(value) {
                Ok(port) => conf.listening_port = port as u64,
                Err(e) => {
                    reply = e;
                    break;
                }
            }
        } else if is(option, "ip-address") {
            conf.ip = Some(String::from_utf8_lossy(value).into_owned());
        } else if is(option, "capa") {
            // Capabilities this primary does not know are ignored.
            if is(value, "eof") {
                conf.capa_eof = true;
            } else if is(value, "psync2") {
                conf.capa_psync2 = true;
            }
        } else if is(option, "ack") || is(option, "getack") {
            // A replica's ACKs are read by its link; anyone else's are
            // ignored, without a reply, as in Redis.
            reply = Reply::NOTHING;
            break;
        } else if is(option, "rdb-only") || is(option, "rdb-filter-only") {
            // Accepted; every sync here sends the whole dataset and stream.
        } else {
            reply = errors::unrecognized_replconf(option);
            break;
        }
    }
    ctx.client.replconf = Some(conf);
    reply
}

/// BGREWRITEAOF: the rewrite runs in the background from the forkless
/// snapshot ([`crate::persist::aof::bgrewriteaof`]); scheduled while a
/// save runs or inside a transaction, as Redis.
fn bgrewriteaof(ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    let Some(scripting) = ctx.scripting.as_deref() else {
        return err(errors::NOT_FROM_SCRIPT);
    };
    let in_exec = ctx.caller == crate::exec::Caller::Exec;
    use crate::persist::aof::Requested;
    match crate::persist::aof::bgrewriteaof(ctx.dbs, ctx.server, scripting, in_exec) {
        Ok(Requested::Started) => Reply::status(errors::AOF_REWRITE_STARTED),
        Ok(Requested::Scheduled) => Reply::status(errors::AOF_REWRITE_SCHEDULED),
        Ok(Requested::InProgress) => err(errors::AOF_REWRITE_IN_PROGRESS),
        Err(()) => err(errors::AOF_REWRITE_FAILED),
    }
}

/// BGSAVE [SCHEDULE]: a forkless point-in-time snapshot written by a
/// thread of its own ([`crate::persist::snapshot`]); the file is the
/// dataset as it is when this answers.
fn bgsave(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let schedule = match args.len() {
        1 => false,
        2 if is(&args[1], "schedule") => true,
        _ => return err(errors::SYNTAX),
    };
    // A save runs: refused, SCHEDULE or not (Redis's `CHILD_TYPE_RDB`).
    if ctx.server.bgsave.in_progress {
        return err(errors::BGSAVE_IN_PROGRESS);
    }
    // A rewrite's walk runs (Redis: another child is active), or inside
    // EXEC, where Redis never starts a save: scheduled, for the cron.
    let in_exec = ctx.caller == crate::exec::Caller::Exec;
    if ctx.server.bgsave.rewriting || in_exec {
        if schedule || in_exec {
            ctx.server.bgsave.scheduled = true;
            return Reply::status(errors::BGSAVE_SCHEDULED);
        }
        return err(errors::BGSAVE_CHILD_ACTIVE);
    }
    let libraries = saves::libraries(ctx.scripting.as_deref());
    match saves::background_save(ctx.dbs, ctx.server, libraries, ctx.now) {
        Ok(()) => Reply::status(errors::BGSAVE_STARTED),
        Err(crate::persist::snapshot::NotStarted::InProgress) => err(errors::BGSAVE_IN_PROGRESS),
        Err(crate::persist::snapshot::NotStarted::NoServer) => err(errors::SAVE_FAILED),
    }
}

fn lastsave(ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    Reply::Int(ctx.server.last_save_secs as i64)
}

/// SAVE: the dataset to `dir/dbfilename`, synchronously under the engine
/// lock (Redis's `rdbSave`); the changes since the last save restart
/// from 0 and LASTSAVE moves.
fn save(ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    if ctx.server.bgsave.in_progress {
        return err(errors::BGSAVE_IN_PROGRESS);
    }
    let libraries = saves::libraries(ctx.scripting.as_deref());
    match saves::save_command(ctx.dbs, ctx.server, &libraries, ctx.now) {
        Ok(()) => Reply::Ok,
        Err(_) => err(errors::SAVE_FAILED),
    }
}

/// SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT], as Redis 7.0's
/// `shutdownCommand` ([`crate::shutdown`]): unless NOW, a replica short of
/// the whole stream is waited for up to `shutdown-timeout`, the client
/// blocked and writes held; then the final save, synchronously, when save
/// points exist (unless NOSAVE) or SAVE is given. A failed save refuses the
/// shutdown unless FORCE; ABORT cancels a waiting one. The append-only
/// file is flushed and fsynced as the server stops ([`crate::net`]).
fn shutdown(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let (mut nosave, mut save, mut force, mut abort, mut now) = (false, false, false, false, false);
    for a in &args[1..] {
        if is(a, "nosave") {
            nosave = true;
        } else if is(a, "save") {
            save = true;
        } else if is(a, "force") {
            force = true;
        } else if is(a, "abort") {
            abort = true;
        } else if is(a, "now") {
            now = true;
        } else {
            return err(errors::SYNTAX);
        }
    }
    if (abort && (nosave || save || force || now)) || (nosave && save) {
        return err(errors::SYNTAX);
    }
    if abort {
        return if crate::shutdown::abort(ctx.dbs, ctx.server) {
            Reply::Ok
        } else {
            err(errors::NO_SHUTDOWN_IN_PROGRESS)
        };
    }
    if !now && ctx.deny_blocking() {
        return err(errors::SHUTDOWN_DENY_BLOCKING);
    }
    let flags = crate::config::ShutdownFlags {
        save,
        nosave,
        now,
        force,
    };
    let libraries = saves::libraries(ctx.scripting.as_deref());
    match crate::shutdown::begin(ctx.dbs, ctx.server, &libraries, ctx.now, flags, false) {
        crate::shutdown::Begun::Finished => {
            ctx.server.shutdown_requested = true;
            ctx.client.close_after_reply = true;
            Reply::Ok
        }
        crate::shutdown::Begun::Failed => err(errors::SHUTDOWN_FAILED),
        // The server stops, or the shutdown is cancelled: either ends the wait.
        crate::shutdown::Begun::Waiting | crate::shutdown::Begun::InProgress => {
            crate::blocked::block_for_shutdown(ctx, args)
        }
    }
}

/// SHUTDOWN while a script is busy: only NOSAVE, which kills the script and
/// stops the server; anything else gets -BUSY, as in Redis.
fn shutdown_while_busy(ctx: &mut BusyCtx, args: &[Bytes]) -> Answer {
    if !args[1..].iter().any(|a| is(a, "nosave")) {
        return Answer::Reply(crate::exec::busy::busy(ctx.script));
    }
    tracing::warn!("SHUTDOWN NOSAVE while a script is running");
    // Redis exits from inside the script's hook; here the hook stops the
    // script (even one that wrote, even one that catches errors) and the
    // server drains at once.
    ctx.script.stop_for_shutdown();
    ctx.nosave.store(true, std::sync::atomic::Ordering::Release);
    ctx.shutdown.close();
    ctx.close = true;
    // No reply: Redis closes the connection on a successful SHUTDOWN.
    Answer::Reply(Reply::NOTHING)
}

/// MONITOR: from now on the connection receives every command the server
/// runs, one line each, until it disconnects or RESETs (see [`feed_monitors`]).
fn monitor(ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    if ctx.deny_blocking() {
        return err(errors::MONITOR_DENY_BLOCKING);
    }
    // A second MONITOR changes nothing and gets no reply, as in Redis.
    if ctx.server.monitors.contains(&ctx.client.id) {
        return Reply::NOTHING;
    }
    ctx.server.monitors.push(ctx.client.id);
    ctx.client.monitor = true;
    Reply::Ok
}

/// Sends a command that ran to the MONITOR clients, in Redis's format:
/// `+<unix seconds>.<microseconds> [<db> <client address>] "arg" "arg"...`,
/// `[<db> lua]` for a script's `redis.call`, passwords redacted as `spec`
/// says (as in the slow log). The time is the server clock's. Called only
/// while some client monitors.
pub(crate) fn feed_monitors(ctx: &Ctx, spec: Option<&CommandSpec>, args: &[Bytes]) {
    let now = ctx.now;
    let mut line = format!("+{}.{:06} [{} ", now / 1000, (now % 1000) * 1000, ctx.client.db);
    match &ctx.client.addr {
        _ if ctx.in_script() => line.push_str("lua"),
        // Redis names a Unix-domain client by its listener, not `path:0`.
        ClientAddr::Unix(path) => {
            line.push_str("unix:");
            line.push_str(path);
        }
        ClientAddr::Tcp(addr) => line.push_str(&addr.to_string()),
    }
    line.push_str("] ");
    for (i, arg) in args.iter().enumerate() {
        if i > 0 {
            line.push(' ');
        }
        if spec.is_some_and(|spec| spec.hides_arg(args, i)) {
            repr(&mut line, super::spec::REDACTED);
        } else {
            repr(&mut line, arg);
        }
    }
    line.push_str("\r\n");
    let line = Bytes::from(line);
    for &id in &ctx.server.monitors {
        if id == ctx.client.id {
            continue;
        }
        if let Some(client) = ctx.server.clients.get(id) {
            if !client
                .outbox
                .push(line.clone(), now, ctx.server.client_limits.of(client))
            {
                crate::net::client_mem::closed_for_output(client, now);
            }
        }
    }
}

/// `arg` quoted as Redis's `sdscatrepr` quotes it.
pub(crate) fn repr(out: &mut String, arg: &[u8]) {
    out.push('"');
    for &b in arg {
        match b {
            b'\\' => out.push_str("\\\\"),
            b'"' => out.push_str("\\\""),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            7 => out.push_str("\\a"),
            8 => out.push_str("\\b"),
            0x20..=0x7e => out.push(b as char),
            _ => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    out.push('"');
}
