"""Energy per call: the GPU's total-energy counter read around a device variant's calls, as joules per call and as
essential work per joule (GB/J for bandwidth-bound operations, GFLOP/J where the operation counts flops), beside the
median time of the same samples. Only timer `energy` (calls back to back through one region of at least the energy
window, already per call) measures per-call energy; a single call's own region (the `energy_joules` that other
timers' samples carry) is far shorter than the counter's update interval and reads 0 or a whole update, so it is
never reported as energy."""
import numpy as np
import pandas as pd

from ... import archive as A
from .. import section

EXPLANATION = ("Energy is NVML's total-energy counter (millijoules, updated by the driver every few milliseconds) "
               "read just before and just after a region of calls back to back (timer `energy`) lasting at least the "
               "energy window (KSTUDY_ENERGY_WINDOW_MS, default 1 s); each sample is already per call and J/call is "
               "their median. Single-call regions of the other timers are not used: one call is far shorter than "
               "the counter's update interval. GB/J and GFLOP/J divide the operation's essential bytes and flops by "
               "J/call.")
KEYS = ["variant", *A.point_key("samples")]


def experiment_energy(a, e):
    """The experiment's timer `energy` samples with a reading (finite energy_joules; NaN = not measured), per
    variant and point; empty where it has none, whatever its other timers' samples carry."""
    s = e.accepted()
    if s.empty or "energy_joules" not in s.columns:
        return pd.DataFrame()
    s = s[(s.timer == "energy") & np.isfinite(s.energy_joules.astype(float))]
    if s.empty:
        return pd.DataFrame()
    df = s.groupby(KEYS).agg(calls=("energy_joules", "size"), joules_per_call=("energy_joules", "median"),
                             median_seconds=("seconds", "median"), mean_power_w=("power_watts", "mean"),
                             throttled=("throttled", "max")).reset_index()
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
    text = (f"- {r.archive}/{r.experiment} {r.variant} at {extents} ({r.cache}): {r.joules_per_call * 1e3:.3g} mJ/call "
            f"(median of {r.calls} regions), median {r.median_seconds * 1e6:.3g} µs")
    if np.isfinite(r.GFLOP_per_J):
        text += f", {r.GFLOP_per_J:.3g} GFLOP/J"
    elif np.isfinite(r.GB_per_J):
        text += f", {r.GB_per_J:.3g} GB/J"
    if np.isfinite(r.mean_power_w):
        text += f", {r.mean_power_w:.0f} W"
    return text + (" (throttled)" if r.throttled else "")


def single_call_readings(archives):
    """How many accepted samples of other timers carry an energy reading: what the skip reason says is not used."""
    count = 0
    for a in archives:
        for e in a.experiments.values():
            s = e.accepted()
            if len(s) and "energy_joules" in s.columns:
                count += int(((s.timer != "energy") & np.isfinite(s.energy_joules.astype(float))).sum())
    return count


@section("energy", "Energy per call (timer `energy`: NVML energy counter around calls back to back)", order=112)
def energy(inputs, sec):
    frames = [experiment_energy(a, e) for a in inputs.archives for e in a.experiments.values()]
    frames = [f for f in frames if not f.empty]
    if not frames:
        single = single_call_readings(inputs.archives)
        if single:
            return sec.skip(f"energy per call not measured: no timer `energy` samples with a reading; the {single:,} "
                            "single-call regions of other timers that carry one are not per-call energy (NVML's "
                            "counter updates every few ms and reads 0 or a whole update over one call)")
        why = sorted({a.environment.get("gpu_energy", "") for a in inputs.archives} - {""})
        return sec.skip("energy per call not measured: no timer `energy` samples with a reading"
                        + (f" ({'; '.join(why)})" if why else ""))
    df = pd.concat(frames, ignore_index=True)
    inputs.write_csv(df, "energy.csv", sec, "timer `energy`: joules per call, GB/J and GFLOP/J per variant, point "
                     "and cache mode")
    sec.lines += [EXPLANATION, ""] + [line(r) for r in df.itertuples()]
    sec.headlines.append(headline(df))
    return sec.done(df)


def headline(df):
    """The most work per joule among the energy timer's per-call measurements with a positive J/call. Flops per
    joule where the operation counts flops, essential bytes per joule for the others: two units, two rankings."""
    valid = df[df.joules_per_call > 0]
    if valid.empty:
        return (f"Energy (timer `energy`): none of the {len(df)} (variant, point) pairs read a positive J/call; "
                "nothing to rank.")
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
