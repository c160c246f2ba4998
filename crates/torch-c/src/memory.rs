//! Memory a tensor shares with Python: `data_ptr()` and `numpy()` views.

use crate::tensor::TensorBase;
use pyo3::exceptions::{PyRuntimeError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use torchnative_core::storage::Buffer;
use torchnative_core::{DType, Tensor};

fn base_ptr(buf: &Buffer) -> usize {
    buf.as_bytes().as_ptr() as usize
}

/// Address of the tensor's first element. Buffers never reallocate after creation, so the
/// address stays valid while any tensor holds the storage.
pub fn data_ptr(t: &Tensor) -> PyResult<usize> {
    match t.storage() {
        None => Ok(0),
        Some(s) => Ok(base_ptr(&s.read()) + t.storage_offset() * t.dtype().size_in_bytes()),
    }
}

fn typestr(d: DType) -> PyResult<&'static str> {
    Ok(match d {
        DType::F32 => "<f4",
        DType::F64 => "<f8",
        DType::F16 => "<f2",
        DType::I64 => "<i8",
        DType::I32 => "<i4",
        DType::I16 => "<i2",
        DType::I8 => "|i1",
        DType::U8 => "|u1",
        DType::Bool => "|b1",
        DType::C64 => "<c8",
        DType::C128 => "<c16",
        DType::U16 => "<u2",
        DType::U32 => "<u4",
        DType::U64 => "<u8",
        DType::BF16 => return Err(PyTypeError::new_err("Got unsupported ScalarType BFloat16")),
    })
}

/// Keeps the tensor alive for numpy and describes its memory (`__array_interface__`).
#[pyclass(module = "torch._C", name = "_TnArrayOwner", frozen)]
struct ArrayOwner {
    /// Never read: holding it keeps the tensor's memory alive as long as numpy's array.
    #[allow(dead_code)]
    tensor: Py<PyAny>,
    interface: Py<PyDict>,
}

#[pymethods]
impl ArrayOwner {
    #[getter]
    fn __array_interface__(&self, py: Python<'_>) -> Py<PyDict> {
        self.interface.clone_ref(py)
    }
}

pub fn to_numpy(t: &Bound<'_, TensorBase>) -> PyResult<Py<PyAny>> {
    let py = t.py();
    let inner = t.borrow().inner.clone();
    if t.borrow().requires_grad {
        return Err(PyRuntimeError::new_err(
            "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.",
        ));
    }
    if inner.storage().is_none() {
        return Err(PyRuntimeError::new_err(
            "Can't call numpy() on a meta tensor",
        ));
    }
    let size = inner.dtype().size_in_bytes();
    let interface = PyDict::new(py);
    interface.set_item("version", 3)?;
    interface.set_item("typestr", typestr(inner.dtype())?)?;
    interface.set_item("shape", pyo3::types::PyTuple::new(py, inner.shape())?)?;
    let strides: Vec<usize> = inner.strides().iter().map(|s| s * size).collect();
    interface.set_item("strides", pyo3::types::PyTuple::new(py, strides)?)?;
    interface.set_item("data", (data_ptr(&inner)?, false))?;
    let owner = Py::new(
        py,
        ArrayOwner {
            tensor: t.clone().into_any().unbind(),
            interface: interface.unbind(),
        },
    )?;
    Ok(py
        .import("numpy")?
        .call_method1("asarray", (owner,))?
        .unbind())
}
