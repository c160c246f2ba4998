//! Rough timings for the default model's tokenizer: GGUF load, encode, decode, streaming, chat
//! template. Usage: `cargo run -p torchnative-tokenizer --example tokenizer_bench [MODEL.gguf]`
//! (default: $TORCHNATIVE_MODEL).

use std::path::PathBuf;
use std::time::Instant;

use torchnative_formats::gguf::GgufFile;
use torchnative_tokenizer::{
    ChatMessage, ChatTemplate, ChatTemplateOptions, DecodeOptions, EncodeOptions,
    StreamingDetokenizer, Tokenizer,
};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let model = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("TORCHNATIVE_MODEL").map(PathBuf::from))
        .ok_or("pass a GGUF path or set TORCHNATIVE_MODEL")?;

    let start = Instant::now();
    let file = GgufFile::open(&model)?;
    let opened = start.elapsed();
    let vocab = torchnative_tokenizer::GgufVocab::from_gguf(&file)?;
    let read = start.elapsed();
    let tokenizer = Tokenizer::from_gguf_vocab(&vocab)?;
    println!(
        "load: {:.1} ms (GGUF open {:.1} ms, vocab read {:.1} ms, tokenizer build {:.1} ms)",
        start.elapsed().as_secs_f64() * 1e3,
        opened.as_secs_f64() * 1e3,
        (read - opened).as_secs_f64() * 1e3,
        (start.elapsed() - read).as_secs_f64() * 1e3
    );

    let paragraph = "The quick brown fox jumps over the lazy dog, 42 times in 2024! \
        fn main() { println!(\"héllo 世界 😀\"); }\n\tIndented line with    spaces.\n";
    let text = paragraph.repeat(2000);
    let options = EncodeOptions {
        add_special_tokens: false,
        parse_special: true,
    };
    let start = Instant::now();
    let ids = tokenizer.encode(&text, options)?;
    let seconds = start.elapsed().as_secs_f64();
    println!(
        "encode: {} bytes -> {} tokens in {:.1} ms ({:.1} MB/s, {:.2} M tokens/s)",
        text.len(),
        ids.len(),
        seconds * 1e3,
        text.len() as f64 / seconds / 1e6,
        ids.len() as f64 / seconds / 1e6
    );

    let start = Instant::now();
    let decoded = tokenizer.decode(&ids, DecodeOptions::default())?;
    let seconds = start.elapsed().as_secs_f64();
    assert_eq!(decoded, text);
    println!(
        "decode: {:.1} ms ({:.2} M tokens/s)",
        seconds * 1e3,
        ids.len() as f64 / seconds / 1e6
    );

    let start = Instant::now();
    let mut stream = StreamingDetokenizer::new(tokenizer.clone(), DecodeOptions::default());
    let mut streamed = String::new();
    for &id in &ids {
        if let Some(piece) = stream.push(id)? {
            streamed.push_str(&piece);
        }
    }
    streamed.push_str(&stream.finish()?.unwrap_or_default());
    let seconds = start.elapsed().as_secs_f64();
    assert_eq!(streamed, text);
    println!(
        "streaming: {:.2} us per token",
        seconds / ids.len() as f64 * 1e6
    );

    if let Some(template) = ChatTemplate::from_tokenizer(&tokenizer) {
        let template = template?;
        let messages: Vec<ChatMessage> = (0..20)
            .map(|i| ChatMessage::new(if i % 2 == 0 { "user" } else { "assistant" }, paragraph))
            .collect();
        let options = ChatTemplateOptions {
            add_generation_prompt: true,
            ..Default::default()
        };
        let start = Instant::now();
        let rounds = 100;
        for _ in 0..rounds {
            template.render(&messages, &options)?;
        }
        println!(
            "chat template: {:.1} us per 20-turn render",
            start.elapsed().as_secs_f64() / rounds as f64 * 1e6
        );
    }
    Ok(())
}
