//! x86-64 pieces outside the GEMV and GEMM: CPU feature detection, the activation
//! quantizers (AVX2 and AVX-512, the scalar quantizer's bytes), and the row kernels of float
//! weights (F32 / F16 / BF16, every x86 path). Quantized weights run `super::gemv` below 16
//! activation rows and `super::gemm` from 16.

use std::arch::x86_64::*;

use super::{f16_at, Kernels, QActs, PREFILL_ROWS};
use crate::{GgmlType, KernelPath};

/// AVX2 + FMA + F16C (all three are needed by the AVX2 path).
pub(crate) fn has_avx2() -> bool {
    is_x86_feature_detected!("avx2")
        && is_x86_feature_detected!("fma")
        && is_x86_feature_detected!("f16c")
}

/// AVX-512 F/BW/VL.
pub(crate) fn has_avx512() -> bool {
    is_x86_feature_detected!("avx512f")
        && is_x86_feature_detected!("avx512bw")
        && is_x86_feature_detected!("avx512vl")
}

/// AVX-VNNI (the VEX-encoded 256-bit `vpdpbusd`).
pub(crate) fn has_avx_vnni() -> bool {
    is_x86_feature_detected!("avxvnni")
}

/// AVX-512 F/BW/VL + VNNI.
pub(crate) fn has_avx512_vnni() -> bool {
    has_avx512() && is_x86_feature_detected!("avx512vnni")
}

pub(crate) fn kernels(ty: GgmlType, path: KernelPath) -> Option<Kernels> {
    use GgmlType::*;
    // The quantized types run the GEMV (`super::gemv`) and the GEMM on x86; the row kernels
    // here serve the float weights.
    if path == KernelPath::Scalar {
        return None;
    }
    let kind = match ty {
        F32 => 0,
        F16 => 1,
        BF16 => 2,
        _ => return None,
    };
    Some(match kind {
        0 => Kernels {
            one: float_avx2::<1, 0>,
            many: float_avx2::<PREFILL_ROWS, 0>,
        },
        1 => Kernels {
            one: float_avx2::<1, 1>,
            many: float_avx2::<PREFILL_ROWS, 1>,
        },
        _ => Kernels {
            one: float_avx2::<1, 2>,
            many: float_avx2::<PREFILL_ROWS, 2>,
        },
    })
}

/// The sum of 8 f32 lanes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn hsum(v: __m256) -> f32 {
    let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    let s = _mm_add_ss(s, _mm_movehdup_ps(s));
    _mm_cvtss_f32(s)
}

/// Eight weights of an F32 (`KIND` 0), F16 (1) or BF16 (2) row starting at element `j`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn load8<const KIND: u8>(p: *const u8, j: usize) -> __m256 {
    match KIND {
        0 => _mm256_loadu_ps(p.add(4 * j).cast()),
        1 => _mm256_cvtph_ps(_mm_loadu_si128(p.add(2 * j).cast())),
        _ => _mm256_castsi256_ps(_mm256_slli_epi32(
            _mm256_cvtepu16_epi32(_mm_loadu_si128(p.add(2 * j).cast())),
            16,
        )),
    }
}

/// Float weights times f32 activations: 16 elements per step (two accumulators), each weight
/// vector widened once for all N activation rows; a scalar tail for `cols % 16`.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn float_avx2<const N: usize, const KIND: u8>(w: &[u8], a: &QActs, r0: usize) -> [f32; N] {
    let cols = a.cols;
    debug_assert_eq!(w.len(), cols * if KIND == 0 { 4 } else { 2 });
    let p = w.as_ptr();
    let mut acc = [[_mm256_setzero_ps(); N]; 2];
    let mut j = 0;
    while j + 16 <= cols {
        let w0 = load8::<KIND>(p, j);
        let w1 = load8::<KIND>(p, j + 8);
        let [acc0, acc1] = &mut acc;
        for (i, (a0, a1)) in acc0.iter_mut().zip(acc1.iter_mut()).enumerate() {
            let x = a.xf.as_ptr().add((r0 + i) * cols + j);
            *a0 = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x), *a0);
            *a1 = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x.add(8)), *a1);
        }
        j += 16;
    }
    let mut out: [f32; N] = std::array::from_fn(|i| hsum(_mm256_add_ps(acc[0][i], acc[1][i])));
    for j in j..cols {
        let e = &w[j * if KIND == 0 { 4 } else { 2 }..];
        let wv = match KIND {
            0 => f32::from_le_bytes([e[0], e[1], e[2], e[3]]),
            1 => f16_at(e, 0),
            _ => f32::from_bits((u16::from_le_bytes([e[0], e[1]]) as u32) << 16),
        };
        for (i, o) in out.iter_mut().enumerate() {
            *o += wv * a.xf[(r0 + i) * cols + j];
        }
    }
    out
}

/// `round(p)` half away from zero (as `f32::round` and ggml's `roundf`), lane-wise: truncate,
/// then step one away from zero where the dropped fraction is at least one half (the
/// fraction `p - trunc(p)` is exact).
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl")]
fn round_away_512(p: __m512) -> __m512 {
    let t = _mm512_roundscale_ps::<{ _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC }>(p);
    let frac = _mm512_sub_ps(p, t);
    let one = _mm512_set1_ps(1.0);
    let up = _mm512_cmp_ps_mask::<_CMP_GE_OQ>(frac, _mm512_set1_ps(0.5));
    let down = _mm512_cmp_ps_mask::<_CMP_LE_OQ>(frac, _mm512_set1_ps(-0.5));
    let t = _mm512_mask_add_ps(t, up, t, one);
    _mm512_mask_sub_ps(t, down, t, one)
}

/// Quantize `N` vectors of 16 floats as one block (`N * 16` elements): `Some((d, q's as i32
/// vectors))`, or `None` if the block holds a NaN or an infinity or its scale is subnormal
/// (the caller then uses the scalar quantizer: a NaN scale for a NaN, for instance).
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl")]
unsafe fn quantize_block_512<const N: usize>(x: *const f32) -> Option<(f32, [__m512i; N])> {
    let v: [__m512; N] = std::array::from_fn(|i| _mm512_loadu_ps(x.add(16 * i)));
    let mut amax = _mm512_setzero_ps();
    let mut nan = 0u16;
    for &vi in &v {
        nan |= _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(vi, vi);
        amax = _mm512_max_ps(amax, _mm512_abs_ps(vi));
    }
    if nan != 0 {
        return None;
    }
    let d = _mm512_reduce_max_ps(amax) / 127.0;
    let id = if d == 0.0 { 0.0 } else { 1.0 / d };
    if !d.is_finite() || !id.is_finite() {
        // Infinite inputs or subnormal scales: the float-to-int conversions would differ
        // from the scalar saturating casts.
        return None;
    }
    let id = _mm512_set1_ps(id);
    Some((
        d,
        std::array::from_fn(|i| _mm512_cvttps_epi32(round_away_512(_mm512_mul_ps(v[i], id)))),
    ))
}

/// AVX-512 twin of `quantize_q8x32_scalar` (same bytes and scales).
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl")]
pub(crate) unsafe fn quantize_q8x32_avx512(x: &[f32], qs: &mut [i8], ds: &mut [[f32; 2]]) {
    let blocks = x.len() / 32;
    assert!(qs.len() >= blocks * 32 && ds.len() >= blocks);
    for b in 0..blocks {
        match quantize_block_512::<2>(x.as_ptr().add(32 * b)) {
            Some((d, q)) => {
                let out = qs.as_mut_ptr().add(32 * b);
                _mm_storeu_si128(out.cast(), _mm512_cvtepi32_epi8(q[0]));
                _mm_storeu_si128(out.add(16).cast(), _mm512_cvtepi32_epi8(q[1]));
                let sum = _mm512_reduce_add_epi32(_mm512_add_epi32(q[0], q[1]));
                ds[b] = [d, d * sum as f32];
            }
            None => super::quantize_q8x32_scalar_cold(
                &x[32 * b..32 * b + 32],
                &mut qs[32 * b..32 * b + 32],
                &mut ds[b..b + 1],
            ),
        }
    }
}

/// AVX-512 twin of `quantize_q8x256_scalar`.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl")]
pub(crate) unsafe fn quantize_q8x256_avx512(
    x: &[f32],
    qs: &mut [i8],
    ds: &mut [[f32; 2]],
    sums16: &mut [i32],
) {
    let blocks = x.len() / 256;
    assert!(qs.len() >= blocks * 256 && ds.len() >= blocks && sums16.len() >= blocks * 16);
    for b in 0..blocks {
        match quantize_block_512::<16>(x.as_ptr().add(256 * b)) {
            Some((d, q)) => {
                let out = qs.as_mut_ptr().add(256 * b);
                for (i, &qi) in q.iter().enumerate() {
                    _mm_storeu_si128(out.add(16 * i).cast(), _mm512_cvtepi32_epi8(qi));
                    sums16[16 * b + i] = _mm512_reduce_add_epi32(qi);
                }
                ds[b] = [d, 0.0];
            }
            None => super::quantize_q8x256_scalar_cold(
                &x[256 * b..256 * b + 256],
                &mut qs[256 * b..256 * b + 256],
                &mut ds[b..b + 1],
                &mut sums16[16 * b..16 * b + 16],
            ),
        }
    }
}

/// [`round_away_512`] on 256 bits.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn round_away_256(p: __m256) -> __m256 {
    let t = _mm256_round_ps::<{ _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC }>(p);
    let frac = _mm256_sub_ps(p, t);
    let one = _mm256_set1_ps(1.0);
    let up = _mm256_and_ps(_mm256_cmp_ps::<_CMP_GE_OQ>(frac, _mm256_set1_ps(0.5)), one);
    let down = _mm256_and_ps(_mm256_cmp_ps::<_CMP_LE_OQ>(frac, _mm256_set1_ps(-0.5)), one);
    _mm256_sub_ps(_mm256_add_ps(t, up), down)
}

/// [`quantize_block_512`] on 256 bits: `N` vectors of 8 floats as one block.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn quantize_block_256<const N: usize>(x: *const f32) -> Option<(f32, [__m256i; N])> {
    let v: [__m256; N] = std::array::from_fn(|i| _mm256_loadu_ps(x.add(8 * i)));
    let abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fff_ffff));
    let mut amax = _mm256_setzero_ps();
    let mut nan = _mm256_setzero_ps();
    for &vi in &v {
        nan = _mm256_or_ps(nan, _mm256_cmp_ps::<_CMP_UNORD_Q>(vi, vi));
        amax = _mm256_max_ps(amax, _mm256_and_ps(vi, abs_mask));
    }
    if _mm256_movemask_ps(nan) != 0 {
        return None;
    }
    let m = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
    let m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    let m = _mm_max_ss(m, _mm_movehdup_ps(m));
    let d = _mm_cvtss_f32(m) / 127.0;
    let id = if d == 0.0 { 0.0 } else { 1.0 / d };
    if !d.is_finite() || !id.is_finite() {
        return None;
    }
    let id = _mm256_set1_ps(id);
    Some((
        d,
        std::array::from_fn(|i| _mm256_cvttps_epi32(round_away_256(_mm256_mul_ps(v[i], id)))),
    ))
}

/// 32 i32 lanes (each within +-127) as 32 bytes in order.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn store_i8x32(out: *mut i8, q: &[__m256i]) {
    // The packs work within 128-bit halves: bytes come out as dword groups 0 2 4 6 1 3 5 7.
    let w01 = _mm256_packs_epi32(q[0], q[1]);
    let w23 = _mm256_packs_epi32(q[2], q[3]);
    let b = _mm256_packs_epi16(w01, w23);
    let b = _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(out.cast(), b);
}

/// The sum of 8 i32 lanes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn hsum_i32(v: __m256i) -> i32 {
    let s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b01_00_11_10>(s));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b10_11_00_01>(s));
    _mm_cvtsi128_si32(s)
}

/// AVX2 twin of `quantize_q8x32_scalar` (same bytes and scales).
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn quantize_q8x32_avx2(x: &[f32], qs: &mut [i8], ds: &mut [[f32; 2]]) {
    let blocks = x.len() / 32;
    assert!(qs.len() >= blocks * 32 && ds.len() >= blocks);
    for b in 0..blocks {
        match quantize_block_256::<4>(x.as_ptr().add(32 * b)) {
            Some((d, q)) => {
                store_i8x32(qs.as_mut_ptr().add(32 * b), &q);
                let sum =
                    _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
                ds[b] = [d, d * hsum_i32(sum) as f32];
            }
            None => super::quantize_q8x32_scalar_cold(
                &x[32 * b..32 * b + 32],
                &mut qs[32 * b..32 * b + 32],
                &mut ds[b..b + 1],
            ),
        }
    }
}

/// AVX2 twin of `quantize_q8x256_scalar`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn quantize_q8x256_avx2(
    x: &[f32],
    qs: &mut [i8],
    ds: &mut [[f32; 2]],
    sums16: &mut [i32],
) {
    let blocks = x.len() / 256;
    assert!(qs.len() >= blocks * 256 && ds.len() >= blocks && sums16.len() >= blocks * 16);
    for b in 0..blocks {
        match quantize_block_256::<32>(x.as_ptr().add(256 * b)) {
            Some((d, q)) => {
                let out = qs.as_mut_ptr().add(256 * b);
                for (i, q4) in q.chunks_exact(4).enumerate() {
                    store_i8x32(out.add(32 * i), q4);
                    sums16[16 * b + 2 * i] = hsum_i32(_mm256_add_epi32(q4[0], q4[1]));
                    sums16[16 * b + 2 * i + 1] = hsum_i32(_mm256_add_epi32(q4[2], q4[3]));
                }
                ds[b] = [d, 0.0];
            }
            None => super::quantize_q8x256_scalar_cold(
                &x[256 * b..256 * b + 256],
                &mut qs[256 * b..256 * b + 256],
                &mut ds[b..b + 1],
                &mut sums16[16 * b..16 * b + 16],
            ),
        }
    }
}
