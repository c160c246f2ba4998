//! Dequantization to f32, bit-identical to `gguf.quants.dequantize` of the `gguf` Python
//! package: every element is computed with the same f32 operations in the same order (scale
//! widened from f16 to f32 first, then multiplied; products and offsets rounded separately,
//! never fused).

use crate::blocks::*;
use crate::{GgmlType, QuantError};

/// Dequantize `src` (a whole number of `ty` blocks) into `dst` (`blocks * block_size` floats).
pub fn dequantize(ty: GgmlType, src: &[u8], dst: &mut [f32]) -> Result<(), QuantError> {
    check_supported(ty)?;
    let type_size = ty.type_size();
    if !src.len().is_multiple_of(type_size) {
        return Err(QuantError::PartialBlock {
            ty,
            bytes: src.len(),
            type_size,
        });
    }
    let expected = src.len() / type_size * ty.block_size();
    if dst.len() != expected {
        return Err(QuantError::LengthMismatch {
            what: "dequantization output",
            expected,
            actual: dst.len(),
        });
    }
    dequantize_unchecked_len(ty, src, dst)
}

/// Whether [`dequantize`] handles `ty`.
pub fn supports_dequantize(ty: GgmlType) -> bool {
    check_supported(ty).is_ok()
}

fn check_supported(ty: GgmlType) -> Result<(), QuantError> {
    use GgmlType::*;
    match ty {
        F32 | F16 | BF16 | Q4_0 | Q4_1 | Q5_0 | Q5_1 | Q8_0 | Q2_K | Q3_K | Q4_K | Q5_K | Q6_K
        | Q8_K | IQ4_NL | IQ4_XS => Ok(()),
        _ => Err(QuantError::Unsupported {
            ty,
            operation: "dequantization",
        }),
    }
}

/// The per-type loops; lengths already checked to match.
fn dequantize_unchecked_len(ty: GgmlType, src: &[u8], dst: &mut [f32]) -> Result<(), QuantError> {
    use GgmlType::*;
    match ty {
        F32 => {
            for (o, b) in dst.iter_mut().zip(src.chunks_exact(4)) {
                *o = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            }
        }
        F16 => {
            for (o, b) in dst.iter_mut().zip(src.chunks_exact(2)) {
                *o = f16_to_f32([b[0], b[1]]);
            }
        }
        BF16 => {
            for (o, b) in dst.iter_mut().zip(src.chunks_exact(2)) {
                *o = f32::from_bits((u16::from_le_bytes([b[0], b[1]]) as u32) << 16);
            }
        }
        Q4_0 => each_block(as_blocks::<BlockQ4_0>(src)?, dst, dequant_q4_0),
        Q4_1 => each_block(as_blocks::<BlockQ4_1>(src)?, dst, dequant_q4_1),
        Q5_0 => each_block(as_blocks::<BlockQ5_0>(src)?, dst, dequant_q5_0),
        Q5_1 => each_block(as_blocks::<BlockQ5_1>(src)?, dst, dequant_q5_1),
        Q8_0 => each_block(as_blocks::<BlockQ8_0>(src)?, dst, dequant_q8_0),
        Q2_K => each_block(as_blocks::<BlockQ2K>(src)?, dst, dequant_q2_k),
        Q3_K => each_block(as_blocks::<BlockQ3K>(src)?, dst, dequant_q3_k),
        Q4_K => each_block(as_blocks::<BlockQ4K>(src)?, dst, dequant_q4_k),
        Q5_K => each_block(as_blocks::<BlockQ5K>(src)?, dst, dequant_q5_k),
        Q6_K => each_block(as_blocks::<BlockQ6K>(src)?, dst, dequant_q6_k),
        Q8_K => each_block(as_blocks::<BlockQ8K>(src)?, dst, dequant_q8_k),
        IQ4_NL => each_block(as_blocks::<BlockIQ4NL>(src)?, dst, dequant_iq4_nl),
        IQ4_XS => each_block(as_blocks::<BlockIQ4XS>(src)?, dst, dequant_iq4_xs),
        _ => {
            return Err(QuantError::Unsupported {
                ty,
                operation: "dequantization",
            })
        }
    }
    Ok(())
}

fn each_block<B: Block>(blocks: &[B], dst: &mut [f32], f: fn(&B, &mut [f32])) {
    let n = B::TYPE.block_size();
    for (b, out) in blocks.iter().zip(dst.chunks_exact_mut(n)) {
        f(b, out);
    }
}

/// Nibble `i` of a 32-element block packed as in Q4_0: low nibbles first, then high nibbles.
#[inline]
fn nibble(qs: &[u8], i: usize) -> u8 {
    if i < 16 {
        qs[i] & 0x0f
    } else {
        qs[i - 16] >> 4
    }
}

/// Bit 4 of element `i` of a Q5_0 / Q5_1 block.
#[inline]
fn q5_high_bit(qh: [u8; 4], i: usize) -> u8 {
    ((u32::from_le_bytes(qh) >> i) & 1) as u8
}

/// Dequantize one Q4_0 block.
pub fn dequant_q4_0(b: &BlockQ4_0, out: &mut [f32]) {
    let d = f16_to_f32(b.d);
    for (i, o) in out.iter_mut().enumerate().take(32) {
        *o = d * (nibble(&b.qs, i) as i8 - 8) as f32;
    }
}

/// Dequantize one Q4_1 block.
pub fn dequant_q4_1(b: &BlockQ4_1, out: &mut [f32]) {
    let (d, m) = (f16_to_f32(b.d), f16_to_f32(b.m));
    for (i, o) in out.iter_mut().enumerate().take(32) {
        *o = d * nibble(&b.qs, i) as f32 + m;
    }
}

/// Dequantize one Q5_0 block.
pub fn dequant_q5_0(b: &BlockQ5_0, out: &mut [f32]) {
    let d = f16_to_f32(b.d);
    for (i, o) in out.iter_mut().enumerate().take(32) {
        let q = nibble(&b.qs, i) | (q5_high_bit(b.qh, i) << 4);
        *o = d * (q as i8 - 16) as f32;
    }
}

/// Dequantize one Q5_1 block.
pub fn dequant_q5_1(b: &BlockQ5_1, out: &mut [f32]) {
    let (d, m) = (f16_to_f32(b.d), f16_to_f32(b.m));
    for (i, o) in out.iter_mut().enumerate().take(32) {
        let q = nibble(&b.qs, i) | (q5_high_bit(b.qh, i) << 4);
        *o = d * q as f32 + m;
    }
}

/// Dequantize one Q8_0 block.
pub fn dequant_q8_0(b: &BlockQ8_0, out: &mut [f32]) {
    let d = f16_to_f32(b.d);
    for (o, &q) in out.iter_mut().zip(&b.qs) {
        *o = q as f32 * d;
    }
}

/// Dequantize one Q2_K block.
pub fn dequant_q2_k(b: &BlockQ2K, out: &mut [f32]) {
    let (d, dmin) = (f16_to_f32(b.d), f16_to_f32(b.dmin));
    for (i, o) in out.iter_mut().enumerate().take(256) {
        // Element i: half i/128 of qs, 2-bit field (i%128)/32, byte i%32 of that half.
        let q = (b.qs[i / 128 * 32 + i % 32] >> (2 * (i % 128 / 32))) & 3;
        let sc = b.scales[i / 16];
        let dl = d * (sc & 0x0f) as f32;
        let ml = dmin * (sc >> 4) as f32;
        *o = dl * q as f32 - ml;
    }
}

/// The 16 signed 6-bit scales of a Q3_K block.
fn q3_k_scales(s: &[u8; 12]) -> [i8; 16] {
    let mut out = [0i8; 16];
    for (k, o) in out.iter_mut().enumerate() {
        let low = if k < 8 { s[k] & 0x0f } else { s[k - 8] >> 4 };
        let high = (s[8 + k % 4] >> (2 * (k / 4))) & 3;
        *o = (low | (high << 4)) as i8 - 32;
    }
    out
}

/// Dequantize one Q3_K block.
pub fn dequant_q3_k(b: &BlockQ3K, out: &mut [f32]) {
    let d = f16_to_f32(b.d);
    let scales = q3_k_scales(&b.scales);
    for (i, o) in out.iter_mut().enumerate().take(256) {
        let low = (b.qs[i / 128 * 32 + i % 32] >> (2 * (i % 128 / 32))) & 3;
        let hbit = (b.hmask[i % 32] >> (i / 32)) & 1;
        // The high bit set means no offset; clear means subtract 4.
        let q = low as i8 - (((hbit ^ 1) << 2) as i8);
        let dl = d * scales[i / 16] as f32;
        *o = dl * q as f32;
    }
}

/// The 8 (scale, min) 6-bit pairs of a Q4_K / Q5_K block.
pub fn k_scale_min(s: &[u8; 12]) -> ([u8; 8], [u8; 8]) {
    let mut sc = [0u8; 8];
    let mut mn = [0u8; 8];
    for j in 0..4 {
        sc[j] = s[j] & 0x3f;
        mn[j] = s[j + 4] & 0x3f;
        sc[j + 4] = (s[j + 8] & 0x0f) | ((s[j] >> 2) & 0x30);
        mn[j + 4] = (s[j + 8] >> 4) | ((s[j + 4] >> 2) & 0x30);
    }
    (sc, mn)
}

/// Dequantize one Q4_K block.
pub fn dequant_q4_k(b: &BlockQ4K, out: &mut [f32]) {
    let (d, dmin) = (f16_to_f32(b.d), f16_to_f32(b.dmin));
    let (sc, mn) = k_scale_min(&b.scales);
    for (i, o) in out.iter_mut().enumerate().take(256) {
        // Group g = i/32 is the low (even g) or high (odd g) nibble of qs[g/2*32 ..][..32].
        let g = i / 32;
        let q = (b.qs[g / 2 * 32 + i % 32] >> (4 * (g % 2))) & 0x0f;
        let dl = d * sc[g] as f32;
        let ml = dmin * mn[g] as f32;
        *o = dl * q as f32 - ml;
    }
}

/// Dequantize one Q5_K block.
pub fn dequant_q5_k(b: &BlockQ5K, out: &mut [f32]) {
    let (d, dmin) = (f16_to_f32(b.d), f16_to_f32(b.dmin));
    let (sc, mn) = k_scale_min(&b.scales);
    for (i, o) in out.iter_mut().enumerate().take(256) {
        let g = i / 32;
        let low = (b.qs[g / 2 * 32 + i % 32] >> (4 * (g % 2))) & 0x0f;
        let high = (b.qh[i % 32] >> g) & 1;
        let q = low | (high << 4);
        let dl = d * sc[g] as f32;
        let ml = dmin * mn[g] as f32;
        *o = dl * q as f32 - ml;
    }
}

/// The 6-bit value of element `i` of a Q6_K block, before the -32 offset.
#[inline]
pub fn q6_k_value(b: &BlockQ6K, i: usize) -> u8 {
    let half = i / 128;
    let j = i % 128;
    let low = (b.ql[half * 64 + j % 64] >> (4 * (j / 64))) & 0x0f;
    let high = (b.qh[half * 32 + j % 32] >> (2 * (j / 32))) & 3;
    low | (high << 4)
}

/// Dequantize one Q6_K block.
pub fn dequant_q6_k(b: &BlockQ6K, out: &mut [f32]) {
    let d = f16_to_f32(b.d);
    for (i, o) in out.iter_mut().enumerate().take(256) {
        let dl = d * b.scales[i / 16] as f32;
        *o = dl * (q6_k_value(b, i) as i8 - 32) as f32;
    }
}

/// Dequantize one Q8_K block.
pub fn dequant_q8_k(b: &BlockQ8K, out: &mut [f32]) {
    let d = f32_le(b.d);
    for (o, &q) in out.iter_mut().zip(&b.qs) {
        *o = d * q as f32;
    }
}

/// Dequantize one IQ4_NL block.
pub fn dequant_iq4_nl(b: &BlockIQ4NL, out: &mut [f32]) {
    let d = f16_to_f32(b.d);
    for (i, o) in out.iter_mut().enumerate().take(32) {
        *o = d * KVALUES_IQ4[nibble(&b.qs, i) as usize] as f32;
    }
}

/// Dequantize one IQ4_XS block.
pub fn dequant_iq4_xs(b: &BlockIQ4XS, out: &mut [f32]) {
    let d = f16_to_f32(b.d);
    let scales_h = u16::from_le_bytes(b.scales_h);
    for g in 0..8 {
        let low = (b.scales_l[g / 2] >> (4 * (g % 2))) & 0x0f;
        let high = ((scales_h >> (2 * g)) & 3) as u8;
        let dl = d * ((low | (high << 4)) as i8 - 32) as f32;
        let qs = &b.qs[g * 16..g * 16 + 16];
        for (i, o) in out[g * 32..g * 32 + 32].iter_mut().enumerate() {
            *o = dl * KVALUES_IQ4[nibble(qs, i) as usize] as f32;
        }
    }
}
