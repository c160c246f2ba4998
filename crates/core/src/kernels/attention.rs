//! Scaled dot-product attention against a KV cache, causal, with grouped-query heads,
//! optional sliding window and logit soft-capping. One pass per (query, head) with an online
//! (streaming) softmax over key blocks aligned to absolute positions, so no score buffer of
//! kv_len is needed; the query heads of one GQA group run in one task so each K/V block is
//! fetched once for all of them. Every path computes one canonical order per (query, head)
//! (see [`attention_f32`]), so a row's bits do not depend on the batch it rides in, nor on
//! whether the cache is one buffer per kv head or a pool of blocks read through a block
//! table ([`attention_paged_f32`]): the kernels address a 64-key block through [`BlockRows`],
//! built from either layout.

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

/// One layer's keys or values as the cache stores them: f32, or f16 (half the bytes to read;
/// llama.cpp's default cache type). The kernels widen f16 rows to f32 (exactly: every f16 is
/// an f32), a key block at a time into a buffer or, in decode's keys-in-lanes path, in their
/// loads, and run the f32 code on them, so an f16 cache gives the bits an f32 cache holding
/// the same (rounded) values gives.
#[derive(Debug, Clone, Copy)]
pub enum KvData<'a> {
    /// Stored as f32.
    F32(&'a [f32]),
    /// Stored as f16 (rounded to nearest even when written).
    F16(&'a [half::f16]),
}

impl KvData<'_> {
    /// Elements held.
    pub fn len(&self) -> usize {
        match self {
            KvData::F32(s) => s.len(),
            KvData::F16(s) => s.len(),
        }
    }

    /// Whether it holds no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether both are the same buffer.
    pub fn same_buffer(&self, other: &KvData<'_>) -> bool {
        match (self, other) {
            (KvData::F32(a), KvData::F32(b)) => std::ptr::eq(*a, *b),
            (KvData::F16(a), KvData::F16(b)) => std::ptr::eq(*a, *b),
            _ => false,
        }
    }
}

/// Scratch length `attention_f32` needs for `p`: 0 — each task keeps its key-block scores on
/// the stack. The parameter is kept so the signature stays stable if that changes.
pub fn attention_scratch_len(_p: &AttentionParams) -> usize {
    0
}

/// Checks every length and parameter of an attention call; the error names the value.
fn validate(
    q: &[f32],
    k: KvData<'_>,
    v: KvData<'_>,
    out: &[f32],
    p: &AttentionParams,
) -> Result<(), KernelError> {
    let op = "attention";
    validate_common(op, q, out, p, Some(p.kv_capacity))?;
    let Some(kv_size) = p
        .n_kv_heads
        .checked_mul(p.kv_capacity)
        .and_then(|x| x.checked_mul(p.head_dim))
    else {
        return invalid(op, "sizes overflow usize".into());
    };
    for (name, len) in [("k_cache", k.len()), ("v_cache", v.len())] {
        if len < kv_size {
            return invalid(op, format!("{name} has {len} elements, needs {kv_size}"));
        }
    }
    Ok(())
}

/// `Err(InvalidArgument("{op}: {msg}"))`.
fn invalid(op: &str, msg: String) -> Result<(), KernelError> {
    Err(KernelError::InvalidArgument(format!("{op}: {msg}")))
}

/// The checks both layouts share: heads, masking options, `q`/`out` lengths, and
/// `kv_len <= kv_capacity` when a capacity is given.
fn validate_common(
    op: &str,
    q: &[f32],
    out: &[f32],
    p: &AttentionParams,
    kv_capacity: Option<usize>,
) -> Result<(), KernelError> {
    let bad = |msg: String| invalid(op, msg);
    if p.n_heads == 0 || p.n_kv_heads == 0 || !p.n_heads.is_multiple_of(p.n_kv_heads) {
        return bad(format!(
            "n_heads {} must be a positive multiple of n_kv_heads {}",
            p.n_heads, p.n_kv_heads
        ));
    }
    if p.head_dim == 0 {
        return bad("head_dim is 0".into());
    }
    if let Some(cap) = kv_capacity.filter(|&cap| p.kv_len > cap) {
        return bad(format!("kv_len {} > kv_capacity {cap}", p.kv_len));
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
    let Some(q_len) = p
        .n_q
        .checked_mul(p.n_heads)
        .and_then(|x| x.checked_mul(p.head_dim))
    else {
        return bad("sizes overflow usize".into());
    };
    for (name, len) in [("q", q.len()), ("out", out.len())] {
        if len < q_len {
            return bad(format!("{name} has {len} elements, needs {q_len}"));
        }
    }
    Ok(())
}

/// Attention for decode (`n_q == 1`) and prefill (`n_q > 1`); see [`AttentionParams`] for
/// layouts and masking. `scratch` may be empty ([`attention_scratch_len`]). Parallel over
/// (query, kv-head group) pairs on the kernel pool. Errors name the inconsistent parameter.
///
/// **Batch invariance.** On a given ISA level, the output row of (query at position `pos`,
/// head `h`) is bit-identical whatever `n_q`, `q_pos0` (how a prompt was chunked), `kv_len`
/// beyond `pos`, `kv_capacity` and thread count, because every path computes this order
/// (visible keys `ks..=pos`, `ks = pos + 1 - window` or 0; `B` = `KEY_BLOCK` = 64):
/// 1. Keys go in blocks aligned to absolute positions, `[b*B, (b+1)*B) ∩ [ks, pos]`, in
///    increasing order (with a window the first block is partial).
///    [`attention_paged_f32`] reads each such block as the 16/32/64-position blocks of a paged
///    cache that tile it, through the same code, so its bits are these.
/// 2. Score `s_j`: `acc = 0; for d in 0..head_dim { acc = fma(q[d], k_j[d], acc) }`, then
///    `acc * scale` (then softcap `cap * tanh(s / cap)` if set).
/// 3. Per block: `M' = max(M, max_j s_j)` (M starts at -inf); `shift = M'` (0 while M' is
///    -inf); `f = exp(M - shift)`; `p_j = exp(s_j - shift)`; `sum = ((0 + p_0) + p_1) + ...`
///    in key order; `L = fma(L, f, sum)` (L starts at 0); per head dim d,
///    `a[d] = a[d] * f`, then `a[d] = fma(p_j, v_j[d], a[d])` in key order.
/// 4. `out[d] = a[d] * (1 / L)`.
///
/// `exp` is the level's `Simd::exp` (libm `expf` on the scalar level, whose `fma` is
/// unfused). The blocked path runs queries as lanes and masks the keys a lane must not see to
/// -inf, which adds exact zeros (the one difference: a running sum of exactly -0.0 in `a`, from
/// an underflowed rescale, can become +0.0). That path also reads the values of keys up to the
/// last query of its call, so a non-finite value there would reach earlier queries as NaN
/// (0 * inf); a cache the model wrote holds finite values.
pub fn attention_f32(
    q: &[f32],
    k_cache: &[f32],
    v_cache: &[f32],
    out: &mut [f32],
    scratch: &mut [f32],
    p: AttentionParams,
) -> Result<(), KernelError> {
    attention_with(
        active_isa(),
        q,
        KvData::F32(k_cache),
        KvData::F32(v_cache),
        out,
        scratch,
        p,
    )
}

/// [`attention_f32`] over a cache stored as [`KvData`] (f32 or f16): the bits of
/// `attention_f32` on the widened keys and values.
pub fn attention(
    q: &[f32],
    k_cache: KvData<'_>,
    v_cache: KvData<'_>,
    out: &mut [f32],
    scratch: &mut [f32],
    p: AttentionParams,
) -> Result<(), KernelError> {
    attention_with(active_isa(), q, k_cache, v_cache, out, scratch, p)
}

pub(crate) fn attention_with(
    isa: Isa,
    q: &[f32],
    k_cache: KvData<'_>,
    v_cache: KvData<'_>,
    out: &mut [f32],
    _scratch: &mut [f32],
    p: AttentionParams,
) -> Result<(), KernelError> {
    validate(q, k_cache, v_cache, out, &p)?;
    let layout = KvLayout::Contiguous {
        capacity: p.kv_capacity,
    };
    run_attention(isa, q, k_cache, v_cache, layout, out, &p);
    Ok(())
}

// ---------------------------------------------------------------- paged KV cache

/// Shapes and options of one [`attention_paged_f32`] call: those of [`AttentionParams`]
/// (same meaning, same masking), with the KV cache in a pool of fixed-size blocks instead of
/// one buffer per kv head. Layouts:
/// - `q`, `out`: `[n_q][n_heads][head_dim]`, contiguous.
/// - `keys`, `values` (the pool, one layer): `[n_blocks][n_kv_heads][block_size][head_dim]`,
///   so one block's rows of one kv head are contiguous.
/// - `block_table`: the sequence's pool blocks in position order: position `x` lives in
///   block `block_table[x / block_size]`, row `x % block_size`. Its first
///   `kv_len.div_ceil(block_size)` entries are read (and must be `< n_blocks`); later ones
///   are ignored.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PagedAttentionParams {
    /// Number of query tokens (1 for decode).
    pub n_q: usize,
    /// Query heads.
    pub n_heads: usize,
    /// Key/value heads (divides `n_heads`).
    pub n_kv_heads: usize,
    /// Dimension of one head.
    pub head_dim: usize,
    /// Valid positions of the sequence (must cover the queries: `q_pos0 + n_q <= kv_len`).
    pub kv_len: usize,
    /// Position of the first query.
    pub q_pos0: usize,
    /// Multiplier of q·k (usually `1/sqrt(head_dim)`).
    pub scale: f32,
    /// Keys older than this many positions are masked (Mistral/Gemma2 local layers).
    pub sliding_window: Option<usize>,
    /// Gemma2 soft-capping: `s = cap * tanh(s / cap)` after scaling.
    pub softcap: Option<f32>,
    /// Positions per pool block: 16, 32 or 64, so each 64-key block of the canonical order
    /// is made of whole pool blocks.
    pub block_size: usize,
    /// Blocks in the pool (`keys`/`values` hold at least
    /// `n_blocks * n_kv_heads * block_size * head_dim` floats).
    pub n_blocks: usize,
}

impl PagedAttentionParams {
    /// The shared shapes, as the contiguous kernel sees them (`kv_capacity` is unused).
    fn common(&self) -> AttentionParams {
        AttentionParams {
            n_q: self.n_q,
            n_heads: self.n_heads,
            n_kv_heads: self.n_kv_heads,
            head_dim: self.head_dim,
            kv_len: self.kv_len,
            kv_capacity: self.kv_len,
            q_pos0: self.q_pos0,
            scale: self.scale,
            sliding_window: self.sliding_window,
            softcap: self.softcap,
        }
    }
}

/// Pool block sizes [`attention_paged_f32`] takes (powers of two dividing [`KEY_BLOCK`], at
/// most [`PAGES`] blocks per key block).
const PAGED_BLOCK_SIZES: [usize; 3] = [16, 32, 64];

/// Checks every length, parameter and used block-table entry of a paged call.
fn validate_paged(
    q: &[f32],
    keys: KvData<'_>,
    values: KvData<'_>,
    block_table: &[u32],
    out: &[f32],
    pp: &PagedAttentionParams,
) -> Result<(), KernelError> {
    let op = "attention_paged";
    let p = pp.common();
    validate_common(op, q, out, &p, None)?;
    let bs = pp.block_size;
    if !PAGED_BLOCK_SIZES.contains(&bs) {
        return invalid(op, format!("block_size {bs} must be 16, 32 or 64"));
    }
    let Some(pool) = pp
        .n_blocks
        .checked_mul(pp.n_kv_heads)
        .and_then(|x| x.checked_mul(bs))
        .and_then(|x| x.checked_mul(pp.head_dim))
    else {
        return invalid(op, "sizes overflow usize".into());
    };
    for (name, len) in [("keys", keys.len()), ("values", values.len())] {
        if len < pool {
            return invalid(
                op,
                format!(
                    "{name} has {len} elements, needs {pool} (n_blocks {} x n_kv_heads {} x \
                     block_size {bs} x head_dim {})",
                    pp.n_blocks, pp.n_kv_heads, pp.head_dim
                ),
            );
        }
    }
    let used = pp.kv_len.div_ceil(bs);
    if block_table.len() < used {
        return invalid(
            op,
            format!(
                "block_table has {} entries, kv_len {} needs {used} blocks of {bs}",
                block_table.len(),
                pp.kv_len
            ),
        );
    }
    if let Some(i) = (0..used).find(|&i| block_table[i] as usize >= pp.n_blocks) {
        return invalid(
            op,
            format!(
                "block_table[{i}] = {} is not below n_blocks {}",
                block_table[i], pp.n_blocks
            ),
        );
    }
    Ok(())
}

/// [`attention_f32`] reading keys and values through a block table from a pool of
/// fixed-size blocks (vLLM's PagedAttention), without gathering them; see
/// [`PagedAttentionParams`] for the layouts. Every (query, head) row is computed by the same
/// code in the same canonical order as [`attention_f32`] (each 64-key block is read as its
/// 64 / `block_size` pool blocks), so on a given ISA level and whatever the thread count the
/// output is bit-identical to `attention_f32` on the same keys and values in a contiguous
/// cache. Errors name the inconsistent parameter (a short table, an index `>= n_blocks`, a
/// block size other than 16/32/64, short slices).
pub fn attention_paged_f32(
    q: &[f32],
    keys: &[f32],
    values: &[f32],
    block_table: &[u32],
    out: &mut [f32],
    p: PagedAttentionParams,
) -> Result<(), KernelError> {
    let (k, v) = (KvData::F32(keys), KvData::F32(values));
    attention_paged_with(active_isa(), q, k, v, block_table, out, p)
}

/// [`attention_paged_f32`] over a pool stored as [`KvData`] (f32 or f16): the bits of
/// `attention_paged_f32` on the widened keys and values.
pub fn attention_paged(
    q: &[f32],
    keys: KvData<'_>,
    values: KvData<'_>,
    block_table: &[u32],
    out: &mut [f32],
    p: PagedAttentionParams,
) -> Result<(), KernelError> {
    attention_paged_with(active_isa(), q, keys, values, block_table, out, p)
}

pub(crate) fn attention_paged_with(
    isa: Isa,
    q: &[f32],
    keys: KvData<'_>,
    values: KvData<'_>,
    block_table: &[u32],
    out: &mut [f32],
    pp: PagedAttentionParams,
) -> Result<(), KernelError> {
    validate_paged(q, keys, values, block_table, out, &pp)?;
    let layout = KvLayout::Paged {
        table: block_table,
        block_size: pp.block_size,
        n_kv_heads: pp.n_kv_heads,
    };
    run_attention(isa, q, keys, values, layout, out, &pp.common());
    Ok(())
}

/// One sequence of an [`attention_paged_seqs_f32`] call: its queries are rows
/// `row0 .. row0 + p.n_q` of the call's `q` and `out` (a row is `n_heads * head_dim` floats).
#[derive(Debug, Clone, Copy)]
pub struct PagedSeq<'a> {
    /// Row of the call's `q` / `out` where this sequence's queries start.
    pub row0: usize,
    /// The sequence's blocks in the pool, in position order.
    pub block_table: &'a [u32],
    /// Its queries, positions and masking; shapes shared by every sequence of the call.
    pub p: PagedAttentionParams,
}

/// [`attention_paged_f32`] for several sequences over one pool (a continuous-batching step),
/// in one parallel section instead of one per sequence: one fork/join per step, and tasks
/// enough to balance over the threads (a lone decode call has only as many as kv heads; on
/// the 2-core machine of docs/STATUS.md the step time did not change). Every (query, head) row gets the bits [`attention_paged_f32`] gives it alone. Sequences
/// must share the heads, head_dim and block size and take disjoint rows in increasing order;
/// each is validated as [`attention_paged_f32`] validates its call, and errors name the
/// sequence.
pub fn attention_paged_seqs_f32(
    q: &[f32],
    keys: &[f32],
    values: &[f32],
    seqs: &[PagedSeq<'_>],
    out: &mut [f32],
) -> Result<(), KernelError> {
    let (k, v) = (KvData::F32(keys), KvData::F32(values));
    attention_paged_seqs_with(active_isa(), q, k, v, seqs, out)
}

/// [`attention_paged_seqs_f32`] over a pool stored as [`KvData`] (f32 or f16): the bits of
/// `attention_paged_seqs_f32` on the widened keys and values.
pub fn attention_paged_seqs(
    q: &[f32],
    keys: KvData<'_>,
    values: KvData<'_>,
    seqs: &[PagedSeq<'_>],
    out: &mut [f32],
) -> Result<(), KernelError> {
    attention_paged_seqs_with(active_isa(), q, keys, values, seqs, out)
}

pub(crate) fn attention_paged_seqs_with(
    isa: Isa,
    q: &[f32],
    keys: KvData<'_>,
    values: KvData<'_>,
    seqs: &[PagedSeq<'_>],
    out: &mut [f32],
) -> Result<(), KernelError> {
    let Some(first) = seqs.first() else {
        return Ok(());
    };
    let row = first.p.n_heads * first.p.head_dim;
    let mut end = 0;
    for (i, s) in seqs.iter().enumerate() {
        let (a, b) = (&s.p, &first.p);
        if (a.n_heads, a.n_kv_heads, a.head_dim, a.block_size)
            != (b.n_heads, b.n_kv_heads, b.head_dim, b.block_size)
        {
            return invalid(
                "attention_paged_seqs",
                format!("sequence {i} has other heads, head_dim or block_size than sequence 0"),
            );
        }
        if s.row0 < end {
            return invalid(
                "attention_paged_seqs",
                format!(
                    "sequence {i} starts at row {} inside the rows before it",
                    s.row0
                ),
            );
        }
        end = s.row0.saturating_add(s.p.n_q);
        let rows = s.row0.saturating_mul(row)..q.len().min(out.len());
        let (qs, os) = (
            q.get(rows.clone()).unwrap_or(&[]),
            out.get(rows).unwrap_or(&[]),
        );
        validate_paged(qs, keys, values, s.block_table, os, &s.p)
            .map_err(|e| KernelError::InvalidArgument(format!("sequence {i}: {e}")))?;
    }
    let level = super::cpu::supported_or_lower(isa);
    if level == Isa::Scalar || !seqs.iter().all(|s| blocked_applies(&s.p.common())) {
        for s in seqs {
            let layout = KvLayout::Paged {
                table: s.block_table,
                block_size: s.p.block_size,
                n_kv_heads: s.p.n_kv_heads,
            };
            let rows = s.row0 * row..(s.row0 + s.p.n_q) * row;
            let (qs, os) = (&q[rows.clone()], &mut out[rows]);
            run_attention(level, qs, keys, values, layout, os, &s.p.common());
        }
        return Ok(());
    }
    // Tasks of every sequence in order: (kv head, block of Q_BLOCK queries), as
    // `blocked_attention` splits one call.
    let tasks_of = |s: &PagedSeq| s.p.n_kv_heads * s.p.n_q.div_ceil(Q_BLOCK);
    let total: usize = seqs.iter().map(tasks_of).sum();
    let work: usize = seqs
        .iter()
        .map(|s| {
            let group = s.p.n_heads / s.p.n_kv_heads;
            let visible = s.p.kv_len.min(s.p.sliding_window.unwrap_or(usize::MAX));
            4 * s.p.head_dim * visible * group * Q_BLOCK.min(s.p.n_q) * tasks_of(s)
        })
        .sum();
    let out_ptr = OutPtr(out.as_mut_ptr());
    threads::for_each_range(total, work / total.max(1), 1, |range| {
        let (mut si, mut before) = (0, 0);
        for t in range {
            while t - before >= tasks_of(&seqs[si]) {
                before += tasks_of(&seqs[si]);
                si += 1;
            }
            let s = &seqs[si];
            let p = s.p.common();
            let blocks = s.p.n_q.div_ceil(Q_BLOCK);
            let (kvh, b) = ((t - before) / blocks, (t - before) % blocks);
            let i0 = b * Q_BLOCK;
            let rows = s.row0 * row..(s.row0 + s.p.n_q) * row;
            let task = BlockedTask {
                q: &q[rows],
                k: keys,
                v: values,
                layout: KvLayout::Paged {
                    table: s.block_table,
                    block_size: s.p.block_size,
                    n_kv_heads: s.p.n_kv_heads,
                },
                // SAFETY: validated above: rows `row0..row0 + n_q` lie inside `out`.
                out: unsafe { out_ptr.offset(s.row0 * row) },
                p: &p,
                kvh,
                i0,
                i1: (i0 + Q_BLOCK).min(s.p.n_q),
            };
            // SAFETY: the level is supported and not scalar; every sequence was validated;
            // sequences own disjoint rows and tasks disjoint (query, head) rows within them.
            unsafe { run_blocked_task(level, &task) };
        }
    });
    Ok(())
}

/// Pool blocks per 64-key block at the smallest block size.
const PAGES: usize = KEY_BLOCK / PAGED_BLOCK_SIZES[0];

/// Where the key (or value) rows of a kv head live. Row of position `x`, kv head `h`:
/// - `Contiguous`: `(h * capacity + x) * head_dim` (the [`attention_f32`] cache);
/// - `Paged`: `((table[x / B] * n_kv_heads + h) * B + x % B) * head_dim`.
///
/// The kernels read a 64-key block through [`BlockRows`], so both layouts run the same code.
#[derive(Clone, Copy)]
enum KvLayout<'a> {
    Contiguous {
        capacity: usize,
    },
    Paged {
        table: &'a [u32],
        block_size: usize,
        n_kv_heads: usize,
    },
}

impl KvLayout<'_> {
    /// Rows of the 64-key block starting at position `a` (a multiple of [`KEY_BLOCK`]) of kv
    /// head `kvh` in the buffer at `base`, for reading relative positions `r0..r1` (`r0 < r1`).
    ///
    /// # Safety
    /// The caller validated the call: positions `a + r0..a + r1` are below `kv_len`, so their
    /// table entries exist and point inside the pool.
    #[inline(always)]
    unsafe fn block_rows<E>(
        &self,
        base: *const E,
        hd: usize,
        kvh: usize,
        a: usize,
        r0: usize,
        r1: usize,
    ) -> BlockRows<E> {
        match *self {
            KvLayout::Contiguous { capacity } => BlockRows {
                page: [unsafe { base.add((kvh * capacity + a) * hd) }; PAGES],
                shift: KEY_BLOCK.trailing_zeros(),
                mask: KEY_BLOCK - 1,
                hd,
            },
            KvLayout::Paged {
                table,
                block_size,
                n_kv_heads,
            } => {
                let shift = block_size.trailing_zeros();
                let first = a >> shift;
                let mut page = [base; PAGES];
                for (i, pg) in page
                    .iter_mut()
                    .enumerate()
                    .take(((r1 - 1) >> shift) + 1)
                    .skip(r0 >> shift)
                {
                    let blk = table[first + i] as usize;
                    *pg = unsafe { base.add((blk * n_kv_heads + kvh) * block_size * hd) };
                }
                BlockRows {
                    page,
                    shift,
                    mask: block_size - 1,
                    hd,
                }
            }
        }
    }
}

/// The rows of one 64-key block: relative position `r` (0..64) is at
/// `page[r >> shift] + (r & mask) * hd`; rows of one page are contiguous.
#[derive(Clone, Copy)]
struct BlockRows<E = f32> {
    page: [*const E; PAGES],
    shift: u32,
    mask: usize,
    hd: usize,
}

impl<E> BlockRows<E> {
    /// Start of the row of relative position `r`.
    #[inline(always)]
    unsafe fn row(&self, r: usize) -> *const E {
        debug_assert!(r < KEY_BLOCK);
        unsafe {
            self.page
                .get_unchecked(r >> self.shift)
                .add((r & self.mask) * self.hd)
        }
    }

    /// The contiguous run of rows from relative position `r`: its start and length (up to
    /// the end of `r`'s page, at most `max`).
    #[inline(always)]
    unsafe fn run(&self, r: usize, max: usize) -> (*const E, usize) {
        (unsafe { self.row(r) }, ((r | self.mask) + 1 - r).min(max))
    }
}

/// A cache element the decode kernels ([`few_lanes_block`]) read in place: f32 as stored,
/// f16 widened in its loads. Widening is exact, so the vectors, and every bit after them, are
/// those of the rows widened into a buffer first ([`kv_rows`]); reading in place saves that
/// buffer's store and reload.
trait KvElem: Copy {
    /// `S::W` elements from `p`, as f32.
    unsafe fn load<S: Simd>(p: *const Self) -> S::V;
    /// [`Simd::transpose`] of rows of this element.
    unsafe fn transpose<S: Simd>(rows: &[*const Self; 16], c0: usize) -> Option<[S::V; 16]>;
}

impl KvElem for f32 {
    #[inline(always)]
    unsafe fn load<S: Simd>(p: *const f32) -> S::V {
        unsafe { S::load(p) }
    }
    #[inline(always)]
    unsafe fn transpose<S: Simd>(rows: &[*const f32; 16], c0: usize) -> Option<[S::V; 16]> {
        unsafe { S::transpose(rows, c0) }
    }
}

impl KvElem for half::f16 {
    #[inline(always)]
    unsafe fn load<S: Simd>(p: *const half::f16) -> S::V {
        unsafe { S::load_f16(p.cast()) }
    }
    #[inline(always)]
    unsafe fn transpose<S: Simd>(rows: &[*const half::f16; 16], c0: usize) -> Option<[S::V; 16]> {
        // Loop, not `array::map`: see `Simd::transpose`.
        let mut r = [std::ptr::null::<u16>(); 16];
        for (r, row) in r.iter_mut().zip(rows) {
            *r = row.cast();
        }
        unsafe { S::transpose_f16(&r, c0) }
    }
}

/// Rows `r0..r1` of kv head `kvh`'s 64-key block at position `a`, as f32: an f32 cache's in
/// place; an f16 cache's widened into `wide` (room for [`KEY_BLOCK`] rows of `hd`), each
/// relative row `r` at `wide + r * hd`.
///
/// # Safety
/// As [`KvLayout::block_rows`]; where `data` is f16, `wide` holds `KEY_BLOCK * hd` floats
/// that nothing else reads or writes meanwhile.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn kv_rows<S: Simd>(
    data: KvData<'_>,
    layout: &KvLayout<'_>,
    hd: usize,
    kvh: usize,
    a: usize,
    r0: usize,
    r1: usize,
    wide: *mut f32,
) -> BlockRows {
    unsafe {
        match data {
            KvData::F32(s) => layout.block_rows(s.as_ptr(), hd, kvh, a, r0, r1),
            KvData::F16(s) => {
                let src = layout.block_rows(s.as_ptr(), hd, kvh, a, r0, r1);
                let mut r = r0;
                while r < r1 {
                    let (rows, n) = src.run(r, r1 - r);
                    let dst = std::slice::from_raw_parts_mut(wide.add(r * hd), n * hd);
                    super::cast::f16_to_f32_simd::<S>(
                        std::slice::from_raw_parts(rows, n * hd),
                        dst,
                    );
                    r += n;
                }
                // `wide` is a contiguous cache of one kv head holding this key block.
                let block = KvLayout::Contiguous {
                    capacity: KEY_BLOCK,
                };
                block.block_rows(wide.cast_const(), hd, 0, 0, r0, r1)
            }
        }
    }
}

thread_local! {
    /// Per thread: room for an f16 cache's current key and value blocks widened to f32
    /// (grown once, kept for the thread's next calls).
    static WIDE: std::cell::Cell<Vec<f32>> = const { std::cell::Cell::new(Vec::new()) };
}

/// A task's widening room: `2 * KEY_BLOCK * hd` floats (keys, then values) when `k` or `v` is
/// f16, else empty. Hand it back with [`put_wide`].
fn take_wide(k: KvData<'_>, v: KvData<'_>, hd: usize) -> Vec<f32> {
    if matches!((k, v), (KvData::F32(_), KvData::F32(_))) {
        return Vec::new();
    }
    let mut w = WIDE.take();
    if w.len() < 2 * KEY_BLOCK * hd {
        w.resize(2 * KEY_BLOCK * hd, 0.0);
    }
    w
}

fn put_wide(w: Vec<f32>) {
    if w.capacity() > 0 {
        WIDE.set(w);
    }
}

/// Both layouts' attention, after validation.
fn run_attention(
    isa: Isa,
    q: &[f32],
    k: KvData<'_>,
    v: KvData<'_>,
    layout: KvLayout<'_>,
    out: &mut [f32],
    p: &AttentionParams,
) {
    let hd = p.head_dim;
    let out = &mut out[..p.n_q * p.n_heads * hd];
    let group = p.n_heads / p.n_kv_heads;
    let level = super::cpu::supported_or_lower(isa);
    if level != Isa::Scalar && blocked_applies(p) {
        blocked_attention(level, q, k, v, layout, out, p);
        return;
    }
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
        let task = GroupTask {
            q: &q[first * hd..(first + heads_per_task) * hd],
            k,
            v,
            layout,
            kvh: h / group,
            keys_start,
            keys_end,
            head_dim: hd,
            scale: p.scale,
            softcap: p.softcap,
        };
        #[allow(unreachable_patterns)]
        match level {
            // SAFETY: the level is supported; the call was validated.
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => unsafe { group_avx512(task, o) },
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => unsafe { group_avx2(task, o) },
            #[cfg(target_arch = "aarch64")]
            Isa::Neon => unsafe { group_neon(task, o) },
            _ => unsafe { group_attention::<super::simd::Scalar>(task, o) },
        }
    });
}

/// Largest GQA group handled in one task (per-head softmax state lives on the stack).
const MAX_GROUP: usize = 16;

/// One query token and `q.len() / head_dim` adjacent heads sharing kv head `kvh`, which has
/// rows `keys_start..keys_end` visible (the last one is the query's own position) in `k`/`v`
/// (the whole cache or pool, laid out as `layout` says).
struct GroupTask<'a> {
    q: &'a [f32],
    k: KvData<'a>,
    v: KvData<'a>,
    layout: KvLayout<'a>,
    kvh: usize,
    keys_start: usize,
    keys_end: usize,
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

#[cfg(target_arch = "aarch64")]
#[target_feature(enable = "neon")]
unsafe fn group_neon(t: GroupTask<'_>, out: &mut [f32]) {
    unsafe { group_attention::<super::simd::Neon>(t, out) }
}

/// Keys per online-softmax block, aligned to absolute positions (block `b` holds keys
/// `b * KEY_BLOCK..(b + 1) * KEY_BLOCK`); see [`attention_f32`] for the reduction order.
const KEY_BLOCK: usize = 64;

/// Head dims transposed at a time by [`group_attention`] (its key buffer lives on the stack).
const DIM_CHUNK: usize = 64;

/// Lane 0 of a vector.
#[inline(always)]
unsafe fn lane0<S: Simd>(v: S::V) -> f32 {
    let mut buf = [0f32; 16];
    S::store(buf.as_mut_ptr(), v);
    buf[0]
}

/// x86 `maxps` semantics (`a > b ? a : b`), as `S::max` computes per lane.
#[inline(always)]
fn max_ps(a: f32, b: f32) -> f32 {
    if a > b {
        a
    } else {
        b
    }
}

/// The canonical order (see [`attention_f32`]) for one query and its group of heads, with
/// vector lanes over keys for the scores (keys are transposed `W` at a time on the stack) and
/// over head dims for the value sums.
#[inline(always)]
unsafe fn group_attention<S: Simd>(t: GroupTask<'_>, out: &mut [f32]) {
    const ROW: usize = KEY_BLOCK + 16; // a head's score row, with room for a vector overread
    let hd = t.head_dim;
    let heads = out.len() / hd;
    let keys_end = t.keys_end;
    out.fill(0.0);
    let mut run_max = [f32::NEG_INFINITY; MAX_GROUP];
    let mut run_sum = [0.0f32; MAX_GROUP];
    let mut scores = [0.0f32; MAX_GROUP * ROW];
    let mut kt = [0.0f32; DIM_CHUNK * 16];
    let (qp, sp) = (t.q.as_ptr(), scores.as_mut_ptr());
    let mut wide = take_wide(t.k, t.v, hd);
    let wk = wide.as_mut_ptr();
    let wv = wk.wrapping_add(KEY_BLOCK * hd);
    let mut b0 = t.keys_start;
    while b0 < keys_end {
        let a = b0 / KEY_BLOCK * KEY_BLOCK;
        let b1 = (a + KEY_BLOCK).min(keys_end);
        let len = b1 - b0;
        // Key `b0 + j` is row `r0 + j` of this 64-key block.
        let r0 = b0 - a;
        let krows = kv_rows::<S>(t.k, &t.layout, hd, t.kvh, a, r0, r0 + len, wk);
        let vrows = kv_rows::<S>(t.v, &t.layout, hd, t.kvh, a, r0, r0 + len, wv);
        // Scores of keys b0 + j.., W at a time: one FMA chain over the head dims per lane.
        let mut j = 0;
        while j < len {
            let n = S::W.min(len - j);
            let mut acc = [S::splat(0.0); MAX_GROUP];
            let mut d0 = 0;
            while d0 < hd {
                let dn = DIM_CHUNK.min(hd - d0);
                for l in 0..S::W {
                    let key = krows.row(r0 + j + l.min(n - 1)).add(d0);
                    for d in 0..dn {
                        kt[d * S::W + l] = *key.add(d);
                    }
                }
                for d in 0..dn {
                    let kv = S::load(kt.as_ptr().add(d * S::W));
                    for (h, a) in acc.iter_mut().enumerate().take(heads) {
                        *a = S::fma(S::splat(*qp.add(h * hd + d0 + d)), kv, *a);
                    }
                }
                d0 += dn;
            }
            let scale = S::splat(t.scale);
            for (h, a) in acc.iter().enumerate().take(heads) {
                S::store(sp.add(h * ROW + j), S::mul(*a, scale));
            }
            j += n;
        }
        for h in 0..heads {
            let row = sp.add(h * ROW);
            let mut block_max = f32::NEG_INFINITY;
            for j in 0..len {
                let s = &mut *row.add(j);
                if let Some(cap) = t.softcap {
                    *s = cap * (*s / cap).tanh();
                }
                block_max = max_ps(block_max, *s);
            }
            let new_max = max_ps(run_max[h], block_max);
            // Nothing visible yet (max -inf): shift by 0 so exp(-inf - 0) = 0, not NaN.
            let shift = if new_max < f32::MIN { 0.0 } else { new_max };
            let factor = lane0::<S>(S::exp(S::splat(run_max[h] - shift)));
            run_max[h] = new_max;
            let vshift = S::splat(shift);
            let mut j = 0;
            while j < len {
                S::store(row.add(j), S::exp(S::sub(S::load(row.add(j)), vshift)));
                j += S::W;
            }
            let mut sum = 0.0f32;
            for j in 0..len {
                sum += *row.add(j);
            }
            run_sum[h] = lane0::<S>(S::fma(
                S::splat(run_sum[h]),
                S::splat(factor),
                S::splat(sum),
            ));
            let acc = out.as_mut_ptr().add(h * hd);
            let vf = S::splat(factor);
            // Keys in order, one contiguous run of value rows (a page) at a time.
            let mut e = 0;
            while e + S::W <= hd {
                let mut r = S::mul(S::load(acc.add(e)), vf);
                let mut j = 0;
                while j < len {
                    let (values, n) = vrows.run(r0 + j, len - j);
                    for x in 0..n {
                        let w = S::splat(*row.add(j + x));
                        r = S::fma(w, S::load(values.add(x * hd + e)), r);
                    }
                    j += n;
                }
                S::store(acc.add(e), r);
                e += S::W;
            }
            if e < hd {
                let rem = hd - e;
                let mut r = S::mul(S::load_partial(acc.add(e), rem), vf);
                let mut j = 0;
                while j < len {
                    let (values, n) = vrows.run(r0 + j, len - j);
                    for x in 0..n {
                        let w = S::splat(*row.add(j + x));
                        r = S::fma(w, S::load_partial(values.add(x * hd + e), rem), r);
                    }
                    j += n;
                }
                S::store_partial(acc.add(e), rem, r);
            }
        }
        b0 = b1;
    }
    put_wide(wide);
    for (h, o) in out.chunks_exact_mut(hd).enumerate() {
        let inv = 1.0 / run_sum[h];
        for x in o {
            *x *= inv;
        }
    }
}

// ---------------------------------------------------------------- blocked prefill

/// Query positions per blocked task.
const Q_BLOCK: usize = 16;
/// Floats of output accumulators a blocked task keeps on the stack (16 lanes x head_dim).
const BLOCKED_ACC: usize = 16 * BLOCKED_MAX_HD;
/// Largest head_dim of the blocked path (its transposed key block lives on the stack).
const BLOCKED_MAX_HD: usize = 256;

/// Whether the blocked path handles `p` (whatever `n_q`: decode too, so a query's path never
/// depends on its batch): head_dim a multiple of 16 (whole vectors on every ISA), no softcap.
/// Both paths compute the same canonical order, so the choice changes speed, not bits.
fn blocked_applies(p: &AttentionParams) -> bool {
    let group = p.n_heads / p.n_kv_heads;
    p.softcap.is_none()
        && p.head_dim.is_multiple_of(16)
        && p.head_dim <= BLOCKED_MAX_HD
        && group <= MAX_GROUP
}

/// Output pointer shared by blocked tasks; each writes a disjoint set of (query, head) rows.
#[derive(Clone, Copy)]
struct OutPtr(*mut f32);
// SAFETY: tasks write disjoint rows, and the `&mut` borrow outlives the parallel section.
unsafe impl Send for OutPtr {}
unsafe impl Sync for OutPtr {}

impl OutPtr {
    /// The pointer `n` floats further on (a method, so closures capture the `Sync` wrapper).
    ///
    /// # Safety
    /// `n` floats further on is still inside the output.
    unsafe fn offset(self, n: usize) -> OutPtr {
        OutPtr(unsafe { self.0.add(n) })
    }
}

/// Prefill attention in tasks of (kv head, block of up to [`Q_BLOCK`] queries); see
/// [`blocked_task`].
fn blocked_attention(
    level: Isa,
    q: &[f32],
    k: KvData<'_>,
    v: KvData<'_>,
    layout: KvLayout<'_>,
    out: &mut [f32],
    p: &AttentionParams,
) {
    let hd = p.head_dim;
    let group = p.n_heads / p.n_kv_heads;
    let q_block = Q_BLOCK;
    let blocks = p.n_q.div_ceil(q_block);
    let tasks = p.n_kv_heads * blocks;
    let visible = p.kv_len.min(p.sliding_window.unwrap_or(usize::MAX));
    let work = 4 * hd * visible * group * q_block;
    let out_ptr = OutPtr(out.as_mut_ptr());
    threads::for_each_range(tasks, work, 1, |range| {
        for t in range {
            let (kvh, b) = (t / blocks, t % blocks);
            let i0 = b * q_block;
            let task = BlockedTask {
                q,
                k,
                v,
                layout,
                out: out_ptr,
                p,
                kvh,
                i0,
                i1: (i0 + q_block).min(p.n_q),
            };
            // SAFETY: the call was validated; tasks write disjoint (query, head) rows of `out`.
            unsafe { run_blocked_task(level, &task) };
        }
    });
}

/// One blocked task on `level`.
///
/// # Safety
/// `level` is supported by this CPU and is not scalar; the task's call was validated; no other
/// task writes its (query, head) rows of `out`.
unsafe fn run_blocked_task(level: Isa, task: &BlockedTask<'_>) {
    #[allow(unreachable_patterns)]
    match level {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => unsafe { blocked_avx512(task) },
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => unsafe { blocked_avx2(task) },
        #[cfg(target_arch = "aarch64")]
        Isa::Neon => unsafe { blocked_neon(task) },
        _ => {
            let _ = task;
            unreachable!("the blocked path runs only on SIMD levels")
        }
    }
}

/// Queries `i0..i1` of every head in kv head `kvh`'s group; `k`/`v` are the whole cache or
/// pool, laid out as `layout` says.
struct BlockedTask<'a> {
    q: &'a [f32],
    k: KvData<'a>,
    v: KvData<'a>,
    layout: KvLayout<'a>,
    out: OutPtr,
    p: &'a AttentionParams,
    kvh: usize,
    i0: usize,
    i1: usize,
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")]
unsafe fn blocked_avx512(t: &BlockedTask<'_>) {
    unsafe { blocked_task::<super::simd::Avx512>(t) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn blocked_avx2(t: &BlockedTask<'_>) {
    unsafe { blocked_task::<super::simd::Avx2>(t) }
}

#[cfg(target_arch = "aarch64")]
#[target_feature(enable = "neon")]
unsafe fn blocked_neon(t: &BlockedTask<'_>) {
    unsafe { blocked_task::<super::simd::Neon>(t) }
}

/// Keys whose scores a blocked task computes at once (one FMA chain per key and lane).
const SCORE_KEYS: usize = 8;

/// Query vectors of one blocked task, [`Q_BLOCK`] query positions times the group's heads.
const MAX_VECTORS: usize = Q_BLOCK * MAX_GROUP;

/// Lanes are query vectors (query position x head of the group), `S::W` at a time: scores
/// of one key for all lanes are `head_dim` FMAs of the transposed queries with the key's
/// elements broadcast, so keys need no transpose and no horizontal sums. Softmax state is
/// per lane; values are accumulated per query vector with its probability broadcast.
#[inline(always)]
unsafe fn blocked_task<S: Simd>(t: &BlockedTask<'_>) {
    const KB: usize = KEY_BLOCK;
    let p = t.p;
    let hd = p.head_dim;
    let group = p.n_heads / p.n_kv_heads;
    let n_vec = (t.i1 - t.i0) * group;
    let first_visible = |pos: usize| p.sliding_window.map_or(0, |w| (pos + 1).saturating_sub(w));
    let pos_of = |vi: usize| p.q_pos0 + t.i0 + vi / group;
    let q_row = |vi: usize| {
        let head = t.kvh * group + vi % group;
        (t.i0 + vi / group) * p.n_heads + head
    };
    // Stack buffers left uninitialised (zeroing them per task showed in profiles); each is
    // written before it is read.
    let mut acc = std::mem::MaybeUninit::<[f32; BLOCKED_ACC]>::uninit();
    let acc = acc.as_mut_ptr().cast::<f32>();
    let mut qt = std::mem::MaybeUninit::<[f32; BLOCKED_MAX_HD * 16]>::uninit();
    let qt = qt.as_mut_ptr().cast::<f32>();
    let mut probs = std::mem::MaybeUninit::<[f32; KB * 16]>::uninit();
    let probs = probs.as_mut_ptr().cast::<f32>();
    let mut denom = [0f32; MAX_VECTORS];
    let mut wide = take_wide(t.k, t.v, hd);
    let wk = wide.as_mut_ptr();
    let wv = wk.wrapping_add(KEY_BLOCK * hd);

    let mut v0 = 0;
    while v0 < n_vec {
        let lanes = S::W.min(n_vec - v0);
        // qt[d * W + l] = q[vector v0 + l][d]; missing lanes repeat the last vector.
        for l in 0..S::W {
            let row = t.q.as_ptr().add(q_row(v0 + l.min(lanes - 1)) * hd);
            for d in 0..hd {
                *qt.add(d * S::W + l) = *row.add(d);
            }
        }
        std::ptr::write_bytes(acc, 0, S::W * hd);
        let mut pos = [0f32; 16];
        let mut start = [0f32; 16];
        for l in 0..S::W {
            let ps = pos_of(v0 + l.min(lanes - 1));
            pos[l] = ps as f32;
            start[l] = first_visible(ps) as f32;
        }
        let (posv, startv) = (S::load(pos.as_ptr()), S::load(start.as_ptr()));
        let keys_start = first_visible(pos_of(v0));
        let keys_end = pos_of(v0 + lanes - 1) + 1;
        let scale = S::splat(p.scale);
        let neg_inf = S::splat(f32::NEG_INFINITY);
        let mut run_max = neg_inf;
        let mut run_sum = S::splat(0.0);

        let few = lanes <= KEYS_IN_LANES_MAX.min(S::W / 2);
        let fl = FewLanes {
            hd,
            qt: qt.cast_const(),
            lanes,
            pos: &pos,
            start: &start,
            scale: p.scale,
        };

        let mut kb = keys_start;
        while kb < keys_end {
            let a = kb / KB * KB;
            let len = (a + KB).min(keys_end) - kb;
            // Key `kb + j` is row `r0 + j` of this 64-key block.
            let r0 = kb - a;
            // Few query vectors (decode): keys in the lanes, where the level can transpose,
            // reading an f16 cache in place (widened in the loads).
            if let (true, KvData::F16(k), KvData::F16(v)) = (few, t.k, t.v) {
                let krows = t.layout.block_rows(k.as_ptr(), hd, t.kvh, a, r0, r0 + len);
                let vrows = t.layout.block_rows(v.as_ptr(), hd, t.kvh, a, r0, r0 + len);
                let block = KeyBlock::new(&krows, &vrows, r0, len, kb);
                if few_lanes_block::<S, half::f16>(&block, fl, (&mut run_max, &mut run_sum), acc) {
                    kb += len;
                    continue;
                }
            }
            let krows = kv_rows::<S>(t.k, &t.layout, hd, t.kvh, a, r0, r0 + len, wk);
            let vrows = kv_rows::<S>(t.v, &t.layout, hd, t.kvh, a, r0, r0 + len, wv);
            let block = KeyBlock::new(&krows, &vrows, r0, len, kb);
            if few && few_lanes_block::<S, f32>(&block, fl, (&mut run_max, &mut run_sum), acc) {
                kb += len;
                continue;
            }
            // Scores, SCORE_KEYS keys at a time: independent FMA chains enough to cover the
            // FMA latency when few lanes are queries (decode on levels without `Simd::transpose`).
            let mut j = 0;
            while j < len {
                let n = SCORE_KEYS.min(len - j);
                let mut s = [S::splat(0.0); SCORE_KEYS];
                let keys: [*const f32; SCORE_KEYS] =
                    std::array::from_fn(|x| krows.row(r0 + j + x.min(n - 1)));
                for d in 0..hd {
                    let qd = S::load(qt.add(d * S::W));
                    for x in 0..SCORE_KEYS {
                        s[x] = S::fma(qd, S::splat(*keys[x].add(d)), s[x]);
                    }
                }
                for (x, s) in s.iter().enumerate().take(n) {
                    // Lanes that must not see key `kb + j + x` (future, or out of the window).
                    let kv = S::splat((kb + j + x) as f32);
                    let v = S::mul(*s, scale);
                    let v = S::select_less(posv, kv, neg_inf, v);
                    let v = S::select_less(kv, startv, neg_inf, v);
                    S::store(probs.add((j + x) * S::W), v);
                }
                j += n;
            }
            let mut block_max = neg_inf;
            for j in 0..len {
                block_max = S::max(block_max, S::load(probs.add(j * S::W)));
            }
            let new_max = S::max(run_max, block_max);
            // Lanes with nothing visible yet keep max -inf: use 0 as the shift there so
            // exp(-inf - 0) = 0 instead of NaN.
            let shift = S::select_less(new_max, S::splat(f32::MIN), S::splat(0.0), new_max);
            let factor = S::exp(S::sub(run_max, shift));
            run_max = new_max;
            let mut sum = S::splat(0.0);
            for j in 0..len {
                let e = S::exp(S::sub(S::load(probs.add(j * S::W)), shift));
                S::store(probs.add(j * S::W), e);
                sum = S::add(sum, e);
            }
            run_sum = S::fma(run_sum, factor, sum);
            let mut factors = [0f32; 16];
            S::store(factors.as_mut_ptr(), factor);
            for (l, &f) in factors.iter().enumerate().take(lanes) {
                let (a, p) = (acc.add(l * hd), probs.add(l).cast_const());
                pv_lanes::<S, f32, 1>(&[a; 4], &[f; 4], &[p; 4], S::W, hd, &block);
            }
            kb += len;
        }
        S::store(denom.as_mut_ptr().add(v0), run_sum);
        for l in 0..lanes {
            let o = t.out.0.add(q_row(v0 + l) * hd);
            let inv = 1.0 / denom[v0 + l];
            for d in 0..hd {
                *o.add(d) = *acc.add(l * hd + d) * inv;
            }
        }
        v0 += lanes;
    }
    put_wide(wide);
}

/// Groups of `W` keys whose scores [`keys_in_lanes`] computes side by side.
const KEY_GROUPS: usize = 2;

/// Most query vectors (lanes) for which [`few_lanes_block`] runs (and at most half a
/// level's lanes): per `W` keys and head dim its scores cost about `W / 4 + L` vector
/// operations (transpose, then `L` FMAs), the lanes-as-queries loop's `W`.
const KEYS_IN_LANES_MAX: usize = 8;

/// One 64-key block of a blocked task, as its loop sees it: key `kb + j` is row `r0 + j`.
struct KeyBlock<'a, E = f32> {
    krows: &'a BlockRows<E>,
    vrows: &'a BlockRows<E>,
    r0: usize,
    len: usize,
    kb: usize,
}

impl<'a, E> KeyBlock<'a, E> {
    fn new(
        krows: &'a BlockRows<E>,
        vrows: &'a BlockRows<E>,
        r0: usize,
        len: usize,
        kb: usize,
    ) -> Self {
        KeyBlock {
            krows,
            vrows,
            r0,
            len,
            kb,
        }
    }
}

/// [`blocked_task`]'s work on one key block when only `lanes` lanes are query vectors (decode:
/// one query, the heads of a GQA group), with keys in the lanes instead: scores `W` keys at a
/// time from keys transposed in registers, then scale, mask, block maximum, `exp` and the
/// probability sums per query vector over its row of keys, and the value sums of all vectors
/// from one load of each value row. Every value is the one the lanes-as-queries loop
/// computes, in the same order (the score chain over head dims, the maximum and the sum in key
/// order, the same `exp` of the same difference, each value sum's chain in key order), and
/// the lanes past `lanes` get the last vector's values as there, so the task's state and
/// output bits are unchanged; only idle lanes are no longer computed. Returns false, having
/// changed nothing, where the level has no transpose or `lanes` is above
/// [`KEYS_IN_LANES_MAX`].
#[inline(always)]
unsafe fn few_lanes_block<S: Simd, E: KvElem>(
    b: &KeyBlock<'_, E>,
    fl: FewLanes<'_>,
    state: (&mut S::V, &mut S::V),
    acc: *mut f32,
) -> bool {
    let FewLanes {
        hd,
        qt,
        lanes,
        pos,
        start,
        scale,
    } = fl;
    macro_rules! go {
        ($l:literal) => {
            unsafe { few_lanes_block_n::<S, E, $l>(b, hd, qt, pos, start, scale, state, acc) }
        };
    }
    match lanes {
        1 => go!(1),
        2 => go!(2),
        3 => go!(3),
        4 => go!(4),
        5 => go!(5),
        6 => go!(6),
        7 => go!(7),
        8 => go!(8),
        _ => false,
    }
}

/// What [`few_lanes_block`] reads of its task: the head dim, the transposed queries
/// (`qt[d * W + l]`), the lanes in use, per lane its position and first visible key, and the
/// score scale.
#[derive(Clone, Copy)]
struct FewLanes<'a> {
    hd: usize,
    qt: *const f32,
    lanes: usize,
    pos: &'a [f32; 16],
    start: &'a [f32; 16],
    scale: f32,
}

#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn few_lanes_block_n<S: Simd, E: KvElem, const L: usize>(
    b: &KeyBlock<'_, E>,
    hd: usize,
    qt: *const f32,
    pos: &[f32; 16],
    start: &[f32; 16],
    scale: f32,
    (run_max, run_sum): (&mut S::V, &mut S::V),
    acc: *mut f32,
) -> bool {
    // A query vector's row of scores (then probabilities), room for whole last key groups.
    const ROW: usize = KEY_BLOCK + KEY_GROUPS * 16;
    let mut rows = std::mem::MaybeUninit::<[f32; KEYS_IN_LANES_MAX * ROW]>::uninit();
    let rows = rows.as_mut_ptr().cast::<f32>();
    let row = |l: usize| unsafe { rows.add(l * ROW) };
    unsafe {
        let mut j = 0;
        while j < b.len {
            // Keys past the block's end repeat its last key (their scores go unread).
            let last = b.len - 1;
            let keys: [[*const E; 16]; KEY_GROUPS] = std::array::from_fn(|g| {
                std::array::from_fn(|x| b.krows.row(b.r0 + (j + g * S::W + x).min(last)))
            });
            if !keys_in_lanes::<S, E, L>(&keys, hd, qt, rows.add(j), ROW) {
                return false;
            }
            j += KEY_GROUPS * S::W;
        }
        // Rows hold whole vectors of scores up to `len` rounded up to `W` (within `ROW`).
        let neg_inf = S::splat(f32::NEG_INFINITY);
        let mut j = 0;
        while j < b.len {
            let keys: [f32; 16] = std::array::from_fn(|x| (b.kb + j + x) as f32);
            let kv = S::load(keys.as_ptr());
            for l in 0..L {
                let (posv, startv) = (S::splat(pos[l]), S::splat(start[l]));
                let v = S::mul(S::load(row(l).add(j)), S::splat(scale));
                let v = S::select_less(posv, kv, neg_inf, v);
                let v = S::select_less(kv, startv, neg_inf, v);
                S::store(row(l).add(j), v);
            }
            j += S::W;
        }
        // The vectors' chains side by side (each in key order, as a lane there).
        let mut block_max = [f32::NEG_INFINITY; 16];
        for j in 0..b.len {
            for (l, m) in block_max.iter_mut().enumerate().take(L) {
                *m = max_ps(*m, *row(l).add(j));
            }
        }
        let last = block_max[L - 1];
        block_max[L..].fill(last);
        let new_max = S::max(*run_max, S::load(block_max.as_ptr()));
        let shift = S::select_less(new_max, S::splat(f32::MIN), S::splat(0.0), new_max);
        let factor = S::exp(S::sub(*run_max, shift));
        *run_max = new_max;
        let (mut shifts, mut factors, mut sums) = ([0f32; 16], [0f32; 16], [0f32; 16]);
        S::store(shifts.as_mut_ptr(), shift);
        S::store(factors.as_mut_ptr(), factor);
        for (l, &sh) in shifts.iter().enumerate().take(L) {
            let sh = S::splat(sh);
            let mut j = 0;
            while j < b.len {
                S::store(row(l).add(j), S::exp(S::sub(S::load(row(l).add(j)), sh)));
                j += S::W;
            }
        }
        for j in 0..b.len {
            for (l, sum) in sums.iter_mut().enumerate().take(L) {
                *sum += *row(l).add(j);
            }
        }
        let last = sums[L - 1];
        sums[L..].fill(last);
        *run_sum = S::fma(*run_sum, factor, S::load(sums.as_ptr()));
        // Value sums, at most 4 vectors at a time (16 accumulators at 4 registers a row).
        let mut l0 = 0;
        while l0 < L {
            let g = (L - l0).min(4);
            let accs: [*mut f32; 4] = std::array::from_fn(|x| acc.add((l0 + x.min(g - 1)) * hd));
            let fs: [f32; 4] = std::array::from_fn(|x| factors[l0 + x.min(g - 1)]);
            let ps: [*const f32; 4] = std::array::from_fn(|x| row(l0 + x.min(g - 1)).cast_const());
            match g {
                1 => pv_lanes::<S, E, 1>(&accs, &fs, &ps, 1, hd, b),
                2 => pv_lanes::<S, E, 2>(&accs, &fs, &ps, 1, hd, b),
                3 => pv_lanes::<S, E, 3>(&accs, &fs, &ps, 1, hd, b),
                _ => pv_lanes::<S, E, 4>(&accs, &fs, &ps, 1, hd, b),
            }
            l0 += g;
        }
    }
    true
}

/// For each of the first `G` query vectors `g`: `acc[g][..hd] = acc[g] * factors[g] +
/// sum_j probs[g][j * stride] * v_j[..hd]` over the block's keys `j`, in key order (one
/// contiguous run of value rows at a time). Each value row is loaded once for all `G`; every
/// accumulator keeps its own chain. `hd` is a multiple of `W`.
#[inline(always)]
unsafe fn pv_lanes<S: Simd, E: KvElem, const G: usize>(
    acc: &[*mut f32; 4],
    factors: &[f32; 4],
    probs: &[*const f32; 4],
    stride: usize,
    hd: usize,
    b: &KeyBlock<'_, E>,
) {
    unsafe {
        // G rows of 4 accumulators, G probabilities and a value vector: within AVX-512's 32
        // registers, but AVX2's 16 hold that only up to G = 3 (a spilled accumulator puts a
        // store and a load on its chain at every key); 2 vectors a chunk there instead.
        let e = if S::W >= 16 || G <= 3 {
            pv_chunks::<S, E, G, 4>(acc, factors, probs, stride, hd, b, 0)
        } else {
            pv_chunks::<S, E, G, 2>(acc, factors, probs, stride, hd, b, 0)
        };
        // The head dims left, a vector at a time.
        pv_chunks::<S, E, G, 1>(acc, factors, probs, stride, hd, b, e);
    }
}

/// [`pv_lanes`] over chunks of `X` vectors of head dims from head dim `from`, as many whole
/// chunks as fit in `hd`; returns the head dim it stopped at. Each accumulator's chain is the
/// same whatever `X`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn pv_chunks<S: Simd, E: KvElem, const G: usize, const X: usize>(
    acc: &[*mut f32; 4],
    factors: &[f32; 4],
    probs: &[*const f32; 4],
    stride: usize,
    hd: usize,
    b: &KeyBlock<'_, E>,
    from: usize,
) -> usize {
    let (v, r0, len) = (b.vrows, b.r0, b.len);
    let mut e = from;
    unsafe {
        while e + X * S::W <= hd {
            // Loops, not `array::from_fn`: a closure does not inherit the target features.
            let mut r = [[S::splat(0.0); X]; G];
            for (g, r) in r.iter_mut().enumerate() {
                let f = S::splat(factors[g]);
                for (x, r) in r.iter_mut().enumerate() {
                    *r = S::mul(S::load(acc[g].add(e + x * S::W)), f);
                }
            }
            let mut j = 0;
            while j < len {
                let (rows, n) = v.run(r0 + j, len - j);
                for i in 0..n {
                    let row = rows.add(i * hd + e);
                    // The G probabilities, then one value vector at a time: G * X
                    // accumulators + G + 1 registers.
                    let mut w = [S::splat(0.0); G];
                    for (g, w) in w.iter_mut().enumerate() {
                        *w = S::splat(*probs[g].add((j + i) * stride));
                    }
                    for x in 0..X {
                        let v = E::load::<S>(row.add(x * S::W));
                        for (g, r) in r.iter_mut().enumerate() {
                            r[x] = S::fma(w[g], v, r[x]);
                        }
                    }
                }
                j += n;
            }
            for (g, r) in r.iter().enumerate() {
                for (x, r) in r.iter().enumerate() {
                    S::store(acc[g].add(e + x * S::W), *r);
                }
            }
            e += X * S::W;
        }
    }
    e
}

/// Raw (unscaled) scores of [`KEY_GROUPS`] groups of `W` keys (`keys[g][..W]`: row pointers,
/// head dims contiguous) for query vectors `0..L` of `qt` (`qt[d * W + l]`):
/// `out[l * stride + g * W + x]` for key `x` of group `g`, each the chain
/// `acc = fma(q[d], k[d], acc)` over d in order. The groups' chains run side by side: one
/// group has only `L` chains, too few to cover the FMA latency. False where the level has no
/// transpose.
#[inline(always)]
unsafe fn keys_in_lanes<S: Simd, E: KvElem, const L: usize>(
    keys: &[[*const E; 16]; KEY_GROUPS],
    hd: usize,
    qt: *const f32,
    out: *mut f32,
    stride: usize,
) -> bool {
    unsafe {
        let mut acc = [[S::splat(0.0); L]; KEY_GROUPS];
        let mut d0 = 0;
        while d0 < hd {
            for (keys, acc) in keys.iter().zip(&mut acc) {
                let Some(kt) = E::transpose::<S>(keys, d0) else {
                    return false;
                };
                for (dd, &k) in kt.iter().enumerate().take(S::TRANSPOSE_COLS) {
                    for (l, a) in acc.iter_mut().enumerate() {
                        *a = S::fma(S::splat(*qt.add((d0 + dd) * S::W + l)), k, *a);
                    }
                }
            }
            d0 += S::TRANSPOSE_COLS;
        }
        for (g, acc) in acc.iter().enumerate() {
            for (l, &a) in acc.iter().enumerate() {
                S::store(out.add(l * stride + g * S::W), a);
            }
        }
    }
    true
}
