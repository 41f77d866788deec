#!/usr/bin/env bash
# Runs on a GPU machine from a GPU bundle tarball (scripts/make_gpu_bundle.sh + tar): the GPU test
# suite, the environment, the Google Benchmark targets and studies, every output under $OUT.
#   scripts/device_run.sh BUNDLE.tar.xz check              # tests + info + kstudy_bench + quick study
#   scripts/device_run.sh BUNDLE.tar.xz study ARGS...      # `kstudy run ARGS` into $OUT/study.h5
#   scripts/device_run.sh BUNDLE.tar.xz all                # check, then every built-in experiment
#   scripts/device_run.sh BUNDLE.tar.xz reliability        # fault and GPU-health tests, a health-guarded study
#   scripts/device_run.sh BUNDLE.tar.xz profile [EXP...]   # `kstudy profile` (Nsight Compute, default
#        profile_layouts) into $OUT/profile.h5 with ncu's reports in $OUT/ncu, then a short timing run of the
#        same points into $OUT/profile_timing.h5 (KSTUDY_PROFILE_TIMING=0 skips it) for `kstudy report`
# Environment: KSTUDY_TRIALS / KSTUDY_REPLICATIONS shorten the studies of `all` (defaults: the files').
set -uo pipefail
tarball=$1; mode=$2; shift 2
out=${OUT:-$PWD/device-out}; mkdir -p "$out"
work=$(mktemp -d); tar -xJf "$tarball" -C "$work"
bundle=$(dirname "$(find "$work" -maxdepth 2 -name env.sh | head -1)")
source "$bundle/env.sh"
gpu_state() {
  nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw,clocks_throttle_reasons.active \
    --format=csv,noheader 2>&1
}
step() { echo "== $* ($(date -u +%T))"; }
overrides=()
[[ -n ${KSTUDY_TRIALS:-} ]] && overrides+=(--trials "$KSTUDY_TRIALS")
[[ -n ${KSTUDY_REPLICATIONS:-} ]] && overrides+=(--replications "$KSTUDY_REPLICATIONS")

check() {
  step info
  "$bundle/kstudy" info > "$out/info.txt" 2>&1
  grep -E "HOPPER|KOKKOS_ENABLE_CUDA|gpu_name|Kokkos::OpenMP|kokkos_version" "$out/info.txt" | head -8
  step tests
  timeout 240 "$bundle/run_tests.sh" --gtest_brief=1 > "$out/tests.txt" 2>&1
  echo "tests rc=$?"; grep -E "FAILED|PASSED|SKIPPED|tests from" "$out/tests.txt" | tail -12
  step bench
  timeout 200 "$bundle/kstudy_bench" --benchmark_filter='@(cuda|openmp)/' --benchmark_min_time=0.05 \
    --benchmark_out="$out/bench.json" --benchmark_out_format=json > "$out/bench.txt" 2>&1
  echo "bench rc=$?"; grep -E "_median|ceiling" "$out/bench.txt" | sed -E 's/ +/ /g'
}

echo "gpu before: $(gpu_state)" | tee "$out/gpu.txt"
case $mode in
  check) check ;;
  study) step study; "$bundle/kstudy" run "$@" --out "$out/study.h5" > "$out/study.txt" 2>&1; echo "study rc=$?"; tail -40 "$out/study.txt" ;;
  reliability)
    step "fault and GPU health tests"
    timeout 400 "$bundle/run_tests.sh" --gtest_filter='Faults.*:GpuHealth.*' > "$out/reliability-tests.txt" 2>&1
    echo "tests rc=$?"
    grep -E "^\[ +(OK|FAILED|SKIPPED) +\]|^\[ health|PASSED|FAILED TEST" "$out/reliability-tests.txt" | tail -30
    step "health-guarded study"
    "$bundle/kstudy" run quick --trials 3 --replications 1 --out "$out/health.h5" > "$out/health.txt" 2>&1
    echo "study rc=$?"; grep -E "GPU health|FAILED|results:" "$out/health.txt"
  profile)
    experiments=("${@:-profile_layouts}")
    step profile
    echo "ncu: $(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2> /dev/null | tail -1)"
    timeout ${KSTUDY_PROFILE_SECONDS:-300} "$bundle/kstudy" profile "${experiments[@]}" --keep-ncu "$out/ncu" \
      --out "$out/profile.h5" > "$out/profile.txt" 2>&1
    echo "profile rc=$?"; tail -40 "$out/profile.txt"
    if [[ ${KSTUDY_PROFILE_TIMING:-1} != 0 ]]; then
      step timing
      timeout ${KSTUDY_TIMING_SECONDS:-240} "$bundle/kstudy" run "${experiments[@]}" --trials 7 --replications 1 \
        --out "$out/profile_timing.h5" > "$out/profile_timing.txt" 2>&1
      echo "timing rc=$?"; grep -E "GATE|error|results:" "$out/profile_timing.txt" | head -20
    fi
    ;;
  all)
    check
    step studies
    timeout ${KSTUDY_STUDY_SECONDS:-330} "$bundle/kstudy" run launch_overhead transfer_calibration layout_transpose \
      rows_sweep feature_sweep block_size "${overrides[@]}" --out "$out/study.h5" > "$out/study.txt" 2>&1
    echo "studies rc=$?"
    step cold
    timeout ${KSTUDY_COLD_SECONDS:-90} "$bundle/kstudy" run cold_compile --trials 1 --replications 1 --out "$out/cold.h5" \
      >> "$out/study.txt" 2>&1
    echo "cold rc=$?"
    grep -E "GATE|error|results:" "$out/study.txt" | head -20
    ;;
esac
echo "gpu after: $(gpu_state)" | tee -a "$out/gpu.txt"
