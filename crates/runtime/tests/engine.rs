//! The batching engine on the default model: results equal the same requests run alone
//! (greedy and seeded sampling), bounded admission, cancellation, refusals, and every
//! accepted request gets exactly one end event.

mod common;

use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::time::Duration;

use torchnative_runtime::*;

fn llm() -> Option<Llm> {
    let path = common::default_model()?;
    Some(load_llm(path.to_str().unwrap(), &LoadOptions::default()).unwrap())
}

/// Submit with a channel sink; returns the receiver of its events.
fn submit(
    engine: &Engine,
    prompt: Vec<u32>,
    config: GenerationConfig,
    top_logprobs: Option<usize>,
) -> Result<(RequestId, mpsc::Receiver<EngineEvent>)> {
    common::submit_with_channel(engine, prompt, config, top_logprobs)
}

/// Wait for the end event; the text pieces must join to the final text.
fn finish(rx: &mpsc::Receiver<EngineEvent>) -> std::result::Result<EngineDone, RuntimeError> {
    let mut pieces = String::new();
    let mut tokens = 0;
    loop {
        match rx
            .recv_timeout(Duration::from_secs(300))
            .expect("an end event")
        {
            EngineEvent::Text(t) => pieces.push_str(&t),
            EngineEvent::Token { .. } => tokens += 1,
            EngineEvent::Done(d) => {
                assert_eq!(pieces, d.text, "streamed pieces join to the text");
                if tokens > 0 {
                    assert_eq!(tokens, d.tokens.len(), "one token event per token");
                }
                assert!(rx.try_recv().is_err(), "nothing after the end");
                return Ok(d);
            }
            EngineEvent::Error(e) => return Err(e),
        }
    }
}

fn prompts(llm: &Llm) -> Vec<Vec<u32>> {
    [
        "What is the capital of France?",
        "Write a short poem about the sea.",
        "List three prime numbers.",
        "Explain what a CPU does in one sentence.",
        "Say hello in Spanish.",
        "What color is the sky on a clear day?",
        "Give me a name for a cat.",
        "How many legs does a spider have?",
    ]
    .iter()
    .map(|q| llm.tokenize_chat(&[ChatMessage::new("user", *q)]).unwrap())
    .collect()
}

fn alone(llm: &Llm, prompt: &[u32], config: &GenerationConfig) -> Completion {
    let mut s = llm.session(SessionOptions::default()).unwrap();
    s.generate(prompt, config, &mut |_| Flow::Continue).unwrap()
}

#[test]
fn concurrent_requests_equal_the_same_requests_alone() {
    let Some(llm) = llm() else {
        return;
    };
    // Fewer slots than requests and a small token budget: requests wait, prompts are read
    // in chunks beside other sequences' decode steps.
    let engine = Engine::start(
        llm.clone(),
        EngineConfig {
            max_running: 3,
            ctx_per_seq: 512,
            max_batch_tokens: 24,
            max_queued: 16,
            ..Default::default()
        },
    )
    .unwrap();
    let greedy = GenerationConfig {
        max_new_tokens: 24,
        ..Default::default()
    };
    let mut sampled = greedy.clone();
    sampled.sampling.do_sample = true;
    sampled.sampling.temperature = 0.9;
    sampled.sampling.top_p = 0.95;
    let ps = prompts(&llm);
    let mut pending = Vec::new();
    for (i, p) in ps.iter().enumerate() {
        let config = if i % 2 == 0 {
            greedy.clone()
        } else {
            GenerationConfig {
                seed: Some(1000 + i as u64),
                ..sampled.clone()
            }
        };
        let logprobs = (i % 3 == 0).then_some(2);
        let (_, rx) = submit(&engine, p.clone(), config.clone(), logprobs).unwrap();
        pending.push((p, config, rx));
    }
    for (p, config, rx) in pending {
        let got = finish(&rx).unwrap();
        let want = alone(&llm, p, &config);
        assert_eq!(
            got.tokens, want.tokens,
            "tokens equal the request run alone"
        );
        assert_eq!(got.text, want.text);
        assert_eq!(got.finish_reason, want.finish_reason);
        assert_eq!(got.usage, want.usage);
    }
    let s = engine.stats();
    assert_eq!(s.running.load(std::sync::atomic::Ordering::Relaxed), 0);
    assert_eq!(s.queued.load(std::sync::atomic::Ordering::Relaxed), 0);
}

#[test]
fn token_events_carry_log_probabilities() {
    let Some(llm) = llm() else {
        return;
    };
    let engine = Engine::start(llm.clone(), EngineConfig::default()).unwrap();
    let prompt = prompts(&llm).remove(0);
    let config = GenerationConfig {
        max_new_tokens: 8,
        ..Default::default()
    };
    let (_, rx) = submit(&engine, prompt, config, Some(3)).unwrap();
    let mut seen = 0;
    loop {
        match rx.recv_timeout(Duration::from_secs(120)).unwrap() {
            EngineEvent::Token { id, logprob, top } => {
                seen += 1;
                assert!(logprob <= 0.0 && logprob.is_finite());
                assert_eq!(top.len(), 3);
                // Greedy: the chosen token is the most likely one.
                assert_eq!(top[0].0, id);
                assert_eq!(top[0].1, logprob);
                assert!(top[0].1 >= top[1].1 && top[1].1 >= top[2].1);
            }
            EngineEvent::Text(_) => {}
            EngineEvent::Done(d) => {
                assert_eq!(seen, d.tokens.len());
                break;
            }
            EngineEvent::Error(e) => panic!("{e}"),
        }
    }
}

#[test]
fn admission_is_bounded_and_every_accepted_request_ends() {
    let Some(llm) = llm() else {
        return;
    };
    let engine = Engine::start(
        llm.clone(),
        EngineConfig {
            max_running: 1,
            ctx_per_seq: 256,
            max_batch_tokens: 64,
            max_queued: 2,
            ..Default::default()
        },
    )
    .unwrap();
    let prompt = prompts(&llm).remove(1);
    let config = GenerationConfig {
        max_new_tokens: 16,
        ..Default::default()
    };
    let mut accepted = Vec::new();
    let mut refused = 0;
    for _ in 0..10 {
        match submit(&engine, prompt.clone(), config.clone(), None) {
            Ok((_, rx)) => accepted.push(rx),
            Err(RuntimeError::QueueFull { limit }) => {
                assert_eq!(limit, 2);
                refused += 1;
            }
            Err(e) => panic!("unexpected refusal: {e}"),
        }
    }
    assert!(
        refused > 0,
        "10 instant submissions must overflow a queue of 2"
    );
    assert!(accepted.len() >= 2);
    for rx in &accepted {
        let d = finish(rx).unwrap();
        assert_eq!(d.tokens.len(), 16);
    }
}

#[test]
fn cancelling_frees_the_slot_and_bad_requests_are_refused_alone() {
    let Some(llm) = llm() else {
        return;
    };
    let engine = Engine::start(
        llm.clone(),
        EngineConfig {
            max_running: 1,
            ctx_per_seq: 256,
            max_batch_tokens: 32,
            max_queued: 8,
            ..Default::default()
        },
    )
    .unwrap();
    let ps = prompts(&llm);
    let long = GenerationConfig {
        max_new_tokens: 200,
        min_new_tokens: 200,
        ..Default::default()
    };
    let (id, rx) = submit(&engine, ps[1].clone(), long, None).unwrap();
    // Wait until it is generating, then cancel.
    loop {
        if let EngineEvent::Text(_) = rx.recv_timeout(Duration::from_secs(60)).unwrap() {
            break;
        }
    }
    engine.cancel(id);
    let d = finish_after_cancel(&rx);
    assert_eq!(d.finish_reason, FinishReason::Cancelled);
    assert!(d.tokens.len() < 200);
    // The gauges show the freed slot even though the worker now idles (no next step).
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while engine.stats().running.load(Ordering::Relaxed) != 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "running gauge stuck after a cancel"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(engine.stats().kv_blocks_used.load(Ordering::Relaxed), 0);
    // Refusals before any work: an out-of-range token, an empty prompt, a context overflow.
    let vocab = llm.config().vocab_size as u32;
    let short = GenerationConfig {
        max_new_tokens: 4,
        ..Default::default()
    };
    let (_, rx) = submit(&engine, vec![1, vocab + 5], short.clone(), None).unwrap();
    assert!(matches!(
        finish(&rx),
        Err(RuntimeError::TokenOutOfRange { .. })
    ));
    let (_, rx) = submit(&engine, vec![], short.clone(), None).unwrap();
    assert!(matches!(
        finish(&rx),
        Err(RuntimeError::InvalidArgument { .. })
    ));
    let huge = GenerationConfig {
        max_new_tokens: 300,
        ..Default::default()
    };
    let (_, rx) = submit(&engine, ps[0].clone(), huge, None).unwrap();
    assert!(matches!(
        finish(&rx),
        Err(RuntimeError::ContextOverflow { capacity: 256, .. })
    ));
    // The single slot is free again: a normal request completes and equals a lone run.
    let (_, rx) = submit(&engine, ps[2].clone(), short.clone(), None).unwrap();
    let d = finish(&rx).unwrap();
    assert_eq!(d.tokens, alone(&llm, &ps[2], &short).tokens);
}

/// Events after a cancel: possibly more text, then `Done(Cancelled)`.
fn finish_after_cancel(rx: &mpsc::Receiver<EngineEvent>) -> EngineDone {
    loop {
        match rx.recv_timeout(Duration::from_secs(60)).unwrap() {
            EngineEvent::Done(d) => return d,
            EngineEvent::Error(e) => panic!("{e}"),
            _ => {}
        }
    }
}

#[test]
fn bad_engine_configs_are_refused() {
    let Some(llm) = llm() else {
        return;
    };
    let bad = [
        EngineConfig {
            max_running: 0,
            ..Default::default()
        },
        EngineConfig {
            max_running: 8,
            max_batch_tokens: 4,
            ..Default::default()
        },
        EngineConfig {
            ctx_per_seq: 1 << 30,
            ..Default::default()
        },
    ];
    for config in bad {
        let e = Engine::start(llm.clone(), config.clone()).err();
        assert!(
            matches!(e, Some(RuntimeError::InvalidArgument { .. })),
            "{config:?}"
        );
    }
}

/// Chat prompts of `questions` after the same system prompt, and the length of the prefix all
/// of them share.
fn with_system_prompt(llm: &Llm, system: &str, questions: &[&str]) -> (Vec<Vec<u32>>, usize) {
    let prompts: Vec<Vec<u32>> = questions
        .iter()
        .map(|q| {
            llm.tokenize_chat(&[
                ChatMessage::new("system", system),
                ChatMessage::new("user", *q),
            ])
            .unwrap()
        })
        .collect();
    let shared = prompts[1..]
        .iter()
        .map(|p| prompts[0].iter().zip(p).take_while(|(a, b)| a == b).count())
        .min()
        .unwrap_or(0);
    (prompts, shared)
}

#[test]
fn a_shared_system_prompt_is_computed_once_and_results_do_not_change() {
    let Some(llm) = llm() else {
        return;
    };
    let engine = Engine::start(
        llm.clone(),
        EngineConfig {
            max_running: 4,
            ctx_per_seq: 512,
            max_batch_tokens: 64,
            ..Default::default()
        },
    )
    .unwrap();
    let system = "You are a careful assistant for a small museum of river history. Answer \
                  visitors' questions in one or two friendly sentences, mention the museum's \
                  opening hours (nine to five, closed on Mondays) when it helps, and never \
                  invent facts about the exhibits.";
    let questions = [
        "When can I visit?",
        "Is there a cafe?",
        "Do you have boats?",
        "Can children come?",
        "Is it open on Monday?",
        "How old is the museum?",
        "Where is the entrance?",
        "Can I take photos?",
    ];
    let config = GenerationConfig {
        max_new_tokens: 12,
        ..Default::default()
    };
    let (prompts, shared) = with_system_prompt(&llm, system, &questions);
    let block = EngineConfig::default().kv_block_size;
    assert!(shared >= 3 * block, "a shared prefix of {shared} tokens");
    // The first request alone computes (and caches) the prefix; the 7 others reuse it.
    let (_, rx) = submit(&engine, prompts[0].clone(), config.clone(), None).unwrap();
    finish(&rx).unwrap();
    let rxs: Vec<_> = prompts[1..]
        .iter()
        .map(|p| submit(&engine, p.clone(), config.clone(), None).unwrap().1)
        .collect();
    for (p, rx) in prompts[1..].iter().zip(&rxs) {
        let got = finish(rx).unwrap();
        assert_eq!(got.tokens, alone(&llm, p, &config).tokens);
    }
    let hits = engine
        .stats()
        .prefix_hit_tokens
        .load(std::sync::atomic::Ordering::Relaxed) as usize;
    let whole_blocks = shared / block * block;
    assert!(
        hits >= 7 * whole_blocks,
        "{hits} prompt tokens came from the prefix cache; 7 requests share {whole_blocks}"
    );
}

#[test]
fn a_prefix_brought_by_8_requests_at_once_is_computed_once() {
    let Some(llm) = llm() else {
        return;
    };
    let engine = Engine::start(
        llm.clone(),
        EngineConfig {
            max_running: 8,
            ctx_per_seq: 512,
            // Room for every prompt in the first step: without waiting, all 8 would compute
            // the prefix side by side.
            max_batch_tokens: 1024,
            ..Default::default()
        },
    )
    .unwrap();
    let system = "You answer questions about a small lighthouse on a rocky island. Keep every \
                  answer short and plain, say when the tower is open to visitors (from April \
                  to October, ten to four), and admit it when you do not know something. The \
                  keeper's cottage is now a small museum of maps and old logbooks.";
    let questions = [
        "Can I climb it?",
        "How tall is the tower?",
        "Who kept the light?",
        "Is there a ferry?",
        "What year was it built?",
        "May dogs come?",
        "Where do I park?",
        "Is the lamp still lit?",
    ];
    let config = GenerationConfig {
        max_new_tokens: 8,
        ..Default::default()
    };
    let (prompts, shared) = with_system_prompt(&llm, system, &questions);
    let block = EngineConfig::default().kv_block_size;
    let whole_blocks = shared / block * block;
    assert!(
        whole_blocks >= 3 * block,
        "a shared prefix of {shared} tokens"
    );
    // All 8 arrive before the first step: none of the prefix is cached yet.
    let rxs: Vec<_> = prompts
        .iter()
        .map(|p| submit(&engine, p.clone(), config.clone(), None).unwrap().1)
        .collect();
    for (p, rx) in prompts.iter().zip(&rxs) {
        let got = finish(rx).unwrap();
        assert_eq!(got.tokens, alone(&llm, p, &config).tokens);
    }
    let stats = engine.stats();
    let hits = stats.prefix_hit_tokens.load(Ordering::Relaxed) as usize;
    let computed = stats.prompt_tokens.load(Ordering::Relaxed) as usize;
    let total: usize = prompts.iter().map(Vec::len).sum();
    assert!(
        hits >= 7 * whole_blocks,
        "{hits} prompt tokens came from blocks another request computed; 7 requests share \
         {whole_blocks}"
    );
    assert_eq!(
        computed + hits,
        total,
        "every prompt token computed or attached, once"
    );
}

#[test]
fn a_pool_too_small_for_everyone_preempts_and_answers_do_not_change() {
    let Some(llm) = llm() else {
        return;
    };
    // 4 sequences of ~40 prompt + 120 generated tokens do not fit in 256 positions together.
    let engine = Engine::start(
        llm.clone(),
        EngineConfig {
            max_running: 4,
            ctx_per_seq: 256,
            max_batch_tokens: 64,
            kv_cache_tokens: 256,
            kv_block_size: 16,
            ..Default::default()
        },
    )
    .unwrap();
    let config = GenerationConfig {
        max_new_tokens: 120,
        min_new_tokens: 120,
        ..Default::default()
    };
    let ps = prompts(&llm);
    let rxs: Vec<_> = ps[..4]
        .iter()
        .map(|p| submit(&engine, p.clone(), config.clone(), None).unwrap().1)
        .collect();
    for (p, rx) in ps[..4].iter().zip(&rxs) {
        let got = finish(rx).unwrap();
        let want = alone(&llm, p, &config);
        assert_eq!(got.tokens, want.tokens);
        assert_eq!(got.text, want.text);
        assert_eq!(got.usage, want.usage);
    }
    let s = engine.stats();
    assert!(s.preemptions.load(std::sync::atomic::Ordering::Relaxed) > 0);
    assert_eq!(
        s.kv_blocks_used.load(std::sync::atomic::Ordering::Relaxed),
        0
    );
}

/// The end event and each token's log-probability.
fn finish_with_logprobs(rx: &mpsc::Receiver<EngineEvent>) -> (EngineDone, Vec<f32>) {
    let mut logprobs = Vec::new();
    loop {
        match rx
            .recv_timeout(Duration::from_secs(300))
            .expect("an end event")
        {
            EngineEvent::Token { logprob, .. } => logprobs.push(logprob),
            EngineEvent::Text(_) => {}
            EngineEvent::Done(d) => return (d, logprobs),
            EngineEvent::Error(e) => panic!("{e}"),
        }
    }
}

#[test]
fn an_f16_kv_pool_is_batch_invariant_and_moves_logits_only_by_its_rounding() {
    let Some(llm) = llm() else {
        return;
    };
    let engine = |max_running, kv_cache_tokens, kv_cache_dtype| {
        Engine::start(
            llm.clone(),
            EngineConfig {
                max_running,
                ctx_per_seq: 256,
                max_batch_tokens: 40,
                kv_cache_tokens,
                kv_cache_dtype,
                ..Default::default()
            },
        )
        .unwrap()
    };
    let config = GenerationConfig {
        max_new_tokens: 48,
        min_new_tokens: 48,
        ..Default::default()
    };
    let ps = prompts(&llm);
    let run_alone = |e: &Engine| -> Vec<(EngineDone, Vec<f32>)> {
        ps.iter()
            .map(|p| {
                finish_with_logprobs(&submit(e, p.clone(), config.clone(), Some(1)).unwrap().1)
            })
            .collect()
    };
    let alone = run_alone(&engine(1, 256, KvDtype::F16));
    // Eight requests on 4 slots in a pool too small for 4 at once: chunked prompts beside
    // other sequences' decode steps, preemption and recomputation from the prefix cache.
    let busy = engine(4, 256, KvDtype::F16);
    let rxs: Vec<_> = ps
        .iter()
        .map(|p| submit(&busy, p.clone(), config.clone(), Some(1)).unwrap().1)
        .collect();
    for (i, (rx, (want, want_lp))) in rxs.iter().zip(&alone).enumerate() {
        let (got, got_lp) = finish_with_logprobs(rx);
        assert_eq!(
            got.tokens, want.tokens,
            "request {i}: tokens equal it alone"
        );
        assert_eq!(got.text, want.text);
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(
            bits(&got_lp),
            bits(want_lp),
            "request {i}: logprobs bit for bit"
        );
    }
    assert!(busy.stats().preemptions.load(Ordering::Relaxed) > 0);
    // Against the f32 pool: over the tokens both chose, the logprobs differ (the rounding is
    // there) on the scale this model shows in llama.cpp between its own f16 and f32 caches
    // (logits RMS 0.43 apart there, docs/STATUS.md); a wrong row or head would move them by
    // whole units.
    let f32_alone = run_alone(&engine(1, 256, KvDtype::F32));
    let (mut compared, mut differ, mut worst, mut squares) = (0, 0, 0f32, 0f64);
    for ((a, a_lp), (b, b_lp)) in alone.iter().zip(&f32_alone) {
        let same = a
            .tokens
            .iter()
            .zip(&b.tokens)
            .take_while(|(x, y)| x == y)
            .count();
        for (x, y) in a_lp[..same].iter().zip(&b_lp[..same]) {
            compared += 1;
            differ += usize::from(x.to_bits() != y.to_bits());
            worst = worst.max((x - y).abs());
            squares += f64::from(x - y).powi(2);
        }
    }
    let rms = (squares / compared.max(1) as f64).sqrt();
    eprintln!(
        "f16 vs f32 pool: {differ} of {compared} logprobs differ, RMS {rms:.4}, worst {worst:.4}"
    );
    assert!(compared >= 48, "{compared} tokens in common");
    assert!(
        differ > 0,
        "the f16 pool gave f32's logprobs exactly: is it used?"
    );
    assert!(
        rms < 0.15 && worst < 0.6,
        "f16 logprobs moved by RMS {rms}, worst {worst}"
    );
}
