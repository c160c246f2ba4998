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

/// Row-major f64 product: small products use compensated dot products (error-free
/// products and sums, so results are as accurate as upstream's BLAS on long inner
/// dimensions); large ones the `gemm` crate.
fn gemm_f64(a: &[f64], b: &[f64], m: usize, k: usize, n: usize) -> Vec<f64> {
    let mut out = vec![0f64; m * n];
    if m == 0 || n == 0 || k == 0 {
        return out;
    }
    if m.saturating_mul(n).saturating_mul(k) <= 1 << 22 {
        for i in 0..m {
            for j in 0..n {
                let (mut s, mut c) = (0.0f64, 0.0f64);
                for kk in 0..k {
                    let x = a[i * k + kk];
                    let y = b[kk * n + j];
                    let p = x * y;
                    let pe = x.mul_add(y, -p);
                    let t = s + p;
                    let z = t - s;
                    c += (s - (t - z)) + (p - z) + pe;
                    s = t;
                }
                out[i * n + j] = s + c;
            }
        }
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
        DType::F32 => bmm_f32_strided(a, b, bs, m, k, n),
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

/// f32 batched product read straight from the operands' storages through their strides
/// (transposed, expanded and sliced views included), so no operand is copied first.
fn bmm_f32_strided(
    a: &Tensor,
    b: &Tensor,
    bs: usize,
    m: usize,
    k: usize,
    n: usize,
) -> Result<Tensor> {
    let op = "matmul";
    let mut out = vec![0f32; bs * m * n];
    if m == 0 || n == 0 || k == 0 || bs == 0 {
        return Tensor::from_vec(out, &[bs, m, n]);
    }
    let (sa, sb) = (
        a.storage_ref()
            .ok_or_else(|| invalid(op, "operand has no storage"))?,
        b.storage_ref()
            .ok_or_else(|| invalid(op, "operand has no storage"))?,
    );
    // One lock when both operands share a storage (a second read lock could queue behind a
    // writer).
    let ga = sa.read();
    let gb = if sa.same(sb) { None } else { Some(sb.read()) };
    let unreadable = || Error::UnsupportedDType {
        op,
        dtype: DType::F32,
    };
    let da = <f32 as crate::Element>::slice(&ga).ok_or_else(unreadable)?;
    let db = match &gb {
        Some(g) => <f32 as crate::Element>::slice(g).ok_or_else(unreadable)?,
        None => da,
    };
    let (ast, bst) = (a.strides(), b.strides());
    for (i, c) in out.chunks_mut(m * n).enumerate() {
        let ao = a.storage_offset() + i * ast[0];
        let bo = b.storage_offset() + i * bst[0];
        crate::kernels::matmul_f32(
            m,
            k,
            n,
            &da[ao..],
            ast[1],
            ast[2],
            &db[bo..],
            bst[1],
            bst[2],
            c,
            n,
            0.0,
        );
    }
    drop(gb);
    drop(ga);
    Tensor::from_vec(out, &[bs, m, n])
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
        if da >= 3 && db <= 2 {
            // upstream's fold: the batch dimensions of the left operand become rows of one
            // GEMM (one pass over the right operand instead of one per batch element)
            let count: usize = a.shape()[..da - 1].iter().product();
            let rows = a.reshape(&[count as i64, k as i64])?;
            let r = bmm_core(op, &rows.unsqueeze(0)?, &b.unsqueeze(0)?)?;
            let mut shape: Vec<i64> = a.shape()[..da - 1].iter().map(|&x| x as i64).collect();
            if db > 1 {
                shape.push(n as i64);
            }
            return r.reshape(&shape);
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
    if let Some(y) = linear_f32_in_place(input, weight, bias)? {
        return Ok(y);
    }
    let y = input.matmul(&weight.t()?)?;
    match bias {
        Some(b) => y.add(b),
        None => Ok(y),
    }
}

/// f32 `linear` on the CPU with a contiguous `[n, k]` weight: the Linear kernel reads the
/// weight where it lies (a decode step is one pass over it) and adds the bias to the f32
/// product, as upstream's `addmm` does, instead of the general matmul materializing the
/// weight's transpose. `None` when the operands do not have that form (the general path
/// handles them and their errors).
fn linear_f32_in_place(
    input: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
) -> Result<Option<Tensor>> {
    let plain = |t: &Tensor| t.dtype() == DType::F32 && t.device() == Device::Cpu;
    if !plain(input) || !plain(weight) || weight.dim() != 2 || input.dim() == 0 {
        return Ok(None);
    }
    let (n, k) = (weight.shape()[0], weight.shape()[1]);
    if !weight.is_contiguous()
        || input.shape()[input.dim() - 1] != k
        || input.numel() == 0
        || n == 0
        || k == 0
    {
        return Ok(None);
    }
    let bias = match bias {
        None => None,
        Some(b) if plain(b) && b.dim() == 1 && b.shape()[0] == n => Some(b.to_vec::<f32>()?),
        Some(_) => return Ok(None),
    };
    let m = input.numel() / k;
    let mut out = vec![0f32; m * n];
    let run = |x: &[f32], out: &mut [f32]| {
        weight
            .with_data(|w: &[f32]| crate::kernels::linear_f32(x, w, bias.as_deref(), out, m, k, n))
    };
    if input.is_contiguous() && !input.shares_storage(weight) {
        // Read in place: two read locks on distinct storages.
        input.with_data(|x: &[f32]| run(x, &mut out))??;
    } else {
        // A strided input, or one sharing the weight's storage (a second read lock on one
        // RwLock could wait behind a queued writer): copied.
        run(&input.to_vec::<f32>()?, &mut out)?;
    }
    let mut shape = input.shape().to_vec();
    *shape.last_mut().expect("input has at least one dim") = n;
    Tensor::from_vec(out, &shape).map(Some)
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
    if x.numel() == 0 && ord != "fro" {
        if matches!(ord, "-1" | "-2" | "-inf") {
            return Err(invalid(
                op,
                "amin(): Expected reduction dim -1 to have non-zero size.",
            ));
        }
        let shape: Vec<usize> = (0..n)
            .filter_map(|d| {
                if d == d0 || d == d1 {
                    keepdim.then_some(1)
                } else {
                    Some(x.shape()[d])
                }
            })
            .collect();
        return crate::ops::creation::zeros(&shape, x.dtype());
    }
    let (sum_dim, ext_dim, max) = match ord {
        "fro" => {
            return x.vector_norm(2.0, &[d0 as i64, d1 as i64], keepdim, None);
        }
        "1" => (d0, d1, true),
        "-1" => (d0, d1, false),
        "inf" => (d1, d0, true),
        "-inf" => (d1, d0, false),
        "2" | "-2" | "nuc" => {
            let mut order: Vec<i64> = (0..n)
                .filter(|&d| d != d0 && d != d1)
                .map(|d| d as i64)
                .collect();
            order.extend([d0 as i64, d1 as i64]);
            let sv = svdvals(&x.permute(&order)?)?;
            let last = sv.dim() as i64 - 1;
            let r = match ord {
                "2" => sv.amax(&[last], false)?,
                "-2" => sv.amin(&[last], false)?,
                _ => sv.sum_dtype(&[last], false, None)?,
            };
            if !keepdim {
                return Ok(r);
            }
            // Upstream: the reduced dims kept at the end, then permuted back into place.
            let r = r.unsqueeze(-1)?.unsqueeze(-1)?;
            let mut inverse = vec![0i64; n];
            for (pos, &d) in order.iter().enumerate() {
                inverse[d as usize] = pos as i64;
            }
            return r.permute(&inverse);
        }
        _ => return Err(invalid(op, format!("Order {ord} not supported."))),
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

// ----- products built on bmm: einsum, tensordot, kron, outer, dot, mv, cross, cdist -----

/// `[B..., M, K]`-style contraction of two labelled operands through one `bmm`.
/// `keep` holds the labels still needed after this step (output or later operands).
fn contract_pair(
    a: &Tensor,
    la: &[char],
    b: &Tensor,
    lb: &[char],
    keep: &[char],
) -> Result<(Tensor, Vec<char>)> {
    let op = "einsum";
    let size_of =
        |t: &Tensor, l: &[char], c: char| t.shape()[l.iter().position(|&x| x == c).unwrap_or(0)];
    let mut batch = Vec::new();
    let mut contracted = Vec::new();
    let mut a_only = Vec::new();
    let mut b_only = Vec::new();
    for &c in la {
        if lb.contains(&c) {
            if keep.contains(&c) {
                batch.push(c);
            } else {
                contracted.push(c);
            }
        } else {
            a_only.push(c);
        }
    }
    for &c in lb {
        if !la.contains(&c) {
            b_only.push(c);
        }
    }
    // Broadcast shared labels (size 1 against n).
    let mut shared_size = std::collections::HashMap::new();
    for &c in batch.iter().chain(&contracted) {
        let (sa, sb) = (size_of(a, la, c), size_of(b, lb, c));
        if sa != sb && sa != 1 && sb != 1 {
            return Err(invalid(
                op,
                format!(
                    "operands do not broadcast with remapped shapes (subscript {c}: {sa} vs {sb})"
                ),
            ));
        }
        shared_size.insert(c, sa.max(sb));
    }
    let perm = |l: &[char], order: &[&[char]]| -> Vec<i64> {
        order
            .iter()
            .flat_map(|g| g.iter())
            .map(|c| l.iter().position(|x| x == c).unwrap_or(0) as i64)
            .collect()
    };
    let pa = a.permute(&perm(la, &[&batch, &a_only, &contracted]))?;
    let pb = b.permute(&perm(lb, &[&batch, &contracted, &b_only]))?;
    let ea: Vec<i64> = batch
        .iter()
        .map(|c| shared_size[c] as i64)
        .chain(a_only.iter().map(|&c| size_of(a, la, c) as i64))
        .chain(contracted.iter().map(|c| shared_size[c] as i64))
        .collect();
    let eb: Vec<i64> = batch
        .iter()
        .chain(&contracted)
        .map(|c| shared_size[c] as i64)
        .chain(b_only.iter().map(|&c| size_of(b, lb, c) as i64))
        .collect();
    let pa = pa.expand(&ea)?;
    let pb = pb.expand(&eb)?;
    let bs: usize = batch.iter().map(|c| shared_size[c]).product();
    let m: usize = a_only.iter().map(|&c| size_of(a, la, c)).product();
    let k: usize = contracted.iter().map(|c| shared_size[c]).product();
    let n: usize = b_only.iter().map(|&c| size_of(b, lb, c)).product();
    let r = if contracted.is_empty() {
        pa.reshape(&[bs as i64, m as i64, 1])?
            .mul(&pb.reshape(&[bs as i64, 1, n as i64])?)?
    } else {
        let a3 = pa.reshape(&[bs as i64, m as i64, k as i64])?;
        let b3 = pb.reshape(&[bs as i64, k as i64, n as i64])?;
        a3.bmm(&b3)?
    };
    let shape: Vec<i64> = ea[..batch.len() + a_only.len()]
        .iter()
        .copied()
        .chain(eb[batch.len() + contracted.len()..].iter().copied())
        .collect();
    let labels: Vec<char> = batch
        .iter()
        .chain(&a_only)
        .chain(&b_only)
        .copied()
        .collect();
    Ok((r.reshape(&shape)?, labels))
}

/// Takes diagonals for repeated labels of one operand and sums labels used nowhere else.
fn einsum_prepare(t: &Tensor, labels: &[char], needed: &[char]) -> Result<(Tensor, Vec<char>)> {
    let mut t = t.clone();
    let mut l: Vec<char> = labels.to_vec();
    // Repeated labels: diagonal (a view), moved to the end.
    loop {
        let mut found = None;
        'outer: for i in 0..l.len() {
            for j in i + 1..l.len() {
                if l[i] == l[j] {
                    found = Some((i, j));
                    break 'outer;
                }
            }
        }
        let Some((i, j)) = found else { break };
        if t.shape()[i] != t.shape()[j] {
            return Err(invalid(
                "einsum",
                format!(
                    "subscript {} is repeated for operand but the sizes don't match, {} != {}",
                    l[i],
                    t.shape()[i],
                    t.shape()[j]
                ),
            ));
        }
        let c = l[i];
        t = t.diagonal(0, i as i64, j as i64)?;
        l.remove(j);
        l.remove(i);
        l.push(c);
    }
    let sum_dims: Vec<i64> = (0..l.len())
        .filter(|&i| !needed.contains(&l[i]))
        .map(|i| i as i64)
        .collect();
    if !sum_dims.is_empty() {
        t = t.sum_dtype(&sum_dims, false, None)?;
        l.retain(|c| needed.contains(c));
    }
    Ok((t, l))
}

/// `torch.einsum(equation, operands)`: diagonals for repeated subscripts, sums for subscripts
/// used once, and one `bmm` per further operand, left to right.
pub fn einsum(equation: &str, operands: &[&Tensor]) -> Result<Tensor> {
    let op = "einsum";
    if operands.is_empty() {
        return Err(invalid(op, "must provide at least one operand"));
    }
    let eq: String = equation.chars().filter(|c| !c.is_whitespace()).collect();
    let (lhs, rhs) = match eq.split_once("->") {
        Some((l, r)) => (l.to_string(), Some(r.to_string())),
        None => (eq.clone(), None),
    };
    let terms: Vec<&str> = lhs.split(',').collect();
    if terms.len() != operands.len() {
        return Err(invalid(
            op,
            "more operands were provided than specified in the equation",
        ));
    }
    // Ellipsis dims get labels from a private range, right-aligned across operands.
    let ell_labels: Vec<char> = (0..16)
        .map(|i| char::from_u32(0x2460 + i).unwrap_or('?'))
        .collect();
    let mut max_ell = 0usize;
    let mut parsed: Vec<Vec<char>> = Vec::new();
    for (term, t) in terms.iter().zip(operands) {
        let named = term.replace("...", "").chars().count();
        for ch in term.replace("...", "").chars() {
            if !ch.is_ascii_alphabetic() {
                return Err(invalid(
                    op,
                    format!("invalid subscript given at index {term}: {ch}"),
                ));
            }
        }
        let has_ell = term.contains("...");
        if (!has_ell && named != t.dim()) || (has_ell && named > t.dim()) {
            return Err(invalid(
                op,
                format!(
                    "the number of subscripts in the equation ({named}) does not match the number of dimensions ({}) for operand and no ellipsis was given",
                    t.dim()
                ),
            ));
        }
        let ne = if has_ell { t.dim() - named } else { 0 };
        max_ell = max_ell.max(ne);
        let mut l = Vec::new();
        if let Some((pre, post)) = term.split_once("...") {
            l.extend(pre.chars());
            l.extend((0..ne).map(|i| ell_labels[16 - ne + i]));
            l.extend(post.chars());
        } else {
            l.extend(term.chars());
        }
        parsed.push(l);
    }
    let ell: Vec<char> = (0..max_ell).map(|i| ell_labels[16 - max_ell + i]).collect();
    let out: Vec<char> = match &rhs {
        Some(r) => {
            let mut o = Vec::new();
            if let Some((pre, post)) = r.split_once("...") {
                o.extend(pre.chars());
                o.extend(&ell);
                o.extend(post.chars());
            } else {
                o.extend(r.chars());
            }
            for &c in &o {
                if !ell.contains(&c) && !parsed.iter().any(|l| l.contains(&c)) {
                    return Err(invalid(
                        op,
                        format!("output subscript {c} does not appear in the equation for any input operand"),
                    ));
                }
            }
            o
        }
        None => {
            let mut counts = std::collections::BTreeMap::new();
            for l in &parsed {
                for &c in l {
                    if !ell.contains(&c) {
                        *counts.entry(c).or_insert(0) += 1;
                    }
                }
            }
            let mut o = ell.clone();
            o.extend(counts.into_iter().filter(|&(_, n)| n == 1).map(|(c, _)| c));
            o
        }
    };
    // Left to right.
    let needed_after = |from: usize, parsed: &[Vec<char>]| -> Vec<char> {
        let mut v = out.clone();
        for l in &parsed[from..] {
            v.extend(l.iter().copied());
        }
        v
    };
    let (mut acc, mut la) = einsum_prepare(operands[0], &parsed[0], &needed_after(1, &parsed))?;
    for i in 1..operands.len() {
        let keep = needed_after(i + 1, &parsed);
        let mut need_b = keep.clone();
        need_b.extend(la.iter().copied());
        let (b, lb) = einsum_prepare(operands[i], &parsed[i], &need_b)?;
        let mut need_a = keep.clone();
        need_a.extend(lb.iter().copied());
        let (a, l2) = einsum_prepare(&acc, &la, &need_a)?;
        let (r, lr) = contract_pair(&a, &l2, &b, &lb, &keep)?;
        acc = r;
        la = lr;
    }
    // Size-1 broadcast leftovers of ellipsis dims may differ; sum what the output drops.
    let (acc, la) = einsum_prepare(&acc, &la, &out)?;
    let perm: Vec<i64> = out
        .iter()
        .map(|c| la.iter().position(|x| x == c).map(|p| p as i64))
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| invalid(op, "internal: output subscript lost"))?;
    acc.permute(&perm)
}

/// `torch.tensordot(a, b, dims_a, dims_b)`.
pub fn tensordot(a: &Tensor, b: &Tensor, dims_a: &[i64], dims_b: &[i64]) -> Result<Tensor> {
    let op = "tensordot";
    if dims_a.len() != dims_b.len() {
        return Err(invalid(op, "both dimension lists should have same length"));
    }
    let da: Vec<usize> = dims_a
        .iter()
        .map(|&d| crate::layout::wrap_dim(op, d, a.dim()))
        .collect::<Result<_>>()?;
    let db: Vec<usize> = dims_b
        .iter()
        .map(|&d| crate::layout::wrap_dim(op, d, b.dim()))
        .collect::<Result<_>>()?;
    // A size-1 contracted dim broadcasts: the other side sums that dim first (upstream).
    let (mut a, mut b) = (a.clone(), b.clone());
    for (&x, &y) in da.iter().zip(&db) {
        if b.shape()[y] == 1 && a.shape()[x] != 1 {
            a = a.sum(&[x as i64], true)?;
        } else if a.shape()[x] == 1 && b.shape()[y] != 1 {
            b = b.sum(&[y as i64], true)?;
        }
    }
    let (a, b) = (&a, &b);
    for (&x, &y) in da.iter().zip(&db) {
        if a.shape()[x] != b.shape()[y] {
            return Err(invalid(
                op,
                format!(
                    "contracted dimensions need to match, but first has size {} in dim {x} and second has size {} in dim {y}",
                    a.shape()[x],
                    b.shape()[y]
                ),
            ));
        }
    }
    let fa: Vec<usize> = (0..a.dim()).filter(|d| !da.contains(d)).collect();
    let fb: Vec<usize> = (0..b.dim()).filter(|d| !db.contains(d)).collect();
    let pa: Vec<i64> = fa.iter().chain(&da).map(|&d| d as i64).collect();
    let pb: Vec<i64> = db.iter().chain(&fb).map(|&d| d as i64).collect();
    let m: usize = fa.iter().map(|&d| a.shape()[d]).product();
    let k: usize = da.iter().map(|&d| a.shape()[d]).product();
    let n: usize = fb.iter().map(|&d| b.shape()[d]).product();
    let a2 = a.permute(&pa)?.reshape(&[m as i64, k as i64])?;
    let b2 = b.permute(&pb)?.reshape(&[k as i64, n as i64])?;
    let shape: Vec<i64> = fa
        .iter()
        .map(|&d| a.shape()[d] as i64)
        .chain(fb.iter().map(|&d| b.shape()[d] as i64))
        .collect();
    a2.mm(&b2)?.reshape(&shape)
}

/// `torch.kron(a, b)`.
pub fn kron(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let n = a.dim().max(b.dim());
    let pad = |t: &Tensor| -> Vec<usize> {
        let mut s = vec![1; n - t.dim()];
        s.extend(t.shape());
        s
    };
    let (sa, sb) = (pad(a), pad(b));
    let mut ia = Vec::new();
    let mut ib = Vec::new();
    for i in 0..n {
        ia.extend([sa[i] as i64, 1]);
        ib.extend([1, sb[i] as i64]);
    }
    let r = a.reshape(&ia)?.mul(&b.reshape(&ib)?)?;
    let shape: Vec<i64> = (0..n).map(|i| (sa[i] * sb[i]) as i64).collect();
    r.reshape(&shape)
}

/// `torch.outer(a, b)` (both 1-D).
pub fn outer(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    if a.dim() != 1 || b.dim() != 1 {
        return Err(invalid(
            "outer",
            format!("expected 1D tensors, got {}D and {}D", a.dim(), b.dim()),
        ));
    }
    a.unsqueeze(1)?.mul(b)
}

/// The checks `dot` and `vdot` share: two 1-D tensors of one dtype and length (upstream's
/// messages, which say `dot` for both).
pub(crate) fn check_vector_pair(op: &'static str, a: &Tensor, b: &Tensor) -> Result<()> {
    if a.dim() != 1 || b.dim() != 1 {
        return Err(invalid(
            op,
            format!(
                "1D tensors expected, but got {}D and {}D tensors",
                a.dim(),
                b.dim()
            ),
        ));
    }
    if a.dtype() != b.dtype() {
        return Err(invalid(
            op,
            format!(
                "dot : expected both vectors to have same dtype, but found {} and {}",
                a.dtype().name(),
                b.dtype().name()
            ),
        ));
    }
    if a.numel() != b.numel() {
        return Err(invalid(
            op,
            format!(
                "inconsistent tensor size, expected tensor [{}] and src [{}] to have the same number of elements, but got {} and {} elements respectively",
                a.numel(),
                b.numel(),
                a.numel(),
                b.numel()
            ),
        ));
    }
    Ok(())
}

/// `torch.dot(a, b)`: 1-D tensors of one dtype and length.
pub fn dot(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let op = "dot";
    check_vector_pair(op, a, b)?;
    if a.dtype() == DType::Bool {
        return Err(Error::UnsupportedDType {
            op,
            dtype: DType::Bool,
        });
    }
    a.matmul(b)
}

/// The checks of `torch.mv(mat, vec)` (any dtype): a matrix and a vector that fit.
pub fn check_mv(mat: &Tensor, vec: &Tensor) -> Result<()> {
    if mat.dim() != 2 || vec.dim() != 1 {
        return Err(invalid(
            "mv",
            format!(
                "vector + matrix @ vector expected, got {}, {}, {}",
                1,
                mat.dim(),
                vec.dim()
            ),
        ));
    }
    if mat.shape()[1] != vec.shape()[0] {
        return Err(mat_mismatch("mv", mat, vec));
    }
    Ok(())
}

/// `torch.mv(mat, vec)`.
pub fn mv(mat: &Tensor, vec: &Tensor) -> Result<Tensor> {
    check_mv(mat, vec)?;
    mat.matmul(vec)
}

/// `beta * input + alpha * product` for the addmv/addr/addbmm family.
pub fn add_scaled(input: &Tensor, product: &Tensor, scale: AddmmScale) -> Result<Tensor> {
    scaled_sum(input, product, scale)
}

/// `torch.linalg.cross(a, b, dim)` (size 3 along `dim`, broadcasting the rest).
pub fn cross(a: &Tensor, b: &Tensor, dim: i64) -> Result<Tensor> {
    let op = "linalg.cross";
    if a.dim() != b.dim() {
        return Err(invalid(
            op,
            format!(
                "inputs must have the same number of dimensions, got {} and {}",
                a.dim(),
                b.dim()
            ),
        ));
    }
    if a.dtype() == DType::Bool || b.dtype() == DType::Bool {
        return Err(Error::UnsupportedDType {
            op,
            dtype: DType::Bool,
        });
    }
    let shape = broadcast_shapes(op, a.shape(), b.shape())?;
    let a = a.broadcast_to(&shape)?;
    let b = b.broadcast_to(&shape)?;
    let d = crate::layout::wrap_dim(op, dim, shape.len())?;
    if shape.is_empty() || shape[d] != 3 {
        return Err(invalid(
            op,
            format!("dimension {dim} does not have size 3 (shape {shape:?})"),
        ));
    }
    let c = |t: &Tensor, i: i64| t.narrow(d as i64, i, 1);
    let x = c(&a, 1)?
        .mul(&c(&b, 2)?)?
        .sub(&c(&a, 2)?.mul(&c(&b, 1)?)?)?;
    let y = c(&a, 2)?
        .mul(&c(&b, 0)?)?
        .sub(&c(&a, 0)?.mul(&c(&b, 2)?)?)?;
    let z = c(&a, 0)?
        .mul(&c(&b, 1)?)?
        .sub(&c(&a, 1)?.mul(&c(&b, 0)?)?)?;
    crate::ops::index::cat(&[&x, &y, &z], d as i64)
}

/// `torch.cdist(x1, x2, p)`: p-norm distances between the rows of `[..., P, M]` and
/// `[..., R, M]` (computed directly in f64).
pub fn cdist(x1: &Tensor, x2: &Tensor, p: f64) -> Result<Tensor> {
    let op = "cdist";
    if !x1.dtype().is_float() || !x2.dtype().is_float() {
        return Err(invalid(
            op,
            format!(
                "cdist only supports floating-point dtypes, X1 got: {}",
                x1.dtype().name()
            ),
        ));
    }
    if x1.dim() < 2 || x2.dim() < 2 {
        return Err(invalid(op, "cdist only supports at least 2D tensors"));
    }
    if matches!(x1.dtype(), DType::F16 | DType::BF16) {
        return Err(Error::UnsupportedDType {
            op,
            dtype: x1.dtype(),
        });
    }
    if x1.shape()[x1.dim() - 1] != x2.shape()[x2.dim() - 1] {
        return Err(invalid(
            op,
            "X1 and X2 must have the same number of columns",
        ));
    }
    if p < 0.0 {
        return Err(invalid(op, "cdist only supports non-negative p values"));
    }
    let dtype = crate::dtype::promote_types(x1.dtype(), x2.dtype());
    let (pn, m) = (x1.shape()[x1.dim() - 2], x1.shape()[x1.dim() - 1]);
    let rn = x2.shape()[x2.dim() - 2];
    let batch = broadcast_shapes(op, &x1.shape()[..x1.dim() - 2], &x2.shape()[..x2.dim() - 2])?;
    let bs: usize = batch.iter().product();
    let mut e1: Vec<usize> = batch.clone();
    e1.extend([pn, m]);
    let mut e2: Vec<usize> = batch.clone();
    e2.extend([rn, m]);
    let v1 = x1.broadcast_to(&e1)?.to_vec::<f64>()?;
    let v2 = x2.broadcast_to(&e2)?.to_vec::<f64>()?;
    let mut out = Vec::with_capacity(bs * pn * rn);
    for bi in 0..bs {
        for i in 0..pn {
            let r1 = &v1[(bi * pn + i) * m..(bi * pn + i + 1) * m];
            for j in 0..rn {
                let r2 = &v2[(bi * rn + j) * m..(bi * rn + j + 1) * m];
                let diffs = r1.iter().zip(r2).map(|(a, b)| (a - b).abs());
                let d = if p == 0.0 {
                    diffs.filter(|&x| x != 0.0).count() as f64
                } else if p == f64::INFINITY {
                    diffs.fold(0.0, f64::max)
                } else if p == 1.0 {
                    diffs.sum()
                } else if p == 2.0 {
                    diffs.map(|x| x * x).sum::<f64>().sqrt()
                } else {
                    diffs.map(|x| x.powf(p)).sum::<f64>().powf(1.0 / p)
                };
                out.push(d);
            }
        }
    }
    let mut shape = batch;
    shape.extend([pn, rn]);
    Tensor::from_f64s(&out, &shape, dtype)
}

/// `torch.pdist(x, p)`: distances between the rows of a 2-D tensor, upper triangle, row-major.
pub fn pdist(x: &Tensor, p: f64) -> Result<Tensor> {
    let op = "pdist";
    if x.dim() != 2 {
        return Err(invalid(
            op,
            format!("pdist only supports 2D tensors, got: {}D", x.dim()),
        ));
    }
    if !x.dtype().is_float() {
        return Err(invalid(op, "pdist only supports floating-point dtypes"));
    }
    if matches!(x.dtype(), DType::F16 | DType::BF16) {
        return Err(Error::UnsupportedDType {
            op,
            dtype: x.dtype(),
        });
    }
    let n = x.shape()[0];
    let full = cdist(x, x, p)?.to_vec::<f64>()?;
    let mut out = Vec::new();
    for i in 0..n {
        for j in i + 1..n {
            out.push(full[i * n + j]);
        }
    }
    Tensor::from_f64s(&out, &[out.len()], x.dtype())
}

/// `torch.linalg.matrix_power(a, n)`: repeated squaring; negative powers of the inverse.
pub fn matrix_power(a: &Tensor, n: i64) -> Result<Tensor> {
    let op = "linalg.matrix_power";
    let d = a.dim();
    if d < 2 || a.shape()[d - 1] != a.shape()[d - 2] {
        return Err(invalid(
            op,
            "A must be batches of square matrices, but they are not square",
        ));
    }
    if n == 0 {
        let k = a.shape()[d - 1];
        let eye = crate::ops::creation::eye(k, None, a.dtype())?;
        let shape: Vec<i64> = a.shape().iter().map(|&s| s as i64).collect();
        return eye
            .expand(&shape)?
            .contiguous()?
            .deep_clone()?
            .with_row_major_strides();
    }
    let (base, n) = if n < 0 {
        let (inv, info) = crate::ops::linalg_decomp::inv_ex(a)?;
        crate::ops::linalg_decomp::singular_error(op, &info)?;
        if n == -1 {
            return Ok(inv);
        }
        (inv, n.unsigned_abs())
    } else {
        (a.clone(), n as u64)
    };
    if n == 1 {
        return base.deep_clone()?.with_row_major_strides();
    }
    // Upstream: repeated squaring, multiplying the result by the squares of set bits.
    let mut z: Option<Tensor> = None;
    let mut result: Option<Tensor> = None;
    let mut k = n;
    while k > 0 {
        z = Some(match z {
            None => base.clone(),
            Some(z) => z.matmul(&z)?,
        });
        if k & 1 == 1 {
            let zz = z.as_ref().ok_or_else(|| invalid(op, "internal"))?;
            result = Some(match result {
                None => zz.clone(),
                Some(r) => r.matmul(zz)?,
            });
        }
        k >>= 1;
    }
    result
        .ok_or_else(|| invalid(op, "internal"))?
        .with_row_major_strides()
}

// ----- small dense decompositions (f64 arithmetic, float32/float64 only) -----

/// Checks a float32/float64 `[.., m, n]` input; returns (batch count, m, n).
pub(crate) fn lapack_check(
    op: &'static str,
    a: &Tensor,
    square: bool,
) -> Result<(usize, usize, usize)> {
    if !matches!(a.dtype(), DType::F32 | DType::F64) {
        return Err(Error::UnsupportedDType {
            op,
            dtype: a.dtype(),
        });
    }
    if a.dim() < 2 {
        return Err(invalid(
            op,
            format!(
                "The input tensor A must have at least 2 dimensions, got {}",
                a.dim()
            ),
        ));
    }
    let (m, n) = (a.shape()[a.dim() - 2], a.shape()[a.dim() - 1]);
    if square && m != n {
        return Err(invalid(
            op,
            format!("A must be batches of square matrices, but they are {m} by {n} matrices"),
        ));
    }
    let batch = a.shape()[..a.dim() - 2].iter().product();
    Ok((batch, m, n))
}

fn batch_shape(a: &Tensor) -> Vec<usize> {
    a.shape()[..a.dim() - 2].to_vec()
}

/// `(sign, log|det|)` of square matrices (LU with partial pivoting).
pub fn slogdet(a: &Tensor) -> Result<(Tensor, Tensor)> {
    let (batch, n, _) = lapack_check("linalg.slogdet", a, true)?;
    let v = a.to_vec::<f64>()?;
    let mut signs = Vec::with_capacity(batch);
    let mut logs = Vec::with_capacity(batch);
    for b in 0..batch {
        let mut m = v[b * n * n..(b + 1) * n * n].to_vec();
        let (piv, _) = crate::ops::linalg_decomp::getrf(&mut m, n, n);
        let mut s = 1.0;
        for (i, &p) in piv.iter().enumerate() {
            if p != i {
                s = -s;
            }
        }
        let mut l = 0.0;
        for i in 0..n {
            let d = m[i * n + i];
            if d < 0.0 {
                s = -s;
            }
            l += d.abs().ln();
        }
        if l == f64::NEG_INFINITY {
            s = 0.0;
        }
        signs.push(s);
        logs.push(l);
    }
    let bs = batch_shape(a);
    Ok((
        Tensor::from_f64s(&signs, &bs, a.dtype())?,
        Tensor::from_f64s(&logs, &bs, a.dtype())?,
    ))
}

/// `torch.linalg.det`.
pub fn det(a: &Tensor) -> Result<Tensor> {
    let (s, l) = slogdet(a)?;
    s.mul(&l.exp()?)
}

/// `torch.logdet`: `log(det)` (NaN for negative determinants).
pub fn logdet(a: &Tensor) -> Result<Tensor> {
    let (s, l) = slogdet(a)?;
    let sv = s.to_vec::<f64>()?;
    let lv = l.to_vec::<f64>()?;
    let r: Vec<f64> = sv
        .iter()
        .zip(&lv)
        .map(|(&s, &l)| if s < 0.0 { f64::NAN } else { l })
        .collect();
    Tensor::from_f64s(&r, s.shape(), a.dtype())
}

/// Solves `A X = B` for square `A` (`B` a matrix `[.., n, k]` or vector, broadcasting batches).
pub fn solve(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let (r, info) = crate::ops::linalg_decomp::solve_ex(a, b, true)?;
    solve_error("linalg.solve", &info)?;
    Ok(r)
}

/// Error for a singular system found by `info`.
pub fn solve_error(op: &'static str, info: &Tensor) -> Result<()> {
    crate::ops::linalg_decomp::info_error(op, info, |_| {
        "The solver failed because the input matrix is singular.".into()
    })
}

/// `torch.linalg.inv`.
pub fn inv(a: &Tensor) -> Result<Tensor> {
    let (r, info) = crate::ops::linalg_decomp::inv_ex(a)?;
    crate::ops::linalg_decomp::singular_error("linalg.inv", &info)?;
    Ok(r)
}

/// `torch.linalg.cholesky(A, upper)`.
pub fn cholesky(a: &Tensor, upper: bool) -> Result<Tensor> {
    let op = "linalg.cholesky";
    let (r, info) = crate::ops::linalg_decomp::cholesky_ex(a, upper)?;
    crate::ops::linalg_decomp::cholesky_error(op, &info)?;
    Ok(r)
}

/// Eigenvalues (ascending) of symmetric matrices by cyclic Jacobi rotations.
fn sym_eigvals(m: &mut [f64], n: usize) -> Vec<f64> {
    for _sweep in 0..100 {
        let off: f64 = (0..n)
            .flat_map(|i| (0..n).filter(move |&j| j != i).map(move |j| (i, j)))
            .map(|(i, j)| m[i * n + j] * m[i * n + j])
            .sum();
        if off < 1e-300 {
            break;
        }
        for p in 0..n {
            for q in p + 1..n {
                let apq = m[p * n + q];
                if apq == 0.0 {
                    continue;
                }
                let theta = (m[q * n + q] - m[p * n + p]) / (2.0 * apq);
                let t = theta.signum() / (theta.abs() + (theta * theta + 1.0).sqrt());
                let t = if theta == 0.0 { 1.0 } else { t };
                let c = 1.0 / (t * t + 1.0).sqrt();
                let s = t * c;
                for k in 0..n {
                    let (akp, akq) = (m[k * n + p], m[k * n + q]);
                    m[k * n + p] = c * akp - s * akq;
                    m[k * n + q] = s * akp + c * akq;
                }
                for k in 0..n {
                    let (apk, aqk) = (m[p * n + k], m[q * n + k]);
                    m[p * n + k] = c * apk - s * aqk;
                    m[q * n + k] = s * apk + c * aqk;
                }
            }
        }
    }
    let mut e: Vec<f64> = (0..n).map(|i| m[i * n + i]).collect();
    e.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    e
}

/// `torch.linalg.eigvalsh(A, UPLO)`: eigenvalues of the symmetric matrix read from one triangle.
pub fn eigvalsh(a: &Tensor, upper: bool) -> Result<Tensor> {
    let (batch, n, _) = lapack_check("linalg.eigvalsh", a, true)?;
    let v = a.to_vec::<f64>()?;
    let mut out = Vec::with_capacity(batch * n);
    for b in 0..batch {
        let src = &v[b * n * n..(b + 1) * n * n];
        let mut m = vec![0.0; n * n];
        for i in 0..n {
            for j in 0..n {
                let (r, c) = if (i >= j) != upper { (i, j) } else { (j, i) };
                m[i * n + j] = src[r * n + c];
            }
        }
        out.extend(sym_eigvals(&mut m, n));
    }
    let mut shape = batch_shape(a);
    shape.push(n);
    Tensor::from_f64s(&out, &shape, a.dtype())
}

/// `torch.linalg.svdvals(A)` (descending), by one-sided Jacobi rotations.
pub fn svdvals(a: &Tensor) -> Result<Tensor> {
    let (batch, m, n) = lapack_check("linalg.svd", a, false)?;
    let v = a.to_vec::<f64>()?;
    let k = m.min(n);
    let mut out = Vec::with_capacity(batch * k);
    for b in 0..batch {
        let x = &v[b * m * n..(b + 1) * m * n];
        out.extend(crate::ops::linalg_decomp::singular_values(x, m, n));
    }
    let mut shape = batch_shape(a);
    shape.push(k);
    Tensor::from_f64s(&out, &shape, a.dtype())
}

/// `torch.linalg.solve_triangular(A, B, upper, left, unitriangular)`: only the named
/// triangle of `A` is read.
pub fn solve_triangular(
    a: &Tensor,
    b: &Tensor,
    upper: bool,
    left: bool,
    unitriangular: bool,
) -> Result<Tensor> {
    crate::ops::linalg_decomp::solve_triangular(a, b, upper, left, unitriangular)
}

/// `torch.cholesky_solve(B, L, upper)`: solves `A X = B` given the Cholesky factor of `A`.
pub fn cholesky_solve(b: &Tensor, l: &Tensor, upper: bool) -> Result<Tensor> {
    let op = "cholesky_solve";
    if b.dim() < 2 || l.dim() < 2 {
        return Err(invalid(
            op,
            "b should have at least 2 dimensions, and A should have at least 2 dimensions",
        ));
    }
    if b.dtype() != l.dtype() {
        return Err(invalid(
            op,
            format!(
                "Expected b and A to have the same dtype, but found b of type {} and A of type {} instead.",
                b.dtype().name(),
                l.dtype().name()
            ),
        ));
    }
    // A = L L^T: L Y = B, then L^T X = Y (the upper factor U = L^T).
    let (lower, up) = if upper {
        (l.transpose(-2, -1)?, l.clone())
    } else {
        (l.clone(), l.transpose(-2, -1)?)
    };
    let y = solve_triangular(&lower, b, false, true, false)?;
    solve_triangular(&up, &y, true, true, false)
}

/// `torch.linalg.qr(A, mode)`: Householder QR with LAPACK's sign conventions.
pub fn qr(a: &Tensor, mode: &str) -> Result<(Tensor, Tensor)> {
    crate::ops::linalg_decomp::qr(a, mode)
}

/// `torch.linalg.lu_factor(A)`: packed LU (column-major) and 1-based int32 pivots (getrf).
pub fn lu_factor(a: &Tensor) -> Result<(Tensor, Tensor)> {
    let (lu, piv, _) = crate::ops::linalg_decomp::lu_factor_ex(a, "linalg.lu_factor")?;
    Ok((lu, piv))
}
