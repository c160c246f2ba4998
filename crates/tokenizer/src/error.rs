//! The crate's error type: every failure names the thing, the value and the reason.

use std::fmt;

/// Errors from loading tokenizers, encoding/decoding and rendering chat templates.
#[derive(Debug)]
pub enum Error {
    /// A file could not be read.
    Io {
        /// The file that failed.
        path: String,
        /// The underlying I/O error.
        source: std::io::Error,
    },
    /// A tokenizer description (tokenizer.json, tokenizer_config.json or GGUF metadata) is invalid
    /// or uses something this crate does not support.
    InvalidTokenizer(String),
    /// A token id is outside the vocabulary.
    TokenIdOutOfRange {
        /// The offending id.
        id: u32,
        /// The vocabulary size the id must be below.
        vocab_size: usize,
    },
    /// The `tokenizers` crate failed while encoding or decoding.
    Backend(String),
    /// A chat template failed to compile or render; carries the template's own message when it
    /// raised one.
    Template(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { path, source } => write!(f, "cannot read {path}: {source}"),
            Error::InvalidTokenizer(message) => write!(f, "invalid tokenizer: {message}"),
            Error::TokenIdOutOfRange { id, vocab_size } => {
                write!(
                    f,
                    "token id {id} is out of range: the vocabulary has {vocab_size} tokens"
                )
            }
            Error::Backend(message) => write!(f, "tokenizer backend error: {message}"),
            Error::Template(message) => write!(f, "chat template error: {message}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Result alias for this crate.
pub type Result<T> = std::result::Result<T, Error>;

pub(crate) fn invalid(message: impl Into<String>) -> Error {
    Error::InvalidTokenizer(message.into())
}

pub(crate) fn read_file(path: &std::path::Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|source| Error::Io {
        path: path.display().to_string(),
        source,
    })
}
