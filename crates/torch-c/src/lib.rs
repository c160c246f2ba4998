//! `torch._C` for the torch face: upstream torch's Python tree runs on this module instead of
//! PyTorch's C++ extension.
//!
//! Rust holds what carries semantics: the tensor type on torchnative-core (tensor.rs), dtypes
//! (dtype.rs), the operator registry read from upstream's native_functions.yaml at import and
//! the one door every operator call passes (door.rs), argument binding (value.rs), kernels
//! (kernels.rs) and memory sharing (memory.rs). The long tail of flags, enums and
//! registries that `import torch` reads but that carry no computation is Python code of ours
//! (`surface.py`, compiled into this module and run in its namespace at import).

// The module must be named `_C` (PyInit__C), which is not snake case.
#![allow(non_snake_case)]

mod autograd;
mod capture;
mod door;
mod dtype;
mod error;
mod interop;
mod iter_layout;
mod kernels;
mod math_bits;
mod memory;
mod placement;
mod random;
mod shared_memory;
mod storage;
mod tensor;
mod value;

use door::{OpFunction, Target, TF_DISABLED, TF_MODES, USER_SCHEMAS};
use pyo3::exceptions::{PyImportError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyList, PyType};
use std::sync::atomic::{AtomicU8, Ordering};
use tensor::{TensorBase, DEVICE_FACTORY, SIZE_CLASS, TENSOR_CLASS};
use torchnative_aten::{parse_schema, Argument, FunctionSchema, Registry};
use torchnative_core::{DType, Device, Scalar};

/// `torch.get_default_dtype()`: 0 float32, 1 float64, 2 float16, 3 bfloat16.
static DEFAULT_FLOAT: AtomicU8 = AtomicU8::new(0);

pub fn default_float() -> DType {
    match DEFAULT_FLOAT.load(Ordering::Relaxed) {
        1 => DType::F64,
        2 => DType::F16,
        3 => DType::BF16,
        _ => DType::F32,
    }
}

static DISABLED_TF_IMPL: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// `torch._C._disabled_torch_function_impl` (set by the surface).
pub fn disabled_torch_function_impl(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    DISABLED_TF_IMPL
        .get(py)
        .map(|f| f.bind(py).clone())
        .ok_or_else(|| PyRuntimeError::new_err("torch._C is not initialised"))
}

/// A Python number as a Scalar (None for anything else).
pub fn value_scalar(v: &Bound<'_, PyAny>) -> Option<Scalar> {
    use pyo3::types::{PyBool, PyFloat, PyInt};
    if v.is_instance_of::<PyBool>() {
        v.extract().ok().map(Scalar::Bool)
    } else if v.is_instance_of::<PyInt>() {
        v.extract().ok().map(Scalar::Int)
    } else if v.is_instance_of::<PyFloat>() {
        v.extract().ok().map(Scalar::Float)
    } else if let Ok(c) = v.cast::<pyo3::types::PyComplex>() {
        Some(Scalar::Complex(c.real(), c.imag()))
    } else {
        None
    }
}

/// cpu and meta work; every other device type is refused by name at the point of use.
pub fn device_from_str(s: &str) -> PyResult<Device> {
    let kind = s.split(':').next().unwrap_or(s);
    match kind {
        "cpu" => Ok(Device::Cpu),
        "meta" => Ok(Device::Meta),
        other => Err(PyRuntimeError::new_err(format!(
            "device '{other}' is not available in torchnative: tensors live on the CPU (or \
             'meta', shapes only); torchnative has no {other} backend"
        ))),
    }
}

pub fn device_of(v: &Bound<'_, PyAny>) -> PyResult<Device> {
    if let Ok(s) = v.extract::<String>() {
        return device_from_str(&s);
    }
    if let Ok(i) = v.extract::<i64>() {
        return device_from_str(&format!("cuda:{i}"));
    }
    let kind: String = v.getattr("type")?.extract()?;
    device_from_str(&kind)
}

/// A bound argument back as a Python object (for Python kernels).
pub fn value_to_py(py: Python<'_>, v: &value::Value) -> PyResult<Py<PyAny>> {
    use value::Value;
    Ok(match v {
        Value::None => py.None(),
        Value::Tensor(t) => t.clone_ref(py).into_any(),
        Value::Tensors(ts) => PyList::new(py, ts.iter().map(|t| t.clone_ref(py)))?
            .into_any()
            .unbind(),
        Value::OptTensors(ts) => PyList::new(
            py,
            ts.iter().map(|t| {
                t.as_ref()
                    .map(|t| t.clone_ref(py).into_any())
                    .unwrap_or_else(|| py.None())
            }),
        )?
        .into_any()
        .unbind(),
        Value::Scalar(Scalar::Bool(b)) | Value::Bool(b) => {
            b.into_pyobject(py)?.to_owned().into_any().unbind()
        }
        Value::Scalar(Scalar::Int(i)) | Value::Int(i) => i.into_pyobject(py)?.into_any().unbind(),
        Value::Scalar(Scalar::Float(f)) | Value::Float(f) => {
            f.into_pyobject(py)?.into_any().unbind()
        }
        Value::Scalar(Scalar::Complex(re, im)) => {
            pyo3::types::PyComplex::from_doubles(py, *re, *im)
                .into_any()
                .unbind()
        }
        Value::Ints(v) => PyList::new(py, v)?.into_any().unbind(),
        Value::Floats(v) => PyList::new(py, v)?.into_any().unbind(),
        Value::Bools(v) => PyList::new(py, v)?.into_any().unbind(),
        Value::Str(s) => s.into_pyobject(py)?.into_any().unbind(),
        Value::DType(d) => dtype::to_py(py, *d)?.into_any(),
        Value::Object(o) => o.clone_ref(py),
    })
}

// ----- functions the surface calls -----

#[pyfunction]
fn _tn_set_classes(
    py: Python<'_>,
    tensor: Option<Py<PyType>>,
    size: Option<Py<PyType>>,
    device: Option<Py<PyAny>>,
    disabled_impl: Option<Py<PyAny>>,
) -> PyResult<()> {
    if let Some(t) = tensor {
        let _ = TENSOR_CLASS.set(py, t);
    }
    if let Some(s) = size {
        let _ = SIZE_CLASS.set(py, s);
    }
    if let Some(d) = device {
        let _ = DEVICE_FACTORY.set(py, d);
    }
    if let Some(f) = disabled_impl {
        let _ = DISABLED_TF_IMPL.set(py, f);
    }
    Ok(())
}

/// (base name, has function variant, has method variant, python module or "") per name.
#[pyfunction]
fn _tn_registry_names() -> Vec<(String, bool, bool, String)> {
    let reg = door::registry();
    let mut out: Vec<(String, bool, bool, String)> = Vec::new();
    let mut index = std::collections::HashMap::new();
    for f in &reg.functions {
        let name = f.schema.base_name().to_string();
        let module = f.python_module.clone().unwrap_or_default();
        match index.get(&name) {
            Some(&i) => {
                let e: &mut (String, bool, bool, String) = &mut out[i];
                e.1 |= f.function;
                e.2 |= f.method;
            }
            None => {
                index.insert(name.clone(), out.len());
                out.push((name, f.function, f.method, module));
            }
        }
    }
    out
}

/// (type name, field names) of upstream's `torch.return_types`: one per Python-bound operator
/// whose returns are all named (`max` -> values, indices), `<name>_out` for out= forms.
#[pyfunction]
fn _tn_return_types() -> Vec<(String, Vec<String>)> {
    let mut seen = std::collections::HashSet::new();
    door::registry()
        .functions
        .iter()
        .filter(|f| f.function || f.method || f.python_module.is_some())
        .filter_map(|f| door::return_type_name(&f.schema).map(|n| (n, f)))
        .filter(|(n, _)| seen.insert(n.clone()))
        .map(|(n, f)| (n, f.schema.returns.iter().map(|r| r.name.clone()).collect()))
        .collect()
}

/// A Tensor method for every overload of `name` (`Tensor.add`, and `Tensor.__add__`).
#[pyfunction]
fn _tn_op(name: String) -> OpFunction {
    OpFunction {
        __name__: name.clone(),
        target: Target::Name(name),
        is_method: true,
    }
}

fn find_schema(qualified: &str, overload: &str) -> Option<FunctionSchema> {
    let full = if overload.is_empty() {
        qualified.to_string()
    } else {
        format!("{qualified}.{overload}")
    };
    if let Some(f) = door::registry().get(&full) {
        return Some(f.schema.clone());
    }
    USER_SCHEMAS
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .find(|s| s.full_name() == full)
        .cloned()
}

/// `torch.add` and the other namespace functions: built-in function objects (as upstream's
/// are; dynamo and `inspect` tell functions by their type) whose call is the door.
#[pyfunction]
fn _tn_function(py: Python<'_>, name: String) -> PyResult<Py<PyAny>> {
    // The function passes itself to __torch_function__ overrides as the public API; it learns
    // its own object once made (module-level functions live as long as the module).
    let this: std::sync::Arc<std::sync::OnceLock<Py<PyAny>>> = Default::default();
    let cell = this.clone();
    let target = Target::Name(name.clone());
    let c_name: &'static std::ffi::CStr =
        Box::leak(std::ffi::CString::new(name)?.into_boxed_c_str());
    let f = pyo3::types::PyCFunction::new_closure(py, Some(c_name), None, move |args, kwargs| {
        let py = args.py();
        let public = cell
            .get()
            .map(|f| f.bind(py).clone())
            .unwrap_or_else(|| py.None().into_bound(py));
        door::call(&public, &target, None, args, kwargs)
    })?;
    let _ = this.set(f.clone().into_any().unbind());
    Ok(f.into_any().unbind())
}

/// An overload packet's callable (`torch.ops.aten.add`): every overload of the operator.
#[pyfunction]
fn _tn_packet(qualified: String) -> OpFunction {
    OpFunction {
        __name__: qualified.clone(),
        target: Target::Qualified(qualified),
        is_method: false,
    }
}

/// The callable for exactly one overload (`torch.ops.aten.add.Tensor`).
#[pyfunction]
fn _tn_op_overload(qualified: &str, overload: &str) -> PyResult<OpFunction> {
    let schema = find_schema(qualified, overload).ok_or_else(|| {
        PyRuntimeError::new_err(format!("No such operator {qualified}.{overload}"))
    })?;
    Ok(OpFunction {
        __name__: schema.full_name(),
        target: Target::Overload(schema),
        is_method: false,
    })
}

/// Overload names of a qualified op (`aten::add` -> ["Tensor", "Scalar", "out", ...]).
#[pyfunction]
fn _tn_overload_names(qualified: &str) -> Vec<String> {
    let mut v: Vec<String> = door::registry()
        .overloads_of(qualified)
        .map(|f| f.schema.overload.clone())
        .collect();
    v.extend(
        USER_SCHEMAS
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter(|s| s.name == qualified)
            .map(|s| s.overload.clone()),
    );
    v
}

fn argument_dict<'py>(py: Python<'py>, a: &Argument) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("name", &a.name)?;
    d.set_item("type", a.ty.to_string())?;
    d.set_item("base", &a.ty.base_name)?;
    d.set_item("optional", a.ty.optional)?;
    d.set_item("list", a.ty.list.is_some())?;
    d.set_item("list_size", a.ty.list.flatten())?;
    d.set_item("elem_optional", a.ty.elem_optional)?;
    d.set_item("default", a.default.as_deref())?;
    d.set_item("kwarg_only", a.kwarg_only)?;
    d.set_item("is_out", a.is_out)?;
    match &a.alias {
        Some(al) => {
            let ad = PyDict::new(py);
            ad.set_item("is_write", al.is_write)?;
            ad.set_item("before", al.before.clone())?;
            ad.set_item("after", al.after.clone())?;
            d.set_item("alias", ad)?;
        }
        None => d.set_item("alias", py.None())?,
    }
    Ok(d)
}

fn schema_dict<'py>(py: Python<'py>, s: &FunctionSchema) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("name", &s.name)?;
    d.set_item("overload_name", &s.overload)?;
    d.set_item("text", s.to_string())?;
    d.set_item("is_vararg", s.is_vararg)?;
    d.set_item("is_varret", s.is_varret)?;
    let args = s
        .arguments
        .iter()
        .map(|a| argument_dict(py, a))
        .collect::<PyResult<Vec<_>>>()?;
    let rets = s
        .returns
        .iter()
        .map(|a| argument_dict(py, a))
        .collect::<PyResult<Vec<_>>>()?;
    d.set_item("arguments", args)?;
    d.set_item("returns", rets)?;
    Ok(d)
}

/// Parses a schema (the Python `FunctionSchema` is built from the returned dict).
#[pyfunction]
fn _tn_parse_schema<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyDict>> {
    let s = parse_schema(text, "").map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
    schema_dict(py, &s)
}

#[pyfunction]
fn _tn_schema<'py>(
    py: Python<'py>,
    qualified: &str,
    overload: &str,
) -> PyResult<Option<Bound<'py, PyDict>>> {
    find_schema(qualified, overload)
        .map(|s| schema_dict(py, &s))
        .transpose()
}

/// `torch.library` `define`: adds a run-time schema (namespace required).
#[pyfunction]
fn _tn_define(text: &str) -> PyResult<String> {
    let s = parse_schema(text, "").map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
    if s.namespace().is_empty() {
        return Err(PyValueError::new_err(format!(
            "schema '{text}' needs a namespace (ns::name)"
        )));
    }
    let mut all = USER_SCHEMAS.write().unwrap_or_else(|e| e.into_inner());
    if all.iter().any(|x| x.full_name() == s.full_name())
        || door::registry().get(&s.full_name()).is_some()
    {
        return Err(PyRuntimeError::new_err(format!(
            "operator {} is already defined",
            s.full_name()
        )));
    }
    let full = s.full_name();
    all.push(s);
    Ok(full)
}

/// `torch.library` `impl`: a Python kernel for (overload, dispatch key).
#[pyfunction]
fn _tn_register_py_kernel(full: String, key: String, kernel: Py<PyAny>) {
    door::PY_KERNELS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get_or_insert_with(Default::default)
        .insert((full, key), kernel);
}

/// Does this overload have a kernel here (compiled or registered from Python)?
#[pyfunction]
fn _tn_has_kernel(full: &str) -> bool {
    kernels::get(full).is_some()
        || door::PY_KERNELS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .is_some_and(|m| m.keys().any(|(f, _)| f == full))
}

/// Is the overload in upstream's dispatcher (`torch._C._dispatch_has_kernel`)? Yaml entries
/// and their autogen forms are, C++-registered extras marked `D` are, TorchScript-only ones
/// are not; operators defined at run time are once they have a kernel.
#[pyfunction]
fn _tn_in_dispatcher(full: &str) -> bool {
    door::registry().get(full).is_some_and(|f| f.in_dispatcher) || _tn_has_kernel(full)
}

/// Does upstream have a kernel for (overload, key)? Answered from native_functions.yaml.
#[pyfunction]
fn _tn_upstream_has_kernel(full: &str, key: &str) -> bool {
    door::registry()
        .get(full)
        .is_some_and(|f| f.has_kernel_for(key))
}

#[pyfunction]
fn _tn_kernel_names() -> Vec<&'static str> {
    kernels::names()
}

#[pyfunction]
#[pyo3(signature = (data, dtype=None))]
fn _tn_tensor(
    py: Python<'_>,
    data: &Bound<'_, PyAny>,
    dtype: Option<&Bound<'_, PyAny>>,
) -> PyResult<Py<PyAny>> {
    let d = dtype.map(dtype::dtype_from_py).transpose()?;
    let t = if let Ok(src) = data.cast::<TensorBase>() {
        let src = src.borrow().inner.deep_clone().map_err(error::core_err)?;
        match d {
            Some(d) => src.to_dtype(d).map_err(error::core_err)?,
            None => src,
        }
    } else {
        tensor::tensor_from_data(data, d)?
    };
    tensor::wrap(py, t)
}

/// `torch.set_num_threads(n)`: the size of the kernel pool every operator splits work over.
#[pyfunction]
fn set_num_threads(n: i64) -> PyResult<()> {
    if n <= 0 {
        return Err(pyo3::exceptions::PyRuntimeError::new_err(
            "set_num_threads expects a positive integer",
        ));
    }
    torchnative_core::kernels::set_num_threads(n as usize)
        .map_err(|e| pyo3::exceptions::PyRuntimeError::new_err(format!("set_num_threads: {e}")))
}

/// `torch.get_num_threads()`: the kernel pool's size.
#[pyfunction]
fn get_num_threads() -> usize {
    torchnative_core::kernels::num_threads()
}

#[pyfunction]
fn _tn_set_default_dtype(d: &Bound<'_, PyAny>) -> PyResult<()> {
    let code = match dtype::dtype_from_py(d)? {
        DType::F32 => 0,
        DType::F64 => 1,
        DType::F16 => 2,
        DType::BF16 => 3,
        other => {
            return Err(pyo3::exceptions::PyTypeError::new_err(format!(
                "only floating-point types are supported as the default type (got {})",
                other.name()
            )))
        }
    };
    DEFAULT_FLOAT.store(code, Ordering::Relaxed);
    Ok(())
}

#[pyfunction]
fn _tn_get_default_dtype(py: Python<'_>) -> PyResult<Py<dtype::PyDType>> {
    dtype::to_py(py, default_float())
}

/// `__torch_function__` mode stack depth and the disable switches.
#[pyfunction]
fn _tn_tf_modes(delta: isize) -> usize {
    if delta > 0 {
        TF_MODES.fetch_add(delta as usize, Ordering::Relaxed) + delta as usize
    } else if delta < 0 {
        TF_MODES.fetch_sub((-delta) as usize, Ordering::Relaxed) - (-delta) as usize
    } else {
        TF_MODES.load(Ordering::Relaxed)
    }
}

#[pyfunction]
fn _tn_tf_disabled(level: Option<usize>) -> usize {
    match level {
        Some(l) => TF_DISABLED.swap(l, Ordering::Relaxed),
        None => TF_DISABLED.load(Ordering::Relaxed),
    }
}

/// Refuses to run inside an installation that also holds upstream's native libraries.
fn refuse_beside_upstream(torch_dir: &std::path::Path) -> PyResult<()> {
    let lib = torch_dir.join("lib/libtorch_cpu.so");
    let upstream_c = std::fs::read_dir(torch_dir).ok().and_then(|entries| {
        entries.flatten().map(|e| e.path()).find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("_C.cpython-") && n.ends_with(".so"))
        })
    });
    if lib.exists() || upstream_c.is_some() {
        return Err(PyImportError::new_err(format!(
            "torchnative's torch face refuses to load next to upstream PyTorch: {} holds \
             PyTorch's native libraries ({}); install the face into its own virtual environment",
            torch_dir.display(),
            upstream_c.unwrap_or(lib).display()
        )));
    }
    Ok(())
}

fn load_registry(torch_dir: &std::path::Path) -> PyResult<()> {
    let path = torch_dir
        .parent()
        .unwrap_or(torch_dir)
        .join("torchgen/packaged/ATen/native/native_functions.yaml");
    let text = std::fs::read_to_string(&path).map_err(|e| {
        PyImportError::new_err(format!(
            "torch._C needs upstream's operator list at {}: {e}",
            path.display()
        ))
    })?;
    let mut reg = Registry::parse(&text).map_err(|e| PyImportError::new_err(e.to_string()))?;
    reg.add_extra_schemas(torchnative_aten::UPSTREAM_EXTRA_SCHEMAS)
        .map_err(|e| PyImportError::new_err(format!("upstream_extra_schemas.txt: {e}")))?;
    let _ = door::REGISTRY.set(reg);
    Ok(())
}

const SURFACE: &str = include_str!("surface.py");
const AUTOGRAD: &str = include_str!("autograd.py");
const DISTRIBUTED: &str = include_str!("distributed.py");

#[pymodule]
#[pyo3(name = "_C")]
fn init(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    let torch = py.import("sys")?.getattr("modules")?.get_item("torch")?;
    let torch_dir: String = torch.getattr("__path__")?.get_item(0)?.extract()?;
    let torch_dir = std::path::PathBuf::from(torch_dir);
    refuse_beside_upstream(&torch_dir)?;
    load_registry(&torch_dir)?;

    m.add_class::<TensorBase>()?;
    m.add_class::<dtype::PyDType>()?;
    m.add_class::<OpFunction>()?;
    m.add_class::<random::Generator>()?;
    m.add_class::<storage::StorageBase>()?;
    m.add_function(wrap_pyfunction!(storage::_tn_storage_of, m)?)?;
    m.add_function(wrap_pyfunction!(interop::_tn_from_numpy, m)?)?;
    m.add_function(wrap_pyfunction!(interop::_tn_frombuffer, m)?)?;
    m.add_function(wrap_pyfunction!(interop::_to_dlpack, m)?)?;
    m.add_function(wrap_pyfunction!(interop::_to_dlpack_versioned, m)?)?;
    m.add_function(wrap_pyfunction!(interop::_from_dlpack, m)?)?;
    m.add_function(wrap_pyfunction!(interop::_torchDeviceToDLDevice, m)?)?;
    m.add_function(wrap_pyfunction!(storage::_tn_tensor_from_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(storage::_tn_tensor_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(random::_tn_set_default_generator, m)?)?;
    m.add_function(wrap_pyfunction!(dtype::_tn_dtype_names, m)?)?;
    m.add_function(wrap_pyfunction!(dtype::_get_all_dtypes, m)?)?;
    m.add_function(wrap_pyfunction!(_tn_set_classes, m)?)?;
    m.add_function(wrap_pyfunction!(set_num_threads, m)?)?;
    m.add_class::<capture::CapturedDecoder>()?;
    m.add_function(wrap_pyfunction!(capture::_tn_capture, m)?)?;
    m.add_function(wrap_pyfunction!(capture::_tn_trace_start, m)?)?;
    m.add_function(wrap_pyfunction!(capture::_tn_trace_stop, m)?)?;
    m.add_function(wrap_pyfunction!(get_num_threads, m)?)?;
    m.add_function(wrap_pyfunction!(_tn_registry_names, m)?)?;
    m.add_function(wrap_pyfunction!(_tn_op, m)?)?;
    m.add_function(wrap_pyfunction!(_tn_function, m)?)?;
    m.add_function(wrap_pyfunction!(_tn_packet, m)?)?;
    m.add_function(wrap_pyfunction!(_tn_return_types, m)?)?;
    m.add_function(wrap_pyfunction!(_tn_op_overload, m)?)?;
    m.add_function(wrap_pyfunction!(_tn_overload_names, m)?)?;
    m.add_function(wrap_pyfunction!(_tn_parse_schema, m)?)?;
    m.add_function(wrap_pyfunction!(_tn_schema, m)?)?;
    m.add_function(wrap_pyfunction!(_tn_define, m)?)?;
    m.add_function(wrap_pyfunction!(_tn_register_py_kernel, m)?)?;
    m.add_function(wrap_pyfunction!(_tn_has_kernel, m)?)?;
    m.add_function(wrap_pyfunction!(_tn_upstream_has_kernel, m)?)?;
    m.add_function(wrap_pyfunction!(_tn_in_dispatcher, m)?)?;
    m.add_function(wrap_pyfunction!(_tn_kernel_names, m)?)?;
    m.add_function(wrap_pyfunction!(_tn_tensor, m)?)?;
    m.add_function(wrap_pyfunction!(_tn_set_default_dtype, m)?)?;
    m.add_function(wrap_pyfunction!(_tn_get_default_dtype, m)?)?;
    m.add_function(wrap_pyfunction!(_tn_tf_modes, m)?)?;
    m.add_function(wrap_pyfunction!(_tn_tf_disabled, m)?)?;

    let globals = m.dict();
    globals.set_item("__builtins__", py.import("builtins")?)?;
    let code = std::ffi::CString::new(SURFACE)?;
    py.run(&code, Some(&globals), None)?;
    let code = std::ffi::CString::new(AUTOGRAD)?;
    py.run(&code, Some(&globals), None)?;
    // torch.distributed's module runs in its own namespace (surface.py made the module), with
    // torch._C at hand as `_C`.
    let c10d = py
        .import("sys")?
        .getattr("modules")?
        .get_item("torch._C._distributed_c10d")?;
    let c10d_dict = c10d.getattr("__dict__")?;
    let c10d_globals = c10d_dict.cast::<pyo3::types::PyDict>()?;
    c10d_globals.set_item("__builtins__", py.import("builtins")?)?;
    c10d_globals.set_item("_C", m)?;
    let code = std::ffi::CString::new(DISTRIBUTED)?;
    py.run(&code, Some(c10d_globals), None)?;
    Ok(())
}
