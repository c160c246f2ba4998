//! GGML tensor types: block layouts, dequantization, quantization and packed dot-product kernels.
//!
//! [`GgmlType`] is the one table of type ids, names, block sizes and byte sizes that the GGUF
//! reader validates against and the kernels dispatch on.
//!
//! - [`dequantize`]: packed blocks to f32, bit-identical to the `gguf` Python package.
//! - [`quantize`]: f32 to packed blocks (bit-identical to `gguf` where it quantizes).
//! - [`matmul`]: `y = x W^T` straight from packed weights ([`PackedMatrix`]), activations
//!   quantized on the fly into a reusable [`ActivationScratch`]; kernels picked at run time
//!   ([`best_kernel_path`]) or forced ([`matmul_with`]).
//! - [`dequantize_row`]: one packed row to f32 (embedding lookup).
//! - [`blocks`]: the `#[repr(C)]` block layouts and safe byte-slice views of them.

#![warn(missing_docs)]

pub mod blocks;
mod dequant;
mod error;
mod ggml_type;
mod matmul;
mod quantize;

pub use dequant::{dequantize, supports_dequantize};
pub use error::QuantError;
pub use ggml_type::GgmlType;
pub use matmul::{
    available_kernel_paths, best_kernel_path, dequantize_row, matmul, matmul_multi,
    matmul_multi_with, matmul_with, reserve_gemm_thread_buffers, supports_matmul,
    ActivationScratch, InterleavedMatrix, KernelPath, PackedMatrix, MAX_MULTI,
};
pub use quantize::{f32_to_bf16, quantize};
