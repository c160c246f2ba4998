//! Upstream's lazy "math bits". `x.conj()` of a complex tensor and `torch._neg_view(x)` are
//! views of `x`'s memory whose values read conjugated / negated: the tensor carries a bit
//! (`is_conj()`, `is_neg()`) instead of a copy. Kernels never see the bits; the door resolves
//! them around every operator as upstream's conjugate and negation fallbacks do:
//!
//! * view operators run on the raw memory and pass the bits on to their result (a view of a
//!   conjugate view is a conjugate view);
//! * other inputs with a bit are materialized before the kernel runs;
//! * an input the operator writes (`self` of an in-place op, `out=`) is resolved in place
//!   (its memory conjugated / negated), the operator runs, and the memory is turned back and
//!   the bit restored, so the write lands in the base as upstream's does.
//!
//! The operators about the bits themselves (`_conj`, `_neg_view`, `is_conj`, `resolve_conj`,
//! ...) are answered here.

use crate::error::core_err;
use crate::tensor::{link_view_base, wrap, TensorBase};
use crate::value::Value;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyTuple};
use torchnative_aten::FunctionSchema;
use torchnative_core::ops::complex;
use torchnative_core::Tensor;

/// The values of `t` with the bits applied (a copy when one is set).
pub fn resolve(t: &Tensor, conj: bool, neg: bool) -> PyResult<Tensor> {
    let mut r = t.clone();
    let conj = conj && t.dtype().is_complex();
    if conj {
        r = complex::unary("conj", &r, |z| z.conj()).map_err(core_err)?;
    }
    if neg {
        r = if r.dtype().is_complex() {
            complex::unary("neg", &r, |z| -z)
        } else {
            r.neg()
        }
        .map_err(core_err)?;
    }
    Ok(r)
}

/// Applies the bits to `t`'s memory in place (both are involutions: applying twice restores).
fn apply_in_place(t: &Tensor, conj: bool, neg: bool) -> PyResult<()> {
    if !(neg || (conj && t.dtype().is_complex())) {
        return Ok(());
    }
    let r = resolve(t, conj, neg)?;
    t.copy_(&r).map_err(core_err)
}

fn bits(t: &Py<TensorBase>, py: Python<'_>) -> (bool, bool) {
    let b = t.bind(py).borrow();
    (b.conj, b.neg)
}

/// A new Python tensor viewing `src`'s memory with the given bits (`x.conj()`, `_neg_view`).
fn bit_view(
    py: Python<'_>,
    src: &Bound<'_, TensorBase>,
    conj: bool,
    neg: bool,
) -> PyResult<Py<PyAny>> {
    let inner = src.borrow().inner.alias();
    let obj = wrap(py, inner)?;
    {
        let view = obj.bind(py).cast::<TensorBase>()?;
        let mut v = view.borrow_mut();
        v.conj = conj;
        v.neg = neg;
    }
    link_view_base(obj.bind(py), src)?;
    Ok(obj)
}

/// Answers the operators about the bits themselves; `None` for every other operator.
pub fn special(py: Python<'_>, full: &str, values: &[Value]) -> PyResult<Option<Py<PyAny>>> {
    let name = full.strip_prefix("aten::").unwrap_or(full);
    if !matches!(
        name,
        "_conj"
            | "conj"
            | "_neg_view"
            | "is_conj"
            | "is_neg"
            | "resolve_conj"
            | "resolve_neg"
            | "adjoint"
    ) {
        return Ok(None);
    }
    let Some(Value::Tensor(t)) = values.first() else {
        return Ok(None);
    };
    let x = t.bind(py);
    let (conj, neg, complex) = {
        let b = x.borrow();
        (b.conj, b.neg, b.inner.dtype().is_complex())
    };
    let same = || x.clone().into_any().unbind();
    if name == "adjoint" {
        // The conjugate transpose: a transposed view with the conjugate bit flipped.
        let inner = x.borrow().inner.clone();
        if !complex || inner.dim() < 2 {
            return Ok(None);
        }
        let obj = wrap(py, inner.transpose(-2, -1).map_err(core_err)?)?;
        {
            let mut v = obj.bind(py).cast::<TensorBase>()?.borrow_mut();
            v.conj = !conj;
            v.neg = neg;
        }
        link_view_base(obj.bind(py), x)?;
        return Ok(Some(obj));
    }
    Ok(Some(match name {
        "is_conj" => PyBool::new(py, conj).to_owned().into_any().unbind(),
        "is_neg" => PyBool::new(py, neg).to_owned().into_any().unbind(),
        // Conjugating a real tensor is the identity (upstream returns `self`).
        "_conj" | "conj" if !complex => same(),
        "_conj" | "conj" => bit_view(py, x, !conj, neg)?,
        "_neg_view" => bit_view(py, x, conj, !neg)?,
        "resolve_conj" if !conj => same(),
        "resolve_neg" if !neg => same(),
        "resolve_conj" => {
            let r = resolve(&x.borrow().inner, true, false)?;
            let obj = wrap(py, r)?;
            obj.bind(py).cast::<TensorBase>()?.borrow_mut().neg = neg;
            obj
        }
        _ => {
            let r = resolve(&x.borrow().inner, false, true)?;
            let obj = wrap(py, r)?;
            obj.bind(py).cast::<TensorBase>()?.borrow_mut().conj = conj;
            obj
        }
    }))
}

/// What [`prepare`] changed, for [`finish`] to undo or pass on.
pub struct Prepared {
    /// Written arguments resolved in place: (tensor, conj, neg) to turn back and restore.
    restore: Vec<(Py<TensorBase>, bool, bool)>,
    /// For a view operator: the bits of the viewed input, for the result.
    view_bits: Option<(bool, bool)>,
}

impl Prepared {
    pub fn none() -> Prepared {
        Prepared {
            restore: Vec::new(),
            view_bits: None,
        }
    }
}

fn any_bits(py: Python<'_>, values: &[Value]) -> bool {
    values.iter().any(|v| match v {
        Value::Tensor(t) => bits(t, py) != (false, false),
        Value::Tensors(ts) => ts.iter().any(|t| bits(t, py) != (false, false)),
        Value::OptTensors(ts) => ts.iter().flatten().any(|t| bits(t, py) != (false, false)),
        _ => false,
    })
}

/// A copy of the input without bits, as a new Python tensor.
fn materialized(py: Python<'_>, t: &Py<TensorBase>) -> PyResult<Py<TensorBase>> {
    let b = t.bind(py).borrow();
    if !b.conj && !b.neg {
        return Ok(t.clone_ref(py));
    }
    let r = resolve(&b.inner, b.conj, b.neg)?;
    let obj = wrap(py, r)?;
    let out = obj.bind(py).cast::<TensorBase>()?.clone().unbind();
    out.bind(py).borrow_mut().requires_grad = b.requires_grad;
    Ok(out)
}

/// Resolves the bits of `values` for `schema` (see the module docs). Cheap when no input
/// has a bit, which is nearly always.
pub fn prepare(
    py: Python<'_>,
    schema: &FunctionSchema,
    values: &mut [Value],
) -> PyResult<Prepared> {
    if !any_bits(py, values) {
        return Ok(Prepared::none());
    }
    let name = schema.name.strip_prefix("aten::").unwrap_or(&schema.name);
    let view_alias = match schema.returns.as_slice() {
        [ret] => ret
            .alias
            .as_ref()
            .filter(|a| !a.is_write)
            .map(|a| a.before.clone()),
        _ => schema
            .returns
            .first()
            .and_then(|r| r.alias.as_ref())
            .filter(|a| !a.is_write)
            .map(|a| a.before.clone()),
    };
    let mut prepared = Prepared::none();
    // Written arguments first: once resolved in place they hold their values and have no
    // bits, so a second occurrence of the same tensor as a read input needs nothing.
    for (arg, v) in schema.arguments.iter().zip(values.iter()) {
        let written = arg.alias.as_ref().is_some_and(|a| a.is_write);
        if let (true, Value::Tensor(t)) = (written, v) {
            let (conj, neg) = bits(t, py);
            if conj || neg {
                apply_in_place(&t.bind(py).borrow().inner, conj, neg)?;
                let mut b = t.bind(py).borrow_mut();
                b.conj = false;
                b.neg = false;
                prepared.restore.push((t.clone_ref(py), conj, neg));
            }
        }
    }
    for (arg, v) in schema.arguments.iter().zip(values.iter_mut()) {
        let viewed =
            view_alias.is_some() && arg.alias.as_ref().map(|a| &a.before) == view_alias.as_ref();
        match v {
            Value::Tensor(t) if viewed => {
                let (conj, neg) = bits(t, py);
                let complex = t.bind(py).borrow().inner.dtype().is_complex();
                match name {
                    "view_as_real" if conj => {
                        return Err(PyRuntimeError::new_err(
                            "view_as_real doesn't work on unresolved conjugated tensors.  To \
                             resolve the conjugate tensor so you can view it as real, use \
                             self.resolve_conj(); however, be warned that the resulting tensor \
                             will NOT alias the original.",
                        ))
                    }
                    // The real parts are unchanged by conjugation; the imaginary parts negate.
                    "real" => prepared.view_bits = Some((false, neg)),
                    "imag" => prepared.view_bits = Some((false, neg ^ (conj && complex))),
                    _ => prepared.view_bits = Some((conj, neg)),
                }
            }
            Value::Tensor(t) => *t = materialized(py, t)?,
            Value::Tensors(ts) => {
                for t in ts.iter_mut() {
                    *t = materialized(py, t)?;
                }
            }
            Value::OptTensors(ts) => {
                for t in ts.iter_mut().flatten() {
                    *t = materialized(py, t)?;
                }
            }
            _ => {}
        }
    }
    Ok(prepared)
}

/// Undoes [`prepare`]'s in-place resolutions and gives a view result its input's bits.
pub fn finish(
    py: Python<'_>,
    prepared: Prepared,
    result: PyResult<Py<PyAny>>,
) -> PyResult<Py<PyAny>> {
    for (t, conj, neg) in &prepared.restore {
        apply_in_place(&t.bind(py).borrow().inner, *conj, *neg)?;
        let mut b = t.bind(py).borrow_mut();
        b.conj = *conj;
        b.neg = *neg;
    }
    let result = result?;
    if let Some((conj, neg)) = prepared.view_bits {
        let set = |obj: &Bound<'_, PyAny>| {
            if let Ok(t) = obj.cast::<TensorBase>() {
                let mut b = t.borrow_mut();
                b.conj = conj && b.inner.dtype().is_complex();
                b.neg = neg;
            }
        };
        let bound = result.bind(py);
        match bound.cast::<PyTuple>() {
            Ok(items) => items.iter().for_each(|i| set(&i)),
            Err(_) => set(bound),
        }
    }
    Ok(result)
}
