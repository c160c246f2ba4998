//! Storages in shared memory, as upstream's `file_descriptor` sharing strategy makes them:
//! what `torch.multiprocessing` (and so `DataLoader` workers) passes tensors between processes
//! through.
//!
//! A region is an unlinked file in `/dev/shm`, mapped shared; its descriptor stays open as long
//! as the region lives, so another process can receive it (`SCM_RIGHTS`, done by Python's
//! `multiprocessing`) and map the same pages. Sharing a storage that lives in ordinary memory
//! moves its bytes into a new region and swaps the buffer in place, so every tensor over it
//! sees the shared pages, as upstream swaps a storage's data pointer.

use std::fs::File;
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use torchnative_core::storage::{Buffer, ForeignBytes, Storage};
use torchnative_core::Element;

/// A mapped shared-memory file and its open descriptor.
pub struct SharedRegion {
    file: File,
    map: memmap2::MmapMut,
    len: usize,
}

/// mmap refuses empty mappings; an empty region maps one byte and reports none.
fn map_len(len: usize) -> usize {
    len.max(1)
}

fn map(file: &File, len: usize) -> std::io::Result<memmap2::MmapMut> {
    // SAFETY: the file is a shared-memory object that only tensors read and write; writes
    // from other processes are the point of sharing (upstream gives the same guarantee).
    unsafe { memmap2::MmapOptions::new().len(map_len(len)).map_mut(file) }
}

impl SharedRegion {
    /// A new zeroed region of `len` bytes.
    pub fn create(len: usize) -> std::io::Result<SharedRegion> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let dir = if std::path::Path::new("/dev/shm").is_dir() {
            std::path::PathBuf::from("/dev/shm")
        } else {
            std::env::temp_dir()
        };
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let path = dir.join(format!(
            "torchnative_{}_{}_{nanos}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)?;
        // Unlinked at once: the memory is freed when the last descriptor and mapping go.
        std::fs::remove_file(&path)?;
        file.set_len(map_len(len) as u64)?;
        let map = map(&file, len)?;
        Ok(SharedRegion { file, map, len })
    }

    /// The region another process shared as descriptor `fd` (which stays the caller's).
    pub fn open(fd: RawFd, len: usize) -> std::io::Result<SharedRegion> {
        if fd < 0 {
            return Err(std::io::Error::other(format!(
                "{fd} is not a file descriptor"
            )));
        }
        // SAFETY: non-negative, and the caller holds it open for the duration of the call (a
        // closed one fails to duplicate with EBADF).
        let owned = unsafe { BorrowedFd::borrow_raw(fd) }.try_clone_to_owned()?;
        let file = File::from(owned);
        let size = file.metadata()?.len() as usize;
        if size < len {
            return Err(std::io::Error::other(format!(
                "the shared memory object has {size} bytes, {len} were asked for"
            )));
        }
        let map = map(&file, len)?;
        Ok(SharedRegion { file, map, len })
    }

    /// The open descriptor of the region.
    pub fn fd(&self) -> RawFd {
        self.file.as_raw_fd()
    }

    /// A buffer over the region (readable as bools when asked and every byte is 0 or 1).
    pub fn into_buffer(mut self, bools: bool) -> Option<Buffer> {
        let ptr = self.map.as_mut_ptr();
        let len = self.len;
        // SAFETY: `len` bytes at `ptr` stay mapped and writable while the region (the owner)
        // lives; the mapping is never resized.
        let bytes = unsafe { ForeignBytes::new(ptr, len, true, Box::new(self)) };
        let bytes = if bools { bytes.with_bools()? } else { bytes };
        Some(Buffer::Foreign(bytes))
    }
}

/// The descriptor and byte length of the shared region a buffer lives in, if it does.
pub fn region_of(buf: &Buffer) -> Option<(RawFd, usize)> {
    match buf {
        Buffer::Foreign(f) => f
            .owner()
            .downcast_ref::<SharedRegion>()
            .map(|r| (r.fd(), f.len())),
        _ => None,
    }
}

/// Moves `storage`'s bytes into shared memory (once; a shared storage stays where it is) and
/// returns the region's descriptor and byte length.
pub fn share(storage: &Storage) -> std::io::Result<(RawFd, usize)> {
    let mut buf = storage.write();
    if let Some(shared) = region_of(&buf) {
        return Ok(shared);
    }
    if let Buffer::Foreign(f) = &*buf {
        if f.owner().is::<Storage>() {
            // A window of another storage: moving it would cut it off from the storage it
            // slices.
            return Err(std::io::Error::other(
                "a slice of a storage cannot be shared between processes; share the whole storage",
            ));
        }
    }
    let bytes = buf.as_bytes();
    let mut region = SharedRegion::create(bytes.len())?;
    region.map[..bytes.len()].copy_from_slice(bytes);
    let shared = (region.fd(), bytes.len());
    let bools = bool::slice(&buf).is_some();
    *buf = region
        .into_buffer(bools)
        .ok_or_else(|| std::io::Error::other("a bool buffer held bytes other than 0 and 1"))?;
    Ok(shared)
}
