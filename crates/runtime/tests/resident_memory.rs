//! Weights held twice cost memory once: where the runtime keeps its own copy of a GGUF's packed
//! matrices (the interleaved layout of CPUs with AVX-512 VNNI), the file's pages of those
//! matrices leave the process after load and are not brought back by generating (matmuls and
//! embedding lookups read the copy).
//!
//! One test only, in its own binary: it reads the process's memory map by the file's path, so
//! no other test may map the same file beside it.

mod common;

use torchnative_runtime::*;

/// Resident KiB of every mapping of `path` in this process, from /proc/self/smaps.
#[cfg(target_os = "linux")]
fn resident_kib_of(path: &std::path::Path) -> usize {
    let path = std::fs::canonicalize(path).unwrap();
    let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
    let mut total = 0;
    let mut in_file = false;
    for line in smaps.lines() {
        let first = line.split_whitespace().next().unwrap_or("");
        if first.contains('-') && !first.ends_with(':') {
            // A mapping's header: "start-end perms offset dev inode [path]".
            in_file = line.ends_with(path.to_str().unwrap());
        } else if in_file && first == "Rss:" {
            total += line
                .split_whitespace()
                .nth(1)
                .unwrap()
                .parse::<usize>()
                .unwrap();
        }
    }
    total
}

#[cfg(target_os = "linux")]
#[test]
fn a_copied_model_does_not_keep_the_files_pages() {
    let Some(path) = common::default_model() else {
        return;
    };
    let llm = load_llm(path.to_str().unwrap(), &LoadOptions::default()).unwrap();
    let stats = llm.model().load_stats().clone();
    let file_kib = std::fs::metadata(&path).unwrap().len() as usize / 1024;
    let config = GenerationConfig {
        max_new_tokens: 8,
        min_new_tokens: 8,
        ..Default::default()
    };
    let prompt = "Name three colours of the rainbow and say why the sky is blue.";
    let done = llm.generate(prompt, &config).unwrap();
    assert_eq!(done.tokens.len(), 8);
    let resident = resident_kib_of(&path);
    if stats.owned_weight_bytes * 10 >= stats.mapped_weight_bytes * 9 {
        // Every matrix has its copy: what stays is the header, the vocabulary and a few pages
        // around the tensors' edges.
        assert!(
            resident * 8 < file_kib,
            "{resident} KiB of the {file_kib} KiB file still resident after load and generation"
        );
    } else {
        // The kernels read the file in place: its pages are the weights.
        assert!(
            resident * 2 > file_kib,
            "only {resident} KiB of the {file_kib} KiB file resident, yet the kernels read it"
        );
    }
}
