//! safetensors files, single and sharded, validated before any tensor is read.
//!
//! Layout: u64 little-endian header length `n`, `n` bytes of JSON header
//! (`{"name": {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {..}}`), then
//! the data, which `data_offsets` index. Tensor data is handed out as zero-copy byte slices;
//! they are not necessarily aligned for their element type.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::error::{malformed, FormatError, Result};
use crate::json::UniqueMap;
use crate::mapped::{map_file, read_text, Bytes};

/// Largest header accepted, as the reference implementation does (100 MB).
pub const MAX_HEADER_BYTES: u64 = 100_000_000;
/// File name of a sharded checkpoint's index.
pub const INDEX_FILE: &str = "model.safetensors.index.json";
/// File name of a single-file checkpoint.
pub const SINGLE_FILE: &str = "model.safetensors";

/// Element types a safetensors header may name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dtype {
    /// Booleans, one byte each.
    Bool,
    /// Unsigned 8-bit integers.
    U8,
    /// Signed 8-bit integers.
    I8,
    /// Unsigned 16-bit integers.
    U16,
    /// Signed 16-bit integers.
    I16,
    /// IEEE half precision.
    F16,
    /// bfloat16.
    BF16,
    /// Unsigned 32-bit integers.
    U32,
    /// Signed 32-bit integers.
    I32,
    /// IEEE single precision.
    F32,
    /// Unsigned 64-bit integers.
    U64,
    /// Signed 64-bit integers.
    I64,
    /// IEEE double precision.
    F64,
}

impl Dtype {
    const ALL: [Dtype; 13] = [
        Dtype::Bool,
        Dtype::U8,
        Dtype::I8,
        Dtype::U16,
        Dtype::I16,
        Dtype::F16,
        Dtype::BF16,
        Dtype::U32,
        Dtype::I32,
        Dtype::F32,
        Dtype::U64,
        Dtype::I64,
        Dtype::F64,
    ];

    /// The header's name for this type (`"F32"`, `"BOOL"`...).
    pub fn name(self) -> &'static str {
        match self {
            Dtype::Bool => "BOOL",
            Dtype::U8 => "U8",
            Dtype::I8 => "I8",
            Dtype::U16 => "U16",
            Dtype::I16 => "I16",
            Dtype::F16 => "F16",
            Dtype::BF16 => "BF16",
            Dtype::U32 => "U32",
            Dtype::I32 => "I32",
            Dtype::F32 => "F32",
            Dtype::U64 => "U64",
            Dtype::I64 => "I64",
            Dtype::F64 => "F64",
        }
    }

    /// The type a header names, if supported.
    pub fn from_name(name: &str) -> Option<Dtype> {
        Dtype::ALL.into_iter().find(|d| d.name() == name)
    }

    /// Bytes per element.
    pub fn size_bytes(self) -> usize {
        match self {
            Dtype::Bool | Dtype::U8 | Dtype::I8 => 1,
            Dtype::U16 | Dtype::I16 | Dtype::F16 | Dtype::BF16 => 2,
            Dtype::U32 | Dtype::I32 | Dtype::F32 => 4,
            Dtype::U64 | Dtype::I64 | Dtype::F64 => 8,
        }
    }
}

/// One tensor in a safetensors header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorEntry {
    /// Tensor name, e.g. `model.layers.0.self_attn.q_proj.weight`.
    pub name: String,
    /// Element type.
    pub dtype: Dtype,
    /// Sizes, outermost first (PyTorch order).
    pub shape: Vec<usize>,
    /// Absolute byte range in the file.
    start: usize,
    end: usize,
}

/// A tensor's type, shape and bytes, borrowed from its file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TensorView<'a> {
    /// Element type.
    pub dtype: Dtype,
    /// Sizes, outermost first.
    pub shape: &'a [usize],
    /// Little-endian element bytes, `shape.product() * dtype.size_bytes()` long.
    pub data: &'a [u8],
}

/// A validated safetensors file.
pub struct SafetensorsFile {
    bytes: Bytes,
    entries: Vec<TensorEntry>,
    index: HashMap<String, usize>,
    metadata: Vec<(String, String)>,
}

impl std::fmt::Debug for SafetensorsFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SafetensorsFile")
            .field("n_tensors", &self.entries.len())
            .field("metadata", &self.metadata)
            .finish()
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEntry {
    dtype: String,
    shape: Vec<u64>,
    data_offsets: [u64; 2],
}

impl SafetensorsFile {
    /// Maps and validates the safetensors file at `path`. Errors name the file.
    pub fn open(path: &Path) -> Result<SafetensorsFile> {
        SafetensorsFile::parse(map_file(path)?).map_err(|e| e.in_file(path))
    }

    /// Validates a safetensors file held in memory.
    pub fn from_bytes(bytes: Vec<u8>) -> Result<SafetensorsFile> {
        SafetensorsFile::parse(Bytes::Owned(bytes))
    }

    /// Tensors in the order their data lies in the file.
    pub fn entries(&self) -> &[TensorEntry] {
        &self.entries
    }

    /// The `__metadata__` string pairs, in header order.
    pub fn metadata(&self) -> &[(String, String)] {
        &self.metadata
    }

    /// The tensor named `name`, without copying its data.
    pub fn tensor(&self, name: &str) -> Option<TensorView<'_>> {
        let entry = &self.entries[*self.index.get(name)?];
        Some(TensorView {
            dtype: entry.dtype,
            shape: &entry.shape,
            // In range: checked at parse time.
            data: &self.bytes.as_slice()[entry.start..entry.end],
        })
    }

    fn parse(bytes: Bytes) -> Result<SafetensorsFile> {
        let (entries, metadata) = parse_header(bytes.as_slice())?;
        let index = entries
            .iter()
            .enumerate()
            .map(|(i, e)| (e.name.clone(), i))
            .collect();
        Ok(SafetensorsFile {
            bytes,
            entries,
            index,
            metadata,
        })
    }
}

type Header = (Vec<TensorEntry>, Vec<(String, String)>);

fn parse_header(bytes: &[u8]) -> Result<Header> {
    let file_len = bytes.len() as u64;
    let Some(len_bytes) = bytes.first_chunk::<8>() else {
        return Err(malformed(format!(
            "safetensors header length needs 8 bytes but the file has {file_len}"
        )));
    };
    let header_len = u64::from_le_bytes(*len_bytes);
    if header_len > MAX_HEADER_BYTES || header_len > file_len - 8 {
        return Err(malformed(format!(
            "safetensors header length {header_len} exceeds the limit of {} bytes \
             (file has {file_len} bytes, header limit {MAX_HEADER_BYTES})",
            (file_len - 8).min(MAX_HEADER_BYTES)
        )));
    }
    let data_start = 8 + header_len as usize;
    let data_len = bytes.len() - data_start;
    let raw: UniqueMap<serde_json::Value> =
        serde_json::from_slice(&bytes[8..data_start]).map_err(|e| {
            malformed(format!(
                "safetensors header is not a valid JSON object: {e}"
            ))
        })?;

    let mut entries = Vec::with_capacity(raw.0.len());
    let mut metadata = Vec::new();
    for (name, value) in raw.0 {
        if name == "__metadata__" {
            let map: UniqueMap<String> = serde_json::from_value(value).map_err(|e| {
                malformed(format!(
                    "safetensors __metadata__ must map strings to strings: {e}"
                ))
            })?;
            metadata = map.0;
            continue;
        }
        let raw: RawEntry = serde_json::from_value(value)
            .map_err(|e| malformed(format!("safetensors tensor '{name}': {e}")))?;
        entries.push(check_entry(name, raw, data_start, data_len)?);
    }

    entries.sort_by_key(|e| (e.start, e.end));
    for pair in entries.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        if b.start < a.end && a.start < a.end && b.start < b.end {
            return Err(malformed(format!(
                "safetensors tensor '{}' (bytes {}..{}) overlaps tensor '{}' (bytes {}..{})",
                b.name,
                b.start - data_start,
                b.end - data_start,
                a.name,
                a.start - data_start,
                a.end - data_start
            )));
        }
    }
    Ok((entries, metadata))
}

fn check_entry(
    name: String,
    raw: RawEntry,
    data_start: usize,
    data_len: usize,
) -> Result<TensorEntry> {
    let dtype = Dtype::from_name(&raw.dtype).ok_or_else(|| {
        let known: Vec<_> = Dtype::ALL.iter().map(|d| d.name()).collect();
        FormatError::Unsupported(format!(
            "safetensors tensor '{name}': dtype \"{}\" (supported: {})",
            raw.dtype,
            known.join(", ")
        ))
    })?;
    let n_bytes = raw
        .shape
        .iter()
        .try_fold(dtype.size_bytes() as u64, |acc, &d| acc.checked_mul(d));
    let [begin, end] = raw.data_offsets;
    if begin > end || end > data_len as u64 {
        return Err(malformed(format!(
            "safetensors tensor '{name}': data_offsets [{begin}, {end}] outside the {data_len} \
             data bytes"
        )));
    }
    if n_bytes != Some(end - begin) {
        return Err(malformed(format!(
            "safetensors tensor '{name}': shape {:?} of {} needs {} bytes but data_offsets \
             [{begin}, {end}] hold {}",
            raw.shape,
            dtype.name(),
            n_bytes.map_or_else(|| "more than 2^64".to_string(), |n| n.to_string()),
            end - begin
        )));
    }
    // Every dim fits in usize: the byte count (>= each dim, or 0) fits in the file.
    let shape = raw
        .shape
        .iter()
        .map(|&d| usize::try_from(d))
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|_| {
            malformed(format!(
                "safetensors tensor '{name}': shape {:?} too large",
                raw.shape
            ))
        })?;
    Ok(TensorEntry {
        name,
        dtype,
        shape,
        start: data_start + begin as usize,
        end: data_start + end as usize,
    })
}

/// The parsed `model.safetensors.index.json`: which shard file holds each tensor.
#[derive(Clone, Debug, PartialEq)]
pub struct ShardIndex {
    /// Tensor name to shard file name, in file order.
    pub weight_map: Vec<(String, String)>,
}

#[derive(Deserialize)]
struct RawIndex {
    weight_map: UniqueMap<String>,
}

/// Parses a shard index, refusing duplicate tensor names and shard names that are not plain
/// file names (an index must not point outside its directory).
pub fn parse_index(text: &str) -> Result<ShardIndex> {
    let raw: RawIndex =
        serde_json::from_str(text).map_err(|e| malformed(format!("{INDEX_FILE}: {e}")))?;
    for (tensor, shard) in &raw.weight_map.0 {
        let plain = Path::new(shard)
            .file_name()
            .is_some_and(|f| f == shard.as_str())
            && shard != ".."
            && !shard.contains(['/', '\\']);
        if !plain {
            return Err(malformed(format!(
                "{INDEX_FILE}: tensor '{tensor}' maps to \"{shard}\", which is not a plain file \
                 name in the model directory"
            )));
        }
    }
    Ok(ShardIndex {
        weight_map: raw.weight_map.0,
    })
}

/// Checks that `present` holds exactly the `expected` names, reporting every missing and
/// every unexpected name together. `what` names the source for the message.
pub fn check_coverage<'a>(
    what: &str,
    expected: &[String],
    present: impl IntoIterator<Item = &'a str>,
) -> Result<()> {
    let present: BTreeSet<&str> = present.into_iter().collect();
    let expected_set: BTreeSet<&str> = expected.iter().map(String::as_str).collect();
    let missing: Vec<&str> = expected_set.difference(&present).copied().collect();
    let unexpected: Vec<&str> = present.difference(&expected_set).copied().collect();
    if missing.is_empty() && unexpected.is_empty() {
        return Ok(());
    }
    Err(malformed(format!(
        "{what}: {} missing tensor(s) {}; {} unexpected tensor(s) {}",
        missing.len(),
        list_some(&missing),
        unexpected.len(),
        list_some(&unexpected)
    )))
}

/// `[a, b, c, ... and N more]`: long name lists stay readable.
fn list_some(names: &[&str]) -> String {
    const SHOWN: usize = 12;
    let mut out = names
        .iter()
        .take(SHOWN)
        .copied()
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > SHOWN {
        out.push_str(&format!(", ... and {} more", names.len() - SHOWN));
    }
    format!("[{out}]")
}

/// A checkpoint as one set of tensors, whether stored in one file or in shards.
#[derive(Debug)]
pub struct SafetensorsModel {
    shards: Vec<(PathBuf, SafetensorsFile)>,
    location: HashMap<String, usize>,
}

impl SafetensorsModel {
    /// Opens the checkpoint in `dir`: `model.safetensors.index.json` and its shards when the
    /// index exists, else `model.safetensors`. With `expected` names, the checkpoint must hold
    /// exactly those tensors (checked on headers, before any tensor is read).
    pub fn open_dir(dir: &Path, expected: Option<&[String]>) -> Result<SafetensorsModel> {
        let index = dir.join(INDEX_FILE);
        if index.is_file() {
            SafetensorsModel::open_index(&index, expected)
        } else {
            SafetensorsModel::open_file(&dir.join(SINGLE_FILE), expected)
        }
    }

    /// Opens a single-file checkpoint.
    pub fn open_file(path: &Path, expected: Option<&[String]>) -> Result<SafetensorsModel> {
        let file = SafetensorsFile::open(path)?;
        if let Some(expected) = expected {
            let names = file.entries().iter().map(|e| e.name.as_str());
            check_coverage(&path.display().to_string(), expected, names)?;
        }
        let location = file.entries().iter().map(|e| (e.name.clone(), 0)).collect();
        Ok(SafetensorsModel {
            shards: vec![(path.to_path_buf(), file)],
            location,
        })
    }

    /// Opens a sharded checkpoint from its index file. The index must list every expected
    /// tensor exactly once, and each shard must hold exactly the tensors the index assigns it.
    pub fn open_index(index_path: &Path, expected: Option<&[String]>) -> Result<SafetensorsModel> {
        let text = read_text(index_path, MAX_HEADER_BYTES)?;
        let index = parse_index(&text).map_err(|e| e.in_file(index_path))?;
        if let Some(expected) = expected {
            let names = index.weight_map.iter().map(|(t, _)| t.as_str());
            check_coverage(&index_path.display().to_string(), expected, names)?;
        }
        let dir = index_path.parent().unwrap_or(Path::new("."));
        let mut shard_names: Vec<&str> = index.weight_map.iter().map(|(_, s)| s.as_str()).collect();
        shard_names.sort_unstable();
        shard_names.dedup();

        let mut shards = Vec::with_capacity(shard_names.len());
        let mut location = HashMap::with_capacity(index.weight_map.len());
        for (i, shard) in shard_names.iter().enumerate() {
            let path = dir.join(shard);
            let file = SafetensorsFile::open(&path)?;
            let assigned = index
                .weight_map
                .iter()
                .filter(|(_, s)| s == shard)
                .map(|(t, _)| t.clone())
                .collect::<Vec<_>>();
            let names = file.entries().iter().map(|e| e.name.as_str());
            check_coverage(
                &format!("shard {} (as assigned by {INDEX_FILE})", path.display()),
                &assigned,
                names,
            )?;
            for name in assigned {
                location.insert(name, i);
            }
            shards.push((path, file));
        }
        Ok(SafetensorsModel { shards, location })
    }

    /// Every tensor name, sorted.
    pub fn tensor_names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.location.keys().map(String::as_str).collect();
        names.sort_unstable();
        names
    }

    /// The tensor named `name`.
    pub fn tensor(&self, name: &str) -> Option<TensorView<'_>> {
        self.shards[*self.location.get(name)?].1.tensor(name)
    }

    /// The file holding `name`.
    pub fn file_of(&self, name: &str) -> Option<&Path> {
        Some(&self.shards[*self.location.get(name)?].0)
    }
}

#[cfg(test)]
mod tests;
