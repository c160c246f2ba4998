//! Attention against a naive f64 implementation: GQA, sliding window, prefill with
//! q_pos0 > 0, softcap, every ISA.

use super::{assert_close, Rng, U};
use crate::kernels::attention::attention_with;
use crate::kernels::KvData;
use crate::kernels::{attention_f32, supported_isas, AttentionParams};

/// Naive attention in f64. Returns per output element (value, tolerance) where the tolerance
/// follows the f32 error rule: each score has error δ ≤ (hd+2)·u·scale·Σ|q·k| (softcap only
/// shrinks it), which moves p_j by ≤ 2·max δ·p_j; exp adds 4 ulp; the weighted sum of
/// `n_keys` values adds (n_keys+2)·u·Σ p|v|. Doubled for safety.
pub(crate) fn naive_attention(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    p: &AttentionParams,
) -> Vec<(f64, f64)> {
    let hd = p.head_dim;
    let group = p.n_heads / p.n_kv_heads;
    let mut out = Vec::new();
    for i in 0..p.n_q {
        let pos = p.q_pos0 + i;
        for h in 0..p.n_heads {
            let kvh = h / group;
            let qv = &q[(i * p.n_heads + h) * hd..(i * p.n_heads + h + 1) * hd];
            let visible: Vec<usize> = (0..p.kv_len)
                .filter(|&j| j <= pos && p.sliding_window.is_none_or(|w| j + w > pos))
                .collect();
            let mut scores = Vec::new();
            let mut max_delta = 0.0f64;
            for &j in &visible {
                let kv = &k[(kvh * p.kv_capacity + j) * hd..][..hd];
                let dot: f64 = qv.iter().zip(kv).map(|(a, b)| *a as f64 * *b as f64).sum();
                let abs: f64 = qv
                    .iter()
                    .zip(kv)
                    .map(|(a, b)| (*a as f64 * *b as f64).abs())
                    .sum();
                let mut s = dot * p.scale as f64;
                if let Some(c) = p.softcap {
                    s = c as f64 * (s / c as f64).tanh();
                }
                max_delta = max_delta.max((hd as f64 + 4.0) * U * p.scale as f64 * abs);
                scores.push(s);
            }
            let m = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let e: Vec<f64> = scores.iter().map(|s| (s - m).exp()).collect();
            let z: f64 = e.iter().sum();
            for d in 0..hd {
                let (mut val, mut abs) = (0.0, 0.0);
                for (idx, &j) in visible.iter().enumerate() {
                    let vv = v[(kvh * p.kv_capacity + j) * hd + d] as f64;
                    val += e[idx] / z * vv;
                    abs += e[idx] / z * vv.abs();
                }
                let rel = 2.0 * max_delta + (8.0 + visible.len() as f64 + 6.0) * U;
                out.push((val, 2.0 * rel * abs + 1e-7));
            }
        }
    }
    out
}

fn params(
    n_q: usize,
    n_heads: usize,
    n_kv_heads: usize,
    head_dim: usize,
    kv_len: usize,
    q_pos0: usize,
) -> AttentionParams {
    AttentionParams {
        n_q,
        n_heads,
        n_kv_heads,
        head_dim,
        kv_len,
        kv_capacity: kv_len + 5,
        q_pos0,
        scale: 1.0 / (head_dim as f32).sqrt(),
        sliding_window: None,
        softcap: None,
    }
}

fn check(p: AttentionParams, seed: u64) {
    let mut rng = Rng::new(seed);
    let q = rng.vec_scaled(p.n_q * p.n_heads * p.head_dim, 2.0);
    let k = rng.vec_scaled(p.n_kv_heads * p.kv_capacity * p.head_dim, 2.0);
    let v = rng.vec(p.n_kv_heads * p.kv_capacity * p.head_dim);
    let want = naive_attention(&q, &k, &v, &p);
    for isa in supported_isas() {
        let mut out = vec![f32::NAN; q.len()];
        attention_with(
            isa,
            &q,
            KvData::F32(&k),
            KvData::F32(&v),
            &mut out,
            &mut [],
            p,
        )
        .unwrap();
        for (idx, &(w, tol)) in want.iter().enumerate() {
            assert_close(out[idx], w, tol, &format!("{isa:?} {p:?} out[{idx}]"));
        }
    }
}

#[test]
fn decode_mha_and_gqa() {
    check(params(1, 4, 4, 16, 1, 0), 40);
    check(params(1, 9, 3, 64, 77, 76), 41); // SmolLM2-135M shape
    check(params(1, 8, 1, 33, 130, 129), 42); // multi-query, odd head_dim, >2 key blocks
    check(params(2, 20, 1, 16, 40, 38), 49); // group above MAX_GROUP: one head per task
}

#[test]
fn prefill_from_zero_and_continuing() {
    check(params(7, 6, 2, 64, 7, 0), 43);
    check(params(5, 6, 3, 17, 200, 195), 44); // chunked prefill: q_pos0 > 0
}

#[test]
fn blocked_prefill_shapes() {
    // n_q >= 4 with head_dim a multiple of 16 takes the blocked path on SIMD levels: several
    // query blocks (ragged last), key blocks crossing the diagonal, continuing prefill.
    check(params(40, 9, 3, 64, 40, 0), 50); // SmolLM2-135M shape
    check(params(130, 4, 2, 32, 200, 70), 51);
    check(params(17, 8, 1, 128, 17, 0), 52); // multi-query, long heads: fewer queries per task
    check(params(4, 2, 2, 16, 300, 296), 53);
    let mut p = params(70, 6, 3, 48, 150, 80);
    p.sliding_window = Some(33);
    check(p, 54);
    p.sliding_window = Some(1);
    check(p, 55);
}

#[test]
fn sliding_window_and_softcap() {
    let mut p = params(6, 4, 2, 32, 150, 144);
    p.sliding_window = Some(70);
    check(p, 45);
    p.sliding_window = Some(1); // only itself
    check(p, 46);
    let mut p = params(3, 4, 4, 16, 90, 87);
    p.scale = 3.0; // large logits so the cap matters
    p.softcap = Some(5.0);
    check(p, 47);
    p.sliding_window = Some(10);
    check(p, 48);
}

#[test]
fn invalid_params_are_errors_naming_the_value() {
    let p = params(1, 6, 4, 8, 4, 3);
    let (q, kv, mut out) = (vec![0.0; 48], vec![0.0; 4 * 9 * 8], vec![0.0; 48]);
    let err = attention_f32(&q, &kv, &kv, &mut out, &mut [], p)
        .unwrap_err()
        .to_string();
    assert!(err.contains("n_kv_heads 4"), "{err}");
    let p = params(2, 4, 4, 8, 4, 3);
    let err = attention_f32(&q, &kv, &kv, &mut out, &mut [], p)
        .unwrap_err()
        .to_string();
    assert!(err.contains("kv_len 4"), "{err}");
    let p = params(1, 4, 4, 8, 4, 3);
    let err = attention_f32(&q[..10], &kv, &kv, &mut out, &mut [], p)
        .unwrap_err()
        .to_string();
    assert!(err.contains("q has 10"), "{err}");
}
