#!/usr/bin/env bash
# Sets everything up, builds, and runs the main job: the `quick` study of the scoring operation and one
# quick line per kernel-lab operation (STREAM, sum reduction, transpose, softmax, LayerNorm, residual +
# LayerNorm, GEMM, attention) on the best backend present (the cuda flavour when a GPU and nvcc are here, else OpenMP), into
# one archive, then writes its `kstudy report` and prints both paths.
#   scripts/quickstart.sh [extra `kstudy run` arguments]
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
preset=cpu
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 &&
   { command -v nvcc >/dev/null 2>&1 || [[ -x /usr/local/cuda/bin/nvcc ]]; }; then
  preset=cuda
fi
echo "kstudy: using the $preset flavour"
scripts/bootstrap.sh --flavour "$preset"
cmake --preset "$preset" >/dev/null
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
