#!/usr/bin/python3
"""`kstudy report`'s study-time section (scripts/kstudy_py/report/sections/study_time.py), in process, on the
committed H100 softmax archive of session 30 (data/h100-2026-12-07-s30/softmax_odd_widths_bff76f4.h5), every number
recomputed here from the raw HDF5 tables with h5py: the wall time is the health table's seconds over every (point,
replication); the timed regions are the samples' seconds on the host clock (CUDA events, which time the same calls,
and the energy timer's per-call seconds left out, as the archive schema's timer declarations say); the slowest unit
and its own timed seconds; the sentence and the headline quote them. A health table without wall times gives no row.

    tests/check_report_study_time.py REPOSITORY
Exit 77 (ctest: skipped) when this python lacks h5py, pandas, numpy or matplotlib.
"""
import sys
import tempfile
from pathlib import Path

from check_support import Cases, repository, require

h5py, np = require("h5py", "numpy", "pandas", "matplotlib")[:2]  # pandas, matplotlib: the report needs them
REPO = repository()
sys.dont_write_bytecode = True
sys.path.insert(0, str(REPO / "scripts"))
from kstudy_py import archive as A  # noqa: E402
from kstudy_py import report  # noqa: E402
from kstudy_py.report.sections import study_time as T  # noqa: E402

cases = Cases()
check = cases.check
ARCHIVE = REPO / "data/h100-2026-12-07-s30/softmax_odd_widths_bff76f4.h5"
NAME = "softmax_odd_widths"

check(set(T.NOT_OWN_REGIONS) == {"device_events", "energy"},
      f"the timers whose seconds are not a region of their own, from the schema: {T.NOT_OWN_REGIONS}")

with h5py.File(ARCHIVE, "r") as f:
    health = f[f"experiments/{NAME}/health"][()]
    samples = f[f"experiments/{NAME}/samples"][()]
wall = float(health["seconds"].sum())
own = (samples["trial"] >= 0) & ~np.isin(samples["timer"], [b"device_events", b"energy"])
timed = float(samples["seconds"][own].sum())
slowest = health[np.argmax(health["seconds"])]
slowest_own = own & (samples["point"] == slowest["point"]) & (samples["replication"] == slowest["replication"])

with tempfile.TemporaryDirectory() as scratch:
    archives = A.load([ARCHIVE])
    row = T.experiment_time(archives[0], archives[0].experiments[NAME])
    check(row is not None and row["units"] == len(health) == 12, f"12 (point, replication) units: {row}")
    check(abs(row["wall_s"] - wall) < 1e-9 and abs(wall - 435.944) < 0.01, f"wall {row['wall_s']} = {wall} s")
    check(abs(row["timed_s"] - timed) < 1e-9 and abs(timed - 1.0831) < 1e-3, f"timed {row['timed_s']} = {timed} s")
    check(row["slowest_point"] == "65,536×16384" and row["slowest_replication"] == int(slowest["replication"]) and
          abs(row["slowest_wall_s"] - float(slowest["seconds"])) < 1e-9 and
          abs(row["slowest_timed_s"] - float(samples["seconds"][slowest_own].sum())) < 1e-9,
          f"the slowest unit and its own timed seconds: {row}")
    report.build_report(archives, Path(scratch) / "out")
    text = (Path(scratch) / "out" / "report.md").read_text()
    check("their timed regions 1.1 s (0.25%)" in text and "12 (point, replication) units took 435.9 s" in text,
          "report.md quotes the experiment's wall and timed seconds")
    check("Study time: the timed regions took 1.1 s of the points' 435.9 s (0.25%) in 1 experiment." in text,
          "the summary's headline")
    check((Path(scratch) / "out" / "study_time.csv").exists(), "study_time.csv is written")

    experiment = archives[0].experiments[NAME]
    experiment.health = experiment.health.assign(seconds=0.0)
    check(T.experiment_time(archives[0], experiment) is None, "a health table without wall times gives no row")

cases.finish("study-time checks passed")
