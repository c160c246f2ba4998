//! Dequantization is bit-identical to the `gguf` Python package (`gguf.quants.dequantize`) on
//! random blocks of every supported type and on real tensors of the default model.

mod common;

use common::*;
use torchnative_quant::{dequantize, GgmlType};

const TYPES: [GgmlType; 16] = [
    GgmlType::F32,
    GgmlType::F16,
    GgmlType::BF16,
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::Q8_0,
    GgmlType::Q2_K,
    GgmlType::Q3_K,
    GgmlType::Q4_K,
    GgmlType::Q5_K,
    GgmlType::Q6_K,
    GgmlType::Q8_K,
    GgmlType::IQ4_NL,
    GgmlType::IQ4_XS,
];

/// Bit comparison that treats NaN == NaN (payload normalisation differs between numpy's SIMD
/// and scalar conversions; only raw F16 inputs can produce NaN here).
fn assert_same(what: &str, got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let same = g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan());
        assert!(
            same,
            "{what}: element {i}: got {g:e} ({:#010x}), want {w:e} ({:#010x})",
            g.to_bits(),
            w.to_bits()
        );
    }
}

#[test]
fn random_blocks_match_gguf_package_bit_for_bit() {
    let Some(python) = oracle_python() else {
        return;
    };
    let dir = temp_dir("dequant-random");
    let mut rng = Rng::new(0x5eed_0001);
    let mut manifest = Vec::new();
    let mut inputs = Vec::new();
    for ty in TYPES {
        let blocks = if ty.block_size() == 1 { 4096 } else { 97 };
        let data = random_blocks(&mut rng, ty, blocks);
        std::fs::write(dir.join(format!("{ty}.bin")), &data).unwrap();
        manifest.push(serde_json::json!({"name": ty.name(), "type": ty.name()}));
        inputs.push((ty, data));
    }
    std::fs::write(
        dir.join("manifest.json"),
        serde_json::to_string(&manifest).unwrap(),
    )
    .unwrap();
    run_oracle(&python, "dequant.py", &[&dir]);
    for (ty, data) in inputs {
        let want = read_f32s(&dir.join(format!("{ty}.f32")));
        let mut got = vec![0f32; data.len() / ty.type_size() * ty.block_size()];
        dequantize(ty, &data, &mut got).unwrap();
        assert_same(&format!("random {ty}"), &got, &want);
        // The same bytes at an odd address give the same result: no alignment requirement.
        let mut shifted = vec![0u8; data.len() + 1];
        shifted[1..].copy_from_slice(&data);
        let mut again = vec![0f32; got.len()];
        dequantize(ty, &shifted[1..], &mut again).unwrap();
        assert_same(&format!("misaligned {ty}"), &again, &got);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn model_tensors_match_gguf_package_bit_for_bit() {
    let Some(python) = oracle_python() else {
        return;
    };
    let Some(model) = default_model() else { return };
    let dir = temp_dir("dequant-model");
    run_oracle(&python, "model_tensors.py", &[&model, &dir]);
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap();
    let mut seen = Vec::new();
    for item in manifest.as_array().unwrap() {
        let name = item["name"].as_str().unwrap();
        let ty = GgmlType::from_name(item["type"].as_str().unwrap()).unwrap();
        let data = std::fs::read(dir.join(format!("{name}.bin"))).unwrap();
        let want = read_f32s(&dir.join(format!("{name}.f32")));
        let mut got = vec![0f32; want.len()];
        dequantize(ty, &data, &mut got).unwrap();
        assert_bits_eq(name, &got, &want);
        seen.push(ty);
    }
    for ty in [GgmlType::Q4_1, GgmlType::Q8_0, GgmlType::F32] {
        assert!(seen.contains(&ty), "model tensors covered no {ty}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
