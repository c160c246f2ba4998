//! Incremental detokenization for streaming generated text.

use crate::error::Result;
use crate::tokenizer::{DecodeOptions, Tokenizer};

/// Turns ids fed one at a time into text pieces whose concatenation equals
/// `tokenizer.decode(all ids)`.
///
/// For byte-level BPE tokenizers each token's bytes are known at load: a push appends them to
/// at most three held-back bytes of an incomplete UTF-8 character and emits everything that is
/// decided, with U+FFFD for invalid bytes exactly where lossy decoding puts it. [`push_to`]
/// (Self::push_to) then allocates nothing once its output has the capacity
/// [`text_capacity`](Self::text_capacity) names.
///
/// Other tokenizers work on a window of ids: `decode(window)` minus the text of the
/// already-emitted part of the window is the new text. It is held back while it ends in U+FFFD,
/// which is what an incomplete multi-byte character decodes to (byte-level BPE splits emoji and
/// CJK across tokens), so no piece ever carries a broken character. Decoding a window instead
/// of one token keeps context the decoder needs (SentencePiece's leading-space rule).
///
/// [`finish`](Self::finish) flushes what is held back.
#[derive(Debug, Clone)]
pub struct StreamingDetokenizer {
    tokenizer: Tokenizer,
    options: DecodeOptions,
    ids: Vec<u32>,
    /// Start of the window; ids before it are emitted and no longer needed.
    prefix_offset: usize,
    /// End of the emitted part of the window.
    read_offset: usize,
    /// Byte path: bytes not yet emitted (an incomplete UTF-8 sequence between pushes).
    pending: Vec<u8>,
}

impl StreamingDetokenizer {
    /// A detokenizer decoding with `options`.
    pub fn new(tokenizer: Tokenizer, options: DecodeOptions) -> Self {
        let pending = match tokenizer.pieces() {
            Some(table) => Vec::with_capacity(table.max_len() + 4),
            None => Vec::new(),
        };
        StreamingDetokenizer {
            tokenizer,
            options,
            ids: Vec::new(),
            prefix_offset: 0,
            read_offset: 0,
            pending,
        }
    }

    /// Whether pushes append known token bytes (no decoding, no allocation) rather than decode
    /// windows of ids.
    pub fn is_byte_path(&self) -> bool {
        self.tokenizer.pieces().is_some()
    }

    /// The most bytes of text `n_tokens` pushes and the final flush can append, when the byte
    /// path bounds it (`None` for window decoding). Lossy decoding turns an invalid byte into
    /// the three bytes of U+FFFD, hence the factor 3.
    pub fn text_capacity(&self, n_tokens: usize) -> Option<usize> {
        let table = self.tokenizer.pieces()?;
        n_tokens
            .checked_mul(table.max_len())
            .and_then(|b| b.checked_add(3))
            .and_then(|b| b.checked_mul(3))
    }

    /// Adds one id; returns the text it completes, if any. Out-of-range ids are an error and
    /// leave the detokenizer unchanged.
    pub fn push(&mut self, id: u32) -> Result<Option<String>> {
        let mut out = String::new();
        self.push_to(id, &mut out)?;
        Ok((!out.is_empty()).then_some(out))
    }

    /// Adds one id and appends the text it completes to `out`; returns how many bytes were
    /// appended. Out-of-range ids are an error and leave the detokenizer unchanged.
    pub fn push_to(&mut self, id: u32, out: &mut String) -> Result<usize> {
        self.tokenizer.check_ids(&[id])?;
        let before = out.len();
        if let Some(table) = self.tokenizer.pieces() {
            if let Some(bytes) = table.piece(id, self.options.skip_special_tokens) {
                self.pending.extend_from_slice(bytes);
                emit_decided(&mut self.pending, out, false);
            }
            return Ok(out.len() - before);
        }
        self.ids.push(id);
        let emitted = self.tokenizer.decode(
            &self.ids[self.prefix_offset..self.read_offset],
            self.options,
        )?;
        let window = self
            .tokenizer
            .decode(&self.ids[self.prefix_offset..], self.options)?;
        if window.len() > emitted.len() && !window.ends_with('\u{FFFD}') {
            if let Some(new_text) = window.strip_prefix(emitted.as_str()) {
                out.push_str(new_text);
                self.prefix_offset = self.read_offset;
                self.read_offset = self.ids.len();
                self.forget_emitted();
            }
        }
        Ok(out.len() - before)
    }

    /// Returns whatever is still held back (possibly ending in U+FFFD if the ids end inside a
    /// character) and resets the detokenizer for a new sequence.
    pub fn finish(&mut self) -> Result<Option<String>> {
        let mut out = String::new();
        self.finish_to(&mut out)?;
        Ok((!out.is_empty()).then_some(out))
    }

    /// [`finish`](Self::finish) appending to `out`; returns how many bytes were appended.
    pub fn finish_to(&mut self, out: &mut String) -> Result<usize> {
        let before = out.len();
        if self.tokenizer.pieces().is_some() {
            emit_decided(&mut self.pending, out, true);
            return Ok(out.len() - before);
        }
        let emitted = self.tokenizer.decode(
            &self.ids[self.prefix_offset..self.read_offset],
            self.options,
        )?;
        let window = self
            .tokenizer
            .decode(&self.ids[self.prefix_offset..], self.options)?;
        self.ids.clear();
        self.prefix_offset = 0;
        self.read_offset = 0;
        out.push_str(window.strip_prefix(emitted.as_str()).unwrap_or(&window));
        Ok(out.len() - before)
    }

    /// Drops ids before the window so memory stays bounded over long generations.
    fn forget_emitted(&mut self) {
        if self.prefix_offset > 0 {
            self.ids.drain(..self.prefix_offset);
            self.read_offset -= self.prefix_offset;
            self.prefix_offset = 0;
        }
    }
}

/// Move the decided prefix of `pending` to `out` as lossy UTF-8 reads it: valid text as is,
/// each invalid sequence as one U+FFFD. An incomplete sequence at the end stays in `pending`
/// (it may still complete) unless `at_end`, where it becomes one U+FFFD.
fn emit_decided(pending: &mut Vec<u8>, out: &mut String, at_end: bool) {
    let mut start = 0;
    while start < pending.len() {
        match std::str::from_utf8(&pending[start..]) {
            Ok(text) => {
                out.push_str(text);
                start = pending.len();
            }
            Err(e) => {
                let valid_end = start + e.valid_up_to();
                if let Ok(text) = std::str::from_utf8(&pending[start..valid_end]) {
                    out.push_str(text);
                }
                match e.error_len() {
                    Some(n) => {
                        out.push('\u{FFFD}');
                        start = valid_end + n;
                    }
                    None if at_end => {
                        out.push('\u{FFFD}');
                        start = pending.len();
                    }
                    None => {
                        start = valid_end;
                        break;
                    }
                }
            }
        }
    }
    pending.drain(..start);
}
