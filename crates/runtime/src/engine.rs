//! The serving engine: many requests over one model, batched at the level of forward steps.
//!
//! One worker thread owns the paged KV cache (blocks from one pool sized at start, a block
//! table per running sequence, prefix caching) and the workspace. Each step it drops cancelled
//! requests, admits waiting ones into free sequence slots while the pool has blocks for their
//! prompts (first come, first served; a prompt's cached prefix blocks are attached, not
//! computed), and runs one forward pass holding every running sequence's next decode token
//! followed by prefill chunks of prompts still being read, up to a token budget: decode is
//! never delayed by more than one budget's worth of prefill. A prompt whose next block an
//! earlier prompt is computing in the same steps waits for it and attaches it, so a prefix
//! that many requests bring at once is computed once. When the pool cannot hold a step,
//! the newest running sequence is preempted: its blocks are released (its full blocks stay in
//! the prefix cache) and it is recomputed when it is admitted again, with the same result.
//! Sequences whose prompt is fully in the cache sample from their logits row with a
//! [`TokenLoop`], exactly as a [`Session`] does, and their text goes to the request's sink as
//! it becomes final.
//!
//! The kernels are batch invariant (a token's logits do not depend on the batch it rides in
//! or on how its prompt was chunked), so a request's result is bit for bit the result of the
//! same request run alone: the load never changes an answer.
//!
//! [`Session`]: crate::Session

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use torchnative_core::kernels;

use crate::error::{invalid, Result, RuntimeError};
use crate::kv_cache::{KvCache, KvDtype};
use crate::llm::{Flow, GenerationConfig, Llm, Next, TokenLoop, Usage};
use crate::lora::ActiveLora;
use crate::model::{LogitsFor, SeqChunk, Workspace};
use crate::paged_kv::PagedKvCache;
use crate::rng::Rng;
use crate::stop::FinishReason;

/// How an [`Engine`] is sized. Everything is allocated at start.
#[derive(Clone, Debug, PartialEq)]
pub struct EngineConfig {
    /// Sequences generated together (KV cache slots).
    pub max_running: usize,
    /// Positions per sequence: prompt plus generated tokens.
    pub ctx_per_seq: usize,
    /// Tokens per forward pass: every running sequence's decode token, then prefill chunks.
    /// At least `max_running`.
    pub max_batch_tokens: usize,
    /// Requests accepted and waiting for a slot; beyond it [`Engine::submit`] refuses with
    /// [`RuntimeError::QueueFull`].
    pub max_queued: usize,
    /// Positions the KV pool holds for all sequences together (rounded up to whole blocks; at
    /// least `ctx_per_seq`). The pool is the engine's only KV memory.
    pub kv_cache_tokens: usize,
    /// Positions per KV block: 16, 32 or 64.
    pub kv_block_size: usize,
    /// How the KV pool stores keys and values (f16: twice the positions in the same memory,
    /// half the bytes attention reads, logits moved by the rounding; answers still do not
    /// depend on the batch).
    pub kv_cache_dtype: KvDtype,
    /// Prompt-lookup speculation: up to this many tokens drafted per running sequence and
    /// verified in the same pass as everything else (0: off). Answers do not change.
    pub prompt_lookup_tokens: usize,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            max_running: 8,
            ctx_per_seq: 2048,
            max_batch_tokens: 256,
            max_queued: 64,
            kv_cache_tokens: 16384,
            kv_block_size: 16,
            kv_cache_dtype: KvDtype::F32,
            prompt_lookup_tokens: 0,
        }
    }
}

/// A request's identity within its engine.
pub type RequestId = u64;

/// What a request's sink receives, in order: tokens and text while generating, then exactly
/// one `Done` or `Error`.
#[derive(Clone, Debug)]
pub enum EngineEvent {
    /// A generated token with its log-probability under the model (raw logits, before any
    /// sampling transform) and, if asked, the most likely alternatives.
    Token {
        id: u32,
        logprob: f32,
        top: Vec<(u32, f32)>,
    },
    /// Text that became final (may lag the tokens: incomplete characters, stop strings).
    Text(String),
    Done(EngineDone),
    Error(RuntimeError),
}

/// The end of a request.
#[derive(Clone, Debug, PartialEq)]
pub struct EngineDone {
    pub text: String,
    pub tokens: Vec<u32>,
    pub finish_reason: FinishReason,
    pub usage: Usage,
    /// From submission to the first generated token.
    pub time_to_first_token: Duration,
    /// From submission to the end.
    pub total: Duration,
}

/// Where a request's events go; returning [`Flow::Cancel`] cancels the request (a client that
/// went away), and its slot is freed at the next step.
pub type Sink = Box<dyn FnMut(EngineEvent) -> Flow + Send>;

/// A request to an [`Engine`].
pub struct EngineRequest {
    pub prompt: Vec<u32>,
    pub config: GenerationConfig,
    /// Log-probabilities of the `n` most likely tokens at each step (`None`: no
    /// [`EngineEvent::Token`] events).
    pub top_logprobs: Option<usize>,
}

/// Counters and latency histograms of an engine, updated as it runs.
#[derive(Default)]
pub struct EngineStats {
    pub queued: AtomicUsize,
    pub running: AtomicUsize,
    pub requests_finished: [AtomicU64; 4],
    pub requests_failed: AtomicU64,
    pub prompt_tokens: AtomicU64,
    pub generated_tokens: AtomicU64,
    pub steps: AtomicU64,
    pub last_batch_tokens: AtomicUsize,
    pub slots_total: AtomicUsize,
    pub kv_blocks_total: AtomicUsize,
    pub kv_blocks_used: AtomicUsize,
    /// Unused blocks still holding a cached prefix (reusable by hash, evictable).
    pub kv_blocks_cached: AtomicUsize,
    pub prefix_lookup_tokens: AtomicU64,
    pub prefix_hit_tokens: AtomicU64,
    pub preemptions: AtomicU64,
    /// LongRoPE: sequences evaluated again on crossing the pretrained length.
    pub rope_recomputes: AtomicU64,
    /// Prompt-lookup speculation: tokens drafted and verified, and of those kept.
    pub drafted_tokens: AtomicU64,
    pub accepted_tokens: AtomicU64,
    pub latency: Mutex<Latencies>,
}

/// Finish reasons in [`EngineStats::requests_finished`]'s order.
pub const FINISH_REASONS: [FinishReason; 4] = [
    FinishReason::Eos,
    FinishReason::Length,
    FinishReason::StopString,
    FinishReason::Cancelled,
];

/// Histograms in seconds.
#[derive(Clone, Debug, Default)]
pub struct Latencies {
    pub time_to_first_token: Histogram,
    pub inter_token: Histogram,
    pub end_to_end: Histogram,
}

/// A cumulative histogram over fixed bucket bounds (seconds), as Prometheus renders it.
#[derive(Clone, Debug)]
pub struct Histogram {
    pub bounds: &'static [f64],
    /// Observations at most `bounds[i]` (not cumulative); the last entry counts the rest.
    pub counts: Vec<u64>,
    pub sum: f64,
}

const LATENCY_BOUNDS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            bounds: LATENCY_BOUNDS,
            counts: vec![0; LATENCY_BOUNDS.len() + 1],
            sum: 0.0,
        }
    }
}

impl Histogram {
    pub fn observe(&mut self, seconds: f64) {
        let i = self
            .bounds
            .iter()
            .position(|&b| seconds <= b)
            .unwrap_or(self.bounds.len());
        self.counts[i] += 1;
        self.sum += seconds;
    }

    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// The value below which fraction `q` of the observations fall, to bucket precision.
    pub fn quantile(&self, q: f64) -> f64 {
        let total = self.count();
        if total == 0 {
            return 0.0;
        }
        let want = (q * total as f64).ceil() as u64;
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= want {
                return self.bounds.get(i).copied().unwrap_or(f64::INFINITY);
            }
        }
        f64::INFINITY
    }
}

enum Msg {
    Submit(Box<Pending>),
    Cancel(RequestId),
    Shutdown,
}

struct Pending {
    id: RequestId,
    request: EngineRequest,
    sink: Sink,
    submitted: Instant,
}

/// A batching engine over one model: submit requests from any thread, their events arrive at
/// their sinks. Dropping the engine stops it after the current step (running requests end with
/// [`RuntimeError::EngineStopped`]).
pub struct Engine {
    llm: Llm,
    config: EngineConfig,
    tx: Mutex<Sender<Msg>>,
    stats: Arc<EngineStats>,
    next_id: AtomicU64,
    worker: Option<JoinHandle<()>>,
}

impl Engine {
    /// Allocate the KV slots and the workspace and start the worker thread.
    pub fn start(llm: Llm, config: EngineConfig) -> Result<Engine> {
        if config.max_running == 0 || config.ctx_per_seq == 0 {
            return Err(invalid(
                "engine config",
                "max_running and ctx_per_seq must be positive",
            ));
        }
        if config.max_batch_tokens < config.max_running {
            return Err(invalid(
                "engine config",
                format!(
                    "max_batch_tokens ({}) must hold one decode token per running sequence ({})",
                    config.max_batch_tokens, config.max_running
                ),
            ));
        }
        let model_ctx = llm.config().context_length;
        if config.ctx_per_seq > model_ctx {
            return Err(invalid(
                "engine config",
                format!(
                    "ctx_per_seq {} exceeds the model's context length {model_ctx}",
                    config.ctx_per_seq
                ),
            ));
        }
        if config.kv_cache_tokens < config.ctx_per_seq {
            return Err(invalid(
                "engine config",
                format!(
                    "kv_cache_tokens ({}) must hold at least one whole sequence (ctx_per_seq {})",
                    config.kv_cache_tokens, config.ctx_per_seq
                ),
            ));
        }
        let model = llm.model();
        let bs = config.kv_block_size;
        let cache = PagedKvCache::new(
            model.kv_shape(),
            bs,
            config.kv_cache_tokens.div_ceil(bs.max(1)),
            config.max_running,
            config.ctx_per_seq,
            config.kv_cache_dtype,
        )?;
        let k = config.prompt_lookup_tokens;
        if k > crate::speculative::MAX_DRAFT_TOKENS {
            return Err(invalid(
                "engine config",
                format!(
                    "prompt_lookup_tokens {k} (at most {})",
                    crate::speculative::MAX_DRAFT_TOKENS
                ),
            ));
        }
        // A logits row per verified position: each decode token and its drafts.
        let ws = model.workspace(config.max_batch_tokens, config.max_running * (1 + k));
        let stats = Arc::new(EngineStats::default());
        stats
            .slots_total
            .store(config.max_running, Ordering::Relaxed);
        stats
            .kv_blocks_total
            .store(cache.n_blocks(), Ordering::Relaxed);
        let (tx, rx) = mpsc::channel();
        let worker = Worker {
            llm: llm.clone(),
            config: config.clone(),
            cache,
            ws,
            stats: stats.clone(),
            waiting: VecDeque::new(),
            preempted: VecDeque::new(),
            running: Vec::new(),
            free_slots: (0..config.max_running).rev().collect(),
        };
        let handle = std::thread::Builder::new()
            .name("torchnative-engine".into())
            .spawn(move || worker.run(rx))
            .map_err(|e| invalid("engine", format!("cannot start its thread: {e}")))?;
        Ok(Engine {
            llm,
            config,
            tx: Mutex::new(tx),
            stats,
            next_id: AtomicU64::new(1),
            worker: Some(handle),
        })
    }

    pub fn llm(&self) -> &Llm {
        &self.llm
    }

    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    pub fn stats(&self) -> &EngineStats {
        &self.stats
    }

    /// Queue a request; its events go to `sink` (from the engine's thread). Refuses with
    /// [`RuntimeError::QueueFull`] when `max_queued` requests are already waiting.
    pub fn submit(&self, request: EngineRequest, sink: Sink) -> Result<RequestId> {
        if let Some(list) = &request.config.lora {
            crate::lora::check_active(list, self.llm.model())?;
        }
        // Reserve a queue place first so that concurrent submitters cannot overshoot.
        let queued = self.stats.queued.fetch_add(1, Ordering::SeqCst);
        if queued >= self.config.max_queued {
            self.stats.queued.fetch_sub(1, Ordering::SeqCst);
            return Err(RuntimeError::QueueFull {
                limit: self.config.max_queued,
            });
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let pending = Box::new(Pending {
            id,
            request,
            sink,
            submitted: Instant::now(),
        });
        let sent = self
            .tx
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .send(Msg::Submit(pending));
        if sent.is_err() {
            self.stats.queued.fetch_sub(1, Ordering::SeqCst);
            return Err(RuntimeError::EngineStopped);
        }
        Ok(id)
    }

    /// Cancel a request (waiting or running); its sink gets `Done` with
    /// [`FinishReason::Cancelled`]. Unknown or finished ids are ignored.
    pub fn cancel(&self, id: RequestId) {
        let tx = self.tx.lock().unwrap_or_else(|p| p.into_inner());
        let _ = tx.send(Msg::Cancel(id));
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        let _ = self
            .tx
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .send(Msg::Shutdown);
        if let Some(h) = self.worker.take() {
            let _ = h.join();
        }
    }
}

/// `Running::slot` of a preempted sequence.
const NO_SLOT: usize = usize::MAX;

/// A sequence holding a slot (or preempted, waiting for one).
struct Running {
    id: RequestId,
    slot: usize,
    /// Tokens to read into the cache before sampling: the prompt, or after a preemption the
    /// prompt and everything generated.
    prompt: Vec<u32>,
    /// The request's own prompt length (usage).
    n_prompt: usize,
    /// The prompt length the sequence's RoPE floor comes from
    /// ([`crate::DecoderModel::rope_floor_for`]): the request's, or after LongRoPE's crossing
    /// the history it was evaluated again with.
    rope_len: usize,
    /// Prompt tokens in the cache.
    read: usize,
    /// The token to evaluate next once the prompt is read.
    feed: Option<u32>,
    /// While decoding: the feed token and the tokens drafted after it, evaluated together.
    verify: Vec<u32>,
    lp: TokenLoop,
    rng: Rng,
    sink: Sink,
    top_logprobs: Option<usize>,
    /// The request's LoRA adapters (empty: the base model) and their prefix-cache salt.
    lora: Vec<ActiveLora>,
    lora_salt: u64,
    logits: Vec<f32>,
    submitted: Instant,
    last_token: Option<Instant>,
    time_to_first_token: Duration,
    cancelled: bool,
}

struct Worker {
    llm: Llm,
    config: EngineConfig,
    cache: PagedKvCache,
    ws: Workspace,
    stats: Arc<EngineStats>,
    waiting: VecDeque<Box<Pending>>,
    /// Sequences put back to make room, admitted again before anything waiting.
    preempted: VecDeque<Running>,
    running: Vec<Running>,
    free_slots: Vec<usize>,
}

/// Sample `r`'s next token from one row of logits with its `TokenLoop` (its chain, its random
/// stream), sending the token event and updating the latency statistics.
fn sample_row(r: &mut Running, row: &[f32], stats: &EngineStats) -> Result<Next> {
    r.logits.copy_from_slice(row);
    let before = r.lp.generated().len();
    let log_probs = r.top_logprobs.map(|top| log_softmax_top(&r.logits, top));
    let Running {
        lp,
        logits,
        rng,
        sink,
        ..
    } = r;
    let mut on_text = |t: &str| sink(EngineEvent::Text(t.to_owned()));
    let next = lp.step(logits, rng, &mut on_text)?;
    let now = Instant::now();
    if lp.generated().len() > before {
        let token = *lp.generated().last().expect("grew");
        stats.generated_tokens.fetch_add(1, Ordering::Relaxed);
        match r.last_token {
            None => r.time_to_first_token = now - r.submitted,
            Some(t) => stats
                .latency
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .inter_token
                .observe((now - t).as_secs_f64()),
        }
        if let Some((all, top)) = log_probs {
            let event = EngineEvent::Token {
                id: token,
                logprob: all[token as usize],
                top,
            };
            if (r.sink)(event) == Flow::Cancel {
                r.cancelled = true;
            }
        }
    } else if r.last_token.is_none() {
        r.time_to_first_token = now - r.submitted;
    }
    r.last_token = Some(now);
    Ok(next)
}

impl Worker {
    fn run(mut self, rx: Receiver<Msg>) {
        loop {
            if self.running.is_empty() && self.waiting.is_empty() && self.preempted.is_empty() {
                match rx.recv() {
                    Ok(m) => {
                        if !self.handle(m) {
                            break;
                        }
                    }
                    Err(_) => break,
                }
            }
            let mut stop = false;
            while let Ok(m) = rx.try_recv() {
                if !self.handle(m) {
                    stop = true;
                    break;
                }
            }
            if stop {
                break;
            }
            self.admit();
            if !self.running.is_empty() {
                self.step();
            }
        }
        // Stopped: everyone still here gets an error.
        for mut p in self.waiting.drain(..) {
            self.stats.queued.fetch_sub(1, Ordering::SeqCst);
            (p.sink)(EngineEvent::Error(RuntimeError::EngineStopped));
        }
        for mut r in self.running.drain(..).chain(self.preempted.drain(..)) {
            (r.sink)(EngineEvent::Error(RuntimeError::EngineStopped));
        }
        self.stats.running.store(0, Ordering::Relaxed);
    }

    /// False on shutdown.
    fn handle(&mut self, m: Msg) -> bool {
        match m {
            Msg::Submit(p) => self.waiting.push_back(p),
            Msg::Cancel(id) => {
                if let Some(i) = self.waiting.iter().position(|p| p.id == id) {
                    let mut p = self.waiting.remove(i).expect("index found above");
                    self.stats.queued.fetch_sub(1, Ordering::SeqCst);
                    self.count_finish(FinishReason::Cancelled);
                    (p.sink)(EngineEvent::Done(EngineDone {
                        text: String::new(),
                        tokens: Vec::new(),
                        finish_reason: FinishReason::Cancelled,
                        usage: Usage {
                            prompt_tokens: p.request.prompt.len(),
                            completion_tokens: 0,
                        },
                        time_to_first_token: Duration::ZERO,
                        total: p.submitted.elapsed(),
                    }));
                }
                if let Some(r) = self
                    .running
                    .iter_mut()
                    .chain(self.preempted.iter_mut())
                    .find(|r| r.id == id)
                {
                    r.cancelled = true;
                }
            }
            Msg::Shutdown => return false,
        }
        true
    }

    fn count_finish(&self, reason: FinishReason) {
        if let Some(i) = FINISH_REASONS.iter().position(|&r| r == reason) {
            self.stats.requests_finished[i].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Move preempted sequences, then waiting requests, into free slots while the pool has
    /// blocks for their prompts (first come, first served); refuse bad requests.
    fn admit(&mut self) {
        // Preempted sequences cancelled meanwhile end here (they hold no slot).
        let mut i = 0;
        while i < self.preempted.len() {
            if self.preempted[i].cancelled {
                let r = self.preempted.remove(i).expect("index in range");
                self.retire(r, FinishReason::Cancelled);
            } else {
                i += 1;
            }
        }
        while !self.free_slots.is_empty() {
            if let Some(r) = self.preempted.front() {
                if !self.fits(&r.prompt) {
                    break;
                }
                let mut r = self.preempted.pop_front().expect("front exists");
                r.slot = self.free_slots.pop().expect("checked non-empty");
                // Its own floor: what it generated is rotated as before.
                r.read = self.attach(r.slot, &r.prompt, r.rope_len, r.lora_salt);
                self.running.push(r);
                continue;
            }
            let Some(p) = self.waiting.front() else {
                break;
            };
            if !self.fits(&p.request.prompt) && !self.running.is_empty() {
                break;
            }
            let mut p = self.waiting.pop_front().expect("front exists");
            self.stats.queued.fetch_sub(1, Ordering::SeqCst);
            match self.prepare(&p) {
                Ok((lp, rng)) => {
                    let slot = self.free_slots.pop().expect("checked non-empty");
                    let vocab = self.llm.config().vocab_size;
                    let prompt = std::mem::take(&mut p.request.prompt);
                    let lora = p.request.config.lora.take().unwrap_or_default();
                    let lora_salt = crate::lora::prefix_salt(&lora);
                    let read = self.attach(slot, &prompt, prompt.len(), lora_salt);
                    self.running.push(Running {
                        id: p.id,
                        slot,
                        n_prompt: prompt.len(),
                        rope_len: prompt.len(),
                        prompt,
                        read,
                        feed: None,
                        verify: Vec::new(),
                        lp,
                        rng,
                        sink: p.sink,
                        top_logprobs: p.request.top_logprobs,
                        lora,
                        lora_salt,
                        logits: vec![0.0; vocab],
                        submitted: p.submitted,
                        last_token: None,
                        time_to_first_token: Duration::ZERO,
                        cancelled: false,
                    });
                }
                Err(e) => {
                    self.stats.requests_failed.fetch_add(1, Ordering::Relaxed);
                    (p.sink)(EngineEvent::Error(e));
                }
            }
        }
        self.publish();
    }

    /// Whether the pool can take `tokens` now (counting no prefix hits: a safe bound).
    fn fits(&self, tokens: &[u32]) -> bool {
        tokens.len().div_ceil(self.cache.block_size()) <= self.cache.available_blocks()
    }

    /// Attach the cached prefix of `tokens` to the empty `slot`: positions already computed.
    /// With dynamic NTK RoPE the slot's floor is set first from the request's prompt length
    /// `n_prompt` (so its prompt rotates as one call whatever the chunks, as a `Session`
    /// rotates it), and only blocks keyed under the same floor attach; likewise only blocks
    /// computed with the same LoRA adapters (`lora_salt`).
    fn attach(&mut self, slot: usize, tokens: &[u32], n_prompt: usize, lora_salt: u64) -> usize {
        let floor = self.llm.model().rope_floor_for(n_prompt);
        // Cannot fail: the slot is free (emptied) and in range.
        let _ = self.cache.set_rope_floor(slot, floor);
        let _ = self.cache.set_prefix_salt(slot, lora_salt);
        let got = self.cache.attach_prefix(slot, tokens).unwrap_or(0);
        self.stats
            .prefix_lookup_tokens
            .fetch_add(tokens.len() as u64, Ordering::Relaxed);
        self.stats
            .prefix_hit_tokens
            .fetch_add(got as u64, Ordering::Relaxed);
        got
    }

    /// Gauges read by /metrics.
    fn publish(&self) {
        self.stats
            .running
            .store(self.running.len(), Ordering::Relaxed);
        self.stats
            .kv_blocks_used
            .store(self.cache.used_blocks(), Ordering::Relaxed);
        self.stats
            .kv_blocks_cached
            .store(self.cache.cached_unused_blocks(), Ordering::Relaxed);
    }

    /// The step's chunks: (running index, tokens), decode tokens first, then prefill chunks
    /// in arrival order under the token budget. A prompt whose next block an earlier prompt
    /// is about to compute waits for it (see [`Self::attach_computed_prefixes`]).
    fn plan(&mut self) -> Vec<(usize, usize)> {
        self.running.sort_by_key(|r| r.id);
        let mut budget = self.config.max_batch_tokens;
        let mut plan: Vec<(usize, usize)> = Vec::with_capacity(self.running.len());
        for (k, r) in self.running.iter_mut().enumerate() {
            if let Some(feed) = r.feed {
                r.verify.clear();
                r.verify.push(feed);
                plan.push((k, 1));
                budget -= 1;
            }
        }
        // Drafts ride after the decode tokens, before prompts: no more than the tokens each
        // sequence may still generate after its feed, its room, and what the budget leaves.
        let k_max = self.config.prompt_lookup_tokens;
        if k_max > 0 {
            let mut drafts = Vec::with_capacity(k_max);
            for entry in plan.iter_mut() {
                let r = &mut self.running[entry.0];
                let mut room = self
                    .config
                    .ctx_per_seq
                    .saturating_sub(self.cache.len(r.slot) + 1);
                let floor = self.cache.rope_floor(r.slot);
                if let Some(limit) = self.llm.model().rope_recompute_past(floor) {
                    // No draft crosses LongRoPE's recompute (see `recompute_rope_crossings`).
                    room = room.min(limit.saturating_sub(self.cache.len(r.slot) + 1));
                }
                let max = k_max
                    .min(r.lp.remaining().saturating_sub(1))
                    .min(room)
                    .min(budget);
                crate::speculative::prompt_lookup(r.lp.history(), 1, 3, max, &mut drafts);
                r.verify.extend_from_slice(&drafts);
                entry.1 += drafts.len();
                budget -= drafts.len();
            }
        }
        for (k, r) in self.running.iter().enumerate() {
            if r.feed.is_none()
                && r.read < r.prompt.len()
                && budget > 0
                && !self.next_block_is_being_computed(k)
            {
                let n = (r.prompt.len() - r.read).min(budget);
                plan.push((k, n));
                budget -= n;
            }
        }
        plan
    }

    /// Whether an earlier running prompt shares all of `running[k]`'s tokens up to the end of
    /// `k`'s next block and has not computed that block yet: then `k` waits and attaches the
    /// block once it is keyed, so a prefix that several requests bring at once is computed
    /// once. Earlier prompts never wait for later ones, so the oldest always progresses.
    fn next_block_is_being_computed(&self, k: usize) -> bool {
        let r = &self.running[k];
        let bs = self.cache.block_size();
        if r.read % bs != 0 {
            return false;
        }
        let end = r.read + bs;
        // The block holding the last prompt token is never attached (its logits are needed).
        if end > r.prompt.len().saturating_sub(1) {
            return false;
        }
        let floor = self.cache.rope_floor(r.slot);
        self.running[..k].iter().any(|s| {
            s.feed.is_none()
                && s.read < end
                && s.prompt.len() > end
                && self.cache.rope_floor(s.slot) == floor
                && s.lora_salt == r.lora_salt
                && s.prompt[..end] == r.prompt[..end]
        })
    }

    /// Prompts that waited for a shared block attach what is now keyed (whole blocks only).
    fn attach_computed_prefixes(&mut self) {
        let bs = self.cache.block_size();
        for r in &mut self.running {
            if r.feed.is_none()
                && r.read < r.prompt.len()
                && r.read % bs == 0
                && self.cache.can_attach(r.slot)
            {
                if let Ok(got) = self.cache.attach_prefix(r.slot, &r.prompt) {
                    r.read += got;
                    self.stats
                        .prefix_hit_tokens
                        .fetch_add(got as u64, Ordering::Relaxed);
                }
            }
        }
    }

    /// LongRoPE: a decoding sequence whose next token takes it past the length its cached keys
    /// may reach reads its whole history again under the long floor, in prompt chunks like a
    /// preempted one, as a `Session` does ([`crate::DecoderModel::rope_recompute_past`]).
    fn recompute_rope_crossings(&mut self) {
        for k in 0..self.running.len() {
            let r = &self.running[k];
            let floor = self.cache.rope_floor(r.slot);
            let Some(limit) = self.llm.model().rope_recompute_past(floor) else {
                continue;
            };
            if r.feed.is_none() || self.cache.len(r.slot) < limit {
                continue;
            }
            let (slot, salt) = (r.slot, r.lora_salt);
            let history = r.lp.history().to_vec();
            let _ = self.cache.register_full_blocks(slot, &history);
            // Truncating a valid slot to 0 cannot fail; the slot stays this sequence's.
            let _ = self.cache.truncate(slot, 0);
            let read = self.attach(slot, &history, history.len(), salt);
            let r = &mut self.running[k];
            r.rope_len = history.len();
            r.prompt = history;
            r.read = read;
            r.feed = None;
            self.stats.rope_recomputes.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Put the newest running sequence back (its blocks released; recomputed when admitted
    /// again, from its cached prefix blocks where they survive).
    fn preempt_newest(&mut self) {
        let Some(k) = (0..self.running.len()).max_by_key(|&k| self.running[k].id) else {
            return;
        };
        let mut r = self.running.swap_remove(k);
        let _ = self.cache.register_full_blocks(r.slot, r.lp.history());
        self.free(r.slot);
        r.slot = NO_SLOT;
        // Everything in the history is read again; the last token's logits give the next
        // sample, as the pending feed would have.
        r.prompt = r.lp.history().to_vec();
        r.read = 0;
        r.feed = None;
        self.stats.preemptions.fetch_add(1, Ordering::Relaxed);
        // Oldest preempted first: ids ascend in the queue.
        let at = self.preempted.partition_point(|p| p.id < r.id);
        self.preempted.insert(at, r);
    }

    /// Check a request before any work: prompt, sampling parameters, context.
    fn prepare(&self, p: &Pending) -> Result<(TokenLoop, Rng)> {
        let prompt = &p.request.prompt;
        if prompt.is_empty() {
            return Err(invalid("prompt", "is empty (nothing to condition on)"));
        }
        let config = &p.request.config;
        let limit = config.max_new_tokens_for(prompt.len())?;
        if prompt.len() + limit > self.config.ctx_per_seq {
            return Err(RuntimeError::ContextOverflow {
                prompt_tokens: prompt.len(),
                max_new_tokens: limit,
                capacity: self.config.ctx_per_seq,
            });
        }
        let lp = TokenLoop::new(&self.llm, prompt, config, limit)?;
        let rng = match config.seed {
            Some(seed) => Rng::seeded(seed),
            None => Rng::from_entropy(),
        };
        Ok((lp, rng))
    }

    /// One forward pass over every running sequence, then sampling.
    fn step(&mut self) {
        // Cancelled sequences leave first (their slots are free for this very step).
        let mut i = 0;
        while i < self.running.len() {
            if self.running[i].cancelled {
                let r = self.running.swap_remove(i);
                self.retire(r, FinishReason::Cancelled);
            } else {
                i += 1;
            }
        }
        if self.running.is_empty() {
            // The gauges must show the slots just freed: the worker may now sleep until the
            // next request.
            self.publish();
            return;
        }
        self.recompute_rope_crossings();
        self.attach_computed_prefixes();
        // The pool must hold the step: preempt the newest sequences until it does.
        let plan = loop {
            let plan = self.plan();
            let needed: usize = plan
                .iter()
                .map(|&(k, n)| {
                    let r = &self.running[k];
                    self.cache.blocks_needed(r.slot, self.cache.len(r.slot) + n)
                })
                .sum();
            if needed <= self.cache.available_blocks() {
                break plan;
            }
            if self.running.len() == 1 {
                // Cannot happen while the pool holds a whole sequence (checked at start).
                let r = self.running.pop().expect("one running");
                self.retire_failed(
                    r,
                    invalid("kv cache", "the block pool cannot hold this sequence"),
                );
                return;
            }
            self.preempt_newest();
        };
        if plan.is_empty() {
            return;
        }
        let chunks: Vec<SeqChunk> = plan
            .iter()
            .map(|&(k, n)| {
                let r = &self.running[k];
                let tokens: &[u32] = match r.feed {
                    Some(_) => &r.verify[..n],
                    None => &r.prompt[r.read..r.read + n],
                };
                SeqChunk {
                    seq: r.slot,
                    tokens,
                    pos0: self.cache.len(r.slot),
                }
            })
            .collect();
        let batch_tokens: usize = plan.iter().map(|p| p.1).sum();
        let running = &self.running;
        self.ws
            .set_chunk_lora(plan.iter().map(|&(k, _)| &running[k].lora[..]));
        // A logits row for the last prompt token of a chunk, for a decode token and each draft.
        self.ws.set_chunk_logit_rows(plan.iter().map(|&(k, n)| {
            if running[k].feed.is_some() {
                n
            } else {
                1
            }
        }));
        let model = self.llm.model();
        let (cache, ws) = (&mut self.cache, &mut self.ws);
        let result =
            kernels::install(|| model.forward(&chunks, cache, ws, LogitsFor::LastRowsOfEachChunk));
        drop(chunks);
        self.stats.steps.fetch_add(1, Ordering::Relaxed);
        self.stats
            .last_batch_tokens
            .store(batch_tokens, Ordering::Relaxed);
        if let Err(e) = result {
            // A failed step fails every sequence in it (their caches are inconsistent).
            let failed: Vec<usize> = plan.iter().map(|p| p.0).collect();
            self.fail(&failed, e);
            return;
        }
        let vocab = self.llm.config().vocab_size;
        let mut finished: Vec<(usize, FinishReason)> = Vec::new();
        let mut failed: Vec<(usize, RuntimeError)> = Vec::new();
        let mut row = 0;
        for &(k, n) in &plan {
            let r = &mut self.running[k];
            let first = row;
            if r.feed.is_none() {
                row += 1;
                r.read += n;
                self.stats
                    .prompt_tokens
                    .fetch_add(n as u64, Ordering::Relaxed);
                if r.read < r.prompt.len() {
                    continue;
                }
            } else {
                row += n;
            }
            // Sample the rows in order as plain decoding would, keeping drafts while they
            // equal the sampled token (see `speculative`): the same tokens as without them.
            let drafted = r.feed.map_or(0, |_| n - 1);
            let mut kept = 0;
            let outcome = loop {
                let logits = &self.ws.logits()[(first + kept) * vocab..(first + kept + 1) * vocab];
                match sample_row(r, logits, &self.stats) {
                    Ok(Next::Feed(t)) if kept < drafted && t == r.verify[1 + kept] => kept += 1,
                    other => break other,
                }
            };
            if drafted > 0 {
                // The cache keeps the feed and the kept drafts.
                let len = self.cache.len(r.slot) - (drafted - kept);
                if let Err(e) = self.cache.truncate(r.slot, len) {
                    failed.push((k, e));
                    continue;
                }
                self.stats
                    .drafted_tokens
                    .fetch_add(drafted as u64, Ordering::Relaxed);
                self.stats
                    .accepted_tokens
                    .fetch_add(kept as u64, Ordering::Relaxed);
            }
            match outcome {
                Ok(Next::Feed(t)) => r.feed = Some(t),
                Ok(Next::Done(reason)) => finished.push((k, reason)),
                Err(e) => failed.push((k, e)),
            }
        }
        // Key the blocks that became full, for later prompts sharing them.
        for &(k, _) in &plan {
            let r = &self.running[k];
            let tokens = if r.feed.is_some() || r.read >= r.prompt.len() {
                r.lp.history()
            } else {
                &r.prompt[..r.read]
            };
            let _ = self.cache.register_full_blocks(r.slot, tokens);
        }
        // Remove from the back so that indices stay valid.
        let mut gone: Vec<(usize, Option<FinishReason>, Option<RuntimeError>)> = finished
            .into_iter()
            .map(|(k, f)| (k, Some(f), None))
            .chain(failed.into_iter().map(|(k, e)| (k, None, Some(e))))
            .collect();
        gone.sort_by_key(|g| std::cmp::Reverse(g.0));
        for (k, reason, error) in gone {
            let r = self.running.swap_remove(k);
            match (reason, error) {
                (Some(reason), _) => self.retire(r, reason),
                (None, Some(e)) => self.retire_failed(r, e),
                _ => unreachable!("each entry has a reason or an error"),
            }
        }
        self.publish();
    }

    fn free(&mut self, slot: usize) {
        // Truncating a slot to 0 cannot fail for a valid slot; keyed blocks stay cached.
        let _ = self.cache.truncate(slot, 0);
        self.free_slots.push(slot);
    }

    fn retire(&mut self, r: Running, reason: FinishReason) {
        if r.slot != NO_SLOT {
            self.free(r.slot);
        }
        let Running {
            mut lp,
            mut sink,
            n_prompt,
            submitted,
            time_to_first_token,
            ..
        } = r;
        let mut on_text = |t: &str| sink(EngineEvent::Text(t.to_owned()));
        if let Err(e) = lp.finish(reason, &mut on_text) {
            self.stats.requests_failed.fetch_add(1, Ordering::Relaxed);
            sink(EngineEvent::Error(e));
            return;
        }
        self.count_finish(reason);
        let total = submitted.elapsed();
        {
            let mut lat = self.stats.latency.lock().unwrap_or_else(|p| p.into_inner());
            if !lp.generated().is_empty() {
                lat.time_to_first_token
                    .observe(time_to_first_token.as_secs_f64());
            }
            lat.end_to_end.observe(total.as_secs_f64());
        }
        let (text, tokens) = lp.into_output();
        let usage = Usage {
            prompt_tokens: n_prompt,
            completion_tokens: tokens.len(),
        };
        sink(EngineEvent::Done(EngineDone {
            text,
            tokens,
            finish_reason: reason,
            usage,
            time_to_first_token,
            total,
        }));
    }

    fn retire_failed(&mut self, mut r: Running, e: RuntimeError) {
        if r.slot != NO_SLOT {
            self.free(r.slot);
        }
        self.stats.requests_failed.fetch_add(1, Ordering::Relaxed);
        (r.sink)(EngineEvent::Error(e));
    }

    fn fail(&mut self, ks: &[usize], e: RuntimeError) {
        let mut ks = ks.to_vec();
        ks.sort_unstable_by(|a, b| b.cmp(a));
        for k in ks {
            let r = self.running.swap_remove(k);
            self.retire_failed(r, e.clone());
        }
        self.stats
            .running
            .store(self.running.len(), Ordering::Relaxed);
    }
}

/// Log-softmax of a logits row, and its `top` most likely tokens (descending).
fn log_softmax_top(logits: &[f32], top: usize) -> (Vec<f32>, Vec<(u32, f32)>) {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let sum: f64 = logits.iter().map(|&l| ((l - max) as f64).exp()).sum();
    let log_z = max as f64 + sum.ln();
    let all: Vec<f32> = logits.iter().map(|&l| (l as f64 - log_z) as f32).collect();
    let mut best: Vec<(u32, f32)> = Vec::with_capacity(top + 1);
    if top > 0 {
        for (i, &lp) in all.iter().enumerate() {
            if best.len() < top || lp > best[best.len() - 1].1 {
                let at = best.partition_point(|&(_, v)| v >= lp);
                best.insert(at, (i as u32, lp));
                best.truncate(top);
            }
        }
    }
    (all, best)
}
