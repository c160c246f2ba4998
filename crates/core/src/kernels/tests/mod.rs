//! Kernel tests. Every SIMD path is forced explicitly (`supported_isas()`) and compared with
//! an independent reference (f64 naive loops, direct formulas, or torch via the oracle).
//!
//! Tolerance rule (f32 accumulation): a sum of `k` products computed in f32, in any order,
//! differs from the exact value by at most `γ_k · Σ|a_i·b_i|` with `γ_k ≈ k·u`, `u = 2^-24`
//! (Higham, first order). Tests compare against the f64 result with `(k + 2)·u·Σ|a_i·b_i|`
//! (+2 for the final bias add / horizontal reduction) plus a 1e-30 floor for exact zeros.
//! Elementwise results built from `exp` allow a few ulp for our polynomial `exp`
//! (stated at each test).

mod attention;
mod elementwise;
mod invariance;
mod linear;
mod oracle;
mod paged;
mod rope;
mod threads;

/// Held by tests that change the kernel pool's thread count, so they do not interleave.
pub(crate) static THREADS: std::sync::Mutex<()> = std::sync::Mutex::new(());

pub(crate) const U: f64 = 1.0 / (1u64 << 24) as f64;

/// Sizes that hit every tail path of 8- and 16-lane code.
pub(crate) const AWKWARD_SIZES: &[usize] = &[1, 7, 15, 16, 17, 31, 33, 63, 65, 576, 1000, 1536];

/// Small deterministic generator (splitmix64), so failures reproduce.
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        Rng(seed)
    }
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in [-1, 1).
    pub(crate) fn f32(&mut self) -> f32 {
        ((self.next_u64() >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
    pub(crate) fn vec(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.f32()).collect()
    }
    /// Uniform in [-scale, scale).
    pub(crate) fn vec_scaled(&mut self, n: usize, scale: f32) -> Vec<f32> {
        (0..n).map(|_| self.f32() * scale).collect()
    }
}

/// Asserts `|got - want| <= tol`, with context.
#[track_caller]
pub(crate) fn assert_close(got: f32, want: f64, tol: f64, what: &str) {
    let err = (got as f64 - want).abs();
    assert!(
        err <= tol,
        "{what}: got {got}, want {want}, |err| {err:e} > tol {tol:e}"
    );
}

/// Tolerance for a length-k f32 dot whose terms have absolute sum `abs_sum`.
pub(crate) fn dot_tol(k: usize, abs_sum: f64) -> f64 {
    (k as f64 + 2.0) * U * abs_sum + 1e-30
}
