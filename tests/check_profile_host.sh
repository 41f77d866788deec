#!/usr/bin/env bash
# `kstudy profile` end to end without a GPU: KSTUDY_PROFILE_HOST_TEST=1 lets it profile host variants under
# tests/fake_ncu.py (a stand-in that speaks ncu's command line and raw-CSV format), so CI runs the real
# orchestration: the probe and its metric fallback, one ncu child per point, --export then --import, the
# attribution of launches to variants and Kokkos labels, the archive written once, and the refusals.
# Usage: check_profile_host.sh KSTUDY_EXE SOURCE_DIR FLAVOUR   (exit 77 = skipped on the cuda flavour, whose
# Kokkos cannot start without a GPU)
set -uo pipefail
kstudy=$1; src=$2; flavour=${3:-cpu}
[[ $flavour == cuda ]] && { echo "skipped: the cuda flavour's Kokkos needs a GPU to start"; exit 77; }
/usr/bin/python3 -c "import h5py" 2> /dev/null || { echo "skipped: /usr/bin/python3 has no h5py"; exit 77; }
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
export KSTUDY_PROFILE_HOST_TEST=1 OMP_NUM_THREADS=2 OMP_PROC_BIND=false
ncu=$src/tests/fake_ncu.py
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

cat > "$work/tiny.json" <<'JSON'
{"name": "tiny_profile", "operation": "scoring", "shapes": [[4096, 16], [1024, 64], [2048, 8]],
 "variants": ["fused_kokkos_feature_major@openmp", "composed_feature_major@openmp", "cpu_reference@openmp"],
 "protocol": {"seed": 7}}
JSON

# The first-choice DRAM metric is refused, as an ncu that does not know it would: the probe falls back.
FAKE_NCU_REFUSE=dram__throughput.avg.pct_of_peak_sustained_elapsed \
  "$kstudy" profile "$work/tiny.json" --points 2 --ncu "$ncu" --keep-ncu "$work/ncu" --out "$work/p.h5" \
  > "$work/out" 2> "$work/err"
rc=$?
cat "$work/out" "$work/err"
if [[ $rc -ne 0 ]]; then fail "profile exited $rc"
else
  grep -q "^profile: $work/p.h5" "$work/out" || fail "no 'profile:' line"
  grep -q "does not know metric dram__throughput.avg.pct_of_peak_sustained_elapsed" "$work/err" || fail "no fallback note"
  [[ -e $work/p.h5.partial ]] && fail "a partial archive was left"
  ls "$work/ncu"/probe.csv "$work/ncu"/tiny_profile_point0.csv "$work/ncu"/tiny_profile_point2.csv > /dev/null ||
    fail "--keep-ncu did not keep the CSVs: $(ls "$work/ncu")"
  /usr/bin/python3 - "$work/p.h5" <<'PY' || fail "archive content"
import json, math, sys
import h5py
f = h5py.File(sys.argv[1], "r")
d = f["/experiments/tiny_profile/profile"]
rows = d[:]
s = lambda v: v.decode() if isinstance(v, bytes) else v
variants = {s(r["variant"]) for r in rows}
assert variants == {"fused_kokkos_feature_major@openmp", "composed_feature_major@openmp", "cpu_reference@openmp"}, variants
assert sorted({int(r["point"]) for r in rows}) == [0, 2], "--points 2 of 3 points: first and last"
assert {(int(r["rows"]), int(r["features"])) for r in rows} == {(4096, 16), (2048, 8)}
for r in rows:
    assert s(r["status"]) == "ok" and r["gate_passed"] == 1, (s(r["variant"]), s(r["status"]))
    assert r["launch"] >= 0 and "Kokkos::Impl::" in s(r["kernel"]) or "gemv" in s(r["kernel"]), s(r["kernel"])
    assert not math.isnan(r["dram_throughput_pct"]) and r["profiled_duration_s"] > 0
labels = [s(r["label"]) for r in rows if s(r["variant"]) == "composed_feature_major@openmp" and r["point"] == 0]
assert labels[:3] == ["kstudy::composed::standardize", "kstudy::composed::clip", "kstudy::composed::weight"], labels
assert labels[-1] == "kstudy::composed::threshold", labels
metrics = json.loads(s(d.attrs["metrics"]))
assert metrics["dram_throughput_pct"] == "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", metrics
assert s(d.attrs["refused_metrics"]) == "dram__throughput.avg.pct_of_peak_sustained_elapsed"
command = s(d.attrs["ncu_command"])
assert "--clock-control none --profile-from-start off --metrics" in command and "__profile_point" in command, command
assert s(d.attrs["ncu_version"]) == "Version 0000.0.0 (stand-in)"
assert "not a measurement" in s(f.attrs["profile_test_mode"])
assert len(f["/experiments/tiny_profile/samples"]) == 0, "profile wrote timing samples"
print("archive ok:", len(rows), "rows")
PY
  # The report reads it (no timing archive: counters only).
  if "$kstudy" report "$work/p.h5" --out "$work/report" > /dev/null 2> "$work/report.err"; then
    grep -q "## Hardware counters (Nsight Compute)" "$work/report/report.md" || fail "report has no profile section"
  else
    fail "kstudy report of the profile archive: $(tail -3 "$work/report.err")"
  fi
fi

expect_refusal() {  # MESSAGE ENV... -- ARGS...
  local message=$1; shift
  local envs=()
  while [[ $1 != -- ]]; do envs+=("$1"); shift; done
  shift
  rm -f "$work/q.h5"
  env "${envs[@]}" "$kstudy" profile "$@" --out "$work/q.h5" > "$work/out" 2> "$work/err"
  local rc=$?
  if [[ $rc -eq 0 ]]; then fail "profile $* exited 0"; return; fi
  grep -qF -- "$message" "$work/err" || { fail "profile $*: no '$message' in: $(cat "$work/err")"; return; }
  [[ -e $work/q.h5 || -e $work/q.h5.partial ]] && { fail "profile $*: an archive was written"; return; }
  echo "ok: refused (rc=$rc): $(head -c 300 "$work/err")"
}
# No access to the counters: stopped at the probe, before any point, with ncu's words and a hint.
expect_refusal "ERR_NVGPUCTRPERM" FAKE_NCU_FAIL="ERR_NVGPUCTRPERM - The user does not have permission" -- \
  "$work/tiny.json" --ncu "$ncu"
expect_refusal "could not profile a one-thread kernel" FAKE_NCU_FAIL="Failed to initialize the profiler" -- \
  "$work/tiny.json" --ncu "$ncu"
expect_refusal "field 'kind'" A=1 -- transfer_calibration --ncu "$ncu"
expect_refusal "--points must be 0" A=1 -- "$work/tiny.json" --points -1 --ncu "$ncu"
touch "$work/exists.h5"
if "$kstudy" profile "$work/tiny.json" --ncu "$ncu" --out "$work/exists.h5" > /dev/null 2> "$work/err"; then
  fail "an existing archive was overwritten without --overwrite"
elif [[ -s $work/exists.h5 ]]; then fail "the existing file was written to"
else echo "ok: existing output refused: $(head -c 160 "$work/err")"; fi

echo "$failures failure(s)"
exit $((failures > 0))
