//! Test helpers: locating the default model and the oracle venv per the project convention
//! (skip with a message when absent, fail when TORCHNATIVE_REQUIRE_ORACLE=1).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

fn required() -> bool {
    std::env::var("TORCHNATIVE_REQUIRE_ORACLE").is_ok_and(|v| v == "1")
}

/// Returns `None` after printing `skipped: <reason>`, or panics when the oracle is required.
fn skip<T>(reason: &str) -> Option<T> {
    assert!(!required(), "TORCHNATIVE_REQUIRE_ORACLE=1 but {reason}");
    println!("skipped: {reason}");
    None
}

/// The default model GGUF, if present.
pub fn model_path() -> Option<PathBuf> {
    let path = match std::env::var_os("TORCHNATIVE_MODEL") {
        Some(p) => PathBuf::from(p),
        None => {
            let home = std::env::var_os("TORCHNATIVE_HOME")
                .map(PathBuf::from)
                .or_else(|| {
                    std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache/torchnative"))
                });
            match home {
                Some(h) => h.join("models/SmolLM2-135M-Instruct.Q4_1.gguf"),
                None => return skip("neither TORCHNATIVE_MODEL nor HOME is set"),
            }
        }
    };
    if path.is_file() {
        Some(path)
    } else {
        skip(&format!("model file {} not found", path.display()))
    }
}

/// The oracle venv's python, if configured.
pub fn oracle_python() -> Option<PathBuf> {
    match std::env::var_os("TORCHNATIVE_ORACLE_PYTHON") {
        Some(p) if Path::new(&p).is_file() => Some(PathBuf::from(p)),
        Some(p) => skip(&format!(
            "TORCHNATIVE_ORACLE_PYTHON={} is not a file",
            Path::new(&p).display()
        )),
        None => skip("TORCHNATIVE_ORACLE_PYTHON is not set"),
    }
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

/// A fresh temporary directory under the system temp dir, unique per test.
pub fn temp_dir(test: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("torchnative-formats-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create temp dir");
    dir
}

/// `$TORCHNATIVE_HOME`, else `~/.cache/torchnative`.
pub fn torchnative_home() -> PathBuf {
    std::env::var_os("TORCHNATIVE_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/torchnative")
        })
}

/// The bin dir of the llama.cpp build made by scripts/build-llama-cpp.sh (llama-quantize,
/// llama-bench, ...), or `None` after printing `skipped:`; panics instead when
/// `TORCHNATIVE_REQUIRE_LLAMA_CPP=1`.
pub fn llama_cpp_bin() -> Option<PathBuf> {
    let root = std::env::var_os("TORCHNATIVE_LLAMA_CPP_ROOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| torchnative_home().join("llama.cpp-0.3.36"));
    let bin = root.join("build/bin");
    if bin.join("llama-quantize").is_file() {
        return Some(bin);
    }
    let reason = format!(
        "llama.cpp not built at {} (run scripts/build-llama-cpp.sh)",
        root.display()
    );
    if std::env::var("TORCHNATIVE_REQUIRE_LLAMA_CPP").as_deref() == Ok("1") {
        panic!("required test input missing: {reason}");
    }
    println!("skipped: {reason}");
    None
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
