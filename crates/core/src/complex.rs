//! Complex numbers as tensor elements (`complex64` = two f32, `complex128` = two f64), laid out
//! as C++'s `std::complex` and c10's `c10::complex`: real part first, so the bytes of a complex
//! tensor are the bytes of its `view_as_real` float tensor.
//!
//! Arithmetic follows c10's scalar formulas (the ones ATen's kernels call elementwise), so
//! results agree with upstream's to the last bits where the formula decides them.

/// `real + imag * i`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Complex<T> {
    pub re: T,
    pub im: T,
}

/// A `complex64` element.
pub type Cf32 = Complex<f32>;
/// A `complex128` element, and the type complex kernels compute in.
pub type Cf64 = Complex<f64>;

impl<T> Complex<T> {
    pub const fn new(re: T, im: T) -> Complex<T> {
        Complex { re, im }
    }
}

impl Cf64 {
    pub fn conj(self) -> Cf64 {
        Cf64::new(self.re, -self.im)
    }
    /// `|z|`, without overflow for large components.
    pub fn abs(self) -> f64 {
        self.re.hypot(self.im)
    }
    /// The argument, in (-pi, pi].
    pub fn arg(self) -> f64 {
        self.im.atan2(self.re)
    }
    /// `exp(x + iy) = e^x (cos y + i sin y)` (glibc's cexp for finite arguments).
    pub fn exp(self) -> Cf64 {
        let (x, y) = (self.re, self.im);
        let (s, c) = if y.abs() > f64::MIN_POSITIVE {
            y.sin_cos()
        } else {
            (y, 1.0)
        };
        let m = x.exp();
        Cf64::new(m * c, m * s)
    }
    /// Principal logarithm. The real part `ln |z|` avoids cancellation near |z| = 1 the way
    /// glibc's clog does (through `ln_1p(|z|^2 - 1)` computed with extra precision).
    pub fn ln(self) -> Cf64 {
        let (mut ax, mut ay) = (self.re.abs(), self.im.abs());
        if ax < ay {
            std::mem::swap(&mut ax, &mut ay);
        }
        let eps = f64::EPSILON;
        let re = if !ax.is_finite()
            || ax == 0.0
            || !(f64::MIN_POSITIVE..=f64::MAX / 2.0).contains(&ax)
        {
            ax.hypot(ay).ln()
        } else if ax == 1.0 {
            (ay * ay).ln_1p() / 2.0
        } else if ax > 1.0 && ax < 2.0 && ay < 1.0 {
            let mut d = (ax - 1.0) * (ax + 1.0);
            if ay >= eps {
                d += ay * ay;
            }
            d.ln_1p() / 2.0
        } else if (0.5..1.0).contains(&ax) && ay < eps / 2.0 {
            ((ax - 1.0) * (ax + 1.0)).ln_1p() / 2.0
        } else if (0.5..1.0).contains(&ax) && ax * ax + ay * ay >= 0.5 {
            x2y2m1(ax, ay).ln_1p() / 2.0
        } else {
            ax.hypot(ay).ln()
        };
        Cf64::new(re, self.arg())
    }
    /// Principal square root (glibc's csqrt: `2 Re Im = y` avoids cancellation).
    pub fn sqrt(self) -> Cf64 {
        let (x, y) = (self.re, self.im);
        if x.is_nan() || y.is_nan() || x.is_infinite() || y.is_infinite() {
            if y.is_infinite() {
                return Cf64::new(f64::INFINITY, y);
            }
            if x == f64::NEG_INFINITY {
                return Cf64::new(
                    if y.is_nan() { f64::NAN } else { 0.0 },
                    f64::INFINITY.copysign(y),
                );
            }
            if x == f64::INFINITY {
                return Cf64::new(
                    x,
                    if y.is_nan() {
                        f64::NAN
                    } else {
                        0.0f64.copysign(y)
                    },
                );
            }
            return Cf64::new(f64::NAN, f64::NAN);
        }
        if y == 0.0 {
            return if x < 0.0 {
                Cf64::new(0.0, (-x).sqrt().copysign(y))
            } else {
                Cf64::new(x.sqrt().abs(), 0.0f64.copysign(y))
            };
        }
        if x == 0.0 {
            let r = (0.5 * y.abs()).sqrt();
            return Cf64::new(r, r.copysign(y));
        }
        let d = x.hypot(y);
        let (r, s) = if x > 0.0 {
            let r = (0.5 * (d + x)).sqrt();
            (r, 0.5 * (y / r))
        } else {
            let s = (0.5 * (d - x)).sqrt();
            ((0.5 * (y / s)).abs(), s)
        };
        Cf64::new(r, s.copysign(y))
    }
    /// `sin(x + iy) = sin x cosh y + i cos x sinh y`.
    pub fn sin(self) -> Cf64 {
        let (x, y) = (self.re, self.im);
        let (s, c) = if x.abs() > f64::MIN_POSITIVE {
            x.sin_cos()
        } else {
            (x, 1.0)
        };
        Cf64::new(y.cosh() * s, y.sinh() * c)
    }
    /// `cos(x + iy) = cos x cosh y - i sin x sinh y`.
    pub fn cos(self) -> Cf64 {
        let (x, y) = (self.re, self.im);
        let (s, c) = if x.abs() > f64::MIN_POSITIVE {
            x.sin_cos()
        } else {
            (x, 1.0)
        };
        Cf64::new(y.cosh() * c, -(y.sinh() * s))
    }
    /// `tanh(x + iy) = (sinh x cosh x + i sin y cos y) / (sinh^2 x + cos^2 y)` (glibc's
    /// ctanh), with the asymptotic form where cosh would overflow.
    pub fn tanh(self) -> Cf64 {
        let (x, y) = (self.re, self.im);
        let (siny, cosy) = if y.abs() > f64::MIN_POSITIVE {
            y.sin_cos()
        } else {
            (y, 1.0)
        };
        // (DBL_MAX_EXP - 1) * ln 2 / 2
        let t = 354.0;
        if x.abs() > t {
            let im = 4.0 * siny * cosy * (-2.0 * x.abs()).exp();
            return Cf64::new(1.0f64.copysign(x), im);
        }
        let (sinhx, coshx) = if x.abs() > f64::MIN_POSITIVE {
            (x.sinh(), x.cosh())
        } else {
            (x, 1.0)
        };
        let den = if sinhx.abs() > cosy.abs() * f64::EPSILON {
            sinhx * sinhx + cosy * cosy
        } else {
            cosy * cosy
        };
        Cf64::new(sinhx * coshx / den, siny * cosy / den)
    }
    pub fn powc(self, e: Cf64) -> Cf64 {
        if e.re == 0.0 && e.im == 0.0 {
            return Cf64::new(1.0, 0.0);
        }
        if self.re == 0.0 && self.im == 0.0 && e.im == 0.0 && e.re > 0.0 {
            return Cf64::new(0.0, 0.0);
        }
        (e * self.ln()).exp()
    }
}

impl std::ops::Neg for Cf64 {
    type Output = Cf64;
    fn neg(self) -> Cf64 {
        Cf64::new(-self.re, -self.im)
    }
}

impl std::ops::Add for Cf64 {
    type Output = Cf64;
    fn add(self, o: Cf64) -> Cf64 {
        Cf64::new(self.re + o.re, self.im + o.im)
    }
}

impl std::ops::Sub for Cf64 {
    type Output = Cf64;
    fn sub(self, o: Cf64) -> Cf64 {
        Cf64::new(self.re - o.re, self.im - o.im)
    }
}

impl std::ops::Mul for Cf64 {
    type Output = Cf64;
    fn mul(self, o: Cf64) -> Cf64 {
        Cf64::new(
            self.re * o.re - self.im * o.im,
            self.re * o.im + self.im * o.re,
        )
    }
}

impl std::ops::Div for Cf64 {
    type Output = Cf64;
    /// Division scaled by the larger component of the divisor (Smith's method, as c10 and
    /// NumPy divide), which keeps `|c|^2 + |d|^2` from overflowing.
    fn div(self, o: Cf64) -> Cf64 {
        let (a, b, c, d) = (self.re, self.im, o.re, o.im);
        if c.abs() >= d.abs() {
            if c == 0.0 && d == 0.0 {
                return Cf64::new(a / c.abs(), b / d.abs());
            }
            let rat = d / c;
            let scl = 1.0 / (c + d * rat);
            Cf64::new((a + b * rat) * scl, (b - a * rat) * scl)
        } else {
            let rat = c / d;
            let scl = 1.0 / (d + c * rat);
            Cf64::new((a * rat + b) * scl, (b * rat - a) * scl)
        }
    }
}

/// `x^2 + y^2 - 1` for 0.5 <= x < 1 without the cancellation of the plain formula: the
/// squares split exactly into high and low parts (fma) and are summed with compensation.
fn x2y2m1(x: f64, y: f64) -> f64 {
    let x2 = x * x;
    let y2 = y * y;
    let mut terms = [-1.0, x2, x.mul_add(x, -x2), y2, y.mul_add(y, -y2)];
    terms.sort_by(|a, b| a.abs().total_cmp(&b.abs()));
    let (mut sum, mut comp) = (0.0f64, 0.0f64);
    for v in terms {
        let t = sum + v;
        comp += if sum.abs() >= v.abs() {
            (sum - t) + v
        } else {
            (v - t) + sum
        };
        sum = t;
    }
    sum + comp
}

/// Parts of a complex element as f64 pairs, and back.
pub trait ComplexParts: Copy {
    fn to_c64(self) -> Cf64;
    fn from_c64(v: Cf64) -> Self;
}

impl ComplexParts for Cf32 {
    fn to_c64(self) -> Cf64 {
        Cf64::new(self.re as f64, self.im as f64)
    }
    fn from_c64(v: Cf64) -> Self {
        Cf32::new(v.re as f32, v.im as f32)
    }
}

impl ComplexParts for Cf64 {
    fn to_c64(self) -> Cf64 {
        self
    }
    fn from_c64(v: Cf64) -> Self {
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: Cf64, b: Cf64) -> bool {
        (a.re - b.re).abs() <= 1e-15 * (1.0 + b.re.abs())
            && (a.im - b.im).abs() <= 1e-15 * (1.0 + b.im.abs())
    }

    #[test]
    fn identities() {
        let z = Cf64::new(1.5, -2.25);
        let w = Cf64::new(-0.5, 3.0);
        assert!(close(z * w / w, z));
        assert!(close(z.sqrt() * z.sqrt(), z));
        assert!(close(z.ln().exp(), z));
        // sinh/cosh form of tanh against exp form
        let e2 = (z + z).exp();
        let one = Cf64::new(1.0, 0.0);
        let expected = (e2 - one) / (e2 + one);
        assert!(close(z.tanh(), expected), "{:?} {:?}", z.tanh(), expected);
        assert_eq!(Cf64::new(-4.0, 0.0).sqrt(), Cf64::new(0.0, 2.0));
        assert_eq!(Cf64::new(-4.0, -0.0).sqrt(), Cf64::new(0.0, -2.0));
        // |z| near 1: ln's real part keeps its digits. 0.5^2 + y^2 - 1 for y = the double
        // nearest sqrt(3)/2 is -8.690637865201172e-17 exactly (computed with fractions), so
        // ln|z| = -4.345318932600586e-17; the plain formula gives 0 or a multiple of 1.1e-16.
        let near = Cf64::new(0.5, 0.866_025_403_784_438_6);
        assert_eq!(near.ln().re, -4.345_318_932_600_586e-17);
        assert_eq!(std::mem::size_of::<Cf32>(), 8);
        assert_eq!(std::mem::size_of::<Cf64>(), 16);
    }
}
