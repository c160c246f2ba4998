//! Decode (one activation row) and prefill throughput of the packed matmul per weight type:
//! `cargo run --release -p torchnative-quant --example gemv_bandwidth [threads]`.
use std::time::Instant;

use torchnative_quant::*;

fn main() {
    let threads: usize = std::env::args().nth(1).map_or(2, |a| a.parse().unwrap());
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap();
    let (rows, cols) = (8192usize, 4096usize);
    for ty in [
        GgmlType::Q4_0,
        GgmlType::Q4_1,
        GgmlType::Q8_0,
        GgmlType::Q4_K,
        GgmlType::Q6_K,
    ] {
        let x: Vec<f32> = (0..rows * cols)
            .map(|i| ((i * 7919) % 1000) as f32 / 500.0 - 1.0)
            .collect();
        let mut data = vec![0u8; rows * ty.row_bytes(cols).unwrap()];
        quantize(ty, &x, &mut data).unwrap();
        let w = PackedMatrix::new(ty, &data, rows, cols);
        for m in [1usize, 64] {
            let xs = &x[..m * cols];
            let mut y = vec![0f32; m * rows];
            let mut scratch = ActivationScratch::new();
            scratch.reserve(m, cols);
            let iters = if m == 1 { 200 } else { 10 };
            pool.install(|| {
                matmul(&w, xs, m, &mut y, &mut scratch).unwrap();
                let t = Instant::now();
                for _ in 0..iters {
                    matmul(&w, xs, m, &mut y, &mut scratch).unwrap();
                }
                let s = t.elapsed().as_secs_f64() / iters as f64;
                println!(
                    "{ty:>5} m {m:>3}: {:8.1} us  {:6.1} GB/s of weights  {:7.1} GMAC/s",
                    s * 1e6,
                    data.len() as f64 / s / 1e9,
                    (m * rows * cols) as f64 / s / 1e9
                );
            });
        }
    }
}
