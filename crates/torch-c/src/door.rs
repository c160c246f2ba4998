//! The door: the one function every operator call passes through.
//!
//! `torch.add`, `Tensor.add`, `Tensor.__add__`, `torch.ops.aten.add.Tensor` and
//! `torch.nn.functional.*` all end in [`call`]: `__torch_function__` handling, overload
//! resolution against the schemas read from native_functions.yaml, argument binding, then the
//! kernel registered for the chosen overload (kernels.rs) or a Python kernel registered
//! through `torch.library`. An overload with neither raises `NotImplementedError` naming the
//! operator and the overload; nothing falls back silently.

use crate::kernels;
use crate::tensor::{TensorBase, TENSOR_CLASS};
use crate::value::{bind, to_python, Out, Value};
use pyo3::exceptions::{PyNotImplementedError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock, RwLock};
use torchnative_aten::{FunctionSchema, Registry};

/// upstream's registry, read once at import.
pub static REGISTRY: OnceLock<Registry> = OnceLock::new();

/// Schemas defined at run time (`torch.library.define`), by full name.
pub static USER_SCHEMAS: RwLock<Vec<FunctionSchema>> = RwLock::new(Vec::new());

/// Python kernels registered through `torch.library` (`impl`), by (full name, dispatch key).
/// (full overload name, dispatch key) -> Python function.
pub type PyKernels = HashMap<(String, String), Py<PyAny>>;

pub static PY_KERNELS: Mutex<Option<PyKernels>> = Mutex::new(None);

/// Depth of the `__torch_function__` mode stack, and the disable switches
/// (`DisableTorchFunction` = 2, `DisableTorchFunctionSubclass` = 1).
pub static TF_MODES: AtomicUsize = AtomicUsize::new(0);
pub static TF_DISABLED: AtomicUsize = AtomicUsize::new(0);

pub fn registry() -> &'static Registry {
    REGISTRY.get_or_init(Registry::default)
}

/// Where a call came from: which overloads it may take.
#[derive(Clone)]
pub enum Target {
    /// Every overload of a name (`torch.add`, `Tensor.add`).
    Name(String),
    /// Exactly one overload (`torch.ops.aten.add.Tensor`).
    Overload(FunctionSchema),
    /// Every overload of a qualified operator, whatever its Python bindings
    /// (`torch.ops.aten.add(...)`, an overload packet's call).
    Qualified(String),
}

/// A callable operator (`torch.add`, `torch._C._nn.linear`, an `OpOverload`'s function).
#[pyclass(module = "torch._C", name = "_TnOp", frozen, dict)]
pub struct OpFunction {
    pub target: Target,
    #[pyo3(get)]
    pub __name__: String,
    /// A Tensor method: called unbound (`Tensor.view(x, 2, 2)`, as `__torch_function__`
    /// overrides call it), the first argument is the receiver.
    pub is_method: bool,
}

#[pymethods]
impl OpFunction {
    #[pyo3(signature = (*args, **kwargs))]
    fn __call__(
        slf: &Bound<'_, Self>,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Py<PyAny>> {
        let op = slf.get();
        if op.is_method && !args.is_empty() {
            let receiver = args.get_item(0)?;
            let rest = args.get_slice(1, args.len());
            return call(slf.as_any(), &op.target, Some(&receiver), &rest, kwargs);
        }
        call(slf.as_any(), &op.target, None, args, kwargs)
    }
    fn __repr__(&self) -> String {
        format!("<built-in function {}>", self.__name__)
    }
    /// Methods become bound on attribute access from an instance (like a built-in method).
    fn __get__(
        slf: &Bound<'_, Self>,
        obj: Option<&Bound<'_, PyAny>>,
        _cls: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        match obj {
            Some(o) if !o.is_none() => Ok(Py::new(
                slf.py(),
                BoundOp {
                    op: slf.clone().unbind(),
                    receiver: o.clone().unbind(),
                },
            )?
            .into_any()),
            _ => Ok(slf.clone().into_any().unbind()),
        }
    }
}

/// `tensor.add` (an `OpFunction` bound to its receiver).
#[pyclass(module = "torch._C", name = "_TnBoundOp", frozen)]
pub struct BoundOp {
    op: Py<OpFunction>,
    receiver: Py<PyAny>,
}

#[pymethods]
impl BoundOp {
    #[pyo3(signature = (*args, **kwargs))]
    fn __call__(
        &self,
        py: Python<'_>,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Py<PyAny>> {
        let op = self.op.bind(py);
        call(
            op.as_any(),
            &op.get().target,
            Some(self.receiver.bind(py)),
            args,
            kwargs,
        )
    }
    #[getter]
    fn __self__(&self, py: Python<'_>) -> Py<PyAny> {
        self.receiver.clone_ref(py)
    }
    #[getter]
    fn __name__(&self, py: Python<'_>) -> String {
        self.op.bind(py).get().__name__.clone()
    }
}

/// Tensor arguments that ask for `__torch_function__`: instances of a subclass of
/// `torch.Tensor` whose `__torch_function__` is not `_disabled_torch_function_impl`.
fn overriding_args<'py>(
    py: Python<'py>,
    self_obj: Option<&Bound<'py, PyAny>>,
    args: &Bound<'py, PyTuple>,
    kwargs: Option<&Bound<'py, PyDict>>,
) -> PyResult<Vec<Bound<'py, PyAny>>> {
    let Some(tensor_cls) = TENSOR_CLASS.get(py) else {
        return Ok(Vec::new());
    };
    let tensor_cls = tensor_cls.bind(py);
    let disabled = crate::disabled_torch_function_impl(py)?;
    let mut found: Vec<Bound<'py, PyAny>> = Vec::new();
    let mut consider = |v: &Bound<'py, PyAny>| -> PyResult<()> {
        if v.cast::<TensorBase>().is_err() || v.get_type().is(tensor_cls) {
            return Ok(());
        }
        let tf = v.get_type().getattr("__torch_function__")?;
        let func = tf.getattr("__func__").unwrap_or(tf);
        if !func.is(&disabled) && !found.iter().any(|f| f.get_type().is(v.get_type())) {
            found.push(v.clone());
        }
        Ok(())
    };
    let mut visit = |v: &Bound<'py, PyAny>| -> PyResult<()> {
        if v.is_instance_of::<pyo3::types::PyList>() || v.is_instance_of::<PyTuple>() {
            for item in v.try_iter()? {
                consider(&item?)?;
            }
            Ok(())
        } else {
            consider(v)
        }
    };
    if let Some(s) = self_obj {
        visit(s)?;
    }
    for a in args.iter() {
        visit(&a)?;
    }
    if let Some(kw) = kwargs {
        for (_, v) in kw.iter() {
            visit(&v)?;
        }
    }
    Ok(found)
}

/// The door.
pub fn call(
    public_api: &Bound<'_, PyAny>,
    target: &Target,
    self_obj: Option<&Bound<'_, PyAny>>,
    args: &Bound<'_, PyTuple>,
    kwargs: Option<&Bound<'_, PyDict>>,
) -> PyResult<Py<PyAny>> {
    let py = public_api.py();
    // __torch_function__: modes first, then subclasses (upstream's order), unless disabled.
    let disabled = TF_DISABLED.load(Ordering::Relaxed);
    if disabled < 2 {
        let modes = TF_MODES.load(Ordering::Relaxed) > 0;
        let overriding = if disabled == 0 {
            overriding_args(py, self_obj, args, kwargs)?
        } else {
            Vec::new()
        };
        if modes || !overriding.is_empty() {
            let all_args = match self_obj {
                Some(s) => {
                    let mut v = vec![s.clone()];
                    v.extend(args.iter());
                    PyTuple::new(py, v)?
                }
                None => args.clone(),
            };
            let relevant = PyTuple::new(py, &overriding)?;
            let handle = py
                .import("torch.overrides")?
                .getattr("handle_torch_function")?;
            let mut call_args = vec![public_api.clone(), relevant.into_any()];
            call_args.extend(all_args.iter());
            return Ok(handle.call(PyTuple::new(py, call_args)?, kwargs)?.unbind());
        }
    }

    let wants_out = kwargs.is_some_and(|k| k.contains("out").unwrap_or(false));
    let user_schemas;
    let candidates: Vec<&FunctionSchema> = match target {
        Target::Overload(s) => vec![s],
        Target::Qualified(q) => {
            user_schemas = USER_SCHEMAS
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            registry()
                .overloads_of(q)
                .map(|f| &f.schema)
                .chain(user_schemas.iter().filter(|s| &s.name == q))
                .filter(|s| s.arguments.iter().any(|a| a.is_out) == wants_out)
                .collect()
        }
        Target::Name(name) => {
            let mut c: Vec<&FunctionSchema> = registry()
                .overloads(name)
                .filter(|f| {
                    if self_obj.is_some() {
                        f.method
                    } else {
                        f.function || f.python_module.is_some()
                    }
                })
                .map(|f| &f.schema)
                .filter(|s| s.arguments.iter().any(|a| a.is_out) == wants_out)
                .collect();
            if c.is_empty() {
                user_schemas = USER_SCHEMAS
                    .read()
                    .unwrap_or_else(|e| e.into_inner())
                    .clone();
                c = user_schemas
                    .iter()
                    .filter(|s| s.base_name() == name)
                    .collect();
            }
            c
        }
    };
    let mut reasons = Vec::new();
    for schema in &candidates {
        match bind(py, schema, self_obj, args, kwargs) {
            Ok(values) => {
                let result = run(py, schema, values)?;
                let python_binding = matches!(target, Target::Name(_));
                return tensor_list_container(py, schema, result, python_binding);
            }
            Err(m) => reasons.push(format!("  ({schema})\n      {}", m.0)),
        }
    }
    let name = match target {
        Target::Name(n) | Target::Qualified(n) => n.clone(),
        Target::Overload(s) => s.full_name(),
    };
    if candidates.is_empty() {
        return Err(PyNotImplementedError::new_err(format!(
            "{name}: no overload of this operator takes these arguments{} in torchnative",
            if wants_out { " with out=" } else { "" }
        )));
    }
    Err(PyTypeError::new_err(format!(
        "{name}() received an invalid combination of arguments; the overloads are:\n{}",
        reasons.join("\n")
    )))
}

/// A lone `Tensor[]` result comes back as upstream gives it: a tuple from the Python bindings
/// (`torch.meshgrid`, `Tensor.split`), a list from `torch.ops` (the JIT's calling convention),
/// whichever container the kernel or decomposition built.
fn tensor_list_container(
    py: Python<'_>,
    schema: &FunctionSchema,
    result: Py<PyAny>,
    python_binding: bool,
) -> PyResult<Py<PyAny>> {
    let lone_list = matches!(schema.returns.as_slice(), [r] if r.ty.base_name == "Tensor" && r.ty.list.is_some());
    if !lone_list {
        return Ok(result);
    }
    let bound = result.bind(py);
    if python_binding {
        if let Ok(list) = bound.cast::<PyList>() {
            return Ok(list.to_tuple().into_any().unbind());
        }
    } else if let Ok(tuple) = bound.cast::<PyTuple>() {
        return Ok(PyList::new(py, tuple.iter())?.into_any().unbind());
    }
    Ok(result)
}

/// The `torch.return_types` name of a schema's result, if its returns are all named
/// (several of them): the op's base name, `_out` appended for out= forms.
pub fn return_type_name(schema: &FunctionSchema) -> Option<String> {
    let named = schema.returns.len() >= 2 && schema.returns.iter().all(|r| !r.name.is_empty());
    if !named {
        return None;
    }
    let out = schema.arguments.iter().any(|a| a.is_out);
    Some(format!(
        "{}{}",
        schema.base_name(),
        if out { "_out" } else { "" }
    ))
}

/// Wraps a tuple result in its `torch.return_types` class (`torch.return_types.max(values=...,
/// indices=...)`), as upstream's bindings return it.
fn named_result(py: Python<'_>, schema: &FunctionSchema, result: Py<PyAny>) -> PyResult<Py<PyAny>> {
    let Some(name) = return_type_name(schema) else {
        return Ok(result);
    };
    let types = py.import("torch._C._return_types")?;
    match types.getattr(name.as_str()) {
        Ok(cls) => Ok(cls.call1((result,))?.unbind()),
        Err(_) => Ok(result),
    }
}

/// Runs the kernel of one bound overload.
pub fn run(py: Python<'_>, schema: &FunctionSchema, values: Vec<Value>) -> PyResult<Py<PyAny>> {
    let full = schema.full_name();
    if let Some(kernel) = kernels::get(&full) {
        // out= tensors the kernel will resize (empty ones) get the new output's layout too.
        let resized_outs: Vec<usize> = schema
            .arguments
            .iter()
            .zip(&values)
            .enumerate()
            .filter(|(_, (a, v))| {
                a.is_out && matches!(v, Value::Tensor(t) if t.bind(py).borrow().inner.numel() == 0)
            })
            .map(|(i, _)| i)
            .collect();
        let mut out = kernel(&kernels::Ctx {
            py,
            values: &values,
        })?;
        if let Out::Tensor(t) = &out {
            if let Some(laid_out) = pointwise_layout(py, schema, &full, t, &values)? {
                out = Out::Tensor(laid_out);
            }
        }
        for i in resized_outs {
            if let Value::Tensor(o) = &values[i] {
                let current = o.bind(py).borrow().inner.clone();
                if let Some(laid_out) = pointwise_layout(py, schema, &full, &current, &values)? {
                    o.bind(py).borrow_mut().inner = laid_out;
                }
            }
        }
        let result = to_python(py, out, &values)?;
        link_view_bases(py, schema, &values, result.bind(py))?;
        return named_result(py, schema, result);
    }
    // A Meta kernel computes shapes only: it may run for meta tensors, never for CPU ones
    // (upstream's torch._meta_registrations registers hundreds of them through torch.library).
    let on_meta = values.iter().any(|v| match v {
        Value::Tensor(t) => t.bind(py).borrow().inner.device() == torchnative_core::Device::Meta,
        _ => false,
    });
    let keys: &[&str] = if on_meta {
        &[
            "Meta",
            "CompositeExplicitAutograd",
            "CompositeImplicitAutograd",
        ]
    } else {
        &[
            "CPU",
            "CompositeExplicitAutograd",
            "CompositeImplicitAutograd",
        ]
    };
    let py_kernel = PY_KERNELS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .and_then(|m| {
            keys.iter().find_map(|k| {
                m.get(&(full.clone(), k.to_string()))
                    .map(|f| f.clone_ref(py))
            })
        });
    if let Some(f) = py_kernel {
        let args = values
            .iter()
            .map(|v| crate::value_to_py(py, v))
            .collect::<PyResult<Vec<_>>>()?;
        return Ok(f.bind(py).call1(PyTuple::new(py, args)?)?.unbind());
    }
    // Upstream's Python decomposition (torch._decomp), when one is registered for this overload.
    if let Some(result) = run_python_decomposition(py, schema, &full, &values)? {
        return named_result(py, schema, result);
    }
    Err(PyNotImplementedError::new_err(format!(
        "operator {full} has no kernel in torchnative (schema: {schema})"
    )))
}

/// Operators upstream computes through TensorIterator (directly, or as aliases of a pointwise
/// op) although native_functions.yaml does not tag them `pointwise`.
const ITER_LAYOUT_UNTAGGED: &[&str] = &[
    "absolute",
    "negative",
    "arcsin",
    "arccos",
    "arctan",
    "arcsinh",
    "arccosh",
    "arctanh",
    "fix",
    "true_divide",
    "floor_divide",
    "isreal",
];

/// Gives view results (returns annotated `Tensor(a)` aliasing an input) their base's Python
/// object, so `x.unsqueeze(0)._base is x` as upstream.
fn link_view_bases(
    py: Python<'_>,
    schema: &FunctionSchema,
    values: &[Value],
    result: &Bound<'_, PyAny>,
) -> PyResult<()> {
    let [ret] = schema.returns.as_slice() else {
        return Ok(());
    };
    let Some(alias) = ret.alias.as_ref().filter(|a| !a.is_write) else {
        return Ok(());
    };
    let source = schema
        .arguments
        .iter()
        .zip(values)
        .find_map(|(a, v)| match v {
            Value::Tensor(t) if a.alias.as_ref().is_some_and(|x| x.before == alias.before) => {
                Some(t.bind(py))
            }
            _ => None,
        });
    let Some(source) = source else {
        return Ok(());
    };
    if let Ok(items) = result.cast::<PyTuple>() {
        for item in items.iter() {
            crate::tensor::link_view_base(&item, source)?;
        }
        return Ok(());
    }
    crate::tensor::link_view_base(result, source)
}

/// A pointwise result re-laid out as upstream's TensorIterator lays out a new output
/// (iter_layout.rs); `None` when row-major is already right or the op is not pointwise.
fn pointwise_layout(
    py: Python<'_>,
    schema: &FunctionSchema,
    full: &str,
    result: &torchnative_core::Tensor,
    values: &[Value],
) -> PyResult<Option<torchnative_core::Tensor>> {
    let pointwise = registry()
        .get(full)
        .is_some_and(|f| f.tags.iter().any(|t| t == "pointwise"))
        || ITER_LAYOUT_UNTAGGED.contains(&schema.base_name().trim_end_matches('_'));
    // Ops that take a memory_format choose their layout themselves (clone, to, ...).
    let chooses_layout = schema.arguments.iter().any(|a| a.name == "memory_format");
    if !pointwise || chooses_layout || result.dim() < 2 {
        return Ok(None);
    }
    let mut inputs = Vec::new();
    let mut all_same_shape = true;
    for (arg, v) in schema.arguments.iter().zip(values) {
        match v {
            Value::Tensor(t) if !arg.is_out => inputs.push(t.bind(py).borrow().inner.clone()),
            Value::Scalar(_) => all_same_shape = false,
            _ => {}
        }
    }
    // Upstream's nan_to_num.out skips TensorIterator for integral inputs (a plain copy into a
    // row-major result).
    if full == "aten::nan_to_num.out" && inputs.first().is_some_and(|t| !t.dtype().is_float()) {
        return Ok(None);
    }
    let refs: Vec<&torchnative_core::Tensor> = inputs.iter().collect();
    match crate::iter_layout::output_strides(result.shape(), &refs, all_same_shape) {
        Some(strides) => crate::iter_layout::apply(result, &strides)
            .map(Some)
            .map_err(crate::error::core_err),
        None => Ok(None),
    }
}

/// Calls the surface's `_tn_run_decomp` (None when upstream registers no decomposition).
fn run_python_decomposition(
    py: Python<'_>,
    schema: &FunctionSchema,
    full: &str,
    values: &[Value],
) -> PyResult<Option<Py<PyAny>>> {
    let module = py.import("torch._C")?;
    let has: bool = module
        .getattr("_tn_has_decomp")?
        .call1((full,))?
        .extract()?;
    if !has {
        return Ok(None);
    }
    let mut positional = Vec::new();
    let kwargs = PyDict::new(py);
    for (arg, v) in schema.arguments.iter().zip(values) {
        let obj = crate::value_to_py(py, v)?;
        if arg.kwarg_only {
            kwargs.set_item(&arg.name, obj)?;
        } else {
            positional.push(obj);
        }
    }
    let run = module.getattr("_tn_run_decomp")?;
    Ok(Some(
        run.call((full, PyTuple::new(py, positional)?, kwargs), None)?
            .unbind(),
    ))
}
