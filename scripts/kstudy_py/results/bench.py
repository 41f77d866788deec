"""kstudy_bench JSON tables: one run's resident times per variant and shape (`bench`), and two builds of one
commit against two Kokkos versions (`kokkos_versions`). Samples are Google Benchmark's repetitions (CUDA events
on the variant's stream for device variants); medians, and Mann-Whitney between repetitions for ties."""
import re
from pathlib import Path

import numpy as np

from ..effects import ratio_interval
from . import ResultsError, generator, stats as S

SHAPES = "shapes"  # marker option: comma-separated shapes as the JSON names them (default: every shape)


def by_variant(frame):
    return {(v, sh): g.seconds.to_numpy() for (v, sh), g in frame.groupby(["variant", "shape"])}


def shapes_of(block, frame, wanted=None, index=0):
    wanted = block.option(SHAPES, wanted)
    present = list(dict.fromkeys(frame["shape"]))
    if wanted is None:
        return present
    missing = [s for s in wanted.split(",") if s not in present]
    if missing:
        raise ResultsError(f"{block.where}: shape(s) {', '.join(missing)} not in {block.archive_names[index]}")
    return wanted.split(",")


@generator("bench", "one kstudy_bench JSON: median µs per variant and shape, share of the device read roof")
def bench(block):
    return bench_lines(block, 0)


def bench_lines(block, index, shapes=None):
    """The table of the marker's index-th archive (a bench JSON)."""
    context, frame = S.bench(block.paths[index])
    shapes = shapes_of(block, frame, shapes, index)
    groups = by_variant(frame)
    roof = S.bench_roof(context, "device_read")
    variants = sorted({v for v, sh in groups if sh in shapes},
                      key=lambda v: (float(np.median(groups.get((v, shapes[-1]), [np.inf]))), v))
    lines = ["| variant | " + " | ".join(S.shape_label(sh) for sh in shapes) + " |",
             "| --- |" + " --- |" * len(shapes)]
    fastest = {sh: min((v for v in variants if (v, sh) in groups), key=lambda v: np.median(groups[(v, sh)]))
               for sh in shapes}
    for v in variants:
        cells = []
        for sh in shapes:
            t = groups.get((v, sh))
            if t is None:
                cells.append("")
                continue
            text = f"{S.micro(np.median(t))} ({S.micro(np.quantile(t, 0.25))}–{S.micro(np.quantile(t, 0.75))})"
            rows = frame[(frame.variant == v) & (frame["shape"] == sh)]
            if v.endswith("@cuda"):
                gbps = float(rows.bytes.iloc[0]) / np.median(t) / 1e9
                text += f", {S.roof_cell(gbps, roof)}"
            if v == fastest[sh]:
                text = f"**{text}**"
            cells.append(text)
        lines.append(f"| `{v}` | " + " | ".join(cells) + " |")
    lines += ["", "µs: median of the repetitions (interquartile range); % of the device read roof of the same run "
              "(essential bytes over the median), on the variant's clock. **Bold**: the fastest median per shape; "
              "against the runner-up (the family: the shapes):"]
    family, runner_up = S.Family(), []
    for sh in shapes:
        ranked = sorted((v for v in variants if (v, sh) in groups), key=lambda v: np.median(groups[(v, sh)]))
        if len(ranked) > 1:
            c = family.add(groups[(ranked[0], sh)], groups[(ranked[1], sh)], S.shape_label(sh))
            runner_up.append(f"- {S.shape_label(sh)}: `{ranked[0]}` vs `{ranked[1]}`: {c.token}")
    lines += family.fill(runner_up, "short")
    lines += ["", f"Verdicts: {S.effects.rules_text()}."]
    if roof is None:
        lines += ["", S.OTHER_CLOCK_NOTE]
    return lines


def kokkos_version(json_path, context):
    """The Kokkos version of the build that wrote a bench JSON: its context (kstudy_bench records it), else
    info.txt beside it, else the folder's name."""
    if context.get("kokkos_version"):
        return "Kokkos " + context["kokkos_version"]
    info = Path(json_path).parent / "info.txt"
    if info.exists():
        match = re.search(r"kokkos_version\s*[:=]\s*\"?([0-9.]+)", info.read_text())
        if match:
            return match.group(1)
    return Path(json_path).parent.name


@generator("kokkos_versions", "two kstudy_bench JSONs of one commit built against two Kokkos versions")
def kokkos_versions(block):
    if len(block.paths) != 2:
        raise ResultsError(f"{block.where}: kokkos_versions reads exactly two bench JSONs (older Kokkos first)")
    (ca, fa), (cb, fb) = (S.bench(p) for p in block.paths)
    va, vb = kokkos_version(block.paths[0], ca), kokkos_version(block.paths[1], cb)
    if va == vb:
        va, vb = (p.stem if p.parent == q.parent else p.parent.name for p, q in (block.paths, block.paths[::-1]))
    ga, gb = by_variant(fa), by_variant(fb)
    shapes = [sh for sh in shapes_of(block, fa) if sh in set(fb["shape"])]

    # Rows by the first shape each variant was measured at, then its time there, then its name: deterministic
    # (a set's order is not, across Python processes).
    def order(v):
        first = next(i for i, sh in enumerate(shapes) if (v, sh) in ga)
        return first, float(np.median(ga[(v, shapes[first])])), v

    variants = sorted({v for v, sh in ga if (v, sh) in gb and sh in shapes}, key=order)

    def spread(x):
        return f"{S.micro(np.median(x))} ({S.micro(np.quantile(x, 0.25))}–{S.micro(np.quantile(x, 0.75))})"

    lines = [f"µs, median of the repetitions (IQR), under {va} → under {vb}: time ratio, its interval, verdict of the "
             f"second against the first; {S.effects.rules_text()}; the family is the table's cells:", "",
             "| variant | " + " | ".join(S.shape_label(sh) for sh in shapes) + " |",
             "| --- |" + " --- |" * len(shapes)]
    family, table = S.Family(), []
    for v in variants:
        cells = []
        for sh in shapes:
            a, b = ga.get((v, sh)), gb.get((v, sh))
            if a is None or b is None:
                cells.append("")
                continue
            cells.append(f"{spread(a)} → {spread(b)}: {family.add(b, a).token}")
        table.append(f"| `{v}` | " + " | ".join(cells) + " |")
    lines += family.fill(table, "cell")

    def versus_cuda(groups, v, sh):
        """The variant's median over the fastest fused_cuda median, with the ratio's interval."""
        cuda = [t for (w, s), t in groups.items() if s == sh and w.startswith("fused_cuda")]
        if not cuda or (v, sh) not in groups:
            return ""
        ratio, low, high = ratio_interval(groups[(v, sh)], min(cuda, key=np.median))
        return f"{S.ratio(ratio)} ({low:.2f}–{high:.2f})"

    # Only the variants and shapes that have a handwritten CUDA partner (the scoring operation's).
    rows = [v for v in variants if not v.startswith("fused_cuda")
            and any(versus_cuda(ga, v, sh) or versus_cuda(gb, v, sh) for sh in shapes)]
    columns = [sh for sh in shapes if any(versus_cuda(ga, v, sh) for v in rows)]
    lines += ["", "Each variant's time over the fastest handwritten CUDA variant (`fused_cuda_*`) of the same run (the "
              "ratio's 95% interval):", "",
              "| variant | " + " | ".join(f"{S.shape_label(sh)} ({va} / {vb})" for sh in columns) + " |",
              "| --- |" + " --- |" * len(columns)]
    for v in rows:
        cells = [" / ".join((versus_cuda(ga, v, sh), versus_cuda(gb, v, sh))) for sh in columns]
        lines.append(f"| `{v}` | " + " | ".join(cells) + " |")
    roofs = [S.bench_roof(c, "device_read") for c in (ca, cb)]
    if None in roofs:
        lines += ["", "No share of the read roof: " + S.OTHER_CLOCK_NOTE.removeprefix("— : ")]
    else:
        lines += ["", f"Device read roof of each run on CUDA events: {S.number(roofs[0])} GB/s ({va}), "
                  f"{S.number(roofs[1])} GB/s ({vb})."]
    return lines
