"""Scoring layouts: row-major and padded against feature-major, per family and backend, and when the resident
row-major -> feature-major transpose (`layout_transpose`) pays back."""
import numpy as np
import pandas as pd

from .... import archive as A
from ... import section
from ...figures import colours, grid, save

RESIDENT = ("host_wall", "resident_wall")
OPERATION = "scoring"  # its layouts: row-major, feature-major and padded tables of rows x features


def reuse_words(value):
    try:
        return f"pays back after {float(value):.3g} reuses"
    except ValueError:
        if value == "never":
            return "never pays back (row-major is already as fast)"
        return f"break-even: {value}"


def transposes(inputs):
    """(archive, rows, features) -> (median seconds, execution space) of every measured transpose."""
    out = {}
    for a, e in inputs.experiments("layout_conversion"):
        space = a.environment.get("default_execution_space", "").lower()
        for _, r in A.stats(e.accepted(), list(A.EXTENTS)).iterrows():
            out[(a.label, int(r.rows), int(r.features))] = (r["median"], space)
    return out


def break_even(measured, machine, arch, rows, feats, backend, t_row, t_feat):
    """(transpose seconds, reuses until it pays back) for a row-major variant of `backend`."""
    tr = measured.get((arch, int(rows), int(feats)))
    if tr is None:  # a transpose measured by another archive of the same machine
        tr = next((v for k, v in measured.items() if k[1:] == (int(rows), int(feats))
                   and machine.get(k[0]) == machine.get(arch)), None)
    if tr is None:
        return np.nan, "no transpose measured at this shape"
    if tr[1] and tr[1] != backend:
        return tr[0], f"n/a (transpose measured on {tr[1]})"
    return tr[0], "never" if t_row <= t_feat else f"{tr[0] / (t_row - t_feat):.3g}"


def layout_table(inputs, measured):
    # Archives are the same machine when their GPU and CPU models match.
    machine = {a.label: (a.environment.get("gpu_name", ""), a.environment.get("cpu_model", ""))
               for a in inputs.archives}
    points = inputs.points_of(OPERATION)
    s = points[points.timer.isin(RESIDENT) & (points.block_size == 0)]
    rows = []
    # The layouts side by side at one point (every point-key column but the layout), ordered by shape and timer.
    keys = ["archive", "experiment", *A.EXTENTS, "timer"]
    keys += [c for c in A.point_key("samples", without=("layout",)) if c not in keys]
    for key, g in s.groupby(keys):
        k = dict(zip(keys, key))
        arch, exp, n_rows, feats, timer = k["archive"], k["experiment"], k["rows"], k["features"], k["timer"]
        for (family, backend), items in g.groupby(["family", "backend"], sort=False):
            feature = items[items.layout == "feature_major"]
            if feature.empty:
                continue
            t_feat = feature["median"].iloc[0]
            padded = items[items.layout == "padded_row_major"]
            t_pad = padded["median"].iloc[0] if len(padded) else np.nan
            for _, r in items[items.layout == "row_major"].iterrows():
                transpose_s, reuse = break_even(measured, machine, arch, n_rows, feats, backend, r["median"], t_feat)
                rows.append({"archive": arch, "experiment": exp, "family": f"{family}@{backend}", "timer": timer,
                             "cache": k["cache"], "rows": n_rows, "features": feats, "row_variant": r.variant,
                             "t_row_s": r["median"],
                             "t_feature_s": t_feat, "t_padded_s": t_pad, "row_over_feature": r["median"] / t_feat,
                             "padded_over_feature": t_pad / t_feat, "transpose_s": transpose_s,
                             "break_even_reuses": reuse})
    return pd.DataFrame(rows)


# point-key names: layout_one_shot.csv's published column order (the groups are keyed by A.point_key below)
CONTRACT_COLUMNS = ["archive", "experiment", "family", "memory_kind", "cache", "rows", "features", "row_variant",
                    "t_row_s", "t_feature_s", "transpose_s", "t_feature_with_transpose_s", "feature_over_row",
                    "feature_with_transpose_over_row"]


def one_shot_contract(inputs, measured):
    """Layout as an upstream contract (the seed): one-shot time by layout for the same family and host memory, and
    the feature-major one-shot with the resident transpose added -- what it costs when the data arrives row-major."""
    points = inputs.points_of(OPERATION)
    s = points[(points.timer == "one_shot") & (points.block_size == 0)]
    machine = {a.label: (a.environment.get("gpu_name", ""), a.environment.get("cpu_model", ""))
               for a in inputs.archives}
    rows = []
    keys = ["archive", "experiment", *A.point_key("samples", without=("layout",)), "family", "backend"]
    for key, g in s.groupby(keys):
        k = dict(zip(keys, key))
        arch, exp, n_rows, feats, memory = k["archive"], k["experiment"], k["rows"], k["features"], k["memory_kind"]
        family, backend = k["family"], k["backend"]
        feature, row = g[g.layout == "feature_major"], g[g.layout == "row_major"]
        if feature.empty or row.empty:
            continue
        best_row = row.loc[row["median"].idxmin()]
        t_feat, t_row = feature["median"].min(), best_row["median"]
        transpose_s, _ = break_even(measured, machine, arch, n_rows, feats, backend, t_row, t_feat)
        with_transpose = t_feat + transpose_s if np.isfinite(transpose_s) else np.nan
        rows.append({"archive": arch, "experiment": exp, "family": f"{family}@{backend}", "memory_kind": memory,
                     "cache": k["cache"], "rows": n_rows, "features": feats, "row_variant": best_row.variant,
                     "t_row_s": t_row,
                     "t_feature_s": t_feat, "transpose_s": transpose_s, "t_feature_with_transpose_s": with_transpose,
                     "feature_over_row": t_feat / t_row, "feature_with_transpose_over_row": with_transpose / t_row})
    return pd.DataFrame(rows, columns=CONTRACT_COLUMNS)


def contract_lines(df):
    wide = df[df.features >= 256]
    if wide.empty:
        wide = df
    lines = ["", "**Layout as an upstream contract** (one-shot, host in → host out): the feature-major one-shot "
                 "against the same family's best row-major one-shot, with and without the device transpose a "
                 "row-major upstream would add (`layout_transpose`, same machine):", "",
             "| experiment | family | memory | rows × features | row-major | feature-major | + transpose | "
             "feature ÷ row | with transpose ÷ row |", "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    # point-key names: the table's reading order (narrow shapes first), not a key
    for r in wide.sort_values(["experiment", "family", "memory_kind", "features", "rows"]).itertuples():
        lines.append(f"| {r.archive}/{r.experiment} | `{r.family}` | {r.memory_kind} | "
                     f"{A.fmt_rows(r.rows)}×{r.features} | {A.fmt_seconds(r.t_row_s)} | "
                     f"{A.fmt_seconds(r.t_feature_s)} | "
                     f"{A.fmt_seconds(r.t_feature_with_transpose_s)} | {r.feature_over_row:.2f} | "
                     + (f"{r.feature_with_transpose_over_row:.2f} |" if np.isfinite(r.feature_with_transpose_over_row)
                        else "no transpose measured |"))
    return lines


def resident_timer(df):
    """resident_wall where device variants were paired, else host_wall (a CPU-only archive)."""
    return "resident_wall" if (df.timer == "resident_wall").any() else "host_wall"


def detail_lines(inputs, df):
    rows, feats = inputs.shape
    at = df[(df.rows == rows) & (df.features == feats)]
    if at.empty:
        return [f"No row-major / feature-major pair at {inputs.shape_label()}; `layout.csv` has every shape."]
    lines = [f"At {inputs.shape_label()}, resident medians:", "",
             "| experiment | row-major variant | timer | row / feature | padded / feature | transpose | break-even |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in at.itertuples():
        padded = f"{r.padded_over_feature:.2f}" if np.isfinite(r.padded_over_feature) else ""
        lines.append(f"| {r.archive}/{r.experiment} | `{r.row_variant}` | {r.timer} | {r.row_over_feature:.2f} | "
                     f"{padded} | {A.fmt_seconds(r.transpose_s)} | {reuse_words(r.break_even_reuses)} |")
    return lines


def finding(inputs, df):
    """One table: each device row-major variant's ratio to feature-major at the reference shape, per experiment."""
    rows, feats = inputs.shape
    timer = resident_timer(df)
    at = df[(df.rows == rows) & (df.features == feats) & (df.timer == timer)]
    if at.empty:
        return []
    experiments = list(dict.fromkeys(f"{a}/{e}" for a, e in zip(at.archive, at.experiment)))
    lines = [f"**Layout at {inputs.shape_label()}** ({timer}): row-major time over the same family's "
             "feature-major time, and the reuses after which the resident transpose pays back:", "",
             "| row-major variant | " + " | ".join(experiments) + " |", "| --- |" + " --- |" * len(experiments)]
    for variant, g in at.groupby("row_variant"):
        cells = {f"{r.archive}/{r.experiment}": f"{r.row_over_feature:.2f}, {reuse_words(r.break_even_reuses)}"
                 for r in g.itertuples()}
        lines.append(f"| `{variant}` | " + " | ".join(cells.get(e, "") for e in experiments) + " |")
    return lines


def missing_at_shape(inputs, df):
    """Why `finding` is empty although pairs were timed: none at the reference shape on the resident timer. Names
    the shapes that have one, so the reader knows which --shape would give the finding."""
    timer = resident_timer(df)
    at = df[df.timer == timer]
    shapes = sorted(set(zip(at.rows, at.features)))
    listed = ", ".join(inputs.shape_label(r, f) for r, f in shapes[:8]) + (", …" if len(shapes) > 8 else "")
    return (f"no row-major / feature-major pair of one family timed ({timer}) at the reference shape "
            f"{inputs.shape_label()}; pairs were timed at {listed}")


def headline(df):
    """Row-major over feature-major at the widest table of the experiment that varies the width most."""
    res = df[df.timer == resident_timer(df)]
    arch, exp = res.groupby(["archive", "experiment"]).features.nunique().idxmax()
    g = res[(res.archive == arch) & (res.experiment == exp)]
    g = g[g.features == g.features.max()]
    g = g[g.rows == g.rows.min()]
    parts = ", ".join(f"`{r.row_variant}` {r.row_over_feature:.2f}" for r in g.itertuples())
    return [f"Layout at {A.fmt_rows(g.rows.iloc[0])}×{g.features.iloc[0]} ({arch}/{exp}), row-major time over the "
            f"same family's feature-major time: {parts}."]


def layout_figure(df, out):
    """Rows of panels per row count, a column for row-major and one for padded, each line a variant's
    ratio to its family's feature-major kernel vs feature width, within the experiment that varies it most."""
    arch, exp = df.groupby(["archive", "experiment"]).features.nunique().idxmax()
    g = df[(df.archive == arch) & (df.experiment == exp)]
    row_counts = sorted(g.rows.unique())
    fig, axes = grid(2 * len(row_counts), 2, width=5.4, height=3.8, sharey=True)
    colour = colours(list(g.row_variant) + list(g.family))
    for k, n_rows in enumerate(row_counts):
        h = g[g.rows == n_rows]
        padded = h.dropna(subset=["padded_over_feature"]).drop_duplicates(["family", "features"])
        panels = (("row-major", "row_variant", "row_over_feature"), ("padded", "family", "padded_over_feature"))
        for ax, (label, series, column) in zip(axes[2 * k:], panels):
            for name, s in (h if column == "row_over_feature" else padded).groupby(series):
                s = s.sort_values("features")
                ax.plot(s.features, s[column], marker="o", ms=4, color=colour[name], label=name)
            ax.axhline(1, color="black", lw=0.8, ls="--")
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("features")
            ax.set_ylabel("time / feature-major time")
            ax.set_title(f"{label}, {n_rows:,} rows", fontsize=10)
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=7, loc="upper left")
    fig.suptitle(f"Layout cost vs feature width ({arch}/{exp}, resident medians; below 1: faster than feature-major)",
                 fontsize=11)
    return save(fig, out, "layout_ratio.png")


@section("layout", "Layout: row-major vs feature-major vs padded", order=50, operation=OPERATION, findings=True)
def layout(inputs, sec):
    measured = transposes(inputs)
    df = layout_table(inputs, measured)
    if df.empty and not measured:
        return sec.skip("no experiment with both row-major and feature-major variants of one family, and no "
                        "`layout_transpose` experiment")
    if len(df):
        inputs.write_csv(df, "layout.csv", sec,
                         "resident medians (s) per layout, ratios to feature-major, transpose time and break-even "
                         "reuses = transpose / (t_row - t_feature), `never` where row-major is already as fast")
        widths = df.groupby(["archive", "experiment", "row_variant", "rows", "timer"]).features.nunique()
        if (widths >= 2).any():
            sec.figures.append((layout_figure(df, inputs.out), "Row-major and padded time over feature-major time vs "
                                                               "feature width"))
        else:
            sec.lines.append("Layout-ratio figure skipped: no row-major / feature-major pair was measured at two or "
                             "more feature widths (widths present: "
                             f"{', '.join(str(f) for f in sorted(df.features.unique()))}; the `feature_sweep` "
                             "experiment varies them).")
        sec.lines.extend(detail_lines(inputs, df))
        sec.findings.extend(finding(inputs, df))
        if not sec.findings:
            sec.no_finding = missing_at_shape(inputs, df)
        sec.headlines.extend(headline(df))
    else:
        sec.lines.append("No experiment holds row-major and feature-major variants of one family: ratios and "
                         "break-even skipped.")
        sec.no_finding = ("no experiment holds row-major and feature-major variants of one family to compare (the "
                          "archives time only the `layout_transpose` conversion)")
    contract = one_shot_contract(inputs, measured)
    if len(contract):
        inputs.write_csv(contract, "layout_one_shot.csv", sec,
                         "one-shot medians (s) by layout per family and host memory, and feature-major plus the "
                         "resident transpose")
        sec.lines.extend(contract_lines(contract))
    if measured:
        t = pd.DataFrame([{"archive": k[0], "rows": k[1], "features": k[2], "transpose_s": v[0], "space": v[1]}
                          for k, v in measured.items()])
        inputs.write_csv(t, "transpose.csv", sec, "resident row-major -> feature-major conversion, median s")
    return sec.done(df)
