//! Which type each tensor gets for a file type: the choices llama.cpp's `llama-quantize` makes
//! (without an importance matrix or overrides), for the dense decoder models torchnative runs.
//!
//! The rule, in the order it is applied:
//! 1. Only matrices are converted: tensors with at least two non-trivial dims whose name ends in
//!    `weight`, except norms (`*_norm.weight`), MoE routers and a few small special tensors. The
//!    rest (norm vectors, biases) keep their type.
//! 2. For F32/F16/BF16 every converted matrix gets that type; nothing else applies.
//! 3. For quantized file types the base type is the file type's (Q4_K for Q4_K_M, ...), then:
//!    - `output.weight`, and `token_embd.weight` when the model has no separate output
//!      (tied embeddings): Q6_K, unless the base is Q8_0 (kept), or the row length is not a
//!      multiple of the base type's block (Q8_0).
//!    - `attn_v` (and fused `attn_qkv`): Q4_K_M / Q5_K_M use Q6_K for the "more bits" layers
//!      (the first and last eighth, and every third one between); Q4_K_S uses Q5_K for the first
//!      four; fused qkv is Q5_K in Q4_K_M and Q6_K in Q5_K_M.
//!    - `ffn_down`: Q4_K_M / Q5_K_M use Q6_K for the "more bits" layers; Q4_K_S uses Q5_K for the
//!      first eighth of the layers.
//! 4. A row length that is not a multiple of the chosen type's block falls back: Q4_K to Q5_0,
//!    Q5_K to Q5_1, Q6_K to Q8_0; if even that does not fit, F16.
//!
//! The layer index of `attn_v` counts attn_v tensors, and that of `ffn_down` counts ffn_down
//! tensors, in llama.cpp's tensor order (by layer number, then name). llama.cpp's special cases
//! for other architectures (Falcon, 70B llama, 8-expert MoE, GLM) are not reproduced; MoE models
//! are refused by the caller for the mixtures.

use torchnative_quant::GgmlType;

use super::FileType;

/// The type chosen for one tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TypeChoice {
    /// The tensor's type in the output.
    pub ty: GgmlType,
    /// The type the rule wanted when the row length forced a fallback to `ty`.
    pub fallback_from: Option<GgmlType>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Category {
    Output,
    TokenEmbd,
    AttnV,
    AttnQkv,
    FfnDown,
    Other,
}

fn category(name: &str) -> Category {
    if name == "output.weight" {
        Category::Output
    } else if name == "token_embd.weight" || name == "per_layer_token_embd.weight" {
        Category::TokenEmbd
    } else if name.contains("attn_qkv.weight") {
        Category::AttnQkv
    } else if name.contains("attn_v.weight") || name.contains("attn_kv_b.weight") {
        Category::AttnV
    } else if name.contains("ffn_down") {
        Category::FfnDown
    } else {
        Category::Other
    }
}

/// Number of dims ignoring trailing 1s (ggml's `ggml_n_dims`), at least 1.
fn n_dims(dims: &[u64]) -> usize {
    dims.iter().rposition(|&d| d > 1).map_or(1, |i| i + 1)
}

/// Whether a tensor is converted at all (rule 1).
pub fn is_converted(name: &str, dims: &[u64]) -> bool {
    const KEEP: [&str; 8] = [
        "_norm.weight",
        "ffn_gate_inp.weight",
        "ssm_conv1d",
        "attn_rel_b.weight",
        "altup",
        "laurel",
        "per_layer_model_proj",
        "time_mix_",
    ];
    n_dims(dims) >= 2
        && name.ends_with("weight")
        && !KEEP.iter().any(|k| name.contains(k))
        && name != "position_embd.weight"
        && name != "token_types.weight"
}

/// llama.cpp's "use more bits" layers: the first and last eighth, and every third in between.
fn more_bits(i: usize, n: usize) -> bool {
    let (i, n) = (i as i64, n as i64);
    i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2
}

/// Layer number of `blk.N.…`, or -1 (llama.cpp's tensor order puts those first).
fn layer_of(name: &str) -> i64 {
    name.strip_prefix("blk.")
        .and_then(|r| r.split_once('.'))
        .and_then(|(n, _)| n.parse().ok())
        .unwrap_or(-1)
}

fn fallback(ty: GgmlType, row: u64) -> TypeChoice {
    let fits = |t: GgmlType| row % t.block_size() as u64 == 0;
    if fits(ty) {
        return TypeChoice {
            ty,
            fallback_from: None,
        };
    }
    let next = match ty {
        GgmlType::Q4_K => GgmlType::Q5_0,
        GgmlType::Q5_K => GgmlType::Q5_1,
        GgmlType::Q6_K => GgmlType::Q8_0,
        other => other,
    };
    TypeChoice {
        ty: if fits(next) { next } else { GgmlType::F16 },
        fallback_from: Some(ty),
    }
}

/// The output type of every tensor (`(name, ggml dims, current type)`) for `file_type`, for a
/// model of `n_layers` blocks. Tensors that are not converted keep their current type.
pub fn choose_types(
    tensors: &[(&str, &[u64], GgmlType)],
    n_layers: usize,
    file_type: FileType,
) -> Vec<TypeChoice> {
    use FileType as F;
    let base = file_type.base_type();
    let tied = !tensors.iter().any(|(n, _, _)| *n == "output.weight");
    let n_attn_v = tensors
        .iter()
        .filter(|(n, d, _)| is_converted(n, d) && category(n) == Category::AttnV)
        .count();
    // llama.cpp's processing order, which the per-kind layer counters follow.
    let mut order: Vec<usize> = (0..tensors.len()).collect();
    order.sort_by(|&a, &b| {
        let (na, nb) = (tensors[a].0, tensors[b].0);
        (layer_of(na), na).cmp(&(layer_of(nb), nb))
    });
    let mut out = vec![
        TypeChoice {
            ty: GgmlType::F32,
            fallback_from: None
        };
        tensors.len()
    ];
    let (mut i_attn_v, mut i_ffn_down) = (0, 0);
    for i in order {
        let (name, dims, current) = tensors[i];
        if !is_converted(name, dims) {
            out[i] = TypeChoice {
                ty: current,
                fallback_from: None,
            };
            continue;
        }
        if !base.is_quantized() {
            out[i] = TypeChoice {
                ty: base,
                fallback_from: None,
            };
            continue;
        }
        let row = dims[0];
        let mut ty = base;
        match category(name) {
            Category::Output | Category::TokenEmbd
                if category(name) == Category::Output || tied =>
            {
                if row % base.block_size() as u64 != 0 {
                    ty = GgmlType::Q8_0;
                } else if base != GgmlType::Q8_0 {
                    ty = GgmlType::Q6_K;
                }
            }
            Category::AttnV => {
                if matches!(file_type, F::Q4_K_M | F::Q5_K_M) && more_bits(i_attn_v, n_attn_v) {
                    ty = GgmlType::Q6_K;
                } else if file_type == F::Q4_K_S && i_attn_v < 4 {
                    ty = GgmlType::Q5_K;
                }
                i_attn_v += 1;
            }
            Category::AttnQkv => match file_type {
                F::Q4_K_M => ty = GgmlType::Q5_K,
                F::Q5_K_M => ty = GgmlType::Q6_K,
                _ => {}
            },
            Category::FfnDown => {
                if matches!(file_type, F::Q4_K_M | F::Q5_K_M) && more_bits(i_ffn_down, n_layers) {
                    ty = GgmlType::Q6_K;
                } else if file_type == F::Q4_K_S && i_ffn_down < n_layers / 8 {
                    ty = GgmlType::Q5_K;
                }
                i_ffn_down += 1;
            }
            _ => {}
        }
        out[i] = fallback(ty, row);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn more_bits_layers_of_a_30_layer_model() {
        let picked: Vec<usize> = (0..30).filter(|&i| more_bits(i, 30)).collect();
        assert_eq!(picked, [0, 1, 2, 5, 8, 11, 14, 17, 20, 23, 26, 27, 28, 29]);
    }

    #[test]
    fn norms_and_vectors_keep_their_type_and_fallbacks_apply() {
        let t = [
            ("token_embd.weight", &[576u64, 100][..], GgmlType::Q4_1),
            ("blk.0.attn_norm.weight", &[576][..], GgmlType::F32),
            ("blk.0.attn_v.weight", &[576, 192][..], GgmlType::Q4_1),
            ("blk.0.ffn_down.weight", &[1536, 576][..], GgmlType::Q4_1),
            ("blk.0.attn_q.weight", &[512, 512][..], GgmlType::Q4_1),
            ("blk.0.odd.weight", &[40, 2][..], GgmlType::F32),
        ];
        let c = choose_types(&t, 1, FileType::Q4_K_M);
        let tys: Vec<GgmlType> = c.iter().map(|c| c.ty).collect();
        use GgmlType::*;
        assert_eq!(tys, [Q8_0, F32, Q8_0, Q6_K, Q4_K, F16]);
        assert_eq!(c[2].fallback_from, Some(Q6_K));
        let c = choose_types(&t, 1, FileType::F16);
        let tys: Vec<GgmlType> = c.iter().map(|c| c.ty).collect();
        assert_eq!(tys, [F16, F32, F16, F16, F16, F16]);
    }
}
