//! Tokenizers described by GGUF metadata (`tokenizer.ggml.*`).
//!
//! A GGUF carries a vocabulary, not a tokenizer.json. Like transformers' GGUF loader we rebuild
//! the equivalent tokenizer.json in memory and load it with the `tokenizers` crate, so encoding
//! follows Hugging Face's implementation exactly once the pieces are the same.

use std::collections::{HashMap, HashSet};

use serde_json::{json, Value as Json};
use tokenizers::decoders::DecoderWrapper;
use tokenizers::models::bpe::BPE;
use tokenizers::pre_tokenizers::PreTokenizerWrapper;
use tokenizers::AddedToken;
use torchnative_formats::gguf::{GgufFile, MetadataValue};

use crate::error::{invalid, Result};
use crate::tokenizer::{Tokenizer, TokenizerConfig};

/// llama.cpp's token types (`tokenizer.ggml.token_type`).
const TOKEN_TYPE_CONTROL: i32 = 3;
const TOKEN_TYPE_USER_DEFINED: i32 = 4;

/// The tokenizer part of a GGUF's metadata, decoded into plain values.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GgufVocab {
    /// `tokenizer.ggml.model`: `gpt2` (byte-level BPE) or `llama` (SentencePiece BPE).
    pub model: String,
    /// `tokenizer.ggml.pre`: the pre-tokenizer (text split) name, for `gpt2` vocabularies.
    pub pre: Option<String>,
    /// `tokenizer.ggml.tokens`, indexed by id.
    pub tokens: Vec<String>,
    /// `tokenizer.ggml.scores` (SentencePiece merge priorities).
    pub scores: Option<Vec<f32>>,
    /// `tokenizer.ggml.token_type` (1 normal, 2 unknown, 3 control, 4 user-defined, 6 byte).
    pub token_types: Option<Vec<i32>>,
    /// `tokenizer.ggml.merges`, each `"left right"`.
    pub merges: Option<Vec<String>>,
    /// `tokenizer.ggml.bos_token_id`.
    pub bos_id: Option<u32>,
    /// `tokenizer.ggml.eos_token_id`.
    pub eos_id: Option<u32>,
    /// `tokenizer.ggml.eot_token_id` (end of turn).
    pub eot_id: Option<u32>,
    /// `tokenizer.ggml.eom_token_id` (end of message).
    pub eom_id: Option<u32>,
    /// `tokenizer.ggml.padding_token_id`.
    pub pad_id: Option<u32>,
    /// `tokenizer.ggml.unknown_token_id`.
    pub unk_id: Option<u32>,
    /// `tokenizer.ggml.add_bos_token`.
    pub add_bos: Option<bool>,
    /// `tokenizer.ggml.add_eos_token`.
    pub add_eos: Option<bool>,
    /// `tokenizer.ggml.add_space_prefix` (SentencePiece: prefix the text with a space).
    pub add_space_prefix: Option<bool>,
    /// `tokenizer.chat_template`.
    pub chat_template: Option<String>,
}

/// Llama 3's split (numbers in groups of up to three).
const LLAMA3_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// Qwen2's split (single digits).
const QWEN2_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// Pre-tokenizer names accepted in `tokenizer.ggml.pre`, for error messages.
const SUPPORTED_PRE: &str =
    "gpt2, gpt-2, default, smollm, starcoder, refact, codeshell, llama-bpe, \
     llama3, llama-v3, dbrx, smaug-bpe, falcon3, qwen2, deepseek-r1-qwen";

/// The pre-tokenizer (tokenizer.json form) for a byte-level vocabulary's `pre` name.
fn byte_level_pre_tokenizer(pre: Option<&str>) -> Result<Json> {
    let byte_level = |use_regex: bool| {
        json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true,
               "use_regex": use_regex})
    };
    let split_then_bytes = |regex: &str| {
        json!({"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": false},
            byte_level(false),
        ]})
    };
    Ok(match pre.unwrap_or("default") {
        // ByteLevel's built-in regex is GPT-2's split (contractions, letters, numbers, symbols,
        // whitespace). transformers uses it for every name it has no entry for, "default"
        // included; we follow it there (llama.cpp's "default" is a punctuation-first cascade).
        // "gpt-2" is llama.cpp's name for GPT-2's split (what its converter writes).
        "gpt2" | "gpt-2" | "default" => byte_level(true),
        // llama.cpp splits every \p{N} character off first, then applies GPT-2's split; this is
        // the Digits(individual) + ByteLevel pipeline of SmolLM's own tokenizer.json, and its
        // vocabulary has no multi-digit token. (transformers 5.x has no entry for "smollm" and
        // uses plain GPT-2, which differs around numbers: "  1" or "١٢٣".)
        "smollm" | "starcoder" | "refact" | "codeshell" => json!({
            "type": "Sequence", "pretokenizers": [
                {"type": "Digits", "individual_digits": true},
                byte_level(true),
            ]
        }),
        "llama-bpe" | "llama3" | "llama-v3" | "dbrx" | "smaug-bpe" | "falcon3" => {
            split_then_bytes(LLAMA3_SPLIT)
        }
        "qwen2" | "deepseek-r1-qwen" => split_then_bytes(QWEN2_SPLIT),
        other => {
            return Err(invalid(format!(
                "GGUF tokenizer.ggml.pre {other:?} is not supported (supported: {SUPPORTED_PRE})"
            )))
        }
    })
}

/// GPT-2's reversible byte -> printable character table.
pub(crate) fn bytes_to_unicode() -> [char; 256] {
    let mut table = ['\0'; 256];
    let mut next_unprintable = 256u32;
    for byte in 0..=255u8 {
        let printable = matches!(byte, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
        let code = if printable {
            u32::from(byte)
        } else {
            let code = next_unprintable;
            next_unprintable += 1;
            code
        };
        // Every code here is below 0x180, so always a valid char.
        table[byte as usize] = char::from_u32(code).unwrap_or('\u{FFFD}');
    }
    table
}

impl GgufVocab {
    fn token_type(&self, id: usize) -> Option<i32> {
        self.token_types
            .as_ref()
            .and_then(|types| types.get(id).copied())
    }

    fn token_text(&self, id: Option<u32>, key: &str) -> Result<Option<String>> {
        match id {
            None => Ok(None),
            Some(id) => match self.tokens.get(id as usize) {
                Some(token) => Ok(Some(token.clone())),
                None => Err(invalid(format!(
                    "GGUF tokenizer.ggml.{key} is {id}, beyond the {} tokens",
                    self.tokens.len()
                ))),
            },
        }
    }

    fn check_lengths(&self) -> Result<()> {
        if self.tokens.is_empty() {
            return Err(invalid("GGUF tokenizer.ggml.tokens is empty"));
        }
        let n = self.tokens.len();
        if let Some(types) = &self.token_types {
            if types.len() != n {
                return Err(invalid(format!(
                    "GGUF tokenizer.ggml.token_type has {} entries for {n} tokens",
                    types.len()
                )));
            }
        }
        if let Some(scores) = &self.scores {
            if scores.len() != n {
                return Err(invalid(format!(
                    "GGUF tokenizer.ggml.scores has {} entries for {n} tokens",
                    scores.len()
                )));
            }
        }
        if u32::try_from(n).is_err() {
            return Err(invalid(format!(
                "GGUF vocabulary of {n} tokens exceeds u32 ids"
            )));
        }
        Ok(())
    }

    fn config(&self) -> Result<TokenizerConfig> {
        let mut extra_eos_tokens = Vec::new();
        for (id, key) in [(self.eot_id, "eot_token_id"), (self.eom_id, "eom_token_id")] {
            if let Some(text) = self.token_text(id, key)? {
                extra_eos_tokens.push(text);
            }
        }
        Ok(TokenizerConfig {
            // transformers (like llama.cpp) adds BOS to a SentencePiece vocabulary unless told not to.
            add_bos_token: Some(self.add_bos.unwrap_or(self.model == "llama")),
            add_eos_token: Some(self.add_eos.unwrap_or(false)),
            bos_token: self.token_text(self.bos_id, "bos_token_id")?,
            eos_token: self.token_text(self.eos_id, "eos_token_id")?,
            pad_token: self.token_text(self.pad_id, "padding_token_id")?,
            unk_token: self.token_text(self.unk_id, "unknown_token_id")?,
            extra_eos_tokens,
            chat_template: self.chat_template.clone(),
        })
    }

    /// The tokens to register as added tokens: control tokens as special, user-defined ones as
    /// plain added tokens, and the named special tokens (bos/eos/unk/pad), as transformers does.
    /// `usable` filters out spellings the vocabulary cannot hold.
    fn added_tokens(
        &self,
        config: &TokenizerConfig,
        vocab: &HashMap<String, u32>,
        usable: impl Fn(&str) -> bool,
    ) -> Vec<AddedTokenSpec> {
        let mut added = Vec::new();
        let mut seen = HashSet::new();
        let mut push = |content: &str, special: bool, added: &mut Vec<AddedTokenSpec>| {
            if let Some(&id) = vocab.get(content) {
                if seen.insert(content.to_string()) {
                    added.push(AddedTokenSpec {
                        id,
                        content: content.to_string(),
                        special,
                    });
                }
            }
        };
        for (id, token) in self.tokens.iter().enumerate() {
            if self.token_type(id) == Some(TOKEN_TYPE_CONTROL) && usable(token) {
                push(token, true, &mut added);
            }
        }
        let named = [
            &config.bos_token,
            &config.eos_token,
            &config.unk_token,
            &config.pad_token,
        ];
        for token in named.into_iter().flatten() {
            push(token, true, &mut added);
        }
        for (id, token) in self.tokens.iter().enumerate() {
            if self.token_type(id) == Some(TOKEN_TYPE_USER_DEFINED) {
                push(token, false, &mut added);
            }
        }
        added
    }

    /// The equivalent Hugging Face tokenizer.json document (what transformers' GGUF converter
    /// would save).
    pub fn to_tokenizer_json(&self) -> Result<Json> {
        Ok(self.backend_spec()?.to_json())
    }

    fn backend_spec(&self) -> Result<BackendSpec> {
        self.check_lengths()?;
        let config = self.config()?;
        match self.model.as_str() {
            "gpt2" => self.byte_level_spec(&config),
            "llama" => self.sentencepiece_spec(&config),
            other => Err(invalid(format!(
                "GGUF tokenizer.ggml.model {other:?} is not supported (supported: gpt2, llama)"
            ))),
        }
    }

    fn byte_level_spec(&self, config: &TokenizerConfig) -> Result<BackendSpec> {
        let spelling = bytes_to_unicode();
        let alphabet: HashSet<char> = spelling.iter().copied().collect();
        let in_alphabet = |token: &str| token.chars().all(|c| alphabet.contains(&c));
        // Tokens written in plain text (some added tokens) are respelled in the byte alphabet,
        // as transformers does, so the BPE model sees one consistent spelling.
        let mut vocab = HashMap::with_capacity(self.tokens.len());
        for (id, token) in self.tokens.iter().enumerate() {
            let spelled = if in_alphabet(token) {
                token.clone()
            } else {
                token.bytes().map(|b| spelling[b as usize]).collect()
            };
            vocab.insert(spelled, id as u32);
        }
        let merges = self.parsed_merges()?.ok_or_else(|| {
            invalid("GGUF byte-level (gpt2) vocabulary has no tokenizer.ggml.merges")
        })?;
        let added = self.added_tokens(config, &vocab, in_alphabet);
        Ok(BackendSpec {
            vocab,
            merges,
            sentencepiece: false,
            pre_tokenizer: byte_level_pre_tokenizer(self.pre.as_deref())?,
            decoder: json!({"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true,
                            "use_regex": true}),
            added,
        })
    }

    fn sentencepiece_spec(&self, config: &TokenizerConfig) -> Result<BackendSpec> {
        let mut vocab = HashMap::with_capacity(self.tokens.len());
        for (id, token) in self.tokens.iter().enumerate() {
            vocab.insert(token.clone(), id as u32);
        }
        let merges = match self.parsed_merges()? {
            Some(merges) => merges,
            None => self.merges_from_scores(&vocab)?,
        };
        let add_space_prefix = self.add_space_prefix.unwrap_or(true);
        let mut decoders = vec![
            json!({"type": "Replace", "pattern": {"String": "\u{2581}"}, "content": " "}),
            json!({"type": "ByteFallback"}),
            json!({"type": "Fuse"}),
        ];
        if add_space_prefix {
            decoders.push(json!({"type": "Strip", "content": " ", "start": 1, "stop": 0}));
        }
        let added = self.added_tokens(config, &vocab, |_| true);
        Ok(BackendSpec {
            vocab,
            merges,
            sentencepiece: true,
            // "first": the space marker goes before the text, not after each special token.
            pre_tokenizer: json!({"type": "Metaspace", "replacement": "\u{2581}",
                "prepend_scheme": if add_space_prefix { "first" } else { "never" },
                "split": false}),
            decoder: json!({"type": "Sequence", "decoders": decoders}),
            added,
        })
    }

    fn parsed_merges(&self) -> Result<Option<Vec<(String, String)>>> {
        let Some(merges) = &self.merges else {
            return Ok(None);
        };
        let mut parsed = Vec::with_capacity(merges.len());
        for (index, merge) in merges.iter().enumerate() {
            let mut parts = merge.split(' ');
            match (parts.next(), parts.next(), parts.next()) {
                (Some(left), Some(right), None) if !left.is_empty() && !right.is_empty() => {
                    parsed.push((left.to_string(), right.to_string()))
                }
                _ => {
                    return Err(invalid(format!(
                        "GGUF tokenizer.ggml.merges[{index}] = {merge:?} is not two tokens \
                         separated by one space"
                    )))
                }
            }
        }
        Ok(Some(parsed))
    }

    /// SentencePiece files list scores, not merges: every split of a token into two vocabulary
    /// entries is a merge, ranked by the merged token's score (best first), then by the lengths
    /// of its halves, then by their ids. This is the order transformers' `generate_merges` gives.
    fn merges_from_scores(&self, vocab: &HashMap<String, u32>) -> Result<Vec<(String, String)>> {
        let scores = self.scores.as_ref().ok_or_else(|| {
            invalid("GGUF SentencePiece (llama) vocabulary has neither merges nor scores")
        })?;
        // Like a Python dict built from (token, score) pairs: first position, last score.
        let mut order: Vec<&str> = Vec::with_capacity(self.tokens.len());
        let mut score_of: HashMap<&str, f32> = HashMap::with_capacity(self.tokens.len());
        for (token, &score) in self.tokens.iter().zip(scores) {
            if score_of.insert(token.as_str(), score).is_none() {
                order.push(token.as_str());
            }
        }
        struct Candidate<'a> {
            left: &'a str,
            right: &'a str,
            score: f32,
            left_chars: usize,
            right_chars: usize,
        }
        let mut candidates: Vec<Candidate> = Vec::new();
        for token in order {
            let score = score_of[token];
            let start = candidates.len();
            for (split, _) in token.char_indices().skip(1) {
                let (left, right) = token.split_at(split);
                if vocab.contains_key(left) && vocab.contains_key(right) {
                    candidates.push(Candidate {
                        left,
                        right,
                        score,
                        left_chars: left.chars().count(),
                        right_chars: right.chars().count(),
                    });
                }
            }
            candidates[start..].sort_by_key(|c| (vocab[c.left], vocab[c.right]));
        }
        // Stable sort, descending on (score, left length, right length).
        candidates.sort_by(|a, b| {
            b.score
                .total_cmp(&a.score)
                .then(b.left_chars.cmp(&a.left_chars))
                .then(b.right_chars.cmp(&a.right_chars))
        });
        Ok(candidates
            .into_iter()
            .map(|c| (c.left.to_string(), c.right.to_string()))
            .collect())
    }
}

/// Longest token list accepted from a file (llama.cpp vocabularies are at most a few 100k).
const MAX_TOKENS: usize = 16 << 20;

impl GgufVocab {
    /// Reads the `tokenizer.*` metadata of a GGUF file. Missing optional keys stay `None`;
    /// present keys of the wrong type are an error naming the key and the type found.
    pub fn from_gguf(file: &GgufFile) -> Result<Self> {
        let reader = MetadataReader { file };
        let tokens = reader
            .string_array("tokenizer.ggml.tokens")?
            .ok_or_else(|| invalid("GGUF has no tokenizer.ggml.tokens"))?;
        let scores = reader.array("tokenizer.ggml.scores", "f32", MetadataValue::as_f32)?;
        let token_types = reader.array("tokenizer.ggml.token_type", "i32", |v| {
            v.as_i64().and_then(|i| i32::try_from(i).ok())
        })?;
        Ok(GgufVocab {
            model: reader
                .string("tokenizer.ggml.model")?
                .ok_or_else(|| invalid("GGUF has no tokenizer.ggml.model"))?,
            pre: reader.string("tokenizer.ggml.pre")?,
            tokens,
            scores,
            token_types,
            merges: reader.string_array("tokenizer.ggml.merges")?,
            bos_id: reader.id("tokenizer.ggml.bos_token_id")?,
            eos_id: reader.id("tokenizer.ggml.eos_token_id")?,
            eot_id: reader.id("tokenizer.ggml.eot_token_id")?,
            eom_id: reader.id("tokenizer.ggml.eom_token_id")?,
            pad_id: reader.id("tokenizer.ggml.padding_token_id")?,
            unk_id: reader.id("tokenizer.ggml.unknown_token_id")?,
            add_bos: reader.flag("tokenizer.ggml.add_bos_token")?,
            add_eos: reader.flag("tokenizer.ggml.add_eos_token")?,
            add_space_prefix: reader.flag("tokenizer.ggml.add_space_prefix")?,
            chat_template: reader.string("tokenizer.chat_template")?,
        })
    }
}

/// Typed access to GGUF metadata with errors that name the key.
struct MetadataReader<'a> {
    file: &'a GgufFile,
}

impl MetadataReader<'_> {
    fn wrong_type(key: &str, expected: &str, found: &MetadataValue) -> crate::Error {
        invalid(format!(
            "GGUF {key} must be {expected}, found {}",
            found.type_name()
        ))
    }

    fn string(&self, key: &str) -> Result<Option<String>> {
        match self.file.get(key) {
            None => Ok(None),
            Some(value) => value
                .as_str()
                .map(|s| Some(s.to_string()))
                .ok_or_else(|| Self::wrong_type(key, "a string", value)),
        }
    }

    fn flag(&self, key: &str) -> Result<Option<bool>> {
        match self.file.get(key) {
            None => Ok(None),
            Some(value) => value
                .as_bool()
                .map(Some)
                .ok_or_else(|| Self::wrong_type(key, "a bool", value)),
        }
    }

    fn id(&self, key: &str) -> Result<Option<u32>> {
        match self.file.get(key) {
            None => Ok(None),
            Some(value) => match value.as_u64() {
                Some(id) => u32::try_from(id)
                    .map(Some)
                    .map_err(|_| invalid(format!("GGUF {key} = {id} does not fit a u32 token id"))),
                None => Err(Self::wrong_type(key, "an unsigned integer", value)),
            },
        }
    }

    fn array<T>(
        &self,
        key: &str,
        element: &str,
        convert: impl Fn(&MetadataValue) -> Option<T>,
    ) -> Result<Option<Vec<T>>> {
        let Some(value) = self.file.get(key) else {
            return Ok(None);
        };
        let items = value
            .as_array()
            .ok_or_else(|| Self::wrong_type(key, &format!("an array of {element}"), value))?;
        if items.len() > MAX_TOKENS {
            return Err(invalid(format!(
                "GGUF {key} has {} entries, more than the limit of {MAX_TOKENS}",
                items.len()
            )));
        }
        items
            .iter()
            .enumerate()
            .map(|(index, item)| {
                convert(item).ok_or_else(|| {
                    invalid(format!(
                        "GGUF {key}[{index}] must be {element}, found {}",
                        item.type_name()
                    ))
                })
            })
            .collect::<Result<Vec<T>>>()
            .map(Some)
    }

    fn string_array(&self, key: &str) -> Result<Option<Vec<String>>> {
        self.array(key, "string", |v| v.as_str().map(str::to_string))
    }
}

/// An added token: its id in the vocabulary, text, and whether it is special.
struct AddedTokenSpec {
    id: u32,
    content: String,
    special: bool,
}

/// Everything that defines the rebuilt tokenizer; turned into tokenizer.json for export, or
/// built directly (much faster than a JSON round trip for 50k merges).
struct BackendSpec {
    vocab: HashMap<String, u32>,
    merges: Vec<(String, String)>,
    /// SentencePiece BPE: byte fallback and fused unknowns; otherwise byte-level BPE.
    sentencepiece: bool,
    pre_tokenizer: Json,
    decoder: Json,
    added: Vec<AddedTokenSpec>,
}

impl BackendSpec {
    fn to_json(&self) -> Json {
        let added: Vec<Json> = self
            .added
            .iter()
            .map(|t| {
                json!({"id": t.id, "content": t.content, "single_word": false, "lstrip": false,
                       "rstrip": false, "normalized": false, "special": t.special})
            })
            .collect();
        json!({
            "version": "1.0",
            "truncation": null,
            "padding": null,
            "added_tokens": added,
            "normalizer": null,
            "pre_tokenizer": self.pre_tokenizer,
            "post_processor": null,
            "decoder": self.decoder,
            "model": {"type": "BPE", "dropout": null, "unk_token": null,
                      "continuing_subword_prefix": null, "end_of_word_suffix": null,
                      "fuse_unk": self.sentencepiece, "byte_fallback": self.sentencepiece,
                      "ignore_merges": false, "vocab": self.vocab, "merges": self.merges},
        })
    }

    fn build(self) -> Result<tokenizers::Tokenizer> {
        let model = BPE::builder()
            .vocab_and_merges(
                self.vocab
                    .into_iter()
                    .collect::<tokenizers::models::bpe::Vocab>(),
                self.merges,
            )
            .fuse_unk(self.sentencepiece)
            .byte_fallback(self.sentencepiece)
            .build()
            .map_err(|e| {
                invalid(format!(
                    "GGUF vocabulary and merges do not form a BPE model: {e}"
                ))
            })?;
        let pre_tokenizer: PreTokenizerWrapper = serde_json::from_value(self.pre_tokenizer)
            .map_err(|e| invalid(format!("internal pre-tokenizer description rejected: {e}")))?;
        let decoder: DecoderWrapper = serde_json::from_value(self.decoder)
            .map_err(|e| invalid(format!("internal decoder description rejected: {e}")))?;
        let mut tokenizer = tokenizers::Tokenizer::new(model);
        tokenizer.with_pre_tokenizer(Some(pre_tokenizer));
        tokenizer.with_decoder(Some(decoder));
        let as_added = |special: bool| -> Vec<AddedToken> {
            self.added
                .iter()
                .filter(|t| t.special == special)
                .map(|t| AddedToken::from(t.content.clone(), special).normalized(false))
                .collect()
        };
        tokenizer.add_special_tokens(&as_added(true));
        tokenizer.add_tokens(&as_added(false));
        Ok(tokenizer)
    }
}

impl Tokenizer {
    /// Builds the tokenizer described by a GGUF file's `tokenizer.*` metadata.
    pub fn from_gguf(file: &GgufFile) -> Result<Self> {
        Self::from_gguf_vocab(&GgufVocab::from_gguf(file)?)
    }

    /// Builds the tokenizer a GGUF's `tokenizer.*` metadata describes.
    pub fn from_gguf_vocab(vocab: &GgufVocab) -> Result<Self> {
        let backend = vocab.backend_spec()?.build()?;
        // The model's embedding has one row per GGUF token, whatever duplicates the list holds.
        let vocab_size = vocab.tokens.len().max(backend.get_vocab_size(true));
        Tokenizer::from_backend(backend, vocab.config()?, vocab_size)
    }
}
