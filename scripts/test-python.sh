#!/usr/bin/env bash
# Build the Python package (torchnative, with its Rust extension) into a venv of its own and run
# its tests against the real default model.
#
# The venv lives at $TORCHNATIVE_HOME/py-venv and is created once. The package is rebuilt and
# reinstalled only when its sources (crates/, python/, Cargo.toml, Cargo.lock) changed since the
# last install, so a second run goes straight to pytest. Extra arguments go to pytest.
#
# The extension is built with cargo's `ci` profile (like scripts/test.sh) into the workspace's
# target dir (or $CARGO_TARGET_DIR), so it reuses what `cargo test --profile ci` already built.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
export TORCHNATIVE_HOME="${TORCHNATIVE_HOME:-$HOME/.cache/torchnative}"
VENV="$TORCHNATIVE_HOME/py-venv"
PYTHON="${PYTHON:-python3}"

if [[ ! -x "$VENV/bin/python" ]]; then
    echo "test-python: creating $VENV" >&2
    "$PYTHON" -m venv "$VENV"
    "$VENV/bin/python" -m pip install --quiet --upgrade pip >&2
    "$VENV/bin/python" -m pip install --quiet "maturin>=1.5,<2" "pytest>=7" >&2
fi

# A fingerprint of everything the package is built from (file names and contents).
stamp_file="$VENV/.torchnative-build-stamp"
fingerprint="$(
    { git ls-files -co --exclude-standard -- crates python Cargo.toml Cargo.lock \
        | grep -v '^python/tests/' | LC_ALL=C sort | while read -r f; do
            if [[ -f "$f" ]]; then printf '%s\0' "$f"; fi
        done | xargs -0 sha256sum; } | sha256sum | cut -d' ' -f1
)"
if [[ ! -f "$stamp_file" || "$(cat "$stamp_file")" != "$fingerprint" ]] \
    || ! "$VENV/bin/python" -c "import torchnative._native" 2>/dev/null; then
    wheels="$(mktemp -d)"
    trap 'rm -rf "$wheels"' EXIT
    echo "test-python: building the torchnative wheel" >&2
    start=$SECONDS
    # maturin reads python/pyproject.toml (module name, profile, path of the crate) from there.
    (cd "$ROOT/python" && "$VENV/bin/maturin" build --out "$wheels") >&2
    "$VENV/bin/python" -m pip install --quiet --force-reinstall --no-deps "$wheels"/torchnative-*.whl >&2
    echo "test-python: built and installed in $((SECONDS - start))s" >&2
    echo "$fingerprint" > "$stamp_file"
fi

# The CLI cross-check uses the binary scripts/test.sh has just built with the same profile.
if [[ -z "${TORCHNATIVE_CLI:-}" && -x "${CARGO_TARGET_DIR:-$ROOT/target}/ci/torchnative" ]]; then
    export TORCHNATIVE_CLI="${CARGO_TARGET_DIR:-$ROOT/target}/ci/torchnative"
fi

# Tests must import the installed package, not the source tree (which lacks the extension).
cd "$ROOT/python/tests"
exec "$VENV/bin/python" -m pytest -q -p no:cacheprovider "$@"
