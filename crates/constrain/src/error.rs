//! The crate's error type: every failure names the input, the place and the reason.

use std::fmt;

/// Errors from parsing grammars, schemas and regular expressions, compiling them, and matching.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// GBNF text is malformed or uses something unsupported.
    Gbnf {
        /// 1-based line of the offending character.
        line: usize,
        /// 1-based column (in characters) of the offending character.
        column: usize,
        /// What is wrong.
        message: String,
    },
    /// A JSON schema is malformed or uses something unsupported.
    Schema {
        /// JSON pointer of the offending schema node (`""` is the root).
        path: String,
        /// What is wrong.
        message: String,
    },
    /// A regular expression is malformed or uses something unsupported.
    Regex(String),
    /// The grammar is well-formed but cannot be compiled (left recursion, matches nothing, limits).
    Grammar(String),
    /// The token vocabulary is invalid.
    Vocabulary(String),
    /// A token was fed that the grammar does not allow at this point.
    TokenRejected {
        /// The token id.
        id: u32,
        /// Why.
        reason: String,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Gbnf {
                line,
                column,
                message,
            } => write!(f, "GBNF grammar, line {line} column {column}: {message}"),
            Error::Schema { path, message } => {
                let path = if path.is_empty() { "#" } else { path };
                write!(f, "JSON schema at '{path}': {message}")
            }
            Error::Regex(message) => write!(f, "regular expression: {message}"),
            Error::Grammar(message) => write!(f, "grammar: {message}"),
            Error::Vocabulary(message) => write!(f, "token vocabulary: {message}"),
            Error::TokenRejected { id, reason } => write!(f, "token {id} rejected: {reason}"),
        }
    }
}

impl std::error::Error for Error {}

/// Result alias for this crate.
pub type Result<T> = std::result::Result<T, Error>;

pub(crate) fn grammar_error(message: impl Into<String>) -> Error {
    Error::Grammar(message.into())
}
