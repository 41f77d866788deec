# Stage timing for .ci/run (sourced). Every stage is timed; on exit, pass or fail, a table prints each
# stage's seconds, the ten slowest translation units of every build (from ninja's log) and the ten slowest
# tests of every suite (from ctest's output), so a change that grows CI shows up in the run that grew it.
#   ci_stage NAME COMMAND...     run COMMAND (a command or a function) as stage NAME
#   ci_build_dir DIR             report DIR's .ninja_log in the summary
#   ci_test_log LOG              report LOG's ctest timings in the summary

ci_stage_file=$(mktemp)
ci_build_dirs=()
ci_test_logs=()
ci_start=$(date +%s)

# The command runs under the caller's errexit (a failure ends .ci/run, and the summary records the stage
# that was running as failed); it is not wrapped in `||`, which would switch errexit off inside it.
ci_current_stage=''
ci_current_start=0
ci_stage() {
  ci_current_stage=$1; shift
  ci_current_start=$(date +%s)
  echo "== $ci_current_stage =="
  "$@"
  ci_record 0
}
ci_record() {
  [[ -n $ci_current_stage ]] || return 0
  printf '%s\t%s\t%s\n' "$(($(date +%s) - ci_current_start))" "$1" "$ci_current_stage" >> "$ci_stage_file"
  ci_current_stage=''
}

ci_build_dir() { ci_build_dirs+=("$1"); }
ci_test_log() { ci_test_logs+=("$1"); }

# Ten slowest outputs of a ninja log (format v5: start_ms end_ms mtime output hash; a rebuilt output keeps
# its last line).
ci_slowest_units() {
  awk -F'\t' '!/^#/ && $4 ~ /\.(o|obj)$/ { t[$4] = $2 - $1 }
              END { for (o in t) printf "%8.1f  %s\n", t[o] / 1000, o }' "$1/.ninja_log" | sort -rn | awk 'NR <= 10'
}

# Ten slowest tests of a ctest log ("  12/650 Test  #12: name ......   Passed    3.21 sec"; the name may hold
# spaces, e.g. "  # GetParam() = ...").
ci_slowest_tests() {
  sed -nE 's/^ *[0-9]+\/[0-9]+ +Test +#[0-9]+: (.+[^ .]) *\.+ *[*A-Za-z ]+ +([0-9]+\.[0-9]+) sec$/\2\t\1/p' "$1" |
    sort -rn | awk -F'\t' 'NR <= 10 { printf "%8.1f  %s\n", $1, substr($2, 1, 110) }'
}

# The summary reads logs that may be partial (a failed stage): it never fails itself, and the run keeps the exit
# status it had. (The lists are cut with awk, not head: head's early exit would end sort with SIGPIPE.)
ci_summary() {
  local rc=$?
  set +e +o pipefail
  ci_record "$rc"
  echo
  echo "== CI timing (seconds) =="
  printf '%8s  %-6s %s\n' seconds status stage
  awk -F'\t' '{ printf "%8d  %-6s %s\n", $1, ($2 == 0 ? "ok" : "FAILED"), $3 }' "$ci_stage_file"
  printf '%8d  %-6s %s\n' "$(($(date +%s) - ci_start))" "" "total"
  local dir log
  for dir in "${ci_build_dirs[@]}"; do
    [[ -f $dir/.ninja_log ]] || continue
    echo "-- ten slowest translation units: $dir --"
    ci_slowest_units "$dir"
  done
  for log in "${ci_test_logs[@]}"; do
    [[ -f $log ]] || continue
    echo "-- ten slowest tests: $log --"
    ci_slowest_tests "$log"
  done
  rm -f "$ci_stage_file"
  return "$rc"
}
trap ci_summary EXIT
