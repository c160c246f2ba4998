//! Our Q4_K / Q5_K / Q6_K quantizers against the reference one, llama.cpp's `llama-quantize`
//! (`--pure`, no importance matrix), on real weights: the error of ours must be no worse.
//!
//! Input: the F16 copy of the default model (SmolLM2-135M-Instruct, made from its Q4_1 file by
//! llama-quantize). Most of its matrices have rows of 576 elements, not a multiple of the
//! K-quants' 256-element super-block, so llama-quantize would fall back to Q5_0/Q5_1/Q8_0 for
//! them. The test therefore writes a subset of the tensors into a GGUF of its own with each
//! matrix's elements unchanged and in the same order but regrouped into rows of a multiple of
//! 256 (768; ffn_down's 1536-element rows are kept as they are). Both quantizers then see the
//! same 256-element blocks: consecutive real weights. llama-quantize makes each K type from
//! that file; we quantize the same f32 values with `torchnative_quant::quantize`; both are
//! dequantized and compared with the F16 source.
//!
//! All derived files are cached under `$TORCHNATIVE_HOME/models/derived/`. Without llama.cpp
//! the test prints `skipped:` unless `TORCHNATIVE_REQUIRE_LLAMA_CPP=1`.
mod common;

use std::path::{Path, PathBuf};

use torchnative_formats::gguf::{write_gguf, GgufFile, MetadataValue, TensorToWrite};
use torchnative_quant::{dequantize, quantize, GgmlType};

/// Allowed excess of our squared error over llama-quantize's, per type and per tensor.
const EPSILON: f64 = 0.01;

/// Layers whose matrices are compared (first, middle, last), plus the token embedding.
const LAYERS: [usize; 3] = [0, 15, 29];
const MATRICES: [&str; 7] = [
    "attn_q",
    "attn_k",
    "attn_v",
    "attn_output",
    "ffn_gate",
    "ffn_up",
    "ffn_down",
];

fn tensor_names() -> Vec<String> {
    let mut names = vec!["token_embd.weight".to_string()];
    for l in LAYERS {
        for m in MATRICES {
            names.push(format!("blk.{l}.{m}.weight"));
        }
    }
    names
}

fn to_f32(ty: GgmlType, data: &[u8], n: usize) -> Vec<f32> {
    let mut out = vec![0f32; n];
    dequantize(ty, data, &mut out).unwrap_or_else(|e| panic!("dequantize {ty}: {e}"));
    out
}

/// Row length of the regrouped matrix: the original when already a multiple of 256, else the
/// smallest multiple of 256 at least as long that divides the element count.
fn row_256(ne0: u64, n: u64) -> u64 {
    if ne0 % 256 == 0 {
        return ne0;
    }
    (1..)
        .map(|k| 256 * k)
        .find(|&r| r >= ne0 && n % r == 0)
        .unwrap()
}

/// The subset file with rows regrouped to multiples of 256 (all metadata kept, so
/// llama-quantize loads it as the same llama model).
fn rows256_file(f16: &Path) -> PathBuf {
    let stem = f16.file_stem().unwrap().to_string_lossy().to_string();
    let dst = common::derived_dir().join(format!("{stem}.kquant-subset-rows256.gguf"));
    common::cached(&dst, |tmp| {
        let src = GgufFile::open(f16).unwrap();
        let names = tensor_names();
        let tensors: Vec<TensorToWrite<'_>> = names
            .iter()
            .map(|name| {
                let t = src
                    .tensor(name)
                    .unwrap_or_else(|| panic!("{name} missing from {}", f16.display()));
                assert_eq!(t.ggml_type, GgmlType::F16, "{name}");
                let n = t.n_elements();
                let row = row_256(t.dims[0], n);
                TensorToWrite {
                    name: name.clone(),
                    dims: vec![row, n / row],
                    ggml_type: GgmlType::F16,
                    data: src.tensor_data(t),
                }
            })
            .collect();
        let metadata: Vec<(String, MetadataValue)> = src.metadata().to_vec();
        write_gguf(tmp, &metadata, &tensors).unwrap();
    })
}

struct Row {
    name: String,
    elements: usize,
    /// max |x| / rms(x) of the source: how far its largest weight sticks out.
    outlier: f64,
    ours_sq: f64,
    ref_sq: f64,
    ours_max: f32,
    ref_max: f32,
}

fn sq_and_max(x: &[f32], y: &[f32]) -> (f64, f32) {
    x.iter().zip(y).fold((0f64, 0f32), |(s, m), (a, b)| {
        let d = a - b;
        (s + f64::from(d) * f64::from(d), m.max(d.abs()))
    })
}

#[test]
fn k_quants_no_worse_than_llama_quantize_on_smollm2() {
    let Some(bin) = common::llama_cpp_bin() else {
        return;
    };
    let Some(model) = common::model_path() else {
        return;
    };
    let f16 = common::derived_f16(&bin, &model);
    let subset = rows256_file(&f16);
    let src = GgufFile::open(&subset).unwrap();
    let sources: Vec<(String, Vec<f32>)> = tensor_names()
        .into_iter()
        .map(|name| {
            let t = src.tensor(&name).unwrap();
            let x = to_f32(GgmlType::F16, src.tensor_data(t), t.n_elements() as usize);
            (name, x)
        })
        .collect();

    let mut failures = Vec::new();
    for (ty, ftype) in [
        (GgmlType::Q4_K, "Q4_K"),
        (GgmlType::Q5_K, "Q5_K"),
        (GgmlType::Q6_K, "Q6_K"),
    ] {
        let stem = subset.file_stem().unwrap().to_string_lossy().to_string();
        let reference = common::cached(
            &common::derived_dir().join(format!("{stem}.{ftype}-pure.gguf")),
            |tmp| {
                common::llama_quantize(
                    &bin,
                    &[
                        "--pure".as_ref(),
                        subset.as_os_str(),
                        tmp.as_os_str(),
                        ftype.as_ref(),
                        "2".as_ref(),
                    ],
                )
            },
        );
        let reference = GgufFile::open(&reference).unwrap();
        let mut rows = Vec::new();
        for (name, x) in &sources {
            let t = reference.tensor(name).unwrap();
            assert_eq!(
                t.ggml_type, ty,
                "llama-quantize made {name} {}",
                t.ggml_type
            );
            let theirs = to_f32(ty, reference.tensor_data(t), x.len());
            let mut packed = vec![0u8; x.len() / ty.block_size() * ty.type_size()];
            quantize(ty, x, &mut packed).unwrap();
            let ours = to_f32(ty, &packed, x.len());
            let (ours_sq, ours_max) = sq_and_max(x, &ours);
            let (ref_sq, ref_max) = sq_and_max(x, &theirs);
            let sum_sq: f64 = x.iter().map(|&v| f64::from(v) * f64::from(v)).sum();
            let amax = x.iter().fold(0f32, |m, v| m.max(v.abs()));
            rows.push(Row {
                name: name.clone(),
                elements: x.len(),
                outlier: f64::from(amax) / (sum_sq / x.len() as f64).sqrt(),
                ours_sq,
                ref_sq,
                ours_max,
                ref_max,
            });
        }
        println!("{ftype}: tensor, elements, max|x|/rms(x), RMS ours, RMS llama.cpp, ratio, max err ours, max err llama.cpp");
        for r in &rows {
            let n = r.elements as f64;
            println!(
                "  {:<24} {:>9} {:>6.1} {:.4e} {:.4e} {:.4} {:.3e} {:.3e}",
                r.name,
                r.elements,
                r.outlier,
                (r.ours_sq / n).sqrt(),
                (r.ref_sq / n).sqrt(),
                (r.ours_sq / r.ref_sq).sqrt(),
                r.ours_max,
                r.ref_max
            );
        }
        for r in rows
            .iter()
            .filter(|r| r.ours_sq > r.ref_sq * (1.0 + EPSILON))
        {
            failures.push(format!(
                "{ftype} {}: our squared error {:.6e} vs llama-quantize's {:.6e}",
                r.name, r.ours_sq, r.ref_sq
            ));
        }
        let n: f64 = rows.iter().map(|r| r.elements as f64).sum();
        let ours: f64 = rows.iter().map(|r| r.ours_sq).sum();
        let theirs: f64 = rows.iter().map(|r| r.ref_sq).sum();
        println!(
            "{ftype} total: RMS ours {:.4e}, llama.cpp {:.4e}, squared-error ratio {:.4}",
            (ours / n).sqrt(),
            (theirs / n).sqrt(),
            ours / theirs
        );
        if ours > theirs * (1.0 + EPSILON) {
            failures.push(format!(
                "{ftype} total: our squared error {ours:.6e} vs llama-quantize's {theirs:.6e}"
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "our error exceeds llama-quantize's by more than {}%:\n{}",
        EPSILON * 100.0,
        failures.join("\n")
    );
}
