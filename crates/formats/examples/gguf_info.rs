//! Prints a GGUF file's header, metadata and tensor directory, and how long parsing took.
//!
//! usage: cargo run -p torchnative-formats --example gguf_info -- FILE.gguf
use std::time::Instant;

use torchnative_formats::gguf::{GgufFile, MetadataValue};
use torchnative_formats::DecoderConfig;

fn short(v: &MetadataValue) -> String {
    match v {
        MetadataValue::Array(a) => format!(
            "[{} x {}]",
            a.len(),
            a.first().map_or("?", |x| x.type_name())
        ),
        MetadataValue::String(s) if s.chars().count() > 60 => {
            format!("{:?}...", s.chars().take(60).collect::<String>())
        }
        other => format!("{other:?}"),
    }
}

fn main() {
    let Some(path) = std::env::args_os().nth(1) else {
        eprintln!("usage: gguf_info FILE.gguf");
        std::process::exit(2);
    };
    let start = Instant::now();
    let file = match GgufFile::open(path.as_ref()) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    };
    let elapsed = start.elapsed();
    println!(
        "GGUF v{}, {} metadata entries, {} tensors, alignment {}, data at byte {} (parsed in {:.1} ms)",
        file.version(),
        file.metadata().len(),
        file.tensors().len(),
        file.alignment(),
        file.data_start(),
        elapsed.as_secs_f64() * 1e3
    );
    for (k, v) in file.metadata() {
        println!("  {k} = {}", short(v));
    }
    for t in file.tensors() {
        println!(
            "  {:<32} {:>6} {:?} offset {} bytes {}",
            t.name,
            t.ggml_type.name(),
            t.dims,
            t.offset,
            t.n_bytes
        );
    }
    match DecoderConfig::from_gguf(&file) {
        Ok(c) => println!("{c:#?}"),
        Err(e) => println!("config: {e}"),
    }
}
