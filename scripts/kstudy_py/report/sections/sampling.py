"""Sampling: how precise each experiment's medians are, and, under adaptive sampling (`--precision`), which points
stopped short of the target and why (the summary's interval and stop reason, schema 13)."""
import numpy as np
import pandas as pd

from ... import archive as A
from .. import section

EXPLANATION = ("Each median's 95% interval is computed across replications (kstudy/precision.hpp): the "
               "distribution-free interval of the pooled median, widened by Student's t interval of the "
               "replications' medians, so a shift between processes is not hidden by tight processes. Under "
               "adaptive sampling a point is measured until every median there is within the target, or is projected "
               "to stay wider than it within the protocol's bounds (`out_of_reach`), or until its time-out "
               "(`time_out`) or its last allowed replication (`max_replications`): those medians claim less than "
               "the target, and are listed.")
SHORT = ("out_of_reach", "time_out", "max_replications")


def relative_half_width(s):
    return np.maximum(s["median"] - s.interval_low, s.interval_high - s["median"]) / s["median"]


def experiment_rows(a, e):
    s = e.summary
    if s.empty or s.interval_low.isna().all():
        return None, None
    axes = e.axes if isinstance(e.axes, str) else ",".join(e.axes or [])
    s = s.assign(archive=a.label, experiment=e.name, axes=axes, half_width=relative_half_width(s))
    protocol = e.definition.get("protocol", {})
    target = protocol.get("precision")
    row = {"archive": a.label, "experiment": e.name, "target": target if target else np.nan,
           "series": len(s), "widest": s.half_width.max(), "median_half_width": s.half_width.median(),
           **{reason: int((s.stopped == reason).sum()) for reason in ("fixed", "precision", *SHORT)}}
    return row, s[s.stopped.isin(SHORT)]


def percent(x):
    return "∞" if not np.isfinite(x) else f"{100 * x:.2g}%"


def sentence(r):
    if not np.isfinite(r.target):
        return (f"- {r.archive}/{r.experiment}: fixed protocol; 95% intervals of the {r.series} medians: median "
                f"±{percent(r.median_half_width)}, widest ±{percent(r.widest)}")
    met = r.precision
    return (f"- {r.archive}/{r.experiment}: target ±{percent(r.target)}; {met} of {r.series} medians met it, "
            f"{r.out_of_reach} were out of its reach, {r.time_out} stopped on their time-out, "
            f"{r.max_replications} at their last replication; widest "
            f"±{percent(r.widest)}")


def short_table(short):
    lines = ["| archive/experiment | variant | point | timer | median | 95% interval | stopped |",
             "| --- | --- | --- | --- | ---: | ---: | --- |"]
    for r in short.sort_values("half_width", ascending=False).head(40).itertuples():
        point = A.point_label(r.rows, r.features, r.axes, r.depth)
        lines.append(f"| {r.archive}/{r.experiment} | `{r.variant}` | {point} | {r.timer} | {A.fmt_seconds(r.median)} "
                     f"| ±{percent(r.half_width)} | {r.stopped} |")
    if len(short) > 40:
        lines.append(f"\n({len(short) - 40} more in sampling_short.csv)")
    return lines


@section("sampling", "Sampling: precision of the medians", order=105)
def sampling(inputs, sec):
    rows, short = [], []
    for a in inputs.archives:
        for e in a.experiments.values():
            row, s = experiment_rows(a, e)
            if row is not None:
                rows.append(row)
                short.append(s)
    if not rows:
        return sec.skip("no summary with intervals (archives before schema 13)")
    df = pd.DataFrame(rows)
    inputs.write_csv(df, "sampling.csv", sec, "per experiment: the precision target, how many medians met it, "
                                              "the widest 95% interval")
    sec.lines += [EXPLANATION, ""] + [sentence(r) for r in df.itertuples()]
    short = pd.concat(short, ignore_index=True)
    if not short.empty:
        inputs.write_csv(short, "sampling_short.csv", sec, "medians whose point stopped short of the target")
        sec.lines += ["", "Medians whose point stopped short of the precision target (widest first):", ""]
        sec.lines += short_table(short)
    adaptive = df[np.isfinite(df.target)]
    if len(adaptive):
        sec.headlines.append(f"Adaptive sampling: {int(adaptive.precision.sum())} of {int(adaptive.series.sum())} "
                             f"medians met their target; {len(short)} stopped short of it.")
    return sec.done(df)
