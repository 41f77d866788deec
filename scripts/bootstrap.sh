#!/usr/bin/env bash
# kstudy dependency bootstrap. Idempotent: every step checks before it acts.
#
#   scripts/bootstrap.sh [--flavour cpu|cuda] [--arch 75|80|86|89|90|100|120] [--cxx g++|clang++] [--no-packages]
#                        [--print-prefix] [--with-slurm] [--packages-only] [--kokkos 4.6|3.4]
#                        [--kokkos-tarball FILE --kernels-tarball FILE]
#
# 1. Installs the Debian packages kstudy needs when they are missing (as root or through sudo), the style
#    tools of scripts/style.sh among them; --with-slurm adds slurm-wlm and munge (the `slurm` test),
#    --packages-only stops after this step.
# 2. Unless a Kokkos is already given (Kokkos_ROOT / KSTUDY_KOKKOS_ROOT), builds Kokkos and Kokkos Kernels into a
#    cache prefix outside the clone keyed by (version, flavour, arch, patch hash), with the patches in
#    cmake/patches/kokkos-<version>/. Use the printed prefix as -DKokkos_ROOT. Which Kokkos:
#    - by default current Kokkos, 4.6.01 + Kernels 4.6.02, its sources taken from the first of: the release
#      tarballs in KSTUDY_THIRD_PARTY (default ../shared/third_party beside the clone; checked against the
#      SHA256SUMS there), an earlier download in the cache, a download of the upstream release (curl or wget,
#      where the machine has the network; checked against the SHA-256 pinned below). With none of them it says so
#      in one line and builds Kokkos 3.4.01, as --kokkos 3.4 does;
#    - --kokkos 3.4: Kokkos 3.4.01 + Kernels 3.4.01 from Debian's `trilinos` 13.2.0 source package, the
#      comparison build (2021's Kokkos, the one Debian ships);
#    - --kokkos-tarball and --kernels-tarball: that Kokkos release (kokkos-<version>.tar.{xz,gz,bz2} and
#      kokkos-kernels-<version>.tar.*, one top folder each), verified against the SHA256SUMS file beside each.
#    --cxx clang++ builds the cpu flavour with clang (a prefix of its own: kstudy must then be compiled by
#    clang too, so that one OpenMP runtime, LLVM's, is loaded); CI's sanitizer build uses it.
# The cuda flavour is built for the compute capability of the GPU present (GPU 0, from nvidia-smi: 7.5 -> 75;
# scripts/lib/gpu_arch.sh); --arch names another, and is needed where no GPU is. kstudy supports sm_75, 80, 86,
# 89, 90, 100 and 120. Kokkos 4.6 builds all seven (TURING75, AMPERE80, AMPERE86, ADA89, HOPPER90, BLACKWELL100,
# BLACKWELL120); Kokkos 3.4.01 (patched: HOPPER90 is the patch's) sm_75, 80, 86 and 90. The arch is checked
# before anything is installed or downloaded: one the chosen Kokkos does not know is refused in one line that
# names a Kokkos that does.
#
# Environment:
#   KSTUDY_CACHE             cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/kstudy)
#   KSTUDY_KOKKOS            as --kokkos (4.6 or 3.4)
#   KSTUDY_THIRD_PARTY       the folder holding kokkos-4.6.01.tar.xz, kokkos-kernels-4.6.02.tar.xz and SHA256SUMS
#   KSTUDY_KOKKOS_DOWNLOAD   0: never download (a machine whose network only times out)
#   KSTUDY_TRILINOS_TARBALL  an already downloaded trilinos_13.2.0.orig.tar.gz (offline machines; --kokkos 3.4)
#   KSTUDY_KOKKOS_SRC        an extracted tree holding kokkos/ and kokkos-kernels/ (offline machines; --kokkos 3.4)
#   KSTUDY_JOBS              build parallelism (default: nproc)
#   KSTUDY_KOKKOS_TARBALL, KSTUDY_KERNELS_TARBALL   as --kokkos-tarball, --kernels-tarball
#   KSTUDY_NVIDIA_SMI        the nvidia-smi that reads the GPU's compute capability (default: the one on PATH)
set -euo pipefail

kokkos_version=''  # settled by choose_kokkos below
# Current Kokkos, the default: the release and its upstream archives' SHA-256 (the GitHub release assets, as
# Spack pins them); the copies in ../shared/third_party are repacked and checked against the SHA256SUMS beside them.
readonly current_kokkos=4.6.01 current_kernels=4.6.02
readonly current_kokkos_url=https://github.com/kokkos/kokkos/releases/download/4.6.01/kokkos-4.6.01.tar.gz
readonly current_kokkos_sha256=b9d70e4653b87a06dbb48d63291bf248058c7c7db4bd91979676ad5609bb1a3a
readonly current_kernels_url=https://github.com/kokkos/kokkos-kernels/releases/download/4.6.02/kokkos-kernels-4.6.02.tar.gz
readonly current_kernels_sha256=a953f445660ed5aaab10e18fc4a90c4c178291e9d9d97d20abd4e6027f1193ec
readonly debian_kokkos=3.4.01  # Debian's trilinos 13.2.0 source
readonly trilinos_version=13.2.0
readonly trilinos_debian_version=13.2.0-4
readonly trilinos_tarball=trilinos_${trilinos_version}.orig.tar.gz
readonly trilinos_sha256=0ddb47784ba7b8a6b9a07a4822b33be508feb4ccd54301b2a5d10c9e54524b90
readonly trilinos_top=Trilinos-trilinos-release-13-2-0

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache_root=${KSTUDY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kstudy}
jobs=${KSTUDY_JOBS:-$(nproc)}
flavour=cpu
cuda_arch=''  # --arch; else the GPU's (cuda flavour)
host_cxx=g++
install_packages=1
print_prefix=0
with_slurm=0
packages_only=0
kokkos_tarball=${KSTUDY_KOKKOS_TARBALL:-}
kernels_tarball=${KSTUDY_KERNELS_TARBALL:-}
kokkos_choice=${KSTUDY_KOKKOS:-4.6}
third_party=${KSTUDY_THIRD_PARTY:-$repo_root/../shared/third_party}
download_current=0  # 1: current Kokkos is to be downloaded (no local sources)
fallback_reason=''  # why current Kokkos could not be had, where the bootstrap fell back to 3.4.01

die() { echo "bootstrap: error: $*" >&2; exit 1; }
log() { echo "bootstrap: $*" >&2; }
# shellcheck source=scripts/lib/gpu_arch.sh
source "$repo_root/scripts/lib/gpu_arch.sh"

while [[ $# -gt 0 ]]; do
  case $1 in
    --flavour) flavour=${2:?--flavour needs cpu or cuda}; shift 2 ;;
    --arch) cuda_arch=${2:?--arch needs a number such as 90}; shift 2 ;;
    --cxx) host_cxx=${2:?--cxx needs g++ or clang++}; shift 2 ;;
    --no-packages) install_packages=0; shift ;;
    --print-prefix) print_prefix=1; shift ;;
    --with-slurm) with_slurm=1; shift ;;
    --packages-only) packages_only=1; shift ;;
    --kokkos) kokkos_choice=${2:?--kokkos needs 4.6 or 3.4}; shift 2 ;;
    --kokkos-tarball) kokkos_tarball=${2:?--kokkos-tarball needs a file}; shift 2 ;;
    --kernels-tarball) kernels_tarball=${2:?--kernels-tarball needs a file}; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/{/^set -euo/d;p}' "$0"; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
[[ $flavour == cpu || $flavour == cuda ]] || die "--flavour must be cpu or cuda, not '$flavour'"
[[ -z $cuda_arch || $cuda_arch =~ ^[0-9]+$ ]] || die "--arch must be a number such as 90, not '$cuda_arch'"
[[ $host_cxx == g++ || $host_cxx == clang++ ]] || die "--cxx must be g++ or clang++, not '$host_cxx'"
[[ $host_cxx == g++ || $flavour == cpu ]] || die "--cxx clang++ is for the cpu flavour (the cuda flavour compiles with nvcc_wrapper)"
[[ $kokkos_choice == 4.6 || $kokkos_choice == 3.4 ]] || die "--kokkos must be 4.6 or 3.4, not '$kokkos_choice'"

# Settles kokkos_version, and the release tarballs where it is not Debian's 3.4.01: those given, else (current
# Kokkos) those in the third-party folder, else an earlier download, else a download to come (download_current=1).
downloads=$cache_root/src/downloads
choose_kokkos() {
  if [[ -n $kokkos_tarball || -n $kernels_tarball ]]; then
    [[ -n $kokkos_tarball && -n $kernels_tarball ]] || die "--kokkos-tarball and --kernels-tarball go together"
  elif [[ $kokkos_choice == 3.4 ]]; then
    kokkos_version=$debian_kokkos; return
  elif [[ -f $third_party/kokkos-$current_kokkos.tar.xz && -f $third_party/kokkos-kernels-$current_kernels.tar.xz ]]; then
    kokkos_tarball=$third_party/kokkos-$current_kokkos.tar.xz
    kernels_tarball=$third_party/kokkos-kernels-$current_kernels.tar.xz
  else
    kokkos_tarball=$downloads/$(basename "$current_kokkos_url")
    kernels_tarball=$downloads/$(basename "$current_kernels_url")
    [[ -f $kokkos_tarball && -f $kernels_tarball ]] || download_current=1
  fi
  kokkos_version=$(basename "$kokkos_tarball" | sed -nE 's/^kokkos-([0-9]+\.[0-9]+\.[0-9]+)\.tar\.(xz|gz|bz2)$/\1/p')
  [[ -n $kokkos_version ]] ||
    die "--kokkos-tarball must be named kokkos-<major>.<minor>.<patch>.tar.{xz,gz,bz2}, not '$(basename "$kokkos_tarball")'"
  [[ $(basename "$kernels_tarball") =~ ^kokkos-kernels-[0-9]+\.[0-9]+\.[0-9]+\.tar\.(xz|gz|bz2)$ ]] ||
    die "--kernels-tarball must be named kokkos-kernels-<version>.tar.{xz,gz,bz2}, not '$(basename "$kernels_tarball")'"
}
choose_kokkos

# ---------------------------------------------------------------- CUDA arch
# Settled before any package is installed or source downloaded: a GPU the chosen Kokkos cannot build for is
# refused in a second, not after a 4-minute build.
readonly supported_archs=(75 80 86 89 90 100 120)
# Kokkos' name for each (the option is Kokkos_ARCH_<name>).
declare -rA kokkos_arch_names=([75]=TURING75 [80]=AMPERE80 [86]=AMPERE86 [89]=ADA89 [90]=HOPPER90
                               [100]=BLACKWELL100 [120]=BLACKWELL120)

# Sets known_arch_names to the NVIDIA arch options the Kokkos to build knows: those of its
# cmake/kokkos_arch.cmake (read from the release tarball; Debian's 3.4.01 source is fetched later, so its list is
# written here) and those its patches add (HOPPER90 for 3.4.01).
kokkos_known_arch_names() {
  local re='^\+?[[:space:]]*(KOKKOS_ARCH_OPTION|kokkos_arch_option)\([[:space:]]*([A-Z]+[0-9]+)[[:space:]]+GPU[[:space:]]+"NVIDIA'
  local lines=() line p
  if [[ $download_current -eq 1 ]]; then  # 4.6.01's, read from its tarball
    known_arch_names=(VOLTA70 VOLTA72 TURING75 AMPERE80 AMPERE86 ADA89 HOPPER90 BLACKWELL100 BLACKWELL120)
  elif [[ -n $kokkos_tarball ]]; then
    # The tarball's one top folder is kokkos/ (repacked) or kokkos-<version>/ (upstream).
    mapfile -t lines < <(tar -xOf "$kokkos_tarball" --wildcards --no-wildcards-match-slash '*/cmake/kokkos_arch.cmake' \
      2>/dev/null)
    known_arch_names=()
  else
    known_arch_names=(VOLTA70 VOLTA72 TURING75 AMPERE80 AMPERE86)
  fi
  for p in "$(patch_dir)"/*.patch; do
    [[ -f $p ]] || continue
    while IFS= read -r line; do [[ $line == +* ]] && lines+=("$line"); done < "$p"
  done
  for line in "${lines[@]}"; do
    [[ $line =~ $re ]] && known_arch_names+=("${BASH_REMATCH[2]}")
  done
  return 0
}

sm_list() {  # sm_list 75 80 90 -> "sm_75, 80 and 90"
  local out="sm_$1"
  shift
  while [[ $# -gt 1 ]]; do out+=", $1"; shift; done
  [[ $# -eq 1 ]] && out+=" and $1"
  echo "$out"
}

# What to do about an arch the chosen Kokkos does not know, for the refusal.
how_to_get_current() {
  local dir=$third_party k=kokkos-$current_kokkos.tar.xz kk=kokkos-kernels-$current_kernels.tar.xz
  if [[ -f $dir/$k && -f $dir/$kk ]]; then
    k=$(realpath --relative-to="$PWD" "$dir/$k")
    kk=$(realpath --relative-to="$PWD" "$dir/$kk")
  fi
  if [[ -n $fallback_reason ]]; then
    echo "Kokkos $current_kokkos knows it, and its sources are not here ($fallback_reason): give them with" \
      "--kokkos-tarball $k --kernels-tarball $kk"
  elif [[ $kokkos_version == "$debian_kokkos" ]]; then
    echo "Kokkos $current_kokkos (the default, without --kokkos 3.4 or KSTUDY_KOKKOS=3.4) knows it"
  else
    echo "build Kokkos 4.6 with --kokkos-tarball $k --kernels-tarball $kk" \
      "(or set KSTUDY_KOKKOS_TARBALL and KSTUDY_KERNELS_TARBALL to them)"
  fi
}

# Sets cuda_arch (the GPU's where --arch is not given) and kokkos_arch_option (Kokkos_ARCH_<it>), or dies.
what=''  # where the arch came from, for the messages
resolve_cuda_arch() {
  local a name known_arch_names=()
  if [[ -n $what ]]; then :  # settled by an earlier call (the fallback to 3.4.01 checks the arch again)
  elif [[ -z $cuda_arch ]]; then
    kstudy_gpu_detect || die "--flavour cuda builds for the GPU present, and none can be read:" \
      "$kstudy_gpu_error; pass --arch, one of $(sm_list "${supported_archs[@]}" | sed 's/^sm_//; s/ and / or /')"
    cuda_arch=$kstudy_gpu_arch
    what="this GPU is sm_$cuda_arch (compute capability $kstudy_gpu_cc)"
  else
    what="--arch $cuda_arch asks for sm_$cuda_arch"
  fi
  name=${kokkos_arch_names[$cuda_arch]:-}
  [[ -n $name ]] || die "$what; kstudy's cuda flavour supports $(sm_list "${supported_archs[@]}")"
  [[ -z $kokkos_tarball || -f $kokkos_tarball || $download_current -eq 1 ]] || die "$kokkos_tarball does not exist"
  kokkos_known_arch_names
  if [[ ${#known_arch_names[@]} -eq 0 ]]; then
    log "warning: no NVIDIA arch options found in $kokkos_tarball's cmake/kokkos_arch.cmake; trying Kokkos_ARCH_$name"
  elif [[ " ${known_arch_names[*]} " != *" $name "* ]]; then
    local knows=() listed
    for a in "${supported_archs[@]}"; do
      [[ " ${known_arch_names[*]} " == *" ${kokkos_arch_names[$a]} "* ]] && knows+=("$a")
    done
    listed="none of kstudy's ($(sm_list "${supported_archs[@]}"))"
    [[ ${#knows[@]} -gt 0 ]] && listed=$(sm_list "${knows[@]}")
    die "$what; Kokkos $kokkos_version knows $listed; $(how_to_get_current)"
  fi
  kokkos_arch_option=$name
  [[ $what == this* ]] && log "$what: Kokkos $kokkos_version with Kokkos_ARCH_$name (--arch for another)"
  return 0
}

as_root() {
  if [[ $(id -u) -eq 0 ]]; then "$@"
  elif command -v sudo >/dev/null; then sudo "$@"
  else die "need root (or sudo) to run: $*"; fi
}

# ---------------------------------------------------------------- Debian packages
packages=(
  build-essential cmake ninja-build pkg-config patch xz-utils dpkg-dev ccache curl ca-certificates
  libhdf5-dev hdf5-tools libbenchmark-dev libgtest-dev libgmock-dev
  libcli11-dev nlohmann-json3-dev clang libclang-rt-dev libomp-dev
  python3 python3-h5py python3-pandas python3-matplotlib python3-numpy python3-scipy
  clang-format-14 flake8 codespell  # scripts/style.sh (CI's first stage); it checks clang-format's major version
)
# The real-Slurm test (tests/slurm/check_slurm.sh) runs slurmctld, slurmd and munged on localhost.
[[ $with_slurm -eq 1 ]] && packages+=(slurm-wlm munge)
readonly packages

ensure_packages() {
  local missing=()
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  [[ ${#missing[@]} -eq 0 ]] && return 0
  command -v apt-get >/dev/null || die "missing packages (${missing[*]}) and no apt-get: install them by hand"
  log "installing Debian packages: ${missing[*]}"
  as_root apt-get update -qq || die "apt-get update failed"
  if ! as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; then
    for p in "${missing[@]}"; do
      as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$p" >/dev/null \
        || echo "bootstrap: error: Debian package '$p' could not be installed" >&2
    done
    die "some packages could not be installed (see above)"
  fi
}

# ---------------------------------------------------------------- Kokkos sources
patch_dir() { echo "$repo_root/cmake/patches/kokkos-$kokkos_version"; }

patch_hash() {
  # Hash of this version's patches (contents in name order), so a changed patch gives a new cache key.
  local dir; dir=$(patch_dir)
  [[ -d $dir ]] || { echo unpatched; return; }
  (cd "$dir" && find . -type f -name '*.patch' | LC_ALL=C sort | xargs -r cat) | sha256sum | cut -c1-12
}

# Checks a release tarball against the SHA256SUMS file beside it, so only a known source is built.
verify_release_tarball() {
  local tarball=$1 dir name expected
  [[ -f $tarball ]] || die "$tarball does not exist"
  dir=$(cd "$(dirname "$tarball")" && pwd); name=$(basename "$tarball")
  [[ -f $dir/SHA256SUMS ]] || die "no SHA256SUMS beside $tarball (write one: sha256sum $name > SHA256SUMS)"
  expected=$(awk -v n="$name" '$2 == n || $2 == "*" n {print $1}' "$dir/SHA256SUMS")
  [[ -n $expected ]] || die "$dir/SHA256SUMS has no line for $name"
  echo "$expected  $dir/$name" | sha256sum -c --quiet - >/dev/null 2>&1 ||
    die "$tarball does not match its sha256 in $dir/SHA256SUMS ($expected)"
}

# Prints a folder holding pristine kokkos/ and kokkos-kernels/ trees from the two release tarballs.
release_sources() {
  local kernels_name; kernels_name=$(basename "$kernels_tarball"); kernels_name=${kernels_name%%.tar.*}
  local src=$cache_root/src/kokkos-$kokkos_version+$kernels_name
  if [[ -f $src/.complete ]]; then echo "$src"; return; fi
  verify_release_tarball "$kokkos_tarball"
  verify_release_tarball "$kernels_tarball"
  log "extracting $(basename "$kokkos_tarball") and $(basename "$kernels_tarball")"
  rm -rf "$src.part"; mkdir -p "$src.part/kokkos" "$src.part/kokkos-kernels"
  # One top folder each: kokkos/ and kokkos-kernels/ (repacked), kokkos-4.6.01/ and so on (upstream).
  tar -xf "$kokkos_tarball" -C "$src.part/kokkos" --strip-components=1
  tar -xf "$kernels_tarball" -C "$src.part/kokkos-kernels" --strip-components=1
  [[ -f $src.part/kokkos/CMakeLists.txt && -f $src.part/kokkos-kernels/CMakeLists.txt ]] ||
    die "$(basename "$kokkos_tarball") and $(basename "$kernels_tarball") must each unpack to one top folder holding CMakeLists.txt"
  touch "$src.part/.complete"
  rm -rf "$src"; mv "$src.part" "$src"
  echo "$src"
}

# Downloads current Kokkos' upstream release into the cache, checked against the pinned SHA-256 (written into a
# SHA256SUMS beside the files, which release_sources checks again). Where it cannot (downloads off, no curl or
# wget, no network) it sets fallback_reason and fails; a download that does not match its hash is refused.
download_current_kokkos() {
  local fetch url sha name pair
  if [[ ${KSTUDY_KOKKOS_DOWNLOAD:-1} == 0 ]]; then fallback_reason="downloads are off: KSTUDY_KOKKOS_DOWNLOAD=0"; return 1; fi
  if command -v curl >/dev/null; then fetch=(curl -fsSL --connect-timeout 15 --retry 2 -o)
  elif command -v wget >/dev/null; then fetch=(wget -q --timeout=15 --tries=2 -O)
  else fallback_reason="nothing to download them with: neither curl nor wget"; return 1; fi
  mkdir -p "$downloads"
  printf '%s  %s\n' "$current_kokkos_sha256" "$(basename "$current_kokkos_url")" \
    "$current_kernels_sha256" "$(basename "$current_kernels_url")" > "$downloads/SHA256SUMS"
  for pair in "$current_kokkos_url $current_kokkos_sha256" "$current_kernels_url $current_kernels_sha256"; do
    read -r url sha <<< "$pair"
    name=$(basename "$url")
    [[ -f $downloads/$name ]] && continue
    log "downloading $url"
    if ! "${fetch[@]}" "$downloads/$name.part" "$url" 2>/dev/null; then
      rm -f "$downloads/$name.part"
      fallback_reason="no $third_party, and $url could not be downloaded"
      return 1
    fi
    echo "$sha  $downloads/$name.part" | sha256sum -c --quiet - >/dev/null 2>&1 ||
      { rm -f "$downloads/$name.part"; die "$url does not match its pinned sha256 $sha: refused"; }
    mv "$downloads/$name.part" "$downloads/$name"
  done
}

# Fetch the trilinos orig tarball through apt-get source, using a private apt state whose deb-src entries
# are derived from the machine's own deb822 sources: the system configuration is never touched.
fetch_trilinos_tarball() {
  local dest=$1
  local state=$cache_root/apt-state
  rm -rf "$state"; mkdir -p "$state/sources.list.d" "$state/lists/partial" "$state/download"
  local found=0 f
  for f in /etc/apt/sources.list.d/*.sources; do
    [[ -f $f ]] || continue
    grep -qi 'debian' "$f" || continue
    sed -E 's/^Types:[[:space:]]*deb[[:space:]]*$/Types: deb deb-src/' "$f" > "$state/sources.list.d/$(basename "$f")"
    found=1
  done
  if [[ $found -eq 0 && -f /etc/apt/sources.list ]]; then
    grep -E '^deb[[:space:]]' /etc/apt/sources.list | sed -E 's/^deb /deb-src /' > "$state/sources.list.d/derived.list" || true
    [[ -s $state/sources.list.d/derived.list ]] && found=1
  fi
  [[ $found -eq 1 ]] || die "no Debian apt sources found to derive deb-src from; set KSTUDY_TRILINOS_TARBALL to a downloaded $trilinos_tarball"
  local opts=(-o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$state/sources.list.d"
              -o "Dir::State::Lists=$state/lists" -o Debug::NoLocking=1)
  log "fetching trilinos $trilinos_debian_version source (private apt state in $state)"
  apt-get "${opts[@]}" update -qq >/dev/null 2>&1 || die "apt-get update with deb-src entries failed"
  (cd "$state/download" && apt-get "${opts[@]}" source --download-only "trilinos=$trilinos_debian_version" >/dev/null 2>&1) \
    || die "apt-get source trilinos=$trilinos_debian_version failed; set KSTUDY_TRILINOS_TARBALL to a downloaded $trilinos_tarball"
  mv "$state/download/$trilinos_tarball" "$dest"
  rm -rf "$state"
}

# Prints the folder holding pristine kokkos/ and kokkos-kernels/ trees.
kokkos_sources() {
  if [[ -n $kokkos_tarball ]]; then release_sources; return; fi
  if [[ -n ${KSTUDY_KOKKOS_SRC:-} ]]; then
    [[ -f $KSTUDY_KOKKOS_SRC/kokkos/CMakeLists.txt && -f $KSTUDY_KOKKOS_SRC/kokkos-kernels/CMakeLists.txt ]] \
      || die "KSTUDY_KOKKOS_SRC=$KSTUDY_KOKKOS_SRC must hold kokkos/ and kokkos-kernels/"
    echo "$KSTUDY_KOKKOS_SRC"; return
  fi
  local src=$cache_root/src/kokkos-$kokkos_version
  if [[ -f $src/.complete ]]; then echo "$src"; return; fi
  mkdir -p "$cache_root/src"
  local tarball=${KSTUDY_TRILINOS_TARBALL:-$cache_root/src/$trilinos_tarball}
  if [[ ! -f $tarball ]]; then
    [[ -z ${KSTUDY_TRILINOS_TARBALL:-} ]] || die "KSTUDY_TRILINOS_TARBALL=$tarball does not exist"
    fetch_trilinos_tarball "$tarball.part"
    mv "$tarball.part" "$tarball"
  fi
  echo "$trilinos_sha256  $tarball" | sha256sum -c --quiet - >/dev/null 2>&1 \
    || die "$tarball does not have the expected sha256 $trilinos_sha256"
  log "extracting kokkos and kokkos-kernels from $(basename "$tarball")"
  rm -rf "$src.part"; mkdir -p "$src.part"
  tar -xzf "$tarball" -C "$src.part" --strip-components=2 \
    "$trilinos_top/packages/kokkos" "$trilinos_top/packages/kokkos-kernels"
  touch "$src.part/.complete"
  rm -rf "$src"; mv "$src.part" "$src"
  echo "$src"
}

# ---------------------------------------------------------------- Kokkos build
build_kokkos() {
  local key=$1 prefix=$2
  local pristine work
  pristine=$(kokkos_sources)
  work=$cache_root/build/$key
  rm -rf "$work"; mkdir -p "$work"
  cp -a "$pristine/kokkos" "$pristine/kokkos-kernels" "$work/"
  local p
  for p in "$(patch_dir)"/*.patch; do
    [[ -f $p ]] || continue
    log "patch $(basename "$p")"
    patch -d "$work/kokkos" -p1 --quiet --forward < "$p" || die "patch $(basename "$p") did not apply"
  done

  local common=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$prefix.part"
                -DCMAKE_CXX_STANDARD=17 -DCMAKE_POSITION_INDEPENDENT_CODE=ON)
  local kokkos_opts=(-DKokkos_ENABLE_SERIAL=ON -DKokkos_ENABLE_OPENMP=ON -DKokkos_ENABLE_TESTS=OFF
                     -DKokkos_ENABLE_EXAMPLES=OFF)
  local kk_opts=(-DKokkosKernels_ENABLE_TPL_CUSPARSE=OFF -DKokkosKernels_ENABLE_TESTS=OFF
                 -DKokkosKernels_ENABLE_EXAMPLES=OFF -DKokkosKernels_ENABLE_TPL_BLAS=OFF
                 -DKokkosKernels_INST_DOUBLE=OFF -DKokkosKernels_INST_FLOAT=OFF
                 -DKokkosKernels_INST_COMPLEX_DOUBLE=OFF -DKokkosKernels_INST_COMPLEX_FLOAT=OFF
                 -DKokkosKernels_INST_ORDINAL_INT=OFF -DKokkosKernels_INST_ORDINAL_INT64_T=OFF
                 -DKokkosKernels_INST_OFFSET_INT=OFF -DKokkosKernels_INST_OFFSET_SIZE_T=OFF
                 -DKokkosKernels_INST_LAYOUTLEFT=OFF -DKokkosKernels_INST_LAYOUTRIGHT=OFF
                 -DKokkosKernels_INST_EXECSPACE_SERIAL=OFF -DKokkosKernels_INST_EXECSPACE_OPENMP=OFF
                 -DKokkosKernels_INST_EXECSPACE_CUDA=OFF -DKokkosKernels_INST_MEMSPACE_CUDASPACE=OFF
                 -DKokkosKernels_INST_MEMSPACE_CUDAUVMSPACE=OFF -DKokkosKernels_INST_MEMSPACE_HOSTSPACE=OFF)
  if [[ $kokkos_version != 3.* ]]; then
    # Kokkos Kernels 4 builds every component by default; kstudy uses BLAS (gemv) only.
    kk_opts+=(-DKokkosKernels_ENABLE_ALL_COMPONENTS=OFF -DKokkosKernels_ENABLE_COMPONENT_BLAS=ON)
  fi
  local cxx
  if [[ $flavour == cuda ]]; then
    command -v nvcc >/dev/null || [[ -x /usr/local/cuda/bin/nvcc ]] || die "the cuda flavour needs nvcc (CUDA toolkit) on PATH or in /usr/local/cuda"
    export PATH=$PATH:/usr/local/cuda/bin
    cxx=$work/kokkos/bin/nvcc_wrapper
    kokkos_opts+=(-DKokkos_ENABLE_CUDA=ON "-DKokkos_ARCH_$kokkos_arch_option=ON")
    # Kokkos 4 allows device lambdas always (the option is deprecated there).
    [[ $kokkos_version == 3.* ]] && kokkos_opts+=(-DKokkos_ENABLE_CUDA_LAMBDA=ON)
    kk_opts+=(-DKokkosKernels_ENABLE_TPL_CUBLAS=ON)
    # Kokkos Kernels 4 turns cuSOLVER on with CUDA, and cuSOLVER needs the cuSPARSE kstudy leaves off.
    [[ $kokkos_version != 3.* ]] && kk_opts+=(-DKokkosKernels_ENABLE_TPL_CUSOLVER=OFF)
  else
    if [[ $host_cxx == clang++ ]]; then
      cxx=$(command -v clang++) || die "--cxx clang++: clang++ is not installed"
    else
      cxx=$(command -v g++ || command -v c++)
    fi
    kk_opts+=(-DKokkosKernels_ENABLE_TPL_CUBLAS=OFF)
  fi
  log "building Kokkos $kokkos_version ($flavour) -> $prefix"
  cmake -S "$work/kokkos" -B "$work/kokkos-build" "${common[@]}" -DCMAKE_CXX_COMPILER="$cxx" "${kokkos_opts[@]}" \
    > "$work/kokkos-configure.log" 2>&1 || { tail -30 "$work/kokkos-configure.log" >&2; die "Kokkos configure failed (log: $work/kokkos-configure.log)"; }
  cmake --build "$work/kokkos-build" -j "$jobs" > "$work/kokkos-build.log" 2>&1 \
    || { tail -30 "$work/kokkos-build.log" >&2; die "Kokkos build failed (log: $work/kokkos-build.log)"; }
  cmake --install "$work/kokkos-build" > /dev/null
  local kernels_label="Kokkos Kernels $kokkos_version"
  [[ -n $kernels_tarball ]] && kernels_label=$(basename "$kernels_tarball")
  log "building $kernels_label ($flavour, no ETI)"
  cmake -S "$work/kokkos-kernels" -B "$work/kk-build" "${common[@]}" -DCMAKE_CXX_COMPILER="$cxx" \
    -DKokkos_ROOT="$prefix.part" "${kk_opts[@]}" > "$work/kk-configure.log" 2>&1 \
    || { tail -30 "$work/kk-configure.log" >&2; die "Kokkos Kernels configure failed (log: $work/kk-configure.log)"; }
  cmake --build "$work/kk-build" -j "$jobs" > "$work/kk-build.log" 2>&1 \
    || { tail -30 "$work/kk-build.log" >&2; die "Kokkos Kernels build failed (log: $work/kk-build.log)"; }
  cmake --install "$work/kk-build" > /dev/null
  # nvcc_wrapper is the compiler users of the cuda flavour build with; keep the patched one in the prefix.
  if [[ $flavour == cuda ]]; then cp "$work/kokkos/bin/nvcc_wrapper" "$prefix.part/bin/nvcc_wrapper"; fi
  rm -rf "$prefix"; mv "$prefix.part" "$prefix"
  # Installed files record the .part prefix; rewrite it so the cache prefix is self-consistent.
  grep -rlF "$prefix.part" "$prefix" 2>/dev/null | xargs -r sed -i "s|$prefix.part|$prefix|g"
  rm -rf "$work"
}

# ---------------------------------------------------------------- main
# The arch first: nothing is installed or downloaded for a GPU the chosen Kokkos cannot build for. Not needed where
# no Kokkos is built (--packages-only, KSTUDY_KOKKOS_ROOT).
if [[ $flavour == cuda && $packages_only -eq 0 && -z ${KSTUDY_KOKKOS_ROOT:-} ]]; then
  resolve_cuda_arch
fi
[[ $install_packages -eq 1 ]] && ensure_packages
[[ $packages_only -eq 1 ]] && exit 0

if [[ -n ${KSTUDY_KOKKOS_ROOT:-} ]]; then
  [[ $print_prefix -eq 1 ]] && echo "$KSTUDY_KOKKOS_ROOT"
  exit 0
fi

cache_prefix() {  # the install prefix of the Kokkos chosen
  local key_arch=host
  [[ $flavour == cuda ]] && key_arch=sm$cuda_arch
  [[ $host_cxx == clang++ ]] && key_arch=host-clang
  echo "$cache_root/install/kokkos-$kokkos_version-$flavour-$key_arch-$(patch_hash)"
}
installed() { [[ -f $1/lib/cmake/Kokkos/KokkosConfig.cmake || -f $1/lib64/cmake/Kokkos/KokkosConfig.cmake ]]; }

prefix=$(cache_prefix)
# Current Kokkos with no local sources: a cached build needs none, else download; with neither, Kokkos 3.4.01.
if [[ $download_current -eq 1 ]] && ! installed "$prefix" && ! download_current_kokkos; then
  kokkos_tarball='' kernels_tarball='' kokkos_version=$debian_kokkos download_current=0
  # An arch 3.4.01 does not know is refused here, in one line that says why 4.6 is not being built.
  [[ $flavour == cuda ]] && resolve_cuda_arch
  log "no Kokkos $current_kokkos sources ($fallback_reason): building Kokkos $debian_kokkos instead" \
    "(--kokkos 3.4 asks for it; --kokkos-tarball gives 4.6)"
  prefix=$(cache_prefix)
fi
key=$(basename "$prefix")
if installed "$prefix"; then
  log "Kokkos cache hit: $prefix"
else
  mkdir -p "$cache_root/install"
  # One bootstrap at a time per cache: a second waits instead of building the same prefix twice.
  exec 9>"$cache_root/install/.lock"
  flock 9
  if ! installed "$prefix"; then
    build_kokkos "$key" "$prefix"
  fi
fi
[[ $print_prefix -eq 1 ]] && echo "$prefix"
exit 0
