#!/usr/bin/env bash
# Batched sentence-embedding throughput, torchnative vs transformers on the same machine:
# all-MiniLM-L6-v2 (scripts/fetch-encoder.sh) on Brown corpus sentences, both at --threads.
#   bench/embed/run.sh [--texts 256] [--threads 2] [--reps 5] [--hf-batch 32] [--seed 0]
# Prints texts/s and tokens/s of both and their ratio, and writes
# $TORCHNATIVE_HOME/bench/embed-<timestamp>.json (bench/embed/run.py --help for the method).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
home="${TORCHNATIVE_HOME:-$HOME/.cache/torchnative}"
oracle="${TORCHNATIVE_ORACLE_PYTHON:-$home/oracle-venv/bin/python}"

model="$("$repo/scripts/fetch-encoder.sh")"
[ -x "$oracle" ] || "$repo/scripts/oracle-venv.sh" >&2
(cd "$repo" && cargo build --release -p torchnative-runtime --example embed_throughput >&2)
ours="${CARGO_TARGET_DIR:-$repo/target}/release/examples/embed_throughput"

exec "${PYTHON:-python3}" "$here/run.py" --ours "$ours" --model "$model" --oracle-python "$oracle" \
  --home "$home" "$@"
