//! Run-time CPU feature detection, done once per process and cached.

use std::sync::atomic::{AtomicU8, Ordering};

/// Instruction-set level a kernel runs with. Ordered: a higher level implies the lower ones
/// of the same architecture (`Avx512` machines also run the `Avx2` path); `Neon` is the
/// aarch64 level (it implies nothing about the x86_64 ones, which aarch64 lowers to `Scalar`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Isa {
    /// Portable scalar reference path (also the path on targets without SIMD kernels).
    Scalar,
    /// x86_64 AVX2 + FMA + F16C, 8 f32 lanes.
    Avx2,
    /// x86_64 AVX-512 F/BW/VL/DQ (+ AVX2/FMA/F16C), 16 f32 lanes.
    Avx512,
    /// aarch64 Advanced SIMD (NEON, part of the aarch64 baseline), 4 f32 lanes.
    Neon,
}

impl Isa {
    /// Lower-case name, as accepted by `TORCHNATIVE_ISA`.
    pub fn name(self) -> &'static str {
        match self {
            Isa::Scalar => "scalar",
            Isa::Avx2 => "avx2",
            Isa::Avx512 => "avx512",
            Isa::Neon => "neon",
        }
    }
}

const UNKNOWN: u8 = u8::MAX;
static ACTIVE: AtomicU8 = AtomicU8::new(UNKNOWN);
static DETECTED: AtomicU8 = AtomicU8::new(UNKNOWN);

fn isa_from_u8(v: u8) -> Option<Isa> {
    match v {
        0 => Some(Isa::Scalar),
        1 => Some(Isa::Avx2),
        2 => Some(Isa::Avx512),
        3 => Some(Isa::Neon),
        _ => None,
    }
}

/// `isa`, lowered to what this CPU supports (cached detection), so a forced level can never
/// run instructions the CPU lacks.
#[inline]
pub(crate) fn supported_or_lower(isa: Isa) -> Isa {
    let detected = isa_from_u8(DETECTED.load(Ordering::Relaxed)).unwrap_or_else(|| {
        let d = detected_isa();
        DETECTED.store(d as u8, Ordering::Relaxed);
        d
    });
    lower(isa, detected)
}

/// The levels of this target's architecture, lowest first.
const ARCH_LEVELS: &[Isa] = if cfg!(target_arch = "x86_64") {
    &[Isa::Scalar, Isa::Avx2, Isa::Avx512]
} else if cfg!(target_arch = "aarch64") {
    &[Isa::Scalar, Isa::Neon]
} else {
    &[Isa::Scalar]
};

/// The highest level of this architecture that is at most `requested` and at most `detected`
/// (an x86_64 level requested on aarch64 is `Scalar`; `Neon` requested on x86_64 is the best
/// x86_64 level).
#[inline]
fn lower(requested: Isa, detected: Isa) -> Isa {
    let limit = requested.min(detected);
    ARCH_LEVELS
        .iter()
        .copied()
        .filter(|&l| l <= limit)
        .max()
        .unwrap_or(Isa::Scalar)
}

/// The best level this CPU supports (ignores any override).
pub fn detected_isa() -> Isa {
    #[cfg(target_arch = "x86_64")]
    {
        let avx2 = is_x86_feature_detected!("avx2")
            && is_x86_feature_detected!("fma")
            && is_x86_feature_detected!("f16c");
        let avx512 = avx2
            && is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512bw")
            && is_x86_feature_detected!("avx512vl")
            && is_x86_feature_detected!("avx512dq");
        if avx512 {
            return Isa::Avx512;
        }
        if avx2 {
            return Isa::Avx2;
        }
    }
    #[cfg(target_arch = "aarch64")]
    {
        // Advanced SIMD is mandatory on aarch64 (and enabled by the target's baseline).
        if std::arch::is_aarch64_feature_detected!("neon") {
            return Isa::Neon;
        }
    }
    Isa::Scalar
}

/// Parses a `TORCHNATIVE_ISA` value; unknown names are ignored (the detected level is used).
fn parse_isa(name: &str) -> Option<Isa> {
    match name.trim().to_ascii_lowercase().as_str() {
        "scalar" => Some(Isa::Scalar),
        "avx2" => Some(Isa::Avx2),
        "avx512" => Some(Isa::Avx512),
        "neon" => Some(Isa::Neon),
        _ => None,
    }
}

/// The level every public kernel dispatches on: the detected level, lowered (never raised) by
/// env `TORCHNATIVE_ISA=scalar|avx2|avx512|neon`, so a run can be compared against a slower
/// path (a level of the other architecture lowers to `scalar`).
/// Computed on first use and cached.
#[inline]
pub fn active_isa() -> Isa {
    isa_from_u8(ACTIVE.load(Ordering::Relaxed)).unwrap_or_else(|| {
        let detected = detected_isa();
        let isa = std::env::var("TORCHNATIVE_ISA")
            .ok()
            .and_then(|v| parse_isa(&v))
            .map_or(detected, |requested| lower(requested, detected));
        ACTIVE.store(isa as u8, Ordering::Relaxed);
        isa
    })
}

/// Every level this CPU can run, lowest first (tests force each one).
pub fn supported_isas() -> Vec<Isa> {
    let best = detected_isa();
    ARCH_LEVELS
        .iter()
        .copied()
        .filter(|&isa| isa <= best)
        .collect()
}
