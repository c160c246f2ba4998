//! Sentence embeddings for `torchnative.Embedder` and cross-encoder scores for
//! `torchnative.Reranker`: load a BERT-family model directory, run it with the GIL released.

use std::path::Path;

use pyo3::prelude::*;
use torchnative_runtime::{
    embed, EmbedOptions, Embedder, RerankOptions, Reranker, ScoreActivation,
};

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

/// Load a cross-encoder (`*ForSequenceClassification`) model directory.
#[pyfunction]
#[pyo3(signature = (path, threads=None))]
pub(crate) fn load_reranker(
    py: Python<'_>,
    path: &str,
    threads: Option<usize>,
) -> PyResult<NativeReranker> {
    if let Some(n) = threads {
        embed::set_threads(n).map_err(|e| to_py_err(py, e))?;
    }
    let ranker = py
        .detach(|| Reranker::load(Path::new(path)))
        .map_err(|e| to_py_err(py, e))?;
    Ok(NativeReranker { ranker })
}

/// A loaded cross-encoder (immutable).
#[pyclass(frozen, module = "torchnative._native")]
pub(crate) struct NativeReranker {
    ranker: Reranker,
}

#[pymethods]
impl NativeReranker {
    /// Scores per pair.
    #[getter]
    fn num_labels(&self) -> usize {
        self.ranker.num_labels()
    }

    /// The most tokens a query + document pair may have (special tokens included).
    #[getter]
    fn max_length(&self) -> usize {
        self.ranker.max_length()
    }

    /// `"sigmoid"` or `"identity"`.
    #[getter]
    fn activation(&self) -> &'static str {
        match self.ranker.activation() {
            ScoreActivation::Sigmoid => "sigmoid",
            ScoreActivation::Identity => "identity",
        }
    }

    /// `(scores per document, logits per document, token count of each pair)`.
    #[allow(clippy::type_complexity)]
    fn score(
        &self,
        py: Python<'_>,
        query: String,
        documents: Vec<String>,
        truncate: bool,
    ) -> PyResult<(Vec<Vec<f32>>, Vec<Vec<f32>>, Vec<usize>)> {
        let s = py
            .detach(|| {
                let refs: Vec<&str> = documents.iter().map(String::as_str).collect();
                self.ranker
                    .score(&query, &refs, &RerankOptions { truncate })
            })
            .map_err(|e| to_py_err(py, e))?;
        let n = s.num_labels;
        let rows = |v: &[f32]| v.chunks(n).map(<[f32]>::to_vec).collect();
        Ok((rows(&s.scores), rows(&s.logits), s.token_counts))
    }
}
