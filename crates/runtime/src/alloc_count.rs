//! Counting heap allocations, so that a generation can report how many its token loop made.
//!
//! A binary opts in by installing [`CountingAllocator`] as its global allocator:
//!
//! ```ignore
//! #[global_allocator]
//! static ALLOC: torchnative_runtime::CountingAllocator = torchnative_runtime::CountingAllocator;
//! ```
//!
//! It forwards to the system allocator and adds one relaxed atomic increment per `alloc`,
//! `alloc_zeroed` and `realloc` (frees are not counted). The count is process-wide: every thread
//! allocating during a measured interval is included.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

/// The system allocator, counting allocations (see the module docs).
pub struct CountingAllocator;

// SAFETY: every method forwards to `System` with the same arguments; the counter has no effect
// on the memory handed out.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract is `System.alloc`'s.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: `ptr` was allocated by this allocator, i.e. by `System`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated by this allocator, i.e. by `System`.
        unsafe { System.dealloc(ptr, layout) }
    }
}

/// Allocations counted so far in this process, or `None` when [`CountingAllocator`] is not the
/// global allocator. Any process that has got as far as loading a model has allocated, so a
/// count of zero means the counter is not installed.
pub fn allocation_count() -> Option<u64> {
    match ALLOCATIONS.load(Ordering::Relaxed) {
        0 => None,
        n => Some(n),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn not_installed_reads_none() {
        // The unit-test binary keeps the default allocator.
        let warm: Vec<u8> = Vec::with_capacity(16);
        assert!(warm.capacity() >= 16);
        assert_eq!(super::allocation_count(), None);
    }
}
