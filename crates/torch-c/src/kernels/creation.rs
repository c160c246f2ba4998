//! Tensor factories: empty/zeros/ones/full, *_like, arange, linspace, eye.

#![allow(unused_imports)]

use super::*;

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
        });
        let x = Tensor::empty_on(&shape, dtype, c.device(4)?).map_err(core_err)?;
        if x.device() == Device::Cpu {
            x.fill_(value).map_err(core_err)?;
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
        ok(torchnative_core::arange(
            Scalar::Int(0),
            c.scalar(0)?,
            Scalar::Int(1),
            c.opt_dtype(1)?,
        ))
    });
    t.insert("aten::arange.start", |c| {
        ok(torchnative_core::arange(
            c.scalar(0)?,
            c.scalar(1)?,
            Scalar::Int(1),
            c.opt_dtype(2)?,
        ))
    });
    t.insert("aten::arange.start_step", |c| {
        ok(torchnative_core::arange(
            c.scalar(0)?,
            c.scalar(1)?,
            c.scalar(2)?,
            c.opt_dtype(3)?,
        ))
    });
    t.insert("aten::linspace", |c| {
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
}
