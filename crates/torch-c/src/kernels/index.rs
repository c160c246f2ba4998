//! Indexing, joining and splitting: cat, stack, gather, index_select, masked ops, sort, topk.

#![allow(unused_imports)]

use super::*;

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
    t.insert("aten::gather", |c| {
        ok(c.tensor(0)?.gather(c.int(1)?, &c.tensor(2)?))
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
    t.insert("aten::nonzero", |c| {
        ok(torchnative_core::nonzero(&c.tensor(0)?))
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
    t.insert("aten::chunk", |c| {
        let n = to_shape(&[c.int(1)?])?[0];
        c.tensor(0)?
            .chunk(n, c.int(2)?)
            .map(Out::Tensors)
            .map_err(core_err)
    });
    t.insert("aten::topk", |c| {
        let k = to_shape(&[c.int(1)?])?[0];
        let (v, i) = c
            .tensor(0)?
            .topk(k, c.int(2)?, c.bool(3)?)
            .map_err(core_err)?;
        Ok(Out::Tensors(vec![v, i]))
    });
    t.insert("aten::sort", |c| {
        let options = torchnative_core::SortOptions {
            descending: c.bool(2)?,
        };
        let (v, i) = c.tensor(0)?.sort(c.int(1)?, options).map_err(core_err)?;
        Ok(Out::Tensors(vec![v, i]))
    });
}
