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
 --note "rows_sweep and feature_sweep ran with --trials 5 --replications 2 (sweeps.h5); feature_sweep's replication 1 lacks its last point (1,048,576×512) and block_size has replication 0 only, without 4,194,304×256 at blocks of 128 to 1,024: the device call's time limit cut them. Interrupted archives keep every finished point; their summary tables are left to --resume, and this report computes every median from the samples." \
 --note "The quick experiment in study.h5 has no samples: it was cut by the same limit." \
 --note "Host-to-device bandwidth from pinned memory was lower during these runs than in the first session on a machine of the same kind (transfer_calibration: 38.8 GiB/s at 1 GiB vs 51.5), so every one-shot timing here carries a slower upload; the one-shot ratios move with it."
