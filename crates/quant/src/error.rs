use std::fmt;

use crate::GgmlType;

/// Why a quantization routine refused its input. Every variant names the offending type or
/// buffer and the sizes involved, so a caller can report it without more context.
#[derive(Clone, Debug, PartialEq, Eq)]
#[allow(missing_docs)] // variant fields are named for what they hold; see each variant
pub enum QuantError {
    /// `operation` (e.g. "dequantization") is not implemented for `ty`.
    Unsupported {
        ty: GgmlType,
        operation: &'static str,
    },
    /// A packed buffer of `ty` is not a whole number of `type_size`-byte blocks.
    PartialBlock {
        ty: GgmlType,
        bytes: usize,
        type_size: usize,
    },
    /// An element count is not a multiple of the block size of `ty`.
    PartialElements {
        ty: GgmlType,
        elements: usize,
        block_size: usize,
    },
    /// Buffer `what` has `actual` elements (or bytes) where `expected` were required.
    LengthMismatch {
        what: &'static str,
        expected: usize,
        actual: usize,
    },
    /// Matrices multiplied together need different activation formats (`first` vs `other`).
    IncompatibleTypes { first: GgmlType, other: GgmlType },
    /// A shape is out of range, e.g. a row index past the last row or a size that overflows.
    BadShape {
        what: &'static str,
        value: usize,
        limit: usize,
    },
}

impl fmt::Display for QuantError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QuantError::Unsupported { ty, operation } => {
                write!(f, "{operation} of GGML type {ty} is not supported")
            }
            QuantError::PartialBlock {
                ty,
                bytes,
                type_size,
            } => write!(
                f,
                "{bytes} bytes of {ty} data is not a whole number of {type_size}-byte blocks"
            ),
            QuantError::PartialElements {
                ty,
                elements,
                block_size,
            } => write!(
                f,
                "{elements} elements is not a whole number of {ty} blocks of {block_size}"
            ),
            QuantError::LengthMismatch {
                what,
                expected,
                actual,
            } => {
                write!(f, "{what} has length {actual}, expected {expected}")
            }
            QuantError::IncompatibleTypes { first, other } => write!(
                f,
                "matrices of types {first} and {other} cannot share one quantized input"
            ),
            QuantError::BadShape { what, value, limit } => {
                write!(f, "{what} is {value}, out of range (limit {limit})")
            }
        }
    }
}

impl std::error::Error for QuantError {}
