//! BERT-family encoders (BERT, RoBERTa / XLM-RoBERTa, ModernBERT): token ids in, one hidden
//! state per token out (transformers' `last_hidden_state`). The sentence-embedding layer on top (tokenizer,
//! pooling, normalisation) is [`crate::embed`].
//!
//! The forward pass is ragged: the texts of a batch are laid end to end as rows of one matrix
//! (no padding, so no padding mask is needed), every linear layer runs once over all rows, and
//! attention runs per text over exactly that text's tokens, bidirectionally. Each row of a
//! linear layer, each LayerNorm row and each text's attention is computed by the same code
//! whatever else is in the batch, so a text's hidden states (and embedding) are the same bits
//! alone or in any batch, at any thread count.

use std::path::Path;

use rayon::prelude::*;
use torchnative_core::kernels;
use torchnative_formats::safetensors::{Dtype, SafetensorsModel, TensorView};

use crate::error::{invalid, Result, RuntimeError};

/// The encoder families this module runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EncoderArch {
    /// `model_type: "bert"`: positions 0.., token type 0.
    Bert,
    /// `model_type: "roberta"` / `"xlm-roberta"`: positions start after `pad_token_id`
    /// (`pad + 1 + index`; a token equal to the pad id gets position `pad`), token type 0.
    Roberta,
    /// `model_type: "modernbert"`: pre-norm layers, rotary positions (a global and a local base),
    /// local layers attending within a window, GeGLU feed-forward ([`ModernBertOptions`]).
    ModernBert,
}

/// What ModernBERT adds to the common fields.
#[derive(Debug, Clone, PartialEq)]
pub struct ModernBertOptions {
    /// RoPE base of the global (`full_attention`) and local (`sliding_attention`) layers.
    pub global_rope_theta: f32,
    pub local_rope_theta: f32,
    /// Per layer: whether it is local.
    pub sliding_layers: Vec<bool>,
    /// Local layers: a token attends to the tokens at most this far (`local_attention / 2`).
    pub half_window: usize,
    /// Whether LayerNorms, the attention projections and the MLP have biases.
    pub norm_bias: bool,
    pub attention_bias: bool,
    pub mlp_bias: bool,
}

/// The feed-forward activation (`hidden_act`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activation {
    /// `"gelu"`: the exact (erf) form.
    GeluErf,
    /// `"gelu_new"`, `"gelu_pytorch_tanh"`: the tanh approximation.
    GeluTanh,
    /// `"relu"`.
    Relu,
}

/// What the forward pass needs from config.json.
#[derive(Debug, Clone, PartialEq)]
pub struct EncoderConfig {
    /// Family (decides positions).
    pub arch: EncoderArch,
    /// Rows of the word embedding.
    pub vocab_size: usize,
    /// Model width.
    pub hidden_size: usize,
    /// Encoder layers.
    pub num_layers: usize,
    /// Attention heads (divides `hidden_size`).
    pub num_heads: usize,
    /// Feed-forward width.
    pub intermediate_size: usize,
    /// Rows of the position embedding.
    pub max_position_embeddings: usize,
    /// Rows of the token-type embedding (type 0 unless the caller gives segments).
    pub type_vocab_size: usize,
    /// LayerNorm epsilon.
    pub layer_norm_eps: f32,
    /// Feed-forward activation.
    pub activation: Activation,
    /// `pad_token_id` (RoBERTa positions are offset by it).
    pub pad_token_id: u32,
    /// ModernBERT's options (`None` for BERT and RoBERTa).
    pub modern: Option<ModernBertOptions>,
}

/// Upper bounds on config values, so sizes cannot overflow and a corrupt config is refused
/// before anything is allocated.
const MAX_DIM: usize = 1 << 16;
const MAX_LAYERS: usize = 1024;
const MAX_VOCAB: usize = 1 << 24;
const MAX_POSITIONS: usize = 1 << 20;

impl EncoderConfig {
    /// Parses config.json text. Unknown architectures and options this module does not run
    /// (relative position embeddings, decoder or cross-attention use) are refused by name.
    pub fn from_json_str(text: &str) -> Result<EncoderConfig> {
        let json: serde_json::Value = serde_json::from_str(text)
            .map_err(|e| invalid("config.json", format!("not valid JSON: {e}")))?;
        let obj = json
            .as_object()
            .ok_or_else(|| invalid("config.json", "not a JSON object"))?;
        let model_type = obj.get("model_type").and_then(|v| v.as_str()).unwrap_or("");
        let arch = match model_type {
            "bert" => EncoderArch::Bert,
            "roberta" | "xlm-roberta" => EncoderArch::Roberta,
            "modernbert" => EncoderArch::ModernBert,
            other => {
                return Err(RuntimeError::Unsupported {
                    what: format!("encoder model_type {other:?}"),
                    supported: "bert, roberta, xlm-roberta, modernbert".into(),
                })
            }
        };
        let modern = arch == EncoderArch::ModernBert;
        let usize_field = |key: &str, default: Option<usize>, max: usize| -> Result<usize> {
            match obj.get(key) {
                None | Some(serde_json::Value::Null) => default
                    .ok_or_else(|| invalid(format!("config.json {key}"), "missing (required)")),
                Some(v) => {
                    let n = v.as_u64().ok_or_else(|| {
                        invalid(
                            format!("config.json {key}"),
                            format!("{v} is not a non-negative integer"),
                        )
                    })?;
                    if n == 0 || n > max as u64 {
                        return Err(invalid(
                            format!("config.json {key}"),
                            format!("{n} is outside 1..={max}"),
                        ));
                    }
                    Ok(n as usize)
                }
            }
        };
        let vocab_size = usize_field("vocab_size", None, MAX_VOCAB)?;
        let hidden_size = usize_field("hidden_size", None, MAX_DIM)?;
        let num_layers = usize_field("num_hidden_layers", None, MAX_LAYERS)?;
        let num_heads = usize_field("num_attention_heads", None, MAX_DIM)?;
        let intermediate_size = usize_field("intermediate_size", None, 4 * MAX_DIM)?;
        let max_position_embeddings = usize_field(
            "max_position_embeddings",
            Some(if modern { 8192 } else { 512 }),
            MAX_POSITIONS,
        )?;
        // ModernBERT has no token types (and no table of them).
        let type_vocab_size = match modern {
            true => 0,
            false => usize_field("type_vocab_size", Some(2), MAX_DIM)?,
        };
        if hidden_size % num_heads != 0 {
            return Err(invalid(
                "config.json num_attention_heads",
                format!("{num_heads} does not divide hidden_size {hidden_size}"),
            ));
        }
        let (eps_key, act_key) = match modern {
            true => ("norm_eps", "hidden_activation"),
            false => ("layer_norm_eps", "hidden_act"),
        };
        let layer_norm_eps = match obj.get(eps_key) {
            None => match modern {
                true => 1e-5,
                false => 1e-12,
            },
            Some(v) => match v.as_f64() {
                Some(e) if e.is_finite() && e > 0.0 && e < 1.0 => e as f32,
                _ => {
                    return Err(invalid(
                        format!("config.json {eps_key}"),
                        format!("{v} is not a number in (0, 1)"),
                    ))
                }
            },
        };
        let activation = match obj.get(act_key).and_then(|v| v.as_str()) {
            None | Some("gelu") => Activation::GeluErf,
            Some("gelu_new") | Some("gelu_pytorch_tanh") => Activation::GeluTanh,
            Some("relu") => Activation::Relu,
            Some(other) => {
                return Err(RuntimeError::Unsupported {
                    what: format!("{act_key} {other:?}"),
                    supported: "gelu, gelu_new, gelu_pytorch_tanh, relu".into(),
                })
            }
        };
        match obj.get("position_embedding_type").and_then(|v| v.as_str()) {
            None | Some("absolute") => {}
            Some(other) => {
                return Err(RuntimeError::Unsupported {
                    what: format!("position_embedding_type {other:?}"),
                    supported: "absolute".into(),
                })
            }
        }
        for flag in ["is_decoder", "add_cross_attention"] {
            if obj.get(flag).and_then(|v| v.as_bool()) == Some(true) {
                return Err(RuntimeError::Unsupported {
                    what: format!("config.json {flag}: true"),
                    supported: "bidirectional encoders".into(),
                });
            }
        }
        let pad_token_id = match obj.get("pad_token_id") {
            None | Some(serde_json::Value::Null) => match arch {
                EncoderArch::Bert => 0,
                EncoderArch::Roberta => 1,
                // ModernBertConfig's default, clamped: only RoBERTa's positions use it.
                EncoderArch::ModernBert => 50283.min(vocab_size as u32 - 1),
            },
            Some(v) => match v.as_u64() {
                Some(p) if (p as usize) < vocab_size => p as u32,
                _ => {
                    return Err(invalid(
                        "config.json pad_token_id",
                        format!("{v} is not a token id below vocab_size {vocab_size}"),
                    ))
                }
            },
        };
        let modern = match modern {
            true => Some(modern_options(obj, num_layers)?),
            false => None,
        };
        let config = EncoderConfig {
            modern,
            arch,
            vocab_size,
            hidden_size,
            num_layers,
            num_heads,
            intermediate_size,
            max_position_embeddings,
            type_vocab_size,
            layer_norm_eps,
            activation,
            pad_token_id,
        };
        if config.max_tokens() == 0 {
            return Err(invalid(
                "config.json max_position_embeddings",
                format!(
                    "{max_position_embeddings} leaves no position after the RoBERTa offset \
                     (pad_token_id {pad_token_id} + 1)"
                ),
            ));
        }
        Ok(config)
    }

    /// The first position id a text uses (`pad_token_id + 1` for RoBERTa, else 0).
    pub fn position_offset(&self) -> usize {
        match self.arch {
            EncoderArch::Bert | EncoderArch::ModernBert => 0,
            EncoderArch::Roberta => self.pad_token_id as usize + 1,
        }
    }

    /// The most tokens (special tokens included) one text may have.
    pub fn max_tokens(&self) -> usize {
        self.max_position_embeddings
            .saturating_sub(self.position_offset())
    }

    /// Dimension of one attention head.
    pub fn head_dim(&self) -> usize {
        self.hidden_size / self.num_heads
    }
}

/// ModernBERT's options from config.json: the layer pattern from `layer_types` or
/// `global_attn_every_n_layers` (layer `i` global when `i % n == 0`, default 3), the window
/// from `local_attention` (default 128), the bases from `rope_parameters` (default RoPE only)
/// or `global_rope_theta` / `local_rope_theta` (defaults 160000 / 10000), the bias flags
/// (default false), as `ModernBertConfig` reads them.
fn modern_options(
    obj: &serde_json::Map<String, serde_json::Value>,
    num_layers: usize,
) -> Result<ModernBertOptions> {
    let bool_field = |key: &str| -> Result<bool> {
        match obj.get(key) {
            None | Some(serde_json::Value::Null) => Ok(false),
            Some(v) => v
                .as_bool()
                .ok_or_else(|| invalid(format!("config.json {key}"), format!("{v} is not a bool"))),
        }
    };
    let positive = |key: &str, v: &serde_json::Value| -> Result<f64> {
        match v.as_f64() {
            Some(x) if x.is_finite() && x > 0.0 => Ok(x),
            _ => Err(invalid(
                format!("config.json {key}"),
                format!("{v} is not a positive number"),
            )),
        }
    };
    let sliding_layers = match obj.get("layer_types") {
        Some(serde_json::Value::Array(types)) => {
            if types.len() != num_layers {
                return Err(invalid(
                    "config.json layer_types",
                    format!("{} entries for {num_layers} layers", types.len()),
                ));
            }
            types
                .iter()
                .map(|t| match t.as_str() {
                    Some("sliding_attention") => Ok(true),
                    Some("full_attention") => Ok(false),
                    _ => Err(RuntimeError::Unsupported {
                        what: format!("config.json layer_types entry {t}"),
                        supported: "full_attention, sliding_attention".into(),
                    }),
                })
                .collect::<Result<Vec<_>>>()?
        }
        None | Some(serde_json::Value::Null) => {
            let every = match obj.get("global_attn_every_n_layers") {
                None | Some(serde_json::Value::Null) => 3,
                Some(v) => match v.as_u64() {
                    Some(n) if n > 0 => n as usize,
                    _ => {
                        return Err(invalid(
                            "config.json global_attn_every_n_layers",
                            format!("{v} is not a positive integer"),
                        ))
                    }
                },
            };
            (0..num_layers).map(|i| i % every != 0).collect()
        }
        Some(v) => {
            return Err(invalid(
                "config.json layer_types",
                format!("{v} is not a list"),
            ))
        }
    };
    let local_attention = match obj.get("local_attention") {
        None | Some(serde_json::Value::Null) => 128,
        Some(v) => match v.as_u64() {
            Some(n) if n >= 2 && n <= MAX_POSITIONS as u64 => n as usize,
            _ => {
                return Err(invalid(
                    "config.json local_attention",
                    format!("{v} is not a window of 2..={MAX_POSITIONS} tokens"),
                ))
            }
        },
    };
    let mut theta = [160_000.0f64, 10_000.0];
    for (i, (layer_type, legacy)) in [
        ("full_attention", "global_rope_theta"),
        ("sliding_attention", "local_rope_theta"),
    ]
    .into_iter()
    .enumerate()
    {
        if let Some(v) = obj.get(legacy).filter(|v| !v.is_null()) {
            theta[i] = positive(legacy, v)?;
        }
        let params = obj
            .get("rope_parameters")
            .or_else(|| obj.get("rope_scaling"))
            .and_then(|p| p.get(layer_type));
        if let Some(p) = params.filter(|p| !p.is_null()) {
            match p.get("rope_type").and_then(|t| t.as_str()) {
                None | Some("default") => {}
                Some(other) => {
                    return Err(RuntimeError::Unsupported {
                        what: format!(
                            "config.json rope_parameters.{layer_type} rope_type {other:?}"
                        ),
                        supported: "default".into(),
                    })
                }
            }
            if let Some(v) = p.get("rope_theta").filter(|v| !v.is_null()) {
                theta[i] = positive(&format!("rope_parameters.{layer_type}.rope_theta"), v)?;
            }
        }
    }
    Ok(ModernBertOptions {
        global_rope_theta: theta[0] as f32,
        local_rope_theta: theta[1] as f32,
        sliding_layers,
        half_window: local_attention / 2,
        norm_bias: bool_field("norm_bias")?,
        attention_bias: bool_field("attention_bias")?,
        mlp_bias: bool_field("mlp_bias")?,
    })
}

struct Layer {
    /// Query, key and value projections stacked: `[3 * hidden][hidden]`, bias `[3 * hidden]`.
    qkv_w: Vec<f32>,
    qkv_b: Vec<f32>,
    attn_out_w: Vec<f32>,
    attn_out_b: Vec<f32>,
    attn_ln_w: Vec<f32>,
    attn_ln_b: Vec<f32>,
    inter_w: Vec<f32>,
    inter_b: Vec<f32>,
    out_w: Vec<f32>,
    out_b: Vec<f32>,
    out_ln_w: Vec<f32>,
    out_ln_b: Vec<f32>,
}

/// BERT and RoBERTa: absolute position and token-type embeddings, post-norm layers.
struct BertWeights {
    word: Vec<f32>,
    position: Vec<f32>,
    token_type: Vec<f32>,
    emb_ln_w: Vec<f32>,
    emb_ln_b: Vec<f32>,
    layers: Vec<Layer>,
}

/// A LayerNorm's weight and optional bias.
struct Norm {
    w: Vec<f32>,
    b: Option<Vec<f32>>,
}

/// A linear layer `[out][in]` with an optional bias.
struct Linear {
    w: Vec<f32>,
    b: Option<Vec<f32>>,
}

struct ModernLayer {
    /// `None` on layer 0 (ModernBERT's first layer reads the normed embeddings as they are).
    attn_norm: Option<Norm>,
    /// `[3 * hidden][hidden]`: query, key, value rows.
    wqkv: Linear,
    wo: Linear,
    mlp_norm: Norm,
    /// `[2 * intermediate][hidden]`: the GeGLU input rows, then the gate rows.
    wi: Linear,
    mlp_wo: Linear,
}

/// ModernBERT: token embeddings and a norm, pre-norm layers with rotary positions, a final
/// norm; the inverse frequencies of the global and local bases.
struct ModernWeights {
    word: Vec<f32>,
    emb_norm: Norm,
    layers: Vec<ModernLayer>,
    final_norm: Norm,
    global_inv_freq: Vec<f32>,
    local_inv_freq: Vec<f32>,
}

enum Weights {
    Bert(BertWeights),
    Modern(ModernWeights),
}

/// A loaded encoder (f32 weights, owned). `Send + Sync`; `forward` takes `&self`.
pub struct EncoderModel {
    config: EncoderConfig,
    weights: Weights,
}

impl std::fmt::Debug for EncoderModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EncoderModel")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// Prefixes a checkpoint's encoder tensors may carry (a bare `BertModel`, or the encoder
/// inside a task model such as `BertForMaskedLM`).
const PREFIXES: [&str; 4] = ["", "bert.", "roberta.", "model."];

impl EncoderModel {
    /// Loads `dir/config.json` and `dir/model.safetensors` (or a sharded index). Every tensor
    /// the forward pass reads must be present with its config-derived shape and a float dtype
    /// (F32/F16/BF16); all of that is checked before any weight is converted. Tensors the
    /// encoder does not use (pooler, heads, `position_ids`) are ignored.
    pub fn load(dir: &Path) -> Result<EncoderModel> {
        let load_err = |reason: String| RuntimeError::Load {
            path: dir.display().to_string(),
            reason,
        };
        let config_path = dir.join("config.json");
        let text = std::fs::read_to_string(&config_path)
            .map_err(|e| load_err(format!("{}: {e}", config_path.display())))?;
        let config = EncoderConfig::from_json_str(&text)?;
        let checkpoint =
            SafetensorsModel::open_dir(dir, None).map_err(|e| load_err(e.to_string()))?;
        Self::from_checkpoint(config, &checkpoint).map_err(|e| match e {
            RuntimeError::Load { reason, .. } => load_err(reason),
            other => other,
        })
    }

    /// Builds the model from an opened checkpoint (names with or without a `bert.` /
    /// `roberta.` prefix).
    pub fn from_checkpoint(config: EncoderConfig, ckpt: &SafetensorsModel) -> Result<Self> {
        let weights = match config.modern {
            Some(_) => Weights::Modern(load_modern(&config, ckpt)?),
            None => Weights::Bert(load_bert(&config, ckpt)?),
        };
        Ok(EncoderModel { config, weights })
    }
}

/// Every tensor of `wanted` (names after `prefix`) present with its shape and a float dtype,
/// or one error listing each problem; checked before any weight is converted.
fn check_tensors(
    ckpt: &SafetensorsModel,
    prefix: &str,
    wanted: &[(String, Vec<usize>)],
) -> Result<()> {
    let mut problems = Vec::new();
    for (name, shape) in wanted {
        let full = format!("{prefix}{name}");
        match ckpt.tensor(&full) {
            None => problems.push(format!("'{full}' is missing")),
            Some(t) if !matches!(t.dtype, Dtype::F32 | Dtype::F16 | Dtype::BF16) => {
                problems.push(format!(
                    "'{full}' has dtype {} (supported: F32, F16, BF16)",
                    t.dtype.name()
                ))
            }
            Some(t) if t.shape != shape.as_slice() => problems.push(format!(
                "'{full}' has shape {:?}, config.json implies {shape:?}",
                t.shape
            )),
            Some(_) => {}
        }
    }
    match problems.is_empty() {
        true => Ok(()),
        false => Err(RuntimeError::Load {
            path: String::new(),
            reason: problems.join("; "),
        }),
    }
}

/// The prefix under which `ckpt` holds `probe` (one of [`PREFIXES`]).
fn find_prefix(ckpt: &SafetensorsModel, probe: &str) -> Result<&'static str> {
    PREFIXES
        .iter()
        .copied()
        .find(|p| ckpt.tensor(&format!("{p}{probe}")).is_some())
        .ok_or_else(|| RuntimeError::Load {
            path: String::new(),
            reason: format!(
                "no {probe} (with prefix '', bert., roberta. or model.) in the checkpoint"
            ),
        })
}

fn load_modern(config: &EncoderConfig, ckpt: &SafetensorsModel) -> Result<ModernWeights> {
    let m = config.modern.as_ref().expect("ModernBERT options");
    let prefix = find_prefix(ckpt, "embeddings.tok_embeddings.weight")?;
    let (h, i) = (config.hidden_size, config.intermediate_size);
    let mut wanted: Vec<(String, Vec<usize>)> = vec![(
        "embeddings.tok_embeddings.weight".into(),
        vec![config.vocab_size, h],
    )];
    let norm = |wanted: &mut Vec<(String, Vec<usize>)>, name: &str| {
        wanted.push((format!("{name}.weight"), vec![h]));
        if m.norm_bias {
            wanted.push((format!("{name}.bias"), vec![h]));
        }
    };
    let linear =
        |wanted: &mut Vec<(String, Vec<usize>)>, name: &str, out: usize, inp: usize, bias: bool| {
            wanted.push((format!("{name}.weight"), vec![out, inp]));
            if bias {
                wanted.push((format!("{name}.bias"), vec![out]));
            }
        };
    norm(&mut wanted, "embeddings.norm");
    for l in 0..config.num_layers {
        let p = format!("layers.{l}.");
        if l > 0 {
            norm(&mut wanted, &format!("{p}attn_norm"));
        }
        linear(
            &mut wanted,
            &format!("{p}attn.Wqkv"),
            3 * h,
            h,
            m.attention_bias,
        );
        linear(&mut wanted, &format!("{p}attn.Wo"), h, h, m.attention_bias);
        norm(&mut wanted, &format!("{p}mlp_norm"));
        linear(&mut wanted, &format!("{p}mlp.Wi"), 2 * i, h, m.mlp_bias);
        linear(&mut wanted, &format!("{p}mlp.Wo"), h, i, m.mlp_bias);
    }
    norm(&mut wanted, "final_norm");
    check_tensors(ckpt, prefix, &wanted)?;
    let get = |name: &str| -> Vec<f32> {
        to_f32(ckpt.tensor(&format!("{prefix}{name}")).expect("checked"))
    };
    let get_norm = |name: &str| Norm {
        w: get(&format!("{name}.weight")),
        b: m.norm_bias.then(|| get(&format!("{name}.bias"))),
    };
    let get_linear = |name: &str, bias: bool| Linear {
        w: get(&format!("{name}.weight")),
        b: bias.then(|| get(&format!("{name}.bias"))),
    };
    let layers = (0..config.num_layers)
        .map(|l| {
            let p = format!("layers.{l}.");
            ModernLayer {
                attn_norm: (l > 0).then(|| get_norm(&format!("{p}attn_norm"))),
                wqkv: get_linear(&format!("{p}attn.Wqkv"), m.attention_bias),
                wo: get_linear(&format!("{p}attn.Wo"), m.attention_bias),
                mlp_norm: get_norm(&format!("{p}mlp_norm")),
                wi: get_linear(&format!("{p}mlp.Wi"), m.mlp_bias),
                mlp_wo: get_linear(&format!("{p}mlp.Wo"), m.mlp_bias),
            }
        })
        .collect();
    let hd = config.head_dim();
    Ok(ModernWeights {
        word: get("embeddings.tok_embeddings.weight"),
        emb_norm: get_norm("embeddings.norm"),
        layers,
        final_norm: get_norm("final_norm"),
        global_inv_freq: crate::rope::plain_inv_freq(hd, m.global_rope_theta),
        local_inv_freq: crate::rope::plain_inv_freq(hd, m.local_rope_theta),
    })
}

fn load_bert(config: &EncoderConfig, ckpt: &SafetensorsModel) -> Result<BertWeights> {
    {
        let prefix = find_prefix(ckpt, "embeddings.word_embeddings.weight")?;
        let (h, i) = (config.hidden_size, config.intermediate_size);
        let mut wanted: Vec<(String, Vec<usize>)> = vec![
            (
                "embeddings.word_embeddings.weight".into(),
                vec![config.vocab_size, h],
            ),
            (
                "embeddings.position_embeddings.weight".into(),
                vec![config.max_position_embeddings, h],
            ),
            (
                "embeddings.token_type_embeddings.weight".into(),
                vec![config.type_vocab_size, h],
            ),
            ("embeddings.LayerNorm.weight".into(), vec![h]),
            ("embeddings.LayerNorm.bias".into(), vec![h]),
        ];
        for l in 0..config.num_layers {
            let p = format!("encoder.layer.{l}.");
            for (name, shape) in [
                ("attention.self.query.weight", vec![h, h]),
                ("attention.self.query.bias", vec![h]),
                ("attention.self.key.weight", vec![h, h]),
                ("attention.self.key.bias", vec![h]),
                ("attention.self.value.weight", vec![h, h]),
                ("attention.self.value.bias", vec![h]),
                ("attention.output.dense.weight", vec![h, h]),
                ("attention.output.dense.bias", vec![h]),
                ("attention.output.LayerNorm.weight", vec![h]),
                ("attention.output.LayerNorm.bias", vec![h]),
                ("intermediate.dense.weight", vec![i, h]),
                ("intermediate.dense.bias", vec![i]),
                ("output.dense.weight", vec![h, i]),
                ("output.dense.bias", vec![h]),
                ("output.LayerNorm.weight", vec![h]),
                ("output.LayerNorm.bias", vec![h]),
            ] {
                wanted.push((format!("{p}{name}"), shape));
            }
        }
        // Check every tensor (presence, dtype, shape) before converting any.
        check_tensors(ckpt, prefix, &wanted)?;
        let get = |name: &str| -> Vec<f32> {
            // Checked above: present, float, right shape.
            to_f32(ckpt.tensor(&format!("{prefix}{name}")).expect("checked"))
        };
        let layers = (0..config.num_layers)
            .map(|l| {
                let p = format!("encoder.layer.{l}.");
                let g = |n: &str| get(&format!("{p}{n}"));
                let mut qkv_w = g("attention.self.query.weight");
                qkv_w.extend(g("attention.self.key.weight"));
                qkv_w.extend(g("attention.self.value.weight"));
                let mut qkv_b = g("attention.self.query.bias");
                qkv_b.extend(g("attention.self.key.bias"));
                qkv_b.extend(g("attention.self.value.bias"));
                Layer {
                    qkv_w,
                    qkv_b,
                    attn_out_w: g("attention.output.dense.weight"),
                    attn_out_b: g("attention.output.dense.bias"),
                    attn_ln_w: g("attention.output.LayerNorm.weight"),
                    attn_ln_b: g("attention.output.LayerNorm.bias"),
                    inter_w: g("intermediate.dense.weight"),
                    inter_b: g("intermediate.dense.bias"),
                    out_w: g("output.dense.weight"),
                    out_b: g("output.dense.bias"),
                    out_ln_w: g("output.LayerNorm.weight"),
                    out_ln_b: g("output.LayerNorm.bias"),
                }
            })
            .collect();
        Ok(BertWeights {
            word: get("embeddings.word_embeddings.weight"),
            position: get("embeddings.position_embeddings.weight"),
            token_type: get("embeddings.token_type_embeddings.weight"),
            emb_ln_w: get("embeddings.LayerNorm.weight"),
            emb_ln_b: get("embeddings.LayerNorm.bias"),
            layers,
        })
    }
}

impl EncoderModel {
    /// The model's configuration.
    pub fn config(&self) -> &EncoderConfig {
        &self.config
    }

    /// Checks a batch before any work: at least one text, none empty, none longer than
    /// [`EncoderConfig::max_tokens`], every id below `vocab_size`. Errors name the text index.
    pub fn check_batch(&self, texts: &[&[u32]]) -> Result<()> {
        let max = self.config.max_tokens();
        for (t, ids) in texts.iter().enumerate() {
            if ids.is_empty() {
                return Err(invalid(format!("text {t}"), "has no tokens"));
            }
            if ids.len() > max {
                return Err(invalid(
                    format!("text {t}"),
                    format!("{} tokens exceed the model's {max} positions", ids.len()),
                ));
            }
            if let Some(&bad) = ids
                .iter()
                .find(|&&id| id as usize >= self.config.vocab_size)
            {
                return Err(invalid(
                    format!("text {t}"),
                    RuntimeError::TokenOutOfRange {
                        token: bad,
                        vocab_size: self.config.vocab_size,
                    }
                    .to_string(),
                ));
            }
        }
        Ok(())
    }

    /// The last hidden state of every token of every text, texts end to end:
    /// `[sum of lengths][hidden_size]`, row-major (transformers' `last_hidden_state` without
    /// the padding). Runs on the kernel pool.
    pub fn forward(&self, texts: &[&[u32]]) -> Result<Vec<f32>> {
        self.check_batch(texts)?;
        Ok(kernels::install(|| self.forward_checked(texts, None)))
    }

    /// [`Self::forward`] with each token's segment (`token_type_ids`, one slice per text, as
    /// long as it): pairs of texts encoded as one. ModernBERT has no segment embedding and
    /// ignores them. Each type must be below `type_vocab_size`.
    pub fn forward_with_types(&self, texts: &[&[u32]], types: &[&[u32]]) -> Result<Vec<f32>> {
        self.check_batch(texts)?;
        if types.len() != texts.len() {
            return Err(invalid(
                "token types",
                format!("{} lists for {} texts", types.len(), texts.len()),
            ));
        }
        for (t, (ids, ty)) in texts.iter().zip(types).enumerate() {
            if ty.len() != ids.len() {
                return Err(invalid(
                    format!("text {t}"),
                    format!("{} token types for {} tokens", ty.len(), ids.len()),
                ));
            }
            let limit = self.config.type_vocab_size;
            let typed = self.config.arch != EncoderArch::ModernBert;
            if let Some(&bad) = ty.iter().find(|&&x| typed && x as usize >= limit) {
                return Err(invalid(
                    format!("text {t}"),
                    format!("token type {bad} is not below type_vocab_size {limit}"),
                ));
            }
        }
        Ok(kernels::install(|| {
            self.forward_checked(texts, Some(types))
        }))
    }

    fn forward_checked(&self, texts: &[&[u32]], types: Option<&[&[u32]]>) -> Vec<f32> {
        let starts: Vec<usize> = texts
            .iter()
            .scan(0, |acc, t| {
                let s = *acc;
                *acc += t.len();
                Some(s)
            })
            .collect();
        match &self.weights {
            Weights::Bert(w) => self.forward_bert(w, texts, types, &starts),
            Weights::Modern(w) => self.forward_modern(w, texts, &starts),
        }
    }

    fn forward_bert(
        &self,
        w: &BertWeights,
        texts: &[&[u32]],
        types: Option<&[&[u32]]>,
        starts: &[usize],
    ) -> Vec<f32> {
        let c = &self.config;
        let (h, inter) = (c.hidden_size, c.intermediate_size);
        let rows: usize = texts.iter().map(|t| t.len()).sum();

        // Embeddings: (word + token type) + position, then LayerNorm.
        let mut x = vec![0f32; rows * h];
        let mut tmp = vec![0f32; rows * h];
        let mut row_of = Vec::with_capacity(rows);
        for (t, ids) in texts.iter().enumerate() {
            let positions = self.positions(ids);
            for (i, (&id, pos)) in ids.iter().zip(positions).enumerate() {
                let typ = types.map_or(0, |ty| ty[t][i] as usize);
                row_of.push((id as usize, pos, typ));
            }
        }
        tmp.par_chunks_mut(h)
            .zip(&row_of)
            .for_each(|(row, &(id, pos, typ))| {
                let word = &w.word[id * h..(id + 1) * h];
                let typ = &w.token_type[typ * h..(typ + 1) * h];
                let p = &w.position[pos * h..(pos + 1) * h];
                for (((o, &w), &t), &q) in row.iter_mut().zip(word).zip(typ).zip(p) {
                    *o = (w + t) + q;
                }
            });
        self.layer_norm_rows(&tmp, &w.emb_ln_w, Some(&w.emb_ln_b), &mut x);

        let mut qkv = vec![0f32; rows * 3 * h];
        let mut ctx = vec![0f32; rows * h];
        let mut ff = vec![0f32; rows * inter];
        for layer in &w.layers {
            kernels::linear_f32(
                &x,
                &layer.qkv_w,
                Some(&layer.qkv_b),
                &mut qkv,
                rows,
                h,
                3 * h,
            );
            self.attention(texts, starts, &qkv, &mut ctx, None);
            kernels::linear_f32(
                &ctx,
                &layer.attn_out_w,
                Some(&layer.attn_out_b),
                &mut tmp,
                rows,
                h,
                h,
            );
            kernels::add_inplace_f32(&mut tmp, &x);
            self.layer_norm_rows(&tmp, &layer.attn_ln_w, Some(&layer.attn_ln_b), &mut x);
            kernels::linear_f32(
                &x,
                &layer.inter_w,
                Some(&layer.inter_b),
                &mut ff,
                rows,
                h,
                inter,
            );
            ff.par_chunks_mut(inter)
                .with_min_len(8)
                .for_each(|row| self.activate(row));
            kernels::linear_f32(
                &ff,
                &layer.out_w,
                Some(&layer.out_b),
                &mut tmp,
                rows,
                inter,
                h,
            );
            kernels::add_inplace_f32(&mut tmp, &x);
            self.layer_norm_rows(&tmp, &layer.out_ln_w, Some(&layer.out_ln_b), &mut x);
        }
        x
    }

    /// ModernBERT, as `ModernBertModel.forward` on one unpadded text: normed token embeddings;
    /// per layer `x += Wo attn(rope(Wqkv norm(x)))` (layer 0 without the norm; local layers
    /// attend within the window) and `x += Wo (act(a) * g)` with `[a | g] = Wi norm(x)`; a
    /// final norm. Positions count from 0 in each text.
    fn forward_modern(&self, w: &ModernWeights, texts: &[&[u32]], starts: &[usize]) -> Vec<f32> {
        let c = &self.config;
        let m = c.modern.as_ref().expect("ModernBERT options");
        let (h, inter) = (c.hidden_size, c.intermediate_size);
        let rows: usize = texts.iter().map(|t| t.len()).sum();
        let ids: Vec<usize> = texts
            .iter()
            .flat_map(|t| t.iter().map(|&i| i as usize))
            .collect();
        let positions: Vec<usize> = texts.iter().flat_map(|t| 0..t.len()).collect();
        let norm = |x: &[f32], n: &Norm, out: &mut [f32]| {
            self.layer_norm_rows(x, &n.w, n.b.as_deref(), out)
        };
        let linear = |x: &[f32], l: &Linear, out: &mut [f32], n_in: usize, n_out: usize| {
            kernels::linear_f32(x, &l.w, l.b.as_deref(), out, rows, n_in, n_out)
        };

        let mut tmp = vec![0f32; rows * h];
        tmp.par_chunks_mut(h)
            .zip(&ids)
            .for_each(|(row, &id)| row.copy_from_slice(&w.word[id * h..(id + 1) * h]));
        let mut x = vec![0f32; rows * h];
        norm(&tmp, &w.emb_norm, &mut x);

        let mut qkv = vec![0f32; rows * 3 * h];
        let mut ctx = vec![0f32; rows * h];
        let mut wi = vec![0f32; rows * 2 * inter];
        let mut ff = vec![0f32; rows * inter];
        for (l, layer) in w.layers.iter().enumerate() {
            let sliding = m.sliding_layers[l];
            let input = match &layer.attn_norm {
                Some(n) => {
                    norm(&x, n, &mut tmp);
                    &tmp
                }
                None => &x,
            };
            linear(input, &layer.wqkv, &mut qkv, h, 3 * h);
            let inv_freq = match sliding {
                true => &w.local_inv_freq,
                false => &w.global_inv_freq,
            };
            self.rotate_queries_and_keys(&mut qkv, &positions, inv_freq);
            self.attention(
                texts,
                starts,
                &qkv,
                &mut ctx,
                sliding.then_some(m.half_window),
            );
            linear(&ctx, &layer.wo, &mut tmp, h, h);
            kernels::add_inplace_f32(&mut x, &tmp);
            norm(&x, &layer.mlp_norm, &mut tmp);
            linear(&tmp, &layer.wi, &mut wi, h, 2 * inter);
            ff.par_chunks_mut(inter)
                .zip(wi.par_chunks_mut(2 * inter))
                .with_min_len(8)
                .for_each(|(out, row)| {
                    let (a, g) = row.split_at_mut(inter);
                    self.activate(a);
                    for ((o, &a), &g) in out.iter_mut().zip(a.iter()).zip(g.iter()) {
                        *o = a * g;
                    }
                });
            linear(&ff, &layer.mlp_wo, &mut tmp, inter, h);
            kernels::add_inplace_f32(&mut x, &tmp);
        }
        norm(&x, &w.final_norm, &mut tmp);
        tmp
    }

    /// Rotary positions on the query and key parts of `qkv` rows (`[q | k | v]`, heads
    /// contiguous), transformers' `rotate_half` form: dims `j` and `j + hd/2` of a head turn by
    /// `position * inv_freq[j]`, in f32.
    fn rotate_queries_and_keys(&self, qkv: &mut [f32], positions: &[usize], inv_freq: &[f32]) {
        let c = &self.config;
        let (h, hd) = (c.hidden_size, c.head_dim());
        let half = hd / 2;
        // cos and sin per position (`[position][half]`), once for the batch.
        let n_pos = positions.iter().max().map_or(0, |&p| p + 1);
        let angles = |f: fn(f32) -> f32| -> Vec<f32> {
            (0..n_pos)
                .flat_map(|p| inv_freq.iter().map(move |&inv| f(p as f32 * inv)))
                .collect()
        };
        let (cos_table, sin_table) = (angles(f32::cos), angles(f32::sin));
        qkv.par_chunks_mut(3 * h)
            .zip(positions)
            .with_min_len(8)
            .for_each(|(row, &pos)| {
                let cos = &cos_table[pos * half..(pos + 1) * half];
                let sin = &sin_table[pos * half..(pos + 1) * half];
                for head in row[..2 * h].chunks_exact_mut(hd) {
                    let (x1, x2) = head.split_at_mut(half);
                    for j in 0..half {
                        let (a, b) = (x1[j], x2[j]);
                        x1[j] = a * cos[j] - b * sin[j];
                        x2[j] = b * cos[j] + a * sin[j];
                    }
                }
            });
    }

    /// Position ids of one unpadded text, as transformers makes them.
    fn positions(&self, ids: &[u32]) -> Vec<usize> {
        match self.config.arch {
            EncoderArch::Bert | EncoderArch::ModernBert => (0..ids.len()).collect(),
            EncoderArch::Roberta => {
                // `create_position_ids_from_input_ids`: cumulative count of non-pad tokens,
                // zero at pad tokens, plus padding_idx.
                let pad = self.config.pad_token_id;
                let mut count = 0;
                ids.iter()
                    .map(|&id| {
                        if id == pad {
                            pad as usize
                        } else {
                            count += 1;
                            count + pad as usize
                        }
                    })
                    .collect()
            }
        }
    }

    fn layer_norm_rows(&self, x: &[f32], w: &[f32], b: Option<&[f32]>, out: &mut [f32]) {
        let h = self.config.hidden_size;
        let eps = self.config.layer_norm_eps;
        out.par_chunks_mut(h)
            .zip(x.par_chunks(h))
            .with_min_len(16)
            .for_each(|(o, row)| kernels::layer_norm_f32(row, Some(w), b, eps, o));
    }

    /// The feed-forward activation on one row, in place.
    fn activate(&self, row: &mut [f32]) {
        match self.config.activation {
            Activation::GeluErf => kernels::gelu_erf_inplace_f32(row),
            Activation::GeluTanh => gelu_tanh_inplace(row),
            Activation::Relu => row.iter_mut().for_each(|v| *v = v.max(0.0)),
        }
    }

    /// Bidirectional multi-head attention of each text over its own tokens. `qkv` rows are
    /// `[q | k | v]` (`hidden` each, heads contiguous inside); `ctx` rows `[hidden]`. One task
    /// per text; per head, with the head's `q`, `k` and `vᵀ` gathered contiguous:
    /// `S = q kᵀ` and `ctx = softmax(S * scale) v`, both through `linear_f32` (so each output
    /// has the kernel's one reduction order), the softmax by `softmax_f32` per row.
    /// With `window`, query `i` attends only to keys `j` with `|i - j| <= window` (ModernBERT's
    /// local layers): the softmax runs over that run of the row, the rest of the row is 0.
    fn attention(
        &self,
        texts: &[&[u32]],
        starts: &[usize],
        qkv: &[f32],
        ctx: &mut [f32],
        window: Option<usize>,
    ) {
        let c = &self.config;
        let (h, nh, hd) = (c.hidden_size, c.num_heads, c.head_dim());
        let scale = 1.0 / (hd as f32).sqrt();
        // Split ctx into one chunk per text.
        let mut chunks: Vec<(usize, usize, &mut [f32])> = Vec::with_capacity(texts.len());
        let mut rest = ctx;
        for (t, ids) in texts.iter().enumerate() {
            let (mine, tail) = rest.split_at_mut(ids.len() * h);
            chunks.push((starts[t], ids.len(), mine));
            rest = tail;
        }
        chunks.into_par_iter().for_each(|(start, len, out)| {
            let rows = &qkv[start * 3 * h..(start + len) * 3 * h];
            let mut q = vec![0f32; len * hd];
            let mut k = vec![0f32; len * hd];
            let mut vt = vec![0f32; hd * len];
            let mut s = vec![0f32; len * len];
            let mut o = vec![0f32; len * hd];
            for head in 0..nh {
                let off = head * hd;
                for i in 0..len {
                    let r = &rows[i * 3 * h..(i + 1) * 3 * h];
                    q[i * hd..(i + 1) * hd].copy_from_slice(&r[off..off + hd]);
                    k[i * hd..(i + 1) * hd].copy_from_slice(&r[h + off..h + off + hd]);
                    for (d, &v) in r[2 * h + off..2 * h + off + hd].iter().enumerate() {
                        vt[d * len + i] = v;
                    }
                }
                kernels::linear_f32(&q, &k, None, &mut s, len, hd, len);
                for (i, row) in s.chunks_exact_mut(len).enumerate() {
                    let (lo, hi) = match window {
                        Some(w) => (i.saturating_sub(w), (i + w + 1).min(len)),
                        None => (0, len),
                    };
                    row[..lo].fill(0.0);
                    row[hi..].fill(0.0);
                    let live = &mut row[lo..hi];
                    live.iter_mut().for_each(|x| *x *= scale);
                    kernels::softmax_f32(live);
                }
                kernels::linear_f32(&s, &vt, None, &mut o, len, len, hd);
                for i in 0..len {
                    out[i * h + off..i * h + off + hd].copy_from_slice(&o[i * hd..(i + 1) * hd]);
                }
            }
        });
    }
}

/// A checked float tensor's elements as f32.
/// GELU's tanh approximation (`gelu_new`, `gelu_pytorch_tanh`), in place.
pub(crate) fn gelu_tanh_inplace(row: &mut [f32]) {
    let k = (2.0f32 / std::f32::consts::PI).sqrt();
    for v in row {
        let u = *v;
        *v = 0.5 * u * (1.0 + (k * (u + 0.044_715 * u * u * u)).tanh());
    }
}

pub(crate) fn to_f32(t: TensorView<'_>) -> Vec<f32> {
    let le16 = |d: &[u8]| -> Vec<u16> {
        d.chunks_exact(2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
            .collect()
    };
    match t.dtype {
        Dtype::F32 => t
            .data
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect(),
        Dtype::F16 => le16(t.data)
            .into_iter()
            .map(|b| half::f16::from_bits(b).to_f32())
            .collect(),
        Dtype::BF16 => le16(t.data)
            .into_iter()
            .map(|b| half::bf16::from_bits(b).to_f32())
            .collect(),
        other => unreachable!("dtype {} refused at load", other.name()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINI: &str = r#"{"model_type": "bert", "vocab_size": 100, "hidden_size": 8,
        "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 16,
        "max_position_embeddings": 32, "type_vocab_size": 2, "layer_norm_eps": 1e-12,
        "hidden_act": "gelu", "pad_token_id": 0}"#;

    #[test]
    fn config_reads_bert_and_refuses_bad_values_by_name() {
        let c = EncoderConfig::from_json_str(MINI).unwrap();
        assert_eq!(c.arch, EncoderArch::Bert);
        assert_eq!((c.max_tokens(), c.head_dim()), (32, 4));
        let roberta = MINI
            .replace("\"bert\"", "\"xlm-roberta\"")
            .replace("\"pad_token_id\": 0", "\"pad_token_id\": 1");
        let r = EncoderConfig::from_json_str(&roberta).unwrap();
        assert_eq!(
            (r.arch, r.position_offset(), r.max_tokens()),
            (EncoderArch::Roberta, 2, 30)
        );
        for (from, to, needle) in [
            ("\"bert\"", "\"gpt2\"", "encoder model_type \"gpt2\""),
            (
                "\"num_attention_heads\": 2",
                "\"num_attention_heads\": 3",
                "does not divide",
            ),
            (
                "\"hidden_size\": 8",
                "\"hidden_size\": 0",
                "hidden_size: 0 is outside",
            ),
            (
                "\"hidden_size\": 8",
                "\"hidden_size\": -8",
                "not a non-negative integer",
            ),
            (
                "\"layer_norm_eps\": 1e-12",
                "\"layer_norm_eps\": 0",
                "layer_norm_eps",
            ),
            ("\"gelu\"", "\"swish\"", "hidden_act \"swish\""),
            (
                "\"pad_token_id\": 0",
                "\"pad_token_id\": 100",
                "pad_token_id",
            ),
            (
                "\"pad_token_id\": 0",
                "\"pad_token_id\": 0, \"position_embedding_type\": \"relative_key\"",
                "relative_key",
            ),
            (
                "\"pad_token_id\": 0",
                "\"pad_token_id\": 0, \"is_decoder\": true",
                "is_decoder",
            ),
        ] {
            let text = MINI.replace(from, to);
            assert_ne!(text, MINI, "{from}");
            let err = EncoderConfig::from_json_str(&text).unwrap_err().to_string();
            assert!(err.contains(needle), "{needle}: {err}");
        }
    }

    /// ModernBERT's keys as transformers 5 writes them and as the published files do, with
    /// ModernBertConfig's defaults, and refusals by name.
    #[test]
    fn config_reads_modernbert_in_both_spellings() {
        const NEW: &str = r#"{"model_type": "modernbert", "vocab_size": 100, "hidden_size": 8,
            "num_hidden_layers": 4, "num_attention_heads": 2, "intermediate_size": 12,
            "pad_token_id": 1, "norm_eps": 1e-6, "norm_bias": true,
            "layer_types": ["full_attention", "sliding_attention", "full_attention",
                            "sliding_attention"],
            "rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 8e4},
                                "sliding_attention": {"rope_type": "default", "rope_theta": 900}},
            "local_attention": 10}"#;
        let c = EncoderConfig::from_json_str(NEW).unwrap();
        let m = c.modern.clone().unwrap();
        assert_eq!(c.arch, EncoderArch::ModernBert);
        assert_eq!((c.max_tokens(), c.layer_norm_eps), (8192, 1e-6));
        assert_eq!(m.sliding_layers, vec![false, true, false, true]);
        assert_eq!(
            (m.global_rope_theta, m.local_rope_theta, m.half_window),
            (8e4, 900.0, 5)
        );
        assert!(m.norm_bias && !m.attention_bias && !m.mlp_bias);
        // The published files' keys, and the defaults for what they leave out.
        const OLD: &str = r#"{"model_type": "modernbert", "vocab_size": 100, "hidden_size": 8,
            "num_hidden_layers": 4, "num_attention_heads": 2, "intermediate_size": 12,
            "global_rope_theta": 160000.0, "local_rope_theta": 10000.0,
            "global_attn_every_n_layers": 3, "hidden_activation": "gelu"}"#;
        let c = EncoderConfig::from_json_str(OLD).unwrap();
        let m = c.modern.unwrap();
        assert_eq!(m.sliding_layers, vec![false, true, true, false]);
        assert_eq!(
            (m.global_rope_theta, m.local_rope_theta, m.half_window),
            (160000.0, 10000.0, 64)
        );
        assert_eq!(
            (c.layer_norm_eps, c.activation),
            (1e-5, Activation::GeluErf)
        );
        for (from, to, needle) in [
            ("\"gelu\"", "\"swish\"", "hidden_activation \"swish\""),
            (
                "\"global_attn_every_n_layers\": 3",
                "\"global_attn_every_n_layers\": 0",
                "global_attn_every_n_layers",
            ),
            (
                "\"global_rope_theta\": 160000.0",
                "\"global_rope_theta\": -1",
                "global_rope_theta",
            ),
            (
                "\"global_attn_every_n_layers\": 3",
                "\"layer_types\": [\"full_attention\"]",
                "1 entries for 4 layers",
            ),
            (
                "\"global_attn_every_n_layers\": 3",
                "\"rope_parameters\": {\"full_attention\": {\"rope_type\": \"yarn\"}}",
                "rope_type \"yarn\"",
            ),
            (
                "\"global_attn_every_n_layers\": 3",
                "\"local_attention\": 1",
                "local_attention",
            ),
        ] {
            let text = OLD.replace(from, to);
            assert_ne!(text, OLD, "{from}");
            let err = EncoderConfig::from_json_str(&text).unwrap_err().to_string();
            assert!(err.contains(needle), "{needle}: {err}");
        }
    }
}
