//! Rewriting a model as a GGUF file of other tensor types (`torchnative quantize`).
//!
//! Input: a GGUF file, or a Hugging Face safetensors directory / cached repo id (see below).
//! Each tensor is converted once: its source data is
//! dequantized to f32, then quantized to the type [`choose_types`] picks (llama.cpp's choice for
//! the file type); tensors whose type does not change are copied byte for byte. All metadata is
//! copied, `general.file_type` and `general.quantization_version` are set, alignment is kept.
//! The output is written to a temporary file in the destination's directory and renamed into
//! place only when complete, so a failure never leaves a partial file under the output name.
//!
//! # Hugging Face input
//!
//! A safetensors checkpoint of a llama/mistral/qwen2/qwen3 model becomes a GGUF with llama.cpp's
//! tensor names (q/k rows permuted for llama and mistral, as llama.cpp's converter does) and
//! metadata built from config.json, generation_config.json, tokenizer.json and
//! tokenizer_config.json. Byte-level BPE tokenizers with a pre-tokenizer llama.cpp names
//! convert; SentencePiece-style ones, other pre-tokenizers, llama3/dynamic RoPE scaling and
//! non-float weights are refused with an error saying so (`hf.rs` has the details).

mod hf;
mod mix;

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rayon::prelude::*;
use torchnative_quant::{dequantize, quantize, supports_dequantize, GgmlType};

use crate::error::{FormatError, Result};
use crate::gguf::{write_gguf_streaming, GgufFile, MetadataValue, TensorHeader};
use crate::hub::{resolve_model, ModelLocation};
pub use mix::{choose_types, is_converted, TypeChoice};

/// The file types `quantize` writes, named as llama-quantize names them (lower case).
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileType {
    /// All matrices F32.
    F32,
    /// All matrices F16.
    F16,
    /// All matrices BF16.
    BF16,
    /// Q4_0 (token embedding / output Q6_K or Q8_0).
    Q4_0,
    /// Q4_1.
    Q4_1,
    /// Q5_0.
    Q5_0,
    /// Q5_1.
    Q5_1,
    /// Q8_0.
    Q8_0,
    /// Q4_K, small mixture.
    Q4_K_S,
    /// Q4_K with Q6_K for part of attn_v / ffn_down.
    Q4_K_M,
    /// Q5_K, small mixture.
    Q5_K_S,
    /// Q5_K with Q6_K for part of attn_v / ffn_down.
    Q5_K_M,
    /// Q6_K.
    Q6_K,
}

impl FileType {
    /// Every supported file type.
    pub const ALL: [FileType; 13] = [
        FileType::F32,
        FileType::F16,
        FileType::BF16,
        FileType::Q4_0,
        FileType::Q4_1,
        FileType::Q5_0,
        FileType::Q5_1,
        FileType::Q8_0,
        FileType::Q4_K_S,
        FileType::Q4_K_M,
        FileType::Q5_K_S,
        FileType::Q5_K_M,
        FileType::Q6_K,
    ];

    /// Lower-case name (`q4_k_m`).
    pub fn name(self) -> &'static str {
        use FileType::*;
        match self {
            F32 => "f32",
            F16 => "f16",
            BF16 => "bf16",
            Q4_0 => "q4_0",
            Q4_1 => "q4_1",
            Q5_0 => "q5_0",
            Q5_1 => "q5_1",
            Q8_0 => "q8_0",
            Q4_K_S => "q4_k_s",
            Q4_K_M => "q4_k_m",
            Q5_K_S => "q5_k_s",
            Q5_K_M => "q5_k_m",
            Q6_K => "q6_k",
        }
    }

    /// Parses a name, case-insensitively; `q4_k` and `q5_k` mean the `_m` mixtures, as in
    /// llama-quantize. An unknown name is an error listing the supported ones.
    pub fn parse(name: &str) -> Result<FileType> {
        let lower = name.to_ascii_lowercase();
        let lower = match lower.as_str() {
            "q4_k" => "q4_k_m",
            "q5_k" => "q5_k_m",
            other => other,
        };
        FileType::ALL
            .into_iter()
            .find(|t| t.name() == lower)
            .ok_or_else(|| {
                let names: Vec<&str> = FileType::ALL.iter().map(|t| t.name()).collect();
                FormatError::Unsupported(format!(
                    "quantization type '{name}'; supported: {}",
                    names.join(", ")
                ))
            })
    }

    /// llama.cpp's `llama_ftype` id, stored as `general.file_type`.
    pub fn llama_ftype(self) -> u32 {
        use FileType::*;
        match self {
            F32 => 0,
            F16 => 1,
            Q4_0 => 2,
            Q4_1 => 3,
            Q8_0 => 7,
            Q5_0 => 8,
            Q5_1 => 9,
            Q4_K_S => 14,
            Q4_K_M => 15,
            Q5_K_S => 16,
            Q5_K_M => 17,
            Q6_K => 18,
            BF16 => 32,
        }
    }

    /// The type most matrices get.
    pub fn base_type(self) -> GgmlType {
        use FileType::*;
        match self {
            F32 => GgmlType::F32,
            F16 => GgmlType::F16,
            BF16 => GgmlType::BF16,
            Q4_0 => GgmlType::Q4_0,
            Q4_1 => GgmlType::Q4_1,
            Q5_0 => GgmlType::Q5_0,
            Q5_1 => GgmlType::Q5_1,
            Q8_0 => GgmlType::Q8_0,
            Q4_K_S | Q4_K_M => GgmlType::Q4_K,
            Q5_K_S | Q5_K_M => GgmlType::Q5_K,
            Q6_K => GgmlType::Q6_K,
        }
    }

    fn is_mixture(self) -> bool {
        use FileType::*;
        matches!(self, Q4_K_S | Q4_K_M | Q5_K_S | Q5_K_M)
    }
}

impl std::fmt::Display for FileType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What to write.
#[derive(Clone, Debug)]
pub struct QuantizeOptions {
    /// The file type.
    pub file_type: FileType,
    /// Replace an existing output file (otherwise an existing output is an error).
    pub overwrite: bool,
    /// Worker threads for the conversion (default: rayon's, all cores).
    pub threads: Option<usize>,
}

/// One tensor converted, reported as it completes.
#[derive(Clone, Debug)]
pub struct Progress<'a> {
    /// Tensors completed so far (1-based for this one).
    pub done: usize,
    /// All tensors.
    pub total: usize,
    /// GGUF name of the tensor just written.
    pub name: &'a str,
    /// Its source type.
    pub from: GgmlType,
    /// Its output type.
    pub to: GgmlType,
}

/// What `quantize_model` did.
#[derive(Clone, Debug)]
pub struct QuantizeReport {
    /// The input as resolved (a GGUF file or a safetensors directory).
    pub input: PathBuf,
    /// Tensors written.
    pub tensors: usize,
    /// Size of the input's tensor data.
    pub bytes_in: u64,
    /// Size of the output file.
    pub bytes_out: u64,
    /// Output types and how many tensors have each, in first-seen order.
    pub type_counts: Vec<(GgmlType, usize)>,
    /// Quantized source types that were dequantized and quantized to another type (the output
    /// cannot be better than these).
    pub requantized_from: Vec<GgmlType>,
    /// Tensors whose row length forced a fallback type: (name, wanted, got).
    pub fallbacks: Vec<(String, GgmlType, GgmlType)>,
    /// Wall time of the conversion.
    pub elapsed: Duration,
}

/// A tensor of the source in GGUF terms.
struct SourceTensor {
    name: String,
    dims: Vec<u64>,
    ty: GgmlType,
}

/// The model being converted: GGUF metadata and tensors, whatever the input format.
enum Source {
    Gguf(GgufFile),
    Hf(hf::HfSource),
}

impl Source {
    fn open(location: &ModelLocation) -> Result<Source> {
        match location {
            ModelLocation::Gguf(path) => Ok(Source::Gguf(GgufFile::open(path)?)),
            ModelLocation::HfDirectory(dir) => Ok(Source::Hf(hf::HfSource::open(dir)?)),
        }
    }

    fn metadata(&self) -> Vec<(String, MetadataValue)> {
        match self {
            Source::Gguf(f) => f.metadata().to_vec(),
            Source::Hf(h) => h.metadata().to_vec(),
        }
    }

    fn tensors(&self) -> Vec<SourceTensor> {
        match self {
            Source::Gguf(f) => f
                .tensors()
                .iter()
                .map(|t| SourceTensor {
                    name: t.name.clone(),
                    dims: t.dims.clone(),
                    ty: t.ggml_type,
                })
                .collect(),
            Source::Hf(h) => h.tensors(),
        }
    }

    /// The data of tensor `i` (of `tensors()`), in its source type.
    fn data(&self, i: usize) -> Result<Cow<'_, [u8]>> {
        match self {
            Source::Gguf(f) => Ok(Cow::Borrowed(f.tensor_data(&f.tensors()[i]))),
            Source::Hf(h) => h.data(i),
        }
    }

    fn bytes_in(&self) -> u64 {
        match self {
            Source::Gguf(f) => f.tensors().iter().map(|t| t.n_bytes).sum(),
            Source::Hf(h) => h.bytes_in(),
        }
    }

    fn n_layers(&self, metadata: &[(String, MetadataValue)]) -> Result<usize> {
        let get = |k: &str| metadata.iter().find(|(key, _)| key == k).map(|(_, v)| v);
        let arch = get("general.architecture")
            .and_then(|v| v.as_str())
            .ok_or_else(|| FormatError::NotFound("GGUF key general.architecture".into()))?;
        let experts = get(&format!("{arch}.expert_count")).and_then(|v| v.as_u64());
        if experts.unwrap_or(0) > 1 {
            return Err(FormatError::Unsupported(format!(
                "{arch}.expert_count = {}: llama.cpp's type mixtures for mixture-of-experts \
                 models are not implemented",
                experts.unwrap_or(0)
            )));
        }
        let key = format!("{arch}.block_count");
        get(&key)
            .and_then(|v| v.as_u64())
            .map(|n| n as usize)
            .ok_or_else(|| FormatError::NotFound(format!("GGUF key {key}")))
    }
}

/// Sets `key` to `value`, in place when present, else appended.
fn set_metadata(metadata: &mut Vec<(String, MetadataValue)>, key: &str, value: MetadataValue) {
    match metadata.iter_mut().find(|(k, _)| k == key) {
        Some(slot) => slot.1 = value,
        None => metadata.push((key.to_string(), value)),
    }
}

/// Removes the temporary output unless the write completed.
struct TempFile {
    path: PathBuf,
    keep: bool,
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Converts `tensor` from `from` to `to` (dequantize to f32, quantize), rows split over the
/// thread pool.
fn convert(name: &str, data: &[u8], row: usize, from: GgmlType, to: GgmlType) -> Result<Vec<u8>> {
    let err = |what: &str, e: torchnative_quant::QuantError| {
        FormatError::Unsupported(format!("tensor '{name}': {what}: {e}"))
    };
    if !supports_dequantize(from) {
        return Err(FormatError::Unsupported(format!(
            "tensor '{name}' is {from}, which cannot be converted (no dequantization)"
        )));
    }
    let (src_row, dst_row) = match (from.row_bytes(row), to.row_bytes(row)) {
        (Some(s), Some(d)) if s > 0 => (s, d),
        _ => {
            return Err(FormatError::Malformed(format!(
                "tensor '{name}': row of {row} elements does not fit {from} -> {to}"
            )))
        }
    };
    let rows = data.len() / src_row;
    // About 64 Ki elements per work item.
    let rows_per_chunk = (65536 / row).max(1);
    let mut out = vec![0u8; rows * dst_row];
    data.par_chunks(rows_per_chunk * src_row)
        .zip(out.par_chunks_mut(rows_per_chunk * dst_row))
        .try_for_each(|(src, dst)| {
            let mut f = vec![0f32; src.len() / src_row * row];
            dequantize(from, src, &mut f).map_err(|e| err("dequantize", e))?;
            quantize(to, &f, dst).map_err(|e| err("quantize", e))
        })?;
    Ok(out)
}

/// Writes `output`, a GGUF of `input` (a `.gguf` path, safetensors directory or cached repo id)
/// with tensor types for `options.file_type`. `progress` is called after each tensor.
pub fn quantize_model(
    input: &str,
    output: &Path,
    options: &QuantizeOptions,
    progress: &mut dyn FnMut(Progress<'_>),
) -> Result<QuantizeReport> {
    let start = Instant::now();
    let location = resolve_model(input)?;
    if output.exists() && !options.overwrite {
        return Err(FormatError::io(
            output,
            std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                "output already exists (not overwritten unless asked to: --force)",
            ),
        ));
    }
    let source = Source::open(&location)?;
    let mut metadata = source.metadata();
    let tensors = source.tensors();
    let n_layers = if options.file_type.is_mixture() {
        source.n_layers(&metadata)?
    } else {
        source.n_layers(&metadata).unwrap_or(0)
    };
    let dir: Vec<(&str, &[u64], GgmlType)> = tensors
        .iter()
        .map(|t| (t.name.as_str(), t.dims.as_slice(), t.ty))
        .collect();
    let choices = choose_types(&dir, n_layers, options.file_type);

    set_metadata(
        &mut metadata,
        "general.quantization_version",
        MetadataValue::U32(2),
    );
    set_metadata(
        &mut metadata,
        "general.file_type",
        MetadataValue::U32(options.file_type.llama_ftype()),
    );
    metadata.retain(|(k, _)| !k.starts_with("split."));

    let headers: Vec<TensorHeader> = tensors
        .iter()
        .zip(&choices)
        .map(|(t, c)| TensorHeader {
            name: t.name.clone(),
            dims: t.dims.clone(),
            ggml_type: c.ty,
        })
        .collect();

    let parent = match output.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let file_name = output
        .file_name()
        .ok_or_else(|| FormatError::NotFound(format!("{}: not a file name", output.display())))?;
    let mut temp = TempFile {
        path: parent.join(format!(
            ".{}.tmp-{}",
            file_name.to_string_lossy(),
            std::process::id()
        )),
        keep: false,
    };

    let pool = match options.threads {
        Some(n) => Some(
            rayon::ThreadPoolBuilder::new()
                .num_threads(n.max(1))
                .build()
                .map_err(|e| FormatError::Unsupported(format!("thread pool: {e}")))?,
        ),
        None => None,
    };
    let total = tensors.len();
    let mut requantized_from: Vec<GgmlType> = Vec::new();
    write_gguf_streaming(&temp.path, &metadata, &headers, |i| {
        let t = &tensors[i];
        let to = choices[i].ty;
        let data = source.data(i)?;
        let bytes = if t.ty == to {
            data.into_owned()
        } else {
            if t.ty.is_quantized() && !requantized_from.contains(&t.ty) {
                requantized_from.push(t.ty);
            }
            let run = || convert(&t.name, &data, t.dims[0] as usize, t.ty, to);
            match &pool {
                Some(p) => p.install(run)?,
                None => run()?,
            }
        };
        progress(Progress {
            done: i + 1,
            total,
            name: &t.name,
            from: t.ty,
            to,
        });
        Ok(bytes)
    })?;
    std::fs::rename(&temp.path, output).map_err(|e| FormatError::io(output, e))?;
    temp.keep = true;

    let mut type_counts: Vec<(GgmlType, usize)> = Vec::new();
    for c in &choices {
        match type_counts.iter_mut().find(|(t, _)| *t == c.ty) {
            Some(slot) => slot.1 += 1,
            None => type_counts.push((c.ty, 1)),
        }
    }
    let fallbacks = tensors
        .iter()
        .zip(&choices)
        .filter_map(|(t, c)| c.fallback_from.map(|w| (t.name.clone(), w, c.ty)))
        .collect();
    let bytes_out = std::fs::metadata(output)
        .map_err(|e| FormatError::io(output, e))?
        .len();
    Ok(QuantizeReport {
        input: match location {
            ModelLocation::Gguf(p) | ModelLocation::HfDirectory(p) => p,
        },
        tensors: total,
        bytes_in: source.bytes_in(),
        bytes_out,
        type_counts,
        requantized_from,
        fallbacks,
        elapsed: start.elapsed(),
    })
}
