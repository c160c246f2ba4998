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
