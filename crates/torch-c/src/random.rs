//! `torch.Generator` and the random kernels, on `torchnative_core::torch_random`, which
//! reproduces upstream's CPU streams bit for bit (`torch.manual_seed(0); torch.randn(5)` gives
//! upstream's values).
//!
//! Kernels fill a fresh contiguous tensor in upstream's order; in-place forms on a
//! non-contiguous destination fill a contiguous temporary and copy it in (upstream iterates
//! non-contiguous tensors in memory order too, for these element-wise fills).

use crate::error::core_err;
use crate::kernels::{Ctx, Kernel};
use crate::tensor::TensorBase;
use crate::value::{Out, Value};
use pyo3::exceptions::{PyRuntimeError, PyTypeError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use std::collections::HashMap;
use std::sync::Mutex;
use torchnative_core::torch_random::{self as tr, CpuGenerator};
use torchnative_core::{with_dtype, DType, Device, Tensor};

/// The Rust side of `torch.Generator` (the class itself is a Python subclass, so that upstream
/// can swap its metaclass).
#[pyclass(module = "torch._C", name = "_GeneratorBase", subclass)]
pub struct Generator {
    pub inner: Mutex<CpuGenerator>,
}

#[pymethods]
impl Generator {
    #[new]
    #[pyo3(signature = (device=None))]
    fn py_new(device: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        if let Some(d) = device {
            crate::device_of(d)?;
        }
        Ok(Generator {
            inner: Mutex::new(CpuGenerator::default()),
        })
    }

    fn manual_seed<'py>(
        slf: Bound<'py, Self>,
        seed: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, Self>> {
        // Upstream takes any Python int and keeps its low 64 bits (negative seeds wrap).
        let seed: i128 = seed.extract()?;
        slf.borrow().lock().manual_seed(seed as u64);
        Ok(slf)
    }

    fn initial_seed(&self) -> u64 {
        self.lock().initial_seed()
    }

    fn seed(&self) -> u64 {
        self.lock().seed()
    }

    /// The 5,056-byte state tensor (uint8), in upstream's layout.
    fn get_state(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let bytes = self.lock().get_state();
        let n = bytes.len();
        crate::tensor::wrap(py, Tensor::from_vec(bytes, &[n]).map_err(core_err)?)
    }

    fn set_state<'py>(
        slf: Bound<'py, Self>,
        state: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, Self>> {
        let t = state
            .cast::<TensorBase>()
            .map_err(|_| PyTypeError::new_err("expected a torch.ByteTensor as the state"))?
            .borrow()
            .inner
            .clone();
        if t.dtype() != DType::U8 {
            return Err(PyTypeError::new_err(format!(
                "expected a torch.ByteTensor, but got {}",
                t.dtype().name()
            )));
        }
        let bytes: Vec<u8> = t.contiguous().and_then(|c| c.to_vec()).map_err(core_err)?;
        slf.borrow().lock().set_state(&bytes).map_err(core_err)?;
        Ok(slf)
    }

    #[getter]
    fn device(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        crate::tensor::device_object(py, Device::Cpu)
    }

    fn __reduce__(slf: &Bound<'_, Self>) -> PyResult<Py<PyAny>> {
        let py = slf.py();
        let cls = slf.get_type();
        let state = slf.borrow().get_state(py)?;
        Ok((cls, (), state).into_pyobject(py)?.into_any().unbind())
    }

    fn __setstate__(slf: Bound<'_, Self>, state: &Bound<'_, PyAny>) -> PyResult<()> {
        Generator::set_state(slf, state).map(|_| ())
    }
}

impl Generator {
    pub fn lock(&self) -> std::sync::MutexGuard<'_, CpuGenerator> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// `torch.default_generator` (made by the surface as an instance of `torch.Generator`).
pub static DEFAULT: PyOnceLock<Py<Generator>> = PyOnceLock::new();

pub fn default_generator(py: Python<'_>) -> PyResult<&Py<Generator>> {
    DEFAULT
        .get(py)
        .ok_or_else(|| PyRuntimeError::new_err("torch._C: the default generator is not set"))
}

#[pyfunction]
pub fn _tn_set_default_generator(py: Python<'_>, g: Py<Generator>) {
    let _ = DEFAULT.set(py, g);
}

/// The schema has no generator argument: the default generator draws.
const NO_GENERATOR: usize = usize::MAX;

/// Runs `f` with the generator argument `i` (absent or None: the default generator).
fn with_gen<R>(c: &Ctx<'_, '_>, i: usize, f: impl FnOnce(&mut CpuGenerator) -> R) -> PyResult<R> {
    let gen = match c.values.get(i).unwrap_or(&Value::None) {
        Value::None => default_generator(c.py)?.clone_ref(c.py),
        Value::Object(o) => o
            .bind(c.py)
            .cast::<Generator>()
            .map_err(|_| PyTypeError::new_err("expected a torch.Generator"))?
            .clone()
            .unbind(),
        v => {
            return Err(PyTypeError::new_err(format!(
                "expected a torch.Generator, got {v:?}"
            )))
        }
    };
    let g = gen.bind(c.py).borrow();
    let mut guard = g.lock();
    Ok(f(&mut guard))
}

/// A fresh contiguous tensor filled by `f`, called with the generator and the data slice.
macro_rules! fill_new {
    ($c:expr, $gen:expr, $shape:expr, $dtype:expr, |$g:ident, $data:ident| $body:expr) => {{
        let t = Tensor::empty_on($shape, $dtype, Device::Cpu).map_err(core_err)?;
        with_gen($c, $gen, |$g| {
            with_dtype!($dtype, T => t.with_data_mut::<T, _>(|$data: &mut [T]| $body))
        })?
        .map_err(core_err)?
        .map_err(core_err)?;
        t
    }};
}

/// Fills tensor argument 0 in place (through a contiguous temporary when needed).
macro_rules! fill_self {
    ($c:expr, $gen:expr, |$g:ident, $data:ident| $body:expr) => {{
        let dst = $c.tensor(0)?;
        let dtype = dst.dtype();
        let tmp = fill_new!($c, $gen, dst.shape(), dtype, |$g, $data| $body);
        dst.copy_(&tmp).map_err(core_err)?;
        Ok(Out::Arg(0))
    }};
}

fn shape_of(c: &Ctx<'_, '_>, i: usize) -> PyResult<Vec<usize>> {
    c.ints(i)?
        .iter()
        .map(|&d| {
            usize::try_from(d).map_err(|_| {
                PyRuntimeError::new_err(format!(
                    "Trying to create tensor with negative dimension {d}"
                ))
            })
        })
        .collect()
}

fn float_dtype(c: &Ctx<'_, '_>, i: usize) -> PyResult<DType> {
    Ok(c.opt_dtype(i)?.unwrap_or_else(crate::default_float))
}

fn check_cpu(c: &Ctx<'_, '_>, i: usize) -> PyResult<()> {
    if c.device(i)? == Device::Meta {
        return Err(PyRuntimeError::new_err(
            "random tensors on the meta device have no values; use device='cpu'",
        ));
    }
    Ok(())
}

pub fn register(t: &mut HashMap<&'static str, Kernel>) {
    // randn(SymInt[] size, *, ScalarType? dtype, Layout? layout, Device? device, bool? pin_memory)
    t.insert("aten::randn", |c| {
        check_cpu(c, 3)?;
        let shape = shape_of(c, 0)?;
        let dtype = float_dtype(c, 1)?;
        Ok(Out::Tensor(fill_new!(
            c,
            NO_GENERATOR,
            &shape,
            dtype,
            |g, d| tr::normal_(g, d, 0.0, 1.0)
        )))
    });
    // randn.generator(SymInt[] size, *, Generator? generator, ScalarType? dtype, ...)
    t.insert("aten::randn.generator", |c| {
        check_cpu(c, 4)?;
        let shape = shape_of(c, 0)?;
        let dtype = float_dtype(c, 2)?;
        Ok(Out::Tensor(fill_new!(c, 1, &shape, dtype, |g, d| {
            tr::normal_(g, d, 0.0, 1.0)
        })))
    });
    t.insert("aten::rand", |c| {
        check_cpu(c, 3)?;
        let shape = shape_of(c, 0)?;
        let dtype = float_dtype(c, 1)?;
        Ok(Out::Tensor(fill_new!(
            c,
            NO_GENERATOR,
            &shape,
            dtype,
            |g, d| tr::uniform_(g, d, 0.0, 1.0)
        )))
    });
    t.insert("aten::rand.generator", |c| {
        check_cpu(c, 4)?;
        let shape = shape_of(c, 0)?;
        let dtype = float_dtype(c, 2)?;
        Ok(Out::Tensor(fill_new!(c, 1, &shape, dtype, |g, d| {
            tr::uniform_(g, d, 0.0, 1.0)
        })))
    });
    // randint(SymInt high, SymInt[] size, *, ScalarType? dtype=long, ...)
    t.insert("aten::randint", |c| {
        check_cpu(c, 4)?;
        let (high, shape) = (c.int(0)?, shape_of(c, 1)?);
        let dtype = c.opt_dtype(2)?.unwrap_or(DType::I64);
        Ok(Out::Tensor(fill_new!(
            c,
            NO_GENERATOR,
            &shape,
            dtype,
            |g, d| tr::randint(g, d, 0, high)
        )))
    });
    t.insert("aten::randint.generator", |c| {
        check_cpu(c, 5)?;
        let (high, shape) = (c.int(0)?, shape_of(c, 1)?);
        let dtype = c.opt_dtype(3)?.unwrap_or(DType::I64);
        Ok(Out::Tensor(fill_new!(c, 2, &shape, dtype, |g, d| {
            tr::randint(g, d, 0, high)
        })))
    });
    t.insert("aten::randint.low", |c| {
        check_cpu(c, 5)?;
        let (low, high, shape) = (c.int(0)?, c.int(1)?, shape_of(c, 2)?);
        let dtype = c.opt_dtype(3)?.unwrap_or(DType::I64);
        Ok(Out::Tensor(fill_new!(
            c,
            NO_GENERATOR,
            &shape,
            dtype,
            |g, d| tr::randint(g, d, low, high)
        )))
    });
    t.insert("aten::randint.low_generator", |c| {
        check_cpu(c, 6)?;
        let (low, high, shape) = (c.int(0)?, c.int(1)?, shape_of(c, 2)?);
        let dtype = c.opt_dtype(4)?.unwrap_or(DType::I64);
        Ok(Out::Tensor(fill_new!(c, 3, &shape, dtype, |g, d| {
            tr::randint(g, d, low, high)
        })))
    });
    // randperm(SymInt n, *, ScalarType? dtype=long, ...)
    t.insert("aten::randperm", |c| {
        check_cpu(c, 3)?;
        let n = usize::try_from(c.int(0)?)
            .map_err(|_| PyRuntimeError::new_err("n must be non-negative"))?;
        let dtype = c.opt_dtype(1)?.unwrap_or(DType::I64);
        Ok(Out::Tensor(fill_new!(
            c,
            NO_GENERATOR,
            &[n],
            dtype,
            |g, d| tr::randperm(g, d)
        )))
    });
    t.insert("aten::randperm.generator", |c| {
        check_cpu(c, 4)?;
        let n = usize::try_from(c.int(0)?)
            .map_err(|_| PyRuntimeError::new_err("n must be non-negative"))?;
        let dtype = c.opt_dtype(2)?.unwrap_or(DType::I64);
        Ok(Out::Tensor(fill_new!(c, 1, &[n], dtype, |g, d| {
            tr::randperm(g, d)
        })))
    });
    // normal_(Tensor(a!) self, float mean=0, float std=1, *, Generator? generator=None)
    t.insert("aten::normal_", |c| {
        let (mean, std) = (c.float(1)?, c.float(2)?);
        fill_self!(c, 3, |g, d| tr::normal_(g, d, mean, std))
    });
    // uniform_(Tensor(a!) self, float from=0, float to=1, *, Generator? generator=None)
    t.insert("aten::uniform_", |c| {
        let (from, to) = (c.float(1)?, c.float(2)?);
        fill_self!(c, 3, |g, d| tr::uniform_(g, d, from, to))
    });
    t.insert("aten::exponential_", |c| {
        let lambd = c.float(1)?;
        fill_self!(c, 2, |g, d| tr::exponential_(g, d, lambd))
    });
    // random_.from(Tensor(a!) self, int from, int? to, *, Generator? generator=None)
    t.insert("aten::random_.from", |c| {
        let (from, to) = (c.int(1)?, c.opt_int(2)?);
        fill_self!(c, 3, |g, d| tr::random_from_to_(g, d, from, to))
    });
    t.insert("aten::random_.to", |c| {
        let to = c.int(1)?;
        fill_self!(c, 2, |g, d| tr::random_from_to_(g, d, 0, Some(to)))
    });
    t.insert("aten::random_", |c| {
        fill_self!(c, 1, |g, d| tr::random_(g, d))
    });
    // bernoulli_.float(Tensor(a!) self, float p=0.5, *, Generator? generator=None)
    t.insert("aten::bernoulli_.float", |c| {
        let p = c.float(1)?;
        fill_self!(c, 2, |g, d| tr::bernoulli_scalar_(g, d, p))
    });
    // bernoulli(Tensor self, *, Generator? generator=None): per-element probabilities.
    t.insert("aten::bernoulli", |c| {
        let probs = c.tensor(0)?.contiguous().map_err(core_err)?;
        let dtype = probs.dtype();
        let out = fill_new!(c, 1, probs.shape(), dtype, |g, d| {
            with_dtype!(dtype, P => probs
                .with_data::<P, _>(|p: &[P]| tr::bernoulli_tensor_(g, d, p))
                .and_then(|r| r))
        });
        Ok(Out::Tensor(out))
    });
    // bernoulli.p(Tensor self, float p, *, Generator? generator=None)
    t.insert("aten::bernoulli.p", |c| {
        let x = c.tensor(0)?;
        let p = c.float(1)?;
        Ok(Out::Tensor(fill_new!(
            c,
            2,
            x.shape(),
            x.dtype(),
            |g, d| tr::bernoulli_scalar_(g, d, p)
        )))
    });
    // multinomial(Tensor self, SymInt num_samples, bool replacement=False, *, Generator? generator=None)
    t.insert("aten::multinomial", |c| {
        let probs = c.tensor(0)?.contiguous().map_err(core_err)?;
        let n_sample = usize::try_from(c.int(1)?)
            .map_err(|_| PyRuntimeError::new_err("cannot sample n_sample <= 0 samples"))?;
        let replacement = c.bool(2)?;
        if probs.dim() == 0 || probs.dim() > 2 {
            return Err(PyRuntimeError::new_err("prob_dist must be 1 or 2 dim"));
        }
        let n_categories = *probs.shape().last().unwrap_or(&0);
        let rows = if probs.dim() == 2 { probs.shape()[0] } else { 1 };
        let dtype = probs.dtype();
        let samples = with_gen(c, 3, |g| {
            with_dtype!(dtype, P => probs
                .with_data::<P, _>(|p: &[P]| tr::multinomial(g, p, n_categories, n_sample, replacement))
                .and_then(|r| r))
        })?
        .map_err(core_err)?;
        let shape: Vec<usize> = if probs.dim() == 2 { vec![rows, n_sample] } else { vec![n_sample] };
        Ok(Out::Tensor(Tensor::from_vec(samples, &shape).map_err(core_err)?))
    });
}
