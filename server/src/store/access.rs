//! Per-key access data, as Redis keeps it in the 24 bits of `robj.lru`:
//! under an LRU policy (or none) the LRU clock of the last access, in
//! seconds modulo 2^24; under an LFU policy the minute of the last
//! decrement (16 bits) and a logarithmic access counter (8 bits). The
//! clock is the server's ([`crate::store::Clock`]): a test that moves time
//! ages keys. This module owns the arithmetic (Redis's `LRU_CLOCK`,
//! `estimateObjectIdleTime`, `LFULogIncr`, `LFUDecrAndReturn`); the item
//! header stores the word ([`super::item::Item::access`]) and the keyspace
//! updates it on lookups ([`super::db::Db`]).

/// Bits of the access word (Redis's `LRU_BITS`).
pub(crate) const BITS: u32 = 24;
/// The largest LRU clock value (Redis's `LRU_CLOCK_MAX`).
pub(crate) const LRU_CLOCK_MAX: u32 = (1 << BITS) - 1;
/// Milliseconds per LRU clock tick (Redis's `LRU_CLOCK_RESOLUTION`).
pub(crate) const LRU_CLOCK_RESOLUTION_MS: u64 = 1000;
/// The counter a new key starts with under LFU (Redis's `LFU_INIT_VAL`),
/// so that a new key is not the first to go.
pub(crate) const LFU_INIT_VAL: u8 = 5;
/// The LFU minute clock wraps at 16 bits.
const LFU_MINUTES_MAX: u32 = 65535;

/// How accesses are recorded: what the policy and the LFU directives say,
/// copied into each database at the start of a batch with the clock.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Mode {
    /// An LFU policy is set (`allkeys-lfu`, `volatile-lfu`).
    pub lfu: bool,
    /// `lfu-log-factor`.
    pub log_factor: u32,
    /// `lfu-decay-time`, minutes per counter decrement (0: no decay).
    pub decay_time: u32,
}

/// Gives every database the clock, the access mode and the lazy-free
/// directives for the batch
/// about to run (one store each: the batch runs in an instant).
pub(crate) fn stamp(dbs: &mut [super::Db], config: &crate::config::Config, now_ms: u64) {
    let mode = crate::evict::access_mode(config);
    let lazy = crate::lazyfree::Lazy::of(config);
    for db in dbs {
        db.access = mode;
        db.lazy = lazy;
        db.clock_ms = now_ms;
    }
}

/// The LRU clock at `now_ms` (Redis's `LRU_CLOCK`).
pub(crate) fn lru_clock(now_ms: u64) -> u32 {
    ((now_ms / LRU_CLOCK_RESOLUTION_MS) & LRU_CLOCK_MAX as u64) as u32
}

/// Milliseconds since the access recorded as `lru` (Redis's
/// `estimateObjectIdleTime`, the clock wrapping once).
pub(crate) fn idle_ms(lru: u32, now_ms: u64) -> u64 {
    let clock = lru_clock(now_ms);
    let ticks = if clock >= lru {
        clock - lru
    } else {
        clock + (LRU_CLOCK_MAX - lru)
    };
    ticks as u64 * LRU_CLOCK_RESOLUTION_MS
}

/// The LFU minute clock at `now_ms` (Redis's `LFUGetTimeInMinutes`).
fn lfu_minutes(now_ms: u64) -> u32 {
    ((now_ms / 1000 / 60) & LFU_MINUTES_MAX as u64) as u32
}

/// Minutes since `ldt` on the wrapping minute clock (`LFUTimeElapsed`).
fn lfu_elapsed(ldt: u32, now_ms: u64) -> u32 {
    let now = lfu_minutes(now_ms);
    if now >= ldt {
        now - ldt
    } else {
        LFU_MINUTES_MAX - ldt + now
    }
}

/// The counter of the LFU word `word`, decayed by the periods passed
/// (`LFUDecrAndReturn`; OBJECT FREQ's answer, nothing stored).
pub(crate) fn lfu_decayed(word: u32, mode: Mode, now_ms: u64) -> u8 {
    let ldt = word >> 8;
    let counter = (word & 0xff) as u8;
    let periods = lfu_elapsed(ldt, now_ms).checked_div(mode.decay_time).unwrap_or(0);
    counter.saturating_sub(periods.min(u8::MAX as u32) as u8)
}

/// A logarithmic increment (`LFULogIncr`): the higher the counter, the
/// less likely an access raises it.
fn lfu_log_incr(counter: u8, log_factor: u32) -> u8 {
    if counter == u8::MAX {
        return counter;
    }
    let base = counter.saturating_sub(LFU_INIT_VAL) as f64;
    let p = 1.0 / (base * log_factor as f64 + 1.0);
    if fastrand::f64() < p {
        counter + 1
    } else {
        counter
    }
}

/// An LFU word of `counter` at `now_ms`.
pub(crate) fn lfu_word(counter: u8, now_ms: u64) -> u32 {
    (lfu_minutes(now_ms) << 8) | counter as u32
}

/// The word a new key starts with.
pub(crate) fn initial(mode: Mode, now_ms: u64) -> u32 {
    if mode.lfu {
        lfu_word(LFU_INIT_VAL, now_ms)
    } else {
        lru_clock(now_ms)
    }
}

/// The word after an access to a key whose word was `word` (Redis's
/// `lookupKey`: `updateLFU` or a fresh LRU clock).
pub(crate) fn touched(word: u32, mode: Mode, now_ms: u64) -> u32 {
    if mode.lfu {
        let counter = lfu_log_incr(lfu_decayed(word, mode, now_ms), mode.log_factor);
        lfu_word(counter, now_ms)
    } else {
        lru_clock(now_ms)
    }
}

/// The word RESTORE IDLETIME / an RDB's LRU opcode gives: last accessed
/// `idle_secs` ago (Redis's `objectSetLRUOrLFU`).
pub(crate) fn from_idle(idle_secs: u64, now_ms: u64) -> u32 {
    let ticks = (idle_secs.saturating_mul(1000) / LRU_CLOCK_RESOLUTION_MS) as i128;
    let mut abs = lru_clock(now_ms) as i128 - ticks;
    // Underflow wraps as Redis's does (`lru_abs += LRU_CLOCK_MAX`), kept
    // within the 24 bits for idle times beyond one wrap.
    if abs < 0 {
        abs = (abs + LRU_CLOCK_MAX as i128).rem_euclid(LRU_CLOCK_MAX as i128 + 1);
    }
    abs as u32
}

/// The eviction pool's score of a word: the larger, the better a
/// candidate (idle milliseconds under LRU, 255 minus the counter under LFU).
pub(crate) fn idle_score(word: u32, mode: Mode, now_ms: u64) -> u64 {
    if mode.lfu {
        255 - lfu_decayed(word, mode, now_ms) as u64
    } else {
        idle_ms(word, now_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LFU: Mode = Mode {
        lfu: true,
        log_factor: 10,
        decay_time: 1,
    };

    #[test]
    fn idle_time_follows_the_clock_and_wraps() {
        let t = 1_700_000_000_000;
        let w = lru_clock(t);
        assert_eq!(idle_ms(w, t), 0);
        assert_eq!(idle_ms(w, t + 61_000), 61_000);
        // Wrapping past 2^24 seconds still measures forward.
        let w = LRU_CLOCK_MAX - 1;
        let at = (LRU_CLOCK_MAX as u64 + 1 + 9) * 1000;
        assert_eq!(idle_ms(w, at), 10_000);
        assert_eq!(idle_ms(from_idle(3600, t), t), 3_600_000);
    }

    #[test]
    fn lfu_counter_grows_logarithmically_and_decays_per_minute() {
        let t = 1_700_000_000_000;
        let mut w = initial(LFU, t);
        assert_eq!(lfu_decayed(w, LFU, t), LFU_INIT_VAL);
        // About 14 steps are expected from 1,000 touches at log factor 10
        // (the n-th step takes 10n + 1 touches on average); seeded, so the
        // bounds below are checked on one fixed draw.
        fastrand::seed(7);
        for _ in 0..1000 {
            w = touched(w, LFU, t);
        }
        let c = lfu_decayed(w, LFU, t);
        assert!(c > LFU_INIT_VAL + 3 && c < 40, "{c}");
        assert_eq!(lfu_decayed(w, LFU, t + 3 * 60_000), c - 3);
        assert_eq!(lfu_decayed(w, LFU, t + 1000 * 60_000), 0);
        let still = Mode { decay_time: 0, ..LFU };
        assert_eq!(lfu_decayed(w, still, t + 1000 * 60_000), c);
    }
}
