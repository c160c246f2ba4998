//! The `Tensor` handle: storage + layout + dtype, constructors, element access, views,
//! casts and in-place writes. Cloning a `Tensor` (Rust `Clone`) makes another handle to the
//! same storage, like assigning a Python variable; [`Tensor::deep_clone`] copies the data.

use crate::dtype::{result_type, DType, Device, OperandKind, Scalar};
use crate::error::{invalid, Error, Result};
use crate::layout::{
    broadcast_shapes, checked_numel, compute_view_strides, for_each_offsets, for_each_run,
    infer_shape, wrap_dim, Layout,
};
use crate::storage::{cast_element, Buffer, Element, Storage};
use crate::with_dtype;

/// An n-dimensional strided view of typed storage (CPU) or a shape-only tensor (Meta).
#[derive(Clone)]
pub struct Tensor {
    /// `None` for Meta tensors.
    storage: Option<Storage>,
    layout: Layout,
    dtype: DType,
    /// A Python scalar turned into a 0-dim tensor; it ranks lowest in type promotion.
    wrapped_number: bool,
    /// The tensor this one is a view of (upstream's `_base`: always the root, never a view).
    base: Option<std::sync::Arc<Tensor>>,
}

/// Shape, strides, dtype and device plus at most the first 8 values (never the whole buffer).
impl std::fmt::Debug for Tensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Tensor(shape={:?}, strides={:?}, offset={}, dtype={}, device={}",
            self.layout.sizes,
            self.layout.strides,
            self.layout.offset,
            self.dtype.name(),
            self.device().name()
        )?;
        if self.storage.is_some() {
            let head = self
                .reshape(&[-1])
                .and_then(|t| t.narrow(0, 0, t.numel().min(8)))
                .and_then(|t| t.to_vec::<f64>());
            if let Ok(v) = head {
                write!(
                    f,
                    ", values={v:?}{}",
                    if self.numel() > 8 { "..." } else { "" }
                )?;
            }
        }
        write!(f, ")")
    }
}

/// Refuses a meta tensor for an op that needs data.
fn needs_data<'a>(op: &'static str, t: &'a Tensor) -> Result<&'a Storage> {
    t.storage.as_ref().ok_or(Error::UnsupportedDevice {
        op,
        device: "meta".into(),
    })
}

/// PyTorch's `checked_convert` for fill values: a scalar must fit the target dtype's range
/// (non-finite floats may only go into float dtypes).
pub(crate) fn check_scalar_fits(op: &'static str, value: Scalar, dtype: DType) -> Result<()> {
    let v = value.to_f64();
    if let Scalar::Complex(_, im) = value {
        if !dtype.is_complex() && im != 0.0 {
            return Err(invalid(
                op,
                format!(
                    "value cannot be converted to type {} without overflow",
                    dtype.name()
                ),
            ));
        }
    }
    let (lo, hi) = match dtype {
        DType::Bool | DType::F64 | DType::C128 => return Ok(()),
        DType::C64 => (-(f32::MAX as f64), f32::MAX as f64),
        DType::F32 => (-(f32::MAX as f64), f32::MAX as f64),
        DType::F16 => (-65504.0, 65504.0),
        DType::BF16 => (-3.389_531_389_251_535e38, 3.389_531_389_251_535e38),
        DType::I64 => (i64::MIN as f64, i64::MAX as f64),
        DType::I32 => (i32::MIN as f64, i32::MAX as f64),
        DType::I16 => (i16::MIN as f64, i16::MAX as f64),
        DType::I8 => (i8::MIN as f64, i8::MAX as f64),
        DType::U8 => (0.0, u8::MAX as f64),
        DType::U16 => (0.0, u16::MAX as f64),
        DType::U32 => (0.0, u32::MAX as f64),
        DType::U64 => (0.0, u64::MAX as f64),
    };
    let fits = if dtype.is_float() || dtype.is_complex() {
        !v.is_finite() || (lo..=hi).contains(&v)
    } else {
        v.is_finite() && (lo..=hi).contains(&v)
    };
    if !fits {
        return Err(invalid(
            op,
            format!(
                "value {v} cannot be converted to type {} without overflow",
                dtype.name()
            ),
        ));
    }
    Ok(())
}

/// Layout of a copied tensor (PyTorch's `memory_format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryFormat {
    /// Row-major.
    Contiguous,
    /// Keep the strides of a dense (non-overlapping, gap-free) source; other sources get
    /// dense strides in the source's dimension order.
    Preserve,
    /// NHWC (4-d) / NDHWC (5-d).
    ChannelsLast,
}

impl MemoryFormat {
    /// The strides a new tensor of `sizes` gets in this format, given its source's strides.
    pub fn strides_for(self, sizes: &[usize], source_strides: &[usize]) -> Vec<usize> {
        match self {
            MemoryFormat::Contiguous => crate::layout::contiguous_strides(sizes),
            MemoryFormat::ChannelsLast => crate::layout::channels_last_strides(sizes),
            MemoryFormat::Preserve => {
                let probe = Layout {
                    sizes: sizes.to_vec(),
                    strides: source_strides.to_vec(),
                    offset: 0,
                };
                if is_dense(&probe) {
                    source_strides.to_vec()
                } else {
                    crate::layout::infer_dense_strides(sizes, source_strides)
                }
            }
        }
    }
}

fn is_dense(l: &Layout) -> bool {
    let mut dims: Vec<(usize, usize)> = l
        .sizes
        .iter()
        .zip(&l.strides)
        .filter(|(&s, _)| s != 1)
        .map(|(&s, &st)| (st, s))
        .collect();
    dims.sort();
    let mut expected = 1;
    for (stride, size) in dims {
        if stride != expected {
            return false;
        }
        expected *= size;
    }
    true
}

/// `canCast` from c10: float results cannot go into integer outputs, nor non-bool into bool.
pub fn can_cast(from: DType, to: DType) -> bool {
    !((from.is_complex() && !to.is_complex())
        || (from.is_float() && !to.is_float() && !to.is_complex())
        || (from != DType::Bool && to == DType::Bool))
}

impl Tensor {
    // ----- construction -----

    /// Wraps a buffer as a contiguous tensor of `shape`.
    pub(crate) fn from_buffer(op: &'static str, buf: Buffer, shape: &[usize]) -> Result<Tensor> {
        let numel = checked_numel(op, shape)?;
        let given = buf.len_as(buf.dtype());
        if numel != given {
            return Err(invalid(
                op,
                format!("shape {shape:?} needs {numel} elements but {given} were given"),
            ));
        }
        Ok(Tensor {
            dtype: buf.dtype(),
            storage: Some(Storage::new(buf)),
            layout: Layout::contiguous(shape),
            wrapped_number: false,
            base: None,
        })
    }

    /// A tensor of `shape` that owns `data` (row-major).
    pub fn from_vec<T: Element>(data: Vec<T>, shape: &[usize]) -> Result<Tensor> {
        Tensor::from_buffer("from_vec", T::into_buffer(data), shape)
    }

    /// A tensor of `shape` holding a copy of `data` (row-major).
    pub fn from_slice<T: Element>(data: &[T], shape: &[usize]) -> Result<Tensor> {
        Tensor::from_vec(data.to_vec(), shape)
    }

    /// Builds a tensor of `dtype` from f64 values, casting like `.to(dtype)`.
    pub fn from_f64s(values: &[f64], shape: &[usize], dtype: DType) -> Result<Tensor> {
        Tensor::from_buffer("from_f64s", Buffer::from_f64s(dtype, values), shape)
    }

    /// Builds a tensor of `dtype` from complex values, casting like `.to(dtype)`.
    pub fn from_complex(values: &[crate::Cf64], shape: &[usize], dtype: DType) -> Result<Tensor> {
        Tensor::from_buffer("from_complex", Buffer::from_complex(dtype, values), shape)
    }

    /// Builds a tensor of `dtype` from i64 values, casting like `.to(dtype)`.
    pub fn from_i64s(values: &[i64], shape: &[usize], dtype: DType) -> Result<Tensor> {
        Tensor::from_buffer("from_i64s", Buffer::from_i64s(dtype, values), shape)
    }

    /// A 0-dim tensor holding `value` cast to `dtype` (`torch.tensor(value, dtype=dtype)`).
    pub fn scalar_tensor(value: Scalar, dtype: DType) -> Tensor {
        let buf = match value {
            Scalar::Float(f) => Buffer::from_f64s(dtype, &[f]),
            Scalar::Int(i) => Buffer::from_i64s(dtype, &[i]),
            Scalar::Bool(b) => Buffer::from_i64s(dtype, &[b as i64]),
            Scalar::Complex(re, im) => Buffer::from_complex(dtype, &[crate::Cf64::new(re, im)]),
        };
        Tensor {
            dtype,
            storage: Some(Storage::new(buf)),
            layout: Layout::contiguous(&[]),
            wrapped_number: false,
            base: None,
        }
    }

    /// A Python scalar as an operand: a 0-dim "wrapped number" (float -> f64 data, int ->
    /// i64, bool -> bool) that ranks lowest in type promotion.
    pub fn wrap_scalar(value: Scalar) -> Tensor {
        let dtype = match value {
            Scalar::Float(_) => DType::F64,
            Scalar::Int(_) => DType::I64,
            Scalar::Bool(_) => DType::Bool,
            Scalar::Complex(..) => DType::C128,
        };
        let mut t = Tensor::scalar_tensor(value, dtype);
        t.wrapped_number = true;
        t
    }

    /// A tensor with shape and dtype but no data.
    pub fn meta(shape: &[usize], dtype: DType) -> Result<Tensor> {
        checked_numel("meta", shape)?;
        Ok(Tensor {
            storage: None,
            layout: Layout::contiguous(shape),
            dtype,
            wrapped_number: false,
            base: None,
        })
    }

    /// Uninitialised-in-PyTorch, zero-filled here: a new contiguous tensor on `device`.
    pub fn empty_on(shape: &[usize], dtype: DType, device: Device) -> Result<Tensor> {
        match device {
            Device::Meta => Tensor::meta(shape, dtype),
            Device::Cpu => {
                let n = checked_numel("empty", shape)?;
                let buf = with_dtype!(dtype, T => T::into_buffer(crate::error::filled_vec("empty", n, T::default())?));
                Tensor::from_buffer("empty", buf, shape)
            }
        }
    }

    // ----- accessors -----

    /// The shared storage (`None` for meta tensors): for bindings that expose memory
    /// (`data_ptr`, numpy views) or compare storages.
    pub fn storage(&self) -> Option<&Storage> {
        self.storage.as_ref()
    }

    /// Sizes of each dimension.
    pub fn shape(&self) -> &[usize] {
        &self.layout.sizes
    }
    /// Strides of each dimension, in elements.
    pub fn strides(&self) -> &[usize] {
        &self.layout.strides
    }
    /// Offset of element 0 in the storage, in elements.
    pub fn storage_offset(&self) -> usize {
        self.layout.offset
    }
    /// The full layout.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }
    /// Number of dimensions.
    pub fn dim(&self) -> usize {
        self.layout.sizes.len()
    }
    /// Size of dimension `dim` (negative counts from the end).
    pub fn size(&self, dim: i64) -> Result<usize> {
        if self.dim() == 0 {
            return Err(Error::DimOutOfRange {
                op: "size",
                dim,
                ndim: 0,
            });
        }
        Ok(self.layout.sizes[wrap_dim("size", dim, self.dim())?])
    }
    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.layout.numel()
    }
    /// Element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }
    /// Cpu for tensors with data, Meta otherwise.
    pub fn device(&self) -> Device {
        if self.storage.is_some() {
            Device::Cpu
        } else {
            Device::Meta
        }
    }
    /// True when row-major without gaps.
    pub fn is_contiguous(&self) -> bool {
        self.layout.is_contiguous()
    }
    /// True for a Python scalar wrapped as a tensor.
    pub fn is_wrapped_number(&self) -> bool {
        self.wrapped_number
    }
    /// True when both tensors are views of the same storage.
    pub fn shares_storage(&self, other: &Tensor) -> bool {
        match (&self.storage, &other.storage) {
            (Some(a), Some(b)) => a.same(b),
            _ => false,
        }
    }
    /// How this tensor takes part in `result_type` (with the dtype it counts as).
    pub fn promotion_operand(&self) -> (DType, OperandKind) {
        if self.wrapped_number {
            let d = if self.dtype.is_float() {
                crate::dtype::DEFAULT_FLOAT
            } else {
                self.dtype
            };
            (d, OperandKind::WrappedNumber)
        } else if self.dim() == 0 {
            (self.dtype, OperandKind::ZeroDim)
        } else {
            (self.dtype, OperandKind::Dimensioned)
        }
    }

    pub(crate) fn storage_ref(&self) -> Option<&Storage> {
        self.storage.as_ref()
    }

    /// A view sharing storage with a new layout (caller guarantees it stays in bounds); the
    /// result records `self`'s root as its base, as upstream's view ops do.
    pub(crate) fn with_layout(&self, layout: Layout) -> Tensor {
        let base = match &self.base {
            Some(b) => b.clone(),
            None => std::sync::Arc::new(self.without_base()),
        };
        Tensor {
            storage: self.storage.clone(),
            layout,
            dtype: self.dtype,
            wrapped_number: false,
            base: Some(base),
        }
    }

    /// Same storage and base, another layout, not recorded as a new view (results of copies,
    /// in-place metadata changes such as `t_`).
    /// A view of the same storage with another layout and element type (complex <-> its
    /// float parts); recorded as a view of `self`.
    pub(crate) fn part_view(&self, layout: Layout, dtype: DType) -> Tensor {
        let mut v = self.with_layout(layout);
        v.dtype = dtype;
        v
    }

    pub(crate) fn relayout(&self, layout: Layout) -> Tensor {
        Tensor {
            storage: self.storage.clone(),
            layout,
            dtype: self.dtype,
            wrapped_number: false,
            base: self.base.clone(),
        }
    }

    /// `self` when its strides are already the row-major ones; otherwise a row-major tensor
    /// (a copy when the layout is not contiguous; size-1 dims get upstream's strides too).
    pub fn with_row_major_strides(&self) -> Result<Tensor> {
        let want = crate::layout::contiguous_strides(self.shape());
        if self.strides() == want.as_slice() {
            return Ok(self.clone());
        }
        if self.is_contiguous() {
            return Ok(self.relayout(Layout {
                sizes: self.layout.sizes.clone(),
                strides: want,
                offset: self.layout.offset,
            }));
        }
        self.copy_as(self.dtype, MemoryFormat::Contiguous)
    }

    /// True when this tensor was made by a view op (upstream's `_is_view()`).
    pub fn is_view(&self) -> bool {
        self.base.is_some()
    }

    /// The tensor this one is a view of (upstream's `_base`).
    pub fn view_base(&self) -> Option<&Tensor> {
        self.base.as_deref()
    }

    /// The same tensor, no longer recorded as a view (`detach()`).
    pub fn without_base(&self) -> Tensor {
        Tensor {
            storage: self.storage.clone(),
            layout: self.layout.clone(),
            dtype: self.dtype,
            wrapped_number: self.wrapped_number,
            base: None,
        }
    }

    /// A view of `self` with the same layout (`alias`, `view_as` with equal shapes).
    pub fn alias(&self) -> Tensor {
        self.with_layout(self.layout.clone())
    }

    /// `Tensor.view(dtype)`: the same bytes read as `dtype`. With another element size the
    /// last dimension (stride 1) shrinks or grows by the size ratio, as upstream's rules.
    pub fn view_dtype(&self, dtype: DType) -> Result<Tensor> {
        let op = "view";
        let (from, to) = (self.dtype.size_in_bytes(), dtype.size_in_bytes());
        let names = format!(
            "to view {} as {} (different element sizes)",
            self.dtype.name(),
            dtype.name()
        );
        let mut layout = self.layout.clone();
        if from != to {
            let n = layout.sizes.len();
            if n == 0 {
                return Err(invalid(op, format!("self.dim() cannot be 0 {names}")));
            }
            let last_stride_one = |l: &Layout| {
                if l.strides[n - 1] != 1 {
                    Err(invalid(
                        op,
                        format!(
                            "self.stride(-1) must be 1 {names}, but got {}",
                            l.strides[n - 1]
                        ),
                    ))
                } else {
                    Ok(())
                }
            };
            if from > to {
                let r = from / to;
                last_stride_one(&layout)?;
                layout.sizes[n - 1] *= r;
                layout.offset *= r;
                for st in &mut layout.strides[..n - 1] {
                    *st *= r;
                }
            } else {
                let r = to / from;
                if !layout.sizes[n - 1].is_multiple_of(r) {
                    return Err(invalid(
                        op,
                        format!(
                            "self.size(-1) must be divisible by {r} {names}, but got {}",
                            layout.sizes[n - 1]
                        ),
                    ));
                }
                last_stride_one(&layout)?;
                if !layout.offset.is_multiple_of(r) {
                    return Err(invalid(
                        op,
                        format!(
                            "self.storage_offset() must be divisible by {r} {names}, but got {}",
                            layout.offset
                        ),
                    ));
                }
                for (i, st) in layout.strides[..n - 1].iter().enumerate() {
                    if !st.is_multiple_of(r) {
                        return Err(invalid(
                            op,
                            format!(
                                "self.stride({i}) must be divisible by {r} {names}, but got {st}"
                            ),
                        ));
                    }
                }
                layout.sizes[n - 1] /= r;
                layout.offset /= r;
                for st in &mut layout.strides[..n - 1] {
                    *st /= r;
                }
            }
        }
        if let Some(storage) = &self.storage {
            let buf = storage.read();
            let extent = layout.offset
                + layout
                    .sizes
                    .iter()
                    .zip(&layout.strides)
                    .map(|(&s, &st)| s.saturating_sub(1) * st)
                    .sum::<usize>();
            let empty = layout.sizes.contains(&0);
            if !(buf.as_bytes().as_ptr() as usize).is_multiple_of(dtype.to_real().size_in_bytes())
                || (!empty && extent >= buf.len_as(dtype))
            {
                return Err(Error::Unsupported {
                    op,
                    reason: format!(
                        "the storage's {} bytes cannot be read as {} (alignment or length)",
                        buf.byte_len(),
                        dtype.name()
                    ),
                });
            }
        }
        // Upstream does not record a dtype view as a view (`_is_view()` is false, `_base`
        // None): it is not differentiable, so autograd never replays it.
        let mut v = self.relayout(layout);
        v.dtype = dtype;
        v.base = None;
        Ok(v)
    }

    /// A tensor of `dtype` over `storage` (memory from outside, or another tensor's), with
    /// the given layout in elements of `dtype`; checks alignment and bounds.
    pub fn over_storage(
        storage: Storage,
        dtype: DType,
        sizes: &[usize],
        strides: &[usize],
        offset: usize,
    ) -> Result<Tensor> {
        let op = "over_storage";
        if sizes.len() != strides.len() {
            return Err(invalid(op, "sizes and strides differ in length"));
        }
        checked_numel(op, sizes)?;
        {
            let buf = storage.read();
            let readable = match dtype {
                DType::Bool => bool::slice(&buf).is_some(),
                _ => with_dtype!(dtype, T => T::slice(&buf).is_some()),
            };
            if !readable {
                return Err(Error::Unsupported {
                    op,
                    reason: format!(
                        "the storage's {} bytes cannot be read as {} (alignment, length or bool bytes)",
                        buf.byte_len(),
                        dtype.name()
                    ),
                });
            }
        }
        let flat = Tensor {
            storage: Some(storage),
            layout: Layout::contiguous(&[0]),
            dtype,
            wrapped_number: false,
            base: None,
        };
        let mut t = flat.as_strided(sizes, strides, offset)?;
        t.base = None;
        Ok(t)
    }

    /// Replaces the layout in place, checking it stays in the storage (`as_strided_`, `t_`,
    /// `squeeze_`...): the tensor keeps its view status.
    pub fn set_layout(&mut self, sizes: &[usize], strides: &[usize], offset: usize) -> Result<()> {
        let v = self.as_strided(sizes, strides, offset)?;
        self.layout = v.layout;
        Ok(())
    }

    // ----- element access -----

    /// All elements in row-major order, each cast to `T` like `.to(dtype)` would.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        if self.dtype.is_complex() && !T::DTYPE.is_complex() {
            // Every caller that reads values as reals is an op without a complex kernel;
            // dropping the imaginary parts here would give wrong results silently.
            return Err(Error::UnsupportedDType {
                op: "to_vec",
                dtype: self.dtype,
            });
        }
        self.cast_to_vec()
    }

    /// The elements in row-major order cast to `T` as `.to(dtype)` casts (complex to real
    /// keeps the real part): for the copy paths, where that cast is what was asked for.
    pub(crate) fn cast_to_vec<T: Element>(&self) -> Result<Vec<T>> {
        let storage = needs_data("to_vec", self)?;
        let buf = storage.read();
        let mut out = crate::error::reserve_vec("to_vec", self.numel())?;
        if self.dtype == DType::Bool && <bool as Element>::slice(&buf).is_none() {
            // A bool view of other bytes (`view(torch.bool)`): any nonzero byte reads as
            // true, as upstream reads it; the bytes are never borrowed as Rust bools.
            let bytes = buf.as_bytes();
            for_each_offsets(
                &self.layout.sizes,
                [&self.layout.strides[..]],
                [self.layout.offset],
                |[o]| {
                    out.push(cast_element(bytes[o] != 0));
                },
            );
            return Ok(out);
        }
        with_dtype!(self.dtype, S => {
            let data = crate::storage::typed::<S>("to_vec", &buf)?;
            // A run at a time: in-order runs as slice loops (they vectorize).
            for_each_run(&self.layout.sizes, [&self.layout.strides[..]], [self.layout.offset], |[o], len, [st]| {
                if st == 1 {
                    out.extend(data[o..o + len].iter().map(|&v| cast_element::<S, T>(v)));
                } else {
                    out.extend((0..len).map(|k| cast_element::<S, T>(data[o + k * st])));
                }
            });
        });
        Ok(out)
    }

    /// Runs `f` on the elements of a contiguous tensor of element type `T` without copying
    /// (the storage stays read-locked during `f`; do not write to this tensor's storage
    /// from inside `f`).
    pub fn with_data<T: Element, R>(&self, f: impl FnOnce(&[T]) -> R) -> Result<R> {
        let op = "with_data";
        self.check_direct_access::<T>(op)?;
        let storage = needs_data(op, self)?;
        let buf = storage.read();
        let data = T::slice(&buf).ok_or(Error::UnsupportedDType {
            op,
            dtype: self.dtype,
        })?;
        Ok(f(
            &data[self.layout.offset..self.layout.offset + self.numel()]
        ))
    }

    /// Runs `f` on the elements of a contiguous tensor of element type `T`, mutably, in
    /// place (every view of the storage sees the writes).
    pub fn with_data_mut<T: Element, R>(&self, f: impl FnOnce(&mut [T]) -> R) -> Result<R> {
        let op = "with_data_mut";
        self.check_direct_access::<T>(op)?;
        let storage = needs_data(op, self)?;
        let mut buf = storage.write();
        let data = crate::storage::typed_mut::<T>(op, &mut buf)?;
        Ok(f(
            &mut data[self.layout.offset..self.layout.offset + self.numel()]
        ))
    }

    fn check_direct_access<T: Element>(&self, op: &'static str) -> Result<()> {
        if T::DTYPE != self.dtype {
            return Err(invalid(
                op,
                format!(
                    "tensor has dtype {}, not {}",
                    self.dtype.name(),
                    T::DTYPE.name()
                ),
            ));
        }
        if !self.is_contiguous() {
            return Err(invalid(
                op,
                format!(
                    "needs a contiguous tensor (strides {:?}); call contiguous() first",
                    self.strides()
                ),
            ));
        }
        Ok(())
    }

    /// The single element of a one-element tensor as a Python-style scalar.
    pub fn item(&self) -> Result<Scalar> {
        if self.numel() != 1 {
            return Err(invalid(
                "item",
                format!(
                    "a tensor with {} elements cannot be converted to a scalar",
                    self.numel()
                ),
            ));
        }
        Ok(if self.dtype.is_complex() {
            let v = self.to_vec::<crate::Cf64>()?[0];
            Scalar::Complex(v.re, v.im)
        } else if self.dtype.is_float() {
            Scalar::Float(self.to_vec::<f64>()?[0])
        } else if self.dtype == DType::Bool {
            Scalar::Bool(self.to_vec::<bool>()?[0])
        } else {
            Scalar::Int(self.to_vec::<i64>()?[0])
        })
    }

    // ----- copies and casts -----

    /// A copy of `self` cast to `dtype`, laid out per `format`.
    fn copy_as(&self, dtype: DType, format: MemoryFormat) -> Result<Tensor> {
        if self.storage.is_none() {
            return Tensor::meta(self.shape(), dtype);
        }
        if self.is_contiguous() && format != MemoryFormat::ChannelsLast {
            if let Some(t) = self.half_cast_contiguous(dtype)? {
                return Ok(t);
            }
        }
        let buf = with_dtype!(dtype, T => T::into_buffer(self.cast_to_vec::<T>()?));
        let out = Tensor::from_buffer("copy", buf, self.shape())?;
        let strides = format.strides_for(self.shape(), self.strides());
        if !self.is_contiguous() || format == MemoryFormat::ChannelsLast {
            let want = Layout {
                sizes: self.layout.sizes.clone(),
                strides,
                offset: 0,
            };
            if want.is_contiguous() {
                return Ok(out);
            }
            // Dense strides over a fresh buffer of exactly numel elements.
            let strided = out.relayout(want);
            strided.write_from(self)?;
            return Ok(strided);
        }
        Ok(out)
    }

    /// f32 <-> f16/bf16 of a contiguous tensor on the kernels module's vector casts (same
    /// round-to-nearest-even results as the element path); `None` for other pairs.
    fn half_cast_contiguous(&self, dtype: DType) -> Result<Option<Tensor>> {
        use crate::error::filled_vec;
        use crate::kernels;
        use half::{bf16, f16};
        let n = self.numel();
        let op = "to";
        let buf = match (self.dtype, dtype) {
            (DType::F32, DType::F16) => {
                let mut o = filled_vec(op, n, f16::ZERO)?;
                self.with_data(|x: &[f32]| kernels::f32_to_f16(x, &mut o))?;
                Buffer::F16(o)
            }
            (DType::F32, DType::BF16) => {
                let mut o = filled_vec(op, n, bf16::ZERO)?;
                self.with_data(|x: &[f32]| kernels::f32_to_bf16(x, &mut o))?;
                Buffer::BF16(o)
            }
            (DType::F16, DType::F32) => {
                let mut o = filled_vec(op, n, 0f32)?;
                self.with_data(|x: &[f16]| kernels::f16_to_f32(x, &mut o))?;
                Buffer::F32(o)
            }
            (DType::BF16, DType::F32) => {
                let mut o = filled_vec(op, n, 0f32)?;
                self.with_data(|x: &[bf16]| kernels::bf16_to_f32(x, &mut o))?;
                Buffer::F32(o)
            }
            _ => return Ok(None),
        };
        Ok(Some(Tensor::from_buffer(op, buf, self.shape())?))
    }

    /// `tensor.to(dtype)`: returns `self` (shared) when the dtype already matches; a copy keeps
    /// dense strides like PyTorch.
    pub fn to_dtype(&self, dtype: DType) -> Result<Tensor> {
        if dtype == self.dtype && !self.is_bool_view_of_bytes() {
            return Ok(self.clone());
        }
        self.copy_as(dtype, MemoryFormat::Preserve)
    }

    /// A bool tensor over memory that is not a bool allocation (`view(torch.bool)` of other
    /// bytes): its elements cannot be borrowed as Rust bools, so ops read a normalized copy.
    fn is_bool_view_of_bytes(&self) -> bool {
        self.dtype == DType::Bool
            && self
                .storage
                .as_ref()
                .is_some_and(|s| <bool as Element>::slice(&s.read()).is_none())
    }

    /// `tensor.to(device)`: Cpu -> Meta drops data; Meta -> Cpu is refused (no data exists).
    pub fn to_device(&self, device: Device) -> Result<Tensor> {
        match (self.device(), device) {
            (a, b) if a == b => Ok(self.clone()),
            (Device::Cpu, Device::Meta) => Tensor::meta(self.shape(), self.dtype),
            _ => Err(Error::UnsupportedDevice {
                op: "to (copy out of meta tensor)",
                device: "meta".into(),
            }),
        }
    }

    /// `tensor.clone(memory_format=...)`: a copy laid out in `format`.
    pub fn clone_with_format(&self, format: MemoryFormat) -> Result<Tensor> {
        self.copy_as(self.dtype, format)
    }

    /// `tensor.to(dtype, memory_format=...)`: a copy in `dtype` laid out in `format`.
    pub fn to_dtype_with_format(&self, dtype: DType, format: MemoryFormat) -> Result<Tensor> {
        self.copy_as(dtype, format)
    }

    /// True when the strides are `format`'s dense strides for this shape (`is_contiguous`
    /// with a memory format; size-1 dims may have any stride).
    pub fn is_contiguous_as(&self, format: MemoryFormat) -> bool {
        match format {
            MemoryFormat::ChannelsLast => {
                let want = crate::layout::channels_last_strides(self.shape());
                if self.dim() != 4 && self.dim() != 5 {
                    return false;
                }
                if self.numel() == 0 {
                    return true;
                }
                self.shape()
                    .iter()
                    .zip(self.strides().iter().zip(&want))
                    .all(|(&s, (&a, &b))| s == 1 || a == b)
            }
            _ => self.is_contiguous(),
        }
    }

    /// A new zero-filled tensor with the given sizes and strides over a fresh storage just big
    /// enough for them (`torch.empty_strided`).
    pub fn empty_strided(
        shape: &[usize],
        strides: &[usize],
        dtype: DType,
        device: Device,
    ) -> Result<Tensor> {
        if shape.len() != strides.len() {
            return Err(invalid(
                "empty_strided",
                format!(
                    "mismatch in length of strides {} and shape {}",
                    strides.len(),
                    shape.len()
                ),
            ));
        }
        let layout = Layout {
            sizes: shape.to_vec(),
            strides: strides.to_vec(),
            offset: 0,
        };
        checked_numel("empty_strided", shape)?;
        let len = layout.storage_extent();
        Ok(Tensor::empty_on(&[len], dtype, device)?.relayout(layout))
    }

    /// `tensor.contiguous()`: `self` when already contiguous, else a row-major copy.
    pub fn contiguous(&self) -> Result<Tensor> {
        if self.is_contiguous() {
            return Ok(self.clone());
        }
        self.copy_as(self.dtype, MemoryFormat::Contiguous)
    }

    /// `tensor.clone()`: a new tensor with its own storage; dense layouts keep their strides
    /// (PyTorch's `memory_format=torch.preserve_format`), others become row-major.
    pub fn deep_clone(&self) -> Result<Tensor> {
        self.copy_as(self.dtype, MemoryFormat::Preserve)
    }

    // ----- views -----

    /// `tensor.view(shape)` (one `-1` allowed); fails when strides forbid aliasing.
    pub fn view(&self, shape: &[i64]) -> Result<Tensor> {
        let sizes = infer_shape("view", shape, self.numel())?;
        let strides =
            compute_view_strides(self.shape(), self.strides(), &sizes).ok_or_else(|| {
                invalid(
                    "view",
                    format!(
                    "view size {sizes:?} is not compatible with input size {:?} and stride {:?} \
                     (at least one dimension spans across two contiguous subspaces); use reshape",
                    self.shape(),
                    self.strides()
                ),
                )
            })?;
        Ok(self.with_layout(Layout {
            sizes,
            strides,
            offset: self.layout.offset,
        }))
    }

    /// `tensor.reshape(shape)`: a view when strides allow, otherwise a copy.
    pub fn reshape(&self, shape: &[i64]) -> Result<Tensor> {
        let sizes = infer_shape("reshape", shape, self.numel())?;
        match compute_view_strides(self.shape(), self.strides(), &sizes) {
            Some(strides) => Ok(self.with_layout(Layout {
                sizes,
                strides,
                offset: self.layout.offset,
            })),
            None => {
                let c = self.copy_as(self.dtype, MemoryFormat::Contiguous)?;
                Ok(c.relayout(Layout::contiguous(&sizes)))
            }
        }
    }

    /// `tensor.permute(dims)`.
    pub fn permute(&self, dims: &[i64]) -> Result<Tensor> {
        let n = self.dim();
        if dims.len() != n {
            return Err(invalid(
                "permute",
                format!(
                    "number of dims {} does not match tensor dims {n}",
                    dims.len()
                ),
            ));
        }
        let mut seen = vec![false; n];
        let mut layout = Layout {
            sizes: vec![],
            strides: vec![],
            offset: self.layout.offset,
        };
        for &d in dims {
            let d = wrap_dim("permute", d, n)?;
            if std::mem::replace(&mut seen[d], true) {
                return Err(invalid("permute", format!("repeated dim {d} in {dims:?}")));
            }
            layout.sizes.push(self.layout.sizes[d]);
            layout.strides.push(self.layout.strides[d]);
        }
        Ok(self.with_layout(layout))
    }

    /// `tensor.transpose(dim0, dim1)`.
    pub fn transpose(&self, dim0: i64, dim1: i64) -> Result<Tensor> {
        if self.dim() == 0 {
            wrap_dim("transpose", dim0, 0)?;
            wrap_dim("transpose", dim1, 0)?;
            return Ok(self.with_layout(self.layout.clone()));
        }
        let a = wrap_dim("transpose", dim0, self.dim())?;
        let b = wrap_dim("transpose", dim1, self.dim())?;
        let mut layout = self.layout.clone();
        layout.sizes.swap(a, b);
        layout.strides.swap(a, b);
        Ok(self.with_layout(layout))
    }

    /// `tensor.t()`: transpose of a tensor with at most 2 dims.
    pub fn t(&self) -> Result<Tensor> {
        match self.dim() {
            0 | 1 => Ok(self.with_layout(self.layout.clone())),
            2 => self.transpose(0, 1),
            n => Err(invalid(
                "t",
                format!("expects a tensor with <= 2 dimensions, but self is {n}D"),
            )),
        }
    }

    /// `tensor.narrow(dim, start, length)` (negative start counts from the end).
    pub fn narrow(&self, dim: i64, start: i64, length: usize) -> Result<Tensor> {
        if self.dim() == 0 {
            return Err(invalid("narrow", "cannot be applied to a 0-dim tensor"));
        }
        let d = wrap_dim("narrow", dim, self.dim())?;
        let size = self.layout.sizes[d];
        let start = if start < 0 {
            start + size as i64
        } else {
            start
        };
        if start < 0 || start as usize > size || length > size - start as usize {
            return Err(invalid(
                "narrow",
                format!("start ({start}) + length ({length}) exceeds dimension size ({size})"),
            ));
        }
        let mut layout = self.layout.clone();
        layout.offset += start as usize * layout.strides[d];
        layout.sizes[d] = length;
        Ok(self.with_layout(layout))
    }

    /// `tensor[..., start:end:step, ...]` on `dim`, with Python's clamping of start/end.
    pub fn slice(
        &self,
        dim: i64,
        start: Option<i64>,
        end: Option<i64>,
        step: i64,
    ) -> Result<Tensor> {
        if self.dim() == 0 {
            return Err(invalid("slice", "cannot be applied to a 0-dim tensor"));
        }
        if step <= 0 {
            return Err(invalid(
                "slice",
                format!("step must be positive, got {step}"),
            ));
        }
        let d = wrap_dim("slice", dim, self.dim())?;
        let size = self.layout.sizes[d] as i64;
        let clamp = |v: i64| {
            if v < 0 {
                (v + size).max(0)
            } else {
                v.min(size)
            }
        };
        let s = clamp(start.unwrap_or(0));
        let e = clamp(end.unwrap_or(size)).max(s);
        let len = if e > s { (e - s - 1) / step + 1 } else { 0 };
        let mut layout = self.layout.clone();
        // The offset moves to the clamped start even for an empty result (as upstream's).
        layout.offset += s as usize * layout.strides[d];
        layout.sizes[d] = len as usize;
        layout.strides[d] = layout.strides[d].saturating_mul(step as usize);
        Ok(self.with_layout(layout))
    }

    /// `tensor.select(dim, index)`: removes `dim`, keeping the `index`-th slice.
    pub fn select(&self, dim: i64, index: i64) -> Result<Tensor> {
        if self.dim() == 0 {
            return Err(invalid("select", "cannot be applied to a 0-dim tensor"));
        }
        let d = wrap_dim("select", dim, self.dim())?;
        let size = self.layout.sizes[d];
        let i = if index < 0 {
            index + size as i64
        } else {
            index
        };
        if i < 0 || i >= size as i64 {
            return Err(Error::IndexOutOfRange {
                op: "select",
                index,
                size,
            });
        }
        let mut layout = self.layout.clone();
        layout.offset += i as usize * layout.strides[d];
        layout.sizes.remove(d);
        layout.strides.remove(d);
        Ok(self.with_layout(layout))
    }

    /// `tensor.expand(sizes)`: `-1` keeps a size; new leading dims and size-1 dims broadcast
    /// with stride 0.
    pub fn expand(&self, sizes: &[i64]) -> Result<Tensor> {
        let n = sizes.len();
        if n < self.dim() {
            return Err(invalid(
                "expand",
                format!(
                    "the number of sizes provided ({n}) must be >= the number of dims ({})",
                    self.dim()
                ),
            ));
        }
        let lead = n - self.dim();
        let mut layout = Layout {
            sizes: vec![0; n],
            strides: vec![0; n],
            offset: self.layout.offset,
        };
        for i in 0..n {
            let want = sizes[i];
            if i < lead {
                if want < 0 {
                    return Err(invalid(
                        "expand",
                        format!("-1 is not allowed in a leading, non-existing dimension ({i})"),
                    ));
                }
                layout.sizes[i] = want as usize;
                continue;
            }
            let (have, stride) = (self.layout.sizes[i - lead], self.layout.strides[i - lead]);
            if want == -1 || want as usize == have && want >= 0 {
                layout.sizes[i] = have;
                layout.strides[i] = stride;
            } else if have == 1 && want >= 0 {
                layout.sizes[i] = want as usize;
            } else {
                return Err(Error::ShapeMismatch {
                    op: "expand",
                    lhs: self.shape().to_vec(),
                    rhs: sizes.iter().map(|&s| s.max(0) as usize).collect(),
                    reason: format!("the expanded size {want} must match the existing size {have} at non-singleton dimension {i}"),
                });
            }
        }
        // A new leading dim of size 1 gets the stride upstream gives it (the next dim's size
        // times stride; 0 below a 0-dim source); expanded ones read one element (stride 0).
        for i in (0..lead).rev() {
            if layout.sizes[i] == 1 && i + 1 < n {
                layout.strides[i] = layout.sizes[i + 1] * layout.strides[i + 1];
            }
        }
        checked_numel("expand", &layout.sizes)?;
        Ok(self.with_layout(layout))
    }

    /// `torch.broadcast_to(tensor, shape)`.
    pub fn broadcast_to(&self, shape: &[usize]) -> Result<Tensor> {
        let s: Vec<i64> = shape.iter().map(|&x| x as i64).collect();
        if shape.len() < self.dim() {
            return Err(Error::ShapeMismatch {
                op: "broadcast_to",
                lhs: self.shape().to_vec(),
                rhs: shape.to_vec(),
                reason: "target has fewer dimensions".into(),
            });
        }
        self.expand(&s)
    }

    /// `tensor.unsqueeze(dim)` (dim in `[-ndim-1, ndim]`).
    pub fn unsqueeze(&self, dim: i64) -> Result<Tensor> {
        let d = wrap_dim("unsqueeze", dim, self.dim() + 1)?;
        let mut layout = self.layout.clone();
        let stride = if d < self.dim() {
            layout.sizes[d] * layout.strides[d]
        } else {
            1
        };
        layout.sizes.insert(d, 1);
        layout.strides.insert(d, stride);
        Ok(self.with_layout(layout))
    }

    /// `tensor.squeeze()`: removes all size-1 dims.
    pub fn squeeze(&self) -> Tensor {
        let mut layout = Layout {
            sizes: vec![],
            strides: vec![],
            offset: self.layout.offset,
        };
        for (&s, &st) in self.layout.sizes.iter().zip(&self.layout.strides) {
            if s != 1 {
                layout.sizes.push(s);
                layout.strides.push(st);
            }
        }
        self.with_layout(layout)
    }

    /// `tensor.squeeze(dims)`: removes the listed dims that have size 1.
    pub fn squeeze_dims(&self, dims: &[i64]) -> Result<Tensor> {
        let mut drop = vec![false; self.dim()];
        for &d in dims {
            let d = wrap_dim("squeeze", d, self.dim())?;
            if self.dim() > 0 && self.layout.sizes[d] == 1 {
                drop[d] = true;
            }
        }
        let mut layout = Layout {
            sizes: vec![],
            strides: vec![],
            offset: self.layout.offset,
        };
        for (i, &dropped) in drop.iter().enumerate() {
            if !dropped {
                layout.sizes.push(self.layout.sizes[i]);
                layout.strides.push(self.layout.strides[i]);
            }
        }
        Ok(self.with_layout(layout))
    }

    /// `tensor.flatten(start_dim, end_dim)` (a view when possible, like reshape).
    pub fn flatten(&self, start_dim: i64, end_dim: i64) -> Result<Tensor> {
        if self.dim() == 0 {
            return self.reshape(&[1]);
        }
        let s = wrap_dim("flatten", start_dim, self.dim())?;
        let e = wrap_dim("flatten", end_dim, self.dim())?;
        if s > e {
            return Err(invalid("flatten", "start_dim cannot come after end_dim"));
        }
        let mut shape: Vec<i64> = self.shape()[..s].iter().map(|&x| x as i64).collect();
        shape.push(self.shape()[s..=e].iter().product::<usize>() as i64);
        shape.extend(self.shape()[e + 1..].iter().map(|&x| x as i64));
        self.reshape(&shape)
    }

    /// `tensor.unflatten(dim, sizes)` (one `-1` allowed in `sizes`).
    pub fn unflatten(&self, dim: i64, sizes: &[i64]) -> Result<Tensor> {
        if self.dim() == 0 {
            return Err(invalid("unflatten", "cannot be applied to a 0-dim tensor"));
        }
        let d = wrap_dim("unflatten", dim, self.dim())?;
        let inner = infer_shape("unflatten", sizes, self.layout.sizes[d])?;
        let mut shape: Vec<i64> = self.shape()[..d].iter().map(|&x| x as i64).collect();
        shape.extend(inner.iter().map(|&x| x as i64));
        shape.extend(self.shape()[d + 1..].iter().map(|&x| x as i64));
        self.view(&shape)
    }

    /// `torch.as_strided(tensor, size, stride, storage_offset)`; refuses layouts that reach
    /// past the end of the storage.
    pub fn as_strided(&self, sizes: &[usize], strides: &[usize], offset: usize) -> Result<Tensor> {
        if sizes.len() != strides.len() {
            return Err(invalid(
                "as_strided",
                format!(
                    "mismatch in length of strides {} and shape {}",
                    strides.len(),
                    sizes.len()
                ),
            ));
        }
        checked_numel("as_strided", sizes)?;
        let mut extent = offset as u128 + 1;
        for (&s, &st) in sizes.iter().zip(strides) {
            if s == 0 {
                extent = 0;
                break;
            }
            extent += (s as u128 - 1) * st as u128;
        }
        if let Some(storage) = &self.storage {
            let len = storage.read().len_as(self.dtype) as u128;
            if extent > len {
                return Err(invalid(
                    "as_strided",
                    format!("setStorage: sizes {sizes:?}, strides {strides:?}, offset {offset} require {extent} elements but storage has {len}"),
                ));
            }
        }
        Ok(self.with_layout(Layout {
            sizes: sizes.to_vec(),
            strides: strides.to_vec(),
            offset,
        }))
    }

    /// `torch.diagonal(tensor, offset, dim1, dim2)`: a view; the diagonal becomes the last dim.
    pub fn diagonal(&self, offset: i64, dim1: i64, dim2: i64) -> Result<Tensor> {
        let a = wrap_dim("diagonal", dim1, self.dim())?;
        let b = wrap_dim("diagonal", dim2, self.dim())?;
        if a == b || self.dim() < 2 {
            return Err(invalid(
                "diagonal",
                "dimensions cannot be identical and the tensor needs >= 2 dims",
            ));
        }
        let (sa, sb) = (self.layout.sizes[a] as i64, self.layout.sizes[b] as i64);
        // Saturating: a huge offset just gives an empty diagonal (start is unused then).
        let (len, start) = if offset >= 0 {
            (
                sa.min(sb.saturating_sub(offset)).max(0),
                offset.saturating_mul(self.layout.strides[b] as i64),
            )
        } else {
            (
                sa.saturating_add(offset).min(sb).max(0),
                offset
                    .saturating_neg()
                    .saturating_mul(self.layout.strides[a] as i64),
            )
        };
        let mut layout = Layout {
            sizes: vec![],
            strides: vec![],
            offset: self.layout.offset,
        };
        if len > 0 {
            layout.offset += start as usize;
        }
        for i in 0..self.dim() {
            if i != a && i != b {
                layout.sizes.push(self.layout.sizes[i]);
                layout.strides.push(self.layout.strides[i]);
            }
        }
        layout.sizes.push(len as usize);
        layout
            .strides
            .push(self.layout.strides[a] + self.layout.strides[b]);
        Ok(self.with_layout(layout))
    }

    // ----- in-place writes -----

    /// Writes `values` (row-major, already of this dtype) through this view's layout.
    fn write_values<T: Element>(&self, op: &'static str, values: &[T]) -> Result<()> {
        let storage = needs_data(op, self)?;
        let mut buf = storage.write();
        if T::DTYPE == DType::Bool && <bool as Element>::slice(&buf).is_none() {
            // Bools into other bytes (a bool view of them) are written as bytes 0 and 1.
            let bytes: Vec<u8> = values.iter().map(|v| v.to_i64() as u8).collect();
            drop(buf);
            // Element offsets are byte offsets for both one-byte types.
            return self.write_values::<u8>(op, &bytes);
        }
        let data = crate::storage::typed_mut::<T>(op, &mut buf)?;
        // `values` in row-major order; stops where either side ends.
        let mut next = 0usize;
        for_each_run(
            &self.layout.sizes,
            [&self.layout.strides[..]],
            [self.layout.offset],
            |[o], len, [st]| {
                let len = len.min(values.len().saturating_sub(next));
                let src = &values[next..next + len];
                if st == 1 {
                    data[o..o + len].copy_from_slice(src);
                } else {
                    for (k, v) in src.iter().enumerate() {
                        data[o + k * st] = *v;
                    }
                }
                next += len;
            },
        );
        Ok(())
    }

    /// Refuses in-place writes to views where several elements share one memory location
    /// (e.g. expanded tensors), as PyTorch does.
    fn check_no_internal_overlap(&self, op: &'static str) -> Result<()> {
        let overlaps = self
            .layout
            .sizes
            .iter()
            .zip(&self.layout.strides)
            .any(|(&s, &st)| s > 1 && st == 0);
        if overlaps {
            return Err(invalid(
                op,
                "unsupported operation: more than one element of the written-to tensor refers to a single memory location; clone() first",
            ));
        }
        Ok(())
    }

    /// `tensor.copy_(src)`: broadcasts `src` to this shape, casts to this dtype and writes
    /// through the view. `src` is read completely before writing, so overlap is safe.
    pub fn copy_(&self, src: &Tensor) -> Result<()> {
        self.check_no_internal_overlap("copy_")?;
        self.check_no_partial_overlap("copy_", src)?;
        self.write_from(src)
    }

    /// Broadcasts, casts and writes `src` through this view (no overlap checks).
    fn write_from(&self, src: &Tensor) -> Result<()> {
        let src = src
            .broadcast_to(self.shape())
            .map_err(|_| Error::ShapeMismatch {
                op: "copy_",
                lhs: self.shape().to_vec(),
                rhs: src.shape().to_vec(),
                reason: "source does not broadcast to destination".into(),
            })?;
        if self.storage.is_none() {
            return Ok(());
        }
        needs_data("copy_", &src)?;
        with_dtype!(self.dtype, T => {
            // A cast is what copy_ asks for (complex into real keeps the real parts).
            let values = src.cast_to_vec::<T>()?;
            self.write_values("copy_", &values)
        })
    }

    /// Writes an out-of-place result into `self`, checking shape and cast rules of in-place ops.
    /// `inputs` are the operands the result was computed from (checked for partial overlap).
    pub(crate) fn assign_result(
        &self,
        op: &'static str,
        result: &Tensor,
        inputs: &[&Tensor],
    ) -> Result<()> {
        if result.shape() != self.shape() {
            return Err(Error::ShapeMismatch {
                op,
                lhs: self.shape().to_vec(),
                rhs: result.shape().to_vec(),
                reason: "output shape doesn't match the broadcast shape".into(),
            });
        }
        if !can_cast(result.dtype, self.dtype) {
            return Err(invalid(
                op,
                format!(
                    "result type {} can't be cast to the desired output type {}",
                    result.dtype.name(),
                    self.dtype.name()
                ),
            ));
        }
        self.check_no_internal_overlap(op)?;
        for input in inputs {
            self.check_no_partial_overlap(op, input)?;
        }
        self.write_from(result)
    }

    /// True when the elements form a dense block in some dim order (PyTorch's
    /// `is_non_overlapping_and_dense`).
    fn is_non_overlapping_and_dense(&self) -> bool {
        let mut dims: Vec<(usize, usize)> = self
            .layout
            .sizes
            .iter()
            .zip(&self.layout.strides)
            .filter(|(&s, _)| s != 1)
            .map(|(&s, &st)| (st, s))
            .collect();
        dims.sort();
        let mut expected = 1;
        for (stride, size) in dims {
            if stride != expected {
                return false;
            }
            expected *= size;
        }
        true
    }

    /// PyTorch's `assert_no_partial_overlap`: refuses an input that shares memory with the
    /// written tensor unless it is exactly the same view. Layouts PyTorch cannot analyse
    /// (not dense) are allowed; for those we compute into a temporary, which is the result
    /// the op would have without aliasing.
    fn check_no_partial_overlap(&self, op: &'static str, input: &Tensor) -> Result<()> {
        if !self.shares_storage(input) || self.numel() == 0 || input.numel() == 0 {
            return Ok(());
        }
        if self.layout == input.layout {
            return Ok(());
        }
        if !self.is_non_overlapping_and_dense() || !input.is_non_overlapping_and_dense() {
            return Ok(());
        }
        let (a0, a1) = (self.layout.offset, self.layout.offset + self.numel());
        let (b0, b1) = (input.layout.offset, input.layout.offset + input.numel());
        let partial = if a0 == b0 && a1 == b1 {
            self.layout.strides != input.layout.strides
        } else {
            a0 < b1 && b0 < a1
        };
        if partial {
            return Err(invalid(
                op,
                "unsupported operation: some elements of the input tensor and the written-to tensor refer to a single memory location; clone() first",
            ));
        }
        Ok(())
    }

    /// `tensor.fill_(value)`.
    pub fn fill_(&self, value: Scalar) -> Result<()> {
        check_scalar_fits("fill_", value, self.dtype)?;
        // Upstream's fill_ writes one value everywhere, so overlapping (expanded) views are fine.
        self.write_from(&Tensor::scalar_tensor(value, self.dtype))
    }

    /// `tensor.add_(other)` (in place, `other` broadcasts to `self`).
    pub fn add_(&self, other: impl crate::ops::pointwise::Operand) -> Result<()> {
        let other = other.to_operand();
        self.assign_result("add_", &self.add(&other)?, &[&other])
    }

    /// `tensor.mul_(other)`.
    pub fn mul_(&self, other: impl crate::ops::pointwise::Operand) -> Result<()> {
        let other = other.to_operand();
        self.assign_result("mul_", &self.mul(&other)?, &[&other])
    }

    /// `tensor.sub_(other)`.
    pub fn sub_(&self, other: impl crate::ops::pointwise::Operand) -> Result<()> {
        let other = other.to_operand();
        self.assign_result("sub_", &self.sub(&other)?, &[&other])
    }

    /// `tensor.div_(other)` (true division: integer tensors are refused, the result is float).
    pub fn div_(&self, other: impl crate::ops::pointwise::Operand) -> Result<()> {
        let other = other.to_operand();
        self.assign_result("div_", &self.div(&other)?, &[&other])
    }

    /// `tensor.masked_fill_(mask, value)`: `mask` (bool) broadcasts to `self`.
    pub fn masked_fill_(&self, mask: &Tensor, value: Scalar) -> Result<()> {
        let result = self.masked_fill(mask, value)?;
        self.assign_result("masked_fill_", &result, &[mask])
    }

    /// Out-of-place `masked_fill` (result has `self`'s dtype; mask broadcasts both ways).
    pub fn masked_fill(&self, mask: &Tensor, value: Scalar) -> Result<Tensor> {
        if mask.dtype != DType::Bool {
            return Err(invalid(
                "masked_fill",
                format!(
                    "only supports boolean masks, but got mask with dtype {}",
                    mask.dtype.name()
                ),
            ));
        }
        check_scalar_fits("masked_fill", value, self.dtype)?;
        let fill = Tensor::scalar_tensor(value, self.dtype);
        crate::ops::pointwise::where_(mask, &fill, self).and_then(|t| t.to_dtype(self.dtype))
    }

    /// `tensor.index_copy_(dim, index, source)`: `self.select(dim, index[i]) = source.select(dim, i)`.
    pub fn index_copy_(&self, dim: i64, index: &Tensor, source: &Tensor) -> Result<()> {
        let op = "index_copy_";
        self.check_no_partial_overlap(op, source)?;
        let d = wrap_dim(op, dim, self.dim())?;
        let idx = crate::ops::index::index_values(
            op,
            index,
            if self.dim() == 0 { 1 } else { self.shape()[d] },
        )?;
        if index.dim() > 1 {
            return Err(invalid(op, "index should have dimension 1 or 0"));
        }
        let mut expected = self.shape().to_vec();
        if self.dim() > 0 {
            expected[d] = idx.len();
        }
        if source.shape() != expected.as_slice() && !(self.dim() == 0 && source.numel() == 1) {
            return Err(Error::ShapeMismatch {
                op,
                lhs: expected,
                rhs: source.shape().to_vec(),
                reason: "source has the wrong shape".into(),
            });
        }
        if source.dtype != self.dtype {
            return Err(invalid(
                op,
                format!(
                    "self and source expected to have the same dtype, but got {} and {}",
                    self.dtype.name(),
                    source.dtype.name()
                ),
            ));
        }
        if self.dim() == 0 {
            return self.copy_(&source.reshape(&[])?);
        }
        let src = source.contiguous()?.deep_clone()?; // read before any write
        for (i, &j) in idx.iter().enumerate() {
            self.select(d as i64, j as i64)?
                .copy_(&src.select(d as i64, i as i64)?)?;
        }
        Ok(())
    }

    /// `tensor.index_put_(indices, values, accumulate)`: advanced indexing on the leading
    /// `indices.len()` dims (int64 index tensors broadcast together, or bool masks).
    pub fn index_put_(&self, indices: &[Tensor], values: &Tensor, accumulate: bool) -> Result<()> {
        let op = "index_put_";
        self.check_no_internal_overlap(op)?;
        self.check_no_partial_overlap(op, values)?;
        let (offsets, result_shape) = crate::ops::index::advanced_index_offsets(op, self, indices)?;
        let values = values
            .to_dtype(self.dtype)?
            .broadcast_to(&result_shape)
            .map_err(|_| Error::ShapeMismatch {
                op,
                lhs: result_shape.clone(),
                rhs: values.shape().to_vec(),
                reason: "values do not broadcast to the indexed shape".into(),
            })?;
        let storage = needs_data(op, self)?;
        with_dtype!(self.dtype, T => {
            let vals = values.to_vec::<T>()?;
            let mut buf = storage.write();
            let data = crate::storage::typed_mut::<T>(op, &mut buf)?;
            for (&o, &v) in offsets.iter().zip(&vals) {
                data[o] = if accumulate { crate::ops::pointwise::add_elements(data[o], v) } else { v };
            }
        });
        Ok(())
    }

    /// `tensor[indices]` with advanced indexing (see [`Tensor::index_put_`]).
    pub fn index(&self, indices: &[Tensor]) -> Result<Tensor> {
        let op = "index";
        let (offsets, result_shape) = crate::ops::index::advanced_index_offsets(op, self, indices)?;
        if self.storage.is_none() {
            return Tensor::meta(&result_shape, self.dtype);
        }
        let storage = needs_data(op, self)?;
        let buf = storage.read();
        let out = crate::storage::gather(op, self.dtype, &buf, &offsets)?;
        drop(buf);
        Tensor::from_buffer(op, out, &result_shape)
    }
}

/// The common shape of several tensors under broadcasting.
pub fn broadcast_all_shapes(op: &'static str, tensors: &[&Tensor]) -> Result<Vec<usize>> {
    let mut shape: Vec<usize> = vec![];
    for t in tensors {
        shape = broadcast_shapes(op, &shape, t.shape())?;
    }
    Ok(shape)
}

/// `torch.result_type` over tensors (wrapped numbers rank lowest).
pub fn result_type_of(tensors: &[&Tensor]) -> Result<DType> {
    let ops: Vec<_> = tensors.iter().map(|t| t.promotion_operand()).collect();
    result_type(&ops)
}

/// The device an op on these tensors runs on: Meta when any non-scalar operand is meta;
/// CPU 0-dim tensors may mix with meta (as PyTorch allows for CPU scalars).
pub(crate) fn common_device(op: &'static str, tensors: &[&Tensor]) -> Result<Device> {
    let mut dev = None;
    for t in tensors {
        if t.device() == Device::Cpu && t.dim() == 0 {
            continue;
        }
        match dev {
            None => dev = Some(t.device()),
            Some(d) if d != t.device() => {
                return Err(Error::UnsupportedDevice {
                    op,
                    device: format!(
                        "expected all tensors on the same device, found {} and {}",
                        d.name(),
                        t.device().name()
                    ),
                })
            }
            _ => {}
        }
    }
    Ok(dev.unwrap_or(Device::Cpu))
}
