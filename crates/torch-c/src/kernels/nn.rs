//! Neural-network functionals: norms (layer/rms/group/batch/instance), attention,
//! convolutions, pooling, padding and losses.

#![allow(unused_imports)]

use super::*;
use torchnative_core::ops::conv::{self, ConvOptions, PadMode, PoolKind, PoolOptions};
use torchnative_core::ops::linalg;
use torchnative_core::ops::nn as cnn;

type R = torchnative_core::Result<Tensor>;

/// Lays `result` out like `like` (same dim order by stride), as upstream's kernels that
/// allocate with `empty_like(input)` do. Same shapes required; otherwise unchanged.
fn follow_layout(result: Tensor, like: &Tensor) -> R {
    if result.shape() != like.shape() || like.is_contiguous() || like.dim() < 2 {
        return Ok(result);
    }
    let n = like.dim();
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| like.strides()[b].cmp(&like.strides()[a]).then(a.cmp(&b)));
    if order.iter().enumerate().all(|(i, &d)| i == d) {
        return Ok(result);
    }
    let perm: Vec<i64> = order.iter().map(|&d| d as i64).collect();
    let mut inverse = vec![0i64; n];
    for (pos, &d) in order.iter().enumerate() {
        inverse[d] = pos as i64;
    }
    result.permute(&perm)?.contiguous()?.permute(&inverse)
}

fn err(op: &'static str, reason: impl Into<String>) -> PyErr {
    core_err(torchnative_core::Error::InvalidArgument {
        op,
        reason: reason.into(),
    })
}

// ----- attention -----

fn sdpa(c: &Ctx<'_, '_>) -> PyResult<Tensor> {
    let op = "scaled_dot_product_attention";
    let (q, k, v) = (c.tensor(0)?, c.tensor(1)?, c.tensor(2)?);
    let mask = c.opt_tensor(3)?;
    let dropout = c.float(4)?;
    let is_causal = c.bool(5)?;
    let scale = match &c.values[6] {
        crate::value::Value::None => None,
        _ => Some(c.float(6)?),
    };
    let gqa = c.bool(7)?;
    if mask.is_some() && is_causal {
        return Err(err(
            op,
            "_scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True",
        ));
    }
    if dropout > 0.0 {
        return Err(core_err(torchnative_core::Error::UnsupportedDType {
            op: "scaled_dot_product_attention (dropout_p > 0)",
            dtype: q.dtype(),
        }));
    }
    let n = q.dim();
    if n >= 3 && k.dim() == n {
        let (hq, hk) = (q.shape()[n - 3], k.shape()[n - 3]);
        // One kv head broadcasts over the query heads (matmul batch broadcasting, as upstream's
        // math path does); other differing counts need enable_gqa.
        if hq != hk && hk != 1 && (!gqa || hk == 0 || hq % hk != 0) {
            return Err(err(
                op,
                format!(
                    "The size of tensor a ({hq}) must match the size of tensor b ({hk}) at non-singleton dimension {}",
                    n - 3
                ),
            ));
        }
    }
    // Upstream's causal mask is top-left aligned: query i attends keys j <= i. With as many
    // queries as keys that is the core's (bottom-right) causal rule, which its attention
    // kernel applies without a mask; otherwise the mask is spelled out.
    let mut attn_mask = mask;
    let square = n >= 2 && q.shape()[n - 2] == k.shape()[n - 2];
    let core_causal = is_causal && square;
    if is_causal && n >= 2 && !square {
        let (lq, lk) = (q.shape()[n - 2], k.shape()[n - 2]);
        let allowed: Vec<bool> = (0..lq * lk)
            .map(|i| i % lk.max(1) <= i / lk.max(1))
            .collect();
        attn_mask = Some(Tensor::from_vec(allowed, &[lq, lk]).map_err(core_err)?);
    }
    let opts = torchnative_core::SdpaOptions {
        attn_mask,
        is_causal: core_causal,
        scale,
        window: None,
    };
    let r = torchnative_core::scaled_dot_product_attention(&q, &k, &v, &opts).map_err(core_err)?;
    // The output follows the query's layout.
    let like = if r.shape() == q.shape() { &q } else { &r };
    follow_layout(r.clone(), like).map_err(core_err)
}

/// `_native_multi_head_attention`, the inference fast path of `nn.MultiheadAttention`
/// (`batch_first`, packed in-projection), as upstream's CPU kernel computes it: the packed
/// in-projection, q scaled by 1/sqrt(head_dim) after its bias, a masked softmax (a float mask
/// masks where it is nonzero, upstream casting it to bool; a row with every key masked is NaN,
/// as upstream's), the out-projection; weights averaged over heads when asked for.
fn native_multi_head_attention(c: &Ctx<'_, '_>) -> PyResult<Out> {
    let op = "_native_multi_head_attention";
    let (query, key, value) = (c.tensor(0)?, c.tensor(1)?, c.tensor(2)?);
    let (embed_dim, num_head) = (c.int(3)?, c.int(4)?);
    let (qkv_w, qkv_b, proj_w, proj_b) = (c.tensor(5)?, c.tensor(6)?, c.tensor(7)?, c.tensor(8)?);
    let mask = c.opt_tensor(9)?;
    let (need_weights, average) = (c.bool(10)?, c.bool(11)?);
    let mask_type = c.opt_int(12)?;
    for (name, t) in [("query", &query), ("key", &key), ("value", &value)] {
        if t.dim() != 3 {
            return Err(err(
                op,
                format!("expected 3-D `{name}`, got {}-D tensor", t.dim()),
            ));
        }
    }
    if query.shape() != key.shape() || key.shape() != value.shape() {
        return Err(err(op, "expected `query`/`key`/`value` shapes to match"));
    }
    let d = embed_dim.max(0) as usize;
    if query.shape()[2] != d {
        return Err(err(
            op,
            format!(
                "passed-in embed_dim {d} didn't match last dim of query {}",
                query.shape()[2]
            ),
        ));
    }
    if qkv_w.dim() != 2 || qkv_w.shape() != [3 * d, d] {
        return Err(err(
            op,
            "expected `qkv_weight` of shape [3 * embed_dim, embed_dim]",
        ));
    }
    if qkv_b.dim() != 1 || qkv_b.shape()[0] != 3 * d {
        return Err(err(op, "expected 1-D `qkv_bias` of 3 * embed_dim elements"));
    }
    if num_head <= 0 || d % num_head as usize != 0 {
        return Err(err(op, "`embed_dim` must divide evenly by `num_heads`"));
    }
    let (b, t, h) = (query.shape()[0], query.shape()[1], num_head as usize);
    let dh = d / h;
    let heads = |x: &Tensor| -> R {
        x.reshape(&[b as i64, t as i64, h as i64, dh as i64])?
            .transpose(1, 2)
    };
    let run = || -> torchnative_core::Result<(Tensor, Option<Tensor>)> {
        let w = qkv_w.chunk(3, 0)?;
        let bias = qkv_b.chunk(3, 0)?;
        let project = |x: &Tensor, i: usize| linalg::linear(x, &w[i], Some(&bias[i]));
        let q = heads(&project(&query, 0)?)?.mul(1.0 / (dh as f64).sqrt())?;
        let k = heads(&project(&key, 1)?)?;
        let v = heads(&project(&value, 2)?)?;
        let mut scores = q.matmul(&k.transpose(2, 3)?)?;
        if let Some(m) = &mask {
            let masked = if m.dtype() == DType::Bool {
                m.clone()
            } else {
                m.ne(0.0)?
            };
            // Key padding masks ([B, S], type 1) cover every head and query.
            let masked = if mask_type == Some(1) && masked.dim() == 2 {
                masked.reshape(&[b as i64, 1, 1, t as i64])?
            } else {
                masked
            };
            let masked = masked.broadcast_to(scores.shape())?;
            scores = scores.masked_fill(&masked, Scalar::Float(f64::NEG_INFINITY))?;
        }
        scores = scores.softmax(-1)?;
        let ctx = scores
            .matmul(&v)?
            .transpose(1, 2)?
            .reshape(&[b as i64, t as i64, d as i64])?;
        let out = linalg::linear(&ctx, &proj_w, Some(&proj_b))?;
        let weights = match (need_weights, average) {
            (false, _) => None,
            (true, true) => Some(scores.sum(&[1], false)?.div(h as f64)?),
            (true, false) => Some(scores),
        };
        Ok((out, weights))
    };
    let (out, weights) = run().map_err(core_err)?;
    let py = c.py;
    let weights = match weights {
        Some(w) => crate::tensor::wrap(py, w)?,
        None => py.None(),
    };
    let pair = pyo3::types::PyTuple::new(py, [crate::tensor::wrap(py, out)?, weights])?;
    Ok(Out::Object(pair.into_any().unbind()))
}

// ----- convolution -----

fn conv_call(
    c: &Ctx<'_, '_>,
    nd: usize,
    padding: ConvPadding,
    transposed: bool,
) -> PyResult<Tensor> {
    let op = "conv";
    let (x, w, b) = (c.tensor(0)?, c.tensor(1)?, c.opt_tensor(2)?);
    let stride = conv::expand_param(op, "stride", &c.ints(3)?, nd).map_err(core_err)?;
    // conv_transpose: (.., stride, padding, output_padding, groups, dilation)
    let (dil_i, groups_i) = if transposed { (7, 6) } else { (5, 6) };
    let dilation = conv::expand_param(op, "dilation", &c.ints(dil_i)?, nd).map_err(core_err)?;
    let groups = c.int(groups_i)?;
    let output_padding = if transposed {
        conv::expand_param(op, "output_padding", &c.ints(5)?, nd).map_err(core_err)?
    } else {
        vec![0; nd]
    };
    let unbatched = x.dim() == nd + 1;
    let xb = if unbatched {
        x.unsqueeze(0).map_err(core_err)?
    } else {
        x.clone()
    };
    if xb.dim() != nd + 2 {
        return Err(err(
            op,
            format!(
                "Expected {}D (unbatched) or {}D (batched) input to conv{nd}d, but got input of size: {:?}",
                nd + 1,
                nd + 2,
                x.shape()
            ),
        ));
    }
    let (pad_lo, pad_hi) = match padding {
        ConvPadding::Ints => {
            let p = conv::expand_param(op, "padding", &c.ints(4)?, nd).map_err(core_err)?;
            (p.clone(), p)
        }
        ConvPadding::Str => match c.str(4)?.as_str() {
            "valid" => (vec![0; nd], vec![0; nd]),
            "same" => {
                if stride.iter().any(|&s| s != 1) {
                    return Err(err(
                        op,
                        "padding='same' is not supported for strided convolutions",
                    ));
                }
                let ks = &w.shape()[2..];
                let mut lo = Vec::new();
                let mut hi = Vec::new();
                for (d, &dl) in dilation.iter().enumerate().take(nd) {
                    let total = dl * (ks.get(d).copied().unwrap_or(1) as i64 - 1);
                    lo.push(total / 2);
                    hi.push(total - total / 2);
                }
                (lo, hi)
            }
            s => return Err(err(op, format!("Invalid padding string: '{s}'"))),
        },
    };
    let o = ConvOptions {
        stride,
        pad_lo,
        pad_hi,
        dilation,
        groups,
        transposed,
        output_padding,
    };
    let r = conv::conv(&xb, &w, b.as_ref(), &o).map_err(core_err)?;
    let r = if unbatched {
        r.squeeze_dims(&[0]).map_err(core_err)?
    } else {
        follow_layout_channels(r, &xb).map_err(core_err)?
    };
    Ok(r)
}

/// channels_last input -> channels_last output (upstream's suggested memory format).
fn follow_layout_channels(r: Tensor, x: &Tensor) -> R {
    if x.dim() == 4 && !x.is_contiguous() {
        let s = x.strides();
        let (c, h, w) = (s[1], s[2], s[3]);
        if c == 1 && w >= c && h >= w {
            return r
                .permute(&[0, 2, 3, 1])?
                .contiguous()?
                .permute(&[0, 3, 1, 2]);
        }
    }
    Ok(r)
}

#[derive(Clone, Copy)]
enum ConvPadding {
    Ints,
    Str,
}

fn convolution(c: &Ctx<'_, '_>) -> PyResult<Tensor> {
    let op = "convolution";
    let (x, w, b) = (c.tensor(0)?, c.tensor(1)?, c.opt_tensor(2)?);
    let nd = w.dim().saturating_sub(2);
    let p = conv::expand_param(op, "padding", &c.ints(4)?, nd).map_err(core_err)?;
    let o = ConvOptions {
        stride: conv::expand_param(op, "stride", &c.ints(3)?, nd).map_err(core_err)?,
        pad_lo: p.clone(),
        pad_hi: p,
        dilation: conv::expand_param(op, "dilation", &c.ints(5)?, nd).map_err(core_err)?,
        transposed: c.bool(6)?,
        output_padding: conv::expand_param(op, "output_padding", &c.ints(7)?, nd)
            .map_err(core_err)?,
        groups: c.int(8)?,
    };
    conv::conv(&x, &w, b.as_ref(), &o).map_err(core_err)
}

// ----- pooling -----

/// Pooling options from the arguments `kernel_size, stride, padding[, dilation], ceil_mode`,
/// the first of them at `first` (1 in the forwards, 2 in the backwards after `grad_output`).
fn pool_opts(
    c: &Ctx<'_, '_>,
    nd: usize,
    first: usize,
    dilation: Option<usize>,
    ceil_i: usize,
) -> PyResult<PoolOptions> {
    let op = "pool";
    let kernel = conv::expand_param(op, "kernel_size", &c.ints(first)?, nd).map_err(core_err)?;
    let s = c.ints(first + 1)?;
    let stride = if s.is_empty() {
        kernel.clone()
    } else {
        conv::expand_param(op, "stride", &s, nd).map_err(core_err)?
    };
    Ok(PoolOptions {
        kernel,
        stride,
        padding: conv::expand_param(op, "padding", &c.ints(first + 2)?, nd).map_err(core_err)?,
        dilation: match dilation {
            Some(i) => conv::expand_param(op, "dilation", &c.ints(i)?, nd).map_err(core_err)?,
            None => vec![1; nd],
        },
        ceil_mode: c.bool(ceil_i)?,
    })
}

fn max_pool(c: &Ctx<'_, '_>, nd: usize) -> PyResult<(Tensor, Tensor)> {
    let o = pool_opts(c, nd, 1, Some(4), 5)?;
    conv::pool(&c.tensor(0)?, PoolKind::Max, &o).map_err(core_err)
}

fn avg_pool(c: &Ctx<'_, '_>, nd: usize) -> PyResult<Tensor> {
    let o = pool_opts(c, nd, 1, None, 4)?;
    let divisor = if nd >= 2 { c.opt_int(6)? } else { None };
    let x = c.tensor(0)?;
    if nd == 3 && matches!(x.dtype(), DType::F16 | DType::BF16) {
        return Err(core_err(torchnative_core::Error::UnsupportedDType {
            op: "avg_pool3d",
            dtype: x.dtype(),
        }));
    }
    if divisor == Some(0) {
        return Err(err("avg_pool2d", "divisor must be not zero"));
    }
    let kind = PoolKind::Avg {
        count_include_pad: c.bool(5)?,
        divisor,
    };
    Ok(conv::pool(&c.tensor(0)?, kind, &o).map_err(core_err)?.0)
}

/// `max_pool{2,3}d_with_indices_backward(grad_output, self, kernel_size, stride, padding,
/// dilation, ceil_mode, indices)`.
fn max_pool_backward(c: &Ctx<'_, '_>, nd: usize) -> PyResult<Tensor> {
    let o = pool_opts(c, nd, 2, Some(5), 6)?;
    let indices = c.tensor(7)?;
    conv::pool_backward(
        &c.tensor(0)?,
        &c.tensor(1)?,
        PoolKind::Max,
        &o,
        Some(&indices),
    )
    .map_err(core_err)
}

/// `avg_pool{2,3}d_backward(grad_output, self, kernel_size, stride, padding, ceil_mode,
/// count_include_pad, divisor_override)`.
fn avg_pool_backward(c: &Ctx<'_, '_>, nd: usize) -> PyResult<Tensor> {
    let o = pool_opts(c, nd, 2, None, 5)?;
    let divisor = c.opt_int(7)?;
    if divisor == Some(0) {
        return Err(err("avg_pool2d_backward", "divisor must be not zero"));
    }
    let kind = PoolKind::Avg {
        count_include_pad: c.bool(6)?,
        divisor,
    };
    conv::pool_backward(&c.tensor(0)?, &c.tensor(1)?, kind, &o, None).map_err(core_err)
}

fn pair(r: (Tensor, Tensor)) -> PyResult<Out> {
    Ok(Out::Tensors(vec![r.0, r.1]))
}

// ----- padding -----

fn pad(c: &Ctx<'_, '_>) -> PyResult<Tensor> {
    let x = c.tensor(0)?;
    let p = c.ints(1)?;
    let mode = c.str(2)?;
    let value = match &c.values[3] {
        crate::value::Value::None => None,
        _ => Some(c.float(3)?),
    };
    let m = match mode.as_str() {
        "constant" => {
            let v = match value {
                Some(v) if x.dtype().is_float() => Scalar::Float(v),
                Some(v) => Scalar::Int(v as i64),
                None => Scalar::Int(0),
            };
            return conv::constant_pad(&x, &p, v).map_err(core_err);
        }
        "reflect" => PadMode::Reflect,
        "replicate" => PadMode::Replicate,
        "circular" => PadMode::Circular,
        m => return Err(err("pad", format!("Unrecognised padding mode {m}"))),
    };
    if value.is_some_and(|v| v != 0.0) {
        return Err(err(
            "pad",
            format!("Padding mode \"{mode}\" doesn't take in value argument"),
        ));
    }
    conv::pad_mode(&x, &p, m).map_err(core_err)
}

// ----- dropout (upstream's CPU path: input * empty_like(input).bernoulli_(1 - p) / (1 - p)) -----

/// A tensor of `shape`/`dtype` filled by `bernoulli_(p)` from the default generator.
fn bernoulli_noise(c: &Ctx<'_, '_>, shape: &[usize], dtype: DType, p: f64) -> PyResult<Tensor> {
    let t = Tensor::empty_on(shape, dtype, Device::Cpu).map_err(core_err)?;
    let gen = crate::random::default_generator(c.py)?;
    let g = gen.bind(c.py).borrow();
    let mut guard = g.lock();
    torchnative_core::with_dtype!(dtype, T => t.with_data_mut::<T, _>(|d: &mut [T]| {
        torchnative_core::torch_random::bernoulli_scalar_(&mut guard, d, p)
    }))
    .map_err(core_err)?
    .map_err(core_err)?;
    Ok(t)
}

/// `None` when dropout leaves the input unchanged (`p == 0`, eval, empty input).
fn dropout_result(c: &Ctx<'_, '_>, feature: bool) -> PyResult<Option<Tensor>> {
    let x = c.tensor(0)?;
    let p = c.float(1)?;
    let train = c.bool(2)?;
    if !(0.0..=1.0).contains(&p) {
        return Err(err(
            "dropout",
            format!("dropout probability has to be between 0 and 1, but got {p}"),
        ));
    }
    if p == 0.0 || !train || x.numel() == 0 {
        return Ok(None);
    }
    if p == 1.0 {
        let z = Tensor::scalar_tensor(Scalar::Int(0), x.dtype());
        return Ok(Some(x.mul(&z).map_err(core_err)?));
    }
    let shape: Vec<usize> = if feature {
        if x.dim() < 2 {
            return Err(err(
                "feature_dropout",
                "Feature dropout requires at least 2 dimensions in the input",
            ));
        }
        let mut s = vec![x.shape()[0], x.shape()[1]];
        s.extend(std::iter::repeat_n(1, x.dim() - 2));
        s
    } else {
        x.shape().to_vec()
    };
    let noise = bernoulli_noise(c, &shape, x.dtype(), 1.0 - p)?;
    let noise = noise.div(1.0 - p).map_err(core_err)?;
    Ok(Some(x.mul(&noise).map_err(core_err)?))
}

// ----- small functionals built from tensor ops -----

fn float_check(op: &'static str, x: &Tensor) -> torchnative_core::Result<()> {
    if !x.dtype().is_float() {
        return Err(torchnative_core::Error::UnsupportedDType {
            op,
            dtype: x.dtype(),
        });
    }
    Ok(())
}

/// `log_sigmoid(x) = min(x, 0) - log1p(exp(-|x|))`.
fn log_sigmoid(x: &Tensor) -> R {
    float_check("log_sigmoid", x)?;
    let zero = Tensor::scalar_tensor(Scalar::Int(0), x.dtype());
    let c = if matches!(x.dtype(), DType::F16 | DType::BF16) {
        DType::F32
    } else {
        x.dtype()
    };
    let xf = x.to_dtype(c)?;
    let r = xf
        .minimum(&zero.to_dtype(c)?)?
        .sub(&xf.abs()?.neg()?.exp()?.log1p()?)?;
    r.to_dtype(x.dtype())
}

fn one_hot(x: &Tensor, classes: i64) -> R {
    let op = "one_hot";
    if x.dtype() != DType::I64 {
        return Err(torchnative_core::Error::InvalidArgument {
            op,
            reason: "one_hot is only applicable to index tensor of type LongTensor.".into(),
        });
    }
    let v = x.to_vec::<i64>()?;
    let n = if classes == -1 {
        if v.is_empty() {
            return Err(torchnative_core::Error::InvalidArgument {
                op,
                reason: "Can not infer total number of classes from empty tensor.".into(),
            });
        }
        v.iter().max().copied().unwrap_or(0) + 1
    } else {
        classes
    };
    if v.iter().any(|&i| i < 0) {
        return Err(torchnative_core::Error::InvalidArgument {
            op,
            reason: "Class values must be non-negative.".into(),
        });
    }
    if v.iter().any(|&i| i >= n) {
        return Err(torchnative_core::Error::InvalidArgument {
            op,
            reason: "Class values must be smaller than num_classes.".into(),
        });
    }
    let n = n.max(0) as usize;
    let mut out = vec![0i64; v.len() * n];
    for (k, &i) in v.iter().enumerate() {
        out[k * n + i as usize] = 1;
    }
    let mut shape = x.shape().to_vec();
    shape.push(n);
    Tensor::from_i64s(&out, &shape, DType::I64)
}

fn loss_reduce(l: Tensor, reduction: i64) -> R {
    match reduction {
        0 => Ok(l),
        1 => l.mean(&[], false),
        2 => l.sum(&[], false),
        r => Err(torchnative_core::Error::InvalidArgument {
            op: "loss",
            reason: format!("{r} is not a valid value for reduction"),
        }),
    }
}

fn pairwise_distance(a: &Tensor, b: &Tensor, p: f64, eps: f64, keepdim: bool) -> R {
    let d = a.sub(b)?.add(eps)?;
    let last = (d.dim() as i64 - 1).max(0);
    d.vector_norm(p, &[last], keepdim, None)
}

fn cosine_similarity(a: &Tensor, b: &Tensor, dim: i64, eps: f64) -> R {
    let shape =
        torchnative_core::layout::broadcast_shapes("cosine_similarity", a.shape(), b.shape())?;
    let (a, b) = (a.broadcast_to(&shape)?, b.broadcast_to(&shape)?);
    let na = a.vector_norm(2.0, &[dim], true, None)?;
    let nb = b.vector_norm(2.0, &[dim], true, None)?;
    let epst = Tensor::scalar_tensor(Scalar::Float(eps), na.dtype());
    let na = na.maximum(&epst)?;
    let nb = nb.maximum(&epst)?;
    let p = a.div(&na)?.mul(&b.div(&nb)?)?;
    p.sum_dtype(&[dim], false, None)
}

fn pixel_shuffle(x: &Tensor, r: i64, inverse: bool) -> R {
    let op = if inverse {
        "pixel_unshuffle"
    } else {
        "pixel_shuffle"
    };
    let n = x.dim();
    if n < 3 || r <= 0 {
        return Err(torchnative_core::Error::InvalidArgument {
            op,
            reason: format!("{op} expects input to have at least 3 dimensions, but got input with {n} dimension(s)"),
        });
    }
    let lead: Vec<i64> = x.shape()[..n - 3].iter().map(|&s| s as i64).collect();
    let (c, h, w) = (
        x.shape()[n - 3] as i64,
        x.shape()[n - 2] as i64,
        x.shape()[n - 1] as i64,
    );
    let k = lead.len() as i64;
    if !inverse {
        if c % (r * r) != 0 {
            return Err(torchnative_core::Error::InvalidArgument {
                op,
                reason: format!("pixel_shuffle expects its input's 'channel' dimension to be divisible by the square of upscale_factor, but input.size(-3)={c} is not divisible by {}", r * r),
            });
        }
        let oc = c / (r * r);
        let mut s1 = lead.clone();
        s1.extend([oc, r, r, h, w]);
        let mut perm: Vec<i64> = (0..k).collect();
        perm.extend([k, k + 3, k + 1, k + 4, k + 2]);
        let mut s2 = lead.clone();
        s2.extend([oc, h * r, w * r]);
        x.reshape(&s1)?.permute(&perm)?.contiguous()?.reshape(&s2)
    } else {
        if h % r != 0 || w % r != 0 {
            return Err(torchnative_core::Error::InvalidArgument {
                op,
                reason: format!("pixel_unshuffle expects height and width to be divisible by downscale_factor {r}"),
            });
        }
        let mut s1 = lead.clone();
        s1.extend([c, h / r, r, w / r, r]);
        let mut perm: Vec<i64> = (0..k).collect();
        perm.extend([k, k + 2, k + 4, k + 1, k + 3]);
        let mut s2 = lead.clone();
        s2.extend([c * r * r, h / r, w / r]);
        x.reshape(&s1)?.permute(&perm)?.contiguous()?.reshape(&s2)
    }
}

// ----- interpolation -----

fn opt_floats(c: &Ctx<'_, '_>, i: usize) -> Vec<Option<f64>> {
    match &c.values[i] {
        crate::value::Value::Floats(v) => v.iter().map(|&f| Some(f)).collect(),
        crate::value::Value::Float(f) => vec![Some(*f)],
        _ => Vec::new(),
    }
}

/// `upsample_*.vec(input, output_size?, [align_corners,] scale_factors?)`.
fn upsample_vec(
    c: &Ctx<'_, '_>,
    nd: usize,
    mode: conv::Interp,
    scales_i: usize,
) -> PyResult<Tensor> {
    let x = c.tensor(0)?;
    let scales = opt_floats(c, scales_i);
    let out: Vec<usize> = match c.opt_ints(1)? {
        Some(o) => to_shape(&o)?,
        None => {
            if scales.len() != nd || x.dim() != nd + 2 {
                return Err(err(
                    "upsample",
                    "Must specify exactly one of output_size and scale_factors",
                ));
            }
            (0..nd)
                .map(|d| (x.shape()[2 + d] as f64 * scales[d].unwrap_or(1.0)) as usize)
                .collect()
        }
    };
    conv::upsample(&x, &out, &scales, mode).map_err(core_err)
}

/// The `nd` optional per-dim scales `scales_d, scales_h, scales_w` starting at argument `first`.
fn dim_scales(c: &Ctx<'_, '_>, first: usize, nd: usize) -> PyResult<Vec<Option<f64>>> {
    (first..first + nd)
        .map(|i| match c.values.get(i) {
            None | Some(crate::value::Value::None) => Ok(None),
            Some(_) => c.float(i).map(Some),
        })
        .collect()
}

/// `upsample_*(self, output_size, [align_corners,] scales...)`: the sized overloads that the
/// `.vec` ones resolve to upstream (and that carry the derivative formulas).
fn upsample_sized(
    c: &Ctx<'_, '_>,
    nd: usize,
    mode: conv::Interp,
    scales_i: usize,
) -> PyResult<Tensor> {
    let out = to_shape(&c.ints(1)?)?;
    if out.len() != nd {
        return Err(err(
            "upsample",
            format!("expected output_size of {nd} values, got {out:?}"),
        ));
    }
    conv::upsample(&c.tensor(0)?, &out, &dim_scales(c, scales_i, nd)?, mode).map_err(core_err)
}

/// `upsample_*_backward(grad_output, output_size, input_size, [align_corners,] scales...)`.
fn upsample_backward(
    c: &Ctx<'_, '_>,
    nd: usize,
    mode: conv::Interp,
    scales_i: usize,
) -> PyResult<Tensor> {
    let grad = c.tensor(0)?;
    let out = to_shape(&c.ints(1)?)?;
    let input = to_shape(&c.ints(2)?)?;
    if out.len() != nd || input.len() != nd + 2 || grad.shape()[2.min(grad.dim())..] != out[..] {
        return Err(err(
            "upsample_backward",
            format!(
                "grad_output {:?} does not match output_size {out:?} and input_size {input:?}",
                grad.shape()
            ),
        ));
    }
    conv::upsample_backward(&grad, &input, &dim_scales(c, scales_i, nd)?, mode).map_err(core_err)
}

/// `_upsample_{bilinear,bicubic}2d_aa(self, output_size, align_corners, scales_h, scales_w)`.
fn upsample_aa(c: &Ctx<'_, '_>, filter: conv::AntialiasFilter) -> PyResult<Tensor> {
    let out = to_shape(&c.ints(1)?)?;
    let opt = |i: usize| match &c.values[i] {
        crate::value::Value::None => Ok(None),
        _ => c.float(i).map(Some),
    };
    let scales = [opt(3)?, opt(4)?];
    conv::upsample_antialias(&c.tensor(0)?, &out, &scales, c.bool(2)?, filter).map_err(core_err)
}

/// The `.vec` form: output size given, or computed from `scale_factors`.
fn upsample_aa_vec(c: &Ctx<'_, '_>, filter: conv::AntialiasFilter) -> PyResult<Tensor> {
    let x = c.tensor(0)?;
    let scales = opt_floats(c, 3);
    let out: Vec<usize> = match c.opt_ints(1)? {
        Some(o) => to_shape(&o)?,
        None => {
            if scales.len() != 2 || x.dim() != 4 {
                return Err(err(
                    "upsample",
                    "Must specify exactly one of output_size and scale_factors",
                ));
            }
            (0..2)
                .map(|d| (x.shape()[2 + d] as f64 * scales[d].unwrap_or(1.0)) as usize)
                .collect()
        }
    };
    conv::upsample_antialias(&x, &out, &scales, c.bool(2)?, filter).map_err(core_err)
}

/// `leaky_relu(x, slope) = where(x > 0, x, x * slope)` (float dtypes only).
fn leaky_relu(x: &Tensor, slope: Scalar) -> R {
    if !x.dtype().is_float() {
        return Err(torchnative_core::Error::UnsupportedDType {
            op: "leaky_relu",
            dtype: x.dtype(),
        });
    }
    torchnative_core::where_(&x.gt(0)?, x, &x.mul(slope)?)
}

/// `multi_margin_loss(x [N, C] or [C], y, p, margin, weight, reduction)`.
fn multi_margin_loss(
    x: &Tensor,
    y: &Tensor,
    p: f64,
    margin: f64,
    weight: Option<&Tensor>,
    reduction: i64,
) -> R {
    let op = "multi_margin_loss";
    if !matches!(x.dtype(), DType::F32 | DType::F64) {
        return Err(torchnative_core::Error::UnsupportedDType {
            op,
            dtype: x.dtype(),
        });
    }
    if p != 1.0 && p != 2.0 {
        return Err(torchnative_core::Error::InvalidArgument {
            op,
            reason: "only p == 1 and p == 2 supported".into(),
        });
    }
    let c = x.shape().last().copied().unwrap_or(1);
    let n = if x.dim() <= 1 { 1 } else { x.shape()[0] };
    let xv = x.to_vec::<f64>()?;
    let yv = y.to_vec::<i64>()?;
    let wv = weight.map(|w| w.to_vec::<f64>()).transpose()?;
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let t = yv.get(i).copied().unwrap_or(0);
        if t < 0 || t as usize >= c {
            return Err(torchnative_core::Error::IndexOutOfRange {
                op,
                index: t,
                size: c,
            });
        }
        let row = &xv[i * c..(i + 1) * c];
        let xt = row[t as usize];
        let mut s = 0.0;
        for (j, &xj) in row.iter().enumerate() {
            if j == t as usize {
                continue;
            }
            let z = margin - xt + xj;
            if z > 0.0 {
                let h = if p == 1.0 { z } else { z * z };
                s += h * wv.as_ref().map(|w| w[t as usize]).unwrap_or(1.0);
            }
        }
        out.push(s / c as f64);
    }
    let shape: Vec<usize> = if x.dim() <= 1 { vec![] } else { vec![n] };
    let l = Tensor::from_f64s(&out, &shape, x.dtype())?;
    loss_reduce(l, reduction)
}

pub(crate) fn register(t: &mut Table) {
    t.insert("aten::leaky_relu", |c| {
        ok(leaky_relu(&c.tensor(0)?, c.scalar(1)?))
    });
    t.insert("aten::leaky_relu_", |c| {
        let r = leaky_relu(&c.tensor(0)?, c.scalar(1)?).map_err(core_err)?;
        c.write_into(0, r)
    });
    t.insert("aten::leaky_relu.out", |c| {
        let r = leaky_relu(&c.tensor(0)?, c.scalar(1)?).map_err(core_err)?;
        c.write_into(2, r)
    });
    t.insert("aten::multi_margin_loss", |c| {
        ok(multi_margin_loss(
            &c.tensor(0)?,
            &c.tensor(1)?,
            c.scalar(2)?.to_f64(),
            c.scalar(3)?.to_f64(),
            c.opt_tensor(4)?.as_ref(),
            c.int(5)?,
        ))
    });
    // the sized overloads and their backwards (`i` is where the scales start)
    macro_rules! upsample_pair {
        ($fwd:literal, $bwd:literal, $nd:expr, $mode:expr, $aligned:expr) => {
            t.insert($fwd, |c| {
                let (mode, i) = if $aligned {
                    (align($mode, c.bool(2)?), 3)
                } else {
                    ($mode, 2)
                };
                Ok(Out::Tensor(upsample_sized(c, $nd, mode, i)?))
            });
            t.insert($bwd, |c| {
                let (mode, i) = if $aligned {
                    (align($mode, c.bool(3)?), 4)
                } else {
                    ($mode, 3)
                };
                Ok(Out::Tensor(upsample_backward(c, $nd, mode, i)?))
            });
        };
    }
    fn align(mode: conv::Interp, align_corners: bool) -> conv::Interp {
        match mode {
            conv::Interp::Linear { .. } => conv::Interp::Linear { align_corners },
            conv::Interp::Cubic { .. } => conv::Interp::Cubic { align_corners },
            m => m,
        }
    }
    use conv::Interp::{Cubic, Linear, Nearest, NearestExact};
    const LIN: conv::Interp = Linear {
        align_corners: false,
    };
    const CUB: conv::Interp = Cubic {
        align_corners: false,
    };
    upsample_pair!(
        "aten::upsample_nearest1d",
        "aten::upsample_nearest1d_backward",
        1,
        Nearest,
        false
    );
    upsample_pair!(
        "aten::upsample_nearest2d",
        "aten::upsample_nearest2d_backward",
        2,
        Nearest,
        false
    );
    upsample_pair!(
        "aten::upsample_nearest3d",
        "aten::upsample_nearest3d_backward",
        3,
        Nearest,
        false
    );
    upsample_pair!(
        "aten::_upsample_nearest_exact1d",
        "aten::_upsample_nearest_exact1d_backward",
        1,
        NearestExact,
        false
    );
    upsample_pair!(
        "aten::_upsample_nearest_exact2d",
        "aten::_upsample_nearest_exact2d_backward",
        2,
        NearestExact,
        false
    );
    upsample_pair!(
        "aten::_upsample_nearest_exact3d",
        "aten::_upsample_nearest_exact3d_backward",
        3,
        NearestExact,
        false
    );
    upsample_pair!(
        "aten::upsample_linear1d",
        "aten::upsample_linear1d_backward",
        1,
        LIN,
        true
    );
    upsample_pair!(
        "aten::upsample_bilinear2d",
        "aten::upsample_bilinear2d_backward",
        2,
        LIN,
        true
    );
    upsample_pair!(
        "aten::upsample_trilinear3d",
        "aten::upsample_trilinear3d_backward",
        3,
        LIN,
        true
    );
    upsample_pair!(
        "aten::upsample_bicubic2d",
        "aten::upsample_bicubic2d_backward",
        2,
        CUB,
        true
    );
    t.insert("aten::upsample_nearest1d.vec", |c| {
        Ok(Out::Tensor(upsample_vec(c, 1, conv::Interp::Nearest, 2)?))
    });
    t.insert("aten::upsample_nearest2d.vec", |c| {
        Ok(Out::Tensor(upsample_vec(c, 2, conv::Interp::Nearest, 2)?))
    });
    t.insert("aten::_upsample_nearest_exact1d.vec", |c| {
        Ok(Out::Tensor(upsample_vec(
            c,
            1,
            conv::Interp::NearestExact,
            2,
        )?))
    });
    t.insert("aten::_upsample_nearest_exact2d.vec", |c| {
        Ok(Out::Tensor(upsample_vec(
            c,
            2,
            conv::Interp::NearestExact,
            2,
        )?))
    });
    t.insert("aten::upsample_linear1d.vec", |c| {
        let mode = conv::Interp::Linear {
            align_corners: c.bool(2)?,
        };
        Ok(Out::Tensor(upsample_vec(c, 1, mode, 3)?))
    });
    t.insert("aten::upsample_bicubic2d.vec", |c| {
        let mode = conv::Interp::Cubic {
            align_corners: c.bool(2)?,
        };
        Ok(Out::Tensor(upsample_vec(c, 2, mode, 3)?))
    });
    t.insert("aten::upsample_nearest3d.vec", |c| {
        Ok(Out::Tensor(upsample_vec(c, 3, conv::Interp::Nearest, 2)?))
    });
    t.insert("aten::_upsample_nearest_exact3d.vec", |c| {
        Ok(Out::Tensor(upsample_vec(
            c,
            3,
            conv::Interp::NearestExact,
            2,
        )?))
    });
    t.insert("aten::upsample_trilinear3d.vec", |c| {
        let mode = conv::Interp::Linear {
            align_corners: c.bool(2)?,
        };
        Ok(Out::Tensor(upsample_vec(c, 3, mode, 3)?))
    });
    t.insert("aten::_upsample_bilinear2d_aa", |c| {
        Ok(Out::Tensor(upsample_aa(
            c,
            conv::AntialiasFilter::Triangle,
        )?))
    });
    t.insert("aten::_upsample_bilinear2d_aa.out", |c| {
        let r = upsample_aa(c, conv::AntialiasFilter::Triangle)?;
        c.write_into(5, r)
    });
    t.insert("aten::_upsample_bilinear2d_aa.vec", |c| {
        Ok(Out::Tensor(upsample_aa_vec(
            c,
            conv::AntialiasFilter::Triangle,
        )?))
    });
    t.insert("aten::_upsample_bicubic2d_aa", |c| {
        Ok(Out::Tensor(upsample_aa(c, conv::AntialiasFilter::Cubic)?))
    });
    t.insert("aten::_upsample_bicubic2d_aa.out", |c| {
        let r = upsample_aa(c, conv::AntialiasFilter::Cubic)?;
        c.write_into(5, r)
    });
    t.insert("aten::_upsample_bicubic2d_aa.vec", |c| {
        Ok(Out::Tensor(upsample_aa_vec(
            c,
            conv::AntialiasFilter::Cubic,
        )?))
    });
    // FFTs produce complex tensors, which torchnative does not have.
    for name in [
        "aten::_fft_r2c",
        "aten::_fft_c2c",
        "aten::_fft_c2r",
        "aten::_fft_r2c.out",
        "aten::_fft_c2c.out",
        "aten::_fft_c2r.out",
    ] {
        t.insert(name, |_| {
            Err(pyo3::exceptions::PyNotImplementedError::new_err(
                "torch.fft is not supported by torchnative: its results are complex tensors \
                 (complex64/complex128), which torchnative does not have",
            ))
        });
    }
    t.insert("aten::upsample_bilinear2d.vec", |c| {
        let mode = conv::Interp::Linear {
            align_corners: c.bool(2)?,
        };
        Ok(Out::Tensor(upsample_vec(c, 2, mode, 3)?))
    });

    t.insert("aten::log_sigmoid", |c| ok(log_sigmoid(&c.tensor(0)?)));
    t.insert("aten::log_sigmoid_forward", |c| {
        let x = c.tensor(0)?;
        let r = log_sigmoid(&x).map_err(core_err)?;
        let buf = Tensor::empty_on(&[0], x.dtype(), Device::Cpu).map_err(core_err)?;
        Ok(Out::Tensors(vec![r, buf]))
    });
    t.insert("aten::one_hot", |c| ok(one_hot(&c.tensor(0)?, c.int(1)?)));
    t.insert("aten::broadcast_tensors", |c| {
        let ts = c.tensors(0)?;
        let refs: Vec<&Tensor> = ts.iter().collect();
        let shape = torchnative_core::tensor::broadcast_all_shapes("broadcast_tensors", &refs)
            .map_err(core_err)?;
        let out = ts
            .iter()
            .map(|t| t.broadcast_to(&shape))
            .collect::<torchnative_core::Result<Vec<_>>>()
            .map_err(core_err)?;
        Ok(Out::Tensors(out))
    });
    t.insert("aten::pixel_shuffle", |c| {
        ok(pixel_shuffle(&c.tensor(0)?, c.int(1)?, false))
    });
    t.insert("aten::pixel_unshuffle", |c| {
        ok(pixel_shuffle(&c.tensor(0)?, c.int(1)?, true))
    });
    t.insert("aten::cosine_similarity", |c| {
        ok(cosine_similarity(
            &c.tensor(0)?,
            &c.tensor(1)?,
            c.int(2)?,
            c.float(3)?,
        ))
    });
    t.insert("aten::pairwise_distance", |c| {
        ok(pairwise_distance(
            &c.tensor(0)?,
            &c.tensor(1)?,
            c.float(2)?,
            c.float(3)?,
            c.bool(4)?,
        ))
    });
    t.insert("aten::bilinear", |c| {
        let (a, b, w) = (c.tensor(0)?, c.tensor(1)?, c.tensor(2)?);
        let r = torchnative_core::ops::linalg::einsum("...i,oij,...j->...o", &[&a, &w, &b]);
        let r = match (r, c.opt_tensor(3)?) {
            (Ok(y), Some(bias)) => y.add(&bias),
            (r, _) => r,
        };
        ok(r)
    });
    t.insert("aten::rrelu", |c| {
        let x = c.tensor(0)?;
        if c.bool(3)? {
            return Err(core_err(torchnative_core::Error::UnsupportedDType {
                op: "rrelu (training)",
                dtype: x.dtype(),
            }));
        }
        let slope = (c.scalar(1)?.to_f64() + c.scalar(2)?.to_f64()) / 2.0;
        let r = (|| {
            float_check("rrelu", &x)?;
            let pos = x.gt(0)?;
            torchnative_core::where_(&pos, &x, &x.mul(slope)?)
        })();
        ok(r)
    });
    t.insert("aten::native_layer_norm", |c| {
        let x = c.tensor(0)?;
        let shape = to_shape(&c.ints(1)?)?;
        let eps = c.float(4)?;
        let r = (|| {
            let y = torchnative_core::layer_norm(
                &x,
                &shape,
                c.opt_tensor(2).ok().flatten().as_ref(),
                c.opt_tensor(3).ok().flatten().as_ref(),
                eps,
            )?;
            let dims: Vec<i64> = (x.dim() - shape.len()..x.dim()).map(|d| d as i64).collect();
            let xf = x.to_dtype(DType::F64)?;
            let mean = xf.mean(&dims, true)?;
            let var = xf.var(
                &dims,
                torchnative_core::VarOptions {
                    correction: 0.0,
                    keepdim: true,
                },
            )?;
            let rstd = var.add(eps)?.rsqrt()?;
            Ok::<_, torchnative_core::Error>(vec![
                y,
                mean.to_dtype(x.dtype())?,
                rstd.to_dtype(x.dtype())?,
            ])
        })();
        Ok(Out::Tensors(r.map_err(core_err)?))
    });
    // ----- losses built from tensor ops -----
    t.insert("aten::l1_loss", |c| {
        let (x, y) = (c.tensor(0)?, c.tensor(1)?);
        let red = c.int(2)?;
        ok(x.sub(&y)
            .and_then(|d| d.abs())
            .and_then(|l| loss_reduce(l, red)))
    });
    t.insert("aten::margin_ranking_loss", |c| {
        let (a, b, y) = (c.tensor(0)?, c.tensor(1)?, c.tensor(2)?);
        let m = c.float(3)?;
        let r = (|| {
            let l = y.neg()?.mul(&a.sub(&b)?)?.add(m)?;
            let z = Tensor::scalar_tensor(Scalar::Int(0), l.dtype());
            loss_reduce(l.maximum(&z)?, c.int(4).unwrap_or(1))
        })();
        ok(r)
    });
    t.insert("aten::hinge_embedding_loss", |c| {
        let (x, y) = (c.tensor(0)?, c.tensor(1)?);
        let m = c.float(2)?;
        let red = c.int(3)?;
        let r = (|| {
            let z = Tensor::scalar_tensor(Scalar::Int(0), x.dtype());
            let margin_clamp = x.neg()?.add(m)?.maximum(&z)?;
            let om = torchnative_core::where_(&y.ne(1)?, &margin_clamp, &z)?;
            let os = torchnative_core::where_(&y.ne(-1)?, &x, &z)?;
            loss_reduce(om.add(&os)?, red)
        })();
        ok(r)
    });
    t.insert("aten::cosine_embedding_loss", |c| {
        let (a, b, y) = (c.tensor(0)?, c.tensor(1)?, c.tensor(2)?);
        let m = c.float(3)?;
        let red = c.int(4)?;
        let r = (|| {
            let d = (a.dim() as i64 - 1).max(0);
            let prod = a.mul(&b)?.sum_dtype(&[d], false, None)?;
            let m1 = a.mul(&a)?.sum_dtype(&[d], false, None)?.add(1e-12)?;
            let m2 = b.mul(&b)?.sum_dtype(&[d], false, None)?.add(1e-12)?;
            let cos = prod.div(&m1.mul(&m2)?.sqrt()?)?;
            let z = Tensor::scalar_tensor(Scalar::Int(0), cos.dtype());
            let pos = cos.neg()?.add(1.0)?;
            let neg = cos.sub(m)?.maximum(&z)?;
            let op = torchnative_core::where_(&y.eq(1)?, &pos, &z)?;
            let on = torchnative_core::where_(&y.eq(-1)?, &neg, &z)?;
            loss_reduce(op.add(&on)?, red)
        })();
        ok(r)
    });
    t.insert("aten::triplet_margin_loss", |c| {
        let (a, p, n) = (c.tensor(0)?, c.tensor(1)?, c.tensor(2)?);
        let (margin, pn, eps, swap, red) =
            (c.float(3)?, c.float(4)?, c.float(5)?, c.bool(6)?, c.int(7)?);
        let r = (|| {
            let dp = pairwise_distance(&a, &p, pn, eps, false)?;
            let mut dn = pairwise_distance(&a, &n, pn, eps, false)?;
            if swap {
                dn = dn.minimum(&pairwise_distance(&p, &n, pn, eps, false)?)?;
            }
            let z = Tensor::scalar_tensor(Scalar::Int(0), dp.dtype());
            loss_reduce(dp.sub(&dn)?.add(margin)?.maximum(&z)?, red)
        })();
        ok(r)
    });
    t.insert("aten::poisson_nll_loss", |c| {
        let (x, y) = (c.tensor(0)?, c.tensor(1)?);
        let (log_input, full, eps, red) = (c.bool(2)?, c.bool(3)?, c.float(4)?, c.int(5)?);
        let r = (|| {
            let mut l = if log_input {
                x.exp()?.sub(&y.mul(&x)?)?
            } else {
                x.sub(&y.mul(&x.add(eps)?.log()?)?)?
            };
            if full {
                let st = y
                    .mul(&y.log()?)?
                    .sub(&y)?
                    .add(&y.mul(2.0 * std::f64::consts::PI)?.log()?.mul(0.5)?)?;
                let z = Tensor::scalar_tensor(Scalar::Int(0), st.dtype());
                l = l.add(&torchnative_core::where_(&y.gt(1)?, &st, &z)?)?;
            }
            loss_reduce(l, red)
        })();
        ok(r)
    });

    t.insert("aten::dropout", |c| match dropout_result(c, false)? {
        Some(r) => Ok(Out::Tensor(r)),
        None => Ok(Out::Arg(0)),
    });
    t.insert("aten::feature_dropout", |c| {
        match dropout_result(c, true)? {
            Some(r) => Ok(Out::Tensor(r)),
            None => Ok(Out::Arg(0)),
        }
    });
    t.insert("aten::dropout_", |c| match dropout_result(c, false)? {
        Some(r) => c.write_into(0, r),
        None => Ok(Out::Arg(0)),
    });
    t.insert("aten::feature_dropout_", |c| {
        match dropout_result(c, true)? {
            Some(r) => c.write_into(0, r),
            None => Ok(Out::Arg(0)),
        }
    });
    t.insert("aten::alpha_dropout", |c| {
        let x = c.tensor(0)?;
        let p = c.float(1)?;
        if p == 0.0 || !c.bool(2)? || x.numel() == 0 {
            return Ok(Out::Arg(0));
        }
        if p == 1.0 {
            let z = Tensor::scalar_tensor(Scalar::Int(0), x.dtype());
            return ok(x.mul(&z));
        }
        const ALPHA: f64 = 1.7580993408473766;
        let a = 1.0 / ((ALPHA * ALPHA * p + 1.0) * (1.0 - p)).sqrt();
        let noise = bernoulli_noise(c, x.shape(), x.dtype(), 1.0 - p)?;
        let r = (|| {
            let b = noise.add(-1.0)?.mul(ALPHA * a)?.add(ALPHA * a * p)?;
            let n = noise.mul(a)?;
            x.mul(&n)?.add(&b)
        })();
        ok(r)
    });
    // native_dropout(Tensor input, float p, bool? train) -> (Tensor, Tensor)
    t.insert("aten::native_dropout", |c| {
        let x = c.tensor(0)?;
        let p = c.float(1)?;
        let train = match &c.values[2] {
            crate::value::Value::None => true,
            _ => c.bool(2)?,
        };
        if !train || x.numel() == 0 {
            let ones = Tensor::empty_on(x.shape(), DType::Bool, Device::Cpu)
                .and_then(|m| {
                    m.fill_(Scalar::Bool(true))?;
                    Ok(m)
                })
                .map_err(core_err)?;
            return Ok(Out::Tensors(vec![x.deep_clone().map_err(core_err)?, ones]));
        }
        let p1m = 1.0 - p;
        let scale = if p1m == 0.0 { 0.0 } else { 1.0 / p1m };
        let mask = bernoulli_noise(c, x.shape(), DType::Bool, p1m)?;
        let out = x.mul(&mask).and_then(|o| o.mul(scale)).map_err(core_err)?;
        Ok(Out::Tensors(vec![out, mask]))
    });

    // ----- norms -----
    t.insert("aten::layer_norm", |c| {
        let x = c.tensor(0)?;
        let shape = to_shape(&c.ints(1)?)?;
        ok(torchnative_core::layer_norm(
            &x,
            &shape,
            c.opt_tensor(2)?.as_ref(),
            c.opt_tensor(3)?.as_ref(),
            c.float(4)?,
        ))
    });
    t.insert("aten::rms_norm", |c| {
        let x = c.tensor(0)?;
        let shape = to_shape(&c.ints(1)?)?;
        let eps = match &c.values[3] {
            crate::value::Value::None => None,
            _ => Some(c.float(3)?),
        };
        ok(torchnative_core::rms_norm(
            &x,
            &shape,
            c.opt_tensor(2)?.as_ref(),
            eps,
        ))
    });
    t.insert("aten::group_norm", |c| {
        let g = c.int(1)?;
        ok(cnn::group_norm(
            &c.tensor(0)?,
            g.max(0) as usize,
            c.opt_tensor(2)?.as_ref(),
            c.opt_tensor(3)?.as_ref(),
            c.float(4)?,
        ))
    });
    t.insert("aten::batch_norm", |c| {
        ok(cnn::batch_norm(
            &c.tensor(0)?,
            c.opt_tensor(1)?.as_ref(),
            c.opt_tensor(2)?.as_ref(),
            c.opt_tensor(3)?.as_ref(),
            c.opt_tensor(4)?.as_ref(),
            c.bool(5)?,
            c.float(6)?,
            c.float(7)?,
        ))
    });
    t.insert("aten::instance_norm", |c| {
        if !c.bool(5)? {
            // eval mode with running stats: batch_norm over the running statistics
            return ok(cnn::batch_norm(
                &c.tensor(0)?,
                c.opt_tensor(1)?.as_ref(),
                c.opt_tensor(2)?.as_ref(),
                c.opt_tensor(3)?.as_ref(),
                c.opt_tensor(4)?.as_ref(),
                false,
                c.float(6)?,
                c.float(7)?,
            ));
        }
        ok(cnn::instance_norm(
            &c.tensor(0)?,
            c.opt_tensor(1)?.as_ref(),
            c.opt_tensor(2)?.as_ref(),
            c.float(7)?,
        ))
    });

    // ----- attention -----
    t.insert("aten::scaled_dot_product_attention", |c| {
        Ok(Out::Tensor(sdpa(c)?))
    });
    t.insert(
        "aten::_native_multi_head_attention",
        native_multi_head_attention,
    );

    // ----- convolution -----
    t.insert("aten::conv1d", |c| {
        Ok(Out::Tensor(conv_call(c, 1, ConvPadding::Ints, false)?))
    });
    t.insert("aten::conv2d", |c| {
        Ok(Out::Tensor(conv_call(c, 2, ConvPadding::Ints, false)?))
    });
    t.insert("aten::conv3d", |c| {
        Ok(Out::Tensor(conv_call(c, 3, ConvPadding::Ints, false)?))
    });
    t.insert("aten::conv1d.padding", |c| {
        Ok(Out::Tensor(conv_call(c, 1, ConvPadding::Str, false)?))
    });
    t.insert("aten::conv2d.padding", |c| {
        Ok(Out::Tensor(conv_call(c, 2, ConvPadding::Str, false)?))
    });
    t.insert("aten::conv3d.padding", |c| {
        Ok(Out::Tensor(conv_call(c, 3, ConvPadding::Str, false)?))
    });
    t.insert("aten::conv_transpose1d", |c| {
        Ok(Out::Tensor(conv_call(c, 1, ConvPadding::Ints, true)?))
    });
    t.insert("aten::conv_transpose2d.input", |c| {
        Ok(Out::Tensor(conv_call(c, 2, ConvPadding::Ints, true)?))
    });
    t.insert("aten::convolution", |c| Ok(Out::Tensor(convolution(c)?)));

    // ----- pooling -----
    t.insert("aten::max_pool1d", |c| Ok(Out::Tensor(max_pool(c, 1)?.0)));
    t.insert("aten::max_pool2d", |c| Ok(Out::Tensor(max_pool(c, 2)?.0)));
    t.insert("aten::max_pool1d_with_indices", |c| pair(max_pool(c, 1)?));
    t.insert("aten::max_pool2d_with_indices", |c| pair(max_pool(c, 2)?));
    t.insert("aten::max_pool3d", |c| Ok(Out::Tensor(max_pool(c, 3)?.0)));
    t.insert("aten::max_pool3d_with_indices", |c| pair(max_pool(c, 3)?));
    t.insert("aten::max_pool2d_with_indices_backward", |c| {
        Ok(Out::Tensor(max_pool_backward(c, 2)?))
    });
    t.insert("aten::max_pool3d_with_indices_backward", |c| {
        Ok(Out::Tensor(max_pool_backward(c, 3)?))
    });
    t.insert("aten::avg_pool2d_backward", |c| {
        Ok(Out::Tensor(avg_pool_backward(c, 2)?))
    });
    t.insert("aten::avg_pool3d_backward", |c| {
        Ok(Out::Tensor(avg_pool_backward(c, 3)?))
    });
    t.insert("aten::avg_pool1d", |c| Ok(Out::Tensor(avg_pool(c, 1)?)));
    t.insert("aten::avg_pool2d", |c| Ok(Out::Tensor(avg_pool(c, 2)?)));
    t.insert("aten::avg_pool3d", |c| Ok(Out::Tensor(avg_pool(c, 3)?)));
    t.insert("aten::col2im", |c| {
        let two = |i: usize| -> PyResult<[usize; 2]> {
            let v = conv::expand_param("col2im", "argument", &c.ints(i)?, 2).map_err(core_err)?;
            let v = to_shape(&v)?;
            Ok([v[0], v[1]])
        };
        ok(conv::col2im(
            &c.tensor(0)?,
            two(1)?,
            two(2)?,
            two(3)?,
            two(4)?,
            two(5)?,
        ))
    });
    // `embedding_bag.padding_idx` takes `int? padding_idx` and wraps a negative one (-1 is
    // the last row); `_embedding_bag`'s plain `int padding_idx` uses -1 for "none".
    fn embedding_bag(c: &Ctx<'_, '_>, wrap_padding_idx: bool) -> PyResult<Out> {
        let weight = c.tensor(0)?;
        let rows = weight.shape().first().copied().unwrap_or(0) as i64;
        let padding_idx = match c.values.get(8) {
            Some(crate::value::Value::Int(i)) if wrap_padding_idx => {
                if *i < -rows || *i >= rows {
                    return Err(PyRuntimeError::new_err(format!(
                        "padding_idx must be within the number of embeddings, -{rows} through {}, but got {i}",
                        rows - 1
                    )));
                }
                Some(i.rem_euclid(rows.max(1)))
            }
            Some(crate::value::Value::Int(i)) if *i >= 0 => Some(*i),
            _ => None,
        };
        let r = conv::embedding_bag(
            &weight,
            &c.tensor(1)?,
            &c.tensor(2)?,
            c.int(4)?,
            c.opt_tensor(6)?.as_ref(),
            c.bool(7)?,
            padding_idx,
        )
        .map_err(core_err)?;
        let empty = || Tensor::empty_on(&[0], DType::I64, Device::Cpu).map_err(core_err);
        Ok(Out::Tensors(vec![r, empty()?, empty()?, empty()?]))
    }
    t.insert("aten::embedding_bag.padding_idx", |c| {
        embedding_bag(c, true)
    });
    t.insert("aten::embedding_bag", |c| embedding_bag(c, false));
    t.insert("aten::_embedding_bag", |c| embedding_bag(c, false));
    t.insert("aten::adaptive_avg_pool1d", |c| {
        ok(conv::adaptive_pool(&c.tensor(0)?, &c.ints(1)?, false).map(|r| r.0))
    });
    t.insert("aten::adaptive_avg_pool2d", |c| {
        ok(conv::adaptive_pool(&c.tensor(0)?, &c.ints(1)?, false).map(|r| r.0))
    });
    t.insert("aten::_adaptive_avg_pool2d", |c| {
        ok(conv::adaptive_pool(&c.tensor(0)?, &c.ints(1)?, false).map(|r| r.0))
    });
    t.insert("aten::adaptive_avg_pool3d", |c| {
        ok(conv::adaptive_pool(&c.tensor(0)?, &c.ints(1)?, false).map(|r| r.0))
    });
    t.insert("aten::_adaptive_avg_pool3d", |c| {
        ok(conv::adaptive_pool(&c.tensor(0)?, &c.ints(1)?, false).map(|r| r.0))
    });
    t.insert("aten::adaptive_max_pool3d", |c| {
        pair(conv::adaptive_pool(&c.tensor(0)?, &c.ints(1)?, true).map_err(core_err)?)
    });
    t.insert("aten::_adaptive_avg_pool2d_backward", |c| {
        ok(conv::adaptive_pool_backward(
            &c.tensor(0)?,
            &c.tensor(1)?,
            2,
            None,
        ))
    });
    t.insert("aten::_adaptive_avg_pool3d_backward", |c| {
        ok(conv::adaptive_pool_backward(
            &c.tensor(0)?,
            &c.tensor(1)?,
            3,
            None,
        ))
    });
    t.insert("aten::adaptive_max_pool2d_backward", |c| {
        let indices = c.tensor(2)?;
        ok(conv::adaptive_pool_backward(
            &c.tensor(0)?,
            &c.tensor(1)?,
            2,
            Some(&indices),
        ))
    });
    t.insert("aten::adaptive_max_pool3d_backward", |c| {
        let indices = c.tensor(2)?;
        ok(conv::adaptive_pool_backward(
            &c.tensor(0)?,
            &c.tensor(1)?,
            3,
            Some(&indices),
        ))
    });
    t.insert("aten::adaptive_max_pool1d", |c| {
        pair(conv::adaptive_pool(&c.tensor(0)?, &c.ints(1)?, true).map_err(core_err)?)
    });
    t.insert("aten::adaptive_max_pool2d", |c| {
        pair(conv::adaptive_pool(&c.tensor(0)?, &c.ints(1)?, true).map_err(core_err)?)
    });

    // ----- padding -----
    t.insert("aten::pad", |c| Ok(Out::Tensor(pad(c)?)));
    t.insert("aten::constant_pad_nd", |c| {
        ok(conv::constant_pad(&c.tensor(0)?, &c.ints(1)?, c.scalar(2)?))
    });

    // ----- losses -----
    t.insert("aten::cross_entropy_loss", |c| {
        ok(cnn::cross_entropy(
            &c.tensor(0)?,
            &c.tensor(1)?,
            c.opt_tensor(2)?.as_ref(),
            c.int(3)?,
            c.int(4)?,
            c.float(5)?,
        ))
    });
    for name in ["aten::nll_loss_nd", "aten::nll_loss", "aten::nll_loss2d"] {
        t.insert(name, |c| {
            ok(cnn::nll_loss(
                &c.tensor(0)?,
                &c.tensor(1)?,
                c.opt_tensor(2)?.as_ref(),
                c.int(3)?,
                c.int(4)?,
            ))
        });
    }
    t.insert("aten::kl_div", |c| {
        ok(cnn::kl_div(
            &c.tensor(0)?,
            &c.tensor(1)?,
            c.int(2)?,
            c.bool(3)?,
        ))
    });
}
