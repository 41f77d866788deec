#!/usr/bin/env bash
# Soak: one long study, interrupted again and again (SIGINT, then kill -9, in turn) and resumed at once, for
# MINUTES, then stopped with a last SIGINT; the kstudy processes' memory (RSS) and open descriptors are sampled
# every 2 s. Passes when every (variant, point, replication, timer) the archive holds has its trials once (no
# unit half-kept), each resume kept what was finished (check_run_archive.py kept on a copy taken after every
# interrupt), and neither memory nor open descriptors grow: the peak RSS of the last third of the segments
# within 20% of the first third's, the median of the segments' peak descriptor counts not higher.
#   soak_resume.sh KSTUDY_EXE SOURCE_DIR [MINUTES=30] [INTERRUPT_SECONDS=90] [OUT_DIR]
# Not in ctest (it is long by design); its figures are quoted in the issue's closing note.
set -uo pipefail
kstudy=$(realpath "$1"); src=$(realpath "$2"); minutes=${3:-30}; every=${4:-90}; out=${5:-$(mktemp -d)}
mkdir -p "$out"
export KSTUDY_CEILING_BYTES=33554432 OMP_NUM_THREADS=2 OMP_PROC_BIND=false KSTUDY_QUIET=1
py=/usr/bin/python3
check=$src/tests/check_run_archive.py
# More replications than MINUTES can run on 2 cores: the soak ends on its clock, not the study's.
replications=$((minutes * 10))
study=$out/soak.json
cat > "$study" <<JSON
{"name": "soak", "operation": "scoring", "rows": [1000, 4099, 65536, 262144, 1048576], "features": [16, 64],
 "variants": ["cpu_reference", "composed", "fused_kokkos_feature_major", "fused_kokkos_row_major"],
 "timers": ["host_wall", "resident_wall", "one_shot"],
 "protocol": {"warmups": 1, "trials": 5, "replications": $replications, "seed": 31, "threads": 2, "shuffle": true}}
JSON
archive=$out/soak.h5
rm -f "$archive" "$out"/snap-*.h5 "$out/usage.tsv"
echo -e "segment\tseconds\tpid\trss_kb\tfds" > "$out/usage.tsv"
start=$(date +%s)
segment=0; interrupts=0; sigint=0; sigkill=0
args=()
while :; do
  segment=$((segment + 1))
  "$kstudy" run "$study" --out "$archive" -q "${args[@]}" > /dev/null 2> "$out/segment$segment.err" &
  pid=$!
  t0=$(date +%s)
  while kill -0 "$pid" 2> /dev/null && (($(date +%s) - t0 < every)); do
    for p in $pid $(pgrep -P "$pid"); do
      rss=$(awk '/^VmRSS/ {print $2}' "/proc/$p/status" 2> /dev/null)
      fds=$(ls "/proc/$p/fd" 2> /dev/null | wc -l)
      [[ -n $rss ]] && echo -e "$segment\t$(($(date +%s) - start))\t$p\t$rss\t$fds" >> "$out/usage.tsv"
    done
    sleep 2
  done
  if ! kill -0 "$pid" 2> /dev/null; then
    wait "$pid"; rc=$?
    [[ $rc -eq 0 ]] || { echo "FAIL: segment $segment exited $rc: $(cat "$out/segment$segment.err")"; exit 1; }
    echo "segment $segment: the study completed"
    break
  fi
  if (($(date +%s) - start >= minutes * 60)); then  # soaked long enough: a last SIGINT ends it
    kill -INT "$pid"; wait "$pid"; rc=$?
    [[ $rc -eq 130 ]] || { echo "FAIL: the last SIGINT: exit $rc: $(cat "$out/segment$segment.err")"; exit 1; }
    echo "segment $segment: $minutes minutes reached; stopped with SIGINT"
    break
  fi
  interrupts=$((interrupts + 1))
  if ((interrupts % 2)); then
    kill -INT "$pid"; sigint=$((sigint + 1))
    wait "$pid"; rc=$?
    [[ $rc -eq 130 ]] || { echo "FAIL: SIGINT: exit $rc, expected 130: $(cat "$out/segment$segment.err")"; exit 1; }
  else
    kill -9 "$pid"; sigkill=$((sigkill + 1))
    wait "$pid" 2> /dev/null
  fi
  [[ -e $archive ]] && cp "$archive" "$out/snap-$segment.h5"
  args=(--resume)
done
elapsed=$(($(date +%s) - start))
$py "$check" kept "$archive" soak "$out"/snap-*.h5 || exit 1
$py - "$archive" "$out/usage.tsv" <<'PY' || exit 1
import sys

import h5py
import pandas as pd

archive, usage = sys.argv[1], sys.argv[2]
with h5py.File(archive, "r") as f:
    s = pd.DataFrame(f["/experiments/soak/samples"][:])
for c in s.columns:
    if s[c].dtype == object:
        s[c] = s[c].str.decode("utf-8")
key = ["variant", "layout", "memory_kind", "rows", "features", "point", "replication", "timer"]
counts = s.groupby(key).size()
units = s[["point", "replication"]].drop_duplicates()
problems = []
if s.duplicated(key + ["trial"]).any():
    problems.append("duplicated samples")
if counts.nunique() != 1:
    problems.append(f"trials per (variant, point, replication, timer) vary: {sorted(counts.unique())}")
per_unit = s.groupby(["point", "replication"]).size()
if per_unit.nunique() != 1:
    problems.append(f"a (point, replication) unit was half kept: samples per unit {sorted(per_unit.unique())}")
u = pd.read_csv(usage, sep="\t")
per = u.groupby("segment").agg(rss=("rss_kb", "max"), fds=("fds", "max"))
third = max(1, len(per) // 3)
first, last = per.iloc[:third], per.iloc[-third:]
rss_ratio = last.rss.max() / first.rss.max()
if rss_ratio > 1.2:
    problems.append(f"peak RSS grew {rss_ratio:.2f}x from the first third of the segments to the last")
# Descriptors: each segment's peak, whose median may not rise (a descriptor open for a moment, a summary being
# written at the last SIGINT, is one sample's peak, not a leak).
if last.fds.median() > first.fds.median():
    problems.append(f"open descriptors per segment rose: median peak {first.fds.median():g} -> {last.fds.median():g}")
print(f"soak: {len(s)} samples in {len(units)} whole (point, replication) units; {len(per)} segments; peak RSS first third "
      f"{first.rss.max() / 1024:.0f} MB, last third {last.rss.max() / 1024:.0f} MB ({rss_ratio:.2f}x); "
      f"descriptors per segment, median peak {first.fds.median():g} -> {last.fds.median():g} "
      f"(highest {first.fds.max()} -> {last.fds.max()})")
if problems:
    print("FAIL:", "; ".join(problems))
    sys.exit(1)
PY
echo "soak: ${elapsed} s, $segment segments, $interrupts interrupts ($sigint SIGINT, $sigkill kill -9), every resume at once"
echo "1 passed, 0 failed"
