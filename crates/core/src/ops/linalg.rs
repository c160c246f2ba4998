//! Matrix products. Every product reduces to a batched `[B,M,K] x [B,K,N]` core: f32 runs on
//! the kernels module's gemm, f64 through the `gemm` crate, f16/bf16 compute in f32 and round once, integers are exact
//! (wrapping int64 accumulation).

use crate::dtype::{DType, Scalar};
use crate::error::{invalid, Error, Result};
use crate::layout::broadcast_shapes;
use crate::tensor::{common_device, Tensor};
use crate::Device;

fn same_dtype(op: &'static str, a: &Tensor, b: &Tensor) -> Result<DType> {
    // PyTorch only rejects bool when there is arithmetic to do; empty products succeed.
    let no_work = a.numel() == 0 || b.numel() == 0;
    if a.dtype() != b.dtype() {
        return Err(invalid(
            op,
            format!(
                "expected both operands to have the same dtype, but got {} != {}",
                a.dtype().name(),
                b.dtype().name()
            ),
        ));
    }
    if a.dtype() == DType::Bool && !no_work {
        return Err(Error::UnsupportedDType {
            op,
            dtype: DType::Bool,
        });
    }
    Ok(a.dtype())
}

/// Row-major single matrix product `out[m,n] = sum_k a[m,k] b[k,n]` through the kernels
/// module's strided f32 gemm (threaded).
fn gemm_f32(a: &[f32], b: &[f32], m: usize, k: usize, n: usize) -> Vec<f32> {
    let mut out = vec![0f32; m * n];
    if m == 0 || n == 0 || k == 0 {
        return out;
    }
    crate::kernels::matmul_f32(m, k, n, a, k, 1, b, n, 1, &mut out, n, 0.0);
    out
}

/// Row-major f64 product with the `gemm` crate.
fn gemm_f64(a: &[f64], b: &[f64], m: usize, k: usize, n: usize) -> Vec<f64> {
    let mut out = vec![0f64; m * n];
    if m == 0 || n == 0 || k == 0 {
        return out;
    }
    // SAFETY: the slices hold exactly m*k, k*n and m*n elements and the strides describe
    // row-major matrices of those shapes, so every access is in bounds.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            out.as_mut_ptr(),
            1,
            n as isize,
            false,
            a.as_ptr(),
            1,
            k as isize,
            b.as_ptr(),
            1,
            n as isize,
            0.0,
            1.0,
            false,
            false,
            false,
            gemm::Parallelism::None,
        );
    }
    out
}

/// Batched product of contiguous-readable `[B,M,K]` and `[B,K,N]` tensors of one dtype.
fn bmm_core(op: &'static str, a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let dtype = same_dtype(op, a, b)?;
    let (bs, m, k) = (a.shape()[0], a.shape()[1], a.shape()[2]);
    let n = b.shape()[2];
    let out_shape = [bs, m, n];
    if common_device(op, &[a, b])? == Device::Meta {
        return Tensor::meta(&out_shape, dtype);
    }
    match dtype {
        DType::F64 => {
            let (av, bv) = (a.to_vec::<f64>()?, b.to_vec::<f64>()?);
            let mut out = Vec::with_capacity(bs * m * n);
            for i in 0..bs {
                out.extend(gemm_f64(
                    &av[i * m * k..(i + 1) * m * k],
                    &bv[i * k * n..(i + 1) * k * n],
                    m,
                    k,
                    n,
                ));
            }
            Tensor::from_vec(out, &out_shape)
        }
        d if d.is_float() => {
            let (av, bv) = (a.to_vec::<f32>()?, b.to_vec::<f32>()?);
            let mut out = Vec::with_capacity(bs * m * n);
            for i in 0..bs {
                out.extend(gemm_f32(
                    &av[i * m * k..(i + 1) * m * k],
                    &bv[i * k * n..(i + 1) * k * n],
                    m,
                    k,
                    n,
                ));
            }
            Tensor::from_vec(out, &out_shape)?.to_dtype(d)
        }
        d => {
            let (av, bv) = (a.to_vec::<i64>()?, b.to_vec::<i64>()?);
            let mut out = vec![0i64; bs * m * n];
            for i in 0..bs {
                for r in 0..m {
                    for kk in 0..k {
                        let x = av[(i * m + r) * k + kk];
                        for c in 0..n {
                            let o = &mut out[(i * m + r) * n + c];
                            *o = o.wrapping_add(x.wrapping_mul(bv[(i * k + kk) * n + c]));
                        }
                    }
                }
            }
            Tensor::from_i64s(&out, &out_shape, d)
        }
    }
}

fn mat_mismatch(op: &'static str, a: &Tensor, b: &Tensor) -> Error {
    Error::ShapeMismatch {
        op,
        lhs: a.shape().to_vec(),
        rhs: b.shape().to_vec(),
        reason: "shapes cannot be multiplied".into(),
    }
}

impl Tensor {
    /// `torch.mm`: `[M,K] x [K,N]`.
    pub fn mm(&self, other: &Tensor) -> Result<Tensor> {
        if self.dim() != 2 || other.dim() != 2 {
            return Err(invalid(
                "mm",
                format!(
                    "expects 2-D tensors, got {}-D and {}-D",
                    self.dim(),
                    other.dim()
                ),
            ));
        }
        if self.shape()[1] != other.shape()[0] {
            return Err(mat_mismatch("mm", self, other));
        }
        let r = bmm_core("mm", &self.unsqueeze(0)?, &other.unsqueeze(0)?)?;
        r.squeeze_dims(&[0])
    }

    /// `torch.bmm`: `[B,M,K] x [B,K,N]`.
    pub fn bmm(&self, other: &Tensor) -> Result<Tensor> {
        if self.dim() != 3 || other.dim() != 3 {
            return Err(invalid(
                "bmm",
                format!(
                    "expects 3-D tensors, got {}-D and {}-D",
                    self.dim(),
                    other.dim()
                ),
            ));
        }
        if self.shape()[0] != other.shape()[0] || self.shape()[2] != other.shape()[1] {
            return Err(mat_mismatch("bmm", self, other));
        }
        bmm_core("bmm", self, other)
    }

    /// `torch.matmul` with PyTorch's rules: 1-D·1-D is a dot product (0-dim), a 1-D left
    /// operand gets a leading 1 (removed after), a 1-D right operand a trailing 1, and batch
    /// dims broadcast.
    pub fn matmul(&self, other: &Tensor) -> Result<Tensor> {
        let op = "matmul";
        let (da, db) = (self.dim(), other.dim());
        if da == 0 || db == 0 {
            return Err(invalid(op, "both arguments need at least 1 dimension"));
        }
        let a = if da == 1 {
            self.unsqueeze(0)?
        } else {
            self.clone()
        };
        let b = if db == 1 {
            other.unsqueeze(1)?
        } else {
            other.clone()
        };
        let (m, k) = (a.shape()[a.dim() - 2], a.shape()[a.dim() - 1]);
        let (k2, n) = (b.shape()[b.dim() - 2], b.shape()[b.dim() - 1]);
        if k != k2 {
            return Err(mat_mismatch(op, self, other));
        }
        let batch = broadcast_shapes(op, &a.shape()[..a.dim() - 2], &b.shape()[..b.dim() - 2])?;
        let bsz: usize = batch.iter().product();
        let mut ea: Vec<i64> = batch.iter().map(|&x| x as i64).collect();
        let mut eb = ea.clone();
        ea.extend([m as i64, k as i64]);
        eb.extend([k as i64, n as i64]);
        let a3 = a.expand(&ea)?.reshape(&[bsz as i64, m as i64, k as i64])?;
        let b3 = b.expand(&eb)?.reshape(&[bsz as i64, k as i64, n as i64])?;
        let r = bmm_core(op, &a3, &b3)?;
        let mut shape: Vec<i64> = batch.iter().map(|&x| x as i64).collect();
        if da > 1 {
            shape.push(m as i64);
        }
        if db > 1 {
            shape.push(n as i64);
        }
        r.reshape(&shape)
    }
}

/// `torch.nn.functional.linear`: `input @ weight.T + bias`.
pub fn linear(input: &Tensor, weight: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
    let y = input.matmul(&weight.t()?)?;
    match bias {
        Some(b) => y.add(b),
        None => Ok(y),
    }
}

/// Scale factors of `addmm`/`baddbmm`: `beta * input + alpha * (a @ b)`.
#[derive(Debug, Clone, Copy)]
pub struct AddmmScale {
    /// Factor on `input` (0 ignores it, NaN included).
    pub beta: Scalar,
    /// Factor on the product.
    pub alpha: Scalar,
}

impl Default for AddmmScale {
    fn default() -> Self {
        AddmmScale {
            beta: Scalar::Int(1),
            alpha: Scalar::Int(1),
        }
    }
}

fn scaled_sum(input: &Tensor, product: &Tensor, scale: AddmmScale) -> Result<Tensor> {
    let p = if scale.alpha == Scalar::Int(1) {
        product.clone()
    } else {
        product.mul(scale.alpha)?
    };
    // beta = 0 ignores input entirely (NaN/inf in it do not propagate), as PyTorch documents.
    if scale.beta.to_f64() == 0.0 {
        input.broadcast_to(p.shape())?;
        return Ok(p);
    }
    let i = if scale.beta == Scalar::Int(1) {
        input.clone()
    } else {
        input.mul(scale.beta)?
    };
    let r = i.add(&p)?;
    if r.shape() != p.shape() {
        return Err(Error::ShapeMismatch {
            op: "addmm",
            lhs: input.shape().to_vec(),
            rhs: p.shape().to_vec(),
            reason: "input does not broadcast to the product".into(),
        });
    }
    Ok(r)
}

/// `torch.addmm(input, mat1, mat2, beta, alpha)`.
pub fn addmm(input: &Tensor, mat1: &Tensor, mat2: &Tensor, scale: AddmmScale) -> Result<Tensor> {
    scaled_sum(input, &mat1.mm(mat2)?, scale)
}

/// `torch.baddbmm(input, batch1, batch2, beta, alpha)`.
pub fn baddbmm(
    input: &Tensor,
    batch1: &Tensor,
    batch2: &Tensor,
    scale: AddmmScale,
) -> Result<Tensor> {
    scaled_sum(input, &batch1.bmm(batch2)?, scale)
}

/// `torch.linalg.matrix_norm(x, ord, dims, keepdim, dtype=)` for `ord` in `fro`, `1`, `-1`,
/// `inf`, `-inf` (the orders that need no decomposition; `2`, `-2` and `nuc` are refused).
pub fn matrix_norm(
    x: &Tensor,
    ord: &str,
    dims: &[i64],
    keepdim: bool,
    dtype: Option<DType>,
) -> Result<Tensor> {
    let op = "linalg.matrix_norm";
    if !x.dtype().is_float() {
        return Err(Error::UnsupportedDType {
            op,
            dtype: x.dtype(),
        });
    }
    if x.dim() < 2 {
        return Err(invalid(
            op,
            format!(
                "The input tensor A must have at least 2 dimensions, got {}",
                x.dim()
            ),
        ));
    }
    if dims.len() != 2 {
        return Err(invalid(op, format!("dim must be a 2-tuple. Got {dims:?}")));
    }
    let n = x.dim();
    let d0 = crate::layout::wrap_dim(op, dims[0], n)?;
    let d1 = crate::layout::wrap_dim(op, dims[1], n)?;
    if d0 == d1 {
        return Err(invalid(
            op,
            format!("dims must be different. Got ({}, {})", dims[0], dims[1]),
        ));
    }
    let x = match dtype {
        Some(d) => x.to_dtype(d)?,
        None => x.clone(),
    };
    let (sum_dim, ext_dim, max) = match ord {
        "fro" => {
            return x.vector_norm(2.0, &[d0 as i64, d1 as i64], keepdim, None);
        }
        "1" => (d0, d1, true),
        "-1" => (d0, d1, false),
        "inf" => (d1, d0, true),
        "-inf" => (d1, d0, false),
        _ => {
            return Err(Error::UnsupportedDType {
                op: "linalg.matrix_norm (ord 2, -2 and nuc need an SVD)",
                dtype: x.dtype(),
            })
        }
    };
    let s = x.abs()?.sum_dtype(&[sum_dim as i64], true, None)?;
    let r = if max {
        s.amax(&[ext_dim as i64], true)?
    } else {
        s.amin(&[ext_dim as i64], true)?
    };
    if keepdim {
        Ok(r)
    } else {
        let mut ds = [d0 as i64, d1 as i64];
        ds.sort_unstable();
        r.squeeze_dims(&ds)
    }
}
