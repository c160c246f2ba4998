//! Malformed-file tests; files are assembled by hand from header JSON and data bytes.
use super::*;

fn file(header: &str, data_len: usize) -> Vec<u8> {
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(header.as_bytes());
    out.extend((0..data_len).map(|i| i as u8));
    out
}

fn err(bytes: Vec<u8>) -> String {
    match SafetensorsFile::from_bytes(bytes) {
        Ok(f) => panic!("expected an error, parsed {f:?}"),
        Err(e) => e.to_string(),
    }
}

fn assert_err(bytes: Vec<u8>, needles: &[&str]) {
    let msg = err(bytes);
    for n in needles {
        assert!(msg.contains(n), "{msg:?} should mention {n:?}");
    }
}

const VALID: &str = r#"{"__metadata__":{"format":"pt"},
    "b":{"dtype":"BF16","shape":[2,3],"data_offsets":[8,20]},
    "a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},
    "m":{"dtype":"BOOL","shape":[4],"data_offsets":[20,24]}}"#;

#[test]
fn valid_file_parses_with_zero_copy_views() {
    let f = SafetensorsFile::from_bytes(file(VALID, 24)).unwrap();
    assert_eq!(f.metadata(), &[("format".to_string(), "pt".to_string())]);
    let a = f.tensor("a").unwrap();
    assert_eq!(
        (a.dtype, a.shape, a.data),
        (Dtype::F32, &[2usize][..], &[0u8, 1, 2, 3, 4, 5, 6, 7][..])
    );
    let b = f.tensor("b").unwrap();
    assert_eq!(
        (b.dtype, b.shape, b.data.len(), b.data[0]),
        (Dtype::BF16, &[2usize, 3][..], 12, 8)
    );
    assert_eq!(f.tensor("m").unwrap().data, &[20, 21, 22, 23]);
    let order: Vec<_> = f.entries().iter().map(|e| e.name.as_str()).collect();
    assert_eq!(order, ["a", "b", "m"], "entries in data order");
    assert!(f.tensor("zz").is_none());
}

#[test]
fn every_truncation_is_an_error() {
    let bytes = file(VALID, 24);
    for len in 0..bytes.len() {
        assert!(
            SafetensorsFile::from_bytes(bytes[..len].to_vec()).is_err(),
            "truncated to {len}"
        );
    }
}

#[test]
fn header_length_is_bounded() {
    let mut bytes = file(VALID, 24);
    bytes[..8].copy_from_slice(&u64::MAX.to_le_bytes());
    assert_err(bytes, &["header length 18446744073709551615", "exceeds"]);
    let mut bytes = file(VALID, 24);
    bytes[..8].copy_from_slice(&(MAX_HEADER_BYTES + 1).to_le_bytes());
    assert_err(bytes, &["header length 100000001"]);
}

#[test]
fn lying_offsets_and_sizes_are_refused() {
    let h = r#"{"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}"#;
    assert_err(
        file(h, 8),
        &["'w'", "data_offsets [0, 16]", "outside the 8 data bytes"],
    );
    let h = r#"{"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}"#;
    assert_err(file(h, 8), &["'w'", "needs 12 bytes", "hold 8"]);
    let h = r#"{"w":{"dtype":"F32","shape":[4],"data_offsets":[8,0]}}"#;
    assert_err(file(h, 8), &["'w'", "data_offsets [8, 0]"]);
    let h = r#"{"w":{"dtype":"F64","shape":[4294967296,4294967296,16],"data_offsets":[0,8]}}"#;
    assert_err(file(h, 8), &["'w'", "more than 2^64"]);
    let h = r#"{"w":{"dtype":"U8","shape":[-1],"data_offsets":[0,8]}}"#;
    assert_err(file(h, 8), &["'w'"]);
    let h = r#"{"a":{"dtype":"U8","shape":[6],"data_offsets":[0,6]},
               "b":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}}"#;
    assert_err(file(h, 8), &["'b'", "overlaps tensor 'a'"]);
}

#[test]
fn bad_headers_are_refused() {
    let h = r#"{"w":{"dtype":"F8_E4M3","shape":[1],"data_offsets":[0,1]}}"#;
    assert_err(file(h, 1), &["'w'", "F8_E4M3", "supported: BOOL"]);
    let h = r#"{"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}"#;
    assert_err(file(h, 1), &["\"w\" appears more than once"]);
    let h = r#"{"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"extra":1}}"#;
    assert_err(file(h, 1), &["'w'", "extra"]);
    assert_err(file("[1,2]", 0), &["JSON object"]);
    assert_err(file("{\"w\":", 0), &["JSON"]);
    let h = r#"{"__metadata__":{"k":1}}"#;
    assert_err(file(h, 0), &["__metadata__"]);
}

#[test]
fn index_refuses_duplicates_and_escaping_paths() {
    let dup = r#"{"weight_map":{"a":"s1.safetensors","a":"s2.safetensors"}}"#;
    assert!(parse_index(dup)
        .unwrap_err()
        .to_string()
        .contains("\"a\" appears more than once"));
    for bad in [
        "../x.safetensors",
        "/abs.safetensors",
        "sub/x.safetensors",
        "..",
    ] {
        let text = format!(r#"{{"weight_map":{{"a":"{bad}"}}}}"#);
        let msg = parse_index(&text).unwrap_err().to_string();
        assert!(msg.contains("not a plain file name"), "{bad}: {msg}");
    }
    let ok =
        parse_index(r#"{"metadata":{"total_size":8},"weight_map":{"a":"s1","b":"s2"}}"#).unwrap();
    assert_eq!(
        ok.weight_map,
        [("a".into(), "s1".into()), ("b".into(), "s2".into())]
    );
}

#[test]
fn coverage_reports_missing_and_unexpected_together() {
    let expected = vec!["a".to_string(), "b".to_string(), "c".to_string()];
    let msg = check_coverage("idx", &expected, ["a", "x", "y"])
        .unwrap_err()
        .to_string();
    assert!(msg.contains("2 missing tensor(s) [b, c]"), "{msg}");
    assert!(msg.contains("2 unexpected tensor(s) [x, y]"), "{msg}");
    assert!(check_coverage("idx", &expected, ["c", "b", "a"]).is_ok());
}

#[test]
fn sharded_checkpoint_is_checked_against_its_shards() {
    let dir = std::env::temp_dir().join(format!("tn-formats-shards-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let s1 = r#"{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}"#;
    let s2 = r#"{"b":{"dtype":"U8","shape":[3],"data_offsets":[0,3]},"c":{"dtype":"U8","shape":[1],"data_offsets":[3,4]}}"#;
    std::fs::write(dir.join("s1.safetensors"), file(s1, 2)).unwrap();
    std::fs::write(dir.join("s2.safetensors"), file(s2, 4)).unwrap();
    let write_index = |map: &str| {
        std::fs::write(
            dir.join(INDEX_FILE),
            format!(r#"{{"weight_map":{{{map}}}}}"#),
        )
        .unwrap()
    };
    write_index(r#""a":"s1.safetensors","b":"s2.safetensors","c":"s2.safetensors""#);
    let expected: Vec<String> = ["a", "b", "c"].map(String::from).to_vec();
    let model = SafetensorsModel::open_dir(&dir, Some(&expected)).unwrap();
    assert_eq!(model.tensor_names(), ["a", "b", "c"]);
    assert_eq!(model.tensor("b").unwrap().data, &[0, 1, 2]);
    assert_eq!(model.tensor("c").unwrap().data, &[3]);

    // The index misses 'c' and names 'z': both reported before any shard is opened.
    write_index(r#""a":"s1.safetensors","b":"s2.safetensors","z":"nowhere.safetensors""#);
    let msg = SafetensorsModel::open_dir(&dir, Some(&expected))
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("missing tensor(s) [c]") && msg.contains("unexpected tensor(s) [z]"),
        "{msg}"
    );

    // The index puts 'c' in the wrong shard.
    write_index(r#""a":"s1.safetensors","b":"s2.safetensors","c":"s1.safetensors""#);
    let msg = SafetensorsModel::open_dir(&dir, Some(&expected))
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("s1.safetensors") && msg.contains("missing tensor(s) [c]"),
        "{msg}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
