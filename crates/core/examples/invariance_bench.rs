//! Timing of the kernels whose batch invariance matters (attention, linear_f32), at SmolLM2-135M
//! shapes, run inside the kernel pool as the runtime does, and paged attention (the same K/V
//! in a pool of blocks of 16/32/64 positions through a shuffled block table) against it:
//! `cargo run --release -p torchnative-core --example invariance_bench`.

use std::time::Instant;
use torchnative_core::kernels::{self, AttentionParams, PagedAttentionParams};

fn data(n: usize, seed: u32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            (s >> 8) as f32 / (1u32 << 24) as f32 * 2.0 - 1.0
        })
        .collect()
}

/// Fastest of `reps` timings of `f`, in microseconds (the machine may be shared: the minimum
/// is the stable statistic).
fn time(reps: usize, mut f: impl FnMut()) -> f64 {
    f();
    let mut t: Vec<f64> = (0..reps)
        .map(|_| {
            let s = Instant::now();
            f();
            s.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t[0]
}

fn main() {
    let (nh, nkv, hd) = (9, 3, 64);
    if let Some(n) = std::env::var("THREADS").ok().and_then(|v| v.parse().ok()) {
        kernels::set_num_threads(n).unwrap();
    }
    println!("threads {}", kernels::num_threads());
    kernels::install(|| {
        for (n_q, kv_len, reps) in [(512usize, 512usize, 30usize), (1, 1024, 2000)] {
            let cap = 2048;
            let q = data(n_q * nh * hd, 1);
            let k = data(nkv * cap * hd, 2);
            let v = data(nkv * cap * hd, 3);
            let mut out = vec![0.0; q.len()];
            let p = AttentionParams {
                n_q,
                n_heads: nh,
                n_kv_heads: nkv,
                head_dim: hd,
                kv_len,
                kv_capacity: cap,
                q_pos0: kv_len - n_q,
                scale: 0.125,
                sliding_window: None,
                softcap: None,
            };
            let us = time(reps, || {
                kernels::attention_f32(&q, &k, &v, &mut out, &mut [], p).unwrap()
            });
            println!("attention n_q={n_q} kv_len={kv_len}: {us:.1} us");
            for bs in [16usize, 32, 64] {
                // The cache's positions 0..cap scattered into a pool with a shuffled table.
                let n_blocks = cap / bs;
                let mut table: Vec<u32> = (0..n_blocks as u32).collect();
                let mut s = 12345u64;
                for i in (1..n_blocks).rev() {
                    s = s
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    table.swap(i, (s >> 33) as usize % (i + 1));
                }
                let mut pk = vec![0.0; k.len()];
                let mut pv = vec![0.0; v.len()];
                for x in 0..cap {
                    for h in 0..nkv {
                        let dst = ((table[x / bs] as usize * nkv + h) * bs + x % bs) * hd;
                        let src = (h * cap + x) * hd;
                        pk[dst..dst + hd].copy_from_slice(&k[src..src + hd]);
                        pv[dst..dst + hd].copy_from_slice(&v[src..src + hd]);
                    }
                }
                let pp = PagedAttentionParams {
                    n_q,
                    n_heads: nh,
                    n_kv_heads: nkv,
                    head_dim: hd,
                    kv_len,
                    q_pos0: kv_len - n_q,
                    scale: 0.125,
                    sliding_window: None,
                    softcap: None,
                    block_size: bs,
                    n_blocks,
                };
                let mut paged_out = vec![0.0; q.len()];
                let paged_us = time(reps, || {
                    kernels::attention_paged_f32(&q, &pk, &pv, &table, &mut paged_out, pp).unwrap()
                });
                assert!(
                    paged_out
                        .iter()
                        .zip(&out)
                        .all(|(a, b)| a.to_bits() == b.to_bits()),
                    "paged != contiguous"
                );
                println!(
                    "  paged block_size={bs}: {paged_us:.1} us (paged / contiguous {:.3})",
                    paged_us / us
                );
            }
        }
        let (k, n) = (576, 1536);
        let w = data(n * k, 4);
        for (m, reps) in [(1usize, 2000usize), (64, 200), (512, 30)] {
            let x = data(m * k, 5);
            let mut y = vec![0.0; m * n];
            let us = time(reps, || kernels::linear_f32(&x, &w, None, &mut y, m, k, n));
            let gflops = 2.0 * (m * k * n) as f64 / us / 1e3;
            println!("linear_f32 m={m} k={k} n={n}: {us:.1} us ({gflops:.1} GFLOP/s)");
        }
    });
}
