//! The GGUF reader and writer against the `gguf` Python package (the reference reader).
mod common;

use std::path::Path;

use serde_json::Value as Json;
use torchnative_formats::gguf::{write_gguf, GgufFile, MetadataValue, TensorToWrite};
use torchnative_quant::GgmlType;

/// The `gguf` package's name for a value type (`GGUFValueType`).
fn gguf_type_name(v: &MetadataValue) -> &'static str {
    use MetadataValue as V;
    match v {
        V::U8(_) => "UINT8",
        V::I8(_) => "INT8",
        V::U16(_) => "UINT16",
        V::I16(_) => "INT16",
        V::U32(_) => "UINT32",
        V::I32(_) => "INT32",
        V::U64(_) => "UINT64",
        V::I64(_) => "INT64",
        V::F32(_) => "FLOAT32",
        V::F64(_) => "FLOAT64",
        V::Bool(_) => "BOOL",
        V::String(_) => "STRING",
        V::Array(_) => "ARRAY",
    }
}

/// Types as `ReaderField.types` lists them: the outer type, then (for arrays) the first
/// element's types.
fn type_list(v: &MetadataValue, out: &mut Vec<String>) {
    out.push(gguf_type_name(v).to_string());
    if let Some(first) = v.as_array().and_then(|a| a.first()) {
        type_list(first, out);
    }
}

/// Leaves of nested arrays in order, as `ReaderField.contents()` flattens them.
fn leaves<'a>(v: &'a MetadataValue, out: &mut Vec<&'a MetadataValue>) {
    match v.as_array() {
        Some(items) => items.iter().for_each(|i| leaves(i, out)),
        None => out.push(v),
    }
}

fn scalar_matches(v: &MetadataValue, j: &Json) -> bool {
    use MetadataValue as V;
    match v {
        V::F32(x) => j.as_f64() == Some(f64::from(*x)),
        V::F64(x) => j.as_f64() == Some(*x),
        V::Bool(b) => j.as_bool() == Some(*b),
        V::String(s) => j.as_str() == Some(s.as_str()),
        V::Array(_) => false,
        _ => match (v.as_i64(), v.as_u64()) {
            (Some(i), _) if j.as_i64() == Some(i) => true,
            (_, Some(u)) => j.as_u64() == Some(u),
            _ => false,
        },
    }
}

fn assert_matches_dump(file: &GgufFile, dump: &Json, with_data: bool) {
    assert_eq!(Some(u64::from(file.version())), dump["version"].as_u64());
    assert_eq!(Some(file.alignment()), dump["alignment"].as_u64());

    let meta = dump["metadata"].as_array().expect("metadata list");
    assert_eq!(file.metadata().len(), meta.len(), "metadata count");
    for ((key, value), entry) in file.metadata().iter().zip(meta) {
        assert_eq!(Some(key.as_str()), entry[0].as_str(), "metadata order");
        let mut types = Vec::new();
        type_list(value, &mut types);
        let want: Vec<String> = serde_json::from_value(entry[1].clone()).unwrap();
        assert_eq!(types, want, "types of '{key}'");
        match value {
            MetadataValue::Array(_) => {
                let mut flat = Vec::new();
                leaves(value, &mut flat);
                let want = entry[2].as_array().expect("array contents");
                assert_eq!(flat.len(), want.len(), "length of '{key}'");
                for (i, (v, j)) in flat.iter().zip(want).enumerate() {
                    assert!(scalar_matches(v, j), "'{key}'[{i}]: ours {v:?}, gguf {j}");
                }
            }
            _ => assert!(
                scalar_matches(value, &entry[2]),
                "'{key}': ours {value:?}, gguf {}",
                entry[2]
            ),
        }
    }

    let tensors = dump["tensors"].as_array().expect("tensor list");
    assert_eq!(file.tensors().len(), tensors.len(), "tensor count");
    for (t, j) in file.tensors().iter().zip(tensors) {
        assert_eq!(Some(t.name.as_str()), j["name"].as_str(), "tensor order");
        let shape: Vec<u64> = serde_json::from_value(j["shape"].clone()).unwrap();
        assert_eq!(t.dims, shape, "dims of {}", t.name);
        assert_eq!(
            Some(t.ggml_type.name()),
            j["type"].as_str(),
            "type of {}",
            t.name
        );
        assert_eq!(
            Some(file.data_start() + t.offset),
            j["data_offset"].as_u64(),
            "offset of {}",
            t.name
        );
        assert_eq!(Some(t.n_bytes), j["n_bytes"].as_u64(), "size of {}", t.name);
        if with_data {
            let hex: String = file
                .tensor_data(t)
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            assert_eq!(Some(hex.as_str()), j["data"].as_str(), "data of {}", t.name);
        }
    }
}

fn dump(python: &Path, file: &Path, with_data: bool) -> Json {
    let data_flag = Path::new("--data");
    let args: Vec<&Path> = if with_data {
        vec![file, data_flag]
    } else {
        vec![file]
    };
    let out = common::run_oracle(python, "gguf_dump.py", &args);
    serde_json::from_str(&out).expect("oracle JSON")
}

#[test]
fn default_model_matches_gguf_package() {
    let (Some(model), Some(python)) = (common::model_path(), common::oracle_python()) else {
        return;
    };
    let file = GgufFile::open(&model).unwrap();
    assert_matches_dump(&file, &dump(&python, &model, false), false);

    // What the runtime relies on, independently of the oracle: the Q4_1 model mixes Q4_1
    // matrices, F32 norms and a Q8_0 embedding, and every tensor slice has its full size.
    let count = |ty| file.tensors().iter().filter(|t| t.ggml_type == ty).count();
    assert!(count(GgmlType::Q4_1) > 0 && count(GgmlType::F32) > 0);
    assert_eq!(
        file.tensor("token_embd.weight").map(|t| t.ggml_type),
        Some(GgmlType::Q8_0)
    );
    for t in file.tensors() {
        assert_eq!(file.tensor_data(t).len() as u64, t.n_bytes, "{}", t.name);
    }
}

#[test]
fn reads_a_file_written_by_gguf_package() {
    let Some(python) = common::oracle_python() else {
        return;
    };
    let dir = common::temp_dir("py-written");
    let path = dir.join("py.gguf");
    common::run_oracle(&python, "gguf_write.py", &[&path]);
    let file = GgufFile::open(&path).unwrap();
    assert_matches_dump(&file, &dump(&python, &path, true), true);
    assert_eq!(file.alignment(), 64);
    assert_eq!(file.get("t.u64"), Some(&MetadataValue::U64((1 << 63) + 5)));
    assert_eq!(file.get("t.f32"), Some(&MetadataValue::F32(0.1)));
    let q = file.tensor("q4_1").unwrap();
    assert_eq!(
        (q.dims.as_slice(), q.ggml_type),
        (&[96u64, 2][..], GgmlType::Q4_1)
    );
}

#[test]
fn written_file_reads_back_identically_in_gguf_package() {
    let Some(python) = common::oracle_python() else {
        return;
    };
    use MetadataValue as V;
    let metadata = vec![
        (
            "general.architecture".to_string(),
            V::String("llama".into()),
        ),
        ("general.alignment".to_string(), V::U32(128)),
        ("t.u8".to_string(), V::U8(255)),
        ("t.i8".to_string(), V::I8(-128)),
        ("t.u16".to_string(), V::U16(65535)),
        ("t.i16".to_string(), V::I16(-32768)),
        ("t.u32".to_string(), V::U32(u32::MAX)),
        ("t.i32".to_string(), V::I32(i32::MIN)),
        ("t.u64".to_string(), V::U64(u64::MAX)),
        ("t.i64".to_string(), V::I64(i64::MIN)),
        ("t.f32".to_string(), V::F32(1e-5)),
        ("t.f64".to_string(), V::F64(std::f64::consts::PI)),
        ("t.bool".to_string(), V::Bool(false)),
        ("t.str".to_string(), V::String("Grüße ✓\n\"q\"".into())),
        (
            "t.strs".to_string(),
            V::Array(vec![V::String("x".into()), V::String(String::new())]),
        ),
        (
            "t.bools".to_string(),
            V::Array(vec![V::Bool(true), V::Bool(false)]),
        ),
        ("t.empty".to_string(), V::Array(vec![])),
        (
            "t.nested".to_string(),
            V::Array(vec![
                V::Array(vec![V::I16(1), V::I16(-2)]),
                V::Array(vec![V::I16(3)]),
            ]),
        ),
    ];
    let f32_data: Vec<u8> = (0..6u32)
        .flat_map(|i| (i as f32 * 0.5).to_le_bytes())
        .collect();
    let q4: Vec<u8> = (0..120u32).map(|i| (i * 37 % 256) as u8).collect();
    let q8: Vec<u8> = (0..34u32).map(|i| (i * 11 % 256) as u8).collect();
    let f16: Vec<u8> = (0..4u32)
        .flat_map(|i| half::f16::from_f32(i as f32).to_le_bytes())
        .collect();
    let tensors = vec![
        TensorToWrite {
            name: "w.f32".into(),
            dims: vec![3, 2],
            ggml_type: GgmlType::F32,
            data: &f32_data,
        },
        TensorToWrite {
            name: "w.q4_1".into(),
            dims: vec![96, 2],
            ggml_type: GgmlType::Q4_1,
            data: &q4,
        },
        TensorToWrite {
            name: "w.q8_0".into(),
            dims: vec![32],
            ggml_type: GgmlType::Q8_0,
            data: &q8,
        },
        TensorToWrite {
            name: "w.f16".into(),
            dims: vec![4, 1, 1],
            ggml_type: GgmlType::F16,
            data: &f16,
        },
    ];
    let dir = common::temp_dir("rs-written");
    let path = dir.join("rs.gguf");
    write_gguf(&path, &metadata, &tensors).unwrap();
    let file = GgufFile::open(&path).unwrap();
    assert_eq!(file.metadata(), &metadata[..]);
    for t in &tensors {
        assert_eq!(
            file.tensor_data(file.tensor(&t.name).unwrap()),
            t.data,
            "{}",
            t.name
        );
    }
    assert_matches_dump(&file, &dump(&python, &path, true), true);
}
