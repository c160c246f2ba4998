//! Helpers shared by the integration tests: a seeded RNG, temp dirs, and the oracle / model
//! discovery convention (skip unless `TORCHNATIVE_REQUIRE_ORACLE=1`).
#![allow(dead_code)]

use std::path::Path;
use std::process::Command;

use torchnative_quant::GgmlType;

/// SplitMix64: small, seeded, good enough for test data.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next_u64() as u8).collect()
    }
    /// Uniform in [lo, hi).
    pub fn uniform(&mut self, lo: f32, hi: f32) -> f32 {
        let u = (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32;
        lo + (hi - lo) * u
    }
    /// Roughly normal (sum of uniforms), mean 0, std `std`.
    pub fn normal(&mut self, std: f32) -> f32 {
        let s: f32 = (0..6).map(|_| self.uniform(-1.0, 1.0)).sum();
        s * std / 2.0f32.sqrt()
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

// Not every test binary uses every input.
#[allow(unused_imports)]
pub use torchnative_testing::{default_model, oracle_python, temp_dir};

/// Run `tests/oracle/<script>` with `args`; panic with its stderr on failure.
pub fn run_oracle(python: &Path, script: &str, args: &[&Path]) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/oracle")
        .join(script);
    let out = Command::new(python)
        .arg(&script)
        .args(args)
        .output()
        .expect("spawn oracle python");
    assert!(
        out.status.success(),
        "oracle {} failed: {}",
        script.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

pub fn read_f32s(path: &Path) -> Vec<f32> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

pub fn write_f32s(path: &Path, v: &[f32]) {
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    std::fs::write(path, bytes).expect("write f32s");
}

/// Assert two float slices are bit-identical, reporting the first difference.
pub fn assert_bits_eq(what: &str, got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            g.to_bits() == w.to_bits(),
            "{what}: element {i}: got {g:e} ({:#010x}), want {w:e} ({:#010x})",
            g.to_bits(),
            w.to_bits()
        );
    }
}

/// Byte offsets of the f16 scale fields inside one block of `ty`.
pub fn f16_scale_offsets(ty: GgmlType) -> &'static [usize] {
    use GgmlType::*;
    match ty {
        Q4_0 | Q5_0 | Q8_0 | IQ4_NL | IQ4_XS => &[0],
        Q4_1 | Q5_1 | Q4_K | Q5_K => &[0, 2],
        Q2_K => &[80, 82],
        Q3_K => &[108],
        Q6_K => &[208],
        _ => &[],
    }
}

/// Random blocks of `ty` whose scales are finite (random bit patterns, exponent not all-ones).
pub fn random_blocks(rng: &mut Rng, ty: GgmlType, blocks: usize) -> Vec<u8> {
    let mut data = rng.bytes(blocks * ty.type_size());
    for block in data.chunks_exact_mut(ty.type_size()) {
        for &off in f16_scale_offsets(ty) {
            if block[off + 1] & 0x7c == 0x7c {
                block[off + 1] &= !0x04;
            }
        }
        if ty == GgmlType::Q8_K {
            // f32 d: keep the exponent below all-ones.
            if block[3] & 0x7f == 0x7f && block[2] & 0x80 != 0 {
                block[2] &= 0x7f;
            }
        }
    }
    data
}
