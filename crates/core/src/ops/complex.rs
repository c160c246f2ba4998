//! Complex-valued ops: the views between complex and real tensors (`real`, `imag`,
//! `view_as_real`, `view_as_complex`) and the kernels that compute on complex values.
//!
//! Values are read as [`Cf64`] (complex64 widened exactly), computed with c10's / glibc's
//! formulas ([`crate::complex`]) and rounded once into the result's dtype. The real-valued
//! op families refuse complex operands by name (`map_n`, reductions, `to_vec` as reals), so a
//! complex tensor reaches only the kernels here or ops that move elements without reading them
//! as numbers.

use crate::complex::Cf64;
use crate::dtype::DType;
use crate::error::{invalid, Result};
use crate::layout::Layout;
use crate::ops::reduce::{neumaier, plan_any};
use crate::tensor::{broadcast_all_shapes, result_type_of, Tensor};
use crate::Device;

fn require_complex(op: &'static str, t: &Tensor) -> Result<()> {
    if t.dtype().is_complex() {
        Ok(())
    } else {
        Err(invalid(
            op,
            format!("expected a complex tensor, got {}", t.dtype().name()),
        ))
    }
}

/// The elements of `t` broadcast to `shape`, as complex values.
fn values(t: &Tensor, shape: &[usize]) -> Result<Vec<Cf64>> {
    t.broadcast_to(shape)?.to_vec::<Cf64>()
}

fn is_meta(ts: &[&Tensor]) -> bool {
    ts.iter().any(|t| t.device() == Device::Meta)
}

/// A complex -> complex elementwise function; the result keeps `x`'s dtype.
pub fn unary(op: &'static str, x: &Tensor, f: impl Fn(Cf64) -> Cf64) -> Result<Tensor> {
    require_complex(op, x)?;
    if is_meta(&[x]) {
        return Tensor::meta(x.shape(), x.dtype());
    }
    let out: Vec<Cf64> = x.to_vec::<Cf64>()?.into_iter().map(f).collect();
    Tensor::from_complex(&out, x.shape(), x.dtype())
}

/// A complex -> real elementwise function (`abs`, `angle`); the result has the dtype of
/// `x`'s parts.
pub fn to_real(op: &'static str, x: &Tensor, f: impl Fn(Cf64) -> f64) -> Result<Tensor> {
    require_complex(op, x)?;
    let dtype = x.dtype().to_real();
    if is_meta(&[x]) {
        return Tensor::meta(x.shape(), dtype);
    }
    let out: Vec<f64> = x.to_vec::<Cf64>()?.into_iter().map(f).collect();
    Tensor::from_f64s(&out, x.shape(), dtype)
}

/// A complex -> bool elementwise predicate (`isreal`, `isnan`, ...).
pub fn predicate(op: &'static str, x: &Tensor, f: impl Fn(Cf64) -> bool) -> Result<Tensor> {
    require_complex(op, x)?;
    if is_meta(&[x]) {
        return Tensor::meta(x.shape(), DType::Bool);
    }
    let out: Vec<i64> = x
        .to_vec::<Cf64>()?
        .into_iter()
        .map(|v| f(v) as i64)
        .collect();
    Tensor::from_i64s(&out, x.shape(), DType::Bool)
}

/// A binary elementwise op with broadcasting and type promotion, at least one operand complex
/// (a real operand is widened with imaginary part 0).
pub fn binary(
    op: &'static str,
    a: &Tensor,
    b: &Tensor,
    f: impl Fn(Cf64, Cf64) -> Cf64,
) -> Result<Tensor> {
    let dtype = result_type_of(&[a, b])?;
    if !dtype.is_complex() {
        return Err(invalid(op, "expected a complex operand"));
    }
    let shape = broadcast_all_shapes(op, &[a, b])?;
    if is_meta(&[a, b]) {
        return Tensor::meta(&shape, dtype);
    }
    let (x, y) = (values(a, &shape)?, values(b, &shape)?);
    let out: Vec<Cf64> = x.into_iter().zip(y).map(|(p, q)| f(p, q)).collect();
    Tensor::from_complex(&out, &shape, dtype)
}

/// A binary comparison (`eq`, `ne`) with broadcasting; the result is bool.
pub fn compare(
    op: &'static str,
    a: &Tensor,
    b: &Tensor,
    f: impl Fn(Cf64, Cf64) -> bool,
) -> Result<Tensor> {
    result_type_of(&[a, b])?;
    let shape = broadcast_all_shapes(op, &[a, b])?;
    if is_meta(&[a, b]) {
        return Tensor::meta(&shape, DType::Bool);
    }
    let (x, y) = (values(a, &shape)?, values(b, &shape)?);
    let out: Vec<i64> = x.into_iter().zip(y).map(|(p, q)| f(p, q) as i64).collect();
    Tensor::from_i64s(&out, &shape, DType::Bool)
}

/// `torch.where(condition, input, other)` with a complex result dtype.
pub(crate) fn select(
    condition: &Tensor,
    input: &Tensor,
    other: &Tensor,
    dtype: DType,
) -> Result<Tensor> {
    let op = "where";
    let shape = broadcast_all_shapes(op, &[condition, input, other])?;
    if is_meta(&[condition, input, other]) {
        return Tensor::meta(&shape, dtype);
    }
    let c = condition.broadcast_to(&shape)?.to_vec::<bool>()?;
    let (x, y) = (values(input, &shape)?, values(other, &shape)?);
    let out: Vec<Cf64> = c
        .into_iter()
        .zip(x.into_iter().zip(y))
        .map(|(c, (x, y))| if c { x } else { y })
        .collect();
    Tensor::from_complex(&out, &shape, dtype)
}

/// A complex tensor from two real float tensors of one dtype, element by element (`polar`,
/// `complex`), with upstream's dtype errors.
fn from_two_reals(
    op: &'static str,
    a: &Tensor,
    b: &Tensor,
    f: impl Fn(f64, f64) -> Cf64,
) -> Result<Tensor> {
    if a.dtype() != b.dtype() {
        return Err(invalid(
            op,
            format!(
                "Expected object of scalar type {} but got scalar type {} for second argument",
                a.dtype().name(),
                b.dtype().name()
            ),
        ));
    }
    let dtype = match a.dtype() {
        DType::F32 => DType::C64,
        DType::F64 => DType::C128,
        other => {
            return Err(invalid(
                op,
                format!(
                    "Expected both inputs to be Float or Double tensors but got {}",
                    other.name()
                ),
            ))
        }
    };
    let shape = broadcast_all_shapes(op, &[a, b])?;
    if is_meta(&[a, b]) {
        return Tensor::meta(&shape, dtype);
    }
    let x = a.broadcast_to(&shape)?.to_vec::<f64>()?;
    let y = b.broadcast_to(&shape)?.to_vec::<f64>()?;
    let out: Vec<Cf64> = x.into_iter().zip(y).map(|(x, y)| f(x, y)).collect();
    Tensor::from_complex(&out, &shape, dtype)
}

/// `torch.polar(abs, angle)`: `abs * (cos angle + i sin angle)`.
pub fn polar(abs: &Tensor, angle: &Tensor) -> Result<Tensor> {
    from_two_reals("polar", abs, angle, |r, t| {
        Cf64::new(r * t.cos(), r * t.sin())
    })
}

/// `torch.complex(real, imag)`.
pub fn from_parts(real: &Tensor, imag: &Tensor) -> Result<Tensor> {
    from_two_reals("complex", real, imag, Cf64::new)
}

/// How a complex reduction combines its group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reduction {
    Sum,
    Mean,
    Prod,
}

/// `sum` / `mean` / `prod` of a complex tensor over `dims` (empty: all), optionally cast to a
/// complex `dtype` first. Sums are compensated in f64 per part.
pub fn reduce(
    x: &Tensor,
    how: Reduction,
    dims: &[i64],
    keepdim: bool,
    dtype: Option<DType>,
) -> Result<Tensor> {
    let op = match how {
        Reduction::Sum => "sum",
        Reduction::Mean => "mean",
        Reduction::Prod => "prod",
    };
    let dtype = dtype.unwrap_or(x.dtype());
    if !dtype.is_complex() {
        return Err(invalid(
            op,
            format!(
                "a complex input cannot be reduced into {} (it would drop the imaginary parts)",
                dtype.name()
            ),
        ));
    }
    let plan = plan_any(op, x, dims, keepdim)?;
    if x.device() == Device::Meta {
        return Tensor::meta(&plan.out_shape, dtype);
    }
    let data = plan.permuted.to_vec::<Cf64>()?;
    let n = plan.group_len;
    let mut out = Vec::with_capacity(plan.groups);
    for g in 0..plan.groups {
        let lane = &data[g * n..(g + 1) * n];
        out.push(match how {
            Reduction::Prod => lane.iter().fold(Cf64::new(1.0, 0.0), |acc, &v| acc * v),
            Reduction::Sum | Reduction::Mean => {
                let s = Cf64::new(
                    neumaier(lane.iter().map(|v| v.re)),
                    neumaier(lane.iter().map(|v| v.im)),
                );
                if how == Reduction::Mean {
                    Cf64::new(s.re / n as f64, s.im / n as f64)
                } else {
                    s
                }
            }
        });
    }
    Tensor::from_complex(&out, &plan.out_shape, dtype)
}

/// `cumsum` / `cumprod` of a complex tensor along `dim`.
pub fn cumulative(x: &Tensor, dim: i64, prod: bool, dtype: Option<DType>) -> Result<Tensor> {
    let op = if prod { "cumprod" } else { "cumsum" };
    let dtype = dtype.unwrap_or(x.dtype());
    if !dtype.is_complex() {
        return Err(invalid(
            op,
            format!("a complex input cannot accumulate into {}", dtype.name()),
        ));
    }
    if x.dim() == 0 {
        return x.to_dtype(dtype)?.deep_clone();
    }
    let d = crate::layout::wrap_dim(op, dim, x.dim())?;
    if x.device() == Device::Meta {
        return Tensor::meta(x.shape(), dtype);
    }
    // Move `dim` last, accumulate each lane, move it back.
    let last = x.dim() as i64 - 1;
    let moved = x.transpose(d as i64, last)?.contiguous()?;
    let data = moved.to_vec::<Cf64>()?;
    let n = x.shape()[d];
    let mut out = Vec::with_capacity(data.len());
    for lane in data.chunks(n.max(1)) {
        let mut acc = if prod {
            Cf64::new(1.0, 0.0)
        } else {
            Cf64::default()
        };
        for &v in lane {
            acc = if prod { acc * v } else { acc + v };
            out.push(acc);
        }
    }
    Tensor::from_complex(&out, moved.shape(), dtype)?
        .transpose(d as i64, last)?
        .contiguous()
}

/// `torch.linalg.vector_norm` of a complex tensor: the norm of the magnitudes, real-valued.
pub fn vector_norm(x: &Tensor, ord: f64, dims: &[i64], keepdim: bool) -> Result<Tensor> {
    let op = "linalg.vector_norm";
    let plan = plan_any(op, x, dims, keepdim)?;
    let dtype = x.dtype().to_real();
    if x.device() == Device::Meta {
        return Tensor::meta(&plan.out_shape, dtype);
    }
    let data = plan.permuted.to_vec::<Cf64>()?;
    let n = plan.group_len;
    let mut out = Vec::with_capacity(plan.groups);
    for g in 0..plan.groups {
        let mags = data[g * n..(g + 1) * n].iter().map(|v| v.abs());
        out.push(if ord == 2.0 {
            neumaier(mags.map(|m| m * m)).sqrt()
        } else if ord == f64::INFINITY {
            mags.fold(0.0, f64::max)
        } else if ord == f64::NEG_INFINITY {
            mags.fold(f64::INFINITY, f64::min)
        } else if ord == 0.0 {
            mags.filter(|&m| m != 0.0).count() as f64
        } else if ord == 1.0 {
            neumaier(mags)
        } else {
            neumaier(mags.map(|m| m.powf(ord))).powf(1.0 / ord)
        });
    }
    Tensor::from_f64s(&out, &plan.out_shape, dtype)
}

/// `torch.matmul` with a complex operand: 1-D and 2-D operands and batched 3-D+ operands
/// with broadcast batch dims, as upstream's matmul composes them.
pub fn matmul(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let op = "matmul";
    let dtype = result_type_of(&[a, b])?;
    if a.dtype() != b.dtype() {
        return Err(invalid(
            op,
            format!(
                "expected m1 and m2 to have the same dtype, but got: {} != {}",
                a.dtype().name(),
                b.dtype().name()
            ),
        ));
    }
    if a.dim() == 0 || b.dim() == 0 {
        return Err(invalid(
            op,
            "both arguments to matmul need to be at least 1D".to_string(),
        ));
    }
    // Promote 1-D operands to matrices, remembering which dims to drop afterwards.
    let a2 = if a.dim() == 1 {
        a.unsqueeze(0)?
    } else {
        a.clone()
    };
    let b2 = if b.dim() == 1 {
        b.unsqueeze(1)?
    } else {
        b.clone()
    };
    let (n, k) = (a2.shape()[a2.dim() - 2], a2.shape()[a2.dim() - 1]);
    let (k2, m) = (b2.shape()[b2.dim() - 2], b2.shape()[b2.dim() - 1]);
    if k != k2 {
        return Err(invalid(
            op,
            format!("mat1 and mat2 shapes cannot be multiplied ({n}x{k} and {k2}x{m})"),
        ));
    }
    let batch = crate::layout::broadcast_shapes(
        op,
        &a2.shape()[..a2.dim() - 2],
        &b2.shape()[..b2.dim() - 2],
    )?;
    let mut a_shape = batch.clone();
    a_shape.extend([n, k]);
    let mut b_shape = batch.clone();
    b_shape.extend([k, m]);
    let mut out_shape = batch.clone();
    out_shape.extend([n, m]);
    let mut final_shape = batch.clone();
    if a.dim() > 1 {
        final_shape.push(n);
    }
    if b.dim() > 1 {
        final_shape.push(m);
    }
    if is_meta(&[a, b]) {
        return Tensor::meta(&final_shape, dtype);
    }
    let x = values(&a2, &a_shape)?;
    let y = values(&b2, &b_shape)?;
    let batches: usize = batch.iter().product();
    let mut out = vec![Cf64::default(); batches * n * m];
    for bi in 0..batches {
        let (xa, yb) = (&x[bi * n * k..], &y[bi * k * m..]);
        for i in 0..n {
            for j in 0..m {
                let mut acc = Cf64::default();
                for p in 0..k {
                    acc = acc + xa[i * k + p] * yb[p * m + j];
                }
                out[bi * n * m + i * m + j] = acc;
            }
        }
    }
    let shape: Vec<i64> = final_shape.iter().map(|&d| d as i64).collect();
    Tensor::from_complex(&out, &out_shape, dtype)?.reshape(&shape)
}

/// `torch.vdot(a, b)`: `sum(conj(a) * b)` over two 1-D tensors of one dtype.
pub fn vdot(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    crate::ops::linalg::check_vector_pair("vdot", a, b)?;
    if is_meta(&[a, b]) {
        return Tensor::meta(&[], a.dtype());
    }
    let (x, y) = (a.to_vec::<Cf64>()?, b.to_vec::<Cf64>()?);
    let mut acc = Cf64::default();
    for (p, q) in x.into_iter().zip(y) {
        acc = acc + p.conj() * q;
    }
    Tensor::from_complex(&[acc], &[], a.dtype())
}

impl Tensor {
    /// `torch.view_as_real`: the complex tensor's storage read as its float parts, with a new
    /// last dimension of size 2 (real, imag). A view.
    pub fn view_as_real(&self) -> Result<Tensor> {
        let op = "view_as_real";
        if !self.dtype().is_complex() {
            return Err(invalid(
                op,
                "view_as_real is only supported for complex tensors",
            ));
        }
        let l = self.layout();
        let mut sizes = l.sizes.clone();
        sizes.push(2);
        let mut strides: Vec<usize> = l.strides.iter().map(|s| s * 2).collect();
        strides.push(1);
        Ok(self.part_view(
            Layout {
                sizes,
                strides,
                offset: l.offset * 2,
            },
            self.dtype().to_real(),
        ))
    }

    /// `torch.view_as_complex`: a float tensor whose last dimension is (real, imag) read as
    /// complex. A view.
    pub fn view_as_complex(&self) -> Result<Tensor> {
        let op = "view_as_complex";
        let dtype = match self.dtype() {
            DType::F32 => DType::C64,
            DType::F64 => DType::C128,
            other => {
                return Err(invalid(
                    op,
                    format!(
                        "view_as_complex is only supported for float and double tensors, but \
                         got a tensor of scalar type: {}",
                        crate::ops::pointwise::c10_name(other)
                    ),
                ))
            }
        };
        let l = self.layout();
        let n = l.sizes.len();
        if n == 0 || l.sizes[n - 1] != 2 {
            return Err(invalid(op, "Tensor must have a last dimension of size 2"));
        }
        if l.strides[n - 1] != 1 {
            return Err(invalid(
                op,
                "Tensor must have a last dimension with stride 1",
            ));
        }
        if l.strides[..n - 1].iter().any(|s| !s.is_multiple_of(2)) {
            return Err(invalid(
                op,
                "Tensor must have a stride divisible by 2 for all but last dimension",
            ));
        }
        if !l.offset.is_multiple_of(2) {
            return Err(invalid(
                op,
                "Tensor must have a storage_offset divisible by 2",
            ));
        }
        Ok(self.part_view(
            Layout {
                sizes: l.sizes[..n - 1].to_vec(),
                strides: l.strides[..n - 1].iter().map(|s| s / 2).collect(),
                offset: l.offset / 2,
            },
            dtype,
        ))
    }

    /// `Tensor.real` of a complex tensor (a view of the real parts).
    pub fn real_part(&self) -> Result<Tensor> {
        self.view_as_real()?.select(-1, 0)
    }

    /// `Tensor.imag` of a complex tensor (a view of the imaginary parts).
    pub fn imag_part(&self) -> Result<Tensor> {
        if !self.dtype().is_complex() {
            return Err(invalid(
                "imag",
                "imag is not implemented for tensors with non-complex dtypes.",
            ));
        }
        self.view_as_real()?.select(-1, 1)
    }
}
