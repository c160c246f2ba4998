//! Mutation tests: the parity harness must fail when the forward pass has one of the classic
//! bugs. Each fault is injected (feature `fault-injection`) into a model that passes without it.

mod common;

use common::*;
use torchnative_runtime::faults::{self, Fault};
use torchnative_runtime::*;

/// Prefill + 4 decode steps of a tiny random llama (from safetensors, 2 kv heads) against
/// transformers; `Err` when the tolerance rule breaks.
fn check(model: &DecoderModel, prompt: &[u32], r: &Reference) -> Result<(), String> {
    let mut cache = DenseKvCache::new(model.kv_shape(), 64, 1).unwrap();
    let mut ws = model.workspace(64, 64);
    model
        .forward(
            &[SeqChunk {
                seq: 0,
                tokens: prompt,
                pos0: 0,
            }],
            &mut cache,
            &mut ws,
            LogitsFor::AllTokens,
        )
        .map_err(|e| e.to_string())?;
    close_to_truth("prefill", ws.logits(), &r.prefill32, &r.prefill64, r.vocab)?;
    let mut decode = Vec::new();
    for (k, &t) in r.greedy.iter().enumerate() {
        let chunk = [t];
        let c = SeqChunk {
            seq: 0,
            tokens: &chunk,
            pos0: prompt.len() + k,
        };
        model
            .forward(&[c], &mut cache, &mut ws, LogitsFor::LastOfEachChunk)
            .map_err(|e| e.to_string())?;
        decode.extend_from_slice(ws.logits());
    }
    close_to_truth("decode", &decode, &r.decode32, &r.decode64, r.vocab)
}

#[test]
fn each_classic_bug_breaks_parity() {
    let Some(python) = oracle_python() else {
        return;
    };
    let work = std::env::temp_dir().join(format!("torchnative-mutations-{}", std::process::id()));
    let model_dir = work.join("model");
    std::fs::create_dir_all(&model_dir).unwrap();
    run_oracle(
        &python,
        &serde_json::json!({"cmd": "tiny", "arch": "llama", "seed": 3, "out_dir": model_dir}),
        &work,
    );
    let model = load_model(
        model_dir.to_str().unwrap(),
        &LoadOptions {
            weight_format: WeightFormat::F32,
            threads: None,
        },
    )
    .unwrap();
    assert!(
        model.config().n_kv_heads >= 2,
        "the head-mapping fault needs two kv heads"
    );
    let vocab = model.config().vocab_size as u32;
    let prompt: Vec<u32> = (0..12u32).map(|j| (j * 53 + 7) % vocab).collect();
    let refs = reference_logits(
        &python,
        serde_json::json!({"dir": model_dir}),
        None,
        &[(prompt.clone(), 4)],
        &work,
    );

    faults::set(None);
    check(&model, &prompt, &refs[0]).expect("the unmutated model must pass");
    for fault in [
        Fault::FlippedRopePairing,
        Fault::NonCausalMask,
        Fault::CacheFrontierOffByOne,
        Fault::WrongKvHeadMapping,
    ] {
        faults::set(Some(fault));
        let outcome = check(&model, &prompt, &refs[0]);
        faults::set(None);
        assert!(
            outcome.is_err(),
            "{fault:?} went unnoticed by the parity check"
        );
        eprintln!("{fault:?} caught: {}", outcome.unwrap_err());
    }
    let _ = std::fs::remove_dir_all(&work);
}
