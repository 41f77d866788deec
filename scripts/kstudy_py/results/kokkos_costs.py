"""What Kokkos costs: per operation and headline point, the best portable (Kokkos, Kokkos Kernels) device variant
against the best handwritten CUDA variant of the same archive (and, for SGEMM, against cuBLAS), under each Kokkos
version the archives were built with; then the OpenMP variants against the host read roof.

Every comparison is inside one archive (one run, one clock): speed ratio = the reference's median time / the
Kokkos variant's median time; "beats" / "loses" / "tie" by effects.Family over each table's rows (Mann-Whitney U with
Holm's correction, the ratio's interval); a target is judged from
the per-sample ratios (met / missed / borderline: stats.target). The Kokkos version is the archive's own
(environment.kokkos_version), never a label typed beside it.

`kstudy profile` archives in the block add a column: the Nsight Compute counters of both kernels of a row (DRAM
throughput, achieved and theoretical occupancy, registers; the longest kernel of a multi-kernel variant) from the
profile archive of the same Kokkos version; where several hold a variant, the one named last wins.
"""
import numpy as np

from .. import archive as A
from ..ladder import VENDOR
from ..report.variants import PORTABLE
from . import ResultsError, generator, stats as S
from .ladders import named_points

HANDWRITTEN = ("handwritten_cuda", "mixed")
# Points of the operations the ladders do not hold (rows, features, depth), beside their headline point (if any).
EXTRA_POINTS = {"scoring": [(16777216, 16, 1), (262144, 256, 1)]}
# Operations judged at every shape their archive measured, not at the headline points only (issue #44: a headline
# per operation over all measured shapes); the others' kokkos_costs experiments measure their headline point alone.
EVERY_SHAPE = ("scoring",)
# STREAM's headline: the 2^30 of the stream experiment, else the 2^28 of kokkos_costs_vectors (1 GiB an array, far
# past the L2); the first of these an archive holds.
STREAM_POINTS = [(1 << 30, 1, 1), (1 << 28, 1, 1)]
ALTERNATIVE_POINTS = {"stream_copy": STREAM_POINTS, "stream_triad": STREAM_POINTS, "stream_dot": STREAM_POINTS}
# (threshold, against): the targets set for the best Kokkos variant; "vendor" compares with the vendor library
# and only Kokkos kernels written for kstudy (no library call); None: no portable path exists (no target).
TARGETS = {"reduce_sum": (0.90, "cuda"), "softmax": (0.90, "cuda"), "layernorm": (0.90, "cuda"),
           "residual_layernorm": (0.90, "cuda"), "transpose": (0.85, "cuda"), "stream_copy": (0.97, "cuda"),
           "stream_triad": (0.97, "cuda"), "stream_dot": (0.90, "cuda"), "gemm": (0.80, "vendor"),
           "attention": (0.90, "cuda"), "gemm_tf32": None, "gemm_bf16": None, "attention_bf16": None}
HOST_TARGET = 0.70  # of the host read roof, OpenMP variants of memory-bound operations at their largest point
# Layout targets: (operation, slow layout, fast layout, threshold): the best portable device variant taking the
# slow layout against the best taking the fast one, same archive (the row-major table is the user's contract).
LAYOUT_TARGETS = [("scoring", "row_major", "feature_major", 0.90)]


def is_profile(path):
    """Whether the archive is `kstudy profile`'s (Nsight Compute counters, no timed samples)."""
    a = S.archive(path)
    return any(not e.profile.empty for e in a.experiments.values()) and \
        all(e.accepted().empty for e in a.experiments.values())


def counters(paths):
    """{(kokkos_version, variant, rows, features, depth): the counters of its longest profiled kernel} of the
    profile archives."""
    out = {}
    for path in paths:
        a = S.archive(path)
        version = a.environment.get("kokkos_version")
        for e in a.experiments.values():
            if e.profile.empty:
                continue
            ok = e.profile[e.profile.status == "ok"]
            for key, rows in ok.groupby(["variant", *A.EXTENTS]):
                longest = rows.sort_values("profiled_duration_s").iloc[-1]
                out[(version,) + tuple(key[:1]) + tuple(int(k) for k in key[1:])] = longest
    return out


def counter_text(c):
    if c is None:
        return "–"
    return (f"DRAM {c.dram_throughput_pct:.0f}%, occupancy {c.achieved_occupancy_pct:.0f}% "
            f"of {c.theoretical_occupancy_pct:.0f}%, {int(c.registers_per_thread)} regs")


def name(m):
    return f"`{m.variant.split('@')[0]}`" + (f" (rung {m.rung})" if m.rung > 0 else "")


def rate_text(m, compute):
    return (f"{S.number(float(np.median(m.rate(compute))))} {'TFLOP/s' if compute else 'GB/s'} "
            f"({S.iqr_text(m.rate(compute))})")


def device_rows(path, version, notes, family, profiled=None):
    """(key, table row) of every operation and headline point the archive holds both sides of."""
    rows = []
    for operation, point, k, ref, compute, target in pairs(path):
        ratios = ref.median / k.seconds
        verdict = family.add(k.seconds, ref.seconds, f"{operation} at {k.point()} ({version})").token
        if target is None:
            judged = "no target: no portable tensor-core path in Kokkos"
        elif target[0] is None:
            judged = ""
        else:
            judged = f"≥ {target[0]:.2f}: {S.target(ratios, target[0])}"
        row = (f"| {operation} at {k.point()} | {version} | {name(k)} {rate_text(k, compute)} | "
               f"{name(ref)} {rate_text(ref, compute)} | {S.ratio(float(np.median(ratios)))} | {verdict} | "
               f"{judged} |")
        if profiled is not None:
            at = (int(k.rows), int(k.features), int(k.depth))
            ck, cr = (profiled.get((version, m.variant) + at) for m in (k, ref))
            row += f" {counter_text(ck)} / {counter_text(cr)} |"
        rows.append(((operation, point, version), row))
    return rows


def pairs(path):
    """(operation, point, best Kokkos Measure, best reference Measure, compute-bound?, target) of every operation
    and headline point the archive holds both sides of; the reference is the fastest handwritten CUDA variant, or
    the vendor library where TARGETS says so (SGEMM: cuBLAS against kstudy's own Kokkos kernels)."""
    s = S.samples(path)
    for operation in sorted(s.operation.dropna().unique()):
        held = [p for p in ALTERNATIVE_POINTS.get(operation, []) if S.measures(path, operation, *p)]
        points = named_points(path, operation) + EXTRA_POINTS.get(operation, []) + held[:1]
        if operation in EVERY_SHAPE:  # every shape the archive measured, the headline ones first
            at = s[s.operation == operation]
            measured = sorted(set(zip(at.rows.astype(int), at.features.astype(int), at.depth.astype(int))),
                              key=lambda p: (p[1], p[0], p[2]))  # by features, then rows
            points = points + [p for p in measured if p not in points]
        for point in points:
            ms = [m for m in S.measures(path, operation, *point) if m.on_device]
            if not ms:
                continue
            compute = isinstance(ms[0].compute_ceiling, str) and bool(ms[0].compute_ceiling)
            target = TARGETS.get(operation, (None, "cuda"))
            against = target[1] if target else "cuda"
            if against == "vendor":
                kokkos = [m for m in ms if m.implementation == "kokkos"]
                reference = [m for m in ms if m.implementation == VENDOR]
            else:
                kokkos = [m for m in ms if m.implementation in PORTABLE]
                reference = [m for m in ms if m.implementation in HANDWRITTEN]
            if not kokkos or not reference:
                continue
            yield (operation, point, min(kokkos, key=lambda m: m.median), min(reference, key=lambda m: m.median),
                   compute, target)


def layout_rows(path, version, family, profiled=None):
    """The best Kokkos device variant of one layout against the best Kokkos device variant of the other."""
    s = S.samples(path)
    rows = []
    for operation, slow, fast, threshold in LAYOUT_TARGETS:
        if operation not in set(s.operation.dropna()):
            continue
        for point in EXTRA_POINTS.get(operation, []) + named_points(path, operation):
            ms = [m for m in S.measures(path, operation, *point) if m.on_device and m.implementation in PORTABLE]
            mine = [m for m in ms if m.layout == slow]
            theirs = [m for m in ms if m.layout == fast]
            if not mine or not theirs:
                continue
            k = min(mine, key=lambda m: m.median)
            ref = min(theirs, key=lambda m: m.median)
            ratios = ref.median / k.seconds
            token = family.add(k.seconds, ref.seconds, f"{operation} at {k.point()} ({version})").token
            row = (f"| {operation} at {k.point()} | {version} | {name(k)} {S.micro(k.median)} µs "
                   f"({S.micro(k.q1)}–{S.micro(k.q3)}) | {name(ref)} {S.micro(ref.median)} µs "
                   f"({S.micro(ref.q1)}–{S.micro(ref.q3)}) | {S.ratio(float(np.median(ratios)))} | "
                   f"{token} | ≥ {threshold:.2f}: {S.target(ratios, threshold)} |")
            if profiled is not None:
                ck, cr = (profiled.get((version, m.variant) + tuple(int(x) for x in point)) for m in (k, ref))
                row += f" {counter_text(ck)} / {counter_text(cr)} |"
            rows.append(((operation, point, version), row))
    return rows


def host_rows(path, version):
    s = S.samples(path)
    roof = S.roof_value(path, "host_read", "host_wall")
    if roof is None:
        return []
    rows = []
    for operation in sorted(s.operation.dropna().unique()):
        at = s[(s.operation == operation) & ~s.on_device & s.implementation.isin(PORTABLE)]
        if at.empty or (isinstance(at.compute_ceiling.iloc[0], str) and at.compute_ceiling.iloc[0]):
            continue
        largest = at.sort_values(["essential_bytes", "rows"]).iloc[-1]
        ms = [m for m in S.measures(path, operation, int(largest.rows), int(largest.features), int(largest.depth))
              if not m.on_device and m.implementation in PORTABLE]
        if not ms:
            continue
        k = min(ms, key=lambda m: m.median)
        shares = k.gbps() / roof
        rows.append(((operation, k.point(), version),
                     f"| {operation} at {k.point()} | {version} | {name(k)} {rate_text(k, False)} | "
                     f"{S.number(roof)} GB/s | {A_share(float(np.median(shares)))} | "
                     f"≥ {HOST_TARGET:.0%}: {S.target(shares, HOST_TARGET)} |"))
    return rows


def A_share(fraction):
    return S.roof_cell(fraction * 100.0, 100.0)


@generator("kokkos_costs", "what Kokkos costs: best Kokkos ÷ best handwritten CUDA per operation, per Kokkos version")
def kokkos_costs(block):
    device, host, layouts, notes = {}, {}, {}, set()
    device_family, layout_family = S.Family(), S.Family()  # each table's shown rows are one family
    profiles = [p for p in block.paths if is_profile(p)]
    profiled = counters(profiles) if profiles else None
    # Where several archives hold the same operation, point and Kokkos version, the newest measurement stands
    # (the archive's creation time), so a block may list an older archive for the rows no newer one holds.
    timed = [p for p in block.paths if p not in profiles]
    for path in sorted(timed, key=lambda p: S.archive(p).attrs.get("created_utc", "")):
        a = S.archive(path)
        version = a.environment.get("kokkos_version")
        if not version:
            raise ResultsError(f"{path}: the archive records no kokkos_version")
        device.update(device_rows(path, version, notes, device_family, profiled))
        host.update(host_rows(path, version))
        layouts.update(layout_rows(path, version, layout_family, profiled))
    # Grouped by Kokkos version, then operation and point (keys: operation, point, version).
    device, host, layouts = ([rows[k] for k in sorted(rows, key=lambda k: (k[2], k[0], str(k[1])))]
                             for rows in (device, host, layouts))
    device, layouts = device_family.fill(device, "short"), layout_family.fill(layouts, "short")
    if not device:
        raise ResultsError(f"{', '.join(block.written)}: no operation with both a Kokkos and a handwritten CUDA "
                           "device variant at a headline point")
    head = ("| operation at point | Kokkos | best Kokkos variant: median (IQR) | best handwritten CUDA (SGEMM: "
            "cuBLAS): median (IQR) | Kokkos speed ÷ CUDA speed | Kokkos vs CUDA (time ratio, interval; p_Holm) | "
            "target |")
    rule = "| --- | --- | --- | --- | --- | --- | --- |"
    if profiled is not None:  # Nsight Compute of the same build (kstudy profile), where the block names one
        head += " Nsight Compute, Kokkos / CUDA (– not profiled) |"
        rule += " --- |"
    lines = [head, rule] + device + [""]
    if layouts:
        head = ("| operation at point | Kokkos | best Kokkos variant of the layout | best Kokkos variant of the other "
                "layout | speed ratio | verdict (time ratio, interval; p_Holm) | target |")
        rule = "| --- | --- | --- | --- | --- | --- | --- |"
        if profiled is not None:
            head += " Nsight Compute, this layout / the other |"
            rule += " --- |"
        lines += ["One layout against the other, both Kokkos, same run (device medians):", "", head, rule]
        lines += layouts + [""]
    if host:
        lines += ["OpenMP (the device host's cores) against the host read roof of the same run:", "",
                  "| operation at point | Kokkos | best OpenMP Kokkos variant | host read roof | share | target |",
                  "| --- | --- | --- | --- | --- | --- |"] + host + [""]
    lines += [f"Kokkos vs CUDA, one layout against the other: {S.effects.rules_text()}; the family is each "
              "table's rows.", ""]
    lines += sorted(notes)
    return lines
