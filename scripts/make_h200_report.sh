#!/usr/bin/env bash
# Regenerates docs/report-h200/ (tables, figures, report.md) from the committed H200 dataset of the scoring
# study with `kstudy report`; the notes carry the dataset README's caveats into the report.
#   scripts/make_h200_report.sh [KSTUDY=build/cpu/src/app/kstudy]   (without a build: the report's Python directly)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
kstudy=${1:-build/cpu/src/app/kstudy}
report=("$kstudy" report)
[[ -x $kstudy ]] || report=(/usr/bin/python3 scripts/kstudy_report.py report)
d=data/h200-2026-12-02-s14
n=data/h200-2026-12-02-s15
rm -rf docs/report-h200
# 1048576x16: the seed's headline shape, where its own table and the waterfall are read.
"${report[@]}" $d/study.h5 $d/sweeps.h5 $d/advise_check.h5 $n/cold.h5 $n/profile.h5 $n/block_size.h5 --out docs/report-h200 \
  --shape 1048576x16 --cpu-baseline $d/bench.json \
  --note "study.h5, sweeps.h5, advise_check.h5 and bench.json: commit d4011f5, on the H200 of 2026-12-02 (data/h200-2026-12-02-s14/README.md). sweeps.h5 holds rows_sweep and feature_sweep complete at the files' protocol (three calls, resumed). cold.h5, profile.h5 and block_size.h5: commit a22d839, on an H200 later that day (data/h200-2026-12-02-s15/README.md); the scoring kernels are the same code at both commits." \
  --note "bench.json holds the device variants only (kstudy_bench, CUDA events); the CPU columns of the resident table come from the sweeps."
