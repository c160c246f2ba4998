//! The bytes each token decodes to, for decoders where decoding a sequence is the lossy UTF-8
//! reading of its tokens' bytes concatenated. Streaming detokenization then appends bytes
//! instead of decoding windows of ids, and allocates nothing per token.
//!
//! Only the byte-level decoder (GPT-2 style BPE) has that form: it maps every token through the
//! fixed byte <-> printable-character table (a token with a character outside the table decodes
//! to its own UTF-8 bytes) and reads the concatenation as lossy UTF-8. SentencePiece-style
//! decoders strip a leading space of the whole sequence, so they keep the window method.

use tokenizers::decoders::DecoderWrapper;

use crate::error::{invalid, Error, Result};
use crate::Tokenizer;

impl Tokenizer {
    /// The bytes token `id` contributes to decoded text, for constrained decoding's vocabulary:
    /// `Ok(None)` for special tokens (they never appear in constrained output), an error for ids
    /// out of range. Only byte-level vocabularies (GPT-2 style BPE) are supported yet; others
    /// (SentencePiece-style, whose decoding of a token depends on its neighbours) are an error.
    pub fn token_bytes(&self, id: u32) -> Result<Option<&[u8]>> {
        if id as usize >= self.vocab_size() {
            return Err(Error::TokenIdOutOfRange {
                id,
                vocab_size: self.vocab_size(),
            });
        }
        let Some(pieces) = self.pieces() else {
            return Err(invalid(
                "token bytes are supported only for byte-level (GPT-2 style) vocabularies yet",
            ));
        };
        if self.is_special(id) {
            return Ok(None);
        }
        Ok(pieces.piece(id, true))
    }
}

/// Per-token decoded bytes, and which tokens `skip_special_tokens` leaves out.
#[derive(Debug)]
pub(crate) struct PieceTable {
    bytes: Vec<u8>,
    /// `offsets[id]..offsets[id + 1]` is token `id`'s range of `bytes`.
    offsets: Vec<usize>,
    special: Vec<bool>,
    max_len: usize,
}

impl PieceTable {
    /// The table of `backend` when its decoder is exactly the byte-level one, else `None`.
    /// `vocab_size` may exceed the backend's vocabulary: ids without an entry decode to nothing,
    /// as the backend's `decode` drops them.
    pub(crate) fn build(backend: &tokenizers::Tokenizer, vocab_size: usize) -> Option<PieceTable> {
        if !matches!(backend.get_decoder(), Some(DecoderWrapper::ByteLevel(_))) {
            return None;
        }
        let char_to_byte = byte_level_decoding_table();
        // The backend skips a token when its text is that of a special added token.
        let special_texts: std::collections::HashSet<String> = backend
            .get_added_tokens_decoder()
            .values()
            .filter(|t| t.special)
            .map(|t| t.content.clone())
            .collect();
        let mut table = PieceTable {
            bytes: Vec::new(),
            offsets: Vec::with_capacity(vocab_size + 1),
            special: Vec::with_capacity(vocab_size),
            max_len: 0,
        };
        table.offsets.push(0);
        for id in 0..vocab_size {
            let token = u32::try_from(id)
                .ok()
                .and_then(|id| backend.id_to_token(id));
            let start = table.bytes.len();
            if let Some(token) = &token {
                let mapped: Option<Vec<u8>> = token
                    .chars()
                    .map(|c| char_to_byte.get(c as usize).copied().flatten())
                    .collect();
                match mapped {
                    Some(b) => table.bytes.extend_from_slice(&b),
                    None => table.bytes.extend_from_slice(token.as_bytes()),
                }
            }
            table.max_len = table.max_len.max(table.bytes.len() - start);
            table.offsets.push(table.bytes.len());
            table
                .special
                .push(token.is_some_and(|t| special_texts.contains(&t)));
        }
        Some(table)
    }

    /// Token `id`'s bytes, or `None` when it is left out (special, skipping specials).
    pub(crate) fn piece(&self, id: u32, skip_special_tokens: bool) -> Option<&[u8]> {
        let id = id as usize;
        if skip_special_tokens && self.special[id] {
            return None;
        }
        Some(&self.bytes[self.offsets[id]..self.offsets[id + 1]])
    }

    /// The longest token's byte length.
    pub(crate) fn max_len(&self) -> usize {
        self.max_len
    }
}

/// The inverse of the byte-level encoding's byte -> character map, indexed by code point.
///
/// The encoding keeps the printable bytes `!`..`~`, `¡`..`¬` and `®`..`ÿ` as the characters of
/// the same code point and gives the other 68 bytes, in increasing order, the code points from
/// U+0100 on.
fn byte_level_decoding_table() -> Vec<Option<u8>> {
    let printable = |b: u8| {
        (b'!'..=b'~').contains(&b) || (0xA1..=0xAC).contains(&b) || (0xAE..=0xFF).contains(&b)
    };
    let mut table = vec![None; 0x100 + 68];
    let mut next = 0x100;
    for b in 0..=255u8 {
        if printable(b) {
            table[b as usize] = Some(b);
        } else {
            table[next] = Some(b);
            next += 1;
        }
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_bytes_of_a_byte_level_vocabulary() {
        let json = r#"{
            "version": "1.0", "truncation": null, "padding": null,
            "added_tokens": [{"id": 3, "content": "<|end|>", "single_word": false, "lstrip": false,
                              "rstrip": false, "normalized": false, "special": true}],
            "normalizer": null,
            "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
            "post_processor": null,
            "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
            "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
                      "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false,
                      "vocab": {"a": 0, "Ġb": 1, "Ã©": 2, "<|end|>": 3}, "merges": []}
        }"#;
        let config = crate::TokenizerConfig {
            eos_token: Some("<|end|>".into()),
            ..Default::default()
        };
        let t = Tokenizer::from_json_str(json, config).unwrap();
        assert_eq!(t.token_bytes(0).unwrap(), Some(&b"a"[..]));
        assert_eq!(t.token_bytes(1).unwrap(), Some(&b" b"[..]));
        assert_eq!(t.token_bytes(2).unwrap(), Some("é".as_bytes()));
        assert_eq!(t.token_bytes(3).unwrap(), None);
        assert!(t.token_bytes(4).is_err());
        // Not byte-level: refused, not guessed.
        let word_level = r#"{"version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
            "normalizer": null, "pre_tokenizer": {"type": "Whitespace"}, "post_processor": null,
            "decoder": null, "model": {"type": "WordLevel", "vocab": {"hi": 0, "[UNK]": 1}, "unk_token": "[UNK]"}}"#;
        let t = Tokenizer::from_json_str(word_level, Default::default()).unwrap();
        let e = t.token_bytes(0).unwrap_err().to_string();
        assert!(e.contains("byte-level"), "{e}");
    }

    #[test]
    fn byte_level_table_is_a_bijection_onto_bytes() {
        let table = byte_level_decoding_table();
        let mut seen = [false; 256];
        for b in table.iter().flatten() {
            assert!(!seen[*b as usize], "byte {b} mapped twice");
            seen[*b as usize] = true;
        }
        assert!(seen.iter().all(|&s| s));
        // The well-known spellings: space is 'Ġ' (U+0120), newline 'Ċ' (U+010A).
        assert_eq!(table[0x120], Some(b' '));
        assert_eq!(table[0x10A], Some(b'\n'));
        assert_eq!(table['a' as usize], Some(b'a'));
    }
}
