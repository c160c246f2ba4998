//! `Linear` (y = x·Wᵀ + b) with f32 / f16 / bf16 weights, and a general strided f32 gemm.
//!
//! Decode (m == 1) is a gemv bound by weight bandwidth: rows of W are split over the pool and
//! each task computes 4 rows at a time against one x vector (half weights widened in
//! registers). Prefill (any m, every weight type) uses the same kernel with MRxNR register
//! tiles of (x rows, W rows).
//!
//! **Batch invariance.** On a given ISA level (`W` lanes), output `y[i][j]` is bit-identical
//! for every m, every position of row i in the batch and every thread count: each output is
//! one vector accumulator `acc = 0; for each W-wide chunk c of k in order: acc = fma(x[c],
//! w[c], acc)` (the last chunk zero-padded), then `S::hsum(acc)` (the level's fixed tree),
//! then `+ bias[j]` (`+ 0.0` without bias). The gemv and every tile shape compute exactly
//! this; a tile only runs several such chains side by side. (The scalar level: one f32 chain
//! `acc += x[p] * w[p]` in p order, then the bias.) That is why f32 with large m no longer
//! goes to the `gemm` crate, whose packed order differs with m: `matmul_f32` still does.

use super::cpu::{active_isa, Isa};
use super::simd::Simd;
use super::threads::{self, SharedMut};
use half::{bf16, f16};

/// A weight element that can be widened to f32 vectors in registers.
pub(crate) trait WeightElem: Copy + Send + Sync + 'static {
    unsafe fn load<S: Simd>(p: *const Self) -> S::V;
    unsafe fn load_partial<S: Simd>(p: *const Self, n: usize) -> S::V;
    fn to_f32(self) -> f32;
}

impl WeightElem for f32 {
    #[inline(always)]
    unsafe fn load<S: Simd>(p: *const f32) -> S::V {
        S::load(p)
    }
    #[inline(always)]
    unsafe fn load_partial<S: Simd>(p: *const f32, n: usize) -> S::V {
        S::load_partial(p, n)
    }
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self
    }
}

impl WeightElem for f16 {
    #[inline(always)]
    unsafe fn load<S: Simd>(p: *const f16) -> S::V {
        S::load_f16(p as *const u16)
    }
    #[inline(always)]
    unsafe fn load_partial<S: Simd>(p: *const f16, n: usize) -> S::V {
        S::load_f16_partial(p as *const u16, n)
    }
    #[inline(always)]
    fn to_f32(self) -> f32 {
        f16::to_f32(self)
    }
}

impl WeightElem for bf16 {
    #[inline(always)]
    unsafe fn load<S: Simd>(p: *const bf16) -> S::V {
        S::load_bf16(p as *const u16)
    }
    #[inline(always)]
    unsafe fn load_partial<S: Simd>(p: *const bf16, n: usize) -> S::V {
        S::load_bf16_partial(p as *const u16, n)
    }
    #[inline(always)]
    fn to_f32(self) -> f32 {
        // Exact: bf16 is the top half of an f32.
        f32::from_bits((self.to_bits() as u32) << 16)
    }
}

/// `y[m x n] = x[m x k] · w[n x k]ᵀ (+ bias[n])`, PyTorch `Linear` layout, all row-major and
/// contiguous. Lengths: `x >= m*k`, `w >= n*k`, `y >= m*n`, `bias >= n` (asserted: a short
/// slice is a caller bug, never input-dependent once the runtime validated shapes at load).
pub fn linear_f32(
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    y: &mut [f32],
    m: usize,
    k: usize,
    n: usize,
) {
    linear_with(active_isa(), x, w, bias, y, Dims { m, k, n })
}

/// [`linear_f32`] with binary16 weights, widened to f32 in registers (f32 accumulation).
pub fn linear_f16(
    x: &[f32],
    w: &[f16],
    bias: Option<&[f32]>,
    y: &mut [f32],
    m: usize,
    k: usize,
    n: usize,
) {
    linear_with(active_isa(), x, w, bias, y, Dims { m, k, n })
}

/// [`linear_f32`] with bfloat16 weights, widened to f32 with a shift in registers (exact; f32
/// accumulation — `vdpbf16ps` is not used because it would round x to bf16).
pub fn linear_bf16(
    x: &[f32],
    w: &[bf16],
    bias: Option<&[f32]>,
    y: &mut [f32],
    m: usize,
    k: usize,
    n: usize,
) {
    linear_with(active_isa(), x, w, bias, y, Dims { m, k, n })
}

/// Problem size of a `Linear`: `x` is m x k, `w` is n x k.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Dims {
    pub m: usize,
    pub k: usize,
    pub n: usize,
}

pub(crate) fn linear_with<T: WeightElem>(
    isa: Isa,
    x: &[f32],
    w: &[T],
    bias: Option<&[f32]>,
    y: &mut [f32],
    d: Dims,
) {
    let Dims { m, k, n } = d;
    // Checked products: a wrapped size would let the raw-pointer kernels run out of bounds.
    let size = |a: usize, b: usize| a.checked_mul(b).expect("linear: size overflows usize");
    let (x_need, w_need, y_need) = (size(m, k), size(n, k), size(m, n));
    assert!(
        x.len() >= x_need,
        "linear: x has {} elements, needs m*k = {x_need}",
        x.len()
    );
    assert!(
        w.len() >= w_need,
        "linear: w has {} elements, needs n*k = {w_need}",
        w.len()
    );
    assert!(
        y.len() >= y_need,
        "linear: y has {} elements, needs m*n = {y_need}",
        y.len()
    );
    assert!(
        bias.is_none_or(|b| b.len() >= n),
        "linear: bias shorter than n = {n}"
    );
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        for row in y[..m * n].chunks_mut(n) {
            match bias {
                Some(b) => row.copy_from_slice(&b[..n]),
                None => row.fill(0.0),
            }
        }
        return;
    }
    let out = SharedMut(y.as_mut_ptr());
    // Split W's rows; each task owns output columns [j0, j1) of every row of y.
    threads::for_each_range(n, m * k, 16, |cols| {
        let task = TileTask {
            x: x.as_ptr(),
            w: w.as_ptr(),
            bias,
            y: out,
            d,
            cols,
        };
        #[allow(unreachable_patterns)]
        match super::cpu::supported_or_lower(isa) {
            // SAFETY: the level is supported; bounds were asserted above; tasks write
            // disjoint column ranges of y.
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => unsafe { tile_task_avx512(task) },
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => unsafe { tile_task_avx2(task) },
            #[cfg(target_arch = "aarch64")]
            Isa::Neon => unsafe { tile_task_neon(task) },
            _ => unsafe { tile_task_scalar(task) },
        }
    });
}

/// One task's share of a `Linear`: output columns `cols` of every row.
struct TileTask<'a, T> {
    x: *const f32,
    w: *const T,
    bias: Option<&'a [f32]>,
    y: SharedMut<f32>,
    d: Dims,
    cols: std::ops::Range<usize>,
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")]
unsafe fn tile_task_avx512<T: WeightElem>(t: TileTask<'_, T>) {
    unsafe { tile_task::<super::simd::Avx512, T, 4, 4>(t) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn tile_task_avx2<T: WeightElem>(t: TileTask<'_, T>) {
    // 16 ymm registers: 2x4 accumulators + 4 weight vectors + x leaves room.
    unsafe { tile_task::<super::simd::Avx2, T, 2, 4>(t) }
}

#[cfg(target_arch = "aarch64")]
#[target_feature(enable = "neon")]
unsafe fn tile_task_neon<T: WeightElem>(t: TileTask<'_, T>) {
    // 32 q registers: 4x4 accumulators + 4 weight vectors + x leaves room.
    unsafe { tile_task::<super::simd::Neon, T, 4, 4>(t) }
}

/// Scalar reference: plain f32 dot per output.
unsafe fn tile_task_scalar<T: WeightElem>(t: TileTask<'_, T>) {
    let Dims { m, k, n } = t.d;
    for i in 0..m {
        let xr = std::slice::from_raw_parts(t.x.add(i * k), k);
        for j in t.cols.clone() {
            let wr = std::slice::from_raw_parts(t.w.add(j * k), k);
            let mut acc = 0.0f32;
            for (a, b) in xr.iter().zip(wr) {
                acc += a * b.to_f32();
            }
            *t.y.0.add(i * n + j) = acc + t.bias.map_or(0.0, |b| b[j]);
        }
    }
}

/// W rows per cache block: the block (18 KiB of f32 rows at k = 576) stays in L1 while every
/// x row-block passes over it (8 beat 16 and 32 at m = 64 and 512: 941 / 978 / 1033 µs and
/// 7850 / 7906 / 8338 µs at k = 576, n = 1536, one thread).
const W_BLOCK_ROWS: usize = 8;

#[inline(always)]
unsafe fn tile_task<S: Simd, T: WeightElem, const MR: usize, const NR: usize>(t: TileTask<'_, T>) {
    let m = t.d.m;
    if m == 1 {
        gemv_columns::<S, T>(&t);
        return;
    }
    // Long rows: fewer W rows per block so the block still fits in L1 beside x's rows.
    let block_rows = if t.d.k > 1024 {
        W_BLOCK_ROWS / 2
    } else {
        W_BLOCK_ROWS
    };
    let mut jb = t.cols.start;
    while jb < t.cols.end {
        let jb_end = (jb + block_rows).min(t.cols.end);
        let mut i = 0;
        while i + MR <= m {
            tile_columns::<S, T, MR, NR>(&t, i, jb, jb_end);
            i += MR;
        }
        while i < m {
            tile_columns::<S, T, 1, NR>(&t, i, jb, jb_end);
            i += 1;
        }
        jb = jb_end;
    }
}

/// Decode (m == 1): [`GEMV_ROWS`] W rows at a time, each its own accumulator chain (the
/// canonical order of [`dot_tile`], so a row of x gives the same bits here as in a tile).
/// W rows are split over the pool in ranges; a range is read sequentially.
#[inline(always)]
unsafe fn gemv_columns<S: Simd, T: WeightElem>(t: &TileTask<'_, T>) {
    let k = t.d.k;
    let mut j = t.cols.start;
    while j + GEMV_ROWS <= t.cols.end {
        let acc = dot_tile::<S, T, 1, GEMV_ROWS>(t.x, t.w.add(j * k), k);
        store_tile::<1, GEMV_ROWS>(t, &acc, 0, j, t.d.n);
        j += GEMV_ROWS;
    }
    while j < t.cols.end {
        let acc = dot_tile::<S, T, 1, 1>(t.x, t.w.add(j * k), k);
        store_tile::<1, 1>(t, &acc, 0, j, t.d.n);
        j += 1;
    }
}

/// W rows the decode gemv interleaves (independent FMA chains hide the FMA latency).
const GEMV_ROWS: usize = 4;

/// Rows `i..i+MR` of y, columns `j0..j1`, NR columns at a time (the rest one by one).
#[inline(always)]
unsafe fn tile_columns<S: Simd, T: WeightElem, const MR: usize, const NR: usize>(
    t: &TileTask<'_, T>,
    i: usize,
    j0: usize,
    j1: usize,
) {
    let Dims { k, n, .. } = t.d;
    let mut j = j0;
    while j + NR <= j1 {
        let acc = dot_tile::<S, T, MR, NR>(t.x.add(i * k), t.w.add(j * k), k);
        store_tile::<MR, NR>(t, &acc, i, j, n);
        j += NR;
    }
    while j < j1 {
        let acc = dot_tile::<S, T, MR, 1>(t.x.add(i * k), t.w.add(j * k), k);
        store_tile::<MR, 1>(t, &acc, i, j, n);
        j += 1;
    }
}

#[inline(always)]
unsafe fn store_tile<const MR: usize, const NR: usize>(
    t: &TileTask<'_, impl WeightElem>,
    acc: &[[f32; NR]; MR],
    i: usize,
    j: usize,
    n: usize,
) {
    for (r, row) in acc.iter().enumerate() {
        for (c, &v) in row.iter().enumerate() {
            *t.y.0.add((i + r) * n + j + c) = v + t.bias.map_or(0.0, |b| b[j + c]);
        }
    }
}

/// Dot products of MR rows of x (row stride k) with NR rows of w (row stride k), length k.
#[inline(always)]
unsafe fn dot_tile<S: Simd, T: WeightElem, const MR: usize, const NR: usize>(
    x: *const f32,
    w: *const T,
    k: usize,
) -> [[f32; NR]; MR] {
    let mut acc = [[S::splat(0.0); NR]; MR];
    let mut kk = 0;
    while kk + S::W <= k {
        let mut wv = [S::splat(0.0); NR];
        for (c, v) in wv.iter_mut().enumerate() {
            *v = T::load::<S>(w.add(c * k + kk));
        }
        for (r, acc_row) in acc.iter_mut().enumerate() {
            let xv = S::load(x.add(r * k + kk));
            for (a, &wc) in acc_row.iter_mut().zip(&wv) {
                *a = S::fma(xv, wc, *a);
            }
        }
        kk += S::W;
    }
    if kk < k {
        let rem = k - kk;
        let mut wv = [S::splat(0.0); NR];
        for (c, v) in wv.iter_mut().enumerate() {
            *v = T::load_partial::<S>(w.add(c * k + kk), rem);
        }
        for (r, acc_row) in acc.iter_mut().enumerate() {
            let xv = S::load_partial(x.add(r * k + kk), rem);
            for (a, &wc) in acc_row.iter_mut().zip(&wv) {
                *a = S::fma(xv, wc, *a);
            }
        }
    }
    let mut out = [[0.0f32; NR]; MR];
    if MR * NR == 16 {
        let sums = S::hsum16(&std::array::from_fn(|i| acc[i / NR][i % NR]));
        for (i, s) in sums.into_iter().enumerate() {
            out[i / NR][i % NR] = s;
        }
        return out;
    }
    for (o_row, a_row) in out.iter_mut().zip(&acc) {
        for (o, &a) in o_row.iter_mut().zip(a_row) {
            *o = S::hsum(a);
        }
    }
    out
}

/// General strided f32 gemm: `c = a·b + beta·c`, with a (m x k) at `a[i*a_rs + p*a_cs]`,
/// b (k x n) at `b[p*b_rs + j*b_cs]`, c (m x n) at `c[i*c_rs + j]` (strides in elements).
/// With `beta == 0`, c is not read (NaN/garbage there is overwritten). Bounds are asserted
/// (the kernel reads through raw pointers); rows of c must not overlap (`c_rs >= n`).
/// Uses the `gemm` crate (which allocates its packing buffers) on the kernel pool.
#[allow(clippy::too_many_arguments)]
pub fn matmul_f32(
    m: usize,
    k: usize,
    n: usize,
    a: &[f32],
    a_rs: usize,
    a_cs: usize,
    b: &[f32],
    b_rs: usize,
    b_cs: usize,
    c: &mut [f32],
    c_rs: usize,
    beta: f32,
) {
    matmul_f32_with(
        active_isa(),
        m,
        k,
        n,
        a,
        a_rs,
        a_cs,
        b,
        b_rs,
        b_cs,
        c,
        c_rs,
        beta,
    )
}

/// Index one past the last element a (rows x cols) strided view touches; None on overflow.
fn strided_extent(rows: usize, cols: usize, rs: usize, cs: usize) -> Option<usize> {
    if rows == 0 || cols == 0 {
        return Some(0);
    }
    (rows - 1)
        .checked_mul(rs)?
        .checked_add((cols - 1).checked_mul(cs)?)?
        .checked_add(1)
}

/// Products (m*n*k) below which gemm runs single-threaded (fork/join would dominate).
const GEMM_PARALLEL_MIN_FLOPS: usize = 1 << 20;

#[allow(clippy::too_many_arguments)]
pub(crate) fn matmul_f32_with(
    isa: Isa,
    m: usize,
    k: usize,
    n: usize,
    a: &[f32],
    a_rs: usize,
    a_cs: usize,
    b: &[f32],
    b_rs: usize,
    b_cs: usize,
    c: &mut [f32],
    c_rs: usize,
    beta: f32,
) {
    let fits = |extent: Option<usize>, len: usize| extent.is_some_and(|e| e <= len);
    assert!(
        fits(strided_extent(m, k, a_rs, a_cs), a.len()),
        "matmul_f32: a too short for its strides"
    );
    assert!(
        fits(strided_extent(k, n, b_rs, b_cs), b.len()),
        "matmul_f32: b too short for its strides"
    );
    assert!(
        fits(strided_extent(m, n, c_rs, 1), c.len()),
        "matmul_f32: c too short for its strides"
    );
    assert!(
        m <= 1 || c_rs >= n,
        "matmul_f32: rows of c overlap (c_rs {c_rs} < n {n})"
    );
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        for i in 0..m {
            for v in &mut c[i * c_rs..i * c_rs + n] {
                *v = if beta == 0.0 { 0.0 } else { beta * *v };
            }
        }
        return;
    }
    if isa == Isa::Scalar {
        matmul_scalar(m, k, n, a, a_rs, a_cs, b, b_rs, b_cs, c, c_rs, beta);
        return;
    }
    let flops = m.saturating_mul(n).saturating_mul(k);
    let threads = threads::num_threads();
    let (ap, bp, cp) = (
        SharedMut(a.as_ptr() as *mut f32),
        SharedMut(b.as_ptr() as *mut f32),
        SharedMut(c.as_mut_ptr()),
    );
    let run = move |parallelism| {
        // Whole-struct captures (edition 2021 would otherwise capture the raw, !Send fields).
        let (ap, bp, cp) = (ap, bp, cp);
        // SAFETY: every index the gemm touches was bounds-checked above (strided extents),
        // c's rows are disjoint, and a/b are only read. gemm computes dst := alpha*dst +
        // beta*lhs*rhs, so its alpha is our beta and its beta is 1.
        unsafe {
            gemm::gemm(
                m,
                n,
                k,
                cp.0,
                1,
                c_rs as isize,
                beta != 0.0,
                ap.0 as *const f32,
                a_cs as isize,
                a_rs as isize,
                bp.0 as *const f32,
                b_cs as isize,
                b_rs as isize,
                beta,
                1.0,
                false,
                false,
                false,
                parallelism,
            )
        }
    };
    if threads > 1 && flops >= GEMM_PARALLEL_MIN_FLOPS {
        threads::install(|| run(gemm::Parallelism::Rayon(threads)));
    } else {
        run(gemm::Parallelism::None);
    }
}

/// Scalar reference for `matmul_f32` (also the path when SIMD is disabled): each output
/// rounded once from an f64 sum.
#[allow(clippy::too_many_arguments)]
pub(crate) fn matmul_scalar(
    m: usize,
    k: usize,
    n: usize,
    a: &[f32],
    a_rs: usize,
    a_cs: usize,
    b: &[f32],
    b_rs: usize,
    b_cs: usize,
    c: &mut [f32],
    c_rs: usize,
    beta: f32,
) {
    for i in 0..m {
        for j in 0..n {
            // Exact products summed in f64, rounded once: one f32 chain over a long k (49,152
            // in an LM head's input gradient) drifted 100x further from float64 than the
            // blocked SIMD paths.
            let mut acc = 0.0f64;
            for p in 0..k {
                acc += a[i * a_rs + p * a_cs] as f64 * b[p * b_rs + j * b_cs] as f64;
            }
            let cij = &mut c[i * c_rs + j];
            *cij = if beta == 0.0 {
                acc as f32
            } else {
                (acc + beta as f64 * *cij as f64) as f32
            };
        }
    }
}
