#!/usr/bin/env bash
# Builds kstudy against a Kokkos release through the ordinary bring-your-own path (-DKokkos_ROOT=...) and runs
# the whole suite there, so the promise that kstudy builds on the Kokkos cluster users have is tested, not
# assumed.
#   scripts/test_against_kokkos.sh [--preset cpu|asan|asan-clang] [--build-only | --test-only]
#                                  [--kokkos 4.6|3.4 | KOKKOS_TARBALL KERNELS_TARBALL] [--std 17|20|23]
#                                  [extra ctest arguments]
# The Kokkos is built once by scripts/bootstrap.sh into the cache outside the clone: --kokkos picks the
# bootstrap's current Kokkos (4.6) or Debian's 3.4.01; tarballs name a release (checksums from the SHA256SUMS
# beside them, patches from cmake/patches/kokkos-<version>/). The build folder is
# build/<preset>-kokkos-<version>-cxx<standard> (C++17 unless --std says otherwise). With neither, it builds and
# tests the preset itself (the bootstrap's default Kokkos) in build/<preset>. --preset asan builds under
# AddressSanitizer + UndefinedBehaviorSanitizer; asan-clang the same with clang, against a clang-built Kokkos
# (bootstrap --cxx clang++); --build-only and --test-only split the two halves (CI times them apart).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
preset=cpu build_step=1 test_step=1 standard=17
rest=() kokkos_args=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --preset) preset=${2:?--preset needs cpu, asan or asan-clang}; shift 2 ;;
    --kokkos) kokkos_args=(--kokkos "${2:?--kokkos needs 4.6 or 3.4}"); shift 2 ;;
    --std) standard=${2:?--std needs 17, 20 or 23}; shift 2 ;;
    --build-only) test_step=0; shift ;;
    --test-only) build_step=0; shift ;;
    *) rest+=("$1"); shift ;;
  esac
done
[[ $preset =~ ^(cpu|asan|asan-clang)$ ]] || { echo "error: --preset must be cpu, asan or asan-clang, not '$preset'" >&2; exit 2; }
cxx_args=()
[[ $preset == asan-clang ]] && cxx_args=(--cxx clang++)
set -- "${rest[@]+"${rest[@]}"}"

if [[ $# -ge 2 && $1 == *.tar.* ]]; then
  kokkos_args=(--kokkos-tarball "$1" --kernels-tarball "$2"); shift 2
  # The standard after the tarballs, as before --std.
  if [[ $# -gt 0 && $1 =~ ^(17|20|23)$ ]]; then standard=$1; shift; fi
fi
[[ $standard =~ ^(17|20|23)$ ]] || { echo "error: --std must be 17, 20 or 23, not '$standard'" >&2; exit 2; }
if [[ ${#kokkos_args[@]} -gt 0 ]]; then
  prefix=$(scripts/bootstrap.sh --flavour cpu "${cxx_args[@]+"${cxx_args[@]}"}" --print-prefix "${kokkos_args[@]}")
  version=$(basename "$prefix" | sed -nE 's/^kokkos-([0-9]+[.][0-9]+[.][0-9]+)-.*/\1/p')
  build=build/$preset-kokkos-${version:-custom}-cxx$standard
  if [[ $build_step -eq 1 ]]; then
    echo "kstudy ($preset) against Kokkos ${version:-in $prefix} (C++$standard): $prefix -> $build"
    cmake --preset "$preset" -B "$build" -DKokkos_ROOT="$prefix" -DKokkosKernels_ROOT="$prefix" \
      -DKSTUDY_BOOTSTRAP_KOKKOS=OFF -DCMAKE_CXX_STANDARD="$standard" >/dev/null
    grep -q "^Kokkos_DIR:PATH=$prefix/" "$build/CMakeCache.txt" ||
      { echo "error: $build did not take Kokkos from $prefix" >&2; exit 1; }
  fi
else
  build=build/$preset
  [[ $build_step -eq 0 ]] || cmake --preset "$preset" >/dev/null
fi
if [[ $build_step -eq 1 ]]; then cmake --build "$build" -j "${KSTUDY_JOBS:-$(nproc)}"; fi
if [[ $test_step -eq 1 ]]; then ctest --test-dir "$build" --output-on-failure "$@"; fi
