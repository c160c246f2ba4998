//! torchnative-core errors as the Python exceptions upstream raises for the same failure.

use pyo3::exceptions::{PyIndexError, PyNotImplementedError, PyRuntimeError};
use pyo3::PyErr;
use torchnative_core::Error;

pub fn core_err(e: Error) -> PyErr {
    match &e {
        Error::DimOutOfRange { .. } | Error::IndexOutOfRange { .. } => {
            PyIndexError::new_err(e.to_string())
        }
        Error::UnsupportedDType { .. }
        | Error::UnsupportedDevice { .. }
        | Error::Unsupported { .. } => PyNotImplementedError::new_err(e.to_string()),
        Error::ShapeMismatch { .. } | Error::InvalidArgument { .. } => {
            PyRuntimeError::new_err(e.to_string())
        }
    }
}
