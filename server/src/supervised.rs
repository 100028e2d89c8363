//! The init system supervising the process (`supervised`), as
//! `coordis-server` found it at start: INFO's `process_supervised`, and
//! what systemd hears as the server stops (`STOPPING=1`, the final save's
//! status), as Redis's `redisCommunicateSystemd` tells it. Process-wide,
//! as supervision is: a server embedded in a test is never supervised.
//!
//! Also the start of every shutdown's story in the log, "User requested
//! shutdown...", which Redis writes before the final save.

use std::io;
use std::sync::atomic::{AtomicU8, Ordering};

/// An init system the process answers to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Supervisor {
    /// `Type=notify`: messages on `$NOTIFY_SOCKET`.
    Systemd,
    /// `expect stop`: the process stops itself once ready.
    Upstart,
}

/// 0: none; else the [`Supervisor`] as `1 + its index`.
static SUPERVISOR: AtomicU8 = AtomicU8::new(0);

/// `coordis-server` found `supervisor` at start.
pub fn set(supervisor: Supervisor) {
    let code = match supervisor {
        Supervisor::Systemd => 1,
        Supervisor::Upstart => 2,
    };
    SUPERVISOR.store(code, Ordering::Relaxed);
}

/// INFO's `process_supervised`.
pub(crate) fn info_name() -> &'static str {
    match SUPERVISOR.load(Ordering::Relaxed) {
        1 => "systemd",
        2 => "upstart",
        _ => "no",
    }
}

/// One datagram to systemd's notification socket (`@` starts an abstract
/// name, as sd_notify reads it).
pub fn notify_systemd(message: &str) -> io::Result<()> {
    use std::os::unix::net::UnixDatagram;
    let path = std::env::var("NOTIFY_SOCKET").map_err(|_| io::Error::other("NOTIFY_SOCKET not set"))?;
    let socket = UnixDatagram::unbound()?;
    if let Some(name) = path.strip_prefix('@') {
        use std::os::linux::net::SocketAddrExt;
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())?;
        socket.send_to_addr(message.as_bytes(), &addr)?;
    } else {
        socket.send_to(message.as_bytes(), &path)?;
    }
    Ok(())
}

/// Tells systemd `message` when it supervises the process.
pub(crate) fn tell_systemd(message: &str) {
    if SUPERVISOR.load(Ordering::Relaxed) == 1 {
        if let Err(e) = notify_systemd(message) {
            tracing::warn!("systemd supervision error: {e}");
        }
    }
}

/// A shutdown starts (Redis's `prepareForShutdown`): logged, and systemd
/// told `STOPPING=1`, once for the shutdown (a signal's announces it
/// before waiting for lagging replicas, its final save then does not); the
/// server's stop ([`stopping`]) does not log it again.
pub(crate) fn shutdown_requested(shared: &crate::state::Shared) {
    if !shared.shutdown_announced.swap(true, Ordering::Relaxed) {
        announce();
    }
}

/// The shutdown did not happen (its final save failed): the next one is
/// announced afresh.
pub(crate) fn shutdown_refused(shared: &crate::state::Shared) {
    shared.shutdown_announced.store(false, Ordering::Relaxed);
}

/// The server stops: announced unless the final save's decision did.
pub(crate) fn stopping(shared: &crate::state::Shared) {
    if !shared.shutdown_announced.swap(false, Ordering::Relaxed) {
        announce();
    }
}

fn announce() {
    tracing::warn!("User requested shutdown...");
    tell_systemd("STOPPING=1\n");
}
