//! Behaviour tests without the oracle: aliasing through views, overlap rules, meta tensors,
//! refusal of bad input (no panics), and randomized layouts checked against naive index
//! arithmetic.

use torchnative_core::*;

fn arange_i64(n: i64, shape: &[i64]) -> Tensor {
    arange(Scalar::Int(0), Scalar::Int(n), Scalar::Int(1), None)
        .unwrap()
        .reshape(shape)
        .unwrap()
}

#[test]
fn writes_through_views_reach_the_base() {
    let base = arange_i64(12, &[3, 4]);
    // Column 1 of the base is row 1 of its transpose.
    base.t()
        .unwrap()
        .select(0, 1)
        .unwrap()
        .fill_(Scalar::Int(-1))
        .unwrap();
    let expected: Vec<i64> = (0..12).map(|i| if i % 4 == 1 { -1 } else { i }).collect();
    assert_eq!(base.to_vec::<i64>().unwrap(), expected);
    // A strided slice (every other element of row 2) written with add_.
    let row = base
        .select(0, 2)
        .unwrap()
        .slice(0, Some(0), None, 2)
        .unwrap();
    row.add_(Scalar::Int(100)).unwrap();
    let got = base.to_vec::<i64>().unwrap();
    assert_eq!(&got[8..12], &[108, -1, 110, 11]);
}

#[test]
fn view_shares_storage_and_reshape_copies_only_when_needed() {
    let t = arange_i64(24, &[2, 3, 4]);
    let v = t.view(&[6, 4]).unwrap();
    assert!(v.shares_storage(&t));
    let tt = t.transpose(0, 2).unwrap(); // [4, 3, 2]
    assert!(
        tt.view(&[-1]).is_err(),
        "flattening a transposed tensor needs a copy"
    );
    let r = tt.reshape(&[-1]).unwrap();
    assert!(!r.shares_storage(&t));
    // Splitting a dim of a transposed tensor is still a view.
    let split = tt.reshape(&[2, 2, 3, 2]).unwrap();
    assert!(split.shares_storage(&t));
    // Values of the copy follow the logical (transposed) order.
    let naive: Vec<i64> = (0..4)
        .flat_map(|k| (0..3).flat_map(move |j| (0..2).map(move |i| i * 12 + j * 4 + k)))
        .collect();
    assert_eq!(r.to_vec::<i64>().unwrap(), naive);
}

#[test]
fn clone_and_cast_preserve_dense_strides() {
    let t = arange_i64(6, &[2, 3]);
    let tt = t.t().unwrap(); // strides [1, 3]
    let c = tt.deep_clone().unwrap();
    assert_eq!(c.strides(), &[1, 3]);
    assert!(!c.shares_storage(&t));
    assert_eq!(c.to_vec::<i64>().unwrap(), tt.to_vec::<i64>().unwrap());
    assert_eq!(tt.to_dtype(DType::F32).unwrap().strides(), &[1, 3]);
    assert_eq!(tt.contiguous().unwrap().strides(), &[2, 1]);
    // Not dense (a step slice): the copy is row-major.
    let s = t.slice(1, None, None, 2).unwrap();
    assert_eq!(s.deep_clone().unwrap().strides(), &[2, 1]);
}

#[test]
fn in_place_overlap_rules() {
    let a = arange_i64(16, &[4, 4]).to_dtype(DType::F32).unwrap();
    let before = a.to_vec::<f32>().unwrap();
    a.add_(&a).unwrap(); // same view: allowed
    assert_eq!(
        a.to_vec::<f32>().unwrap(),
        before.iter().map(|x| x * 2.0).collect::<Vec<_>>()
    );
    // Dense views of the same memory with different strides: refused, as in PyTorch.
    let err = a.add_(a.t().unwrap()).unwrap_err().to_string();
    assert!(
        err.contains("add_") && err.contains("single memory location"),
        "{err}"
    );
    assert!(a.copy_(&a.t().unwrap()).is_err());
    // Non-dense overlapping views are computed into a temporary first: each element sees the
    // source values from before the write.
    let b = arange_i64(16, &[4, 4]);
    let orig = b.to_vec::<i64>().unwrap();
    b.narrow(1, 1, 2)
        .unwrap()
        .add_(b.narrow(1, 0, 2).unwrap())
        .unwrap();
    let got = b.to_vec::<i64>().unwrap();
    for r in 0..4 {
        for c in 0..4 {
            let want = if c == 1 || c == 2 {
                orig[r * 4 + c] + orig[r * 4 + c - 1]
            } else {
                orig[r * 4 + c]
            };
            assert_eq!(got[r * 4 + c], want, "row {r} col {c}");
        }
    }
    // Expanded destinations are refused for computed writes; fill_ writes one value
    // everywhere and is allowed, as upstream's.
    let e = zeros(&[1, 3], DType::F32).unwrap().expand(&[2, 3]).unwrap();
    assert!(e.add_(Scalar::Float(1.0)).is_err());
    assert!(e.fill_(Scalar::Float(1.0)).is_ok());
}

#[test]
fn meta_tensors_propagate_shape_and_dtype_only() {
    let a = Tensor::meta(&[2, 1, 3], DType::F16).unwrap();
    let b = Tensor::meta(&[4, 3], DType::F32).unwrap();
    let s = a.add(&b).unwrap();
    assert_eq!(
        (s.shape(), s.dtype(), s.device()),
        (&[2usize, 4, 3][..], DType::F32, Device::Meta)
    );
    let m = Tensor::meta(&[5, 3, 7], DType::BF16).unwrap();
    let p = s.matmul(&m.to_dtype(DType::F32).unwrap()).unwrap_err();
    assert!(p.to_string().contains("matmul"), "{p}");
    let mm = Tensor::meta(&[3, 7], DType::F32).unwrap();
    assert_eq!(s.matmul(&mm).unwrap().shape(), &[2, 4, 7]);
    assert_eq!(s.sum(&[1], true).unwrap().shape(), &[2, 1, 3]);
    assert_eq!(
        Tensor::meta(&[2, 3], DType::I32)
            .unwrap()
            .sum(&[], false)
            .unwrap()
            .dtype(),
        DType::I64
    );
    assert_eq!(s.softmax(-1).unwrap().shape(), &[2, 4, 3]);
    // Mixing with a CPU 0-dim tensor is allowed; with a dimensioned CPU tensor it is not.
    assert_eq!(s.mul(2.0).unwrap().device(), Device::Meta);
    let cpu = zeros(&[3], DType::F32).unwrap();
    let err = s.add(&cpu).unwrap_err().to_string();
    assert!(err.contains("meta") && err.contains("cpu"), "{err}");
    let err = s.to_vec::<f32>().unwrap_err().to_string();
    assert!(err.contains("meta"), "{err}");
    assert!(cpu
        .to_device(Device::Meta)
        .unwrap()
        .to_device(Device::Cpu)
        .is_err());
    let err = Device::parse("to", "cuda").unwrap_err().to_string();
    assert!(err.contains("cuda") && err.contains("to"), "{err}");
}

#[test]
fn bad_input_is_refused_with_named_errors() {
    let t = arange_i64(6, &[2, 3]);
    let f = t.to_dtype(DType::F32).unwrap();
    let idx = Tensor::from_vec(vec![0i64, 5], &[2]).unwrap();
    let checks: Vec<(&str, Result<Tensor>)> = vec![
        ("view", t.view(&[4, -1])),
        ("narrow", t.narrow(1, 2, 2)),
        ("select", t.select(0, 2)),
        ("select", t.select(-3, 0)),
        ("expand", t.expand(&[2, 4])),
        ("permute", t.permute(&[0, 0])),
        ("as_strided", t.as_strided(&[3, 3], &[3, 1], 0)),
        ("index_select", t.index_select(1, &idx)),
        (
            "gather",
            t.gather(1, &Tensor::from_vec(vec![0i64, 3], &[1, 2]).unwrap()),
        ),
        (
            "cat",
            cat(
                &[
                    &t,
                    &arange_i64(4, &[2, 2])
                        .t()
                        .unwrap()
                        .reshape(&[1, 4])
                        .unwrap(),
                ],
                0,
            ),
        ),
        ("matmul", f.matmul(&f)),
        ("full", full(&[usize::MAX, 2], Scalar::Int(0), None)),
        (
            "arange",
            arange(Scalar::Int(0), Scalar::Int(5), Scalar::Int(0), None),
        ),
        ("pad", t.pad(&[1, 1, 1, 1, 1, 1], Scalar::Int(0))),
        ("sum", t.sum(&[2], false)),
        ("mean", t.mean(&[], false)),
        ("softmax", t.softmax(0)),
        (
            "div",
            t.div_mode(zeros(&[3], DType::I64).unwrap(), RoundingMode::Floor),
        ),
        ("sub", t.ne(0).unwrap().sub(true)),
        ("pow", t.pow(-1)),
        ("embedding", embedding(&idx, &f)),
        ("topk", f.topk(4, 1, true).map(|r| r.0)),
        (
            "randint",
            randint(3, 3, &[2], DType::I64, &mut Generator::new(0)),
        ),
        (
            "multinomial",
            f.neg()
                .unwrap()
                .multinomial(1, true, &mut Generator::new(0)),
        ),
        ("rms_norm", rms_norm(&f, &[2], None, None)),
        (
            "scaled_dot_product_attention",
            scaled_dot_product_attention(
                &f.unsqueeze(0).unwrap(),
                &f.unsqueeze(0).unwrap().narrow(2, 0, 2).unwrap(),
                &f.unsqueeze(0).unwrap(),
                &SdpaOptions::default(),
            ),
        ),
    ];
    for (op, r) in checks {
        let e = r.expect_err(op).to_string();
        assert!(e.contains(op), "error for {op} does not name it: {e}");
    }
    // Shape errors name both shapes; dtype errors name the dtype.
    let e = f
        .add(zeros(&[4], DType::F32).unwrap())
        .unwrap_err()
        .to_string();
    assert!(e.contains("[2, 3]") && e.contains("[4]"), "{e}");
    let e = t.silu().unwrap_err().to_string();
    assert!(e.contains("int64"), "{e}");
    assert!(t.split(0, 0).is_err() && t.chunk(0, 0).is_err());
    assert!(t
        .index_put_(
            std::slice::from_ref(&idx),
            &zeros(&[2, 3], DType::I64).unwrap(),
            false
        )
        .is_err());
}

/// Random layouts: a permuted, step-sliced, broadcast view of a base tensor, with the values
/// the view should show computed by hand from the base.
struct Strided {
    view: Tensor,
    expected: Vec<i64>,
}

fn random_view(gen: &mut Generator, out_shape: &[usize]) -> Strided {
    let n = out_shape.len();
    // Some dims are broadcast (size 1 in the source), the others are taken with a step.
    let broadcast: Vec<bool> = (0..n).map(|_| gen.below(4) == 0).collect();
    let steps: Vec<usize> = (0..n).map(|_| 1 + gen.below(2) as usize).collect();
    let src_sizes: Vec<usize> = (0..n)
        .map(|d| {
            if broadcast[d] {
                1
            } else {
                out_shape[d] * steps[d] + 1
            }
        })
        .collect();
    let perm: Vec<usize> = {
        let mut p: Vec<usize> = (0..n).collect();
        for i in (1..n).rev() {
            p.swap(i, gen.below(i as u64 + 1) as usize);
        }
        p
    };
    // Base holds the source with its dims permuted: base dim k = source dim perm[k].
    let base_sizes: Vec<usize> = perm.iter().map(|&d| src_sizes[d]).collect();
    let total: usize = base_sizes.iter().product();
    let base_vals: Vec<i64> = (0..total as i64).map(|v| v * 7 - 50).collect();
    let base = Tensor::from_vec(base_vals.clone(), &base_sizes).unwrap();
    let mut inverse = vec![0i64; n];
    for (k, &d) in perm.iter().enumerate() {
        inverse[d] = k as i64;
    }
    let mut v = base.permute(&inverse).unwrap();
    for d in 0..n {
        if !broadcast[d] {
            v = v
                .slice(d as i64, Some(1), None, steps[d] as i64)
                .unwrap()
                .narrow(d as i64, 0, out_shape[d])
                .unwrap();
        }
    }
    let v = v
        .expand(&out_shape.iter().map(|&s| s as i64).collect::<Vec<_>>())
        .unwrap();
    let base_strides: Vec<usize> = (0..n)
        .map(|k| base_sizes[k + 1..].iter().product())
        .collect();
    let count: usize = out_shape.iter().product();
    let expected = (0..count)
        .map(|lin| {
            let mut rem = lin;
            let mut off = 0;
            for d in (0..n).rev() {
                let i = rem % out_shape[d];
                rem /= out_shape[d];
                let src_i = if broadcast[d] { 0 } else { 1 + i * steps[d] };
                off += src_i * base_strides[inverse[d] as usize];
            }
            base_vals[off]
        })
        .collect();
    Strided { view: v, expected }
}

#[test]
fn pointwise_and_reductions_on_random_layouts_match_naive() {
    let mut gen = Generator::new(42);
    for _ in 0..200 {
        let n = 1 + gen.below(4) as usize;
        let shape: Vec<usize> = (0..n).map(|_| gen.below(4) as usize).collect();
        let a = random_view(&mut gen, &shape);
        let b = random_view(&mut gen, &shape);
        assert_eq!(
            a.view.to_vec::<i64>().unwrap(),
            a.expected,
            "layout read for {shape:?}"
        );
        let sum = a.view.add(&b.view).unwrap();
        let want: Vec<i64> = a
            .expected
            .iter()
            .zip(&b.expected)
            .map(|(x, y)| x + y)
            .collect();
        assert_eq!(sum.to_vec::<i64>().unwrap(), want);
        let prod = a.view.mul(&b.view).unwrap().to_dtype(DType::I32).unwrap();
        let want: Vec<i32> = a
            .expected
            .iter()
            .zip(&b.expected)
            .map(|(x, y)| (x * y) as i32)
            .collect();
        assert_eq!(prod.to_vec::<i32>().unwrap(), want);
        // Sum over the last dim against a naive loop.
        let last = *shape.last().unwrap();
        let red = a.view.sum(&[-1], false).unwrap();
        let want: Vec<i64> = if last == 0 {
            vec![0; shape[..n - 1].iter().product()]
        } else {
            a.expected.chunks(last).map(|c| c.iter().sum()).collect()
        };
        assert_eq!(
            red.to_vec::<i64>().unwrap(),
            want,
            "sum over last dim of {shape:?}"
        );
        // Copy into a strided destination and read back through the base.
        let dst = zeros(&shape, DType::I64).unwrap();
        let dst_view = dst.t_all();
        dst_view.copy_(&a.view.t_all()).unwrap();
        assert_eq!(dst.to_vec::<i64>().unwrap(), a.expected);
    }
}

/// Reverses all dims (a non-contiguous view) for the copy test above.
trait ReverseDims {
    fn t_all(&self) -> Tensor;
}
impl ReverseDims for Tensor {
    fn t_all(&self) -> Tensor {
        let dims: Vec<i64> = (0..self.dim() as i64).rev().collect();
        self.permute(&dims).unwrap()
    }
}

#[test]
fn matmul_of_a_strided_batch_with_a_matrix_or_vector_equals_each_batch_element_alone() {
    // the left operand's batch dimensions fold into rows of one product (upstream's fold);
    // a permuted left operand and a vector on the right take that path too
    let a = Tensor::from_vec(
        (0..60).map(|v| v as f64 - 29.0).collect::<Vec<_>>(),
        &[3, 4, 5],
    )
    .unwrap()
    .permute(&[1, 0, 2])
    .unwrap(); // [4, 3, 5], not contiguous
    let w = Tensor::from_vec(
        (0..10).map(|v| (v % 7) as f64 - 3.0).collect::<Vec<_>>(),
        &[5, 2],
    )
    .unwrap();
    let v = Tensor::from_vec(vec![1.0, -2.0, 0.5, 3.0, -1.0], &[5]).unwrap();
    for (right, shape) in [(&w, vec![4, 3, 2]), (&v, vec![4, 3])] {
        let batched = a.matmul(right).unwrap();
        assert_eq!(batched.shape(), &shape[..]);
        for i in 0..4 {
            let alone = a.select(0, i).unwrap().contiguous().unwrap();
            let want = alone.matmul(right).unwrap().to_vec::<f64>().unwrap();
            let got = batched.select(0, i).unwrap().to_vec::<f64>().unwrap();
            assert_eq!(got, want);
        }
    }
}

#[test]
fn matmul_matches_naive_for_int_and_float() {
    let mut gen = Generator::new(7);
    for _ in 0..40 {
        let (b, m, k, n) = (
            1 + gen.below(3) as usize,
            gen.below(4) as usize + 1,
            gen.below(5) as usize,
            gen.below(4) as usize + 1,
        );
        let av: Vec<i64> = (0..b * m * k).map(|_| gen.below(11) as i64 - 5).collect();
        let bv: Vec<i64> = (0..k * n).map(|_| gen.below(11) as i64 - 5).collect();
        let a = Tensor::from_vec(av.clone(), &[b, m, k]).unwrap();
        let w = Tensor::from_vec(bv.clone(), &[k, n]).unwrap();
        let mut want = vec![0i64; b * m * n];
        for bi in 0..b {
            for i in 0..m {
                for j in 0..n {
                    want[(bi * m + i) * n + j] = (0..k)
                        .map(|p| av[(bi * m + i) * k + p] * bv[p * n + j])
                        .sum();
                }
            }
        }
        for dtype in [DType::I64, DType::I32, DType::F32, DType::F64, DType::BF16] {
            let r = a
                .to_dtype(dtype)
                .unwrap()
                .matmul(&w.to_dtype(dtype).unwrap())
                .unwrap();
            assert_eq!(r.dtype(), dtype);
            assert_eq!(r.shape(), &[b, m, n]);
            // Small integers: every dtype is exact here (bf16 holds integers up to 256).
            let got = r.to_vec::<i64>().unwrap();
            if dtype != DType::BF16 || want.iter().all(|v| v.abs() <= 256) {
                assert_eq!(got, want, "{dtype:?}");
            }
        }
    }
}

#[test]
fn generator_is_deterministic_and_well_distributed() {
    let a = randn(&[10000], DType::F32, &mut Generator::new(3))
        .unwrap()
        .to_vec::<f64>()
        .unwrap();
    let b = randn(&[10000], DType::F32, &mut Generator::new(3))
        .unwrap()
        .to_vec::<f64>()
        .unwrap();
    assert_eq!(a, b);
    let mean = a.iter().sum::<f64>() / a.len() as f64;
    let var = a.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / a.len() as f64;
    assert!(
        mean.abs() < 0.05 && (var - 1.0).abs() < 0.05,
        "mean {mean} var {var}"
    );
    let u = rand(&[10000], DType::BF16, &mut Generator::new(4))
        .unwrap()
        .to_vec::<f64>()
        .unwrap();
    assert!(u.iter().all(|&x| (0.0..1.0).contains(&x)));
    let r = randint(-3, 4, &[5000], DType::I64, &mut Generator::new(5))
        .unwrap()
        .to_vec::<i64>()
        .unwrap();
    for v in -3..4 {
        let c = r.iter().filter(|&&x| x == v).count();
        assert!((600..830).contains(&c), "value {v} drawn {c} times");
    }
    let probs = Tensor::from_vec(vec![0.0f32, 1.0, 2.0, 0.0, 3.0], &[5]).unwrap();
    let mut g = Generator::new(6);
    let s = probs
        .multinomial(3, false, &mut g)
        .unwrap()
        .to_vec::<i64>()
        .unwrap();
    let mut sorted = s.clone();
    sorted.sort();
    assert_eq!(
        sorted,
        vec![1, 2, 4],
        "without replacement draws each nonzero category once"
    );
    assert!(probs.multinomial(4, false, &mut g).is_err());
    let t = zeros(&[1000], DType::F64).unwrap();
    t.uniform_(-2.0, 2.0, &mut g).unwrap();
    assert!(t
        .to_vec::<f64>()
        .unwrap()
        .iter()
        .all(|&x| (-2.0..2.0).contains(&x)));
    t.normal_(10.0, 0.5, &mut g).unwrap();
    let m = t.mean(&[], false).unwrap().item().unwrap().to_f64();
    assert!((m - 10.0).abs() < 0.1, "{m}");
}

#[test]
fn zero_size_dims_flow_through_ops() {
    let e = zeros(&[0, 3], DType::F32).unwrap();
    assert_eq!(
        e.add(ones(&[3], DType::F32).unwrap()).unwrap().shape(),
        &[0, 3]
    );
    assert_eq!(
        e.sum(&[0], false).unwrap().to_vec::<f32>().unwrap(),
        vec![0.0; 3]
    );
    assert_eq!(
        e.t().unwrap().matmul(&e).unwrap().to_vec::<f32>().unwrap(),
        vec![0.0; 9]
    );
    assert_eq!(e.softmax(0).unwrap().shape(), &[0, 3]);
    assert_eq!(
        cat(&[&e, &ones(&[2, 3], DType::F32).unwrap()], 0)
            .unwrap()
            .shape(),
        &[2, 3]
    );
    assert_eq!(
        e.reshape(&[3, 0, -1])
            .map(|t| t.shape().to_vec())
            .unwrap_or_default(),
        Vec::<usize>::new()
    );
    assert!(e.max().is_err());
    assert_eq!(
        e.sort(1, SortOptions::default()).unwrap().0.shape(),
        &[0, 3]
    );
}

#[test]
fn tensors_are_shared_across_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Tensor>();
    let base = zeros(&[4, 100], DType::I64).unwrap();
    std::thread::scope(|s| {
        for r in 0..4 {
            let row = base.select(0, r).unwrap();
            s.spawn(move || {
                for _ in 0..10 {
                    row.add_(Scalar::Int(r + 1)).unwrap();
                }
            });
        }
    });
    let sums = base.sum(&[1], false).unwrap().to_vec::<i64>().unwrap();
    assert_eq!(sums, vec![1000, 2000, 3000, 4000]);
    let f = ones(&[3], DType::F32).unwrap();
    f.sub_(0.5).unwrap();
    f.div_(0.25).unwrap();
    assert_eq!(f.to_vec::<f32>().unwrap(), vec![2.0; 3]);
    let i = ones(&[3], DType::I64).unwrap();
    assert!(
        i.div_(2).is_err(),
        "true division result is float: cannot go into int64"
    );
}

#[test]
fn direct_slice_access_for_contiguous_tensors() {
    let t = arange_i64(6, &[2, 3]).to_dtype(DType::F32).unwrap();
    let row = t.select(0, 1).unwrap();
    let sum = row.with_data(|x: &[f32]| x.iter().sum::<f32>()).unwrap();
    assert_eq!(sum, 3.0 + 4.0 + 5.0);
    row.with_data_mut(|x: &mut [f32]| x.iter_mut().for_each(|v| *v = -*v))
        .unwrap();
    assert_eq!(
        t.to_vec::<f32>().unwrap(),
        vec![0.0, 1.0, 2.0, -3.0, -4.0, -5.0]
    );
    assert!(
        t.t().unwrap().with_data(|_: &[f32]| ()).is_err(),
        "transposed is not contiguous"
    );
    assert!(t.with_data(|_: &[f64]| ()).is_err(), "wrong element type");
}

#[test]
fn f32_fast_path_equals_f64_rounded() {
    // Same-shape contiguous f32 +,-,*,/ run in f32 directly; the result must be bit-identical
    // to computing in f64 and rounding once (the general path, and PyTorch's f32 result).
    let mut g = Generator::new(11);
    let a = randn(&[4096], DType::F32, &mut g).unwrap();
    let b = randn(&[4096], DType::F32, &mut g)
        .unwrap()
        .mul(1e-3)
        .unwrap();
    let (a64, b64) = (
        a.to_dtype(DType::F64).unwrap(),
        b.to_dtype(DType::F64).unwrap(),
    );
    let pairs = [
        (a.add(&b).unwrap(), a64.add(&b64).unwrap()),
        (a.sub(&b).unwrap(), a64.sub(&b64).unwrap()),
        (a.mul(&b).unwrap(), a64.mul(&b64).unwrap()),
        (a.div(&b).unwrap(), a64.div(&b64).unwrap()),
    ];
    for (fast, wide) in pairs {
        let fast: Vec<u32> = fast
            .to_vec::<f32>()
            .unwrap()
            .iter()
            .map(|x| x.to_bits())
            .collect();
        let wide: Vec<u32> = wide
            .to_dtype(DType::F32)
            .unwrap()
            .to_vec::<f32>()
            .unwrap()
            .iter()
            .map(|x| x.to_bits())
            .collect();
        assert_eq!(fast, wide);
    }
}

#[test]
fn dtype_views_share_bytes_both_ways() {
    let x = Tensor::from_vec(vec![1.0f32, -2.0, 0.5, 3.0], &[2, 2]).unwrap();
    let bytes = x.view_dtype(DType::U8).unwrap();
    assert_eq!(bytes.shape(), &[2, 8]);
    assert_eq!(bytes.strides(), &[8, 1]);
    let bits = x.view_dtype(DType::I32).unwrap();
    assert_eq!(bits.to_vec::<i32>().unwrap()[0], 1.0f32.to_bits() as i32);
    // A write through the int view changes the float tensor's bytes.
    bits.select(0, 0)
        .unwrap()
        .copy_(&Tensor::from_vec(vec![2.0f32.to_bits() as i32, 0], &[2]).unwrap())
        .unwrap();
    assert_eq!(x.to_vec::<f32>().unwrap(), vec![2.0, 0.0, 0.5, 3.0]);
    // Growing the element size needs a divisible last dim with stride 1.
    let wide = x.view_dtype(DType::F64).unwrap();
    assert_eq!(wide.shape(), &[2, 1]);
    assert!(x.transpose(0, 1).unwrap().view_dtype(DType::F64).is_err());
    assert!(Tensor::from_vec(vec![1i16; 3], &[3])
        .unwrap()
        .view_dtype(DType::I32)
        .is_err());
    assert!(Tensor::from_vec(vec![1i16], &[])
        .unwrap()
        .view_dtype(DType::I8)
        .is_err());
}

#[test]
fn bool_views_of_bytes_read_nonzero_as_true_and_never_hold_other_bytes_as_bools() {
    let b = Tensor::from_vec(vec![true, false, true], &[3]).unwrap();
    let as_u8 = b.view_dtype(DType::U8).unwrap();
    assert_eq!(as_u8.to_vec::<u8>().unwrap(), vec![1, 0, 1]);
    // Writing other bytes through the u8 view turns the allocation into plain bytes first;
    // the bool tensor then reads each byte (nonzero is true).
    as_u8
        .copy_(&Tensor::from_vec(vec![2u8, 0, 7], &[3]).unwrap())
        .unwrap();
    assert_eq!(as_u8.to_vec::<u8>().unwrap(), vec![2, 0, 7]);
    assert_eq!(b.to_vec::<bool>().unwrap(), vec![true, false, true]);
    assert_eq!(
        b.to_dtype(DType::I64).unwrap().to_vec::<i64>().unwrap(),
        vec![1, 0, 1]
    );
    // Other bytes viewed as bool: reads normalize, ops see a normalized copy, writes store 0/1.
    let bytes = Tensor::from_vec(vec![0u8, 5, 255, 1], &[4]).unwrap();
    let flags = bytes.view_dtype(DType::Bool).unwrap();
    assert!(flags.shares_storage(&bytes));
    assert_eq!(
        flags.to_vec::<bool>().unwrap(),
        vec![false, true, true, true]
    );
    assert_eq!(
        flags.logical_not().unwrap().to_vec::<bool>().unwrap(),
        vec![true, false, false, false]
    );
    flags
        .select(0, 2)
        .unwrap()
        .fill_(Scalar::Bool(false))
        .unwrap();
    flags
        .select(0, 0)
        .unwrap()
        .fill_(Scalar::Bool(true))
        .unwrap();
    assert_eq!(bytes.to_vec::<u8>().unwrap(), vec![1, 5, 0, 1]);
}

#[test]
fn foreign_memory_is_shared_and_read_only_memory_refuses_writes() {
    use std::sync::{Arc, Mutex};
    use torchnative_core::storage::{Buffer, ForeignBytes, Storage};
    // The owner is a boxed Vec the test also keeps a raw pointer into.
    let mut data: Box<[f32]> = vec![1.0, 2.0, 3.0, 4.0].into_boxed_slice();
    let ptr = data.as_mut_ptr().cast::<u8>();
    let dropped = Arc::new(Mutex::new(false));
    struct Owner(#[allow(dead_code)] Box<[f32]>, Arc<Mutex<bool>>);
    impl Drop for Owner {
        fn drop(&mut self) {
            *self.1.lock().unwrap() = true;
        }
    }
    let owner = Owner(data, dropped.clone());
    let bytes = unsafe { ForeignBytes::new(ptr, 16, true, Box::new(owner)) };
    let t = Tensor::over_storage(
        Storage::new(Buffer::Foreign(bytes)),
        DType::F32,
        &[2, 2],
        &[1, 2],
        0,
    )
    .unwrap();
    assert_eq!(t.to_vec::<f32>().unwrap(), vec![1.0, 3.0, 2.0, 4.0]);
    t.add_(1.0f64).unwrap();
    assert_eq!(t.to_vec::<f32>().unwrap(), vec![2.0, 4.0, 3.0, 5.0]);
    // Out of bounds layouts are refused.
    let storage = t.storage().unwrap().clone();
    assert!(Tensor::over_storage(storage.clone(), DType::F32, &[5], &[1], 0).is_err());
    drop(t);
    assert!(!*dropped.lock().unwrap());
    drop(storage);
    assert!(
        *dropped.lock().unwrap(),
        "the owner is released with the last storage handle"
    );

    let ro = [7u8; 4];
    let bytes = unsafe { ForeignBytes::new(ro.as_ptr() as *mut u8, 4, false, Box::new(())) };
    let t = Tensor::over_storage(
        Storage::new(Buffer::Foreign(bytes)),
        DType::U8,
        &[4],
        &[1],
        0,
    )
    .unwrap();
    assert_eq!(t.to_vec::<u8>().unwrap(), vec![7; 4]);
    assert!(matches!(
        t.copy_(&Tensor::from_vec(vec![1u8; 4], &[4]).unwrap())
            .unwrap_err(),
        Error::Unsupported { .. }
    ));
    assert_eq!(ro, [7; 4]);
}

#[test]
fn barebones_unsigned_types_store_and_convert_but_refuse_mixed_promotion() {
    let x = Tensor::from_vec(vec![1u16, 2, 65535], &[3]).unwrap();
    assert_eq!(x.dtype(), DType::U16);
    assert_eq!(
        x.to_dtype(DType::I32).unwrap().to_vec::<i32>().unwrap(),
        vec![1, 2, 65535]
    );
    assert_eq!(
        x.to_dtype(DType::F32).unwrap().to_vec::<f32>().unwrap(),
        vec![1.0, 2.0, 65535.0]
    );
    let big = Tensor::from_f64s(&[1.8e19], &[1], DType::U64).unwrap();
    assert_eq!(
        big.to_vec::<u64>().unwrap(),
        vec![18_000_000_000_000_000_000]
    );
    // With floats, complex and bool they promote; with other integers upstream refuses.
    assert_eq!(promote_types(DType::U16, DType::F32), DType::F32);
    assert!(check_promotable(DType::U32, DType::Bool).is_ok());
    let err = check_promotable(DType::U16, DType::I16)
        .unwrap_err()
        .to_string();
    assert!(err.contains("uint16") && err.contains("int16"), "{err}");
    use OperandKind::*;
    assert!(result_type(&[(DType::U64, Dimensioned), (DType::I8, Dimensioned)]).is_err());
}
