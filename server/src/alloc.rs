//! The counting allocator: the system allocator with one relaxed atomic
//! counter of the bytes handed out and not yet freed — the figure
//! `maxmemory` is compared with before every command, so it must cost a
//! load, never a walk of the allocator's lists (glibc's `mallinfo2` takes
//! about a millisecond; see [`crate::process`]).
//!
//! Everything the process allocates through Rust's allocator is counted:
//! the keyspace, the Lua VM (mlua allocates through it), client buffers,
//! the effects feed and the append-only file's buffer. What it owns and
//! must never do: it counts requested sizes (not glibc's chunk rounding,
//! which RSS shows) and never allocates itself.
//!
//! It is installed as the global allocator by the default
//! `counting-allocator` feature. An embedding with a global allocator of
//! its own turns the feature off; [`installed`] then says so and
//! `used_memory` falls back to the allocator's own figures.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Bytes allocated and not freed, process-wide.
static ALLOCATED: AtomicUsize = AtomicUsize::new(0);

/// The system allocator, counting (see the module docs).
pub(crate) struct Counting;

// SAFETY: every call is passed unchanged to the system allocator; the
// counter is only arithmetic on the sizes it was given.
unsafe impl GlobalAlloc for Counting {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract is System's.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            ALLOCATED.fetch_add(layout.size(), Ordering::Relaxed);
        }
        p
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract is System's.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            ALLOCATED.fetch_add(layout.size(), Ordering::Relaxed);
        }
        p
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract is System's.
        unsafe { System.dealloc(ptr, layout) };
        ALLOCATED.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract is System's.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            if new_size >= layout.size() {
                ALLOCATED.fetch_add(new_size - layout.size(), Ordering::Relaxed);
            } else {
                ALLOCATED.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
            }
        }
        p
    }
}

#[cfg(feature = "counting-allocator")]
#[global_allocator]
static GLOBAL: Counting = Counting;

/// Whether [`Counting`] is the process's allocator (its counter is then
/// above zero: the runtime has allocated before any server starts).
pub(crate) fn installed() -> bool {
    ALLOCATED.load(Ordering::Relaxed) != 0
}

/// Bytes allocated and not freed (0 when [`Counting`] is not installed).
#[inline]
pub(crate) fn allocated() -> u64 {
    ALLOCATED.load(Ordering::Relaxed) as u64
}
