//! `torchnative`: run, chat with, inspect and tokenize models from the shell.

use std::io::{BufRead, IsTerminal, Write};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

use clap::{Args, Parser, Subcommand};
use serde_json::json;
use torchnative_runtime::{
    default_model_path, load_llm, load_llm_with_progress, ActiveLora, ChatMessage, Completion,
    Constraint, ConstraintSyntax, DraftSource, Engine, EngineConfig, Flow, GenerationConfig,
    KvDtype, Llm, LoadOptions, PagedKvCache, SessionOptions, SpeculativeConfig, Speculator,
    WeightFormat,
};

/// Counts allocations so `run --json` can report those of the decode loop (one relaxed atomic
/// increment per allocation).
#[global_allocator]
static ALLOCATOR: torchnative_runtime::CountingAllocator = torchnative_runtime::CountingAllocator;

#[derive(Parser)]
#[command(
    name = "torchnative",
    version,
    about = "Run Hugging Face / GGUF language models natively on the CPU"
)]
struct Cli {
    /// Print errors with their full context.
    #[arg(short, long, global = true)]
    verbose: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Answer one prompt, streaming the text (chat template applied unless --raw).
    Run(RunArgs),
    /// Interactive chat that keeps the conversation in one live session.
    Chat(ChatArgs),
    /// Describe a model: architecture, parameters, tensor types, context, vocabulary.
    Info(InfoArgs),
    /// Show the token ids and pieces of a text.
    Tokenize(TokenizeArgs),
    /// Sentence embeddings from a BERT-family model directory (sentence-transformers layout:
    /// pooling and normalisation as its files say).
    Embed(EmbedArgs),
    /// Score documents against a query with a cross-encoder (a BERT, RoBERTa / XLM-R or
    /// ModernBERT `*ForSequenceClassification` directory), best first.
    Rerank(RerankArgs),
    /// Measure prompt processing and generation speed, like llama-bench.
    Bench(BenchArgs),
    /// Write a GGUF copy of a model with other tensor types, like llama-quantize.
    Quantize(QuantizeArgs),
    /// Serve the OpenAI HTTP API (chat/completions, completions, models, health, metrics),
    /// batching concurrent requests.
    Serve(ServeArgs),
}

#[derive(Args)]
struct ServeArgs {
    /// A .gguf file, a safetensors directory or a Hugging Face repo id in the local cache;
    /// without it, the default model.
    model: Option<String>,
    /// Address to listen on (loopback unless you choose otherwise).
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Port (0 picks a free one; the chosen address is printed).
    #[arg(long, default_value_t = 8080)]
    port: u16,
    /// Requests generated together (KV cache slots).
    #[arg(long, default_value_t = 8)]
    parallel: usize,
    /// Positions per request: prompt plus answer.
    #[arg(long, default_value_t = 2048)]
    ctx_per_request: usize,
    /// Tokens per forward pass (decode tokens first, then prompt chunks).
    #[arg(long, default_value_t = 256)]
    batch_tokens: usize,
    /// Requests waiting for a slot beyond which new ones get 429.
    #[arg(long, default_value_t = 64)]
    max_queue: usize,
    /// KV cache pool, in positions shared by all requests (allocated at start).
    #[arg(long, default_value_t = 8192, conflicts_with = "kv_cache_mib")]
    kv_cache_tokens: usize,
    /// KV cache pool in MiB instead of positions.
    #[arg(long)]
    kv_cache_mib: Option<usize>,
    /// How the KV cache stores keys and values: f32 (what the model computed) or f16 (half the
    /// memory and half the bytes attention reads; logits move by the rounding).
    #[arg(long, default_value = "f32", value_parser = ["f32", "f16"])]
    kv_cache_dtype: String,
    /// Require `Authorization: Bearer KEY` (also from env TORCHNATIVE_API_KEY).
    #[arg(long, env = "TORCHNATIVE_API_KEY")]
    api_key: Option<String>,
    /// The model id clients use [the file's name without extension].
    #[arg(long)]
    model_name: Option<String>,
    /// Largest max_tokens a request may ask for.
    #[arg(long, default_value_t = 4096)]
    max_tokens_limit: usize,
    /// Largest request body in bytes.
    #[arg(long, default_value_t = 1 << 20)]
    max_body_bytes: usize,
    /// Also serve /v1/embeddings with this sentence-embedding model directory (BERT, RoBERTa or
    /// ModernBERT with its sentence-transformers files); its id is the directory's name.
    #[arg(long, value_name = "DIR")]
    embedding_model: Option<std::path::PathBuf>,
    /// Also serve /v1/rerank with this cross-encoder directory (a one-label BERT, RoBERTa /
    /// XLM-R or ModernBERT `*ForSequenceClassification`); its id is the directory's name.
    #[arg(long, value_name = "DIR")]
    rerank_model: Option<std::path::PathBuf>,
    /// Serve a LoRA adapter (PEFT directory or GGUF LoRA file, optional scale) as the model
    /// NAME: requests naming it run the base model with the adapter; repeatable.
    #[arg(long, value_name = "NAME=PATH[:SCALE]")]
    lora: Vec<String>,
    /// Prompt-lookup speculation: draft up to K tokens per request from its own history and
    /// verify them in the same passes (answers do not change; 0: off).
    #[arg(long, value_name = "K", default_value_t = 0)]
    prompt_lookup: usize,
    #[arg(long, default_value = "native")]
    dtype: String,
    /// Kernel threads (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
}

#[derive(Args, Clone)]
struct ModelArgs {
    /// Weights as computed: f32 (dequantized once at load; matches transformers), f16, bf16, or
    /// native (the file's packed types through the quantized kernels).
    #[arg(long, default_value = "native")]
    dtype: String,
    /// Context size in tokens (default: the model's, at most 4096).
    #[arg(long)]
    ctx: Option<usize>,
    /// Kernel threads (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
}

#[derive(Args, Clone)]
struct SamplingArgs {
    // Unset options take the model's generation_config.json values (transformers' rules: its
    // do_sample decides greedy vs sampling), else greedy decoding of at most 256 tokens.
    /// Most tokens to generate [model's max_new_tokens, else 256].
    #[arg(long)]
    max_tokens: Option<usize>,
    /// Sampling temperature; 0 decodes greedily [model's, else greedy].
    #[arg(long)]
    temperature: Option<f32>,
    /// Keep the k most likely tokens (0: off) [model's, else off].
    #[arg(long)]
    top_k: Option<usize>,
    /// Nucleus sampling mass [model's, else 1.0].
    #[arg(long)]
    top_p: Option<f32>,
    /// Drop tokens below this fraction of the top probability [model's, else 0].
    #[arg(long)]
    min_p: Option<f32>,
    /// Repetition penalty [model's, else 1.0].
    #[arg(long)]
    repeat_penalty: Option<f32>,
    #[arg(long)]
    seed: Option<u64>,
    /// Stop when this text appears (repeatable; not printed).
    #[arg(long)]
    stop: Vec<String>,
    /// System prompt for chat models.
    #[arg(long)]
    system: Option<String>,
    /// Constrain the output to a GBNF grammar (llama.cpp's format) read from FILE.
    #[arg(long, value_name = "FILE", group = "constraint")]
    grammar_file: Option<std::path::PathBuf>,
    /// Constrain the output to JSON valid against a schema: inline JSON, or a file name.
    #[arg(long, value_name = "SCHEMA", group = "constraint")]
    json_schema: Option<String>,
    /// Constrain the output to text matching a regular expression (in full).
    #[arg(long, value_name = "REGEX", group = "constraint")]
    regex: Option<String>,
    /// Constrain the output to a JSON object (JSON mode).
    #[arg(long, group = "constraint")]
    json_object: bool,
    /// A LoRA adapter (PEFT directory or GGUF LoRA file) added to the model, with an optional
    /// scale (default 1); repeatable, the adapters' deltas add up.
    #[arg(long, value_name = "PATH[:SCALE]")]
    lora: Vec<String>,
}

#[derive(Args)]
struct SpeculativeArgs {
    /// Speculative decoding with prompt lookup: draft the tokens that followed the last
    /// earlier occurrence of the text's final n-gram (same output, fewer forward passes when
    /// the answer repeats the prompt).
    #[arg(long, conflicts_with = "draft_model")]
    prompt_lookup: bool,
    /// Speculative decoding with a draft model of the same vocabulary (a .gguf file or a
    /// safetensors directory), decoding greedily.
    #[arg(long, value_name = "MODEL")]
    draft_model: Option<String>,
    /// Tokens drafted per verification step.
    #[arg(long, default_value_t = 3)]
    draft_tokens: usize,
}

#[derive(Args)]
struct RunArgs {
    /// [MODEL] PROMPT: MODEL is a .gguf file, a safetensors directory or a Hugging Face repo id
    /// in the local cache; without it, the default model.
    #[arg(num_args = 1..=2, required = true, value_names = ["MODEL", "PROMPT"])]
    args: Vec<String>,
    /// Plain completion of the prompt, no chat template.
    #[arg(long)]
    raw: bool,
    /// Print one JSON object (text, tokens, finish_reason, usage, timings) instead of streaming.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    sampling: SamplingArgs,
    #[command(flatten)]
    speculative: SpeculativeArgs,
}

#[derive(Args)]
struct ChatArgs {
    model: Option<String>,
    #[command(flatten)]
    model_args: ModelArgs,
    #[command(flatten)]
    sampling: SamplingArgs,
}

#[derive(Args)]
struct InfoArgs {
    model: Option<String>,
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct TokenizeArgs {
    /// [MODEL] TEXT
    #[arg(num_args = 1..=2, required = true, value_names = ["MODEL", "TEXT"])]
    args: Vec<String>,
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct EmbedArgs {
    /// Model directory: config.json, model.safetensors, tokenizer.json, and the
    /// sentence-transformers files (modules.json, 1_Pooling/, sentence_bert_config.json).
    model: std::path::PathBuf,
    /// A text to embed (repeatable).
    #[arg(long = "text", value_name = "TEXT")]
    texts: Vec<String>,
    /// A file with one text per line (empty lines skipped). Without --text or --file, lines
    /// are read from standard input.
    #[arg(long, value_name = "FILE")]
    file: Option<std::path::PathBuf>,
    /// Cut texts longer than the model's max_seq_length (default: such a text is an error).
    #[arg(long)]
    truncate: bool,
    /// Texts per forward pass (results do not depend on it).
    #[arg(long, default_value_t = 64)]
    batch: usize,
    /// Kernel threads (default: all cores).
    #[arg(short = 't', long)]
    threads: Option<usize>,
    /// One JSON object shaped like OpenAI's /v1/embeddings response; otherwise one line of
    /// space-separated values per text.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct RerankArgs {
    /// Model directory: config.json (a `*ForSequenceClassification`), model.safetensors,
    /// tokenizer.json.
    model: std::path::PathBuf,
    /// The query every document is scored against.
    #[arg(long)]
    query: String,
    /// A document (repeatable).
    #[arg(long = "doc", value_name = "TEXT")]
    docs: Vec<String>,
    /// A file with one document per line (empty lines skipped). Without --doc or --file, lines
    /// are read from standard input.
    #[arg(long, value_name = "FILE")]
    file: Option<std::path::PathBuf>,
    /// Cut a query + document pair longer than the model's length as transformers does (the
    /// longer text first; default: such a pair is an error).
    #[arg(long)]
    truncate: bool,
    /// Print only the best N (one-label models).
    #[arg(long)]
    top_n: Option<usize>,
    /// Kernel threads (default: all cores).
    #[arg(short = 't', long)]
    threads: Option<usize>,
    /// One JSON object shaped like the common /v1/rerank responses (`results` with `index`,
    /// `relevance_score`, `document`); otherwise one line per document: rank, index, score, text.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct BenchArgs {
    model: Option<String>,
    /// Prompt tokens per prompt-processing test (0 skips it).
    #[arg(short = 'p', long = "n-prompt", default_value_t = 512)]
    n_prompt: usize,
    /// Tokens per generation test (0 skips it).
    #[arg(short = 'n', long = "n-gen", default_value_t = 128)]
    n_gen: usize,
    /// Kernel threads.
    #[arg(short = 't', long, default_value_t = 2)]
    threads: usize,
    /// Repetitions (mean and standard deviation over them).
    #[arg(short = 'r', long, default_value_t = 5)]
    repetitions: usize,
    #[arg(long, default_value = "native")]
    dtype: String,
    /// Prompt tokens evaluated per forward pass.
    #[arg(long, default_value_t = 512)]
    batch: usize,
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct QuantizeArgs {
    /// A .gguf file, a safetensors directory or a Hugging Face repo id in the local cache.
    input: String,
    /// The GGUF file to write.
    output: std::path::PathBuf,
    /// Output type: q4_0, q4_1, q5_0, q5_1, q8_0, q4_k_s, q4_k_m, q5_k_s, q5_k_m, q6_k, f16,
    /// bf16, f32 (per-tensor mixtures as llama-quantize chooses them).
    #[arg(long = "type", value_name = "TYPE")]
    file_type: String,
    /// Replace OUTPUT if it exists.
    #[arg(long)]
    force: bool,
    /// Worker threads (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Print the summary as one JSON object.
    #[arg(long)]
    json: bool,
}

type CliResult<T> = Result<T, Box<dyn std::error::Error>>;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let verbose = cli.verbose;
    let result = match cli.command {
        Command::Run(a) => run(a),
        Command::Chat(a) => chat(a),
        Command::Info(a) => info(a),
        Command::Tokenize(a) => tokenize(a),
        Command::Embed(a) => embed(a),
        Command::Rerank(a) => rerank(a),
        Command::Bench(a) => bench(a),
        Command::Quantize(a) => quantize(a),
        Command::Serve(a) => serve(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            if verbose {
                eprintln!("torchnative: error: {e:?}");
            } else {
                eprintln!("torchnative: error: {e}");
            }
            ExitCode::FAILURE
        }
    }
}

/// The model to load: the one named, or the default model from `$TORCHNATIVE_HOME`.
fn model_spec(named: Option<&str>) -> CliResult<String> {
    if let Some(m) = named {
        return Ok(m.to_string());
    }
    let path = default_model_path();
    if !path.is_file() {
        return Err(format!(
            "no MODEL given and the default model is not at {}; fetch it with `scripts/fetch-model.sh` \
             (from the torchnative repository)",
            path.display()
        )
        .into());
    }
    Ok(path.display().to_string())
}

fn split_model_and_text(args: &[String]) -> (Option<&str>, &str) {
    match args {
        [text] => (None, text),
        [model, text] => (Some(model), text),
        _ => unreachable!("clap enforces 1..=2 values"),
    }
}

fn load(spec: &str, m: &ModelArgs) -> CliResult<Llm> {
    let options = LoadOptions {
        weight_format: WeightFormat::parse(&m.dtype)?,
        threads: m.threads,
    };
    if !std::io::stderr().is_terminal() {
        return Ok(load_llm(spec, &options)?);
    }
    let bar = indicatif::ProgressBar::new(0);
    bar.set_style(
        indicatif::ProgressStyle::with_template("loading {msg} {bar:30} {pos}/{len} layers")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    // The file name only: a long path would wrap the bar's line.
    let name = std::path::Path::new(spec)
        .file_name()
        .map_or(spec.into(), |n| n.to_string_lossy().into_owned());
    bar.set_message(name);
    let llm = load_llm_with_progress(spec, &options, &mut |done, total| {
        bar.set_length(total as u64);
        bar.set_position(done as u64);
    });
    bar.finish_and_clear();
    let llm = llm?;
    eprintln!("loaded {spec} in {:.2}s", llm.load_time().as_secs_f64());
    Ok(llm)
}

/// The model's generation defaults with the options the user gave on top.
fn generation_config(llm: &Llm, s: &SamplingArgs) -> CliResult<GenerationConfig> {
    let mut cfg = llm.generation_config();
    if let Some(n) = s.max_tokens {
        cfg.max_new_tokens = n;
        cfg.max_length = None;
    }
    if let Some(t) = s.temperature {
        cfg.sampling.do_sample = t > 0.0;
        if t > 0.0 {
            cfg.sampling.temperature = t;
        }
    }
    if let Some(k) = s.top_k {
        cfg.sampling.top_k = k;
    }
    if let Some(p) = s.top_p {
        cfg.sampling.top_p = p;
    }
    if let Some(p) = s.min_p {
        cfg.sampling.min_p = p;
    }
    if let Some(p) = s.repeat_penalty {
        cfg.sampling.repetition_penalty = p;
    }
    cfg.seed = s.seed;
    cfg.stop = s.stop.clone();
    cfg.constraint = constraint(llm, s)?;
    if !s.lora.is_empty() {
        let adapters = s.lora.iter().map(|spec| lora(llm, spec));
        cfg.lora = Some(adapters.collect::<CliResult<Vec<_>>>()?);
    }
    Ok(cfg)
}

/// `PATH[:SCALE]`: the adapter at PATH loaded for `llm`, with SCALE (default 1).
fn lora(llm: &Llm, spec: &str) -> CliResult<ActiveLora> {
    let (path, scale) = match spec.rsplit_once(':') {
        Some((p, s)) if !p.is_empty() && s.parse::<f32>().is_ok() => (p, s.parse::<f32>()?),
        _ => (spec, 1.0),
    };
    Ok(ActiveLora::new(
        llm.load_lora(std::path::Path::new(path))?,
        scale,
    ))
}

/// The grammar the options name, compiled for `llm`'s vocabulary.
fn constraint(llm: &Llm, s: &SamplingArgs) -> CliResult<Option<Constraint>> {
    let read = |path: &std::path::Path| {
        std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
    };
    Ok(Some(if let Some(path) = &s.grammar_file {
        Constraint::parse(llm, ConstraintSyntax::Gbnf, &read(path)?)?
    } else if let Some(schema) = &s.json_schema {
        let text = if schema.trim_start().starts_with('{') {
            schema.clone()
        } else {
            read(std::path::Path::new(schema))?
        };
        Constraint::parse(llm, ConstraintSyntax::JsonSchema, &text)?
    } else if let Some(re) = &s.regex {
        Constraint::parse(llm, ConstraintSyntax::Regex, re)?
    } else if s.json_object {
        Constraint::json_object(llm)?
    } else {
        return Ok(None);
    }))
}

/// The speculator the options ask for, if any.
fn speculator(llm: &Llm, a: &SpeculativeArgs, model: &ModelArgs) -> CliResult<Option<Speculator>> {
    let draft = if a.prompt_lookup {
        SpeculativeConfig::prompt_lookup(a.draft_tokens).draft
    } else if let Some(spec) = &a.draft_model {
        DraftSource::Model(load(spec, model)?)
    } else {
        return Ok(None);
    };
    let config = SpeculativeConfig {
        draft,
        max_draft_tokens: a.draft_tokens,
    };
    Ok(Some(Speculator::new(llm, config)?))
}

fn run(a: RunArgs) -> CliResult<()> {
    let (model, prompt) = split_model_and_text(&a.args);
    let llm = load(&model_spec(model)?, &a.model)?;
    let cfg = generation_config(&llm, &a.sampling)?;
    let mut speculator = speculator(&llm, &a.speculative, &a.model)?;
    let ids = if a.raw {
        llm.tokenize(prompt)?
    } else {
        let mut messages = Vec::new();
        if let Some(system) = &a.sampling.system {
            messages.push(ChatMessage::new("system", system.clone()));
        }
        messages.push(ChatMessage::new("user", prompt));
        llm.tokenize_chat(&messages)?
    };
    let n_ctx = a.model.ctx.or(Some(ids.len() + cfg.max_new_tokens));
    let mut session = llm.session(SessionOptions {
        n_ctx,
        ..Default::default()
    })?;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut on_text = |piece: &str| {
        if !a.json {
            let _ = out.write_all(piece.as_bytes());
            let _ = out.flush();
        }
        Flow::Continue
    };
    let done = match speculator.as_mut() {
        Some(s) => session.generate_speculative(&ids, &cfg, s, &mut on_text)?,
        None => session.generate(&ids, &cfg, &mut on_text)?,
    };
    if !a.json {
        let _ = writeln!(out);
    }
    drop(out);
    if a.json {
        println!("{}", completion_json(&done));
    } else if std::io::stderr().is_terminal() {
        eprintln!("{}", summary(&done));
    }
    Ok(())
}

fn completion_json(d: &Completion) -> serde_json::Value {
    let ms = |t: std::time::Duration| t.as_secs_f64() * 1000.0;
    json!({
        "text": d.text,
        "tokens": d.tokens,
        "finish_reason": d.finish_reason.as_str(),
        "usage": {"prompt_tokens": d.usage.prompt_tokens, "completion_tokens": d.usage.completion_tokens},
        "timings": {
            "load_ms": ms(d.timings.load),
            "prefill_ms": ms(d.timings.prefill),
            "time_to_first_token_ms": ms(d.timings.time_to_first_token),
            "decode_tokens_per_second": d.timings.decode_tokens_per_second(),
        },
        "counters": {
            "bytes_dequantized_at_load": d.counters.bytes_dequantized_at_load,
            "cache_bytes": d.counters.cache_bytes,
            "reused_prompt_tokens": d.counters.reused_prompt_tokens,
            "allocations_in_decode_loop": d.counters.allocations_in_decode_loop,
        },
        "speculative": {
            "drafted_tokens": d.speculative.drafted,
            "accepted_tokens": d.speculative.accepted,
            "verify_steps": d.speculative.verify_steps,
        },
    })
}

fn summary(d: &Completion) -> String {
    format!(
        "[{}: {} prompt + {} generated tokens, first token after {:.0} ms, {:.1} tokens/s]",
        d.finish_reason.as_str(),
        d.usage.prompt_tokens,
        d.usage.completion_tokens,
        d.timings.time_to_first_token.as_secs_f64() * 1000.0,
        d.timings.decode_tokens_per_second()
    )
}

/// Ctrl-C while an answer streams stops that answer; at the prompt it ends the program.
static ANSWERING: AtomicBool = AtomicBool::new(false);
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

fn install_ctrl_c() -> CliResult<()> {
    ctrlc::set_handler(|| {
        if ANSWERING.load(Ordering::SeqCst) {
            INTERRUPTED.store(true, Ordering::SeqCst);
        } else {
            eprintln!();
            std::process::exit(130);
        }
    })
    .map_err(|e| format!("cannot install the Ctrl-C handler: {e}").into())
}

fn chat(a: ChatArgs) -> CliResult<()> {
    let llm = load(&model_spec(a.model.as_deref())?, &a.model_args)?;
    install_ctrl_c()?;
    let cfg = generation_config(&llm, &a.sampling)?;
    let mut session = llm.session(SessionOptions {
        n_ctx: a.model_args.ctx,
        ..Default::default()
    })?;
    if let Some(system) = &a.sampling.system {
        session.set_system(system);
    }
    let interactive = std::io::stdin().is_terminal();
    if interactive {
        eprintln!(
            "chat with {} — /reset, /system TEXT, /exit; Ctrl-D to quit",
            llm.source().display()
        );
    }
    let stdin = std::io::stdin();
    let mut lines = stdin.lock().lines();
    loop {
        if interactive {
            eprint!("> ");
        }
        let Some(line) = lines.next() else { break };
        let line = line?;
        let text = line.trim();
        if text.is_empty() {
            continue;
        }
        match text {
            "/exit" | "/quit" => break,
            "/reset" => {
                session.reset();
                if let Some(system) = &a.sampling.system {
                    session.set_system(system);
                }
                eprintln!("(conversation cleared)");
                continue;
            }
            _ if text.starts_with("/system ") => {
                session.set_system(text.trim_start_matches("/system ").trim());
                eprintln!("(system prompt set)");
                continue;
            }
            _ => {}
        }
        let mut out = std::io::stdout().lock();
        INTERRUPTED.store(false, Ordering::SeqCst);
        ANSWERING.store(true, Ordering::SeqCst);
        let result = session.send(ChatMessage::new("user", text), &cfg, &mut |piece| {
            let _ = out.write_all(piece.as_bytes());
            let _ = out.flush();
            if INTERRUPTED.load(Ordering::SeqCst) {
                Flow::Cancel
            } else {
                Flow::Continue
            }
        });
        ANSWERING.store(false, Ordering::SeqCst);
        let _ = writeln!(out);
        match result {
            Ok(done) if interactive => eprintln!("{}", summary(&done)),
            Ok(_) => {}
            // A turn that fails (e.g. the context is full) is reported; the chat goes on.
            Err(e) => eprintln!("torchnative: error: {e}"),
        }
    }
    Ok(())
}

fn info(a: InfoArgs) -> CliResult<()> {
    let spec = model_spec(a.model.as_deref())?;
    let llm = match load_llm(&spec, &LoadOptions::default()) {
        Ok(llm) => llm,
        // A GGUF we cannot run is still described, from its own header.
        Err(e) => match torchnative_formats::gguf::GgufFile::open(std::path::Path::new(&spec)) {
            Ok(file) => return describe_unloadable_gguf(&spec, &file, &e.to_string(), a.json),
            Err(_) => return Err(e.into()),
        },
    };
    let c = llm.config();
    let tok = llm.tokenizer();
    let model = llm.model();
    let kv_bytes_per_token = 2 * c.n_layers * c.n_kv_heads * c.head_dim * 4;
    let file_bytes = std::fs::metadata(llm.source())
        .map(|m| m.len())
        .unwrap_or(0);
    let stats = model.load_stats();
    let v = json!({
        "source": llm.source().display().to_string(),
        "architecture": c.architecture.model_type(),
        "parameters": model.n_params(),
        "layers": c.n_layers,
        "hidden_size": c.hidden_size,
        "heads": c.n_heads,
        "kv_heads": c.n_kv_heads,
        "head_dim": c.head_dim,
        "intermediate_size": c.intermediate_size,
        "context_length": c.context_length,
        "vocab_size": c.vocab_size,
        "rope_theta": c.rope_theta,
        "tied_embeddings": c.tie_word_embeddings,
        "weight_types": model.weight_types().into_iter().map(|(t, n)| json!({"type": t, "matrices": n})).collect::<Vec<_>>(),
        "bos_token": tok.bos_token(),
        "eos_token_ids": llm.eos_token_ids(),
        "chat_template": llm.chat_template().is_some(),
        "loadable": true,
        "file_bytes": file_bytes,
        "mapped_weight_bytes": stats.mapped_weight_bytes,
        "owned_weight_bytes": stats.owned_weight_bytes,
        "kv_cache_bytes_per_token": kv_bytes_per_token,
        "estimated_memory_bytes_at_4096_ctx": file_bytes as usize + stats.owned_weight_bytes + 4096 * kv_bytes_per_token,
    });
    if a.json {
        println!("{v:#}");
        return Ok(());
    }
    let types: Vec<String> = model
        .weight_types()
        .into_iter()
        .map(|(t, n)| format!("{t} x{n}"))
        .collect();
    println!("model           {}", llm.source().display());
    println!("architecture    {}", c.architecture.model_type());
    println!("parameters      {:.1} M", model.n_params() as f64 / 1e6);
    println!(
        "layers          {} (hidden {}, intermediate {})",
        c.n_layers, c.hidden_size, c.intermediate_size
    );
    println!(
        "attention       {} heads, {} kv heads, head dim {}",
        c.n_heads, c.n_kv_heads, c.head_dim
    );
    println!(
        "context         {} tokens (rope theta {})",
        c.context_length, c.rope_theta
    );
    println!(
        "vocabulary      {} tokens, bos {:?}, eos ids {:?}",
        c.vocab_size,
        tok.bos_token(),
        llm.eos_token_ids()
    );
    println!("weights         {}", types.join(", "));
    println!(
        "chat template   {}",
        if llm.chat_template().is_some() {
            "yes"
        } else {
            "no"
        }
    );
    println!(
        "file            {:.1} MiB",
        file_bytes as f64 / (1 << 20) as f64
    );
    println!(
        "kv cache        {} KiB per token",
        kv_bytes_per_token / 1024
    );
    Ok(())
}

/// `info` for a GGUF the runtime refuses: what its header says (architecture, shapes, tensor
/// types, vocabulary) and why it cannot run.
fn describe_unloadable_gguf(
    spec: &str,
    file: &torchnative_formats::gguf::GgufFile,
    reason: &str,
    as_json: bool,
) -> CliResult<()> {
    let text = |key: &str| file.get(key).and_then(|v| v.as_str()).map(str::to_string);
    let arch = text("general.architecture");
    let number = |key: &str| {
        let arch = arch.as_deref()?;
        file.get(&format!("{arch}.{key}")).and_then(|v| v.as_f64())
    };
    let mut types: Vec<(String, usize)> = Vec::new();
    for t in file.tensors() {
        let name = t.ggml_type.name().to_string();
        match types.iter_mut().find(|(n, _)| *n == name) {
            Some((_, c)) => *c += 1,
            None => types.push((name, 1)),
        }
    }
    let parameters: u64 = file.tensors().iter().map(|t| t.n_elements()).sum();
    let vocab = file
        .get("tokenizer.ggml.tokens")
        .and_then(|v| v.as_array())
        .map(|a| a.len());
    let v = json!({
        "source": spec,
        "loadable": false,
        "unsupported": reason,
        "architecture": arch,
        "name": text("general.name"),
        "gguf_version": file.version(),
        "parameters": parameters,
        "tensors": file.tensors().len(),
        "metadata_keys": file.metadata().len(),
        "layers": number("block_count"),
        "hidden_size": number("embedding_length"),
        "heads": number("attention.head_count"),
        "kv_heads": number("attention.head_count_kv"),
        "intermediate_size": number("feed_forward_length"),
        "context_length": number("context_length"),
        "rope_theta": number("rope.freq_base"),
        "tokenizer": text("tokenizer.ggml.model"),
        "vocab_size": vocab,
        "chat_template": file.get("tokenizer.chat_template").is_some(),
        "tensor_types": types.iter().map(|(t, n)| json!({"type": t, "tensors": n})).collect::<Vec<_>>(),
        "file_bytes": file.as_bytes().len(),
    });
    if as_json {
        println!("{v:#}");
        return Ok(());
    }
    let or_unknown = |x: Option<String>| x.unwrap_or_else(|| "(not given)".into());
    let num = |key: &str| number(key).map_or("?".into(), |n| n.to_string());
    println!("model           {spec}");
    println!("runs            no: {reason}");
    println!("architecture    {}", or_unknown(arch.clone()));
    println!("name            {}", or_unknown(text("general.name")));
    println!(
        "parameters      {:.1} M in {} tensors",
        parameters as f64 / 1e6,
        file.tensors().len()
    );
    println!(
        "layers          {} (hidden {}, intermediate {})",
        num("block_count"),
        num("embedding_length"),
        num("feed_forward_length")
    );
    println!(
        "attention       {} heads, {} kv heads",
        num("attention.head_count"),
        num("attention.head_count_kv")
    );
    println!("context         {} tokens", num("context_length"));
    println!(
        "vocabulary      {} tokens, tokenizer {}",
        vocab.map_or("?".into(), |n| n.to_string()),
        or_unknown(text("tokenizer.ggml.model"))
    );
    let types: Vec<String> = types.iter().map(|(t, n)| format!("{t} x{n}")).collect();
    println!("tensor types    {}", types.join(", "));
    println!(
        "file            {:.1} MiB, GGUF v{}",
        file.as_bytes().len() as f64 / (1 << 20) as f64,
        file.version()
    );
    Ok(())
}

fn tokenize(a: TokenizeArgs) -> CliResult<()> {
    let (model, text) = split_model_and_text(&a.args);
    let llm = load_llm(&model_spec(model)?, &LoadOptions::default())?;
    let ids = llm.tokenize(text)?;
    let pieces: Vec<String> = ids
        .iter()
        .map(|&i| llm.tokenizer().token_to_piece(i))
        .collect::<Result<_, _>>()?;
    if a.json {
        println!("{}", json!({"ids": ids, "pieces": pieces}));
    } else {
        for (id, piece) in ids.iter().zip(&pieces) {
            println!("{id:>8}  {piece:?}");
        }
    }
    Ok(())
}

/// The texts of `embed` / `rerank`: those given as options, then a file's non-empty lines, or,
/// with neither, standard input's.
fn texts_from(given: &[String], file: Option<&std::path::Path>) -> CliResult<Vec<String>> {
    let mut texts = given.to_vec();
    let from_lines = |text: String| {
        text.lines()
            .filter(|l| !l.trim().is_empty())
            .map(String::from)
            .collect::<Vec<_>>()
    };
    if let Some(path) = file {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        texts.extend(from_lines(text));
    } else if texts.is_empty() {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)?;
        texts.extend(from_lines(text));
    }
    Ok(texts)
}

fn embed(a: EmbedArgs) -> CliResult<()> {
    use torchnative_runtime::{EmbedOptions, Embedder};
    if let Some(n) = a.threads {
        torchnative_runtime::embed::set_threads(n)?;
    }
    let texts = texts_from(&a.texts, a.file.as_deref())?;
    if texts.is_empty() {
        return Err("no texts to embed (give --text, --file, or lines on standard input)".into());
    }
    let embedder = Embedder::load(&a.model)?;
    let options = EmbedOptions {
        truncate: a.truncate,
    };
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    // Check every text's length before embedding any.
    embedder.tokenize(&refs, &options)?;
    let mut out = std::io::stdout().lock();
    let mut data = Vec::new();
    let mut total_tokens = 0;
    for (chunk_index, chunk) in refs.chunks(a.batch.max(1)).enumerate() {
        let e = embedder.embed(chunk, &options)?;
        for i in 0..e.len() {
            total_tokens += e.token_counts[i];
            if a.json {
                data.push(json!({
                    "object": "embedding",
                    "index": chunk_index * a.batch.max(1) + i,
                    "embedding": e.row(i),
                }));
            } else {
                let line: Vec<String> = e.row(i).iter().map(|v| v.to_string()).collect();
                writeln!(out, "{}", line.join(" "))?;
            }
        }
    }
    if a.json {
        let model = a.model.display().to_string();
        writeln!(
            out,
            "{}",
            json!({
                "object": "list",
                "model": model,
                "data": data,
                "usage": {"prompt_tokens": total_tokens, "total_tokens": total_tokens},
            })
        )?;
    }
    Ok(())
}

fn rerank(a: RerankArgs) -> CliResult<()> {
    use torchnative_runtime::{RerankOptions, Reranker};
    if let Some(n) = a.threads {
        torchnative_runtime::embed::set_threads(n)?;
    }
    let docs = texts_from(&a.docs, a.file.as_deref())?;
    if docs.is_empty() {
        return Err(
            "no documents to rerank (give --doc, --file, or lines on standard input)".into(),
        );
    }
    let ranker = Reranker::load(&a.model)?;
    let labels = ranker.num_labels();
    if a.top_n.is_some() && labels != 1 {
        return Err(format!(
            "--top-n ranks by one relevance score; this model has {labels} labels"
        )
        .into());
    }
    let refs: Vec<&str> = docs.iter().map(String::as_str).collect();
    let options = RerankOptions {
        truncate: a.truncate,
    };
    let scores = ranker.score(&a.query, &refs, &options)?;
    // Best first for a relevance score (ties keep the input order); labels in input order.
    let mut order: Vec<usize> = (0..docs.len()).collect();
    if labels == 1 {
        order.sort_by(|&i, &j| scores.scores[j].total_cmp(&scores.scores[i]));
        order.truncate(a.top_n.unwrap_or(order.len()));
    }
    let mut out = std::io::stdout().lock();
    if a.json {
        let results: Vec<_> = order
            .iter()
            .map(|&i| {
                let mut r = json!({"index": i, "document": {"text": docs[i]}});
                match labels {
                    1 => r["relevance_score"] = json!(scores.scores[i]),
                    _ => r["scores"] = json!(scores.row(i)),
                }
                r
            })
            .collect();
        let tokens: usize = scores.token_counts.iter().sum();
        let model = a.model.display().to_string();
        writeln!(
            out,
            "{}",
            json!({"model": model, "results": results, "usage": {"total_tokens": tokens}})
        )?;
    } else {
        for (rank, &i) in order.iter().enumerate() {
            let s: Vec<String> = scores.row(i).iter().map(|v| v.to_string()).collect();
            writeln!(out, "{}\t{i}\t{}\t{}", rank + 1, s.join(" "), docs[i])?;
        }
    }
    Ok(())
}

/// llama-bench's method: `pp` evaluates n_prompt tokens from an empty cache in batches; `tg`
/// decodes n_gen tokens one at a time (after one warm-up token). Token ids are fixed pseudo-random
/// (no tokenization), and no sampling: the measured work is the forward passes alone.
fn bench(a: BenchArgs) -> CliResult<()> {
    let spec = model_spec(a.model.as_deref())?;
    let load_start = std::time::Instant::now();
    let llm = load_llm(
        &spec,
        &LoadOptions {
            weight_format: WeightFormat::parse(&a.dtype)?,
            threads: Some(a.threads),
        },
    )?;
    let load_s = load_start.elapsed().as_secs_f64();
    let vocab = llm.config().vocab_size as u64;
    let tokens: Vec<u32> = (0..a.n_prompt.max(1) as u64)
        .map(|i| ((i * 2654435761 + 17) % vocab) as u32)
        .collect();
    let n_ctx = a.n_prompt + a.n_gen + 1;
    let mut session = llm.session(SessionOptions {
        n_ctx: Some(n_ctx),
        n_batch: a.batch.max(1),
    })?;
    let reps = a.repetitions.max(1);
    let mut results = Vec::new();
    if a.n_prompt > 0 {
        session.prefill_all_logits(&tokens[..a.n_prompt.min(8)])?; // warm-up
        let mut rates = Vec::new();
        let mut first_token_ms = Vec::new();
        for _ in 0..reps {
            session.reset();
            let t = std::time::Instant::now();
            session.prefill(&tokens)?;
            let s = t.elapsed().as_secs_f64();
            rates.push(a.n_prompt as f64 / s);
            first_token_ms.push(s * 1000.0);
        }
        results.push(bench_result(
            &format!("pp{}", a.n_prompt),
            a.threads,
            &rates,
            &first_token_ms,
        ));
    }
    if a.n_gen > 0 {
        let mut rates = Vec::new();
        for _ in 0..reps {
            session.reset();
            session.prefill(&tokens[..1])?;
            let t = std::time::Instant::now();
            for i in 0..a.n_gen {
                session.decode_logits(tokens[(i + 1) % tokens.len()])?;
            }
            rates.push(a.n_gen as f64 / t.elapsed().as_secs_f64());
        }
        results.push(bench_result(
            &format!("tg{}", a.n_gen),
            a.threads,
            &rates,
            &[],
        ));
    }
    let peak_rss = peak_rss_bytes();
    for r in &mut results {
        r["model"] = json!(spec);
        r["dtype"] = json!(a.dtype);
        r["load_seconds"] = json!(load_s);
        r["peak_rss_bytes"] = json!(peak_rss);
    }
    if a.json {
        println!("{}", serde_json::Value::Array(results));
    } else {
        println!(
            "{:<8} {:>7} {:>12} {:>10}",
            "test", "threads", "tokens/s", "stddev"
        );
        for r in &results {
            println!(
                "{:<8} {:>7} {:>12.1} {:>10.1}",
                r["test"].as_str().unwrap_or(""),
                a.threads,
                r["tokens_per_second"].as_f64().unwrap_or(0.0),
                r["stddev"].as_f64().unwrap_or(0.0)
            );
        }
        println!(
            "load {load_s:.2}s, peak RSS {:.1} MiB",
            peak_rss as f64 / (1 << 20) as f64
        );
    }
    Ok(())
}

fn bench_result(
    test: &str,
    threads: usize,
    rates: &[f64],
    first_token_ms: &[f64],
) -> serde_json::Value {
    let n = rates.len() as f64;
    let mean = rates.iter().sum::<f64>() / n;
    let var = if rates.len() > 1 {
        rates.iter().map(|r| (r - mean).powi(2)).sum::<f64>() / (n - 1.0)
    } else {
        0.0
    };
    let mut v = json!({"test": test, "threads": threads, "tokens_per_second": mean, "stddev": var.sqrt(), "samples": rates});
    if !first_token_ms.is_empty() {
        v["time_to_first_token_ms"] =
            json!(first_token_ms.iter().sum::<f64>() / first_token_ms.len() as f64);
    }
    v
}

/// Peak resident set size of this process (Linux `VmHWM`), 0 where unknown.
fn peak_rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmHWM:")).and_then(|l| {
                l.split_whitespace()
                    .nth(1)
                    .and_then(|kb| kb.parse::<u64>().ok())
            })
        })
        .map_or(0, |kb| kb * 1024)
}

fn quantize(a: QuantizeArgs) -> CliResult<()> {
    use torchnative_formats::quantize::{quantize_model, FileType, QuantizeOptions};
    let options = QuantizeOptions {
        file_type: FileType::parse(&a.file_type)?,
        overwrite: a.force,
        threads: a.threads,
    };
    let bar = if std::io::stderr().is_terminal() {
        let bar = indicatif::ProgressBar::new(0);
        bar.set_style(
            indicatif::ProgressStyle::with_template("quantizing {bar:30} {pos}/{len} {msg}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        Some(bar)
    } else {
        None
    };
    let report = quantize_model(&a.input, &a.output, &options, &mut |p| {
        if let Some(bar) = &bar {
            bar.set_length(p.total as u64);
            bar.set_position(p.done as u64);
            bar.set_message(format!("{} {} -> {}", p.name, p.from, p.to));
        }
    });
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    let report = report?;
    let types: Vec<String> = report
        .type_counts
        .iter()
        .map(|(t, n)| format!("{t} x{n}"))
        .collect();
    if a.json {
        let v = json!({
            "input": report.input.display().to_string(),
            "output": a.output.display().to_string(),
            "type": options.file_type.name(),
            "tensors": report.tensors,
            "bytes_in": report.bytes_in,
            "bytes_out": report.bytes_out,
            "seconds": report.elapsed.as_secs_f64(),
            "tensor_types": report.type_counts.iter().map(|(t, n)| json!({"type": t.name(), "tensors": n})).collect::<Vec<_>>(),
            "requantized_from": report.requantized_from.iter().map(|t| t.name()).collect::<Vec<_>>(),
            "fallbacks": report.fallbacks.len(),
        });
        println!("{v:#}");
        return Ok(());
    }
    let mb = |b: u64| b as f64 / (1024.0 * 1024.0);
    println!(
        "wrote {} ({}) from {}",
        a.output.display(),
        options.file_type,
        report.input.display()
    );
    println!("tensors   {} ({})", report.tensors, types.join(", "));
    println!(
        "size      {:.1} MiB of tensor data -> {:.1} MiB file",
        mb(report.bytes_in),
        mb(report.bytes_out)
    );
    println!("time      {:.2}s", report.elapsed.as_secs_f64());
    if !report.fallbacks.is_empty() {
        println!(
            "fallbacks {} tensors whose row length does not fit their type's block (e.g. {}: {} -> {})",
            report.fallbacks.len(),
            report.fallbacks[0].0,
            report.fallbacks[0].1,
            report.fallbacks[0].2
        );
    }
    if !report.requantized_from.is_empty() {
        let from: Vec<&str> = report.requantized_from.iter().map(|t| t.name()).collect();
        println!(
            "note      requantized from {}: those tensors were dequantized and quantized again, so \
             the output is no more accurate than the input",
            from.join(", ")
        );
    }
    Ok(())
}

fn serve(a: ServeArgs) -> CliResult<()> {
    let spec = a
        .model
        .clone()
        .unwrap_or_else(|| default_model_path().to_string_lossy().into_owned());
    let model_args = ModelArgs {
        dtype: a.dtype.clone(),
        ctx: None,
        threads: a.threads,
    };
    let llm = load(&spec, &model_args)?;
    let model_name = a.model_name.clone().unwrap_or_else(|| {
        let src = llm.source();
        let name = if src.is_dir() {
            src.file_name()
        } else {
            src.file_stem()
        };
        name.map_or("model".into(), |n| n.to_string_lossy().into_owned())
    });
    let adapters = a
        .lora
        .iter()
        .map(|spec| {
            let (name, rest) = spec
                .split_once('=')
                .filter(|(n, p)| !n.is_empty() && !p.is_empty())
                .ok_or_else(|| format!("--lora '{spec}': expected NAME=PATH[:SCALE]"))?;
            if name == model_name
                || a.lora
                    .iter()
                    .filter(|s| s.starts_with(&format!("{name}=")))
                    .count()
                    > 1
            {
                return Err(format!("--lora '{spec}': the name '{name}' is already taken").into());
            }
            Ok(torchnative_server::ServedAdapter {
                name: name.to_string(),
                lora: lora(&llm, rest).map_err(|e| format!("--lora '{spec}': {e}"))?,
            })
        })
        .collect::<CliResult<Vec<_>>>()?;
    let ip: std::net::IpAddr = a
        .host
        .parse()
        .map_err(|e| format!("--host '{}' is not an IP address: {e}", a.host))?;
    let ctx = a.ctx_per_request.min(llm.config().context_length);
    let block = EngineConfig::default().kv_block_size;
    let kv_dtype: KvDtype = a.kv_cache_dtype.parse().map_err(|e| format!("{e}"))?;
    let kv_tokens = match a.kv_cache_mib {
        Some(mib) => {
            let per_block = PagedKvCache::bytes_per_block(llm.model().kv_shape(), block, kv_dtype);
            (mib << 20) / per_block * block
        }
        None => a.kv_cache_tokens,
    };
    let engine = Engine::start(
        llm,
        EngineConfig {
            max_running: a.parallel,
            ctx_per_seq: ctx,
            max_batch_tokens: a.batch_tokens.max(a.parallel),
            max_queued: a.max_queue,
            // At least one whole request.
            kv_cache_tokens: kv_tokens.max(ctx),
            kv_block_size: block,
            kv_cache_dtype: kv_dtype,
            prompt_lookup_tokens: a.prompt_lookup,
        },
    )?;
    let embeddings = match &a.embedding_model {
        Some(dir) => Some(torchnative_server::EmbeddingModel {
            name: dir
                .file_name()
                .map_or("embeddings".into(), |n| n.to_string_lossy().into_owned()),
            embedder: std::sync::Arc::new(
                torchnative_runtime::Embedder::load(dir)
                    .map_err(|e| format!("--embedding-model {}: {e}", dir.display()))?,
            ),
        }),
        None => None,
    };
    let reranker = match &a.rerank_model {
        Some(dir) => {
            let ranker = torchnative_runtime::Reranker::load(dir)
                .map_err(|e| format!("--rerank-model {}: {e}", dir.display()))?;
            if ranker.num_labels() != 1 {
                return Err(format!(
                    "--rerank-model {}: {} labels; a reranker gives one relevance score",
                    dir.display(),
                    ranker.num_labels()
                )
                .into());
            }
            Some(torchnative_server::RerankModel {
                name: dir
                    .file_name()
                    .map_or("reranker".into(), |n| n.to_string_lossy().into_owned()),
                reranker: std::sync::Arc::new(ranker),
            })
        }
        None => None,
    };
    let config = torchnative_server::ServerConfig {
        model_name: model_name.clone(),
        reranker,
        api_key: a.api_key.clone(),
        max_body_bytes: a.max_body_bytes,
        max_tokens_limit: a.max_tokens_limit,
        embeddings,
        adapters,
        ..Default::default()
    };
    let addr = std::net::SocketAddr::new(ip, a.port);
    torchnative_server::run_blocking(addr, std::sync::Arc::new(engine), config, |bound| {
        println!(
            "torchnative serve: '{model_name}' on http://{bound} ({} parallel, {ctx} positions \
             each, KV pool {} positions of {})",
            a.parallel,
            kv_tokens.max(ctx),
            kv_dtype.name()
        );
        let _ = std::io::Write::flush(&mut std::io::stdout());
    })?;
    Ok(())
}
