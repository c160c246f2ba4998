//! Replays the committed fuzz seed corpora (and any crashers added there) through the same
//! entry points the `cargo fuzz` targets use, so stable CI exercises them. Also checks the
//! seeds are what they claim: the valid ones parse.
use std::path::{Path, PathBuf};

use torchnative_formats::gguf::GgufFile;
use torchnative_formats::safetensors::SafetensorsFile;
use torchnative_formats::{fuzzing, DecoderConfig};

fn corpus(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "{} is empty", dir.display());
    files
        .into_iter()
        .map(|p| {
            let b = std::fs::read(&p).unwrap();
            (p, b)
        })
        .collect()
}

/// Every seed and every prefix of it (truncation is the commonest corruption).
fn replay(target: &str, run: fn(&[u8])) {
    for (_, bytes) in corpus(target) {
        for len in 0..=bytes.len() {
            run(&bytes[..len]);
        }
    }
}

#[test]
fn gguf_corpus() {
    replay("gguf", fuzzing::gguf);
    let seeds = corpus("gguf");
    let qwen3 = seeds
        .iter()
        .find(|(p, _)| p.ends_with("qwen3-config"))
        .unwrap();
    let file = GgufFile::from_bytes(qwen3.1.clone()).unwrap();
    assert!(DecoderConfig::from_gguf(&file).unwrap().qk_norm);
}

/// Cutting a valid GGUF anywhere before the end of its last tensor's data is an error
/// (past that point only trailing padding is lost).
#[test]
fn gguf_seed_truncations_are_errors() {
    for (path, bytes) in corpus("gguf") {
        let file = GgufFile::from_bytes(bytes.clone()).unwrap();
        let end = file
            .tensors()
            .iter()
            .map(|t| file.data_start() + t.offset + t.n_bytes)
            .max()
            .unwrap_or(file.data_start()) as usize;
        for len in 0..end {
            assert!(
                GgufFile::from_bytes(bytes[..len].to_vec()).is_err(),
                "{} cut to {len} of {end} bytes parsed",
                path.display()
            );
        }
    }
}

#[test]
fn open_errors_name_the_file() {
    let (_, bytes) = &corpus("gguf")[0];
    let path = std::env::temp_dir().join(format!("tn-formats-cut-{}.gguf", std::process::id()));
    std::fs::write(&path, &bytes[..100]).unwrap();
    let msg = GgufFile::open(&path).unwrap_err().to_string();
    assert!(msg.contains(&path.display().to_string()), "{msg}");
    let _ = std::fs::remove_file(&path);
    let missing = GgufFile::open(&path).unwrap_err().to_string();
    assert!(missing.contains(&path.display().to_string()), "{missing}");
}

#[test]
fn safetensors_corpus() {
    replay("safetensors", fuzzing::safetensors);
    for (path, bytes) in corpus("safetensors") {
        SafetensorsFile::from_bytes(bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
}

#[test]
fn json_corpus() {
    replay("json_files", fuzzing::json_files);
}
