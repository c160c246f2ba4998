//! The native LLM runtime: models, KV cache, sampler chain, sessions and generation.
