//! Malformed-file tests: each builds a file byte by byte (independently of the writer) with
//! one lie in it and checks the reader refuses it with a message naming the problem.
use super::*;

/// Hand-assembles GGUF bytes so tests can put any value in any field.
#[derive(Default)]
struct Raw {
    version: Option<u32>,
    n_tensors: Option<u64>,
    n_kv: Option<u64>,
    kv: Vec<u8>,
    kv_count: u64,
    dir: Vec<u8>,
    dir_count: u64,
    data: Vec<u8>,
    alignment: Option<u64>,
}

fn push_str(out: &mut Vec<u8>, s: &[u8]) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s);
}

impl Raw {
    fn kv(mut self, key: &str, type_id: u32, value: &[u8]) -> Self {
        push_str(&mut self.kv, key.as_bytes());
        self.kv.extend_from_slice(&type_id.to_le_bytes());
        self.kv.extend_from_slice(value);
        self.kv_count += 1;
        self
    }

    fn tensor(mut self, name: &str, dims: &[u64], type_id: u32, offset: u64) -> Self {
        push_str(&mut self.dir, name.as_bytes());
        self.dir
            .extend_from_slice(&(dims.len() as u32).to_le_bytes());
        for d in dims {
            self.dir.extend_from_slice(&d.to_le_bytes());
        }
        self.dir.extend_from_slice(&type_id.to_le_bytes());
        self.dir.extend_from_slice(&offset.to_le_bytes());
        self.dir_count += 1;
        self
    }

    fn data(mut self, n: usize) -> Self {
        self.data = (0..n).map(|i| i as u8).collect();
        self
    }

    fn bytes(&self) -> Vec<u8> {
        let mut out = b"GGUF".to_vec();
        out.extend_from_slice(&self.version.unwrap_or(3).to_le_bytes());
        out.extend_from_slice(&self.n_tensors.unwrap_or(self.dir_count).to_le_bytes());
        out.extend_from_slice(&self.n_kv.unwrap_or(self.kv_count).to_le_bytes());
        out.extend_from_slice(&self.kv);
        out.extend_from_slice(&self.dir);
        let align = self.alignment.unwrap_or(32) as usize;
        out.resize(out.len().next_multiple_of(align), 0);
        out.extend_from_slice(&self.data);
        out
    }
}

fn u32v(v: u32) -> Vec<u8> {
    v.to_le_bytes().to_vec()
}

/// A small valid file: two metadata entries and two F32 tensors filling the data exactly.
fn valid() -> Raw {
    let mut s = Vec::new();
    push_str(&mut s, b"llama");
    Raw::default()
        .kv("general.architecture", 8, &s)
        .kv("llama.block_count", 4, &u32v(2))
        .tensor("a", &[4, 2], 0, 0)
        .tensor("b", &[8], 0, 32)
        .data(64)
}

fn err_of(bytes: Vec<u8>) -> String {
    match GgufFile::from_bytes(bytes) {
        Ok(f) => panic!("expected an error, parsed {f:?}"),
        Err(e) => e.to_string(),
    }
}

fn assert_err_contains(bytes: Vec<u8>, needles: &[&str]) {
    let msg = err_of(bytes);
    for n in needles {
        assert!(msg.contains(n), "error {msg:?} should mention {n:?}");
    }
}

#[test]
fn valid_raw_file_parses() {
    let f = GgufFile::from_bytes(valid().bytes()).unwrap();
    assert_eq!(f.version(), 3);
    assert_eq!(f.get("llama.block_count"), Some(&MetadataValue::U32(2)));
    assert_eq!(
        f.get("general.architecture").and_then(|v| v.as_str()),
        Some("llama")
    );
    let a = f.tensor("a").unwrap();
    assert_eq!(
        (a.dims.as_slice(), a.n_bytes, a.offset),
        (&[4u64, 2][..], 32, 0)
    );
    assert_eq!(f.tensor_data(a), &(0..32).collect::<Vec<u8>>()[..]);
    let b = f.tensor("b").unwrap();
    assert_eq!(f.tensor_data(b), &(32..64).collect::<Vec<u8>>()[..]);
    assert_eq!(f.tensors()[0].name, "a", "file order kept");
}

#[test]
fn every_truncation_is_an_error() {
    let bytes = valid().bytes();
    for len in 0..bytes.len() {
        let r = GgufFile::from_bytes(bytes[..len].to_vec());
        assert!(
            r.is_err(),
            "truncated to {len} of {} bytes parsed",
            bytes.len()
        );
    }
}

#[test]
fn version_2_parses_like_3() {
    let mut raw = valid();
    raw.version = Some(2);
    let f = GgufFile::from_bytes(raw.bytes()).unwrap();
    assert_eq!(f.version(), 2);
    assert_eq!(f.tensors().len(), 2);
}

#[test]
fn v1_and_unknown_versions_are_refused_by_name() {
    let mut raw = valid();
    raw.version = Some(1);
    assert_err_contains(raw.bytes(), &["version 1"]);
    raw.version = Some(7);
    assert_err_contains(raw.bytes(), &["version 7"]);
    raw.version = Some(3u32.swap_bytes());
    assert_err_contains(raw.bytes(), &["big-endian"]);
}

#[test]
fn bad_magic_is_refused() {
    let mut bytes = valid().bytes();
    bytes[0] = b'X';
    assert_err_contains(bytes, &["magic"]);
}

#[test]
fn lying_counts_are_refused_before_allocating() {
    let mut raw = valid();
    raw.n_kv = Some(u64::MAX);
    assert_err_contains(raw.bytes(), &["metadata count", &u64::MAX.to_string()]);
    let mut raw = valid();
    raw.n_kv = Some(3);
    assert!(GgufFile::from_bytes(raw.bytes()).is_err());
    let mut raw = valid();
    raw.n_tensors = Some(1 << 40);
    assert_err_contains(raw.bytes(), &["tensor count"]);
    let mut raw = valid();
    raw.n_tensors = Some(3);
    assert!(GgufFile::from_bytes(raw.bytes()).is_err());
}

#[test]
fn lying_string_lengths_are_refused() {
    let mut s = Vec::new();
    s.extend_from_slice(&(1u64 << 50).to_le_bytes());
    s.extend_from_slice(b"abc");
    let raw = Raw::default().kv("general.name", 8, &s);
    assert_err_contains(
        raw.bytes(),
        &["general.name", "string length 1125899906842624"],
    );
    // A key whose length lies.
    let mut bytes = Raw::default().kv("k", 4, &u32v(1)).bytes();
    bytes[24..32].copy_from_slice(&u64::MAX.to_le_bytes());
    assert_err_contains(bytes, &["metadata entry 0 key", "string length"]);
}

#[test]
fn lying_array_lengths_are_refused() {
    let mut v = u32v(5); // i32 elements
    v.extend_from_slice(&(u64::MAX / 2).to_le_bytes());
    v.extend_from_slice(&[0; 8]);
    assert_err_contains(
        Raw::default().kv("arr", 9, &v).bytes(),
        &["'arr' array length"],
    );
    // Arrays of strings: each element needs at least its 8-byte length.
    let mut v = u32v(8);
    v.extend_from_slice(&100u64.to_le_bytes());
    push_str(&mut v, b"x");
    push_str(&mut v, b"y");
    assert_err_contains(
        Raw::default().kv("toks", 9, &v).bytes(),
        &["'toks' array length"],
    );
    // A count that fits the bytes but whose elements run past the end.
    let mut v = u32v(8);
    v.extend_from_slice(&2u64.to_le_bytes());
    push_str(&mut v, b"x");
    v.extend_from_slice(&9u64.to_le_bytes());
    let raw = Raw::default().kv("toks", 9, &v);
    let mut bytes = raw.bytes();
    bytes.truncate(24 + raw.kv.len()); // drop the padding so the 9 claimed bytes are missing
    assert_err_contains(bytes, &["'toks'[1]", "string length 9 exceeds the 0 bytes"]);
}

#[test]
fn nested_arrays_parse_and_depth_is_bounded() {
    // [[1u8, 2u8], [3u8]]
    let mut v = u32v(9);
    v.extend_from_slice(&2u64.to_le_bytes());
    v.extend_from_slice(&u32v(0));
    v.extend_from_slice(&2u64.to_le_bytes());
    v.extend_from_slice(&[1, 2]);
    v.extend_from_slice(&u32v(0));
    v.extend_from_slice(&1u64.to_le_bytes());
    v.push(3);
    let f = GgufFile::from_bytes(Raw::default().kv("nested", 9, &v).bytes()).unwrap();
    use MetadataValue::{Array, U8};
    assert_eq!(
        f.get("nested"),
        Some(&Array(vec![Array(vec![U8(1), U8(2)]), Array(vec![U8(3)])]))
    );

    let mut deep = Vec::new();
    for _ in 0..MAX_ARRAY_DEPTH + 1 {
        deep.extend_from_slice(&u32v(9));
        deep.extend_from_slice(&1u64.to_le_bytes());
    }
    deep.extend_from_slice(&u32v(0));
    deep.extend_from_slice(&1u64.to_le_bytes());
    deep.push(0);
    assert_err_contains(
        Raw::default().kv("deep", 9, &deep).bytes(),
        &["nested deeper"],
    );
}

#[test]
fn every_scalar_type_parses() {
    let raw = Raw::default()
        .kv("u8", 0, &[200])
        .kv("i8", 1, &[0xff])
        .kv("u16", 2, &60000u16.to_le_bytes())
        .kv("i16", 3, &(-2i16).to_le_bytes())
        .kv("u32", 4, &u32v(4_000_000_000))
        .kv("i32", 5, &(-3i32).to_le_bytes())
        .kv("f32", 6, &1.5f32.to_le_bytes())
        .kv("bool", 7, &[1])
        .kv("u64", 10, &u64::MAX.to_le_bytes())
        .kv("i64", 11, &i64::MIN.to_le_bytes())
        .kv("f64", 12, &(-0.25f64).to_le_bytes());
    let f = GgufFile::from_bytes(raw.bytes()).unwrap();
    use MetadataValue as V;
    let expected = [
        V::U8(200),
        V::I8(-1),
        V::U16(60000),
        V::I16(-2),
        V::U32(4_000_000_000),
        V::I32(-3),
        V::F32(1.5),
        V::Bool(true),
        V::U64(u64::MAX),
        V::I64(i64::MIN),
        V::F64(-0.25),
    ];
    let got: Vec<_> = f.metadata().iter().map(|(_, v)| v.clone()).collect();
    assert_eq!(got, expected);
}

#[test]
fn bad_values_are_refused() {
    assert_err_contains(
        Raw::default().kv("b", 7, &[2]).bytes(),
        &["'b'", "bool byte is 2"],
    );
    assert_err_contains(
        Raw::default().kv("t", 13, &[0; 8]).bytes(),
        &["'t'", "type id 13"],
    );
    let mut s = Vec::new();
    push_str(&mut s, &[0x66, 0xff, 0x66]);
    assert_err_contains(Raw::default().kv("s", 8, &s).bytes(), &["'s'", "UTF-8"]);
}

#[test]
fn duplicates_are_refused() {
    let raw = Raw::default().kv("k", 4, &u32v(1)).kv("k", 4, &u32v(2));
    assert_err_contains(raw.bytes(), &["metadata key 'k'", "more than once"]);
    let raw = Raw::default()
        .tensor("w", &[8], 0, 0)
        .tensor("w", &[8], 0, 32)
        .data(64);
    assert_err_contains(raw.bytes(), &["tensor name 'w'", "more than once"]);
}

#[test]
fn tensor_outside_file_is_refused() {
    let raw = Raw::default()
        .tensor("blk.0.attn_q.weight", &[8], 0, 64)
        .data(64);
    let bytes = raw.bytes();
    let data_start = bytes.len() - 64;
    let msg = err_of(bytes.clone());
    let want = format!(
        "tensor 'blk.0.attn_q.weight': data ends at byte {} but the file has {} bytes",
        data_start + 64 + 32,
        bytes.len()
    );
    assert!(msg.contains(&want), "{msg}");
    // Offsets that overflow when added to the data start.
    let raw = Raw::default().tensor("w", &[8], 0, u64::MAX - 31).data(64);
    assert_err_contains(raw.bytes(), &["'w'", "data ends at byte"]);
}

#[test]
fn misaligned_and_overlapping_tensors_are_refused() {
    let raw = Raw::default().tensor("w", &[8], 0, 4).data(64);
    assert_err_contains(raw.bytes(), &["'w'", "offset 4", "alignment 32"]);
    let raw = Raw::default()
        .tensor("a", &[16], 0, 0)
        .tensor("b", &[8], 0, 32)
        .data(96);
    assert_err_contains(raw.bytes(), &["'b'", "inside tensor 'a'"]);
}

#[test]
fn alignment_is_validated_and_used() {
    let raw = Raw::default().kv("general.alignment", 4, &u32v(48));
    assert_err_contains(raw.bytes(), &["general.alignment", "power of two"]);
    // A huge alignment in a file without tensors parsed, then made a rewrite pad 1 GiB (fuzzer).
    let raw = Raw::default().kv("general.alignment", 4, &u32v(1 << 30));
    assert_err_contains(raw.bytes(), &["general.alignment", "1048576"]);
    let mut raw = Raw::default()
        .kv("general.alignment", 4, &u32v(64))
        .tensor("w", &[8], 0, 0)
        .data(32);
    raw.alignment = Some(64);
    let f = GgufFile::from_bytes(raw.bytes()).unwrap();
    assert_eq!(f.alignment(), 64);
    assert_eq!(f.data_start() % 64, 0);
    let mut raw = Raw::default()
        .kv("general.alignment", 4, &u32v(64))
        .tensor("w", &[8], 0, 32)
        .data(64);
    raw.alignment = Some(64);
    assert_err_contains(raw.bytes(), &["offset 32", "alignment 64"]);
}

#[test]
fn bad_dims_and_types_are_refused() {
    let raw = Raw::default().tensor("big", &[u64::MAX, 2], 0, 0).data(32);
    assert_err_contains(raw.bytes(), &["'big'", "overflow"]);
    let raw = Raw::default()
        .tensor("big", &[1 << 40, 1 << 30], 0, 0)
        .data(32);
    assert_err_contains(raw.bytes(), &["'big'", "overflow"]);
    // Q4_1 rows must hold whole 32-element blocks.
    let raw = Raw::default().tensor("q", &[48, 2], 3, 0).data(64);
    assert_err_contains(raw.bytes(), &["'q'", "dim 0 is 48", "Q4_1", "32"]);
    let raw = Raw::default().tensor("q", &[32], 4, 0).data(32);
    assert_err_contains(raw.bytes(), &["'q'", "unknown ggml type id 4"]);
    let raw = Raw::default().tensor("q", &[1, 1, 1, 1, 1], 0, 0).data(32);
    assert_err_contains(raw.bytes(), &["'q'", "5 dimensions"]);
}

#[test]
fn quantized_sizes_follow_the_block_layout() {
    // Q8_0: 34 bytes per 32 elements; 64x3 -> 2 blocks per row, 3 rows = 204 bytes.
    let raw = Raw::default().tensor("q", &[64, 3], 8, 0).data(224);
    let f = GgufFile::from_bytes(raw.bytes()).unwrap();
    assert_eq!(f.tensor("q").unwrap().n_bytes, 204);
    assert_eq!(f.tensor_data(f.tensor("q").unwrap()).len(), 204);
}

#[test]
fn writer_round_trips_through_reader() {
    use MetadataValue as V;
    let metadata = vec![
        (
            "general.architecture".to_string(),
            V::String("llama".into()),
        ),
        ("general.alignment".to_string(), V::U32(64)),
        ("x.list".to_string(), V::Array(vec![V::I32(1), V::I32(-2)])),
        ("x.empty".to_string(), V::Array(vec![])),
        (
            "x.nested".to_string(),
            V::Array(vec![V::Array(vec![V::F64(0.5)])]),
        ),
    ];
    let q = vec![7u8; 40];
    let f = vec![1u8; 12];
    let tensors = vec![
        TensorToWrite {
            name: "q".into(),
            dims: vec![32, 2],
            ggml_type: GgmlType::Q4_1,
            data: &q,
        },
        TensorToWrite {
            name: "f".into(),
            dims: vec![3],
            ggml_type: GgmlType::F32,
            data: &f,
        },
    ];
    let file = GgufFile::from_bytes(gguf_bytes(&metadata, &tensors).unwrap()).unwrap();
    assert_eq!(file.metadata(), &metadata[..]);
    assert_eq!(file.alignment(), 64);
    assert_eq!(file.tensor_data(file.tensor("q").unwrap()), &q[..]);
    assert_eq!(file.tensor_data(file.tensor("f").unwrap()), &f[..]);
    assert_eq!(file.tensor("f").unwrap().offset, 64);

    let short = [0u8; 3];
    let bad = [TensorToWrite {
        name: "f".into(),
        dims: vec![3],
        ggml_type: GgmlType::F32,
        data: &short,
    }];
    let msg = gguf_bytes(&[], &bad).unwrap_err().to_string();
    assert!(
        msg.contains("'f'") && msg.contains("3 bytes") && msg.contains("need 12"),
        "{msg}"
    );
    let mixed = [("m".to_string(), V::Array(vec![V::U8(1), V::I8(1)]))];
    assert!(
        gguf_bytes(&mixed, &[]).is_err(),
        "heterogeneous arrays cannot be encoded"
    );
}

#[test]
fn parsed_files_can_be_shared_across_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<GgufFile>();
    assert_send_sync::<crate::safetensors::SafetensorsFile>();
    assert_send_sync::<crate::safetensors::SafetensorsModel>();
}
