//! Copies, casts, aliases and views (view, reshape, permute, expand, as_strided, select...).

#![allow(unused_imports)]

use super::*;

pub(crate) fn register(t: &mut Table) {
    // ----- copies, casts, aliases -----
    t.insert("aten::clone", |c| ok(c.tensor(0)?.deep_clone()));
    t.insert("aten::contiguous", |c| ok(c.tensor(0)?.contiguous()));
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
    fn to_dtype_op(c: &Ctx<'_, '_>, dtype: DType, copy: bool) -> PyResult<Out> {
        let x = c.tensor(0)?;
        if x.dtype() == dtype && !copy {
            return Ok(Out::Arg(0));
        }
        let y = x.to_dtype(dtype).map_err(core_err)?;
        ok(Ok(if y.shares_storage(&x) {
            y.deep_clone().map_err(core_err)?
        } else {
            y
        }))
    }
    t.insert("aten::to.dtype", |c| {
        let d = c.opt_dtype(1)?.unwrap_or(DType::F32);
        to_dtype_op(c, d, c.bool(3)?)
    });
    t.insert("aten::to.device", |c| {
        c.device(1)?;
        let d = c.opt_dtype(2)?.unwrap_or(DType::F32);
        to_dtype_op(c, d, c.bool(4)?)
    });
    t.insert("aten::to.other", |c| {
        let d = c.tensor(1)?.dtype();
        to_dtype_op(c, d, c.bool(3)?)
    });
    t.insert("aten::to.dtype_layout", |c| {
        c.device(3)?;
        let x = c.tensor(0)?;
        let d = c.opt_dtype(1)?.unwrap_or(x.dtype());
        to_dtype_op(c, d, c.bool(6)?)
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
}
