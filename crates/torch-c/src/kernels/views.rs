//! Copies, casts, aliases and views (view, reshape, permute, expand, as_strided, select...).

#![allow(unused_imports)]

use super::*;
use pyo3::exceptions::PyNotImplementedError;
use torchnative_core::tensor::MemoryFormat;

pub(crate) fn register(t: &mut Table) {
    // ----- copies, casts, aliases -----
    t.insert("aten::clone", |c| {
        let fmt = mem_format(c, 1)?.unwrap_or(MemoryFormat::Preserve);
        ok(c.tensor(0)?.clone_with_format(fmt))
    });
    t.insert("aten::contiguous", |c| {
        let x = c.tensor(0)?;
        let fmt = mem_format(c, 1)?.unwrap_or(MemoryFormat::Contiguous);
        if x.is_contiguous_as(fmt) || fmt == MemoryFormat::Preserve {
            return Ok(Out::Arg(0));
        }
        ok(x.clone_with_format(fmt))
    });
    t.insert("aten::detach", |c| ok(Ok(c.tensor(0)?.without_base())));
    t.insert("aten::alias", |c| ok(Ok(c.tensor(0)?.alias())));
    t.insert("aten::copy_", |c| {
        let dst = c.tensor(0)?;
        dst.copy_(&c.tensor(1)?).map_err(core_err)?;
        Ok(Out::Arg(0))
    });
    t.insert("aten::fill_.Scalar", |c| {
        c.tensor(0)?.fill_(c.scalar(1)?).map_err(core_err)?;
        Ok(Out::Arg(0))
    });
    t.insert("aten::zero_", |c| {
        c.tensor(0)?.fill_(Scalar::Int(0)).map_err(core_err)?;
        Ok(Out::Arg(0))
    });
    t.insert("aten::_to_copy", |c| {
        let x = c.tensor(0)?;
        let dtype = c.opt_dtype(1)?.unwrap_or(x.dtype());
        let y = x.to_dtype(dtype).map_err(core_err)?;
        let y = if y.shares_storage(&x) {
            y.deep_clone().map_err(core_err)?
        } else {
            y
        };
        ok(Ok(y))
    });
    fn to_dtype_op(c: &Ctx<'_, '_>, dtype: DType, copy: bool, fmt_arg: usize) -> PyResult<Out> {
        to_op(c, None, dtype, copy, fmt_arg)
    }
    /// `Tensor.to` with an optional target device: cpu <-> meta moves (a meta tensor has no
    /// data to copy out, as upstream says), otherwise a dtype/layout conversion.
    fn to_op(
        c: &Ctx<'_, '_>,
        device: Option<Device>,
        dtype: DType,
        copy: bool,
        fmt_arg: usize,
    ) -> PyResult<Out> {
        let x = c.tensor(0)?;
        let fmt = mem_format(c, fmt_arg)?.unwrap_or(MemoryFormat::Preserve);
        match (x.device(), device) {
            (Device::Meta, Some(Device::Cpu)) => {
                return Err(PyNotImplementedError::new_err(
                    "Cannot copy out of meta tensor; no data!",
                ))
            }
            (Device::Cpu, Some(Device::Meta)) => {
                let strides = fmt.strides_for(x.shape(), x.strides());
                return ok(Tensor::empty_strided(
                    x.shape(),
                    &strides,
                    dtype,
                    Device::Meta,
                ));
            }
            _ => {}
        }
        let keeps_layout = fmt == MemoryFormat::Preserve || x.is_contiguous_as(fmt);
        if x.dtype() == dtype && !copy && keeps_layout {
            return Ok(Out::Arg(0));
        }
        if x.dtype().is_complex() && !dtype.is_complex() {
            super::complex::warn_discarding_imaginary(c)?;
        }
        ok(x.to_dtype_with_format(dtype, fmt))
    }
    t.insert("aten::to.dtype", |c| {
        let d = c.opt_dtype(1)?.unwrap_or(DType::F32);
        to_dtype_op(c, d, c.bool(3)?, 4)
    });
    t.insert("aten::to.device", |c| {
        let device = c.device(1)?;
        let d = c.opt_dtype(2)?.unwrap_or(DType::F32);
        to_op(c, Some(device), d, c.bool(4)?, 5)
    });
    t.insert("aten::to.other", |c| {
        let d = c.tensor(1)?.dtype();
        to_dtype_op(c, d, c.bool(3)?, 4)
    });
    t.insert("aten::to.dtype_layout", |c| {
        let device = match &c.values[3] {
            crate::value::Value::None => None,
            _ => Some(c.device(3)?),
        };
        let x = c.tensor(0)?;
        let d = c.opt_dtype(1)?.unwrap_or(x.dtype());
        to_op(c, device, d, c.bool(6)?, 7)
    });
    t.insert("aten::_local_scalar_dense", |c| {
        Ok(Out::Scalar(c.tensor(0)?.item().map_err(core_err)?))
    });

    // ----- views -----
    t.insert("aten::view", |c| ok(c.tensor(0)?.view(&c.ints(1)?)));
    t.insert("aten::reshape", |c| ok(c.tensor(0)?.reshape(&c.ints(1)?)));
    t.insert("aten::_unsafe_view", |c| {
        ok(c.tensor(0)?.reshape(&c.ints(1)?))
    });
    t.insert("aten::permute", |c| ok(c.tensor(0)?.permute(&c.ints(1)?)));
    t.insert("aten::transpose.int", |c| {
        ok(c.tensor(0)?.transpose(c.int(1)?, c.int(2)?))
    });
    t.insert("aten::t", |c| ok(c.tensor(0)?.t()));
    t.insert("aten::expand", |c| ok(c.tensor(0)?.expand(&c.ints(1)?)));
    t.insert("aten::expand_as", |c| {
        let shape: Vec<i64> = c.tensor(1)?.shape().iter().map(|&d| d as i64).collect();
        ok(c.tensor(0)?.expand(&shape))
    });
    t.insert("aten::broadcast_to", |c| {
        ok(c.tensor(0)?.expand(&c.ints(1)?))
    });
    t.insert("aten::as_strided", |c| {
        let x = c.tensor(0)?;
        let sizes = to_shape(&c.ints(1)?)?;
        let strides = to_shape(&c.ints(2)?)?;
        let offset = match c.opt_int(3)? {
            Some(o) => to_shape(&[o])?[0],
            None => x.storage_offset(),
        };
        ok(x.as_strided(&sizes, &strides, offset))
    });
    // A clone of self whose as_strided view takes src (upstream's composite kernel; its
    // Python decomposition calls this op again).
    fn as_strided_scatter(c: &Ctx<'_, '_>) -> PyResult<Tensor> {
        let out = c.tensor(0)?.deep_clone().map_err(core_err)?;
        let sizes = to_shape(&c.ints(2)?)?;
        let strides = to_shape(&c.ints(3)?)?;
        let offset = match c.opt_int(4)? {
            Some(o) => to_shape(&[o])?[0],
            None => out.storage_offset(),
        };
        let src = c.tensor(1)?;
        let slot = out.as_strided(&sizes, &strides, offset).map_err(core_err)?;
        if slot.shape() != src.shape() {
            return Err(PyRuntimeError::new_err(format!(
                "expected src to have a size equal to the slice of self. src size = {:?}, slice size = {:?}",
                src.shape(),
                slot.shape()
            )));
        }
        slot.copy_(&src).map_err(core_err)?;
        Ok(out)
    }
    t.insert("aten::as_strided_scatter", |c| {
        Ok(Out::Tensor(as_strided_scatter(c)?))
    });
    t.insert("aten::as_strided_scatter.out", |c| {
        let r = as_strided_scatter(c)?;
        c.write_into(5, r)
    });
    t.insert("aten::select.int", |c| {
        ok(c.tensor(0)?.select(c.int(1)?, c.int(2)?))
    });
    t.insert("aten::narrow", |c| {
        let len = to_shape(&[c.int(3)?])?[0];
        ok(c.tensor(0)?.narrow(c.int(1)?, c.int(2)?, len))
    });
    t.insert("aten::unsqueeze", |c| ok(c.tensor(0)?.unsqueeze(c.int(1)?)));
    t.insert("aten::squeeze", |c| ok(Ok(c.tensor(0)?.squeeze())));
    t.insert("aten::squeeze.dim", |c| {
        ok(c.tensor(0)?.squeeze_dims(&[c.int(1)?]))
    });
    t.insert("aten::squeeze.dims", |c| {
        ok(c.tensor(0)?.squeeze_dims(&c.ints(1)?))
    });
    t.insert("aten::flatten.using_ints", |c| {
        ok(c.tensor(0)?.flatten(c.int(1)?, c.int(2)?))
    });
    t.insert("aten::unflatten.int", |c| {
        ok(c.tensor(0)?.unflatten(c.int(1)?, &c.ints(2)?))
    });
    t.insert("aten::diagonal", |c| {
        ok(c.tensor(0)?.diagonal(c.int(1)?, c.int(2)?, c.int(3)?))
    });

    t.insert("aten::view_as", |c| {
        let shape = dims_of(&c.tensor(1)?);
        ok(c.tensor(0)?.view(&shape))
    });
    t.insert("aten::reshape_as", |c| {
        let shape = dims_of(&c.tensor(1)?);
        ok(c.tensor(0)?.reshape(&shape))
    });
    t.insert("aten::view.dtype", |c| {
        let x = c.tensor(0)?;
        let d = c.opt_dtype(1)?.unwrap_or(x.dtype());
        ok(x.view_dtype(d))
    });
    t.insert("aten::swapaxes", |c| {
        ok(c.tensor(0)?.transpose(c.int(1)?, c.int(2)?))
    });
    t.insert("aten::swapdims", |c| {
        ok(c.tensor(0)?.transpose(c.int(1)?, c.int(2)?))
    });
    t.insert("aten::movedim.int", |c| {
        movedim(c, &[c.int(1)?], &[c.int(2)?])
    });
    t.insert("aten::moveaxis.int", |c| {
        movedim(c, &[c.int(1)?], &[c.int(2)?])
    });
    t.insert("aten::movedim.intlist", |c| {
        movedim(c, &c.ints(1)?, &c.ints(2)?)
    });
    t.insert("aten::moveaxis.intlist", |c| {
        movedim(c, &c.ints(1)?, &c.ints(2)?)
    });
    // Upstream's ravel is contiguous().view(-1): a view, of a copy when `self` is not contiguous.
    t.insert("aten::ravel", |c| {
        ok(c.tensor(0)?.contiguous().and_then(|x| x.view(&[-1])))
    });
    t.insert("aten::real", |_| Ok(Out::Arg(0)));
    t.insert("aten::view_as_real", |_| {
        Err(PyTypeError::new_err(
            "view_as_real is only supported for complex tensors",
        ))
    });
    t.insert("aten::adjoint", |c| {
        let x = c.tensor(0)?;
        if x.dim() < 2 {
            return Err(PyRuntimeError::new_err(format!(
                "tensor.adjoint() is only supported on matrices or batches of matrices. Got {}-D tensor.",
                x.dim()
            )));
        }
        ok(x.transpose(-2, -1))
    });
    t.insert("aten::numpy_T", |c| {
        let x = c.tensor(0)?;
        let order: Vec<i64> = (0..x.dim() as i64).rev().collect();
        ok(x.permute(&order))
    });
    t.insert("aten::matrix_H", |c| {
        let x = c.tensor(0)?;
        if x.dim() != 2 {
            return Err(PyRuntimeError::new_err(format!(
                "tensor.H is only supported on matrices (2-D tensors). Got {}-D tensor.",
                x.dim()
            )));
        }
        ok(x.transpose(0, 1))
    });
    t.insert("aten::mT", |c| {
        let x = c.tensor(0)?;
        if x.dim() < 2 {
            return Err(PyRuntimeError::new_err(format!(
                "tensor.mT is only supported on matrices or batches of matrices. Got {}-D tensor.",
                x.dim()
            )));
        }
        ok(x.transpose(-2, -1))
    });
    t.insert("aten::unfold", |c| {
        let x = c.tensor(0)?;
        let (dim, size, step) = (c.int(1)?, c.int(2)?, c.int(3)?);
        let d = if x.dim() == 0 {
            0
        } else {
            torchnative_core::layout::wrap_dim("unfold", dim, x.dim()).map_err(core_err)?
        };
        let len = x.shape().get(d).copied().unwrap_or(1) as i64;
        if size > len || size < 0 {
            return Err(PyRuntimeError::new_err(format!(
                "maximum size for tensor at dimension {d} is {len} but size is {size}"
            )));
        }
        if step <= 0 {
            return Err(PyRuntimeError::new_err(format!(
                "step is {step} but must be > 0"
            )));
        }
        let mut sizes = x.shape().to_vec();
        let mut strides = x.strides().to_vec();
        let st = strides.get(d).copied().unwrap_or(1);
        if x.dim() > 0 {
            sizes[d] = ((len - size) / step + 1) as usize;
            strides[d] = st * step as usize;
        }
        sizes.push(size as usize);
        strides.push(st);
        ok(x.as_strided(&sizes, &strides, x.storage_offset()))
    });
    t.insert("aten::narrow.Tensor", |c| {
        let start = c.tensor(2)?;
        let s = start.item().map_err(core_err)?;
        let len = to_shape(&[c.int(3)?])?[0];
        ok(c.tensor(0)?.narrow(c.int(1)?, s.to_f64() as i64, len))
    });
    t.insert("aten::slice.Tensor", |c| {
        let x = c.tensor(0)?;
        let step = c.int(4)?;
        if step <= 0 {
            return Err(PyRuntimeError::new_err("slice step must be positive"));
        }
        ok(slice_view(
            &x,
            c.int(1)?,
            c.opt_int(2)?,
            c.opt_int(3)?,
            step,
        ))
    });
    t.insert("aten::atleast_1d", |c| atleast(c, 1));
    t.insert("aten::atleast_2d", |c| atleast(c, 2));
    t.insert("aten::atleast_3d", |c| atleast(c, 3));
    t.insert("aten::atleast_1d.Sequence", |c| atleast_seq(c, 1));
    t.insert("aten::atleast_2d.Sequence", |c| atleast_seq(c, 2));
    t.insert("aten::atleast_3d.Sequence", |c| atleast_seq(c, 3));
    t.insert("aten::tensor_split.indices", |c| {
        let x = c.tensor(0)?;
        split_at(&x, &c.ints(1)?, c.int(2)?)
    });
    t.insert("aten::tensor_split.tensor_indices_or_sections", |c| {
        let x = c.tensor(0)?;
        let idx = c.tensor(1)?;
        if idx.dtype() != DType::I64 || idx.dim() > 1 {
            return Err(PyRuntimeError::new_err(
                "tensor_split expected tensor_indices_or_sections to be a zero-dimensional or one-dimensional tensor, but got a tensor with more dimensions",
            ));
        }
        let v = idx.to_vec::<i64>().map_err(core_err)?;
        if idx.dim() == 0 {
            return sections(&x, v[0], c.int(2)?);
        }
        split_at(&x, &v, c.int(2)?)
    });
    t.insert("aten::hsplit.int", |c| {
        let x = c.tensor(0)?;
        let dim = if x.dim() == 1 { 0 } else { 1 };
        dir_split(&x, "hsplit", 1, dim, Split::Sections(c.int(1)?))
    });
    t.insert("aten::hsplit.array", |c| {
        let x = c.tensor(0)?;
        let dim = if x.dim() == 1 { 0 } else { 1 };
        dir_split(&x, "hsplit", 1, dim, Split::Indices(c.ints(1)?))
    });
    t.insert("aten::vsplit.int", |c| {
        dir_split(&c.tensor(0)?, "vsplit", 2, 0, Split::Sections(c.int(1)?))
    });
    t.insert("aten::vsplit.array", |c| {
        dir_split(&c.tensor(0)?, "vsplit", 2, 0, Split::Indices(c.ints(1)?))
    });
    t.insert("aten::dsplit.int", |c| {
        dir_split(&c.tensor(0)?, "dsplit", 3, 2, Split::Sections(c.int(1)?))
    });
    t.insert("aten::dsplit.array", |c| {
        dir_split(&c.tensor(0)?, "dsplit", 3, 2, Split::Indices(c.ints(1)?))
    });

    // ----- in-place metadata changes: the tensor itself takes the new layout -----
    t.insert("aten::t_", |c| {
        let x = c.tensor(0)?;
        relayout_arg(c, x.t().map_err(core_err)?)
    });
    t.insert("aten::transpose_", |c| {
        let x = c.tensor(0)?;
        relayout_arg(c, x.transpose(c.int(1)?, c.int(2)?).map_err(core_err)?)
    });
    t.insert("aten::swapaxes_", |c| {
        let x = c.tensor(0)?;
        relayout_arg(c, x.transpose(c.int(1)?, c.int(2)?).map_err(core_err)?)
    });
    t.insert("aten::swapdims_", |c| {
        let x = c.tensor(0)?;
        relayout_arg(c, x.transpose(c.int(1)?, c.int(2)?).map_err(core_err)?)
    });
    t.insert("aten::squeeze_", |c| {
        let x = c.tensor(0)?;
        relayout_arg(c, x.squeeze())
    });
    t.insert("aten::squeeze_.dim", |c| {
        let x = c.tensor(0)?;
        relayout_arg(c, x.squeeze_dims(&[c.int(1)?]).map_err(core_err)?)
    });
    t.insert("aten::squeeze_.dims", |c| {
        let x = c.tensor(0)?;
        relayout_arg(c, x.squeeze_dims(&c.ints(1)?).map_err(core_err)?)
    });
    t.insert("aten::unsqueeze_", |c| {
        let x = c.tensor(0)?;
        relayout_arg(c, x.unsqueeze(c.int(1)?).map_err(core_err)?)
    });
    t.insert("aten::as_strided_", |c| {
        let x = c.tensor(0)?;
        let sizes = to_shape(&c.ints(1)?)?;
        let strides = to_shape(&c.ints(2)?)?;
        let offset = match c.opt_int(3)? {
            Some(o) => to_shape(&[o])?[0],
            None => x.storage_offset(),
        };
        relayout_arg(c, x.as_strided(&sizes, &strides, offset).map_err(core_err)?)
    });
    t.insert("aten::resize_", |c| {
        let shape = to_shape(&c.ints(1)?)?;
        resize_arg(c, &shape)
    });
    t.insert("aten::resize_as_", |c| {
        let shape = c.tensor(1)?.shape().to_vec();
        resize_arg(c, &shape)
    });
}

fn dims_of(t: &Tensor) -> Vec<i64> {
    t.shape().iter().map(|&d| d as i64).collect()
}

/// `MemoryFormat?` argument `i` (None when absent).
pub(crate) fn mem_format(c: &Ctx<'_, '_>, i: usize) -> PyResult<Option<MemoryFormat>> {
    let name = match c.values.get(i) {
        None | Some(Value::None) => return Ok(None),
        Some(Value::Int(k)) => match k {
            0 => "torch.contiguous_format".to_string(),
            1 => "torch.preserve_format".to_string(),
            2 => "torch.channels_last".to_string(),
            _ => "torch.channels_last_3d".to_string(),
        },
        Some(Value::Str(s)) => format!("torch.{s}"),
        Some(Value::Object(o)) => o.bind(c.py).str()?.to_string(),
        Some(v) => {
            return Err(PyTypeError::new_err(format!(
                "memory_format must be a torch.memory_format, got {v:?}"
            )))
        }
    };
    match name.as_str() {
        "torch.contiguous_format" => Ok(Some(MemoryFormat::Contiguous)),
        "torch.preserve_format" => Ok(Some(MemoryFormat::Preserve)),
        "torch.channels_last" | "torch.channels_last_3d" => Ok(Some(MemoryFormat::ChannelsLast)),
        other => Err(PyRuntimeError::new_err(format!(
            "unsupported memory format {other}"
        ))),
    }
}

fn movedim(c: &Ctx<'_, '_>, src: &[i64], dst: &[i64]) -> PyResult<Out> {
    let x = c.tensor(0)?;
    let n = x.dim();
    if src.len() != dst.len() {
        return Err(PyRuntimeError::new_err(format!(
            "movedim: Invalid source or destination dims: source ({src:?} dims) should contain the same number of dims as destination ({dst:?} dims)"
        )));
    }
    let wrap = |d: i64| -> PyResult<usize> {
        torchnative_core::layout::wrap_dim("movedim", d, n.max(1)).map_err(core_err)
    };
    let src: Vec<usize> = src.iter().map(|&d| wrap(d)).collect::<PyResult<_>>()?;
    let dst: Vec<usize> = dst.iter().map(|&d| wrap(d)).collect::<PyResult<_>>()?;
    let mut seen = vec![false; n.max(1)];
    for &d in &src {
        if std::mem::replace(&mut seen[d], true) {
            return Err(PyRuntimeError::new_err(format!(
                "movedim: repeated dim in `source` ({src:?})"
            )));
        }
    }
    let mut seen = vec![false; n.max(1)];
    for &d in &dst {
        if std::mem::replace(&mut seen[d], true) {
            return Err(PyRuntimeError::new_err(format!(
                "movedim: repeated dim in `destination` ({dst:?})"
            )));
        }
    }
    if n == 0 {
        return ok(Ok(x.alias()));
    }
    let mut order: Vec<Option<usize>> = vec![None; n];
    for (&s, &d) in src.iter().zip(&dst) {
        order[d] = Some(s);
    }
    let mut rest = (0..n).filter(|d| !src.contains(d));
    let perm: Vec<i64> = order
        .into_iter()
        .map(|o| o.or_else(|| rest.next()).unwrap_or(0) as i64)
        .collect();
    ok(x.permute(&perm))
}

/// `aten::slice.Tensor`: Python slice clamping; the offset moves to the clamped start even
/// when the result is empty, as upstream's does.
pub(crate) fn slice_view(
    x: &Tensor,
    dim: i64,
    start: Option<i64>,
    end: Option<i64>,
    step: i64,
) -> torchnative_core::Result<Tensor> {
    if x.dim() == 0 {
        return Err(torchnative_core::Error::InvalidArgument {
            op: "slice",
            reason: "slice() cannot be applied to a 0-dim tensor.".into(),
        });
    }
    let d = torchnative_core::layout::wrap_dim("slice", dim, x.dim())?;
    let size = x.shape()[d] as i64;
    let clamp = |v: i64| {
        if v < 0 {
            (v + size).max(0)
        } else {
            v.min(size)
        }
    };
    let s = clamp(start.unwrap_or(0));
    let e = clamp(end.unwrap_or(size)).max(s);
    let len = if e > s { (e - s - 1) / step + 1 } else { 0 };
    let mut sizes = x.shape().to_vec();
    let mut strides = x.strides().to_vec();
    let offset = x.storage_offset() + s as usize * strides[d];
    sizes[d] = len as usize;
    strides[d] *= step as usize;
    x.as_strided(&sizes, &strides, offset)
}

fn atleast_one(x: &Tensor, n: usize) -> torchnative_core::Result<Option<Tensor>> {
    Ok(match (n, x.dim()) {
        (_, d) if d >= n => None,
        (1, _) => Some(x.reshape(&[1])?),
        (2, 0) => Some(x.reshape(&[1, 1])?),
        (2, _) => Some(x.unsqueeze(0)?),
        (_, 0) => Some(x.reshape(&[1, 1, 1])?),
        (_, 1) => Some(x.unsqueeze(0)?.unsqueeze(-1)?),
        _ => Some(x.unsqueeze(-1)?),
    })
}

fn atleast(c: &Ctx<'_, '_>, n: usize) -> PyResult<Out> {
    match atleast_one(&c.tensor(0)?, n).map_err(core_err)? {
        None => Ok(Out::Arg(0)),
        Some(t) => Ok(Out::Tensor(t)),
    }
}

fn atleast_seq(c: &Ctx<'_, '_>, n: usize) -> PyResult<Out> {
    let mut out = Vec::new();
    for x in c.tensors(0)? {
        out.push(match atleast_one(&x, n).map_err(core_err)? {
            None => x.alias(),
            Some(t) => t,
        });
    }
    Ok(Out::Tensors(out))
}

fn split_at(x: &Tensor, indices: &[i64], dim: i64) -> PyResult<Out> {
    if x.dim() == 0 {
        return Err(PyRuntimeError::new_err(
            "tensor_split expected at least a 1-dimensional tensor, but got a tensor with 0 dims",
        ));
    }
    let mut out = Vec::new();
    let mut start = 0i64;
    for &i in indices {
        out.push(slice_view(x, dim, Some(start), Some(i), 1).map_err(core_err)?);
        start = i;
    }
    out.push(slice_view(x, dim, Some(start), None, 1).map_err(core_err)?);
    Ok(Out::Tensors(out))
}

fn sections(x: &Tensor, n: i64, dim: i64) -> PyResult<Out> {
    if x.dim() == 0 {
        return Err(PyRuntimeError::new_err(
            "tensor_split expected at least a 1-dimensional tensor, but got a tensor with 0 dims",
        ));
    }
    if n <= 0 {
        return Err(PyRuntimeError::new_err(format!(
            "number of sections must be larger than 0, got {n}"
        )));
    }
    let size = x.size(dim).map_err(core_err)? as i64;
    let (base, extra) = (size / n, size % n);
    let mut idx = Vec::new();
    let mut at = 0;
    for i in 0..n - 1 {
        at += base + i64::from(i < extra);
        idx.push(at);
    }
    split_at(x, &idx, dim)
}

enum Split {
    Sections(i64),
    Indices(Vec<i64>),
}

fn dir_split(x: &Tensor, name: &str, min_dim: usize, dim: i64, how: Split) -> PyResult<Out> {
    if x.dim() < min_dim {
        let what = match name {
            "hsplit" => "1",
            "vsplit" => "2",
            _ => "3",
        };
        return Err(PyRuntimeError::new_err(format!(
            "torch.{name} requires a tensor with at least {what} dimension, but got a tensor with {} dimensions!",
            x.dim()
        )));
    }
    match how {
        Split::Indices(v) => split_at(x, &v, dim),
        Split::Sections(n) => {
            let size = x.size(dim).map_err(core_err)? as i64;
            if n == 0 || size % n != 0 {
                return Err(PyRuntimeError::new_err(format!(
                    "torch.{name} attempted to split along dimension {dim}, but the size of the dimension {size} is not divisible by the split_size {n}!"
                )));
            }
            sections(x, n, dim)
        }
    }
}

/// The tensor argument 0 takes `view`'s layout (same storage, keeps its view status).
fn relayout_arg(c: &Ctx<'_, '_>, view: Tensor) -> PyResult<Out> {
    let Value::Tensor(dst) = &c.values[0] else {
        return Err(PyTypeError::new_err(
            "internal: argument 0 should be a Tensor",
        ));
    };
    let mut d = dst.bind(c.py).borrow_mut();
    d.inner
        .set_layout(view.shape(), view.strides(), view.storage_offset())
        .map_err(core_err)?;
    Ok(Out::Arg(0))
}

/// `resize_`: the tensor becomes contiguous with `shape` over its storage, which grows in
/// place when too small (as upstream's does: every view of it sees the larger buffer).
fn resize_arg(c: &Ctx<'_, '_>, shape: &[usize]) -> PyResult<Out> {
    let x = c.tensor(0)?;
    let strides = torchnative_core::layout::contiguous_strides(shape);
    let numel: usize = shape.iter().product();
    if let Some(storage) = x.storage() {
        let need = (x.storage_offset() + numel) * x.dtype().size_in_bytes();
        storage.grow_to_bytes(need).map_err(core_err)?;
    }
    let Value::Tensor(dst) = &c.values[0] else {
        return Err(PyTypeError::new_err(
            "internal: argument 0 should be a Tensor",
        ));
    };
    let offset = x.storage_offset();
    dst.bind(c.py)
        .borrow_mut()
        .inner
        .set_layout(shape, &strides, offset)
        .map_err(core_err)?;
    Ok(Out::Arg(0))
}
