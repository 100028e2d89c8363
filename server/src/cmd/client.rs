//! CLIENT's subcommands (ID, GETNAME, SETNAME, INFO, LIST, KILL, UNBLOCK,
//! PAUSE, UNPAUSE, REPLY, NO-EVICT, HELP; the tracking ones are in
//! [`crate::tracking`]): what a connection asks about itself and the
//! others. The CLIENT row is in [`super::server`]'s table.

use bytes::Bytes;

use super::args::is;
use super::flags::*;
use super::server::help_reply;
use super::{acl, CommandSpec, Ctx};
use crate::blocked;
use crate::errors::{self, err};
use crate::protocol::Reply;
use crate::store::num;
use crate::tri;

#[rustfmt::skip]
pub(super) static SUBCOMMANDS: &[CommandSpec] = &[
    subcommand!("connection", "client|id", 2, NOSCRIPT | LOADING | STALE, acl::CONNECTION, client_id),
    subcommand!("connection", "client|getname", 2, NOSCRIPT | LOADING | STALE, acl::CONNECTION, client_getname),
    subcommand!("connection", "client|setname", 3, NOSCRIPT | LOADING | STALE, acl::CONNECTION, client_setname),
    subcommand!("connection", "client|info", 2, NOSCRIPT | LOADING | STALE, acl::CONNECTION, client_info),
    subcommand!("connection", "client|list", -2, ADMIN | NOSCRIPT | LOADING | STALE, acl::CONNECTION, client_list),
    subcommand!("connection", "client|kill", -3, ADMIN | NOSCRIPT | LOADING | STALE, acl::CONNECTION, client_kill),
    subcommand!("connection", "client|help", 2, LOADING | STALE, acl::CONNECTION, client_help),
    subcommand!("connection", "client|unblock", -3, ADMIN | NOSCRIPT | LOADING | STALE, acl::CONNECTION, client_unblock),
    subcommand!("connection", "client|pause", -3, ADMIN | NOSCRIPT | LOADING | STALE, acl::CONNECTION, client_pause),
    subcommand!("connection", "client|unpause", 2, ADMIN | NOSCRIPT | LOADING | STALE, acl::CONNECTION, client_unpause),
    subcommand!("connection", "client|reply", 3, NOSCRIPT | LOADING | STALE, acl::CONNECTION, client_reply),
    subcommand!("connection", "client|no-evict", 3, ADMIN | NOSCRIPT | LOADING | STALE, acl::CONNECTION, client_no_evict),
    subcommand!("connection", "client|tracking", -3, NOSCRIPT | LOADING | STALE, acl::CONNECTION, crate::tracking::client_tracking),
    subcommand!("connection", "client|caching", 3, NOSCRIPT | LOADING | STALE, acl::CONNECTION, crate::tracking::client_caching),
    subcommand!("connection", "client|getredir", 2, NOSCRIPT | LOADING | STALE, acl::CONNECTION, crate::tracking::client_getredir),
    subcommand!("connection", "client|trackinginfo", 2, NOSCRIPT | LOADING | STALE, acl::CONNECTION, crate::tracking::client_trackinginfo),
];

/// Whether `spec` is a CLIENT subcommand (CLIENT CACHING's window stays
/// open across them, as Redis keeps it across any CLIENT call). The rows
/// are looked for where requests find them, under the CLIENT row: a table
/// another module's static reads may be a copy at another address.
pub(crate) fn is_client_subcommand(spec: &CommandSpec) -> bool {
    super::spec::lookup_top(b"client")
        .is_some_and(|client| client.subcommands.as_ptr_range().contains(&(spec as *const _)))
}

/// Client names may not contain spaces or characters outside `!`..`~`.
pub(super) fn valid_name(name: &[u8]) -> bool {
    name.iter().all(|&c| (b'!'..=b'~').contains(&c))
}

fn client_id(ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    Reply::Int(ctx.client.id as i64)
}

fn client_getname(ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    ctx.client.name.clone().map_or(Reply::Nil, Reply::Bulk)
}

fn client_setname(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    if !valid_name(&args[2]) {
        return err(errors::CLIENT_NAME_SPACES);
    }
    ctx.client.name = (!args[2].is_empty()).then(|| crate::store::db::owned(&args[2]));
    Reply::Ok
}

fn client_info(ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    let line = ctx.client.info_line(ctx.now) + "\n";
    Reply::Verbatim(*b"txt", Bytes::from(line))
}

/// Redis's client types (`getClientTypeByName`): coordis has no masters or
/// replicas, so a client is `pubsub` while subscribed and `normal` otherwise.
#[derive(Clone, Copy, PartialEq)]
enum ClientType {
    Normal,
    Replica,
    PubSub,
    Master,
}

impl ClientType {
    fn parse(name: &[u8]) -> Result<ClientType, Reply> {
        Ok(if is(name, "normal") {
            ClientType::Normal
        } else if is(name, "slave") || is(name, "replica") {
            ClientType::Replica
        } else if is(name, "pubsub") {
            ClientType::PubSub
        } else if is(name, "master") {
            ClientType::Master
        } else {
            return Err(errors::unknown_client_type(name));
        })
    }

    fn of(c: &crate::net::clients::ClientState) -> ClientType {
        if c.primary {
            ClientType::Master
        } else if c.replica {
            ClientType::Replica
        } else if c.is_subscribed() {
            ClientType::PubSub
        } else {
            ClientType::Normal
        }
    }
}

/// CLIENT LIST: every client by id, `TYPE t` those of one type, or `ID id...`
/// each listed client in the order given (repeats too, as Redis).
fn client_list(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let now = ctx.now;
    let mut all: Vec<&crate::net::clients::ClientState> = ctx.server.clients.values().collect();
    all.push(ctx.client);
    all.extend(ctx.server.replica.listed_client());
    all.sort_by_key(|c| c.id);
    let chosen: Vec<&crate::net::clients::ClientState> = if args.len() == 2 {
        all
    } else if args.len() == 4 && is(&args[2], "type") {
        let kind = tri!(ClientType::parse(&args[3]));
        all.into_iter().filter(|c| ClientType::of(c) == kind).collect()
    } else if args.len() >= 4 && is(&args[2], "id") {
        let mut chosen = vec![];
        for a in &args[3..] {
            let Some(id) = num::parse_i64(a) else {
                return err(errors::INVALID_CLIENT_ID);
            };
            chosen.extend(all.iter().find(|c| c.id as i64 == id));
        }
        chosen
    } else {
        return err(errors::SYNTAX);
    };
    let mut text = String::new();
    for c in chosen {
        text.push_str(&c.info_line(now));
        text.push('\n');
    }
    Reply::Verbatim(*b"txt", Bytes::from(text))
}

fn client_kill(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    if args.len() == 3 {
        // Old form: CLIENT KILL addr:port.
        let addr = String::from_utf8_lossy(&args[2]).into_owned();
        if ctx.client.addr.to_string() == addr {
            ctx.client.close_after_reply = true;
            return Reply::Ok;
        }
        let selected = |c: &crate::net::clients::ClientState| c.addr.to_string() == addr;
        return match ctx.server.clients.kill_where(selected) + kill_primary_client(ctx, selected) {
            0 => err(errors::NO_SUCH_CLIENT),
            _ => Reply::Ok,
        };
    }
    let (mut id, mut addr, mut laddr, mut kind, mut user, mut skipme) = (None, None, None, None, None, true);
    let mut i = 2;
    while i < args.len() {
        if i + 1 >= args.len() {
            return err(errors::SYNTAX);
        }
        let value = &args[i + 1];
        if is(&args[i], "id") {
            match num::parse_i64(value) {
                Some(n) if n > 0 => id = Some(n as u64),
                _ => return err(errors::CLIENT_ID_NOT_POSITIVE),
            }
        } else if is(&args[i], "addr") {
            addr = Some(String::from_utf8_lossy(value).into_owned());
        } else if is(&args[i], "laddr") {
            laddr = Some(String::from_utf8_lossy(value).into_owned());
        } else if is(&args[i], "type") {
            kind = Some(tri!(ClientType::parse(value)));
        } else if is(&args[i], "user") {
            if ctx.server.acl.user(value).is_none() {
                return errors::no_such_user(value);
            }
            user = Some(value.clone());
        } else if is(&args[i], "skipme") {
            if is(value, "yes") {
                skipme = true;
            } else if is(value, "no") {
                skipme = false;
            } else {
                return err(errors::SYNTAX);
            }
        } else {
            return err(errors::SYNTAX);
        }
        i += 2;
    }
    let selected = |c: &crate::net::clients::ClientState| {
        id.is_none_or(|id| c.id == id)
            && addr.as_ref().is_none_or(|a| c.addr.to_string() == *a)
            && laddr.as_ref().is_none_or(|a| c.laddr.to_string() == *a)
            && kind.is_none_or(|k| ClientType::of(c) == k)
            // The primary's client runs as no user.
            && user.as_ref().is_none_or(|u| !c.primary && c.user == *u)
    };
    let mut killed = ctx.server.clients.kill_where(&selected) + kill_primary_client(ctx, selected);
    if !skipme && selected(ctx.client) {
        ctx.client.close_after_reply = true;
        killed += 1;
    }
    Reply::Int(killed as i64)
}

/// Closes the primary's link when its client is listed and `selected`
/// (Redis's replica reconnects and continues partially); 1 if it did.
fn kill_primary_client(ctx: &Ctx, selected: impl Fn(&crate::net::clients::ClientState) -> bool) -> usize {
    match ctx.server.replica.listed_client() {
        Some(c) if selected(c) => {
            c.signal.close();
            1
        }
        _ => 0,
    }
}

/// CLIENT UNBLOCK id [TIMEOUT|ERROR]: a client blocked in a command gets
/// its timeout reply, or the `-UNBLOCKED` error; 1 if it was blocked.
fn client_unblock(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    if args.len() > 4 {
        return errors::sub_wrong_args(&args[1], "CLIENT");
    }
    let id = tri!(super::args::int(&args[2]));
    let error = match args.get(3) {
        None => false,
        Some(a) if is(a, "timeout") => false,
        Some(a) if is(a, "error") => true,
        Some(_) => return err(errors::UNBLOCK_REASON),
    };
    let Some(mut target) = ctx.server.clients.take(id as u64) else {
        return Reply::Int(0);
    };
    // A client postponed by CLIENT PAUSE is not blocked in a command.
    let call = target.blocked.as_deref().and_then(|b| b.call());
    let done = !target.blocked.as_ref().is_some_and(|b| b.is_postponed())
        && blocked::unblock(ctx.dbs, &mut ctx.server.blocking, &mut target, error);
    if done {
        if error {
            super::observe::error_raised(ctx.server, &err(errors::UNBLOCKED));
        }
        // Counted as Redis counts it: failed, whichever the reason, and
        // logged without arguments.
        if let Some(call) = call {
            let how = super::observe::Unblock {
                call,
                serve_usec: 0,
                failed: true,
                args: &[],
            };
            super::observe::unblocked(ctx.server, &target, ctx.now, how);
        }
    }
    ctx.server.clients.put_back(target);
    Reply::Int(done as i64)
}

/// CLIENT PAUSE timeout [WRITE|ALL]: holds other clients' commands (all,
/// or those that may write) until the pause ends ([`blocked::pause`]).
fn client_pause(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let until = tri!(blocked::deadline_ms(&args[2], ctx.now));
    let all = match &args[3..] {
        [] => true,
        [mode] if is(mode, "all") => true,
        [mode] if is(mode, "write") => false,
        [_] => return err(errors::PAUSE_MODE),
        _ => return errors::sub_wrong_args(&args[1], "CLIENT"),
    };
    // A zero timeout pauses until now: the pause is over at once.
    blocked::pause(ctx, until.max(ctx.now), all);
    Reply::Ok
}

fn client_unpause(ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    blocked::unpause(ctx.dbs, ctx.server);
    Reply::Ok
}

/// CLIENT REPLY ON|OFF|SKIP: OFF and SKIP answer nothing themselves; SKIP
/// drops the next command's reply too (the engine applies both).
fn client_reply(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let client = &mut *ctx.client;
    if is(&args[2], "on") {
        client.reply_off = false;
        client.reply_skip = false;
        client.reply_skip_next = false;
        Reply::Ok
    } else if is(&args[2], "off") {
        client.reply_off = true;
        Reply::NOTHING
    } else if is(&args[2], "skip") {
        if !client.reply_off {
            client.reply_skip_next = true;
        }
        Reply::NOTHING
    } else {
        err(errors::SYNTAX)
    }
}

fn client_no_evict(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    if is(&args[2], "on") {
        ctx.client.no_evict = true;
    } else if is(&args[2], "off") {
        ctx.client.no_evict = false;
    } else {
        return err(errors::SYNTAX);
    }
    Reply::Ok
}

fn client_help(_ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    help_reply(&[
        "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "CACHING (YES|NO)",
        "    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.",
        "GETREDIR",
        "    Return the client ID we are redirecting to when tracking is enabled.",
        "GETNAME",
        "    Return the name of the current connection.",
        "ID",
        "    Return the ID of the current connection.",
        "INFO",
        "    Return information about the current client connection.",
        "KILL <ip:port>",
        "    Kill connection made from <ip:port>.",
        "KILL <option> <value> [<option> <value> [...]]",
        "    Kill connections. Options are:",
        "    * ADDR (<ip:port>|<unixsocket>:0)",
        "      Kill connections made from the specified address",
        "    * LADDR (<ip:port>|<unixsocket>:0)",
        "      Kill connections made to specified local address",
        "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
        "      Kill connections by type.",
        "    * USER <username>",
        "      Kill connections authenticated by <username>.",
        "    * SKIPME (YES|NO)",
        "      Skip killing current connection (default: yes).",
        "LIST [options ...]",
        "    Return information about client connections. Options:",
        "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
        "      Return clients of specified type.",
        "UNPAUSE",
        "    Stop the current client pause, resuming traffic.",
        "PAUSE <timeout> [WRITE|ALL]",
        "    Suspend all, or just write, clients for <timeout> milliseconds.",
        "REPLY (ON|OFF|SKIP)",
        "    Control the replies sent to the current connection.",
        "SETNAME <name>",
        "    Assign the name <name> to the current connection.",
        "UNBLOCK <clientid> [TIMEOUT|ERROR]",
        "    Unblock the specified blocked client.",
        "TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]]",
        "         [OPTIN] [OPTOUT] [NOLOOP]",
        "    Control server assisted client side caching.",
        "TRACKINGINFO",
        "    Report tracking status for the current connection.",
        "NO-EVICT (ON|OFF)",
        "    Protect current client connection from eviction.",
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_names() {
        assert!(valid_name(b"worker-1"));
        assert!(!valid_name(b"a b"));
        assert!(!valid_name(b"a\nb"));
    }
}
