#![no_main]
//! Constrained decoding: untrusted regex text through torchnative_constrain::fuzzing::regex.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| torchnative_constrain::fuzzing::regex(data));
