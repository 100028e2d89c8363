//! Running under an init system, as redis-server does: `daemonize` (the
//! process forks to the background and the command returns), `pidfile`,
//! and `supervised` (systemd's readiness notification, upstart's stop).
//! The supervisor found is the library's to know too: INFO shows it, and
//! the server tells systemd `STOPPING=1` and the final save's status as it
//! stops.

use std::io;

use coordis::internals::{notify_systemd, Supervisor};

/// The supervisor `supervised` names and the environment confirms (Redis's
/// `redisIsSupervised`: systemd is confirmed by sending it the loading
/// status), with the line Redis logs about it; `None` when there is none.
pub(crate) fn detect(mode: &str) -> (Option<Supervisor>, Option<&'static str>) {
    let upstart = std::env::var_os("UPSTART_JOB").is_some();
    let systemd = std::env::var_os("NOTIFY_SOCKET").is_some();
    let wanted = match mode {
        "upstart" if upstart => Supervisor::Upstart,
        "upstart" => return (None, Some("upstart supervision requested, but UPSTART_JOB not found!")),
        "auto" if upstart => Supervisor::Upstart,
        "systemd" | "auto" if systemd => Supervisor::Systemd,
        "systemd" => {
            return (
                None,
                Some("systemd supervision requested or auto-detected, but NOTIFY_SOCKET not found!"),
            )
        }
        _ => return (None, None),
    };
    let found = match wanted {
        Supervisor::Upstart => {
            // So that no child of ours takes the job for its own.
            std::env::remove_var("UPSTART_JOB");
            (Some(Supervisor::Upstart), None)
        }
        Supervisor::Systemd => match notify_systemd("STATUS=Redis is loading...\n") {
            Ok(()) => (
                Some(Supervisor::Systemd),
                Some("Supervised by systemd. Please make sure you set appropriate values for TimeoutStartSec and TimeoutStopSec in your service unit."),
            ),
            Err(_) => (None, None),
        },
    };
    if let Some(supervisor) = found.0 {
        coordis::internals::set_supervisor(supervisor);
    }
    found
}

/// Tells the supervisor the server accepts connections (Redis's
/// `redisCommunicateSystemd` / `raise(SIGSTOP)` after `initServer`);
/// `replica` words systemd's status as Redis does for a replica.
pub(crate) fn ready(supervisor: Supervisor, replica: bool) {
    match supervisor {
        Supervisor::Systemd => {
            let status = if replica {
                "STATUS=Ready to accept connections in read-only mode. Waiting for MASTER <-> REPLICA sync\n"
            } else {
                "STATUS=Ready to accept connections\n"
            };
            for message in [status, "READY=1\n"] {
                if let Err(e) = notify_systemd(message) {
                    tracing::warn!("Can't send notification to systemd: {e}");
                }
            }
        }
        Supervisor::Upstart => {
            tracing::info!("supervised by upstart, will stop to signal readiness.");
            // SAFETY: raising a signal at this process has no
            // preconditions; upstart continues it.
            unsafe {
                libc::raise(libc::SIGSTOP);
            }
        }
    }
}

/// Goes to the background as Redis's `daemonize`: the parent exits 0 at
/// once, the child leads a session of its own with stdin, stdout and
/// stderr on /dev/null (so with `logfile ""` nothing is logged). Call
/// before any thread starts.
pub(crate) fn daemonize() -> io::Result<()> {
    // SAFETY: no other thread exists yet (the runtime, the signal thread
    // and the log's writers start later), so the child is a full copy.
    match unsafe { libc::fork() } {
        -1 => return Err(io::Error::last_os_error()),
        0 => {}
        _ => std::process::exit(0),
    }
    // SAFETY: plain system calls on descriptors this process owns.
    unsafe {
        libc::setsid();
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR, 0);
        if null != -1 {
            for fd in [libc::STDIN_FILENO, libc::STDOUT_FILENO, libc::STDERR_FILENO] {
                libc::dup2(null, fd);
            }
            if null > libc::STDERR_FILENO {
                libc::close(null);
            }
        }
    }
    Ok(())
}

/// Redis's pid file when daemonized without `pidfile` (`CONFIG_DEFAULT_PID_FILE`).
const DEFAULT_PID_FILE: &str = "/var/run/redis.pid";

/// The pid file, written at start (best effort, as Redis's
/// `createPidFile`) and removed when dropped at exit.
pub(crate) struct PidFile(String);

impl PidFile {
    /// Writes it when `pidfile` is set or the server went to the
    /// background (then at Redis's default path if none is set).
    pub(crate) fn create(pidfile: &str, background: bool) -> Option<PidFile> {
        if pidfile.is_empty() && !background {
            return None;
        }
        let path = if pidfile.is_empty() { DEFAULT_PID_FILE } else { pidfile };
        if let Err(e) = std::fs::write(path, format!("{}\n", std::process::id())) {
            tracing::warn!("Failed to write PID file: {}", coordis::internals::strerror(&e));
        }
        Some(PidFile(path.to_string()))
    }
}

impl Drop for PidFile {
    fn drop(&mut self) {
        tracing::info!("Removing the pid file.");
        let _ = std::fs::remove_file(&self.0);
    }
}
