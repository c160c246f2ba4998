//! The threading policy of every kernel, in one place: one persistent rayon pool for the
//! process, and one rule for how much work a task must have before it is worth splitting.

use super::KernelError;
use rayon::prelude::*;
use std::sync::{Arc, RwLock};

/// Minimum number of f32 multiply-adds (or element visits) a task should get before splitting
/// pays for the ~2-5 µs a fork/join costs on a busy pool.
pub(crate) const MIN_WORK_PER_TASK: usize = 32 * 1024;

/// The pool and the process that started its threads: a child made by `fork` (a DataLoader
/// worker) inherits the pool's memory but none of its threads, so it builds its own.
static POOL: RwLock<Option<(u32, Arc<rayon::ThreadPool>)>> = RwLock::new(None);

fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn build_pool(n: usize) -> Result<Arc<rayon::ThreadPool>, KernelError> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(n)
        .thread_name(|i| format!("torchnative-kernel-{i}"))
        .build()
        .map(Arc::new)
        .map_err(|e| KernelError::ThreadPool(e.to_string()))
}

/// Replaces the pool, leaking one inherited from the parent process: its threads do not exist
/// here, so nothing about it may be touched, dropping included.
fn set_pool(
    slot: &mut Option<(u32, Arc<rayon::ThreadPool>)>,
    pid: u32,
    pool: Arc<rayon::ThreadPool>,
) {
    if let Some((owner, old)) = slot.replace((pid, pool)) {
        if owner != pid {
            std::mem::forget(old);
        }
    }
}

/// The process-wide kernel pool, built on first use with the available parallelism (and
/// again in a forked child, with as many threads as the parent's pool had).
pub(crate) fn pool() -> Arc<rayon::ThreadPool> {
    let pid = std::process::id();
    if let Some((owner, pool)) = POOL.read().unwrap_or_else(|e| e.into_inner()).as_ref() {
        if *owner == pid {
            return Arc::clone(pool);
        }
    }
    let mut slot = POOL.write().unwrap_or_else(|e| e.into_inner());
    let threads = match slot.as_ref() {
        Some((owner, pool)) if *owner == pid => return Arc::clone(pool),
        Some((_, inherited)) => inherited.current_num_threads(),
        None => default_threads(),
    };
    // Building a pool only fails when the OS refuses threads; fall back to one thread inline.
    let pool = build_pool(threads)
        .or_else(|_| build_pool(1))
        .expect("cannot start even one kernel thread");
    set_pool(&mut slot, pid, Arc::clone(&pool));
    pool
}

/// Sets the number of threads of the kernel pool (replacing the pool; call it at start-up,
/// not per token). `n` must be at least 1.
pub fn set_num_threads(n: usize) -> Result<(), KernelError> {
    if n == 0 {
        return Err(KernelError::InvalidThreadCount { requested: n });
    }
    let pool = build_pool(n)?;
    set_pool(
        &mut POOL.write().unwrap_or_else(|e| e.into_inner()),
        std::process::id(),
        pool,
    );
    Ok(())
}

/// Number of threads kernels split work over (default: the available parallelism).
pub fn num_threads() -> usize {
    pool().current_num_threads()
}

/// Tasks per thread when work is plentiful: more than one, so a thread that the OS
/// preempts (shared machines) leaves its remaining tasks to be stolen instead of stalling
/// the whole op for a scheduler quantum.
const TASKS_PER_THREAD: usize = 4;

/// How many tasks `total_work` units of work should be split into (1 means run inline).
pub(crate) fn task_count(total_work: usize, threads: usize) -> usize {
    if threads <= 1 {
        return 1;
    }
    (total_work / MIN_WORK_PER_TASK).clamp(1, TASKS_PER_THREAD * threads)
}

/// Runs `f(chunk_index, chunk)` over `out` split into chunks of `chunk_len` elements (the
/// last may be shorter), in parallel on the pool when `work_per_chunk * chunks` is large
/// enough, else inline. Chunks are grouped so each task gets roughly equal work.
pub(crate) fn for_each_chunk_mut<T, F>(out: &mut [T], chunk_len: usize, work_per_chunk: usize, f: F)
where
    T: Send,
    F: Fn(usize, &mut [T]) + Sync,
{
    let chunk_len = chunk_len.max(1);
    let chunks = out.len().div_ceil(chunk_len);
    if chunks == 0 {
        return;
    }
    let pool = pool();
    let tasks = task_count(
        work_per_chunk.saturating_mul(chunks),
        pool.current_num_threads(),
    )
    .min(chunks);
    if tasks <= 1 {
        for (i, chunk) in out.chunks_mut(chunk_len).enumerate() {
            f(i, chunk);
        }
        return;
    }
    // Rayon splits adaptively (work stealing) down to `min_chunks`, which balances uneven
    // chunks such as causal attention rows.
    let min_chunks = (MIN_WORK_PER_TASK / work_per_chunk.max(1)).max(1);
    pool.install(|| {
        out.par_chunks_mut(chunk_len)
            .enumerate()
            .with_min_len(min_chunks)
            .for_each(|(i, chunk)| f(i, chunk))
    });
}

/// Runs `f` on the kernel pool (so nested rayon calls, e.g. inside the gemm crate, use it).
/// The runtime runs a whole forward pass in it, so kernels of other crates that use rayon (the
/// quantized matmul) share these threads instead of a second pool.
pub fn install<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    pool().install(f)
}

/// Runs `f(range)` over `0..n_items` split into contiguous ranges whose bounds are multiples
/// of `align` (except the end), in parallel when `n_items * work_per_item` is large enough.
pub(crate) fn for_each_range<F>(n_items: usize, work_per_item: usize, align: usize, f: F)
where
    F: Fn(std::ops::Range<usize>) + Sync,
{
    if n_items == 0 {
        return;
    }
    let pool = pool();
    let align = align.max(1);
    let tasks = task_count(
        n_items.saturating_mul(work_per_item),
        pool.current_num_threads(),
    );
    let per_task = n_items.div_ceil(tasks).div_ceil(align) * align;
    let tasks = n_items.div_ceil(per_task);
    if tasks <= 1 {
        f(0..n_items);
        return;
    }
    pool.install(|| {
        (0..tasks).into_par_iter().for_each(|t| {
            let start = t * per_task;
            f(start..(start + per_task).min(n_items))
        })
    });
}

/// A raw output pointer shared by tasks that write provably disjoint parts of it.
#[derive(Clone, Copy)]
pub(crate) struct SharedMut<T>(pub *mut T);
// SAFETY: users only write disjoint index ranges from different tasks (see each call site).
unsafe impl<T: Send> Send for SharedMut<T> {}
unsafe impl<T: Send> Sync for SharedMut<T> {}
