//! Constrained decoding: GBNF grammars, JSON schemas and regular expressions compiled to a
//! token-level mask over the vocabulary.
//!
//! The pieces:
//!
//! - [`Grammar`]: one IR for every front end, rules over Unicode scalar values.
//!   [`Grammar::from_gbnf`] (llama.cpp's format), [`Grammar::from_json_schema`] (the subset
//!   OpenAI's structured outputs accept), [`Grammar::json_object`] (JSON mode),
//!   [`Grammar::from_regex`], and [`Grammar::from_response_format`] for the OpenAI parameter.
//!   Parsers take untrusted text: every failure is an [`Error`] naming the place and the reason.
//! - [`TokenVocabulary`]: every token's bytes and the EOS ids, with a byte trie over the tokens,
//!   built once per vocabulary.
//! - [`CompiledGrammar`]: a grammar against a vocabulary, compiled once and shared (`Arc`):
//!   characters lowered to UTF-8 byte sets (so tokens that split a character just work), the
//!   expansion of every grammar position precomputed, and a shared cache of mask entries.
//! - [`Matcher`]: one request's state: [`Matcher::fill_mask`], [`Matcher::accept_token`],
//!   [`Matcher::is_accepting`], [`Matcher::rollback`].
//!
//! Why this design. A mask must not cost a vocabulary scan with a parse per token. The
//! recogniser is a pushdown automaton over bytes whose stacks share tails in an arena, expanded
//! lazily (only the alternatives that take the next byte are pushed), so a walk of the
//! vocabulary trie advances the state byte by byte and drops a whole subtree as soon as its
//! prefix is rejected. On top of that, the tokens whose fate is decided by the top few frames of
//! a stack (most of them: inside a string nearly every token is accepted whatever encloses the
//! string) are computed once per distinct top and cached in the compiled grammar; at each step
//! only the few tokens that reach below those frames are run against the real stack (XGrammar's
//! context-independent / context-dependent split), and FOLLOW sets keep that remainder small.
//! See `matcher.rs` and `program.rs`. On SmolLM2's 49152-token vocabulary a warm mask costs
//! about half a microsecond on average (`examples/mask_bench.rs`).
//!
//! ```
//! use std::sync::Arc;
//! use torchnative_constrain::{CompiledGrammar, Grammar, Matcher, TokenVocabulary};
//!
//! let tokens = ["{", "}", "\"", "a", "\":", " ", "1", "<eos>"];
//! let vocab = TokenVocabulary::new(
//!     tokens.iter().map(|t| (*t != "<eos>").then(|| t.as_bytes().to_vec())).collect(),
//!     &[7],
//! )?;
//! let grammar = Grammar::from_gbnf(r#"root ::= "{" "\"a\":" " "? [0-9] "}""#)?;
//! let compiled = Arc::new(CompiledGrammar::new(&grammar, Arc::new(vocab))?);
//! let mut m = Matcher::new(compiled);
//! for id in [0, 2, 3, 4, 6, 1] {
//!     m.accept_token(id)?;
//! }
//! assert!(m.is_accepting());
//! assert_eq!(m.allowed_tokens(), [7]);
//! # Ok::<(), torchnative_constrain::Error>(())
//! ```

//! Wiring it into generation (the vocabulary once per model, the compiled grammar once per
//! grammar, a matcher per sequence; the mask goes on the logits before any sampler, greedy
//! included):
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use torchnative_constrain::{CompiledGrammar, Grammar, Matcher, TokenVocabulary};
//! # let file = torchnative_formats::gguf::GgufFile::open(std::path::Path::new("model.gguf"))?;
//! let tokenizer = torchnative_tokenizer::Tokenizer::from_gguf(&file)?;
//! let tokens = (0..tokenizer.vocab_size() as u32)
//!     .map(|id| tokenizer.token_bytes(id).map(|b| b.map(<[u8]>::to_vec)))
//!     .collect::<Result<Vec<_>, _>>()?;
//! let vocab = Arc::new(TokenVocabulary::new(tokens, &tokenizer.eos_ids())?);
//! let format = serde_json::json!({"type": "json_object"});
//! let grammar = Grammar::from_response_format(&format)?.expect("not plain text");
//! let compiled = Arc::new(CompiledGrammar::new(&grammar, vocab.clone())?);
//! let mut matcher = Matcher::new(compiled);
//! let mut mask = vec![0u64; vocab.mask_words()];
//! # let mut logits = vec![0f32; vocab.len()];
//! # let sample = |l: &[f32]| 0u32;
//! loop {
//!     matcher.fill_mask(&mut mask);
//!     Matcher::apply_mask(&mask, &mut logits);
//!     let id = sample(&logits);
//!     matcher.accept_token(id)?;
//!     if matcher.is_terminated() {
//!         break;
//!     }
//! }
//! # Ok(())
//! # }
//! ```

mod error;
pub mod fuzzing;
mod gbnf;
mod grammar;
mod json_schema;
mod matcher;
mod program;
mod regex;
mod vocab;

pub use error::{Error, Result};
pub use grammar::{CharSet, Element, Grammar, Rule, RuleId, MAX_GRAMMAR_ELEMENTS, MAX_REPETITION};
pub use json_schema::{json_schema_to_gbnf, OrderedJson, JSON_OBJECT_GBNF};
pub use matcher::{CacheStats, CompiledGrammar, Matcher};
pub use regex::regex_to_gbnf;
pub use vocab::TokenVocabulary;
