//! Property test: byte-level BPE is lossless, so decode(encode(s)) == s for any string: random
//! bytes (made UTF-8 lossily) and random Unicode drawn from many scripts and whitespace kinds.
//! One caveat the vocabulary itself imposes: SmolLM's has no token for 21 of the 256 bytes
//! (e.g. 0x04, 0xC0, 0xF5..0xFF), and BPE without an unknown token drops those bytes, exactly
//! as Hugging Face does. So the expected text is the input's bytes minus the bytes the
//! vocabulary lacks, read back lossily.
//! The streaming detokenizer must agree with the full decode on the same ids.

mod common;

use torchnative_formats::gguf::GgufFile;
use torchnative_tokenizer::{DecodeOptions, EncodeOptions, StreamingDetokenizer, Tokenizer};

/// xorshift64*: deterministic, seedable, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Code point ranges to draw from: ASCII, Latin-1, combining marks, Greek/Cyrillic, Arabic,
/// Devanagari, CJK, Hangul, emoji, ZWJ/variation selectors, assorted whitespace, private use.
const RANGES: &[(u32, u32)] = &[
    (0x00, 0x7F),
    (0x20, 0x7E),
    (0x20, 0x7E),
    (0x80, 0xFF),
    (0x300, 0x36F),
    (0x370, 0x4FF),
    (0x600, 0x6FF),
    (0x900, 0x97F),
    (0x3040, 0x30FF),
    (0x4E00, 0x9FFF),
    (0xAC00, 0xD7A3),
    (0x1F300, 0x1FAFF),
    (0x200B, 0x200F),
    (0xFE00, 0xFE0F),
    (0x2000, 0x200A),
    (0xE000, 0xE0FF),
    (0x10FF00, 0x10FFFF),
];

const FRAGMENTS: &[&str] = &[
    "<|im_start|>",
    "<|im_end|>",
    "<|endoftext|>",
    "\n",
    "  ",
    "\t",
    "'s",
    "123",
    "\r\n",
    "\u{FFFD}",
];

fn random_unicode(rng: &mut Rng) -> String {
    let len = rng.below(40) as usize;
    let mut text = String::new();
    for _ in 0..len {
        if rng.below(10) == 0 {
            text.push_str(FRAGMENTS[rng.below(FRAGMENTS.len() as u64) as usize]);
            continue;
        }
        let (lo, hi) = RANGES[rng.below(RANGES.len() as u64) as usize];
        let code = lo + rng.below(u64::from(hi - lo + 1)) as u32;
        // Surrogates are not chars; the ranges avoid them, but stay safe.
        text.push(char::from_u32(code).unwrap_or('?'));
    }
    text
}

fn random_bytes(rng: &mut Rng) -> String {
    let len = rng.below(48) as usize;
    let bytes: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

#[test]
fn byte_level_decode_inverts_encode() {
    let Some(model) = common::default_model() else {
        return;
    };
    let tokenizer = Tokenizer::from_gguf(&GgufFile::open(&model).unwrap()).unwrap();
    let byte_tokens = byte_token_ids(&tokenizer);
    let missing: Vec<u8> = (0..=255u8)
        .filter(|&b| byte_tokens[b as usize].is_none())
        .collect();
    assert!(
        missing.len() < 32,
        "most bytes have a token: missing {missing:02x?}"
    );
    let representable = |text: &str| -> String {
        let kept: Vec<u8> = text.bytes().filter(|b| !missing.contains(b)).collect();
        String::from_utf8_lossy(&kept).into_owned()
    };
    let keep = DecodeOptions {
        skip_special_tokens: false,
    };
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut checked = 0;
    for round in 0..1500 {
        let text = if round % 2 == 0 {
            random_unicode(&mut rng)
        } else {
            random_bytes(&mut rng)
        };
        for parse_special in [true, false] {
            let options = EncodeOptions {
                add_special_tokens: false,
                parse_special,
            };
            let ids = tokenizer.encode(&text, options).unwrap();
            assert!(ids.iter().all(|&id| (id as usize) < tokenizer.vocab_size()));
            let decoded = tokenizer.decode(&ids, keep).unwrap();
            let expected = representable(&text);
            assert_eq!(
                decoded, expected,
                "round trip of {text:?} (parse_special {parse_special})"
            );

            let mut stream = StreamingDetokenizer::new(tokenizer.clone(), keep);
            let mut joined = String::new();
            for &id in &ids {
                if let Some(piece) = stream.push(id).unwrap() {
                    joined.push_str(&piece);
                }
            }
            joined.push_str(&stream.finish().unwrap().unwrap_or_default());
            assert_eq!(joined, expected, "streamed round trip of {text:?}");
            checked += 1;
        }
    }
    assert_eq!(checked, 3000);
}

/// Arbitrary id sequences (mostly invalid UTF-8 when concatenated): streaming still reproduces
/// the full decode exactly, replacement characters included.
#[test]
fn streaming_random_ids_equals_full_decode() {
    let Some(model) = common::default_model() else {
        return;
    };
    let tokenizer = Tokenizer::from_gguf(&GgufFile::open(&model).unwrap()).unwrap();
    let mut rng = Rng(42);
    // Ids of single-byte tokens above 0x7F (partial UTF-8 sequences) are drawn often.
    let byte_tokens: Vec<u32> = byte_token_ids(&tokenizer)[0x80..]
        .iter()
        .flatten()
        .copied()
        .collect();
    assert!(byte_tokens.len() > 100, "most high bytes have a token");
    for skip_special_tokens in [false, true] {
        let options = DecodeOptions {
            skip_special_tokens,
        };
        for _ in 0..400 {
            let len = 1 + rng.below(24) as usize;
            let ids: Vec<u32> = (0..len)
                .map(|_| {
                    if rng.below(2) == 0 {
                        byte_tokens[rng.below(byte_tokens.len() as u64) as usize]
                    } else {
                        rng.below(tokenizer.vocab_size() as u64) as u32
                    }
                })
                .collect();
            let full = tokenizer.decode(&ids, options).unwrap();
            let mut stream = StreamingDetokenizer::new(tokenizer.clone(), options);
            // Byte-level BPE streams known token bytes (no decoding per token).
            assert!(stream.is_byte_path());
            let mut joined = String::new();
            for &id in &ids {
                joined.push_str(&stream.push(id).unwrap().unwrap_or_default());
            }
            joined.push_str(&stream.finish().unwrap().unwrap_or_default());
            assert_eq!(joined, full, "ids {ids:?}");
        }
    }
}

/// The id of each byte's single-byte token, where the vocabulary has one.
fn byte_token_ids(tokenizer: &Tokenizer) -> Vec<Option<u32>> {
    (0..=255u8)
        .map(|b| tokenizer.token_id(&byte_level_spelling(b)))
        .collect()
}

/// GPT-2's printable spelling of one byte: printable Latin-1 bytes stand for themselves, the
/// rest are shifted to U+0100 onwards in byte order.
fn byte_level_spelling(byte: u8) -> String {
    let printable = |b: u8| matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
    if printable(byte) {
        return char::from(byte).to_string();
    }
    let shifted = (0..byte).filter(|&b| !printable(b)).count() as u32;
    char::from_u32(256 + shifted).unwrap().to_string()
}

/// One tokenizer shared by several threads gives every thread the same ids as a single thread.
#[test]
fn shared_tokenizer_across_threads() {
    let Some(model) = common::default_model() else {
        return;
    };
    let tokenizer = Tokenizer::from_gguf(&GgufFile::open(&model).unwrap()).unwrap();
    let texts = common::corpus();
    let expected: Vec<Vec<u32>> = texts
        .iter()
        .map(|t| tokenizer.encode(t, EncodeOptions::default()).unwrap())
        .collect();
    std::thread::scope(|scope| {
        for offset in 0..4 {
            let (tokenizer, texts, expected) = (&tokenizer, &texts, &expected);
            scope.spawn(move || {
                for round in 0..5 {
                    for i in 0..texts.len() {
                        let index = (i + offset + round) % texts.len();
                        let ids = tokenizer
                            .encode(&texts[index], EncodeOptions::default())
                            .unwrap();
                        assert_eq!(ids, expected[index]);
                    }
                }
            });
        }
    });
    let batch: Vec<&str> = texts.iter().map(String::as_str).collect();
    assert_eq!(
        tokenizer
            .encode_batch(&batch, EncodeOptions::default())
            .unwrap(),
        expected
    );
}
