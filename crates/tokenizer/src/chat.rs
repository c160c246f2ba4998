//! Jinja chat templates rendered the way transformers' `apply_chat_template(tokenize=False)` does.
//!
//! transformers renders with Jinja2 (`trim_blocks`, `lstrip_blocks`, loop controls) and adds
//! `raise_exception`, `strftime_now`, and a `tojson` that is plain `json.dumps`. We use minijinja
//! with its Python-compatibility methods (`.strip()`, `.items()`, ...) and the same additions.
//! Templates are untrusted: there is no loader (no file access), work is bounded by minijinja's
//! fuel, and output by a byte limit.

use std::io::Write;
use std::time::{SystemTime, UNIX_EPOCH};

use minijinja::value::{Kwargs, Value, ValueKind};
use minijinja::{AutoEscape, Environment, ErrorKind};
use serde::Serialize;

use crate::error::{Error, Result};
use crate::pyjson::{dumps, python_repr, DumpOptions};
use crate::tokenizer::Tokenizer;

/// Name the template is registered under (shows in error locations).
const TEMPLATE_NAME: &str = "chat_template";

/// One turn of a conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChatMessage {
    /// `system`, `user`, `assistant`, ...
    pub role: String,
    /// The turn's text.
    pub content: String,
}

impl ChatMessage {
    /// A message with the given role and content.
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> Self {
        ChatMessage {
            role: role.into(),
            content: content.into(),
        }
    }
}

/// Per-render settings.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChatTemplateOptions {
    /// End with the header that starts the assistant's reply.
    pub add_generation_prompt: bool,
    /// Further variables for the template, like apply_chat_template's extra keyword arguments:
    /// a JSON object whose keys become variables (e.g. `{"tools": [...], "enable_thinking":
    /// false}`), overriding the defaults of the same name. Key order inside is kept, as Python
    /// dicts keep it, so `tojson` prints objects in the order written.
    pub extra_variables_json: Option<String>,
}

/// Bounds on one render of an untrusted template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChatTemplateLimits {
    /// minijinja fuel: roughly the number of template instructions one render may execute.
    pub fuel: u64,
    /// Largest rendered output, in bytes.
    pub max_output_bytes: usize,
}

impl Default for ChatTemplateLimits {
    fn default() -> Self {
        ChatTemplateLimits {
            fuel: 50_000_000,
            max_output_bytes: 16 << 20,
        }
    }
}

/// The special-token strings a template sees as `bos_token`, `eos_token`, `unk_token`, `pad_token`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ChatTemplateTokens {
    /// `bos_token`.
    pub bos_token: Option<String>,
    /// `eos_token`.
    pub eos_token: Option<String>,
    /// `unk_token`.
    pub unk_token: Option<String>,
    /// `pad_token`.
    pub pad_token: Option<String>,
}

/// A compiled chat template.
#[derive(Debug)]
pub struct ChatTemplate {
    env: Environment<'static>,
    tokens: ChatTemplateTokens,
    limits: ChatTemplateLimits,
}

impl ChatTemplate {
    /// Compiles `source` with the default [`ChatTemplateLimits`].
    pub fn new(source: &str, tokens: ChatTemplateTokens) -> Result<Self> {
        Self::with_limits(source, tokens, ChatTemplateLimits::default())
    }

    /// Compiles `source` with explicit limits.
    pub fn with_limits(
        source: &str,
        tokens: ChatTemplateTokens,
        limits: ChatTemplateLimits,
    ) -> Result<Self> {
        let mut env = Environment::new();
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.set_keep_trailing_newline(false);
        env.set_auto_escape_callback(|_| AutoEscape::None);
        // Jinja2 prints a list or dict with Python's str(): quotes as repr, not JSON.
        env.set_formatter(|out, state, value| match value.kind() {
            ValueKind::Seq | ValueKind::Map => {
                let mut text = String::new();
                python_repr(&mut text, value, 0)?;
                out.write_str(&text).map_err(minijinja::Error::from)
            }
            _ => minijinja::escape_formatter(out, state, value),
        });
        env.set_fuel(Some(limits.fuel));
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function("raise_exception", raise_exception);
        env.add_function("strftime_now", strftime_now);
        env.add_filter("tojson", tojson);
        env.add_template_owned(TEMPLATE_NAME, neutralize_generation_tags(source))
            .map_err(|e| Error::Template(describe(&e)))?;
        Ok(ChatTemplate {
            env,
            tokens,
            limits,
        })
    }

    /// The tokenizer's own template, with its special tokens. `None` when it has no template.
    pub fn from_tokenizer(tokenizer: &Tokenizer) -> Option<Result<Self>> {
        let tokens = ChatTemplateTokens {
            bos_token: tokenizer.bos_token().map(str::to_string),
            eos_token: tokenizer.eos_token().map(str::to_string),
            unk_token: tokenizer.unk_token().map(str::to_string),
            pad_token: tokenizer.pad_token().map(str::to_string),
        };
        tokenizer
            .chat_template()
            .map(|source| Self::new(source, tokens))
    }

    /// Renders the conversation to the prompt text.
    pub fn render(
        &self,
        messages: &[ChatMessage],
        options: &ChatTemplateOptions,
    ) -> Result<String> {
        let template = self
            .env
            .get_template(TEMPLATE_NAME)
            .map_err(|e| Error::Template(describe(&e)))?;
        // What transformers passes: tools and documents are None unless given.
        let mut context: Vec<(String, Value)> = vec![
            ("messages".into(), Value::from_serialize(messages)),
            (
                "add_generation_prompt".into(),
                Value::from(options.add_generation_prompt),
            ),
            ("tools".into(), Value::from(())),
            ("documents".into(), Value::from(())),
        ];
        let tokens = [
            ("bos_token", &self.tokens.bos_token),
            ("eos_token", &self.tokens.eos_token),
            ("unk_token", &self.tokens.unk_token),
            ("pad_token", &self.tokens.pad_token),
        ];
        for (name, token) in tokens {
            if let Some(token) = token {
                context.push((name.into(), Value::from(token.as_str())));
            }
        }
        if let Some(json) = &options.extra_variables_json {
            for (name, value) in parse_variables(json)? {
                context.retain(|(existing, _)| *existing != name);
                context.push((name, value));
            }
        }
        let context: Value = context.into_iter().collect();
        let mut output = LimitedWriter {
            bytes: Vec::new(),
            limit: self.limits.max_output_bytes,
        };
        match template.render_captured_to(context, &mut output) {
            Ok(_) => {}
            Err(e) if output.bytes.len() >= self.limits.max_output_bytes => {
                return Err(Error::Template(format!(
                    "output exceeds the limit of {} bytes ({})",
                    self.limits.max_output_bytes,
                    describe(&e)
                )))
            }
            Err(e) => return Err(Error::Template(describe(&e))),
        }
        String::from_utf8(output.bytes)
            .map_err(|e| Error::Template(format!("rendered output is not UTF-8: {e}")))
    }
}

/// transformers' `{% generation %}...{% endgeneration %}` only marks assistant text for its
/// token masks and renders its body unchanged. minijinja has no such tag, so each becomes
/// `{% if true %}` / `{% endif %}`, keeping any `-`/`+` whitespace control as written.
fn neutralize_generation_tags(source: &str) -> String {
    let mut out = String::with_capacity(source.len());
    let mut rest = source;
    while let Some(start) = rest.find("{%") {
        out.push_str(&rest[..start]);
        let tag = &rest[start..];
        match parse_generation_tag(tag) {
            Some((length, replacement)) => {
                out.push_str(&replacement);
                rest = &tag[length..];
            }
            None => {
                out.push_str("{%");
                rest = &tag[2..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// For text starting with `{%`: if it opens with a (end)generation tag, the tag's length and
/// its replacement.
fn parse_generation_tag(tag: &str) -> Option<(usize, String)> {
    let body = tag.strip_prefix("{%")?;
    let (left, body) = split_modifier(body);
    let trimmed = body.trim_start();
    let name_length = trimmed
        .find(|c: char| !c.is_ascii_alphabetic())
        .unwrap_or(trimmed.len());
    let statement = match &trimmed[..name_length] {
        "generation" => "if true",
        "endgeneration" => "endif",
        _ => return None,
    };
    let after_name = trimmed[name_length..].trim_start();
    let (right, after_modifier) = split_modifier(after_name);
    let after_close = after_modifier.strip_prefix("%}")?;
    let length = tag.len() - after_close.len();
    Some((length, format!("{{%{left} {statement} {right}%}}")))
}

/// Splits a leading `-` or `+` whitespace-control modifier off `text`.
fn split_modifier(text: &str) -> (&str, &str) {
    match text.chars().next() {
        Some('-') | Some('+') => text.split_at(1),
        _ => ("", text),
    }
}

/// Reads a JSON object into (name, value) pairs, keeping key order at every level.
fn parse_variables(json: &str) -> Result<Vec<(String, Value)>> {
    let bad = |why: String| Error::Template(format!("extra_variables_json: {why}"));
    // minijinja's own deserializer builds order-preserving maps (its preserve_order feature).
    let value: Value = serde_json::from_str(json).map_err(|e| bad(format!("invalid JSON: {e}")))?;
    if value.kind() != minijinja::value::ValueKind::Map {
        return Err(bad(format!(
            "must be a JSON object, found {}",
            value.kind()
        )));
    }
    let mut variables = Vec::new();
    for key in value.try_iter().map_err(|e| bad(e.to_string()))? {
        let name = key.as_str().unwrap_or_default().to_string();
        let item = value.get_item(&key).map_err(|e| bad(e.to_string()))?;
        variables.push((name, item));
    }
    Ok(variables)
}

/// A minijinja error with its cause chain, so a template's own message is never lost.
fn describe(error: &minijinja::Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    text
}

/// Collects output, failing once it would pass `limit` bytes.
struct LimitedWriter {
    bytes: Vec<u8>,
    limit: usize,
}

impl Write for LimitedWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.bytes.len() + buf.len() > self.limit {
            self.bytes
                .extend_from_slice(&buf[..self.limit - self.bytes.len()]);
            return Err(std::io::Error::other("chat template output limit reached"));
        }
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// `raise_exception(message)`: the template reports an error of its own.
fn raise_exception(message: String) -> std::result::Result<Value, minijinja::Error> {
    Err(minijinja::Error::new(ErrorKind::InvalidOperation, message))
}

/// `tojson(value, indent=None, ensure_ascii=False, sort_keys=False, separators=None)`.
fn tojson(value: Value, kwargs: Kwargs) -> std::result::Result<Value, minijinja::Error> {
    let indent: Option<Value> = kwargs.get("indent")?;
    let indent = match indent {
        None => None,
        Some(v) if v.is_none() => None,
        // json.dumps: an int is that many spaces, a string is used as is.
        Some(v) => match (v.as_i64(), v.as_str()) {
            (Some(n), _) => Some(" ".repeat(n.clamp(0, 64) as usize)),
            (None, Some(s)) => Some(s.to_string()),
            _ => {
                return Err(minijinja::Error::new(
                    ErrorKind::InvalidOperation,
                    "tojson: indent must be an integer or a string",
                ))
            }
        },
    };
    let mut options = DumpOptions::new(indent);
    if let Some(ensure_ascii) = kwargs.get::<Option<bool>>("ensure_ascii")? {
        options.ensure_ascii = ensure_ascii;
    }
    if let Some(sort_keys) = kwargs.get::<Option<bool>>("sort_keys")? {
        options.sort_keys = sort_keys;
    }
    if let Some(separators) = kwargs.get::<Option<Vec<String>>>("separators")? {
        match separators.as_slice() {
            [item, key] => {
                options.item_separator = item.clone();
                options.key_separator = key.clone();
            }
            _ => {
                return Err(minijinja::Error::new(
                    ErrorKind::InvalidOperation,
                    "tojson: separators must be a pair (item_separator, key_separator)",
                ))
            }
        }
    }
    kwargs.assert_all_used()?;
    Ok(Value::from_safe_string(dumps(&value, &options)?))
}

/// `strftime_now(format)`: the current UTC time formatted with C `strftime` directives.
fn strftime_now(format: String) -> std::result::Result<Value, minijinja::Error> {
    let seconds = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    strftime(&format, seconds).map(Value::from)
}

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const WEEKDAYS: [&str; 7] = [
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
];

/// Formats a Unix time (UTC) with the common `strftime` directives.
pub(crate) fn strftime(
    format: &str,
    unix_seconds: i64,
) -> std::result::Result<String, minijinja::Error> {
    let days = unix_seconds.div_euclid(86_400);
    let second_of_day = unix_seconds.rem_euclid(86_400);
    let (year, month, day) = civil_from_days(days);
    let (hour, minute, second) = (
        second_of_day / 3600,
        second_of_day / 60 % 60,
        second_of_day % 60,
    );
    let weekday = (days + 3).rem_euclid(7) as usize; // 1970-01-01 was a Thursday; 0 = Monday
    let day_of_year = days - days_from_civil(year, 1, 1) + 1;
    let month_name = MONTHS[(month - 1) as usize];
    let weekday_name = WEEKDAYS[weekday];
    let mut out = String::new();
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let Some(directive) = chars.next() else {
            out.push('%');
            break;
        };
        match directive {
            'Y' => out.push_str(&year.to_string()),
            'y' => out.push_str(&format!("{:02}", year.rem_euclid(100))),
            'm' => out.push_str(&format!("{month:02}")),
            'd' => out.push_str(&format!("{day:02}")),
            'e' => out.push_str(&format!("{day:2}")),
            'B' => out.push_str(month_name),
            'b' | 'h' => out.push_str(&month_name[..3]),
            'A' => out.push_str(weekday_name),
            'a' => out.push_str(&weekday_name[..3]),
            'H' => out.push_str(&format!("{hour:02}")),
            'I' => out.push_str(&format!("{:02}", (hour + 11) % 12 + 1)),
            'p' => out.push_str(if hour < 12 { "AM" } else { "PM" }),
            'M' => out.push_str(&format!("{minute:02}")),
            'S' => out.push_str(&format!("{second:02}")),
            'j' => out.push_str(&format!("{day_of_year:03}")),
            'F' => out.push_str(&format!("{year}-{month:02}-{day:02}")),
            'T' => out.push_str(&format!("{hour:02}:{minute:02}:{second:02}")),
            'Z' => out.push_str("UTC"),
            'z' => out.push_str("+0000"),
            '%' => out.push('%'),
            other => {
                return Err(minijinja::Error::new(
                    ErrorKind::InvalidOperation,
                    format!("strftime_now: unsupported directive %{other}"),
                ))
            }
        }
    }
    Ok(out)
}

/// Days since 1970-01-01 -> (year, month, day), proleptic Gregorian.
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * day_of_year + 2) / 153; // March = 0
    let day = day_of_year - (153 * shifted_month + 2) / 5 + 1;
    let month = if shifted_month < 10 {
        shifted_month + 3
    } else {
        shifted_month - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// (year, month, day) -> days since 1970-01-01.
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year.rem_euclid(400);
    let shifted_month = (month + 9) % 12;
    let day_of_year = (153 * shifted_month + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chat_template_is_send_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<ChatTemplate>();
    }

    #[test]
    fn strftime_matches_known_dates() {
        // 2024-02-29T13:05:09Z is 1709211909 (leap day, a Thursday).
        assert_eq!(
            strftime("%Y-%m-%d %H:%M:%S %A %a %B %b %j %y %I%p %%", 1_709_211_909).unwrap(),
            "2024-02-29 13:05:09 Thursday Thu February Feb 060 24 01PM %"
        );
        assert_eq!(strftime("%d %B %Y", 0).unwrap(), "01 January 1970");
        assert!(strftime("%Q", 0).is_err());
        for days in [-1_000_000i64, -1, 0, 59, 10_957, 2_000_000] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
    }

    #[test]
    fn output_limit_and_fuel_are_enforced() {
        let limits = ChatTemplateLimits {
            fuel: 10_000,
            max_output_bytes: 100,
        };
        let long = ChatTemplate::with_limits(
            "{% for i in range(1000) %}xxxxxxxxxx{% endfor %}",
            ChatTemplateTokens::default(),
            ChatTemplateLimits {
                fuel: 1_000_000,
                ..limits
            },
        )
        .unwrap();
        let err = long
            .render(&[], &ChatTemplateOptions::default())
            .unwrap_err();
        assert!(err.to_string().contains("limit of 100 bytes"), "{err}");
        let busy = ChatTemplate::with_limits(
            "{% for i in range(100000) %}{% endfor %}",
            ChatTemplateTokens::default(),
            limits,
        )
        .unwrap();
        let err = busy
            .render(&[], &ChatTemplateOptions::default())
            .unwrap_err();
        assert!(err.to_string().contains("fuel"), "{err}");
    }

    #[test]
    fn generation_tags_render_their_body() {
        assert_eq!(
            neutralize_generation_tags("a{%- generation -%} b {%+endgeneration%}{% if x %}"),
            "a{%- if true -%} b {%+ endif %}{% if x %}"
        );
        assert_eq!(
            neutralize_generation_tags("{% generations %}{%"),
            "{% generations %}{%"
        );
        let template = ChatTemplate::new(
            "{% for m in messages %}{% generation %}[{{ m.content }}]{% endgeneration %}{% endfor %}",
            ChatTemplateTokens::default(),
        )
        .unwrap();
        let rendered = template
            .render(
                &[ChatMessage::new("assistant", "hi")],
                &ChatTemplateOptions::default(),
            )
            .unwrap();
        assert_eq!(rendered, "[hi]");
    }

    #[test]
    fn extra_variables_must_be_a_json_object() {
        let template = ChatTemplate::new("{{ x }}", ChatTemplateTokens::default()).unwrap();
        let render = |json: &str| {
            let options = ChatTemplateOptions {
                extra_variables_json: Some(json.to_string()),
                ..Default::default()
            };
            template.render(&[], &options)
        };
        assert_eq!(
            render(r#"{"x": {"b": 1, "a": 2}}"#).unwrap(),
            "{'b': 1, 'a': 2}"
        );
        assert!(render("[1]")
            .unwrap_err()
            .to_string()
            .contains("must be a JSON object"));
        assert!(render("{")
            .unwrap_err()
            .to_string()
            .contains("invalid JSON"));
    }

    #[test]
    fn printing_values_follows_jinja2() {
        // Jinja2 output for the same template (CPython 3, Jinja2 3.1).
        let template = ChatTemplate::new(
            "{{ true }}|{{ none }}|{{ [1, 'a', \"b'c\", none, true, 1.0, 2.5] }}|{{ {'k': [1]} }}|{{ 1.0 }}|{{ 3 / 2 }}|{{ 4 / 2 }}|{{ x }}",
            ChatTemplateTokens::default(),
        )
        .unwrap();
        assert_eq!(
            template
                .render(&[], &ChatTemplateOptions::default())
                .unwrap(),
            r#"True|None|[1, 'a', "b'c", None, True, 1.0, 2.5]|{'k': [1]}|1.0|1.5|2.0|"#
        );
    }

    #[test]
    fn no_loader_means_no_file_access() {
        let template =
            ChatTemplate::new("{% include '/etc/passwd' %}", ChatTemplateTokens::default())
                .unwrap();
        assert!(template
            .render(&[], &ChatTemplateOptions::default())
            .is_err());
    }

    #[test]
    fn raise_exception_carries_the_template_message() {
        let template = ChatTemplate::new(
            "{% if messages[0]['role'] != 'system' %}{{ raise_exception('Conversations must start with a system turn!') }}{% endif %}",
            ChatTemplateTokens::default(),
        )
        .unwrap();
        let err = template
            .render(
                &[ChatMessage::new("user", "hi")],
                &ChatTemplateOptions::default(),
            )
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("Conversations must start with a system turn!"),
            "{err}"
        );
    }
}
