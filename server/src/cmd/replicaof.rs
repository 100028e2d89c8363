//! REPLICAOF and SLAVEOF: make this server a replica of a primary, or
//! promote it (`NO ONE`); FAILOVER, the coordinated hand-over
//! ([`crate::repl::failover`] runs it). The state they change is
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
    command!("server", "replicaof", 3, ADMIN | NOSCRIPT | STALE | NO_ASYNC_LOADING, acl::ADMIN | acl::DANGEROUS, "Make the server a replica of another instance, or promote it as master.", replicaof),
    command!("server", "failover", -1, ADMIN | NOSCRIPT | STALE, acl::ADMIN | acl::DANGEROUS, "Start a coordinated failover between this server and one of its replicas.", failover),
    command!("server", "slaveof", 3, ADMIN | NOSCRIPT | STALE | NO_ASYNC_LOADING, acl::ADMIN | acl::DANGEROUS, "Make the server a replica of another instance, or promote it as master.", replicaof),
];

/// The highest TCP port REPLICAOF accepts.
const MAX_PORT: i64 = 65535;

/// REPLICAOF host port | NO ONE (Redis's `replicaofCommand`).
fn replicaof(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    if ctx.server.cluster.is_some() {
        return err(errors::REPLICAOF_IN_CLUSTER);
    }
    if ctx.server.repl.failover.active() {
        return err(errors::failover::NO_REPLICAOF);
    }
    if is(&args[1], "no") && is(&args[2], "one") {
        if ctx.server.replica.is_replica() {
            promote_server(ctx.dbs, ctx.server);
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
    follow_server(ctx.dbs, ctx.server, primary);
    tracing::info!(
        "REPLICAOF {host}:{port} enabled (user request from '{}')",
        ctx.client.info_line(ctx.now)
    );
    Reply::Ok
}

/// REPLICAOF host port (and FAILOVER's hand-over): this server follows
/// `primary`. A primary becoming a replica asks the new primary to continue
/// its own history: the position cached is the primary side's IDs and
/// offset (Redis's `replicationCacheMasterUsingMyself`).
pub(crate) fn follow_server(dbs: &mut [crate::store::Db], server: &mut crate::state::ServerState, primary: Primary) {
    if !server.replica.is_replica() {
        server.replica.replid = server.repl.ids().0.to_string();
        server.replica.offset = server.repl.offset() as i64;
    }
    // Clients blocked here wait for what this server no longer decides.
    crate::blocked::unblock_all_with_error(dbs, server, errors::UNBLOCKED_DEMOTED);
    server.repl.start_proxy(&mut server.effects);
    let (host, port) = (primary.host.clone(), primary.port);
    let now = server.clock.now_ms();
    server.replica.follow(primary, now);
    // CONFIG GET replicaof (and CONFIG REWRITE) show the primary in force.
    server.config.replica.replicaof = format!("{host} {port}");
    // A replica keeps expired keys until the primary's DELs come.
    for db in dbs.iter_mut() {
        db.keep_expired = true;
    }
    // A replica's OOM score, as Redis's `replicationSetMaster` sets it
    // (a failure is logged).
    let _ = crate::process::set_oom_score_adj(&server.config, true);
    server.shared.replica_changed.notify_one();
}

/// REPLICAOF NO ONE on a replica (and PSYNC FAILOVER, an aborted
/// FAILOVER): the link stops, writes are accepted and keys expire here
/// again; the history continues under a new replication ID (see
/// [`crate::replica::ReplicaState::promote`]).
pub(crate) fn promote_server(dbs: &mut [crate::store::Db], server: &mut crate::state::ServerState) {
    // The primary side serves from here on: it takes the history the link
    // kept, with a backlog from its offset, and shifts it, as the link's
    // state does (PSYNC2 continuity).
    let (replid, offset) = (server.replica.replid.clone(), server.replica.offset);
    server
        .repl
        .adopt(&replid, offset.max(0) as u64, &mut server.effects, &server.config);
    crate::notify::log_keys(dbs, &server.config, &server.effects);
    server.repl.shift_ids_on_promotion();
    // The replicas learn the new ID by reconnecting; they continue
    // partially (Redis's `replicationUnsetMaster`).
    server.repl.disconnect_replicas();
    let new_replid = server.repl.ids().0.to_string();
    server.replica.promote(new_replid);
    server.config.replica.replicaof.clear();
    let paused = !crate::blocked::expiry_allowed(server);
    for db in dbs.iter_mut() {
        db.keep_expired = paused;
    }
    let _ = crate::process::set_oom_score_adj(&server.config, false);
    server.shared.replica_changed.notify_one();
}

/// FAILOVER [TO host port [FORCE]] [ABORT] [TIMEOUT ms] (Redis's
/// `failoverCommand`: its checks, in its order).
fn failover(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    use errors::failover as e;
    if ctx.server.cluster.is_some() {
        return err(e::IN_CLUSTER);
    }
    if args.len() == 2 && is(&args[1], "abort") {
        if !ctx.server.repl.failover.active() {
            return err(e::NOT_IN_PROGRESS);
        }
        crate::repl::failover::abort(ctx.dbs, ctx.server, "Failover manually aborted");
        return Reply::Ok;
    }
    let (mut timeout, mut force, mut target) = (0i64, false, None);
    let mut j = 1;
    while j < args.len() {
        if is(&args[j], "timeout") && j + 1 < args.len() && timeout == 0 {
            timeout = crate::tri!(super::args::int(&args[j + 1]));
            if timeout <= 0 {
                return err(e::TIMEOUT_NOT_POSITIVE);
            }
            j += 2;
        } else if is(&args[j], "to") && j + 2 < args.len() && target.is_none() {
            let port = crate::tri!(super::args::int(&args[j + 2]));
            target = Some((String::from_utf8_lossy(&args[j + 1]).into_owned(), port));
            j += 3;
        } else if is(&args[j], "force") && !force {
            force = true;
            j += 1;
        } else {
            return err(errors::SYNTAX);
        }
    }
    if ctx.server.repl.failover.active() {
        return err(e::IN_PROGRESS);
    }
    if ctx.server.replica.is_replica() {
        return err(e::ON_REPLICA);
    }
    let replicas = ctx.server.repl.replicas();
    if replicas.is_empty() {
        return err(e::NO_REPLICAS);
    }
    if force && (timeout == 0 || target.is_none()) {
        return err(e::FORCE_NEEDS);
    }
    let target = match target {
        Some((host, port)) => {
            // A port that is no u64 matches no replica's listening port.
            let found = u64::try_from(port)
                .ok()
                .and_then(|p| replicas.iter().find(|r| r.matches(&host, p)));
            let Some(replica) = found else {
                return err(e::NOT_A_REPLICA);
            };
            if replica.state() != crate::repl::State::Online {
                return err(e::NOT_ONLINE);
            }
            tracing::info!("FAILOVER requested to {host}:{port}.");
            Some((host, replica.port))
        }
        None => {
            tracing::info!("FAILOVER requested to any replica.");
            None
        }
    };
    let end_ms = if timeout > 0 {
        ctx.now.saturating_add(timeout as u64)
    } else {
        0
    };
    ctx.server.repl.failover.start(target, end_ms, force);
    crate::blocked::hold_writes(ctx.dbs, ctx.server, crate::blocked::Hold::Failover);
    Reply::Ok
}
