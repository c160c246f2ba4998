//! JSON schema (the subset OpenAI's structured outputs accept) and JSON mode, to GBNF.
//!
//! Supported: `type` (one or a list), `properties` (emitted in the order given; optional ones may
//! be left out), `required`, `additionalProperties` (`false`; a schema when there are no
//! `properties`; otherwise extra keys are simply never generated, which stays valid), `enum`,
//! `const`, `anyOf`, a one-element `allOf`, `$ref` to `#`, `#/$defs/...`, `#/definitions/...`
//! (recursion included), `items`, `minItems`/`maxItems`, `minLength`/`maxLength`, `pattern`
//! (a search, as JSON schema means it; generated strings use only characters that need no JSON
//! escape) and `format` for `date`, `time`, `date-time`, `uuid`, `ipv4`. Annotations
//! (`title`, `description`, `default`, `examples`, `$schema`, `$id`, `$comment`, `deprecated`,
//! `readOnly`, `writeOnly`, `$defs`, `definitions`) and `x-` keys are ignored. Every other keyword
//! is refused by name, since ignoring it could let through output the schema rejects.
//!
//! The grammar allows a bounded amount of whitespace between tokens (none, a space, or a newline
//! and up to 20 spaces/tabs), so a model cannot loop on whitespace, and bounds number lengths
//! (16 integer digits, 16 fraction digits, 2 exponent digits) so every number parses as f64.
//! String escapes `\uXXXX` exclude surrogates (serde_json refuses lone ones).
//!
//! serde_json's `Map` keeps keys sorted unless its `preserve_order` feature is on; without it
//! `properties` come out in name order. [`Grammar::from_json_schema_str`] reads schema text
//! itself and always keeps the declared order.

use std::collections::HashMap;
use std::fmt::Write as _;

use serde_json::Value;

use crate::error::{Error, Result};
use crate::grammar::{gbnf_literal, Grammar, MAX_REPETITION};

/// The rules every generated grammar shares (`json-value` is any JSON value).
macro_rules! primitives {
    () => {
        r#"ws ::= | " " | "\n" [ \t]{0,20}
json-value ::= json-object | json-array | json-string | json-number | json-bool | json-null
json-object ::= "{" ws ( json-string ws ":" ws json-value ws ( "," ws json-string ws ":" ws json-value ws )* )? "}"
json-array ::= "[" ws ( json-value ws ( "," ws json-value ws )* )? "]"
json-string ::= "\"" json-char* "\""
json-char ::= [^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" json-hex4 )
json-hex4 ::= [0-9a-cA-CefEF] json-hex json-hex json-hex | [dD] [0-7] json-hex json-hex
json-hex ::= [0-9a-fA-F]
json-int ::= "-"? ( "0" | [1-9] [0-9]{0,15} )
json-number ::= json-int ( "." [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,2} )?
json-bool ::= "true" | "false"
json-null ::= "null"
"#
    };
}
const PRIMITIVES: &str = primitives!();

/// JSON mode (`response_format={"type":"json_object"}`): any JSON object.
pub const JSON_OBJECT_GBNF: &str = concat!("root ::= json-object\n", primitives!());

/// A JSON value whose objects keep their key order (serde_json's `Value` sorts keys unless its
/// `preserve_order` feature is on). It implements `serde::Deserialize`, so a request type can
/// hold `response_format` as one and keep the schema's declared property order.
#[derive(Debug, Clone, PartialEq)]
pub struct OrderedJson(J);

impl From<&Value> for OrderedJson {
    fn from(v: &Value) -> Self {
        OrderedJson(J::from_value(v))
    }
}

impl std::str::FromStr for OrderedJson {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        serde_json::from_str(s).map_err(|e| Error::Schema {
            path: String::new(),
            message: format!("not valid JSON: {e}"),
        })
    }
}

impl<'de> serde::Deserialize<'de> for OrderedJson {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        J::deserialize(d).map(OrderedJson)
    }
}

#[derive(Debug, Clone, PartialEq)]
enum J {
    Null,
    Bool(bool),
    Num(serde_json::Number),
    Str(String),
    Arr(Vec<J>),
    Obj(Vec<(String, J)>),
}

impl J {
    fn from_value(v: &Value) -> J {
        match v {
            Value::Null => J::Null,
            Value::Bool(b) => J::Bool(*b),
            Value::Number(n) => J::Num(n.clone()),
            Value::String(s) => J::Str(s.clone()),
            Value::Array(a) => J::Arr(a.iter().map(J::from_value).collect()),
            Value::Object(o) => J::Obj(
                o.iter()
                    .map(|(k, v)| (k.clone(), J::from_value(v)))
                    .collect(),
            ),
        }
    }

    fn get(&self, key: &str) -> Option<&J> {
        match self {
            J::Obj(o) => o.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// Compact JSON text.
    fn to_json(&self, out: &mut String) {
        match self {
            J::Null => out.push_str("null"),
            J::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            J::Num(n) => out.push_str(&n.to_string()),
            J::Str(s) => out.push_str(&Value::String(s.clone()).to_string()),
            J::Arr(a) => {
                out.push('[');
                for (i, x) in a.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    x.to_json(out);
                }
                out.push(']');
            }
            J::Obj(o) => {
                out.push('{');
                for (i, (k, x)) in o.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&Value::String(k.clone()).to_string());
                    out.push(':');
                    x.to_json(out);
                }
                out.push('}');
            }
        }
    }
}

impl<'de> serde::Deserialize<'de> for J {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<J, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = J;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_bool<E>(self, b: bool) -> std::result::Result<J, E> {
                Ok(J::Bool(b))
            }
            fn visit_i64<E>(self, n: i64) -> std::result::Result<J, E> {
                Ok(J::Num(n.into()))
            }
            fn visit_u64<E>(self, n: u64) -> std::result::Result<J, E> {
                Ok(J::Num(n.into()))
            }
            fn visit_f64<E: serde::de::Error>(self, n: f64) -> std::result::Result<J, E> {
                serde_json::Number::from_f64(n)
                    .map(J::Num)
                    .ok_or_else(|| E::custom("non-finite number"))
            }
            fn visit_str<E>(self, s: &str) -> std::result::Result<J, E> {
                Ok(J::Str(s.to_string()))
            }
            fn visit_string<E>(self, s: String) -> std::result::Result<J, E> {
                Ok(J::Str(s))
            }
            fn visit_unit<E>(self) -> std::result::Result<J, E> {
                Ok(J::Null)
            }
            fn visit_none<E>(self) -> std::result::Result<J, E> {
                Ok(J::Null)
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut a: A,
            ) -> std::result::Result<J, A::Error> {
                let mut v = Vec::new();
                while let Some(x) = a.next_element()? {
                    v.push(x);
                }
                Ok(J::Arr(v))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut a: A,
            ) -> std::result::Result<J, A::Error> {
                let mut v = Vec::new();
                while let Some((k, x)) = a.next_entry::<String, J>()? {
                    v.push((k, x));
                }
                Ok(J::Obj(v))
            }
        }
        d.deserialize_any(V)
    }
}

const ANNOTATIONS: &[&str] = &[
    "$schema",
    "$id",
    "$comment",
    "title",
    "description",
    "default",
    "examples",
    "deprecated",
    "readOnly",
    "writeOnly",
    "$defs",
    "definitions",
];
const SUPPORTED: &[&str] = &[
    "type",
    "properties",
    "required",
    "additionalProperties",
    "enum",
    "const",
    "anyOf",
    "allOf",
    "$ref",
    "items",
    "minItems",
    "maxItems",
    "minLength",
    "maxLength",
    "pattern",
    "format",
];

/// `format`s generated (as regular expressions over the string's content); others are refused.
const FORMATS: &[(&str, &str)] = &[
    ("date", r"[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"),
    (
        "time",
        r"([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\.[0-9]{1,9})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])",
    ),
    (
        "date-time",
        r"[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\.[0-9]{1,9})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])",
    ),
    (
        "uuid",
        r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}",
    ),
    (
        "ipv4",
        r"((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])",
    ),
];
const MAX_DEPTH: usize = 128;

impl Grammar {
    /// The grammar of JSON documents valid against `schema` (see the module docs for the subset).
    /// Properties come in the `Value`'s key order.
    pub fn from_json_schema(schema: &Value) -> Result<Grammar> {
        schema_grammar(&J::from_value(schema))
    }

    /// Like [`Grammar::from_json_schema`] from schema text, keeping `properties` in their
    /// declared order.
    pub fn from_json_schema_str(schema: &str) -> Result<Grammar> {
        let j: OrderedJson = schema.parse()?;
        schema_grammar(&j.0)
    }

    /// Like [`Grammar::from_json_schema`], keeping `properties` in the order `schema` holds.
    pub fn from_json_schema_ordered(schema: &OrderedJson) -> Result<Grammar> {
        schema_grammar(&schema.0)
    }

    /// JSON mode: any JSON object.
    pub fn json_object() -> Grammar {
        Grammar::from_gbnf(JSON_OBJECT_GBNF).expect("the JSON-mode grammar parses")
    }

    /// The grammar for an OpenAI `response_format` value: `{"type":"text"}` gives `None`,
    /// `{"type":"json_object"}` JSON mode, `{"type":"json_schema","json_schema":{"schema":...}}`
    /// the schema's grammar (always enforced, whatever `strict` says).
    pub fn from_response_format(format: &Value) -> Result<Option<Grammar>> {
        Grammar::from_response_format_ordered(&OrderedJson::from(format))
    }

    /// [`Grammar::from_response_format`] keeping the schema's property order.
    pub fn from_response_format_ordered(format: &OrderedJson) -> Result<Option<Grammar>> {
        let err = |path: &str, message: &str| Error::Schema {
            path: path.into(),
            message: format!("response_format: {message}"),
        };
        let Some(J::Str(kind)) = format.0.get("type") else {
            return Err(err("", "needs a string 'type'"));
        };
        match kind.as_str() {
            "text" => Ok(None),
            "json_object" => Ok(Some(Grammar::json_object())),
            "json_schema" => {
                let Some(schema) = format.0.get("json_schema").and_then(|j| j.get("schema")) else {
                    return Err(err("/json_schema", "needs 'json_schema.schema'"));
                };
                schema_grammar(schema).map(Some)
            }
            other => Err(err(
                "/type",
                &format!("unsupported type '{other}' (text, json_object, json_schema)"),
            )),
        }
    }
}

/// The GBNF text [`Grammar::from_json_schema`] parses (for inspection and debugging).
pub fn json_schema_to_gbnf(schema: &Value) -> Result<String> {
    schema_gbnf(&J::from_value(schema))
}

fn schema_grammar(j: &J) -> Result<Grammar> {
    let text = schema_gbnf(j)?;
    Grammar::from_gbnf(&text).map_err(|e| Error::Schema {
        path: String::new(),
        message: format!("internal error: generated grammar does not parse: {e}"),
    })
}

fn schema_gbnf(j: &J) -> Result<String> {
    let mut c = Converter {
        root: j,
        rules: Vec::new(),
        refs: HashMap::new(),
        depth: 0,
    };
    let body = c.gen(j, "")?;
    let mut out = format!("root ::= {body}\n");
    for (name, body) in &c.rules {
        let _ = writeln!(out, "{name} ::= {body}");
    }
    out.push_str(PRIMITIVES);
    Ok(out)
}

struct Converter<'a> {
    root: &'a J,
    rules: Vec<(String, String)>,
    refs: HashMap<String, String>,
    depth: usize,
}

fn err(path: &str, message: impl Into<String>) -> Error {
    Error::Schema {
        path: path.to_string(),
        message: message.into(),
    }
}

/// Whether `v` is of JSON schema type `t`.
fn has_type(v: &J, t: &str) -> bool {
    match (t, v) {
        ("null", J::Null) | ("boolean", J::Bool(_)) | ("string", J::Str(_)) => true,
        ("array", J::Arr(_)) | ("object", J::Obj(_)) | ("number", J::Num(_)) => true,
        ("integer", J::Num(n)) => n.is_i64() || n.is_u64(),
        _ => false,
    }
}

fn literal_of(v: &J) -> String {
    let mut s = String::new();
    v.to_json(&mut s);
    gbnf_literal(&s)
}

fn count(v: Option<&J>, path: &str, key: &str) -> Result<Option<u32>> {
    match v {
        None => Ok(None),
        Some(J::Num(n)) => match n.as_u64() {
            Some(x) if x <= MAX_REPETITION as u64 => Ok(Some(x as u32)),
            Some(x) => Err(err(
                path,
                format!("'{key}' {x} is above the supported limit {MAX_REPETITION}"),
            )),
            None => Err(err(path, format!("'{key}' must be a non-negative integer"))),
        },
        Some(_) => Err(err(path, format!("'{key}' must be a non-negative integer"))),
    }
}

fn rep(min: u32, max: Option<u32>) -> String {
    match max {
        None => format!("{{{min},}}"),
        Some(m) => format!("{{{min},{m}}}"),
    }
}

impl Converter<'_> {
    fn new_rule(&mut self, hint: &str, body: String) -> String {
        let name = format!("{hint}-{}", self.rules.len());
        self.rules.push((name.clone(), body));
        name
    }

    fn gen(&mut self, s: &J, path: &str) -> Result<String> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(err(path, format!("schema nests deeper than {MAX_DEPTH}")));
        }
        let r = self.gen_inner(s, path);
        self.depth -= 1;
        r
    }

    fn gen_inner(&mut self, s: &J, path: &str) -> Result<String> {
        let map = match s {
            J::Bool(true) => return Ok("json-value".into()),
            J::Bool(false) => return Err(err(path, "the schema `false` matches nothing")),
            J::Obj(m) => m,
            _ => return Err(err(path, "a schema must be an object or a boolean")),
        };
        let mut validation: Vec<&str> = Vec::new();
        for (k, _) in map {
            if ANNOTATIONS.contains(&k.as_str()) || k.starts_with("x-") {
                continue;
            }
            if !SUPPORTED.contains(&k.as_str()) {
                return Err(err(path, format!("unsupported keyword '{k}'")));
            }
            validation.push(k);
        }
        let others = |except: &str| -> Vec<&str> {
            validation
                .iter()
                .copied()
                .filter(|k| *k != except)
                .collect()
        };
        if let Some(r) = s.get("$ref") {
            let rest = others("$ref");
            if let Some(k) = rest.first() {
                return Err(err(path, format!("'$ref' beside '{k}' is not supported")));
            }
            let J::Str(r) = r else {
                return Err(err(path, "'$ref' must be a string"));
            };
            return self.reference(r, path);
        }
        if s.get("const").is_some() || s.get("enum").is_some() {
            let values: Vec<&J> = match (s.get("const"), s.get("enum")) {
                (Some(v), None) => vec![v],
                (None, Some(J::Arr(values))) => values.iter().collect(),
                (None, Some(_)) => return Err(err(path, "'enum' must be an array")),
                _ => return Err(err(path, "'const' together with 'enum' is not supported")),
            };
            if let Some(k) = validation
                .iter()
                .find(|k| !matches!(**k, "const" | "enum" | "type"))
            {
                return Err(err(
                    path,
                    format!("'const'/'enum' beside '{k}' is not supported"),
                ));
            }
            // `type` beside them keeps the values of that type.
            let types: Option<Vec<&str>> = match s.get("type") {
                None => None,
                Some(J::Str(t)) => Some(vec![t.as_str()]),
                Some(J::Arr(ts)) => Some(
                    ts.iter()
                        .filter_map(|t| {
                            if let J::Str(t) = t {
                                Some(t.as_str())
                            } else {
                                None
                            }
                        })
                        .collect(),
                ),
                Some(_) => return Err(err(path, "'type' must be a string or an array")),
            };
            let alts: Vec<String> = values
                .into_iter()
                .filter(|v| {
                    types
                        .as_ref()
                        .is_none_or(|ts| ts.iter().any(|t| has_type(v, t)))
                })
                .map(literal_of)
                .collect();
            if alts.is_empty() {
                return Err(err(
                    path,
                    "no 'enum'/'const' value matches: nothing is valid",
                ));
            }
            return Ok(format!("( {} )", alts.join(" | ")));
        }
        for key in ["anyOf", "allOf"] {
            let Some(list) = s.get(key) else { continue };
            let rest = others(key);
            if let Some(k) = rest.first() {
                return Err(err(path, format!("'{key}' beside '{k}' is not supported")));
            }
            let J::Arr(list) = list else {
                return Err(err(path, format!("'{key}' must be an array")));
            };
            if list.is_empty() {
                return Err(err(path, format!("'{key}' is empty")));
            }
            if key == "allOf" && list.len() > 1 {
                return Err(err(
                    path,
                    "'allOf' with more than one schema is not supported",
                ));
            }
            let mut alts = Vec::new();
            for (i, sub) in list.iter().enumerate() {
                alts.push(self.gen(sub, &format!("{path}/{key}/{i}"))?);
            }
            return Ok(format!("( {} )", alts.join(" | ")));
        }
        let types: Vec<String> = match s.get("type") {
            None => {
                if s.get("properties").is_some() || s.get("additionalProperties").is_some() {
                    vec!["object".into()]
                } else if s.get("items").is_some()
                    || s.get("minItems").is_some()
                    || s.get("maxItems").is_some()
                {
                    vec!["array".into()]
                } else if s.get("minLength").is_some() || s.get("maxLength").is_some() {
                    vec!["string".into()]
                } else {
                    return Ok("json-value".into());
                }
            }
            Some(J::Str(t)) => vec![t.clone()],
            Some(J::Arr(ts)) if !ts.is_empty() => {
                let mut v = Vec::new();
                for t in ts {
                    let J::Str(t) = t else {
                        return Err(err(path, "'type' entries must be strings"));
                    };
                    v.push(t.clone());
                }
                v
            }
            Some(_) => return Err(err(path, "'type' must be a string or a non-empty array")),
        };
        let mut alts = Vec::new();
        for t in &types {
            alts.push(self.typed(t, s, path)?);
        }
        Ok(if alts.len() == 1 {
            alts.pop().expect("one")
        } else {
            format!("( {} )", alts.join(" | "))
        })
    }

    fn typed(&mut self, t: &str, s: &J, path: &str) -> Result<String> {
        match t {
            "string" => {
                if let Some(inner) = self.pattern(s, path)? {
                    return Ok(self.new_rule("pattern", format!("\"\\\"\" {inner} \"\\\"\"")));
                }
                let min = count(s.get("minLength"), path, "minLength")?.unwrap_or(0);
                let max = count(s.get("maxLength"), path, "maxLength")?;
                if max.is_some_and(|m| m < min) {
                    return Err(err(
                        path,
                        "'maxLength' is below 'minLength': nothing matches",
                    ));
                }
                if min == 0 && max.is_none() {
                    Ok("json-string".into())
                } else {
                    Ok(format!("\"\\\"\" json-char{} \"\\\"\"", rep(min, max)))
                }
            }
            "number" => Ok("json-number".into()),
            "integer" => Ok("json-int".into()),
            "boolean" => Ok("json-bool".into()),
            "null" => Ok("json-null".into()),
            "object" => self.object(s, path),
            "array" => self.array(s, path),
            other => Err(err(path, format!("unknown type '{other}'"))),
        }
    }

    /// The string content grammar for `pattern` or `format`, when the schema has one.
    fn pattern(&mut self, s: &J, path: &str) -> Result<Option<String>> {
        let pattern = match (s.get("pattern"), s.get("format")) {
            (None, None) => return Ok(None),
            (Some(_), Some(_)) => {
                return Err(err(
                    path,
                    "'pattern' together with 'format' is not supported",
                ))
            }
            (Some(J::Str(p)), None) => p.clone(),
            (None, Some(J::Str(f))) => match FORMATS.iter().find(|(n, _)| n == f) {
                Some((_, re)) => format!("^{re}$"),
                None => {
                    let known: Vec<&str> = FORMATS.iter().map(|(n, _)| *n).collect();
                    return Err(err(
                        path,
                        format!("unsupported format '{f}' (supported: {})", known.join(", ")),
                    ));
                }
            },
            _ => return Err(err(path, "'pattern' and 'format' must be strings")),
        };
        if s.get("minLength").is_some() || s.get("maxLength").is_some() {
            return Err(err(
                path,
                "'minLength'/'maxLength' together with 'pattern' or 'format' is not supported",
            ));
        }
        crate::regex::json_pattern_expr(&pattern)
            .map(Some)
            .map_err(|e| err(path, format!("'pattern' {pattern:?}: {e}")))
    }

    fn object(&mut self, s: &J, path: &str) -> Result<String> {
        let props: Vec<(String, J)> = match s.get("properties") {
            None => Vec::new(),
            Some(J::Obj(p)) => p.clone(),
            Some(_) => return Err(err(path, "'properties' must be an object")),
        };
        let required: Vec<String> = match s.get("required") {
            None => Vec::new(),
            Some(J::Arr(r)) => {
                let mut v = Vec::new();
                for x in r {
                    let J::Str(x) = x else {
                        return Err(err(path, "'required' entries must be strings"));
                    };
                    if !props.iter().any(|(k, _)| k == x) {
                        return Err(err(
                            path,
                            format!("required property '{x}' is not in 'properties'"),
                        ));
                    }
                    v.push(x.clone());
                }
                v
            }
            Some(_) => return Err(err(path, "'required' must be an array")),
        };
        let additional = s.get("additionalProperties");
        if props.is_empty() {
            return match additional {
                None | Some(J::Bool(true)) => Ok("json-object".into()),
                Some(J::Bool(false)) => Ok("\"{\" ws \"}\"".into()),
                Some(sub) => {
                    let v = self.gen(sub, &format!("{path}/additionalProperties"))?;
                    let kv = format!("json-string ws \":\" ws {v} ws");
                    Ok(self.new_rule(
                        "map",
                        format!("\"{{\" ws ( {kv} ( \",\" ws {kv} )* )? \"}}\""),
                    ))
                }
            };
        }
        // Each property as a rule `key ws ":" ws value ws`.
        let mut kv = Vec::with_capacity(props.len());
        for (name, sub) in &props {
            let pointer = format!(
                "{path}/properties/{}",
                name.replace('~', "~0").replace('/', "~1")
            );
            let v = self.gen(sub, &pointer)?;
            let key = literal_of(&J::Str(name.clone()));
            kv.push(self.new_rule("prop", format!("{key} ws \":\" ws {v} ws")));
        }
        let n = props.len();
        let is_req = |i: usize| required.contains(&props[i].0);
        // after(i): the properties from i on, each after a comma.
        let after = |i: usize| -> String {
            (i..n)
                .map(|j| {
                    if is_req(j) {
                        format!(" \",\" ws {}", kv[j])
                    } else {
                        format!(" ( \",\" ws {} )?", kv[j])
                    }
                })
                .collect()
        };
        // first(i): the properties from i on, none emitted yet.
        let mut next = String::new(); // first(n) is empty
        for i in (0..n).rev() {
            let body = if is_req(i) {
                format!("{}{}", kv[i], after(i + 1))
            } else if next.is_empty() {
                format!("| {}{}", kv[i], after(i + 1))
            } else {
                format!("{}{} | {next}", kv[i], after(i + 1))
            };
            next = self.new_rule("props", body);
        }
        Ok(self.new_rule("object", format!("\"{{\" ws {next} \"}}\"")))
    }

    fn array(&mut self, s: &J, path: &str) -> Result<String> {
        let item = match s.get("items") {
            None => "json-value".to_string(),
            Some(sub) => self.gen(sub, &format!("{path}/items"))?,
        };
        let min = count(s.get("minItems"), path, "minItems")?.unwrap_or(0);
        let max = count(s.get("maxItems"), path, "maxItems")?;
        if max.is_some_and(|m| m < min) {
            return Err(err(path, "'maxItems' is below 'minItems': nothing matches"));
        }
        let more = |lo: u32| format!("( \",\" ws {item} ws ){}", rep(lo, max.map(|m| m - 1)));
        let body = match (min, max) {
            (_, Some(0)) => "\"[\" ws \"]\"".to_string(),
            (0, _) => format!("\"[\" ws ( {item} ws {} )? \"]\"", more(0)),
            (m, _) => format!("\"[\" ws {item} ws {} \"]\"", more(m - 1)),
        };
        Ok(self.new_rule("array", body))
    }

    fn reference(&mut self, r: &str, path: &str) -> Result<String> {
        if let Some(name) = self.refs.get(r) {
            return Ok(name.clone());
        }
        let Some(pointer) = r.strip_prefix('#') else {
            return Err(err(
                path,
                format!("'$ref' '{r}': only references inside the schema ('#...') are supported"),
            ));
        };
        let mut target = self.root;
        if !pointer.is_empty() {
            let Some(rest) = pointer.strip_prefix('/') else {
                return Err(err(
                    path,
                    format!("'$ref' '{r}': anchors are not supported"),
                ));
            };
            for part in rest.split('/') {
                let part = part.replace("~1", "/").replace("~0", "~");
                target = match target {
                    J::Obj(_) => target.get(&part),
                    J::Arr(a) => part.parse::<usize>().ok().and_then(|i| a.get(i)),
                    _ => None,
                }
                .ok_or_else(|| err(path, format!("'$ref' '{r}' points at nothing")))?;
            }
        }
        let name = format!("ref-{}", self.rules.len());
        self.refs.insert(r.to_string(), name.clone());
        // Reserve the slot so the rule keeps its name while its body is generated.
        self.rules.push((name.clone(), String::new()));
        let slot = self.rules.len() - 1;
        let body = self.gen(target, pointer)?;
        self.rules[slot].1 = body;
        Ok(name)
    }
}
