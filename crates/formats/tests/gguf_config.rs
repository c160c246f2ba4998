//! The default model's GGUF metadata normalizes to the same config as its published
//! config.json, and its tensors are exactly those the name map expects.
mod common;

use std::collections::BTreeSet;

use torchnative_formats::gguf::GgufFile;
use torchnative_formats::names::{expected_tensors, gguf_to_hf, Naming};
use torchnative_formats::DecoderConfig;

/// HuggingFaceTB/SmolLM2-135M-Instruct config.json as published.
const SMOLLM2_CONFIG: &str = r#"{
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu", "hidden_size": 576,
  "initializer_range": 0.041666666666666664, "intermediate_size": 1536, "is_llama_config": true,
  "max_position_embeddings": 8192, "model_type": "llama", "num_attention_heads": 9,
  "num_hidden_layers": 30, "num_key_value_heads": 3, "pad_token_id": 2, "pretraining_tp": 1,
  "rms_norm_eps": 1e-05, "rope_interleaved": false, "rope_scaling": null, "rope_theta": 100000,
  "tie_word_embeddings": true, "torch_dtype": "bfloat16", "transformers_version": "4.42.3",
  "use_cache": true, "vocab_size": 49152}"#;

#[test]
fn smollm2_gguf_config_matches_published_config_json() {
    let Some(model) = common::model_path() else {
        return;
    };
    let file = GgufFile::open(&model).unwrap();
    let from_gguf = DecoderConfig::from_gguf(&file).unwrap();
    let from_hf = DecoderConfig::from_hf_config_json(SMOLLM2_CONFIG).unwrap();
    assert_eq!(from_gguf, from_hf);

    let in_file: BTreeSet<&str> = file.tensors().iter().map(|t| t.name.as_str()).collect();
    let expected = expected_tensors(&from_gguf, Naming::Gguf);
    assert_eq!(in_file, expected.iter().map(String::as_str).collect());
    // And the HF names of those tensors are what a transformers checkpoint would hold.
    let hf: BTreeSet<String> = in_file.iter().map(|n| gguf_to_hf(n).unwrap()).collect();
    let hf_expected: BTreeSet<String> = expected_tensors(&from_hf, Naming::HuggingFace)
        .into_iter()
        .collect();
    assert_eq!(hf, hf_expected);
}
