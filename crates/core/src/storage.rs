//! Typed element buffers shared between tensors, and PyTorch's element casts.

use crate::complex::{Cf32, Cf64, ComplexParts};
use crate::dtype::DType;
use half::{bf16, f16};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// A Rust element type that maps 1:1 to a [`DType`], with PyTorch's conversion rules.
pub trait Element: Copy + Send + Sync + Default + PartialEq + std::fmt::Debug + 'static {
    /// The dtype this type stores.
    const DTYPE: DType;
    /// Exact widening to f64 (integers beyond 2^53 round).
    fn to_f64(self) -> f64;
    /// Integer value; floats convert like C++ `static_cast` on x86 (see [`float_to_i64`]).
    fn to_i64(self) -> i64;
    /// Conversion from a float value, as PyTorch's `.to(dtype)` does.
    fn from_f64(v: f64) -> Self;
    /// Conversion from an integer value, as PyTorch's `.to(dtype)` does (wrapping for ints).
    fn from_i64(v: i64) -> Self;
    /// Borrow the buffer's elements if it holds this type.
    fn slice(buf: &Buffer) -> Option<&[Self]>;
    /// Mutably borrow the buffer's elements if it holds this type.
    fn slice_mut(buf: &mut Buffer) -> Option<&mut [Self]>;
    /// Wrap a vector into a buffer.
    fn into_buffer(v: Vec<Self>) -> Buffer;
    /// The value as a complex number (real types: imaginary part 0).
    fn to_complex(self) -> Cf64 {
        Cf64::new(self.to_f64(), 0.0)
    }
    /// Conversion from a complex value, as PyTorch's `.to(dtype)` does: real types keep the
    /// real part, except bool, which is true when either part is nonzero.
    fn from_complex(v: Cf64) -> Self {
        if Self::DTYPE == DType::Bool {
            Self::from_f64(if v.re != 0.0 || v.im != 0.0 { 1.0 } else { 0.0 })
        } else {
            Self::from_f64(v.re)
        }
    }
}

/// Float to int64 as PyTorch does on x86: truncation toward zero; NaN and out-of-range
/// values give `i64::MIN` (the CPU's "integer indefinite" result).
pub fn float_to_i64(v: f64) -> i64 {
    // 2^63 as f64; NaN fails `contains` too.
    const TWO_POW_63: f64 = 9_223_372_036_854_775_808.0;
    if !(-TWO_POW_63..TWO_POW_63).contains(&v) {
        i64::MIN
    } else {
        v.trunc() as i64
    }
}

/// Float to a narrower int: PyTorch converts through int32 (out-of-range gives `i32::MIN`)
/// and then keeps the low bits, e.g. 300.0 -> uint8 44, -1.0 -> uint8 255.
fn float_to_i32_bits(v: f64) -> i32 {
    if v.is_nan() || v >= 2_147_483_648.0 || v <= -2_147_483_649.0 {
        i32::MIN
    } else {
        v.trunc() as i32
    }
}

/// The buffer accessors of a plain-number element type stored in `Buffer::$variant` (other
/// allocations are reinterpreted).
macro_rules! buffer_access {
    ($variant:ident) => {
        fn slice(buf: &Buffer) -> Option<&[Self]> {
            match buf {
                Buffer::$variant(v) => Some(v),
                other => reinterpret(other.as_bytes()),
            }
        }
        fn slice_mut(buf: &mut Buffer) -> Option<&mut [Self]> {
            match buf {
                Buffer::$variant(v) => Some(v),
                other => reinterpret_mut(other.as_bytes_mut()?),
            }
        }
        fn into_buffer(v: Vec<Self>) -> Buffer {
            Buffer::$variant(v)
        }
    };
}

macro_rules! int_element {
    ($t:ty, $variant:ident, $from_f:expr) => {
        impl Element for $t {
            const DTYPE: DType = DType::$variant;
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn to_i64(self) -> i64 {
                self as i64
            }
            fn from_f64(v: f64) -> Self {
                $from_f(v)
            }
            fn from_i64(v: i64) -> Self {
                v as $t
            }
            buffer_access!($variant);
        }
    };
}

int_element!(i64, I64, float_to_i64);
int_element!(i32, I32, float_to_i32_bits);
int_element!(i16, I16, |v| float_to_i32_bits(v) as i16);
int_element!(i8, I8, |v| float_to_i32_bits(v) as i8);
int_element!(u8, U8, |v| float_to_i32_bits(v) as u8);
int_element!(u16, U16, |v| float_to_i64(v) as u16);
int_element!(u32, U32, |v| float_to_i64(v) as u32);
int_element!(u64, U64, |v: f64| if v >= 9_223_372_036_854_775_808.0 {
    float_to_i64(v - 9_223_372_036_854_775_808.0) as u64 ^ (1 << 63)
} else {
    float_to_i64(v) as u64
});

macro_rules! float_element {
    ($t:ty, $variant:ident, $to:expr, $from_f:expr, $from_i:expr) => {
        impl Element for $t {
            const DTYPE: DType = DType::$variant;
            fn to_f64(self) -> f64 {
                $to(self)
            }
            fn to_i64(self) -> i64 {
                let v = $to(self);
                float_to_i64(v)
            }
            fn from_f64(v: f64) -> Self {
                $from_f(v)
            }
            fn from_i64(v: i64) -> Self {
                $from_i(v)
            }
            buffer_access!($variant);
        }
    };
}

float_element!(f64, F64, |x: f64| x, |v| v, |v: i64| v as f64);
float_element!(f32, F32, |x: f32| x as f64, |v: f64| v as f32, |v: i64| v
    as f32);
// Half types convert through f32, as c10::Half / c10::BFloat16 do (round to nearest even).
float_element!(
    f16,
    F16,
    |x: f16| x.to_f64(),
    |v: f64| f16::from_f32(v as f32),
    |v: i64| f16::from_f32(v as f32)
);
float_element!(
    bf16,
    BF16,
    |x: bf16| x.to_f64(),
    |v: f64| bf16::from_f32(v as f32),
    |v: i64| bf16::from_f32(v as f32)
);

macro_rules! complex_element {
    ($t:ty, $variant:ident) => {
        impl Element for $t {
            const DTYPE: DType = DType::$variant;
            /// The real part (PyTorch's cast to a real dtype, which warns there).
            fn to_f64(self) -> f64 {
                self.to_c64().re
            }
            fn to_i64(self) -> i64 {
                float_to_i64(self.to_c64().re)
            }
            fn from_f64(v: f64) -> Self {
                Self::from_c64(Cf64::new(v, 0.0))
            }
            fn from_i64(v: i64) -> Self {
                Self::from_c64(Cf64::new(v as f64, 0.0))
            }
            buffer_access!($variant);
            fn to_complex(self) -> Cf64 {
                self.to_c64()
            }
            fn from_complex(v: Cf64) -> Self {
                Self::from_c64(v)
            }
        }
    };
}

complex_element!(Cf32, C64);
complex_element!(Cf64, C128);

impl Element for bool {
    const DTYPE: DType = DType::Bool;
    fn to_f64(self) -> f64 {
        self as u8 as f64
    }
    fn to_i64(self) -> i64 {
        self as i64
    }
    fn from_f64(v: f64) -> Self {
        v != 0.0 // NaN is nonzero, so true
    }
    fn from_i64(v: i64) -> Self {
        v != 0
    }
    fn slice(buf: &Buffer) -> Option<&[Self]> {
        match buf {
            Buffer::Bool(v) => Some(v),
            Buffer::Foreign(f) if f.holds_bools => {
                // SAFETY: checked to be 0/1 bytes when marked (ForeignBytes::with_bools).
                Some(unsafe { std::slice::from_raw_parts(f.ptr.as_ptr().cast::<bool>(), f.len) })
            }
            _ => None,
        }
    }
    fn slice_mut(buf: &mut Buffer) -> Option<&mut [Self]> {
        match buf {
            Buffer::Bool(v) => Some(v),
            Buffer::Foreign(f) if f.holds_bools && f.writable => {
                // SAFETY: as in `slice`; writes through a bool slice keep the bytes 0/1.
                Some(unsafe {
                    std::slice::from_raw_parts_mut(f.ptr.as_ptr().cast::<bool>(), f.len)
                })
            }
            _ => None,
        }
    }
    fn into_buffer(v: Vec<Self>) -> Buffer {
        Buffer::Bool(v)
    }
}

/// The bytes of another allocation read as `T` (a `view(dtype)` or foreign memory), as many
/// whole `T`s as fit; `None` when they are misaligned for `T`.
///
/// Only for the plain-number element types (and pairs of them, the complex types): every
/// bit pattern is a valid value of them.
/// `bool` never comes here (its `slice` accepts only bool allocations), since a byte other
/// than 0 or 1 is not a valid Rust `bool`.
fn reinterpret<T: Element>(bytes: &[u8]) -> Option<&[T]> {
    let size = std::mem::size_of::<T>();
    // Trailing bytes that make no whole T are left out (a mapped file's tail).
    if !(bytes.as_ptr() as usize).is_multiple_of(std::mem::align_of::<T>()) {
        return None;
    }
    // SAFETY: aligned, in bounds, and T (a primitive number or a half type) is valid for
    // every bit pattern; the borrow of `bytes` bounds the lifetime.
    Some(unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast::<T>(), bytes.len() / size) })
}

fn reinterpret_mut<T: Element>(bytes: &mut [u8]) -> Option<&mut [T]> {
    let size = std::mem::size_of::<T>();
    if !(bytes.as_ptr() as usize).is_multiple_of(std::mem::align_of::<T>()) {
        return None;
    }
    // SAFETY: as in `reinterpret`, and the exclusive borrow makes the result unique.
    Some(unsafe {
        std::slice::from_raw_parts_mut(bytes.as_mut_ptr().cast::<T>(), bytes.len() / size)
    })
}

/// The buffer's elements as `T` (the tensor's element type), or an error naming `op` when
/// its bytes cannot be read as `T`.
pub fn typed<'a, T: Element>(op: &'static str, buf: &'a Buffer) -> crate::Result<&'a [T]> {
    T::slice(buf).ok_or(crate::Error::UnsupportedDType {
        op,
        dtype: T::DTYPE,
    })
}

/// The elements at `offsets` (in elements of `dtype`) as a new buffer of `dtype`. Bool
/// elements of bytes that are not a bool allocation (a `view(torch.bool)`) are read as bytes,
/// nonzero meaning true.
pub fn gather(
    op: &'static str,
    dtype: DType,
    buf: &Buffer,
    offsets: &[usize],
) -> crate::Result<Buffer> {
    if dtype == DType::Bool && bool::slice(buf).is_none() {
        let bytes = buf.as_bytes();
        return Ok(Buffer::Bool(
            offsets.iter().map(|&o| bytes[o] != 0).collect(),
        ));
    }
    Ok(crate::with_dtype!(dtype, T => {
        let data = typed::<T>(op, buf)?;
        T::into_buffer(offsets.iter().map(|&o| data[o]).collect::<Vec<_>>())
    }))
}

/// The buffer's elements as `T`, writable, or an error naming `op` and the reason.
pub fn typed_mut<'a, T: Element>(
    op: &'static str,
    buf: &'a mut Buffer,
) -> crate::Result<&'a mut [T]> {
    if T::DTYPE != DType::Bool {
        if let Buffer::Bool(v) = buf {
            // Another dtype writes into a bool allocation (through a view(dtype) of it): the
            // bytes become a plain u8 allocation first, so no byte other than 0/1 is ever
            // held as a Rust bool; bool tensors over it read bytes (nonzero is true).
            let bytes: Vec<u8> = std::mem::take(v).into_iter().map(u8::from).collect();
            *buf = Buffer::U8(bytes);
        }
        if let Buffer::Foreign(f) = buf {
            // Likewise foreign bytes checked as bools stop being read as Rust bools.
            f.holds_bools = false;
        }
    }
    let reason = match &*buf {
        Buffer::Foreign(f) if !f.writable => Some(
            "the memory comes from a read-only buffer (a non-writable NumPy array or bytes)".into(),
        ),
        _ => None,
    };
    if let Some(reason) = reason {
        return Err(crate::Error::Unsupported { op, reason });
    }
    T::slice_mut(buf).ok_or(crate::Error::UnsupportedDType {
        op,
        dtype: T::DTYPE,
    })
}

/// Memory a tensor borrows from outside Rust (a NumPy array, a Python buffer, a DLPack
/// capsule): the owner keeps it alive and releases it when the last tensor drops it.
pub struct ForeignBytes {
    ptr: std::ptr::NonNull<u8>,
    len: usize,
    writable: bool,
    /// Every byte was 0 or 1 when checked, so the bytes may be read as bools.
    holds_bools: bool,
    /// Dropping it releases the memory.
    owner: Box<dyn std::any::Any + Send + Sync>,
}

// SAFETY: the memory is plain bytes; access goes through the storage's lock like owned
// buffers, and the owner is Send + Sync.
unsafe impl Send for ForeignBytes {}
unsafe impl Sync for ForeignBytes {}

impl ForeignBytes {
    /// Wraps `len` bytes at `ptr`, kept alive by `owner`.
    ///
    /// # Safety
    /// `ptr` must point to `len` bytes that stay valid (and, when `writable`, writable) as
    /// long as `owner` lives, and that nothing else frees. Writes from outside (the NumPy
    /// array that shares them) are the caller's business, as with upstream's `from_numpy`.
    pub unsafe fn new(
        ptr: *mut u8,
        len: usize,
        writable: bool,
        owner: Box<dyn std::any::Any + Send + Sync>,
    ) -> ForeignBytes {
        ForeignBytes {
            ptr: std::ptr::NonNull::new(ptr).unwrap_or(std::ptr::NonNull::dangling()),
            len,
            writable,
            holds_bools: false,
            owner,
        }
    }

    /// The same memory, readable as bools when every byte is 0 or 1 (a NumPy bool array);
    /// `None` otherwise. Bytes written later from outside must stay 0 or 1, as NumPy's own
    /// bool arrays keep them.
    pub fn with_bools(mut self) -> Option<ForeignBytes> {
        // SAFETY: ForeignBytes::new's contract.
        let bytes = unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) };
        if bytes.iter().all(|&b| b <= 1) {
            self.holds_bools = true;
            Some(self)
        } else {
            None
        }
    }
}

impl ForeignBytes {
    /// What keeps the memory alive, so that its maker can recognise its own (a shared-memory
    /// region it wants the file descriptor of, say).
    pub fn owner(&self) -> &(dyn std::any::Any + Send + Sync) {
        &*self.owner
    }

    /// The number of bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when it holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl std::fmt::Debug for ForeignBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ForeignBytes({} bytes at {:p})", self.len, self.ptr)
    }
}

/// Cast one element with PyTorch's rules: float sources go through their float value,
/// integer and bool sources through their integer value (so int64 -> f32 rounds once).
pub fn cast_element<S: Element, D: Element>(s: S) -> D {
    if S::DTYPE.is_complex() || D::DTYPE.is_complex() {
        D::from_complex(s.to_complex())
    } else if S::DTYPE.is_float() {
        D::from_f64(s.to_f64())
    } else {
        D::from_i64(s.to_i64())
    }
}

/// A contiguous array of elements: allocated by Rust with a type, or borrowed bytes.
///
/// The allocation's type need not be the tensor's: `view(dtype)` reads the same bytes as
/// another type, so element accessors ([`Element::slice`]) take the tensor's type and
/// reinterpret when it differs.
#[derive(Debug)]
pub enum Buffer {
    F32(Vec<f32>),
    F64(Vec<f64>),
    F16(Vec<f16>),
    BF16(Vec<bf16>),
    I64(Vec<i64>),
    I32(Vec<i32>),
    I16(Vec<i16>),
    I8(Vec<i8>),
    U8(Vec<u8>),
    Bool(Vec<bool>),
    C64(Vec<Cf32>),
    C128(Vec<Cf64>),
    U16(Vec<u16>),
    U32(Vec<u32>),
    U64(Vec<u64>),
    /// Memory owned outside Rust (`torch.from_numpy`, `torch.frombuffer`, DLPack).
    Foreign(ForeignBytes),
}

/// Calls `$body` with the type alias `$T` set to the element type of `$dtype`.
#[macro_export]
#[doc(hidden)]
macro_rules! with_dtype {
    ($dtype:expr, $T:ident => $body:expr) => {
        match $dtype {
            $crate::DType::F32 => {
                type $T = f32;
                $body
            }
            $crate::DType::F64 => {
                type $T = f64;
                $body
            }
            $crate::DType::F16 => {
                type $T = half::f16;
                $body
            }
            $crate::DType::BF16 => {
                type $T = half::bf16;
                $body
            }
            $crate::DType::I64 => {
                type $T = i64;
                $body
            }
            $crate::DType::I32 => {
                type $T = i32;
                $body
            }
            $crate::DType::I16 => {
                type $T = i16;
                $body
            }
            $crate::DType::I8 => {
                type $T = i8;
                $body
            }
            $crate::DType::U8 => {
                type $T = u8;
                $body
            }
            $crate::DType::Bool => {
                type $T = bool;
                $body
            }
            $crate::DType::C64 => {
                type $T = $crate::complex::Cf32;
                $body
            }
            $crate::DType::C128 => {
                type $T = $crate::complex::Cf64;
                $body
            }
            $crate::DType::U16 => {
                type $T = u16;
                $body
            }
            $crate::DType::U32 => {
                type $T = u32;
                $body
            }
            $crate::DType::U64 => {
                type $T = u64;
                $body
            }
        }
    };
}

impl Buffer {
    /// A zero-filled buffer of `len` elements.
    pub fn zeros(dtype: DType, len: usize) -> Buffer {
        with_dtype!(dtype, T => T::into_buffer(vec![T::default(); len]))
    }

    /// The element type the buffer was allocated with (`U8` for foreign bytes); a tensor's
    /// own dtype may differ (see the type's docs).
    pub fn dtype(&self) -> DType {
        match self {
            Buffer::F32(_) => DType::F32,
            Buffer::F64(_) => DType::F64,
            Buffer::F16(_) => DType::F16,
            Buffer::BF16(_) => DType::BF16,
            Buffer::I64(_) => DType::I64,
            Buffer::I32(_) => DType::I32,
            Buffer::I16(_) => DType::I16,
            Buffer::I8(_) => DType::I8,
            Buffer::U8(_) => DType::U8,
            Buffer::Bool(_) => DType::Bool,
            Buffer::C64(_) => DType::C64,
            Buffer::C128(_) => DType::C128,
            Buffer::U16(_) => DType::U16,
            Buffer::U32(_) => DType::U32,
            Buffer::U64(_) => DType::U64,
            Buffer::Foreign(_) => DType::U8,
        }
    }

    /// Size in bytes.
    pub fn byte_len(&self) -> usize {
        self.as_bytes().len()
    }

    /// Number of whole elements of `dtype` the bytes hold.
    pub fn len_as(&self, dtype: DType) -> usize {
        self.byte_len() / dtype.size_in_bytes()
    }

    /// True when the buffer holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.byte_len() == 0
    }

    /// The raw bytes (native byte order).
    pub fn as_bytes(&self) -> &[u8] {
        fn bytes<T>(v: &[T]) -> &[u8] {
            // SAFETY: any initialised memory may be read as bytes (bool and the number
            // types have no padding); the borrow of `v` bounds the lifetime.
            unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
        }
        match self {
            Buffer::F32(v) => bytes(v),
            Buffer::F64(v) => bytes(v),
            Buffer::F16(v) => bytes(v),
            Buffer::BF16(v) => bytes(v),
            Buffer::I64(v) => bytes(v),
            Buffer::I32(v) => bytes(v),
            Buffer::I16(v) => bytes(v),
            Buffer::I8(v) => bytes(v),
            Buffer::U8(v) => v,
            Buffer::Bool(v) => bytes(v),
            Buffer::C64(v) => bytes(v),
            Buffer::C128(v) => bytes(v),
            Buffer::U16(v) => bytes(v),
            Buffer::U32(v) => bytes(v),
            Buffer::U64(v) => bytes(v),
            // SAFETY: ForeignBytes::new's contract: `len` valid bytes while the owner lives.
            Buffer::Foreign(f) => unsafe { std::slice::from_raw_parts(f.ptr.as_ptr(), f.len) },
        }
    }

    /// The raw bytes, writable; `None` for a bool allocation (writing arbitrary bytes would
    /// make invalid bools) and for read-only foreign memory.
    pub fn as_bytes_mut(&mut self) -> Option<&mut [u8]> {
        fn bytes<T>(v: &mut [T]) -> &mut [u8] {
            // SAFETY: the number types are valid for every bit pattern; exclusive borrow.
            unsafe {
                std::slice::from_raw_parts_mut(
                    v.as_mut_ptr().cast::<u8>(),
                    std::mem::size_of_val(v),
                )
            }
        }
        Some(match self {
            Buffer::F32(v) => bytes(v),
            Buffer::F64(v) => bytes(v),
            Buffer::F16(v) => bytes(v),
            Buffer::BF16(v) => bytes(v),
            Buffer::I64(v) => bytes(v),
            Buffer::I32(v) => bytes(v),
            Buffer::I16(v) => bytes(v),
            Buffer::I8(v) => bytes(v),
            Buffer::U8(v) => v,
            Buffer::C64(v) => bytes(v),
            Buffer::C128(v) => bytes(v),
            Buffer::U16(v) => bytes(v),
            Buffer::U32(v) => bytes(v),
            Buffer::U64(v) => bytes(v),
            Buffer::Bool(_) => return None,
            Buffer::Foreign(f) if f.writable => {
                // SAFETY: ForeignBytes::new's contract, and `&mut self` is exclusive.
                unsafe { std::slice::from_raw_parts_mut(f.ptr.as_ptr(), f.len) }
            }
            Buffer::Foreign(_) => return None,
        })
    }

    /// True when the memory belongs to someone else (it cannot be resized).
    pub fn is_foreign(&self) -> bool {
        matches!(self, Buffer::Foreign(_))
    }

    /// Foreign memory that may be written.
    pub fn is_writable_foreign(&self) -> bool {
        matches!(self, Buffer::Foreign(f) if f.writable)
    }

    /// Builds a buffer of `dtype` from f64 values, casting each like `.to(dtype)`.
    pub fn from_f64s(dtype: DType, values: &[f64]) -> Buffer {
        with_dtype!(dtype, T => T::into_buffer(values.iter().map(|&v| T::from_f64(v)).collect()))
    }

    /// Builds a buffer of `dtype` from i64 values, casting each like `.to(dtype)`.
    pub fn from_i64s(dtype: DType, values: &[i64]) -> Buffer {
        with_dtype!(dtype, T => T::into_buffer(values.iter().map(|&v| T::from_i64(v)).collect()))
    }

    /// Builds a buffer of `dtype` from complex values, casting each like `.to(dtype)`.
    pub fn from_complex(dtype: DType, values: &[Cf64]) -> Buffer {
        with_dtype!(dtype, T => T::into_buffer(values.iter().map(|&v| T::from_complex(v)).collect()))
    }
}

/// Reference-counted, interior-mutable storage: every view of a tensor holds a clone of the
/// same `Arc`, so writes through one view are seen by all.
#[derive(Debug, Clone)]
pub struct Storage(Arc<RwLock<Buffer>>);

impl Storage {
    /// Wraps a buffer.
    pub fn new(buf: Buffer) -> Storage {
        Storage(Arc::new(RwLock::new(buf)))
    }

    /// Read access. A poisoned lock (a panic while writing elsewhere) still yields the data:
    /// buffers hold plain numbers, so there is no invariant to protect.
    pub fn read(&self) -> RwLockReadGuard<'_, Buffer> {
        self.0.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Write access (see [`Storage::read`] on poisoning).
    pub fn write(&self) -> RwLockWriteGuard<'_, Buffer> {
        self.0.write().unwrap_or_else(|e| e.into_inner())
    }

    /// True when both handles point to the same storage.
    pub fn same(&self, other: &Storage) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// A number identifying this storage while it lives (every handle gives the same one),
    /// whatever memory its buffer is swapped to.
    pub fn id(&self) -> usize {
        Arc::as_ptr(&self.0) as usize
    }

    /// Grows the buffer to at least `bytes` bytes in place (upstream's `resize_` past the end):
    /// every handle and view sees the new buffer; the old bytes are kept and the new ones are
    /// zero. Memory owned elsewhere (mapped files, shared regions, numpy's) cannot move.
    pub fn grow_to_bytes(&self, bytes: usize) -> crate::Result<()> {
        let mut buf = self.write();
        if buf.byte_len() >= bytes {
            return Ok(());
        }
        if buf.is_foreign() {
            return Err(crate::Error::Unsupported {
                op: "resize_",
                reason: "Trying to resize storage that is not resizable (its memory is owned outside torchnative)"
                    .into(),
            });
        }
        let elem = buf.dtype().size_in_bytes();
        let mut grown = Buffer::zeros(buf.dtype(), bytes.div_ceil(elem));
        let old = buf.as_bytes();
        grown
            .as_bytes_mut()
            .expect("a buffer torchnative allocated is writable")[..old.len()]
            .copy_from_slice(old);
        *buf = grown;
        Ok(())
    }

    /// A handle that does not keep the storage alive.
    pub fn downgrade(&self) -> WeakStorage {
        WeakStorage(Arc::downgrade(&self.0))
    }
}

/// A [`Storage`] handle that does not keep it alive (upstream's weak storage references).
#[derive(Debug, Clone)]
pub struct WeakStorage(std::sync::Weak<RwLock<Buffer>>);

impl WeakStorage {
    /// The storage, if some strong handle still holds it.
    pub fn upgrade(&self) -> Option<Storage> {
        self.0.upgrade().map(Storage)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn growing_a_storage_keeps_its_bytes_and_every_handle_sees_the_new_buffer() {
        let storage = Storage::new(Buffer::from_i64s(DType::I32, &[7, -3]));
        let other_handle = storage.clone();
        storage.grow_to_bytes(14).unwrap(); // 3.5 elements: rounded up to whole ones
        let grown = other_handle.read();
        assert_eq!(grown.byte_len(), 16);
        assert_eq!(typed::<i32>("test", &grown).unwrap(), &[7, -3, 0, 0]);
        drop(grown);
        storage.grow_to_bytes(4).unwrap(); // never shrinks
        assert_eq!(storage.read().byte_len(), 16);
        assert_eq!(storage.id(), other_handle.id());
    }

    #[test]
    fn float_to_int_matches_pytorch_x86() {
        // Values observed from torch 2.15 on x86-64.
        assert_eq!(u8::from_f64(300.0), 44);
        assert_eq!(u8::from_f64(-1.0), 255);
        assert_eq!(i8::from_f64(-129.7), 127);
        assert_eq!(i32::from_f64(1e10), i32::MIN);
        assert_eq!(i64::from_f64(f64::NAN), i64::MIN);
        assert_eq!(i64::from_f64(-2.9), -2);
        assert!(bool::from_f64(f64::NAN));
    }

    #[test]
    fn int64_to_f32_rounds_once() {
        let v: i64 = (1 << 40) + (1 << 16) + 1; // just above a tie at f32 precision
        let direct: f32 = cast_element(v);
        assert_eq!(direct, v as f32);
    }

    #[test]
    fn half_round_to_nearest_even() {
        // 1 + 2^-11 is exactly half-way between two f16 values: ties to even (1.0).
        assert_eq!(f16::from_f64(1.0 + 2f64.powi(-11)).to_f64(), 1.0);
        assert_eq!(f16::from_f64(65520.0).to_f64(), f64::INFINITY);
    }
}
