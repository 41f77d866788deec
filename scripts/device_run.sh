#!/usr/bin/env bash
# Runs on a GPU machine from a GPU bundle tarball (scripts/make_gpu_bundle.sh + tar; or its unpacked folder): the GPU test
# suite, the environment, the Google Benchmark targets, sanitizers, Nsight Compute and studies, every
# output under $OUT.
#   scripts/device_run.sh BUNDLE.tar.xz check              # info + tests + kstudy_bench
#   scripts/device_run.sh BUNDLE.tar.xz tests              # info + tests (KSTUDY_TEST_FILTER narrows them;
#        KSTUDY_TEST_SHARDS=4 runs them as 4 gtest shards at once)
#   scripts/device_run.sh BUNDLE.tar.xz bench              # kstudy_bench alone (KSTUDY_BENCH_NAME names its JSON)
#   scripts/device_run.sh BUNDLE.tar.xz kill_resume        # kill -9 part way through a study, --resume at once
#   scripts/device_run.sh BUNDLE.tar.xz sanitize           # compute-sanitizer memcheck + racecheck on the CUDA variants
#   scripts/device_run.sh BUNDLE.tar.xz profile [EXP...]   # `kstudy profile` (Nsight Compute, default
#        profile_layouts) into $OUT/profile.h5, ncu's CSVs in $OUT/ncu.tar; KSTUDY_PROFILE_TIMING=1 adds a
#        short timing run of the same points into $OUT/profile_timing.h5
#   scripts/device_run.sh BUNDLE.tar.xz reliability        # fault and GPU-health tests, a health-guarded study
#   scripts/device_run.sh BUNDLE.tar.xz study ARGS...      # `kstudy run ARGS` into $OUT/study.h5
#   scripts/device_run.sh BUNDLE.tar.xz suite              # check, sanitize, profile, then the short
#        experiments (launch_overhead transfer_calibration layout_transpose block_size quick) into $OUT/study.h5
#        and cold_compile into $OUT/cold.h5
#   scripts/device_run.sh BUNDLE.tar.xz sweeps             # rows_sweep and feature_sweep into $OUT/sweeps.h5
#   scripts/device_run.sh BUNDLE.tar.xz stream             # the STREAM operations, 2^10..2^30, into $OUT/stream.h5
#   scripts/device_run.sh BUNDLE.tar.xz lab                # kernel lab I (reduce_sum ... residual_layernorm) into $OUT/lab.h5
#   scripts/device_run.sh BUNDLE.tar.xz lab2               # kernel lab II (gemm, tensor_core_gemm, attention) into $OUT/lab2.h5
#   scripts/device_run.sh BUNDLE.tar.xz all                # suite, then sweeps
#   scripts/device_run.sh BUNDLE.tar.xz alternatives       # the Python rungs' frameworks and gates, then
#        alternatives_softmax and alternatives_scoring into $OUT/alternatives.h5
#   scripts/device_run.sh BUNDLE.tar.xz floor              # alternatives_reduce with the OpenMP threads as they are,
#        told not to spin (OMP_WAIT_POLICY=passive) in kstudy and its workers, in kstudy alone and in the workers
#        alone, into $OUT/floor.tar: what a Python rung's call costs around its kernel, and whose threads make it
#        cost more
#   scripts/device_run.sh BUNDLE.tar.xz rung_ncu           # Nsight Compute on the Python rungs' kernels where they
#        matched or beat kstudy's (scripts/device_rung_ncu.py; KSTUDY_RUNG_NCU_PROBES names others) into
#        $OUT/rung_ncu.csv, and `kstudy profile` of kstudy's rungs at the same points (profile_alternatives_*)
#        into $OUT/profile.h5
#   scripts/device_run.sh BUNDLE.tar.xz kokkos_settings    # roofs, CUB and CUDA rungs with Kokkos' device-wide
#        settings restored vs kept (restored, kept, restored: settings_*.json)
#   scripts/device_run.sh BUNDLE.tar.xz "check sanitize faults profile short"   # several steps in one call
#        (faults: the fault and GPU-health tests alone; short: the short experiments and cold_compile)
# KSTUDY_RESUME_SWEEPS=ARCHIVE: sweeps completes that (interrupted) archive with --resume instead of
# starting afresh, so a sweep cut by one call's time limit is finished by the next.
# Environment: KSTUDY_TRIALS / KSTUDY_REPLICATIONS shorten the sweeps (defaults: the files');
# KSTUDY_BENCH_FILTER narrows kstudy_bench (default '@(cuda|openmp)/'); KSTUDY_RACECHECK_FILTER widens racecheck
# (default: the correctness test of every CUDA variant; 'AllVariants/*cuda*:Tunable/*cuda*' is all 71 tests);
# KSTUDY_*_SECONDS bound each step; after each study step its archive is compared with the newest archive of
# the same experiments published under data/ (KSTUDY_GATE_DATA names another folder) by `kstudy compare
# --gate ${KSTUDY_GATE:-5%}`: the verdicts are printed and written to $OUT/gate-NAME.json, never failing the run;
# KSTUDY_PACK=1 packs the text logs into $OUT/logs.tar at the end (the
# device tool brings back at most 8 files).
set -uo pipefail
tarball=$1; modes=$2; shift 2
out=${OUT:-$PWD/device-out}; mkdir -p "$out"
work=$(mktemp -d)
if [[ -d $tarball ]]; then  # an unpacked bundle (scripts/device_kokkos_compare.sh hands its own over)
  bundle=$(cd "$tarball" && pwd)
else
  tar -xJf "$tarball" -C "$work"
  bundle=$(dirname "$(find "$work" -maxdepth 2 -name env.sh | head -1)")
fi
source "$bundle/env.sh"
gpu_state() {
  nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw,clocks_throttle_reasons.active \
    --format=csv,noheader 2>&1
}
step() { echo "== $* ($(date -u +%T))"; }
overrides=()
[[ -n ${KSTUDY_TRIALS:-} ]] && overrides+=(--trials "$KSTUDY_TRIALS")
[[ -n ${KSTUDY_REPLICATIONS:-} ]] && overrides+=(--replications "$KSTUDY_REPLICATIONS")
tool() { command -v "$1" || ls "/usr/local/cuda/bin/$1" 2> /dev/null; }

# The regression gate against the last published results: the archive under data/ (newest by its created_utc)
# whose experiments are the new archive's, or hold them all; nothing when none does. Printed only: a noisy
# verdict must not cost a run its other results.
published=${KSTUDY_GATE_DATA:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/data}
gate_against_published() {
  local archive=$1 python=${KSTUDY_PYTHON:-/usr/bin/python3} baseline
  [[ -s $archive && -d $published ]] || return 0
  baseline=$("$python" - "$published" "$archive" 2> /dev/null << 'PY'
import sys
from pathlib import Path
import h5py
def experiments(path):
    with h5py.File(path, "r") as f:
        created = f.attrs.get("created_utc", "")
        return set(f["experiments"]) if "experiments" in f else set(), created.decode() if isinstance(created, bytes) else created
wanted, _ = experiments(sys.argv[2])
found = []
for p in Path(sys.argv[1]).rglob("*.h5"):
    try:
        names, created = experiments(p)
    except Exception:
        continue
    if wanted and wanted <= names:
        found.append((names == wanted, created, str(p)))
print(max(found)[2] if found else "")
PY
)
  step "gate: $(basename "$archive") against ${baseline:-nothing published}"
  [[ -n $baseline ]] || return 0
  "$bundle/kstudy" compare "$baseline" "$archive" --gate "${KSTUDY_GATE:-5%}" \
    --gate-json "$out/gate-$(basename "$archive" .h5).json" 2>&1 | tail -40
  echo "gate rc=${PIPESTATUS[0]} (4: a point SLOWER beyond the gate; 2: not comparable; the run goes on)"
}

tests() {
  step info
  "$bundle/kstudy" info > "$out/info.txt" 2>&1
  grep -E "HOPPER|KOKKOS_ENABLE_CUDA|gpu_name|Kokkos::OpenMP|kokkos_version" "$out/info.txt" | head -8
  step tests
  local shards=${KSTUDY_TEST_SHARDS:-1} i
  if ((shards <= 1)); then
    timeout ${KSTUDY_TEST_SECONDS:-300} "$bundle/run_tests.sh" --gtest_brief=1 --gtest_filter="${KSTUDY_TEST_FILTER:-*}" \
      > "$out/tests.txt" 2>&1
    echo "tests rc=$?"; grep -E "FAILED|PASSED|SKIPPED|tests from" "$out/tests.txt" | tail -12
    return
  fi
  # gtest's own sharding, the shards at once on the one GPU, the cores split between them: the whole suite in
  # about a quarter of the time at 4 (session 28). Their outputs go into one file, each line after its shard's tag.
  for ((i = 0; i < shards; ++i)); do
    GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i OMP_NUM_THREADS=$(($(nproc) / shards > 0 ? $(nproc) / shards : 1)) \
      OMP_PROC_BIND=false timeout ${KSTUDY_TEST_SECONDS:-300} "$bundle/run_tests.sh" --gtest_brief=1 \
      --gtest_filter="${KSTUDY_TEST_FILTER:-*}" > "$work/shard$i.txt" 2>&1 &
  done
  wait
  for ((i = 0; i < shards; ++i)); do
    sed "s/^/[shard $i] /" "$work/shard$i.txt"
    grep -qE '^\[==========\] .* ran\.' "$work/shard$i.txt" || echo "[shard $i] stopped before its summary"
  done > "$out/tests.txt"
  echo "tests ($shards shards)"; grep -E "FAILED|PASSED|SKIPPED|stopped before" "$out/tests.txt" | tail -16
}
check() { tests; bench; }

# kstudy_bench alone into $OUT/${KSTUDY_BENCH_NAME:-bench}.json (KSTUDY_BENCH_FILTER picks the benchmarks).
bench() {
  local name=${KSTUDY_BENCH_NAME:-bench}
  step bench
  timeout ${KSTUDY_BENCH_SECONDS:-200} "$bundle/kstudy_bench" --benchmark_filter="${KSTUDY_BENCH_FILTER:-@(cuda|openmp)/}" --benchmark_min_time=0.05 \
    --benchmark_out="$out/$name.json" --benchmark_out_format=json > "$out/$name.txt" 2>&1
  echo "bench rc=$?"; grep -E "_median|ceiling" "$out/$name.txt" | sed -E 's/ +/ /g'
}

# memcheck over every CUDA variant's correctness tests; racecheck over the same (Kokkos' own reduction
# code reports shared-memory hazard warnings there, which the summary counts apart from errors).
sanitize() {
  local cs; cs=$(tool compute-sanitizer)
  step "compute-sanitizer memcheck"
  timeout 150 "$cs" --tool memcheck --leak-check full --error-exitcode 9 "$bundle/kstudy_tests" --gtest_brief=1 \
    --gtest_filter='AllVariants/*cuda*:Tunable/*cuda*' > "$out/sanitizer.txt" 2>&1
  echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED|LEAK SUMMARY" "$out/sanitizer.txt" | tail -4
  step "compute-sanitizer racecheck"
  timeout ${KSTUDY_RACECHECK_SECONDS:-120} "$cs" --tool racecheck --print-limit 5 "$bundle/kstudy_tests" --gtest_brief=1 \
    --gtest_filter="${KSTUDY_RACECHECK_FILTER:-AllVariants/VariantCorrectness.MatchesReferenceOverShapes/*cuda*}" \
    >> "$out/sanitizer.txt" 2>&1
  echo "racecheck rc=$?"; grep -E "RACECHECK SUMMARY|PASSED|FAILED" "$out/sanitizer.txt" | tail -3
  timeout 60 "$cs" --tool racecheck --error-exitcode 9 "$bundle/kstudy_tests" --gtest_brief=1 \
    --gtest_filter='AllVariants/VariantCorrectness.MatchesReferenceOverShapes/fused_cuda*' >> "$out/sanitizer.txt" 2>&1
  echo "racecheck fused_cuda rc=$?"; grep -E "RACECHECK SUMMARY" "$out/sanitizer.txt" | tail -1
}

profile() {
  local experiments=("${@:-profile_layouts}")
  step profile
  echo "ncu: $(tool ncu)"
  timeout ${KSTUDY_PROFILE_SECONDS:-300} "$bundle/kstudy" profile "${experiments[@]}" --keep-ncu "$work/ncu" \
    --out "$out/profile.h5" > "$out/profile.txt" 2>&1
  echo "profile rc=$?"; tail -30 "$out/profile.txt"
  (cd "$work" && find ncu -name '*.csv' -o -name '*.json' -o -name '*.log' | tar -cf "$out/ncu.tar" -T -) 2> /dev/null
  if [[ ${KSTUDY_PROFILE_TIMING:-0} != 0 ]]; then
    step timing
    timeout ${KSTUDY_TIMING_SECONDS:-240} "$bundle/kstudy" run "${experiments[@]}" --trials 7 --replications 1 \
      --out "$out/profile_timing.h5" > "$out/profile_timing.txt" 2>&1
    echo "timing rc=$?"; grep -E "GATE|error|results:" "$out/profile_timing.txt" | head -20
  fi
}

faults() {
  step "fault and GPU health tests"
  timeout 400 "$bundle/run_tests.sh" --gtest_filter='Faults.*:GpuHealth.*' > "$out/reliability-tests.txt" 2>&1
  echo "tests rc=$?"
  grep -E "^\[ +(OK|FAILED|SKIPPED) +\]|^\[ health|PASSED|FAILED TEST" "$out/reliability-tests.txt" | tail -30
}

short() {
  step "short experiments"
  timeout ${KSTUDY_STUDY_SECONDS:-240} "$bundle/kstudy" run launch_overhead transfer_calibration layout_transpose \
    block_size quick --out "$out/study.h5" > "$out/study.txt" 2>&1
  echo "studies rc=$?"; grep -E "GATE|error|GPU health|results:" "$out/study.txt" | head -20
  gate_against_published "$out/study.h5"
  step cold
  timeout ${KSTUDY_COLD_SECONDS:-90} "$bundle/kstudy" run cold_compile --out "$out/cold.h5" \
    > "$out/cold.txt" 2>&1
  echo "cold rc=$?"; grep -E "error|results:" "$out/cold.txt" | head -5
  gate_against_published "$out/cold.h5"
}

suite() {
  check
  sanitize
  profile
  short
}

# The STREAM operations over n = 2^10 .. 2^30 on the device and the OpenMP host (Serial left out: at 2^30 it
# alone would take minutes), each against the roofs measured in the same run.
stream() {
  step stream
  timeout ${KSTUDY_STREAM_SECONDS:-420} "$bundle/kstudy" run stream "${overrides[@]}" \
    --variants stream_kokkos@cuda stream_kokkos_strided@cuda stream_kokkos_tuned@cuda stream_kokkos_kernels@cuda stream_cuda cublas cub \
    stream_kokkos@openmp stream_kokkos_strided@openmp stream_kokkos_tuned@openmp stream_kokkos_kernels@openmp --out "$out/stream.h5" > "$out/stream.txt" 2>&1
  echo "stream rc=$?"; grep -E "GATE|error|GPU health|results:" "$out/stream.txt" | head -20
  gate_against_published "$out/stream.h5"
}

# kill -9 of `kstudy run` part way through a study with device variants, then `--resume` at once (no delay):
# $OUT/resumed.h5 must hold exactly the samples of $OUT/uninterrupted.h5 (compare them with h5py afterwards).
# KSTUDY_KILL_EXPERIMENTS (default: quick stream_quick), KSTUDY_KILL_AFTER seconds (default 12).
kill_resume() {
  step "kill -9, then --resume at once"
  local exps=(${KSTUDY_KILL_EXPERIMENTS:-quick stream_quick}) after=${KSTUDY_KILL_AFTER:-12}
  "$bundle/kstudy" run "${exps[@]}" -q --out "$out/uninterrupted.h5" > "$out/uninterrupted.txt" 2>&1
  echo "uninterrupted rc=$?"
  "$bundle/kstudy" run "${exps[@]}" -q --out "$out/resumed.h5" > "$out/killed.txt" 2>&1 &
  local pid=$!
  sleep "$after"
  kill -9 "$pid"
  wait "$pid" 2> /dev/null
  echo "killed after $after s: rc=$?"
  "$bundle/kstudy" run "${exps[@]}" -q --resume --out "$out/resumed.h5" > "$out/resumed.txt" 2>&1
  echo "resume rc=$?"; tail -3 "$out/resumed.txt"
}

# Kernel lab I (issue 14): the memory-bound ladders at their files' protocols into $OUT/lab.h5.
# KSTUDY_RESUME_LAB=ARCHIVE completes that (interrupted) archive with --resume.
lab() {
  step lab
  local resume=()
  if [[ -n ${KSTUDY_RESUME_LAB:-} ]]; then
    cp "$KSTUDY_RESUME_LAB" "$out/lab.h5" && chmod u+w "$out/lab.h5" && resume=(--resume)
  fi
  timeout ${KSTUDY_LAB_SECONDS:-480} "$bundle/kstudy" run reduce_sum transpose softmax layernorm residual_layernorm \
    "${overrides[@]}" "${resume[@]}" --out "$out/lab.h5" > "$out/lab.txt" 2>&1
  echo "lab rc=$?"; grep -E "GATE|error|GPU health|results:" "$out/lab.txt" | head -20
  gate_against_published "$out/lab.h5"
}

# Kernel lab II (issue 15): the compute-bound ladders (GEMM at three input precisions, attention) into
# $OUT/lab2.h5, with the compute roofs among its ceilings. KSTUDY_RESUME_LAB2=ARCHIVE completes that archive;
# KSTUDY_LAB2_EXPERIMENTS replaces the experiment list.
lab2() {
  step lab2
  local resume=()
  if [[ -n ${KSTUDY_RESUME_LAB2:-} ]]; then
    cp "$KSTUDY_RESUME_LAB2" "$out/lab2.h5" && chmod u+w "$out/lab2.h5" && resume=(--resume)
  fi
  # shellcheck disable=SC2086  # the list is words
  timeout ${KSTUDY_LAB2_SECONDS:-540} "$bundle/kstudy" run ${KSTUDY_LAB2_EXPERIMENTS:-gemm tensor_core_gemm attention} \
    "${overrides[@]}" "${resume[@]}" --out "$out/lab2.h5" > "$out/lab2.txt" 2>&1
  echo "lab2 rc=$?"; grep -E "GATE|error|GPU health|results:|skipped|failed" "$out/lab2.txt" | head -30
  gate_against_published "$out/lab2.h5"
}

# The out-of-tree example (examples/out_of_tree) built here against the installed cuda kstudy: its study
# executable from KSTUDY_EXAMPLE_DIR runs beside the bundle's binaries (so it finds their scripts/):
# list, run stencil_sweep into $OUT/example.h5, report.
example() {
  step example
  cp "$KSTUDY_EXAMPLE_DIR/stencil_study" "$KSTUDY_EXAMPLE_DIR/stencil_study_bench" "$bundle/"
  {
    "$bundle/stencil_study" list | grep -A4 "^stencil3"
    "$bundle/stencil_study" run "$KSTUDY_EXAMPLE_DIR/stencil_sweep.json" --out "$out/example.h5"
    echo "run rc=$?"
    "$bundle/stencil_study" report "$out/example.h5" --out "$work/example-report" && ls "$work/example-report"
    "$bundle/stencil_study_bench" --benchmark_filter='stencil' --benchmark_min_time=0.05 2>&1 | grep -E "median|ceiling_device"
  } > "$out/example.txt" 2>&1
  echo "example rc=$?"; tail -30 "$out/example.txt"
}

# Kokkos' device-wide settings (kstudy/runner/kokkos_session.hpp): the same kernels with no Kokkos code (roof probes,
# CUB, cuBLAS, the CUDA rungs) in one process that restores the device defaults after Kokkos initialised and one
# that keeps what Kokkos set (KSTUDY_KEEP_KOKKOS_DEVICE_SETTINGS=1), restored / kept / restored so drift shows.
kokkos_settings() {
  step "Kokkos device settings: restored vs kept"
  local round keep tag
  for round in 1 2; do
    for keep in 0 1; do
      [[ $round == 2 && $keep == 1 ]] && continue  # restored, kept, restored
      tag=restored; [[ $keep == 1 ]] && tag=kept
      KSTUDY_KEEP_KOKKOS_DEVICE_SETTINGS=$keep timeout ${KSTUDY_BENCH_SECONDS:-200} "$bundle/kstudy_bench" \
        --operations=reduce_sum,stream_dot,layernorm --shapes=268435456,65536x4096 \
        --benchmark_filter="${KSTUDY_SETTINGS_FILTER:-@cuda/}" --benchmark_min_time=0.05 \
        --benchmark_out="$out/settings_${tag}_$round.json" --benchmark_out_format=json \
        > "$out/settings_${tag}_$round.txt" 2>&1
      echo "$tag round $round rc=$?: $(grep -E '^ceiling (device_read|device_copy) \(device_events\)' \
        "$out/settings_${tag}_$round.txt" | sed -E 's/ \([0-9]+ B in.*//' | tr '\n' ';')"
    done
  done
}

# The Python rungs (issue 43) against kstudy's own rungs: the machine's frameworks, their gates at odd sizes
# (alternatives_quick, softmax_quick), then alternatives_softmax and alternatives_scoring, into
# $OUT/alternatives.h5 (KSTUDY_ALTERNATIVES names other experiments; the overrides apply to the last two).
alternatives() {
  step "Python frameworks ($KSTUDY_RUNG_PYTHON)"
  "$KSTUDY_RUNG_PYTHON" - << 'PY' 2>&1 | tee "$out/frameworks.txt"
import importlib, sys
print("python", sys.version.split()[0])
for name in ("numpy", "cupy", "torch", "triton", "jax"):
    try:
        print(name, importlib.import_module(name).__version__)
    except Exception as exc:
        print(name, "unavailable:", exc)
PY
  "$bundle/kstudy" list 2>&1 | grep -E "python(_cuda)? runs on|^Python rungs|not registered" | head -40
  step "gates at odd sizes"
  timeout ${KSTUDY_ALT_QUICK_SECONDS:-200} "$bundle/kstudy" run alternatives_quick softmax_quick \
    --out "$out/alternatives_quick.h5" > "$out/alternatives_quick.txt" 2>&1
  echo "quick rc=$?"; grep -E "GATE|error|skipped|failed|results:" "$out/alternatives_quick.txt" | head -30
  step alternatives
  # shellcheck disable=SC2086  # the list is words
  timeout ${KSTUDY_ALT_SECONDS:-420} "$bundle/kstudy" run ${KSTUDY_ALTERNATIVES:-alternatives_softmax alternatives_scoring} \
    "${overrides[@]}" --out "$out/alternatives.h5" > "$out/alternatives.txt" 2>&1
  echo "alternatives rc=$?"; grep -E "GATE|error|skipped|failed|results:" "$out/alternatives.txt" | head -30
}

# What a Python rung's call costs around its kernel in a study (performance_notes, sessions 26 and 27):
# alternatives_reduce, whose n = 1,024 kernel takes microseconds, four times, into $OUT/floor.tar (floor*.h5 and
# their logs):
#   floor                 as it is (kstudy's OpenMP threads, bound across every core, spin after each region);
#   floor_passive         OMP_WAIT_POLICY=passive for the whole process tree (session 27: cupy.sum's events at
#                         n = 1,024 fell from 50.9 to 4.2 us);
#   floor_kstudy_passive  passive for kstudy alone, its Python workers as they were (rung_python without it);
#   floor_worker_passive  passive for the Python workers alone;
# which separates whose spinning threads delay a Python rung's call. Then each compared with floor.
floor() {
  local name policy wrapper
  for name in floor floor_passive floor_kstudy_passive floor_worker_passive; do
    policy=() wrapper=$work/rung_python_$name
    case $name in
      floor_passive) policy=(OMP_WAIT_POLICY=passive) ;;
      floor_kstudy_passive)
        policy=(OMP_WAIT_POLICY=passive KSTUDY_RUNG_PYTHON="$wrapper")
        printf '#!/bin/sh\nunset OMP_WAIT_POLICY\nexec "%s" "$@"\n' "$bundle/rung_python" > "$wrapper" ;;
      floor_worker_passive)
        policy=(KSTUDY_RUNG_PYTHON="$wrapper")
        printf '#!/bin/sh\nOMP_WAIT_POLICY=passive exec "%s" "$@"\n' "$bundle/rung_python" > "$wrapper" ;;
    esac
    [[ -f $wrapper ]] && chmod +x "$wrapper"
    step "$name"
    env "${policy[@]}" timeout "${KSTUDY_FLOOR_SECONDS:-240}" "$bundle/kstudy" run alternatives_reduce \
      "${overrides[@]}" --out "$out/$name.h5" > "$out/$name.txt" 2>&1
    echo "$name rc=$?"; grep -E "GATE|error|skipped|failed|results:" "$out/$name.txt" | head -20
  done
  # kstudy compare needs NumPy, pandas, h5py and SciPy: the machine's python3 may have them where /usr/bin's has not.
  for name in floor_passive floor_kstudy_passive floor_worker_passive; do
    KSTUDY_PYTHON=${KSTUDY_PYTHON:-$(command -v python3)} "$bundle/kstudy" compare "$out/floor.h5" "$out/$name.h5" \
      > "$out/${name}_compare.txt" 2>&1
    echo "compare $name rc=$?"; head -40 "$out/${name}_compare.txt"
  done
  # Fifteen files, and the device tool brings back eight: one tar (session 28 lost three of the four archives).
  (cd "$out" && tar -cf floor.tar floor*.h5 floor*.txt && rm -f floor*.h5 floor*.txt)
}

# The other half of `kstudy profile`'s side-by-side: a Python rung's kernels run in its worker, out of kstudy
# profile's reach, so ncu runs scripts/device_rung_ncu.py, which profiles one steady-state call of each probe
# (sections: speed of light, launch, occupancy, warp states, memory), at the clocks the card runs (--clock-control
# none, as kstudy profile: ncu's default locks the base clock, and session 27's first run read torch.mm's kernel
# 1.2x slower than the identical kernel in kstudy profile). Then kstudy's own rungs at those points.
rung_ncu_probes="softmax_triton@python_cuda:65536x8192 softmax_torch_compile@python_cuda:65536x8192
softmax_torch_compile@python_cuda:65536x16384 gemm_bf16_torch@python_cuda:4096x4096x4096
gemm_fp16_torch@python_cuda:4096x4096x4096 gemm_tf32_torch@python_cuda:4096x4096x4096"
rung_ncu() {
  step rung_ncu
  local sections=() s
  for s in SpeedOfLight LaunchStats Occupancy WarpStateStats MemoryWorkloadAnalysis; do sections+=(--section "$s"); done
  # shellcheck disable=SC2086 # the probes are words
  timeout "${KSTUDY_RUNG_NCU_SECONDS:-240}" "$(tool ncu)" --clock-control none --profile-from-start off "${sections[@]}" --csv \
    --page details "$bundle/rung_python" "$bundle/scripts/device_rung_ncu.py" ${KSTUDY_RUNG_NCU_PROBES:-$rung_ncu_probes} \
    > "$out/rung_ncu.csv" 2> "$out/rung_ncu.err"
  echo "rung ncu rc=$? ($(wc -l < "$out/rung_ncu.csv") lines)"; grep -E "^probe|rror" "$out/rung_ncu.err" | head -20
  profile profile_alternatives_softmax profile_alternatives_gemm
}

sweeps() {
  step sweeps
  local resume=()
  if [[ -n ${KSTUDY_RESUME_SWEEPS:-} ]]; then
    cp "$KSTUDY_RESUME_SWEEPS" "$out/sweeps.h5" && resume=(--resume)
  fi
  timeout ${KSTUDY_SWEEP_SECONDS:-540} "$bundle/kstudy" run rows_sweep feature_sweep "${overrides[@]}" "${resume[@]}" \
    --out "$out/sweeps.h5" > "$out/sweeps.txt" 2>&1
  echo "sweeps rc=$?"; grep -E "GATE|error|GPU health|results:" "$out/sweeps.txt" | head -20
  gate_against_published "$out/sweeps.h5"
}

echo "gpu before: $(gpu_state)" | tee "$out/gpu.txt"
for mode in $modes; do
case $mode in
  check) check ;;
  tests) tests ;;
  bench) bench ;;
  kill_resume) kill_resume ;;
  faults) faults ;;
  short) short ;;
  sanitize) sanitize ;;
  profile) profile "$@" ;;
  study) step study; "$bundle/kstudy" run "$@" --out "$out/study.h5" > "$out/study.txt" 2>&1; echo "study rc=$?"; tail -40 "$out/study.txt"
    gate_against_published "$out/study.h5" ;;
  reliability)
    faults
    step "health-guarded study"
    "$bundle/kstudy" run quick --trials 3 --replications 1 --out "$out/health.h5" > "$out/health.txt" 2>&1
    echo "study rc=$?"; grep -E "GPU health|FAILED|results:" "$out/health.txt"
    ;;
  suite) suite ;;
  sweeps) sweeps ;;
  alternatives) alternatives ;;
  floor) floor ;;
  rung_ncu) rung_ncu ;;
  stream) stream ;;
  lab) lab ;;
  lab2) lab2 ;;
  example) example ;;
  kokkos_settings) kokkos_settings ;;
  all) suite; sweeps ;;
  *) echo "device_run.sh: unknown mode '$mode'" >&2; exit 2 ;;
esac
done
echo "gpu after: $(gpu_state)" | tee -a "$out/gpu.txt"
if [[ ${KSTUDY_PACK:-0} != 0 ]]; then
  (cd "$out" && ls *.txt > /dev/null 2>&1 && tar -cf logs.tar *.txt && rm -f *.txt)
fi
exit 0
