#!/usr/bin/env bash
# Session 30: PHASES (default "tests ncu study") on one card, everything into $OUT/c30-TAG.tar.
#  tests: the GPU tests of every softmax variant; ncu: Nsight Compute's shared-memory wavefronts, instructions and
#  bank conflicts of the two tile transposes at 4,096^2 and 8,192^2, and their SASS; study: softmax_odd_widths.
set -u
tag=${TAG:-a}; o=$OUT/c30-$tag; mkdir -p "$o"
trap '(cd "$OUT" && tar -cf c30-$tag.tar c30-$tag && rm -rf c30-$tag)' EXIT
nvidia-smi --query-gpu=name,uuid,compute_cap,clocks.max.sm,memory.total --format=csv,noheader | tee "$o/gpu.txt"
b=.device/bundle
for phase in ${PHASES:-tests ncu study}; do
  start=$(date +%s)
  case $phase in
  tests)
    OUT=$o/tests KSTUDY_TEST_SECONDS=${TEST_S:-150} KSTUDY_TEST_FILTER='*Softmax*:*softmax*' \
      scripts/device_run.sh $b tests > "$o/tests.txt" 2>&1
    echo "tests rc=$?"; grep -E '^\[  (PASSED|FAILED|SKIPPED)' "$o/tests.txt" | head -12 ;;
  ncu)
    ( source "$b/env.sh"
      cuobjdump -sass "$b/kstudy" 2>/dev/null | awk '/Function : .*transpose_tile32_kernel/{p=1} /Function :/&&!/transpose_tile32/{p=0} p' \
        | grep -E 'Function|LDS|STS|BAR' > "$o/transpose_tile32_sass.txt"
      m=l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum
      m=$m,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum
      m=$m,smsp__sass_inst_executed_op_shared_ld.sum,smsp__sass_inst_executed_op_shared_st.sum
      m=$m,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum
      m=$m,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,l1tex__t_requests_pipe_lsu_mem_global_op_st.sum
      m=$m,l1tex__data_bank_reads.sum,l1tex__data_bank_writes.sum,launch__grid_size,launch__block_size
      timeout ${NCU_S:-150} ncu --target-processes all -k regex:transpose_tile32 --metrics "$m" --csv \
        --log-file "$o/ncu_transpose.csv" "$b/kstudy" run .device/transpose_ncu.json --out "$o/transpose_ncu.h5" -q
      echo "ncu rc=$?" ) > "$o/ncu.txt" 2>&1
    tail -3 "$o/ncu.txt"; wc -l "$o/ncu_transpose.csv" "$o/transpose_tile32_sass.txt" ;;
  study)
    ( source "$b/env.sh" && timeout "${STUDY_S:-380}" "$b/kstudy" run ${STUDY_JSON:-experiments/softmax_odd_widths.json} \
      --trials ${TRIALS:-7} --replications ${REPS:-2} ${VARIANTS:+--variants $VARIANTS} --out "$o/softmax_odd_widths.h5" ) > "$o/study.txt" 2>&1
    echo "study rc=$?"; tail -4 "$o/study.txt" ;;
  costs)
    ( source "$b/env.sh" && timeout "${COSTS_S:-300}" "$b/kstudy" run experiments/kokkos_costs_vectors.json \
      experiments/kokkos_costs_softmax.json experiments/kokkos_costs_layernorm.json experiments/kokkos_costs_transpose.json \
      --out "$o/kokkos_costs_memory.h5" ) > "$o/costs.txt" 2>&1
    echo "costs rc=$?"; tail -4 "$o/costs.txt" ;;
  esac
  echo "$phase $(( $(date +%s) - start )) s"
done
