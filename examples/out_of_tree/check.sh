#!/usr/bin/env bash
# The out-of-tree example end to end against an INSTALLED kstudy (cmake --install ... --prefix PREFIX):
#   configure + build examples/out_of_tree with find_package(kstudy) + kstudy_add_study
#   list     -> stencil3, its variants and the stencil_sweep experiment beside kstudy's built-in ones
#   run      -> an archive that passes tests/check_run_archive.py schema, stencil3's bytes and flops in it
#   gate     -> a stencil variant whose output is slightly wrong (KSTUDY_INJECT_FAULT corrupt) is rejected
#   report   -> report.md and CSVs name stencil3 (the scripts found under PREFIX/share/kstudy)
#   submit   -> the job script runs this study executable; a stub sbatch's array tasks and merge give the
#               unsharded run's samples (the pattern of tests/check_shard.sh)
#   bench    -> stencil_study_bench times the stencil variants after the gate
# Usage: examples/out_of_tree/check.sh PREFIX [BUILD_DIR]   (BUILD_DIR: a fresh temporary folder by default)
# Exit 77 (skipped): a cuda build of kstudy on a machine without a GPU, after building.
set -euo pipefail
prefix=$(cd "$1" && pwd)
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src=$(cd "$here/../.." && pwd)
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
build=${2:-$work/build}
py=${KSTUDY_PYTHON:-/usr/bin/python3}
export KSTUDY_CEILING_BYTES=${KSTUDY_CEILING_BYTES:-33554432} OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
export OMP_PROC_BIND=${OMP_PROC_BIND:-false} KSTUDY_QUIET=1 MPLBACKEND=Agg
fail() { echo "FAIL: $*"; exit 1; }
step() { echo "== $* ($(( SECONDS - start )) s)"; }
start=$SECONDS

config=$prefix/lib/cmake/kstudy/kstudyConfig.cmake
[[ -f $config ]] || fail "no kstudy installed under $prefix ($config missing)"
# The cuda flavour compiles the project's Kokkos code with the nvcc_wrapper of kstudy's Kokkos, as kstudy did.
cxx=()
if grep -q '^set(KSTUDY_ENABLE_CUDA ON)' "$config"; then
  flavour=cuda
  kokkos_dir=$(sed -n 's/^set(KSTUDY_KOKKOS_DIR "\(.*\)")$/\1/p' "$config")
  cxx=(-DCMAKE_CXX_COMPILER="$kokkos_dir/../../../bin/nvcc_wrapper")
else
  # The compiler kstudy was built with (its objects call that compiler's OpenMP runtime; kstudyConfig.cmake
  # refuses another).
  flavour=cpu
  cxx=(-DCMAKE_CXX_COMPILER="$(sed -n 's/^set(KSTUDY_CXX_COMPILER "\(.*\)")$/\1/p' "$config")")
fi

step "configure and build examples/out_of_tree against $prefix ($flavour flavour)"
generator=()
command -v ninja > /dev/null && generator=(-G Ninja)
cmake -S "$here" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" "${cxx[@]}" \
  > "$work/configure.log" 2>&1 || { cat "$work/configure.log"; fail "configure"; }
cmake --build "$build" -j "${KSTUDY_JOBS:-2}" > "$work/build.log" 2>&1 || { tail -n 40 "$work/build.log"; fail "build"; }
study=$build/stencil_study
[[ -x $study && -x ${study}_bench ]] || fail "stencil_study or stencil_study_bench was not built"
if [[ $flavour == cuda ]] && ! nvidia-smi -L > /dev/null 2>&1; then
  echo "skipped: built; the cuda flavour cannot run Kokkos without a GPU"
  exit 77
fi

step "list"
"$study" list > "$work/list.txt"
grep -q "^stencil3 (n): " "$work/list.txt" || fail "list does not show stencil3"
for backend in serial openmp $([[ $flavour == cuda ]] && echo cuda); do
  grep -q "stencil_kokkos@$backend " "$work/list.txt" || fail "list does not show stencil_kokkos@$backend"
done
if [[ $flavour == cuda ]]; then grep -q "stencil_cuda@cuda " "$work/list.txt" || fail "list lacks stencil_cuda@cuda"; fi
grep -q "^scoring (rows x features)" "$work/list.txt" || fail "the built-in operations are missing"
grep -Eq "^Built-in experiments:.* stencil_sweep( |$)" "$work/list.txt" || fail "stencil_sweep is not a built-in name"
grep -Eq "^Built-in experiments:.* quick( |$)" "$work/list.txt" || fail "kstudy's experiments are not found under $prefix"

step "run stencil_sweep"
"$study" run stencil_sweep --out "$work/stencil.h5" > "$work/run.txt" 2>&1 || { cat "$work/run.txt"; fail "run"; }
"$py" "$src/tests/check_run_archive.py" schema "$work/stencil.h5" stencil_sweep || fail "archive schema"
"$py" - "$work/stencil.h5" "$flavour" <<'PY' || fail "the archive does not hold what stencil3 declares"
import json, sys
import h5py
f = h5py.File(sys.argv[1], "r")
e = f["experiments/stencil_sweep"]
assert json.loads(e.attrs["definition"])["operation"] == ["stencil3"]
v = e["variants"][()]
ids = {x["variant"].decode() for x in v}
want = {"stencil_kokkos@serial", "stencil_kokkos@openmp"} | ({"stencil_kokkos@cuda", "stencil_cuda@cuda"} if sys.argv[2] == "cuda" else set())
assert ids == want, ids
for x in v:  # 8n bytes (x read, y written), 4n flops
    n = int(x["rows"])
    assert int(x["essential_bytes"]) == 8 * n and int(x["essential_flops"]) == 4 * n, x
assert {int(x["rows"]) for x in v} == {1, 4099, 1000003, 4194304}
s = e["samples"][()]
assert all(x["status"].decode() == "ok" for x in s), {x["status"] for x in s}
print(f"ok: {len(s)} stencil3 samples of {sorted(ids)}")
PY

step "gate: a slightly wrong output is rejected"
KSTUDY_INJECT_FAULT=stencil_kokkos@serial:corrupt "$study" run stencil_sweep --out "$work/bad.h5" --trials 1 \
  --replications 1 > "$work/bad.txt" 2>&1 || true
grep -q "gate FAILED for stencil_kokkos@serial" "$work/bad.txt" || { cat "$work/bad.txt"; fail "the corrupted output passed"; }
grep -q "stencil3: y\[0\] = .*reference" "$work/bad.txt" || fail "the gate does not say why"

step "report"
KSTUDY_PYTHON=$py "$study" report "$work/stencil.h5" --out "$work/report" > "$work/report.txt" 2>&1 ||
  { cat "$work/report.txt"; fail "report"; }
grep -q "stencil3" "$work/report/report.md" || fail "report.md does not name stencil3"
ls "$work/report"/*.csv > /dev/null 2>&1 || fail "report wrote no tables"

step "submit: the job script runs this executable; a stub sbatch runs the array, merge"
"$study" submit stencil_sweep --array 2 --out-dir "$work/array" --dry-run > "$work/dry.sbatch" 2> "$work/err" ||
  fail "submit --dry-run: $(cat "$work/err")"
grep -qF "exec '$(readlink -f "$study")' run 'stencil_sweep' --shard \"\$shard/2\"" "$work/dry.sbatch" ||
  { grep exec "$work/dry.sbatch"; fail "the job script does not run this study executable"; }
mkdir -p "$work/bin" "$work/stub"
cat > "$work/bin/sbatch" <<'SH'
#!/bin/bash
cp "${@: -1}" "$STUB_DIR/submitted.sbatch"
echo "4242"
SH
chmod +x "$work/bin/sbatch"
PATH=$work/bin:$PATH STUB_DIR=$work/stub "$study" submit stencil_sweep --array 2 --out-dir "$work/array" \
  > "$work/submit.txt" 2>&1 || { cat "$work/submit.txt"; fail "submit with a stub sbatch"; }
for k in 0 1; do
  SLURM_ARRAY_TASK_ID=$k bash "$work/stub/submitted.sbatch" > "$work/task-$k.log" 2>&1 ||
    { tail -5 "$work/task-$k.log"; fail "array task $k"; }
done
"$study" merge "$work/merged.h5" "$work/array"/shard-{0,1}.h5 > /dev/null || fail "merge"
"$py" "$src/tests/check_run_archive.py" union "$work/merged.h5" stencil_sweep "$work/array"/shard-{0,1}.h5 ||
  fail "merged != union of the shards"
"$py" "$src/tests/check_run_archive.py" same-points "$work/merged.h5" "$work/stencil.h5" stencil_sweep ||
  fail "merged shards != the unsharded run"

step "bench"
"${study}_bench" --operations=stencil3 --shapes=4099 --benchmark_min_time=0.01 > "$work/bench.txt" 2> "$work/bench.err" ||
  { cat "$work/bench.err"; fail "bench"; }
grep -q "stencil_kokkos@serial/4099" "$work/bench.txt" || { cat "$work/bench.txt"; fail "bench did not time stencil_kokkos@serial"; }
if grep -q "correctness gate failed" "$work/bench.txt"; then cat "$work/bench.txt"; fail "a gate failed in the bench"; fi

step "ok: examples/out_of_tree built against $prefix: list, run, gate, report, submit, merge and bench"
