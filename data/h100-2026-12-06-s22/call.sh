#!/usr/bin/env bash
# Session-22 device call driver: unpack the bundle, run the steps named in $STEPS.
#   info:  the card and the build;
#   fp16:  the GEMM/attention/fp16 tests of kstudy_tests (the fp16 helpers changed in a465827, not yet run on a GPU);
#   quick: issue 44's benchmark on `quick`: its fixed protocol (5 x 2), a careful fixed protocol (20 x 3) and
#          --precision 1% (the experiment's counts as the least), one after the other; wall times in times.txt;
#   plain: the same three on plain_baseline's GPU variants (fixed 7 x 2, careful 20 x 3, --precision 1%);
#   attn:  hopper_attention under the current gate (H200 only: the headline's card);
#   pack:  logs into one tar, archives into one tar.xz per study.
set -u
T0=$(date +%s)
mkdir -p /tmp/u && xz -dc .device/b.tar.xz | tar -C /tmp/u -xf -
B=/tmp/u/bundle
export LD_LIBRARY_PATH=$B/lib:${LD_LIBRARY_PATH:-}
cd $B
el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
card=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw,power.limit --format=csv,noheader
mkdir -p /tmp/h5
left() { local l=$(( ${END_S:-540} - ($(date +%s) - T0) )); (( l < 1 )) && l=1; echo $l; }
timed() {  # NAME ARGS...: one kstudy run, its wall time appended to times.txt
  local name=$1; shift
  local budget=$(left); (( budget > ${RUN_S:-240} )) && budget=${RUN_S:-240}
  (( budget < 20 )) && { echo "$name skipped: no time left" | tee -a $OUT/times.txt; return; }
  local t0=$(date +%s.%N)
  timeout $budget ./kstudy run "$@" --out /tmp/h5/$name.h5 -q > $OUT/$name.txt 2>&1
  local rc=$? t1=$(date +%s.%N)
  echo "$name rc=$rc wall_s=$(awk "BEGIN{printf \"%.1f\", $t1 - $t0}") card=$card" | tee -a $OUT/times.txt
}
plain_gpu="--variants fused_cuda_feature_major --variants fused_kokkos_feature_major@cuda --variants fused_cuda_row_major_tiled --variants fused_kokkos_row_major@cuda --variants plain_cuda --variants plain_kokkos@cuda"
three() {  # STUDY EXTRA...
  local study=$1; shift
  timed ${study}_fixed $study "$@"
  timed ${study}_precision $study "$@" --precision 1%
  [[ -n ${SKIP_CAREFUL:-} ]] || timed ${study}_careful $study "$@" --trials 20 --replications 3
}
for step in $STEPS; do
  el "step $step"
  case $step in
    info) ./kstudy info > $OUT/info.txt 2>&1; head -12 $OUT/info.txt ;;
    fp16) timeout $(( $(left) < ${FP16_S:-300} ? $(left) : ${FP16_S:-300} )) ./kstudy_tests --gtest_filter='*Gemm*:*Attention*:*Fp16*:*fp16*:*Half*' --gtest_brief=1 > $OUT/fp16.txt 2>&1
          echo "fp16 tests rc=$?"; tail -8 $OUT/fp16.txt ;;
    quick) three quick ;;
    plain) three plain_baseline $plain_gpu ;;
    plainp) timed plain_baseline_precision plain_baseline $plain_gpu --precision 1% ;;
    attn) if [[ $card == *H200* ]]; then
            timeout ${ATTN_S:-420} ./kstudy run hopper_attention --out /tmp/h5/hopper_attention.h5 -q > $OUT/attn_run.txt 2>&1
            echo "rc=$?"; tail -5 $OUT/attn_run.txt
          else el "attn skipped: $card is not the headline's H200"; fi ;;
    pack) (cd $OUT && tar -cf logs.tar *.txt && rm -f $(ls *.txt | grep -v times.txt))
          for s in quick plain_baseline hopper_attention; do
            ls /tmp/h5/$s*.h5 >/dev/null 2>&1 && (cd /tmp/h5 && tar -cf - $s*.h5 | xz -3 > $OUT/$s.tar.xz)
          done; ls -la $OUT ;;
    *) el "unknown step $step" ;;
  esac
done
el done
