//! Weights as the kernels read them, and the checkpoint they come from.
//!
//! A [`Linear`] weight is either owned dense data (f32 / f16 / bf16, converted once at load) or
//! a packed GGUF tensor left in the memory map, multiplied by the quantized kernels directly.

use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use half::{bf16, f16};
use torchnative_core::kernels;
use torchnative_formats::gguf::GgufFile;
use torchnative_formats::names::hf_to_gguf_in;
use torchnative_formats::safetensors::{Dtype, SafetensorsModel};
use torchnative_quant::{
    self as quant, ActivationScratch, GgmlType, InterleavedMatrix, PackedMatrix,
};

use crate::error::{Result, RuntimeError};

/// How weights are held and computed with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum WeightFormat {
    /// Dequantized / converted once at load to f32: the reference-comparable mode.
    F32,
    F16,
    BF16,
    /// Keep the file's types: packed GGUF blocks run through the quantized kernels.
    #[default]
    Native,
}

impl WeightFormat {
    pub fn parse(name: &str) -> Result<WeightFormat> {
        match name.to_ascii_lowercase().as_str() {
            "f32" => Ok(WeightFormat::F32),
            "f16" => Ok(WeightFormat::F16),
            "bf16" => Ok(WeightFormat::BF16),
            "native" => Ok(WeightFormat::Native),
            other => Err(RuntimeError::Unsupported {
                what: format!("weight dtype '{other}'"),
                supported: "f32, f16, bf16, native".into(),
            }),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            WeightFormat::F32 => "f32",
            WeightFormat::F16 => "f16",
            WeightFormat::BF16 => "bf16",
            WeightFormat::Native => "native",
        }
    }
}

/// The element data of a matrix.
pub(crate) enum MatrixData {
    F32(Vec<f32>),
    F16(Vec<f16>),
    BF16(Vec<bf16>),
    /// A contiguous f32 tensor of someone else's (a live PyTorch-face module's parameter),
    /// read in place: the weights are shared, not copied.
    Shared(torchnative_core::Tensor),
    /// Packed GGUF blocks at this byte range of the checkpoint's memory map, and the same
    /// blocks re-laid out for the few-rows kernels where this CPU has them (the matmuls then
    /// read only that copy; the map's bytes serve embedding lookups).
    Packed {
        ty: GgmlType,
        range: Range<usize>,
        interleaved: Option<Box<InterleavedMatrix>>,
    },
}

/// A `rows x cols` row-major matrix (PyTorch `Linear` layout: rows = output features).
pub(crate) struct Matrix {
    pub rows: usize,
    pub cols: usize,
    pub data: MatrixData,
}

impl Matrix {
    /// `y[m x rows] = x[m x cols] * W^T`. `map` is the checkpoint's mapped bytes.
    pub fn forward(
        &self,
        map: &[u8],
        x: &[f32],
        m: usize,
        y: &mut [f32],
        scratch: &mut ActivationScratch,
    ) -> Result<()> {
        if let Some(w) = self.packed(map) {
            return quant::matmul(&w, x, m, y, scratch)
                .map_err(|e| RuntimeError::Kernel(e.to_string()));
        }
        let (k, n) = (self.cols, self.rows);
        match &self.data {
            MatrixData::F32(w) => kernels::linear_f32(x, w, None, y, m, k, n),
            MatrixData::F16(w) => kernels::linear_f16(x, w, None, y, m, k, n),
            MatrixData::BF16(w) => kernels::linear_bf16(x, w, None, y, m, k, n),
            MatrixData::Shared(t) => t
                .with_data(|w: &[f32]| kernels::linear_f32(x, w, None, y, m, k, n))
                .map_err(|e| RuntimeError::Kernel(e.to_string()))?,
            MatrixData::Packed { .. } => unreachable!("packed matrices return above"),
        }
        Ok(())
    }

    fn packed<'a>(&'a self, map: &'a [u8]) -> Option<PackedMatrix<'a>> {
        match &self.data {
            MatrixData::Packed {
                ty,
                range,
                interleaved,
            } => Some(PackedMatrix {
                ty: *ty,
                data: &map[range.clone()],
                rows: self.rows,
                cols: self.cols,
                interleaved: interleaved.as_deref(),
            }),
            _ => None,
        }
    }

    /// Several matrices applied to the same input (Q/K/V, gate/up). Packed ones whose
    /// activations quantize alike share one quantization of `x` and one parallel section
    /// (saving pool round trips, which dominate decode on small models).
    pub fn forward_group<const N: usize>(
        mats: [&Matrix; N],
        map: &[u8],
        x: &[f32],
        m: usize,
        mut ys: [&mut [f32]; N],
        scratch: &mut ActivationScratch,
    ) -> Result<()> {
        let packed = mats.map(|w| w.packed(map));
        // Same block size means the same activation format (ggml's 32-blocks, 256 K-blocks, floats).
        let shareable = packed
            .iter()
            .all(|p| p.is_some_and(|p| p.ty.block_size() == mats[0].block_size()));
        if shareable {
            let ws = packed.map(|p| p.expect("checked above"));
            let mut outs: [&mut [f32]; N] = ys.each_mut().map(|y| &mut **y);
            return quant::matmul_multi(&ws, x, m, &mut outs, scratch)
                .map_err(|e| RuntimeError::Kernel(e.to_string()));
        }
        for (w, y) in mats.iter().zip(ys.iter_mut()) {
            w.forward(map, x, m, y, scratch)?;
        }
        Ok(())
    }

    fn block_size(&self) -> usize {
        match &self.data {
            MatrixData::Packed { ty, .. } => ty.block_size(),
            _ => 1,
        }
    }

    /// Row `row` as f32 (embedding lookup, straight from packed rows when packed).
    pub fn row_into(&self, map: &[u8], row: usize, out: &mut [f32]) -> Result<()> {
        if let Some(w) = self.packed(map) {
            return quant::dequantize_row(&w, row, out)
                .map_err(|e| RuntimeError::Kernel(e.to_string()));
        }
        let c = self.cols;
        match &self.data {
            MatrixData::F32(w) => out.copy_from_slice(&w[row * c..(row + 1) * c]),
            MatrixData::F16(w) => kernels::f16_to_f32(&w[row * c..(row + 1) * c], out),
            MatrixData::BF16(w) => kernels::bf16_to_f32(&w[row * c..(row + 1) * c], out),
            MatrixData::Shared(t) => t
                .with_data(|w: &[f32]| out.copy_from_slice(&w[row * c..(row + 1) * c]))
                .map_err(|e| RuntimeError::Kernel(e.to_string()))?,
            MatrixData::Packed { .. } => unreachable!("packed matrices return above"),
        }
        Ok(())
    }

    /// The byte range of the checkpoint's map that the matmuls and lookups read, for a packed
    /// matrix without an interleaved copy (`None`: this matrix reads only its own memory).
    pub fn file_range_read_in_place(&self) -> Option<Range<usize>> {
        match &self.data {
            MatrixData::Packed {
                range,
                interleaved: None,
                ..
            } => Some(range.clone()),
            _ => None,
        }
    }

    /// Bytes this matrix holds in memory that the file does not (owned copies).
    pub fn owned_bytes(&self) -> usize {
        match &self.data {
            MatrixData::F32(w) => w.len() * 4,
            MatrixData::F16(w) => w.len() * 2,
            MatrixData::BF16(w) => w.len() * 2,
            MatrixData::Packed { interleaved, .. } => interleaved.as_ref().map_or(0, |i| i.bytes()),
            MatrixData::Shared(_) => 0,
        }
    }

    /// Drop the interleaved copy of a packed matrix that only serves row lookups (an
    /// embedding table with its own output head).
    pub fn drop_interleaved(&mut self, stats: &mut LoadStats) {
        if let MatrixData::Packed { interleaved, .. } = &mut self.data {
            if let Some(i) = interleaved.take() {
                stats.owned_weight_bytes -= i.bytes();
            }
        }
    }

    pub fn type_name(&self) -> String {
        match &self.data {
            MatrixData::F32(_) => "f32".into(),
            MatrixData::F16(_) => "f16".into(),
            MatrixData::BF16(_) => "bf16".into(),
            MatrixData::Shared(_) => "f32 (shared)".into(),
            MatrixData::Packed { ty, .. } => ty.name().to_string(),
        }
    }
}

/// The GGUF name of an HF tensor in `file` (its architecture decides Gemma's norm names).
fn gguf_name(file: &GgufFile, hf_name: &str) -> Option<String> {
    let arch = file
        .get("general.architecture")
        .and_then(|v| v.as_str())
        .unwrap_or("");
    hf_to_gguf_in(arch, hf_name)
}

/// Counters of what loading cost.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LoadStats {
    /// f32 values produced by dequantizing packed tensors, in bytes.
    pub bytes_dequantized: usize,
    /// Bytes of weights held in owned buffers (not in the memory map).
    pub owned_weight_bytes: usize,
    /// Bytes of weights used in place from the memory map.
    pub mapped_weight_bytes: usize,
}

/// A tensor as a checkpoint stores it.
struct RawTensor<'a> {
    /// PyTorch order, outermost first.
    shape: Vec<usize>,
    kind: RawKind,
    data: &'a [u8],
}

#[derive(Clone, Copy)]
enum RawKind {
    Ggml(GgmlType),
    St(Dtype),
}

/// The file(s) a model's weights come from.
pub(crate) enum Checkpoint {
    Gguf(Arc<GgufFile>),
    Safetensors(SafetensorsModel),
    /// Tensors by transformers name, held by someone else (a module captured from the torch
    /// face); f32 matrices are used in place.
    Tensors(std::collections::HashMap<String, torchnative_core::Tensor>),
}

impl Checkpoint {
    /// The memory map packed weights point into (empty for safetensors, whose weights are
    /// always converted to owned buffers).
    pub fn map(&self) -> &[u8] {
        match self {
            Checkpoint::Gguf(f) => f.as_bytes(),
            Checkpoint::Safetensors(_) | Checkpoint::Tensors(_) => &[],
        }
    }

    fn raw(&self, hf_name: &str) -> Result<Option<RawTensor<'_>>> {
        match self {
            Checkpoint::Gguf(file) => {
                let Some(gguf_name) = gguf_name(file, hf_name) else {
                    return Ok(None);
                };
                let Some(info) = file.tensor(&gguf_name) else {
                    return Ok(None);
                };
                let shape: Vec<usize> = info.dims.iter().rev().map(|&d| d as usize).collect();
                Ok(Some(RawTensor {
                    shape,
                    kind: RawKind::Ggml(info.ggml_type),
                    data: file.tensor_data(info),
                }))
            }
            Checkpoint::Safetensors(model) => Ok(model.tensor(hf_name).map(|view| RawTensor {
                shape: view.shape.to_vec(),
                kind: RawKind::St(view.dtype),
                data: view.data,
            })),
            // Read through `tensor()`: these are not bytes of a file.
            Checkpoint::Tensors(_) => Ok(None),
        }
    }

    /// A captured tensor, checked against the shape the config implies.
    fn tensor(&self, name: &str, want: &[usize]) -> Result<Option<&torchnative_core::Tensor>> {
        let Checkpoint::Tensors(map) = self else {
            return Ok(None);
        };
        let t = map.get(name).ok_or_else(|| self.missing(name))?;
        if t.shape() != want {
            return Err(RuntimeError::Load {
                path: String::new(),
                reason: format!(
                    "tensor '{name}' has shape {:?}, the config implies {want:?}",
                    t.shape()
                ),
            });
        }
        Ok(Some(t))
    }

    fn describe(&self) -> &'static str {
        match self {
            Checkpoint::Gguf(_) => "GGUF file",
            Checkpoint::Safetensors(_) => "safetensors checkpoint",
            Checkpoint::Tensors(_) => "captured module",
        }
    }

    fn missing(&self, name: &str) -> RuntimeError {
        let shown = match self {
            Checkpoint::Gguf(file) => gguf_name(file, name).unwrap_or_else(|| name.to_string()),
            Checkpoint::Safetensors(_) | Checkpoint::Tensors(_) => name.to_string(),
        };
        RuntimeError::Load {
            path: String::new(),
            reason: format!("the {} has no tensor '{shown}'", self.describe()),
        }
    }

    fn check_shape(&self, name: &str, raw: &RawTensor, want: &[usize]) -> Result<()> {
        if raw.shape != want {
            return Err(RuntimeError::Load {
                path: String::new(),
                reason: format!(
                    "tensor '{name}' has shape {:?}, the config implies {want:?}",
                    raw.shape
                ),
            });
        }
        Ok(())
    }

    /// A vector (norm weight, bias) as f32.
    pub fn vector(&self, name: &str, len: usize, stats: &mut LoadStats) -> Result<Vec<f32>> {
        if let Some(t) = self.tensor(name, &[len])? {
            // Norm weights and biases are small: copied as f32.
            let out = captured_f32(name, t)?;
            stats.owned_weight_bytes += out.len() * 4;
            return Ok(out);
        }
        let raw = self.raw(name)?.ok_or_else(|| self.missing(name))?;
        self.check_shape(name, &raw, &[len])?;
        let out = to_f32(name, &raw, stats)?;
        stats.owned_weight_bytes += out.len() * 4;
        Ok(out)
    }

    pub fn optional_vector(
        &self,
        name: &str,
        len: usize,
        stats: &mut LoadStats,
    ) -> Result<Option<Vec<f32>>> {
        if let Checkpoint::Tensors(map) = self {
            if !map.contains_key(name) {
                return Ok(None);
            }
            return self.vector(name, len, stats).map(Some);
        }
        match self.raw(name)? {
            None => Ok(None),
            Some(_) => self.vector(name, len, stats).map(Some),
        }
    }

    /// A `rows x cols` matrix in the requested format.
    pub fn matrix(
        &self,
        name: &str,
        rows: usize,
        cols: usize,
        format: WeightFormat,
        stats: &mut LoadStats,
    ) -> Result<Matrix> {
        if let Some(t) = self.tensor(name, &[rows, cols])? {
            return captured_matrix(name, t, rows, cols, format, stats);
        }
        let raw = self.raw(name)?.ok_or_else(|| self.missing(name))?;
        self.check_shape(name, &raw, &[rows, cols])?;
        self.matrix_from_raw(name, raw, rows, cols, format, stats)
    }

    /// Rows `part` of a `total_rows x cols` matrix as a matrix of their own (one projection of
    /// a fused one: Phi-3's `qkv_proj`, `gate_up_proj`). Packed rows stay in the map.
    pub fn matrix_rows(
        &self,
        name: &str,
        total_rows: usize,
        cols: usize,
        part: Range<usize>,
        format: WeightFormat,
        stats: &mut LoadStats,
    ) -> Result<Matrix> {
        let load_err = |reason: String| RuntimeError::Load {
            path: String::new(),
            reason,
        };
        if part.start >= part.end || part.end > total_rows {
            return Err(load_err(format!(
                "tensor '{name}': rows {part:?} outside its {total_rows} rows"
            )));
        }
        let rows = part.end - part.start;
        if let Some(t) = self.tensor(name, &[total_rows, cols])? {
            let all = captured_f32(name, t)?;
            let data = f32_matrix_data(all[part.start * cols..part.end * cols].to_vec(), format);
            let m = Matrix { rows, cols, data };
            stats.owned_weight_bytes += m.owned_bytes();
            return Ok(m);
        }
        let raw = self.raw(name)?.ok_or_else(|| self.missing(name))?;
        self.check_shape(name, &raw, &[total_rows, cols])?;
        if raw.data.len() % total_rows != 0 {
            return Err(load_err(format!(
                "tensor '{name}': {} bytes are not {total_rows} whole rows",
                raw.data.len()
            )));
        }
        let row_bytes = raw.data.len() / total_rows;
        let slice = RawTensor {
            shape: vec![rows, cols],
            kind: raw.kind,
            data: &raw.data[part.start * row_bytes..part.end * row_bytes],
        };
        self.matrix_from_raw(name, slice, rows, cols, format, stats)
    }

    fn matrix_from_raw(
        &self,
        name: &str,
        raw: RawTensor,
        rows: usize,
        cols: usize,
        format: WeightFormat,
        stats: &mut LoadStats,
    ) -> Result<Matrix> {
        let data = match (format, raw.kind) {
            (WeightFormat::Native, RawKind::Ggml(ty)) if quant::supports_matmul(ty) => {
                let base = self.map().as_ptr() as usize;
                let start = raw.data.as_ptr() as usize - base;
                stats.mapped_weight_bytes += raw.data.len();
                let file = PackedMatrix::new(ty, raw.data, rows, cols);
                let interleaved = InterleavedMatrix::new(&file)
                    .map_err(|e| RuntimeError::Load {
                        path: String::new(),
                        reason: format!("tensor '{name}': {e}"),
                    })?
                    .map(Box::new);
                MatrixData::Packed {
                    ty,
                    range: start..start + raw.data.len(),
                    interleaved,
                }
            }
            (WeightFormat::Native, RawKind::Ggml(ty)) => {
                return Err(RuntimeError::Unsupported {
                    what: format!("tensor '{name}' of type {ty}: no packed kernel for it on this CPU"),
                    supported: "Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K, F16, BF16, F32 (or load with dtype f32 to dequantize once)".into(),
                });
            }
            (WeightFormat::Native, RawKind::St(Dtype::F16)) => {
                MatrixData::F16(le_u16(raw.data).map(f16::from_bits).collect())
            }
            (WeightFormat::Native, RawKind::St(Dtype::BF16)) => {
                MatrixData::BF16(le_u16(raw.data).map(bf16::from_bits).collect())
            }
            (WeightFormat::F16, _) => {
                let f = to_f32(name, &raw, stats)?;
                let mut out = vec![f16::ZERO; f.len()];
                kernels::f32_to_f16(&f, &mut out);
                MatrixData::F16(out)
            }
            (WeightFormat::BF16, _) => {
                let f = to_f32(name, &raw, stats)?;
                let mut out = vec![bf16::ZERO; f.len()];
                kernels::f32_to_bf16(&f, &mut out);
                MatrixData::BF16(out)
            }
            (WeightFormat::F32 | WeightFormat::Native, _) => {
                MatrixData::F32(to_f32(name, &raw, stats)?)
            }
        };
        let m = Matrix { rows, cols, data };
        stats.owned_weight_bytes += m.owned_bytes();
        // The matmuls read only the copy now: the file's pages need not stay resident (peak
        // memory stays near one copy of the weights). Row lookups fault back what they read.
        if m.owned_bytes() > 0 {
            if let Checkpoint::Gguf(file) = self {
                file.release_pages(raw.data);
            }
        }
        Ok(m)
    }

    pub fn has(&self, name: &str) -> Result<bool> {
        if let Checkpoint::Tensors(map) = self {
            return Ok(map.contains_key(name));
        }
        Ok(self.raw(name)?.is_some())
    }
}

/// A captured tensor's values as f32 (a copy).
fn captured_f32(name: &str, t: &torchnative_core::Tensor) -> Result<Vec<f32>> {
    t.to_dtype(torchnative_core::DType::F32)
        .and_then(|f| f.to_vec::<f32>())
        .map_err(|e| RuntimeError::Load {
            path: String::new(),
            reason: format!("tensor '{name}': {e}"),
        })
}

/// A captured matrix: a contiguous f32 CPU tensor is used in place for f32 weights; anything
/// else is converted once, like a file's tensor.
fn captured_matrix(
    name: &str,
    t: &torchnative_core::Tensor,
    rows: usize,
    cols: usize,
    format: WeightFormat,
    stats: &mut LoadStats,
) -> Result<Matrix> {
    let in_place = t.dtype() == torchnative_core::DType::F32
        && t.is_contiguous()
        && t.device() == torchnative_core::Device::Cpu
        && matches!(format, WeightFormat::F32 | WeightFormat::Native);
    let data = if in_place {
        stats.mapped_weight_bytes += rows * cols * 4;
        MatrixData::Shared(t.clone())
    } else {
        f32_matrix_data(captured_f32(name, t)?, format)
    };
    let m = Matrix { rows, cols, data };
    stats.owned_weight_bytes += m.owned_bytes();
    Ok(m)
}

/// f32 values held in the requested format (f32 for `Native`: there is nothing packed).
fn f32_matrix_data(f: Vec<f32>, format: WeightFormat) -> MatrixData {
    match format {
        WeightFormat::F16 => {
            let mut out = vec![f16::ZERO; f.len()];
            kernels::f32_to_f16(&f, &mut out);
            MatrixData::F16(out)
        }
        WeightFormat::BF16 => {
            let mut out = vec![bf16::ZERO; f.len()];
            kernels::f32_to_bf16(&f, &mut out);
            MatrixData::BF16(out)
        }
        WeightFormat::F32 | WeightFormat::Native => MatrixData::F32(f),
    }
}

fn le_u16(data: &[u8]) -> impl Iterator<Item = u16> + '_ {
    data.chunks_exact(2)
        .map(|b| u16::from_le_bytes([b[0], b[1]]))
}

fn to_f32(name: &str, raw: &RawTensor, stats: &mut LoadStats) -> Result<Vec<f32>> {
    let n: usize = raw.shape.iter().product();
    match raw.kind {
        RawKind::Ggml(GgmlType::F32) | RawKind::St(Dtype::F32) => Ok(raw
            .data
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect()),
        RawKind::St(Dtype::F16) => Ok(le_u16(raw.data)
            .map(|b| f16::from_bits(b).to_f32())
            .collect()),
        RawKind::St(Dtype::BF16) => Ok(le_u16(raw.data)
            .map(|b| bf16::from_bits(b).to_f32())
            .collect()),
        RawKind::Ggml(ty) => {
            let mut out = vec![0.0f32; n];
            quant::dequantize(ty, raw.data, &mut out).map_err(|e| RuntimeError::Load {
                path: String::new(),
                reason: format!("tensor '{name}': {e}"),
            })?;
            stats.bytes_dequantized += n * 4;
            Ok(out)
        }
        RawKind::St(other) => Err(RuntimeError::Unsupported {
            what: format!("tensor '{name}' of dtype {}", other.name()),
            supported: "F32, F16, BF16 weights".into(),
        }),
    }
}

/// Opens a checkpoint: a `.gguf` file or a safetensors directory (single file or sharded),
/// checking in the latter case that exactly the expected tensors are present.
pub(crate) fn open_safetensors(dir: &Path, expected: &[String]) -> Result<Checkpoint> {
    let model =
        SafetensorsModel::open_dir(dir, Some(expected)).map_err(|e| RuntimeError::Load {
            path: dir.display().to_string(),
            reason: e.to_string(),
        })?;
    Ok(Checkpoint::Safetensors(model))
}
