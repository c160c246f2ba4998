//! The bytes each token decodes to, for decoders where decoding a sequence is the lossy UTF-8
//! reading of its tokens' bytes concatenated. Streaming detokenization then appends bytes
//! instead of decoding windows of ids, and allocates nothing per token.
//!
//! Only the byte-level decoder (GPT-2 style BPE) has that form: it maps every token through the
//! fixed byte <-> printable-character table (a token with a character outside the table decodes
//! to its own UTF-8 bytes) and reads the concatenation as lossy UTF-8. SentencePiece-style
//! decoders strip a leading space of the whole sequence, so they keep the window method.

use tokenizers::decoders::DecoderWrapper;

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
