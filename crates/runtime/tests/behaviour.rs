//! Runtime behaviour on the default model: batching, cached decode, multi-turn reuse, and
//! refusals before any work.

mod common;

use torchnative_runtime::*;

fn llm(format: WeightFormat) -> Option<Llm> {
    let path = common::default_model()?;
    Some(
        load_llm(
            path.to_str().unwrap(),
            &LoadOptions {
                weight_format: format,
                threads: None,
            },
        )
        .unwrap(),
    )
}

fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

/// Same computation through a different kernel blocking (gemv vs gemm, chunk sizes) moves f32
/// logits by float rounding only; measured ~1e-4 here, a wrong position or cache slot moves
/// them by whole units.
const REORDER_TOL: f32 = 2e-3;

#[test]
fn cached_decode_equals_full_prefix_recompute() {
    let Some(llm) = llm(WeightFormat::F32) else {
        return;
    };
    let vocab = llm.config().vocab_size;
    let prompt = llm.tokenize("The quick brown fox").unwrap();
    let continuation = llm
        .tokenize(" jumps over the lazy dog and runs away")
        .unwrap();
    let mut s = llm.session(SessionOptions::default()).unwrap();
    s.prefill_all_logits(&prompt).unwrap();
    let mut stepped = Vec::new();
    for &t in &continuation {
        stepped.extend_from_slice(s.decode_logits(t).unwrap());
    }
    let mut all = prompt.clone();
    all.extend_from_slice(&continuation);
    let full = llm
        .session(SessionOptions::default())
        .unwrap()
        .prefill_all_logits(&all)
        .unwrap();
    let tail = &full[(prompt.len() - 1) * vocab..(all.len() - 1) * vocab];
    // Logits after feeding continuation[i] (stepped row i) vs full-prefix row prompt.len() + i.
    let full_rows = &full[prompt.len() * vocab..];
    assert!(
        max_diff(&stepped, full_rows) < REORDER_TOL,
        "{}",
        max_diff(&stepped, full_rows)
    );
    assert!(
        max_diff(&stepped, tail) > 0.1,
        "the comparison must be position-sensitive"
    );
}

#[test]
fn ragged_batch_of_three_equals_separate_runs() {
    let Some(llm) = llm(WeightFormat::F32) else {
        return;
    };
    let model = llm.model();
    let vocab = llm.config().vocab_size;
    let prompts: Vec<Vec<u32>> = [
        "Hello",
        "Rust is a systems programming language that",
        "1 2 3 4",
    ]
    .iter()
    .map(|p| llm.tokenize(p).unwrap())
    .collect();
    let cap = 64;
    let mut cache = DenseKvCache::new(model.kv_shape(), cap, 3).unwrap();
    let mut ws = model.workspace(cap, 3);
    let chunks: Vec<SeqChunk> = prompts
        .iter()
        .enumerate()
        .map(|(i, p)| SeqChunk {
            seq: i,
            tokens: p,
            pos0: 0,
        })
        .collect();
    model
        .forward(&chunks, &mut cache, &mut ws, LogitsFor::LastOfEachChunk)
        .unwrap();
    let batched = ws.logits().to_vec();
    // Then one decode step for all three at once, each at its own position.
    let next = [11u32, 22, 33];
    let step: Vec<SeqChunk> = (0..3)
        .map(|i| SeqChunk {
            seq: i,
            tokens: &next[i..i + 1],
            pos0: prompts[i].len(),
        })
        .collect();
    model
        .forward(&step, &mut cache, &mut ws, LogitsFor::LastOfEachChunk)
        .unwrap();
    let batched_step = ws.logits().to_vec();
    for (i, p) in prompts.iter().enumerate() {
        let mut s = llm.session(SessionOptions::default()).unwrap();
        let alone = s.prefill_all_logits(p).unwrap();
        let last = &alone[(p.len() - 1) * vocab..];
        assert!(
            max_diff(&batched[i * vocab..(i + 1) * vocab], last) < REORDER_TOL,
            "sequence {i} prefill"
        );
        let alone_step = s.decode_logits(next[i]).unwrap();
        assert!(
            max_diff(&batched_step[i * vocab..(i + 1) * vocab], alone_step) < REORDER_TOL,
            "sequence {i} step"
        );
    }
}

#[test]
fn second_chat_turn_reuses_the_cache_and_equals_a_fresh_run() {
    let Some(llm) = llm(WeightFormat::Native) else {
        return;
    };
    let cfg = GenerationConfig {
        max_new_tokens: 24,
        ..Default::default()
    };
    let mut s = llm.session(SessionOptions::default()).unwrap();
    let first = s
        .send(ChatMessage::new("user", "Name a fruit."), &cfg, &mut |_| {
            Flow::Continue
        })
        .unwrap();
    let second = s
        .send(
            ChatMessage::new("user", "And a vegetable?"),
            &cfg,
            &mut |_| Flow::Continue,
        )
        .unwrap();
    assert!(
        second.counters.reused_prompt_tokens >= first.usage.prompt_tokens,
        "turn 2 reused {} tokens, turn 1's prompt alone was {}",
        second.counters.reused_prompt_tokens,
        first.usage.prompt_tokens
    );
    let conversation = s.messages()[..3].to_vec();
    let fresh = llm.chat(&conversation, &cfg).unwrap();
    assert_eq!(fresh.tokens, second.tokens);
    assert_eq!(fresh.text, second.text);
}

#[test]
fn streaming_pieces_concatenate_to_the_text_and_cancel_stops() {
    let Some(llm) = llm(WeightFormat::Native) else {
        return;
    };
    let ids = llm
        .tokenize_chat(&[ChatMessage::new(
            "user",
            "Count from one to twenty in words.",
        )])
        .unwrap();
    let cfg = GenerationConfig {
        max_new_tokens: 40,
        ..Default::default()
    };
    let mut pieces = Vec::new();
    let mut s = llm.session(SessionOptions::default()).unwrap();
    let done = s
        .generate(&ids, &cfg, &mut |p| {
            pieces.push(p.to_string());
            Flow::Continue
        })
        .unwrap();
    assert!(pieces.len() > 3);
    assert_eq!(pieces.concat(), done.text);
    assert_eq!(done.text, llm.detokenize(&done.tokens).unwrap());
    let mut n = 0;
    let cancelled = s
        .generate(&ids, &cfg, &mut |_| {
            n += 1;
            if n == 3 {
                Flow::Cancel
            } else {
                Flow::Continue
            }
        })
        .unwrap();
    assert_eq!(cancelled.finish_reason, FinishReason::Cancelled);
    assert!(cancelled.tokens.len() < done.tokens.len());
}

#[test]
fn stop_string_ends_generation_without_emitting_it() {
    let Some(llm) = llm(WeightFormat::Native) else {
        return;
    };
    let ids = llm
        .tokenize("Once upon a time, in a small village by the sea,")
        .unwrap();
    let plain = llm.session(SessionOptions::default()).unwrap().generate(
        &ids,
        &GenerationConfig {
            max_new_tokens: 40,
            ..Default::default()
        },
        &mut |_| Flow::Continue,
    );
    let plain = plain.unwrap();
    // Stop at a word the unconstrained answer contains, after its start.
    let word = plain
        .text
        .split_whitespace()
        .nth(3)
        .expect("a few words")
        .to_string();
    let at = plain.text.find(&word).unwrap();
    let cfg = GenerationConfig {
        max_new_tokens: 40,
        stop: vec![word.clone()],
        ..Default::default()
    };
    let stopped = llm
        .session(SessionOptions::default())
        .unwrap()
        .generate(&ids, &cfg, &mut |_| Flow::Continue)
        .unwrap();
    assert_eq!(stopped.finish_reason, FinishReason::StopString);
    assert_eq!(stopped.text, plain.text[..at]);
}

#[test]
fn seeded_sampling_replays_and_differs_across_seeds() {
    let Some(llm) = llm(WeightFormat::Native) else {
        return;
    };
    let ids = llm.tokenize("Once upon a time").unwrap();
    let cfg = |seed| GenerationConfig {
        max_new_tokens: 16,
        seed: Some(seed),
        sampling: SamplingParams {
            do_sample: true,
            temperature: 1.0,
            top_k: 50,
            top_p: 0.95,
            ..Default::default()
        },
        ..Default::default()
    };
    let run = |seed| {
        llm.session(SessionOptions::default())
            .unwrap()
            .generate(&ids, &cfg(seed), &mut |_| Flow::Continue)
            .unwrap()
            .tokens
    };
    assert_eq!(run(7), run(7));
    assert_ne!(run(7), run(8));
}

#[test]
fn bad_requests_fail_before_work_with_named_reasons() {
    let Some(llm) = llm(WeightFormat::Native) else {
        return;
    };
    let mut s = llm
        .session(SessionOptions {
            n_ctx: Some(32),
            ..Default::default()
        })
        .unwrap();
    let ids = llm.tokenize("hello there").unwrap();
    let too_long = GenerationConfig {
        max_new_tokens: 40,
        ..Default::default()
    };
    let err = s
        .generate(&ids, &too_long, &mut |_| Flow::Continue)
        .unwrap_err();
    assert!(
        matches!(
            err,
            RuntimeError::ContextOverflow {
                capacity: 32,
                max_new_tokens: 40,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("32"), "{err}");
    assert!(s.tokens().is_empty(), "nothing was evaluated");
    let err = s
        .generate(&[1, 49152], &GenerationConfig::default(), &mut |_| {
            Flow::Continue
        })
        .unwrap_err();
    assert!(err.to_string().contains("49152"), "{err}");
    let bad_p = GenerationConfig {
        max_new_tokens: 4,
        sampling: SamplingParams {
            top_p: 0.0,
            ..Default::default()
        },
        ..Default::default()
    };
    assert!(s
        .generate(&ids, &bad_p, &mut |_| Flow::Continue)
        .unwrap_err()
        .to_string()
        .contains("top_p"));
    assert!(s
        .generate(
            &[],
            &GenerationConfig {
                max_new_tokens: 4,
                ..Default::default()
            },
            &mut |_| Flow::Continue
        )
        .is_err());
    assert!(llm
        .session(SessionOptions {
            n_ctx: Some(1 << 20),
            ..Default::default()
        })
        .is_err());
}

#[test]
fn unknown_files_and_architectures_are_refused_by_name() {
    let dir = std::env::temp_dir().join(format!("torchnative-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let truncated = dir.join("truncated.gguf");
    std::fs::write(&truncated, b"GGUF\x03\x00\x00\x00").unwrap();
    let err = load_llm(truncated.to_str().unwrap(), &LoadOptions::default())
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("truncated.gguf"), "{err}");
    std::fs::write(
        dir.join("config.json"),
        r#"{"model_type": "gpt_neox", "architectures": ["GPTNeoXForCausalLM"]}"#,
    )
    .unwrap();
    let err = load_llm(dir.to_str().unwrap(), &LoadOptions::default())
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("gpt_neox") && err.contains("llama"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn stream_iterator_yields_the_text_cancels_on_drop_and_works_from_another_thread() {
    let Some(llm) = llm(WeightFormat::Native) else {
        return;
    };
    let ids = llm.tokenize("Once upon a time").unwrap();
    let cfg = GenerationConfig {
        max_new_tokens: 24,
        ..Default::default()
    };
    let whole = llm
        .session(SessionOptions::default())
        .unwrap()
        .generate(&ids, &cfg, &mut |_| Flow::Continue)
        .unwrap();
    // Consumed on another thread.
    let stream = llm.stream(ids.clone(), cfg.clone()).unwrap();
    let text = std::thread::spawn(move || stream.collect::<String>())
        .join()
        .unwrap();
    assert_eq!(text, whole.text);
    // Cancelled after two pieces: finishes early with the cancelled reason.
    let mut stream = llm.stream(ids.clone(), cfg.clone()).unwrap();
    let first_two: Vec<String> = stream.by_ref().take(2).collect();
    assert_eq!(first_two.len(), 2);
    stream.cancel();
    let done = stream.finish().unwrap();
    assert_eq!(done.finish_reason, FinishReason::Cancelled);
    assert!(done.tokens.len() < whole.tokens.len());
    // Dropped mid-way: returns promptly (the worker stops instead of running to the limit).
    let mut stream = llm.stream(
        ids.clone(),
        GenerationConfig {
            max_new_tokens: 2000,
            ..cfg.clone()
        },
    );
    let err = stream.as_ref().err().map(|e| e.to_string());
    assert!(err.is_none(), "{err:?}");
    let s = stream.as_mut().unwrap();
    assert!(s.next().is_some());
    drop(stream);
    // Request errors come back before a thread starts.
    let bad = GenerationConfig {
        sampling: SamplingParams {
            top_p: 2.0,
            ..Default::default()
        },
        ..cfg
    };
    assert!(llm.stream(ids, bad).is_err());
}
