//! Prefill (m = 512) packed matmul throughput per kernel path and weight type, in GMAC/s:
//! `cargo run --release -p torchnative-quant --example gemm_paths [threads]`.
//! Every path this CPU runs, so the GEMM tiles (AVX2, AVX-VNNI, AVX-512 VNNI; I8MM on aarch64)
//! and the row kernels can be compared on one machine in one run.
use std::time::{Duration, Instant};

use torchnative_quant::*;

fn main() {
    let threads: usize = std::env::args().nth(1).map_or(2, |a| a.parse().unwrap());
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap();
    // SmolLM2's MLP up projection, a 512-token prompt.
    let (m, rows, cols) = (512usize, 1536usize, 576usize);
    let x: Vec<f32> = (0..m * cols)
        .map(|i| ((i * 7919) % 1000) as f32 / 500.0 - 1.0)
        .collect();
    println!("{:8} {:>12}", "type", "path GMAC/s");
    for ty in [
        GgmlType::Q4_0,
        GgmlType::Q4_1,
        GgmlType::Q8_0,
        GgmlType::Q5_0,
    ] {
        let wf: Vec<f32> = (0..rows * cols)
            .map(|i| ((i * 104729) % 997) as f32 / 498.0 - 1.0)
            .collect();
        let mut data = vec![0u8; rows * ty.row_bytes(cols).unwrap()];
        quantize(ty, &wf, &mut data).unwrap();
        let w = PackedMatrix::new(ty, &data, rows, cols);
        let mut line = format!("{:8}", ty.to_string());
        for path in available_kernel_paths() {
            let mut y = vec![0f32; m * rows];
            let mut scratch = ActivationScratch::new();
            let mut run =
                || pool.install(|| matmul_with(path, &w, &x, m, &mut y, &mut scratch).unwrap());
            run();
            let (mut best, mut spent) = (f64::MAX, Duration::ZERO);
            while spent < Duration::from_millis(400) {
                let t = Instant::now();
                run();
                let e = t.elapsed();
                best = best.min(e.as_secs_f64());
                spent += e;
            }
            let gmac = (m * rows * cols) as f64 / best / 1e9;
            line += &format!("  {path:?} {gmac:.1}");
        }
        println!("{line}");
    }
}
