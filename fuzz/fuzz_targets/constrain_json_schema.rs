#![no_main]
//! Constrained decoding: untrusted json schema text through torchnative_constrain::fuzzing::json_schema.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| torchnative_constrain::fuzzing::json_schema(data));
