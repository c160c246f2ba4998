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

/// A tiny random BERT cross-encoder built by transformers (the runtime's embedding oracle
/// script), for `torchnative rerank`.
fn tiny_cross_encoder(dir: &std::path::Path) -> Option<()> {
    let python = torchnative_testing::oracle_python()?;
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../runtime/tests/oracle/embed_reference.py");
    let texts: Vec<String> = (0..60)
        .map(|i| format!("the jury said {i} times that the city election was well run"))
        .chain(["a quiet river", "the county court", "ballots and voters"].map(String::from))
        .collect();
    let req = dir.with_extension("json");
    let request = serde_json::json!({"cmd": "tiny", "arch": "bert", "seed": 3, "texts": texts,
        "head": {"num_labels": 1}, "pooling": {"pooling_mode_cls_token": true},
        "normalize": false, "max_seq_length": 64, "out_dir": dir});
    std::fs::write(&req, serde_json::to_vec(&request).unwrap()).unwrap();
    let run = Command::new(python)
        .args(["-W", "ignore"])
        .arg(&script)
        .arg(&req)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    Some(())
}

#[test]
fn rerank_prints_the_library_scores_best_first() {
    use torchnative_runtime::{RerankOptions, Reranker};
    let work = temp_dir("cli-rerank");
    let dir = work.join("ce");
    let Some(()) = tiny_cross_encoder(&dir) else {
        return;
    };
    let query = "what did the jury say about the election";
    let docs = [
        "the county court",
        "the jury said the election was well run",
        "a quiet river",
    ];
    let want = Reranker::load(&dir)
        .unwrap()
        .score(query, &docs, &RerankOptions::default())
        .unwrap();
    let mut args = vec!["rerank".to_string(), dir.display().to_string()];
    args.extend(["--query".into(), query.into(), "--json".into()]);
    for d in docs {
        args.extend(["--doc".into(), d.into()]);
    }
    let out = bin().args(&args).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let results = v["results"].as_array().unwrap();
    assert_eq!(results.len(), 3);
    let mut last = f32::INFINITY;
    for r in results {
        let i = r["index"].as_u64().unwrap() as usize;
        let score = r["relevance_score"].as_f64().unwrap() as f32;
        assert_eq!(
            score, want.scores[i],
            "document {i} (JSON round-trips f32 exactly)"
        );
        assert_eq!(r["document"]["text"], docs[i]);
        assert!(score <= last, "best first");
        last = score;
    }
    let tokens: usize = want.token_counts.iter().sum();
    assert_eq!(v["usage"]["total_tokens"], tokens);
    // Text output, documents from standard input, the best one only.
    let mut child = bin()
        .args([
            "rerank",
            dir.to_str().unwrap(),
            "--query",
            query,
            "--top-n",
            "1",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(docs.join("\n").as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let best = results[0]["index"].as_u64().unwrap();
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(text.starts_with(&format!("1\t{best}\t")), "{text}");
    // An over-long pair is refused in one line, naming the document; --truncate scores it.
    let long = "ballots and voters ".repeat(40);
    let out = bin()
        .args([
            "rerank",
            dir.to_str().unwrap(),
            "--query",
            query,
            "--doc",
            &long,
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("document 0"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    let out = bin()
        .args([
            "rerank",
            dir.to_str().unwrap(),
            "--query",
            query,
            "--doc",
            &long,
        ])
        .arg("--truncate")
        .output()
        .unwrap();
    assert!(out.status.success());
    // A directory that is not there.
    let out = bin()
        .args(["rerank", "/nonexistent-dir", "--query", "q", "--doc", "d"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let _ = std::fs::remove_dir_all(&work);
}
