//! Numerically stable softmax / log-softmax over one contiguous row, in place.

use super::cpu::{active_isa, Isa};
use super::elementwise::max_f32_with;
use super::simd::{dispatch, exp_scalar, simd_entries, Simd};
use super::threads;

/// In-place softmax: `row[i] = exp(row[i] - max) / sum_j exp(row[j] - max)`.
/// `-inf` entries become 0; an all-`-inf` row becomes NaN (as in PyTorch).
///
/// Bit for bit what PyTorch's CPU kernel for a contiguous last dim (`_vec_softmax_lastdim`)
/// computes at the same instruction-set level: `exp(x - max)` by SLEEF's u10 single-precision
/// algorithm (libm `expf` on the scalar level), the sum in the lane order of ATen's
/// `vec::reduce_all`, then a multiply by `1 / sum`.
pub fn softmax_f32(row: &mut [f32]) {
    softmax_f32_with(active_isa(), row)
}

pub(crate) fn softmax_f32_with(isa: Isa, row: &mut [f32]) {
    if row.is_empty() {
        return;
    }
    let max = max_f32_with(isa, row);
    dispatch!(isa, exp_shift_scalar, exp_shift_avx512, exp_shift_avx2, exp_shift_neon; (&mut *row, max));
    let sum = aten_reduce_sum(row, isa);
    // A NaN anywhere makes the sum NaN (exp propagates it), so the whole row becomes NaN
    // like torch without a separate scan.
    super::elementwise::scale_f32_with(isa, row, 1.0 / sum);
}

/// Σ `x` in the order of ATen's `vec::reduce_all` for `Vectorized<float>` in the build that
/// runs at `isa` (w = 16 lanes with AVX-512, 8 with AVX2 and in the portable build). Shorter
/// than w: one lane adds the values left to right. Otherwise lane `l` accumulates
/// `x[l], x[l + w], ...` (the last, partial group only into its first lanes), then the lanes
/// fold: pairwise with SIMD (lane `l` with `l + w/2`, then `l + w/4`, ..., down to lane 0),
/// left to right in the portable build.
fn aten_reduce_sum(x: &[f32], isa: Isa) -> f32 {
    let (w, pairwise) = match super::cpu::supported_or_lower(isa) {
        Isa::Avx512 => (16, true),
        Isa::Avx2 => (8, true),
        // aarch64 keeps the order its scalar path had (the portable build's).
        Isa::Scalar | Isa::Neon => (8, false),
    };
    if x.len() < w {
        return x[1..].iter().fold(x[0], |acc, &v| acc + v);
    }
    let mut lanes = [0.0f32; 16];
    lanes[..w].copy_from_slice(&x[..w]);
    for group in x[w..].chunks(w) {
        for (lane, &v) in lanes.iter_mut().zip(group) {
            *lane += v;
        }
    }
    if !pairwise {
        return lanes[1..w].iter().fold(lanes[0], |acc, &v| acc + v);
    }
    let mut half = w / 2;
    while half > 0 {
        for l in 0..half {
            lanes[l] += lanes[l + half];
        }
        half /= 2;
    }
    lanes[0]
}

/// `row[i] = exp(row[i] - max)` with libm's `expf` (ATen's portable `Vectorized<float>::exp`).
fn exp_shift_scalar(row: &mut [f32], max: f32) {
    for v in row.iter_mut() {
        *v = (*v - max).exp();
    }
}

/// `row[i] = exp(row[i] - max)` with [`exp_sleef_u10`], every lane (a partial last vector too).
#[inline(always)]
unsafe fn exp_shift_simd<S: Simd>(row: &mut [f32], max: f32) {
    let n = row.len();
    let p = row.as_mut_ptr();
    let vmax = S::splat(max);
    let mut i = 0;
    while i + S::W <= n {
        let e = exp_sleef_u10::<S>(S::sub(S::load(p.add(i)), vmax));
        S::store(p.add(i), e);
        i += S::W;
    }
    if i < n {
        let r = n - i;
        let e = exp_sleef_u10::<S>(S::sub(S::load_partial(p.add(i), r), vmax));
        S::store_partial(p.add(i), r, e);
    }
}
simd_entries!(exp_shift_simd => exp_shift_avx512, exp_shift_avx2, exp_shift_neon; (row: &mut [f32], max: f32));

/// exp(d) as SLEEF's 1-ulp single-precision vector exp computes it (the `Sleef_expf*_u10`
/// PyTorch's `Vectorized<float>::exp` calls; fused multiply-adds throughout): d = q ln 2 + s
/// with q = rint(d log2 e) and ln 2 split in two parts, e^s - 1 - s by a degree-7 polynomial
/// in s, the result scaled by 2^q in two steps (so subnormal results round once); 0 below
/// -104, +inf above 100.
#[inline(always)]
unsafe fn exp_sleef_u10<S: Simd>(d: S::V) -> S::V {
    const LN2_HI: f32 = 0.693_145_75;
    const LN2_LO: f32 = 1.428_606_8e-6;
    // Coefficients of s^7 .. s^2 of e^s, adjusted for the reduced range.
    const POLY: [f32; 6] = [
        1.985_276_2e-4,
        1.393_043_6e-3,
        8.333_361e-3,
        4.166_648_5e-2,
        0.166_666_67,
        0.5,
    ];
    let q = S::round(S::mul(d, S::splat(std::f32::consts::LOG2_E)));
    let s = S::fma(q, S::splat(-LN2_HI), d);
    let s = S::fma(q, S::splat(-LN2_LO), s);
    let mut u = S::splat(POLY[0]);
    for c in &POLY[1..] {
        u = S::fma(u, s, S::splat(*c));
    }
    let u = S::add(S::splat(1.0), S::fma(S::mul(s, s), u, s));
    // 2^q as 2^h 2^(q-h): each factor stays a normal float for every q that matters here.
    let h = S::round(S::mul(q, S::splat(0.5)));
    let u = S::scale_pow2(S::scale_pow2(u, h), S::sub(q, h));
    let u = S::zero_unless_not_less(d, S::splat(-104.0), u);
    S::select_less(S::splat(100.0), d, S::splat(f32::INFINITY), u)
}

/// Softmax of every row of `x` (`x.len() / row_len` rows), split over the kernel pool.
pub fn softmax_rows_f32(x: &mut [f32], row_len: usize) {
    let isa = active_isa();
    assert!(
        row_len > 0 && x.len().is_multiple_of(row_len),
        "softmax_rows_f32: shape mismatch"
    );
    threads::for_each_chunk_mut(x, row_len, 4 * row_len, |_, row| softmax_f32_with(isa, row));
}

/// In-place log-softmax: `row[i] = row[i] - max - ln(sum_j exp(row[j] - max))`.
pub fn log_softmax_f32(row: &mut [f32]) {
    log_softmax_f32_with(active_isa(), row)
}

pub(crate) fn log_softmax_f32_with(isa: Isa, row: &mut [f32]) {
    if row.is_empty() {
        return;
    }
    let max = max_f32_with(isa, row);
    let sum =
        dispatch!(isa, exp_sum_scalar, exp_sum_avx512, exp_sum_avx2, exp_sum_neon; (&*row, max));
    let shift = max + sum.ln();
    for v in row.iter_mut() {
        *v -= shift;
    }
}

fn exp_sum_scalar(row: &[f32], max: f32) -> f32 {
    row.iter().map(|&v| exp_scalar(v - max)).sum()
}

#[inline(always)]
unsafe fn exp_sum_simd<S: Simd>(row: &[f32], max: f32) -> f32 {
    let n = row.len();
    let p = row.as_ptr();
    let vmax = S::splat(max);
    let mut acc = S::splat(0.0);
    let mut i = 0;
    while i + S::W <= n {
        acc = S::add(acc, S::exp(S::sub(S::load(p.add(i)), vmax)));
        i += S::W;
    }
    let mut sum = S::hsum(acc);
    while i < n {
        sum += exp_scalar(*p.add(i) - max);
        i += 1;
    }
    sum
}
simd_entries!(exp_sum_simd => exp_sum_avx512, exp_sum_avx2, exp_sum_neon; (row: &[f32], max: f32) -> f32);
