//! Paged attention: `attention_paged_f32` reading K/V through a shuffled block table from a
//! pool (unused blocks and the unwritten tail of the last block hold NaN) must equal
//! `attention_f32` on the same K/V in a contiguous cache bit for bit (`to_bits`), on every ISA
//! level and at 1 and 2 kernel threads, for block sizes 16/32/64, GQA groups, head dims on
//! and off the blocked path, sliding window, softcap and chunked-prefill query ranges.

use super::{Rng, THREADS};
use crate::kernels::attention::{attention_paged_seqs_with, attention_paged_with, attention_with};
use crate::kernels::{
    self, attention_paged_f32, set_num_threads, supported_isas, AttentionParams, Isa, KvData,
    PagedAttentionParams,
};

/// One sequence of `t` positions: its queries, its K/V in a contiguous cache, and the same K/V
/// scattered into a pool of `block_size` blocks through a shuffled table.
struct Case {
    p: AttentionParams,
    t: usize,
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    block_size: usize,
    n_blocks: usize,
    table: Vec<u32>,
    pool_k: Vec<f32>,
    pool_v: Vec<f32>,
}

impl Case {
    #[allow(clippy::too_many_arguments)]
    fn new(
        n_heads: usize,
        n_kv_heads: usize,
        head_dim: usize,
        t: usize,
        block_size: usize,
        sliding_window: Option<usize>,
        softcap: Option<f32>,
        seed: u64,
    ) -> Self {
        let capacity = t + 11;
        let mut rng = Rng::new(seed);
        let q = rng.vec_scaled(t * n_heads * head_dim, 2.0);
        let mut k = rng.vec_scaled(n_kv_heads * capacity * head_dim, 2.0);
        let mut v = rng.vec(n_kv_heads * capacity * head_dim);
        for h in 0..n_kv_heads {
            let unwritten = (h * capacity + t) * head_dim..(h + 1) * capacity * head_dim;
            k[unwritten.clone()].fill(f32::NAN);
            v[unwritten].fill(f32::NAN);
        }
        // Pool: the sequence's blocks plus 3 unused ones, in a shuffled order (Fisher-Yates).
        let used = t.div_ceil(block_size);
        let n_blocks = used + 3;
        let mut perm: Vec<u32> = (0..n_blocks as u32).collect();
        for i in (1..n_blocks).rev() {
            let j = (rng.next_u64() % (i as u64 + 1)) as usize;
            perm.swap(i, j);
        }
        let table = perm[..used].to_vec();
        assert_ne!(
            table,
            (0..used as u32).collect::<Vec<_>>(),
            "table not shuffled"
        );
        let block = n_kv_heads * block_size * head_dim;
        let mut pool_k = vec![f32::NAN; n_blocks * block];
        let mut pool_v = vec![f32::NAN; n_blocks * block];
        for x in 0..t {
            for h in 0..n_kv_heads {
                let blk = table[x / block_size] as usize;
                let dst = ((blk * n_kv_heads + h) * block_size + x % block_size) * head_dim;
                let src = (h * capacity + x) * head_dim;
                pool_k[dst..dst + head_dim].copy_from_slice(&k[src..src + head_dim]);
                pool_v[dst..dst + head_dim].copy_from_slice(&v[src..src + head_dim]);
            }
        }
        let p = AttentionParams {
            n_q: 0,
            n_heads,
            n_kv_heads,
            head_dim,
            kv_len: 0,
            kv_capacity: capacity,
            q_pos0: 0,
            scale: if softcap.is_some() {
                2.0
            } else {
                1.0 / (head_dim as f32).sqrt()
            },
            sliding_window,
            softcap,
        };
        Case {
            p,
            t,
            q,
            k,
            v,
            block_size,
            n_blocks,
            table,
            pool_k,
            pool_v,
        }
    }

    fn row_len(&self) -> usize {
        self.p.n_heads * self.p.head_dim
    }

    fn params(&self, q_pos0: usize, n_q: usize, kv_len: usize) -> PagedAttentionParams {
        let p = self.p;
        PagedAttentionParams {
            n_q,
            n_heads: p.n_heads,
            n_kv_heads: p.n_kv_heads,
            head_dim: p.head_dim,
            kv_len,
            q_pos0,
            scale: p.scale,
            sliding_window: p.sliding_window,
            softcap: p.softcap,
            block_size: self.block_size,
            n_blocks: self.n_blocks,
        }
    }

    fn contiguous(&self, isa: Isa, q_pos0: usize, n_q: usize, kv_len: usize) -> Vec<f32> {
        let r = self.row_len();
        let mut out = vec![f32::NAN; n_q * r];
        let p = AttentionParams {
            n_q,
            q_pos0,
            kv_len,
            ..self.p
        };
        let q = &self.q[q_pos0 * r..(q_pos0 + n_q) * r];
        let (k, v) = (KvData::F32(&self.k), KvData::F32(&self.v));
        attention_with(isa, q, k, v, &mut out, &mut [], p).unwrap();
        out
    }

    fn paged(&self, isa: Isa, table: &[u32], q_pos0: usize, n_q: usize, kv_len: usize) -> Vec<f32> {
        let r = self.row_len();
        let mut out = vec![f32::NAN; n_q * r];
        let p = self.params(q_pos0, n_q, kv_len);
        let q = &self.q[q_pos0 * r..(q_pos0 + n_q) * r];
        let (k, v) = (KvData::F32(&self.pool_k), KvData::F32(&self.pool_v));
        attention_paged_with(isa, q, k, v, table, &mut out, p).unwrap();
        out
    }

    /// Paged == contiguous for chunked-prefill query ranges (each call seeing the keys up to
    /// its last query, or all `t`), with the table cut to exactly the blocks `kv_len` needs.
    fn check(&self, label: &str, threads: usize, isa: Isa) {
        let t = self.t;
        let mut calls = std::collections::BTreeSet::new();
        for n_q in [1, 4, 7, 64, t] {
            for q_pos0 in [0, 5, 60, 64 - n_q.min(64), 100, t - n_q] {
                if q_pos0 + n_q <= t {
                    calls.insert((q_pos0, n_q, q_pos0 + n_q));
                    calls.insert((q_pos0, n_q, t));
                }
            }
        }
        for (q_pos0, n_q, kv_len) in calls {
            let table = &self.table[..kv_len.div_ceil(self.block_size)];
            let want = self.contiguous(isa, q_pos0, n_q, kv_len);
            let got = self.paged(isa, table, q_pos0, n_q, kv_len);
            if let Some(i) = (0..got.len()).find(|&i| got[i].to_bits() != want[i].to_bits()) {
                panic!(
                    "{label} {isa:?} threads={threads} B={} q_pos0={q_pos0} n_q={n_q} \
                     kv_len={kv_len} {:?}: element {i}: paged {:e}, contiguous {:e}",
                    self.block_size, self.p, got[i], want[i]
                );
            }
        }
    }
}

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

#[test]
fn paged_attention_equals_contiguous_bit_for_bit() {
    let t = 200;
    let mut cases = Vec::new();
    let mut seed = 700;
    // GQA groups 1, 3, 4; head dims 64 and 48 (blocked path unless softcap).
    for (n_heads, n_kv_heads) in [(3, 3), (6, 2), (8, 2)] {
        for head_dim in [64, 48] {
            for window in [None, Some(45)] {
                for softcap in [None, Some(1.5)] {
                    for block_size in [16, 32, 64] {
                        seed += 1;
                        cases.push(Case::new(
                            n_heads, n_kv_heads, head_dim, t, block_size, window, softcap, seed,
                        ));
                    }
                }
            }
        }
    }
    // Off the blocked path without softcap: head_dim 40 (partial vectors), and a GQA group of
    // 18 > MAX_GROUP (one head per task).
    for (n_heads, n_kv_heads, head_dim) in [(6, 2, 40), (18, 1, 64)] {
        for window in [None, Some(45)] {
            for block_size in [16, 64] {
                seed += 1;
                cases.push(Case::new(
                    n_heads, n_kv_heads, head_dim, t, block_size, window, None, seed,
                ));
            }
        }
    }
    with_thread_counts(|threads| {
        for isa in supported_isas() {
            for c in &cases {
                c.check("paged", threads, isa);
            }
        }
    });
}

#[test]
fn paged_attention_reads_the_blocks_the_table_names() {
    // The comparison above is sensitive to the table: swapping two entries (same pool) must
    // change the output of a query that sees both blocks.
    let c = Case::new(6, 2, 64, 100, 16, None, None, 790);
    let n = c.table.len();
    let mut swapped = c.table.clone();
    swapped.swap(1, 3);
    for isa in supported_isas() {
        let want = c.paged(isa, &c.table, 99, 1, 100);
        let got = c.paged(isa, &swapped, 99, 1, 100);
        assert!(
            got.iter()
                .zip(&want)
                .any(|(a, b)| a.to_bits() != b.to_bits()),
            "{isa:?}: swapped table gave the same output"
        );
        // Entries beyond the blocks kv_len needs are not read.
        let mut longer = c.table.clone();
        longer.push(u32::MAX);
        assert_eq!(n, 100usize.div_ceil(16));
        let got = c.paged(isa, &longer, 99, 1, 100);
        assert!(got
            .iter()
            .zip(&want)
            .all(|(a, b)| a.to_bits() == b.to_bits()));
    }
}

#[test]
fn paged_attention_invalid_inputs_are_errors_naming_the_value() {
    let c = Case::new(4, 2, 16, 40, 16, None, None, 791);
    let p = c.params(0, 40, 40);
    let mut out = vec![0.0; 40 * c.row_len()];
    let run = |table: &[u32], keys: &[f32], p: PagedAttentionParams, out: &mut [f32]| {
        attention_paged_f32(&c.q, keys, &c.pool_v, table, out, p)
            .unwrap_err()
            .to_string()
    };
    // The valid call works.
    attention_paged_f32(&c.q, &c.pool_k, &c.pool_v, &c.table, &mut out, p).unwrap();
    let err = run(&c.table[..2], &c.pool_k, p, &mut out);
    assert!(
        err.starts_with("attention_paged:") && err.contains("block_table has 2 entries"),
        "{err}"
    );
    let mut table = c.table.clone();
    table[1] = c.n_blocks as u32;
    let err = run(&table, &c.pool_k, p, &mut out);
    assert!(
        err.contains("block_table[1]") && err.contains("n_blocks"),
        "{err}"
    );
    let err = run(
        &c.table,
        &c.pool_k,
        PagedAttentionParams {
            block_size: 24,
            ..p
        },
        &mut out,
    );
    assert!(err.contains("block_size 24"), "{err}");
    let err = run(
        &c.table,
        &c.pool_k,
        PagedAttentionParams { block_size: 8, ..p },
        &mut out,
    );
    assert!(err.contains("block_size 8"), "{err}");
    let err = run(&c.table, &c.pool_k[..100], p, &mut out);
    assert!(err.contains("keys has 100 elements"), "{err}");
    let err = run(
        &c.table,
        &c.pool_k,
        PagedAttentionParams { n_q: 41, ..p },
        &mut out,
    );
    assert!(
        err.starts_with("attention_paged:") && err.contains("kv_len 40"),
        "{err}"
    );
    let err = run(&c.table, &c.pool_k, p, &mut out[..10]);
    assert!(err.contains("out has 10"), "{err}");
}

/// Several sequences in one pool: each case's blocks moved behind the blocks of the cases
/// before it, its table shifted to match.
fn shared_pool(cases: &[Case]) -> (Vec<f32>, Vec<f32>, Vec<Vec<u32>>, usize) {
    let (mut keys, mut values, mut tables, mut n_blocks) = (vec![], vec![], vec![], 0);
    for c in cases {
        keys.extend_from_slice(&c.pool_k);
        values.extend_from_slice(&c.pool_v);
        tables.push(c.table.iter().map(|&b| b + n_blocks as u32).collect());
        n_blocks += c.n_blocks;
    }
    (keys, values, tables, n_blocks)
}

#[test]
fn paged_attention_of_many_sequences_in_one_call_equals_each_alone() {
    use crate::kernels::PagedSeq;
    // Decode rows (one query), prefill chunks (several, across a 16-query block), a chunk that
    // starts mid-sequence, sliding window; then a softcap case (the per-sequence path).
    let shapes: [&[(usize, usize, usize)]; 2] = [
        &[
            (90, 89, 1),
            (40, 0, 40),
            (130, 129, 1),
            (75, 50, 25),
            (17, 16, 1),
        ],
        &[(60, 59, 1), (33, 10, 23)],
    ];
    let mut seed = 900;
    for (si, shape) in shapes.iter().enumerate() {
        for window in [None, Some(45)] {
            let cases: Vec<Case> = shape
                .iter()
                .map(|&(t, _, _)| {
                    seed += 1;
                    let softcap = (si == 1).then_some(1.5);
                    Case::new(6, 2, 64, t, 16, window, softcap, seed)
                })
                .collect();
            let (keys, values, tables, n_blocks) = shared_pool(&cases);
            let r = cases[0].row_len();
            // Rows of the batch: each sequence's queries, with a gap row between sequences.
            let mut q = Vec::new();
            let mut seqs = Vec::new();
            for ((c, &(t, q_pos0, n_q)), table) in cases.iter().zip(*shape).zip(&tables) {
                q.extend(std::iter::repeat_n(f32::NAN, r));
                let row0 = q.len() / r;
                q.extend_from_slice(&c.q[q_pos0 * r..(q_pos0 + n_q) * r]);
                let p = PagedAttentionParams {
                    n_blocks,
                    ..c.params(q_pos0, n_q, t)
                };
                seqs.push(PagedSeq {
                    row0,
                    block_table: table,
                    p,
                });
            }
            with_thread_counts(|threads| {
                for isa in supported_isas() {
                    let mut out = vec![f32::NAN; q.len()];
                    attention_paged_seqs_with(
                        isa,
                        &q,
                        KvData::F32(&keys),
                        KvData::F32(&values),
                        &seqs,
                        &mut out,
                    )
                    .unwrap();
                    for (i, (c, s)) in cases.iter().zip(&seqs).enumerate() {
                        let alone = c.paged(isa, &c.table, s.p.q_pos0, s.p.n_q, s.p.kv_len);
                        let got = &out[s.row0 * r..(s.row0 + s.p.n_q) * r];
                        if let Some(e) =
                            (0..got.len()).find(|&e| got[e].to_bits() != alone[e].to_bits())
                        {
                            panic!(
                                "{isa:?} threads={threads} window={window:?} sequence {i} \
                                 element {e}: batched {:e}, alone {:e}",
                                got[e], alone[e]
                            );
                        }
                    }
                }
            });
        }
    }
}

#[test]
fn paged_attention_of_many_sequences_refuses_bad_batches_naming_the_sequence() {
    use crate::kernels::{attention_paged_seqs_f32, PagedSeq};
    let cases = [
        Case::new(4, 2, 16, 40, 16, None, None, 950),
        Case::new(4, 2, 16, 30, 16, None, None, 951),
    ];
    let (keys, values, tables, n_blocks) = shared_pool(&cases);
    let r = cases[0].row_len();
    let seq = |i: usize, row0: usize, n_q: usize| PagedSeq {
        row0,
        block_table: &tables[i],
        p: PagedAttentionParams {
            n_blocks,
            ..cases[i].params(cases[i].t - n_q, n_q, cases[i].t)
        },
    };
    let q = vec![0.5; 8 * r];
    let mut out = vec![0.0; 8 * r];
    let mut run = |seqs: &[PagedSeq]| attention_paged_seqs_f32(&q, &keys, &values, seqs, &mut out);
    run(&[seq(0, 0, 3), seq(1, 3, 5)]).unwrap();
    run(&[]).unwrap();
    let err = run(&[seq(0, 0, 3), seq(1, 2, 5)]).unwrap_err().to_string();
    assert!(err.contains("sequence 1 starts at row 2"), "{err}");
    let err = run(&[seq(0, 0, 3), seq(1, 4, 5)]).unwrap_err().to_string();
    assert!(err.contains("sequence 1") && err.contains("q has"), "{err}");
    let mut short = seq(1, 3, 5);
    short.block_table = &tables[1][..1];
    let err = run(&[seq(0, 0, 3), short]).unwrap_err().to_string();
    assert!(
        err.contains("sequence 1") && err.contains("block_table has 1"),
        "{err}"
    );
    let mut other = seq(1, 3, 5);
    other.p.block_size = 32;
    let err = run(&[seq(0, 0, 3), other]).unwrap_err().to_string();
    assert!(err.contains("sequence 1 has other heads"), "{err}");
}

/// `x` rounded to f16 and back (NaN stays NaN).
fn through_f16(x: &[f32]) -> Vec<f32> {
    x.iter().map(|&v| half::f16::from_f32(v).to_f32()).collect()
}

fn to_f16(x: &[f32]) -> Vec<half::f16> {
    x.iter().map(|&v| half::f16::from_f32(v)).collect()
}

#[test]
fn attention_over_an_f16_cache_equals_f32_on_the_widened_values() {
    use crate::kernels::PagedSeq;
    // Blocked path (head_dim 64, GQA 3), the per-group path (softcap; head_dim 40 with partial
    // vectors), sliding window; pool block sizes 16 and 64.
    let mut cases = Vec::new();
    let mut seed = 1000;
    for (n_heads, n_kv_heads, head_dim, softcap) in
        [(9, 3, 64, None), (6, 2, 64, Some(1.5)), (6, 2, 40, None)]
    {
        for (window, block_size) in [(None, 16), (Some(45), 64)] {
            seed += 1;
            let mut c = Case::new(
                n_heads, n_kv_heads, head_dim, 150, block_size, window, softcap, seed,
            );
            for buf in [&mut c.k, &mut c.v, &mut c.pool_k, &mut c.pool_v] {
                *buf = through_f16(buf);
            }
            cases.push(c);
        }
    }
    let first_diff =
        |got: &[f32], want: &[f32]| (0..got.len()).find(|&i| got[i].to_bits() != want[i].to_bits());
    with_thread_counts(|threads| {
        for isa in supported_isas() {
            for c in &cases {
                let (k16, v16) = (to_f16(&c.k), to_f16(&c.v));
                let (pk16, pv16) = (to_f16(&c.pool_k), to_f16(&c.pool_v));
                let r = c.row_len();
                for (q_pos0, n_q, kv_len) in
                    [(149, 1, 150), (0, 150, 150), (70, 7, 77), (64, 64, 150)]
                {
                    let want = c.contiguous(isa, q_pos0, n_q, kv_len);
                    let q = &c.q[q_pos0 * r..(q_pos0 + n_q) * r];
                    let label = format!(
                        "{isa:?} threads={threads} {:?} B={} q_pos0={q_pos0} n_q={n_q} kv_len={kv_len}",
                        c.p, c.block_size
                    );
                    let mut dense = vec![f32::NAN; n_q * r];
                    let p = AttentionParams {
                        n_q,
                        q_pos0,
                        kv_len,
                        ..c.p
                    };
                    let (k, v) = (KvData::F16(&k16), KvData::F16(&v16));
                    attention_with(isa, q, k, v, &mut dense, &mut [], p).unwrap();
                    if let Some(i) = first_diff(&dense, &want) {
                        panic!(
                            "{label}: dense f16 element {i}: {:e} vs {:e}",
                            dense[i], want[i]
                        );
                    }
                    let table = &c.table[..kv_len.div_ceil(c.block_size)];
                    let pp = c.params(q_pos0, n_q, kv_len);
                    let (k, v) = (KvData::F16(&pk16), KvData::F16(&pv16));
                    let mut paged = vec![f32::NAN; n_q * r];
                    attention_paged_with(isa, q, k, v, table, &mut paged, pp).unwrap();
                    if let Some(i) = first_diff(&paged, &want) {
                        panic!(
                            "{label}: paged f16 element {i}: {:e} vs {:e}",
                            paged[i], want[i]
                        );
                    }
                    // The many-sequences entry: this chunk beside a decode row of the same pool.
                    let seqs = [
                        PagedSeq {
                            row0: 0,
                            block_table: table,
                            p: pp,
                        },
                        PagedSeq {
                            row0: n_q,
                            block_table: &c.table,
                            p: c.params(149, 1, 150),
                        },
                    ];
                    let mut qq = q.to_vec();
                    qq.extend_from_slice(&c.q[149 * r..150 * r]);
                    let mut both = vec![f32::NAN; (n_q + 1) * r];
                    attention_paged_seqs_with(isa, &qq, k, v, &seqs, &mut both).unwrap();
                    if let Some(i) = first_diff(&both[..n_q * r], &want) {
                        panic!(
                            "{label}: batched f16 element {i}: {:e} vs {:e}",
                            both[i], want[i]
                        );
                    }
                }
            }
        }
    });
}

#[test]
fn attention_over_an_f16_cache_refuses_a_short_pool_naming_it() {
    use crate::kernels::attention_paged;
    let c = Case::new(6, 2, 64, 40, 16, None, None, 1100);
    let pk16 = to_f16(&c.pool_k[..c.pool_k.len() - 1]);
    let pv16 = to_f16(&c.pool_v);
    let r = c.row_len();
    let mut out = vec![0.0; r];
    let (k, v) = (KvData::F16(&pk16), KvData::F16(&pv16));
    let err = attention_paged(
        &c.q[39 * r..40 * r],
        k,
        v,
        &c.table,
        &mut out,
        c.params(39, 1, 40),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("keys has"), "{err}");
}
