//! x86-64 kernels: AVX2 (`vpmaddubsw` + `vpmaddwd`) and AVX-512 VNNI (`vpdpbusd`, 256-bit via
//! AVX512VL) integer dot products per 32-block, scaled and accumulated with FMA.
//!
//! Per block the integer dot is exact (it fits i16 pairs / i32 lanes for these value ranges),
//! so these kernels agree with the scalar reference except for f32 summation order.

use std::arch::x86_64::*;

use super::{Kernels, QActs, PREFILL_ROWS};
use crate::{GgmlType, KernelPath};

/// AVX2 + FMA + F16C (all three are needed by the AVX2 path).
pub(crate) fn has_avx2() -> bool {
    is_x86_feature_detected!("avx2")
        && is_x86_feature_detected!("fma")
        && is_x86_feature_detected!("f16c")
}

/// AVX-512 F/BW/VL + VNNI.
pub(crate) fn has_avx512_vnni() -> bool {
    is_x86_feature_detected!("avx512f")
        && is_x86_feature_detected!("avx512bw")
        && is_x86_feature_detected!("avx512vl")
        && is_x86_feature_detected!("avx512vnni")
}

pub(crate) fn kernels(ty: GgmlType, path: KernelPath) -> Option<Kernels> {
    use GgmlType::*;
    match (path, ty) {
        (KernelPath::Avx512Vnni, Q4_0) => Some(Kernels {
            one: q4_0_vnni::<1>,
            many: q4_0_vnni::<PREFILL_ROWS>,
        }),
        (KernelPath::Avx512Vnni, Q4_1) => Some(Kernels {
            one: q4_1_vnni::<1>,
            many: q4_1_vnni::<PREFILL_ROWS>,
        }),
        (KernelPath::Avx512Vnni, Q8_0) => Some(Kernels {
            one: q8_0_vnni::<1>,
            many: q8_0_vnni::<PREFILL_ROWS>,
        }),
        (KernelPath::Avx2, Q4_0) => Some(Kernels {
            one: q4_0_avx2::<1>,
            many: q4_0_avx2::<PREFILL_ROWS>,
        }),
        (KernelPath::Avx2, Q4_1) => Some(Kernels {
            one: q4_1_avx2::<1>,
            many: q4_1_avx2::<PREFILL_ROWS>,
        }),
        (KernelPath::Avx2, Q8_0) => Some(Kernels {
            one: q8_0_avx2::<1>,
            many: q8_0_avx2::<PREFILL_ROWS>,
        }),
        _ => None,
    }
}

/// Sum of 32 u8 x i8 products into 8 i32 lanes (pairs saturate at i16: callers keep
/// |u * s| pairs below 32767).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn idot_avx2(u: __m256i, s: __m256i) -> __m256i {
    _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1))
}

/// Sum of 32 u8 x i8 products into 8 i32 lanes, exact.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
fn idot_vnni(u: __m256i, s: __m256i) -> __m256i {
    _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s)
}

#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn hsum(v: __m256) -> f32 {
    let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    let s = _mm_add_ss(s, _mm_movehdup_ps(s));
    _mm_cvtss_f32(s)
}

/// 32 nibbles of a Q4 block at `p` as bytes: low nibbles (elements 0..16) then high nibbles.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn nibbles(p: *const u8) -> __m256i {
    let raw = _mm_loadu_si128(p.cast());
    let m4 = _mm_set1_epi8(0x0f);
    _mm256_set_m128i(
        _mm_and_si128(_mm_srli_epi16(raw, 4), m4),
        _mm_and_si128(raw, m4),
    )
}

/// A little-endian f16 at `p` widened into every lane.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn f16_splat(p: *const u8) -> __m128 {
    _mm_cvtph_ps(_mm_set1_epi16(p.cast::<i16>().read_unaligned()))
}

macro_rules! kernels_for {
    ($features:literal, $idot:ident, $q4_0:ident, $q4_1:ident, $q8_0:ident) => {
        /// Q4_1 weights: `sum_b dw*dx * dot(q, qx) + mw * (dx * sum(qx))`.
        #[target_feature(enable = $features)]
        unsafe fn $q4_1<const N: usize>(w: &[u8], a: &QActs, r0: usize) -> [f32; N] {
            let nb = a.cols / 32;
            debug_assert_eq!(w.len(), nb * 20);
            let wp = w.as_ptr();
            // Two accumulator sets (even / odd blocks) so consecutive FMAs do not wait.
            let mut acc = [[_mm256_setzero_ps(); N]; 2];
            let mut accm = [[_mm_setzero_ps(); N]; 2];
            macro_rules! block {
                ($b:expr, $k:expr) => {{
                    let b = $b;
                    let blk = wp.add(b * 20);
                    // [dw, mw, 0, 0]
                    let dm = _mm_cvtph_ps(_mm_cvtsi32_si128(blk.cast::<i32>().read_unaligned()));
                    let wq = nibbles(blk.add(4));
                    for i in 0..N {
                        let row = r0 + i;
                        let xq =
                            _mm256_loadu_si256(a.qs.as_ptr().add(row * a.cols + b * 32).cast());
                        // [dx, dx * sum(qx), 0, 0]
                        let ds = _mm_castpd_ps(_mm_load_sd(a.ds.as_ptr().add(row * nb + b).cast()));
                        let prod = _mm_mul_ps(dm, ds);
                        let p = _mm256_cvtepi32_ps($idot(wq, xq));
                        acc[$k][i] = _mm256_fmadd_ps(p, _mm256_broadcastss_ps(prod), acc[$k][i]);
                        accm[$k][i] = _mm_add_ps(accm[$k][i], prod);
                    }
                }};
            }
            let mut b = 0;
            while b + 2 <= nb {
                block!(b, 0);
                block!(b + 1, 1);
                b += 2;
            }
            if b < nb {
                block!(b, 0);
            }
            std::array::from_fn(|i| {
                let m = _mm_add_ps(accm[0][i], accm[1][i]);
                hsum(_mm256_add_ps(acc[0][i], acc[1][i])) + _mm_cvtss_f32(_mm_movehdup_ps(m))
            })
        }

        /// Q4_0 weights: `sum_b dw*dx * dot(q - 8, qx)`, signed dot via |w| and sign(x, w).
        #[target_feature(enable = $features)]
        unsafe fn $q4_0<const N: usize>(w: &[u8], a: &QActs, r0: usize) -> [f32; N] {
            let nb = a.cols / 32;
            debug_assert_eq!(w.len(), nb * 18);
            let wp = w.as_ptr();
            let eight = _mm256_set1_epi8(8);
            let mut acc = [[_mm256_setzero_ps(); N]; 2];
            macro_rules! block {
                ($b:expr, $k:expr) => {{
                    let b = $b;
                    let blk = wp.add(b * 18);
                    let dw = f16_splat(blk);
                    let wq = _mm256_sub_epi8(nibbles(blk.add(2)), eight);
                    let wabs = _mm256_sign_epi8(wq, wq);
                    for i in 0..N {
                        let row = r0 + i;
                        let xq =
                            _mm256_loadu_si256(a.qs.as_ptr().add(row * a.cols + b * 32).cast());
                        let d = _mm_mul_ss(dw, _mm_load_ss(a.ds.as_ptr().add(row * nb + b).cast()));
                        let p = _mm256_cvtepi32_ps($idot(wabs, _mm256_sign_epi8(xq, wq)));
                        acc[$k][i] = _mm256_fmadd_ps(p, _mm256_broadcastss_ps(d), acc[$k][i]);
                    }
                }};
            }
            let mut b = 0;
            while b + 2 <= nb {
                block!(b, 0);
                block!(b + 1, 1);
                b += 2;
            }
            if b < nb {
                block!(b, 0);
            }
            std::array::from_fn(|i| hsum(_mm256_add_ps(acc[0][i], acc[1][i])))
        }

        /// Q8_0 weights: `sum_b dw*dx * dot(q, qx)`, signed dot via |w| and sign(x, w).
        #[target_feature(enable = $features)]
        unsafe fn $q8_0<const N: usize>(w: &[u8], a: &QActs, r0: usize) -> [f32; N] {
            let nb = a.cols / 32;
            debug_assert_eq!(w.len(), nb * 34);
            let wp = w.as_ptr();
            let mut acc = [[_mm256_setzero_ps(); N]; 2];
            macro_rules! block {
                ($b:expr, $k:expr) => {{
                    let b = $b;
                    let blk = wp.add(b * 34);
                    let dw = f16_splat(blk);
                    let wq = _mm256_loadu_si256(blk.add(2).cast());
                    let wabs = _mm256_sign_epi8(wq, wq);
                    for i in 0..N {
                        let row = r0 + i;
                        let xq =
                            _mm256_loadu_si256(a.qs.as_ptr().add(row * a.cols + b * 32).cast());
                        let d = _mm_mul_ss(dw, _mm_load_ss(a.ds.as_ptr().add(row * nb + b).cast()));
                        let p = _mm256_cvtepi32_ps($idot(wabs, _mm256_sign_epi8(xq, wq)));
                        acc[$k][i] = _mm256_fmadd_ps(p, _mm256_broadcastss_ps(d), acc[$k][i]);
                    }
                }};
            }
            let mut b = 0;
            while b + 2 <= nb {
                block!(b, 0);
                block!(b + 1, 1);
                b += 2;
            }
            if b < nb {
                block!(b, 0);
            }
            std::array::from_fn(|i| hsum(_mm256_add_ps(acc[0][i], acc[1][i])))
        }
    };
}

kernels_for!("avx2,fma,f16c", idot_avx2, q4_0_avx2, q4_1_avx2, q8_0_avx2);
kernels_for!(
    "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni",
    idot_vnni,
    q4_0_vnni,
    q4_1_vnni,
    q8_0_vnni
);
