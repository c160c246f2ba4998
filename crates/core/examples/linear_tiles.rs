//! `linear_f32` on SmolLM2-135M's projection shapes over a range of row counts (GFLOP/s), to
//! tune its blocking: `cargo run --profile ci -p torchnative-core --example linear_tiles [THREADS]`

use std::time::Instant;
use torchnative_core::kernels;

fn main() {
    let threads: usize = std::env::args()
        .nth(1)
        .map_or(2, |t| t.parse().expect("THREADS"));
    kernels::set_num_threads(threads).expect("threads");
    println!("isa {:?}, {threads} threads", kernels::active_isa());
    let mut seed = 1u64;
    let mut rand = move || {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((seed >> 40) as f32 / (1u64 << 24) as f32) - 0.5
    };
    for (k, n) in [(576, 576), (576, 192), (576, 1536), (1536, 576)] {
        for m in [16, 75, 256] {
            let x: Vec<f32> = (0..m * k).map(|_| rand()).collect();
            let w: Vec<f32> = (0..n * k).map(|_| rand()).collect();
            let mut y = vec![0f32; m * n];
            let reps = (20_000_000 / (m * k * n)).clamp(3, 200);
            let mut times: Vec<f64> = (0..9)
                .map(|_| {
                    let t = Instant::now();
                    for _ in 0..reps {
                        kernels::linear_f32(&x, &w, None, &mut y, m, k, n);
                    }
                    t.elapsed().as_secs_f64() * 1e6 / reps as f64
                })
                .collect();
            times.sort_by(f64::total_cmp);
            let us = times[4];
            let gflops = 2.0 * (m * k * n) as f64 / us / 1e3;
            println!("k={k:5} n={n:5} m={m:4}: {us:8.1} us {gflops:6.1} GFLOP/s");
        }
    }
}
