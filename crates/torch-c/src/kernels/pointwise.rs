//! Pointwise operators (functional, in-place and out= forms) with promotion and broadcasting.

#![allow(unused_imports)]

use super::*;
use torchnative_core::RoundingMode;

/// Upstream's TensorIterator refuses to write into a tensor whose elements share memory
/// (an expanded tensor) before it looks at dtypes.
fn check_no_internal_overlap(c: &Ctx<'_, '_>, i: usize) -> PyResult<()> {
    let t = c.tensor(i)?;
    if t.shape()
        .iter()
        .zip(t.strides())
        .any(|(&n, &s)| n > 1 && s == 0)
    {
        return Err(PyRuntimeError::new_err(
            "unsupported operation: more than one element of the written-to tensor refers to a \
             single memory location. Please clone() the tensor before performing the operation.",
        ));
    }
    Ok(())
}

fn opt_float(c: &Ctx<'_, '_>, i: usize) -> PyResult<Option<f64>> {
    match &c.values[i] {
        Value::None => Ok(None),
        _ => c.float(i).map(Some),
    }
}

/// `unary!` whose in-place form first refuses a self-overlapping destination, as upstream.
macro_rules! unary_ck {
    ($t:ident, $name:literal, $f:expr) => {{
        fn f(x: &Tensor) -> torchnative_core::Result<Tensor> {
            let g: fn(&Tensor) -> torchnative_core::Result<Tensor> = $f;
            g(x)
        }
        $t.insert(concat!("aten::", $name), |c| ok(f(&c.tensor(0)?)));
        $t.insert(concat!("aten::", $name, "_"), |c| {
            check_no_internal_overlap(c, 0)?;
            let r = f(&c.tensor(0)?).map_err(core_err)?;
            c.write_into(0, r)
        });
        $t.insert(concat!("aten::", $name, ".out"), |c| {
            let r = f(&c.tensor(0)?).map_err(core_err)?;
            c.write_into(1, r)
        });
    }};
}

/// A unary op with only functional and out= forms.
macro_rules! unary_fo {
    ($t:ident, $name:literal, $f:expr) => {{
        fn f(x: &Tensor) -> torchnative_core::Result<Tensor> {
            let g: fn(&Tensor) -> torchnative_core::Result<Tensor> = $f;
            g(x)
        }
        $t.insert(concat!("aten::", $name), |c| ok(f(&c.tensor(0)?)));
        $t.insert(concat!("aten::", $name, ".out"), |c| {
            let r = f(&c.tensor(0)?).map_err(core_err)?;
            c.write_into(1, r)
        });
    }};
}

/// The C++ element type name upstream's messages print for a dtype (`caffe2::TypeMeta`).
fn type_meta_name(d: DType) -> &'static str {
    match d {
        DType::F32 => "float",
        DType::F64 => "double",
        DType::F16 => "c10::Half",
        DType::BF16 => "c10::BFloat16",
        DType::I64 => "long int",
        DType::I32 => "int",
        DType::I16 => "short int",
        DType::I8 => "signed char",
        DType::U8 => "unsigned char",
        DType::Bool => "bool",
        DType::C64 => "c10::complex<float>",
        DType::C128 => "c10::complex<double>",
        DType::U16 => "unsigned short",
        DType::U32 => "unsigned int",
        DType::U64 => "unsigned long",
    }
}

/// `log_normal_(self, mean, std, *, generator)`: as upstream's CPU kernel, every element (in
/// order) is exp of one `normal_distribution<double>(mean, std)` draw (which uses and refills
/// the generator's cached second Box-Muller sample), rounded to the tensor's dtype.
fn log_normal_(c: &Ctx<'_, '_>) -> PyResult<Out> {
    let dst = c.tensor(0)?;
    let (mean, std) = (c.float(1)?, c.float(2)?);
    if std.is_nan() || std <= 0.0 {
        return Err(PyRuntimeError::new_err(format!(
            "log_normal_ expects std > 0.0, but found std={std}"
        )));
    }
    let dtype = dst.dtype();
    if !dtype.is_float() {
        return Err(pyo3::exceptions::PyNotImplementedError::new_err(format!(
            "\"log_normal_cpu\" not implemented for '{}'",
            scalar_type_name(dtype)
        )));
    }
    if dst.device() != Device::Cpu {
        return Err(PyRuntimeError::new_err(
            "log_normal_: random tensors on the meta device have no values; use device='cpu'",
        ));
    }
    let gen = match c.values.get(3).unwrap_or(&Value::None) {
        Value::None => crate::random::default_generator(c.py)?.clone_ref(c.py),
        Value::Object(o) => o
            .bind(c.py)
            .cast::<crate::random::Generator>()
            .map_err(|_| PyTypeError::new_err("log_normal_: expected a torch.Generator"))?
            .clone()
            .unbind(),
        v => {
            return Err(PyTypeError::new_err(format!(
                "log_normal_: expected a torch.Generator, got {v:?}"
            )))
        }
    };
    let mut draws = vec![0f64; dst.numel()];
    {
        let g = gen.bind(c.py).borrow();
        let mut guard = g.lock();
        torchnative_core::torch_random::normal_serial_(&mut guard, &mut draws, mean, std)
            .map_err(core_err)?;
    }
    for v in draws.iter_mut() {
        *v = v.exp();
    }
    let tmp = Tensor::from_f64s(&draws, dst.shape(), dtype).map_err(core_err)?;
    dst.copy_(&tmp).map_err(core_err)?;
    Ok(Out::Arg(0))
}

pub(crate) fn register(t: &mut Table) {
    // ----- pointwise -----
    unary_ck!(t, "abs", |x| x.abs());
    unary!(t, "neg", |x| x.neg());
    unary_ck!(t, "exp", |x| x.exp());
    unary_ck!(t, "log", |x| x.log());
    unary_ck!(t, "log1p", |x| x.log1p());
    unary_ck!(t, "log2", |x| x.log2());
    unary_ck!(t, "log10", |x| x.log10());
    unary_ck!(t, "exp2", |x| x.exp2());
    unary_ck!(t, "expm1", |x| x.expm1());
    unary_ck!(t, "sqrt", |x| x.sqrt());
    unary_ck!(t, "rsqrt", |x| x.rsqrt());
    unary_ck!(t, "sin", |x| x.sin());
    unary_ck!(t, "cos", |x| x.cos());
    unary_ck!(t, "tan", |x| x.tan());
    unary_ck!(t, "tanh", |x| x.tanh());
    unary_ck!(t, "sinh", |x| x.sinh());
    unary_ck!(t, "cosh", |x| x.cosh());
    unary_ck!(t, "asin", |x| x.asin());
    unary_ck!(t, "acos", |x| x.acos());
    unary_ck!(t, "atan", |x| x.atan());
    unary_ck!(t, "sigmoid", |x| x.sigmoid());
    unary_ck!(t, "erf", |x| x.erf());
    unary_ck!(t, "reciprocal", |x| x.reciprocal());
    unary_ck!(t, "trunc", |x| x.trunc());
    unary_ck!(t, "floor", |x| x.floor());
    unary_ck!(t, "ceil", |x| x.ceil());
    unary_ck!(t, "round", |x| x.round());
    unary_ck!(t, "sign", |x| x.sign());
    unary!(t, "relu", |x| x.relu());
    unary_ck!(t, "silu", |x| x.silu());
    unary_ck!(t, "bitwise_not", |x| x.bitwise_not());
    unary_ck!(t, "logical_not", |x| x.logical_not());
    unary_ck!(t, "absolute", |x| x.abs());
    unary!(t, "negative", |x| x.neg());
    unary_ck!(t, "arcsin", |x| x.asin());
    unary_ck!(t, "arccos", |x| x.acos());
    unary_ck!(t, "arctan", |x| x.atan());
    unary_ck!(t, "acosh", |x| x.acosh());
    unary_ck!(t, "asinh", |x| x.asinh());
    unary_ck!(t, "atanh", |x| x.atanh());
    unary_ck!(t, "arccosh", |x| x.acosh());
    unary_ck!(t, "arcsinh", |x| x.asinh());
    unary_ck!(t, "arctanh", |x| x.atanh());
    unary_ck!(t, "fix", |x| x.trunc());
    unary_ck!(t, "deg2rad", |x| x.deg2rad());
    unary_ck!(t, "rad2deg", |x| x.rad2deg());
    unary_ck!(t, "digamma", |x| x.digamma());
    unary_ck!(t, "lgamma", |x| x.lgamma());
    unary_ck!(t, "erfc", |x| x.erfc());
    unary_ck!(t, "erfinv", |x| x.erfinv());
    unary_ck!(t, "i0", |x| x.i0());
    unary_ck!(t, "sinc", |x| x.sinc());
    unary_ck!(t, "frac", |x| x.frac());
    unary_ck!(t, "sgn", |x| x.sign());
    unary_ck!(t, "square", |x| x.square());
    // torch.special: ops of their own, and aliases of the ops above.
    unary_fo!(t, "special_i0e", |x| x.i0e());
    unary_fo!(t, "special_i1", |x| x.i1());
    unary_fo!(t, "special_i1e", |x| x.i1e());
    unary_fo!(t, "special_ndtri", |x| x.ndtri());
    unary_fo!(t, "special_log_ndtr", |x| x.log_ndtr());
    unary_fo!(t, "special_erfcx", |x| x.erfcx());
    unary_fo!(t, "special_bessel_j0", |x| x.bessel_j0());
    unary_fo!(t, "special_bessel_j1", |x| x.bessel_j1());
    unary_fo!(t, "special_spherical_bessel_j0", |x| x
        .spherical_bessel_j0());
    unary_fo!(t, "special_i0", |x| x.i0());
    unary_fo!(t, "special_modified_bessel_i0", |x| x.modified_bessel_i0());
    unary_fo!(t, "special_modified_bessel_k0", |x| x.bessel_k(
        torchnative_core::ops::special::BesselK::K0,
        "special_modified_bessel_k0"
    ));
    unary_fo!(t, "special_modified_bessel_k1", |x| x.bessel_k(
        torchnative_core::ops::special::BesselK::K1,
        "special_modified_bessel_k1"
    ));
    unary_fo!(t, "special_scaled_modified_bessel_k0", |x| x.bessel_k(
        torchnative_core::ops::special::BesselK::ScaledK0,
        "special_scaled_modified_bessel_k0"
    ));
    unary_fo!(t, "special_scaled_modified_bessel_k1", |x| x.bessel_k(
        torchnative_core::ops::special::BesselK::ScaledK1,
        "special_scaled_modified_bessel_k1"
    ));
    unary_fo!(t, "special_bessel_y0", |x| x.bessel_y0());
    unary_fo!(t, "special_bessel_y1", |x| x.bessel_y1());
    unary_fo!(t, "special_modified_bessel_i1", |x| x.modified_bessel_i1());
    unary_fo!(t, "special_erfinv", |x| x.erfinv());
    unary_fo!(t, "special_erf", |x| x.erf());
    unary_fo!(t, "special_erfc", |x| x.erfc());
    unary_fo!(t, "special_digamma", |x| x.digamma());
    unary_fo!(t, "special_psi", |x| x.digamma());
    unary_fo!(t, "special_gammaln", |x| x.lgamma());
    unary_fo!(t, "special_expm1", |x| x.expm1());
    unary_fo!(t, "special_exp2", |x| x.exp2());
    unary_fo!(t, "special_log1p", |x| x.log1p());
    unary_fo!(t, "special_expit", |x| x.sigmoid());
    unary_fo!(t, "special_sinc", |x| x.sinc());
    for name in ["aten::polygamma", "aten::special_polygamma"] {
        t.insert(name, |c| ok(c.tensor(1)?.polygamma(c.int(0)?)));
    }
    for name in ["aten::polygamma.out", "aten::special_polygamma.out"] {
        t.insert(name, |c| {
            let r = c.tensor(1)?.polygamma(c.int(0)?).map_err(core_err)?;
            c.write_into(2, r)
        });
    }
    t.insert("aten::polygamma_", |c| {
        check_no_internal_overlap(c, 0)?;
        let r = c.tensor(0)?.polygamma(c.int(1)?).map_err(core_err)?;
        c.write_into(0, r)
    });
    t.insert("aten::log_normal_", log_normal_);
    t.insert("aten::frexp.Tensor", |c| {
        let (m, e) = c.tensor(0)?.frexp().map_err(core_err)?;
        Ok(Out::Tensors(vec![m, e]))
    });
    t.insert("aten::frexp.Tensor_out", |c| {
        let (x, mo, eo) = (c.tensor(0)?, c.tensor(1)?, c.tensor(2)?);
        if x.dtype().is_float() && mo.dtype() != x.dtype() {
            return Err(PyRuntimeError::new_err(format!(
                "torch.frexp() expects mantissa to have dtype {} but got {}",
                type_meta_name(x.dtype()),
                type_meta_name(mo.dtype())
            )));
        }
        if x.dtype().is_float() && eo.dtype() != DType::I32 {
            return Err(PyRuntimeError::new_err(format!(
                "torch.frexp() expects exponent to have int dtype but got {}",
                type_meta_name(eo.dtype())
            )));
        }
        let (m, e) = x.frexp().map_err(core_err)?;
        c.write_into(1, m)?;
        c.write_into(2, e)?;
        Ok(Out::Args(vec![1, 2]))
    });
    unary_fo!(t, "angle", |x| x.angle());
    unary_fo!(t, "signbit", |x| x.signbit());
    unary_fo!(t, "isposinf", |x| x.isposinf());
    unary_fo!(t, "isneginf", |x| x.isneginf());
    t.insert("aten::isreal", |c| ok(c.tensor(0)?.isreal()));
    t.insert("aten::positive", |c| {
        let x = c.tensor(0)?;
        if x.dtype() == DType::Bool {
            return Err(core_err(torchnative_core::Error::UnsupportedDType {
                op: "positive",
                dtype: DType::Bool,
            }));
        }
        Ok(Out::Arg(0))
    });
    // Real tensors: conj_physical is the identity.
    t.insert("aten::conj_physical", |_| Ok(Out::Arg(0)));
    t.insert("aten::conj_physical_", |_| Ok(Out::Arg(0)));
    t.insert("aten::conj_physical.out", |c| {
        // A copy: `out` must never become a view of the input.
        let r = c
            .tensor(0)?
            .clone_with_format(torchnative_core::tensor::MemoryFormat::Preserve)
            .map_err(core_err)?;
        c.write_into(1, r)
    });
    t.insert("aten::logit", |c| ok(c.tensor(0)?.logit(opt_float(c, 1)?)));
    t.insert("aten::logit_", |c| {
        check_no_internal_overlap(c, 0)?;
        let r = c.tensor(0)?.logit(opt_float(c, 1)?).map_err(core_err)?;
        c.write_into(0, r)
    });
    t.insert("aten::logit.out", |c| {
        let r = c.tensor(0)?.logit(opt_float(c, 1)?).map_err(core_err)?;
        c.write_into(2, r)
    });
    fn nan_to_num(c: &Ctx<'_, '_>) -> PyResult<Tensor> {
        c.tensor(0)?
            .nan_to_num(opt_float(c, 1)?, opt_float(c, 2)?, opt_float(c, 3)?)
            .map_err(core_err)
    }
    t.insert("aten::nan_to_num", |c| nan_to_num(c).map(Out::Tensor));
    t.insert("aten::nan_to_num_", |c| {
        if !c.tensor(0)?.dtype().is_float() {
            return Ok(Out::Arg(0));
        }
        check_no_internal_overlap(c, 0)?;
        let r = nan_to_num(c)?;
        c.write_into(0, r)
    });
    t.insert("aten::nan_to_num.out", |c| {
        let r = nan_to_num(c)?;
        c.write_into(4, r)
    });
    t.insert("aten::round.decimals", |c| {
        ok(c.tensor(0)?.round_decimals(c.int(1)?))
    });
    t.insert("aten::round_.decimals", |c| {
        check_no_internal_overlap(c, 0)?;
        let r = c.tensor(0)?.round_decimals(c.int(1)?).map_err(core_err)?;
        c.write_into(0, r)
    });
    t.insert("aten::round.decimals_out", |c| {
        let r = c.tensor(0)?.round_decimals(c.int(1)?).map_err(core_err)?;
        c.write_into(2, r)
    });
    t.insert("aten::isnan", |c| ok(c.tensor(0)?.isnan()));
    t.insert("aten::isinf", |c| ok(c.tensor(0)?.isinf()));
    t.insert("aten::isfinite", |c| {
        let x = c.tensor(0)?;
        let bad = x
            .isnan()
            .and_then(|n| n.logical_or(&x.isinf()?))
            .map_err(core_err)?;
        ok(bad.logical_not())
    });
    t.insert("aten::gelu", |c| {
        let approx = match c.str(1)?.as_str() {
            "none" => GeluApproximate::None,
            "tanh" => GeluApproximate::Tanh,
            other => {
                return Err(PyRuntimeError::new_err(format!(
                    "approximate argument must be either none or tanh, not '{other}'"
                )))
            }
        };
        ok(c.tensor(0)?.gelu(approx))
    });

    alpha_forms!(t, "add", |a, b, alpha| with_alpha(a, b, alpha, false));
    alpha_forms!(t, "sub", |a, b, alpha| with_alpha(a, b, alpha, true));
    t.insert("aten::rsub.Tensor", |c| {
        ok(with_alpha(&c.tensor(1)?, &c.tensor(0)?, c.scalar(2)?, true))
    });
    t.insert("aten::rsub.Scalar", |c| {
        ok(with_alpha(
            &Tensor::wrap_scalar(c.scalar(1)?),
            &c.tensor(0)?,
            c.scalar(2)?,
            true,
        ))
    });
    binary!(t, "mul", |a, b| a.mul(b));
    binary!(t, "div", |a, b| a.div(b));
    t.insert("aten::mul.out", |c| {
        let r = c.tensor(0)?.mul(&c.tensor(1)?).map_err(core_err)?;
        c.write_into(2, r)
    });
    t.insert("aten::div.out", |c| {
        let r = c.tensor(0)?.div(&c.tensor(1)?).map_err(core_err)?;
        c.write_into(2, r)
    });
    binary!(t, "remainder", |a, b| a.remainder(b));
    binary!(t, "fmod", |a, b| a.fmod(b));
    binary!(t, "bitwise_and", |a, b| a.bitwise_and(b));
    binary!(t, "bitwise_or", |a, b| a.bitwise_or(b));
    binary!(t, "bitwise_xor", |a, b| a.bitwise_xor(b));
    binary!(t, "eq", |a, b| a.eq(b));
    binary!(t, "ne", |a, b| a.ne(b));
    binary!(t, "lt", |a, b| a.lt(b));
    binary!(t, "le", |a, b| a.le(b));
    binary!(t, "gt", |a, b| a.gt(b));
    binary!(t, "ge", |a, b| a.ge(b));
    // upstream's spelled-out aliases
    binary!(t, "not_equal", |a, b| a.ne(b));
    binary!(t, "less", |a, b| a.lt(b));
    binary!(t, "less_equal", |a, b| a.le(b));
    binary!(t, "greater", |a, b| a.gt(b));
    binary!(t, "greater_equal", |a, b| a.ge(b));
    t.insert("aten::pow.Tensor_Tensor", |c| {
        ok(c.tensor(0)?.pow(&c.tensor(1)?))
    });
    t.insert("aten::pow.Tensor_Scalar", |c| {
        ok(c.tensor(0)?.pow(c.scalar(1)?))
    });
    t.insert("aten::pow.Scalar", |c| {
        ok(Tensor::wrap_scalar(c.scalar(0)?).pow(&c.tensor(1)?))
    });
    t.insert("aten::maximum", |c| ok(c.tensor(0)?.maximum(&c.tensor(1)?)));
    t.insert("aten::minimum", |c| ok(c.tensor(0)?.minimum(&c.tensor(1)?)));
    t.insert("aten::atan2", |c| ok(c.tensor(0)?.atan2(&c.tensor(1)?)));
    t.insert("aten::logical_and", |c| {
        ok(c.tensor(0)?.logical_and(&c.tensor(1)?))
    });
    t.insert("aten::logical_or", |c| {
        ok(c.tensor(0)?.logical_or(&c.tensor(1)?))
    });
    t.insert("aten::logical_xor", |c| {
        ok(c.tensor(0)?.logical_xor(&c.tensor(1)?))
    });
    // prelu's kernel (upstream's body reshapes the weight to broadcast, then calls it)
    t.insert("aten::_prelu_kernel", |c| {
        let (x, w) = (c.tensor(0)?, c.tensor(1)?);
        let scaled = w.mul(&x).map_err(core_err)?;
        let positive = x.gt(Scalar::Int(0)).map_err(core_err)?;
        ok(torchnative_core::where_(&positive, &x, &scaled))
    });
    t.insert("aten::where.self", |c| {
        ok(torchnative_core::where_(
            &c.tensor(0)?,
            &c.tensor(1)?,
            &c.tensor(2)?,
        ))
    });
    t.insert("aten::clamp", |c| {
        ok(c.tensor(0)?
            .clamp_scalar(c.opt_scalar(1)?, c.opt_scalar(2)?))
    });
    t.insert("aten::clamp.Tensor", |c| {
        ok(c.tensor(0)?
            .clamp(c.opt_tensor(1)?.as_ref(), c.opt_tensor(2)?.as_ref()))
    });
    t.insert("aten::clamp_min", |c| {
        ok(c.tensor(0)?.clamp_scalar(Some(c.scalar(1)?), None))
    });
    t.insert("aten::clamp_max", |c| {
        ok(c.tensor(0)?.clamp_scalar(None, Some(c.scalar(1)?)))
    });
    register_more(t);
    register_alpha_clamp(t);
}

/// A Tensor or Scalar argument as a tensor (scalars become wrapped numbers).
fn arg(c: &Ctx<'_, '_>, i: usize) -> PyResult<Tensor> {
    match &c.values[i] {
        Value::Tensor(_) => c.tensor(i),
        _ => Ok(Tensor::wrap_scalar(c.scalar(i)?)),
    }
}

/// Registers a binary op's functional overloads, in-place overloads (self-overlap refused
/// first) and out= overloads (`out` is argument 2), each operand a Tensor or a Scalar.
macro_rules! bin {
    ($t:ident, $f:expr; [$($fname:literal),*]; [$($iname:literal),*]; [$($oname:literal),*]) => {{
        fn f(a: &Tensor, b: &Tensor) -> torchnative_core::Result<Tensor> {
            let g: fn(&Tensor, &Tensor) -> torchnative_core::Result<Tensor> = $f;
            g(a, b)
        }
        $( $t.insert(concat!("aten::", $fname), |c| ok(f(&arg(c, 0)?, &arg(c, 1)?))); )*
        $( $t.insert(concat!("aten::", $iname), |c| {
            check_no_internal_overlap(c, 0)?;
            let r = f(&arg(c, 0)?, &arg(c, 1)?).map_err(core_err)?;
            c.write_into(0, r)
        }); )*
        $( $t.insert(concat!("aten::", $oname), |c| {
            let r = f(&arg(c, 0)?, &arg(c, 1)?).map_err(core_err)?;
            c.write_into(2, r)
        }); )*
    }};
}

fn rounding_mode(c: &Ctx<'_, '_>, i: usize) -> PyResult<RoundingMode> {
    match &c.values[i] {
        Value::None => Ok(RoundingMode::None),
        _ => match c.str(i)?.as_str() {
            "trunc" => Ok(RoundingMode::Trunc),
            "floor" => Ok(RoundingMode::Floor),
            other => Err(PyRuntimeError::new_err(format!(
                "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '{other}'"
            ))),
        },
    }
}

fn div_mode(c: &Ctx<'_, '_>) -> PyResult<Tensor> {
    arg(c, 0)?
        .div_mode(&arg(c, 1)?, rounding_mode(c, 2)?)
        .map_err(core_err)
}

fn float_power_inplace(c: &Ctx<'_, '_>) -> PyResult<Out> {
    let s = c.tensor(0)?;
    if s.dtype() != DType::F64 {
        return Err(PyRuntimeError::new_err(format!(
            "the base given to float_power_ has dtype {} but the operation's result requires dtype Double",
            scalar_type_name(s.dtype())
        )));
    }
    check_no_internal_overlap(c, 0)?;
    let r = s.float_power(&arg(c, 1)?).map_err(core_err)?;
    c.write_into(0, r)
}

fn lerp(c: &Ctx<'_, '_>) -> PyResult<Tensor> {
    c.tensor(0)?
        .lerp(&c.tensor(1)?, &arg(c, 2)?)
        .map_err(core_err)
}

/// `self + value * t1 * t2` (`div`: `t1 / t2`).
fn addc(c: &Ctx<'_, '_>, div: bool) -> PyResult<Tensor> {
    let (s, t1, t2, v) = (c.tensor(0)?, c.tensor(1)?, c.tensor(2)?, c.scalar(3)?);
    torchnative_core::ops::pointwise::addcmul_addcdiv(&s, &t1, &t2, v, div).map_err(core_err)
}

pub(crate) fn register_more(t: &mut Table) {
    bin!(t, |a, b| a.copysign(b);
        ["copysign.Tensor", "copysign.Scalar"];
        ["copysign_.Tensor", "copysign_.Scalar"];
        ["copysign.out", "copysign.Scalar_out"]);
    bin!(t, |a, b| a.floor_divide(b);
        ["floor_divide", "floor_divide.Scalar"];
        ["floor_divide_.Tensor", "floor_divide_.Scalar"];
        ["floor_divide.out"]);
    bin!(t, |a, b| a.div(b);
        ["true_divide.Tensor", "true_divide.Scalar", "divide.Tensor", "divide.Scalar"];
        ["true_divide_.Tensor", "true_divide_.Scalar", "divide_.Tensor", "divide_.Scalar",
         "div_.Tensor", "div_.Scalar"];
        ["true_divide.out", "divide.out", "div.out"]);
    for name in [
        "aten::div.Tensor_mode",
        "aten::div.Scalar_mode",
        "aten::divide.Tensor_mode",
        "aten::divide.Scalar_mode",
    ] {
        t.insert(name, |c| div_mode(c).map(Out::Tensor));
    }
    for name in [
        "aten::div_.Tensor_mode",
        "aten::div_.Scalar_mode",
        "aten::divide_.Tensor_mode",
        "aten::divide_.Scalar_mode",
    ] {
        t.insert(name, |c| {
            check_no_internal_overlap(c, 0)?;
            let r = div_mode(c)?;
            c.write_into(0, r)
        });
    }
    for name in ["aten::div.out_mode", "aten::divide.out_mode"] {
        t.insert(name, |c| {
            let r = div_mode(c)?;
            c.write_into(3, r)
        });
    }
    bin!(t, |a, b| a.float_power(b);
        ["float_power.Tensor_Tensor", "float_power.Scalar", "float_power.Tensor_Scalar"];
        [];
        ["float_power.Tensor_Tensor_out", "float_power.Scalar_out", "float_power.Tensor_Scalar_out"]);
    t.insert("aten::float_power_.Scalar", float_power_inplace);
    t.insert("aten::float_power_.Tensor", float_power_inplace);
    bin!(t, |a, b| a.fmax(b); ["fmax"]; []; ["fmax.out"]);
    bin!(t, |a, b| a.fmin(b); ["fmin"]; []; ["fmin.out"]);
    bin!(t, |a, b| a.gcd(b); ["gcd"]; ["gcd_"]; ["gcd.out"]);
    bin!(t, |a, b| a.lcm(b); ["lcm"]; ["lcm_"]; ["lcm.out"]);
    bin!(t, |a, b| a.heaviside(b); ["heaviside"]; ["heaviside_"]; ["heaviside.out"]);
    bin!(t, |a, b| a.hypot(b); ["hypot"]; ["hypot_"]; ["hypot.out"]);
    {
        use torchnative_core::ops::special::Polynomial as P;
        bin!(t, |a, b| a.special_polynomial(P::ChebyshevT, "special_chebyshev_polynomial_t", b);
            ["special_chebyshev_polynomial_t", "special_chebyshev_polynomial_t.x_scalar",
             "special_chebyshev_polynomial_t.n_scalar"];
            [];
            ["special_chebyshev_polynomial_t.out", "special_chebyshev_polynomial_t.x_scalar_out",
             "special_chebyshev_polynomial_t.n_scalar_out"]);
        bin!(t, |a, b| a.special_polynomial(P::ChebyshevU, "special_chebyshev_polynomial_u", b);
            ["special_chebyshev_polynomial_u", "special_chebyshev_polynomial_u.x_scalar",
             "special_chebyshev_polynomial_u.n_scalar"];
            [];
            ["special_chebyshev_polynomial_u.out", "special_chebyshev_polynomial_u.x_scalar_out",
             "special_chebyshev_polynomial_u.n_scalar_out"]);
        bin!(t, |a, b| a.special_polynomial(P::HermiteH, "special_hermite_polynomial_h", b);
            ["special_hermite_polynomial_h", "special_hermite_polynomial_h.x_scalar",
             "special_hermite_polynomial_h.n_scalar"];
            [];
            ["special_hermite_polynomial_h.out", "special_hermite_polynomial_h.x_scalar_out",
             "special_hermite_polynomial_h.n_scalar_out"]);
        bin!(t, |a, b| a.special_polynomial(P::HermiteHe, "special_hermite_polynomial_he", b);
            ["special_hermite_polynomial_he", "special_hermite_polynomial_he.x_scalar",
             "special_hermite_polynomial_he.n_scalar"];
            [];
            ["special_hermite_polynomial_he.out", "special_hermite_polynomial_he.x_scalar_out",
             "special_hermite_polynomial_he.n_scalar_out"]);
        bin!(t, |a, b| a.special_polynomial(P::LaguerreL, "special_laguerre_polynomial_l", b);
            ["special_laguerre_polynomial_l", "special_laguerre_polynomial_l.x_scalar",
             "special_laguerre_polynomial_l.n_scalar"];
            [];
            ["special_laguerre_polynomial_l.out", "special_laguerre_polynomial_l.x_scalar_out",
             "special_laguerre_polynomial_l.n_scalar_out"]);
        bin!(t, |a, b| a.special_polynomial(P::LegendreP, "special_legendre_polynomial_p", b);
            ["special_legendre_polynomial_p", "special_legendre_polynomial_p.x_scalar",
             "special_legendre_polynomial_p.n_scalar"];
            [];
            ["special_legendre_polynomial_p.out", "special_legendre_polynomial_p.x_scalar_out",
             "special_legendre_polynomial_p.n_scalar_out"]);
    }
    bin!(t, |a, b| a.special_polynomial(torchnative_core::ops::special::Polynomial::ChebyshevV, "special_chebyshev_polynomial_v", b);
        ["special_chebyshev_polynomial_v", "special_chebyshev_polynomial_v.x_scalar", "special_chebyshev_polynomial_v.n_scalar"];
        [];
        ["special_chebyshev_polynomial_v.out", "special_chebyshev_polynomial_v.x_scalar_out", "special_chebyshev_polynomial_v.n_scalar_out"]);
    bin!(t, |a, b| a.special_polynomial(torchnative_core::ops::special::Polynomial::ChebyshevW, "special_chebyshev_polynomial_w", b);
        ["special_chebyshev_polynomial_w", "special_chebyshev_polynomial_w.x_scalar", "special_chebyshev_polynomial_w.n_scalar"];
        [];
        ["special_chebyshev_polynomial_w.out", "special_chebyshev_polynomial_w.x_scalar_out", "special_chebyshev_polynomial_w.n_scalar_out"]);
    bin!(t, |a, b| a.special_polynomial(torchnative_core::ops::special::Polynomial::ShiftedT, "special_shifted_chebyshev_polynomial_t", b);
        ["special_shifted_chebyshev_polynomial_t", "special_shifted_chebyshev_polynomial_t.x_scalar", "special_shifted_chebyshev_polynomial_t.n_scalar"];
        [];
        ["special_shifted_chebyshev_polynomial_t.out", "special_shifted_chebyshev_polynomial_t.x_scalar_out", "special_shifted_chebyshev_polynomial_t.n_scalar_out"]);
    bin!(t, |a, b| a.special_polynomial(torchnative_core::ops::special::Polynomial::ShiftedU, "special_shifted_chebyshev_polynomial_u", b);
        ["special_shifted_chebyshev_polynomial_u", "special_shifted_chebyshev_polynomial_u.x_scalar", "special_shifted_chebyshev_polynomial_u.n_scalar"];
        [];
        ["special_shifted_chebyshev_polynomial_u.out", "special_shifted_chebyshev_polynomial_u.x_scalar_out", "special_shifted_chebyshev_polynomial_u.n_scalar_out"]);
    bin!(t, |a, b| a.special_polynomial(torchnative_core::ops::special::Polynomial::ShiftedV, "special_shifted_chebyshev_polynomial_v", b);
        ["special_shifted_chebyshev_polynomial_v", "special_shifted_chebyshev_polynomial_v.x_scalar", "special_shifted_chebyshev_polynomial_v.n_scalar"];
        [];
        ["special_shifted_chebyshev_polynomial_v.out", "special_shifted_chebyshev_polynomial_v.x_scalar_out", "special_shifted_chebyshev_polynomial_v.n_scalar_out"]);
    bin!(t, |a, b| a.special_polynomial(torchnative_core::ops::special::Polynomial::ShiftedW, "special_shifted_chebyshev_polynomial_w", b);
        ["special_shifted_chebyshev_polynomial_w", "special_shifted_chebyshev_polynomial_w.x_scalar", "special_shifted_chebyshev_polynomial_w.n_scalar"];
        [];
        ["special_shifted_chebyshev_polynomial_w.out", "special_shifted_chebyshev_polynomial_w.x_scalar_out", "special_shifted_chebyshev_polynomial_w.n_scalar_out"]);
    bin!(t, |a, b| a.zeta(b);
        ["special_zeta", "special_zeta.self_scalar", "special_zeta.other_scalar"];
        [];
        ["special_zeta.out", "special_zeta.self_scalar_out", "special_zeta.other_scalar_out"]);
    bin!(t, |a, b| a.igamma(b); ["igamma"]; ["igamma_"]; ["igamma.out"]);
    bin!(t, |a, b| a.igammac(b); ["igammac"]; ["igammac_"]; ["igammac.out"]);
    bin!(t, |a, b| a.logaddexp(b); ["logaddexp"]; []; ["logaddexp.out"]);
    bin!(t, |a, b| a.logaddexp2(b); ["logaddexp2"]; []; ["logaddexp2.out"]);
    bin!(t, |a, b| a.nextafter(b); ["nextafter"]; ["nextafter_"]; ["nextafter.out"]);
    bin!(t, |a, b| a.xlogy(b);
        ["xlogy.Tensor", "xlogy.Scalar_Self", "xlogy.Scalar_Other"];
        ["xlogy_.Tensor", "xlogy_.Scalar_Other"];
        ["xlogy.OutTensor", "xlogy.OutScalar_Self", "xlogy.OutScalar_Other"]);
    bin!(t, |a, b| a.ldexp(b); ["ldexp.Tensor"]; ["ldexp_"]; ["ldexp.out"]);
    bin!(t, |a, b| a.bitwise_left_shift(b);
        ["bitwise_left_shift.Tensor", "bitwise_left_shift.Tensor_Scalar",
         "bitwise_left_shift.Scalar_Tensor", "__lshift__.Tensor", "__lshift__.Scalar"];
        ["bitwise_left_shift_.Tensor", "bitwise_left_shift_.Tensor_Scalar",
         "__ilshift__.Tensor", "__ilshift__.Scalar"];
        ["bitwise_left_shift.Tensor_out", "bitwise_left_shift.Tensor_Scalar_out",
         "bitwise_left_shift.Scalar_Tensor_out"]);
    bin!(t, |a, b| a.bitwise_right_shift(b);
        ["bitwise_right_shift.Tensor", "bitwise_right_shift.Tensor_Scalar",
         "bitwise_right_shift.Scalar_Tensor", "__rshift__.Tensor", "__rshift__.Scalar"];
        ["bitwise_right_shift_.Tensor", "bitwise_right_shift_.Tensor_Scalar",
         "__irshift__.Tensor", "__irshift__.Scalar"];
        ["bitwise_right_shift.Tensor_out", "bitwise_right_shift.Tensor_Scalar_out",
         "bitwise_right_shift.Scalar_Tensor_out"]);
    bin!(t, |a, b| a.atan2(b); []; ["atan2_"]; ["atan2.out", "arctan2.out"]);
    bin!(t, |a, b| a.atan2(b); ["arctan2"]; ["arctan2_"]; []);
    bin!(t, |a, b| a.maximum(b); []; []; ["maximum.out"]);
    bin!(t, |a, b| a.minimum(b); []; []; ["minimum.out"]);
    bin!(t, |a, b| a.logical_and(b); []; ["logical_and_"]; ["logical_and.out"]);
    bin!(t, |a, b| a.logical_or(b); []; ["logical_or_"]; ["logical_or.out"]);
    bin!(t, |a, b| a.logical_xor(b); []; ["logical_xor_"]; ["logical_xor.out"]);
    bin!(t, |a, b| a.remainder(b); ["remainder.Scalar_Tensor"]; []; ["remainder.Scalar_Tensor_out"]);
    bin!(t, |a, b| a.bitwise_and(b); ["bitwise_and.Scalar_Tensor"]; []; ["bitwise_and.Scalar_Tensor_out"]);
    bin!(t, |a, b| a.bitwise_or(b); ["bitwise_or.Scalar_Tensor"]; []; ["bitwise_or.Scalar_Tensor_out"]);
    bin!(t, |a, b| a.bitwise_xor(b); ["bitwise_xor.Scalar_Tensor"]; []; ["bitwise_xor.Scalar_Tensor_out"]);
    bin!(t, |a, b| a.pow(b); []; ["pow_.Scalar", "pow_.Tensor"]; ["pow.Tensor_Tensor_out", "pow.Tensor_Scalar_out", "pow.Scalar_out"]);
    t.insert("aten::lerp.Scalar", |c| lerp(c).map(Out::Tensor));
    t.insert("aten::lerp.Tensor", |c| lerp(c).map(Out::Tensor));
    for name in ["aten::lerp_.Scalar", "aten::lerp_.Tensor"] {
        t.insert(name, |c| {
            check_no_internal_overlap(c, 0)?;
            let r = lerp(c)?;
            c.write_into(0, r)
        });
    }
    for name in ["aten::lerp.Scalar_out", "aten::lerp.Tensor_out"] {
        t.insert(name, |c| {
            let r = lerp(c)?;
            c.write_into(3, r)
        });
    }
    t.insert("aten::addcmul", |c| addc(c, false).map(Out::Tensor));
    t.insert("aten::addcdiv", |c| addc(c, true).map(Out::Tensor));
    t.insert("aten::addcmul_", |c| {
        check_no_internal_overlap(c, 0)?;
        let r = addc(c, false)?;
        c.write_into(0, r)
    });
    t.insert("aten::addcdiv_", |c| {
        check_no_internal_overlap(c, 0)?;
        let r = addc(c, true)?;
        c.write_into(0, r)
    });
    t.insert("aten::addcmul.out", |c| {
        let r = addc(c, false)?;
        c.write_into(4, r)
    });
    t.insert("aten::addcdiv.out", |c| {
        let r = addc(c, true)?;
        c.write_into(4, r)
    });
}

fn add_sub(c: &Ctx<'_, '_>, sub: bool) -> PyResult<Tensor> {
    torchnative_core::ops::pointwise::add_alpha(&arg(c, 0)?, &arg(c, 1)?, c.scalar(2)?, sub)
        .map_err(core_err)
}

fn clamp_s(c: &Ctx<'_, '_>) -> PyResult<Tensor> {
    torchnative_core::ops::pointwise::clamp_scalars(
        &c.tensor(0)?,
        c.opt_scalar(1)?,
        c.opt_scalar(2)?,
    )
    .map_err(core_err)
}

fn clamp_t(c: &Ctx<'_, '_>) -> PyResult<Tensor> {
    let (lo, hi) = (c.opt_tensor(1)?, c.opt_tensor(2)?);
    torchnative_core::ops::pointwise::clamp_tensors(&c.tensor(0)?, lo.as_ref(), hi.as_ref())
        .map_err(core_err)
}

fn clamp_one(c: &Ctx<'_, '_>, lower: bool) -> PyResult<Tensor> {
    let x = c.tensor(0)?;
    let r = match &c.values[1] {
        Value::Tensor(_) => {
            let b = c.tensor(1)?;
            let (lo, hi) = if lower {
                (Some(&b), None)
            } else {
                (None, Some(&b))
            };
            torchnative_core::ops::pointwise::clamp_tensors(&x, lo, hi)
        }
        _ => {
            let b = c.scalar(1)?;
            let (lo, hi) = if lower {
                (Some(b), None)
            } else {
                (None, Some(b))
            };
            torchnative_core::ops::pointwise::clamp_scalars(&x, lo, hi)
        }
    };
    r.map_err(core_err)
}

fn where_args(c: &Ctx<'_, '_>) -> PyResult<Tensor> {
    torchnative_core::where_(&c.tensor(0)?, &arg(c, 1)?, &arg(c, 2)?).map_err(core_err)
}

pub(crate) fn register_alpha_clamp(t: &mut Table) {
    for (name, sub) in [
        ("aten::add.Tensor", false),
        ("aten::add.Scalar", false),
        ("aten::sub.Tensor", true),
        ("aten::sub.Scalar", true),
        ("aten::subtract.Tensor", true),
        ("aten::subtract.Scalar", true),
    ] {
        let k: Kernel = if sub {
            |c| add_sub(c, true).map(Out::Tensor)
        } else {
            |c| add_sub(c, false).map(Out::Tensor)
        };
        t.insert(name, k);
    }
    for (name, sub) in [
        ("aten::add_.Tensor", false),
        ("aten::add_.Scalar", false),
        ("aten::sub_.Tensor", true),
        ("aten::sub_.Scalar", true),
        ("aten::subtract_.Tensor", true),
        ("aten::subtract_.Scalar", true),
    ] {
        let k: Kernel = if sub {
            |c| {
                // sub refuses bool operands before TensorIterator's overlap check.
                let r = add_sub(c, true)?;
                c.write_into(0, r)
            }
        } else {
            |c| {
                check_no_internal_overlap(c, 0)?;
                let r = add_sub(c, false)?;
                c.write_into(0, r)
            }
        };
        t.insert(name, k);
    }
    t.insert("aten::add.out", |c| {
        let r = add_sub(c, false)?;
        c.write_into(3, r)
    });
    t.insert("aten::sub.out", |c| {
        let r = add_sub(c, true)?;
        c.write_into(3, r)
    });
    t.insert("aten::subtract.out", |c| {
        let r = add_sub(c, true)?;
        c.write_into(3, r)
    });
    // rsub(self, other, alpha) = other - alpha * self.
    t.insert("aten::rsub.Tensor", |c| {
        torchnative_core::ops::pointwise::add_alpha(&arg(c, 1)?, &arg(c, 0)?, c.scalar(2)?, true)
            .map_err(core_err)
            .map(Out::Tensor)
    });
    t.insert("aten::rsub.Scalar", |c| {
        torchnative_core::ops::pointwise::add_alpha(&arg(c, 1)?, &arg(c, 0)?, c.scalar(2)?, true)
            .map_err(core_err)
            .map(Out::Tensor)
    });

    for name in ["aten::clamp", "aten::clip"] {
        t.insert(name, |c| clamp_s(c).map(Out::Tensor));
    }
    for name in ["aten::clamp.Tensor", "aten::clip.Tensor"] {
        t.insert(name, |c| clamp_t(c).map(Out::Tensor));
    }
    for name in ["aten::clamp_", "aten::clip_"] {
        t.insert(name, |c| {
            check_no_internal_overlap(c, 0)?;
            let r = clamp_s(c)?;
            c.write_into(0, r)
        });
    }
    for name in ["aten::clamp_.Tensor", "aten::clip_.Tensor"] {
        t.insert(name, |c| {
            check_no_internal_overlap(c, 0)?;
            let r = clamp_t(c)?;
            c.write_into(0, r)
        });
    }
    for name in ["aten::clamp.out", "aten::clip.out"] {
        t.insert(name, |c| {
            let r = clamp_s(c)?;
            c.write_into(3, r)
        });
    }
    for name in ["aten::clamp.Tensor_out", "aten::clip.Tensor_out"] {
        t.insert(name, |c| {
            let r = clamp_t(c)?;
            c.write_into(3, r)
        });
    }
    for name in ["aten::clamp_min", "aten::clamp_min.Tensor"] {
        t.insert(name, |c| clamp_one(c, true).map(Out::Tensor));
    }
    for name in ["aten::clamp_max", "aten::clamp_max.Tensor"] {
        t.insert(name, |c| clamp_one(c, false).map(Out::Tensor));
    }
    for name in ["aten::clamp_min_", "aten::clamp_min_.Tensor"] {
        t.insert(name, |c| {
            check_no_internal_overlap(c, 0)?;
            let r = clamp_one(c, true)?;
            c.write_into(0, r)
        });
    }
    for name in ["aten::clamp_max_", "aten::clamp_max_.Tensor"] {
        t.insert(name, |c| {
            check_no_internal_overlap(c, 0)?;
            let r = clamp_one(c, false)?;
            c.write_into(0, r)
        });
    }
    for name in ["aten::clamp_min.out", "aten::clamp_min.Tensor_out"] {
        t.insert(name, |c| {
            let r = clamp_one(c, true)?;
            c.write_into(2, r)
        });
    }
    for name in ["aten::clamp_max.out", "aten::clamp_max.Tensor_out"] {
        t.insert(name, |c| {
            let r = clamp_one(c, false)?;
            c.write_into(2, r)
        });
    }

    for name in [
        "aten::where.self",
        "aten::where.ScalarSelf",
        "aten::where.ScalarOther",
        "aten::where.Scalar",
    ] {
        t.insert(name, |c| where_args(c).map(Out::Tensor));
    }
    t.insert("aten::where.self_out", |c| {
        let r = where_args(c)?;
        c.write_into(3, r)
    });

    // In-place forms that must refuse a self-overlapping destination before anything else.
    bin!(t, |a, b| a.bitwise_and(b); []; ["bitwise_and_.Tensor", "bitwise_and_.Scalar"]; []);
    bin!(t, |a, b| a.bitwise_or(b); []; ["bitwise_or_.Tensor", "bitwise_or_.Scalar"]; []);
    bin!(t, |a, b| a.bitwise_xor(b); []; ["bitwise_xor_.Tensor", "bitwise_xor_.Scalar"]; []);
    bin!(t, |a, b| a.fmod(b); []; ["fmod_.Tensor", "fmod_.Scalar"]; []);
    bin!(t, |a, b| a.remainder(b); []; ["remainder_.Tensor", "remainder_.Scalar"]; []);
    bin!(t, |a, b| a.mul(b);
        ["multiply.Tensor", "multiply.Scalar"];
        ["mul_.Tensor", "mul_.Scalar", "multiply_.Tensor", "multiply_.Scalar"];
        ["multiply.out"]);
}
