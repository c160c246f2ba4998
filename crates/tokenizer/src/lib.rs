//! Text <-> token ids: tokenizers from tokenizer.json or GGUF metadata, streaming detokenizer, chat templates.
//!
//! Encoding and decoding go through Hugging Face's `tokenizers` crate, so ids match transformers;
//! GGUF vocabularies are turned into the equivalent tokenizer.json first.
//!
//! ```no_run
//! use std::path::Path;
//! use torchnative_formats::gguf::GgufFile;
//! use torchnative_tokenizer::{
//!     ChatMessage, ChatTemplate, ChatTemplateOptions, DecodeOptions, EncodeOptions, StreamingDetokenizer,
//!     Tokenizer,
//! };
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let file = GgufFile::open(Path::new("SmolLM2-135M-Instruct.Q4_1.gguf"))?;
//! let tokenizer = Tokenizer::from_gguf(&file)?;
//! let template = ChatTemplate::from_tokenizer(&tokenizer).ok_or("no chat template")??;
//! let prompt = template.render(
//!     &[ChatMessage::new("user", "Hi!")],
//!     &ChatTemplateOptions { add_generation_prompt: true, ..Default::default() },
//! )?;
//! // A rendered template already holds its special tokens: add none, but parse them.
//! let ids = tokenizer.encode(&prompt, EncodeOptions { add_special_tokens: false, parse_special: true })?;
//! let mut stream = StreamingDetokenizer::new(tokenizer.clone(), DecodeOptions { skip_special_tokens: true });
//! for &id in &ids {
//!     if let Some(text) = stream.push(id)? {
//!         print!("{text}");
//!     }
//! }
//! if let Some(rest) = stream.finish()? {
//!     print!("{rest}");
//! }
//! # Ok(())
//! # }
//! ```

mod chat;
mod error;
mod gguf;
mod pieces;
mod pyjson;
mod stream;
mod tokenizer;

pub use chat::{
    ChatMessage, ChatTemplate, ChatTemplateLimits, ChatTemplateOptions, ChatTemplateTokens,
};
pub use error::{Error, Result};
pub use gguf::GgufVocab;
pub use stream::StreamingDetokenizer;
pub use tokenizer::{DecodeOptions, EncodeOptions, PairEncoding, Tokenizer, TokenizerConfig};
