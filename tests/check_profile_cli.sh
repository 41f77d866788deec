#!/usr/bin/env bash
# `kstudy profile` where it cannot run: a clear error, a non-zero exit and no archive (nor a partial one).
#   cpu flavour          -> "needs the cuda flavour"
#   cuda flavour, no GPU -> bad experiments and outputs refused first, then "ncu ... not found" or
#                           "no CUDA GPU is visible" (a stand-in ncu gets past the first)
# On a machine whose GPU nvidia-smi sees, exit 77 (skipped): profiling for real is the GPU run's job
# (scripts/device_run.sh BUNDLE profile).
# Usage: check_profile_cli.sh KSTUDY_EXE FLAVOUR
set -uo pipefail
kstudy=$1; flavour=${2:-cpu}
if [[ $flavour == cuda ]] && nvidia-smi -L > /dev/null 2>&1; then
  echo "skipped: a GPU is visible; run kstudy profile there for real"
  exit 77
fi
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
export OMP_NUM_THREADS=2 OMP_PROC_BIND=false
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

expect_refusal() {  # MESSAGE-SUBSTRING ARGS...
  local message=$1; shift
  rm -f "$work/p.h5" "$work/p.h5.partial"
  "$kstudy" profile "$@" > "$work/stdout" 2> "$work/stderr"
  local rc=$?
  if [[ $rc -eq 0 ]]; then fail "profile $* exited 0"; return; fi
  grep -qF -- "$message" "$work/stderr" || { fail "profile $*: no '$message' in: $(cat "$work/stderr")"; return; }
  [[ -e $work/p.h5 || -e $work/p.h5.partial ]] && { fail "profile $*: an archive was written"; return; }
  echo "ok: refused (rc=$rc): $(head -c 200 "$work/stderr")"
}

if [[ $flavour == cpu ]]; then
  expect_refusal "needs the cuda flavour" profile_layouts --out "$work/p.h5"
  expect_refusal "needs the cuda flavour" rows_sweep --points 2 --variants fused_kokkos --out "$work/p.h5"
else
  # A stand-in for ncu that only answers --version: enough to reach the GPU check.
  printf '#!/bin/sh\necho "Version 0000.0 (stand-in)"\n' > "$work/ncu"
  chmod +x "$work/ncu"
  expect_refusal "field 'kind'" transfer_calibration --ncu "$work/ncu" --out "$work/p.h5"
  expect_refusal "no built-in experiment named 'nope'" nope --ncu "$work/ncu" --out "$work/p.h5"
  expect_refusal "unknown variant 'no_such_variant'" profile_layouts --variants no_such_variant --ncu "$work/ncu" \
    --out "$work/p.h5"
  expect_refusal "is not an executable file" profile_layouts --ncu "$work/missing-ncu" --out "$work/p.h5"
  expect_refusal "no CUDA GPU is visible" profile_layouts --ncu "$work/ncu" --out "$work/p.h5"
  if ! command -v ncu > /dev/null && [[ ! -x /usr/local/cuda/bin/ncu ]] && ! ls /opt/nvidia/nsight-compute/*/ncu > /dev/null 2>&1; then
    KSTUDY_NCU= expect_refusal "ncu was not found" profile_layouts --out "$work/p.h5"
  fi
fi
# Bad usage is refused by the option parser (before anything else).
rm -f "$work/p.h5"
if "$kstudy" profile --points x profile_layouts --out "$work/p.h5" > /dev/null 2>&1; then fail "--points x accepted"
elif [[ -e $work/p.h5 ]]; then fail "--points x wrote an archive"; else echo "ok: --points x refused"; fi

echo "$failures failure(s)"
exit $((failures > 0))
