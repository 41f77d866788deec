#!/usr/bin/env bash
# Builds the cpu flavour against a Kokkos release through the ordinary bring-your-own path
# (-DKokkos_ROOT=...) and runs the whole suite there, so the promise that kstudy builds on the Kokkos
# cluster users have is tested, not assumed.
#   scripts/test_against_kokkos.sh KOKKOS_TARBALL KERNELS_TARBALL [CXX_STANDARD=17] [extra ctest arguments]
# The release is built once by scripts/bootstrap.sh (checksums from the SHA256SUMS beside the tarballs,
# patches from cmake/patches/kokkos-<version>/) into the cache outside the clone; the build folder is
# build/cpu-kokkos-<version>-cxx<standard>.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
[[ $# -ge 2 ]] || { sed -n '2,9p' "$0" >&2; exit 2; }
kokkos_tarball=$1 kernels_tarball=$2; shift 2
standard=17
if [[ $# -gt 0 && $1 =~ ^(17|20|23)$ ]]; then standard=$1; shift; fi
prefix=$(scripts/bootstrap.sh --flavour cpu --print-prefix --kokkos-tarball "$kokkos_tarball" \
  --kernels-tarball "$kernels_tarball")
version=$(basename "$kokkos_tarball"); version=${version#kokkos-}; version=${version%%.tar.*}
build=build/cpu-kokkos-$version-cxx$standard
echo "kstudy against Kokkos $version (C++$standard): $prefix -> $build"
cmake --preset cpu -B "$build" -DKokkos_ROOT="$prefix" -DKokkosKernels_ROOT="$prefix" \
  -DKSTUDY_BOOTSTRAP_KOKKOS=OFF -DCMAKE_CXX_STANDARD="$standard" >/dev/null
grep -q "^Kokkos_DIR:PATH=$prefix/" "$build/CMakeCache.txt" ||
  { echo "error: $build did not take Kokkos from $prefix" >&2; exit 1; }
cmake --build "$build" -j "${KSTUDY_JOBS:-$(nproc)}"
ctest --test-dir "$build" --output-on-failure "$@"
