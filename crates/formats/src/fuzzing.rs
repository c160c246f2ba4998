//! Entry points shared by the `cargo fuzz` targets in `fuzz/` and the corpus replay test, so
//! both exercise exactly the same code. Each takes arbitrary bytes and must never panic;
//! the round-trip checks inside panic only on a real bug.

use crate::gguf::{gguf_bytes, GgufFile, TensorToWrite};
use crate::safetensors::{parse_index, SafetensorsFile};
use crate::{DecoderConfig, GenerationDefaults};

/// GGUF reader, config normalization, and reader -> writer -> reader round trip.
pub fn gguf(data: &[u8]) {
    let Ok(file) = GgufFile::from_bytes(data.to_vec()) else {
        return;
    };
    let mut total = 0usize;
    for t in file.tensors() {
        let bytes = file.tensor_data(t);
        assert_eq!(
            bytes.len() as u64,
            t.n_bytes,
            "tensor '{}' slice size",
            t.name
        );
        total += bytes.len();
    }
    std::hint::black_box(total);
    let _ = DecoderConfig::from_gguf(&file);

    let tensors: Vec<TensorToWrite> = file
        .tensors()
        .iter()
        .map(|t| TensorToWrite {
            name: t.name.clone(),
            dims: t.dims.clone(),
            ggml_type: t.ggml_type,
            data: file.tensor_data(t),
        })
        .collect();
    // The writer may refuse what the reader tolerates (e.g. a non-u32 alignment); what it
    // writes must read back identically.
    if let Ok(bytes) = gguf_bytes(file.metadata(), &tensors) {
        let again = GgufFile::from_bytes(bytes).expect("re-encoded GGUF parses");
        assert_eq!(again.metadata().len(), file.metadata().len());
        for ((ka, va), (kb, vb)) in again.metadata().iter().zip(file.metadata()) {
            assert_eq!(ka, kb);
            // NaN != NaN: compare encodings via Debug, which prints NaN consistently.
            assert_eq!(format!("{va:?}"), format!("{vb:?}"), "metadata '{ka}'");
        }
        for (a, b) in again.tensors().iter().zip(file.tensors()) {
            assert_eq!(
                (&a.name, &a.dims, a.ggml_type),
                (&b.name, &b.dims, b.ggml_type)
            );
            assert_eq!(again.tensor_data(a), file.tensor_data(b));
        }
    }
}

/// safetensors header validation and tensor views.
pub fn safetensors(data: &[u8]) {
    let Ok(file) = SafetensorsFile::from_bytes(data.to_vec()) else {
        return;
    };
    for e in file.entries() {
        let view = file.tensor(&e.name).expect("listed tensor is present");
        let elems: usize = view.shape.iter().product();
        assert_eq!(
            view.data.len(),
            elems * view.dtype.size_bytes(),
            "tensor '{}'",
            e.name
        );
    }
}

/// Shard index, `config.json` and `generation_config.json` parsing of arbitrary text.
pub fn json_files(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = parse_index(text);
    let _ = DecoderConfig::from_hf_config_json(text);
    let _ = GenerationDefaults::from_json(text);
}
