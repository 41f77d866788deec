#!/usr/bin/env bash
# Session-17 device call driver: unpack the bundle, run the steps named in $STEPS (each under its own timeout).
set -u
T0=$(date +%s)
mkdir -p /tmp/u && xz -dc .device/b.tar.xz | tar -C /tmp/u -xf -
B=/tmp/u/bundle
export LD_LIBRARY_PATH=$B/lib:${LD_LIBRARY_PATH:-}
cd $B
el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
for step in $STEPS; do
  el "step $step"
  case $step in
    tests) timeout ${TESTS_S:-150} ./kstudy_tests --gtest_filter="${FILTER}" --gtest_brief=1 > $OUT/tests.txt 2>&1; echo "rc=$?" >> $OUT/tests.txt; grep -E "PASSED|FAILED|SKIPPED \[|rc=" $OUT/tests.txt | tail -30 ;;
    gemm) timeout ${GEMM_S:-200} ./kstudy run hopper_gemm --out $OUT/hopper_gemm.h5 -q > $OUT/gemm_run.txt 2>&1; echo "rc=$?"; tail -12 $OUT/gemm_run.txt ;;
    attn64) timeout ${ATTN_S:-200} ./kstudy run hopper_attention_hd64 --out $OUT/hopper_attention_hd64.h5 -q > $OUT/attn_run.txt 2>&1; echo "rc=$?"; tail -12 $OUT/attn_run.txt ;;
    sgemm) timeout ${SGEMM_S:-120} ./kstudy run sgemm_frontier --out $OUT/sgemm_frontier.h5 -q > $OUT/sgemm_run.txt 2>&1; echo "rc=$?"; tail -12 $OUT/sgemm_run.txt ;;
    profg) timeout ${PROFG_S:-150} ./kstudy profile profile_tensor_core_gemm --variants $PROFG_VARIANTS --out $OUT/profile_hopper_gemm.h5 > $OUT/prof_gemm.txt 2>&1; echo "rc=$?"; tail -12 $OUT/prof_gemm.txt ;;
    profa) timeout ${PROFA_S:-150} ./kstudy profile profile_hopper_attention --points 0 --variants $PROFA_VARIANTS --out $OUT/profile_hopper_attention.h5 > $OUT/prof_attn.txt 2>&1; echo "rc=$?"; tail -12 $OUT/prof_attn.txt ;;
    profs) timeout ${PROFS_S:-120} ./kstudy profile profile_gemm --variants $PROFS_VARIANTS --out $OUT/profile_gemm.h5 > $OUT/prof_sgemm.txt 2>&1; echo "rc=$?"; tail -12 $OUT/prof_sgemm.txt ;;
    pack) (cd $OUT && tar -cf logs.tar *.txt && rm -f *.txt) ;;
    *) el "unknown step $step" ;;
  esac
done
el done
