//! RoPE inverse frequencies for each scaling variant, computed as transformers'
//! `ROPE_INIT_FUNCTIONS` do (in f32, same formulas), so cos/sin tables agree with upstream.

use torchnative_formats::{DecoderConfig, RopeScaling};

use crate::error::Result;

/// `1 / base^(2i / dim)` for `i < dim / 2`, in f32 as transformers computes it.
pub(crate) fn plain_inv_freq(dim: usize, base: f32) -> Vec<f32> {
    (0..dim / 2)
        .map(|i| 1.0 / base.powf((2 * i) as f32 / dim as f32))
        .collect()
}

/// LongRoPE's frequencies for one factor set: `1 / (factor_i * base^(2i / dim))`.
fn longrope_inv_freq(dim: usize, base: f32, factors: &[f32]) -> Vec<f32> {
    (0..dim / 2)
        .map(|i| 1.0 / (factors[i] * base.powf((2 * i) as f32 / dim as f32)))
        .collect()
}

/// The inverse frequencies LongRoPE uses for sequences longer than its pretrained context,
/// and that length: transformers switches a whole forward call to them once its last position
/// reaches `original_max_position_embeddings`. `None` for every other RoPE.
pub fn long_inv_freq(config: &DecoderConfig) -> Option<(Vec<f32>, usize)> {
    match &config.rope_scaling {
        Some(RopeScaling::LongRope {
            long_factor,
            original_max_position_embeddings,
            ..
        }) => Some((
            longrope_inv_freq(config.rope_dim, config.rope_theta, long_factor),
            *original_max_position_embeddings,
        )),
        _ => None,
    }
}

/// Plain RoPE frequencies of the sliding-window layers when they have their own base
/// (Gemma 3's `rope_local_base_freq`).
pub fn local_inv_freq(config: &DecoderConfig) -> Option<Vec<f32>> {
    config
        .local_rope_theta
        .map(|base| plain_inv_freq(config.rope_dim, base))
}

/// Inverse frequencies (`rope_dim / 2` of them) and the attention factor that scales cos/sin.
/// For LongRoPE these are the short-sequence ones ([`long_inv_freq`] has the others).
pub fn inv_freq(config: &DecoderConfig) -> Result<(Vec<f32>, f32)> {
    let dim = config.rope_dim;
    let base = config.rope_theta;
    let plain = plain_inv_freq(dim, base);
    match &config.rope_scaling {
        None => Ok((plain, 1.0)),
        Some(RopeScaling::LongRope {
            short_factor,
            attention_factor,
            ..
        }) => Ok((
            longrope_inv_freq(dim, base, short_factor),
            *attention_factor,
        )),
        Some(RopeScaling::Linear { factor }) => {
            Ok((plain.iter().map(|f| f / factor).collect(), 1.0))
        }
        // llama.cpp divides the angle's base frequency by the factor (`theta / freq_factor`).
        Some(RopeScaling::FreqFactors { factors }) => {
            Ok((plain.iter().zip(factors).map(|(f, d)| f / d).collect(), 1.0))
        }
        Some(RopeScaling::Llama3 {
            factor,
            low_freq_factor,
            high_freq_factor,
            original_max_position_embeddings,
        }) => {
            let old_ctx = *original_max_position_embeddings as f32;
            let low_wavelen = old_ctx / low_freq_factor;
            let high_wavelen = old_ctx / high_freq_factor;
            let inv = plain
                .iter()
                .map(|&f| {
                    let wavelen = 2.0 * std::f32::consts::PI / f;
                    let scaled = if wavelen > low_wavelen { f / factor } else { f };
                    let medium = wavelen >= high_wavelen && wavelen <= low_wavelen;
                    if medium {
                        let smooth = (old_ctx / wavelen - low_freq_factor)
                            / (high_freq_factor - low_freq_factor);
                        (1.0 - smooth) * scaled / factor + smooth * scaled
                    } else {
                        scaled
                    }
                })
                .collect();
            Ok((inv, 1.0))
        }
        Some(RopeScaling::Yarn {
            factor,
            original_max_position_embeddings,
            beta_fast,
            beta_slow,
            attention_factor,
            mscale,
            mscale_all_dim,
        }) => {
            let get_mscale = |scale: f32, m: f32| {
                if scale <= 1.0 {
                    1.0
                } else {
                    0.1 * m * scale.ln() + 1.0
                }
            };
            let attention = match (attention_factor, mscale, mscale_all_dim) {
                (Some(a), _, _) => *a,
                (None, Some(m), Some(ma)) => get_mscale(*factor, *m) / get_mscale(*factor, *ma),
                _ => get_mscale(*factor, 1.0),
            };
            let max_pos = *original_max_position_embeddings as f32;
            let correction_dim = |n_rot: f32| {
                (dim as f32 * (max_pos / (n_rot * 2.0 * std::f32::consts::PI)).ln())
                    / (2.0 * base.ln())
            };
            let low = correction_dim(*beta_fast).floor().max(0.0);
            let high = correction_dim(*beta_slow).ceil().min(dim as f32 - 1.0);
            let high = if low == high { high + 0.001 } else { high };
            let inv = (0..dim / 2)
                .map(|i| {
                    let pos_freq = base.powf((2 * i) as f32 / dim as f32);
                    let extrapolation = 1.0 / pos_freq;
                    let interpolation = 1.0 / (factor * pos_freq);
                    let ramp = ((i as f32 - low) / (high - low)).clamp(0.0, 1.0);
                    let extrapolation_factor = 1.0 - ramp;
                    interpolation * (1.0 - extrapolation_factor)
                        + extrapolation * extrapolation_factor
                })
                .collect();
            Ok((inv, attention))
        }
        // Up to max_position_embeddings dynamic NTK is plain RoPE; longer sequences take
        // [`dynamic_ntk_inv_freq`] for their length.
        Some(RopeScaling::Dynamic { .. }) => Ok((plain, 1.0)),
    }
}

/// Dynamic NTK scaling (`rope_type` dynamic): transformers' `_compute_dynamic_ntk_parameters`
/// for a forward call reaching `seq_len` positions, written into `out` (`dim / 2` entries):
/// `1 / base'^(2i / dim)` with `base' = base * ((factor * s / original) - (factor - 1))^(dim /
/// (dim - 2))`, `s = max(seq_len, original)` (so plain RoPE up to `original`).
///
/// In transformers `s` is a 0-dim int64 tensor, so `factor * s / original - (factor - 1)` is
/// f32 arithmetic (the Python floats rounded to f32, `factor - 1` taken in f64 first) and the
/// power a double `pow` with the exponent `dim / (dim - 2)` in f64, rounded to f32 (torch's
/// `pow(Tensor, Scalar)` on one element); `base * that` is an f32 product. Bit-identical to
/// transformers for every length (`tests::dynamic_ntk_inv_freq_is_transformers_bit_for_bit`);
/// the final `base'^(2i / dim)` is glibc's `powf` as in [`inv_freq`], which torch's scalar loop
/// also calls for `dim / 2 < 16` (its vectorized `pow` for larger heads can differ by 1-2 ulp).
pub fn dynamic_ntk_inv_freq(
    dim: usize,
    base: f32,
    factor: f64,
    original: usize,
    seq_len: usize,
    out: &mut [f32],
) {
    let s = seq_len.max(original) as f32;
    let ratio = factor as f32 * s / original as f32 - (factor - 1.0) as f32;
    let power = (ratio as f64).powf(dim as f64 / (dim as f64 - 2.0)) as f32;
    let scaled = base * power;
    for (i, f) in out.iter_mut().enumerate().take(dim / 2) {
        *f = 1.0 / scaled.powf((2 * i) as f32 / dim as f32);
    }
}

/// Dynamic NTK scaling's parameters when the config has it: `(factor, original length)`.
pub fn dynamic_ntk(config: &DecoderConfig) -> Option<(f64, usize)> {
    match &config.rope_scaling {
        Some(RopeScaling::Dynamic {
            factor,
            original_max_position_embeddings,
        }) => Some((*factor, *original_max_position_embeddings)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `_compute_dynamic_ntk_parameters(config, seq_len=torch.max(position_ids) + 1)` of
    /// transformers 5.24.0 / torch 2.15.0 (`LlamaConfig(head_dim=dim, max_position_embeddings,
    /// rope_parameters={"rope_type": "dynamic", "factor", "rope_theta"})`), as f32 bits:
    /// (dim, base, factor, max_position_embeddings, seq_len, inv_freq).
    #[allow(clippy::type_complexity)]
    #[rustfmt::skip]
    const TRANSFORMERS: &[(usize, f32, f64, usize, usize, &[u32])] = &[
        (16, 10000.0, 3.0, 16, 16, &[0x3f800000, 0x3ea1e89b, 0x3dcccccd, 0x3d0186e3, 0x3c23d70a, 0x3b4f3e38, 0x3a83126f, 0x39a5cb60]),
        (16, 10000.0, 3.0, 16, 17, &[0x3f800000, 0x3e9dfb6e, 0x3dc2fcb8, 0x3cf0a8fe, 0x3c148400, 0x3b374da2, 0x3a623d4a, 0x398b9dca]),
        (16, 10000.0, 3.0, 16, 23, &[0x3f800000, 0x3e8fa264, 0x3da12da5, 0x3cb4dd7b, 0x3bcaf4e5, 0x3ae3bf14, 0x39ff9069, 0x390f63c8]),
        (16, 10000.0, 3.0, 16, 48, &[0x3f800000, 0x3e753a99, 0x3d6ae938, 0x3c6106f8, 0x3b578f2e, 0x3a4e7d5f, 0x3945cd40, 0x383d7ab5]),
        (16, 10000.0, 2.5, 16, 17, &[0x3f800000, 0x3e9e95ce, 0x3dc47a84, 0x3cf36d2d, 0x3c16cbd3, 0x3b3ad415, 0x3a677870, 0x398f63c8]),
        (16, 10000.0, 2.5, 16, 48, &[0x3f800000, 0x3e7ab06a, 0x3d757d09, 0x3c706547, 0x3b6b6892, 0x3a668657, 0x3961be0e, 0x385d0f2a]),
        (16, 10000.0, 2.1, 16, 23, &[0x3f800000, 0x3e938411, 0x3daa01df, 0x3cc3ed8d, 0x3be1ccf6, 0x3b021d2e, 0x3a15f3c2, 0x392cd0a7]),
        (16, 10000.0, 2.1, 16, 48, &[0x3f800000, 0x3e7fdde1, 0x3d7fbbc4, 0x3c7f99ad, 0x3b7f779b, 0x3a7f558e, 0x397f3384, 0x387f117f]),
        (24, 500000.0, 4.0, 2048, 2049, &[0x3f800000, 0x3eab817a, 0x3de5cc77, 0x3d19f3cd, 0x3c4e476e, 0x3b8a320e, 0x3ab92aa8, 0x39f81a4e, 0x39263709, 0x385eb5ac, 0x37953401, 0x36c7ea60]),
        (24, 500000.0, 4.0, 2048, 6144, &[0x3f800000, 0x3e8c7a37, 0x3d9a2bcd, 0x3ca9331d, 0x3bb9b173, 0x3acbcb68, 0x39dfa90d, 0x38f57679, 0x3806b1f3, 0x3713d341, 0x36223c38, 0x35320cbd]),
        (4, 10000.0, 3.0, 16, 17, &[0x3f800000, 0x3c09f874]),
    ];

    #[test]
    fn dynamic_ntk_inv_freq_is_transformers_bit_for_bit() {
        for &(dim, base, factor, original, seq_len, want) in TRANSFORMERS {
            let mut got = vec![0.0; dim / 2];
            dynamic_ntk_inv_freq(dim, base, factor, original, seq_len, &mut got);
            let got: Vec<u32> = got.iter().map(|f| f.to_bits()).collect();
            assert_eq!(
                got, want,
                "dim {dim} base {base} factor {factor} {original} {seq_len}"
            );
        }
    }

    #[test]
    fn dynamic_ntk_is_plain_rope_up_to_the_original_length() {
        let c = DecoderConfig::from_hf_config_json(
            r#"{"model_type": "llama", "hidden_size": 64, "intermediate_size": 96,
            "num_hidden_layers": 1, "num_attention_heads": 4, "vocab_size": 10,
            "max_position_embeddings": 16,
            "rope_parameters": {"rope_type": "dynamic", "factor": 2.0, "rope_theta": 10000.0}}"#,
        )
        .unwrap();
        assert_eq!(dynamic_ntk(&c), Some((2.0, 16)));
        assert_eq!(c.context_length, 32);
        let (plain, attention) = inv_freq(&c).unwrap();
        assert_eq!(attention, 1.0);
        assert_eq!(plain, plain_inv_freq(16, 10000.0));
        for seq_len in [1, 15, 16] {
            let mut got = vec![0.0; 8];
            dynamic_ntk_inv_freq(16, 10000.0, 2.0, 16, seq_len, &mut got);
            assert_eq!(got, plain, "seq_len {seq_len}");
        }
        let mut longer = vec![0.0; 8];
        dynamic_ntk_inv_freq(16, 10000.0, 2.0, 16, 17, &mut longer);
        assert!(longer.iter().zip(&plain).skip(1).all(|(l, p)| l < p));
    }
}
