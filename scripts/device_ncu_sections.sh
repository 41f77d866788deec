#!/usr/bin/env bash
# Runs on a GPU machine: Nsight Compute's full section set (stall reasons, instruction mix, memory tables,
# occupancy, launch statistics) for one kernel launch of each chosen kstudy_bench benchmark of a GPU bundle,
# where `kstudy profile`'s summary counters do not explain a gap.
#   scripts/device_ncu_sections.sh BUNDLE.tar.xz BENCH_FILTER...
#   e.g. KSTUDY_NCU_KERNEL='softmax' scripts/device_ncu_sections.sh b.tar.xz 'softmax_kokkos_tuned@cuda/65536x4096/'
# KSTUDY_NCU_KERNEL: regex of the demangled kernel names to profile (a Kokkos kernel is named by its functor) (default: any); KSTUDY_NCU_SKIP: matching launches to
# skip first (default 2: the correctness gate's and a warm-up's). Output: $OUT/ncu_FILTER.csv (ncu --csv --page
# details) and its stderr beside it.
set -uo pipefail
[[ $# -ge 2 ]] || { sed -n '2,10p' "$0" >&2; exit 2; }
tarball=$1; shift
out=${OUT:-$PWD/device-out}; mkdir -p "$out"
work=$(mktemp -d); tar -xJf "$tarball" -C "$work"
bundle=$(dirname "$(find "$work" -maxdepth 2 -name env.sh | head -1)")
# shellcheck disable=SC1091
source "$bundle/env.sh"
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
for filter in "$@"; do
  name=$(printf '%s' "$filter" | tr -c 'A-Za-z0-9_.-' '_')
  timeout "${KSTUDY_NCU_SECONDS:-120}" "$ncu" --set full --kernel-name-base demangled -k "regex:${KSTUDY_NCU_KERNEL:-.}" \
    --launch-skip "${KSTUDY_NCU_SKIP:-2}" --launch-count 1 --csv --page details \
    "$bundle/kstudy_bench" --benchmark_filter="$filter" --benchmark_min_time=0.01 > "$out/ncu_$name.csv" 2> "$out/ncu_$name.err"
  echo "$filter: ncu rc=$? ($(wc -l < "$out/ncu_$name.csv") lines)"
done
