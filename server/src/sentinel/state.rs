//! What a Sentinel knows and decides: the monitored masters, their
//! replicas and the other Sentinels (Redis's `sentinelRedisInstance`s), the
//! periodic timer (`sentinelTimer`: PING, INFO, hello, SDOWN, ODOWN, the
//! vote, the failover state machine), and what each reply changes.
//!
//! Everything here runs under the one state lock and reads time from the
//! Sentinel's clock, never from the system: a test clock moved past
//! down-after-milliseconds makes the next tick mark the master down.
//! Links are asked to send; their replies come back through
//! [`State::link_event`].

use std::collections::BTreeMap;
use std::sync::{Arc, Weak};

use super::link::{self, Event, Kind, Login, ReplyTo, Request, Resp, Target};
use super::{Periods, Shared, HELLO_CHANNEL};

pub(crate) const SRI_S_DOWN: u32 = 1 << 3;
pub(crate) const SRI_O_DOWN: u32 = 1 << 4;
pub(crate) const SRI_MASTER_DOWN: u32 = 1 << 5;
pub(crate) const SRI_FAILOVER_IN_PROGRESS: u32 = 1 << 6;
pub(crate) const SRI_PROMOTED: u32 = 1 << 7;
pub(crate) const SRI_RECONF_SENT: u32 = 1 << 8;
pub(crate) const SRI_RECONF_INPROG: u32 = 1 << 9;
pub(crate) const SRI_RECONF_DONE: u32 = 1 << 10;
pub(crate) const SRI_FORCE_FAILOVER: u32 = 1 << 11;

/// Redis's `SENTINEL_MAX_DESYNC`: the random delay (ms) added to a
/// failover's start so that Sentinels do not all try at once.
const MAX_DESYNC_MS: u64 = 1000;
/// Redis's `SENTINEL_MAX_PENDING_COMMANDS`: no more periodic commands to a
/// link with this many unanswered.
const MAX_PENDING_COMMANDS: i64 = 100;
/// A replica's `slave-priority` before its INFO says otherwise (Redis's default).
const DEFAULT_REPLICA_PRIORITY: i64 = 100;
/// Redis's defaults for a monitored master.
pub(crate) const DEFAULT_DOWN_AFTER_MS: u64 = 30_000;
pub(crate) const DEFAULT_FAILOVER_TIMEOUT_MS: u64 = 180_000;
pub(crate) const DEFAULT_PARALLEL_SYNCS: u64 = 1;
pub(crate) const DEFAULT_DENY_SCRIPTS_RECONFIG: bool = true;

/// Which part of a master's group an instance is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    Master,
    Replica,
    Sentinel,
}

impl Role {
    /// The word events and flags use.
    fn word(self) -> &'static str {
        match self {
            Role::Master => "master",
            Role::Replica => "slave",
            Role::Sentinel => "sentinel",
        }
    }
}

/// The failover state machine's states (Redis's `SENTINEL_FAILOVER_STATE_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Failover {
    None,
    WaitStart,
    SelectSlave,
    SendSlaveofNoOne,
    WaitPromotion,
    ReconfSlaves,
    UpdateConfig,
}

impl Failover {
    pub(crate) fn word(self) -> &'static str {
        match self {
            Failover::None => "none",
            Failover::WaitStart => "wait_start",
            Failover::SelectSlave => "select_slave",
            Failover::SendSlaveofNoOne => "send_slaveof_noone",
            Failover::WaitPromotion => "wait_promotion",
            Failover::ReconfSlaves => "reconf_slaves",
            Failover::UpdateConfig => "update_config",
        }
    }
}

/// One link's bookkeeping (Redis's `instanceLink`), in ms on the clock.
#[derive(Debug, Default)]
pub(crate) struct Link {
    pub(crate) cmd: Option<link::Handle>,
    pub(crate) pubsub: Option<link::Handle>,
    /// Bumped whenever the handles are replaced: events from older tasks are dropped.
    pub(crate) gen: u64,
    pub(crate) disconnected: bool,
    pub(crate) pc_connected: bool,
    pub(crate) cc_conn_time: u64,
    pub(crate) pc_conn_time: u64,
    pub(crate) pc_last_activity: u64,
    pub(crate) pending: i64,
    /// When the oldest unanswered PING went out (0: none pending).
    pub(crate) act_ping_time: u64,
    pub(crate) last_ping_time: u64,
    /// Last PING answered with an acceptable reply (PONG, LOADING, MASTERDOWN).
    pub(crate) last_avail_time: u64,
    pub(crate) last_pong_time: u64,
    /// Our address as the instance sees it: what the hello message announces.
    pub(crate) local_ip: String,
}

/// A master, replica or Sentinel as this Sentinel sees it.
#[derive(Debug)]
pub(crate) struct Instance {
    pub(crate) role: Role,
    /// The master's name; `ip:port` for a replica; the run id for a Sentinel.
    pub(crate) name: String,
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) runid: Option<String>,
    pub(crate) flags: u32,
    pub(crate) link: Link,
    pub(crate) last_pub_time: u64,
    pub(crate) last_hello_time: u64,
    pub(crate) info_refresh: u64,
    pub(crate) info: Option<String>,
    /// The role its INFO last reported.
    pub(crate) role_reported: Role,
    pub(crate) role_reported_time: u64,
    pub(crate) slave_conf_change_time: u64,
    pub(crate) s_down_since: u64,
    pub(crate) o_down_since: u64,
    pub(crate) down_after: u64,
    pub(crate) master_link_down_time: u64,
    pub(crate) slave_master_host: Option<String>,
    pub(crate) slave_master_port: u16,
    pub(crate) master_link_up: bool,
    pub(crate) slave_priority: i64,
    pub(crate) slave_repl_offset: u64,
    pub(crate) replica_announced: i64,
    pub(crate) slave_reconf_sent_time: u64,
    /// A Sentinel's vote, as its IS-MASTER-DOWN-BY-ADDR reply said.
    pub(crate) leader: Option<String>,
    pub(crate) leader_epoch: u64,
    pub(crate) last_master_down_reply_time: u64,
}

impl Instance {
    pub(crate) fn new(role: Role, name: String, host: String, port: u16, down_after: u64, now: u64) -> Instance {
        Instance {
            role,
            name,
            host,
            port,
            runid: None,
            flags: 0,
            link: Link {
                disconnected: true,
                act_ping_time: now,
                last_avail_time: now,
                last_pong_time: now,
                ..Link::default()
            },
            last_pub_time: now,
            last_hello_time: now,
            info_refresh: 0,
            info: None,
            role_reported: role,
            role_reported_time: now,
            slave_conf_change_time: now,
            s_down_since: 0,
            o_down_since: 0,
            down_after,
            master_link_down_time: 0,
            slave_master_host: None,
            slave_master_port: 0,
            master_link_up: false,
            slave_priority: DEFAULT_REPLICA_PRIORITY,
            slave_repl_offset: 0,
            replica_announced: 1,
            slave_reconf_sent_time: 0,
            leader: None,
            leader_epoch: 0,
            last_master_down_reply_time: now,
        }
    }

    pub(crate) fn addr(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    /// The instance part of an event: `slave 127.0.0.1:6380 127.0.0.1 6380`.
    fn describe(&self) -> String {
        format!("{} {} {} {}", self.role.word(), self.name, self.host, self.port)
    }

    /// The flags SENTINEL MASTER shows, in Redis's order.
    pub(crate) fn flag_words(&self) -> String {
        let mut words = vec![];
        let f = self.flags;
        if f & SRI_S_DOWN != 0 {
            words.push("s_down");
        }
        if f & SRI_O_DOWN != 0 {
            words.push("o_down");
        }
        words.push(self.role.word());
        if self.link.disconnected {
            words.push("disconnected");
        }
        for (bit, word) in [
            (SRI_MASTER_DOWN, "master_down"),
            (SRI_FAILOVER_IN_PROGRESS, "failover_in_progress"),
            (SRI_PROMOTED, "promoted"),
            (SRI_RECONF_SENT, "reconf_sent"),
            (SRI_RECONF_INPROG, "reconf_inprog"),
            (SRI_RECONF_DONE, "reconf_done"),
            (SRI_FORCE_FAILOVER, "force_failover"),
        ] {
            if f & bit != 0 {
                words.push(word);
            }
        }
        words.join(",")
    }

    fn no_down_for(&self, ms: u64, now: u64) -> bool {
        let recent = self.s_down_since.max(self.o_down_since);
        recent == 0 || now.saturating_sub(recent) > ms
    }

    fn send(&mut self, args: Vec<String>, reply_to: ReplyTo) -> bool {
        if self.link.disconnected {
            return false;
        }
        let Some(cmd) = &self.link.cmd else { return false };
        if cmd.requests.send(Request { args, reply_to }).is_err() {
            return false;
        }
        self.link.pending += 1;
        true
    }

    fn send_ping(&mut self, now: u64) {
        if self.send(vec!["PING".into()], ReplyTo::Ping) {
            self.link.last_ping_time = now;
            if self.link.act_ping_time == 0 {
                self.link.act_ping_time = now;
            }
        }
    }

    /// MULTI, SLAVEOF, CONFIG REWRITE, CLIENT KILL TYPE normal and pubsub,
    /// EXEC: what Redis's `sentinelSendSlaveOf` sends (`None`: NO ONE).
    fn send_slaveof(&mut self, to: Option<(&str, u16)>) -> bool {
        let (host, port) = to.map_or(("NO".to_string(), "ONE".to_string()), |(h, p)| {
            (h.to_string(), p.to_string())
        });
        let batch: [Vec<String>; 6] = [
            vec!["MULTI".into()],
            vec!["SLAVEOF".into(), host, port],
            vec!["CONFIG".into(), "REWRITE".into()],
            vec!["CLIENT".into(), "KILL".into(), "TYPE".into(), "normal".into()],
            vec!["CLIENT".into(), "KILL".into(), "TYPE".into(), "pubsub".into()],
            vec!["EXEC".into()],
        ];
        let mut sent = true;
        for args in batch {
            sent &= self.send(args, ReplyTo::Discard);
        }
        sent
    }

    /// Closes both connections and forgets the link tasks (the next tick
    /// starts new ones).
    fn drop_links(&mut self) {
        self.link.cmd = None;
        self.link.pubsub = None;
        self.link.gen += 1;
        self.link.disconnected = true;
        self.link.pc_connected = false;
        self.link.pending = 0;
    }
}

/// A monitored master and its group.
#[derive(Debug)]
pub(crate) struct Master {
    pub(crate) inst: Instance,
    pub(crate) quorum: u32,
    pub(crate) failover_timeout: u64,
    pub(crate) parallel_syncs: u64,
    pub(crate) auth_pass: Option<String>,
    pub(crate) auth_user: Option<String>,
    pub(crate) config_epoch: u64,
    /// Whom this Sentinel voted for, and in which epoch.
    pub(crate) leader: Option<String>,
    pub(crate) leader_epoch: u64,
    pub(crate) failover_epoch: u64,
    pub(crate) failover_state: Failover,
    pub(crate) failover_state_change_time: u64,
    pub(crate) failover_start_time: u64,
    /// The replica being promoted (its key in `replicas`).
    pub(crate) promoted: Option<String>,
    pub(crate) replicas: BTreeMap<String, Instance>,
    pub(crate) sentinels: BTreeMap<String, Instance>,
}

impl Master {
    pub(crate) fn new(name: &str, host: &str, port: u16, quorum: u32, now: u64) -> Master {
        let mut inst = Instance::new(Role::Master, name.into(), host.into(), port, DEFAULT_DOWN_AFTER_MS, now);
        inst.role_reported = Role::Master;
        Master {
            inst,
            quorum,
            failover_timeout: DEFAULT_FAILOVER_TIMEOUT_MS,
            parallel_syncs: DEFAULT_PARALLEL_SYNCS,
            auth_pass: None,
            auth_user: None,
            config_epoch: 0,
            leader: None,
            leader_epoch: 0,
            failover_epoch: 0,
            failover_state: Failover::None,
            failover_state_change_time: 0,
            failover_start_time: 0,
            promoted: None,
            replicas: BTreeMap::new(),
            sentinels: BTreeMap::new(),
        }
    }

    /// The address clients should use (`sentinelGetCurrentMasterAddress`):
    /// the promoted replica's once the failover reconfigures replicas.
    pub(crate) fn current_addr(&self) -> (String, u16) {
        if self.inst.flags & SRI_FAILOVER_IN_PROGRESS != 0 && self.failover_state >= Failover::ReconfSlaves {
            if let Some(p) = self.promoted.as_ref().and_then(|k| self.replicas.get(k)) {
                return (p.host.clone(), p.port);
            }
        }
        (self.inst.host.clone(), self.inst.port)
    }

    /// `@ mymaster 127.0.0.1 6379`, the suffix of a replica's or Sentinel's event.
    fn at(&self) -> String {
        format!("@ {} {} {}", self.inst.name, self.inst.host, self.inst.port)
    }

    pub(crate) fn add_replica(&mut self, host: &str, port: u16, now: u64) -> Option<String> {
        let key = format!("{host}:{port}");
        if self.replicas.contains_key(&key) {
            return None;
        }
        let inst = Instance::new(Role::Replica, key.clone(), host.into(), port, self.inst.down_after, now);
        self.replicas.insert(key.clone(), inst);
        Some(key)
    }

    pub(crate) fn add_sentinel(&mut self, host: &str, port: u16, runid: &str, now: u64) -> String {
        let key = format!("{host}:{port}");
        let mut inst = Instance::new(
            Role::Sentinel,
            runid.into(),
            host.into(),
            port,
            self.inst.down_after,
            now,
        );
        inst.runid = Some(runid.into());
        self.sentinels.insert(key.clone(), inst);
        key
    }

    /// Whether the master is fine to reconfigure replicas against
    /// (`sentinelMasterLooksSane`).
    fn looks_sane(&self, now: u64, info_period: u64) -> bool {
        self.inst.flags & (SRI_S_DOWN | SRI_O_DOWN) == 0
            && !self.inst.link.disconnected
            && self.inst.role_reported == Role::Master
            && now.saturating_sub(self.inst.info_refresh) < info_period * 2
    }
}

/// Sentinel-wide settings and counters.
#[derive(Debug)]
pub(crate) struct Globals {
    pub(crate) myid: String,
    pub(crate) current_epoch: u64,
    pub(crate) announce_ip: Option<String>,
    pub(crate) announce_port: u16,
    pub(crate) resolve_hostnames: bool,
    pub(crate) announce_hostnames: bool,
    pub(crate) deny_scripts_reconfig: bool,
    pub(crate) sentinel_user: Option<String>,
    pub(crate) sentinel_pass: Option<String>,
    /// The port this Sentinel listens on (hello messages announce it).
    pub(crate) port: u16,
    pub(crate) simfailure_flags: u64,
    pub(crate) periods: Periods,
    /// The state changed in a way the config file records.
    pub(crate) dirty: bool,
    /// Events to publish once the lock is released: (channel, message).
    pub(crate) events: Vec<(String, String)>,
    pub(crate) shared: Weak<Shared>,
}

impl Globals {
    /// Redis's defaults, before the config file is read.
    pub(crate) fn new() -> Globals {
        Globals {
            myid: String::new(),
            current_epoch: 0,
            announce_ip: None,
            announce_port: 0,
            resolve_hostnames: false,
            announce_hostnames: false,
            deny_scripts_reconfig: DEFAULT_DENY_SCRIPTS_RECONFIG,
            sentinel_user: None,
            sentinel_pass: None,
            port: super::config::DEFAULT_PORT,
            simfailure_flags: 0,
            periods: Periods::default(),
            dirty: false,
            events: vec![],
            shared: Weak::new(),
        }
    }

    fn event(&mut self, kind: &str, msg: String) {
        tracing::warn!("{kind} {msg}");
        self.events.push((kind.to_string(), msg));
    }
}

/// Everything under the state lock.
#[derive(Debug)]
pub(crate) struct State {
    pub(crate) g: Globals,
    pub(crate) masters: BTreeMap<String, Master>,
}

impl State {
    /// One run of Redis's `sentinelTimer` at `now`.
    pub(crate) fn tick(&mut self, now: u64) {
        let names: Vec<String> = self.masters.keys().cloned().collect();
        let mut switch = None;
        for name in names {
            let Some(m) = self.masters.get_mut(&name) else { continue };
            handle_master(&mut self.g, m, now);
            let keys: Vec<String> = m.replicas.keys().cloned().collect();
            for k in keys {
                handle_other(&mut self.g, m, Role::Replica, &k, now);
            }
            let keys: Vec<String> = m.sentinels.keys().cloned().collect();
            for k in keys {
                handle_other(&mut self.g, m, Role::Sentinel, &k, now);
            }
            if m.failover_state == Failover::UpdateConfig {
                switch = Some(name);
            }
        }
        if let Some(name) = switch {
            if let Some(m) = self.masters.get_mut(&name) {
                let (host, port) = m
                    .promoted
                    .as_ref()
                    .and_then(|k| m.replicas.get(k))
                    .map_or((m.inst.host.clone(), m.inst.port), |p| (p.host.clone(), p.port));
                self.g.event(
                    "+switch-master",
                    format!("{} {} {} {} {}", m.inst.name, m.inst.host, m.inst.port, host, port),
                );
                reset_and_change_address(&mut self.g, m, &host, port, now);
            }
        }
    }

    /// A link task's event for `target` (dropped when the instance is gone
    /// or the link was replaced since).
    pub(crate) fn link_event(&mut self, target: &Target, kind: Kind, gen: u64, event: Event, now: u64) {
        if let Event::Hello(payload) = &event {
            if !payload.contains(&self.g.myid) {
                self.process_hello(payload, now);
            }
            return;
        }
        let Some(m) = self.masters.get_mut(&target.master) else {
            return;
        };
        let inst = match target.role {
            Role::Master => &mut m.inst,
            Role::Replica => match m.replicas.get_mut(&target.addr) {
                Some(i) => i,
                None => return,
            },
            Role::Sentinel => match m.sentinels.get_mut(&target.addr) {
                Some(i) => i,
                None => return,
            },
        };
        if inst.link.gen != gen || inst.addr() != target.addr {
            return;
        }
        match (event, kind) {
            (Event::Connected { local_ip }, Kind::Command) => {
                inst.link.disconnected = false;
                inst.link.pending = 0;
                inst.link.cc_conn_time = now;
                inst.link.local_ip = local_ip;
                inst.send_ping(now);
            }
            (Event::Connected { .. }, Kind::PubSub) => {
                inst.link.pc_connected = true;
                inst.link.pc_conn_time = now;
                inst.link.pc_last_activity = now;
            }
            (Event::Disconnected, Kind::Command) => {
                inst.link.disconnected = true;
                inst.link.pending = 0;
            }
            (Event::Disconnected, Kind::PubSub) => inst.link.pc_connected = false,
            (Event::Reply(to, reply), _) => {
                inst.link.pending -= 1;
                match to {
                    ReplyTo::Ping => on_ping(inst, &reply, now),
                    ReplyTo::Publish => {
                        if !matches!(reply, Resp::Error(_)) {
                            inst.last_pub_time = now;
                        }
                    }
                    ReplyTo::IsMasterDown => on_is_master_down(inst, &reply, now),
                    ReplyTo::Discard => {}
                    ReplyTo::Info => {
                        if let Resp::Bulk(Some(text)) = reply {
                            let text = String::from_utf8_lossy(&text).into_owned();
                            refresh_info(&mut self.g, m, target.role, &target.addr, &text, now);
                        }
                    }
                }
            }
            (Event::Hello(_), _) => {}
        }
    }

    pub(crate) fn pubsub_activity(&mut self, target: &Target, gen: u64, now: u64) {
        let Some(m) = self.masters.get_mut(&target.master) else {
            return;
        };
        let inst = match target.role {
            Role::Master => Some(&mut m.inst),
            Role::Replica => m.replicas.get_mut(&target.addr),
            Role::Sentinel => m.sentinels.get_mut(&target.addr),
        };
        if let Some(inst) = inst.filter(|i| i.link.gen == gen) {
            inst.link.pc_last_activity = now;
        }
    }

    /// A hello message from another Sentinel (Redis's
    /// `sentinelProcessHelloMessage`), heard on an instance's
    /// `__sentinel__:hello` or PUBLISHed to us.
    pub(crate) fn process_hello(&mut self, hello: &str, now: u64) {
        let t: Vec<&str> = hello.split(',').collect();
        if t.len() != 8 {
            return;
        }
        let Some(m) = self.masters.get_mut(t[4]) else { return };
        let port: u16 = t[1].parse().unwrap_or(0);
        let master_port: u16 = t[6].parse().unwrap_or(0);
        let current_epoch: u64 = t[3].parse().unwrap_or(0);
        let master_config_epoch: u64 = t[7].parse().unwrap_or(0);
        let runid = t[2];
        let key = format!("{}:{}", t[0], port);
        let known = m.sentinels.get(&key).is_some_and(|s| s.runid.as_deref() == Some(runid));
        if !known {
            // The same run id at another address: it moved.
            let moved: Vec<String> = m
                .sentinels
                .iter()
                .filter(|(_, s)| s.runid.as_deref() == Some(runid))
                .map(|(k, _)| k.clone())
                .collect();
            for k in &moved {
                m.sentinels.remove(k);
            }
            if !moved.is_empty() {
                self.g.event(
                    "+sentinel-address-switch",
                    format!(
                        "master {} {} {} ip {} port {} for {}",
                        m.inst.name, m.inst.host, m.inst.port, t[0], port, runid
                    ),
                );
            } else if let Some(other) = m.sentinels.remove(&key) {
                self.g
                    .event("+sentinel-invalid-addr", format!("{} {}", other.describe(), m.at()));
            }
            m.add_sentinel(t[0], port, runid, now);
            if moved.is_empty() {
                let s = &m.sentinels[&key];
                self.g.event("+sentinel", format!("{} {}", s.describe(), m.at()));
            }
            self.g.dirty = true;
        }
        if current_epoch > self.g.current_epoch {
            self.g.current_epoch = current_epoch;
            self.g.dirty = true;
            self.g.event("+new-epoch", current_epoch.to_string());
        }
        if m.config_epoch < master_config_epoch {
            m.config_epoch = master_config_epoch;
            if master_port != m.inst.port || t[5] != m.inst.host {
                let s = &m.sentinels[&key];
                self.g
                    .event("+config-update-from", format!("{} {}", s.describe(), m.at()));
                self.g.event(
                    "+switch-master",
                    format!(
                        "{} {} {} {} {}",
                        m.inst.name, m.inst.host, m.inst.port, t[5], master_port
                    ),
                );
                reset_and_change_address(&mut self.g, m, t[5], master_port, now);
            }
        }
        if let Some(s) = m.sentinels.get_mut(&key) {
            s.last_hello_time = now;
        }
    }

    /// SENTINEL IS-MASTER-DOWN-BY-ADDR: (down, leader, leader epoch).
    pub(crate) fn is_master_down(
        &mut self,
        host: &str,
        port: u16,
        req_epoch: u64,
        runid: &str,
        now: u64,
    ) -> (bool, Option<String>, u64) {
        let Some(name) = self
            .masters
            .iter()
            .find(|(_, m)| m.inst.host == host && m.inst.port == port)
            .map(|(n, _)| n.clone())
        else {
            return (false, None, 0);
        };
        let m = self.masters.get_mut(&name).expect("found above");
        let down = m.inst.flags & SRI_S_DOWN != 0;
        if runid == "*" {
            return (down, None, 0);
        }
        let leader = vote_leader(&mut self.g, m, req_epoch, runid, now);
        (down, leader, m.leader_epoch)
    }

    /// Starts a failover without asking anyone (SENTINEL FAILOVER).
    pub(crate) fn force_failover(&mut self, name: &str, now: u64) {
        if let Some(m) = self.masters.get_mut(name) {
            start_failover(&mut self.g, m, now);
            m.inst.flags |= SRI_FORCE_FAILOVER;
        }
    }

    pub(crate) fn can_select_replica(&self, name: &str, now: u64) -> bool {
        self.masters
            .get(name)
            .is_some_and(|m| select_replica(&self.g, m, now).is_some())
    }

    /// SENTINEL RESET: forgets replicas and Sentinels of the matching masters.
    pub(crate) fn reset_matching(&mut self, pattern: &str, now: u64) -> i64 {
        let mut n = 0;
        for m in self.masters.values_mut() {
            if crate::store::glob::matches(pattern.as_bytes(), m.inst.name.as_bytes(), false) {
                reset_master(m, true, now);
                self.g.event("+reset-master", m.inst.describe());
                n += 1;
            }
        }
        self.g.dirty |= n > 0;
        n
    }

    pub(crate) fn event(&mut self, kind: &str, msg: String) {
        self.g.event(kind, msg);
    }
}

/// Master timer work: links, periodic commands, SDOWN, ODOWN, failover.
fn handle_master(g: &mut Globals, m: &mut Master, now: u64) {
    let login = Login {
        user: m.auth_user.clone(),
        pass: m.auth_pass.clone(),
        client_name: String::new(),
    };
    let target = Target {
        master: m.inst.name.clone(),
        role: Role::Master,
        addr: m.inst.addr(),
    };
    reconnect(g, &mut m.inst, target, login);
    let (ch, cp) = m.current_addr();
    let hello_master = (m.inst.name.clone(), ch, cp, m.config_epoch);
    periodic(g, &mut m.inst, &hello_master, false, now);
    check_sdown(g, &mut m.inst, None, now);
    check_odown(g, m, now);
    if start_failover_if_needed(g, m, now) {
        ask_others(g, m, true, now);
    }
    failover_state_machine(g, m, now);
    ask_others(g, m, false, now);
}

/// Replica or Sentinel timer work.
fn handle_other(g: &mut Globals, m: &mut Master, role: Role, key: &str, now: u64) {
    let at = m.at();
    let (ch, cp) = m.current_addr();
    let hello_master = (m.inst.name.clone(), ch, cp, m.config_epoch);
    let master_busy = m.inst.flags & (SRI_O_DOWN | SRI_FAILOVER_IN_PROGRESS) != 0;
    let login = match role {
        Role::Sentinel => Login {
            user: g.sentinel_user.clone(),
            pass: g.sentinel_pass.clone(),
            client_name: String::new(),
        },
        _ => Login {
            user: m.auth_user.clone(),
            pass: m.auth_pass.clone(),
            client_name: String::new(),
        },
    };
    let map = if role == Role::Replica {
        &mut m.replicas
    } else {
        &mut m.sentinels
    };
    let Some(inst) = map.get_mut(key) else { return };
    let target = Target {
        master: m.inst.name.clone(),
        role,
        addr: inst.addr(),
    };
    reconnect(g, inst, target, login);
    periodic(g, inst, &hello_master, master_busy, now);
    check_sdown(g, inst, Some(&at), now);
}

/// Starts link tasks that are missing and asks disconnected ones to try
/// again (`sentinelReconnectInstance`).
fn reconnect(g: &mut Globals, inst: &mut Instance, target: Target, mut login: Login) {
    let Some(shared) = g.shared.upgrade() else { return };
    let short = &g.myid[..8.min(g.myid.len())];
    if inst.link.cmd.is_none() {
        login.client_name = format!("sentinel-{short}-cmd");
        inst.link.cmd = Some(link::spawn(
            shared.clone(),
            target.clone(),
            Kind::Command,
            inst.link.gen,
            inst.host.clone(),
            inst.port,
            login.clone(),
        ));
    } else if inst.link.disconnected {
        if let Some(h) = &inst.link.cmd {
            h.reconnect.notify_one();
        }
    }
    if inst.role == Role::Sentinel {
        return;
    }
    if inst.link.pubsub.is_none() {
        login.client_name = format!("sentinel-{short}-pubsub");
        inst.link.pubsub = Some(link::spawn(
            shared,
            target,
            Kind::PubSub,
            inst.link.gen,
            inst.host.clone(),
            inst.port,
            login,
        ));
    } else if !inst.link.pc_connected {
        if let Some(h) = &inst.link.pubsub {
            h.reconnect.notify_one();
        }
    }
}

/// PING, INFO and hello as they fall due (`sentinelSendPeriodicCommands`).
fn periodic(g: &mut Globals, inst: &mut Instance, master: &(String, String, u16, u64), master_busy: bool, now: u64) {
    if inst.link.disconnected || inst.link.pending >= MAX_PENDING_COMMANDS {
        return;
    }
    let info_period = if inst.role == Role::Replica && (master_busy || inst.master_link_down_time != 0) {
        1000
    } else {
        g.periods.info
    };
    let ping_period = inst.down_after.min(g.periods.ping);
    if inst.role != Role::Sentinel && (inst.info_refresh == 0 || now.saturating_sub(inst.info_refresh) > info_period) {
        inst.send(vec!["INFO".into()], ReplyTo::Info);
    }
    if now.saturating_sub(inst.link.last_pong_time) > ping_period
        && now.saturating_sub(inst.link.last_ping_time) > ping_period / 2
    {
        inst.send_ping(now);
    }
    if now.saturating_sub(inst.last_pub_time) > g.periods.publish {
        let ip = g.announce_ip.clone().unwrap_or_else(|| inst.link.local_ip.clone());
        if ip.is_empty() {
            return;
        }
        let port = if g.announce_port != 0 { g.announce_port } else { g.port };
        let payload = format!(
            "{ip},{port},{},{},{},{},{},{}",
            g.myid, g.current_epoch, master.0, master.1, master.2, master.3
        );
        inst.send(vec!["PUBLISH".into(), HELLO_CHANNEL.into(), payload], ReplyTo::Publish);
    }
}

fn on_ping(inst: &mut Instance, reply: &Resp, now: u64) {
    if let Resp::Status(s) | Resp::Error(s) = reply {
        if s.starts_with("PONG") || s.starts_with("LOADING") || s.starts_with("MASTERDOWN") {
            inst.link.last_avail_time = now;
            inst.link.act_ping_time = 0;
        }
    }
    inst.link.last_pong_time = now;
}

fn on_is_master_down(inst: &mut Instance, reply: &Resp, now: u64) {
    let Resp::Array(Some(items)) = reply else { return };
    let [Resp::Int(down), leader, Resp::Int(epoch)] = items.as_slice() else {
        return;
    };
    let Some(leader) = leader.text() else { return };
    inst.last_master_down_reply_time = now;
    if *down == 1 {
        inst.flags |= SRI_MASTER_DOWN;
    } else {
        inst.flags &= !SRI_MASTER_DOWN;
    }
    if leader != "*" {
        inst.leader = Some(leader);
        inst.leader_epoch = (*epoch).max(0) as u64;
    }
}

/// What an INFO reply changes (`sentinelRefreshInstanceInfo`).
fn refresh_info(g: &mut Globals, m: &mut Master, role: Role, key: &str, info: &str, now: u64) {
    let at = m.at();
    let mut found_replicas = vec![];
    {
        let inst = match role {
            Role::Master => &mut m.inst,
            Role::Replica => match m.replicas.get_mut(key) {
                Some(i) => i,
                None => return,
            },
            Role::Sentinel => return,
        };
        inst.info = Some(info.to_string());
        inst.master_link_down_time = 0;
        let mut reported = None;
        for l in info.split("\r\n") {
            if let Some(id) = l.strip_prefix("run_id:").filter(|id| id.len() >= 40) {
                let id = &id[..40];
                match &inst.runid {
                    None => inst.runid = Some(id.into()),
                    Some(old) if old != id => {
                        let desc = if role == Role::Master {
                            inst.describe()
                        } else {
                            format!("{} {at}", inst.describe())
                        };
                        g.event("+reboot", desc);
                        inst.runid = Some(id.into());
                    }
                    _ => {}
                }
            }
            if role == Role::Master && l.starts_with("slave") && l.as_bytes().get(5).is_some_and(u8::is_ascii_digit) {
                if let Some(addr) = replica_line(l) {
                    found_replicas.push(addr);
                }
            }
            if let Some(v) = l.strip_prefix("master_link_down_since_seconds:") {
                inst.master_link_down_time = v.parse::<u64>().unwrap_or(0) * 1000;
            }
            if l.starts_with("role:master") {
                reported = Some(Role::Master);
            } else if l.starts_with("role:slave") {
                reported = Some(Role::Replica);
            }
            if reported == Some(Role::Replica) {
                if let Some(h) = l.strip_prefix("master_host:") {
                    if inst
                        .slave_master_host
                        .as_deref()
                        .is_none_or(|old| !old.eq_ignore_ascii_case(h))
                    {
                        inst.slave_master_host = Some(h.into());
                        inst.slave_conf_change_time = now;
                    }
                }
                if let Some(p) = l.strip_prefix("master_port:") {
                    let p = p.parse().unwrap_or(0);
                    if inst.slave_master_port != p {
                        inst.slave_master_port = p;
                        inst.slave_conf_change_time = now;
                    }
                }
                if let Some(s) = l.strip_prefix("master_link_status:") {
                    inst.master_link_up = s.eq_ignore_ascii_case("up");
                }
                if let Some(v) = l.strip_prefix("slave_priority:") {
                    inst.slave_priority = v.parse().unwrap_or(0);
                }
                if let Some(v) = l.strip_prefix("slave_repl_offset:") {
                    inst.slave_repl_offset = v.parse().unwrap_or(0);
                }
                if let Some(v) = l.strip_prefix("replica_announced:") {
                    inst.replica_announced = v.parse().unwrap_or(0);
                }
            }
        }
        inst.info_refresh = now;
        if let Some(r) = reported.filter(|r| *r != inst.role_reported) {
            inst.role_reported_time = now;
            inst.role_reported = r;
            if r == Role::Replica {
                inst.slave_conf_change_time = now;
            }
        }
    }
    for (host, port) in found_replicas {
        if let Some(k) = m.add_replica(&host, port, now) {
            let r = &m.replicas[&k];
            g.event("+slave", format!("{} {at}", r.describe()));
            g.dirty = true;
        }
    }
    if role != Role::Replica {
        return;
    }
    let promoted_addr = m
        .promoted
        .as_ref()
        .and_then(|k| m.replicas.get(k))
        .map(|p| (p.host.clone(), p.port));
    let sane = m.looks_sane(now, g.periods.info);
    let failover_timeout = m.failover_timeout;
    let (mhost, mport) = (m.inst.host.clone(), m.inst.port);
    let in_wait_promotion = m.inst.flags & SRI_FAILOVER_IN_PROGRESS != 0 && m.failover_state == Failover::WaitPromotion;
    let Some(r) = m.replicas.get_mut(key) else { return };
    let reported = r.role_reported;
    if reported == Role::Master {
        if r.flags & SRI_PROMOTED != 0 && in_wait_promotion {
            let desc = format!("{} {at}", r.describe());
            m.config_epoch = m.failover_epoch;
            m.failover_state = Failover::ReconfSlaves;
            m.failover_state_change_time = now;
            g.dirty = true;
            g.event("+promoted-slave", desc);
            g.event("+failover-state-reconf-slaves", m.inst.describe());
            force_hello(m, g.periods.publish);
        } else {
            let wait = g.periods.publish * 4;
            if r.flags & SRI_PROMOTED == 0
                && sane
                && r.no_down_for(wait, now)
                && now.saturating_sub(r.role_reported_time) > wait
                && r.send_slaveof(Some((&mhost, mport)))
            {
                let desc = format!("{} {at}", r.describe());
                g.event("+convert-to-slave", desc);
            }
        }
        return;
    }
    let points_elsewhere = r.slave_master_port != mport
        || !r
            .slave_master_host
            .as_deref()
            .is_some_and(|h| h.eq_ignore_ascii_case(&mhost));
    if points_elsewhere
        && r.flags & (SRI_RECONF_SENT | SRI_RECONF_INPROG) == 0
        && sane
        && r.no_down_for(failover_timeout, now)
        && now.saturating_sub(r.slave_conf_change_time) > failover_timeout
        && r.send_slaveof(Some((&mhost, mport)))
    {
        let desc = format!("{} {at}", r.describe());
        g.event("+fix-slave-config", desc);
    }
    if r.flags & (SRI_RECONF_SENT | SRI_RECONF_INPROG) != 0 {
        if let Some((ph, pp)) = &promoted_addr {
            if r.flags & SRI_RECONF_SENT != 0
                && r.slave_master_host
                    .as_deref()
                    .is_some_and(|h| h.eq_ignore_ascii_case(ph))
                && r.slave_master_port == *pp
            {
                r.flags &= !SRI_RECONF_SENT;
                r.flags |= SRI_RECONF_INPROG;
                let desc = format!("{} {at}", r.describe());
                g.event("+slave-reconf-inprog", desc);
            }
        }
        if r.flags & SRI_RECONF_INPROG != 0 && r.master_link_up {
            r.flags &= !SRI_RECONF_INPROG;
            r.flags |= SRI_RECONF_DONE;
            let desc = format!("{} {at}", r.describe());
            g.event("+slave-reconf-done", desc);
        }
    }
}

/// `slave0:ip=127.0.0.1,port=6380,state=online,...` (or the old
/// `slave0:<ip>,<port>,<state>` form) → the replica's address.
fn replica_line(l: &str) -> Option<(String, u16)> {
    let body = l.split_once(':')?.1;
    if body.contains("ip=") {
        let mut ip = None;
        let mut port = None;
        for field in body.split(',') {
            if let Some(v) = field.strip_prefix("ip=") {
                ip = Some(v.to_string());
            } else if let Some(v) = field.strip_prefix("port=") {
                port = v.parse().ok();
            }
        }
        Some((ip?, port?))
    } else {
        let mut parts = body.split(',');
        let ip = parts.next()?.to_string();
        let port = parts.next()?.parse().ok()?;
        parts.next()?;
        Some((ip, port))
    }
}

/// Makes the next tick send hello everywhere (`sentinelForceHelloUpdateForMaster`).
fn force_hello(m: &mut Master, publish_period: u64) {
    let back = publish_period + 1;
    m.inst.last_pub_time = m.inst.last_pub_time.saturating_sub(back);
    for i in m.replicas.values_mut().chain(m.sentinels.values_mut()) {
        i.last_pub_time = i.last_pub_time.saturating_sub(back);
    }
}

/// SDOWN (`sentinelCheckSubjectivelyDown`), and closing a link whose PINGs
/// go unanswered so that it reconnects.
fn check_sdown(g: &mut Globals, inst: &mut Instance, at: Option<&str>, now: u64) {
    let elapsed = if inst.link.act_ping_time != 0 {
        now.saturating_sub(inst.link.act_ping_time)
    } else if inst.link.disconnected {
        now.saturating_sub(inst.link.last_avail_time)
    } else {
        0
    };
    let half = inst.down_after / 2;
    if !inst.link.disconnected
        && now.saturating_sub(inst.link.cc_conn_time) > g.periods.min_link_reconnect
        && inst.link.act_ping_time != 0
        && now.saturating_sub(inst.link.act_ping_time) > half
        && now.saturating_sub(inst.link.last_pong_time) > half
    {
        if let Some(h) = &inst.link.cmd {
            h.close.notify_one();
        }
    }
    if inst.link.pc_connected
        && now.saturating_sub(inst.link.pc_conn_time) > g.periods.min_link_reconnect
        && now.saturating_sub(inst.link.pc_last_activity) > g.periods.publish * 3
    {
        if let Some(h) = &inst.link.pubsub {
            h.close.notify_one();
        }
    }
    let reported_replica = inst.role == Role::Master
        && inst.role_reported == Role::Replica
        && now.saturating_sub(inst.role_reported_time) > inst.down_after + g.periods.info * 2;
    let desc = match at {
        Some(at) => format!("{} {at}", inst.describe()),
        None => inst.describe(),
    };
    if elapsed > inst.down_after || reported_replica {
        if inst.flags & SRI_S_DOWN == 0 {
            g.event("+sdown", desc);
            inst.s_down_since = now;
            inst.flags |= SRI_S_DOWN;
        }
    } else if inst.flags & SRI_S_DOWN != 0 {
        g.event("-sdown", desc);
        inst.flags &= !SRI_S_DOWN;
    }
}

fn check_odown(g: &mut Globals, m: &mut Master, now: u64) {
    let mut quorum = 0;
    let mut odown = false;
    if m.inst.flags & SRI_S_DOWN != 0 {
        quorum = 1 + m.sentinels.values().filter(|s| s.flags & SRI_MASTER_DOWN != 0).count() as u32;
        odown = quorum >= m.quorum;
    }
    if odown {
        if m.inst.flags & SRI_O_DOWN == 0 {
            g.event(
                "+odown",
                format!("{} #quorum {}/{}", m.inst.describe(), quorum, m.quorum),
            );
            m.inst.flags |= SRI_O_DOWN;
            m.inst.o_down_since = now;
        }
    } else if m.inst.flags & SRI_O_DOWN != 0 {
        g.event("-odown", m.inst.describe());
        m.inst.flags &= !SRI_O_DOWN;
    }
}

/// SENTINEL IS-MASTER-DOWN-BY-ADDR to the other Sentinels while the master
/// is SDOWN (every ask period, or at once when `forced`).
fn ask_others(g: &mut Globals, m: &mut Master, forced: bool, now: u64) {
    let sdown = m.inst.flags & SRI_S_DOWN != 0;
    let runid = if m.failover_state > Failover::None {
        g.myid.clone()
    } else {
        "*".into()
    };
    let (host, port) = (m.inst.host.clone(), m.inst.port);
    for s in m.sentinels.values_mut() {
        let elapsed = now.saturating_sub(s.last_master_down_reply_time);
        if elapsed > g.periods.ask * 5 {
            s.flags &= !SRI_MASTER_DOWN;
            s.leader = None;
        }
        if !sdown || s.link.disconnected {
            continue;
        }
        if !forced && elapsed < g.periods.ask {
            continue;
        }
        s.send(
            vec![
                "SENTINEL".into(),
                "is-master-down-by-addr".into(),
                host.clone(),
                port.to_string(),
                g.current_epoch.to_string(),
                runid.clone(),
            ],
            ReplyTo::IsMasterDown,
        );
    }
}

/// Votes for `runid` in `req_epoch` unless already voted in it
/// (`sentinelVoteLeader`); the vote this Sentinel holds.
fn vote_leader(g: &mut Globals, m: &mut Master, req_epoch: u64, runid: &str, now: u64) -> Option<String> {
    if req_epoch > g.current_epoch {
        g.current_epoch = req_epoch;
        g.dirty = true;
        g.event("+new-epoch", req_epoch.to_string());
    }
    if m.leader_epoch < req_epoch && g.current_epoch <= req_epoch {
        m.leader = Some(runid.into());
        m.leader_epoch = g.current_epoch;
        g.dirty = true;
        g.event("+vote-for-leader", format!("{runid} {}", m.leader_epoch));
        if !runid.eq_ignore_ascii_case(&g.myid) {
            m.failover_start_time = now + fastrand::u64(..MAX_DESYNC_MS);
        }
    }
    m.leader.clone()
}

/// The leader of `epoch` if one has a majority and the quorum (`sentinelGetLeader`).
fn get_leader(g: &mut Globals, m: &mut Master, epoch: u64, now: u64) -> Option<String> {
    let voters = m.sentinels.len() as u64 + 1;
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    for s in m.sentinels.values() {
        if let Some(l) = s.leader.as_ref().filter(|_| s.leader_epoch == g.current_epoch) {
            *counts.entry(l.clone()).or_default() += 1;
        }
    }
    let mut winner: Option<String> = None;
    let mut max = 0;
    for (id, n) in &counts {
        if *n > max {
            max = *n;
            winner = Some(id.clone());
        }
    }
    let candidate = winner.clone().unwrap_or_else(|| g.myid.clone());
    let myvote = vote_leader(g, m, epoch, &candidate, now);
    if let Some(v) = myvote.filter(|_| m.leader_epoch == epoch) {
        let n = counts.get(&v).copied().unwrap_or(0) + 1;
        if n > max {
            max = n;
            winner = Some(v);
        }
    }
    winner.filter(|_| max > voters / 2 && max >= u64::from(m.quorum))
}

fn start_failover(g: &mut Globals, m: &mut Master, now: u64) {
    m.failover_state = Failover::WaitStart;
    m.inst.flags |= SRI_FAILOVER_IN_PROGRESS;
    g.current_epoch += 1;
    m.failover_epoch = g.current_epoch;
    g.event("+new-epoch", g.current_epoch.to_string());
    g.event("+try-failover", m.inst.describe());
    m.failover_start_time = now + fastrand::u64(..MAX_DESYNC_MS);
    m.failover_state_change_time = now;
}

fn start_failover_if_needed(g: &mut Globals, m: &mut Master, now: u64) -> bool {
    if m.inst.flags & SRI_O_DOWN == 0 || m.inst.flags & SRI_FAILOVER_IN_PROGRESS != 0 {
        return false;
    }
    if now.saturating_sub(m.failover_start_time) < m.failover_timeout * 2 && m.failover_start_time != 0 {
        return false;
    }
    start_failover(g, m, now);
    true
}

/// The replica to promote (`sentinelSelectSlave`): reachable, recently
/// heard from, priority > 0; lowest priority, then highest offset, then
/// smallest run id.
fn select_replica(g: &Globals, m: &Master, now: u64) -> Option<String> {
    let mut max_down = m.inst.down_after * 10;
    if m.inst.flags & SRI_S_DOWN != 0 {
        max_down += now.saturating_sub(m.inst.s_down_since);
    }
    let validity = if m.inst.flags & SRI_S_DOWN != 0 {
        g.periods.ping * 5
    } else {
        g.periods.info * 3
    };
    let mut ok: Vec<&Instance> = m
        .replicas
        .values()
        .filter(|r| {
            r.flags & (SRI_S_DOWN | SRI_O_DOWN) == 0
                && !r.link.disconnected
                && now.saturating_sub(r.link.last_avail_time) <= g.periods.ping * 5
                && r.slave_priority != 0
                && now.saturating_sub(r.info_refresh) <= validity
                && r.master_link_down_time <= max_down
        })
        .collect();
    ok.sort_by(|a, b| {
        a.slave_priority
            .cmp(&b.slave_priority)
            .then(b.slave_repl_offset.cmp(&a.slave_repl_offset))
            .then_with(|| match (&a.runid, &b.runid) {
                (None, None) => std::cmp::Ordering::Equal,
                (None, Some(_)) => std::cmp::Ordering::Greater,
                (Some(_), None) => std::cmp::Ordering::Less,
                (Some(x), Some(y)) => x.to_ascii_lowercase().cmp(&y.to_ascii_lowercase()),
            })
    });
    ok.first().map(|r| r.addr())
}

fn abort_failover(m: &mut Master, now: u64) {
    m.inst.flags &= !(SRI_FAILOVER_IN_PROGRESS | SRI_FORCE_FAILOVER);
    m.failover_state = Failover::None;
    m.failover_state_change_time = now;
    if let Some(p) = m.promoted.take().and_then(|k| m.replicas.get_mut(&k)) {
        p.flags &= !SRI_PROMOTED;
    }
}

fn failover_state_machine(g: &mut Globals, m: &mut Master, now: u64) {
    if m.inst.flags & SRI_FAILOVER_IN_PROGRESS == 0 {
        return;
    }
    let at = m.at();
    match m.failover_state {
        Failover::WaitStart => {
            let epoch = m.failover_epoch;
            let leader = get_leader(g, m, epoch, now);
            let is_leader = leader.is_some_and(|l| l.eq_ignore_ascii_case(&g.myid));
            if !is_leader && m.inst.flags & SRI_FORCE_FAILOVER == 0 {
                let timeout = g.periods.election_timeout.min(m.failover_timeout);
                if now.saturating_sub(m.failover_start_time) > timeout && now > m.failover_start_time {
                    g.event("-failover-abort-not-elected", m.inst.describe());
                    abort_failover(m, now);
                }
                return;
            }
            g.event("+elected-leader", m.inst.describe());
            m.failover_state = Failover::SelectSlave;
            m.failover_state_change_time = now;
            g.event("+failover-state-select-slave", m.inst.describe());
        }
        Failover::SelectSlave => match select_replica(g, m, now) {
            None => {
                g.event("-failover-abort-no-good-slave", m.inst.describe());
                abort_failover(m, now);
            }
            Some(k) => {
                let r = m.replicas.get_mut(&k).expect("selected from the map");
                r.flags |= SRI_PROMOTED;
                let desc = format!("{} {at}", r.describe());
                g.event("+selected-slave", desc.clone());
                m.promoted = Some(k);
                m.failover_state = Failover::SendSlaveofNoOne;
                m.failover_state_change_time = now;
                g.event("+failover-state-send-slaveof-noone", desc);
            }
        },
        Failover::SendSlaveofNoOne => {
            let Some(r) = m.promoted.clone().and_then(|k| m.replicas.get_mut(&k)) else {
                abort_failover(m, now);
                return;
            };
            if r.link.disconnected {
                if now.saturating_sub(m.failover_state_change_time) > m.failover_timeout {
                    g.event("-failover-abort-slave-timeout", m.inst.describe());
                    abort_failover(m, now);
                }
                return;
            }
            if !r.send_slaveof(None) {
                return;
            }
            let desc = format!("{} {at}", r.describe());
            g.event("+failover-state-wait-promotion", desc);
            m.failover_state = Failover::WaitPromotion;
            m.failover_state_change_time = now;
        }
        Failover::WaitPromotion => {
            if now.saturating_sub(m.failover_state_change_time) > m.failover_timeout {
                g.event("-failover-abort-slave-timeout", m.inst.describe());
                abort_failover(m, now);
            }
        }
        Failover::ReconfSlaves => reconf_next_replica(g, m, now),
        Failover::None | Failover::UpdateConfig => {}
    }
}

fn reconf_next_replica(g: &mut Globals, m: &mut Master, now: u64) {
    let at = m.at();
    let Some((ph, pp)) = m
        .promoted
        .as_ref()
        .and_then(|k| m.replicas.get(k))
        .map(|p| (p.host.clone(), p.port))
    else {
        return;
    };
    let mut in_progress = m
        .replicas
        .values()
        .filter(|r| r.flags & (SRI_RECONF_SENT | SRI_RECONF_INPROG) != 0)
        .count() as u64;
    for r in m.replicas.values_mut() {
        if in_progress >= m.parallel_syncs {
            break;
        }
        if r.flags & (SRI_PROMOTED | SRI_RECONF_DONE) != 0 {
            continue;
        }
        if r.flags & SRI_RECONF_SENT != 0
            && now.saturating_sub(r.slave_reconf_sent_time) > g.periods.slave_reconf_timeout
        {
            g.event("-slave-reconf-sent-timeout", format!("{} {at}", r.describe()));
            r.flags &= !SRI_RECONF_SENT;
            r.flags |= SRI_RECONF_DONE;
        }
        if r.flags & (SRI_RECONF_SENT | SRI_RECONF_INPROG | SRI_RECONF_DONE) != 0 || r.link.disconnected {
            continue;
        }
        if r.send_slaveof(Some((&ph, pp))) {
            r.flags |= SRI_RECONF_SENT;
            r.slave_reconf_sent_time = now;
            g.event("+slave-reconf-sent", format!("{} {at}", r.describe()));
            in_progress += 1;
        }
    }
    detect_end(g, m, now, (&ph, pp));
}

fn detect_end(g: &mut Globals, m: &mut Master, now: u64, promoted: (&str, u16)) {
    let at = m.at();
    let elapsed = now.saturating_sub(m.failover_state_change_time);
    if m.promoted
        .as_ref()
        .and_then(|k| m.replicas.get(k))
        .is_none_or(|p| p.flags & SRI_S_DOWN != 0)
    {
        return;
    }
    let mut not_reconfigured = m
        .replicas
        .values()
        .filter(|r| r.flags & (SRI_PROMOTED | SRI_RECONF_DONE) == 0 && r.flags & SRI_S_DOWN == 0)
        .count();
    let timeout = elapsed > m.failover_timeout;
    if timeout {
        not_reconfigured = 0;
        g.event("+failover-end-for-timeout", m.inst.describe());
    }
    if not_reconfigured == 0 {
        g.event("+failover-end", m.inst.describe());
        m.failover_state = Failover::UpdateConfig;
        m.failover_state_change_time = now;
    }
    if timeout {
        for r in m.replicas.values_mut() {
            if r.flags & (SRI_PROMOTED | SRI_RECONF_DONE | SRI_RECONF_SENT) != 0 || r.link.disconnected {
                continue;
            }
            if r.send_slaveof(Some(promoted)) {
                g.event("+slave-reconf-sent-be", format!("{} {at}", r.describe()));
                r.flags |= SRI_RECONF_SENT;
            }
        }
    }
}

/// `sentinelResetMaster`: forgets replicas (and Sentinels unless `keep`
/// says otherwise), the failover, and reconnects.
fn reset_master(m: &mut Master, sentinels_too: bool, now: u64) {
    m.replicas.clear();
    if sentinels_too {
        m.sentinels.clear();
    }
    m.inst.drop_links();
    m.inst.flags = 0;
    m.leader = None;
    m.failover_state = Failover::None;
    m.failover_state_change_time = 0;
    m.failover_start_time = 0;
    m.promoted = None;
    m.inst.runid = None;
    m.inst.slave_master_host = None;
    m.inst.link.act_ping_time = now;
    m.inst.link.last_ping_time = 0;
    m.inst.link.last_avail_time = now;
    m.inst.link.last_pong_time = now;
    m.inst.role_reported_time = now;
    m.inst.role_reported = Role::Master;
    m.inst.info_refresh = 0;
}

/// The master moved to `host:port` (a failover, or a newer config heard in
/// hello): the old master and the other replicas become its replicas.
fn reset_and_change_address(g: &mut Globals, m: &mut Master, host: &str, port: u16, now: u64) {
    let mut replicas: Vec<(String, u16)> = m
        .replicas
        .values()
        .filter(|r| !(r.host == host && r.port == port))
        .map(|r| (r.host.clone(), r.port))
        .collect();
    if !(m.inst.host == host && m.inst.port == port) {
        replicas.push((m.inst.host.clone(), m.inst.port));
    }
    reset_master(m, false, now);
    m.inst.host = host.into();
    m.inst.port = port;
    m.inst.s_down_since = 0;
    m.inst.o_down_since = 0;
    let at = m.at();
    for (h, p) in replicas {
        if let Some(k) = m.add_replica(&h, p, now) {
            g.event("+slave", format!("{} {at}", m.replicas[&k].describe()));
        }
    }
    g.dirty = true;
}

/// Sentinel's own `Arc` for link tasks (set once the state is shared).
pub(crate) fn set_shared(state: &mut State, shared: &Arc<Shared>) {
    state.g.shared = Arc::downgrade(shared);
}

#[cfg(test)]
mod tests {
    use super::replica_line;

    #[test]
    fn replica_lines_of_both_forms() {
        assert_eq!(
            replica_line("slave0:ip=127.0.0.1,port=6380,state=online,offset=1,lag=0"),
            Some(("127.0.0.1".into(), 6380))
        );
        assert_eq!(
            replica_line("slave1:10.0.0.2,6381,online"),
            Some(("10.0.0.2".into(), 6381))
        );
        assert_eq!(replica_line("slave2:ip=127.0.0.1,state=online"), None);
    }
}
