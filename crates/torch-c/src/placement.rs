//! `device="meta"` for operators whose kernels compute on the CPU (factories such as
//! `arange`, `linspace`, `eye`, `rand`, `new_zeros`): the door gives them upstream's meta
//! result (shape, strides and dtype, no data) instead of a CPU tensor on the wrong device.
//!
//! Why here and not per kernel: `device=` is a schema argument of hundreds of factories, and
//! transformers builds every model under `with torch.device("meta")`, so a kernel that
//! ignored the argument would silently put a tensor on the CPU.

use crate::kernels::{self, Ctx};
use crate::value::{Out, Value};
use pyo3::prelude::*;
use torchnative_aten::FunctionSchema;
use torchnative_core::{Device, Tensor};

/// The index of a `device` argument asking for the meta device.
fn meta_device_arg(py: Python<'_>, schema: &FunctionSchema, values: &[Value]) -> Option<usize> {
    schema.arguments.iter().zip(values).position(|(a, v)| {
        a.name == "device"
            && match v {
                Value::Object(o) => crate::device_of(o.bind(py)).ok() == Some(Device::Meta),
                Value::Str(s) => crate::device_from_str(s).ok() == Some(Device::Meta),
                _ => false,
            }
    })
}

fn clone_value(py: Python<'_>, v: &Value) -> Value {
    match v {
        Value::None => Value::None,
        Value::Tensor(t) => Value::Tensor(t.clone_ref(py)),
        Value::Tensors(ts) => Value::Tensors(ts.iter().map(|t| t.clone_ref(py)).collect()),
        Value::OptTensors(ts) => Value::OptTensors(
            ts.iter()
                .map(|t| t.as_ref().map(|t| t.clone_ref(py)))
                .collect(),
        ),
        Value::Scalar(s) => Value::Scalar(*s),
        Value::Int(i) => Value::Int(*i),
        Value::Ints(v) => Value::Ints(v.clone()),
        Value::Float(f) => Value::Float(*f),
        Value::Floats(v) => Value::Floats(v.clone()),
        Value::Bool(b) => Value::Bool(*b),
        Value::Bools(v) => Value::Bools(v.clone()),
        Value::Str(s) => Value::Str(s.clone()),
        Value::DType(d) => Value::DType(*d),
        Value::Object(o) => Value::Object(o.clone_ref(py)),
    }
}

/// A meta tensor with `t`'s sizes, strides and dtype.
fn as_meta(t: &Tensor) -> PyResult<Tensor> {
    if t.device() == Device::Meta {
        return Ok(t.clone());
    }
    Tensor::empty_strided(t.shape(), t.strides(), t.dtype(), Device::Meta)
        .map_err(crate::error::core_err)
}

/// Runs `kernel` for a call that asked for `device="meta"`; `None` when it did not.
///
/// A kernel that honours the device returns its meta result; one that computed on the CPU
/// has its result turned into the meta tensor upstream returns. A kernel that refuses meta
/// outright (random factories: the CPU stream must not advance for a tensor without values)
/// runs once with a zero-size `size` (or `n`) on the CPU to learn the dtype, and the result
/// is a contiguous meta tensor of the asked size.
pub fn run_for_meta(
    py: Python<'_>,
    schema: &FunctionSchema,
    values: &[Value],
    kernel: kernels::Kernel,
) -> PyResult<Option<Out>> {
    let Some(device_at) = meta_device_arg(py, schema, values) else {
        return Ok(None);
    };
    let first = kernel(&Ctx { py, values });
    let refusal = match first {
        Ok(Out::Tensor(t)) => return Ok(Some(Out::Tensor(as_meta(&t)?))),
        Ok(other) => return Ok(Some(other)),
        Err(e) => e,
    };
    if schema.base_name().ends_with("_like") {
        return like_for_meta(py, values, device_at, kernel, refusal).map(Some);
    }
    let size_at = schema
        .arguments
        .iter()
        .position(|a| a.name == "size" || (a.name == "n" && schema.base_name() == "randperm"));
    let Some(size_at) = size_at else {
        return Err(refusal);
    };
    let shape: Vec<usize> = match &values[size_at] {
        Value::Ints(v) => v.iter().map(|&d| d.max(0) as usize).collect(),
        Value::Int(n) => vec![(*n).max(0) as usize],
        _ => return Err(refusal),
    };
    let mut dry: Vec<Value> = values.iter().map(|v| clone_value(py, v)).collect();
    dry[device_at] = Value::None;
    dry[size_at] = match &values[size_at] {
        Value::Ints(v) => Value::Ints(vec![0; v.len()]),
        _ => Value::Int(0),
    };
    match kernel(&Ctx { py, values: &dry })? {
        Out::Tensor(t) => Ok(Some(Out::Tensor(
            Tensor::meta(&shape, t.dtype()).map_err(crate::error::core_err)?,
        ))),
        _ => Err(refusal),
    }
}

/// `rand_like(x, device="meta")` and friends: the dtype from a run on an empty tensor of x's
/// dtype, the layout from x (memory format preserved, as upstream's empty_like).
fn like_for_meta(
    py: Python<'_>,
    values: &[Value],
    device_at: usize,
    kernel: kernels::Kernel,
    refusal: PyErr,
) -> PyResult<Out> {
    let Some(Value::Tensor(x)) = values.first() else {
        return Err(refusal);
    };
    let x = x.bind(py).borrow().inner.clone();
    let empty = Tensor::empty_on(&[0], x.dtype(), Device::Cpu).map_err(crate::error::core_err)?;
    let empty = crate::tensor::wrap(py, empty)?;
    let mut dry: Vec<Value> = values.iter().map(|v| clone_value(py, v)).collect();
    dry[0] = Value::Tensor(
        empty
            .bind(py)
            .cast::<crate::tensor::TensorBase>()?
            .clone()
            .unbind(),
    );
    dry[device_at] = Value::None;
    match kernel(&Ctx { py, values: &dry })? {
        Out::Tensor(t) => {
            let strides = torchnative_core::tensor::MemoryFormat::Preserve
                .strides_for(x.shape(), x.strides());
            Ok(Out::Tensor(
                Tensor::empty_strided(x.shape(), &strides, t.dtype(), Device::Meta)
                    .map_err(crate::error::core_err)?,
            ))
        }
        _ => Err(refusal),
    }
}
