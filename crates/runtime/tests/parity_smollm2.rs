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

#[test]
fn safetensors_copy_f32_matches_transformers_every_logit() {
    let Some(python) = oracle_python() else {
        return;
    };
    let Some(gguf) = default_model() else { return };
    let dir = safetensors_copy(&python, &gguf);
    check_model(dir.to_str().unwrap(), WeightFormat::F32, 16);
}

/// Tiny random models of each architecture, saved by transformers, against transformers:
/// exercises q/k/v biases (qwen2), q/k norms (qwen3), sliding window (mistral, window 8 over a
/// 20-token prompt), untied heads and the safetensors path.
#[test]
fn tiny_random_models_of_each_architecture_match_transformers() {
    let Some(python) = oracle_python() else {
        return;
    };
    for (i, arch) in ["llama", "mistral", "qwen2", "qwen3"]
        .into_iter()
        .enumerate()
    {
        let work = tempdir();
        let (model_dir, model) = tiny_model(&python, arch, i, &work);
        let vocab = model.config().vocab_size as u32;
        let prompt: Vec<u32> = (0..20u32)
            .map(|j| (j * 37 + 11 * i as u32 + 3) % vocab)
            .collect();
        let refs = reference_logits(
            &python,
            serde_json::json!({"dir": model_dir}),
            None,
            &[(prompt.clone(), 8)],
            &work,
        );
        if let Err(msg) = forward_matches_reference(&model, &prompt, &refs[0]) {
            panic!("{arch} {msg}");
        }
        let _ = std::fs::remove_dir_all(&work);
    }
}

/// transformers' own `generate(do_sample=False)` and ours produce the same 64 tokens on ten
/// chat prompts (f32 weights from the GGUF; stop at EOS like transformers).
#[test]
fn greedy_continuations_equal_transformers_generate() {
    let Some(python) = oracle_python() else {
        return;
    };
    let Some(gguf) = default_model() else { return };
    let spec = gguf.to_str().unwrap();
    let llm = load_llm(
        spec,
        &LoadOptions {
            weight_format: WeightFormat::F32,
            threads: None,
        },
    )
    .unwrap();
    let questions = [
        "What is the capital of France?",
        "Write a haiku about the sea.",
        "Explain recursion to a child.",
        "List three uses of copper.",
        "What is 17 times 3?",
        "Translate 'good morning' into Spanish.",
        "Write a Python function that reverses a string.",
        "Why is the sky blue?",
        "Give me a name for a pet turtle.",
        "Summarize the plot of Romeo and Juliet in two sentences.",
    ];
    let prompts: Vec<Vec<u32>> = questions
        .iter()
        .map(|q| llm.tokenize_chat(&[ChatMessage::new("user", *q)]).unwrap())
        .collect();
    let work = tempdir();
    run_oracle(
        &python,
        &serde_json::json!({"cmd": "greedy", "model": {"gguf": spec}, "out_dir": work, "prompts": prompts, "max_new_tokens": 64}),
        &work,
    );
    let result: serde_json::Value =
        serde_json::from_slice(&std::fs::read(work.join("result.json")).unwrap()).unwrap();
    let cfg = GenerationConfig {
        max_new_tokens: 64,
        ..Default::default()
    };
    for (i, prompt) in prompts.iter().enumerate() {
        let theirs: Vec<u32> = result["continuations"][i]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap() as u32)
            .collect();
        let ours = llm
            .session(SessionOptions::default())
            .unwrap()
            .generate(prompt, &cfg, &mut |_| Flow::Continue)
            .unwrap();
        // transformers keeps the EOS token in its output; ours reports it as the finish reason.
        let mut ours_tokens = ours.tokens.clone();
        if ours.finish_reason == FinishReason::Eos {
            let last = *theirs.last().unwrap();
            assert!(
                llm.eos_token_ids().contains(&last),
                "prompt {i}: we stopped at EOS, transformers went on"
            );
            ours_tokens.push(last);
        }
        assert_eq!(ours_tokens, theirs, "prompt {i} ({:?})", questions[i]);
    }
    let _ = std::fs::remove_dir_all(&work);
}
