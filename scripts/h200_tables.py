#!/usr/bin/python3
"""Prints the README's H200 tables from the archived files (no numbers typed in by hand).

    scripts/h200_tables.py [DATA_DIR=data/h200-2026-11-30-s3]

Uses Debian's python3-h5py / python3-pandas (run with /usr/bin/python3). Only gate-passed samples
count; medians per point; speedups against cpu_reference@openmp from the same archive.
"""
import json
import sys
from pathlib import Path

import h5py
import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kstudy_py.archive import ceiling_gbps  # noqa: E402  (schema 8 keys roofs by clock)

data = Path(sys.argv[1] if len(sys.argv) > 1 else "data/h200-2026-11-30-s3")
pd.set_option("display.width", 200)


def table(group):
    frame = pd.DataFrame(group[:])
    for column in frame.columns:
        if frame[column].dtype == object:
            frame[column] = frame[column].str.decode("utf-8")
    return frame


def bench():
    doc = json.loads((data / "bench.json").read_text())
    ctx = doc["context"]
    roof = ceiling_gbps(ctx, "device_read")
    host_roof = ceiling_gbps(ctx, "host_read")
    print(f"Ceilings measured in the same run: device read {roof:.0f} GB/s, device copy "
          f"{ceiling_gbps(ctx, 'device_copy'):.0f} GB/s, host read {host_roof:.1f} GB/s, "
          f"h2d pinned {ceiling_gbps(ctx, 'h2d_pinned'):.1f} GB/s, h2d pageable "
          f"{ceiling_gbps(ctx, 'h2d_pageable'):.1f} GB/s\n")
    rows = []
    for b in doc["benchmarks"]:
        if b.get("aggregate_name") != "median":
            continue
        name, shape = b["run_name"].split("/")[:2]
        device = name.endswith("@cuda")
        gbps = b["GB/s"]
        rows.append({"variant": name, "shape": shape, "time_us": b["real_time"], "GB/s": gbps,
                     "% of read roof": 100 * gbps / (roof if device else host_roof)})
    frame = pd.DataFrame(rows)
    for shape in ["1048576x16", "16777216x16", "262144x256"]:
        print(f"kstudy_bench, resident, median of 7 (CUDA events for @cuda), {shape}")
        print(frame[frame["shape"] == shape].drop(columns="shape").round(1).to_string(index=False), "\n")
    skipped = [b["run_name"] for b in doc["benchmarks"] if b.get("error_occurred")]
    if skipped:
        print("Rejected by the correctness gate (no time reported):", sorted(set(skipped)), "\n")


def medians(samples):
    # Schema 4 stores the verdict as `gate` (passed, failed, not_gated); the archives read here are schema 3.
    verdict_ok = samples.gate != "failed" if "gate" in samples.columns else samples.gate_passed == 1
    ok = samples[verdict_ok & (samples.status == "ok") & (samples.trial >= 0)]
    keys = ["variant", "rows", "features", "timer", "memory_kind"]
    g = ok.groupby(keys).seconds
    return pd.DataFrame({"median": g.median(), "q1": g.quantile(0.25), "q3": g.quantile(0.75), "n": g.size()}).reset_index()


def rows_sweep(f):
    m = medians(table(f["/experiments/rows_sweep/samples"]))
    cpu = m[(m.variant == "cpu_reference@openmp") & (m.timer == "host_wall")][["rows", "median", "q1", "q3"]]
    cpu = cpu.rename(columns={"median": "cpu", "q1": "cpu_q1", "q3": "cpu_q3"})
    m = m.merge(cpu, on="rows")
    m["speedup"] = m.cpu / m["median"]
    at = m[(m.rows == 1048576) & m.variant.str.endswith("@cuda")]
    print(f"rows_sweep at 1,048,576 x 16: cpu_reference@openmp {1e3 * cpu[cpu.rows == 1048576].cpu.iloc[0]:.2f} ms; "
          "speedup over it by timing boundary")
    pivot = at.pivot_table(index="variant", columns=["timer", "memory_kind"], values="speedup").round(1)
    print(pivot.to_string(), "\n")
    print("same, median milliseconds")
    print((at.pivot_table(index="variant", columns=["timer", "memory_kind"], values="median") * 1e3).round(3).to_string(), "\n")
    print("Crossover brackets (one-shot, first tested rows whose IQR lies wholly below the CPU's):")
    for (variant, memory), group in m[(m.timer == "one_shot")].groupby(["variant", "memory_kind"]):
        group = group.sort_values("rows")
        wins = group[group.q3 < group.cpu_q1]
        if wins.empty:
            print(f"  {variant:34s} {memory:8s} never within {group.rows.max():,} rows")
            continue
        first = wins.rows.iloc[0]
        previous = group[group.rows < first].rows.max()
        print(f"  {variant:34s} {memory:8s} ({previous if previous == previous else 0:,.0f}, {first:,}]")
    print()


def calibration(f):
    t = medians(table(f["/experiments/transfer_calibration/samples"]))
    samples = table(f["/experiments/transfer_calibration/samples"])
    t = samples[samples.status == "ok"].groupby(["bytes", "direction", "memory_kind"]).seconds.median().reset_index()
    t["GiB/s"] = t.bytes / t.seconds / 2**30
    print("transfer_calibration, GiB/s (median; allocation excluded)")
    print(t.pivot_table(index="bytes", columns=["direction", "memory_kind"], values="GiB/s").round(2).to_string(), "\n")
    launch = table(f["/experiments/launch_overhead/samples"]).groupby("variant").seconds.median() * 1e6
    print("launch_overhead, microseconds per launch (median)")
    print(launch.round(2).to_string(), "\n")
    tr = table(f["/experiments/layout_transpose/samples"]).groupby(["rows", "features"]).seconds.median() * 1e3
    print("layout_transpose, resident row-major -> feature-major conversion, ms (median)")
    print(tr.round(3).to_string(), "\n")


def cold():
    path = data / "cold.h5"
    if not path.exists():
        return
    with h5py.File(path, "r") as f:
        s = table(f["/experiments/cold_compile/samples"])
    s = s[s.status == "ok"]
    print("cold_compile (one fresh process per variant): first call vs the same process's second call, ms")
    first = s[s.timer == "cold"].groupby("variant").seconds.median() * 1e3
    warm = s[s.timer.isin(["resident_wall", "host_wall"])].groupby("variant").seconds.median() * 1e3
    print(pd.DataFrame({"first call": first, "second call": warm}).round(3).to_string())
    compile_ = s[s.timer == "compile"].groupby("variant").seconds.median() * 1e3
    print(compile_.round(3).to_string(), "\n")


def feature_sweep(f):
    if "/experiments/feature_sweep/samples" not in f:
        return
    m = medians(table(f["/experiments/feature_sweep/samples"]))
    m = m[m.timer == "device_events"]
    print("feature_sweep, device events, median microseconds (row-major / feature-major ratio per family)")
    print((m.pivot_table(index="variant", columns=["rows", "features"], values="median") * 1e6).round(1).to_string(), "\n")


bench()
# Layout of the session-2 dataset: the sweeps in sweeps.h5, the short experiments in study.h5.
sweeps = data / "sweeps.h5" if (data / "sweeps.h5").exists() else data / "study.h5"
with h5py.File(sweeps, "r") as f:
    rows_sweep(f)
    feature_sweep(f)
with h5py.File(data / "study.h5", "r") as f:
    calibration(f)
cold()
