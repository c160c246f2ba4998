//! Scaled dot-product attention against a KV cache, causal, with grouped-query heads,
//! optional sliding window and logit soft-capping. One pass per (query, head) with an online
//! (streaming) softmax over key blocks, so no score buffer of kv_len is needed; the query heads
//! of one GQA group run in one task so each K/V block is fetched once for all of them.

use super::cpu::{active_isa, Isa};
use super::simd::Simd;
use super::threads;
use super::KernelError;

/// Shapes and options of one attention call. Layouts:
/// - `q`, `out`: `[n_q][n_heads][head_dim]`, contiguous.
/// - `k_cache`, `v_cache`: `[n_kv_heads][kv_capacity][head_dim]`; cache slot == absolute
///   position; positions `0..kv_len` are valid.
///
/// Query `i` sits at position `q_pos0 + i` and attends keys `j` with `j <= q_pos0 + i` and,
/// with `sliding_window = Some(w)`, `j > q_pos0 + i - w`. Head `h` reads kv head
/// `h / (n_heads / n_kv_heads)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AttentionParams {
    /// Number of query tokens (1 for decode).
    pub n_q: usize,
    /// Query heads.
    pub n_heads: usize,
    /// Key/value heads (divides `n_heads`).
    pub n_kv_heads: usize,
    /// Dimension of one head.
    pub head_dim: usize,
    /// Valid cache positions (must cover the queries: `q_pos0 + n_q <= kv_len`).
    pub kv_len: usize,
    /// Positions allocated per kv head (the cache's row stride in positions).
    pub kv_capacity: usize,
    /// Position of the first query.
    pub q_pos0: usize,
    /// Multiplier of q·k (usually `1/sqrt(head_dim)`).
    pub scale: f32,
    /// Keys older than this many positions are masked (Mistral/Gemma2 local layers).
    pub sliding_window: Option<usize>,
    /// Gemma2 soft-capping: `s = cap * tanh(s / cap)` after scaling.
    pub softcap: Option<f32>,
}

/// Scratch length `attention_f32` needs for `p`: 0 — each task keeps its key-block scores on
/// the stack. The parameter is kept so the signature stays stable if that changes.
pub fn attention_scratch_len(_p: &AttentionParams) -> usize {
    0
}

/// Checks every length and parameter of an attention call; the error names the value.
fn validate(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    out: &[f32],
    p: &AttentionParams,
) -> Result<(), KernelError> {
    let bad = |msg: String| Err(KernelError::InvalidArgument(format!("attention: {msg}")));
    if p.n_heads == 0 || p.n_kv_heads == 0 || !p.n_heads.is_multiple_of(p.n_kv_heads) {
        return bad(format!(
            "n_heads {} must be a positive multiple of n_kv_heads {}",
            p.n_heads, p.n_kv_heads
        ));
    }
    if p.head_dim == 0 {
        return bad("head_dim is 0".into());
    }
    if p.kv_len > p.kv_capacity {
        return bad(format!(
            "kv_len {} > kv_capacity {}",
            p.kv_len, p.kv_capacity
        ));
    }
    if p.q_pos0.checked_add(p.n_q).is_none_or(|end| end > p.kv_len) {
        return bad(format!(
            "queries at {}..{}+{} need keys beyond kv_len {}",
            p.q_pos0, p.q_pos0, p.n_q, p.kv_len
        ));
    }
    if p.sliding_window == Some(0) {
        return bad("sliding_window is 0 (every key masked)".into());
    }
    if p.softcap.is_some_and(|c| !(c.is_finite() && c > 0.0)) {
        return bad(format!("softcap {:?} must be finite and > 0", p.softcap));
    }
    let q_len = p
        .n_q
        .checked_mul(p.n_heads)
        .and_then(|x| x.checked_mul(p.head_dim));
    let kv_size = p
        .n_kv_heads
        .checked_mul(p.kv_capacity)
        .and_then(|x| x.checked_mul(p.head_dim));
    let (Some(q_len), Some(kv_size)) = (q_len, kv_size) else {
        return bad("sizes overflow usize".into());
    };
    for (name, len, need) in [
        ("q", q.len(), q_len),
        ("out", out.len(), q_len),
        ("k_cache", k.len(), kv_size),
        ("v_cache", v.len(), kv_size),
    ] {
        if len < need {
            return bad(format!("{name} has {len} elements, needs {need}"));
        }
    }
    Ok(())
}

/// Attention for decode (`n_q == 1`) and prefill (`n_q > 1`); see [`AttentionParams`] for
/// layouts and masking. `scratch` may be empty ([`attention_scratch_len`]). Parallel over
/// (query, kv-head group) pairs on the kernel pool. Errors name the inconsistent parameter.
pub fn attention_f32(
    q: &[f32],
    k_cache: &[f32],
    v_cache: &[f32],
    out: &mut [f32],
    scratch: &mut [f32],
    p: AttentionParams,
) -> Result<(), KernelError> {
    attention_f32_with(active_isa(), q, k_cache, v_cache, out, scratch, p)
}

pub(crate) fn attention_f32_with(
    isa: Isa,
    q: &[f32],
    k_cache: &[f32],
    v_cache: &[f32],
    out: &mut [f32],
    _scratch: &mut [f32],
    p: AttentionParams,
) -> Result<(), KernelError> {
    validate(q, k_cache, v_cache, out, &p)?;
    let hd = p.head_dim;
    let out = &mut out[..p.n_q * p.n_heads * hd];
    let group = p.n_heads / p.n_kv_heads;
    // A task takes all query heads that share one kv head (they are adjacent in `out`), so
    // each K/V block is read from memory once and reused from L1 by the whole group.
    let heads_per_task = if group <= MAX_GROUP { group } else { 1 };
    let visible = p.kv_len.min(p.sliding_window.unwrap_or(usize::MAX));
    let work_per_task = 2 * hd * visible * heads_per_task;
    threads::for_each_chunk_mut(out, heads_per_task * hd, work_per_task, |idx, o| {
        let first = idx * heads_per_task; // index into [n_q][n_heads]
        let (i, h) = (first / p.n_heads, first % p.n_heads);
        let pos = p.q_pos0 + i;
        let keys_end = pos + 1;
        let keys_start = p.sliding_window.map_or(0, |w| keys_end.saturating_sub(w));
        let kv_base = (h / group) * p.kv_capacity * hd;
        let task = GroupTask {
            q: &q[first * hd..(first + heads_per_task) * hd],
            k: &k_cache[kv_base + keys_start * hd..kv_base + keys_end * hd],
            v: &v_cache[kv_base + keys_start * hd..kv_base + keys_end * hd],
            head_dim: hd,
            scale: p.scale,
            softcap: p.softcap,
        };
        #[allow(unreachable_patterns)]
        match super::cpu::supported_or_lower(isa) {
            // SAFETY: the level is supported; slices are bounds-checked above.
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => unsafe { group_avx512(task, o) },
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => unsafe { group_avx2(task, o) },
            _ => unsafe { group_attention::<super::simd::Scalar>(task, o) },
        }
    });
    Ok(())
}

/// Largest GQA group handled in one task (per-head softmax state lives on the stack).
const MAX_GROUP: usize = 16;

/// One query token and `q.len() / head_dim` adjacent heads sharing one kv head; `k`/`v`
/// hold exactly the visible keys.
struct GroupTask<'a> {
    q: &'a [f32],
    k: &'a [f32],
    v: &'a [f32],
    head_dim: usize,
    scale: f32,
    softcap: Option<f32>,
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")]
unsafe fn group_avx512(t: GroupTask<'_>, out: &mut [f32]) {
    unsafe { group_attention::<super::simd::Avx512>(t, out) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn group_avx2(t: GroupTask<'_>, out: &mut [f32]) {
    unsafe { group_attention::<super::simd::Avx2>(t, out) }
}

/// Keys per online-softmax block (scores live on the stack).
const KEY_BLOCK: usize = 64;

#[inline(always)]
unsafe fn group_attention<S: Simd>(t: GroupTask<'_>, out: &mut [f32]) {
    let hd = t.head_dim;
    let heads = out.len() / hd;
    let n_keys = t.k.len() / hd;
    out.fill(0.0);
    let mut running_max = [f32::NEG_INFINITY; MAX_GROUP];
    let mut denom = [0.0f32; MAX_GROUP];
    let mut scores = [0.0f32; KEY_BLOCK];
    let mut start = 0;
    while start < n_keys {
        let len = KEY_BLOCK.min(n_keys - start);
        let keys = &t.k[start * hd..(start + len) * hd];
        let values = &t.v[start * hd..(start + len) * hd];
        for h in 0..heads {
            let q = &t.q[h * hd..(h + 1) * hd];
            let acc = &mut out[h * hd..(h + 1) * hd];
            let block = &mut scores[..len];
            let mut block_max = f32::NEG_INFINITY;
            for (s, key) in block.iter_mut().zip(keys.chunks_exact(hd)) {
                let mut v = super::elementwise::dot_simd::<S>(q, key) * t.scale;
                if let Some(cap) = t.softcap {
                    v = cap * (v / cap).tanh();
                }
                *s = v;
                block_max = block_max.max(v);
            }
            if block_max > running_max[h] {
                // Rescale what was accumulated under the old max (exp(-inf) = 0 at first).
                let factor = (running_max[h] - block_max).exp();
                denom[h] *= factor;
                scale_simd::<S>(acc, factor);
                running_max[h] = block_max;
            }
            denom[h] += super::softmax::exp_shift_sum_simd::<S>(block, running_max[h]);
            for (&w, value) in block.iter().zip(values.chunks_exact(hd)) {
                axpy_simd::<S>(acc, w, value);
            }
        }
        start += len;
    }
    for h in 0..heads {
        scale_simd::<S>(&mut out[h * hd..(h + 1) * hd], 1.0 / denom[h]);
    }
}

/// `y *= a`.
#[inline(always)]
unsafe fn scale_simd<S: Simd>(y: &mut [f32], a: f32) {
    let n = y.len();
    let p = y.as_mut_ptr();
    let va = S::splat(a);
    let mut i = 0;
    while i + S::W <= n {
        S::store(p.add(i), S::mul(S::load(p.add(i)), va));
        i += S::W;
    }
    while i < n {
        *p.add(i) *= a;
        i += 1;
    }
}

/// `y += a * x` (x at least y's length).
#[inline(always)]
unsafe fn axpy_simd<S: Simd>(y: &mut [f32], a: f32, x: &[f32]) {
    let n = y.len();
    let (py, px) = (y.as_mut_ptr(), x.as_ptr());
    let va = S::splat(a);
    let mut i = 0;
    while i + S::W <= n {
        S::store(
            py.add(i),
            S::fma(va, S::load(px.add(i)), S::load(py.add(i))),
        );
        i += S::W;
    }
    while i < n {
        *py.add(i) += a * *px.add(i);
        i += 1;
    }
}
