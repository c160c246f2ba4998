//! Reductions, scans and softmax. Each one permutes the reduced dims to the end (a view),
//! reads the tensor once in row-major order through the strided iterator, and then works on
//! contiguous groups: one group of `group_len` values per output element.

use crate::dtype::{DType, DEFAULT_FLOAT};
use crate::error::{invalid, Error, Result};
use crate::layout::wrap_dim;
use crate::tensor::Tensor;
use crate::Device;

/// A tensor rearranged so that each output element's inputs are contiguous.
struct Plan {
    /// The input with kept dims first and reduced dims last (a view).
    permuted: Tensor,
    /// Shape of the result (with or without kept size-1 dims).
    out_shape: Vec<usize>,
    /// Number of output elements.
    groups: usize,
    /// Number of inputs per output element.
    group_len: usize,
}

/// Resolves the reduced dims (`dims` empty means all dims, like PyTorch's `dim=()`).
fn plan(op: &'static str, t: &Tensor, dims: &[i64], keepdim: bool) -> Result<Plan> {
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
        return Err(invalid(
            op,
            format!(
                "could not infer output dtype; input dtype must be a floating point dtype, got {}",
                t.dtype().name()
            ),
        ));
    }
    Ok(())
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

/// Mean of a slice computed in f64.
fn mean_of(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
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
        if self.dtype().is_float() {
            let d = self.dtype();
            reduce_f64("sum", self, dims, keepdim, d, d, &|v| v.iter().sum())
        } else {
            reduce_i64("sum", self, dims, keepdim, DType::I64, &|v| {
                v.iter().fold(0i64, |a, &b| a.wrapping_add(b))
            })
        }
    }

    /// `torch.prod(self, dims, keepdim)`; integers and bool give int64.
    pub fn prod(&self, dims: &[i64], keepdim: bool) -> Result<Tensor> {
        if self.dtype().is_float() {
            let d = self.dtype();
            reduce_f64("prod", self, dims, keepdim, d, d, &|v| v.iter().product())
        } else {
            reduce_i64("prod", self, dims, keepdim, DType::I64, &|v| {
                v.iter().fold(1i64, |a, &b| a.wrapping_mul(b))
            })
        }
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
        let p = plan(op, self, dims, keepdim)?;
        if p.group_len == 0 && (p.groups > 0 || self.dim() == 0) {
            return Err(invalid(
                op,
                "expected a non-empty reduction (the reduced dims have size 0)",
            ));
        }
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
        reduce_f64("mean", self, dims, keepdim, d, d, &mean_of)
    }

    /// `torch.var(self, dims, correction, keepdim)` (float dtypes only).
    pub fn var(&self, dims: &[i64], options: VarOptions) -> Result<Tensor> {
        require_float("var", self)?;
        let d = self.dtype();
        let c = options.correction;
        reduce_f64("var", self, dims, options.keepdim, d, d, &|v| {
            let m = mean_of(v);
            let ss: f64 = v.iter().map(|x| (x - m) * (x - m)).sum();
            ss / (v.len() as f64 - c).max(0.0)
        })
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
        let p = plan(op, self, &[dim], keepdim)?;
        if p.group_len == 0 && p.groups > 0 || self.numel() == 0 && self.dim() == 0 {
            return Err(invalid(
                op,
                format!("expected reduction dim {dim} to have non-zero size"),
            ));
        }
        if self.device() == Device::Meta {
            return Ok((
                Tensor::meta(&p.out_shape, self.dtype())?,
                Tensor::meta(&p.out_shape, DType::I64)?,
            ));
        }
        let idx: Vec<i64> = if self.dtype().is_float() {
            let v = p.permuted.to_vec::<f64>()?;
            (0..p.groups)
                .map(|g| extreme_index(&v[g * p.group_len..(g + 1) * p.group_len], which) as i64)
                .collect()
        } else {
            let v = p.permuted.to_vec::<i64>()?;
            (0..p.groups)
                .map(|g| {
                    extreme_index_i64(&v[g * p.group_len..(g + 1) * p.group_len], which) as i64
                })
                .collect()
        };
        let indices = Tensor::from_i64s(&idx, &p.out_shape, DType::I64)?;
        // Gather the values through the indices so every dtype keeps its exact value.
        let flat_pos: Vec<i64> = idx
            .iter()
            .enumerate()
            .map(|(g, &i)| (g * p.group_len) as i64 + i)
            .collect();
        let all = p.permuted.reshape(&[-1])?;
        let pos = Tensor::from_i64s(&flat_pos, &[flat_pos.len()], DType::I64)?;
        let values = all
            .index_select(0, &pos)?
            .reshape(&p.out_shape.iter().map(|&s| s as i64).collect::<Vec<_>>())?;
        Ok((values, indices))
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
        if self.dtype() == DType::Bool {
            return Err(Error::UnsupportedDType {
                op: "argmax",
                dtype: DType::Bool,
            });
        }
        match dim {
            Some(d) => Ok(self.max_dim(d, keepdim)?.1),
            None => {
                let r = self.reshape(&[-1])?.max_dim(0, false)?.1;
                if keepdim {
                    r.reshape(&vec![1; self.dim()])
                } else {
                    Ok(r)
                }
            }
        }
    }

    /// `torch.argmin(self, dim, keepdim)`.
    pub fn argmin(&self, dim: Option<i64>, keepdim: bool) -> Result<Tensor> {
        if self.dtype() == DType::Bool {
            return Err(Error::UnsupportedDType {
                op: "argmin",
                dtype: DType::Bool,
            });
        }
        match dim {
            Some(d) => Ok(self.min_dim(d, keepdim)?.1),
            None => {
                let r = self.reshape(&[-1])?.min_dim(0, false)?.1;
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
