//! Vector primitives: dot, add, scale, SwiGLU, argmax.
//!
//! Layout contract for all: slices are contiguous; the output length defines the work and the
//! inputs must be at least that long (checked with `assert!` where a shorter input would make
//! the SIMD path read out of bounds, with `debug_assert!` elsewhere).

use super::cpu::{active_isa, Isa};
use super::simd::{dispatch, exp_scalar, simd_entries, Simd};

// ---------------------------------------------------------------- dot

/// Dot product of two equal-length vectors, f32 accumulation (several SIMD accumulators).
pub fn dot_f32(a: &[f32], b: &[f32]) -> f32 {
    dot_f32_with(active_isa(), a, b)
}

pub(crate) fn dot_f32_with(isa: Isa, a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len(), "dot_f32: lengths differ");
    dispatch!(isa, dot_scalar, dot_avx512, dot_avx2, dot_neon; (a, b))
}

pub(crate) fn dot_scalar(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Caller guarantees `a.len() == b.len()`.
#[inline(always)]
pub(crate) unsafe fn dot_simd<S: Simd>(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len();
    let (pa, pb) = (a.as_ptr(), b.as_ptr());
    let w = S::W;
    let mut acc = [S::splat(0.0); 4];
    let mut i = 0;
    while i + 4 * w <= n {
        for (j, slot) in acc.iter_mut().enumerate() {
            *slot = S::fma(
                S::load(pa.add(i + j * w)),
                S::load(pb.add(i + j * w)),
                *slot,
            );
        }
        i += 4 * w;
    }
    while i + w <= n {
        acc[0] = S::fma(S::load(pa.add(i)), S::load(pb.add(i)), acc[0]);
        i += w;
    }
    if i < n {
        let r = n - i;
        acc[1] = S::fma(
            S::load_partial(pa.add(i), r),
            S::load_partial(pb.add(i), r),
            acc[1],
        );
    }
    S::hsum(S::add(S::add(acc[0], acc[1]), S::add(acc[2], acc[3])))
}
simd_entries!(dot_simd => dot_avx512, dot_avx2, dot_neon; (a: &[f32], b: &[f32]) -> f32);

// ---------------------------------------------------------------- add / scale

/// `out[i] = a[i] + b[i]`; `a` and `b` at least `out.len()` long.
pub fn add_f32(a: &[f32], b: &[f32], out: &mut [f32]) {
    assert!(
        a.len() >= out.len() && b.len() >= out.len(),
        "add_f32: input shorter than out"
    );
    dispatch!(active_isa(), add_scalar, add_avx512, add_avx2, add_neon; (a, b, out))
}

#[inline(always)]
fn add_scalar(a: &[f32], b: &[f32], out: &mut [f32]) {
    for ((o, x), y) in out.iter_mut().zip(a).zip(b) {
        *o = x + y;
    }
}

/// Applies `f` lane-wise over `out.len()` elements of up to two inputs (explicit vectors, so
/// the dev profile, which does not auto-vectorise, is fast too).
#[inline(always)]
unsafe fn map2<S: Simd>(
    a: *const f32,
    b: *const f32,
    out: *mut f32,
    n: usize,
    f: impl Fn(S::V, S::V) -> S::V,
) {
    let mut i = 0;
    while i + S::W <= n {
        S::store(out.add(i), f(S::load(a.add(i)), S::load(b.add(i))));
        i += S::W;
    }
    if i < n {
        let r = n - i;
        S::store_partial(
            out.add(i),
            r,
            f(S::load_partial(a.add(i), r), S::load_partial(b.add(i), r)),
        );
    }
}

#[inline(always)]
unsafe fn add_simd<S: Simd>(a: &[f32], b: &[f32], out: &mut [f32]) {
    map2::<S>(
        a.as_ptr(),
        b.as_ptr(),
        out.as_mut_ptr(),
        out.len(),
        |x, y| S::add(x, y),
    )
}
simd_entries!(add_simd => add_avx512, add_avx2, add_neon; (a: &[f32], b: &[f32], out: &mut [f32]));

/// `acc[i] += x[i]` (residual connections); `x` at least `acc.len()` long.
pub fn add_inplace_f32(acc: &mut [f32], x: &[f32]) {
    assert!(x.len() >= acc.len(), "add_inplace_f32: x shorter than acc");
    dispatch!(active_isa(), add_inplace_scalar, add_inplace_avx512, add_inplace_avx2, add_inplace_neon; (acc, x))
}

#[inline(always)]
fn add_inplace_scalar(acc: &mut [f32], x: &[f32]) {
    for (a, v) in acc.iter_mut().zip(x) {
        *a += v;
    }
}

#[inline(always)]
unsafe fn add_inplace_simd<S: Simd>(acc: &mut [f32], x: &[f32]) {
    let p = acc.as_mut_ptr();
    map2::<S>(p, x.as_ptr(), p, acc.len(), |a, v| S::add(a, v))
}
simd_entries!(add_inplace_simd => add_inplace_avx512, add_inplace_avx2, add_inplace_neon; (acc: &mut [f32], x: &[f32]));

/// `x[i] *= s` in place.
pub fn scale_f32(x: &mut [f32], s: f32) {
    scale_f32_with(active_isa(), x, s)
}

pub(crate) fn scale_f32_with(isa: Isa, x: &mut [f32], s: f32) {
    dispatch!(isa, scale_scalar, scale_avx512, scale_avx2, scale_neon; (x, s))
}

#[inline(always)]
fn scale_scalar(x: &mut [f32], s: f32) {
    for v in x {
        *v *= s;
    }
}

#[inline(always)]
unsafe fn scale_simd<S: Simd>(x: &mut [f32], s: f32) {
    let p = x.as_mut_ptr();
    let vs = S::splat(s);
    map2::<S>(p, p, p, x.len(), |v, _| S::mul(v, vs))
}
simd_entries!(scale_simd => scale_avx512, scale_avx2, scale_neon; (x: &mut [f32], s: f32));

// ---------------------------------------------------------------- SwiGLU

/// SwiGLU: `out[i] = silu(gate[i]) * up[i]` with `silu(g) = g / (1 + exp(-g))`;
/// `gate` and `up` at least `out.len()` long.
pub fn silu_mul_f32(gate: &[f32], up: &[f32], out: &mut [f32]) {
    silu_mul_f32_with(active_isa(), gate, up, out)
}

pub(crate) fn silu_mul_f32_with(isa: Isa, gate: &[f32], up: &[f32], out: &mut [f32]) {
    assert!(
        gate.len() >= out.len() && up.len() >= out.len(),
        "silu_mul_f32: input shorter than out"
    );
    dispatch!(isa, silu_mul_scalar, silu_mul_avx512, silu_mul_avx2, silu_mul_neon; (gate, up, out))
}

pub(crate) fn silu_mul_scalar(gate: &[f32], up: &[f32], out: &mut [f32]) {
    for ((o, &g), &u) in out.iter_mut().zip(gate).zip(up) {
        *o = g / (1.0 + exp_scalar(-g)) * u;
    }
}

#[inline(always)]
unsafe fn silu_mul_simd<S: Simd>(gate: &[f32], up: &[f32], out: &mut [f32]) {
    silu_mul_ptr::<S>(gate.as_ptr(), up.as_ptr(), out.as_mut_ptr(), out.len())
}

/// SwiGLU over `n` elements through raw pointers, so `out` may alias `up` (in-place form):
/// each lane block is read before it is written.
#[inline(always)]
unsafe fn silu_mul_ptr<S: Simd>(pg: *const f32, pu: *const f32, po: *mut f32, n: usize) {
    // An explicit loop, not `map2` with a closure: the closure (large, because of `exp`) was
    // not inlined, and a closure does not inherit the caller's target features, so every
    // intrinsic in it became a call (18% of prefill time in a profile).
    let one = S::splat(1.0);
    let neg = S::splat(-1.0);
    let mut i = 0;
    while i + S::W <= n {
        let g = S::load(pg.add(i));
        let e = S::exp(S::mul(g, neg));
        S::store(
            po.add(i),
            S::mul(S::div(g, S::add(one, e)), S::load(pu.add(i))),
        );
        i += S::W;
    }
    if i < n {
        let r = n - i;
        let g = S::load_partial(pg.add(i), r);
        let e = S::exp(S::mul(g, neg));
        let v = S::mul(S::div(g, S::add(one, e)), S::load_partial(pu.add(i), r));
        S::store_partial(po.add(i), r, v);
    }
}

/// SiLU: `out[i] = x[i] / (1 + exp(-x[i]))`, the f32 formula upstream's CPU kernel
/// vectorizes; `x` at least `out.len()` long.
pub fn silu_f32(x: &[f32], out: &mut [f32]) {
    silu_f32_with(active_isa(), x, out)
}

pub(crate) fn silu_f32_with(isa: Isa, x: &[f32], out: &mut [f32]) {
    assert!(x.len() >= out.len(), "silu_f32: input shorter than out");
    dispatch!(isa, silu_scalar, silu_avx512, silu_avx2, silu_neon; (x, out));
    // Below -ln(f32::MAX), exp(-x) overflows in f32 and the formula gives x / inf (-0, and NaN
    // for -inf), as upstream's; our exp saturates instead, so those lanes are redone.
    for (o, &v) in out.iter_mut().zip(x) {
        if v < -88.722_84 {
            *o = v / f32::INFINITY;
        }
    }
}

fn silu_scalar(x: &[f32], out: &mut [f32]) {
    for (o, &g) in out.iter_mut().zip(x) {
        *o = g / (1.0 + exp_scalar(-g));
    }
}

#[inline(always)]
unsafe fn silu_simd<S: Simd>(x: &[f32], out: &mut [f32]) {
    // An explicit loop for the reason silu_mul_ptr gives.
    let (px, po, n) = (x.as_ptr(), out.as_mut_ptr(), out.len());
    let one = S::splat(1.0);
    let neg = S::splat(-1.0);
    let mut i = 0;
    while i + S::W <= n {
        let g = S::load(px.add(i));
        let e = S::exp(S::mul(g, neg));
        S::store(po.add(i), S::div(g, S::add(one, e)));
        i += S::W;
    }
    if i < n {
        let r = n - i;
        let g = S::load_partial(px.add(i), r);
        let e = S::exp(S::mul(g, neg));
        S::store_partial(po.add(i), r, S::div(g, S::add(one, e)));
    }
}
simd_entries!(silu_simd => silu_avx512, silu_avx2, silu_neon; (x: &[f32], out: &mut [f32]));

/// In-place SwiGLU: `up[i] = silu(gate[i]) * up[i]` (saves the runtime a scratch buffer);
/// `gate` at least `up.len()` long.
pub fn silu_mul_inplace_f32(gate: &[f32], up: &mut [f32]) {
    silu_mul_inplace_f32_with(active_isa(), gate, up)
}

pub(crate) fn silu_mul_inplace_f32_with(isa: Isa, gate: &[f32], up: &mut [f32]) {
    assert!(
        gate.len() >= up.len(),
        "silu_mul_inplace_f32: gate shorter than up"
    );
    dispatch!(isa, silu_mul_inplace_scalar, silu_mul_inplace_avx512, silu_mul_inplace_avx2, silu_mul_inplace_neon; (gate, up))
}

fn silu_mul_inplace_scalar(gate: &[f32], up: &mut [f32]) {
    for (u, &g) in up.iter_mut().zip(gate) {
        *u *= g / (1.0 + exp_scalar(-g));
    }
}

#[inline(always)]
unsafe fn silu_mul_inplace_simd<S: Simd>(gate: &[f32], up: &mut [f32]) {
    let pu = up.as_mut_ptr();
    silu_mul_ptr::<S>(gate.as_ptr(), pu, pu, up.len())
}
simd_entries!(silu_mul_inplace_simd => silu_mul_inplace_avx512, silu_mul_inplace_avx2, silu_mul_inplace_neon;
    (gate: &[f32], up: &mut [f32]));

simd_entries!(silu_mul_simd => silu_mul_avx512, silu_mul_avx2, silu_mul_neon; (gate: &[f32], up: &[f32], out: &mut [f32]));

// ---------------------------------------------------------------- GELU

/// Coefficients of Abramowitz & Stegun 7.1.26: for `a >= 0`,
/// `erf(a) ≈ 1 - (((((A5 t + A4) t + A3) t + A2) t + A1) t) e^(-a²)` with `t = 1 / (1 + P a)`,
/// absolute error below 1.5e-7 (about one f32 ulp of values near 1).
const ERF_P: f32 = 0.327_591_1;
const ERF_A: [f32; 5] = [
    0.254_829_6,
    -0.284_496_72,
    1.421_413_8,
    -1.453_152_1,
    1.061_405_4,
];

/// GELU in its exact (erf) form, in place: `x = 0.5 x (1 + erf(x / √2))` (BERT's
/// `hidden_act: "gelu"`, torch's `gelu(approximate="none")`). erf is the Abramowitz & Stegun
/// 7.1.26 rational approximation (absolute error < 1.5e-7) with the level's `exp`, so the
/// result is within a few f32 ulp of `x`-scaled exact GELU; each element alone, so the
/// output of an element does not depend on the slice it is in.
pub fn gelu_erf_inplace_f32(x: &mut [f32]) {
    gelu_erf_inplace_f32_with(active_isa(), x)
}

pub(crate) fn gelu_erf_inplace_f32_with(isa: Isa, x: &mut [f32]) {
    dispatch!(isa, gelu_erf_inplace_scalar, gelu_erf_inplace_avx512, gelu_erf_inplace_avx2, gelu_erf_inplace_neon; (x))
}

pub(crate) fn gelu_erf_inplace_scalar(x: &mut [f32]) {
    for v in x.iter_mut() {
        let z = *v * std::f32::consts::FRAC_1_SQRT_2;
        let a = z.abs();
        let t = 1.0 / (1.0 + ERF_P * a);
        let mut poly = ERF_A[4];
        for &c in ERF_A[..4].iter().rev() {
            poly = poly * t + c;
        }
        let erf_abs = 1.0 - poly * t * exp_scalar(-(a * a));
        let erf = if z < 0.0 { -erf_abs } else { erf_abs };
        *v = 0.5 * *v * (1.0 + erf);
    }
}

#[inline(always)]
unsafe fn gelu_erf_lanes<S: Simd>(v: S::V) -> S::V {
    let zero = S::splat(0.0);
    let one = S::splat(1.0);
    let z = S::mul(v, S::splat(std::f32::consts::FRAC_1_SQRT_2));
    let a = S::max(S::sub(zero, z), z);
    let t = S::div(one, S::fma(S::splat(ERF_P), a, one));
    let mut poly = S::splat(ERF_A[4]);
    poly = S::fma(poly, t, S::splat(ERF_A[3]));
    poly = S::fma(poly, t, S::splat(ERF_A[2]));
    poly = S::fma(poly, t, S::splat(ERF_A[1]));
    poly = S::fma(poly, t, S::splat(ERF_A[0]));
    let e = S::exp(S::sub(zero, S::mul(a, a)));
    let erf_abs = S::sub(one, S::mul(S::mul(poly, t), e));
    let erf = S::select_less(z, zero, S::sub(zero, erf_abs), erf_abs);
    S::mul(S::mul(S::splat(0.5), v), S::add(one, erf))
}

#[inline(always)]
unsafe fn gelu_erf_inplace_simd<S: Simd>(x: &mut [f32]) {
    // An explicit loop for the reason silu_mul_ptr gives.
    let (p, n) = (x.as_mut_ptr(), x.len());
    let mut i = 0;
    while i + S::W <= n {
        S::store(p.add(i), gelu_erf_lanes::<S>(S::load(p.add(i))));
        i += S::W;
    }
    if i < n {
        let r = n - i;
        S::store_partial(
            p.add(i),
            r,
            gelu_erf_lanes::<S>(S::load_partial(p.add(i), r)),
        );
    }
}
simd_entries!(gelu_erf_inplace_simd => gelu_erf_inplace_avx512, gelu_erf_inplace_avx2, gelu_erf_inplace_neon;
    (x: &mut [f32]));

// ---------------------------------------------------------------- argmax

/// Index of the largest value (the first one on ties), like `torch.argmax`: a NaN counts as
/// larger than everything, so the first NaN wins. `None` for an empty slice.
pub fn argmax_f32(x: &[f32]) -> Option<usize> {
    argmax_f32_with(active_isa(), x)
}

pub(crate) fn argmax_f32_with(isa: Isa, x: &[f32]) -> Option<usize> {
    if x.is_empty() {
        return None;
    }
    if let Some(i) = x.iter().position(|v| v.is_nan()) {
        // Rare (a broken model); the plain scan keeps the common path single-pass-plus-find.
        return Some(i);
    }
    let max = max_f32_with(isa, x);
    x.iter().position(|&v| v == max)
}

/// Largest value of a non-empty slice (NaN-free input assumed; see `argmax_f32`).
pub(crate) fn max_f32_with(isa: Isa, x: &[f32]) -> f32 {
    dispatch!(isa, max_scalar, max_avx512, max_avx2, max_neon; (x))
}

pub(crate) fn max_scalar(x: &[f32]) -> f32 {
    x.iter().copied().fold(f32::NEG_INFINITY, f32::max)
}

#[inline(always)]
pub(crate) unsafe fn max_simd<S: Simd>(x: &[f32]) -> f32 {
    let n = x.len();
    let p = x.as_ptr();
    let mut acc = [S::splat(f32::NEG_INFINITY); 2];
    let mut i = 0;
    while i + 2 * S::W <= n {
        acc[0] = S::max(acc[0], S::load(p.add(i)));
        acc[1] = S::max(acc[1], S::load(p.add(i + S::W)));
        i += 2 * S::W;
    }
    let mut m = S::hmax(S::max(acc[0], acc[1]));
    while i < n {
        m = m.max(*p.add(i));
        i += 1;
    }
    m
}
simd_entries!(max_simd => max_avx512, max_avx2, max_neon; (x: &[f32]) -> f32);
