"""Energy per call: the GPU's total-energy counter read around a device variant's timed regions, as joules per call
and as essential work per joule (GB/J for bandwidth-bound operations, GFLOP/J where the operation counts flops),
beside the median time of the same samples. Timer `energy` (calls back to back through one region of at least the
energy window, already per call) where the archive has it; else the resident regions of single calls."""
import numpy as np
import pandas as pd

from ... import archive as A
from .. import section

EXPLANATION = ("Energy is NVML's total-energy counter (millijoules, updated by the driver every few milliseconds) "
               "read just before and just after a timed region. Boundary `energy`: the region holds calls back to "
               "back for at least the energy window (KSTUDY_ENERGY_WINDOW_MS, default 1 s) and each sample is "
               "already per call: J/call is their median. Boundary `resident_wall` (archives without timer energy): "
               "one call per region, far shorter than the counter's update interval, reads 0 in most trials and a "
               "whole update in a few; the mean over the accepted trials is shown, but it leans toward the power of "
               "everything the point ran between the regions, so read it as an estimate. GB/J and GFLOP/J divide "
               "the operation's essential bytes and flops by J/call.")
KEYS = ["variant", *A.point_key("samples")]


def experiment_energy(a, e):
    s = e.accepted()
    if s.empty or "energy_joules" not in s.columns:
        return pd.DataFrame()
    s = s[np.isfinite(s.energy_joules.astype(float))]
    boundary = "energy" if (s.timer == "energy").any() else "resident_wall"
    s = s[s.timer == boundary]
    if s.empty:
        return pd.DataFrame()
    per_call = "median" if boundary == "energy" else "mean"
    df = s.groupby(KEYS).agg(calls=("energy_joules", "size"), joules_per_call=("energy_joules", per_call),
                             median_seconds=("seconds", "median"), mean_power_w=("power_watts", "mean"),
                             throttled=("throttled", "max")).reset_index()
    df.insert(0, "boundary", boundary)
    v = e.variants
    if len(v) and {"essential_bytes", "essential_flops"} <= set(v.columns):
        modelled = ["variant", *A.point_key("variants")]
        work = v[modelled + ["essential_bytes", "essential_flops"]]
        df = df.merge(work.drop_duplicates(modelled), how="left", on=modelled)
    else:
        df["essential_bytes"], df["essential_flops"] = np.nan, np.nan
    positive = df.joules_per_call > 0
    df["GB_per_J"] = np.where(positive & (df.essential_bytes > 0), df.essential_bytes / 1e9 / df.joules_per_call,
                              np.nan)
    df["GFLOP_per_J"] = np.where(positive & (df.essential_flops > 0), df.essential_flops / 1e9 / df.joules_per_call,
                                 np.nan)
    df.insert(0, "experiment", e.name)
    df.insert(0, "archive", a.label)
    return df


def extents_of(r):
    return f"{r.rows:,} x {r.features:,}" + (f" x {r.depth:,}" if r.depth > 1 else "")


def line(r):
    extents = extents_of(r)
    over = f"median of {r.calls} regions" if r.boundary == "energy" else f"mean of {r.calls} single-call regions"
    text = (f"- {r.archive}/{r.experiment} {r.variant} at {extents} ({r.cache}): {r.joules_per_call * 1e3:.3g} mJ/call "
            f"({over}), median {r.median_seconds * 1e6:.3g} µs")
    if np.isfinite(r.GFLOP_per_J):
        text += f", {r.GFLOP_per_J:.3g} GFLOP/J"
    elif np.isfinite(r.GB_per_J):
        text += f", {r.GB_per_J:.3g} GB/J"
    if np.isfinite(r.mean_power_w):
        text += f", {r.mean_power_w:.0f} W"
    return text + (" (throttled)" if r.throttled else "")


@section("energy", "Energy per call (NVML energy counter around each timed region)", order=112)
def energy(inputs, sec):
    frames = [experiment_energy(a, e) for a in inputs.archives for e in a.experiments.values()]
    frames = [f for f in frames if not f.empty]
    if not frames:
        why = sorted({a.environment.get("gpu_energy", "") for a in inputs.archives} - {""})
        return sec.skip("no energy measured" + (f" ({'; '.join(why)})" if why else " (archives before schema 9)"))
    df = pd.concat(frames, ignore_index=True)
    inputs.write_csv(df, "energy.csv", sec, "joules per call, GB/J and GFLOP/J per variant, point and cache mode")
    sec.lines += [EXPLANATION, ""] + [line(r) for r in df.itertuples()]
    sec.headlines.append(headline(df))
    return sec.done(df)


def headline(df):
    """The most work per joule from the energy timer's per-call measurements only (boundary `energy`, a positive
    J/call): a single-call region reads NVML's counter, which moves every few milliseconds, as 0 or a whole update
    (0 to kilowatts over a microsecond call), so it ranks nothing. Flops per joule where the operation counts flops,
    essential bytes per joule for the others: two units, two rankings."""
    valid = df[(df.boundary == "energy") & (df.joules_per_call > 0)]
    if valid.empty:
        return (f"Energy: {len(df)} (variant, point) pairs measured from single-call regions only, estimates that "
                "rank nothing (NVML's counter moves every few ms); no `energy` timer samples, which measure per-call "
                "energy over calls back to back.")
    parts = []
    flops = valid[valid.GFLOP_per_J.notna()]
    if len(flops):
        b = flops.loc[flops.GFLOP_per_J.idxmax()]
        parts.append(f"most flops per joule {b.variant} at {extents_of(b)} ({b.GFLOP_per_J:.3g} GFLOP/J)")
    nbytes = valid[valid.GFLOP_per_J.isna() & valid.GB_per_J.notna()]
    if len(nbytes):
        b = nbytes.loc[nbytes.GB_per_J.idxmax()]
        parts.append(f"most essential bytes per joule {b.variant} at {extents_of(b)} ({b.GB_per_J:.3g} GB/J)")
    return (f"Energy (timer `energy`, {len(valid)} of the {len(df)} (variant, point) pairs measured): "
            + ("; ".join(parts) if parts else "no essential work recorded to divide by J/call") + ".")
