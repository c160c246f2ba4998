//! RMSNorm and LayerNorm over rows, f32 statistics like PyTorch/HF (`x * rsqrt(mean(x²)+eps)`).
//!
//! Layout contract: a row is contiguous; `out.len()` == `x.len()` == `weight.len()` (one row)
//! or a multiple of the row length (rows variants).

use super::cpu::{active_isa, Isa};
use super::simd::{dispatch, simd_entries, Simd};
use super::threads;

/// RMSNorm of one row: `out[i] = x[i] / sqrt(mean(x²) + eps) * weight[i]` (HF `LlamaRMSNorm`).
pub fn rms_norm_f32(x: &[f32], weight: &[f32], eps: f32, out: &mut [f32]) {
    rms_norm_f32_with(active_isa(), x, weight, eps, out)
}

pub(crate) fn rms_norm_f32_with(isa: Isa, x: &[f32], weight: &[f32], eps: f32, out: &mut [f32]) {
    assert!(
        x.len() == out.len() && weight.len() == out.len(),
        "rms_norm_f32: lengths differ"
    );
    dispatch!(isa, rms_norm_scalar, rms_norm_avx512, rms_norm_avx2, rms_norm_neon; (x, weight, eps, out))
}

/// RMSNorm of every row of `x` (`x.len() / weight.len()` rows of `weight.len()`), split over
/// the kernel pool when large.
pub fn rms_norm_rows_f32(x: &[f32], weight: &[f32], eps: f32, out: &mut [f32]) {
    let isa = active_isa();
    let dim = weight.len();
    assert!(
        dim > 0 && x.len() == out.len() && x.len().is_multiple_of(dim),
        "rms_norm_rows_f32: shape mismatch"
    );
    threads::for_each_chunk_mut(out, dim, dim, |r, row_out| {
        rms_norm_f32_with(isa, &x[r * dim..(r + 1) * dim], weight, eps, row_out)
    });
}

pub(crate) fn rms_norm_scalar(x: &[f32], weight: &[f32], eps: f32, out: &mut [f32]) {
    let sum_sq: f32 = x.iter().map(|v| v * v).sum();
    let inv = 1.0 / (sum_sq / x.len() as f32 + eps).sqrt();
    for ((o, &v), &w) in out.iter_mut().zip(x).zip(weight) {
        *o = v * inv * w;
    }
}

/// Sum of squares with four vector accumulators.
#[inline(always)]
unsafe fn sum_sq_simd<S: Simd>(x: &[f32]) -> f32 {
    super::elementwise::dot_simd::<S>(x, x)
}

#[inline(always)]
unsafe fn rms_norm_simd<S: Simd>(x: &[f32], weight: &[f32], eps: f32, out: &mut [f32]) {
    rms_norm_ptr::<S>(
        x.as_ptr(),
        weight.as_ptr(),
        eps,
        out.as_mut_ptr(),
        out.len(),
    )
}

/// RMSNorm of `n` elements through raw pointers, so `out` may alias `x` (in-place form): the
/// statistics pass finishes before the first write.
#[inline(always)]
unsafe fn rms_norm_ptr<S: Simd>(px: *const f32, pw: *const f32, eps: f32, po: *mut f32, n: usize) {
    let sum_sq = sum_sq_simd::<S>(std::slice::from_raw_parts(px, n));
    let inv = 1.0 / (sum_sq / n as f32 + eps).sqrt();
    let vinv = S::splat(inv);
    let mut i = 0;
    while i + S::W <= n {
        S::store(
            po.add(i),
            S::mul(S::mul(S::load(px.add(i)), vinv), S::load(pw.add(i))),
        );
        i += S::W;
    }
    if i < n {
        let r = n - i;
        let v = S::mul(
            S::mul(S::load_partial(px.add(i), r), vinv),
            S::load_partial(pw.add(i), r),
        );
        S::store_partial(po.add(i), r, v);
    }
}

/// In-place RMSNorm of one row (e.g. Qwen3's per-head q/k norm): `x[i] = x[i] /
/// sqrt(mean(x²) + eps) * weight[i]`, same results as [`rms_norm_f32`].
pub fn rms_norm_inplace_f32(x: &mut [f32], weight: &[f32], eps: f32) {
    rms_norm_inplace_f32_with(active_isa(), x, weight, eps)
}

pub(crate) fn rms_norm_inplace_f32_with(isa: Isa, x: &mut [f32], weight: &[f32], eps: f32) {
    assert!(
        weight.len() == x.len(),
        "rms_norm_inplace_f32: lengths differ"
    );
    dispatch!(isa, rms_norm_inplace_scalar, rms_norm_inplace_avx512, rms_norm_inplace_avx2, rms_norm_inplace_neon; (x, weight, eps))
}

fn rms_norm_inplace_scalar(x: &mut [f32], weight: &[f32], eps: f32) {
    let sum_sq: f32 = x.iter().map(|v| v * v).sum();
    let inv = 1.0 / (sum_sq / x.len() as f32 + eps).sqrt();
    for (v, &w) in x.iter_mut().zip(weight) {
        *v = *v * inv * w;
    }
}

#[inline(always)]
unsafe fn rms_norm_inplace_simd<S: Simd>(x: &mut [f32], weight: &[f32], eps: f32) {
    let p = x.as_mut_ptr();
    rms_norm_ptr::<S>(p, weight.as_ptr(), eps, p, x.len())
}
simd_entries!(rms_norm_inplace_simd => rms_norm_inplace_avx512, rms_norm_inplace_avx2, rms_norm_inplace_neon;
    (x: &mut [f32], weight: &[f32], eps: f32));

simd_entries!(rms_norm_simd => rms_norm_avx512, rms_norm_avx2, rms_norm_neon;
    (x: &[f32], weight: &[f32], eps: f32, out: &mut [f32]));

/// LayerNorm of one row: `(x - mean) / sqrt(var + eps) * weight + bias` with the biased
/// variance (two passes, so large means do not cancel). `weight`/`bias` default to 1/0.
pub fn layer_norm_f32(
    x: &[f32],
    weight: Option<&[f32]>,
    bias: Option<&[f32]>,
    eps: f32,
    out: &mut [f32],
) {
    layer_norm_f32_with(active_isa(), x, weight, bias, eps, out)
}

pub(crate) fn layer_norm_f32_with(
    isa: Isa,
    x: &[f32],
    weight: Option<&[f32]>,
    bias: Option<&[f32]>,
    eps: f32,
    out: &mut [f32],
) {
    let n = out.len();
    assert!(x.len() == n, "layer_norm_f32: x and out lengths differ");
    assert!(
        weight.is_none_or(|w| w.len() == n) && bias.is_none_or(|b| b.len() == n),
        "layer_norm_f32: weight/bias length differs from the row"
    );
    if n == 0 {
        return;
    }
    let mean = sum_with(isa, x) / n as f32;
    // Centre into `out`, then the variance is a sum of squares of `out`.
    for (o, &v) in out.iter_mut().zip(x) {
        *o = v - mean;
    }
    let var =
        dispatch!(isa, sum_sq_scalar, sum_sq_avx512, sum_sq_avx2, sum_sq_neon; (&*out)) / n as f32;
    let inv = 1.0 / (var + eps).sqrt();
    match (weight, bias) {
        (Some(w), Some(b)) => out
            .iter_mut()
            .zip(w)
            .zip(b)
            .for_each(|((o, w), b)| *o = *o * inv * w + b),
        (Some(w), None) => out.iter_mut().zip(w).for_each(|(o, w)| *o = *o * inv * w),
        (None, Some(b)) => out.iter_mut().zip(b).for_each(|(o, b)| *o = *o * inv + b),
        (None, None) => out.iter_mut().for_each(|o| *o *= inv),
    }
}

fn sum_sq_scalar(x: &[f32]) -> f32 {
    x.iter().map(|v| v * v).sum()
}
simd_entries!(sum_sq_simd => sum_sq_avx512, sum_sq_avx2, sum_sq_neon; (x: &[f32]) -> f32);

/// Sum of a slice with vector accumulators.
pub(crate) fn sum_with(isa: Isa, x: &[f32]) -> f32 {
    dispatch!(isa, sum_scalar, sum_avx512, sum_avx2, sum_neon; (x))
}

fn sum_scalar(x: &[f32]) -> f32 {
    x.iter().sum()
}

#[inline(always)]
unsafe fn sum_simd<S: Simd>(x: &[f32]) -> f32 {
    let n = x.len();
    let p = x.as_ptr();
    let mut acc = [S::splat(0.0); 2];
    let mut i = 0;
    while i + 2 * S::W <= n {
        acc[0] = S::add(acc[0], S::load(p.add(i)));
        acc[1] = S::add(acc[1], S::load(p.add(i + S::W)));
        i += 2 * S::W;
    }
    if i + S::W <= n {
        acc[0] = S::add(acc[0], S::load(p.add(i)));
        i += S::W;
    }
    if i < n {
        acc[1] = S::add(acc[1], S::load_partial(p.add(i), n - i));
    }
    S::hsum(S::add(acc[0], acc[1]))
}
simd_entries!(sum_simd => sum_avx512, sum_avx2, sum_neon; (x: &[f32]) -> f32);
