//! Model files: GGUF, safetensors, Hugging Face configs and cache layout.
//!
//! Every file is untrusted input: parsers validate sizes and offsets before allocating or
//! slicing, and report problems as [`FormatError`]s that name the field, value and limit.
#![warn(missing_docs)]

pub mod config;
mod error;
#[doc(hidden)]
pub mod fuzzing;
pub mod gguf;
pub mod hub;
mod json;
mod mapped;
pub mod names;
pub mod quantize;
pub mod safetensors;

pub use error::{FormatError, Result};

pub use config::{Activation, Architecture, DecoderConfig, GenerationDefaults, RopeScaling};
pub use hub::{resolve_model, ModelLocation};
