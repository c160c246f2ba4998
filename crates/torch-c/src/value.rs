//! Python values bound to schema argument types, and kernel results turned back into Python.
//!
//! This is the face's `PythonArgParser`: [`bind`] matches a call's positional and keyword
//! arguments against one overload's schema, checks each value against its declared type and
//! fills defaults from the schema text. A mismatch is not an error yet (another overload may
//! match); the door reports all candidates when none does.

use crate::dtype::{dtype_from_py, PyDType};
use crate::tensor::{wrap, TensorBase};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyTuple};
use torchnative_aten::{Argument, BaseType, FunctionSchema};
use torchnative_core::{DType, Scalar, Tensor};

/// One bound argument.
#[derive(Debug)]
pub enum Value {
    None,
    Tensor(Py<TensorBase>),
    Tensors(Vec<Py<TensorBase>>),
    OptTensors(Vec<Option<Py<TensorBase>>>),
    Scalar(Scalar),
    Int(i64),
    Ints(Vec<i64>),
    Float(f64),
    Floats(Vec<f64>),
    Bool(bool),
    Bools(Vec<bool>),
    Str(String),
    DType(DType),
    /// `torch.device`/`Layout`/`MemoryFormat`/`Generator`/`Dimname`...: kept as the object.
    Object(Py<PyAny>),
}

impl Value {
    pub fn is_none(&self) -> bool {
        matches!(self, Value::None)
    }
}

/// Why a value does not fit a parameter (used in the door's no-overload message).
pub struct Mismatch(pub String);

fn python_type_name(v: &Bound<'_, PyAny>) -> String {
    v.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".into())
}

/// `float` / `int` / `bool` / `complex` (the Python types) as the dtypes upstream maps them to:
/// float64, int64, bool, complex128.
fn python_type_dtype(v: &Bound<'_, PyAny>) -> Option<DType> {
    let py = v.py();
    let is = |t: Bound<'_, pyo3::types::PyType>| v.is(&t);
    if is(py.get_type::<PyFloat>()) {
        Some(DType::F64)
    } else if is(py.get_type::<PyBool>()) {
        Some(DType::Bool)
    } else if is(py.get_type::<PyInt>()) {
        Some(DType::I64)
    } else if is(py.get_type::<pyo3::types::PyComplex>()) {
        Some(DType::C128)
    } else {
        None
    }
}

fn scalar_of(v: &Bound<'_, PyAny>) -> Option<Scalar> {
    if v.is_instance_of::<PyBool>() {
        return v.extract::<bool>().ok().map(Scalar::Bool);
    }
    if v.is_instance_of::<PyInt>() {
        return v.extract::<i64>().ok().map(Scalar::Int);
    }
    if v.is_instance_of::<PyFloat>() {
        return v.extract::<f64>().ok().map(Scalar::Float);
    }
    if let Ok(c) = v.cast::<pyo3::types::PyComplex>() {
        return Some(Scalar::Complex(c.real(), c.imag()));
    }
    // A 0-dim tensor (or numpy scalar via __index__/__float__) stands for a number.
    if let Ok(t) = v.cast::<TensorBase>() {
        let t = t.borrow();
        if t.inner.dim() == 0 && t.inner.storage().is_some() {
            return t.inner.item().ok();
        }
        return None;
    }
    let np_like = python_type_name(v);
    if np_like.starts_with("int") || np_like.starts_with("uint") {
        return v.extract::<i64>().ok().map(Scalar::Int);
    }
    if np_like.starts_with("float") {
        return v.extract::<f64>().ok().map(Scalar::Float);
    }
    if np_like.starts_with("complex") {
        let c = v.call_method0("__complex__").ok()?;
        let c = c.cast::<pyo3::types::PyComplex>().ok()?;
        return Some(Scalar::Complex(c.real(), c.imag()));
    }
    if np_like == "bool_" {
        return v.extract::<bool>().ok().map(Scalar::Bool);
    }
    None
}

/// upstream's `is_int_or_symint`: what an `SymInt` parameter, or the first element of an int
/// list, takes: an int (not a bool), an object with `__index__`, or a one-element integral
/// (bool included) tensor.
fn is_int_or_symint(v: &Bound<'_, PyAny>) -> bool {
    if v.is_instance_of::<PyBool>() || v.is_instance_of::<PyFloat>() {
        return false;
    }
    if v.is_instance_of::<PyInt>() {
        return true;
    }
    if let Ok(t) = v.cast::<TensorBase>() {
        let t = t.borrow();
        return t.inner.numel() == 1 && !t.inner.dtype().is_float();
    }
    v.hasattr("__index__").unwrap_or(false)
}

/// upstream's check for an `int` parameter (`INT64`): an int (not a bool), a NumPy integer,
/// or a 0-dim integral (not bool) tensor that does not require grad.
fn is_int64(v: &Bound<'_, PyAny>) -> bool {
    if v.is_instance_of::<PyBool>() || v.is_instance_of::<PyFloat>() {
        return false;
    }
    if let Ok(t) = v.cast::<TensorBase>() {
        let t = t.borrow();
        return t.inner.dim() == 0
            && !t.inner.dtype().is_float()
            && t.inner.dtype() != DType::Bool
            && !t.requires_grad;
    }
    true
}

fn int_of(v: &Bound<'_, PyAny>) -> Option<i64> {
    if v.is_instance_of::<PyInt>() {
        return v.extract::<i64>().ok();
    }
    if let Ok(t) = v.cast::<TensorBase>() {
        let t = t.borrow();
        if t.inner.numel() == 1 && !t.inner.dtype().is_float() && t.inner.storage().is_some() {
            return match t.inner.item().ok()? {
                Scalar::Int(i) => Some(i),
                Scalar::Bool(b) => Some(b as i64),
                Scalar::Float(_) | Scalar::Complex(..) => None,
            };
        }
        return None;
    }
    if v.is_instance_of::<PyFloat>() {
        return None;
    }
    // numpy integers and SymInt-likes implement __index__.
    v.call_method0("__index__").ok()?.extract::<i64>().ok()
}

fn float_of(v: &Bound<'_, PyAny>) -> Option<f64> {
    if v.is_instance_of::<PyFloat>() || v.is_instance_of::<PyInt>() {
        return v.extract::<f64>().ok();
    }
    match scalar_of(v)? {
        Scalar::Float(f) => Some(f),
        Scalar::Int(i) => Some(i as f64),
        Scalar::Bool(b) => Some(b as u8 as f64),
        Scalar::Complex(..) => None,
    }
}

fn sequence_items<'py>(v: &Bound<'py, PyAny>) -> Option<Vec<Bound<'py, PyAny>>> {
    if v.is_instance_of::<PyList>() || v.is_instance_of::<PyTuple>() {
        return v.try_iter().ok()?.map(|x| x.ok()).collect();
    }
    None
}

/// Checks and converts one value for `arg`. `python_binding`: apply upstream's
/// `PythonArgParser` rules (stricter about ints than `torch.ops`, which takes any Python int,
/// bools included).
pub fn convert(
    arg: &Argument,
    v: &Bound<'_, PyAny>,
    python_binding: bool,
) -> Result<Value, Mismatch> {
    let ty = &arg.ty;
    let fail = || {
        Mismatch(format!(
            "argument '{}' must be {}, not {}",
            arg.name,
            ty,
            python_type_name(v)
        ))
    };
    if v.is_none() {
        return if ty.optional {
            Ok(Value::None)
        } else {
            Err(fail())
        };
    }
    if let Some(size) = ty.list {
        let items = match sequence_items(v) {
            Some(items) => items,
            // `int[2] stride=1`: a single number fills a fixed-size list.
            None if size.is_some() && matches!(ty.base, BaseType::Int | BaseType::SymInt) => {
                if python_binding && !is_int_or_symint(v) {
                    return Err(fail());
                }
                let i = int_of(v).ok_or_else(fail)?;
                return Ok(Value::Ints(vec![i; size.unwrap_or(1)]));
            }
            None if size.is_some() && ty.base == BaseType::Float => {
                let f = float_of(v).ok_or_else(fail)?;
                return Ok(Value::Floats(vec![f; size.unwrap_or(1)]));
            }
            None => {
                // torch.Size and other tuple subclasses are tuples; anything else iterable of
                // tensors (a generator) is accepted for Tensor[] as upstream does.
                if ty.base == BaseType::Tensor && v.cast::<TensorBase>().is_err() {
                    v.try_iter()
                        .map_err(|_| fail())?
                        .collect::<PyResult<Vec<_>>>()
                        .map_err(|_| fail())?
                } else {
                    return Err(fail());
                }
            }
        };
        return match ty.base {
            BaseType::Int | BaseType::SymInt
                if python_binding && items.first().is_some_and(|x| !is_int_or_symint(x)) =>
            {
                Err(fail())
            }
            BaseType::Int | BaseType::SymInt => items
                .iter()
                .map(int_of)
                .collect::<Option<Vec<_>>>()
                .map(Value::Ints)
                .ok_or_else(fail),
            BaseType::Float => items
                .iter()
                .map(float_of)
                .collect::<Option<Vec<_>>>()
                .map(Value::Floats)
                .ok_or_else(fail),
            BaseType::Bool => items
                .iter()
                .map(|x| x.extract::<bool>().ok())
                .collect::<Option<Vec<_>>>()
                .map(Value::Bools)
                .ok_or_else(fail),
            BaseType::Tensor if ty.elem_optional => items
                .iter()
                .map(|x| {
                    if x.is_none() {
                        Some(None)
                    } else {
                        x.cast::<TensorBase>()
                            .ok()
                            .map(|t| Some(t.clone().unbind()))
                    }
                })
                .collect::<Option<Vec<_>>>()
                .map(Value::OptTensors)
                .ok_or_else(fail),
            BaseType::Tensor => items
                .iter()
                .map(|x| x.cast::<TensorBase>().ok().map(|t| t.clone().unbind()))
                .collect::<Option<Vec<_>>>()
                .map(Value::Tensors)
                .ok_or_else(fail),
            // `Scalar[]`: kept as the Python list (numbers only), for the kernel or the
            // decomposition to read.
            BaseType::Scalar if items.iter().all(|x| scalar_of(x).is_some()) => {
                Ok(Value::Object(v.clone().unbind()))
            }
            BaseType::Scalar => Err(fail()),
            _ => Ok(Value::Object(v.clone().unbind())),
        };
    }
    match ty.base {
        BaseType::Tensor => v
            .cast::<TensorBase>()
            .map(|t| Value::Tensor(t.clone().unbind()))
            .map_err(|_| fail()),
        BaseType::Scalar => scalar_of(v).map(Value::Scalar).ok_or_else(fail),
        BaseType::Int if python_binding && !is_int64(v) => Err(fail()),
        BaseType::SymInt if python_binding && !is_int_or_symint(v) => Err(fail()),
        BaseType::Int | BaseType::SymInt | BaseType::DeviceIndex => {
            if v.is_instance_of::<PyBool>() && ty.base != BaseType::Int {
                return Err(fail());
            }
            int_of(v).map(Value::Int).ok_or_else(fail)
        }
        BaseType::Float => float_of(v).map(Value::Float).ok_or_else(fail),
        BaseType::Bool => {
            if v.is_instance_of::<PyBool>() {
                Ok(Value::Bool(v.extract::<bool>().map_err(|_| fail())?))
            } else if let Some(Scalar::Bool(b)) = scalar_of(v) {
                Ok(Value::Bool(b))
            } else {
                Err(fail())
            }
        }
        BaseType::Str => v.extract::<String>().map(Value::Str).map_err(|_| fail()),
        BaseType::ScalarType => {
            if v.cast::<PyDType>().is_ok() {
                // A dtype the core does not store binds; the kernel refuses it by name.
                Ok(dtype_from_py(v)
                    .map_or_else(|_| Value::Object(v.clone().unbind()), Value::DType))
            } else if let Some(d) = python_type_dtype(v) {
                // Upstream's parser takes Python's number types as dtypes.
                Ok(Value::DType(d))
            } else {
                Err(fail())
            }
        }
        _ => Ok(Value::Object(v.clone().unbind())),
    }
}

/// Converts a schema default (`1`, `None`, `False`, `[0,1]`, `-1`, `"mean"`, `long`) to a value.
pub fn default_value(arg: &Argument, text: &str) -> Result<Value, Mismatch> {
    let bad = || Mismatch(format!("unsupported default '{text}' for '{}'", arg.name));
    if text == "None" {
        return Ok(Value::None);
    }
    let ty = &arg.ty;
    let int_list = |t: &str| -> Option<Vec<i64>> {
        let inner = t.strip_prefix('[')?.strip_suffix(']')?;
        inner
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| s.parse().ok())
            .collect()
    };
    if ty.list.is_some() {
        return match ty.base {
            BaseType::Int | BaseType::SymInt => {
                if let Some(v) = int_list(text) {
                    Ok(Value::Ints(v))
                } else {
                    let n: i64 = text.parse().map_err(|_| bad())?;
                    Ok(Value::Ints(vec![n; ty.list.flatten().unwrap_or(1)]))
                }
            }
            BaseType::Bool => {
                let inner = text.trim_start_matches('[').trim_end_matches(']');
                Ok(Value::Bools(
                    inner
                        .split(',')
                        .map(|s| s.trim() == "True")
                        .collect::<Vec<_>>(),
                ))
            }
            BaseType::Float => Ok(Value::Floats(
                int_list(text)
                    .map(|v| v.into_iter().map(|x| x as f64).collect())
                    .unwrap_or_default(),
            )),
            _ if text == "[]" => Ok(Value::Tensors(Vec::new())),
            _ => Err(bad()),
        };
    }
    match ty.base {
        BaseType::Bool => match text {
            "True" => Ok(Value::Bool(true)),
            "False" => Ok(Value::Bool(false)),
            _ => Err(bad()),
        },
        BaseType::Int | BaseType::SymInt | BaseType::DeviceIndex => {
            text.parse().map(Value::Int).map_err(|_| bad())
        }
        BaseType::Float => text.parse().map(Value::Float).map_err(|_| bad()),
        BaseType::Scalar => {
            if let Ok(i) = text.parse::<i64>() {
                Ok(Value::Scalar(Scalar::Int(i)))
            } else {
                text.parse::<f64>()
                    .map(|f| Value::Scalar(Scalar::Float(f)))
                    .map_err(|_| bad())
            }
        }
        BaseType::Str => Ok(Value::Str(
            text.trim_matches(|c| c == '"' || c == '\'').to_string(),
        )),
        BaseType::ScalarType => match text {
            "long" => Ok(Value::DType(DType::I64)),
            "float" => Ok(Value::DType(DType::F32)),
            "double" => Ok(Value::DType(DType::F64)),
            "int" => Ok(Value::DType(DType::I32)),
            _ => Err(bad()),
        },
        // contiguous_format, strided, ... : kernels read them by name when they need them.
        _ => Ok(Value::Str(text.to_string())),
    }
}

/// Is this the one-positional int-list signature that also takes `f(2, 3)` varargs?
fn varargs_int_list(schema: &FunctionSchema, skip_self: bool) -> bool {
    let mut positional = schema.positional().skip(usize::from(skip_self));
    match (positional.next(), positional.next()) {
        (Some(a), None) => {
            a.ty.list.is_some() && matches!(a.ty.base, BaseType::Int | BaseType::SymInt)
        }
        _ => false,
    }
}

/// The NumPy spellings upstream's argument parser also accepts (`axis=` for `dim`, ...).
fn numpy_alias(param: &str, key: &str) -> bool {
    matches!(
        (param, key),
        ("dim", "axis")
            | ("keepdim", "keepdims")
            | ("self" | "input", "x" | "a" | "x1")
            | ("other", "x2")
    )
}

/// Ops whose Tensor arguments also take Python numbers (upstream's
/// `should_allow_numbers_as_tensors`).
const NUMBERS_AS_TENSORS: &[&str] = &[
    "add",
    "add_",
    "div",
    "div_",
    "divide",
    "divide_",
    "mul",
    "mul_",
    "multiply",
    "multiply_",
    "sub",
    "sub_",
    "subtract",
    "subtract_",
    "true_divide",
    "true_divide_",
    "to",
    "_to_copy",
    "copy_",
    "floor_divide",
    "floor_divide_",
    "_conj",
];

/// Factory functions whose yaml entry says `category_override: factory` although they take a
/// Tensor (`linspace.Tensor_Tensor`, ...).
const FACTORY_OVERRIDE: &[&str] = &[
    "linspace",
    "logspace",
    "empty_quantized",
    "_empty_per_channel_affine_quantized",
];

/// Does the Python binding of `schema` take the TensorOptions keywords, `requires_grad`
/// included? torchgen gives them to factory functions (a Tensor result and no Tensor input),
/// to `new_*` and `*_like` functions and to those its yaml marks `factory`.
pub fn takes_tensor_options(schema: &FunctionSchema) -> bool {
    let name = schema.base_name();
    let tensor_result = schema.returns.iter().any(|r| r.ty.is_tensor_like());
    let tensor_input = schema
        .arguments
        .iter()
        .any(|a| !a.is_out && a.ty.is_tensor_like());
    (tensor_result && !tensor_input)
        || FACTORY_OVERRIDE.contains(&name)
        || name.starts_with("new_")
        || name.ends_with("_like")
}

/// A call bound to one overload: the schema's arguments, and what the Python binding adds.
pub struct Binding {
    pub values: Vec<Value>,
    /// `requires_grad=True` given to a factory function's Python binding: the result is
    /// marked after the kernel ran.
    pub requires_grad: bool,
    /// TensorOptions keywords given with `out=` to a factory function's binding (the out=
    /// overload has none): (name, value), checked against the out tensor before the kernel
    /// runs.
    pub out_options: Vec<(String, Py<PyAny>)>,
}

/// Binds a call to `schema`. `self_obj` is the receiver of a method call; `python_binding` is
/// true for `torch.*`/`Tensor.*` (upstream's generated bindings, with their extra keywords),
/// false for `torch.ops` (the schema alone).
pub fn bind(
    py: Python<'_>,
    schema: &FunctionSchema,
    self_obj: Option<&Bound<'_, PyAny>>,
    args: &Bound<'_, PyTuple>,
    kwargs: Option<&Bound<'_, PyDict>>,
    python_binding: bool,
) -> Result<Binding, Mismatch> {
    let mut requires_grad = false;
    let mut out_options = Vec::new();
    let allow_numbers = NUMBERS_AS_TENSORS.contains(&schema.base_name());
    let mut slots: Vec<Option<Bound<'_, PyAny>>> = vec![None; schema.arguments.len()];
    let mut next = 0usize;
    if let Some(s) = self_obj {
        let i = schema
            .arguments
            .iter()
            .position(|a| a.name == "self")
            .ok_or_else(|| Mismatch("the schema has no 'self'".into()))?;
        slots[i] = Some(s.clone());
        if i == 0 {
            next = 1;
        }
    }
    let positional: Vec<usize> = (next..schema.arguments.len())
        .filter(|&i| !schema.arguments[i].kwarg_only && slots[i].is_none())
        .collect();
    let given = args.len();
    if varargs_int_list(schema, self_obj.is_some())
        && given >= 1
        && args.get_item(0).is_ok_and(|first| {
            if python_binding {
                is_int_or_symint(&first)
            } else {
                given > 1 || int_of(&first).is_some()
            }
        })
    {
        slots[positional[0]] = Some(args.clone().into_any());
    } else {
        if given > positional.len() {
            return Err(Mismatch(format!(
                "takes {} positional arguments but {given} were given",
                positional.len()
            )));
        }
        for (k, &i) in positional.iter().enumerate().take(given) {
            slots[i] = Some(args.get_item(k).map_err(|e| Mismatch(e.to_string()))?);
        }
    }
    if let Some(kw) = kwargs {
        let outs: Vec<usize> = (0..schema.arguments.len())
            .filter(|&i| schema.arguments[i].is_out)
            .collect();
        for (k, v) in kw.iter() {
            let key: String = k
                .extract()
                .map_err(|_| Mismatch("non-string keyword".into()))?;
            if key == "requires_grad"
                && python_binding
                && !schema.arguments.iter().any(|a| a.name == key)
                && takes_tensor_options(schema)
            {
                requires_grad = if v.is_none() {
                    false
                } else if v.is_instance_of::<PyBool>() {
                    v.extract::<bool>().map_err(|e| Mismatch(e.to_string()))?
                } else {
                    return Err(Mismatch(format!(
                        "argument 'requires_grad' must be bool, not {}",
                        python_type_name(&v)
                    )));
                };
                continue;
            }
            if matches!(key.as_str(), "dtype" | "layout" | "device" | "pin_memory")
                && python_binding
                && !schema.arguments.iter().any(|a| a.name == key)
                && schema.arguments.iter().any(|a| a.is_out)
                && takes_tensor_options(schema)
            {
                if !v.is_none() {
                    out_options.push((key, v.unbind()));
                }
                continue;
            }
            if key == "out" && outs.len() > 1 {
                let items = sequence_items(&v)
                    .filter(|items| items.len() == outs.len())
                    .ok_or_else(|| {
                        Mismatch(format!("out= must be a tuple of {} tensors", outs.len()))
                    })?;
                for (&i, item) in outs.iter().zip(items) {
                    slots[i] = Some(item);
                }
                continue;
            }
            let i = schema
                .arguments
                .iter()
                .position(|a| {
                    a.name == key
                        || (a.name == "self" && key == "input" && self_obj.is_none())
                        || (a.is_out && outs.len() == 1 && key == "out")
                        || numpy_alias(&a.name, &key)
                })
                .ok_or_else(|| Mismatch(format!("got an unexpected keyword argument '{key}'")))?;
            if slots[i].is_some() {
                return Err(Mismatch(format!(
                    "got multiple values for argument '{key}'"
                )));
            }
            slots[i] = Some(v);
        }
    }
    let values = schema
        .arguments
        .iter()
        .zip(slots)
        .map(|(arg, slot)| match slot {
            Some(v)
                if allow_numbers && arg.ty.base == BaseType::Tensor && arg.ty.list.is_none() =>
            {
                match (v.cast::<TensorBase>().is_err(), scalar_of(&v)) {
                    // A Python number where the op takes a Tensor: a wrapped number, as
                    // upstream's parser allows for these ops (`2 // t` reaches floor_divide so).
                    (true, Some(s)) => Py::new(py, TensorBase::new(Tensor::wrap_scalar(s)))
                        .map(Value::Tensor)
                        .map_err(|e| Mismatch(e.to_string())),
                    _ => convert(arg, &v, python_binding),
                }
            }
            Some(v) => convert(arg, &v, python_binding),
            None => match &arg.default {
                Some(d) => default_value(arg, d),
                None if arg.is_out => Err(Mismatch("out= not given".into())),
                None => Err(Mismatch(format!(
                    "missing required argument '{}'",
                    arg.name
                ))),
            },
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Binding {
        values,
        requires_grad,
        out_options,
    })
}

/// What a kernel hands back.
pub enum Out {
    Tensor(Tensor),
    Tensors(Vec<Tensor>),
    Scalar(Scalar),
    Int(i64),
    /// Return the Python object bound to argument `i` (in-place and out= ops return their
    /// destination itself, so `x.add_(1) is x`).
    Arg(usize),
    /// A `ScalarType` result (`torch.promote_types`).
    DType(DType),
    /// The Python objects bound to several arguments (multi-output out= forms return their
    /// out tensors themselves: `torch.max(x, 0, out=(v, i))[0] is v`).
    Args(Vec<usize>),
    /// A Python object made by the kernel itself.
    Object(Py<PyAny>),
}

/// Converts a kernel result to Python.
pub fn to_python(py: Python<'_>, out: Out, values: &[Value]) -> PyResult<Py<PyAny>> {
    Ok(match out {
        Out::Tensor(t) => wrap(py, t)?,
        Out::Tensors(ts) => {
            let items = ts
                .into_iter()
                .map(|t| wrap(py, t))
                .collect::<PyResult<Vec<_>>>()?;
            PyTuple::new(py, items)?.into_any().unbind()
        }
        Out::Scalar(Scalar::Bool(b)) => PyBool::new(py, b).to_owned().into_any().unbind(),
        Out::Scalar(Scalar::Int(i)) | Out::Int(i) => i.into_pyobject(py)?.into_any().unbind(),
        Out::Scalar(Scalar::Float(f)) => f.into_pyobject(py)?.into_any().unbind(),
        Out::Scalar(Scalar::Complex(re, im)) => pyo3::types::PyComplex::from_doubles(py, re, im)
            .into_any()
            .unbind(),
        Out::Arg(i) => arg_object(py, &values[i])?,
        Out::Object(o) => o,
        Out::DType(d) => crate::dtype::to_py(py, d)?.into_any(),
        Out::Args(is) => {
            let items = is
                .into_iter()
                .map(|i| arg_object(py, &values[i]))
                .collect::<PyResult<Vec<_>>>()?;
            PyTuple::new(py, items)?.into_any().unbind()
        }
    })
}

fn arg_object(py: Python<'_>, v: &Value) -> PyResult<Py<PyAny>> {
    match v {
        Value::Tensor(t) => Ok(t.clone_ref(py).into_any()),
        _ => Err(PyTypeError::new_err(
            "internal: an in-place result refers to a non-tensor argument",
        )),
    }
}
