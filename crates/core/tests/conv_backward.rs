//! The pooling and upsampling backwards against their forwards. Average pooling and
//! interpolation are linear maps, so their backward is the adjoint: for any input `x` and
//! output gradient `g`, `<forward(x), g> == <x, backward(g)>`. Max pooling's backward sends
//! each gradient to the maximum the forward picked.

use torchnative_core::ops::conv::{self, Interp, PoolKind, PoolOptions};
use torchnative_core::*;

/// Deterministic, irregular values (no ties that would matter to max pooling).
fn values(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
        })
        .collect()
}

fn tensor(shape: &[usize], seed: u64) -> Tensor {
    let n = shape.iter().product();
    Tensor::from_f64s(&values(n, seed), shape, DType::F64).unwrap()
}

fn dot(a: &Tensor, b: &Tensor) -> f64 {
    let (a, b) = (a.to_vec::<f64>().unwrap(), b.to_vec::<f64>().unwrap());
    assert_eq!(a.len(), b.len());
    a.iter().zip(&b).map(|(x, y)| x * y).sum()
}

fn assert_adjoint(x: &Tensor, y: &Tensor, g: &Tensor, gx: &Tensor, what: &str) {
    assert_eq!(gx.shape(), x.shape(), "{what}: gradient shape");
    let (l, r) = (dot(y, g), dot(x, gx));
    assert!(
        (l - r).abs() <= 1e-12 * (1.0 + l.abs()),
        "{what}: <f(x), g> = {l} but <x, f'(g)> = {r}"
    );
}

fn opts(kernel: &[i64], stride: &[i64], padding: &[i64], ceil_mode: bool) -> PoolOptions {
    PoolOptions {
        kernel: kernel.to_vec(),
        stride: stride.to_vec(),
        padding: padding.to_vec(),
        dilation: vec![1; kernel.len()],
        ceil_mode,
    }
}

#[test]
fn avg_pool_backward_is_the_adjoint_of_avg_pool() {
    let cases: Vec<(Vec<usize>, PoolOptions)> = vec![
        (vec![2, 3, 5, 6], opts(&[2, 2], &[2, 2], &[0, 0], false)),
        (vec![1, 2, 5, 7], opts(&[3, 2], &[2, 1], &[1, 1], true)),
        (vec![2, 4, 7], opts(&[3, 3], &[1, 2], &[1, 0], false)),
        (
            vec![1, 1, 3, 4, 5],
            opts(&[2, 2, 3], &[1, 2, 2], &[1, 0, 1], true),
        ),
    ];
    for (i, (shape, o)) in cases.iter().enumerate() {
        for (count_include_pad, divisor) in [(true, None), (false, None), (true, Some(5))] {
            let kind = PoolKind::Avg {
                count_include_pad,
                divisor,
            };
            let x = tensor(shape, i as u64);
            let y = conv::pool(&x, kind, o).unwrap().0;
            let g = tensor(y.shape(), 100 + i as u64);
            let gx = conv::pool_backward(&g, &x, kind, o, None).unwrap();
            assert_adjoint(&x, &y, &g, &gx, &format!("avg_pool {shape:?} {kind:?}"));
        }
    }
}

#[test]
fn max_pool_backward_sends_each_gradient_to_its_maximum() {
    let x = tensor(&[2, 3, 5, 6], 7);
    let o = PoolOptions {
        dilation: vec![1, 2],
        ..opts(&[2, 3], &[2, 1], &[1, 1], true)
    };
    let (y, idx) = conv::pool(&x, PoolKind::Max, &o).unwrap();
    let g = tensor(y.shape(), 8);
    let gx = conv::pool_backward(&g, &x, PoolKind::Max, &o, Some(&idx)).unwrap();
    // each input position receives the sum of the gradients of the outputs it was the maximum
    // of, so <x, gx> equals <y, g>, and gx is zero wherever x was no window's maximum
    assert_adjoint(&x, &y, &g, &gx, "max_pool");
    let picked: std::collections::HashSet<(usize, i64)> = idx
        .to_vec::<i64>()
        .unwrap()
        .iter()
        .enumerate()
        .map(|(j, &at)| (j / y.shape()[2..].iter().product::<usize>(), at))
        .collect();
    for (k, v) in gx.to_vec::<f64>().unwrap().iter().enumerate() {
        if !picked.contains(&(k / 30, (k % 30) as i64)) {
            assert_eq!(*v, 0.0, "position {k} was nobody's maximum");
        }
    }
    // indices of the wrong shape or out of bounds are refused
    let bad = Tensor::from_i64s(&[99; 2], &[2], DType::I64).unwrap();
    assert!(conv::pool_backward(&g, &x, PoolKind::Max, &o, Some(&bad)).is_err());
    let far = Tensor::from_i64s(
        &vec![1000; g.shape().iter().product()],
        g.shape(),
        DType::I64,
    )
    .unwrap();
    assert!(conv::pool_backward(&g, &x, PoolKind::Max, &o, Some(&far)).is_err());
}

#[test]
fn adaptive_pool_backwards_match_their_forwards() {
    for (shape, out) in [
        (vec![2, 3, 7, 5], vec![3, 2]),
        (vec![3, 6, 4], vec![4, 3]),
        (vec![1, 2, 3, 5, 4], vec![2, 3, 3]),
    ] {
        let nd = out.len();
        let x = tensor(&shape, 3);
        let y = conv::adaptive_pool(&x, &out, false).unwrap().0;
        let g = tensor(y.shape(), 4);
        let gx = conv::adaptive_pool_backward(&g, &x, nd, None).unwrap();
        assert_adjoint(&x, &y, &g, &gx, &format!("adaptive_avg_pool {shape:?}"));
        let (ym, idx_m) = conv::adaptive_pool(&x, &out, true).unwrap();
        let gm = conv::adaptive_pool_backward(&g, &x, nd, Some(&idx_m)).unwrap();
        assert_adjoint(&x, &ym, &g, &gm, &format!("adaptive_max_pool {shape:?}"));
    }
    // a gradient of the wrong shape is refused
    let x = tensor(&[2, 3, 7, 5], 3);
    assert!(conv::adaptive_pool_backward(&tensor(&[2, 3, 2], 1), &x, 2, None).is_err());
}

#[test]
fn upsample_backward_is_the_adjoint_of_upsample() {
    let modes = [
        Interp::Nearest,
        Interp::NearestExact,
        Interp::Linear {
            align_corners: false,
        },
        Interp::Linear {
            align_corners: true,
        },
        Interp::Cubic {
            align_corners: false,
        },
        Interp::Cubic {
            align_corners: true,
        },
    ];
    for (shape, out, scales) in [
        (vec![2, 3, 4], vec![9], vec![None]),
        (vec![1, 2, 3, 5], vec![7, 4], vec![None, None]),
        (vec![1, 2, 4, 3], vec![8, 6], vec![Some(2.0), Some(2.0)]),
        (vec![1, 1, 2, 3, 4], vec![3, 5, 2], vec![None, None, None]),
    ] {
        for mode in modes {
            if matches!(mode, Interp::Cubic { .. }) && out.len() != 2 {
                continue;
            }
            let x = tensor(&shape, 5);
            let y = conv::upsample(&x, &out, &scales, mode).unwrap();
            let g = tensor(y.shape(), 6);
            let gx = conv::upsample_backward(&g, &shape, &scales, mode).unwrap();
            assert_adjoint(
                &x,
                &y,
                &g,
                &gx,
                &format!("upsample {shape:?} -> {out:?} {mode:?}"),
            );
        }
    }
    // an input size that does not match the gradient's batch and channels is refused
    let g = tensor(&[1, 2, 6], 1);
    assert!(conv::upsample_backward(&g, &[1, 3, 3], &[None], Interp::Nearest).is_err());
}
