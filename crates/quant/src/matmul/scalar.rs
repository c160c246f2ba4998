//! Portable row kernels for the float weight types (F32 / F16 / BF16).
//!
//! The quantized types never run row kernels: every path gives them the GEMV (`super::gemv`,
//! whose scalar form is `gemm::reference_dot_unpacked`) below `GEMM_MIN_ROWS` activation rows
//! and the GEMM (where the path has one) from there. A job still carries a kernel set for
//! them, [`gemv_only`], which is never called.

use super::{f16_at, Kernels, QActs, PREFILL_ROWS};
use crate::GgmlType;

pub(crate) fn kernels(ty: GgmlType) -> Option<Kernels> {
    use GgmlType::*;
    Some(match ty {
        Q4_0 | Q4_1 | Q5_0 | Q5_1 | Q8_0 | Q4_K | Q5_K | Q6_K => Kernels {
            one: gemv_only::<1>,
            many: gemv_only::<PREFILL_ROWS>,
        },
        F32 => Kernels {
            one: float::<1, 0>,
            many: float::<PREFILL_ROWS, 0>,
        },
        F16 => Kernels {
            one: float::<1, 1>,
            many: float::<PREFILL_ROWS, 1>,
        },
        BF16 => Kernels {
            one: float::<1, 2>,
            many: float::<PREFILL_ROWS, 2>,
        },
        _ => return None,
    })
}

/// The quantized types' row kernels: never run (their jobs take the GEMV or the GEMM).
fn gemv_only<const N: usize>(_: &[u8], _: &QActs, _: usize) -> [f32; N] {
    unreachable!("quantized weights run the GEMV or the GEMM, not row kernels")
}

/// F32 (KIND 0), F16 (1), BF16 (2) weights times f32 activations, accumulated in f32.
fn float<const N: usize, const KIND: u8>(w: &[u8], a: &QActs, r0: usize) -> [f32; N] {
    let width = if KIND == 0 { 4 } else { 2 };
    let mut out = [0f32; N];
    for (j, e) in w.chunks_exact(width).enumerate() {
        let wv = match KIND {
            0 => f32::from_le_bytes([e[0], e[1], e[2], e[3]]),
            1 => f16_at(e, 0),
            _ => f32::from_bits((u16::from_le_bytes([e[0], e[1]]) as u32) << 16),
        };
        for (i, o) in out.iter_mut().enumerate() {
            *o += wv * a.xf[(r0 + i) * a.cols + j];
        }
    }
    out
}
