"""Roofline: achieved flops at the operation's essential arithmetic intensity against the archive's measured
bandwidth ceilings, at the reference shape (`--shape ROWSxFEATURES`) and the largest tested one. Operations of
two axes only, since the reference shape names two extents; `roofline_by_operation` draws every operation."""
import numpy as np
import pandas as pd

from ... import archive as A
from .. import section
from ..figures import MARKERS, colours, plt, save

# The ceiling that bounds each timer; host-in/host-out timers are bounded by the upload from their memory kind.
ROOF_OF_TIMER = {"resident_wall": "device_read", "device_events": "device_read", "host_wall": "host_read"}
RESIDENT_TIMERS = ("resident_wall", "host_wall")


def two_axes(points):
    """Points of operations over two axes, whose extents a ROWSxFEATURES reference shape can name."""
    return points["axes"].fillna("").str.count(",") == 1


def shapes_to_show(inputs, s):
    """(label, points) at the reference shape and at the largest tested table."""
    rows, feats = inputs.shape
    picks = []
    ref = s[(s.rows == rows) & (s.features == feats)]
    if len(ref):
        picks.append((inputs.shape_label(), ref))
    size = s.rows * s.features
    largest = s[size == size.max()]
    if largest.rows.iloc[0] != rows or largest.features.iloc[0] != feats:
        label = inputs.shape_label(largest.rows.iloc[0], largest.features.iloc[0])
        picks.append((f"{label} (largest tested)", largest))
    return picks


def roofline_row(label, r, bw, roof):
    """model_bytes: the samples' bytes of that timer (the variant's modelled traffic, plus the copies for a
    host-in/host-out timer)."""
    fl, eb = r.essential_flops, r.essential_bytes
    ai = fl / eb
    gflops = fl / r["median"] / 1e9
    return {"shape": label, "archive": r.archive, "experiment": r.experiment, "variant": r.variant,
            "family": r.family, "timer": r.timer,
            "memory_kind": r.memory_kind, "boundary": r.boundary, "rows": r.rows, "features": r.features, "flops": fl,
            "essential_bytes": eb, "model_bytes": r.bytes, "ai_flop_per_byte": ai,
            "model_ai_flop_per_byte": fl / r.bytes if r.bytes else np.nan,
            "median_s": r["median"], "gflop_per_s": gflops, "essential_GB_per_s": eb / r["median"] / 1e9,
            "roof": roof or "", "roof_GB_per_s": bw / 1e9 if bw else np.nan,
            "roof_gflop_per_s": ai * bw / 1e9 if bw else np.nan,
            # gflops / (ai * bw) written as essential bytes per second over the roof: the same share, and defined
            # for an operation without arithmetic (transpose: ai = 0)
            "fraction_of_roof": eb / r["median"] / bw if bw else np.nan}


def roofline_table(inputs, picks):
    out = []
    for label, g in picks:
        for _, r in g.iterrows():
            roof = ROOF_OF_TIMER.get(r.timer)
            if roof == "host_read":  # the roof of the cache level the call's traffic fits (Archive.host_roof)
                roof = inputs.archive_of(r.archive).host_roof(r.bytes, A.clock_of(r.timer))
            if roof is None and r.memory_kind in ("pinned", "pageable"):
                roof = f"h2d_{r.memory_kind}"
            bw = inputs.archive_of(r.archive).ceiling(roof, A.clock_of(r.timer)) if roof else None
            out.append(roofline_row(label, r, bw, roof))
    return pd.DataFrame(out)


def best_lines(df):
    """Per shape: the best fraction of the roof that bounds each kind of timing."""
    lines = []
    for label, g in df.groupby("shape", sort=False):
        for timers, roof_name in ((("resident_wall", "device_events"), "device_read"), (("host_wall",), "host_read")):
            h = g[g.timer.isin(timers) & g.fraction_of_roof.notna()]
            if len(h):
                b = h.loc[h.fraction_of_roof.idxmax()]
                lines.append(f"- {label}, {'/'.join(timers)}: best `{b.variant}` "
                             f"({b.timer}, {b.archive}/{b.experiment}) at {b.essential_GB_per_s:.0f} GB/s essential "
                             f"= {100 * b.fraction_of_roof:.0f}% of "
                             f"{b.roof or roof_name} ({b.roof_GB_per_s:.0f} GB/s)")
        for memory in ("pinned", "pageable"):
            h = g[(g.timer == "one_shot") & (g.memory_kind == memory) & g.fraction_of_roof.notna()]
            if len(h):
                b = h.loc[h.fraction_of_roof.idxmax()]
                lines.append(f"- {label}, one_shot {memory}: best `{b.variant}` ({b.archive}/{b.experiment}) at "
                             f"{b.essential_GB_per_s:.1f} GB/s essential = {100 * b.fraction_of_roof:.0f}% of "
                             f"h2d_{memory} ({b.roof_GB_per_s:.1f} GB/s)")
    return lines


def headline(df):
    parts = []
    for label, g in df.groupby("shape", sort=False):
        h = g[(g.roof == "device_read") & g.fraction_of_roof.notna()]
        if len(h):
            b = h.loc[h.fraction_of_roof.idxmax()]
            parts.append(f"{100 * b.fraction_of_roof:.0f}% at {label} (`{b.variant}`, {b.archive}/{b.experiment})")
    return ["Roofline, the best resident kernel's essential bytes over time as a share of the archive's measured "
            f"device read bandwidth: {'; '.join(parts)}."] if parts else []


def intensity_lines(inputs, df):
    lines = []
    for r in df.drop_duplicates("shape").itertuples():
        operations = sorted(set(inputs.points[(inputs.points.rows == r.rows) &
                                              (inputs.points.features == r.features)].operation.dropna()))
        lines.append(f"At {r.shape}, the {'/'.join(operations)} operation moves {r.essential_bytes / 1e6:.1f} MB of "
                     f"essential bytes and does {r.flops / 1e6:.1f} Mflop: intensity {r.ai_flop_per_byte:.2f} flop/B, "
                     "far below any machine balance point, so every roof that applies is a bandwidth roof.")
    return lines


@section("roofline", "Roofline", order=60)
def roofline(inputs, sec):
    # An operation without arithmetic (transpose) sits at intensity 0, off this figure's log axis: *Roofline by
    # operation* places it (and the essential-bandwidth sections rate it).
    s = inputs.points[(inputs.points.block_size == 0) & two_axes(inputs.points) & (inputs.points.essential_flops > 0)]
    if s.empty:
        return sec.skip("no experiment with timed variants of a two-axis operation (rows × features) that does "
                        "arithmetic; *Roofline by operation* covers the others")
    df = roofline_table(inputs, shapes_to_show(inputs, s))
    inputs.write_csv(df.drop(columns="family"), "roofline.csv", sec,
                     "arithmetic intensity = essential flops / essential bytes (the variants table); achieved "
                     "GFLOP/s; roof = the matching ceiling of the same archive × intensity")
    ceilings = {a.label: a.ceilings() for a in inputs.archives}
    sec.figures.append((roofline_figure(df, ceilings, inputs.primary_sweep(), inputs.out),
                        "Roofline: achieved GFLOP/s at the operation's essential arithmetic intensity against the "
                        "archive's measured bandwidth ceilings, one experiment per shape, the fastest variant of each "
                        "family per timing boundary (hollow: a resident point placed at its modelled traffic); below, "
                        "the same as a fraction of the roof that bounds it"))
    sec.lines += intensity_lines(inputs, df) + best_lines(df)
    sec.headlines.extend(headline(df))
    return sec.done(df)


def figure_points(g, preferred):
    """One experiment's points (`preferred` where it measured this shape, else the one with the most), and per
    family and boundary its fastest variant."""
    counts = g.groupby(["archive", "experiment"]).size()
    arch, exp = preferred if preferred in counts.index else counts.idxmax()
    g = g[(g.archive == arch) & (g.experiment == exp)]
    return arch, exp, g.loc[g.groupby(["family", "boundary"]).gflop_per_s.idxmax()]


def roof_lines(c):
    """Ceilings grouped when within 5% of each other, so their labels do not overprint."""
    groups = []
    # Only bandwidth roofs: a compute roof has no bytes (its line would sit at zero, off a log axis).
    for r in sorted((r for r in c.itertuples() if r.bytes_per_second > 0), key=lambda r: -r.bytes_per_second):
        if groups and groups[-1][0] <= r.bytes_per_second * 1.05:
            groups[-1][1].append(r)
        else:
            groups.append([r.bytes_per_second, [r]])
    return groups


def draw_roofs(ax, x, ceilings):
    for bw, members in roof_lines(ceilings):
        y = x * bw / 1e9
        device = any("device" in m.name for m in members)
        ax.plot(x, y, color="black", lw=0.9, ls="-" if device else ":")
        label = " / ".join(f"{m.name} {m.bytes_per_second / 1e9:,.0f}" for m in members) + " GB/s"
        ax.text(x[-1], y[-1], " " + label, fontsize=7, va="center")


def draw_roofline(ax, label, points, ceilings, colour):
    lo = 0.1 if points.model_ai_flop_per_byte.min() > 0.2 else 0.05
    x = np.logspace(np.log10(lo), 1, 50)
    if ceilings is not None:
        draw_roofs(ax, x, ceilings)
    for r in points.itertuples():
        marker = MARKERS.get(r.boundary, "o")
        ax.plot(r.ai_flop_per_byte, r.gflop_per_s, marker=marker, ls="none", ms=6, color=colour[r.family],
                markeredgecolor="black", markeredgewidth=0.3)
        if r.timer in RESIDENT_TIMERS and np.isfinite(r.model_ai_flop_per_byte) and \
                abs(r.model_ai_flop_per_byte - r.ai_flop_per_byte) > 1e-3 * r.ai_flop_per_byte:
            ax.plot(r.model_ai_flop_per_byte, r.gflop_per_s, marker=marker, ls="none", ms=6, markerfacecolor="none",
                    color=colour[r.family])
    ai = points.ai_flop_per_byte.iloc[0]
    ax.axvline(ai, color="grey", lw=0.6, ls="--")
    ax.text(ai, 0.01, f" AI = {ai:.2f}", fontsize=7, color="grey", va="bottom", transform=ax.get_xaxis_transform())
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, 60)
    ax.set_xlabel("arithmetic intensity (flop / essential byte)")
    ax.set_ylabel("achieved GFLOP/s")
    ax.set_title(label, fontsize=10)
    ax.grid(True, which="both", alpha=0.25)
    handles = [plt.Line2D([], [], marker=MARKERS.get(b, "o"), ls="none", color="grey", label=b)
               for b in dict.fromkeys(points.sort_values("gflop_per_s").boundary)]
    ax.legend(handles=handles, fontsize=7, loc="lower right", title="timing boundary", title_fontsize=7)


def draw_fractions(ax, label, points, colour):
    """Resident, host and pinned one-shot points as a fraction of the roof that bounds each."""
    h = points[points.timer.isin(["resident_wall", "host_wall"]) |
               ((points.timer == "one_shot") & (points.memory_kind == "pinned"))].dropna(subset=["fraction_of_roof"])
    h = h.sort_values(["roof", "fraction_of_roof"])
    ax.barh(range(len(h)), 100 * h.fraction_of_roof, color=[colour[f] for f in h.family], edgecolor="black", lw=0.3)
    for i, r in enumerate(h.itertuples()):
        ax.text(100 * r.fraction_of_roof, i, f" {100 * r.fraction_of_roof:.0f}% of {r.roof}", va="center", fontsize=7)
    ax.set_yticks(range(len(h)))
    ax.set_yticklabels([f"{r.family} · {r.boundary}" for r in h.itertuples()], fontsize=8)
    ax.set_xlim(0, 130)
    ax.set_xlabel("% of the matching roof (essential bytes / time / ceiling)")
    ax.set_title(f"{label}: fastest per family against its roof", fontsize=9)
    ax.grid(True, axis="x", alpha=0.3)


def roofline_figure(df, ceilings, preferred, out):
    shapes = list(dict.fromkeys(df["shape"]))
    fig, axes = plt.subplots(2, len(shapes), figsize=(7.5 * len(shapes), 10.5), squeeze=False, layout="constrained",
                             height_ratios=[1.2, 1])
    colour = colours(df.family)
    for k, shape in enumerate(shapes):
        arch, exp, points = figure_points(df[df["shape"] == shape], preferred)
        label = f"{shape} [{arch}/{exp}]"
        draw_roofline(axes[0][k], label, points, ceilings.get(arch), colour)
        draw_fractions(axes[1][k], label, points, colour)
    handles = [plt.Line2D([], [], marker="o", ls="none", color=colour[f], label=f) for f in sorted(colour)]
    fig.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=len(handles), fontsize=8,
               title="family", title_fontsize=8, frameon=False)
    fig.suptitle("Roofline against the archive's measured ceilings (solid: device roofs, dotted: host and transfer "
                 "roofs;\nfilled: essential bytes; hollow: a resident point at its variant's modelled traffic)",
                 fontsize=10)
    return save(fig, out, "roofline.png")
