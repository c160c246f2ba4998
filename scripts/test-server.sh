#!/usr/bin/env bash
# The OpenAI-compatible server against the official `openai` Python client (PyPI, unchanged):
# chat, completions, streaming with usage, stop, seeds, logprobs, n, errors and status codes,
# API keys, overload (429, nothing lost or hung), cancellation on disconnect, and greedy
# results equal to `torchnative run` with 1 or 16 concurrent requests.
#
# The client lives in its own venv ($TORCHNATIVE_HOME/serve-venv, created once). The server is
# the CLI that scripts/test.sh built with the ci profile. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
export TORCHNATIVE_HOME="${TORCHNATIVE_HOME:-$HOME/.cache/torchnative}"
VENV="$TORCHNATIVE_HOME/serve-venv"
PYTHON="${PYTHON:-python3}"
if [[ ! -x "$VENV/bin/python" ]] || ! "$VENV/bin/python" -c "import openai, pytest" 2>/dev/null; then
    echo "test-server: creating $VENV" >&2
    "$PYTHON" -m venv "$VENV"
    "$VENV/bin/python" -m pip install --quiet --upgrade pip >&2
    "$VENV/bin/python" -m pip install --quiet "openai>=1.50,<3" "pytest>=7" >&2
fi
export TORCHNATIVE_CLI="${TORCHNATIVE_CLI:-${CARGO_TARGET_DIR:-$ROOT/target}/ci/torchnative}"
if [[ ! -x "$TORCHNATIVE_CLI" ]]; then
    cargo build --profile ci -p torchnative-cli >&2
fi
export TORCHNATIVE_MODEL="${TORCHNATIVE_MODEL:-$(scripts/fetch-model.sh)}"
export TORCHNATIVE_ENCODER="${TORCHNATIVE_ENCODER:-$(scripts/fetch-encoder.sh)}"
# transformers builds the tiny cross-encoder /v1/rerank serves.
export TORCHNATIVE_ORACLE_PYTHON="${TORCHNATIVE_ORACLE_PYTHON:-$(scripts/oracle-venv.sh)}"
cd "$ROOT/crates/server/tests/openai"
exec "$VENV/bin/python" -m pytest -q -p no:cacheprovider "$@"
