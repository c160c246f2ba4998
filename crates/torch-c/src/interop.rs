//! Memory shared with other Python libraries: `torch.from_numpy`, `torch.frombuffer` (the
//! buffer protocol) and DLPack (`torch.from_dlpack`, `Tensor.__dlpack__`).
//!
//! Imported memory becomes a [`ForeignBytes`] storage whose owner keeps the exporter alive
//! (the array, the `Py_buffer`, the DLPack deleter); exported memory is the tensor's own
//! storage, kept alive by the capsule. Nothing is copied either way.

use crate::error::core_err;
use crate::tensor::{wrap, TensorBase};
use pyo3::exceptions::{
    PyBufferError, PyNotImplementedError, PyRuntimeError, PyTypeError, PyUserWarning, PyValueError,
};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use std::ffi::{c_void, CStr};
use torchnative_core::storage::{Buffer, ForeignBytes, Storage};
use torchnative_core::{DType, Device, Tensor};

/// Bytes spanned by a strided array (first to last element inclusive); all strides >= 0.
fn extent_bytes(shape: &[usize], byte_strides: &[usize], item: usize) -> usize {
    if shape.contains(&0) {
        return 0;
    }
    item + shape
        .iter()
        .zip(byte_strides)
        .map(|(&n, &s)| (n - 1) * s)
        .sum::<usize>()
}

/// A tensor of `dtype` over foreign memory at `ptr` (the first element).
fn tensor_over(
    bytes: ForeignBytes,
    dtype: DType,
    shape: &[usize],
    elem_strides: &[usize],
) -> PyResult<Tensor> {
    let bytes = if dtype == DType::Bool {
        bytes
            .with_bools()
            .ok_or_else(|| PyValueError::new_err("a bool array holds bytes other than 0 and 1"))?
    } else {
        bytes
    };
    let storage = Storage::new(Buffer::Foreign(bytes));
    Tensor::over_storage(storage, dtype, shape, elem_strides, 0).map_err(core_err)
}

fn warn(py: Python<'_>, message: &str) -> PyResult<()> {
    let category = py.get_type::<PyUserWarning>();
    PyErr::warn(
        py,
        &category,
        &std::ffi::CString::new(message).expect("no NUL in message"),
        1,
    )
}

/// NumPy's `typestr` (`<f4`, `|b1`, ...) as a torchnative dtype.
fn dtype_of_typestr(typestr: &str) -> PyResult<DType> {
    let native = if cfg!(target_endian = "little") {
        '<'
    } else {
        '>'
    };
    let mut chars = typestr.chars();
    let order = chars.next().unwrap_or('|');
    let kind: String = chars.collect();
    if order != native && order != '|' && order != '=' {
        return Err(PyValueError::new_err(
            "given numpy array has byte order different from the native byte order. \
             Conversion between byte orders is currently not supported.",
        ));
    }
    Ok(match kind.as_str() {
        "f8" => DType::F64,
        "f4" => DType::F32,
        "f2" => DType::F16,
        "i8" => DType::I64,
        "i4" => DType::I32,
        "i2" => DType::I16,
        "i1" => DType::I8,
        "u1" => DType::U8,
        "b1" => DType::Bool,
        "c8" => DType::C64,
        "c16" => DType::C128,
        "u2" => DType::U16,
        "u4" => DType::U32,
        "u8" => DType::U64,
        _ => {
            return Err(PyTypeError::new_err(format!(
                "can't convert np.ndarray of type {typestr}. The only supported types are: \
                 float64, float32, float16, int64, int32, int16, int8, uint8, and bool."
            )))
        }
    })
}

/// `torch.from_numpy(ndarray)`: a tensor sharing the array's memory.
#[pyfunction]
pub fn _tn_from_numpy(py: Python<'_>, array: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
    let numpy = py.import("numpy").map_err(|_| {
        PyRuntimeError::new_err("torch.from_numpy needs NumPy, which is not installed")
    })?;
    if !array.is_instance(&numpy.getattr("ndarray")?)? {
        return Err(PyTypeError::new_err(format!(
            "expected np.ndarray (got {})",
            array.get_type().name()?
        )));
    }
    let interface = array.getattr("__array_interface__")?;
    let interface = interface.cast::<PyDict>()?;
    let get = |k: &str| -> PyResult<Bound<'_, PyAny>> {
        interface
            .get_item(k)?
            .ok_or_else(|| PyRuntimeError::new_err(format!("__array_interface__ lacks {k}")))
    };
    let typestr: String = get("typestr")?.extract()?;
    let dtype = dtype_of_typestr(&typestr)?;
    let item = dtype.size_in_bytes();
    let shape: Vec<usize> = get("shape")?.extract()?;
    let (address, readonly): (usize, bool) = get("data")?.extract()?;
    // The array's own strides (the interface reports None for C order, but NumPy keeps
    // other strides for empty arrays, and upstream takes them).
    let signed: Vec<isize> = array.getattr("strides")?.extract()?;
    if signed.iter().any(|&s| s < 0) {
        return Err(PyValueError::new_err(
            "At least one stride in the given numpy array is negative, and tensors with \
             negative strides are not currently supported. (You can probably work around \
             this by making a copy of your array  with array.copy().) ",
        ));
    }
    let byte_strides: Vec<usize> = signed.iter().map(|&s| s as usize).collect();
    if byte_strides.iter().any(|s| s % item != 0) {
        return Err(PyValueError::new_err(
            "given numpy array strides not a multiple of the element byte size. Copy the numpy \
             array to reallocate the memory.",
        ));
    }
    if readonly {
        warn(
            py,
            "The given NumPy array is not writable; torchnative refuses writes to the tensor \
             made from it (upstream PyTorch lets them through as undefined behavior). Copy \
             the array, or make it writable, to write to the tensor.",
        )?;
    }
    let len = extent_bytes(&shape, &byte_strides, item);
    let owner: Py<PyAny> = array.clone().unbind();
    // SAFETY: the array keeps `len` bytes at `address` alive while `owner` holds it.
    let bytes = unsafe { ForeignBytes::new(address as *mut u8, len, !readonly, Box::new(owner)) };
    let elem_strides: Vec<usize> = byte_strides.iter().map(|s| s / item).collect();
    wrap(py, tensor_over(bytes, dtype, &shape, &elem_strides)?)
}

/// A `Py_buffer` released when the last tensor over its memory goes away.
struct HeldBuffer(Box<ffi::Py_buffer>);

// SAFETY: the buffer's memory is plain bytes guarded by the storage's lock; release takes
// the GIL.
unsafe impl Send for HeldBuffer {}
unsafe impl Sync for HeldBuffer {}

impl Drop for HeldBuffer {
    fn drop(&mut self) {
        Python::attach(|_| {
            // SAFETY: acquired by PyObject_GetBuffer and released exactly once, here.
            unsafe { ffi::PyBuffer_Release(&mut *self.0) }
        });
    }
}

/// `torch.frombuffer(buffer, *, dtype, count=-1, offset=0, requires_grad=False)`: a 1-D
/// tensor over an object's buffer-protocol memory.
#[pyfunction]
#[pyo3(signature = (buffer, *, dtype, count=-1, offset=0, requires_grad=false))]
pub fn _tn_frombuffer(
    py: Python<'_>,
    buffer: &Bound<'_, PyAny>,
    dtype: &Bound<'_, PyAny>,
    count: i64,
    offset: i64,
    requires_grad: bool,
) -> PyResult<Py<PyAny>> {
    let dtype = crate::dtype::dtype_from_py(dtype)?;
    let mut view: Box<ffi::Py_buffer> = Box::new(unsafe { std::mem::zeroed() });
    let mut writable = true;
    // SAFETY: `view` is a zeroed Py_buffer the call fills; the GIL is held.
    if unsafe { ffi::PyObject_GetBuffer(buffer.as_ptr(), &mut *view, ffi::PyBUF_WRITABLE) } != 0 {
        let _ = PyErr::take(py);
        writable = false;
        // SAFETY: as above, read-only request.
        if unsafe { ffi::PyObject_GetBuffer(buffer.as_ptr(), &mut *view, ffi::PyBUF_SIMPLE) } != 0 {
            let _ = PyErr::take(py);
            return Err(PyValueError::new_err(format!(
                "object does not implement Python buffer protocol (got {})",
                buffer.get_type().name()?
            )));
        }
    }
    let held = HeldBuffer(view);
    let total = held.0.len as i64;
    let item = dtype.size_in_bytes() as i64;
    if total == 0 || count == 0 {
        return Err(PyValueError::new_err(format!(
            "both buffer length ({total}) and count ({count}) must not be 0"
        )));
    }
    if offset < 0 || offset >= total {
        return Err(PyValueError::new_err(format!(
            "offset ({offset} bytes) must be non-negative and no greater than buffer length \
             ({total} bytes) minus 1"
        )));
    }
    let count = if count < 0 {
        if (total - offset) % item != 0 {
            return Err(PyValueError::new_err(format!(
                "buffer length ({} bytes) after offset ({offset} bytes) must be a multiple of \
                 element size ({item})",
                total - offset
            )));
        }
        (total - offset) / item
    } else {
        if offset + count * item > total {
            return Err(PyValueError::new_err(format!(
                "requested buffer length ({count} * {item} bytes) after offset ({offset} bytes) \
                 must not be greater than actual buffer length ({total} bytes)"
            )));
        }
        count
    };
    if !writable {
        warn(
            py,
            "The given buffer is not writable; torchnative refuses writes to the tensor made \
             from it (upstream PyTorch lets them through as undefined behavior). Copy the \
             buffer, or pass a writable one, to write to the tensor.",
        )?;
    }
    let start = held.0.buf as *mut u8;
    let len = (count * item) as usize;
    // SAFETY: [offset, offset + len) lies inside the buffer, which `held` keeps alive.
    let bytes =
        unsafe { ForeignBytes::new(start.add(offset as usize), len, writable, Box::new(held)) };
    let t = tensor_over(bytes, dtype, &[count as usize], &[1])?;
    let obj = wrap(py, t)?;
    obj.bind(py)
        .cast::<TensorBase>()?
        .borrow_mut()
        .requires_grad = requires_grad;
    Ok(obj)
}

// ----- DLPack (dlpack.h v1.x, the ABI every exporter and importer shares) -----

#[repr(C)]
#[derive(Clone, Copy)]
struct DLDevice {
    device_type: i32,
    device_id: i32,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct DLDataType {
    code: u8,
    bits: u8,
    lanes: u16,
}

#[repr(C)]
struct DLTensor {
    data: *mut c_void,
    device: DLDevice,
    ndim: i32,
    dtype: DLDataType,
    shape: *mut i64,
    strides: *mut i64,
    byte_offset: u64,
}

#[repr(C)]
struct DLManagedTensor {
    dl_tensor: DLTensor,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DLManagedTensor)>,
}

#[repr(C)]
struct DLPackVersion {
    major: u32,
    minor: u32,
}

#[repr(C)]
struct DLManagedTensorVersioned {
    version: DLPackVersion,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DLManagedTensorVersioned)>,
    flags: u64,
    dl_tensor: DLTensor,
}

const DL_CPU: i32 = 1;
const DL_FLAG_READ_ONLY: u64 = 1;
const DL_INT: u8 = 0;
const DL_UINT: u8 = 1;
const DL_FLOAT: u8 = 2;
const DL_BFLOAT: u8 = 4;
const DL_BOOL: u8 = 6;
const DL_COMPLEX: u8 = 5;

const NAME: &CStr = c"dltensor";
const USED_NAME: &CStr = c"used_dltensor";
const NAME_VERSIONED: &CStr = c"dltensor_versioned";
const USED_NAME_VERSIONED: &CStr = c"used_dltensor_versioned";

fn dl_dtype(d: DType) -> DLDataType {
    let (code, bits) = match d {
        DType::F64 => (DL_FLOAT, 64),
        DType::F32 => (DL_FLOAT, 32),
        DType::F16 => (DL_FLOAT, 16),
        DType::BF16 => (DL_BFLOAT, 16),
        DType::I64 => (DL_INT, 64),
        DType::I32 => (DL_INT, 32),
        DType::I16 => (DL_INT, 16),
        DType::I8 => (DL_INT, 8),
        DType::U8 => (DL_UINT, 8),
        DType::Bool => (DL_BOOL, 8),
        DType::C64 => (DL_COMPLEX, 64),
        DType::C128 => (DL_COMPLEX, 128),
        DType::U16 => (DL_UINT, 16),
        DType::U32 => (DL_UINT, 32),
        DType::U64 => (DL_UINT, 64),
    };
    DLDataType {
        code,
        bits,
        lanes: 1,
    }
}

fn dtype_of_dl(t: DLDataType) -> PyResult<DType> {
    if t.lanes != 1 {
        return Err(PyBufferError::new_err(format!(
            "DLPack tensors with {} lanes are not supported",
            t.lanes
        )));
    }
    Ok(match (t.code, t.bits) {
        (DL_FLOAT, 64) => DType::F64,
        (DL_FLOAT, 32) => DType::F32,
        (DL_FLOAT, 16) => DType::F16,
        (DL_BFLOAT, 16) => DType::BF16,
        (DL_INT, 64) => DType::I64,
        (DL_INT, 32) => DType::I32,
        (DL_INT, 16) => DType::I16,
        (DL_INT, 8) => DType::I8,
        (DL_UINT, 8) => DType::U8,
        (DL_BOOL, 8) => DType::Bool,
        (DL_COMPLEX, 64) => DType::C64,
        (DL_COMPLEX, 128) => DType::C128,
        (DL_UINT, 16) => DType::U16,
        (DL_UINT, 32) => DType::U32,
        (DL_UINT, 64) => DType::U64,
        (code, bits) => {
            return Err(PyNotImplementedError::new_err(format!(
                "DLPack dtype (code {code}, {bits} bits) is not supported by torchnative"
            )))
        }
    })
}

/// Marks capsules made by this module (`manager_ctx`): a static's address is unique.
static EXPORT_MARK: u8 = 0;

fn ours() -> *mut c_void {
    std::ptr::addr_of!(EXPORT_MARK) as *mut c_void
}

/// What an exported capsule owns: the tensor (its storage stays alive) and the shape and
/// strides arrays the DLTensor points into.
struct Export {
    tensor: Tensor,
    shape: Vec<i64>,
    strides: Vec<i64>,
}

#[repr(C)]
struct ExportUnversioned {
    managed: DLManagedTensor,
    export: Export,
}

#[repr(C)]
struct ExportVersioned {
    managed: DLManagedTensorVersioned,
    export: Export,
}

unsafe extern "C" fn delete_unversioned(m: *mut DLManagedTensor) {
    // SAFETY: `m` is the first field of a Box<ExportUnversioned> leaked by `export`.
    drop(unsafe { Box::from_raw(m.cast::<ExportUnversioned>()) });
}

unsafe extern "C" fn delete_versioned(m: *mut DLManagedTensorVersioned) {
    // SAFETY: `m` is the first field of a Box<ExportVersioned> leaked by `export`.
    drop(unsafe { Box::from_raw(m.cast::<ExportVersioned>()) });
}

/// Capsule destructor: a capsule nobody consumed still owns its tensor.
unsafe extern "C" fn capsule_destructor(capsule: *mut ffi::PyObject) {
    // SAFETY: called by Python with the capsule; names are checked before use.
    unsafe {
        if ffi::PyCapsule_IsValid(capsule, NAME.as_ptr()) == 1 {
            let m = ffi::PyCapsule_GetPointer(capsule, NAME.as_ptr()).cast::<DLManagedTensor>();
            if let Some(d) = (*m).deleter {
                d(m);
            }
        } else if ffi::PyCapsule_IsValid(capsule, NAME_VERSIONED.as_ptr()) == 1 {
            let m = ffi::PyCapsule_GetPointer(capsule, NAME_VERSIONED.as_ptr())
                .cast::<DLManagedTensorVersioned>();
            if let Some(d) = (*m).deleter {
                d(m);
            }
        }
    }
}

fn dl_tensor(export: &mut Export) -> PyResult<DLTensor> {
    let t = &export.tensor;
    let data = crate::memory::data_ptr(t)? as *mut c_void;
    Ok(DLTensor {
        data,
        device: DLDevice {
            device_type: DL_CPU,
            device_id: 0,
        },
        ndim: t.dim() as i32,
        dtype: dl_dtype(t.dtype()),
        shape: export.shape.as_mut_ptr(),
        strides: export.strides.as_mut_ptr(),
        byte_offset: 0,
    })
}

fn check_exportable(
    py: Python<'_>,
    t: &Bound<'_, PyAny>,
    dl_device: Option<&Bound<'_, PyAny>>,
) -> PyResult<Tensor> {
    let base = t.cast::<TensorBase>()?;
    let inner = base.borrow().inner.clone();
    if inner.device() != Device::Cpu {
        return Err(PyBufferError::new_err(
            "DLPack export of meta tensors is not possible: they hold no memory",
        ));
    }
    if let Some(d) = dl_device.filter(|d| !d.is_none()) {
        let (kind, _id): (i32, i32) = d.extract()?;
        if kind != DL_CPU {
            return Err(PyBufferError::new_err(format!(
                "DLPack export to device type {kind}: torchnative tensors live on the CPU \
                 (device type {DL_CPU})"
            )));
        }
    }
    let _ = py;
    Ok(inner)
}

fn export_parts(t: Tensor) -> Export {
    Export {
        shape: t.shape().iter().map(|&s| s as i64).collect(),
        strides: t.strides().iter().map(|&s| s as i64).collect(),
        tensor: t,
    }
}

/// A capsule named `name` owning `boxed` (an exported DLPack tensor, its managed struct first):
/// the capsule's destructor deletes it unless a consumer renamed the capsule and took it.
fn into_capsule<T>(py: Python<'_>, boxed: Box<T>, name: &'static CStr) -> PyResult<Py<PyAny>> {
    let ptr = Box::into_raw(boxed);
    // SAFETY: `ptr` is valid until the deleter runs; the destructor handles an unconsumed one.
    let capsule = unsafe {
        ffi::PyCapsule_New(
            ptr.cast::<c_void>(),
            name.as_ptr(),
            Some(capsule_destructor),
        )
    };
    if capsule.is_null() {
        // SAFETY: the capsule was not made, so the box is still ours.
        drop(unsafe { Box::from_raw(ptr) });
        return Err(PyErr::fetch(py));
    }
    // SAFETY: a new reference returned by PyCapsule_New.
    Ok(unsafe { Bound::from_owned_ptr(py, capsule) }.unbind())
}

/// `torch._C._to_dlpack(tensor, dl_device=None, copy=None)`: an unversioned "dltensor" capsule.
#[pyfunction]
#[pyo3(signature = (tensor, dl_device=None, copy=None))]
pub fn _to_dlpack(
    py: Python<'_>,
    tensor: &Bound<'_, PyAny>,
    dl_device: Option<&Bound<'_, PyAny>>,
    copy: Option<bool>,
) -> PyResult<Py<PyAny>> {
    let mut t = check_exportable(py, tensor, dl_device)?;
    if copy == Some(true) {
        t = t.deep_clone().map_err(core_err)?;
    }
    let mut export = export_parts(t);
    let dl = dl_tensor(&mut export)?;
    let boxed = Box::new(ExportUnversioned {
        managed: DLManagedTensor {
            dl_tensor: dl,
            manager_ctx: ours(),
            deleter: Some(delete_unversioned),
        },
        export,
    });
    into_capsule(py, boxed, NAME)
}

/// `torch._C._to_dlpack_versioned(tensor, dl_device=None, copy=None, read_only=False)`:
/// a DLPack 1.x "dltensor_versioned" capsule.
#[pyfunction]
#[pyo3(signature = (tensor, dl_device=None, copy=None, read_only=false))]
pub fn _to_dlpack_versioned(
    py: Python<'_>,
    tensor: &Bound<'_, PyAny>,
    dl_device: Option<&Bound<'_, PyAny>>,
    copy: Option<bool>,
    read_only: bool,
) -> PyResult<Py<PyAny>> {
    let mut t = check_exportable(py, tensor, dl_device)?;
    if copy == Some(true) {
        t = t.deep_clone().map_err(core_err)?;
    }
    let mut export = export_parts(t);
    let dl = dl_tensor(&mut export)?;
    let boxed = Box::new(ExportVersioned {
        managed: DLManagedTensorVersioned {
            version: DLPackVersion { major: 1, minor: 1 },
            manager_ctx: ours(),
            deleter: Some(delete_versioned),
            flags: if read_only { DL_FLAG_READ_ONLY } else { 0 }
                | if copy == Some(true) { 2 } else { 0 },
            dl_tensor: dl,
        },
        export,
    });
    into_capsule(py, boxed, NAME_VERSIONED)
}

/// A consumed DLPack tensor: its deleter runs when the last torchnative tensor drops it.
enum Consumed {
    Unversioned(*mut DLManagedTensor),
    Versioned(*mut DLManagedTensorVersioned),
}

// SAFETY: DLPack deleters may be called from any thread (the standard requires it).
unsafe impl Send for Consumed {}
unsafe impl Sync for Consumed {}

impl Drop for Consumed {
    fn drop(&mut self) {
        // Deleters of Python exporters (NumPy) take the GIL themselves; holding it here
        // keeps those that do not safe too.
        Python::attach(|_| unsafe {
            // SAFETY: consumed once (the capsule was renamed), deleted once, here.
            match *self {
                Consumed::Unversioned(m) => {
                    if let Some(d) = (*m).deleter {
                        d(m)
                    }
                }
                Consumed::Versioned(m) => {
                    if let Some(d) = (*m).deleter {
                        d(m)
                    }
                }
            }
        });
    }
}

/// Our own exported tensor, when the capsule came from `_to_dlpack*`: the importer gets a
/// tensor over the same storage instead of a second storage aliasing it.
fn own_export(dl: &DLTensor, owner: &Consumed) -> Option<Tensor> {
    // SAFETY: pointers come from a capsule we renamed (consumed); read-only inspection.
    unsafe {
        match *owner {
            Consumed::Unversioned(m) if (*m).manager_ctx == ours() => {
                Some((*m.cast::<ExportUnversioned>()).export.tensor.clone())
            }
            Consumed::Versioned(m) if (*m).manager_ctx == ours() => {
                Some((*m.cast::<ExportVersioned>()).export.tensor.clone())
            }
            _ => {
                let _ = dl;
                None
            }
        }
    }
}

/// `torch._C._from_dlpack(capsule)`: a tensor over a DLPack capsule's memory.
#[pyfunction]
pub fn _from_dlpack(py: Python<'_>, capsule: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
    let cap = capsule.as_ptr();
    // SAFETY: PyCapsule_IsValid accepts any object; pointers are used only when valid.
    let (owner, dl, read_only) = unsafe {
        if ffi::PyCapsule_IsValid(cap, NAME_VERSIONED.as_ptr()) == 1 {
            let m = ffi::PyCapsule_GetPointer(cap, NAME_VERSIONED.as_ptr())
                .cast::<DLManagedTensorVersioned>();
            if (*m).version.major > 1 {
                return Err(PyBufferError::new_err(format!(
                    "DLPack version {}.{} is newer than the 1.x torchnative reads",
                    (*m).version.major,
                    (*m).version.minor
                )));
            }
            ffi::PyCapsule_SetName(cap, USED_NAME_VERSIONED.as_ptr());
            let ro = (*m).flags & DL_FLAG_READ_ONLY != 0;
            (
                Consumed::Versioned(m),
                &(*m).dl_tensor as *const DLTensor,
                ro,
            )
        } else if ffi::PyCapsule_IsValid(cap, NAME.as_ptr()) == 1 {
            let m = ffi::PyCapsule_GetPointer(cap, NAME.as_ptr()).cast::<DLManagedTensor>();
            ffi::PyCapsule_SetName(cap, USED_NAME.as_ptr());
            (
                Consumed::Unversioned(m),
                &(*m).dl_tensor as *const DLTensor,
                false,
            )
        } else {
            return Err(PyRuntimeError::new_err(
                "from_dlpack received an invalid capsule. Note that DLTensor capsules can be \
                 consumed only once, so you might have already constructed a tensor from it \
                 once.",
            ));
        }
    };
    // SAFETY: valid while `owner` lives (the deleter has not run).
    let dl = unsafe { &*dl };
    if let Some(t) = own_export(dl, &owner) {
        drop(owner);
        return wrap(py, t);
    }
    if dl.device.device_type != DL_CPU {
        return Err(PyBufferError::new_err(format!(
            "DLPack device type {} is not the CPU: torchnative tensors live on the CPU",
            dl.device.device_type
        )));
    }
    let dtype = dtype_of_dl(dl.dtype)?;
    let ndim = usize::try_from(dl.ndim)
        .map_err(|_| PyBufferError::new_err("DLPack tensor with a negative ndim"))?;
    // SAFETY: `shape` (and `strides` when non-null) hold `ndim` entries per the standard.
    let shape_i: &[i64] = if ndim == 0 {
        &[]
    } else {
        unsafe { std::slice::from_raw_parts(dl.shape, ndim) }
    };
    let shape: Vec<usize> = shape_i
        .iter()
        .map(|&s| usize::try_from(s))
        .collect::<Result<_, _>>()
        .map_err(|_| PyBufferError::new_err("DLPack tensor with a negative size"))?;
    let strides: Vec<usize> = if dl.strides.is_null() || ndim == 0 {
        torchnative_core::layout::contiguous_strides(&shape)
    } else {
        // SAFETY: as above.
        unsafe { std::slice::from_raw_parts(dl.strides, ndim) }
            .iter()
            .map(|&s| usize::try_from(s))
            .collect::<Result<_, _>>()
            .map_err(|_| {
                PyBufferError::new_err(
                    "DLPack tensor with a negative stride: torchnative tensors have none",
                )
            })?
    };
    let item = dtype.size_in_bytes();
    let byte_strides: Vec<usize> = strides.iter().map(|s| s * item).collect();
    let len = extent_bytes(&shape, &byte_strides, item);
    // SAFETY: data + byte_offset is the first element; the exporter keeps `len` bytes
    // valid until its deleter runs, which `owner` defers to the last tensor.
    let start = unsafe { (dl.data as *mut u8).add(dl.byte_offset as usize) };
    let bytes = unsafe { ForeignBytes::new(start, len, !read_only, Box::new(owner)) };
    wrap(py, tensor_over(bytes, dtype, &shape, &strides)?)
}

/// `torch._C._torchDeviceToDLDevice(device)`: (device type, index) as DLPack numbers them.
#[pyfunction]
pub fn _torchDeviceToDLDevice(device: &Bound<'_, PyAny>) -> PyResult<Py<PyTuple>> {
    let py = device.py();
    let d = crate::device_of(device)?;
    match d {
        Device::Cpu => Ok(PyTuple::new(py, [DL_CPU, 0])?.unbind()),
        Device::Meta => Err(PyBufferError::new_err(
            "meta tensors have no DLPack device: they hold no memory",
        )),
    }
}
