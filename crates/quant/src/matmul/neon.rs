//! aarch64 NEON kernels, chosen per [`KernelPath`]:
//! - Neon: i8 x i8 block dots with `smull` + `sadalp` (each product fits i16, pair sums are
//!   accumulated in i32: exact);
//! - NeonDotprod: the same with `sdot` (FEAT_DotProd), four products per i32 lane, exact.
//!
//! Every weight type with a scalar kernel has a NEON kernel on both paths. Weight codes are
//! turned into signed bytes (offsets such as Q4_0's `q - 8` applied to the weights, which stay
//! within i8), so one signed dot serves every type. The integer dot of each block equals the
//! scalar one; the 32-block types scale in f32 lanes (summed in another order than the scalar
//! path), the K types reduce each super-block to the scalar path's integers and then scale
//! exactly as the scalar path does (same floats).
//!
//! `sdot` and the f16 widening are written as inline assembly: their `std::arch` intrinsics
//! are not stable (the instructions are base ARMv8.0 for `fcvtl`, FEAT_DotProd for `sdot`,
//! which the `NeonDotprod` path checks at run time).

use std::arch::aarch64::*;
use std::arch::asm;

use super::{Kernels, QActs, PREFILL_ROWS};
use crate::dequant::k_scale_min;
use crate::{GgmlType, KernelPath};

/// FEAT_DotProd (`sdot` / `udot`).
pub(crate) fn has_dotprod() -> bool {
    std::arch::is_aarch64_feature_detected!("dotprod")
}

/// FEAT_I8MM (`smmla` / `usmmla`: the prefill GEMM's tiles).
pub(crate) fn has_i8mm() -> bool {
    std::arch::is_aarch64_feature_detected!("i8mm")
}

/// `acc + dot(a, b)` over 16 signed bytes, into 4 i32 lanes (which products land in which
/// lane differs between implementations: callers only use lane sums or lane-uniform scales).
trait IDot {
    unsafe fn dot(acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t;
}

/// Base NEON: `smull` / `smull2` to i16 (|a * b| <= 16384), pairwise-accumulated to i32.
struct Base;

impl IDot for Base {
    #[inline(always)]
    unsafe fn dot(acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
        let lo = vmull_s8(vget_low_s8(a), vget_low_s8(b));
        let hi = vmull_high_s8(a, b);
        vpadalq_s16(vpadalq_s16(acc, lo), hi)
    }
}

/// FEAT_DotProd `sdot`.
struct Dot;

impl IDot for Dot {
    #[inline(always)]
    unsafe fn dot(acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
        let mut acc = acc;
        // SAFETY: only reached from `#[target_feature(enable = "dotprod")]` entry points,
        // which run after `has_dotprod()`.
        asm!(
            "sdot {acc:v}.4s, {a:v}.16b, {b:v}.16b",
            acc = inout(vreg) acc,
            a = in(vreg) a,
            b = in(vreg) b,
            options(pure, nomem, nostack, preserves_flags)
        );
        acc
    }
}

/// Four binary16 values widened to f32 (`fcvtl`, exact; base ARMv8.0 FP). Inline assembly:
/// the f16 conversion intrinsics are not stable.
#[inline(always)]
unsafe fn widen_f16x4(h: uint16x4_t) -> float32x4_t {
    let out: float32x4_t;
    asm!(
        "fcvtl {o:v}.4s, {h:v}.4h",
        o = lateout(vreg) out,
        h = in(vreg) h,
        options(pure, nomem, nostack, preserves_flags)
    );
    out
}

/// One binary16 value (little-endian bits at `p`, 2 bytes read) widened to f32.
#[inline(always)]
unsafe fn f16_scalar(p: *const u8) -> f32 {
    vgetq_lane_f32::<0>(widen_f16x4(vld1_dup_u16(p.cast::<u16>())))
}

/// Four binary16 values (little-endian bits at `p`) widened to f32.
#[inline(always)]
unsafe fn f16x4(p: *const u8) -> float32x4_t {
    widen_f16x4(vld1_u16(p.cast::<u16>()))
}

macro_rules! entries {
    ($body:ident => $base:ident, $dot:ident; <$(const $c:ident : $ct:ty),*>) => {
        #[target_feature(enable = "neon")]
        unsafe fn $base<const N: usize, $(const $c: $ct),*>(
            w: &[u8],
            a: &QActs,
            r0: usize,
        ) -> [f32; N] {
            $body::<Base, N, $($c),*>(w, a, r0)
        }
        #[target_feature(enable = "neon,dotprod")]
        unsafe fn $dot<const N: usize, $(const $c: $ct),*>(
            w: &[u8],
            a: &QActs,
            r0: usize,
        ) -> [f32; N] {
            $body::<Dot, N, $($c),*>(w, a, r0)
        }
    };
}

entries!(blocks32 => blocks32_neon, blocks32_dot; <const KIND: u8>);
entries!(qk45 => qk45_neon, qk45_dot; <const FIVE: bool>);
entries!(q6_k => q6_k_neon, q6_k_dot; <>);

pub(crate) fn kernels(ty: GgmlType, path: KernelPath) -> Option<Kernels> {
    use GgmlType::*;
    macro_rules! pick {
        ($base:ident, $dot:ident $(, $c:expr)*) => {
            match path {
                KernelPath::Neon => Some(Kernels {
                    one: $base::<1 $(, $c)*>,
                    many: $base::<PREFILL_ROWS $(, $c)*>,
                }),
                // I8MM adds the prefill GEMM; its row kernels are dotprod's.
                KernelPath::NeonDotprod | KernelPath::NeonI8mm => Some(Kernels {
                    one: $dot::<1 $(, $c)*>,
                    many: $dot::<PREFILL_ROWS $(, $c)*>,
                }),
                _ => None,
            }
        };
    }
    match ty {
        Q4_0 => pick!(blocks32_neon, blocks32_dot, Q40),
        Q4_1 => pick!(blocks32_neon, blocks32_dot, Q41),
        Q5_0 => pick!(blocks32_neon, blocks32_dot, Q50),
        Q5_1 => pick!(blocks32_neon, blocks32_dot, Q51),
        Q8_0 => pick!(blocks32_neon, blocks32_dot, Q80),
        Q4_K => pick!(qk45_neon, qk45_dot, false),
        Q5_K => pick!(qk45_neon, qk45_dot, true),
        Q6_K => pick!(q6_k_neon, q6_k_dot),
        // Float weights: no integer dot, one kernel for both paths.
        F32 => pick!(float_neon, float_neon, 0),
        F16 => pick!(float_neon, float_neon, 1),
        BF16 => pick!(float_neon, float_neon, 2),
        _ => None,
    }
}

// `KIND` of the 32-element block types.
const Q40: u8 = 0;
const Q41: u8 = 1;
const Q50: u8 = 2;
const Q51: u8 = 3;
const Q80: u8 = 4;

/// The 32 fifth bits `qh` (little-endian u32 at `p`) as 0x10 bytes: elements 0..16, 16..32.
#[inline(always)]
unsafe fn fifth_bits(p: *const u8) -> (uint8x16_t, uint8x16_t) {
    let qh = p.cast::<u32>().read_unaligned().to_le_bytes();
    const BITS: [u8; 16] = [1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128];
    let bits = vld1q_u8(BITS.as_ptr());
    let sixteen = vdupq_n_u8(0x10);
    let spread = |b0: u8, b1: u8| vcombine_u8(vdup_n_u8(b0), vdup_n_u8(b1));
    (
        vandq_u8(vtstq_u8(spread(qh[0], qh[1]), bits), sixteen),
        vandq_u8(vtstq_u8(spread(qh[2], qh[3]), bits), sixteen),
    )
}

/// Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q8_0 weights (`KIND`): `sum_b dw*dx * dot(q - offset, qx)`
/// (+ `mw * dx * sum(qx)` for the types with a min), two f32 accumulators (even / odd blocks).
#[inline(always)]
unsafe fn blocks32<D: IDot, const N: usize, const KIND: u8>(
    w: &[u8],
    a: &QActs,
    r0: usize,
) -> [f32; N] {
    let type_size = match KIND {
        Q40 => 18,
        Q41 => 20,
        Q50 => 22,
        Q51 => 24,
        _ => 34,
    };
    let has_min = KIND == Q41 || KIND == Q51;
    let nb = a.cols / 32;
    debug_assert_eq!(w.len(), nb * type_size);
    let wp = w.as_ptr();
    let m4 = vdupq_n_u8(0x0f);
    let zero = vdupq_n_s32(0);
    let mut acc = [[vdupq_n_f32(0.0); N]; 2];
    let mut accm = [0f32; N];
    // A macro, not a closure: its body must inline into the `target_feature` entry point.
    macro_rules! block {
        ($b:expr, $k:expr) => {{
            let (b, k): (usize, usize) = ($b, $k);
            let blk = wp.add(b * type_size);
            let dw = f16_scalar(blk);
            let (lo, hi) = if KIND == Q80 {
                (vld1q_s8(blk.add(2).cast()), vld1q_s8(blk.add(18).cast()))
            } else {
                let qs_at = match KIND {
                    Q40 => 2,
                    Q41 => 4,
                    Q50 => 6,
                    _ => 8,
                };
                let raw = vld1q_u8(blk.add(qs_at));
                let (mut lo, mut hi) = (vandq_u8(raw, m4), vshrq_n_u8::<4>(raw));
                if KIND == Q50 || KIND == Q51 {
                    let (h0, h1) = fifth_bits(blk.add(if KIND == Q50 { 2 } else { 4 }));
                    lo = vorrq_u8(lo, h0);
                    hi = vorrq_u8(hi, h1);
                }
                let (lo, hi) = (vreinterpretq_s8_u8(lo), vreinterpretq_s8_u8(hi));
                match KIND {
                    Q40 => (vsubq_s8(lo, vdupq_n_s8(8)), vsubq_s8(hi, vdupq_n_s8(8))),
                    Q50 => (vsubq_s8(lo, vdupq_n_s8(16)), vsubq_s8(hi, vdupq_n_s8(16))),
                    _ => (lo, hi),
                }
            };
            let mw = if has_min { f16_scalar(blk.add(2)) } else { 0.0 };
            for i in 0..N {
                let row = r0 + i;
                let x = a.qs.as_ptr().add(row * a.cols + b * 32);
                let [dx, sx] = *a.ds.get_unchecked(row * nb + b);
                let p = D::dot(D::dot(zero, lo, vld1q_s8(x)), hi, vld1q_s8(x.add(16)));
                acc[k][i] = vfmaq_n_f32(acc[k][i], vcvtq_f32_s32(p), dw * dx);
                if has_min {
                    accm[i] += mw * sx;
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
    std::array::from_fn(|i| vaddvq_f32(vaddq_f32(acc[0][i], acc[1][i])) + accm[i])
}

/// Q4_K (`FIVE = false`) and Q5_K (`FIVE = true`) weights: each super-block's 8 groups of 32
/// are unpacked once for all N activation rows; per row the integers `sum_g sc_g * dot_g` and
/// `sum_g mn_g * xsum_g` are those of the scalar path, scaled as it does.
#[inline(always)]
unsafe fn qk45<D: IDot, const N: usize, const FIVE: bool>(
    w: &[u8],
    a: &QActs,
    r0: usize,
) -> [f32; N] {
    let (type_size, qs_at) = if FIVE { (176, 48) } else { (144, 16) };
    let nsb = a.cols / 256;
    debug_assert_eq!(w.len(), nsb * type_size);
    let m4 = vdupq_n_u8(0x0f);
    let zero = vdupq_n_s32(0);
    let mut out = [0f32; N];
    for sb in 0..nsb {
        let bp = w.as_ptr().add(sb * type_size);
        let (d, dmin) = (f16_scalar(bp), f16_scalar(bp.add(2)));
        let (sc, mn) = k_scale_min(&*bp.add(4).cast::<[u8; 12]>());
        let mins = vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(vmovl_u8(vld1_u8(mn.as_ptr())))));
        let mins_hi = vreinterpretq_s32_u32(vmovl_high_u16(vmovl_u8(vld1_u8(mn.as_ptr()))));
        let qp = bp.add(qs_at);
        let mut q = [[vdupq_n_u8(0); 2]; 8];
        for j in 0..4 {
            let raw0 = vld1q_u8(qp.add(32 * j));
            let raw1 = vld1q_u8(qp.add(32 * j + 16));
            q[2 * j] = [vandq_u8(raw0, m4), vandq_u8(raw1, m4)];
            q[2 * j + 1] = [vshrq_n_u8::<4>(raw0), vshrq_n_u8::<4>(raw1)];
        }
        if FIVE {
            let qh = [vld1q_u8(bp.add(16)), vld1q_u8(bp.add(32))];
            let sixteen = vdupq_n_u8(0x10);
            for (g, qg) in q.iter_mut().enumerate() {
                let bit = vdupq_n_u8(1 << g);
                for h in 0..2 {
                    qg[h] = vorrq_u8(qg[h], vandq_u8(vtstq_u8(qh[h], bit), sixteen));
                }
            }
        }
        let q = q.map(|[lo, hi]| [vreinterpretq_s8_u8(lo), vreinterpretq_s8_u8(hi)]);
        for (i, o) in out.iter_mut().enumerate() {
            let row = r0 + i;
            let x = a.qs.as_ptr().add(row * a.cols + sb * 256);
            let mut isum = zero;
            for (g, qg) in q.iter().enumerate() {
                let p = D::dot(D::dot(zero, qg[0], vld1q_s8(x.add(32 * g))), qg[1], {
                    vld1q_s8(x.add(32 * g + 16))
                });
                isum = vmlaq_n_s32(isum, p, sc[g] as i32);
            }
            let s16 = a.sums16.as_ptr().add((row * nsb + sb) * 16);
            // Sums of 32 per group: pairs of the sums of 16.
            let xs_lo = vpaddq_s32(vld1q_s32(s16), vld1q_s32(s16.add(4)));
            let xs_hi = vpaddq_s32(vld1q_s32(s16.add(8)), vld1q_s32(s16.add(12)));
            let summ = vaddvq_s32(vmlaq_s32(vmulq_s32(mins, xs_lo), mins_hi, xs_hi));
            let sumi = vaddvq_s32(isum);
            let dx = a.ds.get_unchecked(row * nsb + sb)[0];
            *o += (d * dx) * sumi as f32 - (dmin * dx) * summ as f32;
        }
    }
    out
}

/// Q6_K weights: the 6-bit values minus 32 as signed bytes, unpacked once per super-block;
/// per row the integer `sum_g scale_g * dot_g` (groups of 16) of the scalar path, scaled as it
/// does.
#[inline(always)]
unsafe fn q6_k<D: IDot, const N: usize>(w: &[u8], a: &QActs, r0: usize) -> [f32; N] {
    let nsb = a.cols / 256;
    debug_assert_eq!(w.len(), nsb * 210);
    let m4 = vdupq_n_u8(0x0f);
    let m30 = vdupq_n_u8(0x30);
    let thirty_two = vdupq_n_s8(32);
    let zero = vdupq_n_s32(0);
    let mut out = [0f32; N];
    for sb in 0..nsb {
        let p = w.as_ptr().add(sb * 210);
        let d = f16_scalar(p.add(208));
        let scales: [i8; 16] = p.add(192).cast::<[i8; 16]>().read();
        // v[k] = elements 32k .. 32k + 32 as two halves of 16.
        let mut v = [[vdupq_n_s8(0); 2]; 8];
        for h in 0..2 {
            // `s` picks the 16-byte half of every group this slice of the block feeds.
            #[allow(clippy::needless_range_loop)]
            for s in 0..2 {
                let ql0 = vld1q_u8(p.add(h * 64 + 16 * s));
                let ql1 = vld1q_u8(p.add(h * 64 + 32 + 16 * s));
                let qh = vld1q_u8(p.add(128 + h * 32 + 16 * s));
                let parts = [
                    vorrq_u8(vandq_u8(ql0, m4), vandq_u8(vshlq_n_u8::<4>(qh), m30)),
                    vorrq_u8(vandq_u8(ql1, m4), vandq_u8(vshlq_n_u8::<2>(qh), m30)),
                    vorrq_u8(vshrq_n_u8::<4>(ql0), vandq_u8(qh, m30)),
                    vorrq_u8(vshrq_n_u8::<4>(ql1), vandq_u8(vshrq_n_u8::<2>(qh), m30)),
                ];
                for (j, part) in parts.into_iter().enumerate() {
                    v[4 * h + j][s] = vsubq_s8(vreinterpretq_s8_u8(part), thirty_two);
                }
            }
        }
        for (i, o) in out.iter_mut().enumerate() {
            let row = r0 + i;
            let x = a.qs.as_ptr().add(row * a.cols + sb * 256);
            let mut isum = zero;
            for (k, vk) in v.iter().enumerate() {
                let p0 = D::dot(zero, vk[0], vld1q_s8(x.add(32 * k)));
                let p1 = D::dot(zero, vk[1], vld1q_s8(x.add(32 * k + 16)));
                isum = vmlaq_n_s32(isum, p0, scales[2 * k] as i32);
                isum = vmlaq_n_s32(isum, p1, scales[2 * k + 1] as i32);
            }
            let dx = a.ds.get_unchecked(row * nsb + sb)[0];
            *o += (d * dx) * vaddvq_s32(isum) as f32;
        }
    }
    out
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
            None => super::quantize_q8x32_scalar(
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
            None => super::quantize_q8x256_scalar(
                &x[256 * b..256 * b + 256],
                &mut qs[256 * b..256 * b + 256],
                &mut ds[b..b + 1],
                &mut sums16[16 * b..16 * b + 16],
            ),
        }
    }
}
