#!/usr/bin/python3
"""`kstudy compare BASE NEW --gate 5%` through the kstudy binary.

Synthetic archives (tests/synthetic_archive.py), one point per case, 16 samples a side unless said:
  same distribution, tight (1% spread)               -> SAME
  10% slower, tight                                   -> SLOWER, exit 4, in --gate-json
  20% faster, tight                                   -> FASTER, exit 0
  same median, wide (30% spread)                      -> UNCERTAIN (IQR too wide for the gate)
  4 samples a side                                    -> UNCERTAIN (too few samples)
  8% slower, but the base's two replications differ by 20%  -> UNCERTAIN (run-to-run noise)
and bad --gate values, --gate with three archives, --gate-json without --gate: exit 2 in one line;
without --gate the output is the plain comparison.

With `--calibrate`, also real runs of this build (tests/gate_calibration.json: four serial variants, one
point, 2 x 12 samples): the same build twice, and once with one variant slowed three times
(KSTUDY_INJECT_FAULT=VARIANT:slow=3). The slowed variant must be SLOWER (exit 4), within three base +
slowed pairs. The false alarms (SLOWER or
FASTER between runs of one build) are counted and printed, not bounded: two runs of one build on a shared
machine can differ by more than any of their samples say (a neighbour's compile job during one run), which no
test on those samples can tell from a change, and a bound would make this test fail with the load.
Measured on the 2-core development VM at load average 9 to 10 (other builds running), this experiment run four
times plus once with a variant slowed 1.5x, 36 same-build verdicts: 13 false alarms (36%, all FASTER but one),
12 of them against one run that was 25-35% slower throughout, both replications alike (a load burst no
within-run statistic can see); without that run 1 false alarm in 21 (5%). No SAME at all: at that load the
run-to-run noise is wider than a 5% gate, so the rest were UNCERTAIN. The 1.5x slowdown was SLOWER in 3 of
4 comparisons (UNCERTAIN against the slow run). On 2 CPU cores at 4099 and 65536 rows, openmp variants (2
threads on 2 busy cores) were far worse: medians moved 3 to 30x between runs.

usage: check_compare_gate.py KSTUDY [--calibrate EXPERIMENT.json]
Exit 77 (ctest: skipped) when this python lacks h5py, numpy, pandas or scipy.
"""
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

try:
    import h5py  # noqa: F401
    import numpy  # noqa: F401
    import pandas  # noqa: F401
    import scipy  # noqa: F401
except ImportError as error:
    print(f"skipped: {error}")
    sys.exit(77)

sys.path.insert(0, str(Path(__file__).resolve().parent))
import synthetic_archive as S  # noqa: E402

SLOWED = "fused_kokkos_row_major@serial"


def check(condition, message):
    if not condition:
        raise AssertionError(message)


def compare(*args, quiet=False):
    run = subprocess.run([KSTUDY, "compare", *map(str, args)], capture_output=True, text=True)
    if not quiet:
        print(f"$ kstudy compare {' '.join(map(str, args))} -> {run.returncode}\n"
              f"{run.stdout[-3000:]}{run.stderr[-1000:]}")
    check("Traceback" not in run.stderr, "a Python traceback reached the user")
    return run


def one_line_error(run, text):
    lines = run.stderr.strip().splitlines()
    check(run.returncode == 2 and len(lines) == 1 and text in lines[0],
          f"expected exit 2 and one line naming '{text}', got {run.returncode}: {run.stderr!r}")


def verdicts_of(path):
    document = json.loads(Path(path).read_text())
    return document, {r["variant"]: r for r in document["verdicts"]}


def check_synthetic(tmp):
    def point(name):
        return (name, 4096, 16, "host_wall")

    base = {point("same"): S.lognormal(1e-3, 0.01, 16, 1),
            point("slower"): S.lognormal(1e-3, 0.01, 16, 2),
            point("faster"): S.lognormal(1e-3, 0.01, 16, 3),
            point("wide"): S.lognormal(1e-3, 0.3, 16, 4),
            point("few"): S.lognormal(1e-3, 0.01, 4, 5),
            point("noisy_runs"): [S.lognormal(1e-3, 0.01, 8, 6), S.lognormal(1.2e-3, 0.01, 8, 7)]}
    new = {point("same"): S.lognormal(1e-3, 0.01, 16, 11),
           point("slower"): S.lognormal(1.1e-3, 0.01, 16, 12),
           point("faster"): S.lognormal(0.8e-3, 0.01, 16, 13),
           point("wide"): S.lognormal(1e-3, 0.3, 16, 14),
           point("few"): S.lognormal(1e-3, 0.01, 4, 15),
           point("noisy_runs"): [S.lognormal(1.19e-3, 0.01, 8, 16), S.lognormal(1.19e-3, 0.01, 8, 17)]}
    a, b = S.write(tmp / "base.h5", base), S.write(tmp / "new.h5", new)
    out = tmp / "gate.json"
    run = compare(a, b, "--gate", "5%", "--gate-json", out)
    check(run.returncode == 4, "a SLOWER point did not exit 4")
    check(run.stdout.strip().splitlines()[-1].startswith("REGRESSION: gate 5%"), "no one-line summary last")
    document, v = verdicts_of(out)
    expected = {"same": "SAME", "slower": "SLOWER", "faster": "FASTER", "wide": "UNCERTAIN", "few": "UNCERTAIN",
                "noisy_runs": "UNCERTAIN"}
    check({k: v[k]["verdict"] for k in expected} == expected, f"verdicts: { {k: v[k]['verdict'] for k in v} }")
    check("too few" in v["few"]["reason"] and "IQR too wide" in v["wide"]["reason"]
          and "replications disagree" in v["noisy_runs"]["reason"], "UNCERTAIN without the reason")
    check(document["regression"] and document["counts"]["SLOWER"] == 1 and document["gate"] == 0.05
          and document["alpha"] == 0.01, "gate JSON summary wrong")
    check(abs(v["slower"]["ratio"] - 1.1) < 0.02, "ratio is not median new / median base")
    # Same archives in the other order: slower and faster swap; a fraction is a gate too.
    run = compare(b, a, "--gate", "0.05", "--gate-json", out)
    document, v = verdicts_of(out)
    check(run.returncode == 4 and v["slower"]["verdict"] == "FASTER" and v["faster"]["verdict"] == "SLOWER"
          and v["same"]["verdict"] == "SAME", "reversed comparison")
    # A gate wider than the change: SAME, not SLOWER.
    compare(a, b, "--gate", "15%", "--gate-json", out, quiet=True)
    check(verdicts_of(out)[1]["slower"]["verdict"] == "SAME", "a 15% gate did not pass a 10% change")
    # The sample minimum is an option.
    compare(a, b, "--gate", "5%", "--min-samples", "4", "--gate-json", out, quiet=True)
    check("too few" not in verdicts_of(out)[1]["few"]["reason"], "--min-samples ignored")
    plain = compare(a, b)
    check(plain.returncode == 0 and plain.stdout.startswith("Aligned on") and "SLOWER" not in plain.stdout,
          "compare without --gate changed")
    for bad in ("5", "five", "-5%", "100%"):
        one_line_error(compare(a, b, f"--gate={bad}", quiet=True), "--gate")
    one_line_error(compare(a, b, a, "--gate", "5%", quiet=True), "exactly two archives")
    one_line_error(compare(a, b, "--gate-json", out, quiet=True), "go with --gate")
    one_line_error(compare(a, b, "--gate", "5%", "--alpha", "2", quiet=True), "--alpha")
    run = compare(a, b, "--gate", "5%", "--gate-json", tmp / "no" / "dir.json", quiet=True)
    check(run.returncode == 2 and "cannot write --gate-json" in run.stderr.strip().splitlines()[-1],
          "an unwritable --gate-json was not reported")


def run_study(experiment, out, fault=None):
    env = dict(os.environ, OMP_PROC_BIND="false", OMP_NUM_THREADS="1")
    env.pop("KSTUDY_INJECT_FAULT", None)
    if fault:
        env["KSTUDY_INJECT_FAULT"] = fault
    run = subprocess.run([KSTUDY, "run", experiment, "--out", out, "-q"], capture_output=True, text=True, env=env)
    check(run.returncode == 0, f"kstudy run failed ({run.returncode}): {run.stderr[-2000:]}")
    return out


def check_calibration(tmp, experiment):
    first = run_study(experiment, tmp / "first.h5")
    second = run_study(experiment, tmp / "second.h5")
    same_build = []
    out = tmp / "cal.json"
    compare(first, second, "--gate", "5%", "--gate-json", out)
    same_build += verdicts_of(out)[0]["verdicts"]
    # A load burst on a shared CI machine can widen one run's IQR, or split its two replications, until the
    # gate rightly says UNCERTAIN; the slowed variant must then never read SAME or FASTER, and a re-run (up to
    # three) must catch it. The burst can hit the base as well as the slowed run (the CI run of 78d787f
    # had the first run's replications 33-70% apart, so three slowed runs against it all read UNCERTAIN): each
    # re-run pairs a fresh base with a fresh slowed run, back to back.
    base = second
    for attempt in range(1, 4):
        if attempt > 1:
            base = run_study(experiment, tmp / f"base{attempt}.h5")
        slowed = run_study(experiment, tmp / f"slowed{attempt}.h5", f"{SLOWED}:slow=3")
        run = compare(base, slowed, "--gate", "5%", "--gate-json", out)
        document, v = verdicts_of(out)
        same_build += [r for r in document["verdicts"] if r["variant"] != SLOWED]
        check(v[SLOWED]["verdict"] in ("SLOWER", "UNCERTAIN"),
              f"the variant slowed 3x read {v[SLOWED]['verdict']} ({v[SLOWED]['reason']})")
        if v[SLOWED]["verdict"] == "SLOWER":
            break
        print(f"attempt {attempt}: the slowed variant read UNCERTAIN ({v[SLOWED]['reason']}); running it again")
    false_alarms = [r for r in same_build if r["verdict"] in ("SLOWER", "FASTER")]
    print(f"calibration: {len(false_alarms)} false alarms in {len(same_build)} same-build verdicts: "
          + ", ".join(f"{r['variant']} {r['verdict']} x{r['ratio']:.3f}" for r in false_alarms))
    check(v[SLOWED]["verdict"] == "SLOWER" and run.returncode == 4,
          f"the variant slowed 3x was not caught in {attempt} run(s): {v[SLOWED]['verdict']} ({v[SLOWED]['reason']})")


def main(argv):
    with tempfile.TemporaryDirectory(prefix="kstudy_gate_") as d:
        tmp = Path(d)
        check_synthetic(tmp)
        if "--calibrate" in argv:
            check_calibration(tmp, argv[argv.index("--calibrate") + 1])
    print("compare --gate: ok")
    return 0


if __name__ == "__main__":
    KSTUDY = sys.argv[1]
    sys.exit(main(sys.argv[2:]))
