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
use pyo3::exceptions::{PyNotImplementedError, PyRuntimeError, PyTypeError};
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
/// A complex tensor is filled through its real view (real and imaginary parts drawn in
/// turn, as upstream's normal_ / uniform_ do); the distributions without a complex form are
/// refused for it by [`no_complex`] first.
macro_rules! fill_new {
    ($c:expr, $gen:expr, $shape:expr, $dtype:expr, |$g:ident, $data:ident| $body:expr) => {{
        let t = Tensor::empty_on($shape, $dtype, Device::Cpu).map_err(core_err)?;
        let target = if $dtype.is_complex() {
            t.view_as_real().map_err(core_err)?
        } else {
            t.clone()
        };
        with_gen($c, $gen, |$g| {
            with_dtype!(target.dtype(), T => target.with_data_mut::<T, _>(|$data: &mut [T]| $body))
        })?
        .map_err(core_err)?
        .map_err(core_err)?;
        t
    }};
}

/// Upstream's refusal of integer-valued distributions for complex dtypes.
fn no_complex(dtype: DType) -> PyResult<()> {
    if dtype.is_complex() {
        return Err(PyRuntimeError::new_err(
            "check_random_bounds handles only integral, floating-point and boolean types",
        ));
    }
    Ok(())
}

/// The standard deviation each part of a complex normal gets (the variance splits evenly
/// between the real and imaginary parts, as upstream's normal_ splits it).
fn part_std(dtype: DType, std: f64) -> f64 {
    if dtype.is_complex() {
        std / std::f64::consts::SQRT_2
    } else {
        std
    }
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
            |g, d| tr::normal_(g, d, 0.0, part_std(dtype, 1.0))
        )))
    });
    // randn.generator(SymInt[] size, *, Generator? generator, ScalarType? dtype, ...)
    t.insert("aten::randn.generator", |c| {
        check_cpu(c, 4)?;
        let shape = shape_of(c, 0)?;
        let dtype = float_dtype(c, 2)?;
        Ok(Out::Tensor(fill_new!(c, 1, &shape, dtype, |g, d| {
            tr::normal_(g, d, 0.0, part_std(dtype, 1.0))
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
        no_complex(dtype)?;
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
        no_complex(dtype)?;
        Ok(Out::Tensor(fill_new!(c, 2, &shape, dtype, |g, d| {
            tr::randint(g, d, 0, high)
        })))
    });
    t.insert("aten::randint.low", |c| {
        check_cpu(c, 5)?;
        let (low, high, shape) = (c.int(0)?, c.int(1)?, shape_of(c, 2)?);
        let dtype = c.opt_dtype(3)?.unwrap_or(DType::I64);
        no_complex(dtype)?;
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
        no_complex(dtype)?;
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
        no_complex(dtype)?;
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
        no_complex(dtype)?;
        Ok(Out::Tensor(fill_new!(c, 1, &[n], dtype, |g, d| {
            tr::randperm(g, d)
        })))
    });
    // normal_(Tensor(a!) self, float mean=0, float std=1, *, Generator? generator=None)
    t.insert("aten::normal_", |c| {
        let (mean, std) = (c.float(1)?, c.float(2)?);
        let std = part_std(c.tensor(0)?.dtype(), std);
        fill_self!(c, 3, |g, d| tr::normal_(g, d, mean, std))
    });
    // uniform_(Tensor(a!) self, float from=0, float to=1, *, Generator? generator=None)
    t.insert("aten::uniform_", |c| {
        let (from, to) = (c.float(1)?, c.float(2)?);
        fill_self!(c, 3, |g, d| tr::uniform_(g, d, from, to))
    });
    t.insert("aten::exponential_", |c| {
        no_complex(c.tensor(0)?.dtype())?;
        let lambd = c.float(1)?;
        fill_self!(c, 2, |g, d| tr::exponential_(g, d, lambd))
    });
    // random_.from(Tensor(a!) self, int from, int? to, *, Generator? generator=None)
    t.insert("aten::random_.from", |c| {
        no_complex(c.tensor(0)?.dtype())?;
        let (from, to) = (c.int(1)?, c.opt_int(2)?);
        fill_self!(c, 3, |g, d| tr::random_from_to_(g, d, from, to))
    });
    t.insert("aten::random_.to", |c| {
        no_complex(c.tensor(0)?.dtype())?;
        let to = c.int(1)?;
        fill_self!(c, 2, |g, d| tr::random_from_to_(g, d, 0, Some(to)))
    });
    t.insert("aten::random_", |c| {
        no_complex(c.tensor(0)?.dtype())?;
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

    // ----- *_like: a new tensor laid out like `self` (preserve format), filled in memory order -----
    t.insert("aten::rand_like", |c| {
        like_fill(c, 1, 3, NO_GENERATOR, Fill::Uniform)
    });
    t.insert("aten::rand_like.generator", |c| {
        like_fill(c, 2, 4, 1, Fill::Uniform)
    });
    t.insert("aten::randn_like", |c| {
        like_fill(c, 1, 3, NO_GENERATOR, Fill::Normal)
    });
    t.insert("aten::randn_like.generator", |c| {
        like_fill(c, 2, 4, 1, Fill::Normal)
    });
    t.insert("aten::randint_like", |c| {
        let high = c.int(1)?;
        like_fill(c, 2, 4, NO_GENERATOR, Fill::Int(0, high))
    });
    t.insert("aten::randint_like.generator", |c| {
        let high = c.int(1)?;
        like_fill(c, 3, 5, 2, Fill::Int(0, high))
    });
    t.insert("aten::randint_like.low_dtype", |c| {
        let (low, high) = (c.int(1)?, c.int(2)?);
        like_fill(c, 3, 5, NO_GENERATOR, Fill::Int(low, high))
    });
    t.insert("aten::randint_like.low_generator_dtype", |c| {
        let (low, high) = (c.int(1)?, c.int(2)?);
        like_fill(c, 4, 6, 3, Fill::Int(low, high))
    });
    // cauchy_(Tensor(a!) self, float median=0, float sigma=1, *, Generator? generator=None)
    t.insert("aten::cauchy_", |c| {
        let (median, sigma) = (c.float(1)?, c.float(2)?);
        let x = c.tensor(0)?;
        if !x.dtype().is_float() {
            return Err(PyNotImplementedError::new_err(format!(
                "\"cauchy_cpu\" not implemented for '{}'",
                crate::kernels::scalar_type_name(x.dtype())
            )));
        }
        if sigma <= 0.0 {
            return Err(PyRuntimeError::new_err(format!(
                "cauchy_ expects sigma > 0.0, but found sigma={sigma}"
            )));
        }
        fill_self!(c, 3, |g, d| serial_fill(g, d, |u| median
            + sigma * (std::f64::consts::PI * (u - 0.5)).tan()))
    });
    // geometric_(Tensor(a!) self, float p, *, Generator? generator=None)
    t.insert("aten::geometric_", |c| {
        let p = c.float(1)?;
        if !(p > 0.0 && p < 1.0) {
            return Err(PyRuntimeError::new_err(format!(
                "geometric_ expects p to be in (0, 1), but got p={p}"
            )));
        }
        fill_self!(c, 2, |g, d| serial_fill(g, d, |u| (u.ln() / (-p).ln_1p())
            .ceil()))
    });
    // ----- normal with tensor mean/std: standard normal samples scaled by std, plus mean -----
    t.insert("aten::normal.Tensor_Tensor", |c| {
        normal_tensors(c, Some(c.tensor(0)?), Some(c.tensor(1)?), 0.0, 1.0, 2)
    });
    t.insert("aten::normal.Tensor_float", |c| {
        normal_tensors(c, Some(c.tensor(0)?), None, 0.0, c.float(1)?, 2)
    });
    t.insert("aten::normal.float_Tensor", |c| {
        normal_tensors(c, None, Some(c.tensor(1)?), c.float(0)?, 1.0, 2)
    });
    t.insert("aten::normal.float_float", |c| {
        check_cpu(c, 6)?;
        let (mean, std) = (c.float(0)?, c.float(1)?);
        if std < 0.0 {
            return Err(PyRuntimeError::new_err(format!(
                "normal expects std >= 0.0, but found std {std}"
            )));
        }
        let shape = shape_of(c, 2)?;
        let dtype = float_dtype(c, 4)?;
        let std = part_std(dtype, std);
        Ok(Out::Tensor(fill_new!(c, 3, &shape, dtype, |g, d| {
            tr::normal_(g, d, mean, std)
        })))
    });
}

/// `uniform_real_distribution<double>(0, 1)`: 53 random bits scaled to [0, 1).
fn uniform_f64(g: &mut CpuGenerator) -> f64 {
    (g.random64() & ((1u64 << 53) - 1)) as f64 * (1.0 / 9_007_199_254_740_992.0)
}

/// Serial per-element draws in f64, cast once (upstream's cpu_serial_kernel distributions).
fn serial_fill<T: torchnative_core::Element>(
    g: &mut CpuGenerator,
    out: &mut [T],
    f: impl Fn(f64) -> f64,
) -> torchnative_core::Result<()> {
    for o in out.iter_mut() {
        *o = T::from_f64(f(uniform_f64(g)));
    }
    Ok(())
}

#[derive(Clone, Copy)]
enum Fill {
    Uniform,
    Normal,
    Int(i64, i64),
}

/// The strides `*_like` factories give (upstream's empty_like with preserve_format).
fn like_strides(x: &Tensor) -> Vec<usize> {
    torchnative_core::tensor::MemoryFormat::Preserve.strides_for(x.shape(), x.strides())
}

/// `rand_like` / `randn_like` / `randint_like`: values drawn in memory order into a buffer
/// laid out like `self`.
fn like_fill(
    c: &Ctx<'_, '_>,
    dtype_arg: usize,
    device_arg: usize,
    gen: usize,
    fill: Fill,
) -> PyResult<Out> {
    let x = c.tensor(0)?;
    let dtype = c.opt_dtype(dtype_arg)?.unwrap_or(x.dtype());
    if !matches!(c.values[device_arg], Value::None) {
        check_cpu(c, device_arg)?;
    }
    let strides = like_strides(&x);
    if x.device() == Device::Meta {
        return Ok(Out::Tensor(
            Tensor::empty_strided(x.shape(), &strides, dtype, Device::Meta).map_err(core_err)?,
        ));
    }
    let n = x.numel();
    let flat = match fill {
        Fill::Uniform | Fill::Normal if !dtype.is_float() => {
            return Err(PyNotImplementedError::new_err(format!(
                "\"{}\" not implemented for '{}'",
                if matches!(fill, Fill::Uniform) {
                    "check_uniform_bounds"
                } else {
                    "normal_kernel_cpu"
                },
                crate::kernels::scalar_type_name(dtype)
            )))
        }
        Fill::Uniform => fill_new!(c, gen, &[n], dtype, |g, d| tr::uniform_(g, d, 0.0, 1.0)),
        Fill::Normal => fill_new!(c, gen, &[n], dtype, |g, d| tr::normal_(g, d, 0.0, 1.0)),
        Fill::Int(low, high) => {
            no_complex(dtype)?;
            fill_new!(c, gen, &[n], dtype, |g, d| tr::randint(g, d, low, high))
        }
    };
    Ok(Out::Tensor(
        flat.as_strided(x.shape(), &strides, 0)
            .map_err(core_err)?
            .without_base(),
    ))
}

/// `normal(mean, std)` with tensor operands: `randn * std + mean` over the broadcast shape,
/// in the operands' dtype (as upstream's normal_impl_ does).
fn normal_tensors(
    c: &Ctx<'_, '_>,
    mean: Option<Tensor>,
    std: Option<Tensor>,
    mean_f: f64,
    std_f: f64,
    gen: usize,
) -> PyResult<Out> {
    let shape = match (&mean, &std) {
        (Some(m), Some(s)) => {
            torchnative_core::layout::broadcast_shapes("normal", m.shape(), s.shape())
                .map_err(core_err)?
        }
        (Some(m), None) => m.shape().to_vec(),
        (None, Some(s)) => s.shape().to_vec(),
        (None, None) => vec![],
    };
    let dtype = mean
        .as_ref()
        .or(std.as_ref())
        .map_or(DType::F32, |t| t.dtype());
    if !dtype.is_float() {
        return Err(PyNotImplementedError::new_err(format!(
            "\"normal_kernel_cpu\" not implemented for '{}'",
            crate::kernels::scalar_type_name(dtype)
        )));
    }
    if let Some(s) = &std {
        let v = s.to_vec::<f64>().map_err(core_err)?;
        if v.iter().any(|&x| x < 0.0) {
            return Err(PyRuntimeError::new_err(
                "normal expects all elements of std >= 0.0",
            ));
        }
    } else if std_f < 0.0 {
        return Err(PyRuntimeError::new_err(format!(
            "normal expects std >= 0.0, but found std {std_f}"
        )));
    }
    let z = fill_new!(c, gen, &shape, dtype, |g, d| tr::normal_(g, d, 0.0, 1.0));
    let scaled = match &std {
        Some(s) => z.mul(s),
        None => z.mul(torchnative_core::Scalar::Float(std_f)),
    }
    .map_err(core_err)?;
    let out = match &mean {
        Some(m) => scaled.add(m),
        None => scaled.add(torchnative_core::Scalar::Float(mean_f)),
    }
    .map_err(core_err)?;
    Ok(Out::Tensor(out.to_dtype(dtype).map_err(core_err)?))
}
