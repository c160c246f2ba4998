//! linear (f32/f16/bf16 weights, every m regime) and strided matmul vs f64 triple loops.

use super::{assert_close, dot_tol, Rng};
use crate::kernels::linear::{linear_with, matmul_f32_with, Dims, WeightElem};
use crate::kernels::{set_num_threads, supported_isas, Isa};
use half::{bf16, f16};

/// f64 reference of y = x·wᵀ + b with the bound of each output: (exact, Σ|x·w|).
fn linear_ref<T: WeightElem>(x: &[f32], w: &[T], bias: Option<&[f32]>, d: Dims) -> Vec<(f64, f64)> {
    let mut out = Vec::with_capacity(d.m * d.n);
    for i in 0..d.m {
        for j in 0..d.n {
            let (mut s, mut a) = (
                bias.map_or(0.0, |b| b[j] as f64),
                bias.map_or(0.0, |b| (b[j] as f64).abs()),
            );
            for p in 0..d.k {
                let t = x[i * d.k + p] as f64 * w[j * d.k + p].to_f32() as f64;
                s += t;
                a += t.abs();
            }
            out.push((s, a));
        }
    }
    out
}

fn check_linear<T: WeightElem>(
    name: &str,
    isa: Isa,
    conv: impl Fn(f32) -> T,
    d: Dims,
    with_bias: bool,
    rng: &mut Rng,
) {
    let x = rng.vec(d.m * d.k);
    let w: Vec<T> = rng.vec(d.n * d.k).into_iter().map(conv).collect();
    let b = rng.vec(d.n);
    let bias = with_bias.then_some(&b[..]);
    let mut y = vec![f32::NAN; d.m * d.n];
    linear_with(isa, &x, &w, bias, &mut y, d);
    for (idx, (want, abs)) in linear_ref(&x, &w, bias, d).into_iter().enumerate() {
        assert_close(
            y[idx],
            want,
            dot_tol(d.k, abs),
            &format!("{name} {isa:?} {d:?} bias={with_bias} out {idx}"),
        );
    }
}

const SHAPES: &[(usize, usize)] = &[
    (1, 1),
    (7, 1),
    (15, 17),
    (16, 16),
    (17, 33),
    (31, 7),
    (33, 64),
    (576, 65),
    (64, 576),
    (5, 1536),
];

#[test]
fn linear_all_weight_types_all_isas_match_f64() {
    let mut rng = Rng::new(20);
    for &(k, n) in SHAPES {
        for m in [1, 2, 3, 4, 5, 9] {
            let d = Dims { m, k, n };
            for isa in supported_isas() {
                let with_bias = (k + n + m) % 2 == 0;
                check_linear("f32", isa, |v| v, d, with_bias, &mut rng);
                check_linear("f16", isa, f16::from_f32, d, !with_bias, &mut rng);
                check_linear("bf16", isa, bf16::from_f32, d, with_bias, &mut rng);
            }
        }
    }
}

#[test]
fn linear_large_gemv_splits_over_threads_and_stays_exact() {
    // Large enough that the rows are split over the pool (also exercised with 1 thread by the
    // default pool when the machine has one core).
    let mut rng = Rng::new(21);
    let d = Dims {
        m: 1,
        k: 1536,
        n: 576,
    };
    for isa in supported_isas() {
        check_linear("f32", isa, |v| v, d, true, &mut rng);
        check_linear("bf16", isa, bf16::from_f32, d, false, &mut rng);
    }
    // Prefill-sized half-weight gemm through the register tiles.
    let d = Dims {
        m: 37,
        k: 576,
        n: 96,
    };
    check_linear(
        "f16",
        crate::kernels::detected_isa(),
        f16::from_f32,
        d,
        true,
        &mut rng,
    );
    // f32 prefill through the gemm crate, with bias.
    let d = Dims {
        m: 70,
        k: 200,
        n: 130,
    };
    check_linear(
        "f32",
        crate::kernels::detected_isa(),
        |v| v,
        d,
        true,
        &mut rng,
    );
}

#[test]
fn linear_k_zero_gives_bias() {
    let b = [1.0f32, -2.0];
    let mut y = [f32::NAN; 6];
    crate::kernels::linear_f32(&[], &[], Some(&b), &mut y, 3, 0, 2);
    assert_eq!(y, [1.0, -2.0, 1.0, -2.0, 1.0, -2.0]);
}

#[test]
fn set_num_threads_rejects_zero_and_applies() {
    let _guard = super::THREADS.lock().unwrap_or_else(|e| e.into_inner());
    assert!(set_num_threads(0).is_err());
    let before = crate::kernels::num_threads();
    set_num_threads(3).unwrap();
    assert_eq!(crate::kernels::num_threads(), 3);
    set_num_threads(before).unwrap();
}

/// matmul with arbitrary strides: a and b stored transposed or padded, beta 0 (c holds NaN,
/// which must not leak) and beta != 0.
#[test]
fn matmul_strided_matches_f64() {
    let mut rng = Rng::new(22);
    for &(m, k, n) in &[
        (1, 1, 1),
        (3, 7, 5),
        (17, 33, 15),
        (64, 31, 65),
        (128, 96, 130),
        (1, 576, 7),
        (9, 0, 4),
    ] {
        for (a_t, b_t, beta) in [
            (false, false, 0.0f32),
            (true, false, 0.5),
            (false, true, 1.0),
            (true, true, 0.0),
        ] {
            let pad = 3;
            // a: m x k; row-major with padded rows, or column-major ("transposed") storage.
            let (a_rs, a_cs) = if a_t { (1, m + pad) } else { (k + pad, 1) };
            let (b_rs, b_cs) = if b_t { (1, k + pad) } else { (n + pad, 1) };
            let a = rng.vec(m.max(1) * (k + pad) + (m + pad) * k.max(1));
            let b = rng.vec(k.max(1) * (n + pad) + (k + pad) * n.max(1));
            let c_rs = n + 1;
            let c0: Vec<f32> = if beta == 0.0 {
                vec![f32::NAN; m * c_rs]
            } else {
                rng.vec(m * c_rs)
            };
            for isa in supported_isas() {
                let mut c = c0.clone();
                matmul_f32_with(
                    isa, m, k, n, &a, a_rs, a_cs, &b, b_rs, b_cs, &mut c, c_rs, beta,
                );
                for i in 0..m {
                    for j in 0..n {
                        let mut s = if beta == 0.0 {
                            0.0
                        } else {
                            beta as f64 * c0[i * c_rs + j] as f64
                        };
                        let mut abs = s.abs();
                        for p in 0..k {
                            let t = a[i * a_rs + p * a_cs] as f64 * b[p * b_rs + j * b_cs] as f64;
                            s += t;
                            abs += t.abs();
                        }
                        let what = format!(
                            "matmul {isa:?} m{m} k{k} n{n} at={a_t} bt={b_t} beta={beta} ({i},{j})"
                        );
                        assert_close(c[i * c_rs + j], s, dot_tol(k + 1, abs), &what);
                    }
                    // The padding column of c is never written.
                    if n < c_rs {
                        let pad_v = c[i * c_rs + n];
                        assert!(
                            pad_v.to_bits() == c0[i * c_rs + n].to_bits(),
                            "padding written"
                        );
                    }
                }
            }
        }
    }
}

/// The scalar level rounds each output once: over a long k (an LM head's input gradient sums
/// 49,152 products) it is the float64 sum rounded to f32, where one f32 chain drifts by ~1e-4.
#[test]
fn scalar_matmul_rounds_each_output_once_over_a_long_k() {
    let mut rng = Rng::new(23);
    let (m, k, n) = (2, 49_152, 3);
    let a = rng.vec(m * k);
    let b = rng.vec(k * n);
    let mut c = vec![0f32; m * n];
    matmul_f32_with(Isa::Scalar, m, k, n, &a, k, 1, &b, n, 1, &mut c, n, 0.0);
    let mut chain_off = 0f64;
    for i in 0..m {
        for j in 0..n {
            let (mut exact, mut chain) = (0f64, 0f32);
            for p in 0..k {
                exact += a[i * k + p] as f64 * b[p * n + j] as f64;
                chain += a[i * k + p] * b[p * n + j];
            }
            assert_eq!(c[i * n + j], exact as f32, "({i},{j})");
            chain_off = chain_off.max((chain as f64 - exact).abs());
        }
    }
    // What the old single f32 chain gave here: far from one rounding.
    assert!(chain_off > 1e-4, "{chain_off}");
}

#[test]
#[should_panic(expected = "too short")]
fn matmul_rejects_short_buffers() {
    let mut c = [0.0f32; 4];
    crate::kernels::matmul_f32(2, 2, 2, &[0.0; 3], 2, 1, &[0.0; 4], 2, 1, &mut c, 2, 0.0);
}

/// A tile's 16 outputs reduced together must be bit-identical to 16 separate `hsum`s: the
/// decode gemv reduces one at a time, and batch invariance needs the same bits. Mixed
/// magnitudes make every reassociation visible.
#[test]
fn hsum16_is_sixteen_hsums_bit_for_bit() {
    use crate::kernels::simd::Simd;
    fn check<S: Simd>(name: &str, rng: &mut Rng) {
        for round in 0..200 {
            let data: Vec<f32> = (0..16 * S::W)
                .map(|i| rng.f32() * 10f32.powi((i % 13) as i32 - 6 + round % 3))
                .collect();
            // SAFETY: `data` holds 16 * W floats; the caller checked the CPU runs S.
            let (one, many) = unsafe {
                let v: [S::V; 16] = std::array::from_fn(|i| S::load(data[i * S::W..].as_ptr()));
                (v.map(|v| S::hsum(v)), S::hsum16(&v))
            };
            for i in 0..16 {
                assert_eq!(
                    one[i].to_bits(),
                    many[i].to_bits(),
                    "{name} round {round} vector {i}"
                );
            }
        }
    }
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512dq,avx2,fma")]
    unsafe fn check_avx512(rng: &mut Rng) {
        check::<crate::kernels::simd::Avx512>("avx512", rng)
    }
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn check_avx2(rng: &mut Rng) {
        check::<crate::kernels::simd::Avx2>("avx2", rng)
    }
    let mut rng = Rng::new(16);
    for isa in supported_isas() {
        match isa {
            // SAFETY (each arm): `supported_isas` lists only levels this CPU runs.
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => unsafe { check_avx512(&mut rng) },
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => unsafe { check_avx2(&mut rng) },
            #[cfg(target_arch = "aarch64")]
            Isa::Neon => check::<crate::kernels::simd::Neon>("neon", &mut rng),
            _ => {}
        }
    }
}
