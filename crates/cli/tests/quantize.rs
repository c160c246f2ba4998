//! `torchnative quantize` end to end on the default model (SmolLM2-135M-Instruct Q4_1): every
//! output type is read back by our GGUF reader, loaded by our runtime (logits close to the
//! source's, generation works), loaded and run by llama.cpp (`llama-bench`), and has exactly
//! the per-tensor types llama-quantize chooses for the same file type. Bad inputs give one-line
//! errors.
//!
//! The model is required under `TORCHNATIVE_REQUIRE_ORACLE=1`, llama.cpp (scripts/build-llama-cpp.sh)
//! under `TORCHNATIVE_REQUIRE_LLAMA_CPP=1`; otherwise missing inputs skip with `skipped:`.

use std::path::{Path, PathBuf};
use std::process::Command;

use torchnative_formats::gguf::GgufFile;
use torchnative_runtime::{load_llm, GenerationConfig, LoadOptions, SessionOptions, WeightFormat};

use torchnative_testing::{default_model as model, oracle_python, safetensors_copy, temp_dir};

/// llama.cpp's bin dir (scripts/build-llama-cpp.sh), or `None` (skipped) unless required.
fn llama_cpp_bin() -> Option<PathBuf> {
    let needs = ["build/bin/llama-bench", "build/bin/llama-quantize"];
    Some(torchnative_testing::llama_cpp_root(&needs)?.join("build/bin"))
}

/// A short llama-bench run of `model`: does llama.cpp load and run it.
fn llama_bench(bin: &std::path::Path, model: &std::path::Path) -> Command {
    let mut cmd = Command::new(bin.join("llama-bench"));
    cmd.arg("-m").arg(model);
    // One thread: llama.cpp's spinning workers collapse when the machine is busy.
    cmd.args(["-p", "16", "-n", "4", "-r", "1", "-t", "1"]);
    // llama.cpp's repacked (AMX) weight buffers crash in this sandbox on AMX CPUs (SIGSEGV in
    // ggml_backend_amx_mul_mat); its plain CPU buffers still load and run every tensor.
    cmd.args(["--repack", "0"]);
    cmd
}

fn torchnative(args: &[&std::ffi::OsStr]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_torchnative"))
        .args(args)
        .output()
        .expect("cannot start torchnative")
}

fn quantize(input: &Path, output: &Path, ty: &str) -> serde_json::Value {
    let out = torchnative(&[
        "quantize".as_ref(),
        input.as_os_str(),
        output.as_os_str(),
        "--type".as_ref(),
        ty.as_ref(),
        "--json".as_ref(),
    ]);
    assert!(
        out.status.success(),
        "quantize --type {ty}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Every type the CLI accepts, with llama-quantize's name for it and `general.file_type`.
const TYPES: [(&str, &str, u32); 13] = [
    ("q4_0", "Q4_0", 2),
    ("q4_1", "Q4_1", 3),
    ("q5_0", "Q5_0", 8),
    ("q5_1", "Q5_1", 9),
    ("q8_0", "Q8_0", 7),
    ("q4_k_s", "Q4_K_S", 14),
    ("q4_k_m", "Q4_K_M", 15),
    ("q5_k_s", "Q5_K_S", 16),
    ("q5_k_m", "Q5_K_M", 17),
    ("q6_k", "Q6_K", 18),
    ("f16", "F16", 1),
    ("bf16", "BF16", 32),
    ("f32", "F32", 0),
];

/// llama-quantize's file of the same type from the same input (`--allow-requantize`).
fn llama_quantize(bin: &Path, input: &Path, ftype: &str, out: &Path) {
    let run = Command::new(bin.join("llama-quantize"))
        .arg("--allow-requantize")
        .arg(input)
        .arg(out)
        .arg(ftype)
        .arg("2")
        .output()
        .expect("cannot start llama-quantize");
    assert!(
        run.status.success(),
        "llama-quantize {ftype}: {}",
        String::from_utf8_lossy(&run.stderr)
    );
}

/// Tensors of `ours` whose type differs from `theirs`'s, and how many of the rest have
/// byte-identical data (K-quant tensors differ: our own quantizer; every other type is
/// quantized bit-identically to ggml's reference).
fn compare_with_llama_quantize(ours: &GgufFile, theirs: &GgufFile) -> (Vec<String>, usize, usize) {
    let mut type_diffs = Vec::new();
    let (mut identical, mut k_tensors) = (0, 0);
    assert_eq!(ours.tensors().len(), theirs.tensors().len());
    for t in ours.tensors() {
        let Some(r) = theirs.tensor(&t.name) else {
            type_diffs.push(format!("{} missing from llama-quantize's file", t.name));
            continue;
        };
        if r.ggml_type != t.ggml_type {
            type_diffs.push(format!(
                "{}: ours {} theirs {}",
                t.name, t.ggml_type, r.ggml_type
            ));
        } else if ours.tensor_data(t) == theirs.tensor_data(r) {
            identical += 1;
        } else if matches!(t.ggml_type.name(), "Q4_K" | "Q5_K" | "Q6_K") {
            k_tensors += 1;
        } else {
            type_diffs.push(format!("{}: {} data differs", t.name, t.ggml_type));
        }
    }
    (type_diffs, identical, k_tensors)
}

/// RMS of `a - b` over all logits relative to the RMS of `b`.
fn relative_rms(a: &[f32], b: &[f32]) -> f32 {
    let d: f64 = a.iter().zip(b).map(|(p, q)| f64::from(p - q).powi(2)).sum();
    let r: f64 = b.iter().map(|q| f64::from(*q).powi(2)).sum();
    (d / r).sqrt() as f32
}

fn argmax(x: &[f32]) -> usize {
    (0..x.len()).fold(0, |b, i| if x[i] > x[b] { i } else { b })
}

/// Bound on `relative_rms` of an output's logits against the source's over a 60-token prompt
/// (the source is Q4_1; f32 weights on both sides, so only the conversion differs). Copies are
/// exact. Requantizing to 4-5 bits moves this 135M model's logits by 0.15-0.4 (measured; the
/// same for llama-quantize's files, which are byte-identical for the non-K types); unrelated
/// logits would give about 1.4. The K types are also compared with llama-quantize's file.
fn logit_bound(ty: &str) -> f32 {
    match ty {
        "f32" | "q4_1" => 1e-3,
        "f16" | "bf16" => 0.01,
        "q8_0" => 0.06,
        "q6_k" => 0.1,
        _ => 0.6,
    }
}

fn logits_of(path: &Path, prompt: &[u32]) -> Vec<f32> {
    let options = LoadOptions {
        weight_format: WeightFormat::F32,
        threads: None,
    };
    load_llm(path.to_str().unwrap(), &options)
        .unwrap()
        .session(SessionOptions::default())
        .unwrap()
        .prefill_all_logits(prompt)
        .unwrap()
}

#[test]
fn every_type_is_read_run_by_both_engines_and_typed_like_llama_quantize() {
    let Some(model) = model() else { return };
    let llama = llama_cpp_bin();
    let dir = temp_dir("types");
    let source = GgufFile::open(&model).unwrap();
    let (prompt, vocab) = {
        let llm = load_llm(model.to_str().unwrap(), &LoadOptions::default()).unwrap();
        let ids = llm
            .tokenize(
                "The capital of France is Paris. The capital of Germany is Berlin. Water boils at \
                 100 degrees Celsius at sea level. def add(a, b):\n    return a + b\n\nThe \
                 quick brown fox jumps over the lazy dog. The capital of Italy is",
            )
            .unwrap();
        (ids, llm.config().vocab_size)
    };
    let ref_logits = logits_of(&model, &prompt);

    let mut failures = Vec::new();
    for (ty, llama_name, ftype) in TYPES {
        let out = dir.join(format!("{ty}.gguf"));
        let summary = quantize(&model, &out, ty);

        // Our reader: all tensors, all metadata, file type set.
        let file = GgufFile::open(&out).unwrap();
        assert_eq!(file.tensors().len(), source.tensors().len(), "{ty}");
        assert_eq!(summary["tensors"], source.tensors().len(), "{ty}");
        assert_eq!(
            summary["bytes_out"].as_u64().unwrap(),
            std::fs::metadata(&out).unwrap().len()
        );
        assert_eq!(
            file.get("general.file_type").unwrap().as_u64(),
            Some(ftype as u64)
        );
        for (key, value) in source.metadata() {
            if key != "general.file_type" && key != "general.quantization_version" {
                assert_eq!(file.get(key), Some(value), "{ty}: metadata {key}");
            }
        }

        // Our runtime: logits close to the source's, and it generates.
        let logits = logits_of(&out, &prompt);
        let rel = relative_rms(&logits, &ref_logits);
        let last = prompt.len() - 1;
        let top_same = argmax(&logits[last * vocab..]) == argmax(&ref_logits[last * vocab..]);
        let native = load_llm(out.to_str().unwrap(), &LoadOptions::default()).unwrap();
        let cfg = GenerationConfig {
            max_new_tokens: 8,
            ..Default::default()
        };
        let text = native.generate("Once upon a time", &cfg).unwrap().text;
        drop(native);
        println!(
            "{ty:7} {:>6.2}s {:>10} bytes  logits: rms(diff)/rms {rel:.4}, last top-1 same {top_same}, native text {text:?}",
            summary["seconds"].as_f64().unwrap(),
            summary["bytes_out"]
        );
        if rel > logit_bound(ty) {
            failures.push(format!(
                "{ty}: logits differ by {rel} > {}",
                logit_bound(ty)
            ));
        }
        if !top_same && logit_bound(ty) <= 0.1 {
            failures.push(format!("{ty}: the top token after the prompt changed"));
        }
        if text.trim().is_empty() {
            failures.push(format!("{ty}: native generation produced no text"));
        }

        if let Some(bin) = &llama {
            // llama.cpp loads and runs it.
            let bench = llama_bench(bin, &out)
                .args(["-o", "json"])
                .output()
                .expect("cannot start llama-bench");
            if !bench.status.success() {
                failures.push(format!(
                    "{ty}: llama-bench failed: {}",
                    String::from_utf8_lossy(&bench.stderr)
                ));
            } else {
                let rows: serde_json::Value = serde_json::from_slice(&bench.stdout).unwrap();
                let rates: Vec<String> = rows
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|r| format!("{:.0} t/s", r["avg_ts"].as_f64().unwrap()))
                    .collect();
                println!("        llama-bench pp16 / tg4: {}", rates.join(" / "));
            }
            // The same per-tensor types as llama-quantize, and the same bytes except for our
            // own K-quant tensors.
            let ref_path = dir.join(format!("{ty}.llama-quantize.gguf"));
            llama_quantize(bin, &model, llama_name, &ref_path);
            let reference = GgufFile::open(&ref_path).unwrap();
            let (diffs, identical, k) = compare_with_llama_quantize(&file, &reference);
            println!(
                "        vs llama-quantize {llama_name}: {identical} tensors byte-identical, {k} K-quant tensors (our quantizer), {} differences",
                diffs.len()
            );
            if !diffs.is_empty() {
                failures.push(format!("{ty} vs llama-quantize: {}", diffs.join("; ")));
            }
            if k > 0 {
                // Our K-quant tensors differ from llama.cpp's: the model must be as close to
                // the source with ours as with theirs.
                let theirs = relative_rms(&logits_of(&ref_path, &prompt), &ref_logits);
                println!("        logits of llama-quantize's file: rms(diff)/rms {theirs:.4}");
                if rel > 1.1 * theirs {
                    failures.push(format!(
                        "{ty}: logits differ from the source by {rel}, llama-quantize's file by {theirs}"
                    ));
                }
            }
            drop(reference);
            std::fs::remove_file(&ref_path).unwrap();
        }
        drop(file);
        std::fs::remove_file(&out).unwrap();
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A small GGUF written by our writer: one F32 matrix, one norm vector and, when `bad_tensor`,
/// an I32 matrix (no dequantization exists for it, so converting it fails midway).
fn small_gguf(path: &Path, bad_tensor: bool) {
    use torchnative_formats::gguf::{write_gguf, MetadataValue, TensorToWrite};
    use torchnative_quant::GgmlType;
    let matrix: Vec<u8> = (0..64 * 4)
        .flat_map(|i| ((i as f32 * 0.37).sin()).to_le_bytes())
        .collect();
    let norm: Vec<u8> = (0..64).flat_map(|_| 1f32.to_le_bytes()).collect();
    let metadata = vec![
        (
            "general.architecture".to_string(),
            MetadataValue::String("llama".into()),
        ),
        ("llama.block_count".to_string(), MetadataValue::U32(1)),
    ];
    let mut tensors = vec![
        TensorToWrite {
            name: "blk.0.attn_q.weight".into(),
            dims: vec![64, 4],
            ggml_type: GgmlType::F32,
            data: &matrix,
        },
        TensorToWrite {
            name: "blk.0.attn_norm.weight".into(),
            dims: vec![64],
            ggml_type: GgmlType::F32,
            data: &norm,
        },
    ];
    if bad_tensor {
        tensors.push(TensorToWrite {
            name: "blk.0.ffn_up.weight".into(),
            dims: vec![64, 4],
            ggml_type: GgmlType::I32,
            data: &matrix,
        });
    }
    write_gguf(path, &metadata, &tensors).unwrap();
}

fn fails_with(args: &[&std::ffi::OsStr], expected: &[&str]) {
    let out = torchnative(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{args:?} succeeded");
    assert_eq!(
        stderr.trim().lines().count(),
        1,
        "{args:?}: not one line: {stderr}"
    );
    for e in expected {
        assert!(stderr.contains(e), "{args:?}: {stderr:?} lacks {e:?}");
    }
}

fn os(v: &[std::ffi::OsString]) -> Vec<&std::ffi::OsStr> {
    v.iter().map(|s| s.as_os_str()).collect()
}

/// Files in `dir` other than `keep` (leftover temporaries).
fn others(dir: &Path, keep: &[&Path]) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| !keep.contains(&p.as_path()))
        .collect()
}

#[test]
fn bad_inputs_are_one_line_errors_and_leave_no_file() {
    let dir = temp_dir("bad");
    let input = dir.join("small.gguf");
    small_gguf(&input, false);
    let out = dir.join("out.gguf");
    let q = |i: &Path, o: &Path, t: &str| -> Vec<std::ffi::OsString> {
        vec![
            "quantize".into(),
            i.into(),
            o.into(),
            "--type".into(),
            t.into(),
        ]
    };

    // Unknown type: named, with the supported ones listed.
    fails_with(&os(&q(&input, &out, "q3_k")), &["'q3_k'", "q4_k_m", "bf16"]);
    // Missing input.
    fails_with(
        &os(&q(&dir.join("nope.gguf"), &out, "q8_0")),
        &["nope.gguf", "no such file"],
    );
    // Truncated GGUF: the reader's error, naming the file.
    let bytes = std::fs::read(&input).unwrap();
    let truncated = dir.join("truncated.gguf");
    std::fs::write(&truncated, &bytes[..bytes.len() - 100]).unwrap();
    fails_with(&os(&q(&truncated, &out, "q8_0")), &["truncated.gguf"]);
    assert!(!out.exists());

    // A good conversion, then the output exists: refused without --force, replaced with it.
    let ok = torchnative(&os(&q(&input, &out, "q8_0")));
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let file = GgufFile::open(&out).unwrap();
    let types: Vec<_> = file.tensors().iter().map(|t| t.ggml_type.name()).collect();
    assert_eq!(types, ["Q8_0", "F32"]);
    fails_with(&os(&q(&input, &out, "f16")), &["out.gguf", "--force"]);
    let mut forced = q(&input, &out, "f16");
    forced.push("--force".into());
    let ok = torchnative(&os(&forced));
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    assert_eq!(
        GgufFile::open(&out).unwrap().tensors()[0].ggml_type.name(),
        "F16"
    );

    // A failure midway (a tensor that cannot be converted) leaves neither the output nor a
    // temporary file behind, and an existing output untouched.
    let bad = dir.join("bad.gguf");
    small_gguf(&bad, true);
    let before = std::fs::read(&out).unwrap();
    let mut args = q(&bad, &out, "q8_0");
    args.push("--force".into());
    fails_with(&os(&args), &["blk.0.ffn_up.weight", "I32"]);
    assert_eq!(std::fs::read(&out).unwrap(), before);
    let fresh = dir.join("fresh.gguf");
    fails_with(&os(&q(&bad, &fresh, "q8_0")), &["blk.0.ffn_up.weight"]);
    assert!(!fresh.exists());
    let left = others(&dir, &[&input, &out, &truncated, &bad]);
    assert!(left.is_empty(), "left behind: {left:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A safetensors directory converts to the GGUF llama.cpp's converter would make of it: the
/// default model's copy comes back as the original file's tensors (f32: bit-identical to the
/// dequantized Q4_1 values, q/k rows permuted back) and vocabulary; both engines run the result.
#[test]
fn safetensors_directory_converts_to_the_original_gguf() {
    let Some(model) = model() else { return };
    let Some(python) = oracle_python() else {
        return;
    };
    // Shared with the runtime tests, made once.
    let hf_dir = safetensors_copy(&python, &model);
    let dir = temp_dir("hf");
    let source = GgufFile::open(&model).unwrap();

    let f32_out = dir.join("f32.gguf");
    let summary = quantize(&hf_dir, &f32_out, "f32");
    assert_eq!(summary["requantized_from"], serde_json::json!([]));
    let file = GgufFile::open(&f32_out).unwrap();
    assert_eq!(file.tensors().len(), source.tensors().len());
    for t in source.tensors() {
        let ours = file
            .tensor(&t.name)
            .unwrap_or_else(|| panic!("{} missing", t.name));
        assert_eq!(ours.dims, t.dims, "{}", t.name);
        let mut want = vec![0f32; t.n_elements() as usize];
        torchnative_quant::dequantize(t.ggml_type, source.tensor_data(t), &mut want).unwrap();
        let got: Vec<f32> = file
            .tensor_data(ours)
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        assert!(
            got == want,
            "{}: values differ from the original GGUF's",
            t.name
        );
    }
    // Hyperparameters and vocabulary as in the original. (tokenizer.ggml.pre is "gpt-2": the
    // tokenizer.json transformers saved splits like GPT-2, not like llama.cpp's "smollm".)
    for key in [
        "general.architecture",
        "llama.block_count",
        "llama.context_length",
        "llama.embedding_length",
        "llama.feed_forward_length",
        "llama.attention.head_count",
        "llama.attention.head_count_kv",
        "llama.rope.freq_base",
        "llama.attention.layer_norm_rms_epsilon",
        "llama.rope.dimension_count",
        "llama.vocab_size",
        "tokenizer.ggml.model",
        "tokenizer.ggml.tokens",
        "tokenizer.ggml.token_type",
        "tokenizer.ggml.merges",
        "tokenizer.ggml.bos_token_id",
        "tokenizer.ggml.eos_token_id",
        "tokenizer.ggml.unknown_token_id",
        "tokenizer.ggml.padding_token_id",
        "tokenizer.ggml.add_bos_token",
        "tokenizer.chat_template",
    ] {
        assert_eq!(file.get(key), source.get(key), "metadata {key}");
    }
    assert_eq!(
        file.get("tokenizer.ggml.pre").and_then(|v| v.as_str()),
        Some("gpt-2")
    );
    drop(file);

    // Our runtime: the GGUF computes what the safetensors directory computes.
    let f32_weights = LoadOptions {
        weight_format: WeightFormat::F32,
        threads: None,
    };
    let from_hf = load_llm(hf_dir.to_str().unwrap(), &f32_weights).unwrap();
    let from_gguf = load_llm(f32_out.to_str().unwrap(), &f32_weights).unwrap();
    let text = "Hello world! 12345 apples cost $3.50 each; naïve café 😀 def f(x):\n    return x";
    let ids = from_hf.tokenize(text).unwrap();
    assert_eq!(from_gguf.tokenize(text).unwrap(), ids, "token ids differ");
    let a = from_hf
        .session(SessionOptions::default())
        .unwrap()
        .prefill_all_logits(&ids)
        .unwrap();
    let b = from_gguf
        .session(SessionOptions::default())
        .unwrap()
        .prefill_all_logits(&ids)
        .unwrap();
    let rel = relative_rms(&b, &a);
    println!(
        "f32 GGUF from safetensors vs the safetensors directory: logits rms(diff)/rms {rel:.2e}"
    );
    assert!(rel < 1e-4, "logits differ: {rel}");
    let cfg = GenerationConfig {
        max_new_tokens: 16,
        ..Default::default()
    };
    let q = "What is the capital of France?";
    let messages = [torchnative_runtime::ChatMessage::new("user", q)];
    let want = from_hf.chat(&messages, &cfg).unwrap().text;
    assert_eq!(from_gguf.chat(&messages, &cfg).unwrap().text, want);
    drop((from_hf, from_gguf));

    // A quantized conversion: our runtime and llama.cpp run it.
    let q_out = dir.join("q4_k_m.gguf");
    let summary = quantize(&hf_dir, &q_out, "q4_k_m");
    println!(
        "safetensors -> q4_k_m: {:.2}s, {} -> {} bytes",
        summary["seconds"].as_f64().unwrap(),
        summary["bytes_in"],
        summary["bytes_out"]
    );
    let native = load_llm(q_out.to_str().unwrap(), &LoadOptions::default()).unwrap();
    let answer = native.chat(&messages, &cfg).unwrap().text;
    println!("q4_k_m from safetensors answers {answer:?}");
    assert!(!answer.trim().is_empty());
    if let Some(bin) = llama_cpp_bin() {
        // llama.cpp tokenizes with the converted vocabulary as the tokenizer.json does.
        let tok = Command::new(bin.join("llama-tokenize"))
            .arg("-m")
            .arg(&q_out)
            .args(["-p", text, "--ids", "--log-disable"])
            .output()
            .unwrap();
        assert!(
            tok.status.success(),
            "{}",
            String::from_utf8_lossy(&tok.stderr)
        );
        let stdout = String::from_utf8_lossy(&tok.stdout);
        let theirs: Vec<u32> = serde_json::from_str(stdout.trim().lines().last().unwrap()).unwrap();
        assert_eq!(theirs, ids, "llama.cpp's token ids");
        let bench = llama_bench(&bin, &q_out).output().unwrap();
        assert!(
            bench.status.success(),
            "llama-bench on the converted file: {}",
            String::from_utf8_lossy(&bench.stderr)
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
