#!/usr/bin/python3
"""kstudy advise against a measurement: its predictions for the shapes of an `advise_check` archive, made from other
archives (the sweeps), beside that archive's medians, as a Markdown table with the error per prediction and a summary
per boundary. "Within" means the measured median lies inside the predicted quartiles, or the predicted median inside
the measured ones.

    scripts/advise_check.py ADVISE_CHECK.h5 ARCHIVE... > advise_check.md
"""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))
from kstudy_py import archive as A  # noqa: E402

MACHINE = "NVIDIA H200"


def predictions(archives, shape, memory):
    out = subprocess.run([sys.executable, str(REPO / "scripts" / "kstudy_report.py"), "advise", *archives,
                          "--shape", shape, "--layout", "feature-major", "--memory", memory, "--machine", MACHINE,
                          "--format", "json"], capture_output=True, text=True, check=True)
    return {v["variant"]: v for v in json.loads(out.stdout)["variants"]}


def measured(s, variant, rows, features, timer, memory):
    m = s[(s.variant == variant) & (s.rows == rows) & (s.features == features) & (s.timer == timer)]
    return m[m.memory_kind == memory] if timer == "one_shot" else m


def compare(check, archives):
    s = A.load([check])[0].experiments["advise_check"].samples
    s = s[(s.status == "ok") & (s.trial >= 0)]
    rows = []
    for r, f in sorted(set(zip(s.rows, s.features))):
        shape = f"{r}x{f}"
        for memory in ("pinned", "pageable"):
            for v, p in predictions(archives, shape, memory).items():
                for key in ("resident", "one_shot"):
                    if p.get(key) is None or (key == "resident" and memory == "pageable"):
                        continue
                    if key == "one_shot" and not p["on_device"]:
                        continue  # a host variant's one-shot is its resident time
                    timer = p[key]["timer"].split(" ")[0]
                    m = measured(s, v, r, f, timer, memory)
                    if m.empty:
                        continue
                    med = float(np.median(m.seconds))
                    q1, q3 = np.percentile(m.seconds, [25, 75])
                    pm, pq1, pq3 = p[key]["median"], p[key]["q1"], p[key]["q3"]
                    label = p[key]["timer"] if timer == "one_shot" else f"{p[key]['timer']} ({memory})"
                    rows.append(dict(shape=shape, timer=label, variant=v, predicted=pm, measured=med,
                                     error=pm / med - 1, within=(pq1 <= med <= pq3) or (q1 <= pm <= q3),
                                     spread=(pq3 - pq1) / pm))
    return rows


def main():
    rows = compare(sys.argv[1], sys.argv[2:])
    print("| shape | timer | variant | predicted | measured | error | within | predicted IQR / median |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for x in rows:
        within = "yes" if x["within"] else "no"
        print(f"| {x['shape']} | {x['timer']} | `{x['variant']}` | {x['predicted'] * 1e6:.1f} µs | "
              f"{x['measured'] * 1e6:.1f} µs | {x['error']:+.1%} | {within} | {x['spread']:.1%} |")
    print()
    groups = (("resident (device_events)", lambda t: t.startswith("device_events")),
              ("host variants (host_wall)", lambda t: t.startswith("host_wall")),
              ("one-shot pinned", lambda t: t == "one_shot (pinned)"),
              ("one-shot pageable", lambda t: t == "one_shot (pageable)"))
    for label, pick in groups:
        sel = [x for x in rows if pick(x["timer"])]
        if sel:
            e = np.array([x["error"] for x in sel])
            print(f"- {label}: {len(sel)} predictions, median error {np.median(e):+.1%}, median |error| "
                  f"{np.median(abs(e)):.1%}, max |error| {abs(e).max():.1%}, within {sum(x['within'] for x in sel)}"
                  f" of {len(sel)}")


if __name__ == "__main__":
    main()
