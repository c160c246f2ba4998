//! SIMD vs scalar/f64 references for the vector primitives, norms, softmax and casts.

use super::{assert_close, dot_tol, Rng, AWKWARD_SIZES, U};
use crate::kernels::cast::*;
use crate::kernels::elementwise::*;
use crate::kernels::norm::*;
use crate::kernels::simd::Simd;
use crate::kernels::softmax::*;
use crate::kernels::supported_isas;
use half::{bf16, f16};

#[test]
fn every_isa_is_tested_on_this_machine() {
    // Guards against silently testing only the scalar path on a SIMD machine.
    let isas = supported_isas();
    assert_eq!(isas[0], crate::kernels::Isa::Scalar);
    assert_eq!(*isas.last().unwrap(), crate::kernels::detected_isa());
}

#[test]
fn dot_matches_f64_on_every_isa() {
    let mut rng = Rng::new(1);
    for &n in AWKWARD_SIZES {
        let (a, b) = (rng.vec(n), rng.vec(n));
        let exact: f64 = a.iter().zip(&b).map(|(x, y)| *x as f64 * *y as f64).sum();
        let abs: f64 = a
            .iter()
            .zip(&b)
            .map(|(x, y)| (*x as f64 * *y as f64).abs())
            .sum();
        for isa in supported_isas() {
            assert_close(
                dot_f32_with(isa, &a, &b),
                exact,
                dot_tol(n, abs),
                &format!("dot {isa:?} n={n}"),
            );
        }
    }
}

/// exp of our polynomial vs f64 exp: within 4 ulp (relative 4·2^-23) where the result is
/// normal, 0 below ln(2^-126), NaN for NaN.
#[test]
fn simd_exp_is_accurate_and_handles_extremes() {
    let mut xs: Vec<f32> = (-2000..=2000).map(|i| i as f32 * 0.0437).collect();
    xs.extend([
        0.0, -0.0, -87.3, -87.33, 88.0, 88.37, 1e-8, -1e-8, 0.5, -0.5,
    ]);
    let check = |name: &str, f: &dyn Fn(f32) -> f32| {
        for &x in &xs {
            let got = f(x);
            if x < -87.336_55 && name != "scalar" {
                assert_eq!(got, 0.0, "{name} exp({x}) flushes to 0 below ln(2^-126)");
                continue;
            }
            let want = (x as f64).exp();
            assert_close(got, want, 4.0 * 2.0 * U * want, &format!("{name} exp({x})"));
        }
        // SIMD flushes results below 2^-126 to 0; libm returns the subnormal.
        assert!(f(-100.0) < 1e-38, "{name} exp(-100)");
        assert_eq!(f(f32::NEG_INFINITY), 0.0, "{name} exp(-inf)");
        assert!(f(f32::NAN).is_nan(), "{name} exp(NaN)");
        // Overflowing inputs saturate (SIMD: at exp(88.3762) ~ 2.4e38; libm: inf), never NaN
        // or a small value.
        for big in [88.5f32, 100.0, 1e30, f32::INFINITY] {
            assert!(f(big) >= 2.0e38, "{name} exp({big}) = {}", f(big));
        }
    };
    #[cfg(target_arch = "x86_64")]
    {
        use crate::kernels::Isa;
        let best = crate::kernels::detected_isa();
        #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")]
        unsafe fn exp512(x: f32) -> f32 {
            use crate::kernels::simd::Avx512 as S;
            let mut out = [0f32; 16];
            unsafe { S::store(out.as_mut_ptr(), S::exp(S::splat(x))) };
            out[3]
        }
        #[target_feature(enable = "avx2,fma,f16c")]
        unsafe fn exp256(x: f32) -> f32 {
            use crate::kernels::simd::Avx2 as S;
            let mut out = [0f32; 8];
            unsafe { S::store(out.as_mut_ptr(), S::exp(S::splat(x))) };
            out[5]
        }
        if best >= Isa::Avx512 {
            check("avx512", &|x| unsafe { exp512(x) });
        }
        if best >= Isa::Avx2 {
            check("avx2", &|x| unsafe { exp256(x) });
        }
    }
    #[cfg(target_arch = "aarch64")]
    {
        #[target_feature(enable = "neon")]
        unsafe fn exp128(x: f32) -> f32 {
            use crate::kernels::simd::Neon as S;
            let mut out = [0f32; 4];
            unsafe { S::store(out.as_mut_ptr(), S::exp(S::splat(x))) };
            out[2]
        }
        if crate::kernels::detected_isa() == crate::kernels::Isa::Neon {
            check("neon", &|x| unsafe { exp128(x) });
        }
    }
    check("scalar", &|x| unsafe {
        crate::kernels::simd::Scalar::exp(x)
    });
}

#[test]
fn silu_mul_matches_f64_on_every_isa() {
    let mut rng = Rng::new(2);
    for &n in AWKWARD_SIZES {
        let (g, u) = (rng.vec_scaled(n, 12.0), rng.vec(n));
        for isa in supported_isas() {
            let mut out = vec![f32::NAN; n];
            silu_mul_f32_with(isa, &g, &u, &mut out);
            for i in 0..n {
                let (gd, ud) = (g[i] as f64, u[i] as f64);
                let want = gd / (1.0 + (-gd).exp()) * ud;
                // exp (4 ulp) + add, div, mul (1 ulp each): 8 ulp relative.
                assert_close(
                    out[i],
                    want,
                    8.0 * 2.0 * U * want.abs() + 1e-30,
                    &format!("silu {isa:?} n={n} i={i}"),
                );
            }
        }
    }
}

#[test]
fn silu_matches_f64_on_every_isa() {
    let mut rng = Rng::new(12);
    for &n in AWKWARD_SIZES {
        let x = rng.vec_scaled(n, 12.0);
        for isa in supported_isas() {
            let mut out = vec![f32::NAN; n];
            silu_f32_with(isa, &x, &mut out);
            for i in 0..n {
                let xd = x[i] as f64;
                let want = xd / (1.0 + (-xd).exp());
                // exp (4 ulp) + add, div (1 ulp each): 6 ulp relative.
                assert_close(
                    out[i],
                    want,
                    6.0 * 2.0 * U * want.abs() + 1e-30,
                    &format!("silu {isa:?} n={n} i={i}"),
                );
            }
        }
    }
}

/// GELU (erf form) on every level vs the exact formula in f64 (C library erf), and the SIMD
/// levels vs the scalar twin. Bound: erf's approximation error (1.5e-7 absolute) times
/// `0.5 |x|`, plus a few ulp of the result's parts (exp, the polynomial, the final products).
#[test]
fn gelu_erf_matches_f64_on_every_isa() {
    let mut rng = Rng::new(21);
    for &n in AWKWARD_SIZES {
        let mut x = rng.vec_scaled(n, 8.0);
        if n > 4 {
            x[..4].copy_from_slice(&[0.0, -0.0, 1e-3, -5.5]);
        }
        let mut scalar = x.clone();
        gelu_erf_inplace_scalar(&mut scalar);
        for isa in supported_isas() {
            let mut out = x.clone();
            gelu_erf_inplace_f32_with(isa, &mut out);
            for i in 0..n {
                let xd = x[i] as f64;
                let want =
                    0.5 * xd * (1.0 + crate::ops::special::erf(xd / std::f64::consts::SQRT_2));
                let tol = 0.5 * xd.abs() * (1.5e-7 + 8.0 * U) + 4.0 * U * want.abs() + 1e-30;
                assert_close(out[i], want, tol, &format!("gelu {isa:?} n={n} i={i}"));
                assert_close(
                    out[i],
                    scalar[i] as f64,
                    2.0 * tol,
                    &format!("gelu {isa:?} vs scalar i={i}"),
                );
            }
        }
    }
    for isa in supported_isas() {
        let mut edge = [f32::INFINITY, f32::NAN, -30.0, 30.0];
        gelu_erf_inplace_f32_with(isa, &mut edge);
        assert_eq!(edge[0], f32::INFINITY, "{isa:?}");
        assert!(edge[1].is_nan(), "{isa:?}");
        assert!(edge[2] == 0.0 && edge[3] == 30.0, "{isa:?}: {edge:?}");
    }
}

#[test]
fn silu_overflow_follows_the_f32_formula() {
    let x = [
        f32::NEG_INFINITY,
        -1000.0,
        -89.0,
        f32::INFINITY,
        f32::NAN,
        -80.0,
    ];
    for isa in supported_isas() {
        let mut out = [0f32; 6];
        silu_f32_with(isa, &x, &mut out);
        assert!(out[0].is_nan(), "{isa:?}: silu(-inf) = -inf / inf is NaN");
        assert!(
            out[1] == 0.0 && out[1].is_sign_negative(),
            "{isa:?}: {}",
            out[1]
        );
        assert!(
            out[2] == 0.0 && out[2].is_sign_negative(),
            "{isa:?}: {}",
            out[2]
        );
        assert_eq!(out[3], f32::INFINITY, "{isa:?}");
        assert!(out[4].is_nan(), "{isa:?}");
        let want = -80.0f64 / (1.0 + 80.0f64.exp());
        assert_close(
            out[5],
            want,
            6.0 * 2.0 * U * want.abs(),
            &format!("{isa:?} silu(-80)"),
        );
    }
}

#[test]
fn argmax_and_max_on_every_isa() {
    let mut rng = Rng::new(3);
    for &n in AWKWARD_SIZES {
        let mut x = rng.vec(n);
        let want = (0..n).fold(0, |best, i| if x[i] > x[best] { i } else { best });
        for isa in supported_isas() {
            assert_eq!(argmax_f32_with(isa, &x), Some(want), "{isa:?} n={n}");
            assert_eq!(max_f32_with(isa, &x), x[want], "{isa:?} n={n}");
        }
        // Ties resolve to the first index; a NaN wins (torch semantics).
        if n > 3 {
            x[n - 1] = 5.0;
            x[1] = 5.0;
            assert_eq!(argmax_f32_with(crate::kernels::detected_isa(), &x), Some(1));
            x[2] = f32::NAN;
            assert_eq!(argmax_f32_with(crate::kernels::detected_isa(), &x), Some(2));
        }
    }
    assert_eq!(argmax_f32(&[]), None);
}

#[test]
fn add_scale_basic() {
    let (a, b) = ([1.0f32, 2.0, 3.0], [0.5f32, -2.0, 1.0]);
    let mut out = [0.0; 3];
    add_f32(&a, &b, &mut out);
    assert_eq!(out, [1.5, 0.0, 4.0]);
    add_inplace_f32(&mut out, &a);
    assert_eq!(out, [2.5, 2.0, 7.0]);
    scale_f32(&mut out, 2.0);
    assert_eq!(out, [5.0, 4.0, 14.0]);
}

#[test]
fn rms_norm_matches_f64_on_every_isa() {
    let mut rng = Rng::new(4);
    for &n in AWKWARD_SIZES {
        let (x, w) = (rng.vec_scaled(n, 3.0), rng.vec(n));
        let mean_sq: f64 = x.iter().map(|v| (*v as f64).powi(2)).sum::<f64>() / n as f64;
        let inv = 1.0 / (mean_sq + 1e-6).sqrt();
        for isa in supported_isas() {
            let mut out = vec![f32::NAN; n];
            rms_norm_f32_with(isa, &x, &w, 1e-6, &mut out);
            for i in 0..n {
                let want = x[i] as f64 * inv * w[i] as f64;
                // Sum of squares (n+2)u relative, halved by the sqrt, plus 4 roundings.
                let tol = ((n as f64 + 2.0) * U * 0.5 + 4.0 * U) * want.abs() + 1e-30;
                assert_close(out[i], want, tol, &format!("rms {isa:?} n={n} i={i}"));
            }
        }
    }
}

#[test]
fn rms_norm_rows_equals_per_row() {
    let mut rng = Rng::new(5);
    let (rows, dim) = (37, 576);
    let (x, w) = (rng.vec(rows * dim), rng.vec(dim));
    let mut out = vec![0.0; rows * dim];
    rms_norm_rows_f32(&x, &w, 1e-5, &mut out);
    for r in 0..rows {
        let mut one = vec![0.0; dim];
        rms_norm_f32(&x[r * dim..(r + 1) * dim], &w, 1e-5, &mut one);
        assert_eq!(&out[r * dim..(r + 1) * dim], &one[..], "row {r}");
    }
}

#[test]
fn layer_norm_matches_f64_on_every_isa() {
    let mut rng = Rng::new(6);
    for &n in AWKWARD_SIZES {
        // A large common offset checks the two-pass variance does not cancel.
        let x: Vec<f32> = rng.vec(n).iter().map(|v| v + 100.0).collect();
        let (w, b) = (rng.vec(n), rng.vec(n));
        let mean: f64 = x.iter().map(|v| *v as f64).sum::<f64>() / n as f64;
        let var: f64 = x.iter().map(|v| (*v as f64 - mean).powi(2)).sum::<f64>() / n as f64;
        let inv = 1.0 / (var + 1e-5).sqrt();
        for isa in supported_isas() {
            for (wo, bo) in [
                (Some(&w[..]), Some(&b[..])),
                (None, None),
                (Some(&w[..]), None),
                (None, Some(&b[..])),
            ] {
                let mut out = vec![f32::NAN; n];
                layer_norm_f32_with(isa, &x, wo, bo, 1e-5, &mut out);
                for i in 0..n {
                    let norm = (x[i] as f64 - mean) * inv;
                    let want =
                        norm * wo.map_or(1.0, |w| w[i] as f64) + bo.map_or(0.0, |b| b[i] as f64);
                    // The mean carries (n+2)u·100 absolute error, amplified by inv; the
                    // variance (n+2)u relative.
                    let tol = (n as f64 + 4.0) * U * (100.0 * inv + norm.abs() + 1.0) * 2.0 + 1e-6;
                    assert_close(
                        out[i],
                        want,
                        tol,
                        &format!("layer_norm {isa:?} n={n} i={i}"),
                    );
                }
            }
        }
    }
}

#[test]
fn softmax_and_log_softmax_match_f64_on_every_isa() {
    let mut rng = Rng::new(7);
    for &n in AWKWARD_SIZES {
        let mut x = rng.vec_scaled(n, 20.0);
        if n > 4 {
            x[3] = f32::NEG_INFINITY;
        }
        let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
        let sum: f64 = x.iter().map(|v| (*v as f64 - max).exp()).sum();
        // Rounding x - max in f32 perturbs each exponent by |x - max|·u (relative change of
        // the exp); the normaliser sees the p-weighted mean of those.
        let mean_shift: f64 = x
            .iter()
            .filter(|v| v.is_finite())
            .map(|v| (*v as f64 - max).exp() / sum * (*v as f64 - max).abs())
            .sum::<f64>();
        for isa in supported_isas() {
            let mut p = x.clone();
            softmax_f32_with(isa, &mut p);
            let mut lp = x.clone();
            log_softmax_f32_with(isa, &mut lp);
            for i in 0..n {
                let want = (x[i] as f64 - max).exp() / sum;
                // exp 4 ulp, sum (n+2)u relative, two roundings.
                let shift = if x[i].is_finite() {
                    (x[i] as f64 - max).abs()
                } else {
                    0.0
                };
                let tol = (8.0 * 2.0 + n as f64 + 4.0 + 2.0 * shift + 2.0 * mean_shift) * U * want
                    + 1e-30;
                assert_close(p[i], want, tol, &format!("softmax {isa:?} n={n} i={i}"));
                let want_log = x[i] as f64 - max - sum.ln();
                if want_log.is_infinite() {
                    assert_eq!(lp[i], f32::NEG_INFINITY);
                } else {
                    let tol = (n as f64 + 4.0) * U * (max.abs() + want_log.abs() + 1.0) + 1e-6;
                    assert_close(
                        lp[i],
                        want_log,
                        tol,
                        &format!("log_softmax {isa:?} n={n} i={i}"),
                    );
                }
            }
        }
    }
}

#[test]
fn softmax_rows_equals_per_row_and_nan_propagates() {
    let mut rng = Rng::new(8);
    let (rows, dim) = (32, 4096);
    let x = rng.vec_scaled(rows * dim, 10.0);
    let mut all = x.clone();
    softmax_rows_f32(&mut all, dim);
    for r in 0..rows {
        let mut one = x[r * dim..(r + 1) * dim].to_vec();
        softmax_f32(&mut one);
        assert_eq!(&all[r * dim..(r + 1) * dim], &one[..]);
    }
    let mut with_nan = vec![1.0, f32::NAN, 2.0];
    softmax_f32(&mut with_nan);
    assert!(with_nan.iter().all(|v| v.is_nan()));
}

/// Edge values for cast tests: zeros, subnormals of both formats, halfway cases, extremes.
pub(crate) fn cast_edge_values() -> Vec<f32> {
    let mut v = vec![
        0.0,
        -0.0,
        1.0,
        -1.0,
        65504.0,
        65519.99,
        65520.0,
        -65520.0,
        1e10,
        6.1035156e-5,
        6.0e-8,
        5.96e-8,
        2.98e-8,
        2.9802322e-8,
        1e-9,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        -f32::NAN,
        f32::from_bits(0x7f80_0001), // signalling NaN
        f32::from_bits(0xffc1_2345),
        f32::MIN_POSITIVE,
        f32::from_bits(1),
        f32::from_bits(0x0040_0000),
        f32::MAX,
        f32::MIN,
        f32::from_bits(0x3f80_8000), // 1 + 2^-8: bf16 halfway, round to even (down)
        f32::from_bits(0x3f81_8000), // bf16 halfway, round up to even
        f32::from_bits(0x3f80_8001), // just above halfway
        f32::from_bits(0x3f80_1000), // f16 halfway 1 + 2^-11
        f32::from_bits(0x3f80_3000), // f16 halfway, odd below
        f32::from_bits(0x7f7f_ffff), // rounds to inf in bf16
        1.0 / 3.0,
        0.1,
        -2.5e-3,
    ];
    let mut rng = super::Rng::new(9);
    v.extend((0..200).map(|_| f32::from_bits(rng.next_u64() as u32)));
    v
}

#[test]
fn casts_on_every_isa_match_reference_bits() {
    let mut rng = Rng::new(10);
    let mut vals = cast_edge_values();
    vals.extend(rng.vec_scaled(1000, 70000.0));
    for n in AWKWARD_SIZES.iter().copied().chain([vals.len()]) {
        let src = &vals[..n.min(vals.len())];
        for isa in supported_isas() {
            let mut h = vec![f16::ZERO; src.len()];
            f32_to_f16_with(isa, src, &mut h);
            let mut b = vec![bf16::ZERO; src.len()];
            f32_to_bf16_with(isa, src, &mut b);
            for (i, &x) in src.iter().enumerate() {
                let want_h = f16::from_f32(x);
                if x.is_nan() {
                    assert!(h[i].is_nan() && b[i].is_nan(), "{isa:?} nan {i}");
                    assert_eq!(
                        h[i].to_bits() & 0x8000,
                        want_h.to_bits() & 0x8000,
                        "nan sign"
                    );
                } else {
                    assert_eq!(
                        h[i].to_bits(),
                        want_h.to_bits(),
                        "{isa:?} f16 of {x:e} ({:#x})",
                        x.to_bits()
                    );
                    // bf16 reference: exact RNE in f64 arithmetic on the bits.
                    let bits = x.to_bits() as u64;
                    let (hi, lo) = (bits >> 16, bits & 0xffff);
                    let up = lo > 0x8000 || (lo == 0x8000 && hi & 1 == 1);
                    assert_eq!(
                        b[i].to_bits() as u64,
                        hi + up as u64,
                        "{isa:?} bf16 of {x:e}"
                    );
                }
            }
            let mut back = vec![0.0f32; src.len()];
            f16_to_f32_with(isa, &h, &mut back);
            for i in 0..src.len() {
                assert_eq!(
                    back[i].to_bits(),
                    h[i].to_f32().to_bits(),
                    "{isa:?} f16->f32"
                );
            }
            bf16_to_f32_with(isa, &b, &mut back);
            for i in 0..src.len() {
                assert_eq!(
                    back[i].to_bits(),
                    (b[i].to_bits() as u32) << 16,
                    "{isa:?} bf16->f32"
                );
            }
        }
    }
}

/// add / add_inplace / scale round once per element, so the vectorised (active ISA) results
/// must equal the plain scalar ones exactly, on every tail length.
#[test]
fn add_and_scale_exact_on_awkward_sizes() {
    let mut rng = Rng::new(11);
    for &n in AWKWARD_SIZES {
        let (a, b) = (rng.vec(n), rng.vec(n));
        let mut out = vec![f32::NAN; n];
        add_f32(&a, &b, &mut out);
        let mut acc = a.clone();
        add_inplace_f32(&mut acc, &b);
        let mut scaled = a.clone();
        scale_f32(&mut scaled, 0.37);
        for i in 0..n {
            assert_eq!(out[i], a[i] + b[i], "add n={n} i={i}");
            assert_eq!(acc[i], a[i] + b[i], "add_inplace n={n} i={i}");
            assert_eq!(scaled[i], a[i] * 0.37, "scale n={n} i={i}");
        }
    }
}

/// The in-place forms run the same arithmetic as the out-of-place ones: bitwise equal.
#[test]
fn inplace_silu_and_rms_norm_equal_out_of_place_on_every_isa() {
    let mut rng = Rng::new(12);
    for &n in AWKWARD_SIZES {
        let (g, u, w) = (rng.vec_scaled(n, 8.0), rng.vec(n), rng.vec(n));
        for isa in supported_isas() {
            let mut out = vec![0.0; n];
            silu_mul_f32_with(isa, &g, &u, &mut out);
            let mut up = u.clone();
            silu_mul_inplace_f32_with(isa, &g, &mut up);
            assert_eq!(up, out, "silu {isa:?} n={n}");
            rms_norm_f32_with(isa, &g, &w, 1e-6, &mut out);
            let mut x = g.clone();
            rms_norm_inplace_f32_with(isa, &mut x, &w, 1e-6);
            assert_eq!(x, out, "rms_norm {isa:?} n={n}");
        }
    }
}
