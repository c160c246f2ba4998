//! The memory layout upstream's TensorIterator gives a new output: pointwise results follow the
//! inputs' stride order (a transposed input gives a transposed result), so `x.t() + 1` has the
//! strides upstream reports. Kernels compute row-major results; [`apply`] re-lays one out.
//!
//! The rules are TensorIterator's: inputs of one shape that are all contiguous give a contiguous
//! output; all non-overlapping-and-dense with equal strides give those strides; otherwise the
//! dimensions are ordered by an insertion sort over the inputs' strides (broadcast dims
//! skipped, ties broken by size, the first input deciding), and the output is dense in that order.

use torchnative_core::{Result, Tensor};

/// Strides of `t` aligned to `shape` (broadcast dims get stride 0), as TensorIterator sees them.
fn broadcast_strides(t: &Tensor, shape: &[usize]) -> Vec<usize> {
    let offset = shape.len() - t.dim();
    let mut strides = vec![0; shape.len()];
    for (i, (&size, &stride)) in t.shape().iter().zip(t.strides()).enumerate() {
        if !(size == 1 && shape[offset + i] != 1) {
            strides[offset + i] = stride;
        }
    }
    strides
}

fn is_non_overlapping_and_dense(t: &Tensor) -> bool {
    let mut dims: Vec<usize> = (0..t.dim()).filter(|&d| t.shape()[d] != 1).collect();
    dims.sort_by_key(|&d| t.strides()[d]);
    let mut expected = 1;
    for d in dims {
        if t.strides()[d] != expected {
            return false;
        }
        expected *= t.shape()[d];
    }
    true
}

/// The output strides for `shape`, or `None` when the output is simply row-major.
/// `all_same_shape` is false when a scalar operand took part (it is a 0-dim operand upstream).
pub fn output_strides(
    shape: &[usize],
    inputs: &[&Tensor],
    all_same_shape: bool,
) -> Option<Vec<usize>> {
    let ndim = shape.len();
    if ndim < 2 || inputs.is_empty() {
        return None;
    }
    let same_shape = all_same_shape && inputs.iter().all(|t| t.shape() == shape);
    if same_shape {
        if inputs.iter().all(|t| t.is_contiguous()) {
            return None;
        }
        if inputs.iter().all(|t| is_non_overlapping_and_dense(t))
            && inputs.windows(2).all(|w| w[0].strides() == w[1].strides())
        {
            return Some(inputs[0].strides().to_vec());
        }
    }
    let strides: Vec<Vec<usize>> = inputs.iter().map(|t| broadcast_strides(t, shape)).collect();
    // perm[0] is the fastest-moving dim; start from row-major (last dim fastest).
    let mut perm: Vec<usize> = (0..ndim).rev().collect();
    let should_swap = |dim0: usize, dim1: usize| -> i32 {
        for s in &strides {
            let (s0, s1) = (s[dim0], s[dim1]);
            if s0 == 0 || s1 == 0 {
                continue;
            }
            if s0 < s1 {
                return -1;
            }
            if s0 > s1 {
                return 1;
            }
            if shape[dim0] > shape[dim1] {
                return 1;
            }
        }
        0
    };
    for i in 1..ndim {
        let mut dim1 = i;
        for dim0 in (0..i).rev() {
            match should_swap(perm[dim0], perm[dim1]) {
                c if c > 0 => {
                    perm.swap(dim0, dim1);
                    dim1 = dim0;
                }
                c if c < 0 => break,
                _ => {}
            }
        }
    }
    if perm.iter().enumerate().all(|(i, &d)| d == ndim - 1 - i) {
        return None;
    }
    let mut out = vec![0; ndim];
    let mut next = 1;
    for &d in &perm {
        out[d] = next;
        next *= shape[d];
    }
    Some(out)
}

/// `result` (row-major) laid out with `strides`: a new dense buffer viewed with those strides.
pub fn apply(result: &Tensor, strides: &[usize]) -> Result<Tensor> {
    let flat = Tensor::empty_on(&[result.numel()], result.dtype(), result.device())?;
    let view = flat.as_strided(result.shape(), strides, 0)?;
    if result.storage().is_some() {
        view.copy_(result)?;
    }
    // A fresh result, not a view of the buffer it was laid out in.
    Ok(view.without_base())
}
