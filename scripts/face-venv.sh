#!/usr/bin/env bash
# Build (once) the torch face venv: numpy, pytest, transformers==5.24.0 (+ gguf, accelerate) and the
# torch face itself
# (torch-face/: upstream PyTorch 2.15.0's .py tree on our Rust torch._C), never real PyTorch.
# Prints the venv's python path on stdout; everything else goes to stderr.
#
# The venv lives at $TORCHNATIVE_HOME/face-venv (default ~/.cache/torchnative). The face is
# rebuilt and reinstalled only when what it is built from (crates/, torch-face/ less its golden/,
# tests/ and examples/, Cargo.toml, Cargo.lock, the cargo profile) changed since the last install, so a
# second run only checks. The extension is built with cargo's `release` profile, or the one in
# TORCHNATIVE_FACE_PROFILE (`ci` reuses what `cargo test --profile ci` built).
#
# A venv holding upstream PyTorch (torch/lib/libtorch_cpu.so or torch/_C.cpython-*.so) is refused.
set -euo pipefail
cd "$(dirname "$0")/.."
export TORCHNATIVE_HOME="${TORCHNATIVE_HOME:-$HOME/.cache/torchnative}"
VENV="$TORCHNATIVE_HOME/face-venv"
PY="$VENV/bin/python"
profile="${TORCHNATIVE_FACE_PROFILE:-release}"

refuse_real_torch() {
    "$PY" -I - "$VENV" <<'PY' >&2
import importlib.util, pathlib, sys
spec = importlib.util.find_spec("torch")
for loc in (spec.submodule_search_locations or []) if spec else []:
    d = pathlib.Path(loc)
    for found in [d / "lib" / "libtorch_cpu.so", *sorted(d.glob("_C.cpython-*.so"))]:
        if found.exists():
            sys.exit(f"face-venv: {sys.argv[1]} has upstream PyTorch installed ({found}); refusing to use "
                     f"it: the face venv must never hold real PyTorch (delete {sys.argv[1]} and rerun)")
PY
}

# The face is installed, complete, and ours (checked without importing torch).
face_installed() {
    "$PY" -I - <<'PY' 2>/dev/null
import importlib.metadata, importlib.util, pathlib
assert importlib.metadata.version("torch") == "2.15.0+torchnative"
torch_dir = pathlib.Path(list(importlib.util.find_spec("torch").submodule_search_locations)[0])
assert (torch_dir / "_torchnative_face.json").is_file() and (torch_dir / "_C.abi3.so").is_file()
PY
}

base_stamp="$VENV/.torchnative-face-base-v1"
if [[ ! -f "$base_stamp" ]]; then
    if [[ ! -x "$PY" ]]; then
        echo "face-venv: creating $VENV" >&2
        "${PYTHON:-python3}" -m venv "$VENV" >&2
    fi
    refuse_real_torch
    "$PY" -m pip install --quiet --upgrade pip >&2
    # transformers 5.24.0 does not require torch: this installs no PyTorch (checked just below).
    "$PY" -m pip install --quiet numpy pytest transformers==5.24.0 >&2
    refuse_real_torch
    touch "$base_stamp"
fi
refuse_real_torch

# A fingerprint of everything the face is built from (file names and contents, and the profile).
stamp_file="$VENV/.torchnative-face-build-stamp"
fingerprint="$(
    { echo "profile=$profile"
      git ls-files -co --exclude-standard -- crates torch-face Cargo.toml Cargo.lock \
        | grep -v -e '^torch-face/golden/' -e '^torch-face/tests/' -e '^torch-face/examples/' -e '/__pycache__/' \
        | LC_ALL=C sort | while read -r f; do
            if [[ -f "$f" ]]; then printf '%s\0' "$f"; fi
        done | xargs -0 -r sha256sum; } | sha256sum | cut -d' ' -f1
)"
if [[ ! -f "$stamp_file" || "$(cat "$stamp_file")" != "$fingerprint" ]] || ! face_installed; then
    # The backend would fetch the pinned upstream wheel itself; fetching it here shows progress.
    if [[ -z "${TORCHNATIVE_TORCH_WHEEL:-}" ]]; then
        scripts/fetch-torch-wheel.sh >/dev/null
    fi
    wheels="$(mktemp -d)"
    trap 'rm -rf "$wheels"' EXIT
    echo "face-venv: building the torch face (cargo profile $profile)" >&2
    start=$SECONDS
    # -v shows cargo's output as it builds.
    TORCHNATIVE_FACE_PROFILE="$profile" "$PY" -m pip wheel --no-build-isolation --no-deps -v \
        --wheel-dir "$wheels" ./torch-face >&2
    built=$SECONDS
    # pip byte-compiles the 2,500 upstream modules (about 5 s): imports then never compile them,
    # even where PYTHONDONTWRITEBYTECODE keeps Python from caching what it compiles.
    "$PY" -m pip install --quiet --force-reinstall --no-deps "$wheels"/torch-*.whl >&2
    # Then what it requires (upstream's pure-Python requirements), if anything is missing.
    "$PY" -m pip install --quiet "$wheels"/torch-*.whl >&2
    echo "face-venv: built in $((built - start))s, installed in $((SECONDS - built))s" >&2
    echo "$fingerprint" > "$stamp_file"
    refuse_real_torch
fi
# transformers loads GGUF files through gguf and accelerate (test_transformers_face.py); they go
# in after the face, so accelerate's torch requirement is met by it, never by real PyTorch.
if ! "$PY" -I -c "import importlib.util as u, sys; sys.exit(not (u.find_spec('gguf') and u.find_spec('accelerate')))"; then
    "$PY" -m pip install --quiet gguf accelerate >&2
    refuse_real_torch
fi
echo "$PY"
