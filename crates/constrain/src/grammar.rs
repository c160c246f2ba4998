//! The grammar IR every front end (GBNF, JSON schema, regex) produces: rules of alternatives of
//! sequences of character sets and rule references, over Unicode scalar values. Repetition is
//! already expanded into helper rules, as llama.cpp does, so the IR has only two element kinds.
//! `Display` prints GBNF that parses back to the same grammar.

use std::fmt::{self, Write as _};

use crate::error::{grammar_error, Result};

/// Index of a rule in its [`Grammar`].
pub type RuleId = usize;

/// The largest number of elements (summed over all alternatives) a grammar may have.
pub const MAX_GRAMMAR_ELEMENTS: usize = 1 << 20;
/// The largest repetition count (`{m,n}`, `minItems`, ...) a front end expands.
pub const MAX_REPETITION: u32 = 2000;

/// A set of Unicode scalar values: sorted, disjoint, non-adjacent inclusive ranges that never
/// include a surrogate (U+D800..U+DFFF).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CharSet {
    ranges: Vec<(u32, u32)>,
}

impl CharSet {
    /// The empty set.
    pub fn empty() -> Self {
        CharSet { ranges: Vec::new() }
    }

    /// Every Unicode scalar value (GBNF's `.`).
    pub fn any() -> Self {
        CharSet::from_ranges([(0, 0x10FFFF)])
    }

    /// One character.
    pub fn single(c: char) -> Self {
        CharSet::from_ranges([(c as u32, c as u32)])
    }

    /// The union of inclusive code point ranges (surrogates removed; out-of-order pairs swapped).
    pub fn from_ranges(ranges: impl IntoIterator<Item = (u32, u32)>) -> Self {
        let mut v: Vec<(u32, u32)> = Vec::new();
        for (a, b) in ranges {
            let (a, b) = if a <= b { (a, b) } else { (b, a) };
            let b = b.min(0x10FFFF);
            if a > b {
                continue;
            }
            // Split around the surrogates.
            if a < 0xD800 {
                v.push((a, b.min(0xD7FF)));
            }
            if b > 0xDFFF {
                v.push((a.max(0xE000), b));
            }
        }
        v.sort_unstable();
        let mut merged: Vec<(u32, u32)> = Vec::with_capacity(v.len());
        for (a, b) in v {
            match merged.last_mut() {
                Some(last) if a <= last.1.saturating_add(1) => last.1 = last.1.max(b),
                _ => merged.push((a, b)),
            }
        }
        CharSet { ranges: merged }
    }

    /// The characters not in `self`.
    pub fn complement(&self) -> Self {
        let mut out = Vec::new();
        let mut next = 0u32;
        for &(a, b) in &self.ranges {
            if a > next {
                out.push((next, a - 1));
            }
            next = b + 1;
        }
        if next <= 0x10FFFF {
            out.push((next, 0x10FFFF));
        }
        CharSet::from_ranges(out)
    }

    /// The characters in both sets.
    pub fn intersect(&self, other: &CharSet) -> Self {
        let mut both = self.complement();
        both.ranges.extend_from_slice(&other.complement().ranges);
        CharSet::from_ranges(both.ranges).complement()
    }

    /// The sorted disjoint inclusive ranges.
    pub fn ranges(&self) -> &[(u32, u32)] {
        &self.ranges
    }

    /// Whether `c` is in the set.
    pub fn contains(&self, c: char) -> bool {
        let c = c as u32;
        self.ranges.iter().any(|&(a, b)| a <= c && c <= b)
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// The character when the set holds exactly one.
    pub fn as_single(&self) -> Option<char> {
        match self.ranges.as_slice() {
            [(a, b)] if a == b => char::from_u32(*a),
            _ => None,
        }
    }
}

/// One element of a sequence.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Element {
    /// One character from the set.
    Chars(CharSet),
    /// A match of the referenced rule.
    Rule(RuleId),
}

/// A named rule: a choice between sequences.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// The rule's GBNF name (letters, digits, `-`, `_`).
    pub name: String,
    /// The alternatives; an empty sequence matches the empty string.
    pub alternatives: Vec<Vec<Element>>,
}

/// A context-free grammar over Unicode scalar values. Build one with [`Grammar::from_gbnf`],
/// [`Grammar::from_json_schema`], [`Grammar::json_object`] or [`Grammar::from_regex`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grammar {
    rules: Vec<Rule>,
    root: RuleId,
}

impl Grammar {
    /// A grammar from its rules; `root` is the start rule. Checks that every reference is in range
    /// and that the size is within [`MAX_GRAMMAR_ELEMENTS`].
    pub fn new(rules: Vec<Rule>, root: RuleId) -> Result<Self> {
        if root >= rules.len() {
            return Err(grammar_error(format!(
                "root rule {root} out of range ({} rules)",
                rules.len()
            )));
        }
        let mut total = 0usize;
        for rule in &rules {
            for alt in &rule.alternatives {
                total += alt.len().max(1);
                for e in alt {
                    if let Element::Rule(r) = e {
                        if *r >= rules.len() {
                            return Err(grammar_error(format!(
                                "rule '{}' references rule {r}, out of range ({} rules)",
                                rule.name,
                                rules.len()
                            )));
                        }
                    }
                }
            }
        }
        if total > MAX_GRAMMAR_ELEMENTS {
            return Err(grammar_error(format!(
                "grammar has {total} elements, more than the limit {MAX_GRAMMAR_ELEMENTS}"
            )));
        }
        Ok(Grammar { rules, root })
    }

    /// The rules; ids are indices.
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// The start rule.
    pub fn root(&self) -> RuleId {
        self.root
    }
}

/// Prints the grammar as GBNF, root first.
impl fmt::Display for Grammar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let order =
            std::iter::once(self.root).chain((0..self.rules.len()).filter(|&i| i != self.root));
        for id in order {
            let rule = &self.rules[id];
            write!(f, "{} ::=", rule.name)?;
            for (i, alt) in rule.alternatives.iter().enumerate() {
                if i > 0 {
                    f.write_str(" |")?;
                }
                if alt.is_empty() {
                    // An empty sequence, written so that a trailing '|' never ends a line.
                    f.write_str(" \"\"")?;
                }
                for e in alt {
                    f.write_char(' ')?;
                    match e {
                        Element::Rule(r) => f.write_str(&self.rules[*r].name)?,
                        Element::Chars(set) => write_charset(f, set)?,
                    }
                }
            }
            f.write_char('\n')?;
        }
        Ok(())
    }
}

fn write_escaped(f: &mut impl fmt::Write, c: u32, in_class: bool) -> fmt::Result {
    match char::from_u32(c) {
        Some('"') if !in_class => f.write_str("\\\""),
        Some('\\') => f.write_str("\\\\"),
        Some('\n') => f.write_str("\\n"),
        Some('\r') => f.write_str("\\r"),
        Some('\t') => f.write_str("\\t"),
        Some(']') if in_class => f.write_str("\\]"),
        Some('[') if in_class => f.write_str("\\["),
        Some('^') if in_class => f.write_str("\\^"),
        Some('-') if in_class => f.write_str("\\-"),
        Some(ch) if (' '..='~').contains(&ch) => f.write_char(ch),
        _ if c <= 0xFF => write!(f, "\\x{c:02X}"),
        _ if c <= 0xFFFF => write!(f, "\\u{c:04X}"),
        _ => write!(f, "\\U{c:08X}"),
    }
}

fn write_charset(f: &mut impl fmt::Write, set: &CharSet) -> fmt::Result {
    if let Some(c) = set.as_single() {
        f.write_char('"')?;
        write_escaped(f, c as u32, false)?;
        return f.write_char('"');
    }
    if set == &CharSet::any() {
        return f.write_char('.');
    }
    // Print the shorter of the set and its complement.
    let comp = set.complement();
    let (neg, shown) = if comp.ranges.len() < set.ranges.len() && !comp.is_empty() {
        (true, &comp)
    } else {
        (false, set)
    };
    f.write_char('[')?;
    if neg {
        f.write_char('^')?;
    }
    for &(a, b) in &shown.ranges {
        write_escaped(f, a, true)?;
        if b != a {
            f.write_char('-')?;
            write_escaped(f, b, true)?;
        }
    }
    f.write_char(']')
}

/// Builds a grammar rule by rule; front ends share its helper-rule and repetition expansion.
#[derive(Debug, Default)]
pub(crate) struct Builder {
    pub(crate) rules: Vec<Rule>,
    pub(crate) elements: usize,
}

impl Builder {
    /// A new rule with no alternatives yet.
    pub(crate) fn add_rule(&mut self, name: String) -> RuleId {
        self.rules.push(Rule {
            name,
            alternatives: Vec::new(),
        });
        self.rules.len() - 1
    }

    pub(crate) fn set_alternatives(&mut self, id: RuleId, alts: Vec<Vec<Element>>) -> Result<()> {
        self.elements += alts.iter().map(|a| a.len().max(1)).sum::<usize>();
        if self.elements > MAX_GRAMMAR_ELEMENTS {
            return Err(grammar_error(format!(
                "grammar grows past {MAX_GRAMMAR_ELEMENTS} elements"
            )));
        }
        self.rules[id].alternatives = alts;
        Ok(())
    }

    /// A helper rule `base-N` with the given alternatives.
    pub(crate) fn helper(&mut self, base: &str, alts: Vec<Vec<Element>>) -> Result<RuleId> {
        let id = self.add_rule(format!("{base}-{}", self.rules.len()));
        self.set_alternatives(id, alts)?;
        Ok(id)
    }

    /// `item{min,max}` (`max` `None`: unbounded) as elements to splice into a sequence.
    /// `item` is one element; a multi-element item must be wrapped in a helper rule first.
    pub(crate) fn repeat(
        &mut self,
        base: &str,
        item: Element,
        min: u32,
        max: Option<u32>,
    ) -> Result<Vec<Element>> {
        if let Some(max) = max {
            if max < min {
                return Err(grammar_error(format!(
                    "repetition {{{min},{max}}}: the maximum is below the minimum"
                )));
            }
        }
        let limit = max.unwrap_or(min);
        if limit > MAX_REPETITION {
            return Err(grammar_error(format!(
                "repetition count {limit} is above the limit {MAX_REPETITION}"
            )));
        }
        let mut out: Vec<Element> = std::iter::repeat_n(item.clone(), min as usize).collect();
        match max {
            None => {
                // star ::= item star | ε  (right recursion: the matcher's tail calls keep its
                // stack flat).
                let star = self.add_rule(format!("{base}-{}", self.rules.len()));
                self.set_alternatives(star, vec![vec![item, Element::Rule(star)], vec![]])?;
                out.push(Element::Rule(star));
            }
            Some(max) if max > min => {
                // opt_1 ::= item | ε ; opt_k ::= item opt_{k-1} | ε
                let mut prev: Option<RuleId> = None;
                for _ in min..max {
                    let mut seq = vec![item.clone()];
                    if let Some(p) = prev {
                        seq.push(Element::Rule(p));
                    }
                    prev = Some(self.helper(base, vec![seq, vec![]])?);
                }
                out.push(Element::Rule(prev.expect("max > min")));
            }
            Some(_) => {}
        }
        self.elements += out.len();
        Ok(out)
    }

    /// Wraps a sequence as one element (itself when it has exactly one).
    pub(crate) fn group(&mut self, base: &str, mut seq: Vec<Element>) -> Result<Element> {
        if seq.len() == 1 {
            return Ok(seq.pop().expect("one element"));
        }
        Ok(Element::Rule(self.helper(base, vec![seq])?))
    }
}

/// GBNF literal text for `s` (with quotes).
pub(crate) fn gbnf_literal(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        let _ = write_escaped(&mut out, c as u32, false);
    }
    out.push('"');
    out
}

/// GBNF text for a character set.
pub(crate) fn gbnf_charset(set: &CharSet) -> String {
    let mut out = String::new();
    let _ = write_charset(&mut out, set);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charset_normalizes_and_complements() {
        let s = CharSet::from_ranges([(b'c' as u32, b'a' as u32), (b'd' as u32, b'f' as u32)]);
        assert_eq!(s.ranges(), &[(0x61, 0x66)]);
        let all = CharSet::from_ranges([(0, 0x10FFFF)]);
        assert_eq!(all.ranges(), &[(0, 0xD7FF), (0xE000, 0x10FFFF)]);
        assert!(all.complement().is_empty());
        assert_eq!(s.complement().complement(), s);
        assert_eq!(CharSet::any(), all);
        let t = CharSet::from_ranges([(0x60, 0x70)]);
        assert_eq!(s.intersect(&t).ranges(), &[(0x61, 0x66)]);
        assert!(s.intersect(&CharSet::single('z')).is_empty());
    }
}
