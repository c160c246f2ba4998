//! x86-64 kernels, chosen per [`KernelPath`]:
//! - Avx2: `vpmaddubsw` + `vpmaddwd` integer dots per 32-block, FMA scaling, for every type
//!   (K types and float weights use these on all x86 paths);
//! - Avx512: Q4_0, Q4_1 and Q8_0 two blocks per 512-bit register (`vpmaddubsw` on zmm);
//! - Avx512Vnni: the same with `vpdpbusd`.
//!
//! The integer dot of each block is exact (u8 x i8 pairs stay below i16 saturation for these
//! value ranges), so every path agrees with the scalar reference up to f32 summation order.

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
    match (path, ty) {
        (KernelPath::Avx512Vnni, Q4_0) => Some(Kernels {
            one: q4_1_vnni512::<1, 1>,
            many: q4_1_vnni512::<PREFILL_ROWS, 1>,
        }),
        (KernelPath::Avx512Vnni, Q4_1) => Some(Kernels {
            one: q4_1_vnni512::<1, 0>,
            many: q4_1_vnni512::<PREFILL_ROWS, 0>,
        }),
        (KernelPath::Avx512Vnni, Q8_0) => Some(Kernels {
            one: q4_1_vnni512::<1, 2>,
            many: q4_1_vnni512::<PREFILL_ROWS, 2>,
        }),
        (KernelPath::Avx512, Q4_1) => Some(Kernels {
            one: q4_1_avx512::<1, 0>,
            many: q4_1_avx512::<PREFILL_ROWS, 0>,
        }),
        (KernelPath::Avx512, Q8_0) => Some(Kernels {
            one: signed_avx512::<1, false>,
            many: signed_avx512::<PREFILL_ROWS, false>,
        }),
        (KernelPath::Avx512, Q4_0) => Some(Kernels {
            one: signed_avx512::<1, true>,
            many: signed_avx512::<PREFILL_ROWS, true>,
        }),
        (KernelPath::Avx2 | KernelPath::Avx2Vnni, Q4_0) => Some(Kernels {
            one: q4_0_avx2::<1>,
            many: q4_0_avx2::<PREFILL_ROWS>,
        }),
        (KernelPath::Avx2 | KernelPath::Avx2Vnni, Q4_1) => Some(Kernels {
            one: q4_1_avx2::<1>,
            many: q4_1_avx2::<PREFILL_ROWS>,
        }),
        (KernelPath::Avx2 | KernelPath::Avx2Vnni, Q8_0) => Some(Kernels {
            one: q8_0_avx2::<1>,
            many: q8_0_avx2::<PREFILL_ROWS>,
        }),
        // K types: `vpmaddubsw`, then the i16 scale multiply-add (`vpmaddwd` or VNNI `vpdpwssd`).
        (KernelPath::Avx512Vnni, Q4_K) => Some(Kernels {
            one: qk45_vnni::<1, false>,
            many: qk45_vnni::<PREFILL_ROWS, false>,
        }),
        (KernelPath::Avx2 | KernelPath::Avx2Vnni | KernelPath::Avx512, Q4_K) => Some(Kernels {
            one: qk45_avx2::<1, false>,
            many: qk45_avx2::<PREFILL_ROWS, false>,
        }),
        (KernelPath::Avx512Vnni, Q5_K) => Some(Kernels {
            one: qk45_vnni::<1, true>,
            many: qk45_vnni::<PREFILL_ROWS, true>,
        }),
        (KernelPath::Avx2 | KernelPath::Avx2Vnni | KernelPath::Avx512, Q5_K) => Some(Kernels {
            one: qk45_avx2::<1, true>,
            many: qk45_avx2::<PREFILL_ROWS, true>,
        }),
        (KernelPath::Avx512Vnni, Q6_K) => Some(Kernels {
            one: q6_k_vnni::<1>,
            many: q6_k_vnni::<PREFILL_ROWS>,
        }),
        (KernelPath::Avx2 | KernelPath::Avx2Vnni | KernelPath::Avx512, Q6_K) => Some(Kernels {
            one: q6_k_avx2::<1>,
            many: q6_k_avx2::<PREFILL_ROWS>,
        }),
        (KernelPath::Avx512Vnni, Q5_0) => Some(Kernels {
            one: q4_1_vnni512::<1, 3>,
            many: q4_1_vnni512::<PREFILL_ROWS, 3>,
        }),
        (KernelPath::Avx512Vnni, Q5_1) => Some(Kernels {
            one: q4_1_vnni512::<1, 4>,
            many: q4_1_vnni512::<PREFILL_ROWS, 4>,
        }),
        // `vpmaddubsw` pairs stay below 2 * 31 * 127: no saturation for 5-bit codes.
        (KernelPath::Avx512, Q5_0) => Some(Kernels {
            one: q4_1_avx512::<1, 3>,
            many: q4_1_avx512::<PREFILL_ROWS, 3>,
        }),
        (KernelPath::Avx512, Q5_1) => Some(Kernels {
            one: q4_1_avx512::<1, 4>,
            many: q4_1_avx512::<PREFILL_ROWS, 4>,
        }),
        (KernelPath::Avx2 | KernelPath::Avx2Vnni, Q5_0) => Some(Kernels {
            one: q5_avx2::<1, false>,
            many: q5_avx2::<PREFILL_ROWS, false>,
        }),
        (KernelPath::Avx2 | KernelPath::Avx2Vnni, Q5_1) => Some(Kernels {
            one: q5_avx2::<1, true>,
            many: q5_avx2::<PREFILL_ROWS, true>,
        }),
        (
            KernelPath::Avx2 | KernelPath::Avx2Vnni | KernelPath::Avx512 | KernelPath::Avx512Vnni,
            F32,
        ) => Some(Kernels {
            one: float_avx2::<1, 0>,
            many: float_avx2::<PREFILL_ROWS, 0>,
        }),
        (
            KernelPath::Avx2 | KernelPath::Avx2Vnni | KernelPath::Avx512 | KernelPath::Avx512Vnni,
            F16,
        ) => Some(Kernels {
            one: float_avx2::<1, 1>,
            many: float_avx2::<PREFILL_ROWS, 1>,
        }),
        (
            KernelPath::Avx2 | KernelPath::Avx2Vnni | KernelPath::Avx512 | KernelPath::Avx512Vnni,
            BF16,
        ) => Some(Kernels {
            one: float_avx2::<1, 2>,
            many: float_avx2::<PREFILL_ROWS, 2>,
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

macro_rules! q4_1_kernel {
    ($features:literal, $idot:ident, $name:ident) => {
        /// Q4_1 weights: `sum_b dw*dx * dot(q, qx) + mw * (dx * sum(qx))`.
        #[target_feature(enable = $features)]
        unsafe fn $name<const N: usize>(w: &[u8], a: &QActs, r0: usize) -> [f32; N] {
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
    };
}

macro_rules! q4_0_kernel {
    ($features:literal, $idot:ident, $name:ident) => {
        /// Q4_0 weights: `sum_b dw*dx * dot(q - 8, qx)`, signed dot via |w| and sign(x, w).
        #[target_feature(enable = $features)]
        unsafe fn $name<const N: usize>(w: &[u8], a: &QActs, r0: usize) -> [f32; N] {
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
    };
}

macro_rules! q8_0_kernel {
    ($features:literal, $idot:ident, $name:ident) => {
        /// Q8_0 weights: `sum_b dw*dx * dot(q, qx)`, signed dot via |w| and sign(x, w).
        #[target_feature(enable = $features)]
        unsafe fn $name<const N: usize>(w: &[u8], a: &QActs, r0: usize) -> [f32; N] {
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

q4_1_kernel!("avx2,fma,f16c", idot_avx2, q4_1_avx2);
q4_0_kernel!("avx2,fma,f16c", idot_avx2, q4_0_avx2);
q8_0_kernel!("avx2,fma,f16c", idot_avx2, q8_0_avx2);

/// Sum of 64 u8 x i8 products into 16 i32 lanes, exact (`vpdpbusd`).
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
fn idot512_vnni(u: __m512i, s: __m512i) -> __m512i {
    _mm512_dpbusd_epi32(_mm512_setzero_si512(), u, s)
}

/// Sum of 64 u8 x i8 products into 16 i32 lanes via i16 pairs (callers keep pairs < 32767).
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl")]
fn idot512_bw(u: __m512i, s: __m512i) -> __m512i {
    _mm512_madd_epi16(_mm512_maddubs_epi16(u, s), _mm512_set1_epi16(1))
}

/// Two f16 scales (at `p0`, `p1`) as f32 lanes 0 and 2, zeros in 1 and 3.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl")]
unsafe fn f16_pair_02(p0: *const u8, p1: *const u8) -> __m128 {
    // Joined in a general register: vector shuffle ports are the scarce resource here.
    let a = p0.cast::<u16>().read_unaligned() as u64;
    let b = p1.cast::<u16>().read_unaligned() as u64;
    _mm_cvtph_ps(_mm_cvtsi64_si128((a | (b << 32)) as i64))
}

/// Lanes 0..8 from lane 0 of a 128-bit value, lanes 8..16 from its lane 2.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl")]
fn spread_02(v: __m128) -> __m512 {
    let idx = _mm512_set_epi32(2, 2, 2, 2, 2, 2, 2, 2, 0, 0, 0, 0, 0, 0, 0, 0);
    _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(v))
}

/// The 8 scales and 8 mins of a Q4_K / Q5_K block (12 bytes at `p`) as the bytes of two u64,
/// unpacked with word-wide bit operations (same result as `k_scale_min`).
#[inline]
unsafe fn k_scale_min_words(p: *const u8) -> (u64, u64) {
    let a = p.cast::<u32>().read_unaligned();
    let b = p.add(4).cast::<u32>().read_unaligned();
    let c = p.add(8).cast::<u32>().read_unaligned();
    let sc_hi = (c & 0x0f0f_0f0f) | ((a >> 2) & 0x3030_3030);
    let mn_hi = ((c >> 4) & 0x0f0f_0f0f) | ((b >> 2) & 0x3030_3030);
    let sc = (a & 0x3f3f_3f3f) as u64 | ((sc_hi as u64) << 32);
    let mn = (b & 0x3f3f_3f3f) as u64 | ((mn_hi as u64) << 32);
    (sc, mn)
}

macro_rules! qk45_kernel {
    ($features:literal, $scaled_add:ident, $name:ident) => {
        /// Q4_K (`FIVE = false`) and Q5_K (`FIVE = true`) weights: per super-block the 8 groups are
        /// unpacked once for all N activation rows; `vpmaddubsw` gives i16 pair sums, `vpmaddwd` with
        /// the group's 6-bit scale gives i32; the mins term uses the activations' sums of 16.
        #[target_feature(enable = $features)]
        unsafe fn $name<const N: usize, const FIVE: bool>(
            w: &[u8],
            a: &QActs,
            r0: usize,
        ) -> [f32; N] {
            let (type_size, qs_at) = if FIVE { (176, 48) } else { (144, 16) };
            let nsb = a.cols / 256;
            debug_assert_eq!(w.len(), nsb * type_size);
            let m4 = _mm256_set1_epi8(0x0f);
            let sixteen = _mm256_set1_epi8(0x10);
            let mut acc = [_mm256_setzero_ps(); N];
            let mut accm = [_mm256_setzero_ps(); N];
            for sb in 0..nsb {
                let bp = w.as_ptr().add(sb * type_size);
                // [d, dmin] widened by F16C.
                let dd = _mm_cvtph_ps(_mm_cvtsi32_si128(bp.cast::<i32>().read_unaligned()));
                let (sc, mn) = k_scale_min_words(bp.add(4));
                let qp = bp.add(qs_at);
                let mut q = [_mm256_setzero_si256(); 8];
                for j in 0..4 {
                    let raw = _mm256_loadu_si256(qp.add(32 * j).cast());
                    q[2 * j] = _mm256_and_si256(raw, m4);
                    q[2 * j + 1] = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
                }
                if FIVE {
                    let qh = _mm256_loadu_si256(bp.add(16).cast());
                    for (g, qg) in q.iter_mut().enumerate() {
                        let bit = _mm256_set1_epi8(1 << g);
                        let set = _mm256_cmpeq_epi8(_mm256_and_si256(qh, bit), bit);
                        *qg = _mm256_or_si256(*qg, _mm256_and_si256(set, sixteen));
                    }
                }
                let scale16: [__m256i; 8] =
                    std::array::from_fn(|g| _mm256_set1_epi16((sc >> (8 * g)) as u8 as i16));
                // The mins, each repeated for the two sums of 16 of its group.
                let mins = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(mn as i64));
                let mins_lo =
                    _mm256_permutevar8x32_epi32(mins, _mm256_set_epi32(3, 3, 2, 2, 1, 1, 0, 0));
                let mins_hi =
                    _mm256_permutevar8x32_epi32(mins, _mm256_set_epi32(7, 7, 6, 6, 5, 5, 4, 4));
                for i in 0..N {
                    let row = r0 + i;
                    let x = a.qs.as_ptr().add(row * a.cols + sb * 256);
                    let mut isum = _mm256_setzero_si256();
                    for g in 0..8 {
                        let xv = _mm256_loadu_si256(x.add(32 * g).cast());
                        let p16 = _mm256_maddubs_epi16(q[g], xv);
                        isum = $scaled_add(isum, p16, scale16[g]);
                    }
                    let s16 = a.sums16.as_ptr().add((row * nsb + sb) * 16);
                    let summ = _mm256_add_epi32(
                        _mm256_mullo_epi32(mins_lo, _mm256_loadu_si256(s16.cast())),
                        _mm256_mullo_epi32(mins_hi, _mm256_loadu_si256(s16.add(8).cast())),
                    );
                    // [d * dx, dmin * dx]
                    let ddx = _mm_mul_ps(dd, _mm_set1_ps(a.ds[row * nsb + sb][0]));
                    acc[i] = _mm256_fmadd_ps(
                        _mm256_cvtepi32_ps(isum),
                        _mm256_broadcastss_ps(ddx),
                        acc[i],
                    );
                    accm[i] = _mm256_fmadd_ps(
                        _mm256_cvtepi32_ps(summ),
                        _mm256_broadcastss_ps(_mm_movehdup_ps(ddx)),
                        accm[i],
                    );
                }
            }
            std::array::from_fn(|i| hsum(acc[i]) - hsum(accm[i]))
        }
    };
}

macro_rules! q6_k_kernel {
    ($features:literal, $scaled_add:ident, $name:ident) => {
        /// Q6_K weights: 6-bit values 0..63 unpacked once per super-block, `vpmaddubsw` then
        /// `vpmaddwd` with the signed scale of each 16; the -32 offset is applied through the
        /// activations' sums of 16.
        #[target_feature(enable = $features)]
        unsafe fn $name<const N: usize>(w: &[u8], a: &QActs, r0: usize) -> [f32; N] {
            let nsb = a.cols / 256;
            debug_assert_eq!(w.len(), nsb * 210);
            let m4 = _mm256_set1_epi8(0x0f);
            let m30 = _mm256_set1_epi8(0x30);
            let mut acc = [_mm256_setzero_ps(); N];
            for sb in 0..nsb {
                let p = w.as_ptr().add(sb * 210);
                let d = _mm_cvtph_ps(_mm_cvtsi32_si128(
                    p.add(208).cast::<u16>().read_unaligned() as i32
                ));
                let sc_bytes = _mm_loadu_si128(p.add(192).cast());
                let sc_lo = _mm256_cvtepi8_epi32(sc_bytes);
                let sc_hi = _mm256_cvtepi8_epi32(_mm_srli_si128(sc_bytes, 8));
                let mut v = [_mm256_setzero_si256(); 8];
                for h in 0..2 {
                    let ql0 = _mm256_loadu_si256(p.add(h * 64).cast());
                    let ql1 = _mm256_loadu_si256(p.add(h * 64 + 32).cast());
                    let qh = _mm256_loadu_si256(p.add(128 + h * 32).cast());
                    v[4 * h] = _mm256_or_si256(
                        _mm256_and_si256(ql0, m4),
                        _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30),
                    );
                    v[4 * h + 1] = _mm256_or_si256(
                        _mm256_and_si256(ql1, m4),
                        _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30),
                    );
                    v[4 * h + 2] = _mm256_or_si256(
                        _mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4),
                        _mm256_and_si256(qh, m30),
                    );
                    v[4 * h + 3] = _mm256_or_si256(
                        _mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
                        _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30),
                    );
                }
                // i16 lanes 0..8 (elements 0..16 of a 32-group) take scale 2k, lanes 8..16 scale 2k+1.
                let scale16: [__m256i; 8] = std::array::from_fn(|k| {
                    let lo = p.add(192 + 2 * k).cast::<i8>().read() as i16;
                    let hi = p.add(193 + 2 * k).cast::<i8>().read() as i16;
                    _mm256_set_m128i(_mm_set1_epi16(hi), _mm_set1_epi16(lo))
                });
                for (i, acc_i) in acc.iter_mut().enumerate() {
                    let row = r0 + i;
                    let x = a.qs.as_ptr().add(row * a.cols + sb * 256);
                    let mut isum = _mm256_setzero_si256();
                    for k in 0..8 {
                        let xv = _mm256_loadu_si256(x.add(32 * k).cast());
                        isum = $scaled_add(isum, _mm256_maddubs_epi16(v[k], xv), scale16[k]);
                    }
                    // The -32 offset, exactly: 32 * sum_g scale_g * sum16_g, subtracted in integers.
                    let s16 = a.sums16.as_ptr().add((row * nsb + sb) * 16);
                    let offset = _mm256_add_epi32(
                        _mm256_mullo_epi32(sc_lo, _mm256_loadu_si256(s16.cast())),
                        _mm256_mullo_epi32(sc_hi, _mm256_loadu_si256(s16.add(8).cast())),
                    );
                    let isum = _mm256_sub_epi32(isum, _mm256_slli_epi32(offset, 5));
                    let ddx = _mm_mul_ss(d, _mm_load_ss(a.ds.as_ptr().add(row * nsb + sb).cast()));
                    *acc_i = _mm256_fmadd_ps(
                        _mm256_cvtepi32_ps(isum),
                        _mm256_broadcastss_ps(ddx),
                        *acc_i,
                    );
                }
            }
            std::array::from_fn(|i| hsum(acc[i]))
        }
    };
}

/// `acc + (p16 pairs * scale16)` summed into i32 lanes (`vpmaddwd` + add).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn scaled_add_avx2(acc: __m256i, p16: __m256i, scale16: __m256i) -> __m256i {
    _mm256_add_epi32(acc, _mm256_madd_epi16(p16, scale16))
}

/// `acc + (p16 pairs * scale16)` in one `vpdpwssd`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
fn scaled_add_vnni(acc: __m256i, p16: __m256i, scale16: __m256i) -> __m256i {
    _mm256_dpwssd_epi32(acc, p16, scale16)
}

qk45_kernel!("avx2,fma,f16c", scaled_add_avx2, qk45_avx2);
q6_k_kernel!("avx2,fma,f16c", scaled_add_avx2, q6_k_avx2);
qk45_kernel!(
    "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni",
    scaled_add_vnni,
    qk45_vnni
);
q6_k_kernel!(
    "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni",
    scaled_add_vnni,
    q6_k_vnni
);

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

/// The 32 bits of a Q5 block's `qh` (at `p`) as 32 bytes, 0x10 where the bit is set.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn fifth_bits(p: *const u8) -> __m256i {
    let bits = _mm256_set1_epi32(p.cast::<i32>().read_unaligned());
    // Byte i takes qh byte i / 8 (each 128-bit lane holds all four), then tests bit i % 8.
    let spread = _mm256_shuffle_epi8(
        bits,
        _mm256_set_epi64x(
            0x0303_0303_0303_0303,
            0x0202_0202_0202_0202,
            0x0101_0101_0101_0101,
            0,
        ),
    );
    let select = _mm256_set1_epi64x(0x8040_2010_0804_0201u64 as i64);
    let set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, select), select);
    _mm256_and_si256(set, _mm256_set1_epi8(0x10))
}

/// Q5_0 (`ONE = false`: `d * (q - 16)`) and Q5_1 (`ONE = true`: `d * q + m`) weights.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q5_avx2<const N: usize, const ONE: bool>(w: &[u8], a: &QActs, r0: usize) -> [f32; N] {
    let (type_size, qh_at) = if ONE { (24, 4) } else { (22, 2) };
    let nb = a.cols / 32;
    debug_assert_eq!(w.len(), nb * type_size);
    let wp = w.as_ptr();
    let sixteen = _mm256_set1_epi8(16);
    let mut acc = [[_mm256_setzero_ps(); N]; 2];
    let mut accm = [_mm_setzero_ps(); N];
    macro_rules! block {
        ($b:expr, $k:expr) => {{
            let b = $b;
            let blk = wp.add(b * type_size);
            let q = _mm256_or_si256(nibbles(blk.add(qh_at + 4)), fifth_bits(blk.add(qh_at)));
            // [d, m] (Q5_1) or [d, d] (Q5_0) widened.
            let dm = if ONE {
                _mm_cvtph_ps(_mm_cvtsi32_si128(blk.cast::<i32>().read_unaligned()))
            } else {
                f16_splat(blk)
            };
            let signed = _mm256_sub_epi8(q, sixteen);
            let wabs = _mm256_sign_epi8(signed, signed);
            for i in 0..N {
                let row = r0 + i;
                let xq = _mm256_loadu_si256(a.qs.as_ptr().add(row * a.cols + b * 32).cast());
                let ds = _mm_castpd_ps(_mm_load_sd(a.ds.as_ptr().add(row * nb + b).cast()));
                let prod = _mm_mul_ps(dm, ds);
                let idot = if ONE {
                    idot_avx2(q, xq)
                } else {
                    idot_avx2(wabs, _mm256_sign_epi8(xq, signed))
                };
                let p = _mm256_cvtepi32_ps(idot);
                acc[$k][i] = _mm256_fmadd_ps(p, _mm256_broadcastss_ps(prod), acc[$k][i]);
                if ONE {
                    accm[i] = _mm_add_ps(accm[i], prod);
                }
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
        let m = if ONE {
            _mm_cvtss_f32(_mm_movehdup_ps(accm[i]))
        } else {
            0.0
        };
        hsum(_mm256_add_ps(acc[0][i], acc[1][i])) + m
    })
}

macro_rules! q4_1_512 {
    ($features:literal, $idot512:ident, $idot256:ident, $name:ident) => {
        /// Q4_1 weights (`Q4_0 = false`), two blocks per zmm: nibbles of blocks b, b+1 become
        /// `[lo_b, hi_b, lo_b+1, hi_b+1]` (the activations' natural order), one `vpdpbusd` for both.
        /// Q4_0 weights (`KIND = 1`) as Q4_1 with `m = -8 d`: the unsigned nibbles go
        /// straight into `vpdpbusd` and the offset comes from the activations' block sums.
        /// Q8_0 weights (`KIND = 2`, VNNI only: `vpmaddubsw` would saturate) likewise as
        /// `w + 128` with `m = -128 d`. Q5_0 (`KIND = 3`) as Q4_0 with the fifth bit added to
        /// the nibbles under a byte mask and `m = -16 d`; Q5_1 (`KIND = 4`) as Q4_1 with it.
        /// `KIND = 0` is Q4_1.
        #[target_feature(enable = $features)]
        unsafe fn $name<const N: usize, const KIND: u8>(
            w: &[u8],
            a: &QActs,
            r0: usize,
        ) -> [f32; N] {
            let nb = a.cols / 32;
            let (size, qs_at) = match KIND {
                1 => (18, 2),
                2 => (34, 2),
                3 => (22, 6),
                4 => (24, 8),
                _ => (20, 4),
            };
            // Where a Q5 block keeps the fifth bits (one u32, bit i for element i).
            let qh_at = if KIND == 3 { 2 } else { 4 };
            let five = KIND == 3 || KIND == 4;
            // The only m stored in the block: Q4_1 and Q5_1.
            let stored_m = KIND == 0 || KIND == 4;
            debug_assert_eq!(w.len(), nb * size);
            // Q4_0: [d0, d0, d1, d1] * [1, -8, 1, -8] = [d0, m0, d1, m1] (-128 for Q8_0, -16
            // for Q5_0).
            let off = match KIND {
                2 => -128.0,
                3 => -16.0,
                _ => -8.0,
            };
            let d_to_dm = _mm_setr_ps(1.0, off, 1.0, off);
            let flip = _mm512_set1_epi8(-128);
            let wp = w.as_ptr();
            let m4 = _mm512_set1_epi8(0x0f);
            let nibble_shift = _mm512_set_epi64(4, 4, 0, 0, 4, 4, 0, 0);
            let mut acc = [[_mm512_setzero_ps(); N]; 2];
            let mut accm = [_mm_setzero_ps(); N];
            macro_rules! pair {
                ($b:expr, $k:expr) => {{
                    let b = $b;
                    let blk0 = wp.add(b * size);
                    let blk1 = blk0.add(size);
                    // [d0, m0, d1, m1] widened; the two 32-bit pairs joined in a general
                    // register (vector shuffle ports are the scarce resource here).
                    let dm = if !stored_m {
                        let lo = blk0.cast::<u16>().read_unaligned() as u64;
                        let hi = blk1.cast::<u16>().read_unaligned() as u64;
                        let d = _mm_cvtph_ps(_mm_cvtsi64_si128((lo | (hi << 32)) as i64));
                        _mm_mul_ps(_mm_moveldup_ps(d), d_to_dm)
                    } else {
                        let lo = blk0.cast::<u32>().read_unaligned() as u64;
                        let hi = blk1.cast::<u32>().read_unaligned() as u64;
                        _mm_cvtph_ps(_mm_cvtsi64_si128((lo | (hi << 32)) as i64))
                    };
                    // 128-bit lanes [q0, q0, q1, q1] by (masked) broadcast loads, then the
                    // odd lanes shifted down a nibble: [q0, q0>>4, q1, q1>>4].
                    let q0 = _mm512_broadcast_i32x4(_mm_loadu_si128(blk0.add(qs_at).cast()));
                    let q = _mm512_mask_broadcast_i32x4(
                        q0,
                        0xff00,
                        _mm_loadu_si128(blk1.add(qs_at).cast()),
                    );
                    let wq = if KIND == 2 {
                        let both = _mm512_mask_broadcast_i64x4(
                            _mm512_castsi256_si512(_mm256_loadu_si256(blk0.add(2).cast())),
                            0xf0,
                            _mm256_loadu_si256(blk1.add(2).cast()),
                        );
                        _mm512_xor_si512(both, flip)
                    } else {
                        _mm512_and_si512(_mm512_srlv_epi64(q, nibble_shift), m4)
                    };
                    let wq = if five {
                        // Lanes are elements 0..32 of block b, then of b + 1: the two u32s
                        // of fifth bits joined are exactly the byte mask.
                        let h0 = blk0.add(qh_at).cast::<u32>().read_unaligned() as u64;
                        let h1 = blk1.add(qh_at).cast::<u32>().read_unaligned() as u64;
                        _mm512_mask_add_epi8(wq, h0 | (h1 << 32), wq, _mm512_set1_epi8(16))
                    } else {
                        wq
                    };
                    for i in 0..N {
                        let row = r0 + i;
                        let xq =
                            _mm512_loadu_si512(a.qs.as_ptr().add(row * a.cols + b * 32).cast());
                        // [dx0, sx0, dx1, sx1]
                        let ds = _mm_loadu_ps(a.ds.as_ptr().add(row * nb + b).cast());
                        let prod = _mm_mul_ps(dm, ds);
                        let p = _mm512_cvtepi32_ps($idot512(wq, xq));
                        acc[$k][i] = _mm512_fmadd_ps(p, spread_02(prod), acc[$k][i]);
                        accm[i] = _mm_add_ps(accm[i], prod);
                    }
                }};
            }
            let mut b = 0;
            while b + 4 <= nb {
                pair!(b, 0);
                pair!(b + 2, 1);
                b += 4;
            }
            if b + 2 <= nb {
                pair!(b, 0);
                b += 2;
            }
            let mut out: [f32; N] = std::array::from_fn(|i| {
                let m = accm[i];
                _mm512_reduce_add_ps(_mm512_add_ps(acc[0][i], acc[1][i]))
                    + (_mm_cvtss_f32(_mm_movehdup_ps(m)) + _mm_cvtss_f32(_mm_shuffle_ps(m, m, 3)))
            });
            if b < nb {
                // Odd block count: the last block alone, 256 bits wide.
                let blk = wp.add(b * size);
                let dm = if !stored_m {
                    let d =
                        _mm_cvtph_ps(_mm_cvtsi32_si128(blk.cast::<u16>().read_unaligned() as i32));
                    _mm_mul_ps(_mm_moveldup_ps(d), d_to_dm)
                } else {
                    _mm_cvtph_ps(_mm_cvtsi32_si128(blk.cast::<i32>().read_unaligned()))
                };
                let wq = if KIND == 2 {
                    _mm256_xor_si256(
                        _mm256_loadu_si256(blk.add(2).cast()),
                        _mm256_set1_epi8(-128),
                    )
                } else {
                    nibbles(blk.add(qs_at))
                };
                let wq = if five {
                    let h = blk.add(qh_at).cast::<u32>().read_unaligned();
                    _mm256_mask_add_epi8(wq, h, wq, _mm256_set1_epi8(16))
                } else {
                    wq
                };
                for (i, o) in out.iter_mut().enumerate() {
                    let row = r0 + i;
                    let xq = _mm256_loadu_si256(a.qs.as_ptr().add(row * a.cols + b * 32).cast());
                    let ds = _mm_castpd_ps(_mm_load_sd(a.ds.as_ptr().add(row * nb + b).cast()));
                    let prod = _mm_mul_ps(dm, ds);
                    let p = _mm256_cvtepi32_ps($idot256(wq, xq));
                    *o += hsum(_mm256_mul_ps(p, _mm256_broadcastss_ps(prod)))
                        + _mm_cvtss_f32(_mm_movehdup_ps(prod));
                }
            }
            out
        }
    };
}

macro_rules! signed_512 {
    ($features:literal, $idot512:ident, $idot256:ident, $name:ident) => {
        /// Q8_0 (`Q4 = false`) or Q4_0 (`Q4 = true`, values q - 8) weights, two blocks per
        /// zmm; signed x signed via |w| and x negated where w < 0, exact per block.
        #[target_feature(enable = $features)]
        unsafe fn $name<const N: usize, const Q4: bool>(
            w: &[u8],
            a: &QActs,
            r0: usize,
        ) -> [f32; N] {
            let type_size = if Q4 { 18 } else { 34 };
            let nb = a.cols / 32;
            debug_assert_eq!(w.len(), nb * type_size);
            let wp = w.as_ptr();
            let m4 = _mm512_set1_epi8(0x0f);
            let eight = _mm512_set1_epi8(8);
            let nibble_shift = _mm512_set_epi64(4, 4, 0, 0, 4, 4, 0, 0);
            let mut acc = [[_mm512_setzero_ps(); N]; 2];
            macro_rules! pair {
                ($b:expr, $k:expr) => {{
                    let b = $b;
                    let blk0 = wp.add(b * type_size);
                    let blk1 = blk0.add(type_size);
                    let d = f16_pair_02(blk0, blk1);
                    let wq = if Q4 {
                        // As in the Q4_1 kernel: lanes [q0, q0>>4, q1, q1>>4], then - 8.
                        let q0 = _mm512_broadcast_i32x4(_mm_loadu_si128(blk0.add(2).cast()));
                        let q = _mm512_mask_broadcast_i32x4(
                            q0,
                            0xff00,
                            _mm_loadu_si128(blk1.add(2).cast()),
                        );
                        _mm512_sub_epi8(
                            _mm512_and_si512(_mm512_srlv_epi64(q, nibble_shift), m4),
                            eight,
                        )
                    } else {
                        _mm512_mask_broadcast_i64x4(
                            _mm512_castsi256_si512(_mm256_loadu_si256(blk0.add(2).cast())),
                            0xf0,
                            _mm256_loadu_si256(blk1.add(2).cast()),
                        )
                    };
                    let wabs = _mm512_abs_epi8(wq);
                    let negative = _mm512_movepi8_mask(wq);
                    for i in 0..N {
                        let row = r0 + i;
                        let xq =
                            _mm512_loadu_si512(a.qs.as_ptr().add(row * a.cols + b * 32).cast());
                        let xs = _mm512_mask_sub_epi8(xq, negative, _mm512_setzero_si512(), xq);
                        // [dx0, sx0, dx1, sx1] * [dw0, 0, dw1, 0]
                        let prod =
                            _mm_mul_ps(d, _mm_loadu_ps(a.ds.as_ptr().add(row * nb + b).cast()));
                        let p = _mm512_cvtepi32_ps($idot512(wabs, xs));
                        acc[$k][i] = _mm512_fmadd_ps(p, spread_02(prod), acc[$k][i]);
                    }
                }};
            }
            let mut b = 0;
            while b + 4 <= nb {
                pair!(b, 0);
                pair!(b + 2, 1);
                b += 4;
            }
            if b + 2 <= nb {
                pair!(b, 0);
                b += 2;
            }
            let mut out: [f32; N] =
                std::array::from_fn(|i| _mm512_reduce_add_ps(_mm512_add_ps(acc[0][i], acc[1][i])));
            if b < nb {
                let blk = wp.add(b * type_size);
                let dw = f16_splat(blk);
                let wq = if Q4 {
                    _mm256_sub_epi8(nibbles(blk.add(2)), _mm256_set1_epi8(8))
                } else {
                    _mm256_loadu_si256(blk.add(2).cast())
                };
                let wabs = _mm256_sign_epi8(wq, wq);
                for (i, o) in out.iter_mut().enumerate() {
                    let row = r0 + i;
                    let xq = _mm256_loadu_si256(a.qs.as_ptr().add(row * a.cols + b * 32).cast());
                    let d = _mm_mul_ss(dw, _mm_load_ss(a.ds.as_ptr().add(row * nb + b).cast()));
                    let p = _mm256_cvtepi32_ps($idot256(wabs, _mm256_sign_epi8(xq, wq)));
                    *o += hsum(_mm256_mul_ps(p, _mm256_broadcastss_ps(d)));
                }
            }
            out
        }
    };
}

q4_1_512!(
    "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni",
    idot512_vnni,
    idot_vnni,
    q4_1_vnni512
);
q4_1_512!(
    "avx2,fma,f16c,avx512f,avx512bw,avx512vl",
    idot512_bw,
    idot_avx2,
    q4_1_avx512
);
signed_512!(
    "avx2,fma,f16c,avx512f,avx512bw,avx512vl",
    idot512_bw,
    idot_avx2,
    signed_avx512
);

// ---------------------------------------------------------------- activation quantization

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
            None => super::quantize_q8x32_scalar(
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
            None => super::quantize_q8x256_scalar(
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
            None => super::quantize_q8x32_scalar(
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
            None => super::quantize_q8x256_scalar(
                &x[256 * b..256 * b + 256],
                &mut qs[256 * b..256 * b + 256],
                &mut ds[b..b + 1],
                &mut sums16[16 * b..16 * b + 16],
            ),
        }
    }
}
