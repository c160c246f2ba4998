#!/usr/bin/env bash
# Build (once) the test-only oracle venv: upstream torch + transformers + gguf + numpy + safetensors.
# Never used by the runtime; tests that compare against upstream call this and use the venv's python.
# Prints the venv's python path on stdout.
set -euo pipefail
home="${TORCHNATIVE_HOME:-$HOME/.cache/torchnative}"
venv="$home/oracle-venv"
stamp="$venv/.torchnative-oracle-v1"
if [ ! -f "$stamp" ]; then
  python="${PYTHON:-python3}"
  rm -rf "$venv"
  "$python" -m venv "$venv" >&2
  "$venv/bin/pip" install --quiet --upgrade pip >&2
  "$venv/bin/pip" install --quiet torch==2.15.0 transformers==5.24.0 gguf numpy safetensors >&2
  touch "$stamp"
fi
echo "$venv/bin/python"
