//! Sentence embeddings for `torchnative.Embedder`: load a BERT-family model directory, embed
//! texts with the GIL released.

use std::path::Path;

use pyo3::prelude::*;
use torchnative_runtime::{embed, EmbedOptions, Embedder};

use crate::to_py_err;

/// Load a sentence-embedding model directory.
#[pyfunction]
#[pyo3(signature = (path, threads=None))]
pub(crate) fn load_embedder(
    py: Python<'_>,
    path: &str,
    threads: Option<usize>,
) -> PyResult<NativeEmbedder> {
    if let Some(n) = threads {
        embed::set_threads(n).map_err(|e| to_py_err(py, e))?;
    }
    let embedder = py
        .detach(|| Embedder::load(Path::new(path)))
        .map_err(|e| to_py_err(py, e))?;
    Ok(NativeEmbedder { embedder })
}

/// A loaded embedding model (immutable).
#[pyclass(frozen, module = "torchnative._native")]
pub(crate) struct NativeEmbedder {
    embedder: Embedder,
}

#[pymethods]
impl NativeEmbedder {
    /// Values per embedding.
    #[getter]
    fn dim(&self) -> usize {
        self.embedder.dim()
    }

    /// The most tokens a text may have (special tokens included).
    #[getter]
    fn max_seq_length(&self) -> usize {
        self.embedder.sentence_config().max_seq_length
    }

    /// Pooling modes, concatenated in this order.
    #[getter]
    fn pooling(&self) -> Vec<&'static str> {
        self.embedder
            .sentence_config()
            .pooling
            .iter()
            .map(|p| p.name())
            .collect()
    }

    /// Whether embeddings are L2-normalised.
    #[getter]
    fn normalize(&self) -> bool {
        self.embedder.sentence_config().normalize
    }

    /// Token ids each text is embedded from.
    fn tokenize(
        &self,
        py: Python<'_>,
        texts: Vec<String>,
        truncate: bool,
    ) -> PyResult<Vec<Vec<u32>>> {
        py.detach(|| {
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            self.embedder.tokenize(&refs, &EmbedOptions { truncate })
        })
        .map_err(|e| to_py_err(py, e))
    }

    /// `(embeddings as a list of rows, token count of each text)`.
    fn embed(
        &self,
        py: Python<'_>,
        texts: Vec<String>,
        truncate: bool,
    ) -> PyResult<(Vec<Vec<f32>>, Vec<usize>)> {
        let e = py
            .detach(|| {
                let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
                self.embedder.embed(&refs, &EmbedOptions { truncate })
            })
            .map_err(|e| to_py_err(py, e))?;
        let rows = (0..e.len()).map(|i| e.row(i).to_vec()).collect();
        Ok((rows, e.token_counts))
    }
}
