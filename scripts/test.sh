#!/usr/bin/env bash
# Sets everything up, builds the CPU flavour (Kokkos Serial + OpenMP) and runs every test through ctest.
#   scripts/test.sh [extra ctest arguments]
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
scripts/bootstrap.sh --flavour cpu
cmake --preset cpu >/dev/null
cmake --build --preset cpu -j "${KSTUDY_JOBS:-$(nproc)}"
ctest --preset cpu "$@"
