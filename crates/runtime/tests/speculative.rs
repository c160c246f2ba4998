//! Speculative decoding on the default model: drafted tokens are verified in one forward pass,
//! and the output is plain decoding's, token for token (batch-invariant kernels), for greedy
//! and seeded sampling, with prompt lookup and with a draft model.

mod common;

use torchnative_runtime::*;

fn llm() -> Option<Llm> {
    let path = common::default_model()?;
    Some(load_llm(path.to_str().unwrap(), &LoadOptions::default()).unwrap())
}

/// A summarisation-style prompt: the answer repeats phrases of the text, which prompt lookup
/// drafts.
fn summary_prompt(llm: &Llm) -> Vec<u32> {
    let text = "The river museum opened in 1921 in the old customs house by the harbour. \
                Its first keeper, Anna Lindqvist, collected boats, nets and maps from the \
                fishing villages along the coast. In 1958 a flood destroyed the ground floor, \
                and the collection moved to the upper rooms, where it still is today. The \
                museum is open from nine to five, every day except Monday.";
    llm.tokenize_chat(&[ChatMessage::new(
        "user",
        format!(
            "{text}\n\nRepeat the text above word for word, then summarise it in one sentence."
        ),
    )])
    .unwrap()
}

fn plain(llm: &Llm, prompt: &[u32], config: &GenerationConfig) -> Completion {
    let mut s = llm.session(SessionOptions::default()).unwrap();
    s.generate(prompt, config, &mut |_| Flow::Continue).unwrap()
}

fn speculative(
    llm: &Llm,
    prompt: &[u32],
    config: &GenerationConfig,
    spec: SpeculativeConfig,
) -> Completion {
    let mut speculator = Speculator::new(llm, spec).unwrap();
    let mut s = llm.session(SessionOptions::default()).unwrap();
    let mut streamed = String::new();
    let done = s
        .generate_speculative(prompt, config, &mut speculator, &mut |t| {
            streamed.push_str(t);
            Flow::Continue
        })
        .unwrap();
    assert_eq!(streamed, done.text, "streamed pieces join to the text");
    done
}

fn assert_same(a: &Completion, b: &Completion, label: &str) {
    assert_eq!(a.tokens, b.tokens, "{label}: tokens");
    assert_eq!(a.text, b.text, "{label}: text");
    assert_eq!(a.finish_reason, b.finish_reason, "{label}: finish reason");
    assert_eq!(a.usage, b.usage, "{label}: usage");
}

#[test]
fn prompt_lookup_greedy_equals_plain_decoding() {
    let Some(llm) = llm() else {
        return;
    };
    let prompt = summary_prompt(&llm);
    let config = GenerationConfig {
        max_new_tokens: 96,
        ..Default::default()
    };
    let want = plain(&llm, &prompt, &config);
    for k in [1, 4, 8] {
        let got = speculative(&llm, &prompt, &config, SpeculativeConfig::prompt_lookup(k));
        assert_same(&got, &want, &format!("prompt lookup k={k}"));
        let st = got.speculative;
        assert!(st.accepted > 0 && st.verify_steps > 0, "k={k}: {st:?}");
        assert!(st.accepted <= st.drafted);
        // Every generated token came from a verification step or a plain decode step.
        assert!(
            st.verify_steps + st.accepted <= got.tokens.len() + 1,
            "{st:?}"
        );
    }
}

#[test]
fn seeded_sampling_with_speculation_equals_plain_seeded_sampling() {
    let Some(llm) = llm() else {
        return;
    };
    let prompt = summary_prompt(&llm);
    let mut drafted = 0;
    for seed in 0..6 {
        let config = GenerationConfig {
            max_new_tokens: 48,
            seed: Some(seed),
            sampling: SamplingParams {
                do_sample: true,
                temperature: 0.8,
                top_k: 40,
                top_p: 0.95,
                repetition_penalty: 1.05,
                ..Default::default()
            },
            ..Default::default()
        };
        let want = plain(&llm, &prompt, &config);
        let got = speculative(&llm, &prompt, &config, SpeculativeConfig::prompt_lookup(5));
        assert_same(&got, &want, &format!("seed {seed}"));
        drafted += got.speculative.drafted;
    }
    assert!(drafted > 0);
}

#[test]
fn a_draft_model_drafts_and_the_output_does_not_change() {
    let Some(llm) = llm() else {
        return;
    };
    let prompt = llm
        .tokenize_chat(&[ChatMessage::new("user", "Name three rivers of Europe.")])
        .unwrap();
    let draft = SpeculativeConfig {
        // The model as its own draft: greedy drafts are what greedy verification samples.
        draft: DraftSource::Model(llm.clone()),
        max_draft_tokens: 4,
    };
    let greedy = GenerationConfig {
        max_new_tokens: 40,
        ..Default::default()
    };
    let got = speculative(&llm, &prompt, &greedy, draft.clone());
    assert_same(&got, &plain(&llm, &prompt, &greedy), "self-draft greedy");
    let st = got.speculative;
    assert!(st.acceptance_rate() > 0.95, "{st:?}");
    // A stop string and the token limit end a verification step early; sampling rejects
    // some drafts.
    let config = GenerationConfig {
        max_new_tokens: 33,
        stop: vec!["Rhine".into()],
        seed: Some(7),
        sampling: SamplingParams {
            do_sample: true,
            temperature: 1.0,
            ..Default::default()
        },
        ..Default::default()
    };
    let got = speculative(&llm, &prompt, &config, draft);
    assert_same(&got, &plain(&llm, &prompt, &config), "self-draft sampled");
}

#[test]
fn a_session_continues_correctly_after_speculation() {
    let Some(llm) = llm() else {
        return;
    };
    let prompt = summary_prompt(&llm);
    let config = GenerationConfig {
        max_new_tokens: 40,
        ..Default::default()
    };
    let mut speculator = Speculator::new(&llm, SpeculativeConfig::prompt_lookup(8)).unwrap();
    let mut s = llm.session(SessionOptions::default()).unwrap();
    let first = s
        .generate_speculative(&prompt, &config, &mut speculator, &mut |_| Flow::Continue)
        .unwrap();
    assert!(
        first.speculative.drafted > first.speculative.accepted,
        "some drafts rejected"
    );
    // The cache must hold exactly the prompt and the kept tokens: a follow-up reuses it and
    // equals a fresh session's answer.
    let mut follow = prompt.clone();
    follow.extend_from_slice(&first.tokens);
    follow.extend(llm.tokenize("\nAnd in French?").unwrap());
    let again = s
        .generate(&follow, &config, &mut |_| Flow::Continue)
        .unwrap();
    assert!(again.counters.reused_prompt_tokens >= prompt.len() + first.tokens.len() - 1);
    assert_same(&again, &plain(&llm, &follow, &config), "follow-up");
}

#[test]
fn bad_speculative_configs_are_refused_by_name() {
    let Some(llm) = llm() else {
        return;
    };
    for k in [0, MAX_DRAFT_TOKENS_PLUS_ONE] {
        let e = Speculator::new(&llm, SpeculativeConfig::prompt_lookup(k))
            .err()
            .expect("refused")
            .to_string();
        assert!(e.contains("max_draft_tokens"), "{e}");
    }
    for (min_ngram, max_ngram) in [(0, 2), (3, 2), (1, 65)] {
        let e = Speculator::new(
            &llm,
            SpeculativeConfig {
                draft: DraftSource::PromptLookup {
                    min_ngram,
                    max_ngram,
                },
                max_draft_tokens: 4,
            },
        )
        .err()
        .expect("refused")
        .to_string();
        assert!(e.contains("n-gram"), "{e}");
    }
}

const MAX_DRAFT_TOKENS_PLUS_ONE: usize = torchnative_runtime::speculative::MAX_DRAFT_TOKENS + 1;

/// The batching engine with prompt-lookup speculation: the summarisation prompt and others,
/// greedy and seeded sampling (with a stop string and logprobs), batched 4 at a time under a
/// small token budget (drafts compete with prompt chunks), then in a pool small enough to
/// preempt: every answer (tokens, text, finish reason, usage, each token's logprob) equals the
/// same request alone in a plain `Session`, and drafts were kept.
#[test]
fn the_engine_speculates_and_the_answers_do_not_change() {
    use std::sync::atomic::Ordering;
    let Some(llm) = llm() else {
        return;
    };
    let mut prompts = vec![summary_prompt(&llm)];
    for q in [
        "Repeat after me: the quick brown fox jumps over the lazy dog, the quick brown fox.",
        "List the days of the week, then list them again in the same order.",
        "Say hello in Spanish.",
    ] {
        prompts.push(llm.tokenize_chat(&[ChatMessage::new("user", q)]).unwrap());
    }
    let configs: Vec<GenerationConfig> = (0..prompts.len() * 2)
        .map(|i| {
            let mut c = GenerationConfig {
                max_new_tokens: 48,
                ..Default::default()
            };
            if i % 2 == 1 {
                c.sampling = SamplingParams {
                    do_sample: true,
                    temperature: 0.7,
                    top_k: 40,
                    ..SamplingParams::default()
                };
                c.seed = Some(7 + i as u64);
                c.stop = vec!["Monday".into()];
            }
            c
        })
        .collect();
    let jobs: Vec<(Vec<u32>, GenerationConfig)> = configs
        .iter()
        .enumerate()
        .map(|(i, c)| (prompts[i / 2].clone(), c.clone()))
        .collect();
    let alone: Vec<Completion> = jobs.iter().map(|(p, c)| plain(&llm, p, c)).collect();
    for (config, label) in [
        (
            EngineConfig {
                max_running: 4,
                max_batch_tokens: 48,
                prompt_lookup_tokens: 4,
                ..EngineConfig::default()
            },
            "4 running, budget 48",
        ),
        (
            EngineConfig {
                max_running: 4,
                max_batch_tokens: 64,
                ctx_per_seq: 256,
                kv_cache_tokens: 320,
                prompt_lookup_tokens: 6,
                ..EngineConfig::default()
            },
            "a pool that preempts",
        ),
    ] {
        let engine = Engine::start(llm.clone(), config).unwrap();
        let rxs: Vec<_> = jobs
            .iter()
            .map(|(p, c)| {
                common::submit_with_channel(&engine, p.clone(), c.clone(), Some(2))
                    .unwrap()
                    .1
            })
            .collect();
        for ((rx, want), i) in rxs.into_iter().zip(&alone).zip(0..) {
            let (done, logprobs) = common::wait_done(&rx, label);
            assert_eq!(done.tokens, want.tokens, "{label}: request {i} tokens");
            assert_eq!(done.text, want.text, "{label}: request {i} text");
            assert_eq!(
                done.finish_reason, want.finish_reason,
                "{label}: request {i}"
            );
            assert_eq!(done.usage, want.usage, "{label}: request {i} usage");
            assert_eq!(
                logprobs,
                done.tokens.len(),
                "{label}: a token event per token"
            );
        }
        let stats = engine.stats();
        let (drafted, accepted) = (
            stats.drafted_tokens.load(Ordering::Relaxed),
            stats.accepted_tokens.load(Ordering::Relaxed),
        );
        println!(
            "{label}: drafted {drafted}, accepted {accepted}, preemptions {}",
            stats.preemptions.load(Ordering::Relaxed)
        );
        assert!(
            accepted > 0 && accepted <= drafted,
            "{label}: {drafted} / {accepted}"
        );
    }
}
