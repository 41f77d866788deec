"""STREAM (stream.h5): essential GB/s of every family at the largest n for copy, scale, add, triad and dot, its
share of the roof of its traffic on its own clock, and what the fastest portable variant costs against the fastest
handwritten CUDA or vendor variant, judged by Mann-Whitney on the same archive's samples."""
import numpy as np

from .. import archive as A
from ..report.variants import PORTABLE, is_handwritten
from . import ResultsError, generator, stats as S

OPERATIONS = ["stream_copy", "stream_scale", "stream_add", "stream_triad", "stream_dot"]


def fastest_pair(ms):
    """(fastest portable device variant, fastest handwritten CUDA or vendor device variant) of Measures, or None."""
    device = [m for m in ms if m.on_device]
    portable = [m for m in device if m.implementation in PORTABLE]
    native = [m for m in device if is_handwritten(m.implementation)]
    if not portable or not native:
        return None
    return min(portable, key=lambda m: m.median), min(native, key=lambda m: m.median)


def every_n(path, s, operations):
    """The portable-against-native comparison at every n the archive measured, one family per operation: a headline
    per operation over all of them and the per-n table beside it."""
    sizes = sorted(int(n) for n in s.rows.unique())
    families = {op: S.Family() for op in operations}
    table = []
    for n in sizes:
        cells = []
        for op in operations:
            pair = fastest_pair(S.measures(path, op, n))
            if pair is None:
                cells.append("")
                continue
            p, c = pair
            label = p.point().split("=")[-1]
            cells.append(f"`{p.variant.split('@')[0]}` {families[op].add(p.seconds, c.seconds, label).token}")
        if any(cells):
            table.append(f"| {A.fmt_extent(n)} | " + " | ".join(cells) + " |")
    for family in families.values():
        table = family.fill(table, "short")
    lines = ["Every n: the fastest portable device variant against the fastest handwritten CUDA or vendor variant at "
             "each n measured (time ratio; the family is each operation's column):", ""]
    for op, family in families.items():
        if len(family):
            lines.append(f"- {op.removeprefix('stream_')}: {family.summary()} over {len(family)} sizes; "
                         f"{family.tally()} after Holm's correction.")
    return lines + ["", "| n | " + " | ".join(op.removeprefix("stream_") for op in operations) + " |",
                    "| --- |" + " --- |" * len(operations)] + table


@generator("stream", "STREAM: GB/s per family and operation at the largest n, what Kokkos costs (stream.h5)")
def stream(block):
    path = block.paths[0]
    s = S.samples(path)
    s = s[s.operation.isin(OPERATIONS)]
    if s.empty:
        raise ResultsError(f"{block.where}: {block.archive_names[0]} has no STREAM operation")
    n = int(block.option("n", s.rows.max()))
    operations = [op for op in OPERATIONS if ((s.operation == op) & (s.rows == n)).any()]
    per_op = {op: S.measures(path, op, n) for op in operations}
    families = {}
    for op in operations:
        for m in per_op[op]:
            families.setdefault((not m.on_device, m.family, m.backend), {})[op] = m
    notes = set()
    label = next(iter(per_op.values()))[0].point()
    lines = [f"Essential GB/s at {label}: median (interquartile range; its share of the roof of the variant's "
             "traffic):",
             "", "| family | backend | implementation | " + " | ".join(op.removeprefix("stream_") for op in operations)
             + " |", "| --- | --- | --- |" + " --- |" * len(operations)]
    for (_, family, backend), row in sorted(families.items()):
        cells = []
        for op in operations:
            m = row.get(op)
            if m is None:
                cells.append("")
                continue
            roof, _ = S.pick_roof(m)
            rate = float(np.median(m.gbps()))
            share = S.roof_cell(rate, S.roof_value(path, roof, m.timer))
            if share == S.OTHER_CLOCK:
                notes.add(S.OTHER_CLOCK_NOTE)
            cells.append(f"{S.number(rate)} ({S.iqr_text(m.gbps())}; {share}"
                         f"{'' if share == S.OTHER_CLOCK else ' of ' + roof})")
        implementation = next(iter(row.values())).implementation
        lines.append(f"| `{family}` | {backend} | {implementation} | " + " | ".join(cells) + " |")
    lines += ["", "What a portable variant costs on the device (fastest portable variant's time ÷ fastest handwritten "
              "CUDA or vendor variant's time; verdicts by the rule below):", "",
              "| operation | fastest portable: median (IQR) | fastest handwritten or vendor: median (IQR) | "
              "portable vs it (time ratio, interval; p_Holm) |",
              "| --- | --- | --- | --- |"]
    family, rows = S.Family(), []
    for op in operations:
        device = [m for m in per_op[op] if m.on_device]
        portable = [m for m in device if m.implementation in PORTABLE]
        native = [m for m in device if is_handwritten(m.implementation)]
        if not portable or not native:
            continue
        p, c = min(portable, key=lambda m: m.median), min(native, key=lambda m: m.median)
        rows.append(f"| {op.removeprefix('stream_')} | `{p.variant.split('@')[0]}` ({p.implementation}) "
                    f"{S.micro(p.median)} µs ({S.micro(p.q1)}–{S.micro(p.q3)}) | `{c.variant.split('@')[0]}` "
                    f"({c.implementation}) {S.micro(c.median)} µs ({S.micro(c.q1)}–{S.micro(c.q3)}) | "
                    f"{family.add(p.seconds, c.seconds, op).token} |")
    lines += family.fill(rows, "short")
    lines += [""] + every_n(path, s, operations)
    lines += ["", "Roofs: device_read for read-only traffic (dot), device_copy otherwise, on a host the roof of the "
              "cache level its traffic fits (host_read_l1 ...) or host_read, "
              f"measured in the same archive; portable vs it: {S.effects.rules_text()}; the family is the table's "
              "operations."]
    return lines + [f"\n{note}" for note in sorted(notes)]
