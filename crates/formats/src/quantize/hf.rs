//! A Hugging Face safetensors checkpoint presented as a GGUF source: llama.cpp's tensor names,
//! dims and q/k row order, and GGUF metadata built from the JSON files next to the weights.
//!
//! Supported: llama / mistral (written as `llama`, as llama.cpp's converter does) / qwen2 / qwen3
//! configs (what [`DecoderConfig`] accepts), F32/F16/BF16 weights, and byte-level BPE
//! tokenizers (`tokenizer.ggml.model = gpt2`) whose pre-tokenizer is one llama.cpp names:
//! GPT-2's (`gpt-2`), SmolLM's digits + GPT-2 (`smollm`), Llama 3's split (`llama-bpe`) or
//! Qwen2's (`qwen2`). Refused with an error naming the reason: SentencePiece-style tokenizers
//! (BPE with byte fallback, Unigram: GGUF wants their scores), other pre-tokenizers, dynamic and
//! llama3 RoPE scaling (llama.cpp stores llama3 factors as a tensor), other weight dtypes.
//!
//! Metadata follows llama.cpp's converter: `{arch}.*` hyperparameters (including
//! `rope.dimension_count`, and key/value lengths when the head dim is not hidden/heads),
//! `tokenizer.ggml.{model,pre,tokens,token_type,merges}`, special token ids from
//! tokenizer_config.json (else config.json / generation_config.json), `add_bos_token`, and the
//! chat template (tokenizer_config.json, else chat_template.jinja). Token types: special added
//! tokens are control (3), other added tokens user-defined (4), the rest normal (1); ids past
//! the tokenizer up to `vocab_size` become `[PAD{id}]`, unused (5). One-dimensional tensors
//! (norms, biases) are stored as F32.

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::Value;
use torchnative_quant::GgmlType;

use super::SourceTensor;
use crate::config::{load_hf_config, Architecture, DecoderConfig, GenerationDefaults, RopeScaling};
use crate::error::{malformed, FormatError, Result};
use crate::gguf::MetadataValue;
use crate::mapped::read_text;
use crate::names::{expected_tensors, gguf_qk_rows_interleaved, hf_to_gguf, Naming};
use crate::safetensors::{Dtype, SafetensorsModel};

/// Largest tokenizer.json read (Llama 3's and Qwen's are under 12 MiB).
const MAX_TOKENIZER_BYTES: u64 = 64 << 20;

/// Llama 3's split, as its tokenizer.json spells it (the tokenizer crate's `LLAMA3_SPLIT`).
const LLAMA3_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// Qwen2's split (the tokenizer crate's `QWEN2_SPLIT`).
const QWEN2_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

struct HfTensor {
    hf_name: String,
    gguf_name: String,
    /// ggml order.
    dims: Vec<u64>,
    dtype: Dtype,
    /// Stored as (F32 for 1-D tensors).
    ty: GgmlType,
    /// Heads of the q/k row permutation, when it applies.
    permute_heads: Option<usize>,
}

pub(super) struct HfSource {
    metadata: Vec<(String, MetadataValue)>,
    checkpoint: SafetensorsModel,
    tensors: Vec<HfTensor>,
}

fn unsupported(dir: &Path, what: String) -> FormatError {
    FormatError::Unsupported(format!("{}: {what}", dir.display()))
}

fn ggml_type_of(dtype: Dtype) -> Option<GgmlType> {
    match dtype {
        Dtype::F32 => Some(GgmlType::F32),
        Dtype::F16 => Some(GgmlType::F16),
        Dtype::BF16 => Some(GgmlType::BF16),
        _ => None,
    }
}

impl HfSource {
    pub(super) fn open(dir: &Path) -> Result<HfSource> {
        let (config, generation) = load_hf_config(dir)?;
        let arch = match config.architecture {
            Architecture::Llama | Architecture::Mistral => "llama",
            Architecture::Qwen2 => "qwen2",
            Architecture::Qwen3 => "qwen3",
            other => {
                return Err(unsupported(
                    dir,
                    format!(
                        "architecture {}: no GGUF layout written for it; supported: llama, \
                         mistral, qwen2, qwen3",
                        other.model_type()
                    ),
                ))
            }
        };
        let expected = expected_tensors(&config, Naming::HuggingFace);
        let checkpoint = SafetensorsModel::open_dir(dir, Some(&expected))?;
        let permute = gguf_qk_rows_interleaved(config.architecture);
        let mut tensors = Vec::with_capacity(expected.len());
        for hf_name in &expected {
            let gguf_name = hf_to_gguf(hf_name)
                .ok_or_else(|| malformed(format!("no GGUF name for tensor '{hf_name}'")))?;
            let view = checkpoint
                .tensor(hf_name)
                .ok_or_else(|| malformed(format!("tensor '{hf_name}' missing")))?;
            let Some(ty) = ggml_type_of(view.dtype) else {
                return Err(unsupported(
                    dir,
                    format!(
                        "tensor '{hf_name}' is {}; supported: F32, F16, BF16",
                        view.dtype.name()
                    ),
                ));
            };
            let dims: Vec<u64> = view.shape.iter().rev().map(|&d| d as u64).collect();
            let ty = if dims.len() <= 1 { GgmlType::F32 } else { ty };
            let permute_heads = match hf_name.rsplit_once(".self_attn.") {
                Some((_, "q_proj.weight" | "q_proj.bias")) if permute => Some(config.n_heads),
                Some((_, "k_proj.weight" | "k_proj.bias")) if permute => Some(config.n_kv_heads),
                _ => None,
            };
            tensors.push(HfTensor {
                hf_name: hf_name.clone(),
                gguf_name,
                dims,
                dtype: view.dtype,
                ty,
                permute_heads,
            });
        }
        let mut metadata = model_metadata(dir, arch, &config)?;
        metadata.extend(tokenizer_metadata(dir, &config, &generation)?);
        Ok(HfSource {
            metadata,
            checkpoint,
            tensors,
        })
    }

    pub(super) fn metadata(&self) -> &[(String, MetadataValue)] {
        &self.metadata
    }

    pub(super) fn tensors(&self) -> Vec<SourceTensor> {
        self.tensors
            .iter()
            .map(|t| SourceTensor {
                name: t.gguf_name.clone(),
                dims: t.dims.clone(),
                ty: t.ty,
            })
            .collect()
    }

    /// Tensor `i`'s bytes as its GGUF form: 1-D tensors widened to F32, q/k rows permuted.
    pub(super) fn data(&self, i: usize) -> Result<Cow<'_, [u8]>> {
        let t = &self.tensors[i];
        let view = self
            .checkpoint
            .tensor(&t.hf_name)
            .ok_or_else(|| malformed(format!("tensor '{}' missing", t.hf_name)))?;
        let mut data = Cow::Borrowed(view.data);
        if t.ty == GgmlType::F32 && t.dtype != Dtype::F32 {
            let from = ggml_type_of(t.dtype).unwrap_or(GgmlType::F32);
            let mut f = vec![0f32; view.data.len() / t.dtype.size_bytes()];
            torchnative_quant::dequantize(from, view.data, &mut f)
                .map_err(|e| malformed(format!("tensor '{}': {e}", t.hf_name)))?;
            data = Cow::Owned(f.iter().flat_map(|v| v.to_le_bytes()).collect());
        }
        if let Some(heads) = t.permute_heads {
            data = Cow::Owned(permute_rows(&data, heads, &t.dims, &t.hf_name)?);
        }
        Ok(data)
    }

    pub(super) fn bytes_in(&self) -> u64 {
        self.tensors
            .iter()
            .filter_map(|t| self.checkpoint.tensor(&t.hf_name))
            .map(|v| v.data.len() as u64)
            .sum()
    }
}

/// llama.cpp's q/k row order for interleaved RoPE: within each head of `head_dim` rows, the
/// row for rotation pair element `(i, half)` (HF row `half * head_dim / 2 + i`) moves to
/// `2 * i + half`. Works on whole rows of any element type.
fn permute_rows(data: &[u8], heads: usize, dims: &[u64], name: &str) -> Result<Vec<u8>> {
    // A matrix permutes its rows (dims[1]); a bias vector its elements.
    let rows = dims.get(1).copied().unwrap_or(dims[0]) as usize;
    let row_bytes = data.len() / rows.max(1);
    if heads == 0 || rows % heads != 0 || (rows / heads) % 2 != 0 {
        return Err(malformed(format!(
            "tensor '{name}': {rows} rows do not split into {heads} heads of an even size"
        )));
    }
    let head_dim = rows / heads;
    let half = head_dim / 2;
    let mut out = vec![0u8; data.len()];
    for h in 0..heads {
        for i in 0..half {
            for j in 0..2 {
                let src = h * head_dim + j * half + i;
                let dst = h * head_dim + 2 * i + j;
                out[dst * row_bytes..(dst + 1) * row_bytes]
                    .copy_from_slice(&data[src * row_bytes..(src + 1) * row_bytes]);
            }
        }
    }
    Ok(out)
}

fn u32_value(v: usize) -> MetadataValue {
    MetadataValue::U32(v as u32)
}

fn model_metadata(
    dir: &Path,
    arch: &str,
    c: &DecoderConfig,
) -> Result<Vec<(String, MetadataValue)>> {
    let k = |s: &str| format!("{arch}.{s}");
    let name = dir
        .file_name()
        .map_or_else(|| "model".to_string(), |n| n.to_string_lossy().into_owned());
    let mut m = vec![
        (
            "general.architecture".to_string(),
            MetadataValue::String(arch.into()),
        ),
        (
            "general.type".to_string(),
            MetadataValue::String("model".into()),
        ),
        ("general.name".to_string(), MetadataValue::String(name)),
        (k("block_count"), u32_value(c.n_layers)),
        (k("context_length"), u32_value(c.context_length)),
        (k("embedding_length"), u32_value(c.hidden_size)),
        (k("feed_forward_length"), u32_value(c.intermediate_size)),
        (k("attention.head_count"), u32_value(c.n_heads)),
        (k("attention.head_count_kv"), u32_value(c.n_kv_heads)),
        (k("rope.freq_base"), MetadataValue::F32(c.rope_theta)),
        (
            k("attention.layer_norm_rms_epsilon"),
            MetadataValue::F32(c.norm_eps),
        ),
        (k("vocab_size"), u32_value(c.vocab_size)),
        (k("rope.dimension_count"), u32_value(c.head_dim)),
    ];
    if c.head_dim * c.n_heads != c.hidden_size {
        m.push((k("attention.key_length"), u32_value(c.head_dim)));
        m.push((k("attention.value_length"), u32_value(c.head_dim)));
    }
    if let Some(w) = c.sliding_window {
        m.push((k("attention.sliding_window"), u32_value(w)));
    }
    match &c.rope_scaling {
        None => {}
        Some(RopeScaling::Linear { factor }) => {
            m.push((
                k("rope.scaling.type"),
                MetadataValue::String("linear".into()),
            ));
            m.push((k("rope.scaling.factor"), MetadataValue::F32(*factor)));
        }
        Some(RopeScaling::Yarn {
            factor,
            original_max_position_embeddings,
            beta_fast,
            beta_slow,
            attention_factor,
            mscale: None,
            mscale_all_dim: None,
        }) => {
            m.push((k("rope.scaling.type"), MetadataValue::String("yarn".into())));
            m.push((k("rope.scaling.factor"), MetadataValue::F32(*factor)));
            m.push((
                k("rope.scaling.original_context_length"),
                u32_value(*original_max_position_embeddings),
            ));
            m.push((
                k("rope.scaling.yarn_beta_fast"),
                MetadataValue::F32(*beta_fast),
            ));
            m.push((
                k("rope.scaling.yarn_beta_slow"),
                MetadataValue::F32(*beta_slow),
            ));
            if let Some(a) = attention_factor {
                m.push((k("rope.scaling.attn_factor"), MetadataValue::F32(*a)));
            }
        }
        Some(other) => {
            return Err(unsupported(
                dir,
                format!(
                    "RoPE scaling {other:?} has no GGUF metadata form here (llama.cpp stores \
                     llama3 factors as a tensor); supported: none, linear, yarn"
                ),
            ))
        }
    }
    Ok(m)
}

/// `text` as a JSON object, or an error naming `path`.
fn json_object(path: &Path, limit: u64) -> Result<serde_json::Map<String, Value>> {
    let text = read_text(path, limit)?;
    match serde_json::from_str::<Value>(&text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(malformed(format!("{}: not a JSON object", path.display()))),
        Err(e) => Err(malformed(format!("{}: {e}", path.display()))),
    }
}

/// llama.cpp's name for a byte-level tokenizer.json pre-tokenizer, if it is one we know.
fn pre_name(pre: &Value) -> Option<&'static str> {
    let byte_level = |v: &Value, regex: bool| {
        v["type"] == "ByteLevel"
            && v["use_regex"].as_bool() == Some(regex)
            && v["add_prefix_space"].as_bool() != Some(true)
    };
    if byte_level(pre, true) {
        return Some("gpt-2");
    }
    let seq = pre["pretokenizers"]
        .as_array()
        .filter(|_| pre["type"] == "Sequence")?;
    match seq.as_slice() {
        [d, b]
            if d["type"] == "Digits" && d["individual_digits"] == true && byte_level(b, true) =>
        {
            Some("smollm")
        }
        [s, b] if s["type"] == "Split" && byte_level(b, false) => {
            match s["pattern"]["Regex"].as_str()? {
                LLAMA3_SPLIT => Some("llama-bpe"),
                QWEN2_SPLIT => Some("qwen2"),
                _ => None,
            }
        }
        _ => None,
    }
}

/// The `content` of a special-token entry in tokenizer_config.json (string or AddedToken).
fn token_content(v: Option<&Value>) -> Option<&str> {
    match v? {
        Value::String(s) => Some(s),
        Value::Object(o) => o.get("content")?.as_str(),
        _ => None,
    }
}

fn tokenizer_metadata(
    dir: &Path,
    config: &DecoderConfig,
    generation: &GenerationDefaults,
) -> Result<Vec<(String, MetadataValue)>> {
    let path = dir.join("tokenizer.json");
    if !path.is_file() {
        return Err(FormatError::NotFound(format!(
            "{}: the GGUF vocabulary is built from it",
            path.display()
        )));
    }
    let tok = json_object(&path, MAX_TOKENIZER_BYTES)?;
    let bad = |what: String| unsupported(&path, what);
    let model = tok
        .get("model")
        .ok_or_else(|| malformed(format!("{}: no \"model\"", path.display())))?;
    if model["type"] != "BPE" || model["byte_fallback"] == true {
        return Err(bad(format!(
            "tokenizer model {} (byte_fallback {}); only byte-level BPE converts (SentencePiece-style \
             vocabularies need scores that tokenizer.json does not carry)",
            model["type"], model["byte_fallback"]
        )));
    }
    let pre_tok = tok.get("pre_tokenizer").unwrap_or(&Value::Null);
    let pre = pre_name(pre_tok).ok_or_else(|| {
        bad(format!(
            "pre-tokenizer {pre_tok} is not one llama.cpp names here; supported: GPT-2 \
             ByteLevel (gpt-2), Digits + ByteLevel (smollm), Llama 3 and Qwen2 splits"
        ))
    })?;
    match tok.get("normalizer") {
        None | Some(Value::Null) => {}
        Some(n) if n["type"] == "NFC" => {}
        Some(n) => return Err(bad(format!("normalizer {n}; supported: none, NFC"))),
    }

    // id -> (token, added, special)
    let n_vocab = config.vocab_size;
    let mut by_id: Vec<Option<(String, bool, bool)>> = vec![None; n_vocab];
    let mut put = |id: u64, token: &str, added: bool, special: bool| -> Result<()> {
        let slot = usize::try_from(id)
            .ok()
            .and_then(|i| by_id.get_mut(i))
            .ok_or_else(|| {
                malformed(format!(
                    "{}: token id {id} ('{token}') is not below config.json's vocab_size {n_vocab}",
                    path.display()
                ))
            })?;
        *slot = Some((token.to_string(), added, special));
        Ok(())
    };
    let vocab = model["vocab"]
        .as_object()
        .ok_or_else(|| malformed(format!("{}: model.vocab is not an object", path.display())))?;
    for (token, id) in vocab {
        let id = id.as_u64().ok_or_else(|| {
            malformed(format!("{}: vocab id of '{token}' is {id}", path.display()))
        })?;
        put(id, token, false, false)?;
    }
    let added = tok.get("added_tokens").and_then(Value::as_array);
    for a in added.into_iter().flatten() {
        let (Some(id), Some(content)) = (a["id"].as_u64(), a["content"].as_str()) else {
            return Err(malformed(format!(
                "{}: bad added token {a}",
                path.display()
            )));
        };
        put(id, content, true, a["special"] == true)?;
    }
    let mut ids: HashMap<&str, u32> = HashMap::new();
    let mut tokens = Vec::with_capacity(n_vocab);
    let mut types = Vec::with_capacity(n_vocab);
    for (id, entry) in by_id.iter().enumerate() {
        match entry {
            Some((t, added, special)) => {
                ids.entry(t.as_str()).or_insert(id as u32);
                tokens.push(MetadataValue::String(t.clone()));
                types.push(MetadataValue::I32(match (added, special) {
                    (true, true) => 3,
                    (true, false) => 4,
                    _ => 1,
                }));
            }
            None => {
                tokens.push(MetadataValue::String(format!("[PAD{id}]")));
                types.push(MetadataValue::I32(5));
            }
        }
    }
    let merges: Vec<MetadataValue> = model["merges"]
        .as_array()
        .ok_or_else(|| malformed(format!("{}: model.merges is not an array", path.display())))?
        .iter()
        .map(|m| match m {
            Value::String(s) => Ok(s.clone()),
            Value::Array(p) if p.len() == 2 && p.iter().all(Value::is_string) => Ok(format!(
                "{} {}",
                p[0].as_str().unwrap_or_default(),
                p[1].as_str().unwrap_or_default()
            )),
            other => Err(malformed(format!("{}: merge {other}", path.display()))),
        })
        .map(|r| r.map(MetadataValue::String))
        .collect::<Result<_>>()?;

    let cfg_path = dir.join("tokenizer_config.json");
    let tcfg = if cfg_path.is_file() {
        json_object(&cfg_path, crate::config::MAX_JSON_BYTES)?
    } else {
        serde_json::Map::new()
    };
    let special = |key: &str| -> Result<Option<u32>> {
        match token_content(tcfg.get(key)) {
            None => Ok(None),
            Some(content) => ids.get(content).copied().map(Some).ok_or_else(|| {
                malformed(format!(
                    "{}: {key} '{content}' is not in the vocabulary",
                    cfg_path.display()
                ))
            }),
        }
    };
    let bos = special("bos_token")?
        .or(config.bos_token_id)
        .or(generation.bos_token_id);
    let eos = special("eos_token")?
        .or(config.eos_token_ids.first().copied())
        .or(generation.eos_token_ids.first().copied());
    let unk = special("unk_token")?;
    let pad = special("pad_token")?
        .or(config.pad_token_id)
        .or(generation.pad_token_id);
    // BOS is added when the post-processor's single-sequence template starts with a special
    // token, unless tokenizer_config.json says otherwise.
    let template_bos = tok
        .get("post_processor")
        .map(|p| {
            let single = |p: &Value| p["single"][0].get("SpecialToken").is_some();
            match p["type"].as_str() {
                Some("TemplateProcessing") => single(p),
                Some("Sequence") => p["processors"]
                    .as_array()
                    .is_some_and(|ps| ps.iter().any(single)),
                _ => false,
            }
        })
        .unwrap_or(false);
    let add_bos = tcfg
        .get("add_bos_token")
        .and_then(Value::as_bool)
        .unwrap_or(template_bos);

    let mut m = vec![
        (
            "tokenizer.ggml.model".to_string(),
            MetadataValue::String("gpt2".into()),
        ),
        (
            "tokenizer.ggml.pre".to_string(),
            MetadataValue::String(pre.into()),
        ),
        (
            "tokenizer.ggml.tokens".to_string(),
            MetadataValue::Array(tokens),
        ),
        (
            "tokenizer.ggml.token_type".to_string(),
            MetadataValue::Array(types),
        ),
        (
            "tokenizer.ggml.merges".to_string(),
            MetadataValue::Array(merges),
        ),
    ];
    for (key, id) in [
        ("bos_token_id", bos),
        ("eos_token_id", eos),
        ("unknown_token_id", unk),
        ("padding_token_id", pad),
    ] {
        if let Some(id) = id {
            m.push((format!("tokenizer.ggml.{key}"), MetadataValue::U32(id)));
        }
    }
    m.push((
        "tokenizer.ggml.add_bos_token".to_string(),
        MetadataValue::Bool(add_bos),
    ));
    if let Some(add_eos) = tcfg.get("add_eos_token").and_then(Value::as_bool) {
        m.push((
            "tokenizer.ggml.add_eos_token".to_string(),
            MetadataValue::Bool(add_eos),
        ));
    }
    if let Some(t) = chat_template(dir, &tcfg)? {
        m.push((
            "tokenizer.chat_template".to_string(),
            MetadataValue::String(t),
        ));
    }
    Ok(m)
}

/// tokenizer_config.json's `chat_template` (a string, or the `default` of a named list), else
/// chat_template.jinja (transformers v5 saves it there).
fn chat_template(dir: &Path, tcfg: &serde_json::Map<String, Value>) -> Result<Option<String>> {
    match tcfg.get("chat_template") {
        Some(Value::String(s)) => return Ok(Some(s.clone())),
        Some(Value::Array(list)) => {
            if let Some(t) = list
                .iter()
                .find(|t| t["name"] == "default")
                .and_then(|t| t["template"].as_str())
            {
                return Ok(Some(t.to_string()));
            }
        }
        _ => {}
    }
    let jinja: PathBuf = dir.join("chat_template.jinja");
    if jinja.is_file() {
        return Ok(Some(read_text(&jinja, crate::config::MAX_JSON_BYTES)?));
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qk_rows_are_interleaved_per_head() {
        // 2 heads of 4 rows, one byte per row: HF rows 0..8.
        let data: Vec<u8> = (0..8).collect();
        let out = permute_rows(&data, 2, &[1, 8], "q").unwrap();
        // Head 0: pairs (0, 2), (1, 3) -> 0 2 1 3; head 1 likewise.
        assert_eq!(out, [0, 2, 1, 3, 4, 6, 5, 7]);
        assert!(permute_rows(&data, 3, &[1, 8], "q").is_err());
    }

    #[test]
    fn known_pre_tokenizers_are_named() {
        let bl = |r: bool| serde_json::json!({"type": "ByteLevel", "add_prefix_space": false, "use_regex": r});
        assert_eq!(pre_name(&bl(true)), Some("gpt-2"));
        let smol = serde_json::json!({"type": "Sequence", "pretokenizers": [
            {"type": "Digits", "individual_digits": true}, bl(true)]});
        assert_eq!(pre_name(&smol), Some("smollm"));
        let split = |re: &str| {
            serde_json::json!({"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": re}, "behavior": "Isolated"}, bl(false)]})
        };
        assert_eq!(pre_name(&split(LLAMA3_SPLIT)), Some("llama-bpe"));
        assert_eq!(pre_name(&split(QWEN2_SPLIT)), Some("qwen2"));
        assert_eq!(pre_name(&split("\\s+")), None);
        assert_eq!(pre_name(&Value::Null), None);
    }
}
