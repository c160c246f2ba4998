//! Cross-encoder reranking: the sequence-classification head of a BERT, RoBERTa / XLM-R or
//! ModernBERT checkpoint on the encoders of [`crate::encoder`], scoring (query, document) pairs
//! as sentence-transformers' `CrossEncoder.predict` does: the pair through the tokenizer's pair
//! template (segments included), the model's logits, then the activation its config names
//! (sigmoid for one label by default, the identity otherwise).

use std::path::Path;

use serde_json::Value;
use torchnative_core::kernels;
use torchnative_formats::safetensors::{Dtype, SafetensorsModel};
use torchnative_tokenizer::Tokenizer;

use crate::encoder::{to_f32, EncoderArch, EncoderModel};
use crate::error::{invalid, Result, RuntimeError};

/// The head on top of the encoder, as transformers' `*ForSequenceClassification` builds it.
#[derive(Debug)]
enum Head {
    /// `BertForSequenceClassification`: `classifier(tanh(pooler(x[CLS])))`.
    Bert { pooler: Dense, classifier: Dense },
    /// `RobertaClassificationHead`: `out_proj(tanh(dense(x[<s>])))`.
    Roberta { dense: Dense, out_proj: Dense },
    /// `ModernBertForSequenceClassification`: `classifier(norm(act(dense(pool(x)))))`.
    Modern {
        dense: Dense,
        act: HeadActivation,
        norm_w: Vec<f32>,
        norm_b: Option<Vec<f32>>,
        mean: bool,
        classifier: Dense,
    },
}

#[derive(Debug)]
struct Dense {
    w: Vec<f32>,
    b: Option<Vec<f32>>,
    n_out: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HeadActivation {
    GeluErf,
    GeluTanh,
    Relu,
    Silu,
}

/// What turns a pair's logits into its scores (sentence-transformers' `activation_fn`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScoreActivation {
    /// `torch.nn.Sigmoid` (the default for one label).
    Sigmoid,
    /// `torch.nn.Identity` (the default for several labels): the scores are the logits.
    Identity,
}

/// How pairs are cut.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RerankOptions {
    /// Cut a pair longer than [`Reranker::max_length`] as transformers'
    /// `truncation="longest_first"` does (sentence-transformers always does); by default such a
    /// pair is an error naming it.
    pub truncate: bool,
}

/// Scores of a batch of pairs.
#[derive(Debug, Clone, PartialEq)]
pub struct RerankScores {
    /// Labels per pair (1 for a relevance score).
    pub num_labels: usize,
    /// The classifier's outputs, `[pairs][num_labels]`.
    pub logits: Vec<f32>,
    /// The logits through the activation, `[pairs][num_labels]`.
    pub scores: Vec<f32>,
    /// Tokens each pair was scored from (special tokens included).
    pub token_counts: Vec<usize>,
}

impl RerankScores {
    /// The scores of pair `i`.
    pub fn row(&self, i: usize) -> &[f32] {
        &self.scores[i * self.num_labels..(i + 1) * self.num_labels]
    }
}

/// A cross-encoder: encoder, head and tokenizer. Immutable, `Send + Sync`.
#[derive(Debug)]
pub struct Reranker {
    model: EncoderModel,
    tokenizer: Tokenizer,
    head: Head,
    num_labels: usize,
    activation: ScoreActivation,
    max_length: usize,
}

fn load_err(dir: &Path, reason: impl Into<String>) -> RuntimeError {
    RuntimeError::Load {
        path: dir.display().to_string(),
        reason: reason.into(),
    }
}

impl Reranker {
    /// Loads a `*ForSequenceClassification` directory: config.json, model.safetensors,
    /// tokenizer.json (+ tokenizer_config.json). The head, its shapes, the activation and the
    /// tokenizer's pair template are all checked here, before any pair is scored.
    pub fn load(dir: &Path) -> Result<Reranker> {
        if !dir.is_dir() {
            return Err(load_err(
                dir,
                "not a directory (expected config.json, model.safetensors, tokenizer.json)",
            ));
        }
        let config_path = dir.join("config.json");
        let text = std::fs::read_to_string(&config_path)
            .map_err(|e| load_err(dir, format!("{}: {e}", config_path.display())))?;
        let config: Value = serde_json::from_str(&text)
            .map_err(|e| invalid("config.json", format!("not valid JSON: {e}")))?;
        let model = EncoderModel::load(dir)?;
        let ckpt =
            SafetensorsModel::open_dir(dir, None).map_err(|e| load_err(dir, e.to_string()))?;
        let (head, num_labels) = load_head(&config, &model, &ckpt).map_err(|e| match e {
            RuntimeError::Load { reason, .. } => load_err(dir, reason),
            other => other,
        })?;
        let activation = score_activation(&config, num_labels)?;
        let tokenizer_json = dir.join("tokenizer.json");
        if !tokenizer_json.is_file() {
            return Err(load_err(
                dir,
                format!("{} is missing", tokenizer_json.display()),
            ));
        }
        let tokenizer_config = dir.join("tokenizer_config.json");
        let tokenizer = Tokenizer::from_files(
            &tokenizer_json,
            tokenizer_config
                .is_file()
                .then_some(tokenizer_config.as_path()),
        )
        .map_err(|e| load_err(dir, e.to_string()))?;
        if tokenizer.vocab_size() > model.config().vocab_size {
            return Err(invalid(
                "tokenizer",
                format!(
                    "its {} tokens exceed the model's vocab_size {}",
                    tokenizer.vocab_size(),
                    model.config().vocab_size
                ),
            ));
        }
        // The pair template must exist (refused by name otherwise).
        tokenizer
            .encode_pair("a", "b", None)
            .map_err(|e| invalid("tokenizer", e.to_string()))?;
        // transformers cuts at the tokenizer's model_max_length; never past the positions.
        let positions = model.config().max_tokens();
        let max_length = match tokenizer_config.is_file() {
            true => std::fs::read_to_string(&tokenizer_config)
                .ok()
                .and_then(|t| serde_json::from_str::<Value>(&t).ok())
                .and_then(|v| v.get("model_max_length").and_then(Value::as_u64))
                .map_or(positions, |m| (m as usize).min(positions)),
            false => positions,
        };
        Ok(Reranker {
            model,
            tokenizer,
            head,
            num_labels,
            activation,
            max_length,
        })
    }

    /// The encoder.
    pub fn model(&self) -> &EncoderModel {
        &self.model
    }

    /// Labels per pair.
    pub fn num_labels(&self) -> usize {
        self.num_labels
    }

    /// The activation applied to the logits.
    pub fn activation(&self) -> ScoreActivation {
        self.activation
    }

    /// Most tokens a pair may have (special tokens included).
    pub fn max_length(&self) -> usize {
        self.max_length
    }

    /// Each (query, document) pair as ids and segments, with the length rule of `options`.
    pub fn tokenize(
        &self,
        query: &str,
        documents: &[&str],
        options: &RerankOptions,
    ) -> Result<Vec<(Vec<u32>, Vec<u32>)>> {
        let text_err = |e: torchnative_tokenizer::Error| RuntimeError::Text(e.to_string());
        documents
            .iter()
            .enumerate()
            .map(|(i, doc)| {
                let pair = self
                    .tokenizer
                    .encode_pair(query, doc, None)
                    .map_err(text_err)?;
                if pair.ids.len() <= self.max_length {
                    return Ok((pair.ids, pair.type_ids));
                }
                if !options.truncate {
                    return Err(invalid(
                        format!("document {i}"),
                        format!(
                            "with the query it has {} tokens, over the model's {} (pass truncate \
                             to cut the longer text first, as transformers does)",
                            pair.ids.len(),
                            self.max_length
                        ),
                    ));
                }
                let cut = self
                    .tokenizer
                    .encode_pair(query, doc, Some(self.max_length))
                    .map_err(text_err)?;
                Ok((cut.ids, cut.type_ids))
            })
            .collect()
    }

    /// Scores each document against `query`. Every check happens before the forward pass; a
    /// pair's score does not depend on the rest of the batch.
    pub fn score(
        &self,
        query: &str,
        documents: &[&str],
        options: &RerankOptions,
    ) -> Result<RerankScores> {
        if documents.is_empty() {
            return Ok(RerankScores {
                num_labels: self.num_labels,
                logits: Vec::new(),
                scores: Vec::new(),
                token_counts: Vec::new(),
            });
        }
        let pairs = self.tokenize(query, documents, options)?;
        self.score_tokens(&pairs)
    }

    /// Scores pairs given as (ids, segments), special tokens in place.
    pub fn score_tokens(&self, pairs: &[(Vec<u32>, Vec<u32>)]) -> Result<RerankScores> {
        if let Some((i, p)) = pairs
            .iter()
            .enumerate()
            .find(|(_, p)| p.0.len() > self.max_length)
        {
            return Err(invalid(
                format!("pair {i}"),
                format!(
                    "{} tokens exceed the model's {}",
                    p.0.len(),
                    self.max_length
                ),
            ));
        }
        let ids: Vec<&[u32]> = pairs.iter().map(|p| p.0.as_slice()).collect();
        let types: Vec<&[u32]> = pairs.iter().map(|p| p.1.as_slice()).collect();
        let states = self.model.forward_with_types(&ids, &types)?;
        let h = self.model.config().hidden_size;
        let eps = self.model.config().layer_norm_eps;
        let mut logits = Vec::with_capacity(pairs.len() * self.num_labels);
        let mut start = 0;
        for text in &ids {
            let rows = &states[start * h..(start + text.len()) * h];
            start += text.len();
            logits.extend(self.head.apply(rows, h, eps));
        }
        let scores = logits
            .iter()
            .map(|&x| match self.activation {
                ScoreActivation::Sigmoid => 1.0 / (1.0 + (-x).exp()),
                ScoreActivation::Identity => x,
            })
            .collect();
        Ok(RerankScores {
            num_labels: self.num_labels,
            logits,
            scores,
            token_counts: ids.iter().map(|t| t.len()).collect(),
        })
    }
}

impl Dense {
    fn apply(&self, x: &[f32], n_in: usize) -> Vec<f32> {
        let mut out = vec![0.0; self.n_out];
        kernels::linear_f32(x, &self.w, self.b.as_deref(), &mut out, 1, n_in, self.n_out);
        out
    }
}

impl Head {
    /// The logits of one text from its last hidden states (`rows`, `[tokens][h]`).
    fn apply(&self, rows: &[f32], h: usize, eps: f32) -> Vec<f32> {
        match self {
            Head::Bert { pooler, classifier } => {
                let mut p = pooler.apply(&rows[..h], h);
                p.iter_mut().for_each(|v| *v = v.tanh());
                classifier.apply(&p, h)
            }
            Head::Roberta { dense, out_proj } => {
                let mut p = dense.apply(&rows[..h], h);
                p.iter_mut().for_each(|v| *v = v.tanh());
                out_proj.apply(&p, h)
            }
            Head::Modern {
                dense,
                act,
                norm_w,
                norm_b,
                mean,
                classifier,
            } => {
                let pooled: Vec<f32> = match mean {
                    true => {
                        let n = rows.len() / h;
                        (0..h)
                            .map(|j| (0..n).map(|t| rows[t * h + j]).sum::<f32>() / n as f32)
                            .collect()
                    }
                    false => rows[..h].to_vec(),
                };
                let mut p = dense.apply(&pooled, h);
                act.apply(&mut p);
                let mut normed = vec![0.0; h];
                kernels::layer_norm_f32(&p, Some(norm_w), norm_b.as_deref(), eps, &mut normed);
                classifier.apply(&normed, h)
            }
        }
    }
}

impl HeadActivation {
    fn from_name(name: &str) -> Result<HeadActivation> {
        Ok(match name {
            "gelu" => HeadActivation::GeluErf,
            "gelu_new" | "gelu_pytorch_tanh" => HeadActivation::GeluTanh,
            "relu" => HeadActivation::Relu,
            "silu" | "swish" => HeadActivation::Silu,
            other => {
                return Err(RuntimeError::Unsupported {
                    what: format!("config.json classifier_activation {other:?}"),
                    supported: "gelu, gelu_new, gelu_pytorch_tanh, relu, silu".into(),
                })
            }
        })
    }

    fn apply(self, x: &mut [f32]) {
        match self {
            HeadActivation::GeluErf => kernels::gelu_erf_inplace_f32(x),
            HeadActivation::GeluTanh => crate::encoder::gelu_tanh_inplace(x),
            HeadActivation::Relu => x.iter_mut().for_each(|v| *v = v.max(0.0)),
            HeadActivation::Silu => x.iter_mut().for_each(|v| *v /= 1.0 + (-*v).exp()),
        }
    }
}

/// transformers' label count: `id2label`'s size, else `num_labels`, else 2.
fn num_labels(config: &Value) -> Result<usize> {
    let n = match (config.get("id2label"), config.get("num_labels")) {
        (Some(Value::Object(m)), _) => m.len(),
        (_, Some(v)) => v
            .as_u64()
            .ok_or_else(|| invalid("config.json num_labels", format!("{v} is not an integer")))?
            as usize,
        _ => 2,
    };
    if n == 0 || n > 1 << 16 {
        return Err(invalid(
            "config.json num_labels",
            format!("{n} is outside 1..=65536"),
        ));
    }
    Ok(n)
}

/// The head named by `architectures`, every tensor checked (presence, float dtype, shape)
/// before any is converted.
fn load_head(
    config: &Value,
    model: &EncoderModel,
    ckpt: &SafetensorsModel,
) -> Result<(Head, usize)> {
    let archs: Vec<&str> = config
        .get("architectures")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if !archs
        .iter()
        .any(|a| a.ends_with("ForSequenceClassification"))
    {
        return Err(RuntimeError::Unsupported {
            what: format!(
                "config.json architectures {archs:?}: no sequence-classification head (a \
                 reranker is a cross-encoder, a *ForSequenceClassification model)"
            ),
            supported: "BertForSequenceClassification, RobertaForSequenceClassification, \
                        XLMRobertaForSequenceClassification, ModernBertForSequenceClassification"
                .into(),
        });
    }
    let labels = num_labels(config)?;
    let h = model.config().hidden_size;
    let mut problems = Vec::new();
    let mut check = |name: &str, shape: &[usize]| match ckpt.tensor(name) {
        None => problems.push(format!("'{name}' is missing")),
        Some(t) if !matches!(t.dtype, Dtype::F32 | Dtype::F16 | Dtype::BF16) => {
            problems.push(format!(
                "'{name}' has dtype {} (supported: F32, F16, BF16)",
                t.dtype.name()
            ))
        }
        Some(t) if t.shape != shape => problems.push(format!(
            "'{name}' has shape {:?}, config.json implies {shape:?}",
            t.shape
        )),
        Some(_) => {}
    };
    let flag =
        |key: &str, default: bool| config.get(key).and_then(Value::as_bool).unwrap_or(default);
    let (names, arch): (Vec<(String, Vec<usize>)>, EncoderArch) = match model.config().arch {
        EncoderArch::Bert => (
            vec![
                ("bert.pooler.dense.weight".into(), vec![h, h]),
                ("bert.pooler.dense.bias".into(), vec![h]),
                ("classifier.weight".into(), vec![labels, h]),
                ("classifier.bias".into(), vec![labels]),
            ],
            EncoderArch::Bert,
        ),
        EncoderArch::Roberta => (
            vec![
                ("classifier.dense.weight".into(), vec![h, h]),
                ("classifier.dense.bias".into(), vec![h]),
                ("classifier.out_proj.weight".into(), vec![labels, h]),
                ("classifier.out_proj.bias".into(), vec![labels]),
            ],
            EncoderArch::Roberta,
        ),
        EncoderArch::ModernBert => {
            let mut v = vec![
                ("head.dense.weight".into(), vec![h, h]),
                ("head.norm.weight".into(), vec![h]),
                ("classifier.weight".into(), vec![labels, h]),
                ("classifier.bias".into(), vec![labels]),
            ];
            if flag("classifier_bias", false) {
                v.push(("head.dense.bias".into(), vec![h]));
            }
            if flag("norm_bias", true) {
                v.push(("head.norm.bias".into(), vec![h]));
            }
            (v, EncoderArch::ModernBert)
        }
    };
    for (name, shape) in &names {
        check(name, shape);
    }
    if !problems.is_empty() {
        return Err(RuntimeError::Load {
            path: String::new(),
            reason: problems.join("; "),
        });
    }
    let get = |name: &str| to_f32(ckpt.tensor(name).expect("checked"));
    let get_opt = |name: &str| names.iter().any(|(n, _)| n == name).then(|| get(name));
    let dense = |w: &str, b: &str, n_out: usize| Dense {
        w: get(w),
        b: get_opt(b),
        n_out,
    };
    let head = match arch {
        EncoderArch::Bert => Head::Bert {
            pooler: dense("bert.pooler.dense.weight", "bert.pooler.dense.bias", h),
            classifier: dense("classifier.weight", "classifier.bias", labels),
        },
        EncoderArch::Roberta => Head::Roberta {
            dense: dense("classifier.dense.weight", "classifier.dense.bias", h),
            out_proj: dense(
                "classifier.out_proj.weight",
                "classifier.out_proj.bias",
                labels,
            ),
        },
        EncoderArch::ModernBert => {
            let pooling = config
                .get("classifier_pooling")
                .and_then(Value::as_str)
                .unwrap_or("cls");
            let mean = match pooling {
                "cls" => false,
                "mean" => true,
                other => {
                    return Err(RuntimeError::Unsupported {
                        what: format!("config.json classifier_pooling {other:?}"),
                        supported: "cls, mean".into(),
                    })
                }
            };
            let act = HeadActivation::from_name(
                config
                    .get("classifier_activation")
                    .and_then(Value::as_str)
                    .unwrap_or("gelu"),
            )?;
            Head::Modern {
                dense: dense("head.dense.weight", "head.dense.bias", h),
                act,
                norm_w: get("head.norm.weight"),
                norm_b: get_opt("head.norm.bias"),
                mean,
                classifier: dense("classifier.weight", "classifier.bias", labels),
            }
        }
    };
    Ok((head, labels))
}

/// sentence-transformers' activation: `sentence_transformers.activation_fn` (v4) or
/// `sbert_ce_default_activation_function` (earlier) in config.json, else sigmoid for one
/// label and the identity for several. Other activations are refused by name.
fn score_activation(config: &Value, num_labels: usize) -> Result<ScoreActivation> {
    let named = config
        .get("sentence_transformers")
        .and_then(|s| s.get("activation_fn"))
        .or_else(|| config.get("sbert_ce_default_activation_function"));
    match named {
        None | Some(Value::Null) => Ok(match num_labels {
            1 => ScoreActivation::Sigmoid,
            _ => ScoreActivation::Identity,
        }),
        Some(Value::String(s)) => match s.as_str() {
            "torch.nn.modules.activation.Sigmoid" => Ok(ScoreActivation::Sigmoid),
            "torch.nn.modules.linear.Identity" => Ok(ScoreActivation::Identity),
            other => Err(RuntimeError::Unsupported {
                what: format!("config.json cross-encoder activation {other:?}"),
                supported: "torch.nn.modules.activation.Sigmoid, torch.nn.modules.linear.Identity"
                    .into(),
            }),
        },
        Some(other) => Err(invalid(
            "config.json cross-encoder activation",
            format!("{other} is not a class name"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_activation_follows_sentence_transformers() {
        let act = |c: Value, n| score_activation(&c, n).map_err(|e| e.to_string());
        assert_eq!(act(json!({}), 1), Ok(ScoreActivation::Sigmoid));
        assert_eq!(act(json!({}), 3), Ok(ScoreActivation::Identity));
        let v4 =
            json!({"sentence_transformers": {"activation_fn": "torch.nn.modules.linear.Identity"}});
        assert_eq!(act(v4, 1), Ok(ScoreActivation::Identity));
        let old =
            json!({"sbert_ce_default_activation_function": "torch.nn.modules.activation.Sigmoid"});
        assert_eq!(act(old, 2), Ok(ScoreActivation::Sigmoid));
        let bad =
            json!({"sentence_transformers": {"activation_fn": "torch.nn.modules.activation.Tanh"}});
        let e = act(bad, 1).unwrap_err();
        assert!(e.contains("Tanh") && e.contains("Sigmoid"), "{e}");
    }

    #[test]
    fn label_counts_follow_transformers() {
        assert_eq!(num_labels(&json!({})).unwrap(), 2);
        assert_eq!(num_labels(&json!({"num_labels": 1})).unwrap(), 1);
        let three = json!({"id2label": {"0": "a", "1": "b", "2": "c"}, "num_labels": 1});
        assert_eq!(num_labels(&three).unwrap(), 3);
        assert!(num_labels(&json!({"num_labels": 0})).is_err());
        assert!(num_labels(&json!({"num_labels": "one"})).is_err());
    }
}
