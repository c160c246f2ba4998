#!/usr/bin/env bash
# Fetch the pinned upstream PyTorch wheel (the .py tree of the torch face, see torch-face/) from
# PyPI, verify its sha256 and cache it under $TORCHNATIVE_HOME/wheels. Idempotent: a verified copy
# is reused. Prints the wheel's path. The pin (requirement, file name, sha256) is the
# [tool.torchnative-face] table of torch-face/pyproject.toml.
set -euo pipefail
home="${TORCHNATIVE_HOME:-$HOME/.cache/torchnative}"
python="${PYTHON:-python3}"
pyproject="$(cd "$(dirname "$0")/.." && pwd)/torch-face/pyproject.toml"
read -r requirement name want < <("$python" - "$pyproject" <<'PY'
import sys, tomllib
with open(sys.argv[1], "rb") as f:
    pin = tomllib.load(f)["tool"]["torchnative-face"]
print(pin["upstream-requirement"], pin["upstream-wheel"], pin["upstream-sha256"])
PY
)
dest="$home/wheels/$name"

if [ -f "$dest" ]; then
  got=$(sha256sum "$dest" | cut -d' ' -f1)
  if [ "$got" = "$want" ]; then
    echo "$dest"
    exit 0
  fi
  echo "fetch-torch-wheel: cached $dest has sha256 $got, want $want: downloading it again" >&2
fi
mkdir -p "$home/wheels"
# Download next to the destination (the wheel is about 540 MB: /tmp may be small), then move it.
tmp=$(mktemp -d "$home/wheels/.fetch.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# The platform flags pin the file whatever machine this runs on.
"$python" -m pip download --quiet --no-deps --only-binary=:all: \
  --platform manylinux_2_28_x86_64 --python-version 3.11 --implementation cp --abi cp311 \
  --dest "$tmp" "$requirement" >&2
if [ ! -f "$tmp/$name" ]; then
  echo "fetch-torch-wheel: pip download of $requirement gave [$(ls "$tmp" | tr '\n' ' ')], not $name" >&2
  exit 1
fi
got=$(sha256sum "$tmp/$name" | cut -d' ' -f1)
if [ "$got" != "$want" ]; then
  echo "fetch-torch-wheel: sha256 mismatch for $name: got $got, want $want" >&2
  exit 1
fi
mv "$tmp/$name" "$dest"
echo "$dest"
