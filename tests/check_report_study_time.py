#!/usr/bin/python3
"""`kstudy report`'s study-time section (scripts/kstudy_py/report/sections/study_time.py), in process, on the
committed H100 softmax archive of session 30 (data/h100-2026-12-07-s30/softmax_odd_widths_bff76f4.h5), every number
recomputed here from the raw HDF5 tables with h5py: the wall time is the health table's seconds over every (point,
replication); the timed regions are the samples' seconds on the host clock (CUDA events, which time the same calls,
and the energy timer's per-call seconds left out, as the archive schema's timer declarations say); the slowest unit
and its own timed seconds; the sentence and the headline quote them. A health table without wall times gives no row.

With a kstudy binary, also a fresh two-replication sweep (schema 14): every health row times every point phase, the
phases are not negative and sum to no more than the row's wall time, the trials phase holds the unit's timed regions,
a fresh process makes its first point's inputs and reference, only the first replication runs the attribution pass,
and the report splits the wall time by phase with the archive's sums.

    tests/check_report_study_time.py REPOSITORY [KSTUDY]
Exit 77 (ctest: skipped) when this python lacks h5py, pandas, numpy or matplotlib.
"""
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from check_support import Cases, repository, require

h5py, np, pd = require("h5py", "numpy", "pandas", "matplotlib")[:3]  # matplotlib: the report needs it
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


def check_fresh_sweep(kstudy, scratch):
    """A two-replication sweep of a multi-kernel (attributed) variant and a single-kernel one at two points."""
    definition = {"name": "phases", "description": "point phases", "kind": "sweep", "operation": "scoring",
                  "rows": [4099, 65536], "features": [16], "variants": PHASE_VARIANTS, "timers": ["host_wall"],
                  "protocol": {"warmups": 1, "trials": 3, "replications": 2, "seed": 7, "threads": 2}}
    spec, path = scratch / "phases.json", scratch / "phases.h5"
    spec.write_text(json.dumps(definition))
    run = subprocess.run([kstudy, "run", str(spec), "--out", str(path)], capture_output=True, text=True,
                         env={**os.environ, "OMP_NUM_THREADS": "2", "OMP_PROC_BIND": "false"})
    if not check(run.returncode == 0, f"kstudy run exited {run.returncode}: {run.stderr[-1500:]}"):
        return
    columns = [p["column"] for p in A.PHASES.values()]
    with h5py.File(path, "r") as f:
        health = f["experiments/phases/health"][()]
        samples = f["experiments/phases/samples"][()]
    check(len(health) == 4, f"4 (point, replication) units: {len(health)}")
    phases = np.stack([health[c] for c in columns], axis=1)
    check(np.isfinite(phases).all() and (phases >= 0).all(), f"every phase of every unit timed: {phases}")
    check((phases.sum(axis=1) <= health["seconds"] + 1e-6).all(),
          f"the phases sum to no more than the wall time: {phases.sum(axis=1)} vs {health['seconds']}")
    for h in health:
        own = (samples["point"] == h["point"]) & (samples["replication"] == h["replication"]) & (samples["trial"] >= 0)
        check(h["trials_seconds"] >= samples["seconds"][own].sum(),
              f"unit ({h['point']}, {h['replication']}): trials {h['trials_seconds']} s hold the timed regions "
              f"{samples['seconds'][own].sum()} s")
        check(h["inputs_seconds"] > 0 and h["reference_seconds"] > 0,
              f"unit ({h['point']}, {h['replication']}): a new point makes its inputs and reference")
        check((h["attribution_seconds"] > 0) == (h["replication"] == 0),
              f"unit ({h['point']}, {h['replication']}): attribution {h['attribution_seconds']} s, first replication "
              "only")
    archives = A.load([path])
    row = T.experiment_time(archives[0], archives[0].experiments["phases"])
    for p in A.PHASES.values():
        check(abs(row[f"{p['name']}_s"] - health[p["column"]].sum()) < 1e-9, f"{p['name']}: the archive's sum")
    check(abs(row["other_s"] - (health["seconds"].sum() - phases.sum())) < 1e-9, "other: the wall time's rest")
    report.build_report(archives, scratch / "fresh")
    text = (scratch / "fresh" / "report.md").read_text()
    check("; by phase: inputs " in text and ", other " in text and "Study time by phase: " in text,
          "the report splits the fresh sweep's wall time by phase")
    units = pd.read_csv(scratch / "fresh" / "study_time_units.csv")
    check(len(units) == 4 and abs(units.trials_s.sum() - health["trials_seconds"].sum()) < 1e-9
          and abs(units.timed_s.sum() - row["timed_s"]) < 1e-9 and (units.attempts == 1).all(),
          f"study_time_units.csv: a row per point run with its phases and timed seconds: {units.to_dict('records')}")


# The scoring operation's CPU reference (one kernel) and a composed variant (several: an attribution pass).
PHASE_VARIANTS = ["cpu_reference@openmp", "composed_row_major@openmp"]
if len(sys.argv) > 2:
    with tempfile.TemporaryDirectory() as scratch:
        check_fresh_sweep(sys.argv[2], Path(scratch))

cases.finish("study-time checks passed")
