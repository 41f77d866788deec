"""Speedups against the CPU reference of the same experiment, per timing boundary; the best variant per
regime; speedup vs rows, best per family."""
import pandas as pd

from ... import archive as A
from .. import section
from ..figures import MARKERS, colours, grid, ordered_boundaries, save
from ..variants import REFERENCE_FAMILY

COLUMNS = ["archive", "experiment", "variant", *A.point_key("samples", without=("block_size",)), "timer",
           "boundary", "n", "median", "q1", "q3", "baseline", "cpu_median", "cpu_q1", "cpu_q3", "speedup"]


def in_experiment(df, key):
    return df[(df.archive == key[0]) & (df.experiment == key[1])]


def best_per_boundary(points):
    """The fastest non-reference variant per timing boundary, boundaries in reading order."""
    g = points[points.family != REFERENCE_FAMILY]
    best = g.loc[g.groupby("boundary")["median"].idxmin()]
    return best.set_index("boundary").loc[ordered_boundaries(best.boundary)].reset_index()


def best_per_regime(inputs, operation):
    """Fastest variant per timing boundary at the smallest, reference and largest row counts of one experiment
    (the primary sweep at the reference width, else its most swept width) and one operation, so every speedup
    in a row shares that experiment's CPU reference of that operation."""
    rows, feats = inputs.shape
    sp = inputs.speedups[inputs.speedups.operation == operation]
    f = feats if (sp.features == feats).any() else sp.features.mode().iloc[0]
    key = inputs.primary_sweep(f, operation)
    sp = in_experiment(sp[sp.features == f], key)
    out = []
    for r in dict.fromkeys([sp.rows.min(), rows, sp.rows.max()]):
        if not (sp.rows == r).any():
            continue
        size = A.point_label(r, f, sp["axes"].iloc[0]) + (" (reference)" if r == rows and f == feats else "")
        at = sp[sp.rows == r]
        for b in ordered_boundaries(at.boundary):
            x = at[at.boundary == b].loc[lambda g: g["median"].idxmin()]
            out.append({"archive": key[0], "experiment": key[1], "size": size, "rows": r, "features": f,
                        "boundary": b, "variant": x.variant, "median": x["median"], "q1": x.q1, "q3": x.q3,
                        "baseline": x.baseline, "cpu_median": x.cpu_median, "speedup": x.speedup})
    df = pd.DataFrame(out)
    order = {b: i for i, b in enumerate(ordered_boundaries(df.boundary))}
    return df.sort_values(["boundary", "rows"], key=lambda c: c.map(order) if c.name == "boundary" else c)


def regime_findings(best):
    sizes = list(dict.fromkeys(best["size"]))
    lines = [f"Best variant per regime in {best.archive.iloc[0]}/{best.experiment.iloc[0]} (median; speedup over "
             "that experiment's CPU reference at the same size):", "",
             "| timing boundary | " + " | ".join(sizes) + " |", "| --- |" + " --- |" * len(sizes)]
    for b, g in best.groupby("boundary", sort=False):
        cells = []
        for size in sizes:
            h = g[g["size"] == size]
            cells.append("" if h.empty else
                         f"`{h.variant.iloc[0]}` {A.fmt_seconds(h['median'].iloc[0])} ({h.speedup.iloc[0]:.3g}×)")
        lines.append(f"| {b} | " + " | ".join(cells) + " |")
    return lines


def at_shape_lines(inputs, at, key):
    """The table at the reference shape, within one experiment (its own CPU reference)."""
    g = in_experiment(at, key)
    lines = [f"At {inputs.shape_label()} in {key[0]}/{key[1]}, baseline `{g.baseline.iloc[0]}` (host_wall) "
             f"{A.fmt_seconds(g.cpu_median.iloc[0])}; `speedup_{inputs.shape[0]}x{inputs.shape[1]}.csv` has every "
             "experiment that measured this shape:", "",
             "| boundary | best variant | median | speedup |", "| --- | --- | --- | --- |"]
    for best in best_per_boundary(g).itertuples():
        lines.append(f"| {best.boundary} | `{best.variant}` | {A.fmt_seconds(best.median)} | {best.speedup:.2f}× |")
    return lines


def headline(inputs, at, key):
    """Each boundary's fastest device variant at the reference shape, all against one experiment's CPU reference."""
    g = in_experiment(at, key)
    device = g[g.on_device.astype(bool)]
    best = best_per_boundary(device if len(device) else g)
    if best.empty:
        return []
    parts = [f"`{variant}` " + ", ".join(f"{r.boundary} {r.speedup:.3g}×" for r in v.itertuples())
             for variant, v in best.groupby("variant", sort=False)]
    return [f"Speedup at {inputs.shape_label()} ({key[0]}/{key[1]}, against its `{g.baseline.iloc[0]}` at "
            f"{A.fmt_seconds(g.cpu_median.iloc[0])}), the fastest {'device ' if len(device) else ''}variant per timing "
            "boundary: "
            + "; ".join(parts) + "."]


def best_per_family(sp):
    """Per boundary, family and row count: the family's fastest variant (highest speedup)."""
    sp = sp[sp.family != REFERENCE_FAMILY]
    return sp.loc[sp.groupby(["boundary", "family", "rows"]).speedup.idxmax()]


def speedup_figure(sp, key, out):
    """One panel per timing boundary, one line per family (its best variant at each row count)."""
    best = best_per_family(sp)
    boundaries = ordered_boundaries(best.boundary)
    fig, axes = grid(len(boundaries) + 1, 4)
    colour = colours(sp.family)
    for ax, b in zip(axes, boundaries):
        for family, s in best[best.boundary == b].groupby("family"):
            s = s.sort_values("rows")
            ax.plot(s.rows, s.speedup, marker=MARKERS.get(b, "o"), ms=3.5, lw=1.3, color=colour[family], label=family)
        ax.axhline(1.0, color="black", lw=0.8, ls="--")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(b, fontsize=10)
        ax.grid(True, which="major", alpha=0.3)
        ax.set_xlabel(sp["axes"].iloc[0].split(",")[0])  # the swept (first) axis: rows, n, ...
        ax.set_ylabel("speedup over CPU reference")
    legend = axes[-1]
    legend.axis("off")
    handles = [legend.plot([], [], color=colour[f], lw=2, label=f)[0] for f in sorted(set(best.family))]
    legend.legend(handles=handles, loc="center", title="family (its fastest variant)", fontsize=9, frameon=False)
    fig.suptitle(f"Speedup vs rows, {key[0]}/{key[1]} at {sp.features.iloc[0]} features, against its "
                 f"{sp.baseline.iloc[0]} (host_wall median); dashed: parity", fontsize=11)
    return save(fig, out, "speedup_vs_rows.png")


@section("speedups", "Speedups against the CPU reference", order=10, findings=True)
def speedups(inputs, sec):
    if inputs.points.empty:
        return sec.skip("no experiment with timed variants and accepted samples in the archives")
    if inputs.baselines.empty:
        return sec.skip(f"no `{REFERENCE_FAMILY}` host_wall samples: no CPU baseline to compare with")
    sp = inputs.speedups.sort_values(["archive", "experiment", "variant", "timer", *A.point_key("samples")])
    inputs.write_csv(sp[COLUMNS], "speedups.csv", sec, "every point: median/IQR (s) per variant and timing boundary, "
                     "speedup = the same experiment's CPU median / median")
    rows, feats = inputs.shape
    at = sp[(sp.rows == rows) & (sp.features == feats)]
    # The tables, headline and figure below describe one operation; speedups.csv has them all.
    operation = inputs.primary_operation()
    if sp.operation.nunique() > 1:
        sec.lines.append(f"Below: the {operation} operation (the most measured points); `speedups.csv` has "
                         f"every operation ({', '.join(sorted(sp.operation.unique()))}).")
    if at.empty:
        sec.lines.append(f"No point at {inputs.shape_label()}; see `speedups.csv` for every point.")
    else:
        inputs.write_csv(at[COLUMNS], f"speedup_{rows}x{feats}.csv", sec, f"the same at {inputs.shape_label()}")
        at = at[at.operation == operation]
        if len(at):
            # The rows sweep where it measured the shape, else the experiment with the most variants there.
            key = inputs.primary_sweep(feats, operation)
            if key not in set(zip(at.archive, at.experiment)):
                key = tuple(at.groupby(["archive", "experiment"]).variant.nunique().idxmax())
            sec.lines.extend(at_shape_lines(inputs, at, key))
            sec.headlines.extend(headline(inputs, at, key))
    best = best_per_regime(inputs, operation)
    inputs.write_csv(best, "best_per_regime.csv", sec, "fastest variant per timing boundary at the smallest, "
                     "reference and largest row counts of one experiment, against that experiment's CPU reference")
    sec.findings.extend(regime_findings(best))
    mine = sp[sp.operation == operation]
    feats_swept = mine.groupby("features").rows.nunique().idxmax()
    key = inputs.primary_sweep(feats_swept, operation)
    swept = in_experiment(mine[mine.features == feats_swept], key)
    if swept.rows.nunique() >= 2:
        sec.figures.append((speedup_figure(swept, key, inputs.out), f"Speedup over the CPU reference vs rows (log–log) "
                            f"in {key[0]}/{key[1]}: one panel per timing boundary, one line per variant family (its "
                            "fastest variant at each row count; `speedups.csv` has every variant); 1 = as fast as "
                            "the CPU"))
    return sec.done(sp)
