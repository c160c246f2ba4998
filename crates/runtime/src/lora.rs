//! LoRA adapters applied next to the base weights, never merged into them.
//!
//! An adapter adds `y += s * B (A x)` to a projection, with `s = alpha / r` (`alpha / sqrt(r)`
//! with rsLoRA) times the caller's scale. Two file formats:
//!
//! - PEFT: a directory with `adapter_config.json` and `adapter_model.safetensors` (tensor names
//!   `base_model.model.model.layers.N.self_attn.q_proj.lora_A.weight`, A `[r, in]`, B `[out, r]`).
//! - GGUF (llama.cpp's `convert_lora_to_gguf.py`): `general.type = adapter`,
//!   `adapter.type = lora`, `adapter.lora.alpha`, tensors `blk.N.attn_q.weight.lora_a` (ggml dims
//!   `[in, r]`) and `.lora_b` (`[r, out]`), q/k rows of llama-like models permuted for
//!   interleaved RoPE as the converter permutes the base weights.
//!
//! An adapter is loaded for one model: every tensor's shape is checked against it and the q/k
//! rows of B are put in the row order that model runs (GGUF llama files keep them permuted), so
//! nothing is converted per token. The base model is not touched: adapters live in their own
//! `Arc`, a session (or one call) chooses a list of `(adapter, scale)` and the forward pass adds
//! each active adapter's low-rank term after the base matmul.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use torchnative_core::kernels;
use torchnative_formats::gguf::GgufFile;
use torchnative_formats::safetensors::{Dtype, SafetensorsFile};

use crate::error::{invalid, Result};
use crate::model::DecoderModel;

/// The projections an adapter may target, in PEFT's names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoraModule {
    Q,
    K,
    V,
    O,
    Gate,
    Up,
    Down,
}

impl LoraModule {
    pub const ALL: [LoraModule; 7] = [
        LoraModule::Q,
        LoraModule::K,
        LoraModule::V,
        LoraModule::O,
        LoraModule::Gate,
        LoraModule::Up,
        LoraModule::Down,
    ];

    /// PEFT / transformers module name (`q_proj`).
    pub fn peft_name(self) -> &'static str {
        match self {
            LoraModule::Q => "q_proj",
            LoraModule::K => "k_proj",
            LoraModule::V => "v_proj",
            LoraModule::O => "o_proj",
            LoraModule::Gate => "gate_proj",
            LoraModule::Up => "up_proj",
            LoraModule::Down => "down_proj",
        }
    }

    fn peft_path(self) -> &'static str {
        match self {
            LoraModule::Q | LoraModule::K | LoraModule::V | LoraModule::O => "self_attn",
            _ => "mlp",
        }
    }

    /// llama.cpp's tensor name (`attn_q`).
    fn gguf_name(self) -> &'static str {
        match self {
            LoraModule::Q => "attn_q",
            LoraModule::K => "attn_k",
            LoraModule::V => "attn_v",
            LoraModule::O => "attn_output",
            LoraModule::Gate => "ffn_gate",
            LoraModule::Up => "ffn_up",
            LoraModule::Down => "ffn_down",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// One projection's low-rank pair.
pub(crate) struct LoraPair {
    rank: usize,
    n_in: usize,
    n_out: usize,
    /// `[rank][n_in]`.
    a: Vec<f32>,
    /// B transposed, `[rank][n_out]`, outputs in the order the model runs.
    bt: Vec<f32>,
    /// `alpha / r` (or `alpha / sqrt(r)`).
    scale: f32,
}

/// The model an adapter was checked against (sizes and q/k row order).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct ModelShape {
    n_layers: usize,
    hidden: usize,
    n_q: usize,
    n_kv: usize,
    ff: usize,
    qk_interleaved: bool,
}

impl ModelShape {
    fn of(model: &DecoderModel) -> ModelShape {
        let c = model.config();
        ModelShape {
            n_layers: c.n_layers,
            hidden: c.hidden_size,
            n_q: c.n_heads * c.head_dim,
            n_kv: c.n_kv_heads * c.head_dim,
            ff: c.intermediate_size,
            qk_interleaved: model.qk_rows_interleaved(),
        }
    }

    /// `(out, in)` of a projection.
    fn dims(&self, m: LoraModule) -> (usize, usize) {
        match m {
            LoraModule::Q => (self.n_q, self.hidden),
            LoraModule::K | LoraModule::V => (self.n_kv, self.hidden),
            LoraModule::O => (self.hidden, self.n_q),
            LoraModule::Gate | LoraModule::Up => (self.ff, self.hidden),
            LoraModule::Down => (self.hidden, self.ff),
        }
    }
}

struct LoraInner {
    /// Unique among the adapters this process loaded (prefix-cache keys name adapters by it).
    id: u64,
    source: PathBuf,
    shape: ModelShape,
    /// `[layer][module]`.
    layers: Vec<[Option<LoraPair>; 7]>,
    max_rank: usize,
}

/// A loaded LoRA adapter (cheap to clone, shared between sessions and threads).
#[derive(Clone)]
pub struct LoraAdapter {
    inner: Arc<LoraInner>,
}

impl std::fmt::Debug for LoraAdapter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LoraAdapter({})", self.inner.source.display())
    }
}

/// Two handles are equal when they are the same loaded adapter.
impl PartialEq for LoraAdapter {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

/// An adapter chosen for a session or a call, with the caller's scale (1.0: as trained).
#[derive(Clone, Debug, PartialEq)]
pub struct ActiveLora {
    pub adapter: LoraAdapter,
    pub scale: f32,
}

impl ActiveLora {
    pub fn new(adapter: LoraAdapter, scale: f32) -> ActiveLora {
        ActiveLora { adapter, scale }
    }
}

impl LoraAdapter {
    /// Load a PEFT adapter directory (or its `adapter_config.json`) or a GGUF LoRA file for
    /// `model`; every tensor is checked against the model before anything is converted.
    pub fn load(path: &Path, model: &DecoderModel) -> Result<LoraAdapter> {
        let shape = ModelShape::of(model);
        let is_gguf = path.extension().is_some_and(|e| e == "gguf");
        let (layers, source) = if is_gguf {
            (load_gguf(path, model, &shape)?, path.to_path_buf())
        } else {
            let dir = if path.file_name().is_some_and(|n| n == "adapter_config.json") {
                path.parent().unwrap_or(Path::new(".")).to_path_buf()
            } else {
                path.to_path_buf()
            };
            (load_peft(&dir, model, &shape)?, dir)
        };
        let max_rank = layers
            .iter()
            .flat_map(|l| l.iter().flatten())
            .map(|p| p.rank)
            .max()
            .unwrap_or(0);
        if max_rank == 0 {
            return Err(invalid(
                format!("LoRA adapter {}", source.display()),
                "holds no lora_A / lora_B pairs",
            ));
        }
        static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        Ok(LoraAdapter {
            inner: Arc::new(LoraInner {
                id: NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
                source,
                shape,
                layers,
                max_rank,
            }),
        })
    }

    pub fn source(&self) -> &Path {
        &self.inner.source
    }

    /// Largest rank of any of its pairs.
    pub fn max_rank(&self) -> usize {
        self.inner.max_rank
    }

    /// `(layer, module, rank)` of every pair (for `info` and tests).
    pub fn modules(&self) -> Vec<(usize, LoraModule, usize)> {
        let mut out = Vec::new();
        for (li, l) in self.inner.layers.iter().enumerate() {
            for m in LoraModule::ALL {
                if let Some(p) = &l[m.index()] {
                    out.push((li, m, p.rank));
                }
            }
        }
        out
    }

    /// Whether this adapter was loaded for a model of `model`'s shape and row order.
    pub fn check_model(&self, model: &DecoderModel) -> Result<()> {
        if self.inner.shape != ModelShape::of(model) {
            return Err(invalid(
                format!("LoRA adapter {}", self.inner.source.display()),
                "was loaded for a model of another shape or q/k row order; load it for this one",
            ));
        }
        Ok(())
    }
}

/// Check a list of active adapters for `model` (shape, finite scales).
pub(crate) fn check_active(active: &[ActiveLora], model: &DecoderModel) -> Result<()> {
    for a in active {
        a.adapter.check_model(model)?;
        if !a.scale.is_finite() {
            return Err(invalid(
                format!("LoRA adapter {} scale", a.adapter.source().display()),
                format!("{} is not finite", a.scale),
            ));
        }
    }
    Ok(())
}

/// Which adapters a forward pass adds to which of its rows: one list for every row (a session
/// or a call), or each chunk's own list for that chunk's rows (the batching engine: each
/// sequence runs with its request's adapters).
pub(crate) enum LoraRows<'a> {
    None,
    All(&'a [ActiveLora]),
    /// One list per chunk, rows in chunk order (`lens`: each chunk's token count).
    PerChunk {
        lists: &'a [Vec<ActiveLora>],
        lens: &'a [usize],
    },
}

impl LoraRows<'_> {
    /// [`apply`] for `module` of `layer` on `m` rows (`x`: `[m][in]`, `y`: `[m][out]`), each row
    /// with its own list. Every row is computed alone, so the split cannot change its bits.
    pub(crate) fn apply(
        &self,
        layer: usize,
        module: LoraModule,
        x: &[f32],
        m: usize,
        y: &mut [f32],
        tmp: &mut [f32],
    ) {
        match *self {
            LoraRows::None => {}
            LoraRows::All(list) => apply(list, layer, module, x, m, y, tmp),
            LoraRows::PerChunk { lists, lens } => {
                let (n_in, n_out) = (x.len() / m.max(1), y.len() / m.max(1));
                let mut row = 0;
                for (list, &n) in lists.iter().zip(lens) {
                    let (xs, ys) = (
                        &x[row * n_in..(row + n) * n_in],
                        &mut y[row * n_out..(row + n) * n_out],
                    );
                    apply(list, layer, module, xs, n, ys, tmp);
                    row += n;
                }
            }
        }
    }
}

/// What a list of active adapters does to the keys and values a sequence caches, as a number
/// for prefix-cache keys: 0 when they change nothing (no adapter, or every scale 0), else a
/// hash of each adapter's identity and scale in order. Equal lists give equal salts; the
/// paged cache verifies tokens and parents, and a salt collision would need equal 64-bit hashes
/// of different lists.
pub(crate) fn prefix_salt(active: &[ActiveLora]) -> u64 {
    let mut h: u64 = 0;
    for a in active.iter().filter(|a| a.scale != 0.0) {
        for word in [a.adapter.inner.id, a.scale.to_bits() as u64] {
            h = (h ^ word).wrapping_mul(0x0000_0100_0000_01b3);
            h ^= h >> 29;
        }
        // Never 0 once an adapter counts.
        h |= 1;
    }
    h
}

/// Scratch floats [`apply`] needs with these adapters (one row's `A x` at a time).
pub(crate) fn scratch_len(active: &[ActiveLora]) -> usize {
    active
        .iter()
        .map(|a| a.adapter.max_rank())
        .max()
        .unwrap_or(0)
}

/// `y[m][out] += scale * B (A x[m])` for every active adapter that targets `module` of `layer`
/// (in list order, each row alone: batch invariant). `tmp` holds at least [`scratch_len`]
/// floats. An adapter with scale 0 is skipped, so it leaves the base's bits.
pub(crate) fn apply(
    active: &[ActiveLora],
    layer: usize,
    module: LoraModule,
    x: &[f32],
    rows: usize,
    y: &mut [f32],
    tmp: &mut [f32],
) {
    for act in active {
        if act.scale == 0.0 {
            continue;
        }
        let Some(p) = act
            .adapter
            .inner
            .layers
            .get(layer)
            .and_then(|l| l[module.index()].as_ref())
        else {
            continue;
        };
        let s = p.scale * act.scale;
        let (r, n_in, n_out) = (p.rank, p.n_in, p.n_out);
        for row in 0..rows {
            let xr = &x[row * n_in..(row + 1) * n_in];
            let t = &mut tmp[..r];
            for (j, tj) in t.iter_mut().enumerate() {
                *tj = kernels::dot_f32(&p.a[j * n_in..(j + 1) * n_in], xr);
            }
            // y += (s t_k) B[:, k] for k in order: contiguous rows of B^T, vectorized.
            let yr = &mut y[row * n_out..(row + 1) * n_out];
            for (k, &tk) in t.iter().enumerate() {
                let c = s * tk;
                let col = &p.bt[k * n_out..(k + 1) * n_out];
                for (yo, &b) in yr.iter_mut().zip(col) {
                    *yo += c * b;
                }
            }
        }
    }
}

fn named(source: &Path, why: impl Into<String>) -> crate::error::RuntimeError {
    invalid(format!("LoRA adapter {}", source.display()), why)
}

/// llama.cpp's row permutation of q/k projections for interleaved RoPE, for a `[rows][cols]`
/// matrix of `n_head` heads: GGUF row `h*hd + 2t + s` is HF row `h*hd + s*hd/2 + t`.
fn permute_rows(w: &[f32], rows: usize, cols: usize, n_head: usize, to_gguf: bool) -> Vec<f32> {
    let hd = rows / n_head;
    let mut out = vec![0.0; w.len()];
    for h in 0..n_head {
        for s in 0..2 {
            for t in 0..hd / 2 {
                let hf = h * hd + s * (hd / 2) + t;
                let gg = h * hd + 2 * t + s;
                let (from, to) = if to_gguf { (hf, gg) } else { (gg, hf) };
                out[to * cols..(to + 1) * cols].copy_from_slice(&w[from * cols..(from + 1) * cols]);
            }
        }
    }
    out
}

/// B's rows in the model's order: `b_is_gguf_order` says how the file holds them.
fn order_b(
    b: Vec<f32>,
    module: LoraModule,
    rank: usize,
    shape: &ModelShape,
    model: &DecoderModel,
    b_is_gguf_order: bool,
) -> Vec<f32> {
    let n_head = match module {
        LoraModule::Q => model.config().n_heads,
        LoraModule::K => model.config().n_kv_heads,
        _ => return b,
    };
    let rows = b.len() / rank.max(1);
    match (b_is_gguf_order, shape.qk_interleaved) {
        (false, true) => permute_rows(&b, rows, rank, n_head, true),
        (true, false) => permute_rows(&b, rows, rank, n_head, false),
        _ => b,
    }
}

/// Check a pair's shapes against the model: A `[r][in]`, B `[out][r]`.
fn check_pair(
    source: &Path,
    what: &str,
    module: LoraModule,
    shape: &ModelShape,
    a_shape: (usize, usize),
    b_shape: (usize, usize),
) -> Result<usize> {
    let (out, inp) = shape.dims(module);
    let r = a_shape.0;
    if r == 0 || a_shape.1 != inp || b_shape != (out, r) {
        return Err(named(
            source,
            format!(
                "{what}: lora_A is {:?} and lora_B {:?}, expected [r, {inp}] and [{out}, r] \
                 (rank r > 0 the same in both) for {}",
                [a_shape.0, a_shape.1],
                [b_shape.0, b_shape.1],
                module.peft_name()
            ),
        ));
    }
    Ok(r)
}

fn load_peft(
    dir: &Path,
    model: &DecoderModel,
    shape: &ModelShape,
) -> Result<Vec<[Option<LoraPair>; 7]>> {
    let cfg_path = dir.join("adapter_config.json");
    let text = std::fs::read_to_string(&cfg_path)
        .map_err(|e| named(&cfg_path, format!("cannot read: {e}")))?;
    let cfg: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| named(&cfg_path, format!("is not JSON: {e}")))?;
    let bad = |why: String| Err(named(&cfg_path, why));
    let get = |k: &str| cfg.get(k).filter(|v| !v.is_null());
    if let Some(t) = get("peft_type").and_then(|v| v.as_str()) {
        if t != "LORA" {
            return bad(format!("peft_type {t} is not supported (only LORA)"));
        }
    }
    let Some(r) = get("r").and_then(|v| v.as_u64()).filter(|&r| r > 0) else {
        return bad("has no positive integer \"r\"".into());
    };
    let alpha = match get("lora_alpha") {
        None => 8.0,
        Some(v) => match v.as_f64() {
            Some(a) => a,
            None => return bad(format!("lora_alpha {v} is not a number")),
        },
    };
    let rslora = get("use_rslora").and_then(|v| v.as_bool()).unwrap_or(false);
    for (key, what) in [
        ("fan_in_fan_out", "fan_in_fan_out (Conv1D-style weights)"),
        ("use_dora", "use_dora (DoRA)"),
        ("lora_bias", "lora_bias"),
        ("use_qalora", "use_qalora"),
    ] {
        if get(key).and_then(|v| v.as_bool()).unwrap_or(false) {
            return bad(format!("{what} is not supported"));
        }
    }
    if let Some(b) = get("bias").and_then(|v| v.as_str()) {
        if b != "none" {
            return bad(format!("bias \"{b}\" is not supported (only \"none\")"));
        }
    }
    for key in [
        "modules_to_save",
        "layer_replication",
        "trainable_token_indices",
        "target_parameters",
    ] {
        if let Some(v) = get(key) {
            let empty = v.as_array().is_some_and(|a| a.is_empty())
                || v.as_object().is_some_and(|o| o.is_empty());
            if !empty {
                return bad(format!("{key} {v} is not supported"));
            }
        }
    }
    for key in ["rank_pattern", "alpha_pattern"] {
        if let Some(v) = get(key) {
            if !v.as_object().is_some_and(|o| o.is_empty()) {
                return bad(format!(
                    "{key} {v} is not supported (one r and alpha for all)"
                ));
            }
        }
    }
    if let Some(list) = get("target_modules").and_then(|v| v.as_array()) {
        for t in list {
            let name = t.as_str().unwrap_or_default();
            if !LoraModule::ALL.iter().any(|m| m.peft_name() == name) {
                return bad(format!(
                    "target module {t} is not supported (q_proj, k_proj, v_proj, o_proj, \
                     gate_proj, up_proj, down_proj)"
                ));
            }
        }
    }
    let scale = if rslora {
        alpha / (r as f64).sqrt()
    } else {
        alpha / r as f64
    } as f32;

    let st_path = dir.join("adapter_model.safetensors");
    if !st_path.is_file() && dir.join("adapter_model.bin").is_file() {
        return Err(named(
            dir,
            "adapter_model.bin (pickle) is not read; save the adapter as safetensors",
        ));
    }
    let file = SafetensorsFile::open(&st_path).map_err(|e| named(&st_path, e.to_string()))?;
    let prefix = "base_model.model.";
    // Pass 1: every name understood and every shape right, before converting anything.
    let mut found: Vec<(usize, LoraModule)> = Vec::new();
    for e in file.entries() {
        let parsed = e
            .name
            .strip_prefix(prefix)
            .and_then(|n| n.strip_prefix("model.layers."))
            .and_then(|n| {
                let (idx, rest) = n.split_once('.')?;
                let li: usize = idx.parse().ok()?;
                let m = LoraModule::ALL.into_iter().find(|m| {
                    rest == format!("{}.{}.lora_A.weight", m.peft_path(), m.peft_name())
                        || rest == format!("{}.{}.lora_B.weight", m.peft_path(), m.peft_name())
                })?;
                Some((li, m))
            });
        let Some((li, m)) = parsed else {
            return Err(named(
                &st_path,
                format!(
                    "tensor {} is not a lora_A / lora_B weight of a supported projection",
                    e.name
                ),
            ));
        };
        if li >= shape.n_layers {
            return Err(named(
                &st_path,
                format!(
                    "tensor {} names layer {li} of a model with {}",
                    e.name, shape.n_layers
                ),
            ));
        }
        if !found.contains(&(li, m)) {
            found.push((li, m));
        }
    }
    let mut pairs = Vec::new();
    for &(li, m) in &found {
        let base = format!(
            "{prefix}model.layers.{li}.{}.{}",
            m.peft_path(),
            m.peft_name()
        );
        let (an, bn) = (
            format!("{base}.lora_A.weight"),
            format!("{base}.lora_B.weight"),
        );
        let (Some(a), Some(b)) = (file.tensor(&an), file.tensor(&bn)) else {
            return Err(named(
                &st_path,
                format!("{base}: lora_A and lora_B must both be present"),
            ));
        };
        let dims = |s: &[usize], n: &str| -> Result<(usize, usize)> {
            match s {
                [x, y] => Ok((*x, *y)),
                _ => Err(named(&st_path, format!("{n} has shape {s:?}, not 2-d"))),
            }
        };
        let rank = check_pair(
            &st_path,
            &base,
            m,
            shape,
            dims(a.shape, &an)?,
            dims(b.shape, &bn)?,
        )?;
        if rank as u64 != r {
            return Err(named(
                &st_path,
                format!("{base} has rank {rank} but adapter_config.json says r = {r}"),
            ));
        }
        for (n, t) in [(&an, &a), (&bn, &b)] {
            if !matches!(t.dtype, Dtype::F32 | Dtype::F16 | Dtype::BF16) {
                return Err(named(
                    &st_path,
                    format!("{n} is {}, not F32/F16/BF16", t.dtype.name()),
                ));
            }
        }
        pairs.push((li, m, rank, an, bn));
    }
    let mut layers: Vec<[Option<LoraPair>; 7]> =
        (0..shape.n_layers).map(|_| Default::default()).collect();
    for (li, m, rank, an, bn) in pairs {
        let to_f32 = |n: &str| {
            let t = file.tensor(n).expect("checked above");
            floats(t.dtype, t.data)
        };
        let (out, inp) = shape.dims(m);
        layers[li][m.index()] = Some(LoraPair {
            rank,
            n_in: inp,
            n_out: out,
            a: to_f32(&an),
            bt: transpose(
                &order_b(to_f32(&bn), m, rank, shape, model, false),
                out,
                rank,
            ),
            scale,
        });
    }
    Ok(layers)
}

/// `[rows][cols]` to `[cols][rows]`.
fn transpose(w: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let mut out = vec![0.0; w.len()];
    for r in 0..rows {
        for c in 0..cols {
            out[c * rows + r] = w[r * cols + c];
        }
    }
    out
}

fn floats(dtype: Dtype, data: &[u8]) -> Vec<f32> {
    match dtype {
        Dtype::F32 => data
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect(),
        Dtype::F16 => data
            .chunks_exact(2)
            .map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32())
            .collect(),
        _ => data
            .chunks_exact(2)
            .map(|b| half::bf16::from_le_bytes([b[0], b[1]]).to_f32())
            .collect(),
    }
}

fn load_gguf(
    path: &Path,
    model: &DecoderModel,
    shape: &ModelShape,
) -> Result<Vec<[Option<LoraPair>; 7]>> {
    let file = GgufFile::open(path).map_err(|e| named(path, e.to_string()))?;
    let s = |k: &str| file.get(k).and_then(|v| v.as_str());
    if s("general.type") != Some("adapter") {
        return Err(named(
            path,
            format!(
                "general.type is {:?}, not \"adapter\" (is this a model file?)",
                s("general.type")
            ),
        ));
    }
    if s("adapter.type") != Some("lora") {
        return Err(named(
            path,
            format!(
                "adapter.type is {:?}, only \"lora\" is supported",
                s("adapter.type")
            ),
        ));
    }
    let alpha = file
        .get("adapter.lora.alpha")
        .and_then(|v| v.as_f32())
        .unwrap_or(0.0);
    let arch = s("general.architecture").unwrap_or("");
    let permuted_in_file = matches!(arch, "llama" | "mistral");
    let mut found: Vec<(usize, LoraModule)> = Vec::new();
    for t in file.tensors() {
        let parsed = t.name.strip_prefix("blk.").and_then(|n| {
            let (idx, rest) = n.split_once('.')?;
            let li: usize = idx.parse().ok()?;
            let m = LoraModule::ALL.into_iter().find(|m| {
                rest == format!("{}.weight.lora_a", m.gguf_name())
                    || rest == format!("{}.weight.lora_b", m.gguf_name())
            })?;
            Some((li, m))
        });
        let Some((li, m)) = parsed else {
            return Err(named(
                path,
                format!(
                    "tensor {} is not a lora_a / lora_b of a supported projection",
                    t.name
                ),
            ));
        };
        if li >= shape.n_layers {
            return Err(named(
                path,
                format!(
                    "tensor {} names layer {li} of a model with {}",
                    t.name, shape.n_layers
                ),
            ));
        }
        if !found.contains(&(li, m)) {
            found.push((li, m));
        }
    }
    let mut checked = Vec::new();
    for &(li, m) in &found {
        let base = format!("blk.{li}.{}.weight", m.gguf_name());
        let (an, bn) = (format!("{base}.lora_a"), format!("{base}.lora_b"));
        let (Some(a), Some(b)) = (file.tensor(&an), file.tensor(&bn)) else {
            return Err(named(
                path,
                format!("{base}: lora_a and lora_b must both be present"),
            ));
        };
        // ggml dims are innermost first: lora_a [in, r] is [r][in] row-major.
        let dims = |d: &[u64], n: &str| -> Result<(usize, usize)> {
            match d {
                [inner, outer] => Ok((*outer as usize, *inner as usize)),
                _ => Err(named(path, format!("{n} has dims {d:?}, not 2-d"))),
            }
        };
        let rank = check_pair(
            path,
            &base,
            m,
            shape,
            dims(&a.dims, &an)?,
            dims(&b.dims, &bn)?,
        )?;
        checked.push((li, m, rank, a.clone(), b.clone()));
    }
    let mut layers: Vec<[Option<LoraPair>; 7]> =
        (0..shape.n_layers).map(|_| Default::default()).collect();
    for (li, m, rank, a, b) in checked {
        let deq = |t: &torchnative_formats::gguf::TensorInfo| -> Result<Vec<f32>> {
            let mut out = vec![0.0; t.n_elements() as usize];
            torchnative_quant::dequantize(t.ggml_type, file.tensor_data(t), &mut out)
                .map_err(|e| named(path, format!("{}: {e}", t.name)))?;
            Ok(out)
        };
        let (out, inp) = shape.dims(m);
        // llama.cpp: alpha 0 means no alpha scaling.
        let scale = if alpha == 0.0 {
            1.0
        } else {
            alpha / rank as f32
        };
        layers[li][m.index()] = Some(LoraPair {
            rank,
            n_in: inp,
            n_out: out,
            a: deq(&a)?,
            bt: transpose(
                &order_b(deq(&b)?, m, rank, shape, model, permuted_in_file),
                out,
                rank,
            ),
            scale,
        });
    }
    Ok(layers)
}
