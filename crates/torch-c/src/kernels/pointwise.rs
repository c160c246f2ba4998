//! Pointwise operators (functional, in-place and out= forms) with promotion and broadcasting.

#![allow(unused_imports)]

use super::*;

pub(crate) fn register(t: &mut Table) {
    // ----- pointwise -----
    unary!(t, "abs", |x| x.abs());
    unary!(t, "neg", |x| x.neg());
    unary!(t, "exp", |x| x.exp());
    unary!(t, "log", |x| x.log());
    unary!(t, "log1p", |x| x.log1p());
    unary!(t, "log2", |x| x.log2());
    unary!(t, "log10", |x| x.log10());
    unary!(t, "exp2", |x| x.exp2());
    unary!(t, "expm1", |x| x.expm1());
    unary!(t, "sqrt", |x| x.sqrt());
    unary!(t, "rsqrt", |x| x.rsqrt());
    unary!(t, "sin", |x| x.sin());
    unary!(t, "cos", |x| x.cos());
    unary!(t, "tan", |x| x.tan());
    unary!(t, "tanh", |x| x.tanh());
    unary!(t, "sinh", |x| x.sinh());
    unary!(t, "cosh", |x| x.cosh());
    unary!(t, "asin", |x| x.asin());
    unary!(t, "acos", |x| x.acos());
    unary!(t, "atan", |x| x.atan());
    unary!(t, "sigmoid", |x| x.sigmoid());
    unary!(t, "erf", |x| x.erf());
    unary!(t, "reciprocal", |x| x.reciprocal());
    unary!(t, "trunc", |x| x.trunc());
    unary!(t, "floor", |x| x.floor());
    unary!(t, "ceil", |x| x.ceil());
    unary!(t, "round", |x| x.round());
    unary!(t, "sign", |x| x.sign());
    unary!(t, "relu", |x| x.relu());
    unary!(t, "silu", |x| x.silu());
    unary!(t, "bitwise_not", |x| x.bitwise_not());
    unary!(t, "logical_not", |x| x.logical_not());
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

    t.insert("aten::add.Tensor", |c| {
        ok(with_alpha(
            &c.tensor(0)?,
            &c.tensor(1)?,
            c.scalar(2)?,
            false,
        ))
    });
    t.insert("aten::add.Scalar", |c| {
        ok(with_alpha(
            &c.tensor(0)?,
            &Tensor::wrap_scalar(c.scalar(1)?),
            c.scalar(2)?,
            false,
        ))
    });
    t.insert("aten::add_.Tensor", |c| {
        let r = with_alpha(&c.tensor(0)?, &c.tensor(1)?, c.scalar(2)?, false).map_err(core_err)?;
        c.write_into(0, r)
    });
    t.insert("aten::add_.Scalar", |c| {
        let r = with_alpha(
            &c.tensor(0)?,
            &Tensor::wrap_scalar(c.scalar(1)?),
            c.scalar(2)?,
            false,
        )
        .map_err(core_err)?;
        c.write_into(0, r)
    });
    t.insert("aten::add.out", |c| {
        let r = with_alpha(&c.tensor(0)?, &c.tensor(1)?, c.scalar(2)?, false).map_err(core_err)?;
        c.write_into(3, r)
    });
    t.insert("aten::sub.Tensor", |c| {
        ok(with_alpha(&c.tensor(0)?, &c.tensor(1)?, c.scalar(2)?, true))
    });
    t.insert("aten::sub.Scalar", |c| {
        ok(with_alpha(
            &c.tensor(0)?,
            &Tensor::wrap_scalar(c.scalar(1)?),
            c.scalar(2)?,
            true,
        ))
    });
    t.insert("aten::sub_.Tensor", |c| {
        let r = with_alpha(&c.tensor(0)?, &c.tensor(1)?, c.scalar(2)?, true).map_err(core_err)?;
        c.write_into(0, r)
    });
    t.insert("aten::sub_.Scalar", |c| {
        let r = with_alpha(
            &c.tensor(0)?,
            &Tensor::wrap_scalar(c.scalar(1)?),
            c.scalar(2)?,
            true,
        )
        .map_err(core_err)?;
        c.write_into(0, r)
    });
    t.insert("aten::sub.out", |c| {
        let r = with_alpha(&c.tensor(0)?, &c.tensor(1)?, c.scalar(2)?, true).map_err(core_err)?;
        c.write_into(3, r)
    });
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
}
