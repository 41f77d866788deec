#!/usr/bin/env bash
# The faults a shared machine (a login node, a busy workstation, a cluster node) adds to `kstudy run`, each with
# what kstudy promises (docs/manual.md, the fault table): a clear one-line message, the documented exit code,
# and nothing finished lost.
#   1. the output folder fills up mid-run (a small tmpfs): exit 75, the archive opens, --resume completes it
#      once there is room (the tmpfs grown) to exactly the uninterrupted run's samples
#   2. a read-only folder: refused before measuring, exit 1, a line naming the folder, no archive; --resume of
#      an archive in a folder made read-only: refused the same way, the archive unchanged
#   3. the archive's folder removed mid-run: the run stops before its next replication, exit 1, a line saying
#      the archive was removed and where its finished points were saved (copied out of the file the run still
#      holds open, into the working directory); --resume of that copy completes the study; the folder is not
#      made again
#   4. two different studies pointed at one archive: the second is refused while the first runs (its PID) and
#      after it ended (--resume of another study's archive names both studies); the first's archive intact
#   5. SIGSTOP of the whole run (parent and replication child) for a long pause, then SIGCONT: it completes,
#      exit 0, the samples of an uninterrupted run
#   6. a memory limit: a cgroup memory limit that the replication child exceeds (the kernel's OOM killer),
#      and an address-space limit (ulimit -v) that Kokkos' allocation meets: a line naming the limit, the
#      finished points kept, --resume without the limit completes
# Usage: check_shared_machine_faults.sh KSTUDY_EXE SOURCE_DIR FLAVOUR
# Cases needing root (tmpfs mounts, cgroups) say "skipped" when the machine does not allow them; exit 77 when
# every case was skipped (a cuda build without a GPU).
set -uo pipefail
kstudy=$(realpath "$1"); src=$(realpath "$2"); flavour=${3:-cpu}
if [[ $flavour == cuda ]] && ! nvidia-smi -L > /dev/null 2>&1; then
  echo "skipped: the cuda flavour cannot initialise Kokkos without a GPU"
  exit 77
fi
work=$(mktemp -d)
# The runs' temporary files (a killed run cannot remove its definition file) go with the work folder.
export TMPDIR=$work
mounts=()
cgroup=''
cleanup() {
  for m in "${mounts[@]}"; do umount "$m" 2> /dev/null; done
  [[ -n $cgroup ]] && rmdir "$cgroup" 2> /dev/null
  rm -rf "$work"
}
trap cleanup EXIT
export KSTUDY_CEILING_BYTES=33554432 OMP_NUM_THREADS=2 OMP_PROC_BIND=false KSTUDY_QUIET=1
py=/usr/bin/python3
check=$src/tests/check_run_archive.py
tiny=$src/tests/shard_tiny.json  # 3 points x 2 replications, about 2 s on 2 cores
failures=0; skipped=0; passed=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; passed=$((passed + 1)); }
skip() { echo "skipped: $*"; skipped=$((skipped + 1)); }
same_as_clean() {  # ARCHIVE [EXPERIMENT_NAME CLEAN]
  $py "$check" same-points "$1" "${3:-$work/clean.h5}" "${2:-shard_tiny}" > "$work/check" 2>&1 &&
    $py "$check" attr "$1" complete true >> "$work/check" 2>&1
}
# Runs "$@" in the background and echoes its PID once its archive ($1 of the caller) has appeared.
wait_for_file() {  # FILE SECONDS
  local i
  for ((i = 0; i < $2 * 20; i++)); do [[ -s $1 ]] && return 0; sleep 0.05; done
  return 1
}
mount_tmpfs() {  # DIR SIZE
  mkdir -p "$1"
  mount -t tmpfs -o "size=$2" tmpfs "$1" 2> /dev/null || return 1
  mounts+=("$1")
}

"$kstudy" run "$tiny" --out "$work/clean.h5" -q > /dev/null 2> "$work/err" || fail "uninterrupted run: $(cat "$work/err")"
clean_bytes=$(stat -c %s "$work/clean.h5")

# --- 1. the folder fills up mid-run ------------------------------------------------------------------------
full=$work/full
# Room for the start (metadata, ceilings, a margin of 16 kB) and about half of the samples.
if mount_tmpfs "$full" "$((clean_bytes * 2 / 3))"; then
  KSTUDY_WRITE_MARGIN_BYTES=16384 "$kstudy" run "$tiny" --out "$full/a.h5" -q > /dev/null 2> "$work/full.err"
  rc=$?
  if [[ $rc -ne 75 ]]; then fail "a full file system: exit $rc, expected 75: $(tail -n 3 "$work/full.err")"
  elif ! grep -q "stopping before a write" "$work/full.err"; then fail "a full file system: no message: $(cat "$work/full.err")"
  elif ! $py "$check" fewer "$full/a.h5" "$work/clean.h5" shard_tiny > "$work/check" 2>&1; then
    fail "a full file system: the archive is unreadable or was not cut short: $(cat "$work/check")"
  elif ! mount -o remount,size=64m "$full" 2> /dev/null; then skip "a full file system: cannot grow the tmpfs"
  elif ! "$kstudy" run "$tiny" --resume --out "$full/a.h5" -q > /dev/null 2> "$work/err"; then
    fail "a full file system: --resume once there is room: $(cat "$work/err")"
  elif ! same_as_clean "$full/a.h5"; then fail "a full file system, resumed: $(cat "$work/check")"
  else pass "a full file system mid-run: exit 75, '$(grep -m1 -o 'stopping before a write[^;]*' "$work/full.err")', resumed to the uninterrupted run's samples"
  fi
else
  skip "a full file system: this machine does not allow a tmpfs mount"
fi

# --- 2. a read-only folder -------------------------------------------------------------------------------
ro=$work/ro
if mount_tmpfs "$ro" 64m; then
  cp "$work/clean.h5" "$ro/done.h5"
  "$kstudy" run "$tiny" --out "$ro/done.h5" --replications 3 -q > /dev/null 2>&1  # an archive to --resume: 2 of 3
  mount -o remount,ro "$ro"
  before=$(sha256sum "$ro/done.h5" | cut -d' ' -f1)
  "$kstudy" run "$tiny" --out "$ro/new.h5" -q > /dev/null 2> "$work/ro.err"
  rc=$?
  if [[ $rc -ne 1 ]]; then fail "a read-only folder: exit $rc, expected 1: $(cat "$work/ro.err")"
  elif [[ -e $ro/new.h5 ]]; then fail "a read-only folder: an archive was written"
  elif [[ $(wc -l < "$work/ro.err") -ne 1 ]] || ! grep -q "$ro" "$work/ro.err"; then
    fail "a read-only folder: not one line naming the folder: $(cat "$work/ro.err")"
  else pass "a read-only folder: refused, exit 1: $(cat "$work/ro.err")"
  fi
  "$kstudy" run "$tiny" --out "$ro/done.h5" --resume -q > /dev/null 2> "$work/ro.err"
  rc=$?
  if [[ $rc -ne 1 ]]; then fail "--resume in a read-only folder: exit $rc, expected 1: $(cat "$work/ro.err")"
  elif [[ $(sha256sum "$ro/done.h5" | cut -d' ' -f1) != "$before" ]]; then fail "--resume in a read-only folder changed the archive"
  else pass "--resume in a read-only folder: refused, exit 1, archive unchanged: $(head -n 1 "$work/ro.err")"
  fi
else
  skip "a read-only folder: this machine does not allow a tmpfs mount (and root writes through permission bits)"
fi

# --- 3. the archive's folder removed mid-run --------------------------------------------------------------
"$kstudy" run "$tiny" --replications 4 --out "$work/ref4.h5" -q > /dev/null 2>&1
gone=$work/gone/sub
mkdir -p "$gone"
(cd "$work" && exec "$kstudy" run "$tiny" --replications 4 --out "$gone/a.h5" -q) > /dev/null 2> "$work/gone.err" &
pid=$!
if wait_for_file "$gone/a.h5" 20; then
  sleep 0.5
  rm -rf "$work/gone"
  wait "$pid"; rc=$?
  saved=$(grep -o "saved in [^:]*" "$work/gone.err" | head -n 1 | cut -c10-)
  if [[ $rc -eq 0 ]]; then echo "note: the run ended before its folder went; not judged"
  elif [[ $rc -ne 1 ]] || ! grep -q "was removed while this run wrote it" "$work/gone.err"; then
    fail "the folder removed mid-run: exit $rc, no clear message: $(cat "$work/gone.err")"
  elif [[ -e $work/gone ]]; then fail "the folder removed mid-run: kstudy made it again"
  elif [[ -z $saved || ! -s $saved ]]; then fail "the folder removed mid-run: nothing saved: $(cat "$work/gone.err")"
  elif ! "$kstudy" run "$tiny" --replications 4 --resume --out "$saved" -q > /dev/null 2> "$work/err"; then
    fail "the folder removed mid-run: --resume of the saved copy: $(cat "$work/err")"
  elif ! same_as_clean "$saved" shard_tiny "$work/ref4.h5"; then fail "the folder removed mid-run, resumed copy: $(cat "$work/check")"
  else pass "the archive's folder removed mid-run: exit 1, its finished points saved, the copy resumed to the uninterrupted run's samples"
  fi
else
  wait "$pid"; fail "the folder removed mid-run: no archive appeared: $(cat "$work/gone.err")"
fi

# --- 4. two different studies, one archive ----------------------------------------------------------------
other=$work/other.json
sed -e 's/"shard_tiny"/"other_tiny"/' -e 's/"seed": 11/"seed": 12/' "$tiny" > "$other"
"$kstudy" run "$tiny" --replications 4 --out "$work/two.h5" -q > /dev/null 2> "$work/first.err" &
first=$!
wait_for_file "$work/two.h5" 20
"$kstudy" run "$other" --out "$work/two.h5" --resume -q > /dev/null 2> "$work/second.err"
rc=$?
if ! kill -0 "$first" 2> /dev/null; then echo "note: the first study ended before the second tried; not judged"
elif [[ $rc -ne 1 ]] || ! grep -q "PID $first" "$work/second.err"; then
  fail "another study's --resume on a live run's archive: exit $rc: $(cat "$work/second.err")"
else pass "another study on a live run's archive: refused naming PID $first"
fi
wait "$first" || fail "the first study failed: $(cat "$work/first.err")"
"$kstudy" run "$other" --out "$work/two.h5" --resume -q > /dev/null 2> "$work/second.err"
rc=$?
if [[ $rc -ne 1 ]] || ! grep -q "shard_tiny" "$work/second.err" || ! grep -q "other_tiny" "$work/second.err"; then
  fail "another study's --resume on a finished archive: exit $rc, expected 1 naming both: $(cat "$work/second.err")"
else pass "another study's --resume on a finished archive: refused: $(head -n 1 "$work/second.err")"
fi
same_as_clean "$work/two.h5" shard_tiny "$work/ref4.h5" || fail "the first study's archive after the second's tries: $(cat "$work/check")"

# --- 5. SIGSTOP / SIGCONT ----------------------------------------------------------------------------------
setsid "$kstudy" run "$tiny" --out "$work/stop.h5" -q > /dev/null 2> "$work/stop.err" &
pid=$!
if wait_for_file "$work/stop.h5" 20; then
  kill -STOP -- "-$pid"
  sleep "${KSTUDY_TEST_PAUSE_SECONDS:-5}"
  kill -CONT -- "-$pid"
fi
wait "$pid"; rc=$?
if [[ $rc -ne 0 ]]; then fail "SIGSTOP, a pause, SIGCONT: exit $rc: $(cat "$work/stop.err")"
elif ! same_as_clean "$work/stop.h5"; then fail "SIGSTOP, a pause, SIGCONT: $(cat "$work/check")"
else pass "SIGSTOP of the whole run for ${KSTUDY_TEST_PAUSE_SECONDS:-5} s, then SIGCONT: completed, the uninterrupted run's samples"
fi

# --- 6. memory limits ---------------------------------------------------------------------------------------
big=$work/big.json
cat > "$big" <<'JSON'
{"name": "big", "operation": "scoring", "rows": [1000, 4000000], "features": [16],
 "variants": ["cpu_reference", "fused_kokkos_feature_major"], "timers": ["host_wall"],
 "protocol": {"warmups": 1, "trials": 2, "replications": 1, "seed": 5, "threads": 2, "shuffle": false}}
JSON
# A sanitized build reserves terabytes of address space for its shadow memory (it cannot start under ulimit -v)
# and carries hundreds of MB of its own (quarantine, shadow): a memory limit would end it anywhere, the parent
# included, and prove nothing about kstudy. Both memory cases run on the plain builds.
sanitized=0
{ (ulimit -v $((1200 << 10)); exec "$kstudy" --help) > /dev/null 2>&1; } 2> /dev/null || sanitized=1
# The cgroup (v1 or v2) this shell is in, with a child of 150 MB that the 4M-row point (~400 MB) exceeds.
memory_root=''
if [[ -d /sys/fs/cgroup/memory ]]; then
  memory_root=/sys/fs/cgroup/memory$(awk -F: '$2 ~ /(^|,)memory(,|$)/ {print $3}' /proc/self/cgroup)
  limit_file=memory.limit_in_bytes
elif [[ -f /sys/fs/cgroup/cgroup.controllers ]]; then
  memory_root=/sys/fs/cgroup$(awk -F: '$1 == "0" {print $3}' /proc/self/cgroup)
  limit_file=memory.max
fi
if [[ $sanitized -eq 1 ]]; then
  skip "a cgroup memory limit: a sanitized build (its own memory would meet the limit first)"
elif [[ -n $memory_root ]] && mkdir "$memory_root/kstudy-test-$$" 2> /dev/null &&
   echo $((150 << 20)) > "$memory_root/kstudy-test-$$/$limit_file" 2> /dev/null; then
  cgroup=$memory_root/kstudy-test-$$
  [[ -f $cgroup/memory.memsw.limit_in_bytes ]] && echo $((150 << 20)) > "$cgroup/memory.memsw.limit_in_bytes" 2> /dev/null
  (echo "$BASHPID" > "$cgroup/cgroup.procs" && exec "$kstudy" run "$big" --out "$work/oom.h5" -q) > /dev/null 2> "$work/oom.err"
  rc=$?
  if [[ $rc -eq 0 ]]; then skip "a cgroup memory limit: the run fitted in 150 MB"
  elif ! grep -q "most likely for memory" "$work/oom.err"; then fail "a cgroup memory limit: exit $rc, no clear message: $(cat "$work/oom.err")"
  elif ! "$kstudy" run "$big" --resume --out "$work/oom.h5" -q > /dev/null 2> "$work/err"; then
    fail "a cgroup memory limit: --resume without it: $(cat "$work/err")"
  else pass "a cgroup memory limit (the OOM killer): exit $rc, '$(grep -m1 -o "was killed.*for memory" "$work/oom.err")', resumed"
  fi
else
  skip "a cgroup memory limit: no writable memory cgroup here"
fi
if [[ $sanitized -eq 1 ]]; then
  skip "ulimit -v: this build cannot start under an address-space limit (a sanitized build)"
  rc=skip
else
  (ulimit -v $((1200 << 10)); exec "$kstudy" run "$big" --out "$work/vm.h5" -q) > /dev/null 2> "$work/vm.err"
  rc=$?
fi
if [[ $rc == skip ]]; then :
elif [[ $rc -ne 0 && $rc -ne 1 ]]; then fail "ulimit -v: exit $rc (a crash?): $(tail -n 3 "$work/vm.err")"
elif [[ $rc -eq 1 ]] && ! grep -qiE "memory|allocate|allocation" "$work/vm.err"; then fail "ulimit -v: exit 1 without naming memory: $(cat "$work/vm.err")"
else
  echo "ulimit -v 1.2 GB: exit $rc: $(grep -m1 -iE 'memory|allocate|allocation|skip' "$work/vm.err")"
  "$kstudy" run "$big" --resume --out "$work/vm.h5" -q > /dev/null 2> "$work/err" ||
    [[ ! -e $work/vm.h5 ]] || fail "ulimit -v: --resume without the limit: $(cat "$work/err")"
  pass "an address-space limit (ulimit -v): a clear outcome, exit $rc, resumable"
fi

echo "$passed passed, $failures failed, $skipped skipped"
[[ $failures -eq 0 ]] || exit 1
[[ $passed -gt 0 ]] || exit 77
