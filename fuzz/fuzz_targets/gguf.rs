#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| torchnative_formats::fuzzing::gguf(data));
