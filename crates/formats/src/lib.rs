//! Model files: GGUF, safetensors, Hugging Face configs and cache layout.
//!
//! Every file is untrusted input: parsers validate sizes and offsets before allocating or
//! slicing, and report problems as [`FormatError`]s that name the field, value and limit.

pub mod config;
mod error;
pub mod gguf;
mod json;
mod mapped;
pub mod safetensors;

pub use error::{FormatError, Result};
