//! Batched sentence-embedding throughput (what bench/embed/run.sh runs beside transformers):
//! `embed_throughput MODEL_DIR TEXTS_FILE THREADS REPS OUT.json`. Loads the model, embeds
//! every line of TEXTS_FILE in one call (truncating to max_seq_length, as
//! sentence-transformers does) once as a warm-up and then REPS times, and writes the timings
//! and the embeddings as JSON.

use std::path::Path;
use std::time::Instant;

use torchnative_runtime::{embed, EmbedOptions, Embedder};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 6 {
        return Err("usage: embed_throughput MODEL_DIR TEXTS_FILE THREADS REPS OUT.json".into());
    }
    let threads: usize = args[3].parse()?;
    let reps: usize = args[4].parse()?;
    embed::set_threads(threads)?;
    let load = Instant::now();
    let embedder = Embedder::load(Path::new(&args[1]))?;
    let load_s = load.elapsed().as_secs_f64();
    let text = std::fs::read_to_string(&args[2])?;
    let texts: Vec<&str> = text.lines().collect();
    let options = EmbedOptions { truncate: true };
    let first = embedder.embed(&texts, &options)?;
    let tokens: usize = first.token_counts.iter().sum();
    let mut seconds = Vec::with_capacity(reps);
    for _ in 0..reps {
        let t = Instant::now();
        let e = embedder.embed(&texts, &options)?;
        seconds.push(t.elapsed().as_secs_f64());
        assert_eq!(e.data, first.data, "embeddings changed between runs");
    }
    let rows: Vec<&[f32]> = (0..first.len()).map(|i| first.row(i)).collect();
    let out = serde_json::json!({
        "load_seconds": load_s,
        "threads": threads,
        "texts": texts.len(),
        "tokens": tokens,
        "seconds": seconds,
        "embeddings": rows,
    });
    std::fs::write(&args[5], serde_json::to_vec(&out)?)?;
    Ok(())
}
