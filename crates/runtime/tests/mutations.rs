//! Mutation tests: the parity harness must fail when the forward pass has one of the classic
//! bugs. Each fault is switched on at run time (`faults::set`) in a model that passes without it.

mod common;

use common::*;
use torchnative_runtime::faults::{self, Fault};

#[test]
fn each_classic_bug_breaks_parity() {
    let Some(python) = oracle_python() else {
        return;
    };
    let work = std::env::temp_dir().join(format!("torchnative-mutations-{}", std::process::id()));
    // Prefill + 4 decode steps of a tiny random llama (2 kv heads) from safetensors.
    let (model_dir, model) = tiny_model(&python, "llama", 3, &work);
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
    forward_matches_reference(&model, &prompt, &refs[0]).expect("the unmutated model must pass");
    for fault in [
        Fault::FlippedRopePairing,
        Fault::NonCausalMask,
        Fault::CacheFrontierOffByOne,
        Fault::WrongKvHeadMapping,
    ] {
        faults::set(Some(fault));
        let outcome = forward_matches_reference(&model, &prompt, &refs[0]);
        faults::set(None);
        assert!(
            outcome.is_err(),
            "{fault:?} went unnoticed by the parity check"
        );
        eprintln!("{fault:?} caught: {}", outcome.unwrap_err());
    }
    let _ = std::fs::remove_dir_all(&work);
}
