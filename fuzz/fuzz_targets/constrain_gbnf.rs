#![no_main]
//! Constrained decoding: untrusted gbnf text through torchnative_constrain::fuzzing::gbnf.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| torchnative_constrain::fuzzing::gbnf(data));
