//! Text <-> token ids: tokenizers from tokenizer.json or GGUF metadata, streaming detokenizer, chat templates.
//!
//! Encoding and decoding go through Hugging Face's `tokenizers` crate, so ids match transformers;
//! GGUF vocabularies are turned into the equivalent tokenizer.json first.

mod chat;
mod error;
mod gguf;
mod pyjson;
mod stream;
mod tokenizer;

pub use chat::{
    ChatMessage, ChatTemplate, ChatTemplateLimits, ChatTemplateOptions, ChatTemplateTokens,
};
pub use error::{Error, Result};
pub use gguf::GgufVocab;
pub use stream::StreamingDetokenizer;
pub use tokenizer::{DecodeOptions, EncodeOptions, Tokenizer, TokenizerConfig};
