#!/usr/bin/env bash
# The torch face's tests: build and install the face into its own venv (scripts/face-venv.sh),
# run its pytest suite (vendoring byte-equality, upstream's API on our torch._C, transformers
# imports), the golden harness's comparator self-test, and the golden comparison against
# upstream (every case; a case that agreed at the last update of
# torch-face/golden/not_agreeing.txt must still agree). Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
export TORCHNATIVE_HOME="${TORCHNATIVE_HOME:-$HOME/.cache/torchnative}"
# Reuse what `cargo test --profile ci` built.
export TORCHNATIVE_FACE_PROFILE="${TORCHNATIVE_FACE_PROFILE:-ci}"
FACE_PYTHON="$(scripts/face-venv.sh)"
ORACLE_PYTHON="${TORCHNATIVE_ORACLE_PYTHON:-$(scripts/oracle-venv.sh)}"
(cd torch-face/tests && TORCHNATIVE_ORACLE_PYTHON="$ORACLE_PYTHON" "$FACE_PYTHON" -m pytest -q -p no:cacheprovider "$@")

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
python3 torch-face/golden/compare.py --oracle "$ORACLE_PYTHON" --self-test
# compare.py exits 1 while some cases do not agree; the ratchet decides what is a failure.
python3 torch-face/golden/compare.py --oracle "$ORACLE_PYTHON" --face "$FACE_PYTHON" --allow-refused \
    --json "$work/golden.json" --report "$work/golden.md" --show 0 || [ $? -eq 1 ]
sed -n '1,25p' "$work/golden.md"
python3 torch-face/golden/ratchet.py --json "$work/golden.json"
# The derivative self-test: the gradient family again with every backward formula's gradient
# scaled by 1 + 1e-4; every gradient case that agrees must then be rejected.
python3 torch-face/golden/compare.py --oracle "$ORACLE_PYTHON" --face "$FACE_PYTHON" --module grad \
    --wrong-derivatives 1e-4
# Every causal-LM architecture of transformers (and the encoder families) as a tiny random
# model: built and saved by upstream, loaded and run by the face; fails on a disagreement.
python3 torch-face/sweep/arch_sweep.py --oracle "$ORACLE_PYTHON" --face "$FACE_PYTHON" \
    --report "$work/arch.md" --json "$work/arch.json"
sed -n '1,3p' "$work/arch.md"
# Upstream's own OpInfo samples as a second opinion: a measurement (per-OpInfo pass / fail /
# refused in the report), not a gate; it fails only when the sweep itself cannot run.
python3 torch-face/golden/opinfo_sweep.py --oracle "$ORACLE_PYTHON" --face "$FACE_PYTHON" \
    --report "$work/opinfo.md" --json "$work/opinfo.json"
sed -n '1,20p' "$work/opinfo.md"
# Complex samples apart, so that the real-dtype counts above stay comparable across stops.
python3 torch-face/golden/opinfo_sweep.py --oracle "$ORACLE_PYTHON" --face "$FACE_PYTHON" \
    --dtypes complex64 --report "$work/opinfo-complex.md" --json "$work/opinfo-complex.json"
sed -n '1,8p' "$work/opinfo-complex.md"
