//! Reductions (sum, mean, prod, nansum, var/std, amax, max.dim, median, mode, any/all,
//! logsumexp, norms), scans (cumsum, cumprod, cummax, logcumsumexp) and softmax.

#![allow(unused_imports)]

use super::*;
use torchnative_core::VarOptions;

/// `int[1]? dim`: None or `[]` reduce every dim.
fn dims_arg(c: &Ctx<'_, '_>, i: usize, x: &Tensor) -> PyResult<Vec<i64>> {
    Ok(dims_or_all(c.opt_ints(i)?, x.dim()))
}

/// The dtype an out= reduction computes in: `dtype=` when given, else the out tensor's.
fn out_dtype(c: &Ctx<'_, '_>, dtype_arg: usize, out_arg: usize) -> PyResult<Option<DType>> {
    Ok(match c.opt_dtype(dtype_arg)? {
        Some(d) => Some(d),
        None => Some(c.tensor(out_arg)?.dtype()),
    })
}

/// Writes a (values, indices)-style pair into two out= tensors and returns them.
pub(crate) fn write_pair(
    c: &Ctx<'_, '_>,
    a: usize,
    b: usize,
    r: (Tensor, Tensor),
) -> PyResult<Out> {
    c.write_into(a, r.0)?;
    c.write_into(b, r.1)?;
    Ok(Out::Args(vec![a, b]))
}

fn pair(r: torchnative_core::Result<(Tensor, Tensor)>) -> PyResult<Out> {
    let (a, b) = r.map_err(core_err)?;
    Ok(Out::Tensors(vec![a, b]))
}

/// A (values, indices) pair in new row-major tensors, size-1 dims strided as upstream's
/// freshly allocated outputs are.
fn row_major_pair(r: torchnative_core::Result<(Tensor, Tensor)>) -> PyResult<Out> {
    let (a, b) = r.map_err(core_err)?;
    Ok(Out::Tensors(vec![
        a.with_row_major_strides().map_err(core_err)?,
        b.with_row_major_strides().map_err(core_err)?,
    ]))
}

/// `Scalar? correction` (None = 1) for var/std.
fn var_opts(c: &Ctx<'_, '_>, corr: usize, keepdim: bool) -> PyResult<VarOptions> {
    Ok(VarOptions {
        correction: c.opt_scalar(corr)?.map(|s| s.to_f64()).unwrap_or(1.0),
        keepdim,
    })
}

fn unbiased(c: &Ctx<'_, '_>, i: usize, keepdim: bool) -> PyResult<VarOptions> {
    Ok(VarOptions {
        correction: if c.bool(i)? { 1.0 } else { 0.0 },
        keepdim,
    })
}

fn var_or_std(
    x: &Tensor,
    dims: &[i64],
    o: VarOptions,
    std: bool,
) -> torchnative_core::Result<Tensor> {
    if std {
        x.std(dims, o)
    } else {
        x.var(dims, o)
    }
}

/// `linalg.matrix_norm` for the orders computed without decompositions.
fn matrix_norm(
    x: &Tensor,
    ord: &str,
    dims: &[i64],
    keepdim: bool,
    dtype: Option<DType>,
) -> PyResult<Tensor> {
    torchnative_core::ops::linalg::matrix_norm(x, ord, dims, keepdim, dtype).map_err(core_err)
}

fn ord_name(s: Scalar) -> String {
    let v = s.to_f64();
    if v == f64::INFINITY {
        "inf".into()
    } else if v == f64::NEG_INFINITY {
        "-inf".into()
    } else {
        format!("{}", v as i64)
    }
}

/// `torch.linalg.norm`: vector norm unless the dims (or a 2-D input with an order) ask for a
/// matrix norm.
fn linalg_norm(c: &Ctx<'_, '_>, ord: Option<String>, ord_val: Option<f64>) -> PyResult<Tensor> {
    let x = c.tensor(0)?;
    let dims = c.opt_ints(2)?;
    let keepdim = c.bool(3)?;
    let dtype = c.opt_dtype(4)?;
    let matrix = match &dims {
        Some(d) => d.len() == 2,
        None => ord.is_some() && x.dim() == 2,
    };
    if matrix {
        let d = dims.unwrap_or_else(|| vec![-2, -1]);
        return matrix_norm(&x, ord.as_deref().unwrap_or("fro"), &d, keepdim, dtype);
    }
    let d = dims_or_all(dims, x.dim());
    x.vector_norm(ord_val.unwrap_or(2.0), &d, keepdim, dtype)
        .map_err(core_err)
}

pub(crate) fn register(t: &mut Table) {
    // ----- sum / nansum / prod / mean / nanmean -----
    t.insert("aten::sum", |c| {
        let x = c.tensor(0)?;
        ok(x.sum_dtype(&[], false, c.opt_dtype(1)?))
    });
    t.insert("aten::sum.dim_IntList", |c| {
        let x = c.tensor(0)?;
        ok(x.sum_dtype(&dims_arg(c, 1, &x)?, c.bool(2)?, c.opt_dtype(3)?))
    });
    t.insert("aten::sum.IntList_out", |c| {
        let x = c.tensor(0)?;
        let r = x
            .sum_dtype(&dims_arg(c, 1, &x)?, c.bool(2)?, out_dtype(c, 3, 4)?)
            .map_err(core_err)?;
        c.write_into(4, r)
    });
    t.insert("aten::nansum", |c| {
        let x = c.tensor(0)?;
        ok(x.nansum_dtype(&dims_arg(c, 1, &x)?, c.bool(2)?, c.opt_dtype(3)?))
    });
    t.insert("aten::nansum.out", |c| {
        let x = c.tensor(0)?;
        let r = x
            .nansum_dtype(&dims_arg(c, 1, &x)?, c.bool(2)?, out_dtype(c, 3, 4)?)
            .map_err(core_err)?;
        c.write_into(4, r)
    });
    t.insert("aten::prod", |c| {
        ok(c.tensor(0)?.prod_dtype(&[], false, c.opt_dtype(1)?))
    });
    t.insert("aten::prod.dim_int", |c| {
        ok(c.tensor(0)?
            .prod_dtype(&[c.int(1)?], c.bool(2)?, c.opt_dtype(3)?))
    });
    t.insert("aten::prod.int_out", |c| {
        let r = c
            .tensor(0)?
            .prod_dtype(&[c.int(1)?], c.bool(2)?, out_dtype(c, 3, 4)?)
            .map_err(core_err)?;
        c.write_into(4, r)
    });
    t.insert("aten::mean", |c| {
        ok(c.tensor(0)?.mean_dtype(&[], false, c.opt_dtype(1)?))
    });
    t.insert("aten::mean.dtype_out", |c| {
        let r = c
            .tensor(0)?
            .mean_dtype(&[], false, c.opt_dtype(1)?)
            .map_err(core_err)?;
        c.write_into(2, r)
    });
    t.insert("aten::mean.dim", |c| {
        let x = c.tensor(0)?;
        ok(x.mean_dtype(&dims_arg(c, 1, &x)?, c.bool(2)?, c.opt_dtype(3)?))
    });
    t.insert("aten::mean.out", |c| {
        let x = c.tensor(0)?;
        let r = x
            .mean_dtype(&dims_arg(c, 1, &x)?, c.bool(2)?, c.opt_dtype(3)?)
            .map_err(core_err)?;
        c.write_into(4, r)
    });
    t.insert("aten::nanmean", |c| {
        let x = c.tensor(0)?;
        ok(x.nanmean_dtype(&dims_arg(c, 1, &x)?, c.bool(2)?, c.opt_dtype(3)?))
    });
    t.insert("aten::nanmean.out", |c| {
        let x = c.tensor(0)?;
        let r = x
            .nanmean_dtype(&dims_arg(c, 1, &x)?, c.bool(2)?, c.opt_dtype(3)?)
            .map_err(core_err)?;
        c.write_into(4, r)
    });

    // ----- var / std -----
    t.insert("aten::var", |c| {
        let x = c.tensor(0)?;
        ok(x.var(&[], unbiased(c, 1, false)?))
    });
    t.insert("aten::std", |c| {
        let x = c.tensor(0)?;
        ok(x.std(&[], unbiased(c, 1, false)?))
    });
    t.insert("aten::var.dim", |c| {
        let x = c.tensor(0)?;
        ok(x.var(&dims_arg(c, 1, &x)?, unbiased(c, 2, c.bool(3)?)?))
    });
    t.insert("aten::std.dim", |c| {
        let x = c.tensor(0)?;
        ok(x.std(&dims_arg(c, 1, &x)?, unbiased(c, 2, c.bool(3)?)?))
    });
    t.insert("aten::var.correction", |c| {
        let x = c.tensor(0)?;
        ok(x.var(&dims_arg(c, 1, &x)?, var_opts(c, 2, c.bool(3)?)?))
    });
    t.insert("aten::std.correction", |c| {
        let x = c.tensor(0)?;
        ok(x.std(&dims_arg(c, 1, &x)?, var_opts(c, 2, c.bool(3)?)?))
    });
    t.insert("aten::var.out", |c| {
        let x = c.tensor(0)?;
        let r = var_or_std(&x, &dims_arg(c, 1, &x)?, unbiased(c, 2, c.bool(3)?)?, false);
        c.write_into(4, r.map_err(core_err)?)
    });
    t.insert("aten::std.out", |c| {
        let x = c.tensor(0)?;
        let r = var_or_std(&x, &dims_arg(c, 1, &x)?, unbiased(c, 2, c.bool(3)?)?, true);
        c.write_into(4, r.map_err(core_err)?)
    });
    t.insert("aten::var.correction_out", |c| {
        let x = c.tensor(0)?;
        let r = var_or_std(&x, &dims_arg(c, 1, &x)?, var_opts(c, 2, c.bool(3)?)?, false);
        c.write_into(4, r.map_err(core_err)?)
    });
    t.insert("aten::std.correction_out", |c| {
        let x = c.tensor(0)?;
        let r = var_or_std(&x, &dims_arg(c, 1, &x)?, var_opts(c, 2, c.bool(3)?)?, true);
        c.write_into(4, r.map_err(core_err)?)
    });
    t.insert("aten::var_mean", |c| {
        pair(c.tensor(0)?.var_mean(&[], unbiased(c, 1, false)?, false))
    });
    t.insert("aten::std_mean", |c| {
        pair(c.tensor(0)?.var_mean(&[], unbiased(c, 1, false)?, true))
    });
    t.insert("aten::var_mean.dim", |c| {
        let x = c.tensor(0)?;
        pair(x.var_mean(&dims_arg(c, 1, &x)?, unbiased(c, 2, c.bool(3)?)?, false))
    });
    t.insert("aten::std_mean.dim", |c| {
        let x = c.tensor(0)?;
        pair(x.var_mean(&dims_arg(c, 1, &x)?, unbiased(c, 2, c.bool(3)?)?, true))
    });
    t.insert("aten::var_mean.correction", |c| {
        let x = c.tensor(0)?;
        pair(x.var_mean(&dims_arg(c, 1, &x)?, var_opts(c, 2, c.bool(3)?)?, false))
    });
    t.insert("aten::std_mean.correction", |c| {
        let x = c.tensor(0)?;
        pair(x.var_mean(&dims_arg(c, 1, &x)?, var_opts(c, 2, c.bool(3)?)?, true))
    });

    // ----- amax / amin / max / min / argmax / argmin / aminmax -----
    t.insert("aten::amax", |c| {
        let x = c.tensor(0)?;
        ok(x.amax(&c.ints(1)?, c.bool(2)?))
    });
    t.insert("aten::amin", |c| {
        let x = c.tensor(0)?;
        ok(x.amin(&c.ints(1)?, c.bool(2)?))
    });
    t.insert("aten::amax.out", |c| {
        let r = c
            .tensor(0)?
            .amax(&c.ints(1)?, c.bool(2)?)
            .map_err(core_err)?;
        c.write_into(3, r)
    });
    t.insert("aten::amin.out", |c| {
        let r = c
            .tensor(0)?
            .amin(&c.ints(1)?, c.bool(2)?)
            .map_err(core_err)?;
        c.write_into(3, r)
    });
    t.insert("aten::max", |c| ok(c.tensor(0)?.max()));
    t.insert("aten::min", |c| ok(c.tensor(0)?.min()));
    t.insert("aten::max.unary_out", |c| {
        let r = c.tensor(0)?.max().map_err(core_err)?;
        c.write_into(1, r)
    });
    t.insert("aten::min.unary_out", |c| {
        let r = c.tensor(0)?.min().map_err(core_err)?;
        c.write_into(1, r)
    });
    t.insert("aten::max.other", |c| {
        ok(c.tensor(0)?.maximum(&c.tensor(1)?))
    });
    t.insert("aten::min.other", |c| {
        ok(c.tensor(0)?.minimum(&c.tensor(1)?))
    });
    t.insert("aten::max.out", |c| {
        let r = c.tensor(0)?.maximum(&c.tensor(1)?).map_err(core_err)?;
        c.write_into(2, r)
    });
    t.insert("aten::min.out", |c| {
        let r = c.tensor(0)?.minimum(&c.tensor(1)?).map_err(core_err)?;
        c.write_into(2, r)
    });
    t.insert("aten::max.dim", |c| {
        pair(c.tensor(0)?.max_dim(c.int(1)?, c.bool(2)?))
    });
    t.insert("aten::min.dim", |c| {
        pair(c.tensor(0)?.min_dim(c.int(1)?, c.bool(2)?))
    });
    t.insert("aten::max.dim_max", |c| {
        let r = c
            .tensor(0)?
            .max_dim(c.int(1)?, c.bool(2)?)
            .map_err(core_err)?;
        write_pair(c, 3, 4, r)
    });
    t.insert("aten::min.dim_min", |c| {
        let r = c
            .tensor(0)?
            .min_dim(c.int(1)?, c.bool(2)?)
            .map_err(core_err)?;
        write_pair(c, 3, 4, r)
    });
    t.insert("aten::argmax", |c| {
        ok(c.tensor(0)?.argmax(c.opt_int(1)?, c.bool(2)?))
    });
    t.insert("aten::argmin", |c| {
        ok(c.tensor(0)?.argmin(c.opt_int(1)?, c.bool(2)?))
    });
    t.insert("aten::argmax.out", |c| {
        let r = c
            .tensor(0)?
            .argmax(c.opt_int(1)?, c.bool(2)?)
            .map_err(core_err)?;
        c.write_into(3, r)
    });
    t.insert("aten::argmin.out", |c| {
        let r = c
            .tensor(0)?
            .argmin(c.opt_int(1)?, c.bool(2)?)
            .map_err(core_err)?;
        c.write_into(3, r)
    });
    t.insert("aten::aminmax", |c| {
        pair(c.tensor(0)?.aminmax(c.opt_int(1)?, c.bool(2)?))
    });
    t.insert("aten::aminmax.out", |c| {
        let r = c
            .tensor(0)?
            .aminmax(c.opt_int(1)?, c.bool(2)?)
            .map_err(core_err)?;
        write_pair(c, 3, 4, r)
    });

    // ----- median / nanmedian / mode / kthvalue -----
    t.insert("aten::median", |c| ok(c.tensor(0)?.median_all(false)));
    t.insert("aten::nanmedian", |c| ok(c.tensor(0)?.median_all(true)));
    t.insert("aten::median.dim", |c| {
        pair(c.tensor(0)?.median_dim(c.int(1)?, c.bool(2)?, false))
    });
    t.insert("aten::nanmedian.dim", |c| {
        pair(c.tensor(0)?.median_dim(c.int(1)?, c.bool(2)?, true))
    });
    t.insert("aten::median.dim_values", |c| {
        let r = c
            .tensor(0)?
            .median_dim(c.int(1)?, c.bool(2)?, false)
            .map_err(core_err)?;
        write_pair(c, 3, 4, r)
    });
    t.insert("aten::nanmedian.dim_values", |c| {
        let r = c
            .tensor(0)?
            .median_dim(c.int(1)?, c.bool(2)?, true)
            .map_err(core_err)?;
        write_pair(c, 3, 4, r)
    });
    t.insert("aten::mode", |c| {
        row_major_pair(c.tensor(0)?.mode_as_aten(c.int(1)?, c.bool(2)?))
    });
    t.insert("aten::mode.values", |c| {
        let r = c
            .tensor(0)?
            .mode_as_aten(c.int(1)?, c.bool(2)?)
            .map_err(core_err)?;
        write_pair(c, 3, 4, r)
    });
    t.insert("aten::kthvalue", |c| {
        row_major_pair(
            c.tensor(0)?
                .kthvalue_as_aten(c.int(1)?, c.int(2)?, c.bool(3)?),
        )
    });
    t.insert("aten::kthvalue.values", |c| {
        let r = c
            .tensor(0)?
            .kthvalue_as_aten(c.int(1)?, c.int(2)?, c.bool(3)?)
            .map_err(core_err)?;
        write_pair(c, 4, 5, r)
    });

    // ----- any / all / count_nonzero -----
    t.insert("aten::any", |c| ok(c.tensor(0)?.any(&[], false)));
    t.insert("aten::all", |c| ok(c.tensor(0)?.all(&[], false)));
    // Upstream's internal helpers behind `torch._assert_async`-style checks: bool input only.
    t.insert("aten::_is_all_true", |c| {
        let x = c.tensor(0)?;
        bool_only("_is_all_true", &x)?;
        ok(x.all(&[], false))
    });
    t.insert("aten::_is_any_true", |c| {
        let x = c.tensor(0)?;
        bool_only("_is_any_true", &x)?;
        ok(x.any(&[], false))
    });
    t.insert("aten::any.all_out", |c| {
        let r = c.tensor(0)?.any(&[], false).map_err(core_err)?;
        c.write_into(1, r)
    });
    t.insert("aten::all.all_out", |c| {
        let r = c.tensor(0)?.all(&[], false).map_err(core_err)?;
        c.write_into(1, r)
    });
    t.insert("aten::any.dim", |c| {
        ok(c.tensor(0)?.any(&[c.int(1)?], c.bool(2)?))
    });
    t.insert("aten::all.dim", |c| {
        ok(c.tensor(0)?.all(&[c.int(1)?], c.bool(2)?))
    });
    t.insert("aten::any.out", |c| {
        let r = c
            .tensor(0)?
            .any(&[c.int(1)?], c.bool(2)?)
            .map_err(core_err)?;
        c.write_into(3, r)
    });
    t.insert("aten::all.out", |c| {
        let r = c
            .tensor(0)?
            .all(&[c.int(1)?], c.bool(2)?)
            .map_err(core_err)?;
        c.write_into(3, r)
    });
    t.insert("aten::any.dims", |c| {
        let x = c.tensor(0)?;
        ok(x.any(&dims_arg(c, 1, &x)?, c.bool(2)?))
    });
    t.insert("aten::all.dims", |c| {
        let x = c.tensor(0)?;
        ok(x.all(&dims_arg(c, 1, &x)?, c.bool(2)?))
    });
    t.insert("aten::any.dims_out", |c| {
        let x = c.tensor(0)?;
        let r = x.any(&dims_arg(c, 1, &x)?, c.bool(2)?).map_err(core_err)?;
        c.write_into(3, r)
    });
    t.insert("aten::all.dims_out", |c| {
        let x = c.tensor(0)?;
        let r = x.all(&dims_arg(c, 1, &x)?, c.bool(2)?).map_err(core_err)?;
        c.write_into(3, r)
    });
    t.insert("aten::count_nonzero", |c| {
        let x = c.tensor(0)?;
        let dims = match c.opt_int(1)? {
            Some(d) => vec![d],
            None => vec![],
        };
        ok(x.count_nonzero(&dims))
    });
    t.insert("aten::count_nonzero.dim_IntList", |c| {
        let x = c.tensor(0)?;
        let d = c.ints(1)?;
        if d.is_empty() {
            // count_nonzero(x, dim=()) reduces nothing.
            return ok(x.ne(false).and_then(|b| b.to_dtype(DType::I64)));
        }
        ok(x.count_nonzero(&d))
    });

    // ----- logsumexp -----
    t.insert("aten::logsumexp", |c| {
        let x = c.tensor(0)?;
        ok(x.logsumexp(&dims_arg(c, 1, &x)?, c.bool(2)?))
    });
    t.insert("aten::logsumexp.out", |c| {
        let x = c.tensor(0)?;
        let r = x
            .logsumexp(&dims_arg(c, 1, &x)?, c.bool(2)?)
            .map_err(core_err)?;
        c.write_into(3, r)
    });

    // ----- scans -----
    t.insert("aten::cumsum", |c| {
        ok(c.tensor(0)?.cumsum_dtype(c.int(1)?, c.opt_dtype(2)?))
    });
    t.insert("aten::cumsum_", |c| {
        let x = c.tensor(0)?;
        let d = c.opt_dtype(2)?.unwrap_or(x.dtype());
        let r = x.cumsum_dtype(c.int(1)?, Some(d)).map_err(core_err)?;
        c.write_into(0, r)
    });
    t.insert("aten::cumsum.out", |c| {
        let r = c
            .tensor(0)?
            .cumsum_dtype(c.int(1)?, out_dtype(c, 2, 3)?)
            .map_err(core_err)?;
        c.write_into(3, r)
    });
    t.insert("aten::cumprod", |c| {
        ok(c.tensor(0)?.cumprod_dtype(c.int(1)?, c.opt_dtype(2)?))
    });
    t.insert("aten::cumprod_", |c| {
        let x = c.tensor(0)?;
        let d = c.opt_dtype(2)?.unwrap_or(x.dtype());
        let r = x.cumprod_dtype(c.int(1)?, Some(d)).map_err(core_err)?;
        c.write_into(0, r)
    });
    t.insert("aten::cumprod.out", |c| {
        let r = c
            .tensor(0)?
            .cumprod_dtype(c.int(1)?, out_dtype(c, 2, 3)?)
            .map_err(core_err)?;
        c.write_into(3, r)
    });
    t.insert("aten::logcumsumexp", |c| {
        ok(c.tensor(0)?.logcumsumexp(c.int(1)?))
    });
    t.insert("aten::logcumsumexp.out", |c| {
        let r = c.tensor(0)?.logcumsumexp(c.int(1)?).map_err(core_err)?;
        c.write_into(2, r)
    });
    t.insert("aten::cummax", |c| {
        pair(c.tensor(0)?.cum_extreme(c.int(1)?, true))
    });
    t.insert("aten::cummin", |c| {
        pair(c.tensor(0)?.cum_extreme(c.int(1)?, false))
    });
    t.insert("aten::cummax.out", |c| {
        let r = c
            .tensor(0)?
            .cum_extreme(c.int(1)?, true)
            .map_err(core_err)?;
        write_pair(c, 2, 3, r)
    });
    t.insert("aten::cummin.out", |c| {
        let r = c
            .tensor(0)?
            .cum_extreme(c.int(1)?, false)
            .map_err(core_err)?;
        write_pair(c, 2, 3, r)
    });

    // ----- norms -----
    t.insert("aten::linalg_vector_norm", |c| {
        let x = c.tensor(0)?;
        ok(x.vector_norm(
            c.scalar(1)?.to_f64(),
            &dims_arg(c, 2, &x)?,
            c.bool(3)?,
            c.opt_dtype(4)?,
        ))
    });
    t.insert("aten::linalg_vector_norm.out", |c| {
        let x = c.tensor(0)?;
        let r = x
            .vector_norm(
                c.scalar(1)?.to_f64(),
                &dims_arg(c, 2, &x)?,
                c.bool(3)?,
                c.opt_dtype(4)?,
            )
            .map_err(core_err)?;
        c.write_into(5, r)
    });
    t.insert("aten::norm.Scalar", |c| {
        ok(c.tensor(0)?
            .vector_norm(c.scalar(1)?.to_f64(), &[], false, None))
    });
    t.insert("aten::norm.ScalarOpt_dtype", |c| {
        let p = c.opt_scalar(1)?.map(|s| s.to_f64()).unwrap_or(2.0);
        ok(c.tensor(0)?.vector_norm(p, &[], false, c.opt_dtype(2)?))
    });
    t.insert("aten::norm.ScalarOpt_dim", |c| {
        let x = c.tensor(0)?;
        let p = c.opt_scalar(1)?.map(|s| s.to_f64()).unwrap_or(2.0);
        ok(x.vector_norm(p, &dims_arg(c, 2, &x)?, c.bool(3)?, None))
    });
    t.insert("aten::norm.ScalarOpt_dim_dtype", |c| {
        let x = c.tensor(0)?;
        let p = c.opt_scalar(1)?.map(|s| s.to_f64()).unwrap_or(2.0);
        ok(x.vector_norm(p, &dims_arg(c, 2, &x)?, c.bool(3)?, c.opt_dtype(4)?))
    });
    t.insert("aten::norm.out", |c| {
        let x = c.tensor(0)?;
        let p = c.opt_scalar(1)?.map(|s| s.to_f64()).unwrap_or(2.0);
        let r = x
            .vector_norm(p, &dims_arg(c, 2, &x)?, c.bool(3)?, None)
            .map_err(core_err)?;
        c.write_into(4, r)
    });
    t.insert("aten::norm.dtype_out", |c| {
        let x = c.tensor(0)?;
        let p = c.opt_scalar(1)?.map(|s| s.to_f64()).unwrap_or(2.0);
        let r = x
            .vector_norm(p, &dims_arg(c, 2, &x)?, c.bool(3)?, c.opt_dtype(4)?)
            .map_err(core_err)?;
        c.write_into(5, r)
    });
    t.insert("aten::linalg_norm", |c| {
        let ord = c.opt_scalar(1)?;
        Ok(Out::Tensor(linalg_norm(
            c,
            ord.map(ord_name),
            ord.map(|s| s.to_f64()),
        )?))
    });
    t.insert("aten::linalg_norm.ord_str", |c| {
        Ok(Out::Tensor(linalg_norm(c, Some(c.str(1)?), None)?))
    });
    t.insert("aten::linalg_matrix_norm", |c| {
        let x = c.tensor(0)?;
        Ok(Out::Tensor(matrix_norm(
            &x,
            &ord_name(c.scalar(1)?),
            &c.ints(2)?,
            c.bool(3)?,
            c.opt_dtype(4)?,
        )?))
    });
    t.insert("aten::linalg_matrix_norm.str_ord", |c| {
        let x = c.tensor(0)?;
        Ok(Out::Tensor(matrix_norm(
            &x,
            &c.str(1)?,
            &c.ints(2)?,
            c.bool(3)?,
            c.opt_dtype(4)?,
        )?))
    });

    // ----- softmax -----
    t.insert("aten::softmax.int", |c| {
        let x = c.tensor(0)?;
        let x = match c.opt_dtype(2)? {
            Some(d) => x.to_dtype(d).map_err(core_err)?,
            None => x,
        };
        ok(x.softmax(c.int(1)?))
    });
    t.insert("aten::softmax.int_out", |c| {
        let x = c.tensor(0)?;
        let x = match c.opt_dtype(2)? {
            Some(d) => x.to_dtype(d).map_err(core_err)?,
            None => x,
        };
        let r = x.softmax(c.int(1)?).map_err(core_err)?;
        c.write_into(3, r)
    });
    t.insert("aten::_softmax", |c| {
        let x = c.tensor(0)?;
        let x = if c.bool(2)? {
            x.to_dtype(DType::F32).map_err(core_err)?
        } else {
            x
        };
        ok(x.softmax(c.int(1)?))
    });
    t.insert("aten::log_softmax.int", |c| {
        let x = c.tensor(0)?;
        let x = match c.opt_dtype(2)? {
            Some(d) => x.to_dtype(d).map_err(core_err)?,
            None => x,
        };
        ok(x.log_softmax(c.int(1)?))
    });
    t.insert("aten::log_softmax.int_out", |c| {
        let x = c.tensor(0)?;
        let x = match c.opt_dtype(2)? {
            Some(d) => x.to_dtype(d).map_err(core_err)?,
            None => x,
        };
        let r = x.log_softmax(c.int(1)?).map_err(core_err)?;
        c.write_into(3, r)
    });
    t.insert("aten::_log_softmax", |c| {
        let x = c.tensor(0)?;
        let x = if c.bool(2)? {
            x.to_dtype(DType::F32).map_err(core_err)?
        } else {
            x
        };
        ok(x.log_softmax(c.int(1)?))
    });
}

fn bool_only(op: &'static str, x: &Tensor) -> PyResult<()> {
    if x.dtype() != DType::Bool {
        return Err(PyRuntimeError::new_err(format!(
            "{op}: expected a bool tensor, got {}",
            x.dtype().name()
        )));
    }
    Ok(())
}
