//! `torch._C.StorageBase`, the base of upstream's `torch.UntypedStorage`: what `torch.save` /
//! `torch.load` and `Tensor.set_` move tensors' memory through.
//!
//! A storage is either a tensor's own buffer (so `x.untyped_storage()` shares memory with `x`
//! and two tensors of one buffer give storages with the same `_cdata`) or bytes read from a
//! file. `Tensor.set_(storage, offset, size, stride)` turns bytes into a typed buffer of the
//! tensor's dtype once; tensors set from the same storage afterwards share that buffer.
//! `UntypedStorage.from_file` maps a file (safetensors loads through it), and slicing a storage
//! gives a storage over part of the same memory.

use crate::error::core_err;
use crate::tensor::TensorBase;
use pyo3::exceptions::{PyRuntimeError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};
use std::sync::Mutex;
use torchnative_core::storage::{Buffer, Storage, WeakStorage};
use torchnative_core::{DType, Device, Tensor};

enum Data {
    /// A flat view over a typed buffer (all of it, or a byte window of a sliced storage).
    Typed(Tensor),
    /// Raw little-endian bytes (a new or loaded storage).
    Bytes(Vec<u8>),
}

#[pyclass(subclass, module = "torch._C", name = "StorageBase")]
pub struct StorageBase {
    data: Mutex<Data>,
    /// The `_cdata` this object reported before its bytes became a typed buffer (set only when
    /// that happens under `_share_fd_cpu_`, whose caller checks that `_cdata` did not change).
    pinned_cdata: std::sync::atomic::AtomicUsize,
}

/// Weak references handed out by `_weak_ref`, by storage id, with how many are out.
static WEAK_REFS: Mutex<Option<std::collections::HashMap<usize, (WeakStorage, usize)>>> =
    Mutex::new(None);

fn weak_refs(
) -> std::sync::MutexGuard<'static, Option<std::collections::HashMap<usize, (WeakStorage, usize)>>>
{
    WEAK_REFS.lock().unwrap_or_else(|e| e.into_inner())
}

/// The storage's bytes (the machine is little-endian, as upstream's file format).
fn buffer_bytes(buf: &Buffer) -> Vec<u8> {
    buf.as_bytes().to_vec()
}

/// A flat typed tensor read from little-endian bytes (a trailing partial element is an error).
fn typed_from_bytes(bytes: &[u8], dtype: DType) -> PyResult<Tensor> {
    let size = dtype.size_in_bytes();
    if bytes.len() % size != 0 {
        return Err(PyRuntimeError::new_err(format!(
            "a storage of {} bytes does not hold whole elements of {} ({size} bytes each)",
            bytes.len(),
            dtype.name()
        )));
    }
    fn chunks<T: torchnative_core::Element, const N: usize>(
        bytes: &[u8],
        f: impl Fn([u8; N]) -> T,
    ) -> torchnative_core::Result<Tensor> {
        let v: Vec<T> = bytes
            .chunks_exact(N)
            .map(|c| f(c.try_into().expect("chunks_exact yields N bytes")))
            .collect();
        let n = v.len();
        Tensor::from_vec(v, &[n])
    }
    let t = match dtype {
        DType::F32 => chunks(bytes, f32::from_le_bytes),
        DType::F64 => chunks(bytes, f64::from_le_bytes),
        DType::F16 => chunks(bytes, |b| half::f16::from_bits(u16::from_le_bytes(b))),
        DType::BF16 => chunks(bytes, |b| half::bf16::from_bits(u16::from_le_bytes(b))),
        DType::I64 => chunks(bytes, i64::from_le_bytes),
        DType::I32 => chunks(bytes, i32::from_le_bytes),
        DType::I16 => chunks(bytes, i16::from_le_bytes),
        DType::I8 => chunks(bytes, i8::from_le_bytes),
        DType::U8 => chunks(bytes, |b: [u8; 1]| b[0]),
        DType::Bool => chunks(bytes, |b: [u8; 1]| b[0] != 0),
        DType::U16 => chunks(bytes, u16::from_le_bytes),
        DType::U32 => chunks(bytes, u32::from_le_bytes),
        DType::U64 => chunks(bytes, u64::from_le_bytes),
        DType::C64 => chunks(bytes, |b: [u8; 8]| {
            let part = |i: usize| f32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
            torchnative_core::Cf32::new(part(0), part(4))
        }),
        DType::C128 => chunks(bytes, |b: [u8; 16]| {
            let part =
                |i: usize| f64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes of 16"));
            torchnative_core::Cf64::new(part(0), part(8))
        }),
    };
    t.map_err(core_err)
}

/// The whole buffer under `t`, as a flat view.
fn whole_buffer(t: &Tensor) -> PyResult<Tensor> {
    let len = t
        .storage()
        .ok_or_else(|| PyRuntimeError::new_err("meta tensors have no storage"))?
        .read()
        .len_as(t.dtype());
    t.as_strided(&[len], &[1], 0).map_err(core_err)
}

impl StorageBase {
    fn with_data(data: Data) -> StorageBase {
        StorageBase {
            data: Mutex::new(data),
            pinned_cdata: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// A new Python storage object of class `cls` over the whole of `storage`.
    fn over<'py>(
        cls: &Bound<'py, pyo3::types::PyType>,
        storage: Storage,
    ) -> PyResult<Bound<'py, PyAny>> {
        let len = storage.read().byte_len();
        let flat = Tensor::over_storage(storage, DType::U8, &[len], &[1], 0).map_err(core_err)?;
        let obj = cls.call0()?;
        *obj.cast::<StorageBase>()?.borrow().lock() = Data::Typed(flat);
        Ok(obj)
    }

    /// A new Python storage object of class `cls` over a shared-memory region.
    fn over_region<'py>(
        cls: &Bound<'py, pyo3::types::PyType>,
        region: crate::shared_memory::SharedRegion,
    ) -> PyResult<Bound<'py, PyAny>> {
        let buf = region
            .into_buffer(false)
            .expect("no bool check was asked for");
        StorageBase::over(cls, Storage::new(buf))
    }

    /// The whole core storage behind this object (bytes read from a file become one first).
    fn core_storage(&self) -> PyResult<Storage> {
        let flat = self.typed(DType::U8)?;
        let storage = flat.storage().expect("typed storages hold data").clone();
        if flat.storage_offset() != 0 || flat.numel() != storage.read().byte_len() {
            return Err(PyRuntimeError::new_err(
                "a slice of a storage cannot be shared between processes; share the whole storage",
            ));
        }
        Ok(storage)
    }

    fn cdata_now(&self) -> usize {
        match &*self.lock() {
            Data::Typed(t) => t.storage().expect("typed storages hold data").id(),
            Data::Bytes(_) => self as *const StorageBase as usize,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Data> {
        self.data.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A typed flat view of this storage for `dtype`, converting loaded bytes once.
    pub fn typed(&self, dtype: DType) -> PyResult<Tensor> {
        let mut data = self.lock();
        match &*data {
            Data::Typed(t) if t.dtype() == dtype => Ok(t.clone()),
            Data::Typed(t) if t.dtype() == DType::U8 && t.storage_offset() > 0 => {
                // A byte window (a sliced storage): read as `dtype` in place.
                t.view_dtype(dtype).map_err(core_err)
            }
            Data::Typed(t) => {
                // Another dtype over the same bytes: a flat view reading them as `dtype`.
                let storage = t.storage().expect("typed storages hold data").clone();
                let n = storage.read().len_as(dtype);
                if let Ok(view) = Tensor::over_storage(storage, dtype, &[n], &[1], 0) {
                    return Ok(view);
                }
                // Bytes that cannot be read as `dtype` in place (bools over other bytes):
                // the storage takes a copy in the new dtype, and tensors set from it from now
                // on share that copy; tensors made earlier keep the old buffer.
                let bytes = buffer_bytes(&t.storage().expect("typed storages hold data").read());
                let retyped = typed_from_bytes(&bytes, dtype)?;
                *data = Data::Typed(retyped.clone());
                Ok(retyped)
            }
            Data::Bytes(b) => {
                let t = typed_from_bytes(b, dtype)?;
                *data = Data::Typed(t.clone());
                Ok(t)
            }
        }
    }

    fn nbytes_now(&self) -> usize {
        match &*self.lock() {
            Data::Typed(t) => t.numel() * t.dtype().size_in_bytes(),
            Data::Bytes(b) => b.len(),
        }
    }
}

#[pymethods]
impl StorageBase {
    /// `UntypedStorage()`, `UntypedStorage(nbytes)` (zeros), `UntypedStorage(bytes_like)`.
    #[new]
    #[pyo3(signature = (*args, **_kwargs))]
    fn py_new(
        args: &Bound<'_, PyTuple>,
        _kwargs: Option<&Bound<'_, pyo3::types::PyDict>>,
    ) -> PyResult<Self> {
        let bytes = match args.len() {
            0 => Vec::new(),
            1 => {
                let a = args.get_item(0)?;
                if let Ok(n) = a.extract::<usize>() {
                    vec![0u8; n]
                } else if let Ok(b) = a.extract::<Vec<u8>>() {
                    b
                } else {
                    return Err(PyTypeError::new_err(
                        "UntypedStorage(): expected a size or a sequence of bytes",
                    ));
                }
            }
            _ => return Err(PyTypeError::new_err("UntypedStorage(): too many arguments")),
        };
        Ok(StorageBase::with_data(Data::Bytes(bytes)))
    }

    fn nbytes(&self) -> usize {
        self.nbytes_now()
    }
    fn size(&self) -> usize {
        self.nbytes_now()
    }
    fn __len__(&self) -> usize {
        self.nbytes_now()
    }
    fn element_size(&self) -> usize {
        1
    }
    #[getter]
    fn device(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        crate::tensor::device_object(py, Device::Cpu)
    }
    #[getter]
    fn is_cuda(&self) -> bool {
        false
    }
    #[getter]
    fn is_sparse(&self) -> bool {
        false
    }
    /// True when the bytes live in shared memory (`share_memory_`, a DataLoader worker's batch).
    fn is_shared(&self) -> bool {
        match &*self.lock() {
            Data::Typed(t) => crate::shared_memory::region_of(
                &t.storage().expect("typed storages hold data").read(),
            )
            .is_some(),
            Data::Bytes(_) => false,
        }
    }
    /// Moves the bytes into shared memory (in place: tensors over them follow) and returns the
    /// region's file descriptor and byte length, for `torch.multiprocessing` to send.
    fn _share_fd_cpu_(&self) -> PyResult<(i32, usize)> {
        use std::sync::atomic::Ordering;
        if matches!(&*self.lock(), Data::Bytes(_)) {
            let before = self.cdata_now();
            let _ =
                self.pinned_cdata
                    .compare_exchange(0, before, Ordering::Relaxed, Ordering::Relaxed);
        }
        let storage = self.core_storage()?;
        crate::shared_memory::share(&storage).map_err(|e| {
            PyRuntimeError::new_err(format!("_share_fd_cpu_: cannot share the storage: {e}"))
        })
    }
    /// `UntypedStorage.from_buffer(buf, byte_order=None, count=-1, offset=0, dtype=None)`: a
    /// copy of a buffer's bytes (torch.distributed pickles objects through it). `offset` is in
    /// bytes, `count` in elements of `dtype`; elements wider than a byte need a `byte_order`,
    /// and "big" ones are swapped into this machine's order, as upstream does.
    #[classmethod]
    #[pyo3(signature = (buf, byte_order=None, count=-1, offset=0, dtype=None))]
    fn from_buffer<'py>(
        cls: &Bound<'py, pyo3::types::PyType>,
        buf: &Bound<'py, PyAny>,
        byte_order: Option<&str>,
        count: i64,
        offset: i64,
        dtype: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let data: Vec<u8> = pyo3::buffer::PyBuffer::<u8>::get(buf)
            .and_then(|b| b.to_vec(cls.py()))
            .or_else(|_| buf.extract::<Vec<u8>>())
            .map_err(|_| {
                PyTypeError::new_err("from_buffer: expected an object with the buffer protocol")
            })?;
        let elem = match dtype {
            Some(d) => crate::dtype::dtype_from_py(d)?.size_in_bytes(),
            None => 1,
        };
        if elem > 1 && byte_order.is_none() {
            return Err(PyRuntimeError::new_err(
                "from_buffer: elements wider than one byte need a byte_order ('native', 'little' or 'big')",
            ));
        }
        let offset = usize::try_from(offset).ok().filter(|&o| o <= data.len());
        let Some(offset) = offset else {
            return Err(PyRuntimeError::new_err(format!(
                "from_buffer: offset must be in [0, {}]",
                data.len()
            )));
        };
        let available = (data.len() - offset) / elem;
        let count = if count < 0 {
            if (data.len() - offset) % elem != 0 {
                return Err(PyRuntimeError::new_err(format!(
                    "from_buffer: {} bytes after the offset are not whole elements of {elem} bytes",
                    data.len() - offset
                )));
            }
            available
        } else if count as usize > available {
            return Err(PyRuntimeError::new_err(format!(
                "from_buffer: {count} elements of {elem} bytes asked for, the buffer holds {available} after offset {offset}"
            )));
        } else {
            count as usize
        };
        let mut bytes = data[offset..offset + count * elem].to_vec();
        let swap = match byte_order {
            None | Some("native") => false,
            Some("little") => cfg!(target_endian = "big"),
            Some("big") => cfg!(target_endian = "little"),
            Some(other) => {
                return Err(PyRuntimeError::new_err(format!(
                    "from_buffer: byte_order must be 'native', 'little' or 'big', not {other:?}"
                )))
            }
        };
        if swap {
            bytes.chunks_exact_mut(elem).for_each(|c| c.reverse());
        }
        let obj = cls.call0()?;
        *obj.cast::<StorageBase>()?.borrow().lock() = Data::Bytes(bytes);
        Ok(obj)
    }
    /// A new zeroed storage of `size` bytes in shared memory.
    #[classmethod]
    fn _new_using_fd_cpu<'py>(
        cls: &Bound<'py, pyo3::types::PyType>,
        size: usize,
    ) -> PyResult<Bound<'py, PyAny>> {
        let region = crate::shared_memory::SharedRegion::create(size).map_err(|e| {
            PyRuntimeError::new_err(format!(
                "_new_using_fd_cpu: cannot create shared memory of {size} bytes: {e}"
            ))
        })?;
        StorageBase::over_region(cls, region)
    }
    /// The storage another process shared as file descriptor `fd` (`size` bytes).
    #[classmethod]
    fn _new_shared_fd_cpu<'py>(
        cls: &Bound<'py, pyo3::types::PyType>,
        fd: i32,
        size: usize,
    ) -> PyResult<Bound<'py, PyAny>> {
        let region = crate::shared_memory::SharedRegion::open(fd, size).map_err(|e| {
            PyRuntimeError::new_err(format!(
                "_new_shared_fd_cpu: cannot map descriptor {fd}: {e}"
            ))
        })?;
        StorageBase::over_region(cls, region)
    }
    /// Upstream's `file_system` strategy needs its `torch_shm_manager` process; refused by name.
    fn _share_filename_cpu_(&self) -> PyResult<()> {
        Err(PyRuntimeError::new_err(
            "_share_filename_cpu_: the 'file_system' sharing strategy is not supported by torchnative; \
             use torch.multiprocessing.set_sharing_strategy('file_descriptor') (the default)",
        ))
    }
    #[classmethod]
    #[pyo3(signature = (*_args))]
    fn _new_shared_filename_cpu(
        _cls: &Bound<'_, pyo3::types::PyType>,
        _args: &Bound<'_, PyTuple>,
    ) -> PyResult<()> {
        Err(PyRuntimeError::new_err(
            "_new_shared_filename_cpu: the 'file_system' sharing strategy is not supported by torchnative",
        ))
    }
    /// A weak reference to the storage, as a number (upstream: the storage's address).
    fn _weak_ref(&self) -> PyResult<usize> {
        let storage = self.core_storage()?;
        let id = storage.id();
        let mut refs = weak_refs();
        let entry = refs
            .get_or_insert_with(Default::default)
            .entry(id)
            .or_insert_with(|| (storage.downgrade(), 0));
        entry.1 += 1;
        Ok(id)
    }
    /// The storage a weak reference names, or None when it is gone.
    #[classmethod]
    fn _new_with_weak_ptr<'py>(
        cls: &Bound<'py, pyo3::types::PyType>,
        handle: usize,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let storage = weak_refs()
            .as_ref()
            .and_then(|m| m.get(&handle))
            .and_then(|(w, _)| w.upgrade());
        storage.map(|s| StorageBase::over(cls, s)).transpose()
    }
    #[classmethod]
    fn _expired(_cls: &Bound<'_, pyo3::types::PyType>, handle: usize) -> bool {
        weak_refs()
            .as_ref()
            .and_then(|m| m.get(&handle))
            .is_none_or(|(w, _)| w.upgrade().is_none())
    }
    #[classmethod]
    fn _free_weak_ref(_cls: &Bound<'_, pyo3::types::PyType>, handle: usize) {
        let mut refs = weak_refs();
        if let Some(m) = refs.as_mut() {
            if let Some(entry) = m.get_mut(&handle) {
                entry.1 -= 1;
                if entry.1 == 0 {
                    m.remove(&handle);
                }
            }
        }
    }
    /// Reference counts of `file_system` shared memory; nothing to count for descriptors.
    fn _shared_incref(slf: Py<Self>) -> Py<Self> {
        slf
    }
    fn _shared_decref(slf: Py<Self>) -> Py<Self> {
        slf
    }
    fn is_pinned(&self, _device: Option<&Bound<'_, PyAny>>) -> bool {
        false
    }
    /// Address of the first byte; tensors of one buffer report the same address.
    fn data_ptr(&self) -> PyResult<usize> {
        match &*self.lock() {
            Data::Typed(t) => crate::memory::data_ptr(t),
            Data::Bytes(b) => Ok(b.as_ptr() as usize),
        }
    }
    /// The storage's identity (upstream: the `StorageImpl`'s address), which the serializer
    /// keys storages by: the same for every object over one buffer, and kept when the bytes
    /// move (into shared memory).
    #[getter]
    fn _cdata(&self) -> usize {
        match self.pinned_cdata.load(std::sync::atomic::Ordering::Relaxed) {
            0 => self.cdata_now(),
            pinned => pinned,
        }
    }
    /// The storage's bytes (a copy), for the zip writer.
    fn _tn_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        match &*self.lock() {
            Data::Typed(t) => PyBytes::new(
                py,
                &buffer_bytes(&t.storage().expect("typed storages hold data").read()),
            ),
            Data::Bytes(b) => PyBytes::new(py, b),
        }
    }
    fn tolist(&self) -> PyResult<Vec<u8>> {
        Ok(match &*self.lock() {
            Data::Typed(t) if t.dtype() == DType::U8 => t.to_vec::<u8>().map_err(core_err)?,
            Data::Typed(t) => buffer_bytes(&t.storage().expect("typed storages hold data").read()),
            Data::Bytes(b) => b.clone(),
        })
    }
    /// `UntypedStorage.from_file(filename, shared=False, nbytes=0)`: the file's bytes, mapped
    /// (not read): `shared=True` writes go to the file, otherwise to private copies of pages.
    #[classmethod]
    #[pyo3(signature = (filename, shared=false, nbytes=0))]
    fn from_file(
        cls: &Bound<'_, pyo3::types::PyType>,
        filename: std::path::PathBuf,
        shared: bool,
        nbytes: usize,
    ) -> PyResult<Py<PyAny>> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(shared)
            .open(&filename)
            .map_err(|e| {
                PyRuntimeError::new_err(format!(
                    "from_file: cannot open {}: {e}",
                    filename.display()
                ))
            })?;
        let len = file.metadata().map(|m| m.len() as usize).unwrap_or(0);
        let want = if nbytes == 0 { len } else { nbytes };
        if want > len {
            return Err(PyRuntimeError::new_err(format!(
                "from_file: {} has {len} bytes, {want} were asked for",
                filename.display()
            )));
        }
        let mut opts = memmap2::MmapOptions::new();
        opts.len(want);
        // SAFETY: the mapping lives as long as the storage's owner; writes to the file from
        // outside while it is mapped are the caller's business, as with upstream's mmap.
        let mut map = unsafe {
            if shared {
                opts.map_mut(&file)
            } else {
                opts.map_copy(&file)
            }
        }
        .map_err(|e| PyRuntimeError::new_err(format!("from_file: cannot map: {e}")))?;
        let ptr = map.as_mut_ptr();
        // SAFETY: `want` bytes at `ptr` stay valid and writable while the map (the owner) lives.
        let bytes =
            unsafe { torchnative_core::storage::ForeignBytes::new(ptr, want, true, Box::new(map)) };
        let storage = torchnative_core::storage::Storage::new(Buffer::Foreign(bytes));
        let flat = Tensor::over_storage(storage, DType::U8, &[want], &[1], 0).map_err(core_err)?;
        let obj = cls.call0()?;
        *obj.cast::<StorageBase>()?.borrow().lock() = Data::Typed(flat);
        Ok(obj.unbind())
    }
    /// `storage[i]` (a byte) or `storage[a:b]` (a storage over those bytes, sharing memory).
    fn __getitem__(slf: &Bound<'_, Self>, index: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let py = slf.py();
        let flat = slf.borrow().typed(DType::U8)?;
        let n = flat.numel() as isize;
        if let Ok(s) = index.cast::<pyo3::types::PySlice>() {
            let ind = s.indices(n)?;
            if ind.step != 1 {
                return Err(PyRuntimeError::new_err(
                    "storages support only step 1 slices",
                ));
            }
            let len = (ind.stop - ind.start).max(0) as usize;
            let start = flat.storage_offset() + ind.start as usize;
            let window = match foreign_window(&flat, start, len)? {
                Some(w) => w,
                None => flat.as_strided(&[len], &[1], start).map_err(core_err)?,
            };
            let obj = slf.get_type().call0()?;
            *obj.cast::<StorageBase>()?.borrow().lock() = Data::Typed(window);
            return Ok(obj.unbind());
        }
        let i: isize = index.extract()?;
        let j = if i < 0 { i + n } else { i };
        if j < 0 || j >= n {
            return Err(pyo3::exceptions::PyIndexError::new_err(format!(
                "index {i} out of range for storage of size {n}"
            )));
        }
        let v = flat
            .select(0, j as i64)
            .and_then(|t| t.item())
            .map_err(core_err)?;
        crate::value_to_py(py, &crate::value::Value::Scalar(v))
    }
    /// The storage's bytes as a flat tensor of `dtype` (`torch.asarray(storage, dtype=...)`).
    fn _tn_as_tensor(
        &self,
        py: Python<'_>,
        dtype: Option<Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let dtype = match dtype {
            None => DType::U8,
            Some(d) => crate::dtype::dtype_from_py(&d)?,
        };
        let flat = self.typed(DType::U8)?;
        let t = if dtype == DType::U8 {
            flat
        } else {
            flat.view_dtype(dtype).map_err(core_err)?
        };
        crate::tensor::wrap(py, t)
    }
}

/// A storage of its own over `len` bytes from `start` of a foreign (mapped) buffer, as
/// upstream's storage slices are (their tensors start at offset 0); `None` for buffers Rust
/// owns, whose memory may move when resized (those slices stay views with an offset).
fn foreign_window(flat: &Tensor, start: usize, len: usize) -> PyResult<Option<Tensor>> {
    let storage = flat.storage().expect("typed storages hold data").clone();
    let (ptr, writable) = {
        let buf = storage.read();
        if !buf.is_foreign() || start + len > buf.byte_len() {
            return Ok(None);
        }
        (
            buf.as_bytes().as_ptr() as usize + start,
            buf.is_writable_foreign(),
        )
    };
    // SAFETY: foreign memory is never moved or resized, and the owner (a handle to the whole
    // buffer) keeps it alive as long as the window lives.
    let bytes = unsafe {
        torchnative_core::storage::ForeignBytes::new(
            ptr as *mut u8,
            len,
            writable,
            Box::new(storage),
        )
    };
    let window = torchnative_core::storage::Storage::new(Buffer::Foreign(bytes));
    Tensor::over_storage(window, DType::U8, &[len], &[1], 0)
        .map(Some)
        .map_err(core_err)
}

/// `Tensor.untyped_storage()`: a `torch.UntypedStorage` over the tensor's own buffer.
#[pyfunction]
pub fn _tn_storage_of(py: Python<'_>, t: PyRef<'_, TensorBase>) -> PyResult<Py<PyAny>> {
    let flat = whole_buffer(&t.inner)?;
    let cls = py.import("torch")?.getattr("UntypedStorage")?;
    let obj = cls.call0()?;
    let storage = obj.cast::<StorageBase>()?.borrow();
    *storage.lock() = Data::Typed(flat);
    drop(storage);
    Ok(obj.unbind())
}

/// `Tensor.set_(storage, offset, size, stride)`: the tensor becomes a view of the storage.
pub fn set_storage(
    t: &Bound<'_, TensorBase>,
    storage: PyRef<'_, StorageBase>,
    offset: usize,
    size: Vec<usize>,
    stride: Option<Vec<usize>>,
) -> PyResult<()> {
    let dtype = t.borrow().inner.dtype();
    let flat = storage.typed(dtype)?;
    let stride = stride.filter(|s| !s.is_empty()).unwrap_or_else(|| {
        let mut st = vec![1usize; size.len()];
        for i in (0..size.len().saturating_sub(1)).rev() {
            st[i] = st[i + 1] * size[i + 1].max(1);
        }
        st
    });
    let view = flat.as_strided(&size, &stride, offset).map_err(core_err)?;
    let mut tb = t.borrow_mut();
    tb.inner = view;
    Ok(())
}

fn storage_arg<'a, 'py>(
    c: &crate::kernels::Ctx<'a, 'py>,
    i: usize,
) -> PyResult<Bound<'py, StorageBase>> {
    match &c.values[i] {
        crate::value::Value::Object(o) => Ok(o.bind(c.py).cast::<StorageBase>()?.clone()),
        v => Err(PyTypeError::new_err(format!(
            "expected a storage, got {v:?}"
        ))),
    }
}

fn tensor_arg<'py>(c: &crate::kernels::Ctx<'_, 'py>, i: usize) -> PyResult<Bound<'py, TensorBase>> {
    match &c.values[i] {
        crate::value::Value::Tensor(t) => Ok(t.bind(c.py).clone()),
        v => Err(PyTypeError::new_err(format!(
            "expected a tensor, got {v:?}"
        ))),
    }
}

fn usizes(v: Vec<i64>) -> PyResult<Vec<usize>> {
    v.into_iter()
        .map(|x| {
            usize::try_from(x)
                .map_err(|_| PyRuntimeError::new_err(format!("negative size or stride {x}")))
        })
        .collect()
}

pub(crate) fn register(t: &mut crate::kernels::Table) {
    use crate::value::Out;
    t.insert("aten::set_.source_Storage_storage_offset", |c| {
        let offset = usizes(vec![c.int(2)?])?[0];
        let (size, stride) = (usizes(c.ints(3)?)?, usizes(c.ints(4)?)?);
        set_storage(
            &tensor_arg(c, 0)?,
            storage_arg(c, 1)?.borrow(),
            offset,
            size,
            Some(stride),
        )?;
        Ok(Out::Arg(0))
    });
    t.insert("aten::set_.source_Storage", |c| {
        let this = tensor_arg(c, 0)?;
        let storage = storage_arg(c, 1)?;
        let elem = this.borrow().inner.dtype().size_in_bytes();
        let n = storage.borrow().nbytes_now() / elem;
        set_storage(&this, storage.borrow(), 0, vec![n], None)?;
        Ok(Out::Arg(0))
    });
    t.insert("aten::set_.source_Tensor", |c| {
        let source = c.tensor(1)?;
        let this = tensor_arg(c, 0)?;
        let mut tb = this.borrow_mut();
        tb.inner = source;
        Ok(Out::Arg(0))
    });
    t.insert("aten::set_.source_Tensor_storage_offset", |c| {
        let source = whole_buffer(&c.tensor(1)?)?;
        let offset = usizes(vec![c.int(2)?])?[0];
        let (size, stride) = (usizes(c.ints(3)?)?, usizes(c.ints(4)?)?);
        let view = source
            .as_strided(&size, &stride, offset)
            .map_err(core_err)?;
        let this = tensor_arg(c, 0)?;
        let mut tb = this.borrow_mut();
        tb.inner = view;
        Ok(Out::Arg(0))
    });
    t.insert("aten::set_", |c| {
        let this = tensor_arg(c, 0)?;
        let mut tb = this.borrow_mut();
        tb.inner = Tensor::empty_on(&[0], tb.inner.dtype(), Device::Cpu).map_err(core_err)?;
        Ok(Out::Arg(0))
    });
}

/// A contiguous tensor's own bytes (not its whole storage's), copied once: what
/// torch.distributed's backend sends.
#[pyfunction]
pub fn _tn_tensor_bytes<'py>(
    py: Python<'py>,
    t: PyRef<'_, TensorBase>,
) -> PyResult<Bound<'py, PyBytes>> {
    let x = &t.inner;
    if !x.is_contiguous() {
        return Err(PyRuntimeError::new_err(
            "_tn_tensor_bytes: the tensor is not contiguous",
        ));
    }
    let elem = x.dtype().size_in_bytes();
    let n = x.numel() * elem;
    let Some(storage) = x.storage() else {
        return Ok(PyBytes::new(py, &[]));
    };
    let buf = storage.read();
    let start = x.storage_offset() * elem;
    let bytes = buf.as_bytes().get(start..start + n).ok_or_else(|| {
        PyRuntimeError::new_err("_tn_tensor_bytes: the tensor reaches past its storage")
    })?;
    Ok(PyBytes::new(py, bytes))
}

/// A flat tensor of `dtype` holding a copy of `data`'s bytes (the zip reader's records).
#[pyfunction]
pub fn _tn_tensor_from_bytes(
    py: Python<'_>,
    data: &[u8],
    dtype: &Bound<'_, PyAny>,
) -> PyResult<Py<PyAny>> {
    let dtype = crate::dtype::dtype_from_py(dtype)?;
    crate::tensor::wrap(py, typed_from_bytes(data, dtype)?)
}
