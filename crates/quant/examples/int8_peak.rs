//! The CPU's ceiling for the AVX2 int8 kernels: register-only loops of `vpmaddubsw` (32
//! byte products an instruction, what `lanes_32_avx2` spends per 32 weights and activation
//! row), of f32 FMAs, and of the two interleaved one to one, on every thread at once. Compare
//! `batch_sweep`'s rates with the first line: the kernels cannot beat it.
//! `cargo run --release -p torchnative-quant --example int8_peak [-- THREADS]`

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;
    use std::hint::black_box;

    /// Independent chains per loop: at least any of these instructions' latency times its
    /// throughput (Zen 2's FMA: 5 cycles, 2 a cycle), so the loops measure throughput.
    const CHAINS: usize = 12;

    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn maddubs(iters: usize) -> i32 {
        let x = _mm256_set1_epi8(black_box(3));
        let mut a = [_mm256_set1_epi8(black_box(1)); CHAINS];
        for _ in 0..iters {
            for a in a.iter_mut() {
                *a = _mm256_maddubs_epi16(*a, x);
            }
        }
        let mut s = _mm256_setzero_si256();
        for a in a {
            s = _mm256_add_epi16(s, a);
        }
        _mm256_extract_epi32::<0>(s)
    }

    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn fma(iters: usize) -> f32 {
        let x = _mm256_set1_ps(black_box(0.999));
        let mut a = [_mm256_set1_ps(black_box(1.0)); CHAINS];
        for _ in 0..iters {
            for a in a.iter_mut() {
                *a = _mm256_fmadd_ps(*a, x, x);
            }
        }
        let mut s = _mm256_setzero_ps();
        for a in a {
            s = _mm256_add_ps(s, a);
        }
        _mm_cvtss_f32(_mm256_castps256_ps128(s))
    }

    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn both(iters: usize) -> f32 {
        let xi = _mm256_set1_epi8(black_box(3));
        let xf = _mm256_set1_ps(black_box(0.999));
        let mut ai = [_mm256_set1_epi8(black_box(1)); CHAINS];
        let mut af = [_mm256_set1_ps(black_box(1.0)); CHAINS];
        for _ in 0..iters {
            for (ai, af) in ai.iter_mut().zip(af.iter_mut()) {
                *ai = _mm256_maddubs_epi16(*ai, xi);
                *af = _mm256_fmadd_ps(*af, xf, xf);
            }
        }
        let mut s = _mm256_setzero_ps();
        for (ai, af) in ai.into_iter().zip(af) {
            s = _mm256_add_ps(s, _mm256_add_ps(af, _mm256_cvtepi32_ps(ai)));
        }
        _mm_cvtss_f32(_mm256_castps256_ps128(s))
    }

    pub const CHAINS_PER_LOOP: usize = CHAINS;
}

#[cfg(target_arch = "x86_64")]
fn main() {
    use std::time::Instant;
    if !(is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")) {
        eprintln!("int8_peak: this CPU lacks AVX2 or FMA; nothing to measure");
        return;
    }
    let threads: usize = std::env::args()
        .nth(1)
        .map(|t| t.parse().expect("THREADS: a count"))
        .unwrap_or(2);
    let iters = 50_000_000usize;
    type Loop = fn(usize) -> f64;
    // (name, loop, vpmaddubsw and FMAs per chain and iteration)
    let loops: [(&str, Loop, usize, usize); 3] = [
        // SAFETY (all three): AVX2 and FMA were detected above.
        (
            "vpmaddubsw alone",
            |n| unsafe { x86::maddubs(n) as f64 },
            1,
            0,
        ),
        ("FMA alone", |n| unsafe { x86::fma(n) as f64 }, 0, 1),
        ("both, one to one", |n| unsafe { x86::both(n) as f64 }, 1, 1),
    ];
    println!("{threads} threads; G instructions a second, all threads together");
    for (name, f, int8, fma) in loops {
        let t0 = Instant::now();
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| std::hint::black_box(f(iters)));
            }
        });
        let per_s =
            (threads * iters * x86::CHAINS_PER_LOOP) as f64 / t0.elapsed().as_secs_f64() / 1e9;
        println!(
            "{name:>17}: {:6.2} vpmaddubsw ({:6.1} G byte products), {:6.2} FMA ({:6.1} G f32 products)",
            per_s * int8 as f64,
            per_s * int8 as f64 * 32.0,
            per_s * fma as f64,
            per_s * fma as f64 * 8.0,
        );
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn main() {
    eprintln!("int8_peak: x86_64 only");
}
