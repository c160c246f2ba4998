//! The door's side of autograd: when an operator's input requires grad, the door asks
//! `autograd.py` (compiled in, run in this module's namespace) to record a node around the
//! kernel. Operators a recorded operator runs inside it (Python kernels, decompositions, the
//! backward formulas themselves) are not recorded again: they run "below autograd".

use crate::tensor::TensorBase;
use crate::value::Value;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};
use std::cell::Cell;
use torchnative_aten::FunctionSchema;

thread_local! {
    static BELOW: Cell<u32> = const { Cell::new(0) };
}

/// Held while a recorded operator's kernel runs.
pub struct Below;

impl Below {
    pub fn enter() -> Below {
        BELOW.with(|b| b.set(b.get() + 1));
        Below
    }
}

impl Drop for Below {
    fn drop(&mut self) {
        BELOW.with(|b| b.set(b.get() - 1));
    }
}

fn tensor_requires_grad(py: Python<'_>, t: &Py<TensorBase>) -> bool {
    // a tensor some caller holds mutably is not one the door is differentiating
    t.try_borrow(py).is_ok_and(|t| t.requires_grad)
}

/// Whether the door should ask `autograd.py` about this call.
pub fn wanted(py: Python<'_>, values: &[Value]) -> bool {
    if BELOW.with(|b| b.get()) > 0 {
        return false;
    }
    values.iter().any(|v| match v {
        Value::Tensor(t) => tensor_requires_grad(py, t),
        Value::Tensors(ts) => ts.iter().any(|t| tensor_requires_grad(py, t)),
        Value::OptTensors(ts) => ts.iter().flatten().any(|t| tensor_requires_grad(py, t)),
        _ => false,
    })
}

/// What `_tn_autograd_pre` decided: nothing to record, a token to finish after the kernel
/// ran, or the result itself (computed through upstream's decomposition, recorded op by op).
pub enum Pre {
    Nothing,
    Record(Py<PyAny>),
    Done(Py<PyAny>),
}

pub fn pre(py: Python<'_>, schema: &FunctionSchema, values: &[Value]) -> PyResult<Pre> {
    let module = py.import("torch._C")?;
    let hook = module.getattr("_tn_autograd_pre")?;
    // written arguments are marked `!name`, kwarg-only ones `*name` (for calling a
    // decomposition)
    let names = PyList::new(
        py,
        schema.arguments.iter().map(|a| {
            let written = if a.is_write() { "!" } else { "" };
            let kwarg = if a.kwarg_only { "*" } else { "" };
            format!("{written}{kwarg}{}", a.name)
        }),
    )?;
    let vals = PyList::new(
        py,
        values
            .iter()
            .map(|v| crate::value_to_py(py, v))
            .collect::<PyResult<Vec<_>>>()?,
    )?;
    let answer = hook.call1((schema.full_name(), names, vals))?;
    if answer.is_none() {
        return Ok(Pre::Nothing);
    }
    let pair = answer.cast::<PyTuple>()?;
    let token = pair.get_item(0)?;
    let done = pair.get_item(1)?;
    Ok(if token.is_none() {
        Pre::Done(done.unbind())
    } else {
        Pre::Record(token.unbind())
    })
}

/// Attaches the node `pre` prepared to the kernel's result.
pub fn post(py: Python<'_>, token: Py<PyAny>, result: &Py<PyAny>) -> PyResult<()> {
    py.import("torch._C")?
        .getattr("_tn_autograd_post")?
        .call1((token, result.clone_ref(py)))?;
    Ok(())
}
