//! Read-only file bytes: a memory map, or an owned buffer for in-memory inputs.
use std::fs::File;
use std::path::Path;

use memmap2::Mmap;

use crate::error::{FormatError, Result};

/// Bytes a parsed file borrows its tensor slices from.
pub(crate) enum Bytes {
    Mapped(Mmap),
    Owned(Vec<u8>),
}

impl Bytes {
    pub(crate) fn as_slice(&self) -> &[u8] {
        match self {
            Bytes::Mapped(m) => m,
            Bytes::Owned(v) => v,
        }
    }
}

/// Maps `path` read-only.
pub(crate) fn map_file(path: &Path) -> Result<Bytes> {
    let file = File::open(path).map_err(|e| FormatError::io(path, e))?;
    // SAFETY: the map is read-only and only ever read through shared slices. Another process
    // truncating the file while mapped would fault on access; no safe reader can prevent that.
    let map = unsafe { Mmap::map(&file) }.map_err(|e| FormatError::io(path, e))?;
    Ok(Bytes::Mapped(map))
}
