//! One map between Hugging Face (transformers) and GGUF (llama.cpp) tensor names.
//!
//! RoPE layout: llama.cpp's converter permutes the rows of `q_proj`/`k_proj` for `llama`
//! (and Mistral, which it converts as `llama`) so that ggml's interleaved RoPE (rotating
//! element pairs `2i, 2i+1`) computes what transformers' `rotate_half` RoPE (pairs `i,
//! i + head_dim/2`) computes on the original rows. The weights are stored permuted and are
//! NOT un-permuted here: a GGUF llama model must be run with interleaved RoPE, an HF one with
//! half-split RoPE (see [`gguf_qk_rows_interleaved`]). Qwen2/Qwen3 are converted without the
//! permutation and use half-split RoPE in both formats.

use crate::config::{Architecture, DecoderConfig};

/// Which naming convention a tensor name follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Naming {
    /// transformers: `model.layers.{i}.self_attn.q_proj.weight`.
    HuggingFace,
    /// llama.cpp: `blk.{i}.attn_q.weight`.
    Gguf,
}

/// Whole-model tensors: (HF name, GGUF name).
const GLOBAL: [(&str, &str); 3] = [
    ("model.embed_tokens.weight", "token_embd.weight"),
    ("model.norm.weight", "output_norm.weight"),
    ("lm_head.weight", "output.weight"),
];

/// Per-layer tensors: (HF suffix after `model.layers.{i}.`, GGUF suffix after `blk.{i}.`).
const PER_LAYER: [(&str, &str); 18] = [
    ("input_layernorm.weight", "attn_norm.weight"),
    ("self_attn.q_proj.weight", "attn_q.weight"),
    ("self_attn.k_proj.weight", "attn_k.weight"),
    ("self_attn.v_proj.weight", "attn_v.weight"),
    ("self_attn.o_proj.weight", "attn_output.weight"),
    ("self_attn.q_proj.bias", "attn_q.bias"),
    ("self_attn.k_proj.bias", "attn_k.bias"),
    ("self_attn.v_proj.bias", "attn_v.bias"),
    ("self_attn.o_proj.bias", "attn_output.bias"),
    ("self_attn.q_norm.weight", "attn_q_norm.weight"),
    ("self_attn.k_norm.weight", "attn_k_norm.weight"),
    ("post_attention_layernorm.weight", "ffn_norm.weight"),
    ("mlp.gate_proj.weight", "ffn_gate.weight"),
    ("mlp.up_proj.weight", "ffn_up.weight"),
    ("mlp.down_proj.weight", "ffn_down.weight"),
    ("mlp.gate_proj.bias", "ffn_gate.bias"),
    ("mlp.up_proj.bias", "ffn_up.bias"),
    ("mlp.down_proj.bias", "ffn_down.bias"),
];

fn per_layer() -> impl Iterator<Item = (&'static str, &'static str)> {
    PER_LAYER.into_iter()
}

const HF_LAYER: &str = "model.layers.";
const GGUF_LAYER: &str = "blk.";

/// Splits `{prefix}{i}.{rest}` into `(i, rest)`.
fn split_layer<'a>(name: &'a str, prefix: &str) -> Option<(usize, &'a str)> {
    let rest = name.strip_prefix(prefix)?;
    let (index, suffix) = rest.split_once('.')?;
    // Plain decimal only: "01" or "+1" would not round-trip.
    if index.is_empty() || (index.len() > 1 && index.starts_with('0')) {
        return None;
    }
    if !index.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((index.parse().ok()?, suffix))
}

/// The GGUF name of an HF tensor, if the map knows it (Phi-3's fused projections included;
/// GGUF `ffn_up` maps back to `up_proj`, the name of every other architecture).
pub fn hf_to_gguf(name: &str) -> Option<String> {
    if let Some((_, g)) = GLOBAL.iter().find(|(h, _)| *h == name) {
        return Some(g.to_string());
    }
    let (layer, suffix) = split_layer(name, HF_LAYER)?;
    let (_, g) = per_layer().chain(PHI3_FUSED).find(|(h, _)| *h == suffix)?;
    Some(format!("{GGUF_LAYER}{layer}.{g}"))
}

/// The GGUF name of an HF tensor in a file whose `general.architecture` is `arch`: Gemma's
/// norms have their own names (`post_attention_layernorm` is `post_attention_norm` there, not the
/// `ffn_norm` of llama's layout).
pub fn hf_to_gguf_in(arch: &str, name: &str) -> Option<String> {
    if matches!(arch, "gemma2" | "gemma3") {
        if let Some((layer, suffix)) = split_layer(name, HF_LAYER) {
            if let Some((_, g)) = GEMMA_NORMS.iter().find(|(h, _)| *h == suffix) {
                return Some(format!("{GGUF_LAYER}{layer}.{g}"));
            }
        }
    }
    hf_to_gguf(name)
}

/// The HF name of a GGUF tensor, if the map knows it.
pub fn gguf_to_hf(name: &str) -> Option<String> {
    if let Some((h, _)) = GLOBAL.iter().find(|(_, g)| *g == name) {
        return Some(h.to_string());
    }
    let (layer, suffix) = split_layer(name, GGUF_LAYER)?;
    let (h, _) = per_layer().find(|(_, g)| *g == suffix)?;
    Some(format!("{HF_LAYER}{layer}.{h}"))
}

/// Per-layer tensors of the Phi-3 and Gemma layouts that the llama table does not hold:
/// (HF suffix, llama.cpp's GGUF suffix for that architecture). Phi-3 GGUFs are read with these
/// names, Gemma's norms through [`hf_to_gguf_in`].
const PHI3_FUSED: [(&str, &str); 2] = [
    ("self_attn.qkv_proj.weight", "attn_qkv.weight"),
    // gate rows then up rows, one matrix of 2 x intermediate_size rows.
    ("mlp.gate_up_proj.weight", "ffn_up.weight"),
];
const GEMMA_NORMS: [(&str, &str); 4] = [
    ("input_layernorm.weight", "attn_norm.weight"),
    (
        "post_attention_layernorm.weight",
        "post_attention_norm.weight",
    ),
    ("pre_feedforward_layernorm.weight", "ffn_norm.weight"),
    ("post_feedforward_layernorm.weight", "post_ffw_norm.weight"),
];

/// The per-layer tensors of `arch` as (HF suffix, GGUF suffix), before the config's optional
/// biases and q/k norms are filtered.
fn layer_tensors(arch: Architecture) -> Vec<(&'static str, &'static str)> {
    match arch {
        Architecture::Phi3 => {
            let fused_away = [
                "self_attn.q_proj.weight",
                "self_attn.k_proj.weight",
                "self_attn.v_proj.weight",
                "mlp.gate_proj.weight",
                "mlp.up_proj.weight",
            ];
            let mut v: Vec<_> = per_layer()
                .filter(|(hf, _)| !fused_away.contains(hf))
                .collect();
            v.extend(PHI3_FUSED);
            v
        }
        Architecture::Gemma2 | Architecture::Gemma3 => {
            let mut v: Vec<_> = per_layer()
                .filter(|(hf, _)| !hf.ends_with("layernorm.weight"))
                .collect();
            v.extend(GEMMA_NORMS);
            v
        }
        _ => per_layer().collect(),
    }
}

/// Every tensor a checkpoint of `config` holds, in the given naming: the embedding, final
/// norm, output projection unless tied, and per layer the norms, projections, and the biases
/// and q/k norms the config enables (Phi-3: fused `qkv_proj` and `gate_up_proj`; Gemma: the
/// four norms of its sandwich layout).
pub fn expected_tensors(config: &DecoderConfig, naming: Naming) -> Vec<String> {
    let pick = |(hf, gguf): (&str, &str)| match naming {
        Naming::HuggingFace => hf.to_string(),
        Naming::Gguf => gguf.to_string(),
    };
    let mut names = vec![pick(GLOBAL[0]), pick(GLOBAL[1])];
    if !config.tie_word_embeddings {
        names.push(pick(GLOBAL[2]));
    }
    let wanted = |hf: &str| -> bool {
        match hf {
            "self_attn.q_proj.bias" | "self_attn.k_proj.bias" | "self_attn.v_proj.bias" => {
                config.attention_bias
            }
            "self_attn.o_proj.bias" => config.attention_out_bias,
            "self_attn.q_norm.weight" | "self_attn.k_norm.weight" => config.qk_norm,
            "mlp.gate_proj.bias" | "mlp.up_proj.bias" | "mlp.down_proj.bias" => config.mlp_bias,
            _ => true,
        }
    };
    let prefix = match naming {
        Naming::HuggingFace => HF_LAYER,
        Naming::Gguf => GGUF_LAYER,
    };
    let layer = layer_tensors(config.architecture);
    for i in 0..config.n_layers {
        for &pair in layer.iter().filter(|(hf, _)| wanted(hf)) {
            names.push(format!("{prefix}{i}.{}", pick(pair)));
        }
    }
    names
}

/// Whether a GGUF file of `arch` stores q/k projection rows permuted for interleaved RoPE
/// (llama.cpp does this for `llama`; see the module docs).
pub fn gguf_qk_rows_interleaved(arch: Architecture) -> bool {
    matches!(arch, Architecture::Llama | Architecture::Mistral)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_map_both_ways() {
        let pairs = [
            (
                "model.layers.0.self_attn.q_proj.weight",
                "blk.0.attn_q.weight",
            ),
            (
                "model.layers.29.mlp.down_proj.weight",
                "blk.29.ffn_down.weight",
            ),
            (
                "model.layers.3.input_layernorm.weight",
                "blk.3.attn_norm.weight",
            ),
            (
                "model.layers.3.post_attention_layernorm.weight",
                "blk.3.ffn_norm.weight",
            ),
            (
                "model.layers.1.self_attn.k_norm.weight",
                "blk.1.attn_k_norm.weight",
            ),
            ("model.layers.1.self_attn.v_proj.bias", "blk.1.attn_v.bias"),
            (
                "model.layers.1.self_attn.o_proj.weight",
                "blk.1.attn_output.weight",
            ),
            ("model.embed_tokens.weight", "token_embd.weight"),
            ("model.norm.weight", "output_norm.weight"),
            ("lm_head.weight", "output.weight"),
        ];
        for (hf, gguf) in pairs {
            assert_eq!(hf_to_gguf(hf).as_deref(), Some(gguf), "{hf}");
            assert_eq!(gguf_to_hf(gguf).as_deref(), Some(hf), "{gguf}");
        }
        for odd in [
            "model.layers.01.mlp.up_proj.weight",
            "model.layers.x.mlp.up_proj.weight",
            "model.layers..mlp.up_proj.weight",
            "blk.0.unknown.weight",
            "model.layers.0",
            "",
        ] {
            assert_eq!(hf_to_gguf(odd), None, "{odd}");
            assert_eq!(gguf_to_hf(odd), None, "{odd}");
        }
        assert_eq!(
            hf_to_gguf("model.layers.0.self_attn.rotary_emb.inv_freq"),
            None
        );
    }
}
