"""Roofline by operation: every operation's families against the memory roofs measured in the same archive.

An operation's arithmetic intensity (essential flops / essential bytes) is fixed by its definition, so on an
intensity axis all its sizes share one vertical line and a zero-flop copy cannot be placed at all. The figure
therefore has an overview panel (x = intensity, y = GFLOP/s: each operation's best point under the diagonal
memory roofs) and one panel per operation (x = essential bytes per call, y = essential GB/s, where a memory roof
is a horizontal line), a handful of series each: the best variant per family. Built on the bandwidth section's
table."""
import numpy as np

from ... import archive as A
from .. import section
from ..figures import colours, grid, save
from .bandwidth import DEVICE_ROOFS, HOST_ROOFS, ROOFS, on_device, shown_experiment

MAX_SERIES = 6  # families per panel: the fastest at the operation's largest point
ROOF_STYLES = {"device_read": "-", "device_copy": "--", "host_read": ":"}
MARKERS = "osD^vP*Xh<>"
NO_COMPUTE_ROOF = ("No compute roof is drawn: these archives measure no peak flop rate (compute roofs are measured "
                   "by CUDA builds from schema 7), so only the memory roofs are measured bounds.")
COMPUTE_ROOFS = ("The overview also draws the compute roofs measured in the same archive (horizontal lines: the "
                 "float32 FMA probe and cuBLAS GEMMs at each input precision); a compute-bound operation's point sits "
                 "under them, a bandwidth-bound one's under the diagonal memory roofs.")
COMPUTE_STYLES = ["-.", (0, (5, 1)), (0, (1, 1)), (0, (3, 1, 1, 1))]
COLUMNS = ["archive", "experiment", "operation", "axes", "point", *A.EXTENTS, "family", "backend",
           "variant",
           "timer", "median_s", "essential_flops", "essential_bytes", "ai_flop_per_byte", "gflop_per_s",
           "essential_GB_per_s"] + [f"pct_of_{r}" for r in ROOFS]


def roofline_table(bandwidth):
    df = bandwidth.copy()
    df["ai_flop_per_byte"] = df.essential_flops / df.essential_bytes
    df["gflop_per_s"] = df.essential_flops / df.median_s / 1e9
    return df[COLUMNS + ["on_device", "host_roof"] + [f"{r}_GB_per_s" for r in ROOFS]]


def shown(df):
    """Per operation, the experiment the bandwidth section shows; one frame per operation, names sorted."""
    out = {}
    for operation in sorted(df.operation.unique()):
        arch, exp = shown_experiment(df, operation)
        out[operation] = df[(df.operation == operation) & (df.archive == arch) & (df.experiment == exp)]
    return out


def top_families(g):
    """The MAX_SERIES fastest family@backend series at the operation's largest point."""
    largest = g[g.essential_bytes == g.essential_bytes.max()].sort_values("essential_GB_per_s", ascending=False)
    ranked = list(dict.fromkeys(zip(largest.family, largest.backend)))
    ranked += [fb for fb in dict.fromkeys(zip(g.family, g.backend)) if fb not in ranked]
    return ranked[:MAX_SERIES]


def roofs_of(g):
    """{roof name: GB/s} measured by the operation's archive, for the sides (device, host) it has series of: on the
    host, the roof of each cache level a point's working set fits (bandwidth.with_roofs: host_roof)."""
    device = on_device(g)
    names = DEVICE_ROOFS if device.any() else ()
    out = {r: g[f"{r}_GB_per_s"].dropna().iloc[0] for r in names if g[f"{r}_GB_per_s"].notna().any()}
    host = g[~device & g[f"{HOST_ROOFS[0]}_GB_per_s"].notna()].drop_duplicates("host_roof").sort_values("host_roof")
    out.update({r.host_roof: getattr(r, f"{HOST_ROOFS[0]}_GB_per_s") for r in host.itertuples()})
    return out


def draw_operation(ax, operation, g, colour):
    families = top_families(g)
    for family, backend in families:
        s = g[(g.family == family) & (g.backend == backend)].sort_values("essential_bytes")
        ax.plot(s.essential_bytes, s.essential_GB_per_s, marker="o", ms=3.5, lw=1.3,
                color=colour[f"{family}@{backend}"], label=f"{family}@{backend}")
    for roof, bw in roofs_of(g).items():
        ax.axhline(bw, color="black", lw=0.9, ls=ROOF_STYLES.get(roof, ":"), label=f"{roof} {bw:,.0f} GB/s")
    ai = g.ai_flop_per_byte.iloc[0]
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("essential bytes per call")
    ax.set_ylabel("essential GB/s")
    ax.set_title(f"{operation} ({g.archive.iloc[0]}/{g.experiment.iloc[0]}), intensity {ai:.3g} flop/B", fontsize=9)
    ax.grid(True, which="major", alpha=0.3)
    below(ax)


def best_points(frames):
    """Per operation with flops: its fastest point (highest GFLOP/s), device side first."""
    out = []
    for operation, g in frames.items():
        g = g[g.essential_flops > 0]
        if g.empty:
            continue
        side = g[on_device(g)] if on_device(g).any() else g
        near = side[side.gflop_per_s >= 0.999 * side.gflop_per_s.max()]  # ties: the largest point
        out.append((operation, near.sort_values(list(A.EXTENTS)).iloc[-1]))
    return out


def draw_overview(ax, frames, compute_roofs):
    """Classic roofline: each operation's best point under the diagonal memory roofs (y = intensity × GB/s) and
    the horizontal compute roofs."""
    points = best_points(frames)
    ais = [r.ai_flop_per_byte for _, r in points]
    x = np.logspace(np.log10(min(ais) / 4), np.log10(max(max(ais) * 4, 1.0)), 50)
    roofs = {}
    for _, g in frames.items():
        for roof, bw in roofs_of(g).items():
            roofs.setdefault(roof, bw)
    for roof, bw in roofs.items():
        ax.plot(x, x * bw, color="black", lw=0.9, ls=ROOF_STYLES.get(roof, ":"), label=f"{roof} {bw:,.0f} GB/s")
    for k, (name, flops) in enumerate(sorted(compute_roofs.items(), key=lambda kv: -kv[1])):
        ax.axhline(flops / 1e9, color="grey", lw=0.9, ls=COMPUTE_STYLES[k % len(COMPUTE_STYLES)],
                   label=f"{name} {flops / 1e12:,.1f} TFLOP/s")
    for k, (operation, r) in enumerate(points):
        ax.plot(r.ai_flop_per_byte, r.gflop_per_s, marker=MARKERS[k % len(MARKERS)], ls="none", ms=7,
                markeredgecolor="black", markeredgewidth=0.4,
                label=f"{operation}: {r.family}@{r.backend} at {r.point}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (essential flop / essential byte)")
    ax.set_ylabel("achieved GFLOP/s")
    ax.set_title("Each operation's best point against the memory" + (" and compute" if compute_roofs else "")
                 + " roofs", fontsize=9)
    ax.grid(True, which="major", alpha=0.3)
    below(ax)


def below(ax):
    """The legend under the panel: roofs and series are named there, so no label overprints a line."""
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2, frameon=False)


def compute_roofs_of(frames, archives):
    """The compute roofs measured by the archives of the shown experiments (the first archive's value per name)."""
    out = {}
    labels = {g.archive.iloc[0] for g in frames.values()}
    for a in archives:
        if a.label in labels:
            for name, value in a.compute_ceilings().items():
                out.setdefault(name, value)
    return out


def roofline_figure(frames, out, compute_roofs):
    with_flops = bool(best_points(frames))
    fig, axes = grid(len(frames) + with_flops, 3, width=5.2, height=5.0)
    colour = colours(f"{f}@{b}" for g in frames.values() for f, b in zip(g.family, g.backend))
    if with_flops:
        draw_overview(axes[0], frames, compute_roofs)
    for ax, (operation, g) in zip(axes[with_flops:], frames.items()):
        draw_operation(ax, operation, g, colour)
    fig.suptitle("Roofline by operation: essential bandwidth of the best variant per family against the memory roofs "
                 "measured in the same archive", fontsize=10)
    return save(fig, out, "roofline_by_operation.png")


def detail_lines(frames, compute_roofs):
    lines = [COMPUTE_ROOFS if compute_roofs else NO_COMPUTE_ROOF, ""]
    for operation, g in frames.items():
        ai = g.ai_flop_per_byte.iloc[0]
        lines.append(f"- {operation}: {g.essential_flops.iloc[0] / g.essential_bytes.iloc[0]:.3g} flop per essential "
                     f"byte" + (" (no arithmetic: it has no point on the intensity axis)" if ai == 0 else ""))
    return lines


@section("roofline_by_operation", "Roofline by operation", order=65, needs=("bandwidth_by_operation",))
def roofline_by_operation(inputs, sec, bandwidth_by_operation):
    if bandwidth_by_operation.value is None:
        return sec.skip("no resident timing to place under a roof")
    df = roofline_table(bandwidth_by_operation.value)
    inputs.write_csv(df[COLUMNS], "roofline_by_operation.csv", sec,
                     "per operation, point and family: intensity = essential flops / essential bytes, achieved "
                     "GFLOP/s and essential GB/s, % of the measured roofs (every experiment; the figure shows one "
                     "per operation)")
    frames = shown(df)
    compute_roofs = compute_roofs_of(frames, inputs.archives)
    sec.figures.append((roofline_figure(frames, inputs.out, compute_roofs),
                        f"Roofline by operation: one panel per operation (its best variant per family, at most "
                        f"{MAX_SERIES}; measured memory roofs as horizontal lines) and, where an operation does "
                        "arithmetic, an overview of each operation's best point on the intensity axis"))
    sec.lines += detail_lines(frames, compute_roofs)
    return sec.done(df)
