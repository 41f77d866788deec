#!/usr/bin/env bash
# Sets everything up, builds, and runs the main job: the `quick` study of the scoring operation and one
# quick line per kernel-lab operation (STREAM, sum reduction, transpose, softmax, LayerNorm, residual +
# LayerNorm, GEMM, attention) on the best backend present (the cuda flavour when a GPU and nvcc are here, else OpenMP), into
# one archive, then writes its `kstudy report` and prints both paths.
#   scripts/quickstart.sh [extra `kstudy run` arguments]
# The cuda flavour is built for GPU 0's compute capability (nvidia-smi; scripts/lib/gpu_arch.sh), Kokkos and
# kstudy alike, against current Kokkos (4.6.01: sm_75, 80, 86, 89, 90, 100 and 120; scripts/bootstrap.sh --help
# says where its sources come from); KSTUDY_KOKKOS=3.4 builds against Debian's Kokkos 3.4.01 (sm_75, 80, 86, 90).
# Environment: KSTUDY_CUDA_ARCH builds for another arch (e.g. 80); KSTUDY_KOKKOS, the Kokkos; KSTUDY_JOBS, the
# build parallelism.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
# shellcheck source=scripts/lib/gpu_arch.sh
source scripts/lib/gpu_arch.sh
# shellcheck source=scripts/lib/build_dir.sh
source scripts/lib/build_dir.sh
die() { echo "kstudy: error: $*" >&2; exit 1; }

preset=cpu
if kstudy_gpu_present && { command -v nvcc >/dev/null 2>&1 || [[ -x /usr/local/cuda/bin/nvcc ]]; }; then
  preset=cuda
fi
bootstrap_args=(--flavour "$preset")
configure_args=()
if [[ $preset == cuda ]]; then
  gpu=$(kstudy_gpu_name)
  if [[ -n ${KSTUDY_CUDA_ARCH:-} ]]; then
    arch=$KSTUDY_CUDA_ARCH
    [[ $arch =~ ^[0-9]+$ ]] || die "KSTUDY_CUDA_ARCH must be a number such as 80, not '$arch'"
    echo "kstudy: using the cuda flavour for sm_$arch (KSTUDY_CUDA_ARCH; GPU 0 is ${gpu:-unnamed})"
  else
    kstudy_gpu_detect || die "cannot read the GPU's compute capability: $kstudy_gpu_error; set KSTUDY_CUDA_ARCH (e.g. 80)"
    arch=$kstudy_gpu_arch
    echo "kstudy: using the cuda flavour for sm_$arch (${gpu:-compute capability $kstudy_gpu_cc})"
  fi
  bootstrap_args+=(--arch "$arch")
  configure_args+=(-DKSTUDY_CUDA_ARCH="$arch")
else
  echo "kstudy: using the cpu flavour"
fi
prefix=$(scripts/bootstrap.sh "${bootstrap_args[@]}" --print-prefix)
if [[ $preset == cuda ]]; then
  # A build folder configured for another arch holds that arch's Kokkos (Kokkos_ROOT, nvcc_wrapper): start it
  # afresh, as `cmake --fresh` would, so that the Kokkos just built for this arch is the one found.
  cached=$(sed -n 's/^KSTUDY_CUDA_ARCH:[A-Z]*=//p' build/cuda/CMakeCache.txt 2>/dev/null || true)
  if [[ -n $cached && $cached != "$arch" ]]; then
    echo "kstudy: build/cuda was configured for sm_$cached; configuring it afresh for sm_$arch"
    rm -rf build/cuda/CMakeCache.txt build/cuda/CMakeFiles
  fi
fi
kstudy_fresh_build_dir "build/$preset" "$prefix"
cmake --preset "$preset" "${configure_args[@]}" -DKokkos_ROOT="$prefix" -DKokkosKernels_ROOT="$prefix" >/dev/null
cmake --build --preset "$preset" -j "${KSTUDY_JOBS:-$(nproc)}" --target kstudy
mkdir -p results
out=results/quick-$preset-$(date -u +%Y%m%dT%H%M%SZ).h5
"build/$preset/src/app/kstudy" run quick stream_quick reduce_sum_quick transpose_quick softmax_quick layernorm_quick \
  residual_layernorm_quick gemm_quick attention_quick --out "$out" "$@"
report=${out%.h5}-report
if "build/$preset/src/app/kstudy" report "$out" --out "$report" > /dev/null; then
  echo "report: $report/report.md"
else
  echo "kstudy: the archive is complete, but its report could not be written (see above)" >&2
fi
