//! LoRA adapters: PEFT directories and GGUF LoRA files applied next to an unchanged base.
//!
//! Without the oracle: a tiny llama written here (config.json + safetensors) with adapters
//! written here too; the adapted logits equal the logits of the same model with the deltas
//! merged into its weights, scale 0 leaves the base's bits, a GGUF LoRA of the same tensors
//! gives the PEFT one's bits, bad files are refused by name. With the oracle: adapters made by
//! PEFT on a tiny transformers llama and on the default model give transformers + peft's logits,
//! every logit of prefill and cached decode, within the parity tolerance rule.

mod common;

use std::path::{Path, PathBuf};

use common::*;
use torchnative_formats::gguf::{write_gguf, MetadataValue, TensorToWrite};
use torchnative_quant::GgmlType;
use torchnative_runtime::{
    load_llm, load_model, ActiveLora, DecoderModel, DenseKvCache, Engine, EngineConfig,
    GenerationConfig, LoadOptions, LogitsFor, LoraAdapter, SamplingParams, SeqChunk,
    SessionOptions, WeightFormat,
};

// ---------------------------------------------------------------------------------------------
// A tiny llama and adapters written without the oracle.

const VOCAB: usize = 64;
const HIDDEN: usize = 32;
const FF: usize = 48;
const LAYERS: usize = 2;
const HEADS: usize = 4;
const KV_HEADS: usize = 2;
const HEAD_DIM: usize = HIDDEN / HEADS;

const MODULES: [&str; 7] = [
    "q_proj",
    "k_proj",
    "v_proj",
    "o_proj",
    "gate_proj",
    "up_proj",
    "down_proj",
];

/// `(out, in)` of a projection of the tiny llama.
fn dims(module: &str) -> (usize, usize) {
    match module {
        "q_proj" => (HEADS * HEAD_DIM, HIDDEN),
        "k_proj" | "v_proj" => (KV_HEADS * HEAD_DIM, HIDDEN),
        "o_proj" => (HIDDEN, HEADS * HEAD_DIM),
        "gate_proj" | "up_proj" => (FF, HIDDEN),
        "down_proj" => (HIDDEN, FF),
        _ => unreachable!(),
    }
}

fn path_of(module: &str) -> &'static str {
    if module.ends_with("_proj") && ["gate_proj", "up_proj", "down_proj"].contains(&module) {
        "mlp"
    } else {
        "self_attn"
    }
}

/// Deterministic values in `[-amp, amp)`.
fn values(seed: u64, n: usize, amp: f32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * amp
        })
        .collect()
}

type Tensors = Vec<(String, Vec<usize>, Vec<f32>)>;

fn write_safetensors(path: &Path, tensors: &Tensors) {
    let mut header = serde_json::Map::new();
    let mut data = Vec::new();
    for (name, shape, vals) in tensors {
        let start = data.len();
        for v in vals {
            data.extend_from_slice(&v.to_le_bytes());
        }
        header.insert(
            name.clone(),
            serde_json::json!({"dtype": "F32", "shape": shape, "data_offsets": [start, data.len()]}),
        );
    }
    let mut h = serde_json::to_vec(&header).unwrap();
    while h.len() % 8 != 0 {
        h.push(b' ');
    }
    let mut out = (h.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(&h);
    out.extend_from_slice(&data);
    std::fs::write(path, out).unwrap();
}

/// The tiny llama's weights (HF names).
fn base_weights() -> Tensors {
    let mut t: Tensors = Vec::new();
    let mut seed = 1;
    let mut mat = |name: String, rows: usize, cols: usize, t: &mut Tensors| {
        seed += 1;
        t.push((name, vec![rows, cols], values(seed, rows * cols, 0.3)));
    };
    mat("model.embed_tokens.weight".into(), VOCAB, HIDDEN, &mut t);
    mat("lm_head.weight".into(), VOCAB, HIDDEN, &mut t);
    for l in 0..LAYERS {
        for m in MODULES {
            let (o, i) = dims(m);
            mat(
                format!("model.layers.{l}.{}.{m}.weight", path_of(m)),
                o,
                i,
                &mut t,
            );
        }
        for n in ["input_layernorm", "post_attention_layernorm"] {
            let name = format!("model.layers.{l}.{n}.weight");
            t.push((name, vec![HIDDEN], vec![1.0; HIDDEN]));
        }
    }
    t.push(("model.norm.weight".into(), vec![HIDDEN], vec![1.0; HIDDEN]));
    t
}

fn write_model(dir: &Path, weights: &Tensors) {
    std::fs::create_dir_all(dir).unwrap();
    let config = serde_json::json!({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "vocab_size": VOCAB, "hidden_size": HIDDEN, "intermediate_size": FF,
        "num_hidden_layers": LAYERS, "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS, "max_position_embeddings": 128,
        "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": false,
        "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu",
    });
    std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
    write_safetensors(&dir.join("model.safetensors"), weights);
}

/// A LoRA: rank, alpha, rsLoRA, modules, and its A/B per (layer, module).
struct Lora {
    r: usize,
    alpha: f32,
    rslora: bool,
    modules: Vec<&'static str>,
    /// `(layer, module, A [r][in], B [out][r])`.
    pairs: Vec<(usize, &'static str, Vec<f32>, Vec<f32>)>,
}

impl Lora {
    fn new(seed: u64, r: usize, alpha: f32, rslora: bool, modules: &[&'static str]) -> Lora {
        let mut pairs = Vec::new();
        for l in 0..LAYERS {
            for (k, &m) in modules.iter().enumerate() {
                let (o, i) = dims(m);
                let s = seed * 1000 + (l * 10 + k) as u64;
                pairs.push((l, m, values(s, r * i, 0.3), values(s + 500, o * r, 0.3)));
            }
        }
        Lora {
            r,
            alpha,
            rslora,
            modules: modules.to_vec(),
            pairs,
        }
    }

    fn scaling(&self) -> f32 {
        if self.rslora {
            self.alpha / (self.r as f32).sqrt()
        } else {
            self.alpha / self.r as f32
        }
    }

    fn config_json(&self) -> serde_json::Value {
        serde_json::json!({
            "peft_type": "LORA", "r": self.r, "lora_alpha": self.alpha,
            "use_rslora": self.rslora, "target_modules": self.modules, "bias": "none",
            "fan_in_fan_out": false, "modules_to_save": null, "use_dora": false,
            "rank_pattern": {}, "alpha_pattern": {}, "task_type": "CAUSAL_LM",
        })
    }

    fn tensors(&self) -> Tensors {
        let mut t = Vec::new();
        for (l, m, a, b) in &self.pairs {
            let (o, i) = dims(m);
            let base = format!("base_model.model.model.layers.{l}.{}.{m}", path_of(m));
            t.push((format!("{base}.lora_A.weight"), vec![self.r, i], a.clone()));
            t.push((format!("{base}.lora_B.weight"), vec![o, self.r], b.clone()));
        }
        t
    }

    fn write_peft(&self, dir: &Path) {
        self.write_peft_with(dir, self.config_json(), &self.tensors());
    }

    fn write_peft_with(&self, dir: &Path, config: serde_json::Value, tensors: &Tensors) {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join("adapter_config.json"), config.to_string()).unwrap();
        write_safetensors(&dir.join("adapter_model.safetensors"), tensors);
    }

    /// As llama.cpp's convert_lora_to_gguf.py writes it for a llama: q/k rows of B permuted
    /// for interleaved RoPE.
    fn write_gguf(&self, path: &Path) {
        let gguf_name = |m: &str| match m {
            "q_proj" => "attn_q",
            "k_proj" => "attn_k",
            "v_proj" => "attn_v",
            "o_proj" => "attn_output",
            "gate_proj" => "ffn_gate",
            "up_proj" => "ffn_up",
            _ => "ffn_down",
        };
        let mut bufs: Vec<(String, Vec<u64>, Vec<u8>)> = Vec::new();
        for (l, m, a, b) in &self.pairs {
            let (o, i) = dims(m);
            let b = match *m {
                "q_proj" => permute(b, o, self.r, HEADS),
                "k_proj" => permute(b, o, self.r, KV_HEADS),
                _ => b.clone(),
            };
            let bytes = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
            let n = format!("blk.{l}.{}.weight", gguf_name(m));
            bufs.push((
                format!("{n}.lora_a"),
                vec![i as u64, self.r as u64],
                bytes(a),
            ));
            bufs.push((
                format!("{n}.lora_b"),
                vec![self.r as u64, o as u64],
                bytes(&b),
            ));
        }
        let tensors: Vec<TensorToWrite> = bufs
            .iter()
            .map(|(name, dims, data)| TensorToWrite {
                name: name.clone(),
                dims: dims.clone(),
                ggml_type: GgmlType::F32,
                data,
            })
            .collect();
        let s = |v: &str| MetadataValue::String(v.into());
        let meta = vec![
            ("general.architecture".to_string(), s("llama")),
            ("general.type".to_string(), s("adapter")),
            ("adapter.type".to_string(), s("lora")),
            (
                "adapter.lora.alpha".to_string(),
                MetadataValue::F32(self.alpha),
            ),
        ];
        write_gguf(path, &meta, &tensors).unwrap();
    }

    /// `weights` with `scale * scaling * B A` added to every targeted projection.
    fn merge_into(&self, weights: &mut Tensors, scale: f32) {
        let s = self.scaling() * scale;
        for (l, m, a, b) in &self.pairs {
            let (o, i) = dims(m);
            let name = format!("model.layers.{l}.{}.{m}.weight", path_of(m));
            let w = &mut weights.iter_mut().find(|t| t.0 == name).unwrap().2;
            for row in 0..o {
                for col in 0..i {
                    let d: f32 = (0..self.r)
                        .map(|k| b[row * self.r + k] * a[k * i + col])
                        .sum();
                    w[row * i + col] += s * d;
                }
            }
        }
    }
}

/// llama.cpp's q/k row permutation: row `h*hd + 2t + s` of the result is row
/// `h*hd + s*hd/2 + t` of `w` (`[rows][cols]`).
fn permute(w: &[f32], rows: usize, cols: usize, n_head: usize) -> Vec<f32> {
    let hd = rows / n_head;
    let mut out = vec![0.0; w.len()];
    for h in 0..n_head {
        for s in 0..2 {
            for t in 0..hd / 2 {
                let (from, to) = (h * hd + s * hd / 2 + t, h * hd + 2 * t + s);
                out[to * cols..(to + 1) * cols].copy_from_slice(&w[from * cols..(from + 1) * cols]);
            }
        }
    }
    out
}

fn f32_options() -> LoadOptions {
    LoadOptions {
        weight_format: WeightFormat::F32,
        threads: None,
    }
}

fn load(dir: &Path) -> DecoderModel {
    load_model(dir.to_str().unwrap(), &f32_options()).unwrap()
}

/// Every prompt position's logits, then `decode.len()` cached decode steps, with `lora`.
fn logits_with(
    model: &DecoderModel,
    lora: &[ActiveLora],
    prompt: &[u32],
    decode: &[u32],
) -> Vec<f32> {
    let cap = prompt.len() + decode.len();
    let mut cache = DenseKvCache::new(model.kv_shape(), cap, 1).unwrap();
    let mut ws = model.workspace(cap, cap);
    ws.set_lora(lora);
    let c = SeqChunk {
        seq: 0,
        tokens: prompt,
        pos0: 0,
    };
    model
        .forward(&[c], &mut cache, &mut ws, LogitsFor::AllTokens)
        .unwrap();
    let mut out = ws.logits().to_vec();
    for (k, t) in decode.iter().enumerate() {
        let step = [*t];
        let c = SeqChunk {
            seq: 0,
            tokens: &step,
            pos0: prompt.len() + k,
        };
        model
            .forward(&[c], &mut cache, &mut ws, LogitsFor::LastOfEachChunk)
            .unwrap();
        out.extend_from_slice(ws.logits());
    }
    out
}

fn max_abs(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

const PROMPT: [u32; 9] = [1, 5, 17, 33, 8, 60, 2, 41, 12];
const DECODE: [u32; 4] = [7, 19, 3, 50];

struct Fixture {
    work: PathBuf,
    base: DecoderModel,
    lora_a: Lora,
    lora_b: Lora,
    adapter_a: LoraAdapter,
    adapter_b: LoraAdapter,
}

fn fixture(tag: &str) -> Fixture {
    let work = torchnative_testing::temp_dir(tag);
    write_model(&work.join("base"), &base_weights());
    let base = load(&work.join("base"));
    let lora_a = Lora::new(1, 4, 8.0, false, &MODULES);
    let lora_b = Lora::new(2, 2, 3.0, true, &["q_proj", "v_proj", "down_proj"]);
    lora_a.write_peft(&work.join("a"));
    lora_b.write_peft(&work.join("b"));
    let adapter_a = LoraAdapter::load(&work.join("a"), &base).unwrap();
    let adapter_b = LoraAdapter::load(&work.join("b"), &base).unwrap();
    Fixture {
        work,
        base,
        lora_a,
        lora_b,
        adapter_a,
        adapter_b,
    }
}

/// Adapters with their scales, each with the tensors it was written from.
type Choice<'a> = Vec<(&'a Lora, &'a LoraAdapter, f32)>;

#[test]
fn adapters_equal_their_deltas_merged_into_the_weights() {
    let f = fixture("lora-merged");
    let base_logits = logits_with(&f.base, &[], &PROMPT, &DECODE);
    let cases: [(&str, Choice); 3] = [
        ("a x 1", vec![(&f.lora_a, &f.adapter_a, 1.0)]),
        ("b (rsLoRA) x 0.7", vec![(&f.lora_b, &f.adapter_b, 0.7)]),
        (
            "a x 0.5 + b x 1.5",
            vec![
                (&f.lora_a, &f.adapter_a, 0.5),
                (&f.lora_b, &f.adapter_b, 1.5),
            ],
        ),
    ];
    for (i, (label, list)) in cases.iter().enumerate() {
        let mut merged = base_weights();
        for (lora, _, scale) in list {
            lora.merge_into(&mut merged, *scale);
        }
        let dir = f.work.join(format!("merged{i}"));
        write_model(&dir, &merged);
        let want = logits_with(&load(&dir), &[], &PROMPT, &DECODE);
        let active: Vec<ActiveLora> = list
            .iter()
            .map(|(_, a, s)| ActiveLora::new((*a).clone(), *s))
            .collect();
        let ours = logits_with(&f.base, &active, &PROMPT, &DECODE);
        let moved = max_abs(&want, &base_logits);
        let err = max_abs(&ours, &want);
        println!(
            "{label}: max |adapter - merged| {err:.2e}, the adapter moves logits by {moved:.2e}"
        );
        assert!(
            moved > 0.1,
            "{label}: the adapter barely changes the logits ({moved})"
        );
        assert!(
            err < 2e-5 * (1.0 + moved),
            "{label}: adapter vs merged differ by {err}"
        );
    }
    let _ = std::fs::remove_dir_all(&f.work);
}

#[test]
fn scale_zero_and_no_adapter_give_the_base_bits_and_the_base_stays_unchanged() {
    let f = fixture("lora-zero");
    let base_before = logits_with(&f.base, &[], &PROMPT, &DECODE);
    let zero = [
        ActiveLora::new(f.adapter_a.clone(), 0.0),
        ActiveLora::new(f.adapter_b.clone(), 0.0),
    ];
    let with_zero = logits_with(&f.base, &zero, &PROMPT, &DECODE);
    assert_eq!(
        bits(&with_zero),
        bits(&base_before),
        "scale 0 changed the logits"
    );
    let on = [ActiveLora::new(f.adapter_a.clone(), 1.0)];
    let adapted = logits_with(&f.base, &on, &PROMPT, &DECODE);
    assert!(max_abs(&adapted, &base_before) > 0.1);
    // The same model object, after adapted passes: the base's bits.
    let base_after = logits_with(&f.base, &[], &PROMPT, &DECODE);
    assert_eq!(
        bits(&base_after),
        bits(&base_before),
        "the base model changed"
    );
    // A token's adapted logits do not depend on the batch (each row alone).
    let cap = 2 * PROMPT.len();
    let mut cache = DenseKvCache::new(f.base.kv_shape(), cap, 2).unwrap();
    let mut ws = f.base.workspace(cap, cap);
    ws.set_lora(&on);
    let other: Vec<u32> = PROMPT.iter().map(|t| (t * 3 + 1) % VOCAB as u32).collect();
    let chunks = [
        SeqChunk {
            seq: 0,
            tokens: &other,
            pos0: 0,
        },
        SeqChunk {
            seq: 1,
            tokens: &PROMPT,
            pos0: 0,
        },
    ];
    f.base
        .forward(&chunks, &mut cache, &mut ws, LogitsFor::AllTokens)
        .unwrap();
    let batched = &ws.logits()[PROMPT.len() * VOCAB..];
    assert_eq!(bits(batched), bits(&adapted[..PROMPT.len() * VOCAB]));
    let _ = std::fs::remove_dir_all(&f.work);
}

#[test]
fn a_gguf_lora_gives_the_peft_adapters_bits() {
    let f = fixture("lora-gguf");
    let path = f.work.join("a.gguf");
    f.lora_a.write_gguf(&path);
    let from_gguf = LoraAdapter::load(&path, &f.base).unwrap();
    assert_eq!(from_gguf.modules(), f.adapter_a.modules());
    let peft = logits_with(
        &f.base,
        &[ActiveLora::new(f.adapter_a.clone(), 0.8)],
        &PROMPT,
        &DECODE,
    );
    let gguf = logits_with(
        &f.base,
        &[ActiveLora::new(from_gguf, 0.8)],
        &PROMPT,
        &DECODE,
    );
    assert_eq!(bits(&gguf), bits(&peft));
    let _ = std::fs::remove_dir_all(&f.work);
}

#[test]
fn bad_adapters_are_refused_by_name_before_any_work() {
    let f = fixture("lora-bad");
    let lora = &f.lora_a;
    let err = |name: &str, config: serde_json::Value, tensors: Tensors| -> String {
        let dir = f.work.join(name);
        lora.write_peft_with(&dir, config, &tensors);
        match LoraAdapter::load(&dir, &f.base) {
            Ok(_) => panic!("{name}: loaded"),
            Err(e) => e.to_string(),
        }
    };
    let cfg = lora.config_json();
    let with = |k: &str, v: serde_json::Value| {
        let mut c = cfg.clone();
        c[k] = v;
        c
    };
    let t = lora.tensors();
    let checks: Vec<(&str, String, &[&str])> = vec![
        (
            "rank",
            err("rank", with("r", 8.into()), t.clone()),
            &["rank 4", "r = 8"],
        ),
        (
            "fan_in_fan_out",
            err("fifo", with("fan_in_fan_out", true.into()), t.clone()),
            &["fan_in_fan_out"],
        ),
        (
            "modules_to_save",
            err(
                "mts",
                with("modules_to_save", serde_json::json!(["lm_head"])),
                t.clone(),
            ),
            &["modules_to_save"],
        ),
        (
            "dora",
            err("dora", with("use_dora", true.into()), t.clone()),
            &["use_dora"],
        ),
        (
            "target",
            err(
                "target",
                with(
                    "target_modules",
                    serde_json::json!(["q_proj", "embed_tokens"]),
                ),
                t.clone(),
            ),
            &["embed_tokens"],
        ),
        (
            "shape",
            {
                let mut bad = t.clone();
                bad[1].1 = vec![HEADS * HEAD_DIM + 2, 4];
                bad[1].2.extend_from_slice(&[0.0; 8]);
                err("shape", cfg.clone(), bad)
            },
            &["q_proj", "lora_B", "[34, 4]"],
        ),
        (
            "unknown tensor",
            {
                let mut bad = t.clone();
                bad.push((
                    "base_model.model.lm_head.lora_A.weight".into(),
                    vec![4, HIDDEN],
                    vec![0.0; 4 * HIDDEN],
                ));
                err("unknown", cfg.clone(), bad)
            },
            &["base_model.model.lm_head.lora_A.weight"],
        ),
        (
            "layer",
            {
                let mut bad = t.clone();
                bad[0].0 = bad[0].0.replace("layers.0.", "layers.7.");
                err("layer", cfg.clone(), bad)
            },
            &["layer 7"],
        ),
        (
            "missing B",
            {
                let mut bad = t.clone();
                bad.remove(1);
                err("missing", cfg.clone(), bad)
            },
            &["lora_B", "both"],
        ),
    ];
    for (what, msg, needles) in checks {
        println!("{what}: {msg}");
        assert!(msg.contains("LoRA adapter"), "{what}: {msg}");
        for n in needles {
            assert!(msg.contains(n), "{what}: {msg:?} does not name {n:?}");
        }
    }
    // A model file is not an adapter.
    let not_adapter = f.work.join("model.gguf");
    let meta = vec![(
        "general.type".to_string(),
        MetadataValue::String("model".into()),
    )];
    write_gguf(&not_adapter, &meta, &[]).unwrap();
    let msg = LoraAdapter::load(&not_adapter, &f.base)
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("general.type") && msg.contains("adapter"),
        "{msg}"
    );
    // No adapter there at all.
    let msg = LoraAdapter::load(&f.work.join("nothing"), &f.base)
        .unwrap_err()
        .to_string();
    assert!(msg.contains("adapter_config.json"), "{msg}");
    let _ = std::fs::remove_dir_all(&f.work);
}

#[test]
fn an_adapter_of_another_model_is_refused_at_the_forward_pass() {
    let f = fixture("lora-other");
    // Same layout but another hidden size: a model written with a changed config.
    let dir = f.work.join("other");
    std::fs::create_dir_all(&dir).unwrap();
    let mut w = base_weights();
    // Drop the second layer: a one-layer model.
    w.retain(|t| !t.0.contains("layers.1."));
    write_model(&dir, &w);
    let cfg_path = dir.join("config.json");
    let mut cfg: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&cfg_path).unwrap()).unwrap();
    cfg["num_hidden_layers"] = 1.into();
    std::fs::write(&cfg_path, cfg.to_string()).unwrap();
    let other = load(&dir);
    let mut cache = DenseKvCache::new(other.kv_shape(), 4, 1).unwrap();
    let mut ws = other.workspace(4, 4);
    ws.set_lora(&[ActiveLora::new(f.adapter_a.clone(), 1.0)]);
    let c = SeqChunk {
        seq: 0,
        tokens: &PROMPT[..3],
        pos0: 0,
    };
    let msg = other
        .forward(&[c], &mut cache, &mut ws, LogitsFor::AllTokens)
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("LoRA adapter") && msg.contains("another shape"),
        "{msg}"
    );
    // Loading it for that model names the layer it lacks.
    let msg = LoraAdapter::load(&f.work.join("a"), &other)
        .unwrap_err()
        .to_string();
    assert!(msg.contains("layer 1"), "{msg}");
    let _ = std::fs::remove_dir_all(&f.work);
}

// ---------------------------------------------------------------------------------------------
// Sessions and the engine on the default model (no oracle needed).

/// A PEFT adapter for the default model written here (all seven projections, rank 4).
fn default_model_adapter(llm: &torchnative_runtime::Llm, dir: &Path, seed: u64) {
    let c = llm.config();
    let (d, nq, nkv, ff) = (
        c.hidden_size,
        c.n_heads * c.head_dim,
        c.n_kv_heads * c.head_dim,
        c.intermediate_size,
    );
    let r = 4;
    let mut t: Tensors = Vec::new();
    for l in 0..c.n_layers {
        for (k, m) in MODULES.iter().enumerate() {
            let (o, i) = match *m {
                "q_proj" => (nq, d),
                "k_proj" | "v_proj" => (nkv, d),
                "o_proj" => (d, nq),
                "gate_proj" | "up_proj" => (ff, d),
                _ => (d, ff),
            };
            let s = seed * 10_000 + (l * 10 + k) as u64;
            let base = format!("base_model.model.model.layers.{l}.{}.{m}", path_of(m));
            t.push((
                format!("{base}.lora_A.weight"),
                vec![r, i],
                values(s, r * i, 0.05),
            ));
            t.push((
                format!("{base}.lora_B.weight"),
                vec![o, r],
                values(s + 1, o * r, 0.05),
            ));
        }
    }
    std::fs::create_dir_all(dir).unwrap();
    let cfg = serde_json::json!({"peft_type": "LORA", "r": r, "lora_alpha": 8,
        "target_modules": MODULES, "bias": "none"});
    std::fs::write(dir.join("adapter_config.json"), cfg.to_string()).unwrap();
    write_safetensors(&dir.join("adapter_model.safetensors"), &t);
}

#[test]
fn sessions_choose_adapters_per_session_and_per_call() {
    let Some(gguf) = default_model() else { return };
    let llm = load_llm(gguf.to_str().unwrap(), &LoadOptions::default()).unwrap();
    let work = torchnative_testing::temp_dir("lora-session");
    default_model_adapter(&llm, &work.join("a"), 1);
    let adapter = llm.load_lora(&work.join("a")).unwrap();
    let prompt = llm.tokenize("The capital of France is").unwrap();
    let opts = SessionOptions::default;

    let mut base = llm.session(opts()).unwrap();
    let before = base.prefill_all_logits(&prompt).unwrap();
    let mut s = llm.session(opts()).unwrap();
    s.set_lora(&[ActiveLora::new(adapter.clone(), 1.0)])
        .unwrap();
    let adapted = s.prefill_all_logits(&prompt).unwrap();
    assert!(
        max_abs(&adapted, &before) > 0.05,
        "the adapter changes nothing"
    );
    s.set_lora(&[ActiveLora::new(adapter.clone(), 0.0)])
        .unwrap();
    assert_eq!(bits(&s.prefill_all_logits(&prompt).unwrap()), bits(&before));
    // The shared model is unchanged for another session, after all of that.
    let mut again = llm.session(opts()).unwrap();
    assert_eq!(
        bits(&again.prefill_all_logits(&prompt).unwrap()),
        bits(&before)
    );

    // Per call: GenerationConfig::lora; a change of adapters re-evaluates the cached prompt.
    let greedy = |lora: Option<Vec<ActiveLora>>| GenerationConfig {
        max_new_tokens: 8,
        lora,
        ..Default::default()
    };
    let mut s = llm.session(opts()).unwrap();
    let plain = s
        .generate(&prompt, &greedy(None), &mut |_| {
            torchnative_runtime::Flow::Continue
        })
        .unwrap();
    let on = Some(vec![ActiveLora::new(adapter.clone(), 2.0)]);
    let with = s
        .generate(&prompt, &greedy(on.clone()), &mut |_| {
            torchnative_runtime::Flow::Continue
        })
        .unwrap();
    assert_ne!(
        plain.tokens, with.tokens,
        "the adapter did not change the continuation"
    );
    let mut fresh = llm.session(opts()).unwrap();
    let fresh_with = fresh
        .generate(&prompt, &greedy(on.clone()), &mut |_| {
            torchnative_runtime::Flow::Continue
        })
        .unwrap();
    assert_eq!(with.tokens, fresh_with.tokens);
    let back = s
        .generate(&prompt, &greedy(Some(vec![])), &mut |_| {
            torchnative_runtime::Flow::Continue
        })
        .unwrap();
    assert_eq!(back.tokens, plain.tokens);
    let _ = std::fs::remove_dir_all(&work);
}

/// The batching engine runs each request with its own adapters, in the same forward passes:
/// requests with no adapter, one of two adapters, both, a half scale and a zero scale (which
/// must give the base model's answer) are batched together, in two rounds over the same
/// prompts with the adapters rotated, and each answer (greedy, and seeded sampling) equals the
/// same request alone in a `Session`. The prompts share a long prefix: its cached blocks are
/// shared only between requests with the same adapters (the second round finds the first
/// round's blocks under each adapter list, so a cache keyed by tokens alone would hand the
/// base model's keys to an adapted request and change its answer). Then both rounds again with
/// prompt-lookup speculation (drafts verified in the adapted passes): the same answers.
#[test]
fn the_engine_runs_each_request_with_its_own_adapters() {
    use std::sync::atomic::Ordering;
    let Some(gguf) = default_model() else { return };
    let llm = load_llm(gguf.to_str().unwrap(), &LoadOptions::default()).unwrap();
    let work = torchnative_testing::temp_dir("lora-engine");
    default_model_adapter(&llm, &work.join("a"), 1);
    default_model_adapter(&llm, &work.join("b"), 2);
    let a = llm.load_lora(&work.join("a")).unwrap();
    let b = llm.load_lora(&work.join("b")).unwrap();
    let lists: Vec<Vec<ActiveLora>> = vec![
        vec![],
        vec![ActiveLora::new(a.clone(), 1.0)],
        vec![ActiveLora::new(b.clone(), 1.0)],
        vec![
            ActiveLora::new(a.clone(), 0.5),
            ActiveLora::new(b.clone(), 1.0),
        ],
        vec![ActiveLora::new(a.clone(), 0.0)],
        vec![ActiveLora::new(a.clone(), 0.5)],
    ];
    // 40 shared tokens (two whole blocks of 16) before each question.
    let shared = "You are a careful assistant who answers questions about the world. Answer \
                  in one short sentence, plainly and politely, without lists or headings, and \
                  never repeat the question back to the person asking it. If you do not know, \
                  say so in a few words.";
    let questions = [
        "What is the capital of France?",
        "Name a large animal.",
        "What do bees make?",
        "Which planet is red?",
        "What is ice made of?",
        "Say hello in Spanish.",
    ];
    let prompts: Vec<Vec<u32>> = questions
        .iter()
        .map(|q| llm.tokenize(&format!("{shared} {q}")).unwrap())
        .collect();
    assert!(
        prompts.iter().all(|p| p.len() > 40),
        "a shared prefix of whole blocks"
    );
    let config = |lora: &[ActiveLora], seed: Option<u64>| GenerationConfig {
        max_new_tokens: 12,
        lora: Some(lora.to_vec()),
        sampling: SamplingParams {
            do_sample: seed.is_some(),
            temperature: 0.9,
            ..SamplingParams::default()
        },
        seed,
        ..Default::default()
    };
    let alone = |p: &[u32], c: &GenerationConfig| {
        let mut s = llm.session(SessionOptions::default()).unwrap();
        s.generate(p, c, &mut |_| torchnative_runtime::Flow::Continue)
            .unwrap()
            .tokens
    };
    // Rounds 0 and 1 as described; rounds 2 and 3 the same with prompt-lookup drafts verified
    // in the adapted passes.
    let plain_engine = EngineConfig {
        max_running: 4,
        max_batch_tokens: 64,
        ..EngineConfig::default()
    };
    let engine = Engine::start(llm.clone(), plain_engine.clone()).unwrap();
    let speculating = Engine::start(
        llm.clone(),
        EngineConfig {
            prompt_lookup_tokens: 4,
            ..plain_engine
        },
    )
    .unwrap();
    let mut distinct = std::collections::HashSet::new();
    for round in 0..4 {
        let engine = if round < 2 { &engine } else { &speculating };
        let jobs: Vec<(usize, GenerationConfig)> = (0..prompts.len())
            .map(|i| {
                let list = &lists[(i + round % 2) % lists.len()];
                let seed = (i % 3 == 2).then_some(100 + i as u64);
                (i, config(list, seed))
            })
            .collect();
        let rxs: Vec<_> = jobs
            .iter()
            .map(|(i, c)| {
                submit_with_channel(engine, prompts[*i].clone(), c.clone(), None)
                    .unwrap()
                    .1
            })
            .collect();
        for ((i, c), rx) in jobs.iter().zip(rxs) {
            let (done, _) = wait_done(&rx, &format!("round {round}, request {i}"));
            let want = alone(&prompts[*i], c);
            let label = (round, i, c.lora.as_ref().map(|l| l.len()), c.seed);
            assert_eq!(done.tokens, want, "engine vs alone: {label:?}");
            distinct.insert(want);
        }
    }
    // The adapters do change answers (else the test would show nothing), and a zero scale
    // gives the base model's.
    assert!(distinct.len() >= 6, "{} distinct answers", distinct.len());
    let base = alone(&prompts[0], &config(&[], None));
    assert_eq!(alone(&prompts[0], &config(&lists[4], None)), base);
    let hits = engine.stats().prefix_hit_tokens.load(Ordering::Relaxed);
    assert!(hits > 0, "no prefix blocks shared at all");
    let drafted = speculating.stats().drafted_tokens.load(Ordering::Relaxed);
    assert!(drafted > 0, "nothing drafted with prompt lookup");
    let _ = std::fs::remove_dir_all(&work);
}

// ---------------------------------------------------------------------------------------------
// Against transformers + peft.

/// transformers + peft logits of `cases` with `adapters` ([{"dir", "scale"}]) active.
fn peft_reference(
    python: &Path,
    model: serde_json::Value,
    truth: Option<&Path>,
    adapters: serde_json::Value,
    cases: &[(Vec<u32>, usize)],
    work: &Path,
) -> Vec<Reference> {
    let extra = serde_json::json!({ "adapters": adapters });
    common::reference_logits_with(python, model, truth, cases, work, extra)
}

/// A PEFT adapter made by PEFT itself (random A and B, N(0, std)).
fn make_peft_lora(
    python: &Path,
    model: serde_json::Value,
    out: &Path,
    spec: serde_json::Value,
    work: &Path,
) {
    let mut req = spec;
    req["cmd"] = "make_lora".into();
    req["model"] = model;
    req["out_dir"] = serde_json::json!(out);
    run_oracle(python, &req, work);
}

/// llama.cpp's `convert_lora_to_gguf.py` (F32) of the PEFT adapter `peft` for the base model
/// directory `base`; `None` (skipped by the rule) without the llama.cpp sources.
fn llama_cpp_lora(python: &Path, base: &Path, peft: &Path, out: &Path) -> Option<PathBuf> {
    let converter = "src/vendor/llama.cpp/convert_lora_to_gguf.py";
    let root = torchnative_testing::llama_cpp_root(&[converter])?;
    let run = std::process::Command::new(python)
        .arg(root.join(converter))
        .arg("--base")
        .arg(base)
        .args(["--outtype", "f32", "--outfile"])
        .arg(out)
        .arg(peft)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "convert_lora_to_gguf.py: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    Some(out.to_path_buf())
}

/// Compare prefill and decode logits with the rule; print the worst errors.
fn check(label: &str, prefill: &[f32], decode: &[f32], r: &Reference, failures: &mut Vec<String>) {
    let (ours_p, up_p) = worst_errors(prefill, &r.prefill32, &r.prefill64, r.vocab);
    let (ours_d, up_d) = worst_errors(decode, &r.decode32, &r.decode64, r.vocab);
    println!(
        "{label}: max |ours - f64| prefill {ours_p:.2e} (transformers+peft f32 {up_p:.2e}), \
         decode {ours_d:.2e} (transformers+peft f32 {up_d:.2e})"
    );
    for (what, ours, up, truth) in [
        ("prefill", prefill, &r.prefill32, &r.prefill64),
        ("decode", decode, &r.decode32, &r.decode64),
    ] {
        if let Err(m) = close_to_truth(what, ours, up, truth, r.vocab) {
            failures.push(format!("{label}: {m}"));
        }
    }
}

#[test]
fn peft_adapters_on_a_tiny_llama_match_transformers_peft_every_logit() {
    let Some(python) = oracle_python() else {
        return;
    };
    let work = torchnative_testing::temp_dir("lora-tiny");
    let (model_dir, model) = tiny_model(&python, "llama", 7, &work);
    let mj = serde_json::json!({"dir": model_dir});
    let (a, b) = (work.join("a"), work.join("b"));
    make_peft_lora(
        &python,
        mj.clone(),
        &a,
        serde_json::json!({"r": 4, "alpha": 8,
        "target_modules": MODULES, "seed": 1, "std": 0.1}),
        &work,
    );
    make_peft_lora(
        &python,
        mj.clone(),
        &b,
        serde_json::json!({"r": 2, "alpha": 3,
        "use_rslora": true, "target_modules": ["q_proj", "v_proj", "down_proj"], "seed": 2,
        "std": 0.1}),
        &work,
    );
    let (ad_a, ad_b) = (
        LoraAdapter::load(&a, &model).unwrap(),
        LoraAdapter::load(&b, &model).unwrap(),
    );
    let vocab = model.config().vocab_size as u32;
    let prompt: Vec<u32> = (0..20u32).map(|j| (j * 37 + 5) % vocab).collect();
    let cases = vec![(prompt.clone(), 8)];
    let runs = [
        (
            "tiny llama, adapter a (r 4, 7 modules) x 1",
            serde_json::json!([{"dir": a, "scale": 1.0}]),
            vec![ActiveLora::new(ad_a.clone(), 1.0)],
        ),
        (
            "tiny llama, a x 0.5 + b (r 2, rsLoRA, q/v/down) x 1.5",
            serde_json::json!([{"dir": a, "scale": 0.5}, {"dir": b, "scale": 1.5}]),
            vec![
                ActiveLora::new(ad_a.clone(), 0.5),
                ActiveLora::new(ad_b.clone(), 1.5),
            ],
        ),
    ];
    let mut failures = Vec::new();
    let base = logits_with(&model, &[], &prompt, &[]);
    for (label, adapters, active) in runs {
        let r = &peft_reference(&python, mj.clone(), None, adapters, &cases, &work)[0];
        let all = logits_with(&model, &active, &prompt, &r.greedy);
        let (prefill, decode) = all.split_at(prompt.len() * r.vocab);
        // The adapter matters: the base alone is far outside the tolerance.
        let moved = max_abs(&base, &r.prefill32);
        println!("{label}: the adapter moves transformers' logits by up to {moved:.2e}");
        assert!(
            moved > 1e-2,
            "{label}: PEFT's adapter moves logits by only {moved}"
        );
        check(label, prefill, decode, r, &mut failures);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // llama.cpp's converter writes q/k rows of B permuted for its llama layout; loaded for this
    // safetensors model they are put back: the same bits as the PEFT adapter.
    if let Some(path) = llama_cpp_lora(&python, &model_dir, &a, &work.join("a.gguf")) {
        let g = LoraAdapter::load(&path, &model).unwrap();
        assert_eq!(g.modules(), ad_a.modules());
        let peft = logits_with(&model, &[ActiveLora::new(ad_a, 0.7)], &prompt, &[3, 9]);
        let gguf = logits_with(&model, &[ActiveLora::new(g, 0.7)], &prompt, &[3, 9]);
        assert_eq!(
            bits(&gguf),
            bits(&peft),
            "llama.cpp's GGUF LoRA vs the PEFT adapter"
        );
        println!("tiny llama: llama.cpp's GGUF LoRA gives the PEFT adapter's bits");
    }
    let _ = std::fs::remove_dir_all(&work);
}

#[test]
fn a_peft_adapter_on_the_default_model_matches_transformers_peft_every_logit() {
    let Some(python) = oracle_python() else {
        return;
    };
    let Some(gguf) = default_model() else { return };
    let truth = safetensors_copy(&python, &gguf);
    let work = torchnative_testing::temp_dir("lora-default");
    let mj = serde_json::json!({"gguf": gguf});
    let a = work.join("a");
    make_peft_lora(
        &python,
        mj.clone(),
        &a,
        serde_json::json!({"r": 8, "alpha": 16,
        "target_modules": MODULES, "seed": 3, "std": 0.03}),
        &work,
    );
    let llm = load_llm(gguf.to_str().unwrap(), &f32_options()).unwrap();
    let adapter = llm.load_lora(&a).unwrap();
    let prompt = llm
        .tokenize("The quick brown fox jumps over the lazy dog because")
        .unwrap();
    let cases = vec![(prompt.clone(), 16)];
    let mut failures = Vec::new();
    for scale in [1.0f32, 0.5] {
        let adapters = serde_json::json!([{"dir": a, "scale": scale}]);
        let r = &peft_reference(&python, mj.clone(), Some(&truth), adapters, &cases, &work)[0];
        let mut s = llm.session(SessionOptions::default()).unwrap();
        s.set_lora(&[ActiveLora::new(adapter.clone(), scale)])
            .unwrap();
        let prefill = s.prefill_all_logits(&prompt).unwrap();
        let mut decode = Vec::new();
        for &t in &r.greedy {
            decode.extend_from_slice(s.decode_logits(t).unwrap());
        }
        let mut plain = llm.session(SessionOptions::default()).unwrap();
        let moved = max_abs(&plain.prefill_all_logits(&prompt).unwrap(), &r.prefill32);
        println!("x {scale}: the adapter moves transformers' logits by up to {moved:.2e}");
        assert!(moved > 1e-2, "PEFT's adapter moves logits by only {moved}");
        let label = format!("SmolLM2-135M (GGUF q/k rows permuted, f32), PEFT r 8 x {scale}");
        check(&label, &prefill, &decode, r, &mut failures);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // llama.cpp's GGUF LoRA of the same adapter on the GGUF model: its q/k rows come permuted
    // as the model's, the PEFT adapter's were permuted at load: the same bits.
    if let Some(path) = llama_cpp_lora(&python, &truth, &a, &work.join("a.gguf")) {
        let g = llm.load_lora(&path).unwrap();
        let run = |ad: &LoraAdapter| {
            let mut s = llm.session(SessionOptions::default()).unwrap();
            s.set_lora(&[ActiveLora::new(ad.clone(), 1.0)]).unwrap();
            s.prefill_all_logits(&prompt).unwrap()
        };
        assert_eq!(
            bits(&run(&g)),
            bits(&run(&adapter)),
            "llama.cpp's GGUF LoRA vs PEFT's"
        );
        println!("SmolLM2-135M: llama.cpp's GGUF LoRA gives the PEFT adapter's bits");
    }
    let _ = std::fs::remove_dir_all(&work);
}
