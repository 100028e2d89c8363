//! FAILOVER, the coordinated hand-over of the primary role to a replica
//! (Redis 7.0.15's `failoverCommand`, `updateFailoverStatus`,
//! `abortFailover`): the state machine, its pause and its hand-off.
//!
//! FAILOVER [TO host port [FORCE]] [TIMEOUT ms] holds every write (a pause
//! of its own, [`crate::blocked::hold_writes`]) and waits
//! (`waiting-for-sync`) until a replica — the named one, or the first to
//! get there — has acknowledged the whole stream. Then (`failover-in-progress`)
//! this server becomes that replica's replica and its link sends
//! `PSYNC <replid> <offset> FAILOVER`, which makes the target promote
//! itself and continue this server's history (PSYNC2); the target's
//! `+CONTINUE` (or `+FULLRESYNC`) ends the failover, and the writes it held
//! run, as a replica's. A timeout aborts it (with FORCE: hands over anyway),
//! FAILOVER ABORT too, and a target that refuses the PSYNC makes this server
//! a primary again.
//!
//! The timeout is on the server clock: a test moving its clock past it sees
//! the abort (or the forced hand-over) before the move returns. The check
//! runs on every acknowledgement, on the timer's ticks and at each settle.
//!
//! What must never happen here: I/O (the replica link does the PSYNC).

use crate::state::ServerState;
use crate::store::Db;

/// Where a FAILOVER is (Redis's `failover_state`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Phase {
    #[default]
    None,
    /// Writes are held until a replica acknowledged the whole stream.
    WaitForSync,
    /// This server follows the target; its PSYNC FAILOVER is under way.
    InProgress,
}

impl Phase {
    /// INFO's `master_failover_state`.
    pub(crate) fn word(self) -> &'static str {
        match self {
            Phase::None => "no-failover",
            Phase::WaitForSync => "waiting-for-sync",
            Phase::InProgress => "failover-in-progress",
        }
    }
}

/// The FAILOVER in force (in [`crate::repl::Replication`]).
#[derive(Debug, Default)]
pub(crate) struct Failover {
    pub(crate) phase: Phase,
    /// The replica to hand over to: given by TO, or the first one found
    /// caught up.
    target: Option<(String, u64)>,
    /// Server clock (unix ms) when waiting ends; 0: it waits until ABORT.
    end_ms: u64,
    /// At the timeout, hand over to the target even if it is behind.
    force: bool,
}

impl Failover {
    /// Whether a FAILOVER runs.
    pub(crate) fn active(&self) -> bool {
        self.phase != Phase::None
    }

    /// Whether the replication cron leaves its PING out: it would move the
    /// offset the replicas must reach (Redis skips it while a FAILOVER with
    /// a timeout holds the writes).
    pub(crate) fn holds_pings(&self) -> bool {
        self.active() && self.end_ms != 0
    }

    /// Starts the wait: writes are held from now on.
    pub(crate) fn start(&mut self, target: Option<(String, u64)>, end_ms: u64, force: bool) {
        *self = Failover {
            phase: Phase::WaitForSync,
            target,
            end_ms,
            force,
        };
    }
}

/// Ends the FAILOVER's state and its pause (Redis's `clearFailoverState`).
pub(crate) fn clear(dbs: &mut [Db], state: &mut ServerState) {
    state.repl.failover = Failover::default();
    crate::blocked::release_writes(dbs, state, crate::blocked::Hold::Failover);
}

/// Aborts a FAILOVER (Redis's `abortFailover`): one already handing over
/// makes this server a primary again.
pub(crate) fn abort(dbs: &mut [Db], state: &mut ServerState, why: &str) {
    let f = &state.repl.failover;
    if !f.active() {
        return;
    }
    match &f.target {
        Some((host, port)) => tracing::info!("FAILOVER to {host}:{port} aborted: {why}"),
        None => tracing::info!("FAILOVER to any replica aborted: {why}"),
    }
    if f.phase == Phase::InProgress {
        crate::cmd::replicaof::promote_server(dbs, state);
    }
    clear(dbs, state);
}

/// The target answered the PSYNC FAILOVER: accepted ends the FAILOVER,
/// refused aborts it.
pub(crate) fn handed_over(dbs: &mut [Db], state: &mut ServerState, accepted: bool) {
    if state.repl.failover.phase != Phase::InProgress {
        return;
    }
    if accepted {
        clear(dbs, state);
    } else {
        abort(dbs, state, "Failover target rejected psync request");
    }
}

/// The wait's check (Redis's `updateFailoverStatus`): the timeout, then
/// whether the target (or any replica) acknowledged the whole stream.
pub(crate) fn update(dbs: &mut [Db], state: &mut ServerState) {
    if state.repl.failover.phase != Phase::WaitForSync {
        return;
    }
    let now = state.clock.now_ms();
    let f = &state.repl.failover;
    if f.end_ms != 0 && f.end_ms <= now {
        if let (true, Some((host, port))) = (f.force, f.target.clone()) {
            tracing::info!("FAILOVER to {host}:{port} time out exceeded, failing over.");
            hand_over(dbs, state, host, port);
        } else {
            abort(dbs, state, "Replica never caught up before timeout");
        }
        return;
    }
    let offset = state.repl.offset();
    let replicas = state.repl.replicas();
    let caught_up = match &f.target {
        Some((host, port)) => replicas
            .iter()
            .find(|r| r.matches(host, *port))
            .filter(|r| r.ack_offset() == offset)
            .map(|_| (host.clone(), *port)),
        None => replicas
            .iter()
            .find(|r| r.ack_offset() == offset)
            .map(|r| (r.ip.clone(), r.port)),
    };
    if let Some((host, port)) = caught_up {
        tracing::info!("Failover target {host}:{port} is synced, failing over.");
        hand_over(dbs, state, host, port);
    }
}

/// This server becomes the target's replica; its link's PSYNC carries
/// FAILOVER while the phase says so.
fn hand_over(dbs: &mut [Db], state: &mut ServerState, host: String, port: u64) {
    state.repl.failover.phase = Phase::InProgress;
    state.repl.failover.target = Some((host.clone(), port));
    let primary = crate::replica::Primary {
        host,
        port: port as u16,
    };
    crate::cmd::replicaof::follow_server(dbs, state, primary);
}
