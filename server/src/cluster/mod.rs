//! Cluster mode (`cluster-enabled yes`): this node's view of the cluster —
//! the nodes it knows, who serves each of the 16384 hash slots, the slots
//! being migrated or imported, the epochs and the cluster's state — as
//! Redis 7.0.15's `clusterState` keeps it. The nodes file is [`conf`]'s,
//! the slot check admission makes is [`route`]'s, the hash slots are
//! [`slot`]'s; the CLUSTER commands are `cmd/cluster.rs`.
//!
//! The cluster's state (`ok` / `fail`) is computed as Redis's
//! `clusterUpdateState`, on the server clock: from the server's cron and
//! after every command that changes the slots or the nodes.

pub(crate) mod bus;
pub(crate) mod conf;
pub(crate) mod failover;
pub(crate) mod route;
pub(crate) mod slot;

use std::path::PathBuf;

pub(crate) use slot::{key_slot, SLOTS};

/// Node flags, with Redis's values (`CLUSTER_NODE_*`): the nodes file and
/// the bus carry them as these bits.
pub(crate) mod flag {
    pub(crate) const MASTER: u16 = 1;
    pub(crate) const SLAVE: u16 = 2;
    pub(crate) const PFAIL: u16 = 4;
    pub(crate) const FAIL: u16 = 8;
    pub(crate) const MYSELF: u16 = 16;
    pub(crate) const HANDSHAKE: u16 = 32;
    pub(crate) const NOADDR: u16 = 64;
    /// A MEET (not a PING) goes first on the next link to it.
    pub(crate) const MEET: u16 = 128;
    /// A primary that had replicas (or failed over one that had): when
    /// it has none that work, a replica may migrate to it. Not shown.
    pub(crate) const MIGRATE_TO: u16 = 256;
    pub(crate) const NOFAILOVER: u16 = 512;

    /// The flags CLUSTER NODES names, in its order.
    pub(crate) const NAMES: &[(u16, &str)] = &[
        (MYSELF, "myself"),
        (MASTER, "master"),
        (SLAVE, "slave"),
        (PFAIL, "fail?"),
        (FAIL, "fail"),
        (HANDSHAKE, "handshake"),
        (NOADDR, "noaddr"),
        (NOFAILOVER, "nofailover"),
    ];
}

/// Length of a node's name: 40 hex digits (`CLUSTER_NAMELEN`).
pub(crate) const NAME_LEN: usize = 40;

/// The bus port is the client port plus this, unless `cluster-port` says
/// otherwise (`CLUSTER_PORT_INCR`).
pub(crate) const PORT_INCR: u16 = 10000;

/// A primary that finds itself in the `fail` state waits this long after
/// its first state check before turning `ok` (`CLUSTER_WRITABLE_DELAY`):
/// the cluster gets a chance to reconfigure it after a restart.
const WRITABLE_DELAY_MS: u64 = 2000;

/// The bounds of the wait before a primary that was in a minority turns
/// `ok` again (`CLUSTER_MIN_REJOIN_DELAY`, `CLUSTER_MAX_REJOIN_DELAY`):
/// `cluster-node-timeout` within them.
const MIN_REJOIN_DELAY_MS: u64 = 500;
const MAX_REJOIN_DELAY_MS: u64 = 5000;

/// Bus message types CLUSTER INFO counts, in Redis's order
/// (`CLUSTERMSG_TYPE_*`).
pub(crate) const MESSAGE_TYPES: &[&str] = &[
    "ping",
    "pong",
    "meet",
    "fail",
    "publish",
    "auth-req",
    "auth-ack",
    "update",
    "mfstart",
    "module",
    "publishshard",
];

/// A stable handle on a node of [`Cluster::nodes`]: the slot tables hold
/// handles, so forgetting a node never shifts what the others point to.
pub(crate) type NodeRef = u32;

/// One node as this node knows it (Redis's `clusterNode`).
#[derive(Clone, Debug)]
pub(crate) struct Node {
    pub handle: NodeRef,
    /// 40 lowercase hex digits.
    pub name: String,
    pub flags: u16,
    /// Empty until learned: a node learns its own address from its peers.
    pub ip: String,
    pub hostname: String,
    pub port: u16,
    /// The plaintext port of a TLS cluster's node (0 otherwise).
    pub pport: u16,
    pub cport: u16,
    pub config_epoch: u64,
    pub slaveof: Option<NodeRef>,
    /// Unix ms of the last PING sent (0: none awaiting its PONG) and of the
    /// last PONG received, as CLUSTER NODES shows them.
    pub ping_sent: u64,
    pub pong_received: u64,
    /// The bus link this node opened to it ([`bus`]; CLUSTER NODES
    /// `connected`) and the one it opened to this node.
    pub link: Option<bus::LinkId>,
    pub inbound_link: Option<bus::LinkId>,
    /// Unix ms: when the node became known (a handshake times out from
    /// it), when anything last arrived from it, when it was marked FAIL.
    pub ctime: u64,
    pub data_received: u64,
    pub fail_time: u64,
    /// Primaries that reported it unreachable, and when (Redis's
    /// `fail_reports`): enough of them turn PFAIL into FAIL.
    pub fail_reports: Vec<(NodeRef, u64)>,
    /// The replication offset its last header carried (a replica's rank
    /// and CLUSTER SLOTS/SHARDS come from it).
    pub repl_offset: u64,
    /// Server clock of this node's last vote for a replica of this
    /// primary: one vote per primary per two node timeouts.
    pub voted_time: u64,
    /// Server clock since which this primary has been orphaned (no working
    /// replica, though it is meant to have one), 0 when it is not: a
    /// replica migrates to it only after a while, so that its own replicas
    /// have time to say they follow it after a failover.
    pub orphaned_since: u64,
}

impl Node {
    fn new(handle: NodeRef, name: String, flags: u16) -> Node {
        Node {
            handle,
            name,
            flags,
            ip: String::new(),
            hostname: String::new(),
            port: 0,
            pport: 0,
            cport: 0,
            config_epoch: 0,
            slaveof: None,
            ping_sent: 0,
            pong_received: 0,
            link: None,
            inbound_link: None,
            ctime: 0,
            data_received: 0,
            fail_time: 0,
            fail_reports: Vec::new(),
            repl_offset: 0,
            voted_time: 0,
            orphaned_since: 0,
        }
    }

    pub(crate) fn is_master(&self) -> bool {
        self.flags & flag::MASTER != 0
    }

    pub(crate) fn is_slave(&self) -> bool {
        self.flags & flag::SLAVE != 0
    }

    pub(crate) fn failed(&self) -> bool {
        self.flags & flag::FAIL != 0
    }

    pub(crate) fn timed_out(&self) -> bool {
        self.flags & flag::PFAIL != 0
    }
}

/// A random node name: 40 hex digits.
pub(crate) fn random_name() -> String {
    (0..NAME_LEN)
        .map(|_| std::char::from_digit(fastrand::u32(..16), 16).unwrap_or('0'))
        .collect()
}

/// Whether `name` is a node name Redis accepts (`verifyClusterNodeId`).
pub(crate) fn valid_name(name: &[u8]) -> bool {
    name.len() == NAME_LEN && name.iter().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b))
}

/// Deletes database 0's keys in `slots`, the slots this primary lost while
/// it kept others (Redis's `delKeysInSlot`); returns how many. As in Redis
/// 7.0.15 the deletions are neither propagated nor notified: they are not
/// the dataset changing but the node giving up what the cluster no longer
/// routes to it.
pub(crate) fn delete_keys_in_slots(db: &mut crate::store::Db, slots: &[u16], now: u64) -> usize {
    let mut lost = vec![false; SLOTS];
    for &s in slots {
        lost[usize::from(s)] = true;
    }
    let keys: Vec<Vec<u8>> = db
        .all_keys(now)
        .map(|(key, _, _)| key)
        .filter(|key| lost[usize::from(key_slot(key))])
        .map(<[u8]>::to_vec)
        .collect();
    for key in &keys {
        db.server_del(key);
    }
    keys.len()
}

/// This node's view of the cluster (Redis's `clusterState`).
#[derive(Debug)]
pub(crate) struct Cluster {
    /// Every known node, myself included, in the order they became known.
    pub nodes: Vec<Node>,
    next_handle: NodeRef,
    pub myself: NodeRef,
    /// Who serves each slot.
    pub slots: Box<[Option<NodeRef>]>,
    /// Slots this node is migrating, to whom (SETSLOT MIGRATING).
    pub migrating_to: Box<[Option<NodeRef>]>,
    /// Slots this node is importing, from whom (SETSLOT IMPORTING).
    pub importing_from: Box<[Option<NodeRef>]>,
    pub current_epoch: u64,
    pub last_vote_epoch: u64,
    /// `cluster_state:ok`; a node starts in `fail`.
    pub ok: bool,
    /// Primaries serving at least one slot (`cluster_size`), as of the
    /// last state check (1 until the first one that gets that far, as Redis).
    pub size: usize,
    /// Clock of the first state check (the writable delay counts from it).
    first_check_ms: Option<u64>,
    /// Clock of the last state check that found this node in a minority.
    among_minority_ms: u64,
    /// Bus messages sent and received, per [`MESSAGE_TYPES`] entry.
    pub sent: [u64; MESSAGE_TYPES.len()],
    pub received: [u64; MESSAGE_TYPES.len()],
    /// Where the nodes file is (`dir` joined with `cluster-config-file`).
    pub path: PathBuf,
    /// Holds the nodes file's lock while the server runs: two nodes must
    /// never share one file (Redis's `clusterLockConfig`).
    lock: Option<std::fs::File>,
    /// The bus's links and what they wait to send ([`bus`]).
    pub(crate) links: std::collections::HashMap<bus::LinkId, bus::Link>,
    next_link: bus::LinkId,
    /// Links the bus task must open (the I/O side takes them).
    pub(crate) to_connect: Vec<(NodeRef, std::net::SocketAddr)>,
    /// Forgotten nodes and until when they stay forgotten (Redis's
    /// `nodes_black_list`): gossip does not bring them back meanwhile.
    pub(crate) blacklist: Vec<(String, u64)>,
    /// Cron ticks so far (every tenth pings a random node).
    pub(crate) iteration: u64,
    /// Something changed that the nodes file must get.
    pub(crate) dirty_config: bool,
    /// Messages from the bus for this node's subscribers (PUBLISH, SPUBLISH).
    pub(crate) published: Vec<bus::Published>,
    /// Slots another primary took from this one with a greater config
    /// epoch while this node stayed a primary: the engine deletes what
    /// keys it still has there (Redis's dirty slots), since no one will
    /// send clients here for them again.
    pub(crate) dirty_slots: Vec<u16>,
    /// This node's replication, refreshed by the engine before the bus
    /// runs (headers carry the offset; elections read its age).
    pub(crate) repl: failover::ReplView,
    /// This replica's election ([`failover`]).
    pub(crate) election: failover::Election,
    /// The manual failover under way, on either side ([`failover`]).
    pub(crate) manual: failover::Manual,
    /// Writes are held for a replica's manual failover: the engine paused
    /// them and must lift that pause once the failover ends.
    pub(crate) mf_paused: bool,
    /// Nodes this node is partitioned from on the bus (a test's
    /// `COORDIS.CLUSTER PARTITION`): nothing is sent to them and what they
    /// send is dropped unread, so both sides stop hearing each other and
    /// fail each other on the clock, as across a network split.
    pub(crate) cut_off: Vec<String>,
}

impl Cluster {
    /// A fresh cluster of one: myself, a primary with a random name.
    pub(crate) fn fresh(path: PathBuf) -> Cluster {
        let mut cluster = Cluster::empty(path);
        let me = cluster.add_node(random_name(), flag::MYSELF | flag::MASTER);
        cluster.myself = me;
        cluster
    }

    /// No nodes at all (the nodes file's reader adds them).
    pub(crate) fn empty(path: PathBuf) -> Cluster {
        Cluster {
            nodes: Vec::new(),
            next_handle: 1,
            myself: 0,
            slots: vec![None; SLOTS].into_boxed_slice(),
            migrating_to: vec![None; SLOTS].into_boxed_slice(),
            importing_from: vec![None; SLOTS].into_boxed_slice(),
            current_epoch: 0,
            last_vote_epoch: 0,
            ok: false,
            size: 1,
            first_check_ms: None,
            among_minority_ms: 0,
            sent: [0; MESSAGE_TYPES.len()],
            received: [0; MESSAGE_TYPES.len()],
            path,
            lock: None,
            links: Default::default(),
            next_link: 1,
            to_connect: Vec::new(),
            blacklist: Vec::new(),
            iteration: 0,
            dirty_config: false,
            published: Vec::new(),
            dirty_slots: Vec::new(),
            repl: Default::default(),
            election: Default::default(),
            manual: Default::default(),
            mf_paused: false,
            cut_off: Vec::new(),
        }
    }

    /// Adds a node; returns its handle.
    pub(crate) fn add_node(&mut self, name: String, flags: u16) -> NodeRef {
        let handle = self.next_handle;
        self.next_handle += 1;
        self.nodes.push(Node::new(handle, name, flags));
        handle
    }

    pub(crate) fn node(&self, handle: NodeRef) -> &Node {
        self.nodes
            .iter()
            .find(|n| n.handle == handle)
            .expect("a slot table points only at known nodes")
    }

    pub(crate) fn node_mut(&mut self, handle: NodeRef) -> &mut Node {
        self.nodes
            .iter_mut()
            .find(|n| n.handle == handle)
            .expect("a slot table points only at known nodes")
    }

    pub(crate) fn me(&self) -> &Node {
        self.node(self.myself)
    }

    pub(crate) fn me_mut(&mut self) -> &mut Node {
        let me = self.myself;
        self.node_mut(me)
    }

    /// The node named `name` (Redis's `clusterLookupNode`).
    pub(crate) fn lookup(&self, name: &[u8]) -> Option<NodeRef> {
        if !valid_name(name) {
            return None;
        }
        self.nodes.iter().find(|n| n.name.as_bytes() == name).map(|n| n.handle)
    }

    /// Slots `node` serves.
    /// The nodes that serve at least one slot (each once), and whether a
    /// slot is unassigned.
    pub(crate) fn slot_owners(&self) -> (Vec<NodeRef>, bool) {
        let mut owners: Vec<NodeRef> = Vec::new();
        let mut uncovered = false;
        let mut last = None;
        for &slot in self.slots.iter() {
            match slot {
                None => uncovered = true,
                // Slots come in runs of one owner: only a change is looked up.
                Some(n) if last != Some(n) => {
                    last = Some(n);
                    if !owners.contains(&n) {
                        owners.push(n);
                    }
                }
                Some(_) => {}
            }
        }
        (owners, uncovered)
    }

    pub(crate) fn num_slots(&self, node: NodeRef) -> usize {
        self.slots.iter().filter(|s| **s == Some(node)).count()
    }

    /// The replicas of `node`, in the order they became known.
    pub(crate) fn replicas(&self, node: NodeRef) -> Vec<NodeRef> {
        self.nodes
            .iter()
            .filter(|n| n.slaveof == Some(node))
            .map(|n| n.handle)
            .collect()
    }

    /// `node` replicates `master` now (`None`: no one), keeping the
    /// MIGRATE_TO mark as Redis's `clusterNodeAddSlave` and
    /// `clusterNodeRemoveSlave` do: a primary that gets a replica is a
    /// target for replica migration until its last replica leaves it.
    pub(crate) fn set_replica_of(&mut self, node: NodeRef, master: Option<NodeRef>) {
        let old = self.node(node).slaveof;
        if old == master {
            return;
        }
        self.node_mut(node).slaveof = master;
        if let Some(old) = old {
            self.left_by_replica(old);
        }
        if let Some(m) = master {
            self.node_mut(m).flags |= flag::MIGRATE_TO;
        }
    }

    /// A replica left `master`: with none left, it is no target for a
    /// replica migration.
    fn left_by_replica(&mut self, master: NodeRef) {
        if self.replicas(master).is_empty() {
            if let Some(m) = self.nodes.iter_mut().find(|n| n.handle == master) {
                m.flags &= !flag::MIGRATE_TO;
            }
        }
    }

    /// After slots went to `node`: a primary that had none becomes a target
    /// for replica migration when some primary has replicas (Redis's
    /// `clusterNodeSetSlotBit`), so a primary added to a cluster with
    /// replicas gets one.
    pub(crate) fn note_slots_gained(&mut self, node: NodeRef, had_slots: bool) {
        if had_slots || self.num_slots(node) == 0 {
            return;
        }
        let replicated = self
            .nodes
            .iter()
            .any(|n| n.is_slave() && n.slaveof.is_some_and(|m| self.node(m).is_master()));
        if replicated {
            self.node_mut(node).flags |= flag::MIGRATE_TO;
        }
    }

    /// Forgets `node`: its slots become unassigned, open slots pointing at
    /// it close, its replicas lose their primary (Redis's `clusterDelNode`).
    pub(crate) fn remove_node(&mut self, node: NodeRef) {
        let links: Vec<bus::LinkId> = self
            .links
            .iter()
            .filter(|(_, l)| l.node == Some(node))
            .map(|(id, _)| *id)
            .collect();
        for id in links {
            self.free_link(id);
        }
        for n in &mut self.nodes {
            n.fail_reports.retain(|(r, _)| *r != node);
        }
        for table in [&mut self.slots, &mut self.migrating_to, &mut self.importing_from] {
            for s in table.iter_mut() {
                if *s == Some(node) {
                    *s = None;
                }
            }
        }
        for n in &mut self.nodes {
            if n.slaveof == Some(node) {
                n.slaveof = None;
            }
        }
        let master = self.node(node).slaveof;
        self.nodes.retain(|n| n.handle != node);
        if let Some(m) = master {
            self.left_by_replica(m);
        }
    }

    /// Sets this node's ports (Redis's `deriveAnnouncedPorts`): the
    /// announced ones when set, otherwise the ones listened on.
    pub(crate) fn set_my_ports(&mut self, config: &crate::config::ClusterConfig, port: u16) {
        let cport = if config.port != 0 {
            config.port
        } else {
            port.saturating_add(PORT_INCR)
        };
        let me = self.me_mut();
        me.port = if config.announce_port != 0 {
            config.announce_port
        } else {
            port
        };
        me.pport = 0;
        me.cport = if config.announce_bus_port != 0 {
            config.announce_bus_port
        } else {
            cport
        };
        // An address learned or loaded stays unless one is announced
        // (Redis's `clusterUpdateMyselfIp`).
        if !config.announce_ip.is_empty() {
            me.ip = config.announce_ip.clone();
        }
        me.hostname = config.announce_hostname.clone();
    }

    /// Closes every migrating and importing slot.
    pub(crate) fn close_all_slots(&mut self) {
        self.migrating_to.fill(None);
        self.importing_from.fill(None);
    }

    /// The highest config epoch of any node (`clusterGetMaxEpoch`).
    pub(crate) fn max_epoch(&self) -> u64 {
        self.nodes
            .iter()
            .map(|n| n.config_epoch)
            .max()
            .unwrap_or(0)
            .max(self.current_epoch)
    }

    /// Gives this node a new config epoch without agreement from the others
    /// when it does not have the greatest one, or shares it (Redis's
    /// `clusterBumpConfigEpochWithoutConsensus`): `true` if it was bumped.
    pub(crate) fn bump_epoch_without_consensus(&mut self) -> bool {
        let max = self.max_epoch();
        let mine = self.me().config_epoch;
        if mine == 0 || mine != max {
            self.current_epoch += 1;
            let epoch = self.current_epoch;
            self.me_mut().config_epoch = epoch;
            tracing::warn!("New configEpoch set to {epoch}");
            true
        } else {
            false
        }
    }

    /// The epoch CLUSTER INFO and NODES show for `node`: a replica shows
    /// its primary's.
    pub(crate) fn shown_epoch(&self, node: &Node) -> u64 {
        match node.slaveof {
            Some(master) if node.is_slave() => self.node(master).config_epoch,
            _ => node.config_epoch,
        }
    }

    /// Recomputes `ok` and `size` (Redis's `clusterUpdateState`) at `now`.
    pub(crate) fn update_state(&mut self, config: &crate::config::ClusterConfig, now: u64) {
        let first = *self.first_check_ms.get_or_insert(now);
        if self.me().is_master() && !self.ok && now.saturating_sub(first) < WRITABLE_DELAY_MS {
            return;
        }
        // One pass over the slots, without hashing or a node lookup per
        // slot: this runs on every bus cron (10 times a second per node),
        // and a per-slot map kept six nodes in one process busy.
        let (owners, uncovered) = self.slot_owners();
        let mut ok = true;
        if config.require_full_coverage {
            ok = !uncovered && owners.iter().all(|&n| !self.node(n).failed());
        }
        let serving: Vec<&Node> = self
            .nodes
            .iter()
            .filter(|n| n.is_master() && owners.contains(&n.handle))
            .collect();
        self.size = serving.len();
        let reachable = serving
            .iter()
            .filter(|n| n.flags & (flag::FAIL | flag::PFAIL) == 0)
            .count();
        if reachable < self.size / 2 + 1 {
            ok = false;
            self.among_minority_ms = now;
        }
        if ok != self.ok {
            let rejoin = config.node_timeout.clamp(MIN_REJOIN_DELAY_MS, MAX_REJOIN_DELAY_MS);
            if ok && self.me().is_master() && now.saturating_sub(self.among_minority_ms) < rejoin {
                return;
            }
            tracing::warn!("Cluster state changed: {}", if ok { "ok" } else { "fail" });
            self.ok = ok;
        }
    }

    /// Takes the nodes file's lock (`flock`, as Redis): `Err` with the
    /// reason when another process holds it.
    pub(crate) fn lock_file(&mut self) -> std::io::Result<()> {
        use std::os::fd::AsRawFd;
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(&self.path)?;
        // SAFETY: flock on a descriptor this function owns.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == -1 {
            return Err(std::io::Error::last_os_error());
        }
        self.lock = Some(file);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_owners_are_each_serving_node_once() {
        let mut c = Cluster::fresh(PathBuf::from("nodes.conf"));
        let me = c.myself;
        let other = c.add_node(random_name(), flag::MASTER);
        assert_eq!(c.slot_owners(), (vec![], true));
        for s in 0..SLOTS {
            // Interleaved runs: an owner comes back after another's.
            c.slots[s] = Some(if (s / 100) % 2 == 0 { me } else { other });
        }
        assert_eq!(c.slot_owners(), (vec![me, other], false));
        c.slots[SLOTS - 1] = None;
        assert_eq!(c.slot_owners(), (vec![me, other], true));
    }

    #[test]
    fn the_state_is_ok_only_with_every_slot_on_a_live_node() {
        let config = crate::Config::default().cluster;
        let mut c = Cluster::fresh(PathBuf::from("nodes.conf"));
        let other = c.add_node(random_name(), flag::MASTER);
        let me = c.myself;
        for s in 0..SLOTS {
            c.slots[s] = Some(if s < SLOTS / 2 { me } else { other });
        }
        // Past the writable delay from the first check.
        c.update_state(&config, 1);
        let later = 1 + WRITABLE_DELAY_MS + config.node_timeout;
        c.update_state(&config, later);
        assert!(c.ok);
        assert_eq!(c.size, 2);
        c.node_mut(other).flags |= flag::FAIL;
        c.update_state(&config, later + 1);
        assert!(!c.ok, "a FAIL primary's slots are uncovered");
        c.node_mut(other).flags &= !flag::FAIL;
        c.slots[0] = None;
        c.update_state(&config, later + 2 * config.node_timeout);
        assert!(!c.ok, "an unassigned slot");
    }
}
