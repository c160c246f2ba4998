//! GGML tensor types: block layouts, dequantization, quantization and packed dot-product kernels.
//!
//! [`GgmlType`] is the one table of type ids, names, block sizes and byte sizes that the GGUF
//! reader validates against and the kernels dispatch on.

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
    available_kernel_paths, best_kernel_path, dequantize_row, matmul, matmul_with, supports_matmul,
    ActivationScratch, KernelPath, PackedMatrix,
};
pub use quantize::{f32_to_bf16, quantize};
