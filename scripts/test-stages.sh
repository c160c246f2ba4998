#!/usr/bin/env bash
# Self-test of scripts/stages.sh, the stage runner of scripts/test.sh (a second; run by it first):
# a stage that fails early, or is made to fail with TORCHNATIVE_TEST_FAIL_STAGE, does not stop
# the later stages; the summary table lists every stage with its result; the run exits non-zero
# when any stage failed and zero when none did; --only skips the others and says so.
set -euo pipefail
cd "$(dirname "$0")/.."
# The runs below set these themselves; the ones test.sh was given must not reach them.
unset STAGES_ONLY TORCHNATIVE_TEST_FAIL_STAGE
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

fail() {
  echo "test-stages: $*" >&2
  exit 1
}

# A run of four stages; the second fails by itself, the third may be failed by the variable.
cat >"$work/run.sh" <<'EOF'
set -euo pipefail
source scripts/stages.sh
log="$1"
two() {
  echo two >>"$log"
  false
  echo two-after-false >>"$log"
}
stage one bash -c "echo one >>'$log'"
stage two two
stage three bash -c "echo three >>'$log'"
stage four bash -c "echo four >>'$log'"
stages_summary
EOF

# 1. The early failure: every later stage still runs, the table names it, exit non-zero.
rc=0
bash "$work/run.sh" "$work/log1" >"$work/out1" 2>&1 || rc=$?
[[ $rc -ne 0 ]] || fail "a failed stage did not make the run exit non-zero"
[[ "$(cat "$work/log1")" == $'one\ntwo\nthree\nfour' ]] \
  || fail "stages after a failure did not all run, or a failing command did not end its stage: $(tr '\n' ' ' <"$work/log1")"
grep -Eq '^  two +[0-9]+  FAILED \(exit 1\)$' "$work/out1" || fail "the table does not show stage two failed: $(cat "$work/out1")"
grep -Eq '^  four +[0-9]+  passed$' "$work/out1" || fail "the table does not show stage four passed"
grep -qx 'stages: 3 passed, 1 failed, 0 skipped' "$work/out1" || fail "wrong closing line: $(tail -n 1 "$work/out1")"

# 2. An injected failure of another stage: that stage does not run, the others do.
rc=0
TORCHNATIVE_TEST_FAIL_STAGE=one bash "$work/run.sh" "$work/log2" >"$work/out2" 2>&1 || rc=$?
[[ $rc -ne 0 ]] || fail "an injected failure did not make the run exit non-zero"
[[ "$(cat "$work/log2")" == $'two\nthree\nfour' ]] || fail "injected failure: wrong stages ran: $(tr '\n' ' ' <"$work/log2")"
grep -Eq '^  one +[0-9]+  FAILED \(exit 86\)$' "$work/out2" || fail "the table does not show the injected failure"

# 3. No failure: exit 0. --only: the others are skipped, and listed as such.
sed -i 's/^  false$/  true/' "$work/run.sh"
STAGES_ONLY='^(one|four)$' bash "$work/run.sh" "$work/log3" >"$work/out3" 2>&1 \
  || fail "a run with no failed stage exited non-zero: $(cat "$work/out3")"
[[ "$(cat "$work/log3")" == $'one\nfour' ]] || fail "--only ran the wrong stages: $(tr '\n' ' ' <"$work/log3")"
grep -Eq '^  two +0  skipped \(--only\)$' "$work/out3" || fail "a skipped stage is not listed as skipped"
grep -qx 'stages: 2 passed, 0 failed, 2 skipped' "$work/out3" || fail "wrong closing line with --only"
echo "test-stages: the stage runner runs every stage after a failure, reports it and exits non-zero"
