"""Sentence embeddings (:func:`load_embedder`, :class:`Embedder`) and cross-encoder reranking
(:func:`load_reranker`, :class:`Reranker`).

A model directory in the sentence-transformers layout (config.json, model.safetensors,
tokenizer.json, modules.json, 1_Pooling/config.json, sentence_bert_config.json) of a BERT or
RoBERTa / XLM-RoBERTa encoder is run natively; pooling and normalisation are what its files say,
as ``SentenceTransformer(dir).encode(texts)`` computes them.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from . import _native
from .errors import ModelLoadError
from .llm import _optional_count, torchnative_home

DEFAULT_EMBEDDER_DIR = "all-MiniLM-L6-v2"


def default_embedder_path() -> Path:
    """Where ``scripts/fetch-encoder.sh`` puts the default embedding model (all-MiniLM-L6-v2)."""
    return torchnative_home() / "models" / DEFAULT_EMBEDDER_DIR


def load_embedder(
    model: str | os.PathLike[str] | None = None, *, threads: int | None = None
) -> Embedder:
    """Load a sentence-embedding model directory (``None``: the default, all-MiniLM-L6-v2 at
    ``$TORCHNATIVE_HOME/models/all-MiniLM-L6-v2``). ``threads``: kernel threads, process-wide.

    Raises:
        ModelLoadError: the directory or one of its files is missing or malformed.
        UnsupportedModelError: the architecture or a sentence-transformers module is not supported.
        InvalidArgumentError: a config value or ``threads`` is out of range.
    """
    if model is None:
        path = default_embedder_path()
        if not path.is_dir():
            raise ModelLoadError(
                f"no model given and the default embedding model is not at {path}; fetch it with "
                "`scripts/fetch-encoder.sh` (from the torchnative repository) or pass a directory"
            )
        spec = str(path)
    elif isinstance(model, (str, os.PathLike)):
        spec = os.fspath(model)
    else:
        raise TypeError(f"model must be a str, a path or None, not {type(model).__name__}")
    threads = _optional_count("threads", threads, minimum=1)
    return Embedder(_native.load_embedder(spec, threads))


def _texts(texts: str | Sequence[str]) -> tuple[list[str], bool]:
    if isinstance(texts, str):
        return [texts], True
    if not isinstance(texts, Sequence):
        raise TypeError(f"texts must be a str or a sequence of str, not {type(texts).__name__}")
    out = list(texts)
    for i, t in enumerate(out):
        if not isinstance(t, str):
            raise TypeError(f"texts[{i}] must be a str, not {type(t).__name__}")
    return out, False


class Embedder:
    """A loaded sentence-embedding model. Immutable; safe to share between threads."""

    def __init__(self, native: _native.NativeEmbedder) -> None:
        self._native = native

    @property
    def dim(self) -> int:
        """Values per embedding."""
        return self._native.dim

    @property
    def max_seq_length(self) -> int:
        """The most tokens a text may have, special tokens included."""
        return self._native.max_seq_length

    @property
    def pooling(self) -> list[str]:
        """Pooling modes (``cls``, ``max``, ``mean``, ``mean_sqrt_len``, ``last``), concatenated."""
        return list(self._native.pooling)

    @property
    def normalize(self) -> bool:
        """Whether embeddings are L2-normalised."""
        return self._native.normalize

    def embed(self, texts: str | Sequence[str], *, truncate: bool = False) -> list[list[float]] | list[float]:
        """Embed one text (returns one vector) or a sequence of texts (one vector each).

        A text longer than :attr:`max_seq_length` tokens raises :class:`InvalidArgumentError`
        naming it, unless ``truncate=True`` (then it is cut as sentence-transformers cuts it).
        A text's embedding does not depend on the other texts in the call.
        """
        items, single = _texts(texts)
        if not isinstance(truncate, bool):
            raise TypeError(f"truncate must be a bool, not {type(truncate).__name__}")
        rows, _counts = self._native.embed(items, truncate)
        return rows[0] if single else rows

    def tokenize(self, texts: str | Sequence[str], *, truncate: bool = False) -> list[list[int]] | list[int]:
        """The token ids each text is embedded from (special tokens included)."""
        items, single = _texts(texts)
        ids = self._native.tokenize(items, truncate)
        return ids[0] if single else ids

    def __repr__(self) -> str:
        return f"Embedder(dim={self.dim}, pooling={self.pooling}, normalize={self.normalize})"


def embed(
    texts: str | Sequence[str],
    model: str | os.PathLike[str] | None = None,
    *,
    truncate: bool = False,
) -> list[list[float]] | list[float]:
    """One-shot: ``load_embedder(model).embed(texts, truncate=truncate)``."""
    return load_embedder(model).embed(texts, truncate=truncate)


def load_reranker(model: str | os.PathLike[str], *, threads: int | None = None) -> Reranker:
    """Load a cross-encoder directory: a BERT, RoBERTa / XLM-R or ModernBERT
    ``*ForSequenceClassification`` model (config.json, model.safetensors, tokenizer.json).

    Raises:
        ModelLoadError: the directory or one of its files is missing or malformed.
        UnsupportedModelError: not a sequence classifier, or an activation that is not supported.
    """
    if not isinstance(model, (str, os.PathLike)):
        raise TypeError(f"model must be a str or a path, not {type(model).__name__}")
    threads = _optional_count("threads", threads, minimum=1)
    return Reranker(_native.load_reranker(os.fspath(model), threads))


class Reranker:
    """A loaded cross-encoder: scores (query, document) pairs as sentence-transformers'
    ``CrossEncoder.predict`` does. Immutable; safe to share between threads."""

    def __init__(self, native: _native.NativeReranker) -> None:
        self._native = native

    @property
    def num_labels(self) -> int:
        """Scores per pair (1 for a relevance score)."""
        return self._native.num_labels

    @property
    def max_length(self) -> int:
        """The most tokens a query + document pair may have, special tokens included."""
        return self._native.max_length

    @property
    def activation(self) -> str:
        """What turns logits into scores: ``"sigmoid"`` or ``"identity"``."""
        return self._native.activation

    def score(
        self, query: str, documents: str | Sequence[str], *, truncate: bool = False
    ) -> list[float] | list[list[float]] | float | list[float]:
        """The score of each document against ``query`` (a float each for a one-label model, a
        list of ``num_labels`` floats otherwise; one document gives one result). A pair longer
        than :attr:`max_length` raises :class:`InvalidArgumentError` naming it, unless
        ``truncate=True`` (then it is cut as transformers' ``longest_first`` cuts it)."""
        if not isinstance(query, str):
            raise TypeError(f"query must be a str, not {type(query).__name__}")
        items, single = _texts(documents)
        if not isinstance(truncate, bool):
            raise TypeError(f"truncate must be a bool, not {type(truncate).__name__}")
        scores, _logits, _counts = self._native.score(query, items, truncate)
        out = [s[0] for s in scores] if self.num_labels == 1 else scores
        return out[0] if single else out

    def rerank(
        self,
        query: str,
        documents: Sequence[str],
        *,
        top_n: int | None = None,
        truncate: bool = False,
    ) -> list[tuple[int, float]]:
        """``(index, score)`` of the documents, best first (ties keep the input order), the
        best ``top_n`` only when given. One-label models only."""
        if self.num_labels != 1:
            raise ValueError(f"rerank ranks by one relevance score; this model has {self.num_labels} labels")
        top_n = _optional_count("top_n", top_n, minimum=0)
        scores = self.score(query, list(documents), truncate=truncate)
        order = sorted(range(len(scores)), key=lambda i: -scores[i])
        return [(i, scores[i]) for i in order[:top_n]]

    def __repr__(self) -> str:
        return f"Reranker(num_labels={self.num_labels}, activation={self.activation!r}, max_length={self.max_length})"
