#!/usr/bin/env bash
# Regenerates docs/report-h200/ (tables, figures, report.md) from the committed H200 dataset with
# `kstudy report`; the notes carry data/h200-2026-11-30-s3/README.md's caveats into the report.
#   scripts/make_h200_report.sh [KSTUDY=build/cpu/src/app/kstudy]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
kstudy=${1:-build/cpu/src/app/kstudy}
d=data/h200-2026-11-30-s3
rm -rf docs/report-h200
"$kstudy" report $d/study.h5 $d/sweeps.h5 $d/cold.h5 $d/profile.h5 --out docs/report-h200 --cpu-baseline $d/bench.json \
 --note "Every built-in experiment ran at its file's protocol and is complete (study.h5 and sweeps.h5 at commit 3188829, cold.h5 at aca4d11, clean trees). bench.json (the resident table) was re-measured at commit aca4d11, whose Kokkos feature-major kernel is built to 64 registers again; at 3188829 it was built to 48 (bench-3188829.json), so the fused_kokkos_feature_major samples in the archives are 1-10% slower than bench.json's."
