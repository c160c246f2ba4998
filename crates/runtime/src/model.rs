//! Decoder-only transformer (llama, mistral, qwen2, qwen3, SmolLM2, phi3, gemma2, gemma3) built
//! from one block: RMSNorm -> attention (GQA, RoPE, optional q/k norm, biases, sliding window,
//! softcap) -> [RMSNorm] -> residual -> RMSNorm -> SwiGLU / GeGLU MLP -> [RMSNorm] -> residual.
//! The bracketed norms are Gemma's sandwich norms; Phi-3's fused `qkv_proj` / `gate_up_proj`
//! are split into their projections at load. Weights are immutable after load and shared
//! between sessions; everything mutable lives in the [`Workspace`] and the KV cache.

use torchnative_core::kernels::{self, AttentionParams, RopeStyle, RopeTable};
use torchnative_formats::names::{expected_tensors, gguf_qk_rows_interleaved, Naming};
use torchnative_formats::{Activation, Architecture, DecoderConfig, RopeScaling};
use torchnative_quant::ActivationScratch;

use crate::error::{invalid, Result, RuntimeError};
use crate::faults::{on as fault_on, Fault};
use crate::kv_cache::{KvCache, KvLayerView, KvShape};
use crate::lora::{self, ActiveLora, LoraModule, LoraRows};
use crate::rope::{dynamic_ntk, dynamic_ntk_inv_freq, inv_freq, local_inv_freq, long_inv_freq};
use crate::weights::{Checkpoint, LoadStats, Matrix, WeightFormat};

struct Layer {
    attn_norm: Vec<f32>,
    q: Matrix,
    k: Matrix,
    v: Matrix,
    o: Matrix,
    q_bias: Option<Vec<f32>>,
    k_bias: Option<Vec<f32>>,
    v_bias: Option<Vec<f32>>,
    o_bias: Option<Vec<f32>>,
    q_norm: Option<Vec<f32>>,
    k_norm: Option<Vec<f32>>,
    ffn_norm: Vec<f32>,
    gate: Matrix,
    up: Matrix,
    down: Matrix,
    gate_bias: Option<Vec<f32>>,
    up_bias: Option<Vec<f32>>,
    down_bias: Option<Vec<f32>>,
    /// Gemma: RMSNorm of the attention output before the residual add.
    post_attn_norm: Option<Vec<f32>>,
    /// Gemma: RMSNorm of the MLP output before the residual add.
    post_ffn_norm: Option<Vec<f32>>,
    /// This layer's attention window (`None`: every earlier position).
    sliding_window: Option<usize>,
    /// This layer takes the local RoPE table (Gemma 3's sliding layers).
    local_rope: bool,
}

/// The immutable model: config, weights, RoPE table.
pub struct DecoderModel {
    config: DecoderConfig,
    checkpoint: Checkpoint,
    format: WeightFormat,
    embed: Matrix,
    lm_head: Option<Matrix>,
    norm: Vec<f32>,
    layers: Vec<Layer>,
    rope: RopeTable,
    /// Plain RoPE with the sliding layers' own base (Gemma 3).
    rope_local: Option<RopeTable>,
    /// LongRoPE's long-sequence table and the pretrained length beyond which it is used.
    rope_long: Option<(RopeTable, usize)>,
    /// Dynamic NTK scaling: `(factor, original length)`. Tokens rotated for a sequence length
    /// beyond the original take frequencies computed for that length (`dynamic_rope_rows`);
    /// `rope` is the plain table used up to it.
    rope_dynamic: Option<(f64, usize)>,
    rope_style: RopeStyle,
    /// Attention score scale (`head_dim^-1/2`, Gemma's `query_pre_attn_scalar^-1/2`).
    attn_scale: f32,
    /// Token embeddings are multiplied by this (Gemma: `sqrt(hidden_size)`).
    embed_scale: Option<f32>,
    stats: LoadStats,
}

/// A run of consecutive tokens of one sequence, starting at position `pos0` (= the number of
/// tokens that sequence already has in the cache).
#[derive(Clone, Copy, Debug)]
pub struct SeqChunk<'a> {
    pub seq: usize,
    pub tokens: &'a [u32],
    pub pos0: usize,
}

/// Which positions' logits a forward pass produces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogitsFor {
    /// The last token of each chunk (generation).
    LastOfEachChunk,
    /// Every token (evaluation, tests).
    AllTokens,
    /// The last `n[i]` tokens of chunk `i`, `n` set by [`Workspace::set_chunk_logit_rows`]
    /// (a batch where some sequences verify drafted tokens and others read prompts).
    LastRowsOfEachChunk,
}

/// Buffers of one forward pass, sized once for `max_tokens` rows: the token loop allocates
/// nothing.
pub struct Workspace {
    max_tokens: usize,
    x: Vec<f32>,
    h: Vec<f32>,
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    attn: Vec<f32>,
    proj: Vec<f32>,
    gate: Vec<f32>,
    up: Vec<f32>,
    rows: Vec<f32>,
    /// `[max_tokens][vocab]`; the last pass filled the first `logit_rows` rows.
    logits: Vec<f32>,
    logit_rows: usize,
    vocab: usize,
    act: ActivationScratch,
    /// LoRA adapters added next to the base weights in this workspace's passes.
    lora: Vec<ActiveLora>,
    /// Per chunk of the next passes, its own adapters (the engine); when set, instead of
    /// `lora`. `chunk_lens` is scratch for the pass.
    chunk_lora: Vec<Vec<ActiveLora>>,
    chunk_lens: Vec<usize>,
    /// Per chunk: logits rows wanted with [`LogitsFor::LastRowsOfEachChunk`].
    chunk_logit_rows: Vec<usize>,
    /// One row's `A x` (the largest rank of `lora`).
    lora_tmp: Vec<f32>,
    /// Dynamic NTK RoPE (empty for other models): per row of the pass, the sequence length its
    /// rotation was computed for (0: the plain table), its cos/sin (`[row][rope_dim / 2]`),
    /// and the frequencies of the last length computed.
    rope_len: Vec<usize>,
    rope_cos: Vec<f32>,
    rope_sin: Vec<f32>,
    rope_inv: Vec<f32>,
}

impl Workspace {
    /// Logits of the last forward pass, `[n_rows][vocab]`.
    pub fn logits(&self) -> &[f32] {
        &self.logits[..self.logit_rows * self.vocab]
    }

    pub fn max_tokens(&self) -> usize {
        self.max_tokens
    }

    /// The LoRA adapters the next passes add (empty: the base model alone).
    pub fn lora(&self) -> &[ActiveLora] {
        &self.lora
    }

    /// Choose the LoRA adapters of the following passes (checked against the model by the
    /// forward pass; the scratch is sized here, so passes stay allocation-free).
    pub fn set_lora(&mut self, adapters: &[ActiveLora]) {
        self.lora.clear();
        self.lora.extend_from_slice(adapters);
        let need = lora::scratch_len(adapters);
        if self.lora_tmp.len() < need {
            self.lora_tmp.resize(need, 0.0);
        }
    }

    /// How many rows of logits [`LogitsFor::LastRowsOfEachChunk`] gives each chunk (its last
    /// `rows[i]` tokens; each at least 1 and at most the chunk's length, checked by the pass).
    pub fn set_chunk_logit_rows(&mut self, rows: impl IntoIterator<Item = usize>) {
        self.chunk_logit_rows.clear();
        self.chunk_logit_rows.extend(rows);
    }

    /// Logits rows the workspace holds.
    pub fn max_logit_rows(&self) -> usize {
        self.logits.len() / self.vocab.max(1)
    }

    /// Give each chunk of the following passes its own adapters (`lists[i]` for chunk `i`;
    /// empty lists: the base model for that chunk), in place of [`Self::set_lora`]'s list.
    /// An empty `lists` goes back to that list.
    pub fn set_chunk_lora<'a>(&mut self, lists: impl IntoIterator<Item = &'a [ActiveLora]>) {
        self.chunk_lora.clear();
        for list in lists {
            let need = lora::scratch_len(list);
            if self.lora_tmp.len() < need {
                self.lora_tmp.resize(need, 0.0);
            }
            self.chunk_lora.push(list.to_vec());
        }
        // Nothing per chunk unless some chunk runs an adapter: the base path stays as it was.
        if self.chunk_lora.iter().all(Vec::is_empty) {
            self.chunk_lora.clear();
        }
    }
}

impl DecoderModel {
    /// Build from tensors held elsewhere, by their transformers names (a module captured from
    /// the torch face): contiguous f32 matrices are read in place, not copied; shapes are
    /// checked against `config` as for a file.
    pub fn from_tensors(
        config: DecoderConfig,
        tensors: std::collections::HashMap<String, torchnative_core::Tensor>,
        format: WeightFormat,
    ) -> Result<DecoderModel> {
        DecoderModel::load(config, Checkpoint::Tensors(tensors), format, &mut |_, _| {})
    }

    /// Build from a checkpoint; every tensor's presence and shape is checked here, so an
    /// incompatible file fails at load, never at token 1.
    /// `progress(done, total)` is called as layers are prepared (for a progress bar).
    pub(crate) fn load(
        config: DecoderConfig,
        checkpoint: Checkpoint,
        format: WeightFormat,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<DecoderModel> {
        validate_config(&config)?;
        let c = &config;
        let mut stats = LoadStats::default();
        let (d, hd) = (c.hidden_size, c.head_dim);
        let (nq, nkv) = (c.n_heads * hd, c.n_kv_heads * hd);
        let m = |name: &str, rows, cols, stats: &mut LoadStats| {
            checkpoint.matrix(name, rows, cols, format, stats)
        };
        let mut embed = m("model.embed_tokens.weight", c.vocab_size, d, &mut stats)?;
        let lm_head = if c.tie_word_embeddings && !checkpoint.has("lm_head.weight")? {
            None
        } else {
            // The embedding table then only serves lookups, from the file's rows.
            embed.drop_interleaved(&mut stats);
            Some(m("lm_head.weight", c.vocab_size, d, &mut stats)?)
        };
        // Gemma stores RMSNorm weights as offsets from 1; the kernels take `1 + w` (in f32, as
        // transformers adds them). llama.cpp's converter has already added the 1.
        let add_one = c.gemma_norms && !matches!(checkpoint, Checkpoint::Gguf(_));
        let norm_weight = |mut w: Vec<f32>| {
            if add_one {
                w.iter_mut().for_each(|x| *x += 1.0);
            }
            w
        };
        let norm = norm_weight(checkpoint.vector("model.norm.weight", d, &mut stats)?);
        let phi3 = c.architecture == Architecture::Phi3;
        let ff = c.intermediate_size;
        let mut layers = Vec::with_capacity(c.n_layers);
        for i in 0..c.n_layers {
            let p = format!("model.layers.{i}.");
            let vecn =
                |s: &str, n, st: &mut LoadStats| checkpoint.vector(&format!("{p}{s}"), n, st);
            let opt = |s: &str, n, on: bool, st: &mut LoadStats| -> Result<Option<Vec<f32>>> {
                if on {
                    Ok(Some(checkpoint.vector(&format!("{p}{s}"), n, st)?))
                } else {
                    checkpoint.optional_vector(&format!("{p}{s}"), n, st)
                }
            };
            let mat = |s: &str, r, cc, st: &mut LoadStats| m(&format!("{p}{s}"), r, cc, st);
            let rows = |s: &str, total, part: std::ops::Range<usize>, st: &mut LoadStats| {
                checkpoint.matrix_rows(&format!("{p}{s}"), total, d, part, format, st)
            };
            let (q, k, v) = if phi3 {
                let qkv = "self_attn.qkv_proj.weight";
                let total = nq + 2 * nkv;
                (
                    rows(qkv, total, 0..nq, &mut stats)?,
                    rows(qkv, total, nq..nq + nkv, &mut stats)?,
                    rows(qkv, total, nq + nkv..total, &mut stats)?,
                )
            } else {
                (
                    mat("self_attn.q_proj.weight", nq, d, &mut stats)?,
                    mat("self_attn.k_proj.weight", nkv, d, &mut stats)?,
                    mat("self_attn.v_proj.weight", nkv, d, &mut stats)?,
                )
            };
            let (gate, up) = if phi3 {
                let gu = "mlp.gate_up_proj.weight";
                (
                    rows(gu, 2 * ff, 0..ff, &mut stats)?,
                    rows(gu, 2 * ff, ff..2 * ff, &mut stats)?,
                )
            } else {
                (
                    mat("mlp.gate_proj.weight", ff, d, &mut stats)?,
                    mat("mlp.up_proj.weight", ff, d, &mut stats)?,
                )
            };
            let (ffn_norm_name, post_attn, post_ffn) = if c.gemma_norms {
                (
                    "pre_feedforward_layernorm.weight",
                    Some(norm_weight(vecn(
                        "post_attention_layernorm.weight",
                        d,
                        &mut stats,
                    )?)),
                    Some(norm_weight(vecn(
                        "post_feedforward_layernorm.weight",
                        d,
                        &mut stats,
                    )?)),
                )
            } else {
                ("post_attention_layernorm.weight", None, None)
            };
            let sliding = c.sliding_layers.as_ref().is_none_or(|l| l[i]);
            layers.push(Layer {
                attn_norm: norm_weight(vecn("input_layernorm.weight", d, &mut stats)?),
                q,
                k,
                v,
                o: mat("self_attn.o_proj.weight", d, nq, &mut stats)?,
                q_bias: opt("self_attn.q_proj.bias", nq, c.attention_bias, &mut stats)?,
                k_bias: opt("self_attn.k_proj.bias", nkv, c.attention_bias, &mut stats)?,
                v_bias: opt("self_attn.v_proj.bias", nkv, c.attention_bias, &mut stats)?,
                o_bias: opt("self_attn.o_proj.bias", d, c.attention_out_bias, &mut stats)?,
                q_norm: opt("self_attn.q_norm.weight", hd, c.qk_norm, &mut stats)?.map(norm_weight),
                k_norm: opt("self_attn.k_norm.weight", hd, c.qk_norm, &mut stats)?.map(norm_weight),
                ffn_norm: norm_weight(vecn(ffn_norm_name, d, &mut stats)?),
                gate,
                up,
                down: mat("mlp.down_proj.weight", d, ff, &mut stats)?,
                gate_bias: opt("mlp.gate_proj.bias", ff, c.mlp_bias, &mut stats)?,
                up_bias: opt("mlp.up_proj.bias", ff, c.mlp_bias, &mut stats)?,
                down_bias: opt("mlp.down_proj.bias", d, c.mlp_bias, &mut stats)?,
                post_attn_norm: post_attn,
                post_ffn_norm: post_ffn,
                sliding_window: if sliding { c.sliding_window } else { None },
                local_rope: sliding && c.local_rope_theta.is_some(),
            });
            progress(i + 1, c.n_layers);
        }
        let table = |freqs: &[f32], factor: f32| {
            RopeTable::from_inv_freq(freqs, c.context_length, factor)
                .map_err(|e| RuntimeError::Kernel(e.to_string()))
        };
        let (freqs, attention_factor) = inv_freq(c)?;
        let rope = table(&freqs, attention_factor)?;
        let rope_local = local_inv_freq(c).map(|f| table(&f, 1.0)).transpose()?;
        let rope_long = long_inv_freq(c)
            .map(|(f, from)| table(&f, attention_factor).map(|t| (t, from)))
            .transpose()?;
        let rope_dynamic = dynamic_ntk(c);
        let rope_style = match &checkpoint {
            Checkpoint::Gguf(_) if gguf_qk_rows_interleaved(c.architecture) => {
                RopeStyle::Interleaved
            }
            _ => RopeStyle::HalfRotation,
        };
        let attn_scale = match c.query_pre_attn_scalar {
            Some(s) => s.powf(-0.5),
            None => 1.0 / (hd as f32).sqrt(),
        };
        // transformers makes sqrt(hidden) a tensor of the weights' dtype (f32 here).
        let embed_scale = c.gemma_norms.then(|| (c.hidden_size as f64).sqrt() as f32);
        let model = DecoderModel {
            config,
            checkpoint,
            format,
            embed,
            lm_head,
            norm,
            layers,
            rope,
            rope_local,
            rope_long,
            rope_dynamic,
            rope_style,
            attn_scale,
            embed_scale,
            stats,
        };
        model.release_unread_file_pages();
        Ok(model)
    }

    /// Every weight matrix: the embedding, the output head if it has its own, each layer's.
    fn matrices(&self) -> impl Iterator<Item = &Matrix> {
        let layers = self
            .layers
            .iter()
            .flat_map(|l| [&l.q, &l.k, &l.v, &l.o, &l.gate, &l.up, &l.down]);
        std::iter::once(&self.embed)
            .chain(&self.lm_head)
            .chain(layers)
    }

    /// After load, the forward pass reads from a GGUF's map only the packed matrices it runs in
    /// place: the rest of the file (header, vocabulary, vectors and matrices copied at load)
    /// leaves the process, so it does not count twice against memory.
    fn release_unread_file_pages(&self) {
        let Checkpoint::Gguf(file) = &self.checkpoint else {
            return;
        };
        let map = file.as_bytes();
        let mut in_place: Vec<std::ops::Range<usize>> = self
            .matrices()
            .filter_map(|m| m.file_range_read_in_place())
            .collect();
        in_place.sort_by_key(|r| r.start);
        let mut from = 0usize;
        for r in in_place
            .iter()
            .chain(std::iter::once(&(map.len()..map.len())))
        {
            if r.start > from {
                // Whole 4 KiB pages only, so the kernels' pages stay (with larger pages an
                // edge page may go, and is read back once).
                let page = 4096;
                let (a, b) = (from.next_multiple_of(page), r.start / page * page);
                if b > a {
                    file.release_pages(&map[a..b]);
                }
            }
            from = from.max(r.end);
        }
    }

    pub fn config(&self) -> &DecoderConfig {
        &self.config
    }

    /// Whether q/k projection rows are stored permuted for interleaved RoPE (GGUF llama).
    pub fn qk_rows_interleaved(&self) -> bool {
        matches!(self.rope_style, RopeStyle::Interleaved)
    }

    pub fn weight_format(&self) -> WeightFormat {
        self.format
    }

    pub fn load_stats(&self) -> &LoadStats {
        &self.stats
    }

    pub fn kv_shape(&self) -> KvShape {
        KvShape {
            n_layers: self.config.n_layers,
            n_kv_heads: self.config.n_kv_heads,
            head_dim: self.config.head_dim,
        }
    }

    /// Type names of the weight matrices and how many of each (for `info`).
    pub fn weight_types(&self) -> Vec<(String, usize)> {
        let mut counts: Vec<(String, usize)> = Vec::new();
        let add = |m: &Matrix| {
            let t = m.type_name();
            match counts.iter_mut().find(|(n, _)| *n == t) {
                Some((_, c)) => *c += 1,
                None => counts.push((t, 1)),
            }
        };
        self.matrices().for_each(add);
        counts
    }

    /// Number of parameters (weights and vectors).
    pub fn n_params(&self) -> usize {
        let c = &self.config;
        let per_layer = |l: &Layer| {
            [&l.q, &l.k, &l.v, &l.o, &l.gate, &l.up, &l.down]
                .iter()
                .map(|m| m.rows * m.cols)
                .sum::<usize>()
                + l.attn_norm.len()
                + l.ffn_norm.len()
                + l.post_attn_norm.as_ref().map_or(0, Vec::len)
                + l.post_ffn_norm.as_ref().map_or(0, Vec::len)
                + [
                    &l.q_bias,
                    &l.k_bias,
                    &l.v_bias,
                    &l.o_bias,
                    &l.q_norm,
                    &l.k_norm,
                    &l.gate_bias,
                    &l.up_bias,
                    &l.down_bias,
                ]
                .iter()
                .map(|b| b.as_ref().map_or(0, |v| v.len()))
                .sum::<usize>()
        };
        c.vocab_size * c.hidden_size * (1 + self.lm_head.is_some() as usize)
            + self.norm.len()
            + self.layers.iter().map(per_layer).sum::<usize>()
    }

    /// Buffers for forward passes of up to `max_tokens` tokens at once, producing up to
    /// `max_logit_rows` rows of logits (1 per sequence for generation; `max_tokens` to get every
    /// position's logits).
    pub fn workspace(&self, max_tokens: usize, max_logit_rows: usize) -> Workspace {
        let c = &self.config;
        let t = max_tokens.max(1);
        let r = max_logit_rows.clamp(1, t);
        let (d, q, kv, ff) = (
            c.hidden_size,
            c.n_heads * c.head_dim,
            c.n_kv_heads * c.head_dim,
            c.intermediate_size,
        );
        let mut act = ActivationScratch::new();
        act.reserve(t, d.max(q).max(ff));
        let half = if self.rope_dynamic.is_some() {
            c.rope_dim / 2
        } else {
            0
        };
        let rows = if half > 0 { t } else { 0 };
        Workspace {
            max_tokens: t,
            x: vec![0.0; t * d],
            h: vec![0.0; t * d],
            q: vec![0.0; t * q],
            k: vec![0.0; t * kv],
            v: vec![0.0; t * kv],
            attn: vec![0.0; t * q],
            proj: vec![0.0; t * d],
            gate: vec![0.0; t * ff],
            up: vec![0.0; t * ff],
            rows: vec![0.0; t * d],
            logits: vec![0.0; r * c.vocab_size],
            logit_rows: 0,
            vocab: c.vocab_size,
            act,
            lora: Vec::new(),
            chunk_lora: Vec::new(),
            chunk_lens: Vec::new(),
            chunk_logit_rows: Vec::new(),
            lora_tmp: Vec::new(),
            rope_len: vec![0; rows],
            rope_cos: vec![0.0; rows * half],
            rope_sin: vec![0.0; rows * half],
            rope_inv: vec![0.0; half],
        }
    }

    /// Check a batch against the model and cache before any work: token ids in range, chunks
    /// starting at their sequence's cache length, everything inside the capacity.
    pub fn check_batch(
        &self,
        chunks: &[SeqChunk],
        cache: &dyn KvCache,
        ws: &Workspace,
        want: LogitsFor,
    ) -> Result<()> {
        let total: usize = chunks.iter().map(|c| c.tokens.len()).sum();
        if total == 0 {
            return Err(invalid("batch", "no tokens to evaluate"));
        }
        if total > ws.max_tokens {
            return Err(invalid(
                "batch",
                format!(
                    "{total} tokens exceed the workspace's {} rows",
                    ws.max_tokens
                ),
            ));
        }
        let rows = match want {
            LogitsFor::AllTokens => total,
            LogitsFor::LastOfEachChunk => chunks.len(),
            LogitsFor::LastRowsOfEachChunk => {
                let n = &ws.chunk_logit_rows;
                if n.len() != chunks.len()
                    || n.iter()
                        .zip(chunks)
                        .any(|(&r, c)| r == 0 || r > c.tokens.len())
                {
                    return Err(invalid(
                        "batch",
                        format!(
                            "logits rows per chunk {n:?} do not fit chunks of {:?} tokens",
                            chunks.iter().map(|c| c.tokens.len()).collect::<Vec<_>>()
                        ),
                    ));
                }
                n.iter().sum()
            }
        };
        if rows * self.config.vocab_size > ws.logits.len() {
            return Err(invalid(
                "batch",
                format!(
                    "{rows} rows of logits exceed the workspace's {}",
                    ws.logits.len() / self.config.vocab_size
                ),
            ));
        }
        if cache.shape() != self.kv_shape() {
            return Err(invalid(
                "kv cache",
                format!(
                    "shape {:?} does not match the model's {:?}",
                    cache.shape(),
                    self.kv_shape()
                ),
            ));
        }
        for (i, ch) in chunks.iter().enumerate() {
            // Quadratic in the batch's sequences (a handful), and allocation-free.
            if chunks[..i].iter().any(|earlier| earlier.seq == ch.seq) {
                return Err(invalid(
                    "batch",
                    format!("sequence {} appears twice", ch.seq),
                ));
            }
            if ch.seq >= cache.n_seqs() {
                return Err(invalid(
                    "sequence id",
                    format!("{} >= {} cache slots", ch.seq, cache.n_seqs()),
                ));
            }
            if ch.pos0 != cache.len(ch.seq) {
                return Err(invalid(
                    "batch",
                    format!(
                        "sequence {} continues at position {} but its cache holds {}",
                        ch.seq,
                        ch.pos0,
                        cache.len(ch.seq)
                    ),
                ));
            }
            let end = ch.pos0 + ch.tokens.len();
            let limit = cache.capacity().min(self.rope.max_positions());
            if end > limit {
                return Err(RuntimeError::ContextOverflow {
                    prompt_tokens: ch.pos0,
                    max_new_tokens: ch.tokens.len(),
                    capacity: limit,
                });
            }
            if let Some(&bad) = ch
                .tokens
                .iter()
                .find(|&&t| t as usize >= self.config.vocab_size)
            {
                return Err(RuntimeError::TokenOutOfRange {
                    token: bad,
                    vocab_size: self.config.vocab_size,
                });
            }
        }
        Ok(())
    }

    /// Evaluate `chunks` (one per sequence), appending their keys/values to `cache`, and leave
    /// logits in `ws.logits()`: one row per chunk (`LastOfEachChunk`) or per token.
    pub fn forward(
        &self,
        chunks: &[SeqChunk],
        cache: &mut dyn KvCache,
        ws: &mut Workspace,
        want: LogitsFor,
    ) -> Result<()> {
        self.check_batch(chunks, cache, ws, want)?;
        lora::check_active(&ws.lora, self)?;
        if !ws.chunk_lora.is_empty() {
            if ws.chunk_lora.len() != chunks.len() {
                return Err(invalid(
                    "forward",
                    format!(
                        "{} per-chunk LoRA lists for {} chunks",
                        ws.chunk_lora.len(),
                        chunks.len()
                    ),
                ));
            }
            for list in &ws.chunk_lora {
                lora::check_active(list, self)?;
            }
        }
        let c = &self.config;
        let map = self.checkpoint.map();
        let (d, hd) = (c.hidden_size, c.head_dim);
        let (nq, nkv) = (c.n_heads * hd, c.n_kv_heads * hd);
        let ff = c.intermediate_size;
        let m: usize = chunks.iter().map(|ch| ch.tokens.len()).sum();

        if let Some((factor, original)) = self.rope_dynamic {
            self.dynamic_rope_rows(chunks, &*cache, ws, factor, original);
        }
        let half = c.rope_dim / 2;

        // Embedding lookup straight from the (possibly packed) rows.
        let tokens = chunks.iter().flat_map(|ch| ch.tokens.iter());
        for (row, &tok) in tokens.enumerate() {
            let x = &mut ws.x[row * d..(row + 1) * d];
            self.embed.row_into(map, tok as usize, x)?;
            if let Some(scale) = self.embed_scale {
                x.iter_mut().for_each(|v| *v *= scale);
            }
        }

        ws.chunk_lens.clear();
        ws.chunk_lens
            .extend(chunks.iter().map(|ch| ch.tokens.len()));
        let lora_rows = match (&ws.chunk_lora[..], &ws.lora[..]) {
            ([], []) => LoraRows::None,
            ([], list) => LoraRows::All(list),
            (lists, _) => LoraRows::PerChunk {
                lists,
                lens: &ws.chunk_lens,
            },
        };
        let has_lora = !matches!(lora_rows, LoraRows::None);
        for (li, layer) in self.layers.iter().enumerate() {
            kernels::rms_norm_rows_f32(
                &ws.x[..m * d],
                &layer.attn_norm,
                c.norm_eps,
                &mut ws.h[..m * d],
            );
            Matrix::forward_group(
                [&layer.q, &layer.k, &layer.v],
                map,
                &ws.h[..m * d],
                m,
                [
                    &mut ws.q[..m * nq],
                    &mut ws.k[..m * nkv],
                    &mut ws.v[..m * nkv],
                ],
                &mut ws.act,
            )?;
            if has_lora {
                let (x, tmp) = (&ws.h[..m * d], &mut ws.lora_tmp);
                lora_rows.apply(li, LoraModule::Q, x, m, &mut ws.q[..m * nq], tmp);
                lora_rows.apply(li, LoraModule::K, x, m, &mut ws.k[..m * nkv], tmp);
                lora_rows.apply(li, LoraModule::V, x, m, &mut ws.v[..m * nkv], tmp);
            }
            add_bias(&mut ws.q[..m * nq], layer.q_bias.as_deref());
            add_bias(&mut ws.k[..m * nkv], layer.k_bias.as_deref());
            add_bias(&mut ws.v[..m * nkv], layer.v_bias.as_deref());
            if let (Some(qn), Some(kn)) = (&layer.q_norm, &layer.k_norm) {
                norm_heads(&mut ws.q[..m * nq], qn, c.norm_eps);
                norm_heads(&mut ws.k[..m * nkv], kn, c.norm_eps);
            }
            let rope_style = self.rope_style_for_this_pass();
            let dynamic_layer =
                self.rope_dynamic.is_some() && !(layer.local_rope && self.rope_local.is_some());
            let mut row0 = 0;
            for ch in chunks {
                let n = ch.tokens.len();
                let floor = cache.rope_floor(ch.seq);
                for t in 0..n {
                    let r = row0 + t;
                    let pos = ch.pos0 + t;
                    let call_len = floor.map_or(ch.pos0 + n, |f| (pos + 1).max(f));
                    let table = self.rope_table(layer, call_len);
                    if dynamic_layer && ws.rope_len[r] > 0 {
                        let (cos, sin) = (
                            &ws.rope_cos[r * half..(r + 1) * half],
                            &ws.rope_sin[r * half..(r + 1) * half],
                        );
                        let q = &mut ws.q[r * nq..(r + 1) * nq];
                        kernels::rope_rows_f32(q, c.n_heads, hd, cos, sin, rope_style);
                        let k = &mut ws.k[r * nkv..(r + 1) * nkv];
                        kernels::rope_rows_f32(k, c.n_kv_heads, hd, cos, sin, rope_style);
                        continue;
                    }
                    kernels::rope_f32(
                        &mut ws.q[r * nq..(r + 1) * nq],
                        c.n_heads,
                        hd,
                        pos,
                        table,
                        rope_style,
                    );
                    kernels::rope_f32(
                        &mut ws.k[r * nkv..(r + 1) * nkv],
                        c.n_kv_heads,
                        hd,
                        pos,
                        table,
                        rope_style,
                    );
                }
                if fault_on(Fault::WrongKvHeadMapping) && c.n_kv_heads > 1 {
                    for row in row0..row0 + n {
                        for buf in [&mut ws.k, &mut ws.v] {
                            let r = &mut buf[row * nkv..row * nkv + 2 * hd];
                            let (a, b) = r.split_at_mut(hd);
                            a.swap_with_slice(b);
                        }
                    }
                }
                let shift = fault_on(Fault::CacheFrontierOffByOne) as usize;
                let write_at = if ch.pos0 + n + shift <= cache.capacity() {
                    ch.pos0 + shift
                } else {
                    ch.pos0
                };
                cache.write(
                    li,
                    ch.seq,
                    write_at,
                    &ws.k[row0 * nkv..(row0 + n) * nkv],
                    &ws.v[row0 * nkv..(row0 + n) * nkv],
                )?;
                row0 += n;
            }
            if chunks.len() > 1 && !fault_on(Fault::NonCausalMask) {
                let base = AttentionParams {
                    n_q: 0,
                    n_heads: c.n_heads,
                    n_kv_heads: c.n_kv_heads,
                    head_dim: hd,
                    kv_len: 0,
                    kv_capacity: 0,
                    q_pos0: 0,
                    scale: self.attn_scale,
                    sliding_window: layer.sliding_window,
                    softcap: c.attn_logit_softcap,
                };
                let (q, out) = (&ws.q[..m * nq], &mut ws.attn[..m * nq]);
                attend_batch(&*cache, li, chunks, q, out, base)?;
            } else {
                let mut row0 = 0;
                for ch in chunks {
                    let n = ch.tokens.len();
                    let kv_len = ch.pos0 + n;
                    let view = cache.layer(li, ch.seq, kv_len)?;
                    let params = AttentionParams {
                        n_q: n,
                        n_heads: c.n_heads,
                        n_kv_heads: c.n_kv_heads,
                        head_dim: hd,
                        kv_len,
                        kv_capacity: match view {
                            KvLayerView::Dense { capacity, .. } => capacity,
                            KvLayerView::Paged { .. } => kv_len,
                        },
                        q_pos0: ch.pos0,
                        scale: self.attn_scale,
                        sliding_window: layer.sliding_window,
                        softcap: c.attn_logit_softcap,
                    };
                    if fault_on(Fault::NonCausalMask) {
                        // Every query placed at the chunk's last position sees every key.
                        for t in 0..n {
                            let r = row0 + t;
                            let p = AttentionParams {
                                n_q: 1,
                                q_pos0: kv_len - 1,
                                ..params
                            };
                            let out = &mut ws.attn[r * nq..(r + 1) * nq];
                            attend(&view, &ws.q[r * nq..(r + 1) * nq], out, p)?;
                        }
                    } else {
                        let out = &mut ws.attn[row0 * nq..(row0 + n) * nq];
                        attend(&view, &ws.q[row0 * nq..(row0 + n) * nq], out, params)?;
                    }
                    row0 += n;
                }
            }
            layer.o.forward(
                map,
                &ws.attn[..m * nq],
                m,
                &mut ws.proj[..m * d],
                &mut ws.act,
            )?;
            if has_lora {
                let (x, y) = (&ws.attn[..m * nq], &mut ws.proj[..m * d]);
                lora_rows.apply(li, LoraModule::O, x, m, y, &mut ws.lora_tmp);
            }
            add_bias(&mut ws.proj[..m * d], layer.o_bias.as_deref());
            add_residual(
                &mut ws.x[..m * d],
                &ws.proj[..m * d],
                layer.post_attn_norm.as_deref(),
                c.norm_eps,
                &mut ws.h[..m * d],
            );

            kernels::rms_norm_rows_f32(
                &ws.x[..m * d],
                &layer.ffn_norm,
                c.norm_eps,
                &mut ws.h[..m * d],
            );
            Matrix::forward_group(
                [&layer.gate, &layer.up],
                map,
                &ws.h[..m * d],
                m,
                [&mut ws.gate[..m * ff], &mut ws.up[..m * ff]],
                &mut ws.act,
            )?;
            if has_lora {
                let (x, tmp) = (&ws.h[..m * d], &mut ws.lora_tmp);
                let (g, u) = (&mut ws.gate[..m * ff], &mut ws.up[..m * ff]);
                lora_rows.apply(li, LoraModule::Gate, x, m, g, tmp);
                lora_rows.apply(li, LoraModule::Up, x, m, u, tmp);
            }
            add_bias(&mut ws.gate[..m * ff], layer.gate_bias.as_deref());
            add_bias(&mut ws.up[..m * ff], layer.up_bias.as_deref());
            match c.activation {
                Activation::Silu => {
                    kernels::silu_mul_inplace_f32(&ws.gate[..m * ff], &mut ws.up[..m * ff])
                }
                Activation::GeluTanh => {
                    gelu_tanh_mul_inplace(&ws.gate[..m * ff], &mut ws.up[..m * ff])
                }
            }
            layer
                .down
                .forward(map, &ws.up[..m * ff], m, &mut ws.proj[..m * d], &mut ws.act)?;
            if has_lora {
                let (x, y) = (&ws.up[..m * ff], &mut ws.proj[..m * d]);
                lora_rows.apply(li, LoraModule::Down, x, m, y, &mut ws.lora_tmp);
            }
            add_bias(&mut ws.proj[..m * d], layer.down_bias.as_deref());
            add_residual(
                &mut ws.x[..m * d],
                &ws.proj[..m * d],
                layer.post_ffn_norm.as_deref(),
                c.norm_eps,
                &mut ws.h[..m * d],
            );
        }

        for ch in chunks {
            cache.commit(ch.seq, ch.pos0 + ch.tokens.len())?;
        }

        // Final norm and LM head only on the rows whose logits are wanted.
        let n_rows = match want {
            LogitsFor::AllTokens => {
                ws.rows[..m * d].copy_from_slice(&ws.x[..m * d]);
                m
            }
            LogitsFor::LastOfEachChunk => {
                let mut end = 0;
                for (i, ch) in chunks.iter().enumerate() {
                    end += ch.tokens.len();
                    ws.rows[i * d..(i + 1) * d].copy_from_slice(&ws.x[(end - 1) * d..end * d]);
                }
                chunks.len()
            }
            LogitsFor::LastRowsOfEachChunk => {
                let (mut end, mut out) = (0, 0);
                for (ch, &n) in chunks.iter().zip(&ws.chunk_logit_rows) {
                    end += ch.tokens.len();
                    ws.rows[out * d..(out + n) * d].copy_from_slice(&ws.x[(end - n) * d..end * d]);
                    out += n;
                }
                out
            }
        };
        kernels::rms_norm_rows_f32(
            &ws.rows[..n_rows * d],
            &self.norm,
            c.norm_eps,
            &mut ws.h[..n_rows * d],
        );
        let head = self.lm_head.as_ref().unwrap_or(&self.embed);
        let v = c.vocab_size;
        ws.logit_rows = 0;
        head.forward(
            map,
            &ws.h[..n_rows * d],
            n_rows,
            &mut ws.logits[..n_rows * v],
            &mut ws.act,
        )?;
        ws.logit_rows = n_rows;
        if let Some(cap) = c.final_logit_softcap {
            for l in &mut ws.logits[..n_rows * v] {
                *l = cap * (*l / cap).tanh();
            }
        }
        Ok(())
    }
}

impl DecoderModel {
    /// The RoPE table of `layer` for a row rotated as part of a forward call of length `end`:
    /// the local one on Gemma 3's sliding layers; LongRoPE's long one when the call reaches
    /// beyond the pretrained context, as transformers picks per forward call by its last
    /// position. Without a [`KvCache::rope_floor`] the call is the chunk (so a prompt prefilled
    /// in chunks across that length caches its first keys with the short table, as
    /// transformers' own cached forward calls do); with one, the row at position `p` is in a
    /// call of length `max(p + 1, floor)`.
    fn rope_table(&self, layer: &Layer, end: usize) -> &RopeTable {
        if layer.local_rope {
            if let Some(t) = &self.rope_local {
                return t;
            }
        }
        match &self.rope_long {
            Some((t, from)) if end > *from => t,
            _ => &self.rope,
        }
    }

    /// Dynamic NTK RoPE: the rotation of every row of the pass, as transformers' cached forward
    /// calls rotate. transformers recomputes the frequencies of a whole call for its length
    /// `seq_len = last position + 1` when that exceeds the longest call so far (and
    /// `max_position_embeddings`); keys already cached keep theirs. So in a fresh model's cached
    /// `generate` the prompt's tokens are rotated for the prompt's length and each generated
    /// token for its own position + 1. Here a token at position `p` of a sequence with a
    /// [`KvCache::rope_floor`] `f` is rotated for `max(p + 1, f)` (sessions and the engine set
    /// `f` to the prompt's length, so prompt chunks and batches do not matter); without one, a
    /// chunk is one call, rotated for its end. Lengths up to the original take the plain table
    /// (`rope_len` 0); longer ones get their cos/sin rows here, once for all layers.
    fn dynamic_rope_rows(
        &self,
        chunks: &[SeqChunk],
        cache: &dyn KvCache,
        ws: &mut Workspace,
        factor: f64,
        original: usize,
    ) {
        let c = &self.config;
        let half = c.rope_dim / 2;
        // The length whose frequencies `ws.rope_inv` holds (0: none yet).
        let mut freqs_for = 0;
        let mut r = 0;
        for ch in chunks {
            let n = ch.tokens.len();
            let floor = cache.rope_floor(ch.seq);
            for pos in ch.pos0..ch.pos0 + n {
                let len = match floor {
                    Some(f) => (pos + 1).max(f),
                    None => ch.pos0 + n,
                };
                if len <= original {
                    ws.rope_len[r] = 0;
                } else {
                    if len != freqs_for {
                        let inv = &mut ws.rope_inv;
                        dynamic_ntk_inv_freq(c.rope_dim, c.rope_theta, factor, original, len, inv);
                        freqs_for = len;
                    }
                    ws.rope_len[r] = len;
                    kernels::rope_row(
                        &ws.rope_inv,
                        pos,
                        1.0,
                        &mut ws.rope_cos[r * half..(r + 1) * half],
                        &mut ws.rope_sin[r * half..(r + 1) * half],
                    );
                }
                r += 1;
            }
        }
    }

    /// Whether sequences of this model rotate by [`KvCache::rope_floor`] (dynamic NTK RoPE,
    /// LongRoPE), and the floor a sequence whose prompt has `prompt_len` tokens takes. Dynamic
    /// NTK: the prompt's length, at least the original one (below it every floor rotates
    /// alike). LongRoPE: the original length for a prompt within it (short factors, up to the
    /// crossing: see [`Self::rope_recompute_past`]), one more for a longer prompt (all long);
    /// only two floors, so prompts of any lengths on the same side share cached prefixes.
    pub fn rope_floor_for(&self, prompt_len: usize) -> Option<usize> {
        if let Some((_, original)) = self.rope_dynamic {
            return Some(prompt_len.max(original));
        }
        self.rope_long.as_ref().map(|&(_, original)| {
            if prompt_len > original {
                original + 1
            } else {
                original
            }
        })
    }

    /// LongRoPE: the length a sequence whose keys were rotated under `floor` may reach before
    /// the whole of it must be evaluated again under the floor of a longer prompt. transformers'
    /// Phi-3 `generate` (`prepare_inputs_for_generation`) drops its cache the first time the
    /// sequence grows past `original_max_position_embeddings` while the cache holds no more than
    /// that, and reads everything again with the long factors; sessions and the engine do the
    /// same, so every token's logits are those of one uncached call over its prefix. `None`:
    /// never (other RoPE, a sequence already on the long factors, or another architecture with
    /// LongRoPE: only Phi-3's `generate` drops its cache, others keep the short keys).
    pub fn rope_recompute_past(&self, floor: Option<usize>) -> Option<usize> {
        if self.config.architecture != Architecture::Phi3 {
            return None;
        }
        match (self.rope_long.as_ref(), floor) {
            (Some(&(_, original)), Some(f)) if f <= original => Some(original),
            _ => None,
        }
    }

    fn rope_style_for_this_pass(&self) -> RopeStyle {
        match (fault_on(Fault::FlippedRopePairing), self.rope_style) {
            (false, style) => style,
            (true, RopeStyle::HalfRotation) => RopeStyle::Interleaved,
            (true, RopeStyle::Interleaved) => RopeStyle::HalfRotation,
        }
    }
}

fn validate_config(c: &DecoderConfig) -> Result<()> {
    let bad = |what: &str, why: String| Err(invalid(format!("model config {what}"), why));
    if c.n_heads == 0 || c.n_kv_heads == 0 || c.n_heads % c.n_kv_heads != 0 {
        return bad(
            "heads",
            format!(
                "{} attention heads must be a positive multiple of {} kv heads",
                c.n_heads, c.n_kv_heads
            ),
        );
    }
    if c.head_dim == 0 || c.head_dim % 2 != 0 {
        return bad(
            "head_dim",
            format!("{} must be positive and even", c.head_dim),
        );
    }
    if c.rope_dim == 0 || c.rope_dim % 2 != 0 || c.rope_dim > c.head_dim {
        return bad(
            "rope_dim",
            format!(
                "{} must be positive, even and at most head_dim {}",
                c.rope_dim, c.head_dim
            ),
        );
    }
    if let Some(RopeScaling::LongRope {
        short_factor,
        long_factor,
        ..
    }) = &c.rope_scaling
    {
        if short_factor.len() != c.rope_dim / 2 || long_factor.len() != c.rope_dim / 2 {
            return bad(
                "rope_scaling",
                format!(
                    "longrope short_factor / long_factor have {} / {} entries, expected {}",
                    short_factor.len(),
                    long_factor.len(),
                    c.rope_dim / 2
                ),
            );
        }
    }
    if let Some(l) = &c.sliding_layers {
        if l.len() != c.n_layers {
            return bad(
                "sliding_layers",
                format!("{} entries for {} layers", l.len(), c.n_layers),
            );
        }
    }
    for (name, v) in [
        ("hidden_size", c.hidden_size),
        ("vocab_size", c.vocab_size),
        ("intermediate_size", c.intermediate_size),
        ("context_length", c.context_length),
        ("n_layers", c.n_layers),
    ] {
        if v == 0 {
            return bad(name, "is 0".into());
        }
    }
    // Sizes above this are not a real decoder; refusing them keeps every later product far from
    // overflow.
    if c.hidden_size > 1 << 16
        || c.vocab_size > 1 << 22
        || c.intermediate_size > 1 << 18
        || c.context_length > 1 << 22
    {
        return bad(
            "sizes",
            format!(
                "hidden {} / vocab {} / intermediate {} / context {} exceed the supported limits",
                c.hidden_size, c.vocab_size, c.intermediate_size, c.context_length
            ),
        );
    }
    Ok(())
}

/// The tensors a checkpoint of `config` must hold, in HF naming (for the safetensors coverage
/// check before any tensor is read).
pub(crate) fn expected_hf_tensors(config: &DecoderConfig) -> Vec<String> {
    expected_tensors(config, Naming::HuggingFace)
}

/// Attention of `q` over one layer's cached keys and values, dense or through a block table.
fn attend(view: &KvLayerView, q: &[f32], out: &mut [f32], p: AttentionParams) -> Result<()> {
    match *view {
        KvLayerView::Dense { keys, values, .. } => {
            kernels::attention_f32(q, keys, values, out, &mut [], p)
        }
        KvLayerView::Paged {
            keys,
            values,
            block_table,
            block_size,
            ..
        } => {
            let pp = paged_params(&p, block_size, keys.len());
            kernels::attention_paged(q, keys, values, block_table, out, pp)
        }
    }
    .map_err(|e| RuntimeError::Kernel(e.to_string()))
}

/// `p` for a paged pool of `block_size` blocks whose layer buffer holds `pool_len` floats.
fn paged_params(
    p: &AttentionParams,
    block_size: usize,
    pool_len: usize,
) -> kernels::PagedAttentionParams {
    kernels::PagedAttentionParams {
        n_q: p.n_q,
        n_heads: p.n_heads,
        n_kv_heads: p.n_kv_heads,
        head_dim: p.head_dim,
        kv_len: p.kv_len,
        q_pos0: p.q_pos0,
        scale: p.scale,
        sliding_window: p.sliding_window,
        softcap: p.softcap,
        block_size,
        n_blocks: pool_len / (p.n_kv_heads * block_size * p.head_dim).max(1),
    }
}

/// Attention of every chunk of a batch over its own sequence (`base` gives the shared heads and
/// options): in one parallel section when the sequences share one paged pool, else chunk by
/// chunk. The bits are those of [`attend`] per chunk either way.
fn attend_batch(
    cache: &dyn KvCache,
    li: usize,
    chunks: &[SeqChunk],
    q: &[f32],
    out: &mut [f32],
    base: AttentionParams,
) -> Result<()> {
    let row = base.n_heads * base.head_dim;
    let params = |ch: &SeqChunk, kv_capacity: Option<usize>| {
        let kv_len = ch.pos0 + ch.tokens.len();
        AttentionParams {
            n_q: ch.tokens.len(),
            kv_len,
            kv_capacity: kv_capacity.unwrap_or(kv_len),
            q_pos0: ch.pos0,
            ..base
        }
    };
    let mut seqs = Vec::with_capacity(chunks.len());
    let mut pool: Option<(kernels::KvData, kernels::KvData)> = None;
    let mut row0 = 0;
    for ch in chunks {
        let p = params(ch, None);
        let KvLayerView::Paged {
            keys,
            values,
            block_table,
            block_size,
            ..
        } = cache.layer(li, ch.seq, p.kv_len)?
        else {
            break;
        };
        if pool.is_some_and(|(k, v)| !k.same_buffer(&keys) || !v.same_buffer(&values)) {
            break;
        }
        pool = Some((keys, values));
        seqs.push(kernels::PagedSeq {
            row0,
            block_table,
            p: paged_params(&p, block_size, keys.len()),
        });
        row0 += ch.tokens.len();
    }
    if let (Some((keys, values)), true) = (pool, seqs.len() == chunks.len()) {
        return kernels::attention_paged_seqs(q, keys, values, &seqs, out)
            .map_err(|e| RuntimeError::Kernel(e.to_string()));
    }
    // A dense cache, or pools that differ: one call per chunk.
    let mut row0 = 0;
    for ch in chunks {
        let n = ch.tokens.len();
        let view = cache.layer(li, ch.seq, ch.pos0 + n)?;
        let capacity = match view {
            KvLayerView::Dense { capacity, .. } => Some(capacity),
            KvLayerView::Paged { .. } => None,
        };
        let rows = row0 * row..(row0 + n) * row;
        attend(
            &view,
            &q[rows.clone()],
            &mut out[rows],
            params(ch, capacity),
        )?;
        row0 += n;
    }
    Ok(())
}

/// `x += y`, or `x += rms_norm(y)` with Gemma's post-attention / post-MLP norm (`scratch`
/// holds the normed rows).
fn add_residual(x: &mut [f32], y: &[f32], norm: Option<&[f32]>, eps: f32, scratch: &mut [f32]) {
    match norm {
        None => kernels::add_inplace_f32(x, y),
        Some(w) => {
            kernels::rms_norm_rows_f32(y, w, eps, scratch);
            kernels::add_inplace_f32(x, scratch);
        }
    }
}

/// GeGLU: `up *= gelu_tanh(gate)`, torch's `gelu(approximate="tanh")`:
/// `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`. Each element alone (batch invariant).
fn gelu_tanh_mul_inplace(gate: &[f32], up: &mut [f32]) {
    const SQRT_2_OVER_PI: f32 = 0.797_884_6;
    const KAPPA: f32 = 0.044_715;
    for (&x, u) in gate.iter().zip(up.iter_mut()) {
        let inner = SQRT_2_OVER_PI * (x + KAPPA * x * x * x);
        *u *= 0.5 * x * (1.0 + inner.tanh());
    }
}

fn add_bias(x: &mut [f32], bias: Option<&[f32]>) {
    if let Some(b) = bias {
        for row in x.chunks_exact_mut(b.len()) {
            kernels::add_inplace_f32(row, b);
        }
    }
}

/// RMSNorm of every head vector (Qwen3's q/k norm).
fn norm_heads(x: &mut [f32], weight: &[f32], eps: f32) {
    for head in x.chunks_exact_mut(weight.len()) {
        kernels::rms_norm_inplace_f32(head, weight, eps);
    }
}
