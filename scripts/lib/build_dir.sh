# shellcheck shell=bash
# Sourced by scripts/test.sh and scripts/quickstart.sh.
# kstudy_fresh_build_dir DIR PREFIX: a build folder configured against another Kokkos (its cached Kokkos_ROOT) is
# configured afresh, as `cmake --fresh` would: find_package keeps the Kokkos_DIR it found first, so the Kokkos the
# bootstrap just chose (a new default, another arch, --kokkos 3.4) would otherwise be ignored.
kstudy_fresh_build_dir() {
  local dir=$1 prefix=$2 cached
  cached=$(sed -n 's/^Kokkos_ROOT:[A-Z]*=//p' "$dir/CMakeCache.txt" 2>/dev/null || true)
  if [[ -n $cached && $cached != "$prefix" ]]; then
    echo "kstudy: $dir was configured against the Kokkos in $cached; configuring it afresh against $prefix"
    rm -rf "$dir/CMakeCache.txt" "$dir/CMakeFiles"
  fi
}
