//! Regular expressions to GBNF, through `regex-syntax`'s parser.
//!
//! The whole input must match (anchors are implicit; `^` / `$` at the very ends are accepted and
//! dropped). Supported: literals, escapes, classes (Unicode `\d \w \s`, `.` without newline, as
//! the `regex` crate means them), groups, alternation, `* + ? {m,n}` (lazy or greedy: the same
//! language). Refused by name: look-around and backreferences (by `regex-syntax`), anchors and
//! word boundaries elsewhere, byte classes beyond ASCII.

use regex_syntax::hir::{Class, Hir, HirKind, Look};

use crate::error::{Error, Result};
use crate::grammar::{gbnf_charset, gbnf_literal, CharSet, Grammar, MAX_REPETITION};

impl Grammar {
    /// The grammar of the strings `pattern` matches in full.
    pub fn from_regex(pattern: &str) -> Result<Grammar> {
        let text = regex_to_gbnf(pattern)?;
        Grammar::from_gbnf(&text).map_err(|e| {
            Error::Regex(format!(
                "internal error: generated grammar does not parse: {e}"
            ))
        })
    }
}

/// The GBNF text [`Grammar::from_regex`] parses: `root ::= <the expression>`.
pub fn regex_to_gbnf(pattern: &str) -> Result<String> {
    let hir = parse(pattern)?;
    Ok(format!("root ::= {}\n", expr(&hir, true, true, false)?))
}

fn parse(pattern: &str) -> Result<Hir> {
    regex_syntax::ParserBuilder::new()
        .nest_limit(100)
        .build()
        .parse(pattern)
        .map_err(|e| Error::Regex(e.to_string()))
}

/// The characters a JSON string holds unescaped.
fn json_safe() -> CharSet {
    CharSet::from_ranges([(0x20, 0x21), (0x23, 0x5B), (0x5D, 0x10FFFF)])
}

/// A GBNF expression for the content of a JSON string (between the quotes) that a JSON schema
/// `pattern` matches, with its semantics: a search, anchored only where the pattern says `^` /
/// `$`. Only characters a JSON string holds unescaped are generated, a subset that stays valid.
pub(crate) fn json_pattern_expr(pattern: &str) -> Result<String> {
    let hir = parse(pattern)?;
    let p = hir.properties();
    let all = p.look_set();
    let start = p.look_set_prefix().contains(Look::Start);
    let end = p.look_set_suffix().contains(Look::End);
    if (all.contains(Look::Start) && !start) || (all.contains(Look::End) && !end) {
        return Err(Error::Regex(
            "'^' or '$' that does not anchor every alternative is not supported".into(),
        ));
    }
    let free = format!("{}*", gbnf_charset(&json_safe()));
    let inner = expr(&hir, true, true, true)?;
    Ok(format!(
        "{} {inner} {}",
        if start { "" } else { free.as_str() },
        if end { "" } else { free.as_str() }
    ))
}

fn is_start(l: Look) -> bool {
    matches!(l, Look::Start | Look::StartLF | Look::StartCRLF)
}

fn is_end(l: Look) -> bool {
    matches!(l, Look::End | Look::EndLF | Look::EndCRLF)
}

/// `first` / `last`: whether `h` begins / ends the whole pattern (where anchors may stand).
/// `json`: only characters a JSON string holds unescaped.
fn expr(h: &Hir, first: bool, last: bool, json: bool) -> Result<String> {
    let class = |set: CharSet| -> String {
        if json {
            gbnf_charset(&set.intersect(&json_safe()))
        } else {
            gbnf_charset(&set)
        }
    };
    Ok(match h.kind() {
        HirKind::Empty => "\"\"".into(),
        HirKind::Literal(lit) => {
            let s = std::str::from_utf8(&lit.0).map_err(|_| {
                Error::Regex("a literal that is not UTF-8 (byte mode) is not supported".into())
            })?;
            if json && s.chars().any(|c| !json_safe().contains(c)) {
                return Err(Error::Regex(format!(
                    "pattern literal {s:?} needs JSON escapes ('\"', '\\' or control \
                     characters), which patterns do not support yet"
                )));
            }
            gbnf_literal(s)
        }
        HirKind::Class(Class::Unicode(c)) => class(CharSet::from_ranges(
            c.ranges()
                .iter()
                .map(|r| (r.start() as u32, r.end() as u32)),
        )),
        HirKind::Class(Class::Bytes(c)) => {
            if c.ranges().iter().any(|r| r.end() > 0x7F) {
                return Err(Error::Regex(
                    "byte classes beyond ASCII (the (?-u) mode) are not supported".into(),
                ));
            }
            class(CharSet::from_ranges(
                c.ranges()
                    .iter()
                    .map(|r| (r.start() as u32, r.end() as u32)),
            ))
        }
        HirKind::Look(l) => {
            if (first && is_start(*l)) || (last && is_end(*l)) {
                "\"\"".into()
            } else {
                return Err(Error::Regex(format!(
                    "{l:?} (an anchor or word boundary) is only supported at the very start ('^') \
                     or end ('$') of the pattern"
                )));
            }
        }
        HirKind::Repetition(r) => {
            let limit = r.max.unwrap_or(r.min);
            if limit > MAX_REPETITION {
                return Err(Error::Regex(format!(
                    "repetition count {limit} is above the limit {MAX_REPETITION}"
                )));
            }
            let sub = expr(&r.sub, false, false, json)?;
            match r.max {
                None => format!("( {sub} ){{{},}}", r.min),
                Some(max) => format!("( {sub} ){{{},{max}}}", r.min),
            }
        }
        HirKind::Capture(c) => format!("( {} )", expr(&c.sub, first, last, json)?),
        HirKind::Concat(list) => {
            let n = list.len();
            let mut parts = Vec::with_capacity(n);
            for (i, x) in list.iter().enumerate() {
                parts.push(expr(x, first && i == 0, last && i + 1 == n, json)?);
            }
            format!("( {} )", parts.join(" "))
        }
        HirKind::Alternation(list) => {
            let mut parts = Vec::with_capacity(list.len());
            for x in list {
                parts.push(expr(x, first, last, json)?);
            }
            format!("( {} )", parts.join(" | "))
        }
    })
}
