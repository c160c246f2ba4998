//! GGML tensor types: block layouts, dequantization, quantization and packed dot-product kernels.
//!
//! [`GgmlType`] is the one table of type ids, names, block sizes and byte sizes that the GGUF
//! reader validates against and the kernels dispatch on.

mod ggml_type;

pub use ggml_type::GgmlType;
