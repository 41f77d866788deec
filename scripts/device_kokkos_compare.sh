#!/usr/bin/env bash
# Runs on a GPU machine: the same kstudy built against two Kokkos versions, in one call, so both are
# measured on the same card in the same session. For each bundle (scripts/make_gpu_bundle.sh + tar):
# `kstudy info`, the whole test suite, `kstudy_bench` (every @cuda variant, resident, median of 7), the
# `quick` study, and Nsight Compute counters of the Kokkos kernels (`kstudy profile profile_layouts`).
#   scripts/device_kokkos_compare.sh A.tar.xz TAG_A B.tar.xz TAG_B
# Output: $OUT/TAG.tar per bundle (bench.json, quick.h5, profile.h5, logs); compare them where scipy is:
#   kstudy compare TAG_A/quick.h5 TAG_B/quick.h5 --by kokkos
# Environment: KSTUDY_PROFILE_VARIANTS (default fused_kokkos), and device_run.sh's KSTUDY_*_SECONDS.
set -uo pipefail
[[ $# -eq 4 ]] || { sed -n '2,10p' "$0" >&2; exit 2; }
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${OUT:-$PWD/device-out}
work=$(mktemp -d)
measure() {
  local tarball=$1 tag=$2
  local dir=$work/$tag
  mkdir -p "$dir"
  echo "===== $tag ($(basename "$tarball"))"
  OUT=$dir KSTUDY_BENCH_FILTER=${KSTUDY_BENCH_FILTER:-@cuda/} "$here/device_run.sh" "$tarball" check
  local bundle_dir; bundle_dir=$(mktemp -d); tar -xJf "$tarball" -C "$bundle_dir"
  local bundle; bundle=$(dirname "$(find "$bundle_dir" -maxdepth 2 -name env.sh | head -1)")
  echo "== quick ($(date -u +%T))"
  timeout ${KSTUDY_STUDY_SECONDS:-300} "$bundle/kstudy" run quick --out "$dir/quick.h5" > "$dir/quick.txt" 2>&1
  echo "quick rc=$?"; grep -E "GATE|error|GPU health|results:" "$dir/quick.txt" | head -8
  echo "== profile ($(date -u +%T))"
  OUT=$dir KSTUDY_PROFILE_SECONDS=${KSTUDY_PROFILE_SECONDS:-240} "$here/device_run.sh" "$tarball" profile \
    profile_layouts --variants "${KSTUDY_PROFILE_VARIANTS:-fused_kokkos}" | grep -E "profile rc|error" | head -5
  (cd "$dir" && tar -cf "$out/$tag.tar" ./*)
}
measure "$1" "$2"
measure "$3" "$4"
ls -la "$out"
