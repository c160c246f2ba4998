//! The crate's single error type. Every variant names the operation that failed and why.

use std::fmt;

/// Failure of a tensor operation; `op` is the PyTorch-style name of the operation.
#[derive(Debug, Clone, PartialEq)]
pub enum Error {
    /// Two shapes that must agree (or broadcast) do not.
    ShapeMismatch {
        op: &'static str,
        lhs: Vec<usize>,
        rhs: Vec<usize>,
        reason: String,
    },
    /// The operation does not support this dtype.
    UnsupportedDType {
        op: &'static str,
        dtype: crate::DType,
    },
    /// The operation (or the crate) refuses this device.
    UnsupportedDevice { op: &'static str, device: String },
    /// A dimension argument is outside `[-ndim, ndim)`.
    DimOutOfRange {
        op: &'static str,
        dim: i64,
        ndim: usize,
    },
    /// An index value is outside the size of the indexed dimension.
    IndexOutOfRange {
        op: &'static str,
        index: i64,
        size: usize,
    },
    /// Any other invalid argument, described in `reason`.
    InvalidArgument { op: &'static str, reason: String },
    /// A valid request torchnative does not support, with the reason.
    Unsupported { op: &'static str, reason: String },
}

/// Result alias used by every fallible function in the crate.
pub type Result<T> = std::result::Result<T, Error>;

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::ShapeMismatch {
                op,
                lhs,
                rhs,
                reason,
            } => {
                write!(
                    f,
                    "{op}: shape mismatch between {lhs:?} and {rhs:?}: {reason}"
                )
            }
            Error::UnsupportedDType { op, dtype } => {
                write!(f, "{op}: not implemented for dtype {}", dtype.name())
            }
            Error::UnsupportedDevice { op, device } => {
                write!(
                    f,
                    "{op}: unsupported device '{device}' (supported: cpu, meta)"
                )
            }
            Error::DimOutOfRange { op, dim, ndim } => {
                let (lo, hi) = if *ndim == 0 {
                    (-1, 0)
                } else {
                    (-(*ndim as i64), *ndim as i64 - 1)
                };
                write!(
                    f,
                    "{op}: dimension out of range (expected to be in range of [{lo}, {hi}], but got {dim})"
                )
            }
            Error::IndexOutOfRange { op, index, size } => {
                write!(
                    f,
                    "{op}: index {index} is out of bounds for dimension with size {size}"
                )
            }
            Error::InvalidArgument { op, reason } => write!(f, "{op}: {reason}"),
            Error::Unsupported { op, reason } => {
                write!(f, "{op} is not supported by torchnative: {reason}")
            }
        }
    }
}

impl std::error::Error for Error {}

/// An empty vector with room for `n` elements, or an error naming `op` when the allocation
/// is impossible (instead of Rust's abort on allocation failure).
pub(crate) fn reserve_vec<T>(op: &'static str, n: usize) -> Result<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| {
        invalid(
            op,
            format!(
                "cannot allocate memory for {n} elements of {} bytes",
                std::mem::size_of::<T>()
            ),
        )
    })?;
    Ok(v)
}

/// `vec![value; n]` that returns an error instead of aborting when memory is short.
pub(crate) fn filled_vec<T: Clone>(op: &'static str, n: usize, value: T) -> Result<Vec<T>> {
    let mut v = reserve_vec(op, n)?;
    v.resize(n, value);
    Ok(v)
}

/// Shorthand for an [`Error::InvalidArgument`].
pub(crate) fn invalid(op: &'static str, reason: impl Into<String>) -> Error {
    Error::InvalidArgument {
        op,
        reason: reason.into(),
    }
}
