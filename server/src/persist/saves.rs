//! When the RDB file is written and what the server says about it: the
//! `save` points checked on the persistence tick (Redis's `serverCron`),
//! the one entry point of background saves ([`background_save`]), the
//! synchronous save SAVE, SHUTDOWN, FLUSHALL and DEBUG RELOAD share
//! ([`save_now`]), the `stop-writes-on-bgsave-error` state admission
//! reads ([`writes_denied`]) and the INFO persistence counters.
//!
//! It owns the bookkeeping, never the format ([`super::rdb::disk`]) nor the
//! snapshot machinery: it must never hold the engine lock longer than the
//! save it was asked for.

use bytes::Bytes;

use crate::lua::Scripting;
use crate::persist::snapshot::{self, NotStarted};
use crate::state::ServerState;
use crate::store::Db;

/// Seconds a failed background save waits before a save point may try
/// again (Redis's `CONFIG_BGSAVE_RETRY_DELAY`).
pub(crate) const BGSAVE_RETRY_DELAY_SECS: u64 = 5;

/// The saving state INFO persistence and admission read.
#[derive(Debug)]
pub(crate) struct Saves {
    /// The last background save succeeded (Redis's `lastbgsave_status`;
    /// a successful SAVE sets it too). `false` with save points set and
    /// `stop-writes-on-bgsave-error yes` refuses writes with `-MISCONF`.
    pub(crate) last_bgsave_ok: bool,
    /// Unix seconds of the last background save's start (Redis's
    /// `lastbgsave_try`): a failed one is not retried by a save point for
    /// [`BGSAVE_RETRY_DELAY_SECS`]. 0: never tried.
    pub(crate) last_try_secs: u64,
    /// Saves started (SAVE and background saves): INFO `rdb_saves`.
    pub(crate) rdb_saves: u64,
    /// What the last load of an RDB file read: INFO
    /// `rdb_last_load_keys_loaded` / `rdb_last_load_keys_expired`.
    pub(crate) last_load_keys_loaded: u64,
    pub(crate) last_load_keys_expired: u64,
}

impl Default for Saves {
    fn default() -> Self {
        Saves {
            last_bgsave_ok: true,
            last_try_secs: 0,
            rdb_saves: 0,
            last_load_keys_loaded: 0,
            last_load_keys_expired: 0,
        }
    }
}

/// The function libraries a save writes.
pub(crate) fn libraries(scripting: Option<&Scripting>) -> Vec<Bytes> {
    match scripting {
        Some(s) => s.libraries().iter().map(|l| l.code.clone()).collect(),
        None => vec![],
    }
}

/// Whether save points may write files at all: an embedded server without
/// a `dir` keeps no files (its builder names one to persist).
pub(crate) fn automatic_saves_on(state: &ServerState) -> bool {
    !state.config.dir.is_empty() && !state.config.save_points.is_empty()
}

/// The synchronous save (Redis's `rdbSave`): SAVE, SHUTDOWN's final save,
/// FLUSHALL's save and DEBUG RELOAD. On success the changes since the last
/// save restart from 0, LASTSAVE moves and a failed background save is
/// forgiven (writes are accepted again).
pub(crate) fn save_now(dbs: &[Db], state: &mut ServerState, libraries: &[Bytes], now_ms: u64) -> Result<(), String> {
    let used = crate::process::allocator().allocated;
    crate::persist::rdb::disk::save(dbs, libraries, &state.config, now_ms, used)?;
    state.dirty_at_save = state.dirty;
    state.last_save_secs = now_ms / 1000;
    state.saves.last_bgsave_ok = true;
    Ok(())
}

/// Whether a shutdown with `flags` makes a final save (Redis's
/// `finishShutdown`: save points configured and not NOSAVE, or SAVE).
pub(crate) fn final_save_wanted(state: &ServerState, flags: crate::config::ShutdownFlags) -> bool {
    (automatic_saves_on(state) && !flags.nosave) || flags.save
}

/// The final save of a shutdown (Redis's `finishShutdown`, from
/// [`crate::shutdown::finish`]): a background save is killed first; then,
/// when save points exist (unless NOSAVE) or SAVE is given, a foreground
/// save. `Err`: it failed without FORCE, and the server must keep running.
pub(crate) fn final_save(
    dbs: &mut [Db],
    state: &mut ServerState,
    libraries: &[Bytes],
    now_ms: u64,
    flags: crate::config::ShutdownFlags,
) -> Result<(), ()> {
    crate::supervised::shutdown_requested(&state.shared);
    if state.bgsave.in_progress {
        tracing::warn!("There is a child saving an .rdb. Killing it!");
        snapshot::kill(dbs, state);
    }
    if final_save_wanted(state, flags) {
        tracing::info!("Saving the final RDB snapshot before exiting.");
        crate::supervised::tell_systemd("STATUS=Saving the final RDB snapshot\n");
        if save_now(dbs, state, libraries, now_ms).is_err() {
            if !flags.force {
                tracing::warn!("Error trying to save the DB, can't exit.");
                crate::supervised::tell_systemd("STATUS=Error trying to save the DB, can't exit.\n");
                crate::supervised::shutdown_refused(&state.shared);
                return Err(());
            }
            tracing::warn!("Error trying to save the DB. Exit anyway.");
        }
    }
    Ok(())
}

/// SAVE: [`save_now`], counted in `rdb_saves`.
pub(crate) fn save_command(
    dbs: &[Db],
    state: &mut ServerState,
    libraries: &[Bytes],
    now_ms: u64,
) -> Result<(), String> {
    state.saves.rdb_saves += 1;
    save_now(dbs, state, libraries, now_ms)
}

/// THE entry point of a background save (BGSAVE, save points, a
/// scheduled BGSAVE): Redis's `rdbSaveBackground`. It starts the forkless
/// snapshot's save ([`super::snapshot`]) and returns at once; the
/// bookkeeping of its end (`backgroundSaveDoneHandlerDisk`: LASTSAVE, the
/// changes counted from the start, the MISCONF state) runs when its walk
/// finishes. An engine that is not running behind its lock (no thread can
/// take it) saves synchronously instead, with the same bookkeeping.
pub(crate) fn background_save(
    dbs: &mut [Db],
    state: &mut ServerState,
    libraries: Vec<Bytes>,
    now_ms: u64,
) -> Result<(), NotStarted> {
    if state.bgsave.walking() {
        return Err(NotStarted::InProgress);
    }
    state.saves.rdb_saves += 1;
    state.saves.last_try_secs = now_ms / 1000;
    match snapshot::start_background_save(dbs, state, libraries.clone()) {
        Err(NotStarted::NoServer) => {}
        started => return started,
    }
    let dirty_before = state.dirty;
    tracing::info!("Background saving started");
    let used = crate::process::allocator().allocated;
    match crate::persist::rdb::disk::save(dbs, &libraries, &state.config, now_ms, used) {
        Ok(()) => {
            tracing::info!("Background saving terminated with success");
            state.dirty_at_save = dirty_before;
            state.last_save_secs = now_ms / 1000;
            state.saves.last_bgsave_ok = true;
        }
        Err(_) => {
            tracing::warn!("Background saving error");
            state.saves.last_bgsave_ok = false;
        }
    }
    Ok(())
}

/// Whether a failed background save was long enough ago for another
/// automatic one (Redis's `CONFIG_BGSAVE_RETRY_DELAY` check).
fn may_retry(state: &ServerState, now_secs: u64) -> bool {
    state.saves.last_bgsave_ok || now_secs.saturating_sub(state.saves.last_try_secs) > BGSAVE_RETRY_DELAY_SECS
}

/// The save points on the persistence tick (Redis's `serverCron`): the
/// first point whose changes and seconds are reached starts a background
/// save, unless the last one failed less than
/// [`BGSAVE_RETRY_DELAY_SECS`] ago. Time is the server clock's, so a test
/// that moves a virtual clock triggers it deterministically.
pub(crate) fn cron(dbs: &mut [Db], state: &mut ServerState, scripting: Option<&Scripting>, now_ms: u64) {
    let now = now_ms / 1000;
    // As serverCron: nothing starts while a save runs; a BGSAVE SCHEDULE
    // left pending (its save was killed) starts once none does.
    if state.bgsave.walking() || !may_retry(state, now) {
        return;
    }
    if state.bgsave.scheduled && !state.config.dir.is_empty() {
        let _ = background_save(dbs, state, libraries(scripting), now_ms);
        return;
    }
    if !automatic_saves_on(state) {
        return;
    }
    let changes = state.dirty - state.dirty_at_save;
    let since_save = now.saturating_sub(state.last_save_secs);
    let due = state
        .config
        .save_points
        .iter()
        .find(|p| changes >= p.changes && since_save > p.seconds)
        .copied();
    if let Some(point) = due {
        tracing::info!("{} changes in {} seconds. Saving...", point.changes, point.seconds);
        let _ = background_save(dbs, state, libraries(scripting), now_ms);
    }
}

/// Whether writes are refused with `-MISCONF` (Redis's
/// `writeCommandsDeniedByDiskError` for the RDB file): the last background
/// save failed, save points are set and `stop-writes-on-bgsave-error` is on.
pub(crate) fn writes_denied(state: &ServerState) -> bool {
    state.config.stop_writes_on_bgsave_error && !state.config.save_points.is_empty() && !state.saves.last_bgsave_ok
}
