use std::fmt;

/// Every way the runtime refuses or fails. Each variant's message names the thing and the reason,
/// so a caller (CLI, Python) can show it as one line.
#[derive(Clone, Debug)]
pub enum RuntimeError {
    /// A model file or directory could not be read or is malformed.
    Load { path: String, reason: String },
    /// The model needs a capability this build does not have (architecture, option, dtype).
    Unsupported { what: String, supported: String },
    /// Prompt plus requested new tokens do not fit in the context.
    ContextOverflow {
        prompt_tokens: usize,
        max_new_tokens: usize,
        capacity: usize,
    },
    /// A token id outside the vocabulary.
    TokenOutOfRange { token: u32, vocab_size: usize },
    /// An argument is invalid (empty prompt, bad sampling parameter, ...).
    InvalidArgument { what: String, reason: String },
    /// Tokenizer or chat template failure.
    Text(String),
    /// A kernel failed (its message names the op).
    Kernel(String),
    /// The serving engine's admission queue is full: try again later.
    QueueFull { limit: usize },
    /// The serving engine has stopped.
    EngineStopped,
}

impl fmt::Display for RuntimeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RuntimeError::Load { path, reason } => write!(f, "cannot load model '{path}': {reason}"),
            RuntimeError::Unsupported { what, supported } => {
                write!(f, "unsupported: {what} (supported: {supported})")
            }
            RuntimeError::ContextOverflow { prompt_tokens, max_new_tokens, capacity } => write!(
                f,
                "context overflow: {prompt_tokens} prompt tokens + {max_new_tokens} new tokens = {} \
                 exceeds the context capacity of {capacity} tokens",
                prompt_tokens + max_new_tokens
            ),
            RuntimeError::TokenOutOfRange { token, vocab_size } => {
                write!(f, "token id {token} is out of range for a vocabulary of {vocab_size} tokens")
            }
            RuntimeError::InvalidArgument { what, reason } => write!(f, "invalid {what}: {reason}"),
            RuntimeError::Text(msg) => write!(f, "{msg}"),
            RuntimeError::Kernel(msg) => write!(f, "kernel error: {msg}"),
            RuntimeError::QueueFull { limit } => {
                write!(f, "the engine's queue is full ({limit} requests waiting): retry later")
            }
            RuntimeError::EngineStopped => write!(f, "the engine has stopped"),
        }
    }
}

impl std::error::Error for RuntimeError {}

pub type Result<T, E = RuntimeError> = std::result::Result<T, E>;

pub(crate) fn invalid(what: impl Into<String>, reason: impl Into<String>) -> RuntimeError {
    RuntimeError::InvalidArgument {
        what: what.into(),
        reason: reason.into(),
    }
}
