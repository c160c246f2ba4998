//! Constrained-decoding overhead on the default model's vocabulary (SmolLM2, 49152 tokens):
//! vocabulary and grammar compile times, and the per-step mask time over a document of about
//! 300 tokens, with the mask cache cold (first request), warm (any later request), and the plain
//! trie walk without the cache for reference.
//!
//!     cargo run --release -p torchnative-constrain --example mask_bench [-- model.gguf]
//!
//! The model defaults to `$TORCHNATIVE_MODEL`, else
//! `~/.cache/torchnative/models/SmolLM2-135M-Instruct.Q4_1.gguf`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use torchnative_constrain::{CompiledGrammar, Grammar, Matcher, TokenVocabulary};
use torchnative_formats::gguf::GgufFile;
use torchnative_tokenizer::{EncodeOptions, Tokenizer};

const SCHEMA: &str = r##"{
  "type": "object",
  "properties": {
    "id": {"type": "integer"},
    "name": {"type": "string"},
    "email": {"type": ["string", "null"]},
    "roles": {"type": "array", "items": {"enum": ["admin", "editor", "viewer"]}, "minItems": 1, "maxItems": 3},
    "address": {
      "type": "object",
      "properties": {
        "street": {"type": "string"},
        "city": {"type": "string"},
        "zip": {"type": "string", "maxLength": 10},
        "geo": {"type": "object", "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}},
                "required": ["lat", "lon"], "additionalProperties": false}
      },
      "required": ["street", "city", "zip", "geo"],
      "additionalProperties": false
    },
    "orders": {"type": "array", "items": {"$ref": "#/$defs/order"}, "maxItems": 10},
    "active": {"type": "boolean"}
  },
  "required": ["id", "name", "email", "roles", "address", "orders", "active"],
  "additionalProperties": false,
  "$defs": {
    "order": {
      "type": "object",
      "properties": {
        "sku": {"type": "string"},
        "qty": {"type": "integer"},
        "price": {"type": "number"},
        "notes": {"anyOf": [{"type": "string"}, {"type": "null"}]}
      },
      "required": ["sku", "qty", "price", "notes"],
      "additionalProperties": false
    }
  }
}"##;

const DOCUMENT: &str = r#"{
  "id": 48213,
  "name": "Ada Lovelace",
  "email": "ada@analytical-engine.org",
  "roles": ["admin", "editor"],
  "address": {
    "street": "12 St James's Square",
    "city": "London",
    "zip": "SW1Y 4JH",
    "geo": {"lat": 51.5074, "lon": -0.1357}
  },
  "orders": [
    {"sku": "BRG-1843-N", "qty": 2, "price": 19.99, "notes": "Notes on the Analytical Engine, translated from Menabrea"},
    {"sku": "PNC-0007", "qty": 12, "price": 0.35, "notes": null},
    {"sku": "CRD-PUNCH-80", "qty": 500, "price": 0.02, "notes": "Jacquard loom cards, the kind that weave flowers and leaves"},
    {"sku": "BRS-GEAR-24T", "qty": 24, "price": 3.5e1, "notes": "brass gears \u2014 24 teeth"},
    {"sku": "INK-BLK", "qty": 3, "price": 4.25, "notes": null}
  ],
  "active": true
}"#;

const CHESS: &str = r#"
root    ::= "1. " move " " move "\n" ([1-9] [0-9]? ". " move " " move "\n")+
move    ::= (pawn | nonpawn | castle) [+#]?
pawn    ::= ([a-h] "x")? [a-h] [1-8] ("=" [NBRQ])?
nonpawn ::= [NBKRQ] [a-h]? [1-8]? "x"? [a-h] [1-8]
castle  ::= "O-O" "-O"?
"#;

fn chess_game() -> String {
    let moves = [
        ("e4", "e5"),
        ("Nf3", "Nc6"),
        ("Bb5", "a6"),
        ("Ba4", "Nf6"),
        ("O-O", "Be7"),
        ("Re1", "b5"),
        ("Bb3", "d6"),
        ("c3", "O-O"),
        ("h3", "Nb8"),
        ("d4", "Nbd7"),
        ("c4", "c6"),
        ("cxb5", "axb5"),
        ("Nc3", "Bb7"),
        ("Bg5", "b4"),
        ("Nb1", "h6"),
        ("Bh4", "c5"),
        ("dxe5", "Nxe4"),
        ("Bxe7", "Qxe7"),
        ("exd6", "Qf6"),
        ("Nbd2", "Nxd6"),
        ("Nc4", "Nxc4"),
        ("Bxc4", "Nb6"),
        ("Ne5", "Rae8"),
        ("Bxf7+", "Rxf7"),
        ("Nxf7", "Rxe1+"),
        ("Qxe1", "Kxf7"),
        ("Qe3", "Qg5"),
        ("Qxg5", "hxg5"),
        ("b3", "Ke6"),
        ("a3", "Kd6"),
        ("axb4", "cxb4"),
        ("Ra5", "Nd5"),
        ("f3", "Bc8"),
        ("Kf2", "Bf5"),
        ("Ra7", "g6"),
        ("Ra6+", "Kc5"),
        ("Ke1", "Nf4"),
        ("g3", "Nxh3"),
        ("Kd2", "Kb5"),
        ("Rd6", "Kc5"),
        ("Ra6", "Nf2"),
        ("g4", "Bd3"),
        ("Re6", "Kd4"),
        ("Rd6+", "Ke5"),
        ("Rd5+", "Ke4"),
        ("Rd4+", "Kxf3"),
        ("Rxd3+", "Nxd3"),
        ("Kxd3", "Kxg4"),
        ("Ke4", "Kh3"),
        ("Kf3", "g4+"),
    ];
    let mut s = String::new();
    for (i, (w, b)) in moves.iter().enumerate() {
        s.push_str(&format!("{}. {w} {b}\n", i + 1));
    }
    s
}

fn stats(label: &str, us: &mut [f64]) {
    us.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = us.len();
    let mean = us.iter().sum::<f64>() / n as f64;
    let pct = |p: f64| us[((n as f64 * p) as usize).min(n - 1)];
    println!(
        "    {label:<34} mean {mean:>9.1} us   p50 {:>9.1}   p99 {:>9.1}   max {:>9.1}",
        pct(0.5),
        pct(0.99),
        us[n - 1]
    );
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            std::env::var_os("TORCHNATIVE_MODEL")
                .map(PathBuf::from)
                .unwrap_or_else(|| {
                    PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
                        .join(".cache/torchnative/models/SmolLM2-135M-Instruct.Q4_1.gguf")
                })
        });
    let file = GgufFile::open(&path)?;
    let tokenizer = Tokenizer::from_gguf(&file)?;
    let t0 = Instant::now();
    let tokens: Vec<Option<Vec<u8>>> = (0..tokenizer.vocab_size() as u32)
        .map(|id| tokenizer.token_bytes(id).map(|b| b.map(<[u8]>::to_vec)))
        .collect::<Result<_, _>>()?;
    let vocab = Arc::new(TokenVocabulary::new(tokens, &tokenizer.eos_ids())?);
    println!(
        "vocabulary: {} tokens, {} trie nodes, built in {:.1} ms",
        vocab.len(),
        vocab.trie_nodes(),
        t0.elapsed().as_secs_f64() * 1e3
    );

    let game = chess_game();
    let cases: Vec<(&str, Grammar, &str)> = vec![
        ("JSON mode (any object)", Grammar::json_object(), DOCUMENT),
        (
            "nested JSON schema",
            Grammar::from_json_schema_str(SCHEMA)?,
            DOCUMENT,
        ),
        (
            "GBNF (chess moves)",
            Grammar::from_gbnf(CHESS)?,
            game.as_str(),
        ),
    ];
    let words = vocab.mask_words();
    for (label, grammar, doc) in cases {
        let t0 = Instant::now();
        let compiled = Arc::new(CompiledGrammar::new(&grammar, vocab.clone())?);
        let compile_ms = t0.elapsed().as_secs_f64() * 1e3;
        let ids = tokenizer.encode(
            doc,
            EncodeOptions {
                add_special_tokens: false,
                parse_special: false,
            },
        )?;
        println!(
            "{label}: compiled in {compile_ms:.2} ms; document of {} tokens",
            ids.len()
        );
        let mut mask = vec![0u64; words];
        let mut check = vec![0u64; words];
        let mut run =
            |pass: &str, uncached_walk: bool| -> Result<Vec<f64>, Box<dyn std::error::Error>> {
                let mut m = Matcher::new(compiled.clone());
                let mut times = Vec::with_capacity(ids.len() + 1);
                let mut accept = Vec::with_capacity(ids.len());
                for &id in ids.iter().chain([&vocab.eos_ids()[0]]) {
                    let t = Instant::now();
                    if uncached_walk {
                        m.fill_mask_uncached(&mut mask);
                    } else {
                        m.fill_mask(&mut mask);
                    }
                    times.push(t.elapsed().as_secs_f64() * 1e6);
                    if uncached_walk {
                        // The cached path must give the walk's mask, bit for bit.
                        m.fill_mask(&mut check);
                        if check != mask {
                            let step = times.len() - 1;
                            return Err(format!(
                                "{label}: cached and walked masks differ at step {step}"
                            )
                            .into());
                        }
                    }
                    if (mask[(id / 64) as usize] >> (id % 64)) & 1 == 0 {
                        return Err(format!("{label} ({pass}): token {id} not in the mask").into());
                    }
                    let t = Instant::now();
                    m.accept_token(id)?;
                    accept.push(t.elapsed().as_secs_f64() * 1e6);
                }
                if pass == "warm" {
                    stats("accept_token", &mut accept);
                }
                Ok(times)
            };
        compiled.clear_cache();
        let mut cold = run("cold", false)?;
        let after_cold = compiled.cache_stats();
        let mut warm = run("warm", false)?;
        let mut walk = run("walk", true)?;
        stats("mask, cold cache (first request)", &mut cold);
        stats("mask, warm cache", &mut warm);
        stats("mask, plain trie walk (no cache)", &mut walk);
        println!("    (cached masks equal the plain walk's at every step)");
        println!(
            "    cache after the cold pass: {} entries, {:.1} MiB ({} misses, {} hits)",
            after_cold.entries,
            after_cold.bytes as f64 / (1 << 20) as f64,
            after_cold.misses,
            after_cold.hits
        );
    }
    Ok(())
}
