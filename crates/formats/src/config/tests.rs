//! Config normalization on tiny configs written the way transformers saves them.
use super::*;

/// SmolLM2-135M-Instruct's config.json as published (transformers 4.42 spelling).
const SMOLLM2: &str = r#"{
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu", "hidden_size": 576,
  "initializer_range": 0.041666666666666664, "intermediate_size": 1536, "is_llama_config": true,
  "max_position_embeddings": 8192, "model_type": "llama", "num_attention_heads": 9,
  "num_hidden_layers": 30, "num_key_value_heads": 3, "pad_token_id": 2, "pretraining_tp": 1,
  "rms_norm_eps": 1e-05, "rope_interleaved": false, "rope_scaling": null, "rope_theta": 100000,
  "tie_word_embeddings": true, "torch_dtype": "bfloat16", "transformers_version": "4.42.3",
  "use_cache": true, "vocab_size": 49152}"#;

/// transformers 5 `LlamaConfig(...).to_json_string()` with llama3 scaling.
const LLAMA_V5: &str = r#"{
  "attention_bias": false, "attention_dropout": 0.0, "bos_token_id": 1, "eos_token_id": 2,
  "head_dim": 16, "hidden_act": "silu", "hidden_size": 64, "initializer_range": 0.02,
  "intermediate_size": 128, "max_position_embeddings": 16384, "mlp_bias": false,
  "model_type": "llama", "num_attention_heads": 4, "num_hidden_layers": 2,
  "num_key_value_heads": 2, "pad_token_id": null, "pretraining_tp": 1, "rms_norm_eps": 1e-06,
  "rope_parameters": {"factor": 8.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
    "original_max_position_embeddings": 8192, "rope_theta": 500000.0, "rope_type": "llama3"},
  "tie_word_embeddings": false, "transformers_version": "5.24.0", "use_cache": true,
  "vocab_size": 100}"#;

const QWEN2_V5: &str = r#"{
  "attention_dropout": 0.0, "bos_token_id": null, "eos_token_id": [7, 9], "hidden_act": "silu",
  "hidden_size": 64, "initializer_range": 0.02, "intermediate_size": 128,
  "layer_types": ["full_attention", "full_attention"], "max_position_embeddings": 32768,
  "max_window_layers": 28, "model_type": "qwen2", "num_attention_heads": 4,
  "num_hidden_layers": 2, "num_key_value_heads": 2, "pad_token_id": null, "rms_norm_eps": 1e-06,
  "rope_parameters": {"rope_theta": 1000000.0, "rope_type": "default"}, "sliding_window": null,
  "tie_word_embeddings": true, "transformers_version": "5.24.0", "use_cache": true,
  "use_sliding_window": false, "vocab_size": 100}"#;

const QWEN3_V5: &str = r#"{
  "attention_bias": false, "attention_dropout": 0.0, "bos_token_id": null, "eos_token_id": null,
  "head_dim": 32, "hidden_act": "silu", "hidden_size": 64, "initializer_range": 0.02,
  "intermediate_size": 128, "layer_types": ["full_attention", "full_attention"],
  "max_position_embeddings": 40960, "max_window_layers": 28, "model_type": "qwen3",
  "num_attention_heads": 4, "num_hidden_layers": 2, "num_key_value_heads": 2,
  "pad_token_id": null, "rms_norm_eps": 1e-06,
  "rope_parameters": {"rope_theta": 1000000.0, "rope_type": "yarn", "factor": 4.0,
    "original_max_position_embeddings": 32768}, "sliding_window": null,
  "tie_word_embeddings": false, "transformers_version": "5.24.0", "use_cache": true,
  "use_sliding_window": false, "vocab_size": 100}"#;

const MISTRAL_V5: &str = r#"{
  "attention_dropout": 0.0, "bos_token_id": 1, "eos_token_id": 2, "head_dim": 16,
  "hidden_act": "silu", "hidden_size": 64, "initializer_range": 0.02, "intermediate_size": 128,
  "max_position_embeddings": 131072, "model_type": "mistral", "num_attention_heads": 4,
  "num_hidden_layers": 2, "num_key_value_heads": 2, "pad_token_id": null, "rms_norm_eps": 1e-06,
  "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"}, "sliding_window": 4096,
  "tie_word_embeddings": false, "transformers_version": "5.24.0", "use_cache": true,
  "vocab_size": 100}"#;

fn with(base: &str, key: &str, value: Value) -> String {
    let mut v: Value = serde_json::from_str(base).unwrap();
    v[key] = value;
    v.to_string()
}

fn err(text: &str) -> String {
    DecoderConfig::from_hf_config_json(text)
        .unwrap_err()
        .to_string()
}

#[test]
fn smollm2_legacy_config() {
    let c = DecoderConfig::from_hf_config_json(SMOLLM2).unwrap();
    assert_eq!(
        c,
        DecoderConfig {
            architecture: Architecture::Llama,
            n_layers: 30,
            hidden_size: 576,
            n_heads: 9,
            n_kv_heads: 3,
            head_dim: 64,
            intermediate_size: 1536,
            vocab_size: 49152,
            context_length: 8192,
            rope_theta: 100000.0,
            rope_scaling: None,
            rope_dim: 64,
            local_rope_theta: None,
            activation: Activation::Silu,
            norm_eps: 1e-5,
            tie_word_embeddings: true,
            attention_bias: false,
            attention_out_bias: false,
            mlp_bias: false,
            qk_norm: false,
            sliding_window: None,
            sliding_layers: None,
            final_logit_softcap: None,
            attn_logit_softcap: None,
            query_pre_attn_scalar: None,
            gemma_norms: false,
            bos_token_id: Some(1),
            eos_token_ids: vec![2],
            pad_token_id: Some(2),
        }
    );
}

#[test]
fn llama_v5_with_llama3_rope() {
    let c = DecoderConfig::from_hf_config_json(LLAMA_V5).unwrap();
    assert_eq!(
        (c.head_dim, c.rope_theta, c.pad_token_id),
        (16, 500000.0, None)
    );
    assert_eq!(
        c.rope_scaling,
        Some(RopeScaling::Llama3 {
            factor: 8.0,
            low_freq_factor: 1.0,
            high_freq_factor: 4.0,
            original_max_position_embeddings: 8192
        })
    );
    let biased = with(LLAMA_V5, "attention_bias", Value::Bool(true));
    let c =
        DecoderConfig::from_hf_config_json(&with(&biased, "mlp_bias", Value::Bool(true))).unwrap();
    assert!(c.attention_bias && c.attention_out_bias && c.mlp_bias);
}

#[test]
fn qwen2_has_qkv_bias_only() {
    let c = DecoderConfig::from_hf_config_json(QWEN2_V5).unwrap();
    assert_eq!(c.architecture, Architecture::Qwen2);
    assert!(c.attention_bias && !c.attention_out_bias && !c.mlp_bias && !c.qk_norm);
    assert_eq!(
        (c.head_dim, c.rope_theta, c.tie_word_embeddings),
        (16, 1e6, true)
    );
    assert_eq!(
        (c.eos_token_ids.as_slice(), c.bos_token_id),
        (&[7u32, 9][..], None)
    );
    assert_eq!(c.sliding_window, None);
}

#[test]
fn qwen3_has_qk_norm_explicit_head_dim_and_yarn() {
    let c = DecoderConfig::from_hf_config_json(QWEN3_V5).unwrap();
    assert!(c.qk_norm && !c.attention_bias);
    assert_eq!(
        (c.head_dim, c.n_heads * c.head_dim),
        (32, 128),
        "head_dim is not hidden/heads"
    );
    assert_eq!(
        c.rope_scaling,
        Some(RopeScaling::Yarn {
            factor: 4.0,
            original_max_position_embeddings: 32768,
            beta_fast: 32.0,
            beta_slow: 1.0,
            attention_factor: None,
            mscale: None,
            mscale_all_dim: None
        })
    );
    // Without head_dim Qwen3Config uses 128, not hidden_size / heads.
    let mut v: Value = serde_json::from_str(QWEN3_V5).unwrap();
    v.as_object_mut().unwrap().remove("head_dim");
    assert_eq!(
        DecoderConfig::from_hf_config_json(&v.to_string())
            .unwrap()
            .head_dim,
        128
    );
}

#[test]
fn mistral_sliding_window() {
    let c = DecoderConfig::from_hf_config_json(MISTRAL_V5).unwrap();
    assert_eq!(
        (c.architecture, c.sliding_window),
        (Architecture::Mistral, Some(4096))
    );
    let c = DecoderConfig::from_hf_config_json(&with(MISTRAL_V5, "sliding_window", Value::Null))
        .unwrap();
    assert_eq!(c.sliding_window, None);
}

#[test]
fn qwen_sliding_layouts() {
    let all = with(
        QWEN2_V5,
        "layer_types",
        serde_json::json!(["sliding_attention", "sliding_attention"]),
    );
    let all = with(&all, "sliding_window", serde_json::json!(256));
    assert_eq!(
        DecoderConfig::from_hf_config_json(&all)
            .unwrap()
            .sliding_window,
        Some(256)
    );
    let mixed = with(
        QWEN2_V5,
        "layer_types",
        serde_json::json!(["full_attention", "sliding_attention"]),
    );
    assert!(err(&mixed).contains("supported: all full_attention or all sliding_attention"));
    let mut legacy: Value = serde_json::from_str(QWEN2_V5).unwrap();
    legacy.as_object_mut().unwrap().remove("layer_types");
    legacy["use_sliding_window"] = Value::Bool(true);
    legacy["sliding_window"] = serde_json::json!(64);
    legacy["max_window_layers"] = serde_json::json!(1);
    assert!(err(&legacy.to_string()).contains("max_window_layers"));
    legacy["max_window_layers"] = serde_json::json!(0);
    assert_eq!(
        DecoderConfig::from_hf_config_json(&legacy.to_string())
            .unwrap()
            .sliding_window,
        Some(64)
    );
}

#[test]
fn legacy_rope_scaling_spellings() {
    let linear = with(
        SMOLLM2,
        "rope_scaling",
        serde_json::json!({"type": "linear", "factor": 2.0}),
    );
    assert_eq!(
        DecoderConfig::from_hf_config_json(&linear)
            .unwrap()
            .rope_scaling,
        Some(RopeScaling::Linear { factor: 2.0 })
    );
    let dynamic = with(
        SMOLLM2,
        "rope_scaling",
        serde_json::json!({"rope_type": "dynamic", "factor": 3.0}),
    );
    let c = DecoderConfig::from_hf_config_json(&dynamic).unwrap();
    assert_eq!(
        (c.rope_scaling, c.rope_theta),
        (
            Some(RopeScaling::Dynamic {
                factor: 3.0,
                original_max_position_embeddings: 8192
            }),
            100000.0
        )
    );
    // Dynamic NTK scaling runs past max_position_embeddings, to factor times it.
    assert_eq!(c.context_length, 3 * 8192);
}

#[test]
fn dynamic_rope_scaling_is_read_and_bad_factors_are_refused_by_name() {
    let dynamic = |factor: Value| {
        with(
            SMOLLM2,
            "rope_parameters",
            serde_json::json!({"rope_type": "dynamic", "factor": factor, "rope_theta": 10000.0}),
        )
    };
    // transformers' v5 spelling; factor 1 is allowed (it still rescales past the length) and
    // a fractional factor rounds the context down.
    for (factor, context) in [(1.0, 8192), (2.5, 20480), (1.0001, 8192)] {
        let c = DecoderConfig::from_hf_config_json(&dynamic(serde_json::json!(factor))).unwrap();
        assert_eq!(
            c.rope_scaling,
            Some(RopeScaling::Dynamic {
                factor,
                original_max_position_embeddings: 8192
            })
        );
        assert_eq!((c.rope_theta, c.context_length), (10000.0, context));
    }
    for bad in [0.5, 0.0, -2.0] {
        let msg = err(&dynamic(serde_json::json!(bad)));
        assert!(
            msg.contains("rope_scaling dynamic factor") && msg.contains(">= 1"),
            "{bad}: {msg}"
        );
    }
    let msg = err(&dynamic(serde_json::json!(1e9)));
    assert!(
        msg.contains("context length") && msg.contains("dynamic factor"),
        "{msg}"
    );
    let msg = err(&with(
        SMOLLM2,
        "rope_parameters",
        serde_json::json!({"rope_type": "dynamic", "rope_theta": 10000.0}),
    ));
    assert!(msg.contains("dynamic scaling needs factor"), "{msg}");
}

#[test]
fn unsupported_options_are_refused_by_name() {
    let falcon = with(SMOLLM2, "model_type", Value::String("falcon".into()));
    let msg = err(&falcon);
    assert!(
        msg.contains("'falcon'")
            && msg.contains("llama, mistral, qwen2, qwen3, phi3, gemma2, gemma3_text"),
        "{msg}"
    );
    let gelu = with(SMOLLM2, "hidden_act", Value::String("gelu".into()));
    assert!(err(&gelu).contains("hidden_act 'gelu'; supported: silu, gelu_pytorch_tanh"));
    let longrope = with(
        SMOLLM2,
        "rope_scaling",
        serde_json::json!({"rope_type": "longrope", "factor": 2.0}),
    );
    let msg = err(&longrope);
    assert!(msg.contains("longrope scaling needs short_factor"), "{msg}");
    let unknown = with(
        SMOLLM2,
        "rope_scaling",
        serde_json::json!({"rope_type": "mrope", "factor": 2.0}),
    );
    let msg = err(&unknown);
    assert!(
        msg.contains("'mrope'") && msg.contains("yarn, llama3, longrope"),
        "{msg}"
    );
    let partial = with(SMOLLM2, "partial_rotary_factor", serde_json::json!(0.5));
    assert!(err(&partial).contains("partial_rotary_factor 0.5"));
}

#[test]
fn invalid_values_are_refused() {
    let mut v: Value = serde_json::from_str(SMOLLM2).unwrap();
    v.as_object_mut().unwrap().remove("num_hidden_layers");
    assert!(err(&v.to_string()).contains("required key num_hidden_layers is missing"));
    assert!(err(&with(SMOLLM2, "hidden_size", serde_json::json!(-5))).contains("hidden_size is -5"));
    assert!(
        err(&with(SMOLLM2, "num_key_value_heads", serde_json::json!(4))).contains("not a multiple")
    );
    assert!(
        err(&with(SMOLLM2, "eos_token_id", serde_json::json!(49152))).contains("token id 49152")
    );
    assert!(
        err(&with(SMOLLM2, "num_hidden_layers", serde_json::json!(0))).contains("layer count is 0")
    );
    assert!(err(&with(SMOLLM2, "rms_norm_eps", serde_json::json!(-1.0))).contains("norm epsilon"));
    assert!(err(r#"{"model_type":"llama","model_type":"qwen2"}"#).contains("more than once"));
    assert!(err("[]").contains("config.json"));
}

#[test]
fn generation_defaults() {
    let g = GenerationDefaults::from_json(
        r#"{"bos_token_id": 1, "eos_token_id": [2, 5], "do_sample": true, "temperature": 0.6,
            "top_p": 0.9, "top_k": 20, "transformers_version": "4.42.3"}"#,
    )
    .unwrap();
    assert_eq!(g.eos_token_ids, [2, 5]);
    assert_eq!(
        (g.do_sample, g.temperature, g.top_p, g.top_k),
        (Some(true), Some(0.6), Some(0.9), Some(20))
    );
    let config = DecoderConfig::from_hf_config_json(SMOLLM2).unwrap();
    assert_eq!(g.stop_token_ids(&config), [2, 5]);
    assert_eq!(GenerationDefaults::default().stop_token_ids(&config), [2]);
    assert!(GenerationDefaults::from_json(r#"{"top_k": -1}"#).is_err());
}

mod gguf {
    use super::*;
    use crate::gguf::{gguf_bytes, GgufFile, MetadataValue as V, TensorToWrite};
    use torchnative_quant::GgmlType;

    fn qwen3_metadata() -> Vec<(String, V)> {
        let kv = |k: &str, v: V| (k.to_string(), v);
        vec![
            kv("general.architecture", V::String("qwen3".into())),
            kv("qwen3.block_count", V::U32(2)),
            kv("qwen3.context_length", V::U32(40960)),
            kv("qwen3.embedding_length", V::U32(8)),
            kv("qwen3.feed_forward_length", V::U32(24)),
            kv("qwen3.attention.head_count", V::U32(4)),
            kv("qwen3.attention.head_count_kv", V::U32(2)),
            kv("qwen3.attention.key_length", V::U32(4)),
            kv("qwen3.attention.value_length", V::U32(4)),
            kv("qwen3.rope.freq_base", V::F32(1e6)),
            kv("qwen3.attention.layer_norm_rms_epsilon", V::F32(1e-6)),
            kv(
                "tokenizer.ggml.tokens",
                V::Array((0..6).map(|i| V::String(format!("t{i}"))).collect()),
            ),
            kv("tokenizer.ggml.bos_token_id", V::U32(1)),
            kv("tokenizer.ggml.eos_token_id", V::U32(5)),
            kv("tokenizer.ggml.eot_token_id", V::U32(4)),
        ]
    }

    fn file(metadata: &[(String, V)], tensor_names: &[&str]) -> GgufFile {
        // Every value 1.0 (LongRoPE factor tensors are read).
        let data: Vec<u8> = (0..48).flat_map(|_| 1.0f32.to_le_bytes()).collect();
        let tensors: Vec<TensorToWrite> = tensor_names
            .iter()
            .map(|&name| {
                let dims = if name == "token_embd.weight" {
                    vec![8, 6]
                } else {
                    vec![4]
                };
                let n = dims.iter().product::<u64>() as usize * 4;
                TensorToWrite {
                    name: name.into(),
                    dims,
                    ggml_type: GgmlType::F32,
                    data: &data[..n],
                }
            })
            .collect();
        GgufFile::from_bytes(gguf_bytes(metadata, &tensors).unwrap()).unwrap()
    }

    const QWEN3_TENSORS: [&str; 4] = [
        "token_embd.weight",
        "output.weight",
        "blk.0.attn_q_norm.weight",
        "blk.0.attn_k_norm.weight",
    ];

    #[test]
    fn qwen3_from_gguf() {
        let c = DecoderConfig::from_gguf(&file(&qwen3_metadata(), &QWEN3_TENSORS)).unwrap();
        assert_eq!(c.architecture, Architecture::Qwen3);
        assert_eq!(
            (
                c.n_layers,
                c.hidden_size,
                c.n_heads,
                c.n_kv_heads,
                c.head_dim
            ),
            (2, 8, 4, 2, 4)
        );
        assert_eq!(
            (c.intermediate_size, c.vocab_size, c.context_length),
            (24, 6, 40960)
        );
        assert_eq!(
            (c.rope_theta, c.norm_eps, c.rope_scaling.clone()),
            (1e6, 1e-6, None)
        );
        assert!(c.qk_norm && !c.tie_word_embeddings && !c.attention_bias);
        assert_eq!(
            (c.bos_token_id, c.eos_token_ids.as_slice()),
            (Some(1), &[5u32, 4][..])
        );
        // Tied when output.weight is absent.
        let tied = DecoderConfig::from_gguf(&file(&qwen3_metadata(), &QWEN3_TENSORS[..1])).unwrap();
        assert!(tied.tie_word_embeddings && !tied.qk_norm);
    }

    #[test]
    fn gguf_yarn_scaling() {
        let mut m = qwen3_metadata();
        m.push(("qwen3.rope.scaling.type".into(), V::String("yarn".into())));
        m.push(("qwen3.rope.scaling.factor".into(), V::F32(4.0)));
        m.push((
            "qwen3.rope.scaling.original_context_length".into(),
            V::U32(32768),
        ));
        let c = DecoderConfig::from_gguf(&file(&m, &QWEN3_TENSORS)).unwrap();
        assert!(matches!(
            c.rope_scaling,
            Some(RopeScaling::Yarn {
                factor: 4.0,
                original_max_position_embeddings: 32768,
                ..
            })
        ));
    }

    fn phi3_metadata() -> Vec<(String, V)> {
        let kv = |k: &str, v: V| (k.to_string(), v);
        vec![
            kv("general.architecture", V::String("phi3".into())),
            kv("phi3.block_count", V::U32(1)),
            kv("phi3.context_length", V::U32(256)),
            kv("phi3.embedding_length", V::U32(8)),
            kv("phi3.feed_forward_length", V::U32(24)),
            kv("phi3.attention.head_count", V::U32(1)),
            kv("phi3.attention.head_count_kv", V::U32(1)),
            kv("phi3.attention.layer_norm_rms_epsilon", V::F32(1e-5)),
            kv("phi3.rope.dimension_count", V::U32(8)),
            kv("phi3.rope.freq_base", V::F32(1e4)),
            kv("phi3.attention.sliding_window", V::U32(0)),
            kv("phi3.rope.scaling.original_context_length", V::U32(16)),
            kv("phi3.rope.scaling.attn_factor", V::F32(1.25)),
            kv(
                "tokenizer.ggml.tokens",
                V::Array((0..6).map(|i| V::String(format!("t{i}"))).collect()),
            ),
        ]
    }

    /// llama.cpp's phi3 layout: fused tensors, LongRoPE factors as tensors, window 0 = none.
    #[test]
    fn phi3_from_gguf_with_longrope_tensors() {
        let tensors = [
            "token_embd.weight",
            "rope_factors_long.weight",
            "rope_factors_short.weight",
        ];
        let c = DecoderConfig::from_gguf(&file(&phi3_metadata(), &tensors)).unwrap();
        assert_eq!(c.architecture, Architecture::Phi3);
        assert_eq!((c.head_dim, c.rope_dim, c.sliding_window), (8, 8, None));
        assert_eq!(
            c.rope_scaling,
            Some(RopeScaling::LongRope {
                short_factor: vec![1.0; 4],
                long_factor: vec![1.0; 4],
                original_max_position_embeddings: 16,
                attention_factor: 1.25,
            })
        );
        let names = crate::names::expected_tensors(&c, crate::names::Naming::Gguf);
        assert!(names.contains(&"blk.0.attn_qkv.weight".to_string()));
        assert!(names.contains(&"blk.0.ffn_up.weight".to_string()));
        assert!(!names.iter().any(|n| n.contains("ffn_gate")));
        // One factor tensor without the other, and a missing original length, are named.
        let msg = DecoderConfig::from_gguf(&file(&phi3_metadata(), &tensors[..2]))
            .unwrap_err()
            .to_string();
        assert!(msg.contains("rope_factors_short.weight"), "{msg}");
        let mut m = phi3_metadata();
        m.retain(|(k, _)| k != "phi3.rope.scaling.original_context_length");
        let msg = DecoderConfig::from_gguf(&file(&m, &tensors))
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("phi3.rope.scaling.original_context_length"),
            "{msg}"
        );
    }

    /// llama.cpp's gemma3: the window pattern (default every 6th layer global, or an int, or a
    /// bool per layer), the local base (default 10000), scale by head_dim, Gemma's norm names.
    #[test]
    fn gemma3_from_gguf_takes_llama_cpp_defaults() {
        let kv = |k: &str, v: V| (k.to_string(), v);
        let base = vec![
            kv("general.architecture", V::String("gemma3".into())),
            kv("gemma3.block_count", V::U32(7)),
            kv("gemma3.context_length", V::U32(256)),
            kv("gemma3.embedding_length", V::U32(8)),
            kv("gemma3.feed_forward_length", V::U32(24)),
            kv("gemma3.attention.head_count", V::U32(2)),
            kv("gemma3.attention.head_count_kv", V::U32(1)),
            kv("gemma3.attention.key_length", V::U32(4)),
            kv("gemma3.attention.layer_norm_rms_epsilon", V::F32(1e-6)),
            kv("gemma3.attention.sliding_window", V::U32(8)),
            kv(
                "tokenizer.ggml.tokens",
                V::Array((0..6).map(|i| V::String(format!("t{i}"))).collect()),
            ),
        ];
        let tensors = ["token_embd.weight", "blk.0.attn_q_norm.weight"];
        let c = DecoderConfig::from_gguf(&file(&base, &tensors)).unwrap();
        assert_eq!(c.architecture, Architecture::Gemma3);
        assert_eq!(
            c.sliding_layers,
            Some(vec![true, true, true, true, true, false, true])
        );
        assert_eq!(
            (c.local_rope_theta, c.query_pre_attn_scalar, c.activation),
            (Some(10000.0), Some(4.0), Activation::GeluTanh)
        );
        assert!(c.gemma_norms && c.qk_norm && c.tie_word_embeddings);
        let mut m = base.clone();
        m.push(kv("gemma3.attention.sliding_window_pattern", V::U32(2)));
        m.push(kv("gemma3.rope.freq_base_swa", V::F32(20000.0)));
        let c = DecoderConfig::from_gguf(&file(&m, &tensors)).unwrap();
        assert_eq!(
            c.sliding_layers,
            Some(vec![true, false, true, false, true, false, true])
        );
        assert_eq!(c.local_rope_theta, Some(20000.0));
        let mut m = base.clone();
        m.push(kv(
            "gemma3.attention.sliding_window_pattern",
            V::Array(vec![V::Bool(true); 3]),
        ));
        let msg = DecoderConfig::from_gguf(&file(&m, &tensors))
            .unwrap_err()
            .to_string();
        assert!(msg.contains("3 entries for 7 layers"), "{msg}");
        let names = crate::names::expected_tensors(&c, crate::names::Naming::Gguf);
        for n in [
            "blk.0.post_attention_norm.weight",
            "blk.0.post_ffw_norm.weight",
            "blk.0.ffn_norm.weight",
        ] {
            assert!(names.contains(&n.to_string()), "{n}");
        }
        assert_eq!(
            crate::names::hf_to_gguf_in("gemma3", "model.layers.2.post_attention_layernorm.weight")
                .as_deref(),
            Some("blk.2.post_attention_norm.weight")
        );
        assert_eq!(
            crate::names::hf_to_gguf_in("llama", "model.layers.2.post_attention_layernorm.weight")
                .as_deref(),
            Some("blk.2.ffn_norm.weight")
        );
    }

    /// llama.cpp's gemma2: the keys its converter writes (softcaps, window), and its defaults
    /// for a file without them (window 4096, caps 50 / 30, Gemma2Config's too); layers
    /// alternate from a sliding first one; the scale is head_dim (hidden / heads for the
    /// 46-layer 27B); the local layers share the global RoPE base.
    #[test]
    fn gemma2_from_gguf_reads_the_converter_keys_and_llama_cpp_defaults() {
        let kv = |k: &str, v: V| (k.to_string(), v);
        let base = |layers: u32| {
            vec![
                kv("general.architecture", V::String("gemma2".into())),
                kv("gemma2.block_count", V::U32(layers)),
                kv("gemma2.context_length", V::U32(256)),
                kv("gemma2.embedding_length", V::U32(8)),
                kv("gemma2.feed_forward_length", V::U32(24)),
                kv("gemma2.attention.head_count", V::U32(4)),
                kv("gemma2.attention.head_count_kv", V::U32(1)),
                kv("gemma2.attention.key_length", V::U32(4)),
                kv("gemma2.attention.value_length", V::U32(4)),
                kv("gemma2.attention.layer_norm_rms_epsilon", V::F32(1e-6)),
                kv(
                    "tokenizer.ggml.tokens",
                    V::Array((0..6).map(|i| V::String(format!("t{i}"))).collect()),
                ),
            ]
        };
        let tensors = ["token_embd.weight"];
        let c = DecoderConfig::from_gguf(&file(&base(5), &tensors)).unwrap();
        assert_eq!(c.architecture, Architecture::Gemma2);
        assert_eq!(c.sliding_window, Some(4096));
        assert_eq!(c.sliding_layers, Some(vec![true, false, true, false, true]));
        assert_eq!(
            (c.attn_logit_softcap, c.final_logit_softcap),
            (Some(50.0), Some(30.0))
        );
        assert_eq!(
            (c.local_rope_theta, c.query_pre_attn_scalar, c.activation),
            (None, Some(4.0), Activation::GeluTanh)
        );
        assert!(c.gemma_norms && !c.qk_norm && c.tie_word_embeddings);
        let mut m = base(5);
        m.push(kv("gemma2.attention.sliding_window", V::U32(8)));
        m.push(kv("gemma2.attn_logit_softcapping", V::F32(2.0)));
        m.push(kv("gemma2.final_logit_softcapping", V::F32(3.0)));
        m.push(kv("gemma2.rope.freq_base_swa", V::F32(500.0)));
        let c = DecoderConfig::from_gguf(&file(&m, &tensors)).unwrap();
        assert_eq!(c.sliding_window, Some(8));
        assert_eq!(
            (
                c.attn_logit_softcap,
                c.final_logit_softcap,
                c.local_rope_theta
            ),
            (Some(2.0), Some(3.0), Some(500.0))
        );
        let c = DecoderConfig::from_gguf(&file(&base(46), &tensors)).unwrap();
        assert_eq!(c.query_pre_attn_scalar, Some(2.0));
        let names = crate::names::expected_tensors(&c, crate::names::Naming::Gguf);
        assert!(names.contains(&"blk.45.post_ffw_norm.weight".to_string()));
        assert!(!names.iter().any(|n| n.contains("attn_q_norm")));
    }

    /// llama.cpp's `rope_freqs.weight` (Llama 3.1 scaling baked into a tensor) is read as
    /// per-frequency divisors; bad ones are refused by name.
    #[test]
    fn gguf_rope_freqs_become_frequency_divisors() {
        let with = |metadata: &[(String, V)], factors: &[f32]| {
            let embd: Vec<u8> = (0..48).flat_map(|_| 1.0f32.to_le_bytes()).collect();
            let freqs: Vec<u8> = factors.iter().flat_map(|f| f.to_le_bytes()).collect();
            let tensors = [
                TensorToWrite {
                    name: "token_embd.weight".into(),
                    dims: vec![8, 6],
                    ggml_type: GgmlType::F32,
                    data: &embd,
                },
                TensorToWrite {
                    name: "rope_freqs.weight".into(),
                    dims: vec![factors.len() as u64],
                    ggml_type: GgmlType::F32,
                    data: &freqs,
                },
            ];
            let file = GgufFile::from_bytes(gguf_bytes(metadata, &tensors).unwrap()).unwrap();
            DecoderConfig::from_gguf(&file)
        };
        let c = with(&qwen3_metadata(), &[1.0, 2.5]).unwrap();
        assert_eq!(
            c.rope_scaling,
            Some(RopeScaling::FreqFactors {
                factors: vec![1.0, 2.5]
            })
        );
        let msg = with(&qwen3_metadata(), &[0.0, 1.0])
            .unwrap_err()
            .to_string();
        assert!(msg.contains("rope_freqs[0] is 0"), "{msg}");
        let msg = with(&qwen3_metadata(), &[1.0, f32::NAN])
            .unwrap_err()
            .to_string();
        assert!(msg.contains("rope_freqs[1] is NaN"), "{msg}");
        let msg = with(&qwen3_metadata(), &[1.0, 2.0, 3.0])
            .unwrap_err()
            .to_string();
        assert!(msg.contains("expected F32 [2]"), "{msg}");
        let mut m = qwen3_metadata();
        m.push(("qwen3.rope.scaling.type".into(), V::String("linear".into())));
        m.push(("qwen3.rope.scaling.factor".into(), V::F32(2.0)));
        let msg = with(&m, &[1.0, 2.0]).unwrap_err().to_string();
        assert!(
            msg.contains("rope_freqs.weight together with linear"),
            "{msg}"
        );
    }

    #[test]
    fn gguf_refusals_name_the_problem() {
        let err = |m: &[(String, V)], t: &[&str]| {
            DecoderConfig::from_gguf(&file(m, t))
                .unwrap_err()
                .to_string()
        };
        let mut m = qwen3_metadata();
        m[0].1 = V::String("falcon".into());
        let msg = err(&m, &QWEN3_TENSORS);
        assert!(
            msg.contains("'falcon'") && msg.contains("supported: llama, mistral, qwen2, qwen3"),
            "{msg}"
        );
        // The list names llama.cpp's architecture names (gemma3, not gemma3_text).
        assert!(msg.contains("gemma2, gemma3"), "{msg}");
        let mut m = qwen3_metadata();
        m[0].1 = V::String("gemma3_text".into());
        assert!(err(&m, &QWEN3_TENSORS).contains("'gemma3_text'"));
        let msg = err(
            &qwen3_metadata(),
            &["token_embd.weight", "rope_freqs.weight"],
        );
        assert!(
            msg.contains("rope_freqs.weight is F32 [4], expected F32 [2]"),
            "{msg}"
        );
        let mut m = qwen3_metadata();
        m.push(("qwen3.rope.dimension_count".into(), V::U32(2)));
        assert!(err(&m, &QWEN3_TENSORS).contains("partial rotary"));
        let mut m = qwen3_metadata();
        m.retain(|(k, _)| k != "qwen3.block_count");
        assert!(err(&m, &QWEN3_TENSORS).contains("qwen3.block_count"));
        let mut m = qwen3_metadata();
        m[1].1 = V::String("2".into());
        let msg = err(&m, &QWEN3_TENSORS);
        assert!(
            msg.contains("qwen3.block_count is the string \"2\""),
            "{msg}"
        );
        let mut m = qwen3_metadata();
        m.push(("qwen3.vocab_size".into(), V::U32(7)));
        assert!(err(&m, &QWEN3_TENSORS).contains("tokenizer.ggml.tokens has 6"));
        let mut m = qwen3_metadata();
        m.push(("tokenizer.ggml.padding_token_id".into(), V::U32(6)));
        assert!(err(&m, &QWEN3_TENSORS).contains("token id 6 is outside the vocabulary of 6"));
        let mut m = qwen3_metadata();
        m.push((
            "qwen3.rope.scaling.type".into(),
            V::String("longrope".into()),
        ));
        assert!(err(&m, &QWEN3_TENSORS).contains("'longrope'; supported: none, linear, yarn"));
    }
}

/// The tiny Phi-3 with LongRoPE that the runtime's parity test builds (transformers 5.24 file).
const PHI3_LONGROPE: &str = r#"{
  "architectures": ["Phi3ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 1,
  "dtype": "float32", "embd_pdrop": 0.0, "eos_token_id": 2, "hidden_act": "silu",
  "hidden_size": 64, "initializer_range": 0.02, "intermediate_size": 96,
  "max_position_embeddings": 256, "model_type": "phi3", "num_attention_heads": 4,
  "num_hidden_layers": 2, "num_key_value_heads": 2, "original_max_position_embeddings": 16,
  "pad_token_id": 0, "resid_pdrop": 0.0, "rms_norm_eps": 1e-05,
  "rope_parameters": {"long_factor": [1.5, 3.5, 5.5, 7.5, 9.5, 11.5],
    "original_max_position_embeddings": 16, "partial_rotary_factor": 0.75,
    "rope_theta": 10000.0, "rope_type": "longrope",
    "short_factor": [1.0, 1.1, 1.2, 1.3, 1.4, 1.5]},
  "sliding_window": null, "tie_word_embeddings": false, "transformers_version": "5.24.0",
  "use_cache": true, "vocab_size": 320}"#;

const GEMMA2: &str = r#"{
  "architectures": ["Gemma2ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "attn_logit_softcapping": 2.0, "bos_token_id": 1, "dtype": "float32", "eos_token_id": 2,
  "final_logit_softcapping": 3.0, "head_dim": 16, "hidden_activation": "gelu_pytorch_tanh",
  "hidden_size": 64, "initializer_range": 0.02, "intermediate_size": 96,
  "layer_types": ["sliding_attention", "full_attention", "sliding_attention"],
  "max_position_embeddings": 256, "model_type": "gemma2", "num_attention_heads": 4,
  "num_hidden_layers": 3, "num_key_value_heads": 2, "pad_token_id": 0,
  "query_pre_attn_scalar": 24, "rms_norm_eps": 1e-05,
  "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"}, "sliding_window": 8,
  "tie_word_embeddings": true, "transformers_version": "5.24.0",
  "use_bidirectional_attention": null, "use_cache": true, "vocab_size": 320}"#;

const GEMMA3_TEXT: &str = r#"{
  "_sliding_window_pattern": 6, "architectures": ["Gemma3ForCausalLM"],
  "attention_bias": false, "attention_dropout": 0.0, "attn_logit_softcapping": null,
  "bos_token_id": 1, "dtype": "float32", "eos_token_id": 2, "final_logit_softcapping": 3.0,
  "head_dim": 16, "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 64,
  "initializer_range": 0.02, "intermediate_size": 96,
  "layer_types": ["sliding_attention", "sliding_attention", "full_attention"],
  "max_position_embeddings": 256, "model_type": "gemma3_text", "num_attention_heads": 4,
  "num_hidden_layers": 3, "num_key_value_heads": 2, "pad_token_id": 0,
  "query_pre_attn_scalar": 16, "rms_norm_eps": 1e-05,
  "rope_parameters": {"full_attention": {"factor": 2.0, "rope_theta": 1000000.0,
    "rope_type": "linear"}, "sliding_attention": {"rope_theta": 10000.0, "rope_type": "default"}},
  "sliding_window": 8, "tie_word_embeddings": true, "transformers_version": "5.24.0",
  "use_bidirectional_attention": false, "use_cache": true, "vocab_size": 320}"#;

fn without(base: &str, key: &str) -> String {
    let mut v: Value = serde_json::from_str(base).unwrap();
    v.as_object_mut().unwrap().remove(key);
    v.to_string()
}

#[test]
fn phi3_longrope_partial_rotary() {
    let c = DecoderConfig::from_hf_config_json(PHI3_LONGROPE).unwrap();
    assert_eq!(c.architecture, Architecture::Phi3);
    assert_eq!((c.head_dim, c.rope_dim, c.rope_theta), (16, 12, 10000.0));
    assert!(!c.attention_bias && !c.tie_word_embeddings && c.sliding_window.is_none());
    // factor = 256 / 16 = 16: attention factor sqrt(1 + ln 16 / ln 16) = sqrt 2.
    let Some(RopeScaling::LongRope {
        short_factor,
        long_factor,
        original_max_position_embeddings,
        attention_factor,
    }) = c.rope_scaling
    else {
        panic!("{:?}", c.rope_scaling)
    };
    assert_eq!(short_factor, vec![1.0, 1.1, 1.2, 1.3, 1.4, 1.5]);
    assert_eq!(long_factor[5], 11.5);
    assert_eq!(original_max_position_embeddings, 16);
    assert_eq!(attention_factor, std::f32::consts::SQRT_2);
    // The old name `su` (and Phi3Config's reading of `yarn`) is LongRoPE; other types are not.
    let mut v: Value = serde_json::from_str(PHI3_LONGROPE).unwrap();
    v["rope_parameters"]["rope_type"] = Value::String("su".into());
    let su = DecoderConfig::from_hf_config_json(&v.to_string()).unwrap();
    assert!(matches!(
        su.rope_scaling,
        Some(RopeScaling::LongRope { .. })
    ));
    v["rope_parameters"]["rope_type"] = Value::String("linear".into());
    let msg = err(&v.to_string());
    assert!(
        msg.contains("rope_type 'linear' for phi3; supported: default, longrope"),
        "{msg}"
    );
    // An explicit attention_factor wins; factor <= 1 means none.
    v["rope_parameters"]["rope_type"] = Value::String("longrope".into());
    v["rope_parameters"]["attention_factor"] = serde_json::json!(1.25);
    let c = DecoderConfig::from_hf_config_json(&v.to_string()).unwrap();
    assert!(matches!(
        c.rope_scaling,
        Some(RopeScaling::LongRope { attention_factor, .. }) if attention_factor == 1.25
    ));
}

#[test]
fn phi3_bad_longrope_configs_name_the_field() {
    let mut v: Value = serde_json::from_str(PHI3_LONGROPE).unwrap();
    v["rope_parameters"]
        .as_object_mut()
        .unwrap()
        .remove("long_factor");
    let msg = err(&v.to_string());
    assert!(msg.contains("longrope scaling needs long_factor"), "{msg}");
    let mut v: Value = serde_json::from_str(PHI3_LONGROPE).unwrap();
    v["rope_parameters"]["short_factor"] = serde_json::json!([1.0, 2.0]);
    let msg = err(&v.to_string());
    assert!(
        msg.contains("short_factor") && msg.contains("a list of 6 numbers (rotary dims 12 / 2)"),
        "{msg}"
    );
    let mut v: Value = serde_json::from_str(PHI3_LONGROPE).unwrap();
    v["rope_parameters"]["long_factor"] = serde_json::json!([1.0, 2.0, 3.0, 4.0, 5.0, -6.0]);
    let msg = err(&v.to_string());
    assert!(msg.contains("longrope long_factor[5] is -6"), "{msg}");
    let mut v: Value = serde_json::from_str(PHI3_LONGROPE).unwrap();
    v["rope_parameters"]["partial_rotary_factor"] = serde_json::json!(0.0625);
    let msg = err(&v.to_string());
    assert!(msg.contains("rotary dims 1"), "{msg}");
    // Partial rotary is a Phi-3 feature here.
    let llama = with(LLAMA_V5, "partial_rotary_factor", serde_json::json!(0.5));
    assert!(err(&llama).contains("partial rotary runs for phi3 only"));
    assert!(err(&without(PHI3_LONGROPE, "intermediate_size"))
        .contains("required key intermediate_size is missing"));
}

#[test]
fn gemma2_layout_softcaps_and_alternating_windows() {
    let c = DecoderConfig::from_hf_config_json(GEMMA2).unwrap();
    assert_eq!(c.architecture, Architecture::Gemma2);
    assert_eq!(c.activation, Activation::GeluTanh);
    assert!(c.gemma_norms && c.tie_word_embeddings && !c.qk_norm);
    assert_eq!(
        (
            c.attn_logit_softcap,
            c.final_logit_softcap,
            c.query_pre_attn_scalar
        ),
        (Some(2.0), Some(3.0), Some(24.0))
    );
    assert_eq!(c.sliding_window, Some(8));
    assert_eq!(c.sliding_layers, Some(vec![true, false, true]));
    assert_eq!((c.local_rope_theta, c.rope_dim), (None, 16));
    // Absent keys take Gemma2Config's defaults: caps 30 / 50, scalar 256, alternating layers
    // from a sliding first one, head_dim 256.
    let mut bare = without(GEMMA2, "attn_logit_softcapping");
    for k in [
        "final_logit_softcapping",
        "query_pre_attn_scalar",
        "layer_types",
        "head_dim",
    ] {
        bare = without(&bare, k);
    }
    let c = DecoderConfig::from_hf_config_json(&bare).unwrap();
    assert_eq!(
        (
            c.attn_logit_softcap,
            c.final_logit_softcap,
            c.query_pre_attn_scalar
        ),
        (Some(50.0), Some(30.0), Some(256.0))
    );
    assert_eq!(c.sliding_layers, Some(vec![true, false, true]));
    assert_eq!(c.head_dim, 256);
    // Explicit nulls turn the caps off.
    let off = with(GEMMA2, "attn_logit_softcapping", Value::Null);
    let c = DecoderConfig::from_hf_config_json(&off).unwrap();
    assert_eq!(c.attn_logit_softcap, None);
}

#[test]
fn gemma3_text_local_and_global_rope() {
    let c = DecoderConfig::from_hf_config_json(GEMMA3_TEXT).unwrap();
    assert_eq!(c.architecture, Architecture::Gemma3);
    assert!(c.qk_norm && c.gemma_norms);
    assert_eq!(c.rope_theta, 1e6);
    assert_eq!(c.rope_scaling, Some(RopeScaling::Linear { factor: 2.0 }));
    assert_eq!(c.local_rope_theta, Some(10000.0));
    assert_eq!(c.sliding_layers, Some(vec![true, true, false]));
    // transformers passes no softcap to Gemma 3's attention.
    assert_eq!(c.attn_logit_softcap, None);
    // Older spelling: rope_theta + rope_local_base_freq + rope_scaling, sliding_window_pattern.
    let mut v: Value = serde_json::from_str(&without(GEMMA3_TEXT, "rope_parameters")).unwrap();
    let o = v.as_object_mut().unwrap();
    o.remove("layer_types");
    o.insert("rope_theta".into(), serde_json::json!(500000.0));
    o.insert("rope_local_base_freq".into(), serde_json::json!(20000.0));
    o.insert("sliding_window_pattern".into(), serde_json::json!(2));
    o.insert(
        "rope_scaling".into(),
        serde_json::json!({"rope_type": "linear", "factor": 8.0}),
    );
    let c = DecoderConfig::from_hf_config_json(&v.to_string()).unwrap();
    assert_eq!(
        (c.rope_theta, c.local_rope_theta),
        (500000.0, Some(20000.0))
    );
    assert_eq!(c.rope_scaling, Some(RopeScaling::Linear { factor: 8.0 }));
    assert_eq!(c.sliding_layers, Some(vec![true, false, true]));
}

#[test]
fn gemma_bad_configs_name_the_field() {
    let mut v: Value = serde_json::from_str(GEMMA3_TEXT).unwrap();
    v["rope_parameters"]["sliding_attention"] =
        serde_json::json!({"rope_type": "linear", "factor": 2.0});
    let msg = err(&v.to_string());
    assert!(
        msg.contains("rope_parameters.sliding_attention") && msg.contains("supported: default"),
        "{msg}"
    );
    let msg = err(&with(
        GEMMA3_TEXT,
        "layer_types",
        serde_json::json!(["sliding_attention"]),
    ));
    assert!(
        msg.contains("layer_types has 1 entries for 3 layers"),
        "{msg}"
    );
    let msg = err(&with(
        GEMMA3_TEXT,
        "layer_types",
        serde_json::json!(["sliding_attention", "chunked_attention", "full_attention"]),
    ));
    assert!(msg.contains("\"chunked_attention\""), "{msg}");
    let msg = err(&with(GEMMA2, "sliding_window", Value::Null));
    assert!(msg.contains("sliding_window is null"), "{msg}");
    let msg = err(&with(
        GEMMA3_TEXT,
        "use_bidirectional_attention",
        Value::Bool(true),
    ));
    assert!(msg.contains("use_bidirectional_attention"), "{msg}");
    let msg = err(&with(
        GEMMA2,
        "hidden_activation",
        Value::String("relu".into()),
    ));
    assert!(msg.contains("hidden_activation 'relu'"), "{msg}");
    let msg = err(&with(GEMMA2, "query_pre_attn_scalar", serde_json::json!(0)));
    assert!(msg.contains("query_pre_attn_scalar"), "{msg}");
    let msg = err(&with(
        GEMMA3_TEXT,
        "model_type",
        Value::String("gemma3".into()),
    ));
    assert!(msg.contains("gemma3_text"), "{msg}");
}
