#!/usr/bin/env bash
# kill -9 at random moments, each followed at once by --resume, on a loaded machine: the resume must never be
# refused (a run that is gone holds nothing a resume has to wait on for long), must keep every finished point
# unchanged, and the completed archive must hold exactly the samples of an uninterrupted run, once each.
#
#   stress_resume_after_kill.sh KSTUDY_EXE SOURCE_DIR [--kills N] [--experiment NAME_OR_JSON] [--chain K]
#                               [--load N] [--seed S] [--keep DIR] [--flavour cpu|cuda]
#
# Chains: a fresh run is killed at a random moment, the --resume started at once is killed at another, and so
# on K times (or until a resume finishes first); the chain's last resume then runs to the end and its archive is
# compared with the clean run's (check_run_archive.py same-points, attr complete) and with a copy of the archive
# taken right after every kill (check_run_archive.py kept: same keys, same seconds). N kills in all. --load N
# starts N CPU burners for the whole test (default: one per core), the machine a cluster preempts jobs on.
# A resume that exits non-zero by itself (not killed by the test) is a failure, with its message.
# Defaults: 12 kills of tests/shard_tiny.json in chains of 4 (CI: about a minute on 2 cores).
# Exit 0 when every chain passed; 1 otherwise; 77 (skipped) for a cuda build on a machine without a GPU. The summary line says how many kills, resumes, waits.
set -uo pipefail
kstudy=$1; src=$2; shift 2
kills=12; experiment=$src/tests/shard_tiny.json; chain=4; load=$(nproc); seed=$RANDOM; keep=''; flavour=cpu
while [[ $# -gt 0 ]]; do
  case $1 in
    --kills) kills=$2; shift 2 ;;
    --experiment) experiment=$2; shift 2 ;;
    --chain) chain=$2; shift 2 ;;
    --load) load=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --keep) keep=$2; shift 2 ;;
    --flavour) flavour=$2; shift 2 ;;
    *) echo "stress_resume_after_kill.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
if [[ $flavour == cuda ]] && ! nvidia-smi -L > /dev/null 2>&1; then
  echo "skipped: the cuda flavour cannot initialise Kokkos without a GPU"
  exit 77
fi
work=$(mktemp -d)
# The runs' temporary files (a killed run cannot remove its definition file) go with the work folder.
export TMPDIR=$work
burners=()
cleanup() {
  for b in "${burners[@]}"; do kill "$b" 2> /dev/null; done
  [[ -n $keep ]] && { mkdir -p "$keep"; cp "$work"/*.log "$keep"/ 2> /dev/null; }
  # A failed chain's archives too: the damaged file is the evidence.
  [[ -n $keep && ${failures:-0} -gt 0 ]] && cp "$work"/*.h5 "$keep"/ 2> /dev/null
  rm -rf "$work"
}
trap cleanup EXIT
export KSTUDY_CEILING_BYTES=${KSTUDY_CEILING_BYTES:-33554432} OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} \
  OMP_PROC_BIND=false KSTUDY_QUIET=1
py=/usr/bin/python3
check=$src/tests/check_run_archive.py
RANDOM=$seed
echo "seed $seed; $kills kills in chains of $chain; $load CPU burners; experiment $experiment"

# The experiment's name, as the archive stores it.
if [[ -f $experiment ]]; then
  name=$($py -c 'import json,sys; print(json.load(open(sys.argv[1]))["name"])' "$experiment")
else
  name=$experiment
fi

for ((i = 0; i < load; i++)); do
  (while :; do :; done) &
  burners+=($!)
done

"$kstudy" run "$experiment" --out "$work/clean.h5" -q > /dev/null 2> "$work/clean.err" ||
  { echo "FAIL: the uninterrupted run: $(cat "$work/clean.err")"; exit 1; }
start=$(date +%s%N)
"$kstudy" run "$experiment" --out "$work/timed.h5" -q > /dev/null 2>&1
took_ms=$((($(date +%s%N) - start) / 1000000))
rm -f "$work/timed.h5"
echo "an uninterrupted run under this load takes $((took_ms / 1000)).$((took_ms % 1000 / 100)) s"

failures=0; done_kills=0; resumes=0; waited=0; chains=0; early=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
# A random moment in [50 ms, the whole run], in seconds (drawn in this shell: a subshell's RANDOM repeats).
next_moment() {
  local ms=$((50 + (RANDOM * 32768 + RANDOM) % (took_ms - 49)))
  moment=$((ms / 1000)).$(printf '%03d' $((ms % 1000)))
}

while ((done_kills < kills)); do
  chains=$((chains + 1))
  archive=$work/chain$chains.h5
  rm -f "$archive" "$work"/snap-*.h5
  args=()
  for ((k = 0; k < chain && done_kills < kills; k++)); do
    [[ ${#args[@]} -gt 0 ]] && resumes=$((resumes + 1))
    "$kstudy" run "$experiment" --out "$archive" -q "${args[@]}" > /dev/null 2> "$work/step.err" &
    pid=$!
    next_moment
    sleep "$moment"
    if kill -9 "$pid" 2> /dev/null; then
      wait "$pid" 2> /dev/null
      done_kills=$((done_kills + 1))
      [[ -e $archive ]] && cp "$archive" "$work/snap-$k.h5"
    else  # it ended first: a finished resume ends the chain early, a failed one is a finding
      wait "$pid"; rc=$?
      if [[ $rc -ne 0 ]]; then
        fail "chain $chains step $k (${args[*]:-fresh run}) exited $rc by itself: $(cat "$work/step.err")"
        break
      fi
      early=$((early + 1))
    fi
    grep -q "waiting up to" "$work/step.err" && waited=$((waited + 1))
    cat "$work/step.err" >> "$work/chain$chains.log"
    [[ -e $archive ]] && args=(--resume)
  done
  [[ $failures -eq 0 ]] || break
  # The chain's last resume, at once, to the end.
  if [[ -e $archive ]]; then
    resumes=$((resumes + 1))
    if ! "$kstudy" run "$experiment" --out "$archive" --resume -q > /dev/null 2> "$work/last.err"; then
      fail "chain $chains: the final --resume after a kill: $(cat "$work/last.err")"
      break
    fi
    grep -q "waiting up to" "$work/last.err" && waited=$((waited + 1))
  else
    "$kstudy" run "$experiment" --out "$archive" -q > /dev/null 2> "$work/last.err" ||
      { fail "chain $chains: a fresh run after a kill before the archive existed: $(cat "$work/last.err")"; break; }
  fi
  snapshots=("$work"/snap-*.h5)
  [[ -e ${snapshots[0]} ]] || snapshots=()
  if ! { $py "$check" same-points "$archive" "$work/clean.h5" "$name" &&
         $py "$check" attr "$archive" complete true &&
         { [[ ${#snapshots[@]} -eq 0 ]] || $py "$check" kept "$archive" "$name" "${snapshots[@]}"; }; } \
       > "$work/check.out" 2>&1; then
    fail "chain $chains: $(cat "$work/check.out")"
    break
  fi
  echo "chain $chains: ok ($done_kills kills so far): $(tail -n 1 "$work/check.out")"
done
echo "$done_kills kills in $chains chains, $resumes resumes (none refused), $waited waited for a holder, $early" \
  "ended before their kill; seed $seed"
echo "$((chains - failures)) passed, $failures failed"
[[ $failures -eq 0 ]]
