//! Elementwise ops with broadcasting and type promotion. Every op goes through [`map_n`]:
//! operands are cast to the compute dtype (as PyTorch does before its kernels run),
//! broadcast, read in row-major order via the strided iterator, combined in f64 (float
//! dtypes; exact for +,-,*,/ and sqrt after rounding back) or wrapping i64 (integer and bool
//! dtypes), then cast to the output dtype.

use crate::dtype::{DType, Scalar, DEFAULT_FLOAT};
use crate::error::{invalid, reserve_vec, Error, Result};
use crate::layout::{for_each_offsets, for_each_run};
use crate::storage::Element;
use crate::tensor::{broadcast_all_shapes, common_device, result_type_of, Tensor};
use crate::with_dtype;
use crate::Device;

/// Anything usable as an operand of a binary op: a tensor or a Python-style scalar.
pub trait Operand {
    /// The operand as a tensor (scalars become wrapped numbers).
    fn to_operand(&self) -> Tensor;
}
impl Operand for Tensor {
    fn to_operand(&self) -> Tensor {
        self.clone()
    }
}
impl Operand for &Tensor {
    fn to_operand(&self) -> Tensor {
        (*self).clone()
    }
}
impl Operand for Scalar {
    fn to_operand(&self) -> Tensor {
        Tensor::wrap_scalar(*self)
    }
}
macro_rules! scalar_operand {
    ($($t:ty),*) => {$(
        impl Operand for $t {
            fn to_operand(&self) -> Tensor {
                Tensor::wrap_scalar(Scalar::from(*self))
            }
        }
    )*};
}
scalar_operand!(f64, f32, i64, i32, bool);

/// The per-element function of an op, in the float and/or integer domain.
pub(crate) enum Kernel<'a, const N: usize> {
    Float(&'a dyn Fn([f64; N]) -> f64),
    Int(&'a dyn Fn([i64; N]) -> Result<i64>),
    Both(
        &'a dyn Fn([f64; N]) -> f64,
        &'a dyn Fn([i64; N]) -> Result<i64>,
    ),
}

/// Applies `kernel` elementwise to the broadcast operands, computing in `compute` dtype and
/// writing `out` dtype. Meta operands yield a meta result of the right shape and dtype.
pub(crate) fn map_n<const N: usize>(
    op: &'static str,
    inputs: [&Tensor; N],
    compute: DType,
    out: DType,
    kernel: Kernel<'_, N>,
) -> Result<Tensor> {
    if let Some(dtype) = [compute, out]
        .into_iter()
        .chain(inputs.iter().map(|t| t.dtype()))
        .find(|d| d.is_complex())
    {
        // Complex values have their own kernels (ops::complex); the float and integer
        // domains here would drop imaginary parts.
        return Err(Error::UnsupportedDType { op, dtype });
    }
    let shape = broadcast_all_shapes(op, &inputs)?;
    let float_domain = compute.is_float();
    match (&kernel, float_domain) {
        (Kernel::Float(_), false) | (Kernel::Int(_), true) => {
            return Err(Error::UnsupportedDType { op, dtype: compute })
        }
        _ => {}
    }
    if common_device(op, &inputs)? == Device::Meta {
        return Tensor::meta(&shape, out);
    }
    let n: usize = shape.iter().product();
    if out == compute {
        let views = inputs
            .iter()
            .map(|t| t.to_dtype(compute)?.broadcast_to(&shape))
            .collect::<Result<Vec<_>>>()?;
        let views: [&Tensor; N] = std::array::from_fn(|k| &views[k]);
        return match (kernel, float_domain) {
            (Kernel::Float(f) | Kernel::Both(f, _), true) => with_dtype!(compute, T => {
                let g = |x: [T; N]| Ok(T::from_f64(f(x.map(|v| v.to_f64()))));
                map_fused::<T, N>(op, views, &shape, &g)
            }),
            (Kernel::Int(f) | Kernel::Both(_, f), false) => with_dtype!(compute, T => {
                let g = |x: [T; N]| f(x.map(|v| v.to_i64())).map(T::from_i64);
                map_fused::<T, N>(op, views, &shape, &g)
            }),
            _ => Err(Error::UnsupportedDType { op, dtype: compute }),
        };
    }
    if float_domain {
        let cols = inputs
            .iter()
            .map(|t| t.to_dtype(compute)?.broadcast_to(&shape)?.to_vec::<f64>())
            .collect::<Result<Vec<_>>>()?;
        let f = match kernel {
            Kernel::Float(f) | Kernel::Both(f, _) => f,
            Kernel::Int(_) => return Err(Error::UnsupportedDType { op, dtype: compute }),
        };
        let values: Vec<f64> = (0..n)
            .map(|i| f(std::array::from_fn(|k| cols[k][i])))
            .collect();
        Tensor::from_f64s(&values, &shape, out)
    } else {
        let cols = inputs
            .iter()
            .map(|t| t.to_dtype(compute)?.broadcast_to(&shape)?.to_vec::<i64>())
            .collect::<Result<Vec<_>>>()?;
        let f = match kernel {
            Kernel::Int(f) | Kernel::Both(_, f) => f,
            Kernel::Float(_) => return Err(Error::UnsupportedDType { op, dtype: compute }),
        };
        let values = (0..n)
            .map(|i| f(std::array::from_fn(|k| cols[k][i])))
            .collect::<Result<Vec<i64>>>()?;
        Tensor::from_i64s(&values, &shape, out)
    }
}

/// One pass over broadcast views that already have the compute dtype `T`: reads every
/// operand straight from its storage through the strided iterator and applies `f` (which
/// widens, computes and rounds back exactly as the general path does), with no temporaries.
fn map_fused<T: Element, const N: usize>(
    op: &'static str,
    views: [&Tensor; N],
    shape: &[usize],
    f: &dyn Fn([T; N]) -> Result<T>,
) -> Result<Tensor> {
    let storages = views
        .iter()
        .map(|v| {
            v.storage_ref().ok_or(Error::UnsupportedDevice {
                op,
                device: "meta".into(),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    // Lock each distinct storage once (a second read lock on the same RwLock could wait
    // behind a queued writer).
    let mut guards = Vec::new();
    let mut which = [0usize; N];
    for k in 0..N {
        match (0..k).find(|&j| storages[j].same(storages[k])) {
            Some(j) => which[k] = which[j],
            None => {
                which[k] = guards.len();
                guards.push(storages[k].read());
            }
        }
    }
    let slices = guards
        .iter()
        .map(|g| {
            T::slice(g).ok_or(Error::UnsupportedDType {
                op,
                dtype: g.dtype(),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let data: [&[T]; N] = std::array::from_fn(|k| slices[which[k]]);
    let strides: [&[usize]; N] = std::array::from_fn(|k| views[k].strides());
    let offsets: [usize; N] = std::array::from_fn(|k| views[k].storage_offset());
    let n: usize = shape.iter().product();
    let mut out = reserve_vec(op, n)?;
    let mut first_error = None;
    if n == 0 {
        // Nothing to read (an empty view's offset may lie past its storage).
    } else if views.iter().all(|v| v.is_contiguous()) {
        // Every operand in order: plain slices, no index bookkeeping per element.
        let runs: [&[T]; N] = std::array::from_fn(|k| &data[k][offsets[k]..offsets[k] + n]);
        // Element i of every operand at once (the index runs across the N slices).
        (0..n).for_each(|i| match f(std::array::from_fn(|k| runs[k][i])) {
            Ok(v) => out.push(v),
            Err(e) => {
                first_error.get_or_insert(e);
                out.push(T::default());
            }
        });
    } else {
        for_each_offsets(shape, strides, offsets, |o| {
            match f(std::array::from_fn(|k| data[k][o[k]])) {
                Ok(v) => out.push(v),
                Err(e) => {
                    first_error.get_or_insert(e);
                    out.push(T::default());
                }
            }
        });
    }
    drop(slices);
    drop(guards);
    if let Some(e) = first_error {
        return Err(e);
    }
    Tensor::from_vec(out, shape)
}

/// Same-shape contiguous f32 tensors in distinct storages: a direct f32 loop. Bit-identical
/// to the general path for +, -, *, / (IEEE rounds these correctly in f32, and rounding the
/// exact f64 result to f32 gives the same value). `None` when the fast case does not apply.
fn f32_same_shape(a: &Tensor, b: &Tensor, f: impl Fn(f32, f32) -> f32) -> Result<Option<Tensor>> {
    let applies = a.dtype() == DType::F32
        && b.dtype() == DType::F32
        && a.shape() == b.shape()
        && !a.is_wrapped_number()
        && !b.is_wrapped_number()
        && a.is_contiguous()
        && b.is_contiguous()
        && a.device() == Device::Cpu
        && b.device() == Device::Cpu
        && !a.shares_storage(b);
    if !applies {
        return Ok(None);
    }
    let out = a.with_data(|x: &[f32]| {
        b.with_data(|y: &[f32]| {
            x.iter()
                .zip(y)
                .map(|(p, q)| f(*p, *q))
                .collect::<Vec<f32>>()
        })
    })??;
    Ok(Some(Tensor::from_vec(out, a.shape())?))
}

/// float32 `a op b` with broadcasting, or with a Python scalar (a wrapped number, taken as
/// float32 as upstream's TensorIterator casts it to the common dtype): computed in float32,
/// which for +, -, *, / equals rounding the exact result once. Reads both operands in place
/// through their strides. `None` when the case does not apply.
fn f32_broadcast<F: Fn(f32, f32) -> f32>(a: &Tensor, b: &Tensor, f: F) -> Result<Option<Tensor>> {
    let cpu = a.device() == Device::Cpu && b.device() == Device::Cpu;
    let tensor = |t: &Tensor| t.dtype() == DType::F32 && !t.is_wrapped_number();
    let scalar = |t: &Tensor| t.is_wrapped_number() && t.dtype().is_float();
    if !cpu || !((tensor(a) && (tensor(b) || scalar(b))) || (scalar(a) && tensor(b))) {
        return Ok(None);
    }
    if let Some(t) = f32_same_shape(a, b, &f)? {
        return Ok(Some(t));
    }
    let shape = broadcast_all_shapes("f32 binary", &[a, b])?;
    let n: usize = shape.iter().product();
    let mut out = reserve_vec("f32 binary", n)?;
    if scalar(a) || scalar(b) {
        let (t, s, scalar_first) = if scalar(b) {
            (a, b, false)
        } else {
            (b, a, true)
        };
        let s = s.item()?.to_f64() as f32;
        let t = t.broadcast_to(&shape)?;
        let Some(storage) = t.storage_ref() else {
            return Ok(None);
        };
        let guard = storage.read();
        let Some(x) = f32::slice(&guard) else {
            return Ok(None);
        };
        for_each_run(
            &shape,
            [t.strides()],
            [t.storage_offset()],
            |[i], len, [st]| match (st, scalar_first) {
                (1, true) => out.extend(x[i..i + len].iter().map(|&v| f(s, v))),
                (1, false) => out.extend(x[i..i + len].iter().map(|&v| f(v, s))),
                (_, true) => out.extend((0..len).map(|k| f(s, x[i + k * st]))),
                (_, false) => out.extend((0..len).map(|k| f(x[i + k * st], s))),
            },
        );
        drop(guard);
        return Tensor::from_vec(out, &shape).map(Some);
    }
    let (va, vb) = (a.broadcast_to(&shape)?, b.broadcast_to(&shape)?);
    let (sa, sb) = match (va.storage_ref(), vb.storage_ref()) {
        (Some(x), Some(y)) => (x, y),
        _ => return Ok(None),
    };
    let ga = sa.read();
    let gb = if sa.same(sb) { None } else { Some(sb.read()) };
    let (Some(da), Some(db)) = (
        f32::slice(&ga),
        match &gb {
            Some(g) => f32::slice(g),
            None => f32::slice(&ga),
        },
    ) else {
        return Ok(None);
    };
    if n > 0 && va.is_contiguous() && vb.is_contiguous() {
        let (oa, ob) = (va.storage_offset(), vb.storage_offset());
        out.extend(
            da[oa..oa + n]
                .iter()
                .zip(&db[ob..ob + n])
                .map(|(&x, &y)| f(x, y)),
        );
    } else if n > 0 {
        // A run at a time, with slice loops for the usual steps (1: in order, 0: broadcast)
        // so they vectorize.
        for_each_run(
            &shape,
            [va.strides(), vb.strides()],
            [va.storage_offset(), vb.storage_offset()],
            |[i, j], len, step| match step {
                [1, 1] => out.extend(
                    da[i..i + len]
                        .iter()
                        .zip(&db[j..j + len])
                        .map(|(&x, &y)| f(x, y)),
                ),
                [1, 0] => {
                    let y = db[j];
                    out.extend(da[i..i + len].iter().map(|&x| f(x, y)));
                }
                [0, 1] => {
                    let x = da[i];
                    out.extend(db[j..j + len].iter().map(|&y| f(x, y)));
                }
                [si, sj] => out.extend((0..len).map(|k| f(da[i + k * si], db[j + k * sj]))),
            },
        );
    }
    drop(gb);
    drop(ga);
    Tensor::from_vec(out, &shape).map(Some)
}

/// float16/bfloat16 `a * b`, `a / b` where `b` is a 0-dim CPU tensor (a Python scalar): upstream reads
/// the scalar's original value in float32 ("opmath") instead of rounding it to the reduced
/// dtype first, computes in float32 and rounds once. `None` when this case does not apply.
fn reduced_float_scalar_rhs(
    op: &'static str,
    a: &Tensor,
    b: &Tensor,
    d: DType,
    f: &dyn Fn(f32, f32) -> f32,
) -> Result<Option<Tensor>> {
    if !matches!(d, DType::F16 | DType::BF16)
        || a.dtype() != d
        || b.dim() != 0
        || b.device() != Device::Cpu
        || a.device() != Device::Cpu
    {
        return Ok(None);
    }
    let bv = b.item()?.to_f64() as f32;
    let k = move |[x]: [f64; 1]| f(x as f32, bv) as f64;
    map_n(op, [a], d, d, Kernel::Float(&k)).map(Some)
}

/// Adds two elements of the same dtype as PyTorch would (wrapping ints, bool or).
pub(crate) fn add_elements<T: Element>(a: T, b: T) -> T {
    if T::DTYPE.is_complex() {
        T::from_complex(a.to_complex() + b.to_complex())
    } else if T::DTYPE.is_float() {
        T::from_f64(a.to_f64() + b.to_f64())
    } else {
        T::from_i64(a.to_i64().wrapping_add(b.to_i64()))
    }
}

fn promoted(a: &Tensor, b: &Tensor) -> Result<DType> {
    result_type_of(&[a, b])
}

/// Dtype of float-only unary ops: integers and bool compute in the default float dtype.
fn float_result(dtype: DType) -> DType {
    if dtype.is_float() {
        dtype
    } else {
        DEFAULT_FLOAT
    }
}

/// The error function (the C math library's, as PyTorch's CPU kernels use).
pub fn erf(x: f64) -> f64 {
    super::special::erf(x)
}

/// Python-style floor division of floats, as PyTorch's `div_floor_floating` does it.
fn floor_div_f64(a: f64, b: f64) -> f64 {
    if b == 0.0 {
        return a / b;
    }
    let m = a % b;
    let mut div = (a - m) / b;
    if m != 0.0 && ((b < 0.0) != (m < 0.0)) {
        div -= 1.0;
    }
    if div == 0.0 {
        return (0.0f64).copysign(a / b);
    }
    let mut fl = div.floor();
    if div - fl > 0.5 {
        fl += 1.0;
    }
    fl
}

fn int_floor_div(op: &'static str, a: i64, b: i64) -> Result<i64> {
    if b == 0 {
        return Err(invalid(op, "ZeroDivisionError"));
    }
    let q = a.wrapping_div(b);
    Ok(if (a.wrapping_rem(b) != 0) && ((a < 0) != (b < 0)) {
        q - 1
    } else {
        q
    })
}

/// Integer power by squaring with wrapping; negative exponents follow C integer semantics
/// (1 and -1 stay ±1, everything else truncates to 0).
fn int_pow(base: i64, exp: i64) -> i64 {
    if exp < 0 {
        return match base {
            1 => 1,
            -1 => {
                if exp % 2 == 0 {
                    1
                } else {
                    -1
                }
            }
            _ => 0,
        };
    }
    let (mut result, mut b, mut e) = (1i64, base, exp);
    while e > 0 {
        if e & 1 == 1 {
            result = result.wrapping_mul(b);
        }
        b = b.wrapping_mul(b);
        e >>= 1;
    }
    result
}

/// How `div` rounds its quotient.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RoundingMode {
    /// True division (integers promote to the default float dtype).
    None,
    /// Round toward zero (`rounding_mode="trunc"`).
    Trunc,
    /// Round toward negative infinity (`rounding_mode="floor"`).
    Floor,
}

/// How `gelu` evaluates the Gaussian CDF.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GeluApproximate {
    /// Exact: 0.5 x (1 + erf(x / sqrt 2)).
    None,
    /// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
    Tanh,
}

fn comparison(
    op: &'static str,
    a: &Tensor,
    b: &Tensor,
    f: fn(f64, f64) -> bool,
    g: fn(i64, i64) -> bool,
) -> Result<Tensor> {
    let compute = promoted(a, b)?;
    let ff = move |[x, y]: [f64; 2]| f(x, y) as u8 as f64;
    let fi = move |[x, y]: [i64; 2]| Ok(g(x, y) as i64);
    map_n(op, [a, b], compute, DType::Bool, Kernel::Both(&ff, &fi))
}

fn float_unary(op: &'static str, t: &Tensor, f: impl Fn(f64) -> f64) -> Result<Tensor> {
    // float32: the same f64 computation rounded once, in a loop specialised for `f`.
    if let Some(r) = f32_unary(op, t, |x| f(x as f64) as f32)? {
        return Ok(r);
    }
    let d = float_result(t.dtype());
    map_n(op, [t], d, d, Kernel::Float(&|[x]| f(x)))
}

/// `f` over every element of a float32 CPU tensor of any strides, into a new contiguous
/// tensor, in loops the compiler can vectorize (the general path calls a `dyn` kernel per
/// element). `None` when `t` is not float32 on the CPU. Callers pass the same arithmetic as
/// their general kernel, so the bits are the same.
fn f32_unary(op: &'static str, t: &Tensor, f: impl Fn(f32) -> f32) -> Result<Option<Tensor>> {
    if t.dtype() != DType::F32 || t.device() != Device::Cpu {
        return Ok(None);
    }
    let Some(storage) = t.storage_ref() else {
        return Ok(None);
    };
    let mut out = reserve_vec(op, t.numel())?;
    {
        let guard = storage.read();
        let Some(x) = f32::slice(&guard) else {
            return Ok(None);
        };
        for_each_run(
            t.shape(),
            [t.strides()],
            [t.storage_offset()],
            |[i], len, [st]| {
                if st == 1 {
                    out.extend(x[i..i + len].iter().map(|&v| f(v)));
                } else {
                    out.extend((0..len).map(|k| f(x[i + k * st])));
                }
            },
        );
    }
    Tensor::from_vec(out, t.shape()).map(Some)
}

/// float64 `tanh` of a contiguous CPU tensor, straight over its elements (the general path
/// gives the same values, more slowly). `None` for other tensors.
fn tanh_f64_contiguous(t: &Tensor) -> Result<Option<Tensor>> {
    if t.dtype() != DType::F64 || t.device() != Device::Cpu || !t.is_contiguous() {
        return Ok(None);
    }
    let out = t.with_data(|x: &[f64]| -> Result<Vec<f64>> {
        let mut out = reserve_vec("tanh", x.len())?;
        out.extend(x.iter().map(|&v| super::special::tanh_d2(v)));
        Ok(out)
    })??;
    Tensor::from_vec(out, t.shape()).map(Some)
}

/// Refuses float16 / bfloat16 for ops whose upstream CPU kernels exist for float32 and
/// float64 only.
fn no_reduced_float(op: &'static str, d: DType) -> Result<()> {
    if matches!(d, DType::F16 | DType::BF16) {
        return Err(Error::UnsupportedDType { op, dtype: d });
    }
    Ok(())
}

/// A float unary op whose upstream kernel computes float32 (and the half types, which it
/// widens to float32) in float32 arithmetic: `f32` for those dtypes, `f64` for float64.
fn by_precision(
    op: &'static str,
    t: &Tensor,
    f64: fn(f64) -> f64,
    f32: fn(f64) -> f64,
) -> Result<Tensor> {
    let d = float_result(t.dtype());
    let f = if d == DType::F64 { f64 } else { f32 };
    map_n(op, [t], d, d, Kernel::Float(&|[x]| f(x)))
}

fn float_only_unary(op: &'static str, t: &Tensor, f: &dyn Fn(f64) -> f64) -> Result<Tensor> {
    if !t.dtype().is_float() {
        return Err(Error::UnsupportedDType {
            op,
            dtype: t.dtype(),
        });
    }
    map_n(op, [t], t.dtype(), t.dtype(), Kernel::Float(&|[x]| f(x)))
}

fn no_bool(op: &'static str, t: &Tensor) -> Result<()> {
    if t.dtype() == DType::Bool {
        return Err(Error::UnsupportedDType {
            op,
            dtype: DType::Bool,
        });
    }
    Ok(())
}

/// NaN-propagating max/min, as `torch.maximum`/`torch.minimum`.
fn nan_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.max(b)
    }
}
fn nan_min(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.min(b)
    }
}

/// `where` whose condition is a contiguous CPU bool tensor with the result's elements and whose
/// values are each either such a tensor of the result dtype or a 0-dim scalar (generation's
/// logits masks: `where(mask, -inf, scores)`): one pass over slices. `None` otherwise.
fn where_contiguous(
    condition: &Tensor,
    input: &Tensor,
    other: &Tensor,
    d: DType,
) -> Result<Option<Tensor>> {
    let shape = broadcast_all_shapes("where", &[condition, input, other])?;
    let n: usize = shape.iter().product();
    // Broadcastable with as many elements: only size-1 dims differ, so the order is the same.
    let full = |t: &Tensor| t.numel() == n && t.is_contiguous() && t.device() == Device::Cpu;
    let value =
        |t: &Tensor| (full(t) && t.dtype() == d) || (t.dim() == 0 && t.device() == Device::Cpu);
    if !full(condition) || !value(input) || !value(other) {
        return Ok(None);
    }
    let mask = condition.to_vec::<bool>()?;
    with_dtype!(d, T => {
        let values = |t: &Tensor| -> Result<Vec<T>> { t.to_dtype(d)?.to_vec::<T>() };
        let (x, y) = (values(input)?, values(other)?);
        let at = |v: &[T], i: usize| if v.len() == 1 { v[0] } else { v[i] };
        let out: Vec<T> = mask
            .iter()
            .enumerate()
            .map(|(i, &c)| if c { at(&x, i) } else { at(&y, i) })
            .collect();
        Tensor::from_vec(out, &shape).map(Some)
    })
}

/// `torch.where(condition, input, other)`; the condition must be bool.
pub fn where_(condition: &Tensor, input: &Tensor, other: &Tensor) -> Result<Tensor> {
    if condition.dtype() != DType::Bool {
        return Err(invalid(
            "where",
            format!(
                "expected condition to be a boolean tensor, but got a tensor with dtype {}",
                condition.dtype().name()
            ),
        ));
    }
    let d = promoted(input, other)?;
    if d.is_complex() {
        return crate::ops::complex::select(condition, input, other, d);
    }
    if let Some(r) = where_contiguous(condition, input, other, d)? {
        return Ok(r);
    }
    let ff = |[c, x, y]: [f64; 3]| if c != 0.0 { x } else { y };
    let fi = |[c, x, y]: [i64; 3]| Ok(if c != 0 { x } else { y });
    // The condition is read in the compute domain: bool -> 0/1 in either domain.
    map_n(
        "where",
        [condition, input, other],
        d,
        d,
        Kernel::Both(&ff, &fi),
    )
}

impl Tensor {
    /// `torch.add(self, other)`.
    pub fn add(&self, other: impl Operand) -> Result<Tensor> {
        let other = other.to_operand();
        if let Some(t) = f32_broadcast(self, &other, |a, b| a + b)? {
            return Ok(t);
        }
        let d = promoted(self, &other)?;
        map_n(
            "add",
            [self, &other],
            d,
            d,
            Kernel::Both(&|[a, b]| a + b, &|[a, b]| Ok(a.wrapping_add(b))),
        )
    }

    /// `torch.sub(self, other)`; bool operands are refused like PyTorch.
    pub fn sub(&self, other: impl Operand) -> Result<Tensor> {
        let other = other.to_operand();
        if let Some(t) = f32_broadcast(self, &other, |a, b| a - b)? {
            return Ok(t);
        }
        if self.dtype() == DType::Bool || other.dtype() == DType::Bool {
            return Err(Error::UnsupportedDType {
                op: "sub",
                dtype: DType::Bool,
            });
        }
        let d = promoted(self, &other)?;
        map_n(
            "sub",
            [self, &other],
            d,
            d,
            Kernel::Both(&|[a, b]| a - b, &|[a, b]| Ok(a.wrapping_sub(b))),
        )
    }

    /// `torch.mul(self, other)` (bool * bool is logical and).
    pub fn mul(&self, other: impl Operand) -> Result<Tensor> {
        let other = other.to_operand();
        if let Some(t) = f32_broadcast(self, &other, |a, b| a * b)? {
            return Ok(t);
        }
        let d = promoted(self, &other)?;
        if let Some(t) = reduced_float_scalar_rhs("mul", self, &other, d, &|x, y| x * y)? {
            return Ok(t);
        }
        map_n(
            "mul",
            [self, &other],
            d,
            d,
            Kernel::Both(&|[a, b]| a * b, &|[a, b]| Ok(a.wrapping_mul(b))),
        )
    }

    /// `torch.div(self, other)`: true division (integers -> default float).
    pub fn div(&self, other: impl Operand) -> Result<Tensor> {
        self.div_mode(other, RoundingMode::None)
    }

    /// `torch.div(self, other, rounding_mode=...)`. Integer division by zero is an error.
    pub fn div_mode(&self, other: impl Operand, mode: RoundingMode) -> Result<Tensor> {
        let other = other.to_operand();
        let op = "div";
        let d = promoted(self, &other)?;
        match mode {
            RoundingMode::None if d == DType::F32 => {
                if let Some(t) = f32_broadcast(self, &other, |a, b| a / b)? {
                    return Ok(t);
                }
                map_n(op, [self, &other], d, d, Kernel::Float(&|[a, b]| a / b))
            }
            RoundingMode::None => {
                let d = float_result(d);
                if let Some(t) = reduced_float_scalar_rhs(op, self, &other, d, &|x, y| x / y)? {
                    return Ok(t);
                }
                map_n(op, [self, &other], d, d, Kernel::Float(&|[a, b]| a / b))
            }
            _ if d == DType::Bool => Err(Error::UnsupportedDType { op, dtype: d }),
            RoundingMode::Trunc => {
                let fi = |[a, b]: [i64; 2]| {
                    if b == 0 {
                        Err(invalid(op, "ZeroDivisionError"))
                    } else {
                        Ok(a.wrapping_div(b))
                    }
                };
                map_n(
                    op,
                    [self, &other],
                    d,
                    d,
                    Kernel::Both(&|[a, b]| (a / b).trunc(), &fi),
                )
            }
            RoundingMode::Floor => map_n(
                op,
                [self, &other],
                d,
                d,
                Kernel::Both(&|[a, b]| floor_div_f64(a, b), &|[a, b]| {
                    int_floor_div(op, a, b)
                }),
            ),
        }
    }

    /// `torch.pow(self, exponent)`. An integer tensor to a negative integer scalar is refused.
    pub fn pow(&self, exponent: impl Operand) -> Result<Tensor> {
        let e = exponent.to_operand();
        let d = promoted(self, &e)?;
        // A bool tensor to a bool scalar power is upstream's copy / fill-with-ones shortcut.
        if d == DType::Bool && (!e.is_wrapped_number() || self.is_wrapped_number()) {
            return Err(Error::UnsupportedDType {
                op: "pow",
                dtype: DType::Bool,
            });
        }
        if !d.is_float() && e.is_wrapped_number() && e.item()?.to_f64() < 0.0 {
            return Err(invalid(
                "pow",
                "integers to negative integer powers are not allowed",
            ));
        }
        if d.is_float() && d == self.dtype() && e.is_wrapped_number() && e.item()?.to_f64() == 2.0 {
            // Upstream's square special case; the product of two values is exact in the wider
            // compute type, so this rounds once like powf would.
            if let Some(t) = f32_broadcast(self, self, |a, b| a * b)? {
                return Ok(t);
            }
            let square = |[a]: [f64; 1]| a * a;
            return map_n("pow", [self], d, d, Kernel::Float(&square));
        }
        let ff = |[a, b]: [f64; 2]| a.powf(b);
        let fi = |[a, b]: [i64; 2]| Ok(int_pow(a, b));
        map_n("pow", [self, &e], d, d, Kernel::Both(&ff, &fi))
    }

    /// `torch.maximum` (NaN propagates).
    pub fn maximum(&self, other: &Tensor) -> Result<Tensor> {
        let d = promoted(self, other)?;
        map_n(
            "maximum",
            [self, other],
            d,
            d,
            Kernel::Both(&|[a, b]| nan_max(a, b), &|[a, b]| Ok(a.max(b))),
        )
    }

    /// `torch.minimum` (NaN propagates).
    pub fn minimum(&self, other: &Tensor) -> Result<Tensor> {
        let d = promoted(self, other)?;
        map_n(
            "minimum",
            [self, other],
            d,
            d,
            Kernel::Both(&|[a, b]| nan_min(a, b), &|[a, b]| Ok(a.min(b))),
        )
    }

    /// `torch.eq` (computed in the promoted dtype; result bool).
    pub fn eq(&self, other: impl Operand) -> Result<Tensor> {
        comparison(
            "eq",
            self,
            &other.to_operand(),
            |a, b| a == b,
            |a, b| a == b,
        )
    }
    /// `torch.ne`.
    pub fn ne(&self, other: impl Operand) -> Result<Tensor> {
        comparison(
            "ne",
            self,
            &other.to_operand(),
            |a, b| a != b,
            |a, b| a != b,
        )
    }
    /// `torch.lt`.
    pub fn lt(&self, other: impl Operand) -> Result<Tensor> {
        comparison("lt", self, &other.to_operand(), |a, b| a < b, |a, b| a < b)
    }
    /// `torch.le`.
    pub fn le(&self, other: impl Operand) -> Result<Tensor> {
        comparison(
            "le",
            self,
            &other.to_operand(),
            |a, b| a <= b,
            |a, b| a <= b,
        )
    }
    /// `torch.gt`.
    pub fn gt(&self, other: impl Operand) -> Result<Tensor> {
        comparison("gt", self, &other.to_operand(), |a, b| a > b, |a, b| a > b)
    }
    /// `torch.ge`.
    pub fn ge(&self, other: impl Operand) -> Result<Tensor> {
        comparison(
            "ge",
            self,
            &other.to_operand(),
            |a, b| a >= b,
            |a, b| a >= b,
        )
    }

    /// `torch.logical_and` (nonzero is true; result bool).
    pub fn logical_and(&self, other: &Tensor) -> Result<Tensor> {
        self.logical("logical_and", other, |a, b| a && b)
    }
    /// `torch.logical_or`.
    pub fn logical_or(&self, other: &Tensor) -> Result<Tensor> {
        self.logical("logical_or", other, |a, b| a || b)
    }
    /// `torch.logical_xor`.
    pub fn logical_xor(&self, other: &Tensor) -> Result<Tensor> {
        self.logical("logical_xor", other, |a, b| a != b)
    }
    fn logical(
        &self,
        op: &'static str,
        other: &Tensor,
        f: fn(bool, bool) -> bool,
    ) -> Result<Tensor> {
        let a = self.ne(false)?;
        let b = other.ne(false)?;
        map_n(
            op,
            [&a, &b],
            DType::Bool,
            DType::Bool,
            Kernel::Int(&|[x, y]| Ok(f(x != 0, y != 0) as i64)),
        )
    }
    /// `torch.logical_not`.
    pub fn logical_not(&self) -> Result<Tensor> {
        self.eq(false)
    }

    /// `torch.neg` (refused for bool).
    pub fn neg(&self) -> Result<Tensor> {
        if self.dtype() == DType::Bool {
            return Err(Error::UnsupportedDType {
                op: "neg",
                dtype: DType::Bool,
            });
        }
        if let Some(r) = f32_unary("neg", self, |x| -x)? {
            return Ok(r);
        }
        let d = self.dtype();
        map_n(
            "neg",
            [self],
            d,
            d,
            Kernel::Both(&|[a]| -a, &|[a]| Ok(a.wrapping_neg())),
        )
    }

    /// `torch.abs` (refused for bool).
    pub fn abs(&self) -> Result<Tensor> {
        no_bool("abs", self)?;
        let d = self.dtype();
        map_n(
            "abs",
            [self],
            d,
            d,
            Kernel::Both(&|[a]| a.abs(), &|[a]| Ok(a.wrapping_abs())),
        )
    }

    /// `torch.exp` (integers -> default float).
    pub fn exp(&self) -> Result<Tensor> {
        float_unary("exp", self, f64::exp)
    }
    /// `torch.log`.
    pub fn log(&self) -> Result<Tensor> {
        float_unary("log", self, f64::ln)
    }
    /// `torch.log1p`.
    pub fn log1p(&self) -> Result<Tensor> {
        float_unary("log1p", self, f64::ln_1p)
    }
    /// `torch.sqrt`.
    pub fn sqrt(&self) -> Result<Tensor> {
        float_unary("sqrt", self, f64::sqrt)
    }
    /// `torch.rsqrt`.
    pub fn rsqrt(&self) -> Result<Tensor> {
        float_unary("rsqrt", self, |x| 1.0 / x.sqrt())
    }
    /// `torch.sin`.
    pub fn sin(&self) -> Result<Tensor> {
        float_unary("sin", self, f64::sin)
    }
    /// `torch.cos`.
    pub fn cos(&self) -> Result<Tensor> {
        float_unary("cos", self, f64::cos)
    }
    /// `torch.tanh`.
    pub fn tanh(&self) -> Result<Tensor> {
        // float64: a double-double evaluation rounded once (upstream's CPU kernel, MKL's
        // vdTanh, is within 1 ulp and agrees with it on about 98.5% of inputs; the C
        // library's tanh agrees on about 86%). Other dtypes: computed in float64, rounded.
        if let Some(r) = tanh_f64_contiguous(self)? {
            return Ok(r);
        }
        if self.dtype() == DType::F64 {
            return float_unary("tanh", self, super::special::tanh_d2);
        }
        float_unary("tanh", self, f64::tanh)
    }
    /// `torch.sigmoid`.
    pub fn sigmoid(&self) -> Result<Tensor> {
        // Below float64 upstream computes in float32: 1 / (1 + e^-x), each step rounded.
        by_precision(
            "sigmoid",
            self,
            |x| 1.0 / (1.0 + (-x).exp()),
            |x| {
                let x = x as f32;
                (1.0 / (1.0 + (-x).exp())) as f64
            },
        )
    }
    /// `torch.nn.functional.silu` (float dtypes only).
    pub fn silu(&self) -> Result<Tensor> {
        if self.dtype() == DType::F32 && self.device() == Device::Cpu && self.is_contiguous() {
            // Upstream computes float32 SiLU in float32 with a vectorized exp; so do we.
            let mut out = vec![0f32; self.numel()];
            self.with_data(|x: &[f32]| crate::kernels::silu_f32(x, &mut out))?;
            return Tensor::from_vec(out, self.shape());
        }
        float_only_unary("silu", self, &|x| x / (1.0 + (-x).exp()))
    }
    /// `torch.nn.functional.gelu` (float dtypes only).
    pub fn gelu(&self, approximate: GeluApproximate) -> Result<Tensor> {
        match approximate {
            GeluApproximate::None => float_only_unary("gelu", self, &|x| {
                0.5 * x * (1.0 + erf(x / std::f64::consts::SQRT_2))
            }),
            GeluApproximate::Tanh => float_only_unary("gelu", self, &|x| {
                let k = (2.0 / std::f64::consts::PI).sqrt();
                0.5 * x * (1.0 + (k * (x + 0.044715 * x * x * x)).tanh())
            }),
        }
    }
    /// `torch.relu` (refused for bool).
    pub fn relu(&self) -> Result<Tensor> {
        no_bool("relu", self)?;
        let d = self.dtype();
        let ff = |[a]: [f64; 1]| if a < 0.0 { 0.0 } else { a };
        map_n("relu", [self], d, d, Kernel::Both(&ff, &|[a]| Ok(a.max(0))))
    }

    fn rounding(&self, op: &'static str, f: fn(f64) -> f64) -> Result<Tensor> {
        no_bool(op, self)?;
        let d = self.dtype();
        map_n(op, [self], d, d, Kernel::Both(&|[a]| f(a), &|[a]| Ok(a)))
    }
    /// `torch.erf` (integers -> default float).
    pub fn erf(&self) -> Result<Tensor> {
        float_unary("erf", self, erf)
    }
    /// `torch.reciprocal`.
    pub fn reciprocal(&self) -> Result<Tensor> {
        float_unary("reciprocal", self, |x| 1.0 / x)
    }
    /// `torch.log2`.
    pub fn log2(&self) -> Result<Tensor> {
        float_unary("log2", self, f64::log2)
    }
    /// `torch.log10`.
    pub fn log10(&self) -> Result<Tensor> {
        float_unary("log10", self, f64::log10)
    }
    /// `torch.exp2`.
    pub fn exp2(&self) -> Result<Tensor> {
        float_unary("exp2", self, f64::exp2)
    }
    /// `torch.expm1`.
    pub fn expm1(&self) -> Result<Tensor> {
        float_unary("expm1", self, f64::exp_m1)
    }
    /// `torch.tan`.
    pub fn tan(&self) -> Result<Tensor> {
        float_unary("tan", self, f64::tan)
    }
    /// `torch.atan`.
    pub fn atan(&self) -> Result<Tensor> {
        float_unary("atan", self, f64::atan)
    }
    /// `torch.asin`.
    pub fn asin(&self) -> Result<Tensor> {
        float_unary("asin", self, f64::asin)
    }
    /// `torch.acos`.
    pub fn acos(&self) -> Result<Tensor> {
        float_unary("acos", self, f64::acos)
    }
    /// `torch.sinh`.
    pub fn sinh(&self) -> Result<Tensor> {
        float_unary("sinh", self, f64::sinh)
    }
    /// `torch.cosh`.
    pub fn cosh(&self) -> Result<Tensor> {
        float_unary("cosh", self, f64::cosh)
    }
    /// `torch.trunc` (integers unchanged; bool refused).
    pub fn trunc(&self) -> Result<Tensor> {
        self.rounding("trunc", f64::trunc)
    }
    /// `torch.sign`: -1, 0 or 1 in the input dtype (NaN gives 0, bool stays bool).
    pub fn sign(&self) -> Result<Tensor> {
        let d = self.dtype();
        let ff = |[a]: [f64; 1]| {
            if a > 0.0 {
                1.0
            } else if a < 0.0 {
                -1.0
            } else {
                0.0
            }
        };
        map_n(
            "sign",
            [self],
            d,
            d,
            Kernel::Both(&ff, &|[a]| Ok(a.signum())),
        )
    }

    /// `torch.remainder`: Python's modulo (the result takes the divisor's sign); integer
    /// division by zero is an error.
    pub fn remainder(&self, other: impl Operand) -> Result<Tensor> {
        let other = other.to_operand();
        let d = promoted(self, &other)?;
        if d == DType::Bool {
            return Err(Error::UnsupportedDType {
                op: "remainder",
                dtype: d,
            });
        }
        let ff = |[a, b]: [f64; 2]| {
            let m = a % b;
            if m != 0.0 && ((b < 0.0) != (m < 0.0)) {
                m + b
            } else {
                m
            }
        };
        let fi = |[a, b]: [i64; 2]| {
            if b == 0 {
                return Err(invalid("remainder", "ZeroDivisionError"));
            }
            let m = a.wrapping_rem(b);
            Ok(if m != 0 && ((b < 0) != (m < 0)) {
                m + b
            } else {
                m
            })
        };
        map_n("remainder", [self, &other], d, d, Kernel::Both(&ff, &fi))
    }

    /// `torch.fmod`: C's fmod (the result takes the dividend's sign).
    pub fn fmod(&self, other: impl Operand) -> Result<Tensor> {
        let other = other.to_operand();
        let d = promoted(self, &other)?;
        if d == DType::Bool {
            return Err(Error::UnsupportedDType {
                op: "fmod",
                dtype: d,
            });
        }
        let fi = |[a, b]: [i64; 2]| {
            if b == 0 {
                Err(invalid("fmod", "ZeroDivisionError"))
            } else {
                Ok(a.wrapping_rem(b))
            }
        };
        map_n(
            "fmod",
            [self, &other],
            d,
            d,
            Kernel::Both(&|[a, b]| a % b, &fi),
        )
    }

    /// `torch.atan2(self, other)` (integers -> default float).
    pub fn atan2(&self, other: &Tensor) -> Result<Tensor> {
        let d = float_result(promoted(self, other)?);
        map_n(
            "atan2",
            [self, other],
            d,
            d,
            Kernel::Float(&|[a, b]| a.atan2(b)),
        )
    }

    fn bitwise(
        &self,
        op: &'static str,
        other: impl Operand,
        f: fn(i64, i64) -> i64,
    ) -> Result<Tensor> {
        let other = other.to_operand();
        let d = promoted(self, &other)?;
        if d.is_float() {
            return Err(Error::UnsupportedDType { op, dtype: d });
        }
        map_n(op, [self, &other], d, d, Kernel::Int(&|[a, b]| Ok(f(a, b))))
    }
    /// `torch.bitwise_and` (integers and bool).
    pub fn bitwise_and(&self, other: impl Operand) -> Result<Tensor> {
        self.bitwise("bitwise_and", other, |a, b| a & b)
    }
    /// `torch.bitwise_or`.
    pub fn bitwise_or(&self, other: impl Operand) -> Result<Tensor> {
        self.bitwise("bitwise_or", other, |a, b| a | b)
    }
    /// `torch.bitwise_xor`.
    pub fn bitwise_xor(&self, other: impl Operand) -> Result<Tensor> {
        self.bitwise("bitwise_xor", other, |a, b| a ^ b)
    }
    /// `torch.bitwise_not` (`~`; logical not for bool).
    pub fn bitwise_not(&self) -> Result<Tensor> {
        let d = self.dtype();
        if d == DType::Bool {
            return self.logical_not();
        }
        if d.is_float() {
            return Err(Error::UnsupportedDType {
                op: "bitwise_not",
                dtype: d,
            });
        }
        map_n("bitwise_not", [self], d, d, Kernel::Int(&|[a]| Ok(!a)))
    }

    /// `torch.floor` (integers are returned unchanged, as a copy).
    pub fn floor(&self) -> Result<Tensor> {
        self.rounding("floor", f64::floor)
    }
    /// `torch.ceil`.
    pub fn ceil(&self) -> Result<Tensor> {
        self.rounding("ceil", f64::ceil)
    }
    /// `torch.round` (half to even).
    pub fn round(&self) -> Result<Tensor> {
        self.rounding("round", f64::round_ties_even)
    }

    /// `torch.isnan`.
    pub fn isnan(&self) -> Result<Tensor> {
        let d = self.dtype();
        map_n(
            "isnan",
            [self],
            d,
            DType::Bool,
            Kernel::Both(&|[a]| a.is_nan() as u8 as f64, &|_| Ok(0)),
        )
    }
    /// `torch.isinf`.
    pub fn isinf(&self) -> Result<Tensor> {
        let d = self.dtype();
        map_n(
            "isinf",
            [self],
            d,
            DType::Bool,
            Kernel::Both(&|[a]| a.is_infinite() as u8 as f64, &|_| Ok(0)),
        )
    }

    /// `torch.clamp(self, min, max)`: bounds take part in type promotion; NaN stays NaN; when
    /// min > max every element becomes max.
    pub fn clamp(&self, min: Option<&Tensor>, max: Option<&Tensor>) -> Result<Tensor> {
        let mut ops: Vec<&Tensor> = vec![self];
        ops.extend(min);
        ops.extend(max);
        if ops.len() == 1 {
            return Err(invalid(
                "clamp",
                "at least one of 'min' or 'max' must not be None",
            ));
        }
        let d = result_type_of(&ops)?;
        // A missing bound is represented by an infinite/extreme tensor so one kernel serves
        // (false / true for bool, where max and min are logical or / and).
        let lo = match min {
            Some(m) => m.clone(),
            None => Tensor::scalar_tensor(
                if d.is_float() {
                    Scalar::Float(f64::NEG_INFINITY)
                } else if d == DType::Bool {
                    Scalar::Int(0)
                } else {
                    Scalar::Int(i64::MIN)
                },
                d,
            ),
        };
        let hi = match max {
            Some(m) => m.clone(),
            None => Tensor::scalar_tensor(
                if d.is_float() {
                    Scalar::Float(f64::INFINITY)
                } else if d == DType::Bool {
                    Scalar::Int(1)
                } else {
                    Scalar::Int(i64::MAX)
                },
                d,
            ),
        };
        let ff = |[x, l, h]: [f64; 3]| {
            if x.is_nan() || l.is_nan() || h.is_nan() {
                f64::NAN
            } else {
                x.max(l).min(h)
            }
        };
        map_n(
            "clamp",
            [self, &lo, &hi],
            d,
            d,
            Kernel::Both(&ff, &|[x, l, h]| Ok(x.max(l).min(h))),
        )
    }

    /// `clamp` with scalar bounds.
    pub fn clamp_scalar(&self, min: Option<Scalar>, max: Option<Scalar>) -> Result<Tensor> {
        let lo = min.map(Tensor::wrap_scalar);
        let hi = max.map(Tensor::wrap_scalar);
        self.clamp(lo.as_ref(), hi.as_ref())
    }
}

/// Rounds `v` to the precision of the float dtype `d` (the value stays an f64).
fn round_to(d: DType, v: f64) -> f64 {
    match d {
        DType::F32 => v as f32 as f64,
        DType::F16 => half::f16::from_f64(v).to_f64(),
        DType::BF16 => half::bf16::from_f64(v).to_f64(),
        _ => v,
    }
}

fn bool_unary(
    op: &'static str,
    t: &Tensor,
    f: fn(f64) -> bool,
    g: fn(i64) -> bool,
) -> Result<Tensor> {
    let d = t.dtype();
    let ff = move |[x]: [f64; 1]| f(x) as u8 as f64;
    let fi = move |[x]: [i64; 1]| Ok(g(x) as i64);
    map_n(op, [t], d, DType::Bool, Kernel::Both(&ff, &fi))
}

impl Tensor {
    /// `torch.acosh` (integers -> default float).
    pub fn acosh(&self) -> Result<Tensor> {
        float_unary("acosh", self, super::special::acosh)
    }
    /// `torch.asinh`.
    pub fn asinh(&self) -> Result<Tensor> {
        float_unary("asinh", self, super::special::asinh)
    }
    /// `torch.atanh`.
    pub fn atanh(&self) -> Result<Tensor> {
        float_unary("atanh", self, super::special::atanh)
    }
    /// `torch.deg2rad`: x * (pi / 180).
    pub fn deg2rad(&self) -> Result<Tensor> {
        float_unary("deg2rad", self, |x| x * 0.017_453_292_519_943_295)
    }
    /// `torch.rad2deg`: x * (180 / pi).
    pub fn rad2deg(&self) -> Result<Tensor> {
        float_unary("rad2deg", self, |x| x * 57.295_779_513_082_32)
    }
    /// `torch.digamma`.
    pub fn digamma(&self) -> Result<Tensor> {
        by_precision(
            "digamma",
            self,
            super::special::digamma,
            super::special::digamma_f32,
        )
    }
    /// `torch.lgamma`.
    pub fn lgamma(&self) -> Result<Tensor> {
        float_unary("lgamma", self, super::special::lgamma)
    }
    /// `torch.erfc`.
    pub fn erfc(&self) -> Result<Tensor> {
        float_unary("erfc", self, super::special::erfc)
    }
    /// `torch.erfinv`.
    pub fn erfinv(&self) -> Result<Tensor> {
        float_unary("erfinv", self, super::special::erfinv)
    }
    /// `torch.i0`.
    pub fn i0(&self) -> Result<Tensor> {
        by_precision("i0", self, super::special::i0, super::special::i0_f32)
    }
    /// `torch.special.i0e`: I_0(x) e^-|x|.
    pub fn i0e(&self) -> Result<Tensor> {
        by_precision(
            "special_i0e",
            self,
            super::special::i0e,
            super::special::i0e_f32,
        )
    }
    /// `torch.special.i1`: the modified Bessel function I_1 (e^|x| overflowing in the
    /// computing dtype gives ±inf, as upstream).
    pub fn i1(&self) -> Result<Tensor> {
        by_precision(
            "special_i1",
            self,
            super::special::i1,
            super::special::i1_f32,
        )
    }
    /// `torch.special.bessel_y0`.
    pub fn bessel_y0(&self) -> Result<Tensor> {
        no_reduced_float("special_bessel_y0", float_result(self.dtype()))?;
        by_precision(
            "special_bessel_y0",
            self,
            super::special::bessel_y0,
            super::special::bessel_y0_f32,
        )
    }
    /// `torch.special.bessel_y1`.
    pub fn bessel_y1(&self) -> Result<Tensor> {
        no_reduced_float("special_bessel_y1", float_result(self.dtype()))?;
        by_precision(
            "special_bessel_y1",
            self,
            super::special::bessel_y1,
            super::special::bessel_y1_f32,
        )
    }
    /// `torch.special.modified_bessel_k0` and its relatives (`kind`).
    pub fn bessel_k(&self, kind: super::special::BesselK, op: &'static str) -> Result<Tensor> {
        let d = float_result(self.dtype());
        no_reduced_float(op, d)?;
        let f = move |[x]: [f64; 1]| {
            if d == DType::F64 {
                super::special::bessel_k(kind, x)
            } else {
                super::special::bessel_k_f32(kind, x)
            }
        };
        map_n(op, [self], d, d, Kernel::Float(&f))
    }
    /// `torch.special.modified_bessel_i0` (upstream's own copy of `i0`'s algorithm).
    pub fn modified_bessel_i0(&self) -> Result<Tensor> {
        no_reduced_float("special_modified_bessel_i0", float_result(self.dtype()))?;
        by_precision(
            "special_modified_bessel_i0",
            self,
            super::special::i0,
            super::special::i0_f32,
        )
    }
    /// `torch.special.modified_bessel_i1`.
    pub fn modified_bessel_i1(&self) -> Result<Tensor> {
        no_reduced_float("special_modified_bessel_i1", float_result(self.dtype()))?;
        by_precision(
            "special_modified_bessel_i1",
            self,
            super::special::modified_bessel_i1,
            super::special::modified_bessel_i1_f32,
        )
    }
    /// `torch.special.i1e`: I_1(x) e^-|x|.
    pub fn i1e(&self) -> Result<Tensor> {
        by_precision(
            "special_i1e",
            self,
            super::special::i1e,
            super::special::i1e_f32,
        )
    }
    /// `torch.special.ndtri`: the standard normal quantile function.
    pub fn ndtri(&self) -> Result<Tensor> {
        no_reduced_float("special_ndtri", float_result(self.dtype()))?;
        by_precision(
            "special_ndtri",
            self,
            super::special::ndtri,
            super::special::ndtri_f32,
        )
    }
    /// `torch.special.log_ndtr`: ln Φ(x).
    pub fn log_ndtr(&self) -> Result<Tensor> {
        no_reduced_float("special_log_ndtr", float_result(self.dtype()))?;
        by_precision(
            "special_log_ndtr",
            self,
            super::special::log_ndtr,
            super::special::log_ndtr_f32,
        )
    }
    /// `torch.special.erfcx`: e^(x²) erfc(x).
    pub fn erfcx(&self) -> Result<Tensor> {
        no_reduced_float("special_erfcx", float_result(self.dtype()))?;
        float_unary("special_erfcx", self, super::special::erfcx)
    }
    /// `torch.special.bessel_j0`.
    pub fn bessel_j0(&self) -> Result<Tensor> {
        no_reduced_float("special_bessel_j0", float_result(self.dtype()))?;
        by_precision(
            "special_bessel_j0",
            self,
            super::special::bessel_j0,
            super::special::bessel_j0_f32,
        )
    }
    /// `torch.special.bessel_j1`.
    pub fn bessel_j1(&self) -> Result<Tensor> {
        no_reduced_float("special_bessel_j1", float_result(self.dtype()))?;
        by_precision(
            "special_bessel_j1",
            self,
            super::special::bessel_j1,
            super::special::bessel_j1_f32,
        )
    }
    /// `torch.special.spherical_bessel_j0`: sin(x) / x.
    pub fn spherical_bessel_j0(&self) -> Result<Tensor> {
        no_reduced_float("special_spherical_bessel_j0", float_result(self.dtype()))?;
        by_precision(
            "special_spherical_bessel_j0",
            self,
            super::special::spherical_bessel_j0,
            super::special::spherical_bessel_j0_f32,
        )
    }
    /// `torch.special.zeta(self, other)`: the Hurwitz zeta function ζ(self, other).
    pub fn zeta(&self, other: impl Operand) -> Result<Tensor> {
        let other = other.to_operand();
        let d = float_result(promoted(self, &other)?);
        no_reduced_float("special_zeta", d)?;
        let f: fn(f64, f64) -> f64 = if d == DType::F64 {
            super::special::zeta
        } else {
            super::special::zeta_f32
        };
        map_n(
            "special_zeta",
            [self, &other],
            d,
            d,
            Kernel::Float(&|[x, q]| f(x, q)),
        )
    }
    /// `torch.special.{chebyshev_polynomial_t, chebyshev_polynomial_u, hermite_polynomial_h,
    /// hermite_polynomial_he, laguerre_polynomial_l, legendre_polynomial_p}(self, n)`.
    pub fn special_polynomial(
        &self,
        kind: super::special::Polynomial,
        op: &'static str,
        n: impl Operand,
    ) -> Result<Tensor> {
        let n = n.to_operand();
        let d = float_result(promoted(self, &n)?);
        no_reduced_float(op, d)?;
        let f = move |[x, k]: [f64; 2]| {
            if d == DType::F64 {
                super::special::polynomial(kind, x, k)
            } else {
                super::special::polynomial_f32(kind, x, k)
            }
        };
        map_n(op, [self, &n], d, d, Kernel::Float(&f))
    }
    /// `torch.polygamma(n, self)`: the n-th derivative of the digamma function.
    pub fn polygamma(&self, n: i64) -> Result<Tensor> {
        if n < 0 {
            return Err(invalid(
                "polygamma",
                "polygamma(n, x) does not support negative n.",
            ));
        }
        let d = float_result(self.dtype());
        let f = move |[x]: [f64; 1]| {
            if d == DType::F64 {
                super::special::polygamma_with(n, x, super::special::zeta)
            } else {
                super::special::polygamma_f32(n, x)
            }
        };
        map_n("polygamma", [self], d, d, Kernel::Float(&f))
    }
    /// `torch.frexp`: (mantissa, exponent) with self = mantissa · 2^exponent, the mantissa
    /// in (-1, -0.5] ∪ [0.5, 1) (zeros, infinities and NaN keep their value, exponent 0);
    /// the exponent is int32.
    pub fn frexp(&self) -> Result<(Tensor, Tensor)> {
        let d = self.dtype();
        if !d.is_float() {
            return Err(invalid(
                "frexp",
                "torch.frexp() only supports floating-point dtypes",
            ));
        }
        let m = map_n(
            "frexp",
            [self],
            d,
            d,
            Kernel::Float(&|[x]| super::special::frexp(x).0),
        )?;
        let e = map_n(
            "frexp",
            [self],
            d,
            DType::I32,
            Kernel::Float(&|[x]| super::special::frexp(x).1 as f64),
        )?;
        Ok((m, e))
    }
    /// `torch.sinc`: sin(pi x) / (pi x), 1 at 0.
    pub fn sinc(&self) -> Result<Tensor> {
        // pi * x is formed in the op's math type (f32 below float64), as upstream does.
        let d = float_result(self.dtype());
        let f = move |[x]: [f64; 1]| {
            if x == 0.0 {
                1.0
            } else {
                let p = if d == DType::F64 {
                    std::f64::consts::PI * x
                } else {
                    (std::f32::consts::PI * x as f32) as f64
                };
                p.sin() / p
            }
        };
        map_n("sinc", [self], d, d, Kernel::Float(&f))
    }
    /// `torch.logit(x, eps)`: ln(x / (1 - x)), x clamped to [eps, 1 - eps] when eps is given
    /// and non-negative.
    pub fn logit(&self, eps: Option<f64>) -> Result<Tensor> {
        let d = float_result(self.dtype());
        let f = move |[x]: [f64; 1]| {
            let x = match eps {
                Some(e) if e >= 0.0 => {
                    let lo = round_to(d, e);
                    let hi = round_to(d, 1.0 - e);
                    if x < lo {
                        lo
                    } else if x > hi {
                        hi
                    } else {
                        x
                    }
                }
                _ => x,
            };
            (x / (1.0 - x)).ln()
        };
        map_n("logit", [self], d, d, Kernel::Float(&f))
    }
    /// `torch.frac`: x - trunc(x) (float dtypes only).
    pub fn frac(&self) -> Result<Tensor> {
        float_only_unary("frac", self, &|x| x - x.trunc())
    }
    /// `torch.angle` of a real tensor: pi for negatives, 0 otherwise, NaN stays NaN.
    pub fn angle(&self) -> Result<Tensor> {
        float_unary("angle", self, |x| {
            if x.is_nan() {
                x
            } else if x < 0.0 {
                std::f64::consts::PI
            } else {
                0.0
            }
        })
    }
    /// `torch.square`: `pow(self, 2)` (bool -> int64).
    pub fn square(&self) -> Result<Tensor> {
        self.pow(Scalar::Int(2))
    }
    /// `torch.signbit`.
    pub fn signbit(&self) -> Result<Tensor> {
        bool_unary("signbit", self, |x| x.is_sign_negative(), |x| x < 0)
    }
    /// `torch.isposinf`.
    pub fn isposinf(&self) -> Result<Tensor> {
        bool_unary("isposinf", self, |x| x == f64::INFINITY, |_| false)
    }
    /// `torch.isneginf`.
    pub fn isneginf(&self) -> Result<Tensor> {
        bool_unary("isneginf", self, |x| x == f64::NEG_INFINITY, |_| false)
    }
    /// `torch.isreal` of a real tensor: all true.
    pub fn isreal(&self) -> Result<Tensor> {
        bool_unary("isreal", self, |_| true, |_| true)
    }
    /// `torch.nan_to_num`: NaN, +inf and -inf replaced (by 0 and the dtype's largest and
    /// lowest finite values unless given); integer and bool tensors are copied.
    pub fn nan_to_num(
        &self,
        nan: Option<f64>,
        posinf: Option<f64>,
        neginf: Option<f64>,
    ) -> Result<Tensor> {
        let d = self.dtype();
        let max = match d {
            DType::F64 => f64::MAX,
            DType::F32 => f32::MAX as f64,
            DType::F16 => half::f16::MAX.to_f64(),
            DType::BF16 => half::bf16::MAX.to_f64(),
            _ => 0.0,
        };
        let (n, p, m) = (
            nan.unwrap_or(0.0),
            posinf.unwrap_or(max),
            neginf.unwrap_or(-max),
        );
        let ff = move |[x]: [f64; 1]| {
            if x.is_nan() {
                n
            } else if x == f64::INFINITY {
                p
            } else if x == f64::NEG_INFINITY {
                m
            } else {
                x
            }
        };
        map_n("nan_to_num", [self], d, d, Kernel::Both(&ff, &|[x]| Ok(x)))
    }
    /// `torch.round(x, decimals=d)` (float dtypes only), computed in the tensor's dtype as
    /// PyTorch does: nearbyint(x * 10^d) / 10^d, or nearbyint(x / 10^-d) * 10^-d.
    pub fn round_decimals(&self, decimals: i64) -> Result<Tensor> {
        let d = self.dtype();
        if !d.is_float() {
            return Err(Error::UnsupportedDType {
                op: "round",
                dtype: d,
            });
        }
        let neg = decimals < 0;
        let p = round_to(d, 10f64.powi(decimals.unsigned_abs().min(400) as i32));
        // Half types: each product/quotient is computed in f32, then rounded to the dtype.
        let r = move |v: f64| {
            if d == DType::F64 {
                v
            } else {
                round_to(d, v as f32 as f64)
            }
        };
        let f = move |[x]: [f64; 1]| {
            if neg {
                let q = r(x / p).round_ties_even();
                q * p
            } else {
                let q = r(x * p).round_ties_even();
                q / p
            }
        };
        map_n("round", [self], d, d, Kernel::Float(&f))
    }
}

fn float_binary(
    op: &'static str,
    a: &Tensor,
    b: &Tensor,
    f: &dyn Fn(f64, f64) -> f64,
) -> Result<Tensor> {
    let d = float_result(promoted(a, b)?);
    map_n(op, [a, b], d, d, Kernel::Float(&|[x, y]| f(x, y)))
}

fn float_only_binary(
    op: &'static str,
    a: &Tensor,
    b: &Tensor,
    f: &dyn Fn(f64, f64) -> f64,
) -> Result<Tensor> {
    let d = promoted(a, b)?;
    if !d.is_float() {
        return Err(Error::UnsupportedDType { op, dtype: d });
    }
    map_n(op, [a, b], d, d, Kernel::Float(&|[x, y]| f(x, y)))
}

/// The next representable value of float dtype `d` after `a` in the direction of `b`.
fn next_after_in(d: DType, a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        return f64::NAN;
    }
    if a == b {
        return b;
    }
    let up = b > a;
    fn step(bits: u64, toward_larger_magnitude: bool) -> u64 {
        if toward_larger_magnitude {
            bits + 1
        } else {
            bits - 1
        }
    }
    // Moving away from zero increases the magnitude bits; from ±0 the first step is the
    // smallest subnormal of the target's sign.
    match d {
        DType::F32 => {
            let x = a as f32;
            if x == 0.0 {
                let tiny = f32::from_bits(1);
                return (if up { tiny } else { -tiny }) as f64;
            }
            let larger = (x > 0.0) == up;
            f32::from_bits(step(x.to_bits() as u64, larger) as u32) as f64
        }
        DType::F16 => {
            let x = half::f16::from_f64(a);
            if x.to_f64() == 0.0 {
                let tiny = half::f16::from_bits(1).to_f64();
                return if up { tiny } else { -tiny };
            }
            let larger = (x.to_f64() > 0.0) == up;
            half::f16::from_bits(step(x.to_bits() as u64, larger) as u16).to_f64()
        }
        DType::BF16 => {
            let x = half::bf16::from_f64(a);
            if x.to_f64() == 0.0 {
                let tiny = half::bf16::from_bits(1).to_f64();
                return if up { tiny } else { -tiny };
            }
            let larger = (x.to_f64() > 0.0) == up;
            half::bf16::from_bits(step(x.to_bits() as u64, larger) as u16).to_f64()
        }
        _ => {
            if a == 0.0 {
                let tiny = f64::from_bits(1);
                return if up { tiny } else { -tiny };
            }
            let larger = (a > 0.0) == up;
            f64::from_bits(step(a.to_bits(), larger))
        }
    }
}

fn gcd_i64(a: i64, b: i64) -> i64 {
    let (mut a, mut b) = (a.unsigned_abs(), b.unsigned_abs());
    while b != 0 {
        let t = a % b;
        a = b;
        b = t;
    }
    a as i64
}

impl Tensor {
    /// `torch.copysign` (integers -> default float).
    pub fn copysign(&self, other: impl Operand) -> Result<Tensor> {
        float_binary("copysign", self, &other.to_operand(), &|a, b| a.copysign(b))
    }
    /// `torch.floor_divide`: division rounded toward negative infinity.
    pub fn floor_divide(&self, other: impl Operand) -> Result<Tensor> {
        self.div_mode(other, RoundingMode::Floor)
    }
    /// `torch.float_power`: computed and returned in float64.
    pub fn float_power(&self, exponent: impl Operand) -> Result<Tensor> {
        let e = exponent.to_operand();
        let d = DType::F64;
        map_n(
            "float_power",
            [self, &e],
            d,
            d,
            Kernel::Float(&|[a, b]| a.powf(b)),
        )
    }
    /// `torch.fmax`: the maximum, ignoring a NaN operand.
    pub fn fmax(&self, other: impl Operand) -> Result<Tensor> {
        let o = other.to_operand();
        let d = promoted(self, &o)?;
        map_n(
            "fmax",
            [self, &o],
            d,
            d,
            // bfloat16 answers the other operand for equal values (the sign of a zero).
            Kernel::Both(
                &move |[a, b]| {
                    if d == DType::BF16 && a == b {
                        b
                    } else {
                        a.max(b)
                    }
                },
                &|[a, b]| Ok(a.max(b)),
            ),
        )
    }
    /// `torch.fmin`: the minimum, ignoring a NaN operand.
    pub fn fmin(&self, other: impl Operand) -> Result<Tensor> {
        let o = other.to_operand();
        let d = promoted(self, &o)?;
        map_n(
            "fmin",
            [self, &o],
            d,
            d,
            // bfloat16 answers the other operand for equal values (the sign of a zero).
            Kernel::Both(
                &move |[a, b]| {
                    if d == DType::BF16 && a == b {
                        b
                    } else {
                        a.min(b)
                    }
                },
                &|[a, b]| Ok(a.min(b)),
            ),
        )
    }
    fn int_only_binary(
        &self,
        op: &'static str,
        other: &Tensor,
        f: fn(i64, i64) -> i64,
    ) -> Result<Tensor> {
        let d = promoted(self, other)?;
        if d.is_float() || d == DType::Bool {
            return Err(Error::UnsupportedDType { op, dtype: d });
        }
        map_n(op, [self, other], d, d, Kernel::Int(&|[a, b]| Ok(f(a, b))))
    }
    /// `torch.gcd` (integers only; non-negative result).
    pub fn gcd(&self, other: impl Operand) -> Result<Tensor> {
        self.int_only_binary("gcd", &other.to_operand(), gcd_i64)
    }
    /// `torch.lcm` (integers only).
    pub fn lcm(&self, other: impl Operand) -> Result<Tensor> {
        self.int_only_binary("lcm", &other.to_operand(), |a, b| {
            let g = gcd_i64(a, b);
            if g == 0 {
                0
            } else {
                (a / g).wrapping_mul(b).wrapping_abs()
            }
        })
    }
    /// `torch.heaviside(input, values)`: 0 below zero, 1 above, `values` at zero.
    pub fn heaviside(&self, values: &Tensor) -> Result<Tensor> {
        if self.dtype() != values.dtype() {
            return Err(invalid(
                "heaviside",
                "heaviside is not yet implemented for tensors with different dtypes",
            ));
        }
        let d = promoted(self, values)?;
        let ff = |[a, b]: [f64; 2]| if a == 0.0 { b } else { (a > 0.0) as u8 as f64 };
        let fi = |[a, b]: [i64; 2]| Ok(if a == 0 { b } else { (a > 0) as i64 });
        map_n("heaviside", [self, values], d, d, Kernel::Both(&ff, &fi))
    }
    /// `torch.hypot` (float dtypes only).
    pub fn hypot(&self, other: impl Operand) -> Result<Tensor> {
        float_only_binary("hypot", self, &other.to_operand(), &|a, b| a.hypot(b))
    }
    /// `torch.igamma`: the regularized lower incomplete gamma function P(a, x).
    pub fn igamma(&self, other: impl Operand) -> Result<Tensor> {
        float_only_binary("igamma", self, &other.to_operand(), &|a, x| {
            super::special::igamma(a, x)
        })
    }
    /// `torch.igammac`: the regularized upper incomplete gamma function Q(a, x).
    pub fn igammac(&self, other: impl Operand) -> Result<Tensor> {
        float_only_binary("igammac", self, &other.to_operand(), &|a, x| {
            super::special::igammac(a, x)
        })
    }
    /// `torch.logaddexp`: ln(e^a + e^b) without overflow (float dtypes only).
    pub fn logaddexp(&self, other: impl Operand) -> Result<Tensor> {
        float_only_binary("logaddexp", self, &other.to_operand(), &|a, b| {
            if a.is_infinite() && a == b {
                a
            } else {
                let m = a.max(b);
                m + (-(a - b).abs()).exp().ln_1p()
            }
        })
    }
    /// `torch.logaddexp2`: log2(2^a + 2^b).
    pub fn logaddexp2(&self, other: impl Operand) -> Result<Tensor> {
        float_only_binary("logaddexp2", self, &other.to_operand(), &|a, b| {
            if a.is_infinite() && a == b {
                a
            } else {
                let m = a.max(b);
                m + (-(a - b).abs()).exp2().ln_1p() / std::f64::consts::LN_2
            }
        })
    }
    /// `torch.nextafter` (float dtypes only), stepping in the result dtype.
    pub fn nextafter(&self, other: impl Operand) -> Result<Tensor> {
        let o = other.to_operand();
        let d = promoted(self, &o)?;
        if !d.is_float() {
            return Err(Error::UnsupportedDType {
                op: "nextafter",
                dtype: d,
            });
        }
        map_n(
            "nextafter",
            [self, &o],
            d,
            d,
            Kernel::Float(&|[a, b]| next_after_in(d, a, b)),
        )
    }
    /// `torch.xlogy`: x * ln(y), 0 where x == 0 (unless y is NaN).
    pub fn xlogy(&self, other: impl Operand) -> Result<Tensor> {
        float_binary("xlogy", self, &other.to_operand(), &|x, y| {
            if y.is_nan() {
                f64::NAN
            } else if x == 0.0 {
                0.0
            } else {
                x * y.ln()
            }
        })
    }
    /// `torch.ldexp`: self * 2^other (float result).
    pub fn ldexp(&self, other: impl Operand) -> Result<Tensor> {
        float_binary("ldexp", self, &other.to_operand(), &|x, e| x * e.exp2())
    }
    fn shift(&self, op: &'static str, other: &Tensor, left: bool) -> Result<Tensor> {
        let d = promoted(self, other)?;
        if d.is_float() || d == DType::Bool {
            return Err(Error::UnsupportedDType { op, dtype: d });
        }
        let bits: i64 = match d {
            DType::I8 | DType::U8 => 8,
            DType::I16 => 16,
            DType::I32 => 32,
            _ => 64,
        };
        let unsigned = d == DType::U8;
        let f = move |[a, b]: [i64; 2]| {
            Ok(if left {
                if !(0..bits).contains(&b) {
                    0
                } else {
                    ((a as u64) << b) as i64
                }
            } else if !(0..bits).contains(&b) {
                if unsigned || a >= 0 {
                    0
                } else {
                    -1
                }
            } else {
                a >> b
            })
        };
        map_n(op, [self, other], d, d, Kernel::Int(&f))
    }
    /// `torch.bitwise_left_shift` (integers; shifts of the width or more, or negative, give 0).
    pub fn bitwise_left_shift(&self, other: impl Operand) -> Result<Tensor> {
        self.shift("lshift", &other.to_operand(), true)
    }
    /// `torch.bitwise_right_shift` (arithmetic for signed dtypes).
    pub fn bitwise_right_shift(&self, other: impl Operand) -> Result<Tensor> {
        self.shift("rshift", &other.to_operand(), false)
    }
    /// `torch.lerp(self, end, weight)` (float dtypes), with upstream's two-sided formula.
    pub fn lerp(&self, end: &Tensor, weight: &Tensor) -> Result<Tensor> {
        let d = result_type_of(&[self, end])?;
        if !d.is_float() {
            return Err(Error::UnsupportedDType {
                op: "lerp",
                dtype: d,
            });
        }
        let f = |[s, e, w]: [f64; 3]| {
            if w.abs() < 0.5 {
                s + w * (e - s)
            } else {
                e - (e - s) * (1.0 - w)
            }
        };
        map_n("lerp", [self, end, weight], d, d, Kernel::Float(&f))
    }
}

/// `torch.addcmul(self, t1, t2, value=v)` = self + v * t1 * t2 and `torch.addcdiv`
/// (= self + v * t1 / t2; integer division refused as upstream).
pub fn addcmul_addcdiv(
    s: &Tensor,
    t1: &Tensor,
    t2: &Tensor,
    value: Scalar,
    div: bool,
) -> Result<Tensor> {
    let op = if div { "addcdiv" } else { "addcmul" };
    let d = result_type_of(&[s, t1, t2])?;
    if div && !t1.dtype().is_float() && !t2.dtype().is_float() {
        return Err(invalid(
            op,
            "Integer division with addcdiv is no longer supported, and in a future release \
             addcdiv will perform a true division of tensor1 and tensor2. The historic addcdiv \
             behavior can be implemented as (input + value * torch.trunc(tensor1 / tensor2)).to(input.dtype) \
             for integer inputs and as (input + value * tensor1 / tensor2) for float inputs. The \
             future addcdiv behavior is just the latter implementation: (input + value * tensor1 / \
             tensor2), for inputs of any dtype.",
        ));
    }
    if d == DType::Bool {
        return Err(Error::UnsupportedDType { op, dtype: d });
    }
    let vf = value.to_f64();
    let vi = value.to_f64() as i64;
    let ff = move |[a, x, y]: [f64; 3]| {
        if div {
            a + vf * (x / y)
        } else {
            a + vf * x * y
        }
    };
    let fi = move |[a, x, y]: [i64; 3]| {
        Ok(if d == DType::Bool {
            (a != 0 || (vi != 0 && x != 0 && y != 0)) as i64
        } else {
            a.wrapping_add(vi.wrapping_mul(x).wrapping_mul(y))
        })
    };
    map_n(op, [s, t1, t2], d, d, Kernel::Both(&ff, &fi))
}

/// `torch.add(a, b, alpha=alpha)` / `torch.sub(...)`: `a ± alpha * b` in the promoted dtype
/// (bool: logical or), with upstream's checks on alpha.
pub fn add_alpha(a: &Tensor, b: &Tensor, alpha: Scalar, sub: bool) -> Result<Tensor> {
    let op = if sub { "sub" } else { "add" };
    if sub && (a.dtype() == DType::Bool || b.dtype() == DType::Bool) {
        return Err(Error::UnsupportedDType {
            op,
            dtype: DType::Bool,
        });
    }
    let d = promoted(a, b)?;
    match alpha {
        Scalar::Bool(_) if d != DType::Bool => {
            return Err(invalid(
                op,
                "Boolean alpha only supported for Boolean results.",
            ))
        }
        Scalar::Float(_) if !d.is_float() => {
            return Err(invalid(
                op,
                "For integral input tensors, argument alpha must not be a floating point number.",
            ))
        }
        _ => {}
    }
    if alpha.to_f64() == 1.0 {
        return if sub { a.sub(b) } else { a.add(b) };
    }
    let af = if sub { -alpha.to_f64() } else { alpha.to_f64() };
    let ai = match alpha {
        Scalar::Int(i) => i,
        other => other.to_f64() as i64,
    };
    let ai = if sub { ai.wrapping_neg() } else { ai };
    // alpha takes the dtype's precision (float32 for float32, the reduced dtype for
    // float16/bfloat16, whose math then runs in float32), as upstream's vectorized kernel.
    let af = round_to(d, af);
    let reduced = matches!(d, DType::F16 | DType::BF16);
    let ff = move |[x, y]: [f64; 2]| {
        if reduced {
            (x as f32 + af as f32 * y as f32) as f64
        } else {
            x + af * y
        }
    };
    let fi = move |[x, y]: [i64; 2]| {
        Ok(if d == DType::Bool {
            (x != 0 || (ai != 0 && y != 0)) as i64
        } else {
            x.wrapping_add(ai.wrapping_mul(y))
        })
    };
    map_n(op, [a, b], d, d, Kernel::Both(&ff, &fi))
}

/// The representable range of an integer dtype.
fn int_range(d: DType) -> (i64, i64) {
    match d {
        DType::I8 => (i8::MIN as i64, i8::MAX as i64),
        DType::U8 => (0, u8::MAX as i64),
        DType::I16 => (i16::MIN as i64, i16::MAX as i64),
        DType::I32 => (i32::MIN as i64, i32::MAX as i64),
        DType::Bool => (0, 1),
        _ => (i64::MIN, i64::MAX),
    }
}

/// `torch.clamp` with scalar bounds, as upstream: an integer bound is checked against the
/// integer result dtype's range (a min above it or a max below it is an error; otherwise the
/// bound saturates), a NaN bound gives NaN, and when min > max every element becomes max.
pub fn clamp_scalars(x: &Tensor, min: Option<Scalar>, max: Option<Scalar>) -> Result<Tensor> {
    if min.is_none() && max.is_none() {
        return Err(invalid(
            "clamp",
            "torch.clamp: At least one of 'min' or 'max' must not be None",
        ));
    }
    let lo = min.map(Tensor::wrap_scalar);
    let hi = max.map(Tensor::wrap_scalar);
    let mut ops: Vec<&Tensor> = vec![x];
    ops.extend(lo.as_ref());
    ops.extend(hi.as_ref());
    let d = result_type_of(&ops)?;
    if d == DType::Bool {
        // Upstream's scalar-bound kernels have no bool case (tensor bounds do).
        return Err(Error::UnsupportedDType {
            op: "clamp",
            dtype: d,
        });
    }
    let (tlo, thi) = int_range(d);
    let mut ilo = i64::MIN;
    let mut ihi = i64::MAX;
    if !d.is_float() {
        if let Some(m) = min {
            let v = m.to_f64() as i64;
            if v > thi {
                return Err(invalid(
                    "clamp",
                    format!(
                        "Clamp min value {v} is outside the representable range of {}",
                        c10_name(d)
                    ),
                ));
            }
            ilo = v.max(tlo);
        }
        if let Some(m) = max {
            let v = m.to_f64() as i64;
            if v < tlo {
                return Err(invalid(
                    "clamp",
                    format!(
                        "Clamp max value {v} is outside the representable range of {}",
                        c10_name(d)
                    ),
                ));
            }
            ihi = v.min(thi);
        }
    }
    let flo = min.map(|m| round_to(d, m.to_f64()));
    let fhi = max.map(|m| round_to(d, m.to_f64()));
    let ff = move |[v]: [f64; 1]| {
        let mut r = v;
        if let Some(l) = flo {
            if l.is_nan() {
                return l;
            }
            if r < l {
                r = l;
            }
        }
        if let Some(h) = fhi {
            if h.is_nan() {
                return h;
            }
            if r > h {
                r = h;
            }
        }
        r
    };
    let fi = move |[v]: [i64; 1]| Ok(v.max(ilo).min(ihi));
    map_n("clamp", [x], d, d, Kernel::Both(&ff, &fi))
}

/// c10's ScalarType name of a dtype, as upstream's messages spell it.
pub(crate) fn c10_name(d: DType) -> &'static str {
    match d {
        DType::F32 => "Float",
        DType::F64 => "Double",
        DType::F16 => "Half",
        DType::BF16 => "BFloat16",
        DType::I64 => "Long",
        DType::I32 => "Int",
        DType::I16 => "Short",
        DType::I8 => "Char",
        DType::U8 => "Byte",
        DType::Bool => "Bool",
        DType::C64 => "ComplexFloat",
        DType::C128 => "ComplexDouble",
        DType::U16 => "UInt16",
        DType::U32 => "UInt32",
        DType::U64 => "UInt64",
    }
}

/// `torch.clamp` with tensor bounds: bounds take part in type promotion; NaN propagates;
/// bool is supported with one bound only (as upstream's clamp_min / clamp_max kernels).
pub fn clamp_tensors(x: &Tensor, min: Option<&Tensor>, max: Option<&Tensor>) -> Result<Tensor> {
    let mut ops: Vec<&Tensor> = vec![x];
    ops.extend(min);
    ops.extend(max);
    if ops.len() == 1 {
        return Err(invalid(
            "clamp",
            "torch.clamp: At least one of 'min' or 'max' must not be None",
        ));
    }
    let d = result_type_of(&ops)?;
    if d == DType::Bool && ops.len() == 3 {
        return Err(Error::UnsupportedDType {
            op: "clamp",
            dtype: d,
        });
    }
    let ff2 = |lower: bool| {
        move |[v, b]: [f64; 2]| {
            if v.is_nan() || b.is_nan() {
                f64::NAN
            } else if lower {
                if v < b {
                    b
                } else {
                    v
                }
            } else if v > b {
                b
            } else {
                v
            }
        }
    };
    match (min, max) {
        (Some(l), None) => {
            let f = ff2(true);
            map_n(
                "clamp",
                [x, l],
                d,
                d,
                Kernel::Both(&f, &|[v, b]| Ok(v.max(b))),
            )
        }
        (None, Some(h)) => {
            let f = ff2(false);
            map_n(
                "clamp",
                [x, h],
                d,
                d,
                Kernel::Both(&f, &|[v, b]| Ok(v.min(b))),
            )
        }
        (Some(l), Some(h)) => {
            let ff = |[v, l, h]: [f64; 3]| {
                if v.is_nan() || l.is_nan() || h.is_nan() {
                    f64::NAN
                } else {
                    v.max(l).min(h)
                }
            };
            map_n(
                "clamp",
                [x, l, h],
                d,
                d,
                Kernel::Both(&ff, &|[v, l, h]| Ok(v.max(l).min(h))),
            )
        }
        (None, None) => Err(invalid(
            "clamp",
            "torch.clamp: At least one of 'min' or 'max' must not be None",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erf_reference_values() {
        // Reference values from Abramowitz & Stegun table 7.1.
        assert!((erf(0.5) - 0.520_499_877_813_046_5).abs() < 1e-15);
        assert!((erf(1.0) - 0.842_700_792_949_714_9).abs() < 1e-15);
        assert!((erf(-2.0) + 0.995_322_265_018_952_7).abs() < 1e-15);
        assert_eq!(erf(7.0), 1.0);
        assert_eq!(erf(0.0), 0.0);
    }

    #[test]
    fn floor_division_matches_python() {
        assert_eq!(floor_div_f64(7.0, -2.0), -4.0);
        assert_eq!(floor_div_f64(-7.0, 2.0), -4.0);
        assert_eq!(int_floor_div("div", -7, 2).unwrap(), -4);
        assert_eq!(int_floor_div("div", 7, -2).unwrap(), -4);
        assert!(int_floor_div("div", 1, 0).is_err());
    }

    #[test]
    fn int_pow_wraps_and_handles_negatives() {
        assert_eq!(int_pow(3, 4), 81);
        assert_eq!(int_pow(2, 64), 0);
        assert_eq!(int_pow(-1, -3), -1);
        assert_eq!(int_pow(5, -1), 0);
    }

    #[test]
    fn clamp_scalar_bounds_follow_the_integer_range() {
        let x = Tensor::from_vec(vec![3u8, 5, 0, 7], &[4]).unwrap();
        let r = clamp_scalars(&x, Some(Scalar::Int(-1)), Some(Scalar::Int(2))).unwrap();
        assert_eq!(r.to_vec::<u8>().unwrap(), vec![2, 2, 0, 2]);
        assert!(clamp_scalars(&x, None, Some(Scalar::Int(-1))).is_err());
        assert!(clamp_scalars(&x, Some(Scalar::Int(300)), None).is_err());
        let i = Tensor::from_vec(vec![3i32, -5, 0], &[3]).unwrap();
        let r = clamp_scalars(&i, Some(Scalar::Int(0)), None).unwrap();
        assert_eq!(r.to_vec::<i32>().unwrap(), vec![3, 0, 0]);
    }

    #[test]
    fn add_alpha_checks_and_bool() {
        let a = Tensor::from_vec(vec![1i64, 2], &[2]).unwrap();
        assert!(add_alpha(&a, &a, Scalar::Float(0.5), false).is_err());
        assert!(add_alpha(&a, &a, Scalar::Bool(true), false).is_err());
        let r = add_alpha(&a, &a, Scalar::Int(3), true).unwrap();
        assert_eq!(r.to_vec::<i64>().unwrap(), vec![-2, -4]);
        let b = Tensor::from_vec(vec![true, false], &[2]).unwrap();
        let r = add_alpha(&b, &b, Scalar::Int(2), false).unwrap();
        assert_eq!(r.dtype(), DType::Bool);
        assert!(add_alpha(&b, &b, Scalar::Int(1), true).is_err());
    }

    #[test]
    fn nextafter_steps_in_the_dtype() {
        assert_eq!(next_after_in(DType::F64, 1.0, 2.0), 1.0 + f64::EPSILON);
        assert_eq!(
            next_after_in(DType::F32, 1.0, 0.0),
            (1.0f32 - f32::EPSILON / 2.0) as f64
        );
        assert_eq!(
            next_after_in(DType::F32, 0.0, -1.0),
            -(f32::from_bits(1) as f64)
        );
        assert_eq!(next_after_in(DType::F16, 1.0, 2.0), 1.0 + 2f64.powi(-10));
    }

    #[test]
    fn gcd_lcm_and_shifts() {
        assert_eq!(gcd_i64(-12, 18), 6);
        assert_eq!(gcd_i64(0, 0), 0);
        let a = Tensor::from_vec(vec![1i8, -128, 64], &[3]).unwrap();
        let s = Tensor::from_vec(vec![7i8, 1, 9], &[3]).unwrap();
        let l = a.bitwise_left_shift(&s).unwrap();
        assert_eq!(l.to_vec::<i8>().unwrap(), vec![-128, 0, 0]);
        let r = a.bitwise_right_shift(&s).unwrap();
        assert_eq!(r.to_vec::<i8>().unwrap(), vec![0, -64, 0]);
    }
}
