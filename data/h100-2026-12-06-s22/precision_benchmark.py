#!/usr/bin/env python3
"""Issue 44's benchmark, session 22: `kstudy run quick` three ways on one H100 in one call (its fixed protocol,
20 trials x 3 replications, --precision 1%). Reads the archives the call returned and writes
precision_benchmark.csv (one row per summary series) and prints the table in README.md.
    precision_benchmark.py TIMES.txt ARCHIVE.h5...   (run from the repository root's data/h100-2026-12-06-s22)"""
import sys
from pathlib import Path

import h5py
import numpy as np
import pandas as pd

times = {}
for line in Path(sys.argv[1]).read_text().splitlines():
    words = line.split()
    times[words[0]] = dict(w.split("=", 1) for w in words[1:] if "=" in w and not w.startswith("card"))
rows = []
for path in sys.argv[2:]:
    run = Path(path).stem
    with h5py.File(path, "r") as f:
        commit = f.attrs["git_commit"]
        commit = commit.decode() if isinstance(commit, bytes) else str(commit)
        s = pd.DataFrame(f["/experiments/quick/summary"][()])
    for c in s.columns:
        if s[c].dtype == object:
            s[c] = s[c].str.decode("utf-8")
    s = s[s.samples > 0]
    s["half_width"] = np.maximum(s["median"] - s.interval_low, s.interval_high - s["median"]) / s["median"]
    s.insert(0, "run", run)
    s.insert(1, "commit", commit[:7])
    s.insert(2, "wall_s", float(times[run]["wall_s"]))
    rows.append(s[["run", "commit", "wall_s", "variant", "memory_kind", "timer", "rows", "features", "samples",
                   "median", "interval_low", "interval_high", "half_width", "stopped"]])
table = pd.concat(rows)
table.to_csv("precision_benchmark.csv", index=False, float_format="%.6g")
print("| run | wall s | series | within ±1% | median ± | widest ± | stopped |")
print("| --- | ---: | ---: | ---: | ---: | ---: | --- |")
for run, g in table.groupby("run", sort=False):
    met = (g.half_width <= 0.01).sum()
    reasons = ", ".join(f"{k} {v}" for k, v in sorted(g.stopped.value_counts().items()))
    print(f"| {run} | {g.wall_s.iloc[0]:.1f} | {len(g)} | {met} | {100 * g.half_width.median():.1f}% | "
          f"{100 * g.half_width.max():.1f}% | {reasons} |")
