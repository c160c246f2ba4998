//! Speculative decoding vs plain decoding on one model, alternating in one run: decode tokens/s,
//! acceptance, and that the tokens are the same.
//!
//! `cargo run --release -p torchnative-runtime --example speculative_bench -- MODEL [DRAFT_MODEL] [--reps N]`
use torchnative_runtime::*;

const TEXT: &str = "The river museum opened in 1921 in the old customs house by the harbour. Its \
first keeper, Anna Lindqvist, collected boats, nets and maps from the fishing villages along the \
coast, and wrote a short note about each object in a large green ledger that visitors can still \
read today. In 1958 a flood destroyed the ground floor, and the collection moved to the upper \
rooms, where it still is. The museum is open from nine to five, every day except Monday, and \
entry is free for children under twelve. School classes come on Tuesday mornings, when the \
keeper's great-granddaughter shows them how the old nets were knotted.";

fn run(
    llm: &Llm,
    prompt: &[u32],
    config: &GenerationConfig,
    spec: Option<&SpeculativeConfig>,
) -> Result<(Completion, f64)> {
    let mut s = llm.session(SessionOptions::default())?;
    let done = match spec {
        None => s.generate(prompt, config, &mut |_| Flow::Continue)?,
        Some(c) => {
            let mut sp = Speculator::new(llm, c.clone())?;
            s.generate_speculative(prompt, config, &mut sp, &mut |_| Flow::Continue)?
        }
    };
    let decode: f64 = done
        .timings
        .decode_steps
        .iter()
        .map(|d| d.as_secs_f64())
        .sum();
    let tps = done.timings.decode_steps.len() as f64 / decode;
    Ok((done, tps))
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut reps = 3;
    let mut paths = Vec::new();
    let mut i = 0;
    while i < args.len() {
        if args[i] == "--reps" {
            reps = args[i + 1].parse().expect("--reps N");
            i += 2;
        } else {
            paths.push(args[i].clone());
            i += 1;
        }
    }
    let llm = load_llm(&paths[0], &LoadOptions::default())?;
    let draft = match paths.get(1) {
        Some(p) => Some(load_llm(p, &LoadOptions::default())?),
        None => None,
    };
    let summary = llm.tokenize_chat(&[ChatMessage::new(
        "user",
        format!("{TEXT}\n\nRewrite the text above for a museum leaflet, keeping its details."),
    )])?;
    let open = llm.tokenize_chat(&[ChatMessage::new(
        "user",
        "Write a short story about a lighthouse keeper and a storm.",
    )])?;
    let config = GenerationConfig {
        max_new_tokens: 128,
        ..Default::default()
    };
    let mut cases: Vec<(String, &[u32], Option<SpeculativeConfig>)> =
        vec![("summary, plain".into(), &summary, None)];
    for k in [3, 4, 8] {
        let name = format!("summary, prompt lookup k={k}");
        cases.push((name, &summary, Some(SpeculativeConfig::prompt_lookup(k))));
    }
    if let Some(d) = &draft {
        for k in [2, 3] {
            let c = SpeculativeConfig {
                draft: DraftSource::Model(d.clone()),
                max_draft_tokens: k,
            };
            cases.push((
                format!("summary, Q4_0 draft k={k}"),
                &summary,
                Some(c.clone()),
            ));
            cases.push((format!("story, Q4_0 draft k={k}"), &open, Some(c)));
        }
        cases.push(("story, plain".into(), &open, None));
    }
    let mut results: Vec<Vec<f64>> = vec![Vec::new(); cases.len()];
    let mut stats: Vec<SpeculativeStats> = vec![Default::default(); cases.len()];
    let mut tokens: Vec<Vec<u32>> = vec![Vec::new(); cases.len()];
    for _ in 0..reps {
        for (j, (_, prompt, spec)) in cases.iter().enumerate() {
            let (done, tps) = run(&llm, prompt, &config, spec.as_ref())?;
            results[j].push(tps);
            stats[j] = done.speculative;
            tokens[j] = done.tokens;
        }
    }
    let median = |v: &[f64]| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let base_summary = median(&results[0]);
    let base_story = cases
        .iter()
        .position(|c| c.0 == "story, plain")
        .map(|j| (median(&results[j]), j));
    println!("| case | decode tok/s (median of {reps}) | vs plain | drafted | accepted | acceptance | same tokens as plain |");
    println!("|---|---:|---:|---:|---:|---:|---|");
    for (j, (name, _, _)) in cases.iter().enumerate() {
        let m = median(&results[j]);
        let (base, base_j) = if name.starts_with("story") {
            base_story.expect("story baseline")
        } else {
            (base_summary, 0)
        };
        let st = stats[j];
        println!(
            "| {name} | {m:.1} | {:.2}x | {} | {} | {:.2} | {} |",
            m / base,
            st.drafted,
            st.accepted,
            st.acceptance_rate(),
            tokens[j] == tokens[base_j]
        );
    }
    Ok(())
}
