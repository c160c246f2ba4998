//! The native LLM runtime: models, KV cache, sampler chain, sessions and generation.

mod alloc_count;
pub mod constraint;
pub mod embed;
pub mod encoder;
pub mod engine;
pub mod error;
#[doc(hidden)]
pub mod faults;
pub mod kv_cache;
mod llm;
pub mod lora;
pub mod model;
pub mod paged_kv;
pub mod rerank;
pub mod rng;
mod rope;
pub mod sampling;
pub mod speculative;
pub mod stop;
mod stream;
pub mod weights;

pub use alloc_count::{allocation_count, CountingAllocator};
pub use constraint::{Constraint, ConstraintSyntax};
pub use embed::{EmbedOptions, Embedder, Embeddings, Pooling, SentenceConfig};
pub use encoder::{Activation, EncoderArch, EncoderConfig, EncoderModel};
pub use engine::{Engine, EngineConfig, EngineDone, EngineEvent, EngineRequest, RequestId, Sink};
pub use error::{Result, RuntimeError};
pub use kv_cache::{DenseKvCache, KvCache, KvDtype, KvLayerView, KvShape};
pub use llm::{
    default_model_path, load_llm, load_llm_with_progress, load_model, torchnative_home, Completion,
    Counters, Flow, GenerationConfig, Llm, LoadOptions, Next, Session, SessionOptions, Timings,
    TokenLoop, Usage,
};
pub use lora::{ActiveLora, LoraAdapter, LoraModule};
pub use model::{DecoderModel, LogitsFor, SeqChunk, Workspace};
pub use paged_kv::{PagedKvCache, PrefixStats};
pub use rerank::{RerankOptions, RerankScores, Reranker, ScoreActivation};
pub use sampling::{SamplerChain, SamplerKind, SamplingParams};
pub use speculative::{DraftSource, SpeculativeConfig, SpeculativeStats, Speculator};
pub use stop::FinishReason;
pub use stream::TextStream;
pub use torchnative_tokenizer::ChatMessage;
pub use weights::{LoadStats, WeightFormat};
