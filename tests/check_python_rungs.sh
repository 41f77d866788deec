#!/usr/bin/env bash
# Python rungs on the host (kstudy/runner/python_rungs.hpp, scripts/kstudy_py/rungs): the NumPy scoring and softmax
# rungs taken through list -> run -> gate -> archive beside the C++ ones, and the test rungs of tests/python_rungs,
# each wrong in one way a real rung is, recorded as that rung's verdict at its point while the study goes on:
#   slightly wrong scores (rounded through float16)  -> gate failed, every sample rejected
#   raises / returns one score too few               -> failed, with the rung's own error
#   never answers                                    -> failed after KSTUDY_RUNG_TIMEOUT, the worker killed
#   framework not installed                          -> skipped, with the reason; listed as "not here"
#   a module that cannot be imported                 -> listed as not registered; the other rungs register
#   framework not installed, in a cold_compile run   -> skipped there too (not a failed first-call child)
#   a rung of an operation without Python rungs      -> listed as not registered, with the reason
#   prints to stdout                                 -> passes: the protocol owns the worker's stdout
# and an interpreter that is missing breaks no study that did not ask for a Python rung.
# Usage: check_python_rungs.sh KSTUDY_EXE SOURCE_DIR FLAVOUR   (exit 77 = skipped: a cuda build without a GPU)
set -uo pipefail
kstudy=$1; src=$2; flavour=${3:-cpu}
if [[ $flavour == cuda ]] && ! nvidia-smi -L > /dev/null 2>&1; then
  echo "skipped: the cuda flavour cannot initialise Kokkos without a GPU"
  exit 77
fi
py=/usr/bin/python3
if ! $py -c 'import numpy' 2> /dev/null; then
  echo "skipped: $py has no numpy (python3-numpy)"
  exit 77
fi
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
export KSTUDY_CEILING_BYTES=33554432 OMP_NUM_THREADS=2 OMP_PROC_BIND=false KSTUDY_QUIET=1
export KSTUDY_RUNG_PYTHON=$py KSTUDY_RUNG_TIMEOUT=5 KSTUDY_VARIANTS_DIR=$src/tests/python_rungs
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }

# --- list ---------------------------------------------------------------------------------------------------
"$kstudy" list > "$work/list" 2>&1 || fail "list: $(tail -n 5 "$work/list")"
numpy_version=$($py -c 'import numpy; print(numpy.__version__)')
grep -q "scoring_numpy@python runs on python .*($py), numpy $numpy_version" "$work/list" &&
  pass "list: the NumPy rung with its interpreter and numpy $numpy_version" ||
  fail "list: no scoring_numpy@python line with numpy $numpy_version: $(grep -i python "$work/list")"
grep -q "scoring_test_missing@python runs on .* -- not here: kstudy_test_no_such_module is not installed" "$work/list" &&
  pass "list: a rung whose framework is missing says so" || fail "list: missing framework not named"
grep -q "not registered: rung stream_triad_test_unsupported@python: operation stream_triad does not describe" \
  "$work/list" && pass "list: a rung of an operation without Python rungs is named, not registered" ||
  fail "list: the rung of stream_triad is not named: $(grep 'not registered' "$work/list")"
grep -q "not registered: .*python_broken.py: ModuleNotFoundError" "$work/list" &&
  pass "list: a module that cannot be imported is named" || fail "list: broken module not named"
# Every registered rung has its line saying what it runs on (the built-in ones and the 7 test rungs).
registered=$(grep -cE '@python(_cuda)? runs on ' "$work/list")
[[ $registered -ge 9 ]] && grep -qE "^Python rungs: $registered from $py" "$work/list" &&
  pass "list: $registered rungs registered, each with what it runs on" ||
  fail "list: $registered rungs listed with a runtime; $(grep '^Python rungs' "$work/list")"

# --- run: one archive, every verdict --------------------------------------------------------------------------
"$kstudy" run "$src/tests/python_rungs/python_rungs.json" "$src/tests/python_rungs/python_rungs_softmax.json" \
  --out "$work/rungs.h5" > "$work/run.out" 2> "$work/run.err" ||
  fail "run exited $?: $(tail -n 20 "$work/run.err")"
$py - "$work/rungs.h5" > "$work/verdicts" 2>&1 <<'PY'

import sys

import h5py
import numpy as np

with h5py.File(sys.argv[1], "r") as f:
    e = f["experiments/python_rungs"]
    samples = e["samples"][()]
    gates = e["gate"][()]
    variants = e["variants"][()]
    softmax_gates = f["experiments/python_rungs_softmax/gate"][()]
    environment = {(k.decode() if isinstance(k, bytes) else k): (v.decode() if isinstance(v, bytes) else str(v))
                   for k, v in f["environment"].attrs.items()}


def text(v):
    return v.decode() if isinstance(v, bytes) else str(v)


problems = []


def expect(ok, what):
    print(("ok: " if ok else "FAIL: ") + what)
    if not ok:
        problems.append(what)


def of(variant):
    return [s for s in samples if text(s["variant"]) == variant]


for rows in (1, 4099):
    for variant in ("scoring_numpy@python", "scoring_test_noisy@python", "cpu_reference@openmp"):
        timed = [s for s in of(variant) if s["rows"] == rows and text(s["status"]) == "ok"]
        expect(len(timed) == 3 and all(s["seconds"] > 0 for s in timed),
               f"{variant} at {rows} rows: 3 timed samples that passed the gate ({len(timed)})")
    gate = [g for g in gates if text(g["variant"]) == "scoring_numpy@python" and g["rows"] == rows]
    expect(len(gate) == 1 and bool(gate[0]["passed"]), f"scoring_numpy@python gated and passed at {rows} rows")

half = of("scoring_test_half_scores@python")
expect(half and all(text(s["status"]) == "rejected" for s in half if s["rows"] == 4099),
       "slightly wrong scores: every sample at 4099 rows rejected by the gate")
for variant, words in (("scoring_test_raises@python", "a deliberate failure of the test rung"),
                       ("scoring_test_short@python", "output score: shape"),
                       ("scoring_test_hangs@python", "gave no answer within 5 s and was killed")):
    statuses = {text(s["status"]) for s in of(variant)}
    expect(statuses and all(s.startswith("failed: ") and words in s for s in statuses),
           f"{variant}: failed with '{words}' at every point ({statuses})")
statuses = {text(s["status"]) for s in of("scoring_test_missing@python")}
expect(statuses == {"skipped: kstudy_test_no_such_module is not installed for " + sys.executable} or
       all(s.startswith("skipped: kstudy_test_no_such_module is not installed") for s in statuses),
       f"missing framework: skipped with the reason ({statuses})")
numpy_rows = [v for v in variants if text(v["variant"]) == "scoring_numpy@python"]
expect(numpy_rows and text(numpy_rows[0]["implementation"]) == "framework" and
       text(numpy_rows[0]["fusion_level"]) == "none" and text(numpy_rows[0]["backend"]) == "python",
       "variants table: the NumPy rung's implementation, fusion level and backend")
runtime = environment.get("runtime_of_scoring_numpy@python", "")
expect(runtime.startswith("python ") and runtime.endswith(", numpy " + np.__version__),
       f"environment: the rung's interpreter and numpy version ({runtime})")
# A device framework's rung (the fake one of tests/python_rungs/scoring/python_fake_device.py): the device timers
# from its own clocks, one-shot calls through inputs replaced rather than written, the config it chose at its first
# call archived as its tuned parameters.
fake = "scoring_test_fake_device@python_cuda"
for rows in (1, 4099):
    for timer in ("resident_wall", "device_events", "one_shot"):
        timed = [s for s in of(fake) if s["rows"] == rows and text(s["timer"]) == timer and text(s["status"]) == "ok"]
        expect(len(timed) == 3 and all(s["seconds"] > 0 for s in timed),
               f"{fake} at {rows} rows: 3 {timer} samples that passed the gate ({len(timed)})")
expect(not [s for s in of(fake) if text(s["timer"]) == "host_wall"], f"{fake}: no host_wall samples (a device rung)")
fake_rows = [v for v in variants if text(v["variant"]) == fake]
expect(fake_rows and text(fake_rows[0]["backend"]) == "python_cuda" and
       text(fake_rows[0]["tuned_parameters"]) == "block_features=16",
       f"variants table: the device rung's backend and the config it chose at its first call "
       f"({[(text(v['backend']), text(v['tuned_parameters'])) for v in fake_rows]})")
softmax = [g for g in softmax_gates if text(g["variant"]) == "softmax_numpy@python"]
expect(len(softmax) == 3 and all(bool(g["passed"]) for g in softmax),
       f"softmax_numpy@python gated and passed at its 3 shapes, 1 x 1 included ({len(softmax)})")
sys.exit(1 if problems else 0)
PY
cat "$work/verdicts"
grep -q "FAIL" "$work/verdicts" && fail "the archive's verdicts (above)"
grep -q "a rung that prints must not break the protocol" "$work/run.err" &&
  pass "what a rung prints goes to stderr" || fail "the noisy rung's print is not on stderr"

# --- cold start: a rung's first call in a fresh worker; a missing framework is skipped there too -----------------
"$kstudy" run "$src/tests/python_rungs/python_rungs_cold.json" --out "$work/cold.h5" > "$work/cold.out" 2>&1 ||
  fail "cold run exited $?: $(tail -n 5 "$work/cold.out")"
$py - "$work/cold.h5" > "$work/cold_verdicts" 2>&1 <<'PY'
import sys

import h5py

with h5py.File(sys.argv[1], "r") as f:
    samples = f["experiments/python_rungs_cold/samples"][()]
rows = [(s["variant"].decode(), s["timer"].decode(), s["status"].decode()) for s in samples]
first = [r for r in rows if r[0] == "scoring_numpy@python" and r[1] == "cold"]
missing = [r for r in rows if r[0] == "scoring_test_missing@python"]
ok = len(first) == 2 and all(r[2] == "ok" for r in first)
ok = ok and len(missing) == 2 and all(r[2].startswith("skipped: kstudy_test_no_such_module") for r in missing)
print(("ok" if ok else "FAIL") + f": cold start {first}, missing framework {missing}")
sys.exit(0 if ok else 1)
PY
cat "$work/cold_verdicts"
grep -q "^ok" "$work/cold_verdicts" && pass "cold start: the rung's first calls, the missing framework skipped" ||
  fail "cold start verdicts (above)"

# --- no interpreter: a study without Python rungs is untouched ------------------------------------------------
KSTUDY_RUNG_PYTHON=/nonexistent/python3 "$kstudy" list > "$work/list2" 2>&1 || fail "list without python failed"
grep -q "^Python rungs: none" "$work/list2" && pass "list without the interpreter: none, and why" ||
  fail "list without python: $(grep '^Python rungs' "$work/list2")"
KSTUDY_RUNG_PYTHON=/nonexistent/python3 "$kstudy" run "$src/tests/shard_tiny.json" --out "$work/tiny.h5" -q \
  > /dev/null 2> "$work/err" && pass "a C++ study runs without the interpreter" || fail "tiny run: $(cat "$work/err")"

if [[ $failures -gt 0 ]]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all python rung checks passed"
