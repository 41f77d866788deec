#!/usr/bin/python3
"""`kstudy advise` through the kstudy binary, on the committed H200 archives:

  measured      at a measured shape every prediction is that point's median, quartiles and all
  between       between two measured shapes (along rows; and across shapes in essential bytes) each prediction
                lies between the two measurements it was drawn from, and says which points it used
  per call      (one-shot + (reuse - 1) x resident) / reuse, ranked by it; a variant in the other layout pays
                the measured conversion; the transfer and layout break-even lines are there
  outside       beyond the measured shapes: exit 5, no variant ranked, the experiment that would measure it
  refusals      another machine's archives without --machine / --any-machine, a bad shape, an operation not in
                the archives, --reuse 0: exit 2 and one line naming the problem
  lab           a lab operation (softmax, LayerNorm) picks a rung at an unmeasured column count

usage: check_advise.py KSTUDY SOURCE_DIR
Exit 77 (ctest: skipped) when this python lacks h5py, numpy, pandas or scipy.
"""
import json
import subprocess
import sys
from pathlib import Path

from check_support import Cases, require

np = require("h5py", "numpy", "pandas", "scipy")[1]  # h5py, pandas, scipy: the archive reader needs them
kstudy, source = sys.argv[1], Path(sys.argv[2])
sys.path.insert(0, str(source / "scripts"))
from kstudy_py import archive  # noqa: E402

QUICK = source / "data/h200-2026-12-01-s8/quick.h5"  # scoring at 4099, 262144, 1048576 rows x 16
LAB = source / "data/h200-2026-12-01-s9/lab.h5"  # softmax, LayerNorm, ... at 65536 rows
STUDY = source / "data/h200-2026-12-02-s14/study.h5"  # the layout conversion (layout_transpose)
SWEEPS = source / "data/h200-2026-12-02-s14/sweeps.h5"  # scoring rows and features sweeps
cases = Cases()
check = cases.check


def advise(*args, expect=0):
    out = subprocess.run([kstudy, "advise", *map(str, args)], capture_output=True, text=True)
    if out.returncode != expect:
        check(False, f"advise {' '.join(map(str, args))}: exit {out.returncode}, expected {expect}: {out.stderr}")
    return out


def advise_json(*args, expect=0):
    out = advise(*args, "--format", "json", expect=expect)
    return json.loads(out.stdout) if out.stdout.strip() else None


def medians(path, experiment):
    e = archive.Archive(path).experiments[experiment]
    s = e.accepted()
    return s


def quartiles(seconds):
    return float(np.median(seconds)), float(np.quantile(seconds, 0.25)), float(np.quantile(seconds, 0.75))


def close(a, b):
    return abs(a - b) <= 1e-12 + 1e-9 * abs(b)


h200 = ["--machine", "NVIDIA H200"]

# --- measured -------------------------------------------------------------------------------------------------------
samples = medians(QUICK, "quick")
r = advise_json(QUICK, "--shape", "1048576x16", "--operation", "scoring", *h200)
ranked = [v for v in r["variants"] if v.get("rank")]
check(len(ranked) == 19, f"every scoring variant is ranked at a measured shape ({len(ranked)} of 19)")
exact = 0
for v in ranked:
    timer = v["resident"]["timer"]
    s = samples[(samples.variant == v["variant"]) & (samples.timer == timer) & (samples.rows == 1048576)]
    m, q1, q3 = quartiles(s.seconds)
    exact += (v["resident"]["basis"] == "measured" and close(v["resident"]["median"], m)
              and close(v["resident"]["q1"], q1) and close(v["resident"]["q3"], q3))
check(exact == len(ranked), f"a measured shape's prediction is its median and quartiles ({exact} of {len(ranked)})")
medians_per_call = [v["per_call"]["median"] for v in ranked]
check(medians_per_call == sorted(medians_per_call), "ranked by time per call")
one = next(v for v in ranked if v["variant"] == "fused_cuda_row_major_tiled@cuda")
s = samples[(samples.variant == one["variant"]) & (samples.rows == 1048576) & (samples.timer == "one_shot")
            & (samples.memory_kind == "pageable")]
one_shot_median = float(np.median(s.seconds))
check(close(one["one_shot"]["median"], one_shot_median) and close(one["per_call"]["median"], one_shot_median),
      "reuse 1: the time per call is the pageable one-shot median")
r20 = advise_json(QUICK, "--shape", "1048576x16", "--operation", "scoring", "--reuse", "20", "--memory", "pinned",
                  *h200)
one = next(v for v in r20["variants"] if v["variant"] == "fused_cuda_row_major_tiled@cuda")
check(close(one["per_call"]["median"], (one["one_shot"]["median"] + 19 * one["resident"]["median"]) / 20)
      and one["one_shot"]["timer"] == "one_shot (pinned)",
      "reuse 20, pinned: (one-shot + 19 x resident) / 20 from the pinned one-shot")

# --- between --------------------------------------------------------------------------------------------------------
r = advise_json(QUICK, "--shape", "500000x16", "--operation", "scoring", *h200)
inside = 0
ranked = [v for v in r["variants"] if v.get("rank")]
for v in ranked:
    timer = v["resident"]["timer"]
    s = samples[(samples.variant == v["variant"]) & (samples.timer == timer)]
    lo = float(np.median(s[s.rows == 262144].seconds))
    hi = float(np.median(s[s.rows == 1048576].seconds))
    inside += (min(lo, hi) <= v["resident"]["median"] <= max(lo, hi)
               and v["resident"]["points"] == ["262144x16", "1048576x16"]
               and "along one axis" in v["resident"]["basis"])
check(ranked and inside == len(ranked),
      f"500000 rows: every prediction lies between the 262144 and 1048576 rows medians it names ({inside})")
r = advise_json(SWEEPS, STUDY, "--shape", "3000000x48", "--operation", "scoring", "--layout", "row-major",
                "--reuse", "20", *h200)
ranked = [v for v in r["variants"] if v.get("rank")]
across = [v for v in ranked if "across shapes" in v["resident"]["basis"]]
check(len(across) == len(ranked) > 0, f"3000000x48 (not on a measured line): interpolated across shapes "
                                      f"({len(across)} of {len(ranked)})")
converted = [v for v in ranked if v["conversion"]]
check(converted and all(v["layout"] == "feature_major" for v in converted)
      and all(not v["conversion"].get("outside") for v in converted),
      "row-major data: the feature-major device variants pay the measured conversion")
check(r["transfer"] is not None and "verdict" in r["transfer"], "a transfer verdict: " +
      (r["transfer"] or {}).get("verdict", "none"))
check(r["layout_break_even"] is not None and "verdict" in r["layout_break_even"],
      "a layout break-even: " + (r["layout_break_even"] or {}).get("verdict", "none"))
text = advise(SWEEPS, STUDY, "--shape", "3000000x48", "--operation", "scoring", "--layout", "row-major",
              "--reuse", "20", *h200).stdout
check("transfer:" in text and "layout:" in text and "rank" in text, "the text answer has the table, transfer and "
                                                                    "layout lines")

# --- outside --------------------------------------------------------------------------------------------------------
out = advise(QUICK, "--shape", "3000000x16", "--operation", "scoring", *h200, expect=5)
check('"kind": "sweep"' in out.stdout and "outside" in out.stderr and "outside the measured" in out.stdout,
      "3000000x16 beyond the measured rows: exit 5, the reason and the experiment that would measure it")

# --- refusals -------------------------------------------------------------------------------------------------------
for args, what, needle in [
        (["--shape", "1048576x16", "--operation", "scoring", "--machine", "AMD MI300X"], "another machine",
         "not on the machine asked for"),
        (["--shape", "1048576y16", "--operation", "scoring", *h200], "a bad shape", "--shape"),
        (["--shape", "1048576x16", "--operation", "gemm", *h200], "an operation not in the archives",
         "--operation gemm"),
        (["--shape", "1048576x16", "--operation", "scoring", "--reuse", "0", *h200], "--reuse 0", "--reuse 0"),
        (["--shape", "1048576x16", *h200], "several operations, none named", "--operation")]:
    out = advise(QUICK, *args, expect=2)
    lines = out.stderr.strip().splitlines()
    check(len(lines) == 1 and needle in out.stderr and not out.stdout, f"refused: {what}: {out.stderr.strip()}")
r = advise_json(QUICK, "--shape", "1048576x16", "--operation", "scoring", "--any-machine")
check(r is not None and r["machine"] and any(v.get("rank") for v in r["variants"]), "--any-machine takes them")

# --- lab operations -------------------------------------------------------------------------------------------------
for operation in ("softmax", "layernorm"):
    r = advise_json(LAB, "--shape", "65536x3000", "--operation", operation, *h200)
    ranked = [v for v in r["variants"] if v.get("rank")]
    check(ranked and all("along one axis" in v["resident"]["basis"] for v in ranked),
          f"{operation} at 65536x3000 (between measured column counts): {ranked[0]['variant'] if ranked else 'none'}"
          " ranked first")

cases.finish("check_advise.py: every case passed")
