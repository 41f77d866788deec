"""What the alternatives reach: every variant of an archive at every point, kstudy's own rungs (C++: handwritten
CUDA, Kokkos, the vendor libraries it calls) beside the Python rungs a user would write instead (implementation
`framework`: NumPy, CuPy, PyTorch, torch.compile, Triton, JAX), all on one clock, and each Python rung judged
against the fastest of kstudy's rungs at the same point in the same archive.

One clock for all: the wall clock the caller sees (resident_wall for a device variant: its call and the wait for its
work; host_wall for a host variant), the only timer every framework has (JAX has no user-visible CUDA events), so a
Python rung's interpreter and launch overhead is in its time, as it is in its user's. Option timer=one_shot judges
the one-shot calls instead (host inputs to host outputs, pageable memory: the one kind every rung has);
timer=device_events the GPU's own clock (each framework's CUDA events on its stream, kstudy's around its call: no
host wait in it, and no JAX rung). Option against=vendor_library judges each Python rung against the fastest vendor
library call of kstudy's instead (cuBLAS, cuDNN, CUB), the question "is kstudy's call of the library as fast as
PyTorch's?".
"""
from .. import archive as A
from . import ResultsError, generator, stats as S

WALL = ("resident_wall", "host_wall")
TIMERS = {"wall": WALL, "one_shot": ("one_shot",), "device_events": ("device_events",)}
CLOCK_WORDS = {WALL: "the wall clock a caller sees, the one every framework has",
               ("one_shot",): "host inputs to host outputs, pageable memory",
               ("device_events",): "the GPU's clock: CUDA events on the stream around the call, no host wait"}


def _measure(path, s, variant, point, timers):
    at = s[(s.variant == variant) & (s.rows == point[1]) & (s.features == point[2]) & (s.depth == point[3])]
    at = at[at.timer.isin(timers)]
    if "memory_kind" in at.columns and timers == ("one_shot",):
        at = at[at.memory_kind == "pageable"]
    return S.Measure(path, at) if len(at) else None


def _header(label, best):
    return f"{label}: `{best.variant.split('@')[0]}`" if best is not None else label


def _kind(m):
    return "Python rung" if m.implementation == "framework" else str(m.implementation).replace("_", " ")


@generator("alternatives", "kstudy's rungs against the Python rungs (NumPy, CuPy, PyTorch, torch.compile, Triton, "
                           "JAX) on one clock, each rung judged against the fastest C++ rung at every point")
def alternatives(block):
    timer = block.option("timer", "wall")
    if timer not in TIMERS:
        raise ResultsError(f"alternatives: timer={timer} is not one of {', '.join(TIMERS)}")
    timers = TIMERS[timer]
    against = block.option("against", "")
    if against not in ("", "vendor_library"):
        raise ResultsError(f"alternatives: against={against} is not vendor_library")
    lines = []
    for path in block.paths:
        s = S.samples(path)
        s = s[s.timer.isin(timers)]
        if s.empty:
            raise ResultsError(f"{path}: no sample of timer {' or '.join(timers)}")
        if not (s.implementation == "framework").any():
            raise ResultsError(f"{path}: no Python rung (implementation framework) was measured")
        for operation in sorted(s.operation.unique()):
            lines += _operation(path, s[s.operation == operation], operation, timers, against)
    judge = "the fastest vendor library call of kstudy's" if against else "the fastest C++ rung"
    return ([f"Clock: {' / '.join(timers)} ({CLOCK_WORDS[timers]}); medians over every accepted sample (IQR). "
             f"Speed = {judge}'s median time ÷ the rung's; above 1 the Python rung is faster.",
             S.effects.words_text(), ""] + lines)


def _operation(path, s, operation, timers, against):
    points = sorted({(operation, int(r), int(f), int(d)) for r, f, d in zip(s.rows, s.features, s.depth)},
                    key=lambda p: (p[2], p[1], p[3]))
    axes = s["axes"].iloc[0]
    labels = [A.point_label(r, f, axes, d) for _, r, f, d in points]
    variants = sorted(s.variant.unique())
    measures = {(v, p): _measure(path, s, v, p, timers) for v in variants for p in points}
    rungs = [v for v in variants if any(m is not None and m.implementation == "framework"
                                        for (w, _), m in measures.items() if w == v)]
    own = [v for v in variants if v not in rungs]
    if not own:
        raise ResultsError(f"{path}: {operation} has Python rungs but no C++ rung to judge them against")
    judges = [v for v in own if not against or any(m is not None and m.implementation == against
                                                   for (w, _), m in measures.items() if w == v)]
    if not judges:
        what = against.replace("_", " ")
        return [f"**{operation}**: no {what} rung of kstudy's to judge the Python rungs against", ""]
    head = "| variant | kind | " + " | ".join(labels) + " |"
    out = [f"**{operation}**: time per call, µs", "", head, "|---|---|" + "---|" * len(points)]
    best = {}
    for p in points:
        present = [measures[(v, p)] for v in judges if measures[(v, p)] is not None]
        best[p] = min(present, key=lambda m: m.median) if present else None
    for v in own + rungs:
        first = next(m for (w, _), m in measures.items() if w == v and m is not None)
        cells = []
        for p in points:
            m = measures[(v, p)]
            mark = "**" if m is not None and best[p] is not None and m is best[p] else ""
            cells.append(f"{mark}{S.micro(m.median)}{mark} ({S.micro(m.q1)}–{S.micro(m.q3)})" if m else "—")
        out.append(f"| `{v.split('@')[0]}` ({first.backend}) | {_kind(first)} | " + " | ".join(cells) + " |")
    judge = "the fastest vendor library call of kstudy's" if against else "the fastest C++ rung"
    out += ["", f"**{operation}**: each Python rung's speed against {judge} at the point (bold above; "
            "named in the header)", "",
            "| Python rung | " + " | ".join(_header(label, best[p]) for label, p in zip(labels, points)) +
            " | over the points |",
            "|---|" + "---|" * (len(points) + 1)]
    summaries = []
    for v in rungs:
        family = S.Family()
        cells = []
        for label, p in zip(labels, points):
            m = measures[(v, p)]
            cells.append(family.add(m.seconds, best[p].seconds, label).token if m and best[p] else "—")
        row = family.fill([f"| `{v.split('@')[0]}` | " + " | ".join(cells) + " |"], form="speed_cell")[0]
        over = (f"{family.summary(speed=True, of='the speed')}; {family.tally()}" if len(family) else "not measured")
        out.append(row[:-1] + f"| {over} |")
        summaries.append(family)
    members = [c for f in summaries for c in f.members]
    of = f"each Python rung over the {len(points)} points of {operation}, a family per rung"
    out += ["", S.effects.family_line(members, of), ""]
    return out
