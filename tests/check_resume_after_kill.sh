#!/usr/bin/env bash
# --resume right after kill -9 of `kstudy run`, and two runs given the same --out, through the CLI:
#   kill -9 of the parent at 8 moments (ceilings, inside either replication, between them, while the
#   summaries are written), each followed at once by --resume: it completes (waiting, with one line, for a
#   replication child still being torn down), and the archive holds exactly the samples of an
#   uninterrupted run, marked complete
#   a second run on the archive of a live one: plain -> "already exists"; --resume and --overwrite ->
#   refused at once naming the live run's process; the first run completes unaffected
# Usage: check_resume_after_kill.sh KSTUDY_EXE SOURCE_DIR FLAVOUR   (exit 77 = skipped: a cuda build without a GPU)
set -uo pipefail
kstudy=$1; src=$2; flavour=${3:-cpu}
if [[ $flavour == cuda ]] && ! nvidia-smi -L > /dev/null 2>&1; then
  echo "skipped: the cuda flavour cannot initialise Kokkos without a GPU"
  exit 77
fi
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
# The runs' temporary files (a killed run cannot remove its definition file) go with the work folder.
export TMPDIR=$work
export KSTUDY_CEILING_BYTES=33554432 OMP_NUM_THREADS=2 OMP_PROC_BIND=false KSTUDY_QUIET=1
py=/usr/bin/python3
check=$src/tests/check_run_archive.py
tiny=$src/tests/shard_tiny.json  # 3 points x 2 replications, about 2 s on 2 cores
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }

"$kstudy" run "$tiny" --out "$work/clean.h5" -q > /dev/null 2> "$work/err" || fail "uninterrupted run: $(cat "$work/err")"
start=$(date +%s.%N)
"$kstudy" run "$tiny" --out "$work/timed.h5" -q > /dev/null 2>&1
took=$(echo "$(date +%s.%N) - $start" | bc)
echo "an uninterrupted run takes ${took} s"

# --- kill -9 at 8 moments, --resume at once -------------------------------------------------------------
waited=0; interrupted=0
for i in 1 2 3 4 5 6 7 8; do
  delay=$(echo "scale=3; $took * $i / 9" | bc)
  archive=$work/killed$i.h5
  # The run's length under a loaded CI machine is not the length timed above: a kill that came after the run
  # finished is tried again, sooner, so that the moments stay inside the run whatever the load does.
  for attempt in 1 2 3 4; do
    rm -f "$archive"
    "$kstudy" run "$tiny" --out "$archive" -q > /dev/null 2>&1 &
    parent=$!
    sleep "$delay"
    kill -9 "$parent" 2> /dev/null
    wait "$parent" 2> /dev/null  # as a shell does: the parent is gone, its child may still be exiting
    if [[ -e $archive ]] && $py "$check" fewer "$archive" "$work/clean.h5" shard_tiny > /dev/null 2>&1; then
      interrupted=$((interrupted + 1))
      break
    fi
    [[ -e $archive ]] || break  # killed before the archive existed: a moment of its own, kept
    delay=$(echo "scale=3; $delay / 2" | bc)
  done
  if ! "$kstudy" run "$tiny" --resume --out "$archive" -q > /dev/null 2> "$work/resume$i.err"; then
    fail "--resume after kill -9 at ${delay} s: $(cat "$work/resume$i.err")"
    continue
  fi
  grep -q "left by a run that is gone; waiting" "$work/resume$i.err" && waited=$((waited + 1))
  if $py "$check" same-points "$archive" "$work/clean.h5" shard_tiny > "$work/check" 2>&1 &&
     $py "$check" attr "$archive" complete true >> "$work/check" 2>&1; then
    pass "kill -9 at ${delay} s, --resume at once: complete, the samples of an uninterrupted run"
  else
    fail "kill -9 at ${delay} s, --resume: $(cat "$work/check")"
  fi
done
echo "interrupted mid-run: $interrupted of 8 kills; the resume waited for an exiting child: $waited of 8"
[[ $interrupted -ge 3 ]] || fail "only $interrupted of 8 kills interrupted the run: the test proves little"

# --- two runs, one --out ---------------------------------------------------------------------------------
"$kstudy" run "$tiny" --replications 4 --out "$work/ref4.h5" -q > /dev/null 2> "$work/err" || fail "4-replication run: $(cat "$work/err")"
"$kstudy" run "$tiny" --replications 4 --out "$work/shared.h5" -q > /dev/null 2> "$work/first.err" &
first=$!
for _ in $(seq 200); do [[ -s $work/shared.h5 ]] && break; sleep 0.05; done
[[ -s $work/shared.h5 ]] || fail "the first run wrote no archive within 10 s"
refuse() {  # DESCRIPTION MESSAGE-SUBSTRING ARGS...
  local what=$1 message=$2; shift 2
  local t0; t0=$(date +%s.%N)
  "$kstudy" run "$tiny" --replications 4 --out "$work/shared.h5" -q "$@" > /dev/null 2> "$work/second.err"
  local rc=$?
  local secs; secs=$(echo "$(date +%s.%N) - $t0" | bc)
  # The first run may end while this attempt runs (a loaded machine): a resume of its finished archive is then
  # right to succeed, and the attempt proves nothing either way.
  if [[ $rc -eq 0 ]] && ! kill -0 "$first" 2> /dev/null; then echo "note: $what: the first run ended meanwhile; not judged"
  elif [[ $rc -ne 1 ]]; then fail "$what: exit $rc, expected 1: $(cat "$work/second.err")"
  elif ! grep -qF -- "$message" "$work/second.err"; then fail "$what: no '$message' in: $(cat "$work/second.err")"
  elif [[ $(echo "$secs > 10" | bc) -eq 1 ]]; then fail "$what: took ${secs} s to refuse"
  else pass "$what refused in ${secs} s: $(head -c 220 "$work/second.err")"; fi
}
refuse "a second run on the same --out" "already exists"
# Several tries land between the first run's replication children, when no process holds HDF5's lock.
for try in 1 2 3; do
  kill -0 "$first" 2> /dev/null || break
  refuse "--resume of a live run's archive ($try)" "a live run; wait for it to finish or stop it, then --resume" --resume
  kill -0 "$first" 2> /dev/null || break
  refuse "--overwrite of a live run's archive ($try)" "a live run; wait for it to finish or stop it, then run again" --overwrite
  sleep 0.3
done
if wait "$first"; then
  if $py "$check" same-points "$work/shared.h5" "$work/ref4.h5" shard_tiny > "$work/check" 2>&1 &&
     $py "$check" attr "$work/shared.h5" complete true >> "$work/check" 2>&1; then
    pass "the first run completed unaffected: the samples of an undisturbed run, marked complete"
  else
    fail "the first run's archive after the refused second runs: $(cat "$work/check")"
  fi
else
  fail "the first run failed while a second was refused: $(cat "$work/first.err")"
fi

# --- killed before its first write: an empty archive ----------------------------------------------------
# A kill between the archive's creation and HDF5's first write leaves an empty file (seen once in CI's stress
# test): --resume starts it afresh; a file with bytes that are not HDF5 is still refused, never overwritten.
: > "$work/empty.h5"
if "$kstudy" run "$tiny" --out "$work/empty.h5" --resume -q > /dev/null 2> "$work/err" &&
  grep -q "starting it afresh" "$work/err" &&
  $py "$check" same-points "$work/empty.h5" "$work/clean.h5" shard_tiny > "$work/check" 2>&1; then
  pass "an empty archive (killed before its first write) is started afresh by --resume"
else
  fail "--resume of an empty archive: $(cat "$work/err" "$work/check" 2> /dev/null | tail -n 3)"
fi
echo "not an archive" > "$work/text.h5"
if "$kstudy" run "$tiny" --out "$work/text.h5" --resume -q > /dev/null 2> "$work/err"; then
  fail "--resume ran over a file that is not HDF5"
elif [[ $(cat "$work/text.h5") != "not an archive" ]]; then
  fail "--resume refused a file that is not HDF5 but changed it"
else
  pass "--resume refuses a non-empty file that is not HDF5 and leaves it as it was"
fi

echo "$failures failure(s)"
[[ $failures -eq 0 ]]
