//! Kernels per ATen overload, on torchnative-core. The table is keyed by the full overload
//! name (`aten::add.Tensor`); the door looks an overload up here after binding its arguments.
//!
//! Most operators come in three forms that share one computation: functional (`add.Tensor`),
//! in-place (`add_.Tensor`: the result is cast into `self`'s storage, refusing a cast upstream
//! refuses) and out= (`add.out`: the result goes into `out`, resized when its shape differs).
//! [`Forms`] registers all three from one function.

use crate::error::core_err;
use crate::tensor::TensorBase;
use crate::value::{Out, Value};
use pyo3::exceptions::{PyRuntimeError, PyTypeError};
use pyo3::prelude::*;
use std::collections::HashMap;
use std::sync::OnceLock;
use torchnative_core::{can_cast, DType, Device, GeluApproximate, Scalar, Tensor};

pub struct Ctx<'a, 'py> {
    pub py: Python<'py>,
    pub values: &'a [Value],
}

pub type Kernel = fn(&Ctx<'_, '_>) -> PyResult<Out>;

fn wrong(i: usize, what: &str, v: &Value) -> PyErr {
    PyTypeError::new_err(format!(
        "internal: argument {i} should be {what}, got {v:?}"
    ))
}

impl Ctx<'_, '_> {
    pub fn tensor(&self, i: usize) -> PyResult<Tensor> {
        match &self.values[i] {
            Value::Tensor(t) => Ok(t.bind(self.py).borrow().inner.clone()),
            v => Err(wrong(i, "a Tensor", v)),
        }
    }
    pub fn opt_tensor(&self, i: usize) -> PyResult<Option<Tensor>> {
        match &self.values[i] {
            Value::None => Ok(None),
            _ => self.tensor(i).map(Some),
        }
    }
    pub fn tensors(&self, i: usize) -> PyResult<Vec<Tensor>> {
        match &self.values[i] {
            Value::Tensors(ts) => Ok(ts
                .iter()
                .map(|t| t.bind(self.py).borrow().inner.clone())
                .collect()),
            v => Err(wrong(i, "a list of Tensors", v)),
        }
    }
    pub fn scalar(&self, i: usize) -> PyResult<Scalar> {
        match &self.values[i] {
            Value::Scalar(s) => Ok(*s),
            Value::Int(v) => Ok(Scalar::Int(*v)),
            Value::Float(v) => Ok(Scalar::Float(*v)),
            Value::Bool(v) => Ok(Scalar::Bool(*v)),
            v => Err(wrong(i, "a Scalar", v)),
        }
    }
    pub fn opt_scalar(&self, i: usize) -> PyResult<Option<Scalar>> {
        match &self.values[i] {
            Value::None => Ok(None),
            _ => self.scalar(i).map(Some),
        }
    }
    pub fn int(&self, i: usize) -> PyResult<i64> {
        match &self.values[i] {
            Value::Int(v) => Ok(*v),
            v => Err(wrong(i, "an int", v)),
        }
    }
    pub fn opt_int(&self, i: usize) -> PyResult<Option<i64>> {
        match &self.values[i] {
            Value::None => Ok(None),
            _ => self.int(i).map(Some),
        }
    }
    pub fn ints(&self, i: usize) -> PyResult<Vec<i64>> {
        match &self.values[i] {
            Value::Ints(v) => Ok(v.clone()),
            v => Err(wrong(i, "a list of ints", v)),
        }
    }
    /// `int[1]? dim`: None (all dims) or the list.
    pub fn opt_ints(&self, i: usize) -> PyResult<Option<Vec<i64>>> {
        match &self.values[i] {
            Value::None => Ok(None),
            _ => self.ints(i).map(Some),
        }
    }
    pub fn float(&self, i: usize) -> PyResult<f64> {
        match &self.values[i] {
            Value::Float(v) => Ok(*v),
            Value::Int(v) => Ok(*v as f64),
            v => Err(wrong(i, "a float", v)),
        }
    }
    pub fn bool(&self, i: usize) -> PyResult<bool> {
        match &self.values[i] {
            Value::Bool(v) => Ok(*v),
            v => Err(wrong(i, "a bool", v)),
        }
    }
    pub fn str(&self, i: usize) -> PyResult<String> {
        match &self.values[i] {
            Value::Str(s) => Ok(s.clone()),
            v => Err(wrong(i, "a str", v)),
        }
    }
    pub fn opt_dtype(&self, i: usize) -> PyResult<Option<DType>> {
        match &self.values[i] {
            Value::None => Ok(None),
            Value::DType(d) => Ok(Some(*d)),
            Value::Object(o) => crate::dtype::dtype_from_py(o.bind(self.py)).map(Some),
            v => Err(wrong(i, "a dtype", v)),
        }
    }
    /// `Device? device`: cpu or meta; any other device is refused by name.
    pub fn device(&self, i: usize) -> PyResult<Device> {
        match &self.values[i] {
            Value::None => Ok(Device::Cpu),
            Value::Object(o) => crate::device_of(o.bind(self.py)),
            Value::Str(s) => crate::device_from_str(s),
            v => Err(wrong(i, "a device", v)),
        }
    }
    /// Writes `result` into the tensor argument `i` (in-place form) and returns it.
    pub fn write_into(&self, i: usize, result: Tensor) -> PyResult<Out> {
        let Value::Tensor(dst) = &self.values[i] else {
            return Err(wrong(i, "a Tensor", &self.values[i]));
        };
        let mut dst = dst.bind(self.py).borrow_mut();
        if !can_cast(result.dtype(), dst.inner.dtype()) {
            return Err(PyRuntimeError::new_err(format!(
                "result type {} can't be cast to the desired output type {}",
                scalar_type_name(result.dtype()),
                scalar_type_name(dst.inner.dtype())
            )));
        }
        if dst.inner.shape() != result.shape() {
            if dst.inner.numel() == 0 || self.is_out(i) {
                // out= tensors are resized to the result (upstream warns when non-empty).
                dst.inner = result.to_dtype(dst.inner.dtype()).map_err(core_err)?;
                dst.version += 1;
                return Ok(Out::Arg(i));
            }
            return Err(PyRuntimeError::new_err(format!(
                "output with shape {:?} doesn't match the broadcast shape {:?}",
                dst.inner.shape(),
                result.shape()
            )));
        }
        dst.inner.copy_(&result).map_err(core_err)?;
        dst.version += 1;
        Ok(Out::Arg(i))
    }
    fn is_out(&self, i: usize) -> bool {
        i + 1 == self.values.len() || i > 0
    }
}

/// c10's ScalarType names, as upstream's messages spell them.
pub fn scalar_type_name(d: DType) -> &'static str {
    match d {
        DType::F32 => "Float",
        DType::F64 => "Double",
        DType::F16 => "Half",
        DType::BF16 => "BFloat16",
        DType::I64 => "Long",
        DType::I32 => "Int",
        DType::I16 => "Short",
        DType::I8 => "Char",
        DType::U8 => "Byte",
        DType::Bool => "Bool",
    }
}

fn ok(t: torchnative_core::Result<Tensor>) -> PyResult<Out> {
    t.map(Out::Tensor).map_err(core_err)
}

type Table = HashMap<&'static str, Kernel>;

static TABLE: OnceLock<Table> = OnceLock::new();

pub fn get(full_name: &str) -> Option<Kernel> {
    TABLE.get_or_init(build).get(full_name).copied()
}

/// Every overload with a kernel (for the coverage count and `_dispatch_has_kernel`).
pub fn names() -> Vec<&'static str> {
    let mut v: Vec<_> = TABLE.get_or_init(build).keys().copied().collect();
    v.sort_unstable();
    v
}

/// Registers a unary pointwise op's functional, in-place and out= forms.
macro_rules! unary {
    ($t:ident, $name:literal, $f:expr) => {{
        fn f(x: &Tensor) -> torchnative_core::Result<Tensor> {
            let g: fn(&Tensor) -> torchnative_core::Result<Tensor> = $f;
            g(x)
        }
        $t.insert(concat!("aten::", $name), |c| ok(f(&c.tensor(0)?)));
        $t.insert(concat!("aten::", $name, "_"), |c| {
            let r = f(&c.tensor(0)?).map_err(core_err)?;
            c.write_into(0, r)
        });
        $t.insert(concat!("aten::", $name, ".out"), |c| {
            let r = f(&c.tensor(0)?).map_err(core_err)?;
            c.write_into(1, r)
        });
    }};
}

/// A binary op with `Tensor`/`Scalar` overloads, in-place forms and `out`.
macro_rules! binary {
    ($t:ident, $name:literal, $f:expr) => {{
        fn f(a: &Tensor, b: &Tensor) -> torchnative_core::Result<Tensor> {
            let g: fn(&Tensor, &Tensor) -> torchnative_core::Result<Tensor> = $f;
            g(a, b)
        }
        $t.insert(concat!("aten::", $name, ".Tensor"), |c| {
            ok(f(&c.tensor(0)?, &c.tensor(1)?))
        });
        $t.insert(concat!("aten::", $name, ".Scalar"), |c| {
            ok(f(&c.tensor(0)?, &Tensor::wrap_scalar(c.scalar(1)?)))
        });
        $t.insert(concat!("aten::", $name, "_.Tensor"), |c| {
            let r = f(&c.tensor(0)?, &c.tensor(1)?).map_err(core_err)?;
            c.write_into(0, r)
        });
        $t.insert(concat!("aten::", $name, "_.Scalar"), |c| {
            let r = f(&c.tensor(0)?, &Tensor::wrap_scalar(c.scalar(1)?)).map_err(core_err)?;
            c.write_into(0, r)
        });
        $t.insert(concat!("aten::", $name, ".Tensor_out"), |c| {
            let r = f(&c.tensor(0)?, &c.tensor(1)?).map_err(core_err)?;
            c.write_into(2, r)
        });
        $t.insert(concat!("aten::", $name, ".Scalar_out"), |c| {
            let r = f(&c.tensor(0)?, &Tensor::wrap_scalar(c.scalar(1)?)).map_err(core_err)?;
            c.write_into(2, r)
        });
    }};
}

/// `a + alpha * b` / `a - alpha * b`.
fn with_alpha(
    a: &Tensor,
    b: &Tensor,
    alpha: Scalar,
    sub: bool,
) -> torchnative_core::Result<Tensor> {
    let scaled = if alpha.to_f64() == 1.0 {
        b.clone()
    } else {
        b.mul(alpha)?
    };
    if sub {
        a.sub(&scaled)
    } else {
        a.add(&scaled)
    }
}

fn dims_or_all(dims: Option<Vec<i64>>, ndim: usize) -> Vec<i64> {
    match dims {
        Some(d) if !d.is_empty() => d,
        _ => (0..ndim as i64).collect(),
    }
}

fn new_tensor(
    c: &Ctx<'_, '_>,
    shape: &[i64],
    dtype_arg: usize,
    device_arg: usize,
) -> PyResult<Tensor> {
    let shape = to_shape(shape)?;
    let dtype = c.opt_dtype(dtype_arg)?.unwrap_or_else(crate::default_float);
    Tensor::empty_on(&shape, dtype, c.device(device_arg)?).map_err(core_err)
}

fn to_shape(shape: &[i64]) -> PyResult<Vec<usize>> {
    shape
        .iter()
        .map(|&d| {
            usize::try_from(d).map_err(|_| {
                PyRuntimeError::new_err(format!(
                    "Trying to create tensor with negative dimension {d}: {shape:?}"
                ))
            })
        })
        .collect()
}

fn build() -> Table {
    let mut t: Table = HashMap::new();

    // ----- pointwise -----
    unary!(t, "abs", |x| x.abs());
    unary!(t, "neg", |x| x.neg());
    unary!(t, "exp", |x| x.exp());
    unary!(t, "log", |x| x.log());
    unary!(t, "log1p", |x| x.log1p());
    unary!(t, "log2", |x| x.log2());
    unary!(t, "log10", |x| x.log10());
    unary!(t, "exp2", |x| x.exp2());
    unary!(t, "expm1", |x| x.expm1());
    unary!(t, "sqrt", |x| x.sqrt());
    unary!(t, "rsqrt", |x| x.rsqrt());
    unary!(t, "sin", |x| x.sin());
    unary!(t, "cos", |x| x.cos());
    unary!(t, "tan", |x| x.tan());
    unary!(t, "tanh", |x| x.tanh());
    unary!(t, "sinh", |x| x.sinh());
    unary!(t, "cosh", |x| x.cosh());
    unary!(t, "asin", |x| x.asin());
    unary!(t, "acos", |x| x.acos());
    unary!(t, "atan", |x| x.atan());
    unary!(t, "sigmoid", |x| x.sigmoid());
    unary!(t, "erf", |x| x.erf());
    unary!(t, "reciprocal", |x| x.reciprocal());
    unary!(t, "trunc", |x| x.trunc());
    unary!(t, "floor", |x| x.floor());
    unary!(t, "ceil", |x| x.ceil());
    unary!(t, "round", |x| x.round());
    unary!(t, "sign", |x| x.sign());
    unary!(t, "relu", |x| x.relu());
    unary!(t, "silu", |x| x.silu());
    unary!(t, "bitwise_not", |x| x.bitwise_not());
    unary!(t, "logical_not", |x| x.logical_not());
    t.insert("aten::isnan", |c| ok(c.tensor(0)?.isnan()));
    t.insert("aten::isinf", |c| ok(c.tensor(0)?.isinf()));
    t.insert("aten::isfinite", |c| {
        let x = c.tensor(0)?;
        let bad = x
            .isnan()
            .and_then(|n| n.logical_or(&x.isinf()?))
            .map_err(core_err)?;
        ok(bad.logical_not())
    });
    t.insert("aten::gelu", |c| {
        let approx = match c.str(1)?.as_str() {
            "none" => GeluApproximate::None,
            "tanh" => GeluApproximate::Tanh,
            other => {
                return Err(PyRuntimeError::new_err(format!(
                    "approximate argument must be either none or tanh, not '{other}'"
                )))
            }
        };
        ok(c.tensor(0)?.gelu(approx))
    });

    t.insert("aten::add.Tensor", |c| {
        ok(with_alpha(
            &c.tensor(0)?,
            &c.tensor(1)?,
            c.scalar(2)?,
            false,
        ))
    });
    t.insert("aten::add.Scalar", |c| {
        ok(with_alpha(
            &c.tensor(0)?,
            &Tensor::wrap_scalar(c.scalar(1)?),
            c.scalar(2)?,
            false,
        ))
    });
    t.insert("aten::add_.Tensor", |c| {
        let r = with_alpha(&c.tensor(0)?, &c.tensor(1)?, c.scalar(2)?, false).map_err(core_err)?;
        c.write_into(0, r)
    });
    t.insert("aten::add_.Scalar", |c| {
        let r = with_alpha(
            &c.tensor(0)?,
            &Tensor::wrap_scalar(c.scalar(1)?),
            c.scalar(2)?,
            false,
        )
        .map_err(core_err)?;
        c.write_into(0, r)
    });
    t.insert("aten::add.out", |c| {
        let r = with_alpha(&c.tensor(0)?, &c.tensor(1)?, c.scalar(2)?, false).map_err(core_err)?;
        c.write_into(3, r)
    });
    t.insert("aten::sub.Tensor", |c| {
        ok(with_alpha(&c.tensor(0)?, &c.tensor(1)?, c.scalar(2)?, true))
    });
    t.insert("aten::sub.Scalar", |c| {
        ok(with_alpha(
            &c.tensor(0)?,
            &Tensor::wrap_scalar(c.scalar(1)?),
            c.scalar(2)?,
            true,
        ))
    });
    t.insert("aten::sub_.Tensor", |c| {
        let r = with_alpha(&c.tensor(0)?, &c.tensor(1)?, c.scalar(2)?, true).map_err(core_err)?;
        c.write_into(0, r)
    });
    t.insert("aten::sub_.Scalar", |c| {
        let r = with_alpha(
            &c.tensor(0)?,
            &Tensor::wrap_scalar(c.scalar(1)?),
            c.scalar(2)?,
            true,
        )
        .map_err(core_err)?;
        c.write_into(0, r)
    });
    t.insert("aten::sub.out", |c| {
        let r = with_alpha(&c.tensor(0)?, &c.tensor(1)?, c.scalar(2)?, true).map_err(core_err)?;
        c.write_into(3, r)
    });
    t.insert("aten::rsub.Tensor", |c| {
        ok(with_alpha(&c.tensor(1)?, &c.tensor(0)?, c.scalar(2)?, true))
    });
    t.insert("aten::rsub.Scalar", |c| {
        ok(with_alpha(
            &Tensor::wrap_scalar(c.scalar(1)?),
            &c.tensor(0)?,
            c.scalar(2)?,
            true,
        ))
    });
    binary!(t, "mul", |a, b| a.mul(b));
    binary!(t, "div", |a, b| a.div(b));
    t.insert("aten::mul.out", |c| {
        let r = c.tensor(0)?.mul(&c.tensor(1)?).map_err(core_err)?;
        c.write_into(2, r)
    });
    t.insert("aten::div.out", |c| {
        let r = c.tensor(0)?.div(&c.tensor(1)?).map_err(core_err)?;
        c.write_into(2, r)
    });
    binary!(t, "remainder", |a, b| a.remainder(b));
    binary!(t, "fmod", |a, b| a.fmod(b));
    binary!(t, "bitwise_and", |a, b| a.bitwise_and(b));
    binary!(t, "bitwise_or", |a, b| a.bitwise_or(b));
    binary!(t, "bitwise_xor", |a, b| a.bitwise_xor(b));
    binary!(t, "eq", |a, b| a.eq(b));
    binary!(t, "ne", |a, b| a.ne(b));
    binary!(t, "lt", |a, b| a.lt(b));
    binary!(t, "le", |a, b| a.le(b));
    binary!(t, "gt", |a, b| a.gt(b));
    binary!(t, "ge", |a, b| a.ge(b));
    t.insert("aten::pow.Tensor_Tensor", |c| {
        ok(c.tensor(0)?.pow(&c.tensor(1)?))
    });
    t.insert("aten::pow.Tensor_Scalar", |c| {
        ok(c.tensor(0)?.pow(c.scalar(1)?))
    });
    t.insert("aten::pow.Scalar", |c| {
        ok(Tensor::wrap_scalar(c.scalar(0)?).pow(&c.tensor(1)?))
    });
    t.insert("aten::maximum", |c| ok(c.tensor(0)?.maximum(&c.tensor(1)?)));
    t.insert("aten::minimum", |c| ok(c.tensor(0)?.minimum(&c.tensor(1)?)));
    t.insert("aten::atan2", |c| ok(c.tensor(0)?.atan2(&c.tensor(1)?)));
    t.insert("aten::logical_and", |c| {
        ok(c.tensor(0)?.logical_and(&c.tensor(1)?))
    });
    t.insert("aten::logical_or", |c| {
        ok(c.tensor(0)?.logical_or(&c.tensor(1)?))
    });
    t.insert("aten::logical_xor", |c| {
        ok(c.tensor(0)?.logical_xor(&c.tensor(1)?))
    });
    t.insert("aten::where.self", |c| {
        ok(torchnative_core::where_(
            &c.tensor(0)?,
            &c.tensor(1)?,
            &c.tensor(2)?,
        ))
    });
    t.insert("aten::clamp", |c| {
        ok(c.tensor(0)?
            .clamp_scalar(c.opt_scalar(1)?, c.opt_scalar(2)?))
    });
    t.insert("aten::clamp.Tensor", |c| {
        ok(c.tensor(0)?
            .clamp(c.opt_tensor(1)?.as_ref(), c.opt_tensor(2)?.as_ref()))
    });
    t.insert("aten::clamp_min", |c| {
        ok(c.tensor(0)?.clamp_scalar(Some(c.scalar(1)?), None))
    });
    t.insert("aten::clamp_max", |c| {
        ok(c.tensor(0)?.clamp_scalar(None, Some(c.scalar(1)?)))
    });

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
        let x = c.tensor(0)?;
        let dtype = c.opt_dtype(1)?.unwrap_or(x.dtype());
        let device = match &c.values[3] {
            Value::None => x.device(),
            _ => c.device(3)?,
        };
        Tensor::empty_on(x.shape(), dtype, device).map_err(core_err)
    }
    t.insert("aten::empty_like", |c| ok(Ok(like(c)?)));
    t.insert("aten::zeros_like", |c| ok(Ok(like(c)?)));
    t.insert("aten::ones_like", |c| {
        let x = like(c)?;
        x.fill_(Scalar::Int(1)).map_err(core_err)?;
        ok(Ok(x))
    });
    t.insert("aten::full_like", |c| {
        let x = c.tensor(0)?;
        let dtype = c.opt_dtype(2)?.unwrap_or(x.dtype());
        let y = Tensor::empty_on(x.shape(), dtype, x.device()).map_err(core_err)?;
        y.fill_(c.scalar(1)?).map_err(core_err)?;
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

    // ----- copies, casts, aliases -----
    t.insert("aten::clone", |c| ok(c.tensor(0)?.deep_clone()));
    t.insert("aten::contiguous", |c| ok(c.tensor(0)?.contiguous()));
    t.insert("aten::detach", |c| ok(Ok(c.tensor(0)?)));
    t.insert("aten::alias", |c| ok(Ok(c.tensor(0)?)));
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

    // ----- linear algebra -----
    t.insert("aten::mm", |c| ok(c.tensor(0)?.mm(&c.tensor(1)?)));
    t.insert("aten::bmm", |c| ok(c.tensor(0)?.bmm(&c.tensor(1)?)));
    t.insert("aten::matmul", |c| ok(c.tensor(0)?.matmul(&c.tensor(1)?)));
    t.insert("aten::dot", |c| ok(c.tensor(0)?.matmul(&c.tensor(1)?)));
    t.insert("aten::mv", |c| ok(c.tensor(0)?.matmul(&c.tensor(1)?)));
    t.insert("aten::linear", |c| {
        ok(torchnative_core::linear(
            &c.tensor(0)?,
            &c.tensor(1)?,
            c.opt_tensor(2)?.as_ref(),
        ))
    });

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

    // ----- nn -----
    t.insert("aten::layer_norm", |c| {
        let x = c.tensor(0)?;
        let shape = to_shape(&c.ints(1)?)?;
        ok(torchnative_core::layer_norm(
            &x,
            &shape,
            c.opt_tensor(2)?.as_ref(),
            c.opt_tensor(3)?.as_ref(),
            c.float(4)?,
        ))
    });
    // Tensor flags upstream keeps in the TensorImpl: torchnative has no zero tensors, no lazy
    // conjugation or negation, no inference tensors.
    t.insert("aten::_is_zerotensor", |_| {
        Ok(Out::Scalar(Scalar::Bool(false)))
    });
    t.insert("aten::is_conj", |_| Ok(Out::Scalar(Scalar::Bool(false))));
    t.insert("aten::is_neg", |_| Ok(Out::Scalar(Scalar::Bool(false))));
    t.insert("aten::is_inference", |_| {
        Ok(Out::Scalar(Scalar::Bool(false)))
    });
    t.insert("aten::resolve_conj", |_| Ok(Out::Arg(0)));
    t.insert("aten::resolve_neg", |_| Ok(Out::Arg(0)));
    t.insert("aten::conj", |_| Ok(Out::Arg(0)));
    t.insert("aten::_conj", |_| Ok(Out::Arg(0)));
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
    crate::random::register(&mut t);
    // CPU tensors report device index -1, as upstream's do.
    t.insert("aten::get_device", |_| Ok(Out::Int(-1)));
    let _ = TensorBase::new;
    t
}
