//! Convolutions (N-d, grouped, strided, dilated, transposed), pooling (max/avg/adaptive) and
//! padding (constant/reflect/replicate/circular). Inputs are `[B, C, *spatial]`; the
//! arithmetic runs in f64 over contiguous copies and rounds once to the input dtype.

#![allow(clippy::needless_range_loop)]

use crate::dtype::{DType, Scalar};
use crate::error::{invalid, Error, Result};
use crate::tensor::Tensor;

fn float_only(op: &'static str, t: &Tensor) -> Result<()> {
    if !t.dtype().is_float() {
        return Err(Error::UnsupportedDType {
            op,
            dtype: t.dtype(),
        });
    }
    Ok(())
}

/// Expands a 1-element list to `n` entries (`stride=2` means `(2, 2)`).
pub fn expand_param(op: &'static str, name: &str, v: &[i64], n: usize) -> Result<Vec<i64>> {
    match v.len() {
        1 => Ok(vec![v[0]; n]),
        l if l == n => Ok(v.to_vec()),
        _ => Err(invalid(
            op,
            format!("expected {name} to be a single integer value or a list of {n} values"),
        )),
    }
}

/// Row-major strides of a shape.
fn strides_of(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// Iterates the multi-indices of `shape` in row-major order.
fn for_each_index(shape: &[usize], mut f: impl FnMut(&[usize])) {
    let n: usize = shape.iter().product();
    let mut idx = vec![0usize; shape.len()];
    for _ in 0..n {
        f(&idx);
        for d in (0..shape.len()).rev() {
            idx[d] += 1;
            if idx[d] < shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
}

/// Options of [`conv`].
#[derive(Debug, Clone)]
pub struct ConvOptions {
    pub stride: Vec<i64>,
    /// Padding before each spatial dim.
    pub pad_lo: Vec<i64>,
    /// Padding after each spatial dim.
    pub pad_hi: Vec<i64>,
    pub dilation: Vec<i64>,
    pub groups: i64,
    pub transposed: bool,
    pub output_padding: Vec<i64>,
}

/// N-d convolution (cross-correlation) of a batched `[B, Cin, *S]` input with
/// `[Cout, Cin/groups, *K]` weights, or its transpose (weights `[Cin, Cout/groups, *K]`).
pub fn conv(x: &Tensor, w: &Tensor, bias: Option<&Tensor>, o: &ConvOptions) -> Result<Tensor> {
    let op = if o.transposed {
        "conv_transpose"
    } else {
        "conv"
    };
    if x.dtype() != w.dtype() || bias.is_some_and(|b| b.dtype() != x.dtype()) {
        return Err(invalid(
            op,
            format!(
                "Input type ({}) and weight type ({}) should be the same",
                x.dtype().name(),
                w.dtype().name()
            ),
        ));
    }
    if !x.dtype().is_float() {
        return Err(Error::UnsupportedDType {
            op,
            dtype: x.dtype(),
        });
    }
    let nd = x.dim().saturating_sub(2);
    if nd == 0 || w.dim() != nd + 2 {
        return Err(invalid(
            op,
            format!(
                "Expected {}D input and {}D weight, got input of shape {:?} and weight of shape {:?}",
                w.dim(),
                w.dim(),
                x.shape(),
                w.shape()
            ),
        ));
    }
    let g = o.groups.max(1) as usize;
    let (b, cin) = (x.shape()[0], x.shape()[1]);
    let sp: Vec<usize> = x.shape()[2..].to_vec();
    let ks: Vec<usize> = w.shape()[2..].to_vec();
    let (cout, cin_g) = if o.transposed {
        (w.shape()[1] * g, w.shape()[0] / g)
    } else {
        (w.shape()[0], w.shape()[1])
    };
    let w_in = if o.transposed {
        w.shape()[0]
    } else {
        cin_g * g
    };
    if w_in != cin || (!o.transposed && cout % g != 0) || cin % g != 0 {
        return Err(invalid(
            op,
            format!(
                "Given groups={g}, weight of size {:?}, expected input{:?} to have {} channels, but got {cin} channels instead",
                w.shape(),
                x.shape(),
                w_in
            ),
        ));
    }
    if let Some(bb) = bias {
        if bb.numel() != cout {
            return Err(invalid(
                op,
                format!("expected bias of size {cout}, got {:?}", bb.shape()),
            ));
        }
    }
    let (st, dl) = (&o.stride, &o.dilation);
    let mut out_sp = Vec::with_capacity(nd);
    for d in 0..nd {
        let eff = dl[d] * (ks[d] as i64 - 1) + 1;
        let n = if o.transposed {
            (sp[d] as i64 - 1) * st[d] - o.pad_lo[d] - o.pad_hi[d] + eff + o.output_padding[d]
        } else {
            let padded = sp[d] as i64 + o.pad_lo[d] + o.pad_hi[d];
            if padded < eff {
                return Err(invalid(
                    op,
                    format!(
                        "Calculated padded input size per channel: ({padded}). Kernel size: ({eff}). Kernel size can't be greater than actual input size"
                    ),
                ));
            }
            (padded - eff) / st[d] + 1
        };
        if n <= 0 {
            return Err(invalid(op, "output size is too small"));
        }
        out_sp.push(n as usize);
    }
    let xv = x.to_vec::<f64>()?;
    let wv = w.to_vec::<f64>()?;
    let bv = match bias {
        Some(bb) => bb.to_vec::<f64>()?,
        None => vec![0.0; cout],
    };
    let in_plane: usize = sp.iter().product();
    let out_plane: usize = out_sp.iter().product();
    let k_plane: usize = ks.iter().product();
    let in_str = strides_of(&sp);
    let out_str = strides_of(&out_sp);
    let mut out = vec![0.0f64; b * cout * out_plane];
    let cout_g = cout / g;
    // Kernel offsets once.
    let mut koffs: Vec<Vec<usize>> = Vec::with_capacity(k_plane);
    for_each_index(&ks, |k| koffs.push(k.to_vec()));
    if !o.transposed {
        for bi in 0..b {
            for oc in 0..cout {
                let gi = oc / cout_g;
                let obase = (bi * cout + oc) * out_plane;
                for_each_index(&out_sp, |opos| {
                    let mut acc = bv[oc];
                    for ic in 0..cin_g {
                        let c = gi * cin_g + ic;
                        let xbase = (bi * cin + c) * in_plane;
                        let wbase = (oc * cin_g + ic) * k_plane;
                        'k: for (ki, k) in koffs.iter().enumerate() {
                            let mut off = 0usize;
                            for d in 0..nd {
                                let p = opos[d] as i64 * st[d] - o.pad_lo[d] + k[d] as i64 * dl[d];
                                if p < 0 || p >= sp[d] as i64 {
                                    continue 'k;
                                }
                                off += p as usize * in_str[d];
                            }
                            acc += xv[xbase + off] * wv[wbase + ki];
                        }
                    }
                    let mut o_off = 0;
                    for d in 0..nd {
                        o_off += opos[d] * out_str[d];
                    }
                    out[obase + o_off] = acc;
                });
            }
        }
    } else {
        // Scatter each input element through the kernel.
        for bi in 0..b {
            for oc in 0..cout {
                let base = (bi * cout + oc) * out_plane;
                for v in &mut out[base..base + out_plane] {
                    *v = bv[oc];
                }
            }
            for c in 0..cin {
                let gi = c / cin_g;
                let xbase = (bi * cin + c) * in_plane;
                for_each_index(&sp, |ipos| {
                    let mut i_off = 0;
                    for d in 0..nd {
                        i_off += ipos[d] * in_str[d];
                    }
                    let xval = xv[xbase + i_off];
                    for ocg in 0..cout_g {
                        let oc = gi * cout_g + ocg;
                        let wbase = (c * cout_g + ocg) * k_plane;
                        let obase = (bi * cout + oc) * out_plane;
                        'k: for (ki, k) in koffs.iter().enumerate() {
                            let mut off = 0usize;
                            for d in 0..nd {
                                let p = ipos[d] as i64 * st[d] - o.pad_lo[d] + k[d] as i64 * dl[d];
                                if p < 0 || p >= out_sp[d] as i64 {
                                    continue 'k;
                                }
                                off += p as usize * out_str[d];
                            }
                            out[obase + off] += xval * wv[wbase + ki];
                        }
                    }
                });
            }
        }
    }
    let mut shape = vec![b, cout];
    shape.extend(&out_sp);
    Tensor::from_f64s(&out, &shape, x.dtype())
}

/// Pooling kinds of [`pool`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PoolKind {
    Max,
    Avg {
        count_include_pad: bool,
        divisor: Option<i64>,
    },
}

/// Options of [`pool`] (one entry per spatial dim).
#[derive(Debug, Clone)]
pub struct PoolOptions {
    pub kernel: Vec<i64>,
    pub stride: Vec<i64>,
    pub padding: Vec<i64>,
    pub dilation: Vec<i64>,
    pub ceil_mode: bool,
}

fn pool_out_size(l: i64, k: i64, s: i64, p: i64, d: i64, ceil: bool) -> i64 {
    let num = l + 2 * p - d * (k - 1) - 1;
    let mut o = if ceil {
        (num + s - 1).div_euclid(s) + 1
    } else {
        num.div_euclid(s) + 1
    };
    if ceil && (o - 1) * s >= l + p {
        o -= 1;
    }
    o
}

/// Checks a pooling call (rank, kernel, stride, dilation, padding) and returns the spatial
/// size of its output.
fn pool_output_shape(op: &'static str, x: &Tensor, o: &PoolOptions) -> Result<Vec<usize>> {
    pool_rank_check(op, x, o)?;
    let nd = o.kernel.len();
    let sp = &x.shape()[x.dim() - nd..];
    for d in 0..nd {
        if o.kernel[d] <= 0 || o.stride[d] <= 0 || o.dilation[d] <= 0 {
            return Err(invalid(
                op,
                "kernel size, stride and dilation should be greater than zero",
            ));
        }
        if o.padding[d] < 0 || o.padding[d] * 2 > o.kernel[d] {
            return Err(invalid(
                op,
                format!(
                    "pad should be at most half of effective kernel size, but got pad={}, kernel_size={}",
                    o.padding[d], o.kernel[d]
                ),
            ));
        }
    }
    let mut out_sp = Vec::with_capacity(nd);
    for d in 0..nd {
        let n = pool_out_size(
            sp[d] as i64,
            o.kernel[d],
            o.stride[d],
            o.padding[d],
            o.dilation[d],
            o.ceil_mode,
        );
        if n <= 0 {
            return Err(invalid(
                op,
                format!("Output size is too small (input {:?})", x.shape()),
            ));
        }
        out_sp.push(n as usize);
    }
    Ok(out_sp)
}

/// Pooling over `nd` dims takes an input of `nd + 1` or `nd + 2` dims.
fn pool_rank_check(op: &'static str, x: &Tensor, o: &PoolOptions) -> Result<()> {
    let nd = o.kernel.len();
    if x.dim() < nd + 1 || x.dim() > nd + 2 {
        return Err(invalid(
            op,
            format!(
                "Expected {}D or {}D input, got shape {:?}",
                nd + 1,
                nd + 2,
                x.shape()
            ),
        ));
    }
    Ok(())
}

/// The kernel offsets of a pooling window, in row-major order.
fn kernel_offsets(o: &PoolOptions) -> Vec<Vec<usize>> {
    let ks: Vec<usize> = o.kernel.iter().map(|&k| k as usize).collect();
    let mut koffs = Vec::new();
    for_each_index(&ks, |k| koffs.push(k.to_vec()));
    koffs
}

/// The flat in-plane offset of kernel position `k` of the window at output `opos`, or None
/// where it falls in the padding. `dilated` is false for average pooling (no dilation).
fn window_offset(
    opos: &[usize],
    k: &[usize],
    sp: &[usize],
    in_str: &[usize],
    o: &PoolOptions,
    dilated: bool,
) -> Option<usize> {
    let mut off = 0usize;
    for d in 0..sp.len() {
        let step = if dilated { o.dilation[d] } else { 1 };
        let p = opos[d] as i64 * o.stride[d] - o.padding[d] + k[d] as i64 * step;
        if p < 0 || p >= sp[d] as i64 {
            return None;
        }
        off += p as usize * in_str[d];
    }
    Some(off)
}

/// Average pooling's divisor for the window at output `opos`: the override, the window's size
/// clipped to the padded input, or the number of real (non-padding) elements.
fn avg_divisor(
    opos: &[usize],
    sp: &[usize],
    o: &PoolOptions,
    count_include_pad: bool,
    divisor: Option<i64>,
) -> i64 {
    let mut pool_size = 1i64;
    let mut valid = 1i64;
    for d in 0..sp.len() {
        let start = opos[d] as i64 * o.stride[d] - o.padding[d];
        let end = (start + o.kernel[d]).min(sp[d] as i64 + o.padding[d]);
        pool_size *= end - start;
        let (s2, e2) = (start.max(0), end.min(sp[d] as i64));
        valid *= (e2 - s2).max(0);
    }
    match divisor {
        Some(dv) => dv,
        None if count_include_pad => pool_size,
        None => valid,
    }
}

/// Max/avg pooling over the trailing `kernel.len()` dims of `x`; returns values and (for max)
/// the flat spatial index of each maximum.
pub fn pool(x: &Tensor, kind: PoolKind, o: &PoolOptions) -> Result<(Tensor, Tensor)> {
    let op = match kind {
        PoolKind::Max => "max_pool",
        PoolKind::Avg { .. } => "avg_pool",
    };
    pool_rank_check(op, x, o)?;
    if x.dtype() == DType::Bool || (!x.dtype().is_float() && matches!(kind, PoolKind::Avg { .. })) {
        return Err(Error::UnsupportedDType {
            op,
            dtype: x.dtype(),
        });
    }
    let out_sp = pool_output_shape(op, x, o)?;
    let nd = o.kernel.len();
    let lead = x.dim() - nd;
    let planes: usize = x.shape()[..lead].iter().product();
    let sp: Vec<usize> = x.shape()[lead..].to_vec();
    let in_plane: usize = sp.iter().product();
    let out_plane: usize = out_sp.iter().product();
    let in_str = strides_of(&sp);
    let koffs = kernel_offsets(o);
    let is_int = !x.dtype().is_float();
    let xv = x.to_vec::<f64>()?;
    let xi = if is_int {
        x.to_vec::<i64>()?
    } else {
        Vec::new()
    };
    let mut vals = Vec::with_capacity(planes * out_plane);
    let mut ivals = Vec::new();
    let mut idxs = Vec::with_capacity(planes * out_plane);
    for pl in 0..planes {
        let base = pl * in_plane;
        for_each_index(&out_sp, |opos| match kind {
            PoolKind::Max => {
                let mut best = f64::NEG_INFINITY;
                let mut besti = i64::MIN;
                let mut at: i64 = -1;
                for k in &koffs {
                    let Some(off) = window_offset(opos, k, &sp, &in_str, o, true) else {
                        continue;
                    };
                    if is_int {
                        let v = xi[base + off];
                        if at < 0 || v > besti {
                            besti = v;
                            at = off as i64;
                        }
                    } else {
                        let v = xv[base + off];
                        if at < 0 || v > best || v.is_nan() {
                            best = v;
                            at = off as i64;
                            if v.is_nan() {
                                break;
                            }
                        }
                    }
                }
                vals.push(best);
                ivals.push(besti);
                idxs.push(at);
            }
            PoolKind::Avg {
                count_include_pad,
                divisor,
            } => {
                let sum: f64 = koffs
                    .iter()
                    .filter_map(|k| window_offset(opos, k, &sp, &in_str, o, false))
                    .map(|off| xv[base + off])
                    .sum();
                let div = avg_divisor(opos, &sp, o, count_include_pad, divisor);
                vals.push(sum / div as f64);
                idxs.push(0);
            }
        });
    }
    let mut shape = x.shape()[..lead].to_vec();
    shape.extend(&out_sp);
    let v = if is_int {
        Tensor::from_i64s(&ivals, &shape, x.dtype())?
    } else {
        Tensor::from_f64s(&vals, &shape, x.dtype())?
    };
    Ok((v, Tensor::from_i64s(&idxs, &shape, DType::I64)?))
}

/// Checks that `grad` has the shape of the pooling output: the input's leading dims followed by
/// `out_sp`.
fn check_grad_shape(op: &'static str, grad: &Tensor, x: &Tensor, out_sp: &[usize]) -> Result<()> {
    let lead = x.dim() - out_sp.len();
    let mut want = x.shape()[..lead].to_vec();
    want.extend(out_sp);
    if grad.shape() != want.as_slice() {
        return Err(invalid(
            op,
            format!(
                "grad_output has shape {:?}, expected {want:?} for input {:?}",
                grad.shape(),
                x.shape()
            ),
        ));
    }
    Ok(())
}

/// Scatters `grad` (one value per pooled output) onto the input positions that `indices` (flat
/// spatial offsets per plane, as [`pool`] and [`adaptive_pool`] return them) name: the backward
/// of max pooling.
fn scatter_by_indices(
    op: &'static str,
    grad: &Tensor,
    x: &Tensor,
    indices: &Tensor,
    nd: usize,
) -> Result<Tensor> {
    if indices.shape() != grad.shape() {
        return Err(invalid(
            op,
            format!(
                "indices have shape {:?}, expected the grad_output's {:?}",
                indices.shape(),
                grad.shape()
            ),
        ));
    }
    let lead = x.dim() - nd;
    let planes: usize = x.shape()[..lead].iter().product();
    let in_plane: usize = x.shape()[lead..].iter().product();
    let out_plane: usize = grad.shape()[lead..].iter().product();
    let g = grad.to_vec::<f64>()?;
    let idx = indices.to_vec::<i64>()?;
    let mut out = vec![0.0; planes * in_plane];
    for pl in 0..planes {
        for j in 0..out_plane {
            let at = idx[pl * out_plane + j];
            if at < 0 || at as usize >= in_plane {
                return Err(invalid(
                    op,
                    format!("index {at} is out of bounds for a plane of {in_plane} elements"),
                ));
            }
            out[pl * in_plane + at as usize] += g[pl * out_plane + j];
        }
    }
    Tensor::from_f64s(&out, x.shape(), grad.dtype())
}

/// The backward of [`pool`]: the gradient of the input `x` given the output's gradient `grad`.
/// Average pooling spreads each output's gradient over its window divided by the same divisor
/// as the forward; max pooling sends it to the position in `indices`.
pub fn pool_backward(
    grad: &Tensor,
    x: &Tensor,
    kind: PoolKind,
    o: &PoolOptions,
    indices: Option<&Tensor>,
) -> Result<Tensor> {
    let op = match kind {
        PoolKind::Max => "max_pool_backward",
        PoolKind::Avg { .. } => "avg_pool_backward",
    };
    float_only(op, grad)?;
    let out_sp = pool_output_shape(op, x, o)?;
    check_grad_shape(op, grad, x, &out_sp)?;
    let nd = o.kernel.len();
    let (count_include_pad, divisor) = match kind {
        PoolKind::Max => {
            let indices = indices.ok_or_else(|| invalid(op, "max pooling needs its indices"))?;
            return scatter_by_indices(op, grad, x, indices, nd);
        }
        PoolKind::Avg {
            count_include_pad,
            divisor,
        } => (count_include_pad, divisor),
    };
    let lead = x.dim() - nd;
    let sp: Vec<usize> = x.shape()[lead..].to_vec();
    let planes: usize = x.shape()[..lead].iter().product();
    let in_plane: usize = sp.iter().product();
    let out_plane: usize = out_sp.iter().product();
    let in_str = strides_of(&sp);
    let koffs = kernel_offsets(o);
    let g = grad.to_vec::<f64>()?;
    let mut out = vec![0.0; planes * in_plane];
    for pl in 0..planes {
        let base = pl * in_plane;
        let mut j = 0;
        for_each_index(&out_sp, |opos| {
            let div = avg_divisor(opos, &sp, o, count_include_pad, divisor);
            let share = g[pl * out_plane + j] / div as f64;
            j += 1;
            for k in &koffs {
                if let Some(off) = window_offset(opos, k, &sp, &in_str, o, false) {
                    out[base + off] += share;
                }
            }
        });
    }
    Tensor::from_f64s(&out, x.shape(), grad.dtype())
}

/// Adaptive pooling's window for output `opos`: per dim, [floor(o*in/out), ceil((o+1)*in/out)).
fn adaptive_window(opos: &[usize], sp: &[usize], out_sp: &[usize]) -> Vec<(usize, usize)> {
    (0..sp.len())
        .map(|d| {
            let s = (opos[d] * sp[d]) / out_sp[d];
            let e = ((opos[d] + 1) * sp[d]).div_ceil(out_sp[d]);
            (s, e)
        })
        .collect()
}

/// The backward of [`adaptive_pool`] over the trailing `nd` dims: average pooling spreads each
/// output's gradient evenly over its window; max pooling sends it to the position in `indices`.
pub fn adaptive_pool_backward(
    grad: &Tensor,
    x: &Tensor,
    nd: usize,
    indices: Option<&Tensor>,
) -> Result<Tensor> {
    let op = if indices.is_some() {
        "adaptive_max_pool_backward"
    } else {
        "adaptive_avg_pool_backward"
    };
    float_only(op, grad)?;
    if grad.dim() != x.dim() || x.dim() < nd + 1 || x.dim() > nd + 2 {
        return Err(invalid(
            op,
            format!(
                "grad_output {:?} does not match input {:?}",
                grad.shape(),
                x.shape()
            ),
        ));
    }
    let lead = x.dim() - nd;
    let sp: Vec<usize> = x.shape()[lead..].to_vec();
    let out_sp: Vec<usize> = grad.shape()[lead..].to_vec();
    check_grad_shape(op, grad, x, &out_sp)?;
    if let Some(indices) = indices {
        return scatter_by_indices(op, grad, x, indices, nd);
    }
    let planes: usize = x.shape()[..lead].iter().product();
    let in_plane: usize = sp.iter().product();
    let out_plane: usize = out_sp.iter().product();
    let in_str = strides_of(&sp);
    let g = grad.to_vec::<f64>()?;
    let mut out = vec![0.0; planes * in_plane];
    for pl in 0..planes {
        let base = pl * in_plane;
        let mut j = 0;
        for_each_index(&out_sp, |opos| {
            let ranges = adaptive_window(opos, &sp, &out_sp);
            let win: Vec<usize> = ranges.iter().map(|(s, e)| e - s).collect();
            let cnt: usize = win.iter().product();
            let share = g[pl * out_plane + j] / cnt as f64;
            j += 1;
            for_each_index(&win, |w| {
                let mut off = 0;
                for d in 0..nd {
                    off += (ranges[d].0 + w[d]) * in_str[d];
                }
                out[base + off] += share;
            });
        });
    }
    Tensor::from_f64s(&out, x.shape(), grad.dtype())
}

/// Adaptive average/max pooling to `output` over the trailing `output.len()` dims.
pub fn adaptive_pool(x: &Tensor, output: &[i64], max: bool) -> Result<(Tensor, Tensor)> {
    let op = if max {
        "adaptive_max_pool"
    } else {
        "adaptive_avg_pool"
    };
    let nd = output.len();
    if x.dim() < nd + 1 || x.dim() > nd + 2 {
        return Err(invalid(
            op,
            format!(
                "Expected {}D or {}D input, got {:?}",
                nd + 1,
                nd + 2,
                x.shape()
            ),
        ));
    }
    if !max {
        float_only(op, x)?;
    }
    let lead = x.dim() - nd;
    let planes: usize = x.shape()[..lead].iter().product();
    let sp: Vec<usize> = x.shape()[lead..].to_vec();
    let out_sp: Vec<usize> = output
        .iter()
        .zip(&sp)
        .map(|(&o, &s)| if o < 0 { s } else { o as usize })
        .collect();
    let in_plane: usize = sp.iter().product();
    let in_str = strides_of(&sp);
    let xv = x.to_vec::<f64>()?;
    let mut vals = Vec::new();
    let mut idxs = Vec::new();
    for pl in 0..planes {
        let base = pl * in_plane;
        for_each_index(&out_sp, |opos| {
            let ranges = adaptive_window(opos, &sp, &out_sp);
            let win: Vec<usize> = ranges.iter().map(|(s, e)| e - s).collect();
            let mut sum = 0.0;
            let mut best = f64::NEG_INFINITY;
            let mut at = -1i64;
            let mut cnt = 0usize;
            for_each_index(&win, |w| {
                let mut off = 0;
                for d in 0..nd {
                    off += (ranges[d].0 + w[d]) * in_str[d];
                }
                let v = xv[base + off];
                sum += v;
                cnt += 1;
                if at < 0 || v > best || (v.is_nan() && !best.is_nan()) {
                    best = v;
                    at = off as i64;
                }
            });
            if max {
                vals.push(best);
            } else {
                vals.push(sum / cnt as f64);
            }
            idxs.push(at);
        });
    }
    let mut shape = x.shape()[..lead].to_vec();
    shape.extend(&out_sp);
    Ok((
        Tensor::from_f64s(&vals, &shape, x.dtype())?,
        Tensor::from_i64s(&idxs, &shape, DType::I64)?,
    ))
}

/// `torch.constant_pad_nd(x, pad, value)`: `pad` lists (before, after) pairs from the last dim
/// backwards; negative entries crop.
pub fn constant_pad(x: &Tensor, pad: &[i64], value: Scalar) -> Result<Tensor> {
    let op = "constant_pad_nd";
    if !pad.len().is_multiple_of(2) || pad.len() / 2 > x.dim() {
        return Err(invalid(
            op,
            format!(
                "Length of pad must be even but instead it equals {}",
                pad.len()
            ),
        ));
    }
    let n = x.dim();
    let mut cropped = x.clone();
    let mut shape: Vec<usize> = x.shape().to_vec();
    let mut offsets = vec![0usize; n];
    for i in 0..pad.len() / 2 {
        let d = n - 1 - i;
        let (lo, hi) = (pad[2 * i], pad[2 * i + 1]);
        let size = x.shape()[d] as i64;
        let new = size + lo + hi;
        if new < 0 {
            return Err(invalid(
                op,
                format!(
                    "The input size {size}, plus negative padding {lo} and {hi} resulted in a negative output size, which is invalid. Check dimension {d} of your input."
                ),
            ));
        }
        let start = (-lo).max(0);
        let keep = (size - start - (-hi).max(0)).max(0);
        cropped = cropped.narrow(d as i64, start, keep as usize)?;
        shape[d] = new as usize;
        offsets[d] = lo.max(0) as usize;
    }
    if x.device() == crate::Device::Meta {
        return Tensor::meta(&shape, x.dtype());
    }
    let out = crate::ops::creation::full(&shape, value, Some(x.dtype()))?;
    let mut dst = out.clone();
    for d in 0..n {
        dst = dst.narrow(d as i64, offsets[d] as i64, cropped.shape()[d])?;
    }
    dst.copy_(&cropped)?;
    Ok(out)
}

/// Non-constant padding modes of `F.pad`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PadMode {
    Reflect,
    Replicate,
    Circular,
}

/// `F.pad(x, pad, mode)` for reflect/replicate/circular on the trailing `pad.len() / 2` dims.
pub fn pad_mode(x: &Tensor, pad: &[i64], mode: PadMode) -> Result<Tensor> {
    let op = "pad";
    if !pad.len().is_multiple_of(2) || pad.len() / 2 > x.dim() {
        return Err(invalid(op, "Padding length must be divisible by 2"));
    }
    let n = x.dim();
    let mut cur = x.clone();
    for i in 0..pad.len() / 2 {
        let d = n - 1 - i;
        let (lo, hi) = (pad[2 * i], pad[2 * i + 1]);
        let size = cur.shape()[d] as i64;
        if mode == PadMode::Reflect && (lo >= size || hi >= size) {
            return Err(invalid(
                op,
                format!(
                    "Argument #4: Padding size should be less than the corresponding input dimension, but got: padding ({lo}, {hi}) at dimension {d} of input {:?}",
                    x.shape()
                ),
            ));
        }
        if mode == PadMode::Circular && (lo > size || hi > size) {
            return Err(invalid(
                op,
                "Padding value causes wrapping around more than once.",
            ));
        }
        let out_len = size + lo + hi;
        // Circular padding wraps around what is left after negative pads crop (upstream
        // fills the borders from the cropped centre).
        let (kept_from, kept) = ((-lo).max(0), (size - (-lo).max(0) - (-hi).max(0)).max(1));
        let idx: Vec<i64> = (0..out_len)
            .map(|j| {
                let p = j - lo;
                match mode {
                    PadMode::Replicate => p.clamp(0, size - 1),
                    PadMode::Circular => kept_from + (j - lo.max(0)).rem_euclid(kept),
                    PadMode::Reflect => {
                        let period = 2 * (size - 1);
                        if period == 0 {
                            0
                        } else {
                            let m = p.rem_euclid(period);
                            if m < size {
                                m
                            } else {
                                period - m
                            }
                        }
                    }
                }
            })
            .collect();
        let it = Tensor::from_i64s(&idx, &[idx.len()], DType::I64)?;
        cur = cur.index_select(d as i64, &it)?;
    }
    Ok(cur)
}

/// Interpolation modes of [`upsample`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Interp {
    Nearest,
    NearestExact,
    Linear { align_corners: bool },
    Cubic { align_corners: bool },
}

/// Bicubic taps (upstream's A = -0.75 convolution, indices clamped to the border).
fn cubic_taps(
    input: usize,
    output: usize,
    scale: Option<f64>,
    align_corners: bool,
    f32_math: bool,
) -> Vec<Vec<(usize, f64)>> {
    const A: f64 = -0.75;
    let cc1 = |x: f64| ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0;
    let cc2 = |x: f64| ((A * x - 5.0 * A) * x + 8.0 * A) * x - 4.0 * A;
    (0..output)
        .map(|o| {
            let src = if align_corners {
                let s = if output > 1 {
                    (input as f64 - 1.0) / (output as f64 - 1.0)
                } else {
                    0.0
                };
                if f32_math {
                    (s as f32 * o as f32) as f64
                } else {
                    s * o as f64
                }
            } else {
                let s = scale_value(scale, input, output);
                if f32_math {
                    ((s as f32) * (o as f32 + 0.5) - 0.5) as f64
                } else {
                    s * (o as f64 + 0.5) - 0.5
                }
            };
            let fl = src.floor();
            let t = src - fl;
            let i = fl as i64;
            let w = [cc2(t + 1.0), cc1(t), cc1(1.0 - t), cc2(2.0 - t)];
            (0..4)
                .map(|k| {
                    let idx = (i - 1 + k as i64).clamp(0, input as i64 - 1) as usize;
                    (idx, w[k])
                })
                .collect()
        })
        .collect()
}

/// upstream's `compute_scales_value`: `1 / scale` when a scale was given, else `in / out`.
fn scale_value(scale: Option<f64>, input: usize, output: usize) -> f64 {
    match scale {
        Some(s) if s > 0.0 => 1.0 / s,
        _ => input as f64 / output as f64,
    }
}

/// For each output position along one dim: (i0, i1, weight of i1).
fn interp_taps(
    mode: Interp,
    input: usize,
    output: usize,
    scale: Option<f64>,
    f32_math: bool,
) -> Vec<(usize, usize, f64)> {
    (0..output)
        .map(|o| match mode {
            Interp::Nearest | Interp::NearestExact => {
                let s = scale_value(scale, input, output) as f32;
                let i = if output == input {
                    o
                } else if mode == Interp::Nearest && output == 2 * input {
                    o >> 1
                } else {
                    let off = if mode == Interp::NearestExact {
                        0.5f32
                    } else {
                        0.0
                    };
                    (((o as f32 + off) * s).floor() as usize).min(input - 1)
                };
                (i, i, 0.0)
            }
            Interp::Linear { align_corners } | Interp::Cubic { align_corners } => {
                let src = if align_corners {
                    let s = if output > 1 {
                        (input as f64 - 1.0) / (output as f64 - 1.0)
                    } else {
                        0.0
                    };
                    if f32_math {
                        (s as f32 * o as f32) as f64
                    } else {
                        s * o as f64
                    }
                } else {
                    let s = scale_value(scale, input, output);
                    let v = if f32_math {
                        ((s as f32) * (o as f32 + 0.5) - 0.5) as f64
                    } else {
                        s * (o as f64 + 0.5) - 0.5
                    };
                    v.max(0.0)
                };
                let i0 = (src.floor() as usize).min(input - 1);
                let i1 = if i0 < input - 1 { i0 + 1 } else { i0 };
                let l1 = if f32_math {
                    (src as f32 - i0 as f32) as f64
                } else {
                    src - i0 as f64
                };
                (i0, i1, l1)
            }
        })
        .collect()
}

/// `upsample_{nearest,linear,bilinear}` over the trailing `out_size.len()` dims of
/// `[B, C, *spatial]`, one separable pass per dim.
pub fn upsample(
    x: &Tensor,
    out_size: &[usize],
    scales: &[Option<f64>],
    mode: Interp,
) -> Result<Tensor> {
    let op = "upsample";
    let nd = out_size.len();
    if x.dim() != nd + 2 {
        return Err(invalid(
            op,
            format!("Expected {}D input, got {:?}", nd + 2, x.shape()),
        ));
    }
    if matches!(mode, Interp::Linear { .. } | Interp::Cubic { .. }) {
        float_only(op, x)?;
    }
    if x.dtype() == DType::Bool {
        return Err(Error::UnsupportedDType {
            op,
            dtype: x.dtype(),
        });
    }
    if out_size.contains(&0) || x.shape()[2..].contains(&0) {
        return Err(invalid(
            op,
            format!(
                "Input and output sizes should be greater than 0, but got input {:?} and output {out_size:?}",
                x.shape()
            ),
        ));
    }
    let f32_math = x.dtype() != DType::F64;
    let mut shape = x.shape().to_vec();
    let mut v = x.to_vec::<f64>()?;
    for d in 0..nd {
        let axis = 2 + d;
        let (inp, outp) = (shape[axis], out_size[d]);
        let sc = scales.get(d).copied().flatten();
        let taps = upsample_taps(mode, inp, outp, sc, f32_math);
        let outer: usize = shape[..axis].iter().product();
        let inner: usize = shape[axis + 1..].iter().product();
        let mut nv = vec![0.0; outer * outp * inner];
        for o in 0..outer {
            for (j, tap) in taps.iter().enumerate() {
                for k in 0..inner {
                    nv[(o * outp + j) * inner + k] = if tap.len() == 1 {
                        v[(o * inp + tap[0].0) * inner + k]
                    } else {
                        tap.iter()
                            .map(|&(i, w)| w * v[(o * inp + i) * inner + k])
                            .sum()
                    };
                }
            }
        }
        v = nv;
        shape[axis] = outp;
    }
    Tensor::from_f64s(&v, &shape, x.dtype())
}

/// The per-dim taps of [`upsample`]: for each output position, the input positions it reads
/// and their weights.
fn upsample_taps(
    mode: Interp,
    input: usize,
    output: usize,
    scale: Option<f64>,
    f32_math: bool,
) -> Vec<Vec<(usize, f64)>> {
    match mode {
        Interp::Cubic { align_corners } => {
            cubic_taps(input, output, scale, align_corners, f32_math)
        }
        _ => interp_taps(mode, input, output, scale, f32_math)
            .into_iter()
            .map(|(i0, i1, l1)| {
                if l1 == 0.0 {
                    vec![(i0, 1.0)]
                } else {
                    vec![(i0, 1.0 - l1), (i1, l1)]
                }
            })
            .collect(),
    }
}

/// The backward of [`upsample`]: `grad` (shaped like its output) sent back through each dim's
/// taps, transposed, to an input of shape `in_shape`.
pub fn upsample_backward(
    grad: &Tensor,
    in_shape: &[usize],
    scales: &[Option<f64>],
    mode: Interp,
) -> Result<Tensor> {
    let op = "upsample_backward";
    float_only(op, grad)?;
    if in_shape.len() != grad.dim() || grad.dim() < 3 || in_shape[..2] != grad.shape()[..2] {
        return Err(invalid(
            op,
            format!(
                "grad_output {:?} does not match input size {in_shape:?}",
                grad.shape()
            ),
        ));
    }
    if in_shape[2..].contains(&0) || grad.shape()[2..].contains(&0) {
        return Err(invalid(
            op,
            format!(
                "Input and output sizes should be greater than 0, but got input {in_shape:?} and output {:?}",
                grad.shape()
            ),
        ));
    }
    let nd = in_shape.len() - 2;
    let f32_math = grad.dtype() != DType::F64;
    let mut shape = grad.shape().to_vec();
    let mut v = grad.to_vec::<f64>()?;
    for d in (0..nd).rev() {
        let axis = 2 + d;
        let (inp, outp) = (in_shape[axis], shape[axis]);
        let taps = upsample_taps(mode, inp, outp, scales.get(d).copied().flatten(), f32_math);
        let outer: usize = shape[..axis].iter().product();
        let inner: usize = shape[axis + 1..].iter().product();
        let mut nv = vec![0.0; outer * inp * inner];
        for o in 0..outer {
            for (j, tap) in taps.iter().enumerate() {
                for &(i, w) in tap {
                    for k in 0..inner {
                        nv[(o * inp + i) * inner + k] += w * v[(o * outp + j) * inner + k];
                    }
                }
            }
        }
        v = nv;
        shape[axis] = inp;
    }
    Tensor::from_f64s(&v, &shape, grad.dtype())
}

/// `F.fold` / `col2im`: sums `[N, C*kh*kw, L]` columns back into `[N, C, H, W]`.
pub fn col2im(
    x: &Tensor,
    output: [usize; 2],
    kernel: [usize; 2],
    dilation: [usize; 2],
    padding: [usize; 2],
    stride: [usize; 2],
) -> Result<Tensor> {
    let op = "col2im";
    float_only(op, x)?;
    let unbatched = x.dim() == 2;
    if x.dim() != 2 && x.dim() != 3 {
        return Err(invalid(
            op,
            format!("Expected 2D or 3D (batch mode) tensor for input with possibly 0 batch size and non-zero dimensions for input, but got: {:?}", x.shape()),
        ));
    }
    let xb = if unbatched {
        x.unsqueeze(0)?
    } else {
        x.clone()
    };
    let (n, ck, l) = (xb.shape()[0], xb.shape()[1], xb.shape()[2]);
    let kk = kernel[0] * kernel[1];
    if kk == 0 || ck % kk != 0 || stride.contains(&0) || dilation.contains(&0) {
        return Err(invalid(
            op,
            format!("Expected size of input's dimension 1 to be divisible by the product of kernel_size, but got input.size(1)={ck} and kernel_size={kernel:?}"),
        ));
    }
    let c = ck / kk;
    let blocks: Vec<usize> = (0..2)
        .map(|d| {
            let eff = dilation[d] * (kernel[d] - 1) + 1;
            (output[d] + 2 * padding[d]).saturating_sub(eff) / stride[d] + 1
        })
        .collect();
    if blocks[0] * blocks[1] != l {
        return Err(invalid(
            op,
            format!("Given output_size={output:?}, kernel_size={kernel:?}, dilation={dilation:?}, padding={padding:?}, stride={stride:?}, expected size of input's dimension 2 to match the calculated number of sliding blocks {} * {} = {}, but got input.size(2)={l}.", blocks[0], blocks[1], blocks[0] * blocks[1]),
        ));
    }
    let v = xb.to_vec::<f64>()?;
    let (h, w) = (output[0], output[1]);
    let mut out = vec![0.0; n * c * h * w];
    for b in 0..n {
        for ch in 0..c {
            for ki in 0..kernel[0] {
                for kj in 0..kernel[1] {
                    let row = (ch * kernel[0] + ki) * kernel[1] + kj;
                    for bi in 0..blocks[0] {
                        for bj in 0..blocks[1] {
                            let y = (bi * stride[0] + ki * dilation[0]) as i64 - padding[0] as i64;
                            let xx = (bj * stride[1] + kj * dilation[1]) as i64 - padding[1] as i64;
                            if y < 0 || xx < 0 || y >= h as i64 || xx >= w as i64 {
                                continue;
                            }
                            out[((b * c + ch) * h + y as usize) * w + xx as usize] +=
                                v[(b * ck + row) * l + bi * blocks[1] + bj];
                        }
                    }
                }
            }
        }
    }
    let r = Tensor::from_f64s(&out, &[n, c, h, w], x.dtype())?;
    if unbatched {
        r.squeeze_dims(&[0])
    } else {
        Ok(r)
    }
}

/// `embedding_bag(weight, indices [L], offsets [B], mode)` (0 sum, 1 mean, 2 max): one
/// output row per bag; empty bags give zeros. Returns only the output.
pub fn embedding_bag(
    weight: &Tensor,
    indices: &Tensor,
    offsets: &Tensor,
    mode: i64,
    per_sample_weights: Option<&Tensor>,
    include_last_offset: bool,
    padding_idx: Option<i64>,
) -> Result<Tensor> {
    let op = "embedding_bag";
    float_only(op, weight)?;
    if weight.dim() != 2 || indices.dim() != 1 || offsets.dim() != 1 {
        return Err(invalid(
            op,
            "expected 2-D weight and 1-D indices and offsets",
        ));
    }
    let (rows, d) = (weight.shape()[0], weight.shape()[1]);
    let wv = weight.to_vec::<f64>()?;
    let iv = indices.to_vec::<i64>()?;
    let mut ov = offsets.to_vec::<i64>()?;
    let psw = per_sample_weights.map(|p| p.to_vec::<f64>()).transpose()?;
    let nb = if include_last_offset {
        ov.len().saturating_sub(1)
    } else {
        ov.len()
    };
    if !include_last_offset {
        ov.push(iv.len() as i64);
    }
    let mut out = vec![0.0; nb * d];
    for b in 0..nb {
        let (s, e) = (
            ov[b].max(0) as usize,
            (ov[b + 1].max(0) as usize).min(iv.len()),
        );
        let mut count = 0usize;
        let mut first = true;
        for k in s..e.max(s) {
            let i = iv[k];
            if Some(i) == padding_idx {
                continue;
            }
            if i < 0 || i as usize >= rows {
                return Err(Error::IndexOutOfRange {
                    op,
                    index: i,
                    size: rows,
                });
            }
            let sw = psw.as_ref().map(|p| p[k]).unwrap_or(1.0);
            for j in 0..d {
                let v = wv[i as usize * d + j] * sw;
                let o = &mut out[b * d + j];
                if mode == 2 {
                    if first || v > *o {
                        *o = v;
                    }
                } else {
                    *o += v;
                }
            }
            first = false;
            count += 1;
        }
        if mode == 1 && count > 0 {
            for j in 0..d {
                out[b * d + j] /= count as f64;
            }
        }
    }
    Tensor::from_f64s(&out, &[nb, d], weight.dtype())
}

/// Filters of the antialiased resizes (`F.interpolate(..., antialias=True)`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum AntialiasFilter {
    /// Triangle filter over 2 taps at scale 1 (bilinear).
    Triangle,
    /// Keys cubic with a = -0.5 over 4 taps at scale 1 (bicubic; PIL's choice, as upstream).
    Cubic,
}

impl AntialiasFilter {
    fn taps(self) -> f64 {
        match self {
            AntialiasFilter::Triangle => 2.0,
            AntialiasFilter::Cubic => 4.0,
        }
    }

    fn weight(self, x: f64) -> f64 {
        let x = x.abs();
        match self {
            AntialiasFilter::Triangle => (1.0 - x).max(0.0),
            AntialiasFilter::Cubic => {
                const A: f64 = -0.5;
                if x < 1.0 {
                    ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0
                } else if x < 2.0 {
                    ((A * x - 5.0 * A) * x + 8.0 * A) * x - 4.0 * A
                } else {
                    0.0
                }
            }
        }
    }
}

/// Resampling weights `[output, input]` of one dim: when shrinking, the filter widens by the
/// scale so every input pixel contributes (antialiasing); each row sums to 1.
fn antialias_weights(
    filter: AntialiasFilter,
    input: usize,
    output: usize,
    scale: Option<f64>,
    align_corners: bool,
) -> Vec<f64> {
    let scale = if align_corners {
        if output > 1 {
            (input as f64 - 1.0) / (output as f64 - 1.0)
        } else {
            0.0
        }
    } else {
        scale_value(scale, input, output)
    };
    let support = if scale >= 1.0 {
        filter.taps() * 0.5 * scale
    } else {
        filter.taps() * 0.5
    };
    let inv = if scale >= 1.0 { 1.0 / scale } else { 1.0 };
    let mut w = vec![0.0; output * input];
    for o in 0..output {
        let center = scale * (o as f64 + 0.5);
        // Truncation toward zero, then clamped to the input, as upstream bounds the window.
        let lo = ((center - support + 0.5) as i64).max(0) as usize;
        let hi = ((center + support + 0.5) as i64).clamp(0, input as i64) as usize;
        let row = &mut w[o * input..(o + 1) * input];
        let mut total = 0.0;
        for (j, slot) in row.iter_mut().enumerate().take(hi).skip(lo) {
            let v = filter.weight((j as f64 - center + 0.5) * inv);
            *slot = v;
            total += v;
        }
        if total != 0.0 {
            row.iter_mut().for_each(|v| *v /= total);
        }
    }
    w
}

/// `F.interpolate(x, mode="bilinear"|"bicubic", antialias=True)` on `[B, C, H, W]`: separable,
/// the last dim first, in float64, cast back to the input's dtype.
pub fn upsample_antialias(
    x: &Tensor,
    out_size: &[usize],
    scales: &[Option<f64>],
    align_corners: bool,
    filter: AntialiasFilter,
) -> Result<Tensor> {
    let op = "upsample_antialias";
    if x.dim() != 4 || out_size.len() != 2 {
        return Err(invalid(
            op,
            format!(
                "expected a 4D input and 2 output sizes, got {:?} and {out_size:?}",
                x.shape()
            ),
        ));
    }
    // Upstream computes the weights in the input's type and has no half kernels for them.
    if !matches!(x.dtype(), DType::F32 | DType::F64) {
        return Err(Error::UnsupportedDType {
            op: "compute_index_ranges_weights",
            dtype: x.dtype(),
        });
    }
    if out_size.contains(&0) || x.shape()[2..].contains(&0) {
        return Err(invalid(
            op,
            format!(
                "Input and output sizes should be greater than 0, but got input (H: {}, W: {}) output (H: {}, W: {})",
                x.shape()[2], x.shape()[3], out_size[0], out_size[1]
            ),
        ));
    }
    let mut y = x.to_dtype(DType::F64)?;
    for d in [1usize, 0] {
        let (input, output) = (x.shape()[2 + d], out_size[d]);
        let w = antialias_weights(
            filter,
            input,
            output,
            scales.get(d).copied().flatten(),
            align_corners,
        );
        let wt = Tensor::from_vec(w, &[output, input])?.transpose(0, 1)?;
        let moved = y.transpose(2 + d as i64, 3)?;
        y = moved.matmul(&wt)?.transpose(2 + d as i64, 3)?;
    }
    y.contiguous()?.to_dtype(x.dtype())
}
