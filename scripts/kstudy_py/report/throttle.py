"""Throttled samples disclosed under the table whose medians rest on them (issue 44): a throttled sample stays in
its median (it is what the GPU did under the load), so a table that would otherwise read as full-clock numbers says
how many of its samples were not, at which points, why and at which SM clocks.

A sample is throttled where the archive flags it (samples.throttled == 1: NVML reported a slowdown reason before,
during or after its point; the health section counts the same flag per experiment). Its clock is the lowest SM clock
sampled during its timed region (samples.min_sm_clock_mhz, schema 9; -1 or absent: no reading), its reasons the
NVML bitmask beside it (samples.throttle_reasons, named by archive.SLOWDOWN_REASONS).
"""
import pandas as pd

from .. import archive as A
from .inputs import POINT_KEYS

MAX_POINTS_NAMED = 6  # a note names at most this many points, then says how many more


def flagged(samples):
    """The mask of `samples` the archive flags throttled (all False where the column is absent: schema < 3)."""
    if "throttled" not in samples.columns:
        return pd.Series(False, index=samples.index)
    return samples.throttled.fillna(0).astype(int) == 1


def point_labels(hot, axes):
    """The points of the throttled samples `hot` as the tables label them, in extent order."""
    points = hot[["variant", *A.EXTENTS]].drop_duplicates()
    shown = sorted({(int(r.rows), int(r.features), int(r.depth), axes.get(r.variant, ""))
                    for r in points.itertuples()})
    return list(dict.fromkeys(A.point_label(r, f, a, d) for r, f, d, a in shown))


def clock_text(hot):
    """'SM clock 1,800–1,890 MHz' over the throttled samples' readings, or why there is none."""
    if "min_sm_clock_mhz" not in hot.columns:
        return "no SM clock sampled (archive before schema 9)"
    clocks = hot.min_sm_clock_mhz.fillna(-1).astype(int)
    clocks = clocks[clocks > 0]
    if clocks.empty:
        return "no SM clock reading recorded for them"
    low, high = int(clocks.min()), int(clocks.max())
    return f"SM clock {low:,} MHz" if low == high else f"SM clock {low:,}–{high:,} MHz"


def reasons_text(hot):
    if "throttle_reasons" not in hot.columns:
        return "reason not recorded"
    names = {name for bits in hot.throttle_reasons.fillna(-1) for name in A.slowdown_reasons(bits)}
    return ", ".join(sorted(names)) or "reason not recorded"


def note(inputs, rows):
    """The line under a table whose medians are the rows of `rows` (rows of inputs.points, or anything with their
    POINT_KEYS): '12 of 84 samples (at 8192×8192×8192) ran throttled (sw_power_cap), SM clock 1,800–1,890 MHz'
    and the blank line that ends its paragraph; [] when none of its samples is throttled. Every section that
    renders medians passes its table's rows here, the reference columns' rows included."""
    if rows is None or len(rows) == 0 or inputs.samples.empty:
        return []
    keys = [k for k in POINT_KEYS if k in rows.columns]  # all of them for rows of points
    wanted = rows[keys].drop_duplicates()
    under = inputs.samples.merge(wanted, on=keys, how="inner")
    hot = under[flagged(under)]
    if hot.empty:
        return []
    axes = dict(zip(inputs.variants.variant, inputs.variants["axes"]))
    labels = point_labels(hot, axes)
    more = len(labels) - MAX_POINTS_NAMED
    where = ", ".join(labels[:MAX_POINTS_NAMED]) + (f" and {more} more" if more > 0 else "")
    return [f"*Throttled: {len(hot):,} of {len(under):,} samples (at {where}) ran throttled ({reasons_text(hot)}), "
            f"{clock_text(hot)}; they stay in the medians above.*", ""]
