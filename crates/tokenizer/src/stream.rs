//! Incremental detokenization for streaming generated text.

use crate::error::Result;
use crate::tokenizer::{DecodeOptions, Tokenizer};

/// Turns ids fed one at a time into text pieces whose concatenation equals
/// `tokenizer.decode(all ids)`.
///
/// Works on a window of ids: `decode(window)` minus the text of the already-emitted part of the
/// window is the new text. It is held back while it ends in U+FFFD, which is what an incomplete
/// multi-byte character decodes to (byte-level BPE splits emoji and CJK across tokens), so no
/// piece ever carries a broken character. Decoding a window instead of one token keeps context
/// the decoder needs (SentencePiece's leading-space rule). [`finish`](Self::finish) flushes what
/// is held back.
#[derive(Debug, Clone)]
pub struct StreamingDetokenizer {
    tokenizer: Tokenizer,
    options: DecodeOptions,
    ids: Vec<u32>,
    /// Start of the window; ids before it are emitted and no longer needed.
    prefix_offset: usize,
    /// End of the emitted part of the window.
    read_offset: usize,
}

impl StreamingDetokenizer {
    /// A detokenizer decoding with `options`.
    pub fn new(tokenizer: Tokenizer, options: DecodeOptions) -> Self {
        StreamingDetokenizer {
            tokenizer,
            options,
            ids: Vec::new(),
            prefix_offset: 0,
            read_offset: 0,
        }
    }

    /// Adds one id; returns the text it completes, if any. Out-of-range ids are an error and
    /// leave the detokenizer unchanged.
    pub fn push(&mut self, id: u32) -> Result<Option<String>> {
        self.tokenizer.check_ids(&[id])?;
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
                let new_text = new_text.to_string();
                self.prefix_offset = self.read_offset;
                self.read_offset = self.ids.len();
                self.forget_emitted();
                return Ok(Some(new_text));
            }
        }
        Ok(None)
    }

    /// Returns whatever is still held back (possibly ending in U+FFFD if the ids end inside a
    /// character) and resets the detokenizer for a new sequence.
    pub fn finish(&mut self) -> Result<Option<String>> {
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
        let rest = window.strip_prefix(emitted.as_str()).unwrap_or(&window);
        Ok((!rest.is_empty()).then(|| rest.to_string()))
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
