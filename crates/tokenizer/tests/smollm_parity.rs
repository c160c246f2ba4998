//! Parity of the default model's GGUF tokenizer with transformers, over a mixed corpus: encode in
//! every special-token mode, decode, `from_files` on transformers' saved tokenizer.json, and the
//! streaming detokenizer against the full decode.

mod common;

use std::path::Path;

use serde_json::{json, Value};
use torchnative_formats::gguf::GgufFile;
use torchnative_tokenizer::{DecodeOptions, EncodeOptions, StreamingDetokenizer, Tokenizer};

/// Whether `text` has a number character right after whitespace or another number character:
/// the only places where transformers' plain GPT-2 split (` ?\p{N}+` keeps such runs together)
/// and llama.cpp's smollm split (every `\p{N}` on its own first) can differ.
fn has_number_after_space_or_number(text: &str) -> bool {
    let chars: Vec<char> = text.chars().collect();
    chars
        .windows(2)
        .any(|w| w[1].is_numeric() && (w[0].is_whitespace() || w[0].is_numeric()))
}

fn mode(add_special_tokens: bool, parse_special: bool) -> (EncodeOptions, String) {
    let key = format!(
        "ids_add{}_split{}",
        u8::from(add_special_tokens),
        u8::from(!parse_special)
    );
    (
        EncodeOptions {
            add_special_tokens,
            parse_special,
        },
        key,
    )
}

fn assert_encodings_match(
    name: &str,
    tokenizer: &Tokenizer,
    texts: &[String],
    reference: &[Value],
) {
    let mut checked = 0;
    for (text, expected) in texts.iter().zip(reference) {
        for (add, parse) in [(false, true), (false, false), (true, true), (true, false)] {
            let (options, key) = mode(add, parse);
            let ours = tokenizer.encode(text, options).expect("encode");
            assert_eq!(
                ours,
                common::ids(&expected[&key]),
                "{name}: {key} of {text:?}"
            );
            checked += 1;
        }
    }
    assert_eq!(checked, texts.len() * 4);
}

#[test]
fn smollm_gguf_matches_transformers() {
    let Some((model, python)) = common::model_and_oracle() else {
        return;
    };
    let work = common::temp_dir("smollm");
    let saved = work.join("saved");
    let texts = common::corpus();
    let jobs = json!([{
        "kind": "encode_gguf",
        "gguf_dir": model.parent().expect("model dir"),
        "gguf_file": model.file_name().and_then(|n| n.to_str()).expect("model file name"),
        "pre_override": "smollm",
        "texts": texts,
        "save_to": saved,
    }]);
    let results = common::run_oracle(&python, &jobs, &work);
    let reference = &results[0];
    let expected = reference["texts"].as_array().expect("texts");

    let file = GgufFile::open(&model).expect("open GGUF");
    let tokenizer = Tokenizer::from_gguf(&file).expect("tokenizer from GGUF");

    assert_eq!(
        tokenizer.vocab_size() as u64,
        reference["vocab_size"].as_u64().unwrap()
    );
    assert_eq!(
        tokenizer.bos_id().map(u64::from),
        reference["bos_token_id"].as_u64()
    );
    assert_eq!(
        tokenizer.eos_ids().first().map(|&id| u64::from(id)),
        reference["eos_token_id"].as_u64()
    );
    assert_eq!(
        tokenizer.pad_id().map(u64::from),
        reference["pad_token_id"].as_u64()
    );
    let special: Vec<u32> = tokenizer.special_token_ids().iter().copied().collect();
    assert_eq!(special, common::ids(&reference["special_ids"]));

    assert_encodings_match("GGUF", &tokenizer, &texts, expected);

    // Decoding what transformers encoded gives transformers' text, with and without specials.
    for (text, entry) in texts.iter().zip(expected) {
        let ids = common::ids(&entry["ids_add1_split0"]);
        let keep = tokenizer
            .decode(
                &ids,
                DecodeOptions {
                    skip_special_tokens: false,
                },
            )
            .unwrap();
        let skip = tokenizer
            .decode(
                &ids,
                DecodeOptions {
                    skip_special_tokens: true,
                },
            )
            .unwrap();
        assert_eq!(
            keep,
            entry["decode_keep"].as_str().unwrap(),
            "decode of {text:?}"
        );
        assert_eq!(
            skip,
            entry["decode_skip"].as_str().unwrap(),
            "decode (skip special) of {text:?}"
        );
        // Byte-level BPE is lossless.
        assert_eq!(&keep, text, "round trip");
    }

    // Untouched transformers differs from the smollm split only around numbers.
    let plain = reference["plain"].as_array().expect("plain");
    let mut differing = 0;
    for ((text, entry), plain_ids) in texts.iter().zip(expected).zip(plain) {
        if common::ids(plain_ids) != common::ids(&entry["ids_add0_split0"]) {
            differing += 1;
            assert!(
                has_number_after_space_or_number(text),
                "unexpected divergence on {text:?}"
            );
        }
    }
    println!("{differing} corpus texts tokenize differently under transformers' plain GPT-2 split");

    // transformers' saved tokenizer.json (with the same split) loads through from_files.
    let from_files = Tokenizer::from_files(
        &saved.join("tokenizer.json"),
        Some(&saved.join("tokenizer_config.json")),
    )
    .expect("from_files");
    assert_encodings_match("from_files", &from_files, &texts, expected);
    assert_eq!(from_files.bos_id(), tokenizer.bos_id());
    assert_eq!(from_files.eos_ids().first(), tokenizer.eos_ids().first());
    assert_eq!(
        from_files.chat_template(),
        tokenizer.chat_template(),
        "chat_template.jinja is picked up"
    );

    check_streaming(&tokenizer, &texts);
    let _ = std::fs::remove_dir_all(&work);
}

/// Feeding ids one at a time yields valid pieces whose concatenation is the full decode.
fn check_streaming(tokenizer: &Tokenizer, texts: &[String]) {
    for skip_special_tokens in [false, true] {
        let options = DecodeOptions {
            skip_special_tokens,
        };
        for text in texts {
            let ids = tokenizer.encode(text, EncodeOptions::default()).unwrap();
            let full = tokenizer.decode(&ids, options).unwrap();
            let mut stream = StreamingDetokenizer::new(tokenizer.clone(), options);
            let mut joined = String::new();
            for &id in &ids {
                if let Some(piece) = stream.push(id).unwrap() {
                    assert!(
                        !piece.contains('\u{FFFD}') || full.contains('\u{FFFD}'),
                        "broken piece {piece:?}"
                    );
                    joined.push_str(&piece);
                }
            }
            if let Some(rest) = stream.finish().unwrap() {
                joined.push_str(&rest);
            }
            assert_eq!(joined, full, "streamed decode of {text:?}");
            // No piece may introduce U+FFFD: the text has exactly as many as the source.
            assert_eq!(
                joined.matches('\u{FFFD}').count(),
                full.matches('\u{FFFD}').count()
            );
        }
    }
}

#[test]
fn out_of_range_ids_name_the_id_and_size() {
    let Some(model) = common::default_model() else {
        return;
    };
    let tokenizer = Tokenizer::from_gguf(&GgufFile::open(Path::new(&model)).unwrap()).unwrap();
    let size = tokenizer.vocab_size();
    let err = tokenizer
        .decode(&[1, size as u32], DecodeOptions::default())
        .unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains(&format!("token id {size} is out of range")),
        "{message}"
    );
    assert!(message.contains(&format!("has {size} tokens")), "{message}");
    assert!(tokenizer
        .token_to_piece(u32::MAX)
        .unwrap_err()
        .to_string()
        .contains(&u32::MAX.to_string()));
    let mut stream = StreamingDetokenizer::new(tokenizer.clone(), DecodeOptions::default());
    assert!(stream.push(size as u32).is_err());
    // The SmolLM vocabulary is complete: every id below the size has a piece.
    assert_eq!(tokenizer.token_to_piece(1).unwrap(), "<|im_start|>");
    assert_eq!(tokenizer.token_id("<|im_end|>"), Some(2));
}
