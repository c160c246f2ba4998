//! Indexing, joining and splitting: cat, stack, gather, index_select, masked ops, sort, topk.

#![allow(unused_imports)]

use super::*;
use pyo3::exceptions::PyIndexError;
use torchnative_core::ops::index::Reduction;

/// Registers the functional, in-place (argument 0) and out= (argument `$out`) forms of an op
/// computed out of place by `$f`.
macro_rules! forms {
    ($t:ident, $name:literal, $inplace:literal, $outname:literal, $out:expr, $f:expr) => {{
        fn f(c: &Ctx<'_, '_>) -> PyResult<Tensor> {
            let g: fn(&Ctx<'_, '_>) -> PyResult<Tensor> = $f;
            g(c)
        }
        $t.insert($name, |c| Ok(Out::Tensor(f(c)?)));
        $t.insert($inplace, |c| {
            let r = f(c)?;
            c.write_into(0, r)
        });
        $t.insert($outname, |c| {
            let r = f(c)?;
            c.write_into($out, r)
        });
    }};
}
use forms;

pub(crate) fn register(t: &mut Table) {
    // ----- indexing, joining -----
    t.insert("aten::cat", |c| {
        let ts = c.tensors(0)?;
        let refs: Vec<&Tensor> = ts.iter().collect();
        ok(torchnative_core::cat(&refs, c.int(1)?))
    });
    t.insert("aten::stack", |c| {
        let ts = c.tensors(0)?;
        let refs: Vec<&Tensor> = ts.iter().collect();
        ok(torchnative_core::stack(&refs, c.int(1)?))
    });
    t.insert("aten::index_select", |c| {
        ok(c.tensor(0)?.index_select(c.int(1)?, &c.tensor(2)?))
    });
    t.insert("aten::masked_select", |c| {
        ok(c.tensor(0)?.masked_select(&c.tensor(1)?))
    });
    t.insert("aten::masked_fill.Scalar", |c| {
        ok(c.tensor(0)?.masked_fill(&c.tensor(1)?, c.scalar(2)?))
    });
    t.insert("aten::masked_fill_.Scalar", |c| {
        c.tensor(0)?
            .masked_fill_(&c.tensor(1)?, c.scalar(2)?)
            .map_err(core_err)?;
        Ok(Out::Arg(0))
    });
    t.insert("aten::tril", |c| ok(c.tensor(0)?.tril(c.int(1)?)));
    t.insert("aten::triu", |c| ok(c.tensor(0)?.triu(c.int(1)?)));
    t.insert("aten::flip", |c| ok(c.tensor(0)?.flip(&c.ints(1)?)));
    t.insert("aten::roll", |c| {
        ok(c.tensor(0)?.roll(&c.ints(1)?, &c.ints(2)?))
    });
    t.insert("aten::embedding", |c| {
        ok(torchnative_core::embedding(&c.tensor(1)?, &c.tensor(0)?))
    });
    t.insert("aten::split.Tensor", |c| {
        let size = to_shape(&[c.int(1)?])?[0];
        c.tensor(0)?
            .split(size, c.int(2)?)
            .map(Out::Tensors)
            .map_err(core_err)
    });
    t.insert("aten::split_with_sizes", |c| {
        let sizes = to_shape(&c.ints(1)?)?;
        c.tensor(0)?
            .split_with_sizes(&sizes, c.int(2)?)
            .map(Out::Tensors)
            .map_err(core_err)
    });
    // unsafe_chunk: chunk without autograd's view tracking (the same tensors here).
    t.insert("aten::unsafe_chunk", |c| {
        let n = to_shape(&[c.int(1)?])?[0];
        c.tensor(0)?
            .chunk(n, c.int(2)?)
            .map(Out::Tensors)
            .map_err(core_err)
    });
    t.insert("aten::sum_to_size", sum_to_size);
    t.insert("aten::embedding_renorm_", |c| {
        embedding_renorm(c)?;
        Ok(Out::Arg(0))
    });
    t.insert("aten::chunk", |c| {
        let n = to_shape(&[c.int(1)?])?[0];
        c.tensor(0)?
            .chunk(n, c.int(2)?)
            .map(Out::Tensors)
            .map_err(core_err)
    });
    t.insert("aten::topk", |c| {
        let x = c.tensor(0)?;
        if x.dtype() == DType::Bool {
            let size = if x.dim() == 0 {
                1
            } else {
                x.size(c.int(2)?).map_err(core_err)?
            };
            if c.int(1)? < 0 || c.int(1)? as usize > size {
                return Err(PyRuntimeError::new_err("selected index k out of range"));
            }
            return Err(pyo3::exceptions::PyNotImplementedError::new_err(
                "topk does not support bool dtypes on CPU",
            ));
        }
        let k = to_shape(&[c.int(1)?])?[0];
        let (v, i) = c
            .tensor(0)?
            .topk_as_aten(k, c.int(2)?, c.bool(3)?, c.bool(4)?)
            .and_then(|(v, i)| Ok((v.with_row_major_strides()?, i.with_row_major_strides()?)))
            .map_err(core_err)?;
        Ok(Out::Tensors(vec![v, i]))
    });
    t.insert("aten::sort", |c| {
        sorted_like(&c.tensor(0)?, c.int(1)?, c.bool(2)?, false)
    });

    // ----- scatter / gather family -----
    // (`forms!` registers three names; the ones upstream does not define are removed below.)
    forms!(
        t,
        "aten::scatter.src",
        "aten::scatter_.src",
        "aten::scatter.src_out",
        4,
        |c| {
            let x = c.tensor(0)?;
            x.scatter(c.int(1)?, &c.tensor(2)?, &c.tensor(3)?)
                .map_err(core_err)
        }
    );
    forms!(
        t,
        "aten::scatter.value",
        "aten::scatter_.value",
        "aten::scatter.value_out",
        4,
        |c| {
            let x = c.tensor(0)?;
            x.scatter_value(c.int(1)?, &c.tensor(2)?, c.scalar(3)?)
                .map_err(core_err)
        }
    );
    forms!(
        t,
        "aten::scatter.reduce",
        "aten::scatter_.reduce",
        "aten::scatter.reduce_out",
        5,
        |c| {
            let x = c.tensor(0)?;
            let r = scatter_mode(&c.str(4)?)?;
            x.scatter_reduce(c.int(1)?, &c.tensor(2)?, &c.tensor(3)?, r, true)
                .map_err(core_err)
        }
    );
    forms!(
        t,
        "aten::scatter.value_reduce",
        "aten::scatter_.value_reduce",
        "aten::scatter.value_reduce_out",
        5,
        |c| {
            let x = c.tensor(0)?;
            let r = scatter_mode(&c.str(4)?)?;
            let v = Tensor::scalar_tensor(c.scalar(3)?, x.dtype());
            x.scatter_reduce(c.int(1)?, &c.tensor(2)?, &v, r, true)
                .map_err(core_err)
        }
    );
    forms!(
        t,
        "aten::scatter_add",
        "aten::scatter_add_",
        "aten::scatter_add.out",
        4,
        |c| {
            let x = c.tensor(0)?;
            x.scatter_add(c.int(1)?, &c.tensor(2)?, &c.tensor(3)?)
                .map_err(core_err)
        }
    );
    forms!(
        t,
        "aten::scatter_reduce.two",
        "aten::scatter_reduce_.two",
        "aten::scatter_reduce.two_out",
        6,
        |c| {
            let x = c.tensor(0)?;
            let name = c.str(4)?;
            let r = Reduction::parse(&name)
                .filter(|_| name != "add" && name != "multiply")
                .ok_or_else(|| {
                    PyRuntimeError::new_err(format!(
                        "reduce argument must be either sum, prod, mean, amax or amin, got {name}"
                    ))
                })?;
            x.scatter_reduce(c.int(1)?, &c.tensor(2)?, &c.tensor(3)?, r, c.bool(5)?)
                .map_err(core_err)
        }
    );
    forms!(
        t,
        "aten::index_reduce",
        "aten::index_reduce_",
        "aten::index_reduce.out",
        6,
        |c| {
            let x = c.tensor(0)?;
            let name = c.str(4)?;
            let r = match name.as_str() {
            "prod" | "mean" | "amax" | "amin" => Reduction::parse(&name),
            _ => None,
        }
        .ok_or_else(|| {
            PyRuntimeError::new_err(format!(
                "index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got {name}."
            ))
        })?;
            let src = c.tensor(3)?;
            same_dtype("index_reduce_", &x, &src)?;
            x.index_reduce(c.int(1)?, &c.tensor(2)?, &src, r, c.bool(5)?)
                .map_err(core_err)
        }
    );
    forms!(
        t,
        "aten::index_add",
        "aten::index_add_",
        "aten::index_add.out",
        5,
        |c| {
            let x = c.tensor(0)?;
            let src = c.tensor(3)?;
            same_dtype("index_add_", &x, &src)?;
            let alpha = c.scalar(4)?;
            let src = if alpha.to_f64() == 1.0 {
                src
            } else {
                src.mul(alpha)
                    .and_then(|s| s.to_dtype(x.dtype()))
                    .map_err(core_err)?
            };
            x.index_reduce(c.int(1)?, &c.tensor(2)?, &src, Reduction::Sum, true)
                .map_err(core_err)
        }
    );
    forms!(
        t,
        "aten::index_copy",
        "aten::index_copy_",
        "aten::index_copy.out",
        4,
        |c| {
            let x = c.tensor(0)?.deep_clone().map_err(core_err)?;
            x.index_copy_(c.int(1)?, &c.tensor(2)?, &c.tensor(3)?)
                .map_err(core_err)?;
            Ok(x)
        }
    );
    forms!(
        t,
        "aten::index_fill.int_Scalar",
        "aten::index_fill_.int_Scalar",
        "aten::index_fill.int_Scalar_out",
        4,
        |c| { index_fill(&c.tensor(0)?, c.int(1)?, &c.tensor(2)?, c.scalar(3)?) }
    );
    forms!(
        t,
        "aten::index_fill.int_Tensor",
        "aten::index_fill_.int_Tensor",
        "aten::index_fill.int_Tensor_out",
        4,
        |c| {
            let v = c.tensor(3)?;
            if v.dim() != 0 {
                return Err(PyRuntimeError::new_err(format!(
                "index_fill_ only supports a 0-dimensional value tensor, but got tensor with {} dimension(s).",
                v.dim()
            )));
            }
            index_fill(
                &c.tensor(0)?,
                c.int(1)?,
                &c.tensor(2)?,
                v.item().map_err(core_err)?,
            )
        }
    );
    forms!(
        t,
        "aten::index_put",
        "aten::index_put_",
        "aten::index_put.out",
        4,
        |c| {
            let x = c.tensor(0)?.deep_clone().map_err(core_err)?;
            index_put_into(c, &x)?;
            Ok(x)
        }
    );
    forms!(t, "aten::put", "aten::put_", "aten::put.out", 4, |c| {
        let x = c.tensor(0)?;
        let flat = x
            .contiguous()
            .and_then(|f| f.deep_clone())
            .map_err(core_err)?;
        let index = c.tensor(1)?;
        let source = c.tensor(2)?;
        if index.numel() != source.numel() {
            return Err(PyRuntimeError::new_err(format!(
                "put_(): Expected source and index to have the same number of elements, but got source.numel() = {}, index.numel() = {}",
                source.numel(),
                index.numel()
            )));
        }
        same_dtype("put_", &x, &source)?;
        let accumulate = c.bool(3)?;
        flat.view(&[-1])
            .and_then(|v| {
                v.index_put_(
                    &[index.reshape(&[-1])?],
                    &source.reshape(&[-1])?,
                    accumulate,
                )
            })
            .map_err(core_err)?;
        Ok(flat)
    });
    forms!(
        t,
        "aten::take",
        "aten::take_not_inplace",
        "aten::take.out",
        2,
        |c| {
            let x = c.tensor(0)?;
            let index = c.tensor(1)?;
            if index.dtype() != DType::I64 {
                return Err(PyRuntimeError::new_err(format!(
                    "take(): Expected a long tensor for index, but got {}",
                    scalar_type_name(index.dtype())
                )));
            }
            let n = x.numel() as i64;
            for i in index.to_vec::<i64>().map_err(core_err)? {
                if i < -n || i >= n {
                    return Err(PyIndexError::new_err(format!(
                        "out of range: tried to access index {i} on a tensor of {n} elements."
                    )));
                }
            }
            x.reshape(&[-1])
                .and_then(|f| f.index(&[index]))
                .map_err(core_err)
        }
    );
    forms!(
        t,
        "aten::take_along_dim",
        "aten::take_along_dim_not_inplace",
        "aten::take_along_dim.out",
        3,
        |c| {
            let x = c.tensor(0)?;
            let idx = c.tensor(1)?;
            if idx.dtype() != DType::I64 {
                return Err(PyRuntimeError::new_err(format!(
                    "torch.take_along_dim(): dtype of indices should be Long but got {}",
                    scalar_type_name(idx.dtype())
                )));
            }
            match c.opt_int(2)? {
                None => x
                    .reshape(&[-1])
                    .and_then(|f| f.gather(0, &idx.reshape(&[-1])?))
                    .map_err(core_err),
                Some(dim) => {
                    if x.dim() != idx.dim() {
                        return Err(PyRuntimeError::new_err(
                        "torch.take_along_dim(): input and indices should have the same number of dimensions",
                    ));
                    }
                    let d = torchnative_core::layout::wrap_dim("take_along_dim", dim, x.dim())
                        .map_err(core_err)?;
                    let mut xs: Vec<usize> = x.shape().to_vec();
                    let mut is: Vec<usize> = idx.shape().to_vec();
                    xs[d] = 1;
                    is[d] = 1;
                    let b = torchnative_core::layout::broadcast_shapes("take_along_dim", &xs, &is)
                        .map_err(core_err)?;
                    let mut xb: Vec<i64> = b.iter().map(|&v| v as i64).collect();
                    let mut ib = xb.clone();
                    xb[d] = x.shape()[d] as i64;
                    ib[d] = idx.shape()[d] as i64;
                    let xe = x.expand(&xb).map_err(core_err)?;
                    // Along a dim, upstream's take_along_dim wraps every index into the
                    // dim's range (Python's modulo: -1 is the last, size is the first).
                    let n = x.shape()[d] as i64;
                    let idx = if n > 0 {
                        let wrapped: Vec<i64> = idx
                            .to_vec::<i64>()
                            .map_err(core_err)?
                            .into_iter()
                            .map(|i| i.rem_euclid(n))
                            .collect();
                        Tensor::from_vec(wrapped, idx.shape()).map_err(core_err)?
                    } else {
                        idx
                    };
                    let ie = idx.expand(&ib).map_err(core_err)?;
                    xe.gather(d as i64, &ie).map_err(core_err)
                }
            }
        }
    );
    forms!(
        t,
        "aten::masked_scatter",
        "aten::masked_scatter_",
        "aten::masked_scatter.out",
        3,
        |c| {
            let x = c.tensor(0)?;
            let mask = c.tensor(1)?;
            let source = c.tensor(2)?;
            if mask.dtype() != DType::Bool {
                return Err(PyRuntimeError::new_err(format!(
                    "masked_scatter_ only supports boolean masks, but got mask with dtype {}",
                    scalar_type_name(mask.dtype())
                )));
            }
            same_dtype("masked_scatter_", &x, &source)?;
            let shape = torchnative_core::layout::broadcast_shapes(
                "masked_scatter",
                x.shape(),
                mask.shape(),
            )
            .map_err(core_err)?;
            let bshape: Vec<i64> = shape.iter().map(|&v| v as i64).collect();
            let out = x
                .expand(&bshape)
                .and_then(|e| e.contiguous())
                .and_then(|e| e.deep_clone())
                .map_err(core_err)?;
            let m = mask
                .expand(&bshape)
                .and_then(|m| m.contiguous())
                .map_err(core_err)?;
            let count = m
                .to_vec::<bool>()
                .map_err(core_err)?
                .iter()
                .filter(|&&b| b)
                .count();
            if source.numel() < count {
                return Err(PyRuntimeError::new_err(
                "masked_scatter: expected source to have at least as many elements as ones in mask",
            ));
            }
            let vals = source
                .reshape(&[-1])
                .and_then(|s| s.narrow(0, 0, count))
                .map_err(core_err)?;
            out.index_put_(&[m], &vals, false).map_err(core_err)?;
            Ok(out)
        }
    );
    forms!(
        t,
        "aten::masked_fill.Tensor",
        "aten::masked_fill_.Tensor",
        "aten::masked_fill.Tensor_out",
        3,
        |c| {
            let v = c.tensor(2)?;
            if v.dim() != 0 {
                return Err(PyRuntimeError::new_err(format!(
                "masked_fill_ only supports a 0-dimensional value tensor, but got tensor with {} dimension(s).",
                v.dim()
            )));
            }
            c.tensor(0)?
                .masked_fill(&c.tensor(1)?, v.item().map_err(core_err)?)
                .map_err(core_err)
        }
    );
    for fake in [
        "aten::index_fill.int_Scalar_out",
        "aten::index_fill.int_Tensor_out",
        "aten::index_put.out",
        "aten::put.out",
        "aten::take_not_inplace",
        "aten::take_along_dim_not_inplace",
        "aten::masked_scatter.out",
        "aten::masked_fill.Tensor_out",
    ] {
        t.remove(fake);
    }
    t.insert("aten::index.Tensor", |c| {
        let x = c.tensor(0)?;
        ok(Ok(index_in_place(c, &x, 1)?))
    });
    t.insert("aten::index.Tensor_out", |c| {
        let x = c.tensor(0)?;
        let r = index_in_place(c, &x, 1)?;
        c.write_into(2, r)
    });
    t.insert("aten::index_select.out", |c| {
        let r = c
            .tensor(0)?
            .index_select(c.int(1)?, &c.tensor(2)?)
            .map_err(core_err)?;
        c.write_into(3, r)
    });
    t.insert("aten::gather.out", |c| {
        let r = gather(c)?;
        c.write_into(4, r)
    });
    t.insert("aten::gather", |c| Ok(Out::Tensor(gather(c)?)));
    t.insert("aten::nonzero", |c| {
        Ok(Out::Tensor(nonzero_t(&c.tensor(0)?)?))
    });
    t.insert("aten::argwhere", |c| {
        Ok(Out::Tensor(nonzero_t(&c.tensor(0)?)?))
    });
    t.insert("aten::nonzero.out", |c| {
        let r = nonzero_t(&c.tensor(0)?)?;
        c.write_into(1, r)
    });
    t.insert("aten::nonzero_static", |c| {
        let x = c.tensor(0)?;
        let size = to_shape(&[c.int(1)?])?[0];
        let fill = c.int(2)?;
        let nz = torchnative_core::nonzero(&x).map_err(core_err)?;
        let nd = x.dim();
        let mut v = nz.to_vec::<i64>().map_err(core_err)?;
        v.truncate(size * nd);
        v.resize(size * nd, fill);
        ok(Tensor::from_i64s(&v, &[size, nd], DType::I64))
    });
    // ----- sorting, joining, repeating, searching (the shape family) -----
    t.insert("aten::sort.values", |c| {
        let r = c
            .tensor(0)?
            .sort_as_aten(c.int(1)?, c.bool(2)?, false)
            .map_err(core_err)?;
        super::reduce::write_pair(c, 3, 4, r)
    });
    t.insert("aten::sort.values_stable", |c| {
        let r = c
            .tensor(0)?
            .sort_as_aten(c.int(2)?, c.bool(3)?, opt_bool(c, 1)?)
            .map_err(core_err)?;
        super::reduce::write_pair(c, 4, 5, r)
    });
    t.insert("aten::sort.stable", |c| {
        sorted_like(&c.tensor(0)?, c.int(2)?, c.bool(3)?, opt_bool(c, 1)?)
    });
    t.insert("aten::argsort", |c| {
        let (_, i) = c
            .tensor(0)?
            .sort_as_aten(c.int(1)?, c.bool(2)?, false)
            .map_err(core_err)?;
        ok(Ok(i))
    });
    t.insert("aten::argsort.stable", |c| {
        let (_, i) = c
            .tensor(0)?
            .sort_as_aten(c.int(2)?, c.bool(3)?, c.bool(1)?)
            .map_err(core_err)?;
        ok(Ok(i))
    });
    t.insert("aten::msort", |c| {
        let (v, _) = c
            .tensor(0)?
            .sort(0, torchnative_core::SortOptions::default())
            .map_err(core_err)?;
        ok(Ok(v))
    });
    t.insert("aten::concat", |c| cat_dim(c, None));
    t.insert("aten::cat.out", |c| {
        let ts = c.tensors(0)?;
        let r =
            torchnative_core::cat(&ts.iter().collect::<Vec<_>>(), c.int(1)?).map_err(core_err)?;
        c.write_into(2, r)
    });
    t.insert("aten::concat.out", |c| {
        let ts = c.tensors(0)?;
        let r =
            torchnative_core::cat(&ts.iter().collect::<Vec<_>>(), c.int(1)?).map_err(core_err)?;
        c.write_into(2, r)
    });
    t.insert("aten::concatenate.out", |c| {
        let ts = c.tensors(0)?;
        let r =
            torchnative_core::cat(&ts.iter().collect::<Vec<_>>(), c.int(1)?).map_err(core_err)?;
        c.write_into(2, r)
    });
    t.insert("aten::concatenate", |c| cat_dim(c, None));
    t.insert("aten::hstack", |c| {
        let ts = atleast_all(c, 1)?;
        let dim = if ts.first().is_some_and(|t| t.dim() == 1) {
            0
        } else {
            1
        };
        ok(torchnative_core::cat(&ts.iter().collect::<Vec<_>>(), dim))
    });
    t.insert("aten::vstack", |c| {
        let ts = atleast_all(c, 2)?;
        ok(torchnative_core::cat(&ts.iter().collect::<Vec<_>>(), 0))
    });
    t.insert("aten::row_stack", |c| {
        let ts = atleast_all(c, 2)?;
        ok(torchnative_core::cat(&ts.iter().collect::<Vec<_>>(), 0))
    });
    t.insert("aten::dstack", |c| {
        let ts = atleast_all(c, 3)?;
        ok(torchnative_core::cat(&ts.iter().collect::<Vec<_>>(), 2))
    });
    t.insert("aten::column_stack", |c| {
        let ts = c
            .tensors(0)?
            .into_iter()
            .map(|t| {
                if t.dim() <= 1 {
                    t.reshape(&[t.numel() as i64, 1])
                } else {
                    Ok(t)
                }
            })
            .collect::<torchnative_core::Result<Vec<_>>>()
            .map_err(core_err)?;
        ok(torchnative_core::cat(&ts.iter().collect::<Vec<_>>(), 1))
    });
    t.insert("aten::flip", |c| {
        let x = c.tensor(0)?;
        let r = x.flip(&c.ints(1)?).map_err(core_err)?;
        ok(like_layout(&r, &x))
    });
    t.insert("aten::fliplr", |c| {
        let x = c.tensor(0)?;
        if x.dim() < 2 {
            return Err(PyRuntimeError::new_err("Input must be >= 2-d."));
        }
        let r = x.flip(&[1]).map_err(core_err)?;
        ok(like_layout(&r, &x))
    });
    t.insert("aten::flipud", |c| {
        let x = c.tensor(0)?;
        if x.dim() < 1 {
            return Err(PyRuntimeError::new_err("Input must be >= 1-d."));
        }
        let r = x.flip(&[0]).map_err(core_err)?;
        ok(like_layout(&r, &x))
    });
    t.insert("aten::repeat", |c| {
        let x = c.tensor(0)?;
        let reps = c.ints(1)?;
        if reps.len() < x.dim() {
            return Err(PyRuntimeError::new_err(
                "Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor",
            ));
        }
        ok(x.repeat(&to_shape(&reps)?))
    });
    t.insert("aten::tile", |c| {
        let x = c.tensor(0)?;
        let mut reps = c.ints(1)?;
        while reps.len() < x.dim() {
            reps.insert(0, 1);
        }
        ok(x.repeat(&to_shape(&reps)?))
    });
    t.insert("aten::repeat_interleave.self_int", |c| {
        let n = to_shape(&[c.int(1)?])?[0];
        ok(c.tensor(0)?.repeat_interleave(n, c.opt_int(2)?))
    });
    t.insert("aten::repeat_interleave.self_Tensor", |c| {
        ok(c.tensor(0)?
            .repeat_interleave_tensor(&c.tensor(1)?, c.opt_int(2)?))
    });
    t.insert("aten::repeat_interleave.Tensor", |c| {
        let reps = c.tensor(0)?;
        if reps.dim() > 1 {
            return Err(PyRuntimeError::new_err(
                "repeat_interleave only accept 1D vector as repeat",
            ));
        }
        let n = reps.numel();
        let idx: Vec<i64> = (0..n as i64).collect();
        let base = Tensor::from_i64s(&idx, &[n], DType::I64).map_err(core_err)?;
        ok(base.repeat_interleave_tensor(&reps, Some(0)))
    });
    t.insert("aten::diff", |c| {
        let x = c.tensor(0)?;
        let n = c.int(1)?;
        let dim = c.int(2)?;
        if x.dim() == 0 {
            return Err(PyRuntimeError::new_err(
                "diff expects input to be at least one-dimensional",
            ));
        }
        if n < 0 {
            return Err(PyRuntimeError::new_err(format!(
                "order must be non-negative but got {n}"
            )));
        }
        let mut parts = Vec::new();
        if let Some(p) = c.opt_tensor(3)? {
            parts.push(p);
        }
        parts.push(x.clone());
        if let Some(a) = c.opt_tensor(4)? {
            parts.push(a);
        }
        let mut cur = if parts.len() == 1 {
            x
        } else {
            torchnative_core::cat(&parts.iter().collect::<Vec<_>>(), dim).map_err(core_err)?
        };
        for _ in 0..n {
            let len = cur.size(dim).map_err(core_err)?;
            if len == 0 {
                break;
            }
            let hi = cur.narrow(dim, 1, len - 1).map_err(core_err)?;
            let lo = cur.narrow(dim, 0, len - 1).map_err(core_err)?;
            cur = if cur.dtype() == DType::Bool {
                hi.logical_xor(&lo)
            } else {
                hi.sub(&lo)
            }
            .map_err(core_err)?;
        }
        ok(Ok(cur))
    });
    t.insert("aten::searchsorted.Tensor", |c| {
        let right = side_right(c)?;
        ok(torchnative_core::ops::index::searchsorted(
            &c.tensor(0)?,
            &c.tensor(1)?,
            right,
            c.bool(2)?,
        ))
    });
    t.insert("aten::searchsorted.Scalar", |c| {
        let s = c.tensor(0)?;
        let v = Tensor::wrap_scalar(c.scalar(1)?);
        let right = side_right(c)?;
        ok(torchnative_core::ops::index::searchsorted(
            &s,
            &v,
            right,
            c.bool(2)?,
        ))
    });
    t.insert("aten::bucketize.Tensor", |c| {
        let b = c.tensor(1)?;
        if b.dim() != 1 {
            return Err(PyRuntimeError::new_err(format!(
                "boundaries tensor must be 1 dimension, but got dim({})",
                b.dim()
            )));
        }
        ok(torchnative_core::ops::index::searchsorted(
            &b,
            &c.tensor(0)?,
            c.bool(3)?,
            c.bool(2)?,
        ))
    });
    t.insert("aten::bucketize.Scalar", |c| {
        let b = c.tensor(1)?;
        let v = Tensor::scalar_tensor(c.scalar(0)?, b.dtype());
        ok(torchnative_core::ops::index::searchsorted(
            &b,
            &v,
            c.bool(3)?,
            c.bool(2)?,
        ))
    });
    t.insert("aten::histc", |c| {
        let x = c.tensor(0)?;
        let (lo, hi) = (c.scalar(2)?.to_f64(), c.scalar(3)?.to_f64());
        if x.dtype() == DType::U8 && (lo < 0.0 || hi < 0.0 || lo > 255.0 || hi > 255.0) {
            return Err(PyRuntimeError::new_err(
                "value cannot be converted to type uint8_t without overflow",
            ));
        }
        ok(torchnative_core::ops::index::histc(
            &c.tensor(0)?,
            c.int(1)?,
            c.scalar(2)?.to_f64(),
            c.scalar(3)?.to_f64(),
        ))
    });
    t.insert("aten::bincount", |c| {
        let w = c.opt_tensor(1)?;
        ok(torchnative_core::ops::index::bincount(
            &c.tensor(0)?,
            w.as_ref(),
            c.int(2)?,
        ))
    });
    t.insert("aten::isin.Tensor_Tensor", |c| {
        if c.tensor(0)?.dtype() == DType::Bool {
            return Err(pyo3::exceptions::PyNotImplementedError::new_err(
                "Unsupported input type encountered for isin(): Bool",
            ));
        }
        ok(torchnative_core::ops::index::isin(
            &c.tensor(0)?,
            &c.tensor(1)?,
            c.bool(3)?,
        ))
    });
    t.insert("aten::isin.Tensor_Scalar", |c| {
        let e = c.tensor(0)?;
        let s = Tensor::wrap_scalar(c.scalar(1)?);
        ok(torchnative_core::ops::index::isin(&e, &s, c.bool(3)?))
    });
    t.insert("aten::isin.Scalar_Tensor", |c| {
        let e = Tensor::wrap_scalar(c.scalar(0)?);
        ok(torchnative_core::ops::index::isin(
            &e,
            &c.tensor(1)?,
            c.bool(3)?,
        ))
    });
    t.insert("aten::type_as", |c| {
        let x = c.tensor(0)?;
        let d = c.tensor(1)?.dtype();
        if x.dtype() == d {
            return Ok(Out::Arg(0));
        }
        ok(x.to_dtype(d))
    });
    t.insert("aten::equal", |c| {
        let (a, b) = (c.tensor(0)?, c.tensor(1)?);
        if a.shape() != b.shape() {
            return Ok(Out::Scalar(Scalar::Bool(false)));
        }
        let same = a
            .eq(&b)
            .and_then(|e| e.to_vec::<bool>())
            .map_err(core_err)?;
        Ok(Out::Scalar(Scalar::Bool(same.iter().all(|&v| v))))
    });
    t.insert("aten::_unique2", |c| {
        let (v, i, n) = torchnative_core::ops::index::unique(&c.tensor(0)?).map_err(core_err)?;
        Ok(Out::Tensors(vec![v, i, n]))
    });
    t.insert("aten::unique_dim", |c| {
        let (v, i, n) =
            torchnative_core::ops::index::unique_dim(&c.tensor(0)?, c.int(1)?).map_err(core_err)?;
        Ok(Out::Tensors(vec![v, i, n]))
    });
    t.insert("aten::isclose", |c| {
        ok(torchnative_core::ops::index::isclose(
            &c.tensor(0)?,
            &c.tensor(1)?,
            c.float(2)?,
            c.float(3)?,
            c.bool(4)?,
        ))
    });
    t.insert("aten::allclose", |c| {
        let close = torchnative_core::ops::index::isclose(
            &c.tensor(0)?,
            &c.tensor(1)?,
            c.float(2)?,
            c.float(3)?,
            c.bool(4)?,
        )
        .and_then(|t| t.to_vec::<bool>())
        .map_err(core_err)?;
        Ok(Out::Scalar(Scalar::Bool(close.iter().all(|&b| b))))
    });
    t.insert("aten::trapezoid.dx", |c| {
        let y = c.tensor(0)?;
        no_bool_y(&y, "trapezoid")?;
        let dx = c.scalar(1)?.to_f64();
        ok(trapezoid_dx(&y, dx, c.int(2)?))
    });
    // trapz is trapezoid's older name.
    for name in ["aten::trapezoid.x", "aten::trapz.x"] {
        t.insert(name, |c| trapezoid_x_kernel(c, false));
    }
    t.insert("aten::trapz.dx", |c| {
        let y = c.tensor(0)?;
        no_bool_y(&y, "trapz")?;
        ok(trapezoid_dx(&y, c.float(1)?, c.int(2)?))
    });
    t.insert("aten::cumulative_trapezoid.x", |c| {
        trapezoid_x_kernel(c, true)
    });
    t.insert("aten::cumulative_trapezoid.dx", |c| {
        let y = c.tensor(0)?;
        no_bool_y(&y, "cumulative_trapezoid")?;
        let dx = c.scalar(1)?.to_f64();
        let dim = c.int(2)?;
        let n = y.size(dim).map_err(core_err)?;
        if n == 0 {
            return ok(Ok(y.clone()));
        }
        let left = y.narrow(dim, 0, n - 1).map_err(core_err)?;
        let right = y.narrow(dim, 1, n - 1).map_err(core_err)?;
        ok(left
            .add(&right)
            .and_then(|s| s.mul(Scalar::Float(dx / 2.0)))
            .and_then(|s| s.cumsum(dim)))
    });
    t.insert("aten::unique_consecutive", |c| {
        let x = c.tensor(0)?;
        if c.opt_int(3)?.is_some() {
            return Err(pyo3::exceptions::PyNotImplementedError::new_err(
                "unique_consecutive with dim= is not implemented in torchnative",
            ));
        }
        let v = x.to_vec::<f64>().map_err(core_err)?;
        let mut keep: Vec<i64> = Vec::new();
        let mut inverse = Vec::with_capacity(v.len());
        let mut counts: Vec<i64> = Vec::new();
        for (i, &e) in v.iter().enumerate() {
            let same = i > 0 && (v[i - 1] == e || (v[i - 1].is_nan() && e.is_nan()));
            if !same {
                keep.push(i as i64);
                counts.push(0);
            }
            if let Some(n) = counts.last_mut() {
                *n += 1;
            }
            inverse.push(keep.len() as i64 - 1);
        }
        let n = keep.len();
        let idx = Tensor::from_i64s(&keep, &[n], DType::I64).map_err(core_err)?;
        let values = x
            .reshape(&[-1])
            .and_then(|f| f.index(&[idx]))
            .map_err(core_err)?;
        Ok(Out::Tensors(vec![
            values,
            Tensor::from_i64s(&inverse, x.shape(), DType::I64).map_err(core_err)?,
            Tensor::from_i64s(&counts, &[n], DType::I64).map_err(core_err)?,
        ]))
    });
}

fn scatter_mode(name: &str) -> PyResult<Reduction> {
    match name {
        "add" | "multiply" | "sum" | "prod" | "mean" | "amax" | "amin" => {
            Reduction::parse(name).ok_or_else(|| PyRuntimeError::new_err("reduce"))
        }
        _ => Err(PyRuntimeError::new_err(format!(
            "reduce argument must be either add or multiply, got {name}"
        ))),
    }
}

fn same_dtype(op: &str, x: &Tensor, src: &Tensor) -> PyResult<()> {
    if x.dtype() != src.dtype() {
        return Err(PyRuntimeError::new_err(format!(
            "{op}(): self ({}) and source ({}) must have the same scalar type",
            scalar_type_name(x.dtype()),
            scalar_type_name(src.dtype())
        )));
    }
    Ok(())
}

fn index_fill(x: &Tensor, dim: i64, index: &Tensor, value: Scalar) -> PyResult<Tensor> {
    if !matches!(index.dtype(), DType::I64) {
        return Err(PyIndexError::new_err(format!(
            "index_fill_(): Expected dtype int64 for index, got {}",
            scalar_type_name(index.dtype())
        )));
    }
    let out = x.deep_clone().map_err(core_err)?;
    if out.dim() == 0 {
        let flat = out.reshape(&[1]).map_err(core_err)?;
        let v = Tensor::scalar_tensor(value, x.dtype());
        flat.index_put_(&[index.reshape(&[-1]).map_err(core_err)?], &v, false)
            .map_err(core_err)?;
        return Ok(out);
    }
    let d = torchnative_core::layout::wrap_dim("index_fill_", dim, out.dim()).map_err(core_err)?;
    let v = Tensor::scalar_tensor(value, x.dtype());
    out.transpose(0, d as i64)
        .and_then(|m| m.index_put_(&[index.reshape(&[-1])?], &v, false))
        .map_err(core_err)?;
    Ok(out)
}

/// `Tensor?[] indices` (argument `i`) of `x`: the view with the indexed dims leading (then the
/// dims before them, then those after), the index tensors, and how many dims came before.
/// `None` entries stand for whole dims; indexed dims must be adjacent.
fn leading_indices(
    c: &Ctx<'_, '_>,
    x: &Tensor,
    i: usize,
) -> PyResult<(Tensor, Vec<Tensor>, usize)> {
    let entries: Vec<Option<Tensor>> = match &c.values[i] {
        Value::OptTensors(v) => v
            .iter()
            .map(|o| o.as_ref().map(|t| t.bind(c.py).borrow().inner.clone()))
            .collect(),
        Value::Tensors(v) => v
            .iter()
            .map(|t| Some(t.bind(c.py).borrow().inner.clone()))
            .collect(),
        _ => c.tensors(i)?.into_iter().map(Some).collect(),
    };
    let mut dim = 0usize;
    let mut first = None;
    let mut last_end = 0usize;
    let mut idx = Vec::new();
    for e in entries {
        match e {
            None => dim += 1,
            Some(t) => {
                let t = if t.dtype() == DType::U8 {
                    t.to_dtype(DType::Bool).map_err(core_err)?
                } else {
                    t
                };
                let n = if t.dtype() == DType::Bool { t.dim() } else { 1 };
                if first.is_some() && last_end != dim {
                    return Err(pyo3::exceptions::PyNotImplementedError::new_err(
                        "index with non-adjacent indices through torch.ops.aten is not implemented in torchnative",
                    ));
                }
                first.get_or_insert(dim);
                dim += n;
                last_end = dim;
                idx.push(t);
            }
        }
    }
    let first = first.unwrap_or(0);
    if first == 0 {
        return Ok((x.clone(), idx, 0));
    }
    let k = last_end - first;
    let order: Vec<i64> = (first..first + k)
        .chain(0..first)
        .chain(first + k..x.dim())
        .map(|d| d as i64)
        .collect();
    Ok((x.permute(&order).map_err(core_err)?, idx, first))
}

/// `Tensor.sum_to_size(size)`: sums the dims `size` broadcasts over (leading ones and those
/// where `size` has 1); the tensor itself when nothing is summed, as upstream's `sum_to`.
fn sum_to_size(c: &Ctx<'_, '_>) -> PyResult<Out> {
    let x = c.tensor(0)?;
    let size = c.ints(1)?;
    let shape = x.shape();
    let expandable = size.len() <= shape.len()
        && size
            .iter()
            .rev()
            .zip(shape.iter().rev())
            .all(|(&s, &d)| s == d as i64 || s == 1);
    let show = |v: Vec<String>| v.join(", ");
    if !expandable {
        return Err(PyRuntimeError::new_err(format!(
            "size {{[{}]}} is not expandable to size {{[{}]}}.",
            show(size.iter().map(|s| s.to_string()).collect()),
            show(shape.iter().map(|s| s.to_string()).collect())
        )));
    }
    if size.is_empty() {
        return ok(x.sum_dtype(&[], false, None));
    }
    let leading = shape.len() - size.len();
    let mut dims: Vec<i64> = (0..leading as i64).collect();
    for (i, &s) in size.iter().enumerate() {
        if s == 1 && shape[leading + i] != 1 {
            dims.push((leading + i) as i64);
        }
    }
    if dims.is_empty() {
        return Ok(Out::Arg(0));
    }
    let summed = x.sum_dtype(&dims, true, None).map_err(core_err)?;
    ok(summed.reshape(&size))
}

/// `embedding_renorm_(weight, indices, max_norm, norm_type)`: every row named by `indices`
/// (each once, in increasing order) whose `norm_type`-norm exceeds `max_norm` is scaled by
/// `max_norm / (norm + 1e-7)`, as upstream's CPU kernel.
fn embedding_renorm(c: &Ctx<'_, '_>) -> PyResult<()> {
    let w = c.tensor(0)?;
    let indices = c.tensor(1)?;
    let (max_norm, norm_type) = (c.float(2)?, c.float(3)?);
    if w.dim() != 2 {
        return Err(PyRuntimeError::new_err(format!(
            "Expected 2-dimensional tensor, but got {}-dimensional tensor for argument #1 'self' (while checking arguments for embedding_renorm_)",
            w.dim()
        )));
    }
    if !matches!(indices.dtype(), DType::I64 | DType::I32) {
        return Err(PyRuntimeError::new_err(format!(
            "Expected tensor for argument #2 'indices' to have one of the following scalar types: Long, Int; but got {} instead (while checking arguments for embedding_renorm_)",
            scalar_type_name(indices.dtype())
        )));
    }
    let mut rows = indices.to_vec::<i64>().map_err(core_err)?;
    rows.sort_unstable();
    rows.dedup();
    let n = w.shape()[0] as i64;
    for r in rows {
        if r < -n || r >= n {
            return Err(pyo3::exceptions::PyIndexError::new_err(format!(
                "select(): index {r} out of range for tensor of size [{}, {}] at dimension 0",
                w.shape()[0],
                w.shape()[1]
            )));
        }
        let row = w.select(0, r).map_err(core_err)?;
        let norm = row
            .vector_norm(norm_type, &[], false, None)
            .and_then(|t| t.item())
            .map_err(core_err)?
            .to_f64();
        if norm > max_norm {
            let scale = max_norm / (norm + 1e-7);
            row.mul_(Scalar::Float(scale)).map_err(core_err)?;
        }
    }
    Ok(())
}

/// `aten::index.Tensor`: adjacent index tensors after leading `None`s put their result dims
/// where the indexed dims were (`x[:, :, i]` keeps the first two dims in front).
fn index_in_place(c: &Ctx<'_, '_>, x: &Tensor, i: usize) -> PyResult<Tensor> {
    let entries: Vec<bool> = match &c.values[i] {
        Value::OptTensors(v) => v.iter().map(Option::is_some).collect(),
        _ => Vec::new(),
    };
    let before = entries.iter().take_while(|present| !**present).count();
    if before == 0 || before >= x.dim() {
        let (view, idx, _) = leading_indices(c, x, i)?;
        return view.index(&idx).map_err(core_err);
    }
    // Index a view with the leading dims moved behind the indexed ones, then move them back.
    let order: Vec<i64> = (before..x.dim())
        .chain(0..before)
        .map(|d| d as i64)
        .collect();
    let moved = x.permute(&order).map_err(core_err)?;
    let rest: Vec<Option<Py<crate::TensorBase>>> = match &c.values[i] {
        Value::OptTensors(v) => v[before..]
            .iter()
            .map(|o| o.as_ref().map(|t| t.clone_ref(c.py)))
            .collect(),
        _ => Vec::new(),
    };
    let shifted = [Value::OptTensors(rest)];
    let inner = Ctx {
        py: c.py,
        values: &shifted,
    };
    let (view, idx, _) = leading_indices(&inner, &moved, 0)?;
    let r = view.index(&idx).map_err(core_err)?;
    // r: [index dims..., dims after the indexed block..., leading dims...]; the leading ones go
    // back in front.
    let n = r.dim();
    let back: Vec<i64> = (n - before..n)
        .chain(0..n - before)
        .map(|d| d as i64)
        .collect();
    r.permute(&back)
        .and_then(|t| t.contiguous())
        .map_err(core_err)
}

fn index_put_into(c: &Ctx<'_, '_>, x: &Tensor) -> PyResult<()> {
    let (view, idx, first) = leading_indices(c, x, 1)?;
    let mut values = c.tensor(2)?;
    if first > 0 {
        // upstream's values are laid out as `x[indices]`: the whole dims before the indexed
        // ones, the index dims, the dims after; the view puts the indexed dims first, so the
        // values move the same way (right-aligned, as they broadcast)
        let m = idx
            .iter()
            .map(|t| if t.dtype() == DType::Bool { 1 } else { t.dim() })
            .max()
            .unwrap_or(0);
        let indexed: usize = idx
            .iter()
            .map(|t| if t.dtype() == DType::Bool { t.dim() } else { 1 })
            .sum();
        let rank = first + m + (x.dim() - first - indexed);
        let padded = if values.dim() < rank {
            let mut s = vec![1usize; rank - values.dim()];
            s.extend_from_slice(values.shape());
            values
                .reshape(&s.iter().map(|&d| d as i64).collect::<Vec<_>>())
                .map_err(core_err)?
        } else {
            values
        };
        let order: Vec<i64> = (first..first + m)
            .chain(0..first)
            .chain(first + m..padded.dim())
            .map(|d| d as i64)
            .collect();
        values = padded.permute(&order).map_err(core_err)?;
    }
    if values.dtype() != x.dtype() {
        return Err(PyRuntimeError::new_err(format!(
            "Index put requires the source and destination dtypes match, got {} for the destination and {} for the source.",
            scalar_type_name(x.dtype()),
            scalar_type_name(values.dtype())
        )));
    }
    view.index_put_(&idx, &values, c.bool(3)?).map_err(core_err)
}

fn gather(c: &Ctx<'_, '_>) -> PyResult<Tensor> {
    let x = c.tensor(0)?;
    let index = c.tensor(2)?;
    let dim = c.int(1)?;
    // An empty index gives an empty result whatever its dtype (upstream checks the dim only).
    if index.numel() == 0 {
        torchnative_core::layout::wrap_dim("gather", dim, x.dim().max(1)).map_err(core_err)?;
        return torchnative_core::zeros(index.shape(), x.dtype()).map_err(core_err);
    }
    // upstream's gather takes int32 indices too (since 2.6).
    let index = match index.dtype() {
        DType::I64 => index,
        DType::I32 => index.to_dtype(DType::I64).map_err(core_err)?,
        _ => {
            return Err(PyRuntimeError::new_err(
                "gather(): Expected dtype int32/int64 for index",
            ))
        }
    };
    x.gather(dim, &index).map_err(|e| match e {
        torchnative_core::Error::IndexOutOfRange { index: i, size, .. } => PyRuntimeError::new_err(
            format!("index {i} is out of bounds for dimension {dim} with size {size}"),
        ),
        e => core_err(e),
    })
}

/// `nonzero`: `[count, ndim]` int64 laid out column-major, as upstream's kernel writes it.
fn nonzero_t(x: &Tensor) -> PyResult<Tensor> {
    let nz = torchnative_core::nonzero(x).map_err(core_err)?;
    let (n, d) = (nz.shape()[0], nz.shape()[1]);
    let cm = nz
        .clone_with_format(torchnative_core::tensor::MemoryFormat::Contiguous)
        .and_then(|t| t.t())
        .and_then(|t| t.contiguous())
        .map_err(core_err)?;
    // Storage holds the transposed ([ndim, count]) data; view it as [count, ndim].
    let out = Tensor::empty_strided(&[n, d], &[1, n], DType::I64, x.device()).map_err(core_err)?;
    if n > 0 && d > 0 {
        out.copy_(&cm.t().map_err(core_err)?).map_err(core_err)?;
    }
    Ok(out)
}

fn cat_dim(c: &Ctx<'_, '_>, dim: Option<i64>) -> PyResult<Out> {
    let ts = c.tensors(0)?;
    let dim = match dim {
        Some(d) => d,
        None => c.int(1)?,
    };
    ok(torchnative_core::cat(&ts.iter().collect::<Vec<_>>(), dim))
}

/// The tensors of argument 0 with at least `n` dims (`atleast_{n}d`).
fn atleast_all(c: &Ctx<'_, '_>, n: usize) -> PyResult<Vec<Tensor>> {
    c.tensors(0)?
        .into_iter()
        .map(|x| {
            Ok(match (n, x.dim()) {
                (_, d) if d >= n => x,
                (1, _) => x.reshape(&[1])?,
                (2, 0) => x.reshape(&[1, 1])?,
                (2, _) => x.unsqueeze(0)?,
                (_, 0) => x.reshape(&[1, 1, 1])?,
                (_, 1) => x.unsqueeze(0)?.unsqueeze(-1)?,
                _ => x.unsqueeze(-1)?,
            })
        })
        .collect::<torchnative_core::Result<Vec<_>>>()
        .map_err(core_err)
}

/// `r` (row-major) laid out like `like` (upstream's TensorIterator output of a unary op).
fn like_layout(r: &Tensor, like: &Tensor) -> torchnative_core::Result<Tensor> {
    if like.is_contiguous() {
        return Ok(r.clone());
    }
    let strides =
        torchnative_core::tensor::MemoryFormat::Preserve.strides_for(like.shape(), like.strides());
    let out = Tensor::empty_strided(r.shape(), &strides, r.dtype(), r.device())?;
    out.copy_(r)?;
    Ok(out)
}

/// `right=` / `side=` of searchsorted (side wins; "left" with right=True is an error).
fn side_right(c: &Ctx<'_, '_>) -> PyResult<bool> {
    let right = c.bool(3)?;
    if c.values[4].is_none() {
        return Ok(right);
    }
    match c.str(4)?.as_str() {
        "right" => Ok(true),
        "left" if !right => Ok(false),
        "left" => Err(PyRuntimeError::new_err(
            "torch.searchsorted(): side and right can't be set to opposites, got side of left while right was True",
        )),
        other => Err(PyRuntimeError::new_err(format!(
            "torch.searchsorted(): side can only be 'left' or 'right' but got {other}"
        ))),
    }
}

/// Upstream's `do_trapezoid` with a constant spacing: `(sum - (first + last) / 2) * dx`.
fn trapezoid_dx(y: &Tensor, dx: f64, dim: i64) -> torchnative_core::Result<Tensor> {
    let n = y.size(dim)?;
    if n == 0 {
        let s = y.sum(&[dim], false)?;
        return s.mul(Scalar::Float(0.0));
    }
    let ends = y.select(dim, 0)?.add(&y.select(dim, -1)?)?;
    y.sum(&[dim], false)?
        .sub(&ends.mul(Scalar::Float(0.5))?)?
        .mul(Scalar::Float(dx))
}

/// `trapezoid(y, x, dim)` / `cumulative_trapezoid(y, x, dim)` (upstream's composite): the
/// spacing `dx` from `x` (1-D along `dim`, or broadcast against `y`), then
/// `dx * (y[:-1] + y[1:]) / 2` summed (or cumulatively summed) along `dim`.
fn trapezoid_x(y: &Tensor, x: &Tensor, dim: i64, cumulative: bool) -> PyResult<Tensor> {
    let op = if cumulative {
        "cumulative_trapezoid"
    } else {
        "trapezoid"
    };
    no_bool_y(y, op)?;
    if x.dtype() == DType::Bool {
        return Err(pyo3::exceptions::PyNotImplementedError::new_err(format!(
            "{op}: received a bool input for `x`, but bool is not supported"
        )));
    }
    let d = torchnative_core::layout::wrap_dim(op, dim, y.dim()).map_err(core_err)?;
    let n = y.shape()[d];
    if n == 0 {
        return if cumulative {
            Ok(y.clone())
        } else {
            y.sum(&[d as i64], false)
                .and_then(|s| s.mul(Scalar::Float(0.0)))
                .map_err(core_err)
        };
    }
    let x = if x.dim() == 1 {
        if x.shape()[0] != n {
            return Err(PyRuntimeError::new_err(format!(
                "{op}: There must be one `x` value for each sample point"
            )));
        }
        let mut shape = vec![1i64; y.dim()];
        shape[d] = n as i64;
        x.reshape(&shape).map_err(core_err)?
    } else if x.dim() < y.dim() {
        let mut shape = vec![1i64; y.dim() - x.dim()];
        shape.extend(x.shape().iter().map(|&s| s as i64));
        x.reshape(&shape).map_err(core_err)?
    } else {
        x.clone()
    };
    let dim = d as i64;
    let m = x.shape()[d].saturating_sub(1);
    let dx = x
        .narrow(dim, 1, m)
        .and_then(|r| r.sub(&x.narrow(dim, 0, m)?))
        .map_err(core_err)?;
    let pairs = y
        .narrow(dim, 0, n - 1)
        .and_then(|l| l.add(&y.narrow(dim, 1, n - 1)?))
        .map_err(core_err)?;
    let areas = dx
        .mul(&pairs)
        .and_then(|a| a.div(Scalar::Float(2.0)))
        .map_err(core_err)?;
    if cumulative {
        areas.cumsum(dim).map_err(core_err)
    } else {
        areas.sum(&[dim], false).map_err(core_err)
    }
}

/// `(y, x, *, dim)` of the `.x` overloads.
fn trapezoid_x_kernel(c: &Ctx<'_, '_>, cumulative: bool) -> PyResult<Out> {
    let r = trapezoid_x(&c.tensor(0)?, &c.tensor(1)?, c.int(2)?, cumulative)?;
    Ok(Out::Tensor(r))
}

fn no_bool_y(y: &Tensor, op: &str) -> PyResult<()> {
    if y.dtype() == DType::Bool {
        return Err(pyo3::exceptions::PyNotImplementedError::new_err(format!(
            "{op}: received a bool input for `y`, but bool is not supported"
        )));
    }
    Ok(())
}

/// `bool? stable`: None is false.
fn opt_bool(c: &Ctx<'_, '_>, i: usize) -> PyResult<bool> {
    match c.values.get(i) {
        Some(Value::None) | None => Ok(false),
        _ => c.bool(i),
    }
}

/// `sort` results laid out like the input (upstream sorts into a tensor like `self`).
fn sorted_like(x: &Tensor, dim: i64, descending: bool, stable: bool) -> PyResult<Out> {
    let (v, i) = x.sort_as_aten(dim, descending, stable).map_err(core_err)?;
    Ok(Out::Tensors(vec![
        like_layout(&v, x).map_err(core_err)?,
        like_layout(&i, x).map_err(core_err)?,
    ]))
}
