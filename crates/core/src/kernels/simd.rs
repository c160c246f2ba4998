//! A minimal f32 SIMD abstraction so each kernel body is written once and instantiated per
//! instruction set. Every method is `#[inline(always)]`; the kernels call them only from
//! `#[target_feature]` entry points, where the intrinsics inline into straight-line code.
//!
//! Safety contract of every method: the caller runs on a CPU with the implementing type's
//! features, and every pointer is valid for the number of elements the method names.

#![allow(clippy::missing_safety_doc)]

#[cfg(target_arch = "aarch64")]
use std::arch::aarch64::*;
#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// Operations on a vector of `W` f32 lanes.
pub(crate) trait Simd: Copy {
    type V: Copy;
    const W: usize;
    unsafe fn splat(x: f32) -> Self::V;
    unsafe fn load(p: *const f32) -> Self::V;
    /// Loads `n < W` lanes, the rest zero.
    unsafe fn load_partial(p: *const f32, n: usize) -> Self::V;
    unsafe fn store(p: *mut f32, v: Self::V);
    /// Stores the first `n < W` lanes.
    unsafe fn store_partial(p: *mut f32, n: usize, v: Self::V);
    /// Loads `W` IEEE binary16 values (as raw bits), widened exactly to f32.
    unsafe fn load_f16(p: *const u16) -> Self::V;
    unsafe fn load_f16_partial(p: *const u16, n: usize) -> Self::V;
    /// Loads `W` bfloat16 values (as raw bits), widened exactly to f32.
    unsafe fn load_bf16(p: *const u16) -> Self::V;
    unsafe fn load_bf16_partial(p: *const u16, n: usize) -> Self::V;
    /// Narrows to binary16 with round-to-nearest-even, stores `W` values.
    unsafe fn store_f16(p: *mut u16, v: Self::V);
    /// Narrows to bfloat16 with round-to-nearest-even (NaN kept, made quiet), stores `W`.
    unsafe fn store_bf16(p: *mut u16, v: Self::V);
    unsafe fn add(a: Self::V, b: Self::V) -> Self::V;
    unsafe fn sub(a: Self::V, b: Self::V) -> Self::V;
    unsafe fn mul(a: Self::V, b: Self::V) -> Self::V;
    unsafe fn div(a: Self::V, b: Self::V) -> Self::V;
    /// `a * b + c`, fused.
    unsafe fn fma(a: Self::V, b: Self::V, c: Self::V) -> Self::V;
    /// Lane-wise max; returns `b` where either is NaN (x86 semantics), so pass data as `b`
    /// to propagate NaN.
    unsafe fn max(a: Self::V, b: Self::V) -> Self::V;
    /// Lane-wise min, NaN semantics as `max`.
    unsafe fn min(a: Self::V, b: Self::V) -> Self::V;
    /// Rounds to the nearest integer (ties to even), as f32.
    unsafe fn round(a: Self::V) -> Self::V;
    /// `a * 2^n` for integral `n` in [-126, 127].
    unsafe fn scale_pow2(a: Self::V, n: Self::V) -> Self::V;
    /// Lanes where `a < b` keep `v`, others become 0.
    unsafe fn zero_unless_not_less(a: Self::V, b: Self::V, v: Self::V) -> Self::V;
    /// Lane-wise `if a < b { x } else { y }`.
    unsafe fn select_less(a: Self::V, b: Self::V, x: Self::V, y: Self::V) -> Self::V;
    unsafe fn hsum(a: Self::V) -> f32;
    unsafe fn hmax(a: Self::V) -> f32;
    /// Columns [`Simd::TRANSPOSE_COLS`] at a time that [`Simd::transpose`] gives.
    const TRANSPOSE_COLS: usize = 16;
    /// Columns `c0 .. c0 + TRANSPOSE_COLS` of the first `W` rows as vectors (vector `c`, lane
    /// `r` = `rows[r][c0 + c]`; the array's later vectors are unspecified), on levels with 16
    /// or 8 lanes; `None` elsewhere.
    #[inline(always)]
    unsafe fn transpose(_rows: &[*const f32; 16], _c0: usize) -> Option<[Self::V; 16]> {
        None
    }
    /// [`Simd::transpose`] of f16 rows, widened in the loads (exactly: every f16 is an f32),
    /// so the vectors are `transpose`'s of the rows widened first.
    #[inline(always)]
    unsafe fn transpose_f16(_rows: &[*const u16; 16], _c0: usize) -> Option<[Self::V; 16]> {
        None
    }
    /// [`Simd::hsum`] of 16 vectors: the same tree per vector, so the same bits, but a level
    /// may reduce several vectors with one instruction (a tile's outputs in one pass).
    #[inline(always)]
    unsafe fn hsum16(a: &[Self::V; 16]) -> [f32; 16] {
        let mut out = [0f32; 16];
        for (o, &v) in out.iter_mut().zip(a) {
            *o = Self::hsum(v);
        }
        out
    }

    /// exp(x) with ~1-2 ulp error (Cephes expf polynomial); inputs below ln(2^-126) give 0,
    /// inputs are clamped above at 88.3762 (so 2^n stays a normal exponent: n <= 127),
    /// giving ~2.4e38 instead of inf; NaN propagates.
    #[inline(always)]
    unsafe fn exp(x: Self::V) -> Self::V {
        const LO: f32 = -87.336_55; // ln(2^-126): smallest normal result
        const HI: f32 = 88.376_2; // HI * log2(e) rounds to 127
        let x_in = x;
        let x = Self::min(Self::splat(HI), Self::max(Self::splat(LO), x));
        let n = Self::round(Self::mul(x, Self::splat(std::f32::consts::LOG2_E)));
        // r = x - n*ln2 in two steps (Cody-Waite) to keep r exact.
        let r = Self::fma(n, Self::splat(-0.693_359_4), x);
        let r = Self::fma(n, Self::splat(2.121_944_4e-4), r);
        let mut p = Self::splat(1.987_569_1e-4);
        p = Self::fma(p, r, Self::splat(1.398_199_9e-3));
        p = Self::fma(p, r, Self::splat(8.333_452e-3));
        p = Self::fma(p, r, Self::splat(4.166_579_6e-2));
        p = Self::fma(p, r, Self::splat(1.666_666_5e-1));
        p = Self::fma(p, r, Self::splat(0.5));
        let r2 = Self::mul(r, r);
        let y = Self::add(Self::fma(p, r2, r), Self::splat(1.0));
        let y = Self::scale_pow2(y, n);
        // Results that would be subnormal (x < LO) flush to 0; NaN compares false and stays.
        Self::zero_unless_not_less(x_in, Self::splat(LO), y)
    }
}

/// Scalar twin of [`Simd::exp`]'s contract, used by scalar reference paths: libm `expf`.
#[inline]
pub(crate) fn exp_scalar(x: f32) -> f32 {
    x.exp()
}

/// AVX-512 (F/BW/VL/DQ) with 16 lanes.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
pub(crate) struct Avx512;

#[cfg(target_arch = "x86_64")]
impl Simd for Avx512 {
    type V = __m512;
    const W: usize = 16;
    #[inline(always)]
    unsafe fn splat(x: f32) -> __m512 {
        _mm512_set1_ps(x)
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> __m512 {
        _mm512_loadu_ps(p)
    }
    #[inline(always)]
    unsafe fn load_partial(p: *const f32, n: usize) -> __m512 {
        _mm512_maskz_loadu_ps(((1u32 << n) - 1) as u16, p)
    }
    #[inline(always)]
    unsafe fn store(p: *mut f32, v: __m512) {
        _mm512_storeu_ps(p, v)
    }
    #[inline(always)]
    unsafe fn store_partial(p: *mut f32, n: usize, v: __m512) {
        _mm512_mask_storeu_ps(p, ((1u32 << n) - 1) as u16, v)
    }
    #[inline(always)]
    unsafe fn load_f16(p: *const u16) -> __m512 {
        _mm512_cvtph_ps(_mm256_loadu_si256(p as *const __m256i))
    }
    #[inline(always)]
    unsafe fn load_f16_partial(p: *const u16, n: usize) -> __m512 {
        _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(
            ((1u32 << n) - 1) as u16,
            p as *const i16,
        ))
    }
    #[inline(always)]
    unsafe fn load_bf16(p: *const u16) -> __m512 {
        let h = _mm256_loadu_si256(p as *const __m256i);
        _mm512_castsi512_ps(_mm512_slli_epi32::<16>(_mm512_cvtepu16_epi32(h)))
    }
    #[inline(always)]
    unsafe fn load_bf16_partial(p: *const u16, n: usize) -> __m512 {
        let h = _mm256_maskz_loadu_epi16(((1u32 << n) - 1) as u16, p as *const i16);
        _mm512_castsi512_ps(_mm512_slli_epi32::<16>(_mm512_cvtepu16_epi32(h)))
    }
    #[inline(always)]
    unsafe fn store_f16(p: *mut u16, v: __m512) {
        let h = _mm512_cvtps_ph::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(v);
        _mm256_storeu_si256(p as *mut __m256i, h)
    }
    #[inline(always)]
    unsafe fn store_bf16(p: *mut u16, v: __m512) {
        let bits = _mm512_castps_si512(v);
        let high = _mm512_srli_epi32::<16>(bits);
        let bias = _mm512_add_epi32(
            _mm512_and_si512(high, _mm512_set1_epi32(1)),
            _mm512_set1_epi32(0x7fff),
        );
        let rounded = _mm512_srli_epi32::<16>(_mm512_add_epi32(bits, bias));
        let quiet_nan = _mm512_or_si512(high, _mm512_set1_epi32(0x40));
        let is_nan = _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(v, v);
        let r = _mm512_mask_blend_epi32(is_nan, rounded, quiet_nan);
        _mm256_storeu_si256(p as *mut __m256i, _mm512_cvtepi32_epi16(r))
    }
    #[inline(always)]
    unsafe fn add(a: __m512, b: __m512) -> __m512 {
        _mm512_add_ps(a, b)
    }
    #[inline(always)]
    unsafe fn sub(a: __m512, b: __m512) -> __m512 {
        _mm512_sub_ps(a, b)
    }
    #[inline(always)]
    unsafe fn mul(a: __m512, b: __m512) -> __m512 {
        _mm512_mul_ps(a, b)
    }
    #[inline(always)]
    unsafe fn div(a: __m512, b: __m512) -> __m512 {
        _mm512_div_ps(a, b)
    }
    #[inline(always)]
    unsafe fn fma(a: __m512, b: __m512, c: __m512) -> __m512 {
        _mm512_fmadd_ps(a, b, c)
    }
    #[inline(always)]
    unsafe fn max(a: __m512, b: __m512) -> __m512 {
        _mm512_max_ps(a, b)
    }
    #[inline(always)]
    unsafe fn min(a: __m512, b: __m512) -> __m512 {
        _mm512_min_ps(a, b)
    }
    #[inline(always)]
    unsafe fn round(a: __m512) -> __m512 {
        _mm512_roundscale_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(a)
    }
    #[inline(always)]
    unsafe fn scale_pow2(a: __m512, n: __m512) -> __m512 {
        _mm512_scalef_ps(a, n)
    }
    #[inline(always)]
    unsafe fn zero_unless_not_less(a: __m512, b: __m512, v: __m512) -> __m512 {
        let less = _mm512_cmp_ps_mask::<_CMP_LT_OQ>(a, b);
        _mm512_maskz_mov_ps(!less, v)
    }
    #[inline(always)]
    unsafe fn select_less(a: __m512, b: __m512, x: __m512, y: __m512) -> __m512 {
        _mm512_mask_blend_ps(_mm512_cmp_ps_mask::<_CMP_LT_OQ>(a, b), y, x)
    }
    /// The tree, written out so that [`Simd::hsum16`] can follow it exactly: halves of 256,
    /// then of 128 bits, then lanes `0 + 2` and `1 + 3`, then those two.
    #[inline(always)]
    unsafe fn hsum(a: __m512) -> f32 {
        let h = _mm256_add_ps(_mm512_castps512_ps256(a), _mm512_extractf32x8_ps::<1>(a));
        let q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps::<1>(h));
        let p = _mm_add_ps(q, _mm_movehl_ps(q, q));
        _mm_cvtss_f32(_mm_add_ss(p, _mm_movehdup_ps(p)))
    }
    #[inline(always)]
    unsafe fn hmax(a: __m512) -> f32 {
        _mm512_reduce_max_ps(a)
    }
    /// Four rounds of 16 shuffles: pairs of rows interleaved, then quads, then 128-bit lanes
    /// twice.
    #[inline(always)]
    unsafe fn transpose(rows: &[*const f32; 16], c0: usize) -> Option<[__m512; 16]> {
        // Loops, not `array::from_fn`: a closure does not inherit the target features, so
        // its intrinsics would be out-of-line calls.
        let mut r = [_mm512_setzero_ps(); 16];
        for (v, row) in r.iter_mut().zip(rows) {
            *v = _mm512_loadu_ps(row.add(c0));
        }
        Some(transpose_avx512(&r))
    }
    #[inline(always)]
    unsafe fn transpose_f16(rows: &[*const u16; 16], c0: usize) -> Option<[__m512; 16]> {
        let mut r = [_mm512_setzero_ps(); 16];
        for (v, row) in r.iter_mut().zip(rows) {
            *v = Self::load_f16(row.add(c0));
        }
        Some(transpose_avx512(&r))
    }
    /// Each level halves two vectors' partial sums with two shuffles and one add, so 16
    /// vectors take 45 instructions instead of 16 separate trees.
    #[inline(always)]
    unsafe fn hsum16(a: &[__m512; 16]) -> [f32; 16] {
        // Level 1: 256-bit halves; vector pair (2p, 2p+1) -> [a2p's 8 sums, a2p+1's 8].
        // (Loops, not `array::from_fn`, so the intrinsics inline: see `transpose`.)
        let mut l1 = [_mm512_setzero_ps(); 8];
        for (p, l) in l1.iter_mut().enumerate() {
            let (x, y) = (a[2 * p], a[2 * p + 1]);
            *l = _mm512_add_ps(
                _mm512_shuffle_f32x4::<0b01_00_01_00>(x, y),
                _mm512_shuffle_f32x4::<0b11_10_11_10>(x, y),
            );
        }
        // Level 2: 128-bit halves; quad q -> one 128-bit lane of 4 sums per vector 4q..4q+4.
        let mut l2 = [_mm512_setzero_ps(); 4];
        for (q, l) in l2.iter_mut().enumerate() {
            let (x, y) = (l1[2 * q], l1[2 * q + 1]);
            *l = _mm512_add_ps(
                _mm512_shuffle_f32x4::<0b10_00_10_00>(x, y),
                _mm512_shuffle_f32x4::<0b11_01_11_01>(x, y),
            );
        }
        // Level 3: lanes 0 + 2 and 1 + 3 within each 128-bit lane.
        let mut l3 = [_mm512_setzero_ps(); 2];
        for (h, l) in l3.iter_mut().enumerate() {
            let (x, y) = (l2[2 * h], l2[2 * h + 1]);
            *l = _mm512_add_ps(
                _mm512_shuffle_ps::<0b01_00_01_00>(x, y),
                _mm512_shuffle_ps::<0b11_10_11_10>(x, y),
            );
        }
        // Level 4: (0 + 2) + (1 + 3). Lane 4L + g now holds vector 4g + L.
        let r = _mm512_add_ps(
            _mm512_shuffle_ps::<0b10_00_10_00>(l3[0], l3[1]),
            _mm512_shuffle_ps::<0b11_01_11_01>(l3[0], l3[1]),
        );
        let order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
        let mut out = [0f32; 16];
        _mm512_storeu_ps(out.as_mut_ptr(), _mm512_permutexvar_ps(order, r));
        out
    }
}

/// [`Simd::transpose`]'s shuffles on AVX-512: four rounds of 16 (pairs of rows interleaved,
/// then quads, then 128-bit lanes twice).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn transpose_avx512(r: &[__m512; 16]) -> [__m512; 16] {
    // t[2i] = [a0 b0 a1 b1] per 128-bit lane, t[2i+1] = [a2 b2 a3 b3] (a, b = rows 2i, 2i+1).
    let mut t = [_mm512_setzero_ps(); 16];
    for i in 0..8 {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    // u[4g + c], 128-bit lane L: column 4L + c of rows 4g .. 4g + 4.
    let mut u = [_mm512_setzero_ps(); 16];
    for g in 0..4 {
        let b = 4 * g;
        u[b] = _mm512_shuffle_ps::<0x44>(t[b], t[b + 2]);
        u[b + 1] = _mm512_shuffle_ps::<0xEE>(t[b], t[b + 2]);
        u[b + 2] = _mm512_shuffle_ps::<0x44>(t[b + 1], t[b + 3]);
        u[b + 3] = _mm512_shuffle_ps::<0xEE>(t[b + 1], t[b + 3]);
    }
    let mut out = [_mm512_setzero_ps(); 16];
    for c in 0..4 {
        // v: lanes 0 and 2 of groups 0, 1 (v0) or 2, 3 (v1); w: lanes 1 and 3.
        let v0 = _mm512_shuffle_f32x4::<0x88>(u[c], u[4 + c]);
        let w0 = _mm512_shuffle_f32x4::<0xDD>(u[c], u[4 + c]);
        let v1 = _mm512_shuffle_f32x4::<0x88>(u[8 + c], u[12 + c]);
        let w1 = _mm512_shuffle_f32x4::<0xDD>(u[8 + c], u[12 + c]);
        out[c] = _mm512_shuffle_f32x4::<0x88>(v0, v1);
        out[8 + c] = _mm512_shuffle_f32x4::<0xDD>(v0, v1);
        out[4 + c] = _mm512_shuffle_f32x4::<0x88>(w0, w1);
        out[12 + c] = _mm512_shuffle_f32x4::<0xDD>(w0, w1);
    }
    out
}

/// AVX2 + FMA + F16C with 8 lanes.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
pub(crate) struct Avx2;

/// [`Simd::transpose`]'s shuffles on AVX2: one 8 x 8 transpose.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn transpose_avx2(r: &[__m256; 8]) -> [__m256; 16] {
    // t[2i] = [a0 b0 a1 b1 | a4 b4 a5 b5], t[2i+1] = [a2 b2 a3 b3 | a6 b6 a7 b7].
    let mut t = [_mm256_setzero_ps(); 8];
    for i in 0..4 {
        t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    // u[4g + c] = column c (low 128 bits) and c + 4 (high) of rows 4g .. 4g + 4.
    let mut u = [_mm256_setzero_ps(); 8];
    for g in 0..2 {
        let b = 4 * g;
        u[b] = _mm256_shuffle_ps::<0x44>(t[b], t[b + 2]);
        u[b + 1] = _mm256_shuffle_ps::<0xEE>(t[b], t[b + 2]);
        u[b + 2] = _mm256_shuffle_ps::<0x44>(t[b + 1], t[b + 3]);
        u[b + 3] = _mm256_shuffle_ps::<0xEE>(t[b + 1], t[b + 3]);
    }
    let mut out = [_mm256_setzero_ps(); 16];
    for c in 0..4 {
        out[c] = _mm256_permute2f128_ps::<0x20>(u[c], u[4 + c]);
        out[4 + c] = _mm256_permute2f128_ps::<0x31>(u[c], u[4 + c]);
    }
    out
}

#[cfg(target_arch = "x86_64")]
impl Simd for Avx2 {
    type V = __m256;
    const W: usize = 8;
    /// One 8 x 8 transpose: 8 columns a call keep the result in half the 16 registers.
    const TRANSPOSE_COLS: usize = 8;
    #[inline(always)]
    unsafe fn transpose(rows: &[*const f32; 16], c0: usize) -> Option<[__m256; 16]> {
        // Loops, not `array::from_fn`: see the AVX-512 `transpose`.
        let mut r = [_mm256_setzero_ps(); 8];
        for (v, row) in r.iter_mut().zip(rows) {
            *v = _mm256_loadu_ps(row.add(c0));
        }
        Some(transpose_avx2(&r))
    }
    #[inline(always)]
    unsafe fn transpose_f16(rows: &[*const u16; 16], c0: usize) -> Option<[__m256; 16]> {
        let mut r = [_mm256_setzero_ps(); 8];
        for (v, row) in r.iter_mut().zip(rows) {
            *v = Self::load_f16(row.add(c0));
        }
        Some(transpose_avx2(&r))
    }
    #[inline(always)]
    unsafe fn splat(x: f32) -> __m256 {
        _mm256_set1_ps(x)
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> __m256 {
        _mm256_loadu_ps(p)
    }
    #[inline(always)]
    unsafe fn load_partial(p: *const f32, n: usize) -> __m256 {
        let mut buf = [0f32; 8];
        std::ptr::copy_nonoverlapping(p, buf.as_mut_ptr(), n);
        _mm256_loadu_ps(buf.as_ptr())
    }
    #[inline(always)]
    unsafe fn store(p: *mut f32, v: __m256) {
        _mm256_storeu_ps(p, v)
    }
    #[inline(always)]
    unsafe fn store_partial(p: *mut f32, n: usize, v: __m256) {
        let mut buf = [0f32; 8];
        _mm256_storeu_ps(buf.as_mut_ptr(), v);
        std::ptr::copy_nonoverlapping(buf.as_ptr(), p, n);
    }
    #[inline(always)]
    unsafe fn load_f16(p: *const u16) -> __m256 {
        _mm256_cvtph_ps(_mm_loadu_si128(p as *const __m128i))
    }
    #[inline(always)]
    unsafe fn load_f16_partial(p: *const u16, n: usize) -> __m256 {
        let mut buf = [0u16; 8];
        std::ptr::copy_nonoverlapping(p, buf.as_mut_ptr(), n);
        Self::load_f16(buf.as_ptr())
    }
    #[inline(always)]
    unsafe fn load_bf16(p: *const u16) -> __m256 {
        let h = _mm_loadu_si128(p as *const __m128i);
        _mm256_castsi256_ps(_mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(h)))
    }
    #[inline(always)]
    unsafe fn load_bf16_partial(p: *const u16, n: usize) -> __m256 {
        let mut buf = [0u16; 8];
        std::ptr::copy_nonoverlapping(p, buf.as_mut_ptr(), n);
        Self::load_bf16(buf.as_ptr())
    }
    #[inline(always)]
    unsafe fn store_f16(p: *mut u16, v: __m256) {
        let h = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(v);
        _mm_storeu_si128(p as *mut __m128i, h)
    }
    #[inline(always)]
    unsafe fn store_bf16(p: *mut u16, v: __m256) {
        let bits = _mm256_castps_si256(v);
        let high = _mm256_srli_epi32::<16>(bits);
        let bias = _mm256_add_epi32(
            _mm256_and_si256(high, _mm256_set1_epi32(1)),
            _mm256_set1_epi32(0x7fff),
        );
        let rounded = _mm256_srli_epi32::<16>(_mm256_add_epi32(bits, bias));
        let quiet_nan = _mm256_or_si256(high, _mm256_set1_epi32(0x40));
        let is_nan = _mm256_castps_si256(_mm256_cmp_ps::<_CMP_UNORD_Q>(v, v));
        let r = _mm256_blendv_epi8(rounded, quiet_nan, is_nan);
        // Every lane is <= 0xffff, so the unsigned-saturating pack is exact; it interleaves
        // the 128-bit halves, which the permute puts back in order.
        let packed = _mm256_packus_epi32(r, r);
        let ordered = _mm256_permute4x64_epi64::<0b1000>(packed);
        _mm_storeu_si128(p as *mut __m128i, _mm256_castsi256_si128(ordered))
    }
    #[inline(always)]
    unsafe fn add(a: __m256, b: __m256) -> __m256 {
        _mm256_add_ps(a, b)
    }
    #[inline(always)]
    unsafe fn sub(a: __m256, b: __m256) -> __m256 {
        _mm256_sub_ps(a, b)
    }
    #[inline(always)]
    unsafe fn mul(a: __m256, b: __m256) -> __m256 {
        _mm256_mul_ps(a, b)
    }
    #[inline(always)]
    unsafe fn div(a: __m256, b: __m256) -> __m256 {
        _mm256_div_ps(a, b)
    }
    #[inline(always)]
    unsafe fn fma(a: __m256, b: __m256, c: __m256) -> __m256 {
        _mm256_fmadd_ps(a, b, c)
    }
    #[inline(always)]
    unsafe fn max(a: __m256, b: __m256) -> __m256 {
        _mm256_max_ps(a, b)
    }
    #[inline(always)]
    unsafe fn min(a: __m256, b: __m256) -> __m256 {
        _mm256_min_ps(a, b)
    }
    #[inline(always)]
    unsafe fn round(a: __m256) -> __m256 {
        _mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(a)
    }
    #[inline(always)]
    unsafe fn scale_pow2(a: __m256, n: __m256) -> __m256 {
        // Build 2^n from the exponent field; n is within the normal range by contract.
        let e = _mm256_slli_epi32::<23>(_mm256_add_epi32(
            _mm256_cvtps_epi32(n),
            _mm256_set1_epi32(127),
        ));
        _mm256_mul_ps(a, _mm256_castsi256_ps(e))
    }
    #[inline(always)]
    unsafe fn zero_unless_not_less(a: __m256, b: __m256, v: __m256) -> __m256 {
        let less = _mm256_cmp_ps::<_CMP_LT_OQ>(a, b);
        _mm256_andnot_ps(less, v)
    }
    #[inline(always)]
    unsafe fn select_less(a: __m256, b: __m256, x: __m256, y: __m256) -> __m256 {
        _mm256_blendv_ps(y, x, _mm256_cmp_ps::<_CMP_LT_OQ>(a, b))
    }
    #[inline(always)]
    unsafe fn hsum(a: __m256) -> f32 {
        let s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps::<1>(a));
        let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        let s = _mm_add_ss(s, _mm_movehdup_ps(s));
        _mm_cvtss_f32(s)
    }
    #[inline(always)]
    unsafe fn hmax(a: __m256) -> f32 {
        let s = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps::<1>(a));
        let s = _mm_max_ps(s, _mm_movehl_ps(s, s));
        let s = _mm_max_ss(s, _mm_movehdup_ps(s));
        _mm_cvtss_f32(s)
    }
}

/// Declares `#[target_feature]` entry points for a generic SIMD kernel body:
/// `simd_entries!(body => avx512_name, avx2_name, neon_name; (arg: Ty, ...) -> Ret);`
/// The generated functions are `unsafe`: call them only when [`super::cpu::detected_isa`]
/// reports the matching level.
macro_rules! simd_entries {
    ($body:ident => $avx512:ident, $avx2:ident, $neon:ident; ($($arg:ident : $ty:ty),* $(,)?) $(-> $ret:ty)?) => {
        #[cfg(target_arch = "aarch64")]
        #[target_feature(enable = "neon")]
        unsafe fn $neon($($arg: $ty),*) $(-> $ret)? {
            unsafe { $body::<$crate::kernels::simd::Neon>($($arg),*) }
        }
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")]
        unsafe fn $avx512($($arg: $ty),*) $(-> $ret)? {
            unsafe { $body::<$crate::kernels::simd::Avx512>($($arg),*) }
        }
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx2,fma,f16c")]
        unsafe fn $avx2($($arg: $ty),*) $(-> $ret)? {
            unsafe { $body::<$crate::kernels::simd::Avx2>($($arg),*) }
        }
    };
}
pub(crate) use simd_entries;

/// Dispatches on an [`Isa`](super::Isa) to a scalar function or the entries made by
/// [`simd_entries!`]: `dispatch!(isa, scalar_fn, avx512_fn, avx2_fn, neon_fn; (args...))`.
macro_rules! dispatch {
    ($isa:expr, $scalar:path, $avx512:ident, $avx2:ident, $neon:ident; ($($arg:expr),* $(,)?)) => {{
        #[allow(unreachable_patterns)]
        match $crate::kernels::cpu::supported_or_lower($isa) {
            // SAFETY: as below; NEON is the aarch64 baseline.
            #[cfg(target_arch = "aarch64")]
            $crate::kernels::Isa::Neon => unsafe { $neon($($arg),*) },
            // SAFETY: supported_or_lower never returns a level this CPU lacks.
            #[cfg(target_arch = "x86_64")]
            $crate::kernels::Isa::Avx512 => unsafe { $avx512($($arg),*) },
            #[cfg(target_arch = "x86_64")]
            $crate::kernels::Isa::Avx2 => unsafe { $avx2($($arg),*) },
            _ => $scalar($($arg),*),
        }
    }};
}
pub(crate) use dispatch;

/// aarch64 Advanced SIMD (NEON) with 4 lanes. `f16` conversions are `fcvtl` / `fcvtn` in
/// inline assembly (their `std::arch` intrinsics need the unstable `f16` type); both are base
/// ARMv8.0 instructions and round to nearest even (the default FPCR mode).
#[cfg(target_arch = "aarch64")]
#[derive(Clone, Copy)]
pub(crate) struct Neon;

#[cfg(target_arch = "aarch64")]
impl Simd for Neon {
    type V = float32x4_t;
    const W: usize = 4;
    #[inline(always)]
    unsafe fn splat(x: f32) -> float32x4_t {
        vdupq_n_f32(x)
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> float32x4_t {
        vld1q_f32(p)
    }
    #[inline(always)]
    unsafe fn load_partial(p: *const f32, n: usize) -> float32x4_t {
        let mut buf = [0f32; 4];
        std::ptr::copy_nonoverlapping(p, buf.as_mut_ptr(), n);
        vld1q_f32(buf.as_ptr())
    }
    #[inline(always)]
    unsafe fn store(p: *mut f32, v: float32x4_t) {
        vst1q_f32(p, v)
    }
    #[inline(always)]
    unsafe fn store_partial(p: *mut f32, n: usize, v: float32x4_t) {
        let mut buf = [0f32; 4];
        vst1q_f32(buf.as_mut_ptr(), v);
        std::ptr::copy_nonoverlapping(buf.as_ptr(), p, n);
    }
    #[inline(always)]
    unsafe fn load_f16(p: *const u16) -> float32x4_t {
        let h = vld1_u16(p);
        let out: float32x4_t;
        std::arch::asm!(
            "fcvtl {o:v}.4s, {h:v}.4h",
            o = lateout(vreg) out,
            h = in(vreg) h,
            options(pure, nomem, nostack, preserves_flags)
        );
        out
    }
    #[inline(always)]
    unsafe fn load_f16_partial(p: *const u16, n: usize) -> float32x4_t {
        let mut buf = [0u16; 4];
        std::ptr::copy_nonoverlapping(p, buf.as_mut_ptr(), n);
        Self::load_f16(buf.as_ptr())
    }
    #[inline(always)]
    unsafe fn load_bf16(p: *const u16) -> float32x4_t {
        vreinterpretq_f32_u32(vshll_n_u16::<16>(vld1_u16(p)))
    }
    #[inline(always)]
    unsafe fn load_bf16_partial(p: *const u16, n: usize) -> float32x4_t {
        let mut buf = [0u16; 4];
        std::ptr::copy_nonoverlapping(p, buf.as_mut_ptr(), n);
        Self::load_bf16(buf.as_ptr())
    }
    #[inline(always)]
    unsafe fn store_f16(p: *mut u16, v: float32x4_t) {
        let h: uint16x4_t;
        std::arch::asm!(
            "fcvtn {h:v}.4h, {v:v}.4s",
            h = lateout(vreg) h,
            v = in(vreg) v,
            options(pure, nomem, nostack, preserves_flags)
        );
        vst1_u16(p, h)
    }
    #[inline(always)]
    unsafe fn store_bf16(p: *mut u16, v: float32x4_t) {
        let bits = vreinterpretq_u32_f32(v);
        let high = vshrq_n_u32::<16>(bits);
        let bias = vaddq_u32(vandq_u32(high, vdupq_n_u32(1)), vdupq_n_u32(0x7fff));
        let rounded = vshrq_n_u32::<16>(vaddq_u32(bits, bias));
        let quiet_nan = vorrq_u32(high, vdupq_n_u32(0x40));
        let is_num = vceqq_f32(v, v);
        vst1_u16(p, vmovn_u32(vbslq_u32(is_num, rounded, quiet_nan)))
    }
    #[inline(always)]
    unsafe fn add(a: float32x4_t, b: float32x4_t) -> float32x4_t {
        vaddq_f32(a, b)
    }
    #[inline(always)]
    unsafe fn sub(a: float32x4_t, b: float32x4_t) -> float32x4_t {
        vsubq_f32(a, b)
    }
    #[inline(always)]
    unsafe fn mul(a: float32x4_t, b: float32x4_t) -> float32x4_t {
        vmulq_f32(a, b)
    }
    #[inline(always)]
    unsafe fn div(a: float32x4_t, b: float32x4_t) -> float32x4_t {
        vdivq_f32(a, b)
    }
    #[inline(always)]
    unsafe fn fma(a: float32x4_t, b: float32x4_t, c: float32x4_t) -> float32x4_t {
        vfmaq_f32(c, a, b)
    }
    #[inline(always)]
    unsafe fn max(a: float32x4_t, b: float32x4_t) -> float32x4_t {
        // x86 `maxps` semantics (`a > b ? a : b`), not `fmax` (which returns NaN for any NaN).
        vbslq_f32(vcgtq_f32(a, b), a, b)
    }
    #[inline(always)]
    unsafe fn min(a: float32x4_t, b: float32x4_t) -> float32x4_t {
        vbslq_f32(vcltq_f32(a, b), a, b)
    }
    #[inline(always)]
    unsafe fn round(a: float32x4_t) -> float32x4_t {
        vrndnq_f32(a)
    }
    #[inline(always)]
    unsafe fn scale_pow2(a: float32x4_t, n: float32x4_t) -> float32x4_t {
        // Build 2^n from the exponent field; n is integral and in the normal range by contract.
        let e = vshlq_n_s32::<23>(vaddq_s32(vcvtnq_s32_f32(n), vdupq_n_s32(127)));
        vmulq_f32(a, vreinterpretq_f32_s32(e))
    }
    #[inline(always)]
    unsafe fn zero_unless_not_less(a: float32x4_t, b: float32x4_t, v: float32x4_t) -> float32x4_t {
        let less = vcltq_f32(a, b);
        vreinterpretq_f32_u32(vbicq_u32(vreinterpretq_u32_f32(v), less))
    }
    #[inline(always)]
    unsafe fn select_less(
        a: float32x4_t,
        b: float32x4_t,
        x: float32x4_t,
        y: float32x4_t,
    ) -> float32x4_t {
        vbslq_f32(vcltq_f32(a, b), x, y)
    }
    #[inline(always)]
    unsafe fn hsum(a: float32x4_t) -> f32 {
        vaddvq_f32(a)
    }
    #[inline(always)]
    unsafe fn hmax(a: float32x4_t) -> f32 {
        // The x86 reduction's semantics: pairwise `maxps`-style maxima.
        let m = Self::max(a, vextq_f32::<2>(a, a));
        let m = Self::max(m, vextq_f32::<1>(m, m));
        vgetq_lane_f32::<0>(m)
    }
}

/// One-lane "vector": the portable path for generic kernel bodies on any target.
#[derive(Clone, Copy)]
pub(crate) struct Scalar;

impl Simd for Scalar {
    type V = f32;
    const W: usize = 1;
    #[inline(always)]
    unsafe fn splat(x: f32) -> f32 {
        x
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> f32 {
        *p
    }
    #[inline(always)]
    unsafe fn load_partial(_p: *const f32, _n: usize) -> f32 {
        0.0 // n < W = 1 means n == 0
    }
    #[inline(always)]
    unsafe fn store(p: *mut f32, v: f32) {
        *p = v
    }
    #[inline(always)]
    unsafe fn store_partial(_p: *mut f32, _n: usize, _v: f32) {}
    #[inline(always)]
    unsafe fn load_f16(p: *const u16) -> f32 {
        half::f16::from_bits(*p).to_f32()
    }
    #[inline(always)]
    unsafe fn load_f16_partial(_p: *const u16, _n: usize) -> f32 {
        0.0
    }
    #[inline(always)]
    unsafe fn load_bf16(p: *const u16) -> f32 {
        f32::from_bits((*p as u32) << 16)
    }
    #[inline(always)]
    unsafe fn load_bf16_partial(_p: *const u16, _n: usize) -> f32 {
        0.0
    }
    #[inline(always)]
    unsafe fn store_f16(p: *mut u16, v: f32) {
        *p = half::f16::from_f32(v).to_bits()
    }
    #[inline(always)]
    unsafe fn store_bf16(p: *mut u16, v: f32) {
        *p = super::cast::f32_to_bf16_one(v).to_bits()
    }
    #[inline(always)]
    unsafe fn add(a: f32, b: f32) -> f32 {
        a + b
    }
    #[inline(always)]
    unsafe fn sub(a: f32, b: f32) -> f32 {
        a - b
    }
    #[inline(always)]
    unsafe fn mul(a: f32, b: f32) -> f32 {
        a * b
    }
    #[inline(always)]
    unsafe fn div(a: f32, b: f32) -> f32 {
        a / b
    }
    #[inline(always)]
    unsafe fn fma(a: f32, b: f32, c: f32) -> f32 {
        // Not fused: mul_add is a slow libm call without hardware FMA.
        a * b + c
    }
    #[inline(always)]
    unsafe fn max(a: f32, b: f32) -> f32 {
        if b.is_nan() || b > a {
            b
        } else {
            a
        }
    }
    #[inline(always)]
    unsafe fn min(a: f32, b: f32) -> f32 {
        if b.is_nan() || b < a {
            b
        } else {
            a
        }
    }
    #[inline(always)]
    unsafe fn round(a: f32) -> f32 {
        a.round_ties_even()
    }
    #[inline(always)]
    unsafe fn scale_pow2(a: f32, n: f32) -> f32 {
        a * 2f32.powi(n as i32)
    }
    #[inline(always)]
    unsafe fn zero_unless_not_less(a: f32, b: f32, v: f32) -> f32 {
        if a < b {
            0.0
        } else {
            v
        }
    }
    #[inline(always)]
    unsafe fn select_less(a: f32, b: f32, x: f32, y: f32) -> f32 {
        if a < b {
            x
        } else {
            y
        }
    }
    #[inline(always)]
    unsafe fn hsum(a: f32) -> f32 {
        a
    }
    #[inline(always)]
    unsafe fn hmax(a: f32) -> f32 {
        a
    }
    #[inline(always)]
    unsafe fn exp(x: f32) -> f32 {
        exp_scalar(x)
    }
}
