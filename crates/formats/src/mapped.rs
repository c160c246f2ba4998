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

    /// Drops the resident pages of `data`, a sub-slice of these bytes, from this process (see
    /// `GgufFile::release_pages`). Slices of other memory, and owned bytes, are left alone.
    pub(crate) fn release_pages(&self, data: &[u8]) {
        let Bytes::Mapped(map) = self else { return };
        let (base, at) = (map.as_ptr() as usize, data.as_ptr() as usize);
        let Some(offset) = at.checked_sub(base) else {
            return;
        };
        if data.is_empty() || offset + data.len() > map.len() {
            return;
        }
        #[cfg(unix)]
        // SAFETY: the map is a read-only shared mapping of a file that nothing writes through,
        // so MADV_DONTNEED only drops this process's page mappings: a later read faults the
        // same bytes back in from the file (or the page cache). Failure is harmless (a hint).
        let _ = unsafe {
            map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, offset, data.len())
        };
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

    /// Resident kB of the mapping that starts at `addr`, from /proc/self/smaps.
    #[cfg(target_os = "linux")]
    fn resident_kib(addr: usize) -> usize {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut lines = smaps.lines();
        while let Some(line) = lines.next() {
            let start = line.split('-').next().unwrap();
            if usize::from_str_radix(start, 16) == Ok(addr) {
                let rss = lines.find(|l| l.starts_with("Rss:")).unwrap();
                return rss.split_whitespace().nth(1).unwrap().parse().unwrap();
            }
        }
        panic!("no mapping at {addr:#x}");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn released_pages_leave_the_process_and_read_back_the_same() {
        let path = std::env::temp_dir().join(format!("tn-formats-release-{}", std::process::id()));
        let data: Vec<u8> = (0..8u32 << 20)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
            .collect();
        std::fs::write(&path, &data).unwrap();
        let bytes = super::map_file(&path).unwrap();
        let map = bytes.as_slice();
        assert_eq!(map, &data[..]);
        let addr = map.as_ptr() as usize;
        assert!(resident_kib(addr) >= 8 << 10, "{} kB", resident_kib(addr));
        // The middle 6 MiB (not page-aligned at either end) go; the edges stay.
        bytes.release_pages(&map[(1 << 20) + 100..(7 << 20) - 100]);
        let left = resident_kib(addr);
        assert!(left <= (2 << 10) + 8, "{left} kB still resident");
        // A slice of other memory, or an empty one, is ignored.
        bytes.release_pages(&data[..4096]);
        bytes.release_pages(&map[..0]);
        assert_eq!(
            bytes.as_slice(),
            &data[..],
            "released pages read back from the file"
        );
        let owned = super::Bytes::Owned(data.clone());
        owned.release_pages(owned.as_slice());
        assert_eq!(
            owned.as_slice(),
            &data[..],
            "owned bytes are never released"
        );
        let _ = std::fs::remove_file(&path);
    }
}
