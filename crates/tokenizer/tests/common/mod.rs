//! Shared helpers for the parity tests: finding the model and the oracle python, running the
//! oracle, and the project's skip convention.
#![allow(dead_code)]

use std::path::Path;
use std::process::Command;

use serde_json::Value;

// Not every test binary uses every input.
#[allow(unused_imports)]
pub use torchnative_testing::{default_model, model_and_oracle, oracle_python, temp_dir};

/// Runs tests/oracle/tokenizer_oracle.py on `jobs`; returns its per-job results.
pub fn run_oracle(python: &Path, jobs: &Value, workdir: &Path) -> Vec<Value> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/oracle/tokenizer_oracle.py");
    let request = workdir.join("request.json");
    let response = workdir.join("response.json");
    std::fs::write(
        &request,
        serde_json::to_vec(jobs).expect("serialize request"),
    )
    .expect("write request");
    let output = Command::new(python)
        .arg(&script)
        .arg(&request)
        .arg(&response)
        .arg(workdir)
        .env("TOKENIZERS_PARALLELISM", "false")
        .env("HF_HUB_OFFLINE", "1")
        .output()
        .expect("run oracle python");
    assert!(
        output.status.success(),
        "oracle failed: {}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let text = std::fs::read_to_string(&response).expect("read oracle response");
    match serde_json::from_str(&text).expect("oracle response is JSON") {
        Value::Array(results) => results,
        other => panic!("oracle response is not a list: {other}"),
    }
}

/// A JSON array of integers as token ids.
pub fn ids(value: &Value) -> Vec<u32> {
    value
        .as_array()
        .unwrap_or_else(|| panic!("expected an id list, got {value}"))
        .iter()
        .map(|v| v.as_u64().expect("id") as u32)
        .collect()
}

/// A mixed corpus: prose, code, numbers, whitespace runs, emoji (ZWJ sequences), CJK, accents,
/// Arabic, replacement characters, control characters, special-token strings inside text.
pub fn corpus() -> Vec<String> {
    let mut texts: Vec<String> = [
        "",
        " ",
        "Hello world",
        "Hello, world! How are you doing today?",
        " leading space",
        "trailing space ",
        "The quick brown fox jumps over the lazy dog. It's 5 o'clock; we'll see—they're here, I'd say.",
        "SHOUTING AND MiXeD CaSe wOrDs",
        "don't can't won't I'M YOU'RE we've they'd",
        "1 12 123 1234 12345 3.14159 -42 +7 1e-9 0x1F 1,000,000",
        "  1  22\t333\n4444",
        "x  12 a",
        "a\n\n2",
        "Year 2024: 99% of 1/3 == 0.333…",
        "fn main() {\n    let x: Vec<u32> = (0..10).map(|i| i * 2).collect();\n    println!(\"{:?}\", x);\n}\n",
        "def f(x):\n\tif x > 0:\n\t\treturn x ** 2\n\treturn None  # comment\n",
        "<html><body class=\"main\">&amp; &lt;tag&gt;</body></html>",
        "SELECT * FROM users WHERE id = 42 AND name LIKE '%bob%';",
        "    four spaces\n        eight spaces\n\n\n\nfour newlines",
        "tabs\t\t\tand\t mixed \t whitespace",
        "\r\nwindows\r\nline\r\nendings\r\n",
        "                                                                ",
        "\n\n\n\n\n\n\n\n",
        "\t",
        "emoji 😀😃😄 👍🏽 🇺🇸 🇯🇵",
        "family 👨‍👩‍👧‍👦 and 🏳️‍🌈 and 🧑🏿‍💻",
        "你好，世界！这是一个测试。",
        "日本語のテキストとカタカナ、ひらがな。",
        "한국어 텍스트입니다.",
        "café naïve résumé Ångström façade piñata Straße Ωμέγα",
        "e\u{301} composed vs é precomposed",
        "مرحبا بالعالم، هذا اختبار.",
        "שלום עולם",
        "Привет, мир! Ёжик.",
        "हिन्दी पाठ",
        "ไทย ภาษา",
        "replacement \u{FFFD} char and \u{FFFD}\u{FFFD}",
        "zero\u{200B}width\u{200D}joiner\u{FEFF}bom",
        "control \u{1}\u{7}\u{1B}[31mred\u{1B}[0m \u{7F}",
        "math ∑∫√∞≠≤≥ ± × ÷ → ⇒ ∀∃",
        "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n",
        "text with <|endoftext|> inside",
        "almost special <|im_start and |im_end|> and <|unknown|>",
        "<|im_start|><|im_start|><|im_end|>",
        "<repo_name>torchnative<file_sep>src/lib.rs",
        "URL: https://example.com/path?q=a+b&x=1#frag",
        "email: someone@example.org",
        "'s 't 're 've 'm 'll 'd",
        "ALL'S WELL THAT ENDS WELL'LL",
        "a\u{a0}b\u{2003}c\u{3000}d",
        "\u{85}next line\u{2028}line sep\u{2029}para sep",
        "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝕞𝕒𝕥𝕙 𝟙𝟚𝟛",
        "١٢٣ ٤٥٦ Arabic-Indic digits and ½ ⅓ superscript ²³",
        "!!!???...,,,;;;:::---___===+++***&&&^^^%%%$$$###@@@",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    // A long mixed document, to exercise long inputs.
    let long: String = texts
        .iter()
        .take(30)
        .cloned()
        .collect::<Vec<_>>()
        .join(" ")
        .repeat(4);
    texts.push(long);
    texts
}
