//! Sentence embeddings: a BERT-family encoder ([`crate::encoder`]) plus the tokenizer,
//! pooling and normalisation a sentence-transformers model directory describes.
//!
//! The pipeline is sentence-transformers' `encode` for a `Transformer -> Pooling
//! [-> Normalize]` model: each text is stripped of surrounding whitespace (and lowercased when
//! `sentence_bert_config.json` says `do_lower_case`), tokenized with the tokenizer's own
//! special tokens (tokenizer.json's post-processor: `[CLS] ... [SEP]` for BERT), run through
//! the encoder, pooled over its tokens as `1_Pooling/config.json` names (several modes are
//! concatenated in sentence-transformers' order: CLS, max, mean, mean/sqrt(len), last token),
//! and L2-normalised when modules.json has a `Normalize` module.
//!
//! Texts longer than `max_seq_length` tokens are an error naming the text and both lengths,
//! unless the caller asks for truncation ([`EmbedOptions::truncate`]), which cuts them as
//! sentence-transformers does (first tokens kept, special tokens kept).

use std::path::Path;

use rayon::prelude::*;
use torchnative_core::kernels;
use torchnative_tokenizer::{EncodeOptions, Tokenizer};

use crate::encoder::{EncoderConfig, EncoderModel};
use crate::error::{invalid, Result, RuntimeError};

/// One pooling mode of sentence-transformers' `Pooling` module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pooling {
    /// The first token's state (`pooling_mode_cls_token`).
    Cls,
    /// Element-wise max over the tokens (`pooling_mode_max_tokens`).
    Max,
    /// Mean over the tokens (`pooling_mode_mean_tokens`).
    Mean,
    /// Sum over the tokens divided by sqrt(token count) (`pooling_mode_mean_sqrt_len_tokens`).
    MeanSqrtLen,
    /// The last token's state (`pooling_mode_lasttoken`).
    LastToken,
}

impl Pooling {
    /// The name used on the command line and in Python (`cls`, `max`, `mean`,
    /// `mean_sqrt_len`, `last`).
    pub fn name(self) -> &'static str {
        match self {
            Pooling::Cls => "cls",
            Pooling::Max => "max",
            Pooling::Mean => "mean",
            Pooling::MeanSqrtLen => "mean_sqrt_len",
            Pooling::LastToken => "last",
        }
    }

    /// Parses [`Pooling::name`].
    pub fn from_name(name: &str) -> Result<Pooling> {
        [
            Pooling::Cls,
            Pooling::Max,
            Pooling::Mean,
            Pooling::MeanSqrtLen,
            Pooling::LastToken,
        ]
        .into_iter()
        .find(|p| p.name() == name)
        .ok_or_else(|| {
            invalid(
                "pooling",
                format!("{name:?} (expected cls, max, mean, mean_sqrt_len or last)"),
            )
        })
    }
}

/// What the sentence-transformers files say (or what a caller sets).
#[derive(Debug, Clone, PartialEq)]
pub struct SentenceConfig {
    /// Pooling modes, concatenated in this order (sentence-transformers' order when read from
    /// files). Never empty.
    pub pooling: Vec<Pooling>,
    /// L2-normalise the pooled vector (a `Normalize` module).
    pub normalize: bool,
    /// The most tokens a text may have, special tokens included.
    pub max_seq_length: usize,
    /// Lowercase texts before tokenizing.
    pub do_lower_case: bool,
}

impl SentenceConfig {
    /// Reads `modules.json`, the pooling module's `config.json` and
    /// `sentence_bert_config.json` from `dir`. Without modules.json the defaults are what
    /// sentence-transformers builds for a plain transformers model: mean pooling, no
    /// normalisation. Without a `max_seq_length`, the encoder's own position limit.
    /// Modules other than Transformer, Pooling and Normalize (e.g. Dense) are refused by name.
    pub fn from_dir(dir: &Path, encoder: &EncoderConfig) -> Result<SentenceConfig> {
        let read_json = |path: &Path| -> Result<serde_json::Value> {
            let text = std::fs::read_to_string(path).map_err(|e| load_err(dir, path, e))?;
            serde_json::from_str(&text).map_err(|e| RuntimeError::Load {
                path: dir.display().to_string(),
                reason: format!("{}: not valid JSON: {e}", path.display()),
            })
        };
        let mut config = SentenceConfig {
            pooling: vec![Pooling::Mean],
            normalize: false,
            max_seq_length: encoder.max_tokens(),
            do_lower_case: false,
        };
        let modules_path = dir.join("modules.json");
        if modules_path.is_file() {
            let modules = read_json(&modules_path)?;
            let list = modules
                .as_array()
                .ok_or_else(|| invalid("modules.json", "is not a list of modules"))?;
            let mut pooling = None;
            for (i, m) in list.iter().enumerate() {
                let ty = m.get("type").and_then(|t| t.as_str()).unwrap_or("");
                let short = ty.rsplit('.').next().unwrap_or(ty);
                let path = m.get("path").and_then(|p| p.as_str()).unwrap_or("");
                match (i, short) {
                    (0, "Transformer") => {}
                    (1, "Pooling") => {
                        if path.contains("..") || path.starts_with('/') {
                            return Err(invalid("modules.json", format!("pooling path {path:?}")));
                        }
                        pooling = Some(read_json(&dir.join(path).join("config.json"))?);
                    }
                    (i, "Normalize") if i >= 2 => config.normalize = true,
                    _ => {
                        return Err(RuntimeError::Unsupported {
                            what: format!("sentence-transformers module {i}: {ty:?}"),
                            supported: "Transformer, then Pooling, then optionally Normalize"
                                .into(),
                        })
                    }
                }
            }
            match pooling {
                Some(p) => config.pooling = pooling_modes(&p, encoder.hidden_size)?,
                None => {
                    return Err(RuntimeError::Unsupported {
                        what: "modules.json without a Pooling module".into(),
                        supported: "Transformer, then Pooling, then optionally Normalize".into(),
                    })
                }
            }
        }
        let st_path = dir.join("sentence_bert_config.json");
        if st_path.is_file() {
            let st = read_json(&st_path)?;
            if let Some(v) = st.get("max_seq_length").filter(|v| !v.is_null()) {
                let n = v.as_u64().filter(|&n| n > 0).ok_or_else(|| {
                    invalid("sentence_bert_config.json max_seq_length", format!("{v}"))
                })? as usize;
                if n > encoder.max_tokens() {
                    return Err(invalid(
                        "sentence_bert_config.json max_seq_length",
                        format!(
                            "{n} exceeds the encoder's {} positions",
                            encoder.max_tokens()
                        ),
                    ));
                }
                config.max_seq_length = n;
            }
            config.do_lower_case = st
                .get("do_lower_case")
                .and_then(|v| v.as_bool())
                .unwrap_or(false);
        }
        Ok(config)
    }
}

fn load_err(dir: &Path, path: &Path, e: std::io::Error) -> RuntimeError {
    RuntimeError::Load {
        path: dir.display().to_string(),
        reason: format!("{}: {e}", path.display()),
    }
}

/// The modes a sentence-transformers `Pooling` config turns on, in its concatenation order.
fn pooling_modes(p: &serde_json::Value, hidden: usize) -> Result<Vec<Pooling>> {
    let flag = |key: &str| p.get(key).and_then(|v| v.as_bool()).unwrap_or(false);
    if let Some(dim) = p.get("word_embedding_dimension").and_then(|v| v.as_u64()) {
        if dim as usize != hidden {
            return Err(invalid(
                "1_Pooling/config.json word_embedding_dimension",
                format!("{dim} differs from the encoder's hidden_size {hidden}"),
            ));
        }
    }
    if flag("pooling_mode_weightedmean_tokens") {
        return Err(RuntimeError::Unsupported {
            what: "pooling_mode_weightedmean_tokens".into(),
            supported: "cls, max, mean, mean_sqrt_len, lasttoken".into(),
        });
    }
    if p.get("include_prompt").and_then(|v| v.as_bool()) == Some(false) {
        return Err(RuntimeError::Unsupported {
            what: "pooling include_prompt: false".into(),
            supported: "include_prompt: true".into(),
        });
    }
    let modes: Vec<Pooling> = [
        ("pooling_mode_cls_token", Pooling::Cls),
        ("pooling_mode_max_tokens", Pooling::Max),
        ("pooling_mode_mean_tokens", Pooling::Mean),
        ("pooling_mode_mean_sqrt_len_tokens", Pooling::MeanSqrtLen),
        ("pooling_mode_lasttoken", Pooling::LastToken),
    ]
    .into_iter()
    .filter(|(key, _)| flag(key))
    .map(|(_, mode)| mode)
    .collect();
    if modes.is_empty() {
        return Err(invalid("1_Pooling/config.json", "turns on no pooling mode"));
    }
    Ok(modes)
}

/// Options of one [`Embedder::embed`] call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EmbedOptions {
    /// Cut texts longer than `max_seq_length` tokens (keeping the special tokens), as
    /// sentence-transformers does. Default false: such a text is an error.
    pub truncate: bool,
}

/// Embeddings of a batch: `count` rows of `dim` values, row-major.
#[derive(Debug, Clone, PartialEq)]
pub struct Embeddings {
    /// Values per embedding.
    pub dim: usize,
    /// `texts x dim` values.
    pub data: Vec<f32>,
    /// Tokens each text had (after any truncation), special tokens included.
    pub token_counts: Vec<usize>,
}

impl Embeddings {
    /// Embedding `i`.
    pub fn row(&self, i: usize) -> &[f32] {
        &self.data[i * self.dim..(i + 1) * self.dim]
    }

    /// Number of embeddings.
    pub fn len(&self) -> usize {
        self.token_counts.len()
    }

    /// No embeddings.
    pub fn is_empty(&self) -> bool {
        self.token_counts.is_empty()
    }
}

/// A sentence-embedding model: encoder + tokenizer + pooling. Immutable, `Send + Sync`.
#[derive(Debug)]
pub struct Embedder {
    model: EncoderModel,
    tokenizer: Tokenizer,
    sentence: SentenceConfig,
    /// Token ids the tokenizer puts before / after a text's own tokens.
    specials: (usize, usize),
}

impl Embedder {
    /// Loads a model directory: config.json, model.safetensors, tokenizer.json (+
    /// tokenizer_config.json), and the sentence-transformers files when present. Everything is
    /// checked here, before any text is embedded.
    pub fn load(dir: &Path) -> Result<Embedder> {
        if !dir.is_dir() {
            return Err(RuntimeError::Load {
                path: dir.display().to_string(),
                reason: "not a directory (expected config.json, model.safetensors, \
                         tokenizer.json)"
                    .into(),
            });
        }
        let model = EncoderModel::load(dir)?;
        let sentence = SentenceConfig::from_dir(dir, model.config())?;
        let tokenizer_json = dir.join("tokenizer.json");
        if !tokenizer_json.is_file() {
            return Err(RuntimeError::Load {
                path: dir.display().to_string(),
                reason: format!("{} is missing", tokenizer_json.display()),
            });
        }
        let config_json = dir.join("tokenizer_config.json");
        let tokenizer = Tokenizer::from_files(
            &tokenizer_json,
            config_json.is_file().then_some(config_json.as_path()),
        )
        .map_err(|e| RuntimeError::Load {
            path: dir.display().to_string(),
            reason: e.to_string(),
        })?;
        Self::new(model, tokenizer, sentence)
    }

    /// Assembles an embedder from its parts (checks that the tokenizer's ids fit the model).
    pub fn new(
        model: EncoderModel,
        tokenizer: Tokenizer,
        sentence: SentenceConfig,
    ) -> Result<Self> {
        if sentence.pooling.is_empty() {
            return Err(invalid("pooling", "no pooling mode"));
        }
        if sentence.max_seq_length == 0 || sentence.max_seq_length > model.config().max_tokens() {
            return Err(invalid(
                "max_seq_length",
                format!(
                    "{} is outside 1..={} (the encoder's positions)",
                    sentence.max_seq_length,
                    model.config().max_tokens()
                ),
            ));
        }
        if tokenizer.vocab_size() > model.config().vocab_size {
            return Err(invalid(
                "tokenizer",
                format!(
                    "its {} tokens exceed the model's vocab_size {}",
                    tokenizer.vocab_size(),
                    model.config().vocab_size
                ),
            ));
        }
        let with = tokenizer
            .encode(
                "a",
                EncodeOptions {
                    add_special_tokens: true,
                    parse_special: false,
                },
            )
            .map_err(|e| RuntimeError::Text(e.to_string()))?;
        let without = tokenizer
            .encode(
                "a",
                EncodeOptions {
                    add_special_tokens: false,
                    parse_special: false,
                },
            )
            .map_err(|e| RuntimeError::Text(e.to_string()))?;
        let before = (0..=with.len().saturating_sub(without.len()))
            .find(|&k| with[k..].starts_with(&without))
            .ok_or_else(|| invalid("tokenizer", "its post-processor changes the text's tokens"))?;
        let specials = (before, with.len() - without.len() - before);
        Ok(Embedder {
            model,
            tokenizer,
            sentence,
            specials,
        })
    }

    /// The encoder.
    pub fn model(&self) -> &EncoderModel {
        &self.model
    }

    /// The tokenizer.
    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// Pooling, normalisation and length limit in use.
    pub fn sentence_config(&self) -> &SentenceConfig {
        &self.sentence
    }

    /// Values per embedding.
    pub fn dim(&self) -> usize {
        self.model.config().hidden_size * self.sentence.pooling.len()
    }

    /// The token ids each text is embedded from (special tokens added), with the length rule
    /// of `options`: a text over `max_seq_length` tokens is an error naming its index and both
    /// lengths, unless `options.truncate`.
    pub fn tokenize(&self, texts: &[&str], options: &EmbedOptions) -> Result<Vec<Vec<u32>>> {
        let prepared: Vec<String> = texts
            .iter()
            .map(|t| {
                let t = t.trim();
                if self.sentence.do_lower_case {
                    t.to_lowercase()
                } else {
                    t.to_string()
                }
            })
            .collect();
        let refs: Vec<&str> = prepared.iter().map(String::as_str).collect();
        let encode = EncodeOptions {
            add_special_tokens: true,
            parse_special: true,
        };
        let mut ids = self
            .tokenizer
            .encode_batch(&refs, encode)
            .map_err(|e| RuntimeError::Text(e.to_string()))?;
        let max = self.sentence.max_seq_length;
        let (before, after) = self.specials;
        for (i, t) in ids.iter_mut().enumerate() {
            if t.len() <= max {
                continue;
            }
            if !options.truncate {
                return Err(invalid(
                    format!("text {i}"),
                    format!(
                        "{} tokens exceed max_seq_length {max} (pass truncate to cut it to \
                         the first {max})",
                        t.len()
                    ),
                ));
            }
            let keep = max.saturating_sub(before + after);
            let tail: Vec<u32> = t[t.len() - after..].to_vec();
            t.truncate(before + keep);
            t.extend(tail);
        }
        Ok(ids)
    }

    /// Embeds texts (one row each). Every check (lengths, ids) happens before the forward
    /// pass; a text's embedding does not depend on the rest of the batch.
    pub fn embed(&self, texts: &[&str], options: &EmbedOptions) -> Result<Embeddings> {
        if texts.is_empty() {
            return Ok(Embeddings {
                dim: self.dim(),
                data: Vec::new(),
                token_counts: Vec::new(),
            });
        }
        let ids = self.tokenize(texts, options)?;
        self.embed_tokens(&ids)
    }

    /// Embeds texts given as token ids (special tokens already in place). Each must be
    /// non-empty, at most `max_seq_length` long and within the vocabulary.
    pub fn embed_tokens(&self, ids: &[Vec<u32>]) -> Result<Embeddings> {
        let max = self.sentence.max_seq_length;
        if let Some((i, t)) = ids.iter().enumerate().find(|(_, t)| t.len() > max) {
            return Err(invalid(
                format!("text {i}"),
                format!("{} tokens exceed max_seq_length {max}", t.len()),
            ));
        }
        let refs: Vec<&[u32]> = ids.iter().map(Vec::as_slice).collect();
        let hidden = self.model.forward(&refs)?;
        let h = self.model.config().hidden_size;
        let dim = self.dim();
        let mut data = vec![0f32; ids.len() * dim];
        let mut start = 0;
        let jobs: Vec<(usize, usize)> = ids
            .iter()
            .map(|t| {
                let s = start;
                start += t.len();
                (s, t.len())
            })
            .collect();
        data.par_chunks_mut(dim)
            .zip(jobs)
            .for_each(|(out, (s, n))| {
                let states = &hidden[s * h..(s + n) * h];
                for (mode, o) in self.sentence.pooling.iter().zip(out.chunks_mut(h)) {
                    pool(*mode, states, h, o);
                }
                if self.sentence.normalize {
                    l2_normalize(out);
                }
            });
        Ok(Embeddings {
            dim,
            data,
            token_counts: ids.iter().map(Vec::len).collect(),
        })
    }
}

/// Sets the kernel pool's thread count, process-wide (what `LoadOptions::threads` does for
/// decoders); embeddings do not depend on it.
pub fn set_threads(n: usize) -> Result<()> {
    kernels::set_num_threads(n).map_err(|e| invalid("threads", e.to_string()))
}

/// One pooling mode over a text's `n x h` token states (`n >= 1`), as sentence-transformers
/// computes it: sums in token order, then the division.
fn pool(mode: Pooling, states: &[f32], h: usize, out: &mut [f32]) {
    let n = states.len() / h;
    match mode {
        Pooling::Cls => out.copy_from_slice(&states[..h]),
        Pooling::LastToken => out.copy_from_slice(&states[(n - 1) * h..]),
        Pooling::Max => {
            out.copy_from_slice(&states[..h]);
            for row in states.chunks_exact(h).skip(1) {
                for (o, &v) in out.iter_mut().zip(row) {
                    *o = o.max(v);
                }
            }
        }
        Pooling::Mean | Pooling::MeanSqrtLen => {
            out.fill(0.0);
            for row in states.chunks_exact(h) {
                kernels::add_inplace_f32(out, row);
            }
            let d = match mode {
                Pooling::Mean => n as f32,
                _ => (n as f32).sqrt(),
            };
            out.iter_mut().for_each(|o| *o /= d);
        }
    }
}

/// `x / max(||x||_2, 1e-12)` (torch's `F.normalize`).
fn l2_normalize(x: &mut [f32]) {
    let norm = x
        .iter()
        .map(|v| (*v as f64) * (*v as f64))
        .sum::<f64>()
        .sqrt() as f32;
    let d = norm.max(1e-12);
    x.iter_mut().for_each(|v| *v /= d);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedder_is_send_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<Embedder>();
    }

    #[test]
    fn pooling_modes_follow_sentence_transformers() {
        let p: serde_json::Value = serde_json::from_str(
            r#"{"word_embedding_dimension": 4, "pooling_mode_cls_token": true,
                "pooling_mode_mean_tokens": true, "pooling_mode_lasttoken": true}"#,
        )
        .unwrap();
        assert_eq!(
            pooling_modes(&p, 4).unwrap(),
            [Pooling::Cls, Pooling::Mean, Pooling::LastToken]
        );
        assert!(pooling_modes(&p, 5)
            .unwrap_err()
            .to_string()
            .contains("hidden_size 5"));
        let none: serde_json::Value = serde_json::from_str("{}").unwrap();
        assert!(pooling_modes(&none, 4).is_err());
        let states = [1.0, -2.0, 3.0, 4.0, 5.0, 0.0];
        let mut out = [0.0; 2];
        for (mode, want) in [
            (Pooling::Cls, [1.0, -2.0]),
            (Pooling::LastToken, [5.0, 0.0]),
            (Pooling::Max, [5.0, 4.0]),
            (Pooling::Mean, [3.0, 2.0 / 3.0]),
            (Pooling::MeanSqrtLen, [9.0 / 3f32.sqrt(), 2.0 / 3f32.sqrt()]),
        ] {
            pool(mode, &states, 2, &mut out);
            assert_eq!(out, want, "{mode:?}");
            assert_eq!(Pooling::from_name(mode.name()).unwrap(), mode);
        }
        let mut v = [3.0, 4.0];
        l2_normalize(&mut v);
        assert_eq!(v, [0.6, 0.8]);
    }
}
