//! The cluster bus's protocol and its state machine, as Redis 7.0.15
//! speaks it (`clusterMsg` in cluster.h, `clusterProcessPacket`,
//! `clusterSendPing`, `clusterCron` in cluster.c): the binary messages
//! (a 2256-byte header, then gossip entries of 104 bytes for PING, PONG
//! and MEET, a node name for FAIL, channel and message for PUBLISH, a
//! slot bitmap for UPDATE), the handshake that learns a node's name, epochs
//! and their collisions, slot ownership from the header's bitmap, failure
//! detection (PFAIL after `cluster-node-timeout`, FAIL once a majority of
//! primaries report it). No I/O here: messages are queued on a link's
//! sender and links to open are listed for `net::bus`, which moves bytes.

use std::net::SocketAddr;

use bytes::Bytes;
use tokio::sync::mpsc::UnboundedSender;

use super::{flag, Cluster, NodeRef, NAME_LEN, SLOTS};
use crate::config::ClusterConfig;

/// A link's identity in [`Cluster::links`].
pub(crate) type LinkId = u64;

/// One TCP connection of the bus.
#[derive(Debug)]
pub(crate) struct Link {
    /// The node at the other end: known from the start for a link this node
    /// opened, from the first message for an accepted one.
    pub node: Option<NodeRef>,
    pub inbound: bool,
    /// Unix ms it was created (CLUSTER LINKS `create-time`).
    pub ctime: u64,
    /// Where the bytes go (the link's writer task).
    pub tx: UnboundedSender<Vec<u8>>,
}

/// A message another node published, for this node's subscribers.
#[derive(Debug)]
pub(crate) struct Published {
    pub channel: Bytes,
    pub message: Bytes,
    /// SPUBLISH's (shard channel subscribers), not PUBLISH's.
    pub sharded: bool,
}

/// Message types (`CLUSTERMSG_TYPE_*`).
pub(crate) mod kind {
    pub(crate) const PING: u16 = 0;
    pub(crate) const PONG: u16 = 1;
    pub(crate) const MEET: u16 = 2;
    pub(crate) const FAIL: u16 = 3;
    pub(crate) const PUBLISH: u16 = 4;
    pub(crate) const AUTH_REQUEST: u16 = 5;
    pub(crate) const AUTH_ACK: u16 = 6;
    pub(crate) const UPDATE: u16 = 7;
    pub(crate) const MFSTART: u16 = 8;
    /// A PUBLISH for the nodes of the sender's shard (SPUBLISH).
    pub(crate) const PUBLISHSHARD: u16 = 10;
    /// Types counted in CLUSTER INFO (`CLUSTERMSG_TYPE_COUNT`).
    pub(crate) const COUNT: u16 = 11;
}

/// Bits of the header's first `mflags` byte (`CLUSTERMSG_FLAG0_*`).
pub(crate) mod mflag {
    /// The sender is a primary paused for a manual failover: the offset
    /// in its header is final.
    pub(crate) const PAUSED: u8 = 1;
    /// Vote even though the primary is up (a manual failover).
    pub(crate) const FORCEACK: u8 = 2;
}

/// The message signature, "Redis Cluster message bus".
pub(crate) const SIGNATURE: &[u8; 4] = b"RCmb";
/// `CLUSTER_PROTO_VER`.
const VERSION: u16 = 1;
/// Bytes of the header (`CLUSTERMSG_MIN_LEN`).
pub(crate) const HEADER_LEN: usize = 2256;
/// Bytes of one gossip entry (`clusterMsgDataGossip`).
const GOSSIP_LEN: usize = 104;
/// `NET_IP_STR_LEN`: room for an address in the messages.
const IP_LEN: usize = 46;
/// Bytes of the slot bitmap.
const BITMAP_LEN: usize = SLOTS / 8;
/// Field offsets in the header (cluster.h's static asserts).
mod at {
    pub(super) const TOTLEN: usize = 4;
    pub(super) const VER: usize = 8;
    pub(super) const PORT: usize = 10;
    pub(super) const TYPE: usize = 12;
    pub(super) const COUNT: usize = 14;
    pub(super) const CURRENT_EPOCH: usize = 16;
    pub(super) const CONFIG_EPOCH: usize = 24;
    pub(super) const OFFSET: usize = 32;
    pub(super) const SENDER: usize = 40;
    pub(super) const MYSLOTS: usize = 80;
    pub(super) const SLAVEOF: usize = 2128;
    pub(super) const MYIP: usize = 2168;
    pub(super) const PPORT: usize = 2246;
    pub(super) const CPORT: usize = 2248;
    pub(super) const FLAGS: usize = 2250;
    pub(super) const STATE: usize = 2252;
    pub(super) const MFLAGS: usize = 2253;
    pub(super) const DATA: usize = 2256;
}

/// A forgotten node stays out of gossip this long (`CLUSTER_BLACKLIST_TTL`).
const BLACKLIST_TTL_MS: u64 = 60_000;
/// Failure reports are valid for this many node timeouts.
const FAIL_REPORT_VALIDITY_MULT: u64 = 2;
/// A FAIL flag on a primary with slots is dropped when it comes back after
/// this many node timeouts.
const FAIL_UNDO_TIME_MULT: u64 = 2;
/// The cron's period: it runs 10 times a second, as Redis's.
pub(crate) const CRON_MS: u64 = 100;

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_be_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

fn put16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

fn put32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_be_bytes());
}

fn put64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_be_bytes());
}

/// A NUL-padded text field.
fn text_at(b: &[u8], at: usize, len: usize) -> String {
    let field = &b[at..at + len];
    let end = field.iter().position(|&c| c == 0).unwrap_or(len);
    String::from_utf8_lossy(&field[..end]).into_owned()
}

fn put_text(b: &mut [u8], at: usize, len: usize, text: &str) {
    let bytes = text.as_bytes();
    let n = bytes.len().min(len - 1);
    b[at..at + n].copy_from_slice(&bytes[..n]);
}

fn has_slot(bitmap: &[u8], slot: usize) -> bool {
    bitmap[slot / 8] & (1 << (slot & 7)) != 0
}

/// A decoded message header (the fields the state machine reads).
#[derive(Debug)]
pub(crate) struct Header<'a> {
    pub kind: u16,
    pub port: u16,
    pub count: u16,
    pub current_epoch: u64,
    pub config_epoch: u64,
    pub offset: u64,
    pub sender: &'a [u8],
    pub myslots: &'a [u8],
    pub slaveof: Option<&'a [u8]>,
    pub myip: String,
    pub pport: u16,
    pub cport: u16,
    pub flags: u16,
    pub mflags: u8,
    pub data: &'a [u8],
}

/// Reads a whole message (its `totlen` bytes); `None` for a message Redis
/// would drop (bad signature, version or length).
pub(crate) fn decode(msg: &[u8]) -> Option<Header<'_>> {
    if msg.len() < 8 || &msg[..4] != SIGNATURE || (u32_at(msg, at::TOTLEN) as usize) != msg.len() {
        return None;
    }
    if msg.len() < HEADER_LEN || u16_at(msg, at::VER) != VERSION {
        return None;
    }
    let kind = u16_at(msg, at::TYPE);
    let count = u16_at(msg, at::COUNT);
    let data = &msg[at::DATA..];
    let needed = match kind {
        kind::PING | kind::PONG | kind::MEET => usize::from(count) * GOSSIP_LEN,
        kind::FAIL => NAME_LEN,
        kind::PUBLISH | kind::PUBLISHSHARD => 8,
        kind::UPDATE => 8 + NAME_LEN + BITMAP_LEN,
        _ => 0,
    };
    if data.len() < needed {
        return None;
    }
    let slaveof = &msg[at::SLAVEOF..at::SLAVEOF + NAME_LEN];
    Some(Header {
        kind,
        port: u16_at(msg, at::PORT),
        count,
        current_epoch: u64_at(msg, at::CURRENT_EPOCH),
        config_epoch: u64_at(msg, at::CONFIG_EPOCH),
        offset: u64_at(msg, at::OFFSET),
        sender: &msg[at::SENDER..at::SENDER + NAME_LEN],
        myslots: &msg[at::MYSLOTS..at::MYSLOTS + BITMAP_LEN],
        slaveof: slaveof.iter().any(|&b| b != 0).then_some(slaveof),
        myip: text_at(msg, at::MYIP, IP_LEN),
        pport: u16_at(msg, at::PPORT),
        cport: u16_at(msg, at::CPORT),
        flags: u16_at(msg, at::FLAGS),
        mflags: msg[at::MFLAGS],
        data,
    })
}

/// The length a message announces in its first 8 bytes, if they are a
/// message's start.
pub(crate) fn announced_len(start: &[u8; 8]) -> Option<usize> {
    (&start[..4] == SIGNATURE).then(|| u32::from_be_bytes(start[4..8].try_into().expect("4 bytes")) as usize)
}

impl Cluster {
    /// The header every message starts with (`clusterBuildMessageHdr`).
    fn header(&self, config: &ClusterConfig, kind: u16, extra: usize) -> Vec<u8> {
        let me = self.me();
        let master = match me.slaveof {
            Some(m) if me.is_slave() => Some(self.node(m)),
            _ => None,
        };
        let mut b = vec![0u8; HEADER_LEN + extra];
        b[..4].copy_from_slice(SIGNATURE);
        put32(&mut b, at::TOTLEN, (HEADER_LEN + extra) as u32);
        put16(&mut b, at::VER, VERSION);
        put16(&mut b, at::PORT, me.port);
        put16(&mut b, at::TYPE, kind);
        put64(&mut b, at::CURRENT_EPOCH, self.current_epoch);
        put64(
            &mut b,
            at::CONFIG_EPOCH,
            master.map_or(me.config_epoch, |m| m.config_epoch),
        );
        put64(&mut b, at::OFFSET, self.repl.offset);
        put_text(&mut b, at::SENDER, NAME_LEN + 1, &me.name);
        let owner = master.map_or(self.myself, |m| m.handle);
        for slot in 0..SLOTS {
            if self.slots[slot] == Some(owner) {
                b[at::MYSLOTS + slot / 8] |= 1 << (slot & 7);
            }
        }
        if let Some(m) = master {
            put_text(&mut b, at::SLAVEOF, NAME_LEN + 1, &m.name);
        }
        if !config.announce_ip.is_empty() {
            put_text(&mut b, at::MYIP, IP_LEN, &config.announce_ip);
        }
        put16(&mut b, at::PPORT, me.pport);
        put16(&mut b, at::CPORT, me.cport);
        put16(&mut b, at::FLAGS, me.flags);
        b[at::STATE] = if self.ok { 0 } else { 1 };
        if me.is_master() && self.manual.end != 0 {
            b[at::MFLAGS] |= mflag::PAUSED;
        }
        b
    }

    /// A PING, PONG or MEET with its gossip (`clusterSendPing`): about a
    /// tenth of the nodes (at least 3) chosen at random, then every node
    /// in PFAIL.
    fn ping_message(&self, config: &ClusterConfig, kind: u16) -> Vec<u8> {
        let candidates: Vec<&super::Node> = self
            .nodes
            .iter()
            .filter(|n| {
                n.handle != self.myself
                    && n.flags & (flag::PFAIL | flag::HANDSHAKE | flag::NOADDR) == 0
                    && !(n.link.is_none() && self.num_slots(n.handle) == 0)
            })
            .collect();
        let freshnodes = self.nodes.len().saturating_sub(2);
        let wanted = (self.nodes.len() / 10).max(3).min(freshnodes);
        let mut picked: Vec<&super::Node> = Vec::new();
        let mut pool = candidates;
        while picked.len() < wanted && !pool.is_empty() {
            picked.push(pool.swap_remove(fastrand::usize(..pool.len())));
        }
        picked.extend(self.nodes.iter().filter(|n| n.flags & flag::PFAIL != 0));
        let mut b = self.header(config, kind, picked.len() * GOSSIP_LEN);
        put16(&mut b, at::COUNT, picked.len() as u16);
        for (i, n) in picked.iter().enumerate() {
            let g = at::DATA + i * GOSSIP_LEN;
            put_text(&mut b, g, NAME_LEN + 1, &n.name);
            put32(&mut b, g + 40, (n.ping_sent / 1000) as u32);
            put32(&mut b, g + 44, (n.pong_received / 1000) as u32);
            put_text(&mut b, g + 48, IP_LEN, &n.ip);
            put16(&mut b, g + 94, n.port);
            put16(&mut b, g + 96, n.cport);
            put16(&mut b, g + 98, n.flags);
            put16(&mut b, g + 100, n.pport);
        }
        b
    }

    fn count_sent(&mut self, kind: u16) {
        if kind < kind::COUNT {
            self.sent[kind as usize] += 1;
        }
    }

    /// Whether `node` is on the other side of a test's partition.
    fn is_cut_off(&self, node: NodeRef) -> bool {
        !self.cut_off.is_empty() && self.cut_off.contains(&self.node(node).name)
    }

    /// Queues `msg` on `link` (nothing goes to a node cut off from this one).
    fn send(&mut self, link: LinkId, msg: Vec<u8>) {
        let kind = u16_at(&msg, at::TYPE);
        if let Some(l) = self.links.get(&link) {
            if l.node.is_some_and(|n| self.is_cut_off(n)) {
                return;
            }
            if l.tx.send(msg).is_ok() {
                self.count_sent(kind);
            }
        }
    }

    /// Sends a PING/PONG/MEET on `link`; a PING to a node notes when.
    fn send_ping(&mut self, config: &ClusterConfig, link: LinkId, kind: u16, now: u64) {
        let msg = self.ping_message(config, kind);
        if kind == kind::PING {
            if let Some(n) = self.links.get(&link).and_then(|l| l.node) {
                self.node_mut(n).ping_sent = now;
            }
        }
        self.send(link, msg);
    }

    /// Sends `msg` on every link to a node out of its handshake
    /// (`clusterBroadcastMessage`).
    fn broadcast(&mut self, msg: &[u8]) {
        let links: Vec<LinkId> = self
            .nodes
            .iter()
            .filter(|n| n.handle != self.myself && n.flags & flag::HANDSHAKE == 0)
            .filter_map(|n| n.link)
            .collect();
        for l in links {
            self.send(l, msg.to_vec());
        }
    }

    /// A PONG to every node, or to the other replicas of my primary
    /// (`clusterBroadcastPong`): a new role or offset is known at once.
    pub(crate) fn broadcast_pong(&mut self, config: &ClusterConfig, local_replicas: bool, now: u64) {
        let my_master = self.me().slaveof;
        let links: Vec<LinkId> = self
            .nodes
            .iter()
            .filter(|n| n.handle != self.myself && n.flags & flag::HANDSHAKE == 0)
            .filter(|n| !local_replicas || (n.is_slave() && n.slaveof.is_some() && n.slaveof == my_master))
            .filter_map(|n| n.link)
            .collect();
        for l in links {
            self.send_ping(config, l, kind::PONG, now);
        }
    }

    /// Asks every node for its vote (`clusterRequestFailoverAuth`); a
    /// manual failover asks them to vote though the primary is up.
    pub(crate) fn request_votes(&mut self, config: &ClusterConfig) {
        let mut msg = self.header(config, kind::AUTH_REQUEST, 0);
        if self.manual.end != 0 {
            msg[at::MFLAGS] |= mflag::FORCEACK;
        }
        self.broadcast(&msg);
    }

    /// A message with only the header to `node` (a vote, MFSTART).
    pub(crate) fn send_bare(&mut self, config: &ClusterConfig, node: NodeRef, kind: u16) {
        if let Some(l) = self.node(node).link {
            let msg = self.header(config, kind, 0);
            self.send(l, msg);
        }
    }

    /// Tells every node that `node` failed (`clusterSendFail`).
    fn broadcast_fail(&mut self, config: &ClusterConfig, node: NodeRef) {
        let mut msg = self.header(config, kind::FAIL, NAME_LEN);
        let name = self.node(node).name.clone();
        put_text(&mut msg, at::DATA, NAME_LEN + 1, &name);
        self.broadcast(&msg);
    }

    /// A published message over the bus (`clusterPropagatePublish`):
    /// PUBLISH to every node, or with `sharded` (SPUBLISH) PUBLISHSHARD to
    /// the other nodes of this node's shard, its primary and replicas
    /// (`clusterGetNodesServingMySlots`). Each delivers it to its own
    /// subscribers.
    pub(crate) fn propagate_publish(&mut self, config: &ClusterConfig, channel: &[u8], message: &[u8], sharded: bool) {
        let kind = if sharded { kind::PUBLISHSHARD } else { kind::PUBLISH };
        let mut msg = self.header(config, kind, 8 + channel.len() + message.len());
        put32(&mut msg, at::DATA, channel.len() as u32);
        put32(&mut msg, at::DATA + 4, message.len() as u32);
        msg[at::DATA + 8..at::DATA + 8 + channel.len()].copy_from_slice(channel);
        msg[at::DATA + 8 + channel.len()..].copy_from_slice(message);
        if !sharded {
            self.broadcast(&msg);
            return;
        }
        let me = self.me();
        let primary = match me.slaveof {
            Some(m) if me.is_slave() => m,
            _ => self.myself,
        };
        let links: Vec<LinkId> = self
            .nodes
            .iter()
            .filter(|n| n.handle == primary || n.slaveof == Some(primary))
            .filter(|n| n.flags & (flag::MYSELF | flag::HANDSHAKE) == 0)
            .filter_map(|n| n.link)
            .collect();
        for l in links {
            self.send(l, msg.clone());
        }
    }

    /// Tells `link`'s node that `owner` serves slots it claims (`clusterSendUpdate`).
    fn send_update(&mut self, config: &ClusterConfig, link: LinkId, owner: NodeRef) {
        let mut msg = self.header(config, kind::UPDATE, 8 + NAME_LEN + BITMAP_LEN);
        let n = self.node(owner);
        put64(&mut msg, at::DATA, n.config_epoch);
        put_text(&mut msg, at::DATA + 8, NAME_LEN + 1, &n.name);
        for slot in 0..SLOTS {
            if self.slots[slot] == Some(owner) {
                msg[at::DATA + 8 + NAME_LEN + slot / 8] |= 1 << (slot & 7);
            }
        }
        self.send(link, msg);
    }

    /// A new link: one this node opens to `node` (`connect` set), or one
    /// accepted (`node` learnt from its messages).
    pub(crate) fn add_link(
        &mut self,
        node: Option<NodeRef>,
        inbound: bool,
        tx: UnboundedSender<Vec<u8>>,
        now: u64,
    ) -> LinkId {
        let id = self.next_link;
        self.next_link += 1;
        self.links.insert(
            id,
            Link {
                node,
                inbound,
                ctime: now,
                tx,
            },
        );
        if let (Some(n), false) = (node, inbound) {
            self.node_mut(n).link = Some(id);
        }
        id
    }

    /// A link's connection ended (or failed to open).
    pub(crate) fn free_link(&mut self, id: LinkId) {
        if let Some(link) = self.links.remove(&id) {
            if let Some(n) = link.node {
                if let Some(node) = self.nodes.iter_mut().find(|x| x.handle == n) {
                    if node.link == Some(id) {
                        node.link = None;
                    }
                    if node.inbound_link == Some(id) {
                        node.inbound_link = None;
                    }
                }
            }
        }
    }

    /// A link this node opens: its first MEET or PING is queued at once
    /// (`clusterNodeCronHandleReconnect`), so a node that cannot be reached
    /// has a PING pending and turns PFAIL after the node timeout.
    pub(crate) fn link_created(&mut self, config: &ClusterConfig, id: LinkId, now: u64) {
        let Some(n) = self.links.get(&id).and_then(|l| l.node) else {
            return;
        };
        let node = self.node(n);
        let (meet, old_ping) = (node.flags & flag::MEET != 0, node.ping_sent);
        self.send_ping(config, id, if meet { kind::MEET } else { kind::PING }, now);
        let node = self.node_mut(n);
        if old_ping != 0 {
            node.ping_sent = old_ping;
        }
        node.flags &= !flag::MEET;
    }

    /// CLUSTER MEET (`clusterStartHandshake`): a node in handshake with a
    /// random name until its first PONG tells its real one. `false` when a
    /// handshake with that address is already under way.
    pub(crate) fn start_handshake(&mut self, ip: &str, port: u16, cport: u16, now: u64) -> bool {
        let pending = self
            .nodes
            .iter()
            .any(|n| n.flags & flag::HANDSHAKE != 0 && n.ip == ip && n.port == port && n.cport == cport);
        if pending {
            return false;
        }
        let n = self.add_node(super::random_name(), flag::HANDSHAKE | flag::MEET);
        let node = self.node_mut(n);
        node.ip = ip.to_string();
        node.port = port;
        node.cport = cport;
        node.ctime = now;
        true
    }

    /// Forgets `node` for a minute: gossip does not bring it back (CLUSTER FORGET).
    pub(crate) fn blacklist_add(&mut self, name: &str, now: u64) {
        self.blacklist.retain(|(n, _)| n != name);
        self.blacklist.push((name.to_string(), now + BLACKLIST_TTL_MS));
    }

    fn blacklisted(&mut self, name: &[u8], now: u64) -> bool {
        self.blacklist.retain(|(_, until)| *until > now);
        self.blacklist.iter().any(|(n, _)| n.as_bytes() == name)
    }

    /// The failure reports about `node` still valid at `now`.
    fn failure_reports(&mut self, config: &ClusterConfig, node: NodeRef, now: u64) -> usize {
        let validity = config.node_timeout * FAIL_REPORT_VALIDITY_MULT;
        let n = self.node_mut(node);
        n.fail_reports.retain(|(_, at)| now.saturating_sub(*at) <= validity);
        n.fail_reports.len()
    }

    /// Count of failure reports about `node` (COUNT-FAILURE-REPORTS).
    pub(crate) fn count_failure_reports(&mut self, config: &ClusterConfig, node: NodeRef, now: u64) -> usize {
        self.failure_reports(config, node, now)
    }

    /// PFAIL becomes FAIL once enough primaries agree (`markNodeAsFailingIfNeeded`).
    fn mark_failing_if_needed(&mut self, config: &ClusterConfig, node: NodeRef, now: u64) {
        let quorum = self.size / 2 + 1;
        let n = self.node(node);
        if n.flags & flag::PFAIL == 0 || n.failed() {
            return;
        }
        let mut failures = self.failure_reports(config, node, now);
        if self.me().is_master() {
            failures += 1;
        }
        if failures < quorum {
            return;
        }
        tracing::info!("Marking node {} as failing (quorum reached).", self.node(node).name);
        let n = self.node_mut(node);
        n.flags &= !flag::PFAIL;
        n.flags |= flag::FAIL;
        n.fail_time = now;
        if self.me().is_master() {
            self.broadcast_fail(config, node);
        }
        self.update_state(config, now);
        self.dirty_config = true;
    }

    /// A FAIL flag goes when the node is reachable again (`clearNodeFailureIfNeeded`).
    fn clear_failure_if_needed(&mut self, config: &ClusterConfig, node: NodeRef, now: u64) {
        let slots = self.num_slots(node);
        let n = self.node_mut(node);
        if !n.failed() {
            return;
        }
        let undo = config.node_timeout * FAIL_UNDO_TIME_MULT;
        if n.is_slave() || slots == 0 || now.saturating_sub(n.fail_time) > undo {
            tracing::info!("Clear FAIL state for node {}: it is reachable again.", n.name);
            n.flags &= !flag::FAIL;
            self.dirty_config = true;
        }
    }

    /// Adopts `sender`'s claim on the slots of `bitmap` where its epoch wins
    /// (`clusterUpdateSlotsConfigWith`).
    fn update_slots_with(&mut self, config: &ClusterConfig, sender: NodeRef, epoch: u64, bitmap: &[u8]) {
        if sender == self.myself {
            return;
        }
        let me = self.me();
        let curmaster = if me.is_master() { Some(self.myself) } else { me.slaveof };
        let had_slots = self.num_slots(sender) > 0;
        let (mut new_master, mut sender_slots, mut migrated_ours) = (false, 0usize, 0usize);
        // Slots taken from this node: if it stays a primary, its keys
        // there must go (Redis's dirty slots).
        let mut lost = Vec::new();
        for slot in 0..SLOTS {
            if !has_slot(bitmap, slot) {
                continue;
            }
            sender_slots += 1;
            if self.slots[slot] == Some(sender) || self.importing_from[slot].is_some() {
                continue;
            }
            let wins = match self.slots[slot] {
                None => true,
                Some(owner) => self.node(owner).config_epoch < epoch,
            };
            if wins {
                if curmaster.is_some() && self.slots[slot] == curmaster {
                    new_master = true;
                    migrated_ours += 1;
                }
                if self.slots[slot] == Some(self.myself) {
                    lost.push(slot as u16);
                    tracing::warn!(
                        "Slot {slot} is now served by {} (a greater config epoch)",
                        self.node(sender).name
                    );
                }
                self.slots[slot] = Some(sender);
                self.dirty_config = true;
            }
        }
        self.note_slots_gained(sender, had_slots);
        // The shard's new primary: a primary left without slots follows
        // it, and so does a replica whose primary lost its last slot.
        let curmaster_empty = curmaster.is_some_and(|m| self.num_slots(m) == 0);
        if new_master && curmaster_empty && (config.allow_replica_migration || sender_slots == migrated_ours) {
            tracing::warn!(
                "Configuration change detected. Reconfiguring myself as a replica of {}",
                self.node(sender).name
            );
            self.set_master(sender);
        } else if let Some(grand) = self
            .me()
            .slaveof
            .and_then(|m| self.node(m).slaveof.filter(|_| self.node(m).is_slave()))
            .filter(|g| *g != self.myself)
        {
            tracing::warn!(
                "I'm a sub-replica! Reconfiguring myself as a replica of grandmaster {}",
                self.node(grand).name
            );
            self.set_master(grand);
        } else {
            self.dirty_slots.extend(lost);
        }
    }

    /// Two primaries with one config epoch: the one with the greater name
    /// takes a new epoch (`clusterHandleConfigEpochCollision`).
    fn handle_epoch_collision(&mut self, sender: NodeRef) {
        let s = self.node(sender);
        let me = self.me();
        if s.config_epoch != me.config_epoch || !s.is_master() || !me.is_master() || s.name <= me.name {
            return;
        }
        self.current_epoch += 1;
        let epoch = self.current_epoch;
        self.me_mut().config_epoch = epoch;
        self.dirty_config = true;
        tracing::info!(
            "WARNING: configEpoch collision with node {}. configEpoch set to {epoch}",
            self.node(sender).name
        );
    }

    /// The gossip entries of a PING, PONG or MEET (`clusterProcessGossipSection`).
    fn process_gossip(&mut self, config: &ClusterConfig, h: &Header, sender: Option<NodeRef>, now: u64) {
        for i in 0..usize::from(h.count) {
            let g = &h.data[i * GOSSIP_LEN..(i + 1) * GOSSIP_LEN];
            let name = &g[..NAME_LEN];
            let flags = u16_at(g, 98);
            let ip = text_at(g, 48, IP_LEN);
            let (port, cport, pport) = (u16_at(g, 94), u16_at(g, 96), u16_at(g, 100));
            let failing = flags & (flag::FAIL | flag::PFAIL) != 0;
            if let Some(node) = self.lookup(name) {
                if let Some(s) = sender.filter(|s| self.node(*s).is_master() && node != self.myself) {
                    let n = self.node_mut(node);
                    if failing {
                        match n.fail_reports.iter_mut().find(|(r, _)| *r == s) {
                            Some(report) => report.1 = now,
                            None => n.fail_reports.push((s, now)),
                        }
                        self.mark_failing_if_needed(config, node, now);
                    } else {
                        n.fail_reports.retain(|(r, _)| *r != s);
                    }
                }
                let n = self.node_mut(node);
                if !failing && n.ping_sent == 0 && n.fail_reports.is_empty() {
                    let pong = u64::from(u32_at(g, 44)) * 1000;
                    if pong <= now + 500 && pong > n.pong_received {
                        n.pong_received = pong;
                    }
                }
                let n = self.node(node);
                let moved = n.ip != ip || n.port != port || n.cport != cport;
                if n.flags & (flag::FAIL | flag::PFAIL) != 0 && flags & flag::NOADDR == 0 && !failing && moved {
                    if let Some(l) = n.link {
                        self.free_link(l);
                    }
                    let n = self.node_mut(node);
                    n.ip = ip;
                    n.port = port;
                    n.pport = pport;
                    n.cport = cport;
                    n.flags &= !flag::NOADDR;
                }
            } else if sender.is_some() && flags & flag::NOADDR == 0 && !self.blacklisted(name, now) {
                let n = self.add_node(String::from_utf8_lossy(name).into_owned(), flags & !flag::MYSELF);
                let node = self.node_mut(n);
                node.ip = ip;
                node.port = port;
                node.pport = pport;
                node.cport = cport;
                node.ctime = now;
                self.dirty_config = true;
            }
        }
    }

    /// One message from `link` (`clusterProcessPacket`); `local` and
    /// `peer` are the link's addresses (a node learns its own address from
    /// the first MEET, and a MEET's sender's from the connection).
    pub(crate) fn process(
        &mut self,
        config: &ClusterConfig,
        link: LinkId,
        msg: &[u8],
        local: SocketAddr,
        peer: SocketAddr,
        now: u64,
    ) {
        let Some(h) = decode(msg) else {
            return;
        };
        if !self.cut_off.is_empty() && self.cut_off.iter().any(|name| name.as_bytes() == h.sender) {
            // Across a test's partition: never heard.
            return;
        }
        if h.kind < kind::COUNT {
            self.received[h.kind as usize] += 1;
        }
        let Some(l) = self.links.get(&link) else {
            return;
        };
        let (link_node, inbound) = (l.node, l.inbound);
        let sender = match link_node {
            Some(n) if self.node(n).flags & flag::HANDSHAKE == 0 => Some(n),
            _ => self.lookup(h.sender),
        };
        if let Some(s) = sender {
            if inbound {
                let old = self.node(s).inbound_link;
                if old != Some(link) {
                    if let Some(old) = old {
                        self.free_link(old);
                    }
                    self.node_mut(s).inbound_link = Some(link);
                    if let Some(l) = self.links.get_mut(&link) {
                        l.node = Some(s);
                    }
                }
            }
            self.node_mut(s).data_received = now;
        }
        let known = sender.filter(|s| self.node(*s).flags & flag::HANDSHAKE == 0);
        if let Some(s) = known {
            if h.current_epoch > self.current_epoch {
                self.current_epoch = h.current_epoch;
                self.dirty_config = true;
            }
            if h.config_epoch > self.node(s).config_epoch {
                self.node_mut(s).config_epoch = h.config_epoch;
                self.dirty_config = true;
            }
            self.node_mut(s).repl_offset = h.offset;
            let me = self.me();
            if self.manual.end != 0
                && me.is_slave()
                && me.slaveof == Some(s)
                && h.mflags & mflag::PAUSED != 0
                && self.manual.master_offset == -1
            {
                self.manual.master_offset = h.offset as i64;
                tracing::warn!(
                    "Received replication offset for paused master manual failover: {}",
                    h.offset
                );
                self.failover_cron(config, now);
            }
        }
        let pingish = matches!(h.kind, kind::PING | kind::PONG | kind::MEET);
        if matches!(h.kind, kind::PING | kind::MEET) {
            if (h.kind == kind::MEET || self.me().ip.is_empty()) && config.announce_ip.is_empty() {
                let ip = local.ip().to_string();
                if self.me().ip != ip {
                    tracing::info!("IP address for this node updated to {ip}");
                    self.me_mut().ip = ip;
                    self.dirty_config = true;
                }
            }
            if sender.is_none() && h.kind == kind::MEET {
                let n = self.add_node(super::random_name(), flag::HANDSHAKE);
                let node = self.node_mut(n);
                node.ip = if h.myip.is_empty() {
                    peer.ip().to_string()
                } else {
                    h.myip.clone()
                };
                node.port = h.port;
                node.pport = h.pport;
                node.cport = h.cport;
                node.ctime = now;
                self.process_gossip(config, &h, None, now);
                self.dirty_config = true;
            }
            self.send_ping(config, link, kind::PONG, now);
        }
        if pingish {
            if let Some(n) = link_node.filter(|_| !inbound) {
                if self.node(n).flags & flag::HANDSHAKE != 0 {
                    if sender.is_some() {
                        // Already known under its real name: this handshake was a duplicate.
                        self.remove_node(n);
                        return;
                    }
                    let node = self.node_mut(n);
                    node.name = String::from_utf8_lossy(h.sender).into_owned();
                    node.flags &= !flag::HANDSHAKE;
                    node.flags |= h.flags & (flag::MASTER | flag::SLAVE);
                    tracing::info!("Handshake with node {} completed.", node.name);
                    self.dirty_config = true;
                } else if self.node(n).name.as_bytes() != h.sender {
                    tracing::info!("PONG contains mismatching sender ID: the node changed its name");
                    let node = self.node_mut(n);
                    node.flags |= flag::NOADDR;
                    node.ip.clear();
                    node.port = 0;
                    node.cport = 0;
                    self.free_link(link);
                    self.dirty_config = true;
                    return;
                }
            }
            if let Some(s) = known.filter(|_| h.kind == kind::PING && inbound) {
                let ip = if h.myip.is_empty() {
                    peer.ip().to_string()
                } else {
                    h.myip.clone()
                };
                let n = self.node(s);
                if n.ip != ip || n.port != h.port || n.cport != h.cport {
                    if let Some(l) = n.link {
                        self.free_link(l);
                    }
                    let n = self.node_mut(s);
                    n.ip = ip;
                    n.port = h.port;
                    n.pport = h.pport;
                    n.cport = h.cport;
                    n.flags &= !flag::NOADDR;
                    self.dirty_config = true;
                }
            }
            if let Some(n) = link_node.filter(|_| !inbound && h.kind == kind::PONG) {
                let node = self.node_mut(n);
                node.pong_received = now;
                node.ping_sent = 0;
                if node.timed_out() {
                    node.flags &= !flag::PFAIL;
                    self.dirty_config = true;
                } else if node.failed() {
                    self.clear_failure_if_needed(config, n, now);
                }
            }
            let Some(s) = self
                .lookup(h.sender)
                .filter(|s| self.node(*s).flags & flag::HANDSHAKE == 0)
            else {
                return;
            };
            // The sender's role.
            match h.slaveof {
                None => {
                    self.set_node_as_master(s);
                }
                Some(master) => {
                    let m = self.lookup(master);
                    let n = self.node_mut(s);
                    let mut changed = false;
                    if n.is_master() {
                        n.flags &= !(flag::MASTER | flag::MIGRATE_TO);
                        n.flags |= flag::SLAVE;
                        changed = true;
                        // `clusterDelNodeSlots`: its slots are unassigned
                        // until their new owner claims them.
                        for slot in self.slots.iter_mut().filter(|o| **o == Some(s)) {
                            *slot = None;
                        }
                    }
                    if m.is_some() && self.node(s).slaveof != m {
                        self.set_replica_of(s, m);
                        changed = true;
                    }
                    self.dirty_config |= changed;
                }
            }
            // The sender's slots.
            let sender_master = if self.node(s).is_master() {
                Some(s)
            } else {
                self.node(s).slaveof
            };
            let dirty = sender_master
                .is_some_and(|m| (0..SLOTS).any(|slot| has_slot(h.myslots, slot) != (self.slots[slot] == Some(m))));
            if self.node(s).is_master() && dirty {
                self.update_slots_with(config, s, h.config_epoch, h.myslots);
            }
            if dirty {
                let stale = (0..SLOTS).find_map(|slot| {
                    let owner = self.slots[slot]?;
                    (has_slot(h.myslots, slot) && owner != s && self.node(owner).config_epoch > h.config_epoch)
                        .then_some(owner)
                });
                if let Some(owner) = stale {
                    self.send_update(config, link, owner);
                }
            }
            self.handle_epoch_collision(s);
            self.process_gossip(config, &h, Some(s), now);
        } else if h.kind == kind::FAIL {
            if known.is_none() {
                return;
            }
            if let Some(failing) = self.lookup(&h.data[..NAME_LEN]) {
                let n = self.node_mut(failing);
                if n.flags & (flag::FAIL | flag::MYSELF) == 0 {
                    tracing::info!("FAIL message received about {}", n.name);
                    n.flags |= flag::FAIL;
                    n.flags &= !flag::PFAIL;
                    n.fail_time = now;
                    self.dirty_config = true;
                }
            }
        } else if h.kind == kind::PUBLISH || h.kind == kind::PUBLISHSHARD {
            if known.is_none() {
                return;
            }
            let clen = u32_at(h.data, 0) as usize;
            let mlen = u32_at(h.data, 4) as usize;
            if let (Some(channel), Some(message)) = (h.data.get(8..8 + clen), h.data.get(8 + clen..8 + clen + mlen)) {
                self.published.push(Published {
                    channel: Bytes::copy_from_slice(channel),
                    message: Bytes::copy_from_slice(message),
                    sharded: h.kind == kind::PUBLISHSHARD,
                });
            }
        } else if h.kind == kind::AUTH_REQUEST {
            let Some(s) = known else {
                return;
            };
            if self.vote_if_needed(config, s, &h, now) {
                self.send_bare(config, s, kind::AUTH_ACK);
            }
        } else if h.kind == kind::AUTH_ACK {
            let Some(s) = known else {
                return;
            };
            if self.node(s).is_master() && self.num_slots(s) > 0 && h.current_epoch >= self.election.epoch {
                self.election.count += 1;
                self.handle_replica_failover(config, now);
            }
        } else if h.kind == kind::MFSTART {
            let Some(s) = known.filter(|s| self.node(*s).slaveof == Some(self.myself)) else {
                return;
            };
            self.reset_manual_failover();
            self.manual.end = now + super::failover::MF_TIMEOUT_MS;
            self.manual.replica = Some(s);
            tracing::warn!("Manual failover requested by replica {}.", self.node(s).name);
            self.send_ping(config, link, kind::PING, now);
        } else if h.kind == kind::UPDATE {
            if known.is_none() {
                return;
            }
            let epoch = u64_at(h.data, 0);
            let Some(n) = self.lookup(&h.data[8..8 + NAME_LEN]) else {
                return;
            };
            if self.node(n).config_epoch >= epoch {
                return;
            }
            self.set_node_as_master(n);
            self.node_mut(n).config_epoch = epoch;
            let bitmap = h.data[8 + NAME_LEN..8 + NAME_LEN + BITMAP_LEN].to_vec();
            self.update_slots_with(config, n, epoch, &bitmap);
            self.dirty_config = true;
        }
    }

    /// The bus's periodic work (`clusterCron`, every [`CRON_MS`]): links to
    /// open, handshakes that timed out, PINGs, PFAIL for silent nodes.
    pub(crate) fn cron(&mut self, config: &ClusterConfig, now: u64) {
        self.iteration += 1;
        let timeout = config.node_timeout;
        let handshake_timeout = timeout.max(1000);
        let handles: Vec<NodeRef> = self.nodes.iter().map(|n| n.handle).collect();
        for h in &handles {
            let Some(n) = self.nodes.iter().find(|n| n.handle == *h) else {
                continue;
            };
            if n.handle == self.myself || n.flags & flag::NOADDR != 0 {
                continue;
            }
            if n.flags & flag::HANDSHAKE != 0 && now.saturating_sub(n.ctime) > handshake_timeout {
                tracing::info!("Handshake with {}:{} timed out", n.ip, n.port);
                self.remove_node(*h);
                continue;
            }
            if n.link.is_none() {
                let addr = format!("{}:{}", n.ip, n.cport).parse::<SocketAddr>();
                if let Ok(addr) = addr {
                    // The I/O side opens it and calls `add_link` with its sender.
                    self.to_connect.push((*h, addr));
                }
            }
        }
        if self.iteration.is_multiple_of(10) {
            // The node with the oldest PONG among five random ones.
            let mut best: Option<(NodeRef, u64)> = None;
            for _ in 0..5 {
                let n = &self.nodes[fastrand::usize(..self.nodes.len())];
                if n.link.is_none() || n.ping_sent != 0 || n.flags & (flag::MYSELF | flag::HANDSHAKE) != 0 {
                    continue;
                }
                if best.is_none_or(|(_, p)| n.pong_received < p) {
                    best = Some((n.handle, n.pong_received));
                }
            }
            if let Some((n, _)) = best {
                if let Some(l) = self.node(n).link {
                    self.send_ping(config, l, kind::PING, now);
                }
            }
        }
        let mut changed = false;
        for h in handles {
            let Some(n) = self.nodes.iter().find(|n| n.handle == h) else {
                continue;
            };
            if n.flags & (flag::MYSELF | flag::NOADDR | flag::HANDSHAKE) != 0 {
                continue;
            }
            let ping_delay = now.saturating_sub(n.ping_sent);
            let data_delay = now.saturating_sub(n.data_received);
            if let Some(l) = n.link {
                let age = self.links.get(&l).map_or(0, |l| now.saturating_sub(l.ctime));
                if age > timeout && n.ping_sent != 0 && ping_delay > timeout / 2 && data_delay > timeout / 2 {
                    self.free_link(l);
                }
            }
            let n = self.node(h);
            if let Some(l) = n.link {
                if n.ping_sent == 0 && now.saturating_sub(n.pong_received) > timeout / 2 {
                    self.send_ping(config, l, kind::PING, now);
                    continue;
                }
            }
            let n = self.node(h);
            if n.ping_sent == 0 {
                continue;
            }
            if ping_delay.min(data_delay) > timeout && n.flags & (flag::PFAIL | flag::FAIL) == 0 {
                tracing::info!("*** NODE {} possibly failing", n.name);
                self.node_mut(h).flags |= flag::PFAIL;
                changed = true;
            }
        }
        if changed {
            self.dirty_config = true;
        }
        self.update_state(config, now);
    }
}
