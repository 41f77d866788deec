"""What the report's figures share (matplotlib, Agg backend: no display needed): the order and markers of
timing boundaries, one colour per variant family in every figure, and saving."""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

BOUNDARY_ORDER = ["host_wall", "resident_wall", "device_events", "one_shot pinned", "one_shot pageable",
                  "pipelined pinned", "pipelined pageable", "one_shot_alloc pinned", "one_shot_alloc pageable"]
MARKERS = {"host_wall": "s", "resident_wall": "o", "device_events": "D", "one_shot pinned": "^",
           "one_shot pageable": "v", "pipelined pinned": ">", "pipelined pageable": "<",
           "one_shot_alloc pinned": "P", "one_shot_alloc pageable": "X"}
DPI = 110


def ordered_boundaries(boundaries):
    present = set(boundaries)
    return [b for b in BOUNDARY_ORDER if b in present] + sorted(present - set(BOUNDARY_ORDER))


def colours(names, cmap="tab10"):
    """A fixed colour per name, assigned in sorted order, so a family keeps its colour in every figure."""
    names = sorted(set(names))
    palette = plt.get_cmap(cmap)
    return {n: palette(i % palette.N) for i, n in enumerate(names)}


def grid(panels, columns, width=4.6, height=3.6, **kwargs):
    """A figure with `panels` axes in rows of `columns`; unused cells hidden. Returns (figure, axes)."""
    columns = max(1, min(columns, panels))
    rows = (panels + columns - 1) // columns
    fig, axes = plt.subplots(rows, columns, figsize=(width * columns, height * rows), squeeze=False,
                             layout="constrained", **kwargs)
    flat = list(axes.flat)
    for ax in flat[panels:]:
        ax.set_visible(False)
    return fig, flat[:panels]


def save(fig, out, name):
    fig.savefig(out / name, dpi=DPI, bbox_inches="tight")  # figure legends sit below the axes
    plt.close(fig)
    return name
