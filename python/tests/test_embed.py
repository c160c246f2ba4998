"""torchnative.Embedder on all-MiniLM-L6-v2 (scripts/fetch-encoder.sh): shapes, agreement with
transformers + sentence-transformers' pooling (the runtime's oracle script), batch invariance,
and errors."""

from __future__ import annotations

import json
import math
import os
import subprocess
from pathlib import Path

import pytest

import torchnative
from conftest import _missing

ORACLE_SCRIPT = Path(__file__).resolve().parents[2] / "crates/runtime/tests/oracle/embed_reference.py"
TEXTS = [
    "The Fulton County Grand Jury said Friday an investigation of Atlanta's recent primary "
    "election produced no evidence that any irregularities took place.",
    "Hello!",
    "  The jury further said in term-end presentments that the City Executive Committee "
    "deserves the praise and thanks of the City of Atlanta.  ",
]


@pytest.fixture(scope="module")
def embedder() -> torchnative.Embedder:
    path = torchnative.default_embedder_path()
    if not (path / ".complete").is_file():
        _missing(f"the default embedding model is not at {path} (run scripts/fetch-encoder.sh)")
    return torchnative.load_embedder(threads=2)


def test_shapes_and_config(embedder: torchnative.Embedder) -> None:
    assert embedder.dim == 384
    assert embedder.max_seq_length == 256
    assert embedder.pooling == ["mean"]
    assert embedder.normalize
    one = embedder.embed("Hello!")
    assert isinstance(one, list) and len(one) == 384
    many = embedder.embed(TEXTS)
    assert len(many) == 3 and all(len(v) == 384 for v in many)
    assert all(abs(math.sqrt(sum(x * x for x in v)) - 1.0) < 1e-5 for v in many)
    ids = embedder.tokenize("Hello!")
    assert ids[0] == 101 and ids[-1] == 102


def test_embedding_does_not_depend_on_the_batch(embedder: torchnative.Embedder) -> None:
    batch = embedder.embed(TEXTS)
    for i, text in enumerate(TEXTS):
        assert embedder.embed(text) == batch[i]
    assert embedder.embed(TEXTS[::-1]) == batch[::-1]


def test_matches_transformers(embedder: torchnative.Embedder, tmp_path: Path) -> None:
    python = os.environ.get("TORCHNATIVE_ORACLE_PYTHON")
    if not python or not Path(python).exists():
        _missing("TORCHNATIVE_ORACLE_PYTHON is not set to the oracle venv's python")
    out = tmp_path / "out.json"
    request = {"cmd": "embed", "dir": str(torchnative.default_embedder_path()), "texts": TEXTS, "out": str(out)}
    (tmp_path / "request.json").write_text(json.dumps(request))
    proc = subprocess.run(
        [python, "-W", "ignore", str(ORACLE_SCRIPT), str(tmp_path / "request.json")],
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ, TQDM_DISABLE="1"),
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    ref = json.loads(out.read_text())
    assert embedder.tokenize(TEXTS) == ref["ids"]
    for ours, want in zip(embedder.embed(TEXTS), ref["embeddings"]):
        dot = sum(a * b for a, b in zip(ours, want))
        cos = dot / math.sqrt(sum(a * a for a in ours) * sum(b * b for b in want))
        assert cos >= 0.99999


def test_errors(embedder: torchnative.Embedder, tmp_path: Path) -> None:
    long = "word " * 300
    with pytest.raises(torchnative.InvalidArgumentError, match=r"text 1.*302 tokens exceed max_seq_length 256"):
        embedder.embed(["fine", long])
    assert len(embedder.tokenize(long, truncate=True)) == 256
    assert len(embedder.embed(long, truncate=True)) == 384
    with pytest.raises(TypeError):
        embedder.embed(["ok", 3])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        embedder.embed("ok", truncate="yes")  # type: ignore[arg-type]
    with pytest.raises(torchnative.ModelLoadError, match="not a directory"):
        torchnative.load_embedder(tmp_path / "absent")
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    with pytest.raises(torchnative.UnsupportedModelError, match="gpt2"):
        torchnative.load_embedder(tmp_path)
    assert torchnative.embed([], torchnative.default_embedder_path()) == []


def _oracle(request: dict, tmp_path: Path, tag: str) -> dict | None:
    python = os.environ.get("TORCHNATIVE_ORACLE_PYTHON")
    if not python or not Path(python).exists():
        _missing("TORCHNATIVE_ORACLE_PYTHON is not set to the oracle venv's python")
    out = tmp_path / f"{tag}.json"
    request = dict(request, out=str(out))
    (tmp_path / f"{tag}-request.json").write_text(json.dumps(request))
    proc = subprocess.run(
        [python, "-W", "ignore", str(ORACLE_SCRIPT), str(tmp_path / f"{tag}-request.json")],
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ, TQDM_DISABLE="1"),
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(out.read_text()) if out.exists() else None


def test_reranker_scores_pairs_as_transformers(tmp_path: Path) -> None:
    """A tiny random BERT cross-encoder built by transformers: scores equal the oracle's
    CrossEncoder.predict, rerank orders them, errors name the pair."""
    model = tmp_path / "ce"
    texts = [f"the jury said {i} times that the city election was well run" for i in range(40)]
    texts += ["a quiet river", "the county court", "ballots and voters"]
    _oracle({"cmd": "tiny", "arch": "bert", "seed": 4, "texts": texts, "head": {"num_labels": 1},
             "pooling": {"pooling_mode_cls_token": True}, "normalize": False, "max_seq_length": 64,
             "out_dir": str(model)}, tmp_path, "tiny")
    ranker = torchnative.load_reranker(model, threads=2)
    assert (ranker.num_labels, ranker.activation, ranker.max_length) == (1, "sigmoid", 64)
    query = "what did the jury say about the election"
    docs = ["the county court", "the jury said the election was well run", "a quiet river"]
    ref = _oracle({"cmd": "rerank", "dir": str(model), "query": query, "documents": docs,
                   "max_length": 64}, tmp_path, "rerank")
    scores = ranker.score(query, docs)
    assert all(abs(a - b[0]) <= 1e-5 for a, b in zip(scores, ref["scores"]))
    assert ranker.score(query, docs[1]) == scores[1]
    ranked = ranker.rerank(query, docs)
    assert [s for _, s in ranked] == sorted(scores, reverse=True)
    assert ranker.rerank(query, docs, top_n=1) == ranked[:1]
    long = "ballots and voters " * 40
    with pytest.raises(torchnative.InvalidArgumentError, match=r"document 1.*truncate"):
        ranker.score(query, ["fine", long])
    assert 0.0 < ranker.score(query, long, truncate=True) < 1.0
    with pytest.raises(TypeError):
        ranker.score(3, docs)  # type: ignore[arg-type]
    _oracle({"cmd": "tiny", "arch": "bert", "seed": 5, "texts": texts,
             "pooling": {"pooling_mode_cls_token": True}, "normalize": False,
             "max_seq_length": 64, "out_dir": str(tmp_path / "plain")}, tmp_path, "plain")
    with pytest.raises(torchnative.UnsupportedModelError, match="ForSequenceClassification"):
        torchnative.load_reranker(tmp_path / "plain")
