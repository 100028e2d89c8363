//! The shutdown sequence shared by SHUTDOWN and SIGTERM/SIGINT, as Redis
//! 7.0's `prepareForShutdown`, `isReadyToShutdown`, `finishShutdown` and
//! `abortShutdown`.
//!
//! Unless NOW is given or `shutdown-timeout` is 0, a shutdown that finds a
//! replica short of the whole stream waits for it, up to `shutdown-timeout`
//! seconds: writes are held (a hold of its own,
//! [`crate::blocked::Hold::Shutdown`], as Redis's `PAUSE_DURING_SHUTDOWN`:
//! a FAILOVER's hold and a CLIENT PAUSE end apart from it), the replicas
//! are asked for an ACK, INFO shows `shutdown_in_milliseconds`, and the
//! SHUTDOWN clients stay blocked. Once every replica caught up or the time is over, the shutdown
//! finishes: the lagging replicas are logged, then the final save. A final
//! save that fails without FORCE, or SHUTDOWN ABORT, cancels it: the
//! blocked SHUTDOWN clients get Redis's error and the server goes on.
//!
//! The wait of SHUTDOWN is finished by the server's cron ([`cron`], as
//! Redis's `serverCron`); a signal's by the signal's own task
//! ([`crate::net::signal_shutdown`]), which also stops a busy script first.
//! SHUTDOWN ABORT cancels either.

use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::config::ShutdownFlags;
use crate::net::clients::CloseSignal;
use crate::state::ServerState;
use crate::store::Db;

/// A shutdown waiting for lagging replicas (Redis's `shutdown_mstime` and
/// `shutdown_flags`).
#[derive(Debug)]
pub(crate) struct Pending {
    /// When it stops waiting: `shutdown-timeout` after it began, on the
    /// machine's clock (the replicas catch up in real time, whatever a
    /// test does with the server's clock).
    deadline: Instant,
    flags: ShutdownFlags,
    /// Begun by a signal: the signal's task finishes it, not [`cron`].
    by_signal: bool,
}

impl Pending {
    /// INFO's `shutdown_in_milliseconds` (negative once the time is over).
    pub(crate) fn remaining_ms(&self) -> i64 {
        let now = Instant::now();
        match self.deadline.checked_duration_since(now) {
            Some(left) => left.as_millis() as i64,
            None => -(now.duration_since(self.deadline).as_millis() as i64),
        }
    }

    /// Whether it began with a signal.
    pub(crate) fn by_signal(&self) -> bool {
        self.by_signal
    }
}

/// How [`begin`] went.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Begun {
    /// Finished: the server is to stop.
    Finished,
    /// Waiting for lagging replicas.
    Waiting,
    /// The final save failed without FORCE: the server goes on.
    Failed,
    /// A shutdown is waiting already (this one adds nothing to it).
    InProgress,
}

/// Whether a replica has not acknowledged the whole stream (Redis's
/// `isReadyToShutdown`, negated).
pub(crate) fn replicas_lagging(server: &ServerState) -> bool {
    let offset = server.repl.offset();
    server.repl.replicas().iter().any(|r| r.ack_offset() < offset)
}

/// A shutdown with `flags` starts (Redis's `prepareForShutdown`): it waits
/// for lagging replicas ([`Begun::Waiting`]) unless NOW, or finishes now.
pub(crate) fn begin(
    dbs: &mut [Db],
    server: &mut ServerState,
    libraries: &[Bytes],
    now_ms: u64,
    flags: ShutdownFlags,
    by_signal: bool,
) -> Begun {
    if server.shutdown_pending.is_some() {
        return Begun::InProgress;
    }
    crate::supervised::shutdown_requested(&server.shared);
    let timeout = server.config.shutdown_timeout;
    if !flags.now && timeout != 0 && replicas_lagging(server) {
        server.shutdown_pending = Some(Pending {
            deadline: Instant::now() + Duration::from_secs(timeout),
            flags,
            by_signal,
        });
        // Redis asks unless a pause holds the clients already.
        if !crate::blocked::clients_paused(server) {
            server.effects.request_ack();
            server.flush_effects();
        }
        crate::blocked::hold_writes(dbs, server, crate::blocked::Hold::Shutdown);
        tracing::info!("{}", crate::errors::shutdown::WAITING_FOR_REPLICAS);
        return Begun::Waiting;
    }
    match finish(dbs, server, libraries, now_ms, flags) {
        Ok(()) => Begun::Finished,
        Err(()) => Begun::Failed,
    }
}

/// Whether the waiting shutdown may finish now: every replica caught up,
/// or its time is over. `None`: no shutdown waits (ABORT cancelled it).
pub(crate) fn ready(server: &ServerState) -> Option<bool> {
    let pending = server.shutdown_pending.as_ref()?;
    Some(Instant::now() >= pending.deadline || !replicas_lagging(server))
}

/// The waiting shutdown's flags, no longer waiting; `None` when none waits.
pub(crate) fn take_pending(server: &mut ServerState) -> Option<ShutdownFlags> {
    server.shutdown_pending.take().map(|p| p.flags)
}

/// The end of a shutdown (Redis's `finishShutdown`, up to the final
/// save): the lagging replicas logged, then the final save. `Err`: it
/// failed without FORCE; the shutdown is cancelled ([`cancel`]) and the
/// server goes on.
pub(crate) fn finish(
    dbs: &mut [Db],
    server: &mut ServerState,
    libraries: &[Bytes],
    now_ms: u64,
    flags: ShutdownFlags,
) -> Result<(), ()> {
    log_replicas(server);
    if crate::persist::saves::final_save(dbs, server, libraries, now_ms, flags).is_err() {
        tracing::warn!("{}", crate::errors::shutdown::FAILED_LOG);
        cancel(dbs, server);
        return Err(());
    }
    Ok(())
}

/// Each replica short of the whole stream, then how many are in sync, as
/// Redis logs them when it shuts down.
fn log_replicas(server: &ServerState) {
    let replicas = server.repl.replicas();
    if replicas.is_empty() {
        return;
    }
    let offset = server.repl.offset();
    let mut lagging = 0;
    for r in &replicas {
        if r.ack_offset() < offset {
            lagging += 1;
            let online = r.state() == crate::repl::State::Online;
            let lag = if online { r.lag_secs() } else { 0 };
            let name = format!("{}:{}", r.ip, r.port);
            let behind = offset - r.ack_offset();
            tracing::warn!(
                "{}",
                crate::errors::shutdown::lagging_replica(&name, behind, lag, r.state().name())
            );
        }
    }
    tracing::info!(
        "{}",
        crate::errors::shutdown::in_sync(replicas.len() - lagging, replicas.len())
    );
}

/// The shutdown does not happen (Redis's `cancelShutdown`): the clients
/// blocked in SHUTDOWN get Redis's error, held writes go on, and the next
/// shutdown is announced afresh.
pub(crate) fn cancel(dbs: &mut [Db], server: &mut ServerState) {
    server.shutdown_pending = None;
    crate::supervised::shutdown_refused(&server.shared);
    for client in server.clients.values_mut() {
        if crate::blocked::waits_for_shutdown(client) {
            let reply = crate::errors::err(crate::errors::SHUTDOWN_FAILED);
            crate::blocked::answer(dbs, &mut server.blocking, client, reply);
        }
    }
    crate::blocked::release_writes(dbs, server, crate::blocked::Hold::Shutdown);
}

/// SHUTDOWN ABORT: the waiting shutdown is cancelled (Redis's
/// `abortShutdown`); false when none waits.
pub(crate) fn abort(dbs: &mut [Db], server: &mut ServerState) -> bool {
    if server.shutdown_pending.is_none() {
        return false;
    }
    cancel(dbs, server);
    tracing::info!("{}", crate::errors::shutdown::ABORTED);
    true
}

/// The server's cron: a SHUTDOWN waiting for replicas finishes once they
/// caught up or its time is over (Redis's `serverCron`), and the server
/// stops ([`stop_serving`]).
pub(crate) fn cron(dbs: &mut [Db], server: &mut ServerState, libraries: &[Bytes], now_ms: u64, stop: &CloseSignal) {
    if server.shutdown_pending.as_ref().is_none_or(Pending::by_signal) || ready(server) != Some(true) {
        return;
    }
    let Some(flags) = take_pending(server) else {
        return;
    };
    if finish(dbs, server, libraries, now_ms, flags).is_ok() {
        server.shutdown_requested = true;
        stop_serving(dbs, server, stop);
    }
}

/// A SHUTDOWN succeeded: a walk still running is stopped (logged as Redis
/// logs killing its child) and the server stops serving.
pub(crate) fn stop_serving(dbs: &mut [Db], server: &mut ServerState, stop: &CloseSignal) {
    if server.bgsave.in_progress {
        tracing::warn!("There is a child saving an .rdb. Killing it!");
    }
    if server.bgsave.rewriting {
        tracing::warn!("There is a child rewriting the AOF. Killing it!");
    }
    crate::persist::snapshot::kill(dbs, server);
    stop.close();
}
