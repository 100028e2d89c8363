//! A cluster's replicas and their failovers, as Redis 7.0.15 runs them
//! (`clusterSetMaster`, `clusterHandleSlaveFailover`,
//! `clusterSendFailoverAuthIfNeeded`, the manual failover's `mf_*` state
//! in cluster.c): which primary this node follows, the election a replica
//! of a FAIL primary runs (its rank's delay, its data's age, the votes of
//! the primaries), the manual failover's handshake (MFSTART, the primary
//! pauses writes and tells its offset, the replica catches up, then is
//! elected with FORCEACK), replica migration (a replica of the primary
//! with the most replicas moves to a primary left without a working one,
//! `clusterHandleSlaveMigration`), and [`reconcile`], which makes the replication
//! links ([`crate::replica`]) follow what the cluster decided. The bus
//! messages themselves are [`super::bus`]'s.

use super::{flag, Cluster, NodeRef, SLOTS};
use crate::config::ClusterConfig;

/// A manual failover gives up after this long (`CLUSTER_MF_TIMEOUT`).
pub(crate) const MF_TIMEOUT_MS: u64 = 5000;

/// How long a primary must stay orphaned before a replica migrates to it
/// (`CLUSTER_SLAVE_MIGRATION_DELAY`): after a failover, the new primary's
/// own replicas get time to say they follow it.
const MIGRATION_DELAY_MS: u64 = 5000;

/// The shortest election (`auth_timeout` is twice the node timeout, at
/// least this).
const MIN_AUTH_TIMEOUT_MS: u64 = 2000;
/// An election starts this long after the FAIL, plus up to as much again
/// at random, so the FAIL reaches every primary first.
const ELECTION_FIXED_DELAY_MS: u64 = 500;
const ELECTION_RANDOM_DELAY_MS: u64 = 500;
/// Each replica with a better offset delays this one's election this much.
const RANK_DELAY_MS: u64 = 1000;

/// A replica's election (Redis's `failover_auth_*`).
#[derive(Debug, Default)]
pub(crate) struct Election {
    /// Server clock of the (next) vote request; 0: none planned yet.
    pub time: u64,
    /// Votes received for `epoch`.
    pub count: usize,
    /// The request went out.
    pub sent: bool,
    pub rank: u64,
    /// The epoch the votes are asked for.
    pub epoch: u64,
}

/// A manual failover under way (Redis's `mf_*`), on both sides.
#[derive(Debug)]
pub(crate) struct Manual {
    /// Server clock it gives up at; 0: none under way.
    pub end: u64,
    /// On the replica: the primary's offset is reached (or FORCE), the
    /// election may start.
    pub can_start: bool,
    /// On the primary: the replica that asked (MFSTART).
    pub replica: Option<NodeRef>,
    /// On the replica: the paused primary's offset; -1 until it is told.
    pub master_offset: i64,
}

impl Default for Manual {
    fn default() -> Manual {
        Manual {
            end: 0,
            can_start: false,
            replica: None,
            master_offset: -1,
        }
    }
}

/// What the engine tells the cluster of this node's replication before the
/// bus runs (Redis reads these from its replication state).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct ReplView {
    /// `master_repl_offset` as a primary, the applied offset as a replica.
    pub offset: u64,
    /// Ms since the primary was last heard from (link up) or since the
    /// link went down.
    pub data_age_ms: u64,
    /// `repl-ping-replica-period`, ms.
    pub ping_period_ms: u64,
}

impl Cluster {
    /// This node becomes a replica of `master` (Redis's `clusterSetMaster`;
    /// the link follows at the next [`reconcile`]).
    pub(crate) fn set_master(&mut self, master: NodeRef) {
        let me = self.me_mut();
        if me.is_master() {
            me.flags &= !(flag::MASTER | flag::MIGRATE_TO);
            me.flags |= flag::SLAVE;
            self.close_all_slots();
        }
        self.set_replica_of(self.myself, Some(master));
        self.reset_manual_failover();
        self.dirty_config = true;
    }

    /// `node` is a primary now (`clusterSetNodeAsMaster`).
    pub(crate) fn set_node_as_master(&mut self, node: NodeRef) {
        let n = self.node(node);
        if n.is_master() {
            return;
        }
        if n.slaveof.is_some() {
            self.set_replica_of(node, None);
            if node != self.myself {
                // It failed over a primary meant to have replicas.
                self.node_mut(node).flags |= flag::MIGRATE_TO;
            }
        }
        let n = self.node_mut(node);
        n.flags &= !flag::SLAVE;
        n.flags |= flag::MASTER;
        self.dirty_config = true;
    }

    /// Ends the manual failover (`resetManualFailover`); the primary's
    /// pause is lifted by [`reconcile`].
    pub(crate) fn reset_manual_failover(&mut self) {
        self.manual = Manual::default();
    }

    /// The number of other replicas of my primary with a better offset
    /// (`clusterGetSlaveRank`).
    fn rank(&self) -> u64 {
        let Some(master) = self.me().slaveof else {
            return 0;
        };
        let mine = self.repl.offset;
        self.replicas(master)
            .into_iter()
            .map(|r| self.node(r))
            .filter(|r| r.handle != self.myself && r.flags & flag::NOFAILOVER == 0 && r.repl_offset > mine)
            .count() as u64
    }

    /// The last part of every failover (`clusterFailoverReplaceYourMaster`):
    /// this node is the primary of its old primary's slots, and says so.
    pub(crate) fn replace_my_master(&mut self, config: &ClusterConfig, now: u64) {
        let me = self.me();
        let Some(old) = me.slaveof.filter(|_| me.is_slave()) else {
            return;
        };
        let myself = self.myself;
        self.set_node_as_master(myself);
        for slot in 0..SLOTS {
            if self.slots[slot] == Some(old) {
                self.slots[slot] = Some(myself);
            }
        }
        self.update_state(config, now);
        self.dirty_config = true;
        self.broadcast_pong(config, false, now);
        self.reset_manual_failover();
    }

    /// A vote request from `node` (`clusterSendFailoverAuthIfNeeded`):
    /// granted by a primary with slots, once per epoch and once per two
    /// node timeouts for a given failed primary.
    pub(crate) fn vote_if_needed(
        &mut self,
        config: &ClusterConfig,
        node: NodeRef,
        request: &super::bus::Header,
        now: u64,
    ) -> bool {
        let (request_epoch, claimed_epoch, claimed) = (request.current_epoch, request.config_epoch, request.myslots);
        let force_ack = request.mflags & super::bus::mflag::FORCEACK != 0;
        if self.me().is_slave() || self.num_slots(self.myself) == 0 {
            return false;
        }
        let name = self.node(node).name.clone();
        if request_epoch < self.current_epoch {
            tracing::warn!(
                "Failover auth denied to {name}: reqEpoch ({request_epoch}) < curEpoch({})",
                self.current_epoch
            );
            return false;
        }
        if self.last_vote_epoch == self.current_epoch {
            tracing::warn!(
                "Failover auth denied to {name}: already voted for epoch {}",
                self.current_epoch
            );
            return false;
        }
        let n = self.node(node);
        let Some(master) = n.slaveof.filter(|_| !n.is_master()) else {
            tracing::warn!("Failover auth denied to {name}: it is a master node or its master is unknown");
            return false;
        };
        if !self.node(master).failed() && !force_ack {
            tracing::warn!("Failover auth denied to {name}: its master is up");
            return false;
        }
        let since = now.saturating_sub(self.node(master).voted_time);
        if since < config.node_timeout * 2 {
            tracing::warn!(
                "Failover auth denied to {name}: can't vote about this master before {} milliseconds",
                config.node_timeout * 2 - since
            );
            return false;
        }
        for slot in 0..SLOTS {
            if claimed[slot / 8] & (1 << (slot & 7)) == 0 {
                continue;
            }
            if let Some(owner) = self.slots[slot] {
                let epoch = self.node(owner).config_epoch;
                if epoch > claimed_epoch {
                    tracing::warn!(
                        "Failover auth denied to {name}: slot {slot} epoch ({epoch}) > reqEpoch ({claimed_epoch})"
                    );
                    return false;
                }
            }
        }
        self.last_vote_epoch = self.current_epoch;
        self.node_mut(master).voted_time = now;
        self.dirty_config = true;
        tracing::warn!("Failover auth granted to {name} for epoch {}", self.current_epoch);
        true
    }

    /// The replica's side of the failovers, every cron and after a vote
    /// (`manualFailoverCheckTimeout`, `clusterHandleManualFailover`,
    /// `clusterHandleSlaveFailover`).
    pub(crate) fn failover_cron(&mut self, config: &ClusterConfig, now: u64) {
        if self.manual.end != 0 && self.manual.end < now {
            tracing::warn!("Manual failover timed out.");
            self.reset_manual_failover();
        }
        if !self.me().is_slave() {
            return;
        }
        let m = &mut self.manual;
        if m.end != 0 && !m.can_start && m.master_offset != -1 && m.master_offset == self.repl.offset as i64 {
            m.can_start = true;
            tracing::warn!("All master replication stream processed, manual failover can start.");
        }
        self.handle_replica_failover(config, now);
        self.replica_migration_cron(config, now);
    }

    /// Replica migration, the part of `clusterCron` that counts orphaned
    /// primaries (serving slots, meant to have replicas, none working)
    /// and the replicas of each: a replica of a primary with the most
    /// working replicas (two at least) considers moving to an orphan.
    fn replica_migration_cron(&mut self, config: &ClusterConfig, now: u64) {
        let (mut orphaned, mut max_replicas, mut mine) = (0, 0, 0);
        let my_master = self.me().slaveof;
        for n in self.nodes.iter() {
            if n.flags & (flag::MYSELF | flag::NOADDR | flag::HANDSHAKE) != 0 || !n.is_master() || n.failed() {
                continue;
            }
            let working = self.working_replicas(n.handle);
            if working == 0 && n.flags & flag::MIGRATE_TO != 0 && self.num_slots(n.handle) > 0 {
                orphaned += 1;
            }
            max_replicas = max_replicas.max(working);
            if my_master == Some(n.handle) {
                mine = working;
            }
        }
        if orphaned > 0 && max_replicas >= 2 && mine == max_replicas && config.allow_replica_migration {
            self.handle_replica_migration(config, max_replicas, now);
        }
    }

    /// Replicas of `master` not marked FAIL (`clusterCountNonFailingSlaves`).
    fn working_replicas(&self, master: NodeRef) -> usize {
        self.nodes
            .iter()
            .filter(|r| r.slaveof == Some(master) && !r.failed())
            .count()
    }

    /// `clusterHandleSlaveMigration`: this replica moves to an orphaned
    /// primary if the cluster is `ok`, its own primary keeps more than
    /// `cluster-migration-barrier` working replicas, it has the smallest
    /// name among the replicas of the primaries with `max_replicas`
    /// working ones, and the orphan has been one for
    /// [`MIGRATION_DELAY_MS`].
    fn handle_replica_migration(&mut self, config: &ClusterConfig, max_replicas: usize, now: u64) {
        let Some(my_master) = self.me().slaveof.filter(|_| self.ok) else {
            return;
        };
        let keeping = self
            .replicas(my_master)
            .into_iter()
            .filter(|r| self.node(*r).flags & (flag::FAIL | flag::PFAIL) == 0)
            .count();
        if keeping as u64 <= config.migration_barrier {
            return;
        }
        let mut candidate = self.myself;
        let mut target = None;
        let handles: Vec<NodeRef> = self.nodes.iter().map(|n| n.handle).collect();
        for h in handles {
            let n = self.node(h);
            let working = if n.is_master() { self.working_replicas(h) } else { 0 };
            let orphan = n.is_master() && !n.failed() && n.flags & flag::MIGRATE_TO != 0 && working == 0;
            if orphan {
                if target.is_none() && self.num_slots(h) > 0 {
                    target = Some(h);
                }
                let n = self.node_mut(h);
                if n.orphaned_since == 0 {
                    n.orphaned_since = now;
                }
            } else {
                self.node_mut(h).orphaned_since = 0;
            }
            if working == max_replicas {
                for r in self.replicas(h) {
                    if self.node(r).name < self.node(candidate).name {
                        candidate = r;
                    }
                }
            }
        }
        let Some(target) = target.filter(|_| candidate == self.myself) else {
            return;
        };
        if now.saturating_sub(self.node(target).orphaned_since) > MIGRATION_DELAY_MS {
            tracing::warn!("Migrating to orphaned master {}", self.node(target).name);
            self.set_master(target);
        }
    }

    /// `clusterHandleSlaveFailover`.
    pub(crate) fn handle_replica_failover(&mut self, config: &ClusterConfig, now: u64) {
        let auth_age = now.saturating_sub(self.election.time);
        let quorum = self.size / 2 + 1;
        let manual = self.manual.end != 0 && self.manual.can_start;
        let auth_timeout = (config.node_timeout * 2).max(MIN_AUTH_TIMEOUT_MS);
        let auth_retry = auth_timeout * 2;
        let me = self.me();
        let Some(master) = me.slaveof.filter(|_| me.is_slave()) else {
            return;
        };
        if (!manual && (!self.node(master).failed() || config.replica_no_failover)) || self.num_slots(master) == 0 {
            return;
        }
        let mut data_age = self.repl.data_age_ms;
        if data_age > config.node_timeout {
            data_age -= config.node_timeout;
        }
        let factor = config.replica_validity_factor;
        if factor != 0 && data_age > self.repl.ping_period_ms + config.node_timeout * factor && !manual {
            return;
        }
        if self.election.time == 0 || auth_age > auth_retry {
            self.election.time = now + ELECTION_FIXED_DELAY_MS + fastrand::u64(..ELECTION_RANDOM_DELAY_MS);
            self.election.count = 0;
            self.election.sent = false;
            self.election.rank = self.rank();
            self.election.time += self.election.rank * RANK_DELAY_MS;
            if self.manual.end != 0 {
                self.election.time = now;
                self.election.rank = 0;
            }
            tracing::warn!(
                "Start of election delayed for {} milliseconds (rank #{}, offset {}).",
                self.election.time - now,
                self.election.rank,
                self.repl.offset
            );
            self.broadcast_pong(config, true, now);
            if self.manual.end == 0 {
                return;
            }
        }
        if !self.election.sent && self.manual.end == 0 {
            let rank = self.rank();
            if rank > self.election.rank {
                let added = (rank - self.election.rank) * RANK_DELAY_MS;
                self.election.time += added;
                self.election.rank = rank;
                tracing::warn!("Replica rank updated to #{rank}, added {added} milliseconds of delay.");
            }
        }
        if now < self.election.time {
            return;
        }
        if now.saturating_sub(self.election.time) > auth_timeout {
            return;
        }
        if !self.election.sent {
            self.current_epoch += 1;
            self.election.epoch = self.current_epoch;
            tracing::warn!("Starting a failover election for epoch {}.", self.current_epoch);
            self.request_votes(config);
            self.election.sent = true;
            self.dirty_config = true;
            return;
        }
        if self.election.count >= quorum {
            tracing::warn!("Failover election won: I'm the new master.");
            if self.me().config_epoch < self.election.epoch {
                let epoch = self.election.epoch;
                self.me_mut().config_epoch = epoch;
                tracing::warn!("configEpoch set to {epoch} after successful failover");
            }
            self.replace_my_master(config, now);
        }
    }
}

/// Makes the server follow what the cluster decided (after every bus
/// message, cron and CLUSTER command): a replica's link goes to its
/// primary's client port, a node that became a primary stops replicating
/// (Redis's `replicationSetMaster` / `replicationUnsetMaster` calls in
/// cluster.c), and a primary that a replica asked for a manual failover
/// holds writes until it ends (`PAUSE_DURING_FAILOVER`).
pub(crate) fn reconcile(dbs: &mut [crate::store::Db], server: &mut crate::state::ServerState) {
    let Some(cluster) = server.cluster.as_deref_mut() else {
        return;
    };
    let me = cluster.me();
    let want_pause = me.is_master() && cluster.manual.end != 0 && cluster.manual.replica.is_some();
    let follow = match me.slaveof {
        Some(m) if me.is_slave() => {
            let n = cluster.node(m);
            (!n.ip.is_empty() && n.port != 0 && n.flags & flag::NOADDR == 0)
                .then(|| crate::replica::Primary {
                    host: n.ip.clone(),
                    port: n.port,
                })
                .ok_or(())
        }
        _ => Err(()),
    };
    let is_master = me.is_master();
    let was_paused = std::mem::replace(&mut cluster.mf_paused, want_pause);
    if want_pause && !was_paused {
        crate::blocked::hold_writes(dbs, server, crate::blocked::Hold::Failover);
    } else if !want_pause && was_paused {
        crate::blocked::release_writes(dbs, server, crate::blocked::Hold::Failover);
    }
    match follow {
        Ok(primary) => {
            if server.replica.primary.as_ref() != Some(&primary) {
                crate::cmd::replicaof::follow_server(dbs, server, primary);
            }
        }
        Err(()) if is_master && server.replica.is_replica() => {
            crate::cmd::replicaof::promote_server(dbs, server);
        }
        Err(()) => {}
    }
}

/// This node's replication as the bus reports it.
pub(crate) fn repl_view(server: &crate::state::ServerState) -> ReplView {
    let now = server.clock.now_ms();
    let r = &server.replica;
    let (offset, data_age_ms) = if r.is_replica() {
        let since = if r.link_up() { r.last_io_ms } else { r.down_since_ms };
        (r.offset.max(0) as u64, now.saturating_sub(since))
    } else {
        (server.repl.offset(), 0)
    };
    ReplView {
        offset,
        data_age_ms,
        ping_period_ms: server.config.repl.ping_period * 1000,
    }
}
