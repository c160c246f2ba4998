//! Quick manual check: `cargo run -p torchnative-runtime --example smoke -- MODEL "question"`.
use torchnative_runtime::*;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let format = WeightFormat::parse(args.get(3).map(String::as_str).unwrap_or("native"))?;
    let llm = load_llm(
        &args[1],
        &LoadOptions {
            weight_format: format,
            threads: Some(2),
        },
    )?;
    let msgs = vec![ChatMessage::new("user", args[2].clone())];
    let mut s = llm.session(SessionOptions::default())?;
    let prompt = llm.tokenize_chat(&msgs)?;
    let cfg = GenerationConfig {
        max_new_tokens: 64,
        ..Default::default()
    };
    let done = s.generate(&prompt, &cfg, &mut |t| {
        print!("{t}");
        Flow::Continue
    })?;
    println!(
        "\n[{:?}] {} prompt, {} generated, prefill {:?}, decode {:.1} tok/s",
        done.finish_reason,
        done.usage.prompt_tokens,
        done.usage.completion_tokens,
        done.timings.prefill,
        done.timings.decode_tokens_per_second()
    );
    Ok(())
}
