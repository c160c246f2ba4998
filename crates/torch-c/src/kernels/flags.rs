//! Tensor flags and metadata queries, and small structural ops (unbind, tensor_split).

#![allow(unused_imports)]

use super::*;

pub(crate) fn register(t: &mut Table) {
    // Tensor flags upstream keeps in the TensorImpl: torchnative has no zero tensors and no
    // inference tensors. The lazy conjugation / negation bits are math_bits.rs's (the door
    // asks it before resolving bits; these entries answer the same for direct lookups).
    t.insert("aten::_is_zerotensor", |_| {
        Ok(Out::Scalar(Scalar::Bool(false)))
    });
    // No pinned (page-locked for an accelerator) memory exists without an accelerator.
    t.insert("aten::is_pinned", |_| Ok(Out::Scalar(Scalar::Bool(false))));
    fn math_bit_op(c: &Ctx<'_, '_>, name: &str) -> PyResult<Out> {
        crate::math_bits::special(c.py, name, c.values)?
            .map(Out::Object)
            .ok_or_else(|| PyRuntimeError::new_err(format!("internal: {name} needs a tensor")))
    }
    t.insert("aten::is_conj", |c| math_bit_op(c, "aten::is_conj"));
    t.insert("aten::is_neg", |c| math_bit_op(c, "aten::is_neg"));
    t.insert("aten::_neg_view", |c| math_bit_op(c, "aten::_neg_view"));
    // Dense tensors of one backend are compatible for `.data =` swaps; cpu and meta are not
    // (upstream's answer for the pair).
    t.insert("aten::_has_compatible_shallow_copy_type", |c| {
        Ok(Out::Scalar(Scalar::Bool(
            c.tensor(0)?.device() == c.tensor(1)?.device(),
        )))
    });
    t.insert("aten::is_inference", |_| {
        Ok(Out::Scalar(Scalar::Bool(false)))
    });
    t.insert("aten::resolve_conj", |c| {
        math_bit_op(c, "aten::resolve_conj")
    });
    t.insert("aten::resolve_neg", |c| math_bit_op(c, "aten::resolve_neg"));
    t.insert("aten::conj", |c| math_bit_op(c, "aten::conj"));
    t.insert("aten::_conj", |c| math_bit_op(c, "aten::_conj"));
    t.insert("aten::is_nonzero", |c| {
        let x = c.tensor(0)?;
        if x.numel() != 1 {
            return Err(PyRuntimeError::new_err(format!(
                "Boolean value of Tensor with {} values is ambiguous",
                if x.numel() == 0 {
                    "no"
                } else {
                    "more than one"
                }
            )));
        }
        let v = x.reshape(&[]).and_then(|v| v.item()).map_err(core_err)?;
        Ok(Out::Scalar(Scalar::Bool(v.to_f64() != 0.0)))
    });
    t.insert("aten::is_same_size", |c| {
        Ok(Out::Scalar(Scalar::Bool(
            c.tensor(0)?.shape() == c.tensor(1)?.shape(),
        )))
    });
    t.insert("aten::new_empty", |c| {
        let x = c.tensor(0)?;
        let shape = to_shape(&c.ints(1)?)?;
        let dtype = c.opt_dtype(2)?.unwrap_or(x.dtype());
        ok(Tensor::empty_on(&shape, dtype, x.device()))
    });
    t.insert("aten::new_zeros", |c| {
        let x = c.tensor(0)?;
        let shape = to_shape(&c.ints(1)?)?;
        let dtype = c.opt_dtype(2)?.unwrap_or(x.dtype());
        ok(Tensor::empty_on(&shape, dtype, x.device()))
    });
    t.insert("aten::new_ones", |c| {
        let x = c.tensor(0)?;
        let shape = to_shape(&c.ints(1)?)?;
        let dtype = c.opt_dtype(2)?.unwrap_or(x.dtype());
        let y = Tensor::empty_on(&shape, dtype, x.device()).map_err(core_err)?;
        y.fill_(Scalar::Int(1)).map_err(core_err)?;
        ok(Ok(y))
    });
    t.insert("aten::new_full", |c| {
        let x = c.tensor(0)?;
        let shape = to_shape(&c.ints(1)?)?;
        let dtype = c.opt_dtype(3)?.unwrap_or(x.dtype());
        let y = Tensor::empty_on(&shape, dtype, x.device()).map_err(core_err)?;
        y.fill_(c.scalar(2)?).map_err(core_err)?;
        ok(Ok(y))
    });
    t.insert("aten::unbind.int", |c| {
        let x = c.tensor(0)?;
        let dim = c.int(1)?;
        let n = x.size(dim).map_err(core_err)?;
        (0..n as i64)
            .map(|i| x.select(dim, i))
            .collect::<torchnative_core::Result<Vec<_>>>()
            .map(Out::Tensors)
            .map_err(core_err)
    });
    t.insert("aten::tensor_split.sections", |c| {
        let x = c.tensor(0)?;
        let dim = c.int(2)?;
        let n = x.size(dim).map_err(core_err)?;
        let sections = to_shape(&[c.int(1)?])?[0];
        if sections == 0 {
            return Err(PyRuntimeError::new_err(
                "number of sections must be larger than 0, got 0",
            ));
        }
        // The first n % sections pieces get one extra element, as upstream splits.
        let (base, extra) = (n / sections, n % sections);
        let sizes: Vec<usize> = (0..sections)
            .map(|i| base + usize::from(i < extra))
            .collect();
        x.split_with_sizes(&sizes, dim)
            .map(Out::Tensors)
            .map_err(core_err)
    });
    // CPU tensors report device index -1, as upstream's do.
    t.insert("aten::get_device", |_| Ok(Out::Int(-1)));
}
