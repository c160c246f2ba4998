//! Shared test helpers: a synthetic byte-level vocabulary and whole-string matching.
#![allow(dead_code)]

use std::sync::Arc;

use torchnative_constrain::{CompiledGrammar, Grammar, Matcher, TokenVocabulary};

/// A small seeded PRNG (xorshift64*).
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

/// Every single byte, JSON-ish chunks, words, multi-byte characters whole and split, and random
/// printable chunks; one special token (None) and EOS last.
pub fn synthetic_vocab(seed: u64) -> Arc<TokenVocabulary> {
    let mut toks: Vec<Option<Vec<u8>>> = (0..=255u8).map(|b| Some(vec![b])).collect();
    let fixed = [
        "{\"", "\":", "\": ", "\", \"", "\",\"", "\"}", "},", "}}", "[{", "]}", "{}", "[]", ", ",
        " {", "\n", "\n  ", "  ", "true", "false", "null", "0", "12", "345", "6789", "-1", ".5",
        "e+", "name", "age", "items", "value", "é", "ü", "中文", "😀", "\"a", "a\"", "ab", "abc",
        "xyz", "1,", "2]", "3}", "\\n", "\\\"", "\\u00", "null,", "true}", "+", "*", "(", ")",
    ];
    for t in fixed {
        toks.push(Some(t.as_bytes().to_vec()));
    }
    // A multi-byte character split across tokens.
    let e = "é".as_bytes();
    toks.push(Some(vec![b'a', e[0]]));
    toks.push(Some(vec![e[1], b'b']));
    let mut rng = Rng::new(seed);
    let alphabet = b"abcdefxyz0123456789 {}[]\":,.-+eE\\\n";
    for _ in 0..300 {
        let len = 2 + rng.below(5);
        toks.push(Some(
            (0..len)
                .map(|_| alphabet[rng.below(alphabet.len())])
                .collect(),
        ));
    }
    toks.push(None);
    toks.push(None);
    let eos = toks.len() as u32 - 1;
    Arc::new(TokenVocabulary::new(toks, &[eos]).unwrap())
}

pub fn compile(g: &Grammar) -> Arc<CompiledGrammar> {
    Arc::new(CompiledGrammar::new(g, synthetic_vocab(1)).unwrap())
}

/// Whether the grammar matches `text` in full.
pub fn matches(c: &Arc<CompiledGrammar>, text: &str) -> bool {
    let mut m = Matcher::new(c.clone());
    if text.is_empty() {
        return m.is_accepting();
    }
    m.accept_bytes(text.as_bytes()).is_ok() && m.is_accepting()
}

pub fn gbnf(text: &str) -> Arc<CompiledGrammar> {
    compile(&Grammar::from_gbnf(text).unwrap_or_else(|e| panic!("{e}\n{text}")))
}

pub fn check(c: &Arc<CompiledGrammar>, good: &[&str], bad: &[&str]) {
    for g in good {
        assert!(matches(c, g), "should match: {g:?}");
    }
    for b in bad {
        assert!(!matches(c, b), "should not match: {b:?}");
    }
}
