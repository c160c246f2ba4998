//! Entry points shared by the `cargo fuzz` targets in `fuzz/` and the crate's replay test, so
//! both exercise the same code. Each takes arbitrary bytes and must never panic; the checks
//! inside panic only on a real bug.

use std::sync::{Arc, OnceLock};

use crate::{CompiledGrammar, Grammar, Matcher, TokenVocabulary};

/// A small vocabulary: every byte, a few multi-byte chunks, EOS last.
fn vocab() -> Arc<TokenVocabulary> {
    static V: OnceLock<Arc<TokenVocabulary>> = OnceLock::new();
    V.get_or_init(|| {
        let mut toks: Vec<Option<Vec<u8>>> = (0..=255u8).map(|b| Some(vec![b])).collect();
        for t in [
            "{\"", "\":", "\", \"", "true", "null", "12", "ab", "é", "\u{4e2d}",
        ] {
            toks.push(Some(t.as_bytes().to_vec()));
        }
        toks.push(None);
        let eos = toks.len() as u32 - 1;
        Arc::new(TokenVocabulary::new(toks, &[eos]).expect("valid vocabulary"))
    })
    .clone()
}

/// Compiles a grammar that parsed and runs a few greedy mask steps.
fn exercise(g: &Grammar) {
    let Ok(c) = CompiledGrammar::new(g, vocab()) else {
        return;
    };
    let mut m = Matcher::new(Arc::new(c));
    for _ in 0..6 {
        let allowed = m.allowed_tokens();
        let Some(&t) = allowed
            .iter()
            .find(|&&t| !m.grammar().vocabulary().is_eos(t))
        else {
            break;
        };
        m.accept_token(t)
            .expect("a token from the mask is accepted");
    }
}

/// GBNF text: parse; a grammar that parses prints GBNF that parses to the same rules.
pub fn gbnf(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(g) = Grammar::from_gbnf(text) else {
        return;
    };
    let printed = g.to_string();
    let again = Grammar::from_gbnf(&printed).expect("printed grammar parses");
    let sorted = |s: String| {
        let mut v: Vec<String> = s.lines().map(str::to_string).collect();
        v.sort();
        v
    };
    assert_eq!(
        sorted(again.to_string()),
        sorted(printed),
        "print/parse round trip"
    );
    exercise(&g);
}

/// JSON schema text.
pub fn json_schema(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(g) = Grammar::from_json_schema_str(text) {
        exercise(&g);
    }
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(text) {
        let _ = Grammar::from_response_format(&v);
    }
}

/// A regular expression.
pub fn regex(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(g) = Grammar::from_regex(text) {
        exercise(&g);
    }
}
