//! What the operating system says about this process, for INFO: the OS
//! name, resident memory, what the allocator holds, the machine's memory and
//! CPU time.
//!
//! coordis allocates with the system allocator (glibc malloc on Linux, what
//! Redis calls `libc`) through the counting wrapper of [`crate::alloc`]:
//! the bytes allocated come from its counter (cheap enough to read before
//! every command, as `maxmemory` needs), the bytes the allocator holds from
//! `mallinfo2`.
//! They are the whole process's: a server embedded in a test process counts
//! the test's own allocations too. Off Linux/glibc the allocator figures
//! fall back to the resident size. `mallinfo2` walks the allocator's free
//! lists while holding its locks (about 1 ms with 200,000 free chunks), so
//! it is read when INFO or MEMORY asks, never on a timer.
//!
//! And what the process asks of the operating system for itself:
//! its `oom_score_adj` (`oom-score-adj`).

/// The allocator's own figures, as Redis's `allocator_*` fields name them.
#[derive(Clone, Copy, Debug, Default)]
pub struct Allocator {
    /// Bytes handed out to the program and not yet freed (INFO
    /// `used_memory`, `allocator_allocated`).
    pub allocated: u64,
    /// Bytes the allocator holds from the system, free chunks included
    /// (`allocator_active`).
    pub active: u64,
}

/// The allocator's figures now.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub(crate) fn allocator() -> Allocator {
    // SAFETY: mallinfo2 takes no arguments and returns a plain struct.
    let m = unsafe { libc::mallinfo2() };
    // `uordblks` is in-use heap; `hblkhd` is memory in mmap'd chunks (large
    // allocations), in use by definition; `arena` is the heap obtained.
    let allocated = if crate::alloc::installed() {
        crate::alloc::allocated()
    } else {
        (m.uordblks + m.hblkhd) as u64
    };
    Allocator {
        allocated,
        active: ((m.arena + m.hblkhd) as u64).max(allocated),
    }
}

/// The bytes allocated now: the counter when it is installed (a load),
/// else the allocator's figures (a walk: an embedding without the
/// counting allocator pays it per command only while `maxmemory` is set).
pub(crate) fn used_memory() -> u64 {
    if crate::alloc::installed() {
        crate::alloc::allocated()
    } else {
        allocator().allocated
    }
}

/// The allocator's figures now (no allocator statistics: the resident size).
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn allocator() -> Allocator {
    let rss = rss_bytes();
    let allocated = if crate::alloc::installed() {
        crate::alloc::allocated()
    } else {
        rss
    };
    Allocator { allocated, active: rss }
}

/// Returns free heap memory to the system where the allocator can
/// (MEMORY PURGE).
pub(crate) fn purge() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Resident set size in bytes (0 where `/proc` is missing).
pub(crate) fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1).and_then(|p| p.parse::<u64>().ok()))
        .map_or(0, |pages| pages * page_size())
}

fn page_size() -> u64 {
    // SAFETY: sysconf only reads a system constant.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n > 0 {
        n as u64
    } else {
        4096
    }
}

/// The machine's physical memory in bytes (INFO `total_system_memory`).
pub(crate) fn total_system_memory() -> u64 {
    // SAFETY: sysconf only reads a system constant.
    let pages = unsafe { libc::sysconf(libc::_SC_PHYS_PAGES) };
    if pages > 0 {
        pages as u64 * page_size()
    } else {
        0
    }
}

/// uname's system, release and machine, as Redis's INFO `os` prints them.
pub(crate) fn os_name() -> String {
    // SAFETY: uname fills the struct it is given; zeroed is a valid start,
    // and each field it fills is NUL-terminated.
    let u = unsafe {
        let mut u: libc::utsname = std::mem::zeroed();
        if libc::uname(&mut u) != 0 {
            return format!("{} {}", std::env::consts::OS, std::env::consts::ARCH);
        }
        u
    };
    let field = |f: &[libc::c_char]| {
        // SAFETY: the field is NUL-terminated (see above).
        unsafe { std::ffi::CStr::from_ptr(f.as_ptr()) }
            .to_string_lossy()
            .into_owned()
    };
    format!("{} {} {}", field(&u.sysname), field(&u.release), field(&u.machine))
}

/// The process's `(system, user)` CPU time in seconds (getrusage).
pub(crate) fn cpu_seconds() -> (f64, f64) {
    // SAFETY: getrusage fills the struct it is given; zeroed is a valid start.
    let usage = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut u);
        u
    };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (secs(usage.ru_stime), secs(usage.ru_utime))
}

/// The `oom_score_adj` the process had before the server first set it:
/// what `oom-score-adj relative` adds to, and what `no` gives back
/// (`None`: the server has not changed it, or gave it back).
static OOM_SCORE_BASE: parking_lot::Mutex<Option<i32>> = parking_lot::Mutex::new(None);

/// Where the kernel reads the process's OOM-killer adjustment.
const OOM_SCORE_ADJ: &str = "/proc/self/oom_score_adj";

/// Writes the process's `oom_score_adj` for its role (`replica` or the
/// primary's value) as `oom-score-adj` and its values say, as Redis's
/// `setOOMScoreAdj`: `yes` (relative) adds the value to the score the
/// process had before the server first changed it, `absolute` writes it
/// (both within -1000..=1000), and `no` gives the old score back if the
/// server had changed it. A failure is logged as Redis logs it; `Err`
/// tells CONFIG SET to restore the old settings.
pub(crate) fn set_oom_score_adj(config: &crate::Config, replica: bool) -> Result<(), ()> {
    let mut base = OOM_SCORE_BASE.lock();
    let value = match config.oom_score_adj.as_str() {
        "no" => match base.take() {
            Some(old) => old,
            None => return Ok(()),
        },
        how => {
            let start = match *base {
                Some(start) => start,
                None => {
                    let read = std::fs::read_to_string(OOM_SCORE_ADJ).inspect_err(|e| {
                        tracing::warn!("{}", crate::errors::os::oom_read_failed(e));
                    });
                    // As Redis's atoi: what is not a number reads 0.
                    let start = read.map_err(|_| ())?.trim().parse().unwrap_or(0);
                    *base = Some(start);
                    start
                }
            };
            let own = config.oom_score_adj_values[usize::from(replica)];
            let relative = if how == "absolute" { 0 } else { start };
            (own + relative).clamp(-1000, 1000)
        }
    };
    std::fs::write(OOM_SCORE_ADJ, format!("{value}\n")).map_err(|e| {
        tracing::warn!("{}", crate::errors::os::oom_write_failed(&e));
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_are_plausible() {
        let before = allocator();
        // Kept from the optimizer, which may drop an allocation only freed.
        let block = std::hint::black_box(vec![1u8; 64 << 20]);
        let during = allocator();
        assert!(
            // Other tests of this process allocate and free meanwhile: a margin.
            during.allocated >= before.allocated + (40 << 20),
            "{before:?} -> {during:?}"
        );
        assert!(during.active >= during.allocated);
        drop(block);
        assert!(rss_bytes() > 0);
        assert!(total_system_memory() > 0);
        assert!(os_name().split(' ').count() >= 3);
    }
}
