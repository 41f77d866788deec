#!/usr/bin/python3
"""`kstudy report` on the committed CPU fixture archive, through the kstudy binary: checks the CSVs' contents
against numbers recomputed here from the archive's samples, that every figure report.md links is a PNG, and
report.md's structure (summary of sourced headlines first, grouped findings). The section registry and an
archive of another operation: check_report_sections.py.

usage: check_report.py KSTUDY FIXTURE.h5
Exit 77 (ctest: skipped) when this python lacks h5py, pandas, numpy or matplotlib.
"""
import math
import re
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

PNG = b"\x89PNG\r\n\x1a\n"
BRACKET = re.compile(r"^(never|\((\d+|none tested below), (\d+)\))$")


def samples(path, experiment):
    with h5py.File(path, "r") as f:
        df = pd.DataFrame(f[f"/experiments/{experiment}/samples"][:])
        definition = f[f"/experiments/{experiment}"].attrs["definition"]
    for c in df.columns:
        if df[c].dtype == object:
            df[c] = df[c].str.decode("utf-8")
    return df, definition


def accepted(df):
    return df[(df.gate_passed == 1) & (df.status == "ok") & (df.trial >= 0)]


def check(condition, message):
    if not condition:
        raise AssertionError(message)


def main():
    kstudy, fixture = sys.argv[1], Path(sys.argv[2])
    with tempfile.TemporaryDirectory(prefix="kstudy_report_") as tmp:
        out = Path(tmp) / "report"
        run = subprocess.run([kstudy, "report", str(fixture), "--out", str(out), "--shape", "1048576x16"],
                             capture_output=True, text=True)
        print(run.stdout, run.stderr)
        check(run.returncode == 0, f"kstudy report exited {run.returncode}")
        md = (out / "report.md").read_text()

        # Speedups: the CPU reference against itself is exactly 1; every speedup is CPU median / median, and
        # the medians are the samples' (recomputed here, independently of the report's code).
        sp = pd.read_csv(out / "speedups.csv")
        ref = sp[sp.variant == sp.baseline]
        check(len(ref) > 0 and np.allclose(ref.speedup, 1.0, rtol=0, atol=1e-12), ref.speedup.tolist())
        check(np.allclose(sp.speedup, sp.cpu_median / sp["median"], rtol=1e-9), "speedup != cpu_median / median")
        quick, _ = samples(fixture, "quick")
        q = accepted(quick)
        for _, r in sp[sp.experiment == "quick"].iterrows():
            s = q[(q.variant == r.variant) & (q.rows == r.rows) & (q.features == r.features) & (q.timer == r.timer)
                  & (q.memory_kind == r.memory_kind)].seconds
            check(len(s) == r.n, (r.variant, r.rows, len(s), r.n))
            check(math.isclose(s.median(), r["median"], rel_tol=1e-7), (r.variant, r.rows, s.median(), r["median"]))
            check(math.isclose(s.quantile(0.25), r.q1, rel_tol=1e-7)
                  and math.isclose(s.quantile(0.75), r.q3, rel_tol=1e-7), (r.variant, r.rows, "quartiles"))
        at = pd.read_csv(out / "speedup_1048576x16.csv")
        check(set(at.rows) == {1048576} and set(at.features) == {16}, "speedup_1048576x16.csv holds other shapes")
        check(at[at.variant == "cpu_reference@openmp"].speedup.tolist() == [1.0], "cpu_reference@openmp at 1Mx16 != 1")
        check(set(at.variant) == set(q[(q.rows == 1048576) & (q.features == 16)].variant), "variants at 1Mx16")

        # Launch overhead: one row per probe, with the archive's sample counts.
        launch, _ = samples(fixture, "launch_overhead")
        ov = pd.read_csv(out / "overhead.csv")
        check(set(ov["item"]) == set(launch.variant) == {"kokkos_for_1_sync", "kokkos_for_1000_queued"},
              set(ov["item"]))
        for _, r in ov.iterrows():
            s = accepted(launch)[accepted(launch).variant == r["item"]].seconds
            check(r.n == len(s) and math.isclose(r.median_us, 1e6 * s.median(), rel_tol=1e-7), (r["item"], r.n))

        # Transfer calibration: every size x direction x memory kind of the definition, with the failed samples
        # a CPU build records counted, and no bandwidth invented for them.
        transfer, definition = samples(fixture, "transfer_calibration")
        tr = pd.read_csv(out / "transfer.csv")
        import json
        d = json.loads(definition)
        expected = {(b, di, m) for b in d["sizes_bytes"] for di in d["directions"] for m in d["memory"]}
        check(set(zip(tr.bytes, tr.direction, tr.memory_kind)) == expected and len(tr) == len(expected),
              f"transfer rows {len(tr)} vs {len(expected)}")
        check((tr.n_ok + tr.n_failed).sum() == len(transfer), "transfer sample counts")
        check(((tr.n_ok == 0) == tr.GiB_per_s.isna()).all(), "GiB/s reported without ok samples")

        # Crossover brackets: format, and agreement with the IQR criterion on speedups.csv.
        cr = pd.read_csv(out / "crossover.csv", keep_default_na=False)
        check(len(cr) > 0, "no crossover rows")
        for _, r in cr.iterrows():
            m = BRACKET.match(str(r.bracket))
            check(m is not None, f"bracket {r.bracket!r}")
            g = sp[(sp.variant == r.variant) & (sp.timer == r.timer) & (sp.memory_kind == r.memory_kind) &
                   (sp.features == r.features) & (sp.experiment == r.experiment)].sort_values("rows")
            wins = g[g.q3 < g.cpu_q1]
            if r.bracket == "never":
                check(wins.empty, (r.variant, "never but wins"))
            else:
                first = int(wins.rows.iloc[0])
                below = g[g.rows < first].rows
                check(int(m.group(3)) == first, (r.variant, r.bracket, first))
                check(m.group(2) == (str(int(below.max())) if len(below) else "none tested below"),
                      (r.variant, r.bracket))

        # Layout: ratios and break-even reuses = transpose / (t_row - t_feature), "never" when row-major is as fast.
        lay = pd.read_csv(out / "layout.csv", keep_default_na=False)
        check(set(lay.features) >= {16, 64, 256}, "feature_small widths missing from layout.csv")
        for _, r in lay.iterrows():
            check(math.isclose(float(r.row_over_feature), r.t_row_s / r.t_feature_s, rel_tol=1e-6), "row/feature")
            if r.transpose_s == "":
                continue
            if r.t_row_s <= r.t_feature_s:
                check(r.break_even_reuses == "never", (r.row_variant, r.break_even_reuses))
            else:
                want = float(r.transpose_s) / (r.t_row_s - r.t_feature_s)
                check(math.isclose(float(r.break_even_reuses), want, rel_tol=2e-3),
                      (r.row_variant, r.break_even_reuses, want))
        check((lay.break_even_reuses != "").all(), "empty break-even cell")

        # report.md opens with a summary whose headlines each name the archive/experiment they come from, then
        # grouped findings (one layout finding, not one per variant), then where the samples come from.
        check(md.index("## Summary") < md.index("## Findings") < md.index("## Archives"), "report.md's opening order")
        summary = md.split("## Summary\n\n", 1)[1].split("\n\n", 1)[0].splitlines()
        check(len(summary) >= 3, summary)
        for line in summary:
            check("cpu_small/" in line or line.startswith("- GPU health: not monitored"),
                  f"headline without source: {line}")
        findings = md.split("## Findings\n", 1)[1].split("\n## ", 1)[0]
        check(findings.count("**Layout") == 1, "layout findings not grouped into one")

        # Best per regime: one experiment, every speedup against that experiment's CPU reference at that size.
        best = pd.read_csv(out / "best_per_regime.csv")
        check(len(best) > 0 and len(best[["archive", "experiment"]].drop_duplicates()) == 1, "best_per_regime mixes")
        for _, r in best.iterrows():
            same = sp[(sp.experiment == r.experiment) & (sp.rows == r.rows) & (sp.features == r.features)]
            check(math.isclose(r.cpu_median, same.cpu_median.iloc[0], rel_tol=1e-9),
                  (r["size"], "CPU of another experiment"))
            check(math.isclose(r["median"], same[same.boundary == r.boundary]["median"].min(), rel_tol=1e-9),
                  (r["size"], r.boundary, "not the experiment's fastest"))
            check(math.isclose(r.speedup, r.cpu_median / r["median"], rel_tol=1e-7), (r["size"], "speedup"))

        # Figures: every PNG report.md links exists and is a non-empty PNG; the CPU fixture has these three.
        figures = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md)
        check({"speedup_vs_rows.png", "roofline.png", "layout_ratio.png"} <= set(figures), figures)
        for name in figures:
            data = (out / name).read_bytes()
            check(data.startswith(PNG) and len(data) > 2000, f"{name} is not a PNG")
        for name in re.findall(r"\[`([^`]+\.csv)`\]", md):
            check((out / name).is_file(), f"{name} linked but missing")
        # Sections this archive cannot feed are skipped with a note, not silently dropped.
        check("## Block size\n\n*Skipped:" in md, "block size section not marked skipped")
        # GPU health: the schema-1 fixture has no health table, so throttling is unknown, and said so.
        check("GPU throttling unknown — not monitored (no health table (archive schema < 3))" in md, "health line")
        health = pd.read_csv(out / "gpu_health.csv")
        check((health.points_monitored == 0).all() and (health.throttled_samples == 0).all(), health.to_string())
        check("## Where the ratio goes: resident to one-shot\n\n*Skipped:" in md, "waterfall not marked skipped")
        # The seed comparison is always a section: a table, or skipped with the reason.
        check("## The seed's conclusions on this machine\n" in md, "seed comparison section missing")
        if (out / "seed_comparison.csv").is_file():
            seed = pd.read_csv(out / "seed_comparison.csv")
            check(list(seed.columns) == ["claim", "seed", "here", "verdict"] and len(seed) > 0, seed.columns.tolist())
        check("## Hardware counters (Nsight Compute)\n\n*Skipped:" in md, "profile section not marked skipped")

    # A python without Debian's packages gets a message naming them and exit 3.
    script = Path(__file__).resolve().parent.parent / "scripts" / "kstudy_report.py"
    bare = subprocess.run([sys.executable, "-S", str(script), "report", str(fixture), "--out", "/nonexistent"],
                          capture_output=True, text=True)
    check(bare.returncode == 3 and "python3-" in bare.stderr, (bare.returncode, bare.stderr))
    print("report checks passed")


if __name__ == "__main__":
    main()
