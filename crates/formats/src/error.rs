//! The one error type for every model-file problem.
use std::fmt;
use std::path::{Path, PathBuf};

/// Why a model file, config or location could not be used. Every message names the thing that
/// is wrong, the offending value and the limit or expectation it broke.
#[derive(Debug)]
pub enum FormatError {
    /// The operating system refused a read, open or map.
    Io {
        /// The file or directory involved.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The content is not a valid file of its format (truncated, inconsistent, lying sizes).
    Malformed(String),
    /// The content is valid but uses something torchnative does not support (GGUF v1, an
    /// architecture or option we do not implement).
    Unsupported(String),
    /// A model location or a required file/key could not be found.
    NotFound(String),
}

impl FormatError {
    /// Prefixes the message with the file it came from, so errors name the file.
    pub fn in_file(self, path: &Path) -> FormatError {
        let prefix = |m: String| format!("{}: {m}", path.display());
        match self {
            FormatError::Malformed(m) => FormatError::Malformed(prefix(m)),
            FormatError::Unsupported(m) => FormatError::Unsupported(prefix(m)),
            FormatError::NotFound(m) => FormatError::NotFound(prefix(m)),
            io @ FormatError::Io { .. } => io,
        }
    }

    /// Builds an [`FormatError::Io`] for `path`.
    pub fn io(path: &Path, source: std::io::Error) -> FormatError {
        FormatError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FormatError::Io { path, source } => write!(f, "{}: {source}", path.display()),
            FormatError::Malformed(m) => write!(f, "malformed file: {m}"),
            FormatError::Unsupported(m) => write!(f, "unsupported: {m}"),
            FormatError::NotFound(m) => write!(f, "not found: {m}"),
        }
    }
}

impl std::error::Error for FormatError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            FormatError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Shorthand for results in this crate.
pub type Result<T, E = FormatError> = std::result::Result<T, E>;

pub(crate) fn malformed(message: impl Into<String>) -> FormatError {
    FormatError::Malformed(message.into())
}
