//! Batch invariance: a row's result is bit-identical (`to_bits`) whatever batch it rides in —
//! number of rows in the call, the row's place among them, how a prompt was chunked (attention
//! `q_pos0` splits), `kv_capacity`, and the number of kernel threads. Each ISA level is
//! compared with itself.

use super::{Rng, THREADS};
use crate::kernels::attention::attention_with;
use crate::kernels::linear::{linear_with, Dims, WeightElem};
use crate::kernels::KvData;
use crate::kernels::{self, set_num_threads, supported_isas, AttentionParams, Isa};
use half::{bf16, f16};

/// Runs `f` with the kernel pool at 1 and then 2 threads (restoring the old count).
fn with_thread_counts(mut f: impl FnMut(usize)) {
    let _guard = THREADS.lock().unwrap_or_else(|e| e.into_inner());
    let before = kernels::num_threads();
    for threads in [1, 2] {
        set_num_threads(threads).unwrap();
        f(threads);
    }
    set_num_threads(before).unwrap();
}

#[track_caller]
fn assert_same_bits(got: &[f32], want: &[f32], what: &dyn Fn() -> String) {
    assert_eq!(got.len(), want.len());
    if let Some(i) = (0..got.len()).find(|&i| got[i].to_bits() != want[i].to_bits()) {
        panic!(
            "{}: element {i}: got {:e}, want {:e}",
            what(),
            got[i],
            want[i]
        );
    }
}

// ---------------------------------------------------------------- attention

/// A prompt of `t` tokens with its K/V cache (positions `t..capacity` hold NaN: never read).
struct Prompt {
    p: AttentionParams,
    t: usize,
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
}

impl Prompt {
    fn new(n_heads: usize, n_kv_heads: usize, head_dim: usize, t: usize, seed: u64) -> Self {
        let capacity = t + 37;
        let mut rng = Rng::new(seed);
        let q = rng.vec_scaled(t * n_heads * head_dim, 2.0);
        let mut k = rng.vec_scaled(n_kv_heads * capacity * head_dim, 2.0);
        let mut v = rng.vec(n_kv_heads * capacity * head_dim);
        for h in 0..n_kv_heads {
            let unwritten = (h * capacity + t) * head_dim..(h + 1) * capacity * head_dim;
            k[unwritten.clone()].fill(f32::NAN);
            v[unwritten].fill(f32::NAN);
        }
        let p = AttentionParams {
            n_q: 0,
            n_heads,
            n_kv_heads,
            head_dim,
            kv_len: 0,
            kv_capacity: capacity,
            q_pos0: 0,
            scale: 1.0 / (head_dim as f32).sqrt(),
            sliding_window: None,
            softcap: None,
        };
        Prompt { p, t, q, k, v }
    }

    fn row_len(&self) -> usize {
        self.p.n_heads * self.p.head_dim
    }

    /// Output rows of queries `q_pos0..q_pos0 + n_q` from one call that sees `kv_len` keys.
    fn run(&self, isa: Isa, q_pos0: usize, n_q: usize, kv_len: usize) -> Vec<f32> {
        let r = self.row_len();
        let mut out = vec![f32::NAN; n_q * r];
        let p = AttentionParams {
            n_q,
            q_pos0,
            kv_len,
            ..self.p
        };
        attention_with(
            isa,
            &self.q[q_pos0 * r..(q_pos0 + n_q) * r],
            KvData::F32(&self.k),
            KvData::F32(&self.v),
            &mut out,
            &mut [],
            p,
        )
        .unwrap();
        out
    }

    /// Every query through calls of the given chunk sizes (cycled), each seeing exactly the
    /// keys up to its last query, as the runtime's chunked prefill does.
    fn chunked(&self, isa: Isa, sizes: &[usize]) -> Vec<f32> {
        let mut out = Vec::with_capacity(self.t * self.row_len());
        let mut pos = 0;
        for &n in sizes.iter().cycle() {
            if pos == self.t {
                break;
            }
            let n = n.min(self.t - pos);
            out.extend(self.run(isa, pos, n, pos + n));
            pos += n;
        }
        out
    }

    fn check(&self, label: &str) {
        with_thread_counts(|threads| {
            for isa in supported_isas() {
                // Reference: token by token (decode), each call seeing exactly its prefix.
                let want = self.chunked(isa, &[1]);
                let what = |how: String| {
                    let p = self.p;
                    move || format!("{label} {isa:?} threads={threads} {how} {p:?}")
                };
                for n in [3, 4, 7, 16, 64, 130] {
                    let got = self.chunked(isa, &[n]);
                    assert_same_bits(&got, &want, &what(format!("chunks of {n}")));
                }
                let got = self.chunked(isa, &[5, 60, 1, 70, 2, 33]);
                assert_same_bits(&got, &want, &what("ragged chunks".into()));
                let got = self.run(isa, 0, self.t, self.t);
                assert_same_bits(&got, &want, &what("one call".into()));
                // The whole prompt's keys visible (kv_len beyond the queries).
                let r = self.row_len();
                let (a, b) = (self.t / 3, self.t / 3 + 50);
                let got = self.run(isa, a, b - a, self.t);
                assert_same_bits(&got, &want[a * r..b * r], &what("kv_len = t".into()));
            }
        });
    }
}

#[test]
fn attention_rows_do_not_depend_on_chunking_threads_or_capacity() {
    let mut seed = 300;
    for (n_heads, n_kv_heads) in [(4, 4), (6, 2), (8, 2)] {
        for head_dim in [64, 48] {
            for window in [None, Some(45)] {
                seed += 1;
                let mut pr = Prompt::new(n_heads, n_kv_heads, head_dim, 200, seed);
                pr.p.sliding_window = window;
                pr.check("attention");
            }
        }
    }
}

#[test]
fn attention_rows_same_with_keys_in_lanes() {
    // Decode calls of GQA groups 2, 3 and 8 (few query lanes: keys go in the lanes, on AVX2
    // up to 4 of its 8) against chunked prefill (queries in the lanes), head dims with a
    // remainder below 64 and two rounds of 64.
    let mut pr = Prompt::new(8, 4, 80, 120, 330);
    pr.p.sliding_window = Some(50);
    pr.check("group 2, head_dim 80");
    let pr = Prompt::new(9, 3, 64, 130, 332);
    pr.check("group 3, head_dim 64");
    let pr = Prompt::new(16, 2, 128, 100, 331);
    pr.check("group 8, head_dim 128");
}

#[test]
fn attention_rows_invariant_off_the_blocked_path() {
    // Head dims that are not whole vectors, GQA groups above MAX_GROUP, and softcap.
    let mut pr = Prompt::new(6, 2, 40, 150, 320);
    pr.p.sliding_window = Some(70);
    pr.check("odd head_dim");
    let pr = Prompt::new(18, 1, 16, 90, 321);
    pr.check("group 18");
    let mut pr = Prompt::new(4, 2, 32, 150, 322);
    pr.p.scale = 2.0;
    pr.p.softcap = Some(5.0);
    pr.check("softcap");
}

// ---------------------------------------------------------------- linear

const LINEAR_MS: &[usize] = &[1, 2, 3, 4, 7, 16, 17, 127, 128, 129, 300];

fn check_linear_rows<T: WeightElem>(name: &str, conv: impl Fn(f32) -> T, k: usize, n: usize) {
    let mut rng = Rng::new(400 + k as u64 + n as u64);
    let m_max = *LINEAR_MS.iter().max().unwrap();
    let x = rng.vec(m_max * k);
    let w: Vec<T> = rng.vec(n * k).into_iter().map(conv).collect();
    let b = rng.vec(n);
    with_thread_counts(|threads| {
        for isa in supported_isas() {
            for bias in [None, Some(&b[..])] {
                // Reference: every row alone (m = 1, the decode gemv).
                let mut want = vec![f32::NAN; m_max * n];
                for i in 0..m_max {
                    let d = Dims { m: 1, k, n };
                    linear_with(isa, &x[i * k..], &w, bias, &mut want[i * n..], d);
                }
                for &m in LINEAR_MS {
                    // Rows taken from an offset of the batch, so a row sits at another index.
                    for first in [0, m_max - m] {
                        let mut y = vec![f32::NAN; m * n];
                        let d = Dims { m, k, n };
                        linear_with(isa, &x[first * k..], &w, bias, &mut y, d);
                        let what = || {
                            format!(
                                "{name} {isa:?} threads={threads} m={m} rows from {first} k={k} \
                                 n={n} bias={}",
                                bias.is_some()
                            )
                        };
                        assert_same_bits(&y, &want[first * n..(first + m) * n], &what);
                    }
                }
            }
        }
    });
}

#[test]
fn linear_rows_do_not_depend_on_m_or_threads() {
    for (k, n) in [(67, 37), (576, 129), (33, 1)] {
        check_linear_rows("f32", |v| v, k, n);
        check_linear_rows("f16", f16::from_f32, k, n);
        check_linear_rows("bf16", bf16::from_f32, k, n);
    }
}

// ---------------------------------------------------------------- row-wise kernels

/// `f(rows, row0)` on rows `row0..` at once must equal it row by row, for every number of rows
/// and thread count (`row0` lets `f` pick the same second operand for a row).
fn check_rows(name: &str, row_len: usize, f: impl Fn(&[f32], usize) -> Vec<f32>) {
    let mut rng = Rng::new(500 + row_len as u64);
    let m_max = 300;
    let x = rng.vec_scaled(m_max * row_len, 4.0);
    with_thread_counts(|threads| {
        let want: Vec<f32> = (0..m_max)
            .flat_map(|i| f(&x[i * row_len..(i + 1) * row_len], i))
            .collect();
        for m in [2, 3, 17, 129, 300] {
            let first = m_max - m;
            let got = f(&x[first * row_len..(first + m) * row_len], first);
            let what = || format!("{name} threads={threads} m={m} row_len={row_len}");
            assert_same_bits(&got, &want[first * row_len..(first + m) * row_len], &what);
        }
    });
}

#[test]
fn row_kernels_do_not_depend_on_rows_or_threads() {
    for d in [64, 576, 77] {
        let weight: Vec<f32> = Rng::new(d as u64).vec(d);
        check_rows("rms_norm_rows", d, |x, _| {
            let mut out = vec![0.0; x.len()];
            kernels::rms_norm_rows_f32(x, &weight, 1e-5, &mut out);
            out
        });
        check_rows("softmax_rows", d, |x, _| {
            let mut out = x.to_vec();
            kernels::softmax_rows_f32(&mut out, d);
            out
        });
        let other: Vec<f32> = Rng::new(7).vec(300 * d);
        check_rows("silu_mul_inplace", d, |x, row0| {
            let mut up = other[row0 * d..row0 * d + x.len()].to_vec();
            kernels::silu_mul_inplace_f32(x, &mut up);
            up
        });
        check_rows("add_inplace", d, |x, row0| {
            let mut acc = other[row0 * d..row0 * d + x.len()].to_vec();
            kernels::add_inplace_f32(&mut acc, x);
            acc
        });
        if d % 2 == 0 {
            let table = kernels::RopeTable::new(d / 2, 64, 10000.0).unwrap();
            for style in [
                kernels::RopeStyle::HalfRotation,
                kernels::RopeStyle::Interleaved,
            ] {
                check_rows("rope", d, |x, row0| {
                    let mut out = x.to_vec();
                    for (r, row) in out.chunks_exact_mut(d).enumerate() {
                        kernels::rope_f32(row, 2, d / 2, (row0 + r) % 64, &table, style);
                    }
                    out
                });
            }
        }
    }
}
