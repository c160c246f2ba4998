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

/// The spin pool for callers outside the rayon pool (see `spin`), with the pid and the thread
/// count it was built for.
static SPIN_POOL: RwLock<Option<(u32, usize, Arc<spin::SpinPool>)>> = RwLock::new(None);

/// The spin pool matching the kernel pool's thread count, built on first use (and again after
/// `set_num_threads` or in a forked child); `None` if the OS refuses threads.
fn spin_pool(threads: usize) -> Option<Arc<spin::SpinPool>> {
    let pid = std::process::id();
    if let Some((owner, n, pool)) = SPIN_POOL.read().unwrap_or_else(|e| e.into_inner()).as_ref() {
        if *owner == pid && *n == threads {
            return Some(Arc::clone(pool));
        }
    }
    let mut slot = SPIN_POOL.write().unwrap_or_else(|e| e.into_inner());
    if let Some((owner, n, pool)) = slot.as_ref() {
        if *owner == pid && *n == threads {
            return Some(Arc::clone(pool));
        }
    }
    let pool = Arc::new(spin::SpinPool::new(threads - 1).ok()?);
    if let Some((owner, _, old)) = slot.replace((pid, threads, Arc::clone(&pool))) {
        if owner != pid {
            // Inherited through fork: its threads do not exist here (as for `POOL`).
            std::mem::forget(old);
        }
    }
    Some(pool)
}

/// Runs `f(0) .. f(tasks - 1)` in parallel: on the spin pool when the caller is outside the
/// rayon pool, else on rayon (inside it, rayon's own join is cheap and nested pools would
/// oversubscribe the cores).
fn run_tasks(pool: &rayon::ThreadPool, tasks: usize, f: &(dyn Fn(usize) + Sync)) {
    if rayon::current_thread_index().is_none() {
        if let Some(spin) = spin_pool(pool.current_num_threads()) {
            spin.run(tasks, f);
            return;
        }
    }
    pool.install(|| (0..tasks).into_par_iter().for_each(f));
}

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
    if rayon::current_thread_index().is_none() {
        // Outside the rayon pool: the spin pool, over `TASKS_PER_THREAD` tasks per thread of
        // contiguous chunks (taken dynamically, which balances uneven chunks).
        let per_task = chunks.div_ceil(tasks);
        let len = out.len();
        let base = SharedMut(out.as_mut_ptr());
        run_tasks(&pool, chunks.div_ceil(per_task), &|t| {
            for c in t * per_task..((t + 1) * per_task).min(chunks) {
                let start = c * chunk_len;
                let end = (start + chunk_len).min(len);
                // SAFETY: chunks are disjoint ranges of `out`, each visited by one task, and
                // `out` is borrowed mutably until every task has returned.
                let chunk =
                    unsafe { std::slice::from_raw_parts_mut(base.ptr().add(start), end - start) };
                f(c, chunk);
            }
        });
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
    run_tasks(&pool, tasks, &|t| {
        let start = t * per_task;
        f(start..(start + per_task).min(n_items))
    });
}

/// A raw output pointer shared by tasks that write provably disjoint parts of it.
#[derive(Clone, Copy)]
pub(crate) struct SharedMut<T>(pub *mut T);
// SAFETY: users only write disjoint index ranges from different tasks (see each call site).
unsafe impl<T: Send> Send for SharedMut<T> {}
unsafe impl<T: Send> Sync for SharedMut<T> {}

impl<T> SharedMut<T> {
    /// The pointer (a method, so closures capture the whole `Sync` wrapper, not the field).
    pub(crate) fn ptr(&self) -> *mut T {
        self.0
    }
}

/// Kernels called from a thread outside the rayon pool (the torch face: every op comes from
/// Python's thread) would each pay an injection into the pool, a futex wake of its workers and
/// a wake of the blocked caller: on a 2-core machine that cost more than the second core gave
/// (the face's decode ran as fast on 1 thread as on 2). For them, `SpinPool` runs an op's tasks
/// OpenMP-style: the caller takes tasks itself, and `threads - 1` workers spin briefly between
/// ops (so back-to-back ops find them awake) before they sleep on a condition variable.
pub(crate) mod spin {
    use std::panic::{catch_unwind, AssertUnwindSafe};
    use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering::*};
    use std::sync::{Arc, Condvar, Mutex};
    use std::time::{Duration, Instant};

    /// How long an idle worker spins before it sleeps: longer than the Python-side gap between
    /// two ops, far shorter than the gap between two tokens.
    const SPIN: Duration = Duration::from_micros(200);

    /// One op's tasks; lives on the caller's stack while the caller waits for it.
    struct Job<'a> {
        f: &'a (dyn Fn(usize) + Sync),
        n: usize,
        next: AtomicUsize,
        done: AtomicUsize,
        panicked: AtomicBool,
    }

    impl Job<'_> {
        /// Take and run tasks until none is left.
        fn work(&self) {
            loop {
                let i = self.next.fetch_add(1, Relaxed);
                if i >= self.n {
                    return;
                }
                if catch_unwind(AssertUnwindSafe(|| (self.f)(i))).is_err() {
                    self.panicked.store(true, Relaxed);
                }
                self.done.fetch_add(1, Release);
            }
        }
    }

    #[derive(Default)]
    struct Shared {
        /// Bumped for every job (and at shutdown); workers wait for it to change.
        epoch: AtomicU64,
        /// The current job, or null; only dereferenced while counted in `in_job`.
        job: AtomicPtr<Job<'static>>,
        in_job: AtomicUsize,
        sleeping: AtomicUsize,
        shutdown: AtomicBool,
        lock: Mutex<()>,
        wake: Condvar,
        /// One job at a time; a second caller (or a task calling a kernel) runs inline.
        submit: Mutex<()>,
    }

    pub(crate) struct SpinPool {
        shared: Arc<Shared>,
    }

    impl SpinPool {
        /// A pool whose jobs run on the caller and `workers` threads.
        pub(crate) fn new(workers: usize) -> std::io::Result<SpinPool> {
            let shared = Arc::new(Shared::default());
            for i in 0..workers {
                let s = Arc::clone(&shared);
                std::thread::Builder::new()
                    .name(format!("torchnative-spin-{i}"))
                    .spawn(move || worker(&s))?;
            }
            Ok(SpinPool { shared })
        }

        /// Runs `f(0) .. f(n - 1)`, each once, on the caller and the workers; returns when all
        /// are done. A panic in any of them is raised here after every task has finished.
        pub(crate) fn run(&self, n: usize, f: &(dyn Fn(usize) + Sync)) {
            let s = &*self.shared;
            let one_at_a_time = match s.submit.try_lock() {
                Ok(g) => g,
                // A task panicked under an earlier job: the pool itself is consistent.
                Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
                Err(std::sync::TryLockError::WouldBlock) => {
                    (0..n).for_each(f);
                    return;
                }
            };
            let job = Job {
                f,
                n,
                next: AtomicUsize::new(0),
                done: AtomicUsize::new(0),
                panicked: AtomicBool::new(false),
            };
            // The pointer is withdrawn (and no worker holds it) before `job` goes out of scope.
            s.job.store((&job as *const Job).cast_mut().cast(), SeqCst);
            s.epoch.fetch_add(1, SeqCst);
            if s.sleeping.load(SeqCst) > 0 {
                let _l = s.lock.lock().unwrap_or_else(|e| e.into_inner());
                s.wake.notify_all();
            }
            job.work();
            let mut spins = 0u32;
            while job.done.load(Acquire) < n {
                backoff(&mut spins);
            }
            s.job.store(std::ptr::null_mut(), SeqCst);
            while s.in_job.load(SeqCst) != 0 {
                backoff(&mut spins);
            }
            drop(one_at_a_time);
            if job.panicked.load(Relaxed) {
                panic!("a kernel task panicked (see the message above)");
            }
        }
    }

    impl Drop for SpinPool {
        fn drop(&mut self) {
            let s = &*self.shared;
            s.shutdown.store(true, SeqCst);
            s.epoch.fetch_add(1, SeqCst);
            let _l = s.lock.lock().unwrap_or_else(|e| e.into_inner());
            s.wake.notify_all();
        }
    }

    /// Spin, then yield: a worker the OS descheduled (a busy machine) gets the core back.
    fn backoff(spins: &mut u32) {
        *spins = spins.saturating_add(1);
        if *spins < 4096 {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }

    fn worker(s: &Shared) {
        // From the pool's first epoch, not the current one: a worker that starts late still
        // joins the job that may already be running.
        let mut seen = 0;
        loop {
            let start = Instant::now();
            let mut spins = 0u32;
            loop {
                let e = s.epoch.load(Acquire);
                if e != seen {
                    seen = e;
                    break;
                }
                spins = spins.wrapping_add(1);
                if !spins.is_multiple_of(64) || start.elapsed() < SPIN {
                    std::hint::spin_loop();
                    continue;
                }
                let mut g = s.lock.lock().unwrap_or_else(|e| e.into_inner());
                s.sleeping.fetch_add(1, SeqCst);
                while s.epoch.load(SeqCst) == seen {
                    g = s.wake.wait(g).unwrap_or_else(|e| e.into_inner());
                }
                s.sleeping.fetch_sub(1, SeqCst);
            }
            if s.shutdown.load(SeqCst) {
                return;
            }
            s.in_job.fetch_add(1, SeqCst);
            let job = s.job.load(SeqCst);
            if !job.is_null() {
                // SAFETY: the caller keeps the job alive until it has withdrawn the pointer
                // and seen `in_job` at zero; we are counted in `in_job`.
                unsafe { (*job).work() };
            }
            s.in_job.fetch_sub(1, SeqCst);
        }
    }
}
