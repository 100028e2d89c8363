//! coordis as a replica: what the link to a primary knows and the rules a
//! replica follows (Redis's `replication.c`, replica half).
//!
//! [`ReplicaState`] (in the server state, behind the engine lock) is the
//! one record of the link: the primary's address, the link's state (as
//! ROLE and INFO show it), the primary's replication ID and the offset of
//! the stream applied so far, and the *cached primary* a reconnect asks a
//! partial resynchronization from (PSYNC2). The network side is [`link`]:
//! one task that connects, hands shakes, loads a full resync's RDB and
//! applies the stream through the engine's one admission/call path as
//! [`crate::exec::Caller::Primary`].
//!
//! The primary side (`crate::repl`) keeps the same history while this
//! server is a replica: the full and partial resyncs set its IDs and
//! offset, and every byte [`ReplicaState::applied`] moves the offset past
//! goes verbatim into its backlog, so chained replicas share the
//! primary's replid and offsets; [`ReplicaState::promote`]'s shift (new
//! replid, the old one as replid2 up to offset+1) is the primary side's
//! `shiftReplicationId`.
//!
//! What must never happen here: I/O or awaits (the task in [`link`] does
//! those and takes the engine lock only to apply what it read).

pub(crate) mod link;

use std::sync::atomic::{AtomicI64, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

use crate::config::Config;

/// The role letter of Redis's log lines (`M`, or `S` while a replica),
/// which `coordis-server`'s logger writes: the last role any server of the
/// process took, so the one role of a process serving one server (as
/// Redis's `serverLogRaw` reads it from its one state).
static ROLE_LETTER: AtomicU8 = AtomicU8::new(b'M');

/// The role letter of Redis's log lines: `M`, or `S` while a replica
/// (the last role any server of the process took).
pub fn role_letter() -> char {
    ROLE_LETTER.load(Ordering::Relaxed) as char
}

fn set_role_letter(replica: bool) {
    ROLE_LETTER.store(if replica { b'S' } else { b'M' }, Ordering::Relaxed);
}
use crate::net::clients::ClientState;

/// A full resynchronization's transfer as the link reads it (INFO's
/// `master_sync_*` lines, Redis's `repl_transfer_*`): shared with the link
/// task, which counts what it reads without taking the engine lock.
#[derive(Debug, Default)]
pub(crate) struct Transfer {
    /// The RDB's announced size: -1 until the `$` line came, 0 for the
    /// diskless `$EOF:` framing (the size is not known).
    size: AtomicI64,
    /// Bytes of the RDB read so far (the `$` line not counted).
    read: AtomicI64,
    /// [`crate::repl::now_ms`] of the transfer's last read.
    last_io_ms: AtomicU64,
}

impl Transfer {
    /// A transfer starts (`+FULLRESYNC` came): nothing announced yet.
    pub(crate) fn start(&self) {
        self.size.store(-1, Ordering::Release);
        self.read.store(0, Ordering::Release);
        self.touch();
    }

    /// The `$` line announced `size` bytes (0: until the EOF mark).
    pub(crate) fn announce(&self, size: i64) {
        self.size.store(size, Ordering::Release);
        self.touch();
    }

    /// `read` bytes of the RDB are in.
    pub(crate) fn progress(&self, read: i64) {
        self.read.store(read, Ordering::Release);
        self.touch();
    }

    /// Bytes came from the primary (a keepalive newline counts).
    pub(crate) fn touch(&self) {
        self.last_io_ms.store(crate::repl::now_ms(), Ordering::Release);
    }

    /// INFO's lines for it, as Redis prints them (the percentage of a size
    /// not yet known divides by -1: Redis shows `-0.00`).
    fn info_lines(&self) -> String {
        let size = self.size.load(Ordering::Acquire);
        let read = self.read.load(Ordering::Acquire);
        let perc = if size != 0 {
            read as f64 / size as f64 * 100.0
        } else {
            0.0
        };
        let idle = crate::repl::now_ms().saturating_sub(self.last_io_ms.load(Ordering::Acquire)) / 1000;
        format!(
            "master_sync_total_bytes:{size}\r\nmaster_sync_read_bytes:{read}\r\nmaster_sync_left_bytes:{}\r\nmaster_sync_perc:{perc:.2}\r\nmaster_sync_last_io_seconds_ago:{idle}\r\n",
            size - read
        )
    }
}

/// A replication ID's length (40 hex digits, Redis's `CONFIG_RUN_ID_SIZE`).
pub(crate) const REPLID_LEN: usize = 40;

/// The all-zero replication ID Redis shows for "none" (`master_replid2`).
pub(crate) const NO_REPLID: &str = "0000000000000000000000000000000000000000";

/// Where the link is, as ROLE words it (Redis's `replstateToString`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) enum LinkState {
    /// Not a replica.
    #[default]
    None,
    /// A primary is set; the next connect attempt is pending.
    Connect,
    /// Connecting to the primary.
    Connecting,
    /// Connected: PING, AUTH, REPLCONF, PSYNC under way.
    Handshake,
    /// Receiving the full resynchronization's RDB.
    Sync,
    /// Streaming: the dataset follows the primary's.
    Connected,
}

impl LinkState {
    /// ROLE's word for the state.
    pub(crate) fn role_word(self) -> &'static str {
        match self {
            LinkState::None => "none",
            LinkState::Connect => "connect",
            LinkState::Connecting => "connecting",
            LinkState::Handshake => "handshake",
            LinkState::Sync => "sync",
            LinkState::Connected => "connected",
        }
    }
}

/// Where a replica would continue from: a primary's replication ID and
/// the offset of the last byte applied from it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Position {
    pub replid: String,
    pub offset: i64,
}

/// The primary's address, as REPLICAOF or `replicaof` gave it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Primary {
    pub host: String,
    pub port: u16,
}

/// The replica side's state (see the module docs).
#[derive(Debug)]
pub(crate) struct ReplicaState {
    /// The primary to follow; `None`: this server is a primary.
    pub primary: Option<Primary>,
    /// Bumped at every REPLICAOF that changes the primary (or ends the
    /// replication): what the link task applies carries the generation it
    /// was read under, and the engine drops what an older link read.
    pub generation: u64,
    pub state: LinkState,
    /// The replication ID of the history this server's dataset belongs to:
    /// its own random one as a primary, the primary's after a sync.
    pub replid: String,
    /// The offset of the last byte of that history applied here (Redis's
    /// `master_repl_offset`; a replica counts only complete commands).
    pub offset: i64,
    /// Bytes of the stream read from the link, complete or not (INFO's
    /// `slave_read_repl_offset`).
    pub read_offset: i64,
    /// After a promotion: the history this server continued from, valid up
    /// to `second_offset` (INFO's `master_replid2`, `second_repl_offset`).
    pub replid2: String,
    pub second_offset: i64,
    /// What a reconnect asks PSYNC for: this server's own position when it
    /// became a replica, the lost link's after a disconnect (Redis's
    /// cached master); `None` asks `PSYNC ? -1`.
    pub cached: Option<Position>,
    /// Server clock (ms) of the last byte from the primary (INFO's
    /// `master_last_io_seconds_ago`).
    pub last_io_ms: u64,
    /// Server clock (ms) the link went down (INFO's
    /// `master_link_down_since_seconds`).
    pub down_since_ms: u64,
    /// Full resynchronizations completed and partial ones accepted, as this
    /// replica saw them (for tests and the log).
    pub full_syncs: u64,
    pub partial_syncs: u64,
    /// The stream's bytes applied inside a MULTI not yet ended: the
    /// offset moves past a transaction only at its EXEC, so an ACK or a
    /// cached position never falls inside one (Redis's `reploff`), and
    /// they are passed on to this server's replicas then, with the EXEC.
    pub unapplied: Vec<u8>,
    /// The database the primary's stream has selected (its link client's):
    /// a full sync this server serves names it (aux `repl-stream-db`).
    pub stream_db: usize,
    /// The full resynchronization's transfer, while `state` is
    /// [`LinkState::Sync`].
    pub transfer: Arc<Transfer>,
    /// The primary's client (Redis's master client): the database the
    /// stream selected and its open MULTI live here between the link's
    /// batches, and while the link streams CLIENT LIST, INFO and CLIENT
    /// KILL see it as Redis's replica shows its master (flag `M`). Kept
    /// across a lost link, as Redis caches its master for a partial resync
    /// (same id when it continues).
    pub client: Option<ClientState>,
    /// Server clock (ms) a write applied despite a disk error was last
    /// logged (`replica-ignore-disk-write-errors yes`: once per 10 s).
    pub disk_error_logged_ms: u64,
    /// REPLICAOF logged "Connecting to MASTER" for the link's next
    /// attempt; the others (at start, after a failure) log it as they
    /// start, as Redis's cron does before each connection.
    pub connect_announced: bool,
}

impl ReplicaState {
    /// The primary's client while the link streams (what CLIENT LIST and
    /// INFO's `connected_clients` count, as Redis links its master client).
    pub(crate) fn listed_client(&self) -> Option<&ClientState> {
        self.client
            .as_ref()
            .filter(|_| self.primary.is_some() && self.state == LinkState::Connected)
    }

    /// The state at start: a primary with its own replication ID, or a
    /// replica of the `replicaof` directive's primary (which asks
    /// `PSYNC ? -1`: nothing was loaded from it yet).
    pub(crate) fn new(config: &Config, replid: String) -> ReplicaState {
        let mut state = ReplicaState {
            primary: None,
            generation: 0,
            state: LinkState::None,
            replid,
            offset: 0,
            read_offset: 0,
            replid2: NO_REPLID.into(),
            second_offset: -1,
            cached: None,
            last_io_ms: 0,
            down_since_ms: 0,
            full_syncs: 0,
            partial_syncs: 0,
            unapplied: Vec::new(),
            stream_db: 0,
            transfer: Arc::default(),
            client: None,
            disk_error_logged_ms: 0,
            connect_announced: false,
        };
        if let Some(primary) = parse_replicaof(&config.replica.replicaof) {
            state.primary = Some(primary);
            state.state = LinkState::Connect;
            state.generation = 1;
            set_role_letter(true);
        }
        state
    }

    /// Whether this server is a replica (REPLICAOF host port in force).
    pub(crate) fn is_replica(&self) -> bool {
        self.primary.is_some()
    }

    /// Whether the link is up and streaming.
    pub(crate) fn link_up(&self) -> bool {
        self.state == LinkState::Connected
    }

    /// REPLICAOF host port: follow `primary` from now on. A primary becoming
    /// a replica caches its own position, to ask the new primary a partial
    /// resync from it (Redis's `replicationCacheMasterUsingMyself`).
    pub(crate) fn follow(&mut self, primary: Primary, now_ms: u64) {
        // A primary becoming a replica, or a replica leaving a live link:
        // where it stands is what it asks the new primary to continue
        // (Redis's `replicationCacheMasterUsingMyself` and the cached
        // master of the link it drops). A link already down keeps the
        // position cached when it went down.
        if self.primary.is_none() || self.link_up() {
            self.cached = Some(Position {
                replid: self.replid.clone(),
                offset: self.offset,
            });
        }
        // A link that was up went down now; a primary never had one
        // (INFO's `master_link_down_since_seconds:-1`, as Redis's).
        if self.link_up() {
            self.down_since_ms = now_ms;
        } else if self.primary.is_none() {
            self.down_since_ms = 0;
        }
        self.unapplied.clear();
        set_role_letter(true);
        tracing::info!("Connecting to MASTER {}:{}", primary.host, primary.port);
        self.connect_announced = true;
        self.primary = Some(primary);
        self.generation += 1;
        self.state = LinkState::Connect;
    }

    /// REPLICAOF NO ONE: the stream stops and this server continues the
    /// history as a primary under a new replication ID; the old one stays
    /// valid as replid2 up to `offset + 1`, so replicas of the same primary
    /// can continue partially from here (Redis's `shiftReplicationId`).
    pub(crate) fn promote(&mut self, new_replid: String) {
        set_role_letter(false);
        self.primary = None;
        self.generation += 1;
        self.state = LinkState::None;
        self.cached = None;
        self.down_since_ms = 0;
        self.unapplied.clear();
        self.replid2 = std::mem::replace(&mut self.replid, new_replid);
        self.second_offset = self.offset + 1;
        tracing::info!(
            "Setting secondary replication ID to {}, valid up to offset: {}. New replication ID is {}",
            self.replid2,
            self.second_offset,
            self.replid
        );
    }

    /// What the next PSYNC asks: `(replid, offset)` to continue from, or
    /// `("?", -1)` for a full resynchronization.
    pub(crate) fn psync_request(&self) -> (String, i64) {
        match &self.cached {
            Some(p) => (p.replid.clone(), p.offset + 1),
            None => ("?".into(), -1),
        }
    }

    /// The link dropped after it was streaming: the position reached is
    /// cached for a partial resync (Redis's `replicationCacheMaster`).
    pub(crate) fn link_lost(&mut self, now_ms: u64) {
        if self.state == LinkState::Connected {
            tracing::info!("Connection with master lost.");
            tracing::info!("Caching the disconnected master state.");
            self.cached = Some(Position {
                replid: self.replid.clone(),
                offset: self.offset,
            });
            self.down_since_ms = now_ms;
        }
        if self.primary.is_some() {
            self.state = LinkState::Connect;
        }
        self.unapplied.clear();
    }

    /// A command (its bytes `raw`) was applied; `in_multi` when the
    /// link's client is inside a MULTI after it. `pass_on` gets the bytes
    /// the offset moved past (none inside a MULTI), for this server's
    /// replicas.
    pub(crate) fn applied(&mut self, raw: &[u8], in_multi: bool, pass_on: impl FnOnce(&[u8])) {
        if in_multi {
            self.unapplied.extend_from_slice(raw);
            return;
        }
        if self.unapplied.is_empty() {
            pass_on(raw);
            self.offset += raw.len() as i64;
        } else {
            self.unapplied.extend_from_slice(raw);
            pass_on(&self.unapplied);
            self.offset += self.unapplied.len() as i64;
            self.unapplied.clear();
        }
    }

    /// A full resynchronization's dataset is in: the history is the
    /// primary's from `offset` on.
    pub(crate) fn synced(&mut self, replid: String, offset: i64, now_ms: u64) {
        self.replid = replid;
        self.offset = offset;
        self.read_offset = offset;
        self.cached = None;
        self.state = LinkState::Connected;
        self.last_io_ms = now_ms;
        self.full_syncs += 1;
    }

    /// A partial resynchronization was accepted (`+CONTINUE [replid]`):
    /// the stream goes on from the cached position, under the primary's
    /// new replication ID if it sent one (it was promoted meanwhile).
    pub(crate) fn continued(&mut self, new_replid: Option<String>, now_ms: u64) {
        let cached = self.cached.take().unwrap_or(Position {
            replid: self.replid.clone(),
            offset: self.offset,
        });
        match new_replid {
            Some(id) if id != cached.replid => {
                tracing::warn!("Master replication ID changed to {id}");
                self.replid2 = cached.replid;
                self.second_offset = cached.offset + 1;
                self.replid = id;
            }
            _ => self.replid = cached.replid,
        }
        self.offset = cached.offset;
        self.read_offset = cached.offset;
        self.state = LinkState::Connected;
        self.last_io_ms = now_ms;
        self.partial_syncs += 1;
    }

    /// INFO's replication section for a replica (from `role:slave` up to
    /// `connected_slaves`; the common lines follow it).
    pub(crate) fn info_lines(&self, config: &Config, now_ms: u64) -> String {
        use std::fmt::Write;
        let Some(primary) = &self.primary else {
            return String::new();
        };
        let mut out = String::new();
        let secs = |ms: u64| now_ms.saturating_sub(ms) / 1000;
        let _ = write!(
            out,
            "role:slave\r\nmaster_host:{}\r\nmaster_port:{}\r\nmaster_link_status:{}\r\nmaster_last_io_seconds_ago:{}\r\nmaster_sync_in_progress:{}\r\nslave_read_repl_offset:{}\r\nslave_repl_offset:{}\r\n",
            primary.host,
            primary.port,
            if self.link_up() { "up" } else { "down" },
            if self.link_up() { secs(self.last_io_ms) as i64 } else { -1 },
            u8::from(self.state == LinkState::Sync),
            self.read_offset,
            self.offset,
        );
        if self.state == LinkState::Sync {
            out.push_str(&self.transfer.info_lines());
        }
        if !self.link_up() {
            let down = if self.down_since_ms == 0 {
                -1
            } else {
                secs(self.down_since_ms) as i64
            };
            let _ = write!(out, "master_link_down_since_seconds:{down}\r\n");
        }
        let _ = write!(
            out,
            "slave_priority:{}\r\nslave_read_only:{}\r\nreplica_announced:{}\r\n",
            config.replica.priority,
            u8::from(config.replica.read_only),
            u8::from(config.replica.announced),
        );
        out
    }

    /// ROLE for a replica: `slave`, host, port, state, offset.
    pub(crate) fn role(&self) -> Option<crate::protocol::Reply> {
        use crate::protocol::Reply;
        let primary = self.primary.as_ref()?;
        let offset = if self.link_up() { self.offset } else { -1 };
        Some(Reply::Array(vec![
            Reply::bulk("slave"),
            Reply::Bulk(bytes::Bytes::from(primary.host.clone())),
            Reply::Int(primary.port.into()),
            Reply::bulk(self.state.role_word()),
            Reply::Int(offset),
        ]))
    }
}

/// `replicaof`'s canonical text (`host port`, empty for none) as a primary.
pub(crate) fn parse_replicaof(text: &str) -> Option<Primary> {
    let (host, port) = text.split_once(' ')?;
    Some(Primary {
        host: host.to_string(),
        port: port.parse().ok()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state() -> ReplicaState {
        ReplicaState::new(&Config::default(), "a".repeat(REPLID_LEN))
    }

    #[test]
    fn a_primary_becoming_a_replica_asks_to_continue_its_own_history() {
        let mut s = state();
        s.offset = 41;
        s.follow(
            Primary {
                host: "h".into(),
                port: 7,
            },
            0,
        );
        assert_eq!(s.psync_request(), ("a".repeat(REPLID_LEN), 42));
        assert_eq!(s.state.role_word(), "connect");
    }

    #[test]
    fn a_lost_link_caches_its_position_and_a_promotion_shifts_the_ids() {
        let mut s = state();
        s.follow(
            Primary {
                host: "h".into(),
                port: 7,
            },
            0,
        );
        s.synced("b".repeat(REPLID_LEN), 100, 0);
        s.offset = 150;
        s.link_lost(5);
        assert_eq!(s.psync_request(), ("b".repeat(REPLID_LEN), 151));
        s.continued(Some("c".repeat(REPLID_LEN)), 6);
        assert_eq!(
            (s.replid.clone(), s.replid2.clone(), s.second_offset),
            ("c".repeat(40), "b".repeat(40), 151)
        );
        s.promote("d".repeat(REPLID_LEN));
        assert_eq!(
            (s.replid.as_str(), s.replid2.as_str(), s.second_offset),
            (&*"d".repeat(40), &*"c".repeat(40), 151)
        );
        assert!(!s.is_replica());
    }

    #[test]
    fn the_directive_makes_a_replica_that_asks_for_a_full_resync() {
        let mut config = Config::default();
        config.replica.replicaof = "127.0.0.1 6379".into();
        let s = ReplicaState::new(&config, "a".repeat(REPLID_LEN));
        assert_eq!(
            s.primary,
            Some(Primary {
                host: "127.0.0.1".into(),
                port: 6379
            })
        );
        assert_eq!(s.psync_request(), ("?".into(), -1));
    }
}
