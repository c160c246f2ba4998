//! Tensor factories: empty/zeros/ones/full, *_like, arange, linspace, eye.

#![allow(unused_imports)]

use super::*;
use pyo3::exceptions::PyNotImplementedError;

pub(crate) fn register(t: &mut Table) {
    // ----- creation -----
    t.insert("aten::empty.memory_format", |c| {
        ok(Ok(new_tensor(c, &c.ints(0)?, 1, 3)?))
    });
    t.insert("aten::zeros", |c| ok(Ok(new_tensor(c, &c.ints(0)?, 1, 3)?)));
    t.insert("aten::ones", |c| {
        let x = new_tensor(c, &c.ints(0)?, 1, 3)?;
        x.fill_(Scalar::Int(1)).map_err(core_err)?;
        ok(Ok(x))
    });
    t.insert("aten::full", |c| {
        let value = c.scalar(1)?;
        let shape = to_shape(&c.ints(0)?)?;
        let dtype = c.opt_dtype(2)?.unwrap_or(match value {
            Scalar::Bool(_) => DType::Bool,
            Scalar::Int(_) => DType::I64,
            Scalar::Float(_) => crate::default_float(),
            Scalar::Complex(..) => crate::default_float().to_complex().unwrap_or(DType::C64),
        });
        let x = Tensor::empty_on(&shape, dtype, c.device(4)?).map_err(core_err)?;
        if x.device() == Device::Cpu {
            // The value is converted like a cast (upstream's full wraps -1 to 255 in uint8).
            x.copy_(&Tensor::scalar_tensor(value, dtype))
                .map_err(core_err)?;
        }
        ok(Ok(x))
    });
    t.insert("aten::scalar_tensor", |c| {
        let dtype = c.opt_dtype(1)?.unwrap_or_else(crate::default_float);
        ok(Ok(Tensor::scalar_tensor(c.scalar(0)?, dtype)))
    });
    fn like(c: &Ctx<'_, '_>) -> PyResult<Tensor> {
        like_at(c, 1, 3, 5)
    }
    /// A new tensor shaped like argument 0, laid out per upstream's `empty_like` (preserve
    /// format: a dense input's strides, else dense strides in the input's dim order).
    fn like_at(
        c: &Ctx<'_, '_>,
        dtype_arg: usize,
        device_arg: usize,
        fmt_arg: usize,
    ) -> PyResult<Tensor> {
        let x = c.tensor(0)?;
        let dtype = c.opt_dtype(dtype_arg)?.unwrap_or(x.dtype());
        let device = match &c.values[device_arg] {
            Value::None => x.device(),
            _ => c.device(device_arg)?,
        };
        let fmt = super::views::mem_format(c, fmt_arg)?
            .unwrap_or(torchnative_core::tensor::MemoryFormat::Preserve);
        let strides = fmt.strides_for(x.shape(), x.strides());
        Tensor::empty_strided(x.shape(), &strides, dtype, device).map_err(core_err)
    }
    t.insert("aten::empty_like", |c| ok(Ok(like(c)?)));
    t.insert("aten::zeros_like", |c| ok(Ok(like(c)?)));
    t.insert("aten::ones_like", |c| {
        let x = like(c)?;
        if x.device() == Device::Cpu {
            x.fill_(Scalar::Int(1)).map_err(core_err)?;
        }
        ok(Ok(x))
    });
    t.insert("aten::full_like", |c| {
        let y = like_at(c, 2, 4, 6)?;
        if y.device() == Device::Cpu {
            y.fill_(c.scalar(1)?).map_err(core_err)?;
        }
        ok(Ok(y))
    });
    t.insert("aten::arange", |c| {
        arange(c, Scalar::Int(0), c.scalar(0)?, Scalar::Int(1), 1)
    });
    t.insert("aten::arange.start", |c| {
        arange(c, c.scalar(0)?, c.scalar(1)?, Scalar::Int(1), 2)
    });
    t.insert("aten::arange.start_step", |c| {
        arange(c, c.scalar(0)?, c.scalar(1)?, c.scalar(2)?, 3)
    });
    t.insert("aten::linspace", |c| {
        if c.opt_dtype(3)? == Some(DType::Bool) && c.int(2)? > 1 {
            return Err(PyNotImplementedError::new_err(
                "\"linspace_cpu\" not implemented for 'Bool'",
            ));
        }
        let steps = usize::try_from(c.int(2)?)
            .map_err(|_| PyRuntimeError::new_err("number of steps must be non-negative"))?;
        ok(torchnative_core::linspace(
            c.scalar(0)?.to_f64(),
            c.scalar(1)?.to_f64(),
            steps,
            c.opt_dtype(3)?,
        ))
    });
    t.insert("aten::eye", |c| {
        let n = to_shape(&[c.int(0)?])?[0];
        ok(torchnative_core::eye(
            n,
            None,
            c.opt_dtype(1)?.unwrap_or_else(crate::default_float),
        ))
    });
    t.insert("aten::eye.m", |c| {
        let nm = to_shape(&[c.int(0)?, c.int(1)?])?;
        ok(torchnative_core::eye(
            nm[0],
            Some(nm[1]),
            c.opt_dtype(2)?.unwrap_or_else(crate::default_float),
        ))
    });

    // out= forms of the factories: the result takes the out tensor's dtype.
    t.insert("aten::zeros.out", |c| {
        let dtype = c.tensor(1)?.dtype();
        let shape = to_shape(&c.ints(0)?)?;
        let r = torchnative_core::zeros(&shape, dtype).map_err(core_err)?;
        c.write_into(1, r)
    });
    t.insert("aten::ones.out", |c| {
        let dtype = c.tensor(1)?.dtype();
        let shape = to_shape(&c.ints(0)?)?;
        let r = torchnative_core::zeros(&shape, dtype).map_err(core_err)?;
        r.fill_(Scalar::Int(1)).map_err(core_err)?;
        c.write_into(1, r)
    });
    t.insert("aten::full.out", |c| {
        let dtype = c.tensor(2)?.dtype();
        let shape = to_shape(&c.ints(0)?)?;
        let r = torchnative_core::zeros(&shape, dtype).map_err(core_err)?;
        r.copy_(&Tensor::scalar_tensor(c.scalar(1)?, dtype))
            .map_err(core_err)?;
        c.write_into(2, r)
    });
    t.insert("aten::empty.out", |c| {
        let dtype = c.tensor(2)?.dtype();
        let shape = to_shape(&c.ints(0)?)?;
        let r = torchnative_core::zeros(&shape, dtype).map_err(core_err)?;
        c.write_into(2, r)
    });
    t.insert("aten::arange.out", |c| {
        arange_out(c, Scalar::Int(0), c.scalar(0)?, Scalar::Int(1), 1)
    });
    t.insert("aten::arange.start_out", |c| {
        arange_out(c, c.scalar(0)?, c.scalar(1)?, c.scalar(2)?, 3)
    });
    t.insert("aten::eye.out", |c| {
        let dtype = c.tensor(1)?.dtype();
        let n = to_shape(&[c.int(0)?])?[0];
        let r = torchnative_core::eye(n, None, dtype).map_err(core_err)?;
        c.write_into(1, r)
    });
    t.insert("aten::eye.m_out", |c| {
        let dtype = c.tensor(2)?.dtype();
        let nm = to_shape(&[c.int(0)?, c.int(1)?])?;
        let r = torchnative_core::eye(nm[0], Some(nm[1]), dtype).map_err(core_err)?;
        c.write_into(2, r)
    });
    // range.step: the deprecated inclusive arange (`end` included when on the grid).
    t.insert("aten::range.step", |c| {
        range_inclusive(c, c.scalar(2)?.to_f64(), 3)
    });
    // range without a step: upstream's kernel calls range.step with step 1.
    t.insert("aten::range", |c| range_inclusive(c, 1.0, 2));
    t.insert("aten::empty_strided", |c| {
        let shape = to_shape(&c.ints(0)?)?;
        let strides = to_shape(&c.ints(1)?)?;
        let dtype = c.opt_dtype(2)?.unwrap_or_else(crate::default_float);
        ok(Tensor::empty_strided(&shape, &strides, dtype, c.device(4)?))
    });
    t.insert("aten::logspace", |c| {
        let steps = usize::try_from(c.int(2)?)
            .map_err(|_| PyRuntimeError::new_err("number of steps must be non-negative"))?;
        let base = c.float(3)?;
        let dtype = c.opt_dtype(4)?.unwrap_or_else(crate::default_float);
        if dtype == DType::Bool {
            return Err(PyNotImplementedError::new_err(
                "\"logspace_cpu\" not implemented for 'Bool'",
            ));
        }
        let exps = torchnative_core::linspace(
            c.scalar(0)?.to_f64(),
            c.scalar(1)?.to_f64(),
            steps,
            Some(DType::F64),
        )
        .and_then(|e| e.to_vec::<f64>())
        .map_err(core_err)?;
        let v: Vec<f64> = exps.iter().map(|&e| base.powf(e)).collect();
        ok(Tensor::from_f64s(&v, &[steps], dtype))
    });
    t.insert("aten::tril_indices", |c| tri_indices(c, true));
    t.insert("aten::triu_indices", |c| tri_indices(c, false));
    t.insert("aten::tril_", |c| {
        let r = c.tensor(0)?.tril(c.int(1)?).map_err(core_err)?;
        c.write_into(0, r)
    });
    t.insert("aten::triu_", |c| {
        let r = c.tensor(0)?.triu(c.int(1)?).map_err(core_err)?;
        c.write_into(0, r)
    });
    t.insert("aten::diag", |c| {
        Ok(Out::Tensor(diag(&c.tensor(0)?, c.int(1)?)?))
    });
    t.insert("aten::diag.out", |c| {
        let r = diag(&c.tensor(0)?, c.int(1)?)?;
        c.write_into(2, r)
    });
    t.insert("aten::diagflat", |c| {
        let x = c.tensor(0)?.reshape(&[-1]).map_err(core_err)?;
        Ok(Out::Tensor(diag(&x, c.int(1)?)?))
    });
    t.insert("aten::diag_embed", |c| {
        let x = c.tensor(0)?;
        let offset = c.int(1)?;
        if x.dim() == 0 {
            return Err(PyRuntimeError::new_err(
                "diag_embed(): input must be at least 1-dimensional",
            ));
        }
        let nd = x.dim() + 1;
        let d1 =
            torchnative_core::layout::wrap_dim("diag_embed", c.int(2)?, nd).map_err(core_err)?;
        let d2 =
            torchnative_core::layout::wrap_dim("diag_embed", c.int(3)?, nd).map_err(core_err)?;
        if d1 == d2 {
            return Err(PyRuntimeError::new_err(format!(
                "diagonal dimensions cannot be identical {} and {}",
                c.int(2)?,
                c.int(3)?
            )));
        }
        let n = x.shape()[x.dim() - 1] + offset.unsigned_abs() as usize;
        let mut rest: Vec<usize> = x.shape()[..x.dim() - 1].to_vec();
        let (lo, hi) = (d1.min(d2), d1.max(d2));
        rest.insert(lo, n);
        rest.insert(hi, n);
        let out = Tensor::empty_on(&rest, x.dtype(), x.device()).map_err(core_err)?;
        out.diagonal(offset, d1 as i64, d2 as i64)
            .and_then(|d| d.copy_(&x))
            .map_err(core_err)?;
        ok(Ok(out))
    });
    t.insert("aten::combinations", |c| {
        let x = c.tensor(0)?;
        if x.dim() != 1 {
            return Err(PyRuntimeError::new_err(format!(
                "Expect a 1D vector, but got shape {:?}",
                x.shape()
            )));
        }
        let r = c.int(1)?;
        if r < 0 {
            return Err(PyRuntimeError::new_err(format!(
                "Expect a non-negative number, but got {r}"
            )));
        }
        let (n, r) = (x.numel(), r as usize);
        let repl = c.bool(2)?;
        if r == 0 {
            return ok(Tensor::empty_on(&[0], x.dtype(), x.device()));
        }
        // Index tuples in lexicographic order (as itertools.combinations[_with_replacement]).
        let mut rows: Vec<i64> = Vec::new();
        let mut cur: Vec<usize> = Vec::with_capacity(r);
        combos(0, n, r, repl, &mut cur, &mut rows);
        let count = rows.len() / r;
        let index = Tensor::from_i64s(&rows, &[count * r], DType::I64).map_err(core_err)?;
        ok(x.index_select(0, &index)
            .and_then(|v| v.reshape(&[count as i64, r as i64])))
    });
    t.insert("aten::cartesian_prod", |c| {
        let ts = c.tensors(0)?;
        if ts.iter().any(|t| t.dim() != 1) {
            return Err(PyRuntimeError::new_err(
                "Expect a 1D vector, but got a tensor with more dimensions",
            ));
        }
        if ts.len() == 1 {
            return ok(Ok(ts[0].alias()));
        }
        let shape: Vec<i64> = ts.iter().map(|t| t.numel() as i64).collect();
        let mut cols = Vec::new();
        for (k, t) in ts.iter().enumerate() {
            let mut view = vec![1i64; ts.len()];
            view[k] = -1;
            cols.push(
                t.reshape(&view)
                    .and_then(|v| v.expand(&shape))
                    .and_then(|v| v.reshape(&[-1]))
                    .map_err(core_err)?,
            );
        }
        ok(torchnative_core::stack(&cols.iter().collect::<Vec<_>>(), 1))
    });
    t.insert("aten::vander", |c| {
        let x = c.tensor(0)?;
        if x.dim() != 1 {
            return Err(PyRuntimeError::new_err(
                "x must be a one-dimensional tensor.",
            ));
        }
        let n = match c.opt_int(1)? {
            None => x.numel(),
            Some(v) if v < 0 => {
                return Err(PyRuntimeError::new_err("N must be non-negative."));
            }
            Some(v) => v as usize,
        };
        let dtype = if x.dtype().is_float() {
            x.dtype()
        } else {
            DType::I64
        };
        let xs = x.to_dtype(dtype).map_err(core_err)?;
        let increasing = c.bool(2)?;
        let mut cols: Vec<Tensor> = Vec::with_capacity(n);
        if n > 0 {
            let mut p = Tensor::scalar_tensor(Scalar::Int(1), dtype)
                .expand(&[x.numel() as i64])
                .and_then(|t| t.contiguous())
                .map_err(core_err)?;
            cols.push(p.clone());
            for _ in 1..n {
                p = p.mul(&xs).map_err(core_err)?;
                cols.push(p.clone());
            }
        }
        if !increasing {
            cols.reverse();
        }
        if cols.is_empty() {
            return ok(Tensor::empty_on(&[x.numel(), 0], dtype, x.device()));
        }
        ok(torchnative_core::stack(&cols.iter().collect::<Vec<_>>(), 1))
    });
    t.insert("aten::fill_diagonal_", |c| {
        let x = c.tensor(0)?;
        let wrap = c.bool(2)?;
        if x.dim() < 2 {
            return Err(PyRuntimeError::new_err("dimensions must larger than 1"));
        }
        if x.dim() > 2 && x.shape().iter().any(|&s| s != x.shape()[0]) {
            return Err(PyRuntimeError::new_err(
                "all dimensions of input must be of equal length",
            ));
        }
        let m = *x.shape().iter().min().unwrap_or(&0);
        let mut coords: Vec<Vec<i64>> = vec![Vec::new(); x.dim()];
        for i in 0..m {
            for col in coords.iter_mut() {
                col.push(i as i64);
            }
        }
        if wrap && x.dim() == 2 && x.shape()[0] > x.shape()[1] + 1 {
            // Tall matrices restart the diagonal every cols + 1 rows.
            let (rows, cols) = (x.shape()[0], x.shape()[1]);
            let mut r0 = cols + 1;
            while r0 < rows {
                for i in 0..cols.min(rows - r0) {
                    coords[0].push((r0 + i) as i64);
                    coords[1].push(i as i64);
                }
                r0 += cols + 1;
            }
        }
        let idx = coords
            .iter()
            .map(|v| Tensor::from_i64s(v, &[v.len()], DType::I64))
            .collect::<torchnative_core::Result<Vec<_>>>()
            .map_err(core_err)?;
        let v = Tensor::scalar_tensor(c.scalar(1)?, x.dtype());
        x.index_put_(&idx, &v, false).map_err(core_err)?;
        Ok(Out::Arg(0))
    });
}

fn tri_indices(c: &Ctx<'_, '_>, lower: bool) -> PyResult<Out> {
    let (row, col, offset) = (c.int(0)?, c.int(1)?, c.int(2)?);
    let dtype = c.opt_dtype(3)?.unwrap_or(DType::I64);
    if !matches!(dtype, DType::I64 | DType::I32) {
        return Err(PyNotImplementedError::new_err(format!(
            "\"{}\" not implemented for '{}'",
            if lower {
                "tril_indices"
            } else {
                "triu_indices"
            },
            scalar_type_name(dtype)
        )));
    }
    if row < 0 || col < 0 {
        return Err(PyRuntimeError::new_err(format!(
            "row must be non-negative, got{row}"
        )));
    }
    let (mut rs, mut cs) = (Vec::new(), Vec::new());
    for r in 0..row {
        for k in 0..col {
            let keep = if lower {
                k - r <= offset
            } else {
                k - r >= offset
            };
            if keep {
                rs.push(r);
                cs.push(k);
            }
        }
    }
    let n = rs.len();
    rs.extend(cs);
    ok(Tensor::from_i64s(&rs, &[2, n], dtype))
}

/// `torch.diag`: the `k`-th diagonal of a matrix (a copy), or a square matrix with a vector
/// on its `k`-th diagonal.
fn diag(x: &Tensor, k: i64) -> PyResult<Tensor> {
    match x.dim() {
        1 => {
            let n = x.numel() + k.unsigned_abs() as usize;
            let out = Tensor::empty_on(&[n, n], x.dtype(), x.device()).map_err(core_err)?;
            out.diagonal(k, 0, 1)
                .and_then(|d| d.copy_(x))
                .map_err(core_err)?;
            Ok(out)
        }
        2 => x
            .diagonal(k, 0, 1)
            .and_then(|d| d.clone_with_format(torchnative_core::tensor::MemoryFormat::Contiguous))
            .map_err(core_err),
        _ => Err(PyRuntimeError::new_err(
            "diag(): Supports 1D or 2D tensors. Got 0D",
        )),
    }
}

/// Appends every size-`r` index tuple drawn from `start..n` (non-decreasing with `repl`,
/// increasing otherwise) to `rows`, in lexicographic order.
fn combos(start: usize, n: usize, r: usize, repl: bool, cur: &mut Vec<usize>, rows: &mut Vec<i64>) {
    if cur.len() == r {
        rows.extend(cur.iter().map(|&i| i as i64));
        return;
    }
    for i in start..n {
        cur.push(i);
        combos(if repl { i } else { i + 1 }, n, r, repl, cur, rows);
        cur.pop();
    }
}

/// `arange(..., out=)`: values in the out tensor's dtype; a non-empty out of another length
/// is resized with upstream's warning.
fn arange_out(
    c: &Ctx<'_, '_>,
    start: Scalar,
    end: Scalar,
    step: Scalar,
    out: usize,
) -> PyResult<Out> {
    let dst = c.tensor(out)?;
    let r = torchnative_core::arange(start, end, step, Some(dst.dtype())).map_err(core_err)?;
    if dst.numel() > 0 && dst.numel() != r.numel() {
        let msg = format!(
            "The number of elements in the out tensor of shape {:?} is {} which does not match the computed number of elements {}. Note that this may occur as a result of rounding error. The out tensor will be resized to a tensor of shape ({},).",
            dst.shape(),
            dst.numel(),
            r.numel(),
            r.numel()
        );
        let category = c.py.get_type::<pyo3::exceptions::PyUserWarning>();
        PyErr::warn(
            c.py,
            &category,
            &std::ffi::CString::new(msg).unwrap_or_default(),
            1,
        )?;
    }
    c.write_into(out, r)
}

/// `range`: the deprecated inclusive arange (`end` included when on the grid).
fn range_inclusive(c: &Ctx<'_, '_>, st: f64, dtype_arg: usize) -> PyResult<Out> {
    let (s, e) = (c.scalar(0)?.to_f64(), c.scalar(1)?.to_f64());
    let dtype = c.opt_dtype(dtype_arg)?.unwrap_or_else(crate::default_float);
    if st == 0.0 || (st > 0.0 && e < s) || (st < 0.0 && e > s) {
        return Err(PyRuntimeError::new_err(
            "upper bound and larger bound inconsistent with step sign",
        ));
    }
    let n = ((e - s) / st).floor() as usize + 1;
    let v: Vec<f64> = (0..n).map(|i| s + i as f64 * st).collect();
    ok(Tensor::from_f64s(&v, &[n], dtype))
}

/// `arange`: float bounds give the current default float dtype (torch.set_default_dtype).
fn arange(
    c: &Ctx<'_, '_>,
    start: Scalar,
    end: Scalar,
    step: Scalar,
    dtype_arg: usize,
) -> PyResult<Out> {
    let any_float = [start, end, step]
        .iter()
        .any(|s| matches!(s, Scalar::Float(_)));
    let dtype = match c.opt_dtype(dtype_arg)? {
        Some(d) => Some(d),
        None if any_float => Some(crate::default_float()),
        None => None,
    };
    ok(torchnative_core::arange(start, end, step, dtype))
}
