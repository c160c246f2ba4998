//! Matrix products: mm, bmm, matmul, dot, mv, linear, addmm/addmv/addr/baddbmm/addbmm,
//! einsum, tensordot, kron, outer, inner, cross, cdist/pdist/dist, matrix_power, trace; and the
//! LAPACK-style decompositions and solvers (det, inv, solve, cholesky, qr/geqrf, lu, ldl, svd,
//! eigh, pinv, lstsq, matrix_exp, ...) on `torchnative_core::ops::linalg_decomp`.

#![allow(unused_imports)]

use super::*;
use torchnative_core::ops::linalg as la;
use torchnative_core::ops::linalg_decomp as ld;
use torchnative_core::AddmmScale;

type R = torchnative_core::Result<Tensor>;

/// Registers a binary product's functional and out= forms (`out` is argument 2).
macro_rules! product {
    ($t:ident, $name:literal, $f:expr) => {{
        fn f(a: &Tensor, b: &Tensor) -> R {
            let g: fn(&Tensor, &Tensor) -> R = $f;
            g(a, b)
        }
        $t.insert(concat!("aten::", $name), |c| {
            ok(f(&c.tensor(0)?, &c.tensor(1)?))
        });
        $t.insert(concat!("aten::", $name, ".out"), |c| {
            let r = f(&c.tensor(0)?, &c.tensor(1)?).map_err(core_err)?;
            c.write_into(2, r)
        });
    }};
}

/// Registers `beta * self + alpha * f(a, b)` with its in-place and out= forms.
macro_rules! scaled {
    ($t:ident, $name:literal, $f:expr) => {{
        fn f(c: &Ctx<'_, '_>) -> PyResult<Tensor> {
            let g: fn(&Tensor, &Tensor) -> R = $f;
            let p = g(&c.tensor(1)?, &c.tensor(2)?).map_err(core_err)?;
            let scale = AddmmScale {
                beta: c.scalar(3)?,
                alpha: c.scalar(4)?,
            };
            add_scaled(&c.tensor(0)?, &p, scale).map_err(core_err)
        }
        $t.insert(concat!("aten::", $name), |c| Ok(Out::Tensor(f(c)?)));
        $t.insert(concat!("aten::", $name, "_"), |c| {
            let r = f(c)?;
            c.write_into(0, r)
        });
        $t.insert(concat!("aten::", $name, ".out"), |c| {
            let r = f(c)?;
            c.write_into(5, r)
        });
    }};
}

/// Integer products take beta/alpha truncated to integers; bool products as bools
/// (upstream casts the scalars to the result dtype).
fn cast_scale(p: &Tensor, s: AddmmScale) -> AddmmScale {
    let cast = |v: Scalar| match p.dtype() {
        DType::Bool => Scalar::Bool(v.to_f64() != 0.0),
        d if !d.is_float() => Scalar::Int(v.to_f64() as i64),
        _ => v,
    };
    AddmmScale {
        beta: cast(s.beta),
        alpha: cast(s.alpha),
    }
}

/// `beta * input + alpha * product`, as logical and/or for bool.
fn add_scaled(input: &Tensor, p: &Tensor, s: AddmmScale) -> R {
    let s = cast_scale(p, s);
    if p.dtype() == DType::Bool && input.dtype() == DType::Bool {
        let (beta, alpha) = (s.beta.to_f64() != 0.0, s.alpha.to_f64() != 0.0);
        let i = input.to_dtype(DType::I64)?.mul(Scalar::Int(beta as i64))?;
        let q = p.to_dtype(DType::I64)?.mul(Scalar::Int(alpha as i64))?;
        return i.add(&q)?.ne(false);
    }
    la::add_scaled(input, p, s)
}

fn addbmm_product(a: &Tensor, b: &Tensor) -> R {
    let p = a.bmm(b)?;
    p.sum_dtype(&[0], false, Some(p.dtype()))
}

fn inner(a: &Tensor, b: &Tensor) -> R {
    if a.dim() == 0 || b.dim() == 0 {
        return a.mul(b);
    }
    if a.shape()[a.dim() - 1] != b.shape()[b.dim() - 1] {
        return Err(torchnative_core::Error::InvalidArgument {
            op: "inner",
            reason: format!(
                "inner() the last dimension must match on both input tensors but got shapes {:?} and {:?}",
                a.shape(),
                b.shape()
            ),
        });
    }
    la::tensordot(a, b, &[-1], &[-1])
}

fn vecdot(c: &Ctx<'_, '_>) -> PyResult<Tensor> {
    let (x, y, d) = (c.tensor(0)?, c.tensor(1)?, c.int(2)?);
    for t in [&x, &y] {
        if !t.dtype().is_float() {
            return Err(core_err(torchnative_core::Error::UnsupportedDType {
                op: "linalg.vecdot",
                dtype: t.dtype(),
            }));
        }
    }
    let p = x.mul(&y).map_err(core_err)?;
    p.sum_dtype(&[d], false, Some(p.dtype())).map_err(core_err)
}

fn multi_dot(ts: &[Tensor], op: &'static str) -> R {
    let n = ts.len();
    if n == 0 {
        return Err(torchnative_core::Error::InvalidArgument {
            op,
            reason: "expected at least 2 tensors but got 0".into(),
        });
    }
    if n == 1 {
        return ts[0].deep_clone();
    }
    let first_1d = ts[0].dim() == 1;
    let last_1d = ts[n - 1].dim() == 1;
    let mut acc = if first_1d {
        ts[0].unsqueeze(0)?
    } else {
        ts[0].clone()
    };
    for (i, t) in ts.iter().enumerate().skip(1) {
        let t = if i == n - 1 && last_1d {
            t.unsqueeze(1)?
        } else {
            t.clone()
        };
        if acc.dim() != 2 || t.dim() != 2 {
            return Err(torchnative_core::Error::InvalidArgument {
                op,
                reason: format!("tensor {i} must be 2D but got {}D", t.dim()),
            });
        }
        acc = acc.mm(&t)?;
    }
    match (first_1d, last_1d) {
        (true, true) => acc.reshape(&[]),
        (true, false) => acc.squeeze_dims(&[0]),
        (false, true) => acc.squeeze_dims(&[1]),
        _ => Ok(acc),
    }
}

fn trace(x: &Tensor) -> R {
    if x.dtype() == DType::Bool {
        return Err(torchnative_core::Error::UnsupportedDType {
            op: "trace",
            dtype: DType::Bool,
        });
    }
    if x.dim() != 2 {
        return Err(torchnative_core::Error::InvalidArgument {
            op: "trace",
            reason: format!(
                "trace: expected a matrix, but got tensor with dim {}",
                x.dim()
            ),
        });
    }
    x.diagonal(0, 0, 1)?.sum_dtype(&[0], false, None)
}

/// `torch.cross(a, b, dim=None)`: the first dim of size 3 when `dim` is None.
fn cross_default(a: &Tensor, b: &Tensor, dim: Option<i64>) -> R {
    let d = match dim {
        Some(d) => d,
        None => {
            let shape = torchnative_core::layout::broadcast_shapes("cross", a.shape(), b.shape())?;
            shape
                .iter()
                .position(|&s| s == 3)
                .map(|p| p as i64)
                .ok_or_else(|| torchnative_core::Error::InvalidArgument {
                    op: "cross",
                    reason: "no dimension of size 3 in input".into(),
                })?
        }
    };
    la::cross(a, b, d)
}

fn float32_64(x: &Tensor) -> PyResult<()> {
    if !matches!(x.dtype(), DType::F32 | DType::F64) {
        return Err(PyRuntimeError::new_err(
            "This function doesn't handle types other than float and double",
        ));
    }
    Ok(())
}

/// `torch.linalg.vander(x, N)`: powers `x^0 .. x^(N-1)` along a new last dim (a cumulative
/// product, so integer inputs give int64 as upstream's).
fn vander(x: &Tensor, n: Option<i64>) -> R {
    let op = "linalg.vander";
    if x.dtype() == DType::Bool {
        return Err(torchnative_core::Error::Unsupported {
            op,
            reason:
                "linalg.vander supports floating point, complex, and integer tensors, but got Bool"
                    .into(),
        });
    }
    let n = n.unwrap_or(if x.dim() == 0 {
        1
    } else {
        x.shape()[x.dim() - 1] as i64
    });
    // A 0-dim input counts as one element.
    let x = if x.dim() == 0 {
        x.reshape(&[1])?
    } else {
        x.clone()
    };
    if n <= 1 {
        return Err(torchnative_core::Error::InvalidArgument {
            op,
            reason: "N must be greater than 1.".into(),
        });
    }
    let col = x.unsqueeze(-1)?;
    let mut shape: Vec<i64> = col.shape().iter().map(|&s| s as i64).collect();
    let last = shape.len() - 1;
    shape[last] = n - 1;
    let ones = torchnative_core::ops::creation::ones_like(&col)?;
    let rest = col.expand(&shape)?;
    let cat = torchnative_core::ops::index::cat(&[&ones, &rest], -1)?;
    let dtype = if x.dtype().is_float() {
        x.dtype()
    } else {
        DType::I64
    };
    cat.cumprod_dtype(-1, Some(dtype))
}

fn prod(s: &[usize]) -> i64 {
    s.iter().product::<usize>() as i64
}

/// `torch.linalg.tensorinv(A, ind)`: the inverse of A viewed as a square matrix.
fn tensorinv(a: &Tensor, ind: i64) -> R {
    let op = "linalg.tensorinv";
    if ind <= 0 || ind as usize > a.dim() {
        return Err(torchnative_core::Error::InvalidArgument {
            op,
            reason: format!("Expected a strictly positive integer for 'ind', but got {ind}"),
        });
    }
    let (front, back) = a.shape().split_at(ind as usize);
    if prod(front) != prod(back) {
        return Err(torchnative_core::Error::InvalidArgument {
            op,
            reason: format!("Expected self to satisfy the requirement prod(self.shape[ind:]) == prod(self.shape[:ind]), but got {} != {}", prod(back), prod(front)),
        });
    }
    let mut shape: Vec<i64> = back.iter().map(|&s| s as i64).collect();
    shape.extend(front.iter().map(|&s| s as i64));
    let m = a.reshape(&[prod(front), prod(back)])?;
    la::inv(&m)?.reshape(&shape)
}

/// `torch.linalg.tensorsolve(A, B, dims)`: solves `tensordot(A, X, X.ndim) = B`.
fn tensorsolve(a: &Tensor, b: &Tensor, dims: Option<Vec<i64>>) -> R {
    let op = "linalg.tensorsolve";
    let a = match dims {
        Some(ds) if !ds.is_empty() => {
            let nd = a.dim() as i64;
            let wrapped: Vec<i64> = ds.iter().map(|&d| if d < 0 { d + nd } else { d }).collect();
            let mut order: Vec<i64> = (0..nd).filter(|d| !wrapped.contains(d)).collect();
            order.extend(wrapped);
            a.permute(&order)?
        }
        _ => a.clone(),
    };
    if a.dim() < b.dim() {
        return Err(torchnative_core::Error::InvalidArgument {
            op,
            reason: "Expected self to have at least as many dimensions as other".into(),
        });
    }
    let result: Vec<i64> = a.shape()[b.dim()..].iter().map(|&s| s as i64).collect();
    let rows = prod(b.shape());
    let cols = prod(&a.shape()[b.dim()..]);
    if rows != cols {
        return Err(torchnative_core::Error::InvalidArgument {
            op,
            reason: format!("Expected self to satisfy the requirement prod(self.shape[other.ndim:]) == prod(self.shape[:other.ndim]), but got {cols} != {rows}"),
        });
    }
    let m = a.reshape(&[rows, cols])?;
    la::solve(&m, &b.reshape(&[rows])?)?.reshape(&result)
}

/// `torch.linalg.cond(A, p)`: `smax / smin` for p = 2 (`smin / smax` for -2), otherwise
/// `norm(A, p) * norm(inv(A), p)` (inf where A is singular).
fn cond(x: &Tensor, ord: &str) -> R {
    let op = "linalg.cond";
    match ord {
        "2" | "-2" => {
            let sv = la::svdvals(x)?;
            let last = sv.dim() as i64 - 1;
            if sv.shape()[sv.dim() - 1] == 0 {
                return torchnative_core::ops::creation::zeros(
                    &sv.shape()[..sv.dim() - 1],
                    x.dtype(),
                );
            }
            let (hi, lo) = (sv.amax(&[last], false)?, sv.amin(&[last], false)?);
            if ord == "2" {
                hi.div(&lo)
            } else {
                lo.div(&hi)
            }
        }
        "fro" | "nuc" | "1" | "-1" | "inf" | "-inf" => {
            if x.dim() < 2 || x.shape()[x.dim() - 2] != x.shape()[x.dim() - 1] {
                return Err(torchnative_core::Error::InvalidArgument {
                    op,
                    reason: "A must be batches of square matrices, but they are not square".into(),
                });
            }
            if x.numel() == 0 {
                return torchnative_core::ops::creation::zeros(
                    &x.shape()[..x.dim() - 2],
                    x.dtype(),
                );
            }
            let (inv, info) = ld::inv_ex(x)?;
            let a = la::matrix_norm(x, ord, &[-2, -1], false, None)?;
            let b = la::matrix_norm(&inv, ord, &[-2, -1], false, None)?;
            let r = a.mul(&b)?;
            let iv = info.to_vec::<i64>()?;
            if iv.iter().all(|&i| i == 0) {
                return Ok(r);
            }
            let rv = r.to_vec::<f64>()?;
            let out: Vec<f64> = rv
                .iter()
                .zip(&iv)
                .map(|(&v, &i)| if i > 0 { f64::INFINITY } else { v })
                .collect();
            Tensor::from_f64s(&out, r.shape(), r.dtype())
        }
        _ => Err(torchnative_core::Error::InvalidArgument {
            op,
            reason: format!("linalg.cond got an invalid norm type: {ord}"),
        }),
    }
}

/// A 0-dim float64 tensor (tolerances given as Python floats).
fn f64_tensor(v: f64) -> Tensor {
    Tensor::scalar_tensor(Scalar::Float(v), DType::F64)
}

/// `float? x` as an optional 0-dim float64 tensor.
fn opt_f64_tensor(c: &Ctx<'_, '_>, i: usize) -> PyResult<Option<Tensor>> {
    match &c.values[i] {
        Value::None => Ok(None),
        _ => Ok(Some(f64_tensor(c.float(i)?))),
    }
}

/// Upstream's CPU LU always pivots.
fn no_pivot_cpu(pivot: bool, op: &str) -> PyResult<()> {
    if pivot {
        return Ok(());
    }
    Err(PyRuntimeError::new_err(format!(
        "{op}: LU without pivoting is not implemented on the CPU"
    )))
}

/// Error for a singular D found by sytrf's `info` (check_errors=True).
fn ldl_error(op: &str, info: &Tensor) -> PyResult<()> {
    let iv = info.to_vec::<i64>().map_err(core_err)?;
    if let Some(i) = iv.iter().find(|&&i| i > 0) {
        return Err(PyRuntimeError::new_err(format!(
            "{op}: The factorization could not be completed because the input is singular (D[{i},{i}] is zero)."
        )));
    }
    Ok(())
}

/// Error for a singular factor found by getrf's `info` (check_errors=True).
fn lu_error(op: &'static str, info: &Tensor) -> PyResult<()> {
    torchnative_core::ops::linalg_decomp::info_error(op, info, |i| {
        format!(
            "U[{i},{i}] is zero and using it on lu_solve would result in a division by zero. If you still want to perform the factorization, consider calling linalg.lu(A, pivot) or linalg.lu_factor_ex(A, pivot)"
        )
    })
    .map_err(core_err)
}

/// `torch._grouped_mm(a, b, offs)`, the grouped matmul of mixture-of-experts layers: a 2-D `a`
/// `[T, K]` with a 3-D `b` `[G, K, N]` multiplies rows `offs[g-1]..offs[g]` by `b[g]`
/// (rows past the last offset are zeros); 3-D with 3-D is a batched matmul; a 2-D `b` with
/// a 2-D `a` groups along K into a `[G, M, N]` result. Offsets are int32 cumulative ends.
fn grouped_mm(c: &Ctx<'_, '_>) -> PyResult<Tensor> {
    let op = "_grouped_mm";
    let (a, b, offs) = (c.tensor(0)?, c.tensor(1)?, c.opt_tensor(2)?);
    if c.opt_tensor(3)?.is_some() {
        return Err(core_err(torchnative_core::Error::Unsupported {
            op: "_grouped_mm with bias",
            reason: "upstream's CPU kernel takes no bias either".into(),
        }));
    }
    for (name, x) in [("mat_a", &a), ("mat_b", &b)] {
        if !matches!(x.dtype(), DType::F32 | DType::BF16 | DType::F16) {
            return Err(PyRuntimeError::new_err(format!(
                "Expected {name} to be Float32, BFloat16 or Float16 matrix, got {}",
                scalar_type_name(x.dtype())
            )));
        }
    }
    let out_dtype = c.opt_dtype(4)?.unwrap_or(a.dtype());
    let two_d = a.dim() == 2 || b.dim() == 2;
    if two_d != offs.is_some() {
        return Err(PyRuntimeError::new_err(
            "Have to provide offsets if there is a 2d matrix, or no offset if both matrices are 3d",
        ));
    }
    let result = match (a.dim(), b.dim(), offs) {
        (3, 3, None) => a.matmul(&b).map_err(core_err)?,
        (2, d, Some(offs)) if d == 2 || d == 3 => {
            if offs.dtype() != DType::I32 {
                return Err(PyRuntimeError::new_err("Offsets have to be int32"));
            }
            let ends = offs.to_vec::<i64>().map_err(core_err)?;
            let mut parts = Vec::with_capacity(ends.len());
            let mut start = 0i64;
            let along_k = d == 2;
            let limit = if along_k { a.shape()[1] } else { a.shape()[0] } as i64;
            for (g, &end) in ends.iter().enumerate() {
                if end < start || end > limit {
                    return Err(PyRuntimeError::new_err(format!(
                        "{op}: offsets must be non-decreasing and at most {limit}, got {ends:?}"
                    )));
                }
                let len = (end - start) as usize;
                let part = if along_k {
                    a.narrow(1, start, len)
                        .and_then(|x| x.matmul(&b.narrow(0, start, len)?))
                } else {
                    a.narrow(0, start, len)
                        .and_then(|x| x.matmul(&b.select(0, g as i64)?))
                }
                .map_err(core_err)?;
                parts.push(part);
                start = end;
            }
            if along_k {
                let refs: Vec<&Tensor> = parts.iter().collect();
                torchnative_core::stack(&refs, 0).map_err(core_err)?
            } else {
                let n = b.shape()[2];
                let rest = a.shape()[0] - start as usize;
                parts.push(Tensor::empty_on(&[rest, n], a.dtype(), a.device()).map_err(core_err)?);
                let refs: Vec<&Tensor> = parts.iter().collect();
                torchnative_core::cat(&refs, 0).map_err(core_err)?
            }
        }
        (da, db, _) => {
            return Err(core_err(torchnative_core::Error::Unsupported {
                op: "_grouped_mm",
                reason: format!("a {da}-D by {db}-D grouped matmul"),
            }))
        }
    };
    result.to_dtype(out_dtype).map_err(core_err)
}

pub(crate) fn register(t: &mut Table) {
    t.insert("aten::_grouped_mm", |c| ok(Ok(grouped_mm(c)?)));
    // ----- products -----
    product!(t, "mm", |a, b| a.mm(b));
    product!(t, "bmm", |a, b| a.bmm(b));
    product!(t, "matmul", |a, b| a.matmul(b));
    product!(t, "linalg_matmul", |a, b| a.matmul(b));
    product!(t, "dot", la::dot);
    product!(t, "vdot", la::dot);
    product!(t, "mv", la::mv);
    product!(t, "outer", la::outer);
    product!(t, "ger", la::outer);
    product!(t, "kron", la::kron);
    product!(t, "inner", inner);
    t.insert("aten::linear", |c| {
        ok(torchnative_core::linear(
            &c.tensor(0)?,
            &c.tensor(1)?,
            c.opt_tensor(2)?.as_ref(),
        ))
    });
    t.insert("aten::linear.out", |c| {
        let r = torchnative_core::linear(&c.tensor(0)?, &c.tensor(1)?, c.opt_tensor(2)?.as_ref())
            .map_err(core_err)?;
        c.write_into(3, r)
    });

    // ----- beta * self + alpha * product -----
    scaled!(t, "addmm", |a, b| a.mm(b));
    scaled!(t, "addmv", la::mv);
    scaled!(t, "addr", la::outer);
    scaled!(t, "baddbmm", |a, b| a.bmm(b));
    scaled!(t, "addbmm", addbmm_product);

    // ----- einsum / tensordot / multi_dot -----
    t.insert("aten::einsum", |c| {
        let ts = c.tensors(1)?;
        let refs: Vec<&Tensor> = ts.iter().collect();
        ok(la::einsum(&c.str(0)?, &refs))
    });
    t.insert("aten::tensordot", |c| {
        ok(la::tensordot(
            &c.tensor(0)?,
            &c.tensor(1)?,
            &c.ints(2)?,
            &c.ints(3)?,
        ))
    });
    t.insert("aten::tensordot.out", |c| {
        let r = la::tensordot(&c.tensor(0)?, &c.tensor(1)?, &c.ints(2)?, &c.ints(3)?)
            .map_err(core_err)?;
        c.write_into(4, r)
    });
    t.insert("aten::linalg_multi_dot", |c| {
        ok(multi_dot(&c.tensors(0)?, "linalg.multi_dot"))
    });
    t.insert("aten::linalg_multi_dot.out", |c| {
        let r = multi_dot(&c.tensors(0)?, "linalg.multi_dot").map_err(core_err)?;
        c.write_into(1, r)
    });
    t.insert("aten::chain_matmul", |c| {
        ok(multi_dot(&c.tensors(0)?, "chain_matmul"))
    });
    t.insert("aten::chain_matmul.out", |c| {
        let r = multi_dot(&c.tensors(0)?, "chain_matmul").map_err(core_err)?;
        c.write_into(1, r)
    });
    t.insert("aten::linalg_vecdot", |c| Ok(Out::Tensor(vecdot(c)?)));
    t.insert("aten::linalg_vecdot.out", |c| {
        let r = vecdot(c)?;
        c.write_into(3, r)
    });
    t.insert("aten::trace", |c| ok(trace(&c.tensor(0)?)));

    // ----- cross -----
    t.insert("aten::linalg_cross", |c| {
        ok(la::cross(&c.tensor(0)?, &c.tensor(1)?, c.int(2)?))
    });
    t.insert("aten::linalg_cross.out", |c| {
        let r = la::cross(&c.tensor(0)?, &c.tensor(1)?, c.int(2)?).map_err(core_err)?;
        c.write_into(3, r)
    });
    t.insert("aten::cross", |c| {
        ok(cross_default(&c.tensor(0)?, &c.tensor(1)?, c.opt_int(2)?))
    });
    t.insert("aten::cross.out", |c| {
        let r = cross_default(&c.tensor(0)?, &c.tensor(1)?, c.opt_int(2)?).map_err(core_err)?;
        c.write_into(3, r)
    });

    // ----- distances -----
    t.insert("aten::cdist", |c| {
        ok(la::cdist(&c.tensor(0)?, &c.tensor(1)?, c.float(2)?))
    });
    t.insert("aten::_cdist_forward", |c| {
        ok(la::cdist(&c.tensor(0)?, &c.tensor(1)?, c.float(2)?))
    });
    t.insert("aten::_euclidean_dist", |c| {
        ok(la::cdist(&c.tensor(0)?, &c.tensor(1)?, 2.0))
    });
    t.insert("aten::pdist", |c| ok(la::pdist(&c.tensor(0)?, c.float(1)?)));
    t.insert("aten::_pdist_forward", |c| {
        ok(la::pdist(&c.tensor(0)?, c.float(1)?))
    });
    t.insert("aten::dist", |c| {
        let (a, b) = (c.tensor(0)?, c.tensor(1)?);
        if a.dtype() == DType::Bool || b.dtype() == DType::Bool {
            return Err(core_err(torchnative_core::Error::UnsupportedDType {
                op: "dist",
                dtype: DType::Bool,
            }));
        }
        let d = a.sub(&b).map_err(core_err)?;
        ok(d.vector_norm(c.scalar(2)?.to_f64(), &[], false, None))
    });

    // ----- decompositions -----
    // The underscore operators that upstream's linalg bodies call and derivatives.yaml
    // differentiates: they also hand back the LU factorization (of A itself, with its pivots)
    // that the backward formulas solve with. Upstream may factor A^T instead; these outputs are
    // auxiliary (output_differentiability false) and only our own formulas read them.
    // `_trilinear(i1, i2, i3, expand1, expand2, expand3, sumdim)`: each input unsqueezed at its
    // expand dims, the three multiplied (broadcasting), then summed over sumdim (bilinear's
    // kernel and, with the roles swapped, its own backward)
    t.insert("aten::_trilinear", |c| {
        let mut ins = [c.tensor(0)?, c.tensor(1)?, c.tensor(2)?];
        for (k, t) in ins.iter_mut().enumerate() {
            let mut dims = c.ints(3 + k)?;
            dims.sort_unstable();
            for d in dims {
                *t = t.unsqueeze(d).map_err(core_err)?;
            }
        }
        let prod = ins[0]
            .mul(&ins[1])
            .and_then(|p| p.mul(&ins[2]))
            .map_err(core_err)?;
        let sumdim = c.ints(6)?;
        if sumdim.is_empty() {
            return Ok(Out::Tensor(prod));
        }
        ok(prod.sum(&sumdim, false))
    });
    t.insert("aten::_linalg_det", |c| {
        let a = c.tensor(0)?;
        let det = la::det(&a).map_err(core_err)?;
        let (lu, p, _) = ld::lu_factor_ex(&a, "linalg.det").map_err(core_err)?;
        Ok(Out::Tensors(vec![det, lu, p]))
    });
    t.insert("aten::_linalg_slogdet", |c| {
        let a = c.tensor(0)?;
        let (s, l) = la::slogdet(&a).map_err(core_err)?;
        let (lu, p, _) = ld::lu_factor_ex(&a, "linalg.slogdet").map_err(core_err)?;
        Ok(Out::Tensors(vec![s, l, lu, p]))
    });
    t.insert("aten::_linalg_solve_ex", |c| {
        let (a, b) = (c.tensor(0)?, c.tensor(1)?);
        let (r, info) = ld::solve_ex(&a, &b, c.bool(2)?).map_err(core_err)?;
        if c.bool(3)? {
            la::solve_error("linalg.solve_ex", &info).map_err(core_err)?;
        }
        let (lu, p, _) = ld::lu_factor_ex(&a, "linalg.solve").map_err(core_err)?;
        Ok(Out::Tensors(vec![r, lu, p, info]))
    });
    t.insert("aten::_linalg_svd", |c| {
        let (u, s, vh) = ld::svd(&c.tensor(0)?, c.bool(1)?).map_err(core_err)?;
        if c.bool(2)? {
            return Ok(Out::Tensors(vec![u, s, vh]));
        }
        // without compute_uv upstream returns empty U and Vh
        let empty = || Tensor::empty_on(&[0], u.dtype(), Device::Cpu).map_err(core_err);
        Ok(Out::Tensors(vec![empty()?, s, empty()?]))
    });
    t.insert("aten::_linalg_eigh", |c| {
        let (w, v) = ld::eigh(&c.tensor(0)?, c.str(1)? == "U").map_err(core_err)?;
        if c.bool(2)? {
            return Ok(Out::Tensors(vec![w, v]));
        }
        let empty = Tensor::empty_on(&[0], v.dtype(), Device::Cpu).map_err(core_err)?;
        Ok(Out::Tensors(vec![w, empty]))
    });
    t.insert("aten::linalg_det", |c| ok(la::det(&c.tensor(0)?)));
    t.insert("aten::det", |c| ok(la::det(&c.tensor(0)?)));
    t.insert("aten::logdet", |c| ok(la::logdet(&c.tensor(0)?)));
    t.insert("aten::linalg_slogdet", |c| {
        let (s, l) = la::slogdet(&c.tensor(0)?).map_err(core_err)?;
        Ok(Out::Tensors(vec![s, l]))
    });
    t.insert("aten::slogdet", |c| {
        let (s, l) = la::slogdet(&c.tensor(0)?).map_err(core_err)?;
        Ok(Out::Tensors(vec![s, l]))
    });
    t.insert("aten::linalg_inv", |c| ok(la::inv(&c.tensor(0)?)));
    t.insert("aten::inverse", |c| ok(la::inv(&c.tensor(0)?)));
    t.insert("aten::linalg_solve", |c| {
        let (a, b) = (c.tensor(0)?, c.tensor(1)?);
        let (r, info) = ld::solve_ex(&a, &b, c.bool(2)?).map_err(core_err)?;
        la::solve_error("linalg.solve", &info).map_err(core_err)?;
        Ok(Out::Tensor(r))
    });
    t.insert("aten::linalg_solve_ex", |c| {
        let (a, b) = (c.tensor(0)?, c.tensor(1)?);
        let (r, info) = ld::solve_ex(&a, &b, c.bool(2)?).map_err(core_err)?;
        if c.bool(3)? {
            la::solve_error("linalg.solve_ex", &info).map_err(core_err)?;
        }
        Ok(Out::Tensors(vec![r, info]))
    });
    t.insert("aten::linalg_inv_ex", |c| {
        let (r, info) = ld::inv_ex(&c.tensor(0)?).map_err(core_err)?;
        if c.bool(1)? {
            ld::singular_error("linalg.inv_ex", &info).map_err(core_err)?;
        }
        Ok(Out::Tensors(vec![r, info]))
    });
    t.insert("aten::linalg_cholesky_ex", |c| {
        let (r, info) = ld::cholesky_ex(&c.tensor(0)?, c.bool(1)?).map_err(core_err)?;
        if c.bool(2)? {
            ld::cholesky_error("linalg.cholesky_ex", &info).map_err(core_err)?;
        }
        Ok(Out::Tensors(vec![r, info]))
    });
    t.insert("aten::cholesky", |c| {
        ok(la::cholesky(&c.tensor(0)?, c.bool(1)?))
    });
    t.insert("aten::cholesky_inverse", |c| {
        ok(ld::cholesky_inverse(&c.tensor(0)?, c.bool(1)?))
    });
    t.insert("aten::linalg_eigh", |c| {
        let (w, v) = ld::eigh(&c.tensor(0)?, c.str(1)? == "U").map_err(core_err)?;
        Ok(Out::Tensors(vec![w, v]))
    });
    t.insert("aten::linalg_svd", |c| {
        let (u, s, vh) = ld::svd(&c.tensor(0)?, c.bool(1)?).map_err(core_err)?;
        Ok(Out::Tensors(vec![u, s, vh]))
    });
    t.insert("aten::svd", |c| {
        let x = c.tensor(0)?;
        let (some, uv) = (c.bool(1)?, c.bool(2)?);
        let r = (|| {
            let (u, s, vh) = ld::svd(&x, !some)?;
            if !uv {
                let uz = torchnative_core::ops::creation::zeros(u.shape(), x.dtype())?;
                let mut vs = vh.shape().to_vec();
                let d = vs.len();
                vs.swap(d - 2, d - 1);
                let vz = torchnative_core::ops::creation::zeros(&vs, x.dtype())?
                    .transpose(-2, -1)?
                    .contiguous()?
                    .transpose(-2, -1)?;
                return Ok(vec![uz, s, vz]);
            }
            Ok::<_, torchnative_core::Error>(vec![u, s, vh.transpose(-2, -1)?])
        })();
        Ok(Out::Tensors(r.map_err(core_err)?))
    });
    t.insert("aten::geqrf", |c| {
        let (a, tau) = ld::geqrf(&c.tensor(0)?).map_err(core_err)?;
        Ok(Out::Tensors(vec![a, tau]))
    });
    t.insert("aten::linalg_householder_product", |c| {
        ok(ld::householder_product(&c.tensor(0)?, &c.tensor(1)?))
    });
    t.insert("aten::orgqr", |c| {
        ok(ld::householder_product(&c.tensor(0)?, &c.tensor(1)?))
    });
    t.insert("aten::linalg_lu_factor_ex", |c| {
        no_pivot_cpu(c.bool(1)?, "linalg.lu_factor_ex")?;
        let (lu, p, info) =
            ld::lu_factor_ex(&c.tensor(0)?, "linalg.lu_factor_ex").map_err(core_err)?;
        if c.bool(2)? {
            lu_error("torch.linalg.lu_factor_ex", &info)?;
        }
        Ok(Out::Tensors(vec![lu, p, info]))
    });
    t.insert("aten::_lu_with_info", |c| {
        no_pivot_cpu(c.bool(1)?, "lu")?;
        let (lu, p, info) = ld::lu_factor_ex(&c.tensor(0)?, "lu").map_err(core_err)?;
        if c.bool(2)? {
            lu_error("lu", &info)?;
        }
        Ok(Out::Tensors(vec![lu, p, info]))
    });
    t.insert("aten::linalg_lu", |c| {
        no_pivot_cpu(c.bool(1)?, "linalg.lu")?;
        let (p, l, u) = ld::lu(&c.tensor(0)?).map_err(core_err)?;
        Ok(Out::Tensors(vec![p, l, u]))
    });
    t.insert("aten::lu_unpack", |c| {
        let (p, l, u) = ld::lu_unpack(&c.tensor(0)?, &c.tensor(1)?, c.bool(2)?, c.bool(3)?)
            .map_err(core_err)?;
        Ok(Out::Tensors(vec![p, l, u]))
    });
    t.insert("aten::linalg_lu_solve", |c| {
        ok(ld::lu_solve(
            &c.tensor(0)?,
            &c.tensor(1)?,
            &c.tensor(2)?,
            c.bool(3)?,
            c.bool(4)?,
        ))
    });
    t.insert("aten::lu_solve", |c| {
        ok(ld::lu_solve(
            &c.tensor(1)?,
            &c.tensor(2)?,
            &c.tensor(0)?,
            true,
            false,
        ))
    });
    t.insert("aten::triangular_solve", |c| {
        let (x, a) = ld::triangular_solve(
            &c.tensor(0)?,
            &c.tensor(1)?,
            c.bool(2)?,
            c.bool(3)?,
            c.bool(4)?,
        )
        .map_err(core_err)?;
        Ok(Out::Tensors(vec![x, a]))
    });
    t.insert("aten::linalg_matrix_exp", |c| {
        ok(ld::matrix_exp(&c.tensor(0)?))
    });
    t.insert("aten::linalg_ldl_factor_ex", |c| {
        let (ld_, p, info) = ld::ldl_factor_ex(&c.tensor(0)?).map_err(core_err)?;
        if c.bool(2)? {
            ldl_error("torch.linalg.ldl_factor_ex", &info)?;
        }
        Ok(Out::Tensors(vec![ld_, p, info]))
    });
    t.insert("aten::linalg_ldl_factor", |c| {
        let (ld_, p, info) = ld::ldl_factor_ex(&c.tensor(0)?).map_err(core_err)?;
        ldl_error("torch.linalg.ldl_factor", &info)?;
        Ok(Out::Tensors(vec![ld_, p]))
    });
    t.insert("aten::linalg_ldl_solve", |c| {
        ok(ld::ldl_solve(&c.tensor(0)?, &c.tensor(1)?, &c.tensor(2)?))
    });
    t.insert("aten::linalg_polar", |c| {
        let (u, h) = ld::polar(&c.tensor(0)?).map_err(core_err)?;
        Ok(Out::Tensors(vec![u, h]))
    });
    t.insert("aten::linalg_matrix_sqrth", |c| {
        ok(ld::matrix_sqrth(&c.tensor(0)?))
    });
    t.insert("aten::ormqr", |c| {
        ok(ld::ormqr(
            &c.tensor(0)?,
            &c.tensor(1)?,
            &c.tensor(2)?,
            c.bool(3)?,
            c.bool(4)?,
        ))
    });
    t.insert("aten::linalg_diagonal", |c| {
        ok(c.tensor(0)?.diagonal(c.int(1)?, c.int(2)?, c.int(3)?))
    });
    t.insert("aten::linalg_vander", |c| {
        let n = match &c.values[1] {
            Value::None => None,
            _ => Some(c.int(1)?),
        };
        ok(vander(&c.tensor(0)?, n))
    });
    t.insert("aten::linalg_tensorinv", |c| {
        ok(tensorinv(&c.tensor(0)?, c.int(1)?))
    });
    t.insert("aten::linalg_tensorsolve", |c| {
        ok(tensorsolve(&c.tensor(0)?, &c.tensor(1)?, c.opt_ints(2)?))
    });
    t.insert("aten::matrix_exp", |c| ok(ld::matrix_exp(&c.tensor(0)?)));
    t.insert("aten::linalg_cholesky", |c| {
        ok(la::cholesky(&c.tensor(0)?, c.bool(1)?))
    });
    t.insert("aten::linalg_eigvalsh", |c| {
        let uplo = c.str(1)?;
        ok(la::eigvalsh(&c.tensor(0)?, uplo == "U"))
    });
    t.insert("aten::linalg_svdvals", |c| ok(la::svdvals(&c.tensor(0)?)));
    t.insert("aten::linalg_cond", |c| {
        let x = c.tensor(0)?;
        let ord = match c.opt_scalar(1)? {
            None => "2".to_string(),
            Some(p) => {
                let v = p.to_f64();
                if v == f64::INFINITY {
                    "inf".into()
                } else if v == f64::NEG_INFINITY {
                    "-inf".into()
                } else if v.fract() == 0.0 {
                    format!("{}", v as i64)
                } else {
                    format!("{v}")
                }
            }
        };
        ok(cond(&x, &ord))
    });
    t.insert("aten::linalg_cond.p_str", |c| {
        ok(cond(&c.tensor(0)?, &c.str(1)?))
    });

    t.insert("aten::linalg_solve_triangular", |c| {
        ok(la::solve_triangular(
            &c.tensor(0)?,
            &c.tensor(1)?,
            c.bool(2)?,
            c.bool(3)?,
            c.bool(4)?,
        ))
    });
    t.insert("aten::cholesky_solve", |c| {
        ok(la::cholesky_solve(&c.tensor(0)?, &c.tensor(1)?, c.bool(2)?))
    });

    t.insert("aten::linalg_matrix_rank.atol_rtol_tensor", |c| {
        float32_64(&c.tensor(0)?)?;
        let (atol, rtol) = (c.opt_tensor(1)?, c.opt_tensor(2)?);
        ok(ld::matrix_rank(
            &c.tensor(0)?,
            atol.as_ref(),
            rtol.as_ref(),
            c.bool(3)?,
        ))
    });
    t.insert("aten::linalg_matrix_rank.atol_rtol_float", |c| {
        float32_64(&c.tensor(0)?)?;
        let (atol, rtol) = (opt_f64_tensor(c, 1)?, opt_f64_tensor(c, 2)?);
        ok(ld::matrix_rank(
            &c.tensor(0)?,
            atol.as_ref(),
            rtol.as_ref(),
            c.bool(3)?,
        ))
    });
    t.insert("aten::linalg_matrix_rank", |c| {
        float32_64(&c.tensor(0)?)?;
        let atol = f64_tensor(c.float(1)?);
        let rtol = f64_tensor(0.0);
        ok(ld::matrix_rank(
            &c.tensor(0)?,
            Some(&atol),
            Some(&rtol),
            c.bool(2)?,
        ))
    });
    t.insert("aten::linalg_matrix_rank.tol_tensor", |c| {
        float32_64(&c.tensor(0)?)?;
        let atol = c.tensor(1)?;
        let rtol = f64_tensor(0.0);
        ok(ld::matrix_rank(
            &c.tensor(0)?,
            Some(&atol),
            Some(&rtol),
            c.bool(2)?,
        ))
    });
    t.insert("aten::linalg_pinv.atol_rtol_tensor", |c| {
        let x = c.tensor(0)?;
        float32_64(&x)?;
        let (atol, rtol) = (c.opt_tensor(1)?, c.opt_tensor(2)?);
        ok(ld::pinv(&x, atol.as_ref(), rtol.as_ref(), c.bool(3)?))
    });
    t.insert("aten::linalg_pinv.atol_rtol_float", |c| {
        let x = c.tensor(0)?;
        float32_64(&x)?;
        let (atol, rtol) = (opt_f64_tensor(c, 1)?, opt_f64_tensor(c, 2)?);
        ok(ld::pinv(&x, atol.as_ref(), rtol.as_ref(), c.bool(3)?))
    });
    t.insert("aten::linalg_pinv", |c| {
        let x = c.tensor(0)?;
        float32_64(&x)?;
        let (atol, rtol) = (f64_tensor(0.0), f64_tensor(c.float(1)?));
        ok(ld::pinv(&x, Some(&atol), Some(&rtol), c.bool(2)?))
    });
    t.insert("aten::linalg_pinv.rcond_tensor", |c| {
        let x = c.tensor(0)?;
        float32_64(&x)?;
        let (atol, rtol) = (f64_tensor(0.0), c.tensor(1)?);
        ok(ld::pinv(&x, Some(&atol), Some(&rtol), c.bool(2)?))
    });
    t.insert("aten::pinverse", |c| {
        let x = c.tensor(0)?;
        float32_64(&x)?;
        let (atol, rtol) = (f64_tensor(0.0), f64_tensor(c.float(1)?));
        ok(ld::pinv(&x, Some(&atol), Some(&rtol), false))
    });

    t.insert("aten::linalg_qr", |c| {
        let (q, r) = la::qr(&c.tensor(0)?, &c.str(1)?).map_err(core_err)?;
        Ok(Out::Tensors(vec![q, r]))
    });

    // linalg_lstsq(Tensor self, Tensor b, float? rcond=None, *, str? driver=None)
    //   -> (solution, residuals, rank, singular_values).
    t.insert("aten::linalg_lstsq", |c| {
        let (a, b) = (c.tensor(0)?, c.tensor(1)?);
        float32_64(&a)?;
        float32_64(&b)?;
        let rcond = match &c.values[2] {
            Value::None => None,
            _ => Some(c.float(2)?),
        };
        let driver = match &c.values[3] {
            Value::None => None,
            _ => Some(c.str(3)?),
        };
        let r = ld::lstsq(&a, &b, rcond, driver.as_deref()).map_err(core_err)?;
        Ok(Out::Tensors(r))
    });

    t.insert("aten::linalg_lu_factor", |c| {
        if !c.bool(1)? {
            return Err(PyRuntimeError::new_err(
                "linalg.lu_factor: LU without pivoting is not implemented on the CPU",
            ));
        }
        let (lu, p, info) =
            ld::lu_factor_ex(&c.tensor(0)?, "linalg.lu_factor").map_err(core_err)?;
        lu_error("torch.linalg.lu_factor", &info)?;
        Ok(Out::Tensors(vec![lu, p]))
    });

    // ----- matrix_power -----
    t.insert("aten::matrix_power", |c| {
        ok(la::matrix_power(&c.tensor(0)?, c.int(1)?))
    });
    t.insert("aten::linalg_matrix_power", |c| {
        ok(la::matrix_power(&c.tensor(0)?, c.int(1)?))
    });
    t.insert("aten::matrix_power.out", |c| {
        let r = la::matrix_power(&c.tensor(0)?, c.int(1)?).map_err(core_err)?;
        c.write_into(2, r)
    });
    t.insert("aten::linalg_matrix_power.out", |c| {
        let r = la::matrix_power(&c.tensor(0)?, c.int(1)?).map_err(core_err)?;
        c.write_into(2, r)
    });
}
