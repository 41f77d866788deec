#!/usr/bin/env bash
# Sets everything up, builds the CPU flavour (Kokkos Serial + OpenMP) and runs every test through ctest.
#   scripts/test.sh [extra ctest arguments]
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
scripts/bootstrap.sh --flavour cpu
cmake --preset cpu >/dev/null
cmake --build --preset cpu -j "${KSTUDY_JOBS:-$(nproc)}"
# Tests run in parallel, as many as KSTUDY_JOBS (default: every core): the long end-to-end tests
# start first (their COST in tests/CMakeLists.txt) and overlap the short ones.
ctest --preset cpu -j "${KSTUDY_JOBS:-$(nproc)}" "$@"
