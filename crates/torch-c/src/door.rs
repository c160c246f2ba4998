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

    // `out=None` is no out= argument (upstream's parser binds the functional form).
    let stripped;
    let kwargs = match kwargs {
        Some(k)
            if !matches!(target, Target::Overload(_))
                && k.get_item("out")?.is_some_and(|v| v.is_none()) =>
        {
            stripped = k.copy()?;
            stripped.del_item("out")?;
            Some(&stripped)
        }
        _ => kwargs,
    };
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
            let mut c: Vec<&FunctionSchema> = python_overloads(name, self_obj.is_some())
                .into_iter()
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
    let python_binding = matches!(target, Target::Name(_));
    for schema in &candidates {
        match bind(py, schema, self_obj, args, kwargs, python_binding) {
            Ok(bound) => {
                check_out_options(py, schema, &bound)?;
                let recording = if crate::autograd::wanted(py, &bound.values) {
                    crate::autograd::pre(py, schema, &bound.values)?
                } else {
                    crate::autograd::Pre::Nothing
                };
                let result = match recording {
                    crate::autograd::Pre::Nothing => run(py, schema, bound.values)?,
                    crate::autograd::Pre::Done(result) => result,
                    crate::autograd::Pre::Record(token) => {
                        let result = {
                            let _below = crate::autograd::Below::enter();
                            run(py, schema, bound.values)?
                        };
                        crate::autograd::post(py, token, &result)?;
                        result
                    }
                };
                if bound.requires_grad {
                    let r = result.bind(py);
                    let dtype = r.getattr("dtype")?;
                    if !dtype.getattr("is_floating_point")?.extract::<bool>()?
                        && !dtype.getattr("is_complex")?.extract::<bool>()?
                    {
                        return Err(pyo3::exceptions::PyRuntimeError::new_err(
                            "Only Tensors of floating point and complex dtype can require gradients",
                        ));
                    }
                    r.setattr("requires_grad", true)?;
                }
                return tensor_list_container(py, schema, result, python_binding);
            }
            // Formatted only when every overload fails: printing a schema costs more than
            // binding it, and a later overload usually takes the call.
            Err(m) => reasons.push((*schema, m.0)),
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
        reasons
            .iter()
            .map(|(schema, why)| format!("  ({schema})\n      {why}"))
            .collect::<Vec<_>>()
            .join("\n")
    )))
}

/// The overloads a Python binding (`torch.max`, `Tensor.max`) tries, in upstream's order
/// (computed once per name).
fn python_overloads(name: &str, method: bool) -> Vec<&'static FunctionSchema> {
    // name -> [function order, method order]: indices into the filtered overloads.
    type Orders = HashMap<String, [Option<Vec<usize>>; 2]>;
    static ORDERS: RwLock<Option<Orders>> = RwLock::new(None);
    let all: Vec<&'static FunctionSchema> = registry()
        .overloads(name)
        .filter(|f| {
            if method {
                f.method
            } else {
                f.function || f.python_module.is_some()
            }
        })
        .map(|f| &f.schema)
        .collect();
    let slot = usize::from(method);
    let pick = |order: &[usize]| order.iter().filter_map(|&i| all.get(i).copied()).collect();
    if let Some(order) = ORDERS
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .and_then(|m| m.get(name))
        .and_then(|o| o[slot].as_ref())
    {
        return pick(order);
    }
    let order = sort_overloads(&all, method);
    let result = pick(&order);
    ORDERS
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .get_or_insert_with(HashMap::new)
        .entry(name.to_string())
        .or_default()[slot] = Some(order);
    result
}

/// upstream's Python signature of one overload, as torchgen's `signature_str` spells it: its
/// sort key, and the argument types (outputs left out) its partial order compares.
struct PySignature {
    /// Without the out= argument (what groups a functional overload with its out= form).
    inputs: String,
    out: Option<String>,
    /// Where the keyword-only formals start.
    positional: usize,
    formals: Vec<String>,
    types: Vec<String>,
}

/// torchgen's `argument_type_str`: the C++-flavoured spelling of a schema type.
fn py_type_str(ty: &torchnative_aten::Type) -> String {
    use torchnative_aten::BaseType as B;
    let base = match ty.base {
        B::Int => "int64_t".to_string(),
        B::Float => "double".to_string(),
        B::Str => "c10::string_view".to_string(),
        _ => ty.base_name.clone(),
    };
    let mut s = match ty.list {
        None => {
            if ty.elem_optional {
                format!("{base}?")
            } else {
                base
            }
        }
        Some(size) => {
            let sized = |n: &str| match size {
                Some(k) => format!("{n}[{k}]"),
                None => n.to_string(),
            };
            match (ty.base, ty.elem_optional) {
                (B::Bool, false) => format!("::std::array<bool,{}>", size.unwrap_or(0)),
                (B::Int, false) => sized("IntArrayRef"),
                (B::SymInt, false) => sized("SymIntArrayRef"),
                (B::Tensor, false) => sized("TensorList"),
                (B::Scalar, false) => sized("ScalarList"),
                (B::Tensor, true) => "c10::List<::std::optional<Tensor>>".to_string(),
                (_, true) => format!("ArrayRef<{base}?>"),
                _ => format!("ArrayRef<{base}>"),
            }
        }
    };
    if ty.optional {
        s.push('?');
    }
    s
}

/// A schema default as torchgen prints it in a Python signature (C++ spelling, then
/// `pythonify_default`).
fn py_default(text: &str) -> String {
    match text {
        "None" | "[]" => "None".to_string(),
        "contiguous_format" => "c10::MemoryFormat::Contiguous".to_string(),
        "preserve_format" => "c10::MemoryFormat::Preserve".to_string(),
        "Mean" | "Sum" | "None_" => format!("at::Reduction::{text}"),
        "long" => "at::kLong".to_string(),
        _ => {
            if let Some(inner) = text.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
                return format!("{{{inner}}}");
            }
            if text.parse::<i64>().is_err() {
                if let Ok(f) = text.parse::<f64>() {
                    if f.is_finite() && f.fract() == 0.0 && f.abs() < 1e16 {
                        return format!("{f:.1}");
                    }
                }
            }
            text.to_string()
        }
    }
}

fn py_signature(schema: &FunctionSchema, method: bool) -> PySignature {
    let args = &schema.arguments;
    // TensorOptions: dtype, layout, device, pin_memory in a row among the keyword-only ones.
    let topt_start = args.windows(4).position(|w| {
        w.iter()
            .map(|a| a.name.as_str())
            .eq(["dtype", "layout", "device", "pin_memory"])
            && w.iter().all(|a| a.kwarg_only)
    });
    let in_topts = |i: usize| topt_start.is_some_and(|k| (k..k + 4).contains(&i));
    let mut formals = Vec::new();
    let mut types = Vec::new();
    let mut positional = 0;
    for (i, a) in args.iter().enumerate() {
        if a.is_out || in_topts(i) || (method && a.name == "self" && !a.kwarg_only) {
            continue;
        }
        let ty = py_type_str(&a.ty);
        let name = if a.name == "self" && !method && (ty == "Tensor" || ty == "Number") {
            "input"
        } else {
            a.name.as_str()
        };
        let mut f = format!("{ty} {name}");
        if let Some(d) = &a.default {
            f.push('=');
            f.push_str(&py_default(d));
        }
        formals.push(f);
        types.push(a.ty.to_string());
        if !a.kwarg_only {
            positional += 1;
        }
    }
    if crate::value::takes_tensor_options(schema) {
        for (ty, name, default) in [
            ("ScalarType?", "dtype", "None"),
            ("Layout?", "layout", "None"),
            ("Device?", "device", "None"),
            ("bool?", "pin_memory", "False"),
            ("bool?", "requires_grad", "False"),
        ] {
            formals.push(format!("{ty} {name}={default}"));
            types.push(ty.to_string());
        }
    }
    let outs: Vec<_> = args.iter().filter(|a| a.is_out).collect();
    let out = match outs.as_slice() {
        [] => None,
        [o] => Some(format!("{} out=None", py_type_str(&o.ty))),
        many => Some(format!("TensorList[{}] out=None", many.len())),
    };
    let join = |formals: &[String]| {
        let mut parts: Vec<&str> = formals.iter().map(String::as_str).collect();
        if parts.len() > positional {
            parts.insert(positional, "*");
        }
        parts.join(", ")
    };
    PySignature {
        inputs: join(&formals),
        out,
        positional,
        formals,
        types,
    }
}

/// torchgen's `sort_overloads`: the order in which upstream's generated binding tries a name's
/// Python signatures. Signatures sort by their text, then a partial order moves an overload
/// behind those that take the same arguments with a preferred type in some place (`Tensor`
/// before `Scalar`, `int` before `int[]`, ...). Returns indices into `schemas`.
fn sort_overloads(schemas: &[&FunctionSchema], method: bool) -> Vec<usize> {
    let sigs: Vec<PySignature> = schemas.iter().map(|s| py_signature(s, method)).collect();
    // A functional overload and its out= form share one Python signature, spelled with the
    // out= argument (upstream groups them before sorting).
    let keys: Vec<String> = sigs
        .iter()
        .map(|s| {
            let out = s.out.clone().or_else(|| {
                sigs.iter()
                    .find(|o| o.inputs == s.inputs && o.out.is_some())
                    .and_then(|o| o.out.clone())
            });
            let mut formals = s.formals.clone();
            if let Some(out) = out {
                let topts = if s.types.len() >= 5
                    && s.formals
                        .last()
                        .is_some_and(|f| f.ends_with("requires_grad=False"))
                {
                    5
                } else {
                    0
                };
                formals.insert(formals.len() - topts, out);
            }
            let mut parts: Vec<&str> = formals.iter().map(String::as_str).collect();
            if parts.len() > s.positional {
                parts.insert(s.positional, "*");
            }
            parts.join(", ")
        })
        .collect();
    let mut ids: Vec<usize> = (0..schemas.len()).collect();
    ids.sort_by(|&a, &b| keys[a].cmp(&keys[b]));
    let is_arg_smaller = |t1: &str, t2: &str| {
        (t1 == "Scalar" && t2 == "Tensor")
            || (t1 == "Scalar?" && t2 == "Tensor?")
            || (t1 == "int[]" && (t2 == "int" || t2 == "int?"))
            || (t1 == "Tensor[]" && t2.contains("[]"))
            || (t1 == "SymInt[]" && t2 == "int[]")
            || ((t1 == "SymInt" || t1 == "int") && t2 == "Tensor")
    };
    let is_smaller = |a: &PySignature, b: &PySignature| {
        a.types.len() == b.types.len()
            && a.types != b.types
            && a.types
                .iter()
                .zip(&b.types)
                .all(|(x, y)| x == y || is_arg_smaller(x, y))
    };
    // larger_than[i]: the positions (in sorted order) of the overloads that beat overload i.
    let n = ids.len();
    let mut larger_than: std::collections::BTreeMap<usize, Vec<usize>> = Default::default();
    for i in 0..n {
        for j in 0..n {
            if is_smaller(&sigs[ids[i]], &sigs[ids[j]]) {
                larger_than.entry(i).or_default().push(j);
            }
        }
    }
    if larger_than.is_empty() {
        return ids;
    }
    let mut order: Vec<usize> = (0..n).filter(|i| !larger_than.contains_key(i)).collect();
    let mut idx = 0;
    while idx < order.len() {
        let placed = order[idx];
        let keys: Vec<usize> = larger_than.keys().copied().collect();
        for j in keys {
            if let Some(larger) = larger_than.get_mut(&j) {
                larger.retain(|&x| x != placed);
                if larger.is_empty() {
                    larger_than.remove(&j);
                    order.push(j);
                }
            }
        }
        idx += 1;
    }
    // A cycle (none in upstream's yaml) keeps its members in text order at the end.
    order.extend(larger_than.into_keys());
    order.into_iter().map(|i| ids[i]).collect()
}

/// A factory function's `dtype=`/`device=` given with `out=` must match the out tensor
/// (upstream's `check_out_type_matches`).
fn check_out_options(
    py: Python<'_>,
    schema: &FunctionSchema,
    bound: &crate::value::Binding,
) -> PyResult<()> {
    if bound.out_options.is_empty() {
        return Ok(());
    }
    let Some(Value::Tensor(out)) = schema
        .arguments
        .iter()
        .zip(&bound.values)
        .find(|(a, _)| a.is_out)
        .map(|(_, v)| v)
    else {
        return Ok(());
    };
    let out = out.bind(py);
    for (key, value) in &bound.out_options {
        let value = value.bind(py);
        match key.as_str() {
            "dtype" => {
                let want = crate::dtype::dtype_from_py(value)?;
                let have = out.borrow().inner.dtype();
                if want != have {
                    return Err(pyo3::exceptions::PyRuntimeError::new_err(format!(
                        "dtype {} does not match dtype of out parameter ({})",
                        kernels::scalar_type_name(want),
                        kernels::scalar_type_name(have)
                    )));
                }
            }
            "device" => {
                let torch = py.import("torch")?;
                let want = torch.getattr("device")?.call1((value,))?.getattr("type")?;
                let have = out.getattr("device")?.getattr("type")?;
                if !want.eq(&have)? {
                    return Err(pyo3::exceptions::PyRuntimeError::new_err(format!(
                        "device type {want} does not match device type of out parameter ({have})"
                    )));
                }
            }
            _ => {}
        }
    }
    Ok(())
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
pub fn run(py: Python<'_>, schema: &FunctionSchema, mut values: Vec<Value>) -> PyResult<Py<PyAny>> {
    let full = schema.full_name();
    crate::capture::record(&full);
    if let Some(answer) = crate::math_bits::special(py, &full, &values)? {
        return Ok(answer);
    }
    let written = written_tensors(py, schema, &values);
    let prepared = crate::math_bits::prepare(py, schema, &mut values)?;
    let result = run_resolved(py, schema, full, values);
    let result = crate::math_bits::finish(py, prepared, result)?;
    bump_versions(py, &written);
    Ok(result)
}

/// The tensors an operator writes (`Tensor(a!)` arguments, out= included).
fn written_tensors(
    py: Python<'_>,
    schema: &FunctionSchema,
    values: &[Value],
) -> Vec<Py<TensorBase>> {
    let mut out = Vec::new();
    for (a, v) in schema.arguments.iter().zip(values) {
        if !a.is_write() {
            continue;
        }
        match v {
            Value::Tensor(t) => out.push(t.clone_ref(py)),
            Value::Tensors(ts) => out.extend(ts.iter().map(|t| t.clone_ref(py))),
            _ => {}
        }
    }
    out
}

/// upstream's version counters: every operator that wrote a tensor bumps it once, and a view
/// shares its root base's counter (`TensorBase::_version` reads the base's), so a write through
/// a view bumps the base too.
fn bump_versions(py: Python<'_>, written: &[Py<TensorBase>]) {
    for t in written {
        let base = match t.bind(py).try_borrow_mut() {
            Ok(mut tb) => {
                tb.version += 1;
                tb.base_obj.as_ref().map(|b| b.clone_ref(py))
            }
            Err(_) => continue,
        };
        if let Some(base) = base {
            if let Ok(b) = base.bind(py).cast::<TensorBase>() {
                if let Ok(mut b) = b.try_borrow_mut() {
                    b.version += 1;
                }
            }
        }
    }
}

/// [`run`] once the inputs' math bits are resolved.
fn run_resolved(
    py: Python<'_>,
    schema: &FunctionSchema,
    full: String,
    values: Vec<Value>,
) -> PyResult<Py<PyAny>> {
    let complex = kernels::complex::restricted_input(py, &values);
    let kernel = match complex {
        None => kernels::get(&full),
        Some(dtype) => kernels::complex::kernel_for(schema, &full, dtype)?,
    };
    if let Some(kernel) = kernel {
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
        let mut out = match crate::placement::run_for_meta(py, schema, &values, kernel)? {
            Some(out) => out,
            None => kernel(&kernels::Ctx {
                py,
                values: &values,
            })?,
        };
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
        // Keyword-only parameters go by keyword, as the dispatcher's Python kernels get them.
        let mut positional = Vec::new();
        let kwargs = PyDict::new(py);
        for (arg, v) in schema.arguments.iter().zip(&values) {
            let obj = crate::value_to_py(py, v)?;
            if arg.kwarg_only {
                kwargs.set_item(&arg.name, obj)?;
            } else {
                positional.push(obj);
            }
        }
        return Ok(f
            .bind(py)
            .call(PyTuple::new(py, positional)?, Some(&kwargs))?
            .unbind());
    }
    // Upstream's Python decomposition (torch._decomp), when one is registered for this overload.
    if let Some(result) = run_python_decomposition(py, schema, &full, &values)? {
        // Decompositions wrapped by torch._prims_common's out_wrapper return their own
        // namedtuple types; the op returns a plain tuple (or its torch.return_types class).
        let bound = result.bind(py);
        let result = match bound.cast::<PyTuple>() {
            Ok(t) if schema.returns.len() >= 2 && !bound.is_exact_instance_of::<PyTuple>() => {
                PyTuple::new(py, t.iter())?.into_any().unbind()
            }
            _ => result,
        };
        return named_result(py, schema, result);
    }
    if let Some(dtype) = complex {
        return Err(kernels::complex::refusal(&full, dtype));
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
    if result.dim() < 2 {
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
    // Same-shape contiguous inputs give a row-major result whatever the op (the common case
    // of a model's elementwise ops): decided before the registry lookups below.
    if all_same_shape
        && result.is_contiguous()
        && inputs
            .iter()
            .all(|t| t.shape() == result.shape() && t.is_contiguous())
    {
        return Ok(None);
    }
    let pointwise = registry()
        .get(full)
        .is_some_and(|f| f.tags.iter().any(|t| t == "pointwise"))
        || ITER_LAYOUT_UNTAGGED.contains(&schema.base_name().trim_end_matches('_'));
    // Ops that take a memory_format choose their layout themselves (clone, to, ...).
    let chooses_layout = schema.arguments.iter().any(|a| a.name == "memory_format");
    if !pointwise || chooses_layout {
        return Ok(None);
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
