//! Kernels per ATen overload, on torchnative-core. The table is keyed by the full overload
//! name (`aten::add.Tensor`); the door looks an overload up here after binding its arguments.
//!
//! Most operators come in three forms that share one computation: functional (`add.Tensor`),
//! in-place (`add_.Tensor`: the result is cast into `self`'s storage, refusing a cast upstream
//! refuses) and out= (`add.out`: the result goes into `out`, resized when its shape differs).
//! [`Forms`] registers all three from one function.

use crate::error::core_err;
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
    pub fn dtype(&self, i: usize) -> PyResult<DType> {
        self.opt_dtype(i)?.ok_or_else(|| {
            PyTypeError::new_err(format!("internal: argument {i} should be a dtype"))
        })
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
                return Ok(Out::Arg(i));
            }
            return Err(PyRuntimeError::new_err(format!(
                "output with shape {:?} doesn't match the broadcast shape {:?}",
                dst.inner.shape(),
                result.shape()
            )));
        }
        dst.inner.copy_(&result).map_err(core_err)?;
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
        DType::C64 => "ComplexFloat",
        DType::C128 => "ComplexDouble",
        DType::U16 => "UInt16",
        DType::U32 => "UInt32",
        DType::U64 => "UInt64",
    }
}

pub(crate) fn ok(t: torchnative_core::Result<Tensor>) -> PyResult<Out> {
    t.map(Out::Tensor).map_err(core_err)
}

pub(crate) type Table = HashMap<&'static str, Kernel>;

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

/// The five forms of an op with an `alpha` (`add`, `sub`): `.Tensor`, `.Scalar`, in place and
/// `out=`, all computing `$f(self, other, alpha)`.
macro_rules! alpha_forms {
    ($t:ident, $name:literal, $f:expr) => {{
        fn f(a: &Tensor, b: &Tensor, alpha: Scalar) -> torchnative_core::Result<Tensor> {
            let g: fn(&Tensor, &Tensor, Scalar) -> torchnative_core::Result<Tensor> = $f;
            g(a, b, alpha)
        }
        $t.insert(concat!("aten::", $name, ".Tensor"), |c| {
            ok(f(&c.tensor(0)?, &c.tensor(1)?, c.scalar(2)?))
        });
        $t.insert(concat!("aten::", $name, ".Scalar"), |c| {
            ok(f(
                &c.tensor(0)?,
                &Tensor::wrap_scalar(c.scalar(1)?),
                c.scalar(2)?,
            ))
        });
        $t.insert(concat!("aten::", $name, "_.Tensor"), |c| {
            let r = f(&c.tensor(0)?, &c.tensor(1)?, c.scalar(2)?).map_err(core_err)?;
            c.write_into(0, r)
        });
        $t.insert(concat!("aten::", $name, "_.Scalar"), |c| {
            let r = f(
                &c.tensor(0)?,
                &Tensor::wrap_scalar(c.scalar(1)?),
                c.scalar(2)?,
            )
            .map_err(core_err)?;
            c.write_into(0, r)
        });
        $t.insert(concat!("aten::", $name, ".out"), |c| {
            let r = f(&c.tensor(0)?, &c.tensor(1)?, c.scalar(2)?).map_err(core_err)?;
            c.write_into(3, r)
        });
    }};
}

/// `a + alpha * b` / `a - alpha * b`.
pub(crate) fn with_alpha(
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

pub(crate) fn dims_or_all(dims: Option<Vec<i64>>, ndim: usize) -> Vec<i64> {
    match dims {
        Some(d) if !d.is_empty() => d,
        _ => (0..ndim as i64).collect(),
    }
}

pub(crate) fn new_tensor(
    c: &Ctx<'_, '_>,
    shape: &[i64],
    dtype_arg: usize,
    device_arg: usize,
) -> PyResult<Tensor> {
    let shape = to_shape(shape)?;
    let dtype = c.opt_dtype(dtype_arg)?.unwrap_or_else(crate::default_float);
    Tensor::empty_on(&shape, dtype, c.device(device_arg)?).map_err(core_err)
}

pub(crate) fn to_shape(shape: &[i64]) -> PyResult<Vec<usize>> {
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

pub(crate) mod complex;
mod creation;
mod flags;
mod index;
mod linalg;
mod nn;
mod pointwise;
mod reduce;
mod types;
mod views;

fn build() -> Table {
    let mut t: Table = HashMap::new();
    pointwise::register(&mut t);
    complex::register_real_inputs(&mut t);
    creation::register(&mut t);
    views::register(&mut t);
    reduce::register(&mut t);
    linalg::register(&mut t);
    index::register(&mut t);
    nn::register(&mut t);
    flags::register(&mut t);
    types::register(&mut t);
    types::register_queries(&mut t);
    crate::storage::register(&mut t);
    crate::random::register(&mut t);
    t
}
