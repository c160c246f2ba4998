//! Per-token cost of constrained decoding: mean decode step time with and without a grammar,
//! alternating in one run (the grammar's mask cache warm after the first request).
//!
//! `cargo run --release -p torchnative-runtime --example constrained_bench -- MODEL [--reps N]`
use torchnative_runtime::*;

const SCHEMA: &str = r#"{"type": "object", "properties": {
    "name": {"type": "string"}, "age": {"type": "integer"},
    "hobbies": {"type": "array", "items": {"type": "string"}, "maxItems": 4},
    "address": {"type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
                "required": ["street", "city"], "additionalProperties": false}},
    "required": ["name", "age", "hobbies", "address"], "additionalProperties": false}"#;

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let reps: usize = args
        .iter()
        .position(|a| a == "--reps")
        .map_or(5, |i| args[i + 1].parse().expect("--reps N"));
    let llm = load_llm(&args[0], &LoadOptions::default())?;
    let prompt = llm.tokenize_chat(&[ChatMessage::new(
        "user",
        "Invent a person and describe them as JSON with name, age, hobbies and address.",
    )])?;
    let cases = [
        ("unconstrained", None),
        ("JSON mode", Some(Constraint::json_object(&llm)?)),
        (
            "JSON schema",
            Some(Constraint::parse(
                &llm,
                ConstraintSyntax::JsonSchema,
                SCHEMA,
            )?),
        ),
    ];
    // Warm each grammar's mask cache once (a first request pays for new cache entries).
    for (_, c) in &cases {
        let config = GenerationConfig {
            max_new_tokens: 128,
            constraint: c.clone(),
            ..Default::default()
        };
        llm.session(SessionOptions::default())?
            .generate(&prompt, &config, &mut |_| Flow::Continue)?;
    }
    let mut per_token: Vec<Vec<f64>> = vec![Vec::new(); cases.len()];
    let mut tokens = vec![0; cases.len()];
    for _ in 0..reps {
        for (j, (_, c)) in cases.iter().enumerate() {
            let config = GenerationConfig {
                max_new_tokens: 128,
                constraint: c.clone(),
                ..Default::default()
            };
            let done =
                llm.session(SessionOptions::default())?
                    .generate(&prompt, &config, &mut |_| Flow::Continue)?;
            let steps = &done.timings.decode_steps;
            let mean = steps.iter().map(|d| d.as_secs_f64()).sum::<f64>() / steps.len() as f64;
            per_token[j].push(mean * 1e6);
            tokens[j] = done.tokens.len();
        }
    }
    let median = |v: &[f64]| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let base = median(&per_token[0]);
    println!(
        "| case | tokens | decode step (median of {reps} means), us | overhead per token, us |"
    );
    println!("|---|---:|---:|---:|");
    for (j, (name, _)) in cases.iter().enumerate() {
        let m = median(&per_token[j]);
        println!("| {name} | {} | {m:.0} | {:+.0} |", tokens[j], m - base);
    }
    Ok(())
}
