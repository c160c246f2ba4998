//! Loading a model and its text side, and the roles around it: [`Llm`] (immutable, shared) and
//! [`Session`] (mutable: KV cache, token history, RNG).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use torchnative_core::kernels;
use torchnative_formats::config::load_hf_config;
use torchnative_formats::gguf::GgufFile;
use torchnative_formats::{resolve_model, DecoderConfig, GenerationDefaults, ModelLocation};
use torchnative_tokenizer::{
    ChatMessage, ChatTemplate, ChatTemplateOptions, DecodeOptions, EncodeOptions,
    StreamingDetokenizer, Tokenizer,
};

use torchnative_constrain::TokenVocabulary;

use crate::alloc_count::allocation_count;
use crate::constraint::{build_vocabulary, Constraint, ConstraintState, ConstraintSyntax};
use crate::error::{invalid, Result, RuntimeError};
use crate::kv_cache::{DenseKvCache, KvCache};
use crate::lora::{ActiveLora, LoraAdapter};
use crate::model::{expected_hf_tensors, DecoderModel, LogitsFor, SeqChunk, Workspace};
use crate::rng::Rng;
use crate::sampling::{SamplerChain, SamplingContext, SamplingParams};
use crate::speculative::{SpeculativeStats, Speculator};
use crate::stop::{FinishReason, StopStep, StopStrings};
use crate::weights::{open_safetensors, Checkpoint, WeightFormat};

/// How to load a model.
#[derive(Clone, Debug, Default)]
pub struct LoadOptions {
    pub weight_format: WeightFormat,
    /// Kernel threads (default: all cores).
    pub threads: Option<usize>,
}

/// A loaded model with its tokenizer and chat template: immutable, cheap to clone, shareable
/// between threads and sessions.
#[derive(Clone)]
pub struct Llm {
    inner: Arc<LlmInner>,
}

struct LlmInner {
    model: DecoderModel,
    tokenizer: Tokenizer,
    template: Option<ChatTemplate>,
    eos_ids: Vec<u32>,
    defaults: GenerationDefaults,
    source: PathBuf,
    load_time: Duration,
    /// Every token's bytes with a trie over them, built on the first constrained request.
    vocabulary: OnceLock<Arc<TokenVocabulary>>,
    /// Constraints compiled by [`Llm::constraint`], by syntax and text (bounded).
    constraints: Mutex<HashMap<(ConstraintSyntax, String), Constraint>>,
}

/// Most constraints an [`Llm`] keeps compiled.
const CONSTRAINT_CACHE: usize = 64;

/// `$TORCHNATIVE_HOME` (default `~/.cache/torchnative`): where models and caches live.
pub fn torchnative_home() -> PathBuf {
    std::env::var_os("TORCHNATIVE_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/torchnative")
        })
}

/// Where `scripts/fetch-model.sh` puts the default model (SmolLM2-135M-Instruct, GGUF Q4_1).
pub fn default_model_path() -> PathBuf {
    torchnative_home().join("models/SmolLM2-135M-Instruct.Q4_1.gguf")
}

/// A located, validated checkpoint and its description, before weights are prepared.
struct Opened {
    config: DecoderConfig,
    defaults: GenerationDefaults,
    checkpoint: Checkpoint,
    source: PathBuf,
}

fn open_checkpoint(spec: &str) -> Result<Opened> {
    let location = resolve_model(spec).map_err(|e| RuntimeError::Load {
        path: spec.into(),
        reason: e.to_string(),
    })?;
    match location {
        ModelLocation::Gguf(path) => {
            let load_err = |reason: String| RuntimeError::Load {
                path: path.display().to_string(),
                reason,
            };
            let file = GgufFile::open(&path).map_err(|e| load_err(e.to_string()))?;
            let config = DecoderConfig::from_gguf(&file).map_err(|e| load_err(e.to_string()))?;
            let defaults = GenerationDefaults {
                bos_token_id: config.bos_token_id,
                eos_token_ids: config.eos_token_ids.clone(),
                pad_token_id: config.pad_token_id,
                ..Default::default()
            };
            Ok(Opened {
                config,
                defaults,
                checkpoint: Checkpoint::Gguf(Arc::new(file)),
                source: path,
            })
        }
        ModelLocation::HfDirectory(dir) => {
            let (config, defaults) = load_hf_config(&dir).map_err(|e| RuntimeError::Load {
                path: dir.display().to_string(),
                reason: e.to_string(),
            })?;
            let checkpoint = open_safetensors(&dir, &expected_hf_tensors(&config))?;
            Ok(Opened {
                config,
                defaults,
                checkpoint,
                source: dir,
            })
        }
    }
}

fn set_threads(options: &LoadOptions) -> Result<()> {
    if let Some(n) = options.threads {
        kernels::set_num_threads(n).map_err(|e| invalid("threads", e.to_string()))?;
    }
    Ok(())
}

/// Load a model: a `.gguf` path, a safetensors directory, or a Hugging Face repo id present in
/// the local cache. Everything is validated here; nothing is fetched.
pub fn load_llm(spec: &str, options: &LoadOptions) -> Result<Llm> {
    load_llm_with_progress(spec, options, &mut |_, _| {})
}

/// [`load_llm`] reporting `progress(layers_done, layers_total)` while weights are prepared.
pub fn load_llm_with_progress(
    spec: &str,
    options: &LoadOptions,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Llm> {
    let start = Instant::now();
    set_threads(options)?;
    let Opened {
        config,
        defaults,
        checkpoint,
        source,
    } = open_checkpoint(spec)?;
    let load_err = |reason: String| RuntimeError::Load {
        path: source.display().to_string(),
        reason,
    };
    let tokenizer = match &checkpoint {
        Checkpoint::Gguf(file) => Tokenizer::from_gguf(file),
        // open_checkpoint reads files; captured tensors come through DecoderModel::from_tensors.
        Checkpoint::Safetensors(_) | Checkpoint::Tensors(_) => {
            let tok_cfg = source.join("tokenizer_config.json");
            Tokenizer::from_files(
                &source.join("tokenizer.json"),
                tok_cfg.exists().then_some(tok_cfg.as_path()),
            )
        }
    }
    .map_err(|e| load_err(format!("tokenizer: {e}")))?;
    if tokenizer.vocab_size() > config.vocab_size {
        return Err(load_err(format!(
            "the tokenizer has {} tokens but the model's embedding only {} rows",
            tokenizer.vocab_size(),
            config.vocab_size
        )));
    }
    let template = match ChatTemplate::from_tokenizer(&tokenizer) {
        Some(Ok(t)) => Some(t),
        Some(Err(e)) => return Err(RuntimeError::Text(format!("chat template: {e}"))),
        None => None,
    };
    let mut eos_ids = defaults.stop_token_ids(&config);
    for id in tokenizer.eos_ids() {
        if !eos_ids.contains(&id) {
            eos_ids.push(id);
        }
    }
    let model = DecoderModel::load(config, checkpoint, options.weight_format, progress)
        .map_err(|e| with_path(e, &source))?;
    Ok(Llm {
        inner: Arc::new(LlmInner {
            model,
            tokenizer,
            template,
            eos_ids,
            defaults,
            source,
            load_time: start.elapsed(),
            vocabulary: OnceLock::new(),
            constraints: Mutex::new(HashMap::new()),
        }),
    })
}

/// Load only the model (no tokenizer or template): for evaluation and for checkpoints that ship
/// without a tokenizer.
pub fn load_model(spec: &str, options: &LoadOptions) -> Result<DecoderModel> {
    set_threads(options)?;
    let Opened {
        config,
        checkpoint,
        source,
        ..
    } = open_checkpoint(spec)?;
    DecoderModel::load(config, checkpoint, options.weight_format, &mut |_, _| {})
        .map_err(|e| with_path(e, &source))
}

/// Fill in the path of a load error raised below the level that knows it.
fn with_path(e: RuntimeError, source: &Path) -> RuntimeError {
    match e {
        RuntimeError::Load { path, reason } if path.is_empty() => RuntimeError::Load {
            path: source.display().to_string(),
            reason,
        },
        other => other,
    }
}

/// Token counts of a request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub prompt_tokens: usize,
    pub completion_tokens: usize,
}

/// Wall-clock timings of a request.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Timings {
    /// Model load (from the `Llm`).
    pub load: Duration,
    /// Evaluating the prompt tokens not already in the cache.
    pub prefill: Duration,
    /// From the start of the request to the first generated token.
    pub time_to_first_token: Duration,
    /// Each decode step after the first token (forward + sampling).
    pub decode_steps: Vec<Duration>,
}

impl Timings {
    /// Generated tokens per second over the decode steps.
    pub fn decode_tokens_per_second(&self) -> f64 {
        let total: f64 = self.decode_steps.iter().map(Duration::as_secs_f64).sum();
        if total > 0.0 {
            self.decode_steps.len() as f64 / total
        } else {
            0.0
        }
    }
}

/// Counters a request reports.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Counters {
    /// Bytes of f32 produced by dequantizing weights at load.
    pub bytes_dequantized_at_load: usize,
    /// Bytes of the session's KV cache buffers.
    pub cache_bytes: usize,
    /// Prompt tokens that were already in the cache and not evaluated again.
    pub reused_prompt_tokens: usize,
    /// Heap allocations the process made during the decode loop: from the moment the prompt's
    /// logits are ready and the request's buffers are set up, through every generated token
    /// (sampling, detokenization, stop strings, the text callback, the token's forward pass),
    /// to the end of the loop. Prefill, setup, the final flush of held-back text and building
    /// this result are outside it. `None` unless the binary installed
    /// [`CountingAllocator`](crate::CountingAllocator). Process-wide: allocations of other
    /// threads during the loop are included (and so are the callback's own).
    pub allocations_in_decode_loop: Option<u64>,
}

/// The result of one generation.
#[derive(Clone, Debug, PartialEq)]
pub struct Completion {
    pub text: String,
    /// Generated token ids (without a final EOS / stop token).
    pub tokens: Vec<u32>,
    pub finish_reason: FinishReason,
    pub usage: Usage,
    pub timings: Timings,
    pub counters: Counters,
    /// Drafted and accepted tokens (all zero without speculative decoding).
    pub speculative: SpeculativeStats,
}

/// What a generation does, with transformers' names.
///
/// [`Default`] is the runtime's built-in configuration (greedy, 256 new tokens, the model's
/// EOS ids); [`Llm::generation_config`] is that with the model's own defaults applied.
#[derive(Clone, Debug, PartialEq)]
pub struct GenerationConfig {
    pub max_new_tokens: usize,
    /// Prompt plus generated tokens at most (transformers' `max_length`): generation stops
    /// after `min(max_new_tokens, max_length - prompt length)` tokens, and a prompt of
    /// `max_length` tokens or more is an error. `None`: no such bound.
    pub max_length: Option<usize>,
    /// EOS is suppressed until this many tokens were generated.
    pub min_new_tokens: usize,
    pub sampling: SamplingParams,
    /// Seed of the request's RNG; `None` keeps the session's RNG as it is.
    pub seed: Option<u64>,
    /// Stop strings (may span tokens; not emitted).
    pub stop: Vec<String>,
    /// End-of-sequence ids; `None` uses the model's.
    pub eos_token_ids: Option<Vec<u32>>,
    /// A grammar the output must follow (masked before every sampler; generation ends when
    /// the grammar is complete and cannot continue).
    pub constraint: Option<Constraint>,
    /// LoRA adapters for this call: `None` keeps the session's own choice
    /// ([`Session::set_lora`]); `Some(list)` makes the session use `list` (empty: the base
    /// model) from this call on.
    pub lora: Option<Vec<ActiveLora>>,
}

impl Default for GenerationConfig {
    fn default() -> Self {
        GenerationConfig {
            max_new_tokens: 256,
            max_length: None,
            min_new_tokens: 0,
            sampling: SamplingParams::default(),
            seed: None,
            stop: Vec::new(),
            eos_token_ids: None,
            constraint: None,
            lora: None,
        }
    }
}

impl GenerationConfig {
    /// The built-in configuration with a model's generation defaults (its
    /// `generation_config.json`) applied as transformers' `generate` applies them when the
    /// caller passes nothing:
    ///
    /// - `do_sample`, `temperature`, `top_k`, `top_p`, `min_p`, `repetition_penalty`: the
    ///   model's value where it gives one. With `do_sample` false (or absent) decoding is greedy
    ///   whatever the sampling values say; they are kept so that a caller who turns sampling on
    ///   gets the model's values, as in transformers. `repetition_penalty` applies in greedy
    ///   mode too.
    /// - `max_new_tokens` when given (it takes precedence over `max_length`); else
    ///   `max_length`, which bounds prompt plus new tokens (see [`max_length`](Self::max_length));
    ///   else the built-in 256 new tokens.
    /// - `eos_token_ids`: `eos` (the model's stop ids).
    ///
    /// Values the model does not give keep the built-in defaults, which differ from
    /// transformers' global fallbacks in two places: 256 new tokens instead of `max_length=20`,
    /// and `top_k` off instead of 50 when sampling.
    pub fn from_model_defaults(defaults: &GenerationDefaults, eos: &[u32]) -> GenerationConfig {
        let mut config = GenerationConfig::default();
        let s = &mut config.sampling;
        s.do_sample = defaults.do_sample.unwrap_or(s.do_sample);
        s.temperature = defaults.temperature.unwrap_or(s.temperature);
        s.top_k = defaults.top_k.unwrap_or(s.top_k);
        s.top_p = defaults.top_p.unwrap_or(s.top_p);
        s.min_p = defaults.min_p.unwrap_or(s.min_p);
        s.repetition_penalty = defaults.repetition_penalty.unwrap_or(s.repetition_penalty);
        s.typical_p = defaults.typical_p.unwrap_or(s.typical_p);
        config.min_new_tokens = defaults.min_new_tokens.unwrap_or(config.min_new_tokens);
        match (defaults.max_new_tokens, defaults.max_length) {
            (Some(n), _) => config.max_new_tokens = n,
            (None, Some(total)) => {
                // Never the binding limit: max_length - prompt length is always smaller.
                config.max_new_tokens = total;
                config.max_length = Some(total);
            }
            (None, None) => {}
        }
        config.eos_token_ids = Some(eos.to_vec());
        config
    }

    /// How many tokens a request with a prompt of `prompt_len` tokens may generate at most:
    /// `max_new_tokens`, lowered by `max_length` when set. Errors when that leaves none.
    pub fn max_new_tokens_for(&self, prompt_len: usize) -> Result<usize> {
        if self.max_new_tokens == 0 {
            return Err(invalid("max_new_tokens", "must be at least 1"));
        }
        match self.max_length {
            None => Ok(self.max_new_tokens),
            Some(total) if prompt_len < total => Ok(self.max_new_tokens.min(total - prompt_len)),
            Some(total) => Err(invalid(
                "max_length",
                format!(
                    "{total} leaves no room after the prompt's {prompt_len} tokens (it bounds \
                     prompt plus generated tokens; set max_new_tokens instead)"
                ),
            )),
        }
    }
}

/// What a streaming callback tells the generation loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    Continue,
    Cancel,
}

/// Session settings.
#[derive(Clone, Copy, Debug)]
pub struct SessionOptions {
    /// Context capacity in tokens (default: min(model's context, 4096)).
    pub n_ctx: Option<usize>,
    /// Most prompt tokens evaluated in one forward pass (bounds the workspace).
    pub n_batch: usize,
}

impl Default for SessionOptions {
    fn default() -> Self {
        SessionOptions {
            n_ctx: None,
            n_batch: 256,
        }
    }
}

impl Llm {
    pub fn model(&self) -> &DecoderModel {
        &self.inner.model
    }

    pub fn config(&self) -> &DecoderConfig {
        self.inner.model.config()
    }

    pub fn tokenizer(&self) -> &Tokenizer {
        &self.inner.tokenizer
    }

    pub fn chat_template(&self) -> Option<&ChatTemplate> {
        self.inner.template.as_ref()
    }

    pub fn eos_token_ids(&self) -> &[u32] {
        &self.inner.eos_ids
    }

    /// What the model's files say about generation: generation_config.json for a safetensors
    /// directory; for GGUF only the BOS/EOS/padding ids of its metadata (GGUF has no sampling
    /// defaults).
    pub fn generation_defaults(&self) -> &GenerationDefaults {
        &self.inner.defaults
    }

    /// The configuration a request gets when the caller sets nothing: the built-in defaults
    /// with the model's [`generation_defaults`](Self::generation_defaults) applied as
    /// transformers does (see [`GenerationConfig::from_model_defaults`]), and the model's EOS
    /// ids. For a GGUF model that is the built-in configuration with its EOS ids.
    pub fn generation_config(&self) -> GenerationConfig {
        GenerationConfig::from_model_defaults(&self.inner.defaults, &self.inner.eos_ids)
    }

    /// The vocabulary as constrained decoding sees it (built once, on first use).
    pub fn token_vocabulary(&self) -> Result<Arc<TokenVocabulary>> {
        if let Some(v) = self.inner.vocabulary.get() {
            return Ok(v.clone());
        }
        let v = Arc::new(build_vocabulary(self)?);
        Ok(self.inner.vocabulary.get_or_init(|| v).clone())
    }

    /// `text` in `syntax` compiled for this model, from a cache of the last distinct ones (a
    /// compiled grammar also caches masks, so reusing it makes later requests faster).
    pub fn constraint(&self, syntax: ConstraintSyntax, text: &str) -> Result<Constraint> {
        let key = (syntax, text.to_owned());
        let cache = || {
            self.inner
                .constraints
                .lock()
                .unwrap_or_else(|p| p.into_inner())
        };
        if let Some(c) = cache().get(&key) {
            return Ok(c.clone());
        }
        let c = Constraint::parse(self, syntax, text)?;
        let mut cache = cache();
        if cache.len() >= CONSTRAINT_CACHE {
            cache.clear();
        }
        cache.insert(key, c.clone());
        Ok(c)
    }

    pub fn source(&self) -> &Path {
        &self.inner.source
    }

    pub fn load_time(&self) -> Duration {
        self.inner.load_time
    }

    /// Token ids of `text` as the model's tokenizer adds special tokens for a plain prompt.
    pub fn tokenize(&self, text: &str) -> Result<Vec<u32>> {
        self.inner
            .tokenizer
            .encode(text, EncodeOptions::default())
            .map_err(text_err)
    }

    pub fn detokenize(&self, ids: &[u32]) -> Result<String> {
        self.inner
            .tokenizer
            .decode(ids, DecodeOptions::default())
            .map_err(text_err)
    }

    /// The prompt text of a conversation, ending with the assistant header.
    pub fn render_chat(&self, messages: &[ChatMessage]) -> Result<String> {
        let template = self
            .inner
            .template
            .as_ref()
            .ok_or_else(|| RuntimeError::Unsupported {
                what: format!(
                    "chat: the model '{}' has no chat template",
                    self.inner.source.display()
                ),
                supported: "plain completion (raw prompts)".into(),
            })?;
        let opts = ChatTemplateOptions {
            add_generation_prompt: true,
            ..Default::default()
        };
        template.render(messages, &opts).map_err(text_err)
    }

    /// Token ids of a rendered conversation (special tokens parsed, none added: the template
    /// already wrote them, as transformers' `apply_chat_template(tokenize=True)` does).
    pub fn tokenize_chat(&self, messages: &[ChatMessage]) -> Result<Vec<u32>> {
        let text = self.render_chat(messages)?;
        let opts = EncodeOptions {
            add_special_tokens: false,
            parse_special: true,
        };
        self.inner.tokenizer.encode(&text, opts).map_err(text_err)
    }

    /// Load a LoRA adapter (PEFT directory or GGUF LoRA file) for this model; the model itself
    /// is not changed, the adapter is used by the sessions and calls that choose it.
    pub fn load_lora(&self, path: &Path) -> Result<LoraAdapter> {
        LoraAdapter::load(path, self.model())
    }

    pub fn session(&self, options: SessionOptions) -> Result<Session> {
        Session::new(self.clone(), options)
    }

    /// Complete a raw prompt in a fresh session.
    pub fn generate(&self, prompt: &str, config: &GenerationConfig) -> Result<Completion> {
        let ids = self.tokenize(prompt)?;
        let mut s = self.session(session_for(config, ids.len())?)?;
        s.generate(&ids, config, &mut |_| Flow::Continue)
    }

    /// Answer a conversation in a fresh session.
    pub fn chat(&self, messages: &[ChatMessage], config: &GenerationConfig) -> Result<Completion> {
        let ids = self.tokenize_chat(messages)?;
        let mut s = self.session(session_for(config, ids.len())?)?;
        s.generate(&ids, config, &mut |_| Flow::Continue)
    }
}

/// A context just large enough for a one-shot request (capped by the model's).
pub(crate) fn session_for(config: &GenerationConfig, prompt_len: usize) -> Result<SessionOptions> {
    let new_tokens = config.max_new_tokens_for(prompt_len)?;
    Ok(SessionOptions {
        n_ctx: Some(prompt_len.saturating_add(new_tokens).max(1)),
        ..Default::default()
    })
}

fn text_err(e: torchnative_tokenizer::Error) -> RuntimeError {
    RuntimeError::Text(e.to_string())
}

/// A live conversation with the model: its KV cache, the tokens in it, and its RNG.
pub struct Session {
    llm: Llm,
    cache: DenseKvCache,
    ws: Workspace,
    /// Tokens whose keys/values are in the cache, in order.
    tokens: Vec<u32>,
    rng: Rng,
    messages: Vec<ChatMessage>,
}

impl Session {
    pub fn new(llm: Llm, options: SessionOptions) -> Result<Session> {
        let model_ctx = llm.config().context_length;
        let n_ctx = options.n_ctx.unwrap_or(model_ctx.min(4096));
        if n_ctx == 0 || n_ctx > model_ctx {
            return Err(invalid(
                "n_ctx",
                format!("{n_ctx} must be between 1 and the model's context length {model_ctx}"),
            ));
        }
        if options.n_batch == 0 {
            return Err(invalid("n_batch", "must be at least 1"));
        }
        let cache = DenseKvCache::new(llm.model().kv_shape(), n_ctx, 1)?;
        let ws = llm.model().workspace(options.n_batch.min(n_ctx), 1);
        Ok(Session {
            llm,
            cache,
            ws,
            // Never more than the cache holds: decode steps push without reallocating.
            tokens: Vec::with_capacity(n_ctx),
            rng: Rng::from_entropy(),
            messages: Vec::new(),
        })
    }

    pub fn llm(&self) -> &Llm {
        &self.llm
    }

    /// Tokens currently in the cache.
    pub fn tokens(&self) -> &[u32] {
        &self.tokens
    }

    pub fn capacity(&self) -> usize {
        self.cache.capacity()
    }

    /// Forget the conversation (the cache buffers stay allocated).
    pub fn reset(&mut self) {
        self.tokens.clear();
        self.messages.clear();
        // Cannot fail: sequence 0 always exists.
        let _ = self.cache.truncate(0, 0);
    }

    pub fn rng_state(&self) -> [u64; 4] {
        self.rng.state()
    }

    pub fn set_rng_state(&mut self, state: [u64; 4]) {
        self.rng = Rng::from_state(state);
    }

    pub fn messages(&self) -> &[ChatMessage] {
        &self.messages
    }

    /// The LoRA adapters this session's passes add.
    pub fn lora(&self) -> &[ActiveLora] {
        self.ws.lora()
    }

    /// Choose the LoRA adapters (with their scales) of the following passes; empty: the base
    /// model. The cache was computed with the previous choice, so a different choice empties it
    /// (the conversation is kept and re-evaluated by the next turn).
    pub fn set_lora(&mut self, adapters: &[ActiveLora]) -> Result<()> {
        crate::lora::check_active(adapters, self.llm.model())?;
        if self.ws.lora() != adapters {
            self.tokens.clear();
            self.cache.truncate(0, 0)?;
            self.ws.set_lora(adapters);
        }
        Ok(())
    }

    /// Make the cache hold exactly `tokens`: keep the longest common prefix with what it holds,
    /// evaluate the rest. Returns the logits of the last token and how many were reused.
    pub(crate) fn sync_to(&mut self, tokens: &[u32]) -> Result<usize> {
        if tokens.is_empty() {
            return Err(invalid("prompt", "is empty (nothing to condition on)"));
        }
        let mut keep = self
            .tokens
            .iter()
            .zip(tokens)
            .take_while(|(a, b)| a == b)
            .count();
        // The last prompt token must be evaluated to produce fresh logits.
        if keep == tokens.len() {
            keep -= 1;
        }
        // Dynamic NTK RoPE: the cached keys were rotated for their prompt's length; they are
        // this prompt's keys only if it takes the same floor (see `KvCache::rope_floor`).
        let floor = self.llm.model().rope_floor_for(tokens.len());
        if floor.is_some() && self.cache.rope_floor(0) != floor {
            keep = 0;
        }
        self.cache.truncate(0, keep)?;
        self.tokens.truncate(keep);
        self.prefill(&tokens[keep..])?;
        Ok(keep)
    }

    /// Evaluate `tokens` after what the cache holds (benchmarks; generation uses `generate`).
    pub fn prefill(&mut self, tokens: &[u32]) -> Result<()> {
        self.check_capacity(self.tokens.len(), tokens.len())?;
        if self.crosses_rope_limit(tokens.len()) {
            let all = self.drop_cache_for_recompute(tokens)?;
            return self.prefill(&all);
        }
        self.raise_rope_floor(tokens.len())?;
        let model = &self.llm.inner.model;
        let n_batch = self.ws.max_tokens();
        for chunk in tokens.chunks(n_batch) {
            let c = SeqChunk {
                seq: 0,
                tokens: chunk,
                pos0: self.tokens.len(),
            };
            let (cache, ws) = (&mut self.cache, &mut self.ws);
            kernels::install(|| model.forward(&[c], cache, ws, LogitsFor::LastOfEachChunk))?;
            self.tokens.extend_from_slice(chunk);
        }
        Ok(())
    }

    /// Logits of every position of `tokens` evaluated from an empty cache (evaluation and
    /// parity tests). The session then holds `tokens`.
    pub fn prefill_all_logits(&mut self, tokens: &[u32]) -> Result<Vec<f32>> {
        self.reset();
        self.append_all_logits(tokens)
    }

    /// Logits of every position of `tokens` evaluated after what the cache holds (in chunks
    /// of the session's `n_batch`). The session then holds its tokens and `tokens`.
    pub fn append_all_logits(&mut self, tokens: &[u32]) -> Result<Vec<f32>> {
        self.check_capacity(self.tokens.len(), tokens.len())?;
        if self.crosses_rope_limit(tokens.len()) {
            let all = self.drop_cache_for_recompute(tokens)?;
            let mut logits = self.append_all_logits(&all)?;
            let vocab = self.llm.config().vocab_size;
            logits.drain(..(all.len() - tokens.len()) * vocab);
            return Ok(logits);
        }
        self.raise_rope_floor(tokens.len())?;
        let model = &self.llm.inner.model;
        let n_batch = self.ws.max_tokens();
        // Every position's logits need a workspace with that many logit rows; this evaluation
        // path makes its own rather than making every session carry one.
        let mut ws = model.workspace(n_batch, n_batch);
        ws.set_lora(self.ws.lora());
        let mut out = Vec::with_capacity(tokens.len() * self.llm.config().vocab_size);
        for chunk in tokens.chunks(n_batch) {
            let c = SeqChunk {
                seq: 0,
                tokens: chunk,
                pos0: self.tokens.len(),
            };
            let cache = &mut self.cache;
            kernels::install(|| model.forward(&[c], cache, &mut ws, LogitsFor::AllTokens))?;
            out.extend_from_slice(ws.logits());
            self.tokens.extend_from_slice(chunk);
        }
        Ok(out)
    }

    /// Dynamic NTK RoPE: `n` tokens appended in one call (in any chunks) rotate as one
    /// transformers forward call reaching the new length, as if the call were the session's
    /// prompt so far; the decode steps after it each rotate for their own length.
    fn raise_rope_floor(&mut self, n: usize) -> Result<()> {
        let end = self.tokens.len() + n;
        if let Some(floor) = self.llm.model().rope_floor_for(end) {
            let floor = floor.max(self.cache.rope_floor(0).unwrap_or(0));
            self.cache.set_rope_floor(0, Some(floor))?;
        }
        Ok(())
    }

    /// LongRoPE: whether appending `n` tokens takes the sequence past the length its cached
    /// keys may reach ([`crate::DecoderModel::rope_recompute_past`]): then everything is evaluated
    /// again, as transformers' Phi-3 `generate` does.
    fn crosses_rope_limit(&self, n: usize) -> bool {
        !self.tokens.is_empty()
            && self
                .llm
                .model()
                .rope_recompute_past(self.cache.rope_floor(0))
                .is_some_and(|limit| self.tokens.len() + n > limit)
    }

    /// Empty the cache; returns the tokens it held followed by `more`, to evaluate again.
    fn drop_cache_for_recompute(&mut self, more: &[u32]) -> Result<Vec<u32>> {
        let mut all = std::mem::take(&mut self.tokens);
        all.extend_from_slice(more);
        self.cache.truncate(0, 0)?;
        Ok(all)
    }

    /// The logits row of the last token evaluated.
    pub(crate) fn last_logits(&self) -> &[f32] {
        self.ws.logits()
    }

    /// Append one token and return the logits after it (one cached decode step).
    pub fn decode_logits(&mut self, token: u32) -> Result<&[f32]> {
        self.check_capacity(self.tokens.len(), 1)?;
        if self.crosses_rope_limit(1) {
            // LongRoPE's crossing: the whole sequence again, on the long factors.
            self.prefill(std::slice::from_ref(&token))?;
            return Ok(self.ws.logits());
        }
        let model = &self.llm.inner.model;
        let c = SeqChunk {
            seq: 0,
            tokens: std::slice::from_ref(&token),
            pos0: self.tokens.len(),
        };
        let (cache, ws) = (&mut self.cache, &mut self.ws);
        kernels::install(|| model.forward(&[c], cache, ws, LogitsFor::LastOfEachChunk))?;
        self.tokens.push(token);
        Ok(self.ws.logits())
    }

    fn check_capacity(&self, prompt_tokens: usize, max_new_tokens: usize) -> Result<()> {
        let capacity = self.cache.capacity();
        if prompt_tokens.saturating_add(max_new_tokens) > capacity {
            return Err(RuntimeError::ContextOverflow {
                prompt_tokens,
                max_new_tokens,
                capacity,
            });
        }
        Ok(())
    }

    /// Generate after `prompt`, which is the session's whole token sequence from the start
    /// (the cached common prefix is reused, the rest evaluated). `on_text` receives each piece
    /// of text as it becomes final and may cancel.
    pub fn generate(
        &mut self,
        prompt: &[u32],
        config: &GenerationConfig,
        on_text: &mut dyn FnMut(&str) -> Flow,
    ) -> Result<Completion> {
        self.generate_inner(prompt, config, None, on_text)
    }

    /// [`Session::generate`] with speculative decoding: `speculator` drafts tokens that one
    /// forward pass verifies. The result is the plain generation's, token for token (see
    /// [`crate::speculative`]); `Completion::speculative` counts drafted and accepted tokens.
    pub fn generate_speculative(
        &mut self,
        prompt: &[u32],
        config: &GenerationConfig,
        speculator: &mut Speculator,
        on_text: &mut dyn FnMut(&str) -> Flow,
    ) -> Result<Completion> {
        self.generate_inner(prompt, config, Some(speculator), on_text)
    }

    fn generate_inner(
        &mut self,
        prompt: &[u32],
        config: &GenerationConfig,
        mut speculator: Option<&mut Speculator>,
        on_text: &mut dyn FnMut(&str) -> Flow,
    ) -> Result<Completion> {
        let start = Instant::now();
        let vocab = self.llm.config().vocab_size;
        let limit = config.max_new_tokens_for(prompt.len())?;
        // Validates the sampling parameters and the prompt's tokens before any work.
        let mut lp = TokenLoop::new(&self.llm, prompt, config, limit)?;
        self.check_capacity(prompt.len(), limit)?;
        if let Some(adapters) = &config.lora {
            self.set_lora(adapters)?;
        }
        if let Some(seed) = config.seed {
            self.rng = Rng::seeded(seed);
        }
        let reused = self.sync_to(prompt)?;
        let mut timings = Timings {
            load: self.llm.load_time(),
            prefill: start.elapsed(),
            decode_steps: Vec::with_capacity(limit),
            ..Default::default()
        };
        let mut logits: Vec<f32> = self.ws.logits()[..vocab].to_vec();
        // Speculation: drafts, and a workspace with a logits row per verified position.
        let k_max = speculator
            .as_ref()
            .map_or(0, |s| s.config().max_draft_tokens);
        let mut drafts: Vec<u32> = Vec::with_capacity(k_max);
        let mut verify_ws = speculator
            .as_ref()
            .map(|_| self.llm.model().workspace(k_max + 1, k_max + 1));
        if let Some(ws) = verify_ws.as_mut() {
            ws.set_lora(self.ws.lora());
        }
        let mut spec = SpeculativeStats::default();
        let allocations_before = allocation_count();
        let mut next = lp.step(&mut logits, &mut self.rng, on_text)?;
        timings.time_to_first_token = start.elapsed();
        let finish = loop {
            let token = match next {
                Next::Feed(token) => token,
                Next::Done(finish) => break finish,
            };
            let step_start = Instant::now();
            // Drafts after `token`: no more than the tokens still allowed after it, and room
            // in the cache for `token` and all of them.
            let allowed = lp.remaining().saturating_sub(1);
            let mut room = self.capacity().saturating_sub(self.tokens.len() + 1);
            let floor = self.cache.rope_floor(0);
            if let Some(limit) = self.llm.model().rope_recompute_past(floor) {
                // No draft crosses LongRoPE's recompute: plain decoding reads the token that
                // crosses it with the whole sequence again (`decode_logits`).
                room = room.min(limit.saturating_sub(self.tokens.len() + 1));
            }
            match speculator.as_deref_mut() {
                Some(s) => s.propose(lp.history(), allowed.min(room), &mut drafts)?,
                None => drafts.clear(),
            }
            if drafts.is_empty() {
                logits.copy_from_slice(&self.decode_logits(token)?[..vocab]);
                next = lp.step(&mut logits, &mut self.rng, on_text)?;
                timings.decode_steps.push(step_start.elapsed());
                continue;
            }
            let ws = verify_ws.as_mut().expect("a speculator has its workspace");
            let base = self.tokens.len();
            self.tokens.push(token);
            self.tokens.extend_from_slice(&drafts);
            let c = SeqChunk {
                seq: 0,
                tokens: &self.tokens[base..],
                pos0: base,
            };
            let model = &self.llm.inner.model;
            let cache = &mut self.cache;
            kernels::install(|| model.forward(&[c], cache, ws, LogitsFor::AllTokens))?;
            // Sample each position as plain decoding would; keep drafts while they agree.
            let mut kept = 0;
            loop {
                logits.copy_from_slice(&ws.logits()[kept * vocab..(kept + 1) * vocab]);
                next = lp.step(&mut logits, &mut self.rng, on_text)?;
                match next {
                    Next::Feed(t) if kept < drafts.len() && t == drafts[kept] => kept += 1,
                    _ => break,
                }
            }
            // The cache keeps `token` and the kept drafts.
            self.tokens.truncate(base + 1 + kept);
            self.cache.truncate(0, base + 1 + kept)?;
            spec.drafted += drafts.len();
            spec.accepted += kept;
            spec.verify_steps += 1;
            let per_token = step_start.elapsed() / (kept as u32 + 1);
            timings
                .decode_steps
                .extend(std::iter::repeat_n(per_token, kept + 1));
        };
        let allocations_in_decode_loop = match (allocations_before, allocation_count()) {
            (Some(before), Some(after)) => Some(after - before),
            _ => None,
        };
        // The last sampled token is not in the cache yet: the next request evaluates it as part
        // of its prompt.
        lp.finish(finish, on_text)?;
        let (text, generated) = lp.into_output();
        Ok(Completion {
            text,
            usage: Usage {
                prompt_tokens: prompt.len(),
                completion_tokens: generated.len(),
            },
            tokens: generated,
            finish_reason: finish,
            timings,
            counters: Counters {
                bytes_dequantized_at_load: self.llm.model().load_stats().bytes_dequantized,
                cache_bytes: self.cache.bytes(),
                reused_prompt_tokens: reused,
                allocations_in_decode_loop,
            },
            speculative: spec,
        })
    }

    /// One chat turn: add `message` to the conversation, answer it, keep the answer. Only the
    /// tokens the cache does not already hold are evaluated.
    pub fn send(
        &mut self,
        message: ChatMessage,
        config: &GenerationConfig,
        on_text: &mut dyn FnMut(&str) -> Flow,
    ) -> Result<Completion> {
        self.messages.push(message);
        let prompt = match self.llm.tokenize_chat(&self.messages) {
            Ok(p) => p,
            Err(e) => {
                self.messages.pop();
                return Err(e);
            }
        };
        match self.generate(&prompt, config, on_text) {
            Ok(done) => {
                self.messages
                    .push(ChatMessage::new("assistant", done.text.clone()));
                Ok(done)
            }
            Err(e) => {
                self.messages.pop();
                Err(e)
            }
        }
    }

    /// Set the system prompt (replacing any), keeping the rest of the conversation.
    pub fn set_system(&mut self, content: &str) {
        self.messages.retain(|m| m.role != "system");
        self.messages.insert(0, ChatMessage::new("system", content));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn defaults(json: &str) -> GenerationDefaults {
        GenerationDefaults::from_json(json).unwrap()
    }

    #[test]
    fn model_defaults_apply_like_transformers() {
        let c = GenerationConfig::from_model_defaults(
            &defaults(
                r#"{"do_sample": true, "temperature": 0.6, "top_k": 20, "top_p": 0.9,
                    "min_p": 0.05, "repetition_penalty": 1.1, "typical_p": 0.95,
                    "min_new_tokens": 3, "max_new_tokens": 64, "max_length": 10,
                    "eos_token_id": [2, 7]}"#,
            ),
            &[2, 7],
        );
        let s = &c.sampling;
        assert!(s.do_sample && !s.is_greedy());
        assert_eq!(
            (
                s.temperature,
                s.top_k,
                s.top_p,
                s.min_p,
                s.repetition_penalty,
                s.typical_p
            ),
            (0.6, 20, 0.9, 0.05, 1.1, 0.95)
        );
        assert_eq!(c.min_new_tokens, 3);
        // max_new_tokens takes precedence over max_length.
        assert_eq!((c.max_new_tokens, c.max_length), (64, None));
        assert_eq!(c.max_new_tokens_for(100).unwrap(), 64);
        assert_eq!(c.eos_token_ids.as_deref(), Some(&[2, 7][..]));
    }

    #[test]
    fn do_sample_false_is_greedy_whatever_the_sampling_values() {
        for json in [
            r#"{"do_sample": false, "temperature": 0.6, "top_p": 0.9}"#,
            r#"{"temperature": 0.6, "top_k": 20}"#,
        ] {
            let c = GenerationConfig::from_model_defaults(&defaults(json), &[2]);
            assert!(c.sampling.is_greedy(), "{json}");
            // Kept for a caller who turns sampling on.
            assert_eq!(c.sampling.temperature, 0.6, "{json}");
        }
    }

    #[test]
    fn max_length_alone_bounds_prompt_plus_new_tokens() {
        let c = GenerationConfig::from_model_defaults(&defaults(r#"{"max_length": 20}"#), &[2]);
        assert_eq!(c.max_length, Some(20));
        assert_eq!(c.max_new_tokens_for(5).unwrap(), 15);
        assert_eq!(c.max_new_tokens_for(19).unwrap(), 1);
        let err = c.max_new_tokens_for(20).unwrap_err().to_string();
        assert!(err.contains("max_length") && err.contains("20"), "{err}");
        // Nothing given: the built-in configuration.
        let none = GenerationConfig::from_model_defaults(&defaults("{}"), &[2]);
        assert_eq!(
            none,
            GenerationConfig {
                eos_token_ids: Some(vec![2]),
                ..Default::default()
            }
        );
    }
}

/// What [`TokenLoop::step`] leaves the caller to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// Evaluate this token (the one just sampled) and step again with its logits.
    Feed(u32),
    /// The generation ended; call [`TokenLoop::finish`].
    Done(FinishReason),
}

/// One sequence's generation after its prompt: sampler chain, EOS and `min_new_tokens`,
/// streaming detokenization, stop strings, the token limit. The caller owns the forward
/// passes (a [`Session`] runs one sequence; the serving engine batches many), so every caller
/// samples exactly alike.
pub struct TokenLoop {
    eos: Vec<u32>,
    limit: usize,
    min_new_tokens: usize,
    n_prompt: usize,
    chain: SamplerChain,
    stops: StopStrings,
    detok: StreamingDetokenizer,
    history: Vec<u32>,
    generated: Vec<u32>,
    piece: String,
    text: String,
    constraint: Option<ConstraintState>,
}

impl TokenLoop {
    /// A loop for `prompt` under `config`, generating at most `limit` tokens; checks the
    /// sampling parameters and that every prompt token is in the vocabulary. Every buffer the
    /// steps write is sized here, so that steps allocate nothing (with a byte-level
    /// tokenizer).
    pub fn new(
        llm: &Llm,
        prompt: &[u32],
        config: &GenerationConfig,
        limit: usize,
    ) -> Result<TokenLoop> {
        let vocab = llm.config().vocab_size;
        config.sampling.validate(vocab)?;
        if let Some(&bad) = prompt.iter().find(|&&t| t as usize >= vocab) {
            return Err(RuntimeError::TokenOutOfRange {
                token: bad,
                vocab_size: vocab,
            });
        }
        let eos = config
            .eos_token_ids
            .clone()
            .unwrap_or_else(|| llm.inner.eos_ids.clone());
        let mut chain = SamplerChain::from_params(&config.sampling);
        let mut stops = StopStrings::new(&config.stop);
        let detok = StreamingDetokenizer::new(
            llm.inner.tokenizer.clone(),
            DecodeOptions {
                skip_special_tokens: true,
            },
        );
        chain.reserve(vocab, prompt.len() + limit);
        let mut history = Vec::with_capacity(prompt.len() + limit);
        history.extend_from_slice(prompt);
        let piece = String::with_capacity(detok.text_capacity(1).unwrap_or(0));
        stops.reserve_for_pieces(piece.capacity());
        let text = String::with_capacity(detok.text_capacity(limit).unwrap_or(0));
        Ok(TokenLoop {
            eos,
            limit,
            min_new_tokens: config.min_new_tokens,
            n_prompt: prompt.len(),
            chain,
            stops,
            detok,
            history,
            generated: Vec::with_capacity(limit),
            piece,
            text,
            constraint: config.constraint.as_ref().map(ConstraintState::new),
        })
    }

    /// Sample from the logits after the last token (`logits`, one vocabulary row; EOS ids are
    /// masked in place while `min_new_tokens` is not reached), pass newly final text to
    /// `on_text`, and say what comes next.
    pub fn step(
        &mut self,
        logits: &mut [f32],
        rng: &mut Rng,
        on_text: &mut dyn FnMut(&str) -> Flow,
    ) -> Result<Next> {
        if self.generated.len() < self.min_new_tokens {
            for &e in &self.eos {
                if let Some(l) = logits.get_mut(e as usize) {
                    *l = f32::NEG_INFINITY;
                }
            }
        }
        if let Some(c) = &mut self.constraint {
            c.mask(logits);
        }
        let mut ctx = SamplingContext {
            history: &self.history,
            n_prompt: self.n_prompt,
            rng,
        };
        let token = self.chain.sample(logits, &mut ctx)?;
        if self.eos.contains(&token) {
            return Ok(Next::Done(FinishReason::Eos));
        }
        // A complete grammar that cannot continue ends the generation as EOS would (the
        // only token it allows next).
        let complete = match &mut self.constraint {
            Some(c) => c.accept(token)?,
            None => false,
        };
        self.generated.push(token);
        self.history.push(token);
        self.piece.clear();
        if self
            .detok
            .push_to(token, &mut self.piece)
            .map_err(text_err)?
            > 0
        {
            let before = self.text.len();
            let stopped = self.stops.push_to(&self.piece, &mut self.text);
            let emitted = &self.text[before..];
            if stopped {
                if !emitted.is_empty() {
                    on_text(emitted);
                }
                return Ok(Next::Done(FinishReason::StopString));
            }
            if !emitted.is_empty() && on_text(emitted) == Flow::Cancel {
                return Ok(Next::Done(FinishReason::Cancelled));
            }
        }
        if complete {
            return Ok(Next::Done(FinishReason::Eos));
        }
        if self.generated.len() >= self.limit {
            return Ok(Next::Done(FinishReason::Length));
        }
        Ok(Next::Feed(token))
    }

    /// After [`Next::Done`]: flush the text held back (an incomplete character, a possible
    /// stop string's start) unless cancelled.
    pub fn finish(
        &mut self,
        finish: FinishReason,
        on_text: &mut dyn FnMut(&str) -> Flow,
    ) -> Result<()> {
        if matches!(
            finish,
            FinishReason::Length | FinishReason::Cancelled | FinishReason::Eos
        ) {
            let rest = self.detok.finish().map_err(text_err)?.unwrap_or_default();
            let mut tail = match self.stops.push(&rest) {
                StopStep::Continue { emit } => emit,
                StopStep::Stop { emit } => emit,
            };
            tail.push_str(&self.stops.flush());
            if !tail.is_empty() && finish != FinishReason::Cancelled {
                self.text.push_str(&tail);
                on_text(&tail);
            }
        }
        Ok(())
    }

    /// Tokens that may still be generated (the limit less those generated).
    pub fn remaining(&self) -> usize {
        self.limit.saturating_sub(self.generated.len())
    }

    /// Tokens generated so far (without an EOS).
    pub fn generated(&self) -> &[u32] {
        &self.generated
    }

    /// The prompt followed by the tokens generated so far.
    pub fn history(&self) -> &[u32] {
        &self.history
    }

    /// Text emitted so far.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The text and the generated tokens.
    pub fn into_output(self) -> (String, Vec<u32>) {
        (self.text, self.generated)
    }
}
