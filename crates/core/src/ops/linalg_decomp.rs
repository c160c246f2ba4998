//! Dense decompositions in f64 arithmetic (float32/float64 tensors), laid out the way
//! upstream's LAPACK-backed results are: matrices column-major per batch element.
//!
//! Algorithms follow LAPACK's conventions where they decide the result (Householder QR with
//! `dlarfg`'s sign choice, LU with the first largest pivot); SVD and symmetric eigenproblems use
//! Jacobi rotations (singular values descending, eigenvalues ascending).

use crate::dtype::DType;
use crate::error::{invalid, Error, Result};
use crate::layout::{broadcast_shapes, contiguous_strides, Layout};
use crate::ops::linalg::lapack_check;
use crate::tensor::Tensor;

// ----- layout helpers -----

/// Batched column-major strides: `[.., 1, rows]` with dense batches (size-0 dims count as 1).
pub(crate) fn fortran_strides(shape: &[usize]) -> Vec<usize> {
    let d = shape.len();
    if d < 2 {
        return contiguous_strides(shape);
    }
    let mut st = vec![1usize; d];
    st[d - 1] = shape[d - 2].max(1);
    let mut acc = st[d - 1].saturating_mul(shape[d - 1].max(1));
    for i in (0..d - 2).rev() {
        st[i] = acc;
        acc = acc.saturating_mul(shape[i].max(1));
    }
    st
}

/// A tensor of `shape` from row-major matrices `vals`, stored column-major per matrix.
pub(crate) fn fortran(vals: &[f64], shape: &[usize], dtype: DType) -> Result<Tensor> {
    let d = shape.len();
    if d < 2 {
        return Tensor::from_f64s(vals, shape, dtype);
    }
    let (m, n) = (shape[d - 2], shape[d - 1]);
    let mut out = vec![0.0; vals.len()];
    if m * n > 0 {
        for (b, mat) in vals.chunks(m * n).enumerate() {
            let o = &mut out[b * m * n..(b + 1) * m * n];
            for i in 0..m {
                for j in 0..n {
                    o[j * m + i] = mat[i * n + j];
                }
            }
        }
    }
    let flat = Tensor::from_f64s(&out, &[out.len()], dtype)?;
    Ok(flat.relayout(Layout {
        sizes: shape.to_vec(),
        strides: fortran_strides(shape),
        offset: 0,
    }))
}

/// Row-major matrices `vals` (`batch` of `rows x cols`) in a column-major buffer whose leading
/// dimension is `ld >= rows` (LAPACK's work layout for least squares), viewed as `shape`.
fn fortran_ld(
    vals: &[f64],
    rows: usize,
    cols: usize,
    ld: usize,
    batch_shape: &[usize],
    dtype: DType,
) -> Result<Tensor> {
    let batch: usize = batch_shape.iter().product();
    let mut buf = vec![0.0; batch * ld * cols];
    for b in 0..batch {
        for i in 0..rows {
            for j in 0..cols {
                buf[b * ld * cols + j * ld + i] = vals[(b * rows + i) * cols + j];
            }
        }
    }
    let mut shape = batch_shape.to_vec();
    shape.extend([rows, cols]);
    let mut full = batch_shape.to_vec();
    full.extend([ld, cols]);
    let mut strides = fortran_strides(&full);
    let d = strides.len();
    strides[d - 1] = ld.max(1);
    let flat = Tensor::from_f64s(&buf, &[buf.len()], dtype)?;
    Ok(flat.relayout(Layout {
        sizes: shape,
        strides,
        offset: 0,
    }))
}

fn batch_of(a: &Tensor) -> Vec<usize> {
    a.shape()[..a.dim().saturating_sub(2)].to_vec()
}

fn with_mat(batch: &[usize], m: usize, n: usize) -> Vec<usize> {
    let mut s = batch.to_vec();
    s.extend([m, n]);
    s
}

fn with_vec(batch: &[usize], k: usize) -> Vec<usize> {
    let mut s = batch.to_vec();
    s.push(k);
    s
}

fn eye(m: usize, n: usize) -> Vec<f64> {
    let mut v = vec![0.0; m * n];
    for i in 0..m.min(n) {
        v[i * n + i] = 1.0;
    }
    v
}

fn transpose(a: &[f64], m: usize, n: usize) -> Vec<f64> {
    let mut t = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            t[j * m + i] = a[i * n + j];
        }
    }
    t
}

/// Row-major `[m,k] x [k,n]` with compensated sums.
fn matmul(a: &[f64], b: &[f64], m: usize, k: usize, n: usize) -> Vec<f64> {
    let mut out = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            let (mut s, mut c) = (0.0f64, 0.0f64);
            for t in 0..k {
                let p = a[i * k + t] * b[t * n + j];
                let y = p - c;
                let z = s + y;
                c = (z - s) - y;
                s = z;
            }
            out[i * n + j] = s;
        }
    }
    out
}

fn float_check(op: &'static str, t: &Tensor) -> Result<()> {
    if !matches!(t.dtype(), DType::F32 | DType::F64) {
        return Err(Error::UnsupportedDType {
            op,
            dtype: t.dtype(),
        });
    }
    Ok(())
}

fn same_dtype(op: &'static str, a: &Tensor, b: &Tensor) -> Result<()> {
    if a.dtype() != b.dtype() {
        return Err(invalid(
            op,
            format!(
                "Expected all tensors to have the same dtype, but got {} and {}",
                a.dtype().name(),
                b.dtype().name()
            ),
        ));
    }
    Ok(())
}

// ----- Householder QR (geqrf / orgqr) -----

/// LAPACK `geqr2` on a row-major `m x n` matrix: R above the diagonal, reflectors below, tau.
fn geqr2(a: &mut [f64], m: usize, n: usize) -> Vec<f64> {
    let k = m.min(n);
    let mut tau = vec![0.0; k];
    for j in 0..k {
        let alpha = a[j * n + j];
        let xnorm = (j + 1..m)
            .map(|i| a[i * n + j])
            .fold(0.0f64, |acc, x| acc.hypot(x));
        if xnorm == 0.0 {
            continue;
        }
        let beta = -alpha.hypot(xnorm).copysign(alpha);
        let t = (beta - alpha) / beta;
        let scale = 1.0 / (alpha - beta);
        for i in j + 1..m {
            a[i * n + j] *= scale;
        }
        a[j * n + j] = beta;
        tau[j] = t;
        for c in j + 1..n {
            let mut w = a[j * n + c];
            for i in j + 1..m {
                w += a[i * n + j] * a[i * n + c];
            }
            w *= t;
            a[j * n + c] -= w;
            for i in j + 1..m {
                a[i * n + c] -= w * a[i * n + j];
            }
        }
    }
    tau
}

/// LAPACK `org2r`: the first `cols` columns of `H_0 ... H_{k-1}` from reflectors stored below
/// the diagonal of the row-major `m x n` matrix `a`.
fn org2r(a: &[f64], n: usize, tau: &[f64], m: usize, cols: usize) -> Vec<f64> {
    let mut q = eye(m, cols);
    for j in (0..tau.len()).rev() {
        let t = tau[j];
        if t == 0.0 {
            continue;
        }
        for c in 0..cols {
            let mut w = q[j * cols + c];
            for i in j + 1..m {
                w += a[i * n + j] * q[i * cols + c];
            }
            w *= t;
            q[j * cols + c] -= w;
            for i in j + 1..m {
                q[i * cols + c] -= w * a[i * n + j];
            }
        }
    }
    q
}

/// `torch.geqrf(A)`: packed QR (column-major) and the reflector scales `tau`.
pub fn geqrf(a: &Tensor) -> Result<(Tensor, Tensor)> {
    let op = "geqrf";
    let (batch, m, n) = lapack_check(op, a, false)?;
    let v = a.to_vec::<f64>()?;
    let k = m.min(n);
    let mut packed = Vec::with_capacity(v.len());
    let mut taus = Vec::with_capacity(batch * k);
    for b in 0..batch {
        let mut x = v[b * m * n..(b + 1) * m * n].to_vec();
        taus.extend(geqr2(&mut x, m, n));
        packed.extend(x);
    }
    let bs = batch_of(a);
    Ok((
        fortran(&packed, a.shape(), a.dtype())?,
        Tensor::from_f64s(&taus, &with_vec(&bs, k), a.dtype())?,
    ))
}

/// `torch.linalg.householder_product(A, tau)` (LAPACK orgqr): `m x n` with `n <= m`.
pub fn householder_product(a: &Tensor, tau: &Tensor) -> Result<Tensor> {
    let op = "linalg.householder_product";
    let (batch, m, n) = lapack_check(op, a, false)?;
    same_dtype(op, a, tau)?;
    if n > m {
        return Err(invalid(
            op,
            "input.shape[-2] must be greater than or equal to input.shape[-1]",
        ));
    }
    if tau.dim() + 1 != a.dim() || tau.shape()[..tau.dim() - 1] != a.shape()[..a.dim() - 2] {
        return Err(invalid(
            op,
            "Expected batch dimensions of tau to be equal to input.shape[:-2]",
        ));
    }
    let k = tau.shape()[tau.dim() - 1];
    if k > n {
        return Err(invalid(
            op,
            "input.shape[-1] must be greater than or equal to tau.shape[-1]",
        ));
    }
    let v = a.to_vec::<f64>()?;
    let tv = tau.to_vec::<f64>()?;
    let mut out = Vec::with_capacity(v.len());
    for b in 0..batch {
        out.extend(org2r(
            &v[b * m * n..(b + 1) * m * n],
            n,
            &tv[b * k..(b + 1) * k],
            m,
            n,
        ));
    }
    fortran(&out, a.shape(), a.dtype())
}

/// `torch.linalg.qr(A, mode)` through geqrf + orgqr, so signs are LAPACK's.
pub fn qr(a: &Tensor, mode: &str) -> Result<(Tensor, Tensor)> {
    let op = "linalg.qr";
    let (batch, m, n) = lapack_check(op, a, false)?;
    let k = m.min(n);
    let (qc, rr) = match mode {
        "reduced" => (k, k),
        "complete" => (m, m),
        "r" => (0, k),
        _ => {
            return Err(invalid(
                op,
                format!("qr received unrecognized mode '{mode}' but expected one of 'reduced' (default), 'r', or 'complete'"),
            ))
        }
    };
    let v = a.to_vec::<f64>()?;
    let mut qs = Vec::new();
    let mut rs = Vec::new();
    for b in 0..batch {
        let mut x = v[b * m * n..(b + 1) * m * n].to_vec();
        let tau = geqr2(&mut x, m, n);
        if qc > 0 {
            qs.extend(org2r(&x, n, &tau, m, qc));
        }
        for i in 0..rr {
            for c in 0..n {
                rs.push(if c < i { 0.0 } else { x[i * n + c] });
            }
        }
    }
    let bs = batch_of(a);
    let qt = if mode == "r" {
        Tensor::from_f64s(&[], &[0], a.dtype())?
    } else {
        fortran(&qs, &with_mat(&bs, m, qc), a.dtype())?
    };
    Ok((qt, fortran(&rs, &with_mat(&bs, rr, n), a.dtype())?))
}

// ----- LU -----

/// LAPACK `getrf` on a row-major `m x n` matrix: packed L\U, 0-based pivot rows (the first
/// largest magnitude), and `info` (1-based index of the first zero pivot, 0 if none).
pub(crate) fn getrf(a: &mut [f64], m: usize, n: usize) -> (Vec<usize>, usize) {
    let k = m.min(n);
    let mut piv = Vec::with_capacity(k);
    let mut info = 0;
    for j in 0..k {
        let mut p = j;
        let mut best = a[j * n + j].abs();
        for i in j + 1..m {
            let x = a[i * n + j].abs();
            if x > best {
                best = x;
                p = i;
            }
        }
        piv.push(p);
        if a[p * n + j] != 0.0 {
            if p != j {
                for c in 0..n {
                    a.swap(j * n + c, p * n + c);
                }
            }
            let d = a[j * n + j];
            for i in j + 1..m {
                a[i * n + j] /= d;
            }
        } else if info == 0 {
            info = j + 1;
        }
        for i in j + 1..m {
            let l = a[i * n + j];
            if l == 0.0 {
                continue;
            }
            for c in j + 1..n {
                a[i * n + c] -= l * a[j * n + c];
            }
        }
    }
    (piv, info)
}

/// `torch.linalg.lu_factor_ex(A)`: packed LU (column-major), 1-based int32 pivots, int32 info.
pub fn lu_factor_ex(a: &Tensor, op: &'static str) -> Result<(Tensor, Tensor, Tensor)> {
    let (batch, m, n) = lapack_check(op, a, false)?;
    let k = m.min(n);
    let v = a.to_vec::<f64>()?;
    let mut lu = Vec::with_capacity(v.len());
    let mut piv = Vec::with_capacity(batch * k);
    let mut infos = Vec::with_capacity(batch);
    for b in 0..batch {
        let mut x = v[b * m * n..(b + 1) * m * n].to_vec();
        let (p, info) = getrf(&mut x, m, n);
        lu.extend(x);
        piv.extend(p.into_iter().map(|x| x as i64 + 1));
        infos.push(info as i64);
    }
    let bs = batch_of(a);
    Ok((
        fortran(&lu, a.shape(), a.dtype())?,
        Tensor::from_i64s(&piv, &with_vec(&bs, k), DType::I32)?,
        Tensor::from_i64s(&infos, &bs, DType::I32)?,
    ))
}

/// Row permutation (as `perm[i]` = source row of row i) from 1-based LAPACK pivots.
fn perm_of(piv: &[i64], m: usize, op: &'static str) -> Result<Vec<usize>> {
    let mut perm: Vec<usize> = (0..m).collect();
    for (i, &p) in piv.iter().enumerate() {
        if p < 1 || p as usize > m || i >= m {
            return Err(invalid(
                op,
                format!("Pivots given are not in the range [1, {m}]"),
            ));
        }
        perm.swap(i, p as usize - 1);
    }
    Ok(perm)
}

/// `torch.lu_unpack(LU, pivots, unpack_data, unpack_pivots)` -> (P, L, U), row-major.
pub fn lu_unpack(
    lu: &Tensor,
    pivots: &Tensor,
    unpack_data: bool,
    unpack_pivots: bool,
) -> Result<(Tensor, Tensor, Tensor)> {
    let op = "lu_unpack";
    let (batch, m, n) = lapack_check(op, lu, false)?;
    let k = m.min(n);
    if !matches!(pivots.dtype(), DType::I32) {
        return Err(invalid(
            op,
            "torch.lu_unpack: LU_pivots is expected to be a contiguous tensor of torch.int32 dtype.",
        ));
    }
    if pivots.dim() + 1 != lu.dim()
        || pivots.shape()[pivots.dim() - 1] != k
        || pivots.shape()[..pivots.dim() - 1] != lu.shape()[..lu.dim() - 2]
    {
        return Err(invalid(
            op,
            "torch.lu_unpack: LU_pivots must have shape [..., min(m, n)]",
        ));
    }
    let bs = batch_of(lu);
    let dt = lu.dtype();
    let (l, u) = if unpack_data {
        let v = lu.to_vec::<f64>()?;
        let mut ls = Vec::with_capacity(batch * m * k);
        let mut us = Vec::with_capacity(batch * k * n);
        for b in 0..batch {
            let x = &v[b * m * n..(b + 1) * m * n];
            for i in 0..m {
                for j in 0..k {
                    ls.push(match i.cmp(&j) {
                        std::cmp::Ordering::Greater => x[i * n + j],
                        std::cmp::Ordering::Equal => 1.0,
                        std::cmp::Ordering::Less => 0.0,
                    });
                }
            }
            for i in 0..k {
                for j in 0..n {
                    us.push(if j >= i { x[i * n + j] } else { 0.0 });
                }
            }
        }
        (
            Tensor::from_f64s(&ls, &with_mat(&bs, m, k), dt)?,
            Tensor::from_f64s(&us, &with_mat(&bs, k, n), dt)?,
        )
    } else {
        (
            Tensor::from_f64s(&[], &[0], dt)?,
            Tensor::from_f64s(&[], &[0], dt)?,
        )
    };
    let p = if unpack_pivots {
        let pv = pivots.to_vec::<i64>()?;
        let mut ps = vec![0.0; batch * m * m];
        for b in 0..batch {
            let perm = perm_of(&pv[b * k..(b + 1) * k], m, op)?;
            for (i, &src) in perm.iter().enumerate() {
                ps[b * m * m + src * m + i] = 1.0;
            }
        }
        Tensor::from_f64s(&ps, &with_mat(&bs, m, m), dt)?
    } else {
        Tensor::from_f64s(&[], &[0], dt)?
    };
    Ok((p, l, u))
}

/// `torch.linalg.lu(A)` -> (P, L, U).
pub fn lu(a: &Tensor) -> Result<(Tensor, Tensor, Tensor)> {
    let (lu, piv, _) = lu_factor_ex(a, "linalg.lu")?;
    lu_unpack(&lu, &piv, true, true)
}

/// Solves with a triangular `n x n` row-major `t` in place on `b` (`n x k`): `op(T) X = B`
/// where `op` is the transpose when `trans`.
fn tri_solve(t: &[f64], n: usize, b: &mut [f64], k: usize, upper: bool, unit: bool, trans: bool) {
    // Element (i, j) of op(T).
    let at = |i: usize, j: usize| if trans { t[j * n + i] } else { t[i * n + j] };
    let lower_eff = upper == trans;
    for c in 0..k {
        if lower_eff {
            for i in 0..n {
                let mut s = b[i * k + c];
                for j in 0..i {
                    s -= at(i, j) * b[j * k + c];
                }
                b[i * k + c] = if unit { s } else { s / at(i, i) };
            }
        } else {
            for i in (0..n).rev() {
                let mut s = b[i * k + c];
                for j in i + 1..n {
                    s -= at(i, j) * b[j * k + c];
                }
                b[i * k + c] = if unit { s } else { s / at(i, i) };
            }
        }
    }
}

/// Broadcasts `a` (`[.., n, n]`) and `b` (`[.., n, k]`) to one batch; returns values.
fn broadcast_pair(
    op: &'static str,
    a: &Tensor,
    b: &Tensor,
) -> Result<(Vec<usize>, Vec<f64>, Vec<f64>)> {
    let batch = broadcast_shapes(op, &a.shape()[..a.dim() - 2], &b.shape()[..b.dim() - 2])?;
    let ea = with_mat(&batch, a.shape()[a.dim() - 2], a.shape()[a.dim() - 1]);
    let eb = with_mat(&batch, b.shape()[b.dim() - 2], b.shape()[b.dim() - 1]);
    Ok((
        batch,
        a.broadcast_to(&ea)?.to_vec::<f64>()?,
        b.broadcast_to(&eb)?.to_vec::<f64>()?,
    ))
}

/// `torch.linalg.lu_solve(LU, pivots, B, left, adjoint)`.
pub fn lu_solve(
    lu: &Tensor,
    pivots: &Tensor,
    b: &Tensor,
    left: bool,
    adjoint: bool,
) -> Result<Tensor> {
    let op = "linalg.lu_solve";
    let (_, n, _) = lapack_check(op, lu, true)?;
    same_dtype(op, lu, b)?;
    if b.dim() < 2 {
        return Err(invalid(
            op,
            format!(
                "The input tensor B must have at least 2 dimensions, got {}",
                b.dim()
            ),
        ));
    }
    // X A = B  <=>  A^T X^T = B^T.
    let (bm, adj) = if left {
        (b.clone(), adjoint)
    } else {
        (b.transpose(-2, -1)?, !adjoint)
    };
    if bm.shape()[bm.dim() - 2] != n {
        return Err(invalid(
            op,
            format!(
                "Incompatible shapes of A and B for the equation {} ({n}x{n} and {}x{})",
                if left { "AX = B" } else { "XA = B" },
                b.shape()[b.dim() - 2],
                b.shape()[b.dim() - 1]
            ),
        ));
    }
    if pivots.dim() + 1 != lu.dim() || pivots.shape()[pivots.dim() - 1] != n {
        return Err(invalid(op, "pivots must have shape [..., n]"));
    }
    let k = bm.shape()[bm.dim() - 1];
    let (batch, av, bv) = broadcast_pair(op, lu, &bm)?;
    let mut pshape = batch.clone();
    pshape.push(n);
    let pv = pivots.broadcast_to(&pshape)?.to_vec::<i64>()?;
    let nb: usize = batch.iter().product();
    let mut out = Vec::with_capacity(nb * n * k);
    for bi in 0..nb {
        let m = &av[bi * n * n..(bi + 1) * n * n];
        let mut rhs = bv[bi * n * k..(bi + 1) * n * k].to_vec();
        let perm = perm_of(&pv[bi * n..(bi + 1) * n], n, op)?;
        if !adj {
            let src = rhs.clone();
            for (i, &p) in perm.iter().enumerate() {
                rhs[i * k..(i + 1) * k].copy_from_slice(&src[p * k..(p + 1) * k]);
            }
            tri_solve(m, n, &mut rhs, k, false, true, false);
            tri_solve(m, n, &mut rhs, k, true, false, false);
        } else {
            tri_solve(m, n, &mut rhs, k, true, false, true);
            tri_solve(m, n, &mut rhs, k, false, true, true);
            let src = rhs.clone();
            for (i, &p) in perm.iter().enumerate() {
                rhs[p * k..(p + 1) * k].copy_from_slice(&src[i * k..(i + 1) * k]);
            }
        }
        out.extend(rhs);
    }
    if left {
        fortran(&out, &with_mat(&batch, n, k), lu.dtype())
    } else {
        // The solution of the transposed system, transposed back: row-major per matrix.
        let mut t = Vec::with_capacity(out.len());
        for bi in 0..nb {
            t.extend(transpose(&out[bi * n * k..(bi + 1) * n * k], n, k));
        }
        Tensor::from_f64s(&t, &with_mat(&batch, k, n), lu.dtype())
    }
}

// ----- Cholesky family -----

/// Lower Cholesky factor of a row-major `n x n` matrix (lower triangle read); `info` is the
/// order of the first non-positive-definite leading minor (0 on success).
pub(crate) fn potrf(m: &[f64], n: usize) -> (Vec<f64>, usize) {
    let mut l = vec![0.0; n * n];
    for j in 0..n {
        let mut d = m[j * n + j];
        for k in 0..j {
            d -= l[j * n + k] * l[j * n + k];
        }
        if d <= 0.0 || d.is_nan() {
            // LAPACK's potf2 leaves the failing pivot's value and the untouched trailing
            // columns in place.
            l[j * n + j] = d;
            for c in j..n {
                for i in c.max(j + 1)..n {
                    l[i * n + c] = m[i * n + c];
                }
            }
            return (l, j + 1);
        }
        let d = d.sqrt();
        l[j * n + j] = d;
        for i in j + 1..n {
            let mut s = m[i * n + j];
            for k in 0..j {
                s -= l[i * n + k] * l[j * n + k];
            }
            l[i * n + j] = s / d;
        }
    }
    (l, 0)
}

/// `torch.linalg.cholesky_ex(A, upper)` -> (factor, info).
pub fn cholesky_ex(a: &Tensor, upper: bool) -> Result<(Tensor, Tensor)> {
    let op = "linalg.cholesky";
    let (batch, n, _) = lapack_check(op, a, true)?;
    let v = a.to_vec::<f64>()?;
    let mut out = Vec::with_capacity(v.len());
    let mut infos = Vec::with_capacity(batch);
    for b in 0..batch {
        let x = &v[b * n * n..(b + 1) * n * n];
        // The upper factor reads the upper triangle: U^T U = A  <=>  U^T is the lower factor of A^T.
        let src = if upper {
            transpose(x, n, n)
        } else {
            x.to_vec()
        };
        let (l, info) = potrf(&src, n);
        infos.push(info as i64);
        out.extend(if upper { transpose(&l, n, n) } else { l });
    }
    Ok((
        fortran(&out, a.shape(), a.dtype())?,
        Tensor::from_i64s(&infos, &batch_of(a), DType::I32)?,
    ))
}

/// The error for the first batch element whose LAPACK-style `info` is positive (upstream
/// prefixes "(Batch element b): " when `info` is batched); `message` spells it from `info`.
pub fn info_error(op: &'static str, info: &Tensor, message: impl Fn(i64) -> String) -> Result<()> {
    let batched = info.dim() > 0;
    match info
        .to_vec::<i64>()?
        .iter()
        .enumerate()
        .find(|(_, &i)| i > 0)
    {
        None => Ok(()),
        Some((b, &i)) => {
            let pre = if batched {
                format!("(Batch element {b}): ")
            } else {
                String::new()
            };
            Err(invalid(op, format!("{pre}{}", message(i))))
        }
    }
}

/// Error for a failed Cholesky factorization (first failing batch element).
pub fn cholesky_error(op: &'static str, info: &Tensor) -> Result<()> {
    info_error(op, info, |i| {
        format!("The factorization could not be completed because the input is not positive-definite (the leading minor of order {i} is not positive-definite).")
    })
}

/// `torch.cholesky_inverse(L, upper)`: the inverse of `L L^T` (or `U^T U`).
pub fn cholesky_inverse(l: &Tensor, upper: bool) -> Result<Tensor> {
    let op = "cholesky_inverse";
    let (batch, n, _) = lapack_check(op, l, true)?;
    let v = l.to_vec::<f64>()?;
    let mut out = Vec::with_capacity(v.len());
    for b in 0..batch {
        let x = &v[b * n * n..(b + 1) * n * n];
        // Lower factor F with A = F F^T.
        let f = if upper {
            transpose(x, n, n)
        } else {
            x.to_vec()
        };
        let mut lower = vec![0.0; n * n];
        for i in 0..n {
            for j in 0..=i {
                lower[i * n + j] = if upper { f[i * n + j] } else { x[i * n + j] };
            }
        }
        let mut inv = eye(n, n);
        tri_solve(&lower, n, &mut inv, n, false, false, false);
        // A^-1 = F^-T F^-1.
        out.extend(matmul(&transpose(&inv, n, n), &inv, n, n, n));
    }
    fortran(&out, l.shape(), l.dtype())
}

// ----- inverse / solve with info -----

/// LU solve of square systems; returns the row-major solutions and per-matrix info.
fn solve_values(a: &[f64], rhs: &[f64], nb: usize, n: usize, k: usize) -> (Vec<f64>, Vec<i64>) {
    let mut out = Vec::with_capacity(nb * n * k);
    let mut infos = Vec::with_capacity(nb);
    for bi in 0..nb {
        let mut m = a[bi * n * n..(bi + 1) * n * n].to_vec();
        let src = &rhs[bi * n * k..(bi + 1) * n * k];
        let (piv, info) = getrf(&mut m, n, n);
        infos.push(info as i64);
        let mut r = src.to_vec();
        for (i, &p) in piv.iter().enumerate() {
            if p != i {
                for c in 0..k {
                    r.swap(i * k + c, p * k + c);
                }
            }
        }
        tri_solve(&m, n, &mut r, k, false, true, false);
        tri_solve(&m, n, &mut r, k, true, false, false);
        out.extend(r);
    }
    (out, infos)
}

/// Error for a singular matrix found by `info`.
pub fn singular_error(op: &'static str, info: &Tensor) -> Result<()> {
    info_error(op, info, |i| {
        format!("The diagonal element {i} is zero, the inversion could not be completed because the input matrix is singular.")
    })
}

/// `torch.linalg.inv_ex(A)` -> (inverse, info).
pub fn inv_ex(a: &Tensor) -> Result<(Tensor, Tensor)> {
    let op = "linalg.inv";
    let (batch, n, _) = lapack_check(op, a, true)?;
    let v = a.to_vec::<f64>()?;
    let mut rhs = Vec::with_capacity(v.len());
    for _ in 0..batch {
        rhs.extend(eye(n, n));
    }
    let (out, infos) = solve_values(&v, &rhs, batch, n, n);
    Ok((
        fortran(&out, a.shape(), a.dtype())?,
        Tensor::from_i64s(&infos, &batch_of(a), DType::I32)?,
    ))
}

/// `torch.linalg.solve_ex(A, B, left)` -> (result, info), with upstream's vector case and
/// result layouts.
pub fn solve_ex(a: &Tensor, b: &Tensor, left: bool) -> Result<(Tensor, Tensor)> {
    let op = "linalg.solve";
    let (_, n, _) = lapack_check(op, a, true)?;
    if b.dtype() != a.dtype() {
        return Err(invalid(op, "Expected A and B to have the same dtype"));
    }
    if b.dim() == 0 {
        return Err(invalid(
            op,
            "The input tensor B must have at least 1 dimensions, got 0",
        ));
    }
    let vector = b.dim() == 1
        || (b.dim() + 1 == a.dim() && b.shape()[..b.dim() - 1] == a.shape()[..a.dim() - 2]);
    let bm = if vector { b.unsqueeze(-1)? } else { b.clone() };
    let bm = if left { bm } else { bm.transpose(-2, -1)? };
    if bm.shape()[bm.dim() - 2] != n {
        return Err(invalid(
            op,
            format!(
                "Incompatible shapes of A and B for the equation {} ({n}x{n} and {}x{})",
                if left { "AX = B" } else { "XA = B" },
                bm.shape()[bm.dim() - 2],
                bm.shape()[bm.dim() - 1]
            ),
        ));
    }
    let at = if left {
        a.clone()
    } else {
        a.transpose(-2, -1)?
    };
    let k = bm.shape()[bm.dim() - 1];
    let (batch, av, bv) = broadcast_pair(op, &at, &bm)?;
    let nb: usize = batch.iter().product();
    let (out, infos) = solve_values(&av, &bv, nb, n, k);
    let info_batch = broadcast_shapes(op, &batch_of(a), &batch)?;
    let info_n: usize = info_batch.iter().product();
    let infos = if info_n == infos.len() {
        infos
    } else {
        vec![infos.iter().copied().max().unwrap_or(0); info_n]
    };
    let info = Tensor::from_i64s(&infos, &info_batch, DType::I32)?;
    let r = if vector {
        let mut shape = batch.clone();
        shape.push(n);
        fortran(&out, &shape, a.dtype())?
    } else if left {
        fortran(&out, &with_mat(&batch, n, k), a.dtype())?
    } else {
        let mut t = Vec::with_capacity(out.len());
        for bi in 0..nb {
            t.extend(transpose(&out[bi * n * k..(bi + 1) * n * k], n, k));
        }
        Tensor::from_f64s(&t, &with_mat(&batch, k, n), a.dtype())?
    };
    Ok((r, info))
}

/// `torch.linalg.solve_triangular(A, B, upper, left, unitriangular)`.
pub fn solve_triangular(
    a: &Tensor,
    b: &Tensor,
    upper: bool,
    left: bool,
    unitriangular: bool,
) -> Result<Tensor> {
    let op = "linalg.solve_triangular";
    let (_, n, _) = lapack_check(op, a, true)?;
    same_dtype(op, a, b)?;
    if b.dim() < 2 {
        return Err(invalid(
            op,
            format!(
                "The input tensor B must have at least 2 dimensions, got {}",
                b.dim()
            ),
        ));
    }
    let bm = if left {
        b.clone()
    } else {
        b.transpose(-2, -1)?
    };
    if bm.shape()[bm.dim() - 2] != n {
        return Err(invalid(
            op,
            format!(
                "Incompatible shapes of A and B for the equation {} ({n}x{n} and {}x{})",
                if left { "AX = B" } else { "XA = B" },
                b.shape()[b.dim() - 2],
                b.shape()[b.dim() - 1]
            ),
        ));
    }
    let k = bm.shape()[bm.dim() - 1];
    let (batch, av, bv) = broadcast_pair(op, a, &bm)?;
    let nb: usize = batch.iter().product();
    let mut out = Vec::with_capacity(nb * n * k);
    for bi in 0..nb {
        let t = &av[bi * n * n..(bi + 1) * n * n];
        let mut r = bv[bi * n * k..(bi + 1) * n * k].to_vec();
        tri_solve(t, n, &mut r, k, upper, unitriangular, !left);
        out.extend(r);
    }
    if left {
        fortran(&out, &with_mat(&batch, n, k), a.dtype())
    } else {
        // X^T solved column-major is X row-major: upstream's result is X's transpose of an
        // F-contiguous buffer, i.e. column-major X again.
        let mut t = Vec::with_capacity(out.len());
        for bi in 0..nb {
            t.extend(transpose(&out[bi * n * k..(bi + 1) * n * k], n, k));
        }
        fortran(&t, &with_mat(&batch, k, n), a.dtype())
    }
}

/// `torch.triangular_solve(B, A, upper, transpose, unitriangular)` -> (solution, A's copy).
pub fn triangular_solve(
    b: &Tensor,
    a: &Tensor,
    upper: bool,
    trans: bool,
    unitriangular: bool,
) -> Result<(Tensor, Tensor)> {
    let op = "triangular_solve";
    let (_, n, _) = lapack_check(op, a, true)?;
    same_dtype(op, a, b)?;
    if b.dim() < 2 || b.shape()[b.dim() - 2] != n {
        return Err(invalid(
            op,
            format!(
                "Incompatible matrix sizes for triangular_solve: each A matrix is {n} by {n} but each b matrix is {:?}",
                b.shape()
            ),
        ));
    }
    let k = b.shape()[b.dim() - 1];
    let (batch, av, bv) = broadcast_pair(op, a, b)?;
    let nb: usize = batch.iter().product();
    let mut out = Vec::with_capacity(nb * n * k);
    for bi in 0..nb {
        let t = &av[bi * n * n..(bi + 1) * n * n];
        let mut r = bv[bi * n * k..(bi + 1) * n * k].to_vec();
        tri_solve(t, n, &mut r, k, upper, unitriangular, trans);
        out.extend(r);
    }
    Ok((
        fortran(&out, &with_mat(&batch, n, k), a.dtype())?,
        fortran(&av, &with_mat(&batch, n, n), a.dtype())?,
    ))
}

// ----- symmetric eigenproblem and SVD (Jacobi) -----

/// Eigen-decomposition of a symmetric row-major `n x n` matrix by cyclic Jacobi rotations:
/// ascending eigenvalues and the eigenvectors as columns of a row-major matrix.
fn jacobi_eigh(m: &mut [f64], n: usize) -> (Vec<f64>, Vec<f64>) {
    let mut v = eye(n, n);
    for _sweep in 0..100 {
        let mut off = 0.0;
        let mut diag = 0.0;
        for i in 0..n {
            for j in 0..n {
                if i != j {
                    off += m[i * n + j] * m[i * n + j];
                } else {
                    diag += m[i * n + j] * m[i * n + j];
                }
            }
        }
        if off <= 1e-32 * diag || off == 0.0 || off.is_nan() {
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
                let t = if theta.is_infinite() { 0.0 } else { t };
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
                for k in 0..n {
                    let (vkp, vkq) = (v[k * n + p], v[k * n + q]);
                    v[k * n + p] = c * vkp - s * vkq;
                    v[k * n + q] = s * vkp + c * vkq;
                }
            }
        }
    }
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| {
        m[a * n + a]
            .partial_cmp(&m[b * n + b])
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    let w: Vec<f64> = order.iter().map(|&i| m[i * n + i]).collect();
    let mut vecs = vec![0.0; n * n];
    for (c, &src) in order.iter().enumerate() {
        for r in 0..n {
            vecs[r * n + c] = v[r * n + src];
        }
    }
    normalize_signs(&mut vecs, n, n);
    (w, vecs)
}

/// Deterministic sign per column: the first entry of largest magnitude is made positive
/// unless ... a convention (LAPACK's own signs come out of its reductions).
fn normalize_signs(v: &mut [f64], rows: usize, cols: usize) {
    for c in 0..cols {
        let mut best = 0.0f64;
        let mut sign = 1.0;
        for r in 0..rows {
            let x = v[r * cols + c];
            if x.abs() > best * (1.0 + 1e-9) {
                best = x.abs();
                sign = x.signum();
            }
        }
        if sign < 0.0 {
            for r in 0..rows {
                v[r * cols + c] = -v[r * cols + c];
            }
        }
    }
}

/// Symmetric matrix from one triangle of a row-major `n x n` matrix.
fn symmetrize(src: &[f64], n: usize, upper: bool) -> Vec<f64> {
    let mut m = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..n {
            let (r, c) = if (i >= j) != upper { (i, j) } else { (j, i) };
            m[i * n + j] = src[r * n + c];
        }
    }
    m
}

/// `torch.linalg.eigh(A, UPLO)` -> (ascending eigenvalues, eigenvectors column-major).
pub fn eigh(a: &Tensor, upper: bool) -> Result<(Tensor, Tensor)> {
    let op = "linalg.eigh";
    let (batch, n, _) = lapack_check(op, a, true)?;
    let v = a.to_vec::<f64>()?;
    let mut ws = Vec::with_capacity(batch * n);
    let mut vs = Vec::with_capacity(v.len());
    for b in 0..batch {
        let mut m = symmetrize(&v[b * n * n..(b + 1) * n * n], n, upper);
        let (w, vecs) = jacobi_eigh(&mut m, n);
        ws.extend(w);
        vs.extend(vecs);
    }
    let bs = batch_of(a);
    Ok((
        Tensor::from_f64s(&ws, &with_vec(&bs, n), a.dtype())?,
        fortran(&vs, a.shape(), a.dtype())?,
    ))
}

/// Completes the first `have` orthonormal columns of a row-major `m x cols` matrix with
/// further orthonormal columns (Gram-Schmidt on the standard basis).
fn complete_basis(u: &mut [f64], m: usize, cols: usize, filled: &[bool]) {
    let mut cand = 0;
    for c in 0..cols {
        if filled[c] {
            continue;
        }
        while cand < m {
            let mut x = vec![0.0; m];
            x[cand] = 1.0;
            cand += 1;
            for _ in 0..2 {
                for o in 0..cols {
                    if o == c || !(filled[o] || o < c) {
                        continue;
                    }
                    let d: f64 = (0..m).map(|r| u[r * cols + o] * x[r]).sum();
                    for (r, xr) in x.iter_mut().enumerate() {
                        *xr -= d * u[r * cols + o];
                    }
                }
            }
            let nrm = x.iter().map(|v| v * v).sum::<f64>().sqrt();
            if nrm > 1e-6 {
                for (r, xr) in x.iter().enumerate() {
                    u[r * cols + c] = xr / nrm;
                }
                break;
            }
        }
    }
}

/// One-sided Jacobi SVD of a row-major `m x n` matrix with `m >= n`: `U` (`m x ucols`,
/// `ucols` is `n` or `m`), descending `S` (`n`), `V` (`n x n`, columns).
fn jacobi_svd_tall(a: &[f64], m: usize, n: usize, ucols: usize) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let mut w = a.to_vec();
    let mut v = eye(n, n);
    for _sweep in 0..80 {
        let mut rotated = false;
        for p in 0..n {
            for q in p + 1..n {
                let (mut al, mut be, mut ga) = (0.0, 0.0, 0.0);
                for i in 0..m {
                    let (x, y) = (w[i * n + p], w[i * n + q]);
                    al += x * x;
                    be += y * y;
                    ga += x * y;
                }
                if ga == 0.0 || ga.abs() <= 1e-17 * (al * be).sqrt() || !ga.is_finite() {
                    continue;
                }
                rotated = true;
                let zeta = (be - al) / (2.0 * ga);
                let t = zeta.signum() / (zeta.abs() + (1.0 + zeta * zeta).sqrt());
                let t = if zeta.is_infinite() { 0.0 } else { t };
                let c = 1.0 / (1.0 + t * t).sqrt();
                let s = c * t;
                for i in 0..m {
                    let (x, y) = (w[i * n + p], w[i * n + q]);
                    w[i * n + p] = c * x - s * y;
                    w[i * n + q] = s * x + c * y;
                }
                for i in 0..n {
                    let (x, y) = (v[i * n + p], v[i * n + q]);
                    v[i * n + p] = c * x - s * y;
                    v[i * n + q] = s * x + c * y;
                }
            }
        }
        if !rotated {
            break;
        }
    }
    let norms: Vec<f64> = (0..n)
        .map(|j| {
            (0..m)
                .map(|i| w[i * n + j] * w[i * n + j])
                .sum::<f64>()
                .sqrt()
        })
        .collect();
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&x, &y| {
        norms[y]
            .partial_cmp(&norms[x])
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    let s: Vec<f64> = order.iter().map(|&j| norms[j]).collect();
    let smax = s.first().copied().unwrap_or(0.0);
    let mut u = vec![0.0; m * ucols];
    let mut filled = vec![false; ucols];
    let mut vv = vec![0.0; n * n];
    for (c, &src) in order.iter().enumerate() {
        for r in 0..n {
            vv[r * n + c] = v[r * n + src];
        }
        let sj = norms[src];
        if sj > smax * 1e-300 && sj > 0.0 {
            for r in 0..m {
                u[r * ucols + c] = w[r * n + src] / sj;
            }
            filled[c] = true;
        }
    }
    complete_basis(&mut u, m, ucols, &filled);
    // Sign convention: each right singular vector's largest entry positive.
    for c in 0..n {
        let mut best = 0.0f64;
        let mut sign = 1.0;
        for r in 0..n {
            let x = vv[r * n + c];
            if x.abs() > best * (1.0 + 1e-9) {
                best = x.abs();
                sign = x.signum();
            }
        }
        if sign < 0.0 {
            for r in 0..n {
                vv[r * n + c] = -vv[r * n + c];
            }
            for r in 0..m {
                u[r * ucols + c] = -u[r * ucols + c];
            }
        }
    }
    (u, s, vv)
}

/// SVD of one row-major `m x n` matrix: `U` (`m x ucols`), `S` (min(m,n)), `Vh` (`vrows x n`);
/// `full` gives square factors.
fn svd_one(a: &[f64], m: usize, n: usize, full: bool) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let k = m.min(n);
    if m >= n {
        let ucols = if full { m } else { n };
        let (u, s, v) = jacobi_svd_tall(a, m, n, ucols);
        (u, s, transpose(&v, n, n))
    } else {
        // A^T = U' S V'^T  =>  A = V' S U'^T.
        let at = transpose(a, m, n);
        let vcols = if full { n } else { m };
        let (u2, s, v2) = jacobi_svd_tall(&at, n, m, vcols);
        let _ = k;
        (v2, s, transpose(&u2, n, vcols))
    }
}

/// Singular values (descending) of one row-major `m x n` matrix.
pub(crate) fn singular_values(a: &[f64], m: usize, n: usize) -> Vec<f64> {
    svd_one(a, m, n, false).1
}

/// `torch.linalg.svd(A, full_matrices)` -> (U, S, Vh), U and Vh column-major.
pub fn svd(a: &Tensor, full_matrices: bool) -> Result<(Tensor, Tensor, Tensor)> {
    let op = "linalg.svd";
    let (batch, m, n) = lapack_check(op, a, false)?;
    let k = m.min(n);
    let (uc, vr) = if full_matrices { (m, n) } else { (k, k) };
    let v = a.to_vec::<f64>()?;
    let (mut us, mut ss, mut vs) = (Vec::new(), Vec::new(), Vec::new());
    for b in 0..batch {
        let (u, s, vh) = svd_one(&v[b * m * n..(b + 1) * m * n], m, n, full_matrices);
        us.extend(u);
        ss.extend(s);
        vs.extend(vh);
    }
    let bs = batch_of(a);
    Ok((
        fortran(&us, &with_mat(&bs, m, uc), a.dtype())?,
        Tensor::from_f64s(&ss, &with_vec(&bs, k), a.dtype())?,
        fortran(&vs, &with_mat(&bs, vr, n), a.dtype())?,
    ))
}

/// Per-batch `atol`/`rtol` tolerances (upstream's defaults: `rtol = eps * max(m, n)` unless
/// only a positive `atol` is given).
fn tolerances(
    op: &'static str,
    atol: Option<&Tensor>,
    rtol: Option<&Tensor>,
    batch: &[usize],
    m: usize,
    n: usize,
    dtype: DType,
) -> Result<(Vec<f64>, Vec<f64>)> {
    let nb: usize = batch.iter().product();
    let get = |t: Option<&Tensor>| -> Result<Option<Vec<f64>>> {
        match t {
            None => Ok(None),
            Some(t) => {
                let target = broadcast_shapes(op, t.shape(), batch)?;
                if target.as_slice() != batch {
                    return Err(invalid(
                        op,
                        "atol/rtol must broadcast to the batch shape of the input",
                    ));
                }
                Ok(Some(t.broadcast_to(batch)?.to_vec::<f64>()?))
            }
        }
    };
    let a = get(atol)?;
    let r = get(rtol)?;
    let default = crate::ops::nn::finfo_eps(dtype) * m.max(n) as f64;
    let av = a.clone().unwrap_or_else(|| vec![0.0; nb]);
    let rv = match (r, &a) {
        (Some(r), _) => r,
        (None, Some(a)) => a
            .iter()
            .map(|&x| if x > 0.0 { 0.0 } else { default })
            .collect(),
        (None, None) => vec![default; nb],
    };
    Ok((av, rv))
}

/// `torch.linalg.matrix_rank(A, atol, rtol, hermitian)`.
pub fn matrix_rank(
    a: &Tensor,
    atol: Option<&Tensor>,
    rtol: Option<&Tensor>,
    hermitian: bool,
) -> Result<Tensor> {
    let op = "linalg.matrix_rank";
    let (batch, m, n) = lapack_check(op, a, hermitian)?;
    let bs = batch_of(a);
    let (av, rv) = tolerances(op, atol, rtol, &bs, m, n, a.dtype())?;
    let v = a.to_vec::<f64>()?;
    let mut out = Vec::with_capacity(batch);
    for b in 0..batch {
        let x = &v[b * m * n..(b + 1) * m * n];
        let s: Vec<f64> = if hermitian {
            let mut s = symmetrize(x, n, false);
            jacobi_eigh(&mut s, n).0.iter().map(|e| e.abs()).collect()
        } else {
            svd_one(x, m, n, false).1
        };
        // Round to the input dtype as upstream compares in it.
        let s: Vec<f64> = if a.dtype() == DType::F32 {
            s.iter().map(|&x| x as f32 as f64).collect()
        } else {
            s
        };
        let smax = s.iter().copied().fold(0.0f64, f64::max);
        let tol = av[b].max(rv[b] * smax);
        out.push(s.iter().filter(|&&x| x > tol).count() as i64);
    }
    Tensor::from_i64s(&out, &bs, DType::I64)
}

/// `torch.linalg.pinv(A, atol, rtol, hermitian)` through the SVD (eigh when hermitian).
pub fn pinv(
    a: &Tensor,
    atol: Option<&Tensor>,
    rtol: Option<&Tensor>,
    hermitian: bool,
) -> Result<Tensor> {
    let op = "linalg.pinv";
    let (batch, m, n) = lapack_check(op, a, hermitian)?;
    let bs = batch_of(a);
    let (av, rv) = tolerances(op, atol, rtol, &bs, m, n, a.dtype())?;
    let v = a.to_vec::<f64>()?;
    let mut out = Vec::with_capacity(batch * m * n);
    for b in 0..batch {
        let x = &v[b * m * n..(b + 1) * m * n];
        let mut p = vec![0.0; n * m];
        if hermitian {
            let mut s = symmetrize(x, n, false);
            let (w, u) = jacobi_eigh(&mut s, n);
            let smax = w.iter().map(|e| e.abs()).fold(0.0f64, f64::max);
            let tol = av[b].max(rv[b] * smax);
            for (j, &e) in w.iter().enumerate() {
                if e.abs() > tol {
                    for r in 0..n {
                        for c in 0..n {
                            p[r * n + c] += u[r * n + j] * u[c * n + j] / e;
                        }
                    }
                }
            }
        } else {
            let k = m.min(n);
            let (u, s, vh) = svd_one(x, m, n, false);
            let smax = s.first().copied().unwrap_or(0.0);
            let tol = av[b].max(rv[b] * smax);
            // pinv = V diag(1/s) U^T  (n x m).
            for (j, &sj) in s.iter().enumerate() {
                if sj > tol {
                    for r in 0..n {
                        let f = vh[j * n + r] / sj;
                        for c in 0..m {
                            p[r * m + c] += f * u[c * k + j];
                        }
                    }
                }
            }
        }
        out.extend(p);
    }
    Tensor::from_f64s(&out, &with_mat(&bs, n, m), a.dtype())
}

/// `torch.linalg.lstsq(A, B, rcond, driver)` -> (solution, residuals, rank, singular_values),
/// minimum-norm solutions through the SVD.
pub fn lstsq(
    a: &Tensor,
    b: &Tensor,
    rcond: Option<f64>,
    driver: Option<&str>,
) -> Result<Vec<Tensor>> {
    let op = "torch.linalg.lstsq";
    let (_, m, n) = lapack_check(op, a, false)?;
    float_check(op, b)?;
    same_dtype(op, a, b)?;
    let driver = driver.unwrap_or("gelsy");
    if !matches!(driver, "gels" | "gelsy" | "gelsd" | "gelss") {
        return Err(invalid(
            op,
            format!(
                "parameter `driver` should be one of (gels, gelsy, gelsd, gelss), but got {driver}"
            ),
        ));
    }
    if b.dim() < 1 || a.dim() < b.dim() || a.dim() - b.dim() > 1 {
        return Err(invalid(
            op,
            "input.dim() must be greater or equal to other.dim() and (input.dim() - other.dim()) <= 1",
        ));
    }
    let vector = a.dim() - b.dim() == 1;
    let bm = if vector { b.unsqueeze(-1)? } else { b.clone() };
    if bm.shape()[bm.dim() - 2] != m {
        return Err(invalid(
            op,
            format!(
                "input.size(-2) should match other.size(-2). Got {} != {}",
                m,
                bm.shape()[bm.dim() - 2]
            ),
        ));
    }
    let k = bm.shape()[bm.dim() - 1];
    let (batch, av, bv) = broadcast_pair(op, a, &bm)?;
    let nb: usize = batch.iter().product();
    let rcond = rcond.unwrap_or(crate::ops::nn::finfo_eps(a.dtype()) * m.max(n) as f64);
    let kk = m.min(n);
    let mut sol = Vec::with_capacity(nb * n * k);
    let mut ranks = Vec::with_capacity(nb);
    let mut svals = Vec::with_capacity(nb * kk);
    let mut resid = Vec::with_capacity(nb * k);
    let mut full_rank = true;
    for bi in 0..nb {
        let x = &av[bi * m * n..(bi + 1) * m * n];
        let rhs = &bv[bi * m * k..(bi + 1) * m * k];
        let (u, s, vh) = svd_one(x, m, n, false);
        let smax = s.first().copied().unwrap_or(0.0);
        let cut = if rcond < 0.0 { 0.0 } else { rcond * smax };
        let rank = s.iter().filter(|&&v| v > cut).count();
        if rank < n {
            full_rank = false;
        }
        // x = V diag(1/s) U^T b.
        let mut xs = vec![0.0; n * k];
        for (j, &sj) in s.iter().enumerate() {
            if sj > cut && sj > 0.0 {
                for c in 0..k {
                    let d: f64 = (0..m).map(|r| u[r * kk + j] * rhs[r * k + c]).sum::<f64>() / sj;
                    for r in 0..n {
                        xs[r * k + c] += vh[j * n + r] * d;
                    }
                }
            }
        }
        let ax = matmul(x, &xs, m, n, k);
        for c in 0..k {
            resid.push(
                (0..m)
                    .map(|r| (ax[r * k + c] - rhs[r * k + c]).powi(2))
                    .sum(),
            );
        }
        sol.extend(xs);
        ranks.push(rank as i64);
        svals.extend(s);
    }
    let dt = a.dtype();
    let mut solution = fortran_ld(&sol, n, k, m.max(n), &batch, dt)?;
    if vector {
        solution = solution.squeeze_dims(&[-1])?;
    }
    let empty = Tensor::from_f64s(&[], &[0], dt)?;
    let residuals = if m > n && driver != "gelsy" && full_rank {
        Tensor::from_f64s(&resid, &with_vec(&batch, k), dt)?
    } else {
        empty.clone()
    };
    let rank = if driver == "gels" {
        Tensor::from_i64s(&[], &[0], DType::I64)?
    } else {
        Tensor::from_i64s(&ranks, &batch, DType::I64)?
    };
    let sv = if matches!(driver, "gelsd" | "gelss") {
        Tensor::from_f64s(&svals, &with_vec(&batch, kk), dt)?
    } else {
        empty
    };
    Ok(vec![solution, residuals, rank, sv])
}

// ----- matrix exponential -----

/// `torch.linalg.matrix_exp(A)`: scaling and squaring with a Taylor series in f64.
pub fn matrix_exp(a: &Tensor) -> Result<Tensor> {
    let op = "linalg.matrix_exp";
    let (batch, n, _) = lapack_check(op, a, true)?;
    let v = a.to_vec::<f64>()?;
    let mut out = Vec::with_capacity(v.len());
    for b in 0..batch {
        let x = &v[b * n * n..(b + 1) * n * n];
        let norm = (0..n)
            .map(|c| (0..n).map(|r| x[r * n + c].abs()).sum::<f64>())
            .fold(0.0f64, f64::max);
        if !norm.is_finite() {
            out.extend(std::iter::repeat_n(f64::NAN, n * n));
            continue;
        }
        let mut s = 0i32;
        while norm / 2f64.powi(s) > 0.25 && s < 1100 {
            s += 1;
        }
        let scale = 2f64.powi(-s);
        let xs: Vec<f64> = x.iter().map(|&e| e * scale).collect();
        let mut sum = eye(n, n);
        let mut term = eye(n, n);
        for i in 1..40 {
            term = matmul(&term, &xs, n, n, n);
            for e in term.iter_mut() {
                *e /= i as f64;
            }
            let tn: f64 = term.iter().map(|e| e.abs()).sum();
            for (o, t) in sum.iter_mut().zip(&term) {
                *o += t;
            }
            if tn <= 1e-20 {
                break;
            }
        }
        for _ in 0..s {
            sum = matmul(&sum, &sum, n, n, n);
        }
        out.extend(sum);
    }
    Tensor::from_f64s(&out, a.shape(), a.dtype())
}

/// `torch.linalg.polar(A)` -> (U, H) with `A = U H` (`m >= n`), through the SVD.
pub fn polar(a: &Tensor) -> Result<(Tensor, Tensor)> {
    let op = "linalg.polar";
    let (batch, m, n) = lapack_check(op, a, false)?;
    if m < n {
        return Err(invalid(
            op,
            format!("linalg.polar: A must have shape (*, m, n) with m >= n, but got {m} by {n}"),
        ));
    }
    let v = a.to_vec::<f64>()?;
    let (mut us, mut hs) = (Vec::new(), Vec::new());
    for b in 0..batch {
        let (u, s, vh) = svd_one(&v[b * m * n..(b + 1) * m * n], m, n, false);
        us.extend(matmul(&u, &vh, m, n, n));
        // H = V diag(S) Vh.
        let mut sv = vh.clone();
        for (j, &sj) in s.iter().enumerate() {
            for c in 0..n {
                sv[j * n + c] *= sj;
            }
        }
        hs.extend(matmul(&transpose(&vh, n, n), &sv, n, n, n));
    }
    let bs = batch_of(a);
    Ok((
        Tensor::from_f64s(&us, &with_mat(&bs, m, n), a.dtype())?,
        Tensor::from_f64s(&hs, &with_mat(&bs, n, n), a.dtype())?,
    ))
}

/// `torch.linalg.matrix_sqrth(A)`: `V diag(sqrt(max(w, 0))) V^T` from the lower triangle.
pub fn matrix_sqrth(a: &Tensor) -> Result<Tensor> {
    let op = "linalg.matrix_sqrth";
    let (batch, n, _) = lapack_check(op, a, true)?;
    let v = a.to_vec::<f64>()?;
    let mut out = Vec::with_capacity(v.len());
    for b in 0..batch {
        let mut m = symmetrize(&v[b * n * n..(b + 1) * n * n], n, false);
        let (w, vecs) = jacobi_eigh(&mut m, n);
        let mut scaled = transpose(&vecs, n, n);
        for (j, &e) in w.iter().enumerate() {
            let r = if e > 0.0 {
                e.sqrt()
            } else if e.is_nan() {
                e
            } else {
                0.0
            };
            for c in 0..n {
                scaled[j * n + c] *= r;
            }
        }
        out.extend(matmul(&vecs, &scaled, n, n, n));
    }
    Tensor::from_f64s(&out, a.shape(), a.dtype())
}

/// `torch.ormqr(A, tau, C, left, transpose)`: multiplies `C` by the `Q` of geqrf's reflectors.
pub fn ormqr(a: &Tensor, tau: &Tensor, c: &Tensor, left: bool, trans: bool) -> Result<Tensor> {
    let op = "ormqr";
    let (batch, m, n) = lapack_check(op, a, false)?;
    same_dtype(op, a, tau)?;
    same_dtype(op, a, c)?;
    if c.dim() != a.dim() || c.shape()[..c.dim() - 2] != a.shape()[..a.dim() - 2] {
        return Err(invalid(
            op,
            "torch.ormqr: Expected batch dimensions of other to be equal to input.shape[:-2]",
        ));
    }
    if tau.dim() + 1 != a.dim() || tau.shape()[..tau.dim() - 1] != a.shape()[..a.dim() - 2] {
        return Err(invalid(
            op,
            "torch.ormqr: Expected batch dimensions of tau to be equal to input.shape[:-2]",
        ));
    }
    let k = tau.shape()[tau.dim() - 1];
    let (cr, cc) = (c.shape()[c.dim() - 2], c.shape()[c.dim() - 1]);
    let q_dim = if left { cr } else { cc };
    if q_dim != m || k > n {
        return Err(invalid(
            op,
            format!(
                "torch.ormqr: other.shape[{}] must be equal to input.shape[-2]",
                if left { -2 } else { -1 }
            ),
        ));
    }
    let av = a.to_vec::<f64>()?;
    let tv = tau.to_vec::<f64>()?;
    let cv = c.to_vec::<f64>()?;
    let mut out = Vec::with_capacity(cv.len());
    for b in 0..batch {
        let q = org2r(
            &av[b * m * n..(b + 1) * m * n],
            n,
            &tv[b * k..(b + 1) * k],
            m,
            m,
        );
        let q = if trans { transpose(&q, m, m) } else { q };
        let x = &cv[b * cr * cc..(b + 1) * cr * cc];
        out.extend(if left {
            matmul(&q, x, m, m, cc)
        } else {
            matmul(x, &q, cr, m, m)
        });
    }
    fortran(&out, c.shape(), c.dtype())
}

// ----- symmetric indefinite (Bunch-Kaufman) LDL^T -----

/// Index of the first largest magnitude among `vals` (LAPACK's `idamax`).
fn first_max(vals: impl Iterator<Item = f64>) -> (usize, f64) {
    let mut best = (0, f64::NAN);
    for (i, v) in vals.enumerate() {
        let a = v.abs();
        if i == 0 || a > best.1 {
            best = (i, a);
        }
    }
    best
}

/// LAPACK `sytf2` (lower) on a row-major `n x n` symmetric matrix: L (unit, below the
/// diagonal) and the 1x1/2x2 blocks of D in the lower triangle; 1-based pivots with LAPACK's
/// sign convention (negative for 2x2 blocks) and `info`.
fn sytf2_lower(a: &mut [f64], n: usize) -> (Vec<i64>, usize) {
    let alpha = (1.0 + 17f64.sqrt()) / 8.0;
    let at = |i: usize, j: usize| i * n + j;
    let mut ipiv = vec![0i64; n];
    let mut info = 0;
    let mut k = 0;
    while k < n {
        let mut kstep = 1;
        let absakk = a[at(k, k)].abs();
        let (imax, colmax) = if k + 1 < n {
            let (i, v) = first_max((k + 1..n).map(|i| a[at(i, k)]));
            (k + 1 + i, v)
        } else {
            (k, 0.0)
        };
        let kp;
        if absakk.max(colmax) == 0.0 || absakk.is_nan() {
            if info == 0 {
                info = k + 1;
            }
            kp = k;
        } else {
            if absakk >= alpha * colmax {
                kp = k;
            } else {
                let (jr, mut rowmax) = first_max((k..imax).map(|j| a[at(imax, j)]));
                let _ = jr;
                if imax + 1 < n {
                    let (_, v) = first_max((imax + 1..n).map(|j| a[at(j, imax)]));
                    rowmax = rowmax.max(v);
                }
                if absakk >= alpha * colmax * (colmax / rowmax) {
                    kp = k;
                } else if a[at(imax, imax)].abs() >= alpha * rowmax {
                    kp = imax;
                } else {
                    kp = imax;
                    kstep = 2;
                }
            }
            let kk = k + kstep - 1;
            if kp != kk {
                for i in kp + 1..n {
                    a.swap(at(i, kk), at(i, kp));
                }
                for j in kk + 1..kp {
                    a.swap(at(j, kk), at(kp, j));
                }
                a.swap(at(kk, kk), at(kp, kp));
                if kstep == 2 {
                    a.swap(at(k + 1, k), at(kp, k));
                }
            }
            if kstep == 1 {
                if k + 1 < n {
                    let d11 = 1.0 / a[at(k, k)];
                    for j in k + 1..n {
                        let xj = a[at(j, k)];
                        for i in j..n {
                            a[at(i, j)] -= d11 * a[at(i, k)] * xj;
                        }
                    }
                    for i in k + 1..n {
                        a[at(i, k)] *= d11;
                    }
                }
            } else if k + 2 < n {
                let d21 = a[at(k + 1, k)];
                let d11 = a[at(k + 1, k + 1)] / d21;
                let d22 = a[at(k, k)] / d21;
                let t = 1.0 / (d11 * d22 - 1.0);
                let d21 = t / d21;
                for j in k + 2..n {
                    let wk = d21 * (d11 * a[at(j, k)] - a[at(j, k + 1)]);
                    let wkp1 = d21 * (d22 * a[at(j, k + 1)] - a[at(j, k)]);
                    for i in j..n {
                        a[at(i, j)] -= a[at(i, k)] * wk + a[at(i, k + 1)] * wkp1;
                    }
                    a[at(j, k)] = wk;
                    a[at(j, k + 1)] = wkp1;
                }
            }
        }
        if kstep == 1 {
            ipiv[k] = kp as i64 + 1;
        } else {
            ipiv[k] = -(kp as i64 + 1);
            ipiv[k + 1] = -(kp as i64 + 1);
        }
        k += kstep;
    }
    (ipiv, info)
}

/// `torch.linalg.ldl_factor_ex(A)` -> (LD column-major, int32 pivots, int32 info); the lower
/// triangle of `A` is read.
pub fn ldl_factor_ex(a: &Tensor) -> Result<(Tensor, Tensor, Tensor)> {
    let op = "linalg.ldl_factor_ex";
    let (batch, n, _) = lapack_check(op, a, true)?;
    let v = a.to_vec::<f64>()?;
    let mut lds = Vec::with_capacity(v.len());
    let mut pivs = Vec::with_capacity(batch * n);
    let mut infos = Vec::with_capacity(batch);
    for b in 0..batch {
        let mut m = v[b * n * n..(b + 1) * n * n].to_vec();
        let (p, info) = sytf2_lower(&mut m, n);
        for i in 0..n {
            for j in i + 1..n {
                m[i * n + j] = 0.0;
            }
        }
        lds.extend(m);
        pivs.extend(p);
        infos.push(info as i64);
    }
    let bs = batch_of(a);
    Ok((
        fortran(&lds, a.shape(), a.dtype())?,
        Tensor::from_i64s(&pivs, &with_vec(&bs, n), DType::I32)?,
        Tensor::from_i64s(&infos, &bs, DType::I32)?,
    ))
}

/// `torch.linalg.ldl_solve(LD, pivots, B)` (LAPACK `sytrs`, lower).
pub fn ldl_solve(ld: &Tensor, pivots: &Tensor, b: &Tensor) -> Result<Tensor> {
    let op = "linalg.ldl_solve";
    let (_, n, _) = lapack_check(op, ld, true)?;
    same_dtype(op, ld, b)?;
    if b.dim() < 2 || b.shape()[b.dim() - 2] != n {
        return Err(invalid(
            op,
            "torch.linalg.ldl_solve: Incompatible shapes of A and B for the equation AX = B",
        ));
    }
    if pivots.dtype() != DType::I32 {
        return Err(invalid(
            op,
            "torch.linalg.ldl_solve: Expected pivots to be integers. Got Long",
        ));
    }
    if pivots.dim() + 1 != ld.dim() || pivots.shape()[pivots.dim() - 1] != n {
        return Err(invalid(
            op,
            "torch.linalg.ldl_solve: Expected LD.shape[:-1] and pivots.shape to be the same",
        ));
    }
    let k = b.shape()[b.dim() - 1];
    let (batch, av, bv) = broadcast_pair(op, ld, b)?;
    let pv = pivots.broadcast_to(&with_vec(&batch, n))?.to_vec::<i64>()?;
    let nb: usize = batch.iter().product();
    let mut out = Vec::with_capacity(nb * n * k);
    for bi in 0..nb {
        let a = &av[bi * n * n..(bi + 1) * n * n];
        let ip = &pv[bi * n..(bi + 1) * n];
        let mut x = bv[bi * n * k..(bi + 1) * n * k].to_vec();
        let at = |i: usize, j: usize| a[i * n + j];
        let swap_rows = |x: &mut [f64], r: usize, s: usize| {
            if r != s {
                for c in 0..k {
                    x.swap(r * k + c, s * k + c);
                }
            }
        };
        let to_idx = |p: i64| -> Result<usize> {
            let q = p.unsigned_abs() as usize;
            if q == 0 || q > n {
                return Err(invalid(op, "torch.linalg.ldl_solve: invalid pivots"));
            }
            Ok(q - 1)
        };
        // L D Y = B.
        let mut kk = 0;
        while kk < n {
            if ip[kk] > 0 {
                swap_rows(&mut x, kk, to_idx(ip[kk])?);
                for i in kk + 1..n {
                    let l = at(i, kk);
                    for c in 0..k {
                        x[i * k + c] -= l * x[kk * k + c];
                    }
                }
                let d = at(kk, kk);
                for c in 0..k {
                    x[kk * k + c] /= d;
                }
                kk += 1;
            } else {
                if kk + 1 >= n {
                    return Err(invalid(op, "torch.linalg.ldl_solve: invalid pivots"));
                }
                swap_rows(&mut x, kk + 1, to_idx(ip[kk])?);
                for i in kk + 2..n {
                    let (l0, l1) = (at(i, kk), at(i, kk + 1));
                    for c in 0..k {
                        x[i * k + c] -= l0 * x[kk * k + c] + l1 * x[(kk + 1) * k + c];
                    }
                }
                let akm1k = at(kk + 1, kk);
                let akm1 = at(kk, kk) / akm1k;
                let ak = at(kk + 1, kk + 1) / akm1k;
                let denom = akm1 * ak - 1.0;
                for c in 0..k {
                    let bkm1 = x[kk * k + c] / akm1k;
                    let bk = x[(kk + 1) * k + c] / akm1k;
                    x[kk * k + c] = (ak * bkm1 - bk) / denom;
                    x[(kk + 1) * k + c] = (akm1 * bk - bkm1) / denom;
                }
                kk += 2;
            }
        }
        // L^T X = Y, from the last block up.
        let mut kk = n;
        while kk > 0 {
            let j = kk - 1;
            if ip[j] > 0 {
                for c in 0..k {
                    let mut s = 0.0;
                    for i in j + 1..n {
                        s += at(i, j) * x[i * k + c];
                    }
                    x[j * k + c] -= s;
                }
                swap_rows(&mut x, j, to_idx(ip[j])?);
                kk -= 1;
            } else {
                if j == 0 {
                    return Err(invalid(op, "torch.linalg.ldl_solve: invalid pivots"));
                }
                for c in 0..k {
                    let (mut s0, mut s1) = (0.0, 0.0);
                    for i in j + 1..n {
                        s0 += at(i, j) * x[i * k + c];
                        s1 += at(i, j - 1) * x[i * k + c];
                    }
                    x[j * k + c] -= s0;
                    x[(j - 1) * k + c] -= s1;
                }
                swap_rows(&mut x, j, to_idx(ip[j])?);
                kk -= 2;
            }
        }
        out.extend(x);
    }
    fortran(&out, &with_mat(&batch, n, k), ld.dtype())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: &[f64], b: &[f64], tol: f64) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() <= tol)
    }

    const A: [f64; 12] = [
        2.0, -1.0, 0.5, 1.0, 3.0, 0.25, -4.0, 1.5, 2.0, 0.5, -0.75, 1.0,
    ];

    #[test]
    fn qr_reconstructs_with_lapack_signs() {
        let (m, n) = (4, 3);
        let mut x = A.to_vec();
        let tau = geqr2(&mut x, m, n);
        let q = org2r(&x, n, &tau, m, n);
        let mut r = vec![0.0; n * n];
        for i in 0..n {
            for j in i..n {
                r[i * n + j] = x[i * n + j];
            }
        }
        assert!(close(&matmul(&q, &r, m, n, n), &A, 1e-12));
        // dlarfg: beta = -sign(alpha) * norm, so R[0,0] < 0 for a positive A[0,0].
        assert!(r[0] < 0.0);
        // A 1x1 trailing block is not reflected (tau = 0): a square matrix's last R entry
        // keeps its sign.
        let mut s = vec![1.0, 2.0, 3.0, -4.0];
        let t = geqr2(&mut s, 2, 2);
        assert_eq!(t[1], 0.0);
    }

    #[test]
    fn lu_of_wide_and_tall_matrices_reconstructs() {
        for (m, n) in [(3, 4), (4, 3)] {
            let mut x = A.to_vec();
            let (piv, info) = getrf(&mut x, m, n);
            assert_eq!(info, 0);
            let k = m.min(n);
            let mut l = vec![0.0; m * k];
            let mut u = vec![0.0; k * n];
            for i in 0..m {
                for j in 0..k {
                    l[i * k + j] = if i == j {
                        1.0
                    } else if i > j {
                        x[i * n + j]
                    } else {
                        0.0
                    };
                }
            }
            for i in 0..k {
                for j in i..n {
                    u[i * n + j] = x[i * n + j];
                }
            }
            let lu = matmul(&l, &u, m, k, n);
            let piv1: Vec<i64> = piv.iter().map(|&p| p as i64 + 1).collect();
            let perm = perm_of(&piv1, m, "test").unwrap_or_default();
            let mut pa = vec![0.0; m * n];
            for (i, &src) in perm.iter().enumerate() {
                pa[i * n..(i + 1) * n].copy_from_slice(&A[src * n..(src + 1) * n]);
            }
            assert!(close(&lu, &pa, 1e-12));
        }
    }

    #[test]
    fn svd_and_eigh_reconstruct() {
        let (m, n) = (4, 3);
        let (u, s, vh) = svd_one(&A, m, n, false);
        assert!(s.windows(2).all(|w| w[0] >= w[1]));
        let mut us = u.clone();
        for i in 0..m {
            for j in 0..n {
                us[i * n + j] *= s[j];
            }
        }
        assert!(close(&matmul(&us, &vh, m, n, n), &A, 1e-12));
        let sym = [4.0, 1.0, 0.5, 1.0, 3.0, 0.25, 0.5, 0.25, 2.0];
        let (w, v) = jacobi_eigh(&mut sym.to_vec(), 3);
        assert!(w.windows(2).all(|x| x[0] <= x[1]));
        let mut vw = v.clone();
        for i in 0..3 {
            for j in 0..3 {
                vw[i * 3 + j] *= w[j];
            }
        }
        assert!(close(
            &matmul(&vw, &transpose(&v, 3, 3), 3, 3, 3),
            &sym,
            1e-12
        ));
    }

    #[test]
    fn ldl_factor_solves() {
        // Indefinite: forces 2x2 pivots.
        let n = 3;
        let a = [0.0, 1.0, 2.0, 1.0, 0.0, 3.0, 2.0, 3.0, 0.0];
        let mut f = a.to_vec();
        let (piv, info) = sytf2_lower(&mut f, n);
        assert_eq!(info, 0);
        let ld = Tensor::from_f64s(&f, &[n, n], DType::F64).unwrap_or_else(|_| unreachable!());
        let p = Tensor::from_i64s(&piv, &[n], DType::I32).unwrap_or_else(|_| unreachable!());
        let b = Tensor::from_f64s(&[1.0, 2.0, 3.0], &[n, 1], DType::F64)
            .unwrap_or_else(|_| unreachable!());
        let x = ldl_solve(&ld, &p, &b)
            .and_then(|x| x.to_vec::<f64>())
            .unwrap_or_default();
        let ax = matmul(&a, &x, n, n, 1);
        assert!(close(&ax, &[1.0, 2.0, 3.0], 1e-12));
    }
}
