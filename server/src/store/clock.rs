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
