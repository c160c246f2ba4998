//! Finding a model on disk, offline: a `.gguf` path, a model directory, or a Hugging Face repo
//! id looked up in the local hub cache (`$HF_HUB_CACHE`, else `$HF_HOME/hub`, else
//! `~/.cache/huggingface/hub`), laid out as `models--Org--Name/refs/<ref>` holding a commit
//! hash and `models--Org--Name/snapshots/<hash>/` holding the files.

use std::path::{Path, PathBuf};

use crate::error::{FormatError, Result};
use crate::mapped::read_text;

/// Where a model's files are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ModelLocation {
    /// A single GGUF file.
    Gguf(PathBuf),
    /// A directory with `config.json` and safetensors weights (a hub snapshot or a plain
    /// directory).
    HfDirectory(PathBuf),
}

/// Resolves `spec`: an existing path (a `.gguf` file, or a directory holding `config.json`),
/// or a repo id `Org/Name` (optionally `Org/Name@revision`, a ref name or commit hash)
/// present in the local hub cache. Nothing is downloaded.
pub fn resolve_model(spec: &str) -> Result<ModelLocation> {
    resolve_model_in(spec, hub_cache_dir().as_deref())
}

/// The hub cache directory the environment points at, if any can be named.
pub fn hub_cache_dir() -> Option<PathBuf> {
    let env = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    env("HF_HUB_CACHE")
        .or_else(|| env("HF_HOME").map(|h| h.join("hub")))
        .or_else(|| env("XDG_CACHE_HOME").map(|c| c.join("huggingface/hub")))
        .or_else(|| env("HOME").map(|h| h.join(".cache/huggingface/hub")))
}

/// [`resolve_model`] with an explicit hub cache directory (tests).
pub fn resolve_model_in(spec: &str, hub_cache: Option<&Path>) -> Result<ModelLocation> {
    let path = Path::new(spec);
    if path.exists() {
        return classify_path(path);
    }
    let Some((org, name, revision)) = parse_repo_id(spec) else {
        return Err(FormatError::NotFound(format!(
            "model '{spec}': no such file or directory, and not a repo id of the form Org/Name"
        )));
    };
    let Some(cache) = hub_cache else {
        return Err(FormatError::NotFound(format!(
            "model '{spec}': no hub cache directory (set HF_HUB_CACHE or HF_HOME)"
        )));
    };
    let repo_dir = cache.join(format!("models--{org}--{name}"));
    if !repo_dir.is_dir() {
        return Err(FormatError::NotFound(format!(
            "model '{spec}': {} does not exist (models are not downloaded; fetch it with the \
             Hugging Face tools first)",
            repo_dir.display()
        )));
    }
    let revision = revision.unwrap_or("main");
    let ref_file = repo_dir.join("refs").join(revision);
    let commit = if ref_file.is_file() {
        // A ref holds one commit hash.
        let text = read_text(&ref_file, 1024)?;
        text.trim().to_string()
    } else {
        // A revision given as a commit hash has no ref file.
        revision.to_string()
    };
    if !is_plain_component(&commit) {
        return Err(FormatError::Malformed(format!(
            "{}: commit {commit:?} is not a plain snapshot name",
            ref_file.display()
        )));
    }
    let snapshot = repo_dir.join("snapshots").join(&commit);
    if !snapshot.is_dir() {
        return Err(FormatError::NotFound(format!(
            "model '{spec}': revision '{revision}' resolves to snapshot {} which does not exist",
            snapshot.display()
        )));
    }
    classify_path(&snapshot)
}

fn classify_path(path: &Path) -> Result<ModelLocation> {
    if path.is_dir() {
        if path.join("config.json").is_file() {
            return Ok(ModelLocation::HfDirectory(path.to_path_buf()));
        }
        return Err(FormatError::NotFound(format!(
            "{}: a model directory needs config.json",
            path.display()
        )));
    }
    let is_gguf = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("gguf"));
    if is_gguf {
        Ok(ModelLocation::Gguf(path.to_path_buf()))
    } else {
        Err(FormatError::Unsupported(format!(
            "{}: model files must be .gguf, or a directory with config.json",
            path.display()
        )))
    }
}

/// A path component that cannot leave its directory.
fn is_plain_component(s: &str) -> bool {
    !s.is_empty() && s != "." && s != ".." && !s.contains(['/', '\\', '\0'])
}

/// `Org/Name[@revision]` with hub-legal characters.
fn parse_repo_id(spec: &str) -> Option<(&str, &str, Option<&str>)> {
    let (repo, revision) = match spec.split_once('@') {
        Some((r, rev)) => (r, Some(rev)),
        None => (spec, None),
    };
    let (org, name) = repo.split_once('/')?;
    let legal = |s: &str| {
        is_plain_component(s)
            && !s.starts_with(['.', '-'])
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
    };
    if !legal(org) || !legal(name) || revision.is_some_and(|r| !is_plain_component(r)) {
        return None;
    }
    Some((org, name, revision))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_cache() -> PathBuf {
        let root = std::env::temp_dir().join(format!("tn-formats-hub-{}", std::process::id()));
        let repo = root.join("models--HuggingFaceTB--SmolLM2-135M-Instruct");
        let snap = repo.join("snapshots/abc123");
        std::fs::create_dir_all(&snap).unwrap();
        std::fs::create_dir_all(repo.join("refs")).unwrap();
        std::fs::write(repo.join("refs/main"), "abc123\n").unwrap();
        std::fs::write(repo.join("refs/evil"), "../../x\n").unwrap();
        std::fs::write(snap.join("config.json"), "{}").unwrap();
        std::fs::write(root.join("m.gguf"), "GGUF").unwrap();
        root
    }

    #[test]
    fn resolves_repo_ids_paths_and_refuses_the_rest() {
        let cache = fake_cache();
        let snap = cache.join("models--HuggingFaceTB--SmolLM2-135M-Instruct/snapshots/abc123");
        let resolve = |s: &str| resolve_model_in(s, Some(&cache));
        assert_eq!(
            resolve("HuggingFaceTB/SmolLM2-135M-Instruct").unwrap(),
            ModelLocation::HfDirectory(snap.clone())
        );
        assert_eq!(
            resolve("HuggingFaceTB/SmolLM2-135M-Instruct@abc123").unwrap(),
            ModelLocation::HfDirectory(snap.clone())
        );
        assert_eq!(
            resolve(snap.to_str().unwrap()).unwrap(),
            ModelLocation::HfDirectory(snap)
        );
        let gguf = cache.join("m.gguf");
        assert_eq!(
            resolve(gguf.to_str().unwrap()).unwrap(),
            ModelLocation::Gguf(gguf)
        );

        let msg = resolve("HuggingFaceTB/Other").unwrap_err().to_string();
        assert!(
            msg.contains("models--HuggingFaceTB--Other") && msg.contains("does not exist"),
            "{msg}"
        );
        let msg = resolve("HuggingFaceTB/SmolLM2-135M-Instruct@v9")
            .unwrap_err()
            .to_string();
        assert!(msg.contains("revision 'v9'"), "{msg}");
        let msg = resolve("HuggingFaceTB/SmolLM2-135M-Instruct@evil")
            .unwrap_err()
            .to_string();
        assert!(msg.contains("not a plain snapshot name"), "{msg}");
        for bad in [
            "../etc/passwd",
            "a/b/c",
            "/nonexistent/file.gguf",
            "Org/..",
            "org/name@../x",
        ] {
            assert!(
                matches!(resolve(bad), Err(FormatError::NotFound(_))),
                "{bad}"
            );
        }
        let msg = resolve_model_in("A/B", None).unwrap_err().to_string();
        assert!(msg.contains("HF_HUB_CACHE"), "{msg}");
        let _ = std::fs::remove_dir_all(&cache);
    }
}
