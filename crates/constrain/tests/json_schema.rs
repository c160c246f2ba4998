//! JSON schema and JSON mode: hand-picked documents, refusals by name, and the property test
//! (random schemas, random generation through the mask, output parsed by serde_json and
//! validated against the schema).
mod common;

use std::sync::Arc;

use common::{compile, matches, synthetic_vocab, Rng};
use serde_json::{json, Value};
use torchnative_constrain::{CompiledGrammar, Grammar, Matcher};

/// A validator for the supported subset.
fn valid(v: &Value, s: &Value, root: &Value) -> bool {
    let Some(m) = s.as_object() else {
        return s.as_bool().unwrap_or(false);
    };
    if let Some(r) = m.get("$ref").and_then(Value::as_str) {
        let target = root.pointer(r.trim_start_matches('#')).expect("ref target");
        return valid(v, target, root);
    }
    if let Some(c) = m.get("const") {
        if v != c {
            return false;
        }
    }
    if let Some(e) = m.get("enum").and_then(Value::as_array) {
        if !e.contains(v) {
            return false;
        }
    }
    if let Some(a) = m.get("anyOf").and_then(Value::as_array) {
        if !a.iter().any(|s| valid(v, s, root)) {
            return false;
        }
    }
    if let Some(t) = m.get("type") {
        let types: Vec<&str> = match t {
            Value::String(t) => vec![t.as_str()],
            Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
            _ => panic!("bad type"),
        };
        let ok = types.iter().any(|t| match *t {
            "string" => v.is_string(),
            "integer" => v.is_i64() || v.is_u64(),
            "number" => v.is_number(),
            "boolean" => v.is_boolean(),
            "null" => v.is_null(),
            "object" => v.is_object(),
            "array" => v.is_array(),
            _ => false,
        });
        if !ok {
            return false;
        }
    }
    if let Some(s) = v.as_str() {
        let n = s.chars().count() as u64;
        if m.get("minLength")
            .and_then(Value::as_u64)
            .is_some_and(|x| n < x)
            || m.get("maxLength")
                .and_then(Value::as_u64)
                .is_some_and(|x| n > x)
        {
            return false;
        }
    }
    if let Some(o) = v.as_object() {
        let props = m.get("properties").and_then(Value::as_object);
        for r in m
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if !o.contains_key(r.as_str().unwrap()) {
                return false;
            }
        }
        for (k, x) in o {
            let ok = match (props.and_then(|p| p.get(k)), m.get("additionalProperties")) {
                (Some(ps), _) => valid(x, ps, root),
                (None, Some(Value::Bool(false))) => false,
                (None, Some(a @ Value::Object(_))) => valid(x, a, root),
                (None, _) => true,
            };
            if !ok {
                return false;
            }
        }
    }
    if let Some(a) = v.as_array() {
        let n = a.len() as u64;
        if m.get("minItems")
            .and_then(Value::as_u64)
            .is_some_and(|x| n < x)
            || m.get("maxItems")
                .and_then(Value::as_u64)
                .is_some_and(|x| n > x)
        {
            return false;
        }
        if let Some(items) = m.get("items") {
            if !a.iter().all(|x| valid(x, items, root)) {
                return false;
            }
        }
    }
    true
}

fn schema_matches(schema: &Value, doc: &str) -> bool {
    matches(&compile(&Grammar::from_json_schema(schema).unwrap()), doc)
}

/// `schema` as text, so that properties keep their declared order.
fn check(schema: &str, good: &[&str], bad: &[&str]) {
    let c = compile(&Grammar::from_json_schema_str(schema).unwrap());
    let schema: Value = serde_json::from_str(schema).unwrap();
    for g in good {
        let v: Value = serde_json::from_str(g).unwrap();
        assert!(
            valid(&v, &schema, &schema),
            "test's own validator rejects {g}"
        );
        assert!(matches(&c, g), "should match: {g}");
    }
    for b in bad {
        if let Ok(v) = serde_json::from_str::<Value>(b) {
            assert!(
                !valid(&v, &schema, &schema) || b.contains("  "),
                "{b} is valid JSON for the schema"
            );
        }
        assert!(!matches(&c, b), "should not match: {b}");
    }
}

#[test]
fn nested_objects_in_declared_order() {
    let schema = r#"{
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "address": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "zip": {"type": ["string", "null"]}},
                "required": ["city", "zip"],
                "additionalProperties": false
            },
            "age": {"type": "integer"}
        },
        "required": ["name", "address"],
        "additionalProperties": false
    }"#;
    check(
        schema,
        &[
            r#"{"name": "Ann", "address": {"city": "Oslo", "zip": null}}"#,
            r#"{"name":"Ann","address":{"city":"Oslo","zip":"0150"},"age":-3}"#,
            "{\n  \"name\": \"é\\n\",\n  \"address\": {\"city\": \"\", \"zip\": null}\n}",
        ],
        &[
            r#"{"name": "Ann"}"#,
            r#"{"name": "Ann", "address": {"city": "Oslo", "zip": 5}}"#,
            r#"{"name": "Ann", "address": {"city": "Oslo", "zip": null}, "age": 1.5}"#,
            r#"{"name": "Ann", "address": {"city": "Oslo", "zip": null}, "x": 1}"#,
            "{\"name\": \"Ann\",                                \"address\": {\"city\": \"Oslo\", \"zip\": null}}",
        ],
    );
    // `from_json_schema_str` keeps the declared order even where the Value would sort it.
    let text =
        r#"{"type":"object","properties":{"z":{"const":1},"a":{"const":2}},"required":["z","a"]}"#;
    let c = compile(&Grammar::from_json_schema_str(text).unwrap());
    assert!(matches(&c, r#"{"z": 1, "a": 2}"#));
    assert!(!matches(&c, r#"{"a": 2, "z": 1}"#));
}

#[test]
fn arrays_with_bounds() {
    check(
        r#"{"type": "array", "items": {"type": "number"}, "minItems": 1, "maxItems": 3}"#,
        &["[1]", "[1, 2.5, -0.5e+10]", "[ 1 ,2,3 ]"],
        &["[]", "[1, 2, 3, 4]", "[\"1\"]", "[1,]"],
    );
    check(
        r#"{"type": "array", "maxItems": 0}"#,
        &["[]", "[ ]"],
        &["[1]"],
    );
    check(
        r#"{"type": "array", "minItems": 2}"#,
        &["[1, \"x\"]", "[null, {}, []]"],
        &["[1]", "[]"],
    );
}

#[test]
fn enums_const_any_of() {
    check(
        r#"{"enum": ["red", "green", 3, null, {"a": [1]}]}"#,
        &["\"red\"", "3", "null", "{\"a\":[1]}"],
        &["\"blue\"", "4", "\"Red\""],
    );
    check(r#"{"const": "x\"y"}"#, &[r#""x\"y""#], &[r#""xy""#]);
    check(
        r#"{"type": ["string", "null"], "enum": ["a", 1, null, 2.5]}"#,
        &["\"a\"", "null"],
        &["1", "2.5"],
    );
    check(
        r#"{"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 2}]}"#,
        &["12", "\"ab\"", "\"\""],
        &["\"abc\"", "1.5", "true"],
    );
}

const TREE: &str = r##"{
        "$defs": {
            "node": {
                "type": "object",
                "properties": {
                    "value": {"type": "integer"},
                    "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}
                },
                "required": ["value", "children"],
                "additionalProperties": false
            }
        },
        "$ref": "#/$defs/node"
    }"##;

#[test]
fn patterns_and_formats() {
    // (The test's validator does not know `pattern`: plain matching here.)
    let c = compile(
        &Grammar::from_json_schema_str(r#"{"type": "string", "pattern": "^[a-z]+-\\d{2}$"}"#)
            .unwrap(),
    );
    for good in ["\"ab-12\"", "\"z-00\""] {
        assert!(matches(&c, good), "{good}");
    }
    for bad in ["\"ab-1\"", "\"Ab-12\"", "\"ab-123\"", "\"xab-12 \""] {
        assert!(!matches(&c, bad), "{bad}");
    }
    // Unanchored: a search, as JSON schema defines `pattern`.
    let c =
        compile(&Grammar::from_json_schema_str(r#"{"type": "string", "pattern": "ab"}"#).unwrap());
    assert!(matches(&c, "\"ab\"") && matches(&c, "\"x ab y\""));
    assert!(!matches(&c, "\"a b\""));
    let c =
        compile(&Grammar::from_json_schema_str(r#"{"type": "string", "pattern": "^ab"}"#).unwrap());
    assert!(matches(&c, "\"abc\"") && !matches(&c, "\"cab\""));
    for (format, good, bad) in [
        ("date", "2024-02-29", "2024-2-29"),
        ("time", "23:59:60.5Z", "24:00:00Z"),
        (
            "date-time",
            "2024-02-29T12:00:00+01:00",
            "2024-02-29 12:00:00Z",
        ),
        (
            "uuid",
            "123e4567-e89b-12d3-a456-426614174000",
            "123e4567e89b12d3a456426614174000",
        ),
        ("ipv4", "192.168.0.255", "192.168.0.256"),
    ] {
        let c = compile(
            &Grammar::from_json_schema(&json!({"type": "string", "format": format})).unwrap(),
        );
        assert!(matches(&c, &format!("\"{good}\"")), "{format}: {good}");
        assert!(!matches(&c, &format!("\"{bad}\"")), "{format}: {bad}");
    }
}

fn tree_schema() -> Value {
    serde_json::from_str(TREE).unwrap()
}

#[test]
fn recursive_ref_tree() {
    check(
        TREE,
        &[
            r#"{"value": 1, "children": []}"#,
            r#"{"value": 1, "children": [{"value": 2, "children": [{"value": 3, "children": []}]}]}"#,
        ],
        &[
            r#"{"value": 1}"#,
            r#"{"value": 1, "children": [{"value": 2}]}"#,
            r#"{"value": 1, "children": [1]}"#,
        ],
    );
    // `definitions` and `#` work too.
    let s = json!({"definitions": {"n": {"type": "integer"}},
                   "type": "object", "properties": {"a": {"$ref": "#/definitions/n"}, "self": {"$ref": "#"}}});
    assert!(schema_matches(&s, r#"{"a": 1, "self": {"self": {}}}"#));
    assert!(!schema_matches(&s, r#"{"a": "1"}"#));
}

#[test]
fn json_mode_is_any_object() {
    let c = compile(&Grammar::json_object());
    for good in [
        "{}",
        r#"{"a": [1, {"b": null}], "c": "\u00e9"}"#,
        "{\n\t\"k\": -0.0e-5\n}",
    ] {
        assert!(matches(&c, good), "{good}");
    }
    for bad in [
        "[]",
        "1",
        "\"x\"",
        "{",
        "{\"a\" : 1,}",
        "{\"a\": 1} {}",
        "{\"a\": \"\\ud800\"}",
    ] {
        assert!(!matches(&c, bad), "{bad}");
    }
    let f = Grammar::from_response_format(&json!({"type": "json_object"})).unwrap();
    assert_eq!(f, Some(Grammar::json_object()));
    assert_eq!(
        Grammar::from_response_format(&json!({"type": "text"})).unwrap(),
        None
    );
    let g = Grammar::from_response_format(
        &json!({"type": "json_schema", "json_schema": {"name": "x", "strict": true, "schema": {"type": "integer"}}}),
    )
    .unwrap()
    .unwrap();
    assert!(matches(&compile(&g), "42"));
    assert!(Grammar::from_response_format(&json!({"type": "json_schema"})).is_err());
    assert!(Grammar::from_response_format(&json!({"type": "yaml"})).is_err());
}

#[test]
fn unsupported_keywords_are_refused_by_name() {
    let cases = [
        (
            json!({"type": "string", "pattern": "(?=a)b"}),
            "look-around",
        ),
        (
            json!({"type": "string", "pattern": "^a|b"}),
            "does not anchor every alternative",
        ),
        (
            json!({"type": "string", "pattern": "a\"b"}),
            "needs JSON escapes",
        ),
        (
            json!({"type": "string", "format": "email"}),
            "unsupported format 'email'",
        ),
        (
            json!({"type": "string", "format": "date", "maxLength": 3}),
            "together with",
        ),
        (json!({"type": "integer", "minimum": 0}), "'minimum'"),
        (json!({"oneOf": [{"type": "integer"}]}), "'oneOf'"),
        (
            json!({"type": "object", "properties": {"a": {"type": "strin"}}}),
            "unknown type 'strin'",
        ),
        (
            json!({"type": "object", "properties": {"a": {"not": {}}}}),
            "'not'",
        ),
        (
            json!({"$ref": "https://example.com/s.json"}),
            "only references inside",
        ),
        (json!({"$ref": "#/$defs/missing"}), "points at nothing"),
        (
            json!({"type": "object", "properties": {}, "required": ["a"]}),
            "'a' is not in",
        ),
        (json!({"enum": []}), "nothing is valid"),
        (json!(false), "matches nothing"),
        (
            json!({"type": "array", "maxItems": 100000}),
            "above the supported limit",
        ),
        (json!({"allOf": [{}, {}]}), "more than one"),
        (json!({"$ref": "#", "type": "integer"}), "beside 'type'"),
        (
            json!({"enum": ["abc"], "maxLength": 2}),
            "beside 'maxLength'",
        ),
        (json!({"type": "integer", "const": "1"}), "nothing is valid"),
        (json!({"enum": [1], "const": 1}), "together with"),
    ];
    for (schema, needle) in cases {
        let e = Grammar::from_json_schema(&schema).unwrap_err().to_string();
        assert!(e.contains(needle), "{schema}: {e}");
    }
    let e = Grammar::from_json_schema(&json!({"properties": {"a~b/c": {"maxContains": 1}}}))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("/properties/a~0b~1c") && e.contains("'maxContains'"),
        "{e}"
    );
    assert!(
        Grammar::from_json_schema(&json!({"title": "t", "x-extra": 1, "type": "null"})).is_ok()
    );
    assert!(Grammar::from_json_schema_str("{not json")
        .unwrap_err()
        .to_string()
        .contains("not valid JSON"));
}

/// A random schema from the supported subset.
fn random_schema(rng: &mut Rng, depth: usize) -> Value {
    let leaf = depth == 0;
    match rng.below(if leaf { 7 } else { 11 }) {
        0 => {
            let mut s = json!({"type": "string"});
            if rng.chance(40) {
                let min = rng.below(3);
                s["minLength"] = json!(min);
                s["maxLength"] = json!(min + rng.below(4));
            }
            s
        }
        1 => json!({"type": "integer"}),
        2 => json!({"type": "number"}),
        3 => json!({"type": "boolean"}),
        4 => json!({"type": ["string", "null"]}),
        5 => json!({"enum": ["a", "b c", 7, null, true, "é\"\\"]}),
        6 => json!({"const": {"k": [1, "x"]}}),
        7 | 8 => {
            let n = 1 + rng.below(4);
            let mut props = serde_json::Map::new();
            let mut required = Vec::new();
            for i in 0..n {
                let name = ["id", "na\"me", "ß", "value", "x y", "z"][rng.below(6)].to_string()
                    + &i.to_string();
                props.insert(name.clone(), random_schema(rng, depth - 1));
                if rng.chance(50) {
                    required.push(json!(name));
                }
            }
            let mut s = json!({"type": "object", "properties": props, "required": required});
            if rng.chance(50) {
                s["additionalProperties"] = json!(false);
            }
            s
        }
        9 => {
            let mut s = json!({"type": "array", "items": random_schema(rng, depth - 1)});
            if rng.chance(60) {
                let min = rng.below(3);
                s["minItems"] = json!(min);
                if rng.chance(70) {
                    s["maxItems"] = json!(min + rng.below(3));
                }
            }
            s
        }
        _ => json!({"anyOf": [random_schema(rng, depth - 1), random_schema(rng, depth - 1)]}),
    }
}

/// Generates by sampling uniformly from the mask; after half the budget, prefers EOS and
/// closing tokens so that documents finish.
fn generate(c: &Arc<CompiledGrammar>, rng: &mut Rng, budget: usize) -> Option<String> {
    let vocab = c.vocabulary().clone();
    let eos = vocab.eos_ids()[0];
    let closers: Vec<u32> = ["\"", "]", "}", "0", "null", "true", "1,", "\"}"]
        .iter()
        .filter_map(|s| {
            (0..vocab.len() as u32).find(|&t| vocab.token_bytes(t) == Some(s.as_bytes()))
        })
        .collect();
    let mut m = Matcher::new(c.clone());
    let mut out = Vec::new();
    for step in 0..budget {
        let allowed = m.allowed_tokens();
        assert!(!allowed.is_empty(), "empty mask");
        let finishing = step > budget / 2;
        let t = if allowed.contains(&eos) && (finishing || rng.chance(50)) {
            eos
        } else if finishing && rng.chance(80) {
            let c: Vec<u32> = closers
                .iter()
                .copied()
                .filter(|t| allowed.contains(t))
                .collect();
            if c.is_empty() {
                allowed[rng.below(allowed.len())]
            } else {
                c[rng.below(c.len())]
            }
        } else {
            allowed[rng.below(allowed.len())]
        };
        m.accept_token(t).unwrap();
        if t == eos {
            return Some(String::from_utf8(out).expect("grammar output is UTF-8"));
        }
        out.extend_from_slice(vocab.token_bytes(t).unwrap());
    }
    None
}

#[test]
fn property_random_schemas_generate_valid_documents() {
    let vocab = synthetic_vocab(7);
    let mut rng = Rng::new(2024);
    let mut finished = 0;
    let mut total = 0;
    for case in 0..120 {
        let schema = if case % 10 == 9 {
            tree_schema()
        } else {
            random_schema(&mut rng, 3)
        };
        let text = schema.to_string();
        let g = Grammar::from_json_schema_str(&text).unwrap_or_else(|e| panic!("{schema}: {e}"));
        let c = Arc::new(CompiledGrammar::new(&g, vocab.clone()).unwrap());
        for _ in 0..3 {
            total += 1;
            let Some(doc) = generate(&c, &mut rng, 400) else {
                continue;
            };
            finished += 1;
            let v: Value = serde_json::from_str(&doc)
                .unwrap_or_else(|e| panic!("output does not parse ({e}): {doc}\nschema {schema}"));
            assert!(
                valid(&v, &schema, &schema),
                "output {doc} is invalid for {schema}"
            );
        }
    }
    assert!(
        finished * 10 >= total * 8,
        "only {finished} of {total} generations finished"
    );
}
