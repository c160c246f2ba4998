//! Test helpers: the shared inputs (`torchnative-testing`), the oracle scripts, and files
//! derived from the default model by llama.cpp.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

// Not every test binary uses every input.
#[allow(unused_imports)]
pub use torchnative_testing::{oracle_python, temp_dir, torchnative_home};

/// The default model GGUF, if present.
pub fn model_path() -> Option<PathBuf> {
    torchnative_testing::default_model()
}

/// Runs `tests/oracle/<script>` with `args` and returns its stdout, panicking with stderr on
/// failure.
pub fn run_oracle(python: &Path, script: &str, args: &[&Path]) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/oracle")
        .join(script);
    let out = Command::new(python)
        .arg(&script)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", script.display()));
    assert!(
        out.status.success(),
        "{} failed: {}",
        script.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("oracle output is UTF-8")
}

/// The bin dir of the llama.cpp build made by scripts/build-llama-cpp.sh (llama-quantize,
/// llama-bench, ...), or `None` (skipped, or a failure under `TORCHNATIVE_REQUIRE_LLAMA_CPP=1`).
pub fn llama_cpp_bin() -> Option<PathBuf> {
    let root = torchnative_testing::llama_cpp_root(&["build/bin/llama-quantize"])?;
    Some(root.join("build/bin"))
}

/// Files derived from the default model, cached: `$TORCHNATIVE_HOME/models/derived`.
pub fn derived_dir() -> PathBuf {
    let dir = torchnative_home().join("models/derived");
    std::fs::create_dir_all(&dir).expect("create the derived-models dir");
    dir
}

/// `dst`, made once by `make(tmp)` into a temporary name next to it and renamed into place, so
/// an interrupted run never leaves a half file under the final name.
pub fn cached(dst: &Path, make: impl FnOnce(&Path)) -> PathBuf {
    if dst.is_file() {
        return dst.to_path_buf();
    }
    let tmp = dst.with_extension(format!("tmp-{}", std::process::id()));
    make(&tmp);
    std::fs::rename(&tmp, dst).expect("rename the derived file into place");
    dst.to_path_buf()
}

/// Runs `llama-quantize ARGS...` (a derived file), panicking with its output on failure.
pub fn llama_quantize(bin: &Path, args: &[&std::ffi::OsStr]) {
    let out = Command::new(bin.join("llama-quantize"))
        .args(args)
        .output()
        .expect("cannot start llama-quantize");
    assert!(
        out.status.success(),
        "llama-quantize {args:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The default model's F16 copy made by llama-quantize (the file bench/compare derives too):
/// `<name>.F16-from-<type>.gguf` for `<name>.<type>.gguf`.
pub fn derived_f16(bin: &Path, model: &Path) -> PathBuf {
    let stem = model.file_stem().unwrap().to_string_lossy().to_string();
    let (name, ty) = stem.rsplit_once('.').unwrap_or((stem.as_str(), "src"));
    let dst = derived_dir().join(format!("{name}.F16-from-{ty}.gguf"));
    cached(&dst, |tmp| {
        llama_quantize(
            bin,
            &[
                "--allow-requantize".as_ref(),
                model.as_os_str(),
                tmp.as_os_str(),
                "F16".as_ref(),
                "2".as_ref(),
            ],
        )
    })
}
