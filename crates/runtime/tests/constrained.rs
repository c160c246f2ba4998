//! Constrained generation on the default model: JSON schema, JSON mode, GBNF and regular
//! expressions; the output always parses and validates, greedy and sampled, alone, with
//! speculation and through the engine.

mod common;

use serde_json::Value;
use torchnative_runtime::*;

fn llm() -> Option<Llm> {
    let path = common::default_model()?;
    Some(load_llm(path.to_str().unwrap(), &LoadOptions::default()).unwrap())
}

fn chat(llm: &Llm, text: &str) -> Vec<u32> {
    llm.tokenize_chat(&[ChatMessage::new("user", text)])
        .unwrap()
}

fn generate(llm: &Llm, prompt: &[u32], config: &GenerationConfig) -> Completion {
    let mut s = llm.session(SessionOptions::default()).unwrap();
    s.generate(prompt, config, &mut |_| Flow::Continue).unwrap()
}

const SCHEMA: &str = r#"{
    "type": "object",
    "properties": {
        "city": {"type": "string", "enum": ["Paris", "Rome", "Oslo", "Lima"]},
        "population": {"type": "integer"},
        "rivers": {"type": "array", "items": {"type": "string", "enum": ["Seine", "Tiber", "Akerselva", "Rimac"]}, "maxItems": 3},
        "capital": {"type": "boolean"}
    },
    "required": ["city", "population", "rivers", "capital"],
    "additionalProperties": false
}"#;

/// The schema's rules, checked by hand.
fn validates(v: &Value) -> Result<(), String> {
    let o = v.as_object().ok_or("not an object")?;
    let keys: Vec<&str> = o.keys().map(String::as_str).collect();
    let mut sorted = keys.clone();
    sorted.sort_unstable();
    if sorted != ["capital", "city", "population", "rivers"] {
        return Err(format!("keys {keys:?}"));
    }
    if !["Paris", "Rome", "Oslo", "Lima"].contains(&o["city"].as_str().ok_or("city")?) {
        return Err("city not in the enum".into());
    }
    if !(o["population"].is_i64() || o["population"].is_u64()) {
        return Err("population not an integer".into());
    }
    let rivers = o["rivers"].as_array().ok_or("rivers")?;
    if rivers.len() > 3
        || !rivers
            .iter()
            .all(|r| ["Seine", "Tiber", "Akerselva", "Rimac"].contains(&r.as_str().unwrap_or("")))
    {
        return Err("rivers".into());
    }
    o["capital"].as_bool().ok_or("capital")?;
    Ok(())
}

#[test]
fn json_schema_output_parses_and_validates_greedy_and_sampled() {
    let Some(llm) = llm() else {
        return;
    };
    let constraint = Constraint::parse(&llm, ConstraintSyntax::JsonSchema, SCHEMA).unwrap();
    let prompt = chat(&llm, "Describe the city of Paris as JSON.");
    let mut config = GenerationConfig {
        max_new_tokens: 200,
        constraint: Some(constraint.clone()),
        ..Default::default()
    };
    let done = generate(&llm, &prompt, &config);
    assert_eq!(done.finish_reason, FinishReason::Eos, "{}", done.text);
    let v: Value =
        serde_json::from_str(&done.text).unwrap_or_else(|e| panic!("{e}: {}", done.text));
    validates(&v).unwrap_or_else(|e| panic!("{e}: {}", done.text));
    // Unconstrained, the same prompt does not answer with bare JSON.
    config.constraint = None;
    let free = generate(&llm, &prompt, &config);
    assert!(
        serde_json::from_str::<Value>(&free.text).is_err(),
        "{}",
        free.text
    );
    // Sampling at temperature 1 with seeds: every finished answer validates.
    let mut finished = 0;
    for seed in 0..6 {
        let config = GenerationConfig {
            max_new_tokens: 200,
            seed: Some(seed),
            sampling: SamplingParams {
                do_sample: true,
                temperature: 1.0,
                ..Default::default()
            },
            constraint: Some(constraint.clone()),
            ..Default::default()
        };
        let done = generate(&llm, &prompt, &config);
        if done.finish_reason == FinishReason::Eos {
            let v: Value =
                serde_json::from_str(&done.text).unwrap_or_else(|e| panic!("{e}: {}", done.text));
            validates(&v).unwrap_or_else(|e| panic!("seed {seed}: {e}: {}", done.text));
            finished += 1;
        }
    }
    assert!(finished >= 4, "{finished} of 6 sampled answers finished");
}

#[test]
fn json_mode_gbnf_and_regex_constrain_the_text() {
    let Some(llm) = llm() else {
        return;
    };
    type Check = Box<dyn Fn(&str) -> bool>;
    let cases: Vec<(Constraint, &str, Check)> =
        vec![
        (
            Constraint::json_object(&llm).unwrap(),
            "Reply with a JSON object with two keys, name and age, for a cat called Tom aged 3.",
            Box::new(|t: &str| serde_json::from_str::<Value>(t).is_ok_and(|v| v.is_object())),
        ),
        (
            Constraint::parse(&llm, ConstraintSyntax::Gbnf, "root ::= (\"yes\" | \"no\") \".\"")
                .unwrap(),
            "Is the sky green?",
            Box::new(|t: &str| t == "yes." || t == "no."),
        ),
        (
            Constraint::parse(&llm, ConstraintSyntax::Regex, "[0-9]{3}-[0-9]{4}").unwrap(),
            "Make up a phone number.",
            Box::new(|t: &str| {
                let b = t.as_bytes();
                b.len() == 8
                    && b[3] == b'-'
                    && b.iter().enumerate().all(|(i, c)| i == 3 || c.is_ascii_digit())
            }),
        ),
    ];
    for (constraint, question, ok) in cases {
        let config = GenerationConfig {
            max_new_tokens: 120,
            constraint: Some(constraint.clone()),
            ..Default::default()
        };
        let done = generate(&llm, &chat(&llm, question), &config);
        assert_eq!(
            done.finish_reason,
            FinishReason::Eos,
            "{constraint:?}: {}",
            done.text
        );
        assert!(ok(&done.text), "{constraint:?}: {:?}", done.text);
    }
}

#[test]
fn constrained_output_is_the_same_with_speculation_and_in_the_engine() {
    let Some(llm) = llm() else {
        return;
    };
    let constraint = Constraint::parse(&llm, ConstraintSyntax::JsonSchema, SCHEMA).unwrap();
    let questions = [
        "Describe Rome as JSON.",
        "Describe Oslo as JSON.",
        "Describe Lima.",
    ];
    let config = GenerationConfig {
        max_new_tokens: 160,
        constraint: Some(constraint),
        ..Default::default()
    };
    let engine = Engine::start(llm.clone(), EngineConfig::default()).unwrap();
    let mut pending = Vec::new();
    for q in questions {
        let (_, rx) =
            common::submit_with_channel(&engine, chat(&llm, q), config.clone(), None).unwrap();
        pending.push(rx);
    }
    for (q, rx) in questions.iter().zip(pending) {
        let prompt = chat(&llm, q);
        let alone = generate(&llm, &prompt, &config);
        validates(&serde_json::from_str(&alone.text).unwrap()).unwrap();
        let batched = loop {
            match rx.recv().unwrap() {
                EngineEvent::Done(d) => break d,
                EngineEvent::Error(e) => panic!("{e}"),
                _ => {}
            }
        };
        assert_eq!(batched.tokens, alone.tokens, "{q}: engine");
        let mut sp = Speculator::new(&llm, SpeculativeConfig::prompt_lookup(4)).unwrap();
        let mut s = llm.session(SessionOptions::default()).unwrap();
        let spec = s
            .generate_speculative(&prompt, &config, &mut sp, &mut |_| Flow::Continue)
            .unwrap();
        assert_eq!(spec.tokens, alone.tokens, "{q}: speculative");
    }
}

#[test]
fn bad_grammars_are_refused_by_name() {
    let Some(llm) = llm() else {
        return;
    };
    for (syntax, text, want) in [
        (
            ConstraintSyntax::Gbnf,
            "root ::= \"a\" undefined-rule",
            "GBNF grammar",
        ),
        (ConstraintSyntax::Gbnf, "root ::= [a-", "GBNF grammar"),
        (
            ConstraintSyntax::JsonSchema,
            "{\"type\": \"strnig\"}",
            "JSON schema",
        ),
        (ConstraintSyntax::JsonSchema, "{not json", "JSON schema"),
        (ConstraintSyntax::Regex, "(a", "regular expression"),
        (ConstraintSyntax::Regex, "(?=a)b", "regular expression"),
    ] {
        let e = Constraint::parse(&llm, syntax, text)
            .err()
            .unwrap_or_else(|| panic!("{text} accepted"))
            .to_string();
        assert!(e.contains(want), "{text}: {e}");
    }
    let e = Constraint::from_response_format(&llm, &serde_json::json!({"type": "xml"}))
        .expect_err("refused")
        .to_string();
    assert!(e.contains("response_format"), "{e}");
    assert!(
        Constraint::from_response_format(&llm, &serde_json::json!({"type": "text"}))
            .unwrap()
            .is_none()
    );
}
