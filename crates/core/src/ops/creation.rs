//! Tensor factories: `zeros`, `ones`, `full`, `arange`, `linspace`, `eye` and `*_like`.

use crate::dtype::{DType, Device, Scalar, DEFAULT_FLOAT};
use crate::error::{filled_vec, invalid, reserve_vec, Error, Result};
use crate::layout::checked_numel;
use crate::tensor::Tensor;

/// `torch.empty(shape, dtype)` on CPU (zero-filled, so never uninitialised memory).
pub fn empty(shape: &[usize], dtype: DType) -> Result<Tensor> {
    Tensor::empty_on(shape, dtype, Device::Cpu)
}

/// `torch.zeros(shape, dtype)`.
pub fn zeros(shape: &[usize], dtype: DType) -> Result<Tensor> {
    Tensor::empty_on(shape, dtype, Device::Cpu)
}

/// `torch.ones(shape, dtype)`.
pub fn ones(shape: &[usize], dtype: DType) -> Result<Tensor> {
    full(shape, Scalar::Int(1), Some(dtype))
}

/// `torch.full(shape, value, dtype)`; without a dtype it follows the value's kind
/// (float -> default float, int -> int64, bool -> bool).
pub fn full(shape: &[usize], value: Scalar, dtype: Option<DType>) -> Result<Tensor> {
    let dtype = dtype.unwrap_or(match value {
        Scalar::Float(_) => DEFAULT_FLOAT,
        Scalar::Int(_) => DType::I64,
        Scalar::Bool(_) => DType::Bool,
        Scalar::Complex(..) => DType::C64,
    });
    let n = checked_numel("full", shape)?;
    crate::tensor::check_scalar_fits("full", value, dtype)?;
    match value {
        Scalar::Float(f) => Tensor::from_f64s(&filled_vec("full", n, f)?, shape, dtype),
        Scalar::Int(i) => Tensor::from_i64s(&filled_vec("full", n, i)?, shape, dtype),
        Scalar::Bool(b) => Tensor::from_i64s(&filled_vec("full", n, b as i64)?, shape, dtype),
        Scalar::Complex(..) => {
            Tensor::from_complex(&filled_vec("full", n, value.to_complex())?, shape, dtype)
        }
    }
}

/// `torch.zeros_like(t)` (same shape, dtype and device; contiguous).
pub fn zeros_like(t: &Tensor) -> Result<Tensor> {
    Tensor::empty_on(t.shape(), t.dtype(), t.device())
}

/// `torch.empty_like(t)` (zero-filled).
pub fn empty_like(t: &Tensor) -> Result<Tensor> {
    zeros_like(t)
}

/// `torch.ones_like(t)`.
pub fn ones_like(t: &Tensor) -> Result<Tensor> {
    full_like(t, Scalar::Int(1))
}

/// `torch.full_like(t, value)`.
pub fn full_like(t: &Tensor, value: Scalar) -> Result<Tensor> {
    if t.device() == Device::Meta {
        return Tensor::meta(t.shape(), t.dtype());
    }
    full(t.shape(), value, Some(t.dtype()))
}

/// `torch.arange(start, end, step, dtype)`; without a dtype: int64 when all arguments are
/// integers, else the default float. Length is `ceil((end - start) / step)`.
pub fn arange(start: Scalar, end: Scalar, step: Scalar, dtype: Option<DType>) -> Result<Tensor> {
    let any_float = [start, end, step]
        .iter()
        .any(|s| matches!(s, Scalar::Float(_)));
    let dtype = dtype.unwrap_or(if any_float { DEFAULT_FLOAT } else { DType::I64 });
    if dtype == DType::Bool || dtype.is_complex() {
        return Err(Error::UnsupportedDType {
            op: "arange_cpu",
            dtype,
        });
    }
    let (s, e, st) = (start.to_f64(), end.to_f64(), step.to_f64());
    if st == 0.0 || !st.is_finite() || !s.is_finite() || !e.is_finite() {
        return Err(invalid(
            "arange",
            format!("step must be nonzero and bounds finite (start={s}, end={e}, step={st})"),
        ));
    }
    if (st > 0.0 && e < s) || (st < 0.0 && e > s) {
        return Err(invalid(
            "arange",
            "upper bound and larger bound inconsistent with step sign",
        ));
    }
    let len = ((e - s) / st).ceil();
    if len > (1u64 << 40) as f64 {
        return Err(invalid("arange", format!("too many elements ({len})")));
    }
    let len = len as usize;
    reserve_vec::<f64>("arange", len)?;
    if !dtype.is_float() {
        // Integer dtypes: PyTorch truncates start and step to integers; the length still
        // comes from the float arguments.
        let (s, st) = (start.to_f64() as i64, step.to_f64() as i64);
        let v: Vec<i64> = (0..len as i64)
            .map(|i| s.wrapping_add(i.wrapping_mul(st)))
            .collect();
        return Tensor::from_i64s(&v, &[len], dtype);
    }
    let v: Vec<f64> = (0..len).map(|i| s + st * i as f64).collect();
    Tensor::from_f64s(&v, &[len], dtype)
}

/// `torch.linspace(start, end, steps, dtype)`: the first half counts up from `start`, the
/// second half down from `end` (PyTorch's symmetric formula), in f32 arithmetic for f32.
pub fn linspace(start: f64, end: f64, steps: usize, dtype: Option<DType>) -> Result<Tensor> {
    let dtype = dtype.unwrap_or(DEFAULT_FLOAT);
    reserve_vec::<f64>("linspace", steps)?;
    if steps == 0 {
        return Tensor::from_f64s(&[], &[0], dtype);
    }
    if steps == 1 {
        return Tensor::from_f64s(&[start], &[1], dtype);
    }
    // Integer results: the bounds are first converted to the dtype (wrapping, as upstream's
    // scalar conversion does), then stepped in double.
    let (start, end) = if !dtype.is_float() && dtype != DType::Bool {
        let wrap = |v: f64| -> Result<f64> {
            Ok(Tensor::from_i64s(&[v as i64], &[], dtype)?.item()?.to_f64())
        };
        (wrap(start)?, wrap(end)?)
    } else {
        (start, end)
    };
    let half = steps / 2;
    let v: Vec<f64> = if dtype == DType::F16 {
        // float16: plain float arithmetic (no fused multiply-add), as upstream's.
        let (s, e) = (start as f32, end as f32);
        let step = (e - s) / (steps - 1) as f32;
        (0..steps)
            .map(|i| if i < half { s + step * i as f32 } else { e - step * (steps - i - 1) as f32 } as f64)
            .collect()
    } else if matches!(dtype, DType::F32 | DType::BF16) {
        let (s, e) = (start as f32, end as f32);
        let step = (e - s) / (steps - 1) as f32;
        (0..steps)
            // Fused multiply-add, as upstream's vectorized kernel computes each element.
            .map(|i| if i < half { step.mul_add(i as f32, s) } else { (-step).mul_add((steps - i - 1) as f32, e) } as f64)
            .collect()
    } else {
        let step = (end - start) / (steps - 1) as f64;
        (0..steps)
            .map(|i| {
                if i < half {
                    step.mul_add(i as f64, start)
                } else {
                    (-step).mul_add((steps - i - 1) as f64, end)
                }
            })
            .collect()
    };
    Tensor::from_f64s(&v, &[steps], dtype)
}

/// `torch.eye(n, m, dtype)` (`m` defaults to `n`).
pub fn eye(n: usize, m: Option<usize>, dtype: DType) -> Result<Tensor> {
    let m = m.unwrap_or(n);
    let total = checked_numel("eye", &[n, m])?;
    let mut v = filled_vec("eye", total, 0i64)?;
    for i in 0..n.min(m) {
        v[i * m + i] = 1;
    }
    Tensor::from_i64s(&v, &[n, m], dtype)
}
