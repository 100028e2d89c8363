//! The cheap monotonic clock [`crate::exec::call`] times commands with (as
//! Redis's `getMonotonicUs` reads the CPU's time-stamp counter).
//!
//! On x86-64 with an invariant TSC it reads the counter (about 20 cycles,
//! against about 60 for `clock_gettime` through the vDSO, twice per command);
//! the ticks per microsecond are measured once against [`Instant`].
//! Elsewhere, or without an invariant TSC, it is [`Instant`]. This clock
//! measures how long the server worked; it never decides anything a test
//! could observe on the server clock.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// A reading of the clock.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Stamp(u64);

/// How readings are turned into time: ns per TSC tick (×2³²), or `None`
/// for readings in ns since [`base`].
fn scale() -> &'static Option<u64> {
    static SCALE: OnceLock<Option<u64>> = OnceLock::new();
    SCALE.get_or_init(calibrate)
}

fn base() -> &'static Instant {
    static BASE: OnceLock<Instant> = OnceLock::new();
    BASE.get_or_init(Instant::now)
}

#[cfg(target_arch = "x86_64")]
fn calibrate() -> Option<u64> {
    use std::arch::x86_64::{__cpuid, _rdtsc};
    // Leaf 0x80000007 (bit 8: the TSC is invariant) is asked only after
    // leaf 0x80000000 says it exists.
    let invariant = __cpuid(0x8000_0000).eax >= 0x8000_0007 && __cpuid(0x8000_0007).edx & (1 << 8) != 0;
    if !invariant {
        return None;
    }
    let started = Instant::now();
    // SAFETY: RDTSC has no preconditions on x86-64.
    let t0 = unsafe { _rdtsc() };
    while started.elapsed() < Duration::from_millis(5) {
        std::hint::spin_loop();
    }
    // SAFETY: as above.
    let t1 = unsafe { _rdtsc() };
    let us = started.elapsed().as_nanos() as u64 / 1000;
    let ticks = t1.wrapping_sub(t0);
    (ticks > 0).then(|| {
        ((us as u128 * 1000) << 32)
            .checked_div(ticks as u128)
            .map_or(0, |m| m as u64)
    })
}

#[cfg(not(target_arch = "x86_64"))]
fn calibrate() -> Option<u64> {
    None
}

/// Measures the clock now (at the first start of a server) rather than at
/// the first command.
pub(crate) fn init() {
    let _ = base();
    let _ = scale();
}

/// The clock now.
#[inline]
pub(crate) fn now() -> Stamp {
    #[cfg(target_arch = "x86_64")]
    if scale().is_some() {
        // SAFETY: RDTSC has no preconditions on x86-64.
        return Stamp(unsafe { std::arch::x86_64::_rdtsc() });
    }
    Stamp(base().elapsed().as_nanos() as u64)
}

/// The time since `start`.
#[inline]
pub(crate) fn since(start: Stamp) -> Duration {
    let end = now();
    to_duration(end.0.saturating_sub(start.0))
}

/// Microseconds since an unspecified start (the machine's or the
/// process's), for deadlines kept as plain integers.
#[inline]
pub(crate) fn micros() -> u64 {
    to_duration(now().0).as_micros() as u64
}

/// A count of readings' units as time.
#[inline]
fn to_duration(units: u64) -> Duration {
    match *scale() {
        Some(ns_per_tick) => Duration::from_nanos(((units as u128 * ns_per_tick as u128) >> 32) as u64),
        None => Duration::from_nanos(units),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measures_about_what_instant_measures() {
        init();
        let (a, us, i) = (now(), micros(), Instant::now());
        std::thread::sleep(Duration::from_millis(20));
        let (ours, ours_us, real) = (since(a), micros() - us, i.elapsed());
        let diff = ours.as_secs_f64() - real.as_secs_f64();
        assert!(diff.abs() < 0.005, "ours {ours:?}, Instant {real:?}");
        let diff_us = ours_us as f64 / 1e6 - real.as_secs_f64();
        assert!(diff_us.abs() < 0.005, "ours {ours_us} µs, Instant {real:?}");
    }
}
