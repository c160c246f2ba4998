//! Golden checks against torch through the oracle python (`oracle_kernels.py` next to this
//! file): rms_norm, softmax, attention (sdpa) and the f32 -> f16/bf16 cast bit patterns.
//! Skips with a message when `TORCHNATIVE_ORACLE_PYTHON` is unset, unless
//! `TORCHNATIVE_REQUIRE_ORACLE=1`.

use super::{assert_close, Rng};
use crate::kernels::{
    attention_f32, f32_to_bf16, f32_to_f16, rms_norm_f32, softmax_f32, AttentionParams,
};
use half::{bf16, f16};
use std::path::PathBuf;
use std::process::Command;

const SCRIPT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/src/kernels/tests/oracle_kernels.py"
);

fn oracle_python() -> Option<String> {
    torchnative_testing::oracle_python().map(|p| p.to_string_lossy().into_owned())
}

/// A fresh temp dir for one oracle exchange.
fn temp_dir(name: &str) -> PathBuf {
    torchnative_testing::temp_dir(&format!("kernels-{name}"))
}

fn write_f32(path: PathBuf, v: &[f32]) {
    std::fs::write(
        path,
        v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>(),
    )
    .unwrap();
}

fn read_bytes(path: PathBuf) -> Vec<u8> {
    std::fs::read(&path).unwrap_or_else(|e| panic!("oracle output {} missing: {e}", path.display()))
}

fn read_f32(path: PathBuf) -> Vec<f32> {
    read_bytes(path)
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// Runs `oracle_kernels.py <op> <dir> <args...>`.
fn run_oracle(python: &str, op: &str, dir: &std::path::Path, args: &[String]) {
    let out = Command::new(python)
        .arg(SCRIPT)
        .arg(op)
        .arg(dir)
        .args(args)
        .output()
        .expect("run oracle python");
    assert!(
        out.status.success(),
        "oracle {op} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn rms_norm_and_softmax_match_torch() {
    let Some(py) = oracle_python() else { return };
    let dir = temp_dir("norm");
    let mut rng = Rng::new(50);
    let (rows, dim) = (8, 576);
    let (x, w) = (rng.vec_scaled(rows * dim, 4.0), rng.vec(dim));
    let logits = rng.vec_scaled(rows * dim, 30.0);
    write_f32(dir.join("x.bin"), &x);
    write_f32(dir.join("w.bin"), &w);
    write_f32(dir.join("logits.bin"), &logits);
    run_oracle(
        &py,
        "norm_softmax",
        &dir,
        &[rows.to_string(), dim.to_string(), "1e-5".into()],
    );
    let (want_norm, want_sm) = (
        read_f32(dir.join("rms.bin")),
        read_f32(dir.join("softmax.bin")),
    );
    for r in 0..rows {
        let mut out = vec![0.0; dim];
        rms_norm_f32(&x[r * dim..(r + 1) * dim], &w, 1e-5, &mut out);
        let mut sm = logits[r * dim..(r + 1) * dim].to_vec();
        softmax_f32(&mut sm);
        for i in 0..dim {
            // Both sides are f32 computations with different summation orders: the f32 rule
            // (dim+2)u relative for the statistics, doubled (two independent errors).
            let t = want_norm[r * dim + i] as f64;
            assert_close(
                out[i],
                t,
                2.0 * (dim as f64 + 8.0) * super::U * t.abs() + 1e-30,
                "rms_norm vs torch",
            );
            let t = want_sm[r * dim + i] as f64;
            assert_close(
                sm[i],
                t,
                2.0 * (dim as f64 + 24.0) * super::U * t + 1e-30,
                "softmax vs torch",
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn casts_match_torch_bit_patterns() {
    let Some(py) = oracle_python() else { return };
    let dir = temp_dir("casts");
    let vals = super::elementwise::cast_edge_values();
    write_f32(dir.join("x.bin"), &vals);
    run_oracle(&py, "casts", &dir, &[]);
    let to_u16 = |b: Vec<u8>| {
        b.chunks_exact(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
            .collect::<Vec<u16>>()
    };
    let (want_h, want_b) = (
        to_u16(read_bytes(dir.join("f16.bin"))),
        to_u16(read_bytes(dir.join("bf16.bin"))),
    );
    let mut h = vec![f16::ZERO; vals.len()];
    let mut b = vec![bf16::ZERO; vals.len()];
    f32_to_f16(&vals, &mut h);
    f32_to_bf16(&vals, &mut b);
    for (i, &x) in vals.iter().enumerate() {
        if x.is_nan() {
            // torch's NaN bits differ between its own code paths (vectorised bf16 gives
            // 0xffff, scalar c10 gives 0x7fc0); require NaN. Ours keep sign and payload.
            assert!(
                h[i].is_nan() && f16::from_bits(want_h[i]).is_nan(),
                "f16 NaN {i}"
            );
            assert!(
                b[i].is_nan() && bf16::from_bits(want_b[i]).is_nan(),
                "bf16 NaN {i}"
            );
            assert_eq!(
                u32::from(b[i].to_bits() >> 15),
                x.to_bits() >> 31,
                "bf16 NaN sign"
            );
        } else {
            assert_eq!(
                h[i].to_bits(),
                want_h[i],
                "f16 of {x:e} ({:#x})",
                x.to_bits()
            );
            assert_eq!(
                b[i].to_bits(),
                want_b[i],
                "bf16 of {x:e} ({:#x})",
                x.to_bits()
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn attention_matches_torch_sdpa() {
    let Some(py) = oracle_python() else { return };
    let mut rng = Rng::new(51);
    // (n_q, n_heads, n_kv_heads, head_dim, kv_len, q_pos0, window, softcap-less)
    let cases = [
        (6, 9, 3, 64, 6, 0, None),
        (1, 9, 3, 64, 40, 39, None),
        (4, 6, 2, 32, 100, 96, Some(30)),
    ];
    for (c, &(n_q, n_heads, n_kv_heads, head_dim, kv_len, q_pos0, window)) in
        cases.iter().enumerate()
    {
        let dir = temp_dir(&format!("attn{c}"));
        let p = AttentionParams {
            n_q,
            n_heads,
            n_kv_heads,
            head_dim,
            kv_len,
            kv_capacity: kv_len + 3,
            q_pos0,
            scale: 1.0 / (head_dim as f32).sqrt(),
            sliding_window: window,
            softcap: None,
        };
        let q = rng.vec_scaled(n_q * n_heads * head_dim, 2.0);
        let k = rng.vec_scaled(n_kv_heads * p.kv_capacity * head_dim, 2.0);
        let v = rng.vec(n_kv_heads * p.kv_capacity * head_dim);
        write_f32(dir.join("q.bin"), &q);
        write_f32(dir.join("k.bin"), &k);
        write_f32(dir.join("v.bin"), &v);
        let args = [
            n_q,
            n_heads,
            n_kv_heads,
            head_dim,
            kv_len,
            p.kv_capacity,
            q_pos0,
            window.unwrap_or(0),
        ];
        run_oracle(&py, "attention", &dir, &args.map(|a| a.to_string()));
        let want = read_f32(dir.join("out.bin"));
        let mut out = vec![0.0; q.len()];
        attention_f32(&q, &k, &v, &mut out, &mut [], p).unwrap();
        // Tolerance from the f32 rule applied to our naive f64 reference, doubled for torch's
        // own f32 error.
        let bound = super::attention::naive_attention(&q, &k, &v, &p);
        for i in 0..out.len() {
            assert_close(
                out[i],
                want[i] as f64,
                2.0 * bound[i].1,
                &format!("attention case {c} out[{i}]"),
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// Our RoPE table against the one HF's `LlamaRotaryEmbedding` builds (f32 pow, f32 angle
/// product, f32 cos/sin). Rule: both sides round inv_freq (pow + division: ~2 ulp) and the
/// angle product (1 ulp), so the angle may differ by 4·2^-24·|angle|; plus 2 ulp for cos/sin.
#[test]
fn rope_table_matches_hf() {
    let Some(py) = oracle_python() else { return };
    let dir = temp_dir("rope");
    let (dim, max_pos, base) = (64usize, 2048usize, 100000.0f32);
    run_oracle(
        &py,
        "rope_table",
        &dir,
        &[dim.to_string(), max_pos.to_string(), base.to_string()],
    );
    let (cos, sin) = (read_f32(dir.join("cos.bin")), read_f32(dir.join("sin.bin")));
    let table = crate::kernels::RopeTable::new(dim, max_pos, base).unwrap();
    let half = dim / 2;
    for pos in 0..max_pos {
        let (c, s) = table.row(pos);
        for i in 0..half {
            let angle = pos as f64 / (base as f64).powf(2.0 * i as f64 / dim as f64);
            let tol = 4.0 * super::U * angle + 4.0 * super::U;
            assert_close(
                c[i],
                cos[pos * half + i] as f64,
                tol,
                &format!("cos pos {pos} i {i}"),
            );
            assert_close(
                s[i],
                sin[pos * half + i] as f64,
                tol,
                &format!("sin pos {pos} i {i}"),
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
