//! Test helpers: finding the default model and the oracle, running the transformers reference
//! script, reading its outputs, and the tolerance rule.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

// Not every test binary uses every input.
#[allow(unused_imports)]
pub use torchnative_testing::{
    default_model, hf_reference as run_oracle, oracle_python, safetensors_copy,
};

pub fn read_f32(path: &Path) -> Vec<f32> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

/// Reference outputs of one case.
pub struct Reference {
    pub prefill32: Vec<f32>,
    pub prefill64: Vec<f32>,
    pub decode32: Vec<f32>,
    pub decode64: Vec<f32>,
    pub greedy: Vec<u32>,
    pub vocab: usize,
}

/// Ask transformers for logits of every case (prompt ids + greedy decode steps).
pub fn reference_logits(
    python: &Path,
    model: serde_json::Value,
    truth: Option<&Path>,
    cases: &[(Vec<u32>, usize)],
    work: &Path,
) -> Vec<Reference> {
    reference_logits_with(python, model, truth, cases, work, serde_json::json!({}))
}

/// [`reference_logits`] with more keys in the oracle's request (`{"adapters": [...]}`).
pub fn reference_logits_with(
    python: &Path,
    model: serde_json::Value,
    truth: Option<&Path>,
    cases: &[(Vec<u32>, usize)],
    work: &Path,
    extra: serde_json::Value,
) -> Vec<Reference> {
    let cases_json: Vec<_> = cases
        .iter()
        .map(|(ids, steps)| serde_json::json!({"prompt_ids": ids, "decode_steps": steps}))
        .collect();
    let mut req =
        serde_json::json!({"cmd": "logits", "model": model, "out_dir": work, "cases": cases_json});
    if let Some(t) = truth {
        req["truth"] = serde_json::json!({"dir": t});
    }
    if let serde_json::Value::Object(extra) = extra {
        req.as_object_mut().unwrap().extend(extra);
    }
    run_oracle(python, &req, work);
    let result: serde_json::Value =
        serde_json::from_slice(&std::fs::read(work.join("result.json")).unwrap()).unwrap();
    (0..cases.len())
        .map(|i| {
            let r = &result["cases"][i];
            let f = |n: &str| read_f32(&work.join(format!("case{i}.{n}.f32")));
            Reference {
                prefill32: f("prefill"),
                prefill64: f("prefill64"),
                decode32: f("decode"),
                decode64: f("decode64"),
                greedy: r["greedy"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_u64().unwrap() as u32)
                    .collect(),
                vocab: r["vocab"].as_u64().unwrap() as usize,
            }
        })
        .collect()
}

/// Largest absolute difference, per row of `vocab` logits.
pub fn max_abs_diff_rows(a: &[f32], b: &[f32], vocab: usize) -> Vec<f32> {
    assert_eq!(a.len(), b.len(), "logit arrays differ in length");
    a.chunks(vocab)
        .zip(b.chunks(vocab))
        .map(|(x, y)| {
            x.iter()
                .zip(y)
                .map(|(p, q)| (p - q).abs())
                .fold(0.0, f32::max)
        })
        .collect()
}

/// The tolerance rule: our f32 logits must be as close to the f64 truth as `FACTOR` times
/// transformers' own f32 logits are (row by row), plus a floor for rows where upstream happens
/// to be almost exact. Upstream's f32 error is the scale of float noise this model produces;
/// an implementation bug (wrong mask, rope, cache position) is orders of magnitude larger.
pub const FACTOR: f32 = 8.0;
pub const FLOOR: f32 = 2e-4;

/// The rule as a check: `Err` names the first row that breaks it.
pub fn close_to_truth(
    label: &str,
    ours: &[f32],
    upstream32: &[f32],
    truth64: &[f32],
    vocab: usize,
) -> Result<(), String> {
    let ours_err = max_abs_diff_rows(ours, truth64, vocab);
    let up_err = max_abs_diff_rows(upstream32, truth64, vocab);
    for (row, (o, u)) in ours_err.iter().zip(&up_err).enumerate() {
        let bound = FACTOR * u + FLOOR;
        if *o > bound {
            return Err(format!(
                "{label}: row {row}: |ours - f64| = {o:e} exceeds {FACTOR} x |transformers f32 - f64| ({u:e}) + {FLOOR:e}"
            ));
        }
    }
    Ok(())
}

pub fn assert_close_to_truth(
    label: &str,
    ours: &[f32],
    upstream32: &[f32],
    truth64: &[f32],
    vocab: usize,
) {
    if let Err(msg) = close_to_truth(label, ours, upstream32, truth64, vocab) {
        panic!("{msg}");
    }
}

/// A tiny random model of `arch` saved by transformers into `work/model` with the default
/// model's tokenizer files (so `load_llm` and llama.cpp's converter can use it): the model dir.
pub fn tiny_model_dir_with_default_tokenizer(
    python: &Path,
    default: &Path,
    arch: &str,
    seed: usize,
    work: &Path,
) -> PathBuf {
    let tokenizer_dir = safetensors_copy(python, default);
    let model_dir = work.join("model");
    std::fs::create_dir_all(&model_dir).unwrap();
    run_oracle(
        python,
        &serde_json::json!({"cmd": "tiny", "arch": arch, "seed": seed,
            "out_dir": model_dir, "tokenizer_dir": tokenizer_dir}),
        work,
    );
    model_dir
}

/// A tiny random model of `arch` saved by transformers into `work/model`, loaded with f32 weights.
pub fn tiny_model(
    python: &Path,
    arch: &str,
    seed: usize,
    work: &Path,
) -> (PathBuf, torchnative_runtime::DecoderModel) {
    use torchnative_runtime::{load_model, LoadOptions, WeightFormat};
    let model_dir = work.join("model");
    std::fs::create_dir_all(&model_dir).unwrap();
    run_oracle(
        python,
        &serde_json::json!({"cmd": "tiny", "arch": arch, "seed": seed, "out_dir": model_dir}),
        work,
    );
    let options = LoadOptions {
        weight_format: WeightFormat::F32,
        threads: None,
    };
    let model =
        load_model(model_dir.to_str().unwrap(), &options).unwrap_or_else(|e| panic!("{arch}: {e}"));
    (model_dir, model)
}

/// Our logits along the reference's path: prefill `prompt` from an empty cache (every
/// position), then one cached decode step per reference greedy token: `(prefill, decode)`.
pub fn forward_logits(
    model: &torchnative_runtime::DecoderModel,
    prompt: &[u32],
    greedy: &[u32],
) -> Result<(Vec<f32>, Vec<f32>), String> {
    use torchnative_runtime::{DenseKvCache, LogitsFor, SeqChunk};
    let cap = prompt.len() + greedy.len();
    let mut cache = DenseKvCache::new(model.kv_shape(), cap, 1).unwrap();
    let mut ws = model.workspace(cap, cap);
    let whole = SeqChunk {
        seq: 0,
        tokens: prompt,
        pos0: 0,
    };
    model
        .forward(&[whole], &mut cache, &mut ws, LogitsFor::AllTokens)
        .map_err(|e| e.to_string())?;
    let prefill = ws.logits().to_vec();
    let mut decode = Vec::new();
    for (k, &t) in greedy.iter().enumerate() {
        let chunk = [t];
        let step = SeqChunk {
            seq: 0,
            tokens: &chunk,
            pos0: prompt.len() + k,
        };
        model
            .forward(&[step], &mut cache, &mut ws, LogitsFor::LastOfEachChunk)
            .map_err(|e| e.to_string())?;
        decode.extend_from_slice(ws.logits());
    }
    Ok((prefill, decode))
}

/// Largest `|ours - f64|` and largest `|transformers f32 - f64|` over all rows.
pub fn worst_errors(ours: &[f32], upstream32: &[f32], truth64: &[f32], vocab: usize) -> (f32, f32) {
    let max = |v: Vec<f32>| v.into_iter().fold(0.0, f32::max);
    (
        max(max_abs_diff_rows(ours, truth64, vocab)),
        max(max_abs_diff_rows(upstream32, truth64, vocab)),
    )
}

/// Prefill `prompt` from an empty cache, then one decode step per reference greedy token, and
/// compare every logit with the tolerance rule; `Err` names the first row that breaks it.
pub fn forward_matches_reference(
    model: &torchnative_runtime::DecoderModel,
    prompt: &[u32],
    r: &Reference,
) -> Result<(), String> {
    let (prefill, decode) = forward_logits(model, prompt, &r.greedy)?;
    close_to_truth("prefill", &prefill, &r.prefill32, &r.prefill64, r.vocab)?;
    close_to_truth("decode", &decode, &r.decode32, &r.decode64, r.vocab)
}

/// Submits to `engine` with a channel sink: the request's id and the receiver of its events.
pub fn submit_with_channel(
    engine: &torchnative_runtime::Engine,
    prompt: Vec<u32>,
    config: torchnative_runtime::GenerationConfig,
    top_logprobs: Option<usize>,
) -> torchnative_runtime::Result<(
    torchnative_runtime::RequestId,
    std::sync::mpsc::Receiver<torchnative_runtime::EngineEvent>,
)> {
    let (tx, rx) = std::sync::mpsc::channel();
    let id = engine.submit(
        torchnative_runtime::EngineRequest {
            prompt,
            config,
            top_logprobs,
        },
        Box::new(move |e| {
            let _ = tx.send(e);
            torchnative_runtime::Flow::Continue
        }),
    )?;
    Ok((id, rx))
}

/// Wait (at most 300 s) for a request's end event; panics on an error event, naming `label`.
/// Returns the end and how many token events came before it.
pub fn wait_done(
    rx: &std::sync::mpsc::Receiver<torchnative_runtime::EngineEvent>,
    label: &str,
) -> (torchnative_runtime::EngineDone, usize) {
    use torchnative_runtime::EngineEvent;
    let mut token_events = 0;
    loop {
        match rx
            .recv_timeout(std::time::Duration::from_secs(300))
            .unwrap_or_else(|e| panic!("{label}: no end event: {e}"))
        {
            EngineEvent::Done(d) => return (d, token_events),
            EngineEvent::Error(e) => panic!("{label}: {e}"),
            EngineEvent::Token { .. } => token_events += 1,
            EngineEvent::Text(_) => {}
        }
    }
}
