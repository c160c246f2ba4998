//! Tensor core: dtypes, storage, strided views with PyTorch semantics, ops and CPU kernels.
//!
//! `kernels` holds the slice-level hot kernels (matmul/gemv, norms, softmax, rope, attention,
//! casts) with run-time CPU-feature dispatch; the tensor API and the LLM runtime both call them.
//!
//! Design: a [`Tensor`] is an `Arc`-shared typed [`storage::Buffer`] plus a [`layout::Layout`]
//! (sizes, strides, offset). Views share storage; every op reads its operands through one
//! strided iterator ([`layout::for_each_offsets`]) and writes a fresh contiguous result, so
//! in-place ops are "compute into a temporary, then copy through the view".

pub mod complex;
pub mod dtype;
pub mod error;
pub mod kernels;
pub mod layout;
pub mod ops;
pub mod random;
pub mod storage;
pub mod tensor;
pub mod torch_random;

pub use complex::{Cf32, Cf64, Complex};
pub use dtype::{
    check_promotable, promote_types, result_type, DType, Device, OperandKind, Scalar, ALL_DTYPES,
    BAREBONES_UNSIGNED, COMPLEX_DTYPES, DEFAULT_FLOAT,
};
pub use error::{Error, Result};
pub use ops::creation::{
    arange, empty, empty_like, eye, full, full_like, linspace, ones, ones_like, zeros, zeros_like,
};
pub use ops::index::{cat, embedding, nonzero, stack, SortOptions};
pub use ops::linalg::{addmm, baddbmm, linear, AddmmScale};
pub use ops::nn::{
    layer_norm, rms_norm, rotary_embedding, scaled_dot_product_attention, RopeConfig, RopeStyle,
    SdpaOptions,
};
pub use ops::pointwise::{erf, where_, GeluApproximate, Operand, RoundingMode};
pub use ops::reduce::VarOptions;
pub use random::{rand, randint, randn, Generator};
pub use storage::Element;
pub use tensor::{can_cast, result_type_of, Tensor};
