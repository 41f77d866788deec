#!/usr/bin/env bash
# Runs on a GPU machine from a GPU bundle tarball (scripts/make_gpu_bundle.sh + tar): the GPU test
# suite, the environment, the Google Benchmark targets and/or studies, with every output under $OUT.
#   scripts/device_run.sh BUNDLE.tar.xz check            # tests + info + kstudy_bench + quick study
#   scripts/device_run.sh BUNDLE.tar.xz study EXP...     # the given experiments into one archive
set -uo pipefail
tarball=$1; mode=$2; shift 2
out=${OUT:-$PWD/device-out}; mkdir -p "$out"
work=$(mktemp -d); tar -xJf "$tarball" -C "$work"
bundle=$(find "$work" -maxdepth 2 -name env.sh -printf '%h\n' | head -1)
source "$bundle/env.sh"
gpu_state() { nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw,clocks_throttle_reasons.active --format=csv,noheader; }
echo "gpu before: $(gpu_state)" | tee -a "$out/gpu.txt"
case $mode in
  check)
    "$bundle/kstudy" info > "$out/info.txt" 2>&1; grep -E "HOPPER|KOKKOS_ENABLE_CUDA|gpu_name|OpenMP" "$out/info.txt" | head -8
    "$bundle/run_tests.sh" --gtest_brief=1 > "$out/tests.txt" 2>&1; echo "tests rc=$?"; tail -4 "$out/tests.txt"
    "$bundle/kstudy_bench" --benchmark_filter='@(cuda|openmp)/' --benchmark_min_time=0.2 \
      --benchmark_out="$out/bench.json" --benchmark_out_format=json > "$out/bench.txt" 2>&1; echo "bench rc=$?"
    grep -E "median|ceiling" "$out/bench.txt" | sed -E 's/ +/ /g' | head -80
    ;;
  study)
    "$bundle/kstudy" run "$@" --out "$out/study.h5" > "$out/study.txt" 2>&1; echo "study rc=$?"
    tail -60 "$out/study.txt"
    ;;
esac
echo "gpu after: $(gpu_state)" | tee -a "$out/gpu.txt"
