//! aarch64 NEON kernels: the float-weight row kernels (F32 / F16 / BF16, every NEON path)
//! and the activation quantizers. The quantized weight types run the GEMV
//! (`super::gemv`, `sdot` or `smull` + `sadalp` integer dots) and, with FEAT_I8MM, the
//! prefill GEMM (`super::gemm`): both give `gemm::reference_dot`'s bits.
//!
//! The f16 widening is written as inline assembly: its `std::arch` intrinsic is not stable
//! (`fcvtl` is base ARMv8.0 FP).

use std::arch::aarch64::*;
use std::arch::asm;

use super::{Kernels, QActs, PREFILL_ROWS};
use crate::{GgmlType, KernelPath};

/// FEAT_DotProd (`sdot` / `udot`).
pub(crate) fn has_dotprod() -> bool {
    std::arch::is_aarch64_feature_detected!("dotprod")
}

/// FEAT_I8MM (`smmla` / `usmmla`: the prefill GEMM's tiles).
pub(crate) fn has_i8mm() -> bool {
    std::arch::is_aarch64_feature_detected!("i8mm")
}

/// Four binary16 values widened to f32 (`fcvtl`, exact; base ARMv8.0 FP). Inline assembly:
/// the f16 conversion intrinsics are not stable.
#[inline(always)]
pub(crate) unsafe fn widen_f16x4(h: uint16x4_t) -> float32x4_t {
    let out: float32x4_t;
    asm!(
        "fcvtl {o:v}.4s, {h:v}.4h",
        o = lateout(vreg) out,
        h = in(vreg) h,
        options(pure, nomem, nostack, preserves_flags)
    );
    out
}

/// Four binary16 values (little-endian bits at `p`) widened to f32.
#[inline(always)]
unsafe fn f16x4(p: *const u8) -> float32x4_t {
    widen_f16x4(vld1_u16(p.cast::<u16>()))
}

/// The float-weight kernels (one for every NEON path); `None` for the quantized types, which
/// never run row kernels (see the module docs).
pub(crate) fn kernels(ty: GgmlType, path: KernelPath) -> Option<Kernels> {
    use GgmlType::*;
    if !matches!(
        path,
        KernelPath::Neon | KernelPath::NeonDotprod | KernelPath::NeonI8mm
    ) {
        return None;
    }
    macro_rules! float {
        ($kind:expr) => {
            Some(Kernels {
                one: float_neon::<1, $kind>,
                many: float_neon::<PREFILL_ROWS, $kind>,
            })
        };
    }
    match ty {
        F32 => float!(0),
        F16 => float!(1),
        BF16 => float!(2),
        _ => None,
    }
}

/// Four weights of an F32 (`KIND` 0), F16 (1) or BF16 (2) row starting at element `j`.
#[inline(always)]
unsafe fn load4<const KIND: u8>(p: *const u8, j: usize) -> float32x4_t {
    match KIND {
        0 => vld1q_f32(p.add(4 * j).cast()),
        1 => f16x4(p.add(2 * j)),
        _ => vreinterpretq_f32_u32(vshll_n_u16::<16>(vld1_u16(p.add(2 * j).cast()))),
    }
}

/// Float weights times f32 activations: 8 elements per step (two accumulators), each weight
/// vector widened once for all N activation rows; a scalar tail for `cols % 8`.
#[target_feature(enable = "neon")]
unsafe fn float_neon<const N: usize, const KIND: u8>(w: &[u8], a: &QActs, r0: usize) -> [f32; N] {
    let cols = a.cols;
    let p = w.as_ptr();
    let mut acc = [[vdupq_n_f32(0.0); 2]; N];
    let mut j = 0;
    while j + 8 <= cols {
        let w0 = load4::<KIND>(p, j);
        let w1 = load4::<KIND>(p, j + 4);
        for (i, acc_i) in acc.iter_mut().enumerate() {
            let x = a.xf.as_ptr().add((r0 + i) * cols + j);
            acc_i[0] = vfmaq_f32(acc_i[0], w0, vld1q_f32(x));
            acc_i[1] = vfmaq_f32(acc_i[1], w1, vld1q_f32(x.add(4)));
        }
        j += 8;
    }
    let mut out: [f32; N] = std::array::from_fn(|i| vaddvq_f32(vaddq_f32(acc[i][0], acc[i][1])));
    for jj in j..cols {
        let wv = match KIND {
            0 => p.add(4 * jj).cast::<f32>().read_unaligned(),
            1 => super::f16_at(w, 2 * jj),
            _ => f32::from_bits((p.add(2 * jj).cast::<u16>().read_unaligned() as u32) << 16),
        };
        for (i, o) in out.iter_mut().enumerate() {
            *o += wv * a.xf[(r0 + i) * cols + jj];
        }
    }
    out
}

// ---------------------------------------------------------------- activation quantization

/// Quantize `V` vectors of 4 floats as one block: `Some((d, q's as i32 vectors))`, or `None`
/// if the block holds a NaN or an infinity or its scale is subnormal (the caller then uses the
/// scalar quantizer, which gives those blocks their NaN or saturated values).
#[inline(always)]
unsafe fn quantize_block<const V: usize>(x: *const f32) -> Option<(f32, [int32x4_t; V])> {
    let v: [float32x4_t; V] = std::array::from_fn(|i| vld1q_f32(x.add(4 * i)));
    // `fmax` propagates NaN, so a NaN anywhere makes `amax` NaN.
    let mut amax = vdupq_n_f32(0.0);
    for &vi in &v {
        amax = vmaxq_f32(amax, vabsq_f32(vi));
    }
    let amax = vmaxvq_f32(amax);
    if amax.is_nan() {
        return None;
    }
    let d = amax / 127.0;
    let id = if d == 0.0 { 0.0 } else { 1.0 / d };
    if !d.is_finite() || !id.is_finite() {
        return None;
    }
    // `fcvtas`: round to nearest, ties away from zero, as `f32::round`.
    Some((
        d,
        std::array::from_fn(|i| vcvtaq_s32_f32(vmulq_n_f32(v[i], id))),
    ))
}

/// 16 i32 values (each within i8) narrowed to bytes.
#[inline(always)]
unsafe fn narrow16(q: &[int32x4_t]) -> int8x16_t {
    let lo = vcombine_s16(vqmovn_s32(q[0]), vqmovn_s32(q[1]));
    let hi = vcombine_s16(vqmovn_s32(q[2]), vqmovn_s32(q[3]));
    vcombine_s8(vqmovn_s16(lo), vqmovn_s16(hi))
}

/// NEON twin of `quantize_q8x32_scalar` (same bytes and scales).
#[target_feature(enable = "neon")]
pub(crate) unsafe fn quantize_q8x32_neon(x: &[f32], qs: &mut [i8], ds: &mut [[f32; 2]]) {
    let blocks = x.len() / 32;
    assert!(qs.len() >= blocks * 32 && ds.len() >= blocks);
    for b in 0..blocks {
        match quantize_block::<8>(x.as_ptr().add(32 * b)) {
            Some((d, q)) => {
                let out = qs.as_mut_ptr().add(32 * b);
                vst1q_s8(out, narrow16(&q[..4]));
                vst1q_s8(out.add(16), narrow16(&q[4..]));
                let s = q.iter().fold(vdupq_n_s32(0), |s, &v| vaddq_s32(s, v));
                ds[b] = [d, d * vaddvq_s32(s) as f32];
            }
            None => super::quantize_q8x32_scalar_cold(
                &x[32 * b..32 * b + 32],
                &mut qs[32 * b..32 * b + 32],
                &mut ds[b..b + 1],
            ),
        }
    }
}

/// NEON twin of `quantize_q8x256_scalar`.
#[target_feature(enable = "neon")]
pub(crate) unsafe fn quantize_q8x256_neon(
    x: &[f32],
    qs: &mut [i8],
    ds: &mut [[f32; 2]],
    sums16: &mut [i32],
) {
    let blocks = x.len() / 256;
    assert!(qs.len() >= blocks * 256 && ds.len() >= blocks && sums16.len() >= blocks * 16);
    for b in 0..blocks {
        match quantize_block::<64>(x.as_ptr().add(256 * b)) {
            Some((d, q)) => {
                let out = qs.as_mut_ptr().add(256 * b);
                for (i, q16) in q.chunks_exact(4).enumerate() {
                    vst1q_s8(out.add(16 * i), narrow16(q16));
                    let s = vaddq_s32(vaddq_s32(q16[0], q16[1]), vaddq_s32(q16[2], q16[3]));
                    sums16[16 * b + i] = vaddvq_s32(s);
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
