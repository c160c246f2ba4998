#![no_main]
//! Tokenizer input: GGUF tokenizer metadata from untrusted bytes, and untrusted text through the
//! default model's real tokenizer (encode, then decode).

use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use torchnative_formats::gguf::GgufFile;
use torchnative_tokenizer::{DecodeOptions, EncodeOptions, Tokenizer};

fn default_model() -> PathBuf {
    std::env::var_os("TORCHNATIVE_MODEL").map(PathBuf::from).unwrap_or_else(|| {
        let home = std::env::var_os("TORCHNATIVE_HOME").map(PathBuf::from).unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/torchnative")
        });
        home.join("models/SmolLM2-135M-Instruct.Q4_1.gguf")
    })
}

static REAL: OnceLock<Option<Tokenizer>> = OnceLock::new();

fuzz_target!(|data: &[u8]| {
    if let Ok(file) = GgufFile::from_bytes(data.to_vec()) {
        if let Ok(tok) = Tokenizer::from_gguf(&file) {
            let _ = tok.encode("hello world", EncodeOptions::default());
        }
    }
    let real = REAL.get_or_init(|| GgufFile::open(&default_model()).ok().and_then(|f| Tokenizer::from_gguf(&f).ok()));
    if let Some(tok) = real {
        let text = String::from_utf8_lossy(data);
        for parse_special in [false, true] {
            let opts = EncodeOptions { add_special_tokens: true, parse_special };
            if let Ok(ids) = tok.encode(&text, opts) {
                let _ = tok.decode(&ids, DecodeOptions { skip_special_tokens: parse_special });
            }
        }
    }
});
