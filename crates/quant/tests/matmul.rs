//! Packed matmul kernels: every kernel path (forced) against the scalar reference and against
//! dequantize-then-dot, for decode (m = 1) and prefill (m > 1), awkward shapes, and errors.
//!
//! Tolerance rule (random data): activations are quantized per block to `d_x * q`, with
//! `|x - d_x q| <= d_x / 2` (plus a hair for the rounding of `x / d_x`), so
//! `|y - y_exact| <= 0.5001 * sum_blocks d_x * sum_block |w| + 1e-4 * sum |w x|`, the second term
//! covering f32 rounding in the per-block scaling and accumulation. Float weight types have no
//! activation quantization: only the second term applies.

mod common;

use common::*;
use torchnative_quant::*;

const MATMUL_TYPES: [GgmlType; 11] = [
    GgmlType::Q4_1,
    GgmlType::Q8_0,
    GgmlType::Q4_0,
    GgmlType::Q4_K,
    GgmlType::Q6_K,
    GgmlType::Q5_K,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::F16,
    GgmlType::BF16,
    GgmlType::F32,
];

fn dequantized(ty: GgmlType, data: &[u8], rows: usize, cols: usize) -> Vec<f32> {
    let mut w = vec![0f32; rows * cols];
    dequantize(ty, data, &mut w).unwrap();
    w
}

/// Weights whose every value is a small multiple of 1/4 and activations that are small
/// integers with one 127 per quantization block: activation scales are exactly 1, and every
/// partial sum any kernel forms is exactly representable, so all paths must agree bit for bit
/// with the exact product.
fn exact_weights(rng: &mut Rng, ty: GgmlType, rows: usize, cols: usize) -> Vec<u8> {
    if ty.block_size() == 1 {
        return (0..rows * cols)
            .flat_map(|_| {
                let v = rng.below(33) as f32 - 16.0;
                match ty {
                    GgmlType::F32 => v.to_le_bytes().to_vec(),
                    GgmlType::F16 => half::f16::from_f32(v).to_bits().to_le_bytes().to_vec(),
                    _ => half::bf16::from_f32(v).to_bits().to_le_bytes().to_vec(),
                }
            })
            .collect();
    }
    let blocks = rows * cols / ty.block_size();
    let mut data = rng.bytes(blocks * ty.type_size());
    for block in data.chunks_exact_mut(ty.type_size()) {
        for &off in f16_scale_offsets(ty) {
            let sign = if rng.below(2) == 0 { 1.0 } else { -1.0 };
            let v = sign * [0.25f32, 0.5, 1.0, 2.0][rng.below(4)];
            block[off..off + 2].copy_from_slice(&half::f16::from_f32(v).to_bits().to_le_bytes());
        }
        if ty == GgmlType::Q6_K {
            // Keep the signed scales within +-32 so the exact sums stay below 2^24.
            for s in &mut block[192..208] {
                *s = ((*s & 0x3f) as i8 - 32) as u8;
            }
        }
    }
    data
}

fn exact_acts(rng: &mut Rng, ty: GgmlType, m: usize, cols: usize) -> Vec<f32> {
    let group = if ty.block_size() == 256 { 256 } else { 32 };
    (0..m * cols)
        .map(|i| {
            if i % group == 0 {
                127.0
            } else {
                rng.below(31) as f32 - 15.0
            }
        })
        .collect()
}

fn reference_dot(w: &[f32], x: &[f32], m: usize, rows: usize, cols: usize) -> Vec<f64> {
    let mut y = vec![0f64; m * rows];
    for i in 0..m {
        for r in 0..rows {
            y[i * rows + r] = (0..cols)
                .map(|j| w[r * cols + j] as f64 * x[i * cols + j] as f64)
                .sum();
        }
    }
    y
}

fn run(path: KernelPath, w: &PackedMatrix, x: &[f32], m: usize) -> Vec<f32> {
    let mut y = vec![f32::NAN; m * w.rows];
    let mut scratch = ActivationScratch::new();
    matmul_with(path, w, x, m, &mut y, &mut scratch).unwrap();
    y
}

fn shapes(ty: GgmlType) -> Vec<(usize, usize)> {
    if ty.block_size() == 256 {
        vec![(1, 256), (7, 512), (33, 256)]
    } else if ty.block_size() == 1 {
        // Float rows need no blocks: column counts off the 16-wide SIMD step too.
        vec![(1, 32), (5, 7), (9, 40), (33, 576)]
    } else {
        vec![(1, 32), (7, 96), (33, 576), (130, 64)]
    }
}

#[test]
fn all_paths_exact_on_integer_data() {
    let mut rng = Rng::new(7);
    let paths = available_kernel_paths();
    println!("kernel paths: {paths:?}");
    for ty in MATMUL_TYPES {
        assert!(supports_matmul(ty));
        for (rows, cols) in shapes(ty) {
            let data = exact_weights(&mut rng, ty, rows, cols);
            let w = PackedMatrix::new(ty, &data, rows, cols);
            let wf = dequantized(ty, &data, rows, cols);
            // m >= 16 takes the prefill GEMM on AVX-512 VNNI (ragged last tile included).
            for m in [1, 3, 4, 5, 9, 16, 21, 40] {
                let x = exact_acts(&mut rng, ty, m, cols);
                let want: Vec<f32> = reference_dot(&wf, &x, m, rows, cols)
                    .iter()
                    .map(|&v| v as f32)
                    .collect();
                for &path in &paths {
                    let got = run(path, &w, &x, m);
                    assert_bits_eq(
                        &format!("{ty} {path:?} rows {rows} cols {cols} m {m}"),
                        &got,
                        &want,
                    );
                }
            }
        }
    }
}

/// Random scales and values: each path is compared with dequantize-then-dot within the rule
/// above, and prefill (m > 1) must equal row-by-row decode exactly.
fn check_random(ty: GgmlType, data: &[u8], rows: usize, cols: usize, rng: &mut Rng, what: &str) {
    let w = PackedMatrix::new(ty, data, rows, cols);
    let wf = dequantized(ty, data, rows, cols);
    let group = if ty.block_size() == 256 { 256 } else { 32 };
    for m in [1, 2, 5, 19] {
        let x: Vec<f32> = (0..m * cols).map(|_| rng.normal(1.0)).collect();
        let want = reference_dot(&wf, &x, m, rows, cols);
        // The GEMM (m >= 16 on x86, and with I8MM on aarch64): every path's GEMM gives the
        // same bits (AVX2 tiles = VNNI tiles), and a row's result does not depend on m, its
        // tile or its lane.
        let mut gemm_bits: Option<(KernelPath, Vec<f32>)> = None;
        for path in available_kernel_paths() {
            let got = run(path, &w, &x, m);
            let gemm_path = matches!(
                path,
                KernelPath::Avx2
                    | KernelPath::Avx512
                    | KernelPath::Avx512Vnni
                    | KernelPath::NeonI8mm
            );
            if m >= 16 && gemm_path {
                match &gemm_bits {
                    Some((first, bits)) => assert_bits_eq(
                        &format!("{what} {ty} GEMM m {m}: {path:?} vs {first:?}"),
                        &got,
                        bits,
                    ),
                    None => gemm_bits = Some((path, got.clone())),
                }
                // 16 rows (one full tile, not m) from row 3 on, wrapping.
                let moved: Vec<f32> = (0..16)
                    .flat_map(|j| x[(j + 3) % m * cols..][..cols].iter().copied())
                    .collect();
                let got16 = run(path, &w, &moved, 16);
                for j in 0..16 {
                    let i = (j + 3) % m;
                    assert_bits_eq(
                        &format!("{what} {ty} {path:?} row {i} in a GEMM of 16 (lane {j}) vs {m}"),
                        &got16[j * rows..(j + 1) * rows],
                        &got[i * rows..(i + 1) * rows],
                    );
                }
            }
            // The same rows in another order (other tiles and lanes of the GEMM).
            let shift = 5 % m;
            let rotated: Vec<f32> = (0..m)
                .flat_map(|i| x[(i + shift) % m * cols..][..cols].iter().copied())
                .collect();
            let got_rotated = run(path, &w, &rotated, m);
            for i in 0..m {
                // Each row's result depends on that row alone, not on its batch position.
                assert_bits_eq(
                    &format!("{what} {ty} {path:?} m {m} row {i} moved in the batch"),
                    &got[i * rows..(i + 1) * rows],
                    &got_rotated[(i + m - shift) % m * rows..][..rows],
                );
                // Row kernels: decode of this activation row alone gives the same floats as
                // prefill. (The GEMM sums blocks in another order: the rule below covers it.)
                if m < 16 {
                    let single = run(path, &w, &x[i * cols..(i + 1) * cols], 1);
                    assert_bits_eq(
                        &format!("{what} {ty} {path:?} prefill row {i} vs decode"),
                        &got[i * rows..(i + 1) * rows],
                        &single,
                    );
                }
                for r in 0..rows {
                    let xs = &x[i * cols..(i + 1) * cols];
                    let ws = &wf[r * cols..(r + 1) * cols];
                    let abs_sum: f64 = xs.iter().zip(ws).map(|(a, b)| (a * b).abs() as f64).sum();
                    let quant: f64 = if ty.block_size() == 1 {
                        0.0
                    } else {
                        xs.chunks(group)
                            .zip(ws.chunks(group))
                            .map(|(xb, wb)| {
                                let dx = xb.iter().fold(0f32, |a, v| a.max(v.abs())) as f64 / 127.0;
                                0.5001 * dx * wb.iter().map(|v| v.abs() as f64).sum::<f64>()
                            })
                            .sum()
                    };
                    let tol = quant + 1e-4 * abs_sum + 1e-6;
                    let (g, e) = (got[i * rows + r] as f64, want[i * rows + r]);
                    assert!(
                        (g - e).abs() <= tol,
                        "{what} {ty} {path:?} m {m} y[{i},{r}] = {g}, exact {e}, tol {tol}"
                    );
                }
            }
        }
    }
}

#[test]
fn all_paths_within_tolerance_on_random_blocks() {
    let mut rng = Rng::new(11);
    for ty in MATMUL_TYPES {
        for (rows, cols) in shapes(ty) {
            let mut data = random_blocks(&mut rng, ty, rows * cols / ty.block_size());
            // Realistic magnitudes: scales around 1e-2, float weights within +-1.
            for block in data.chunks_exact_mut(ty.type_size()) {
                for &off in f16_scale_offsets(ty) {
                    let v = rng.uniform(-0.02, 0.02);
                    block[off..off + 2]
                        .copy_from_slice(&half::f16::from_f32(v).to_bits().to_le_bytes());
                }
            }
            if ty.block_size() == 1 {
                data = exact_weights(&mut rng, ty, rows, cols);
                let wf: Vec<f32> = dequantized(ty, &data, rows, cols)
                    .iter()
                    .map(|v| v / 16.0 + rng.uniform(-0.01, 0.01))
                    .collect();
                data = match ty {
                    GgmlType::F32 => wf.iter().flat_map(|v| v.to_le_bytes()).collect(),
                    GgmlType::F16 => wf
                        .iter()
                        .flat_map(|v| half::f16::from_f32(*v).to_bits().to_le_bytes())
                        .collect(),
                    _ => wf
                        .iter()
                        .flat_map(|v| half::bf16::from_f32(*v).to_bits().to_le_bytes())
                        .collect(),
                };
            }
            check_random(ty, &data, rows, cols, &mut rng, "random");
        }
    }
}

#[test]
fn all_paths_within_tolerance_on_model_tensors() {
    let Some(python) = oracle_python() else {
        return;
    };
    let Some(model) = default_model() else { return };
    let dir = temp_dir("matmul-model");
    run_oracle(&python, "model_tensors.py", &[&model, &dir]);
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap();
    let mut rng = Rng::new(13);
    let mut covered = Vec::new();
    for item in manifest.as_array().unwrap() {
        let ty = GgmlType::from_name(item["type"].as_str().unwrap()).unwrap();
        let (rows, cols) = (
            item["rows"].as_u64().unwrap() as usize,
            item["cols"].as_u64().unwrap() as usize,
        );
        if ty == GgmlType::F32 || rows < 2 {
            continue; // norms: vectors, not matrices
        }
        let name = item["name"].as_str().unwrap();
        let data = std::fs::read(dir.join(format!("{name}.bin"))).unwrap();
        // An awkward number of rows from the middle of the tensor.
        let take = 77.min(rows);
        let start = (rows - take) / 2;
        let row_bytes = ty.row_bytes(cols).unwrap();
        check_random(
            ty,
            &data[start * row_bytes..(start + take) * row_bytes],
            take,
            cols,
            &mut rng,
            name,
        );
        covered.push(ty);
    }
    assert!(covered.contains(&GgmlType::Q4_1) && covered.contains(&GgmlType::Q8_0));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn dequantize_row_matches_whole_tensor() {
    let mut rng = Rng::new(17);
    for ty in [
        GgmlType::Q8_0,
        GgmlType::Q4_1,
        GgmlType::Q6_K,
        GgmlType::F16,
    ] {
        let (rows, cols) = (5, 256);
        let data = random_blocks(&mut rng, ty, rows * cols / ty.block_size());
        let whole = dequantized(ty, &data, rows, cols);
        let w = PackedMatrix::new(ty, &data, rows, cols);
        let mut out = vec![0f32; cols];
        for r in 0..rows {
            dequantize_row(&w, r, &mut out).unwrap();
            assert_bits_eq(
                &format!("{ty} row {r}"),
                &out,
                &whole[r * cols..(r + 1) * cols],
            );
        }
        assert!(matches!(
            dequantize_row(&w, rows, &mut out),
            Err(QuantError::BadShape { .. })
        ));
    }
}

#[test]
fn matmul_rejects_bad_inputs_with_errors() {
    let data = vec![0u8; 4 * 20 * 2];
    let w = PackedMatrix::new(GgmlType::Q4_1, &data, 4, 64);
    let mut s = ActivationScratch::new();
    let x = vec![0f32; 64];
    let mut y = vec![0f32; 4];
    assert!(matmul(&w, &x, 1, &mut y, &mut s).is_ok());
    let err = matmul(&w, &x[..63], 1, &mut y, &mut s).unwrap_err();
    assert!(
        err.to_string().contains("63") && err.to_string().contains("64"),
        "{err}"
    );
    assert!(matches!(
        matmul(&w, &x, 1, &mut y[..3], &mut s),
        Err(QuantError::LengthMismatch { .. })
    ));
    let short = PackedMatrix {
        data: &data[..159],
        ..w
    };
    assert!(matches!(
        matmul(&short, &x, 1, &mut y, &mut s),
        Err(QuantError::LengthMismatch { .. })
    ));
    let ragged = PackedMatrix { cols: 48, ..w };
    assert!(matches!(
        matmul(&ragged, &x[..48], 1, &mut y, &mut s),
        Err(QuantError::PartialElements { .. })
    ));
    let q2k = PackedMatrix::new(GgmlType::Q2_K, &data, 1, 256);
    let err = matmul(&q2k, &vec![0f32; 256], 1, &mut y[..1], &mut s).unwrap_err();
    assert!(err.to_string().contains("Q2_K"), "{err}");
    assert!(!supports_matmul(GgmlType::IQ2_XXS));
    let huge = PackedMatrix {
        rows: usize::MAX / 2,
        ..w
    };
    assert!(matmul(&huge, &x, 1, &mut y, &mut s).is_err());
    assert!(matmul(&w, &x, usize::MAX, &mut y, &mut s).is_err());
}

#[test]
fn dequantize_rejects_bad_inputs_with_errors() {
    let mut out = vec![0f32; 64];
    let err = dequantize(GgmlType::Q4_1, &[0u8; 39], &mut out).unwrap_err();
    assert!(
        err.to_string().contains("39") && err.to_string().contains("20"),
        "{err}"
    );
    let err = dequantize(GgmlType::Q4_1, &[0u8; 40], &mut out[..63]).unwrap_err();
    assert!(
        err.to_string().contains("63") && err.to_string().contains("64"),
        "{err}"
    );
    let err = dequantize(GgmlType::IQ2_XXS, &[0u8; 66], &mut vec![0f32; 256]).unwrap_err();
    assert!(err.to_string().contains("IQ2_XXS"), "{err}");
    assert!(dequantize(GgmlType::Q4_1, &[], &mut []).is_ok());
}

#[test]
fn multi_matmul_equals_separate_matmuls() {
    let mut rng = Rng::new(31);
    let cols = 512;
    for (types, m) in [
        (vec![GgmlType::Q4_1, GgmlType::Q8_0, GgmlType::Q4_1], 1),
        (vec![GgmlType::Q4_K, GgmlType::Q6_K], 5),
        (vec![GgmlType::F16, GgmlType::F32], 2),
    ] {
        let shapes: Vec<(GgmlType, usize, Vec<u8>)> = types
            .iter()
            .enumerate()
            .map(|(j, &ty)| {
                let rows = 64 * (j + 1) + 3;
                (ty, rows, exact_weights(&mut rng, ty, rows, cols))
            })
            .collect();
        let ws: Vec<PackedMatrix> = shapes
            .iter()
            .map(|(ty, rows, data)| PackedMatrix::new(*ty, data, *rows, cols))
            .collect();
        let x: Vec<f32> = (0..m * cols).map(|_| rng.normal(1.0)).collect();
        for path in available_kernel_paths() {
            let mut outs: Vec<Vec<f32>> = ws.iter().map(|w| vec![f32::NAN; m * w.rows]).collect();
            let mut ys: Vec<&mut [f32]> = outs.iter_mut().map(|v| v.as_mut_slice()).collect();
            matmul_multi_with(path, &ws, &x, m, &mut ys, &mut ActivationScratch::new()).unwrap();
            for (w, got) in ws.iter().zip(&outs) {
                assert_bits_eq(
                    &format!("multi {} {path:?}", w.ty),
                    got,
                    &run(path, w, &x, m),
                );
            }
        }
    }
}

#[test]
fn multi_matmul_rejects_mismatches() {
    let a = vec![0u8; 2 * 144];
    let b = vec![0u8; 2 * 8 * 20];
    let q4k = PackedMatrix::new(GgmlType::Q4_K, &a, 1, 512);
    let q41 = PackedMatrix::new(GgmlType::Q4_1, &b, 2, 256);
    let x = vec![0f32; 512];
    let (mut y1, mut y2) = (vec![0f32; 1], vec![0f32; 2]);
    let mut s = ActivationScratch::new();
    let err = matmul_multi(&[q4k, q41], &x, 1, &mut [&mut y1, &mut y2], &mut s).unwrap_err();
    assert!(matches!(err, QuantError::IncompatibleTypes { .. }), "{err}");
    let q41_512 = PackedMatrix {
        cols: 512,
        rows: 1,
        ..q41
    };
    assert!(matmul_multi(&[q41_512, q41], &x, 1, &mut [&mut y1, &mut y2], &mut s).is_err());
    assert!(matmul_multi(&[q41_512], &x, 1, &mut [&mut y1, &mut y2], &mut s).is_err());
    assert!(matmul_multi(&[], &x, 1, &mut [], &mut s).is_ok());
}

#[test]
fn nan_activations_give_nan_outputs() {
    let mut rng = Rng::new(37);
    for ty in MATMUL_TYPES {
        let (rows, cols) = (9, 512);
        let data = exact_weights(&mut rng, ty, rows, cols);
        let w = PackedMatrix::new(ty, &data, rows, cols);
        let mut x: Vec<f32> = (0..2 * cols).map(|_| rng.normal(1.0)).collect();
        x[cols + 300] = f32::NAN; // second activation row only
        for path in available_kernel_paths() {
            let y = run(path, &w, &x, 2);
            assert!(
                y[..rows].iter().all(|v| v.is_finite()),
                "{ty} {path:?}: clean row"
            );
            assert!(
                y[rows..].iter().all(|v| v.is_nan()),
                "{ty} {path:?}: NaN row gave {:?}",
                &y[rows..]
            );
        }
    }
}

/// The interleaved copy (16 weight rows per group, lanes = rows) is read by the few-rows
/// kernels of the paths that have them and rebuilt into the file's rows by the GEMM: every
/// path, every m (each of the kernel's 8 / 4 / 2 / 1-row chunks and the GEMM), ragged last
/// groups and odd block counts must give the bits the file's layout gives.
#[test]
fn interleaved_copy_gives_the_same_bits_on_every_path() {
    let mut rng = Rng::new(11);
    for ty in [GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q8_0] {
        for (rows, cols) in [(1, 32), (7, 96), (33, 576), (130, 64), (48, 160)] {
            let data = exact_weights(&mut rng, ty, rows, cols);
            let w = PackedMatrix::new(ty, &data, rows, cols);
            let iw = InterleavedMatrix::build(&w).unwrap();
            assert_eq!(iw.ty(), ty);
            assert!(
                iw.bytes() >= data.len(),
                "{ty}: {} < {}",
                iw.bytes(),
                data.len()
            );
            let wi = PackedMatrix {
                interleaved: Some(&iw),
                ..w
            };
            // Row lookups (embedding tables) read the copy too.
            let (mut want, mut got) = (vec![0f32; cols], vec![0f32; cols]);
            for r in 0..rows {
                dequantize_row(&w, r, &mut want).unwrap();
                dequantize_row(&wi, r, &mut got).unwrap();
                assert_bits_eq(&format!("{ty} row {r} of {rows}x{cols}"), &got, &want);
            }
            for m in 1..=20 {
                let x: Vec<f32> = (0..m * cols).map(|_| rng.normal(1.0)).collect();
                let want = run(KernelPath::Scalar, &w, &x, m);
                for path in available_kernel_paths() {
                    let got = run(path, &wi, &x, m);
                    let what = format!("{ty} {path:?} rows {rows} cols {cols} m {m}");
                    assert_bits_eq(&what, &got, &want);
                }
            }
        }
    }
}

/// The largest products the few-rows kernels can meet: every code at its maximum (all bits
/// set) against activations that quantize to +-127, of one sign and of alternating signs. The
/// AVX2 kernels sum a block's byte pairs in 16 bits; a saturating sum would show here.
#[test]
fn interleaved_kernels_hold_the_largest_block_sums_exactly() {
    for ty in [GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q8_0] {
        let (rows, cols) = (20, 128);
        let mut data = vec![0xffu8; rows * ty.row_bytes(cols).unwrap()];
        for block in data.chunks_exact_mut(ty.type_size()) {
            for &off in f16_scale_offsets(ty) {
                block[off..off + 2].copy_from_slice(&half::f16::from_f32(0.5).to_le_bytes());
            }
        }
        let w = PackedMatrix::new(ty, &data, rows, cols);
        let iw = InterleavedMatrix::build(&w).unwrap();
        let wi = PackedMatrix {
            interleaved: Some(&iw),
            ..w
        };
        // Past 8 rows: the 8-row kernels (and a second 6-row pattern after them).
        let m = 12;
        let x: Vec<f32> = (0..m * cols)
            .map(|k| match (k / cols) % 6 {
                0 => 1.0,
                1 => -1.0,
                2 => [1.0, -1.0][k % 2],
                3 => [-1.0, 1.0][k % 2],
                4 => [1.0, 1.0, -1.0, -1.0][k % 4],
                _ => 3.0 * [1.0, -1.0][(k / 16) % 2],
            })
            .collect();
        let want = run(KernelPath::Scalar, &w, &x, m);
        assert!(want.iter().all(|v| v.is_finite()), "{ty}: {want:?}");
        for path in available_kernel_paths() {
            for mi in 1..=m {
                let got = run(path, &wi, &x[..mi * cols], mi);
                assert_bits_eq(&format!("{ty} {path:?} m {mi}"), &got, &want[..mi * rows]);
            }
        }
    }
}

#[test]
fn interleaving_refuses_other_types_and_other_matrices() {
    let mut rng = Rng::new(5);
    let data = exact_weights(&mut rng, GgmlType::Q4_K, 2, 256);
    let q4k = PackedMatrix::new(GgmlType::Q4_K, &data, 2, 256);
    let err = InterleavedMatrix::build(&q4k).unwrap_err().to_string();
    assert!(err.contains("Q4_K") && err.contains("interleav"), "{err}");
    assert!(InterleavedMatrix::new(&q4k).unwrap().is_none());

    let data = exact_weights(&mut rng, GgmlType::Q4_1, 32, 64);
    let w = PackedMatrix::new(GgmlType::Q4_1, &data, 32, 64);
    let built = InterleavedMatrix::new(&w).unwrap();
    assert_eq!(
        built.is_some(),
        matches!(
            best_kernel_path(),
            KernelPath::Avx512Vnni | KernelPath::Avx2 | KernelPath::Avx512
        ),
        "interleaved exactly when the best path reads it"
    );
    let iw = InterleavedMatrix::build(&w).unwrap();
    // A copy of another matrix (half the rows) is refused, not read out of bounds.
    let half = PackedMatrix {
        data: &data[..data.len() / 2],
        rows: 16,
        interleaved: Some(&iw),
        ..w
    };
    let mut y = vec![0f32; 16];
    let err = matmul(&half, &[0.5; 64], 1, &mut y, &mut ActivationScratch::new())
        .unwrap_err()
        .to_string();
    assert!(err.contains("interleaved"), "{err}");
}
