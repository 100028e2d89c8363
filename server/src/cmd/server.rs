//! Connection and server commands: PING, ECHO, HELLO, AUTH, SELECT, QUIT,
//! RESET, CLIENT, COMMAND, INFO, CONFIG, TIME, DBSIZE, FLUSHDB/FLUSHALL,
//! SWAPDB, LASTSAVE, SHUTDOWN.

use bytes::Bytes;

use super::args::{db_index, int, is};
use super::flags::{FAST, NOSCRIPT, NO_AUTH, READONLY, WRITE};
use super::{CommandSpec, Ctx};
use crate::config::{Effect, SetError};
use crate::errors::{self, err};
use crate::protocol::Reply;
use crate::store::{glob, num};
use crate::tri;

/// The version coordis reports (HELLO, INFO): the Redis version it follows.
pub const REDIS_VERSION: &str = "7.0.15";

macro_rules! spec {
    ($name:literal, $arity:expr, $flags:expr, $group:literal, $summary:literal, $handler:expr) => {
        CommandSpec {
            name: $name,
            arity: $arity,
            flags: $flags,
            keys: (0, 0, 0),
            group: $group,
            summary: $summary,
            handler: $handler,
        }
    };
}

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    spec!("ping", -1, FAST, "connection", "Ping the server", ping),
    spec!("echo", 2, FAST, "connection", "Echo the given string", echo),
    spec!("hello", -1, NO_AUTH | FAST | NOSCRIPT, "connection", "Handshake with Redis", hello),
    spec!("auth", -2, NO_AUTH | FAST | NOSCRIPT, "connection", "Authenticate to the server", auth),
    spec!("select", 2, FAST, "connection", "Change the selected database for the current connection", select),
    spec!("quit", -1, NO_AUTH | FAST | NOSCRIPT, "connection", "Close the connection", quit),
    spec!("reset", 1, NO_AUTH | FAST | NOSCRIPT, "connection", "Reset the connection", reset),
    spec!("client", -2, NOSCRIPT, "connection", "A container for client connection commands", client),
    spec!("command", -1, 0, "server", "Get array of Redis command details", command),
    spec!("info", -1, 0, "server", "Get information and statistics about the server", info),
    spec!("config", -2, NOSCRIPT, "server", "A container for server configuration commands", config),
    spec!("time", 1, FAST, "server", "Return the current server time", time),
    spec!("dbsize", 1, READONLY | FAST, "server", "Return the number of keys in the selected database", dbsize),
    spec!("flushdb", -1, WRITE, "server", "Remove all keys from the current database", flushdb),
    spec!("flushall", -1, WRITE, "server", "Remove all keys from all databases", flushall),
    spec!("swapdb", 3, WRITE | FAST, "server", "Swaps two Redis databases", swapdb),
    spec!("lastsave", 1, FAST, "server", "Get the UNIX time stamp of the last successful save to disk", lastsave),
    spec!("shutdown", -1, NOSCRIPT, "server", "Synchronously save the dataset to disk and then shut down the server", shutdown),
];

fn ping(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let _ = ctx;
    match args.len() {
        1 => Reply::status("PONG"),
        2 => Reply::Bulk(args[1].clone()),
        _ => errors::wrong_args("ping"),
    }
}

fn echo(_ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    Reply::Bulk(args[1].clone())
}

/// Checks a username/password pair against `requirepass`. The only user is
/// `default`; without a password it accepts any password, as Redis's
/// `nopass` default user does. The comparison takes the same time whatever
/// the password's content.
fn check_password(ctx: &Ctx, user: &[u8], pass: &[u8]) -> bool {
    if user != b"default" {
        return false;
    }
    match &ctx.server.config.requirepass {
        None => true,
        Some(expected) => constant_time_eq(expected.expose().as_bytes(), pass),
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = a.len() ^ b.len();
    for i in 0..a.len().max(b.len()) {
        diff |= (a.get(i).copied().unwrap_or(0) ^ b.get(i).copied().unwrap_or(0)) as usize;
    }
    diff == 0
}

fn auth(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    if args.len() > 3 {
        return err(errors::SYNTAX);
    }
    let (user, pass): (&[u8], &[u8]) = if args.len() == 2 {
        if ctx.server.config.requirepass.is_none() {
            return err(errors::AUTH_NOT_CONFIGURED);
        }
        (b"default", &args[1])
    } else {
        (&args[1], &args[2])
    };
    if check_password(ctx, user, pass) {
        ctx.client.authenticated = true;
        Reply::Ok
    } else {
        err(errors::WRONGPASS)
    }
}

/// Client names may not contain spaces or characters outside `!`..`~`.
fn valid_client_name(name: &[u8]) -> bool {
    name.iter().all(|&c| (b'!'..=b'~').contains(&c))
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
            return Reply::Error(
                format!(
                    "ERR Syntax error in HELLO option '{}'",
                    String::from_utf8_lossy(&args[i])
                )
                .replace(['\r', '\n'], " ")
                .into(),
            );
        }
        i += 1;
    }
    if let Some((user, pass)) = credentials {
        if !check_password(ctx, user, pass) {
            return err(errors::WRONGPASS);
        }
        ctx.client.authenticated = true;
    }
    if !ctx.client.authenticated {
        return err("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time");
    }
    if let Some(name) = name {
        if !valid_client_name(name) {
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

fn select(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    ctx.client.db = tri!(db_index(&args[1], ctx.dbs.len()));
    Reply::Ok
}

fn quit(ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    ctx.client.close_after_reply = true;
    Reply::Ok
}

fn reset(ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    ctx.client.db = 0;
    ctx.client.resp3 = false;
    ctx.client.name = None;
    ctx.client.authenticated = ctx.server.config.requirepass.is_none();
    Reply::status("RESET")
}

/// Checks a subcommand's arity; `Err` is Redis's `'parent|sub'` arity error.
fn sub_arity(args: &[Bytes], parent: &str, sub: &str, arity: i32) -> Result<(), Reply> {
    let n = args.len() as i32;
    let ok = if arity >= 0 { n == arity } else { n >= -arity };
    if ok {
        Ok(())
    } else {
        Err(errors::wrong_args(&format!("{parent}|{sub}")))
    }
}

/// Runs the subcommand handler whose name matches `args[1]`, after checking
/// its arity; unknown names get Redis's "Try X HELP" error.
pub(crate) fn dispatch_sub(
    ctx: &mut Ctx,
    args: &[Bytes],
    parent: &str,
    table: &[(&str, i32, super::Handler)],
) -> Reply {
    for (name, arity, handler) in table {
        if is(&args[1], name) {
            let parent = parent.to_ascii_lowercase();
            tri!(sub_arity(args, &parent, name, *arity));
            // CLIENT LIST shows `cmd=client|list`, as Redis 7 names subcommands.
            ctx.client.last_cmd = format!("{parent}|{name}").into();
            return handler(ctx, args);
        }
    }
    errors::unknown_subcommand(&args[1], parent)
}

/// A HELP subcommand's reply: one status line per entry.
pub(crate) fn help_reply(lines: &[&'static str]) -> Reply {
    Reply::Array(lines.iter().map(|l| Reply::status(l)).collect())
}

fn client(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    dispatch_sub(
        ctx,
        args,
        "CLIENT",
        &[
            ("id", 2, client_id),
            ("getname", 2, client_getname),
            ("setname", 3, client_setname),
            ("info", 2, client_info),
            ("list", -2, client_list),
            ("kill", -3, client_kill),
            ("help", 2, client_help),
        ],
    )
}

fn client_id(ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    Reply::Int(ctx.client.id as i64)
}

fn client_getname(ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    ctx.client.name.clone().map_or(Reply::Nil, Reply::Bulk)
}

fn client_setname(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    if !valid_client_name(&args[2]) {
        return err(errors::CLIENT_NAME_SPACES);
    }
    ctx.client.name = (!args[2].is_empty()).then(|| crate::store::db::owned(&args[2]));
    Reply::Ok
}

fn client_info(ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    let line = ctx.client.info_line(ctx.now) + "\n";
    Reply::Verbatim("txt", Bytes::from(line))
}

fn client_list(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let mut ids: Option<Vec<u64>> = None;
    let mut i = 2;
    while i < args.len() {
        if is(&args[i], "type") && i + 1 < args.len() {
            if !is(&args[i + 1], "normal")
                && !is(&args[i + 1], "master")
                && !is(&args[i + 1], "replica")
                && !is(&args[i + 1], "pubsub")
            {
                return Reply::Error(
                    format!("ERR Unknown client type '{}'", String::from_utf8_lossy(&args[i + 1])).into(),
                );
            }
            if !is(&args[i + 1], "normal") {
                ids = Some(vec![]);
            }
            i += 2;
        } else if is(&args[i], "id") && i + 1 < args.len() {
            let mut list = vec![];
            for a in &args[i + 1..] {
                match num::parse_i64(a) {
                    Some(n) if n > 0 => list.push(n as u64),
                    _ => return err("ERR Invalid client ID"),
                }
            }
            ids = Some(list);
            i = args.len();
        } else {
            return err(errors::SYNTAX);
        }
    }
    let now = ctx.now;
    let mut all: Vec<&crate::clients::ClientState> = ctx.server.clients.values().map(|c| &**c).collect();
    all.push(ctx.client);
    all.sort_by_key(|c| c.id);
    let mut text = String::new();
    for c in all {
        if ids.as_ref().is_none_or(|ids| ids.contains(&c.id)) {
            text.push_str(&c.info_line(now));
            text.push('\n');
        }
    }
    Reply::Verbatim("txt", Bytes::from(text))
}

fn client_kill(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    if args.len() == 3 {
        // Old form: CLIENT KILL addr:port.
        let addr = String::from_utf8_lossy(&args[2]).into_owned();
        if ctx.client.addr.to_string() == addr {
            ctx.client.close_after_reply = true;
            return Reply::Ok;
        }
        return match ctx.server.clients.values().find(|c| c.addr.to_string() == addr) {
            Some(c) => {
                c.signal.close();
                Reply::Ok
            }
            None => err(errors::NO_SUCH_CLIENT),
        };
    }
    let (mut id, mut addr, mut laddr, mut skipme, mut maxage) = (None, None, None, true, None);
    let mut i = 2;
    while i < args.len() {
        if i + 1 >= args.len() {
            return err(errors::SYNTAX);
        }
        let value = &args[i + 1];
        if is(&args[i], "id") {
            match num::parse_i64(value) {
                Some(n) if n > 0 => id = Some(n as u64),
                _ => return err("ERR client-id should be greater than 0"),
            }
        } else if is(&args[i], "addr") {
            addr = Some(String::from_utf8_lossy(value).into_owned());
        } else if is(&args[i], "laddr") {
            laddr = Some(String::from_utf8_lossy(value).into_owned());
        } else if is(&args[i], "type") {
            if !is(value, "normal")
                && !is(value, "master")
                && !is(value, "replica")
                && !is(value, "slave")
                && !is(value, "pubsub")
            {
                return Reply::Error(format!("ERR Unknown client type '{}'", String::from_utf8_lossy(value)).into());
            }
        } else if is(&args[i], "user") {
            if value.as_ref() != b"default" {
                return Reply::Error(format!("ERR No such user '{}'", String::from_utf8_lossy(value)).into());
            }
        } else if is(&args[i], "skipme") {
            if is(value, "yes") {
                skipme = true;
            } else if is(value, "no") {
                skipme = false;
            } else {
                return err(errors::SYNTAX);
            }
        } else if is(&args[i], "maxage") {
            maxage = Some(tri!(int(value)));
        } else {
            return err(errors::SYNTAX);
        }
        i += 2;
    }
    let now = ctx.now;
    let selected = |c: &crate::clients::ClientState| {
        id.is_none_or(|id| c.id == id)
            && addr.as_ref().is_none_or(|a| c.addr.to_string() == *a)
            && laddr.as_ref().is_none_or(|a| c.laddr.to_string() == *a)
            && maxage.is_none_or(|age| (now.saturating_sub(c.created_ms) / 1000) as i64 >= age)
    };
    let mut killed = 0;
    for c in ctx.server.clients.values() {
        if selected(c) {
            c.signal.close();
            killed += 1;
        }
    }
    if !skipme && selected(ctx.client) {
        ctx.client.close_after_reply = true;
        killed += 1;
    }
    Reply::Int(killed)
}

fn client_help(_ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    help_reply(&[
        "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "GETNAME",
        "    Return the name of the current connection.",
        "ID",
        "    Return the ID of the current connection.",
        "INFO",
        "    Return information about the current client connection.",
        "KILL <ip:port>",
        "    Kill connection made from <ip:port>.",
        "KILL <option> <value> [<option> <value> [...]]",
        "    Kill connections. Options are: ID, ADDR, LADDR, TYPE, USER, SKIPME, MAXAGE.",
        "LIST [options ...]",
        "    Return information about client connections.",
        "SETNAME <name>",
        "    Assign the name <name> to the current connection.",
        "HELP",
        "    Print this help.",
    ])
}

fn command(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    if args.len() == 1 {
        return Reply::Array(super::all().map(command_info).collect());
    }
    dispatch_sub(
        ctx,
        args,
        "COMMAND",
        &[
            ("count", 2, command_count),
            ("info", -2, command_info_cmd),
            ("docs", -2, command_docs),
            ("list", -2, command_list),
            ("help", 2, command_help),
        ],
    )
}

fn flag_names(flags: u32) -> Vec<Reply> {
    let mut out = vec![];
    if flags & WRITE != 0 {
        out.push(Reply::status("write"));
    }
    if flags & READONLY != 0 {
        out.push(Reply::status("readonly"));
    }
    if flags & NO_AUTH != 0 {
        out.push(Reply::status("no_auth"));
    }
    if flags & NOSCRIPT != 0 {
        out.push(Reply::status("noscript"));
    }
    if flags & FAST != 0 {
        out.push(Reply::status("fast"));
    }
    out
}

/// One COMMAND INFO entry in Redis 7's ten-field shape.
fn command_info(c: &CommandSpec) -> Reply {
    let mut categories = vec![Reply::Status(format!("@{}", c.group).into())];
    if c.flags & FAST != 0 {
        categories.push(Reply::status("@fast"));
    } else {
        categories.push(Reply::status("@slow"));
    }
    Reply::Array(vec![
        Reply::bulk(c.name),
        Reply::Int(c.arity as i64),
        Reply::Set(flag_names(c.flags)),
        Reply::Int(c.keys.0 as i64),
        Reply::Int(c.keys.1 as i64),
        Reply::Int(c.keys.2 as i64),
        Reply::Set(categories),
        Reply::Set(vec![]),
        Reply::Array(vec![]),
        Reply::Array(vec![]),
    ])
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
            .map(|n| super::lookup(n).map_or(Reply::NilArray, command_info))
            .collect(),
    )
}

fn command_docs(_ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let specs: Vec<&CommandSpec> = if args.len() == 2 {
        super::all().collect()
    } else {
        args[2..].iter().filter_map(|n| super::lookup(n)).collect()
    };
    Reply::Map(
        specs
            .into_iter()
            .map(|c| {
                (
                    Reply::bulk(c.name),
                    Reply::Map(vec![
                        (Reply::bulk("summary"), Reply::bulk(c.summary)),
                        (Reply::bulk("group"), Reply::bulk(c.group)),
                    ]),
                )
            })
            .collect(),
    )
}

fn command_list(_ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    if args.len() > 2 {
        // FILTERBY MODULE|ACLCAT|PATTERN
        if args.len() != 5 || !is(&args[2], "filterby") {
            return err(errors::SYNTAX);
        }
        let value = &args[4];
        let keep = |c: &&CommandSpec| {
            if is(&args[3], "pattern") {
                glob::matches(value, c.name.as_bytes(), true)
            } else if is(&args[3], "aclcat") {
                value.eq_ignore_ascii_case(c.group.as_bytes())
            } else {
                false
            }
        };
        return Reply::Array(super::all().filter(keep).map(|c| Reply::bulk(c.name)).collect());
    }
    Reply::Array(super::all().map(|c| Reply::bulk(c.name)).collect())
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
        "DOCS [<command-name> ...]",
        "    Return documentation details about multiple Redis commands.",
        "HELP",
        "    Print this help.",
    ])
}

fn info(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let sections: Vec<String> = args[1..]
        .iter()
        .map(|a| String::from_utf8_lossy(a).to_ascii_lowercase())
        .collect();
    let text = crate::engine::info_text(ctx, &sections);
    Reply::Verbatim("txt", Bytes::from(text))
}

fn config(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    dispatch_sub(
        ctx,
        args,
        "CONFIG",
        &[
            ("get", -3, config_get),
            ("set", -4, config_set),
            ("resetstat", 2, config_resetstat),
            ("rewrite", 2, config_rewrite),
            ("help", 2, config_help),
        ],
    )
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
    let effects = match ctx.server.config.set_runtime(&pairs) {
        Ok(effects) => effects,
        Err(SetError::Unknown(name)) => return errors::config_set_unknown(&name),
        Err(SetError::Refused(name, why)) => return errors::config_set_failed(&name, &why),
    };
    for effect in effects {
        apply_config_effect(ctx, effect);
    }
    Reply::Ok
}

/// Makes a changed setting reach what reads it outside [`Config`](crate::Config).
pub(crate) fn apply_config_effect(ctx: &mut Ctx, effect: Effect) {
    let config = &ctx.server.config;
    match effect {
        Effect::None => {}
        Effect::Connections => ctx.server.shared.publish(config),
        Effect::Notifications => {
            let log = crate::engine::expired_events_enabled(config.notify_keyspace_events);
            for db in ctx.dbs.iter_mut() {
                db.log_expired = log;
            }
        }
        Effect::LuaMemory => {
            if let Some(scripting) = ctx.scripting.as_deref_mut() {
                scripting.set_memory_limit(config.lua_memory_limit);
            }
        }
    }
}

fn config_resetstat(ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    ctx.server.stats = Default::default();
    Reply::Ok
}

fn config_rewrite(_ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    err("ERR The server is running without a config file")
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
        "HELP",
        "    Print this help.",
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

/// FLUSHDB/FLUSHALL accept one optional ASYNC or SYNC; both flush at once.
fn flush_mode_ok(args: &[Bytes]) -> bool {
    match args.len() {
        1 => true,
        2 => is(&args[1], "async") || is(&args[1], "sync"),
        _ => false,
    }
}

fn flushdb(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    if !flush_mode_ok(args) {
        return err(errors::SYNTAX);
    }
    ctx.db().clear();
    Reply::Ok
}

fn flushall(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    if !flush_mode_ok(args) {
        return err(errors::SYNTAX);
    }
    for db in ctx.dbs.iter_mut() {
        db.clear();
    }
    Reply::Ok
}

fn swapdb(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let Some(a) = num::parse_i64(&args[1]) else {
        return err("ERR invalid first DB index");
    };
    let Some(b) = num::parse_i64(&args[2]) else {
        return err("ERR invalid second DB index");
    };
    let n = ctx.dbs.len() as i64;
    if a < 0 || a >= n || b < 0 || b >= n {
        return err(errors::DB_OUT_OF_RANGE);
    }
    let (a, b) = (a as usize, b as usize);
    if a != b {
        let (lo, hi) = (a.min(b), a.max(b));
        let (left, right) = ctx.dbs.split_at_mut(hi);
        left[lo].swap(&mut right[0]);
    }
    Reply::Ok
}

fn lastsave(ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    Reply::Int((ctx.server.started_ms / 1000) as i64)
}

fn shutdown(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    for a in &args[1..] {
        if !(is(a, "nosave") || is(a, "save") || is(a, "now") || is(a, "force") || is(a, "abort")) {
            return err(errors::SYNTAX);
        }
    }
    if args[1..].iter().any(|a| is(a, "abort")) {
        return err("ERR No shutdown in progress.");
    }
    ctx.server.shutdown_requested = true;
    ctx.client.close_after_reply = true;
    Reply::Ok
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn password_compare() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secret2"));
        assert!(!constant_time_eq(b"", b"x"));
    }

    #[test]
    fn client_names() {
        assert!(valid_client_name(b"worker-1"));
        assert!(!valid_client_name(b"a b"));
        assert!(!valid_client_name(b"a\nb"));
    }
}
