//! Block layouts of the GGML quantized types, byte for byte as GGUF stores them.
//!
//! Every field is a byte array, so every block type has alignment 1 and no padding: any
//! `&[u8]` of the right length is a valid slice of blocks, whatever its address. Multi-byte
//! fields are little-endian (GGUF's byte order) and read with the helpers below.

use crate::{GgmlType, QuantError};

/// A GGML block type: `#[repr(C)]`, alignment 1, no padding, every bit pattern valid.
///
/// Sealed: only this module's types implement it, which is what makes [`as_blocks`] sound.
pub trait Block: sealed::Sealed + Sized + Copy + 'static {
    /// The type whose blocks this is.
    const TYPE: GgmlType;
}

mod sealed {
    pub trait Sealed {}
}

macro_rules! block_type {
    ($(#[$doc:meta])* $name:ident, $ty:expr, { $($(#[$fdoc:meta])* $field:ident : $fty:ty),* $(,)? }) => {
        $(#[$doc])*
        #[repr(C)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        #[allow(missing_docs)] // fields as named in ggml's block structs
        pub struct $name {
            $($(#[$fdoc])* pub $field: $fty),*
        }
        impl sealed::Sealed for $name {}
        impl Block for $name {
            const TYPE: GgmlType = $ty;
        }
        const _: () = assert!(std::mem::size_of::<$name>() == $ty.type_size());
        const _: () = assert!(std::mem::align_of::<$name>() == 1);
    };
}

block_type!(
    /// 32 weights `d * (q - 8)`, q a nibble; element i < 16 in the low nibble of `qs[i]`,
    /// element i + 16 in its high nibble.
    BlockQ4_0, GgmlType::Q4_0, { d: [u8; 2], qs: [u8; 16] }
);
block_type!(
    /// 32 weights `d * q + m`, nibbles as in [`BlockQ4_0`].
    BlockQ4_1, GgmlType::Q4_1, { d: [u8; 2], m: [u8; 2], qs: [u8; 16] }
);
block_type!(
    /// 32 weights `d * (q - 16)`, q 5 bits: low nibbles as Q4_0, bit 4 of element i in bit i of `qh`.
    BlockQ5_0, GgmlType::Q5_0, { d: [u8; 2], qh: [u8; 4], qs: [u8; 16] }
);
block_type!(
    /// 32 weights `d * q + m`, q 5 bits as in [`BlockQ5_0`].
    BlockQ5_1, GgmlType::Q5_1, { d: [u8; 2], m: [u8; 2], qh: [u8; 4], qs: [u8; 16] }
);
block_type!(
    /// 32 weights `d * q`, q a signed byte.
    BlockQ8_0, GgmlType::Q8_0, { d: [u8; 2], qs: [i8; 32] }
);
block_type!(
    /// 32 values `d * q` with `s = d * sum(q)` (ggml's activation format for Q4_1/Q5_1).
    BlockQ8_1, GgmlType::Q8_1, { d: [u8; 2], s: [u8; 2], qs: [i8; 32] }
);
block_type!(
    /// 256 weights in 16 groups of 16: `d * (scales & 15) * q - dmin * (scales >> 4)`, q 2 bits.
    BlockQ2K, GgmlType::Q2_K, { scales: [u8; 16], qs: [u8; 64], d: [u8; 2], dmin: [u8; 2] }
);
block_type!(
    /// 256 weights in 16 groups of 16: `d * (scale - 32) * (q - 4 * !hbit)`, 6-bit scales.
    BlockQ3K, GgmlType::Q3_K, { hmask: [u8; 32], qs: [u8; 64], scales: [u8; 12], d: [u8; 2] }
);
block_type!(
    /// 256 weights in 8 groups of 32: `d * sc * q - dmin * m`, 6-bit sc and m, q a nibble.
    BlockQ4K, GgmlType::Q4_K, { d: [u8; 2], dmin: [u8; 2], scales: [u8; 12], qs: [u8; 128] }
);
block_type!(
    /// As [`BlockQ4K`] with a fifth bit per weight in `qh`.
    BlockQ5K, GgmlType::Q5_K, {
        d: [u8; 2], dmin: [u8; 2], scales: [u8; 12], qh: [u8; 32], qs: [u8; 128]
    }
);
block_type!(
    /// 256 weights in 16 groups of 16: `d * scale * (q - 32)`, q 6 bits, scale a signed byte.
    BlockQ6K, GgmlType::Q6_K, { ql: [u8; 128], qh: [u8; 64], scales: [i8; 16], d: [u8; 2] }
);
block_type!(
    /// 256 values `d * q`, d an f32, with the sums of each 16 q's (ggml's K activation format).
    BlockQ8K, GgmlType::Q8_K, { d: [u8; 4], qs: [i8; 256], bsums: [[u8; 2]; 16] }
);
block_type!(
    /// 32 weights `d * KVALUES_IQ4[q]`, nibbles as in [`BlockQ4_0`].
    BlockIQ4NL, GgmlType::IQ4_NL, { d: [u8; 2], qs: [u8; 16] }
);
block_type!(
    /// 256 weights in 8 groups of 32: `d * (scale - 32) * KVALUES_IQ4[q]`, 6-bit scales.
    BlockIQ4XS, GgmlType::IQ4_XS, {
        d: [u8; 2], scales_h: [u8; 2], scales_l: [u8; 4], qs: [u8; 128]
    }
);

/// The 16 non-uniform levels of IQ4_NL / IQ4_XS.
pub const KVALUES_IQ4: [i8; 16] = [
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
];

/// `bytes` viewed as blocks of `B`; an error if it is not a whole number of blocks.
pub fn as_blocks<B: Block>(bytes: &[u8]) -> Result<&[B], QuantError> {
    let size = std::mem::size_of::<B>();
    if !bytes.len().is_multiple_of(size) {
        return Err(QuantError::PartialBlock {
            ty: B::TYPE,
            bytes: bytes.len(),
            type_size: size,
        });
    }
    // SAFETY: `Block` is sealed to this module's types, all `repr(C)` aggregates of byte arrays:
    // alignment 1, no padding, every bit pattern valid; the length is a whole number of blocks.
    Ok(unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast::<B>(), bytes.len() / size) })
}

/// `bytes` viewed as mutable blocks of `B`; an error if it is not a whole number of blocks.
pub fn as_blocks_mut<B: Block>(bytes: &mut [u8]) -> Result<&mut [B], QuantError> {
    let size = std::mem::size_of::<B>();
    if !bytes.len().is_multiple_of(size) {
        return Err(QuantError::PartialBlock {
            ty: B::TYPE,
            bytes: bytes.len(),
            type_size: size,
        });
    }
    // SAFETY: as in `as_blocks`; the exclusive borrow of `bytes` is moved into the result.
    Ok(unsafe {
        std::slice::from_raw_parts_mut(bytes.as_mut_ptr().cast::<B>(), bytes.len() / size)
    })
}

/// An IEEE half (little-endian bytes) widened to f32, exactly, NaN payloads kept (as numpy does).
#[inline]
pub fn f16_to_f32(bytes: [u8; 2]) -> f32 {
    f32::from_bits(f16_bits_to_f32_bits(u16::from_le_bytes(bytes)))
}

/// Bit-level half-to-single widening: exact for every input, NaN payload shifted, not quieted.
#[inline]
pub fn f16_bits_to_f32_bits(h: u16) -> u32 {
    let sign = ((h & 0x8000) as u32) << 16;
    let exp = ((h >> 10) & 0x1f) as u32;
    let man = (h & 0x3ff) as u32;
    match exp {
        0 if man == 0 => sign,
        0 => {
            // Subnormal half: normalise the mantissa; value = man * 2^-24.
            let shift = man.leading_zeros() - 21; // bring the top set bit to bit 10
            let man = (man << shift) & 0x3ff;
            let exp = 127 - 15 + 1 - shift;
            sign | (exp << 23) | (man << 13)
        }
        0x1f => sign | 0x7f80_0000 | (man << 13),
        _ => sign | ((exp + 127 - 15) << 23) | (man << 13),
    }
}

/// f32 rounded to the nearest half, ties to even (numpy's `astype(np.float16)`), as LE bytes.
#[inline]
pub fn f32_to_f16(x: f32) -> [u8; 2] {
    half::f16::from_f32(x).to_bits().to_le_bytes()
}

/// A little-endian f32 field.
#[inline]
pub fn f32_le(bytes: [u8; 4]) -> f32 {
    f32::from_le_bytes(bytes)
}
