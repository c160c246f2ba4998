//! Quantization from f32.
//!
//! Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, F16 and BF16 reproduce `gguf.quants.quantize` bit for bit
//! (same f32 operations in the same order). Q4_K, Q5_K and Q6_K are this crate's own
//! quantizers (least-squares fit of each group's scale / offset over a few candidate grids,
//! then 6/8-bit quantization of those against the f16 super-block scales, each quantized group
//! scale / min then moved by one step where that lowers the group's squared error); Q8_K
//! quantizes activations (`d = amax / 127`). On real weights their error is below llama.cpp's
//! reference quantizer's (`crates/formats/tests/kquant_vs_llama_cpp.rs`).

use crate::blocks::*;
use crate::{GgmlType, QuantError};

/// Quantize `src` (a whole number of `ty` blocks of elements) into `dst` (exactly
/// `blocks * type_size` bytes).
pub fn quantize(ty: GgmlType, src: &[f32], dst: &mut [u8]) -> Result<(), QuantError> {
    use GgmlType::*;
    let supported = matches!(
        ty,
        F32 | F16 | BF16 | Q4_0 | Q4_1 | Q5_0 | Q5_1 | Q8_0 | Q4_K | Q5_K | Q6_K | Q8_K
    );
    if !supported {
        return Err(QuantError::Unsupported {
            ty,
            operation: "quantization",
        });
    }
    let block_size = ty.block_size();
    if !src.len().is_multiple_of(block_size) {
        return Err(QuantError::PartialElements {
            ty,
            elements: src.len(),
            block_size,
        });
    }
    let expected = src.len() / block_size * ty.type_size();
    if dst.len() != expected {
        return Err(QuantError::LengthMismatch {
            what: "quantization output (bytes)",
            expected,
            actual: dst.len(),
        });
    }
    match ty {
        F32 => {
            for (o, v) in dst.chunks_exact_mut(4).zip(src) {
                o.copy_from_slice(&v.to_le_bytes());
            }
        }
        F16 => {
            for (o, v) in dst.chunks_exact_mut(2).zip(src) {
                o.copy_from_slice(&f32_to_f16(*v));
            }
        }
        BF16 => {
            for (o, v) in dst.chunks_exact_mut(2).zip(src) {
                o.copy_from_slice(&f32_to_bf16(*v).to_le_bytes());
            }
        }
        Q4_0 => each(src, as_blocks_mut::<BlockQ4_0>(dst)?, quant_q4_0),
        Q4_1 => each(src, as_blocks_mut::<BlockQ4_1>(dst)?, quant_q4_1),
        Q5_0 => each(src, as_blocks_mut::<BlockQ5_0>(dst)?, quant_q5_0),
        Q5_1 => each(src, as_blocks_mut::<BlockQ5_1>(dst)?, quant_q5_1),
        Q8_0 => each(src, as_blocks_mut::<BlockQ8_0>(dst)?, quant_q8_0),
        Q4_K => each(src, as_blocks_mut::<BlockQ4K>(dst)?, quant_q4_k),
        Q5_K => each(src, as_blocks_mut::<BlockQ5K>(dst)?, quant_q5_k),
        Q6_K => each(src, as_blocks_mut::<BlockQ6K>(dst)?, quant_q6_k),
        Q8_K => each(src, as_blocks_mut::<BlockQ8K>(dst)?, quant_q8_k),
        _ => {
            return Err(QuantError::Unsupported {
                ty,
                operation: "quantization",
            })
        }
    }
    Ok(())
}

fn each<B: Block>(src: &[f32], dst: &mut [B], f: fn(&[f32], &mut B)) {
    for (x, b) in src.chunks_exact(B::TYPE.block_size()).zip(dst) {
        f(x, b);
    }
}

/// f32 to bf16 bits as ggml / gguf: NaN forced quiet, otherwise round to nearest even.
pub fn f32_to_bf16(v: f32) -> u16 {
    let n = v.to_bits();
    if n & 0x7fff_ffff > 0x7f80_0000 {
        return (((n & 0xffff_0000) | (64 << 16)) >> 16) as u16;
    }
    ((n as u64 + (0x7fff + ((n >> 16) & 1) as u64)) >> 16) as u16
}

/// The element with the largest magnitude, the first one on ties (numpy `argmax` of `abs`).
fn signed_absmax(x: &[f32]) -> f32 {
    let mut best = x[0];
    for &v in &x[1..] {
        if v.abs() > best.abs() {
            best = v;
        }
    }
    best
}

fn min_max(x: &[f32]) -> (f32, f32) {
    x.iter()
        .fold((f32::INFINITY, f32::NEG_INFINITY), |(lo, hi), &v| {
            (lo.min(v), hi.max(v))
        })
}

fn inverse(d: f32) -> f32 {
    if d == 0.0 {
        0.0
    } else {
        1.0 / d
    }
}

/// `trunc(v)` cast to u8 then clipped to `max`, as the gguf package's quantizers do.
fn trunc_clip(v: f32, max: u8) -> u8 {
    (v.trunc() as u8).min(max)
}

/// Pack 32 values (< 16 each, or their low nibbles) as Q4_0 does: element i and i + 16 share byte i.
fn pack_nibbles(q: &[u8; 32], qs: &mut [u8; 16]) {
    for (i, o) in qs.iter_mut().enumerate() {
        *o = (q[i] & 0x0f) | (q[i + 16] << 4);
    }
}

/// Bit 4 of each of 32 values, element i in bit i.
fn pack_high_bits(q: &[u8; 32]) -> [u8; 4] {
    let mut bits = 0u32;
    for (i, &v) in q.iter().enumerate() {
        bits |= ((v >> 4) as u32 & 1) << i;
    }
    bits.to_le_bytes()
}

fn quant_q4_0(x: &[f32], b: &mut BlockQ4_0) {
    let d = signed_absmax(x) / -8.0;
    let id = inverse(d);
    let q: [u8; 32] = std::array::from_fn(|i| trunc_clip(x[i] * id + 8.5, 15));
    b.d = f32_to_f16(d);
    pack_nibbles(&q, &mut b.qs);
}

fn quant_q4_1(x: &[f32], b: &mut BlockQ4_1) {
    let (min, max) = min_max(x);
    let d = (max - min) / 15.0;
    let id = inverse(d);
    let q: [u8; 32] = std::array::from_fn(|i| trunc_clip((x[i] - min) * id + 0.5, 15));
    b.d = f32_to_f16(d);
    b.m = f32_to_f16(min);
    pack_nibbles(&q, &mut b.qs);
}

fn quant_q5_0(x: &[f32], b: &mut BlockQ5_0) {
    let d = signed_absmax(x) / -16.0;
    let id = inverse(d);
    let q: [u8; 32] = std::array::from_fn(|i| trunc_clip(x[i] * id + 16.5, 31));
    b.d = f32_to_f16(d);
    b.qh = pack_high_bits(&q);
    pack_nibbles(&q, &mut b.qs);
}

fn quant_q5_1(x: &[f32], b: &mut BlockQ5_1) {
    let (min, max) = min_max(x);
    let d = (max - min) / 31.0;
    let id = inverse(d);
    let q: [u8; 32] = std::array::from_fn(|i| trunc_clip((x[i] - min) * id + 0.5, 31));
    b.d = f32_to_f16(d);
    b.m = f32_to_f16(min);
    b.qh = pack_high_bits(&q);
    pack_nibbles(&q, &mut b.qs);
}

fn quant_q8_0(x: &[f32], b: &mut BlockQ8_0) {
    let amax = x.iter().fold(0f32, |a, v| a.max(v.abs()));
    let d = amax / 127.0;
    let id = inverse(d);
    for (q, &v) in b.qs.iter_mut().zip(x) {
        // Round half away from zero (ggml's roundf; the gguf package's np_roundf).
        *q = (v * id).round() as i8;
    }
    b.d = f32_to_f16(d);
}

fn quant_q8_k(x: &[f32], b: &mut BlockQ8K) {
    let amax = x.iter().fold(0f32, |a, v| a.max(v.abs()));
    let d = amax / 127.0;
    let id = inverse(d);
    for (q, &v) in b.qs.iter_mut().zip(x) {
        *q = (v * id).round().clamp(-127.0, 127.0) as i8;
    }
    for (s, q16) in b.bsums.iter_mut().zip(b.qs.chunks_exact(16)) {
        *s = (q16.iter().map(|&q| q as i16).sum::<i16>()).to_le_bytes();
    }
    b.d = d.to_le_bytes();
}

/// Best `x ~ a * q - m` with q in `0..=nmax` and `m >= 0` (K-quant groups store a non-negative
/// offset that is subtracted): try a few grids between min(x, 0) and max(x), refit (a, m) by
/// least squares for each, keep the smallest squared error.
fn fit_affine(x: &[f32], nmax: f32) -> (f32, f32) {
    let (lo, hi) = min_max(x);
    let lo = lo.min(0.0);
    if hi <= lo {
        return (0.0, -lo);
    }
    let n = x.len() as f32;
    let mut best = ((hi - lo) / nmax, -lo);
    let mut best_err = f32::INFINITY;
    for step in -6..=6 {
        let iscale = (nmax + 0.15 * step as f32) / (hi - lo);
        let (mut sq, mut sqq, mut sx, mut sqx) = (0f32, 0f32, 0f32, 0f32);
        let qs: Vec<f32> = x
            .iter()
            .map(|&v| ((v - lo) * iscale).round().clamp(0.0, nmax))
            .collect();
        for (&q, &v) in qs.iter().zip(x) {
            sq += q;
            sqq += q * q;
            sx += v;
            sqx += q * v;
        }
        let det = n * sqq - sq * sq;
        let (mut a, mut b) = if det > 0.0 {
            ((n * sqx - sq * sx) / det, (sqq * sx - sq * sqx) / det)
        } else {
            ((hi - lo) / nmax, lo)
        };
        if b > 0.0 {
            b = 0.0;
            a = if sqq > 0.0 { sqx / sqq } else { 0.0 };
        }
        a = a.max(0.0);
        let err: f32 = qs
            .iter()
            .zip(x)
            .map(|(&q, &v)| (a * q + b - v).powi(2))
            .sum();
        if err < best_err {
            best_err = err;
            best = (a, -b);
        }
    }
    best
}

/// Group scales / offsets to 6 bits against f16 super-block scales; returns
/// (d, dmin, sc, m) with `d`, `dmin` already rounded through f16.
fn k_super_scales(fits: &[(f32, f32); 8]) -> ([u8; 2], [u8; 2], [u8; 8], [u8; 8]) {
    let max_scale = fits.iter().fold(0f32, |a, f| a.max(f.0));
    let max_min = fits.iter().fold(0f32, |a, f| a.max(f.1));
    let d16 = f32_to_f16(max_scale / 63.0);
    let dmin16 = f32_to_f16(max_min / 63.0);
    let (d, dmin) = (f16_to_f32(d16), f16_to_f32(dmin16));
    let sc = std::array::from_fn(|j| (fits[j].0 * inverse(d)).round().clamp(0.0, 63.0) as u8);
    let mn = std::array::from_fn(|j| (fits[j].1 * inverse(dmin)).round().clamp(0.0, 63.0) as u8);
    (d16, dmin16, sc, mn)
}

/// Squared error of one K-quant group reconstructed as `scale * q - offset` with each q the
/// nearest level in `0..=nmax`.
fn k_group_error(x: &[f32], scale: f32, offset: f32, nmax: f32) -> f32 {
    let inv = inverse(scale);
    x.iter()
        .map(|&v| {
            let q = ((v + offset) * inv).round().clamp(0.0, nmax);
            (scale * q - offset - v).powi(2)
        })
        .sum()
}

/// The 6-bit scale and min of each group were rounded independently of each other and of the
/// data; try their neighbours (+-1 each) against the actual elements and keep the pair with the
/// smallest squared error.
fn refine_k_scales(x: &[f32], d: f32, dmin: f32, sc: &mut [u8; 8], mn: &mut [u8; 8], nmax: f32) {
    for g in 0..8 {
        let xs = &x[g * 32..g * 32 + 32];
        let (s0, m0) = (sc[g], mn[g]);
        let mut best = (s0, m0);
        let mut best_err = k_group_error(xs, d * s0 as f32, dmin * m0 as f32, nmax);
        for s in s0.saturating_sub(1)..=(s0 + 1).min(63) {
            for m in m0.saturating_sub(1)..=(m0 + 1).min(63) {
                let err = k_group_error(xs, d * s as f32, dmin * m as f32, nmax);
                if err < best_err {
                    best_err = err;
                    best = (s, m);
                }
            }
        }
        (sc[g], mn[g]) = best;
    }
}

/// Pack 8 six-bit scales and mins into the 12-byte K-quant layout (inverse of `k_scale_min`).
fn pack_k_scales(sc: &[u8; 8], mn: &[u8; 8]) -> [u8; 12] {
    let mut s = [0u8; 12];
    for j in 0..4 {
        s[j] = sc[j] | ((sc[j + 4] >> 4) << 6);
        s[j + 4] = mn[j] | ((mn[j + 4] >> 4) << 6);
        s[j + 8] = (sc[j + 4] & 0x0f) | ((mn[j + 4] & 0x0f) << 4);
    }
    s
}

/// Final q per element of a K-quant super-block: nearest level of `d * sc * q - dmin * m`.
fn k_levels(x: &[f32], d: f32, dmin: f32, sc: &[u8; 8], mn: &[u8; 8], nmax: f32) -> [u8; 256] {
    std::array::from_fn(|i| {
        let g = i / 32;
        let scale = d * sc[g] as f32;
        let offset = dmin * mn[g] as f32;
        ((x[i] + offset) * inverse(scale)).round().clamp(0.0, nmax) as u8
    })
}

fn quant_q4_k(x: &[f32], b: &mut BlockQ4K) {
    let fits: [(f32, f32); 8] = std::array::from_fn(|g| fit_affine(&x[g * 32..g * 32 + 32], 15.0));
    let (d16, dmin16, mut sc, mut mn) = k_super_scales(&fits);
    let (d, dmin) = (f16_to_f32(d16), f16_to_f32(dmin16));
    refine_k_scales(x, d, dmin, &mut sc, &mut mn, 15.0);
    let q = k_levels(x, d, dmin, &sc, &mn, 15.0);
    b.d = d16;
    b.dmin = dmin16;
    b.scales = pack_k_scales(&sc, &mn);
    for (i, &v) in q.iter().enumerate() {
        let g = i / 32;
        let byte = &mut b.qs[g / 2 * 32 + i % 32];
        if g % 2 == 0 {
            *byte = (*byte & 0xf0) | v;
        } else {
            *byte = (*byte & 0x0f) | (v << 4);
        }
    }
}

fn quant_q5_k(x: &[f32], b: &mut BlockQ5K) {
    let fits: [(f32, f32); 8] = std::array::from_fn(|g| fit_affine(&x[g * 32..g * 32 + 32], 31.0));
    let (d16, dmin16, mut sc, mut mn) = k_super_scales(&fits);
    let (d, dmin) = (f16_to_f32(d16), f16_to_f32(dmin16));
    refine_k_scales(x, d, dmin, &mut sc, &mut mn, 31.0);
    let q = k_levels(x, d, dmin, &sc, &mn, 31.0);
    b.d = d16;
    b.dmin = dmin16;
    b.scales = pack_k_scales(&sc, &mn);
    b.qh = [0; 32];
    for (i, &v) in q.iter().enumerate() {
        let g = i / 32;
        let byte = &mut b.qs[g / 2 * 32 + i % 32];
        if g % 2 == 0 {
            *byte = (*byte & 0xf0) | (v & 0x0f);
        } else {
            *byte = (*byte & 0x0f) | ((v & 0x0f) << 4);
        }
        b.qh[i % 32] |= (v >> 4) << g;
    }
}

/// Best symmetric scale for `x ~ s * q`, q in -32..=31: the largest-magnitude element maps to
/// -32 on a few nearby grids, each refit by least squares; smallest squared error wins.
fn fit_symmetric(x: &[f32]) -> f32 {
    let max = signed_absmax(x);
    if max == 0.0 {
        return 0.0;
    }
    let mut best = max / -32.0;
    let mut best_err = f32::INFINITY;
    for step in -6..=6 {
        let iscale = -(32.0 + 0.15 * step as f32) / max;
        let qs: Vec<f32> = x
            .iter()
            .map(|&v| (v * iscale).round().clamp(-32.0, 31.0))
            .collect();
        let sqq: f32 = qs.iter().map(|q| q * q).sum();
        let sqx: f32 = qs.iter().zip(x).map(|(q, v)| q * v).sum();
        if sqq == 0.0 {
            continue;
        }
        let s = sqx / sqq;
        let err: f32 = qs.iter().zip(x).map(|(&q, &v)| (s * q - v).powi(2)).sum();
        if err < best_err {
            best_err = err;
            best = s;
        }
    }
    best
}

fn quant_q6_k(x: &[f32], b: &mut BlockQ6K) {
    let scales: [f32; 16] = std::array::from_fn(|g| fit_symmetric(&x[g * 16..g * 16 + 16]));
    let max_scale = scales.iter().fold(0f32, |a, s| a.max(s.abs()));
    let d16 = f32_to_f16(max_scale / 127.0);
    let d = f16_to_f32(d16);
    let mut sc: [i8; 16] =
        std::array::from_fn(|g| (scales[g] * inverse(d)).round().clamp(-127.0, 127.0) as i8);
    // As for Q4_K: the 8-bit group scale was rounded without looking at the data; its
    // neighbours may reconstruct the group better.
    for (g, s) in sc.iter_mut().enumerate() {
        let xs = &x[g * 16..g * 16 + 16];
        let err = |s: i8| -> f32 {
            let step = d * s as f32;
            let inv = inverse(step);
            xs.iter()
                .map(|&v| (step * (v * inv).round().clamp(-32.0, 31.0) - v).powi(2))
                .sum()
        };
        let s0 = *s;
        let mut best_err = err(s0);
        for cand in [s0.saturating_sub(1).max(-127), s0.saturating_add(1)] {
            let e = err(cand);
            if e < best_err {
                best_err = e;
                *s = cand;
            }
        }
    }
    b.d = d16;
    b.scales = sc;
    b.ql = [0; 128];
    b.qh = [0; 64];
    for (i, &v) in x.iter().enumerate() {
        let step = d * sc[i / 16] as f32;
        let q = ((v * inverse(step)).round().clamp(-32.0, 31.0) as i32 + 32) as u8;
        let (half, j) = (i / 128, i % 128);
        b.ql[half * 64 + j % 64] |= (q & 0x0f) << (4 * (j / 64));
        b.qh[half * 32 + j % 32] |= (q >> 4) << (2 * (j / 32));
    }
}
