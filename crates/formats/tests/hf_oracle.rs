//! HF configs and safetensors checkpoints against transformers: configs as AutoConfig
//! normalizes them, checkpoints as save_pretrained writes them (single and sharded).
mod common;

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{json, Value as Json};
use torchnative_formats::config::load_hf_config;
use torchnative_formats::names::{expected_tensors, Naming};
use torchnative_formats::safetensors::{Dtype, SafetensorsFile, SafetensorsModel};
use torchnative_formats::{Activation, DecoderConfig, RopeScaling};

/// Config cases as found in the wild: published files, minimal ones relying on defaults, and
/// each RoPE / bias / sliding-window variant we accept.
fn cases() -> Vec<(&'static str, Json)> {
    let tiny = |model_type: &str| {
        json!({"model_type": model_type, "hidden_size": 64, "intermediate_size": 96,
               "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
               "vocab_size": 100})
    };
    let with = |mut base: Json, extra: Json| {
        for (k, v) in extra.as_object().unwrap() {
            base[k] = v.clone();
        }
        base
    };
    vec![
        (
            "smollm2_published",
            json!({"architectures": ["LlamaForCausalLM"], "attention_bias": false,
              "attention_dropout": 0.0, "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu",
              "hidden_size": 576, "initializer_range": 0.041666666666666664,
              "intermediate_size": 1536, "is_llama_config": true, "max_position_embeddings": 8192,
              "model_type": "llama", "num_attention_heads": 9, "num_hidden_layers": 30,
              "num_key_value_heads": 3, "pad_token_id": 2, "pretraining_tp": 1,
              "rms_norm_eps": 1e-05, "rope_interleaved": false, "rope_scaling": null,
              "rope_theta": 100000, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
              "transformers_version": "4.42.3", "use_cache": true, "vocab_size": 49152}),
        ),
        (
            "llama_sharded",
            with(tiny("llama"), json!({"tie_word_embeddings": true})),
        ),
        (
            "llama_biases_llama3",
            with(
                tiny("llama"),
                json!({"attention_bias": true, "mlp_bias": true,
                "max_position_embeddings": 4096, "rms_norm_eps": 1e-5,
                "rope_parameters": {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
                    "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                    "original_max_position_embeddings": 1024}}),
            ),
        ),
        (
            "llama_legacy_linear",
            with(
                tiny("llama"),
                json!({"rope_theta": 20000.0,
                "rope_scaling": {"type": "linear", "factor": 2.0}, "eos_token_id": [2, 3]}),
            ),
        ),
        (
            "llama_dynamic_ntk",
            with(
                tiny("llama"),
                json!({"max_position_embeddings": 512,
                "rope_parameters": {"rope_type": "dynamic", "rope_theta": 10000.0, "factor": 2.5}}),
            ),
        ),
        ("mistral_minimal", tiny("mistral")),
        (
            "qwen2_tied_yarn",
            with(
                tiny("qwen2"),
                json!({"tie_word_embeddings": true, "rope_theta": 1000000.0,
                "rope_scaling": {"type": "yarn", "factor": 4.0,
                    "original_max_position_embeddings": 8192},
                "max_position_embeddings": 32768, "bos_token_id": 5, "eos_token_id": 6}),
            ),
        ),
        (
            "qwen2_sliding",
            with(
                tiny("qwen2"),
                json!({"use_sliding_window": true, "sliding_window": 16,
                "max_window_layers": 0}),
            ),
        ),
        ("qwen3_default_head_dim", tiny("qwen3")),
        (
            // Config only (hidden > 256): Phi3Config's defaults for ids, eps and context.
            "phi3_defaults",
            with(
                tiny("phi3"),
                json!({"hidden_size": 512, "num_attention_heads": 8, "vocab_size": 32064}),
            ),
        ),
        (
            "phi3_longrope_partial",
            with(
                tiny("phi3"),
                json!({"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0,
                "max_position_embeddings": 256, "original_max_position_embeddings": 64,
                "rope_parameters": {"rope_type": "longrope", "rope_theta": 10000.0,
                    "partial_rotary_factor": 0.5, "short_factor": [1.0, 1.5, 2.0, 2.5],
                    "long_factor": [3.0, 5.0, 7.0, 9.0]}}),
            ),
        ),
        ("gemma2_defaults", tiny("gemma2")),
        (
            "gemma3_text_legacy_rope",
            with(
                tiny("gemma3_text"),
                json!({"head_dim": 16, "rope_theta": 500000.0, "rope_local_base_freq": 20000.0,
                "sliding_window_pattern": 2, "sliding_window": 32,
                "rope_scaling": {"rope_type": "linear", "factor": 4.0}}),
            ),
        ),
        (
            "qwen3_sharded",
            with(
                tiny("qwen3"),
                json!({"head_dim": 32, "attention_bias": true}),
            ),
        ),
    ]
}

fn f32_of(j: &Json) -> f32 {
    j.as_f64().expect("number") as f32
}

fn assert_rope_matches(case: &str, c: &DecoderConfig, params: &Json) {
    assert_eq!(
        c.rope_theta,
        f32_of(&params["rope_theta"]),
        "{case}: rope theta"
    );
    let ty = params["rope_type"].as_str().unwrap_or("default");
    let get = |k: &str| params.get(k).filter(|v| !v.is_null());
    match (&c.rope_scaling, ty) {
        (None, "default") => {}
        (Some(RopeScaling::Linear { factor }), "linear") => {
            assert_eq!(*factor, f32_of(&params["factor"]), "{case}")
        }
        (Some(RopeScaling::Dynamic { factor, .. }), "dynamic") => {
            assert_eq!(Some(*factor), params["factor"].as_f64(), "{case}")
        }
        (
            Some(RopeScaling::Yarn {
                factor,
                original_max_position_embeddings,
                beta_fast,
                beta_slow,
                ..
            }),
            "yarn",
        ) => {
            assert_eq!(*factor, f32_of(&params["factor"]), "{case}");
            if let Some(o) = get("original_max_position_embeddings") {
                assert_eq!(
                    Some(*original_max_position_embeddings as u64),
                    o.as_u64(),
                    "{case}"
                );
            }
            if let Some(b) = get("beta_fast") {
                assert_eq!(*beta_fast, f32_of(b), "{case}");
            }
            if let Some(b) = get("beta_slow") {
                assert_eq!(*beta_slow, f32_of(b), "{case}");
            }
        }
        (
            Some(RopeScaling::Llama3 {
                factor,
                low_freq_factor,
                high_freq_factor,
                original_max_position_embeddings,
            }),
            "llama3",
        ) => {
            assert_eq!(*factor, f32_of(&params["factor"]), "{case}");
            assert_eq!(
                *low_freq_factor,
                f32_of(&params["low_freq_factor"]),
                "{case}"
            );
            assert_eq!(
                *high_freq_factor,
                f32_of(&params["high_freq_factor"]),
                "{case}"
            );
            assert_eq!(
                Some(*original_max_position_embeddings as u64),
                params["original_max_position_embeddings"].as_u64(),
                "{case}"
            );
        }
        (
            Some(RopeScaling::LongRope {
                short_factor,
                long_factor,
                ..
            }),
            "longrope",
        ) => {
            let list = |k: &str| -> Vec<f32> {
                params[k].as_array().unwrap().iter().map(f32_of).collect()
            };
            assert_eq!(short_factor, &list("short_factor"), "{case}");
            assert_eq!(long_factor, &list("long_factor"), "{case}");
        }
        (ours, theirs) => panic!("{case}: rope scaling ours {ours:?}, transformers {theirs}"),
    }
}

fn assert_config_matches(case: &str, c: &DecoderConfig, want: &Json) {
    assert_eq!(
        Some(c.architecture.model_type()),
        want["model_type"].as_str(),
        "{case}"
    );
    let sizes = [
        ("n_layers", c.n_layers),
        ("hidden_size", c.hidden_size),
        ("n_heads", c.n_heads),
        ("n_kv_heads", c.n_kv_heads),
        ("head_dim", c.head_dim),
        ("intermediate_size", c.intermediate_size),
        ("vocab_size", c.vocab_size),
        ("context_length", c.context_length),
    ];
    // Dynamic NTK scaling: transformers' max_position_embeddings is the length the base is
    // rescaled beyond; we run to factor times it.
    let sizes = sizes.map(|(key, ours)| match (&c.rope_scaling, key) {
        (
            Some(RopeScaling::Dynamic {
                factor,
                original_max_position_embeddings,
            }),
            "context_length",
        ) => {
            assert_eq!(
                ours,
                (*original_max_position_embeddings as f64 * *factor) as usize,
                "{case}: dynamic context"
            );
            (key, *original_max_position_embeddings)
        }
        _ => (key, ours),
    });
    for (key, ours) in sizes {
        assert_eq!(Some(ours as u64), want[key].as_u64(), "{case}: {key}");
    }
    assert_eq!(c.norm_eps, f32_of(&want["norm_eps"]), "{case}: eps");
    assert_eq!(
        Some(c.tie_word_embeddings),
        want["tie_word_embeddings"].as_bool(),
        "{case}"
    );
    if want["sliding_window"] == "mixed" {
        let layers: Vec<bool> = want["layer_types"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t == "sliding_attention")
            .collect();
        assert_eq!(c.sliding_layers.as_ref(), Some(&layers), "{case}: layers");
        assert_eq!(
            c.sliding_window.map(|w| w as u64),
            want["window"].as_u64(),
            "{case}: window"
        );
    } else {
        assert_eq!(
            c.sliding_window.map(|w| w as u64),
            want["sliding_window"].as_u64(),
            "{case}"
        );
    }
    assert_eq!(Some(c.rope_dim as u64), want["rope_dim"].as_u64(), "{case}");
    let opt = |k: &str| want[k].as_f64().map(|x| x as f32);
    assert_eq!(
        c.query_pre_attn_scalar,
        opt("query_pre_attn_scalar"),
        "{case}"
    );
    assert_eq!(
        c.attn_logit_softcap,
        opt("attn_logit_softcapping"),
        "{case}"
    );
    assert_eq!(
        c.final_logit_softcap,
        opt("final_logit_softcapping"),
        "{case}"
    );
    let activation = match c.activation {
        Activation::Silu => "silu",
        Activation::GeluTanh => "gelu_pytorch_tanh",
    };
    assert_eq!(Some(activation), want["activation"].as_str(), "{case}");
    if let Some(RopeScaling::LongRope {
        attention_factor, ..
    }) = &c.rope_scaling
    {
        assert_eq!(
            Some(*attention_factor),
            opt("longrope_attention_factor"),
            "{case}: longrope attention factor"
        );
    }
    assert_eq!(
        c.bos_token_id.map(u64::from),
        want["bos_token_id"].as_u64(),
        "{case}: bos"
    );
    assert_eq!(
        c.pad_token_id.map(u64::from),
        want["pad_token_id"].as_u64(),
        "{case}: pad"
    );
    let eos: Vec<u64> = serde_json::from_value(want["eos_token_ids"].clone()).unwrap();
    assert_eq!(
        c.eos_token_ids
            .iter()
            .map(|&e| u64::from(e))
            .collect::<Vec<_>>(),
        eos,
        "{case}"
    );
    let rope = &want["rope_parameters"];
    if rope.get("full_attention").is_some() {
        // Gemma 3: global layers' set, and the plain base of the sliding ones.
        assert_rope_matches(case, c, &rope["full_attention"]);
        assert_eq!(
            c.local_rope_theta,
            Some(f32_of(&rope["sliding_attention"]["rope_theta"])),
            "{case}: local rope theta"
        );
    } else {
        assert_rope_matches(case, c, rope);
        assert_eq!(c.local_rope_theta, None, "{case}");
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn configs_and_checkpoints_match_transformers() {
    let Some(python) = common::oracle_python() else {
        return;
    };
    let dir = common::temp_dir("hf-oracle");
    let out = dir.join("out");
    let mut args = vec![out.clone()];
    let cases = cases();
    for (name, json) in &cases {
        let path = dir.join(format!("{name}.json"));
        std::fs::write(&path, json.to_string()).unwrap();
        args.push(path);
    }
    let arg_refs: Vec<&Path> = args.iter().map(|p| p.as_path()).collect();
    let oracle: BTreeMap<String, Json> =
        serde_json::from_str(&common::run_oracle(&python, "hf_models.py", &arg_refs)).unwrap();

    for (case, json) in &cases {
        let want = &oracle[*case];
        let config = DecoderConfig::from_hf_config_json(&json.to_string())
            .unwrap_or_else(|e| panic!("{case}: {e}"));
        assert_config_matches(case, &config, &want["config"]);
        let Some(tensors) = want["tensors"].as_object() else {
            continue;
        };

        // The directory transformers saved: its own config.json (v5 spelling) normalizes to
        // the same config, and the checkpoint holds exactly the tensors our name map expects.
        let model_dir = out.join(case);
        let (saved, _generation) = load_hf_config(&model_dir).unwrap();
        assert_eq!(saved, config, "{case}: saved config.json");
        let expected = expected_tensors(&config, Naming::HuggingFace);
        let model = SafetensorsModel::open_dir(&model_dir, Some(&expected))
            .unwrap_or_else(|e| panic!("{case}: {e}"));
        assert_eq!(
            case.contains("sharded"),
            model_dir.join("model.safetensors.index.json").is_file()
        );
        for name in &expected {
            let view = model.tensor(name).unwrap();
            let t = &tensors[name];
            assert_eq!(view.dtype, Dtype::F32, "{case}: {name}");
            let shape: Vec<usize> = serde_json::from_value(t[1].clone()).unwrap();
            assert_eq!(view.shape, shape.as_slice(), "{case}: {name}");
            assert_eq!(
                Some(hex(view.data).as_str()),
                t[2].as_str(),
                "{case}: {name} data"
            );
        }
        // Tied checkpoints omit lm_head, which transformers' state_dict still lists.
        assert!(tensors.contains_key("lm_head.weight"));
        assert_eq!(
            model.tensor("lm_head.weight").is_some(),
            !config.tie_word_embeddings,
            "{case}"
        );
    }

    // Every dtype torch writes, read back byte-identically.
    let file = SafetensorsFile::open(&out.join("dtypes.safetensors")).unwrap();
    let dtypes = oracle["dtypes"].as_object().unwrap();
    assert_eq!(file.entries().len(), dtypes.len());
    assert_eq!(file.metadata(), &[("format".to_string(), "pt".to_string())]);
    for (name, t) in dtypes {
        let view = file.tensor(name).unwrap();
        assert_eq!(Some(view.dtype.name()), t[0].as_str(), "{name}");
        let shape: Vec<usize> = serde_json::from_value(t[1].clone()).unwrap();
        assert_eq!(view.shape, shape.as_slice(), "{name}");
        assert_eq!(Some(hex(view.data).as_str()), t[2].as_str(), "{name}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
