#!/usr/bin/python3
"""Prints README's *Kokkos 3.4 vs 4.6* tables from one device call's two bundles (no number typed in).

    scripts/kokkos_versions_tables.py DIR_A DIR_B   (two builds of one Kokkos are labelled by folder)

Each DIR holds what scripts/device_kokkos_compare.sh wrote for one Kokkos build: bench.json (kstudy_bench,
resident, CUDA events, median of 7), profile.h5 (Nsight Compute counters of the Kokkos kernels) and
info.txt. Uses Debian's python3-h5py / python3-pandas (run with /usr/bin/python3).
"""
import json
import re
import sys
from pathlib import Path

import h5py
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kstudy_py.archive import ceiling_gbps, frame  # noqa: E402  (the archive reader's own dataset decoding)

SHAPES = ["1048576x16", "16777216x16", "262144x256"]



def kokkos_version(directory):
    match = re.search(r"kokkos_version\s*[:=]\s*\"?([0-9.]+)", (directory / "info.txt").read_text())
    return match.group(1) if match else directory.name


def bench_medians(directory):
    doc = json.loads((directory / "bench.json").read_text())
    rows = []
    for b in doc["benchmarks"]:
        if b.get("aggregate_name") == "median":
            name, shape = b["run_name"].split("/")[:2]
            if name.endswith("@cuda"):
                rows.append({"variant": name.removesuffix("@cuda"), "shape": shape, "us": b["real_time"]})
    roof = ceiling_gbps(doc["context"], "device_read")
    return pd.DataFrame(rows), roof


def profile_counters(directory):
    """Per variant and shape: registers, occupancy and DRAM throughput of its longest kernel."""
    path = directory / "profile.h5"
    if not path.exists():
        return pd.DataFrame()
    with h5py.File(path, "r") as f:
        frames = [frame(g["profile"]) for g in f["experiments"].values() if "profile" in g]
    p = pd.concat(frames, ignore_index=True)
    p = p[(p.status == "ok") & (p.launch >= 0)]
    p["shape"] = p.rows.astype(str) + "x" + p.features.astype(str)
    p["variant"] = p.variant.str.removesuffix("@cuda")
    longest = p.loc[p.groupby(["variant", "shape"]).profiled_duration_s.idxmax()]
    return longest[["variant", "shape", "registers_per_thread", "theoretical_occupancy_pct",
                    "achieved_occupancy_pct", "dram_throughput_pct"]]


def main():
    a, b = Path(sys.argv[1]), Path(sys.argv[2])
    va, vb = kokkos_version(a), kokkos_version(b)
    if va == vb:  # two builds of one Kokkos (e.g. before and after a kstudy change): name them by folder
        va, vb = a.name, b.name
    (ma, roof_a), (mb, roof_b) = bench_medians(a), bench_medians(b)
    print(f"Device read roof measured in each run: {roof_a:.0f} GB/s (Kokkos {va} build), "
          f"{roof_b:.0f} GB/s (Kokkos {vb} build)\n")
    both = ma.merge(mb, on=["variant", "shape"], suffixes=(f" {va}", f" {vb}"))
    both["ratio"] = both[f"us {vb}"] / both[f"us {va}"]
    cuda = both[both.variant.str.startswith("fused_cuda")].groupby("shape")[[f"us {va}", f"us {vb}"]].min()
    both = both.join(cuda, on="shape", rsuffix=" best CUDA")
    for v in (va, vb):
        both[f"x CUDA {v}"] = both[f"us {v}"] / both[f"us {v} best CUDA"]
    counters = {v: profile_counters(d) for v, d in ((va, a), (vb, b))}
    for shape in SHAPES:
        t = both[both["shape"] == shape].drop(columns=["shape"]).sort_values(f"us {va}")
        print(f"kstudy_bench, resident, CUDA events, median of 7, {shape}")
        print(t.drop(columns=[c for c in t.columns if c.endswith("best CUDA")]).round(3).to_string(index=False))
        print()
    for v, c in counters.items():
        if not c.empty:
            print(f"Nsight Compute, longest kernel per variant (Kokkos {v} build)")
            print(c.sort_values(["shape", "variant"]).round(1).to_string(index=False))
            print()


if __name__ == "__main__":
    main()
