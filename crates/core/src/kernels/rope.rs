//! Rotary position embeddings with a precomputed cos/sin table.

use super::KernelError;

/// Which dimensions form a rotated pair within a head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RopeStyle {
    /// Pairs `(i, i + rot_dim/2)`: Hugging Face llama (`rotate_half`).
    HalfRotation,
    /// Pairs `(2i, 2i + 1)`: GGUF-converted llama weights (q/k rows permuted by the converter).
    Interleaved,
}

/// cos/sin of `position * inv_freq[i]` for every position below `max_positions`, laid out
/// `[position][rot_dim / 2]`, already multiplied by the attention factor (YaRN's mscale).
#[derive(Debug, Clone)]
pub struct RopeTable {
    rot_dim: usize,
    max_positions: usize,
    cos: Vec<f32>,
    sin: Vec<f32>,
}

impl RopeTable {
    /// Standard RoPE over the first `rot_dim` dims of a head (`rot_dim` even):
    /// `inv_freq[i] = 1 / theta^(2i / rot_dim)`, computed in f32 like HF.
    pub fn new(rot_dim: usize, max_positions: usize, theta: f32) -> Result<Self, KernelError> {
        if rot_dim == 0 || !rot_dim.is_multiple_of(2) {
            return Err(KernelError::InvalidArgument(format!(
                "rope rot_dim {rot_dim} must be even and > 0"
            )));
        }
        if !(theta.is_finite() && theta > 0.0) {
            return Err(KernelError::InvalidArgument(format!(
                "rope theta {theta} must be finite and > 0"
            )));
        }
        let inv_freq: Vec<f32> = (0..rot_dim / 2)
            .map(|i| 1.0 / theta.powf((2 * i) as f32 / rot_dim as f32))
            .collect();
        Self::from_inv_freq(&inv_freq, max_positions, 1.0)
    }

    /// Table from caller-supplied inverse frequencies (llama3 / YaRN / NTK scaling done by the
    /// caller; `rot_dim = 2 * inv_freq.len()`); cos and sin are multiplied by
    /// `attention_factor` (1.0 for none).
    pub fn from_inv_freq(
        inv_freq: &[f32],
        max_positions: usize,
        attention_factor: f32,
    ) -> Result<Self, KernelError> {
        if inv_freq.is_empty() {
            return Err(KernelError::InvalidArgument(
                "rope inv_freq is empty".into(),
            ));
        }
        if let Some((i, f)) = inv_freq.iter().enumerate().find(|(_, f)| !f.is_finite()) {
            return Err(KernelError::InvalidArgument(format!(
                "rope inv_freq[{i}] = {f} is not finite"
            )));
        }
        let half = inv_freq.len();
        let len = max_positions
            .checked_mul(half)
            .filter(|&l| l <= 1 << 30)
            .ok_or_else(|| {
                KernelError::InvalidArgument(format!(
                    "rope table {max_positions} x {half} too large"
                ))
            })?;
        let mut cos = vec![0.0; len];
        let mut sin = vec![0.0; len];
        for (pos, (c, s)) in cos
            .chunks_exact_mut(half)
            .zip(sin.chunks_exact_mut(half))
            .enumerate()
        {
            rope_row(inv_freq, pos, attention_factor, c, s);
        }
        Ok(RopeTable {
            rot_dim: 2 * half,
            max_positions,
            cos,
            sin,
        })
    }

    /// Number of rotated dimensions per head.
    pub fn rot_dim(&self) -> usize {
        self.rot_dim
    }

    /// Positions covered (exclusive upper bound).
    pub fn max_positions(&self) -> usize {
        self.max_positions
    }

    /// `(cos, sin)` rows of one position, `rot_dim / 2` each.
    pub fn row(&self, pos: usize) -> (&[f32], &[f32]) {
        let half = self.rot_dim / 2;
        (
            &self.cos[pos * half..(pos + 1) * half],
            &self.sin[pos * half..(pos + 1) * half],
        )
    }
}

/// One position's table row: `cos` / `sin` of `pos * inv_freq[i]` times `attention_factor`
/// (the angle an f32 product as in HF, its cos/sin taken in f64), what [`RopeTable`] holds for
/// `pos`. For frequencies that change with the sequence (dynamic NTK scaling), computed per
/// token by the caller. Contract (asserted): `cos` and `sin` have `inv_freq.len()` entries.
pub fn rope_row(
    inv_freq: &[f32],
    pos: usize,
    attention_factor: f32,
    cos: &mut [f32],
    sin: &mut [f32],
) {
    assert!(
        cos.len() == inv_freq.len() && sin.len() == inv_freq.len(),
        "rope_row: cos/sin rows must have one entry per frequency"
    );
    for ((&f, c), s) in inv_freq.iter().zip(cos).zip(sin) {
        let angle = (pos as f32 * f) as f64;
        *c = (angle.cos() * attention_factor as f64) as f32;
        *s = (angle.sin() * attention_factor as f64) as f32;
    }
}

/// Applies RoPE in place to one token's heads: `x` is `[n_heads][head_dim]`; the first
/// `table.rot_dim()` dims of each head rotate by the angles of `pos`, the rest stay.
/// Contract (asserted): `x.len() >= n_heads * head_dim`, `rot_dim <= head_dim`,
/// `pos < table.max_positions()` (the runtime bounds positions by the context length).
pub fn rope_f32(
    x: &mut [f32],
    n_heads: usize,
    head_dim: usize,
    pos: usize,
    cos_sin: &RopeTable,
    style: RopeStyle,
) {
    assert!(
        pos < cos_sin.max_positions,
        "rope_f32: position {pos} >= table size {}",
        cos_sin.max_positions
    );
    let (cos, sin) = cos_sin.row(pos);
    rope_rows_f32(x, n_heads, head_dim, cos, sin, style);
}

/// [`rope_f32`] with one position's `cos` / `sin` rows given directly (`rot_dim / 2` each, as
/// [`rope_row`] fills them): the same arithmetic. Contract (asserted): `cos.len() ==
/// sin.len()`, `x.len() >= n_heads * head_dim`, `2 * cos.len() <= head_dim`.
pub fn rope_rows_f32(
    x: &mut [f32],
    n_heads: usize,
    head_dim: usize,
    cos: &[f32],
    sin: &[f32],
    style: RopeStyle,
) {
    assert_eq!(
        cos.len(),
        sin.len(),
        "rope_rows_f32: cos and sin rows differ"
    );
    let half = cos.len();
    let rot = 2 * half;
    assert!(
        x.len() >= n_heads * head_dim,
        "rope_f32: x shorter than n_heads * head_dim"
    );
    assert!(
        rot <= head_dim,
        "rope_f32: rot_dim {rot} > head_dim {head_dim}"
    );
    for head in x[..n_heads * head_dim].chunks_exact_mut(head_dim) {
        match style {
            RopeStyle::HalfRotation => {
                let (lo, hi) = head[..rot].split_at_mut(half);
                for i in 0..half {
                    let (a, b) = (lo[i], hi[i]);
                    lo[i] = a * cos[i] - b * sin[i];
                    hi[i] = b * cos[i] + a * sin[i];
                }
            }
            RopeStyle::Interleaved => {
                for (i, pair) in head[..rot].chunks_exact_mut(2).enumerate() {
                    let (a, b) = (pair[0], pair[1]);
                    pair[0] = a * cos[i] - b * sin[i];
                    pair[1] = b * cos[i] + a * sin[i];
                }
            }
        }
    }
}
