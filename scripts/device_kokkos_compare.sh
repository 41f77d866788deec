#!/usr/bin/env bash
# Runs on a GPU machine: the same kstudy built against two Kokkos versions, in one call, so both are
# measured on the same card in the same session. For each bundle (scripts/make_gpu_bundle.sh + tar), the
# steps of KSTUDY_COMPARE_STEPS (default "check quick profile"), in order:
#   check    `kstudy info`, the test suite (KSTUDY_TEST_FILTER narrows it) and `kstudy_bench` (every @cuda variant)
#   tests    the test suite alone (KSTUDY_TEST_FILTER)
#   study    `kstudy run $KSTUDY_COMPARE_STUDY` (default: the kokkos_costs_* experiments) into study.h5
#   quick    the `quick` study into quick.h5
#   profile  Nsight Compute counters (`kstudy profile $KSTUDY_COMPARE_PROFILE`, default: profile_layouts --variants
#            fused_kokkos) into profile.h5
#   scripts/device_kokkos_compare.sh A.tar.xz TAG_A B.tar.xz TAG_B
# A bundle may hold only the binaries (no lib/): it then runs with the first bundle's libraries, which is how two
# builds fit one call's transfer limit (Kokkos is linked statically; the rest is the same).
# Output: $OUT/TAG.tar per bundle (bench.json, study.h5, quick.h5, profile.h5, logs); compare them where scipy is:
#   kstudy compare TAG_A/study.h5 TAG_B/study.h5 --by kokkos
# Environment: device_run.sh's KSTUDY_*_SECONDS; KSTUDY_STUDY_SECONDS bounds each study (default 300).
set -uo pipefail
[[ $# -eq 4 ]] || { sed -n '2,16p' "$0" >&2; exit 2; }
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${OUT:-$PWD/device-out}
mkdir -p "$out"
work=$(mktemp -d)
steps=${KSTUDY_COMPARE_STEPS:-check quick profile}
study=${KSTUDY_COMPARE_STUDY:-kokkos_costs_vectors kokkos_costs_softmax kokkos_costs_layernorm kokkos_costs_transpose}
first_lib=
# Unpacks a tarball into $work and sets `bundle` to its folder; a bundle without lib/ gets the first bundle's
# libraries. (Not called in a command substitution: first_lib must outlive the call.)
unpack() {
  local dir; dir=$(mktemp -d -p "$work"); tar -xJf "$1" -C "$dir"
  bundle=$(dirname "$(find "$dir" -maxdepth 2 -name env.sh | head -1)")
  if [[ -d $bundle/lib && -n $(ls "$bundle/lib") ]]; then
    [[ -n $first_lib ]] || first_lib=$bundle/lib
  else
    [[ -n $first_lib ]] || { echo "device_kokkos_compare: $1 has no lib/ and no bundle before it does" >&2; exit 2; }
    rm -rf "$bundle/lib"; cp -r "$first_lib" "$bundle/lib"
  fi
}
measure() {
  local tarball=$1 tag=$2
  local dir=$work/$tag
  mkdir -p "$dir"
  echo "===== $tag ($(basename "$tarball"))"
  local bundle; unpack "$tarball"
  for s in $steps; do
    case $s in
      check | tests)
        OUT=$dir KSTUDY_BENCH_FILTER=${KSTUDY_BENCH_FILTER:-@cuda/} "$here/device_run.sh" "$bundle" "$s" ;;
      study)
        echo "== study $study ($(date -u +%T))"
        # shellcheck disable=SC2086
        (source "$bundle/env.sh" && timeout "${KSTUDY_STUDY_SECONDS:-300}" "$bundle/kstudy" run $study \
          --out "$dir/study.h5" > "$dir/study.txt" 2>&1)
        echo "study rc=$?"; grep -E "GATE|error|GPU health|results:" "$dir/study.txt" | head -8 ;;
      quick)
        echo "== quick ($(date -u +%T))"
        (source "$bundle/env.sh" && timeout "${KSTUDY_STUDY_SECONDS:-300}" "$bundle/kstudy" run quick \
          --out "$dir/quick.h5" > "$dir/quick.txt" 2>&1)
        echo "quick rc=$?"; grep -E "GATE|error|GPU health|results:" "$dir/quick.txt" | head -8 ;;
      profile)
        echo "== profile ($(date -u +%T))"
        # shellcheck disable=SC2086
        OUT=$dir KSTUDY_PROFILE_SECONDS=${KSTUDY_PROFILE_SECONDS:-240} "$here/device_run.sh" "$bundle" profile \
          ${KSTUDY_COMPARE_PROFILE:-profile_layouts --variants fused_kokkos} | grep -E "profile rc|error|@cuda" | head -40 ;;
      *) echo "device_kokkos_compare: unknown step '$s'" >&2; exit 2 ;;
    esac
  done
  (cd "$dir" && tar -cf "$out/$tag.tar" ./*)
}
measure "$1" "$2"
measure "$3" "$4"
ls -la "$out"
