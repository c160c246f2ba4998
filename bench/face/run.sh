#!/usr/bin/env bash
# transformers' generate on the torch face beside upstream PyTorch, same machine, same threads:
#   bench/face/run.sh [--threads N] [--reps N] [--rounds N] [--new N] [--out FILE.json]
# Builds (once) the face venv and the oracle venv and fetches the default model.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
face="$("$repo/scripts/face-venv.sh")"
upstream="${TORCHNATIVE_ORACLE_PYTHON:-$("$repo/scripts/oracle-venv.sh")}"
model="$("$repo/scripts/fetch-model.sh")"
exec "${PYTHON:-python3}" "$here/compare.py" --face "$face" --upstream "$upstream" --model "$model" "$@"
