//! Numerically stable softmax / log-softmax over one contiguous row, in place.

use super::cpu::{active_isa, Isa};
use super::elementwise::max_f32_with;
use super::simd::{dispatch, exp_scalar, simd_entries, Simd};
use super::threads;

/// In-place softmax: `row[i] = exp(row[i] - max) / sum_j exp(row[j] - max)`.
/// `-inf` entries become 0; an all-`-inf` row becomes NaN (as in PyTorch).
pub fn softmax_f32(row: &mut [f32]) {
    softmax_f32_with(active_isa(), row)
}

pub(crate) fn softmax_f32_with(isa: Isa, row: &mut [f32]) {
    if row.is_empty() {
        return;
    }
    let max = max_f32_with(isa, row);
    let sum = exp_shift_sum_with(isa, row, max);
    // A NaN anywhere makes the sum NaN (exp propagates it), so the whole row becomes NaN
    // like torch without a separate scan.
    super::elementwise::scale_f32_with(isa, row, 1.0 / sum);
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
    let sum = dispatch!(isa, exp_sum_scalar, exp_sum_avx512, exp_sum_avx2; (&*row, max));
    let shift = max + sum.ln();
    for v in row.iter_mut() {
        *v -= shift;
    }
}

/// `row[i] = exp(row[i] - max)`, returns the sum.
pub(crate) fn exp_shift_sum_with(isa: Isa, row: &mut [f32], max: f32) -> f32 {
    dispatch!(isa, exp_shift_sum_scalar, exp_shift_sum_avx512, exp_shift_sum_avx2; (row, max))
}

pub(crate) fn exp_shift_sum_scalar(row: &mut [f32], max: f32) -> f32 {
    let mut sum = 0.0;
    for v in row.iter_mut() {
        *v = exp_scalar(*v - max);
        sum += *v;
    }
    sum
}

#[inline(always)]
pub(crate) unsafe fn exp_shift_sum_simd<S: Simd>(row: &mut [f32], max: f32) -> f32 {
    let n = row.len();
    let p = row.as_mut_ptr();
    let vmax = S::splat(max);
    let mut acc = S::splat(0.0);
    let mut i = 0;
    while i + S::W <= n {
        let e = S::exp(S::sub(S::load(p.add(i)), vmax));
        S::store(p.add(i), e);
        acc = S::add(acc, e);
        i += S::W;
    }
    if i < n {
        let r = n - i;
        // Padding lanes would give exp(0 - max); use -inf there, which exp maps to 0.
        let mut buf = [f32::NEG_INFINITY; 16];
        std::ptr::copy_nonoverlapping(p.add(i), buf.as_mut_ptr(), r);
        let e = S::exp(S::sub(S::load(buf.as_ptr()), vmax));
        S::store_partial(p.add(i), r, e);
        acc = S::add(acc, e);
    }
    S::hsum(acc)
}
simd_entries!(exp_shift_sum_simd => exp_shift_sum_avx512, exp_shift_sum_avx2; (row: &mut [f32], max: f32) -> f32);

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
simd_entries!(exp_sum_simd => exp_sum_avx512, exp_sum_avx2; (row: &[f32], max: f32) -> f32);
