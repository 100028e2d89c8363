//! The one source of time for expiry and `TIME`.
//!
//! Nothing else in coordis reads the system clock for keyspace purposes, so a
//! test can later swap in a clock it moves by hand.

use std::fmt::Debug;
use std::time::{SystemTime, UNIX_EPOCH};

/// Wall-clock time in unix microseconds.
pub trait Clock: Send + Sync + Debug + 'static {
    fn now_us(&self) -> u64;

    fn now_ms(&self) -> u64 {
        self.now_us() / 1000
    }

    /// For a clock that jumps (a manual one): a receiver that sees every
    /// move, so that whatever sleeps until a time on this clock (blocked
    /// clients' timeouts) looks again. `None` for a clock that only runs.
    fn moved(&self) -> Option<tokio::sync::watch::Receiver<()>> {
        None
    }
}

/// The system's wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_us(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_micros() as u64)
            .unwrap_or(0)
    }
}

/// A clock that moves only when told to: for tests of expiry and TTLs that
/// must not depend on the machine's speed.
#[derive(Debug)]
pub struct ManualClock {
    us: std::sync::atomic::AtomicU64,
    /// Tells the servers using this clock that it moved.
    moves: tokio::sync::watch::Sender<()>,
}

impl Default for ManualClock {
    fn default() -> ManualClock {
        ManualClock::at_ms(0)
    }
}

impl ManualClock {
    /// A clock standing at `unix_ms`.
    pub fn at_ms(unix_ms: u64) -> ManualClock {
        ManualClock {
            us: std::sync::atomic::AtomicU64::new(unix_ms * 1000),
            moves: tokio::sync::watch::Sender::new(()),
        }
    }

    /// Moves the clock forward by `ms` milliseconds. Blocked clients whose
    /// timeout it passes are answered shortly after (by the server's timer
    /// task, not before this returns).
    pub fn advance_ms(&self, ms: u64) {
        self.us.fetch_add(ms * 1000, std::sync::atomic::Ordering::SeqCst);
        self.moves.send_replace(());
    }
}

impl Clock for ManualClock {
    fn now_us(&self) -> u64 {
        self.us.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn moved(&self) -> Option<tokio::sync::watch::Receiver<()>> {
        Some(self.moves.subscribe())
    }
}
