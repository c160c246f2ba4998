//! Complex tensors (and upstream's barebones uint16/uint32/uint64) at the door. An operator
//! with a complex input (a complex64/complex128 tensor or a Python `complex`) runs
//!
//! 1. its complex kernel from this file's table, when it has one;
//! 2. else its ordinary kernel, when that kernel only moves elements (views, copies, casts,
//!    concatenation, indexing, fills) or fills a complex tensor part by part (`normal_`,
//!    `uniform_`): [`COMPLEX_SAFE`];
//! 3. else upstream's Python decomposition or kernel, which composes operators that come
//!    back through the door;
//! 4. else it is refused by name (`NotImplementedError`, as upstream refuses the operators it
//!    has no complex kernel for; a few upstream refusals are `TypeError`s, kept as such).
//!
//! So a real-valued kernel never reads complex values: the core's real op families refuse
//! complex operands too, as a second line. An input of a barebones unsigned dtype takes the
//! same path without step 1: those dtypes store, convert and move, and upstream itself has
//! kernels for them in only a few operators.

use super::{ok, Ctx, Kernel, Table};
use crate::error::core_err;
use crate::value::{Out, Value};
use pyo3::exceptions::{PyNotImplementedError, PyRuntimeError, PyTypeError};
use pyo3::prelude::*;
use std::collections::HashMap;
use std::sync::OnceLock;
use torchnative_aten::FunctionSchema;
use torchnative_core::ops::complex::{self, Reduction};
use torchnative_core::{Cf64, DType, Scalar, Tensor};

/// The dtype of the first complex or barebones-unsigned input, if any.
pub fn restricted_input(py: Python<'_>, values: &[Value]) -> Option<DType> {
    let of = |t: &Py<crate::tensor::TensorBase>| {
        let d = t.bind(py).borrow().inner.dtype();
        (d.is_complex() || d.is_barebones_unsigned()).then_some(d)
    };
    values.iter().find_map(|v| match v {
        Value::Tensor(t) => of(t),
        Value::Tensors(ts) => ts.iter().find_map(of),
        Value::OptTensors(ts) => ts.iter().flatten().find_map(of),
        Value::Scalar(Scalar::Complex(..)) => Some(DType::C128),
        _ => None,
    })
}

/// Ordinary kernels that only move, copy or cast elements, so complex values pass through
/// them intact, or that fill complex tensors through their real view as upstream does (view
/// operators qualify by their schema).
const COMPLEX_SAFE: &[&str] = &[
    "aten::clone",
    "aten::contiguous",
    "aten::copy_",
    "aten::_to_copy",
    "aten::cat",
    "aten::cat.out",
    "aten::stack",
    "aten::stack.out",
    "aten::index.Tensor",
    "aten::index_select",
    "aten::gather",
    "aten::flip",
    "aten::roll",
    "aten::repeat",
    "aten::masked_select",
    "aten::_local_scalar_dense",
    "aten::fill_.Scalar",
    "aten::fill_.Tensor",
    "aten::zero_",
    "aten::zeros_like",
    "aten::ones_like",
    "aten::empty_like",
    "aten::full_like",
    "aten::empty.memory_format",
    "aten::empty_strided",
    "aten::zeros",
    "aten::ones",
    "aten::full",
    "aten::new_empty",
    "aten::new_empty_strided",
    "aten::new_zeros",
    "aten::new_ones",
    "aten::new_full",
    "aten::index_put_",
    "aten::index_put",
    "aten::_index_put_impl_",
    "aten::lift_fresh",
    "aten::lift_fresh_copy",
    "aten::detach_",
    "aten::resize_",
    "aten::set_.source_Tensor",
    "aten::where.self",
    "aten::where.self_out",
    "aten::tril",
    "aten::triu",
    "aten::tril_",
    "aten::triu_",
    "aten::masked_fill.Scalar",
    "aten::masked_fill_.Scalar",
    "aten::masked_fill.Tensor",
    "aten::masked_fill_.Tensor",
    "aten::scatter.src",
    "aten::scatter.value",
    "aten::scatter_.src",
    "aten::scatter_.value",
    "aten::scatter_add",
    "aten::scatter_add_",
    "aten::normal_",
    "aten::uniform_",
    "aten::constant_pad_nd",
    "aten::pad",
    "aten::broadcast_tensors",
    "aten::unsafe_chunk",
    "aten::unsafe_split.Tensor",
    "aten::fliplr",
    "aten::flipud",
    "aten::rot90",
    "aten::diag",
    "aten::diag_embed",
    "aten::atleast_1d",
    "aten::atleast_2d",
    "aten::atleast_3d",
    "aten::copy",
    "aten::masked_scatter",
    "aten::masked_scatter_",
    "aten::as_strided_scatter",
    "aten::select_scatter",
    "aten::slice_scatter",
    "aten::diagonal_scatter",
    "aten::combinations",
    "aten::cartesian_prod",
    "aten::index_copy",
    "aten::index_copy_",
    "aten::take",
    "aten::take_along_dim",
    "aten::narrow_copy",
    "aten::repeat_interleave.self_int",
    "aten::repeat_interleave.self_Tensor",
    "aten::tile",
    "aten::block_diag",
    "aten::hstack",
    "aten::vstack",
    "aten::dstack",
    "aten::column_stack",
    "aten::row_stack",
    "aten::meshgrid",
    "aten::meshgrid.indexing",
    "aten::expand_copy",
    "aten::permute_copy",
    "aten::t_copy",
    "aten::transpose_copy.int",
    "aten::view_copy",
    "aten::unsqueeze_copy",
    "aten::squeeze_copy",
    "aten::unbind_copy.int",
    "aten::split_copy.Tensor",
    "aten::diagonal_copy",
    "aten::alias_copy",
    "aten::select_copy.int",
    "aten::slice_copy.Tensor",
    "aten::unfold_copy",
    "aten::_unsafe_view",
    "aten::_reshape_alias",
    // metadata queries
    "aten::_is_zerotensor",
    "aten::is_pinned",
    "aten::is_inference",
    "aten::is_complex",
    "aten::is_same_size",
    "aten::result_type.Tensor",
    "aten::result_type.Scalar",
    "aten::result_type.Scalar_Tensor",
    "aten::result_type.Scalar_Scalar",
    "aten::is_floating_point",
    "aten::is_signed",
    "aten::size.int",
    "aten::stride.int",
    "aten::numel",
    "aten::dim",
];

/// Operators upstream refuses for complex inputs with a `TypeError` (the rest of its
/// refusals are `NotImplementedError`s, as ours are).
fn upstream_type_error(name: &str) -> Option<&'static str> {
    Some(match name {
        "sort" | "argsort" | "msort" => " Sort does not support complex dtypes on CPU",
        "topk" => " topk does not support complex dtypes on CPU",
        "maximum" => "maximum not implemented for complex tensors.",
        "minimum" => "minimum not implemented for complex tensors.",
        _ => return None,
    })
}

/// The kernel an operator with a complex input runs, `None` to try upstream's Python
/// decomposition, or the refusal.
pub fn kernel_for(schema: &FunctionSchema, full: &str, dtype: DType) -> PyResult<Option<Kernel>> {
    if let Some(k) = table().get(full).filter(|_| dtype.is_complex()) {
        return Ok(Some(*k));
    }
    let name = schema.name.strip_prefix("aten::").unwrap_or(&schema.name);
    if let Some(msg) = upstream_type_error(name).filter(|_| dtype.is_complex()) {
        return Err(PyTypeError::new_err(msg));
    }
    let is_view = schema
        .returns
        .first()
        .and_then(|r| r.alias.as_ref())
        .is_some_and(|a| !a.is_write);
    if is_view || COMPLEX_SAFE.contains(&full) {
        return Ok(super::get(full));
    }
    if super::get(full).is_some() {
        // A real kernel exists but reads values as reals: refuse rather than let upstream's
        // decomposition come back here for the same operator.
        return Err(refusal(full, dtype));
    }
    Ok(None)
}

/// The refusal for an operator with a complex or barebones-unsigned input that nothing
/// could run.
pub fn refusal(full: &str, dtype: DType) -> PyErr {
    let why = if dtype.is_complex() {
        "complex inputs run only where a complex kernel exists; real kernels never read \
         complex values"
    } else {
        "uint16/uint32/uint64 tensors store, convert and move; like upstream, torchnative \
         computes little on them"
    };
    PyNotImplementedError::new_err(format!(
        "operator {full} has no kernel for {} tensors in torchnative ({why})",
        dtype.name()
    ))
}

fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(build)
}

/// Upstream's warning when a complex value is cast into a real dtype.
pub(crate) fn warn_discarding_imaginary(c: &Ctx<'_, '_>) -> PyResult<()> {
    let warnings = c.py.import("warnings")?;
    warnings.call_method1(
        "warn",
        ("Casting complex values to real discards the imaginary part",),
    )?;
    Ok(())
}

/// Scalar `s` as a complex tensor operand (a wrapped number, lowest in promotion).
fn wrapped(s: Scalar) -> Tensor {
    Tensor::wrap_scalar(s)
}

fn alpha_times(b: &Tensor, alpha: Scalar) -> torchnative_core::Result<Tensor> {
    if alpha == Scalar::Int(1) {
        return Ok(b.clone());
    }
    let a = alpha.to_complex();
    if b.dtype().is_complex() {
        complex::unary("mul", b, |z| z * a)
    } else {
        complex::binary("mul", b, &wrapped(alpha), |x, y| x * y)
    }
}

/// `a + alpha * b` / `a - alpha * b` with complex values.
fn add_sub(a: &Tensor, b: &Tensor, alpha: Scalar, sub: bool) -> torchnative_core::Result<Tensor> {
    let scaled = alpha_times(b, alpha)?;
    // The alpha product keeps `b`'s rank in promotion (a wrapped number stays one).
    let scaled = if b.is_wrapped_number() && !scaled.is_wrapped_number() {
        Tensor::wrap_scalar(scaled.item()?)
    } else {
        scaled
    };
    if sub {
        complex::binary("sub", a, &scaled, |x, y| x - y)
    } else {
        complex::binary("add", a, &scaled, |x, y| x + y)
    }
}

/// `pow(z, e)` as upstream's CPU kernel: exponent 0 fills ones, 1 copies, 0.5 is `sqrt`, -1
/// `reciprocal`, 2 / 3 / -2 multiply out, anything else is `std::pow` (glibc's `cpow`:
/// `exp(e * log z)`).
fn pow_scalar(x: &Tensor, e: Scalar) -> torchnative_core::Result<Tensor> {
    let ec = e.to_complex();
    let dtype = torchnative_core::result_type(&[
        x.promotion_operand(),
        (
            e.promotion_dtype(),
            torchnative_core::OperandKind::WrappedNumber,
        ),
    ])?;
    let x = x.to_dtype(dtype)?;
    if ec == Cf64::new(0.0, 0.0) {
        return complex::unary("pow", &x, |_| Cf64::new(1.0, 0.0));
    }
    if ec == Cf64::new(1.0, 0.0) {
        return x.deep_clone();
    }
    if ec == Cf64::new(0.5, 0.0) {
        return complex::unary("pow", &x, |z| z.sqrt());
    }
    let one = Cf64::new(1.0, 0.0);
    if ec == Cf64::new(-1.0, 0.0) {
        return complex::unary("pow", &x, |z| one / z);
    }
    if ec == Cf64::new(2.0, 0.0) {
        return complex::unary("pow", &x, |z| z * z);
    }
    if ec == Cf64::new(3.0, 0.0) {
        return complex::unary("pow", &x, |z| z * z * z);
    }
    if ec == Cf64::new(-2.0, 0.0) {
        return complex::unary("pow", &x, |z| one / (z * z));
    }
    complex::unary("pow", &x, |z| z.powc(ec))
}

/// `sgn(z) = z / |z|` (0 at 0).
fn sgn(z: Cf64) -> Cf64 {
    let a = z.abs();
    if a == 0.0 {
        Cf64::new(0.0, 0.0)
    } else {
        Cf64::new(z.re / a, z.im / a)
    }
}

/// `isclose` for complex values: `|a - b| <= atol + rtol * |b|`, exact equality (infinities)
/// counting as close, NaNs close only with `equal_nan`.
fn isclose(
    a: &Tensor,
    b: &Tensor,
    rtol: f64,
    atol: f64,
    equal_nan: bool,
) -> torchnative_core::Result<Tensor> {
    let nan = |z: Cf64| z.re.is_nan() || z.im.is_nan();
    complex::compare("isclose", a, b, move |x, y| {
        if x == y {
            return true;
        }
        if nan(x) || nan(y) {
            return equal_nan && nan(x) && nan(y);
        }
        let d = (x - y).abs();
        d.is_finite() && d <= atol + rtol * y.abs()
    })
}

/// `beta * input + alpha * product` (`addmm`, `addmv`, `baddbmm`, `addr`): `input` is
/// ignored when beta is 0, as upstream does (its NaNs do not propagate).
fn add_product(
    input: &Tensor,
    product: Tensor,
    beta: Scalar,
    alpha: Scalar,
) -> torchnative_core::Result<Tensor> {
    let (b, a) = (beta.to_complex(), alpha.to_complex());
    let scaled = complex::unary("addmm", &product, |z| z * a)?;
    if b == Cf64::new(0.0, 0.0) {
        return Ok(scaled);
    }
    complex::binary("addmm", input, &scaled, move |x, p| b * x + p)
}

/// `exp(z) - 1` without cancellation for small |z| (`expm1(x) cos y - 2 sin^2(y/2)` for the
/// real part).
fn expm1(z: Cf64) -> Cf64 {
    let (x, y) = (z.re, z.im);
    let s = (y / 2.0).sin();
    Cf64::new(x.exp_m1() * y.cos() - 2.0 * s * s, x.exp() * y.sin())
}

/// `log(1 + z)`, accurate for small |z|.
fn log1p(z: Cf64) -> Cf64 {
    let (x, y) = (z.re, z.im);
    // |1 + z|^2 - 1 = 2x + x^2 + y^2
    let re = if z.abs() < 0.5 {
        (2.0 * x + x * x + y * y).ln_1p() / 2.0
    } else {
        (Cf64::new(1.0, 0.0) + z).ln().re
    };
    Cf64::new(re, y.atan2(1.0 + x))
}

const I: Cf64 = Cf64::new(0.0, 1.0);
const ONE: Cf64 = Cf64::new(1.0, 0.0);

fn asin(z: Cf64) -> Cf64 {
    // -i log(iz + sqrt(1 - z^2))
    let w = (I * z + (ONE - z * z).sqrt()).ln();
    Cf64::new(w.im, -w.re)
}
fn acos(z: Cf64) -> Cf64 {
    // -i log(z + i sqrt(1 - z^2))
    let w = (z + I * (ONE - z * z).sqrt()).ln();
    Cf64::new(w.im, -w.re)
}
fn atan(z: Cf64) -> Cf64 {
    // (i / 2) (log(1 - iz) - log(1 + iz))
    let d = (ONE - I * z).ln() - (ONE + I * z).ln();
    Cf64::new(-d.im / 2.0, d.re / 2.0)
}
fn asinh(z: Cf64) -> Cf64 {
    // asinh(z) = -i asin(iz)
    let w = asin(I * z);
    Cf64::new(w.im, -w.re)
}
fn acosh(z: Cf64) -> Cf64 {
    (z + (z + ONE).sqrt() * (z - ONE).sqrt()).ln()
}
fn atanh(z: Cf64) -> Cf64 {
    // atanh(z) = -i atan(iz)
    let w = atan(I * z);
    Cf64::new(w.im, -w.re)
}

/// The `dim` argument `i` (None: every dim).
fn dims(c: &Ctx<'_, '_>, i: usize) -> PyResult<Vec<i64>> {
    Ok(super::dims_or_all(c.opt_ints(i)?, c.tensor(0)?.dim()))
}

/// `sum` / `mean` of a complex tensor: complex dtypes reduce here; a real `dtype=` casts
/// first (upstream warns that the imaginary parts are discarded) and reduces as reals.
fn reduce_with(
    c: &Ctx<'_, '_>,
    how: Reduction,
    dims: &[i64],
    keepdim: bool,
    dtype: Option<DType>,
) -> PyResult<Out> {
    let x = c.tensor(0)?;
    match dtype {
        Some(d) if !d.is_complex() => {
            warn_discarding_imaginary(c)?;
            let real = x.to_dtype(d).map_err(core_err)?;
            ok(match how {
                Reduction::Sum => real.sum_dtype(dims, keepdim, Some(d)),
                Reduction::Mean => real.mean_dtype(dims, keepdim, Some(d)),
                Reduction::Prod => real.prod_dtype(dims, keepdim, Some(d)),
            })
        }
        _ => ok(complex::reduce(&x, how, dims, keepdim, dtype)),
    }
}

/// [`unary!`]'s three forms of a complex -> complex function.
macro_rules! complex_unary {
    ($t:ident, $name:literal, $f:expr) => {
        unary!($t, $name, |x| complex::unary($name, x, $f))
    };
}

macro_rules! complex_binary {
    ($t:ident, $name:literal, $f:expr) => {{
        fn f(a: &Tensor, b: &Tensor) -> torchnative_core::Result<Tensor> {
            complex::binary($name, a, b, $f)
        }
        $t.insert(concat!("aten::", $name, ".Tensor"), |c| {
            ok(f(&c.tensor(0)?, &c.tensor(1)?))
        });
        $t.insert(concat!("aten::", $name, ".Scalar"), |c| {
            ok(f(&c.tensor(0)?, &wrapped(c.scalar(1)?)))
        });
        $t.insert(concat!("aten::", $name, "_.Tensor"), |c| {
            let r = f(&c.tensor(0)?, &c.tensor(1)?).map_err(core_err)?;
            c.write_into(0, r)
        });
        $t.insert(concat!("aten::", $name, "_.Scalar"), |c| {
            let r = f(&c.tensor(0)?, &wrapped(c.scalar(1)?)).map_err(core_err)?;
            c.write_into(0, r)
        });
        $t.insert(concat!("aten::", $name, ".out"), |c| {
            let r = f(&c.tensor(0)?, &c.tensor(1)?).map_err(core_err)?;
            c.write_into(2, r)
        });
    }};
}

macro_rules! complex_compare {
    ($t:ident, $name:literal, $f:expr) => {{
        fn f(a: &Tensor, b: &Tensor) -> torchnative_core::Result<Tensor> {
            complex::compare($name, a, b, $f)
        }
        $t.insert(concat!("aten::", $name, ".Tensor"), |c| {
            ok(f(&c.tensor(0)?, &c.tensor(1)?))
        });
        $t.insert(concat!("aten::", $name, ".Scalar"), |c| {
            ok(f(&c.tensor(0)?, &wrapped(c.scalar(1)?)))
        });
        $t.insert(concat!("aten::", $name, ".Tensor_out"), |c| {
            let r = f(&c.tensor(0)?, &c.tensor(1)?).map_err(core_err)?;
            c.write_into(2, r)
        });
        $t.insert(concat!("aten::", $name, ".Scalar_out"), |c| {
            let r = f(&c.tensor(0)?, &wrapped(c.scalar(1)?)).map_err(core_err)?;
            c.write_into(2, r)
        });
    }};
}

fn build() -> Table {
    let mut t: Table = HashMap::new();
    complex_unary!(t, "exp", |z| z.exp());
    complex_unary!(t, "log", |z| z.ln());
    complex_unary!(t, "sqrt", |z| z.sqrt());
    complex_unary!(t, "sin", |z| z.sin());
    complex_unary!(t, "cos", |z| z.cos());
    complex_unary!(t, "tanh", |z| z.tanh());
    complex_unary!(t, "reciprocal", |z| Cf64::new(1.0, 0.0) / z);
    complex_unary!(t, "neg", |z| -z);
    complex_unary!(t, "conj_physical", |z| z.conj());
    complex_unary!(t, "sgn", sgn);
    complex_unary!(t, "square", |z| z * z);
    complex_unary!(t, "sinh", |z| {
        let w = (I * z).sin();
        Cf64::new(w.im, -w.re)
    });
    complex_unary!(t, "cosh", |z| (I * z).cos());
    complex_unary!(t, "tan", |z| {
        let w = (I * z).tanh();
        Cf64::new(w.im, -w.re)
    });
    complex_unary!(t, "asin", asin);
    complex_unary!(t, "acos", acos);
    complex_unary!(t, "atan", atan);
    complex_unary!(t, "asinh", asinh);
    complex_unary!(t, "acosh", acosh);
    complex_unary!(t, "atanh", atanh);
    complex_unary!(t, "log10", |z| {
        let w = z.ln();
        Cf64::new(
            w.re / std::f64::consts::LN_10,
            w.im / std::f64::consts::LN_10,
        )
    });
    complex_unary!(t, "log2", |z| {
        let w = z.ln();
        Cf64::new(w.re / std::f64::consts::LN_2, w.im / std::f64::consts::LN_2)
    });
    complex_unary!(t, "log1p", log1p);
    complex_unary!(t, "expm1", expm1);
    complex_unary!(t, "exp2", |z| (z * Cf64::new(std::f64::consts::LN_2, 0.0))
        .exp());
    complex_unary!(t, "rsqrt", |z| ONE / z.sqrt());
    complex_unary!(t, "sinc", |z| {
        if z == Cf64::default() {
            return ONE;
        }
        let p = z * Cf64::new(std::f64::consts::PI, 0.0);
        p.sin() / p
    });
    t.insert("aten::logical_not", |c| {
        ok(complex::predicate("logical_not", &c.tensor(0)?, |z| {
            z == Cf64::default()
        }))
    });
    t.insert("aten::logical_and", |c| {
        ok(complex::compare(
            "logical_and",
            &c.tensor(0)?,
            &c.tensor(1)?,
            |x, y| x != Cf64::default() && y != Cf64::default(),
        ))
    });
    t.insert("aten::logical_or", |c| {
        ok(complex::compare(
            "logical_or",
            &c.tensor(0)?,
            &c.tensor(1)?,
            |x, y| x != Cf64::default() || y != Cf64::default(),
        ))
    });
    t.insert("aten::logical_xor", |c| {
        ok(complex::compare(
            "logical_xor",
            &c.tensor(0)?,
            &c.tensor(1)?,
            |x, y| (x != Cf64::default()) != (y != Cf64::default()),
        ))
    });
    complex_unary!(t, "sigmoid", |z| Cf64::new(1.0, 0.0)
        / (Cf64::new(1.0, 0.0) + (-z).exp()));
    t.insert("aten::abs", |c| {
        ok(complex::to_real("abs", &c.tensor(0)?, |z| z.abs()))
    });
    t.insert("aten::abs.out", |c| {
        let r = complex::to_real("abs", &c.tensor(0)?, |z| z.abs()).map_err(core_err)?;
        c.write_into(1, r)
    });
    t.insert("aten::abs_", |_| {
        Err(PyRuntimeError::new_err(
            "In-place abs is not supported for complex tensors.",
        ))
    });
    t.insert("aten::angle", |c| {
        ok(complex::to_real("angle", &c.tensor(0)?, |z| z.arg()))
    });
    t.insert("aten::angle.out", |c| {
        let r = complex::to_real("angle", &c.tensor(0)?, |z| z.arg()).map_err(core_err)?;
        c.write_into(1, r)
    });
    t.insert("aten::isreal", |c| {
        ok(complex::predicate("isreal", &c.tensor(0)?, |z| z.im == 0.0))
    });
    t.insert("aten::isnan", |c| {
        ok(complex::predicate("isnan", &c.tensor(0)?, |z| {
            z.re.is_nan() || z.im.is_nan()
        }))
    });
    t.insert("aten::isfinite", |c| {
        ok(complex::predicate("isfinite", &c.tensor(0)?, |z| {
            z.re.is_finite() && z.im.is_finite()
        }))
    });
    t.insert("aten::isinf", |c| {
        ok(complex::predicate("isinf", &c.tensor(0)?, |z| {
            z.re.is_infinite() || z.im.is_infinite()
        }))
    });

    // ----- arithmetic -----
    alpha_forms!(t, "add", |a, b, alpha| add_sub(a, b, alpha, false));
    alpha_forms!(t, "sub", |a, b, alpha| add_sub(a, b, alpha, true));
    complex_binary!(t, "mul", |x, y| x * y);
    complex_binary!(t, "div", |x, y| x / y);
    complex_binary!(t, "divide", |x, y| x / y);
    complex_binary!(t, "true_divide", |x, y| x / y);
    t.insert("aten::rsub.Tensor", |c| {
        ok(add_sub(&c.tensor(1)?, &c.tensor(0)?, c.scalar(2)?, true))
    });
    t.insert("aten::rsub.Scalar", |c| {
        ok(add_sub(
            &wrapped(c.scalar(1)?),
            &c.tensor(0)?,
            c.scalar(2)?,
            true,
        ))
    });
    t.insert("aten::cumsum", |c| {
        ok(complex::cumulative(
            &c.tensor(0)?,
            c.int(1)?,
            false,
            c.opt_dtype(2)?,
        ))
    });
    t.insert("aten::cumprod", |c| {
        ok(complex::cumulative(
            &c.tensor(0)?,
            c.int(1)?,
            true,
            c.opt_dtype(2)?,
        ))
    });
    t.insert("aten::pow.Tensor_Scalar", |c| {
        ok(pow_scalar(&c.tensor(0)?, c.scalar(1)?))
    });
    t.insert("aten::pow_.Scalar", |c| {
        let r = pow_scalar(&c.tensor(0)?, c.scalar(1)?).map_err(core_err)?;
        c.write_into(0, r)
    });
    t.insert("aten::pow.Tensor_Scalar_out", |c| {
        let r = pow_scalar(&c.tensor(0)?, c.scalar(1)?).map_err(core_err)?;
        c.write_into(2, r)
    });
    t.insert("aten::pow.Tensor_Tensor", |c| {
        ok(complex::binary(
            "pow",
            &c.tensor(0)?,
            &c.tensor(1)?,
            |x, y| x.powc(y),
        ))
    });
    complex_compare!(t, "eq", |x, y| x.re == y.re && x.im == y.im);
    complex_compare!(t, "ne", |x, y| x.re != y.re || x.im != y.im);

    t.insert("aten::isclose", |c| {
        let (a, b) = (c.tensor(0)?, c.tensor(1)?);
        ok(isclose(&a, &b, c.float(2)?, c.float(3)?, c.bool(4)?))
    });
    t.insert("aten::allclose", |c| {
        let (a, b) = (c.tensor(0)?, c.tensor(1)?);
        let close = isclose(&a, &b, c.float(2)?, c.float(3)?, c.bool(4)?).map_err(core_err)?;
        let all = close
            .to_vec::<bool>()
            .map_err(core_err)?
            .into_iter()
            .all(|v| v);
        Ok(Out::Scalar(Scalar::Bool(all)))
    });
    t.insert("aten::equal", |c| {
        let (a, b) = (c.tensor(0)?, c.tensor(1)?);
        if a.shape() != b.shape() {
            return Ok(Out::Scalar(Scalar::Bool(false)));
        }
        let same = complex::compare("equal", &a, &b, |x, y| x.re == y.re && x.im == y.im)
            .and_then(|t| t.to_vec::<bool>())
            .map_err(core_err)?
            .into_iter()
            .all(|v| v);
        Ok(Out::Scalar(Scalar::Bool(same)))
    });

    // ----- reductions -----
    t.insert("aten::sum", |c| {
        reduce_with(c, Reduction::Sum, &[], false, c.opt_dtype(1)?)
    });
    t.insert("aten::sum.dim_IntList", |c| {
        reduce_with(c, Reduction::Sum, &dims(c, 1)?, c.bool(2)?, c.opt_dtype(3)?)
    });
    t.insert("aten::mean", |c| {
        reduce_with(c, Reduction::Mean, &[], false, c.opt_dtype(1)?)
    });
    t.insert("aten::mean.dim", |c| {
        reduce_with(
            c,
            Reduction::Mean,
            &dims(c, 1)?,
            c.bool(2)?,
            c.opt_dtype(3)?,
        )
    });
    t.insert("aten::prod", |c| {
        reduce_with(c, Reduction::Prod, &[], false, c.opt_dtype(1)?)
    });
    t.insert("aten::prod.dim_int", |c| {
        reduce_with(
            c,
            Reduction::Prod,
            &[c.int(1)?],
            c.bool(2)?,
            c.opt_dtype(3)?,
        )
    });
    t.insert("aten::linalg_vector_norm", |c| {
        let x = c.tensor(0)?;
        if c.opt_dtype(4)?.is_some_and(|d| d != x.dtype()) {
            return Err(PyNotImplementedError::new_err(
                "linalg.vector_norm of a complex tensor with dtype= is not supported by \
                 torchnative",
            ));
        }
        ok(complex::vector_norm(
            &x,
            c.scalar(1)?.to_f64(),
            &dims(c, 2)?,
            c.bool(3)?,
        ))
    });

    // ----- products -----
    t.insert("aten::matmul", |c| {
        ok(complex::matmul(&c.tensor(0)?, &c.tensor(1)?))
    });
    t.insert("aten::mm", |c| {
        let (a, b) = (c.tensor(0)?, c.tensor(1)?);
        if a.dim() != 2 || b.dim() != 2 {
            return Err(PyRuntimeError::new_err(format!(
                "{} must be a matrix",
                if a.dim() != 2 { "self" } else { "mat2" }
            )));
        }
        ok(complex::matmul(&a, &b))
    });
    t.insert("aten::bmm", |c| {
        let (a, b) = (c.tensor(0)?, c.tensor(1)?);
        if a.dim() != 3 || b.dim() != 3 {
            return Err(PyRuntimeError::new_err(
                "batch1 and batch2 must be 3D tensors",
            ));
        }
        ok(complex::matmul(&a, &b))
    });
    t.insert("aten::vdot", |c| {
        ok(complex::vdot(&c.tensor(0)?, &c.tensor(1)?))
    });
    t.insert("aten::mv", |c| {
        let (a, v) = (c.tensor(0)?, c.tensor(1)?);
        torchnative_core::ops::linalg::check_mv(&a, &v).map_err(core_err)?;
        ok(complex::matmul(&a, &v))
    });
    t.insert("aten::outer", |c| {
        let a = c.tensor(0)?.unsqueeze(1).map_err(core_err)?;
        ok(complex::binary("outer", &a, &c.tensor(1)?, |x, y| x * y))
    });
    t.insert("aten::addmm", |c| {
        let p = complex::matmul(&c.tensor(1)?, &c.tensor(2)?).map_err(core_err)?;
        ok(add_product(&c.tensor(0)?, p, c.scalar(3)?, c.scalar(4)?))
    });
    t.insert("aten::addmv", |c| {
        let p = complex::matmul(&c.tensor(1)?, &c.tensor(2)?).map_err(core_err)?;
        ok(add_product(&c.tensor(0)?, p, c.scalar(3)?, c.scalar(4)?))
    });
    t.insert("aten::baddbmm", |c| {
        let p = complex::matmul(&c.tensor(1)?, &c.tensor(2)?).map_err(core_err)?;
        ok(add_product(&c.tensor(0)?, p, c.scalar(3)?, c.scalar(4)?))
    });
    t.insert("aten::addbmm", |c| {
        let p = complex::matmul(&c.tensor(1)?, &c.tensor(2)?).map_err(core_err)?;
        let p = complex::reduce(&p, Reduction::Sum, &[0], false, None).map_err(core_err)?;
        ok(add_product(&c.tensor(0)?, p, c.scalar(3)?, c.scalar(4)?))
    });
    t.insert("aten::addr", |c| {
        let a = c.tensor(1)?.unsqueeze(1).map_err(core_err)?;
        let p = complex::binary("addr", &a, &c.tensor(2)?, |x, y| x * y).map_err(core_err)?;
        ok(add_product(&c.tensor(0)?, p, c.scalar(3)?, c.scalar(4)?))
    });
    t.insert("aten::dot", |c| {
        let a = c.tensor(0)?;
        let conj_a = complex::unary("dot", &a, |z| z.conj()).map_err(core_err)?;
        // dot(a, b) = vdot(conj(a), b)
        ok(complex::vdot(&conj_a, &c.tensor(1)?))
    });

    // ----- complex <-> real views and conversions -----
    t.insert("aten::view_as_real", |c| ok(c.tensor(0)?.view_as_real()));
    t.insert("aten::real", |c| ok(c.tensor(0)?.real_part()));
    t.insert("aten::imag", |c| ok(c.tensor(0)?.imag_part()));
    t.insert("aten::_to_copy", |c| {
        if c.opt_dtype(1)?.is_some_and(|d| !d.is_complex()) {
            warn_discarding_imaginary(c)?;
        }
        let copy = super::get("aten::_to_copy")
            .ok_or_else(|| PyRuntimeError::new_err("internal: aten::_to_copy has no kernel"))?;
        copy(c)
    });
    t.insert("aten::copy_", |c| {
        let (dst, src) = (c.tensor(0)?, c.tensor(1)?);
        if src.dtype().is_complex() && !dst.dtype().is_complex() {
            warn_discarding_imaginary(c)?;
        }
        dst.copy_(&src).map_err(core_err)?;
        Ok(Out::Arg(0))
    });
    t
}

/// `torch.polar` / `torch.complex` / `view_as_complex`: real inputs, complex results (in the
/// ordinary table, since their inputs are real).
pub(crate) fn register_real_inputs(t: &mut Table) {
    t.insert("aten::polar", |c| {
        ok(complex::polar(&c.tensor(0)?, &c.tensor(1)?))
    });
    t.insert("aten::polar.out", |c| {
        let r = complex::polar(&c.tensor(0)?, &c.tensor(1)?).map_err(core_err)?;
        c.write_into(2, r)
    });
    t.insert("aten::complex", |c| {
        ok(complex::from_parts(&c.tensor(0)?, &c.tensor(1)?))
    });
    t.insert("aten::complex.out", |c| {
        let r = complex::from_parts(&c.tensor(0)?, &c.tensor(1)?).map_err(core_err)?;
        c.write_into(2, r)
    });
    t.insert("aten::view_as_complex", |c| {
        ok(c.tensor(0)?.view_as_complex())
    });
    t.insert("aten::imag", |_| {
        Err(PyRuntimeError::new_err(
            "imag is not implemented for tensors with non-complex dtypes.",
        ))
    });
}
