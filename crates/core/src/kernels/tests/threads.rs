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

/// Ops called from outside the rayon pool (the torch face's Python thread) run on the spin
/// pool, those called inside it (the runtime) on rayon: both visit every item once.
#[test]
fn both_executors_cover_every_item_once() {
    let check = || {
        let n = 10_000;
        let hits: Vec<AtomicUsize> = (0..n).map(|_| AtomicUsize::new(0)).collect();
        for_each_range(n, MIN_WORK_PER_TASK, 8, |r| {
            for i in r {
                hits[i].fetch_add(1, Ordering::Relaxed);
            }
        });
        assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 1));
    };
    check();
    crate::kernels::threads::install(check);
}

#[test]
fn spin_pool_uses_the_workers_and_the_caller() {
    // A private pool (the shared one may be busy with other tests, and then runs inline).
    let pool = crate::kernels::threads::spin::SpinPool::new(1).unwrap();
    let ids = std::sync::Mutex::new(std::collections::HashSet::new());
    let hits: Vec<AtomicUsize> = (0..16).map(|_| AtomicUsize::new(0)).collect();
    // Slow tasks: the worker surely wakes before the caller has taken them all.
    pool.run(16, &|i| {
        std::thread::sleep(std::time::Duration::from_millis(2));
        hits[i].fetch_add(1, Ordering::Relaxed);
        ids.lock().unwrap().insert(std::thread::current().id());
    });
    assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 1));
    let ids = ids.into_inner().unwrap();
    assert_eq!(ids.len(), 2, "the caller and the one worker");
    assert!(
        ids.contains(&std::thread::current().id()),
        "the caller takes tasks too"
    );
    // Back-to-back jobs after the worker went to sleep still complete.
    std::thread::sleep(std::time::Duration::from_millis(5));
    for _ in 0..100 {
        let n = AtomicUsize::new(0);
        pool.run(7, &|_| {
            n.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(n.load(Ordering::Relaxed), 7);
    }
}

#[test]
fn a_panicking_task_panics_the_caller_and_the_pool_goes_on() {
    let r = std::panic::catch_unwind(|| {
        for_each_range(64, MIN_WORK_PER_TASK, 1, |r| {
            if r.contains(&40) {
                panic!("task 40 fails");
            }
        })
    });
    assert!(r.is_err(), "the panic reached the caller");
    ranges_cover_every_item_once_and_respect_alignment();
    // A private pool: after a panicking job it still hands tasks to its worker.
    let pool = crate::kernels::threads::spin::SpinPool::new(1).unwrap();
    let r = std::panic::catch_unwind(|| pool.run(4, &|i| assert_ne!(i, 2, "task 2 fails")));
    assert!(r.is_err());
    let ids = std::sync::Mutex::new(std::collections::HashSet::new());
    pool.run(16, &|_| {
        std::thread::sleep(std::time::Duration::from_millis(2));
        ids.lock().unwrap().insert(std::thread::current().id());
    });
    assert_eq!(
        ids.into_inner().unwrap().len(),
        2,
        "caller and worker after a panic"
    );
}

#[test]
fn nested_and_concurrent_calls_complete() {
    // A task that calls a kernel (runs inline) and several threads calling at once (one uses
    // the pool, the others run inline): no deadlock, every item once.
    let total = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..50 {
                    for_each_range(8, MIN_WORK_PER_TASK, 1, |r| {
                        for _ in r {
                            for_each_range(4, MIN_WORK_PER_TASK, 1, |inner| {
                                total.fetch_add(inner.len(), Ordering::Relaxed);
                            });
                        }
                    });
                }
            });
        }
    });
    assert_eq!(total.load(Ordering::Relaxed), 4 * 50 * 8 * 4);
}
