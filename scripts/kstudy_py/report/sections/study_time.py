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
               "what the medians rest on, and the rest is the protocol's cost around it.")
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
    return {"archive": a.label, "experiment": e.name, "units": len(h), "wall_s": h.seconds.sum(),
            "timed_s": own.seconds.sum(), "energy_left_out": bool((s.timer == "energy").any()),
            "slowest_point": A.point_label(slowest.rows, slowest.features, axes, slowest.depth),
            "slowest_replication": int(slowest.replication), "slowest_wall_s": slowest.seconds,
            "slowest_timed_s": slowest_timed}


def seconds(x):
    return f"{x:,.1f} s" if x >= 1 else A.fmt_seconds(x)


def sentence(r):
    share = r.timed_s / r.wall_s if r.wall_s > 0 else np.nan
    return (f"- {r.archive}/{r.experiment}: {r.units} (point, replication) units took {seconds(r.wall_s)}, their "
            f"timed regions {seconds(r.timed_s)} ({100 * share:.2g}%)"
            + (" (energy regions not counted)" if r.energy_left_out else "")
            + f"; the slowest, {r.slowest_point} in replication {r.slowest_replication}, "
            f"{seconds(r.slowest_wall_s)} for {seconds(r.slowest_timed_s)} timed")


@section("study_time", "Study time: the timed regions' share of the wall time", order=108)
def study_time(inputs, sec):
    rows = [row for a in inputs.archives for e in a.experiments.values() if (row := experiment_time(a, e))]
    if not rows:
        return sec.skip("no health table with wall times (archive schema < 3, or no point finished)")
    df = pd.DataFrame(rows)
    df["timed_share"] = df.timed_s / df.wall_s
    inputs.write_csv(df, "study_time.csv", sec, "wall time of the points, the timed regions' seconds and share, and "
                                                "the slowest point, per archive and experiment")
    sec.lines += [EXPLANATION, ""] + [sentence(r) for r in df.itertuples()]
    total_wall, total_timed = df.wall_s.sum(), df.timed_s.sum()
    sec.headlines.append(f"Study time: the timed regions took {seconds(total_timed)} of the points' "
                         f"{seconds(total_wall)} ({100 * total_timed / total_wall:.2g}%) in {len(df)} "
                         f"experiment{'' if len(df) == 1 else 's'}.")
    return sec.done(df)
