"""Speedups against the CPU reference of the same experiment, per timing boundary; the best variant per
regime; speedup vs rows, best per family.

Every speedup a table or sentence states is a comparison of the variant's samples with the reference's
(effects.py): the ratio of medians with its bootstrap interval and a Mann-Whitney U verdict, Holm-corrected over the
speedups of that table (or sentence), whose size is said under it; medians are printed with their IQR, the
reference's too, and the throttled samples they rest on are disclosed (report/throttle.py)."""
import pandas as pd

from ... import archive as A
from ... import effects
from .. import section, throttle
from ..inputs import PROBLEM, SHAPE
from ..figures import MARKERS, colours, grid, ordered_boundaries, save
from ..variants import REFERENCE_FAMILY

COLUMNS = ["archive", "experiment", "variant", *A.point_key("samples", without=("block_size",)), "timer",
           "boundary", "n", "median", "q1", "q3", "baseline", "cpu_median", "cpu_q1", "cpu_q3", "speedup"]
# best_per_regime.csv: the variant's and the reference's medians with their spread, the speedup with its interval,
# verdict and p_Holm over the table's family.
REGIME_COLUMNS = ["archive", "experiment", "size", *SHAPE, "boundary", "variant", "n", "median", "q1", "q3",
                  "baseline", "cpu_n", "cpu_median", "cpu_q1", "cpu_q3", "speedup", "speedup_low", "speedup_high",
                  "verdict", "p_holm"]


def median_cell(median, q1, q3):
    """A median with its interquartile range."""
    return f"{A.fmt_seconds(median)} ({A.fmt_seconds(q1)}–{A.fmt_seconds(q3)})"


def against_reference(inputs, rows):
    """{row label: Comparison of the row's samples with its CPU reference's}, one family over `rows` (rows of
    inputs.speedups), Holm-resolved; with the reference rows of inputs.points (for their spread and throttle
    note), keyed like the comparisons."""
    refs = inputs.reference_points(rows)
    keys = ["archive", "experiment", *PROBLEM]
    family, found, ref_of = effects.Family(), {}, {}
    for i, r in rows.iterrows():
        hit = refs[(refs.variant == r.baseline)
                   & pd.concat([refs[k] == r[k] for k in keys], axis=1).all(axis=1)]
        if hit.empty:
            continue
        ref_of[i] = hit.iloc[0]
        found[i] = family.add(inputs.seconds(r), inputs.seconds(hit.iloc[0]), r.variant)
    family.resolve()
    return found, ref_of, refs


def verdict_lines(inputs, rows, refs, found, of):
    """The family line and the throttle note under a table of speedups."""
    lines = [effects.family_line(found.values(), of), ""] if found else []
    return lines + throttle.note(inputs, pd.concat([rows, refs], ignore_index=True))


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
            out.append({**x.to_dict(), "size": size})
    df = pd.DataFrame(out)
    order = {b: i for i, b in enumerate(ordered_boundaries(df.boundary))}
    return df.sort_values(["boundary", "rows"], key=lambda c: c.map(order) if c.name == "boundary" else c)


def with_verdicts(df, found):
    """`df` with each compared row's speedup interval, verdict and p_Holm (found: its Comparisons by row)."""
    df = df.assign(speedup_low=float("nan"), speedup_high=float("nan"), verdict="", p_holm=float("nan"))
    for i, c in found.items():
        _, df.at[i, "speedup_low"], df.at[i, "speedup_high"] = c.speed()
        df.at[i, "verdict"], df.at[i, "p_holm"] = c.verdict, c.p_holm
    return df


def regime_findings(inputs, best, found, refs):
    sizes = list(dict.fromkeys(best["size"]))
    lines = [f"Best variant per regime in {best.archive.iloc[0]}/{best.experiment.iloc[0]} (median (IQR); speedup "
             "over that experiment's CPU reference at the same size, with its interval and verdict):", "",
             "| timing boundary | " + " | ".join(sizes) + " |", "| --- |" + " --- |" * len(sizes)]
    for b, g in best.groupby("boundary", sort=False):
        cells = []
        for size in sizes:
            h = g[g["size"] == size]
            if h.empty:
                cells.append("")
                continue
            r, i = h.iloc[0], h.index[0]
            speed = found[i].speed_cell() if i in found else f"{r.speedup:.3g}×"
            cells.append(f"`{r.variant}` {median_cell(r['median'], r.q1, r.q3)}, {speed}")
        lines.append(f"| {b} | " + " | ".join(cells) + " |")
    reference = ", ".join(f"{A.point_label(r.rows, r.features, r['axes'], r.depth)}: `{r.variant}` "
                          f"{median_cell(r['median'], r.q1, r.q3)}" for _, r in refs.iterrows())
    lines += ["", f"CPU reference (host_wall, median (IQR)) — {reference}.", ""]
    return lines + verdict_lines(inputs, best, refs, found, "this table's speedups") + [effects.words_text()]


def at_shape_lines(inputs, at, key):
    """The table at the reference shape, within one experiment (its own CPU reference)."""
    g = in_experiment(at, key)
    best = best_per_boundary(g)
    found, ref_of, refs = against_reference(inputs, best)
    lines = [f"At {inputs.shape_label()} in {key[0]}/{key[1]}, against its `{g.baseline.iloc[0]}` (host_wall); "
             f"`speedup_{inputs.shape[0]}x{inputs.shape[1]}.csv` has every experiment that measured this shape:", "",
             "| boundary | best variant | median (IQR) | CPU reference: median (IQR) | speedup (95% interval) "
             "verdict |", "| --- | --- | --- | --- | --- |"]
    for i, r in best.iterrows():
        ref = ref_of.get(i)
        ref_cell = median_cell(ref["median"], ref.q1, ref.q3) if ref is not None else A.fmt_seconds(r.cpu_median)
        speed = found[i].speed_cell() if i in found else f"{r.speedup:.2f}×"
        lines.append(f"| {r.boundary} | `{r.variant}` | {median_cell(r['median'], r.q1, r.q3)} | {ref_cell} | "
                     f"{speed} |")
    return lines + [""] + verdict_lines(inputs, best, refs, found, "this table's speedups") + [effects.words_text()]


def headline(inputs, at, key):
    """Each boundary's fastest device variant at the reference shape, all against one experiment's CPU reference,
    each speedup with its interval and verdict (Holm over the sentence's speedups)."""
    g = in_experiment(at, key)
    device = g[g.on_device.astype(bool)]
    best = best_per_boundary(device if len(device) else g)
    if best.empty:
        return []
    found, _, _ = against_reference(inputs, best)
    best = best.assign(cell=[found[i].speed_cell() if i in found else f"{r.speedup:.3g}×"
                             for i, r in best.iterrows()])
    parts = [f"`{variant}` " + ", ".join(f"{r.boundary} {r.cell}" for r in v.itertuples())
             for variant, v in best.groupby("variant", sort=False)]
    return [f"Speedup at {inputs.shape_label()} ({key[0]}/{key[1]}, against its `{g.baseline.iloc[0]}` at "
            f"{median_cell(g.cpu_median.iloc[0], g.cpu_q1.iloc[0], g.cpu_q3.iloc[0])}), the fastest "
            f"{'device ' if len(device) else ''}variant per timing boundary: " + "; ".join(parts)
            + f" (Holm over the {len(found)} speedup(s) of this sentence)."]


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
    found, _, refs = against_reference(inputs, best)
    best = with_verdicts(best, found)
    inputs.write_csv(best[REGIME_COLUMNS], "best_per_regime.csv", sec, "fastest variant per timing boundary at the "
                     "smallest, reference and largest row counts of one experiment, against that experiment's CPU "
                     "reference (medians with quartiles, the speedup with its 95% interval, Holm-corrected verdict "
                     "and p over the table)")
    sec.findings.extend(regime_findings(inputs, best, found, refs))
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
