#!/usr/bin/env bash
# Build (once) the test-only oracle venv: upstream torch + transformers + gguf + numpy + safetensors
# + peft (LoRA adapters) + sentencepiece (llama.cpp's converter imports it for llama models; the
# tests train SentencePiece vocabularies with it) + protobuf (transformers' SentencePiece converters).
# Never used by the runtime; tests that compare against upstream call this and use the venv's python.
# Prints the venv's python path on stdout.
set -euo pipefail
home="${TORCHNATIVE_HOME:-$HOME/.cache/torchnative}"
venv="$home/oracle-venv"
# Bump the stamp when the package list changes: pip then only adds what is missing.
stamp="$venv/.torchnative-oracle-v5"
if [ ! -f "$stamp" ]; then
  python="${PYTHON:-python3}"
  [ -x "$venv/bin/python" ] || "$python" -m venv "$venv" >&2
  "$venv/bin/pip" install --quiet --upgrade pip >&2
  "$venv/bin/pip" install --quiet torch==2.15.0 transformers==5.24.0 accelerate gguf numpy safetensors peft==0.21.2 sentencepiece==0.2.3 protobuf==7.36.2 >&2
  touch "$stamp"
fi
echo "$venv/bin/python"
