//! GGUF vocabularies other than the default model's: a small SentencePiece (`llama`) vocabulary
//! with scores and byte fallback, and the default byte-level vocabulary under other `pre`
//! splits. The oracle writes each GGUF with the `gguf` package and loads it with transformers'
//! GGUF converter; we read the same file with torchnative-formats.

mod common;

use serde_json::{json, Value};
use torchnative_formats::gguf::GgufFile;
use torchnative_tokenizer::{
    DecodeOptions, EncodeOptions, GgufVocab, StreamingDetokenizer, Tokenizer,
};

const NORMAL: i32 = 1;
const UNKNOWN: i32 = 2;
const CONTROL: i32 = 3;
const USER_DEFINED: i32 = 4;
const BYTE: i32 = 6;

/// A tiny SentencePiece vocabulary: control tokens, all 256 byte-fallback tokens, single
/// characters, and merged pieces whose scores set the merge order (higher merges first).
fn sentencepiece_vocab() -> (Vec<String>, Vec<f32>, Vec<i32>) {
    let mut tokens = vec!["<unk>".to_string(), "<s>".to_string(), "</s>".to_string()];
    let mut scores = vec![0.0, 0.0, 0.0];
    let mut types = vec![UNKNOWN, CONTROL, CONTROL];
    for byte in 0..=255u8 {
        tokens.push(format!("<0x{byte:02X}>"));
        scores.push(0.0);
        types.push(BYTE);
    }
    let merged = [
        "▁t",
        "he",
        "▁the",
        "in",
        "er",
        "▁a",
        "an",
        "▁an",
        "nd",
        "▁and",
        "ll",
        "▁he",
        "llo",
        "▁hello",
        "or",
        "ld",
        "▁w",
        "▁wor",
        "▁world",
        "▁▁",
        "▁▁▁▁",
        "at",
        "▁c",
        "▁cat",
        "▁h",
        "▁hat",
        "ing",
        "▁s",
        "▁sing",
        "▁in",
        "▁th",
        "▁is",
        "is",
        "▁1",
        "12",
        "▁é",
    ];
    for (rank, piece) in merged.iter().enumerate() {
        tokens.push(piece.to_string());
        scores.push(-(rank as f32) - 1.0);
        types.push(NORMAL);
    }
    let singles: Vec<String> = "▁abcdefghijklmnopqrstuvwxyz.,!?'0123456789é"
        .chars()
        .map(String::from)
        .collect();
    for (rank, single) in singles.into_iter().enumerate() {
        tokens.push(single);
        scores.push(-1000.0 - rank as f32);
        types.push(NORMAL);
    }
    for (token, kind) in [
        ("<|user|>", USER_DEFINED),
        ("<|assistant|>", USER_DEFINED),
        ("<|end|>", CONTROL),
    ] {
        tokens.push(token.to_string());
        scores.push(0.0);
        types.push(kind);
    }
    (tokens, scores, types)
}

fn sentencepiece_corpus() -> Vec<String> {
    [
        "hello world",
        "the cat and the hat",
        "Hello World",
        " leading space",
        "  two leading spaces",
        "a    four   spaces",
        "singing in the rain",
        "is this the end?",
        "numbers 1 12 123 2024",
        "café é è ê",
        "emoji 😀 and 中文 and ZWJ 👨‍👩‍👧",
        "tabs\tand\nnewlines\r\n",
        "<s>hello</s>",
        "<|user|>hi<|end|><|assistant|>hello<|end|>",
        "<unk> literal",
        "the<|user|>cat",
        "",
        " ",
        "\u{FFFD} replacement",
        "x",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn assert_matches_reference(
    name: &str,
    tokenizer: &Tokenizer,
    texts: &[String],
    reference: &Value,
) {
    let entries = reference["texts"].as_array().expect("texts");
    for (text, entry) in texts.iter().zip(entries) {
        for (add_special_tokens, parse_special) in
            [(false, true), (false, false), (true, true), (true, false)]
        {
            let key = format!(
                "ids_add{}_split{}",
                u8::from(add_special_tokens),
                u8::from(!parse_special)
            );
            let options = EncodeOptions {
                add_special_tokens,
                parse_special,
            };
            let ours = tokenizer.encode(text, options).unwrap();
            assert_eq!(ours, common::ids(&entry[&key]), "{name}: {key} of {text:?}");
        }
        let ids = common::ids(&entry["ids_add1_split0"]);
        for (skip_special_tokens, key) in [(false, "decode_keep"), (true, "decode_skip")] {
            let options = DecodeOptions {
                skip_special_tokens,
            };
            let decoded = tokenizer.decode(&ids, options).unwrap();
            assert_eq!(
                decoded,
                entry[key].as_str().unwrap(),
                "{name}: {key} of {text:?}"
            );
            // Streaming gives the same text.
            let mut stream = StreamingDetokenizer::new(tokenizer.clone(), options);
            let mut joined = String::new();
            for &id in &ids {
                joined.push_str(&stream.push(id).unwrap().unwrap_or_default());
            }
            joined.push_str(&stream.finish().unwrap().unwrap_or_default());
            assert_eq!(joined, decoded, "{name}: streamed {key} of {text:?}");
        }
    }
    let special: Vec<u32> = tokenizer.special_token_ids().iter().copied().collect();
    // transformers lists its named special tokens (bos/eos/unk/pad) and the control tokens.
    assert_eq!(
        special,
        common::ids(&reference["special_ids"]),
        "{name}: special ids"
    );
}

#[test]
fn sentencepiece_gguf_matches_transformers() {
    let Some(python) = common::oracle_python() else {
        return;
    };
    let work = common::temp_dir("spm");
    let (tokens, scores, types) = sentencepiece_vocab();
    let texts = sentencepiece_corpus();
    let saved = work.join("saved");
    let jobs = json!([{
        "kind": "write_gguf_and_encode",
        "file_name": "spm.gguf",
        "save_to": saved,
        // No add_bos_token key: transformers and llama.cpp both default to adding BOS here.
        "metadata": {"model": "llama", "tokens": tokens, "scores": scores, "token_types": types,
                     "bos_id": 1, "eos_id": 2, "unk_id": 0, "add_space_prefix": true},
        "texts": texts,
    }]);
    let results = common::run_oracle(&python, &jobs, &work);
    let reference = &results[0];
    let file = GgufFile::open(std::path::Path::new(
        reference["gguf_path"].as_str().unwrap(),
    ))
    .unwrap();
    let tokenizer = Tokenizer::from_gguf(&file).expect("SentencePiece tokenizer from GGUF");
    assert_eq!(
        tokenizer.vocab_size() as u64,
        reference["vocab_size"].as_u64().unwrap()
    );
    assert_eq!(tokenizer.bos_id(), Some(1));
    assert_matches_reference("sentencepiece", &tokenizer, &texts, reference);

    // transformers' saved tokenizer.json + tokenizer_config.json load through from_files.
    let from_files = Tokenizer::from_files(
        &saved.join("tokenizer.json"),
        Some(&saved.join("tokenizer_config.json")),
    )
    .expect("from_files on the saved SentencePiece tokenizer");
    assert_matches_reference("sentencepiece from_files", &from_files, &texts, reference);
    let _ = std::fs::remove_dir_all(&work);
}

#[test]
fn byte_level_pre_splits_match_transformers() {
    let Some((model, python)) = common::model_and_oracle() else {
        return;
    };
    let work = common::temp_dir("pre");
    let texts = common::corpus();
    // Names transformers maps to the same split we use (gpt2/default fall back to GPT-2's).
    let pres = ["gpt2", "default", "llama-bpe", "qwen2"];
    let jobs: Vec<Value> = pres
        .iter()
        .map(|pre| {
            json!({"kind": "write_gguf_and_encode", "file_name": format!("{pre}.gguf"),
                   "copy_vocab_from": model, "metadata": {"pre": pre}, "texts": texts})
        })
        .collect();
    let results = common::run_oracle(&python, &Value::Array(jobs), &work);
    for (pre, reference) in pres.iter().zip(&results) {
        let file = GgufFile::open(std::path::Path::new(
            reference["gguf_path"].as_str().unwrap(),
        ))
        .unwrap();
        let vocab = GgufVocab::from_gguf(&file).unwrap();
        assert_eq!(vocab.pre.as_deref(), Some(*pre));
        let tokenizer = Tokenizer::from_gguf_vocab(&vocab).unwrap();
        assert_matches_reference(pre, &tokenizer, &texts, reference);
    }
    let _ = std::fs::remove_dir_all(&work);
}

#[test]
fn unknown_pre_and_model_are_refused_by_name() {
    let (tokens, scores, types) = sentencepiece_vocab();
    let mut vocab = GgufVocab {
        model: "gpt2".into(),
        pre: Some("mystery-split".into()),
        tokens: vec!["a".into(), "b".into(), "ab".into()],
        merges: Some(vec!["a b".into()]),
        ..GgufVocab::default()
    };
    let err = Tokenizer::from_gguf_vocab(&vocab).unwrap_err().to_string();
    assert!(
        err.contains("mystery-split") && err.contains("tokenizer.ggml.pre"),
        "{err}"
    );
    vocab.pre = Some("gpt2".into());
    assert!(Tokenizer::from_gguf_vocab(&vocab).is_ok());
    vocab.merges = Some(vec!["a b c".into()]);
    let err = Tokenizer::from_gguf_vocab(&vocab).unwrap_err().to_string();
    assert!(err.contains("merges[0]") && err.contains("a b c"), "{err}");

    let unsupported = GgufVocab {
        model: "bert".into(),
        tokens,
        scores: Some(scores),
        token_types: Some(types),
        ..GgufVocab::default()
    };
    let err = Tokenizer::from_gguf_vocab(&unsupported)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("\"bert\"") && err.contains("tokenizer.ggml.model"),
        "{err}"
    );
}

#[test]
fn malformed_vocabularies_are_errors_not_panics() {
    let base = GgufVocab {
        model: "llama".into(),
        tokens: vec!["<unk>".into(), "a".into()],
        scores: Some(vec![0.0, -1.0]),
        ..GgufVocab::default()
    };
    let cases = [
        (
            GgufVocab {
                tokens: vec![],
                scores: Some(vec![]),
                ..base.clone()
            },
            "empty",
        ),
        (
            GgufVocab {
                scores: Some(vec![0.0]),
                ..base.clone()
            },
            "scores has 1 entries for 2 tokens",
        ),
        (
            GgufVocab {
                token_types: Some(vec![1]),
                ..base.clone()
            },
            "token_type has 1 entries",
        ),
        (
            GgufVocab {
                bos_id: Some(7),
                ..base.clone()
            },
            "bos_token_id is 7, beyond the 2 tokens",
        ),
        (
            GgufVocab {
                scores: None,
                ..base.clone()
            },
            "neither merges nor scores",
        ),
        (
            GgufVocab {
                model: "gpt2".into(),
                scores: None,
                ..base.clone()
            },
            "no tokenizer.ggml.merges",
        ),
    ];
    for (vocab, expected) in cases {
        let err = Tokenizer::from_gguf_vocab(&vocab).unwrap_err().to_string();
        assert!(err.contains(expected), "expected {expected:?} in {err}");
    }
    assert!(Tokenizer::from_gguf_vocab(&base).is_ok());
}

/// `to_tokenizer_json` (the export) describes the same tokenizer `from_gguf_vocab` builds.
#[test]
fn exported_tokenizer_json_matches_direct_build() {
    let (tokens, scores, types) = sentencepiece_vocab();
    let mut vocabs = vec![GgufVocab {
        model: "llama".into(),
        tokens,
        scores: Some(scores),
        token_types: Some(types),
        bos_id: Some(1),
        eos_id: Some(2),
        unk_id: Some(0),
        ..GgufVocab::default()
    }];
    if let Some(model) = common::default_model() {
        vocabs.push(GgufVocab::from_gguf(&GgufFile::open(&model).unwrap()).unwrap());
    }
    let mut texts = sentencepiece_corpus();
    texts.extend(common::corpus());
    for vocab in vocabs {
        let direct = Tokenizer::from_gguf_vocab(&vocab).unwrap();
        let json = vocab.to_tokenizer_json().unwrap().to_string();
        let config = torchnative_tokenizer::TokenizerConfig {
            add_bos_token: Some(direct.bos_id().is_some() && vocab.model == "llama"),
            add_eos_token: Some(false),
            bos_token: direct.bos_token().map(str::to_string),
            eos_token: direct.eos_token().map(str::to_string),
            pad_token: direct.pad_token().map(str::to_string),
            unk_token: direct.unk_token().map(str::to_string),
            ..Default::default()
        };
        let exported = Tokenizer::from_json_str(&json, config).unwrap();
        for text in &texts {
            for parse_special in [true, false] {
                let options = EncodeOptions {
                    add_special_tokens: true,
                    parse_special,
                };
                let ids = direct.encode(text, options).unwrap();
                assert_eq!(
                    exported.encode(text, options).unwrap(),
                    ids,
                    "{}: {text:?}",
                    vocab.model
                );
                assert_eq!(
                    exported.decode(&ids, DecodeOptions::default()).unwrap(),
                    direct.decode(&ids, DecodeOptions::default()).unwrap()
                );
            }
        }
    }
}

/// GGUF metadata of the wrong shape is an error naming the key, index and type found.
#[test]
fn wrongly_typed_gguf_metadata_is_named() {
    use torchnative_formats::gguf::{gguf_bytes, MetadataValue as M};
    let strings =
        |items: &[&str]| M::Array(items.iter().map(|s| M::String(s.to_string())).collect());
    let valid = || {
        vec![
            ("tokenizer.ggml.model".to_string(), M::String("gpt2".into())),
            ("tokenizer.ggml.pre".to_string(), M::String("gpt2".into())),
            (
                "tokenizer.ggml.tokens".to_string(),
                strings(&["a", "b", "ab"]),
            ),
            ("tokenizer.ggml.merges".to_string(), strings(&["a b"])),
            (
                "tokenizer.ggml.token_type".to_string(),
                M::Array(vec![M::I32(1); 3]),
            ),
            ("tokenizer.ggml.bos_token_id".to_string(), M::U32(2)),
        ]
    };
    let load = |metadata: Vec<(String, M)>| {
        let file = GgufFile::from_bytes(gguf_bytes(&metadata, &[]).unwrap()).unwrap();
        Tokenizer::from_gguf(&file).map(|t| t.encode("abba", EncodeOptions::default()).unwrap())
    };
    // The valid file works: "abba" -> "ab", "b", "a".
    assert_eq!(load(valid()).unwrap(), [2, 1, 0]);
    let replace = |key: &str, value: M| {
        let mut metadata = valid();
        metadata.retain(|(k, _)| k != key);
        metadata.push((key.to_string(), value));
        metadata
    };
    let cases = [
        (
            replace("tokenizer.ggml.tokens", M::U32(3)),
            "tokenizer.ggml.tokens must be an array of string, found u32",
        ),
        // (GGUF arrays are homogeneous, so a wrong element type is wrong from element 0.)
        (
            replace("tokenizer.ggml.tokens", M::Array(vec![M::I32(5); 3])),
            "tokenizer.ggml.tokens[0] must be string, found i32",
        ),
        (
            replace("tokenizer.ggml.bos_token_id", M::I32(-1)),
            "tokenizer.ggml.bos_token_id must be an unsigned integer, found i32",
        ),
        (
            replace("tokenizer.ggml.bos_token_id", M::U64(1 << 40)),
            "does not fit a u32",
        ),
        (
            replace("tokenizer.ggml.bos_token_id", M::U32(3)),
            "bos_token_id is 3, beyond the 3 tokens",
        ),
        (
            replace("tokenizer.ggml.model", M::Bool(true)),
            "tokenizer.ggml.model must be a string, found bool",
        ),
        (
            replace("tokenizer.ggml.merges", strings(&["a z"])),
            "do not form a BPE model",
        ),
        (
            replace("tokenizer.ggml.token_type", M::Array(vec![M::F32(1.0); 3])),
            "token_type[0] must be i32, found f32",
        ),
    ];
    for (metadata, expected) in cases {
        let err = load(metadata).unwrap_err().to_string();
        assert!(err.contains(expected), "expected {expected:?} in {err}");
    }
    let mut no_tokens = valid();
    no_tokens.retain(|(k, _)| k != "tokenizer.ggml.tokens");
    assert!(load(no_tokens)
        .unwrap_err()
        .to_string()
        .contains("no tokenizer.ggml.tokens"));
}

/// `add_space_prefix = false` (llama.cpp's reading): no `▁` before the text and no leading
/// space stripped on decode. transformers ignores this key, so the expectations are derived by
/// hand from the vocabulary: "the" without a marker only merges "he" (score -2); with the
/// marker, "▁t"+"he" -> "▁the" wins.
#[test]
fn sentencepiece_space_prefix_flag() {
    let (tokens, scores, types) = sentencepiece_vocab();
    let vocab = |add_space_prefix| GgufVocab {
        model: "llama".into(),
        tokens: tokens.clone(),
        scores: Some(scores.clone()),
        token_types: Some(types.clone()),
        bos_id: Some(1),
        eos_id: Some(2),
        add_bos: Some(false),
        add_space_prefix: Some(add_space_prefix),
        ..GgufVocab::default()
    };
    let plain = EncodeOptions {
        add_special_tokens: false,
        parse_special: true,
    };
    let pieces = |tokenizer: &Tokenizer, text: &str| -> Vec<String> {
        let ids = tokenizer.encode(text, plain).unwrap();
        ids.iter()
            .map(|&id| tokenizer.token_to_piece(id).unwrap())
            .collect()
    };
    let with = Tokenizer::from_gguf_vocab(&vocab(true)).unwrap();
    let without = Tokenizer::from_gguf_vocab(&vocab(false)).unwrap();
    assert_eq!(pieces(&with, "the cat"), ["▁the", "▁cat"]);
    assert_eq!(pieces(&without, "the cat"), ["t", "he", "▁cat"]);
    for tokenizer in [&with, &without] {
        let ids = tokenizer.encode("the cat", plain).unwrap();
        assert_eq!(
            tokenizer.decode(&ids, DecodeOptions::default()).unwrap(),
            "the cat"
        );
    }
    // A leading space in the text survives decoding only without the prefix rule's strip...
    let ids = without.encode(" cat", plain).unwrap();
    assert_eq!(
        without.decode(&ids, DecodeOptions::default()).unwrap(),
        " cat"
    );
    // ...while with it, the text's own space already is the marker (no second one is added),
    // and decoding strips it: the leading space is lost, as in Hugging Face.
    let ids = with.encode(" cat", plain).unwrap();
    assert_eq!(pieces(&with, " cat"), ["▁cat"]);
    assert_eq!(with.decode(&ids, DecodeOptions::default()).unwrap(), "cat");
    // Byte fallback: "ü" is not in the vocabulary, so it becomes its two UTF-8 byte tokens.
    assert_eq!(pieces(&without, "ü"), ["<0xC3>", "<0xBC>"]);
}
