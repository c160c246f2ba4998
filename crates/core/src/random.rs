//! A seeded random generator (xoshiro256**, seeded through splitmix64) and the random
//! factories. The streams are deterministic per seed but differ from PyTorch's.

use crate::dtype::DType;
use crate::error::{invalid, Result};
use crate::layout::checked_numel;
use crate::tensor::Tensor;

/// Deterministic pseudo-random source (`torch.Generator` analogue).
#[derive(Debug, Clone)]
pub struct Generator {
    state: [u64; 4],
}

fn splitmix64(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Generator {
    /// A generator whose stream is fully determined by `seed`.
    pub fn new(seed: u64) -> Generator {
        let mut s = seed;
        Generator {
            state: std::array::from_fn(|_| splitmix64(&mut s)),
        }
    }

    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.state;
        let result = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// Uniform in [0, 1) with `bits` random mantissa bits (so rounding never reaches 1).
    fn unit(&mut self, bits: u32) -> f64 {
        (self.next_u64() >> (64 - bits)) as f64 / (1u64 << bits) as f64
    }

    /// Uniform in [0, 1) with 53 bits.
    pub fn next_f64(&mut self) -> f64 {
        self.unit(53)
    }

    /// Standard normal sample (Box-Muller).
    pub fn next_normal(&mut self) -> f64 {
        let u1 = 1.0 - self.next_f64(); // (0, 1]: log is finite
        let u2 = self.next_f64();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }

    /// Uniform integer in [0, n) without modulo bias (rejection sampling); n > 0.
    pub fn below(&mut self, n: u64) -> u64 {
        let zone = u64::MAX - (u64::MAX % n);
        loop {
            let x = self.next_u64();
            if x < zone {
                return x % n;
            }
        }
    }
}

/// Mantissa bits of a float dtype (so uniform samples stay below 1 after rounding).
fn mantissa_bits(dtype: DType) -> u32 {
    match dtype {
        DType::F64 => 53,
        DType::F32 => 24,
        DType::F16 => 11,
        _ => 8,
    }
}

fn require_float(op: &'static str, dtype: DType) -> Result<()> {
    if !dtype.is_float() {
        return Err(crate::Error::UnsupportedDType { op, dtype });
    }
    Ok(())
}

/// `torch.rand(shape, dtype, generator)`: uniform in [0, 1).
pub fn rand(shape: &[usize], dtype: DType, gen: &mut Generator) -> Result<Tensor> {
    require_float("rand", dtype)?;
    let n = checked_numel("rand", shape)?;
    crate::error::reserve_vec::<f64>("rand", n)?;
    let bits = mantissa_bits(dtype);
    let v: Vec<f64> = (0..n).map(|_| gen.unit(bits)).collect();
    Tensor::from_f64s(&v, shape, dtype)
}

/// `torch.randn(shape, dtype, generator)`: standard normal.
pub fn randn(shape: &[usize], dtype: DType, gen: &mut Generator) -> Result<Tensor> {
    require_float("randn", dtype)?;
    let n = checked_numel("randn", shape)?;
    crate::error::reserve_vec::<f64>("randn", n)?;
    let v: Vec<f64> = (0..n).map(|_| gen.next_normal()).collect();
    Tensor::from_f64s(&v, shape, dtype)
}

/// `torch.randint(low, high, shape, dtype, generator)`: uniform integers in [low, high).
pub fn randint(
    low: i64,
    high: i64,
    shape: &[usize],
    dtype: DType,
    gen: &mut Generator,
) -> Result<Tensor> {
    if high <= low {
        return Err(invalid(
            "randint",
            format!("random_ expects 'from' ({low}) to be less than 'to' ({high})"),
        ));
    }
    let n = checked_numel("randint", shape)?;
    crate::error::reserve_vec::<i64>("randint", n)?;
    let range = high.wrapping_sub(low) as u64;
    let v: Vec<i64> = (0..n)
        .map(|_| low.wrapping_add(gen.below(range) as i64))
        .collect();
    Tensor::from_i64s(&v, shape, dtype)
}

impl Tensor {
    /// `tensor.uniform_(from, to, generator)` in place.
    pub fn uniform_(&self, from: f64, to: f64, gen: &mut Generator) -> Result<()> {
        require_float("uniform_", self.dtype())?;
        if from > to || !(to - from).is_finite() {
            return Err(invalid(
                "uniform_",
                format!("expects from <= to and a finite range, got from={from} to={to}"),
            ));
        }
        let bits = mantissa_bits(self.dtype());
        let v: Vec<f64> = (0..self.numel())
            .map(|_| from + (to - from) * gen.unit(bits))
            .collect();
        self.copy_(&Tensor::from_f64s(&v, self.shape(), DType::F64)?)
    }

    /// `tensor.normal_(mean, std, generator)` in place.
    pub fn normal_(&self, mean: f64, std: f64, gen: &mut Generator) -> Result<()> {
        require_float("normal_", self.dtype())?;
        if std < 0.0 {
            return Err(invalid(
                "normal_",
                format!("expects std >= 0.0, but found std {std}"),
            ));
        }
        let v: Vec<f64> = (0..self.numel())
            .map(|_| mean + std * gen.next_normal())
            .collect();
        self.copy_(&Tensor::from_f64s(&v, self.shape(), DType::F64)?)
    }

    /// `torch.multinomial(probs, num_samples, replacement, generator)`: int64 category
    /// indices per row of the 1-D or 2-D non-negative weights.
    pub fn multinomial(
        &self,
        num_samples: usize,
        replacement: bool,
        gen: &mut Generator,
    ) -> Result<Tensor> {
        let op = "multinomial";
        if self.dim() == 0 || self.dim() > 2 {
            return Err(invalid(
                op,
                format!("prob_dist must be 1 or 2 dim, got {}", self.dim()),
            ));
        }
        let rows = if self.dim() == 1 { 1 } else { self.shape()[0] };
        let cats = self.shape()[self.dim() - 1];
        let w = self.to_vec::<f64>()?;
        let mut out =
            crate::error::reserve_vec(op, crate::layout::checked_numel(op, &[rows, num_samples])?)?;
        for r in 0..rows {
            let mut row: Vec<f64> = w[r * cats..(r + 1) * cats].to_vec();
            if row.iter().any(|&p| p < 0.0 || !p.is_finite()) {
                return Err(invalid(
                    op,
                    "probability tensor contains either inf, nan or element < 0",
                ));
            }
            let nonzero = row.iter().filter(|&&p| p > 0.0).count();
            if nonzero == 0 {
                return Err(invalid(
                    op,
                    "invalid multinomial distribution (sum of probabilities <= 0)",
                ));
            }
            if !replacement && num_samples > nonzero {
                return Err(invalid(op, format!("cannot sample n_sample ({num_samples}) > prob_dist.size(-1) nonzero ({nonzero}) samples without replacement")));
            }
            for _ in 0..num_samples {
                let total: f64 = row.iter().sum();
                let target = gen.next_f64() * total;
                let mut acc = 0.0;
                let mut pick = row.iter().rposition(|&p| p > 0.0).unwrap_or(0);
                for (i, &p) in row.iter().enumerate() {
                    acc += p;
                    if target < acc && p > 0.0 {
                        pick = i;
                        break;
                    }
                }
                out.push(pick as i64);
                if !replacement {
                    row[pick] = 0.0;
                }
            }
        }
        let shape: Vec<usize> = if self.dim() == 1 {
            vec![num_samples]
        } else {
            vec![rows, num_samples]
        };
        Tensor::from_i64s(&out, &shape, DType::I64)
    }
}
