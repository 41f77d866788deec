#!/usr/bin/env bash
# Session-20 device call driver: unpack the bundle, run the steps named in $STEPS (each under its own timeout).
#   tests: the GPU tests of the operations ported to the thin bases (transpose, STREAM, reduce_sum), their CUDA
#          and Kokkos variants, the gate conformance suite and the elementwise base;
#   attn:  experiment hopper_attention (the lab III attention ladder) under the current gate (22c31fd's last-row
#          sampling), the re-gated run issue 44 asks for.
set -u
T0=$(date +%s)
mkdir -p /tmp/u && xz -dc .device/b.tar.xz | tar -C /tmp/u -xf -
B=/tmp/u/bundle
export LD_LIBRARY_PATH=$B/lib:${LD_LIBRARY_PATH:-}
cd $B
el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw,power.limit --format=csv,noheader
for step in $STEPS; do
  el "step $step"
  case $step in
    tests) timeout ${TESTS_S:-240} ./kstudy_tests --gtest_filter="${FILTER}" --gtest_brief=1 > $OUT/tests.txt 2>&1; echo "rc=$?" >> $OUT/tests.txt; grep -E "PASSED|FAILED|SKIPPED|ran\.|rc=" $OUT/tests.txt | tail -20 ;;
    attn) timeout ${ATTN_S:-420} ./kstudy run hopper_attention --out $OUT/hopper_attention.h5 -q > $OUT/attn_run.txt 2>&1; echo "rc=$?"; tail -15 $OUT/attn_run.txt ;;
    info) ./kstudy info > $OUT/info.txt 2>&1; head -30 $OUT/info.txt ;;
    pack) (cd $OUT && tar -cf logs.tar *.txt && rm -f *.txt) ;;
    *) el "unknown step $step" ;;
  esac
done
el done
