//! Indexing and shape ops: index_select, gather, scatter, embedding, masked_select,
//! advanced indexing, cat/stack/split/chunk, tril/triu, sort/topk, repeat, flip, roll, pad.

use crate::dtype::{DType, Scalar};
use crate::error::{invalid, Error, Result};
use crate::layout::{checked_numel, for_each_offsets, wrap_dim};
use crate::ops::creation::full;
use crate::ops::pointwise::{add_elements, where_};
use crate::storage::Element;
use crate::tensor::{broadcast_all_shapes, result_type_of, Tensor};
use crate::{with_dtype, Device};

fn require_index_dtype(op: &'static str, index: &Tensor) -> Result<()> {
    if !matches!(index.dtype(), DType::I64 | DType::I32) {
        return Err(invalid(
            op,
            format!(
                "expected index to be int64 or int32, got {}",
                index.dtype().name()
            ),
        ));
    }
    Ok(())
}

/// Index values checked against `size` (no negative indices, as index_select/gather/embedding).
pub(crate) fn index_values(op: &'static str, index: &Tensor, size: usize) -> Result<Vec<usize>> {
    require_index_dtype(op, index)?;
    index
        .to_vec::<i64>()?
        .into_iter()
        .map(|i| {
            if i >= 0 && (i as u64) < size as u64 {
                Ok(i as usize)
            } else {
                Err(Error::IndexOutOfRange { op, index: i, size })
            }
        })
        .collect()
}

/// Index values where negatives count from the end (advanced indexing).
fn index_values_wrapping(op: &'static str, index: &Tensor, size: usize) -> Result<Vec<usize>> {
    require_index_dtype(op, index)?;
    index
        .to_vec::<i64>()?
        .into_iter()
        .map(|i| {
            let j = if i < 0 { i + size as i64 } else { i };
            if j >= 0 && (j as u64) < size as u64 {
                Ok(j as usize)
            } else {
                Err(Error::IndexOutOfRange { op, index: i, size })
            }
        })
        .collect()
}

/// `torch.nonzero(t)`: int64 `[count, ndim]` coordinates of nonzero elements, row-major.
pub fn nonzero(t: &Tensor) -> Result<Tensor> {
    let flags = t.ne(false)?.to_vec::<bool>()?;
    let shape = t.shape();
    let mut coords = Vec::new();
    let mut count = 0;
    for (lin, &f) in flags.iter().enumerate() {
        if f {
            count += 1;
            let mut rem = lin;
            let start = coords.len();
            coords.resize(start + shape.len(), 0i64);
            for d in (0..shape.len()).rev() {
                coords[start + d] = (rem % shape[d]) as i64;
                rem /= shape[d];
            }
        }
    }
    Tensor::from_i64s(&coords, &[count, shape.len()], DType::I64)
}

/// Storage offsets selected by advanced indexing of `t` with `indices` on its leading dims,
/// and the result shape (broadcast index shape followed by the remaining dims).
pub(crate) fn advanced_index_offsets(
    op: &'static str,
    t: &Tensor,
    indices: &[Tensor],
) -> Result<(Vec<usize>, Vec<usize>)> {
    // Bool masks expand into one int64 index per masked dim.
    let mut long_indices: Vec<Tensor> = Vec::new();
    for idx in indices {
        if idx.dtype() == DType::Bool {
            let d0 = long_indices.len();
            if d0 + idx.dim() > t.dim() || idx.shape() != &t.shape()[d0..d0 + idx.dim()] {
                return Err(Error::ShapeMismatch {
                    op,
                    lhs: t.shape().to_vec(),
                    rhs: idx.shape().to_vec(),
                    reason: format!("mask does not match the indexed tensor at dim {d0}"),
                });
            }
            let nz = nonzero(idx)?;
            for k in 0..idx.dim() {
                long_indices.push(nz.select(1, k as i64)?);
            }
        } else {
            long_indices.push(idx.clone());
        }
    }
    let k = long_indices.len();
    if k > t.dim() {
        return Err(invalid(
            op,
            format!("too many indices for tensor of dimension {}", t.dim()),
        ));
    }
    let refs: Vec<&Tensor> = long_indices.iter().collect();
    let bshape = broadcast_all_shapes(op, &refs)?;
    let rest_sizes = &t.shape()[k..];
    let rest_strides = &t.strides()[k..];
    let mut result_shape = bshape.clone();
    result_shape.extend_from_slice(rest_sizes);
    checked_numel(op, &result_shape)?;
    if t.device() == Device::Meta {
        return Ok((vec![], result_shape));
    }
    let mut bases = crate::error::filled_vec(op, bshape.iter().product(), t.storage_offset())?;
    for (d, idx) in long_indices.iter().enumerate() {
        let vals = index_values_wrapping(op, &idx.broadcast_to(&bshape)?, t.shape()[d])?;
        for (b, v) in bases.iter_mut().zip(vals) {
            *b += v * t.strides()[d];
        }
    }
    let mut offsets = crate::error::reserve_vec(op, checked_numel(op, &result_shape)?)?;
    for b in bases {
        for_each_offsets(rest_sizes, [rest_strides], [b], |[o]| offsets.push(o));
    }
    Ok((offsets, result_shape))
}

/// Reads the elements at `offsets` of `t`'s storage into a new contiguous tensor.
fn take_offsets(
    op: &'static str,
    t: &Tensor,
    offsets: &[usize],
    shape: &[usize],
) -> Result<Tensor> {
    let Some(storage) = t.storage_ref() else {
        return Tensor::meta(shape, t.dtype());
    };
    let buf = storage.read();
    let out = crate::storage::gather(op, t.dtype(), &buf, offsets)?;
    drop(buf);
    Tensor::from_buffer(op, out, shape)
}

/// Which combination `scatter` applies at the destination.
#[derive(Clone, Copy, PartialEq)]
enum ScatterReduce {
    Replace,
    Add,
}

/// Where each element of `index` points inside a tensor of `layout` along `dim`: iterates
/// the index shape with the other dims' strides, adding `index * stride[dim]`.
fn scatter_gather_offsets(
    op: &'static str,
    target: &Tensor,
    dim: usize,
    index: &Tensor,
) -> Result<Vec<usize>> {
    let idx = index_values(op, index, target.shape().get(dim).copied().unwrap_or(1))?;
    // One stride per index dim (a 0-dim target takes a 1-D index: stride 0).
    let mut strides: Vec<usize> = (0..index.dim())
        .map(|d| target.strides().get(d).copied().unwrap_or(0))
        .collect();
    let dim_stride = target.strides().get(dim).copied().unwrap_or(0);
    if let Some(s) = strides.get_mut(dim) {
        *s = 0;
    }
    let mut offsets = Vec::with_capacity(idx.len());
    let mut it = idx.iter();
    for_each_offsets(
        index.shape(),
        [&strides[..]],
        [target.storage_offset()],
        |[o]| {
            if let Some(&i) = it.next() {
                offsets.push(o + i * dim_stride);
            }
        },
    );
    Ok(offsets)
}

fn check_index_shape(
    op: &'static str,
    t: &Tensor,
    dim: usize,
    index: &Tensor,
    other: Option<&Tensor>,
) -> Result<()> {
    if index.dim() != t.dim() && !(index.dim() <= 1 && t.dim() <= 1) {
        return Err(invalid(
            op,
            "index tensor must have the same number of dimensions as input tensor",
        ));
    }
    for d in 0..index.dim() {
        let too_big = (d != dim && index.shape()[d] > t.shape()[d])
            || other.is_some_and(|o| o.dim() == index.dim() && index.shape()[d] > o.shape()[d]);
        if too_big {
            return Err(Error::ShapeMismatch {
                op,
                lhs: t.shape().to_vec(),
                rhs: index.shape().to_vec(),
                reason: format!("index size exceeds the tensor at dimension {d}"),
            });
        }
    }
    Ok(())
}

fn scatter_impl(
    op: &'static str,
    t: &Tensor,
    dim: i64,
    index: &Tensor,
    src: &Tensor,
    reduce: ScatterReduce,
) -> Result<Tensor> {
    let d = wrap_dim(op, dim, t.dim())?;
    check_index_shape(
        op,
        t,
        d,
        index,
        if src.dim() == 0 { None } else { Some(src) },
    )?;
    if t.device() == Device::Meta {
        return Tensor::meta(t.shape(), t.dtype());
    }
    let out = t.deep_clone()?;
    let dst_offsets = scatter_gather_offsets(op, &out, d, index)?;
    // Source elements at the index positions (a 0-dim src is a fill value).
    let src_view = if src.dim() == 0 {
        src.broadcast_to(index.shape())?
    } else {
        let mut s = src.clone();
        for k in 0..index.dim() {
            s = s.narrow(k as i64, 0, index.shape()[k])?;
        }
        s
    };
    let storage = out.storage_ref().ok_or(Error::UnsupportedDevice {
        op,
        device: "meta".into(),
    })?;
    with_dtype!(t.dtype(), T => {
        let vals = src_view.to_vec::<T>()?;
        let mut buf = storage.write();
        let data = crate::storage::typed_mut::<T>(op, &mut buf)?;
        for (&o, &v) in dst_offsets.iter().zip(&vals) {
            data[o] = if reduce == ScatterReduce::Add { add_elements(data[o], v) } else { v };
        }
    });
    Ok(out)
}

/// Options of `sort`.
#[derive(Debug, Clone, Copy, Default)]
pub struct SortOptions {
    /// Largest first; equal values still keep their original order.
    pub descending: bool,
}

/// Total order used by sort: NaN sorts above every number (as PyTorch does).
fn cmp_nan_last(a: f64, b: f64) -> std::cmp::Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => std::cmp::Ordering::Equal,
        (true, false) => std::cmp::Ordering::Greater,
        (false, true) => std::cmp::Ordering::Less,
        _ => a.partial_cmp(&b).unwrap_or(std::cmp::Ordering::Equal),
    }
}

impl Tensor {
    /// `torch.index_select(self, dim, index)` (1-D int index; no negative indices).
    pub fn index_select(&self, dim: i64, index: &Tensor) -> Result<Tensor> {
        let op = "index_select";
        if index.dim() > 1 {
            return Err(invalid(op, "index_select(): index should be a vector"));
        }
        if self.dim() == 0 {
            index_values(op, index, 1)?;
            return self
                .reshape(&[1])?
                .index(&[index.reshape(&[-1])?])?
                .reshape(&[]);
        }
        let d = wrap_dim(op, dim, self.dim())?;
        index_values(op, index, self.shape()[d])?;
        let moved = self.transpose(0, d as i64)?;
        moved
            .index(&[index.reshape(&[-1])?])?
            .transpose(0, d as i64)?
            .with_row_major_strides()
    }

    /// `torch.gather(self, dim, index)`: `out[i][j] = self[index[i][j]][j]` for dim 0.
    pub fn gather(&self, dim: i64, index: &Tensor) -> Result<Tensor> {
        let op = "gather";
        let d = wrap_dim(op, dim, self.dim())?;
        check_index_shape(op, self, d, index, None)?;
        let offsets = scatter_gather_offsets(op, self, d, index)?;
        take_offsets(op, self, &offsets, index.shape())
    }

    /// `torch.scatter(self, dim, index, src)` (out of place).
    pub fn scatter(&self, dim: i64, index: &Tensor, src: &Tensor) -> Result<Tensor> {
        scatter_impl(
            "scatter",
            self,
            dim,
            index,
            &src.to_dtype(self.dtype())?,
            ScatterReduce::Replace,
        )
    }

    /// `torch.scatter(self, dim, index, value)`.
    pub fn scatter_value(&self, dim: i64, index: &Tensor, value: Scalar) -> Result<Tensor> {
        scatter_impl(
            "scatter",
            self,
            dim,
            index,
            &Tensor::scalar_tensor(value, self.dtype()),
            ScatterReduce::Replace,
        )
    }

    /// `torch.scatter_add(self, dim, index, src)`.
    pub fn scatter_add(&self, dim: i64, index: &Tensor, src: &Tensor) -> Result<Tensor> {
        if src.dtype() != self.dtype() {
            return Err(invalid(
                "scatter_add",
                format!(
                    "expected self and src to have the same dtype, got {} and {}",
                    self.dtype().name(),
                    src.dtype().name()
                ),
            ));
        }
        scatter_impl("scatter_add", self, dim, index, src, ScatterReduce::Add)
    }

    /// `torch.masked_select(self, mask)`: 1-D tensor of the elements where the broadcast
    /// mask is true.
    pub fn masked_select(&self, mask: &Tensor) -> Result<Tensor> {
        let op = "masked_select";
        if mask.dtype() != DType::Bool {
            return Err(invalid(
                op,
                format!("expected a boolean mask, got {}", mask.dtype().name()),
            ));
        }
        let shape = broadcast_all_shapes(op, &[self, mask])?;
        let x = self.broadcast_to(&shape)?;
        let m = mask.broadcast_to(&shape)?.to_vec::<bool>()?;
        let mut offsets = Vec::new();
        let mut i = 0;
        for_each_offsets(x.shape(), [x.strides()], [x.storage_offset()], |[o]| {
            if m[i] {
                offsets.push(o);
            }
            i += 1;
        });
        let n = offsets.len();
        take_offsets(op, &x, &offsets, &[n])
    }

    /// `torch.split(self, split_size, dim)`: views of `split_size` (last may be smaller).
    pub fn split(&self, split_size: usize, dim: i64) -> Result<Vec<Tensor>> {
        let d = wrap_dim("split", dim, self.dim())?;
        let size = *self
            .shape()
            .get(d)
            .ok_or_else(|| invalid("split", "cannot split a 0-dim tensor"))?;
        if split_size == 0 {
            return if size == 0 {
                Ok(vec![self.clone()])
            } else {
                Err(invalid(
                    "split",
                    "split_size can only be 0 if dimension size is 0",
                ))
            };
        }
        let n = size.div_ceil(split_size).max(1);
        (0..n)
            .map(|i| {
                self.narrow(
                    d as i64,
                    (i * split_size) as i64,
                    split_size.min(size - i * split_size),
                )
            })
            .collect()
    }

    /// `torch.split(self, sizes, dim)` with explicit sizes that must sum to the dim size.
    pub fn split_with_sizes(&self, sizes: &[usize], dim: i64) -> Result<Vec<Tensor>> {
        let d = wrap_dim("split_with_sizes", dim, self.dim())?;
        let size = *self
            .shape()
            .get(d)
            .ok_or_else(|| invalid("split_with_sizes", "cannot split a 0-dim tensor"))?;
        if sizes.iter().sum::<usize>() != size {
            return Err(invalid(
                "split_with_sizes",
                format!("split sizes {sizes:?} do not sum to dimension size {size}"),
            ));
        }
        let mut start = 0;
        sizes
            .iter()
            .map(|&s| {
                let v = self.narrow(d as i64, start as i64, s);
                start += s;
                v
            })
            .collect()
    }

    /// `torch.chunk(self, chunks, dim)`: at most `chunks` views of `ceil(size / chunks)`.
    pub fn chunk(&self, chunks: usize, dim: i64) -> Result<Vec<Tensor>> {
        if chunks == 0 {
            return Err(invalid(
                "chunk",
                "chunk expects `chunks` to be greater than 0",
            ));
        }
        let d = wrap_dim("chunk", dim, self.dim())?;
        let size = *self
            .shape()
            .get(d)
            .ok_or_else(|| invalid("chunk", "cannot chunk a 0-dim tensor"))?;
        self.split(
            size.div_ceil(chunks).max(if size == 0 { 0 } else { 1 }),
            dim,
        )
    }

    fn triangle(
        &self,
        op: &'static str,
        diagonal: i64,
        keep: fn(i64, i64) -> bool,
    ) -> Result<Tensor> {
        if self.dim() < 2 {
            return Err(invalid(op, "input tensor must have at least 2 dimensions"));
        }
        if self.device() == Device::Meta {
            return Tensor::meta(self.shape(), self.dtype());
        }
        let (m, n) = (self.shape()[self.dim() - 2], self.shape()[self.dim() - 1]);
        let mask: Vec<bool> = (0..m * n)
            .map(|i| keep((i % n) as i64 - (i / n) as i64, diagonal))
            .collect();
        let mask = Tensor::from_vec(mask, &[m, n])?;
        let zero = Tensor::scalar_tensor(Scalar::Int(0), self.dtype());
        where_(&mask, self, &zero)?.to_dtype(self.dtype())
    }

    /// `torch.tril(self, diagonal)`: keeps elements with `col - row <= diagonal`.
    pub fn tril(&self, diagonal: i64) -> Result<Tensor> {
        self.triangle("tril", diagonal, |d, k| d <= k)
    }

    /// `torch.triu(self, diagonal)`: keeps elements with `col - row >= diagonal`.
    pub fn triu(&self, diagonal: i64) -> Result<Tensor> {
        self.triangle("triu", diagonal, |d, k| d >= k)
    }

    /// `torch.sort(self, dim, descending, stable=True)` -> (values, int64 indices).
    pub fn sort(&self, dim: i64, options: SortOptions) -> Result<(Tensor, Tensor)> {
        let op = "sort";
        let n = self.dim();
        let d = wrap_dim(op, dim, n)?;
        if self.device() == Device::Meta {
            return Ok((
                Tensor::meta(self.shape(), self.dtype())?,
                Tensor::meta(self.shape(), DType::I64)?,
            ));
        }
        if n == 0 {
            return Ok((
                self.deep_clone()?,
                Tensor::from_i64s(&[0], &[], DType::I64)?,
            ));
        }
        let moved = self.transpose(d as i64, -1)?.contiguous()?;
        let lane = self.shape()[d];
        let vals = moved.to_vec::<f64>()?;
        let ints = if self.dtype().is_float() {
            None
        } else {
            Some(moved.to_vec::<i64>()?)
        };
        let mut order: Vec<i64> = Vec::with_capacity(vals.len());
        if lane > 0 {
            for (c, chunk) in vals.chunks(lane).enumerate() {
                let mut idx: Vec<usize> = (0..lane).collect();
                // Stable sort; descending compares reversed so equal keys keep their order.
                match &ints {
                    Some(iv) => {
                        let iv = &iv[c * lane..(c + 1) * lane];
                        if options.descending {
                            idx.sort_by(|&a, &b| iv[b].cmp(&iv[a]));
                        } else {
                            idx.sort_by(|&a, &b| iv[a].cmp(&iv[b]));
                        }
                    }
                    None => {
                        if options.descending {
                            idx.sort_by(|&a, &b| cmp_nan_last(chunk[b], chunk[a]));
                        } else {
                            idx.sort_by(|&a, &b| cmp_nan_last(chunk[a], chunk[b]));
                        }
                    }
                }
                order.extend(idx.into_iter().map(|i| i as i64));
            }
        }
        let indices_moved = Tensor::from_i64s(&order, moved.shape(), DType::I64)?;
        let values_moved = moved.gather(-1, &indices_moved)?;
        Ok((
            values_moved.transpose(d as i64, -1)?.contiguous()?,
            indices_moved.transpose(d as i64, -1)?.contiguous()?,
        ))
    }

    /// `torch.argsort(self, dim, descending, stable=True)`.
    pub fn argsort(&self, dim: i64, options: SortOptions) -> Result<Tensor> {
        Ok(self.sort(dim, options)?.1)
    }

    /// `torch.topk(self, k, dim, largest, sorted=True)` -> (values, indices); ties keep the
    /// lower index first.
    pub fn topk(&self, k: usize, dim: i64, largest: bool) -> Result<(Tensor, Tensor)> {
        let d = wrap_dim("topk", dim, self.dim())?;
        let size = if self.dim() == 0 { 1 } else { self.shape()[d] };
        if k > size {
            return Err(invalid(
                "topk",
                format!("selected index k ({k}) out of range for dimension size {size}"),
            ));
        }
        let (v, i) = self.sort(
            dim,
            SortOptions {
                descending: largest,
            },
        )?;
        if self.dim() == 0 {
            return Ok((v, i));
        }
        Ok((
            v.narrow(d as i64, 0, k)?.contiguous()?,
            i.narrow(d as i64, 0, k)?.contiguous()?,
        ))
    }

    /// `tensor.repeat(repeats)`: tiles the tensor; `repeats.len()` must be >= ndim.
    pub fn repeat(&self, repeats: &[usize]) -> Result<Tensor> {
        if repeats.len() < self.dim() {
            return Err(invalid(
                "repeat",
                "number of repeat dims can not be smaller than number of tensor dims",
            ));
        }
        let lead = repeats.len() - self.dim();
        let mut shape = vec![1usize; lead];
        shape.extend_from_slice(self.shape());
        let base = self.reshape(&shape.iter().map(|&s| s as i64).collect::<Vec<_>>())?;
        // View as (1, s0, 1, s1, ...), expand to (r0, s0, r1, s1, ...), then merge pairs.
        let mut inter = Vec::new();
        let mut expanded = Vec::new();
        let mut final_shape = Vec::new();
        for (i, &s) in shape.iter().enumerate() {
            inter.extend([1i64, s as i64]);
            expanded.extend([repeats[i] as i64, s as i64]);
            final_shape.push(
                repeats[i]
                    .checked_mul(s)
                    .ok_or_else(|| invalid("repeat", "result too large"))? as i64,
            );
        }
        // Every size must stay a valid i64 and the element count must fit.
        let final_sizes: Vec<usize> = final_shape.iter().map(|&x| x as usize).collect();
        let too_big = repeats.iter().any(|&r| i64::try_from(r).is_err())
            || final_shape.iter().any(|&x| x < 0);
        if too_big {
            return Err(invalid(
                "repeat",
                format!("repeats {repeats:?} give a result that is too large"),
            ));
        }
        checked_numel("repeat", &final_sizes)?;
        base.reshape(&inter)?
            .expand(&expanded)?
            .contiguous()?
            .reshape(&final_shape)
    }

    /// `torch.repeat_interleave(self, repeats, dim)`; `dim = None` flattens first.
    pub fn repeat_interleave(&self, repeats: usize, dim: Option<i64>) -> Result<Tensor> {
        let (t, d) = match dim {
            Some(d) => (self.clone(), wrap_dim("repeat_interleave", d, self.dim())?),
            None => (self.reshape(&[-1])?, 0),
        };
        let size = t.shape().get(d).copied().unwrap_or(1);
        let rep = Tensor::from_i64s(&vec![repeats as i64; size], &[size], DType::I64)?;
        t.repeat_interleave_tensor(&rep, Some(d as i64))
    }

    /// `torch.repeat_interleave(self, repeats_tensor, dim)`: element i repeats `repeats[i]` times.
    pub fn repeat_interleave_tensor(&self, repeats: &Tensor, dim: Option<i64>) -> Result<Tensor> {
        let op = "repeat_interleave";
        let (t, d) = match dim {
            Some(d) => (self.clone(), wrap_dim(op, d, self.dim())?),
            None => (self.reshape(&[-1])?, 0),
        };
        let t = if t.dim() == 0 { t.reshape(&[1])? } else { t };
        let size = t.shape()[d];
        let reps = repeats.to_vec::<i64>()?;
        let reps = if reps.len() == 1 {
            vec![reps[0]; size]
        } else {
            reps
        };
        if reps.len() != size {
            return Err(invalid(
                op,
                format!(
                    "repeats must have the same size as input along dim ({} vs {size})",
                    reps.len()
                ),
            ));
        }
        let total = reps.iter().try_fold(0u64, |acc, &r| {
            if r < 0 {
                None
            } else {
                acc.checked_add(r as u64)
            }
        });
        let total = total.ok_or_else(|| {
            invalid(
                op,
                format!("repeats must be non-negative with a representable sum, got {reps:?}"),
            )
        })?;
        let mut idx = crate::error::reserve_vec(op, usize::try_from(total).unwrap_or(usize::MAX))?;
        for (i, &r) in reps.iter().enumerate() {
            idx.extend(std::iter::repeat_n(i as i64, r as usize));
        }
        let n = idx.len();
        t.index_select(d as i64, &Tensor::from_i64s(&idx, &[n], DType::I64)?)
    }

    /// `torch.flip(self, dims)` (a copy).
    pub fn flip(&self, dims: &[i64]) -> Result<Tensor> {
        let mut out = self.clone();
        for &d in dims {
            let d = wrap_dim("flip", d, self.dim())?;
            if self.dim() == 0 {
                continue;
            }
            let n = self.shape()[d];
            let idx: Vec<i64> = (0..n as i64).rev().collect();
            out = out.index_select(d as i64, &Tensor::from_i64s(&idx, &[n], DType::I64)?)?;
        }
        out.deep_clone()
    }

    /// `torch.roll(self, shifts, dims)`; empty `dims` rolls the flattened tensor.
    pub fn roll(&self, shifts: &[i64], dims: &[i64]) -> Result<Tensor> {
        if dims.is_empty() {
            if shifts.len() != 1 {
                return Err(invalid(
                    "roll",
                    "shifts must have one element when dims is empty",
                ));
            }
            return self
                .reshape(&[-1])?
                .roll(shifts, &[0])?
                .reshape(&self.shape().iter().map(|&s| s as i64).collect::<Vec<_>>());
        }
        if shifts.len() != dims.len() {
            return Err(invalid(
                "roll",
                format!(
                    "shifts and dimensions must align (got {} and {})",
                    shifts.len(),
                    dims.len()
                ),
            ));
        }
        let mut out = self.clone();
        for (&s, &d) in shifts.iter().zip(dims) {
            let d = wrap_dim("roll", d, self.dim())?;
            let n = self.shape().get(d).copied().unwrap_or(1) as i64;
            if n == 0 {
                continue;
            }
            let idx: Vec<i64> = (0..n)
                .map(|i| (i as i128 - s as i128).rem_euclid(n as i128) as i64)
                .collect();
            out = out.index_select(
                d as i64,
                &Tensor::from_i64s(&idx, &[n as usize], DType::I64)?,
            )?;
        }
        out.deep_clone()
    }

    /// `torch.nn.functional.pad(self, pads, mode="constant", value)`: `pads` pairs start at
    /// the last dim (left, right, then the dim before...); negative pads crop.
    pub fn pad(&self, pads: &[i64], value: Scalar) -> Result<Tensor> {
        let op = "pad";
        if !pads.len().is_multiple_of(2) || pads.len() / 2 > self.dim() {
            return Err(invalid(
                op,
                format!(
                    "padding length {} must be even and at most 2 * ndim ({})",
                    pads.len(),
                    2 * self.dim()
                ),
            ));
        }
        let mut out_shape = self.shape().to_vec();
        let mut src = self.clone();
        let mut dst_start = vec![0usize; self.dim()];
        for (p, pair) in pads.chunks(2).enumerate() {
            let d = self.dim() - 1 - p;
            let (l, r) = (pair[0], pair[1]);
            let size = self.shape()[d] as i64;
            let new = size
                .checked_add(l)
                .and_then(|v| v.checked_add(r))
                .ok_or_else(|| invalid(op, format!("padding ({l}, {r}) is out of range")))?;
            if new < 0 {
                return Err(invalid(
                    op,
                    format!("resulting size {new} of dim {d} is negative"),
                ));
            }
            out_shape[d] = new as usize;
            // Crop the source for negative pads.
            let s0 = l.saturating_neg().max(0).min(size);
            let s1 = size.saturating_sub(r.saturating_neg().max(0));
            src = src.narrow(d as i64, s0, s1.saturating_sub(s0).max(0) as usize)?;
            dst_start[d] = l.max(0) as usize;
        }
        if self.device() == crate::Device::Meta {
            return Tensor::meta(&out_shape, self.dtype());
        }
        let out = full(&out_shape, value, Some(self.dtype()))?;
        let mut region = out.clone();
        for d in 0..self.dim() {
            region = region.narrow(
                d as i64,
                dst_start[d] as i64,
                src.shape()[d].min(out_shape[d].saturating_sub(dst_start[d])),
            )?;
        }
        if region.shape() == src.shape() {
            region.copy_(&src)?;
        }
        Ok(out)
    }
}

/// `torch.nn.functional.embedding(input, weight)`: rows of the 2-D `weight` selected by the
/// int `input` ids; result shape is `input.shape + [embedding_dim]`.
pub fn embedding(input: &Tensor, weight: &Tensor) -> Result<Tensor> {
    if weight.dim() != 2 {
        return Err(invalid(
            "embedding",
            format!("weight must be 2-D, got {}-D", weight.dim()),
        ));
    }
    let flat = input.reshape(&[-1])?;
    index_values("embedding", &flat, weight.shape()[0])?;
    let rows = weight.index_select(0, &flat)?;
    let mut shape: Vec<i64> = input.shape().iter().map(|&s| s as i64).collect();
    shape.push(weight.shape()[1] as i64);
    rows.reshape(&shape)
}

/// `torch.cat(tensors, dim)`: dtypes promote; 1-D empty tensors are skipped (legacy rule).
pub fn cat(tensors: &[&Tensor], dim: i64) -> Result<Tensor> {
    let op = "cat";
    let parts: Vec<&Tensor> = tensors
        .iter()
        .copied()
        .filter(|t| !(t.dim() == 1 && t.numel() == 0))
        .collect();
    let Some(first) = parts.first() else {
        return match tensors.first() {
            Some(t) => Ok(Tensor::empty_on(
                &[0],
                result_type_of(tensors)?,
                t.device(),
            )?),
            None => Err(invalid(op, "expected a non-empty list of tensors")),
        };
    };
    if first.dim() == 0 {
        return Err(invalid(
            op,
            "zero-dimensional tensor cannot be concatenated",
        ));
    }
    let d = wrap_dim(op, dim, first.dim())?;
    // Skipped legacy empty 1-D inputs still take part in type promotion, as upstream's.
    let dtype = result_type_of(tensors)?;
    let mut shape = first.shape().to_vec();
    shape[d] = 0;
    for t in &parts {
        let same_rank = t.dim() == first.dim();
        if !same_rank || (0..t.dim()).any(|k| k != d && t.shape()[k] != first.shape()[k]) {
            return Err(Error::ShapeMismatch {
                op,
                lhs: first.shape().to_vec(),
                rhs: t.shape().to_vec(),
                reason: format!("sizes must match except in dimension {d}"),
            });
        }
        shape[d] += t.shape()[d];
    }
    if let Some(out) = cat_contiguous(&parts, d, &shape, dtype)? {
        return Ok(out);
    }
    let out = Tensor::empty_on(&shape, dtype, first.device())?;
    let mut start = 0;
    for t in &parts {
        out.narrow(d as i64, start as i64, t.shape()[d])?.copy_(t)?;
        start += t.shape()[d];
    }
    Ok(out)
}

/// `cat` of contiguous CPU parts that already have the result's dtype (a KV cache growing by
/// one token each step): each part's runs are copied as slices. `None` for other inputs.
fn cat_contiguous(
    parts: &[&Tensor],
    d: usize,
    shape: &[usize],
    dtype: DType,
) -> Result<Option<Tensor>> {
    if parts
        .iter()
        .any(|t| t.dtype() != dtype || !t.is_contiguous() || t.device() != crate::Device::Cpu)
    {
        return Ok(None);
    }
    let outer: usize = shape[..d].iter().product();
    let inner: usize = shape[d + 1..].iter().product();
    let row = shape[d] * inner;
    crate::with_dtype!(dtype, T => {
        let mut out = vec![T::default(); outer * row];
        let mut start = 0;
        for t in parts {
            let run = t.shape()[d] * inner;
            if run > 0 {
                t.with_data(|src: &[T]| {
                    for o in 0..outer {
                        let at = o * row + start;
                        out[at..at + run].copy_from_slice(&src[o * run..(o + 1) * run]);
                    }
                })?;
            }
            start += run;
        }
        Tensor::from_vec(out, shape).map(Some)
    })
}

/// `torch.stack(tensors, dim)`: all shapes equal; inserts a new dim.
pub fn stack(tensors: &[&Tensor], dim: i64) -> Result<Tensor> {
    let first = tensors
        .first()
        .ok_or_else(|| invalid("stack", "expects a non-empty list of tensors"))?;
    let d = wrap_dim("stack", dim, first.dim() + 1)?;
    for t in tensors {
        if t.shape() != first.shape() {
            return Err(Error::ShapeMismatch {
                op: "stack",
                lhs: first.shape().to_vec(),
                rhs: t.shape().to_vec(),
                reason: "stack expects each tensor to be equal size".into(),
            });
        }
    }
    let parts = tensors
        .iter()
        .map(|t| t.unsqueeze(d as i64))
        .collect::<Result<Vec<_>>>()?;
    cat(&parts.iter().collect::<Vec<_>>(), d as i64)
}

/// The combination `scatter_reduce` / `index_reduce` apply at each destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reduction {
    Sum,
    Prod,
    Mean,
    Amax,
    Amin,
}

impl Reduction {
    /// Upstream's names (`scatter_` also takes "add" and "multiply").
    pub fn parse(name: &str) -> Option<Reduction> {
        Some(match name {
            "sum" | "add" => Reduction::Sum,
            "prod" | "multiply" => Reduction::Prod,
            "mean" => Reduction::Mean,
            "amax" => Reduction::Amax,
            "amin" => Reduction::Amin,
            _ => return None,
        })
    }
}

fn combine_f(r: Reduction, a: f64, b: f64) -> f64 {
    match r {
        Reduction::Sum | Reduction::Mean => a + b,
        Reduction::Prod => a * b,
        Reduction::Amax => {
            if a.is_nan() || b.is_nan() {
                f64::NAN
            } else {
                a.max(b)
            }
        }
        Reduction::Amin => {
            if a.is_nan() || b.is_nan() {
                f64::NAN
            } else {
                a.min(b)
            }
        }
    }
}

fn combine_i(r: Reduction, a: i64, b: i64) -> i64 {
    match r {
        Reduction::Sum | Reduction::Mean => a.wrapping_add(b),
        Reduction::Prod => a.wrapping_mul(b),
        Reduction::Amax => a.max(b),
        Reduction::Amin => a.min(b),
    }
}

/// Reduces the elements of `src` (row-major, one per offset) into `out`'s storage at
/// `offsets`. Floats accumulate in f64 and round once; integers wrap like upstream's.
fn reduce_into(
    op: &'static str,
    out: &Tensor,
    offsets: &[usize],
    src: &Tensor,
    reduce: Reduction,
    include_self: bool,
) -> Result<()> {
    let storage = out.storage_ref().ok_or(Error::UnsupportedDevice {
        op,
        device: "meta".into(),
    })?;
    if out.dtype().is_complex() {
        // The reductions below combine reals; complex ones have no kernel here.
        return Err(Error::UnsupportedDType {
            op,
            dtype: out.dtype(),
        });
    }
    let float = out.dtype().is_float();
    // Per destination: accumulator and count of combined source elements.
    let mut acc_f: std::collections::HashMap<usize, (f64, usize)> = Default::default();
    let mut acc_i: std::collections::HashMap<usize, (i64, usize)> = Default::default();
    with_dtype!(out.dtype(), T => {
        let vals = src.to_vec::<T>()?;
        let mut buf = storage.write();
        let data = crate::storage::typed_mut::<T>(op, &mut buf)?;
        for (&o, v) in offsets.iter().zip(&vals) {
            if float {
                let v = v.to_f64();
                acc_f
                    .entry(o)
                    .and_modify(|(a, n)| {
                        *a = combine_f(reduce, *a, v);
                        *n += 1;
                    })
                    .or_insert_with(|| {
                        if include_self {
                            (combine_f(reduce, data[o].to_f64(), v), 2)
                        } else {
                            (v, 1)
                        }
                    });
            } else {
                let v = v.to_i64();
                acc_i
                    .entry(o)
                    .and_modify(|(a, n)| {
                        *a = combine_i(reduce, *a, v);
                        *n += 1;
                    })
                    .or_insert_with(|| {
                        if include_self {
                            (combine_i(reduce, data[o].to_i64(), v), 2)
                        } else {
                            (v, 1)
                        }
                    });
            }
        }
        for (o, (a, n)) in acc_f {
            let a = if reduce == Reduction::Mean { a / n as f64 } else { a };
            data[o] = T::from_f64(a);
        }
        for (o, (a, n)) in acc_i {
            let a = if reduce == Reduction::Mean { a.div_euclid(n as i64) } else { a };
            data[o] = if T::DTYPE == DType::Bool { T::from_i64((a != 0) as i64) } else { T::from_i64(a) };
        }
    });
    Ok(())
}

impl Tensor {
    /// `torch.scatter_reduce(self, dim, index, src, reduce, include_self)` (also `scatter_`
    /// with `reduce=`): a new tensor.
    pub fn scatter_reduce(
        &self,
        dim: i64,
        index: &Tensor,
        src: &Tensor,
        reduce: Reduction,
        include_self: bool,
    ) -> Result<Tensor> {
        let op = "scatter_reduce";
        if src.dtype() != self.dtype() {
            return Err(invalid(
                op,
                format!(
                    "scatter_reduce(): Expected self.dtype to be equal to src.dtype, got {} and {}",
                    self.dtype().name(),
                    src.dtype().name()
                ),
            ));
        }
        if self.dtype() == DType::Bool && reduce == Reduction::Mean {
            return Err(Error::UnsupportedDType {
                op: "scatter_gather_tensor_cpu_reduce_mean",
                dtype: DType::Bool,
            });
        }
        let d = wrap_dim(op, dim, self.dim().max(1))?;
        check_index_shape(
            op,
            self,
            d,
            index,
            if src.dim() == 0 { None } else { Some(src) },
        )?;
        if self.device() == Device::Meta {
            return Tensor::meta(self.shape(), self.dtype());
        }
        let out = self.deep_clone()?;
        let offsets = scatter_gather_offsets(op, &out, d, index)?;
        let src_view = if src.dim() == 0 {
            src.broadcast_to(index.shape())?
        } else {
            let mut s = src.clone();
            for k in 0..index.dim() {
                s = s.narrow(k as i64, 0, index.shape()[k])?;
            }
            s
        };
        reduce_into(op, &out, &offsets, &src_view, reduce, include_self)?;
        Ok(out)
    }

    /// `torch.index_reduce(self, dim, index, source, reduce, include_self)` (and `index_add`
    /// with `Reduction::Sum`): slices `source[i]` along `dim` combine into `self[index[i]]`.
    pub fn index_reduce(
        &self,
        dim: i64,
        index: &Tensor,
        source: &Tensor,
        reduce: Reduction,
        include_self: bool,
    ) -> Result<Tensor> {
        let op = "index_reduce";
        // Upstream's CPU index_reduce on bool: never without self, never for 1-D self (that
        // path has no bool kernel), and mean fails in its floor division; index_add (the Sum
        // case) takes bool everywhere.
        if self.dtype() == DType::Bool && reduce != Reduction::Sum {
            let op = if !include_self {
                Some("index_reduce_func_exclude_input_init")
            } else if self.dim() <= 1 {
                Some("index_func_")
            } else if reduce == Reduction::Mean {
                Some("div_floor_cpu")
            } else {
                None
            };
            if let Some(op) = op {
                return Err(Error::UnsupportedDType {
                    op,
                    dtype: DType::Bool,
                });
            }
        }
        if index.dim() > 1 {
            return Err(invalid(op, "Index is supposed to be a vector"));
        }
        let index = index.reshape(&[-1])?;
        if self.dim() == 0 {
            let flat = self.reshape(&[1])?;
            let src = source.reshape(&[-1])?;
            return flat
                .index_reduce(0, &index, &src, reduce, include_self)?
                .reshape(&[]);
        }
        let d = wrap_dim(op, dim, self.dim())?;
        let n = index.numel();
        if source.dim() != self.dim() || source.shape()[d] != n {
            return Err(Error::ShapeMismatch {
                op,
                lhs: self.shape().to_vec(),
                rhs: source.shape().to_vec(),
                reason: format!(
                    "source must have the same number of dims as self and {n} elements along dim {d}"
                ),
            });
        }
        for k in 0..self.dim() {
            if k != d && source.shape()[k] != self.shape()[k] {
                return Err(Error::ShapeMismatch {
                    op,
                    lhs: self.shape().to_vec(),
                    rhs: source.shape().to_vec(),
                    reason: format!("source and self differ at dim {k}"),
                });
            }
        }
        let mut view_shape = vec![1i64; self.dim()];
        view_shape[d] = n as i64;
        let full: Vec<i64> = source.shape().iter().map(|&s| s as i64).collect();
        let full_index = index.reshape(&view_shape)?.expand(&full)?;
        self.scatter_reduce(
            d as i64,
            &full_index,
            &source.to_dtype(self.dtype())?,
            reduce,
            include_self,
        )
    }
}

/// `torch.searchsorted(sorted, values, right=...)`: for each value, the insertion index in
/// the innermost rows of `sorted` (a 1-D `sorted` serves every value). int64 or int32 result.
pub fn searchsorted(
    sorted: &Tensor,
    values: &Tensor,
    right: bool,
    out_int32: bool,
) -> Result<Tensor> {
    let op = "searchsorted_out_cpu";
    if result_type_of(&[sorted, values])? == DType::Bool {
        return Err(Error::UnsupportedDType {
            op,
            dtype: DType::Bool,
        });
    }
    if sorted.dim() == 0 {
        return Err(invalid(
            op,
            "boundaries tensor should have positive dimension, but got 0 dimension",
        ));
    }
    let m = sorted.shape()[sorted.dim() - 1];
    let batched = sorted.dim() > 1;
    if batched
        && (values.dim() != sorted.dim()
            || values.shape()[..values.dim() - 1] != sorted.shape()[..sorted.dim() - 1])
    {
        return Err(invalid(
            op,
            "boundaries and input should have the same leading dimensions",
        ));
    }
    let s = sorted.to_vec::<f64>()?;
    let v = values.to_vec::<f64>()?;
    let k = if values.dim() == 0 {
        1
    } else {
        values.shape()[values.dim() - 1]
    };
    let mut out = Vec::with_capacity(v.len());
    for (i, &x) in v.iter().enumerate() {
        let row = if batched && k > 0 { i / k } else { 0 };
        let seq = &s[row * m..row * m + m];
        let pos = if right {
            seq.partition_point(|&e| e <= x)
        } else {
            seq.partition_point(|&e| e < x)
        };
        out.push(pos as i64);
    }
    Tensor::from_i64s(
        &out,
        values.shape(),
        if out_int32 { DType::I32 } else { DType::I64 },
    )
}

/// `torch.histc(self, bins, min, max)`: equal-width histogram of a float tensor; with
/// `min == max` the data's range is used (widened by 1 each way when it is a single value).
pub fn histc(t: &Tensor, bins: i64, min: f64, max: f64) -> Result<Tensor> {
    let op = "histogram_cpu";
    if !t.dtype().is_float() {
        return Err(Error::UnsupportedDType {
            op,
            dtype: t.dtype(),
        });
    }
    if bins <= 0 {
        return Err(invalid("histc", "bins must be > 0"));
    }
    let v = t.to_vec::<f64>()?;
    let (mut lo, mut hi) = (min, max);
    if lo == hi && !v.is_empty() {
        lo = v.iter().copied().fold(f64::INFINITY, f64::min);
        hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    }
    if lo == hi {
        lo -= 1.0;
        hi += 1.0;
    }
    if lo > hi {
        return Err(invalid("histc", "max must be larger than min"));
    }
    let bins_u = bins as usize;
    let mut counts = vec![0f64; bins_u];
    // Edges computed in the input's precision, as upstream's kernel does.
    let round = |x: f64| {
        Tensor::scalar_tensor(Scalar::Float(x), t.dtype())
            .to_vec::<f64>()
            .map(|v| v[0])
    };
    let (lo, hi) = (round(lo)?, round(hi)?);
    for &x in &v {
        if x.is_nan() || x < lo || x > hi {
            continue;
        }
        let mut pos = ((x - lo) / (hi - lo) * bins as f64) as usize;
        if pos >= bins_u {
            pos = bins_u - 1;
        }
        counts[pos] += 1.0;
    }
    Tensor::from_f64s(&counts, &[bins_u], t.dtype())
}

/// `torch.bincount(self, weights, minlength)`: counts (int64) or summed weights (float64)
/// of each non-negative integer value.
pub fn bincount(t: &Tensor, weights: Option<&Tensor>, minlength: i64) -> Result<Tensor> {
    let op = "bincount_cpu";
    if t.dtype().is_float() || t.dtype() == DType::Bool {
        return Err(Error::UnsupportedDType {
            op,
            dtype: t.dtype(),
        });
    }
    if t.dim() != 1 || minlength < 0 {
        return Err(invalid(
            "bincount",
            "bincount only supports 1-d non-negative integral inputs.",
        ));
    }
    let v = t.to_vec::<i64>()?;
    if v.iter().any(|&x| x < 0) {
        return Err(invalid(
            "bincount",
            "bincount only supports 1-d non-negative integral inputs.",
        ));
    }
    let n = v
        .iter()
        .map(|&x| x as usize + 1)
        .max()
        .unwrap_or(0)
        .max(minlength as usize);
    match weights {
        None => {
            let mut c = vec![0i64; n];
            for &x in &v {
                c[x as usize] += 1;
            }
            Tensor::from_i64s(&c, &[n], DType::I64)
        }
        Some(w) => {
            if w.dim() != 1 || w.numel() != v.len() {
                return Err(invalid(
                    "bincount",
                    "weights should be 1-d and have the same length as input",
                ));
            }
            let wv = w.to_vec::<f64>()?;
            let mut c = vec![0f64; n];
            for (&x, &wt) in v.iter().zip(&wv) {
                c[x as usize] += wt;
            }
            let dtype = if w.dtype() == DType::F32 {
                DType::F32
            } else {
                DType::F64
            };
            Tensor::from_f64s(&c, &[n], dtype)
        }
    }
}

/// `torch.isin(elements, test_elements, invert=...)`: bool tensor shaped like `elements`.
pub fn isin(elements: &Tensor, test: &Tensor, invert: bool) -> Result<Tensor> {
    let dtype = result_type_of(&[elements, test])?;
    let e = elements.to_dtype(dtype)?.to_vec::<f64>()?;
    let mut tv = test.to_dtype(dtype)?.to_vec::<f64>()?;
    tv.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    let out: Vec<i64> = e
        .iter()
        .map(|x| {
            let found = tv
                .binary_search_by(|p| p.partial_cmp(x).unwrap_or(std::cmp::Ordering::Less))
                .is_ok();
            (found != invert) as i64
        })
        .collect();
    Tensor::from_i64s(&out, elements.shape(), DType::Bool)
}

/// Total order for unique/sort of values read as f64 (NaN last; NaNs compare equal).
fn cmp_total(a: f64, b: f64) -> std::cmp::Ordering {
    cmp_nan_last(a, b)
}

/// `torch._unique2(self, sorted, return_inverse, return_counts)`: the sorted distinct values
/// (1-D), the index of each element's value (shaped like `self`, int64) and each value's
/// count (int64). Values are compared exactly in their own dtype.
pub fn unique(t: &Tensor) -> Result<(Tensor, Tensor, Tensor)> {
    let v = t.to_vec::<f64>()?;
    let mut order: Vec<usize> = (0..v.len()).collect();
    order.sort_by(|&a, &b| cmp_total(v[a], v[b]));
    let mut uniq_idx: Vec<usize> = Vec::new();
    let mut inverse = vec![0i64; v.len()];
    let mut counts: Vec<i64> = Vec::new();
    for &i in &order {
        let new = match uniq_idx.last() {
            None => true,
            Some(&last) => cmp_total(v[last], v[i]) != std::cmp::Ordering::Equal,
        };
        if new {
            uniq_idx.push(i);
            counts.push(0);
        }
        *counts.last_mut().unwrap_or(&mut 0) += 1;
        inverse[i] = uniq_idx.len() as i64 - 1;
    }
    let index = Tensor::from_i64s(
        &uniq_idx.iter().map(|&i| i as i64).collect::<Vec<_>>(),
        &[uniq_idx.len()],
        DType::I64,
    )?;
    let values = t.reshape(&[-1])?.index(&[index])?;
    let n = counts.len();
    Ok((
        values,
        Tensor::from_i64s(&inverse, t.shape(), DType::I64)?,
        Tensor::from_i64s(&counts, &[n], DType::I64)?,
    ))
}

/// `torch.unique(self, dim=d)`: distinct slices along `d`, sorted lexicographically.
pub fn unique_dim(t: &Tensor, dim: i64) -> Result<(Tensor, Tensor, Tensor)> {
    let op = "unique_dim";
    let d = wrap_dim(op, dim, t.dim())?;
    let n = t.shape()[d];
    let moved = t.transpose(0, d as i64)?.contiguous()?;
    let v = moved.to_vec::<f64>()?;
    let w = v.len().checked_div(n).unwrap_or(0);
    let row = |i: usize| &v[i * w..i * w + w];
    let cmp_rows = |a: usize, b: usize| {
        for (x, y) in row(a).iter().zip(row(b)) {
            let c = cmp_total(*x, *y);
            if c != std::cmp::Ordering::Equal {
                return c;
            }
        }
        std::cmp::Ordering::Equal
    };
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| cmp_rows(a, b));
    let mut uniq: Vec<usize> = Vec::new();
    let mut inverse = vec![0i64; n];
    let mut counts: Vec<i64> = Vec::new();
    for &i in &order {
        let new = uniq
            .last()
            .is_none_or(|&l| cmp_rows(l, i) != std::cmp::Ordering::Equal);
        if new {
            uniq.push(i);
            counts.push(0);
        }
        if let Some(c) = counts.last_mut() {
            *c += 1;
        }
        inverse[i] = uniq.len() as i64 - 1;
    }
    let index = Tensor::from_i64s(
        &uniq.iter().map(|&i| i as i64).collect::<Vec<_>>(),
        &[uniq.len()],
        DType::I64,
    )?;
    let values = t.index_select(d as i64, &index)?;
    let k = counts.len();
    Ok((
        values,
        Tensor::from_i64s(&inverse, &[n], DType::I64)?,
        Tensor::from_i64s(&counts, &[k], DType::I64)?,
    ))
}

/// `torch.isclose(a, b, rtol, atol, equal_nan)`: `a == b`, or (finite) `|a - b| <= atol +
/// |rtol * b|`, elementwise over the broadcast shape.
pub fn isclose(a: &Tensor, b: &Tensor, rtol: f64, atol: f64, equal_nan: bool) -> Result<Tensor> {
    let op = "isclose";
    if a.dtype() != b.dtype() {
        return Err(invalid(
            op,
            format!("{} did not match {}", a.dtype().name(), b.dtype().name()),
        ));
    }
    let shape = crate::layout::broadcast_shapes(op, a.shape(), b.shape())?;
    let x = a.broadcast_to(&shape)?.to_vec::<f64>()?;
    let y = b.broadcast_to(&shape)?.to_vec::<f64>()?;
    let float = a.dtype().is_float();
    let out: Vec<i64> = x
        .iter()
        .zip(&y)
        .map(|(&p, &q)| {
            let mut close = p == q || (equal_nan && p.is_nan() && q.is_nan());
            if !close && (float || a.dtype() != DType::Bool) {
                let actual = (p - q).abs();
                close = actual.is_finite() && actual <= atol + (rtol * q).abs();
            }
            close as i64
        })
        .collect();
    Tensor::from_i64s(&out, &shape, DType::Bool)
}

/// One lane's sort keys: integers compare exactly, floats with NaN above every number.
enum Keys {
    Ints(Vec<i64>),
    Floats(Vec<f64>),
}

impl Keys {
    fn of(t: &Tensor) -> Result<Keys> {
        Ok(if t.dtype().is_float() {
            Keys::Floats(t.to_vec::<f64>()?)
        } else {
            Keys::Ints(t.to_vec::<i64>()?)
        })
    }
}

/// upstream's CPU comparators on (value, index) pairs: ascending puts NaN last, descending
/// first; indices never take part.
fn float_less(descending: bool) -> impl Fn(&(f64, i64), &(f64, i64)) -> bool {
    move |a, b| {
        if descending {
            (a.0.is_nan() && !b.0.is_nan()) || a.0 > b.0
        } else {
            (!a.0.is_nan() && b.0.is_nan()) || a.0 < b.0
        }
    }
}

fn int_less(descending: bool) -> impl Fn(&(i64, i64), &(i64, i64)) -> bool {
    move |a, b| if descending { a.0 > b.0 } else { a.0 < b.0 }
}

/// Runs `f` on every lane (the last dim of a contiguous tensor) as (value, index) pairs and
/// returns the indices it leaves in each lane's first `keep` places.
fn lanes_as_aten(
    moved: &Tensor,
    keep: usize,
    ints: impl Fn(&mut [(i64, i64)]),
    floats: impl Fn(&mut [(f64, i64)]),
) -> Result<Vec<i64>> {
    let lane = moved.shape().last().copied().unwrap_or(1);
    let mut order = Vec::with_capacity(moved.numel() / lane.max(1) * keep);
    if lane == 0 {
        return Ok(order);
    }
    match Keys::of(moved)? {
        Keys::Ints(v) => {
            for chunk in v.chunks(lane) {
                let mut pairs: Vec<(i64, i64)> = chunk
                    .iter()
                    .enumerate()
                    .map(|(i, &x)| (x, i as i64))
                    .collect();
                ints(&mut pairs);
                order.extend(pairs[..keep].iter().map(|p| p.1));
            }
        }
        Keys::Floats(v) => {
            for chunk in v.chunks(lane) {
                let mut pairs: Vec<(f64, i64)> = chunk
                    .iter()
                    .enumerate()
                    .map(|(i, &x)| (x, i as i64))
                    .collect();
                floats(&mut pairs);
                order.extend(pairs[..keep].iter().map(|p| p.1));
            }
        }
    }
    Ok(order)
}

impl Tensor {
    /// `torch.sort(self, dim, descending, stable)` as upstream's CPU kernel orders equal
    /// values: `stable=True` keeps them in input order; otherwise `std::sort` decides, except
    /// for 1-D integer tensors of at least 32768 elements sorted ascending, which take a
    /// (stable) radix sort.
    pub fn sort_as_aten(
        &self,
        dim: i64,
        descending: bool,
        stable: bool,
    ) -> Result<(Tensor, Tensor)> {
        let radix = self.dim() == 1
            && self.numel() >= 32768
            && !descending
            && !self.dtype().is_float()
            && self.dtype() != DType::Bool;
        if stable || radix || self.dim() == 0 || self.device() == Device::Meta {
            return self.sort(dim, SortOptions { descending });
        }
        let d = wrap_dim("sort", dim, self.dim())?;
        let moved = self.transpose(d as i64, -1)?.contiguous()?;
        let lane = moved.shape()[moved.dim() - 1];
        let order = lanes_as_aten(
            &moved,
            lane,
            |p| std_algo::sort(p, &int_less(descending)),
            |p| std_algo::sort(p, &float_less(descending)),
        )?;
        let indices_moved = Tensor::from_i64s(&order, moved.shape(), DType::I64)?;
        let values_moved = moved.gather(-1, &indices_moved)?;
        Ok((
            values_moved.transpose(d as i64, -1)?.contiguous()?,
            indices_moved.transpose(d as i64, -1)?.contiguous()?,
        ))
    }

    /// `torch.topk(self, k, dim, largest, sorted)` choosing among equal values as upstream's
    /// CPU kernel does: `std::partial_sort` when `k * 64 <= n`, else `std::nth_element` and
    /// (sorted) `std::sort` of the first `k - 1`.
    pub fn topk_as_aten(
        &self,
        k: usize,
        dim: i64,
        largest: bool,
        sorted: bool,
    ) -> Result<(Tensor, Tensor)> {
        let d = wrap_dim("topk", dim, self.dim())?;
        let size = if self.dim() == 0 { 1 } else { self.shape()[d] };
        if k > size {
            return Err(invalid(
                "topk",
                format!("selected index k ({k}) out of range for dimension size {size}"),
            ));
        }
        if self.dim() == 0 || self.device() == Device::Meta {
            return self.topk(k, dim, largest);
        }
        let moved = self.transpose(d as i64, -1)?.contiguous()?;
        let partial = k * 64 <= size;
        fn select<T: Copy>(
            p: &mut [T],
            k: usize,
            partial: bool,
            sorted: bool,
            less: &impl Fn(&T, &T) -> bool,
        ) {
            if k == 0 {
                return;
            }
            if partial {
                std_algo::partial_sort(p, k, less);
            } else {
                std_algo::nth_element(p, k - 1, less);
                if sorted {
                    std_algo::sort(&mut p[..k - 1], less);
                }
            }
        }
        let order = lanes_as_aten(
            &moved,
            k,
            |p| select(p, k, partial, sorted, &int_less(largest)),
            |p| select(p, k, partial, sorted, &float_less(largest)),
        )?;
        let mut shape = moved.shape().to_vec();
        let last = shape.len() - 1;
        shape[last] = k;
        let indices_moved = Tensor::from_i64s(&order, &shape, DType::I64)?;
        let values_moved = moved.gather(-1, &indices_moved)?;
        Ok((
            values_moved.transpose(d as i64, -1)?.contiguous()?,
            indices_moved.transpose(d as i64, -1)?.contiguous()?,
        ))
    }
}

/// ATen's `quick_select_template` (SortingUtils.h, the selection its CPU `kthvalue` runs):
/// median-of-three quickselect that leaves the `k`-th smallest (by `gt`, "greater or NaN") at
/// `k`. Which of several equal values ends there, and so its index, follows these steps.
pub fn aten_quick_select<T: Copy>(arr: &mut [T], k: usize, gt: &impl Fn(&T, &T) -> bool) {
    if arr.len() < 2 || k >= arr.len() {
        return;
    }
    let (mut l, mut r) = (0usize, arr.len() - 1);
    loop {
        if r <= l {
            return;
        }
        if r == l + 1 {
            if gt(&arr[l], &arr[r]) {
                arr.swap(l, r);
            }
            return;
        }
        let p = l + (r - l) / 2;
        arr.swap(p, l + 1);
        if gt(&arr[l + 1], &arr[r]) {
            arr.swap(l + 1, r);
        }
        if gt(&arr[l], &arr[r]) {
            arr.swap(l, r);
        }
        if gt(&arr[l + 1], &arr[l]) {
            arr.swap(l + 1, l);
        }
        let (mut i, mut j) = (l + 1, r);
        let piv = arr[l];
        loop {
            i += 1;
            while gt(&piv, &arr[i]) {
                i += 1;
            }
            j -= 1;
            while gt(&arr[j], &piv) {
                j -= 1;
            }
            if j < i {
                break;
            }
            arr.swap(i, j);
        }
        arr.swap(l, j);
        if j <= k {
            l = i;
        }
        if j >= k {
            r = j - 1;
        }
    }
}

impl Tensor {
    /// `torch.kthvalue(self, k, dim, keepdim)` picking among equal values as upstream's CPU
    /// kernel (ATen's quickselect on (value, index) pairs, NaN largest).
    pub fn kthvalue_as_aten(&self, k: i64, dim: i64, keepdim: bool) -> Result<(Tensor, Tensor)> {
        let op = "kthvalue";
        let d = wrap_dim(op, dim, self.dim())?;
        let size = if self.dim() == 0 { 1 } else { self.shape()[d] };
        // 0-dim, meta and empty inputs: no ties to break; the plain kernel gives upstream's
        // results and errors (an empty reduction dim before a k out of range).
        if self.dim() == 0
            || self.device() == Device::Meta
            || size == 0
            || self.dtype() == DType::Bool
        {
            return self.kthvalue(k, dim, keepdim);
        }
        if k < 1 || k as usize > size {
            return Err(invalid(
                op,
                format!("kthvalue(): selected number k out of range for dimension {dim}"),
            ));
        }
        let kk = k as usize - 1;
        let moved = self.transpose(d as i64, -1)?.contiguous()?;
        let order = lanes_as_aten(
            &moved,
            size,
            |p| {
                aten_quick_select(p, kk, &int_less(true));
                p.swap(0, kk);
            },
            |p| {
                aten_quick_select(p, kk, &float_less(true));
                p.swap(0, kk);
            },
        )?;
        // lanes_as_aten kept whole lanes; the k-th of each now sits first.
        let chosen: Vec<i64> = order.chunks(size).map(|c| c[0]).collect();
        let mut shape = moved.shape().to_vec();
        let last = shape.len() - 1;
        shape[last] = 1;
        let idx = Tensor::from_i64s(&chosen, &shape, DType::I64)?;
        let vals = moved.gather(-1, &idx)?;
        let back = |t: Tensor| -> Result<Tensor> {
            let t = t.transpose(d as i64, -1)?.contiguous()?;
            if keepdim {
                Ok(t)
            } else {
                t.squeeze_dims(&[d as i64])
            }
        };
        Ok((back(vals)?, back(idx)?))
    }

    /// `torch.mode(self, dim, keepdim)` as upstream's CPU kernel: (value, index) pairs sorted
    /// by value with `std::sort`, the longest run wins (the first such run on a tie), and its
    /// last pair after the sort gives the index.
    pub fn mode_as_aten(&self, dim: i64, keepdim: bool) -> Result<(Tensor, Tensor)> {
        let op = "mode";
        let d = wrap_dim(op, dim, self.dim())?;
        if self.dim() == 0 || self.device() == Device::Meta || self.numel() == 0 {
            return self.mode(dim, keepdim);
        }
        let size = self.shape()[d];
        let moved = self.transpose(d as i64, -1)?.contiguous()?;
        fn winner<T: Copy + PartialEq>(p: &[(T, i64)]) -> i64 {
            let (mut best, mut best_freq, mut run) = (0i64, 0usize, 0usize);
            for i in 0..p.len() {
                run += 1;
                if i + 1 == p.len() || p[i].0 != p[i + 1].0 {
                    if run > best_freq {
                        best = p[i].1;
                        best_freq = run;
                    }
                    run = 0;
                }
            }
            best
        }
        let order = lanes_as_aten(
            &moved,
            size,
            |p| {
                std_algo::sort(p, &|a: &(i64, i64), b: &(i64, i64)| a.0 < b.0);
                p[0].1 = winner(p);
            },
            |p| {
                std_algo::sort(p, &|a: &(f64, i64), b: &(f64, i64)| a.0 < b.0);
                p[0].1 = winner(p);
            },
        )?;
        let chosen: Vec<i64> = order.chunks(size).map(|c| c[0]).collect();
        let mut shape = moved.shape().to_vec();
        let last = shape.len() - 1;
        shape[last] = 1;
        let idx = Tensor::from_i64s(&chosen, &shape, DType::I64)?;
        let vals = moved.gather(-1, &idx)?;
        let back = |t: Tensor| -> Result<Tensor> {
            let t = t.transpose(d as i64, -1)?.contiguous()?;
            if keepdim {
                Ok(t)
            } else {
                t.squeeze_dims(&[d as i64])
            }
        };
        Ok((back(vals)?, back(idx)?))
    }
}

/// The C++ standard library's unstable sorting algorithms as libstdc++ carries them out
/// (introsort, introselect, heap select), written from their published descriptions. Upstream's
/// CPU kernels call `std::sort`, `std::nth_element` and `std::partial_sort` on (value, index)
/// pairs compared by value alone, so which of several equal values lands first is decided by
/// these exact steps; replaying them gives the same indices.
pub mod std_algo {
    /// Below this many elements introsort leaves a run to the final insertion sort.
    const THRESHOLD: usize = 16;

    fn floor_log2(n: usize) -> usize {
        (usize::BITS - 1 - n.leading_zeros()) as usize
    }

    /// `std::sort`.
    pub fn sort<T: Copy>(v: &mut [T], less: &impl Fn(&T, &T) -> bool) {
        if v.len() < 2 {
            return;
        }
        introsort_loop(v, 0, v.len(), floor_log2(v.len()) * 2, less);
        final_insertion_sort(v, 0, v.len(), less);
    }

    /// `std::nth_element`: the element at `nth` is the one a full sort would put there, those
    /// before it are not greater, those after it not less.
    pub fn nth_element<T: Copy>(v: &mut [T], nth: usize, less: &impl Fn(&T, &T) -> bool) {
        if v.is_empty() || nth >= v.len() {
            return;
        }
        let (mut first, mut last) = (0, v.len());
        let mut depth = floor_log2(v.len()) * 2;
        while last - first > 3 {
            if depth == 0 {
                heap_select(v, first, nth + 1, last, less);
                v.swap(first, nth);
                return;
            }
            depth -= 1;
            let cut = partition_pivot(v, first, last, less);
            if cut <= nth {
                first = cut;
            } else {
                last = cut;
            }
        }
        insertion_sort(v, first, last, less);
    }

    /// `std::partial_sort`: the first `middle` elements sorted, the rest in no given order.
    pub fn partial_sort<T: Copy>(v: &mut [T], middle: usize, less: &impl Fn(&T, &T) -> bool) {
        let middle = middle.min(v.len());
        if middle == 0 {
            return;
        }
        heap_select(v, 0, middle, v.len(), less);
        sort_heap(v, 0, middle, less);
    }

    fn introsort_loop<T: Copy>(
        v: &mut [T],
        first: usize,
        mut last: usize,
        mut depth: usize,
        less: &impl Fn(&T, &T) -> bool,
    ) {
        while last - first > THRESHOLD {
            if depth == 0 {
                heap_select(v, first, last, last, less);
                sort_heap(v, first, last, less);
                return;
            }
            depth -= 1;
            let cut = partition_pivot(v, first, last, less);
            introsort_loop(v, cut, last, depth, less);
            last = cut;
        }
    }

    /// Median of (first+1, middle, last-1) moved to `first`, then a Hoare partition of the
    /// rest around it; returns where the upper part starts.
    fn partition_pivot<T: Copy>(
        v: &mut [T],
        first: usize,
        last: usize,
        less: &impl Fn(&T, &T) -> bool,
    ) -> usize {
        let mid = first + (last - first) / 2;
        let (a, b, c) = (first + 1, mid, last - 1);
        let pick = if less(&v[a], &v[b]) {
            if less(&v[b], &v[c]) {
                b
            } else if less(&v[a], &v[c]) {
                c
            } else {
                a
            }
        } else if less(&v[a], &v[c]) {
            a
        } else if less(&v[b], &v[c]) {
            c
        } else {
            b
        };
        v.swap(first, pick);
        let pivot = first;
        let (mut lo, mut hi) = (first + 1, last);
        loop {
            while less(&v[lo], &v[pivot]) {
                lo += 1;
            }
            hi -= 1;
            while less(&v[pivot], &v[hi]) {
                hi -= 1;
            }
            if lo >= hi {
                return lo;
            }
            v.swap(lo, hi);
            lo += 1;
        }
    }

    fn final_insertion_sort<T: Copy>(
        v: &mut [T],
        first: usize,
        last: usize,
        less: &impl Fn(&T, &T) -> bool,
    ) {
        if last - first > THRESHOLD {
            insertion_sort(v, first, first + THRESHOLD, less);
            for i in first + THRESHOLD..last {
                linear_insert(v, i, less);
            }
        } else {
            insertion_sort(v, first, last, less);
        }
    }

    fn insertion_sort<T: Copy>(
        v: &mut [T],
        first: usize,
        last: usize,
        less: &impl Fn(&T, &T) -> bool,
    ) {
        if first == last {
            return;
        }
        for i in first + 1..last {
            if less(&v[i], &v[first]) {
                let val = v[i];
                v.copy_within(first..i, first + 1);
                v[first] = val;
            } else {
                linear_insert(v, i, less);
            }
        }
    }

    /// Moves `v[at]` down past the greater elements before it (something not greater than it
    /// stands somewhere before).
    fn linear_insert<T: Copy>(v: &mut [T], at: usize, less: &impl Fn(&T, &T) -> bool) {
        let val = v[at];
        let mut hole = at;
        while hole > 0 && less(&val, &v[hole - 1]) {
            v[hole] = v[hole - 1];
            hole -= 1;
        }
        v[hole] = val;
    }

    /// Makes `[first, middle)` a max-heap of the smallest elements of `[first, last)`.
    fn heap_select<T: Copy>(
        v: &mut [T],
        first: usize,
        middle: usize,
        last: usize,
        less: &impl Fn(&T, &T) -> bool,
    ) {
        make_heap(v, first, middle, less);
        for i in middle..last {
            if less(&v[i], &v[first]) {
                pop_heap(v, first, middle, i, less);
            }
        }
    }

    fn make_heap<T: Copy>(v: &mut [T], first: usize, last: usize, less: &impl Fn(&T, &T) -> bool) {
        let len = last - first;
        if len < 2 {
            return;
        }
        let mut parent = (len - 2) / 2;
        loop {
            let value = v[first + parent];
            adjust_heap(v, first, parent, len, value, less);
            if parent == 0 {
                return;
            }
            parent -= 1;
        }
    }

    fn sort_heap<T: Copy>(
        v: &mut [T],
        first: usize,
        mut last: usize,
        less: &impl Fn(&T, &T) -> bool,
    ) {
        while last - first > 1 {
            last -= 1;
            pop_heap(v, first, last, last, less);
        }
    }

    /// Moves the heap's top to `result` and re-heaps `[first, last)` with `result`'s old value.
    fn pop_heap<T: Copy>(
        v: &mut [T],
        first: usize,
        last: usize,
        result: usize,
        less: &impl Fn(&T, &T) -> bool,
    ) {
        let value = v[result];
        v[result] = v[first];
        adjust_heap(v, first, 0, last - first, value, less);
    }

    /// Sifts the hole at `hole` down to a leaf along the larger children, then pushes `value`
    /// up from there.
    fn adjust_heap<T: Copy>(
        v: &mut [T],
        first: usize,
        mut hole: usize,
        len: usize,
        value: T,
        less: &impl Fn(&T, &T) -> bool,
    ) {
        let top = hole;
        let mut child = hole;
        while child < (len - 1) / 2 {
            child = 2 * (child + 1);
            if less(&v[first + child], &v[first + child - 1]) {
                child -= 1;
            }
            v[first + hole] = v[first + child];
            hole = child;
        }
        if len & 1 == 0 && child == (len - 2) / 2 {
            child = 2 * (child + 1);
            v[first + hole] = v[first + child - 1];
            hole = child - 1;
        }
        let mut parent = hole.wrapping_sub(1) / 2;
        while hole > top && less(&v[first + parent], &value) {
            v[first + hole] = v[first + parent];
            hole = parent;
            parent = hole.wrapping_sub(1) / 2;
        }
        v[first + hole] = value;
    }
}

#[cfg(test)]
mod tests {
    /// Equal values: the index upstream's CPU kthvalue and mode return (torch 2.15, recorded
    /// from its output on these inputs).
    #[test]
    fn kthvalue_and_mode_pick_ties_as_aten() {
        let cases: &[(&[i64], i64, i64, i64)] = &[
            (&[2, 1, 3], 3, 2, 1),
            (&[0, 0, 0], 2, 0, 2),
            (&[0, 1, 0], 1, 2, 2),
            (&[3, 3, 0, 1, 0], 5, 0, 4),
            (&[3, 0, 0, 1, 0], 5, 0, 4),
            (&[3, 0, 1, 0, 1], 3, 2, 3),
            (&[3, 1, 0, 2, 1, 0, 1, 2], 2, 5, 6),
            (&[0, 0, 1, 3, 3, 2, 3, 3], 6, 3, 7),
            (&[2, 1, 1, 1, 0, 2, 3, 2], 8, 6, 3),
            (
                &[2, 0, 0, 3, 1, 2, 1, 3, 3, 0, 0, 2, 2, 2, 3, 3, 0],
                3,
                1,
                2,
            ),
            (
                &[2, 3, 0, 0, 2, 3, 2, 3, 2, 0, 3, 2, 1, 0, 3, 0, 1],
                10,
                4,
                9,
            ),
            (
                &[1, 1, 3, 3, 3, 0, 1, 3, 3, 2, 1, 3, 2, 3, 2, 3, 1],
                5,
                6,
                15,
            ),
            (
                &[
                    0, 1, 1, 1, 1, 0, 3, 1, 2, 2, 0, 1, 3, 2, 2, 1, 0, 3, 3, 3, 3, 3, 0, 3, 3,
                ],
                2,
                10,
                6,
            ),
            (
                &[
                    1, 0, 1, 3, 1, 0, 2, 0, 0, 0, 1, 0, 2, 0, 0, 1, 3, 1, 2, 2, 2, 3, 0, 0, 3,
                ],
                15,
                10,
                23,
            ),
            (
                &[
                    3, 3, 2, 0, 1, 0, 2, 2, 3, 1, 0, 1, 2, 1, 0, 2, 0, 2, 2, 1, 2, 1, 2, 1, 1,
                ],
                8,
                11,
                2,
            ),
            (
                &[
                    3, 1, 1, 3, 2, 0, 0, 2, 3, 2, 1, 2, 3, 2, 2, 0, 1, 0, 1, 3, 1, 2, 1, 3, 0, 3,
                    2, 0, 0, 3, 1, 3, 1, 3, 2, 0, 3, 3, 3, 0,
                ],
                11,
                20,
                38,
            ),
            (
                &[
                    1, 1, 0, 1, 3, 1, 3, 2, 1, 1, 0, 0, 0, 1, 3, 1, 1, 0, 2, 1, 2, 1, 2, 2, 3, 1,
                    0, 2, 3, 3, 1, 1, 0, 3, 1, 0, 1, 1, 1, 3,
                ],
                40,
                39,
                1,
            ),
            (
                &[
                    0, 0, 2, 3, 0, 0, 1, 1, 2, 0, 0, 3, 0, 0, 3, 2, 1, 2, 3, 3, 1, 2, 1, 3, 1, 3,
                    0, 3, 3, 2, 0, 1, 3, 0, 1, 2, 0, 1, 2, 1,
                ],
                17,
                34,
                0,
            ),
            (
                &[
                    1, 3, 1, 0, 3, 3, 1, 1, 1, 3, 3, 2, 3, 1, 2, 2, 0, 2, 0, 2, 3, 3, 0, 3, 2, 2,
                    0, 0, 1, 0, 0, 2, 2, 0, 1, 2, 1, 3, 2, 3, 1, 3, 2, 0, 2, 0, 1, 3, 0, 2, 0, 0,
                    2, 0, 1, 0, 2, 0, 3, 0, 2, 3, 2, 1, 0, 1, 0, 1, 2, 0, 1, 1, 2, 2, 1, 2, 3, 1,
                    2, 2, 0, 2, 0, 0, 0, 1, 3, 1, 3, 0, 3, 3, 3, 2, 1, 1, 2, 1, 1, 3,
                ],
                45,
                77,
                60,
            ),
            (
                &[
                    0, 1, 0, 0, 2, 3, 1, 0, 0, 3, 2, 1, 2, 0, 3, 1, 1, 2, 3, 0, 2, 2, 2, 2, 1, 0,
                    2, 1, 2, 1, 0, 2, 3, 0, 3, 2, 1, 1, 0, 0, 2, 0, 1, 3, 0, 3, 0, 2, 2, 1, 0, 1,
                    3, 2, 3, 1, 2, 1, 0, 3, 1, 0, 1, 0, 0, 0, 1, 2, 0, 3, 3, 0, 0, 1, 3, 2, 0, 3,
                    0, 0, 0, 3, 2, 0, 2, 1, 1, 1, 3, 3, 3, 0, 3, 2, 0, 1, 0, 1, 2, 2,
                ],
                84,
                43,
                83,
            ),
            (
                &[
                    2, 1, 0, 3, 0, 3, 2, 0, 1, 3, 2, 2, 3, 3, 3, 0, 1, 2, 0, 3, 0, 2, 3, 0, 3, 2,
                    3, 1, 1, 0, 0, 1, 2, 2, 1, 2, 0, 2, 1, 3, 3, 3, 0, 1, 0, 3, 3, 3, 2, 1, 3, 2,
                    3, 2, 0, 2, 0, 2, 2, 3, 0, 1, 0, 2, 2, 2, 0, 3, 3, 0, 2, 3, 2, 0, 2, 0, 0, 2,
                    1, 1, 2, 3, 2, 1, 2, 3, 0, 3, 1, 0, 0, 3, 3, 1, 2, 3, 0, 1, 1, 3,
                ],
                54,
                70,
                68,
            ),
        ];
        for &(data, k, kth_index, mode_index) in cases {
            let x = Tensor::from_i64s(data, &[data.len()], DType::I64).unwrap();
            let (_, i) = x.kthvalue_as_aten(k, 0, false).unwrap();
            assert_eq!(
                i.to_vec::<i64>().unwrap(),
                vec![kth_index],
                "kthvalue {data:?} k={k}"
            );
            let (_, i) = x.mode_as_aten(0, false).unwrap();
            assert_eq!(
                i.to_vec::<i64>().unwrap(),
                vec![mode_index],
                "mode {data:?}"
            );
        }
    }

    use super::*;
    use crate::layout::infer_dense_strides;

    fn t(v: &[f64], shape: &[usize]) -> Tensor {
        Tensor::from_f64s(v, shape, DType::F32).unwrap()
    }

    #[test]
    fn views_record_their_root_base() {
        let x = t(&[0.0; 6], &[2, 3]);
        assert!(!x.is_view());
        let v = x.t().unwrap().unsqueeze(0).unwrap();
        assert!(v.is_view());
        assert!(v
            .view_base()
            .is_some_and(|b| !b.is_view() && b.shape() == [2, 3]));
        assert!(!v.without_base().is_view());
        // A reshape that has to copy is not a view.
        assert!(!x.t().unwrap().reshape(&[-1]).unwrap().is_view());
    }

    #[test]
    fn scatter_reduce_and_index_reduce() {
        let x = t(&[1.0, 2.0, 3.0], &[3]);
        let idx = Tensor::from_i64s(&[0, 0, 2], &[3], DType::I64).unwrap();
        let src = t(&[4.0, 5.0, 6.0], &[3]);
        let sum = x
            .scatter_reduce(0, &idx, &src, Reduction::Sum, true)
            .unwrap();
        assert_eq!(sum.to_vec::<f32>().unwrap(), vec![10.0, 2.0, 9.0]);
        let mean = x
            .scatter_reduce(0, &idx, &src, Reduction::Mean, false)
            .unwrap();
        assert_eq!(mean.to_vec::<f32>().unwrap(), vec![4.5, 2.0, 6.0]);
        let amax = x
            .index_reduce(0, &idx, &src, Reduction::Amax, true)
            .unwrap();
        assert_eq!(amax.to_vec::<f32>().unwrap(), vec![5.0, 2.0, 6.0]);
    }

    #[test]
    fn searchsorted_sides() {
        let s = t(&[1.0, 2.0, 3.0], &[3]);
        let v = t(&[2.0, 0.0, 5.0], &[3]);
        let l = searchsorted(&s, &v, false, false).unwrap();
        let r = searchsorted(&s, &v, true, false).unwrap();
        assert_eq!(l.to_vec::<i64>().unwrap(), vec![1, 0, 3]);
        assert_eq!(r.to_vec::<i64>().unwrap(), vec![2, 0, 3]);
    }

    #[test]
    fn dense_strides_follow_the_input_order() {
        // A transposed (3, 2) view of a (2, 3) tensor: column-major dense strides.
        assert_eq!(infer_dense_strides(&[3, 2], &[1, 3]), vec![1, 3]);
        // A sliced non-dense input keeps its order, densely.
        assert_eq!(infer_dense_strides(&[2, 2], &[8, 2]), vec![2, 1]);
    }
}
