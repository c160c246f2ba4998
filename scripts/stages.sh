# The stage runner of scripts/test.sh, sourced (not run): every stage runs, whatever failed
# before it, and the run ends with a table of stage, seconds and result.
#
#   source scripts/stages.sh
#   stage NAME COMMAND [ARG...]     run one stage (in a subshell, with `set -e`)
#   stages_summary                  print the table; returns 1 if any stage failed
#
# STAGES_ONLY (an extended regex) runs only the stages whose name it matches; the others are
# listed as "skipped (--only)". TORCHNATIVE_TEST_FAIL_STAGE=NAME makes that stage fail at once
# without running it: the check that a failure early in the run still runs everything after it
# (scripts/test-stages.sh tests this runner with it).

_stage_names=()
_stage_secs=()
_stage_results=()

stage() {
  local name="$1"
  shift
  if [[ -n "${STAGES_ONLY:-}" ]] && ! [[ "$name" =~ $STAGES_ONLY ]]; then
    _stage_names+=("$name")
    _stage_secs+=(0)
    _stage_results+=("skipped (--only)")
    return 0
  fi
  local start=$SECONDS rc
  echo "=== test.sh: stage $name (starts at ${SECONDS}s) ===" >&2
  if [[ "${TORCHNATIVE_TEST_FAIL_STAGE:-}" == "$name" ]]; then
    echo "test.sh: TORCHNATIVE_TEST_FAIL_STAGE=$name: failing this stage without running it" >&2
    rc=86
  else
    # A subshell with errexit on: a failing command ends this stage, not the run. Its exit
    # status is read with errexit off, so `set -e` stays in force inside it.
    set +e
    (
      set -euo pipefail
      "$@"
    )
    rc=$?
    set -e
  fi
  local secs=$((SECONDS - start)) result=passed
  [[ $rc -eq 0 ]] || result="FAILED (exit $rc)"
  _stage_names+=("$name")
  _stage_secs+=("$secs")
  _stage_results+=("$result")
  echo "=== test.sh: stage $name $result in ${secs}s (${SECONDS}s so far) ===" >&2
  return 0
}

stages_summary() {
  local i failed=0 ran=0 skipped=0 width=5
  for i in "${!_stage_names[@]}"; do
    ((${#_stage_names[$i]} > width)) && width=${#_stage_names[$i]}
  done
  echo
  echo "test.sh summary (${TEST_TIER:-gate}, ${SECONDS}s in all):"
  printf '  %-*s  %7s  %s\n' "$width" stage seconds result
  for i in "${!_stage_names[@]}"; do
    printf '  %-*s  %7s  %s\n' "$width" "${_stage_names[$i]}" "${_stage_secs[$i]}" "${_stage_results[$i]}"
    case "${_stage_results[$i]}" in
      passed) ran=$((ran + 1)) ;;
      FAILED*) failed=$((failed + 1)) ran=$((ran + 1)) ;;
      *) skipped=$((skipped + 1)) ;;
    esac
  done
  echo "stages: $((ran - failed)) passed, $failed failed, $skipped skipped"
  [[ $failed -eq 0 ]]
}
