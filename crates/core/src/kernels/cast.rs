//! Conversions between f32 and the half-precision formats, bit-exact with PyTorch:
//! round-to-nearest-even, subnormals kept, NaN stays NaN (quieted), infinities kept.
//!
//! Layout contract: `dst.len()` defines the work; `src` must be at least as long.

use super::cpu::{active_isa, Isa};
use super::simd::{dispatch, simd_entries, Simd};
use half::{bf16, f16};

/// f32 -> binary16, round-to-nearest-even (F16C/AVX-512 hardware conversion when available).
pub fn f32_to_f16(src: &[f32], dst: &mut [f16]) {
    f32_to_f16_with(active_isa(), src, dst)
}

pub(crate) fn f32_to_f16_with(isa: Isa, src: &[f32], dst: &mut [f16]) {
    assert!(src.len() >= dst.len(), "f32_to_f16: src shorter than dst");
    dispatch!(isa, f32_to_f16_scalar, f32_to_f16_avx512, f32_to_f16_avx2, f32_to_f16_neon; (src, dst))
}

pub(crate) fn f32_to_f16_scalar(src: &[f32], dst: &mut [f16]) {
    for (d, &s) in dst.iter_mut().zip(src) {
        *d = f16::from_f32(s);
    }
}

#[inline(always)]
unsafe fn f32_to_f16_simd<S: Simd>(src: &[f32], dst: &mut [f16]) {
    let n = dst.len();
    let ps = src.as_ptr();
    // f16 is a transparent u16 wrapper.
    let pd = dst.as_mut_ptr() as *mut u16;
    let mut i = 0;
    while i + S::W <= n {
        S::store_f16(pd.add(i), S::load(ps.add(i)));
        i += S::W;
    }
    if i < n {
        f32_to_f16_scalar(&src[i..n], &mut dst[i..n]);
    }
}
simd_entries!(f32_to_f16_simd => f32_to_f16_avx512, f32_to_f16_avx2, f32_to_f16_neon; (src: &[f32], dst: &mut [f16]));

/// binary16 -> f32 (exact).
pub fn f16_to_f32(src: &[f16], dst: &mut [f32]) {
    f16_to_f32_with(active_isa(), src, dst)
}

pub(crate) fn f16_to_f32_with(isa: Isa, src: &[f16], dst: &mut [f32]) {
    assert!(src.len() >= dst.len(), "f16_to_f32: src shorter than dst");
    dispatch!(isa, f16_to_f32_scalar, f16_to_f32_avx512, f16_to_f32_avx2, f16_to_f32_neon; (src, dst))
}

pub(crate) fn f16_to_f32_scalar(src: &[f16], dst: &mut [f32]) {
    for (d, s) in dst.iter_mut().zip(src) {
        *d = s.to_f32();
    }
}

#[inline(always)]
pub(super) unsafe fn f16_to_f32_simd<S: Simd>(src: &[f16], dst: &mut [f32]) {
    let n = dst.len();
    let ps = src.as_ptr() as *const u16;
    let pd = dst.as_mut_ptr();
    let mut i = 0;
    while i + S::W <= n {
        S::store(pd.add(i), S::load_f16(ps.add(i)));
        i += S::W;
    }
    if i < n {
        S::store_partial(pd.add(i), n - i, S::load_f16_partial(ps.add(i), n - i));
    }
}
simd_entries!(f16_to_f32_simd => f16_to_f32_avx512, f16_to_f32_avx2, f16_to_f32_neon; (src: &[f16], dst: &mut [f32]));

/// One f32 -> bfloat16 with round-to-nearest-even; NaN keeps sign and payload top bits and
/// is forced quiet (what PyTorch's `c10::BFloat16` conversion does).
#[inline]
pub fn f32_to_bf16_one(x: f32) -> bf16 {
    let bits = x.to_bits();
    if x.is_nan() {
        return bf16::from_bits(((bits >> 16) | 0x0040) as u16);
    }
    let rounding_bias = 0x7fff + ((bits >> 16) & 1);
    bf16::from_bits((bits.wrapping_add(rounding_bias) >> 16) as u16)
}

/// f32 -> bfloat16, round-to-nearest-even, NaN preserved (see [`f32_to_bf16_one`]).
pub fn f32_to_bf16(src: &[f32], dst: &mut [bf16]) {
    f32_to_bf16_with(active_isa(), src, dst)
}

pub(crate) fn f32_to_bf16_with(isa: Isa, src: &[f32], dst: &mut [bf16]) {
    assert!(src.len() >= dst.len(), "f32_to_bf16: src shorter than dst");
    dispatch!(isa, f32_to_bf16_scalar, f32_to_bf16_avx512, f32_to_bf16_avx2, f32_to_bf16_neon; (src, dst))
}

pub(crate) fn f32_to_bf16_scalar(src: &[f32], dst: &mut [bf16]) {
    for (d, &s) in dst.iter_mut().zip(src) {
        *d = f32_to_bf16_one(s);
    }
}

#[inline(always)]
unsafe fn f32_to_bf16_simd<S: Simd>(src: &[f32], dst: &mut [bf16]) {
    let n = dst.len();
    let ps = src.as_ptr();
    // bf16 is a transparent u16 wrapper.
    let pd = dst.as_mut_ptr() as *mut u16;
    let mut i = 0;
    while i + S::W <= n {
        S::store_bf16(pd.add(i), S::load(ps.add(i)));
        i += S::W;
    }
    if i < n {
        f32_to_bf16_scalar(&src[i..n], &mut dst[i..n]);
    }
}
simd_entries!(f32_to_bf16_simd => f32_to_bf16_avx512, f32_to_bf16_avx2, f32_to_bf16_neon; (src: &[f32], dst: &mut [bf16]));

/// bfloat16 -> f32 (exact: a 16-bit shift).
pub fn bf16_to_f32(src: &[bf16], dst: &mut [f32]) {
    bf16_to_f32_with(active_isa(), src, dst)
}

pub(crate) fn bf16_to_f32_with(isa: Isa, src: &[bf16], dst: &mut [f32]) {
    assert!(src.len() >= dst.len(), "bf16_to_f32: src shorter than dst");
    dispatch!(isa, bf16_to_f32_scalar, bf16_to_f32_avx512, bf16_to_f32_avx2, bf16_to_f32_neon; (src, dst))
}

pub(crate) fn bf16_to_f32_scalar(src: &[bf16], dst: &mut [f32]) {
    for (d, s) in dst.iter_mut().zip(src) {
        *d = f32::from_bits((s.to_bits() as u32) << 16);
    }
}

#[inline(always)]
unsafe fn bf16_to_f32_simd<S: Simd>(src: &[bf16], dst: &mut [f32]) {
    let n = dst.len();
    let ps = src.as_ptr() as *const u16;
    let pd = dst.as_mut_ptr();
    let mut i = 0;
    while i + S::W <= n {
        S::store(pd.add(i), S::load_bf16(ps.add(i)));
        i += S::W;
    }
    if i < n {
        S::store_partial(pd.add(i), n - i, S::load_bf16_partial(ps.add(i), n - i));
    }
}
simd_entries!(bf16_to_f32_simd => bf16_to_f32_avx512, bf16_to_f32_avx2, bf16_to_f32_neon; (src: &[bf16], dst: &mut [f32]));
