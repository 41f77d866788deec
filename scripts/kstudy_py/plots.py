"""Figures for `kstudy report` (matplotlib, Agg backend: no display needed)."""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


BOUNDARY_ORDER = ["host_wall", "resident_wall", "device_events", "one_shot pinned", "one_shot pageable",
                  "pipelined pinned", "pipelined pageable", "one_shot_alloc pinned", "one_shot_alloc pageable"]
MARKERS = {"host_wall": "s", "resident_wall": "o", "device_events": "D", "one_shot pinned": "^",
           "one_shot pageable": "v", "pipelined pinned": ">", "pipelined pageable": "<",
           "one_shot_alloc pinned": "P", "one_shot_alloc pageable": "X"}
DPI = 110


def colours(names):
    names = sorted(set(names))
    cmap = plt.get_cmap("tab20")
    return {n: cmap(i % 20) for i, n in enumerate(names)}


def series_label(row, multi):
    return f"{row.variant} [{row.archive}/{row.experiment}]" if multi else row.variant


def save(fig, out, name):
    fig.savefig(out / name, dpi=DPI, bbox_inches="tight")
    plt.close(fig)
    return name


def speedup_vs_rows(sp, out):
    if sp.rows.nunique() < 2:
        return None
    # One feature width: the one with the most distinct row counts.
    feats = sp.groupby("features").rows.nunique().idxmax()
    sp = sp[sp.features == feats]
    multi = sp[["archive", "experiment"]].drop_duplicates().shape[0] > 1
    sp = sp.assign(series=[series_label(r, multi) for r in sp.itertuples()])
    boundaries = [b for b in BOUNDARY_ORDER if b in set(sp.boundary)] + \
                 sorted(set(sp.boundary) - set(BOUNDARY_ORDER))
    n = len(boundaries)
    cols = min(3, n)
    nrows = (n + cols - 1) // cols
    fig, axes = plt.subplots(nrows, cols, figsize=(5.2 * cols, 4.0 * nrows), squeeze=False, sharex=True)
    col = colours(sp.series)
    handles = {}
    for ax, b in zip(axes.flat, boundaries):
        g = sp[sp.boundary == b]
        for name, s in g.groupby("series"):
            s = s.sort_values("rows")
            (h,) = ax.plot(s.rows, s.speedup, marker=MARKERS.get(b, "o"), ms=3.5, lw=1.2, color=col[name], label=name)
            handles.setdefault(name, h)
        ax.axhline(1.0, color="black", lw=0.8, ls="--")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(b, fontsize=10)
        ax.grid(True, which="major", alpha=0.3)
        ax.set_xlabel("rows")
        ax.set_ylabel("speedup over CPU reference")
    for ax in list(axes.flat)[n:]:
        ax.set_visible(False)
    base = sp.baseline.iloc[0]
    fig.suptitle(f"Speedup vs rows at {feats} features (baseline {base}, host_wall median; dashed: parity)", fontsize=11)
    fig.legend(handles.values(), handles.keys(), loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=3, fontsize=8,
               frameon=False)
    fig.tight_layout()
    return save(fig, out, "speedup_vs_rows.png")


def waterfall(df, cpus, out, rows, feats):
    """cpus: [(label, seconds)] reference lines; drawn when on scale, else named in the title."""
    kinds = list(dict.fromkeys(df.memory_kind))
    fig, axes = plt.subplots(1, len(kinds), figsize=(6.5 * len(kinds), 4.8), squeeze=False)
    variant = df.variant.iloc[0]
    sources = set()
    short = {"kernel (resident_wall)": "kernel\n(resident_wall)",
             "other (one_shot - sum of the above)": "other\n(remainder)",
             "allocation (one_shot_alloc - one_shot)": "allocation"}
    for ax, memory in zip(axes.flat, kinds):
        g = df[df.memory_kind == memory]
        steps = g[~g.component.str.contains("measured total")]
        totals = g[g.component.str.contains("measured total")]
        top = max(totals.seconds.max(), np.nancumsum(steps.seconds.to_numpy()).max()) * 1e3
        bottom = 0.0
        labels, xs = [], []
        for i, r in enumerate(steps.itertuples()):
            v = r.seconds * 1e3 if np.isfinite(r.seconds) else 0.0
            colour = {"measured": "#4c72b0", "remainder": "#999999"}.get(r.source, "#dd8452")
            if r.source not in ("measured", "remainder"):
                sources.add(r.source)
            y0 = bottom if v >= 0 else bottom + v
            ax.bar(i, abs(v), bottom=y0, color=colour, edgecolor="black", lw=0.5)
            ax.text(i, bottom + max(v, 0) + 0.01 * top, f"{v:+.3g}", ha="center", va="bottom", fontsize=8)
            bottom += v
            labels.append(short.get(r.component, r.component.replace(" ", "\n", 1)))
            xs.append(i)
        for r in totals.itertuples():
            i = len(xs)
            ax.bar(i, r.seconds * 1e3, color="#55a868", edgecolor="black", lw=0.5)
            ax.text(i, r.seconds * 1e3 + 0.01 * top, f"{r.seconds * 1e3:.3g}", ha="center", va="bottom", fontsize=8)
            labels.append(r.component.replace(" (measured total)", "\n(measured)"))
            xs.append(i)
        ylim = top * 1.3
        kernel = steps.seconds.iloc[0]
        total = totals.seconds.iloc[0]
        title = f"{memory} host memory: one-shot = {total / kernel:.1f}× resident"
        for k, (label, cpu) in enumerate(cpus):
            ratio = f"{label}: speedup {cpu / kernel:.1f}× resident → {cpu / total:.2f}× one-shot"
            if cpu * 1e3 <= ylim:
                c = ["crimson", "purple", "teal"][k % 3]
                ax.axhline(cpu * 1e3, color=c, ls="--", lw=1)
                ax.text(len(xs) - 0.5, cpu * 1e3, f"{label} {cpu * 1e3:.3g} ms", color=c, ha="right", va="bottom",
                        fontsize=8)
            else:
                ratio += f" ({cpu * 1e3:.3g} ms, off scale)"
            title += "\n" + ratio
        ax.set_ylim(0, ylim)
        ax.set_xticks(xs)
        ax.set_xticklabels(labels, fontsize=7)
        ax.set_ylabel("milliseconds")
        ax.set_title(title, fontsize=9)
        ax.grid(True, axis="y", alpha=0.3)
    fig.suptitle(f"{variant} at {rows:,}×{feats}: resident → one-shot\nblue measured, orange derived from "
                 f"{'; '.join(sorted(sources)) or 'n/a'}, grey remainder, green measured total", fontsize=10)
    fig.tight_layout()
    return save(fig, out, f"waterfall_{rows}x{feats}.png")


def layout_ratio(df, out):
    """Ratio to feature-major vs feature width, one line per (row-major variant, rows) measured at two or
    more widths; None when no series has two widths."""
    keys = ["archive", "experiment", "row_variant", "rows", "timer"]
    series = [(k, g.sort_values("features")) for k, g in df.groupby(keys) if g.features.nunique() >= 2]
    if not series:
        return None
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    cmap = plt.get_cmap("tab10")
    for i, ((arch, exp, rv, rows, timer), g) in enumerate(series):
        c = cmap(i % 10)
        ax.plot(g.features, g.row_over_feature, marker="o", color=c, label=f"{rv} / feature-major, {rows:,} rows")
        fam = g.family.iloc[0]
        if g.padded_over_feature.notna().any():
            ax.plot(g.features, g.padded_over_feature, marker="s", ls=":", color=c,
                    label=f"{fam} padded / feature-major, {rows:,} rows")
    ax.axhline(1, color="black", lw=0.8, ls="--")
    ax.set_xscale("log", base=2)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("features")
    ax.set_ylabel("time ratio to feature-major (resident median)")
    ax.set_title("Layout cost vs feature width (below 1: faster than feature-major)", fontsize=10)
    handles, labels = ax.get_legend_handles_labels()
    uniq = dict(zip(labels, handles))
    ax.legend(uniq.values(), uniq.keys(), fontsize=7)
    ax.grid(True, which="both", alpha=0.3)
    return save(fig, out, "layout_ratio.png")


def transfer(df, out):
    fig, ax = plt.subplots(figsize=(7, 4.5))
    styles = {("h2d", "pinned"): ("#4c72b0", "-"), ("d2h", "pinned"): ("#dd8452", "-"),
              ("h2d", "pageable"): ("#4c72b0", "--"), ("d2h", "pageable"): ("#dd8452", "--")}
    multi = df.archive.nunique() > 1
    for (arch, d, m), g in df.groupby(["archive", "direction", "memory_kind"]):
        g = g.sort_values("bytes")
        c, ls = styles.get((d, m), (None, "-"))
        ax.plot(g.bytes, g.GiB_per_s, marker="o", color=c, ls=ls, label=f"{d} {m}" + (f" [{arch}]" if multi else ""))
        ax.fill_between(g.bytes, g.GiB_per_s_at_q3, g.GiB_per_s_at_q1, color=c, alpha=0.15)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("bytes per copy")
    ax.set_ylabel("GiB/s (median; band: IQR)")
    ax.set_title("Host↔device copy bandwidth vs size")
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    return save(fig, out, "transfer_bandwidth.png")


def block_size(df, out):
    groups = list(df.groupby(["rows", "features", "timer"]))
    fig, axes = plt.subplots(1, len(groups), figsize=(5.5 * len(groups), 4.2), squeeze=False)
    col = colours(df.variant)
    for ax, ((rows, feats, timer), g) in zip(axes.flat, groups):
        for v, s in g.groupby("variant"):
            s = s.sort_values("block_size")
            ax.errorbar(s.block_size, s["median"] * 1e6, yerr=[(s["median"] - s.q1) * 1e6, (s.q3 - s["median"]) * 1e6],
                        marker="o", ms=3, capsize=2, color=col[v], label=v)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("block size (threads)")
        ax.set_ylabel("µs (median, IQR bars)")
        ax.set_title(f"{rows:,}×{feats}, {timer}", fontsize=10)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
        if "occupancy" in g.columns and (g.occupancy > 0).any():
            occ = ax.twinx()
            for v, s in g[g.occupancy > 0].groupby("variant"):
                s = s.sort_values("block_size")
                occ.plot(s.block_size, s.occupancy, ls=":", marker=".", color=col[v])
            occ.set_ylim(0, 1.05)
            occ.set_ylabel("calculated occupancy (dotted)")
    fig.tight_layout()
    return save(fig, out, "block_size.png")


def roof_lines(c):
    """Ceilings grouped when within 5% of each other, so their labels do not overprint."""
    groups = []
    for r in sorted(c.itertuples(), key=lambda r: -r.bytes_per_second):
        if groups and groups[-1][0] <= r.bytes_per_second * 1.05:
            groups[-1][1].append(r)
        else:
            groups.append([r.bytes_per_second, [r]])
    return groups


def roofline(df, ceilings, out):
    shapes = list(dict.fromkeys(df["shape"]))
    # Two sub-figures laid out independently, so the bars' long labels do not squeeze the rooflines.
    fig = plt.figure(figsize=(7.5 * len(shapes), 13), layout="constrained")
    top, bottom = fig.subfigures(2, 1, height_ratios=[1, 1.25])
    roof_axes = top.subplots(1, len(shapes), squeeze=False)[0]
    bar_axes = bottom.subplots(1, len(shapes), squeeze=False)[0]
    col = colours(df.variant)
    for k, shape in enumerate(shapes):
        ax = roof_axes[k]
        g = df[df["shape"] == shape]
        ai = g.ai_flop_per_byte.to_numpy()
        lo = 0.1 if g.model_ai_flop_per_byte.min() > 0.2 else 0.05
        x = np.logspace(np.log10(lo), 1, 50)
        arch = g.archive.iloc[0]
        c = ceilings.get(arch)
        if c is not None:
            for bw, members in roof_lines(c):
                y = x * bw / 1e9
                device = any("device" in m.name for m in members)
                ax.plot(x, y, color="black", lw=0.9, ls="-" if device else ":")
                label = " / ".join(f"{m.name} {m.bytes_per_second / 1e9:,.0f}" for m in members) + " GB/s"
                ax.text(x[-1], y[-1], " " + label, fontsize=7, va="center")
        for r in g.itertuples():
            ax.plot(r.ai_flop_per_byte, r.gflop_per_s, marker=MARKERS.get(r.boundary, "o"), ls="none", ms=6,
                    color=col[r.variant], markeredgecolor="black", markeredgewidth=0.3)
            if r.timer in ("resident_wall", "host_wall") and np.isfinite(r.model_ai_flop_per_byte) and \
                    abs(r.model_ai_flop_per_byte - r.ai_flop_per_byte) > 1e-3 * r.ai_flop_per_byte:
                ax.plot(r.model_ai_flop_per_byte, r.gflop_per_s, marker=MARKERS.get(r.boundary, "o"), ls="none", ms=6,
                        markerfacecolor="none", color=col[r.variant])
        ax.axvline(ai[0], color="grey", lw=0.6, ls="--")
        ax.text(ai[0], 0.01, f" AI = {ai[0]:.2f}", fontsize=7, color="grey", va="bottom", transform=ax.get_xaxis_transform())
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(lo, 60)
        ax.set_xlabel("arithmetic intensity (flop / essential byte)")
        ax.set_ylabel("achieved GFLOP/s")
        ax.set_title(f"{shape} [{arch}]", fontsize=10)
        ax.grid(True, which="both", alpha=0.25)
        boundary_handles = [plt.Line2D([], [], marker=m, ls="none", color="grey", label=b) for b, m in MARKERS.items()
                            if b in set(g.boundary)]
        ax.legend(handles=boundary_handles, fontsize=7, loc="lower right", title="timing boundary", title_fontsize=7)
        # The same points as a fraction of the roof that applies to them (bandwidth ceiling x intensity).
        bx = bar_axes[k]
        h = g[g.timer.isin(["resident_wall", "host_wall"]) |
              ((g.timer == "one_shot") & (g.memory_kind == "pinned"))].dropna(subset=["fraction_of_roof"])
        h = h.sort_values(["roof", "fraction_of_roof"])
        ylabels = [f"{r.variant}  ·  {r.boundary}" for r in h.itertuples()]
        bx.barh(range(len(h)), 100 * h.fraction_of_roof, color=[col[v] for v in h.variant], edgecolor="black", lw=0.3)
        for i, r in enumerate(h.itertuples()):
            bx.text(100 * r.fraction_of_roof, i, f" {100 * r.fraction_of_roof:.0f}% of {r.roof}", va="center", fontsize=6.5)
        bx.set_yticks(range(len(h)))
        bx.set_yticklabels(ylabels, fontsize=7)
        bx.set_xlim(0, 125)
        bx.set_xlabel("% of the matching roof (essential bytes / time / ceiling)")
        bx.set_title(f"{shape}: resident and one-shot (pinned) against their roofs", fontsize=9)
        bx.grid(True, axis="x", alpha=0.3)
    fig.suptitle("Roofline against the archive's measured ceilings (solid: device roofs, dotted: host and transfer "
                 "roofs;\nfilled: essential bytes; hollow: a resident point placed at its variant's modelled traffic; "
                 "colour: variant, as in the bars)", fontsize=10)
    return save(fig, out, "roofline.png")
