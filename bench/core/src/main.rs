//! Benchmark of the torchnative-core kernels beside torch on the same machine, same run.
//!
//! `cargo run --release -p torchnative-bench-core -- --threads 2 [--quick] [--no-torch] [--filter NAME]`
//! Prints a table and a JSON object (last line). torch numbers come from
//! `bench/core/torch_bench.py` run with `TORCHNATIVE_ORACLE_PYTHON` (or the default oracle
//! venv path); without it the torch column is empty.

use half::{bf16, f16};
use serde_json::{json, Value};
use std::hint::black_box;
use std::process::Command;
use std::time::{Duration, Instant};
use torchnative_core::kernels;

struct Options {
    threads: usize,
    quick: bool,
    torch: bool,
    /// Only run our benchmarks whose name contains this.
    filter: String,
}

fn parse_args() -> Result<Options, String> {
    let mut opts = Options {
        threads: 2,
        quick: false,
        torch: true,
        filter: String::new(),
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--threads" => {
                let v = args.next().ok_or("--threads needs a value")?;
                opts.threads = v
                    .parse()
                    .ok()
                    .filter(|&n: &usize| n >= 1)
                    .ok_or_else(|| format!("--threads {v:?}: expected an integer >= 1"))?;
            }
            "--quick" => opts.quick = true,
            "--filter" => opts.filter = args.next().ok_or("--filter needs a value")?,
            "--no-torch" => opts.torch = false,
            other => {
                return Err(format!(
                "unknown argument {other:?} (use --threads N, --quick, --no-torch, --filter NAME)"
            ))
            }
        }
    }
    Ok(opts)
}

/// Best per-call time over 7 batches, each batch at least `min_batch` long (min filters out
/// the noise of a shared machine).
fn best_time(min_batch: Duration, mut f: impl FnMut()) -> f64 {
    f();
    let t0 = Instant::now();
    f();
    let once = t0.elapsed().as_secs_f64().max(1e-7);
    let reps = ((min_batch.as_secs_f64() / once) as usize).max(1);
    let mut best = f64::INFINITY;
    for _ in 0..7 {
        let t0 = Instant::now();
        for _ in 0..reps {
            f();
        }
        best = best.min(t0.elapsed().as_secs_f64() / reps as f64);
    }
    best
}

fn random_vec(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// Read bandwidth: a streaming sum over 1 GiB split over `threads` OS threads.
fn read_bandwidth_gbps(threads: usize, min_batch: Duration) -> f64 {
    let data = random_vec(256 << 20, 7);
    let bytes = (data.len() * 4) as f64;
    let chunk = data.len().div_ceil(threads);
    let t = best_time(min_batch, || {
        let total: f32 = std::thread::scope(|s| {
            let handles: Vec<_> = data
                .chunks(chunk)
                .map(|c| {
                    s.spawn(move || {
                        // 8 independent lanes so the sum is load-bound, not add-latency-bound.
                        let mut acc = [0f32; 16];
                        for block in c.chunks_exact(16) {
                            for (a, v) in acc.iter_mut().zip(block) {
                                *a += v;
                            }
                        }
                        acc.iter().sum::<f32>()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap_or(0.0)).sum()
        });
        black_box(total);
    });
    bytes / t / 1e9
}

fn run_torch(opts: &Options) -> Option<Value> {
    if !opts.torch {
        return None;
    }
    let python = std::env::var("TORCHNATIVE_ORACLE_PYTHON").unwrap_or_else(|_| {
        let home = std::env::var("HOME").unwrap_or_default();
        format!("{home}/.cache/torchnative/oracle-venv/bin/python")
    });
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/torch_bench.py");
    let mut cmd = Command::new(&python);
    cmd.arg(script)
        .arg("--threads")
        .arg(opts.threads.to_string());
    if opts.quick {
        cmd.arg("--quick");
    }
    match cmd.output() {
        Ok(out) if out.status.success() => serde_json::from_slice(&out.stdout)
            .map_err(|e| eprintln!("torch_bench.py printed invalid JSON: {e}"))
            .ok(),
        Ok(out) => {
            eprintln!(
                "torch_bench.py failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            None
        }
        Err(e) => {
            eprintln!("cannot run {python}: {e}");
            None
        }
    }
}

/// (m, k, n) of the prefill Linear benchmark.
const PREFILL: (usize, usize, usize) = (64, 576, 1536);

const GEMV_SHAPES: &[(usize, usize)] = &[
    (576, 1536),
    (1536, 576),
    (2048, 8192),
    (8192, 2048),
    (49152, 576),
];

fn main() {
    let opts = match parse_args() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    };
    if let Err(e) = kernels::set_num_threads(opts.threads) {
        eprintln!("error: {e}");
        std::process::exit(2);
    }
    let batch = Duration::from_millis(if opts.quick { 20 } else { 100 });
    let bw = read_bandwidth_gbps(opts.threads, batch);
    // Two interleaved passes each (ours, torch, ours, torch), best of both: on a shared
    // machine load comes and goes, and this gives both sides the same chances.
    let mut ours = measure_ours(batch, &opts.filter);
    let mut torch = run_torch(&opts);
    if !opts.quick {
        ours = best_of(&ours, &measure_ours(batch, &opts.filter), "");
        torch = match (torch, run_torch(&opts)) {
            (Some(a), Some(b)) => Some(best_of(&a, &b, "")),
            (a, b) => a.or(b),
        };
    }
    let bw = if opts.quick {
        bw
    } else {
        bw.max(read_bandwidth_gbps(opts.threads, batch))
    };
    if let Value::Object(map) = &mut ours {
        map.insert("isa".into(), json!(kernels::active_isa().name()));
        map.insert("threads".into(), json!(kernels::num_threads()));
        map.insert("read_bandwidth_gbps".into(), json!(bw));
    }
    print_table(&ours, torch.as_ref());
    println!("{}", json!({"torchnative": ours, "torch": torch}));
}

/// Merges two measurements of the same benchmarks keeping the better number of each:
/// the larger rate (`*gbps`, `*gflops`), the smaller time (`*us`).
fn best_of(a: &Value, b: &Value, key: &str) -> Value {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => Value::Object(
            x.iter()
                .map(|(k, v)| (k.clone(), y.get(k).map_or(v.clone(), |w| best_of(v, w, k))))
                .collect(),
        ),
        (Value::Number(_), Value::Number(_)) => {
            let (x, y) = (
                a.as_f64().unwrap_or(f64::NAN),
                b.as_f64().unwrap_or(f64::NAN),
            );
            if key.ends_with("gbps") || key.ends_with("gflops") {
                json!(x.max(y))
            } else if key.ends_with("us") {
                json!(x.min(y))
            } else {
                a.clone()
            }
        }
        _ => a.clone(),
    }
}

/// One pass over every benchmark of our kernels.
fn measure_ours(batch: Duration, filter: &str) -> Value {
    let mut ours = serde_json::Map::new();
    let want = |name: &str| name.contains(filter);
    if want("matmul") {
        let (a, b) = (random_vec(1 << 20, 1), random_vec(1 << 20, 2));
        let mut c = vec![0f32; 1 << 20];
        let t = best_time(batch, || {
            kernels::matmul_f32(
                1024, 1024, 1024, &a, 1024, 1, &b, 1024, 1, &mut c, 1024, 0.0,
            )
        });
        ours.insert(
            "matmul_1024_gflops".into(),
            json!(2.0 * 1024f64.powi(3) / t / 1e9),
        );
    }

    let mut gemv = serde_json::Map::new();
    for &(n, k) in GEMV_SHAPES
        .iter()
        .filter(|(n, k)| want(&format!("gemv {n}x{k}")))
    {
        let x = random_vec(k, 3);
        let w32 = random_vec(n * k, 4);
        let mut y = vec![0f32; n];
        let t = best_time(batch, || {
            kernels::linear_f32(&x, &w32, None, &mut y, 1, k, n)
        });
        gemv.insert(
            format!("{n}x{k}_f32"),
            json!({"us": t * 1e6, "gbps": (n * k * 4) as f64 / t / 1e9}),
        );
        let w16: Vec<f16> = w32.iter().map(|&v| f16::from_f32(v)).collect();
        let t = best_time(batch, || {
            kernels::linear_f16(&x, &w16, None, &mut y, 1, k, n)
        });
        gemv.insert(
            format!("{n}x{k}_f16"),
            json!({"us": t * 1e6, "gbps": (n * k * 2) as f64 / t / 1e9}),
        );
        drop(w16);
        let wb: Vec<bf16> = w32.iter().map(|&v| bf16::from_f32(v)).collect();
        let t = best_time(batch, || {
            kernels::linear_bf16(&x, &wb, None, &mut y, 1, k, n)
        });
        gemv.insert(
            format!("{n}x{k}_bf16"),
            json!({"us": t * 1e6, "gbps": (n * k * 2) as f64 / t / 1e9}),
        );
    }
    ours.insert("gemv".into(), Value::Object(gemv));

    // Prefill-sized Linear (m = 64 tokens): f32 through the gemm crate, half weights through
    // the register-tile kernel.
    if want("prefill") {
        let (m, k, n) = PREFILL;
        let x = random_vec(m * k, 8);
        let w32 = random_vec(n * k, 9);
        let wb: Vec<bf16> = w32.iter().map(|&v| bf16::from_f32(v)).collect();
        let mut y = vec![0f32; m * n];
        let flops = 2.0 * (m * k * n) as f64;
        let t = best_time(batch, || {
            kernels::linear_f32(&x, &w32, None, &mut y, m, k, n)
        });
        ours.insert("prefill_f32_gflops".into(), json!(flops / t / 1e9));
        let t = best_time(batch, || {
            kernels::linear_bf16(&x, &wb, None, &mut y, m, k, n)
        });
        ours.insert("prefill_bf16_gflops".into(), json!(flops / t / 1e9));
    }

    let x = random_vec(32 * 4096, 5);
    let w = random_vec(4096, 6);
    let mut buf = x.clone();
    if want("softmax") {
        let t = best_time(batch, || {
            buf.copy_from_slice(&x);
            kernels::softmax_rows_f32(&mut buf, 4096)
        });
        ours.insert("softmax_32x4096_us".into(), json!(t * 1e6));
    }
    if want("rms_norm") {
        let t = best_time(batch, || kernels::rms_norm_rows_f32(&x, &w, 1e-5, &mut buf));
        ours.insert("rms_norm_32x4096_us".into(), json!(t * 1e6));
    }
    Value::Object(ours)
}

fn get(v: Option<&Value>, path: &[&str]) -> Option<f64> {
    let mut cur = v?;
    for p in path {
        cur = cur.get(*p)?;
    }
    cur.as_f64()
}

fn print_table(ours: &Value, torch: Option<&Value>) {
    let bw = get(Some(ours), &["read_bandwidth_gbps"]).unwrap_or(f64::NAN);
    println!(
        "torchnative-core kernels: isa {}, {} threads; measured read bandwidth {bw:.1} GB/s",
        ours["isa"].as_str().unwrap_or("?"),
        ours["threads"]
    );
    println!(
        "{:<28} {:>12} {:>12} {:>8} {:>10}",
        "benchmark", "ours", "torch", "ratio", "% read bw"
    );
    let row = |name: &str, path: &[&str], unit: &str, higher_better: bool, pct_bw: bool| {
        let o = get(Some(ours), path);
        let t = get(torch, path);
        let ratio = match (o, t) {
            (Some(o), Some(t)) if higher_better => format!("{:.2}x", o / t),
            (Some(o), Some(t)) => format!("{:.2}x", t / o),
            _ => "-".into(),
        };
        let pct = match (pct_bw, o) {
            (true, Some(o)) => format!("{:.0}%", 100.0 * o / bw),
            _ => String::new(),
        };
        let fmt = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.1} {unit}"));
        println!(
            "{name:<28} {:>12} {:>12} {ratio:>8} {pct:>10}",
            fmt(o),
            fmt(t)
        );
    };
    row(
        "matmul 1024^3 f32",
        &["matmul_1024_gflops"],
        "GF/s",
        true,
        false,
    );
    for &(n, k) in GEMV_SHAPES {
        for dt in ["f32", "f16", "bf16"] {
            let key = format!("{n}x{k}_{dt}");
            row(
                &format!("gemv {key}"),
                &["gemv", &key, "gbps"],
                "GB/s",
                true,
                true,
            );
        }
    }
    row(
        "linear 64x576->1536 f32",
        &["prefill_f32_gflops"],
        "GF/s",
        true,
        false,
    );
    row(
        "linear 64x576->1536 bf16",
        &["prefill_bf16_gflops"],
        "GF/s",
        true,
        false,
    );
    row(
        "softmax 32x4096",
        &["softmax_32x4096_us"],
        "us",
        false,
        false,
    );
    row(
        "rms_norm 32x4096",
        &["rms_norm_32x4096_us"],
        "us",
        false,
        false,
    );
    println!(
        "(ratio > 1: ours faster. torch gemv/linear with half weights casts x to the same dtype.)"
    );
}
