#!/usr/bin/env bash
# The main job: build the CLI, fetch the default model (cached), stream a chat answer.
# Usage: scripts/demo.sh ["your question"]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/fetch-model.sh >/dev/null
cargo build --release --quiet -p torchnative-cli
exec target/release/torchnative run "${1:-Name three primary colors and one fact about each.}"
