//! The [`Tokenizer`]: text <-> token ids through the `tokenizers` crate, with the BOS/EOS and
//! special-token handling transformers layers on top of it.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use serde_json::Value as Json;

use crate::error::{invalid, read_file, Error, Result};
use crate::pieces::PieceTable;

/// How [`Tokenizer::encode`] treats special tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EncodeOptions {
    /// Add the tokens the tokenizer adds around a sequence (e.g. BOS), as transformers'
    /// `add_special_tokens=True` does.
    pub add_special_tokens: bool,
    /// Recognise special-token strings such as `<|im_start|>` in the text as their single token.
    /// When false they are tokenized as plain text (transformers' `split_special_tokens=True`);
    /// non-special added tokens are still matched whole, as in llama.cpp.
    pub parse_special: bool,
}

impl Default for EncodeOptions {
    fn default() -> Self {
        EncodeOptions {
            add_special_tokens: true,
            parse_special: true,
        }
    }
}

/// Two texts encoded as one sequence ([`Tokenizer::encode_pair`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PairEncoding {
    /// Token ids, special tokens included.
    pub ids: Vec<u32>,
    /// Per token: 0 for the first text's segment, 1 for the second's (as the template says).
    pub type_ids: Vec<u32>,
}

/// How [`Tokenizer::decode`] renders ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DecodeOptions {
    /// Leave special tokens (e.g. `<|im_end|>`) out of the text.
    pub skip_special_tokens: bool,
}

/// Settings that live beside the vocabulary: tokenizer_config.json, or the equivalent GGUF keys.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TokenizerConfig {
    /// Prepend the BOS token when special tokens are added. `None`: not stated.
    pub add_bos_token: Option<bool>,
    /// Append the EOS token when special tokens are added. `None`: not stated.
    pub add_eos_token: Option<bool>,
    /// The BOS token's text.
    pub bos_token: Option<String>,
    /// The EOS token's text.
    pub eos_token: Option<String>,
    /// The padding token's text.
    pub pad_token: Option<String>,
    /// The unknown token's text.
    pub unk_token: Option<String>,
    /// Further end-of-turn tokens that stop generation (GGUF `eot`/`eom` ids), as text.
    pub extra_eos_tokens: Vec<String>,
    /// The Jinja chat template.
    pub chat_template: Option<String>,
}

impl TokenizerConfig {
    /// Reads the fields this crate uses from a tokenizer_config.json document.
    pub fn from_json_str(text: &str) -> Result<Self> {
        let json: Json = serde_json::from_str(text)
            .map_err(|e| invalid(format!("tokenizer_config.json is not valid JSON: {e}")))?;
        let object = json
            .as_object()
            .ok_or_else(|| invalid("tokenizer_config.json is not a JSON object"))?;
        let flag = |key: &str| -> Result<Option<bool>> {
            match object.get(key) {
                None | Some(Json::Null) => Ok(None),
                Some(Json::Bool(b)) => Ok(Some(*b)),
                Some(other) => Err(invalid(format!(
                    "tokenizer_config.json: {key} must be a boolean, found {other}"
                ))),
            }
        };
        Ok(TokenizerConfig {
            add_bos_token: flag("add_bos_token")?,
            add_eos_token: flag("add_eos_token")?,
            bos_token: special_token_text(object.get("bos_token"), "bos_token")?,
            eos_token: special_token_text(object.get("eos_token"), "eos_token")?,
            pad_token: special_token_text(object.get("pad_token"), "pad_token")?,
            unk_token: special_token_text(object.get("unk_token"), "unk_token")?,
            extra_eos_tokens: Vec::new(),
            chat_template: chat_template_text(object.get("chat_template"))?,
        })
    }
}

/// A special token in tokenizer_config.json is either a string or an AddedToken object.
fn special_token_text(value: Option<&Json>, key: &str) -> Result<Option<String>> {
    match value {
        None | Some(Json::Null) => Ok(None),
        Some(Json::String(s)) => Ok(Some(s.clone())),
        Some(Json::Object(o)) => match o.get("content") {
            Some(Json::String(s)) => Ok(Some(s.clone())),
            _ => Err(invalid(format!(
                "tokenizer_config.json: {key} is an object without a string \"content\""
            ))),
        },
        Some(other) => Err(invalid(format!(
            "tokenizer_config.json: {key} must be a string or an object, found {other}"
        ))),
    }
}

/// `chat_template` is a string, or a list of `{name, template}` of which transformers uses "default".
fn chat_template_text(value: Option<&Json>) -> Result<Option<String>> {
    match value {
        None | Some(Json::Null) => Ok(None),
        Some(Json::String(s)) => Ok(Some(s.clone())),
        Some(Json::Array(items)) => {
            for item in items {
                if item.get("name").and_then(Json::as_str) == Some("default") {
                    if let Some(template) = item.get("template").and_then(Json::as_str) {
                        return Ok(Some(template.to_string()));
                    }
                }
            }
            Err(invalid(
                "tokenizer_config.json: chat_template is a list without a \"default\" entry",
            ))
        }
        Some(other) => Err(invalid(format!(
            "tokenizer_config.json: chat_template must be a string or a list, found {other}"
        ))),
    }
}

/// Where the tokens added around a sequence come from.
#[derive(Debug, Clone, Copy)]
enum SequenceSpecials {
    /// tokenizer_config.json (or GGUF) states add_bos/add_eos, or tokenizer.json has no
    /// post-processor: transformers then builds the template from the two flags, as we do.
    Flags { add_bos: bool, add_eos: bool },
    /// Otherwise tokenizer.json's own post-processor decides.
    PostProcessor,
}

struct Inner {
    /// Matches special-token strings in the text.
    parsing_special: tokenizers::Tokenizer,
    /// Treats special-token strings as plain text.
    literal_special: tokenizers::Tokenizer,
    vocab_size: usize,
    sequence_specials: SequenceSpecials,
    bos: Option<(String, u32)>,
    eos: Vec<(String, u32)>,
    pad: Option<(String, u32)>,
    unk: Option<(String, u32)>,
    special_ids: BTreeSet<u32>,
    chat_template: Option<String>,
    /// Per-token bytes when the decoder allows streaming by concatenation.
    pieces: Option<PieceTable>,
}

/// A loaded tokenizer. Cloning is cheap (shared, immutable); it is `Send + Sync`.
#[derive(Clone)]
pub struct Tokenizer {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer")
            .field("vocab_size", &self.inner.vocab_size)
            .field("bos", &self.inner.bos)
            .field("eos", &self.inner.eos)
            .finish_non_exhaustive()
    }
}

impl Tokenizer {
    /// Loads `tokenizer.json`, plus `tokenizer_config.json` when given (BOS/EOS flags, special
    /// tokens, chat template). A `chat_template.jinja` beside the config (or beside tokenizer.json
    /// when there is no config) supplies the chat template when the config has none.
    pub fn from_files(tokenizer_json: &Path, tokenizer_config_json: Option<&Path>) -> Result<Self> {
        let json_text = read_file(tokenizer_json)?;
        let mut config = match tokenizer_config_json {
            Some(path) => {
                TokenizerConfig::from_json_str(&read_file(path)?).map_err(|e| match e {
                    Error::InvalidTokenizer(m) => invalid(format!("{}: {m}", path.display())),
                    other => other,
                })?
            }
            None => TokenizerConfig::default(),
        };
        if config.chat_template.is_none() {
            let folder = tokenizer_config_json
                .unwrap_or(tokenizer_json)
                .parent()
                .unwrap_or(Path::new("."));
            let jinja = folder.join("chat_template.jinja");
            if jinja.is_file() {
                config.chat_template = Some(read_file(&jinja)?);
            }
        }
        Self::from_json_str(&json_text, config).map_err(|e| match e {
            Error::InvalidTokenizer(m) => invalid(format!("{}: {m}", tokenizer_json.display())),
            other => other,
        })
    }

    /// Builds a tokenizer from tokenizer.json text and its configuration.
    pub fn from_json_str(tokenizer_json: &str, config: TokenizerConfig) -> Result<Self> {
        let backend: tokenizers::Tokenizer = tokenizer_json
            .parse()
            .map_err(|e| invalid(format!("cannot load tokenizer.json: {e}")))?;
        let mut backend = backend;
        // transformers' `tokenizer(text)` turns off the truncation and padding a tokenizer.json
        // may carry (sentence-transformers files often hold `max_length: 128` and fixed padding)
        // unless the call asks for them; encoding here never truncates or pads either.
        backend
            .with_truncation(None)
            .map_err(|e| invalid(format!("cannot turn off tokenizer.json truncation: {e}")))?;
        backend.with_padding(None);
        // transformers adds named special tokens the vocabulary lacks (e.g. a new "<pad>") as
        // special added tokens with fresh ids; so do we, before counting the vocabulary.
        let named = [
            &config.bos_token,
            &config.eos_token,
            &config.unk_token,
            &config.pad_token,
        ];
        let missing: Vec<tokenizers::AddedToken> = named
            .into_iter()
            .flatten()
            .filter(|t| backend.token_to_id(t).is_none())
            .map(|t| tokenizers::AddedToken::from(t.clone(), true))
            .collect();
        backend.add_special_tokens(&missing);
        let vocab_size = backend.get_vocab_size(true);
        Self::from_backend(backend, config, vocab_size)
    }

    /// Wraps a `tokenizers` tokenizer. `vocab_size` is the bound ids are checked against.
    pub(crate) fn from_backend(
        backend: tokenizers::Tokenizer,
        config: TokenizerConfig,
        vocab_size: usize,
    ) -> Result<Self> {
        let lookup = |text: &Option<String>, what: &str| -> Result<Option<(String, u32)>> {
            match text {
                None => Ok(None),
                Some(t) => match backend.token_to_id(t) {
                    Some(id) => Ok(Some((t.clone(), id))),
                    None => Err(invalid(format!("{what} {t:?} is not in the vocabulary"))),
                    // (from_json_str has added the named tokens; GGUF ids always resolve.)
                },
            }
        };
        let bos = lookup(&config.bos_token, "bos_token")?;
        let mut eos: Vec<(String, u32)> = lookup(&config.eos_token, "eos_token")?
            .into_iter()
            .collect();
        for extra in &config.extra_eos_tokens {
            if let Some(found) = lookup(&Some(extra.clone()), "end-of-turn token")? {
                if !eos.iter().any(|(_, id)| *id == found.1) {
                    eos.push(found);
                }
            }
        }
        let pad = lookup(&config.pad_token, "pad_token")?;
        let unk = lookup(&config.unk_token, "unk_token")?;

        let explicit_flags = config.add_bos_token.is_some() || config.add_eos_token.is_some();
        let sequence_specials = if explicit_flags || backend.get_post_processor().is_none() {
            // transformers turns a flag off when its token is missing; so do we.
            SequenceSpecials::Flags {
                add_bos: config.add_bos_token.unwrap_or(false) && bos.is_some(),
                add_eos: config.add_eos_token.unwrap_or(false) && !eos.is_empty(),
            }
        } else {
            SequenceSpecials::PostProcessor
        };

        let mut special_ids: BTreeSet<u32> = backend
            .get_added_tokens_decoder()
            .iter()
            .filter(|(_, token)| token.special)
            .map(|(id, _)| *id)
            .collect();
        special_ids.extend(
            bos.iter()
                .chain(&eos)
                .chain(&pad)
                .chain(&unk)
                .map(|(_, id)| *id),
        );

        let pieces = PieceTable::build(&backend, vocab_size);
        let parsing_special = backend;
        let mut literal_special = parsing_special.clone();
        literal_special.set_encode_special_tokens(true);
        Ok(Tokenizer {
            inner: Arc::new(Inner {
                parsing_special,
                literal_special,
                vocab_size,
                sequence_specials,
                bos,
                eos,
                pad,
                unk,
                special_ids,
                chat_template: config.chat_template,
                pieces,
            }),
        })
    }

    fn backend(&self, options: EncodeOptions) -> &tokenizers::Tokenizer {
        if options.parse_special {
            &self.inner.parsing_special
        } else {
            &self.inner.literal_special
        }
    }

    /// Text -> token ids.
    pub fn encode(&self, text: &str, options: EncodeOptions) -> Result<Vec<u32>> {
        let (use_post_processor, add_bos, add_eos) = self.sequence_plan(options);
        let encoding = self
            .backend(options)
            .encode_fast(text, use_post_processor)
            .map_err(|e| Error::Backend(format!("encoding failed: {e}")))?;
        Ok(self.wrap_sequence(encoding.get_ids(), add_bos, add_eos))
    }

    /// Encodes several texts (in parallel where the backend chooses to).
    pub fn encode_batch(&self, texts: &[&str], options: EncodeOptions) -> Result<Vec<Vec<u32>>> {
        let (use_post_processor, add_bos, add_eos) = self.sequence_plan(options);
        let encodings = self
            .backend(options)
            .encode_batch_fast(texts.to_vec(), use_post_processor)
            .map_err(|e| Error::Backend(format!("batch encoding failed: {e}")))?;
        Ok(encodings
            .iter()
            .map(|encoding| self.wrap_sequence(encoding.get_ids(), add_bos, add_eos))
            .collect())
    }

    /// A pair of texts as one sequence (a cross-encoder's query and document), through
    /// tokenizer.json's pair template: the ids and each token's segment (`token_type_ids`).
    /// Special tokens in the texts are parsed. With `max_len`, a pair longer than that (special
    /// tokens included) is cut as transformers' `truncation="longest_first"` cuts it (the
    /// `tokenizers` rule: the longer text first, both to half when both are long); without it,
    /// nothing is cut. A tokenizer whose specials are added by flags rather than a
    /// post-processor has no pair template and is refused.
    pub fn encode_pair(
        &self,
        first: &str,
        second: &str,
        max_len: Option<usize>,
    ) -> Result<PairEncoding> {
        use tokenizers::utils::truncation::{
            truncate_encodings, TruncationDirection, TruncationParams, TruncationStrategy,
        };
        use tokenizers::PostProcessor as _;
        if !matches!(
            self.inner.sequence_specials,
            SequenceSpecials::PostProcessor
        ) {
            return Err(invalid(
                "pair encoding needs a post-processor with a pair template in tokenizer.json \
                 (this tokenizer adds its special tokens by flags)",
            ));
        }
        let backend = &self.inner.parsing_special;
        let encode = |text: &str| {
            backend
                .encode_fast(text, false)
                .map_err(|e| Error::Backend(format!("encoding failed: {e}")))
        };
        let (mut a, mut b) = (encode(first)?, encode(second)?);
        if let Some(max) = max_len {
            let added = backend
                .get_post_processor()
                .map_or(0, |p| p.added_tokens(true));
            let params = TruncationParams {
                max_length: max.saturating_sub(added),
                strategy: TruncationStrategy::LongestFirst,
                stride: 0,
                direction: TruncationDirection::Right,
            };
            let (ta, tb) = truncate_encodings(a, Some(b), &params)
                .map_err(|e| Error::Backend(format!("truncation failed: {e}")))?;
            a = ta;
            b = tb.expect("a pair stays a pair");
        }
        let pair = backend
            .post_process(a, Some(b), true)
            .map_err(|e| Error::Backend(format!("pair template failed: {e}")))?;
        Ok(PairEncoding {
            ids: pair.get_ids().to_vec(),
            type_ids: pair.get_type_ids().to_vec(),
        })
    }

    /// (let the backend's post-processor run, add BOS ourselves, add EOS ourselves)
    fn sequence_plan(&self, options: EncodeOptions) -> (bool, bool, bool) {
        if !options.add_special_tokens {
            return (false, false, false);
        }
        match self.inner.sequence_specials {
            SequenceSpecials::PostProcessor => (true, false, false),
            SequenceSpecials::Flags { add_bos, add_eos } => (false, add_bos, add_eos),
        }
    }

    fn wrap_sequence(&self, ids: &[u32], add_bos: bool, add_eos: bool) -> Vec<u32> {
        let mut out = Vec::with_capacity(ids.len() + 2);
        if let (true, Some((_, bos))) = (add_bos, &self.inner.bos) {
            out.push(*bos);
        }
        out.extend_from_slice(ids);
        if let (true, Some((_, eos))) = (add_eos, self.inner.eos.first()) {
            out.push(*eos);
        }
        out
    }

    /// Token ids -> text. Ids at or beyond [`vocab_size`](Self::vocab_size) are an error.
    pub fn decode(&self, ids: &[u32], options: DecodeOptions) -> Result<String> {
        self.check_ids(ids)?;
        self.inner
            .parsing_special
            .decode(ids, options.skip_special_tokens)
            .map_err(|e| Error::Backend(format!("decoding failed: {e}")))
    }

    pub(crate) fn check_ids(&self, ids: &[u32]) -> Result<()> {
        let vocab_size = self.inner.vocab_size;
        match ids.iter().find(|&&id| id as usize >= vocab_size) {
            Some(&id) => Err(Error::TokenIdOutOfRange { id, vocab_size }),
            None => Ok(()),
        }
    }

    /// The vocabulary entry for `id`, as spelled in the vocabulary (e.g. `Ġhello` in byte-level
    /// BPE, `▁hello` in SentencePiece), like transformers' `convert_ids_to_tokens`.
    pub fn token_to_piece(&self, id: u32) -> Result<String> {
        self.check_ids(&[id])?;
        self.inner
            .parsing_special
            .id_to_token(id)
            .ok_or_else(|| Error::Backend(format!("token id {id} has no vocabulary entry")))
    }

    /// The id of a vocabulary entry or added token spelled exactly `token`.
    pub fn token_id(&self, token: &str) -> Option<u32> {
        self.inner.parsing_special.token_to_id(token)
    }

    /// Number of ids the model may produce: every valid id is below this.
    pub fn vocab_size(&self) -> usize {
        self.inner.vocab_size
    }

    /// The beginning-of-sequence token id.
    pub fn bos_id(&self) -> Option<u32> {
        self.inner.bos.as_ref().map(|(_, id)| *id)
    }

    /// Ids that end generation: EOS first, then end-of-turn tokens.
    pub fn eos_ids(&self) -> Vec<u32> {
        self.inner.eos.iter().map(|(_, id)| *id).collect()
    }

    /// The padding token id.
    pub fn pad_id(&self) -> Option<u32> {
        self.inner.pad.as_ref().map(|(_, id)| *id)
    }

    /// The unknown-token id.
    pub fn unk_id(&self) -> Option<u32> {
        self.inner.unk.as_ref().map(|(_, id)| *id)
    }

    /// The BOS token's text (as chat templates see it).
    pub fn bos_token(&self) -> Option<&str> {
        self.inner.bos.as_ref().map(|(text, _)| text.as_str())
    }

    /// The EOS token's text (as chat templates see it).
    pub fn eos_token(&self) -> Option<&str> {
        self.inner.eos.first().map(|(text, _)| text.as_str())
    }

    /// The padding token's text.
    pub fn pad_token(&self) -> Option<&str> {
        self.inner.pad.as_ref().map(|(text, _)| text.as_str())
    }

    /// The unknown token's text.
    pub fn unk_token(&self) -> Option<&str> {
        self.inner.unk.as_ref().map(|(text, _)| text.as_str())
    }

    /// Ids of special tokens: those [`DecodeOptions::skip_special_tokens`] leaves out.
    pub fn special_token_ids(&self) -> &BTreeSet<u32> {
        &self.inner.special_ids
    }

    /// Whether `id` is a special token.
    pub fn is_special(&self, id: u32) -> bool {
        self.inner.special_ids.contains(&id)
    }

    pub(crate) fn pieces(&self) -> Option<&PieceTable> {
        self.inner.pieces.as_ref()
    }

    /// The chat template shipped with the tokenizer, if any.
    pub fn chat_template(&self) -> Option<&str> {
        self.inner.chat_template.as_deref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokenizer_is_send_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<Tokenizer>();
    }

    #[test]
    fn config_reads_added_token_objects_and_template_lists() {
        let config = TokenizerConfig::from_json_str(
            r#"{"add_bos_token": true, "bos_token": {"content": "<s>", "special": true},
                "eos_token": "</s>", "chat_template": [{"name": "tool_use", "template": "T"},
                {"name": "default", "template": "D"}]}"#,
        )
        .unwrap();
        assert_eq!(config.add_bos_token, Some(true));
        assert_eq!(config.add_eos_token, None);
        assert_eq!(config.bos_token.as_deref(), Some("<s>"));
        assert_eq!(config.eos_token.as_deref(), Some("</s>"));
        assert_eq!(config.chat_template.as_deref(), Some("D"));
    }

    /// A word-level tokenizer.json whose post-processor wraps a sequence in <s> ... </s>.
    const WORD_LEVEL_JSON: &str = r#"{
        "version": "1.0", "truncation": null, "padding": null,
        "added_tokens": [
            {"id": 0, "content": "<s>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
            {"id": 1, "content": "</s>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}
        ],
        "normalizer": null,
        "pre_tokenizer": {"type": "Whitespace"},
        "post_processor": {"type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "</s>", "type_id": 0}}],
            "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {"<s>": {"id": "<s>", "ids": [0], "tokens": ["<s>"]}, "</s>": {"id": "</s>", "ids": [1], "tokens": ["</s>"]}}},
        "decoder": null,
        "model": {"type": "WordLevel", "vocab": {"<s>": 0, "</s>": 1, "hi": 2, "there": 3, "[UNK]": 4}, "unk_token": "[UNK]"}
    }"#;

    /// tokenizer.json's own truncation and padding (sentence-transformers files carry both) are
    /// ignored, as transformers' `tokenizer(text)` ignores them.
    #[test]
    fn tokenizer_json_truncation_and_padding_are_not_applied() {
        let json = WORD_LEVEL_JSON.replace(
            r#""truncation": null, "padding": null"#,
            r#""truncation": {"direction": "Right", "max_length": 3, "strategy": "LongestFirst", "stride": 0},
               "padding": {"strategy": {"Fixed": 8}, "direction": "Right", "pad_to_multiple_of": null,
                           "pad_id": 4, "pad_type_id": 0, "pad_token": "[UNK]"}"#,
        );
        assert!(json.contains("Fixed"));
        let tokenizer = Tokenizer::from_json_str(&json, TokenizerConfig::default()).unwrap();
        let with = EncodeOptions::default();
        assert_eq!(
            tokenizer.encode("hi there hi there", with).unwrap(),
            [0, 2, 3, 2, 3, 1]
        );
        assert_eq!(
            tokenizer
                .encode_batch(&["hi", "there hi there"], with)
                .unwrap(),
            [vec![0, 2, 1], vec![0, 3, 2, 3, 1]]
        );
    }

    #[test]
    fn sequence_specials_follow_transformers_rules() {
        let with = EncodeOptions::default();
        let without = EncodeOptions {
            add_special_tokens: false,
            parse_special: true,
        };
        // No flags in the config: tokenizer.json's post-processor decides.
        let plain = Tokenizer::from_json_str(WORD_LEVEL_JSON, TokenizerConfig::default()).unwrap();
        assert_eq!(plain.encode("hi there", with).unwrap(), [0, 2, 3, 1]);
        assert_eq!(plain.encode("hi there", without).unwrap(), [2, 3]);
        // A flag stated in the config replaces the post-processor (transformers rebuilds it).
        let bos_only = TokenizerConfig {
            add_bos_token: Some(true),
            bos_token: Some("<s>".into()),
            eos_token: Some("</s>".into()),
            ..TokenizerConfig::default()
        };
        let tokenizer = Tokenizer::from_json_str(WORD_LEVEL_JSON, bos_only.clone()).unwrap();
        assert_eq!(tokenizer.encode("hi there", with).unwrap(), [0, 2, 3]);
        let both = TokenizerConfig {
            add_eos_token: Some(true),
            ..bos_only
        };
        let tokenizer = Tokenizer::from_json_str(WORD_LEVEL_JSON, both).unwrap();
        assert_eq!(tokenizer.encode("hi there", with).unwrap(), [0, 2, 3, 1]);
        assert_eq!(
            tokenizer.encode_batch(&["hi", "there hi"], with).unwrap(),
            [vec![0, 2, 1], vec![0, 3, 2, 1]]
        );
        // Unknown words map to the unknown token; special strings parse or not on request.
        assert_eq!(tokenizer.encode("hi <s> yo", without).unwrap(), [2, 0, 4]);
        let literal = EncodeOptions {
            add_special_tokens: false,
            parse_special: false,
        };
        // Whitespace pre-tokenization cuts a literal "<s>" into "<", "s", ">": three unknowns.
        assert_eq!(tokenizer.encode("hi <s>", literal).unwrap(), [2, 4, 4, 4]);
        assert_eq!(
            tokenizer
                .decode(
                    &[0, 2, 3, 1],
                    DecodeOptions {
                        skip_special_tokens: true
                    }
                )
                .unwrap(),
            "hi there"
        );
        let err = tokenizer
            .decode(&[5], DecodeOptions::default())
            .unwrap_err();
        assert!(
            matches!(
                err,
                Error::TokenIdOutOfRange {
                    id: 5,
                    vocab_size: 5
                }
            ),
            "{err}"
        );
        assert_eq!(
            tokenizer
                .special_token_ids()
                .iter()
                .copied()
                .collect::<Vec<_>>(),
            [0, 1]
        );
    }

    #[test]
    fn missing_special_tokens_are_added_and_bad_json_is_named() {
        let config = TokenizerConfig {
            eos_token: Some("<|eot|>".into()),
            ..TokenizerConfig::default()
        };
        let tokenizer = Tokenizer::from_json_str(WORD_LEVEL_JSON, config).unwrap();
        // Appended after the 5 vocabulary entries, as transformers does.
        assert_eq!(tokenizer.eos_ids(), [5]);
        assert_eq!(tokenizer.vocab_size(), 6);
        assert!(tokenizer.is_special(5));
        let literal = EncodeOptions {
            add_special_tokens: false,
            parse_special: true,
        };
        assert_eq!(tokenizer.encode("hi<|eot|>", literal).unwrap(), [2, 5]);
        let err = Tokenizer::from_json_str("{", TokenizerConfig::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains("tokenizer.json"), "{err}");
        let err = Tokenizer::from_files(Path::new("/nonexistent/tokenizer.json"), None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("/nonexistent/tokenizer.json"), "{err}");
    }

    #[test]
    fn config_rejects_wrong_types_by_name() {
        let err = TokenizerConfig::from_json_str(r#"{"add_bos_token": "yes"}"#).unwrap_err();
        assert!(err.to_string().contains("add_bos_token"), "{err}");
        let err = TokenizerConfig::from_json_str("[1]").unwrap_err();
        assert!(err.to_string().contains("not a JSON object"), "{err}");
    }
}
