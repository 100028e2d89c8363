//! The CLUSTER commands, READONLY, READWRITE and ASKING as Redis 7.0.15
//! answers them: in cluster mode over this node's view of the cluster
//! ([`crate::cluster`]); without it, as a standalone Redis does, every one
//! says cluster support is disabled, after its own arity check. Also the
//! module commands of a Redis without modules: MODULE LIST is empty;
//! MODULE LOAD/LOADEX/UNLOAD are refused unless `enable-module-command`
//! lets the client in, and then fail as a load failure does — coordis
//! loads no modules.

use bytes::Bytes;

use super::flags::*;
use super::{acl, tri, CommandSpec, Ctx};
use crate::cluster::route::preferred_endpoint;
use crate::cluster::{Cluster, NodeRef, SLOTS};
use crate::errors::{self, err};
use crate::protocol::Reply;

#[rustfmt::skip]
pub(crate) static COMMANDS: &[CommandSpec] = &[
    command!("server", "cluster", -2, 0, 0, "A container for cluster commands", super::container, CLUSTER),
    command!("server", "module", -2, 0, 0, "A container for module commands", super::container, MODULE),
    command!("server", "readonly", 1, LOADING | STALE | FAST, acl::CONNECTION, "Enables read queries for a connection to a cluster replica node", readonly),
    command!("server", "readwrite", 1, LOADING | STALE | FAST, acl::CONNECTION, "Disables read queries for a connection to a cluster replica node", readwrite),
    command!("server", "asking", 1, FAST, acl::CONNECTION, "Sent by cluster clients after an -ASK redirect", asking),
];

#[rustfmt::skip]
static CLUSTER: &[CommandSpec] = &[
    command!("server", "cluster|addslots", -3, ADMIN | STALE | NO_ASYNC_LOADING, 0, "Assign new hash slots to receiving node", addslots),
    command!("server", "cluster|addslotsrange", -4, ADMIN | STALE | NO_ASYNC_LOADING, 0, "Assign new hash slots to receiving node", addslots_range),
    command!("server", "cluster|bumpepoch", 2, ADMIN | STALE | NO_ASYNC_LOADING, 0, "Advance the cluster config epoch", bumpepoch),
    command!("server", "cluster|count-failure-reports", 3, ADMIN | STALE, 0, "Return the number of failure reports active for a given node", count_failure_reports),
    command!("server", "cluster|countkeysinslot", 3, STALE, 0, "Return the number of local keys in the specified hash slot", countkeysinslot),
    command!("server", "cluster|delslots", -3, ADMIN | STALE | NO_ASYNC_LOADING, 0, "Set hash slots as unbound in receiving node", addslots),
    command!("server", "cluster|delslotsrange", -4, ADMIN | STALE | NO_ASYNC_LOADING, 0, "Set hash slots as unbound in receiving node", addslots_range),
    command!("server", "cluster|failover", -2, ADMIN | STALE | NO_ASYNC_LOADING, 0, "Forces a replica to perform a manual failover of its master.", failover),
    command!("server", "cluster|flushslots", 2, ADMIN | STALE | NO_ASYNC_LOADING, 0, "Delete a node's own slots information", flushslots),
    command!("server", "cluster|forget", 3, ADMIN | STALE | NO_ASYNC_LOADING, 0, "Remove a node from the nodes table", forget),
    command!("server", "cluster|getkeysinslot", 4, STALE, 0, "Return local key names in the specified hash slot", getkeysinslot),
    command!("server", "cluster|help", 2, LOADING | STALE, 0, "Show helpful text about the different subcommands", help),
    command!("server", "cluster|info", 2, STALE, 0, "Provides info about Redis Cluster node state", info),
    command!("server", "cluster|keyslot", 3, STALE, 0, "Returns the hash slot of the specified key", keyslot),
    command!("server", "cluster|links", 2, STALE, 0, "Returns a list of all TCP links to and from peer nodes in cluster", links),
    command!("server", "cluster|meet", -4, ADMIN | STALE | NO_ASYNC_LOADING, 0, "Force a node cluster to handshake with another node", meet),
    command!("server", "cluster|myid", 2, STALE, 0, "Return the node id", myid),
    command!("server", "cluster|nodes", 2, STALE, 0, "Get Cluster config for the node", nodes),
    command!("server", "cluster|replicas", 3, ADMIN | STALE, 0, "List replica nodes of the specified master node", replicas),
    command!("server", "cluster|replicate", 3, ADMIN | STALE | NO_ASYNC_LOADING, 0, "Reconfigure a node as a replica of the specified master node", replicate),
    command!("server", "cluster|reset", -2, ADMIN | NOSCRIPT | STALE, 0, "Reset a Redis Cluster node", reset),
    command!("server", "cluster|saveconfig", 2, ADMIN | STALE | NO_ASYNC_LOADING, 0, "Forces the node to save cluster state on disk", saveconfig),
    command!("server", "cluster|set-config-epoch", 3, ADMIN | STALE | NO_ASYNC_LOADING, 0, "Set the configuration epoch in a new node", set_config_epoch),
    command!("server", "cluster|setslot", -4, ADMIN | STALE | NO_ASYNC_LOADING, 0, "Bind a hash slot to a specific node", setslot),
    command!("server", "cluster|shards", 2, STALE, 0, "Get array of cluster slots to node mappings", shards),
    command!("server", "cluster|slaves", 3, ADMIN | STALE, 0, "List replica nodes of the specified master node", replicas),
    command!("server", "cluster|slots", 2, STALE, 0, "Get array of Cluster slot to node mappings", slots),
];

#[rustfmt::skip]
static MODULE: &[CommandSpec] = &[
    command!("server", "module|help", 2, LOADING | STALE, 0, "Show helpful text about the different subcommands", module_help),
    command!("server", "module|list", 2, ADMIN | NOSCRIPT, 0, "List all modules loaded by the server", module_list),
    command!("server", "module|load", -3, ADMIN | NOSCRIPT | NO_ASYNC_LOADING | PROTECTED | GUARD_MODULE, 0, "Load a module", module_load),
    command!("server", "module|loadex", -3, ADMIN | NOSCRIPT | NO_ASYNC_LOADING | PROTECTED | GUARD_MODULE, 0, "Load a module with extended parameters", module_load),
    command!("server", "module|unload", 3, ADMIN | NOSCRIPT | NO_ASYNC_LOADING | PROTECTED | GUARD_MODULE, 0, "Unload a module", module_load),
];

fn cluster_disabled(_ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    err(errors::CLUSTER_DISABLED)
}

/// This node's cluster, or the standalone reply.
macro_rules! cluster {
    ($ctx:expr) => {
        match $ctx.server.cluster.as_deref_mut() {
            Some(cluster) => cluster,
            None => return cluster_disabled($ctx, &[]),
        }
    };
}

fn readonly(ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    cluster!(ctx);
    ctx.client.cluster_readonly = true;
    Reply::Ok
}

fn readwrite(ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    cluster!(ctx);
    ctx.client.cluster_readonly = false;
    Reply::Ok
}

fn asking(ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    cluster!(ctx);
    ctx.client.asking = true;
    ctx.client.asking_kept = true;
    Reply::Ok
}

/// After a change of slots or nodes: the state is checked again and the
/// nodes file written (Redis's `clusterDoBeforeSleep(UPDATE_STATE|SAVE_CONFIG)`).
fn changed(ctx: &mut Ctx) {
    let now = ctx.now;
    let config = &ctx.server.config.cluster;
    if let Some(cluster) = ctx.server.cluster.as_deref_mut() {
        cluster.update_state(config, now);
        if let Err(e) = cluster.save() {
            tracing::warn!("Fatal: can't update cluster config file: {e}");
        }
    }
    crate::cluster::failover::reconcile(ctx.dbs, ctx.server);
}

/// A slot argument (`getSlotOrReply`).
pub(crate) fn slot_arg(arg: &[u8]) -> Result<usize, Reply> {
    crate::store::num::parse_i64(arg)
        .filter(|s| (0..SLOTS as i64).contains(s))
        .map(|s| s as usize)
        .ok_or_else(|| err(errors::CLUSTER_BAD_SLOT))
}

fn unknown_node(prefix: &str, name: &[u8]) -> Reply {
    Reply::Error(format!("ERR {prefix} {}", String::from_utf8_lossy(name)).into())
}

/// Marks `start..=end` for ADDSLOTS/DELSLOTS (`checkSlotAssignmentsOrReply`).
fn mark_slots(cluster: &Cluster, marked: &mut [u8], del: bool, start: usize, end: usize) -> Result<(), Reply> {
    #[allow(clippy::needless_range_loop)] // the slot number is in the replies
    for slot in start..=end {
        if del && cluster.slots[slot].is_none() {
            return Err(Reply::Error(format!("ERR Slot {slot} is already unassigned").into()));
        } else if !del && cluster.slots[slot].is_some() {
            return Err(Reply::Error(format!("ERR Slot {slot} is already busy").into()));
        }
        marked[slot] += 1;
        if marked[slot] == 2 {
            return Err(Reply::Error(format!("ERR Slot {slot} specified multiple times").into()));
        }
    }
    Ok(())
}

/// Assigns (or frees) the marked slots (`clusterUpdateSlots`).
fn update_slots(ctx: &mut Ctx, marked: &[u8], del: bool) -> Reply {
    let cluster = cluster!(ctx);
    let me = cluster.myself;
    let had_slots = cluster.num_slots(me) > 0;
    for (slot, _) in marked.iter().enumerate().filter(|(_, m)| **m > 0) {
        cluster.importing_from[slot] = None;
        cluster.slots[slot] = if del { None } else { Some(me) };
    }
    cluster.note_slots_gained(me, had_slots);
    changed(ctx);
    Reply::Ok
}

fn addslots(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let cluster = cluster!(ctx);
    let del = super::args::is(&args[1], "delslots");
    let mut slots = Vec::with_capacity(args.len() - 2);
    for arg in &args[2..] {
        slots.push(tri!(slot_arg(arg)));
    }
    let mut marked = vec![0u8; SLOTS];
    for slot in slots {
        tri!(mark_slots(cluster, &mut marked, del, slot, slot));
    }
    update_slots(ctx, &marked, del)
}

fn addslots_range(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let cluster = cluster!(ctx);
    if args.len() % 2 == 1 {
        return errors::wrong_args(if super::args::is(&args[1], "delslotsrange") {
            "cluster|delslotsrange"
        } else {
            "cluster|addslotsrange"
        });
    }
    let del = super::args::is(&args[1], "delslotsrange");
    let mut marked = vec![0u8; SLOTS];
    for pair in args[2..].chunks(2) {
        let start = tri!(slot_arg(&pair[0]));
        let end = tri!(slot_arg(&pair[1]));
        if start > end {
            return Reply::Error(format!("ERR start slot number {start} is greater than end slot number {end}").into());
        }
        tri!(mark_slots(cluster, &mut marked, del, start, end));
    }
    update_slots(ctx, &marked, del)
}

fn flushslots(ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    let cluster = cluster!(ctx);
    if !ctx.dbs[0].is_empty() {
        return err(errors::CLUSTER_FLUSHSLOTS_NOT_EMPTY);
    }
    let me = cluster.myself;
    for slot in cluster.slots.iter_mut().filter(|s| **s == Some(me)) {
        *slot = None;
    }
    changed(ctx);
    Reply::Ok
}

/// Keys of database 0 in `slot`, every stored one (Redis's slot-to-keys
/// index holds keys past their deadline until they are removed).
pub(crate) fn keys_in_slot<'c>(ctx: &'c Ctx, slot: usize) -> impl Iterator<Item = &'c [u8]> {
    ctx.dbs[0]
        .all_keys(ctx.now)
        .map(|(key, _, _)| key)
        .filter(move |key| crate::cluster::key_slot(key) as usize == slot)
}

fn countkeysinslot(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    cluster!(ctx);
    let slot = tri!(super::args::int(&args[2]));
    if !(0..SLOTS as i64).contains(&slot) {
        return err(errors::CLUSTER_INVALID_SLOT);
    }
    Reply::Int(keys_in_slot(ctx, slot as usize).count() as i64)
}

fn getkeysinslot(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    cluster!(ctx);
    let slot = tri!(super::args::int(&args[2]));
    let count = tri!(super::args::int(&args[3]));
    if !(0..SLOTS as i64).contains(&slot) || count < 0 {
        return err(errors::CLUSTER_INVALID_SLOT_OR_COUNT);
    }
    let keys = keys_in_slot(ctx, slot as usize)
        .take(count as usize)
        .map(|k| Reply::Bulk(Bytes::copy_from_slice(k)))
        .collect();
    Reply::Array(keys)
}

fn keyslot(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    cluster!(ctx);
    Reply::Int(i64::from(crate::cluster::key_slot(&args[2])))
}

fn myid(ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    let cluster = cluster!(ctx);
    Reply::Bulk(Bytes::from(cluster.me().name.clone()))
}

fn nodes(ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    let cluster = cluster!(ctx);
    Reply::Verbatim(*b"txt", Bytes::from(cluster.describe_all(0)))
}

fn info(ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    let cluster = cluster!(ctx);
    let (mut assigned, mut ok, mut pfail, mut fail) = (0, 0, 0, 0);
    for owner in cluster.slots.iter().flatten() {
        assigned += 1;
        let n = cluster.node(*owner);
        if n.failed() {
            fail += 1;
        } else if n.timed_out() {
            pfail += 1;
        } else {
            ok += 1;
        }
    }
    let mut text = format!(
        "cluster_state:{}\r\ncluster_slots_assigned:{assigned}\r\ncluster_slots_ok:{ok}\r\n\
         cluster_slots_pfail:{pfail}\r\ncluster_slots_fail:{fail}\r\ncluster_known_nodes:{}\r\n\
         cluster_size:{}\r\ncluster_current_epoch:{}\r\ncluster_my_epoch:{}\r\n",
        if cluster.ok { "ok" } else { "fail" },
        cluster.nodes.len(),
        cluster.size,
        cluster.current_epoch,
        cluster.shown_epoch(cluster.me()),
    );
    for (counts, dir) in [(&cluster.sent, "sent"), (&cluster.received, "received")] {
        let mut total = 0;
        for (i, n) in counts.iter().enumerate().filter(|(_, n)| **n > 0) {
            total += n;
            text.push_str(&format!(
                "cluster_stats_messages_{}_{dir}:{n}\r\n",
                crate::cluster::MESSAGE_TYPES[i]
            ));
        }
        text.push_str(&format!("cluster_stats_messages_{dir}:{total}\r\n"));
    }
    text.push_str("total_cluster_links_buffer_limit_exceeded:0\r\n");
    Reply::Verbatim(*b"txt", Bytes::from(text))
}

/// One node of CLUSTER SLOTS (`addNodeToNodeReply`).
fn slots_node(cluster: &Cluster, config: &crate::config::ClusterConfig, node: NodeRef) -> Reply {
    let n = cluster.node(node);
    let endpoint = match config.preferred_endpoint_type.as_str() {
        "unknown-endpoint" => Reply::Nil,
        _ => Reply::Bulk(Bytes::from(preferred_endpoint(config, n).to_string())),
    };
    let mut extra = vec![];
    if config.preferred_endpoint_type != "ip" {
        extra.push((Reply::bulk("ip"), Reply::Bulk(Bytes::from(n.ip.clone()))));
    }
    if config.preferred_endpoint_type != "hostname" && !n.hostname.is_empty() {
        extra.push((Reply::bulk("hostname"), Reply::Bulk(Bytes::from(n.hostname.clone()))));
    }
    Reply::Array(vec![
        endpoint,
        Reply::Int(i64::from(n.port)),
        Reply::Bulk(Bytes::from(n.name.clone())),
        Reply::Map(extra),
    ])
}

/// Whether a replica is listed by CLUSTER SLOTS (`isReplicaAvailable`):
/// not failed and with a replication offset.
fn replica_available(cluster: &Cluster, node: NodeRef) -> bool {
    !cluster.node(node).failed() && node_offset(cluster, node) != 0
}

/// A node's replication offset: this node's own, another's from its last
/// header (`repl_offset`).
fn node_offset(cluster: &Cluster, node: NodeRef) -> u64 {
    if node == cluster.myself {
        cluster.repl.offset
    } else {
        cluster.node(node).repl_offset
    }
}

fn slots(ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    let config = &ctx.server.config.cluster;
    let Some(cluster) = ctx.server.cluster.as_deref() else {
        return cluster_disabled(ctx, &[]);
    };
    let mut out = vec![];
    let mut slot = 0;
    while slot < SLOTS {
        let Some(owner) = cluster.slots[slot] else {
            slot += 1;
            continue;
        };
        let start = slot;
        while slot < SLOTS && cluster.slots[slot] == Some(owner) {
            slot += 1;
        }
        let mut entry = vec![
            Reply::Int(start as i64),
            Reply::Int(slot as i64 - 1),
            slots_node(cluster, config, owner),
        ];
        for replica in cluster.replicas(owner) {
            if replica_available(cluster, replica) {
                entry.push(slots_node(cluster, config, replica));
            }
        }
        out.push(Reply::Array(entry));
    }
    Reply::Array(out)
}

/// One node of CLUSTER SHARDS (`addNodeDetailsToShardReply`).
fn shard_node(cluster: &Cluster, config: &crate::config::ClusterConfig, node: NodeRef) -> Reply {
    let n = cluster.node(node);
    let bulk = |s: &str| Reply::Bulk(Bytes::from(s.to_string()));
    let mut map = vec![(Reply::bulk("id"), bulk(&n.name))];
    if n.port != 0 {
        map.push((Reply::bulk("port"), Reply::Int(i64::from(n.port))));
    }
    map.push((Reply::bulk("ip"), bulk(&n.ip)));
    map.push((Reply::bulk("endpoint"), bulk(preferred_endpoint(config, n))));
    if !n.hostname.is_empty() {
        map.push((Reply::bulk("hostname"), bulk(&n.hostname)));
    }
    let offset = node_offset(cluster, node) as i64;
    map.push((
        Reply::bulk("role"),
        Reply::bulk(if n.is_slave() { "replica" } else { "master" }),
    ));
    map.push((Reply::bulk("replication-offset"), Reply::Int(offset)));
    let health = if n.failed() {
        "fail"
    } else if n.is_slave() && offset == 0 {
        "loading"
    } else {
        "online"
    };
    map.push((Reply::bulk("health"), Reply::bulk(health)));
    Reply::Map(map)
}

fn shards(ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    let config = &ctx.server.config.cluster;
    let Some(cluster) = ctx.server.cluster.as_deref() else {
        return cluster_disabled(ctx, &[]);
    };
    let mut out = vec![];
    for n in cluster.nodes.iter().filter(|n| n.is_master()) {
        let slots = cluster
            .ranges_of(n.handle)
            .into_iter()
            .flat_map(|(a, b)| [Reply::Int(a as i64), Reply::Int(b as i64)])
            .collect();
        // The primary, then its replicas (`clusterGetNodesServingMySlots`).
        let mut nodes = vec![shard_node(cluster, config, n.handle)];
        for replica in cluster.replicas(n.handle) {
            nodes.push(shard_node(cluster, config, replica));
        }
        out.push(Reply::Map(vec![
            (Reply::bulk("slots"), Reply::Array(slots)),
            (Reply::bulk("nodes"), Reply::Array(nodes)),
        ]));
    }
    Reply::Array(out)
}

pub(crate) fn setslot(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let cluster = cluster!(ctx);
    if cluster.me().is_slave() {
        return err(errors::CLUSTER_SETSLOT_ON_REPLICA);
    }
    let slot = tri!(slot_arg(&args[2]));
    let action = &args[3];
    let me = cluster.myself;
    let target = |cluster: &Cluster, prefix: &str| -> Result<NodeRef, Reply> {
        let n = cluster.lookup(&args[4]).ok_or_else(|| unknown_node(prefix, &args[4]))?;
        if cluster.node(n).is_slave() {
            return Err(err(errors::CLUSTER_TARGET_NOT_MASTER));
        }
        Ok(n)
    };
    if super::args::is(action, "migrating") && args.len() == 5 {
        if cluster.slots[slot] != Some(me) {
            return Reply::Error(format!("ERR I'm not the owner of hash slot {slot}").into());
        }
        let n = tri!(target(cluster, "I don't know about node"));
        cluster.migrating_to[slot] = Some(n);
    } else if super::args::is(action, "importing") && args.len() == 5 {
        if cluster.slots[slot] == Some(me) {
            return Reply::Error(format!("ERR I'm already the owner of hash slot {slot}").into());
        }
        let n = tri!(target(cluster, "I don't know about node"));
        cluster.importing_from[slot] = Some(n);
    } else if super::args::is(action, "stable") && args.len() == 4 {
        cluster.importing_from[slot] = None;
        cluster.migrating_to[slot] = None;
    } else if super::args::is(action, "node") && args.len() == 5 {
        let n = tri!(target(cluster, "Unknown node"));
        let keys = keys_in_slot_count(&ctx.dbs[0], ctx.now, slot);
        let cluster = cluster!(ctx);
        if cluster.slots[slot] == Some(me) && n != me && keys != 0 {
            return Reply::Error(
                format!(
                    "ERR Can't assign hashslot {slot} to a different node while I still hold keys for this hash slot."
                )
                .into(),
            );
        }
        if keys == 0 {
            cluster.migrating_to[slot] = None;
        }
        let was_mine = cluster.slots[slot] == Some(me);
        let had_slots = cluster.num_slots(n) > 0;
        cluster.slots[slot] = Some(n);
        cluster.note_slots_gained(n, had_slots);
        if was_mine && n != me && cluster.num_slots(me) == 0 && ctx.server.config.cluster.allow_replica_migration {
            // A primary left without slots follows the node that took its
            // last one (the replication link follows in `changed`).
            tracing::warn!(
                "Configuration change detected. Reconfiguring myself as a replica of {}",
                cluster.node(n).name
            );
            cluster.set_master(n);
        }
        if n == me && cluster.importing_from[slot].is_some() {
            if cluster.bump_epoch_without_consensus() {
                tracing::warn!("configEpoch updated after importing slot {slot}");
            }
            cluster.importing_from[slot] = None;
            // The other nodes learn the new owner (and its new epoch) now,
            // not at their next ping: until then they send clients to the
            // old owner, which answers -MOVED back here or -ASK.
            cluster.broadcast_pong(&ctx.server.config.cluster, false, ctx.now);
        }
    } else {
        return err(errors::CLUSTER_SETSLOT_SYNTAX);
    }
    changed(ctx);
    Reply::Ok
}

fn keys_in_slot_count(db: &crate::store::Db, now: u64, slot: usize) -> usize {
    db.all_keys(now)
        .filter(|(key, _, _)| crate::cluster::key_slot(key) as usize == slot)
        .count()
}

fn bumpepoch(ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    let cluster = cluster!(ctx);
    let bumped = cluster.bump_epoch_without_consensus();
    let epoch = cluster.me().config_epoch;
    let reply = Reply::Status(format!("{} {epoch}", if bumped { "BUMPED" } else { "STILL" }).into());
    changed(ctx);
    reply
}

fn set_config_epoch(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let cluster = cluster!(ctx);
    let epoch = tri!(super::args::int(&args[2]));
    if epoch < 0 {
        return Reply::Error(format!("ERR Invalid config epoch specified: {epoch}").into());
    } else if cluster.nodes.len() > 1 {
        return err(errors::CLUSTER_EPOCH_OTHERS_KNOWN);
    } else if cluster.me().config_epoch != 0 {
        return err(errors::CLUSTER_EPOCH_NONZERO);
    }
    cluster.me_mut().config_epoch = epoch as u64;
    tracing::warn!("configEpoch set to {epoch} via CLUSTER SET-CONFIG-EPOCH");
    cluster.current_epoch = cluster.current_epoch.max(epoch as u64);
    changed(ctx);
    Reply::Ok
}

fn saveconfig(ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    let cluster = cluster!(ctx);
    match cluster.save() {
        Ok(()) => Reply::Ok,
        Err(e) => Reply::Error(
            format!(
                "ERR error saving the cluster node config: {}",
                crate::errors::strerror(&e)
            )
            .into(),
        ),
    }
}

fn forget(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let cluster = cluster!(ctx);
    let Some(n) = cluster.lookup(&args[2]) else {
        return unknown_node("Unknown node", &args[2]);
    };
    if n == cluster.myself {
        return err(errors::CLUSTER_FORGET_MYSELF);
    }
    if cluster.me().is_slave() && cluster.me().slaveof == Some(n) {
        return err(errors::CLUSTER_FORGET_MASTER);
    }
    let name = cluster.node(n).name.clone();
    cluster.blacklist_add(&name, ctx.now);
    cluster.remove_node(n);
    changed(ctx);
    Reply::Ok
}

fn count_failure_reports(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let config = &ctx.server.config.cluster;
    let Some(cluster) = ctx.server.cluster.as_deref_mut() else {
        return cluster_disabled(ctx, &[]);
    };
    let Some(n) = cluster.lookup(&args[2]) else {
        return unknown_node("Unknown node", &args[2]);
    };
    Reply::Int(cluster.count_failure_reports(config, n, ctx.now) as i64)
}

fn replicas(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let cluster = cluster!(ctx);
    let Some(n) = cluster.lookup(&args[2]) else {
        return unknown_node("Unknown node", &args[2]);
    };
    if cluster.node(n).is_slave() {
        return err(errors::CLUSTER_NOT_A_MASTER);
    }
    let lines = cluster
        .replicas(n)
        .into_iter()
        .map(|r| Reply::Bulk(Bytes::from(cluster.describe(cluster.node(r)))))
        .collect();
    Reply::Array(lines)
}

fn replicate(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let cluster = cluster!(ctx);
    let Some(n) = cluster.lookup(&args[2]) else {
        return unknown_node("Unknown node", &args[2]);
    };
    if n == cluster.myself {
        return err(errors::CLUSTER_REPLICATE_MYSELF);
    }
    if cluster.node(n).is_slave() {
        return err(errors::CLUSTER_REPLICATE_REPLICA);
    }
    if cluster.me().is_master() && (cluster.num_slots(cluster.myself) != 0 || !ctx.dbs[0].is_empty()) {
        return err(errors::CLUSTER_REPLICATE_NOT_EMPTY);
    }
    cluster.set_master(n);
    changed(ctx);
    Reply::Ok
}

fn failover(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let cluster = cluster!(ctx);
    if args.len() == 3 && !super::args::is(&args[2], "force") && !super::args::is(&args[2], "takeover") {
        return err(errors::SYNTAX);
    }
    let takeover = args.len() == 3 && super::args::is(&args[2], "takeover");
    let force = takeover || (args.len() == 3 && super::args::is(&args[2], "force"));
    if cluster.me().is_master() {
        return err(errors::CLUSTER_FAILOVER_ON_MASTER);
    }
    let Some(master) = cluster.me().slaveof else {
        return err(errors::CLUSTER_FAILOVER_MASTER_UNKNOWN);
    };
    let m = cluster.node(master);
    if !force && (m.failed() || m.link.is_none()) {
        return err(errors::CLUSTER_FAILOVER_MASTER_DOWN);
    }
    let now = ctx.now;
    cluster.reset_manual_failover();
    cluster.manual.end = now + crate::cluster::failover::MF_TIMEOUT_MS;
    let config = &ctx.server.config.cluster;
    let cluster = ctx.server.cluster.as_deref_mut().expect("checked above");
    if takeover {
        tracing::warn!("Taking over the master (user request).");
        cluster.bump_epoch_without_consensus();
        cluster.replace_my_master(config, now);
    } else if force {
        tracing::warn!("Forced failover user request accepted.");
        cluster.manual.can_start = true;
    } else {
        tracing::warn!("Manual failover user request accepted.");
        cluster.send_bare(config, master, crate::cluster::bus::kind::MFSTART);
    }
    changed(ctx);
    Reply::Ok
}

fn reset(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let cluster = cluster!(ctx);
    let hard = match args.get(2) {
        None => false,
        Some(a) if super::args::is(a, "hard") => true,
        Some(a) if super::args::is(a, "soft") => false,
        Some(_) => return err(errors::SYNTAX),
    };
    if cluster.me().is_master() && !ctx.dbs[ctx.client.db].is_empty() {
        return err(errors::CLUSTER_RESET_WITH_KEYS);
    }
    let cluster = cluster!(ctx);
    cluster.close_all_slots();
    cluster.slots.fill(None);
    let me = cluster.myself;
    let others: Vec<NodeRef> = cluster.nodes.iter().map(|n| n.handle).filter(|h| *h != me).collect();
    for n in others {
        cluster.remove_node(n);
    }
    if hard {
        cluster.current_epoch = 0;
        cluster.last_vote_epoch = 0;
        let me = cluster.me_mut();
        me.config_epoch = 0;
        tracing::warn!("configEpoch set to 0 via CLUSTER RESET HARD");
        me.name = crate::cluster::random_name();
        tracing::info!("Node hard reset, now I'm {}", me.name);
    }
    changed(ctx);
    Reply::Ok
}

fn links(ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    let cluster = cluster!(ctx);
    let mut out = vec![];
    for n in &cluster.nodes {
        for id in [n.link, n.inbound_link].into_iter().flatten() {
            let Some(link) = cluster.links.get(&id) else {
                continue;
            };
            // Messages are handed to the link's writer at once: nothing
            // waits in a send buffer of the engine's.
            out.push(Reply::Map(vec![
                (
                    Reply::bulk("direction"),
                    Reply::bulk(if link.inbound { "from" } else { "to" }),
                ),
                (Reply::bulk("node"), Reply::Bulk(Bytes::from(n.name.clone()))),
                (Reply::bulk("create-time"), Reply::Int(link.ctime as i64)),
                (Reply::bulk("events"), Reply::bulk("r")),
                (Reply::bulk("send-buffer-allocated"), Reply::Int(0)),
                (Reply::bulk("send-buffer-used"), Reply::Int(0)),
            ]));
        }
    }
    Reply::Array(out)
}

fn meet(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    cluster!(ctx);
    if args.len() > 5 {
        return errors::wrong_args("cluster|meet");
    }
    let Some(port) = crate::store::num::parse_i64(&args[3]) else {
        return Reply::Error(
            format!(
                "ERR Invalid TCP base port specified: {}",
                String::from_utf8_lossy(&args[3])
            )
            .into(),
        );
    };
    let cport = match args.get(4) {
        Some(c) => match crate::store::num::parse_i64(c) {
            Some(c) => c,
            None => {
                return Reply::Error(
                    format!("ERR Invalid TCP bus port specified: {}", String::from_utf8_lossy(c)).into(),
                )
            }
        },
        None => port + i64::from(crate::cluster::PORT_INCR),
    };
    let ip_ok = std::str::from_utf8(&args[2]).is_ok_and(|ip| ip.parse::<std::net::IpAddr>().is_ok());
    let in_range = |p: i64| (1..=65535).contains(&p);
    if !ip_ok || !in_range(port) || !in_range(cport) {
        return Reply::Error(
            format!(
                "ERR Invalid node address specified: {}:{}",
                String::from_utf8_lossy(&args[2]),
                String::from_utf8_lossy(&args[3])
            )
            .into(),
        );
    }
    let ip: std::net::IpAddr = String::from_utf8_lossy(&args[2]).parse().expect("checked above");
    let now = ctx.now;
    let cluster = cluster!(ctx);
    // A handshake already under way with that address is not an error.
    cluster.start_handshake(&ip.to_string(), port as u16, cport as u16, now);
    changed(ctx);
    Reply::Ok
}

fn help(ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    cluster!(ctx);
    super::server::help_reply(&[
        "CLUSTER <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "ADDSLOTS <slot> [<slot> ...]",
        "    Assign slots to current node.",
        "ADDSLOTSRANGE <start slot> <end slot> [<start slot> <end slot> ...]",
        "    Assign slots which are between <start-slot> and <end-slot> to current node.",
        "BUMPEPOCH",
        "    Advance the cluster config epoch.",
        "COUNT-FAILURE-REPORTS <node-id>",
        "    Return number of failure reports for <node-id>.",
        "COUNTKEYSINSLOT <slot>",
        "    Return the number of keys in <slot>.",
        "DELSLOTS <slot> [<slot> ...]",
        "    Delete slots information from current node.",
        "DELSLOTSRANGE <start slot> <end slot> [<start slot> <end slot> ...]",
        "    Delete slots information which are between <start-slot> and <end-slot> from current node.",
        "FAILOVER [FORCE|TAKEOVER]",
        "    Promote current replica node to being a master.",
        "FORGET <node-id>",
        "    Remove a node from the cluster.",
        "GETKEYSINSLOT <slot> <count>",
        "    Return key names stored by current node in a slot.",
        "FLUSHSLOTS",
        "    Delete current node own slots information.",
        "INFO",
        "    Return information about the cluster.",
        "KEYSLOT <key>",
        "    Return the hash slot for <key>.",
        "MEET <ip> <port> [<bus-port>]",
        "    Connect nodes into a working cluster.",
        "MYID",
        "    Return the node id.",
        "NODES",
        "    Return cluster configuration seen by node. Output format:",
        "    <id> <ip:port> <flags> <master> <pings> <pongs> <epoch> <link> <slot> ...",
        "REPLICATE <node-id>",
        "    Configure current node as replica to <node-id>.",
        "RESET [HARD|SOFT]",
        "    Reset current node (default: soft).",
        "SET-CONFIG-EPOCH <epoch>",
        "    Set config epoch of current node.",
        "SETSLOT <slot> (IMPORTING <node-id>|MIGRATING <node-id>|STABLE|NODE <node-id>)",
        "    Set slot state.",
        "REPLICAS <node-id>",
        "    Return <node-id> replicas.",
        "SAVECONFIG",
        "    Force saving cluster configuration on disk.",
        "SLOTS",
        "    Return information about slots range mappings. Each range is made of:",
        "    start, end, master and replicas IP addresses, ports and ids",
        "SHARDS",
        "    Return information about slot range mappings and the nodes associated with them.",
        "LINKS",
        "    Return information about all network links between this node and its peers.",
        "    Output format is an array where each array element is a map containing attributes of a link",
    ])
}

fn module_list(_ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    Reply::Array(vec![])
}

/// MODULE LOAD/LOADEX/UNLOAD, once `enable-module-command` let the client
/// in ([`PROTECTED`]): fails as a load failure does.
fn module_load(_ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    tracing::warn!(
        module = %String::from_utf8_lossy(&args[2]),
        "MODULE {} refused: coordis does not load modules",
        String::from_utf8_lossy(&args[1]).to_uppercase()
    );
    err(if super::args::is(&args[1], "unload") {
        errors::MODULE_UNLOAD_FAILED
    } else {
        errors::MODULE_LOAD_FAILED
    })
}

fn module_help(_ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    super::server::help_reply(&[
        "MODULE <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "LIST",
        "    Return a list of loaded modules.",
        "LOAD <path> [<arg> ...]",
        "    Load a module library from <path>, passing to it any optional arguments.",
        "LOADEX <path> [[CONFIG NAME VALUE] [CONFIG NAME VALUE]] [ARGS ...]",
        "    Load a module library from <path>, while passing it module configurations and optional arguments.",
        "UNLOAD <name>",
        "    Unload a module.",
    ])
}
