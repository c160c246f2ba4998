//! RoPE against the direct rotation formula, and the two styles against each other under the
//! GGUF converter's row permutation.

use super::{assert_close, Rng, U};
use crate::kernels::{rope_f32, RopeStyle, RopeTable};

#[test]
fn rope_both_styles_match_direct_formula() {
    let mut rng = Rng::new(30);
    let (n_heads, head_dim, theta) = (3, 64, 10000.0f32);
    for rot_dim in [64, 32] {
        let table = RopeTable::new(rot_dim, 300, theta).unwrap();
        for pos in [0, 1, 17, 299] {
            for style in [RopeStyle::HalfRotation, RopeStyle::Interleaved] {
                let x = rng.vec(n_heads * head_dim);
                let mut y = x.clone();
                rope_f32(&mut y, n_heads, head_dim, pos, &table, style);
                for h in 0..n_heads {
                    let xh = &x[h * head_dim..(h + 1) * head_dim];
                    let yh = &y[h * head_dim..(h + 1) * head_dim];
                    for i in 0..rot_dim / 2 {
                        let inv = 1.0 / (theta as f64).powf(2.0 * i as f64 / rot_dim as f64);
                        let angle = pos as f64 * inv;
                        let (c, s) = (angle.cos(), angle.sin());
                        let (ia, ib) = match style {
                            RopeStyle::HalfRotation => (i, i + rot_dim / 2),
                            RopeStyle::Interleaved => (2 * i, 2 * i + 1),
                        };
                        let (a, b) = (xh[ia] as f64, xh[ib] as f64);
                        // The table's angle is an f32 product (as in HF): its error is
                        // pos·inv·2u, moving the result by that many radians.
                        let tol = 8.0 * U + pos as f64 * inv * 4.0 * U;
                        assert_close(
                            yh[ia],
                            a * c - b * s,
                            tol,
                            &format!("{style:?} pos{pos} h{h} i{i}"),
                        );
                        assert_close(
                            yh[ib],
                            b * c + a * s,
                            tol,
                            &format!("{style:?} pos{pos} h{h} i{i}"),
                        );
                    }
                    // Dimensions past rot_dim are untouched.
                    assert_eq!(&yh[rot_dim..], &xh[rot_dim..]);
                }
            }
        }
    }
}

/// llama.cpp's converter permutes each head's q/k rows: GGUF row `2i + r` is HF row
/// `r·hd/2 + i`. Interleaved RoPE on the permuted vector must equal the permuted HF result.
#[test]
fn half_rotation_equals_interleaved_under_gguf_permutation() {
    let mut rng = Rng::new(31);
    let (n_heads, hd) = (4, 64);
    let table = RopeTable::new(hd, 64, 10000.0).unwrap();
    let permute = |v: &[f32]| {
        let mut out = vec![0.0; v.len()];
        for h in 0..n_heads {
            for i in 0..hd / 2 {
                for r in 0..2 {
                    out[h * hd + 2 * i + r] = v[h * hd + r * hd / 2 + i];
                }
            }
        }
        out
    };
    for pos in [0, 5, 63] {
        let hf = rng.vec(n_heads * hd);
        let mut gguf = permute(&hf);
        let mut hf_rot = hf.clone();
        rope_f32(
            &mut hf_rot,
            n_heads,
            hd,
            pos,
            &table,
            RopeStyle::HalfRotation,
        );
        rope_f32(&mut gguf, n_heads, hd, pos, &table, RopeStyle::Interleaved);
        assert_eq!(permute(&hf_rot), gguf, "pos {pos}");
    }
}

#[test]
fn rope_from_inv_freq_applies_attention_factor() {
    let inv = [1.0f32, 0.25];
    let t = RopeTable::from_inv_freq(&inv, 4, 2.0).unwrap();
    let (c, s) = t.row(3);
    assert_close(c[1], (0.75f64).cos() * 2.0, 4.0 * U, "cos");
    assert_close(s[0], (3.0f64).sin() * 2.0, 4.0 * U, "sin");
    assert!(RopeTable::new(7, 4, 1e4).is_err());
    assert!(RopeTable::from_inv_freq(&[f32::NAN], 4, 1.0).is_err());
}
