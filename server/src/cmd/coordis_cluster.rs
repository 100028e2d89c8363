//! `COORDIS.CLUSTER`, the cluster's test-control plane over the wire (the
//! Rust side is [`crate::ServerControl::move_slot`] and its siblings):
//! move a slot from this node, its owner, to another primary now
//! (MOVESLOT), or step by step (BEGINMOVE, MOVEKEYS, FINISHMOVE) so that a
//! test holds the slot half moved and its clients meet `-ASK` and
//! `-TRYAGAIN`; and cut this node off from others on the bus (PARTITION,
//! HEAL), so that failure detection splits the cluster on the test clock.
//! Each step of a move is what `redis-cli --cluster reshard` does:
//! `CLUSTER SETSLOT <slot> IMPORTING` on the target and `MIGRATING` here,
//! MIGRATE of the slot's keys, then `SETSLOT <slot> NODE <target>` on the
//! target first, here, and on the other primaries. The target is reached as
//! redis-cli reaches it, as a client on its address, so it may be a
//! redis-server node too. Gated by `enable-test-commands` as the other
//! COORDIS.* commands are.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use bytes::Bytes;

use super::flags::*;
use super::{acl, CommandSpec, Ctx};
use crate::cluster::NodeRef;
use crate::errors::{self, err};
use crate::protocol::Reply;
use crate::tri;

#[rustfmt::skip]
pub(crate) static COMMANDS: &[CommandSpec] = &[
    command!("coordis", "coordis.cluster", -2, 0, 0, "A container for the cluster's test controls (coordis's own)", super::container, CLUSTER),
];

#[rustfmt::skip]
static CLUSTER: &[CommandSpec] = &[
    subcommand!("coordis", "coordis.cluster|moveslot", 4, PROTECTED | GUARD_TEST | NOSCRIPT | STALE, acl::ADMIN, move_slot),
    subcommand!("coordis", "coordis.cluster|beginmove", 4, PROTECTED | GUARD_TEST | NOSCRIPT | STALE, acl::ADMIN, begin_move),
    subcommand!("coordis", "coordis.cluster|movekeys", 4, PROTECTED | GUARD_TEST | NOSCRIPT | STALE, acl::ADMIN, move_keys),
    subcommand!("coordis", "coordis.cluster|finishmove", 3, PROTECTED | GUARD_TEST | NOSCRIPT | STALE, acl::ADMIN, finish_move),
    subcommand!("coordis", "coordis.cluster|partition", -3, PROTECTED | GUARD_TEST | NOSCRIPT | LOADING | STALE, acl::ADMIN, partition),
    subcommand!("coordis", "coordis.cluster|heal", -2, PROTECTED | GUARD_TEST | NOSCRIPT | LOADING | STALE, acl::ADMIN, heal),
    subcommand!("coordis", "coordis.cluster|help", 2, PROTECTED | GUARD_TEST | LOADING | STALE, acl::ADMIN, help),
];

/// How long a step waits for the target (connect, each reply, MIGRATE's
/// timeout): redis-cli's `--cluster-timeout` is 60 s; a test wants to know
/// sooner.
const TARGET_TIMEOUT: Duration = Duration::from_secs(10);

/// Keys per MIGRATE when the rest of a slot moves (redis-cli's
/// `--cluster-pipeline` is 10; larger batches cost fewer round trips).
const MIGRATE_BATCH: usize = 100;

/// The longest reply line read from the target.
const REPLY_MAX: u64 = 4096;

/// A primary's client address and name.
struct Peer {
    addr: String,
    name: String,
}

fn peer(ctx: &Ctx, node: NodeRef) -> Result<Peer, Reply> {
    let cluster = ctx
        .server
        .cluster
        .as_deref()
        .ok_or_else(|| err(errors::CLUSTER_DISABLED))?;
    let n = cluster.node(node);
    if n.ip.is_empty() || n.port == 0 {
        return Err(err(errors::MOVE_NO_ADDRESS));
    }
    Ok(Peer {
        addr: format!("{}:{}", n.ip, n.port),
        name: n.name.clone(),
    })
}

/// Sends one command to `addr` and reads its one-line reply; an error
/// reply or a failure is `Err` with [`errors::MOVE_TARGET_FAILED`].
fn call(addr: &str, args: &[&[u8]]) -> Result<(), Reply> {
    let failed = |what: String| Reply::Error(format!("{}{addr}: {what}", errors::MOVE_TARGET_FAILED).into());
    super::migrate::blocking(|| {
        let sock: std::net::SocketAddr = addr.parse().map_err(|e| failed(format!("{e}")))?;
        let mut stream = TcpStream::connect_timeout(&sock, TARGET_TIMEOUT).map_err(|e| failed(e.to_string()))?;
        stream
            .set_read_timeout(Some(TARGET_TIMEOUT))
            .and_then(|_| stream.set_write_timeout(Some(TARGET_TIMEOUT)))
            .and_then(|_| stream.write_all(&crate::replica::link::encode(args)))
            .map_err(|e| failed(e.to_string()))?;
        let mut line = String::new();
        BufReader::new(stream)
            .take(REPLY_MAX)
            .read_line(&mut line)
            .map_err(|e| failed(e.to_string()))?;
        match line.trim_end() {
            "+OK" => Ok(()),
            other => Err(failed(other.to_string())),
        }
    })
}

/// `CLUSTER SETSLOT` on this node, as a client would send it.
fn setslot_here(ctx: &mut Ctx, slot: usize, action: &str, node: &str) -> Result<(), Reply> {
    let args = [
        Bytes::from_static(b"CLUSTER"),
        Bytes::from_static(b"SETSLOT"),
        Bytes::from(slot.to_string()),
        Bytes::copy_from_slice(action.as_bytes()),
        Bytes::copy_from_slice(node.as_bytes()),
    ];
    match super::cluster::setslot(ctx, &args) {
        Reply::Ok => Ok(()),
        other => Err(other),
    }
}

/// The slot's target while it migrates from here.
fn migrating(ctx: &Ctx, slot: usize) -> Result<NodeRef, Reply> {
    let cluster = ctx
        .server
        .cluster
        .as_deref()
        .ok_or_else(|| err(errors::CLUSTER_DISABLED))?;
    if cluster.slots[slot] != Some(cluster.myself) {
        return Err(err(errors::MOVE_NOT_OWNER));
    }
    cluster.migrating_to[slot].ok_or_else(|| err(errors::MOVE_NOT_STARTED))
}

/// BEGINMOVE slot node-id: the target imports the slot from here, and this
/// node marks it migrating there (from now on a key not here is `-ASK`ed
/// to the target, a multi-key command on keys split is `-TRYAGAIN`).
fn begin_move(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let slot = tri!(super::cluster::slot_arg(&args[2]));
    tri!(begin(ctx, slot, &args[3]));
    Reply::Ok
}

fn begin(ctx: &mut Ctx, slot: usize, target: &[u8]) -> Result<(), Reply> {
    let Some(cluster) = ctx.server.cluster.as_deref() else {
        return Err(err(errors::CLUSTER_DISABLED));
    };
    if cluster.slots[slot] != Some(cluster.myself) {
        return Err(err(errors::MOVE_NOT_OWNER));
    }
    if cluster.migrating_to[slot].is_some() {
        return Err(err(errors::MOVE_ALREADY_STARTED));
    }
    let node = cluster
        .lookup(target)
        .ok_or_else(|| Reply::Error(format!("ERR Unknown node {}", String::from_utf8_lossy(target)).into()))?;
    if node == cluster.myself {
        return Err(err(errors::MOVE_TO_SELF));
    }
    if cluster.node(node).is_slave() {
        return Err(err(errors::CLUSTER_TARGET_NOT_MASTER));
    }
    let me = cluster.me().name.clone();
    let to = peer(ctx, node)?;
    let slot_text = slot.to_string();
    call(
        &to.addr,
        &[
            b"CLUSTER",
            b"SETSLOT",
            slot_text.as_bytes(),
            b"IMPORTING",
            me.as_bytes(),
        ],
    )?;
    setslot_here(ctx, slot, "MIGRATING", &to.name)
}

/// Migrates up to `count` of the slot's keys to its target; how many went.
fn migrate_some(ctx: &mut Ctx, slot: usize, count: usize) -> Result<usize, Reply> {
    let to = peer(ctx, migrating(ctx, slot)?)?;
    let keys: Vec<Bytes> = super::cluster::keys_in_slot(ctx, slot)
        .take(count)
        .map(Bytes::copy_from_slice)
        .collect();
    if keys.is_empty() {
        return Ok(0);
    }
    let (host, port) = to.addr.rsplit_once(':').expect("an address with a port");
    let mut args: Vec<Bytes> = vec![
        Bytes::from_static(b"MIGRATE"),
        Bytes::copy_from_slice(host.as_bytes()),
        Bytes::copy_from_slice(port.as_bytes()),
        Bytes::new(),
        Bytes::from_static(b"0"),
        Bytes::from(TARGET_TIMEOUT.as_millis().to_string()),
        Bytes::from_static(b"KEYS"),
    ];
    let n = keys.len();
    args.extend(keys);
    match super::migrate::migrate(ctx, &args) {
        Reply::Ok => Ok(n),
        // Every key expired meanwhile.
        Reply::Status(s) if s == errors::MIGRATE_NOKEY => Ok(0),
        other => Err(other),
    }
}

/// MOVEKEYS slot count: migrates up to `count` of the slot's keys to the
/// target (the slot must be migrating: BEGINMOVE); replies how many moved.
fn move_keys(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let slot = tri!(super::cluster::slot_arg(&args[2]));
    let count = match crate::store::num::parse_i64(&args[3]).and_then(|n| usize::try_from(n).ok()) {
        Some(n) => n,
        None => return err(errors::NOT_INTEGER),
    };
    Reply::Int(tri!(migrate_some(ctx, slot, count)) as i64)
}

/// FINISHMOVE slot: the slot's other keys move, then the target owns it:
/// `SETSLOT NODE` on the target (which takes a new config epoch and ends
/// its import), here, and on every other primary, as redis-cli informs
/// them (best effort: the bus carries the change to any that missed it).
fn finish_move(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let slot = tri!(super::cluster::slot_arg(&args[2]));
    tri!(finish(ctx, slot));
    Reply::Ok
}

fn finish(ctx: &mut Ctx, slot: usize) -> Result<(), Reply> {
    let target = migrating(ctx, slot)?;
    while migrate_some(ctx, slot, MIGRATE_BATCH)? > 0 {}
    let to = peer(ctx, target)?;
    let slot_text = slot.to_string();
    let node_args: [&[u8]; 5] = [
        b"CLUSTER",
        b"SETSLOT",
        slot_text.as_bytes(),
        b"NODE",
        to.name.as_bytes(),
    ];
    call(&to.addr, &node_args)?;
    setslot_here(ctx, slot, "NODE", &to.name)?;
    let others: Vec<NodeRef> = {
        let cluster = ctx.server.cluster.as_deref().expect("a migrating slot is in a cluster");
        cluster
            .nodes
            .iter()
            .filter(|n| n.handle != cluster.myself && n.handle != target && n.is_master())
            .map(|n| n.handle)
            .collect()
    };
    for n in others {
        if let Ok(other) = peer(ctx, n) {
            let _ = call(&other.addr, &node_args);
        }
    }
    Ok(())
}

/// MOVESLOT slot node-id: BEGINMOVE, every key, FINISHMOVE.
fn move_slot(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let slot = tri!(super::cluster::slot_arg(&args[2]));
    tri!(begin(ctx, slot, &args[3]));
    tri!(finish(ctx, slot));
    Reply::Ok
}

/// The names of the nodes `ids` name, each known and not this node.
fn other_nodes(ctx: &Ctx, ids: &[Bytes]) -> Result<Vec<String>, Reply> {
    let cluster = ctx
        .server
        .cluster
        .as_deref()
        .ok_or_else(|| err(errors::CLUSTER_DISABLED))?;
    ids.iter()
        .map(|id| match cluster.lookup(id) {
            Some(n) if n == cluster.myself => Err(err(errors::PARTITION_SELF)),
            Some(n) => Ok(cluster.node(n).name.clone()),
            None => Err(Reply::Error(
                format!("ERR Unknown node {}", String::from_utf8_lossy(id)).into(),
            )),
        })
        .collect()
}

/// PARTITION node-id [node-id ...]: this node and those stop hearing each
/// other on the bus (both ways: it sends them nothing and drops what they
/// send). Clients still reach every node; the failure detector on the
/// clock does the rest, as across a network split.
fn partition(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let names = tri!(other_nodes(ctx, &args[2..]));
    let cluster = ctx.server.cluster.as_deref_mut().expect("checked by other_nodes");
    for name in names {
        if !cluster.cut_off.contains(&name) {
            cluster.cut_off.push(name);
        }
    }
    Reply::Ok
}

/// HEAL [node-id ...]: the bus carries this node's messages to and from
/// those nodes again (every node, with none named).
fn heal(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let names = tri!(other_nodes(ctx, &args[2..]));
    let cluster = ctx.server.cluster.as_deref_mut().expect("checked by other_nodes");
    if names.is_empty() {
        cluster.cut_off.clear();
    } else {
        cluster.cut_off.retain(|n| !names.contains(n));
    }
    Reply::Ok
}

fn help(_ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    super::server::help_reply(&[
        "COORDIS.CLUSTER <subcommand> [<arg> ...]. Subcommands are (sent to the slot's owner):",
        "MOVESLOT <slot> <node-id>",
        "    Move the slot and its keys to primary <node-id> now, as redis-cli --cluster reshard does.",
        "BEGINMOVE <slot> <node-id>",
        "    The target imports the slot, this node marks it migrating: clients meet -ASK and -TRYAGAIN.",
        "MOVEKEYS <slot> <count>",
        "    MIGRATE up to <count> of the slot's keys to the target; answers how many moved.",
        "FINISHMOVE <slot>",
        "    Move the slot's other keys, then SETSLOT NODE on the target, here and on the other primaries.",
        "PARTITION <node-id> [<node-id> ...]",
        "    This node and those stop hearing each other on the bus (clients still reach every node).",
        "HEAL [<node-id> ...]",
        "    The bus carries this node's messages to and from those nodes again (all, with none named).",
    ])
}
