//! Model ops: RMSNorm, LayerNorm, rotary position embedding and scaled dot-product attention.
//! Half-precision inputs compute in f32 and round once at the end, as PyTorch's CPU kernels do.

use crate::dtype::{DType, Scalar};
use crate::error::{filled_vec, invalid, Error, Result};
use crate::kernels;
use crate::ops::creation::full;
use crate::ops::pointwise::where_;
use crate::tensor::Tensor;
use crate::Device;

/// The dtype used for the arithmetic of a float op: halves widen to f32.
fn compute_dtype(op: &'static str, t: &Tensor) -> Result<DType> {
    match t.dtype() {
        DType::F16 | DType::BF16 | DType::F32 => Ok(DType::F32),
        DType::F64 => Ok(DType::F64),
        d => Err(Error::UnsupportedDType { op, dtype: d }),
    }
}

/// An f32 CPU input (and f32 params) laid out as contiguous rows of the normalized size:
/// the case the kernels module's row norms handle.
struct F32Rows {
    x: Tensor,
    row_len: usize,
}

impl F32Rows {
    fn new(
        x: &Tensor,
        normalized_shape: &[usize],
        params: &[Option<&Tensor>],
    ) -> Result<Option<F32Rows>> {
        let all_f32 =
            x.dtype() == DType::F32 && params.iter().flatten().all(|p| p.dtype() == DType::F32);
        if !all_f32 || x.numel() == 0 || x.device() != crate::Device::Cpu {
            return Ok(None);
        }
        Ok(Some(F32Rows {
            x: x.contiguous()?,
            row_len: normalized_shape.iter().product(),
        }))
    }
}

/// `torch.finfo(dtype).eps`.
pub fn finfo_eps(dtype: DType) -> f64 {
    match dtype {
        DType::F64 => f64::EPSILON,
        DType::F16 => 0.000_976_562_5,
        DType::BF16 => 0.007_812_5,
        _ => f32::EPSILON as f64,
    }
}

/// The dims of `x` covered by `normalized_shape` (its trailing dims), checked.
fn norm_dims(op: &'static str, x: &Tensor, normalized_shape: &[usize]) -> Result<Vec<i64>> {
    let k = normalized_shape.len();
    if k == 0 || k > x.dim() || &x.shape()[x.dim() - k..] != normalized_shape {
        return Err(Error::ShapeMismatch {
            op,
            lhs: x.shape().to_vec(),
            rhs: normalized_shape.to_vec(),
            reason: "normalized_shape must match the trailing dims of the input".into(),
        });
    }
    Ok((x.dim() - k..x.dim()).map(|d| d as i64).collect())
}

fn check_param(op: &'static str, p: Option<&Tensor>, normalized_shape: &[usize]) -> Result<()> {
    if let Some(p) = p {
        if p.shape() != normalized_shape {
            return Err(Error::ShapeMismatch {
                op,
                lhs: normalized_shape.to_vec(),
                rhs: p.shape().to_vec(),
                reason: "weight/bias must have normalized_shape".into(),
            });
        }
    }
    Ok(())
}

/// `torch.nn.functional.rms_norm(x, normalized_shape, weight, eps)`;
/// `eps = None` uses `finfo(x.dtype).eps`.
pub fn rms_norm(
    x: &Tensor,
    normalized_shape: &[usize],
    weight: Option<&Tensor>,
    eps: Option<f64>,
) -> Result<Tensor> {
    let op = "rms_norm";
    let dims = norm_dims(op, x, normalized_shape)?;
    check_param(op, weight, normalized_shape)?;
    let c = compute_dtype(op, x)?;
    let eps = eps.unwrap_or_else(|| finfo_eps(x.dtype()));
    if let Some(rows) = F32Rows::new(x, normalized_shape, &[weight])? {
        let w = match weight {
            Some(w) => w.to_vec::<f32>()?,
            None => filled_vec(op, rows.row_len, 1.0f32)?,
        };
        let mut out = filled_vec(op, x.numel(), 0f32)?;
        rows.x
            .with_data(|xs: &[f32]| kernels::rms_norm_rows_f32(xs, &w, eps as f32, &mut out))?;
        return Tensor::from_vec(out, x.shape());
    }
    let xf = x.to_dtype(c)?;
    let ms = xf.mul(&xf)?.mean(&dims, true)?;
    let mut y = xf.mul(&ms.add(eps)?.rsqrt()?)?;
    if let Some(w) = weight {
        y = y.mul(&w.to_dtype(c)?)?;
    }
    y.to_dtype(x.dtype())
}

/// `torch.nn.functional.layer_norm(x, normalized_shape, weight, bias, eps)` (biased variance).
pub fn layer_norm(
    x: &Tensor,
    normalized_shape: &[usize],
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    eps: f64,
) -> Result<Tensor> {
    let op = "layer_norm";
    let dims = norm_dims(op, x, normalized_shape)?;
    check_param(op, weight, normalized_shape)?;
    check_param(op, bias, normalized_shape)?;
    let c = compute_dtype(op, x)?;
    if let Some(rows) = F32Rows::new(x, normalized_shape, &[weight, bias])? {
        let w = weight.map(|w| w.to_vec::<f32>()).transpose()?;
        let b = bias.map(|b| b.to_vec::<f32>()).transpose()?;
        let mut out = filled_vec(op, x.numel(), 0f32)?;
        rows.x.with_data(|xs: &[f32]| {
            for (xr, or) in xs.chunks(rows.row_len).zip(out.chunks_mut(rows.row_len)) {
                kernels::layer_norm_f32(xr, w.as_deref(), b.as_deref(), eps as f32, or);
            }
        })?;
        return Tensor::from_vec(out, x.shape());
    }
    if c == DType::F64 && x.device() == crate::Device::Cpu {
        // upstream's CPU kernel: row moments, then y = (x * rstd + (-rstd * mean)) * w + b
        let n: usize = normalized_shape.iter().product();
        let xv = x.to_vec::<f64>()?;
        let w = weight.map(|w| w.to_vec::<f64>()).transpose()?;
        let b = bias.map(|b| b.to_vec::<f64>()).transpose()?;
        let mut out = Vec::with_capacity(xv.len());
        if n > 0 {
            for row in xv.chunks(n) {
                let mean = crate::ops::reduce::neumaier(row.iter().copied()) / n as f64;
                let d = crate::ops::reduce::neumaier(row.iter().map(|v| v - mean));
                let ss = crate::ops::reduce::neumaier(row.iter().map(|v| (v - mean) * (v - mean)))
                    - d * d / n as f64;
                let var = (ss / n as f64).max(0.0);
                let rstd = 1.0 / (var + eps).sqrt();
                let bias_v = -rstd * mean;
                for (j, &v) in row.iter().enumerate() {
                    let mut y = v * rstd + bias_v;
                    if let Some(w) = &w {
                        y *= w[j];
                    }
                    if let Some(b) = &b {
                        y += b[j];
                    }
                    out.push(y);
                }
            }
        }
        return Tensor::from_f64s(&out, x.shape(), x.dtype());
    }
    let xf = x.to_dtype(c)?;
    let mean = xf.mean(&dims, true)?;
    let centered = xf.sub(&mean)?;
    let var = centered.mul(&centered)?.mean(&dims, true)?;
    let mut y = centered.mul(&var.add(eps)?.rsqrt()?)?;
    if let Some(w) = weight {
        y = y.mul(&w.to_dtype(c)?)?;
    }
    if let Some(b) = bias {
        y = y.add(&b.to_dtype(c)?)?;
    }
    y.to_dtype(x.dtype())
}

/// Which channels form a rotated pair in rotary embedding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RopeStyle {
    /// Pairs (i, i + d/2): Llama/HF `rotate_half`.
    HalfRotation,
    /// Pairs (2i, 2i + 1): GPT-J / original RoFormer.
    Interleaved,
}

/// Rotary embedding parameters.
#[derive(Debug, Clone, Copy)]
pub struct RopeConfig {
    /// Frequency base (10000 in the original paper).
    pub theta: f64,
    /// Which channels pair up.
    pub style: RopeStyle,
    /// Rotate only the first `rotary_dim` channels (all when `None`).
    pub rotary_dim: Option<usize>,
}

/// Applies rotary position embedding to `x` (`[..., seq, head_dim]`) at integer
/// `position_ids` (`[seq]`, or `[batch, seq]` for a 4-D `[batch, heads, seq, head_dim]` x).
/// Angles follow HF: `inv_freq = 1 / theta^(2i/d)` and `angle = pos * inv_freq` in f32.
pub fn rotary_embedding(x: &Tensor, position_ids: &Tensor, config: RopeConfig) -> Result<Tensor> {
    let op = "rotary_embedding";
    if x.dim() < 2 {
        return Err(invalid(op, "input needs at least [seq, head_dim]"));
    }
    let c = compute_dtype(op, x)?;
    let head_dim = x.shape()[x.dim() - 1];
    let rd = config.rotary_dim.unwrap_or(head_dim);
    if rd == 0 || !rd.is_multiple_of(2) || rd > head_dim {
        return Err(invalid(
            op,
            format!("rotary_dim {rd} must be even, positive and <= head_dim {head_dim}"),
        ));
    }
    if position_ids.dtype().is_float() || position_ids.dtype() == DType::Bool {
        return Err(invalid(
            op,
            format!(
                "position_ids must be integers, got {}",
                position_ids.dtype().name()
            ),
        ));
    }
    let half = rd / 2;
    let inv_freq: Vec<f32> = (0..half)
        .map(|i| 1.0 / (config.theta as f32).powf((2 * i) as f32 / rd as f32))
        .collect();
    let pos = position_ids.to_vec::<f32>()?;
    let angles: Vec<f32> = pos
        .iter()
        .flat_map(|&p| inv_freq.iter().map(move |&f| p * f))
        .collect();
    let mut ashape = position_ids.shape().to_vec();
    ashape.push(half);
    let angles = Tensor::from_vec(angles, &ashape)?;
    // [batch, seq, half] against [batch, heads, seq, dim]: add the heads dim.
    let angles = if position_ids.dim() == 2 && x.dim() == 4 {
        angles.unsqueeze(1)?
    } else {
        angles
    };
    let cos = angles.cos()?.to_dtype(c)?;
    let sin = angles.sin()?.to_dtype(c)?;
    let xf = x.to_dtype(c)?;
    let last = x.dim() as i64 - 1;
    let rot = xf.narrow(last, 0, rd)?;
    let (a, b) = match config.style {
        RopeStyle::HalfRotation => (
            rot.narrow(last, 0, half)?,
            rot.narrow(last, half as i64, half)?,
        ),
        RopeStyle::Interleaved => (
            rot.slice(last, Some(0), None, 2)?,
            rot.slice(last, Some(1), None, 2)?,
        ),
    };
    let ra = a.mul(&cos)?.sub(&b.mul(&sin)?)?;
    let rb = b.mul(&cos)?.add(&a.mul(&sin)?)?;
    let rotated = match config.style {
        RopeStyle::HalfRotation => crate::ops::index::cat(&[&ra, &rb], last)?,
        RopeStyle::Interleaved => {
            let st = crate::ops::index::stack(&[&ra, &rb], -1)?;
            st.flatten(last, last + 1)?
        }
    };
    let out = if rd < head_dim {
        crate::ops::index::cat(
            &[&rotated, &xf.narrow(last, rd as i64, head_dim - rd)?],
            last,
        )?
    } else {
        rotated
    };
    out.to_dtype(x.dtype())
}

/// Options of [`scaled_dot_product_attention`].
#[derive(Debug, Clone, Default)]
pub struct SdpaOptions {
    /// Bool (true = may attend) or additive float mask broadcastable to `[..., Lq, Lk]`.
    pub attn_mask: Option<Tensor>,
    /// Causal masking aligned bottom-right: query i attends keys `j <= i + (Lk - Lq)`.
    pub is_causal: bool,
    /// Score scale; defaults to `1 / sqrt(head_dim)`.
    pub scale: Option<f64>,
    /// Sliding window: query i attends only keys with `(i + Lk - Lq) - j < window`.
    pub window: Option<usize>,
}

/// The runtime's attention kernel (online softmax over key blocks, grouped-query heads read in
/// place) for the shapes a decoder's attention has: f32 on the CPU, `[B, H, L, E]`, no mask
/// tensor or window, keys `[B, Hkv, Lk, E]` contiguous per batch, and either causal
/// (bottom-right, `Lq <= Lk`) or one query that sees every key. `None` otherwise.
fn sdpa_f32_kernel(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    options: &SdpaOptions,
) -> Result<Option<Tensor>> {
    let cpu_f32 = |t: &Tensor| t.dtype() == DType::F32 && t.device() == Device::Cpu && t.dim() == 4;
    if !cpu_f32(q)
        || !cpu_f32(k)
        || !cpu_f32(v)
        || options.attn_mask.is_some()
        || options.window.is_some()
    {
        return Ok(None);
    }
    let (b, hq, lq, e) = (q.shape()[0], q.shape()[1], q.shape()[2], q.shape()[3]);
    let (hkv, lk) = (k.shape()[1], k.shape()[2]);
    let shapes_fit = k.shape() == [b, hkv, lk, e]
        && v.shape() == k.shape()
        && hkv > 0
        && hq % hkv == 0
        && e > 0
        && b > 0
        && lq > 0
        && lq <= lk
        && (options.is_causal || lq == 1);
    if !shapes_fit {
        return Ok(None);
    }
    let params = crate::kernels::AttentionParams {
        n_q: lq,
        n_heads: hq,
        n_kv_heads: hkv,
        head_dim: e,
        kv_len: lk,
        kv_capacity: lk,
        q_pos0: lk - lq,
        scale: options.scale.unwrap_or(1.0 / (e as f64).sqrt()) as f32,
        sliding_window: None,
        softcap: None,
    };
    // The kernel's layouts: queries [Lq, H, E], keys and values [Hkv, Lk, E].
    let queries = q.permute(&[0, 2, 1, 3])?.contiguous()?.to_vec::<f32>()?;
    let (keys, mut values) = (k.contiguous()?, v.contiguous()?);
    if keys.shares_storage(&values) {
        // One storage lock at a time (a second read lock could queue behind a writer).
        values = Tensor::from_vec(values.to_vec::<f32>()?, values.shape())?;
    }
    let per_q = lq * hq * e;
    let per_kv = hkv * lk * e;
    let mut out = vec![0f32; b * per_q];
    keys.with_data(|kd: &[f32]| {
        values.with_data(|vd: &[f32]| {
            for i in 0..b {
                crate::kernels::attention_f32(
                    &queries[i * per_q..(i + 1) * per_q],
                    &kd[i * per_kv..(i + 1) * per_kv],
                    &vd[i * per_kv..(i + 1) * per_kv],
                    &mut out[i * per_q..(i + 1) * per_q],
                    &mut [],
                    params,
                )?;
            }
            Ok::<(), crate::kernels::KernelError>(())
        })
    })??
    .map_err(|e| invalid("scaled_dot_product_attention", e.to_string()))?;
    Tensor::from_vec(out, &[b, lq, hq, e])?
        .permute(&[0, 2, 1, 3])?
        .contiguous()
        .map(Some)
}

/// Scaled dot-product attention over `q [..., Hq, Lq, E]`, `k [..., Hkv, Lk, E]`,
/// `v [..., Hkv, Lk, Ev]`; `Hkv` must divide `Hq` (grouped-query heads: q head h uses kv head
/// `h / (Hq / Hkv)`). Rows with no attendable key give zeros, as PyTorch 2.15 does.
pub fn scaled_dot_product_attention(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    options: &SdpaOptions,
) -> Result<Tensor> {
    let op = "scaled_dot_product_attention";
    if q.dim() < 2 || k.dim() != q.dim() || v.dim() != q.dim() {
        return Err(invalid(
            op,
            format!(
                "q, k, v must have the same rank >= 2, got {}, {}, {}",
                q.dim(),
                k.dim(),
                v.dim()
            ),
        ));
    }
    if q.dtype() != k.dtype() || q.dtype() != v.dtype() {
        return Err(invalid(
            op,
            format!(
                "expected q, k, v to have the same dtype, got {}, {}, {}",
                q.dtype().name(),
                k.dtype().name(),
                v.dtype().name()
            ),
        ));
    }
    if let Some(r) = sdpa_f32_kernel(q, k, v, options)? {
        return Ok(r);
    }
    let c = compute_dtype(op, q)?;
    let n = q.dim();
    let (lq, e) = (q.shape()[n - 2], q.shape()[n - 1]);
    let lk = k.shape()[n - 2];
    if k.shape()[n - 1] != e || v.shape()[n - 2] != lk {
        return Err(Error::ShapeMismatch {
            op,
            lhs: q.shape().to_vec(),
            rhs: k.shape().to_vec(),
            reason: "q/k head dims or k/v lengths differ".into(),
        });
    }
    let (mut kk, mut vv) = (k.to_dtype(c)?, v.to_dtype(c)?);
    if n >= 3 {
        let (hq, hkv) = (q.shape()[n - 3], k.shape()[n - 3]);
        if hkv != v.shape()[n - 3] || hkv == 0 || hq % hkv != 0 {
            return Err(invalid(
                op,
                format!("number of kv heads ({hkv}) must divide the number of query heads ({hq})"),
            ));
        }
        if hq != hkv {
            kk = kk.repeat_interleave(hq / hkv, Some(n as i64 - 3))?;
            vv = vv.repeat_interleave(hq / hkv, Some(n as i64 - 3))?;
        }
    }
    let scale = options.scale.unwrap_or(1.0 / (e as f64).sqrt());
    let scores = q.to_dtype(c)?.matmul(&kk.transpose(-2, -1)?)?.mul(scale)?;
    // Structural mask (causal / window) as a [Lq, Lk] bool "may attend" table.
    let shift = lk as i64 - lq as i64;
    let allowed: Vec<bool> = (0..lq * lk)
        .map(|idx| {
            let (i, j) = ((idx / lk.max(1)) as i64, (idx % lk.max(1)) as i64);
            let pos = i + shift;
            (!options.is_causal || j <= pos)
                && options
                    .window
                    .is_none_or(|w| pos - j < i64::try_from(w).unwrap_or(i64::MAX))
        })
        .collect();
    let mut allow = Tensor::from_vec(allowed, &[lq, lk])?;
    let mut scores = scores;
    if let Some(m) = &options.attn_mask {
        if m.dtype() == DType::Bool {
            allow = allow.logical_and(m)?;
        } else {
            scores = scores.add(&m.to_dtype(c)?)?;
        }
    }
    let neg_inf = Tensor::scalar_tensor(Scalar::Float(f64::NEG_INFINITY), c);
    let masked = where_(&allow, &scores, &neg_inf)?;
    let probs = masked.softmax(-1)?;
    // Rows where every score is -inf (bool-masked or additive -inf) give NaN from softmax;
    // PyTorch returns zeros there.
    let any_allowed = masked.ne(f64::NEG_INFINITY)?.any(&[-1], true)?;
    let zero = full(&[], Scalar::Float(0.0), Some(c))?;
    let probs = where_(&any_allowed, &probs, &zero)?;
    probs.matmul(&vv)?.to_dtype(q.dtype())
}

// ----- torch face functionals: group/batch/instance norm, losses -----

/// The shape `[1, C, 1, ...]` used to broadcast a per-channel vector over `x`.
fn channel_shape(x: &Tensor) -> Vec<i64> {
    let mut s = vec![1i64; x.dim()];
    if x.dim() > 1 {
        s[1] = x.shape()[1] as i64;
    } else if x.dim() == 1 {
        s[0] = x.shape()[0] as i64;
    }
    s
}

fn affine(
    y: Tensor,
    x: &Tensor,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    c: DType,
) -> Result<Tensor> {
    let cs = channel_shape(x);
    let mut y = y;
    if let Some(w) = weight {
        y = y.mul(&w.to_dtype(c)?.reshape(&cs)?)?;
    }
    if let Some(b) = bias {
        y = y.add(&b.to_dtype(c)?.reshape(&cs)?)?;
    }
    Ok(y)
}

/// `torch.nn.functional.group_norm(x [N, C, *], groups, weight, bias, eps)`.
pub fn group_norm(
    x: &Tensor,
    groups: usize,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    eps: f64,
) -> Result<Tensor> {
    let op = "group_norm";
    let c = compute_dtype(op, x)?;
    if x.dim() < 2 || groups == 0 || !x.shape()[1].is_multiple_of(groups) {
        return Err(invalid(
            op,
            format!(
                "Expected number of channels in input to be divisible by num_groups, but got input of shape {:?} and num_groups={groups}",
                x.shape()
            ),
        ));
    }
    let xf = x.to_dtype(DType::F64)?;
    let n = x.shape()[0] as i64;
    let g = xf.reshape(&[n, groups as i64, -1])?;
    let mean = g.mean(&[2], true)?;
    let var = g.var(
        &[2],
        crate::ops::reduce::VarOptions {
            correction: 0.0,
            keepdim: true,
        },
    )?;
    let y = g.sub(&mean)?.div(&var.add(eps)?.sqrt()?)?;
    let shape: Vec<i64> = x.shape().iter().map(|&s| s as i64).collect();
    let y = affine(y.reshape(&shape)?, x, weight, bias, DType::F64)?;
    let _ = c;
    y.to_dtype(x.dtype())
}

/// `torch.nn.functional.batch_norm`: batch statistics in training (updating the running
/// stats in place with `momentum`, unbiased variance), running statistics otherwise.
#[allow(clippy::too_many_arguments)]
pub fn batch_norm(
    x: &Tensor,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    running_mean: Option<&Tensor>,
    running_var: Option<&Tensor>,
    training: bool,
    momentum: f64,
    eps: f64,
) -> Result<Tensor> {
    let op = "batch_norm";
    compute_dtype(op, x)?;
    if x.dim() < 2 {
        // Upstream reads the channel count from dim 1, which a 1-D input lacks: zero
        // channels, so only empty statistics fit and only an empty input has a result.
        for (name, t) in [("running_mean", running_mean), ("running_var", running_var)] {
            if let Some(t) = t.filter(|t| t.numel() != 0) {
                return Err(invalid(
                    op,
                    format!("{name} should contain 0 elements not {}", t.numel()),
                ));
            }
        }
        if x.numel() == 0 {
            return x.deep_clone();
        }
        return Err(invalid(op, "expected at least 2D input"));
    }
    let xf = x.to_dtype(DType::F64)?;
    let dims: Vec<i64> = (0..x.dim() as i64).filter(|&d| d != 1).collect();
    let cs = channel_shape(x);
    let (mean, var) = if training {
        let count = x.numel() / x.shape()[1].max(1);
        if count <= 1 {
            return Err(invalid(
                op,
                format!(
                    "Expected more than 1 value per channel when training, got input size {:?}",
                    x.shape()
                ),
            ));
        }
        let mean = xf.mean(&dims, false)?;
        let var = xf.var(
            &dims,
            crate::ops::reduce::VarOptions {
                correction: 0.0,
                keepdim: false,
            },
        )?;
        if let Some(rm) = running_mean {
            let upd = rm
                .to_dtype(DType::F64)?
                .mul(1.0 - momentum)?
                .add(&mean.mul(momentum)?)?;
            rm.copy_(&upd)?;
        }
        if let Some(rv) = running_var {
            let unbiased = var.mul(count as f64 / (count as f64 - 1.0))?;
            let upd = rv
                .to_dtype(DType::F64)?
                .mul(1.0 - momentum)?
                .add(&unbiased.mul(momentum)?)?;
            rv.copy_(&upd)?;
        }
        (mean, var)
    } else {
        match (running_mean, running_var) {
            (Some(m), Some(v)) => (m.to_dtype(DType::F64)?, v.to_dtype(DType::F64)?),
            _ => {
                return Err(invalid(
                    op,
                    "running_mean and running_var must be defined in evaluation mode",
                ))
            }
        }
    };
    let y = xf
        .sub(&mean.reshape(&cs)?)?
        .div(&var.add(eps)?.sqrt()?.reshape(&cs)?)?;
    affine(y, x, weight, bias, DType::F64)?.to_dtype(x.dtype())
}

/// `torch.nn.functional.instance_norm` with input statistics (per sample and channel).
pub fn instance_norm(
    x: &Tensor,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    eps: f64,
) -> Result<Tensor> {
    let op = "instance_norm";
    compute_dtype(op, x)?;
    if x.dim() < 3 {
        return Err(invalid(op, "expected at least 3D input"));
    }
    let xf = x.to_dtype(DType::F64)?;
    let dims: Vec<i64> = (2..x.dim() as i64).collect();
    let mean = xf.mean(&dims, true)?;
    let var = xf.var(
        &dims,
        crate::ops::reduce::VarOptions {
            correction: 0.0,
            keepdim: true,
        },
    )?;
    let y = xf.sub(&mean)?.div(&var.add(eps)?.sqrt()?)?;
    affine(y, x, weight, bias, DType::F64)?.to_dtype(x.dtype())
}

/// Loss reductions (upstream's `at::Reduction`: 0 none, 1 mean, 2 sum).
fn reduce_loss(l: Tensor, reduction: i64, out: DType) -> Result<Tensor> {
    match reduction {
        0 => l.to_dtype(out),
        1 => l.mean(&[], false)?.to_dtype(out),
        2 => l.sum(&[], false)?.to_dtype(out),
        r => Err(invalid(
            "loss",
            format!("{r} is not a valid value for reduction"),
        )),
    }
}

/// `nll_loss_nd(logp [N, C, *] or [C], target [N, *] or [], weight, reduction, ignore_index)`.
pub fn nll_loss(
    logp: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    reduction: i64,
    ignore_index: i64,
) -> Result<Tensor> {
    let op = "nll_loss";
    compute_dtype(op, logp)?;
    if target.dtype().is_float() || target.dtype() == DType::Bool {
        return Err(invalid(
            op,
            format!(
                "expected scalar type Long but found {}",
                target.dtype().name()
            ),
        ));
    }
    let (nb, ncls, inner) = match logp.dim() {
        0 => return Err(invalid(op, "input tensor should be 1D or more")),
        1 => (1usize, logp.shape()[0], 1usize),
        _ => (
            logp.shape()[0],
            logp.shape()[1],
            logp.shape()[2..].iter().product(),
        ),
    };
    let expect: Vec<usize> = match logp.dim() {
        1 => vec![],
        _ => std::iter::once(logp.shape()[0])
            .chain(logp.shape()[2..].iter().copied())
            .collect(),
    };
    if target.shape() != expect.as_slice() {
        return Err(Error::ShapeMismatch {
            op,
            lhs: logp.shape().to_vec(),
            rhs: target.shape().to_vec(),
            reason: "expected target of the input's batch shape".into(),
        });
    }
    let lv = logp.to_vec::<f64>()?;
    let tv = target.to_vec::<i64>()?;
    let wv = match weight {
        Some(w) => {
            if w.numel() != ncls {
                return Err(invalid(
                    op,
                    format!("weight tensor should be defined either for all {ncls} classes or no classes but got weight tensor of shape: {:?}", w.shape()),
                ));
            }
            w.to_vec::<f64>()?
        }
        None => vec![1.0; ncls],
    };
    let mut losses = Vec::with_capacity(nb * inner);
    let mut wsum = 0.0;
    for b in 0..nb {
        for i in 0..inner {
            let t = tv[b * inner + i];
            if t == ignore_index {
                losses.push(0.0);
                continue;
            }
            if t < 0 || t as usize >= ncls {
                return Err(Error::IndexOutOfRange {
                    op,
                    index: t,
                    size: ncls,
                });
            }
            let w = wv[t as usize];
            wsum += w;
            losses.push(-w * lv[(b * ncls + t as usize) * inner + i]);
        }
    }
    let d = logp.dtype();
    match reduction {
        0 => Tensor::from_f64s(&losses, &expect, d),
        1 => Tensor::from_f64s(&[losses.iter().sum::<f64>() / wsum], &[], d),
        2 => Tensor::from_f64s(&[losses.iter().sum::<f64>()], &[], d),
        r => Err(invalid(
            op,
            format!("{r} is not a valid value for reduction"),
        )),
    }
}

/// `cross_entropy_loss(input, target, weight, reduction, ignore_index, label_smoothing)` with
/// class-index or class-probability targets.
pub fn cross_entropy(
    input: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    reduction: i64,
    ignore_index: i64,
    label_smoothing: f64,
) -> Result<Tensor> {
    let op = "cross_entropy";
    compute_dtype(op, input)?;
    let class_dim: i64 = if input.dim() >= 2 { 1 } else { 0 };
    let ncls = input.shape().get(class_dim as usize).copied().unwrap_or(1);
    let logp = input.log_softmax(class_dim)?;
    let lp = logp.to_dtype(DType::F64)?;
    let wshape: Vec<i64> = {
        let mut s = vec![1i64; input.dim()];
        if !s.is_empty() {
            s[class_dim as usize] = ncls as i64;
        }
        s
    };
    let w64 = match weight {
        Some(w) => Some(w.to_dtype(DType::F64)?.reshape(&wshape)?),
        None => None,
    };
    if target.dtype().is_float() {
        if target.shape() != input.shape() {
            return Err(Error::ShapeMismatch {
                op,
                lhs: input.shape().to_vec(),
                rhs: target.shape().to_vec(),
                reason: "probability targets must have the input's shape".into(),
            });
        }
        let mut t = target.to_dtype(DType::F64)?;
        if label_smoothing > 0.0 {
            t = t
                .mul(1.0 - label_smoothing)?
                .add(label_smoothing / ncls as f64)?;
        }
        let mut prod = lp.mul(&t)?;
        if let Some(w) = &w64 {
            prod = prod.mul(w)?;
        }
        let loss = prod.sum(&[class_dim], false)?.neg()?;
        return match reduction {
            1 => {
                let n = (input.numel() / ncls.max(1)) as f64;
                loss.sum(&[], false)?.div(n)?.to_dtype(input.dtype())
            }
            r => reduce_loss(loss, r, input.dtype()),
        };
    }
    let nll = nll_loss(&logp, target, weight, reduction, ignore_index)?;
    if label_smoothing <= 0.0 {
        return Ok(nll);
    }
    let ignore = target.eq(ignore_index)?;
    let mut sm = match &w64 {
        Some(w) => lp.mul(w)?.sum(&[class_dim], false)?.neg()?,
        None => lp.sum(&[class_dim], false)?.neg()?,
    };
    sm = sm.masked_fill(&ignore, Scalar::Float(0.0))?;
    let ret = match reduction {
        1 => {
            let denom = match weight {
                Some(w) => {
                    let keep = ignore.logical_not()?;
                    let t = target.masked_fill(&ignore, Scalar::Int(0))?;
                    let wt = w
                        .to_dtype(DType::F64)?
                        .index_select(0, &t.reshape(&[-1])?)?;
                    wt.mul(&keep.reshape(&[-1])?)?.sum(&[], false)?
                }
                None => ignore
                    .logical_not()?
                    .sum(&[], false)?
                    .to_dtype(DType::F64)?,
            };
            sm.sum(&[], false)?.div(&denom)?
        }
        2 => sm.sum(&[], false)?,
        _ => sm,
    };
    nll.to_dtype(DType::F64)?
        .mul(1.0 - label_smoothing)?
        .add(&ret.mul(label_smoothing / ncls as f64)?)?
        .to_dtype(input.dtype())
}

/// `kl_div(input, target, reduction, log_target)`.
pub fn kl_div(input: &Tensor, target: &Tensor, reduction: i64, log_target: bool) -> Result<Tensor> {
    let out = crate::dtype::promote_types(input.dtype(), target.dtype());
    let x = input.to_dtype(DType::F64)?;
    let t = target.to_dtype(DType::F64)?;
    let l = if log_target {
        t.exp()?.mul(&t.sub(&x)?)?
    } else {
        t.xlogy(&t)?.sub(&t.mul(&x)?)?
    };
    reduce_loss(l, reduction, out)
}
