//! Sizes, strides and storage offset, the view arithmetic on them, and the one strided
//! iteration mechanism every op uses to walk tensors in logical (row-major) order.

use crate::error::{invalid, Error, Result};

/// The geometry of a tensor inside its storage (element units; strides are non-negative,
/// as in PyTorch).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// Size of each dimension.
    pub sizes: Vec<usize>,
    /// Elements to skip per step in each dimension.
    pub strides: Vec<usize>,
    /// Storage index of element 0.
    pub offset: usize,
}

/// Row-major strides for `sizes` (size-0/1 dims get the stride they would have).
pub fn contiguous_strides(sizes: &[usize]) -> Vec<usize> {
    let mut strides = vec![1usize; sizes.len()];
    for d in (0..sizes.len().saturating_sub(1)).rev() {
        // Saturating: a shape with a 0 dim may have huge other dims (no elements, no overflow).
        strides[d] = strides[d + 1].saturating_mul(sizes[d + 1].max(1));
    }
    strides
}

/// Number of elements, refusing shapes whose element count overflows `usize`.
pub fn checked_numel(op: &'static str, sizes: &[usize]) -> Result<usize> {
    sizes
        .iter()
        .try_fold(1usize, |acc, &s| acc.checked_mul(s))
        .ok_or_else(|| invalid(op, format!("shape {sizes:?} has too many elements")))
}

/// Wraps a possibly negative dim into `[0, ndim)`. A 0-dim tensor accepts dims -1 and 0.
pub fn wrap_dim(op: &'static str, dim: i64, ndim: usize) -> Result<usize> {
    let n = ndim.max(1) as i64;
    if dim < -n || dim >= n {
        return Err(Error::DimOutOfRange { op, dim, ndim });
    }
    Ok(if dim < 0 {
        (dim + n) as usize
    } else {
        dim as usize
    })
}

/// The broadcast shape of two shapes (numpy/PyTorch rules), or a shape error naming both.
pub fn broadcast_shapes(op: &'static str, a: &[usize], b: &[usize]) -> Result<Vec<usize>> {
    let n = a.len().max(b.len());
    let mut out = vec![0; n];
    for i in 0..n {
        let da = if i + a.len() >= n {
            a[i + a.len() - n]
        } else {
            1
        };
        let db = if i + b.len() >= n {
            b[i + b.len() - n]
        } else {
            1
        };
        out[i] = if da == db || db == 1 {
            da
        } else if da == 1 {
            db
        } else {
            return Err(Error::ShapeMismatch {
                op,
                lhs: a.to_vec(),
                rhs: b.to_vec(),
                reason: format!(
                    "size {da} does not match size {db} at non-singleton dimension {i}"
                ),
            });
        };
    }
    Ok(out)
}

/// Resolves a `view`/`reshape` shape with at most one `-1` against `numel`.
pub fn infer_shape(op: &'static str, shape: &[i64], numel: usize) -> Result<Vec<usize>> {
    let mut infer_at = None;
    let mut known = 1usize;
    for (i, &s) in shape.iter().enumerate() {
        if s == -1 {
            if infer_at.replace(i).is_some() {
                return Err(invalid(op, "only one dimension can be inferred"));
            }
        } else if s < 0 {
            return Err(invalid(op, format!("invalid shape dimension {s}")));
        } else {
            known = known
                .checked_mul(s as usize)
                .ok_or_else(|| invalid(op, format!("shape {shape:?} is too large")))?;
        }
    }
    let mut out: Vec<usize> = shape.iter().map(|&s| s.max(0) as usize).collect();
    match infer_at {
        Some(i) => {
            if known == 0 || !numel.is_multiple_of(known) {
                return Err(invalid(
                    op,
                    format!("shape {shape:?} is invalid for input of size {numel}"),
                ));
            }
            out[i] = numel / known;
        }
        None if known != numel => {
            return Err(invalid(
                op,
                format!("shape {shape:?} is invalid for input of size {numel}"),
            ));
        }
        None => {}
    }
    Ok(out)
}

/// PyTorch's `computeStride`: strides that let `new_sizes` alias the same elements as
/// (`old_sizes`, `old_strides`) without copying, or `None` when only a copy can do it.
pub fn compute_view_strides(
    old_sizes: &[usize],
    old_strides: &[usize],
    new_sizes: &[usize],
) -> Option<Vec<usize>> {
    if old_sizes.is_empty() {
        return Some(vec![1; new_sizes.len()]);
    }
    let numel: usize = old_sizes.iter().product();
    if numel == 0 && old_sizes == new_sizes {
        return Some(old_strides.to_vec());
    }
    let mut new_strides = vec![0usize; new_sizes.len()];
    if numel == 0 {
        for d in (0..new_sizes.len()).rev() {
            new_strides[d] = if d + 1 == new_sizes.len() {
                1
            } else {
                new_sizes[d + 1].max(1).saturating_mul(new_strides[d + 1])
            };
        }
        return Some(new_strides);
    }
    let mut view_d = new_sizes.len() as isize - 1;
    let mut chunk_base_stride = *old_strides.last()?;
    let mut tensor_numel = 1usize;
    let mut view_numel = 1usize;
    for tensor_d in (0..old_sizes.len()).rev() {
        tensor_numel *= old_sizes[tensor_d];
        let chunk_ends = tensor_d == 0
            || (old_sizes[tensor_d - 1] != 1
                && old_strides[tensor_d - 1] != tensor_numel * chunk_base_stride);
        if chunk_ends {
            while view_d >= 0 && (view_numel < tensor_numel || new_sizes[view_d as usize] == 1) {
                new_strides[view_d as usize] = view_numel * chunk_base_stride;
                view_numel *= new_sizes[view_d as usize];
                view_d -= 1;
            }
            if view_numel != tensor_numel {
                return None;
            }
            if tensor_d > 0 {
                chunk_base_stride = old_strides[tensor_d - 1];
                tensor_numel = 1;
                view_numel = 1;
            }
        }
    }
    if view_d != -1 {
        return None;
    }
    Some(new_strides)
}

impl Layout {
    /// A row-major layout at offset 0.
    pub fn contiguous(sizes: &[usize]) -> Layout {
        Layout {
            sizes: sizes.to_vec(),
            strides: contiguous_strides(sizes),
            offset: 0,
        }
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.sizes.iter().product()
    }

    /// True when elements are laid out row-major without gaps (size-1 dims ignored).
    pub fn is_contiguous(&self) -> bool {
        if self.sizes.contains(&0) {
            return true;
        }
        let mut expected = 1;
        for d in (0..self.sizes.len()).rev() {
            if self.sizes[d] == 0 {
                return true;
            }
            if self.sizes[d] != 1 {
                if self.strides[d] != expected {
                    return false;
                }
                expected *= self.sizes[d];
            }
        }
        true
    }

    /// One past the largest storage index this layout touches (0 when empty).
    pub fn storage_extent(&self) -> usize {
        if self.sizes.contains(&0) {
            return 0;
        }
        self.offset
            + self
                .sizes
                .iter()
                .zip(&self.strides)
                .map(|(&s, &st)| (s - 1) * st)
                .sum::<usize>()
            + 1
    }
}

/// Calls `f` with the storage offset of every operand at each index of `sizes`, in row-major
/// order. All operands share `sizes` (broadcast operands pass stride 0). Dimensions that are
/// contiguous for every operand are merged so the inner loop is long.
pub fn for_each_offsets<const N: usize>(
    sizes: &[usize],
    strides: [&[usize]; N],
    offsets: [usize; N],
    mut f: impl FnMut([usize; N]),
) {
    for_each_run(sizes, strides, offsets, |start, len, step| {
        let mut cur = start;
        for _ in 0..len {
            f(cur);
            for (c, st) in cur.iter_mut().zip(&step) {
                *c += st;
            }
        }
    });
}

/// [`for_each_offsets`] a run at a time: `f(start, len, step)` covers the `len` indices of
/// the innermost merged dimension, operand `k`'s elements at `start[k] + i * step[k]`. A step
/// of 1 is a plain slice and 0 a broadcast value, so callers can write loops the compiler
/// vectorizes instead of one call per element.
pub fn for_each_run<const N: usize>(
    sizes: &[usize],
    strides: [&[usize]; N],
    offsets: [usize; N],
    mut f: impl FnMut([usize; N], usize, [usize; N]),
) {
    if sizes.contains(&0) {
        return;
    }
    // Coalesce: drop size-1 dims, then merge dim d into d+1 when every operand allows it.
    let mut merged: Vec<(usize, [usize; N])> = Vec::with_capacity(sizes.len());
    for d in 0..sizes.len() {
        let size = sizes[d];
        if size == 1 {
            continue;
        }
        let st: [usize; N] = std::array::from_fn(|k| strides[k][d]);
        if let Some(last) = merged.last_mut() {
            if (0..N).all(|k| last.1[k] == st[k] * size) {
                last.0 *= size;
                last.1 = st;
                continue;
            }
        }
        merged.push((size, st));
    }
    let Some(&(inner_size, inner_strides)) = merged.last() else {
        f(offsets, 1, [0; N]);
        return;
    };
    let outer = &merged[..merged.len() - 1];
    let mut index = vec![0usize; outer.len()];
    let mut base = offsets;
    loop {
        f(base, inner_size, inner_strides);
        // Odometer increment over the outer dims.
        let mut d = outer.len();
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            index[d] += 1;
            for (b, st) in base.iter_mut().zip(&outer[d].1) {
                *b += st;
            }
            if index[d] < outer[d].0 {
                break;
            }
            for (b, st) in base.iter_mut().zip(&outer[d].1) {
                *b -= st * outer[d].0;
            }
            index[d] = 0;
        }
    }
}

/// Dense strides that keep the dimension order of `strides` (upstream's
/// `infer_dense_strides`): dims are sorted from fastest to slowest by stride (ties and
/// size-0/1 strides resolved as TensorIterator does, row-major order otherwise) and laid out
/// densely in that order.
pub fn infer_dense_strides(sizes: &[usize], strides: &[usize]) -> Vec<usize> {
    let ndim = sizes.len();
    // perm[0] is the fastest-moving dim; start from row-major (last dim fastest).
    let mut perm: Vec<usize> = (0..ndim).rev().collect();
    let should_swap = |d0: usize, d1: usize| -> i32 {
        let (s0, s1) = (strides[d0], strides[d1]);
        if s0 == 0 || s1 == 0 {
            return 0;
        }
        if s0 < s1 {
            return -1;
        }
        if s0 > s1 {
            return 1;
        }
        if sizes[d0] > sizes[d1] {
            return 1;
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
    let mut out = vec![0; ndim];
    let mut next = 1usize;
    for &d in &perm {
        out[d] = next;
        next = next.saturating_mul(sizes[d].max(1));
    }
    out
}

/// Channels-last strides of a 4-d (NHWC) or 5-d (NDHWC) shape; row-major for other ranks.
pub fn channels_last_strides(sizes: &[usize]) -> Vec<usize> {
    let n = sizes.len();
    if n != 4 && n != 5 {
        return contiguous_strides(sizes);
    }
    // Fastest to slowest: C, then the spatial dims from last to first, then N.
    let mut order: Vec<usize> = vec![1];
    order.extend((2..n).rev());
    order.push(0);
    let mut out = vec![0; n];
    let mut next = 1usize;
    for d in order {
        out[d] = next;
        next = next.saturating_mul(sizes[d].max(1));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Naive reference: offsets by explicit multi-index arithmetic.
    fn naive_offsets(sizes: &[usize], strides: &[usize], offset: usize) -> Vec<usize> {
        let n: usize = sizes.iter().product();
        let mut out = Vec::new();
        for linear in 0..n {
            let mut rem = linear;
            let mut off = offset;
            for d in (0..sizes.len()).rev() {
                off += (rem % sizes[d]) * strides[d];
                rem /= sizes[d];
            }
            out.push(off);
        }
        out
    }

    #[test]
    fn iteration_matches_naive_for_many_layouts() {
        let cases: Vec<(Vec<usize>, Vec<usize>, usize)> = vec![
            (vec![], vec![], 3),
            (vec![2, 3], vec![3, 1], 0),
            (vec![3, 2], vec![1, 3], 0),       // transposed
            (vec![2, 3, 4], vec![0, 4, 1], 5), // expanded
            (vec![4, 1, 3], vec![6, 7, 2], 1), // sliced with step, size-1 dim
            (vec![2, 0, 3], vec![3, 3, 1], 0), // empty
            (vec![2, 2, 2, 2], vec![8, 4, 2, 1], 0),
        ];
        for (sizes, strides, off) in cases {
            let mut got = Vec::new();
            for_each_offsets(&sizes, [&strides[..]], [off], |[o]| got.push(o));
            assert_eq!(
                got,
                naive_offsets(&sizes, &strides, off),
                "{sizes:?} {strides:?}"
            );
        }
    }

    #[test]
    fn two_operand_iteration() {
        let sizes = [2, 3];
        let a = [3, 1];
        let b = [1, 2];
        let mut got = Vec::new();
        for_each_offsets(&sizes, [&a[..], &b[..]], [0, 10], |o| got.push(o));
        assert_eq!(
            got,
            vec![[0, 10], [1, 12], [2, 14], [3, 11], [4, 13], [5, 15]]
        );
    }

    #[test]
    fn runs_cover_the_same_offsets_in_the_same_order() {
        // (sizes, strides of two operands): contiguous, broadcast last dim, broadcast rows,
        // transposed, size-1 dims, a 0-dim tensor, an empty one.
        let cases: [(&[usize], &[usize], &[usize]); 7] = [
            (&[2, 3, 4], &[12, 4, 1], &[12, 4, 1]),
            (&[2, 3, 4], &[12, 4, 1], &[3, 1, 0]),
            (&[2, 3, 4], &[12, 4, 1], &[0, 0, 1]),
            (&[3, 4], &[1, 3], &[4, 1]),
            (&[1, 5, 1, 2], &[10, 2, 2, 1], &[0, 1, 0, 5]),
            (&[], &[], &[]),
            (&[2, 0, 3], &[3, 3, 1], &[0, 3, 1]),
        ];
        for (sizes, a, b) in cases {
            let mut each = Vec::new();
            for_each_offsets(sizes, [a, b], [1, 7], |o| each.push(o));
            let mut runs = Vec::new();
            let mut lens = Vec::new();
            for_each_run(sizes, [a, b], [1, 7], |start, len, step| {
                lens.push(len);
                runs.extend((0..len).map(|i| [start[0] + i * step[0], start[1] + i * step[1]]));
            });
            assert_eq!(runs, each, "{sizes:?} {a:?} {b:?}");
            assert_eq!(runs.len(), sizes.iter().product::<usize>());
            // Mergeable dims make one long run: fewer runs than outer indices.
            if sizes == [2, 3, 4] && a == b {
                assert_eq!(lens, vec![24]);
            }
        }
    }

    #[test]
    fn view_strides_like_pytorch() {
        // contiguous reshape
        assert_eq!(
            compute_view_strides(&[2, 6], &[6, 1], &[3, 4]),
            Some(vec![4, 1])
        );
        // transposed: flattening needs a copy
        assert_eq!(compute_view_strides(&[3, 2], &[1, 3], &[6]), None);
        // transposed: splitting a dim is fine
        assert_eq!(
            compute_view_strides(&[4, 2], &[1, 4], &[2, 2, 2]),
            Some(vec![2, 1, 4])
        );
        // size-1 dims anywhere
        assert_eq!(
            compute_view_strides(&[2, 3], &[3, 1], &[1, 2, 1, 3]),
            Some(vec![6, 3, 3, 1])
        );
    }

    #[test]
    fn broadcasting_and_infer() {
        assert_eq!(broadcast_shapes("add", &[3, 1], &[4]).unwrap(), vec![3, 4]);
        let e = broadcast_shapes("add", &[3], &[4]).unwrap_err().to_string();
        assert!(
            e.contains("[3]") && e.contains("[4]") && e.contains("add"),
            "{e}"
        );
        assert_eq!(infer_shape("view", &[-1, 2], 6).unwrap(), vec![3, 2]);
        assert!(infer_shape("view", &[-1, -1], 6).is_err());
        assert!(infer_shape("view", &[4], 6).is_err());
        assert!(infer_shape("view", &[-1, 0], 0).is_err());
        assert!(wrap_dim("sum", 2, 2).is_err());
        assert_eq!(wrap_dim("sum", -1, 0).unwrap(), 0);
    }
}
