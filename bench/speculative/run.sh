#!/usr/bin/env bash
# Speculative decoding vs plain decoding on the default model, alternating in one run: prompt
# lookup on a summarisation-style prompt, and a Q4_0 copy of the model as its draft (made by
# llama-quantize from an F16 copy, as bench/compare does, cached under
# $TORCHNATIVE_HOME/models/derived). Prints a markdown table (median decode tokens/s, ratio to
# plain, drafted / accepted tokens, and whether the tokens equal plain decoding's).
#
#   bench/speculative/run.sh [--reps N]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
home="${TORCHNATIVE_HOME:-$HOME/.cache/torchnative}"
model="$("$repo/scripts/fetch-model.sh")"
bin="$("$repo/scripts/build-llama-cpp.sh")"
draft="$(cd "$repo/bench/compare" && "${PYTHON:-python3}" -c '
import sys; from pathlib import Path; import compare
files = compare.derive_models(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]))
print(files["Q4_0"])' "$bin" "$model" "$home/models/derived")"
(cd "$repo" && cargo build --release -p torchnative-runtime --example speculative_bench >&2)
exec "${CARGO_TARGET_DIR:-$repo/target}/release/examples/speculative_bench" "$model" "$draft" "$@"
