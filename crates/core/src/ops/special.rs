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
/// ln(f64::MAX): below -MAXLOG the incomplete-gamma prefactor underflows to 0.
const MAXLOG: f64 = 709.782_712_893_384;

// The regularized incomplete gamma functions P(a, x) = igamma and Q(a, x) = igammac follow
// the algorithm of PyTorch's `calc_igamma` / `calc_igammac` (itself SciPy's / Cephes'), with
// the same region boundaries and stopping rules so the float64 results agree to the bit:
//
// * a in (20, 200) with |x - a| / a < 0.3, or a > 200 with |x - a| / a < 4.5 / sqrt(a):
//   Temme's uniform asymptotic expansion (DLMF 8.12.3 / 8.12.4);
// * otherwise the power series of P (DLMF 8.11.4), the series of Q for small x (DLMF 8.7.3),
//   or the continued fraction of Q (DLMF 8.9.2), P and Q being 1 minus each other;
// * the factor x^a e^-x / Γ(a) through logarithms, or near a ≈ x through a Lanczos sum.
//
// PyTorch's x86-64 kernels are compiled for AVX2 / AVX-512 with floating-point contraction,
// so some `a * b + c` expressions run as one fused multiply-add: the ones marked `madd`
// below, fused when `fused` is set. Which copy of the code an element meets depends on where
// the compiler inlined it (measured against torch 2.15's CPU build):
//
// * `torch.igammac`: fused everywhere;
// * `torch.igamma` ([`igamma`]): its own series fused, but Q (for x > 1, x > a) reached
//   through an out-of-line copy built without FMA; this holds for the vectorized groups of a
//   contiguous loop, for strided / broadcast loops and for 0-dim operands;
// * `torch.igamma` on the last (n mod 2·Vec::size()) elements of a contiguous inner loop of n
//   (n mod 16 for float64 with AVX-512, n mod 8 with AVX2; all of a loop shorter than that)
//   ([`igamma_unfused`]): nothing fused.

/// `a * b + c`, rounded once when `fused` (as the FMA-contracted C++ code computes it).
#[inline]
fn madd(fused: bool, a: f64, b: f64, c: f64) -> f64 {
    if fused {
        a.mul_add(b, c)
    } else {
        a * b + c
    }
}

/// Whether PyTorch's CPU kernels run FMA-contracted here (its AVX2 / AVX-512 builds).
fn kernels_fuse() -> bool {
    crate::kernels::active_isa() != crate::kernels::Isa::Scalar
}

/// The Lanczos approximation's g (13-term, 53-bit set).
const LANCZOS_G: f64 = 6.024_680_040_776_73;

/// Σ_k n_k a^k / Σ_k d_k a^k: the Lanczos sum scaled by e^g, as a rational function of degree
/// 12 / 12 (evaluated in 1/a for a > 1 to keep the powers bounded).
fn lanczos_sum_expg_scaled(a: f64, fused: bool) -> f64 {
    const NUM: [f64; 13] = [
        0.006_061_842_346_248_907,
        0.509_841_665_565_667_6,
        19.519_927_882_476_175,
        449.944_556_906_316_8,
        6_955.999_602_515_376,
        75_999.293_040_145_42,
        601_859.617_168_109_9,
        3_481_712.154_980_646,
        14_605_578.087_685_067,
        43_338_889.324_676_14,
        86_363_131.288_138_6,
        103_794_043.116_344_54,
        56_906_521.913_471_565,
    ];
    // a (a + 1) ... (a + 11) expanded, highest power first (as NUM).
    const DEN: [f64; 13] = [
        1.0,
        66.0,
        1_925.0,
        32_670.0,
        357_423.0,
        2_637_558.0,
        13_339_535.0,
        45_995_730.0,
        105_258_076.0,
        150_917_976.0,
        120_543_840.0,
        39_916_800.0,
        0.0,
    ];
    // Horner's rule from the first coefficient, or from the last one in 1/a.
    let horner = |coef: &[f64; 13], y: f64, from_last: bool| {
        let at = |i: usize| if from_last { coef[12 - i] } else { coef[i] };
        (1..13).fold(at(0), |acc, i| madd(fused, acc, y, at(i)))
    };
    let big = a.abs() > 1.0;
    let y = if big { 1.0 / a } else { a };
    horner(&NUM, y, big) / horner(&DEN, y, big)
}

/// x^a e^-x / Γ(a): through logarithms away from a ≈ x, else through the Lanczos sum (which
/// avoids the cancellation in a ln x - x - ln Γ(a)).
fn igam_fac(a: f64, x: f64, fused: bool) -> f64 {
    if (a - x).abs() > 0.4 * a.abs() {
        let ax = madd(fused, a, x.ln(), -x) - lgamma(a);
        if ax < -MAXLOG {
            return 0.0;
        }
        return ax.exp();
    }
    let fac = a + LANCZOS_G - 0.5;
    let mut res = (fac / std::f64::consts::E).sqrt() / lanczos_sum_expg_scaled(a, fused);
    if a < 200.0 && x < 200.0 {
        res *= (a - x).exp() * (x / fac).powf(a);
    } else {
        let num = x - a - LANCZOS_G + 0.5;
        let numfac = num / fac;
        res *= madd(
            fused,
            a,
            numfac.ln_1p() - numfac,
            x * (0.5 - LANCZOS_G) / fac,
        )
        .exp();
    }
    res
}

/// P(a, x) by its power series.
fn igam_series(a: f64, x: f64, fused: bool) -> f64 {
    let ax = igam_fac(a, x, fused);
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

/// Q(a, x) by its series for small x, written to avoid the cancellation in 1 - P.
fn igamc_series(a: f64, x: f64, fused: bool) -> f64 {
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
    let term = -madd(fused, a, logx, -lgamma(1.0 + a)).exp_m1();
    madd(fused, -madd(fused, a, logx, -lgamma(a)).exp(), sum, term)
}

/// Coefficients d[k][n] of Temme's uniform asymptotic expansion of the incomplete gamma
/// functions, C_k(η) = Σ_n d[k][n] η^n, rounded to nearest from their exact rational values.
/// They follow from the recurrence C_0(η) = 1/(λ - 1) - 1/η and
/// C_k(η) = C_{k-1}'(η) / η + (-1)^k γ_k C_0(η) (the γ_k / η poles cancel, which fixes the
/// Stirling coefficients γ_k = (-1)^(k+1) d[k-1][1]), where η²/2 = λ - 1 - ln λ.
#[rustfmt::skip]
const TEMME: [[f64; 25]; 25] = [
    [
        -0.3333333333333333, 0.08333333333333333, -0.014814814814814815, 0.0011574074074074073,
        0.0003527336860670194, -0.0001787551440329218, 3.919263178522438e-05, -2.185448510679992e-06,
        -1.85406221071516e-06, 8.296711340953087e-07, -1.7665952736826078e-07, 6.707853543401498e-09,
        1.0261809784240309e-08, -4.382036018453353e-09, 9.14769958223679e-10, -2.5514193994946248e-11,
        -5.830772132550426e-11, 2.4361948020667415e-11, -5.0276692801141755e-12, 1.1004392031956135e-13,
        3.371763262400985e-13, -1.392388722418162e-13, 2.8534893807047445e-14, -5.139111834242572e-16,
        -1.9752288294349442e-15,
    ],
    [
        -0.001851851851851852, -0.003472222222222222, 0.0026455026455026454, -0.0009902263374485596,
        0.00020576131687242798, -4.018775720164609e-07, -1.8098550334489977e-05, 7.64916091608111e-06,
        -1.6120900894563446e-06, 4.647127802807434e-09, 1.378633446915721e-07, -5.752545603517705e-08,
        1.1951628599778148e-08, -1.7543241719747647e-11, -1.0091543710600413e-09, 4.162792991842583e-10,
        -8.56390702649298e-11, 6.067215101604758e-14, 7.1624989648114856e-12, -2.933186643771437e-12,
        5.996696365683689e-13, -2.1671786527323313e-16, -4.978339972369262e-14, 2.0291628823713425e-14,
        -4.13125571381061e-15,
    ],
    [
        0.004133597883597883, -0.0026813271604938273, 0.0007716049382716049, 2.0093878600823047e-06,
        -0.0001073665322636516, 5.2923448829120125e-05, -1.2760635188618728e-05, 3.423578734096138e-08,
        1.3721957309062934e-06, -6.298992138380055e-07, 1.4280614206064242e-07, -2.0477098421990866e-10,
        -1.409252991086752e-08, 6.228974084922022e-09, -1.3670488396617114e-09, 9.428356159014678e-13,
        1.2872252400089318e-10, -5.5645956134363323e-11, 1.197593554636698e-11, -4.1689782251838634e-15,
        -1.0940640427884595e-12, 4.662239946390136e-13, -9.905105763906907e-14, 1.8931876768373515e-17,
        8.859221872591127e-15,
    ],
    [
        0.0006494341563786008, 0.00022947209362139917, -0.0004691894943952557, 0.00026772063206283885,
        -7.561801671883977e-05, -2.396505113867297e-07, 1.1082654115347302e-05, -5.6749528269915965e-06,
        1.4230900732435883e-06, -2.7861080291528143e-11, -1.6958404091930278e-07, 8.099464905388083e-08,
        -1.9111168485973655e-08, 2.3928620439808118e-12, 2.0620131815488797e-09, -9.460496661855133e-10,
        2.1541049775774907e-10, -1.388823336813903e-14, -2.1894761681963938e-11, 9.790998951171684e-12,
        -2.178219188018096e-12, 6.208819573407901e-17, 2.126978363279737e-13, -9.344688791517433e-14,
        2.045367122678285e-14,
    ],
    [
        -0.0008618882909167117, 0.0007840392217200666, -0.0002990724803031902, -1.4638452578843418e-06,
        6.641498215465122e-05, -3.968365047179435e-05, 1.1375726970678419e-05, 2.507497226237533e-10,
        -1.6954149536558305e-06, 8.907507532205309e-07, -2.292934834000805e-07, 2.956794137544049e-11,
        2.8865829742708783e-08, -1.4189739437803219e-08, 3.4463580499464896e-09, -2.3024517174528067e-13,
        -3.9409233028046403e-10, 1.86023389685045e-10, -4.356323005056618e-11, 1.278600101629623e-15,
        4.67927502665792e-12, -2.149246470613483e-12, 4.908815614809652e-13, -6.33859148489156e-18,
        -5.045332069080094e-14,
    ],
    [
        -0.00033679855336635813, -6.972813758365857e-05, 0.0002772753244959392, -0.00019932570516188847,
        6.797780477937208e-05, 1.419062920643967e-07, -1.3594048189768693e-05, 8.018470256334202e-06,
        -2.291481176508095e-06, -3.252473551298454e-10, 3.4652846491085265e-07, -1.8447187191171344e-07,
        4.8240967037894184e-08, -1.7989466721743514e-14, -6.306194500013523e-09, 3.162417628774568e-09,
        -7.840924253697429e-10, 5.192679165254041e-15, 9.358944242306784e-11, -4.513426216163278e-11,
        1.0799129993116828e-11, -3.661886712685252e-17, -1.210902069055155e-12, 5.680743584990564e-13,
        -1.3249659916340829e-13,
    ],
    [
        0.0005313079364639922, -0.0005921664373536939, 0.0002708782096718045, 7.902353232660328e-07,
        -8.153969367561969e-05, 5.61168275310625e-05, -1.8329116582843375e-05, -3.0796134506033047e-09,
        3.465155368803609e-06, -2.0291327396058603e-06, 5.788792863149004e-07, 2.338630673826657e-13,
        -8.828600746330484e-08, 4.7435958880408125e-08, -1.2545415020710383e-08, 8.649648858010293e-14,
        1.6846058979264062e-09, -8.575492823577594e-10, 2.1598224929232125e-10, -7.613230520476153e-16,
        -2.6639822008536144e-11, 1.3065700536611057e-11, -3.1799163902367977e-12, 4.710976121367431e-18,
        3.6902800842763465e-13,
    ],
    [
        0.00034436760689237765, 5.171790908260592e-05, -0.00033493161081142234, 0.0002812695154763237,
        -0.00010976582244684731, -1.2741009095484485e-07, 2.7744451511563645e-05, -1.8263488805711332e-05,
        5.7876949497350525e-06, 4.93875893393627e-10, -1.0595367014026043e-06, 6.166714376110408e-07,
        -1.7562973359060463e-07, -1.297447328701544e-12, 2.695423606288966e-08, -1.4578352908731272e-08,
        3.887645959386175e-09, -3.881002251019412e-17, -5.327994173877286e-10, 2.7437977643314844e-10,
        -6.995796092070568e-11, 2.589986387486848e-17, 8.856689099669639e-12, -4.403168815871311e-12,
        1.0865561947091654e-12,
    ],
    [
        -0.0006526239185953094, 0.0008394987206720873, -0.000438297098541721, -6.969091458420552e-07,
        0.00016644846642067547, -0.00012783517679769218, 4.629953263691304e-05, 4.557909867922708e-09,
        -1.0595271125805195e-05, 6.783342904865167e-06, -2.1075476666258803e-06, -1.7213731432817144e-11,
        3.773587741611098e-07, -2.1867506700122867e-07, 6.220228804018927e-08, 6.597703826733e-16,
        -9.590386497425686e-09, 5.213214492280807e-09, -1.3991589583935709e-09, 5.382058999060575e-16,
        1.9484714275467745e-10, -1.0127287556389682e-10, 2.6077347197254926e-11, -5.090418699993299e-18,
        -3.3721464474854593e-12,
    ],
    [
        -0.0005967612901927463, -7.204895416020011e-05, 0.0006782308837667328, -0.0006401475260262758,
        0.00027750107634328704, 1.819700838046515e-07, -8.479507117068503e-05, 6.105192082501531e-05,
        -2.1073920183404862e-05, -8.858589014125599e-10, 4.5284535953805374e-06, -2.8427815022504407e-06,
        8.708234177864641e-07, 3.6886101871706966e-12, -1.534469519070206e-07, 8.862466778790695e-08,
        -2.5184812301826817e-08, -1.0225912098215092e-14, 3.896947075815478e-09, -2.1267304792235634e-09,
        5.737013552805138e-10, -1.8877498501697116e-19, -8.093153869465787e-11, 4.23827232834492e-11,
        -1.1002224534207725e-11,
    ],
    [
        0.0013324454494800656, -0.0019144384985654776, 0.0011089369134596636, 9.9324041226423e-07,
        -0.0005087450129309319, 0.00042735056665392886, -0.00016858853767910798, -8.1301893922785e-09,
        4.5284402370562144e-05, -3.127053674781734e-05, 1.044986828530338e-05, 4.8435226265680926e-11,
        -2.148256587345626e-06, 1.329369701097492e-06, -4.029569309210103e-07, -1.756787766632329e-13,
        7.014504316366825e-08, -4.040787734999483e-08, 1.1474026743371964e-08, 3.964274685356394e-18,
        -1.7804938269892715e-09, 9.748026254873165e-10, -2.6405338676507616e-10, 5.79487516340376e-18,
        3.764774955354384e-11,
    ],
    [
        0.001579727660730835, 0.00016251626278391583, -0.0020633421035543276, 0.00213896861856891,
        -0.0010108559391263003, -3.99127055299192e-07, 0.0003623502508476469, -0.00028143901463712157,
        0.00010449513336495887, 2.12114184918303e-09, -2.5779417251947842e-05, 1.7281818956040464e-05,
        -5.641377387290428e-06, -1.1024320105776174e-11, 1.1223224418895174e-06, -6.869339637952674e-07,
        2.0653236975414888e-07, 4.6714772409838506e-14, -3.5609886164949055e-08, 2.0470855345905963e-08,
        -5.809173863328336e-09, -1.3328212875828647e-16, 9.035460439133513e-10, -4.959878251733084e-10,
        1.3481607129399748e-10,
    ],
    [
        -0.004072512119514016, 0.00640336283380807, -0.004041016108167662, -2.1837328028662328e-06,
        0.002174044180125464, -0.001970044051841889, 0.0008359546974796246, 1.9445447567109655e-08,
        -0.000257793871204217, 0.00019009987368139304, -6.769649993743896e-05, -1.4440629666426571e-10,
        1.5712512518742267e-05, -1.0304008744776894e-05, 3.304517767401387e-06, 7.982976024232571e-13,
        -6.4097794149313e-07, 3.8894624761300054e-07, -1.161834764494887e-07, -2.8168086305964423e-15,
        1.9878012911297094e-08, -1.1407719956357511e-08, 3.2355857064185554e-09, 4.1759462466484876e-20,
        -5.042311271810582e-10,
    ],
    [
        -0.0059475779383993, -0.0005401647678926045, 0.00879104135507679, -0.009857631558785612,
        0.005013469503102154, 1.2807521786221875e-06, -0.0020626019342754685, 0.0017109128573523059,
        -0.000676953127141338, -6.901154567656214e-09, 0.00018855128143995903, -0.0001339521566349197,
        4.626318303352804e-05, 4.003423061332135e-11, -1.0255652921494033e-05, 6.612086372797651e-06,
        -2.0913022027253007e-06, -2.095177564960382e-13, 3.975602904199325e-07, -2.395621197881589e-07,
        7.118288338214586e-08, 8.925574871713252e-16, -1.2101547235064677e-08, 6.935061824833439e-09,
        -1.966146445385609e-09,
    ],
    [
        0.01740202778752271, -0.02952788094569912, 0.020045875571402798, 7.0289515966903405e-06,
        -0.012375421071343148, 0.011976293444235255, -0.0054156038466518525, -6.329089339641862e-08,
        0.0018855118129005065, -0.001473473274825001, 0.0005551581009770838, 5.240683441255066e-10,
        -0.00014357913535784835, 9.91812932249433e-05, -3.346083474947831e-05, -3.5755837291098967e-12,
        7.1560851960630075e-06, -4.551680262815553e-06, 1.4236576649271474e-06, 1.8803149079275236e-14,
        -2.662340389892921e-07, 1.5950642189595716e-07, -4.718751467384107e-08, -6.510781264821694e-17,
        7.979509102674677e-09,
    ],
    [
        0.03024912416090589, 0.0024817436002649977, -0.049939134373457025, 0.05991564300930787,
        -0.03248320760162339, -5.721296865210344e-06, 0.015085251778569354, -0.013261324005088445,
        0.0055515262632426145, 3.026318225703001e-08, -0.0017229548406756724, 0.0012893570099929638,
        -0.00046845138348319875, -1.8302599378930445e-10, 0.00011449739014822654, -7.737856522124447e-05,
        2.5625836246985202e-05, 1.0766165332658074e-12, -5.324680928242262e-06, 3.3496348630644643e-06,
        -1.038125312868401e-06, -5.608908533478749e-15, 1.9150821930676722e-07, -1.1418365800203775e-07,
        3.365442520915233e-08,
    ],
    [
        -0.09905102088015905, 0.17954011706123485, -0.12989606383463778, -3.1478872752284355e-05,
        0.09051063527684813, -0.0928288244111844, 0.04441211283987781, 2.7779236316835886e-07,
        -0.017229543805449696, 0.014182925050891573, -0.005621416163374734, -2.3959850918638095e-09,
        0.0016029634366079909, -0.0011606784674435774, 0.00041001337768153875, 1.8365800753181603e-11,
        -9.58442565636559e-05, 6.364306233776471e-05, -2.0762506244890635e-05, -1.1806017999805486e-13,
        4.213180823912094e-06, -2.6262241337013133e-06, 8.077062049488396e-07, 5.996409690563338e-16,
        -1.47297373744462e-07,
    ],
    [
        -0.19994542198219728, -0.015056113040026424, 0.3647023946934849, -0.4643519231173355,
        0.26640934719197895, 3.403826602714719e-05, -0.13784338709329624, 0.1276467178337056,
        -0.056213828755200985, -1.7531508854830108e-07, 0.019235592956768112, -0.015088821281095316,
        0.005740185445135012, 1.0622382710173866e-09, -0.0015335082692563998, 0.0010819320643228215,
        -0.0003737251019394563, -6.617090419433389e-12, 8.42636173809102e-05, -5.5150706827484874e-05,
        1.7769536448337793e-05, 3.879070571006568e-14, -3.5351369749902462e-06, 2.1865832127706725e-06,
        -6.681284949240542e-07,
    ],
    [
        0.7243860850402943, -1.3918010932653375, 1.0654143352413967, 0.0001876173868950258,
        -0.827055011761527, 0.8935243334782841, -0.44971003995291337, -1.6107401567546651e-06,
        0.1923559016527109, -0.1659770216004261, 0.06888222268181433, 1.391009172443142e-08,
        -0.021469115615086628, 0.016228980898865892, -0.005979601617258422, -1.1287468171928069e-10,
        0.001516745111978496, -0.0010478634293554165, 0.00035539072889105875, 8.162616536150783e-13,
        -7.777301344470886e-05, 5.029141389162907e-05, -1.6035083877747675e-05, -5.0260094840152135e-15,
        3.1369106037108428e-06,
    ],
    [
        1.6668949727276812, 0.1165462765994632, -3.3288393225018904, 4.469232548286404,
        -2.6977693045875806, -0.0002600667859891061, 1.5389017615694538, -1.4937962361134611,
        0.6888196463323315, 1.3077482004532885e-06, -0.2576296332559629, 0.2109767610212545,
        -0.08371440835921982, -7.792042747000674e-09, 0.024267923064833764, -0.017813678334552763,
        0.006397033038886307, 4.9415957307924725e-11, -0.0015554602758916928, 0.0010561196918773697,
        -0.00035277184484116647, -3.0939103274354235e-13, 7.528585452877513e-05, -4.8186515801973e-05,
        1.5227272261135095e-05,
    ],
    [
        -6.618829886137293, 13.397985455142589, -10.789350606845145, -0.0014352254537875018,
        9.23336945961898, -10.456552819547769, 5.510552602903347, 1.2024439690699193e-05,
        -2.5762961164755818, 2.320744274538718, -1.0045728797216278, -1.0207833106546672e-07,
        0.33975092171169696, -0.26720517450758147, 0.10235252851556788, 8.430448585452676e-10,
        -0.02799828495925492, 0.020066274142830732, -0.007055436896237373, -6.510036896790042e-12,
        0.0016562887995937561, -0.0011082898634291512, 0.0003654545342639166, 4.504194082820455e-14,
        -7.634011300557932e-05,
    ],
    [
        -17.112706061976095, -1.1208044642899115, 37.131966511885445, -52.29827102534896,
        33.058589696624615, 0.0024791298976198995, -20.610894034115258, 20.886727751455822,
        -10.045703956517746, -1.2238783428880736e-05, 4.077013427422142, -3.473667358470283,
        1.4329352617303721, 7.135612771732799e-08, -0.4479725716041533, 0.34112666076996123,
        -0.12699786335106672, -4.5009172627885263e-10, 0.033125776059235765, -0.023274087133486544,
        0.008039999749288682, 2.9014850241350154e-12, -0.0018321627125162138, 0.001210814074308124,
        -0.00039487195597625305,
    ],
    [
        73.89033153567425, -156.80141270402274, 132.2177542759164, 0.013692876877323932,
        -123.66496885920151, 146.2068939106273, -80.36558772486529, -0.00011259851130717249,
        40.770132196180214, -38.210340013274, 17.195222942763678, 9.351478525225111e-07,
        -6.271615990956665, 5.116899906638013, -2.0319658125917894, -7.68015576927279e-09,
        0.5962639690008922, -0.44220765550893937, 0.1607999949801386, 6.105452322399745e-11,
        -0.04030757967497879, 0.02784872370893079, -0.00947692694339809, -4.5311013227974904e-13,
        0.002105335093633221,
    ],
    [
        212.1683709838252, 13.107863022633866, -496.9828593287175, 731.2159526696921,
        -482.13821720890815, -0.028817248691623405, 326.1672030294732, -343.89340280087987,
        171.9519387080629, 0.00014038023228364068, -75.25941959194343, 66.51969983809508,
        -28.44751976721878, -8.023117747524886e-07, 9.540223647451496, -7.51753014765263,
        2.894399900499762, 4.980023807118572e-09, -0.8061515942879215, 0.5848231979048016,
        -0.20849239270188827, -3.225438491326595e-11, 0.05052804225167161, -0.03441205280628807,
        0.011560069800937042,
    ],
    [
        -989.5964309832236, 2192.555536090523, -1928.3586782723344, -0.1592573812157951,
        1956.9985945919989, -2407.2514765082165, 1375.6149959328543, 0.0012920686502737788,
        -752.5941716166408, 731.7166873438302, -341.37023489099647, -1.0517978697205148e-05,
        133.56313092981054, -112.76295215735033, 46.31039839600551, 8.49948412810344e-08,
        -14.510728696418298, 11.111640759871898, -4.169847853971864, -6.787845238126073e-10,
        1.1116169295323557, -0.7914772145428005, 0.277441675222115, 5.226168222780974e-12,
        -0.06531439992499116,
    ],
];

/// P(a, x) (`lower`) or Q(a, x) by the uniform asymptotic expansion in 1/a.
fn igam_asymptotic(a: f64, x: f64, lower: bool) -> f64 {
    let sgn = if lower { -1.0 } else { 1.0 };
    let lambda = x / a;
    let sigma = (x - a) / a;
    let eta = if lambda > 1.0 {
        (-2.0 * (sigma.ln_1p() - sigma)).sqrt()
    } else if lambda < 1.0 {
        -(-2.0 * (sigma.ln_1p() - sigma)).sqrt()
    } else {
        0.0
    };
    let mut res = 0.5 * erfc(sgn * eta * (a / 2.0).sqrt());
    let mut etapow = [1.0; 25];
    for n in 1..25 {
        etapow[n] = eta * etapow[n - 1];
    }
    let mut sum = 0.0;
    let mut afac = 1.0;
    let mut absoldterm = f64::INFINITY;
    for row in TEMME.iter() {
        let mut ck = row[0];
        for (d, e) in row.iter().zip(etapow.iter()).skip(1) {
            let ckterm = d * e;
            ck += ckterm;
            if ckterm.abs() < MACHEP * ck.abs() {
                break;
            }
        }
        let term = ck * afac;
        let absterm = term.abs();
        if absterm > absoldterm {
            break;
        }
        sum += term;
        if absterm < MACHEP * sum.abs() {
            break;
        }
        absoldterm = absterm;
        afac /= a;
    }
    // 2π as PyTorch spells it there: twice the f32 π, widened.
    let two_pi = 2.0 * (std::f32::consts::PI as f64);
    res += sgn * (-0.5 * a * eta * eta).exp() * sum / (two_pi * a).sqrt();
    res
}

/// Q(a, x) by its continued fraction (x > 1.1, x >= a), evaluated by the recurrence for the
/// convergents with rescaling.
fn igamc_fraction(a: f64, x: f64, fused: bool) -> f64 {
    const BIG: f64 = 4.503_599_627_370_496e15;
    const BIGINV: f64 = 2.220_446_049_250_313e-16;
    let ax = igam_fac(a, x, fused);
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
        let pk = madd(fused, pkm1, z, -(pkm2 * yc));
        let qk = madd(fused, qkm1, z, -(qkm2 * yc));
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

/// Whether (a, x) lies where the uniform asymptotic expansion is used (a large, x ≈ a).
fn igam_use_asymptotic(a: f64, x: f64) -> bool {
    let absxma_a = (x - a).abs() / a;
    (a > 20.0 && a < 200.0 && absxma_a < 0.3) || (a > 200.0 && absxma_a < 4.5 / a.sqrt())
}

/// The regularized lower incomplete gamma function P(a, x).
pub fn igamma(a: f64, x: f64) -> f64 {
    igamma_with(a, x, kernels_fuse())
}

/// P(a, x) as PyTorch's CPU kernel computes it for the scalar tail of a contiguous loop (see
/// the notes above [`madd`]): the same algorithm with no fused multiply-adds.
pub fn igamma_unfused(a: f64, x: f64) -> f64 {
    igamma_with(a, x, false)
}

fn igamma_with(a: f64, x: f64, fused: bool) -> f64 {
    // The boundary cases in PyTorch's order (a NaN argument falls through to a NaN result
    // unless an earlier rule decides).
    if a < 0.0 || x < 0.0 {
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
    if igam_use_asymptotic(a, x) {
        return igam_asymptotic(a, x, true);
    }
    if x > 1.0 && x > a {
        return 1.0 - igammac_with(a, x, false);
    }
    igam_series(a, x, fused)
}

/// The regularized upper incomplete gamma function Q(a, x) = 1 - P(a, x).
pub fn igammac(a: f64, x: f64) -> f64 {
    igammac_with(a, x, kernels_fuse())
}

fn igammac_with(a: f64, x: f64, fused: bool) -> f64 {
    if a < 0.0 || x < 0.0 {
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
    if igam_use_asymptotic(a, x) {
        return igam_asymptotic(a, x, false);
    }
    if x > 1.1 {
        if x < a {
            1.0 - igam_series(a, x, fused)
        } else {
            igamc_fraction(a, x, fused)
        }
    } else if x <= 0.5 {
        if -0.4 / x.ln() < a {
            1.0 - igam_series(a, x, fused)
        } else {
            igamc_series(a, x, fused)
        }
    } else if x * 1.1 < a {
        1.0 - igam_series(a, x, fused)
    } else {
        igamc_series(a, x, fused)
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
        // The expansion's table: C_0(0) = -1/3, C_0'(0) = 1/12, C_1(0) = -1/540, and the
        // Stirling coefficient γ_3 = -139/51840 read back from C_2'(0).
        assert_eq!(TEMME[0][0], -1.0 / 3.0);
        assert_eq!(TEMME[0][1], 1.0 / 12.0);
        assert_eq!(TEMME[1][0], -1.0 / 540.0);
        assert_eq!(TEMME[2][1], -139.0 / 51840.0);
        // Large a near x (the asymptotic region) and just outside it agree with P + Q = 1 and
        // with each other across the boundary.
        for a in [25.0, 100.0, 500.0] {
            for r in [0.9, 1.0, 1.1] {
                let x = a * r;
                assert!((igamma(a, x) + igammac(a, x) - 1.0).abs() < 1e-15);
            }
        }
        // x = 39 is the boundary for a = 30; Q moves by about 6e-9 (relative) in between.
        let (inside, outside) = (igammac(30.0, 39.0 - 1e-8), igammac(30.0, 39.0 + 1e-8));
        assert!(inside > outside && (inside - outside) / inside < 1e-8);
    }
}
