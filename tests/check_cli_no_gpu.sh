#!/usr/bin/env bash
# The cuda flavour's CLI on a machine without a GPU (CI: the toolkit's driver stub as libcuda.so.1, or no
# driver at all), every command, exit codes asserted exactly:
#   list, info (with a --kokkos-* argument), submit --dry-run, merge of two committed shard fixtures,
#   report, compare                                   -> 0, without starting Kokkos
#   run (new archive, --resume of an existing one), kstudy_bench, a hidden __replicate child
#                                                     -> 69, one line naming the CUDA error, nothing written
#   profile                                           -> 1, its refusal, nothing written
# Nothing may abort (134: Kokkos' uncaught exception from cudaGetDeviceCount).
# Usage: check_cli_no_gpu.sh KSTUDY_EXE KSTUDY_BENCH_EXE SOURCE_DIR   (exit 77 = skipped: a GPU is visible)
set -uo pipefail
kstudy=$(realpath "$1"); bench=$(realpath "$2"); src=$(realpath "$3")
if nvidia-smi -L > /dev/null 2>&1; then
  echo "skipped: a GPU is visible; this test is about machines without one"
  exit 77
fi
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
export OMP_NUM_THREADS=2 OMP_PROC_BIND=false
fixtures=$src/tests/fixtures
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# expect RC DESCRIPTION -- COMMAND...: exit status exactly RC; output in $work/out, $work/err.
expect() {
  local want=$1 what=$2; shift 3
  "$@" > "$work/out" 2> "$work/err"
  local rc=$?
  if [[ $rc -ne $want ]]; then
    fail "$what: exit $rc, expected $want: $(tail -5 "$work/err")"
    return 1
  fi
  echo "ok: $what (rc=$rc)"
}
# The one-line refusal of a measuring command: exit 69, one line on stderr naming the CUDA error, no stdout.
expect_no_gpu() {
  local what=$1; shift 2
  expect 69 "$what" -- "$@" || return
  local lines; lines=$(wc -l < "$work/err")
  [[ $lines -eq 1 ]] || fail "$what: $lines lines on stderr, expected one: $(cat "$work/err")"
  grep -q "no GPU is visible (cudaGetDeviceCount" "$work/err" || fail "$what: no reason in: $(cat "$work/err")"
  [[ -s $work/out ]] && fail "$what: wrote to stdout: $(head -3 "$work/out")"
  echo "   $(cut -c1-260 "$work/err")"
}
only_files() {  # WHAT FILE...: the scratch folder holds exactly these files
  local want; want=$(printf '%s\n' "$@" | sort)
  local have; have=$(cd "$work/scratch" && find . -mindepth 1 -printf '%P\n' | sort)
  [[ $have == "$want" ]] || fail "files after the refusals: expected [$want], found [$have]"
}
mkdir "$work/scratch"

# --- the commands that do not measure -------------------------------------------------------------------
expect 0 "list" -- "$kstudy" list && { grep -q "^Backends:.*cuda" "$work/out" || fail "list: no backends line"; }
expect 0 "info --kokkos-num-threads=2" -- "$kstudy" info --kokkos-num-threads=2 &&
  { grep -q "gpu: none visible (cudaGetDeviceCount" "$work/out" || fail "info does not say no GPU is visible: $(cat "$work/out")"; }
expect 0 "submit --dry-run" -- "$kstudy" submit quick --array 2 --dry-run --out-dir "$work/shards" &&
  { grep -q "^#SBATCH --array=0-1" "$work/out" || fail "submit --dry-run: no job script: $(head -5 "$work/out")"; }
expect 0 "merge of two shards" -- "$kstudy" merge "$work/merged.h5" "$fixtures/shard_tiny_0of2.h5" "$fixtures/shard_tiny_1of2.h5" &&
  { grep -q "merged shards 0,1 of 2" "$work/out" || fail "merge: $(cat "$work/out")"; }
if /usr/bin/python3 -c "import h5py, pandas, matplotlib, scipy" 2> /dev/null; then
  export KSTUDY_PYTHON=${KSTUDY_PYTHON:-/usr/bin/python3} MPLBACKEND=Agg
  expect 0 "report" -- "$kstudy" report "$work/merged.h5" --out "$work/report" &&
    { [[ -s $work/report/report.md ]] || fail "report wrote no report.md"; }
  expect 0 "compare" -- "$kstudy" compare "$fixtures/shard_tiny_0of2.h5" "$fixtures/shard_tiny_1of2.h5" -o "$work/compare.csv" &&
    { [[ -s $work/compare.csv ]] || fail "compare wrote no CSV"; }
else
  echo "skipped report and compare: /usr/bin/python3 lacks h5py, pandas, matplotlib or scipy"
fi

# --- the commands that measure: one line, exit 69, nothing written --------------------------------------
cd "$work/scratch" || exit 1
expect_no_gpu "run" -- "$kstudy" run quick --out "$work/scratch/run.h5"
expect_no_gpu "run with host variants only" -- "$kstudy" run "$src/tests/shard_tiny.json" --variants composed_row_major@openmp --out "$work/scratch/run.h5"
cp "$fixtures/shard_tiny_0of2.h5" "$work/scratch/resume.h5"
before=$(md5sum < "$work/scratch/resume.h5")
expect_no_gpu "run --resume" -- "$kstudy" run "$src/tests/shard_tiny.json" --shard 0/2 --resume --out "$work/scratch/resume.h5"
[[ $(md5sum < "$work/scratch/resume.h5") == "$before" ]] || fail "run --resume without a GPU changed the archive"
grep -q -- "--variants " "$work/err" || fail "run: no working --variants filter for the cpu flavour in: $(cat "$work/err")"
expect_no_gpu "kstudy_bench" -- "$bench" --benchmark_out="$work/scratch/bench.json"
expect_no_gpu "a hidden replication child" -- "$kstudy" __replicate "$work/scratch/child.h5" "$work/scratch/none.json" 0
printf '#!/bin/sh\necho "Version 0000.0 (stand-in)"\n' > "$work/ncu"
chmod +x "$work/ncu"
expect 1 "profile" -- "$kstudy" profile profile_layouts --ncu "$work/ncu" --out "$work/scratch/profile.h5" &&
  { grep -q "no CUDA GPU is visible" "$work/err" || fail "profile: $(cat "$work/err")"; }
only_files resume.h5

echo "$failures failure(s)"
[[ $failures -eq 0 ]]
