//! SmolLM2-135M-Instruct against transformers, logit by logit: prefill and cached decode,
//! from the GGUF and from the safetensors copy transformers saves of the same weights.

mod common;

use common::*;
use torchnative_runtime::*;

fn prompts(llm: &Llm) -> Vec<Vec<u32>> {
    let chat = llm
        .tokenize_chat(&[ChatMessage::new("user", "What is the capital of France?")])
        .unwrap();
    let raw = llm
        .tokenize("def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n")
        .unwrap();
    vec![chat, raw]
}

fn check_model(spec: &str, format: WeightFormat, steps: usize) {
    let Some(python) = oracle_python() else {
        return;
    };
    let Some(gguf) = default_model() else { return };
    let truth = safetensors_copy(&python, &gguf);
    let llm = load_llm(
        spec,
        &LoadOptions {
            weight_format: format,
            threads: None,
        },
    )
    .unwrap();
    let cases: Vec<(Vec<u32>, usize)> = prompts(&llm).into_iter().map(|p| (p, steps)).collect();
    let work = tempdir();
    let model_json = if spec.ends_with(".gguf") {
        serde_json::json!({"gguf": spec})
    } else {
        serde_json::json!({"dir": spec})
    };
    let refs = reference_logits(&python, model_json, Some(&truth), &cases, &work);
    for ((prompt, _), r) in cases.iter().zip(&refs) {
        let mut s = llm.session(SessionOptions::default()).unwrap();
        let ours = s.prefill_all_logits(prompt).unwrap();
        assert_close_to_truth("prefill", &ours, &r.prefill32, &r.prefill64, r.vocab);
        let mut decode = Vec::new();
        for &t in &r.greedy {
            decode.extend_from_slice(s.decode_logits(t).unwrap());
        }
        assert_close_to_truth("decode", &decode, &r.decode32, &r.decode64, r.vocab);
    }
}

fn tempdir() -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!(
        "torchnative-parity-{}-{}",
        std::process::id(),
        rand_suffix()
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn rand_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

#[test]
fn gguf_f32_matches_transformers_every_logit() {
    let Some(gguf) = default_model() else { return };
    check_model(gguf.to_str().unwrap(), WeightFormat::F32, 32);
}
