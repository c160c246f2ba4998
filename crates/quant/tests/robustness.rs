//! Untrusted shapes and buffers: every public entry point returns Ok or an error, never panics,
//! for random types, shapes and buffer lengths (valid and off by a little).

mod common;

use common::Rng;
use torchnative_quant::*;

fn jitter(rng: &mut Rng, n: usize) -> usize {
    match rng.below(4) {
        0 => n,
        1 => n + 1,
        2 => n.saturating_sub(1),
        _ => rng.below(n + 3),
    }
}

#[test]
fn random_shapes_never_panic() {
    let mut rng = Rng::new(41);
    let mut scratch = ActivationScratch::new();
    let mut ok = 0;
    for _ in 0..3000 {
        let ty = GgmlType::ALL[rng.below(GgmlType::ALL.len())];
        let rows = rng.below(5);
        let cols = [0, 1, 31, 32, 64, 255, 256, 512][rng.below(8)];
        let m = rng.below(6);
        let row_bytes = ty.row_bytes(cols).unwrap_or(cols);
        let data_len = jitter(&mut rng, rows * row_bytes);
        let data = rng.bytes(data_len);
        let x_len = jitter(&mut rng, m * cols);
        let x: Vec<f32> = (0..x_len).map(|_| rng.normal(1.0)).collect();
        let mut y = vec![0f32; jitter(&mut rng, m * rows)];
        let w = PackedMatrix::new(ty, &data, rows, cols);
        for path in available_kernel_paths() {
            ok += matmul_with(path, &w, &x, m, &mut y, &mut scratch).is_ok() as usize;
        }
        let mut out = vec![0f32; jitter(&mut rng, cols)];
        let _ = dequantize_row(&w, rng.below(rows + 2), &mut out);
        let mut deq = vec![0f32; jitter(&mut rng, data.len() / ty.type_size() * ty.block_size())];
        let _ = dequantize(ty, &data, &mut deq);
        let mut q = vec![0u8; jitter(&mut rng, x.len() / ty.block_size() * ty.type_size())];
        let _ = quantize(ty, &x, &mut q);
    }
    assert!(ok > 100, "valid cases must also occur ({ok} succeeded)");
}
