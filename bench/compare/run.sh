#!/usr/bin/env bash
# Speed of torchnative against llama.cpp (and optionally transformers) on the default model in
# four GGUF types: the original Q4_1 and Q8_0 / Q4_K_M / Q4_0 made by llama-quantize from an F16
# copy (cached under $TORCHNATIVE_HOME/models/derived/).
#   bench/compare/run.sh [--avx2] [--threads N] [--out FILE.json] [--transformers] [--runtime] [--reps N]
# --avx2 (first argument) runs ours with TORCHNATIVE_ISA=avx2 beside llama.cpp built for AVX2
# without AVX-512 (scripts/build-llama-cpp.sh --avx2): the machines most laptops are.
# --runtime adds ours with f32 / bf16 weights at 1 and N threads beside transformers f32.
# Prints one table of tokens/s and ratios (ours / llama.cpp) and writes the raw results as JSON.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
home="${TORCHNATIVE_HOME:-$HOME/.cache/torchnative}"

bin="$("$repo/scripts/build-llama-cpp.sh")"
extra=()
if [ "${1:-}" = "--avx2" ]; then
  shift
  extra=(--llama-bench-bin "$("$repo/scripts/build-llama-cpp.sh" --avx2)" --isa avx2)
fi
(cd "$repo" && cargo build --release -p torchnative-cli >&2)
ours="${CARGO_TARGET_DIR:-$repo/target}/release/torchnative"

args=(--llama-bin "$bin" --torchnative "$ours" --home "$home")
if [ -n "${TORCHNATIVE_ORACLE_PYTHON:-}" ]; then
  args+=(--oracle-python "$TORCHNATIVE_ORACLE_PYTHON")
elif [ -x "$home/oracle-venv/bin/python" ]; then
  args+=(--oracle-python "$home/oracle-venv/bin/python")
fi
exec "${PYTHON:-python3}" "$here/compare.py" "${args[@]}" "${extra[@]}" "$@"
