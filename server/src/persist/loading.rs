//! Loading the RDB file at start, or a replica's full resync, while
//! clients are served (Redis's `server.loading`): the file is parsed off the engine lock, clients that
//! connect meanwhile are answered `-LOADING` by admission (but for the
//! commands flagged `loading`: INFO, for one, with the `loading_*`
//! fields), and the parsed keys are installed under the lock at the end.
//!
//! The progress lives in atomics so the parsing thread reports it without
//! the engine; INFO reads it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// How far a load has come (INFO persistence's `loading_*` fields).
#[derive(Debug, Default)]
pub(crate) struct Loading {
    /// A load is in progress: admission refuses all but `loading` commands
    /// (unless it is `asynchronous`).
    active: AtomicBool,
    /// The load builds a dataset beside the one clients use (a replica's
    /// `repl-diskless-load swapdb` resync of the same history, Redis's
    /// `async_loading`): clients go on being served meanwhile.
    asynchronous: AtomicBool,
    /// Unix seconds at its start (`loading_start_time`).
    start_secs: AtomicU64,
    /// The file's size (`loading_total_bytes`).
    total_bytes: AtomicU64,
    /// The bytes parsed so far (`loading_loaded_bytes`).
    loaded_bytes: AtomicU64,
    /// The `used-mem` aux field of the file (`loading_rdb_used_mem`).
    rdb_used_mem: AtomicU64,
}

impl Loading {
    /// A load of `total_bytes` starts at `now_secs`.
    pub(crate) fn begin(&self, total_bytes: u64, now_secs: u64) {
        self.begin_as(total_bytes, now_secs, false);
    }

    /// A load starts, asynchronous (INFO `async_loading:1`, clients served)
    /// or not.
    pub(crate) fn begin_as(&self, total_bytes: u64, now_secs: u64, asynchronous: bool) {
        self.asynchronous.store(asynchronous, Ordering::Relaxed);
        self.start_secs.store(now_secs, Ordering::Relaxed);
        self.total_bytes.store(total_bytes, Ordering::Relaxed);
        self.loaded_bytes.store(0, Ordering::Relaxed);
        self.rdb_used_mem.store(0, Ordering::Relaxed);
        self.active.store(true, Ordering::Release);
    }

    /// `bytes` of the file have been parsed.
    pub(crate) fn progress(&self, bytes: u64) {
        self.loaded_bytes.store(bytes, Ordering::Relaxed);
    }

    /// The file says it was written by a server using `bytes` of memory.
    pub(crate) fn rdb_used_mem(&self, bytes: u64) {
        self.rdb_used_mem.store(bytes, Ordering::Relaxed);
    }

    /// The load is over (done or failed).
    pub(crate) fn end(&self) {
        self.active.store(false, Ordering::Release);
    }

    /// A load clients must wait for runs (they get `-LOADING`).
    pub(crate) fn is_active(&self) -> bool {
        self.active.load(Ordering::Acquire) && !self.asynchronous.load(Ordering::Relaxed)
    }

    /// INFO persistence's `loading:` and `async_loading:` values and, while
    /// either is on, the lines Redis adds at the section's end (its
    /// estimate of the time left).
    pub(crate) fn info(&self, now_secs: u64) -> (u8, u8, String) {
        if !self.active.load(Ordering::Acquire) {
            return (0, 0, String::new());
        }
        let asynchronous = self.asynchronous.load(Ordering::Relaxed);
        let start = self.start_secs.load(Ordering::Relaxed);
        let total = self.total_bytes.load(Ordering::Relaxed);
        let loaded = self.loaded_bytes.load(Ordering::Relaxed);
        let used_mem = self.rdb_used_mem.load(Ordering::Relaxed);
        let (perc, remaining) = if total > 0 {
            (loaded as f64 / total as f64 * 100.0, total.saturating_sub(loaded))
        } else if used_mem > 0 {
            // The memory figure is a poor estimate of the size: never 100 %.
            let perc = (loaded as f64 / used_mem as f64 * 100.0).min(99.99);
            (perc, used_mem.saturating_sub(loaded).max(1))
        } else {
            (0.0, 1)
        };
        let elapsed = now_secs.saturating_sub(start);
        // Redis's figure: one second when nothing has elapsed yet.
        let eta = if elapsed == 0 {
            1
        } else {
            elapsed.saturating_mul(remaining) / (loaded + 1)
        };
        let lines = format!(
            "loading_start_time:{start}\r\nloading_total_bytes:{total}\r\nloading_rdb_used_mem:{used_mem}\r\nloading_loaded_bytes:{loaded}\r\nloading_loaded_perc:{perc:.2}\r\nloading_eta_seconds:{eta}\r\n"
        );
        (u8::from(!asynchronous), u8::from(asynchronous), lines)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_shows_the_fields_only_while_loading() {
        let loading = Loading::default();
        assert_eq!(loading.info(100), (0, 0, String::new()));
        loading.begin(1000, 100);
        loading.progress(250);
        let (flag, asynchronous, lines) = loading.info(102);
        assert_eq!((flag, asynchronous), (1, 0));
        assert!(lines.contains("loading_start_time:100\r\n"), "{lines}");
        assert!(lines.contains("loading_loaded_perc:25.00\r\n"), "{lines}");
        // 2 s for 250 bytes: 750 left take about 6 s.
        assert!(lines.contains("loading_eta_seconds:5\r\n"), "{lines}");
        loading.end();
        assert_eq!(loading.info(103).0, 0);
    }
}
