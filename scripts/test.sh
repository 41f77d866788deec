#!/usr/bin/env bash
# Sets everything up, builds the CPU flavour (Kokkos Serial + OpenMP) and runs every test through ctest.
#   scripts/test.sh [extra ctest arguments]
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
# shellcheck source=scripts/lib/build_dir.sh
source scripts/lib/build_dir.sh
# The Kokkos the bootstrap chose (current Kokkos by default; KSTUDY_KOKKOS=3.4 for the comparison build).
prefix=$(scripts/bootstrap.sh --flavour cpu --print-prefix)
kstudy_fresh_build_dir build/cpu "$prefix"
cmake --preset cpu -DKokkos_ROOT="$prefix" -DKokkosKernels_ROOT="$prefix" >/dev/null
cmake --build --preset cpu -j "${KSTUDY_JOBS:-$(nproc)}"
# Tests run in parallel, as many as KSTUDY_JOBS (default: every core): the long end-to-end tests
# start first (their COST in tests/CMakeLists.txt) and overlap the short ones.
ctest --preset cpu -j "${KSTUDY_JOBS:-$(nproc)}" "$@"
