#!/usr/bin/env bash
# kstudy's style check: the one CI runs first and the pre-commit hooks (.pre-commit-config.yaml) run per commit.
#
#   scripts/style.sh [--check|--fix] [--only clang-format|flake8|codespell] [-- FILE...]
#
# Over git-tracked files only (or the FILEs given, as pre-commit passes them):
#   clang-format, major version 14 exactly (.clang-format): C, C++ and CUDA (*.c *.h *.cpp *.hpp *.cu *.cuh);
#   flake8 (.flake8: 120 columns, like the C++): Python (*.py);
#   codespell (.codespellrc: data, archives and patches skipped; identifiers it misreads listed): every text file.
# --check (the default) changes nothing: it lists the offending files and exits 1 when there are any.
# --fix rewrites the C/C++/CUDA files in place with clang-format, then checks Python and spelling, which are
# fixed by hand (no tool rewrites them).
#
# Environment: CLANG_FORMAT names the clang-format binary (default: clang-format-14, else clang-format); it must
# be major version 14, as another major formats the same .clang-format differently.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

readonly clang_format_major=14
readonly cxx_pattern='\.(c|h|cpp|hpp|cu|cuh)$'
readonly py_pattern='\.py$'

die() { echo "style: error: $*" >&2; exit 2; }

mode=check
only=''
given=()
have_given=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --check) mode=check; shift ;;
    --fix) mode=fix; shift ;;
    --only) only=${2:?--only needs clang-format, flake8 or codespell}; shift 2 ;;
    --) shift; given=("$@"); have_given=1; break ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
case $only in
  ''|clang-format|flake8|codespell) ;;
  *) die "--only takes clang-format, flake8 or codespell, not '$only'" ;;
esac
wanted() { [[ -z $only || $only == "$1" ]]; }

# Tracked files that exist in the working tree (a deletion not yet committed is still listed by git).
files=()
if [[ $have_given -eq 1 ]]; then
  candidates=("${given[@]}")
else
  git rev-parse --is-inside-work-tree >/dev/null 2>&1 ||
    die "not a git checkout: the files checked are git's tracked files"
  mapfile -d '' candidates < <(git ls-files -z)
fi
for f in "${candidates[@]}"; do
  [[ -f $f && ! -L $f ]] && files+=("$f")
done
select_files() {  # select_files PATTERN: the files whose path matches the extended regex
  local f
  for f in "${files[@]}"; do
    [[ $f =~ $1 ]] && printf '%s\0' "$f"
  done
  return 0
}
mapfile -d '' cxx_files < <(select_files "$cxx_pattern")
mapfile -d '' py_files < <(select_files "$py_pattern")

jobs=$(nproc 2>/dev/null || echo 2)
failed=0

# ---------------------------------------------------------------- clang-format
clang_format_binary() {
  local candidate version
  if [[ -n ${CLANG_FORMAT:-} ]]; then
    candidate=$CLANG_FORMAT
  elif command -v "clang-format-$clang_format_major" >/dev/null; then
    candidate=clang-format-$clang_format_major
  else
    candidate=clang-format
  fi
  command -v "$candidate" >/dev/null ||
    die "clang-format $clang_format_major ('$candidate') is not installed" \
        "(Debian/Ubuntu: apt-get install clang-format-$clang_format_major; scripts/bootstrap.sh installs it)"
  version=$("$candidate" --version | sed -nE 's/.*clang-format version ([0-9]+)\.[0-9.]+.*/\1/p')
  [[ $version == "$clang_format_major" ]] ||
    die "clang-format $clang_format_major is required (another major version formats .clang-format differently);" \
        "$candidate is '$("$candidate" --version)'." \
        "Install clang-format-$clang_format_major or set CLANG_FORMAT to a clang-format $clang_format_major binary"
  echo "$candidate"
}

# The files clang-format would change, one a line. --dry-run reports each difference as a warning and exits 0;
# any other exit status is clang-format failing (an unreadable file, a broken .clang-format). One process at a
# time: parallel ones would interleave their reports (and the whole tree takes about 2 s).
clang_format_offenders() {
  local binary=$1 out rc=0
  out=$(printf '%s\0' "${cxx_files[@]}" | xargs -0 "$binary" --dry-run --style=file --fallback-style=none 2>&1) ||
    rc=$?
  if [[ $rc -ne 0 ]]; then
    grep -v -e 'code should be clang-formatted' <<<"$out" | awk 'NR <= 20' >&2
    die "clang-format failed (exit $rc)"
  fi
  sed -nE 's/^(.+):[0-9]+:[0-9]+: warning: code should be clang-formatted.*$/\1/p' <<<"$out" | LC_ALL=C sort -u
}

run_clang_format() {
  local binary list offenders
  binary=$(clang_format_binary)
  list=$(clang_format_offenders "$binary")
  [[ -n $list ]] || return 0
  mapfile -t offenders <<<"$list"
  if [[ $mode == fix ]]; then
    printf '%s\0' "${offenders[@]}" | xargs -0 -n 16 -P "$jobs" "$binary" -i --style=file --fallback-style=none
    echo "style: clang-format $clang_format_major reformatted ${#offenders[@]} of ${#cxx_files[@]} files"
    return 0
  fi
  echo "style: clang-format $clang_format_major: ${#offenders[@]} of ${#cxx_files[@]} files differ from .clang-format:"
  printf '  %s\n' "${offenders[@]}"
  echo "  fix: scripts/style.sh --fix"
  failed=1
}

# ---------------------------------------------------------------- flake8, codespell
# Both print their findings (file:line: ...) and exit non-zero; the summary names the files. A non-zero exit
# without a single finding is the tool failing (a broken configuration, say).
run_reporting_tool() {
  local name=$1 hint=$2 out rc=0
  shift 2
  command -v "$1" >/dev/null ||
    die "$name is not installed (Debian/Ubuntu: apt-get install $name; scripts/bootstrap.sh installs it)"
  out=$("$@" 2>&1) || rc=$?
  [[ $rc -eq 0 ]] && return 0
  local offenders
  offenders=$(sed -nE 's/^([^:]+):[0-9]+:.*/\1/p' <<<"$out" | LC_ALL=C sort -u)
  if [[ -z $offenders ]]; then
    echo "$out" >&2
    die "$name failed (exit $rc)"
  fi
  echo "$out"
  echo "style: $name: findings in $(wc -l <<<"$offenders") files (above):"
  sed 's/^/  /' <<<"$offenders"
  echo "  fix: by hand ($hint)"
  failed=1
}

start_ns=$(date +%s%N)
ran=()
if wanted clang-format && [[ ${#cxx_files[@]} -gt 0 ]]; then
  run_clang_format
  ran+=("clang-format ${#cxx_files[@]} files")
fi
if wanted flake8 && [[ ${#py_files[@]} -gt 0 ]]; then
  run_reporting_tool flake8 "settings in .flake8" flake8 -- "${py_files[@]}"
  ran+=("flake8 ${#py_files[@]} files")
fi
if wanted codespell && [[ ${#files[@]} -gt 0 ]]; then
  # .codespellrc's skip list drops data and binary files from the list given here.
  run_reporting_tool codespell "a real identifier it misreads goes into ignore-words-list in .codespellrc" \
    codespell -- "${files[@]}"
  ran+=("codespell ${#files[@]} files less .codespellrc's skip list")
fi
elapsed_ms=$((($(date +%s%N) - start_ns) / 1000000))
[[ ${#ran[@]} -gt 0 ]] || ran=("nothing to check")
summary="$(printf '%s; ' "${ran[@]}")$((elapsed_ms / 1000)).$((elapsed_ms % 1000 / 100)) s"
if [[ $failed -ne 0 ]]; then
  echo "style: FAILED ($summary)"
  exit 1
fi
echo "style: ok ($summary)"
