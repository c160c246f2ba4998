//! Time per matmul call over activation rows m (decode batches, prefill chunks): SmolLM2
//! shapes, 2 threads, the file's layout beside the interleaved copy (where this CPU's kernels
//! read one).
//! `cargo run --release -p torchnative-quant --example batch_sweep`
use std::time::{Duration, Instant};
use torchnative_quant::*;

fn main() {
    for (ty, rows, cols) in [
        (GgmlType::Q4_1, 1536usize, 576usize),
        (GgmlType::Q4_1, 576, 1536),
        (GgmlType::Q8_0, 49152, 576),
    ] {
        let wf: Vec<f32> = (0..rows * cols)
            .map(|i| ((i * 104729) % 997) as f32 / 498.0 - 1.0)
            .collect();
        let mut data = vec![0u8; rows * ty.row_bytes(cols).unwrap()];
        quantize(ty, &wf, &mut data).unwrap();
        let file = PackedMatrix::new(ty, &data, rows, cols);
        let iw = InterleavedMatrix::new(&file).unwrap();
        let interleaved = PackedMatrix {
            interleaved: iw.as_ref(),
            ..file
        };
        for m in [1usize, 2, 4, 6, 8, 12, 16, 24, 32, 64, 128, 512] {
            for (layout, w) in [("file", &file), ("interleaved", &interleaved)] {
                if layout == "interleaved" && iw.is_none() {
                    continue;
                }
                let x: Vec<f32> = (0..m * cols)
                    .map(|i| ((i * 7919) % 1000) as f32 / 500.0 - 1.0)
                    .collect();
                let mut y = vec![0f32; m * rows];
                let mut s = ActivationScratch::new();
                s.reserve(m, cols);
                let t0 = Instant::now();
                let mut n = 0;
                while t0.elapsed() < Duration::from_millis(300) {
                    matmul(w, &x, m, &mut y, &mut s).unwrap();
                    n += 1;
                }
                let us = t0.elapsed().as_secs_f64() * 1e6 / n as f64;
                println!(
                    "{ty:?} {rows}x{cols} m={m:3} {layout:>11} {us:8.1} us/call {:7.2} us/row",
                    us / m as f64
                );
            }
        }
    }
}
