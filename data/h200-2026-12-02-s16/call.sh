#!/usr/bin/env bash
# Session-16 device call driver (not committed): unpack the bundle, run the steps named in $STEPS.
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
    tests) timeout ${TESTS_S:-240} ./kstudy_tests --gtest_filter="${FILTER}" --gtest_brief=1 > $OUT/tests.txt 2>&1; echo "rc=$?" >> $OUT/tests.txt; grep -E "PASSED|FAILED|SKIPPED \[|rc=" $OUT/tests.txt | tail -40 ;;
    cudnnlog) KSTUDY_CUDNN_LOG=1 timeout 90 ./kstudy_tests --gtest_filter='AttentionCudnn*:*cudnn*' > $OUT/cudnn_log.txt 2>&1; tail -30 $OUT/cudnn_log.txt ;;
    attn) timeout ${ATTN_S:-300} ./kstudy run hopper_attention --out $OUT/hopper_attention.h5 -q > $OUT/attn_run.txt 2>&1; echo "rc=$?"; tail -15 $OUT/attn_run.txt ;;
    gemm) timeout ${GEMM_S:-200} ./kstudy run hopper_gemm --out $OUT/hopper_gemm.h5 -q > $OUT/gemm_run.txt 2>&1; echo "rc=$?"; tail -15 $OUT/gemm_run.txt ;;
    prof) timeout ${PROF_S:-240} ./kstudy profile profile_hopper_attention --points 0 --out $OUT/profile_hopper_attention.h5 > $OUT/prof_attn.txt 2>&1; echo "rc=$?"; tail -8 $OUT/prof_attn.txt
          timeout ${PROFG_S:-150} ./kstudy profile profile_tensor_core_gemm --out $OUT/profile_hopper_gemm.h5 > $OUT/prof_gemm.txt 2>&1; echo "rc=$?"; tail -8 $OUT/prof_gemm.txt ;;
    devices) nvidia-smi -L; ./kstudy p2p; echo "p2p rc=$?"; ./kstudy info 2>&1 | grep -E "gpu_uuid|gpu_pci_bus_id|gpu_name"
          timeout 150 ./kstudy run quick --devices all --trials 3 --replications 1 --out $OUT/devices_all.h5 > $OUT/devices_all.txt 2>&1; echo "devices all rc=$?"; tail -5 $OUT/devices_all.txt; ls $OUT/devices_all.h5.devices 2>/dev/null
          timeout 150 ./kstudy run quick --devices 0 --replicate-on-every-device --trials 3 --replications 1 --out $OUT/devices_replicated.h5 > $OUT/devices_rep.txt 2>&1; echo "replicate rc=$?"; tail -5 $OUT/devices_rep.txt
          ./kstudy compare $OUT/devices_replicated.h5 --by device > $OUT/compare_device.txt 2>&1; echo "compare rc=$?"; head -20 $OUT/compare_device.txt
          rm -rf $OUT/*.devices ;;
    tf32) timeout 120 ./kstudy run hopper_gemm_tf32 --out $OUT/hopper_gemm_tf32.h5 -q > $OUT/tf32_run.txt 2>&1; echo "rc=$?"; tail -3 $OUT/tf32_run.txt ;;
    sgemm) timeout 200 ./kstudy profile profile_gemm --out $OUT/profile_gemm.h5 > $OUT/prof_sgemm.txt 2>&1; echo "rc=$?"; tail -22 $OUT/prof_sgemm.txt ;;
    pack) (cd $OUT && tar -cf logs.tar *.txt && rm -f *.txt) ;;
    *) el "unknown step $step" ;;
  esac
done
el done
