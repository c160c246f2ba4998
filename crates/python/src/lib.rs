//! `torchnative._native`: the thin extension module under the `torchnative` Python package.
//!
//! The Python layer (`python/torchnative`) owns the user-facing API: keyword names, argument
//! checks, result objects and docstrings. This module only moves values across the boundary and
//! runs all model work with the GIL released, so other Python threads keep running meanwhile.

mod embed;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::PyDict;
use torchnative_runtime::{
    load_llm, ActiveLora, ChatMessage, Completion, Constraint, ConstraintSyntax, Counters,
    CountingAllocator, DraftSource, Engine, EngineConfig, EngineEvent, EngineRequest, Flow,
    GenerationConfig, Llm, LoadOptions, LoraAdapter, RuntimeError, SamplingParams, Session,
    SessionOptions, SpeculativeConfig, Speculator, Timings, Usage, WeightFormat,
};

/// Counts heap allocations (one relaxed atomic add each) so that results report
/// `allocations_in_decode_loop`.
#[global_allocator]
static ALLOC: CountingAllocator = CountingAllocator;

/// Pieces a stream may hold before the decoding thread waits for the consumer: small, so that
/// closing a stream stops generation within a few tokens.
const STREAM_BUFFER: usize = 4;

/// How often a consumer blocked on a stream wakes up to let Python handle signals (Ctrl-C).
const SIGNAL_POLL: Duration = Duration::from_millis(50);

/// Raise `err` as the matching class of `torchnative.errors` (defined in Python so that they
/// carry docstrings and can also derive from the matching built-in exceptions).
fn to_py_err(py: Python<'_>, err: RuntimeError) -> PyErr {
    let class = match &err {
        RuntimeError::Load { .. } => "ModelLoadError",
        RuntimeError::Unsupported { .. } => "UnsupportedModelError",
        RuntimeError::ContextOverflow { .. } => "ContextOverflowError",
        RuntimeError::InvalidArgument { .. } | RuntimeError::TokenOutOfRange { .. } => {
            "InvalidArgumentError"
        }
        RuntimeError::Text(_)
        | RuntimeError::Kernel(_)
        | RuntimeError::QueueFull { .. }
        | RuntimeError::EngineStopped => "TorchnativeError",
    };
    let message = err.to_string();
    let build = || -> PyResult<PyErr> {
        let cls = py.import("torchnative.errors")?.getattr(class)?;
        let value = cls.call1((message.clone(),))?;
        if let RuntimeError::ContextOverflow {
            prompt_tokens,
            max_new_tokens,
            capacity,
        } = err
        {
            value.setattr("prompt_tokens", prompt_tokens)?;
            value.setattr("max_new_tokens", max_new_tokens)?;
            value.setattr("capacity", capacity)?;
        }
        Ok(PyErr::from_value(value))
    };
    // If the error classes cannot be reached, the import error itself is the clearest report.
    build().unwrap_or_else(|e| e)
}

/// A generation config from the dict the Python layer built (keys as in transformers; every key
/// optional; types already checked there, ranges checked by the runtime). Keys not given keep
/// `base`, the model's generation config, as transformers' `generate` keeps the model's
/// generation_config values the caller does not override.
fn config_from_dict(
    d: &Bound<'_, PyDict>,
    llm: &Llm,
    base: GenerationConfig,
) -> PyResult<GenerationConfig> {
    let s = base.sampling.clone();
    let max_new_tokens: Option<usize> = get(d, "max_new_tokens")?;
    Ok(GenerationConfig {
        // As in transformers, a caller's max_new_tokens takes precedence over the model's
        // max_length.
        max_length: if max_new_tokens.is_some() {
            None
        } else {
            base.max_length
        },
        max_new_tokens: max_new_tokens.unwrap_or(base.max_new_tokens),
        min_new_tokens: get(d, "min_new_tokens")?.unwrap_or(base.min_new_tokens),
        sampling: SamplingParams {
            do_sample: get(d, "do_sample")?.unwrap_or(s.do_sample),
            temperature: get(d, "temperature")?.unwrap_or(s.temperature),
            top_k: get(d, "top_k")?.unwrap_or(s.top_k),
            top_p: get(d, "top_p")?.unwrap_or(s.top_p),
            min_p: get(d, "min_p")?.unwrap_or(s.min_p),
            typical_p: get(d, "typical_p")?.unwrap_or(s.typical_p),
            repetition_penalty: get(d, "repetition_penalty")?.unwrap_or(s.repetition_penalty),
            presence_penalty: get(d, "presence_penalty")?.unwrap_or(s.presence_penalty),
            frequency_penalty: get(d, "frequency_penalty")?.unwrap_or(s.frequency_penalty),
            ..s
        },
        seed: get(d, "seed")?,
        stop: get(d, "stop")?.unwrap_or_default(),
        eos_token_ids: base.eos_token_ids,
        constraint: constraint_from_dict(d, llm)?,
        lora: lora_from_dict(d)?,
    })
}

/// The adapters the config names (`lora`: a list of `(NativeLora, scale)` the Python layer
/// built); absent: the session's own choice.
fn lora_from_dict(d: &Bound<'_, PyDict>) -> PyResult<Option<Vec<ActiveLora>>> {
    let Some(list) = d.get_item("lora")?.filter(|v| !v.is_none()) else {
        return Ok(None);
    };
    let pairs: Vec<(PyRef<'_, NativeLora>, f32)> = list.extract()?;
    Ok(Some(
        pairs
            .iter()
            .map(|(a, s)| ActiveLora::new(a.adapter.clone(), *s))
            .collect(),
    ))
}

/// A LoRA adapter loaded for one model (shared, immutable).
#[pyclass(frozen, module = "torchnative._native")]
struct NativeLora {
    adapter: LoraAdapter,
}

#[pymethods]
impl NativeLora {
    /// Where the adapter was loaded from.
    #[getter]
    fn source(&self) -> String {
        self.adapter.source().display().to_string()
    }

    /// Largest rank of its low-rank pairs.
    #[getter]
    fn rank(&self) -> usize {
        self.adapter.max_rank()
    }
}

/// A key of the config dict, `None` when absent or None.
fn get<'py, T: FromPyObjectOwned<'py>>(d: &Bound<'py, PyDict>, key: &str) -> PyResult<Option<T>> {
    match d.get_item(key)? {
        Some(v) if !v.is_none() => Ok(Some(v.extract().map_err(Into::into)?)),
        _ => Ok(None),
    }
}

/// The constraint the config names (`grammar`, `json_schema`, `regex` text or `json_object`;
/// the Python layer allows at most one), compiled through the model's cache.
fn constraint_from_dict(d: &Bound<'_, PyDict>, llm: &Llm) -> PyResult<Option<Constraint>> {
    let py = d.py();
    let compile = |syntax, text: &str| {
        llm.constraint(syntax, text)
            .map(Some)
            .map_err(|e| to_py_err(py, e))
    };
    for (key, syntax) in [
        ("grammar", ConstraintSyntax::Gbnf),
        ("json_schema", ConstraintSyntax::JsonSchema),
        ("regex", ConstraintSyntax::Regex),
    ] {
        if let Some(text) = get::<String>(d, key)? {
            return compile(syntax, &text);
        }
    }
    if get::<bool>(d, "json_object")?.unwrap_or(false) {
        return compile(ConstraintSyntax::JsonObject, "");
    }
    Ok(None)
}

/// The speculative decoding the config asks for (`draft`: "prompt_lookup" or a `NativeLlm`,
/// `draft_tokens`), checked against the target before any work.
fn speculator_from_dict(d: &Bound<'_, PyDict>, llm: &Llm) -> PyResult<Option<Speculator>> {
    let py = d.py();
    let Some(draft) = d.get_item("draft")?.filter(|v| !v.is_none()) else {
        return Ok(None);
    };
    let k = get::<usize>(d, "draft_tokens")?.unwrap_or(3);
    let source = if let Ok(name) = draft.extract::<String>() {
        if name != "prompt_lookup" {
            return Err(to_py_err(
                py,
                RuntimeError::InvalidArgument {
                    what: "draft".into(),
                    reason: format!("'{name}' (use \"prompt_lookup\" or a loaded LLM)"),
                },
            ));
        }
        SpeculativeConfig::prompt_lookup(k).draft
    } else {
        let native: PyRef<'_, NativeLlm> = draft.extract()?;
        DraftSource::Model(native.llm.clone())
    };
    let config = SpeculativeConfig {
        draft: source,
        max_draft_tokens: k,
    };
    Speculator::new(llm, config)
        .map(Some)
        .map_err(|e| to_py_err(py, e))
}

/// A generation config as the dict `NativeLlm.generation_config` returns.
fn config_dict<'py>(py: Python<'py>, c: &GenerationConfig) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    let s = &c.sampling;
    d.set_item("max_new_tokens", c.max_new_tokens)?;
    d.set_item("max_length", c.max_length)?;
    d.set_item("min_new_tokens", c.min_new_tokens)?;
    d.set_item("do_sample", s.do_sample)?;
    d.set_item("temperature", s.temperature)?;
    d.set_item("top_k", s.top_k)?;
    d.set_item("top_p", s.top_p)?;
    d.set_item("min_p", s.min_p)?;
    d.set_item("typical_p", s.typical_p)?;
    d.set_item("repetition_penalty", s.repetition_penalty)?;
    d.set_item("presence_penalty", s.presence_penalty)?;
    d.set_item("frequency_penalty", s.frequency_penalty)?;
    d.set_item("eos_token_ids", c.eos_token_ids.clone())?;
    Ok(d)
}

/// A completion as a plain dict; the Python layer wraps it in `torchnative.Result`.
fn completion_dict<'py>(py: Python<'py>, c: &Completion) -> PyResult<Bound<'py, PyDict>> {
    let ms = |t: Duration| t.as_secs_f64() * 1000.0;
    let d = PyDict::new(py);
    d.set_item("text", &c.text)?;
    d.set_item("tokens", &c.tokens)?;
    d.set_item("finish_reason", c.finish_reason.as_str())?;
    d.set_item("prompt_tokens", c.usage.prompt_tokens)?;
    d.set_item("completion_tokens", c.usage.completion_tokens)?;
    d.set_item("load_ms", ms(c.timings.load))?;
    d.set_item("prefill_ms", ms(c.timings.prefill))?;
    d.set_item("time_to_first_token_ms", ms(c.timings.time_to_first_token))?;
    d.set_item(
        "decode_tokens_per_second",
        c.timings.decode_tokens_per_second(),
    )?;
    d.set_item("reused_prompt_tokens", c.counters.reused_prompt_tokens)?;
    d.set_item(
        "allocations_in_decode_loop",
        c.counters.allocations_in_decode_loop,
    )?;
    d.set_item("drafted_tokens", c.speculative.drafted)?;
    d.set_item("accepted_tokens", c.speculative.accepted)?;
    Ok(d)
}

fn messages_from(pairs: Vec<(String, String)>) -> Vec<ChatMessage> {
    pairs
        .into_iter()
        .map(|(role, content)| ChatMessage::new(role, content))
        .collect()
}

/// Load a model (a `.gguf` file, a safetensors directory or a cached Hugging Face repo id).
#[pyfunction]
#[pyo3(signature = (spec, dtype, threads=None))]
fn load(py: Python<'_>, spec: &str, dtype: &str, threads: Option<usize>) -> PyResult<NativeLlm> {
    let options = LoadOptions {
        weight_format: WeightFormat::parse(dtype).map_err(|e| to_py_err(py, e))?,
        threads,
    };
    let llm = py
        .detach(|| load_llm(spec, &options))
        .map_err(|e| to_py_err(py, e))?;
    Ok(NativeLlm { llm })
}

/// A loaded model (immutable; shared by every request and session made from it).
#[pyclass(frozen, module = "torchnative._native")]
struct NativeLlm {
    llm: Llm,
}

impl NativeLlm {
    /// The context of a one-shot request: just large enough for it, at most `limit` (the
    /// model's context by default), so that a request that cannot fit reports a context
    /// overflow rather than an impossible session size.
    fn one_shot_session(
        &self,
        prompt_len: usize,
        config: &GenerationConfig,
        limit: Option<usize>,
    ) -> Result<Session, RuntimeError> {
        let limit = limit.unwrap_or(self.llm.config().context_length);
        let wanted = prompt_len
            .saturating_add(config.max_new_tokens_for(prompt_len)?)
            .max(1);
        self.llm.session(SessionOptions {
            n_ctx: Some(wanted.min(limit)),
            ..Default::default()
        })
    }

    /// Start a one-shot generation in a worker thread; `send_pieces` false keeps the text out
    /// of the channel (`generate` reads it from the completion), so the worker's token loop
    /// makes no allocation for it.
    fn start(
        &self,
        ids: Vec<u32>,
        config: &Bound<'_, PyDict>,
        n_ctx: Option<usize>,
        send_pieces: bool,
    ) -> PyResult<NativeStream> {
        let cfg = config_from_dict(config, &self.llm, self.llm.generation_config())?;
        let mut speculator = speculator_from_dict(config, &self.llm)?;
        // An `Llm` is a cheap handle of the same model; the cache is allocated in the
        // worker thread, not under the GIL.
        let llm = NativeLlm {
            llm: self.llm.clone(),
        };
        Ok(NativeStream::spawn(send_pieces, move |on_text| {
            let mut session = llm.one_shot_session(ids.len(), &cfg, n_ctx)?;
            match speculator.as_mut() {
                Some(s) => session.generate_speculative(&ids, &cfg, s, on_text),
                None => session.generate(&ids, &cfg, on_text),
            }
        }))
    }
}

#[pymethods]
impl NativeLlm {
    /// The model's context length in tokens.
    #[getter]
    fn context_length(&self) -> usize {
        self.llm.config().context_length
    }

    /// Where the model was loaded from.
    #[getter]
    fn source(&self) -> String {
        self.llm.source().display().to_string()
    }

    /// Seconds the load took.
    #[getter]
    fn load_seconds(&self) -> f64 {
        self.llm.load_time().as_secs_f64()
    }

    /// What a request does when the caller sets nothing: the built-in defaults with the
    /// model's generation_config.json applied (as transformers' `generate` applies it).
    fn generation_config<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        config_dict(py, &self.llm.generation_config())
    }

    /// Load a LoRA adapter (PEFT directory or GGUF LoRA file) for this model.
    fn load_lora(&self, py: Python<'_>, path: std::path::PathBuf) -> PyResult<NativeLora> {
        py.detach(|| self.llm.load_lora(&path))
            .map(|adapter| NativeLora { adapter })
            .map_err(|e| to_py_err(py, e))
    }

    /// Token ids of a plain prompt (special tokens added as the tokenizer does).
    fn tokenize(&self, py: Python<'_>, text: &str) -> PyResult<Vec<u32>> {
        py.detach(|| self.llm.tokenize(text))
            .map_err(|e| to_py_err(py, e))
    }

    /// Text of token ids.
    fn detokenize(&self, py: Python<'_>, ids: Vec<u32>) -> PyResult<String> {
        let vocab = self.llm.config().vocab_size;
        if let Some(&bad) = ids.iter().find(|&&t| t as usize >= vocab) {
            let err = RuntimeError::TokenOutOfRange {
                token: bad,
                vocab_size: vocab,
            };
            return Err(to_py_err(py, err));
        }
        py.detach(|| self.llm.detokenize(&ids))
            .map_err(|e| to_py_err(py, e))
    }

    /// The prompt text of a conversation of (role, content) pairs.
    fn render_chat(&self, py: Python<'_>, messages: Vec<(String, String)>) -> PyResult<String> {
        let messages = messages_from(messages);
        py.detach(|| self.llm.render_chat(&messages))
            .map_err(|e| to_py_err(py, e))
    }

    /// Token ids of a rendered conversation.
    fn tokenize_chat(&self, py: Python<'_>, messages: Vec<(String, String)>) -> PyResult<Vec<u32>> {
        let messages = messages_from(messages);
        py.detach(|| self.llm.tokenize_chat(&messages))
            .map_err(|e| to_py_err(py, e))
    }

    /// Generate after `ids` in a fresh session; returns the completion dict. Decodes in a
    /// worker thread while this one waits without the GIL and stays interruptible (Ctrl-C).
    #[pyo3(signature = (ids, config, n_ctx=None))]
    fn generate<'py>(
        &self,
        py: Python<'py>,
        ids: Vec<u32>,
        config: &Bound<'py, PyDict>,
        n_ctx: Option<usize>,
    ) -> PyResult<Bound<'py, PyDict>> {
        self.start(ids, config, n_ctx, false)?.finish(py)
    }

    /// Like `generate`, but decoding runs in a background thread feeding the returned stream.
    #[pyo3(signature = (ids, config, n_ctx=None))]
    fn stream(
        &self,
        ids: Vec<u32>,
        config: &Bound<'_, PyDict>,
        n_ctx: Option<usize>,
    ) -> PyResult<NativeStream> {
        self.start(ids, config, n_ctx, true)
    }

    /// A new session (its own KV cache of `n_ctx` tokens).
    #[pyo3(signature = (n_ctx=None))]
    fn session(&self, py: Python<'_>, n_ctx: Option<usize>) -> PyResult<NativeSession> {
        let options = SessionOptions {
            n_ctx,
            ..Default::default()
        };
        let session = py
            .detach(|| self.llm.session(options))
            .map_err(|e| to_py_err(py, e))?;
        Ok(NativeSession {
            slot: Arc::new(Mutex::new(Some(session))),
        })
    }
}

/// Where a session lives between requests. A stream takes it out for the time it decodes (in
/// its own thread) and puts it back when it ends, so a request made meanwhile is refused
/// instead of waiting on a stream nobody consumes.
type SessionSlot = Arc<Mutex<Option<Session>>>;

fn lock(slot: &SessionSlot) -> MutexGuard<'_, Option<Session>> {
    // A panic while holding the lock cannot leave the Option half-written.
    slot.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn busy_error(py: Python<'_>) -> PyErr {
    to_py_err(
        py,
        RuntimeError::InvalidArgument {
            what: "session".into(),
            reason: "a stream of this session is still running; exhaust or close it first".into(),
        },
    )
}

/// A multi-turn conversation holding its KV cache.
#[pyclass(frozen, module = "torchnative._native")]
struct NativeSession {
    slot: SessionSlot,
}

impl NativeSession {
    fn take(&self, py: Python<'_>) -> PyResult<Session> {
        lock(&self.slot).take().ok_or_else(|| busy_error(py))
    }

    fn with<T>(&self, py: Python<'_>, f: impl FnOnce(&mut Session) -> T) -> PyResult<T> {
        let mut guard = lock(&self.slot);
        let session = guard.as_mut().ok_or_else(|| busy_error(py))?;
        Ok(f(session))
    }

    /// One chat turn in a worker thread (`send_pieces` as in `NativeLlm::start`).
    fn start_send(
        &self,
        py: Python<'_>,
        role: String,
        content: String,
        config: &Bound<'_, PyDict>,
        send_pieces: bool,
    ) -> PyResult<NativeStream> {
        let mut session = self.take(py)?;
        let llm = session.llm().clone();
        let cfg = match config_from_dict(config, &llm, llm.generation_config()) {
            Ok(cfg) => cfg,
            Err(e) => {
                *lock(&self.slot) = Some(session);
                return Err(e);
            }
        };
        let slot = Arc::clone(&self.slot);
        Ok(NativeStream::spawn(send_pieces, move |on_text| {
            let done = session.send(ChatMessage::new(role, content), &cfg, on_text);
            *lock(&slot) = Some(session);
            done
        }))
    }
}

#[pymethods]
impl NativeSession {
    /// One chat turn: add (role, content), answer it, keep the answer (interruptible like
    /// `NativeLlm.generate`).
    fn send<'py>(
        &self,
        py: Python<'py>,
        role: String,
        content: String,
        config: &Bound<'py, PyDict>,
    ) -> PyResult<Bound<'py, PyDict>> {
        self.start_send(py, role, content, config, false)?
            .finish(py)
    }

    /// Like `send`, streaming the answer.
    fn stream_send(
        &self,
        py: Python<'_>,
        role: String,
        content: String,
        config: &Bound<'_, PyDict>,
    ) -> PyResult<NativeStream> {
        self.start_send(py, role, content, config, true)
    }

    /// Forget the conversation (the cache stays allocated).
    fn reset(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, Session::reset)
    }

    /// The conversation so far as (role, content) pairs.
    fn messages(&self, py: Python<'_>) -> PyResult<Vec<(String, String)>> {
        self.with(py, |s| {
            s.messages()
                .iter()
                .map(|m| (m.role.clone(), m.content.clone()))
                .collect()
        })
    }

    /// Tokens in the cache.
    fn n_tokens(&self, py: Python<'_>) -> PyResult<usize> {
        self.with(py, |s| s.tokens().len())
    }

    /// Context capacity in tokens.
    fn capacity(&self, py: Python<'_>) -> PyResult<usize> {
        self.with(py, |s| s.capacity())
    }
}

enum Event {
    Piece(String),
    Done(Result<Completion, RuntimeError>),
}

/// Text pieces of a generation decoding in a background thread, through a bounded channel.
/// Dropping or closing it cancels the generation.
#[pyclass(frozen, module = "torchnative._native")]
struct NativeStream {
    state: Mutex<StreamState>,
    cancel: Arc<AtomicBool>,
}

struct StreamState {
    /// `None` once closed or finished.
    events: Option<Receiver<Event>>,
    worker: Option<JoinHandle<()>>,
    /// The final completion, or the error the generation ended with.
    outcome: Option<Result<Completion, RuntimeError>>,
}

impl NativeStream {
    /// Run `job` in a worker thread; its text pieces go through the channel when `send_pieces`
    /// (otherwise only cancellation is checked per piece).
    fn spawn<F>(send_pieces: bool, job: F) -> NativeStream
    where
        F: FnOnce(&mut dyn FnMut(&str) -> Flow) -> Result<Completion, RuntimeError>
            + Send
            + 'static,
    {
        let (tx, rx) = sync_channel(STREAM_BUFFER);
        let cancel = Arc::new(AtomicBool::new(false));
        let stop = Arc::clone(&cancel);
        let worker = std::thread::spawn(move || run_stream(job, tx, stop, send_pieces));
        NativeStream {
            state: Mutex::new(StreamState {
                events: Some(rx),
                worker: Some(worker),
                outcome: None,
            }),
            cancel,
        }
    }

    fn state(&self) -> MutexGuard<'_, StreamState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Cancel, wait for the worker to stop (so the session is back and the result final),
    /// and keep its outcome.
    fn shut_down(state: &mut StreamState, cancel: &AtomicBool) {
        cancel.store(true, Ordering::SeqCst);
        if let Some(rx) = state.events.take() {
            // The worker stops at its next piece; drain what it still sends (unblocking it if
            // the channel is full) until its outcome arrives or it hangs up.
            for ev in rx.iter() {
                if let Event::Done(d) = ev {
                    state.outcome = Some(d);
                    break;
                }
            }
        }
        if let Some(w) = state.worker.take() {
            let _ = w.join();
        }
    }
}

fn run_stream<F>(job: F, tx: SyncSender<Event>, cancel: Arc<AtomicBool>, send_pieces: bool)
where
    F: FnOnce(&mut dyn FnMut(&str) -> Flow) -> Result<Completion, RuntimeError>,
{
    let mut on_text = |piece: &str| {
        // A failed send means the consumer dropped the stream.
        if cancel.load(Ordering::SeqCst)
            || (send_pieces && tx.send(Event::Piece(piece.to_string())).is_err())
        {
            Flow::Cancel
        } else {
            Flow::Continue
        }
    };
    let done = job(&mut on_text);
    let _ = tx.send(Event::Done(done));
}

/// What one wait on a stream produced, handed from the GIL-free wait back to Python.
enum Step {
    Piece(String),
    Finished,
    Failed(RuntimeError),
    TimedOut,
}

impl NativeStream {
    /// Run to the end, dropping the pieces, and return the completion dict. Checks for signals
    /// between waits: on Ctrl-C the generation is cancelled and KeyboardInterrupt raised.
    fn finish<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        loop {
            match py.detach(|| self.wait_step()) {
                Step::Finished => break,
                Step::Failed(e) => return Err(to_py_err(py, e)),
                Step::Piece(_) | Step::TimedOut => {
                    if let Err(e) = py.check_signals() {
                        self.close(py);
                        return Err(e);
                    }
                }
            }
        }
        match self.result(py)? {
            Some(d) => Ok(d),
            // The worker hung up without an outcome: only if it panicked.
            None => Err(to_py_err(
                py,
                RuntimeError::Kernel("the generation thread ended without a result".into()),
            )),
        }
    }

    /// Wait a little for the next event. Called without the GIL: every lock of the stream's
    /// state is taken without it, so two Python threads using one stream cannot deadlock.
    fn wait_step(&self) -> Step {
        let mut state = self.state();
        let Some(rx) = state.events.as_ref() else {
            return Step::Finished;
        };
        match rx.recv_timeout(SIGNAL_POLL) {
            Ok(Event::Piece(p)) => Step::Piece(p),
            Ok(Event::Done(done)) => {
                state.events = None;
                if let Some(w) = state.worker.take() {
                    let _ = w.join();
                }
                let step = match &done {
                    Ok(_) => Step::Finished,
                    Err(e) => Step::Failed(e.clone()),
                };
                state.outcome = Some(done);
                step
            }
            Err(RecvTimeoutError::Timeout) => Step::TimedOut,
            Err(RecvTimeoutError::Disconnected) => {
                state.events = None;
                Step::Finished
            }
        }
    }
}

#[pymethods]
impl NativeStream {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// The next piece of text; None when the generation has ended. Waits with the GIL released.
    fn __next__(&self, py: Python<'_>) -> PyResult<Option<String>> {
        loop {
            match py.detach(|| self.wait_step()) {
                Step::Piece(p) => return Ok(Some(p)),
                Step::Finished => return Ok(None),
                Step::Failed(e) => return Err(to_py_err(py, e)),
                Step::TimedOut => {
                    // Ctrl-C in the consumer: stop decoding too.
                    if let Err(e) = py.check_signals() {
                        self.close(py);
                        return Err(e);
                    }
                }
            }
        }
    }

    /// Stop the generation (if still running) and wait until it has stopped.
    fn close(&self, py: Python<'_>) {
        py.detach(|| NativeStream::shut_down(&mut self.state(), &self.cancel));
    }

    /// The completion dict once the stream has ended (None before); raises the generation's
    /// error if it failed.
    fn result<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let outcome = py.detach(|| match &self.state().outcome {
            None => None,
            Some(Ok(c)) => Some(Ok(c.clone())),
            Some(Err(e)) => Some(Err(e.clone())),
        });
        match outcome {
            None => Ok(None),
            Some(Ok(c)) => completion_dict(py, &c).map(Some),
            Some(Err(e)) => Err(to_py_err(py, e)),
        }
    }
}

impl Drop for NativeStream {
    fn drop(&mut self) {
        let state = self.state.get_mut().unwrap_or_else(|p| p.into_inner());
        NativeStream::shut_down(state, &self.cancel);
    }
}

/// The batching engine: many requests over one model, continuous batching over a paged KV
/// cache with prefix caching (see `torchnative_runtime::engine`).
#[pyclass(frozen, module = "torchnative._native")]
struct NativeEngine {
    engine: Arc<Engine>,
}

#[pymethods]
impl NativeEngine {
    #[new]
    #[pyo3(signature = (llm, max_running, ctx_per_seq, max_batch_tokens, max_queued, kv_cache_tokens, prompt_lookup_tokens=0, kv_cache_dtype="f32"))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        llm: &NativeLlm,
        max_running: usize,
        ctx_per_seq: usize,
        max_batch_tokens: usize,
        max_queued: usize,
        kv_cache_tokens: usize,
        prompt_lookup_tokens: usize,
        kv_cache_dtype: &str,
    ) -> PyResult<NativeEngine> {
        let kv_cache_dtype = kv_cache_dtype.parse().map_err(|e| to_py_err(py, e))?;
        let config = EngineConfig {
            max_running,
            ctx_per_seq,
            max_batch_tokens,
            max_queued,
            kv_cache_tokens,
            prompt_lookup_tokens,
            kv_cache_dtype,
            ..Default::default()
        };
        let llm = llm.llm.clone();
        let engine = py
            .detach(|| Engine::start(llm, config))
            .map_err(|e| to_py_err(py, e))?;
        Ok(NativeEngine {
            engine: Arc::new(engine),
        })
    }

    /// Queue a request; its text streams through the returned stream. Raises at once when the
    /// queue is full.
    fn submit(
        &self,
        py: Python<'_>,
        ids: Vec<u32>,
        config: &Bound<'_, PyDict>,
    ) -> PyResult<NativeStream> {
        let llm = self.engine.llm();
        let cfg = config_from_dict(config, llm, llm.generation_config())?;
        let (tx, rx) = std::sync::mpsc::channel();
        let request = EngineRequest {
            prompt: ids,
            config: cfg,
            top_logprobs: None,
        };
        let sink = Box::new(move |e: EngineEvent| {
            if tx.send(e).is_err() {
                Flow::Cancel
            } else {
                Flow::Continue
            }
        });
        let id = self
            .engine
            .submit(request, sink)
            .map_err(|e| to_py_err(py, e))?;
        let engine = Arc::clone(&self.engine);
        Ok(NativeStream::spawn(true, move |on_text| {
            for event in rx.iter() {
                match event {
                    EngineEvent::Text(t) => {
                        if on_text(&t) == Flow::Cancel {
                            engine.cancel(id);
                        }
                    }
                    EngineEvent::Token { .. } => {}
                    EngineEvent::Done(d) => {
                        let n = d.tokens.len();
                        let per = if n > 1 {
                            (d.total.saturating_sub(d.time_to_first_token)) / (n as u32 - 1)
                        } else {
                            Duration::ZERO
                        };
                        return Ok(Completion {
                            text: d.text,
                            tokens: d.tokens,
                            finish_reason: d.finish_reason,
                            usage: Usage {
                                prompt_tokens: d.usage.prompt_tokens,
                                completion_tokens: d.usage.completion_tokens,
                            },
                            timings: Timings {
                                time_to_first_token: d.time_to_first_token,
                                decode_steps: vec![per; n.saturating_sub(1)],
                                ..Default::default()
                            },
                            counters: Counters::default(),
                            speculative: Default::default(),
                        });
                    }
                    EngineEvent::Error(e) => return Err(e),
                }
            }
            Err(RuntimeError::EngineStopped)
        }))
    }

    /// Counters: running and queued requests, tokens, prefix-cache hits, preemptions, KV
    /// blocks.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        use std::sync::atomic::Ordering::Relaxed;
        let s = self.engine.stats();
        let d = PyDict::new(py);
        d.set_item("running", s.running.load(Relaxed))?;
        d.set_item("queued", s.queued.load(Relaxed))?;
        d.set_item("prompt_tokens", s.prompt_tokens.load(Relaxed))?;
        d.set_item("generated_tokens", s.generated_tokens.load(Relaxed))?;
        d.set_item("prefix_hit_tokens", s.prefix_hit_tokens.load(Relaxed))?;
        d.set_item("preemptions", s.preemptions.load(Relaxed))?;
        d.set_item("drafted_tokens", s.drafted_tokens.load(Relaxed))?;
        d.set_item("accepted_tokens", s.accepted_tokens.load(Relaxed))?;
        d.set_item("kv_blocks_total", s.kv_blocks_total.load(Relaxed))?;
        d.set_item("kv_blocks_used", s.kv_blocks_used.load(Relaxed))?;
        Ok(d)
    }
}

/// An OpenAI-compatible HTTP server over an engine, on a background thread.
#[pyclass(frozen, module = "torchnative._native")]
struct NativeServer {
    url: String,
    handle: Mutex<Option<torchnative_server::ServerHandle>>,
}

#[pymethods]
impl NativeServer {
    #[new]
    #[pyo3(signature = (engine, host, port, model_name, api_key=None))]
    fn new(
        py: Python<'_>,
        engine: &NativeEngine,
        host: &str,
        port: u16,
        model_name: String,
        api_key: Option<String>,
    ) -> PyResult<NativeServer> {
        let ip: std::net::IpAddr = host.parse().map_err(|e| {
            to_py_err(
                py,
                RuntimeError::InvalidArgument {
                    what: "host".into(),
                    reason: format!("'{host}' is not an IP address: {e}"),
                },
            )
        })?;
        let config = torchnative_server::ServerConfig {
            model_name,
            api_key,
            ..Default::default()
        };
        let engine = Arc::clone(&engine.engine);
        let handle = py
            .detach(|| {
                torchnative_server::spawn(std::net::SocketAddr::new(ip, port), engine, config)
            })
            .map_err(|e| {
                to_py_err(
                    py,
                    RuntimeError::InvalidArgument {
                        what: "server address".into(),
                        reason: e.to_string(),
                    },
                )
            })?;
        Ok(NativeServer {
            url: format!("http://{}", handle.addr()),
            handle: Mutex::new(Some(handle)),
        })
    }

    #[getter]
    fn url(&self) -> String {
        self.url.clone()
    }

    /// Stop serving (responses in flight finish first). Idempotent.
    fn stop(&self, py: Python<'_>) {
        let handle = self.handle.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(h) = handle {
            py.detach(|| {
                let _ = h.stop();
            });
        }
    }
}

/// The extension module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(load, m)?)?;
    m.add_class::<NativeLlm>()?;
    m.add_class::<NativeLora>()?;
    m.add_class::<NativeSession>()?;
    m.add_class::<NativeStream>()?;
    m.add_class::<NativeEngine>()?;
    m.add_class::<NativeServer>()?;
    m.add_function(wrap_pyfunction!(embed::load_embedder, m)?)?;
    m.add_class::<embed::NativeEmbedder>()?;
    m.add_function(wrap_pyfunction!(embed::load_reranker, m)?)?;
    m.add_class::<embed::NativeReranker>()?;
    Ok(())
}
