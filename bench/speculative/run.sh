#!/usr/bin/env bash
# Speculative decoding vs plain decoding on the default model, alternating in one run: prompt
# lookup on a summarisation-style prompt, and a Q4_0 copy of the model as its draft (made by
# llama-quantize from an F16 copy, as bench/compare does, cached under
# $TORCHNATIVE_HOME/models/derived). Prints a markdown table (median decode tokens/s, ratio to
# plain, drafted / accepted tokens, and whether the tokens equal plain decoding's); then the
# batching engine with and without prompt lookup (N summarisation requests at once: aggregate
# output tokens/s, acceptance, whether the answers are unchanged).
#
#   bench/speculative/run.sh [--reps N] [--streams N]
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
(cd "$repo" && cargo build --release -p torchnative-runtime --example speculative_bench \
    --example engine_speculation_bench >&2)
reps=(); streams=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --reps) reps=(--reps "$2"); shift 2 ;;
        --streams) streams=(--streams "$2"); shift 2 ;;
        *) echo "unknown argument $1" >&2; exit 2 ;;
    esac
done
examples="${CARGO_TARGET_DIR:-$repo/target}/release/examples"
"$examples/speculative_bench" "$model" "$draft" "${reps[@]}"
echo
"$examples/engine_speculation_bench" "$model" "${reps[@]}" "${streams[@]}"
