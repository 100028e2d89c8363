//! What a standalone Redis 7.0.15 without modules answers to the cluster
//! and module commands, so clients that probe for them get Redis's replies:
//! every CLUSTER subcommand (and READONLY, READWRITE, ASKING) says cluster
//! support is disabled, after its own arity check; MODULE LIST is empty;
//! MODULE LOAD/LOADEX/UNLOAD are refused unless `enable-module-command`
//! lets the client in, and then fail as a load failure does — coordis
//! loads no modules.

use bytes::Bytes;

use super::flags::*;
use super::{acl, CommandSpec, Ctx};
use crate::errors::{self, err};
use crate::protocol::Reply;

#[rustfmt::skip]
pub(crate) static COMMANDS: &[CommandSpec] = &[
    command!("server", "cluster", -2, 0, 0, (0, 0, 0), "A container for cluster commands", super::container, CLUSTER),
    command!("server", "module", -2, 0, 0, (0, 0, 0), "A container for module commands", super::container, MODULE),
    command!("server", "readonly", 1, LOADING | STALE | FAST, acl::CONNECTION, (0, 0, 0), "Enables read queries for a connection to a cluster replica node", cluster_disabled),
    command!("server", "readwrite", 1, LOADING | STALE | FAST, acl::CONNECTION, (0, 0, 0), "Disables read queries for a connection to a cluster replica node", cluster_disabled),
    command!("server", "asking", 1, FAST, acl::CONNECTION, (0, 0, 0), "Sent by cluster clients after an -ASK redirect", cluster_disabled),
];

#[rustfmt::skip]
static CLUSTER: &[CommandSpec] = &[
    command!("server", "cluster|addslots", -3, ADMIN | STALE | NO_ASYNC_LOADING, 0, (0, 0, 0), "Assign new hash slots to receiving node", cluster_disabled),
    command!("server", "cluster|addslotsrange", -4, ADMIN | STALE | NO_ASYNC_LOADING, 0, (0, 0, 0), "Assign new hash slots to receiving node", cluster_disabled),
    command!("server", "cluster|bumpepoch", 2, ADMIN | STALE | NO_ASYNC_LOADING, 0, (0, 0, 0), "Advance the cluster config epoch", cluster_disabled),
    command!("server", "cluster|count-failure-reports", 3, ADMIN | STALE, 0, (0, 0, 0), "Return the number of failure reports active for a given node", cluster_disabled),
    command!("server", "cluster|countkeysinslot", 3, STALE, 0, (0, 0, 0), "Return the number of local keys in the specified hash slot", cluster_disabled),
    command!("server", "cluster|delslots", -3, ADMIN | STALE | NO_ASYNC_LOADING, 0, (0, 0, 0), "Set hash slots as unbound in receiving node", cluster_disabled),
    command!("server", "cluster|delslotsrange", -4, ADMIN | STALE | NO_ASYNC_LOADING, 0, (0, 0, 0), "Set hash slots as unbound in receiving node", cluster_disabled),
    command!("server", "cluster|failover", -2, ADMIN | STALE | NO_ASYNC_LOADING, 0, (0, 0, 0), "Forces a replica to perform a manual failover of its master.", cluster_disabled),
    command!("server", "cluster|flushslots", 2, ADMIN | STALE | NO_ASYNC_LOADING, 0, (0, 0, 0), "Delete a node's own slots information", cluster_disabled),
    command!("server", "cluster|forget", 3, ADMIN | STALE | NO_ASYNC_LOADING, 0, (0, 0, 0), "Remove a node from the nodes table", cluster_disabled),
    command!("server", "cluster|getkeysinslot", 4, STALE, 0, (0, 0, 0), "Return local key names in the specified hash slot", cluster_disabled),
    command!("server", "cluster|help", 2, LOADING | STALE, 0, (0, 0, 0), "Show helpful text about the different subcommands", cluster_disabled),
    command!("server", "cluster|info", 2, STALE, 0, (0, 0, 0), "Provides info about Redis Cluster node state", cluster_disabled),
    command!("server", "cluster|keyslot", 3, STALE, 0, (0, 0, 0), "Returns the hash slot of the specified key", cluster_disabled),
    command!("server", "cluster|links", 2, STALE, 0, (0, 0, 0), "Returns a list of all TCP links to and from peer nodes in cluster", cluster_disabled),
    command!("server", "cluster|meet", -4, ADMIN | STALE | NO_ASYNC_LOADING, 0, (0, 0, 0), "Force a node cluster to handshake with another node", cluster_disabled),
    command!("server", "cluster|myid", 2, STALE, 0, (0, 0, 0), "Return the node id", cluster_disabled),
    command!("server", "cluster|nodes", 2, STALE, 0, (0, 0, 0), "Get Cluster config for the node", cluster_disabled),
    command!("server", "cluster|replicas", 3, ADMIN | STALE, 0, (0, 0, 0), "List replica nodes of the specified master node", cluster_disabled),
    command!("server", "cluster|replicate", 3, ADMIN | STALE | NO_ASYNC_LOADING, 0, (0, 0, 0), "Reconfigure a node as a replica of the specified master node", cluster_disabled),
    command!("server", "cluster|reset", -2, ADMIN | NOSCRIPT | STALE, 0, (0, 0, 0), "Reset a Redis Cluster node", cluster_disabled),
    command!("server", "cluster|saveconfig", 2, ADMIN | STALE | NO_ASYNC_LOADING, 0, (0, 0, 0), "Forces the node to save cluster state on disk", cluster_disabled),
    command!("server", "cluster|set-config-epoch", 3, ADMIN | STALE | NO_ASYNC_LOADING, 0, (0, 0, 0), "Set the configuration epoch in a new node", cluster_disabled),
    command!("server", "cluster|setslot", -4, ADMIN | STALE | NO_ASYNC_LOADING, 0, (0, 0, 0), "Bind a hash slot to a specific node", cluster_disabled),
    command!("server", "cluster|shards", 2, STALE, 0, (0, 0, 0), "Get array of cluster slots to node mappings", cluster_disabled),
    command!("server", "cluster|slaves", 3, ADMIN | STALE, 0, (0, 0, 0), "List replica nodes of the specified master node", cluster_disabled),
    command!("server", "cluster|slots", 2, STALE, 0, (0, 0, 0), "Get array of Cluster slot to node mappings", cluster_disabled),
];

#[rustfmt::skip]
static MODULE: &[CommandSpec] = &[
    command!("server", "module|help", 2, LOADING | STALE, 0, (0, 0, 0), "Show helpful text about the different subcommands", module_help),
    command!("server", "module|list", 2, ADMIN | NOSCRIPT, 0, (0, 0, 0), "List all modules loaded by the server", module_list),
    command!("server", "module|load", -3, ADMIN | NOSCRIPT | NO_ASYNC_LOADING | PROTECTED | GUARD_MODULE, 0, (0, 0, 0), "Load a module", module_load),
    command!("server", "module|loadex", -3, ADMIN | NOSCRIPT | NO_ASYNC_LOADING | PROTECTED | GUARD_MODULE, 0, (0, 0, 0), "Load a module with extended parameters", module_load),
    command!("server", "module|unload", 3, ADMIN | NOSCRIPT | NO_ASYNC_LOADING | PROTECTED | GUARD_MODULE, 0, (0, 0, 0), "Unload a module", module_load),
];

fn cluster_disabled(_ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    err(errors::CLUSTER_DISABLED)
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
