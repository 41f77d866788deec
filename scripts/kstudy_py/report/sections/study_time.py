"""Study time: how much of each experiment's wall time its timed regions took, from the health table's wall time of
every (point, replication) and the samples' own seconds. On a GPU a large point's time goes mostly to making the data,
the float64 reference, transfers and gates (performance_notes, session 30): this says how much, so a protocol's cost
is read, not guessed."""
import numpy as np
import pandas as pd

from ... import archive as A
from .. import section

EXPLANATION = ("*Wall* sums the health table's time of every (point, replication) of the experiment (from the GPU "
               "readings before to those after the point: preparing and gating every variant, warm-ups, trials and "
               "writing; not the process start or the ceilings). *Timed* sums the samples' own seconds on the host "
               "clock: CUDA events time the same calls as the resident clock and are not added again, and the "
               "energy timer's regions are left out (it stores seconds per call of a longer region), so timed is "
               "what the medians rest on, and the rest is the protocol's cost around it. From archive schema 14 a "
               "sweep's wall time is also split by phase (the archive schema's point phases): "
               + "; ".join(f"*{p['name'].replace('_', '-')}*, {p['description']}" for p in A.PHASES.values())
               + "; *other* is what the phases leave of the wall time: the GPU readings around the point and the "
               "archive's bookkeeping.")
# The phases in declaration order (`kstudy schema`'s point_phases), each a column of the health table.
PHASES = tuple(A.PHASES)
# Samples whose seconds are not a timed region of their own: events time the resident clock's calls, and the energy
# timer stores a region's seconds divided by its calls.
NOT_OWN_REGIONS = tuple(name for name, t in A.TIMERS.items() if t["clock"] != "host_wall" or t["scope"] == "region")


def experiment_time(a, e):
    """The experiment's wall and timed seconds, and its slowest (point, replication), or None without a health table
    that recorded wall time."""
    h = e.health
    if not e.has_health_table or h.empty or "seconds" not in h or not (h.seconds > 0).any():
        return None
    s = e.samples
    own = s[(s.trial >= 0) & ~s.timer.isin(NOT_OWN_REGIONS)]
    timed_by_unit = own.groupby(["point", "replication"]).seconds.sum()
    slowest = h.loc[h.seconds.idxmax()]
    slowest_timed = timed_by_unit.get((slowest.point, slowest.replication), 0.0)
    axes = e.axes if isinstance(e.axes, str) else ",".join(e.axes or [])
    # A re-measured point (protocol "throttled": "remeasure") has a health row per attempt, all in its unit's time.
    units = len(h.drop_duplicates(["point", "replication"]))
    row = {"archive": a.label, "experiment": e.name, "units": units, "attempts": len(h), "wall_s": h.seconds.sum(),
           "timed_s": own.seconds.sum(), "energy_left_out": bool((s.timer == "energy").any()),
           "slowest_point": A.point_label(slowest.rows, slowest.features, axes, slowest.depth),
           "slowest_replication": int(slowest.replication), "slowest_wall_s": slowest.seconds,
           "slowest_timed_s": slowest_timed}
    # The cool-downs between the attempts of re-measured points (protocol "throttled": "remeasure") are outside every
    # point, so outside the wall time above: each lasts the protocol's cool_down_s (a stop request ends one early).
    # Each attempt but a unit's last one of a unit with re-measured samples was set aside and cooled down after.
    remeasured = s[s.status.str.startswith("remeasured: ")][["point", "replication"]].drop_duplicates()
    runs = h.groupby(["point", "replication"]).size()
    row["cool_downs"] = int(sum(runs.get((p, r), 1) - 1 for p, r in remeasured.itertuples(index=False)))
    row["cool_down_s"] = row["cool_downs"] * float(e.definition.get("protocol", {}).get("cool_down_s", 0.0))
    # The phases where every unit timed them (a sweep from schema 14); NaN otherwise, never a partial sum.
    columns = [A.PHASES[p]["column"] for p in PHASES]
    timed_phases = all(c in h for c in columns) and h[columns].notna().all().all()
    for p, c in zip(PHASES, columns):
        row[f"{p}_s"] = h[c].sum() if timed_phases else np.nan
    row["other_s"] = row["wall_s"] - h[columns].sum().sum() if timed_phases else np.nan
    return row


def unit_rows(a, e):
    """One row per health row (a point run) of an experiment: its point, wall and timed seconds and its phases, for
    study_time_units.csv."""
    h, s = e.health, e.samples
    own = s[(s.trial >= 0) & ~s.timer.isin(NOT_OWN_REGIONS)]
    timed = own.groupby(["point", "replication"]).seconds.sum()
    attempts = h.groupby(["point", "replication"]).seconds.transform("size")
    axes = e.axes if isinstance(e.axes, str) else ",".join(e.axes or [])
    out = pd.DataFrame({"archive": a.label, "experiment": e.name, "point": h.point, "replication": h.replication,
                        "label": [A.point_label(r.rows, r.features, axes, r.depth) for r in h.itertuples()],
                        "attempts": attempts, "wall_s": h.seconds})
    # Timed seconds of the unit, on its last row only when a re-measured point has several (no double count).
    last = ~h.duplicated(["point", "replication"], keep="last")
    out["timed_s"] = [timed.get((r.point, r.replication), 0.0) if keep else 0.0
                      for r, keep in zip(h.itertuples(), last)]
    for p in PHASES:
        column = A.PHASES[p]["column"]
        out[f"{p}_s"] = h[column] if column in h else np.nan
    return out


def seconds(x):
    return f"{x:,.1f} s" if x >= 1 else A.fmt_seconds(x)


def by_phase(r):
    """'; by phase: inputs 1.2 s (30%), ...' for an experiment whose units timed their phases, else ''."""
    if np.isnan(r.other_s):
        return ""
    parts = [(p.replace("_", "-"), getattr(r, f"{p}_s")) for p in PHASES] + [("other", r.other_s)]
    return "; by phase: " + ", ".join(f"{name} {seconds(x)} ({100 * x / r.wall_s:.2g}%)" for name, x in parts)


def sentence(r):
    share = r.timed_s / r.wall_s if r.wall_s > 0 else np.nan
    attempts = f" in {r.attempts} runs (re-measured points run again)" if r.attempts > r.units else ""
    return (f"- {r.archive}/{r.experiment}: {r.units} (point, replication) units took {seconds(r.wall_s)}{attempts}, "
            f"their "
            f"timed regions {seconds(r.timed_s)} ({100 * share:.2g}%)"
            + (" (energy regions not counted)" if r.energy_left_out else "")
            + f"; the slowest, {r.slowest_point} in replication {r.slowest_replication}, "
            f"{seconds(r.slowest_wall_s)} for {seconds(r.slowest_timed_s)} timed" + by_phase(r)
            + (f"; besides, {r.cool_downs} cool-down{'s' if r.cool_downs > 1 else ''} between re-measured attempts, "
               f"{seconds(r.cool_down_s)} outside the points" if r.cool_downs else ""))


@section("study_time", "Study time: the timed regions' share of the wall time", order=108)
def study_time(inputs, sec):
    rows = [row for a in inputs.archives for e in a.experiments.values() if (row := experiment_time(a, e))]
    if not rows:
        return sec.skip("no health table with wall times (archive schema < 3, or no point finished)")
    df = pd.DataFrame(rows)
    df["timed_share"] = df.timed_s / df.wall_s
    inputs.write_csv(df, "study_time.csv", sec, "wall time of the points, the timed regions' seconds and share, the "
                                                "slowest point and the seconds of each phase (schema 14), per "
                                                "archive and experiment")
    units = pd.concat([unit_rows(a, e) for a in inputs.archives for e in a.experiments.values()
                       if experiment_time(a, e)], ignore_index=True)
    what = ("every point run: its wall and timed seconds and, from schema 14, its phases, to find the phase a slow "
            "point spends its time in")
    inputs.write_csv(units, "study_time_units.csv", sec, what)
    sec.lines += [EXPLANATION, ""] + [sentence(r) for r in df.itertuples()]
    total_wall, total_timed = df.wall_s.sum(), df.timed_s.sum()
    sec.headlines.append(f"Study time: the timed regions took {seconds(total_timed)} of the points' "
                         f"{seconds(total_wall)} ({100 * total_timed / total_wall:.2g}%) in {len(df)} "
                         f"experiment{'' if len(df) == 1 else 's'}.")
    phased = df[df.other_s.notna()]
    if not phased.empty:
        totals = {p: phased[f"{p}_s"].sum() for p in PHASES}
        top = max(totals, key=totals.get)
        wall = phased.wall_s.sum()
        sec.headlines.append(f"Study time by phase: {top.replace('_', '-')} took the most, {seconds(totals[top])} of "
                             f"{seconds(wall)} ({100 * totals[top] / wall:.2g}%) in the {len(phased)} experiment"
                             f"{'' if len(phased) == 1 else 's'} that timed their phases.")
    return sec.done(df)
