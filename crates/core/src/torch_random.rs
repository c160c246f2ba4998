//! PyTorch's CPU random streams, reproduced bit for bit.
//!
//! [`CpuGenerator`] is upstream's `CPUGeneratorImpl`: a 32-bit mt19937 seeded the way
//! `torch.manual_seed` / `torch.Generator().manual_seed` seed it, plus the cached second
//! Box-Muller sample, with `get_state`/`set_state` in the 5056-byte layout that
//! `torch.get_rng_state()` returns. The fill functions reproduce the CPU kernels of
//! `uniform_`, `normal_`, `random_`, `randperm`, `bernoulli_`, `multinomial` and
//! `exponential_` for contiguous tensors: they draw from the generator in upstream's order and
//! do upstream's float arithmetic, so a seed gives the same tensor here as in torch.
//!
//! Measured against torch 2.15.0 (x86-64 wheel, CPU capability AVX512, glibc libm), which is
//! what the oracle tests in `tests/torch_random.rs` compare with:
//! - The kernels are built with FMA contraction, so `a * b + c` in upstream's C++ is one fused
//!   operation here too (`mul_add`); where upstream calls libm (`log`, `log1p`, `sin`, `cos`)
//!   so does this module, through Rust's `f64` methods, which call the same glibc.
//! - `normal_` is never dispatched to the AVX512 kernel (upstream registers no AVX512
//!   `normal_stub`), so on AVX2 and AVX512 machines float32 tensors of 16+ elements use the
//!   AVX2 Box-Muller (`avx_mathfun.h`'s `log256_ps`/`sincos256_ps`, with the multiply-adds
//!   GCC fuses); [`normal_`] ports that lane arithmetic. Upstream on a CPU without AVX2 (or
//!   with `ATEN_CPU_CAPABILITY=default`) uses glibc `logf`/`sinf`/`cosf` instead and differs
//!   in the last bits of about half the values; this module follows the AVX2 path. That
//!   build also does not fuse, so there upstream's `uniform_` with bounds other than [0, 1)
//!   and `normal_` with `std != 1` can differ in the last bit as well.
//! - `bernoulli_(p)` with a scalar `p` does not use MKL's VSL (MCG31) stream in this wheel
//!   (its `libtorch_cpu.so` has no reference to `vslNewStream`/`viRngBernoulli`): it takes
//!   one 53-bit uniform (two draws) per element from the generator, serially, so the result
//!   and the stream position are the same at `torch.set_num_threads(1)` and at 2, the
//!   default on the 2-core test machine. `exponential_` likewise uses the generator, not VSL.
//! - `multinomial` without replacement ranks keys with upstream's `topk`, whose order among
//!   equal keys is that of libstdc++'s selection algorithms; those are ported too.
//! - `randint` draws 64 bits per element once the range reaches 2^28 (the public wheel's
//!   threshold, not the 2^32 of the `FBCODE_CAFFE2` build).

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::storage::Element;

const MT_N: usize = 624;
const MT_M: usize = 397;
const MATRIX_A: u32 = 0x9908_b0df;
const UPPER_MASK: u32 = 0x8000_0000;
const LOWER_MASK: u32 = 0x7fff_ffff;

/// The seed of a fresh `torch.Generator()` (upstream's `default_rng_seed_val`).
pub const DEFAULT_SEED: u64 = 67_280_421_310_721;
/// Size of the state `torch.get_rng_state()` returns (`CPUGeneratorImplState`).
pub const STATE_SIZE: usize = 5056;
/// Size of the older state layout `set_state` also accepts (`CPUGeneratorImplStateLegacy`).
pub const LEGACY_STATE_SIZE: usize = 5048;

/// Byte offsets inside the state layout (x86-64 C struct layout, little endian).
mod offsets {
    pub const SEED: usize = 0; // int64_t the_initial_seed
    pub const LEFT: usize = 8; // int left
    pub const SEEDED: usize = 12; // int seeded
    pub const NEXT: usize = 16; // uint64_t next
    pub const STATE: usize = 24; // uint64_t state[624]
    pub const NORMAL_X: usize = 5016; // double normal_x
    pub const NORMAL_Y: usize = 5024; // double normal_y (the cached double sample)
    pub const NORMAL_RHO: usize = 5032; // double normal_rho
    pub const NORMAL_VALID: usize = 5040; // int normal_is_valid
    pub const FLOAT_NORMAL: usize = 5048; // float next_float_normal_sample
    pub const FLOAT_VALID: usize = 5052; // bool is_next_float_normal_sample_valid
}

fn invalid(op: &'static str, reason: impl Into<String>) -> Error {
    Error::InvalidArgument {
        op,
        reason: reason.into(),
    }
}

/// Upstream's `at::mt19937` (the reference MT19937 with its `left`/`next` bookkeeping, which
/// is part of the saved state).
#[derive(Clone, Debug, PartialEq)]
struct Mt19937 {
    state: [u32; MT_N],
    seed: u64,
    /// Draws left before the state is regenerated, plus one (upstream's `left_`).
    left: i32,
    seeded: bool,
    next: u32,
}

impl Mt19937 {
    fn new(seed: u64) -> Mt19937 {
        let mut state = [0u32; MT_N];
        // Only the low 32 bits seed the state; the full seed is kept for `initial_seed`.
        state[0] = seed as u32;
        for j in 1..MT_N {
            let prev = state[j - 1];
            state[j] = 1_812_433_253u32
                .wrapping_mul(prev ^ (prev >> 30))
                .wrapping_add(j as u32);
        }
        Mt19937 {
            state,
            seed,
            left: 1,
            seeded: true,
            next: 0,
        }
    }

    fn twist(u: u32, v: u32) -> u32 {
        let mixed = (u & UPPER_MASK) | (v & LOWER_MASK);
        (mixed >> 1) ^ if v & 1 != 0 { MATRIX_A } else { 0 }
    }

    fn next_state(&mut self) {
        self.left = MT_N as i32;
        self.next = 0;
        let s = &mut self.state;
        for i in 0..MT_N - MT_M {
            s[i] = s[i + MT_M] ^ Self::twist(s[i], s[i + 1]);
        }
        for i in MT_N - MT_M..MT_N - 1 {
            s[i] = s[i + MT_M - MT_N] ^ Self::twist(s[i], s[i + 1]);
        }
        s[MT_N - 1] = s[MT_M - 1] ^ Self::twist(s[MT_N - 1], s[0]);
    }

    fn next_u32(&mut self) -> u32 {
        self.left -= 1;
        if self.left <= 0 {
            self.next_state();
        }
        // `set_state` only admits states whose draws stay inside the array.
        let mut y = self.state[self.next as usize % MT_N];
        self.next += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^ (y >> 18)
    }
}

/// PyTorch's CPU generator (`CPUGeneratorImpl`): the stream behind `torch.manual_seed` and
/// `torch.Generator()` on the CPU.
///
/// `Default` is a fresh `torch.Generator()` (seed [`DEFAULT_SEED`]); upstream's process-wide
/// default generator starts from a random seed instead, so tests seed it explicitly.
#[derive(Clone, Debug, PartialEq)]
pub struct CpuGenerator {
    engine: Mt19937,
    next_float_normal_sample: Option<f32>,
    next_double_normal_sample: Option<f64>,
}

impl Default for CpuGenerator {
    fn default() -> CpuGenerator {
        CpuGenerator::new(DEFAULT_SEED)
    }
}

impl CpuGenerator {
    /// A generator in the state `torch.Generator().manual_seed(seed)` leaves. Python's
    /// negative seeds are their two's-complement `u64` (`seed as u64`), as upstream does.
    pub fn new(seed: u64) -> CpuGenerator {
        CpuGenerator {
            engine: Mt19937::new(seed),
            next_float_normal_sample: None,
            next_double_normal_sample: None,
        }
    }

    /// `manual_seed`: restart the stream from `seed` and drop the cached normal samples.
    pub fn manual_seed(&mut self, seed: u64) {
        *self = CpuGenerator::new(seed);
    }

    /// `seed()`: reseed from a non-deterministic 64-bit value and return it.
    pub fn seed(&mut self) -> u64 {
        use std::hash::{BuildHasher, Hasher};
        // RandomState is keyed from the OS's random source; mixing in the time and a
        // counter keeps consecutive calls distinct even where the keys are cached per thread.
        static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
        if let Ok(t) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
            h.write_u128(t.as_nanos());
        }
        let seed = h.finish();
        self.manual_seed(seed);
        seed
    }

    /// The seed the stream was last started from (`initial_seed()`).
    pub fn initial_seed(&self) -> u64 {
        self.engine.seed
    }

    /// One 32-bit draw (`CPUGeneratorImpl::random`).
    pub fn random(&mut self) -> u32 {
        self.engine.next_u32()
    }

    /// Two 32-bit draws, the first as the high half (`CPUGeneratorImpl::random64`).
    pub fn random64(&mut self) -> u64 {
        let hi = self.random() as u64;
        let lo = self.random() as u64;
        (hi << 32) | lo
    }

    /// The cached second sample of the double Box-Muller pair, if any.
    pub fn next_double_normal_sample(&self) -> Option<f64> {
        self.next_double_normal_sample
    }

    /// Replace the cached double normal sample.
    pub fn set_next_double_normal_sample(&mut self, sample: Option<f64>) {
        self.next_double_normal_sample = sample;
    }

    /// The cached second sample of the float Box-Muller pair, if any.
    pub fn next_float_normal_sample(&self) -> Option<f32> {
        self.next_float_normal_sample
    }

    /// Replace the cached float normal sample.
    pub fn set_next_float_normal_sample(&mut self, sample: Option<f32>) {
        self.next_float_normal_sample = sample;
    }

    /// The state as `torch.get_rng_state()` returns it: [`STATE_SIZE`] bytes laid out as
    /// upstream's `CPUGeneratorImplState` (the legacy TH layout with 64-bit state words, the
    /// double sample in `normal_y`, then the float sample), padding zeroed.
    pub fn get_state(&self) -> Vec<u8> {
        let mut b = vec![0u8; STATE_SIZE];
        let e = &self.engine;
        b[offsets::SEED..offsets::SEED + 8].copy_from_slice(&e.seed.to_le_bytes());
        b[offsets::LEFT..offsets::LEFT + 4].copy_from_slice(&e.left.to_le_bytes());
        b[offsets::SEEDED..offsets::SEEDED + 4].copy_from_slice(&(e.seeded as i32).to_le_bytes());
        b[offsets::NEXT..offsets::NEXT + 8].copy_from_slice(&(e.next as u64).to_le_bytes());
        for (i, w) in e.state.iter().enumerate() {
            let at = offsets::STATE + 8 * i;
            b[at..at + 8].copy_from_slice(&(*w as u64).to_le_bytes());
        }
        if let Some(y) = self.next_double_normal_sample {
            b[offsets::NORMAL_Y..offsets::NORMAL_Y + 8].copy_from_slice(&y.to_le_bytes());
            b[offsets::NORMAL_VALID..offsets::NORMAL_VALID + 4]
                .copy_from_slice(&1i32.to_le_bytes());
        }
        if let Some(f) = self.next_float_normal_sample {
            b[offsets::FLOAT_NORMAL..offsets::FLOAT_NORMAL + 4].copy_from_slice(&f.to_le_bytes());
            b[offsets::FLOAT_VALID] = 1;
        }
        b
    }

    /// Restore a state saved by [`CpuGenerator::get_state`] or by upstream's
    /// `get_rng_state()`: [`STATE_SIZE`] bytes, or the older [`LEGACY_STATE_SIZE`] layout
    /// (whose cached sample is stored as `normal_rho * sin(2 pi normal_x)`).
    ///
    /// Rejects what upstream rejects (wrong size, `seeded == 0`, `left` outside `1..=624`,
    /// `next > 624`) and also a `next`/`left` pair that would read past the state array,
    /// which upstream accepts but then reads out of bounds.
    pub fn set_state(&mut self, bytes: &[u8]) -> Result<()> {
        const OP: &str = "set_rng_state";
        let legacy = match bytes.len() {
            LEGACY_STATE_SIZE => true,
            STATE_SIZE => false,
            n => {
                return Err(invalid(
                    OP,
                    format!(
                        "Expected either a CPUGeneratorImplStateLegacy of size {LEGACY_STATE_SIZE} \
                         or a CPUGeneratorImplState of size {STATE_SIZE} but found the input RNG \
                         state size to be {n}"
                    ),
                ))
            }
        };
        let u64_at = |at: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&bytes[at..at + 8]);
            u64::from_le_bytes(w)
        };
        let i32_at = |at: usize| {
            let mut w = [0u8; 4];
            w.copy_from_slice(&bytes[at..at + 4]);
            i32::from_le_bytes(w)
        };
        let f64_at = |at: usize| f64::from_bits(u64_at(at));

        let mut state = [0u32; MT_N];
        for (i, w) in state.iter_mut().enumerate() {
            *w = u64_at(offsets::STATE + 8 * i) as u32;
        }
        let engine = Mt19937 {
            state,
            seed: u64_at(offsets::SEED),
            left: i32_at(offsets::LEFT),
            seeded: i32_at(offsets::SEEDED) != 0,
            next: u64_at(offsets::NEXT) as u32,
        };
        let valid = engine.seeded
            && engine.left > 0
            && engine.left <= MT_N as i32
            && engine.next as usize <= MT_N;
        if !valid {
            return Err(invalid(OP, "Invalid mt19937 state"));
        }
        if engine.left > 1 && engine.next as usize + engine.left as usize > MT_N + 1 {
            return Err(invalid(
                OP,
                format!(
                    "Invalid mt19937 state: next={} with left={} would read past the {MT_N} \
                     state words",
                    engine.next, engine.left
                ),
            ));
        }

        let normal_valid = i32_at(offsets::NORMAL_VALID) != 0;
        let (double_sample, float_sample) = if legacy {
            // The legacy layout kept Box-Muller's intermediates; upstream rebuilds the sine
            // sample from them and has no float sample.
            let sample = normal_valid.then(|| {
                let r = f64_at(offsets::NORMAL_RHO);
                let theta = 2.0 * std::f64::consts::PI * f64_at(offsets::NORMAL_X);
                r * theta.sin()
            });
            (sample, None)
        } else {
            let float_valid = bytes[offsets::FLOAT_VALID] != 0;
            let mut w = [0u8; 4];
            w.copy_from_slice(&bytes[offsets::FLOAT_NORMAL..offsets::FLOAT_NORMAL + 4]);
            (
                normal_valid.then(|| f64_at(offsets::NORMAL_Y)),
                float_valid.then(|| f32::from_le_bytes(w)),
            )
        };
        self.engine = engine;
        self.next_double_normal_sample = double_sample;
        self.next_float_normal_sample = float_sample;
        Ok(())
    }

    /// `uniform_real_distribution<float>(0, 1)`: 24 random bits scaled to [0, 1).
    fn uniform_f32(&mut self) -> f32 {
        (self.random() & 0x00ff_ffff) as f32 * (1.0 / 16_777_216.0)
    }

    /// `uniform_real_distribution<double>(0, 1)`: 53 random bits scaled to [0, 1).
    fn uniform_f64(&mut self) -> f64 {
        (self.random64() & ((1u64 << 53) - 1)) as f64 * (1.0 / 9_007_199_254_740_992.0)
    }

    /// `normal_distribution<double>(mean, std)`: Box-Muller on two draws, returning the cosine
    /// sample and caching the sine one for the next call.
    fn normal_f64(&mut self, mean: f64, std: f64) -> f64 {
        if let Some(cached) = self.next_double_normal_sample.take() {
            return cached.mul_add(std, mean);
        }
        let u1 = self.uniform_f64();
        let u2 = self.uniform_f64();
        let r = (-2.0 * (-u2).ln_1p()).sqrt();
        let theta = 2.0 * std::f64::consts::PI * u1;
        self.next_double_normal_sample = Some(r * theta.sin());
        (r * theta.cos()).mul_add(std, mean)
    }
}

// ============================================================================ dtype helpers

/// Upstream's C++ name of a dtype, as its error messages print it.
fn cpp_name(dtype: DType) -> &'static str {
    match dtype {
        DType::F32 => "float",
        DType::F64 => "double",
        DType::F16 => "c10::Half",
        DType::BF16 => "c10::BFloat16",
        DType::I64 => "long",
        DType::I32 => "int",
        DType::I16 => "short",
        DType::I8 => "signed char",
        DType::U8 => "unsigned char",
        DType::Bool => "bool",
        DType::C64 => "c10::complex<float>",
        DType::C128 => "c10::complex<double>",
        DType::U16 => "unsigned short",
        DType::U32 => "unsigned int",
        DType::U64 => "unsigned long",
    }
}

/// `std::numeric_limits<T>::digits` of a float dtype.
fn float_digits(dtype: DType) -> u32 {
    match dtype {
        DType::F64 => 53,
        DType::F32 => 24,
        DType::F16 => 11,
        _ => 8, // BF16
    }
}

/// `[lowest, max]` of a float dtype, as doubles.
fn float_limits(dtype: DType) -> (f64, f64) {
    let max = match dtype {
        DType::F64 => f64::MAX,
        DType::F32 => f32::MAX as f64,
        DType::F16 => half::f16::MAX.to_f64(),
        _ => half::bf16::MAX.to_f64(),
    };
    (-max, max)
}

/// `[lowest, max]` of an integer (or bool) dtype.
fn int_limits(dtype: DType) -> (i64, i64) {
    match dtype {
        DType::I64 => (i64::MIN, i64::MAX),
        DType::I32 => (i32::MIN as i64, i32::MAX as i64),
        DType::I16 => (i16::MIN as i64, i16::MAX as i64),
        DType::I8 => (i8::MIN as i64, i8::MAX as i64),
        DType::U8 => (0, u8::MAX as i64),
        _ => (0, 1), // Bool
    }
}

fn require_float<T: Element>(op: &'static str) -> Result<()> {
    if T::DTYPE.is_float() {
        Ok(())
    } else {
        Err(Error::UnsupportedDType {
            op,
            dtype: T::DTYPE,
        })
    }
}

// ============================================================================ uniform_

/// `Tensor.uniform_(from, to)` / `torch.rand` (`from = 0, to = 1`) on a contiguous tensor.
///
/// One draw per element in order: 24 bits for float, half and bfloat16 (computed in float,
/// upstream's opmath type, then rounded), 53 bits (two draws) for double. A value that rounds
/// up to `to` is replaced by `from`, as upstream does.
pub fn uniform_<T: Element>(
    gen: &mut CpuGenerator,
    out: &mut [T],
    from: f64,
    to: f64,
) -> Result<()> {
    const OP: &str = "uniform_";
    require_float::<T>(OP)?;
    let name = cpp_name(T::DTYPE);
    let (min, max) = float_limits(T::DTYPE);
    // NaN fails these range checks too, as upstream's do.
    let in_range = |v: f64| v >= min && v <= max;
    if !in_range(from) {
        return Err(invalid(OP, format!("from is out of bounds for {name}")));
    }
    if !in_range(to) {
        return Err(invalid(OP, format!("to is out of bounds for {name}")));
    }
    if from > to {
        return Err(invalid(
            OP,
            format!(
                "uniform_ expects to return a [from, to) range, but found from={from} > to={to}"
            ),
        ));
    }
    if to - from > max {
        return Err(invalid(
            OP,
            format!(
                "uniform_ expects to-from <= std::numeric_limits<{name}>::max(), but found \
                 to={to} and from={from} which result in to-from to exceed the limit"
            ),
        ));
    }
    if T::DTYPE == DType::F64 {
        let to_scalar = T::from_f64(to);
        let from_scalar = T::from_f64(from);
        for o in out.iter_mut() {
            let x = gen.uniform_f64();
            let v = T::from_f64(x.mul_add(to - from, from));
            *o = if v == to_scalar { from_scalar } else { v };
        }
    } else {
        let (from_f, to_f) = (from as f32, to as f32);
        let to_scalar = T::from_f64(to);
        let from_scalar = T::from_f64(from);
        for o in out.iter_mut() {
            let x = gen.uniform_f32();
            let v = T::from_f64(x.mul_add(to_f - from_f, from_f) as f64);
            *o = if v == to_scalar { from_scalar } else { v };
        }
    }
    Ok(())
}

// ============================================================================ normal_

/// `Tensor.normal_(mean, std)` / `torch.randn` (`mean = 0, std = 1`) on a contiguous tensor.
///
/// Upstream's two paths, chosen by size:
/// - fewer than 16 elements: [`normal_serial_`] (double Box-Muller with the cached sample);
/// - 16 or more: all uniforms first (24-bit for float, half and bfloat16, 53-bit for double),
///   then Box-Muller on blocks of 16 (the first 8 values give the radii, the last 8 the
///   angles); a tail that is not a whole block is redone as the last 16 elements from 16
///   fresh uniforms. Float uses the AVX2 lane arithmetic (see the module docs), double uses
///   libm, half and bfloat16 compute in float with the float kernel and round at the end.
pub fn normal_<T: Element>(
    gen: &mut CpuGenerator,
    out: &mut [T],
    mean: f64,
    std: f64,
) -> Result<()> {
    const OP: &str = "normal_";
    check_normal_args::<T>(OP, std)?;
    if out.len() < 16 {
        fill_normal_serial(gen, out, mean, std);
        return Ok(());
    }
    // Float and double fill the whole output with uniforms first, so the uniforms of a
    // partial last block are drawn and then overwritten; half and bfloat16 go through a
    // 16-float buffer and never draw them.
    let full_first_pass = matches!(T::DTYPE, DType::F32 | DType::F64);
    if T::DTYPE == DType::F64 {
        normal_blocks(
            gen,
            out,
            full_first_pass,
            CpuGenerator::uniform_f64,
            |block| normal_fill_16_f64(block, mean, std),
        );
    } else {
        let (mean_f, std_f) = (mean as f32, std as f32);
        let fill_16 = normal_fill_16_f32_impl();
        normal_blocks(
            gen,
            out,
            full_first_pass,
            CpuGenerator::uniform_f32,
            |block| fill_16(block, mean_f, std_f),
        );
    }
    Ok(())
}

/// The element-by-element normal path upstream takes for tensors under 16 elements and for
/// non-contiguous ones (in the caller's iteration order): each element is a
/// `normal_distribution<double>` sample, which uses and refills the generator's cached
/// double sample, rounded to `T`.
pub fn normal_serial_<T: Element>(
    gen: &mut CpuGenerator,
    out: &mut [T],
    mean: f64,
    std: f64,
) -> Result<()> {
    check_normal_args::<T>("normal_", std)?;
    fill_normal_serial(gen, out, mean, std);
    Ok(())
}

fn check_normal_args<T: Element>(op: &'static str, std: f64) -> Result<()> {
    require_float::<T>(op)?;
    // NaN is refused too, as upstream's `std >= 0.0` check does.
    if std.is_nan() || std < 0.0 {
        return Err(invalid(
            op,
            format!("normal expects std >= 0.0, but found std {std}"),
        ));
    }
    Ok(())
}

fn fill_normal_serial<T: Element>(gen: &mut CpuGenerator, out: &mut [T], mean: f64, std: f64) {
    for o in out.iter_mut() {
        *o = T::from_f64(gen.normal_f64(mean, std));
    }
}

/// Upstream's `normal_fill` schedule with block-local work: drawing a block's 16 uniforms,
/// transforming them and storing them before drawing the next block gives the same values
/// as drawing everything first, because each block's transform reads only its own uniforms.
fn normal_blocks<T: Element, F: Copy + Into<f64> + Default>(
    gen: &mut CpuGenerator,
    out: &mut [T],
    full_first_pass: bool,
    draw: fn(&mut CpuGenerator) -> F,
    fill_16: impl Fn(&mut [F; 16]),
) {
    let n = out.len();
    let mut block = [F::default(); 16];
    for chunk in out.chunks_exact_mut(16) {
        for b in block.iter_mut() {
            *b = draw(gen);
        }
        fill_16(&mut block);
        for (o, b) in chunk.iter_mut().zip(block) {
            *o = T::from_f64(b.into());
        }
    }
    let tail = n % 16;
    if tail != 0 {
        if full_first_pass {
            // Upstream drew these uniforms in its first pass and then overwrote them.
            for _ in 0..tail {
                draw(gen);
            }
        }
        for b in block.iter_mut() {
            *b = draw(gen);
        }
        fill_16(&mut block);
        for (o, b) in out[n - 16..].iter_mut().zip(block) {
            *o = T::from_f64(b.into());
        }
    }
}

/// Upstream's scalar `NormalFill16<double>` with glibc `log`, `cos` and `sin`.
fn normal_fill_16_f64(data: &mut [f64; 16], mean: f64, std: f64) {
    for j in 0..8 {
        let u1 = 1.0 - data[j];
        let u2 = data[j + 8];
        let radius = (-2.0 * u1.ln()).sqrt();
        let theta = 2.0 * std::f64::consts::PI * u2;
        data[j] = (radius * theta.cos()).mul_add(std, mean);
        data[j + 8] = (radius * theta.sin()).mul_add(std, mean);
    }
}

/// Upstream's float Box-Muller block on AVX2 machines (`normal_fill_16_AVX2`), one lane at a
/// time, in a build that uses the FMA unit when the CPU has one (the same bits either way:
/// `mul_add` is exact without it too, only slower).
fn normal_fill_16_f32_impl() -> fn(&mut [f32; 16], f32, f32) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("fma") {
            return fill_16_f32_fma;
        }
    }
    avx2_box_muller::fill_16
}

/// Only handed out by [`normal_fill_16_f32_impl`] after it saw FMA support.
#[cfg(target_arch = "x86_64")]
fn fill_16_f32_fma(data: &mut [f32; 16], mean: f32, std: f32) {
    #[target_feature(enable = "fma")]
    unsafe fn fill(data: &mut [f32; 16], mean: f32, std: f32) {
        avx2_box_muller::fill_16(data, mean, std);
    }
    // SAFETY: this function is only selected when the CPU supports FMA.
    unsafe { fill(data, mean, std) }
}

/// `avx_mathfun.h`'s `log256_ps` and `sincos256_ps` (cephes polynomials) as upstream's wheel
/// computes them, per lane. GCC builds that file with `-mfma` and contracts each multiply
/// whose only use is an add into one fused multiply-add, so the same operations are fused
/// here; every other operation rounds to float as the intrinsics do. The constants are
/// written as upstream writes them.
#[allow(clippy::excessive_precision, clippy::approx_constant)]
mod avx2_box_muller {
    /// A float constant written as a double literal in C, rounded once to float.
    macro_rules! c {
        ($v:expr) => {
            ($v as f64) as f32
        };
    }

    #[inline(always)]
    fn fma(a: f32, b: f32, c: f32) -> f32 {
        a.mul_add(b, c)
    }

    /// `cvttps2dq`: truncation, with the "integer indefinite" result out of range.
    #[inline(always)]
    fn cvtt(x: f32) -> i32 {
        if !(-2_147_483_648.0..2_147_483_648.0).contains(&x) {
            i32::MIN
        } else {
            x as i32
        }
    }

    /// Natural log of `x` in (0, 1] (`log256_ps`).
    #[inline(always)]
    pub fn log(x: f32) -> f32 {
        let one = 1.0f32;
        let invalid = x.is_nan() || x <= 0.0; // _CMP_LE_OS is also true for NaN
        let min_norm_pos = f32::from_bits(0x0080_0000);
        // maxps returns the second operand unless the first is greater.
        let x = if x > min_norm_pos { x } else { min_norm_pos };
        let bits = x.to_bits();
        let imm0 = (bits >> 23) as i32 - 0x7f;
        let mut x = f32::from_bits((bits & !0x7f80_0000) | 0.5f32.to_bits());
        let mut e = imm0 as f32 + one;
        let mask = x < c!(0.707106781186547524);
        let tmp = if mask { x } else { 0.0 };
        x -= one;
        e -= if mask { one } else { 0.0 };
        x += tmp;
        let z = x * x;
        let mut y = fma(c!(7.0376836292E-2), x, c!(-1.1514610310E-1));
        y = fma(y, x, c!(1.1676998740E-1));
        y = fma(y, x, c!(-1.2420140846E-1));
        y = fma(y, x, c!(1.4249322787E-1));
        y = fma(y, x, c!(-1.6668057665E-1));
        y = fma(y, x, c!(2.0000714765E-1));
        y = fma(y, x, c!(-2.4999993993E-1));
        y = fma(y, x, c!(3.3333331174E-1));
        y *= x;
        // y * z + e * q1: the first product is fused with the add, the second rounds.
        y = fma(y, z, e * c!(-2.12194440e-4));
        y = fma(-z, 0.5, y);
        x += y;
        x = fma(e, c!(0.693359375), x);
        if invalid {
            f32::NAN
        } else {
            x
        }
    }

    /// `(sin x, cos x)` (`sincos256_ps`).
    #[inline(always)]
    pub fn sincos(x: f32) -> (f32, f32) {
        const SIGN: u32 = 0x8000_0000;
        let mut sign_bit_sin = x.to_bits() & SIGN;
        let mut x = f32::from_bits(x.to_bits() & !SIGN);
        let y = x * c!(1.27323954473516);
        let mut imm2 = cvtt(y).wrapping_add(1) & !1;
        let y = imm2 as f32;
        let imm4 = imm2;
        let swap_sign_bit_sin = ((imm2 & 4) as u32) << 29;
        imm2 &= 2;
        let poly_mask = imm2 == 0;
        x = fma(y, c!(-0.78515625), x);
        x = fma(y, c!(-2.4187564849853515625e-4), x);
        x = fma(y, c!(-3.77489497744594108e-8), x);
        let sign_bit_cos = ((!imm4.wrapping_sub(2) & 4) as u32) << 29;
        sign_bit_sin ^= swap_sign_bit_sin;

        let z = x * x;
        let mut y = fma(c!(2.443315711809948E-005), z, c!(-1.388731625493765E-003));
        y = fma(y, z, c!(4.166664568298827E-002));
        y *= z;
        // y * z - z * 0.5: the first product is fused with the subtraction.
        y = fma(y, z, -(z * 0.5));
        y += 1.0;

        let mut y2 = fma(c!(-1.9515295891E-4), z, c!(8.3321608736E-3));
        y2 = fma(y2, z, c!(-1.6666654611E-1));
        y2 *= z;
        y2 = fma(y2, x, x);

        let ysin2 = if poly_mask { y2 } else { 0.0 };
        let ysin1 = if poly_mask { 0.0 } else { y };
        let y2 = y2 - ysin2;
        let y = y - ysin1;
        let s = ysin1 + ysin2;
        let c = y + y2;
        (
            f32::from_bits(s.to_bits() ^ sign_bit_sin),
            f32::from_bits(c.to_bits() ^ sign_bit_cos),
        )
    }

    /// `normal_fill_16_AVX2`: lanes 0..8 hold the radius uniforms, 8..16 the angle ones.
    #[inline(always)]
    pub fn fill_16(data: &mut [f32; 16], mean: f32, std: f32) {
        let two_pi = (2.0 * std::f64::consts::PI) as f32;
        for j in 0..8 {
            let u1 = 1.0 - data[j];
            let u2 = data[j + 8];
            let radius = (-2.0 * log(u1)).sqrt();
            let theta = two_pi * u2;
            let (s, c) = sincos(theta);
            data[j] = fma(radius * c, std, mean);
            data[j + 8] = fma(radius * s, std, mean);
        }
    }
}

// ============================================================================ random_

/// `torch.randint(low, high, size)` on a contiguous tensor: `random_(low, high)`.
pub fn randint<T: Element>(
    gen: &mut CpuGenerator,
    out: &mut [T],
    low: i64,
    high: i64,
) -> Result<()> {
    random_from_to_(gen, out, low, Some(high))
}

/// `Tensor.random_(from, to)`: integers in `[from, to)` (`to = None`: up to the dtype's
/// largest value, or the whole int64 range when `from == i64::MIN`).
///
/// One draw per element, `(draw % range) + from`: a 32-bit draw while the range is below
/// 2^28, a 64-bit one (two draws) from 2^28 up. Float dtypes first move `from`/`to` to
/// values the dtype represents, as upstream's `update_from`/`update_to` do; the checks and
/// their order are upstream's.
pub fn random_from_to_<T: Element>(
    gen: &mut CpuGenerator,
    out: &mut [T],
    from: i64,
    to: Option<i64>,
) -> Result<()> {
    const OP: &str = "random_";
    let dtype = T::DTYPE;
    let is_float = dtype.is_float();
    let mut from = from;
    let range: u64 = match to {
        Some(to) => {
            let mut to = to;
            if from >= to {
                return Err(invalid(
                    OP,
                    format!(
                        "random_ expects 'from' to be less than 'to', but got from={from} >= to={to}"
                    ),
                ));
            }
            if is_float {
                from = update_from::<T>(from);
                to = update_to::<T>(to);
                if from >= to {
                    return Err(invalid(
                        OP,
                        format!(
                            "random_ expects 'from' casted to dtype to be less than 'to' casted \
                             to dtype, but got from={from} >= to={to}"
                        ),
                    ));
                }
            }
            check_from_to_in_range(OP, from, to.wrapping_sub(1), dtype)?;
            (to as u64).wrapping_sub(from as u64)
        }
        None if from != i64::MIN => {
            let to_inc = if is_float {
                let to_inc = if float_digits(dtype) >= 63 {
                    i64::MAX
                } else {
                    1i64 << float_digits(dtype)
                };
                from = update_from::<T>(from);
                if from >= to_inc {
                    return Err(invalid(
                        OP,
                        format!(
                            "random_ expects 'from' casted to dtype to be less than or equal to \
                             'to_inc' casted to dtype, but got from={from} > to_inc={to_inc}"
                        ),
                    ));
                }
                to_inc
            } else {
                int_limits(dtype).1
            };
            check_from_to_in_range(OP, from, to_inc, dtype)?;
            (to_inc as u64).wrapping_sub(from as u64).wrapping_add(1)
        }
        None => {
            // [i64::MIN, i64::MAX]: every 64-bit value.
            if !matches!(dtype, DType::I64 | DType::F64 | DType::F32 | DType::BF16) {
                return Err(match dtype {
                    DType::F16 | DType::Bool => Error::UnsupportedDType { op: OP, dtype },
                    _ => invalid(
                        OP,
                        "random_full_64_bits_range_kernel_cpu handles only int64, double, float \
                         and bfloat16",
                    ),
                });
            }
            for o in out.iter_mut() {
                *o = T::from_i64(gen.random64() as i64);
            }
            return Ok(());
        }
    };
    let base = from as u64;
    if range >= 1 << 28 {
        for o in out.iter_mut() {
            *o = T::from_i64((gen.random64() % range).wrapping_add(base) as i64);
        }
    } else {
        for o in out.iter_mut() {
            *o = T::from_i64((gen.random() as u64 % range).wrapping_add(base) as i64);
        }
    }
    Ok(())
}

/// `Tensor.random_()` with no bounds: `[0, 2^mantissa]` for float dtypes, `[0, max]` for
/// integer ones (`{0, 1}` for bool); 64-bit draws for int64 and double, 32-bit otherwise.
pub fn random_<T: Element>(gen: &mut CpuGenerator, out: &mut [T]) -> Result<()> {
    let dtype = T::DTYPE;
    for o in out.iter_mut() {
        *o = match dtype {
            DType::F64 => T::from_i64((gen.random64() % ((1u64 << 53) + 1)) as i64),
            DType::I64 => T::from_i64((gen.random64() % (1u64 << 63)) as i64),
            DType::Bool => T::from_i64((gen.random() & 1) as i64),
            DType::F32 | DType::F16 | DType::BF16 => {
                let modulus = (1u64 << float_digits(dtype)) + 1;
                T::from_i64((gen.random() as u64 % modulus) as i64)
            }
            _ => {
                let modulus = int_limits(dtype).1 as u64 + 1;
                T::from_i64((gen.random() as u64 % modulus) as i64)
            }
        };
    }
    Ok(())
}

/// `update_from`: moves `from` up to the next value the float dtype represents when casting
/// `from + 1` to it rounds below `from`.
fn update_from<T: Element>(from: i64) -> i64 {
    let from_plus_1 = T::from_i64(from.wrapping_add(1)).to_i64();
    if from_plus_1 < from {
        let mut from_ = from.wrapping_add(1).unsigned_abs();
        let mut n: u32 = 0;
        while {
            from_ >>= 1;
            from_ != 0
        } {
            n += 1;
        }
        let shift = (n + 1).saturating_sub(float_digits(T::DTYPE)).min(62);
        from_plus_1.wrapping_add(1i64 << shift)
    } else {
        from
    }
}

/// `update_to`: moves `to` down when casting `to - 1` to the float dtype rounds up to `to`.
fn update_to<T: Element>(to: i64) -> i64 {
    let to_minus_1 = T::from_i64(to.wrapping_sub(1)).to_i64();
    if to_minus_1 >= to {
        let mut to_ = to.wrapping_sub(1).unsigned_abs();
        let mut n: u32 = 0;
        while {
            to_ >>= 1;
            to_ != 0
        } {
            n += 1;
        }
        let shift = (n + 1).saturating_sub(float_digits(T::DTYPE)).min(62);
        to_minus_1.wrapping_sub(1i64 << shift)
    } else {
        to
    }
}

/// `check_from_to_in_range`: both ends must be values of the dtype.
fn check_from_to_in_range(op: &'static str, from: i64, to_inc: i64, dtype: DType) -> Result<()> {
    let name = cpp_name(dtype);
    let (from_ok, to_ok) = if dtype.is_float() {
        let (min, max) = float_limits(dtype);
        let ok = |v: i64| (v as f64) >= min && (v as f64) <= max;
        (ok(from), ok(to_inc))
    } else {
        let (min, max) = int_limits(dtype);
        let ok = |v: i64| v >= min && v <= max;
        (ok(from), ok(to_inc))
    };
    if !from_ok {
        return Err(invalid(op, format!("from is out of bounds for {name}")));
    }
    if !to_ok {
        return Err(invalid(op, format!("to - 1 is out of bounds for {name}")));
    }
    Ok(())
}

// ============================================================================ randperm

/// `torch.randperm(n)` with `n = out.len()`.
///
/// Below `u32::MAX / 20` elements: the identity, then Fisher-Yates swapping element `i` with
/// `i + random() % (n - i)`. From there up: the "inside-out" variant with 64-bit draws,
/// `random64() % (i + 1)`. The dtype checks are upstream's (`n` must fit the dtype, at most
/// 2049 for half, 2^24 + 1 for float; bool is refused).
pub fn randperm<T: Element>(gen: &mut CpuGenerator, out: &mut [T]) -> Result<()> {
    const OP: &str = "randperm";
    let dtype = T::DTYPE;
    let n = out.len() as i64;
    match dtype {
        DType::Bool => return Err(Error::UnsupportedDType { op: OP, dtype }),
        DType::F16 if n > (1 << 11) + 1 => {
            return Err(invalid(OP, "n cannot be greater than 2049 for Half type."))
        }
        DType::F32 if n > (1 << 24) + 1 => {
            return Err(invalid(OP, "n cannot be greater than 2^24+1 for Float type."))
        }
        DType::F64 if n > (1 << 53) + 1 => {
            return Err(invalid(OP, "n cannot be greater than 2^53+1 for Double type."))
        }
        _ if !dtype.is_float() && n > 0 && n - 1 > int_limits(dtype).1 => {
            return Err(invalid(
                OP,
                format!("n is too large for result tensor type: value cannot be converted to type {} without overflow", cpp_name(dtype)),
            ))
        }
        _ => {}
    }
    if n < (u32::MAX / 20) as i64 {
        for (i, o) in out.iter_mut().enumerate() {
            *o = T::from_i64(i as i64);
        }
        for i in 0..(n - 1).max(0) {
            let z = gen.random() as i64 % (n - i);
            out.swap(i as usize, (z + i) as usize);
        }
    } else {
        for i in 0..n {
            let z = (gen.random64() % (i as u64 + 1)) as usize;
            let i = i as usize;
            out[i] = T::from_i64(i as i64);
            out[i] = out[z];
            out[z] = T::from_i64(i as i64);
        }
    }
    Ok(())
}

// ============================================================================ bernoulli_

/// `Tensor.bernoulli_(p)` with a scalar `p`: one 53-bit uniform (two draws) per element,
/// `1` when it is below `p`.
///
/// Upstream's source has an MKL VSL (MCG31, split across threads with skip-ahead) kernel
/// for this, but the torch 2.15.0 wheel runs the generator-based serial kernel (measured:
/// same values and stream position as this function at 1 and at 2 threads), so the thread
/// count does not matter.
pub fn bernoulli_scalar_<T: Element>(gen: &mut CpuGenerator, out: &mut [T], p: f64) -> Result<()> {
    if !(0.0..=1.0).contains(&p) {
        return Err(invalid(
            "bernoulli_",
            format!("bernoulli_ expects p to be in [0, 1], but got p={p}"),
        ));
    }
    for o in out.iter_mut() {
        *o = T::from_i64((gen.uniform_f64() < p) as i64);
    }
    Ok(())
}

/// `torch.bernoulli(probs)` / `Tensor.bernoulli_(probs)` with a probability per element
/// (`probs.len() == out.len()`): double probabilities compare with a 53-bit uniform (two
/// draws), float, half and bfloat16 ones with a 24-bit float uniform (one draw).
///
/// Every probability must be in [0, 1]; unlike upstream (which fails part-way), an invalid
/// one is reported before anything is drawn or written.
pub fn bernoulli_tensor_<T: Element, P: Element>(
    gen: &mut CpuGenerator,
    out: &mut [T],
    probs: &[P],
) -> Result<()> {
    const OP: &str = "bernoulli_";
    if !P::DTYPE.is_float() {
        return Err(Error::UnsupportedDType {
            op: OP,
            dtype: P::DTYPE,
        });
    }
    if probs.len() != out.len() {
        return Err(Error::ShapeMismatch {
            op: OP,
            lhs: vec![out.len()],
            rhs: vec![probs.len()],
            reason: "one probability per output element is needed".into(),
        });
    }
    if let Some(i) = probs
        .iter()
        .position(|p| !(0.0..=1.0).contains(&p.to_f64()))
    {
        return Err(invalid(
            OP,
            format!(
                "expected every probability to be in [0, 1], but probs[{i}] = {}",
                probs[i].to_f64()
            ),
        ));
    }
    if P::DTYPE == DType::F64 {
        for (o, p) in out.iter_mut().zip(probs) {
            *o = T::from_i64((gen.uniform_f64() < p.to_f64()) as i64);
        }
    } else {
        for (o, p) in out.iter_mut().zip(probs) {
            *o = T::from_i64((gen.uniform_f32() < p.to_f64() as f32) as i64);
        }
    }
    Ok(())
}

// ============================================================================ exponential_

/// `Tensor.exponential_(lambd)`: `-1/lambd * log1p(-u)` with a 53-bit uniform `u` (two
/// draws) per element, rounded to `T` (upstream computes in double for every float dtype).
pub fn exponential_<T: Element>(gen: &mut CpuGenerator, out: &mut [T], lambd: f64) -> Result<()> {
    const OP: &str = "exponential_";
    require_float::<T>(OP)?;
    if lambd.is_nan() || lambd <= 0.0 {
        return Err(invalid(
            OP,
            format!("exponential_ expects lambda > 0.0, but found lambda={lambd}"),
        ));
    }
    for o in out.iter_mut() {
        let u = gen.uniform_f64();
        *o = T::from_f64(-1.0 / lambd * (-u).ln_1p());
    }
    Ok(())
}

// ============================================================================ multinomial

/// `torch.multinomial(probs, n_sample, replacement)` for `probs` holding `probs.len() /
/// n_categories` rows of `n_categories` weights (a 1-D input is one row). Returns the
/// `rows * n_sample` category indices, row by row.
///
/// - With replacement and more than one sample: per row, the normalized cumulative sums (in
///   the probability dtype, float for half and bfloat16), then per sample one 53-bit
///   uniform and a binary search.
/// - Without replacement, or a single sample: upstream's exponential trick over the whole
///   input (one `exponential_(1)` draw per weight, row-major, in the weights' dtype), then
///   per row the indices of the largest `weight / draw` values, largest first (`argmax`
///   for one sample). Equal keys (zero weights, or coarse half/bfloat16 keys) come out in
///   the order upstream's `topk` leaves them, which is that of libstdc++'s
///   `partial_sort` / `nth_element` + `sort`, ported in [`libstdcxx`].
pub fn multinomial<P: Element>(
    gen: &mut CpuGenerator,
    probs: &[P],
    n_categories: usize,
    n_sample: usize,
    replacement: bool,
) -> Result<Vec<i64>> {
    const OP: &str = "multinomial";
    if !P::DTYPE.is_float() {
        return Err(invalid(
            OP,
            format!(
                "multinomial only supports floating-point dtypes for input, got: {:?}",
                P::DTYPE
            ),
        ));
    }
    if n_categories == 0 || !probs.len().is_multiple_of(n_categories) {
        return Err(invalid(
            OP,
            format!(
                "expected rows of {n_categories} categories but got {} weights",
                probs.len()
            ),
        ));
    }
    if n_sample == 0 {
        return Err(invalid(OP, "cannot sample n_sample <= 0 samples"));
    }
    if !replacement && n_sample > n_categories {
        return Err(invalid(
            OP,
            "cannot sample n_sample > prob_dist.size(-1) samples without replacement",
        ));
    }
    if n_categories > 1 << 24 {
        return Err(invalid(OP, "number of categories cannot exceed 2^24"));
    }
    let n_dist = probs.len() / n_categories;
    let mut result = Vec::new();
    result
        .try_reserve_exact(n_dist.saturating_mul(n_sample))
        .map_err(|_| invalid(OP, "cannot allocate the result"))?;

    if !replacement || n_sample == 1 {
        let valid = probs.iter().all(|p| {
            let p = p.to_f64();
            (0.0..f64::INFINITY).contains(&p)
        });
        if !valid {
            return Err(invalid(
                OP,
                "probability tensor contains either `inf`, `nan` or element < 0",
            ));
        }
        if probs
            .chunks_exact(n_categories)
            .any(|row| row.iter().all(|p| p.to_f64() == 0.0))
        {
            return Err(invalid(
                OP,
                "invalid multinomial distribution (sum of probabilities <= 0)",
            ));
        }
        // q = probs / Exp(1) draws, in the weights' dtype.
        let mut keys: Vec<P> = Vec::new();
        keys.try_reserve_exact(probs.len())
            .map_err(|_| invalid(OP, "cannot allocate the sampling keys"))?;
        keys.resize(probs.len(), P::default());
        exponential_(gen, &mut keys, 1.0)?;
        for (k, p) in keys.iter_mut().zip(probs) {
            *k = divide(*p, *k);
        }
        let mut queue: Vec<(f64, usize)> = Vec::new();
        queue
            .try_reserve_exact(n_categories)
            .map_err(|_| invalid(OP, "cannot allocate the top-k queue"))?;
        for row in keys.chunks_exact(n_categories) {
            if n_sample == 1 {
                result.push(argmax(row) as i64);
            } else {
                queue.clear();
                queue.extend(row.iter().enumerate().map(|(j, v)| (v.to_f64(), j)));
                libstdcxx::topk_largest(&mut queue, n_sample);
                result.extend(queue[..n_sample].iter().map(|&(_, j)| j as i64));
            }
        }
        return Ok(result);
    }

    for row in probs.chunks_exact(n_categories) {
        for p in row {
            let p = p.to_f64();
            if p.is_nan() || p < 0.0 {
                return Err(invalid(
                    OP,
                    "invalid multinomial distribution (encountering probability entry < 0)",
                ));
            }
            if !p.is_finite() {
                return Err(invalid(
                    OP,
                    "invalid multinomial distribution (encountering probability entry = infinity or NaN)",
                ));
            }
        }
    }
    let mut cum: Vec<f64> = Vec::new();
    cum.try_reserve_exact(n_categories)
        .map_err(|_| invalid(OP, "cannot allocate the cumulative distribution"))?;
    for row in probs.chunks_exact(n_categories) {
        // The cumulative sums in the accumulation dtype (double only for double weights),
        // stored widened to f64, which is exact.
        cum.clear();
        if P::DTYPE == DType::F64 {
            let mut sum = 0.0f64;
            for p in row {
                sum += p.to_f64();
                cum.push(sum);
            }
            if sum.is_nan() || sum <= 0.0 {
                return Err(invalid(
                    OP,
                    "invalid multinomial distribution (sum of probabilities <= 0)",
                ));
            }
            for c in cum.iter_mut() {
                *c /= sum;
            }
        } else {
            let mut sum = 0.0f32;
            for p in row {
                sum += p.to_f64() as f32;
                cum.push(sum as f64);
            }
            if sum.is_nan() || sum <= 0.0 {
                return Err(invalid(
                    OP,
                    "invalid multinomial distribution (sum of probabilities <= 0)",
                ));
            }
            for c in cum.iter_mut() {
                *c = (*c as f32 / sum) as f64;
            }
        }
        cum[n_categories - 1] = 1.0;
        for _ in 0..n_sample {
            let u = gen.uniform_f64();
            let (mut left, mut right) = (0usize, n_categories);
            while right > left {
                let mid = left + (right - left) / 2;
                if cum[mid] < u {
                    left = mid + 1;
                } else {
                    right = mid;
                }
            }
            result.push(left as i64);
        }
    }
    Ok(result)
}

/// `a / b` in the dtype's arithmetic (float for half and bfloat16, rounded back).
fn divide<P: Element>(a: P, b: P) -> P {
    if P::DTYPE == DType::F64 {
        P::from_f64(a.to_f64() / b.to_f64())
    } else {
        P::from_f64((a.to_f64() as f32 / b.to_f64() as f32) as f64)
    }
}

/// `argmax`: the first largest value, NaN counting as largest.
fn argmax<P: Element>(row: &[P]) -> usize {
    let mut best = 0;
    let mut best_v = row[0].to_f64();
    for (i, v) in row.iter().enumerate().skip(1) {
        let v = v.to_f64();
        if best_v.is_nan() {
            break;
        }
        if v.is_nan() || v > best_v {
            best = i;
            best_v = v;
        }
    }
    best
}

/// The libstdc++ (GCC 13) selection and sorting algorithms upstream's CPU `topk` runs
/// (`partial_sort` when `64 k <= n`, else `nth_element` and a `sort` of the first `k - 1`),
/// ported step for step so that elements with equal keys end up in the same order.
mod libstdcxx {
    type Elem = (f64, usize);

    /// topk's "largest" comparator: NaN first, then descending.
    fn comp(x: &Elem, y: &Elem) -> bool {
        (x.0.is_nan() && !y.0.is_nan()) || x.0 > y.0
    }

    /// Reorders `v` so that its first `k` elements are upstream's `topk(k)` (sorted).
    pub fn topk_largest(v: &mut [Elem], k: usize) {
        let n = v.len();
        if k == 0 || k > n {
            return;
        }
        if k * 64 <= n {
            partial_sort(v, k);
        } else {
            nth_element(v, k - 1);
            sort(&mut v[..k - 1]);
        }
    }

    fn lg(n: usize) -> usize {
        (usize::BITS - 1 - n.leading_zeros()) as usize
    }

    fn push_heap(v: &mut [Elem], mut hole: usize, top: usize, value: Elem) {
        while hole > top {
            let parent = (hole - 1) / 2;
            if !comp(&v[parent], &value) {
                break;
            }
            v[hole] = v[parent];
            hole = parent;
        }
        v[hole] = value;
    }

    fn adjust_heap(v: &mut [Elem], mut hole: usize, len: usize, value: Elem) {
        let top = hole;
        let mut second = hole;
        while second < len.saturating_sub(1) / 2 {
            second = 2 * (second + 1);
            if comp(&v[second], &v[second - 1]) {
                second -= 1;
            }
            v[hole] = v[second];
            hole = second;
        }
        if len & 1 == 0 && len >= 2 && second == (len - 2) / 2 {
            second = 2 * (second + 1);
            v[hole] = v[second - 1];
            hole = second - 1;
        }
        push_heap(v, hole, top, value);
    }

    fn make_heap(v: &mut [Elem]) {
        let len = v.len();
        if len < 2 {
            return;
        }
        let mut parent = (len - 2) / 2;
        loop {
            let value = v[parent];
            adjust_heap(v, parent, len, value);
            if parent == 0 {
                return;
            }
            parent -= 1;
        }
    }

    /// `__pop_heap(first, first + len, result)`.
    fn pop_heap(v: &mut [Elem], len: usize, result: usize) {
        let value = v[result];
        v[result] = v[0];
        adjust_heap(v, 0, len, value);
    }

    fn heap_select(v: &mut [Elem], middle: usize) {
        make_heap(&mut v[..middle]);
        for i in middle..v.len() {
            if comp(&v[i], &v[0]) {
                pop_heap(v, middle, i);
            }
        }
    }

    fn sort_heap(v: &mut [Elem]) {
        let mut last = v.len();
        while last > 1 {
            last -= 1;
            pop_heap(v, last, last);
        }
    }

    fn partial_sort(v: &mut [Elem], middle: usize) {
        heap_select(v, middle);
        sort_heap(&mut v[..middle]);
    }

    fn move_median_to_first(v: &mut [Elem], result: usize, a: usize, b: usize, c: usize) {
        let pick = if comp(&v[a], &v[b]) {
            if comp(&v[b], &v[c]) {
                b
            } else if comp(&v[a], &v[c]) {
                c
            } else {
                a
            }
        } else if comp(&v[a], &v[c]) {
            a
        } else if comp(&v[b], &v[c]) {
            c
        } else {
            b
        };
        v.swap(result, pick);
    }

    /// `__unguarded_partition(first, last, pivot)`; the median-of-three pivot bounds both
    /// scans.
    fn unguarded_partition(
        v: &mut [Elem],
        mut first: usize,
        mut last: usize,
        pivot: usize,
    ) -> usize {
        loop {
            while comp(&v[first], &v[pivot]) {
                first += 1;
            }
            last -= 1;
            while comp(&v[pivot], &v[last]) {
                last -= 1;
            }
            if first >= last {
                return first;
            }
            v.swap(first, last);
            first += 1;
        }
    }

    fn unguarded_partition_pivot(v: &mut [Elem], first: usize, last: usize) -> usize {
        let mid = first + (last - first) / 2;
        move_median_to_first(v, first, first + 1, mid, last - 1);
        unguarded_partition(v, first + 1, last, first)
    }

    fn unguarded_linear_insert(v: &mut [Elem], mut last: usize) {
        let value = v[last];
        let mut next = last - 1;
        while comp(&value, &v[next]) {
            v[last] = v[next];
            last = next;
            next -= 1;
        }
        v[last] = value;
    }

    fn insertion_sort(v: &mut [Elem], first: usize, last: usize) {
        if first == last {
            return;
        }
        for i in first + 1..last {
            if comp(&v[i], &v[first]) {
                let value = v[i];
                v.copy_within(first..i, first + 1);
                v[first] = value;
            } else {
                unguarded_linear_insert(v, i);
            }
        }
    }

    fn nth_element(v: &mut [Elem], nth: usize) {
        let (mut first, mut last) = (0, v.len());
        if first == last || nth == last {
            return;
        }
        let mut depth_limit = lg(last - first) * 2;
        while last - first > 3 {
            if depth_limit == 0 {
                heap_select(&mut v[first..last], nth + 1 - first);
                v.swap(first, nth);
                return;
            }
            depth_limit -= 1;
            let cut = unguarded_partition_pivot(v, first, last);
            if cut <= nth {
                first = cut;
            } else {
                last = cut;
            }
        }
        insertion_sort(v, first, last);
    }

    const S_THRESHOLD: usize = 16;

    fn introsort_loop(v: &mut [Elem], first: usize, mut last: usize, mut depth_limit: usize) {
        while last - first > S_THRESHOLD {
            if depth_limit == 0 {
                let len = last - first;
                partial_sort(&mut v[first..last], len);
                return;
            }
            depth_limit -= 1;
            let cut = unguarded_partition_pivot(v, first, last);
            introsort_loop(v, cut, last, depth_limit);
            last = cut;
        }
    }

    fn sort(v: &mut [Elem]) {
        let last = v.len();
        if last == 0 {
            return;
        }
        introsort_loop(v, 0, last, lg(last) * 2);
        if last > S_THRESHOLD {
            insertion_sort(v, 0, S_THRESHOLD);
            for i in S_THRESHOLD..last {
                unguarded_linear_insert(v, i);
            }
        } else {
            insertion_sort(v, 0, last);
        }
    }
}
