"""Shared fixtures: the real default model, and transformers' answers for it (the oracle).

Like the Rust tests: when the model or the oracle venv is missing, tests that need them are
skipped, unless TORCHNATIVE_REQUIRE_ORACLE=1 (scripts/test.sh), in which case they fail.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import torchnative

HERE = Path(__file__).resolve().parent

# Prompts the oracle answers; tests index them by position.
RAW_PROMPTS = ["The capital of France is", "def fibonacci(n):"]
CONVERSATIONS = [
    [{"role": "user", "content": "What is the capital of France?"}],
    [
        {"role": "system", "content": "You answer in one short sentence."},
        {"role": "user", "content": "Name a primary colour."},
    ],
]
ORACLE_NEW_TOKENS = 24


def _required() -> bool:
    return os.environ.get("TORCHNATIVE_REQUIRE_ORACLE") == "1"


def _missing(reason: str) -> None:
    if _required():
        pytest.fail(f"TORCHNATIVE_REQUIRE_ORACLE=1 but {reason}")
    pytest.skip(reason)


def model_path() -> Path:
    env = os.environ.get("TORCHNATIVE_MODEL")
    return Path(env) if env else torchnative.default_model_path()


@pytest.fixture(scope="session")
def model_file() -> Path:
    path = model_path()
    if not path.is_file():
        _missing(f"the model is not at {path} (run scripts/fetch-model.sh)")
    return path


@pytest.fixture(scope="session")
def llm(model_file: Path) -> torchnative.LLM:
    """The default model as shipped (Q4_1 through the native kernels)."""
    return torchnative.load_llm(model_file)


@pytest.fixture(scope="session")
def llm_f32(model_file: Path) -> torchnative.LLM:
    """The default model dequantized to f32: the numerics transformers has."""
    return torchnative.load_llm(model_file, dtype="f32")


@pytest.fixture(scope="session")
def oracle(model_file: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """transformers' tokens and greedy generations for RAW_PROMPTS and CONVERSATIONS."""
    python = os.environ.get("TORCHNATIVE_ORACLE_PYTHON")
    if not python or not Path(python).exists():
        _missing("TORCHNATIVE_ORACLE_PYTHON is not set to the oracle venv's python")
    tmp = tmp_path_factory.mktemp("oracle")
    request = {
        "gguf": str(model_file),
        "max_new_tokens": ORACLE_NEW_TOKENS,
        "raw_prompts": RAW_PROMPTS,
        "conversations": CONVERSATIONS,
    }
    (tmp / "request.json").write_text(json.dumps(request))
    proc = subprocess.run(
        [python, str(HERE / "oracle" / "hf_generate.py"), str(tmp / "request.json"), str(tmp / "result.json")],
        capture_output=True,
        text=True,
        timeout=900,
    )
    if proc.returncode != 0:
        pytest.fail(f"oracle failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    return json.loads((tmp / "result.json").read_text())
