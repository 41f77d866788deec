"""Bandwidth by operation: per operation and point, each family's best resident time as essential GB/s and as
a share of the roofs measured in the same archive, and what Kokkos costs against handwritten CUDA (or a vendor
library) at the same point. Works for any operation: every number comes from the variants table (operation,
axes, family, backend, on_device, essential bytes) and the samples."""
import numpy as np
import pandas as pd

from ... import archive as A
from .. import section, throttle
from ..variants import HANDWRITTEN, is_handwritten

POINT = ["archive", "experiment", "operation", "axes", *A.EXTENTS]
# Device variants: device events where measured (no host-side launch cost in them), else the resident wall
# clock; host variants: host_wall (their data already is where they compute).
DEVICE_TIMERS = ("device_events", "resident_wall")
HOST_TIMER = "host_wall"
DEVICE_ROOFS = ("device_read", "device_copy")
HOST_ROOFS = ("host_read",)
ROOFS = DEVICE_ROOFS + HOST_ROOFS
MAX_POINTS_SHOWN = 4  # per operation in report.md; the CSV has every point
COLUMNS = POINT + ["point", "family", "backend", "on_device", "variant", "timer", "n", "median_s", "q1_s", "q3_s",
                   "essential_bytes", "essential_flops", "essential_GB_per_s"] + \
          [f"{r}_GB_per_s" for r in ROOFS] + [f"pct_of_{r}" for r in ROOFS]
RATIO_COLUMNS = POINT + ["point", "timer", "kokkos_variant", "kokkos_s", "handwritten_variant", "handwritten_s",
                         "kokkos_over_handwritten"]


def on_device(points):
    return points.on_device.fillna(False).astype(bool)


def resident_points(points):
    """One resident median per variant and point: device_events before resident_wall for device variants,
    host_wall for host variants; default block size only; warm caches before a --cache cold run of the point."""
    p = points[(points.block_size == 0) & points.operation.notna()]
    p = p.assign(cold=p["cache"] != "warm").sort_values("cold", kind="stable").drop(columns="cold")
    device = p[on_device(p) & p.timer.isin(DEVICE_TIMERS)]
    device = device.assign(rank=device.timer.map(DEVICE_TIMERS.index)).sort_values("rank", kind="stable")
    device = device.drop_duplicates(POINT + ["variant"]).drop(columns="rank")
    host = p[~on_device(p) & (p.timer == HOST_TIMER)].drop_duplicates(POINT + ["variant"])
    return pd.concat([device, host], ignore_index=True)


def best_per_family(resident):
    """Per point, family and backend: the fastest variant (a family's layouts or flavours compete)."""
    return resident.loc[resident.groupby(POINT + ["family", "backend"])["median"].idxmin()]


def with_roofs(best, archives):
    """Essential GB/s and its share of each roof measured in the variant's own archive on the clock of the
    variant's timer (none across clocks); a device variant against the device roofs, a host variant against
    the host's."""
    df = best.copy()
    df["point"] = [A.point_label(r, f, ax, d) for r, f, ax, d in zip(df.rows, df.features, df["axes"], df.depth)]
    df["essential_GB_per_s"] = df.essential_bytes / df["median"] / 1e9
    ceilings = {a.label: a for a in archives}
    # A host variant's roof is that of the cache level its working set (the call's modelled traffic) fits: a point
    # of a few MB reads from a CPU's caches, faster than the memory roof host_read (Archive.host_roof).
    df["host_roof"] = [ceilings[label].host_roof(nbytes, A.clock_of(timer)) if not dev else ""
                       for label, timer, nbytes, dev in zip(df.archive, df.timer, df["bytes"], on_device(df))]
    for roof in ROOFS:
        names = df.host_roof if roof in HOST_ROOFS else pd.Series(roof, index=df.index)
        bw = pd.Series([ceilings[label].ceiling(name, A.clock_of(timer)) or np.nan
                        for label, timer, name in zip(df.archive, df.timer, names)], index=df.index, dtype=float) / 1e9
        applies = on_device(df) if roof in DEVICE_ROOFS else ~on_device(df)
        df[f"{roof}_GB_per_s"] = bw.where(applies)
        df[f"pct_of_{roof}"] = 100 * df.essential_GB_per_s / df[f"{roof}_GB_per_s"]
    df = df.rename(columns={"median": "median_s", "q1": "q1_s", "q3": "q3_s"})
    return df.sort_values(POINT + ["on_device", "family", "backend"])[COLUMNS + ["host_roof"]]


def side_of(implementation):
    """kokkos, handwritten (CUDA escape path or vendor library) or None (the CPU reference)."""
    if implementation == "reference":
        return None
    return "handwritten" if is_handwritten(implementation) else "kokkos"


def kokkos_vs_handwritten(resident):
    """Per point: the best Kokkos device variant's time over the best handwritten one's, both by the same
    timer (device events where both sides have them, else the resident wall clock)."""
    device = resident[on_device(resident)]
    device = device.assign(side=device.implementation.map(side_of)).dropna(subset=["side"])
    rows = []
    for key, g in device.groupby(POINT):
        for timer in DEVICE_TIMERS:
            t = g[g.timer == timer]
            kokkos, hand = t[t.side == "kokkos"], t[t.side == "handwritten"]
            if len(kokkos) and len(hand):
                k, h = kokkos.loc[kokkos["median"].idxmin()], hand.loc[hand["median"].idxmin()]
                rows.append(dict(zip(POINT, key), point=A.point_label(key[4], key[5], key[3], key[6]), timer=timer,
                                 kokkos_variant=k.variant, kokkos_s=k["median"], handwritten_variant=h.variant,
                                 handwritten_s=h["median"], kokkos_over_handwritten=k["median"] / h["median"]))
                break
    return pd.DataFrame(rows, columns=RATIO_COLUMNS)


def shown_experiment(df, operation):
    """The experiment report.md shows an operation from: the one with the most points of it."""
    g = df[df.operation == operation].drop_duplicates(["archive", "experiment", *A.EXTENTS])
    return g.groupby(["archive", "experiment"]).size().idxmax()


def shown_points(g, most=MAX_POINTS_SHOWN):
    """At most `most` points, smallest to largest, evenly spaced through the tested ones."""
    points = g[[*A.EXTENTS, "point"]].drop_duplicates().sort_values(list(A.EXTENTS))
    if len(points) <= most:
        return points
    picks = np.unique(np.linspace(0, len(points) - 1, most).round().astype(int))
    return points.iloc[picks]


def pct(value):
    """A share of a roof: whole percent, two significant digits below 10% (small tables stay legible)."""
    if not np.isfinite(value):
        return "n/a"
    return A.roof_share(value) if value >= 10 else f"{value:.2g}%"


def cell(r):
    roofs = DEVICE_ROOFS if bool(r.on_device) else HOST_ROOFS
    shares = " / ".join(pct(getattr(r, f"pct_of_{roof}")) for roof in roofs)
    return f"{A.fmt_seconds(r.median_s)}, {r.essential_GB_per_s:,.1f} GB/s ({shares})"


def operation_table(g, ratios):
    """One operation within one experiment: a row per family@backend, a column per shown point, and the
    Kokkos / handwritten ratio as the last row."""
    points = shown_points(g)
    header = ["| family (timer) | " + " | ".join(points.point) + " |", "| --- |" + " --- |" * len(points)]
    lines = []
    order = g[g.point == points.point.iloc[-1]].sort_values("essential_GB_per_s", ascending=False)
    families = list(dict.fromkeys(zip(order.family, order.backend))) + \
        [fb for fb in dict.fromkeys(zip(g.family, g.backend)) if fb not in set(zip(order.family, order.backend))]
    for family, backend in families:
        f = g[(g.family == family) & (g.backend == backend)]
        timers = "/".join(dict.fromkeys(f.timer))
        cells = []
        for p in points.itertuples():
            hit = f[f.point == p.point]
            cells.append(cell(hit.iloc[0]) if len(hit) else "")
        lines.append(f"| {family}@{backend} ({timers}) | " + " | ".join(cells) + " |")
    if len(ratios):
        cells = []
        for p in points.itertuples():
            hit = ratios[ratios.point == p.point]
            cells.append(f"{hit.kokkos_over_handwritten.iloc[0]:.2f}× (`{hit.kokkos_variant.iloc[0]}` / "
                         f"`{hit.handwritten_variant.iloc[0]}`)" if len(hit) else "")
        lines.append("| **best Kokkos ÷ best handwritten CUDA/vendor** | " + " | ".join(cells) + " |")
    return header + lines


def roof_note(df, archive):
    d = df[df.archive == archive]
    parts = [f"{roof} {d[f'{roof}_GB_per_s'].dropna().iloc[0]:,.0f} GB/s"
             for roof in DEVICE_ROOFS if d[f"{roof}_GB_per_s"].notna().any()]
    host = d[d.host_read_GB_per_s.notna()].drop_duplicates("host_roof").sort_values("host_roof")
    parts += [f"{r.host_roof} {r.host_read_GB_per_s:,.0f} GB/s" for r in host.itertuples()]
    return "; ".join(parts) if parts else "no roof measured"


def headline(operation, g, ratios, arch, exp):
    """One sentence per operation for the summary: its best family against the roofs, and the Kokkos cost."""
    device = on_device(g)
    side = g[device] if device.any() else g
    # At the largest point, whose data is far beyond every cache: the rate there is the memory's, while a small
    # point's may come from L2 (or a CPU's caches) and exceed the DRAM roof.
    largest = side.sort_values(list(A.EXTENTS)).iloc[-1]
    at_largest = side[side.point == largest.point]
    best = at_largest.loc[at_largest.essential_GB_per_s.idxmax()]
    roofs = DEVICE_ROOFS if bool(best.on_device) else HOST_ROOFS
    shares = ", ".join(f"{pct(best[f'pct_of_{roof}'])} of {best.host_roof if roof in HOST_ROOFS else roof}"
                       for roof in reversed(roofs) if np.isfinite(best[f"pct_of_{roof}"]))
    text = (f"{operation} ({arch}/{exp}): best `{best.family}@{best.backend}` {best.essential_GB_per_s:,.0f} GB/s "
            f"essential" + (f" = {shares}" if shares else " (no roof measured)") + f" at {best.point}")
    if len(ratios):
        at = ratios[ratios.point == best.point]
        r = at.iloc[0] if len(at) else ratios.sort_values(list(A.EXTENTS)).iloc[-1]
        text += (f"; best Kokkos takes {r.kokkos_over_handwritten:.2f}× the best handwritten CUDA/vendor time at "
                 f"{r.point} (`{r.kokkos_variant}` vs `{r.handwritten_variant}`, {r.timer})")
    return text + "."


EXPLANATION = ("Per operation and point, each family's fastest variant at its resident timer (device variants: "
               "device events where measured, else the resident wall clock; host variants: host_wall), as essential "
               "bytes (the operation's minimum traffic, from the variants table) over the median. Shares: device "
               "families against device_read / device_copy, host families against the roof of the cache level their "
               "working set (the call's modelled traffic) fits, host_read_l1, _l2, _l3, or the memory's, host_read "
               "(`host_roof` in the CSV), each measured in the variant's own archive. The Kokkos row divides the "
               "fastest Kokkos device variant's time by the fastest handwritten CUDA or vendor-library variant's "
               "(implementation {families}), by the same timer; above 1, Kokkos is slower.")


@section("bandwidth_by_operation", "Bandwidth by operation", order=5)
def bandwidth_by_operation(inputs, sec):
    resident = resident_points(inputs.points)
    if resident.empty:
        return sec.skip("no resident timing (host_wall, resident_wall, device_events) of any variant")
    df = with_roofs(best_per_family(resident), inputs.archives)
    ratios = kokkos_vs_handwritten(resident)
    inputs.write_csv(df, "bandwidth_by_operation.csv", sec,
                     "per operation, point, family and backend: the fastest variant's resident median, essential GB/s "
                     "and % of the archive's device_read, device_copy (device) or host roof (host: host_read_GB_per_s "
                     "and pct_of_host_read are of the level named in host_roof)")
    if len(ratios):
        inputs.write_csv(ratios, "kokkos_vs_handwritten.csv", sec,
                         "per operation and point: best Kokkos device time / best handwritten CUDA or vendor time")
    sec.lines += [EXPLANATION.format(families=", ".join(HANDWRITTEN)), ""]
    compute_bound = set(resident[resident.compute_ceiling.fillna("") != ""].operation)
    if compute_bound:
        sec.lines += [f"Compute-bound operations ({', '.join(sorted(compute_bound))}) are in *Compute by operation* "
                      "(TFLOP/s against the compute roofs); their bandwidth rows are in the CSV.", ""]
    for operation in sorted(set(df.operation.unique()) - compute_bound):
        arch, exp = shown_experiment(df, operation)
        g = df[(df.operation == operation) & (df.archive == arch) & (df.experiment == exp)]
        r = ratios[(ratios.operation == operation) & (ratios.archive == arch) & (ratios.experiment == exp)]
        others = df[(df.operation == operation)][["archive", "experiment"]].drop_duplicates()
        sec.lines += [f"**{operation}** in {arch}/{exp} (median, essential GB/s, % of "
                      f"{' / '.join(DEVICE_ROOFS)} or the host roof of the point's cache level; "
                      f"roofs: {roof_note(df, arch)})"
                      + (f"; {len(others) - 1} other experiment(s) in the CSV" if len(others) > 1 else "") + ":", ""]
        sec.lines += operation_table(g, r) + [""] + throttle.note(inputs, g[g.point.isin(shown_points(g).point)])
        sec.headlines.append(headline(operation, g, r, arch, exp))
    return sec.done(df)
