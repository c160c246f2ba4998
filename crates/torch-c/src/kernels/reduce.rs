//! Reductions (sum, mean, prod, amax, max.dim, any/all, logsumexp), scans and softmax.

#![allow(unused_imports)]

use super::*;

pub(crate) fn register(t: &mut Table) {
    // ----- reductions -----
    t.insert("aten::sum", |c| {
        let x = c.tensor(0)?;
        let x = match c.opt_dtype(1)? {
            Some(d) => x.to_dtype(d).map_err(core_err)?,
            None => x,
        };
        ok(x.sum(&dims_or_all(None, x.dim()), false))
    });
    t.insert("aten::sum.dim_IntList", |c| {
        let x = c.tensor(0)?;
        let x = match c.opt_dtype(3)? {
            Some(d) => x.to_dtype(d).map_err(core_err)?,
            None => x,
        };
        ok(x.sum(&dims_or_all(c.opt_ints(1)?, x.dim()), c.bool(2)?))
    });
    t.insert("aten::mean", |c| {
        let x = c.tensor(0)?;
        let x = match c.opt_dtype(1)? {
            Some(d) => x.to_dtype(d).map_err(core_err)?,
            None => x,
        };
        ok(x.mean(&dims_or_all(None, x.dim()), false))
    });
    t.insert("aten::mean.dim", |c| {
        let x = c.tensor(0)?;
        let x = match c.opt_dtype(3)? {
            Some(d) => x.to_dtype(d).map_err(core_err)?,
            None => x,
        };
        ok(x.mean(&dims_or_all(c.opt_ints(1)?, x.dim()), c.bool(2)?))
    });
    t.insert("aten::prod", |c| {
        let x = c.tensor(0)?;
        ok(x.prod(&dims_or_all(None, x.dim()), false))
    });
    t.insert("aten::amax", |c| {
        let x = c.tensor(0)?;
        ok(x.amax(&dims_or_all(Some(c.ints(1)?), x.dim()), c.bool(2)?))
    });
    t.insert("aten::amin", |c| {
        let x = c.tensor(0)?;
        ok(x.amin(&dims_or_all(Some(c.ints(1)?), x.dim()), c.bool(2)?))
    });
    t.insert("aten::max", |c| ok(c.tensor(0)?.max()));
    t.insert("aten::min", |c| ok(c.tensor(0)?.min()));
    t.insert("aten::max.dim", |c| {
        let (v, i) = c
            .tensor(0)?
            .max_dim(c.int(1)?, c.bool(2)?)
            .map_err(core_err)?;
        Ok(Out::Tensors(vec![v, i]))
    });
    t.insert("aten::min.dim", |c| {
        let (v, i) = c
            .tensor(0)?
            .min_dim(c.int(1)?, c.bool(2)?)
            .map_err(core_err)?;
        Ok(Out::Tensors(vec![v, i]))
    });
    t.insert("aten::argmax", |c| {
        ok(c.tensor(0)?.argmax(c.opt_int(1)?, c.bool(2)?))
    });
    t.insert("aten::argmin", |c| {
        ok(c.tensor(0)?.argmin(c.opt_int(1)?, c.bool(2)?))
    });
    t.insert("aten::any", |c| {
        let x = c.tensor(0)?;
        ok(x.any(&dims_or_all(None, x.dim()), false))
    });
    t.insert("aten::all", |c| {
        let x = c.tensor(0)?;
        ok(x.all(&dims_or_all(None, x.dim()), false))
    });
    t.insert("aten::any.dim", |c| {
        ok(c.tensor(0)?.any(&[c.int(1)?], c.bool(2)?))
    });
    t.insert("aten::all.dim", |c| {
        ok(c.tensor(0)?.all(&[c.int(1)?], c.bool(2)?))
    });
    t.insert("aten::logsumexp", |c| {
        ok(c.tensor(0)?.logsumexp(&c.ints(1)?, c.bool(2)?))
    });
    t.insert("aten::cumsum", |c| {
        let x = c.tensor(0)?;
        let x = match c.opt_dtype(2)? {
            Some(d) => x.to_dtype(d).map_err(core_err)?,
            None if !x.dtype().is_float() => x.to_dtype(DType::I64).map_err(core_err)?,
            None => x,
        };
        ok(x.cumsum(c.int(1)?))
    });
    t.insert("aten::softmax.int", |c| {
        let x = c.tensor(0)?;
        let x = match c.opt_dtype(2)? {
            Some(d) => x.to_dtype(d).map_err(core_err)?,
            None => x,
        };
        ok(x.softmax(c.int(1)?))
    });
    t.insert("aten::_softmax", |c| ok(c.tensor(0)?.softmax(c.int(1)?)));
    t.insert("aten::log_softmax.int", |c| {
        let x = c.tensor(0)?;
        let x = match c.opt_dtype(2)? {
            Some(d) => x.to_dtype(d).map_err(core_err)?,
            None => x,
        };
        ok(x.log_softmax(c.int(1)?))
    });
    t.insert("aten::_log_softmax", |c| {
        ok(c.tensor(0)?.log_softmax(c.int(1)?))
    });
}
