#!/usr/bin/env bash
# The cuda flavour is built for the GPU present: scripts/lib/gpu_arch.sh, scripts/bootstrap.sh and
# scripts/quickstart.sh against a fake nvidia-smi (KSTUDY_NVIDIA_SMI).   tests/check_gpu_arch.sh SOURCE_DIR
# Nothing is installed, downloaded or built: apt-get, sudo, dpkg-query, cmake and nvcc are fakes on PATH that log
# their calls, the Kokkos cache is a temporary folder, and quickstart.sh runs from a copy of the scripts it needs.
set -uo pipefail
src=$(cd "${1:?usage: check_gpu_arch.sh SOURCE_DIR}" && pwd)
work=$(mktemp -d) && [[ -d $work ]] || { echo "FAIL: no temporary folder"; exit 1; }
trap 'rm -rf "$work"' EXIT
failures=0
passed=0
ok() { echo "ok: $1"; passed=$((passed + 1)); }
fail() { echo "FAIL: $1"; failures=$((failures + 1)); }

# --- fakes: nvidia-smi answers from $work/gpus ("compute_cap|name" a line; none: "No devices were found")
mkdir -p "$work/bin"
# POSIX sh, not bash: the fakes run a few hundred times (dpkg-query once a package), and sh starts faster.
cat > "$work/bin/nvidia-smi" <<'FAKE_NVIDIA_SMI'
#!/bin/sh
if [ ! -s "$FAKE_GPUS" ]; then echo "No devices were found"; exit 6; fi
case "$*" in
  "--query-gpu=compute_cap --format=csv,noheader") cut -d'|' -f1 "$FAKE_GPUS" ;;
  "--query-gpu=name --format=csv,noheader") cut -d'|' -f2 "$FAKE_GPUS" ;;
  "-L") awk -F'|' '{ printf "GPU %d: %s (UUID: GPU-fake-%d)\n", NR - 1, $2, NR - 1 }' "$FAKE_GPUS" ;;
  *) echo "fake nvidia-smi: unexpected arguments: $*" >&2; exit 2 ;;
esac
FAKE_NVIDIA_SMI
# curl: no network here ("could not resolve host"); FAKE_CURL_BODY names a file it "downloads" instead.
cat > "$work/bin/curl" <<'FAKE_CURL'
#!/bin/sh
echo "curl $*" >> "$FAKE_CALLS"
if [ -z "$FAKE_CURL_BODY" ]; then exit 6; fi
while [ $# -gt 0 ]; do if [ "$1" = -o ]; then cp "$FAKE_CURL_BODY" "$2"; exit 0; fi; shift; done
exit 2
FAKE_CURL
for tool in apt-get sudo cmake nvcc; do
  printf '#!/bin/sh\necho "%s $*" >> "$FAKE_CALLS"\n' "$tool" > "$work/bin/$tool"
done
echo 'if [ "$1" = --build ]; then exit 3; fi' >> "$work/bin/cmake"  # quickstart stops after its configure
# Every package installed, so that quickstart's bootstrap goes on to its Kokkos step.
printf '#!/bin/sh\necho "dpkg-query $*" >> "$FAKE_CALLS"\nprintf "install ok installed"\n' > "$work/bin/dpkg-query"
chmod +x "$work/bin/"*
export PATH=$work/bin:$PATH FAKE_GPUS=$work/gpus FAKE_CALLS=$work/calls KSTUDY_NVIDIA_SMI=$work/bin/nvidia-smi
export KSTUDY_CACHE=$work/cache KSTUDY_TRILINOS_TARBALL=$work/no-such-trilinos.tar.gz FAKE_CURL_BODY=''
# No third-party folder: current Kokkos would be downloaded (by the fake curl above).
export KSTUDY_THIRD_PARTY=$work/no-third-party
unset KSTUDY_KOKKOS_ROOT KSTUDY_KOKKOS_TARBALL KSTUDY_KERNELS_TARBALL KSTUDY_KOKKOS_SRC KSTUDY_CUDA_ARCH Kokkos_ROOT
unset KSTUDY_KOKKOS KSTUDY_KOKKOS_DOWNLOAD

gpus() { if [[ $# -gt 0 ]]; then printf '%s\n' "$@"; fi > "$work/gpus"; }  # gpus "7.5|Tesla T4" ...; none: no GPU
run() {  # run COMMAND...: exit status in rc, stdout in out, stderr in err; the fakes' calls in calls
  rm -f "$work/calls"; touch "$work/calls"
  "$@" > "$work/out" 2> "$work/err"
  rc=$?
  out=$(cat "$work/out"); err=$(cat "$work/err"); calls=$(cat "$work/calls")
}
has() { [[ $1 == *"$2"* ]]; }
lines() { printf '%s' "$1" | grep -c ''; }
detect=$src/scripts/lib/gpu_arch.sh
bootstrap=$src/scripts/bootstrap.sh

# --- the helper: GPU 0's compute capability without the dot
gpus "7.5|Tesla T4"; run bash "$detect"
[[ $rc -eq 0 && $out == 75 && -z $err ]] && ok "7.5 -> 75" || fail "7.5: exit $rc, out '$out', err '$err'"
gpus "12.0|NVIDIA GeForce RTX 5090"; run bash "$detect"
[[ $rc -eq 0 && $out == 120 && -z $err ]] && ok "12.0 -> 120" || fail "12.0: exit $rc, out '$out', err '$err'"
gpus "7.5|Tesla T4" "8.6|NVIDIA A10"; run bash "$detect"
[[ $rc -eq 0 && $out == 75 ]] && has "$err" "differ" && has "$err" "7.5, 8.6" && has "$err" "sm_75" &&
  ok "two different GPUs -> the first, with a note on stderr" || fail "two GPUs: exit $rc, out '$out', err '$err'"
gpus "8.0|NVIDIA A100" "8.0|NVIDIA A100"; run bash "$detect"
[[ $rc -eq 0 && $out == 80 && -z $err ]] && ok "two alike GPUs -> no note" || fail "two A100s: exit $rc, err '$err'"
gpus; run bash "$detect"
[[ $rc -ne 0 && -z $out ]] && has "$err" "No devices were found" && ok "no GPU -> an error that says why" ||
  fail "no GPU: exit $rc, out '$out', err '$err'"
gpus "[N/A]|Tesla T4"; run bash "$detect"
[[ $rc -ne 0 && -z $out ]] && has "$err" "[N/A]" && ok "a compute capability that is no number -> an error" ||
  fail "[N/A]: exit $rc, out '$out', err '$err'"
gpus "7.5|Tesla T4"; run env KSTUDY_NVIDIA_SMI="$work/no-such-nvidia-smi" bash "$detect"
[[ $rc -ne 0 && -z $out ]] && has "$err" "KSTUDY_NVIDIA_SMI" && ok "a KSTUDY_NVIDIA_SMI that is not there -> an error" ||
  fail "missing KSTUDY_NVIDIA_SMI: exit $rc, out '$out', err '$err'"

# --- bootstrap: the arch is settled, or refused in one line, before anything is installed or downloaded
refused_cleanly() {  # DESCRIPTION EXPECTED...: a non-zero exit, one line on stderr holding each EXPECTED, no calls
  local what=$1 e; shift
  if [[ $rc -eq 0 || $(lines "$err") -ne 1 || -n $calls || -e $KSTUDY_CACHE ]]; then
    fail "$what: exit $rc, $(lines "$err") stderr lines, calls '$calls', cache $(ls -A "$KSTUDY_CACHE" 2>/dev/null): $err"
    return
  fi
  for e in "$@"; do has "$err" "$e" || { fail "$what: '$e' not in: $err"; return; }; done
  ok "$what"
}
gpus "12.0|NVIDIA GeForce RTX 5090"
run bash "$bootstrap" --flavour cuda --no-packages --kokkos 3.4
refused_cleanly "sm_120 with --kokkos 3.4 -> one line naming both Kokkos versions" \
  "bootstrap: error: this GPU is sm_120 (compute capability 12.0)" "Kokkos 3.4.01 knows sm_75, 80, 86 and 90" \
  "Kokkos 4.6.01 (the default, without --kokkos 3.4 or KSTUDY_KOKKOS=3.4) knows it"
run env KSTUDY_KOKKOS=3.4 bash "$bootstrap" --flavour cuda
refused_cleanly "the same from KSTUDY_KOKKOS, without --no-packages: refused before any package is looked at" "sm_120"
run bash "$bootstrap" --flavour cuda --no-packages --arch 89 --kokkos 3.4
refused_cleanly "--arch overrides the GPU's" "--arch 89 asks for sm_89" "Kokkos 3.4.01 knows"
run bash "$bootstrap" --flavour cuda --no-packages --arch 70
refused_cleanly "an arch kstudy does not support -> the supported ones" "sm_75, 80, 86, 89, 90, 100 and 120"
run bash "$bootstrap" --flavour cuda --no-packages --kokkos 5
refused_cleanly "--kokkos 5 -> the two it takes" "--kokkos must be 4.6 or 3.4, not '5'"
gpus
run bash "$bootstrap" --flavour cuda --no-packages
refused_cleanly "no GPU and no --arch -> one line asking for --arch" "pass --arch" "No devices were found"

# Current Kokkos by default: no third-party folder and no network -> the download is tried, then Kokkos 3.4.01.
gpus "7.5|Tesla T4" "8.6|NVIDIA A10"
run bash "$bootstrap" --flavour cuda --no-packages
[[ $rc -ne 0 ]] && has "$err" "Kokkos_ARCH_TURING75" && has "$err" "differ" && has "$err" "no-such-trilinos" &&
  has "$calls" "curl -fsSL" && has "$calls" "kokkos-4.6.01.tar.gz" &&
  has "$err" "no Kokkos 4.6.01 sources (no $KSTUDY_THIRD_PARTY, and https://github.com/kokkos/kokkos/releases" &&
  has "$err" "building Kokkos 3.4.01 instead" &&
  ok "sm_75, no 4.6 sources, no network: the download tried, then 3.4.01 with TURING75 (stopped at its source)" ||
  fail "sm_75 fallback: exit $rc, calls '$calls': $err"
rm -rf "$KSTUDY_CACHE"
gpus "12.0|NVIDIA GeForce RTX 5090"
run bash "$bootstrap" --flavour cuda --no-packages
[[ $rc -ne 0 && $(grep -c 'error' <<< "$err") -eq 1 ]] && has "$calls" "curl" &&
  has "$err" "this GPU is sm_120 (compute capability 12.0); Kokkos 3.4.01 knows sm_75, 80, 86 and 90;" &&
  has "$err" "Kokkos 4.6.01 knows it, and its sources are not here (no $KSTUDY_THIRD_PARTY, and" &&
  has "$err" "give them with --kokkos-tarball kokkos-4.6.01.tar.xz --kernels-tarball kokkos-kernels-4.6.02.tar.xz" &&
  ok "sm_120, no 4.6 sources, no network: one error line saying why 4.6 is not built" ||
  fail "sm_120 fallback: exit $rc, calls '$calls': $err"
rm -rf "$KSTUDY_CACHE"
gpus "9.0|NVIDIA H100 80GB HBM3"
run env KSTUDY_KOKKOS_DOWNLOAD=0 bash "$bootstrap" --flavour cuda --no-packages
[[ $rc -ne 0 ]] && ! has "$calls" "curl" && has "$err" "(downloads are off: KSTUDY_KOKKOS_DOWNLOAD=0)" &&
  has "$err" "Kokkos_ARCH_HOPPER90" && ok "KSTUDY_KOKKOS_DOWNLOAD=0: nothing downloaded, 3.4.01" ||
  fail "downloads off: exit $rc, calls '$calls': $err"
rm -rf "$KSTUDY_CACHE"
echo "not a release" > "$work/garbage.tar.gz"
run env FAKE_CURL_BODY="$work/garbage.tar.gz" bash "$bootstrap" --flavour cuda --no-packages
[[ $rc -ne 0 ]] && has "$err" "https://github.com/kokkos/kokkos/releases/download/4.6.01/kokkos-4.6.01.tar.gz does not match its pinned sha256 b9d70e4653b8" &&
  [[ -z $(find "$KSTUDY_CACHE" -name 'kokkos-4.6.01.tar.gz*') ]] &&
  ok "a download that does not match its pinned SHA-256 is refused and removed" || fail "bad download: exit $rc: $err"
rm -rf "$KSTUDY_CACHE"
# A cached build of current Kokkos needs no sources: no download, its prefix printed.
hash=$(cd "$src/cmake/patches/kokkos-4.6.01" && find . -type f -name '*.patch' | LC_ALL=C sort | xargs -r cat | sha256sum | cut -c1-12)
cached=$KSTUDY_CACHE/install/kokkos-4.6.01-cuda-sm90-$hash
mkdir -p "$cached/lib/cmake/Kokkos" && touch "$cached/lib/cmake/Kokkos/KokkosConfig.cmake"
run bash "$bootstrap" --flavour cuda --no-packages --print-prefix
[[ $rc -eq 0 && $out == "$cached" ]] && ! has "$calls" "curl" && has "$err" "Kokkos cache hit" &&
  ok "a cached Kokkos 4.6.01 build is used without sources or download" ||
  fail "cached 4.6: exit $rc, out '$out', calls '$calls': $err"
rm -rf "$KSTUDY_CACHE"
# The third-party folder (as CI and the developers' machines have it) comes first, checked against its SHA256SUMS.
mkdir -p "$work/third-party"
echo kokkos > "$work/third-party/kokkos-4.6.01.tar.xz"; echo kernels > "$work/third-party/kokkos-kernels-4.6.02.tar.xz"
printf '%s  kokkos-4.6.01.tar.xz\n%s  kokkos-kernels-4.6.02.tar.xz\n' "$(printf '0%.0s' {1..64})" \
  "$(printf '0%.0s' {1..64})" > "$work/third-party/SHA256SUMS"
run env KSTUDY_THIRD_PARTY="$work/third-party" bash "$bootstrap" --flavour cpu --no-packages
[[ $rc -ne 0 ]] && ! has "$calls" "curl" && has "$err" "third-party/kokkos-4.6.01.tar.xz does not match its sha256" &&
  ok "the third-party tarballs are taken first, and checked" || fail "third party: exit $rc, calls '$calls': $err"
rm -rf "$KSTUDY_CACHE"

# A Kokkos release tarball's own list of arch options decides: BLACKWELL120 is in 4.6's, not in an older one's.
fake_release() {  # fake_release VERSION OPTION...: a kokkos-VERSION.tar.gz holding only cmake/kokkos_arch.cmake
  local version=$1 o; shift
  mkdir -p "$work/release-$version/kokkos/cmake"
  for o in "$@"; do
    echo "kokkos_arch_option($o GPU \"NVIDIA generation\" \"KOKKOS_SHOW_CUDA_ARCHS\")"
  done > "$work/release-$version/kokkos/cmake/kokkos_arch.cmake"
  tar -czf "$work/kokkos-$version.tar.gz" -C "$work/release-$version" kokkos
  touch "$work/kokkos-kernels-$version.tar.gz"
}
fake_release 4.6.01 VOLTA70 TURING75 AMPERE80 AMPERE86 ADA89 HOPPER90 BLACKWELL100 BLACKWELL120
fake_release 4.2.00 VOLTA70 TURING75 AMPERE80 AMPERE86 ADA89 HOPPER90
gpus "12.0|NVIDIA GeForce RTX 5090"
run bash "$bootstrap" --flavour cuda --no-packages --kokkos-tarball "$work/kokkos-4.6.01.tar.gz" \
  --kernels-tarball "$work/kokkos-kernels-4.6.01.tar.gz"
[[ $rc -ne 0 ]] && has "$err" "Kokkos 4.6.01 with Kokkos_ARCH_BLACKWELL120" && has "$err" "no SHA256SUMS" &&
  ok "sm_120 with Kokkos 4.6 -> BLACKWELL120 (stopped at the unverified tarball)" || fail "sm_120, 4.6: exit $rc: $err"
rm -rf "$KSTUDY_CACHE"
run bash "$bootstrap" --flavour cuda --no-packages --kokkos-tarball "$work/kokkos-4.2.00.tar.gz" \
  --kernels-tarball "$work/kokkos-kernels-4.2.00.tar.gz"
refused_cleanly "sm_120 with a Kokkos that lacks BLACKWELL120 -> refused" "Kokkos 4.2.00 knows sm_75, 80, 86, 89 and 90"

# --- quickstart, from a copy of the scripts it runs (it works in its own clone: build/, results/)
copy=$work/clone
mkdir -p "$copy/scripts" "$copy/cmake"
cp -r "$src/scripts/quickstart.sh" "$src/scripts/bootstrap.sh" "$src/scripts/lib" "$copy/scripts/"
cp -r "$src/cmake/patches" "$copy/cmake/"
quickstart=$copy/scripts/quickstart.sh
# A T4, and a build folder left configured for sm_90 (its Kokkos_ROOT holds that arch's Kokkos).
gpus "7.5|Tesla T4"
mkdir -p "$copy/build/cuda/CMakeFiles"
printf 'KSTUDY_CUDA_ARCH:STRING=90\n' > "$copy/build/cuda/CMakeCache.txt"
run env KSTUDY_KOKKOS_ROOT="$work/kokkos" bash "$quickstart"
has "$out" "kstudy: using the cuda flavour for sm_75 (Tesla T4)" && has "$calls" "cmake --preset cuda -DKSTUDY_CUDA_ARCH=75" &&
  ok "quickstart on a T4: the cuda flavour, configured for sm_75" || fail "quickstart, T4: out '$out', calls '$calls'"
has "$out" "configured for sm_90; configuring it afresh for sm_75" && [[ ! -e $copy/build/cuda/CMakeCache.txt ]] &&
  ok "a build folder configured for sm_90 is configured afresh" || fail "stale build/cuda: out '$out'"
gpus "12.0|NVIDIA GeForce RTX 5090"
run env KSTUDY_KOKKOS=3.4 bash "$quickstart"
[[ $rc -ne 0 ]] && has "$out" "for sm_120 (NVIDIA GeForce RTX 5090)" && has "$err" "Kokkos 3.4.01 knows" &&
  ! has "$calls" "cmake" && ! has "$calls" "dpkg-query" &&
  ok "quickstart on sm_120 with KSTUDY_KOKKOS=3.4 stops at the bootstrap's refusal" ||
  fail "quickstart, sm_120: exit $rc, out '$out', calls '$calls', err '$err'"
gpus "7.5|Tesla T4"
run env KSTUDY_CUDA_ARCH=120 bash "$quickstart"
[[ $rc -ne 0 ]] && has "$out" "for sm_120 (KSTUDY_CUDA_ARCH; GPU 0 is Tesla T4)" && has "$err" "--arch 120 asks for sm_120" &&
  ok "KSTUDY_CUDA_ARCH overrides the GPU's, through to the bootstrap" || fail "KSTUDY_CUDA_ARCH: out '$out', err '$err'"
gpus
run env KSTUDY_KOKKOS_ROOT="$work/kokkos" bash "$quickstart"
has "$out" "kstudy: using the cpu flavour" && has "$calls" "cmake --preset cpu" && ! has "$calls" "KSTUDY_CUDA_ARCH" &&
  ok "no GPU: the cpu flavour" || fail "quickstart, no GPU: out '$out', calls '$calls'"
# A build folder configured against another Kokkos (an older default, --kokkos 3.4) is configured afresh against
# the one the bootstrap chose: find_package would keep the old one.
mkdir -p "$copy/build/cpu/CMakeFiles"
printf 'Kokkos_ROOT:PATH=%s\n' "$work/old-kokkos" > "$copy/build/cpu/CMakeCache.txt"
run env KSTUDY_KOKKOS_ROOT="$work/kokkos" bash "$quickstart"
has "$out" "configured against the Kokkos in $work/old-kokkos; configuring it afresh against $work/kokkos" &&
  [[ ! -e $copy/build/cpu/CMakeCache.txt ]] && has "$calls" "-DKokkos_ROOT=$work/kokkos" &&
  ok "a build folder configured against another Kokkos is configured afresh against the bootstrap's" ||
  fail "another Kokkos: out '$out', calls '$calls'"

echo "$passed passed, $failures failed"
[[ $failures -eq 0 ]]
