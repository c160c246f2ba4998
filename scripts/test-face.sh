#!/usr/bin/env bash
# The torch face's tests: build and install the face into its own venv (scripts/face-venv.sh),
# then run its pytest suite (vendoring byte-equality, the torch._C module) and the golden
# harness's comparator self-test. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
export TORCHNATIVE_HOME="${TORCHNATIVE_HOME:-$HOME/.cache/torchnative}"
# Reuse what `cargo test --profile ci` built.
export TORCHNATIVE_FACE_PROFILE="${TORCHNATIVE_FACE_PROFILE:-ci}"
FACE_PYTHON="$(scripts/face-venv.sh)"
(cd torch-face/tests && "$FACE_PYTHON" -m pytest -q -p no:cacheprovider "$@")
