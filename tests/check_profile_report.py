#!/usr/bin/python3
"""`kstudy report` beside a profile archive, through the kstudy binary: profile.csv and profile_by_variant.csv
recomputed here from the archives' profile table and samples, the timing join (measured medians of accepted
samples, never the profiled durations), and the report.md section.

usage: check_profile_report.py KSTUDY TIMING.h5 PROFILE.h5   (written by kstudy_tests Profile.ReportFixture)
Exit 77 (ctest: skipped) when this python lacks h5py, pandas, numpy or matplotlib.
"""
import math
import subprocess
import sys
import tempfile
from pathlib import Path

try:
    import h5py
    import matplotlib  # noqa: F401  (the report needs it)
    import numpy as np
    import pandas as pd
except ImportError as error:
    print(f"skipped: {error}")
    sys.exit(77)

EXPERIMENT = "profile_layouts"


def table(path, name):
    with h5py.File(path, "r") as f:
        df = pd.DataFrame(f[f"/experiments/{EXPERIMENT}/{name}"][:])
    for c in df.columns:
        if df[c].dtype == object:
            df[c] = df[c].str.decode("utf-8")
    return df


def check(condition, message):
    if not condition:
        raise AssertionError(message)


def close(a, b):
    return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-7, abs_tol=0.0)  # the CSVs keep 9 digits


def report(kstudy, archives, out):
    run = subprocess.run([kstudy, "report", *map(str, archives), "--out", str(out)], capture_output=True, text=True)
    print(run.stdout, run.stderr)
    check(run.returncode == 0, f"kstudy report exited {run.returncode}")
    return (out / "report.md").read_text()


def main():
    kstudy, timing, profile = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    prof = table(profile, "profile")
    samples = table(timing, "samples")
    accepted = samples[(samples.gate != "failed") & (samples.status == "ok") & (samples.trial >= 0)]  # schema 4
    with tempfile.TemporaryDirectory(prefix="kstudy_profile_report_") as tmp:
        out = Path(tmp) / "report"
        md = report(kstudy, [timing, profile], out)
        csv = pd.read_csv(out / "profile.csv", keep_default_na=True)
        check(len(csv) == len(prof), f"profile.csv has {len(csv)} rows, the archive {len(prof)}")
        check(set(csv.variant) == set(prof.variant), "variants differ")
        for _, r in csv.iterrows():
            p = prof[(prof.variant == r.variant) & (prof.launch == r.launch)]
            check(len(p) == 1, (r.variant, r.launch))
            p = p.iloc[0]
            gbps = (p.dram_bytes_read + p.dram_bytes_written) / p.profiled_duration_s / 1e9
            check(close(r.profiled_dram_GBps, gbps), (r.variant, r.launch, r.profiled_dram_GBps, gbps))
            spr = p.global_load_sectors / p.global_load_requests if p.global_load_requests > 0 else float("nan")
            check(close(r.sectors_per_load_request, spr), (r.variant, "sectors/request"))
            for c in ["dram_throughput_pct", "achieved_occupancy_pct", "theoretical_occupancy_pct"]:
                check(close(r[c], p[c]), (r.variant, c))
            check(int(r.registers_per_thread) == int(p.registers_per_thread), (r.variant, "registers"))
            # The measured median: device_events samples that passed the gate, never the profiled duration.
            s = accepted[(accepted.variant == r.variant) & (accepted.layout == r.layout) & (accepted.rows == r.rows)
                         & (accepted.features == r.features) & (accepted.timer == "device_events")].seconds
            if len(s):
                check(r.timing_timer == "device_events" and int(r.timing_n) == len(s) == 5, (r.variant, r.timing_n))
                check(math.isclose(r.median_s, s.median(), rel_tol=1e-7), (r.variant, r.median_s, s.median()))
                check(math.isclose(r.q1_s, s.quantile(0.25), rel_tol=1e-7), (r.variant, "q1"))
            else:
                check(math.isnan(r.median_s), (r.variant, "a median without timing samples"))
            if r.launch >= 0:
                check(not math.isclose(r.median_s, p.profiled_duration_s),
                      (r.variant, "median is the profiled duration"))
        composed = csv[csv.variant == "composed_feature_major@cuda"].sort_values("launch")
        check(list(composed.label) == ["kstudy::composed::standardize", "kstudy::composed::clip",
                                       "kstudy::composed::weight", "KokkosBlas::gemv[TPL_CUBLAS,float]",
                                       "kstudy::composed::threshold"], list(composed.label))
        check(composed.median_s.isna().all(), "composed has no timing in the fixture")

        by = pd.read_csv(out / "profile_by_variant.csv")
        kernels = dict(zip(by.variant, by.kernels))
        check(kernels == {"fused_cuda_feature_major@cuda": 1, "fused_cuda_row_major_tiled@cuda": 1,
                          "fused_kokkos_feature_major@cuda": 1, "composed_feature_major@cuda": 5,
                          "fused_kokkos_row_major@cuda": 0}, kernels)
        c = by[by.variant == "composed_feature_major@cuda"].iloc[0]
        k = prof[(prof.variant == "composed_feature_major@cuda") & (prof.launch >= 0)]
        bytes_ = (k.dram_bytes_read + k.dram_bytes_written).sum()
        check(close(c.profiled_dram_GBps, bytes_ / k.profiled_duration_s.sum() / 1e9), "composed GB/s")
        essential = 1048576 * 16 * 4 + 3 * 16 * 4 + 1048576 * 5
        check(close(c.dram_bytes_per_essential_byte, bytes_ / essential), "composed bytes per essential byte")
        check(c.dram_bytes_per_essential_byte > 4, "composed moves its intermediates through DRAM")
        longest = k.loc[k.profiled_duration_s.idxmax()]
        check(close(c.achieved_occupancy_pct, longest.achieved_occupancy_pct), "occupancy of the longest kernel")
        f = by[by.variant == "fused_cuda_feature_major@cuda"].iloc[0]
        check(close(f.measured_effective_GBps, essential / f.median_s / 1e9), "measured effective GB/s")
        skipped = by[by.variant == "fused_kokkos_row_major@cuda"].iloc[0]
        check(skipped.status.startswith("skipped:") and np.isnan(skipped.profiled_dram_GBps), "skipped variant")

        check("## Hardware counters (Nsight Compute)" in md, "no profile section in report.md")
        section = md.split("## Hardware counters (Nsight Compute)", 1)[1].split("\n## ", 1)[0]
        for v in kernels:
            check(f"| `{v}` | 1,048,576×16 |" in section, f"{v} missing from the section's table")
        check("Version 2025.3.1.0 (fixture)" in section, "ncu version not quoted")
        check("[`profile.csv`](profile.csv)" in section, "profile.csv not linked")

        # A profile archive alone: the counters, and no timing.
        alone = Path(tmp) / "alone"
        report(kstudy, [profile], alone)
        check(pd.read_csv(alone / "profile.csv").median_s.isna().all(), "a timing appeared from nowhere")
    print("profile report checks passed")


if __name__ == "__main__":
    main()
