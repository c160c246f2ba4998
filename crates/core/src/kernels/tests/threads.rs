//! The threading policy: every item is visited exactly once, whatever the split.

use crate::kernels::threads::{for_each_chunk_mut, for_each_range, task_count, MIN_WORK_PER_TASK};
use std::sync::atomic::{AtomicUsize, Ordering};

#[test]
fn ranges_cover_every_item_once_and_respect_alignment() {
    for &(n, work, align) in &[
        (1, 1, 1),
        (100, 1, 16),
        (1000, MIN_WORK_PER_TASK, 16),
        (49152, 576, 16),
        (37, 1 << 20, 4),
    ] {
        let hits: Vec<AtomicUsize> = (0..n).map(|_| AtomicUsize::new(0)).collect();
        for_each_range(n, work, align, |r| {
            assert!(r.start % align == 0, "range {r:?} not aligned to {align}");
            for i in r {
                hits[i].fetch_add(1, Ordering::Relaxed);
            }
        });
        assert!(
            hits.iter().all(|h| h.load(Ordering::Relaxed) == 1),
            "n={n} work={work}"
        );
    }
}

#[test]
fn chunks_get_their_own_index_and_cover_the_slice() {
    for &(len, chunk, work) in &[(10, 3, 1), (4096 * 32, 4096, 4096), (576 * 9, 64, 1 << 16)] {
        let mut v = vec![usize::MAX; len];
        for_each_chunk_mut(&mut v, chunk, work, |i, c| c.fill(i));
        for (idx, &x) in v.iter().enumerate() {
            assert_eq!(x, idx / chunk, "len={len} chunk={chunk} at {idx}");
        }
    }
}

#[test]
fn small_work_runs_inline_and_large_work_splits() {
    assert_eq!(task_count(MIN_WORK_PER_TASK - 1, 8), 1);
    assert_eq!(task_count(usize::MAX, 1), 1);
    assert!(
        task_count(100 * MIN_WORK_PER_TASK, 2) > 2,
        "several stealable tasks per thread"
    );
}
