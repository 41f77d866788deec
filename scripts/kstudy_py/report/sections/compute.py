"""Compute by operation: for every compute-bound operation (its variants table names a compute ceiling,
schema 7: GEMM at each input precision, attention), each family's best resident time at every point as essential
TFLOP/s and as a share of the compute roofs measured in the same archive (the operation's own ceiling, a cuBLAS GEMM
at the same precision or the FMA probe, and device_fp32_fma), what Kokkos costs against handwritten CUDA or the
vendor, and each variant's peak device memory across the points (attention: the textbook variant's grows with
tokens², the fused kernels' with tokens). The figure draws each operation's families against its compute roofs.
Every number comes from the archives: essential flops and peak memory from the variants table, roofs from the
ceilings table."""
import numpy as np

from ... import archive as A
from .. import section, throttle
from ..figures import colours, grid, save
from .bandwidth import best_per_family, kokkos_vs_handwritten, on_device, resident_points, shown_points

FMA_ROOF = "device_fp32_fma"
COLUMNS = ["archive", "experiment", "operation", "axes", "point", *A.EXTENTS, "family", "backend",
           "variant", "timer", "median_s", "essential_flops", "tflop_per_s", "compute_ceiling", "roof_tflop_per_s",
           "pct_of_roof", "fma_tflop_per_s", "pct_of_fma", "peak_device_bytes", "tuned_parameters"]
MEMORY_COLUMNS = ["archive", "experiment", "operation", "variant", "point", *A.EXTENTS,
                  "peak_device_bytes"]
MAX_POINTS_SHOWN = 6


def compute_table(best, archives):
    df = best[on_device(best)].copy()
    by_label = {a.label: a for a in archives}
    df["point"] = [A.point_label(r, f, ax, d) for r, f, ax, d in zip(df.rows, df.features, df["axes"], df.depth)]
    df["tflop_per_s"] = df.essential_flops / df["median"] / 1e12
    # Roofs of the number's own clock only (schema 8 times the compute roofs with CUDA events, as the device
    # variants' device_events timer; a resident_wall median or an older archive's host-clock roof gives none).
    clocks = [A.clock_of(t) for t in df.timer]
    df["roof_tflop_per_s"] = [(by_label[a].compute_ceiling(c, k) or np.nan) / 1e12
                              for a, c, k in zip(df.archive, df.compute_ceiling, clocks)]
    df["pct_of_roof"] = 100 * df.tflop_per_s / df.roof_tflop_per_s
    df["fma_tflop_per_s"] = [(by_label[a].compute_ceiling(FMA_ROOF, k) or np.nan) / 1e12
                             for a, k in zip(df.archive, clocks)]
    df["pct_of_fma"] = 100 * df.tflop_per_s / df.fma_tflop_per_s
    df = df.rename(columns={"median": "median_s"})
    return df.sort_values(["operation", "archive", "experiment", *A.EXTENTS, "family"])[COLUMNS]


def shown_experiment(df, operation):
    g = df[df.operation == operation].drop_duplicates(["archive", "experiment", "point"])
    return g.groupby(["archive", "experiment"]).size().idxmax()


def operation_lines(g, ratios):
    points = shown_points(g, MAX_POINTS_SHOWN)
    last = g[g.point == points.point.iloc[-1]].sort_values("tflop_per_s", ascending=False)
    families = list(dict.fromkeys(zip(last.family, last.backend)))
    families += [fb for fb in dict.fromkeys(zip(g.family, g.backend)) if fb not in families]
    lines = ["| family | " + " | ".join(points.point) + " |", "| --- |" + " --- |" * len(points)]
    for family, backend in families:
        f = g[(g.family == family) & (g.backend == backend)]
        cells = []
        for p in points.itertuples():
            hit = f[f.point == p.point]
            if len(hit):
                h = hit.iloc[0]
                share = f" ({A.roof_share(h.pct_of_roof)})" if np.isfinite(h.pct_of_roof) else ""
                cells.append(f"{h.tflop_per_s:,.1f}{share}")
            else:
                cells.append("")
        lines.append(f"| {family}@{backend} | " + " | ".join(cells) + " |")
    if len(ratios):
        cells = []
        for p in points.itertuples():
            hit = ratios[ratios.point == p.point]
            cells.append(f"{hit.kokkos_over_handwritten.iloc[0]:.2f}×" if len(hit) else "")
        lines.append("| **best Kokkos ÷ best handwritten CUDA/vendor (time)** | " + " | ".join(cells) + " |")
    return lines


def memory_table(resident):
    """Peak device memory of every device variant at every point where the archive recorded it (schema 7)."""
    m = resident[on_device(resident) & (resident.peak_device_bytes.fillna(-1) >= 0)]
    m = m.drop_duplicates(["archive", "experiment", "variant", *A.EXTENTS]).copy()
    m["point"] = [A.point_label(r, f, ax, d) for r, f, ax, d in zip(m.rows, m.features, m["axes"], m.depth)]
    return m.sort_values(["operation", "variant", *A.EXTENTS])[MEMORY_COLUMNS]


def memory_lines(m, operation, arch, exp):
    g = m[(m.operation == operation) & (m.archive == arch) & (m.experiment == exp)]
    if g.empty or g.point.nunique() < 2:
        return []
    points = g[[*A.EXTENTS, "point"]].drop_duplicates().sort_values(list(A.EXTENTS))
    lines = [f"Peak device memory of {operation} (MiB: the variant's buffers, workspaces and scratch, measured as "
             "the drop in free device memory over prepare and the gated run):", "",
             "| variant | " + " | ".join(points.point) + " |", "| --- |" + " --- |" * len(points)]
    for variant, v in g.groupby("variant", sort=True):
        cells = []
        for p in points.itertuples():
            hit = v[v.point == p.point]
            cells.append(f"{hit.peak_device_bytes.iloc[0] / 2**20:,.0f}" if len(hit) else "")
        lines.append(f"| `{variant}` | " + " | ".join(cells) + " |")
    return lines + [""]


def growth(m, operation, arch, exp):
    """Per variant: how its peak memory scales from the smallest to the largest point (the exponent of the
    second extent, tokens for attention), for the headline; only where the second extent is the one that varies."""
    g = m[(m.operation == operation) & (m.archive == arch) & (m.experiment == exp) & (m.peak_device_bytes > 0)]
    if g.rows.nunique() > 1 or g.depth.nunique() > 1:
        return {}
    out = {}
    for variant, v in g.groupby("variant"):
        v = v.sort_values("features")
        if v.features.nunique() >= 2:
            a, b = v.iloc[0], v.iloc[-1]
            out[variant] = np.log(b.peak_device_bytes / a.peak_device_bytes) / np.log(b.features / a.features)
    return out


def draw(ax, operation, g, colour, roofs):
    for (family, backend), s in g.groupby(["family", "backend"]):
        s = s.sort_values("essential_flops")
        ax.plot(s.essential_flops, s.tflop_per_s, marker="o", ms=3.5, lw=1.3, color=colour[f"{family}@{backend}"],
                label=f"{family}@{backend}")
    for k, (name, value) in enumerate(sorted(roofs.items(), key=lambda kv: -kv[1])):
        ax.axhline(value / 1e12, color="black", lw=0.9, ls=["-", "--", ":", "-."][k % 4],
                   label=f"{name} {value / 1e12:,.1f} TFLOP/s")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("essential flops per call")
    ax.set_ylabel("essential TFLOP/s")
    ax.set_title(f"{operation} ({g.archive.iloc[0]}/{g.experiment.iloc[0]})", fontsize=9)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2, frameon=False)


@section("compute_by_operation", "Compute by operation", order=7)
def compute_by_operation(inputs, sec):
    points = inputs.points
    if points.empty or "compute_ceiling" not in points.columns or not (points.compute_ceiling.fillna("") != "").any():
        return sec.skip("no compute-bound operation (one naming a compute ceiling, schema 7: gemm, attention) "
                        "was timed")
    resident = resident_points(points[points.compute_ceiling.fillna("") != ""])
    if resident.empty or not on_device(resident).any():
        return sec.skip("the compute-bound operations were timed on a host only; the compute roofs are the GPU's")
    df = compute_table(best_per_family(resident), inputs.archives)
    ratios = kokkos_vs_handwritten(resident)
    memory = memory_table(resident)
    inputs.write_csv(df, "compute_by_operation.csv", sec,
                     "per compute-bound operation, point, family and backend: the fastest variant's resident median, "
                     "essential TFLOP/s, % of the operation's compute ceiling and of device_fp32_fma (same archive)")
    inputs.write_csv(memory, "peak_device_memory.csv", sec,
                     "per device variant and point of the compute-bound operations: peak device memory (bytes)")
    by_label = {a.label: a for a in inputs.archives}
    frames = {}
    for operation in sorted(df.operation.unique()):
        arch, exp = shown_experiment(df, operation)
        g = df[(df.operation == operation) & (df.archive == arch) & (df.experiment == exp)]
        frames[operation] = g
        r = ratios[(ratios.operation == operation) & (ratios.archive == arch) & (ratios.experiment == exp)]
        roof = g.compute_ceiling.iloc[0]
        roof_value = by_label[arch].compute_ceiling(roof)
        sec.lines += [f"**{operation}** in {arch}/{exp}: essential TFLOP/s (% of {roof}"
                      + (f", {roof_value / 1e12:,.1f} TFLOP/s in this archive" if roof_value else ", not measured")
                      + "):", ""] + operation_lines(g, r) + [""]
        sec.lines += throttle.note(inputs, g[g.point.isin(shown_points(g, MAX_POINTS_SHOWN).point)])
        sec.lines += memory_lines(memory, operation, arch, exp)
        largest = g[g.essential_flops == g.essential_flops.max()]
        best = largest.loc[largest.tflop_per_s.idxmax()]
        text = (f"{operation} ({arch}/{exp}): best `{best.variant}` {best.tflop_per_s:,.1f} TFLOP/s at {best.point}"
                + (f" = {A.roof_share(best.pct_of_roof)} of {roof}" if np.isfinite(best.pct_of_roof) else ""))
        if len(r):
            at = r[r.point == best.point]
            if len(at):
                text += (f"; best Kokkos takes {at.kokkos_over_handwritten.iloc[0]:.2f}× the best "
                         "handwritten/vendor time")
        scaling = growth(memory, operation, arch, exp)
        if scaling:
            text += "; peak memory ∝ " + ", ".join(
                f"`{v}` {features_name(g)}^{e:.2f}" for v, e in sorted(scaling.items()))
        sec.headlines.append(text + ".")
    colour = colours(f"{f}@{b}" for g in frames.values() for f, b in zip(g.family, g.backend))
    fig, axes = grid(len(frames), 3, width=5.2, height=5.0)
    for ax, (operation, g) in zip(axes, frames.items()):
        a = by_label[g.archive.iloc[0]]
        wanted = {g.compute_ceiling.iloc[0], FMA_ROOF}
        draw(ax, operation, g, colour, {k: v for k, v in a.compute_ceilings().items() if k in wanted})
    fig.suptitle("Compute-bound operations: essential TFLOP/s of the best variant per family against the compute roofs "
                 "measured in the same archive", fontsize=10)
    sec.figures.append((save(fig, inputs.out, "compute_by_operation.png"),
                        "Compute by operation: TFLOP/s per family over the problem sizes, with the operation's compute "
                        "ceiling and the FMA probe as horizontal lines"))
    return sec.done(df)


def features_name(g):
    """The second axis's name (tokens for attention), for the memory-scaling sentence."""
    axes = str(g["axes"].iloc[0]).split(",") if "axes" in g.columns and len(g) else []
    return axes[1] if len(axes) > 1 else "extent"
