//! Mask correctness: on random walks through several grammars, the cached mask, the plain trie
//! walk and a brute-force check of every token (feed its bytes to a copy of the matcher) agree.
mod common;

use std::sync::Arc;

use common::{synthetic_vocab, Rng};
use torchnative_constrain::{CompiledGrammar, Grammar, Matcher};

fn brute_force(m: &Matcher) -> Vec<u64> {
    let vocab = m.grammar().vocabulary().clone();
    let mut mask = vec![0u64; vocab.mask_words()];
    for t in 0..vocab.len() as u32 {
        let mut c = m.clone();
        let ok = if vocab.is_eos(t) {
            m.is_accepting()
        } else {
            c.accept_token(t).is_ok()
        };
        if ok {
            mask[(t / 64) as usize] |= 1 << (t % 64);
        }
    }
    mask
}

fn walk(grammar: &Grammar, seed: u64, steps: usize) {
    let vocab = synthetic_vocab(seed);
    let compiled = Arc::new(CompiledGrammar::new(grammar, vocab.clone()).unwrap());
    let mut rng = Rng::new(seed);
    for _ in 0..4 {
        let mut m = Matcher::new(compiled.clone());
        let mut cached = vec![0u64; vocab.mask_words()];
        let mut plain = vec![0u64; vocab.mask_words()];
        for step in 0..steps {
            m.fill_mask(&mut cached);
            m.fill_mask_uncached(&mut plain);
            let brute = brute_force(&m);
            assert_eq!(cached, brute, "cached mask, step {step}, seed {seed}");
            assert_eq!(plain, brute, "trie-walk mask, step {step}, seed {seed}");
            let allowed: Vec<u32> = (0..vocab.len() as u32)
                .filter(|&t| (cached[(t / 64) as usize] >> (t % 64)) & 1 == 1)
                .collect();
            assert!(!allowed.is_empty(), "nothing allowed at step {step}");
            let t = allowed[rng.below(allowed.len())];
            m.accept_token(t).unwrap();
            if m.is_terminated() {
                break;
            }
        }
    }
}

#[test]
fn masks_agree_with_brute_force() {
    let grammars = [
        Grammar::json_object(),
        Grammar::from_gbnf(
            "root ::= \"[\" (item (\", \" item)*)? \"]\"\nitem ::= [0-9]+ | \"\\\"\" [a-zé中]* \"\\\"\" | root",
        )
        .unwrap(),
        Grammar::from_gbnf("root ::= (\"a\" | \"ab\" | \"a\" \"b\" \"c\")* (\"x\" | \"xyz\")").unwrap(),
        // Nesting deeper than the frames a cache entry keys on.
        Grammar::from_gbnf(
            "root ::= a\na ::= \"(\" b \")\" | \"1\"\nb ::= \"[\" c \"]\" \" \"? | \"2\"\nc ::= \"{\" a \"}\" | \"3\" a?",
        )
        .unwrap(),
        Grammar::from_regex(r"[a-f]{2,5}(\d+|\.e)?[^x]").unwrap(),
        Grammar::from_json_schema(&serde_json::json!({
            "type": "object",
            "properties": {"name": {"type": "string", "maxLength": 4},
                           "age": {"type": "integer"},
                           "tags": {"type": "array", "items": {"enum": ["a", "b", 1]}, "maxItems": 2},
                           "day": {"type": "string", "format": "date"},
                           "code": {"type": "string", "pattern": "[a-f]+\\d"}},
            "required": ["name"]
        }))
        .unwrap(),
    ];
    for (i, g) in grammars.iter().enumerate() {
        walk(g, 11 + i as u64, 24);
    }
}

#[test]
fn apply_mask_sets_disallowed_logits_to_minus_infinity() {
    let mut logits = vec![1.0f32; 130];
    let mask = [u64::MAX, 0, 0b101];
    Matcher::apply_mask(&mask, &mut logits);
    assert!(logits[..64].iter().all(|&l| l == 1.0));
    assert!(logits[64..128].iter().all(|&l| l == f32::NEG_INFINITY));
    assert_eq!(logits[128], 1.0);
    assert_eq!(logits[129], f32::NEG_INFINITY);
}

#[test]
fn eos_only_when_the_grammar_cannot_continue() {
    let vocab = synthetic_vocab(3);
    let eos = vocab.eos_ids()[0];
    let g = Grammar::from_gbnf("root ::= \"ab\"").unwrap();
    let mut m = Matcher::new(Arc::new(CompiledGrammar::new(&g, vocab.clone()).unwrap()));
    assert!(!m.is_accepting());
    assert!(m.accept_token(eos).is_err());
    m.accept_bytes(b"ab").unwrap();
    assert!(m.is_accepting() && !m.can_continue());
    assert_eq!(m.allowed_tokens(), [eos]);
    let a = (0..vocab.len() as u32)
        .find(|&t| vocab.token_bytes(t) == Some(b"a"))
        .unwrap();
    let e = m.accept_token(a).unwrap_err().to_string();
    assert!(e.contains("does not allow"), "{e}");
    m.accept_token(eos).unwrap();
    assert!(m.is_terminated());
    assert!(m.accept_token(eos).is_err());
}

#[test]
fn rollback_restores_the_state() {
    let vocab = synthetic_vocab(4);
    let g = Grammar::json_object();
    let c = Arc::new(CompiledGrammar::new(&g, vocab.clone()).unwrap());
    let mut m = Matcher::new(c);
    let mut rng = Rng::new(9);
    let mut masks = Vec::new();
    let mut taken = Vec::new();
    for _ in 0..10 {
        let allowed = m.allowed_tokens();
        masks.push(allowed.clone());
        let t = allowed[rng.below(allowed.len())];
        m.accept_token(t).unwrap();
        taken.push(t);
        if m.is_terminated() {
            break;
        }
    }
    let n = taken.len();
    m.rollback(n / 2).unwrap();
    assert_eq!(m.allowed_tokens(), masks[n - n / 2]);
    m.rollback(n - n / 2).unwrap();
    assert_eq!(m.allowed_tokens(), masks[0]);
    assert!(m.rollback(1).is_err());
}

#[test]
fn long_generation_compacts_and_stays_correct() {
    // 3000 tokens of a flat list: the arena is compacted many times on the way.
    let vocab = synthetic_vocab(5);
    let g = Grammar::from_gbnf("root ::= (\"[\" [0-9]+ \"]\")* \"!\"").unwrap();
    let c = Arc::new(CompiledGrammar::new(&g, vocab.clone()).unwrap());
    let mut m = Matcher::new(c);
    let tok = |s: &[u8]| {
        (0..vocab.len() as u32)
            .find(|&t| vocab.token_bytes(t) == Some(s))
            .unwrap()
    };
    for _ in 0..1000 {
        m.accept_token(tok(b"[")).unwrap();
        m.accept_token(tok(b"12")).unwrap();
        m.accept_token(tok(b"]")).unwrap();
    }
    // Rollback across compactions, then the masks still agree with brute force.
    m.accept_token(tok(b"[")).unwrap();
    m.rollback(3).unwrap();
    let mut cached = vec![0u64; vocab.mask_words()];
    m.fill_mask(&mut cached);
    assert_eq!(cached, brute_force(&m));
    m.accept_token(tok(b"12")).unwrap();
    m.fill_mask(&mut cached);
    assert_eq!(cached, brute_force(&m));
    m.accept_token(tok(b"]")).unwrap();
    m.accept_token(tok(b"!")).unwrap();
    assert!(m.is_accepting());
    assert_eq!(m.allowed_tokens(), vocab.eos_ids());
}

#[test]
fn compiled_grammars_and_matchers_cross_threads() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<CompiledGrammar>();
    send_sync::<Matcher>();
    // Two threads share one compiled grammar (and its cache) and agree with a third.
    let vocab = synthetic_vocab(6);
    let c = Arc::new(CompiledGrammar::new(&Grammar::json_object(), vocab).unwrap());
    let run = |c: Arc<CompiledGrammar>| {
        let mut m = Matcher::new(c);
        m.accept_bytes(br#"{"a": [1, "x"], "b""#).unwrap();
        m.allowed_tokens()
    };
    let handles: Vec<_> = (0..2)
        .map(|_| {
            let c = c.clone();
            std::thread::spawn(move || run(c))
        })
        .collect();
    let expected = run(c.clone());
    for h in handles {
        assert_eq!(h.join().unwrap(), expected);
    }
    assert!(c.cache_stats().entries > 0);
}
