//! Decode throughput of the engine with 1..N sequences generating together (no HTTP, no
//! prefill in the timed part): how much batching buys on this machine.
//!
//! `cargo run --release -p torchnative-runtime --example batch_decode -- MODEL [--kv=f16]
//! [--new=N] [B ...]` (`--kv`: the KV pool's dtype, f32 by default; `--new`: tokens generated
//! per sequence, 96 by default: longer runs read longer caches each step).
use std::sync::mpsc;
use std::time::{Duration, Instant};

use torchnative_runtime::*;
use torchnative_tokenizer::ChatMessage;

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let model = args
        .next()
        .expect("usage: batch_decode MODEL [--kv=f16] [--new=N] [B ...]");
    let (mut kv_cache_dtype, mut new_tokens) = (KvDtype::F32, 96usize);
    let mut sizes = Vec::new();
    for a in args {
        if let Some(d) = a.strip_prefix("--kv=") {
            kv_cache_dtype = d.parse()?;
        } else if let Some(n) = a.strip_prefix("--new=") {
            new_tokens = n.parse().expect("--new=N: a token count");
        } else {
            sizes.push(a.parse::<usize>().expect("a batch size"));
        }
    }
    if sizes.is_empty() {
        sizes = vec![1, 2, 4, 8];
    }
    let llm = load_llm(&model, &LoadOptions::default())?;
    let ctx = (new_tokens + 64).next_multiple_of(16);
    for &b in &sizes {
        let engine = Engine::start(
            llm.clone(),
            EngineConfig {
                max_running: b,
                ctx_per_seq: ctx,
                kv_cache_tokens: ctx * b,
                kv_cache_dtype,
                ..Default::default()
            },
        )?;
        let (tx, rx) = mpsc::channel::<(usize, Instant)>();
        for i in 0..b {
            let prompt = llm.tokenize_chat(&[ChatMessage::new(
                "user",
                format!("Write a long story about a lighthouse keeper number {i}."),
            )])?;
            let config = GenerationConfig {
                max_new_tokens: new_tokens,
                min_new_tokens: new_tokens,
                ..Default::default()
            };
            let tx = tx.clone();
            engine.submit(
                EngineRequest {
                    prompt,
                    config,
                    top_logprobs: None,
                },
                Box::new(move |e| {
                    if let EngineEvent::Done(d) = &e {
                        let _ = tx.send((d.tokens.len(), Instant::now()));
                    }
                    Flow::Continue
                }),
            )?;
        }
        drop(tx);
        // Time from the first step with every sequence decoding to the last end.
        let start = Instant::now();
        let mut generated = 0;
        let mut last = start;
        for (n, t) in rx.iter() {
            generated += n;
            last = t;
        }
        let secs = (last - start).as_secs_f64();
        let steps = engine
            .stats()
            .steps
            .load(std::sync::atomic::Ordering::Relaxed);
        println!(
            "B={b:2} kv {}: {generated} tokens in {secs:.2} s = {:.1} tok/s ({steps} steps, {:.2} ms/step)",
            kv_cache_dtype.name(),
            generated as f64 / secs,
            secs * 1e3 / steps as f64
        );
        drop(engine);
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(())
}
