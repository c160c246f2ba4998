//! GBNF, llama.cpp's grammar format, parsed into the [`Grammar`] IR.
//!
//! The syntax is llama.cpp's: `name ::= alternatives` rules (a rule ends at a newline unless
//! inside parentheses, or right after `::=` or `|`), sequences, `|`, `( )`, string literals with
//! the escapes `\n \t \r \\ \" \[ \] \xHH \uHHHH \UHHHHHHHH`, character classes `[a-z]` /
//! `[^...]`, `.`, repetition `* + ? {m} {m,} {m,n}` and `#` comments. Two leniencies over
//! llama.cpp: a continuation line may start with `|`, and `_` is a name character. Token
//! references (`<...>`) are refused by name, as is a rule defined twice.

use std::collections::HashMap;

use crate::error::{Error, Result};
use crate::grammar::{Builder, CharSet, Element, Grammar, RuleId, MAX_REPETITION};

/// How deep parentheses may nest.
const MAX_NESTING: usize = 200;

impl Grammar {
    /// Parses GBNF text (llama.cpp's format); the start rule is `root`.
    pub fn from_gbnf(text: &str) -> Result<Grammar> {
        Parser::new(text).parse()
    }
}

struct Parser<'a> {
    src: &'a str,
    pos: usize,
    b: Builder,
    /// Rules by name: id and, while undefined, where first used.
    names: HashMap<String, (RuleId, Option<usize>)>,
    depth: usize,
}

fn is_name_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'-' || c == b'_'
}

impl<'a> Parser<'a> {
    fn new(src: &'a str) -> Self {
        Parser {
            src,
            pos: 0,
            b: Builder::default(),
            names: HashMap::new(),
            depth: 0,
        }
    }

    fn err_at(&self, pos: usize, message: impl Into<String>) -> Error {
        let pos = pos.min(self.src.len());
        let before = &self.src.as_bytes()[..pos];
        let line = before.iter().filter(|&&c| c == b'\n').count() + 1;
        let line_start = before
            .iter()
            .rposition(|&c| c == b'\n')
            .map_or(0, |i| i + 1);
        let column = String::from_utf8_lossy(&before[line_start..])
            .chars()
            .count()
            + 1;
        Error::Gbnf {
            line,
            column,
            message: message.into(),
        }
    }

    fn err(&self, message: impl Into<String>) -> Error {
        self.err_at(self.pos, message)
    }

    fn peek(&self) -> Option<u8> {
        self.src.as_bytes().get(self.pos).copied()
    }

    fn peek_char(&self) -> Option<char> {
        self.src[self.pos..].chars().next()
    }

    fn describe_here(&self) -> String {
        match self.peek_char() {
            None => "end of input".to_string(),
            Some('\n') => "end of line".to_string(),
            Some(c) => format!("'{c}'"),
        }
    }

    /// Skips spaces, tabs, comments and, when `newlines`, line breaks.
    fn skip_space(&mut self, newlines: bool) {
        while let Some(c) = self.peek() {
            match c {
                b' ' | b'\t' => self.pos += 1,
                b'\r' | b'\n' if newlines => self.pos += 1,
                b'#' => {
                    while let Some(c) = self.peek() {
                        if c == b'\n' || c == b'\r' {
                            break;
                        }
                        self.pos += 1;
                    }
                }
                _ => break,
            }
        }
    }

    fn parse_name(&mut self) -> Option<&'a str> {
        let start = self.pos;
        while self.peek().is_some_and(is_name_char) {
            self.pos += 1;
        }
        (self.pos > start).then(|| &self.src[start..self.pos])
    }

    fn rule_id(&mut self, name: &str, used_at: usize) -> RuleId {
        if let Some(&(id, _)) = self.names.get(name) {
            return id;
        }
        let id = self.b.add_rule(name.to_string());
        self.names.insert(name.to_string(), (id, Some(used_at)));
        id
    }

    fn parse(mut self) -> Result<Grammar> {
        loop {
            self.skip_space(true);
            if self.peek().is_none() {
                break;
            }
            let start = self.pos;
            let Some(name) = self.parse_name() else {
                return Err(self.err(format!(
                    "expected a rule name, found {}",
                    self.describe_here()
                )));
            };
            self.skip_space(false);
            if !self.src[self.pos..].starts_with("::=") {
                return Err(self.err(format!(
                    "expected '::=' after rule name '{name}', found {}",
                    self.describe_here()
                )));
            }
            self.pos += 3;
            self.skip_space(true);
            let id = self.rule_id(name, start);
            match self.names.get_mut(name) {
                Some((_, used @ Some(_))) => *used = None,
                _ => return Err(self.err_at(start, format!("rule '{name}' is defined twice"))),
            }
            let alts = self.parse_alternates(name, false)?;
            self.b
                .set_alternatives(id, alts)
                .map_err(|e| self.err_at(start, e.to_string()))?;
            match self.peek() {
                None | Some(b'\n') | Some(b'\r') => {}
                _ => {
                    return Err(self.err(format!(
                        "unexpected {} in rule '{name}'",
                        self.describe_here()
                    )))
                }
            }
        }
        if self.b.rules.is_empty() {
            return Err(self.err_at(0, "the grammar has no rules (a 'root' rule is required)"));
        }
        let mut undefined: Vec<(usize, String)> = self
            .names
            .iter()
            .filter_map(|(n, (_, used))| used.map(|u| (u, n.clone())))
            .collect();
        undefined.sort();
        if let Some((at, name)) = undefined.first() {
            return Err(self.err_at(*at, format!("undefined rule '{name}'")));
        }
        let Some(&(root, _)) = self.names.get("root") else {
            return Err(self.err_at(0, "no 'root' rule: the start rule must be named 'root'"));
        };
        // Helper rules may not take a user's rule name.
        let user: std::collections::HashSet<String> = self.names.keys().cloned().collect();
        for (i, rule) in self.b.rules.iter_mut().enumerate() {
            if self.names.get(&rule.name).is_some_and(|(id, _)| *id == i) {
                continue;
            }
            while user.contains(&rule.name) {
                rule.name.push_str("-h");
            }
        }
        Grammar::new(self.b.rules, root)
    }

    fn parse_alternates(&mut self, name: &str, nested: bool) -> Result<Vec<Vec<Element>>> {
        let mut alts = vec![self.parse_sequence(name, nested)?];
        loop {
            if self.peek() == Some(b'|') {
                self.pos += 1;
                self.skip_space(true);
                alts.push(self.parse_sequence(name, nested)?);
                continue;
            }
            // Leniency: a continuation line starting with '|'.
            if !nested {
                let save = self.pos;
                self.skip_space(true);
                if self.peek() == Some(b'|') {
                    continue;
                }
                self.pos = save;
            }
            return Ok(alts);
        }
    }

    fn parse_sequence(&mut self, name: &str, nested: bool) -> Result<Vec<Element>> {
        let mut seq: Vec<Element> = Vec::new();
        // Where the last item's elements start in `seq` (repetition applies to that item).
        let mut last_item: Option<usize> = None;
        while let Some(c) = self.peek() {
            let item_start = seq.len();
            match c {
                b'"' => {
                    let start = self.pos;
                    self.pos += 1;
                    loop {
                        match self.peek() {
                            None => return Err(self.err_at(start, "unterminated string literal")),
                            Some(b'"') => {
                                self.pos += 1;
                                break;
                            }
                            _ => {
                                let ch = self.parse_char()?;
                                seq.push(Element::Chars(CharSet::single(ch)));
                            }
                        }
                    }
                    last_item = Some(item_start);
                }
                b'[' => {
                    let start = self.pos;
                    self.pos += 1;
                    let negated = self.peek() == Some(b'^');
                    if negated {
                        self.pos += 1;
                    }
                    let mut ranges = Vec::new();
                    loop {
                        match self.peek() {
                            None => return Err(self.err_at(start, "unterminated character class")),
                            Some(b']') => {
                                self.pos += 1;
                                break;
                            }
                            _ => {
                                let lo = self.parse_char()?;
                                let mut hi = lo;
                                if self.peek() == Some(b'-')
                                    && self.src.as_bytes().get(self.pos + 1) != Some(&b']')
                                {
                                    self.pos += 1;
                                    if self.peek().is_none() {
                                        return Err(
                                            self.err_at(start, "unterminated character class")
                                        );
                                    }
                                    let at = self.pos;
                                    hi = self.parse_char()?;
                                    if hi < lo {
                                        return Err(self.err_at(
                                            at,
                                            format!("character range '{lo}-{hi}' is reversed"),
                                        ));
                                    }
                                }
                                ranges.push((lo as u32, hi as u32));
                            }
                        }
                    }
                    let set = CharSet::from_ranges(ranges);
                    let set = if negated { set.complement() } else { set };
                    seq.push(Element::Chars(set));
                    last_item = Some(item_start);
                }
                b'.' => {
                    self.pos += 1;
                    seq.push(Element::Chars(CharSet::any()));
                    last_item = Some(item_start);
                }
                b'(' => {
                    let start = self.pos;
                    self.pos += 1;
                    self.depth += 1;
                    if self.depth > MAX_NESTING {
                        return Err(self
                            .err_at(start, format!("parentheses nest deeper than {MAX_NESTING}")));
                    }
                    self.skip_space(true);
                    let alts = self.parse_alternates(name, true)?;
                    if self.peek() != Some(b')') {
                        return Err(self.err(format!(
                            "expected ')' to close the group opened at line {}, found {}",
                            match self.err_at(start, "") {
                                Error::Gbnf { line, column, .. } =>
                                    format!("{line} column {column}"),
                                _ => String::new(),
                            },
                            self.describe_here()
                        )));
                    }
                    self.pos += 1;
                    self.depth -= 1;
                    let id = self
                        .b
                        .helper(name, alts)
                        .map_err(|e| self.err_at(start, e.to_string()))?;
                    seq.push(Element::Rule(id));
                    last_item = Some(item_start);
                }
                b'*' | b'+' | b'?' | b'{' => {
                    let at = self.pos;
                    let Some(start) = last_item.take() else {
                        return Err(self.err(format!(
                            "repetition '{}' has nothing before it to repeat",
                            c as char
                        )));
                    };
                    let (min, max) = self.parse_repetition()?;
                    let item: Vec<Element> = seq.drain(start..).collect();
                    let item = match self.b.group(name, item) {
                        Ok(item) => item,
                        Err(e) => return Err(self.err_at(at, e.to_string())),
                    };
                    match self.b.repeat(name, item, min, max) {
                        Ok(elems) => seq.extend(elems),
                        Err(e) => return Err(self.err_at(at, e.to_string())),
                    }
                }
                b'<' => {
                    return Err(self.err("token references ('<...>') are not supported"));
                }
                c if is_name_char(c) => {
                    let at = self.pos;
                    let r = self.parse_name().expect("name char");
                    let id = self.rule_id(r, at);
                    seq.push(Element::Rule(id));
                    last_item = Some(item_start);
                }
                _ => break,
            }
            self.skip_space(nested);
        }
        Ok(seq)
    }

    /// After a repetition character: `(min, max)` (`max` `None`: unbounded).
    fn parse_repetition(&mut self) -> Result<(u32, Option<u32>)> {
        let c = self.peek().expect("called on a repetition char");
        self.pos += 1;
        match c {
            b'*' => return Ok((0, None)),
            b'+' => return Ok((1, None)),
            b'?' => return Ok((0, Some(1))),
            _ => {}
        }
        let start = self.pos - 1;
        self.skip_space(false);
        let min = self.parse_int(start)?;
        self.skip_space(false);
        let max = match self.peek() {
            Some(b'}') => Some(min),
            Some(b',') => {
                self.pos += 1;
                self.skip_space(false);
                if self.peek() == Some(b'}') {
                    None
                } else {
                    let max = self.parse_int(start)?;
                    self.skip_space(false);
                    Some(max)
                }
            }
            _ => {
                return Err(self.err(format!(
                    "expected ',' or '}}' in repetition, found {}",
                    self.describe_here()
                )))
            }
        };
        if self.peek() != Some(b'}') {
            return Err(self.err(format!(
                "expected '}}' to close the repetition, found {}",
                self.describe_here()
            )));
        }
        self.pos += 1;
        if let Some(max) = max {
            if max < min {
                return Err(self.err_at(
                    start,
                    format!("repetition {{{min},{max}}}: the maximum is below the minimum"),
                ));
            }
        }
        Ok((min, max))
    }

    fn parse_int(&mut self, rep_start: usize) -> Result<u32> {
        let start = self.pos;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.pos += 1;
        }
        if start == self.pos {
            return Err(self.err(format!(
                "expected a number in repetition, found {}",
                self.describe_here()
            )));
        }
        match self.src[start..self.pos].parse::<u32>() {
            Ok(n) if n <= MAX_REPETITION => Ok(n),
            _ => Err(self.err_at(
                rep_start,
                format!(
                    "repetition count {} is above the limit {MAX_REPETITION}",
                    &self.src[start..self.pos]
                ),
            )),
        }
    }

    /// One (possibly escaped) character of a literal or class.
    fn parse_char(&mut self) -> Result<char> {
        let start = self.pos;
        let c = self.peek_char().expect("caller checked for input");
        self.pos += c.len_utf8();
        if c != '\\' {
            return Ok(c);
        }
        let Some(e) = self.peek_char() else {
            return Err(self.err_at(start, "unterminated escape at end of input"));
        };
        self.pos += e.len_utf8();
        let hex_digits = match e {
            'x' => 2,
            'u' => 4,
            'U' => 8,
            'n' => return Ok('\n'),
            't' => return Ok('\t'),
            'r' => return Ok('\r'),
            '\\' | '"' | '[' | ']' | '-' | '^' | '/' | '\'' | '.' => return Ok(e),
            _ => return Err(self.err_at(start, format!("unknown escape '\\{e}'"))),
        };
        let digits = self.src.get(self.pos..self.pos + hex_digits);
        let value = digits
            .filter(|d| d.bytes().all(|b| b.is_ascii_hexdigit()))
            .and_then(|d| u32::from_str_radix(d, 16).ok());
        let Some(value) = value else {
            return Err(self.err_at(
                start,
                format!("escape '\\{e}' needs {hex_digits} hex digits"),
            ));
        };
        self.pos += hex_digits;
        char::from_u32(value).ok_or_else(|| {
            self.err_at(
                start,
                format!("escape '\\{e}' names U+{value:04X}, which is not a Unicode scalar value"),
            )
        })
    }
}
