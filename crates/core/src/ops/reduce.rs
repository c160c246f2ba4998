//! Reductions, scans and softmax. Each one permutes the reduced dims to the end (a view),
//! reads the tensor once in row-major order through the strided iterator, and then works on
//! contiguous groups: one group of `group_len` values per output element.

use crate::dtype::{DType, DEFAULT_FLOAT};
use crate::error::{invalid, Error, Result};
use crate::layout::wrap_dim;
use crate::tensor::Tensor;
use crate::Device;

/// A tensor rearranged so that each output element's inputs are contiguous.
pub(crate) struct Plan {
    /// The input with kept dims first and reduced dims last (a view).
    pub(crate) permuted: Tensor,
    /// Shape of the result (with or without kept size-1 dims).
    pub(crate) out_shape: Vec<usize>,
    /// Number of output elements.
    pub(crate) groups: usize,
    /// Number of inputs per output element.
    pub(crate) group_len: usize,
}

/// Resolves the reduced dims (`dims` empty means all dims, like PyTorch's `dim=()`).
fn plan(op: &'static str, t: &Tensor, dims: &[i64], keepdim: bool) -> Result<Plan> {
    if t.dtype().is_complex() {
        // Complex reductions live in ops::complex; the real ones would drop imaginary parts.
        return Err(Error::UnsupportedDType {
            op,
            dtype: t.dtype(),
        });
    }
    plan_any(op, t, dims, keepdim)
}

/// [`plan`] for any dtype (the complex reductions use it too).
pub(crate) fn plan_any(op: &'static str, t: &Tensor, dims: &[i64], keepdim: bool) -> Result<Plan> {
    let n = t.dim();
    let mut reduce = vec![dims.is_empty(); n];
    let mut seen = vec![false; n.max(1)];
    for &d in dims {
        let d = wrap_dim(op, d, n)?;
        if std::mem::replace(&mut seen[d], true) {
            return Err(invalid(
                op,
                format!("dim {d} appears multiple times in the list of dims"),
            ));
        }
        if n > 0 {
            reduce[d] = true;
        }
    }
    let kept: Vec<usize> = (0..n).filter(|&d| !reduce[d]).collect();
    let reduced: Vec<usize> = (0..n).filter(|&d| reduce[d]).collect();
    let order: Vec<i64> = kept.iter().chain(&reduced).map(|&d| d as i64).collect();
    let permuted = t.permute(&order)?;
    let out_shape: Vec<usize> = (0..n)
        .filter_map(|d| {
            if reduce[d] {
                keepdim.then_some(1)
            } else {
                Some(t.shape()[d])
            }
        })
        .collect();
    let groups = kept.iter().map(|&d| t.shape()[d]).product();
    let group_len = reduced.iter().map(|&d| t.shape()[d]).product();
    Ok(Plan {
        permuted,
        out_shape,
        groups,
        group_len,
    })
}

/// Float reduction helper: reads in `compute` dtype as f64 and reduces each group.
fn reduce_f64(
    op: &'static str,
    t: &Tensor,
    dims: &[i64],
    keepdim: bool,
    compute: DType,
    out: DType,
    f: &dyn Fn(&[f64]) -> f64,
) -> Result<Tensor> {
    let p = plan(op, t, dims, keepdim)?;
    if t.device() == Device::Meta {
        return Tensor::meta(&p.out_shape, out);
    }
    let v = p.permuted.to_dtype(compute)?.to_vec::<f64>()?;
    let r: Vec<f64> = (0..p.groups)
        .map(|g| f(&v[g * p.group_len..(g + 1) * p.group_len]))
        .collect();
    Tensor::from_f64s(&r, &p.out_shape, out)
}

/// Integer reduction helper (wrapping i64 arithmetic).
fn reduce_i64(
    op: &'static str,
    t: &Tensor,
    dims: &[i64],
    keepdim: bool,
    out: DType,
    f: &dyn Fn(&[i64]) -> i64,
) -> Result<Tensor> {
    let p = plan(op, t, dims, keepdim)?;
    if t.device() == Device::Meta {
        return Tensor::meta(&p.out_shape, out);
    }
    let v = p.permuted.to_vec::<i64>()?;
    let r: Vec<i64> = (0..p.groups)
        .map(|g| f(&v[g * p.group_len..(g + 1) * p.group_len]))
        .collect();
    Tensor::from_i64s(&r, &p.out_shape, out)
}

fn require_float(op: &'static str, t: &Tensor) -> Result<()> {
    if !t.dtype().is_float() {
        // upstream: "mean(): could not infer output dtype..." (NotImplementedError)
        return Err(Error::UnsupportedDType {
            op,
            dtype: t.dtype(),
        });
    }
    Ok(())
}

/// upstream's "Expected reduction dim N to have non-zero size." (an IndexError).
fn empty_dim(op: &'static str, dim: i64) -> Error {
    Error::IndexOutOfRange {
        op,
        index: dim,
        size: 0,
    }
}

/// Which values a max/min-style reduction selects.
#[derive(Clone, Copy, PartialEq)]
enum Extreme {
    Max,
    Min,
}

/// Index of the first extreme value (first NaN wins for floats, as NaN propagates).
fn extreme_index(v: &[f64], which: Extreme) -> usize {
    let mut best = 0;
    for (i, &x) in v.iter().enumerate() {
        let b = v[best];
        if b.is_nan() {
            break;
        }
        let better = x.is_nan() || if which == Extreme::Max { x > b } else { x < b };
        if better {
            best = i;
        }
    }
    best
}

fn extreme_index_i64(v: &[i64], which: Extreme) -> usize {
    let mut best = 0;
    for (i, &x) in v.iter().enumerate() {
        if (which == Extreme::Max && x > v[best]) || (which == Extreme::Min && x < v[best]) {
            best = i;
        }
    }
    best
}

/// Mean of a slice computed in f64 (compensated sum).
fn mean_of(v: &[f64]) -> f64 {
    neumaier(v.iter().copied()) / v.len() as f64
}

/// Options of `var`/`std`: `correction` is subtracted from N in the divisor (1 = Bessel).
#[derive(Debug, Clone, Copy)]
pub struct VarOptions {
    /// Subtracted from N in the divisor (1 = Bessel's correction, 0 = population).
    pub correction: f64,
    /// Keep reduced dims as size 1.
    pub keepdim: bool,
}

impl Default for VarOptions {
    fn default() -> Self {
        VarOptions {
            correction: 1.0,
            keepdim: false,
        }
    }
}

impl Tensor {
    /// `torch.sum(self, dims, keepdim)`; bool and integer inputs sum to int64.
    pub fn sum(&self, dims: &[i64], keepdim: bool) -> Result<Tensor> {
        self.sum_dtype(dims, keepdim, None)
    }

    /// `torch.prod(self, dims, keepdim)`; integers and bool give int64.
    pub fn prod(&self, dims: &[i64], keepdim: bool) -> Result<Tensor> {
        self.prod_dtype(dims, keepdim, None)
    }

    /// `torch.amax(self, dims, keepdim)`: maximum over several dims (NaN propagates; empty
    /// reductions are refused).
    pub fn amax(&self, dims: &[i64], keepdim: bool) -> Result<Tensor> {
        self.extreme_over("amax", dims, keepdim, Extreme::Max)
    }

    /// `torch.amin(self, dims, keepdim)`.
    pub fn amin(&self, dims: &[i64], keepdim: bool) -> Result<Tensor> {
        self.extreme_over("amin", dims, keepdim, Extreme::Min)
    }

    fn extreme_over(
        &self,
        op: &'static str,
        dims: &[i64],
        keepdim: bool,
        which: Extreme,
    ) -> Result<Tensor> {
        plan(op, self, dims, keepdim)?;
        check_nonempty_dims(op, self, dims)?;
        let d = self.dtype();
        if d.is_float() {
            reduce_f64(op, self, dims, keepdim, d, d, &|v| {
                v[extreme_index(v, which)]
            })
        } else {
            reduce_i64(op, self, dims, keepdim, d, &|v| {
                v[extreme_index_i64(v, which)]
            })
        }
    }

    /// `torch.mean(self, dims, keepdim)` (float dtypes only; empty groups give NaN).
    pub fn mean(&self, dims: &[i64], keepdim: bool) -> Result<Tensor> {
        require_float("mean", self)?;
        let d = self.dtype();
        if let Some(r) = self.mean_f32_in_order(dims, keepdim)? {
            return Ok(r);
        }
        reduce_f64("mean", self, dims, keepdim, d, d, &mean_of)
    }

    /// `torch.var(self, dims, correction, keepdim)` (float dtypes only).
    pub fn var(&self, dims: &[i64], options: VarOptions) -> Result<Tensor> {
        require_float("var", self)?;
        let d = self.dtype();
        let c = options.correction;
        reduce_f64("var", self, dims, options.keepdim, d, d, &|v| var_of(v, c))
    }

    /// `torch.std` (square root of [`Tensor::var`]).
    pub fn std(&self, dims: &[i64], options: VarOptions) -> Result<Tensor> {
        self.var(dims, options)?.sqrt()
    }

    /// `torch.any(self, dims, keepdim)`: bool result (uint8 input gives uint8, like PyTorch).
    pub fn any(&self, dims: &[i64], keepdim: bool) -> Result<Tensor> {
        let out = if self.dtype() == DType::U8 {
            DType::U8
        } else {
            DType::Bool
        };
        let b = self.ne(false)?;
        reduce_i64("any", &b, dims, keepdim, out, &|v| {
            v.iter().any(|&x| x != 0) as i64
        })
    }

    /// `torch.all(self, dims, keepdim)`.
    pub fn all(&self, dims: &[i64], keepdim: bool) -> Result<Tensor> {
        let out = if self.dtype() == DType::U8 {
            DType::U8
        } else {
            DType::Bool
        };
        let b = self.ne(false)?;
        reduce_i64("all", &b, dims, keepdim, out, &|v| {
            v.iter().all(|&x| x != 0) as i64
        })
    }

    /// `torch.logsumexp(self, dims, keepdim)`, stable (subtracts the max); integers compute
    /// in the default float dtype.
    pub fn logsumexp(&self, dims: &[i64], keepdim: bool) -> Result<Tensor> {
        let d = if self.dtype().is_float() {
            self.dtype()
        } else {
            DEFAULT_FLOAT
        };
        reduce_f64("logsumexp", self, dims, keepdim, d, d, &|v| {
            let m = v.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            if m.is_infinite() {
                return v.iter().map(|x| x.exp()).sum::<f64>().ln();
            }
            m + v.iter().map(|x| (x - m).exp()).sum::<f64>().ln()
        })
    }

    fn extreme_dim(
        &self,
        op: &'static str,
        dim: i64,
        keepdim: bool,
        which: Extreme,
    ) -> Result<(Tensor, Tensor)> {
        let pick = if which == Extreme::Max {
            Pick::Max
        } else {
            Pick::Min
        };
        select_dim(op, self, dim, keepdim, pick)
    }

    /// `torch.max(self, dim, keepdim)` -> (values, int64 indices of the first maximum; NaN wins).
    pub fn max_dim(&self, dim: i64, keepdim: bool) -> Result<(Tensor, Tensor)> {
        self.extreme_dim("max", dim, keepdim, Extreme::Max)
    }

    /// `torch.min(self, dim, keepdim)` -> (values, indices).
    pub fn min_dim(&self, dim: i64, keepdim: bool) -> Result<(Tensor, Tensor)> {
        self.extreme_dim("min", dim, keepdim, Extreme::Min)
    }

    /// `torch.max(self)`: 0-dim maximum over all elements (error when empty).
    pub fn max(&self) -> Result<Tensor> {
        if self.numel() == 0 {
            return Err(invalid(
                "max",
                "operation does not have an identity: the input is empty",
            ));
        }
        Ok(self.reshape(&[-1])?.max_dim(0, false)?.0)
    }

    /// `torch.min(self)`.
    pub fn min(&self) -> Result<Tensor> {
        if self.numel() == 0 {
            return Err(invalid(
                "min",
                "operation does not have an identity: the input is empty",
            ));
        }
        Ok(self.reshape(&[-1])?.min_dim(0, false)?.0)
    }

    /// `torch.argmax(self, dim, keepdim)`; `dim = None` indexes the flattened tensor.
    /// Bool input is refused, as in PyTorch.
    pub fn argmax(&self, dim: Option<i64>, keepdim: bool) -> Result<Tensor> {
        self.arg_extreme("argmax", dim, keepdim, Pick::Max)
    }

    /// `torch.argmin(self, dim, keepdim)`.
    pub fn argmin(&self, dim: Option<i64>, keepdim: bool) -> Result<Tensor> {
        self.arg_extreme("argmin", dim, keepdim, Pick::Min)
    }

    fn arg_extreme(
        &self,
        op: &'static str,
        dim: Option<i64>,
        keepdim: bool,
        pick: Pick,
    ) -> Result<Tensor> {
        if self.dtype() == DType::Bool {
            return Err(Error::UnsupportedDType {
                op,
                dtype: DType::Bool,
            });
        }
        match dim {
            Some(d) => Ok(select_dim(op, self, d, keepdim, pick)?.1),
            None => {
                if self.numel() == 0 {
                    return Err(Error::IndexOutOfRange {
                        op,
                        index: 0,
                        size: 0,
                    });
                }
                let r = select_dim(op, &self.reshape(&[-1])?, 0, false, pick)?.1;
                if keepdim {
                    r.reshape(&vec![1; self.dim()])
                } else {
                    Ok(r)
                }
            }
        }
    }

    /// Applies `f` to every 1-D lane along `dim` (lane values in, same-length values out).
    fn along_dim(
        &self,
        op: &'static str,
        dim: i64,
        compute: DType,
        out: DType,
        f: &dyn Fn(&[f64], &mut Vec<f64>),
    ) -> Result<Tensor> {
        let n = self.dim();
        let d = wrap_dim(op, dim, n)?;
        if self.device() == Device::Meta {
            return Tensor::meta(self.shape(), out);
        }
        if n == 0 {
            let mut r = Vec::new();
            f(&self.to_dtype(compute)?.to_vec::<f64>()?, &mut r);
            return Tensor::from_f64s(&r, &[], out);
        }
        let mut order: Vec<i64> = (0..n as i64).filter(|&i| i != d as i64).collect();
        order.push(d as i64);
        let permuted = self.permute(&order)?;
        let v = permuted.to_dtype(compute)?.to_vec::<f64>()?;
        let lane = self.shape()[d];
        let mut r = Vec::with_capacity(v.len());
        if lane > 0 {
            for chunk in v.chunks(lane) {
                f(chunk, &mut r);
            }
        }
        let res = Tensor::from_f64s(&r, permuted.shape(), out)?;
        // Undo the permutation: position of original dim i in `order`.
        let mut inverse = vec![0i64; n];
        for (pos, &o) in order.iter().enumerate() {
            inverse[o as usize] = pos as i64;
        }
        res.permute(&inverse)?.contiguous()
    }

    /// `torch.cumsum(self, dim)`; integer and bool inputs give int64.
    pub fn cumsum(&self, dim: i64) -> Result<Tensor> {
        if self.dtype().is_float() {
            let d = self.dtype();
            self.along_dim("cumsum", dim, d, d, &|lane, out| {
                let mut acc = 0.0;
                for &x in lane {
                    acc += x;
                    out.push(acc);
                }
            })
        } else {
            // Exact int64 scan: do it in the integer domain lane by lane.
            let n = self.dim();
            let d = wrap_dim("cumsum", dim, n)?;
            if self.device() == Device::Meta {
                return Tensor::meta(self.shape(), DType::I64);
            }
            if n == 0 {
                return self.to_dtype(DType::I64)?.deep_clone();
            }
            let mut order: Vec<i64> = (0..n as i64).filter(|&i| i != d as i64).collect();
            order.push(d as i64);
            let permuted = self.permute(&order)?;
            let v = permuted.to_vec::<i64>()?;
            let lane = self.shape()[d];
            let mut r = Vec::with_capacity(v.len());
            if lane > 0 {
                for chunk in v.chunks(lane) {
                    let mut acc = 0i64;
                    for &x in chunk {
                        acc = acc.wrapping_add(x);
                        r.push(acc);
                    }
                }
            }
            let res = Tensor::from_i64s(&r, permuted.shape(), DType::I64)?;
            let mut inverse = vec![0i64; n];
            for (pos, &o) in order.iter().enumerate() {
                inverse[o as usize] = pos as i64;
            }
            res.permute(&inverse)?.contiguous()
        }
    }

    /// `torch.softmax(self, dim)`, numerically stable (max subtracted); float dtypes only.
    pub fn softmax(&self, dim: i64) -> Result<Tensor> {
        if !self.dtype().is_float() {
            return Err(Error::UnsupportedDType {
                op: "softmax",
                dtype: self.dtype(),
            });
        }
        let d = self.dtype();
        // f32 over the last dim: the kernels module's row softmax (threaded, vectorised).
        let last = self.dim() > 0 && wrap_dim("softmax", dim, self.dim())? == self.dim() - 1;
        if d == DType::F32 && last && self.numel() > 0 && self.device() == Device::Cpu {
            let mut v = self.to_vec::<f32>()?;
            crate::kernels::softmax_rows_f32(&mut v, self.shape()[self.dim() - 1]);
            return Tensor::from_vec(v, self.shape());
        }
        self.along_dim("softmax", dim, d, d, &|lane, out| {
            let m = lane.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let start = out.len();
            let mut s = 0.0;
            for &x in lane {
                let e = (x - m).exp();
                s += e;
                out.push(e);
            }
            for v in &mut out[start..] {
                *v /= s;
            }
        })
    }

    /// `torch.log_softmax(self, dim)`; float dtypes only.
    pub fn log_softmax(&self, dim: i64) -> Result<Tensor> {
        if !self.dtype().is_float() {
            return Err(Error::UnsupportedDType {
                op: "log_softmax",
                dtype: self.dtype(),
            });
        }
        let d = self.dtype();
        self.along_dim("log_softmax", dim, d, d, &|lane, out| {
            let m = lane.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let lse = m + lane.iter().map(|x| (x - m).exp()).sum::<f64>().ln();
            out.extend(lane.iter().map(|x| x - lse));
        })
    }
}

/// The default result dtype of `sum`/`prod`/`nansum`/`cumsum`: integers and bool give int64.
pub fn accumulate_dtype(d: DType) -> DType {
    if d.is_float() {
        d
    } else {
        DType::I64
    }
}

/// Checks upstream's `zero_numel_check_dims`: on an empty input every reduced dim must be
/// non-empty (IndexError), and an all-dims reduction of an empty input is refused.
fn check_nonempty_dims(op: &'static str, t: &Tensor, dims: &[i64]) -> Result<()> {
    if t.numel() != 0 {
        return Ok(());
    }
    if dims.is_empty() {
        return Err(invalid(
            op,
            "Expected reduction dim to be specified for input.numel() == 0. Specify the reduction dim with the 'dim' argument.",
        ));
    }
    for &d in dims {
        let w = wrap_dim(op, d, t.dim())?;
        if t.dim() > 0 && t.shape()[w] == 0 {
            return Err(empty_dim(op, d));
        }
    }
    Ok(())
}

/// A selection over one lane: which element a `max`/`median`/`kthvalue`/`mode` picks.
#[derive(Clone, Copy)]
enum Pick {
    Max,
    Min,
    /// Lower median; NaN propagates (the first NaN is picked).
    Median,
    /// Lower median of the non-NaN values (first NaN when all are NaN).
    NanMedian,
    /// The k-th smallest (0-based), NaN sorting last.
    Kth(usize),
    /// The most frequent value (smallest among ties), at its last position.
    Mode,
}

trait Lane: Copy + PartialOrd {
    fn nan(self) -> bool;
}
impl Lane for f64 {
    fn nan(self) -> bool {
        self.is_nan()
    }
}
impl Lane for i64 {
    fn nan(self) -> bool {
        false
    }
}

/// Total order with NaN last, then by position.
fn order_nan_last<T: Lane>(v: &[T], a: usize, b: usize) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    let (x, y) = (v[a], v[b]);
    let c = match (x.nan(), y.nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        _ => x.partial_cmp(&y).unwrap_or(Ordering::Equal),
    };
    c.then(a.cmp(&b))
}

fn same_value<T: Lane>(a: T, b: T) -> bool {
    (a.nan() && b.nan()) || a == b
}

fn pick_index<T: Lane>(v: &[T], pick: Pick) -> usize {
    match pick {
        Pick::Max | Pick::Min => {
            let mut best = 0;
            for (i, &x) in v.iter().enumerate() {
                let b = v[best];
                if b.nan() {
                    break;
                }
                let better = x.nan()
                    || if matches!(pick, Pick::Max) {
                        x > b
                    } else {
                        x < b
                    };
                if better {
                    best = i;
                }
            }
            best
        }
        Pick::Median => {
            if let Some(i) = v.iter().position(|x| x.nan()) {
                return i;
            }
            let mut idx: Vec<usize> = (0..v.len()).collect();
            idx.sort_by(|&a, &b| order_nan_last(v, a, b));
            idx[(v.len() - 1) / 2]
        }
        Pick::NanMedian => {
            let mut idx: Vec<usize> = (0..v.len()).filter(|&i| !v[i].nan()).collect();
            if idx.is_empty() {
                return 0;
            }
            idx.sort_by(|&a, &b| order_nan_last(v, a, b));
            idx[(idx.len() - 1) / 2]
        }
        Pick::Kth(k) => {
            let mut idx: Vec<usize> = (0..v.len()).collect();
            idx.sort_by(|&a, &b| order_nan_last(v, a, b));
            idx[k]
        }
        Pick::Mode => {
            let mut idx: Vec<usize> = (0..v.len()).collect();
            idx.sort_by(|&a, &b| order_nan_last(v, a, b));
            let (mut best, mut best_n) = (idx[0], 0usize);
            let mut i = 0;
            while i < idx.len() {
                let mut j = i;
                while j + 1 < idx.len() && same_value(v[idx[i]], v[idx[j + 1]]) {
                    j += 1;
                }
                if j + 1 - i > best_n {
                    best_n = j + 1 - i;
                    best = idx[j];
                }
                i = j + 1;
            }
            best
        }
    }
}

/// Values and positions of one selection per lane along `dim`.
fn select_dim(
    op: &'static str,
    t: &Tensor,
    dim: i64,
    keepdim: bool,
    pick: Pick,
) -> Result<(Tensor, Tensor)> {
    let p = plan(op, t, &[dim], keepdim)?;
    check_nonempty_dims(op, t, &[dim])?;
    if t.device() == Device::Meta {
        return Ok((
            Tensor::meta(&p.out_shape, t.dtype())?,
            Tensor::meta(&p.out_shape, DType::I64)?,
        ));
    }
    let n = p.group_len;
    if let Pick::Kth(k) = pick {
        if k >= n && p.groups > 0 {
            return Err(invalid(
                op,
                format!("selected number k out of range for dimension {dim}"),
            ));
        }
    }
    let mut idx = Vec::with_capacity(p.groups);
    if t.dtype().is_float() {
        let v = p.permuted.to_vec::<f64>()?;
        let mut vals = Vec::with_capacity(p.groups);
        for g in 0..p.groups {
            let lane = &v[g * n..(g + 1) * n];
            let i = pick_index(lane, pick);
            idx.push(i as i64);
            vals.push(lane[i]);
        }
        Ok((
            Tensor::from_f64s(&vals, &p.out_shape, t.dtype())?,
            Tensor::from_i64s(&idx, &p.out_shape, DType::I64)?,
        ))
    } else {
        let v = p.permuted.to_vec::<i64>()?;
        let mut vals = Vec::with_capacity(p.groups);
        for g in 0..p.groups {
            let lane = &v[g * n..(g + 1) * n];
            let i = pick_index(lane, pick);
            idx.push(i as i64);
            vals.push(lane[i]);
        }
        Ok((
            Tensor::from_i64s(&vals, &p.out_shape, t.dtype())?,
            Tensor::from_i64s(&idx, &p.out_shape, DType::I64)?,
        ))
    }
}

/// Reduces `t` cast to `out` (upstream casts the input to the requested dtype first): floats
/// accumulate in f64 and round once, integers and bool wrap in i64 and cast at the end.
fn reduce_as(
    op: &'static str,
    t: &Tensor,
    dims: &[i64],
    keepdim: bool,
    out: DType,
    ff: &dyn Fn(&[f64]) -> f64,
    fi: &dyn Fn(&[i64]) -> i64,
) -> Result<Tensor> {
    if t.dtype().is_complex() {
        // The cast below would drop the imaginary parts; ops::complex reduces complex values.
        return Err(Error::UnsupportedDType {
            op,
            dtype: t.dtype(),
        });
    }
    let x = if t.dtype() == out || t.device() == Device::Meta {
        t.clone()
    } else {
        t.to_dtype(out)?
    };
    if out.is_float() {
        reduce_f64(op, &x, dims, keepdim, out, out, ff)
    } else {
        reduce_i64(op, &x, dims, keepdim, out, fi)
    }
}

/// Compensated (Neumaier) sum of an iterator of f64.
pub(crate) fn neumaier(it: impl Iterator<Item = f64>) -> f64 {
    let (mut s, mut c) = (0.0f64, 0.0f64);
    for x in it {
        let t = s + x;
        if s.abs() >= x.abs() {
            c += (s - t) + x;
        } else {
            c += (x - t) + s;
        }
        s = t;
    }
    s + c
}

/// The f64 sum of float32 values, in 16 independent lanes (the loop vectorizes), then the
/// lanes summed with [`neumaier`]. Every f32 is exact in f64 and f64 carries 29 more bits than
/// the f32 result, so this is far inside upstream's own float32 error (its sums accumulate in
/// f32).
pub(crate) fn sum_f32_in_f64(v: &[f32]) -> f64 {
    const LANES: usize = 16;
    let mut s = [0.0f64; LANES];
    let chunks = v.chunks_exact(LANES);
    let rest = chunks.remainder();
    for chunk in chunks {
        for k in 0..LANES {
            s[k] += chunk[k] as f64;
        }
    }
    neumaier(s.iter().copied().chain(rest.iter().map(|&x| x as f64)))
}

/// Variance with compensated sums (as accurate as upstream's float64 Welford).
fn var_of(v: &[f64], correction: f64) -> f64 {
    let n = v.len() as f64;
    let m = neumaier(v.iter().copied()) / n;
    let d = neumaier(v.iter().map(|x| x - m));
    let ss = neumaier(v.iter().map(|x| (x - m) * (x - m))) - d * d / n;
    ss.max(0.0) / (n - correction).max(0.0)
}

/// A float dtype for `dtype=` arguments of float-only reductions.
fn float_dtype_arg(op: &'static str, t: &Tensor, dtype: Option<DType>) -> Result<DType> {
    match dtype {
        Some(d) if d.is_float() => Ok(d),
        Some(d) => Err(Error::UnsupportedDType { op, dtype: d }),
        None => {
            require_float(op, t)?;
            Ok(t.dtype())
        }
    }
}

/// Cumulative max/min along a lane (NaN propagates; ties move to the later position).
fn cum_extreme<T: Lane>(lane: &[T], max: bool, vals: &mut Vec<T>, idx: &mut Vec<i64>) {
    if lane.is_empty() {
        return;
    }
    let mut out = lane[0];
    let mut at = 0usize;
    for (i, &x) in lane.iter().enumerate() {
        let better = if max { x >= out } else { x <= out };
        if x.nan() || (!out.nan() && better) {
            out = x;
            at = i;
        }
        vals.push(out);
        idx.push(at as i64);
    }
}

impl Tensor {
    /// `torch.sum(self, dims, keepdim, dtype=)`: the input is cast to `dtype` (default: the
    /// input's float dtype, int64 for integers and bool) and summed in it.
    pub fn sum_dtype(&self, dims: &[i64], keepdim: bool, dtype: Option<DType>) -> Result<Tensor> {
        let out = dtype.unwrap_or_else(|| accumulate_dtype(self.dtype()));
        reduce_as(
            "sum",
            self,
            dims,
            keepdim,
            out,
            &|v| neumaier(v.iter().copied()),
            &|v| v.iter().fold(0i64, |a, &b| a.wrapping_add(b)),
        )
    }

    /// `torch.nansum`: sum treating NaN as zero.
    pub fn nansum_dtype(
        &self,
        dims: &[i64],
        keepdim: bool,
        dtype: Option<DType>,
    ) -> Result<Tensor> {
        let out = dtype.unwrap_or_else(|| accumulate_dtype(self.dtype()));
        reduce_as(
            "nansum",
            self,
            dims,
            keepdim,
            out,
            &|v| neumaier(v.iter().copied().filter(|x| !x.is_nan())),
            &|v| v.iter().fold(0i64, |a, &b| a.wrapping_add(b)),
        )
    }

    /// `torch.prod(self, dims, keepdim, dtype=)`.
    pub fn prod_dtype(&self, dims: &[i64], keepdim: bool, dtype: Option<DType>) -> Result<Tensor> {
        let out = dtype.unwrap_or_else(|| accumulate_dtype(self.dtype()));
        reduce_as(
            "prod",
            self,
            dims,
            keepdim,
            out,
            &|v| v.iter().product(),
            &|v| v.iter().fold(1i64, |a, &b| a.wrapping_mul(b)),
        )
    }

    /// `torch.mean(self, dims, keepdim, dtype=)`: float dtypes only (NotImplementedError).
    pub fn mean_dtype(&self, dims: &[i64], keepdim: bool, dtype: Option<DType>) -> Result<Tensor> {
        let out = float_dtype_arg("mean", self, dtype)?;
        if out == DType::F32 {
            if let Some(r) = self.mean_f32_in_order(dims, keepdim)? {
                return Ok(r);
            }
        }
        reduce_as("mean", self, dims, keepdim, out, &mean_of, &|_| 0)
    }

    /// float32 mean whose groups lie in order in memory (the usual last-dim mean, RMSNorm's),
    /// read in place with [`sum_f32_in_f64`]. `None` for other inputs.
    fn mean_f32_in_order(&self, dims: &[i64], keepdim: bool) -> Result<Option<Tensor>> {
        if self.dtype() != DType::F32 || self.device() != Device::Cpu {
            return Ok(None);
        }
        let p = plan("mean", self, dims, keepdim)?;
        if p.group_len == 0 || !p.permuted.is_contiguous() {
            return Ok(None);
        }
        let len = p.group_len;
        let means = p.permuted.with_data(|x: &[f32]| {
            x.chunks_exact(len)
                .map(|g| (sum_f32_in_f64(g) / len as f64) as f32)
                .collect::<Vec<f32>>()
        })?;
        Tensor::from_vec(means, &p.out_shape).map(Some)
    }

    /// `torch.nanmean`: mean of the non-NaN values (NaN when there are none).
    pub fn nanmean_dtype(
        &self,
        dims: &[i64],
        keepdim: bool,
        dtype: Option<DType>,
    ) -> Result<Tensor> {
        require_float("nanmean", self)?;
        let out = float_dtype_arg("nanmean", self, dtype)?;
        reduce_as(
            "nanmean",
            self,
            dims,
            keepdim,
            out,
            &|v| {
                let (s, n) = v
                    .iter()
                    .filter(|x| !x.is_nan())
                    .fold((0.0, 0usize), |(s, n), &x| (s + x, n + 1));
                s / n as f64
            },
            &|_| 0,
        )
    }

    /// `torch.var_mean` / `torch.std_mean`: (var or std, mean).
    pub fn var_mean(
        &self,
        dims: &[i64],
        options: VarOptions,
        std: bool,
    ) -> Result<(Tensor, Tensor)> {
        let v = if std {
            self.std(dims, options)?
        } else {
            self.var(dims, options)?
        };
        Ok((v, self.mean_dtype(dims, options.keepdim, None)?))
    }

    /// `torch.count_nonzero(self, dims)` (int64).
    pub fn count_nonzero(&self, dims: &[i64]) -> Result<Tensor> {
        let b = self.ne(false)?;
        reduce_i64("count_nonzero", &b, dims, false, DType::I64, &|v| {
            v.iter().filter(|&&x| x != 0).count() as i64
        })
    }

    /// `torch.median(self)`: lower median of all elements (NaN if any is NaN).
    pub fn median_all(&self, ignore_nan: bool) -> Result<Tensor> {
        let op = if ignore_nan { "nanmedian" } else { "median" };
        if self.dtype() == DType::Bool && self.numel() > 0 {
            return Err(Error::UnsupportedDType {
                op,
                dtype: DType::Bool,
            });
        }
        if self.numel() == 0 {
            return Tensor::from_f64s(&[f64::NAN], &[], self.dtype());
        }
        let flat = self.reshape(&[-1])?;
        let pick = if ignore_nan {
            Pick::NanMedian
        } else {
            Pick::Median
        };
        Ok(select_dim(op, &flat, 0, false, pick)?.0)
    }

    /// `torch.median(self, dim, keepdim)` / `torch.nanmedian` -> (values, indices).
    pub fn median_dim(
        &self,
        dim: i64,
        keepdim: bool,
        ignore_nan: bool,
    ) -> Result<(Tensor, Tensor)> {
        let op = if ignore_nan { "nanmedian" } else { "median" };
        if self.dtype() == DType::Bool && self.numel() > 0 {
            return Err(Error::UnsupportedDType {
                op,
                dtype: DType::Bool,
            });
        }
        let pick = if ignore_nan {
            Pick::NanMedian
        } else {
            Pick::Median
        };
        select_dim(op, self, dim, keepdim, pick)
    }

    /// `torch.kthvalue(self, k, dim, keepdim)` (k is 1-based).
    pub fn kthvalue(&self, k: i64, dim: i64, keepdim: bool) -> Result<(Tensor, Tensor)> {
        check_nonempty_dims("kthvalue", self, &[dim])?;
        if self.dtype() == DType::Bool {
            return Err(Error::UnsupportedDType {
                op: "kthvalue",
                dtype: DType::Bool,
            });
        }
        let d = wrap_dim("kthvalue", dim, self.dim())?;
        let size = if self.dim() == 0 { 1 } else { self.shape()[d] };
        if self.numel() > 0 && (k < 1 || k as usize > size) {
            return Err(invalid(
                "kthvalue",
                format!("selected number k out of range for dimension {dim}"),
            ));
        }
        select_dim(
            "kthvalue",
            self,
            dim,
            keepdim,
            Pick::Kth((k.max(1) - 1) as usize),
        )
    }

    /// `torch.mode(self, dim, keepdim)`.
    pub fn mode(&self, dim: i64, keepdim: bool) -> Result<(Tensor, Tensor)> {
        select_dim("mode", self, dim, keepdim, Pick::Mode)
    }

    /// `torch.aminmax(self, dim=, keepdim=)` -> (min, max).
    pub fn aminmax(&self, dim: Option<i64>, keepdim: bool) -> Result<(Tensor, Tensor)> {
        match dim {
            Some(d) => {
                check_nonempty_dims("aminmax", self, &[d])?;
                Ok((
                    select_dim("aminmax", self, d, keepdim, Pick::Min)?.0,
                    select_dim("aminmax", self, d, keepdim, Pick::Max)?.0,
                ))
            }
            None => {
                if self.numel() == 0 {
                    return Err(invalid(
                        "aminmax",
                        "cannot compute aminmax over an empty dimension as the operation has no identity.",
                    ));
                }
                let flat = self.reshape(&[-1])?;
                let shape = if keepdim { vec![1; self.dim()] } else { vec![] };
                let lo = select_dim("aminmax", &flat, 0, false, Pick::Min)?.0;
                let hi = select_dim("aminmax", &flat, 0, false, Pick::Max)?.0;
                Ok((lo.reshape(&shape)?, hi.reshape(&shape)?))
            }
        }
    }

    /// Lanes along `dim` as f64 or i64, with the result built back in the original layout.
    fn scan<F, I>(&self, op: &'static str, dim: i64, out: DType, ff: F, fi: I) -> Result<Tensor>
    where
        F: Fn(&[f64], &mut Vec<f64>),
        I: Fn(&[i64], &mut Vec<i64>),
    {
        let x = if self.dtype() == out || self.device() == Device::Meta {
            self.clone()
        } else {
            self.to_dtype(out)?
        };
        let n = x.dim();
        let d = wrap_dim(op, dim, n)?;
        if x.device() == Device::Meta {
            return Tensor::meta(x.shape(), out);
        }
        if n == 0 {
            return if out.is_float() {
                let mut r = Vec::new();
                ff(&x.to_vec::<f64>()?, &mut r);
                Tensor::from_f64s(&r, &[], out)
            } else {
                let mut r = Vec::new();
                fi(&x.to_vec::<i64>()?, &mut r);
                Tensor::from_i64s(&r, &[], out)
            };
        }
        if x.numel() == 0 {
            return Tensor::empty_on(x.shape(), out, Device::Cpu);
        }
        let mut order: Vec<i64> = (0..n as i64).filter(|&i| i != d as i64).collect();
        order.push(d as i64);
        let permuted = x.permute(&order)?;
        let lane = x.shape()[d];
        let res = if out.is_float() {
            let v = permuted.to_vec::<f64>()?;
            let mut r = Vec::with_capacity(v.len());
            if lane > 0 {
                for chunk in v.chunks(lane) {
                    ff(chunk, &mut r);
                }
            }
            Tensor::from_f64s(&r, permuted.shape(), out)?
        } else {
            let v = permuted.to_vec::<i64>()?;
            let mut r = Vec::with_capacity(v.len());
            if lane > 0 {
                for chunk in v.chunks(lane) {
                    fi(chunk, &mut r);
                }
            }
            Tensor::from_i64s(&r, permuted.shape(), out)?
        };
        let mut inverse = vec![0i64; n];
        for (pos, &o) in order.iter().enumerate() {
            inverse[o as usize] = pos as i64;
        }
        res.permute(&inverse)?.contiguous()
    }

    /// `torch.cumsum(self, dim, dtype=)`.
    pub fn cumsum_dtype(&self, dim: i64, dtype: Option<DType>) -> Result<Tensor> {
        let out = dtype.unwrap_or_else(|| accumulate_dtype(self.dtype()));
        if out == DType::Bool {
            return Err(Error::UnsupportedDType {
                op: "cumsum",
                dtype: out,
            });
        }
        self.scan(
            "cumsum",
            dim,
            out,
            |l, r| {
                let mut acc = 0.0;
                for &x in l {
                    acc += x;
                    r.push(acc);
                }
            },
            |l, r| {
                let mut acc = 0i64;
                for &x in l {
                    acc = acc.wrapping_add(x);
                    r.push(acc);
                }
            },
        )
    }

    /// `torch.cumprod(self, dim, dtype=)`.
    pub fn cumprod_dtype(&self, dim: i64, dtype: Option<DType>) -> Result<Tensor> {
        let out = dtype.unwrap_or_else(|| accumulate_dtype(self.dtype()));
        if out == DType::Bool {
            return Err(Error::UnsupportedDType {
                op: "cumprod",
                dtype: out,
            });
        }
        self.scan(
            "cumprod",
            dim,
            out,
            |l, r| {
                let mut acc = 1.0;
                for &x in l {
                    acc *= x;
                    r.push(acc);
                }
            },
            |l, r| {
                let mut acc = 1i64;
                for &x in l {
                    acc = acc.wrapping_mul(x);
                    r.push(acc);
                }
            },
        )
    }

    /// `torch.logcumsumexp(self, dim)` (float dtypes only).
    pub fn logcumsumexp(&self, dim: i64) -> Result<Tensor> {
        require_float("logcumsumexp", self)?;
        self.scan(
            "logcumsumexp",
            dim,
            self.dtype(),
            |l, r| {
                let mut acc = f64::NEG_INFINITY;
                for &x in l {
                    let (hi, lo) = if acc >= x { (acc, x) } else { (x, acc) };
                    acc = if x.is_nan() || acc.is_nan() {
                        f64::NAN
                    } else if hi == f64::NEG_INFINITY || (hi.is_infinite() && hi == lo) {
                        hi
                    } else {
                        hi + (lo - hi).exp().ln_1p()
                    };
                    r.push(acc);
                }
            },
            |_, _| {},
        )
    }

    /// `torch.cummax` / `torch.cummin` -> (values, indices).
    pub fn cum_extreme(&self, dim: i64, max: bool) -> Result<(Tensor, Tensor)> {
        let op = if max { "cummax" } else { "cummin" };
        let idx = std::cell::RefCell::new(Vec::new());
        let values = self.scan(
            op,
            dim,
            self.dtype(),
            |l, r| cum_extreme(l, max, r, &mut idx.borrow_mut()),
            |l, r| cum_extreme(l, max, r, &mut idx.borrow_mut()),
        )?;
        if self.device() == Device::Meta {
            return Ok((values, Tensor::meta(self.shape(), DType::I64)?));
        }
        if self.numel() == 0 {
            return Ok((
                values,
                Tensor::empty_on(self.shape(), DType::I64, Device::Cpu)?,
            ));
        }
        // Same lane order as the values: build in the permuted layout, then undo.
        let n = self.dim();
        if n == 0 {
            return Ok((
                values,
                Tensor::from_i64s(&idx.into_inner(), &[], DType::I64)?,
            ));
        }
        let d = wrap_dim(op, dim, n)?;
        let mut order: Vec<i64> = (0..n as i64).filter(|&i| i != d as i64).collect();
        order.push(d as i64);
        let pshape: Vec<usize> = order.iter().map(|&o| self.shape()[o as usize]).collect();
        let it = Tensor::from_i64s(&idx.into_inner(), &pshape, DType::I64)?;
        let mut inverse = vec![0i64; n];
        for (pos, &o) in order.iter().enumerate() {
            inverse[o as usize] = pos as i64;
        }
        Ok((values, it.permute(&inverse)?.contiguous()?))
    }

    /// `torch.linalg.vector_norm(self, ord, dims, keepdim, dtype=)`: float inputs only.
    pub fn vector_norm(
        &self,
        ord: f64,
        dims: &[i64],
        keepdim: bool,
        dtype: Option<DType>,
    ) -> Result<Tensor> {
        let op = "linalg.vector_norm";
        require_float(op, self)?;
        let out = float_dtype_arg(op, self, dtype)?;
        if ord < 0.0 || ord.is_infinite() {
            // min/max of |x| have no identity
            check_nonempty_dims(op, self, dims)?;
        }
        reduce_as(
            op,
            self,
            dims,
            keepdim,
            out,
            &move |v| {
                if ord == 0.0 {
                    v.iter().filter(|&&x| x != 0.0).count() as f64
                } else if ord == f64::INFINITY {
                    v.iter().map(|x| x.abs()).fold(f64::NEG_INFINITY, |a, b| {
                        if a.is_nan() || b.is_nan() {
                            f64::NAN
                        } else {
                            a.max(b)
                        }
                    })
                } else if ord == f64::NEG_INFINITY {
                    v.iter().map(|x| x.abs()).fold(f64::INFINITY, |a, b| {
                        if a.is_nan() || b.is_nan() {
                            f64::NAN
                        } else {
                            a.min(b)
                        }
                    })
                } else if ord == 1.0 {
                    v.iter().map(|x| x.abs()).sum()
                } else if ord == 2.0 {
                    v.iter().map(|x| x * x).sum::<f64>().sqrt()
                } else {
                    v.iter()
                        .map(|x| x.abs().powf(ord))
                        .sum::<f64>()
                        .powf(1.0 / ord)
                }
            },
            &|_| 0,
        )
    }
}
