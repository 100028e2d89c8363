//! The one source of time for expiry and `TIME`.
//!
//! Nothing else in coordis reads the system clock for keyspace purposes, so a
//! test can later swap in a clock it moves by hand.

use std::fmt::Debug;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

/// Wall-clock time in unix microseconds.
pub trait Clock: Send + Sync + Debug + 'static {
    /// The current time, unix microseconds.
    fn now_us(&self) -> u64;

    /// The current time, unix milliseconds (what expiry compares).
    fn now_ms(&self) -> u64 {
        self.now_us() / 1000
    }

    /// For a clock that jumps (a manual one): a receiver that sees every
    /// move, so that whatever sleeps until a time on this clock (blocked
    /// clients' timeouts) looks again. `None` for a clock that only runs.
    fn moved(&self) -> Option<tokio::sync::watch::Receiver<()>> {
        None
    }

    /// The clock as a [`VirtualClock`], for the test-control commands.
    fn as_virtual(&self) -> Option<&VirtualClock> {
        None
    }
}

/// The system's wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    /// `clock_gettime(CLOCK_REALTIME)` read directly: every batch reads the
    /// clock once, and `SystemTime`'s `duration_since` and `Duration`
    /// arithmetic cost about as much again as the read itself.
    #[cfg(target_os = "linux")]
    fn now_us(&self) -> u64 {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: a valid clock id and a pointer to a live timespec.
        let rc = unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
        if rc != 0 || ts.tv_sec < 0 {
            return 0;
        }
        ts.tv_sec as u64 * 1_000_000 + ts.tv_nsec as u64 / 1000
    }

    #[cfg(not(target_os = "linux"))]
    fn now_us(&self) -> u64 {
        use std::time::{SystemTime, UNIX_EPOCH};
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_micros() as u64)
            .unwrap_or(0)
    }
}

/// The test-control clock: real time (the default), real time shifted by
/// a jump (`jump_ms`, either way: a wall-clock step), or frozen (moving
/// only when told: `advance_ms`, `set_ms`). Every reader of time in the
/// server (key deadlines, TIME, Lua, blocking timeouts, CLIENT PAUSE) reads
/// it; the busy-script threshold alone stays on real time, since it
/// protects the server. Moving it wakes whatever sleeps until a time on it
/// ([`Clock::moved`]); a server's own handle on it
/// ([`crate::ServerClock`]) also settles the server at once: due keys
/// expire and due waiters are answered before the move returns.
///
/// `ManualClock` is the same clock, made frozen (`ManualClock::at_ms`).
#[derive(Debug)]
pub struct VirtualClock {
    /// The frozen time in unix µs, or `RUNNING` when the clock runs.
    frozen_us: AtomicU64,
    /// Added to the system clock while it runs (µs; a jump).
    offset_us: AtomicI64,
    /// Tells the servers using this clock that it moved.
    moves: tokio::sync::watch::Sender<()>,
}

/// The test clock's old name: a [`VirtualClock`], frozen when made with
/// [`VirtualClock::at_ms`].
pub type ManualClock = VirtualClock;

const RUNNING: u64 = u64::MAX;

impl Default for VirtualClock {
    /// Real time.
    fn default() -> VirtualClock {
        VirtualClock {
            frozen_us: AtomicU64::new(RUNNING),
            offset_us: AtomicI64::new(0),
            moves: tokio::sync::watch::Sender::new(()),
        }
    }
}

impl VirtualClock {
    /// A clock that follows real time until told otherwise.
    pub fn real() -> VirtualClock {
        VirtualClock::default()
    }

    /// A frozen clock standing at `unix_ms`.
    pub fn at_ms(unix_ms: u64) -> VirtualClock {
        let clock = VirtualClock::default();
        clock.frozen_us.store(unix_ms.saturating_mul(1000), Ordering::SeqCst);
        clock
    }

    /// Moves the clock forward by `ms`: a frozen clock now stands `ms`
    /// later; a running one runs `ms` ahead from now on.
    pub fn advance_ms(&self, ms: u64) {
        let us = ms.saturating_mul(1000);
        let frozen = self.frozen_us.load(Ordering::SeqCst);
        if frozen == RUNNING {
            self.offset_us
                .fetch_add(us.min(i64::MAX as u64) as i64, Ordering::SeqCst);
        } else {
            self.frozen_us
                .store(frozen.saturating_add(us).min(RUNNING - 1), Ordering::SeqCst);
        }
        self.moved_now();
    }

    /// Steps the clock by `ms`, forwards or backwards (a wall-clock jump),
    /// whether it runs or is frozen.
    pub fn jump_ms(&self, ms: i64) {
        let frozen = self.frozen_us.load(Ordering::SeqCst);
        if frozen == RUNNING {
            self.offset_us.fetch_add(ms.saturating_mul(1000), Ordering::SeqCst);
        } else {
            let us = (frozen as i128 + ms as i128 * 1000).clamp(0, RUNNING as i128 - 1);
            self.frozen_us.store(us as u64, Ordering::SeqCst);
        }
        self.moved_now();
    }

    /// Sets the clock to `unix_ms`; a running clock runs on from there.
    pub fn set_ms(&self, unix_ms: u64) {
        let target = unix_ms.saturating_mul(1000).min(RUNNING - 1);
        if self.frozen_us.load(Ordering::SeqCst) == RUNNING {
            self.offset_us
                .store(target as i64 - system_us() as i64, Ordering::SeqCst);
        } else {
            self.frozen_us.store(target, Ordering::SeqCst);
        }
        self.moved_now();
    }

    /// Stops the clock where it stands.
    pub fn freeze(&self) {
        let now = self.now_us();
        self.frozen_us.store(now.min(RUNNING - 1), Ordering::SeqCst);
        self.moved_now();
    }

    /// Lets a frozen clock run again from where it stands.
    pub fn resume(&self) {
        let frozen = self.frozen_us.swap(RUNNING, Ordering::SeqCst);
        if frozen != RUNNING {
            self.offset_us
                .store(frozen as i64 - system_us() as i64, Ordering::SeqCst);
        }
        self.moved_now();
    }

    /// Back to real time: running, no jump.
    pub fn reset(&self) {
        self.frozen_us.store(RUNNING, Ordering::SeqCst);
        self.offset_us.store(0, Ordering::SeqCst);
        self.moved_now();
    }

    /// Whether the clock is frozen.
    pub fn is_frozen(&self) -> bool {
        self.frozen_us.load(Ordering::SeqCst) != RUNNING
    }

    /// How far the clock is from real time, in ms (while it runs).
    pub fn offset_ms(&self) -> i64 {
        self.offset_us.load(Ordering::SeqCst) / 1000
    }

    fn moved_now(&self) {
        self.moves.send_replace(());
    }
}

fn system_us() -> u64 {
    SystemClock.now_us()
}

impl Clock for VirtualClock {
    fn now_us(&self) -> u64 {
        let frozen = self.frozen_us.load(Ordering::Relaxed);
        if frozen != RUNNING {
            return frozen;
        }
        let offset = self.offset_us.load(Ordering::Relaxed);
        (system_us() as i64).saturating_add(offset).max(0) as u64
    }

    fn moved(&self) -> Option<tokio::sync::watch::Receiver<()>> {
        Some(self.moves.subscribe())
    }

    fn as_virtual(&self) -> Option<&VirtualClock> {
        Some(self)
    }
}
