//! Test inputs shared by every crate's tests, and the one rule for a missing input.
//!
//! The default model, the oracle venv (torch + transformers + gguf) and the llama.cpp build are
//! made by `scripts/fetch-model.sh`, `scripts/oracle-venv.sh` and `scripts/build-llama-cpp.sh`
//! under `$TORCHNATIVE_HOME`. A test whose input is missing prints `skipped: <reason>` and
//! passes, so `cargo test` works on a bare checkout; the README's test command sets
//! `TORCHNATIVE_REQUIRE_ORACLE=1` (model and oracle) and `TORCHNATIVE_REQUIRE_LLAMA_CPP=1`, and
//! then a missing input fails the test instead.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Which `TORCHNATIVE_REQUIRE_*` switch turns a missing input into a failure.
#[derive(Clone, Copy, Debug)]
pub enum Input {
    /// The default model and the oracle venv: `TORCHNATIVE_REQUIRE_ORACLE`.
    Oracle,
    /// The llama.cpp build: `TORCHNATIVE_REQUIRE_LLAMA_CPP`.
    LlamaCpp,
}

impl Input {
    fn variable(self) -> &'static str {
        match self {
            Input::Oracle => "TORCHNATIVE_REQUIRE_ORACLE",
            Input::LlamaCpp => "TORCHNATIVE_REQUIRE_LLAMA_CPP",
        }
    }

    /// Whether the test suite was told this input must be present.
    pub fn required(self) -> bool {
        std::env::var(self.variable()).as_deref() == Ok("1")
    }
}

/// `None` after printing `skipped: <reason>`; panics instead when `input` is required.
pub fn missing<T>(input: Input, reason: &str) -> Option<T> {
    if input.required() {
        panic!("{}=1 but {reason}", input.variable());
    }
    println!("skipped: {reason}");
    None
}

/// `$TORCHNATIVE_HOME`, else `~/.cache/torchnative` (the runtime's own rule, restated here so
/// the lowest crates can test without depending on the runtime).
pub fn torchnative_home() -> PathBuf {
    match std::env::var_os("TORCHNATIVE_HOME") {
        Some(home) => PathBuf::from(home),
        None => {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/torchnative")
        }
    }
}

/// The default model: `$TORCHNATIVE_MODEL`, else the SmolLM2 Q4_1 GGUF under
/// `$TORCHNATIVE_HOME/models`.
pub fn default_model() -> Option<PathBuf> {
    let path = std::env::var_os("TORCHNATIVE_MODEL")
        .map(PathBuf::from)
        .unwrap_or_else(|| torchnative_home().join("models/SmolLM2-135M-Instruct.Q4_1.gguf"));
    if path.is_file() {
        Some(path)
    } else {
        missing(
            Input::Oracle,
            &format!(
                "default model not found at {} (run scripts/fetch-model.sh)",
                path.display()
            ),
        )
    }
}

/// The oracle venv's python: `$TORCHNATIVE_ORACLE_PYTHON`.
pub fn oracle_python() -> Option<PathBuf> {
    match std::env::var_os("TORCHNATIVE_ORACLE_PYTHON").map(PathBuf::from) {
        Some(p) if p.is_file() => Some(p),
        Some(p) => missing(
            Input::Oracle,
            &format!("TORCHNATIVE_ORACLE_PYTHON={} is not a file", p.display()),
        ),
        None => missing(
            Input::Oracle,
            "TORCHNATIVE_ORACLE_PYTHON is not set (scripts/test.sh sets it)",
        ),
    }
}

/// The default model and the oracle python, if both are there.
pub fn model_and_oracle() -> Option<(PathBuf, PathBuf)> {
    Some((default_model()?, oracle_python()?))
}

/// The llama.cpp build: `$TORCHNATIVE_LLAMA_CPP_ROOT`, else `$TORCHNATIVE_HOME/llama.cpp-0.3.36`,
/// if every path of `needs` (relative to it, e.g. `build/bin/llama-bench`) exists.
pub fn llama_cpp_root(needs: &[&str]) -> Option<PathBuf> {
    let root = std::env::var_os("TORCHNATIVE_LLAMA_CPP_ROOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| torchnative_home().join("llama.cpp-0.3.36"));
    match needs.iter().find(|n| !root.join(n).exists()) {
        None => Some(root),
        Some(absent) => missing(
            Input::LlamaCpp,
            &format!(
                "llama.cpp build at {} has no {absent} (run scripts/build-llama-cpp.sh)",
                root.display()
            ),
        ),
    }
}

/// A fresh, empty directory under the system temp dir, unique per process and call.
pub fn temp_dir(tag: &str) -> PathBuf {
    static CALLS: AtomicUsize = AtomicUsize::new(0);
    let n = CALLS.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("torchnative-{tag}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)
        .unwrap_or_else(|e| panic!("creating temp dir {}: {e}", dir.display()));
    dir
}

/// Runs the transformers reference script (`crates/runtime/tests/oracle/hf_reference.py`, its
/// commands documented there) on `request`, written into `work`; panics with its stderr on
/// failure.
pub fn hf_reference(python: &Path, request: &serde_json::Value, work: &Path) {
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../runtime/tests/oracle/hf_reference.py");
    let req = work.join(format!("request-{}.json", std::process::id()));
    std::fs::write(
        &req,
        serde_json::to_vec(request).expect("request serializes"),
    )
    .unwrap_or_else(|e| panic!("writing {}: {e}", req.display()));
    let out = Command::new(python)
        .arg("-W")
        .arg("ignore")
        .arg(&script)
        .arg(&req)
        .env("TQDM_DISABLE", "1")
        .output()
        .expect("cannot start the oracle python");
    assert!(
        out.status.success(),
        "oracle failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The safetensors copy transformers saves of a GGUF model (dequantized f32), made once and
/// cached as `$TORCHNATIVE_HOME/derived/<gguf stem>.safetensors-f32`.
pub fn safetensors_copy(python: &Path, gguf: &Path) -> PathBuf {
    let stem = gguf
        .file_stem()
        .expect("a GGUF file name")
        .to_string_lossy()
        .to_string();
    let derived = torchnative_home().join("derived");
    let dir = derived.join(format!("{stem}.safetensors-f32"));
    if dir.join("done").is_file() {
        return dir;
    }
    let tmp = derived.join(format!("{stem}.tmp-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap_or_else(|e| panic!("creating {}: {e}", tmp.display()));
    hf_reference(
        python,
        &serde_json::json!({"cmd": "save_safetensors", "model": {"gguf": gguf}, "out_dir": tmp}),
        &tmp,
    );
    std::fs::write(tmp.join("done"), b"").expect("marking the copy done");
    let _ = std::fs::remove_dir_all(&dir);
    // Another test process may have won the race; either copy is the same.
    if std::fs::rename(&tmp, &dir).is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    dir
}

/// Upstream's `native_functions.yaml`, from the oracle venv's torchgen (the same file the torch
/// face's registry reads from the pinned wheel).
pub fn upstream_native_functions_yaml() -> Option<String> {
    let python = oracle_python()?;
    let lib = python.parent()?.parent()?.join("lib");
    let found = std::fs::read_dir(&lib).ok().and_then(|entries| {
        entries.flatten().find_map(|e| {
            let p = e
                .path()
                .join("site-packages/torchgen/packaged/ATen/native/native_functions.yaml");
            p.is_file().then_some(p)
        })
    });
    match found.and_then(|p| std::fs::read_to_string(p).ok()) {
        Some(text) => Some(text),
        None => missing(
            Input::Oracle,
            &format!(
                "torchgen's native_functions.yaml not found under {}",
                lib.display()
            ),
        ),
    }
}
