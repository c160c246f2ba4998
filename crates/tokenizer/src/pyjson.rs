//! Python's text forms of template values: `json.dumps` (chat templates print tool schemas and
//! arguments with `tojson`, which transformers defines as plain `json.dumps`: no HTML escaping,
//! `", "` and `": "` separators, non-ASCII kept unless `ensure_ascii`), and `repr`, which Jinja2
//! uses when a template prints a list or dict directly.

use minijinja::value::{Value, ValueKind};
use minijinja::{Error, ErrorKind};

/// `json.dumps` settings a template may pass to `tojson`.
#[derive(Debug, Clone)]
pub(crate) struct DumpOptions {
    /// `indent`: `None` is single-line; otherwise newline plus this prefix per level.
    pub indent: Option<String>,
    pub ensure_ascii: bool,
    pub sort_keys: bool,
    pub item_separator: String,
    pub key_separator: String,
}

impl DumpOptions {
    /// Python's defaults for the given indent: `", "` becomes `","` once output is indented.
    pub fn new(indent: Option<String>) -> Self {
        let item_separator = if indent.is_some() { "," } else { ", " };
        DumpOptions {
            indent,
            ensure_ascii: false,
            sort_keys: false,
            item_separator: item_separator.to_string(),
            key_separator: ": ".to_string(),
        }
    }
}

/// Most nesting `dumps` follows; deeper values are an error rather than a stack overflow.
const MAX_DEPTH: usize = 256;

/// Serialises `value` as Python's `json.dumps(value, **options)` would.
pub(crate) fn dumps(value: &Value, options: &DumpOptions) -> Result<String, Error> {
    let mut out = String::new();
    write_value(&mut out, value, options, 0)?;
    Ok(out)
}

fn write_value(
    out: &mut String,
    value: &Value,
    options: &DumpOptions,
    depth: usize,
) -> Result<(), Error> {
    if depth > MAX_DEPTH {
        return Err(Error::new(
            ErrorKind::InvalidOperation,
            format!("tojson: value nested deeper than {MAX_DEPTH} levels"),
        ));
    }
    match value.kind() {
        ValueKind::None => out.push_str("null"),
        ValueKind::Bool => out.push_str(if value.is_true() { "true" } else { "false" }),
        ValueKind::Number => write_number(out, value)?,
        ValueKind::String => write_string(
            out,
            value.as_str().unwrap_or_default(),
            options.ensure_ascii,
        ),
        ValueKind::Seq | ValueKind::Iterable => {
            let items: Vec<Value> = value.try_iter()?.collect();
            write_container(out, '[', ']', items.len(), options, depth, |out, index| {
                write_value(out, &items[index], options, depth + 1)
            })?;
        }
        ValueKind::Map => {
            let mut entries: Vec<(String, Value)> = Vec::new();
            for key in value.try_iter()? {
                let item = value.get_item(&key)?;
                entries.push((key_text(&key)?, item));
            }
            if options.sort_keys {
                entries.sort_by(|a, b| a.0.cmp(&b.0));
            }
            write_container(
                out,
                '{',
                '}',
                entries.len(),
                options,
                depth,
                |out, index| {
                    let (key, item) = &entries[index];
                    write_string(out, key, options.ensure_ascii);
                    out.push_str(&options.key_separator);
                    write_value(out, item, options, depth + 1)
                },
            )?;
        }
        kind => {
            return Err(Error::new(
                ErrorKind::InvalidOperation,
                format!("tojson: a value of type {kind} is not JSON serializable"),
            ))
        }
    }
    Ok(())
}

fn write_container(
    out: &mut String,
    open: char,
    close: char,
    len: usize,
    options: &DumpOptions,
    depth: usize,
    mut write_item: impl FnMut(&mut String, usize) -> Result<(), Error>,
) -> Result<(), Error> {
    out.push(open);
    if len == 0 {
        out.push(close);
        return Ok(());
    }
    for index in 0..len {
        if index > 0 {
            out.push_str(&options.item_separator);
        }
        if let Some(indent) = &options.indent {
            out.push('\n');
            out.push_str(&indent.repeat(depth + 1));
        }
        write_item(out, index)?;
    }
    if let Some(indent) = &options.indent {
        out.push('\n');
        out.push_str(&indent.repeat(depth));
    }
    out.push(close);
    Ok(())
}

/// Python turns non-string keys into strings: `True` -> "true", `None` -> "null", numbers as printed.
fn key_text(key: &Value) -> Result<String, Error> {
    match key.kind() {
        ValueKind::String => Ok(key.as_str().unwrap_or_default().to_string()),
        ValueKind::None => Ok("null".to_string()),
        ValueKind::Bool => Ok(if key.is_true() { "true" } else { "false" }.to_string()),
        ValueKind::Number => {
            let mut text = String::new();
            write_number(&mut text, key)?;
            Ok(text)
        }
        kind => Err(Error::new(
            ErrorKind::InvalidOperation,
            format!("tojson: keys must be str, int, float, bool or None, not {kind}"),
        )),
    }
}

fn write_number(out: &mut String, value: &Value) -> Result<(), Error> {
    if value.is_integer() {
        // i128 covers every integer a template value can hold.
        let integer = i128::try_from(value.clone())?;
        out.push_str(&integer.to_string());
    } else {
        let float = f64::try_from(value.clone())?;
        out.push_str(&python_float_repr(float));
    }
    Ok(())
}

/// Python's `repr(float)` as json.dumps prints it: shortest round-trip digits, fixed notation
/// for exponents -4..16, otherwise `d.ddde+XX`; non-finite values as JSON5-style words.
pub(crate) fn python_float_repr(value: f64) -> String {
    if value.is_nan() {
        return "NaN".to_string();
    }
    if value.is_infinite() {
        return if value > 0.0 { "Infinity" } else { "-Infinity" }.to_string();
    }
    // `{:e}` gives the shortest round-trip digits, e.g. "-1.2345e-7".
    let scientific = format!("{value:e}");
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(rest) => ("-", rest),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    if (-4..16).contains(&exponent) {
        let point = exponent + 1; // digits before the decimal point
        let text = if point <= 0 {
            format!("0.{}{}", "0".repeat((-point) as usize), digits)
        } else if (point as usize) >= digits.len() {
            format!("{}{}.0", digits, "0".repeat(point as usize - digits.len()))
        } else {
            let (whole, fraction) = digits.split_at(point as usize);
            format!("{whole}.{fraction}")
        };
        format!("{sign}{text}")
    } else {
        let (first, rest) = digits.split_at(1);
        let mantissa = if rest.is_empty() {
            first.to_string()
        } else {
            format!("{first}.{rest}")
        };
        let exponent_sign = if exponent < 0 { '-' } else { '+' };
        format!("{sign}{mantissa}e{exponent_sign}{:02}", exponent.abs())
    }
}

/// Python's `str()` of a list or dict (what `{{ value }}` prints in Jinja2): items as `repr`.
pub(crate) fn python_repr(out: &mut String, value: &Value, depth: usize) -> Result<(), Error> {
    if depth > MAX_DEPTH {
        return Err(Error::new(
            ErrorKind::InvalidOperation,
            format!("value nested deeper than {MAX_DEPTH} levels"),
        ));
    }
    match value.kind() {
        ValueKind::Undefined | ValueKind::None => out.push_str("None"),
        ValueKind::Bool => out.push_str(if value.is_true() { "True" } else { "False" }),
        ValueKind::Number if value.is_integer() => out.push_str(&value.to_string()),
        ValueKind::Number => out.push_str(&python_float_repr(f64::try_from(value.clone())?)),
        ValueKind::String => write_python_str_repr(out, value.as_str().unwrap_or_default()),
        ValueKind::Seq | ValueKind::Iterable => {
            out.push('[');
            for (index, item) in value.try_iter()?.enumerate() {
                if index > 0 {
                    out.push_str(", ");
                }
                python_repr(out, &item, depth + 1)?;
            }
            out.push(']');
        }
        ValueKind::Map => {
            out.push('{');
            for (index, key) in value.try_iter()?.enumerate() {
                if index > 0 {
                    out.push_str(", ");
                }
                python_repr(out, &key, depth + 1)?;
                out.push_str(": ");
                python_repr(out, &value.get_item(&key)?, depth + 1)?;
            }
            out.push('}');
        }
        _ => out.push_str(&value.to_string()),
    }
    Ok(())
}

/// Python's `repr(str)`: single quotes unless the text has `'` and no `"`; backslash escapes
/// for the quote, backslash and non-printable characters.
fn write_python_str_repr(out: &mut String, text: &str) {
    let quote = if text.contains('\'') && !text.contains('"') {
        '"'
    } else {
        '\''
    };
    out.push(quote);
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if !python_printable(c) => {
                let code = c as u32;
                if code <= 0xFF {
                    out.push_str(&format!("\\x{code:02x}"));
                } else if code <= 0xFFFF {
                    out.push_str(&format!("\\u{code:04x}"));
                } else {
                    out.push_str(&format!("\\U{code:08x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push(quote);
}

/// Python's `str.isprintable` for the characters chat text realistically holds: controls,
/// separators other than the ASCII space, and the common format characters are not printable.
/// (Unassigned code points, which Python also escapes, are printed as is.)
fn python_printable(c: char) -> bool {
    let code = c as u32;
    !(c.is_control()
        || matches!(code, 0xA0 | 0xAD | 0x1680 | 0x180E | 0x2000..=0x200F | 0x2028..=0x202F
            | 0x205F..=0x2064 | 0x2066..=0x206F | 0x3000 | 0xFEFF | 0xFFF9..=0xFFFB
            | 0xD800..=0xF8FF | 0xF0000..=0x10FFFF))
}

fn write_string(out: &mut String, text: &str, ensure_ascii: bool) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0C}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || (ensure_ascii && (c as u32) > 0x7F) => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    // Expected strings are Python's: `repr(x)` / `json.dumps(x)` in CPython 3.
    #[test]
    fn floats_print_like_python_repr() {
        let cases = [
            (1.0, "1.0"),
            (0.1, "0.1"),
            (-2.5, "-2.5"),
            (1e16, "1e+16"),
            (1e15, "1000000000000000.0"),
            (123456789012345.6, "123456789012345.6"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (1.5e-10, "1.5e-10"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            (0.0, "0.0"),
            (f64::NAN, "NaN"),
            (f64::NEG_INFINITY, "-Infinity"),
        ];
        for (value, expected) in cases {
            assert_eq!(python_float_repr(value), expected, "{value}");
        }
    }

    #[test]
    fn repr_matches_python() {
        let repr = |json: serde_json::Value| {
            let mut out = String::new();
            python_repr(&mut out, &Value::from_serialize(json), 0).unwrap();
            out
        };
        // Python: str([1, 'a', "b'c", None, True, 1.5, 'x\ny\\', '\xa0', 'é😀', {'k': []}])
        assert_eq!(
            repr(
                serde_json::json!([1, "a", "b'c", null, true, 1.5, "x\ny\\", "\u{a0}", "é😀", {"k": []}])
            ),
            r#"[1, 'a', "b'c", None, True, 1.5, 'x\ny\\', '\xa0', 'é😀', {'k': []}]"#
        );
        assert_eq!(repr(serde_json::json!(["it's \"q\""])), r#"['it\'s "q"']"#);
    }

    #[test]
    fn dumps_matches_python_defaults() {
        let value = Value::from_serialize(serde_json::json!({
            "name": "get_weather", "n": 3, "x": 0.5, "ok": true, "none": null,
            "list": [1, "a\"b\\c\n\u{1}é😀"], "empty": [], "obj": {}
        }));
        // json.dumps keeps insertion order; serde_json's map here is sorted, so compare with the
        // same sorted order Python would print for this dict.
        let text = dumps(&value, &DumpOptions::new(None)).unwrap();
        assert_eq!(
            text,
            r#"{"empty": [], "list": [1, "a\"b\\c\n\u0001é😀"], "n": 3, "name": "get_weather", "none": null, "obj": {}, "ok": true, "x": 0.5}"#
        );
        let mut ascii = DumpOptions::new(Some("  ".to_string()));
        ascii.ensure_ascii = true;
        let text = dumps(
            &Value::from_serialize(serde_json::json!({"a": ["é😀", 1]})),
            &ascii,
        )
        .unwrap();
        assert_eq!(
            text,
            "{\n  \"a\": [\n    \"\\u00e9\\ud83d\\ude00\",\n    1\n  ]\n}"
        );
    }
}
