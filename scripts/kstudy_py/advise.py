"""kstudy advise: a decision for the user's own shape, from archives.

    kstudy advise ARCHIVE... --shape 3000000x48 [--operation scoring] [--layout row-major|feature-major]
                  [--memory pageable|pinned] [--reuse 20] [--machine NAME | --any-machine] [--format text|json]

For every variant of the operation measured in the archives it predicts, at the shape asked for, the resident time
per call, the one-shot time (upload + call + download from the memory kind asked for) and the time per call when one
upload serves --reuse calls: (one-shot + (reuse - 1) x resident) / reuse. A variant that wants the other layout also
pays the measured layout conversion (the `layout_conversion` kind's samples) once per upload.

How a time is predicted (never extrapolated):
  - the shape was measured: the samples there (median, quartiles);
  - measured points on both sides along one axis, the other axes equal: linear between the two nearest, in the
    operation's bytes (along one axis the bytes model is affine, so this is the same as linear in the axis);
  - otherwise linear in essential bytes between the nearest measured points below and above the shape's bytes
    (the bytes model fitted exactly to the archive's own per-point bytes: c0 + c1 r + c2 f + c3 r f, and depth
    terms where depth varies): said as "across shapes", since the points have another aspect ratio;
  - outside the measured bytes: no prediction; the experiment that would measure it is printed.
The quartiles are interpolated with the same weights; a combined time (one-shot, per call) combines the quartiles
term by term, which is wider than the true spread when the terms vary independently.
"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pandas as pd

from . import archive

DEVICE_BACKENDS = ("cuda", "hip", "sycl", "openmptarget")
RESIDENT_TIMERS = ("device_events", "resident_wall", "host_wall")  # preferred first
CONVERSION_VARIANT = "convert_to_feature_major"
LAYOUTS = {"row-major": "row_major", "feature-major": "feature_major"}
EXIT_REFUSED = 2


class Refused(Exception):
    pass


# --- the user's question --------------------------------------------------------------------------------------------

def parse_shape(text):
    try:
        dims = [int(x) for x in text.lower().split("x")]
    except ValueError:
        raise Refused(f"--shape {text!r}: expected positive integers separated by 'x', e.g. 3000000x48")
    if not 1 <= len(dims) <= 3 or min(dims) < 1:
        raise Refused(f"--shape {text!r}: expected one to three positive extents, e.g. 3000000x48")
    dims += [1] * (3 - len(dims))
    return tuple(dims)  # (rows, features, depth) as the samples table names the axes


def local_machine():
    """The GPU's name where nvidia-smi answers, else the CPU model: what the archives' platform() reports."""
    if shutil.which("nvidia-smi"):
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                                 text=True, timeout=20)
            if out.returncode == 0 and out.stdout.strip():
                return out.stdout.strip().splitlines()[0]
        except (OSError, subprocess.TimeoutExpired):
            pass
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return os.uname().machine


# --- the measurements -----------------------------------------------------------------------------------------------

def is_device(variant):
    return archive.backend(variant) in DEVICE_BACKENDS


def layout_family(layout):
    """A padded row-major variant takes row-major data (the upload pads the pitch)."""
    return "row_major" if layout in ("row_major", "padded_row_major") else layout


class Measurements:
    """Accepted samples of one operation (and the layout conversion), with the bytes model of its points."""

    def __init__(self, archives, operation):
        frames, conversions, point_bytes = [], [], {}
        self.axes, self.operations, self.sources = None, set(), []
        for a in archives:
            used = False
            for e in a.experiments.values():
                s = e.accepted()
                if s.empty:
                    continue
                if e.kind == "layout_conversion":
                    conversions.append(s[s.variant == CONVERSION_VARIANT])
                    used = True
                    continue
                ops = e.variant_operations()
                self.operations.update(op for op, _ in ops.values() if op)
                mine = [v for v, (op, _) in ops.items() if op == operation]
                if not mine:
                    continue
                s = s[s.variant.isin(mine)]
                if s.empty:
                    continue
                frames.append(s)
                used = True
                if self.axes is None:
                    self.axes = list(e.axes)
                if len(e.variants) and "essential_bytes" in e.variants:
                    v = e.variants[e.variants.operation == operation]
                    depth = v.depth if "depth" in v else pd.Series(1, index=v.index)
                    for r, f, d, b in zip(v.rows, v.features, depth, v.essential_bytes):
                        point_bytes[(int(r), int(f), int(d))] = float(b)
                elif operation == archive.LEGACY_OPERATION:
                    for r, f, d in s[list(archive.EXTENTS)].drop_duplicates().itertuples(index=False):
                        point_bytes[(int(r), int(f), int(d))] = float(archive.essential_bytes(int(r), int(f)))
            if used:
                self.sources.append(a)
        self.samples = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
        self.conversion = pd.concat(conversions, ignore_index=True) if conversions else pd.DataFrame()
        for t in (self.samples, self.conversion):
            if len(t):
                if "depth" not in t:
                    t["depth"] = 1
                t["depth"] = t["depth"].fillna(1).astype(int)
        self.point_bytes = point_bytes
        self.bytes_model = fit_bytes_model(point_bytes)

    def bytes_at(self, point):
        if point in self.point_bytes:
            return self.point_bytes[point]
        return None if self.bytes_model is None else self.bytes_model(point)


def model_terms(point, with_depth):
    r, f, d = (float(x) for x in point)
    terms = [1.0, r, f, r * f]
    return terms + [d, r * d, f * d, r * f * d] if with_depth else terms


def fit_bytes_model(point_bytes):
    """The operation's essential bytes as c0 + c1 r + c2 f + c3 r f (+ depth terms), fitted to the archive's own
    per-point bytes; None unless the fit reproduces every point (then it is the model, not an approximation)."""
    if not point_bytes:
        return None
    points = list(point_bytes)
    with_depth = len({p[2] for p in points}) > 1
    a = np.array([model_terms(p, with_depth) for p in points])
    b = np.array([point_bytes[p] for p in points])
    coefficients, *_ = np.linalg.lstsq(a, b, rcond=None)
    if np.max(np.abs(a @ coefficients - b) / np.maximum(b, 1.0)) > 1e-6:
        return None
    # Points that do not span every term (e.g. one feature count) pin the model only on shapes whose terms are a
    # combination of the points' terms: elsewhere there is no model, rather than the least-squares guess.
    _, singular, vt = np.linalg.svd(a, full_matrices=False)
    basis = vt[singular > singular.max() * 1e-10]

    def model(p):
        t = np.array(model_terms(p, with_depth))
        if np.linalg.norm(t - basis.T @ (basis @ t)) > 1e-9 * np.linalg.norm(t):
            return None
        return float(np.dot(t, coefficients))
    return model


# --- one prediction -------------------------------------------------------------------------------------------------

def quartiles(seconds):
    s = np.asarray(seconds, dtype=float)
    return {"median": float(np.median(s)), "q1": float(np.quantile(s, 0.25)), "q3": float(np.quantile(s, 0.75)),
            "n": int(len(s))}


def label(point):
    r, f, d = point
    return f"{r}x{f}" + (f"x{d}" if d != 1 else "")


def predict(groups, target, bytes_at):
    """groups: point -> seconds. A prediction dict (median, q1, q3, basis, points used), or a dict with
    'outside' set when the shape lies outside what was measured."""
    if target in groups:
        q = quartiles(groups[target])
        return {**q, "basis": "measured", "points": [label(target)]}
    stats = {p: quartiles(s) for p, s in groups.items()}

    def between(lo, hi, x_lo, x_hi, x, basis):
        w = 0.0 if x_hi == x_lo else (x - x_lo) / (x_hi - x_lo)
        out = {k: (1 - w) * stats[lo][k] + w * stats[hi][k] for k in ("median", "q1", "q3")}
        return {**out, "n": stats[lo]["n"] + stats[hi]["n"], "basis": basis, "points": [label(lo), label(hi)],
                "weight": w}

    # Along one axis, the other axes as asked.
    lines = []
    for axis in range(3):
        line = [p for p in stats if all(p[i] == target[i] for i in range(3) if i != axis)]
        if line:
            lines.append(f"along axis {axis + 1} {min(p[axis] for p in line)}-{max(p[axis] for p in line)}")
        below = [p for p in line if p[axis] < target[axis]]
        above = [p for p in line if p[axis] > target[axis]]
        if below and above:
            lo = max(below, key=lambda p: p[axis])
            hi = min(above, key=lambda p: p[axis])
            b_lo, b_hi, b = bytes_at(lo), bytes_at(hi), bytes_at(target)
            if None not in (b_lo, b_hi, b):
                return between(lo, hi, b_lo, b_hi, b, "interpolated in bytes along one axis")
            return between(lo, hi, lo[axis], hi[axis], target[axis], "interpolated along one axis")
    # Across shapes, in essential bytes.
    b = bytes_at(target)
    known = {p: bytes_at(p) for p in stats}
    known = {p: x for p, x in known.items() if x is not None}
    measured = ", ".join(label(p) for p in sorted(stats))
    if b is None or not known:
        return {"outside": True, "why": "outside the measured points (" + ("; ".join(lines) if lines else measured)
                + "), and they do not fix the bytes model at this shape"}
    below = [p for p, x in known.items() if x <= b]
    above = [p for p, x in known.items() if x >= b]
    if not below or not above:
        return {"outside": True, "why": f"{b / 1e6:,.1f} MB lies outside the measured "
                                        f"{min(known.values()) / 1e6:,.1f}-{max(known.values()) / 1e6:,.1f} MB "
                                        f"({measured})"}
    lo = max(below, key=lambda p: known[p])
    hi = min(above, key=lambda p: known[p])
    return between(lo, hi, known[lo], known[hi], b, "interpolated in essential bytes across shapes")


def grouped(samples, variant, timer, memory_kind):
    s = samples[(samples.variant == variant) & (samples.timer == timer)]
    if memory_kind is not None:
        s = s[s.memory_kind == memory_kind]
    return {(int(r), int(f), int(d)): g.seconds.to_numpy()
            for (r, f, d), g in s.groupby(list(archive.EXTENTS))}


def combine(parts, weights):
    """sum of weight x part for median, q1 and q3 (term by term)."""
    return {k: sum(w * p[k] for p, w in zip(parts, weights)) for k in ("median", "q1", "q3")}


# --- the advice -----------------------------------------------------------------------------------------------------

def advise(measurements, operation, target, layout, memory, reuse):
    m = measurements
    s = m.samples
    rows = []
    conversion = None
    if len(m.conversion):
        conversion = predict(grouped(m.conversion, CONVERSION_VARIANT, "layout_conversion", None), target, m.bytes_at)
    for variant in sorted(s.variant.unique()):
        vs = s[s.variant == variant]
        device = is_device(variant)
        var_layout = str(vs.layout.iloc[0]) if "layout" in vs else ""
        row = {"variant": variant, "on_device": device, "layout": var_layout}
        timers = set(vs.timer.unique())
        resident_timer = next((t for t in RESIDENT_TIMERS if t in timers), None)
        if resident_timer is None:
            continue  # e.g. a launch or transfer experiment's samples
        resident = predict(grouped(s, variant, resident_timer, None), target, m.bytes_at)
        row["resident"] = {**resident, "timer": resident_timer}
        if device:
            if "one_shot" in timers:
                row["one_shot"] = {**predict(grouped(s, variant, "one_shot", memory), target, m.bytes_at),
                                   "timer": f"one_shot ({memory})"}
            else:
                row["one_shot"] = {"outside": True, "why": "no one_shot samples: add \"one_shot\" to the "
                                                           "experiment's timers"}
        else:
            row["one_shot"] = {**resident, "timer": resident_timer}  # the data are already where it runs
        row["conversion"] = None
        if layout and var_layout and layout_family(var_layout) != layout:
            if not device:
                row["conversion"] = {"outside": True, "why": "a host-side layout conversion is not measured"}
            elif conversion is None:
                row["conversion"] = {"outside": True, "why": "no layout conversion in these archives (run the "
                                                             "layout_transpose experiment)"}
            else:
                row["conversion"] = conversion
        parts = [row["resident"], row["one_shot"]] + ([row["conversion"]] if row["conversion"] else [])
        missing = [p for p in parts if p.get("outside")]
        if missing:
            row["per_call"] = None
            row["why_not"] = missing[0]["why"]
        else:
            weights = [(reuse - 1) / reuse, 1 / reuse] + ([1 / reuse] if row["conversion"] else [])
            row["per_call"] = combine(parts, weights)
            if row["conversion"]:
                row["one_shot_with_conversion"] = combine(parts[1:], [1, 1])
        rows.append(row)
    ranked = sorted([r for r in rows if r["per_call"]], key=lambda r: r["per_call"]["median"])
    for i, r in enumerate(ranked, 1):
        r["rank"] = i
    unranked = [r for r in rows if not r["per_call"]]
    out = {"operation": operation, "axes": m.axes, "shape": label(target), "layout": layout, "memory": memory,
           "reuse": reuse, "variants": ranked + unranked}
    out["transfer"] = transfer_verdict(ranked, s, m, target, reuse)
    out["layout_break_even"] = break_even(ranked, layout)
    return out


def transfer_verdict(ranked, samples, m, target, reuse):
    host = [r for r in ranked if not r["on_device"]]
    device = [r for r in ranked if r["on_device"]]
    if not host or not device:
        return None
    h, d = host[0], device[0]
    verdict = {"best_host": h["variant"], "host_seconds": h["per_call"]["median"], "best_device": d["variant"],
               "device_seconds": d["per_call"]["median"],
               "device_resident_seconds": d["resident"]["median"]}
    overlap = not (h["per_call"]["q3"] < d["per_call"]["q1"] or d["per_call"]["q3"] < h["per_call"]["q1"])
    if overlap:
        verdict["verdict"] = "tie: the host and the device per call overlap within their quartiles"
    elif d["per_call"]["median"] < h["per_call"]["median"]:
        verdict["verdict"] = "the device wins with the transfer counted"
    elif d["resident"]["median"] < h["per_call"]["median"]:
        verdict["verdict"] = "the transfer erases the device's win: resident it would be faster than the host"
    else:
        verdict["verdict"] = "the host wins even against the device's resident time"
    # Both memory kinds, for the same device variant: what pinning the user's buffer would change.
    for kind in ("pinned", "pageable"):
        g = grouped(samples, d["variant"], "one_shot", kind)
        if g:
            p = predict(g, target, m.bytes_at)
            if not p.get("outside"):
                verdict[f"one_shot_{kind}_seconds"] = p["median"]
    return verdict


def break_even(ranked, layout):
    """With the user's layout given: how many calls on one upload pay back converting to the other layout."""
    if not layout:
        return None
    mine = [r for r in ranked if not r["conversion"] and r["on_device"]]
    converted = [r for r in ranked if r["conversion"] and r["on_device"]]
    if not mine or not converted:
        return None
    a = min(mine, key=lambda r: r["resident"]["median"])
    b = min(converted, key=lambda r: r["resident"]["median"])
    gain = a["resident"]["median"] - b["resident"]["median"]  # per call, once converted
    cost = (b["one_shot"]["median"] + b["conversion"]["median"]) - a["one_shot"]["median"]  # the first call
    out = {"keep": a["variant"], "convert_for": b["variant"], "conversion_seconds": b["conversion"]["median"],
           "gain_per_call_seconds": gain}
    if gain <= 0:
        out["calls"] = None
        out["verdict"] = f"converting never pays: {b['variant']} is not faster resident than {a['variant']}"
    else:
        calls = 1 + max(cost, 0.0) / gain
        out["calls"] = calls
        out["verdict"] = f"converting pays back after {calls:,.1f} calls on one upload"
    return out


# --- output ---------------------------------------------------------------------------------------------------------

def suggestion(operation, target, axes):
    r, f, d = target
    shape = [r, f] + ([d] if d != 1 else [])
    experiment = {"name": f"advise_{operation}_{label(target)}", "kind": "sweep", "operation": operation,
                  "shapes": [shape], "variants": ["all"], "memory": ["pageable", "pinned"],
                  "timers": ["host_wall", "resident_wall", "device_events", "one_shot"],
                  "protocol": {"warmups": 2, "trials": 9, "replications": 2, "seed": 20261130, "shuffle": True}}
    return experiment


def fmt(p):
    if not p or p.get("outside"):
        return "-"
    return archive.fmt_seconds(p["median"])


def spread(p):
    if not p or p.get("outside") or p["median"] <= 0:
        return "-"
    return f"{100 * (p['q3'] - p['q1']) / p['median']:.0f}%"


def print_text(result, measurements, machine):
    axes = " x ".join(result["axes"] or archive.LEGACY_AXES)
    lay = result["layout"].replace("_", "-") if result["layout"] else "as each variant wants it"
    print(f"kstudy advise: {result['operation']} at {result['shape']} ({axes}); your data {lay}, in "
          f"{result['memory']} host memory, {result['reuse']} call(s) per upload")
    print(f"machine: {machine}; archives: " + ", ".join(
        f"{a.path} ({a.attrs.get('git_commit', '?')[:10]})" for a in measurements.sources))
    print()
    header = ["rank", "variant", "layout", "resident", "one-shot", "conversion", "per call", "IQR", "basis"]
    table = []
    for r in result["variants"]:
        if not r["per_call"]:
            continue
        res = r["resident"]
        basis = res.get("why") if res.get("outside") else f"{res['basis']} ({', '.join(res['points'])})"
        table.append([str(r.get("rank", "-")), r["variant"], r["layout"].replace("_", "-"), fmt(res),
                      fmt(r["one_shot"]), fmt(r["conversion"]) if r["conversion"] else "",
                      fmt(r["per_call"]),
                      spread(r["per_call"]), basis])
    widths = [max(len(h), *(len(t[i]) for t in table)) if table else len(h) for i, h in enumerate(header)]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip())
    for t in table:
        print("  ".join(c.ljust(w) for c, w in zip(t, widths)).rstrip())
    missing = {}
    for r in result["variants"]:
        if not r["per_call"]:
            missing.setdefault(r.get("why_not", ""), []).append(r["variant"])
    for why, variants in missing.items():
        print(f"not predicted ({why}): {', '.join(variants)}")
    print()
    print(f"per call = (one-shot + (reuse - 1) x resident) / reuse; IQR = the per-call quartile spread over its "
          f"median; one-shot = upload + call + download from {result['memory']} memory (a host variant: its time)")
    t = result["transfer"]
    if t:
        print(f"transfer: best host {t['best_host']} {archive.fmt_seconds(t['host_seconds'])} per call, best device "
              f"{t['best_device']} {archive.fmt_seconds(t['device_seconds'])} per call "
              f"(resident {archive.fmt_seconds(t['device_resident_seconds'])}): {t['verdict']}")
        kinds = [k for k in ("pinned", "pageable") if f"one_shot_{k}_seconds" in t]
        if len(kinds) == 2:
            print(f"          its one-shot from pinned memory {archive.fmt_seconds(t['one_shot_pinned_seconds'])}, "
                  f"from pageable {archive.fmt_seconds(t['one_shot_pageable_seconds'])}")
    b = result["layout_break_even"]
    if b:
        print(f"layout: keep {b['keep']} or convert for {b['convert_for']} "
              f"({archive.fmt_seconds(b['conversion_seconds'])} per conversion): {b['verdict']}")
    if not any(r.get("rank") for r in result["variants"]):
        print()
        print("no variant could be predicted at this shape; an experiment that measures it "
              "(kstudy run FILE.json --out FILE.h5):")
        print(json.dumps(result["suggestion"]))


def main(args):
    try:
        target = parse_shape(args.shape)
        if args.reuse < 1:
            raise Refused(f"--reuse {args.reuse}: the number of calls per upload is at least 1")
        layout = None
        if args.layout:
            layout = LAYOUTS[args.layout]
        archives = archive.load(args.archives)
        platforms = sorted({a.platform() for a in archives})
        machine = args.machine or (None if args.any_machine else local_machine())
        if not args.any_machine:
            if len(platforms) > 1:
                raise Refused("the archives come from several machines (" + "; ".join(platforms) + "): advise for "
                              "one with --machine NAME and archives of that machine, or pass --any-machine")
            if machine.lower() not in platforms[0].lower() and platforms[0].lower() not in machine.lower():
                which = f"the machine asked for ({machine!r})" if args.machine else f"this machine ({machine!r})"
                raise Refused(f"the archives were measured on {platforms[0]!r}, not on {which}; ask for that "
                              f"machine with --machine {platforms[0]!r}, or pass --any-machine")
        machine = machine or "; ".join(platforms)
        operations = set()
        for a in archives:
            for e in a.experiments.values():
                if e.kind != "layout_conversion" and not e.samples.empty:
                    operations.update(op for op, _ in e.variant_operations().values() if op)
        operation = args.operation
        if operation is None:
            if len(operations) != 1:
                raise Refused("the archives hold " + (", ".join(sorted(operations)) or "no operation's samples")
                              + ": name one with --operation")
            operation = next(iter(operations))
        elif operation not in operations:
            raise Refused(f"--operation {operation}: not in these archives (they hold "
                          f"{', '.join(sorted(operations)) or 'none'})")
        measurements = Measurements(archives, operation)
        if measurements.samples.empty:
            raise Refused(f"no accepted samples of {operation} in these archives")
        result = advise(measurements, operation, target, layout, args.memory, args.reuse)
        result["machine"] = machine
        result["archives"] = [{"path": str(a.path), "commit": a.attrs.get("git_commit"), "platform": a.platform()}
                              for a in measurements.sources]
        result["suggestion"] = suggestion(operation, target, measurements.axes)
        predicted = sum(1 for r in result["variants"] if r.get("rank"))
        if args.format == "json":
            json.dump(result, sys.stdout, indent=2, default=float)
            print()
        else:
            print_text(result, measurements, machine)
        if predicted == 0:
            print(f"kstudy advise: {label(target)} lies outside what these archives measured for {operation}",
                  file=sys.stderr)
            return 5
        return 0
    except Refused as error:
        print(f"kstudy advise: {error}", file=sys.stderr)
        return EXIT_REFUSED
