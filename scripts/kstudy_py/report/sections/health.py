"""GPU health: how many samples were taken while NVML reported throttling, per archive and experiment."""
import numpy as np
import pandas as pd

from .. import section
from ..throttle import flagged  # the one rule of what counts as throttled, which every table's note shares

EXPLANATION = ("A sample is flagged *throttled* when NVML reported a slowdown reason (SW power cap, HW slowdown, SW "
               "or HW thermal, HW power brake) just before, during (the in-point sampler and the readings around each "
               "timed region, from schema 9) or just after its point; GPU idle and application-clock "
               "settings do not count. Throttled samples stay in the medians unless the experiment's protocol "
               "(`throttled`) excludes them or re-measures their points after a cool-down; this says how many "
               "there were and what was done with them.")


def watched_extremes(watched):
    """Clock range, hottest temperature and highest power over the monitored points (NaN where not reported)."""
    clocks = pd.concat([watched.before_sm_clock_mhz, watched.after_sm_clock_mhz])
    clocks = clocks[clocks >= 0]
    temps = pd.concat([watched.before_temperature_c, watched.after_temperature_c])
    power = pd.concat([watched.before_power_mw, watched.after_power_mw])
    return {"sm_clock_min_mhz": clocks.min() if len(clocks) else np.nan,
            "sm_clock_max_mhz": clocks.max() if len(clocks) else np.nan,
            "temperature_max_c": temps[temps >= 0].max() if (temps >= 0).any() else np.nan,
            "power_max_w": power[power >= 0].max() / 1000 if (power >= 0).any() else np.nan}


def experiment_health(a, e):
    s, h = e.samples, e.health
    accepted = e.accepted()
    row = {"archive": a.label, "experiment": e.name, "samples": len(s), "throttled_samples": int(flagged(s).sum()),
           "accepted_samples": len(accepted), "accepted_throttled": int(flagged(accepted).sum()),
           "points": len(h), "points_monitored": 0, "throttled_points": 0, "reasons": "", "device": "",
           "sm_clock_min_mhz": np.nan, "sm_clock_max_mhz": np.nan, "temperature_max_c": np.nan, "power_max_w": np.nan,
           # What the protocol's throttling policy did (schema-independent: it shows in the samples' status).
           "excluded_samples": int(s.status.str.startswith("excluded: throttled").sum()) if len(s) else 0,
           "remeasured_points": (len(s[s.status.str.startswith("remeasured: throttled")]
                                     .drop_duplicates(["point", "replication"])) if len(s) else 0)}
    if not e.has_health_table:
        row["device"] = "no health table (archive schema < 3)"
    elif len(h):
        watched = h[h.available == 1]
        row["points_monitored"] = len(watched)
        row["throttled_points"] = int((h.throttled == 1).sum())
        row["device"] = watched.device.iloc[0] if len(watched) else h.device.iloc[0]
        row["reasons"] = ",".join(sorted({r for text in h.reasons for r in text.split(",") if r}))
        if len(watched):
            row.update(watched_extremes(watched))
    return row


def sentence(r):
    """One line per experiment; 0 throttled samples is a finding too, but only where the GPU was watched."""
    if r.points_monitored == 0:
        return f"- {r.archive}/{r.experiment}: GPU throttling unknown — not monitored ({r.device}); {r.samples} samples"
    text = (f"- {r.archive}/{r.experiment}: {r.throttled_samples} of {r.samples} samples taken while the GPU reported "
            f"throttling ({r.accepted_throttled} of the {r.accepted_samples} accepted samples that enter the "
            f"medians); {r.throttled_points} of {r.points_monitored} monitored points throttled on {r.device}")
    if r.excluded_samples:
        text += f"; {r.excluded_samples} throttled samples excluded from the medians (protocol `throttled: exclude`)"
    if r.remeasured_points:
        text += (f"; {r.remeasured_points} (point, replication) run{'s' if r.remeasured_points > 1 else ''} "
                 "re-measured after a cool-down (protocol `throttled: remeasure`)")
    if r.reasons:
        text += f"; reasons seen: {r.reasons.replace(',', ', ')}"
    if np.isfinite(r.sm_clock_min_mhz):
        text += f"; SM clock {r.sm_clock_min_mhz:.0f}–{r.sm_clock_max_mhz:.0f} MHz"
    if np.isfinite(r.temperature_max_c):
        text += f", up to {r.temperature_max_c:.0f} °C"
    if np.isfinite(r.power_max_w):
        text += f", up to {r.power_max_w:.0f} W"
    return text


def headline(df):
    watched = df[df.points_monitored > 0]
    if watched.empty:
        return "GPU health: not monitored in these archives (no NVML health table)."
    unwatched = len(df) - len(watched)
    return (f"GPU health: {watched.accepted_throttled.sum():,} of the {watched.accepted_samples.sum():,} accepted "
            f"samples of the {len(watched)} monitored experiments were taken while the GPU reported throttling"
            + (f" ({unwatched} experiments not monitored)" if unwatched else "") + ".")


@section("health", "GPU health (NVML, before, during and after each point)", order=110)
def health(inputs, sec):
    df = pd.DataFrame([experiment_health(a, e) for a in inputs.archives for e in a.experiments.values()
                       if not e.samples.empty])
    if df.empty:
        return sec.skip("no samples")
    inputs.write_csv(df, "gpu_health.csv", sec, "samples taken while throttled, clocks, temperature and power "
                                                "per archive and experiment")
    sec.lines += [EXPLANATION, ""] + [sentence(r) for r in df.itertuples()]
    sec.headlines.append(headline(df))
    return sec.done(df)
