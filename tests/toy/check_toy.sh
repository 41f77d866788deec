#!/usr/bin/env bash
# docs/extending.md cannot rot: its toy operation, variant, experiment kind and report section (all under
# tests/toy/, none under src/) go through kstudy_toy list -> run -> archive -> report.
#   tests/toy/check_toy.sh KSTUDY_TOY SOURCE_DIR
set -euo pipefail
exe=$1; src=$2
py=${KSTUDY_PYTHON:-/usr/bin/python3}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# The guide's size promise (docs/extending.md): lines of code, neither blank nor comment-only.
loc() { grep -cvE '^\s*(//.*)?$' "$1"; }
(($(loc "$src/tests/toy/toy_variant.cpp") <= 25)) || fail "the toy variant is over the guide's 25 lines"
(($(loc "$src/tests/toy/toy_operation.cpp") <= 80)) || fail "the toy operation is over the guide's 80 lines"

"$exe" list > "$work/list.txt"
grep -q "^toy_axpy (n): " "$work/list.txt" || fail "kstudy list does not show the toy operation"
grep -q "toy_axpy_kokkos@serial" "$work/list.txt" || fail "kstudy list does not show the toy variant"
grep -q "host_fill" "$work/list.txt" || fail "kstudy list does not show the toy experiment kind"

KSTUDY_QUIET=1 "$exe" run "$src/tests/toy/toy_sweep.json" "$src/tests/toy/toy_fill.json" --out "$work/toy.h5" --quiet \
  > "$work/run.txt" 2>&1 || { cat "$work/run.txt"; fail "kstudy_toy run failed"; }

"$py" - "$work/toy.h5" <<'PY' || fail "the archive does not hold what the toy declares"
import json, sys
import h5py
f = h5py.File(sys.argv[1], "r")
assert f.attrs["complete"] in (b"true", "true"), dict(f.attrs)
sweep = f["experiments/toy_sweep"]
assert json.loads(sweep.attrs["definition"])["operation"] == ["toy_axpy"]
variants = sweep["variants"][()]
ops = {v["operation"].decode() for v in variants}
axes = {v["axes"].decode() for v in variants}
assert ops == {"toy_axpy"} and axes == {"n"}, (ops, axes)
assert {int(v["essential_flops"]) for v in variants} == {2, 2 * 4099, 2 * 1000003}, variants["essential_flops"]
samples = sweep["samples"][()]
gates = {s["gate"] for s in samples}
assert len(samples) > 0 and all(s["status"].decode() == "ok" for s in samples), samples["status"][:5]
fill = f["experiments/toy_fill"]["samples"][()]
assert len(fill) == 2 * 3 and {int(s["bytes"]) for s in fill} == {4096, 1048576}
print("archive ok:", len(samples), "toy samples,", len(fill), "host_fill samples")
PY

# A variant that returns slightly wrong output is rejected by the toy gate and left out of the summary.
KSTUDY_INJECT_FAULT=toy_axpy_kokkos@serial:corrupt KSTUDY_QUIET=1 \
  "$exe" run "$src/tests/toy/toy_sweep.json" --out "$work/bad.h5" --quiet > "$work/bad.txt" 2>&1 || true
grep -q "gate FAILED for toy_axpy_kokkos@serial" "$work/bad.txt" || { cat "$work/bad.txt"; fail "the toy gate let a corrupted output through"; }

MPLBACKEND=Agg KSTUDY_PYTHON=$py "$exe" report "$work/toy.h5" --out "$work/report" \
  --sections "$src/tests/toy/toy_section.py" > "$work/report.txt" 2>&1 || { cat "$work/report.txt"; fail "report failed"; }
grep -q "Toy operation: time per element" "$work/report/report.md" || fail "the toy report section is missing"
test -s "$work/report/toy_axpy_per_element.csv" || fail "the toy section wrote no table"
grep -qi "toy_axpy" "$work/report/report.md" || fail "report.md does not name the toy operation"
echo "ok: toy operation, variant, kind and report section end to end"
