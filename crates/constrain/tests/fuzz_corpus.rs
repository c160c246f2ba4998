//! Replays the committed fuzz seed corpora (`fuzz/corpus/constrain_*`) through the entry points
//! the `cargo fuzz` targets use, every prefix of every seed, and runs seeded random and mutated
//! inputs through them: parsers of untrusted text never panic.
mod common;

use std::path::Path;

use common::Rng;
use torchnative_constrain::fuzzing;

fn corpus(target: &str) -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "{} is empty", dir.display());
    files
        .into_iter()
        .map(|p| std::fs::read(p).unwrap())
        .collect()
}

/// Rounds of mutation per target; `TORCHNATIVE_FUZZ_ROUNDS` raises it for a longer local run.
fn rounds() -> usize {
    std::env::var("TORCHNATIVE_FUZZ_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(1500)
}

fn replay(target: &str, run: fn(&[u8])) {
    for bytes in corpus(target) {
        for len in 0..=bytes.len() {
            run(&bytes[..len]);
        }
    }
}

/// Random edits of the seeds (byte flips, insertions of syntax characters, deletions, splices).
fn mutate(target: &str, run: fn(&[u8]), seed: u64, rounds: usize) {
    let seeds = corpus(target);
    let mut rng = Rng::new(seed);
    let alphabet = b"\"[]()|*+?{},.-^\\#:=\n aZ0\xC3\xA9";
    for _ in 0..rounds {
        let mut d = seeds[rng.below(seeds.len())].clone();
        for _ in 0..1 + rng.below(4) {
            let at = rng.below(d.len() + 1);
            match rng.below(4) {
                0 if at < d.len() => d[at] = alphabet[rng.below(alphabet.len())],
                1 => d.insert(at, alphabet[rng.below(alphabet.len())]),
                2 if at < d.len() => {
                    d.remove(at);
                }
                _ => {
                    let other = &seeds[rng.below(seeds.len())];
                    let from = rng.below(other.len());
                    let to = (from + rng.below(16)).min(other.len());
                    d.splice(at..at, other[from..to].iter().copied());
                }
            }
        }
        run(&d);
    }
}

#[test]
fn gbnf_corpus() {
    replay("constrain_gbnf", fuzzing::gbnf);
    mutate("constrain_gbnf", fuzzing::gbnf, 1, rounds());
}

#[test]
fn json_schema_corpus() {
    replay("constrain_json_schema", fuzzing::json_schema);
    mutate("constrain_json_schema", fuzzing::json_schema, 2, rounds());
}

#[test]
fn regex_corpus() {
    replay("constrain_regex", fuzzing::regex);
    mutate("constrain_regex", fuzzing::regex, 3, rounds());
}

#[test]
fn random_text_never_panics() {
    let mut rng = Rng::new(42);
    let alphabet = b"\"[]()|*+?{},.-^\\#:=\nroot ax0\t$dU";
    for _ in 0..2 * rounds() {
        let len = rng.below(40);
        let d: Vec<u8> = (0..len)
            .map(|_| alphabet[rng.below(alphabet.len())])
            .collect();
        fuzzing::gbnf(&d);
        fuzzing::regex(&d);
        fuzzing::json_schema(&d);
        let mut g = b"root ::= ".to_vec();
        g.extend_from_slice(&d);
        fuzzing::gbnf(&g);
    }
}
