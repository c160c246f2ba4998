//! The native LLM runtime: models, KV cache, sampler chain, sessions and generation.

pub mod error;
pub mod kv_cache;
pub mod rng;
pub mod sampling;
pub mod stop;

pub use error::{Result, RuntimeError};
