#!/usr/bin/env bash
# The torch face's tests, in parts (all of them, in this order, when none is named):
#   tests        the pytest suite (vendoring byte-equality, upstream's API on our torch._C,
#                transformers, autograd, training, Tent, distributed); extra arguments go to pytest
#   golden       the harness's own unit tests, the golden harness's comparator self-test, then the comparison against
#                upstream, judged by the ratchet (a case that agreed at the last update of
#                torch-face/golden/not_agreeing.txt must still agree)
#   derivatives  the gradient family again with every backward formula's gradient scaled by
#                1 + 1e-4: every gradient case that agrees must then be rejected
#   arch         every causal-LM architecture of transformers (and the encoder families) as a
#                tiny random model, built by upstream, run by the face
#   opinfo       upstream's OpInfo samples (a measurement, --full only)
# TEST_TIER=gate (the default, as scripts/test.sh sets it) leaves out the pytest cases marked
# `full` (torch-face/tests/conftest.py), runs a deterministic slice of the
# golden cases, of the gradient family and of the architectures (`--slice`: every family and
# every ATen overload the cases name is kept) and leaves out opinfo; TEST_TIER=full runs all.
# Upstream's side of golden, derivatives, arch and opinfo comes from the oracle cache under
# $TORCHNATIVE_HOME/oracle-cache, keyed by the oracle's wheel and each case's source.
# The face is built and installed into its own venv by scripts/face-venv.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
export TORCHNATIVE_HOME="${TORCHNATIVE_HOME:-$HOME/.cache/torchnative}"
tier="${TEST_TIER:-gate}"
case "$tier" in
  gate | full) ;;
  *) echo "test-face: TEST_TIER must be gate or full, not '$tier'" >&2; exit 2 ;;
esac
parts=()
case "${1:-}" in
  tests | golden | derivatives | arch | opinfo) parts=("$1"); shift ;;
  *)
    parts=(tests golden derivatives arch)
    [[ $tier == full ]] && parts+=(opinfo)
    ;;
esac
# The gate's slices: about 1 in N cases (every family and overload kept).
golden_slice=(); derivatives_slice=(); arch_slice=()
if [[ $tier == gate ]]; then
  golden_slice=(--slice "${TORCHNATIVE_GOLDEN_SLICE:-8}")
  derivatives_slice=(--slice "${TORCHNATIVE_DERIVATIVES_SLICE:-4}")
  arch_slice=(--slice "${TORCHNATIVE_ARCH_SLICE:-4}")
fi
# Reuse what `cargo test --profile ci` built.
export TORCHNATIVE_FACE_PROFILE="${TORCHNATIVE_FACE_PROFILE:-ci}"
FACE_PYTHON="$(scripts/face-venv.sh)"
ORACLE_PYTHON="${TORCHNATIVE_ORACLE_PYTHON:-$(scripts/oracle-venv.sh)}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

for part in "${parts[@]}"; do
  echo "test-face: $part ($tier)" >&2
  case "$part" in
    tests)
      # The gate leaves the tests marked `full` out (torch-face/tests/conftest.py).
      tier_marks=()
      [[ $tier == gate ]] && tier_marks=(-m "not full")
      (cd torch-face/tests && TORCHNATIVE_ORACLE_PYTHON="$ORACLE_PYTHON" "$FACE_PYTHON" -m pytest -q -p no:cacheprovider \
        --strict-markers ${tier_marks[@]+"${tier_marks[@]}"} "$@")
      ;;
    golden)
      # The harness's own tests (stdlib only, fake sides): the oracle cache is used when warm
      # and never when stale, slices are deterministic and cover every family and overload.
      python3 -m unittest discover -s torch-face/golden/tests
      python3 -m unittest discover -s torch-face/sweep/tests
      python3 torch-face/golden/compare.py --oracle "$ORACLE_PYTHON" --self-test
      # compare.py exits 1 while some cases do not agree; the ratchet decides what is a failure.
      python3 torch-face/golden/compare.py --oracle "$ORACLE_PYTHON" --face "$FACE_PYTHON" --allow-refused \
        ${golden_slice[@]+"${golden_slice[@]}"} --json "$work/golden.json" --report "$work/golden.md" --show 0 \
        || [ $? -eq 1 ]
      sed -n '1,25p' "$work/golden.md"
      python3 torch-face/golden/ratchet.py --json "$work/golden.json"
      ;;
    derivatives)
      python3 torch-face/golden/compare.py --oracle "$ORACLE_PYTHON" --face "$FACE_PYTHON" --module grad \
        ${derivatives_slice[@]+"${derivatives_slice[@]}"} --wrong-derivatives 1e-4
      ;;
    arch)
      # Fails on a disagreement.
      python3 torch-face/sweep/arch_sweep.py --oracle "$ORACLE_PYTHON" --face "$FACE_PYTHON" \
        ${arch_slice[@]+"${arch_slice[@]}"} --report "$work/arch.md" --json "$work/arch.json"
      sed -n '1,3p' "$work/arch.md"
      ;;
    opinfo)
      # A measurement (per-OpInfo pass / fail / refused in the report), not a gate: it fails
      # only when the sweep itself cannot run.
      python3 torch-face/golden/opinfo_sweep.py --oracle "$ORACLE_PYTHON" --face "$FACE_PYTHON" \
        --report "$work/opinfo.md" --json "$work/opinfo.json"
      sed -n '1,20p' "$work/opinfo.md"
      # Complex samples apart, so that the real-dtype counts above stay comparable across stops.
      python3 torch-face/golden/opinfo_sweep.py --oracle "$ORACLE_PYTHON" --face "$FACE_PYTHON" \
        --dtypes complex64 --report "$work/opinfo-complex.md" --json "$work/opinfo-complex.json"
      sed -n '1,8p' "$work/opinfo-complex.md"
      ;;
  esac
done
