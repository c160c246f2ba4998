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

/// Reads a small text file (JSON configs, indexes, refs), refusing files over `limit` bytes
/// before reading them: these files are untrusted and read whole.
pub(crate) fn read_text(path: &Path, limit: u64) -> Result<String> {
    use std::io::Read;
    let file = File::open(path).map_err(|e| FormatError::io(path, e))?;
    let mut text = String::new();
    // Read one byte past the limit to tell "exactly at the limit" from "over it".
    file.take(limit + 1)
        .read_to_string(&mut text)
        .map_err(|e| FormatError::io(path, e))?;
    if text.len() as u64 > limit {
        return Err(FormatError::Malformed(format!(
            "{}: larger than the {limit}-byte limit for this kind of file",
            path.display()
        )));
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    #[test]
    fn text_files_are_bounded_before_reading() {
        let path = std::env::temp_dir().join(format!("tn-formats-text-{}", std::process::id()));
        std::fs::write(&path, "0123456789a").unwrap();
        assert_eq!(super::read_text(&path, 11).unwrap(), "0123456789a");
        let msg = super::read_text(&path, 10).unwrap_err().to_string();
        assert!(msg.contains("10-byte limit"), "{msg}");
        let _ = std::fs::remove_file(&path);
    }
}
