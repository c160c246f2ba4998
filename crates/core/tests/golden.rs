//! Golden tests against upstream PyTorch (the oracle venv, `TORCHNATIVE_ORACLE_PYTHON`).
//!
//! The test builds a JSON list of cases (op, inputs as flat values + shape + dtype + a view
//! recipe, kwargs), runs `tests/oracle/torch_ops.py` on them, runs the same cases through this
//! crate and compares: dtype and shape must match exactly; values must match exactly unless
//! the case carries a tolerance `tol`, in which case
//!     |ours - torch| <= tol * eps(result dtype) * max(1, |torch|)
//! (NaN must meet NaN, infinities must be equal). `tol` is derived from the float error of
//! the op: 0 for ops PyTorch computes exactly (integer ops, casts, indexing, comparisons, and
//! +,-,*,/ and sqrt which IEEE rounds correctly), ~2 for transcendental functions (PyTorch's
//! SLEEF kernels are within 1 ulp, ours are correctly rounded f64 results rounded again), and
//! proportional to the number of accumulated terms for reductions and matrix products.
//! When torch raises, this crate must return an error too (and vice versa).

use serde_json::{json, Value};
use std::path::PathBuf;
use torchnative_core::*;

// ---------- case construction ----------

struct Cases {
    list: Vec<Value>,
    gen: Generator,
}

/// Values exactly representable in `dtype`, in a range that suits the dtype.
fn sample_values(gen: &mut Generator, dtype: DType, n: usize) -> Vec<f64> {
    (0..n)
        .map(|_| match dtype {
            DType::Bool => (gen.next_u64() % 2) as f64,
            DType::U8 => (gen.next_u64() % 256) as f64,
            DType::I8 => (gen.next_u64() % 256) as f64 - 128.0,
            d if d.is_int() => (gen.next_u64() % 200) as f64 - 100.0,
            d => {
                let v = gen.next_normal() * 2.0;
                Tensor::from_f64s(&[v], &[1], d)
                    .unwrap()
                    .to_vec::<f64>()
                    .unwrap()[0]
            }
        })
        .collect()
}

fn fmt_value(v: f64, dtype: DType) -> String {
    if dtype.is_float() {
        if v.is_nan() {
            "nan".into()
        } else if v.is_infinite() {
            if v > 0.0 {
                "inf".into()
            } else {
                "-inf".into()
            }
        } else {
            format!("{v:?}")
        }
    } else {
        format!("{}", v as i64)
    }
}

/// An input spec from explicit values (`i64` values for integer dtypes go through strings
/// exactly).
fn input_f(values: &[f64], shape: &[usize], dtype: DType, view: Value) -> Value {
    let vals: Vec<String> = values.iter().map(|&v| fmt_value(v, dtype)).collect();
    json!({"values": vals, "shape": shape, "dtype": dtype.name(), "view": view})
}

fn input_i(values: &[i64], shape: &[usize], dtype: DType) -> Value {
    let vals: Vec<String> = values.iter().map(|v| v.to_string()).collect();
    json!({"values": vals, "shape": shape, "dtype": dtype.name(), "view": []})
}

impl Cases {
    fn rand_input(&mut self, dtype: DType, shape: &[usize], view: Value) -> Value {
        let n: usize = shape.iter().product();
        let v = sample_values(&mut self.gen, dtype, n);
        input_f(&v, shape, dtype, view)
    }
    fn add(&mut self, op: &str, inputs: Vec<Value>, kwargs: Value, tol: f64) {
        self.list
            .push(json!({"op": op, "inputs": inputs, "kwargs": kwargs, "tol": tol}));
    }
    /// A case whose result strides must also equal torch's (views, clones, casts).
    fn add_strided(&mut self, op: &str, inputs: Vec<Value>, kwargs: Value) {
        self.list.push(
            json!({"op": op, "inputs": inputs, "kwargs": kwargs, "tol": 0.0, "strides": true}),
        );
    }
}

fn sc_float(v: f64) -> Value {
    json!({"float": v})
}
fn sc_int(v: i64) -> Value {
    json!({"int": v})
}
fn sc_bool(v: bool) -> Value {
    json!({"bool": v})
}

// ---------- running cases in this crate ----------

fn parse_value(s: &str) -> f64 {
    match s {
        "nan" => f64::NAN,
        "inf" => f64::INFINITY,
        "-inf" => f64::NEG_INFINITY,
        _ => s.parse().unwrap_or_else(|_| panic!("bad value {s}")),
    }
}

fn usizes(v: &Value) -> Vec<usize> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as usize)
        .collect()
}
fn i64s(v: &Value) -> Vec<i64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_i64().unwrap())
        .collect()
}
fn dtype_of(v: &Value) -> DType {
    DType::from_name(v.as_str().unwrap()).unwrap()
}
fn scalar_of(v: &Value) -> Scalar {
    let (k, x) = v.as_object().unwrap().iter().next().unwrap();
    match k.as_str() {
        "float" => Scalar::Float(x.as_f64().unwrap()),
        "int" => Scalar::Int(x.as_i64().unwrap()),
        _ => Scalar::Bool(x.as_bool().unwrap()),
    }
}

fn build_input(spec: &Value, meta: bool) -> Result<(Tensor, Tensor)> {
    let dtype = dtype_of(&spec["dtype"]);
    let shape = usizes(&spec["shape"]);
    let strs: Vec<&str> = spec["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    let base = if dtype.is_float() {
        let v: Vec<f64> = strs.iter().map(|s| parse_value(s)).collect();
        Tensor::from_f64s(&v, &shape, dtype)?
    } else {
        let v: Vec<i64> = strs.iter().map(|s| s.parse().unwrap()).collect();
        Tensor::from_i64s(&v, &shape, dtype)?
    };
    let base = if meta {
        base.to_device(Device::Meta)?
    } else {
        base
    };
    let mut t = base.clone();
    for step in spec["view"].as_array().unwrap() {
        let s = step.as_array().unwrap();
        let name = s[0].as_str().unwrap();
        let a = |i: usize| s[i].as_i64().unwrap();
        t = match name {
            "t" => t.t()?,
            "transpose" => t.transpose(a(1), a(2))?,
            "permute" => t.permute(
                &s[1..]
                    .iter()
                    .map(|x| x.as_i64().unwrap())
                    .collect::<Vec<_>>(),
            )?,
            "slice" => t.slice(a(1), s[2].as_i64(), s[3].as_i64(), a(4))?,
            "expand" => t.expand(&i64s(&s[1]))?,
            "unsqueeze" => t.unsqueeze(a(1))?,
            _ => panic!("unknown view step {name}"),
        };
    }
    Ok((base, t))
}

fn opt_i64(kw: &Value, k: &str) -> Option<i64> {
    kw.get(k).and_then(|v| v.as_i64())
}

fn run_case(op: &str, bases: &[Tensor], xs: &[Tensor], kw: &Value) -> Result<Vec<Tensor>> {
    let x = xs.first();
    let x0 = || x.unwrap();
    let other: Option<Tensor> = match kw.get("scalar") {
        Some(s) => Some(Tensor::wrap_scalar(scalar_of(s))),
        None => xs.get(1).cloned(),
    };
    let o = || other.clone().unwrap();
    let keep = kw.get("keepdim").and_then(|v| v.as_bool()).unwrap_or(false);
    let dims = || kw.get("dims").map(i64s).unwrap_or_default();
    let dim = || kw["dim"].as_i64().unwrap();
    Ok(match op {
        "add" => vec![x0().add(o())?],
        "sub" => vec![x0().sub(o())?],
        "mul" => vec![x0().mul(o())?],
        "pow" => vec![x0().pow(o())?],
        "maximum" => vec![x0().maximum(&o())?],
        "minimum" => vec![x0().minimum(&o())?],
        "eq" => vec![x0().eq(o())?],
        "ne" => vec![x0().ne(o())?],
        "lt" => vec![x0().lt(o())?],
        "le" => vec![x0().le(o())?],
        "gt" => vec![x0().gt(o())?],
        "ge" => vec![x0().ge(o())?],
        "logical_and" => vec![x0().logical_and(&o())?],
        "logical_or" => vec![x0().logical_or(&o())?],
        "logical_xor" => vec![x0().logical_xor(&o())?],
        "div" => {
            let mode = match kw.get("rounding_mode").and_then(|v| v.as_str()) {
                Some("trunc") => RoundingMode::Trunc,
                Some("floor") => RoundingMode::Floor,
                _ => RoundingMode::None,
            };
            vec![x0().div_mode(o(), mode)?]
        }
        "neg" => vec![x0().neg()?],
        "abs" => vec![x0().abs()?],
        "exp" => vec![x0().exp()?],
        "log" => vec![x0().log()?],
        "log1p" => vec![x0().log1p()?],
        "sqrt" => vec![x0().sqrt()?],
        "rsqrt" => vec![x0().rsqrt()?],
        "sin" => vec![x0().sin()?],
        "cos" => vec![x0().cos()?],
        "tanh" => vec![x0().tanh()?],
        "sigmoid" => vec![x0().sigmoid()?],
        "silu" => vec![x0().silu()?],
        "relu" => vec![x0().relu()?],
        "floor" => vec![x0().floor()?],
        "erf" => vec![x0().erf()?],
        "reciprocal" => vec![x0().reciprocal()?],
        "log2" => vec![x0().log2()?],
        "log10" => vec![x0().log10()?],
        "exp2" => vec![x0().exp2()?],
        "expm1" => vec![x0().expm1()?],
        "tan" => vec![x0().tan()?],
        "atan" => vec![x0().atan()?],
        "asin" => vec![x0().asin()?],
        "acos" => vec![x0().acos()?],
        "sinh" => vec![x0().sinh()?],
        "cosh" => vec![x0().cosh()?],
        "trunc" => vec![x0().trunc()?],
        "sign" => vec![x0().sign()?],
        "bitwise_not" => vec![x0().bitwise_not()?],
        "remainder" => vec![x0().remainder(o())?],
        "fmod" => vec![x0().fmod(o())?],
        "atan2" => vec![x0().atan2(&o())?],
        "bitwise_and" => vec![x0().bitwise_and(o())?],
        "bitwise_or" => vec![x0().bitwise_or(o())?],
        "bitwise_xor" => vec![x0().bitwise_xor(o())?],
        "ceil" => vec![x0().ceil()?],
        "round" => vec![x0().round()?],
        "isnan" => vec![x0().isnan()?],
        "isinf" => vec![x0().isinf()?],
        "logical_not" => vec![x0().logical_not()?],
        "contiguous" => vec![x0().contiguous()?],
        "clone" => vec![x0().deep_clone()?],
        "gelu" => {
            let a = if kw["approximate"] == "tanh" {
                GeluApproximate::Tanh
            } else {
                GeluApproximate::None
            };
            vec![x0().gelu(a)?]
        }
        "clamp" => {
            vec![x0().clamp_scalar(kw.get("min").map(scalar_of), kw.get("max").map(scalar_of))?]
        }
        "where" => vec![where_(&xs[0], &xs[1], &xs[2])?],
        "clamp_t" => vec![xs[0].clamp(Some(&xs[1]), Some(&xs[2]))?],
        // A Python scalar on the left is a wrapped number as the first operand.
        "rsub" => vec![o().sub(x0())?],
        "rdiv" => vec![o().div(x0())?],
        "to" => vec![x0().to_dtype(dtype_of(&kw["dtype"]))?],
        "result_type" => vec![empty(&[0], result_type_of(&[x0(), &o()])?)?],
        "sum" => vec![x0().sum(&dims(), keep)?],
        "prod" => vec![x0().prod(&dims(), keep)?],
        "mean" => vec![x0().mean(&dims(), keep)?],
        "logsumexp" => vec![x0().logsumexp(&dims(), keep)?],
        "amax" => vec![x0().amax(&dims(), keep)?],
        "amin" => vec![x0().amin(&dims(), keep)?],
        "any" => vec![x0().any(&dims(), keep)?],
        "all" => vec![x0().all(&dims(), keep)?],
        "var" | "std" => {
            let opts = VarOptions {
                correction: kw["correction"].as_f64().unwrap(),
                keepdim: keep,
            };
            vec![if op == "var" {
                x0().var(&dims(), opts)?
            } else {
                x0().std(&dims(), opts)?
            }]
        }
        "max_dim" => {
            let (v, i) = x0().max_dim(dim(), keep)?;
            vec![v, i]
        }
        "min_dim" => {
            let (v, i) = x0().min_dim(dim(), keep)?;
            vec![v, i]
        }
        "max" => vec![x0().max()?],
        "min" => vec![x0().min()?],
        "argmax" => vec![x0().argmax(opt_i64(kw, "dim"), keep)?],
        "argmin" => vec![x0().argmin(opt_i64(kw, "dim"), keep)?],
        "cumsum" => vec![x0().cumsum(dim())?],
        "softmax" => vec![x0().softmax(dim())?],
        "log_softmax" => vec![x0().log_softmax(dim())?],
        "matmul" => vec![xs[0].matmul(&xs[1])?],
        "mm" => vec![xs[0].mm(&xs[1])?],
        "bmm" => vec![xs[0].bmm(&xs[1])?],
        "linear" => vec![linear(&xs[0], &xs[1], xs.get(2))?],
        "addmm" | "baddbmm" => {
            let scale = AddmmScale {
                beta: Scalar::Float(kw["beta"].as_f64().unwrap()),
                alpha: Scalar::Float(kw["alpha"].as_f64().unwrap()),
            };
            let f = if op == "addmm" { addmm } else { baddbmm };
            vec![f(&xs[0], &xs[1], &xs[2], scale)?]
        }
        "index_select" => vec![x0().index_select(dim(), &xs[1])?],
        "gather" => vec![x0().gather(dim(), &xs[1])?],
        "scatter" => match kw.get("value") {
            Some(v) => vec![x0().scatter_value(dim(), &xs[1], scalar_of(v))?],
            None => vec![x0().scatter(dim(), &xs[1], &xs[2])?],
        },
        "scatter_add" => vec![x0().scatter_add(dim(), &xs[1], &xs[2])?],
        "embedding" => vec![embedding(&xs[0], &xs[1])?],
        "masked_select" => vec![x0().masked_select(&xs[1])?],
        "cat" => vec![cat(&xs.iter().collect::<Vec<_>>(), dim())?],
        "stack" => vec![stack(&xs.iter().collect::<Vec<_>>(), dim())?],
        "split" => x0().split(kw["size"].as_u64().unwrap() as usize, dim())?,
        "chunk" => x0().chunk(kw["chunks"].as_u64().unwrap() as usize, dim())?,
        "tril" => vec![x0().tril(kw["diagonal"].as_i64().unwrap())?],
        "triu" => vec![x0().triu(kw["diagonal"].as_i64().unwrap())?],
        "topk" => {
            let (v, i) = x0().topk(
                kw["k"].as_u64().unwrap() as usize,
                dim(),
                kw["largest"].as_bool().unwrap(),
            )?;
            vec![v, i]
        }
        "sort" => {
            let (v, i) = x0().sort(
                dim(),
                SortOptions {
                    descending: kw["descending"].as_bool().unwrap(),
                },
            )?;
            vec![v, i]
        }
        "argsort" => vec![x0().argsort(
            dim(),
            SortOptions {
                descending: kw["descending"].as_bool().unwrap(),
            },
        )?],
        "repeat" => vec![x0().repeat(&usizes(&kw["repeats"]))?],
        "repeat_interleave" => {
            if xs.len() > 1 {
                vec![x0().repeat_interleave_tensor(&xs[1], opt_i64(kw, "dim"))?]
            } else {
                vec![x0().repeat_interleave(
                    kw["repeats"].as_u64().unwrap() as usize,
                    opt_i64(kw, "dim"),
                )?]
            }
        }
        "flip" => vec![x0().flip(&dims())?],
        "roll" => vec![x0().roll(&i64s(&kw["shifts"]), &dims())?],
        "pad" => vec![x0().pad(&i64s(&kw["pads"]), scalar_of(&kw["value"]))?],
        "index" => vec![x0().index(&xs[1..])?],
        "nonzero" => vec![nonzero(x0())?],
        "arange" => vec![arange(
            scalar_of(&kw["start"]),
            scalar_of(&kw["end"]),
            scalar_of(&kw["step"]),
            kw.get("dtype").map(dtype_of),
        )?],
        "linspace" => vec![linspace(
            kw["start"].as_f64().unwrap(),
            kw["end"].as_f64().unwrap(),
            kw["steps"].as_u64().unwrap() as usize,
            Some(dtype_of(&kw["dtype"])),
        )?],
        "eye" => vec![eye(
            kw["n"].as_u64().unwrap() as usize,
            kw["m"].as_u64().map(|m| m as usize),
            dtype_of(&kw["dtype"]),
        )?],
        "full" => vec![full(
            &usizes(&kw["shape"]),
            scalar_of(&kw["value"]),
            kw.get("dtype").map(dtype_of),
        )?],
        "view" => vec![x0().view(&i64s(&kw["shape"]))?],
        "reshape" => vec![x0().reshape(&i64s(&kw["shape"]))?],
        "diagonal" => vec![x0().diagonal(
            kw["offset"].as_i64().unwrap(),
            kw["dim1"].as_i64().unwrap(),
            kw["dim2"].as_i64().unwrap(),
        )?],
        "as_strided" => vec![x0().as_strided(
            &usizes(&kw["size"]),
            &usizes(&kw["stride"]),
            kw["offset"].as_u64().unwrap() as usize,
        )?],
        "flatten" => {
            vec![x0().flatten(kw["start"].as_i64().unwrap(), kw["end"].as_i64().unwrap())?]
        }
        "unflatten" => vec![x0().unflatten(dim(), &i64s(&kw["sizes"]))?],
        "narrow" => vec![x0().narrow(
            dim(),
            kw["start"].as_i64().unwrap(),
            kw["length"].as_u64().unwrap() as usize,
        )?],
        "select" => vec![x0().select(dim(), kw["index"].as_i64().unwrap())?],
        "unsqueeze_view" => vec![x0().unsqueeze(dim())?],
        "squeeze" => vec![match kw.get("dims") {
            Some(d) => x0().squeeze_dims(&i64s(d))?,
            None => x0().squeeze(),
        }],
        "add_" | "mul_" | "copy_" | "fill_" | "masked_fill_" | "index_copy_" | "index_put_" => {
            let x = x0();
            match op {
                "add_" => x.add_(o())?,
                "mul_" => x.mul_(o())?,
                "copy_" => x.copy_(&xs[1])?,
                "fill_" => x.fill_(scalar_of(&kw["value"]))?,
                "masked_fill_" => x.masked_fill_(&xs[1], scalar_of(&kw["value"]))?,
                "index_copy_" => x.index_copy_(dim(), &xs[1], &xs[2])?,
                _ => x.index_put_(
                    &xs[1..xs.len() - 1],
                    &xs[xs.len() - 1],
                    kw["accumulate"].as_bool().unwrap(),
                )?,
            }
            vec![bases[0].clone(), x.clone()]
        }
        "alias" => {
            let a = x0();
            let flat = a.view(&[-1])?;
            match kw["case"].as_str().unwrap() {
                "copy_t" => a.copy_(&a.t()?)?,
                "add_self" => a.add_(a)?,
                "slice_add" => {
                    flat.slice(0, Some(1), None, 1)?
                        .add_(&flat.slice(0, None, Some(-1), 1)?)?
                }
                "row_col" => a.select(0, 0)?.add_(&a.select(1, 0)?)?,
                "mul_disjoint" => a.narrow(0, 0, 2)?.mul_(&a.narrow(0, 2, 2)?)?,
                "t_view_fill" => a.t()?.select(0, 0)?.fill_(Scalar::Int(7))?,
                _ => a
                    .narrow(0, 0, 2)?
                    .copy_(&a.narrow(0, 2, 2)?.t()?.narrow(0, 0, 2)?)?,
            }
            vec![a.clone()]
        }
        "rms_norm" => vec![rms_norm(
            &xs[0],
            &usizes(&kw["shape"]),
            xs.get(1),
            kw.get("eps").and_then(|e| e.as_f64()),
        )?],
        "layer_norm" => vec![layer_norm(
            &xs[0],
            &usizes(&kw["shape"]),
            xs.get(1),
            xs.get(2),
            kw["eps"].as_f64().unwrap(),
        )?],
        "rope" => {
            let style = if kw["style"] == "half" {
                RopeStyle::HalfRotation
            } else {
                RopeStyle::Interleaved
            };
            let cfg = RopeConfig {
                theta: kw["theta"].as_f64().unwrap(),
                style,
                rotary_dim: kw
                    .get("rotary_dim")
                    .and_then(|v| v.as_u64())
                    .map(|v| v as usize),
            };
            vec![rotary_embedding(&xs[0], &xs[1], cfg)?]
        }
        "sdpa" => {
            let opts = SdpaOptions {
                attn_mask: xs.get(3).cloned(),
                is_causal: kw
                    .get("is_causal")
                    .and_then(|v| v.as_bool())
                    .unwrap_or(false),
                scale: kw.get("scale").and_then(|v| v.as_f64()),
                window: kw
                    .get("window")
                    .and_then(|v| v.as_u64())
                    .map(|v| v as usize),
            };
            vec![scaled_dot_product_attention(&xs[0], &xs[1], &xs[2], &opts)?]
        }
        _ => panic!("golden harness does not know op {op}"),
    })
}

fn eps_of(d: DType) -> f64 {
    match d {
        DType::F64 => f64::EPSILON,
        DType::F32 => f32::EPSILON as f64,
        DType::F16 => 2f64.powi(-10),
        DType::BF16 => 2f64.powi(-7),
        _ => 0.0,
    }
}

/// Compares one of our outputs to torch's; returns a description of the first difference.
fn compare(ours: &Tensor, theirs: &Value, tol: f64, check_strides: bool) -> Option<String> {
    if check_strides && ours.numel() > 1 && ours.strides() != usizes(&theirs["strides"]).as_slice()
    {
        return Some(format!(
            "strides {:?} vs torch {}",
            ours.strides(),
            theirs["strides"]
        ));
    }
    let dtype = dtype_of(&theirs["dtype"]);
    let shape = usizes(&theirs["shape"]);
    if ours.dtype() != dtype {
        return Some(format!("dtype {:?} vs torch {:?}", ours.dtype(), dtype));
    }
    if ours.shape() != shape.as_slice() {
        return Some(format!("shape {:?} vs torch {:?}", ours.shape(), shape));
    }
    if theirs.get("meta").is_some() {
        return (ours.device() != Device::Meta)
            .then(|| format!("device {:?} vs torch meta", ours.device()));
    }
    let strs: Vec<&str> = theirs["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    if dtype.is_float() {
        let got = ours.to_vec::<f64>().unwrap();
        for (i, (g, w)) in got
            .iter()
            .zip(strs.iter().map(|s| parse_value(s)))
            .enumerate()
        {
            let ok = if w.is_nan() || g.is_nan() {
                w.is_nan() && g.is_nan()
            } else if w.is_infinite() || g.is_infinite() {
                g == &w
            } else {
                (g - w).abs() <= tol * eps_of(dtype) * w.abs().max(1.0)
            };
            if !ok {
                return Some(format!(
                    "element {i}: ours {g:e} vs torch {w:e} (tol {tol} eps)"
                ));
            }
        }
    } else {
        let got = ours.to_vec::<i64>().unwrap();
        for (i, (g, w)) in got.iter().zip(&strs).enumerate() {
            if g.to_string() != *w {
                return Some(format!("element {i}: ours {g} vs torch {w}"));
            }
        }
    }
    None
}

fn oracle_python() -> Option<PathBuf> {
    let required = std::env::var("TORCHNATIVE_REQUIRE_ORACLE").is_ok_and(|v| v == "1");
    match std::env::var("TORCHNATIVE_ORACLE_PYTHON") {
        Ok(p) if PathBuf::from(&p).exists() => Some(PathBuf::from(p)),
        _ => {
            assert!(!required, "TORCHNATIVE_REQUIRE_ORACLE=1 but TORCHNATIVE_ORACLE_PYTHON is not set to an existing python");
            println!("skipped: TORCHNATIVE_ORACLE_PYTHON not set");
            None
        }
    }
}

/// Runs the cases through torch and this crate; panics listing every disagreement.
fn check_against_torch(name: &str, cases: Vec<Value>) {
    let Some(python) = oracle_python() else {
        return;
    };
    let dir = std::env::temp_dir().join(format!(
        "torchnative-core-golden-{name}-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let cases_path = dir.join("cases.json");
    let results_path = dir.join("results.json");
    std::fs::write(&cases_path, serde_json::to_vec(&cases).unwrap()).unwrap();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/oracle/torch_ops.py");
    let out = std::process::Command::new(python)
        .arg(&script)
        .arg(&cases_path)
        .arg(&results_path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "oracle failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let results: Vec<Value> =
        serde_json::from_slice(&std::fs::read(&results_path).unwrap()).unwrap();
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(results.len(), cases.len());
    let mut failures = Vec::new();
    let mut agreed_errors = 0;
    for (case, res) in cases.iter().zip(&results) {
        let op = case["op"].as_str().unwrap();
        let built: Result<Vec<(Tensor, Tensor)>> = case["inputs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|spec| build_input(spec, case.get("meta").is_some()))
            .collect();
        let ours = built.and_then(|b| {
            let bases: Vec<Tensor> = b.iter().map(|p| p.0.clone()).collect();
            let xs: Vec<Tensor> = b.iter().map(|p| p.1.clone()).collect();
            run_case(op, &bases, &xs, &case["kwargs"])
        });
        let brief = || {
            let ins: Vec<String> = case["inputs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| format!("{}{}{}", i["dtype"], i["shape"], i["view"]))
                .collect();
            format!("{op} {} kwargs={}", ins.join(" "), case["kwargs"])
        };
        match (ours, res.get("error")) {
            (Err(_), Some(_)) => agreed_errors += 1,
            (Err(e), None) => {
                failures.push(format!("{}: we failed ({e}) but torch succeeded", brief()))
            }
            (Ok(_), Some(e)) => {
                failures.push(format!("{}: torch raised ({e}) but we succeeded", brief()))
            }
            (Ok(outs), None) => {
                let theirs = res["outputs"].as_array().unwrap();
                if outs.len() != theirs.len() {
                    failures.push(format!(
                        "{}: {} outputs vs torch {}",
                        brief(),
                        outs.len(),
                        theirs.len()
                    ));
                    continue;
                }
                for (k, (o, t)) in outs.iter().zip(theirs).enumerate() {
                    let strides = case
                        .get("strides")
                        .and_then(|v| v.as_bool())
                        .unwrap_or(false);
                    if let Some(d) = compare(o, t, case["tol"].as_f64().unwrap(), strides) {
                        failures.push(format!("{} output {k}: {d}", brief()));
                    }
                }
            }
        }
    }
    println!(
        "{name}: {} cases, {} agreed errors, {} failures",
        cases.len(),
        agreed_errors,
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} of {} cases disagree with torch:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

fn new_cases(seed: u64) -> Cases {
    Cases {
        list: Vec::new(),
        gen: Generator::new(seed),
    }
}

// ---------- case groups ----------

const FLOATS: [DType; 4] = [DType::F32, DType::F64, DType::F16, DType::BF16];

/// Tolerance (in eps of the result) for results PyTorch rounds once from an exact value;
/// halves get one ulp because PyTorch keeps Python scalars in f32 for half arithmetic.
fn exact_tol(d: DType) -> f64 {
    if matches!(d, DType::F16 | DType::BF16) {
        1.0
    } else {
        0.0
    }
}

#[test]
fn golden_promotion_and_casts() {
    let mut c = new_cases(1);
    for a in ALL_DTYPES {
        for b in ALL_DTYPES {
            let x = c.rand_input(a, &[2], json!([]));
            let y0 = c.rand_input(b, &[], json!([]));
            let y1 = c.rand_input(b, &[2], json!([]));
            c.add("result_type", vec![x.clone(), y0], json!({}), 0.0);
            c.add("result_type", vec![x, y1], json!({}), 0.0);
        }
        for s in [sc_int(3), sc_float(1.5), sc_bool(true)] {
            let x = c.rand_input(a, &[2], json!([]));
            c.add("result_type", vec![x], json!({"scalar": s}), 0.0);
            let z = c.rand_input(a, &[], json!([]));
            c.add("result_type", vec![z], json!({"scalar": s}), 0.0);
        }
    }
    // Casts with rounding / saturation / wrap-around edge values.
    let float_edges = [
        0.0,
        -0.0,
        0.5,
        1.5,
        2.5,
        -2.5,
        -1.7,
        1.9999,
        300.0,
        -129.7,
        255.9,
        32768.5,
        65504.0,
        65519.0,
        65520.0,
        1e10,
        -1e10,
        3.9e9,
        2147483647.0,
        -2147483648.0,
        9.3e18,
        -9.3e18,
        1e-8,
        0.1,
        1.0 + 2f64.powi(-11),
        1.0 + 3.0 * 2f64.powi(-11),
        1.0 + 2f64.powi(-8),
        3.4e38,
        1e39,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
    ];
    let int_edges: [i64; 18] = [
        0,
        1,
        -1,
        127,
        128,
        255,
        256,
        -129,
        32767,
        65535,
        65536,
        2147483647,
        2147483648,
        -2147483649,
        (1 << 40) + 1,
        (1 << 53) + 1,
        i64::MIN,
        i64::MAX,
    ];
    for src in ALL_DTYPES {
        let input = if src.is_float() {
            // Round to the source dtype first so the input itself is representable.
            let v = Tensor::from_f64s(&float_edges, &[float_edges.len()], src)
                .unwrap()
                .to_vec::<f64>()
                .unwrap();
            input_f(&v, &[v.len()], src, json!([]))
        } else {
            let v = Tensor::from_i64s(&int_edges, &[int_edges.len()], src)
                .unwrap()
                .to_vec::<i64>()
                .unwrap();
            input_i(&v, &[v.len()], src)
        };
        for dst in ALL_DTYPES {
            c.add("to", vec![input.clone()], json!({"dtype": dst.name()}), 0.0);
        }
    }
    // f64 values that round differently when going through f32 first.
    let tricky = [
        1.0 + 2f64.powi(-11) + 2f64.powi(-40),
        1.0 + 2f64.powi(-8) + 2f64.powi(-30),
    ];
    for dst in [DType::F16, DType::BF16] {
        c.add(
            "to",
            vec![input_f(&tricky, &[2], DType::F64, json!([]))],
            json!({"dtype": dst.name()}),
            0.0,
        );
    }
    check_against_torch("casts", c.list);
}

#[test]
fn golden_pointwise() {
    let mut c = new_cases(2);
    let binary = [
        "add",
        "sub",
        "mul",
        "div",
        "maximum",
        "minimum",
        "eq",
        "ne",
        "lt",
        "ge",
        "logical_and",
        "logical_xor",
    ];
    let pairs = [
        (DType::F32, DType::F32),
        (DType::F64, DType::F64),
        (DType::F16, DType::F16),
        (DType::BF16, DType::BF16),
        (DType::I64, DType::I64),
        (DType::I32, DType::I32),
        (DType::I16, DType::I16),
        (DType::I8, DType::I8),
        (DType::U8, DType::U8),
        (DType::Bool, DType::Bool),
        (DType::I32, DType::F32),
        (DType::U8, DType::I8),
        (DType::Bool, DType::I64),
        (DType::F16, DType::BF16),
        (DType::I64, DType::F16),
        (DType::F32, DType::F64),
        (DType::Bool, DType::F32),
        (DType::U8, DType::I64),
    ];
    for op in binary {
        for (a, b) in pairs {
            let out = promote_types(a, b);
            let tol = if op == "div" { 1.0 } else { exact_tol(out) };
            // Broadcasting with a transposed left operand and a sliced (step 2) right one.
            let x = c.rand_input(a, &[3, 2], json!([["t"]]));
            let y = c.rand_input(b, &[6], json!([["slice", 0, 1, null, 2]]));
            c.add(op, vec![x, y], json!({}), tol);
            // Expanded operand and size-1 broadcasting across three dims.
            let x = c.rand_input(a, &[2, 1, 3], json!([]));
            let y = c.rand_input(b, &[4, 1], json!([["expand", [4, 3]]]));
            c.add(op, vec![x, y], json!({}), tol);
            // Empty tensors.
            let x = c.rand_input(a, &[0, 3], json!([]));
            let y = c.rand_input(b, &[3], json!([]));
            c.add(op, vec![x, y], json!({}), tol);
        }
        // torch.maximum/minimum/logical_* accept only tensors.
        let tensor_only = matches!(op, "maximum" | "minimum" | "logical_and" | "logical_xor");
        for a in ALL_DTYPES {
            for s in [sc_int(3), sc_float(-1.25), sc_bool(true)]
                .into_iter()
                .filter(|_| !tensor_only)
            {
                let x = c.rand_input(a, &[5], json!([]));
                let out_tol = if op == "div" { 1.0 } else { exact_tol(a) };
                c.add(op, vec![x], json!({"scalar": s}), out_tol);
            }
            // 0-dim tensor of another category against a dimensioned tensor.
            let x = c.rand_input(a, &[4], json!([]));
            let z = c.rand_input(DType::F64, &[], json!([]));
            c.add(op, vec![x, z], json!({}), 1.0);
        }
    }
    // Same-shape contiguous f32 operands (the direct f32 fast path).
    for op in ["add", "sub", "mul", "div"] {
        let x = c.rand_input(DType::F32, &[64], json!([]));
        let y = c.rand_input(DType::F32, &[64], json!([]));
        c.add(op, vec![x, y], json!({}), 0.0);
    }
    // Division with rounding modes (nonzero divisors for integers; floats include signs).
    for d in [
        DType::F32,
        DType::F64,
        DType::I64,
        DType::I32,
        DType::I8,
        DType::U8,
        DType::F16,
    ] {
        for mode in ["trunc", "floor"] {
            let x = c.rand_input(d, &[12], json!([]));
            let yv: Vec<f64> = sample_values(&mut c.gen, d, 12)
                .into_iter()
                .map(|v| if v == 0.0 { 3.0 } else { v })
                .collect();
            let y = input_f(&yv, &[12], d, json!([]));
            c.add(
                "div",
                vec![x, y],
                json!({"rounding_mode": mode}),
                exact_tol(d),
            );
        }
        let x = c.rand_input(d, &[4], json!([]));
        c.add(
            "div",
            vec![x.clone(), input_f(&[0.0; 4], &[4], d, json!([]))],
            json!({"rounding_mode": "floor"}),
            0.0,
        );
        c.add(
            "div",
            vec![x],
            json!({"scalar": sc_int(-3), "rounding_mode": "floor"}),
            exact_tol(d),
        );
    }
    // pow: small non-negative integer exponents, float exponents, negative scalar exponent.
    for d in [
        DType::F32,
        DType::F64,
        DType::I64,
        DType::I32,
        DType::U8,
        DType::I8,
    ] {
        let base = c.rand_input(d, &[6], json!([]));
        let e: Vec<f64> = (0..6).map(|i| (i % 4) as f64).collect();
        c.add(
            "pow",
            vec![base.clone(), input_f(&e, &[6], d, json!([]))],
            json!({}),
            2.0,
        );
        c.add("pow", vec![base.clone()], json!({"scalar": sc_int(3)}), 2.0);
        c.add(
            "pow",
            vec![base.clone()],
            json!({"scalar": sc_float(0.5)}),
            2.0,
        );
        c.add("pow", vec![base], json!({"scalar": sc_int(-1)}), 2.0);
    }
    // remainder/fmod (nonzero divisors; zero divisors checked separately), atan2 and
    // bitwise ops over dtype pairs, with broadcasting of a [3] divisor against [4, 3].
    for (a, b) in pairs {
        let x = c.rand_input(a, &[4, 3], json!([]));
        let yv: Vec<f64> = sample_values(&mut c.gen, b, 3)
            .into_iter()
            .map(|v| if v == 0.0 { 3.0 } else { v })
            .collect();
        let y = input_f(&yv, &[3], b, json!([]));
        for op in [
            "remainder",
            "fmod",
            "bitwise_and",
            "bitwise_or",
            "bitwise_xor",
        ] {
            c.add(
                op,
                vec![x.clone(), y.clone()],
                json!({}),
                exact_tol(promote_types(a, b)),
            );
        }
        c.add("atan2", vec![x.clone(), y], json!({}), 2.0);
    }
    for op in ["remainder", "fmod"] {
        let x = c.rand_input(DType::I32, &[3], json!([]));
        c.add(
            op,
            vec![
                x.clone(),
                input_f(&[1.0, 0.0, 2.0], &[3], DType::I32, json!([])),
            ],
            json!({}),
            0.0,
        );
        c.add(op, vec![x], json!({"scalar": sc_float(-1.5)}), 1.0);
    }
    // Integer powers with negative tensor exponents (C semantics), bool bases (refused).
    for d in [DType::I64, DType::I8] {
        let b = input_f(&[2.0, 1.0, -1.0, 0.0, 5.0, -1.0], &[6], d, json!([]));
        let e = input_f(&[-1.0, -1.0, -3.0, -1.0, -2.0, -2.0], &[6], d, json!([]));
        c.add("pow", vec![b, e], json!({}), 0.0);
    }
    let bools = c.rand_input(DType::Bool, &[3], json!([]));
    c.add(
        "pow",
        vec![bools.clone()],
        json!({"scalar": sc_int(2)}),
        0.0,
    );
    c.add("pow", vec![bools.clone(), bools], json!({}), 0.0);
    // Unary ops over dtypes and layouts.
    let unary_tol = [
        ("neg", 0.0),
        ("abs", 0.0),
        ("exp", 2.0),
        ("log", 2.0),
        ("log1p", 2.0),
        ("sqrt", 1.0),
        ("rsqrt", 2.0),
        ("sin", 2.0),
        ("cos", 2.0),
        ("tanh", 2.0),
        ("sigmoid", 2.0),
        ("silu", 2.0),
        ("relu", 0.0),
        ("floor", 0.0),
        ("ceil", 0.0),
        ("round", 0.0),
        ("isnan", 0.0),
        ("isinf", 0.0),
        ("logical_not", 0.0),
        ("erf", 4.0),
        ("reciprocal", 1.0),
        ("log2", 2.0),
        ("log10", 2.0),
        ("exp2", 2.0),
        ("expm1", 2.0),
        ("tan", 2.0),
        ("atan", 2.0),
        ("asin", 2.0),
        ("acos", 2.0),
        ("sinh", 2.0),
        ("cosh", 2.0),
        ("trunc", 0.0),
        ("sign", 0.0),
        ("bitwise_not", 0.0),
    ];
    for (op, tol) in unary_tol {
        for d in ALL_DTYPES {
            let x = c.rand_input(d, &[4, 3], json!([["t"]]));
            // Halves: PyTorch rounds an f32 result, we an f64 one; allow one more half ulp.
            let t: f64 = if matches!(d, DType::F16 | DType::BF16) {
                tol + 1.0
            } else {
                tol
            };
            c.add(op, vec![x], json!({}), t);
        }
        let special = [
            0.0,
            -0.0,
            0.5,
            1.5,
            2.5,
            -2.5,
            -0.5,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            1e-30,
            -1e30,
        ];
        c.add(
            op,
            vec![input_f(&special, &[12], DType::F32, json!([]))],
            json!({}),
            tol,
        );
    }
    for d in FLOATS {
        for approx in ["none", "tanh"] {
            let x = c.rand_input(d, &[16], json!([]));
            // torch's vectorised f32 erf is a few ulp off in absolute terms and 1 + erf
            // cancels for x << 0 (e.g. gelu(-3.2): torch -0.00219898, exact -0.00219884).
            c.add("gelu", vec![x], json!({"approximate": approx}), 8.0);
        }
    }
    let int_input = c_int_input(&mut c.gen);
    c.add("gelu", vec![int_input], json!({"approximate": "none"}), 0.0);
    // clamp with scalar bounds of different kinds, including min > max and NaN inputs.
    for d in [
        DType::F32,
        DType::F64,
        DType::F16,
        DType::I64,
        DType::I32,
        DType::U8,
        DType::Bool,
    ] {
        for (lo, hi) in [
            (Some(sc_int(-1)), Some(sc_int(2))),
            (Some(sc_float(-0.5)), None),
            (None, Some(sc_float(1.5))),
            (Some(sc_int(3)), Some(sc_int(1))),
        ] {
            let x = c.rand_input(d, &[8], json!([]));
            let mut kw = json!({});
            if let Some(l) = lo {
                kw["min"] = l;
            }
            if let Some(h) = hi {
                kw["max"] = h;
            }
            c.add("clamp", vec![x], kw, exact_tol(d));
        }
    }
    c.add(
        "clamp",
        vec![input_f(&[f64::NAN, 5.0, -5.0], &[3], DType::F32, json!([]))],
        json!({"min": sc_float(-1.0), "max": sc_float(1.0)}),
        0.0,
    );
    // where: bool condition broadcast against mixed dtypes.
    for (a, b) in [
        (DType::F32, DType::I64),
        (DType::I32, DType::U8),
        (DType::F16, DType::F16),
        (DType::Bool, DType::Bool),
    ] {
        let cond = c.rand_input(DType::Bool, &[2, 1], json!([]));
        let x = c.rand_input(a, &[3], json!([]));
        let y = c.rand_input(b, &[2, 3], json!([["t"], ["t"]]));
        c.add("where", vec![cond, x, y], json!({}), 0.0);
    }
    // clamp with tensor bounds (promotion across all three), scalars on the left.
    for (a, lo, hi) in [
        (DType::F32, DType::F32, DType::F32),
        (DType::I32, DType::F16, DType::I64),
        (DType::U8, DType::I8, DType::U8),
        (DType::F16, DType::F64, DType::F32),
    ] {
        let x = c.rand_input(a, &[2, 3], json!([]));
        let l = c.rand_input(lo, &[3], json!([]));
        let h = c.rand_input(hi, &[2, 1], json!([]));
        c.add(
            "clamp_t",
            vec![x, l, h],
            json!({}),
            exact_tol(promote_types(a, promote_types(lo, hi))),
        );
    }
    for d in [DType::F32, DType::F16, DType::I64, DType::U8, DType::Bool] {
        for s in [sc_int(2), sc_float(0.5)] {
            let x = c.rand_input(d, &[4], json!([]));
            c.add("rsub", vec![x.clone()], json!({"scalar": s}), exact_tol(d));
            c.add("rdiv", vec![x], json!({"scalar": s}), 1.0);
        }
    }
    let cond = c.rand_input(DType::I64, &[3], json!([]));
    let x = c.rand_input(DType::F32, &[3], json!([]));
    c.add("where", vec![cond, x.clone(), x], json!({}), 0.0);
    check_against_torch("pointwise", c.list);
}

fn c_int_input(gen: &mut Generator) -> Value {
    let v = sample_values(gen, DType::I64, 4);
    input_f(&v, &[4], DType::I64, json!([]))
}

#[test]
fn golden_reductions() {
    let mut c = new_cases(3);
    let dtypes = [
        DType::F32,
        DType::F64,
        DType::F16,
        DType::BF16,
        DType::I64,
        DType::I32,
        DType::U8,
        DType::Bool,
    ];
    let dim_sets: [(&[i64], bool); 6] = [
        (&[], false),
        (&[1], false),
        (&[-1], true),
        (&[0, 2], false),
        (&[0, 2], true),
        (&[2, 0, 1], false),
    ];
    for d in dtypes {
        for (dims, keep) in dim_sets {
            for op in [
                "sum",
                "prod",
                "mean",
                "any",
                "all",
                "logsumexp",
                "amax",
                "amin",
            ] {
                let x = c.rand_input(
                    d,
                    &[3, 4, 5],
                    json!([["transpose", 0, 2], ["transpose", 0, 2]]),
                );
                let n = 60.0;
                let tol = match op {
                    "prod" => 4.0 * n,
                    "sum" | "mean" | "logsumexp" => 2.0 * n,
                    _ => 0.0,
                };
                c.add(op, vec![x], json!({"dims": dims, "keepdim": keep}), tol);
            }
            for op in ["var", "std"] {
                for corr in [0.0, 1.0] {
                    let x = c.rand_input(d, &[3, 4, 5], json!([]));
                    c.add(
                        op,
                        vec![x],
                        json!({"dims": dims, "keepdim": keep, "correction": corr}),
                        400.0,
                    );
                }
            }
        }
        for dim in [0i64, 1, -1] {
            for keep in [false, true] {
                // Transposed input with ties (small integer values) to check first-index rules.
                let v: Vec<f64> = (0..20).map(|i| ((i * 7) % 5) as f64).collect();
                let v = Tensor::from_f64s(&v, &[20], d)
                    .unwrap()
                    .to_vec::<f64>()
                    .unwrap();
                let x = input_f(&v, &[5, 4], d, json!([["t"]]));
                for op in ["max_dim", "min_dim"] {
                    c.add(
                        op,
                        vec![x.clone()],
                        json!({"dim": dim, "keepdim": keep}),
                        0.0,
                    );
                }
                c.add(
                    "argmax",
                    vec![x.clone()],
                    json!({"dim": dim, "keepdim": keep}),
                    0.0,
                );
                c.add(
                    "argmin",
                    vec![x.clone()],
                    json!({"dim": dim, "keepdim": keep}),
                    0.0,
                );
            }
            let x = c.rand_input(d, &[4, 6], json!([["slice", 1, 0, null, 2]]));
            c.add("cumsum", vec![x.clone()], json!({"dim": dim}), 12.0);
            c.add("softmax", vec![x.clone()], json!({"dim": dim}), 16.0);
            c.add("log_softmax", vec![x], json!({"dim": dim}), 16.0);
        }
        let x = c.rand_input(d, &[3, 4], json!([]));
        c.add("argmax", vec![x.clone()], json!({}), 0.0);
        c.add("max", vec![x.clone()], json!({}), 0.0);
        c.add("min", vec![x], json!({}), 0.0);
        // Empty inputs: identities for sum/prod/any/all, NaN for mean, errors for max.
        let e = c.rand_input(d, &[0, 3], json!([]));
        for op in ["sum", "prod", "mean", "any", "all", "amax", "amin"] {
            c.add(
                op,
                vec![e.clone()],
                json!({"dims": [0], "keepdim": false}),
                0.0,
            );
        }
        c.add("max_dim", vec![e.clone()], json!({"dim": 0}), 0.0);
        c.add("max", vec![e.clone()], json!({}), 0.0);
        c.add("cumsum", vec![e], json!({"dim": 0}), 0.0);
    }
    // NaN propagation in max/argmax, and softmax stability for huge logits.
    let nan_in = input_f(
        &[1.0, f64::NAN, 3.0, f64::NAN, 0.0, 2.0],
        &[2, 3],
        DType::F32,
        json!([]),
    );
    c.add("max_dim", vec![nan_in.clone()], json!({"dim": 1}), 0.0);
    c.add("argmax", vec![nan_in], json!({}), 0.0);
    let inf = f64::INFINITY;
    let rows = input_f(
        &[
            -inf,
            -inf,
            -inf,
            1.0,
            -inf,
            2.0,
            f64::NAN,
            0.0,
            1.0,
            inf,
            0.0,
            1.0,
        ],
        &[4, 3],
        DType::F32,
        json!([]),
    );
    c.add("softmax", vec![rows.clone()], json!({"dim": -1}), 4.0);
    c.add("log_softmax", vec![rows], json!({"dim": -1}), 4.0);
    let wide = c.rand_input(DType::F32, &[3, 300], json!([]));
    c.add("softmax", vec![wide.clone()], json!({"dim": -1}), 16.0);
    c.add("softmax", vec![wide], json!({"dim": 0}), 16.0);
    let big = input_f(
        &[1000.0, 1001.0, -1000.0, 999.0],
        &[4],
        DType::F32,
        json!([]),
    );
    c.add("softmax", vec![big.clone()], json!({"dim": 0}), 4.0);
    c.add("log_softmax", vec![big.clone()], json!({"dim": 0}), 4.0);
    c.add("logsumexp", vec![big], json!({"dims": [0]}), 4.0);
    let x = c.rand_input(DType::F32, &[3], json!([]));
    c.add("sum", vec![x], json!({"dims": [0, 0]}), 0.0);
    check_against_torch("reductions", c.list);
}

#[test]
fn golden_linalg() {
    let mut c = new_cases(4);
    let shapes: [(&[usize], &[usize]); 10] = [
        (&[3], &[3]),
        (&[2, 3], &[3]),
        (&[3], &[3, 4]),
        (&[2, 3], &[3, 4]),
        (&[2, 2, 3], &[3, 4]),
        (&[3], &[2, 3, 4]),
        (&[2, 1, 2, 3], &[3, 3, 2]),
        (&[2, 0], &[0, 3]),
        (&[0, 3], &[3, 2]),
        (&[2, 3], &[4, 2]),
    ];
    for d in [
        DType::F32,
        DType::F64,
        DType::F16,
        DType::BF16,
        DType::I64,
        DType::I32,
        DType::U8,
        DType::Bool,
    ] {
        let k_tol = |k: usize| {
            if d.is_float() {
                2.0 * k as f64 + 2.0
            } else {
                0.0
            }
        };
        for (a, b) in shapes {
            let x = c.rand_input(d, a, json!([]));
            let y = c.rand_input(d, b, json!([]));
            c.add("matmul", vec![x, y], json!({}), k_tol(a[a.len() - 1]));
        }
        // Transposed operands for mm and a sliced batch for bmm.
        let x = c.rand_input(d, &[5, 4], json!([["t"]]));
        let y = c.rand_input(d, &[6, 3], json!([["slice", 0, 0, null, 2], ["t"], ["t"]]));
        c.add("mm", vec![x.clone(), y], json!({}), k_tol(5));
        let bx = c.rand_input(d, &[2, 3, 4], json!([["transpose", 1, 2]]));
        let by = c.rand_input(d, &[2, 3, 5], json!([]));
        c.add("bmm", vec![bx.clone(), by], json!({}), k_tol(3));
        let w = c.rand_input(d, &[6, 4], json!([]));
        let bias = c.rand_input(d, &[6], json!([]));
        let inp = c.rand_input(d, &[2, 3, 4], json!([]));
        c.add(
            "linear",
            vec![inp.clone(), w.clone(), bias],
            json!({}),
            k_tol(4),
        );
        c.add("linear", vec![inp, w], json!({}), k_tol(4));
        if d.is_float() {
            let m1 = c.rand_input(d, &[3, 4], json!([]));
            let m2 = c.rand_input(d, &[4, 2], json!([]));
            let i = c.rand_input(d, &[2], json!([]));
            c.add(
                "addmm",
                vec![i, m1, m2],
                json!({"beta": 0.5, "alpha": 2.0}),
                k_tol(4) * 2.0,
            );
            let b1 = c.rand_input(d, &[2, 3, 4], json!([]));
            let b2 = c.rand_input(d, &[2, 4, 2], json!([]));
            let i = c.rand_input(d, &[3, 2], json!([]));
            c.add(
                "baddbmm",
                vec![i, b1, b2],
                json!({"beta": 1.0, "alpha": 1.0}),
                k_tol(4) * 2.0,
            );
        }
    }
    // Mixed dtypes are refused.
    let x = c.rand_input(DType::F32, &[2, 3], json!([]));
    let y = c.rand_input(DType::F64, &[3, 2], json!([]));
    c.add("mm", vec![x, y], json!({}), 0.0);
    check_against_torch("linalg", c.list);
}

#[test]
fn golden_indexing_and_shape() {
    let mut c = new_cases(5);
    for d in [DType::F32, DType::F16, DType::I64, DType::U8, DType::Bool] {
        let x = c.rand_input(d, &[4, 5], json!([["t"]])); // [5, 4] non-contiguous
        c.add(
            "index_select",
            vec![x.clone(), input_i(&[2, 0, 2, 4], &[4], DType::I64)],
            json!({"dim": 0}),
            0.0,
        );
        c.add(
            "index_select",
            vec![x.clone(), input_i(&[3, 1], &[2], DType::I32)],
            json!({"dim": -1}),
            0.0,
        );
        c.add(
            "index_select",
            vec![x.clone(), input_i(&[5], &[1], DType::I64)],
            json!({"dim": 0}),
            0.0,
        );
        c.add(
            "index_select",
            vec![x.clone(), input_i(&[-1], &[1], DType::I64)],
            json!({"dim": 0}),
            0.0,
        );
        c.add(
            "gather",
            vec![x.clone(), input_i(&[0, 3, 1, 2, 2, 0], &[2, 3], DType::I64)],
            json!({"dim": 1}),
            0.0,
        );
        c.add(
            "gather",
            vec![x.clone(), input_i(&[4, 0, 1], &[3, 1], DType::I64)],
            json!({"dim": 0}),
            0.0,
        );
        c.add(
            "gather",
            vec![x.clone(), input_i(&[4, 0, 7], &[3, 1], DType::I64)],
            json!({"dim": 0}),
            0.0,
        );
        let src = c.rand_input(d, &[3, 4], json!([]));
        c.add(
            "scatter",
            vec![
                x.clone(),
                input_i(&[0, 3, 1, 2, 2, 0], &[2, 3], DType::I64),
                src.clone(),
            ],
            json!({"dim": 1}),
            0.0,
        );
        c.add(
            "scatter",
            vec![x.clone(), input_i(&[0, 3, 1], &[1, 3], DType::I64)],
            json!({"dim": 1, "value": sc_int(7)}),
            0.0,
        );
        if d != DType::Bool {
            c.add(
                "scatter_add",
                vec![
                    x.clone(),
                    input_i(&[0, 0, 1, 4, 4, 4], &[2, 3], DType::I64),
                    src,
                ],
                json!({"dim": 0}),
                exact_tol(d),
            );
        }
        let mask = c.rand_input(DType::Bool, &[4], json!([]));
        c.add("masked_select", vec![x.clone(), mask], json!({}), 0.0);
        c.add(
            "index",
            vec![
                x.clone(),
                input_i(&[0, -1, 2], &[3], DType::I64),
                input_i(&[1, 1, 3], &[3], DType::I64),
            ],
            json!({}),
            0.0,
        );
        c.add(
            "index",
            vec![x.clone(), input_i(&[0, 4, 2, 1], &[2, 2], DType::I64)],
            json!({}),
            0.0,
        );
        let bm = c.rand_input(DType::Bool, &[5], json!([]));
        c.add("index", vec![x.clone(), bm], json!({}), 0.0);
        c.add("nonzero", vec![x.clone()], json!({}), 0.0);
        let w = c.rand_input(d, &[6, 3], json!([]));
        c.add(
            "embedding",
            vec![input_i(&[5, 0, 2, 2, 1, 0], &[2, 3], DType::I64), w.clone()],
            json!({}),
            0.0,
        );
        c.add(
            "embedding",
            vec![input_i(&[6], &[1], DType::I64), w],
            json!({}),
            0.0,
        );
        let y = c.rand_input(d, &[2, 4], json!([]));
        c.add("cat", vec![x.clone(), y.clone()], json!({"dim": 0}), 0.0);
        c.add("cat", vec![x.clone(), y.clone()], json!({"dim": 1}), 0.0);
        let other = c.rand_input(DType::F64, &[1, 4], json!([]));
        c.add(
            "cat",
            vec![x.clone(), other, input_f(&[], &[0], DType::I32, json!([]))],
            json!({"dim": 0}),
            0.0,
        );
        let z = c.rand_input(d, &[5, 4], json!([]));
        c.add("stack", vec![x.clone(), z.clone()], json!({"dim": 1}), 0.0);
        c.add("stack", vec![x.clone(), z], json!({"dim": -1}), 0.0);
        c.add("split", vec![x.clone()], json!({"size": 2, "dim": 0}), 0.0);
        c.add(
            "chunk",
            vec![x.clone()],
            json!({"chunks": 3, "dim": 1}),
            0.0,
        );
        c.add(
            "chunk",
            vec![x.clone()],
            json!({"chunks": 4, "dim": 0}),
            0.0,
        );
        for k in [-1i64, 0, 2] {
            c.add("tril", vec![x.clone()], json!({"diagonal": k}), 0.0);
            c.add("triu", vec![x.clone()], json!({"diagonal": k}), 0.0);
        }
        c.add(
            "repeat",
            vec![x.clone()],
            json!({"repeats": [2, 1, 3]}),
            0.0,
        );
        c.add(
            "repeat_interleave",
            vec![x.clone()],
            json!({"repeats": 2, "dim": 1}),
            0.0,
        );
        c.add(
            "repeat_interleave",
            vec![x.clone()],
            json!({"repeats": 2}),
            0.0,
        );
        c.add(
            "repeat_interleave",
            vec![x.clone(), input_i(&[1, 0, 3, 1, 2], &[5], DType::I64)],
            json!({"dim": 0}),
            0.0,
        );
        c.add("flip", vec![x.clone()], json!({"dims": [0, 1]}), 0.0);
        c.add(
            "roll",
            vec![x.clone()],
            json!({"shifts": [2, -1], "dims": [0, 1]}),
            0.0,
        );
        c.add(
            "roll",
            vec![x.clone()],
            json!({"shifts": [3], "dims": []}),
            0.0,
        );
        c.add(
            "pad",
            vec![x.clone()],
            json!({"pads": [1, 2], "value": sc_int(0)}),
            0.0,
        );
        c.add(
            "pad",
            vec![x.clone()],
            json!({"pads": [0, 1, -1, 2], "value": sc_float(1.5)}),
            0.0,
        );
    }
    // sort / topk with ties, NaN and descending order (stable).
    for d in [
        DType::F32,
        DType::F64,
        DType::BF16,
        DType::I64,
        DType::I8,
        DType::U8,
    ] {
        let v: Vec<f64> = (0..24).map(|i| ((i * 5) % 7) as f64 - 3.0).collect();
        let v = Tensor::from_f64s(&v, &[24], d)
            .unwrap()
            .to_vec::<f64>()
            .unwrap();
        let x = input_f(&v, &[4, 6], d, json!([["t"]]));
        for desc in [false, true] {
            for dim in [0i64, 1] {
                c.add(
                    "sort",
                    vec![x.clone()],
                    json!({"dim": dim, "descending": desc}),
                    0.0,
                );
                c.add(
                    "argsort",
                    vec![x.clone()],
                    json!({"dim": dim, "descending": desc}),
                    0.0,
                );
            }
        }
        let distinct = c.rand_input(d, &[3, 7], json!([]));
        for largest in [true, false] {
            c.add(
                "topk",
                vec![distinct.clone()],
                json!({"k": 3, "dim": 1, "largest": largest}),
                0.0,
            );
        }
        c.add(
            "topk",
            vec![distinct],
            json!({"k": 8, "dim": 1, "largest": true}),
            0.0,
        );
    }
    let nan = input_f(
        &[3.0, f64::NAN, -1.0, 2.0, f64::NAN],
        &[5],
        DType::F32,
        json!([]),
    );
    c.add(
        "sort",
        vec![nan.clone()],
        json!({"dim": 0, "descending": false}),
        0.0,
    );
    c.add(
        "sort",
        vec![nan],
        json!({"dim": 0, "descending": true}),
        0.0,
    );
    check_against_torch("indexing", c.list);
}

#[test]
fn golden_views_and_inplace() {
    let mut c = new_cases(6);
    let x = c.rand_input(DType::F32, &[2, 3, 4], json!([]));
    let xt = c.rand_input(DType::F32, &[2, 3, 4], json!([["transpose", 0, 2]])); // [4,3,2]
    for shape in [
        json!([6, 4]),
        json!([-1]),
        json!([2, -1, 2]),
        json!([4, 6]),
        json!([5, -1]),
    ] {
        c.add_strided("view", vec![x.clone()], json!({"shape": shape}));
        c.add_strided("view", vec![xt.clone()], json!({"shape": shape}));
        c.add_strided("reshape", vec![xt.clone()], json!({"shape": shape}));
    }
    c.add_strided("view", vec![xt.clone()], json!({"shape": [2, 2, 3, 2]}));
    for (off, d1, d2) in [(0i64, 0i64, 1i64), (1, 0, 2), (-1, 2, 0), (5, 1, 2)] {
        c.add_strided(
            "diagonal",
            vec![xt.clone()],
            json!({"offset": off, "dim1": d1, "dim2": d2}),
        );
    }
    c.add_strided(
        "as_strided",
        vec![x.clone()],
        json!({"size": [3, 3], "stride": [2, 5], "offset": 1}),
    );
    c.add_strided(
        "as_strided",
        vec![x.clone()],
        json!({"size": [3, 3], "stride": [10, 5], "offset": 1}),
    );
    c.add_strided("flatten", vec![xt.clone()], json!({"start": 1, "end": 2}));
    c.add_strided(
        "unflatten",
        vec![x.clone()],
        json!({"dim": 2, "sizes": [2, -1]}),
    );
    c.add_strided(
        "narrow",
        vec![xt.clone()],
        json!({"dim": 0, "start": -3, "length": 2}),
    );
    c.add_strided(
        "narrow",
        vec![xt.clone()],
        json!({"dim": 0, "start": 3, "length": 2}),
    );
    c.add_strided("select", vec![xt.clone()], json!({"dim": 1, "index": -1}));
    c.add_strided("select", vec![xt.clone()], json!({"dim": 1, "index": 3}));
    let sq = c.rand_input(DType::I32, &[1, 3, 1], json!([]));
    c.add_strided("squeeze", vec![sq.clone()], json!({}));
    c.add_strided("squeeze", vec![sq.clone()], json!({"dims": [0, 1]}));
    c.add_strided("contiguous", vec![xt.clone()], json!({}));
    c.add_strided("clone", vec![xt.clone()], json!({}));
    let stepped = c.rand_input(DType::F32, &[4, 6], json!([["slice", 1, 0, null, 2]]));
    c.add_strided("clone", vec![stepped], json!({}));
    c.add_strided("to", vec![xt.clone()], json!({"dtype": "float64"}));
    c.add_strided("unsqueeze_view", vec![xt.clone()], json!({"dim": 1}));

    // In-place writes through views land in the base tensor.
    for d in [DType::F32, DType::I64, DType::F16, DType::U8, DType::Bool] {
        let base_t = c.rand_input(d, &[3, 4], json!([["t"]]));
        let sliced = c.rand_input(d, &[4, 6], json!([["slice", 1, 1, null, 2]]));
        let other = c.rand_input(d, &[3], json!([]));
        for op in ["add_", "mul_"] {
            c.add(
                op,
                vec![base_t.clone(), other.clone()],
                json!({}),
                exact_tol(d),
            );
            c.add(
                op,
                vec![sliced.clone(), other.clone()],
                json!({}),
                exact_tol(d),
            );
            c.add(
                op,
                vec![sliced.clone()],
                json!({"scalar": sc_float(2.5)}),
                exact_tol(d),
            );
            c.add(
                op,
                vec![sliced.clone()],
                json!({"scalar": sc_int(3)}),
                exact_tol(d),
            );
        }
        let src = c.rand_input(DType::F64, &[3], json!([]));
        c.add("copy_", vec![base_t.clone(), src], json!({}), exact_tol(d));
        c.add(
            "fill_",
            vec![sliced.clone()],
            json!({"value": sc_float(-2.75)}),
            0.0,
        );
        let m = c.rand_input(DType::Bool, &[4, 1], json!([]));
        c.add(
            "masked_fill_",
            vec![base_t.clone(), m],
            json!({"value": sc_int(9)}),
            0.0,
        );
        let s = c.rand_input(d, &[4, 2], json!([]));
        c.add(
            "index_copy_",
            vec![base_t.clone(), input_i(&[2, 0], &[2], DType::I64), s],
            json!({"dim": 1}),
            0.0,
        );
        let vals = c.rand_input(d, &[3], json!([]));
        for acc in [false, true] {
            c.add(
                "index_put_",
                vec![
                    sliced.clone(),
                    input_i(&[0, 3, 0], &[3], DType::I64),
                    input_i(&[1, 2, 1], &[3], DType::I64),
                    vals.clone(),
                ],
                json!({"accumulate": acc}),
                exact_tol(d),
            );
        }
        let bm = c.rand_input(DType::Bool, &[4, 3], json!([]));
        c.add(
            "index_put_",
            vec![base_t.clone(), bm, input_f(&[1.0], &[1], d, json!([]))],
            json!({"accumulate": false}),
            0.0,
        );
    }
    // Writing into an expanded view is refused; a result that doesn't fit is refused.
    let ex = c.rand_input(DType::F32, &[1, 3], json!([["expand", [2, 3]]]));
    c.add(
        "add_",
        vec![ex, input_f(&[1.0], &[1], DType::F32, json!([]))],
        json!({}),
        0.0,
    );
    let small = c.rand_input(DType::F32, &[3], json!([]));
    let big = c.rand_input(DType::F32, &[2, 3], json!([]));
    c.add("add_", vec![small, big], json!({}), 0.0);
    // Aliasing between source and destination (PyTorch refuses partial overlap of dense views).
    for case in [
        "copy_t",
        "add_self",
        "slice_add",
        "row_col",
        "mul_disjoint",
        "t_view_fill",
        "copy_disjoint_t",
    ] {
        let a = c.rand_input(DType::F32, &[4, 4], json!([]));
        c.add("alias", vec![a], json!({"case": case}), 0.0);
    }
    let int_t = c.rand_input(DType::I64, &[3], json!([]));
    c.add("add_", vec![int_t], json!({"scalar": sc_float(0.5)}), 0.0);
    check_against_torch("views_inplace", c.list);
}

#[test]
fn golden_meta_shapes_and_dtypes() {
    let mut c = new_cases(9);
    let add_meta = |c: &mut Cases, op: &str, inputs: Vec<Value>, kwargs: Value| {
        c.list
            .push(json!({"op": op, "inputs": inputs, "kwargs": kwargs, "tol": 0.0, "meta": true}));
    };
    for (a, b) in [
        (DType::F16, DType::F32),
        (DType::I32, DType::U8),
        (DType::Bool, DType::Bool),
        (DType::I64, DType::BF16),
    ] {
        for op in ["add", "mul", "div", "eq", "maximum"] {
            let x = c.rand_input(a, &[2, 1, 3], json!([]));
            let y = c.rand_input(b, &[4, 3], json!([["t"], ["t"]]));
            add_meta(&mut c, op, vec![x, y], json!({}));
        }
        let x = c.rand_input(a, &[2, 3, 4], json!([["transpose", 0, 2]]));
        add_meta(
            &mut c,
            "sum",
            vec![x.clone()],
            json!({"dims": [0, 2], "keepdim": true}),
        );
        add_meta(&mut c, "exp", vec![x.clone()], json!({}));
        // (torch's meta softmax skips the dtype check that CPU does; we refuse ints on both.)
        if a.is_float() {
            add_meta(&mut c, "softmax", vec![x.clone()], json!({"dim": -1}));
        }
        add_meta(&mut c, "mean", vec![x.clone()], json!({"dims": [1]}));
        let y = c.rand_input(a, &[3, 5], json!([]));
        add_meta(&mut c, "matmul", vec![x.clone(), y.clone()], json!({}));
        add_meta(&mut c, "cat", vec![x.clone(), x.clone()], json!({"dim": 1}));
        add_meta(&mut c, "view", vec![x.clone()], json!({"shape": [-1]}));
        add_meta(&mut c, "reshape", vec![x], json!({"shape": [-1]}));
    }
    check_against_torch("meta", c.list);
}

#[test]
fn golden_creation() {
    let mut c = new_cases(7);
    let ar = [
        (sc_int(0), sc_int(10), sc_int(3), None),
        (sc_int(5), sc_int(-5), sc_int(-2), None),
        (sc_float(0.0), sc_float(1.0), sc_float(0.1), None),
        (sc_int(0), sc_int(7), sc_int(2), Some(DType::F16)),
        (sc_float(-1.5), sc_int(3), sc_float(0.5), Some(DType::I32)),
        (sc_int(0), sc_int(5), sc_int(0), None),
        (sc_int(3), sc_int(1), sc_int(1), None),
    ];
    for (s, e, st, d) in ar {
        let mut kw = json!({"start": s, "end": e, "step": st});
        if let Some(d) = d {
            kw["dtype"] = json!(d.name());
        }
        c.add("arange", vec![], kw, 0.0);
    }
    for d in [DType::F32, DType::F64, DType::I64, DType::F16] {
        for (s, e, n) in [
            (0.0, 1.0, 5),
            (-3.0, 7.0, 11),
            (1.0, -1.0, 4),
            (0.0, 1.0, 1),
            (0.0, 1.0, 0),
            (0.1, 0.9, 7),
        ] {
            c.add(
                "linspace",
                vec![],
                json!({"start": s, "end": e, "steps": n, "dtype": d.name()}),
                if d.is_float() { 2.0 } else { 0.0 },
            );
        }
        c.add(
            "eye",
            vec![],
            json!({"n": 3, "m": 4, "dtype": d.name()}),
            0.0,
        );
        c.add(
            "eye",
            vec![],
            json!({"n": 2, "m": null, "dtype": d.name()}),
            0.0,
        );
    }
    for v in [sc_float(1.5), sc_int(-3), sc_bool(true)] {
        c.add("full", vec![], json!({"shape": [2, 3], "value": v}), 0.0);
        c.add(
            "full",
            vec![],
            json!({"shape": [2], "value": v, "dtype": "int8"}),
            0.0,
        );
    }
    check_against_torch("creation", c.list);
}

#[test]
fn golden_model_ops() {
    let mut c = new_cases(8);
    for d in FLOATS {
        let x = c.rand_input(d, &[2, 3, 8], json!([]));
        let w = c.rand_input(d, &[8], json!([]));
        let b = c.rand_input(d, &[8], json!([]));
        let tol = if d == DType::F32 || d == DType::F64 {
            32.0
        } else {
            2.0
        };
        c.add(
            "rms_norm",
            vec![x.clone(), w.clone()],
            json!({"shape": [8], "eps": 1e-6}),
            tol,
        );
        c.add("rms_norm", vec![x.clone()], json!({"shape": [3, 8]}), tol);
        c.add(
            "layer_norm",
            vec![x.clone(), w.clone(), b],
            json!({"shape": [8], "eps": 1e-5}),
            tol,
        );
        c.add(
            "layer_norm",
            vec![x.clone()],
            json!({"shape": [3, 8], "eps": 1e-5}),
            tol,
        );
        let q = c.rand_input(d, &[2, 4, 3, 8], json!([]));
        let pos2 = input_i(&[0, 1, 2, 5, 6, 7], &[2, 3], DType::I64);
        let pos1 = input_i(&[3, 4, 5], &[3], DType::I64);
        for style in ["half", "interleaved"] {
            // Angles and their cos/sin are f32 (as in HF) even for f64 inputs: f32-sized tolerance.
            let rope_tol = if d == DType::F64 {
                8.0 * (f32::EPSILON as f64 / f64::EPSILON)
            } else {
                8.0
            };
            c.add(
                "rope",
                vec![q.clone(), pos2.clone()],
                json!({"theta": 10000.0, "style": style}),
                rope_tol,
            );
            c.add(
                "rope",
                vec![q.clone(), pos1.clone()],
                json!({"theta": 500000.0, "style": style, "rotary_dim": 4}),
                rope_tol,
            );
        }
        // Attention: GQA (4 query heads, 2 kv heads), short query against longer keys.
        let q = c.rand_input(d, &[1, 4, 3, 8], json!([]));
        let k = c.rand_input(d, &[1, 2, 5, 8], json!([]));
        let v = c.rand_input(d, &[1, 2, 5, 6], json!([]));
        let atol = if d == DType::F32 || d == DType::F64 {
            64.0
        } else {
            4.0
        };
        c.add(
            "sdpa",
            vec![q.clone(), k.clone(), v.clone()],
            json!({}),
            atol,
        );
        c.add(
            "sdpa",
            vec![q.clone(), k.clone(), v.clone()],
            json!({"is_causal": true}),
            atol,
        );
        c.add(
            "sdpa",
            vec![q.clone(), k.clone(), v.clone()],
            json!({"is_causal": true, "window": 2}),
            atol,
        );
        c.add(
            "sdpa",
            vec![q.clone(), k.clone(), v.clone()],
            json!({"scale": 0.3}),
            atol,
        );
        let bm = c.rand_input(DType::Bool, &[3, 5], json!([]));
        c.add(
            "sdpa",
            vec![q.clone(), k.clone(), v.clone(), bm],
            json!({}),
            atol,
        );
        let fm = c.rand_input(d, &[1, 1, 3, 5], json!([]));
        c.add(
            "sdpa",
            vec![q.clone(), k.clone(), v.clone(), fm],
            json!({"is_causal": true}),
            atol,
        );
        let mut rows = vec![0.0; 15];
        rows[5..10].iter_mut().for_each(|v| *v = f64::NEG_INFINITY);
        let inf_row = input_f(&rows, &[3, 5], d, json!([]));
        c.add(
            "sdpa",
            vec![q.clone(), k.clone(), v.clone(), inf_row],
            json!({}),
            atol,
        );
        // Unbatched [heads, L, E] and single-head [L, E] inputs.
        let q3 = c.rand_input(d, &[2, 4, 8], json!([]));
        let k3 = c.rand_input(d, &[2, 6, 8], json!([]));
        let v3 = c.rand_input(d, &[2, 6, 8], json!([]));
        c.add("sdpa", vec![q3, k3, v3], json!({"is_causal": true}), atol);
        let q2 = c.rand_input(d, &[4, 8], json!([]));
        let k2 = c.rand_input(d, &[4, 8], json!([["t"], ["t"]]));
        c.add(
            "sdpa",
            vec![q2, k2.clone(), k2],
            json!({"is_causal": true}),
            atol,
        );
        let none = input_f(&[0.0; 15], &[3, 5], DType::Bool, json!([]));
        c.add("sdpa", vec![q, k, v, none], json!({}), atol);
    }
    check_against_torch("model_ops", c.list);
}
