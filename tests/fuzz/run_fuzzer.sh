#!/usr/bin/env bash
# Builds the experiment-parser fuzzer with clang (libFuzzer + ASan + UBSan) and runs it for a bounded
# time from the built-in and malformed experiment files. Exit 0 only when it finds nothing.
#   tests/fuzz/run_fuzzer.sh SOURCE_DIR WORK_DIR [SECONDS=60]
set -euo pipefail
src=$1; work=$2; seconds=${3:-60}
mkdir -p "$work/corpus"
# Each source compiled on its own, through ccache where installed (paths hashed relative to the clone, so
# another clone of the same sources hits the same cache), then linked.
compile=(clang++)
command -v ccache > /dev/null && compile=(env CCACHE_BASEDIR="$src" CCACHE_NOHASHDIR=1 ccache clang++)
flags=(-std=c++17 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined)
objects=()
for source in tests/fuzz/experiment_fuzzer.cpp tests/fuzz/fuzz_registrations.cpp src/core/experiment.cpp \
              src/core/records.cpp src/core/resources.cpp src/core/operation_registry.cpp views/src/table_shape.cpp; do
  object=$work/$(basename "$source" .cpp).o
  "${compile[@]}" "${flags[@]}" -I"$src/src/include" -I"$src/views/include" -c "$src/$source" -o "$object"
  objects+=("$object")
done
clang++ "${flags[@]}" "${objects[@]}" -o "$work/experiment_fuzzer"
cp "$src"/experiments/*.json "$src"/tests/malformed_experiments/*.json "$work/corpus/"
cd "$work"
./experiment_fuzzer -max_total_time="$seconds" -max_len=4096 -timeout=5 -print_final_stats=1 corpus 2>&1 | tail -n 12
