//! RoPE inverse frequencies for each scaling variant, computed as transformers'
//! `ROPE_INIT_FUNCTIONS` do (in f32, same formulas), so cos/sin tables agree with upstream.

use torchnative_formats::{DecoderConfig, RopeScaling};

use crate::error::{Result, RuntimeError};

/// `1 / base^(2i / dim)` for `i < dim / 2`, in f32 as transformers computes it.
fn plain_inv_freq(dim: usize, base: f32) -> Vec<f32> {
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
        Some(RopeScaling::Dynamic { .. }) => Err(RuntimeError::Unsupported {
            what: "rope_scaling 'dynamic' (NTK rescaling that changes with sequence length)".into(),
            supported: "default, linear, llama3, yarn".into(),
        }),
    }
}
