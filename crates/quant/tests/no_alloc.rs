//! With the scratch reserved, `matmul` does not allocate (decode and prefill), on any path.
//! A counting global allocator sees every allocation in the process, rayon workers included.
//! The calls run inside the pool (`install`): called from outside, rayon's own injector queue
//! allocates a 1.5 KB block every 63 calls, which is rayon's, not ours.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use torchnative_quant::*;

struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::SeqCst);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn reserved_matmul_does_not_allocate() {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap();
    pool.install(check_no_allocation);
}

fn check_no_allocation() {
    // m = 24 reaches the prefill GEMM (every path with GEMM tiles), whose per-thread unpack
    // buffers are grown below.
    let (rows, cols, m) = (1000, 512, 24);
    let mut scratch = ActivationScratch::new();
    scratch.reserve(m, cols);
    // Which threads run GEMM tasks in a warm-up call is the scheduler's choice: grow every
    // pool thread's buffers explicitly.
    rayon::broadcast(|_| reserve_gemm_thread_buffers(cols));
    let x: Vec<f32> = (0..m * cols).map(|i| (i % 17) as f32 - 8.0).collect();
    let mut y = vec![0f32; m * rows];
    for ty in [
        GgmlType::Q4_1,
        GgmlType::Q8_0,
        GgmlType::Q4_K,
        GgmlType::Q6_K,
        GgmlType::F16,
    ] {
        let data = vec![0x11u8; rows * ty.row_bytes(cols).unwrap()];
        let w = PackedMatrix::new(ty, &data, rows, cols);
        for path in available_kernel_paths() {
            // Warm up, and make sure every worker has started (they initialise asynchronously)
            // before counting.
            matmul_with(path, &w, &x, m, &mut y, &mut scratch).unwrap();
            rayon::broadcast(|_| ());
            let before = ALLOCATIONS.load(Ordering::SeqCst);
            for mm in [1, 6, m] {
                matmul_with(
                    path,
                    &w,
                    &x[..mm * cols],
                    mm,
                    &mut y[..mm * rows],
                    &mut scratch,
                )
                .unwrap();
            }
            let after = ALLOCATIONS.load(Ordering::SeqCst);
            assert_eq!(
                after,
                before,
                "{ty} {path:?}: matmul allocated {} times",
                after - before
            );
        }
    }
}
