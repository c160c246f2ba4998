//! One normalized decoder description from Hugging Face `config.json` or GGUF metadata.
//!
//! Only what torchnative implements is accepted: an unknown architecture, activation, RoPE
//! variant or attention layout is refused by name with the supported alternatives listed,
//! so a model never runs with a silently ignored option.

use std::path::Path;

use serde_json::{Map, Value};

use crate::error::{malformed, FormatError, Result};
use torchnative_quant::GgmlType;

use crate::gguf::{GgufFile, MetadataValue};
use crate::json::UniqueMap;
use crate::mapped::read_text;

/// Largest `config.json` / `generation_config.json` accepted (real ones are a few KB).
pub const MAX_JSON_BYTES: u64 = 16 << 20;

/// Decoder families torchnative runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Architecture {
    /// `LlamaForCausalLM` (also SmolLM2).
    Llama,
    /// `MistralForCausalLM`.
    Mistral,
    /// `Qwen2ForCausalLM`.
    Qwen2,
    /// `Qwen3ForCausalLM`.
    Qwen3,
    /// `Phi3ForCausalLM` (Phi-3, Phi-3.5, Phi-4-mini): fused `qkv_proj` and `gate_up_proj`.
    Phi3,
    /// `Gemma2ForCausalLM`.
    Gemma2,
    /// `Gemma3ForCausalLM` (`model_type` `gemma3_text`: the text decoder of Gemma 3).
    Gemma3,
}

impl Architecture {
    /// All supported architectures.
    pub const ALL: [Architecture; 7] = [
        Architecture::Llama,
        Architecture::Mistral,
        Architecture::Qwen2,
        Architecture::Qwen3,
        Architecture::Phi3,
        Architecture::Gemma2,
        Architecture::Gemma3,
    ];

    /// The `model_type` in `config.json` (also the `general.architecture` in GGUF).
    pub fn model_type(self) -> &'static str {
        match self {
            Architecture::Llama => "llama",
            Architecture::Mistral => "mistral",
            Architecture::Qwen2 => "qwen2",
            Architecture::Qwen3 => "qwen3",
            Architecture::Phi3 => "phi3",
            Architecture::Gemma2 => "gemma2",
            Architecture::Gemma3 => "gemma3_text",
        }
    }

    /// Whether the runtime reads this architecture from GGUF files (llama.cpp's tensor layout
    /// and metadata for it). The others run from safetensors only.
    pub fn runs_from_gguf(self) -> bool {
        matches!(
            self,
            Architecture::Llama
                | Architecture::Mistral
                | Architecture::Qwen2
                | Architecture::Qwen3
                | Architecture::Phi3
                | Architecture::Gemma2
                | Architecture::Gemma3
        )
    }

    /// llama.cpp's `general.architecture` for it (its model type, but `gemma3` for Gemma 3's
    /// text decoder).
    pub fn gguf_architecture(self) -> &'static str {
        match self {
            Architecture::Gemma3 => "gemma3",
            other => other.model_type(),
        }
    }

    /// Gemma 2 and 3: `(1 + w)` RMSNorm weights, sandwich norms, scaled embeddings.
    pub fn is_gemma(self) -> bool {
        matches!(self, Architecture::Gemma2 | Architecture::Gemma3)
    }

    /// The transformers class in `config.json`'s `architectures`.
    pub fn hf_class(self) -> &'static str {
        match self {
            Architecture::Llama => "LlamaForCausalLM",
            Architecture::Mistral => "MistralForCausalLM",
            Architecture::Qwen2 => "Qwen2ForCausalLM",
            Architecture::Qwen3 => "Qwen3ForCausalLM",
            Architecture::Phi3 => "Phi3ForCausalLM",
            Architecture::Gemma2 => "Gemma2ForCausalLM",
            Architecture::Gemma3 => "Gemma3ForCausalLM",
        }
    }

    fn from_model_type(name: &str) -> Option<Architecture> {
        Architecture::ALL
            .into_iter()
            .find(|a| a.model_type() == name)
    }

    fn unsupported(what: &str, name: &str) -> FormatError {
        let names: Vec<_> = Architecture::ALL.iter().map(|a| a.model_type()).collect();
        FormatError::Unsupported(format!("{what} '{name}'; supported: {}", names.join(", ")))
    }
}

/// RoPE frequency scaling (transformers `rope_type`). Absent means plain RoPE.
#[derive(Clone, Debug, PartialEq)]
pub enum RopeScaling {
    /// Positions divided by `factor`.
    Linear {
        /// Position divisor.
        factor: f32,
    },
    /// Dynamic NTK scaling (transformers' `dynamic`): a forward call whose sequence reaches
    /// `seq_len > original_max_position_embeddings` rotates with the base
    /// `theta * ((factor * seq_len / original) - (factor - 1))^(dim / (dim - 2))`. The model's
    /// `context_length` is `original * factor` (as vLLM sizes it; transformers sets no bound).
    Dynamic {
        /// Context extension factor (at least 1), as the config writes it: f64, as Python holds
        /// it (transformers takes `factor - 1` in double precision).
        factor: f64,
        /// The config's `max_position_embeddings`: the length the base is rescaled beyond.
        original_max_position_embeddings: usize,
    },
    /// YaRN.
    Yarn {
        /// Context extension factor.
        factor: f32,
        /// Context length the model was trained with before extension.
        original_max_position_embeddings: usize,
        /// Rotations above which frequencies are kept (extrapolated); default 32.
        beta_fast: f32,
        /// Rotations below which frequencies are fully interpolated; default 1.
        beta_slow: f32,
        /// Attention temperature; computed from `factor` (and mscale) when `None`.
        attention_factor: Option<f32>,
        /// DeepSeek-style mscale, when given.
        mscale: Option<f32>,
        /// DeepSeek-style mscale_all_dim, when given.
        mscale_all_dim: Option<f32>,
    },
    /// LongRoPE (Phi-3's `longrope`, formerly `su`): per-frequency divisors, the short set for
    /// sequences up to `original_max_position_embeddings` tokens and the long set beyond; cos
    /// and sin are multiplied by `attention_factor` either way.
    LongRope {
        /// Divisors of the inverse frequencies for short sequences (`rope_dim / 2` of them).
        short_factor: Vec<f32>,
        /// Divisors for sequences longer than `original_max_position_embeddings`.
        long_factor: Vec<f32>,
        /// Context length the model was pretrained with.
        original_max_position_embeddings: usize,
        /// Scale of cos/sin, resolved as transformers resolves it: the given
        /// `attention_factor`, else `sqrt(1 + ln(factor) / ln(original))` with `factor` the
        /// given one or `max_position_embeddings / original` (1.0 when `factor <= 1`).
        attention_factor: f32,
    },
    /// Per-frequency divisors as llama.cpp stores them in a GGUF's `rope_freqs.weight` (its
    /// form of Llama 3.1 scaling, computed by the converter from the config's `llama3`
    /// parameters): inverse frequency `i` is `1 / (base^(2i / dim) * factors[i])`.
    FreqFactors {
        /// One divisor per rotated pair (`rope_dim / 2` of them).
        factors: Vec<f32>,
    },
    /// Llama 3.1 piecewise frequency scaling.
    Llama3 {
        /// Divisor for low frequencies.
        factor: f32,
        /// Wavelength bound (as original context / this) above which frequencies are scaled.
        low_freq_factor: f32,
        /// Wavelength bound below which frequencies are kept.
        high_freq_factor: f32,
        /// Context length the model was trained with before extension.
        original_max_position_embeddings: usize,
    },
}

impl RopeScaling {
    /// The scaling's name as configs spell it (`rope_freqs` for llama.cpp's tensor form).
    pub fn name(&self) -> &'static str {
        match self {
            RopeScaling::Linear { .. } => "linear",
            RopeScaling::Dynamic { .. } => "dynamic",
            RopeScaling::Yarn { .. } => "yarn",
            RopeScaling::LongRope { .. } => "longrope",
            RopeScaling::FreqFactors { .. } => "rope_freqs",
            RopeScaling::Llama3 { .. } => "llama3",
        }
    }
}

/// The MLP's gate activation (`gate_act(x W_gate) * (x W_up)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activation {
    /// SiLU (SwiGLU): `hidden_act: "silu"`.
    Silu,
    /// GELU, tanh approximation (GeGLU): `gelu_pytorch_tanh`.
    GeluTanh,
}

/// What a decoder-only transformer needs to be built, independent of the file format.
#[derive(Clone, Debug, PartialEq)]
pub struct DecoderConfig {
    /// Model family.
    pub architecture: Architecture,
    /// Decoder layers.
    pub n_layers: usize,
    /// Residual stream width.
    pub hidden_size: usize,
    /// Query heads.
    pub n_heads: usize,
    /// Key/value heads (grouped-query attention when fewer than `n_heads`).
    pub n_kv_heads: usize,
    /// Width of one head (not always `hidden_size / n_heads`, e.g. Qwen3).
    pub head_dim: usize,
    /// MLP inner width.
    pub intermediate_size: usize,
    /// Rows of the token embedding.
    pub vocab_size: usize,
    /// Context length the model runs to: `max_position_embeddings` (with dynamic NTK RoPE
    /// scaling, that times the factor; the trained length is then in the scaling).
    pub context_length: usize,
    /// RoPE base frequency.
    pub rope_theta: f32,
    /// RoPE scaling, if any.
    pub rope_scaling: Option<RopeScaling>,
    /// Dimensions of each q/k head that RoPE rotates (the first ones; `head_dim` unless
    /// `partial_rotary_factor` says less).
    pub rope_dim: usize,
    /// RoPE base of the sliding-window layers when it differs from `rope_theta` (Gemma 3's
    /// `rope_local_base_freq`); those layers take plain RoPE with it.
    pub local_rope_theta: Option<f32>,
    /// MLP gate activation.
    pub activation: Activation,
    /// RMSNorm epsilon.
    pub norm_eps: f32,
    /// The output projection reuses the token embedding.
    pub tie_word_embeddings: bool,
    /// q/k/v projections have biases.
    pub attention_bias: bool,
    /// The attention output projection has a bias (Llama's `attention_bias` sets both; Qwen2
    /// has q/k/v biases only).
    pub attention_out_bias: bool,
    /// gate/up/down projections have biases.
    pub mlp_bias: bool,
    /// Per-head RMSNorm on q and k before RoPE (Qwen3).
    pub qk_norm: bool,
    /// Layers with sliding-window attention attend to at most this many previous positions.
    pub sliding_window: Option<usize>,
    /// Which layers use `sliding_window`: `None` means every layer; `Some(v)` has one entry per
    /// layer (Gemma's alternating local/global layers).
    pub sliding_layers: Option<Vec<bool>>,
    /// Logits are squashed to `cap * tanh(logits / cap)` when set.
    pub final_logit_softcap: Option<f32>,
    /// Attention scores are squashed to `cap * tanh(s / cap)` after scaling (Gemma 2).
    pub attn_logit_softcap: Option<f32>,
    /// Attention scores are scaled by `query_pre_attn_scalar^-1/2` instead of
    /// `head_dim^-1/2` (Gemma).
    pub query_pre_attn_scalar: Option<f32>,
    /// Gemma's layout: RMSNorm weights stored as offsets from 1 (`x * (1 + w)`), norms after
    /// attention and after the MLP as well as before them, token embeddings multiplied by
    /// `sqrt(hidden_size)`.
    pub gemma_norms: bool,
    /// Beginning-of-sequence token.
    pub bos_token_id: Option<u32>,
    /// End-of-sequence tokens (GGUF: eos and eot).
    pub eos_token_ids: Vec<u32>,
    /// Padding token.
    pub pad_token_id: Option<u32>,
}

/// Sampling defaults from `generation_config.json`; `None` where the file is silent.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GenerationDefaults {
    /// Beginning-of-sequence token.
    pub bos_token_id: Option<u32>,
    /// Tokens that end generation.
    pub eos_token_ids: Vec<u32>,
    /// Padding token.
    pub pad_token_id: Option<u32>,
    /// Sample (true) or decode greedily (false).
    pub do_sample: Option<bool>,
    /// Softmax temperature.
    pub temperature: Option<f32>,
    /// Keep the k most likely tokens.
    pub top_k: Option<usize>,
    /// Keep the smallest set of tokens with this total probability.
    pub top_p: Option<f32>,
    /// Drop tokens below this fraction of the top probability.
    pub min_p: Option<f32>,
    /// Penalty for repeating earlier tokens.
    pub repetition_penalty: Option<f32>,
    /// Locally typical sampling mass.
    pub typical_p: Option<f32>,
    /// Tokens to generate at least (EOS is suppressed before).
    pub min_new_tokens: Option<usize>,
    /// Tokens to generate at most.
    pub max_new_tokens: Option<usize>,
    /// Prompt plus generated tokens at most.
    pub max_length: Option<usize>,
}

/// Sizes beyond these are refused: no real decoder comes close, and the runtime allocates
/// buffers from them.
pub const MAX_LAYERS: usize = 1 << 10;
/// Largest accepted hidden/intermediate size and head count.
pub const MAX_WIDTH: usize = 1 << 20;
/// Largest accepted vocabulary.
pub const MAX_VOCAB: usize = 1 << 24;
/// Largest accepted context length.
pub const MAX_CONTEXT: usize = 1 << 24;

/// Reads `config.json` and, when present, `generation_config.json` from a model directory.
pub fn load_hf_config(dir: &Path) -> Result<(DecoderConfig, GenerationDefaults)> {
    let read = |name: &str| {
        let path = dir.join(name);
        read_text(&path, MAX_JSON_BYTES)
    };
    let config_path = dir.join("config.json");
    let config = DecoderConfig::from_hf_config_json(&read("config.json")?)
        .map_err(|e| e.in_file(&config_path))?;
    let gen_path = dir.join("generation_config.json");
    let generation = if gen_path.is_file() {
        GenerationDefaults::from_json(&read("generation_config.json")?)
            .map_err(|e| e.in_file(&gen_path))?
    } else {
        GenerationDefaults::default()
    };
    Ok((config, generation))
}

/// Typed access to a JSON object with messages naming the file and key.
struct JsonFields<'a> {
    file: &'a str,
    map: &'a Map<String, Value>,
}

impl<'a> JsonFields<'a> {
    /// The value at `key`, treating JSON `null` as absent (transformers writes `null` for
    /// unset options).
    fn get(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key).filter(|v| !v.is_null())
    }

    fn bad(&self, key: &str, v: &Value, expected: &str) -> FormatError {
        malformed(format!("{}: {key} is {v}, expected {expected}", self.file))
    }

    fn usize(&self, key: &str) -> Result<Option<usize>> {
        self.get(key)
            .map(|v| {
                v.as_u64()
                    .and_then(|n| usize::try_from(n).ok())
                    .ok_or_else(|| self.bad(key, v, "a non-negative integer"))
            })
            .transpose()
    }

    fn required_usize(&self, key: &str) -> Result<usize> {
        self.usize(key)?
            .ok_or_else(|| malformed(format!("{}: required key {key} is missing", self.file)))
    }

    fn f32(&self, key: &str) -> Result<Option<f32>> {
        Ok(self.f64(key)?.map(|x| x as f32))
    }

    fn f64(&self, key: &str) -> Result<Option<f64>> {
        self.get(key)
            .map(|v| v.as_f64().ok_or_else(|| self.bad(key, v, "a number")))
            .transpose()
    }

    fn bool(&self, key: &str) -> Result<Option<bool>> {
        self.get(key)
            .map(|v| v.as_bool().ok_or_else(|| self.bad(key, v, "true or false")))
            .transpose()
    }

    fn str(&self, key: &str) -> Result<Option<&'a str>> {
        self.get(key)
            .map(|v| v.as_str().ok_or_else(|| self.bad(key, v, "a string")))
            .transpose()
    }

    /// A token id; `-1` is the old transformers spelling of "none".
    fn token_id(&self, key: &str) -> Result<Option<u32>> {
        match self.get(key) {
            None => Ok(None),
            Some(v) if v.as_i64() == Some(-1) => Ok(None),
            Some(v) => Ok(Some(self.token_value(key, v)?)),
        }
    }

    /// One id or a list of ids (`eos_token_id` may be either).
    fn token_ids(&self, key: &str) -> Result<Vec<u32>> {
        match self.get(key) {
            None => Ok(Vec::new()),
            Some(Value::Array(items)) => items.iter().map(|v| self.token_value(key, v)).collect(),
            Some(v) if v.as_i64() == Some(-1) => Ok(Vec::new()),
            Some(v) => Ok(vec![self.token_value(key, v)?]),
        }
    }

    fn token_value(&self, key: &str, v: &Value) -> Result<u32> {
        v.as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .ok_or_else(|| self.bad(key, v, "a token id (0..2^32)"))
    }
}

fn parse_object(text: &str, file: &str) -> Result<Map<String, Value>> {
    let map: UniqueMap<Value> =
        serde_json::from_str(text).map_err(|e| malformed(format!("{file}: {e}")))?;
    Ok(map.0.into_iter().collect())
}

impl DecoderConfig {
    /// Normalizes a transformers `config.json` (both the v5 `rope_parameters` and the older
    /// `rope_theta` + `rope_scaling` spellings), applying transformers' defaults for absent
    /// optional keys. Size keys (layers, hidden, heads, intermediate, vocab) are required.
    pub fn from_hf_config_json(text: &str) -> Result<DecoderConfig> {
        let map = parse_object(text, "config.json")?;
        let f = JsonFields {
            file: "config.json",
            map: &map,
        };
        let architecture = hf_architecture(&f)?;
        use Architecture::*;
        let gemma = architecture.is_gemma();

        // Gemma configs name the activation `hidden_activation`; the others `hidden_act`.
        let act_key = match (gemma, f.get("hidden_activation")) {
            (true, Some(_)) => "hidden_activation",
            _ => "hidden_act",
        };
        let activation = match f.str(act_key)? {
            None if gemma => Activation::GeluTanh,
            None | Some("silu") => Activation::Silu,
            Some("gelu_pytorch_tanh") => Activation::GeluTanh,
            Some(act) => {
                return Err(FormatError::Unsupported(format!(
                    "config.json: {act_key} '{act}'; supported: silu, gelu_pytorch_tanh"
                )))
            }
        };
        if architecture == Gemma3 && f.bool("use_bidirectional_attention")? == Some(true) {
            return Err(FormatError::Unsupported(
                "config.json: use_bidirectional_attention true (Gemma 3 as an encoder); \
                 supported: false"
                    .into(),
            ));
        }

        let n_layers = f.required_usize("num_hidden_layers")?;
        let hidden_size = f.required_usize("hidden_size")?;
        let n_heads = f.required_usize("num_attention_heads")?;
        let n_kv_heads = f.usize("num_key_value_heads")?.unwrap_or(n_heads);
        let head_dim = match f.usize("head_dim")? {
            Some(d) => d,
            // Qwen3Config defaults head_dim to 128 instead of deriving it; Gemma's to 256.
            None if architecture == Qwen3 => 128,
            None if gemma => 256,
            None => {
                if n_heads == 0 || hidden_size % n_heads != 0 {
                    return Err(malformed(format!(
                        "config.json: hidden_size {hidden_size} is not a multiple of \
                         num_attention_heads {n_heads} and head_dim is not given"
                    )));
                }
                hidden_size / n_heads
            }
        };
        let context_length = f
            .usize("max_position_embeddings")?
            .unwrap_or(match architecture {
                Llama => 2048,
                Mistral => 4096 * 32,
                Qwen2 | Qwen3 => 32768,
                Phi3 => 4096,
                Gemma2 => 8192,
                Gemma3 => 131_072,
            });

        let rope = hf_rope(&f, architecture, head_dim, context_length)?;
        // Dynamic NTK scaling runs past max_position_embeddings, up to factor times it.
        let context_length = match &rope.scaling {
            Some(RopeScaling::Dynamic { factor, .. }) if factor.is_finite() && *factor >= 1.0 => {
                (context_length as f64 * *factor) as usize
            }
            _ => context_length,
        };
        // transformers' defaults when the key is absent (an explicit null means none).
        let (default_bos, default_eos, default_pad) = match architecture {
            Llama | Mistral => (Some(1), Some(2), None),
            Qwen2 | Qwen3 => (None, None, None),
            Phi3 => (Some(1), Some(32000), Some(32000)),
            Gemma2 | Gemma3 => (Some(2), Some(1), Some(0)),
        };
        let attention_bias = match architecture {
            Llama | Qwen3 | Gemma2 | Gemma3 => f.bool("attention_bias")?.unwrap_or(false),
            Mistral | Phi3 => false,
            Qwen2 => true,
        };
        let attention_out_bias = match architecture {
            Llama | Qwen3 | Gemma2 | Gemma3 => attention_bias,
            Mistral | Qwen2 | Phi3 => false,
        };
        let mlp_bias = match architecture {
            Llama => f.bool("mlp_bias")?.unwrap_or(false),
            _ => false,
        };
        // Absent key: the class default (Gemma 2 caps at 30 and 50); null: none.
        let softcap = |key: &str, default: Option<f32>| -> Result<Option<f32>> {
            match map.contains_key(key) {
                true => f.f32(key),
                false => Ok(default),
            }
        };
        let final_logit_softcap = match architecture {
            Gemma2 => softcap("final_logit_softcapping", Some(30.0))?,
            _ => f.f32("final_logit_softcapping")?,
        };
        // Gemma 3's attention takes no softcap in transformers whatever the config says.
        let attn_logit_softcap = match architecture {
            Gemma2 => softcap("attn_logit_softcapping", Some(50.0))?,
            _ => None,
        };
        let query_pre_attn_scalar = match gemma {
            true => Some(f.f32("query_pre_attn_scalar")?.unwrap_or(256.0)),
            false => None,
        };
        let (sliding_window, sliding_layers) = hf_sliding_window(&f, architecture, n_layers)?;

        let config = DecoderConfig {
            architecture,
            n_layers,
            hidden_size,
            n_heads,
            n_kv_heads,
            head_dim,
            intermediate_size: f.required_usize("intermediate_size")?,
            vocab_size: f.required_usize("vocab_size")?,
            context_length,
            rope_theta: rope.theta,
            rope_scaling: rope.scaling,
            rope_dim: rope.dim,
            local_rope_theta: rope.local_theta,
            activation,
            norm_eps: f.f32("rms_norm_eps")?.unwrap_or(match architecture {
                Phi3 => 1e-5,
                _ => 1e-6,
            }),
            tie_word_embeddings: f.bool("tie_word_embeddings")?.unwrap_or(gemma),
            attention_bias,
            attention_out_bias,
            mlp_bias,
            qk_norm: matches!(architecture, Qwen3 | Gemma3),
            sliding_window,
            sliding_layers,
            final_logit_softcap,
            attn_logit_softcap,
            query_pre_attn_scalar,
            gemma_norms: gemma,
            bos_token_id: match map.contains_key("bos_token_id") {
                true => f.token_id("bos_token_id")?,
                false => default_bos,
            },
            eos_token_ids: match map.contains_key("eos_token_id") {
                true => f.token_ids("eos_token_id")?,
                false => default_eos.into_iter().collect(),
            },
            pad_token_id: match map.contains_key("pad_token_id") {
                true => f.token_id("pad_token_id")?,
                false => default_pad,
            },
        };
        config.validate("config.json")?;
        Ok(config)
    }

    /// Normalizes the metadata of a GGUF file. Biases, q/k norms and tied embeddings are read
    /// off the tensor directory, the vocabulary size off the token list.
    ///
    /// Note: llama.cpp converts Mistral checkpoints as `llama`, so those come back as
    /// [`Architecture::Llama`] (same computation, no sliding window recorded).
    pub fn from_gguf(file: &GgufFile) -> Result<DecoderConfig> {
        let g = GgufFields { file };
        let arch_name = g.required_str("general.architecture")?;
        let architecture = Architecture::ALL
            .into_iter()
            .find(|a| a.runs_from_gguf() && a.gguf_architecture() == arch_name)
            .ok_or_else(|| gguf_unsupported_architecture(arch_name))?;
        let key = |k: &str| format!("{arch_name}.{k}");

        let n_layers = g.required_usize(&key("block_count"))?;
        let hidden_size = g.required_usize(&key("embedding_length"))?;
        let n_heads = g.required_usize(&key("attention.head_count"))?;
        let n_kv_heads = g.usize(&key("attention.head_count_kv"))?.unwrap_or(n_heads);
        let head_dim = match g.usize(&key("attention.key_length"))? {
            Some(d) => d,
            None if n_heads > 0 && hidden_size % n_heads == 0 => hidden_size / n_heads,
            None => {
                return Err(malformed(format!(
                    "GGUF {}: {hidden_size} is not a multiple of {} {n_heads}",
                    key("embedding_length"),
                    key("attention.head_count")
                )))
            }
        };
        if let Some(v) = g.usize(&key("attention.value_length"))? {
            if v != head_dim {
                return Err(FormatError::Unsupported(format!(
                    "GGUF {} {v} differs from the key length {head_dim}; supported: equal",
                    key("attention.value_length")
                )));
            }
        }
        let phi3 = architecture == Architecture::Phi3;
        let rope_dim = match g.usize(&key("rope.dimension_count"))? {
            None => head_dim,
            Some(rot) if rot == head_dim || (phi3 && rot <= head_dim) => rot,
            Some(rot) => {
                return Err(FormatError::Unsupported(format!(
                    "GGUF {} {rot} (partial rotary embedding) with head dim {head_dim}; \
                     supported: RoPE over the whole head (partial for phi3)",
                    key("rope.dimension_count")
                )));
            }
        };
        let context_length = g.required_usize(&key("context_length"))?;

        let tokens = g.get("tokenizer.ggml.tokens").ok_or_else(|| {
            FormatError::NotFound("GGUF key tokenizer.ggml.tokens (the vocabulary)".into())
        })?;
        let vocab_size = tokens.as_array().map(<[_]>::len).ok_or_else(|| {
            malformed(format!(
                "GGUF tokenizer.ggml.tokens is {}, expected an array",
                tokens.type_name()
            ))
        })?;
        if let Some(n) = g.usize(&key("vocab_size"))? {
            if n != vocab_size {
                return Err(malformed(format!(
                    "GGUF {} is {n} but tokenizer.ggml.tokens has {vocab_size} entries",
                    key("vocab_size")
                )));
            }
        }

        let has = |name: &str| file.tensor(name).is_some();
        let mut eos_token_ids = Vec::new();
        for k in ["tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id"] {
            if let Some(id) = g.token_id(k)? {
                if !eos_token_ids.contains(&id) {
                    eos_token_ids.push(id);
                }
            }
        }
        let gemma2 = architecture == Architecture::Gemma2;
        let gemma3 = architecture == Architecture::Gemma3;
        let gemma = gemma2 || gemma3;
        // Window 0 (phi3's converter) means none; Gemma 3 without a window has no local layers.
        // llama.cpp gives Gemma 2 a 4096 window when the file names none, as Gemma2Config does.
        let sliding_window = match g.usize(&key("attention.sliding_window"))? {
            None if gemma2 => Some(4096),
            w => w.filter(|&w| w > 0 || !(phi3 || gemma3)),
        };
        // Gemma 2 alternates from a sliding first layer, Gemma 3 has every sixth layer global,
        // unless the file lists the layers (llama.cpp's defaults).
        let sliding_layers = match (gemma, sliding_window) {
            (true, Some(_)) => Some(gguf_sliding_pattern(
                &g,
                &key("attention.sliding_window_pattern"),
                n_layers,
                if gemma2 { 2 } else { 6 },
            )?),
            _ => None,
        };
        // llama.cpp's defaults for a file that leaves the caps out (Gemma2Config's too).
        let softcap = |k: &str, default: f32| -> Result<Option<f32>> {
            Ok(match (g.f32(&key(k))?, gemma2) {
                (Some(v), _) => Some(v),
                (None, true) => Some(default),
                (None, false) => None,
            })
        };
        let config = DecoderConfig {
            architecture,
            n_layers,
            hidden_size,
            n_heads,
            n_kv_heads,
            head_dim,
            intermediate_size: g.required_usize(&key("feed_forward_length"))?,
            vocab_size,
            context_length,
            rope_theta: g.f32(&key("rope.freq_base"))?.unwrap_or(10_000.0),
            rope_scaling: match (
                gguf_longrope(file, &g, arch_name, context_length)?,
                gguf_rope_freqs(file, rope_dim)?,
            ) {
                (Some(longrope), None) => Some(longrope),
                (None, Some(factors)) => match gguf_rope_scaling(&g, arch_name, context_length)? {
                    None => Some(factors),
                    Some(other) => {
                        return Err(FormatError::Unsupported(format!(
                            "GGUF tensor rope_freqs.weight together with {} scaling in the \
                             metadata; supported: rope_freqs.weight over plain RoPE",
                            other.name()
                        )))
                    }
                },
                (Some(_), Some(_)) => {
                    return Err(FormatError::Unsupported(
                        "GGUF tensor rope_freqs.weight beside LongRoPE factors; supported: \
                         one or the other"
                            .into(),
                    ))
                }
                (None, None) => gguf_rope_scaling(&g, arch_name, context_length)?,
            },
            rope_dim,
            // llama.cpp's default for the local layers' base.
            local_rope_theta: match (gemma2, gemma3) {
                (_, true) => Some(g.f32(&key("rope.freq_base_swa"))?.unwrap_or(10_000.0)),
                // Gemma 2's local layers share the global base unless the file says otherwise.
                (true, _) => g.f32(&key("rope.freq_base_swa"))?,
                _ => None,
            },
            activation: match gemma {
                true => Activation::GeluTanh,
                false => Activation::Silu,
            },
            norm_eps: g.required_f32(&key("attention.layer_norm_rms_epsilon"))?,
            tie_word_embeddings: !has("output.weight"),
            attention_bias: has("blk.0.attn_q.bias"),
            attention_out_bias: has("blk.0.attn_output.bias"),
            mlp_bias: has("blk.0.ffn_up.bias"),
            qk_norm: has("blk.0.attn_q_norm.weight"),
            sliding_window,
            sliding_layers,
            final_logit_softcap: softcap("final_logit_softcapping", 30.0)?,
            attn_logit_softcap: match gemma2 {
                true => softcap("attn_logit_softcapping", 50.0)?,
                false => None,
            },
            // Not in the file: llama.cpp scales by head_dim^-1/2, and for the 27B models (Gemma
            // 2's 46 layers, Gemma 3's 62) by (hidden / heads)^-1/2, which is what those
            // configs' scalar says.
            query_pre_attn_scalar: match (gemma2, gemma3, n_layers) {
                (true, _, 46) | (_, true, 62) => Some((hidden_size / n_heads) as f32),
                (true, _, _) | (_, true, _) => Some(head_dim as f32),
                _ => None,
            },
            gemma_norms: gemma,
            bos_token_id: g.token_id("tokenizer.ggml.bos_token_id")?,
            eos_token_ids,
            pad_token_id: g.token_id("tokenizer.ggml.padding_token_id")?,
        };
        config.validate("GGUF metadata")?;
        if let Some(embd) = file.tensor("token_embd.weight") {
            let want = [hidden_size as u64, vocab_size as u64];
            if embd.dims != want {
                return Err(malformed(format!(
                    "GGUF token_embd.weight has dims {:?}, expected {want:?} (hidden size, vocab)",
                    embd.dims
                )));
            }
        }
        Ok(config)
    }

    /// Consistency checks shared by both sources; `source` names where the values came from.
    fn validate(&self, source: &str) -> Result<()> {
        let bounded = |name: &str, v: usize, max: usize| {
            if v == 0 || v > max {
                Err(malformed(format!(
                    "{source}: {name} is {v}, expected 1..={max}"
                )))
            } else {
                Ok(())
            }
        };
        bounded("layer count", self.n_layers, MAX_LAYERS)?;
        bounded("hidden size", self.hidden_size, MAX_WIDTH)?;
        bounded("head count", self.n_heads, MAX_WIDTH)?;
        bounded("key/value head count", self.n_kv_heads, MAX_WIDTH)?;
        bounded("head dim", self.head_dim, MAX_WIDTH)?;
        bounded("intermediate size", self.intermediate_size, MAX_WIDTH)?;
        bounded("vocab size", self.vocab_size, MAX_VOCAB)?;
        if let Some(RopeScaling::Dynamic {
            factor,
            original_max_position_embeddings,
        }) = &self.rope_scaling
        {
            // transformers warns that the factor "must be a float or int >= 1" and runs a
            // smaller one anyway (a context shorter than the trained one); refused here.
            if !(factor.is_finite() && *factor >= 1.0) {
                return Err(malformed(format!(
                    "{source}: rope_scaling dynamic factor is {factor}, expected a number >= 1"
                )));
            }
            bounded(
                "dynamic rope max_position_embeddings",
                *original_max_position_embeddings,
                MAX_CONTEXT,
            )?;
            if self.context_length > MAX_CONTEXT {
                return Err(malformed(format!(
                    "{source}: context length {} (max_position_embeddings {} x rope_scaling \
                     dynamic factor {factor}) exceeds {MAX_CONTEXT}",
                    self.context_length, original_max_position_embeddings
                )));
            }
        }
        bounded("context length", self.context_length, MAX_CONTEXT)?;
        if self.n_heads % self.n_kv_heads != 0 {
            return Err(malformed(format!(
                "{source}: head count {} is not a multiple of the key/value head count {}",
                self.n_heads, self.n_kv_heads
            )));
        }
        if self.head_dim % 2 != 0 {
            return Err(malformed(format!(
                "{source}: head dim {} is odd; RoPE rotates pairs",
                self.head_dim
            )));
        }
        let positive = |name: &str, v: f32| {
            if v.is_finite() && v > 0.0 {
                Ok(())
            } else {
                Err(malformed(format!(
                    "{source}: {name} is {v}, expected a positive number"
                )))
            }
        };
        positive("rope theta", self.rope_theta)?;
        positive("norm epsilon", self.norm_eps)?;
        if let Some(cap) = self.final_logit_softcap {
            positive("final logit softcap", cap)?;
        }
        match &self.rope_scaling {
            None => {}
            Some(RopeScaling::Linear { factor }) => positive("rope scaling factor", *factor)?,
            // Checked with the context length above.
            Some(RopeScaling::Dynamic { .. }) => {}
            Some(RopeScaling::Yarn {
                factor,
                original_max_position_embeddings,
                ..
            }) => {
                positive("rope scaling factor", *factor)?;
                bounded(
                    "yarn original context",
                    *original_max_position_embeddings,
                    MAX_CONTEXT,
                )?;
            }
            Some(RopeScaling::LongRope {
                short_factor,
                long_factor,
                original_max_position_embeddings,
                attention_factor,
            }) => {
                bounded(
                    "longrope original_max_position_embeddings",
                    *original_max_position_embeddings,
                    MAX_CONTEXT,
                )?;
                positive("longrope attention_factor", *attention_factor)?;
                for (name, factors) in
                    [("short_factor", short_factor), ("long_factor", long_factor)]
                {
                    if factors.len() != self.rope_dim / 2 {
                        return Err(malformed(format!(
                            "{source}: longrope {name} has {} entries, expected {} (rotary \
                             dims {} / 2)",
                            factors.len(),
                            self.rope_dim / 2,
                            self.rope_dim
                        )));
                    }
                    for (i, &x) in factors.iter().enumerate() {
                        positive(&format!("longrope {name}[{i}]"), x)?;
                    }
                }
            }
            Some(RopeScaling::FreqFactors { factors }) => {
                if factors.len() != self.rope_dim / 2 {
                    return Err(malformed(format!(
                        "{source}: rope_freqs has {} entries, expected {} (rotary dims {} / 2)",
                        factors.len(),
                        self.rope_dim / 2,
                        self.rope_dim
                    )));
                }
                for (i, &x) in factors.iter().enumerate() {
                    positive(&format!("rope_freqs[{i}]"), x)?;
                }
            }
            Some(RopeScaling::Llama3 {
                factor,
                low_freq_factor,
                high_freq_factor,
                original_max_position_embeddings,
            }) => {
                positive("rope scaling factor", *factor)?;
                positive("low_freq_factor", *low_freq_factor)?;
                positive("high_freq_factor", *high_freq_factor)?;
                bounded(
                    "llama3 original context",
                    *original_max_position_embeddings,
                    MAX_CONTEXT,
                )?;
                if high_freq_factor <= low_freq_factor {
                    return Err(malformed(format!(
                        "{source}: llama3 high_freq_factor {high_freq_factor} must exceed \
                         low_freq_factor {low_freq_factor}"
                    )));
                }
            }
        }
        if let Some(w) = self.sliding_window {
            bounded("sliding window", w, MAX_CONTEXT)?;
        }
        if let Some(layers) = &self.sliding_layers {
            if layers.len() != self.n_layers {
                return Err(malformed(format!(
                    "{source}: sliding-window layer list has {} entries for {} layers",
                    layers.len(),
                    self.n_layers
                )));
            }
            if layers.contains(&true) && self.sliding_window.is_none() {
                return Err(malformed(format!(
                    "{source}: sliding-window layers but no sliding_window size"
                )));
            }
        }
        if self.rope_dim == 0 || self.rope_dim % 2 != 0 || self.rope_dim > self.head_dim {
            return Err(malformed(format!(
                "{source}: rotary dims {} (head dim {} x partial_rotary_factor) must be even and \
                 within 2..={}",
                self.rope_dim, self.head_dim, self.head_dim
            )));
        }
        if let Some(t) = self.local_rope_theta {
            positive("local rope theta (rope_local_base_freq)", t)?;
        }
        if let Some(cap) = self.attn_logit_softcap {
            positive("attention logit softcap", cap)?;
        }
        if let Some(q) = self.query_pre_attn_scalar {
            positive("query_pre_attn_scalar", q)?;
        }
        let ids = self
            .bos_token_id
            .iter()
            .chain(&self.eos_token_ids)
            .chain(&self.pad_token_id);
        if let Some(id) = ids.into_iter().find(|&&id| id as usize >= self.vocab_size) {
            return Err(malformed(format!(
                "{source}: special token id {id} is outside the vocabulary of {}",
                self.vocab_size
            )));
        }
        Ok(())
    }
}

fn hf_architecture(f: &JsonFields) -> Result<Architecture> {
    if let Some(model_type) = f.str("model_type")? {
        if model_type == "gemma3" {
            // The multimodal checkpoint: vision tower + `text_config` + language_model weights.
            return Err(FormatError::Unsupported(
                "config.json model_type 'gemma3' (Gemma3ForConditionalGeneration, text and \
                 vision); supported: its text decoder saved alone (model_type gemma3_text)"
                    .into(),
            ));
        }
        return Architecture::from_model_type(model_type)
            .ok_or_else(|| Architecture::unsupported("config.json model_type", model_type));
    }
    let class = f
        .get("architectures")
        .and_then(|v| v.as_array())
        .and_then(|a| a.first())
        .and_then(|v| v.as_str())
        .ok_or_else(|| malformed("config.json: neither model_type nor architectures is given"))?;
    Architecture::ALL
        .into_iter()
        .find(|a| a.hf_class() == class)
        .ok_or_else(|| Architecture::unsupported("config.json architectures", class))
}

const ROPE_TYPES: &str = "default, linear, dynamic, yarn, llama3, longrope";

/// RoPE as one config describes it.
struct HfRope {
    theta: f32,
    scaling: Option<RopeScaling>,
    /// Rotated dims per head.
    dim: usize,
    /// Base of the sliding-window layers (Gemma 3).
    local_theta: Option<f32>,
}

/// RoPE base and scaling from `rope_parameters` (transformers v5) or `rope_theta` +
/// `rope_scaling` (older files); Gemma 3's per-layer-type sets (`full_attention`,
/// `sliding_attention`) or its older `rope_local_base_freq`.
fn hf_rope(
    f: &JsonFields,
    arch: Architecture,
    head_dim: usize,
    context_length: usize,
) -> Result<HfRope> {
    let (params_key, params) = match (f.get("rope_parameters"), f.get("rope_scaling")) {
        (Some(p), _) => ("rope_parameters", Some(p)),
        (None, Some(p)) => ("rope_scaling", Some(p)),
        (None, None) => ("rope_scaling", None),
    };
    let empty = Map::new();
    let params = match params {
        None => &empty,
        Some(Value::Object(m)) => m,
        Some(v) => return Err(f.bad(params_key, v, "an object")),
    };

    // Rotated dims: `int(head_dim * partial_rotary_factor)`, the factor in the parameter set
    // (v5) or at the top level.
    let partial = match (
        params.get("partial_rotary_factor"),
        f.get("partial_rotary_factor"),
    ) {
        (Some(v), _) | (None, Some(v)) if !v.is_null() => Some(
            v.as_f64()
                .ok_or_else(|| f.bad("partial_rotary_factor", v, "a number"))?,
        ),
        _ => None,
    };
    let dim = match partial {
        None => head_dim,
        Some(1.0) => head_dim,
        Some(p) if arch == Architecture::Phi3 && p > 0.0 && p < 1.0 => {
            (head_dim as f64 * p) as usize
        }
        Some(p) => {
            return Err(FormatError::Unsupported(format!(
                "config.json: partial_rotary_factor {p} for {}; supported: 1.0{}",
                arch.model_type(),
                if arch == Architecture::Phi3 {
                    " or a fraction in (0, 1)"
                } else {
                    " (partial rotary runs for phi3 only)"
                }
            )))
        }
    };

    if arch == Architecture::Gemma3 {
        let nested = ["full_attention", "sliding_attention"]
            .iter()
            .any(|k| params.contains_key(*k));
        let (global, local_theta) = if nested {
            let sub = |k: &str| -> Result<&Map<String, Value>> {
                match params.get(k) {
                    None | Some(Value::Null) => Ok(&empty),
                    Some(Value::Object(m)) => Ok(m),
                    Some(v) => Err(f.bad(&format!("{params_key}.{k}"), v, "an object")),
                }
            };
            let global = rope_set(
                f,
                &format!("config.json {params_key}.full_attention"),
                sub("full_attention")?,
                arch,
                f.f32("rope_theta")?.unwrap_or(1_000_000.0),
                dim,
                context_length,
            )?;
            let local_file = format!("config.json {params_key}.sliding_attention");
            let local = rope_set(
                f,
                &local_file,
                sub("sliding_attention")?,
                arch,
                f.f32("rope_local_base_freq")?.unwrap_or(10_000.0),
                dim,
                context_length,
            )?;
            if let Some(s) = local.1 {
                return Err(FormatError::Unsupported(format!(
                    "{local_file}: scaling {s:?} on the sliding-window layers; supported: default"
                )));
            }
            (global, local.0)
        } else {
            let global = rope_set(
                f,
                &format!("config.json {params_key}"),
                params,
                arch,
                f.f32("rope_theta")?.unwrap_or(1_000_000.0),
                dim,
                context_length,
            )?;
            (global, f.f32("rope_local_base_freq")?.unwrap_or(10_000.0))
        };
        return Ok(HfRope {
            theta: global.0,
            scaling: global.1,
            dim,
            local_theta: Some(local_theta),
        });
    }
    let (theta, scaling) = rope_set(
        f,
        &format!("config.json {params_key}"),
        params,
        arch,
        f.f32("rope_theta")?.unwrap_or(10_000.0),
        dim,
        context_length,
    )?;
    Ok(HfRope {
        theta,
        scaling,
        dim,
        local_theta: None,
    })
}

/// One flat RoPE parameter set: `(theta, scaling)`.
fn rope_set(
    f: &JsonFields,
    file: &str,
    params: &Map<String, Value>,
    arch: Architecture,
    default_theta: f32,
    dim: usize,
    context_length: usize,
) -> Result<(f32, Option<RopeScaling>)> {
    let p = JsonFields { file, map: params };
    let theta = p.f32("rope_theta")?.unwrap_or(default_theta);
    let rope_type = match (p.str("rope_type")?, p.str("type")?) {
        (Some(t), _) | (None, Some(t)) => t,
        (None, None) if params.is_empty() || p.get("rope_theta").is_some() => "default",
        // Per-layer-type parameter maps (`{"full_attention": {..}}`) and the like.
        (None, None) => {
            return Err(FormatError::Unsupported(format!(
                "{file} without rope_type (keys: {}); supported: {ROPE_TYPES}",
                params.keys().cloned().collect::<Vec<_>>().join(", ")
            )))
        }
    };
    // Phi3Config reads the old names `su` and `yarn` as LongRoPE and accepts nothing else.
    let rope_type = match (arch, rope_type) {
        (Architecture::Phi3, "su" | "yarn") => "longrope",
        (_, "su") => "longrope",
        (Architecture::Phi3, t @ ("default" | "longrope")) => t,
        (Architecture::Phi3, other) => {
            return Err(FormatError::Unsupported(format!(
                "{file} rope_type '{other}' for phi3; supported: default, longrope (su)"
            )))
        }
        (_, t) => t,
    };
    let factor = || {
        p.f32("factor")?
            .ok_or_else(|| malformed(format!("{file}: {rope_type} scaling needs factor")))
    };
    let original = |default: Option<usize>| {
        p.usize("original_max_position_embeddings")?
            .or(default)
            .ok_or_else(|| {
                malformed(format!(
                    "{file}: {rope_type} scaling needs original_max_position_embeddings"
                ))
            })
    };
    let scaling = match rope_type {
        "default" => None,
        "linear" => Some(RopeScaling::Linear { factor: factor()? }),
        // transformers rescales beyond the config's max_position_embeddings (never a
        // rope_parameters original_max_position_embeddings).
        "dynamic" => Some(RopeScaling::Dynamic {
            factor: p
                .f64("factor")?
                .ok_or_else(|| malformed(format!("{file}: {rope_type} scaling needs factor")))?,
            original_max_position_embeddings: context_length,
        }),
        "yarn" => Some(RopeScaling::Yarn {
            factor: factor()?,
            original_max_position_embeddings: original(Some(context_length))?,
            beta_fast: p.f32("beta_fast")?.unwrap_or(32.0),
            beta_slow: p.f32("beta_slow")?.unwrap_or(1.0),
            attention_factor: p.f32("attention_factor")?,
            mscale: p.f32("mscale")?,
            mscale_all_dim: p.f32("mscale_all_dim")?,
        }),
        "llama3" => {
            let need = |k: &str| {
                p.f32(k)?
                    .ok_or_else(|| malformed(format!("{file}: llama3 scaling needs {k}")))
            };
            Some(RopeScaling::Llama3 {
                factor: factor()?,
                low_freq_factor: need("low_freq_factor")?,
                high_freq_factor: need("high_freq_factor")?,
                original_max_position_embeddings: original(None)?,
            })
        }
        "longrope" => {
            // transformers gives a top-level original_max_position_embeddings priority (Phi3Config
            // always has one, 4096 by default).
            let original = match f.usize("original_max_position_embeddings")? {
                Some(o) => o,
                None if arch == Architecture::Phi3 => 4096,
                None => original(Some(context_length))?,
            };
            if original == 0 {
                return Err(malformed(format!(
                    "{file}: longrope original_max_position_embeddings is 0"
                )));
            }
            let factor = match p.get("factor") {
                Some(_) => factor()? as f64,
                None => context_length as f64 / original as f64,
            };
            let attention_factor = match p.f32("attention_factor")? {
                Some(a) => a,
                None if factor <= 1.0 => 1.0,
                None => (1.0 + factor.ln() / (original as f64).ln()).sqrt() as f32,
            };
            let list = |k: &str| -> Result<Vec<f32>> {
                let v = p
                    .get(k)
                    .ok_or_else(|| malformed(format!("{file}: longrope scaling needs {k}")))?;
                let expected = format!("a list of {} numbers (rotary dims {dim} / 2)", dim / 2);
                let items = v.as_array().ok_or_else(|| p.bad(k, v, &expected))?;
                let values: Option<Vec<f32>> =
                    items.iter().map(|x| x.as_f64().map(|x| x as f32)).collect();
                match values {
                    Some(values) if values.len() == dim / 2 => Ok(values),
                    _ => Err(p.bad(k, v, &expected)),
                }
            };
            Some(RopeScaling::LongRope {
                short_factor: list("short_factor")?,
                long_factor: list("long_factor")?,
                original_max_position_embeddings: original,
                attention_factor,
            })
        }
        other => {
            return Err(FormatError::Unsupported(format!(
                "{file} rope_type '{other}'; supported: {ROPE_TYPES}"
            )))
        }
    };
    Ok((theta, scaling))
}

/// Sliding-window attention: `(window, which layers)`, `None` layers meaning all of them.
/// Qwen's `max_window_layers` and mixed `layer_types` are refused outside Gemma.
fn hf_sliding_window(
    f: &JsonFields,
    arch: Architecture,
    n_layers: usize,
) -> Result<(Option<usize>, Option<Vec<bool>>)> {
    match arch {
        Architecture::Llama => Ok((None, None)),
        Architecture::Mistral => match f.map.get("sliding_window") {
            None => Ok((Some(4096), None)), // MistralConfig's default
            Some(_) => Ok((f.usize("sliding_window")?, None)),
        },
        Architecture::Phi3 => Ok((f.usize("sliding_window")?, None)),
        Architecture::Gemma2 | Architecture::Gemma3 => {
            let layers = match f.get("layer_types") {
                Some(v) => layer_types(f, v, n_layers)?,
                None => {
                    // Gemma 2 alternates from a sliding first layer; Gemma 3 has one global
                    // layer after every `sliding_window_pattern - 1` local ones.
                    let pattern = match arch {
                        Architecture::Gemma2 => 2,
                        _ => f
                            .usize("sliding_window_pattern")?
                            .or(f.usize("_sliding_window_pattern")?)
                            .unwrap_or(6),
                    };
                    if pattern == 0 {
                        return Err(malformed("config.json: sliding_window_pattern is 0"));
                    }
                    (0..n_layers).map(|i| (i + 1) % pattern != 0).collect()
                }
            };
            let window = match f.map.get("sliding_window") {
                None => Some(4096), // the Gemma configs' default
                Some(_) => f.usize("sliding_window")?,
            };
            if layers.contains(&true) && window.is_none() {
                return Err(malformed(
                    "config.json: sliding_attention layers but sliding_window is null",
                ));
            }
            Ok((window, Some(layers)))
        }
        Architecture::Qwen2 | Architecture::Qwen3 => {
            let sliding = match f.get("layer_types") {
                Some(v) => {
                    let layers = layer_types(f, v, n_layers)?;
                    let n_sliding = layers.iter().filter(|&&s| s).count();
                    if n_sliding > 0 && n_sliding < n_layers {
                        return Err(FormatError::Unsupported(format!(
                            "config.json: layer_types {v}; supported: all full_attention or all \
                             sliding_attention"
                        )));
                    }
                    n_sliding > 0
                }
                None => {
                    if !f.bool("use_sliding_window")?.unwrap_or(false) {
                        false
                    } else {
                        // Layers at index >= max_window_layers use the window.
                        match f.usize("max_window_layers")?.unwrap_or(28) {
                            0 => true,
                            m if m >= n_layers => false,
                            m => {
                                return Err(FormatError::Unsupported(format!(
                                    "config.json: sliding window on layers {m}.. of {n_layers} \
                                     (max_window_layers); supported: all layers or none"
                                )))
                            }
                        }
                    }
                }
            };
            if !sliding {
                return Ok((None, None));
            }
            let w = f.usize("sliding_window")?.ok_or_else(|| {
                malformed("config.json: sliding attention layers but no sliding_window size")
            })?;
            Ok((Some(w), None))
        }
    }
}

/// `layer_types` as one flag per layer (true: `sliding_attention`).
fn layer_types(f: &JsonFields, v: &Value, n_layers: usize) -> Result<Vec<bool>> {
    let types = v
        .as_array()
        .ok_or_else(|| f.bad("layer_types", v, "a list"))?;
    if types.len() != n_layers {
        return Err(malformed(format!(
            "config.json: layer_types has {} entries for {n_layers} layers",
            types.len()
        )));
    }
    types
        .iter()
        .map(|t| match t.as_str() {
            Some("sliding_attention") => Ok(true),
            Some("full_attention") => Ok(false),
            _ => Err(FormatError::Unsupported(format!(
                "config.json: layer_types entry {t}; supported: full_attention, \
                 sliding_attention"
            ))),
        })
        .collect()
}

/// The refusal for a GGUF `general.architecture` the runtime does not read, naming those it does.
fn gguf_unsupported_architecture(name: &str) -> FormatError {
    let names: Vec<_> = Architecture::ALL
        .iter()
        .filter(|a| a.runs_from_gguf())
        .map(|a| a.gguf_architecture())
        .collect();
    FormatError::Unsupported(format!(
        "GGUF general.architecture '{name}'; supported: {}",
        names.join(", ")
    ))
}

/// Typed access to GGUF metadata with messages naming the key.
struct GgufFields<'a> {
    file: &'a GgufFile,
}

impl<'a> GgufFields<'a> {
    fn get(&self, key: &str) -> Option<&'a MetadataValue> {
        self.file.get(key)
    }

    fn bad(key: &str, v: &MetadataValue, expected: &str) -> FormatError {
        let shown = match v {
            MetadataValue::Array(a) => format!("an array of {} values", a.len()),
            MetadataValue::String(s) => format!("the string {s:?}"),
            other => format!("{other:?}"),
        };
        malformed(format!("GGUF {key} is {shown}, expected {expected}"))
    }

    fn missing(key: &str) -> FormatError {
        FormatError::NotFound(format!("GGUF metadata key {key}"))
    }

    fn usize(&self, key: &str) -> Result<Option<usize>> {
        self.get(key)
            .map(|v| {
                v.as_u64()
                    .and_then(|n| usize::try_from(n).ok())
                    .ok_or_else(|| Self::bad(key, v, "a non-negative integer"))
            })
            .transpose()
    }

    fn required_usize(&self, key: &str) -> Result<usize> {
        self.usize(key)?.ok_or_else(|| Self::missing(key))
    }

    fn f32(&self, key: &str) -> Result<Option<f32>> {
        self.get(key)
            .map(|v| v.as_f32().ok_or_else(|| Self::bad(key, v, "a number")))
            .transpose()
    }

    fn required_f32(&self, key: &str) -> Result<f32> {
        self.f32(key)?.ok_or_else(|| Self::missing(key))
    }

    fn required_str(&self, key: &str) -> Result<&'a str> {
        let v = self.get(key).ok_or_else(|| Self::missing(key))?;
        v.as_str().ok_or_else(|| Self::bad(key, v, "a string"))
    }

    fn str(&self, key: &str) -> Result<Option<&'a str>> {
        self.get(key)
            .map(|v| v.as_str().ok_or_else(|| Self::bad(key, v, "a string")))
            .transpose()
    }

    fn token_id(&self, key: &str) -> Result<Option<u32>> {
        self.get(key)
            .map(|v| {
                v.as_u64()
                    .and_then(|n| u32::try_from(n).ok())
                    .ok_or_else(|| Self::bad(key, v, "a token id (0..2^32)"))
            })
            .transpose()
    }
}

/// Which layers are local: `key` as an array of bools, or as llama.cpp's pattern `n` (every
/// `n`-th layer global, 0 = all local), by default `default_period` (Gemma 2: 2, Gemma 3: 6).
fn gguf_sliding_pattern(
    g: &GgufFields,
    key: &str,
    n_layers: usize,
    default_period: usize,
) -> Result<Vec<bool>> {
    match g.get(key) {
        Some(MetadataValue::Array(items)) => {
            if items.len() != n_layers {
                return Err(malformed(format!(
                    "GGUF {key} has {} entries for {n_layers} layers",
                    items.len()
                )));
            }
            items
                .iter()
                .map(|v| match v {
                    MetadataValue::Bool(b) => Ok(*b),
                    other => Err(GgufFields::bad(key, other, "an array of bools")),
                })
                .collect()
        }
        _ => {
            let n = g.usize(key)?.unwrap_or(default_period);
            Ok((0..n_layers).map(|i| n == 0 || i % n < n - 1).collect())
        }
    }
}

/// LongRoPE as llama.cpp's phi3 converter writes it: the factors as the tensors
/// `rope_factors_long.weight` / `rope_factors_short.weight` (f32, `rope_dim / 2` each), the
/// pretrained length in `{arch}.rope.scaling.original_context_length` and the attention factor
/// in `{arch}.rope.scaling.attn_factor`. `None` when the file has no factor tensors.
fn gguf_longrope(
    file: &GgufFile,
    g: &GgufFields,
    arch: &str,
    context_length: usize,
) -> Result<Option<RopeScaling>> {
    let (long, short) = (
        file.tensor("rope_factors_long.weight"),
        file.tensor("rope_factors_short.weight"),
    );
    let (long, short) = match (long, short) {
        (None, None) => return Ok(None),
        (Some(l), Some(s)) => (l, s),
        (l, _) => {
            return Err(FormatError::NotFound(format!(
                "GGUF tensor {} (LongRoPE needs both factor tensors)",
                match l {
                    None => "rope_factors_long.weight",
                    Some(_) => "rope_factors_short.weight",
                }
            )))
        }
    };
    let factors = |info: &crate::gguf::TensorInfo| -> Result<Vec<f32>> {
        if info.ggml_type != GgmlType::F32 || info.dims.len() != 1 {
            return Err(malformed(format!(
                "GGUF tensor {} is {} with dims {:?}, expected a 1-d F32 vector",
                info.name, info.ggml_type, info.dims
            )));
        }
        let data = file.tensor_data(info);
        if data.len() as u64 != info.dims[0] * 4 {
            return Err(malformed(format!(
                "GGUF tensor {} holds {} bytes for {} values",
                info.name,
                data.len(),
                info.dims[0]
            )));
        }
        Ok(data
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect())
    };
    let key = |k: &str| format!("{arch}.rope.scaling.{k}");
    let original = g
        .usize(&key("original_context_length"))?
        .ok_or_else(|| GgufFields::missing(&key("original_context_length")))?;
    if original == 0 {
        return Err(malformed(format!(
            "GGUF {} is 0",
            key("original_context_length")
        )));
    }
    // The converter's value; else as transformers derives it from the context lengths.
    let attention_factor = match g.f32(&key("attn_factor"))? {
        Some(a) => a,
        None => {
            let factor = context_length as f64 / original as f64;
            if factor <= 1.0 {
                1.0
            } else {
                (1.0 + factor.ln() / (original as f64).ln()).sqrt() as f32
            }
        }
    };
    Ok(Some(RopeScaling::LongRope {
        short_factor: factors(short)?,
        long_factor: factors(long)?,
        original_max_position_embeddings: original,
        attention_factor,
    }))
}

/// RoPE scaling keys as llama.cpp writes them (`{arch}.rope.scaling.*`).
/// The per-frequency RoPE divisors of llama.cpp's `rope_freqs.weight` tensor, when the file has
/// one: F32, one per rotated pair. Their values are checked with the rest of the config.
fn gguf_rope_freqs(file: &GgufFile, rope_dim: usize) -> Result<Option<RopeScaling>> {
    let Some(info) = file.tensor("rope_freqs.weight") else {
        return Ok(None);
    };
    if info.ggml_type != GgmlType::F32 || info.dims != [rope_dim as u64 / 2] {
        return Err(malformed(format!(
            "GGUF tensor rope_freqs.weight is {} {:?}, expected F32 [{}] (rotary dims {rope_dim} / 2)",
            info.ggml_type,
            info.dims,
            rope_dim / 2
        )));
    }
    let factors = file
        .tensor_data(info)
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    Ok(Some(RopeScaling::FreqFactors { factors }))
}

fn gguf_rope_scaling(
    g: &GgufFields,
    arch: &str,
    context_length: usize,
) -> Result<Option<RopeScaling>> {
    let key = |k: &str| format!("{arch}.rope.scaling.{k}");
    let factor = || {
        g.f32(&key("factor"))?
            .or(g.f32(&format!("{arch}.rope.scale_linear"))?)
            .ok_or_else(|| GgufFields::missing(&key("factor")))
    };
    let kind = match g.str(&key("type"))? {
        Some(t) => t,
        // Older files only carry the linear factor.
        None if g.get(&format!("{arch}.rope.scale_linear")).is_some() => "linear",
        None => "none",
    };
    Ok(match kind {
        "none" => None,
        "linear" => Some(RopeScaling::Linear { factor: factor()? }),
        "yarn" => Some(RopeScaling::Yarn {
            factor: factor()?,
            original_max_position_embeddings: g
                .usize(&key("original_context_length"))?
                .unwrap_or(context_length),
            beta_fast: g.f32(&key("yarn_beta_fast"))?.unwrap_or(32.0),
            beta_slow: g.f32(&key("yarn_beta_slow"))?.unwrap_or(1.0),
            attention_factor: g.f32(&key("attn_factor"))?,
            mscale: None,
            mscale_all_dim: None,
        }),
        other => {
            return Err(FormatError::Unsupported(format!(
                "GGUF {} '{other}'; supported: none, linear, yarn",
                key("type")
            )))
        }
    })
}

impl GenerationDefaults {
    /// Parses `generation_config.json`.
    pub fn from_json(text: &str) -> Result<GenerationDefaults> {
        let file = "generation_config.json";
        let map = parse_object(text, file)?;
        let f = JsonFields { file, map: &map };
        Ok(GenerationDefaults {
            bos_token_id: f.token_id("bos_token_id")?,
            eos_token_ids: f.token_ids("eos_token_id")?,
            pad_token_id: f.token_id("pad_token_id")?,
            do_sample: f.bool("do_sample")?,
            temperature: f.f32("temperature")?,
            top_k: f.usize("top_k")?,
            top_p: f.f32("top_p")?,
            min_p: f.f32("min_p")?,
            repetition_penalty: f.f32("repetition_penalty")?,
            typical_p: f.f32("typical_p")?,
            min_new_tokens: f.usize("min_new_tokens")?,
            max_new_tokens: f.usize("max_new_tokens")?,
            max_length: f.usize("max_length")?,
        })
    }

    /// Token ids that end generation: this file's `eos_token_id` when it gives any (as
    /// transformers' `generate` does), else the model config's.
    pub fn stop_token_ids(&self, config: &DecoderConfig) -> Vec<u32> {
        if self.eos_token_ids.is_empty() {
            config.eos_token_ids.clone()
        } else {
            self.eos_token_ids.clone()
        }
    }
}

#[cfg(test)]
mod tests;
