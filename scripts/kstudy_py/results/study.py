"""The 2026-11-30 study of the scoring operation (one dataset: a kstudy_bench JSON, the sweeps archive and the
short experiments' archive): resident times, host-in/host-out speedups over the CPU reference with crossovers,
transfers, launch overhead and the layout conversion. Every comparison with the CPU is a Mann-Whitney test."""
import numpy as np

from .. import archive as A
from ..effects import geometric_mean
from . import ResultsError, generator, stats as S
from .bench import bench_lines

SHAPE = (1048576, 16)  # the seed's headline table
BOUNDARIES = [("device_events", "device"), ("one_shot", "pinned"), ("one_shot", "pageable"), ("pipelined", "pinned"),
              ("pipelined", "pageable")]
REFERENCE = "cpu_reference@openmp"


def seconds(s, variant, rows, features, timer, memory_kind=None, path=None):
    hit = s[(s.variant == variant) & (s.rows == rows) & (s.features == features) & (s.timer == timer)]
    if memory_kind is not None:
        hit = hit[hit.memory_kind == memory_kind]
    if path is not None:
        S.use(path, hit)
    return np.sort(hit.seconds.to_numpy(dtype=float))


def find(block, name):
    for archive_name, path in zip(block.archive_names, block.paths):
        if archive_name.endswith(name):
            return path
    raise ResultsError(f"{block.where}: h200_study needs an archive named {name} among archives=")


def sweep_lines(path):
    s = rows_sweep(path)
    rows, features = SHAPE
    cpu = seconds(s, REFERENCE, rows, features, "host_wall", path=path)
    lines = [f"`rows_sweep` at {rows:,}×{features}: `{REFERENCE}` takes {S.micro(np.median(cpu))} µs (median, IQR "
             f"{S.micro(np.quantile(cpu, 0.25))}–{S.micro(np.quantile(cpu, 0.75))}); the fastest device variant per "
             "timing boundary, as a speedup over it:", "",
             "| boundary | fastest variant | median (IQR) | speedup over the CPU | vs the CPU (time ratio, interval; "
             "p_Holm) |", "| --- | --- | --- | --- | --- |"]
    family, table = S.Family(), []
    device = sorted(v for v in s.variant.unique() if v.endswith("@cuda"))
    for label, v, t, cpu in boundaries(path):
        table.append(f"| {label} | `{v.split('@')[0]}` | {S.micro(np.median(t))} µs "
                     f"({S.micro(np.quantile(t, 0.25))}–{S.micro(np.quantile(t, 0.75))}) | "
                     f"{S.ratio(np.median(cpu) / np.median(t))} | {family.add(t, cpu, label).token} |")
    lines += family.fill(table, "short")
    lines += ["", kept_text(path)]
    lines += ["", "Crossover from host memory (one-shot: upload, kernel, download): the smallest tested rows from "
              "which a variant beats the CPU reference at every larger tested size (beats: the rule below, the "
              "family being the variant's sizes from that memory):", "", "| variant | pinned | pageable |",
              "| --- | --- | --- |"]
    for v in device:
        cells = [crossover(path, s, v, memory)[0] for memory in ("pinned", "pageable")]
        if any(cells):
            lines.append(f"| `{v.split('@')[0]}` | " + " | ".join(cells) + " |")
    return lines + ["", f"Verdicts: {S.effects.rules_text()}; the family is the table's boundaries (a crossover: "
                    "the variant's sizes)."]


def crossover(path, s, variant, memory, features=SHAPE[1]):
    """(cell, never): the smallest tested rows from which `variant` one-shot from `memory` beats the CPU reference
    at every larger tested size, Holm over the variant's sizes; never: it beats it at no tail of the sizes."""
    sizes = sorted(s[s.features == features].rows.unique())
    tested, sweep = [], S.Family()
    for r in sizes:
        t = seconds(s, variant, r, features, "one_shot", memory, path=path)
        c = seconds(s, REFERENCE, r, features, "host_wall", path=path)
        if len(t) and len(c):
            tested.append((r, sweep.add(t, c, f"{r:,}")))
    sweep.resolve()
    wins = [(r, c.verdict == "beats") for r, c in tested]
    if not wins:
        return "", False
    first = next((i for i in range(len(wins)) if all(w for _, w in wins[i:])), None)
    if first is None:
        return f"never up to {wins[-1][0]:,}", True
    below = wins[first - 1][0] if first > 0 else 0
    return f"({below:,}, {wins[first][0]:,}]", False


def rows_sweep(path):
    """The rows_sweep experiment's samples of an archive."""
    s = S.samples(path)
    s = s[s.experiment == "rows_sweep"]
    if s.empty:
        raise ResultsError(f"{path}: no rows_sweep experiment")
    return s


def kept(path, features=SHAPE[1]):
    """{memory: [(rows, share)]}: at every rows of the sweep, the fastest one-shot device variant's speedup over the
    CPU reference as a share of the fastest resident (CUDA events) one's: what a call from host memory keeps."""
    s = rows_sweep(path)
    device = sorted(v for v in s.variant.unique() if v.endswith("@cuda"))
    out = {"pinned": [], "pageable": []}
    for rows in sorted(s[s.features == features].rows.unique()):
        def fastest(timer, memory=None):
            times = [np.median(t) for t in (seconds(s, v, rows, features, timer, memory, path=path) for v in device)
                     if len(t)]
            return min(times) if times else None
        resident = fastest("device_events")
        for memory in out:
            one = fastest("one_shot", memory)
            if resident and one:
                out[memory].append((int(rows), resident / one))
    return out


def kept_text(path):
    """'Over all 15 sizes of the sweep at 16 features, ...': kept() summarised per memory kind."""
    every, shares = [], kept(path)
    for memory, per in shares.items():
        if per:
            low, high = min(per, key=lambda x: x[1]), max(per, key=lambda x: x[1])
            every.append(f"from {memory} memory {100 * low[1]:.2g}–{100 * high[1]:.2g}% (geometric mean "
                         f"{100 * geometric_mean([x[1] for x in per]):.2g}%, the least at {low[0]:,} rows, the most "
                         f"at {high[0]:,})")
    if not every:
        return ""
    return (f"Over all {max(len(per) for per in shares.values())} sizes of the sweep at {SHAPE[1]} features, the "
            "fastest one-shot call keeps of the fastest resident one's speedup over the CPU " + " and ".join(every)
            + ".")


def boundaries(path):
    """[(label, fastest device variant, its seconds, the CPU reference's seconds)] per timing boundary at SHAPE."""
    s = rows_sweep(path)
    rows, features = SHAPE
    cpu = seconds(s, REFERENCE, rows, features, "host_wall", path=path)
    device = sorted(v for v in s.variant.unique() if v.endswith("@cuda"))
    out = []
    for timer, memory in BOUNDARIES:
        timed = [(v, seconds(s, v, rows, features, timer, memory)) for v in device]
        timed = [(v, t) for v, t in timed if len(t)]
        if not timed:
            continue
        v, t = min(timed, key=lambda x: np.median(x[1]))
        seconds(s, v, rows, features, timer, memory, path=path)
        label = "resident (CUDA events)" if timer == "device_events" else f"{timer} from {memory} memory"
        out.append((label, v, t, cpu))
    return out


def calibration_lines(path):
    s = S.samples(path)
    lines = []
    calibration = s[s.experiment == "transfer_calibration"]
    t = calibration[calibration.timer == "transfer"] if "timer" in calibration.columns else calibration
    if len(t):
        S.use(path, t)
        # A copy's point: its size and the point key (the columns a copy does not vary group nothing apart; its
        # layout reads NaN here, stats.samples taking the layout from the variants table, which has no copy).
        grouped = t.groupby(["bytes", *A.point_key("samples")], dropna=False).seconds
        med = grouped.median().reset_index()
        med["GiB/s"] = med.bytes / med.seconds / 2**30
        # The rate's interquartile range: bytes over the time quartiles (the slower quartile gives the lower rate).
        med["low"] = med.bytes / grouped.quantile(0.75).to_numpy() / 2**30
        med["high"] = med.bytes / grouped.quantile(0.25).to_numpy() / 2**30
        sizes = [b for b in (4096, 1 << 20, 16 << 20, 1 << 30) if b in set(med.bytes)]
        columns = sorted({(d, m) for d, m in zip(med.direction, med.memory_kind)})
        lines += ["Transfers (`transfer_calibration`, GiB/s = bytes / median time (interquartile range), allocation "
                  "excluded):", "",
                  "| bytes | " + " | ".join(f"{d} {m}" for d, m in columns) + " |", "| --- |" + " --- |" * len(columns)]
        for b in sizes:
            cells = []
            for d, m in columns:
                hit = med[(med.bytes == b) & (med.direction == d) & (med.memory_kind == m)]
                cells.append(f"{S.number(float(hit['GiB/s'].iloc[0]))} ({S.number(float(hit.low.iloc[0]))}–"
                             f"{S.number(float(hit.high.iloc[0]))})" if len(hit) else "")
            lines.append(f"| {b:,} | " + " | ".join(cells) + " |")
        lines.append("")
    pin = calibration[calibration.timer == "pin"] if "timer" in calibration.columns else calibration.iloc[:0]
    if len(pin):
        S.use(path, pin)
        med = pin.groupby(["variant", "bytes"]).seconds.median()
        q1, q3 = (pin.groupby(["variant", "bytes"]).seconds.quantile(q) for q in (0.25, 0.75))
        calls = sorted(pin.variant.unique())
        sizes = [b for b in (1 << 20, 16 << 20, 256 << 20, 1 << 30) if b in set(pin.bytes)]
        lines += ["What making host memory page-locked costs (`transfer_calibration`'s pinning points, median time of "
                  "one call (IQR); the price a pinned one-shot must earn back):", "",
                  "| bytes | " + " | ".join(f"`{c}`" for c in calls) + " |", "| --- |" + " --- |" * len(calls)]
        for b in sizes:
            lines.append(f"| {b:,} | " + " | ".join(
                f"{S.micro(med[(c, b)])} µs ({S.micro(q1[(c, b)])}–{S.micro(q3[(c, b)])})" if (c, b) in med.index
                else "" for c in calls) + " |")
        lines.append("")
    launch = s[s.experiment == "launch_overhead"]
    if len(launch):
        S.use(path, launch)
        per = launch.groupby("variant").seconds
        med, q1, q3 = (x * 1e6 for x in (per.median(), per.quantile(0.25), per.quantile(0.75)))
        lines += ["Launch overhead (`launch_overhead`, µs per launch, median (IQR)): "
                  + ", ".join(f"`{v}` {med[v]:.3g} ({q1[v]:.3g}–{q3[v]:.3g})" for v in sorted(med.index)) + ".", ""]
    layout = s[s.experiment == "layout_transpose"]
    if len(layout):
        S.use(path, layout)
        per = layout.groupby(list(A.EXTENTS)).seconds
        med, q1, q3 = per.median(), per.quantile(0.25), per.quantile(0.75)
        lines += ["Resident row-major → feature-major conversion (`layout_transpose`, median (IQR)): "
                  + ", ".join(f"{p[0]:,}×{p[1]} {S.micro(v)} µs ({S.micro(q1[p])}–{S.micro(q3[p])})"
                              for p, v in med.items()) + ".", ""]
    return lines


@generator("h200_study", "the scoring study of one dataset: bench.json, sweeps.h5 (rows_sweep) and study.h5")
def h200_study(block):
    bench_index = next((i for i, n in enumerate(block.archive_names) if n.endswith(".json")), None)
    if bench_index is None:
        raise ResultsError(f"{block.where}: h200_study needs a kstudy_bench JSON among archives=")
    study = find(block, "study.h5")
    roofs = S.archive(study).ceilings()
    lines = ["Roofs measured in the same run (`study.h5`): " + ", ".join(
        f"{n} {S.number(b / 1e9)} GB/s ({c})" for n, b, c in zip(roofs.name, roofs.bytes_per_second, roofs.clock)
        if b > 0) + ".", "", "Resident (`kstudy_bench`; inputs on the device):", ""]
    lines += bench_lines(block, bench_index, "1048576x16,16777216x16,262144x256") + [""]
    lines += sweep_lines(find(block, "sweeps.h5")) + [""]
    lines += calibration_lines(study)
    return lines


@generator("roofs", "the roofs (ceilings) an archive measured, with the clock that timed each")
def roofs(block):
    c = S.archive(block.paths[0]).ceilings()
    if c.empty:
        raise ResultsError(f"{block.where}: {block.archive_names[0]} records no ceilings")
    lines = ["| roof | clock | GB/s | TFLOP/s |", "| --- | --- | --- | --- |"]
    for r in c.itertuples():
        gb = S.number(r.bytes_per_second / 1e9, 1) if r.bytes_per_second > 0 else ""
        tflop = S.number(r.flops_per_second / 1e12, 1) if r.flops_per_second > 0 else ""
        lines.append(f"| `{r.name}` | {r.clock} | {gb} | {tflop} |")
    return lines
