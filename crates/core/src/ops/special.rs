//! Scalar special functions (f64) behind the pointwise ops: erf, erfc, lgamma and the inverse
//! hyperbolics come from the C math library (the same one PyTorch's CPU kernels call, so the
//! float64 results agree to the last bit or nearly); digamma, erfinv, i0 and the regularized
//! incomplete gamma functions (igamma / igammac) are computed here.

use std::f64::consts::PI;

mod c {
    #[cfg(unix)]
    use std::os::raw::c_int;
    extern "C" {
        pub fn erf(x: f64) -> f64;
        pub fn erfc(x: f64) -> f64;
        pub fn asinh(x: f64) -> f64;
        pub fn acosh(x: f64) -> f64;
        pub fn atanh(x: f64) -> f64;
        #[cfg(unix)]
        pub fn lgamma_r(x: f64, sign: *mut c_int) -> f64;
        #[cfg(not(unix))]
        pub fn lgamma(x: f64) -> f64;
    }
}

/// The error function.
pub fn erf(x: f64) -> f64 {
    // SAFETY: a pure C99 math function of one double.
    unsafe { c::erf(x) }
}

/// The complementary error function 1 - erf(x), accurate in the tail.
pub fn erfc(x: f64) -> f64 {
    // SAFETY: a pure C99 math function of one double.
    unsafe { c::erfc(x) }
}

/// Inverse hyperbolic sine.
pub fn asinh(x: f64) -> f64 {
    // SAFETY: a pure C99 math function of one double.
    unsafe { c::asinh(x) }
}

/// Inverse hyperbolic cosine (NaN below 1).
pub fn acosh(x: f64) -> f64 {
    // SAFETY: a pure C99 math function of one double.
    unsafe { c::acosh(x) }
}

/// Inverse hyperbolic tangent (NaN outside [-1, 1]).
pub fn atanh(x: f64) -> f64 {
    // SAFETY: a pure C99 math function of one double.
    unsafe { c::atanh(x) }
}

/// ln |Γ(x)| (+inf at the poles 0, -1, -2, ...).
pub fn lgamma(x: f64) -> f64 {
    #[cfg(unix)]
    {
        let mut sign: std::os::raw::c_int = 0;
        // SAFETY: `sign` is a valid, writable int for the call's duration.
        unsafe { c::lgamma_r(x, &mut sign) }
    }
    #[cfg(not(unix))]
    {
        // SAFETY: a C99 math function of one double.
        unsafe { c::lgamma(x) }
    }
}

/// ψ(10), where the upward recurrence of integer arguments lands exactly.
const PSI_10: f64 = 2.251_752_589_066_721;

/// The digamma function ψ(x) = Γ'(x)/Γ(x): ψ(±0) = ∓inf, NaN at the negative integers and
/// -inf; reflection below 0, upward recurrence to 10, then the asymptotic series.
pub fn digamma(x: f64) -> f64 {
    if x == 0.0 {
        return f64::INFINITY.copysign(-x);
    }
    if x.is_nan() || x == f64::NEG_INFINITY {
        return f64::NAN;
    }
    if x < 0.0 {
        if x == x.trunc() {
            return f64::NAN;
        }
        let r = x - x.trunc();
        return digamma(1.0 - x) - PI / (PI * r).tan();
    }
    let mut x = x;
    let mut result = 0.0;
    while x < 10.0 {
        result -= 1.0 / x;
        x += 1.0;
    }
    if x == 10.0 {
        return result + PSI_10;
    }
    let mut y = 0.0;
    if x < 1e17 {
        let z = 1.0 / (x * x);
        // Σ B_2k / (2k x^2k), k = 1..7, in Horner form in z = 1/x².
        let coefficients = [
            1.0 / 12.0,
            -1.0 / 120.0,
            1.0 / 252.0,
            -1.0 / 240.0,
            1.0 / 132.0,
            -691.0 / 32760.0,
            1.0 / 12.0,
        ];
        let mut p = 0.0;
        for c in coefficients.iter().rev() {
            p = p * z + c;
        }
        y = z * p;
    }
    result + x.ln() - 0.5 / x - y
}

/// The inverse error function on [-1, 1] (±inf at ±1, NaN outside): an initial closed-form
/// estimate refined by Newton steps on erf (erfc near ±1, where erf is flat).
pub fn erfinv(y: f64) -> f64 {
    if y.is_nan() || !(-1.0..=1.0).contains(&y) {
        return f64::NAN;
    }
    if y == 1.0 || y == -1.0 {
        return f64::INFINITY.copysign(y);
    }
    if y == 0.0 {
        return y;
    }
    let a = y.abs();
    // Winitzki's approximation (relative error about 2e-3).
    const K: f64 = 0.147;
    let l = ((1.0 - a) * (1.0 + a)).ln();
    let t = 2.0 / (PI * K) + 0.5 * l;
    let mut x = ((t * t - l / K).sqrt() - t).sqrt();
    let two_over_sqrt_pi = 2.0 / PI.sqrt();
    let tail = 1.0 - a;
    for _ in 0..4 {
        // f(x) = erf(x) - a, written as (1 - a) - erfc(x) where that is more accurate.
        let f = if a > 0.5 { tail - erfc(x) } else { erf(x) - a };
        let d = two_over_sqrt_pi * (-x * x).exp();
        if d == 0.0 {
            break;
        }
        // Halley's correction: f'' = -2x f'.
        let step = f / d;
        let next = x - step / (1.0 + x * step);
        if next == x {
            break;
        }
        x = next;
    }
    x.copysign(y)
}

/// The modified Bessel function of the first kind of order 0 (NaN at ±inf, as PyTorch's
/// Chebyshev evaluation gives).
pub fn i0(x: f64) -> f64 {
    if x.is_nan() || x.is_infinite() {
        return f64::NAN;
    }
    let a = x.abs();
    if a <= 30.0 {
        // Σ (x²/4)^k / (k!)², all terms positive.
        let q = a * a / 4.0;
        let mut term = 1.0;
        let mut sum = 1.0;
        let mut k = 0.0;
        loop {
            k += 1.0;
            term *= q / (k * k);
            sum += term;
            if term <= sum * 1e-17 {
                break;
            }
        }
        return sum;
    }
    // e^a / sqrt(2πa) Σ_k ((2k-1)!!)² / (k! (8a)^k).
    let mut term = 1.0;
    let mut sum = 1.0;
    for k in 1..30 {
        let kf = k as f64;
        let next = term * (2.0 * kf - 1.0) * (2.0 * kf - 1.0) / (kf * 8.0 * a);
        if next.abs() >= term.abs() {
            break;
        }
        term = next;
        sum += term;
        if term.abs() <= sum * 1e-17 {
            break;
        }
    }
    let e = a.exp();
    if e.is_infinite() {
        // e^(a/2) twice keeps the value finite while it is representable.
        let h = (a / 2.0).exp();
        return h * (sum / (2.0 * PI * a).sqrt()) * h;
    }
    e * sum / (2.0 * PI * a).sqrt()
}

const MACHEP: f64 = 1.110_223_024_625_156_5e-16;

/// x^a e^-x / Γ(a), through logarithms (as Cephes' `igam_fac` away from a ≈ x).
fn igamma_prefactor(a: f64, x: f64) -> f64 {
    (a * x.ln() - x - lgamma(a)).exp()
}

/// ζ(k) for k = 0..=60 (entries below 2 unused): closed forms and known values for small k,
/// direct sums beyond.
fn zeta_table() -> &'static [f64; 61] {
    static TABLE: std::sync::OnceLock<[f64; 61]> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        let mut z = [0.0; 61];
        let p2 = PI * PI;
        z[2] = p2 / 6.0;
        z[3] = 1.202_056_903_159_594_3;
        z[4] = p2 * p2 / 90.0;
        z[5] = 1.036_927_755_143_37;
        z[6] = p2 * p2 * p2 / 945.0;
        z[7] = 1.008_349_277_381_922_8;
        z[8] = p2 * p2 * p2 * p2 / 9450.0;
        z[9] = 1.002_008_392_826_082_2;
        for (k, v) in z.iter_mut().enumerate().skip(10) {
            // Smallest terms first.
            let mut sum = 0.0;
            for n in (2..=80).rev() {
                sum += (n as f64).powi(-(k as i32));
            }
            *v = 1.0 + sum;
        }
        z
    })
}

/// ln Γ(1 + a) for |a| <= 0.5 by its Taylor series -γa + Σ (-1)^k ζ(k) a^k / k.
fn lgamma1p_taylor(a: f64) -> f64 {
    const EULER: f64 = 0.577_215_664_901_532_9;
    if a == 0.0 {
        return 0.0;
    }
    let z = zeta_table();
    let mut res = -EULER * a;
    let mut xfac = -a;
    for (k, zk) in z.iter().enumerate().skip(2) {
        xfac *= -a;
        let coeff = zk * xfac / k as f64;
        res += coeff;
        if coeff.abs() < MACHEP * res.abs() {
            break;
        }
    }
    res
}

/// ln Γ(1 + a), accurate near a = 0 and a = 1.
fn lgamma1p(a: f64) -> f64 {
    if a.abs() <= 0.5 {
        lgamma1p_taylor(a)
    } else if (a - 1.0).abs() < 0.5 {
        a.ln() + lgamma1p_taylor(a - 1.0)
    } else {
        lgamma(a + 1.0)
    }
}

/// P(a, x) by its power series.
fn igamma_series(a: f64, x: f64) -> f64 {
    let ax = igamma_prefactor(a, x);
    if ax == 0.0 {
        return 0.0;
    }
    let mut r = a;
    let mut c = 1.0;
    let mut ans = 1.0;
    for _ in 0..2000 {
        r += 1.0;
        c *= x / r;
        ans += c;
        if c <= MACHEP * ans {
            break;
        }
    }
    ans * ax / a
}

/// Q(a, x) by its power series (small x).
fn igammac_series(a: f64, x: f64) -> f64 {
    let mut fac = 1.0;
    let mut sum = 0.0;
    for n in 1..2000 {
        fac *= -x / n as f64;
        let term = fac / (a + n as f64);
        sum += term;
        if term.abs() <= MACHEP * sum.abs() {
            break;
        }
    }
    let logx = x.ln();
    let term = -(a * logx - lgamma1p(a)).exp_m1();
    term - (a * logx - lgamma(a)).exp() * sum
}

/// Q(a, x) by its continued fraction (x > 1.1, x >= a), evaluated by the recurrence for the
/// convergents with rescaling.
fn igammac_fraction(a: f64, x: f64) -> f64 {
    const BIG: f64 = 4.503_599_627_370_496e15;
    const BIGINV: f64 = 2.220_446_049_250_313e-16;
    let ax = igamma_prefactor(a, x);
    if ax == 0.0 {
        return 0.0;
    }
    let mut y = 1.0 - a;
    let mut z = x + y + 1.0;
    let mut c = 0.0;
    let mut pkm2 = 1.0;
    let mut qkm2 = x;
    let mut pkm1 = x + 1.0;
    let mut qkm1 = z * x;
    let mut ans = pkm1 / qkm1;
    for _ in 0..2000 {
        c += 1.0;
        y += 1.0;
        z += 2.0;
        let yc = y * c;
        let pk = pkm1 * z - pkm2 * yc;
        let qk = qkm1 * z - qkm2 * yc;
        let t = if qk != 0.0 {
            let r = pk / qk;
            let t = ((ans - r) / r).abs();
            ans = r;
            t
        } else {
            1.0
        };
        pkm2 = pkm1;
        pkm1 = pk;
        qkm2 = qkm1;
        qkm1 = qk;
        if pk.abs() > BIG {
            pkm2 *= BIGINV;
            pkm1 *= BIGINV;
            qkm2 *= BIGINV;
            qkm1 *= BIGINV;
        }
        if t <= MACHEP {
            break;
        }
    }
    ans * ax
}

/// The regularized lower incomplete gamma function P(a, x).
pub fn igamma(a: f64, x: f64) -> f64 {
    if a.is_nan() || x.is_nan() || a < 0.0 || x < 0.0 {
        return f64::NAN;
    }
    if a == 0.0 {
        return if x > 0.0 { 1.0 } else { f64::NAN };
    }
    if x == 0.0 {
        return 0.0;
    }
    if a.is_infinite() {
        return if x.is_infinite() { f64::NAN } else { 0.0 };
    }
    if x.is_infinite() {
        return 1.0;
    }
    if x > 1.0 && x > a {
        return 1.0 - igammac(a, x);
    }
    igamma_series(a, x)
}

/// The regularized upper incomplete gamma function Q(a, x) = 1 - P(a, x).
pub fn igammac(a: f64, x: f64) -> f64 {
    if a.is_nan() || x.is_nan() || a < 0.0 || x < 0.0 {
        return f64::NAN;
    }
    if a == 0.0 {
        return if x > 0.0 { 0.0 } else { f64::NAN };
    }
    if x == 0.0 {
        return 1.0;
    }
    if a.is_infinite() {
        return if x.is_infinite() { f64::NAN } else { 1.0 };
    }
    if x.is_infinite() {
        return 0.0;
    }
    if x > 1.1 {
        if x < a {
            1.0 - igamma_series(a, x)
        } else {
            igammac_fraction(a, x)
        }
    } else if x <= 0.5 {
        if -0.4 / x.ln() < a {
            1.0 - igamma_series(a, x)
        } else {
            igammac_series(a, x)
        }
    } else if x * 1.1 < a {
        1.0 - igamma_series(a, x)
    } else {
        igammac_series(a, x)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_values() {
        assert!((digamma(1.0) + 0.577_215_664_901_532_9).abs() < 1e-15);
        assert!((digamma(0.5) + 1.963_510_026_021_423_5).abs() < 1e-15);
        assert!(digamma(-2.0).is_nan());
        assert_eq!(digamma(0.0), f64::NEG_INFINITY);
        assert!((lgamma(0.5) - 0.572_364_942_924_700_1).abs() < 1e-15);
        assert_eq!(lgamma(1.0), 0.0);
        assert!((erfinv(0.5) - 0.476_936_276_204_469_9).abs() < 1e-15);
        assert!((erfinv(-0.99) + 1.821_386_367_718_449_6).abs() < 1e-14);
        assert_eq!(erfinv(1.0), f64::INFINITY);
        assert!((i0(1.0) - 1.266_065_877_752_008_4).abs() < 1e-15);
        assert!((i0(40.0) / 1.489_477_479_341_99e16 - 1.0).abs() < 1e-14);
        assert!((erf(0.5) - 0.520_499_877_813_046_5).abs() < 1e-16);
        // P(1, x) = 1 - e^-x; P(a, x) + Q(a, x) = 1.
        for x in [0.3, 1.0, 1.5, 4.0] {
            assert!((igamma(1.0, x) - (1.0 - (-x).exp())).abs() < 1e-15);
            assert!((igammac(1.0, x) - (-x).exp()).abs() < 1e-15);
            assert!((igamma(0.01, x) + igammac(0.01, x) - 1.0).abs() < 1e-14);
        }
        assert!((lgamma1p(0.5) - lgamma(1.5)).abs() < 1e-15);
    }
}
