//! The token loop allocates nothing of its own: with the counting allocator installed, a
//! generation on the default model reports no allocations in its decode loop, for greedy
//! decoding and for a sampling chain with every filter and a stop string that never matches.
//!
//! The one allocation left is rayon's: each decode step enters the kernel pool from outside
//! (`kernels::install`), which pushes a job onto the pool's global injector queue, and that
//! queue (crossbeam's `Injector`) allocates a new block of 63 slots every 63 pushes. So a run of
//! `n` forward passes may count up to `ceil(n / 63)` allocations, all from that queue.
//!
//! One test only, in its own binary: the count is process-wide, so nothing else may run beside
//! it.

mod common;

use torchnative_runtime::*;

/// Jobs per block of crossbeam-deque's `Injector` (rayon's global queue).
const INJECTOR_BLOCK_SLOTS: u64 = 63;

#[global_allocator]
static ALLOC: CountingAllocator = CountingAllocator;

#[test]
fn decode_loop_makes_no_allocation() {
    let Some(path) = common::default_model() else {
        return;
    };
    let llm = load_llm(path.to_str().unwrap(), &LoadOptions::default()).unwrap();
    assert!(
        allocation_count().is_some(),
        "the counting allocator is installed"
    );
    let greedy = GenerationConfig {
        max_new_tokens: 32,
        // EOS suppressed: all 32 tokens are generated.
        min_new_tokens: 32,
        ..Default::default()
    };
    let sampling = GenerationConfig {
        sampling: SamplingParams {
            do_sample: true,
            temperature: 0.8,
            top_k: 40,
            top_p: 0.95,
            min_p: 0.02,
            typical_p: 0.9,
            repetition_penalty: 1.1,
            presence_penalty: 0.1,
            frequency_penalty: 0.1,
            ..Default::default()
        },
        seed: Some(7),
        stop: vec!["never appears in the output \u{2603}".into()],
        ..greedy.clone()
    };
    for (name, config) in [("greedy", &greedy), ("sampling", &sampling)] {
        let mut pieces = 0usize;
        let ids = llm.tokenize("The capital of France is").unwrap();
        let mut session = llm.session(SessionOptions::default()).unwrap();
        let done = session
            .generate(&ids, config, &mut |_| {
                pieces += 1;
                Flow::Continue
            })
            .unwrap();
        assert_eq!(done.tokens.len(), 32, "{name}");
        assert!(pieces > 0 && !done.text.is_empty(), "{name}");
        let forward_passes = done.tokens.len() as u64 - 1;
        let injector_blocks = forward_passes.div_ceil(INJECTOR_BLOCK_SLOTS);
        let counted = done.counters.allocations_in_decode_loop.unwrap();
        eprintln!("{name}: {counted} allocations in the decode loop of 32 tokens");
        assert!(
            counted <= injector_blocks,
            "{name}: {counted} allocations in the decode loop of 32 tokens \
             (at most {injector_blocks} from rayon's injector queue allowed)"
        );
    }
}
