//! REPLICAOF and SLAVEOF: make this server a replica of a primary, or
//! promote it (`NO ONE`). The state they change is
//! [`crate::replica::ReplicaState`]; the link task follows it.

use bytes::Bytes;

use super::args::is;
use super::flags::*;
use super::{acl, CommandSpec, Ctx};
use crate::errors::{self, err};
use crate::protocol::Reply;
use crate::replica::Primary;
use crate::store::num;

#[rustfmt::skip]
pub(crate) static COMMANDS: &[CommandSpec] = &[
    command!("server", "replicaof", 3, ADMIN | NOSCRIPT | STALE | NO_ASYNC_LOADING, acl::ADMIN | acl::DANGEROUS, (0, 0, 0), "Make the server a replica of another instance, or promote it as master.", replicaof),
    command!("server", "slaveof", 3, ADMIN | NOSCRIPT | STALE | NO_ASYNC_LOADING, acl::ADMIN | acl::DANGEROUS, (0, 0, 0), "Make the server a replica of another instance, or promote it as master.", replicaof),
];

/// The highest TCP port REPLICAOF accepts.
const MAX_PORT: i64 = 65535;

/// REPLICAOF host port | NO ONE (Redis's `replicaofCommand`).
fn replicaof(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    if is(&args[1], "no") && is(&args[2], "one") {
        if ctx.server.replica.is_replica() {
            promote(ctx);
            tracing::info!(
                "MASTER MODE enabled (user request from '{}')",
                ctx.client.info_line(ctx.now)
            );
        }
        return Reply::Ok;
    }
    let Some(port) = num::parse_i64(&args[2]).filter(|p| (0..=MAX_PORT).contains(p)) else {
        return err(errors::INVALID_MASTER_PORT);
    };
    let primary = Primary {
        host: String::from_utf8_lossy(&args[1]).into_owned(),
        port: port as u16,
    };
    let same = ctx
        .server
        .replica
        .primary
        .as_ref()
        .is_some_and(|p| p.host.eq_ignore_ascii_case(&primary.host) && p.port == primary.port);
    if same {
        tracing::info!(
            "REPLICAOF would result into synchronization with the master we are already connected with. No operation performed."
        );
        return Reply::status(errors::ALREADY_CONNECTED);
    }
    let (host, port) = (primary.host.clone(), primary.port);
    ctx.server.replica.follow(primary, ctx.now);
    // CONFIG GET replicaof (and CONFIG REWRITE) show the primary in force.
    ctx.server.config.replica.replicaof = format!("{host} {port}");
    // A replica keeps expired keys until the primary's DELs come.
    for db in ctx.dbs.iter_mut() {
        db.keep_expired = true;
    }
    ctx.server.shared.replica_changed.notify_one();
    tracing::info!(
        "REPLICAOF {host}:{port} enabled (user request from '{}')",
        ctx.client.info_line(ctx.now)
    );
    Reply::Ok
}

/// REPLICAOF NO ONE on a replica: the link stops, writes are accepted and
/// keys expire here again; the history continues under a new replication
/// ID (see [`crate::replica::ReplicaState::promote`]).
fn promote(ctx: &mut Ctx) {
    // The primary side serves from here on: it takes the history the link
    // kept and shifts it, as the link's state does (PSYNC2 continuity).
    let (replid, offset) = (ctx.server.replica.replid.clone(), ctx.server.replica.offset);
    ctx.server.repl.set_from_primary(&replid, offset.max(0) as u64);
    ctx.server.repl.shift_ids_on_promotion();
    let new_replid = ctx.server.repl.ids().0.to_string();
    ctx.server.replica.promote(new_replid);
    ctx.server.config.replica.replicaof.clear();
    let paused = !crate::blocked::expiry_allowed(ctx.server);
    for db in ctx.dbs.iter_mut() {
        db.keep_expired = paused;
    }
    ctx.server.shared.replica_changed.notify_one();
}
