//! The ACL command family (`ACL SETUSER`, `GETUSER`, `DELUSER`, `LIST`,
//! `USERS`, `WHOAMI`, `CAT`, `GENPASS`, `DRYRUN`, `LOG`, `LOAD`, `SAVE`,
//! `HELP`), answering as Redis 7.0.15's `aclCommand`. The users, rules and
//! log are [`crate::acl`]'s; this module only reads the arguments, applies
//! the changes, and disconnects the clients a change revokes.

use bytes::Bytes;

use super::args::is;
use super::flags::*;
use super::{acl as cat, CommandSpec, Ctx};
use crate::acl::{self, User};
use crate::errors::{self, err};
use crate::protocol::Reply;
use crate::tri;

#[rustfmt::skip]
pub(super) static COMMANDS: &[CommandSpec] = &[
    command!("server", "acl", -2, 0, 0, "A container for Access List Control commands ", super::container, ACL),
];

#[rustfmt::skip]
static ACL: &[CommandSpec] = &[
    subcommand!("server", "acl|cat", -2, NOSCRIPT | LOADING | STALE, 0, acl_cat),
    subcommand!("server", "acl|deluser", -3, ADMIN | NOSCRIPT | LOADING | STALE, 0, acl_deluser),
    subcommand!("server", "acl|dryrun", -4, ADMIN | NOSCRIPT | LOADING | STALE, 0, acl_dryrun),
    subcommand!("server", "acl|genpass", -2, NOSCRIPT | LOADING | STALE, 0, acl_genpass),
    subcommand!("server", "acl|getuser", 3, ADMIN | NOSCRIPT | LOADING | STALE, 0, acl_getuser),
    subcommand!("server", "acl|help", 2, LOADING | STALE, 0, acl_help),
    subcommand!("server", "acl|list", 2, ADMIN | NOSCRIPT | LOADING | STALE, 0, acl_list),
    subcommand!("server", "acl|load", 2, ADMIN | NOSCRIPT | LOADING | STALE, 0, acl_load),
    subcommand!("server", "acl|log", -2, ADMIN | NOSCRIPT | LOADING | STALE, 0, acl_log),
    subcommand!("server", "acl|save", 2, ADMIN | NOSCRIPT | LOADING | STALE, 0, acl_save),
    subcommand!("server", "acl|setuser", -3, ADMIN | NOSCRIPT | LOADING | STALE, 0, acl_setuser).redacts(setuser_redacts),
    subcommand!("server", "acl|users", 2, ADMIN | NOSCRIPT | LOADING | STALE, 0, acl_users),
    subcommand!("server", "acl|whoami", 2, NOSCRIPT | LOADING | STALE, 0, acl_whoami),
];

/// The number of log entries `ACL LOG` shows without a count.
const LOG_DEFAULT_COUNT: i64 = 10;

/// ACL SETUSER's slow-log entries hide the user name and every rule
/// (Redis's `aclCommand` redacts them all before it reads any).
fn setuser_redacts(_args: &[Bytes], i: usize) -> bool {
    i >= 2
}

fn acl_setuser(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let name = &args[2];
    if acl::has_spaces(name) {
        return err(errors::acl::USERNAME_SPACES);
    }
    let pubsub_all = ctx.server.config.acl_pubsub_allchannels;
    let original = ctx.server.acl.user(name).cloned();
    let mut user = match &original {
        Some(u) => (**u).clone(),
        None => User::new(name, pubsub_all),
    };
    if let Err(text) = user.apply_all(&args[3..], pubsub_all) {
        return Reply::Error(text.into());
    }
    if let Some(original) = &original {
        if let Some(upcoming) = acl::Acl::revoked_channels(&user, original) {
            kill_revoked_subscribers(ctx, name, &upcoming);
        }
    }
    ctx.server.acl.put(user);
    ctx.server.sync_auth();
    Reply::Ok
}

/// Disconnects `name`'s subscribers whose channels or patterns the new
/// rules no longer allow (Redis's `ACLKillPubsubClientsIfNeeded`).
fn kill_revoked_subscribers(ctx: &mut Ctx, name: &[u8], upcoming: &[Vec<u8>]) {
    let revoked = |c: &crate::net::clients::ClientState| {
        c.user == name
            && c.is_subscribed()
            && !acl::Acl::subscriber_allowed(upcoming, &c.channels, &c.patterns, &c.shard_channels)
    };
    ctx.server.clients.kill_where(&revoked);
    if revoked(ctx.client) {
        ctx.client.close_after_reply = true;
    }
}

/// Disconnects the clients that run as `name` (Redis's
/// `ACLFreeUserAndKillClients`): they are back to the default user,
/// unauthenticated, and closed (the current client after its reply).
fn kill_clients_of(ctx: &mut Ctx, name: &[u8]) {
    ctx.server.clients.kill_where(|c| c.user == name);
    if ctx.client.user == name {
        ctx.client.user = Bytes::from_static(b"default");
        ctx.client.authenticated = false;
        ctx.client.close_after_reply = true;
    }
}

fn acl_deluser(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    if args[2..].iter().any(|n| n.as_ref() == b"default") {
        return err(errors::acl::DEFAULT_NOT_REMOVABLE);
    }
    let mut deleted = 0;
    for name in &args[2..] {
        if ctx.server.acl.remove(name) {
            kill_clients_of(ctx, name);
            deleted += 1;
        }
    }
    Reply::Int(deleted)
}

/// One selector's `commands`, `keys` and `channels` (GETUSER).
fn selector_fields(s: &acl::Selector) -> Vec<(Reply, Reply)> {
    vec![
        (Reply::bulk("commands"), Reply::bulk(s.describe_commands())),
        (Reply::bulk("keys"), Reply::bulk(s.describe_keys())),
        (Reply::bulk("channels"), Reply::bulk(s.describe_channels())),
    ]
}

fn acl_getuser(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let Some(user) = ctx.server.acl.user(&args[2]) else {
        return Reply::Nil;
    };
    let mut fields = vec![
        (
            Reply::bulk("flags"),
            Reply::Set(user.flag_names().into_iter().map(Reply::bulk).collect()),
        ),
        (
            Reply::bulk("passwords"),
            Reply::Array(user.passwords().iter().map(|p| Reply::bulk(p.clone())).collect()),
        ),
    ];
    let (root, rest) = user.selectors().split_first().expect("a user has its root selector");
    fields.extend(selector_fields(root));
    fields.push((
        Reply::bulk("selectors"),
        Reply::Array(rest.iter().map(|s| Reply::Map(selector_fields(s))).collect()),
    ));
    Reply::Map(fields)
}

fn acl_list(ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    Reply::Array(
        ctx.server
            .acl
            .users()
            .map(|u| Reply::bulk(format!("user {} {}", String::from_utf8_lossy(&u.name), u.describe())))
            .collect(),
    )
}

fn acl_users(ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    Reply::Array(ctx.server.acl.users().map(|u| Reply::Bulk(u.name.clone())).collect())
}

fn acl_whoami(ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    Reply::Bulk(ctx.client.user.clone())
}

fn acl_load(ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    let path = ctx.server.config.aclfile.clone();
    if path.is_empty() {
        return err(errors::acl::NO_ACL_FILE);
    }
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) => {
            let why = crate::errors::strerror(&e);
            return Reply::Error(format!("ERR {}", errors::acl::load_open_failed(&path, &why)).into());
        }
    };
    let pubsub_all = ctx.server.config.acl_pubsub_allchannels;
    if let Err(errors) = ctx.server.acl.load_text(&path, &text, pubsub_all) {
        return Reply::Error(format!("ERR {errors}").into());
    }
    // Every user but the default one was replaced: their clients go.
    let others: Vec<Bytes> = ctx
        .server
        .clients
        .values()
        .map(|c| c.user.clone())
        .chain(std::iter::once(ctx.client.user.clone()))
        .filter(|u| u.as_ref() != b"default")
        .collect();
    for name in others {
        kill_clients_of(ctx, &name);
    }
    ctx.server.sync_auth();
    Reply::Ok
}

fn acl_save(ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    let path = ctx.server.config.aclfile.clone();
    if path.is_empty() {
        return err(errors::acl::NO_ACL_FILE);
    }
    match save_file(&path, &ctx.server.acl.file_text()) {
        Ok(()) => Reply::Ok,
        Err(e) => {
            tracing::warn!("Writing ACL file for ACL SAVE: {e}");
            err(errors::acl::SAVE_FAILED)
        }
    }
}

/// Writes the ACL file through a temp file renamed over it, as Redis's
/// `ACLSaveToFile`.
fn save_file(path: &str, text: &str) -> std::io::Result<()> {
    let tmp = format!("{path}.tmp-{}-{}", std::process::id(), fastrand::u64(..));
    let written = std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

fn acl_cat(_ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    if args.len() == 2 {
        return Reply::Array(cat::NAMES.iter().map(|(_, n)| Reply::bulk(&n[1..])).collect());
    }
    if args.len() > 3 {
        return errors::sub_wrong_args(&args[1], "ACL");
    }
    let Some(bit) = acl::category(&args[2]) else {
        return errors::acl::unknown_category(&args[2]);
    };
    let index = acl::index();
    Reply::Array(
        index
            .walk()
            .filter(|&id| index.cats[id] & bit != 0)
            .map(|id| Reply::bulk(index.rows[id].name))
            .collect(),
    )
}

fn acl_genpass(_ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    if args.len() > 3 {
        return errors::sub_wrong_args(&args[1], "ACL");
    }
    let bits = match args.get(2) {
        Some(arg) => tri!(super::args::int(arg)),
        None => acl::GENPASS_DEFAULT_BITS,
    };
    if bits <= 0 || bits > acl::GENPASS_MAX_BITS {
        return err(errors::acl::GENPASS_BITS);
    }
    Reply::bulk(acl::genpass(bits))
}

fn acl_log(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    if args.len() > 3 {
        return errors::sub_wrong_args(&args[1], "ACL");
    }
    let mut count = LOG_DEFAULT_COUNT;
    if let Some(arg) = args.get(2) {
        if is(arg, "reset") {
            ctx.server.acl.reset_log();
            return Reply::Ok;
        }
        count = tri!(super::args::int(arg)).max(0);
    }
    let now = ctx.now;
    Reply::Array(
        ctx.server
            .acl
            .log()
            .iter()
            .take(count as usize)
            .map(|e| e.reply(now))
            .collect(),
    )
}

fn acl_dryrun(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let Some(user) = ctx.server.acl.user(&args[2]).cloned() else {
        return errors::acl::dryrun_no_user(&args[2]);
    };
    let command = &args[3..];
    let spec = match crate::cmd::resolve(command) {
        Ok(spec) => spec,
        Err(crate::cmd::Unresolved::Unknown(_)) => return errors::acl::dryrun_no_command(&args[3]),
        Err(crate::cmd::Unresolved::Arity(spec)) => return errors::wrong_args(spec.name),
    };
    match acl::check(&user, spec, command) {
        Ok(()) => Reply::Ok,
        Err(acl::Denied::Command) => Reply::bulk(errors::acl::dryrun_command(spec.name)),
        Err(acl::Denied::Key(pos)) => Reply::bulk(errors::acl::dryrun_key(&command[pos])),
        Err(acl::Denied::Channel(pos)) => Reply::bulk(errors::acl::dryrun_channel(&command[pos])),
    }
}

fn acl_help(_ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    super::server::help_reply(&[
        "ACL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "CAT [<category>]",
        "    List all commands that belong to <category>, or all command categories",
        "    when no category is specified.",
        "DELUSER <username> [<username> ...]",
        "    Delete a list of users.",
        "DRYRUN <username> <command> [<arg> ...]",
        "    Returns whether the user can execute the given command without executing the command.",
        "GETUSER <username>",
        "    Get the user's details.",
        "GENPASS [<bits>]",
        "    Generate a secure 256-bit user password. The optional `bits` argument can",
        "    be used to specify a different size.",
        "LIST",
        "    Show users details in config file format.",
        "LOAD",
        "    Reload users from the ACL file.",
        "LOG [<count> | RESET]",
        "    Show the ACL log entries.",
        "SAVE",
        "    Save the current config to the ACL file.",
        "SETUSER <username> <attribute> [<attribute> ...]",
        "    Create or modify a user with the specified attributes.",
        "USERS",
        "    List all the registered usernames.",
        "WHOAMI",
        "    Return the current connection username.",
    ])
}
