//! The bridge from a live transformers model on the face to the native runtime.
//!
//! `torchnative_face.capture(model)` (python side) records which operators one forward pass
//! sends through the door ([`record`], between `_tn_trace_start` and `_tn_trace_stop`),
//! checks that they are the decoder pattern the runtime implements, and hands the module's
//! tensors to [`_tn_capture`]: the runtime's `DecoderModel` then reads the f32 matrices where
//! they lie (the same storages the `nn.Module` holds: shared, not copied) and generates at the
//! native runtime's speed.

use crate::error::core_err;
use crate::tensor::TensorBase;
use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::collections::HashMap;
use std::sync::Mutex;
use torchnative_core::Tensor;
use torchnative_runtime::{DecoderModel, DenseKvCache, KvCache, LogitsFor, SeqChunk, WeightFormat};

/// Operator names seen since `_tn_trace_start`, when tracing.
static TRACE: Mutex<Option<Vec<String>>> = Mutex::new(None);

/// Called by the door for every operator it runs.
pub fn record(full_name: &str) {
    let mut trace = TRACE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(names) = trace.as_mut() {
        names.push(full_name.to_string());
    }
}

/// Starts recording the operators the door runs (on every thread).
#[pyfunction]
pub fn _tn_trace_start() {
    *TRACE.lock().unwrap_or_else(|e| e.into_inner()) = Some(Vec::new());
}

/// Stops recording and returns the operators' names in order (`aten::linear`, ...).
#[pyfunction]
pub fn _tn_trace_stop() -> Vec<String> {
    TRACE
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take()
        .unwrap_or_default()
}

fn runtime_err(e: torchnative_runtime::RuntimeError) -> PyErr {
    PyRuntimeError::new_err(format!("captured model: {e}"))
}

/// A decoder built by the native runtime over a face module's tensors.
#[pyclass(module = "torch._C", name = "_TnCapturedDecoder")]
pub struct CapturedDecoder {
    model: DecoderModel,
}

/// Builds the runtime's decoder from a transformers `config.json` text and the module's
/// state dict (tensors by transformers name). Shapes are checked against the config here.
#[pyfunction]
pub fn _tn_capture(config_json: &str, state: &Bound<'_, PyDict>) -> PyResult<CapturedDecoder> {
    let config = torchnative_formats::config::DecoderConfig::from_hf_config_json(config_json)
        .map_err(|e| PyValueError::new_err(format!("capture: {e}")))?;
    let mut tensors: HashMap<String, Tensor> = HashMap::with_capacity(state.len());
    for (name, value) in state.iter() {
        let name: String = name.extract()?;
        let t = value.cast::<TensorBase>().map_err(|_| {
            PyTypeError::new_err(format!("capture: state entry '{name}' is not a tensor"))
        })?;
        tensors.insert(name, t.borrow().inner.clone());
    }
    let model = DecoderModel::from_tensors(config, tensors, WeightFormat::F32)
        .map_err(|e| PyValueError::new_err(format!("capture: {e}")))?;
    Ok(CapturedDecoder { model })
}

impl CapturedDecoder {
    /// Evaluates `prompt` into `cache` in chunks; the logits of the last token (or of every
    /// token, with `all`) end up in the returned workspace's rows.
    fn prefill(&self, prompt: &[u32], cache: &mut DenseKvCache, all: bool) -> PyResult<Vec<f32>> {
        const CHUNK: usize = 256;
        let rows = if all { CHUNK } else { 1 };
        let mut ws = self.model.workspace(CHUNK.min(prompt.len().max(1)), rows);
        let want = if all {
            LogitsFor::AllTokens
        } else {
            LogitsFor::LastOfEachChunk
        };
        // Dynamic NTK RoPE: the whole prompt rotates as one call of transformers' forward (as
        // a fresh model's `generate` prefills it), however it is chunked here.
        cache
            .set_rope_floor(0, self.model.rope_floor_for(prompt.len()))
            .map_err(runtime_err)?;
        let mut out = Vec::new();
        for (i, chunk) in prompt.chunks(CHUNK).enumerate() {
            let c = SeqChunk {
                seq: 0,
                tokens: chunk,
                pos0: i * CHUNK,
            };
            torchnative_core::kernels::install(|| self.model.forward(&[c], cache, &mut ws, want))
                .map_err(runtime_err)?;
            if all {
                out.extend_from_slice(ws.logits());
            } else {
                out.clear();
                out.extend_from_slice(ws.logits());
            }
        }
        Ok(out)
    }

    fn cache(&self, tokens: usize) -> PyResult<DenseKvCache> {
        let ctx = self.model.config().context_length;
        if tokens == 0 || tokens > ctx {
            return Err(PyValueError::new_err(format!(
                "captured model: {tokens} tokens do not fit the model's context of {ctx} (and at least one is needed)"
            )));
        }
        DenseKvCache::new(self.model.kv_shape(), tokens, 1).map_err(runtime_err)
    }
}

/// The greedy pick: the first index of the largest logit, a NaN counting as largest, as
/// `torch.argmax` picks (the runtime's kernel follows upstream's rule).
fn argmax(logits: &[f32]) -> u32 {
    torchnative_core::kernels::argmax_f32(logits).unwrap_or(0) as u32
}

#[pymethods]
impl CapturedDecoder {
    /// Greedy continuation of `prompt`: up to `max_new_tokens` new ids, stopping after any of
    /// `eos_token_ids` (which is kept, as transformers' `generate` keeps it).
    #[pyo3(signature = (prompt, max_new_tokens, eos_token_ids=Vec::new()))]
    fn generate(
        &self,
        py: Python<'_>,
        prompt: Vec<u32>,
        max_new_tokens: usize,
        eos_token_ids: Vec<u32>,
    ) -> PyResult<Vec<u32>> {
        let mut cache = self.cache(prompt.len() + max_new_tokens)?;
        py.detach(|| {
            let mut out = Vec::with_capacity(max_new_tokens);
            if max_new_tokens == 0 {
                return Ok(out);
            }
            let logits = self.prefill(&prompt, &mut cache, false)?;
            let mut next = argmax(&logits);
            let mut ws = self.model.workspace(1, 1);
            loop {
                out.push(next);
                if out.len() == max_new_tokens || eos_token_ids.contains(&next) {
                    return Ok(out);
                }
                let c = SeqChunk {
                    seq: 0,
                    tokens: std::slice::from_ref(&next),
                    pos0: prompt.len() + out.len() - 1,
                };
                torchnative_core::kernels::install(|| {
                    self.model
                        .forward(&[c], &mut cache, &mut ws, LogitsFor::LastOfEachChunk)
                })
                .map_err(runtime_err)?;
                next = argmax(ws.logits());
            }
        })
    }

    /// The logits of every position of `prompt`, `[len, vocab]` (for parity checks).
    fn logits(&self, py: Python<'_>, prompt: Vec<u32>) -> PyResult<Py<PyAny>> {
        let mut cache = self.cache(prompt.len())?;
        let vocab = self.model.config().vocab_size;
        let all = py.detach(|| self.prefill(&prompt, &mut cache, true))?;
        let t = Tensor::from_vec(all, &[prompt.len(), vocab]).map_err(core_err)?;
        crate::tensor::wrap(py, t)
    }

    /// Bytes of weights read in place from the module's tensors.
    #[getter]
    fn shared_weight_bytes(&self) -> usize {
        self.model.load_stats().mapped_weight_bytes
    }

    /// Bytes of weights the runtime holds copies of (norm weights and biases, or matrices
    /// that were not contiguous f32).
    #[getter]
    fn owned_weight_bytes(&self) -> usize {
        self.model.load_stats().owned_weight_bytes
    }
}
