//! GGML tensor types: block layouts, dequantization, quantization and packed dot-product kernels.
//!
//! [`GgmlType`] is the one table of type ids, names, block sizes and byte sizes that the GGUF
//! reader validates against and the kernels dispatch on.

pub mod blocks;
mod dequant;
mod error;
mod ggml_type;

pub use dequant::{dequantize, supports_dequantize};
pub use error::QuantError;
pub use ggml_type::GgmlType;
