//! The slot check admission makes in cluster mode (Redis 7.0.15's
//! `getNodeByQuery` and `clusterRedirectClient`): whether this node serves
//! a command's keys, and if not, the redirection or error the client gets.
//! An EXEC is checked over every queued command, as Redis does.

use bytes::Bytes;

use super::{Cluster, NodeRef};
use crate::cmd::{flags, keyspecs, CommandSpec};
use crate::config::ClusterConfig;
use crate::errors;
use crate::protocol::Reply;

/// Why this node does not serve the command (`CLUSTER_REDIR_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Redirect {
    /// Keys in different slots.
    CrossSlot,
    /// Several keys of a slot being migrated or imported, not all here.
    Unstable,
    /// The cluster is down.
    DownState,
    /// The cluster is down and the command writes (reads allowed when down).
    DownReadOnly,
    /// The slot is not served by anyone.
    DownUnbound,
    /// Another node serves the slot.
    Moved(u16, NodeRef),
    /// The slot is being migrated to that node and the keys are not here.
    Ask(u16, NodeRef),
}

/// What the check knows of the client.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ClientFlags {
    /// ASKING was sent for this command.
    pub asking: bool,
    /// READONLY: reads of the primary's slots are served by its replica.
    pub readonly: bool,
}

/// The commands of one check: the command itself, or EXEC's queue.
pub(crate) struct Query<'a> {
    /// The command being admitted (EXEC for a transaction).
    pub spec: &'static CommandSpec,
    /// Its own arguments, or the queued commands for EXEC.
    pub commands: Vec<(&'static CommandSpec, &'a [Bytes])>,
    /// Whether EXEC's queue holds a write (Redis's `mstate.cmd_flags`).
    pub queued_write: bool,
}

/// Checks `query` (Redis's `getNodeByQuery`): `Ok(slot)` when this node
/// serves it (`None`: no keys), or why not. `exists` says whether a key is
/// stored (and not expired) here; it is asked only about the keys of a
/// slot being migrated or imported.
pub(crate) fn check(
    cluster: &Cluster,
    config: &ClusterConfig,
    query: &Query,
    client: ClientFlags,
    exists: &mut dyn FnMut(&[u8]) -> bool,
) -> Result<Option<u16>, Redirect> {
    let myself = cluster.myself;
    let pubsubshard = query.spec.has(flags::PUBSUB);
    let mut first: Option<&Bytes> = None;
    let (mut slot, mut node) = (0u16, None);
    let (mut migrating, mut importing, mut multiple) = (false, false, false);
    let (mut missing, mut existing) = (0usize, 0usize);
    for (spec, args) in &query.commands {
        for at in keyspecs::command_keys(spec, args) {
            let Some(key) = args.get(at) else {
                continue;
            };
            let this = super::key_slot(key);
            match first {
                None => {
                    first = Some(key);
                    slot = this;
                    let Some(owner) = cluster.slots[this as usize] else {
                        return Err(Redirect::DownUnbound);
                    };
                    node = Some(owner);
                    if owner == myself && cluster.migrating_to[this as usize].is_some() {
                        migrating = true;
                    } else if cluster.importing_from[this as usize].is_some() {
                        importing = true;
                    }
                }
                Some(k) if k != key => {
                    if this != slot {
                        return Err(Redirect::CrossSlot);
                    }
                    multiple = true;
                }
                Some(_) => {}
            }
            if (migrating || importing) && !pubsubshard {
                if exists(key) {
                    existing += 1;
                } else {
                    missing += 1;
                }
            }
        }
    }
    let Some(node) = node else {
        return Ok(None);
    };
    let writes = query.spec.has(flags::WRITE);
    if !cluster.ok {
        if pubsubshard {
            if !config.allow_pubsubshard_when_down {
                return Err(Redirect::DownState);
            }
        } else if !config.allow_reads_when_down {
            return Err(Redirect::DownState);
        } else if writes {
            return Err(Redirect::DownReadOnly);
        }
    }
    if (migrating || importing) && query.spec.has(flags::MIGRATES_KEYS) {
        return Ok(Some(slot));
    }
    if migrating && missing > 0 {
        if existing > 0 {
            return Err(Redirect::Unstable);
        }
        let to = cluster.migrating_to[slot as usize].expect("the slot is migrating");
        return Err(Redirect::Ask(slot, to));
    }
    if importing && (client.asking || query.spec.has(flags::ASKING)) {
        if multiple && missing > 0 {
            return Err(Redirect::Unstable);
        }
        return Ok(Some(slot));
    }
    let me = cluster.me();
    let write = writes || (query.spec.has(flags::EXEC) && query.queued_write);
    if (client.readonly || pubsubshard) && !write && me.is_slave() && me.slaveof == Some(node) {
        return Ok(Some(slot));
    }
    if node != myself {
        return Err(Redirect::Moved(slot, node));
    }
    Ok(Some(slot))
}

/// The reply a client gets for `redirect` (`clusterRedirectClient`).
pub(crate) fn reply(cluster: &Cluster, config: &ClusterConfig, redirect: Redirect) -> Reply {
    match redirect {
        Redirect::CrossSlot => errors::err(errors::CROSSSLOT),
        Redirect::Unstable => errors::err(errors::TRYAGAIN),
        Redirect::DownState => errors::err(errors::CLUSTERDOWN),
        Redirect::DownReadOnly => errors::err(errors::CLUSTERDOWN_READ_ONLY),
        Redirect::DownUnbound => errors::err(errors::CLUSTERDOWN_UNBOUND),
        Redirect::Moved(slot, node) | Redirect::Ask(slot, node) => {
            let n = cluster.node(node);
            let kind = if matches!(redirect, Redirect::Ask(..)) {
                "ASK"
            } else {
                "MOVED"
            };
            Reply::Error(format!("{kind} {slot} {}:{}", preferred_endpoint(config, n), n.port).into())
        }
    }
}

/// The address clients are sent to (`getPreferredEndpoint`).
pub(crate) fn preferred_endpoint<'a>(config: &ClusterConfig, node: &'a super::Node) -> &'a str {
    match config.preferred_endpoint_type.as_str() {
        "hostname" if node.hostname.is_empty() => "?",
        "hostname" => &node.hostname,
        "unknown-endpoint" => "",
        _ => &node.ip,
    }
}
