"""Runtime against the threads per block, for points timed with an explicit block size.

The table names each variant's best and worst block by their medians and states no verdict on them, so each
median is printed with its spread (IQR) for a reader to judge how far apart they are; the throttled samples the
table's medians rest on are disclosed under it (report/throttle.py)."""
from ... import archive as A
from .. import section, throttle
from ..figures import colours, grid, save
from .speedups import median_cell

KEYS = ["archive", "experiment", "variant", *A.point_key("samples"), "timer"]
COLUMNS = KEYS + ["axes", "n", "median", "q1", "q3"]


def preferred_timer(df):
    """Device events where measured (no host-side launch cost), else the first timer present."""
    return "device_events" if (df.timer == "device_events").any() else sorted(df.timer)[0]


def spread_table(df, timer):
    """Per variant and shape: the best block, the worst (each median with its IQR), and how much slower the
    worst's median is."""
    lines = [f"Best and worst block size per variant and shape ({timer} median (IQR: first–third quartile of its "
             "samples) of each; worst as a multiple of best, a ratio of medians; no verdict is stated, the two IQRs "
             "show how far apart their samples lie):", ""]
    g = df[df.timer == timer]
    shapes = sorted(set(zip(g.rows, g.features, g.depth, g["axes"].fillna("").astype(str))))
    lines += ["| variant | " + " | ".join(A.point_label(r, f, axes, d) for r, f, d, axes in shapes) + " |",
              "| --- |" + " --- |" * len(shapes)]
    for variant, v in g.groupby("variant"):
        cells = []
        for r, f, d, _ in shapes:
            p = v[(v.rows == r) & (v.features == f) & (v.depth == d)]
            if p.empty:
                cells.append("")
                continue
            best, worst = p.loc[p["median"].idxmin()], p.loc[p["median"].idxmax()]
            cells.append(f"best {best.block_size}: {median_cell(best['median'], best.q1, best.q3)}, worst "
                         f"{worst.block_size}: {median_cell(worst['median'], worst.q1, worst.q3)} "
                         f"(×{worst['median'] / best['median']:.2f})")
        lines.append(f"| `{variant}` | " + " | ".join(cells) + " |")
    return lines


def block_size_figure(df, timer, out):
    """One panel per shape: each variant's time over its own best block, so the panels share one scale."""
    g = df[df.timer == timer]
    shapes = sorted(set(zip(g.rows, g.features, g.depth, g["axes"].fillna("").astype(str))))
    fig, axes = grid(len(shapes), 2, width=5.2, height=3.6, sharey=True)
    colour = colours(g.variant)
    for ax, (rows, feats, depth, names) in zip(axes, shapes):
        for variant, s in g[(g.rows == rows) & (g.features == feats) & (g.depth == depth)].groupby("variant"):
            s = s.sort_values("block_size")
            ax.plot(s.block_size, s["median"] / s["median"].min(), marker="o", ms=3.5, color=colour[variant],
                    label=variant)
        ax.axhline(1.0, color="black", lw=0.8, ls="--")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("block size (threads)")
        ax.set_ylabel("time / its best block")
        ax.set_title(A.point_label(rows, feats, names, depth), fontsize=10)
        ax.grid(True, alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=3, fontsize=8, frameon=False)
    fig.suptitle(f"Block size: {timer} median relative to each variant's best block", fontsize=11)
    return save(fig, out, "block_size.png")


@section("block_size", "Block size", order=80)
def block_size(inputs, sec):
    s = inputs.points[inputs.points.block_size > 0]
    if s.empty:
        return sec.skip("no samples with an explicit block size (the `block_size` experiment)")
    has_occupancy = "occupancy" in s.columns and (s.occupancy.fillna(0) > 0).any()
    columns = COLUMNS + (["occupancy"] if has_occupancy else [])
    df = s[columns].sort_values(KEYS)
    occupancy_note = "; calculated occupancy (active warps / maximum) as recorded by the run" if has_occupancy else ""
    inputs.write_csv(df, "block_size.csv", sec, "median/IQR (s) per block size and layout" + occupancy_note)
    if not has_occupancy:
        sec.lines += ["No calculated occupancy in these archives (0 or absent): runtime only.", ""]
    timer = preferred_timer(df)
    sec.lines.extend(spread_table(df, timer))
    # Every block of the timer, not only the best and worst: which block is either depends on all their medians.
    sec.lines += [""] + throttle.note(inputs, df[df.timer == timer])
    sec.figures.append((block_size_figure(df, timer, inputs.out), f"Runtime vs block size ({timer}), one panel per "
                        "shape, each variant relative to its own best block; occupancy is in `block_size.csv`"))
    return sec.done(df)
