//! `torchnative embed` end to end on all-MiniLM-L6-v2 (`scripts/fetch-encoder.sh`): plain and
//! JSON output agree with the library, stdin and --file inputs, one-line errors.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use torchnative_runtime::{EmbedOptions, Embedder};
use torchnative_testing::{missing, temp_dir, torchnative_home, Input};

fn minilm() -> Option<PathBuf> {
    let dir = torchnative_home().join("models/all-MiniLM-L6-v2");
    if dir.join(".complete").is_file() {
        Some(dir)
    } else {
        missing(
            Input::Oracle,
            "all-MiniLM-L6-v2 not fetched (run scripts/fetch-encoder.sh)",
        )
    }
}

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_torchnative"))
}

#[test]
fn embed_prints_the_library_embeddings_as_text_and_json() {
    let Some(dir) = minilm() else { return };
    let texts = [
        "The jury praised the city.",
        "A second, longer sentence about elections.",
    ];
    let want = Embedder::load(&dir)
        .unwrap()
        .embed(&texts, &EmbedOptions::default())
        .unwrap();

    let out = bin()
        .arg("embed")
        .arg(&dir)
        .args([
            "--text", texts[0], "--text", texts[1], "--json", "--batch", "1",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["object"], "list");
    assert_eq!(v["data"].as_array().unwrap().len(), 2);
    for i in 0..2 {
        assert_eq!(v["data"][i]["index"], i);
        let got: Vec<f32> = serde_json::from_value(v["data"][i]["embedding"].clone()).unwrap();
        assert_eq!(got, want.row(i), "text {i} (JSON round-trips f32 exactly)");
    }
    let tokens: usize = want.token_counts.iter().sum();
    assert_eq!(v["usage"]["prompt_tokens"], tokens);

    // Lines from standard input; plain output: one line of 384 values per text.
    let mut child = bin()
        .arg("embed")
        .arg(&dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    write!(
        child.stdin.take().unwrap(),
        "{}\n\n{}\n",
        texts[0],
        texts[1]
    )
    .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let lines: Vec<Vec<f32>> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| l.split(' ').map(|x| x.parse().unwrap()).collect())
        .collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[1], want.row(1));

    // --file, and a text over max_seq_length: one line on stderr naming it, non-zero exit.
    let work = temp_dir("cli-embed");
    let file = work.join("lines.txt");
    std::fs::write(&file, format!("short\n{}\n", "word ".repeat(300))).unwrap();
    let out = bin()
        .arg("embed")
        .arg(&dir)
        .arg("--file")
        .arg(&file)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("text 1") && err.contains("max_seq_length 256"),
        "{err}"
    );
    let out = bin()
        .arg("embed")
        .arg(&dir)
        .arg("--file")
        .arg(&file)
        .arg("--truncate")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 2);

    let out = bin()
        .arg("embed")
        .arg(work.join("absent"))
        .args(["--text", "x"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a directory"));
    let _ = std::fs::remove_dir_all(&work);
}
