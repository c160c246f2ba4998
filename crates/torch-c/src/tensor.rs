//! `torch._C.TensorBase`: the Python handle of a torchnative-core tensor.
//!
//! Upstream's `torch.Tensor` (torch/_tensor.py) subclasses this type; results are made as
//! instances of that class (registered by `_initExtension`), so Python-level methods of
//! `torch.Tensor` apply to every result. Operators are not methods here: they are attached
//! from the registry as descriptors that call the door (door.rs). What lives here is what
//! upstream's C++ binds by hand outside native_functions.yaml: sizes, strides, dtype, device,
//! autograd flags, indexing, Python number conversions and memory sharing.

use crate::dtype;
use crate::error::core_err;
use pyo3::exceptions::{PyIndexError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PySlice, PyTuple, PyType};
use torchnative_core::{DType, Device, Scalar, Tensor};

/// The Python classes the results are made of (set once by `_initExtension` / the surface).
pub static TENSOR_CLASS: PyOnceLock<Py<PyType>> = PyOnceLock::new();
pub static SIZE_CLASS: PyOnceLock<Py<PyType>> = PyOnceLock::new();
pub static DEVICE_FACTORY: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

#[pyclass(subclass, module = "torch._C", name = "TensorBase")]
pub struct TensorBase {
    pub inner: Tensor,
    pub requires_grad: bool,
    pub grad: Option<Py<PyAny>>,
    /// Bumped by in-place writes through this handle (upstream's version counter).
    pub version: u64,
    /// For a view: the Python object of its root base, so `v._base is x` holds as upstream
    /// (one Python object per tensor). Unset when the base never had a Python object.
    pub base_obj: Option<Py<PyAny>>,
    /// Upstream's lazy math bits (math_bits.rs): the values read conjugated / negated.
    pub conj: bool,
    pub neg: bool,
    /// The autograd node that made this tensor (`None` for a leaf) and which of its outputs
    /// this is (`autograd.py`, recorded by the door).
    pub grad_fn: Option<Py<PyAny>>,
    pub output_nr: usize,
}

impl TensorBase {
    /// `t[index] = value` without the version bump (`__setitem__` adds it).
    fn set_item(
        &self,
        py: Python<'_>,
        index: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let items = parse_index(py, index)?;
        let (view, advanced) = apply_index(&self.inner, items)?;
        let src = if let Ok(t) = value.cast::<TensorBase>() {
            t.borrow().logical()?
        } else if let Some(s) = crate::value_scalar(value) {
            Tensor::scalar_tensor(s, self.inner.dtype())
        } else {
            tensor_from_data(value, Some(self.inner.dtype()))?
        };
        // Memory under math bits stores the bits' inverse of the values (both involutions).
        let src = if self.conj || self.neg {
            let cast = src.to_dtype(self.inner.dtype()).map_err(core_err)?;
            crate::math_bits::resolve(&cast, self.conj, self.neg)?
        } else {
            src
        };
        if advanced.is_empty() {
            return view.copy_(&src).map_err(core_err);
        }
        let (view, first, indices) = advanced_block(&view, advanced)?;
        let k = indexed_dims(&indices);
        let src = src.to_dtype(view.dtype()).map_err(core_err)?;
        if first == 0 {
            return view.index_put_(&indices, &src, false).map_err(core_err);
        }
        to_front(&view, first, k)?
            .index_put_(&indices, &src, false)
            .map_err(core_err)
    }

    pub fn new(inner: Tensor) -> TensorBase {
        TensorBase {
            inner,
            requires_grad: false,
            grad: None,
            version: 0,
            base_obj: None,
            conj: false,
            neg: false,
            grad_fn: None,
            output_nr: 0,
        }
    }

    /// The tensor's values with its math bits applied (a copy when a bit is set).
    pub fn logical(&self) -> PyResult<Tensor> {
        crate::math_bits::resolve(&self.inner, self.conj, self.neg)
    }
}

/// Makes a `torch.Tensor` (or `TensorBase` before torch/_tensor.py ran) holding `t`.
pub fn wrap(py: Python<'_>, t: Tensor) -> PyResult<Py<PyAny>> {
    match TENSOR_CLASS.get(py) {
        Some(cls) => wrap_as(cls.bind(py), t),
        None => Ok(Py::new(py, TensorBase::new(t))?.into_any()),
    }
}

/// Makes an instance of `cls` (a subclass of TensorBase) holding `t`.
pub fn wrap_as(cls: &Bound<'_, PyType>, t: Tensor) -> PyResult<Py<PyAny>> {
    let obj = TensorBase::type_object_new(cls)?;
    obj.cast::<TensorBase>()?.borrow_mut().inner = t;
    Ok(obj.unbind())
}

/// Records on `view` (a Python tensor whose core tensor is a view of `of`'s) the Python
/// object of the root base: `of` itself, or the base `of` already records.
pub fn link_view_base(view: &Bound<'_, PyAny>, of: &Bound<'_, TensorBase>) -> PyResult<()> {
    let Ok(view) = view.cast::<TensorBase>() else {
        return Ok(());
    };
    if view.is(of) || !view.borrow().inner.is_view() {
        return Ok(());
    }
    let root = {
        let of_ref = of.borrow();
        if of_ref.inner.is_view() {
            match &of_ref.base_obj {
                Some(b) => b.clone_ref(of.py()),
                None => return Ok(()),
            }
        } else {
            of.clone().into_any().unbind()
        }
    };
    view.borrow_mut().base_obj = Some(root);
    Ok(())
}

impl TensorBase {
    /// `object.__new__`-style allocation of a (sub)class instance holding an empty tensor.
    fn type_object_new<'py>(cls: &Bound<'py, PyType>) -> PyResult<Bound<'py, PyAny>> {
        // Every operator's result comes through here: the `__new__` lookup is done once.
        static NEW: pyo3::sync::PyOnceLock<Py<PyAny>> = pyo3::sync::PyOnceLock::new();
        let py = cls.py();
        let new = NEW.get_or_try_init(py, || {
            py.get_type::<TensorBase>()
                .getattr("__new__")
                .map(Bound::unbind)
        })?;
        new.bind(py).call1((cls,))
    }
}

fn size_object(py: Python<'_>, dims: &[usize]) -> PyResult<Py<PyAny>> {
    let tuple = PyTuple::new(py, dims)?;
    match SIZE_CLASS.get(py) {
        // `tuple.__new__(Size, dims)`: the sizes are ints already, so `Size.__new__`'s
        // conversion of each (Python code, on every `.shape`) is skipped.
        Some(cls) => {
            static TUPLE_NEW: pyo3::sync::PyOnceLock<Py<PyAny>> = pyo3::sync::PyOnceLock::new();
            let new = TUPLE_NEW.get_or_try_init(py, || {
                py.get_type::<PyTuple>()
                    .getattr("__new__")
                    .map(Bound::unbind)
            })?;
            Ok(new.bind(py).call1((cls.bind(py), tuple))?.unbind())
        }
        None => Ok(tuple.into_any().unbind()),
    }
}

pub fn device_object(py: Python<'_>, device: Device) -> PyResult<Py<PyAny>> {
    let name = match device {
        Device::Cpu => "cpu",
        Device::Meta => "meta",
    };
    match DEVICE_FACTORY.get(py) {
        Some(f) => Ok(f.bind(py).call1((name,))?.unbind()),
        None => Ok(name.into_pyobject(py)?.into_any().unbind()),
    }
}

fn wrap_dim(dim: i64, ndim: usize) -> PyResult<usize> {
    let n = ndim.max(1) as i64;
    let d = if dim < 0 { dim + n } else { dim };
    if d < 0 || d >= n {
        return Err(PyIndexError::new_err(format!(
            "Dimension out of range (expected to be in range of [{}, {}], but got {dim})",
            -n,
            n - 1
        )));
    }
    Ok(d as usize)
}

fn scalar_to_py(py: Python<'_>, s: Scalar) -> PyResult<Py<PyAny>> {
    Ok(match s {
        Scalar::Bool(b) => PyBool::new(py, b).to_owned().into_any().unbind(),
        Scalar::Int(i) => i.into_pyobject(py)?.into_any().unbind(),
        Scalar::Float(f) => f.into_pyobject(py)?.into_any().unbind(),
        Scalar::Complex(re, im) => pyo3::types::PyComplex::from_doubles(py, re, im)
            .into_any()
            .unbind(),
    })
}

/// Nested lists of Python numbers (`tolist`).
fn to_list(py: Python<'_>, t: &Tensor) -> PyResult<Py<PyAny>> {
    if t.dim() == 0 {
        return scalar_to_py(py, t.item().map_err(core_err)?);
    }
    let mut items = Vec::with_capacity(t.shape()[0]);
    for i in 0..t.shape()[0] {
        let row = t.select(0, i as i64).map_err(core_err)?;
        items.push(to_list(py, &row)?);
    }
    Ok(PyList::new(py, items)?.into_any().unbind())
}

/// `torch.tensor(data)`: nested sequences of numbers, bools or 0-dim tensors.
pub fn tensor_from_data(data: &Bound<'_, PyAny>, dtype: Option<DType>) -> PyResult<Tensor> {
    #[derive(PartialEq, PartialOrd, Clone, Copy)]
    enum Kind {
        Bool,
        Int,
        Float,
        Complex,
    }
    /// What the walk collects: each number as f64, as i64 and its imaginary part.
    #[derive(Default)]
    struct Flat {
        floats: Vec<f64>,
        ints: Vec<i64>,
        imags: Vec<f64>,
    }
    fn walk(
        v: &Bound<'_, PyAny>,
        depth: usize,
        shape: &mut Vec<usize>,
        flat: &mut Flat,
        kind: &mut Option<Kind>,
        tensor_dtype: &mut Option<DType>,
    ) -> PyResult<()> {
        let is_seq = v.is_instance_of::<PyList>() || v.is_instance_of::<PyTuple>();
        if is_seq {
            let n = v.len()?;
            if shape.len() == depth {
                shape.push(n);
            } else if shape.len() < depth || shape[depth] != n {
                return Err(PyValueError::new_err(format!(
                    "expected sequence of length {} at dim {depth} (got {n})",
                    shape.get(depth).copied().unwrap_or(0)
                )));
            }
            for item in v.try_iter()? {
                walk(&item?, depth + 1, shape, flat, kind, tensor_dtype)?;
            }
            return Ok(());
        }
        if shape.len() > depth {
            return Err(PyTypeError::new_err(format!(
                "expected a sequence at dim {depth}, got {}",
                v.get_type().name()?
            )));
        }
        let mut imag = 0.0;
        let (k, f, i) = if v.is_instance_of::<PyBool>() {
            let b: bool = v.extract()?;
            (Kind::Bool, b as u8 as f64, b as i64)
        } else if v.is_instance_of::<PyInt>() {
            let i: i64 = v
                .extract()
                .map_err(|_| PyValueError::new_err("Overflow when unpacking long long"))?;
            (Kind::Int, i as f64, i)
        } else if v.is_instance_of::<PyFloat>() {
            let f: f64 = v.extract()?;
            (Kind::Float, f, f as i64)
        } else if let Ok(t) = v.cast::<TensorBase>() {
            let t = t.borrow();
            if t.inner.numel() != 1 {
                return Err(PyValueError::new_err(
                    "only one element tensors can be converted to Python scalars",
                ));
            }
            *tensor_dtype = Some(match *tensor_dtype {
                Some(d) => torchnative_core::promote_types(d, t.inner.dtype()),
                None => t.inner.dtype(),
            });
            match t
                .inner
                .reshape(&[])
                .and_then(|x| x.item())
                .map_err(core_err)?
            {
                Scalar::Bool(b) => (Kind::Bool, b as u8 as f64, b as i64),
                Scalar::Int(i) => (Kind::Int, i as f64, i),
                Scalar::Float(f) => (Kind::Float, f, f as i64),
                Scalar::Complex(re, im) => {
                    imag = im;
                    (Kind::Complex, re, re as i64)
                }
            }
        } else if let Ok(c) = v.cast::<pyo3::types::PyComplex>() {
            imag = c.imag();
            (Kind::Complex, c.real(), c.real() as i64)
        } else if let Ok(f) = v.call_method0("__float__").and_then(|x| x.extract::<f64>()) {
            let is_int = v.call_method0("__index__").is_ok();
            if is_int {
                let i: i64 = v.call_method0("__index__")?.extract()?;
                (Kind::Int, f, i)
            } else {
                (Kind::Float, f, f as i64)
            }
        } else {
            return Err(PyTypeError::new_err(format!(
                "Could not infer dtype of {}",
                v.get_type().name()?
            )));
        };
        *kind = Some(kind.map_or(k, |old| if k > old { k } else { old }));
        flat.floats.push(f);
        flat.ints.push(i);
        flat.imags.push(imag);
        Ok(())
    }
    let mut shape = Vec::new();
    let mut flat = Flat::default();
    let mut kind = None;
    let mut tensor_dtype = None;
    walk(data, 0, &mut shape, &mut flat, &mut kind, &mut tensor_dtype)?;
    let Flat {
        floats: flat,
        ints,
        imags,
    } = flat;
    let inferred = match (kind, tensor_dtype) {
        (_, Some(d)) if shape.is_empty() => d,
        (Some(Kind::Complex), _) => crate::default_float().to_complex().unwrap_or(DType::C64),
        (Some(Kind::Float), _) => crate::default_float(),
        (Some(Kind::Int), _) => DType::I64,
        (Some(Kind::Bool), _) => DType::Bool,
        (None, _) => crate::default_float(),
    };
    let dtype = dtype.unwrap_or(inferred);
    // c10's overflow check of each Python number against an integer dtype.
    let range = match dtype {
        DType::U8 => Some((0f64, 255f64, false)),
        DType::I8 => Some((-128.0, 127.0, true)),
        DType::I16 => Some((-32768.0, 32767.0, true)),
        DType::I32 => Some((-2147483648.0, 2147483647.0, true)),
        DType::U16 => Some((0.0, 65535.0, false)),
        DType::U32 => Some((0.0, 4294967295.0, false)),
        _ => None,
    };
    if let Some((lo, hi, signed)) = range {
        let overflows = if kind == Some(Kind::Float) {
            flat.iter()
                .any(|&f| f.is_finite() && (f < lo || f >= hi + 1.0))
        } else {
            ints.iter()
                .any(|&i| (i as f64) > hi || (signed && (i as f64) < lo))
        };
        if overflows {
            return Err(PyRuntimeError::new_err(format!(
                "value cannot be converted to type {} without overflow",
                dtype.name()
            )));
        }
    }
    let t = if kind == Some(Kind::Complex) || dtype.is_complex() {
        let values: Vec<torchnative_core::Cf64> = flat
            .iter()
            .zip(&imags)
            .map(|(&re, &im)| torchnative_core::Cf64::new(re, im))
            .collect();
        if kind == Some(Kind::Complex) && !dtype.is_complex() {
            return Err(PyTypeError::new_err("must be real number, not complex"));
        } else if kind == Some(Kind::Complex) || kind == Some(Kind::Float) {
            Tensor::from_complex(&values, &shape, dtype)
        } else {
            Tensor::from_i64s(&ints, &shape, dtype)
        }
    } else if kind == Some(Kind::Float) || dtype.is_float() {
        if kind == Some(Kind::Float) {
            Tensor::from_f64s(&flat, &shape, dtype)
        } else {
            Tensor::from_i64s(&ints, &shape, dtype)
        }
    } else {
        Tensor::from_i64s(&ints, &shape, dtype)
    };
    t.map_err(core_err)
}

/// One step of `tensor[index]`.
enum IndexItem {
    Int(i64),
    Slice(Option<i64>, Option<i64>, i64),
    NewAxis,
    Ellipsis,
    Advanced(Tensor),
}

fn parse_index(py: Python<'_>, index: &Bound<'_, PyAny>) -> PyResult<Vec<IndexItem>> {
    let items: Vec<Bound<'_, PyAny>> = if index.is_exact_instance_of::<PyTuple>() {
        index.try_iter()?.collect::<PyResult<_>>()?
    } else {
        vec![index.clone()]
    };
    items
        .iter()
        .map(|it| {
            if it.is_none() {
                Ok(IndexItem::NewAxis)
            } else if it.is(py.Ellipsis()) {
                Ok(IndexItem::Ellipsis)
            } else if it.is_instance_of::<PyBool>() {
                let b: bool = it.extract()?;
                Ok(IndexItem::Advanced(
                    Tensor::from_i64s(&[b as i64], &[], DType::Bool).map_err(core_err)?,
                ))
            } else if it.is_instance_of::<PyInt>() {
                Ok(IndexItem::Int(it.extract()?))
            } else if let Ok(s) = it.cast::<PySlice>() {
                let get = |name: &str| -> PyResult<Option<i64>> {
                    let v = s.getattr(name)?;
                    if v.is_none() {
                        Ok(None)
                    } else {
                        Ok(Some(v.call_method0("__index__")?.extract()?))
                    }
                };
                let step = get("step")?.unwrap_or(1);
                if step <= 0 {
                    return Err(PyValueError::new_err("step must be greater than zero"));
                }
                Ok(IndexItem::Slice(get("start")?, get("stop")?, step))
            } else if let Ok(t) = it.cast::<TensorBase>() {
                let t = t.borrow().inner.clone();
                if t.dim() == 0 && !t.dtype().is_float() && t.dtype() != DType::Bool {
                    if let Ok(Scalar::Int(i)) = t.item() {
                        return Ok(IndexItem::Int(i));
                    }
                }
                Ok(IndexItem::Advanced(t))
            } else if it.is_instance_of::<PyList>() || it.is_instance_of::<PyTuple>() {
                let t = tensor_from_data(it, None)?;
                // An empty list indexes nothing: upstream makes it an int64 index.
                let t = if t.numel() == 0 && t.dtype().is_float() {
                    t.to_dtype(DType::I64).map_err(core_err)?
                } else {
                    t
                };
                Ok(IndexItem::Advanced(t))
            } else if let Ok(i) = it.call_method0("__index__") {
                Ok(IndexItem::Int(i.extract()?))
            } else {
                Err(PyIndexError::new_err(
                    "only integers, slices (`:`), ellipsis (`...`), None and long or byte \
                     Variables are valid indices",
                ))
            }
        })
        .collect()
}

/// Applies basic indexing as views and returns the advanced indices per result dim.
fn apply_index(t: &Tensor, items: Vec<IndexItem>) -> PyResult<(Tensor, Vec<(usize, Tensor)>)> {
    let consumes = |i: &IndexItem| match i {
        IndexItem::Int(_) | IndexItem::Slice(..) => 1,
        IndexItem::Advanced(a) if a.dtype() == DType::Bool || a.dtype() == DType::U8 => a.dim(),
        IndexItem::Advanced(_) => 1,
        IndexItem::NewAxis | IndexItem::Ellipsis => 0,
    };
    let consumed: usize = items.iter().map(consumes).sum();
    if consumed > t.dim() {
        return Err(PyIndexError::new_err(format!(
            "too many indices for tensor of dimension {}",
            t.dim()
        )));
    }
    if items
        .iter()
        .filter(|i| matches!(i, IndexItem::Ellipsis))
        .count()
        > 1
    {
        return Err(PyIndexError::new_err(
            "an index can only have a single ellipsis ('...')",
        ));
    }
    // Dims consumed by the items after each position (for the ellipsis jump).
    let mut after = vec![0usize; items.len()];
    for k in (0..items.len().saturating_sub(1)).rev() {
        after[k] = after[k + 1] + consumes(&items[k + 1]);
    }
    let mut out = t.clone();
    let mut dim = 0usize;
    let mut advanced = Vec::new();
    for (k, item) in items.into_iter().enumerate() {
        match item {
            IndexItem::Int(i) => {
                let size = out.shape()[dim] as i64;
                if i < -size || i >= size {
                    return Err(PyIndexError::new_err(format!(
                        "index {i} is out of bounds for dimension {dim} with size {size}"
                    )));
                }
                out = out.select(dim as i64, i).map_err(core_err)?;
            }
            IndexItem::Slice(start, stop, step) => {
                let size = out.shape()[dim] as i64;
                let clamp = |v: i64| {
                    if v < 0 {
                        (v + size).max(0)
                    } else {
                        v.min(size)
                    }
                };
                let s = start.map_or(0, clamp);
                let e = stop.map_or(size, clamp).max(s);
                let len = ((e - s) + step - 1) / step;
                let strides = out.strides().to_vec();
                let mut sizes = out.shape().to_vec();
                let mut new_strides = strides.clone();
                sizes[dim] = len as usize;
                new_strides[dim] = strides[dim] * step as usize;
                let offset = out.storage_offset() + s as usize * strides[dim];
                out = out
                    .as_strided(&sizes, &new_strides, offset)
                    .map_err(core_err)?;
                dim += 1;
            }
            IndexItem::NewAxis => {
                out = out.unsqueeze(dim as i64).map_err(core_err)?;
                dim += 1;
            }
            IndexItem::Ellipsis => dim = out.dim() - after[k],
            IndexItem::Advanced(a) => {
                let a = match a.dtype() {
                    DType::I64 | DType::I32 | DType::Bool => a,
                    // uint8 masks are deprecated bool masks upstream.
                    DType::U8 => a.to_dtype(DType::Bool).map_err(core_err)?,
                    _ => {
                        return Err(PyIndexError::new_err(
                            "tensors used as indices must be long, int, byte or bool tensors",
                        ))
                    }
                };
                if a.dtype() == DType::Bool && a.dim() == 0 {
                    // A scalar mask adds a dim of size 1 (true) or 0 (false).
                    out = out.unsqueeze(dim as i64).map_err(core_err)?;
                    advanced.push((dim, a.reshape(&[1]).map_err(core_err)?));
                    dim += 1;
                    continue;
                }
                if a.dtype() == DType::Bool {
                    for (k, &m) in a.shape().iter().enumerate() {
                        let have = out.shape().get(dim + k).copied().unwrap_or(0);
                        if m != have {
                            return Err(PyIndexError::new_err(format!(
                                "The shape of the mask {:?} at index {k} does not match the shape of the indexed tensor {:?} at index {}",
                                a.shape(),
                                out.shape(),
                                dim + k
                            )));
                        }
                    }
                }
                let n = if a.dtype() == DType::Bool { a.dim() } else { 1 };
                advanced.push((dim, a));
                dim += n;
            }
        }
    }
    Ok((out, advanced))
}

#[pymethods]
impl TensorBase {
    /// `torch.Tensor()` / `torch.Tensor(2, 3)` / `torch.Tensor([1., 2.])`: the legacy
    /// constructor (float32).
    #[new]
    #[pyo3(signature = (*args, **_kwargs))]
    fn py_new(args: &Bound<'_, PyTuple>, _kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        let dtype = crate::default_float();
        if args.is_empty() {
            return Ok(TensorBase::new(
                Tensor::empty_on(&[0], dtype, Device::Cpu).map_err(core_err)?,
            ));
        }
        let first = args.get_item(0)?;
        if first.is_instance_of::<PyInt>() {
            let dims: Vec<usize> = args.extract()?;
            return Ok(TensorBase::new(
                Tensor::empty_on(&dims, dtype, Device::Cpu).map_err(core_err)?,
            ));
        }
        if args.len() == 1 {
            if first.get_type().name()? == "ndarray" {
                // torch.Tensor(ndarray): the array's values, copied, in the default dtype.
                let t = first
                    .py()
                    .import("torch")?
                    .call_method1("tensor", (&first,))?
                    .call_method1("to", (dtype::to_py(first.py(), dtype)?,))?;
                let inner = t.cast::<TensorBase>()?.borrow().inner.clone();
                return Ok(TensorBase::new(inner));
            }
            return Ok(TensorBase::new(tensor_from_data(&first, Some(dtype))?));
        }
        Err(PyTypeError::new_err(
            "torch.Tensor(): unsupported arguments",
        ))
    }

    #[getter]
    fn dtype(&self, py: Python<'_>) -> PyResult<Py<dtype::PyDType>> {
        dtype::to_py(py, self.inner.dtype())
    }
    #[getter]
    fn shape(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        size_object(py, self.inner.shape())
    }
    #[getter]
    fn device(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        device_object(py, self.inner.device())
    }
    #[getter]
    fn ndim(&self) -> usize {
        self.inner.dim()
    }
    #[getter]
    fn is_meta(&self) -> bool {
        self.inner.device() == Device::Meta
    }
    #[getter]
    fn is_cpu(&self) -> bool {
        self.inner.device() == Device::Cpu
    }
    #[getter]
    fn is_cuda(&self) -> bool {
        false
    }
    #[getter]
    fn is_xpu(&self) -> bool {
        false
    }
    #[getter]
    fn is_mps(&self) -> bool {
        false
    }
    #[getter]
    fn is_sparse(&self) -> bool {
        false
    }
    #[getter]
    fn is_sparse_csr(&self) -> bool {
        false
    }
    #[getter]
    fn is_quantized(&self) -> bool {
        false
    }
    #[getter]
    fn is_mkldnn(&self) -> bool {
        false
    }
    #[getter]
    fn is_nested(&self) -> bool {
        false
    }
    #[getter]
    fn is_leaf(&self) -> bool {
        self.grad_fn.is_none()
    }
    #[getter]
    fn grad_fn(&self, py: Python<'_>) -> Py<PyAny> {
        self.grad_fn
            .as_ref()
            .map_or_else(|| py.None(), |g| g.clone_ref(py))
    }
    /// Attaches the autograd node that made this tensor (`autograd.py`); `None` makes it a leaf.
    #[pyo3(signature = (node, output_nr=0))]
    fn _tn_set_grad_fn(&mut self, node: Option<Py<PyAny>>, output_nr: usize) {
        self.requires_grad = node.is_some() || self.requires_grad;
        self.grad_fn = node;
        self.output_nr = output_nr;
    }
    /// The tensor this one is a view of (a new handle on the base's storage and layout).
    #[getter]
    fn _base(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        match (self.inner.view_base(), &self.base_obj) {
            (Some(_), Some(obj)) => Ok(obj.clone_ref(py)),
            (Some(b), None) => wrap(py, b.clone()),
            (None, _) => Ok(py.None()),
        }
    }
    #[getter]
    fn output_nr(&self) -> usize {
        self.output_nr
    }
    /// upstream's version counter, which a view shares with its base: a view reads its root
    /// base's (writes through a view bump it too, `kernels::Ctx::write_into`).
    #[getter]
    fn _version(&self, py: Python<'_>) -> u64 {
        match &self.base_obj {
            Some(base) => base
                .bind(py)
                .cast::<TensorBase>()
                .map_or(self.version, |b| b.borrow().version),
            None => self.version,
        }
    }
    #[getter]
    fn names(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let nones: Vec<Py<PyAny>> = (0..self.inner.dim()).map(|_| py.None()).collect();
        Ok(PyTuple::new(py, nones)?.into_any().unbind())
    }
    #[getter]
    fn layout(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        Ok(py.import("torch")?.getattr("strided")?.unbind())
    }
    #[getter]
    fn _cdata(slf: &Bound<'_, Self>) -> usize {
        slf.as_ptr() as usize
    }
    #[getter]
    fn get_requires_grad(&self) -> bool {
        self.requires_grad
    }
    #[setter(requires_grad)]
    fn set_requires_grad(&mut self, value: bool) -> PyResult<()> {
        if self.grad_fn.is_some() && !value {
            return Err(PyRuntimeError::new_err(
                "you can only change requires_grad flags of leaf variables. If you want to use a \
                 computed variable in a subgraph that doesn't require differentiation use \
                 var_no_grad = var.detach().",
            ));
        }
        if value && !self.inner.dtype().is_float() {
            return Err(PyRuntimeError::new_err(
                "only Tensors of floating point and complex dtype can require gradients",
            ));
        }
        self.requires_grad = value;
        Ok(())
    }
    #[pyo3(signature = (requires_grad=true))]
    fn requires_grad_(slf: Bound<'_, Self>, requires_grad: bool) -> PyResult<Bound<'_, Self>> {
        slf.borrow_mut().set_requires_grad(requires_grad)?;
        Ok(slf)
    }
    #[getter(grad)]
    fn get_grad(&self, py: Python<'_>) -> Py<PyAny> {
        self.grad
            .as_ref()
            .map_or_else(|| py.None(), |g| g.clone_ref(py))
    }
    #[setter(grad)]
    fn set_grad(&mut self, value: Option<Py<PyAny>>) {
        self.grad = value;
    }
    /// `x.data`: another handle to the same storage, without autograd history.
    #[getter(data)]
    fn get_data(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let obj = wrap(py, self.inner.clone())?;
        {
            let mut d = obj.bind(py).cast::<TensorBase>()?.borrow_mut();
            d.conj = self.conj;
            d.neg = self.neg;
        }
        Ok(obj)
    }
    /// `x.data = y`: `x` now holds `y`'s tensor (`x.data = x` changes nothing).
    #[setter(data)]
    fn set_data(slf: &Bound<'_, Self>, value: &Bound<'_, TensorBase>) {
        if slf.is(value) {
            return;
        }
        let (inner, conj, neg) = {
            let v = value.borrow();
            (v.inner.clone(), v.conj, v.neg)
        };
        let mut s = slf.borrow_mut();
        s.inner = inner;
        s.conj = conj;
        s.neg = neg;
    }

    #[pyo3(signature = (dim=None))]
    fn size(&self, py: Python<'_>, dim: Option<i64>) -> PyResult<Py<PyAny>> {
        match dim {
            None => size_object(py, self.inner.shape()),
            Some(d) => {
                let d = wrap_dim(d, self.inner.dim())?;
                Ok(self
                    .inner
                    .shape()
                    .get(d)
                    .copied()
                    .unwrap_or(1)
                    .into_pyobject(py)?
                    .into_any()
                    .unbind())
            }
        }
    }
    #[pyo3(signature = (dim=None))]
    fn stride(&self, py: Python<'_>, dim: Option<i64>) -> PyResult<Py<PyAny>> {
        match dim {
            None => Ok(PyTuple::new(py, self.inner.strides())?.into_any().unbind()),
            Some(d) => {
                let d = wrap_dim(d, self.inner.dim())?;
                Ok(self
                    .inner
                    .strides()
                    .get(d)
                    .copied()
                    .unwrap_or(1)
                    .into_pyobject(py)?
                    .into_any()
                    .unbind())
            }
        }
    }
    fn dim(&self) -> usize {
        self.inner.dim()
    }
    fn ndimension(&self) -> usize {
        self.inner.dim()
    }
    fn numel(&self) -> usize {
        self.inner.numel()
    }
    fn nelement(&self) -> usize {
        self.inner.numel()
    }
    fn storage_offset(&self) -> usize {
        self.inner.storage_offset()
    }
    fn element_size(&self) -> usize {
        self.inner.dtype().size_in_bytes()
    }
    #[pyo3(signature = (memory_format=None))]
    fn is_contiguous(&self, memory_format: Option<Bound<'_, PyAny>>) -> PyResult<bool> {
        let name = match &memory_format {
            None => return Ok(self.inner.is_contiguous()),
            Some(f) => f.str()?.to_string(),
        };
        Ok(match name.as_str() {
            "torch.channels_last" => {
                self.inner.dim() == 4
                    && self
                        .inner
                        .is_contiguous_as(torchnative_core::tensor::MemoryFormat::ChannelsLast)
            }
            "torch.channels_last_3d" => {
                self.inner.dim() == 5
                    && self
                        .inner
                        .is_contiguous_as(torchnative_core::tensor::MemoryFormat::ChannelsLast)
            }
            "torch.preserve_format" => return Err(PyRuntimeError::new_err(
                "is_contiguous: preserve memory format is unsupported by the contiguous operator",
            )),
            _ => self.inner.is_contiguous(),
        })
    }
    fn is_floating_point(&self) -> bool {
        self.inner.dtype().is_float()
    }
    fn is_complex(&self) -> bool {
        self.inner.dtype().is_complex()
    }
    fn is_signed(&self) -> bool {
        !matches!(self.inner.dtype(), DType::U8 | DType::Bool)
    }
    /// Address of the first element (storage base + offset), stable while the storage lives.
    fn data_ptr(&self) -> PyResult<usize> {
        crate::memory::data_ptr(&self.inner)
    }
    fn _is_view(&self) -> bool {
        self.inner.is_view()
    }
    fn item(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        if self.inner.numel() != 1 {
            return Err(PyRuntimeError::new_err(format!(
                "a Tensor with {} elements cannot be converted to Scalar",
                self.inner.numel()
            )));
        }
        let one = self.logical()?.reshape(&[]).map_err(core_err)?;
        scalar_to_py(py, one.item().map_err(core_err)?)
    }
    fn tolist(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        to_list(py, &self.logical()?)
    }
    fn __len__(&self) -> PyResult<usize> {
        self.inner
            .shape()
            .first()
            .copied()
            .ok_or_else(|| PyTypeError::new_err("len() of a 0-d tensor"))
    }
    fn __bool__(&self) -> PyResult<bool> {
        if self.inner.numel() != 1 {
            return Err(PyRuntimeError::new_err(format!(
                "Boolean value of Tensor with {} values is ambiguous",
                if self.inner.numel() == 0 {
                    "no".to_string()
                } else {
                    "more than one".to_string()
                }
            )));
        }
        let v = self
            .logical()?
            .reshape(&[])
            .and_then(|t| t.item())
            .map_err(core_err)?;
        Ok(match v {
            Scalar::Complex(re, im) => re != 0.0 || im != 0.0,
            other => other.to_f64() != 0.0,
        })
    }
    fn __float__(&self) -> PyResult<f64> {
        if self.inner.numel() != 1 {
            return Err(PyValueError::new_err(
                "only one element tensors can be converted to Python scalars",
            ));
        }
        match self
            .logical()?
            .reshape(&[])
            .and_then(|t| t.item())
            .map_err(core_err)?
        {
            Scalar::Complex(_, im) if im != 0.0 => Err(PyRuntimeError::new_err(
                "value cannot be converted to type double without overflow",
            )),
            v => Ok(v.to_f64()),
        }
    }
    fn __int__(&self) -> PyResult<i64> {
        if self.inner.numel() != 1 {
            return Err(PyValueError::new_err(
                "only one element tensors can be converted to Python scalars",
            ));
        }
        Ok(
            match self
                .logical()?
                .reshape(&[])
                .and_then(|t| t.item())
                .map_err(core_err)?
            {
                Scalar::Complex(_, im) if im != 0.0 => {
                    return Err(PyRuntimeError::new_err(
                        "value cannot be converted to type int64_t without overflow",
                    ))
                }
                Scalar::Int(i) => i,
                Scalar::Bool(b) => b as i64,
                Scalar::Float(f) | Scalar::Complex(f, _) => {
                    torchnative_core::storage::float_to_i64(f)
                }
            },
        )
    }
    fn __index__(&self) -> PyResult<i64> {
        if self.inner.numel() != 1 || self.inner.dtype().is_float() {
            return Err(PyTypeError::new_err(
                "only integer tensors of a single element can be converted to an index",
            ));
        }
        self.__int__()
    }
    fn __getitem__(slf: &Bound<'_, Self>, index: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let py = slf.py();
        let items = parse_index(py, index)?;
        let (view, advanced) = apply_index(&slf.borrow().inner, items)?;
        let (conj, neg) = (slf.borrow().conj, slf.borrow().neg);
        if advanced.is_empty() {
            let obj = wrap(py, view)?;
            link_view_base(obj.bind(py), slf)?;
            // A view of a tensor with math bits reads the same way (math_bits.rs).
            let mut v = obj.bind(py).cast::<TensorBase>()?.borrow_mut();
            v.conj = conj;
            v.neg = neg;
            drop(v);
            return Ok(obj);
        }
        let view = crate::math_bits::resolve(&view, conj, neg)?;
        wrap(py, advanced_index(&view, advanced)?)
    }
    fn __setitem__(
        slf: &Bound<'_, Self>,
        index: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let py = slf.py();
        // (a shared borrow: the value may be this very tensor)
        slf.borrow().set_item(py, index, value)?;
        // one write: the version counter (shared with the base of a view) moves once
        let mut this = slf.borrow_mut();
        this.version += 1;
        if let Some(base) = &this.base_obj {
            if let Ok(b) = base.bind(py).cast::<TensorBase>() {
                if let Ok(mut b) = b.try_borrow_mut() {
                    b.version += 1;
                }
            }
        }
        Ok(())
    }
    /// `Tensor._make_subclass(cls, data, require_grad=False)`: a `cls` instance sharing `data`.
    #[staticmethod]
    // No text signature, as upstream's C++ method has none (dynamo compares signatures of
    // built-ins it can read with its Python polyfills).
    #[pyo3(signature = (cls, data, require_grad=false, **_kwargs), text_signature = None)]
    fn _make_subclass(
        cls: &Bound<'_, PyType>,
        data: PyRef<'_, TensorBase>,
        require_grad: bool,
        _kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Py<PyAny>> {
        let obj = wrap_as(cls, data.inner.clone())?;
        obj.bind(cls.py())
            .cast::<TensorBase>()?
            .borrow_mut()
            .set_requires_grad(require_grad)?;
        Ok(obj)
    }
    fn as_subclass(&self, cls: &Bound<'_, PyType>) -> PyResult<Py<PyAny>> {
        wrap_as(cls, self.inner.clone())
    }
    /// `numpy()`: an array sharing this tensor's memory (through the buffer protocol).
    #[pyo3(signature = (*, force=false))]
    fn numpy(slf: &Bound<'_, Self>, force: bool) -> PyResult<Py<PyAny>> {
        let _ = force;
        if slf.borrow().conj {
            return Err(PyRuntimeError::new_err(
                "Can't call numpy() on Tensor that has conjugate bit set. Use \
                 tensor.resolve_conj().numpy() instead.",
            ));
        }
        if slf.borrow().neg {
            return Err(PyRuntimeError::new_err(
                "Can't call numpy() on Tensor that has negative bit set. Use \
                 tensor.resolve_neg().numpy() instead.",
            ));
        }
        crate::memory::to_numpy(slf)
    }
    /// The storage this tensor views: an object reporting its base address and byte size.
    fn untyped_storage(&self) -> PyResult<UntypedStorageRef> {
        let size = self.inner.dtype().size_in_bytes();
        let (ptr, nbytes) = match self.inner.storage() {
            None => (0, 0),
            Some(s) => (
                crate::memory::data_ptr(&self.inner)? - self.inner.storage_offset() * size,
                s.read().byte_len(),
            ),
        };
        Ok(UntypedStorageRef {
            ptr,
            nbytes,
            device: self.inner.device(),
        })
    }
}

/// What `Tensor.untyped_storage()` returns: the storage's base address and size in bytes.
#[pyclass(module = "torch._C", name = "_TnUntypedStorage", frozen)]
pub struct UntypedStorageRef {
    ptr: usize,
    nbytes: usize,
    device: Device,
}

#[pymethods]
impl UntypedStorageRef {
    fn data_ptr(&self) -> usize {
        self.ptr
    }
    fn nbytes(&self) -> usize {
        self.nbytes
    }
    fn size(&self) -> usize {
        self.nbytes
    }
    fn __len__(&self) -> usize {
        self.nbytes
    }
    fn element_size(&self) -> usize {
        1
    }
    #[getter]
    fn device(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        device_object(py, self.device)
    }
    #[getter]
    fn is_cuda(&self) -> bool {
        false
    }
    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other
            .cast::<UntypedStorageRef>()
            .is_ok_and(|o| o.get().ptr == self.ptr && o.get().nbytes == self.nbytes)
    }
    fn __hash__(&self) -> usize {
        self.ptr
    }
}

/// The advanced indices' block: when they are adjacent, the first indexed dim and the index
/// tensors; when separated, `view` is permuted so that they lead (upstream puts the indexed
/// result dims first in that case) and the first dim is 0.
fn advanced_block(
    view: &Tensor,
    advanced: Vec<(usize, Tensor)>,
) -> PyResult<(Tensor, usize, Vec<Tensor>)> {
    let first = advanced[0].0;
    let mut expect = first;
    let mut adjacent = true;
    for (d, t) in &advanced {
        if *d != expect {
            adjacent = false;
        }
        expect = d + if t.dtype() == DType::Bool { t.dim() } else { 1 };
    }
    let indices: Vec<Tensor> = advanced.iter().map(|(_, t)| t.clone()).collect();
    if adjacent {
        return Ok((view.clone(), first, indices));
    }
    let mut lead = Vec::new();
    for (d, t) in &advanced {
        let n = if t.dtype() == DType::Bool { t.dim() } else { 1 };
        lead.extend(*d..*d + n);
    }
    let order: Vec<i64> = lead
        .iter()
        .copied()
        .chain((0..view.dim()).filter(|d| !lead.contains(d)))
        .map(|d| d as i64)
        .collect();
    Ok((view.permute(&order).map_err(core_err)?, 0, indices))
}

/// Moves dim block [first, first + k) to the front (core's `index` indexes leading dims).
fn to_front(view: &Tensor, first: usize, k: usize) -> PyResult<Tensor> {
    let n = view.dim();
    let order: Vec<i64> = (first..first + k)
        .chain(0..first)
        .chain(first + k..n)
        .map(|d| d as i64)
        .collect();
    view.permute(&order).map_err(core_err)
}

fn indexed_dims(indices: &[Tensor]) -> usize {
    indices
        .iter()
        .map(|t| if t.dtype() == DType::Bool { t.dim() } else { 1 })
        .sum()
}

fn advanced_index(view: &Tensor, advanced: Vec<(usize, Tensor)>) -> PyResult<Tensor> {
    let (view, first, indices) = advanced_block(view, advanced)?;
    let k = indexed_dims(&indices);
    let result = to_front(&view, first, k)?
        .index(&indices)
        .map_err(core_err)?;
    if first == 0 {
        return Ok(result);
    }
    // The indexed block's result dims go back to where the first index stood.
    let idx_dims = result.dim() + k - view.dim();
    let n = result.dim();
    let order: Vec<i64> = (idx_dims..idx_dims + first)
        .chain(0..idx_dims)
        .chain(idx_dims + first..n)
        .map(|d| d as i64)
        .collect();
    // A fresh result, not a view of the indexed copy.
    Ok(result
        .permute(&order)
        .and_then(|r| r.with_row_major_strides())
        .map_err(core_err)?
        .without_base())
}
