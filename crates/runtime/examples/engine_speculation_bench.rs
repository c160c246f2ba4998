//! The batching engine with and without prompt-lookup speculation, alternating in one run:
//! `streams` summarisation-style requests submitted at once (each a different instruction over
//! the same text), greedy, 128 new tokens. Prints aggregate output tokens/s (wall time from
//! the first submission to the last answer), acceptance, and whether every answer equals the
//! run without speculation.
//!
//! `cargo run --release -p torchnative-runtime --example engine_speculation_bench -- MODEL [--streams N] [--reps N]`
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::time::Instant;

use torchnative_runtime::*;

const TEXT: &str = "The river museum opened in 1921 in the old customs house by the harbour. Its \
first keeper, Anna Lindqvist, collected boats, nets and maps from the fishing villages along the \
coast, and wrote a short note about each object in a large green ledger that visitors can still \
read today. In 1958 a flood destroyed the ground floor, and the collection moved to the upper \
rooms, where it still is. The museum is open from nine to five, every day except Monday, and \
entry is free for children under twelve.";

const TASKS: [&str; 8] = [
    "Rewrite the text above for a museum leaflet, keeping its details.",
    "Repeat the text above, then summarise it in one sentence.",
    "List the facts in the text above as short sentences.",
    "Rewrite the text above in the present tense.",
    "Quote the sentences of the text above that mention years.",
    "Rewrite the text above as a letter to a friend.",
    "Copy the text above and underline nothing.",
    "Rewrite the text above for children.",
];

/// Answers of every prompt through one engine, and the wall time.
fn run(llm: &Llm, prompts: &[Vec<u32>], k: usize) -> Result<(Vec<Vec<u32>>, f64, u64, u64)> {
    let engine = Engine::start(
        llm.clone(),
        EngineConfig {
            max_running: prompts.len(),
            prompt_lookup_tokens: k,
            ..EngineConfig::default()
        },
    )?;
    let config = GenerationConfig {
        max_new_tokens: 128,
        ..Default::default()
    };
    let start = Instant::now();
    let rxs: Vec<mpsc::Receiver<EngineEvent>> = prompts
        .iter()
        .map(|p| {
            let (tx, rx) = mpsc::channel();
            let request = EngineRequest {
                prompt: p.clone(),
                config: config.clone(),
                top_logprobs: None,
            };
            engine.submit(
                request,
                Box::new(move |e| {
                    let _ = tx.send(e);
                    Flow::Continue
                }),
            )?;
            Ok(rx)
        })
        .collect::<Result<_>>()?;
    let mut answers = Vec::new();
    for rx in rxs {
        loop {
            match rx.recv().expect("an end event") {
                EngineEvent::Done(d) => {
                    answers.push(d.tokens);
                    break;
                }
                EngineEvent::Error(e) => return Err(e),
                _ => {}
            }
        }
    }
    let wall = start.elapsed().as_secs_f64();
    let s = engine.stats();
    Ok((
        answers,
        wall,
        s.drafted_tokens.load(Ordering::Relaxed),
        s.accepted_tokens.load(Ordering::Relaxed),
    ))
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mut reps, mut streams) = (3, 4);
    let mut model = None;
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "--reps" => reps = args[i + 1].parse().expect("--reps N"),
            "--streams" => streams = args[i + 1].parse().expect("--streams N"),
            path => {
                model = Some(path.to_string());
                i += 1;
                continue;
            }
        }
        i += 2;
    }
    let streams: usize = streams.clamp(1, TASKS.len());
    let llm = load_llm(&model.expect("MODEL"), &LoadOptions::default())?;
    let prompts: Vec<Vec<u32>> = TASKS[..streams]
        .iter()
        .map(|t| llm.tokenize_chat(&[ChatMessage::new("user", format!("{TEXT}\n\n{t}"))]))
        .collect::<Result<_>>()?;
    let ks = [0, 3, 4];
    let mut tps: Vec<Vec<f64>> = vec![Vec::new(); ks.len()];
    let mut counts = vec![(0, 0); ks.len()];
    let mut answers: Vec<Vec<Vec<u32>>> = vec![Vec::new(); ks.len()];
    for _ in 0..reps {
        for (j, &k) in ks.iter().enumerate() {
            let (a, wall, drafted, accepted) = run(&llm, &prompts, k)?;
            let tokens: usize = a.iter().map(Vec::len).sum();
            tps[j].push(tokens as f64 / wall);
            counts[j] = (drafted, accepted);
            answers[j] = a;
        }
    }
    let median = |v: &[f64]| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let base = median(&tps[0]);
    println!("| {streams} streams | output tok/s (median of {reps}) | vs no speculation | drafted | accepted | same tokens |");
    println!("|---|---:|---:|---:|---:|---|");
    for (j, &k) in ks.iter().enumerate() {
        let m = median(&tps[j]);
        let name = match k {
            0 => "no speculation".to_string(),
            k => format!("prompt lookup k={k}"),
        };
        println!(
            "| {name} | {m:.1} | {:.2}x | {} | {} | {} |",
            m / base,
            counts[j].0,
            counts[j].1,
            answers[j] == answers[0]
        );
    }
    Ok(())
}
