//! The nodes file (`cluster-config-file`) and CLUSTER NODES, which share
//! one line format (Redis's `clusterGenNodeDescription`): `<id>
//! <ip>:<port>@<cport>[,<hostname>] <flags> <master|-> <ping-sent>
//! <pong-recv> <config-epoch> <link> <slot> ...`, and in the file a last
//! `vars currentEpoch <n> lastVoteEpoch <n>` line. Written and read as
//! Redis 7.0.15 writes and reads it (`clusterSaveConfig`,
//! `clusterLoadConfig`).

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;

use super::{flag, valid_name, Cluster, Node, NodeRef, PORT_INCR, SLOTS};

impl Cluster {
    /// One node's line, without the newline.
    pub(crate) fn describe(&self, node: &Node) -> String {
        let mut line = String::with_capacity(128);
        let _ = write!(line, "{} {}:{}@{}", node.name, node.ip, node.port, node.cport);
        if !node.hostname.is_empty() {
            let _ = write!(line, ",{}", node.hostname);
        }
        line.push(' ');
        let names: Vec<&str> = flag::NAMES
            .iter()
            .filter(|(bit, _)| node.flags & bit != 0)
            .map(|(_, name)| *name)
            .collect();
        line.push_str(&if names.is_empty() {
            "noflags".to_string()
        } else {
            names.join(",")
        });
        match node.slaveof {
            Some(master) => {
                line.push(' ');
                line.push_str(&self.node(master).name);
            }
            None => line.push_str(" -"),
        }
        let myself = node.flags & flag::MYSELF != 0;
        let _ = write!(
            line,
            " {} {} {} {}",
            node.ping_sent,
            node.pong_received,
            self.shown_epoch(node),
            if node.link.is_some() || myself {
                "connected"
            } else {
                "disconnected"
            }
        );
        for (start, end) in self.ranges_of(node.handle) {
            if start == end {
                let _ = write!(line, " {start}");
            } else {
                let _ = write!(line, " {start}-{end}");
            }
        }
        if myself {
            for slot in 0..SLOTS {
                if let Some(to) = self.migrating_to[slot] {
                    let _ = write!(line, " [{slot}->-{}]", self.node(to).name);
                } else if let Some(from) = self.importing_from[slot] {
                    let _ = write!(line, " [{slot}-<-{}]", self.node(from).name);
                }
            }
        }
        line
    }

    /// The slot ranges `node` serves, in order.
    pub(crate) fn ranges_of(&self, node: NodeRef) -> Vec<(usize, usize)> {
        let mut ranges = vec![];
        let mut start = None;
        for slot in 0..=SLOTS {
            let mine = slot < SLOTS && self.slots[slot] == Some(node);
            match (mine, start) {
                (true, None) => start = Some(slot),
                (false, Some(s)) => {
                    ranges.push((s, slot - 1));
                    start = None;
                }
                _ => {}
            }
        }
        ranges
    }

    /// Every node's line (all but those whose flags meet `filter`), each
    /// ended by a newline (`clusterGenNodesDescription`).
    pub(crate) fn describe_all(&self, filter: u16) -> String {
        let mut out = String::new();
        for node in self.nodes.iter().filter(|n| n.flags & filter == 0) {
            out.push_str(&self.describe(node));
            out.push('\n');
        }
        out
    }

    /// Writes the nodes file, fsynced (`clusterSaveConfig`): the nodes
    /// but those in handshake, then the epochs.
    pub(crate) fn save(&self) -> std::io::Result<()> {
        let mut content = self.describe_all(flag::HANDSHAKE);
        let _ = writeln!(
            content,
            "vars currentEpoch {} lastVoteEpoch {}",
            self.current_epoch, self.last_vote_epoch
        );
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(&self.path)?;
        // As Redis: one write over the old content (padded with newlines
        // a reader skips when the old file was longer), then the cut.
        let old = file.metadata()?.len() as usize;
        let mut bytes = content.into_bytes();
        let len = bytes.len();
        if old > len {
            bytes.resize(old, b'\n');
        }
        file.write_all(&bytes)?;
        file.sync_all()?;
        if old > len {
            let _ = file.set_len(len as u64);
        }
        Ok(())
    }

    /// Reads the nodes file at `path`: `Ok(None)` when it is missing or
    /// empty (a fresh node), `Err` with Redis's reason when it cannot be
    /// used (Redis exits).
    pub(crate) fn load(path: PathBuf) -> Result<Option<Cluster>, String> {
        let text = match std::fs::read(&path) {
            Ok(text) if text.is_empty() => return Ok(None),
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("Loading the cluster node config from {}: {e}", path.display())),
        };
        let corrupted = || crate::errors::CLUSTER_CONFIG_CORRUPTED.to_string();
        let mut cluster = Cluster::empty(path);
        let mut myself = None;
        for line in text.split(|&b| b == b'\n') {
            if line.is_empty() {
                continue;
            }
            let argv = crate::protocol::split_args(line).ok_or_else(corrupted)?;
            if argv.is_empty() {
                continue;
            }
            if argv[0].eq_ignore_ascii_case(b"vars") {
                if argv.len() % 2 == 0 {
                    return Err(corrupted());
                }
                for pair in argv[1..].chunks(2) {
                    let value = || {
                        std::str::from_utf8(&pair[1])
                            .ok()
                            .and_then(|v| v.parse().ok())
                            .unwrap_or(0)
                    };
                    if pair[0].eq_ignore_ascii_case(b"currentEpoch") {
                        cluster.current_epoch = value();
                    } else if pair[0].eq_ignore_ascii_case(b"lastVoteEpoch") {
                        cluster.last_vote_epoch = value();
                    } else {
                        tracing::warn!(
                            "Skipping unknown cluster config variable '{}'",
                            String::from_utf8_lossy(&pair[0])
                        );
                    }
                }
                continue;
            }
            if argv.len() < 8 || !valid_name(&argv[0]) {
                return Err(corrupted());
            }
            let n = cluster.known_or_added(&argv[0]);
            let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
            let mut address = text(&argv[1]);
            let hostname = match address.find(',') {
                Some(at) => {
                    let h = address[at + 1..].to_string();
                    address.truncate(at);
                    h
                }
                None => String::new(),
            };
            let Some(colon) = address.rfind(':') else {
                return Err(corrupted());
            };
            let (ip, ports) = (address[..colon].to_string(), &address[colon + 1..]);
            let (port, cport) = match ports.split_once('@') {
                Some((p, c)) => (atoi(p), Some(atoi(c))),
                None => (atoi(ports), None),
            };
            let mut flags = 0;
            for word in text(&argv[2]).split(',') {
                flags |= match word.to_ascii_lowercase().as_str() {
                    "myself" => {
                        if myself.is_some() {
                            return Err(corrupted());
                        }
                        myself = Some(n);
                        flag::MYSELF
                    }
                    "master" => flag::MASTER,
                    "slave" => flag::SLAVE,
                    "fail?" => flag::PFAIL,
                    "fail" => flag::FAIL,
                    "handshake" => flag::HANDSHAKE,
                    "noaddr" => flag::NOADDR,
                    "nofailover" => flag::NOFAILOVER,
                    "noflags" => 0,
                    _ => return Err(corrupted()),
                };
            }
            let master = if argv[3].first() != Some(&b'-') {
                if !valid_name(&argv[3]) {
                    return Err(corrupted());
                }
                Some(cluster.known_or_added(&argv[3]))
            } else {
                None
            };
            let epoch: u64 = std::str::from_utf8(&argv[6])
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            let port16 = |p: i64| u16::try_from(p).unwrap_or(0);
            {
                let node = cluster.node_mut(n);
                node.ip = ip;
                node.hostname = hostname;
                node.port = port16(port);
                node.cport = port16(cport.unwrap_or(port + i64::from(PORT_INCR)));
                node.flags |= flags;
                node.config_epoch = if node.is_slave() && master.is_some() { 0 } else { epoch };
            }
            cluster.set_replica_of(n, master);
            for arg in &argv[8..] {
                if arg.first() == Some(&b'[') {
                    // `[slot->-node]` (migrating) or `[slot-<-node]` (importing).
                    let arg = text(arg);
                    let Some(dash) = arg.find('-') else {
                        return Err(corrupted());
                    };
                    let slot = atoi(&arg[1..dash]);
                    let to = arg.as_bytes().get(dash + 1) == Some(&b'>');
                    let rest = arg.get(dash + 3..).unwrap_or("");
                    let name = rest.split(']').next().unwrap_or("");
                    if !(0..SLOTS as i64).contains(&slot) || !rest.contains(']') || !valid_name(name.as_bytes()) {
                        return Err(corrupted());
                    }
                    let other = cluster.known_or_added(name.as_bytes());
                    if to {
                        cluster.migrating_to[slot as usize] = Some(other);
                    } else {
                        cluster.importing_from[slot as usize] = Some(other);
                    }
                    continue;
                }
                let arg = text(arg);
                let (start, stop) = match arg.split_once('-') {
                    Some((a, b)) => (atoi(a), atoi(b)),
                    None => (atoi(&arg), atoi(&arg)),
                };
                let range = 0..SLOTS as i64;
                if !range.contains(&start) || !range.contains(&stop) {
                    return Err(corrupted());
                }
                for slot in start..=stop {
                    cluster.slots[slot as usize] = Some(n);
                }
            }
        }
        let Some(me) = myself else {
            return Err(corrupted());
        };
        cluster.myself = me;
        tracing::info!("Node configuration loaded, I'm {}", cluster.me().name);
        cluster.current_epoch = cluster.max_epoch();
        Ok(Some(cluster))
    }

    /// The node named `name`, added (with no flags) when unknown.
    fn known_or_added(&mut self, name: &[u8]) -> NodeRef {
        match self.lookup(name) {
            Some(n) => n,
            None => self.add_node(String::from_utf8_lossy(name).into_owned(), 0),
        }
    }
}

/// C's `atoi`: the leading decimal digits (after an optional sign), 0 without.
fn atoi(text: &str) -> i64 {
    let t = text.trim_start();
    let (neg, digits) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let end = digits.find(|c: char| !c.is_ascii_digit()).unwrap_or(digits.len());
    let value: i64 = digits[..end].parse().unwrap_or(0);
    if neg {
        -value
    } else {
        value
    }
}
