//! Regular expressions: full-match semantics, classes, repetition, refusals.
mod common;

use common::{compile, matches};
use torchnative_constrain::Grammar;

fn check(pattern: &str, good: &[&str], bad: &[&str]) {
    let c = compile(&Grammar::from_regex(pattern).unwrap_or_else(|e| panic!("{pattern}: {e}")));
    for g in good {
        assert!(matches(&c, g), "{pattern} should match {g:?}");
    }
    for b in bad {
        assert!(!matches(&c, b), "{pattern} should not match {b:?}");
    }
}

#[test]
fn literals_classes_and_repetition() {
    check(
        r"\d{3}-\d{4}",
        &["555-1234", "٣٣٣-1234"],
        &["555-123", "5551234", "555-12345"],
    );
    check(
        r"[A-Z][a-z]+( [A-Z][a-z]+)*",
        &["Ada", "Ada Lovelace"],
        &["ada", "Ada ", "A"],
    );
    check(r"(cat|dog)s?", &["cat", "dogs"], &["cats!", "bird", ""]);
    check(
        r"\w+@\w+\.(com|org)",
        &["me@example.com", "é@x.org"],
        &["me@example.net", "@x.com"],
    );
    check(r"a.c", &["abc", "a中c"], &["a\nc", "ac"]);
    check(r"^\s*x\s*$", &["x", "  x\t"], &["xx"]);
    check(r"(?i)yes|no", &["YeS", "no"], &["yesno"]);
    check(r"[^a-c]{2,}?", &["de", "xyz"], &["d", "ab"]);
    check(r"a{0}b", &["b"], &["ab"]);
    check(r"\.\*\\", &[".*\\"], &["a*\\"]);
    check(r"", &[""], &["a"]);
}

#[test]
fn unsupported_features_are_refused_by_name() {
    for (pattern, needle) in [
        (r"(?=a)b", "look-around"),
        (r"(a)\1", "backreferences"),
        (r"a\bb", "only supported at the very start"),
        (r"a^b", "only supported at the very start"),
        (r"a{5000}", "above the limit"),
        (r"(?-u)\xFF", "invalid utf-8"),
        (r"(unclosed", "unclosed group"),
    ] {
        let e = Grammar::from_regex(pattern).unwrap_err().to_string();
        assert!(e.to_lowercase().contains(needle), "{pattern}: {e}");
    }
}
