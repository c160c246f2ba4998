//! Batch invariance on the default model: a token's logits are the same bits however its
//! prompt was chunked, whether its prefix came from the cache, and whatever batch it rode
//! in, for the native packed weights and for f32 weights. Bitwise equality, not a
//! tolerance: the serving scheduler mixes requests freely and must not change answers.

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

/// A long prompt of real-looking text: more than 512 tokens, so that a chunk of 512 splits it.
fn long_text() -> String {
    let sentences = [
        "The river rose through the night and by morning the low fields were under water.",
        "Farmers moved their animals to the ridge, where the old church stood on its stones.",
        "A letter from the city promised help, but the roads were closed for a week.",
        "Children counted boats from the bell tower and wrote the numbers on a slate.",
        "When the water fell, the mud held fish, tools, and a clock that still ran.",
        "The mayor said the village would build a wall, and nobody believed him at first.",
        "In spring the wall stood two meters high, made of river stones and borrowed carts.",
    ];
    let mut text = String::new();
    for i in 0..14 {
        text += &format!("Day {}: {} ", i + 1, sentences[i % sentences.len()]);
        text += sentences[(i * 3 + 2) % sentences.len()];
        text += "\n";
    }
    text
}

/// One hash per logits row (of `vocab` floats): equal rows, equal hashes.
fn row_hashes(logits: &[f32], vocab: usize) -> Vec<u64> {
    logits
        .chunks_exact(vocab)
        .map(|row| {
            row.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, v| {
                (h ^ v.to_bits() as u64).wrapping_mul(0x0100_0000_01b3)
            })
        })
        .collect()
}

fn assert_same_rows(got: &[u64], want: &[u64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: row count");
    let differ: Vec<usize> = (0..got.len()).filter(|&r| got[r] != want[r]).collect();
    assert!(
        differ.is_empty(),
        "{what}: {} of {} logits rows differ in their bits (first at row {})",
        differ.len(),
        got.len(),
        differ[0]
    );
}

fn session(llm: &Llm, n_batch: usize) -> Session {
    llm.session(SessionOptions {
        n_ctx: Some(1024),
        n_batch,
    })
    .unwrap()
}

fn chunked_prefill_case(format: WeightFormat) {
    let Some(llm) = llm(format) else {
        return;
    };
    let vocab = llm.config().vocab_size;
    let tokens = llm.tokenize(&long_text()).unwrap();
    assert!(tokens.len() > 512, "{} tokens", tokens.len());
    let whole = session(&llm, tokens.len())
        .prefill_all_logits(&tokens)
        .unwrap();
    let want = row_hashes(&whole, vocab);
    drop(whole);
    for n_batch in [1, 7, 64, 512] {
        let got = session(&llm, n_batch).prefill_all_logits(&tokens).unwrap();
        assert_same_rows(
            &row_hashes(&got, vocab),
            &want,
            &format!("{format:?} prefill in chunks of {n_batch}"),
        );
    }
    // A prefix from the cache: the rest evaluated later, in other chunk sizes.
    for (split, n_batch) in [(1, 64), (37, 5), (200, 256), (511, 3)] {
        let mut s = session(&llm, n_batch);
        s.prefill(&tokens[..split]).unwrap();
        let rest = s.append_all_logits(&tokens[split..]).unwrap();
        assert_same_rows(
            &row_hashes(&rest, vocab),
            &want[split..],
            &format!("{format:?} after a cached prefix of {split} (chunks of {n_batch})"),
        );
    }
    // Decode steps one token at a time give the rows of the whole prefill.
    let mut s = session(&llm, 256);
    s.prefill(&tokens[..400]).unwrap();
    for (k, &t) in tokens[400..420].iter().enumerate() {
        let row = s.decode_logits(t).unwrap();
        assert_same_rows(
            &row_hashes(row, vocab),
            &want[400 + k..401 + k],
            &format!("{format:?} decode step at position {}", 400 + k),
        );
    }
}

#[test]
fn chunked_cached_and_decoded_rows_equal_the_whole_prefill_native() {
    chunked_prefill_case(WeightFormat::Native);
}

#[test]
fn chunked_cached_and_decoded_rows_equal_the_whole_prefill_f32() {
    chunked_prefill_case(WeightFormat::F32);
}

/// xorshift64*, for reproducible batch mixes.
struct Rng(u64);
impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) as usize % n
    }
}

fn batch_case(format: WeightFormat) {
    let Some(llm) = llm(format) else {
        return;
    };
    let model = llm.model();
    let vocab = llm.config().vocab_size;
    let pool = llm.tokenize(&long_text()).unwrap();
    let target = llm
        .tokenize("The mayor said the village would build a wall")
        .unwrap();
    let steps = [11u32, 4891, 29];
    // Alone: the prefill's last row, then three decode steps.
    let mut s = session(&llm, 256);
    let prefill = s.prefill_all_logits(&target).unwrap();
    let mut alone = row_hashes(&prefill[(target.len() - 1) * vocab..], vocab);
    for &t in &steps {
        alone.extend(row_hashes(s.decode_logits(t).unwrap(), vocab));
    }
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let cap = 128;
    for batch in 1..=16 {
        // Others of random lengths cut from the text, the target at a random place.
        let at = rng.below(batch);
        let mut prompts: Vec<Vec<u32>> = (0..batch)
            .map(|_| {
                let len = 1 + rng.below(60);
                let start = rng.below(pool.len() - len);
                pool[start..start + len].to_vec()
            })
            .collect();
        prompts[at] = target.clone();
        let mut cache = DenseKvCache::new(model.kv_shape(), cap, batch).unwrap();
        let mut ws = model.workspace(batch * 64, batch);
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
        let mut got = row_hashes(&ws.logits()[at * vocab..(at + 1) * vocab], vocab);
        for &t in &steps {
            let next: Vec<[u32; 1]> = (0..batch)
                .map(|i| {
                    if i == at {
                        [t]
                    } else {
                        [rng.below(vocab) as u32]
                    }
                })
                .collect();
            let step: Vec<SeqChunk> = (0..batch)
                .map(|i| SeqChunk {
                    seq: i,
                    tokens: &next[i],
                    pos0: cache.len(i),
                })
                .collect();
            model
                .forward(&step, &mut cache, &mut ws, LogitsFor::LastOfEachChunk)
                .unwrap();
            got.extend(row_hashes(
                &ws.logits()[at * vocab..(at + 1) * vocab],
                vocab,
            ));
        }
        assert_same_rows(
            &got,
            &alone,
            &format!("{format:?} target at {at} in a batch of {batch}"),
        );
    }
}

#[test]
fn a_request_alone_equals_it_in_batches_of_1_to_16_native() {
    batch_case(WeightFormat::Native);
}

#[test]
fn a_request_alone_equals_it_in_batches_of_1_to_16_f32() {
    batch_case(WeightFormat::F32);
}

/// The defect reported with the session API: a session's second turn (evaluated after the
/// cached first turn) must equal a fresh run of the same conversation, with the native
/// packed weights, for a family of conversations.
#[test]
fn second_turns_of_sessions_equal_fresh_runs_native() {
    let Some(llm) = llm(WeightFormat::Native) else {
        return;
    };
    let cfg = GenerationConfig {
        max_new_tokens: 24,
        ..Default::default()
    };
    let conversations = [
        ("My name is Ada.", "What is my name?"),
        ("I live in Lisbon.", "Which country is that in?"),
        ("Write a haiku about rain.", "Now one about snow."),
        ("What is 17 times 3?", "And divided by 3?"),
        ("Name three colors.", "Which one is warmest?"),
    ];
    for (first, second) in conversations {
        let mut s = llm.session(SessionOptions::default()).unwrap();
        let a = s
            .send(ChatMessage::new("user", first), &cfg, &mut |_| {
                Flow::Continue
            })
            .unwrap();
        let b = s
            .send(ChatMessage::new("user", second), &cfg, &mut |_| {
                Flow::Continue
            })
            .unwrap();
        assert!(
            b.counters.reused_prompt_tokens > 0,
            "turn 2 reused the cache"
        );
        let conversation = [
            ChatMessage::new("user", first),
            ChatMessage::new("assistant", a.text.clone()),
            ChatMessage::new("user", second),
        ];
        let fresh = llm.chat(&conversation, &cfg).unwrap();
        assert_eq!(fresh.tokens, b.tokens, "{first:?} / {second:?}");
        assert_eq!(fresh.text, b.text);
    }
}
