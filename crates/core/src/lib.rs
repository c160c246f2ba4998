//! Tensor core: dtypes, storage, strided views with PyTorch semantics, ops and CPU kernels.
//!
//! `kernels` holds the slice-level hot kernels (matmul/gemv, norms, softmax, rope, attention,
//! casts) with run-time CPU-feature dispatch; the tensor API and the LLM runtime both call them.

pub mod kernels;
