#!/usr/bin/env bash
# Builds the archive-reader fuzzer with clang (libFuzzer + ASan + UBSan, coverage-guided through kstudy's reader
# and its checksum code) and runs it for a bounded time from small real archives. Exit 0 only when it finds
# nothing; a failing input is kept in WORK_DIR (crash-*, timeout-*, leak-*) and the seed is printed first.
#   tests/fuzz/run_archive_fuzzer.sh SOURCE_DIR WORK_DIR [SECONDS=60] [SEED=random]
# HDF5 itself is Debian's, uninstrumented: its reads of a damaged file run in the reader's verification child,
# where a crash is the file's refusal, not a finding; what this target hunts is the parent's (kstudy's) side.
set -euo pipefail
src=$1; work=$2; seconds=${3:-60}; seed=${4:-random}
[[ $seed == random ]] && seed=$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')
mkdir -p "$work/archive_corpus"
hdf5_include=$(pkg-config --cflags-only-I hdf5-serial 2> /dev/null || echo -I/usr/include/hdf5/serial)
hdf5_libs=$(pkg-config --libs hdf5-serial 2> /dev/null || echo "-L/usr/lib/x86_64-linux-gnu/hdf5/serial -lhdf5")
compile=(clang++)
command -v ccache > /dev/null && compile=(env CCACHE_BASEDIR="$src" CCACHE_NOHASHDIR=1 ccache clang++)
flags=(-std=c++17 -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=undefined)
objects=()
for source in tests/fuzz/archive_fuzzer.cpp tests/fuzz/fuzz_registrations.cpp src/archive/hdf5_reader.cpp \
              src/archive/archive_common.cpp src/archive/detail/hdf5_digest.cpp src/archive/detail/hdf5_global_heap.cpp \
              src/archive/detail/hdf5_util.cpp \
              src/core/records.cpp src/core/experiment.cpp src/core/resources.cpp src/core/operation_registry.cpp \
              views/src/table_shape.cpp; do
  object=$work/$(basename "$source" .cpp).o
  coverage=-fsanitize=fuzzer-no-link
  [[ $source == tests/fuzz/archive_fuzzer.cpp ]] && coverage=-fsanitize=fuzzer
  # shellcheck disable=SC2086
  "${compile[@]}" "${flags[@]}" $coverage -I"$src/src/include" -I"$src/src" -I"$src/src/archive" \
    -I"$src/views/include" $hdf5_include -c "$src/$source" -o "$object"
  objects+=("$object")
done
# shellcheck disable=SC2086
clang++ "${flags[@]}" -fsanitize=fuzzer "${objects[@]}" $hdf5_libs -o "$work/archive_fuzzer"
cp "$src"/tests/fixtures/cpu_v3_small.h5 "$src"/tests/fixtures/h200_v1_cold.h5 "$src"/tests/fuzz/archive_corpus/* \
  "$work/archive_corpus/"
cd "$work"
echo "archive libFuzzer: seed $seed, $seconds s"
# Inputs are whole archives (tens of kB): -max_len past the largest seed; each input forks a verification
# child, so a run is a few inputs a second. The child is a fork of this process and inherits libFuzzer's
# crash handler: HDF5's own faults on a damaged file, which ASan reports there and which refuse that file,
# leave crash-* files behind although the fuzzer goes on. Only the fuzzer's own exit status is the verdict:
# when it passed, those files are the children's and go.
rc=0
KSTUDY_ARCHIVE_READ_SECONDS=5 ./archive_fuzzer -seed="$seed" -max_total_time="$seconds" -max_len=262144 \
  -timeout=30 -rss_limit_mb=4096 -print_final_stats=1 archive_corpus > fuzz.log 2>&1 || rc=$?
grep -E '^(Done|stat::|==[0-9]+==ERROR|SUMMARY)' fuzz.log | tail -n 12 || true
if [[ $rc -eq 0 ]]; then
  children=$(find . -maxdepth 1 -name 'crash-*' | wc -l)
  rm -f crash-* leak-* timeout-* oom-*
  echo "archive libFuzzer: no failure in the reader process (seed $seed; $children inputs refused after HDF5 faulted in the verification child)"
else
  tail -n 60 fuzz.log
  echo "archive libFuzzer: FAILED (exit $rc, seed $seed); the input is in $work" >&2
fi
exit $rc
