//! Time of one decode-shaped attention call (one query, SmolLM2's heads) on one thread, over
//! an f32 cache and over the same cache in f16.
//!
//! `cargo run --release -p torchnative-core --example attention_decode -- [KV_LEN ...]`
use std::time::Instant;
use torchnative_core::kernels::{self, AttentionParams, KvData};

fn main() {
    kernels::set_num_threads(1).unwrap();
    let lens: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().unwrap())
        .collect();
    let (n_heads, n_kv, hd) = (9, 3, 64);
    for kv_len in if lens.is_empty() {
        vec![100, 500]
    } else {
        lens
    } {
        let cap = kv_len;
        let k: Vec<f32> = (0..n_kv * cap * hd)
            .map(|i| ((i * 7919) % 1000) as f32 / 1000.0 - 0.5)
            .collect();
        let v: Vec<f32> = (0..n_kv * cap * hd)
            .map(|i| ((i * 104729) % 1000) as f32 / 1000.0 - 0.5)
            .collect();
        let q: Vec<f32> = (0..n_heads * hd)
            .map(|i| ((i * 31) % 100) as f32 / 100.0 - 0.5)
            .collect();
        let mut out = vec![0f32; n_heads * hd];
        let p = AttentionParams {
            n_q: 1,
            n_heads,
            n_kv_heads: n_kv,
            head_dim: hd,
            kv_len,
            kv_capacity: cap,
            q_pos0: kv_len - 1,
            scale: 0.125,
            sliding_window: None,
            softcap: None,
        };
        let (k16, v16) = (to_f16(&k), to_f16(&v));
        let reps = 20_000_000 / kv_len;
        let mut line = format!("kv_len {kv_len}:");
        for (name, kd, vd) in [
            ("f32", KvData::F32(&k), KvData::F32(&v)),
            ("f16", KvData::F16(&k16), KvData::F16(&v16)),
        ] {
            let mut best = f64::MAX;
            for _ in 0..5 {
                let t = Instant::now();
                for _ in 0..reps / 5 {
                    kernels::attention(&q, kd, vd, &mut out, &mut [], p).unwrap();
                }
                best = best.min(t.elapsed().as_secs_f64() / (reps / 5) as f64);
            }
            line += &format!(" {name} {:.2} us per call (out[0] {})", best * 1e6, out[0]);
        }
        println!("{line}");
    }
}

fn to_f16(x: &[f32]) -> Vec<half::f16> {
    x.iter().map(|&v| half::f16::from_f32(v)).collect()
}
