//! `torch.dtype`: every dtype upstream names exists as a singleton (code and libraries refer to
//! `torch.complex64` or `torch.float8_e4m3fn` at import); those torchnative-core does not store
//! are refused by name where a tensor of them would be made.

use pyo3::exceptions::{PyNotImplementedError, PyTypeError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyTuple;
use torchnative_core::DType;

/// (name, aliases, itemsize, is_floating_point, is_complex, is_signed, core dtype, abbreviation;
/// an empty abbreviation marks a dtype upstream leaves out of `_get_all_dtypes`)
type Row = (
    &'static str,
    &'static [&'static str],
    usize,
    bool,
    bool,
    bool,
    Option<DType>,
    &'static str,
);

/// Upstream's dtypes in its ScalarType order (the index is the dtype's code).
pub const DTYPES: &[Row] = &[
    ("uint8", &[], 1, false, false, false, Some(DType::U8), "u8"),
    ("int8", &[], 1, false, false, true, Some(DType::I8), "i8"),
    (
        "int16",
        &["short"],
        2,
        false,
        false,
        true,
        Some(DType::I16),
        "i16",
    ),
    (
        "int32",
        &["int"],
        4,
        false,
        false,
        true,
        Some(DType::I32),
        "i32",
    ),
    (
        "int64",
        &["long"],
        8,
        false,
        false,
        true,
        Some(DType::I64),
        "i64",
    ),
    (
        "float16",
        &["half"],
        2,
        true,
        false,
        true,
        Some(DType::F16),
        "f16",
    ),
    (
        "float32",
        &["float"],
        4,
        true,
        false,
        true,
        Some(DType::F32),
        "f32",
    ),
    (
        "float64",
        &["double"],
        8,
        true,
        false,
        true,
        Some(DType::F64),
        "f64",
    ),
    ("complex32", &["chalf"], 4, false, true, true, None, "c32"),
    (
        "complex64",
        &["cfloat"],
        8,
        false,
        true,
        true,
        Some(DType::C64),
        "c64",
    ),
    (
        "complex128",
        &["cdouble"],
        16,
        false,
        true,
        true,
        Some(DType::C128),
        "c128",
    ),
    ("bool", &[], 1, false, false, false, Some(DType::Bool), "b8"),
    ("qint8", &[], 1, false, false, true, None, ""),
    ("quint8", &[], 1, false, false, false, None, ""),
    ("qint32", &[], 4, false, false, true, None, ""),
    (
        "bfloat16",
        &[],
        2,
        true,
        false,
        true,
        Some(DType::BF16),
        "bf16",
    ),
    ("quint4x2", &[], 1, false, false, false, None, ""),
    ("quint2x4", &[], 1, false, false, false, None, ""),
    ("bits1x8", &[], 1, false, false, false, None, "b1x8"),
    ("bits2x4", &[], 1, false, false, false, None, "b2x4"),
    ("bits4x2", &[], 1, false, false, false, None, "b4x2"),
    ("bits8", &[], 1, false, false, false, None, "b8x1"),
    ("bits16", &[], 2, false, false, false, None, "b16x1"),
    ("float8_e5m2", &[], 1, true, false, true, None, "f8e5m2"),
    ("float8_e4m3fn", &[], 1, true, false, true, None, "f8e4m3fn"),
    (
        "float8_e5m2fnuz",
        &[],
        1,
        true,
        false,
        true,
        None,
        "f8e5m2fnuz",
    ),
    (
        "float8_e4m3fnuz",
        &[],
        1,
        true,
        false,
        true,
        None,
        "f8e4m3fnuz",
    ),
    (
        "uint16",
        &[],
        2,
        false,
        false,
        false,
        Some(DType::U16),
        "u16",
    ),
    (
        "uint32",
        &[],
        4,
        false,
        false,
        false,
        Some(DType::U32),
        "u32",
    ),
    (
        "uint64",
        &[],
        8,
        false,
        false,
        false,
        Some(DType::U64),
        "u64",
    ),
    ("uint1", &["bit"], 1, false, false, false, None, ""),
    ("uint2", &[], 1, false, false, false, None, ""),
    ("uint3", &[], 1, false, false, false, None, ""),
    ("uint4", &[], 1, false, false, false, None, ""),
    ("uint5", &[], 1, false, false, false, None, ""),
    ("uint6", &[], 1, false, false, false, None, ""),
    ("uint7", &[], 1, false, false, false, None, ""),
    ("int1", &[], 1, false, false, true, None, ""),
    ("int2", &[], 1, false, false, true, None, ""),
    ("int3", &[], 1, false, false, true, None, ""),
    ("int4", &[], 1, false, false, true, None, ""),
    ("int5", &[], 1, false, false, true, None, ""),
    ("int6", &[], 1, false, false, true, None, ""),
    ("int7", &[], 1, false, false, true, None, ""),
    (
        "float8_e8m0fnu",
        &[],
        1,
        true,
        false,
        false,
        None,
        "f8e8m0fnu",
    ),
    (
        "float4_e2m1fn_x2",
        &[],
        1,
        true,
        false,
        true,
        None,
        "f4e2m1fnx2",
    ),
    ("bcomplex32", &[], 4, false, true, true, None, "bc32"),
];

/// A dtype singleton.
#[pyclass(frozen, module = "torch", name = "dtype")]
pub struct PyDType {
    code: usize,
}

impl PyDType {
    fn row(&self) -> &'static Row {
        &DTYPES[self.code]
    }

    /// The dtype as torchnative-core stores it, or an error naming the dtype.
    pub fn core(&self) -> PyResult<DType> {
        self.row().6.ok_or_else(|| {
            PyNotImplementedError::new_err(format!(
                "dtype torch.{} is not supported by torchnative (tensors are stored as float32, \
                 float64, float16, bfloat16, int64, int32, int16, int8, uint8 or bool)",
                self.row().0
            ))
        })
    }
}

#[pymethods]
impl PyDType {
    #[getter]
    fn is_floating_point(&self) -> bool {
        self.row().3
    }
    #[getter]
    fn is_complex(&self) -> bool {
        self.row().4
    }
    #[getter]
    fn is_signed(&self) -> bool {
        self.row().5
    }
    #[getter]
    fn abbr(&self) -> &'static str {
        self.row().7
    }
    #[getter]
    fn itemsize(&self) -> usize {
        self.row().2
    }
    fn to_real(slf: &Bound<'_, Self>) -> PyResult<Py<PyDType>> {
        let py = slf.py();
        let real = match slf.get().row().0 {
            "complex32" => "float16",
            "complex64" => "float32",
            "complex128" => "float64",
            _ => return Ok(slf.clone().unbind()),
        };
        by_name(py, real)
    }
    fn to_complex(slf: &Bound<'_, Self>) -> PyResult<Py<PyDType>> {
        let py = slf.py();
        let complex = match slf.get().row().0 {
            "float16" => "complex32",
            "float32" => "complex64",
            "float64" => "complex128",
            n if slf.get().row().4 => n,
            n => {
                return Err(PyTypeError::new_err(format!(
                    "to_complex is not supported for torch.{n}"
                )))
            }
        };
        by_name(py, complex)
    }
    fn __repr__(&self) -> String {
        format!("torch.{}", self.row().0)
    }
    fn __reduce__(&self) -> &'static str {
        self.row().0
    }
    fn __hash__(&self) -> usize {
        self.code.wrapping_mul(0x9E37_79B9) ^ 0x5bd1_e995
    }
}

static SINGLETONS: PyOnceLock<Vec<Py<PyDType>>> = PyOnceLock::new();

/// All dtype singletons in code order.
pub fn singletons(py: Python<'_>) -> PyResult<&Vec<Py<PyDType>>> {
    SINGLETONS.get_or_try_init(py, || {
        (0..DTYPES.len())
            .map(|code| Py::new(py, PyDType { code }))
            .collect()
    })
}

pub fn by_name(py: Python<'_>, name: &str) -> PyResult<Py<PyDType>> {
    let code = DTYPES
        .iter()
        .position(|r| r.0 == name || r.1.contains(&name))
        .ok_or_else(|| PyTypeError::new_err(format!("unknown dtype name '{name}'")))?;
    Ok(singletons(py)?[code].clone_ref(py))
}

/// The singleton for a core dtype.
pub fn to_py(py: Python<'_>, dtype: DType) -> PyResult<Py<PyDType>> {
    by_name(py, dtype.name())
}

/// The core dtype of a `torch.dtype` object, refusing dtypes the core does not store.
pub fn dtype_from_py(v: &Bound<'_, PyAny>) -> PyResult<DType> {
    let d = v
        .cast::<PyDType>()
        .map_err(|_| PyTypeError::new_err("expected a torch.dtype"))?;
    d.get().core()
}

/// `torch._C._get_all_dtypes()`: upstream's list (every dtype with an abbreviation, in order).
#[pyfunction]
pub fn _get_all_dtypes(py: Python<'_>) -> PyResult<Vec<Py<PyDType>>> {
    let all = singletons(py)?;
    Ok(DTYPES
        .iter()
        .zip(all)
        .filter(|(row, _)| !row.7.is_empty())
        .map(|(_, d)| d.clone_ref(py))
        .collect())
}

/// `(name, aliases...)` per dtype, for the Python side to put on the `torch` module.
#[pyfunction]
pub fn _tn_dtype_names(py: Python<'_>) -> PyResult<Vec<(Py<PyDType>, Py<PyTuple>)>> {
    let all = singletons(py)?;
    DTYPES
        .iter()
        .zip(all)
        .map(|(row, d)| {
            let names: Vec<&str> = std::iter::once(row.0)
                .chain(row.1.iter().copied())
                .collect();
            Ok((d.clone_ref(py), PyTuple::new(py, names)?.unbind()))
        })
        .collect()
}
