//! GGUF v3 writer: the inverse of the reader, validated the same way.
use std::collections::HashSet;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use torchnative_quant::GgmlType;

use super::value::{MetadataValue, ValueType};
use super::{tensor_n_bytes, DEFAULT_ALIGNMENT, GGUF_MAGIC, MAX_ARRAY_DEPTH, MAX_DIMS};
use crate::error::{malformed, FormatError, Result};

/// A tensor to store: its name, ggml-order dims, type and already-encoded data.
#[derive(Clone, Debug)]
pub struct TensorToWrite<'a> {
    /// Tensor name, unique within the file.
    pub name: String,
    /// Sizes in ggml order (`dims[0]` innermost).
    pub dims: Vec<u64>,
    /// Type of `data`.
    pub ggml_type: GgmlType,
    /// Encoded bytes; must be exactly the size `dims` and `ggml_type` imply.
    pub data: &'a [u8],
}

/// Encodes a GGUF v3 file in memory. The alignment is `general.alignment` when `metadata`
/// holds it, else 32. Metadata and tensors keep the given order.
pub fn gguf_bytes(
    metadata: &[(String, MetadataValue)],
    tensors: &[TensorToWrite<'_>],
) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    write_to(&mut out, metadata, tensors).map_err(|e| match e {
        WriteError::Format(f) => f,
        // Writing to a Vec cannot fail.
        WriteError::Io(io) => malformed(format!("in-memory write failed: {io}")),
    })?;
    Ok(out)
}

/// Writes a GGUF v3 file to `path` (see [`gguf_bytes`]), streaming tensor data.
pub fn write_gguf(
    path: &Path,
    metadata: &[(String, MetadataValue)],
    tensors: &[TensorToWrite<'_>],
) -> Result<()> {
    let file = File::create(path).map_err(|e| FormatError::io(path, e))?;
    let mut w = BufWriter::new(file);
    let result = write_to(&mut w, metadata, tensors).and_then(|()| Ok(w.flush()?));
    result.map_err(|e| match e {
        WriteError::Format(f) => f.in_file(path),
        WriteError::Io(io) => FormatError::io(path, io),
    })
}

enum WriteError {
    Format(FormatError),
    Io(std::io::Error),
}

impl From<std::io::Error> for WriteError {
    fn from(e: std::io::Error) -> Self {
        WriteError::Io(e)
    }
}

impl From<FormatError> for WriteError {
    fn from(e: FormatError) -> Self {
        WriteError::Format(e)
    }
}

/// A tensor's directory entry for [`write_gguf_streaming`], whose data is produced later.
#[derive(Clone, Debug)]
pub struct TensorHeader {
    /// Tensor name, unique within the file.
    pub name: String,
    /// Sizes in ggml order (`dims[0]` innermost).
    pub dims: Vec<u64>,
    /// Type the data will have.
    pub ggml_type: GgmlType,
}

/// Writes a GGUF v3 file to `path` whose tensor data is produced one tensor at a time:
/// `data(i)` is called in order for each tensor of `tensors` and must return exactly the bytes
/// its dims and type imply. Only one tensor's data is held at a time. Metadata and directory are
/// validated (as by [`gguf_bytes`]) before anything is written; an error from `data` stops the
/// write and is returned (the partial file is left for the caller to remove).
pub fn write_gguf_streaming(
    path: &Path,
    metadata: &[(String, MetadataValue)],
    tensors: &[TensorHeader],
    mut data: impl FnMut(usize) -> Result<Vec<u8>>,
) -> Result<()> {
    let dir: Vec<(&str, &[u64], GgmlType)> = tensors
        .iter()
        .map(|t| (t.name.as_str(), t.dims.as_slice(), t.ggml_type))
        .collect();
    let (header, alignment, sizes) = layout(metadata, &dir)?;
    let file = File::create(path).map_err(|e| FormatError::io(path, e))?;
    let mut w = BufWriter::new(file);
    let io = |e| FormatError::io(path, e);
    w.write_all(&header).map_err(io)?;
    for (i, (t, &size)) in tensors.iter().zip(&sizes).enumerate() {
        let bytes = data(i)?;
        if bytes.len() as u64 != size {
            return Err(malformed(format!(
                "tensor '{}': {} bytes of data but dims {:?} as {} need {size}",
                t.name,
                bytes.len(),
                t.dims,
                t.ggml_type
            )));
        }
        write_padded(&mut w, &bytes, alignment).map_err(io)?;
    }
    w.flush().map_err(io)
}

fn write_to(
    w: &mut impl Write,
    metadata: &[(String, MetadataValue)],
    tensors: &[TensorToWrite<'_>],
) -> std::result::Result<(), WriteError> {
    let dir: Vec<(&str, &[u64], GgmlType)> = tensors
        .iter()
        .map(|t| (t.name.as_str(), t.dims.as_slice(), t.ggml_type))
        .collect();
    let (header, alignment, sizes) = layout(metadata, &dir)?;
    for (t, &size) in tensors.iter().zip(&sizes) {
        if size != t.data.len() as u64 {
            return Err(malformed(format!(
                "tensor '{}': {} bytes of data but dims {:?} as {} need {size}",
                t.name,
                t.data.len(),
                t.dims,
                t.ggml_type
            ))
            .into());
        }
    }
    w.write_all(&header)?;
    for t in tensors {
        write_padded(w, t.data, alignment)?;
    }
    Ok(())
}

fn write_padded(w: &mut impl Write, data: &[u8], alignment: u64) -> std::io::Result<()> {
    w.write_all(data)?;
    let pad = (data.len() as u64).next_multiple_of(alignment) - data.len() as u64;
    w.write_all(&vec![0u8; pad as usize])
}

/// Validates metadata and the tensor directory and encodes everything before the data section
/// (padded to the alignment). Returns that header, the alignment and each tensor's data size.
fn layout(
    metadata: &[(String, MetadataValue)],
    tensors: &[(&str, &[u64], GgmlType)],
) -> Result<(Vec<u8>, u64, Vec<u64>)> {
    let alignment = alignment_of(metadata)?;
    let mut keys = HashSet::new();
    for (key, value) in metadata {
        if !keys.insert(key.as_str()) {
            return Err(malformed(format!(
                "metadata key '{key}' given more than once"
            )));
        }
        check_value(key, value, 0)?;
    }

    // Validate every tensor and lay out offsets before writing a byte.
    let mut names = HashSet::new();
    let mut offsets = Vec::with_capacity(tensors.len());
    let mut sizes = Vec::with_capacity(tensors.len());
    let mut next_offset: u64 = 0;
    for &(name, dims, ty) in tensors {
        if !names.insert(name) {
            return Err(malformed(format!(
                "tensor name '{name}' given more than once"
            )));
        }
        if dims.len() > MAX_DIMS {
            return Err(malformed(format!(
                "tensor '{name}': {} dimensions exceeds the ggml maximum of {MAX_DIMS}",
                dims.len()
            )));
        }
        let n_bytes = tensor_n_bytes(name, dims, ty)?;
        offsets.push(next_offset);
        sizes.push(n_bytes);
        next_offset = next_offset
            .checked_add(n_bytes)
            .and_then(|e| e.checked_next_multiple_of(alignment))
            .ok_or_else(|| malformed("total tensor data size overflows 64 bits"))?;
    }

    let mut header = Vec::new();
    header.extend_from_slice(&GGUF_MAGIC.to_le_bytes());
    header.extend_from_slice(&3u32.to_le_bytes());
    header.extend_from_slice(&(tensors.len() as u64).to_le_bytes());
    header.extend_from_slice(&(metadata.len() as u64).to_le_bytes());
    for (key, value) in metadata {
        put_string(&mut header, key);
        header.extend_from_slice(&(value.value_type() as u32).to_le_bytes());
        put_value(&mut header, value);
    }
    for (&(name, dims, ty), offset) in tensors.iter().zip(&offsets) {
        put_string(&mut header, name);
        header.extend_from_slice(&(dims.len() as u32).to_le_bytes());
        for d in dims {
            header.extend_from_slice(&d.to_le_bytes());
        }
        header.extend_from_slice(&ty.id().to_le_bytes());
        header.extend_from_slice(&offset.to_le_bytes());
    }
    pad_to(&mut header, alignment);
    Ok((header, alignment, sizes))
}

fn alignment_of(metadata: &[(String, MetadataValue)]) -> Result<u64> {
    match metadata.iter().find(|(k, _)| k == "general.alignment") {
        None => Ok(DEFAULT_ALIGNMENT),
        Some((_, v)) => match v {
            // The reader accepts any integer type, but the spec and llama.cpp want u32.
            MetadataValue::U32(a) if a.is_power_of_two() => Ok(u64::from(*a)),
            _ => Err(malformed(format!(
                "general.alignment is {v:?}, expected a u32 power of two"
            ))),
        },
    }
}

/// Arrays must be homogeneous (the format stores one element type) and not too deep.
fn check_value(key: &str, value: &MetadataValue, depth: usize) -> Result<()> {
    let MetadataValue::Array(items) = value else {
        return Ok(());
    };
    if depth >= MAX_ARRAY_DEPTH {
        return Err(malformed(format!(
            "metadata key '{key}': arrays nested deeper than {MAX_ARRAY_DEPTH} levels"
        )));
    }
    if let Some(first) = items.first() {
        let ty = first.value_type();
        if let Some((i, other)) = items.iter().enumerate().find(|(_, v)| v.value_type() != ty) {
            return Err(malformed(format!(
                "metadata key '{key}': array element {i} is {} but element 0 is {}",
                other.type_name(),
                first.type_name()
            )));
        }
    }
    items
        .iter()
        .try_for_each(|v| check_value(key, v, depth + 1))
}

fn put_string(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn put_value(out: &mut Vec<u8>, value: &MetadataValue) {
    use MetadataValue as V;
    match value {
        V::U8(v) => out.push(*v),
        V::I8(v) => out.extend_from_slice(&v.to_le_bytes()),
        V::U16(v) => out.extend_from_slice(&v.to_le_bytes()),
        V::I16(v) => out.extend_from_slice(&v.to_le_bytes()),
        V::U32(v) => out.extend_from_slice(&v.to_le_bytes()),
        V::I32(v) => out.extend_from_slice(&v.to_le_bytes()),
        V::U64(v) => out.extend_from_slice(&v.to_le_bytes()),
        V::I64(v) => out.extend_from_slice(&v.to_le_bytes()),
        V::F32(v) => out.extend_from_slice(&v.to_le_bytes()),
        V::F64(v) => out.extend_from_slice(&v.to_le_bytes()),
        V::Bool(v) => out.push(u8::from(*v)),
        V::String(s) => put_string(out, s),
        V::Array(items) => {
            // gguf-py writes empty arrays as u8 arrays; do the same.
            let elem = items.first().map_or(ValueType::U8, |v| v.value_type());
            out.extend_from_slice(&(elem as u32).to_le_bytes());
            out.extend_from_slice(&(items.len() as u64).to_le_bytes());
            for item in items {
                put_value(out, item);
            }
        }
    }
}

fn pad_to(out: &mut Vec<u8>, alignment: u64) {
    let target = (out.len() as u64).next_multiple_of(alignment) as usize;
    out.resize(target, 0);
}
