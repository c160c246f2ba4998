//! The `torchnative` binary end to end on the default model.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use torchnative_testing::default_model as model;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_torchnative"))
}

fn run_ok(args: &[&str]) -> String {
    let out = bin().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn run_answers_and_json_parses() {
    let Some(m) = model() else { return };
    let m = m.to_str().unwrap();
    let text = run_ok(&["run", m, "What is 12 times 12?", "--max-tokens", "24"]);
    assert!(text.contains("12"), "{text}");
    let json: serde_json::Value = serde_json::from_str(&run_ok(&[
        "run",
        m,
        "What is 12 times 12?",
        "--max-tokens",
        "24",
        "--json",
    ]))
    .unwrap();
    assert_eq!(json["text"].as_str().unwrap().trim(), text.trim());
    let tokens = json["tokens"].as_array().unwrap();
    assert_eq!(
        json["usage"]["completion_tokens"].as_u64().unwrap() as usize,
        tokens.len()
    );
    assert!(["stop", "length"].contains(&json["finish_reason"].as_str().unwrap()));
    assert!(json["timings"]["time_to_first_token_ms"].as_f64().unwrap() > 0.0);
    // The binary installs the counting allocator; greedy decoding of a byte-level BPE model
    // allocates nothing per token (rayon's injector queue may add one block per 63 passes).
    let allocations = json["counters"]["allocations_in_decode_loop"]
        .as_u64()
        .expect("allocations_in_decode_loop is reported");
    assert!(
        allocations <= 1,
        "decode loop allocated {allocations} times"
    );
}

#[test]
fn info_and_tokenize_describe_the_model() {
    let Some(m) = model() else { return };
    let m = m.to_str().unwrap();
    let info: serde_json::Value = serde_json::from_str(&run_ok(&["info", m, "--json"])).unwrap();
    assert_eq!(info["architecture"], "llama");
    assert_eq!(info["layers"], 30);
    assert_eq!(info["vocab_size"], 49152);
    assert_eq!(info["kv_heads"], 3);
    assert_eq!(info["chat_template"], true);
    assert_eq!(info["loadable"], true);
    let types: Vec<&str> = info["weight_types"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["type"].as_str().unwrap())
        .collect();
    assert!(
        types.contains(&"Q4_1") && types.contains(&"Q8_0"),
        "{types:?}"
    );
    let tok: serde_json::Value =
        serde_json::from_str(&run_ok(&["tokenize", m, "Hello world", "--json"])).unwrap();
    assert_eq!(tok["pieces"], serde_json::json!(["Hello", "Ġworld"]));
    assert_eq!(tok["ids"].as_array().unwrap().len(), 2);
}

#[test]
fn errors_are_one_line_with_nonzero_exit() {
    let out = bin()
        .args(["run", "/nonexistent/model.gguf", "hi"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("/nonexistent/model.gguf"), "{err}");
    assert!(!err.contains("panicked"));
}

#[test]
fn chat_keeps_the_conversation_resets_and_survives_ctrl_c() {
    let Some(m) = model() else { return };
    let mut child = bin()
        .args(["chat", m.to_str().unwrap(), "--max-tokens", "400"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    // A long answer, interrupted once it has started streaming.
    writeln!(
        stdin,
        "Write a long story about a dragon who learns to cook."
    )
    .unwrap();
    let mut first = [0u8; 64];
    let n = stdout.read(&mut first).unwrap();
    assert!(n > 0, "the answer starts streaming");
    let started = Instant::now();
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    writeln!(stdin, "/reset").unwrap();
    writeln!(stdin, "What is 2 plus 2?").unwrap();
    writeln!(stdin, "/exit").unwrap();
    drop(stdin);
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "Ctrl-C during an answer must not end the program: {:?}",
        out.status
    );
    assert!(started.elapsed() < Duration::from_secs(120));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("conversation cleared"), "{stderr}");
    assert!(
        rest.contains('4') || rest.to_lowercase().contains("four"),
        "second answer: {rest}"
    );
}

/// `chat` in a real pseudo-terminal (driven by tests/pty/drive_chat.py): the prompt shows, an
/// answer streams, Ctrl-C stops it and returns to the prompt, /reset clears, a second question is
/// answered, Ctrl-D exits with status 0.
#[test]
fn chat_in_a_terminal_handles_ctrl_c_reset_and_eof() {
    let Some(m) = model() else { return };
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/pty/drive_chat.py");
    let out = Command::new("python3")
        .arg(&script)
        .arg(env!("CARGO_BIN_EXE_torchnative"))
        .arg(&m)
        .output()
        .expect("python3 runs the pty driver");
    assert!(
        out.status.success(),
        "driver failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for key in [
        "prompt_shown",
        "answer_streamed",
        "prompt_after_ctrl_c",
        "reset",
    ] {
        assert_eq!(report[key], true, "{key}: {report}");
    }
    let second = report["second_answer"].as_str().unwrap().to_lowercase();
    assert!(second.contains('4') || second.contains("four"), "{second}");
    assert_eq!(report["exit_code"], 0, "{report}");
}

#[test]
fn run_with_a_constraint_or_speculation() {
    let Some(m) = model() else { return };
    let m = m.to_str().unwrap();
    let schema = r#"{"type": "object", "properties": {"city": {"type": "string"}, "founded": {"type": "integer"}}, "required": ["city", "founded"], "additionalProperties": false}"#;
    let text = run_ok(&["run", m, "Describe Rome as JSON.", "--json-schema", schema]);
    let v: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
    assert!(v["city"].is_string() && v["founded"].is_i64(), "{v}");
    let grammar = std::env::temp_dir().join(format!("yes-no-{}.gbnf", std::process::id()));
    std::fs::write(&grammar, "root ::= (\"Yes\" | \"No\") \".\"\n").unwrap();
    let text = run_ok(&[
        "run",
        m,
        "Is the sky green?",
        "--grammar-file",
        grammar.to_str().unwrap(),
    ]);
    assert!(["Yes.", "No."].contains(&text.trim()), "{text}");
    let _ = std::fs::remove_file(&grammar);
    // Speculation changes the forward passes, not the answer.
    let prompt = "Repeat twice: the quick brown fox jumps over the lazy dog.";
    let plain = run_ok(&["run", m, prompt, "--max-tokens", "32", "--json"]);
    let spec = run_ok(&[
        "run",
        m,
        prompt,
        "--max-tokens",
        "32",
        "--json",
        "--prompt-lookup",
    ]);
    let (plain, spec): (serde_json::Value, serde_json::Value) = (
        serde_json::from_str(&plain).unwrap(),
        serde_json::from_str(&spec).unwrap(),
    );
    assert_eq!(plain["tokens"], spec["tokens"]);
    assert!(
        spec["speculative"]["accepted_tokens"].as_u64().unwrap() > 0,
        "{spec}"
    );
    // Bad constraints are one-line errors naming the syntax.
    let out = bin()
        .args(["run", m, "x", "--regex", "(?=a)b"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("regular expression"), "{err}");
}

#[test]
fn info_describes_a_gguf_it_cannot_run_and_says_why() {
    use torchnative_formats::gguf::{write_gguf, MetadataValue as V, TensorToWrite};
    use torchnative_quant::GgmlType;
    let dir = std::env::temp_dir().join(format!("tn-cli-info-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("tiny-mamba.gguf");
    let s = |x: &str| V::String(x.into());
    let metadata = vec![
        ("general.architecture".to_string(), s("mamba")),
        ("general.name".to_string(), s("tiny mamba")),
        ("mamba.block_count".to_string(), V::U32(2)),
        ("mamba.embedding_length".to_string(), V::U32(64)),
        ("mamba.context_length".to_string(), V::U32(1024)),
        ("tokenizer.ggml.model".to_string(), s("gpt2")),
        (
            "tokenizer.ggml.tokens".to_string(),
            V::Array(vec![s("a"), s("b"), s("c")]),
        ),
    ];
    let embed = vec![0u8; 64 * 3 * 4];
    let q8 = vec![0u8; 8 * 34];
    let tensors = [
        TensorToWrite {
            name: "token_embd.weight".into(),
            dims: vec![64, 3],
            ggml_type: GgmlType::F32,
            data: &embed,
        },
        TensorToWrite {
            name: "blk.0.ssm_in.weight".into(),
            dims: vec![64, 4],
            ggml_type: GgmlType::Q8_0,
            data: &q8,
        },
    ];
    write_gguf(&path, &metadata, &tensors).unwrap();
    let p = path.to_str().unwrap();

    let info: serde_json::Value = serde_json::from_str(&run_ok(&["info", p, "--json"])).unwrap();
    assert_eq!(info["loadable"], false);
    let why = info["unsupported"].as_str().unwrap();
    assert!(why.contains("mamba"), "{why}");
    assert_eq!(info["architecture"], "mamba");
    assert_eq!(info["name"], "tiny mamba");
    assert_eq!(info["parameters"], 64 * 3 + 64 * 4);
    assert_eq!(info["tensors"], 2);
    assert_eq!(info["layers"], 2.0);
    assert_eq!(info["hidden_size"], 64.0);
    assert_eq!(info["context_length"], 1024.0);
    assert_eq!(info["heads"], serde_json::Value::Null);
    assert_eq!(info["vocab_size"], 3);
    assert_eq!(info["tokenizer"], "gpt2");
    assert_eq!(
        info["tensor_types"],
        serde_json::json!([{"type": "F32", "tensors": 1}, {"type": "Q8_0", "tensors": 1}])
    );
    let text = run_ok(&["info", p]);
    assert!(
        text.contains("runs            no: ") && text.contains("mamba"),
        "{text}"
    );
    assert!(text.contains("F32 x1, Q8_0 x1"), "{text}");

    // A file that is not a whole GGUF is still an error naming it.
    let bytes = std::fs::read(&path).unwrap();
    let cut = dir.join("cut.gguf");
    std::fs::write(&cut, &bytes[..bytes.len() / 3]).unwrap();
    let out = bin()
        .args(["info", cut.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cut.gguf"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
