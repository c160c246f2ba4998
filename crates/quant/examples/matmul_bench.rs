//! Decode (m = 1) matmul throughput in weight GB/s per kernel path and thread count.
//!
//! `cargo run --release -p torchnative-quant --example matmul_bench [seconds-per-case] [--best]`
//!
//! "hot": one matrix over and over (weights stay in cache); "cold": a rotation of copies
//! totalling > 64 MB (weights stream from memory, as in real decode).

use std::time::{Duration, Instant};

use torchnative_quant::*;

fn random_matrix(ty: GgmlType, rows: usize, cols: usize, seed: u64) -> Vec<u8> {
    let mut s = seed;
    let mut data: Vec<u8> = (0..rows * ty.row_bytes(cols).unwrap_or(0))
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (s >> 56) as u8
        })
        .collect();
    // Finite, small scales: the f16 fields at the start of each block.
    let scale_bytes = if ty == GgmlType::Q4_1 { 4 } else { 2 };
    for block in data.chunks_exact_mut(ty.type_size()) {
        for h in block[..scale_bytes].chunks_exact_mut(2) {
            h.copy_from_slice(&half::f16::from_f32(0.01).to_bits().to_le_bytes());
        }
    }
    data
}

/// CPU time of this process so far (user + system, from /proc; 10 ms ticks), if readable.
fn process_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}

/// (GB/s over wall time, GB/s per CPU-second used): on a shared machine the second shows
/// what the kernel does per core when it runs.
fn bench(
    path: KernelPath,
    ty: GgmlType,
    rows: usize,
    cols: usize,
    copies: usize,
    budget: Duration,
) -> (f64, f64) {
    let mats: Vec<Vec<u8>> = (0..copies)
        .map(|c| random_matrix(ty, rows, cols, c as u64 + 1))
        .collect();
    let x: Vec<f32> = (0..cols)
        .map(|i| ((i * 7919) % 101) as f32 / 50.0 - 1.0)
        .collect();
    let mut y = vec![0f32; rows];
    let mut scratch = ActivationScratch::new();
    scratch.reserve(1, cols);
    let bytes = mats[0].len();
    let mut calls = 0usize;
    let cpu0 = process_cpu_seconds();
    let start = Instant::now();
    while start.elapsed() < budget {
        for m in &mats {
            let w = PackedMatrix::new(ty, m, rows, cols);
            matmul_with(path, &w, &x, 1, &mut y, &mut scratch).expect("matmul");
            calls += 1;
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let cpu = match (cpu0, process_cpu_seconds()) {
        (Some(a), Some(b)) if b > a => b - a,
        _ => f64::NAN,
    };
    std::hint::black_box(&y);
    let gb = (calls * bytes) as f64 / 1e9;
    (gb / secs, gb / cpu)
}

/// Prefill: one `m`-row matmul against `m` single-row matmuls; returns (seconds per batched
/// call, seconds per m decode calls).
fn prefill(
    path: KernelPath,
    ty: GgmlType,
    rows: usize,
    cols: usize,
    m: usize,
    budget: Duration,
) -> (f64, f64) {
    let data = random_matrix(ty, rows, cols, 7);
    let w = PackedMatrix::new(ty, &data, rows, cols);
    let x: Vec<f32> = (0..m * cols)
        .map(|i| ((i * 7919) % 101) as f32 / 50.0 - 1.0)
        .collect();
    let mut y = vec![0f32; m * rows];
    let mut scratch = ActivationScratch::new();
    scratch.reserve(m, cols);
    let time = |f: &mut dyn FnMut()| {
        let start = Instant::now();
        let mut n = 0;
        while start.elapsed() < budget {
            f();
            n += 1;
        }
        start.elapsed().as_secs_f64() / n as f64
    };
    let batched = time(&mut || matmul_with(path, &w, &x, m, &mut y, &mut scratch).expect("matmul"));
    let separate = time(&mut || {
        for i in 0..m {
            let (xi, yi) = (
                &x[i * cols..(i + 1) * cols],
                &mut y[i * rows..(i + 1) * rows],
            );
            matmul_with(path, &w, xi, 1, yi, &mut scratch).expect("matmul");
        }
    });
    (batched, separate)
}

/// Every weight matmul of one SmolLM2-135M decode step (30 layers of Q4_1 q/k/v/o/gate/up/down
/// plus the Q8_0 output head, ~96 MB), repeated for `budget`: tokens/s from matmuls alone.
fn decode_step(budget: Duration) -> (f64, f64) {
    let (hidden, kv, ffn, vocab, layers) = (576, 192, 1536, 49152, 30);
    let q41 = GgmlType::Q4_1;
    let layer_shapes = [
        (hidden, hidden),
        (kv, hidden),
        (kv, hidden),
        (hidden, hidden),
        (ffn, hidden),
        (ffn, hidden),
        (hidden, ffn),
    ];
    let weights: Vec<Vec<Vec<u8>>> = (0..layers)
        .map(|l| {
            layer_shapes
                .iter()
                .enumerate()
                .map(|(j, &(r, c))| random_matrix(q41, r, c, (l * 8 + j) as u64))
                .collect()
        })
        .collect();
    let head = random_matrix(GgmlType::Q8_0, vocab, hidden, 999);
    let mut scratch = ActivationScratch::new();
    scratch.reserve(1, ffn);
    let x: Vec<f32> = (0..ffn)
        .map(|i| ((i * 7919) % 101) as f32 / 50.0 - 1.0)
        .collect();
    let (mut q, mut k, mut v, mut o) = (
        vec![0f32; hidden],
        vec![0f32; kv],
        vec![0f32; kv],
        vec![0f32; hidden],
    );
    let (mut g, mut u, mut logits) = (vec![0f32; ffn], vec![0f32; ffn], vec![0f32; vocab]);
    let cpu0 = process_cpu_seconds();
    let start = Instant::now();
    let mut tokens = 0;
    while start.elapsed() < budget {
        for lw in &weights {
            let m = |j: usize| PackedMatrix::new(q41, &lw[j], layer_shapes[j].0, layer_shapes[j].1);
            matmul_multi(
                &[m(0), m(1), m(2)],
                &x[..hidden],
                1,
                &mut [&mut q, &mut k, &mut v],
                &mut scratch,
            )
            .expect("qkv");
            matmul(&m(3), &x[..hidden], 1, &mut o, &mut scratch).expect("o");
            matmul_multi(
                &[m(4), m(5)],
                &x[..hidden],
                1,
                &mut [&mut g, &mut u],
                &mut scratch,
            )
            .expect("gate/up");
            matmul(&m(6), &x[..ffn], 1, &mut o, &mut scratch).expect("down");
        }
        let w = PackedMatrix::new(GgmlType::Q8_0, &head, vocab, hidden);
        matmul(&w, &x[..hidden], 1, &mut logits, &mut scratch).expect("head");
        tokens += 1;
    }
    std::hint::black_box((&q, &k, &v, &o, &g, &u, &logits));
    let wall = start.elapsed().as_secs_f64();
    let cpu = match (cpu0, process_cpu_seconds()) {
        (Some(a), Some(b)) if b > a => b - a,
        _ => f64::NAN,
    };
    (tokens as f64 / wall, cpu / wall)
}

fn main() {
    let secs: f64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0.5);
    let budget = Duration::from_secs_f64(secs);
    let shapes = [(576, 576), (1536, 576), (576, 1536), (49152, 576)];
    let only_best = std::env::args().any(|a| a == "--best");
    println!(
        "best path: {:?}; rows x cols, GB/s of weights read (m = 1)",
        best_kernel_path()
    );
    for threads in [1, 2] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .expect("pool");
        pool.install(|| {
            for ty in [GgmlType::Q4_1, GgmlType::Q8_0] {
                for (rows, cols) in shapes {
                    let bytes = rows * ty.row_bytes(cols).unwrap_or(0);
                    let copies = (64 << 20) / bytes + 1;
                    let mut line = format!("threads {threads} {ty} {rows:>5}x{cols:<4}");
                    let paths = if only_best { vec![best_kernel_path()] } else { available_kernel_paths() };
                    for path in paths {
                        let (hot, hot_cpu) = bench(path, ty, rows, cols, 1, budget);
                        let (cold, cold_cpu) = bench(path, ty, rows, cols, copies, budget);
                        line += &format!(
                            "  {path:?}: hot {hot:5.1} ({hot_cpu:5.1}/cpu-s) cold {cold:5.1} ({cold_cpu:5.1}/cpu-s)"
                        );
                    }
                    println!("{line}");
                }
            }
            let (tok_s, cpus) = decode_step(budget * 2);
            println!(
                "threads {threads} SmolLM2-135M Q4_1 decode-step matmuls: {tok_s:.0} tokens/s \
                 (matmuls only; {cpus:.2} CPUs busy on average)"
            );
            for ty in [GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q4_0, GgmlType::F16] {
                let (rows, cols) = (1536, 768);
                let (hot, hot_cpu) = bench(best_kernel_path(), ty, rows, cols, 1, budget);
                println!("threads {threads} {ty} {rows}x{cols} decode hot {hot:5.1} ({hot_cpu:5.1}/cpu-s)");
            }
            for ty in [GgmlType::Q4_1, GgmlType::Q8_0, GgmlType::Q4_K] {
                let (b, s) = prefill(best_kernel_path(), ty, 1536, 768, 32, budget);
                println!(
                    "threads {threads} {ty} 1536x768 prefill m=32: {:.2} ms batched vs {:.2} ms as 32 decodes ({:.2}x)",
                    b * 1e3,
                    s * 1e3,
                    s / b
                );
            }
        });
    }
}
