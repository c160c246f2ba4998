//! GGUF v2/v3 reader and writer.
//!
//! Layout (little-endian): magic `GGUF`, version u32, tensor count u64, metadata count u64,
//! metadata key/value pairs, tensor directory (name, dims, type id, offset), padding to the
//! alignment, then the data section that tensor offsets are relative to.
//!
//! Every count, length and offset is checked against the bytes that remain before anything is
//! allocated or sliced, so a hostile file yields a [`FormatError`] rather than a panic or a
//! huge allocation.

mod value;
mod write;

use std::collections::HashMap;
use std::path::Path;

use torchnative_quant::GgmlType;

use crate::error::{malformed, FormatError, Result};
use crate::mapped::{map_file, Bytes};
pub use value::MetadataValue;
use value::ValueType;
pub use write::{gguf_bytes, write_gguf, write_gguf_streaming, TensorHeader, TensorToWrite};

/// `GGUF` read as a little-endian u32.
pub const GGUF_MAGIC: u32 = 0x4655_4747;
/// Largest `general.alignment` accepted. Real files use 32 (ggml's default) up to a page; a huge
/// value in a file without tensors would make a rewrite pad gigabytes (found by fuzzing).
pub const MAX_ALIGNMENT: u64 = 1 << 20;

/// Alignment of the data section and of every tensor when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: u64 = 32;
/// ggml tensors have at most this many dimensions (`GGML_MAX_DIMS`).
pub const MAX_DIMS: usize = 4;
/// Arrays nested deeper than this are refused: the parser recurses per level.
pub const MAX_ARRAY_DEPTH: usize = 8;

/// One tensor in the directory of a GGUF file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorInfo {
    /// Tensor name, e.g. `blk.0.attn_q.weight`.
    pub name: String,
    /// Sizes in ggml order: `dims[0]` is the contiguous (innermost) dimension.
    pub dims: Vec<u64>,
    /// Element/block type of the data.
    pub ggml_type: GgmlType,
    /// Byte offset from the start of the data section.
    pub offset: u64,
    /// Size of the data in bytes.
    pub n_bytes: u64,
}

impl TensorInfo {
    /// Number of elements (product of the dims; 1 for a scalar).
    pub fn n_elements(&self) -> u64 {
        // Validated at parse time not to overflow.
        self.dims.iter().product()
    }
}

/// A validated GGUF file. Tensor data stays in the map and is handed out as slices.
pub struct GgufFile {
    storage: Bytes,
    version: u32,
    metadata: Vec<(String, MetadataValue)>,
    metadata_index: HashMap<String, usize>,
    tensors: Vec<TensorInfo>,
    tensor_index: HashMap<String, usize>,
    alignment: u64,
    data_start: u64,
}

impl std::fmt::Debug for GgufFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GgufFile")
            .field("version", &self.version)
            .field("n_metadata", &self.metadata.len())
            .field("n_tensors", &self.tensors.len())
            .field("alignment", &self.alignment)
            .field("data_start", &self.data_start)
            .finish()
    }
}

impl GgufFile {
    /// Maps and validates the GGUF file at `path`. Errors name the file.
    ///
    /// The file must not be truncated by another process while mapped (that would fault on
    /// access, as with any memory-mapped reader).
    pub fn open(path: &Path) -> Result<GgufFile> {
        GgufFile::parse(map_file(path)?).map_err(|e| e.in_file(path))
    }

    /// Validates a GGUF file held in memory (tests, fuzzing, embedded models).
    pub fn from_bytes(bytes: Vec<u8>) -> Result<GgufFile> {
        GgufFile::parse(Bytes::Owned(bytes))
    }

    /// Format version (2 or 3).
    pub fn version(&self) -> u32 {
        self.version
    }

    /// Metadata in file order.
    pub fn metadata(&self) -> &[(String, MetadataValue)] {
        &self.metadata
    }

    /// The metadata value for `key`.
    pub fn get(&self, key: &str) -> Option<&MetadataValue> {
        self.metadata_index.get(key).map(|&i| &self.metadata[i].1)
    }

    /// Tensor directory in file order.
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.tensors
    }

    /// The tensor named `name`.
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensor_index.get(name).map(|&i| &self.tensors[i])
    }

    /// The data of `info`, a zero-copy slice of the file. `info` must come from this file's
    /// directory; an info whose range lies outside the file yields an empty slice.
    ///
    /// From [`GgufFile::open`] the slice starts on an [`alignment`](Self::alignment)
    /// boundary in memory (maps are page-aligned); from [`GgufFile::from_bytes`] it is only as
    /// aligned as the `Vec`'s allocation, so readers must not assume element alignment.
    pub fn tensor_data(&self, info: &TensorInfo) -> &[u8] {
        let range = self
            .data_start
            .checked_add(info.offset)
            .and_then(|start| Some((start, start.checked_add(info.n_bytes)?)))
            .and_then(|(s, e)| Some(usize::try_from(s).ok()?..usize::try_from(e).ok()?));
        range
            .and_then(|r| self.storage.as_slice().get(r))
            .unwrap_or(&[])
    }

    /// Alignment of the data section and tensor offsets, in bytes (a power of two).
    pub fn alignment(&self) -> u64 {
        self.alignment
    }

    /// Absolute file offset where the data section starts.
    pub fn data_start(&self) -> u64 {
        self.data_start
    }

    /// The whole file.
    pub fn as_bytes(&self) -> &[u8] {
        self.storage.as_slice()
    }

    /// Lets go of the resident pages under `data` (a slice of this file, such as a tensor's
    /// [`tensor_data`](Self::tensor_data)) once its reader holds its own copy: they stop
    /// counting toward the process's memory, and reading them again brings them back from the
    /// file. Only a hint: a file read into memory ([`GgufFile::from_bytes`]) keeps its bytes.
    pub fn release_pages(&self, data: &[u8]) {
        self.storage.release_pages(data);
    }

    fn parse(storage: Bytes) -> Result<GgufFile> {
        let header = parse_header(storage.as_slice())?;
        Ok(GgufFile {
            storage,
            version: header.version,
            metadata: header.metadata,
            metadata_index: header.metadata_index,
            tensors: header.tensors,
            tensor_index: header.tensor_index,
            alignment: header.alignment,
            data_start: header.data_start,
        })
    }
}

struct Header {
    version: u32,
    metadata: Vec<(String, MetadataValue)>,
    metadata_index: HashMap<String, usize>,
    tensors: Vec<TensorInfo>,
    tensor_index: HashMap<String, usize>,
    alignment: u64,
    data_start: u64,
}

/// Bounds-checked little-endian cursor over the file bytes.
struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn remaining(&self) -> u64 {
        (self.bytes.len() - self.pos) as u64
    }

    /// Takes `n` bytes for `what`, or explains how far the file falls short.
    fn take(&mut self, n: u64, what: &dyn Fn() -> String) -> Result<&'a [u8]> {
        if n > self.remaining() {
            return Err(malformed(format!(
                "{}: needs {n} bytes at offset {} but the file has {} bytes",
                what(),
                self.pos,
                self.bytes.len()
            )));
        }
        // n <= remaining, so it fits in usize.
        let n = n as usize;
        let out = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    fn array<const N: usize>(&mut self, what: &dyn Fn() -> String) -> Result<[u8; N]> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N as u64, what)?);
        Ok(out)
    }

    fn u8(&mut self, what: &dyn Fn() -> String) -> Result<u8> {
        Ok(self.array::<1>(what)?[0])
    }
    fn u16(&mut self, what: &dyn Fn() -> String) -> Result<u16> {
        Ok(u16::from_le_bytes(self.array(what)?))
    }
    fn u32(&mut self, what: &dyn Fn() -> String) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }
    fn u64(&mut self, what: &dyn Fn() -> String) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    /// A length-prefixed UTF-8 string; the length is checked against the remaining bytes.
    fn string(&mut self, what: &dyn Fn() -> String) -> Result<String> {
        let len = self.u64(&|| format!("{} length", what()))?;
        if len > self.remaining() {
            return Err(malformed(format!(
                "{}: string length {len} exceeds the {} bytes left after offset {}",
                what(),
                self.remaining(),
                self.pos
            )));
        }
        let at = self.pos;
        let raw = self.take(len, what)?;
        match std::str::from_utf8(raw) {
            Ok(s) => Ok(s.to_owned()),
            Err(e) => Err(malformed(format!(
                "{}: string at offset {at} is not UTF-8 (invalid byte at position {})",
                what(),
                e.valid_up_to()
            ))),
        }
    }

    /// A count of items each at least `min_item_len` bytes long, refused when the remaining
    /// bytes cannot hold that many.
    fn count(&mut self, min_item_len: u64, what: &dyn Fn() -> String) -> Result<u64> {
        let n = self.u64(what)?;
        let fits = self.remaining() / min_item_len.max(1);
        if n > fits {
            return Err(malformed(format!(
                "{}: {n} exceeds the at most {fits} items of {min_item_len}+ bytes that fit in \
                 the {} bytes left after offset {}",
                what(),
                self.remaining(),
                self.pos
            )));
        }
        Ok(n)
    }

    fn value(
        &mut self,
        ty: ValueType,
        depth: usize,
        what: &dyn Fn() -> String,
    ) -> Result<MetadataValue> {
        use MetadataValue as V;
        Ok(match ty {
            ValueType::U8 => V::U8(self.u8(what)?),
            ValueType::I8 => V::I8(self.u8(what)? as i8),
            ValueType::U16 => V::U16(self.u16(what)?),
            ValueType::I16 => V::I16(self.u16(what)? as i16),
            ValueType::U32 => V::U32(self.u32(what)?),
            ValueType::I32 => V::I32(self.u32(what)? as i32),
            ValueType::U64 => V::U64(self.u64(what)?),
            ValueType::I64 => V::I64(self.u64(what)? as i64),
            ValueType::F32 => V::F32(f32::from_bits(self.u32(what)?)),
            ValueType::F64 => V::F64(f64::from_bits(self.u64(what)?)),
            ValueType::Bool => match self.u8(what)? {
                0 => V::Bool(false),
                1 => V::Bool(true),
                b => {
                    return Err(malformed(format!(
                        "{}: bool byte is {b} at offset {}, expected 0 or 1",
                        what(),
                        self.pos - 1
                    )))
                }
            },
            ValueType::String => V::String(self.string(what)?),
            ValueType::Array => {
                if depth >= MAX_ARRAY_DEPTH {
                    return Err(malformed(format!(
                        "{}: arrays nested deeper than {MAX_ARRAY_DEPTH} levels",
                        what()
                    )));
                }
                let elem_id = self.u32(&|| format!("{} array element type", what()))?;
                let elem = ValueType::from_id(elem_id).ok_or_else(|| {
                    malformed(format!(
                        "{}: unknown array element type id {elem_id} (known: 0..=12)",
                        what()
                    ))
                })?;
                let n = self.count(elem.min_encoded_len(), &|| {
                    format!("{} array length ({} elements)", what(), elem.name())
                })?;
                // `n` is bounded by the file size; cap the up-front reservation anyway since
                // each element takes more memory than its smallest encoding.
                let mut items = Vec::with_capacity(n.min(1 << 16) as usize);
                for i in 0..n {
                    items.push(self.value(elem, depth + 1, &|| format!("{}[{i}]", what()))?);
                }
                V::Array(items)
            }
        })
    }
}

fn parse_header(bytes: &[u8]) -> Result<Header> {
    let mut cur = Cursor { bytes, pos: 0 };
    let magic = cur.u32(&|| "GGUF magic".to_string())?;
    if magic != GGUF_MAGIC {
        return Err(malformed(format!(
            "magic is {:02x?}, expected \"GGUF\" ({:02x?})",
            magic.to_le_bytes(),
            GGUF_MAGIC.to_le_bytes()
        )));
    }
    let version = cur.u32(&|| "GGUF version".to_string())?;
    match version {
        2 | 3 => {}
        1 => {
            return Err(FormatError::Unsupported(
                "GGUF version 1 (32-bit counts); only versions 2 and 3 are supported".into(),
            ))
        }
        v if v.swap_bytes() == 2 || v.swap_bytes() == 3 => {
            return Err(FormatError::Unsupported(format!(
                "big-endian GGUF (version field {v:#010x}); only little-endian files are supported"
            )))
        }
        v => {
            return Err(FormatError::Unsupported(format!(
                "GGUF version {v}; only versions 2 and 3 are supported"
            )))
        }
    }
    // Smallest tensor entry: name length + n_dims + type + offset.
    let n_tensors = cur.count(8 + 4 + 4 + 8, &|| "tensor count".to_string())?;
    // Smallest metadata entry: key length + value type + one byte of value.
    let n_kv = cur.count(8 + 4 + 1, &|| "metadata count".to_string())?;

    let mut metadata = Vec::with_capacity(n_kv as usize);
    let mut metadata_index = HashMap::with_capacity(n_kv as usize);
    for i in 0..n_kv {
        let key = cur.string(&|| format!("metadata entry {i} key"))?;
        let type_id = cur.u32(&|| format!("metadata key '{key}' value type"))?;
        let ty = ValueType::from_id(type_id).ok_or_else(|| {
            malformed(format!(
                "metadata key '{key}': unknown value type id {type_id} (known: 0..=12)"
            ))
        })?;
        let value = cur.value(ty, 0, &|| format!("metadata key '{key}'"))?;
        if metadata_index.insert(key.clone(), metadata.len()).is_some() {
            return Err(malformed(format!(
                "metadata key '{key}' appears more than once"
            )));
        }
        metadata.push((key, value));
    }

    let alignment = match metadata_index.get("general.alignment") {
        None => DEFAULT_ALIGNMENT,
        Some(&i) => {
            let v = &metadata[i].1;
            match v.as_u64() {
                Some(a) if a.is_power_of_two() && a <= MAX_ALIGNMENT => a,
                _ => {
                    return Err(malformed(format!(
                        "general.alignment is {v:?}, expected a power of two of at most {MAX_ALIGNMENT}"
                    )))
                }
            }
        }
    };

    let mut tensors = Vec::with_capacity(n_tensors as usize);
    let mut tensor_index = HashMap::with_capacity(n_tensors as usize);
    for i in 0..n_tensors {
        let name = cur.string(&|| format!("tensor {i} name"))?;
        let what = |field: &str| format!("tensor '{name}' {field}");
        let n_dims = cur.u32(&|| what("dimension count"))?;
        if n_dims as usize > MAX_DIMS {
            return Err(malformed(format!(
                "tensor '{name}': {n_dims} dimensions exceeds the ggml maximum of {MAX_DIMS}"
            )));
        }
        let mut dims = Vec::with_capacity(n_dims as usize);
        for d in 0..n_dims {
            dims.push(cur.u64(&|| what(&format!("dim {d}")))?);
        }
        let type_id = cur.u32(&|| what("type"))?;
        let ggml_type = GgmlType::from_id(type_id)
            .ok_or_else(|| malformed(format!("tensor '{name}': unknown ggml type id {type_id}")))?;
        let offset = cur.u64(&|| what("offset"))?;
        let n_bytes = tensor_n_bytes(&name, &dims, ggml_type)?;
        if offset % alignment != 0 {
            return Err(malformed(format!(
                "tensor '{name}': offset {offset} is not a multiple of the alignment {alignment}"
            )));
        }
        if tensor_index.insert(name.clone(), tensors.len()).is_some() {
            return Err(malformed(format!(
                "tensor name '{name}' appears more than once"
            )));
        }
        tensors.push(TensorInfo {
            name,
            dims,
            ggml_type,
            offset,
            n_bytes,
        });
    }

    let directory_end = cur.pos as u64;
    // The data section starts at the next multiple of the alignment (may equal the file end
    // when there are no tensors or all are empty).
    let data_start = directory_end.div_ceil(alignment) * alignment;
    let file_len = bytes.len() as u64;
    if !tensors.is_empty() && data_start > file_len {
        return Err(malformed(format!(
            "data section starts at byte {data_start} but the file has {file_len} bytes"
        )));
    }
    check_tensor_ranges(&tensors, data_start, file_len)?;

    Ok(Header {
        version,
        metadata,
        metadata_index,
        tensors,
        tensor_index,
        alignment,
        data_start,
    })
}

/// Bytes of a tensor: whole blocks along `dims[0]`, times the other dims, overflow-checked.
fn tensor_n_bytes(name: &str, dims: &[u64], ty: GgmlType) -> Result<u64> {
    // ggml stores sizes as int64, so every dim and the element count must fit in i64.
    let mut n_elements: u64 = 1;
    for (d, &size) in dims.iter().enumerate() {
        n_elements = n_elements
            .checked_mul(size)
            .filter(|&n| n <= i64::MAX as u64)
            .ok_or_else(|| {
                malformed(format!(
                    "tensor '{name}': dims {dims:?} overflow the element count at dim {d} \
                     (limit {})",
                    i64::MAX
                ))
            })?;
    }
    let row_len = dims.first().copied().unwrap_or(1);
    let row_bytes = usize::try_from(row_len)
        .ok()
        .and_then(|n| ty.row_bytes(n))
        .ok_or_else(|| {
            malformed(format!(
                "tensor '{name}': dim 0 is {row_len}, not a multiple of the {ty} block size {}",
                ty.block_size()
            ))
        })? as u64;
    let rows: u64 = dims.iter().skip(1).product(); // bounded by n_elements above
    row_bytes.checked_mul(rows).ok_or_else(|| {
        malformed(format!(
            "tensor '{name}': size of dims {dims:?} as {ty} overflows 64 bits"
        ))
    })
}

/// Every tensor lies inside the file and no two overlap.
fn check_tensor_ranges(tensors: &[TensorInfo], data_start: u64, file_len: u64) -> Result<()> {
    let mut ranges = Vec::with_capacity(tensors.len());
    for t in tensors {
        let end = data_start
            .checked_add(t.offset)
            .and_then(|s| s.checked_add(t.n_bytes))
            .filter(|&end| end <= file_len)
            .ok_or_else(|| {
                malformed(format!(
                    "tensor '{}': data ends at byte {} but the file has {file_len} bytes",
                    t.name,
                    (data_start as u128) + (t.offset as u128) + (t.n_bytes as u128)
                ))
            })?;
        if t.n_bytes > 0 {
            ranges.push((data_start + t.offset, end, t.name.as_str()));
        }
    }
    ranges.sort_unstable();
    for pair in ranges.windows(2) {
        let ((_, a_end, a), (b_start, _, b)) = (pair[0], pair[1]);
        if b_start < a_end {
            return Err(malformed(format!(
                "tensor '{b}' starts at byte {b_start}, inside tensor '{a}' which ends at \
                 byte {a_end}"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
