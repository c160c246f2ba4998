//! Portable reference kernels: integer dot per block, then one f32 scale step per block.
//! Every SIMD kernel must produce the same integers per block.

use super::{f16_at, Kernels, QActs, PREFILL_ROWS};
use crate::blocks::{as_blocks, BlockQ4K, BlockQ5K, BlockQ6K};
use crate::dequant::{k_scale_min, q6_k_value};
use crate::GgmlType;

pub(crate) fn kernels(ty: GgmlType) -> Option<Kernels> {
    use GgmlType::*;
    Some(match ty {
        Q4_0 => Kernels {
            one: q4_0::<1>,
            many: q4_0::<PREFILL_ROWS>,
        },
        Q4_1 => Kernels {
            one: q4_1::<1>,
            many: q4_1::<PREFILL_ROWS>,
        },
        Q5_0 => Kernels {
            one: q5_0::<1>,
            many: q5_0::<PREFILL_ROWS>,
        },
        Q5_1 => Kernels {
            one: q5_1::<1>,
            many: q5_1::<PREFILL_ROWS>,
        },
        Q8_0 => Kernels {
            one: q8_0::<1>,
            many: q8_0::<PREFILL_ROWS>,
        },
        Q4_K => Kernels {
            one: q4_k::<1>,
            many: q4_k::<PREFILL_ROWS>,
        },
        Q5_K => Kernels {
            one: q5_k::<1>,
            many: q5_k::<PREFILL_ROWS>,
        },
        Q6_K => Kernels {
            one: q6_k::<1>,
            many: q6_k::<PREFILL_ROWS>,
        },
        F32 => Kernels {
            one: float::<1, 0>,
            many: float::<PREFILL_ROWS, 0>,
        },
        F16 => Kernels {
            one: float::<1, 1>,
            many: float::<PREFILL_ROWS, 1>,
        },
        BF16 => Kernels {
            one: float::<1, 2>,
            many: float::<PREFILL_ROWS, 2>,
        },
        _ => return None,
    })
}

/// The 32 quantized activations of block `b` of activation row `row`.
#[inline]
fn xblock<'a>(a: &'a QActs, row: usize, b: usize, len: usize) -> &'a [i8] {
    &a.qs[row * a.cols + b * len..][..len]
}

/// Integer dot of a 32-block of nibbles (+ optional 5th bits) with activations, offset applied.
#[inline]
fn dot_q4(qs: &[u8], qh: u32, x: &[i8], offset: i32) -> i32 {
    let mut sum = 0i32;
    for j in 0..16 {
        let lo = (qs[j] & 0x0f) as i32 | ((((qh >> j) & 1) as i32) << 4);
        let hi = (qs[j] >> 4) as i32 | ((((qh >> (j + 16)) & 1) as i32) << 4);
        sum += (lo - offset) * x[j] as i32 + (hi - offset) * x[j + 16] as i32;
    }
    sum
}

/// Shared loop of the 32-element block types: `(d, m, qs, qh)` extracted by `fields`;
/// `offset` subtracted from every q; the `m * d_x * sum(q_x)` term added when `m` is present.
#[inline]
fn blocks32<const N: usize>(
    w: &[u8],
    a: &QActs,
    r0: usize,
    type_size: usize,
    offset: i32,
    fields: impl Fn(&[u8]) -> (f32, Option<f32>, &[u8], u32),
) -> [f32; N] {
    let nb = a.cols / 32;
    let mut out = [0f32; N];
    for (b, blk) in w.chunks_exact(type_size).enumerate() {
        let (dw, mw, qs, qh) = fields(blk);
        for (i, o) in out.iter_mut().enumerate() {
            let row = r0 + i;
            let [dx, sx] = a.ds[row * nb + b];
            let isum = dot_q4(qs, qh, xblock(a, row, b, 32), offset);
            *o += (dw * dx) * isum as f32;
            if let Some(mw) = mw {
                *o += mw * sx;
            }
        }
    }
    out
}

fn q4_0<const N: usize>(w: &[u8], a: &QActs, r0: usize) -> [f32; N] {
    blocks32(w, a, r0, 18, 8, |b| (f16_at(b, 0), None, &b[2..18], 0))
}

fn q4_1<const N: usize>(w: &[u8], a: &QActs, r0: usize) -> [f32; N] {
    blocks32(w, a, r0, 20, 0, |b| {
        (f16_at(b, 0), Some(f16_at(b, 2)), &b[4..20], 0)
    })
}

fn q5_0<const N: usize>(w: &[u8], a: &QActs, r0: usize) -> [f32; N] {
    blocks32(w, a, r0, 22, 16, |b| {
        (
            f16_at(b, 0),
            None,
            &b[6..22],
            u32::from_le_bytes([b[2], b[3], b[4], b[5]]),
        )
    })
}

fn q5_1<const N: usize>(w: &[u8], a: &QActs, r0: usize) -> [f32; N] {
    blocks32(w, a, r0, 24, 0, |b| {
        (
            f16_at(b, 0),
            Some(f16_at(b, 2)),
            &b[8..24],
            u32::from_le_bytes([b[4], b[5], b[6], b[7]]),
        )
    })
}

fn q8_0<const N: usize>(w: &[u8], a: &QActs, r0: usize) -> [f32; N] {
    let nb = a.cols / 32;
    let mut out = [0f32; N];
    for (b, blk) in w.chunks_exact(34).enumerate() {
        let dw = f16_at(blk, 0);
        for (i, o) in out.iter_mut().enumerate() {
            let row = r0 + i;
            let x = xblock(a, row, b, 32);
            let isum: i32 = blk[2..34]
                .iter()
                .zip(x)
                .map(|(&q, &x)| q as i8 as i32 * x as i32)
                .sum();
            *o += (dw * a.ds[row * nb + b][0]) * isum as f32;
        }
    }
    out
}

/// Q4_K / Q5_K: `sum_g sc_g * dot_g` and `sum_g mn_g * xsum_g` as integers per super-block.
fn k_scaled<const N: usize>(
    a: &QActs,
    r0: usize,
    sb: usize,
    scales: &[u8; 12],
    value: impl Fn(usize) -> i32,
) -> [(f32, i32, i32); N] {
    let (sc, mn) = k_scale_min(scales);
    let nsb = a.cols / 256;
    std::array::from_fn(|i| {
        let row = r0 + i;
        let x = xblock(a, row, sb, 256);
        let mut sumi = 0i32;
        let mut summ = 0i32;
        for g in 0..8 {
            let dot: i32 = (0..32)
                .map(|j| value(g * 32 + j) * x[g * 32 + j] as i32)
                .sum();
            sumi += sc[g] as i32 * dot;
            let xsum = a.sums16[(row * nsb + sb) * 16 + 2 * g]
                + a.sums16[(row * nsb + sb) * 16 + 2 * g + 1];
            summ += mn[g] as i32 * xsum;
        }
        (a.ds[row * nsb + sb][0], sumi, summ)
    })
}

fn q4_k<const N: usize>(w: &[u8], a: &QActs, r0: usize) -> [f32; N] {
    let mut out = [0f32; N];
    let Ok(blocks) = as_blocks::<BlockQ4K>(w) else {
        return out;
    };
    for (sb, blk) in blocks.iter().enumerate() {
        let (d, dmin) = (f16_at(&blk.d, 0), f16_at(&blk.dmin, 0));
        let value = |i: usize| ((blk.qs[i / 64 * 32 + i % 32] >> (4 * (i / 32 % 2))) & 0x0f) as i32;
        let parts = k_scaled::<N>(a, r0, sb, &blk.scales, value);
        for (o, (dx, sumi, summ)) in out.iter_mut().zip(parts) {
            *o += (d * dx) * sumi as f32 - (dmin * dx) * summ as f32;
        }
    }
    out
}

fn q5_k<const N: usize>(w: &[u8], a: &QActs, r0: usize) -> [f32; N] {
    let mut out = [0f32; N];
    let Ok(blocks) = as_blocks::<BlockQ5K>(w) else {
        return out;
    };
    for (sb, blk) in blocks.iter().enumerate() {
        let (d, dmin) = (f16_at(&blk.d, 0), f16_at(&blk.dmin, 0));
        let value = |i: usize| {
            let low = (blk.qs[i / 64 * 32 + i % 32] >> (4 * (i / 32 % 2))) & 0x0f;
            let high = (blk.qh[i % 32] >> (i / 32)) & 1;
            (low | (high << 4)) as i32
        };
        let parts = k_scaled::<N>(a, r0, sb, &blk.scales, value);
        for (o, (dx, sumi, summ)) in out.iter_mut().zip(parts) {
            *o += (d * dx) * sumi as f32 - (dmin * dx) * summ as f32;
        }
    }
    out
}

fn q6_k<const N: usize>(w: &[u8], a: &QActs, r0: usize) -> [f32; N] {
    let mut out = [0f32; N];
    let Ok(blocks) = as_blocks::<BlockQ6K>(w) else {
        return out;
    };
    let nsb = a.cols / 256;
    for (sb, blk) in blocks.iter().enumerate() {
        let d = f16_at(&blk.d, 0);
        let q: [i32; 256] = std::array::from_fn(|i| q6_k_value(blk, i) as i32 - 32);
        for (i, o) in out.iter_mut().enumerate() {
            let row = r0 + i;
            let x = xblock(a, row, sb, 256);
            let mut sumi = 0i32;
            for g in 0..16 {
                let dot: i32 = (0..16).map(|j| q[g * 16 + j] * x[g * 16 + j] as i32).sum();
                sumi += blk.scales[g] as i32 * dot;
            }
            *o += (d * a.ds[row * nsb + sb][0]) * sumi as f32;
        }
    }
    out
}

/// F32 (KIND 0), F16 (1), BF16 (2) weights times f32 activations, accumulated in f32.
fn float<const N: usize, const KIND: u8>(w: &[u8], a: &QActs, r0: usize) -> [f32; N] {
    let width = if KIND == 0 { 4 } else { 2 };
    let mut out = [0f32; N];
    for (j, e) in w.chunks_exact(width).enumerate() {
        let wv = match KIND {
            0 => f32::from_le_bytes([e[0], e[1], e[2], e[3]]),
            1 => f16_at(e, 0),
            _ => f32::from_bits((u16::from_le_bytes([e[0], e[1]]) as u32) << 16),
        };
        for (i, o) in out.iter_mut().enumerate() {
            *o += wv * a.xf[(r0 + i) * a.cols + j];
        }
    }
    out
}
