#!/usr/bin/env bash
# Builds the experiment-parser fuzzer with clang (libFuzzer + ASan + UBSan) and runs it for a bounded
# time from the built-in and malformed experiment files. Exit 0 only when it finds nothing.
#   tests/fuzz/run_fuzzer.sh SOURCE_DIR WORK_DIR [SECONDS=60]
set -euo pipefail
src=$1; work=$2; seconds=${3:-60}
mkdir -p "$work/corpus"
clang++ -std=c++17 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  -I"$src/src/include" -I"$src/views/include" \
  "$src/tests/fuzz/experiment_fuzzer.cpp" "$src/tests/fuzz/fuzz_registrations.cpp" "$src/src/core/experiment.cpp" \
  "$src/src/core/records.cpp" "$src/src/core/resources.cpp" "$src/src/core/operation_registry.cpp" "$src/views/src/table_shape.cpp" \
  -o "$work/experiment_fuzzer"
cp "$src"/experiments/*.json "$src"/tests/malformed_experiments/*.json "$work/corpus/"
cd "$work"
./experiment_fuzzer -max_total_time="$seconds" -max_len=4096 -timeout=5 -print_final_stats=1 corpus 2>&1 | tail -n 12
