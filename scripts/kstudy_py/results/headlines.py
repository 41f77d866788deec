"""The README's headline numbers, generated from the same archives and by the same rules as docs/results.md: each
generator writes the sentences of one headline (what Kokkos costs, kernel lab III, the scoring study, the plain
baseline, energy, advise's accuracy), every comparison summarised over all the shapes measured (geometric-mean ratio,
range, the least favourable shape) with the Holm-corrected tally, and throttled samples disclosed as everywhere."""
import re
from pathlib import Path

import numpy as np

from . import ResultsError, generator, stats as S
from .energy import TIMER as ENERGY_TIMER
from ..effects import geometric_mean
from .kokkos_costs import pairs as kokkos_pairs
from .ladders import LAB3, at_point, best, operation_summary, rate_of, shapes_of
from .scoring import pair_families, pair_summary
from .study import SHAPE, boundaries, crossover, kept_text, rows_sweep


def kokkos_group(rows, version):
    """'0.90–1.05× its speed over 8 operation-points (geometric mean 0.98×, the lowest reduce_sum at n=2^28: 0.90×;
    faster at 2, ...)' of (operation, Comparison) rows, each comparison Kokkos time against the reference's."""
    family = S.Family()
    family.members = [c for _, c in rows]
    speeds = [1 / c.ratio for c in family.members]
    if len(rows) == 1:
        c = family.members[0]
        speed, low, high = c.speed()
        word = {"beats": "faster", "loses": "slower"}.get(c.verdict, c.verdict)
        return (f"{speed:.2f}× its speed at {c.label.split(' at ')[1]} (interval {low:.3f}–{high:.3f}; {word}, "
                f"{c.p_text()})")
    lowest = family.members[int(np.argmin(speeds))]
    return (f"{min(speeds):.2f}–{max(speeds):.2f}× its speed over {len(rows)} operation-points (geometric mean "
            f"{geometric_mean(speeds):.2f}×, the lowest {lowest.label}: {1 / lowest.ratio:.2f}×; {family.tally()} "
            f"after Holm's correction over the Kokkos {version} rows)")


@generator("headline_kokkos_costs", "README: what Kokkos costs, per group of operations, from kokkos_costs archives")
def headline_kokkos_costs(block):
    rows = {}
    for path in sorted(block.paths, key=lambda p: S.archive(p).attrs.get("created_utc", "")):
        version = S.archive(path).environment.get("kokkos_version")
        for operation, point, k, ref, compute, target in kokkos_pairs(path):
            rows[(operation, point, version)] = (operation, k, ref, compute, target)
    if not rows:
        raise ResultsError(f"{block.where}: no operation with both a Kokkos and a reference variant")
    lines = []
    for version in sorted({key[2] for key in rows}):
        family = S.Family()
        groups = {"memory": [], "attention": [], "gemm": [], "scoring": []}
        for (operation, point, v), (_, k, ref, compute, target) in sorted(rows.items(), key=lambda x: str(x[0])):
            if v != version:
                continue
            c = family.add(k.seconds, ref.seconds, f"{operation} at {k.point()}")
            if operation == "gemm":
                groups["gemm"].append((operation, c))
            elif operation == "attention":
                groups["attention"].append((operation, c))
            elif not compute and target and target[0] is not None:
                groups["memory"].append((operation, c))
            elif not compute and operation in ("scoring",):
                groups["scoring"].append((operation, c))
        family.resolve()
        parts = []
        if groups["memory"]:
            parts.append("on the memory-bound kernel-lab and STREAM operations, against the best handwritten CUDA, "
                         + kokkos_group(groups["memory"], version))
        if groups["attention"]:
            parts.append("on fp32 attention " + kokkos_group(groups["attention"], version))
        if groups["gemm"]:
            parts.append("on SGEMM (kstudy's Kokkos kernels against cuBLAS) " + kokkos_group(groups["gemm"], version))
        if groups["scoring"]:
            parts.append("on scoring (no target set) " + kokkos_group(groups["scoring"], version))
        lines.append(f"- Kokkos {version}, the best Kokkos variant " + "; ".join(parts) + ".")
    return lines


@generator("headline_lab3", "README: kernel lab III per operation over every measured shape (hopper_*.h5, "
                            "sgemm_frontier.h5)")
def headline_lab3(block):
    lines = []
    for name, path in zip(block.archive_names, block.paths):
        s = S.samples(path)
        for op in [op for op in LAB3 if ((s.operation == op) & (s.rung > 0)).any()]:
            headline, _, family = operation_summary(path, op, True)
            if not headline:
                continue
            largest = shapes_of(path, op)[-1]
            rungs, _, _ = at_point(path, op, largest)
            top = best(rungs)
            throttled = (f", {top.throttled} of its {len(top.seconds)} samples there throttled"
                         if top.throttled else "")
            lines.append(f"- **{op}** (`{Path(name).name}`): {headline}; at the largest, {top.point()}, "
                         f"`{top.variant.split('@')[0]}` runs {S.number(rate_of(top, True))} TFLOP/s (IQR "
                         f"{S.iqr_text(top.rate(True))}{throttled}).")
    if not lines:
        raise ResultsError(f"{block.where}: no kernel lab III ladder in the archives")
    return lines


@generator("headline_scoring", "README: what the scoring study's one-shot calls keep of the resident speedup "
                               "(sweeps.h5)")
def headline_scoring(block):
    path = block.paths[0]
    speedups = {label: (v, np.median(cpu) / np.median(t)) for label, v, t, cpu in boundaries(path)}
    resident = speedups.get("resident (CUDA events)")
    if resident is None:
        raise ResultsError(f"{block.where}: no resident boundary in {block.archive_names[0]}")
    parts = []
    for memory in ("pinned", "pageable"):
        one = speedups.get(f"one_shot from {memory} memory")
        if one is not None:
            parts.append(f"{100 * one[1] / resident[1]:.1f}% of it from {memory} memory (`{one[0].split('@')[0]}`, "
                         f"{one[1]:.2f}× the CPU)")
    s = rows_sweep(path)
    device = sorted(v for v in s.variant.unique() if v.endswith("@cuda"))
    never = [v for v in device if crossover(path, s, v, "pageable")[1]]
    largest = int(s[s.features == SHAPE[1]].rows.max())
    rows, features = SHAPE
    return [f"At {rows:,}×{features} the fastest resident device variant (`{resident[0].split('@')[0]}`) runs "
            f"{resident[1]:.1f}× the 8-thread Kokkos OpenMP reference; a one-shot call (upload, kernel, download) "
            f"keeps " + " and ".join(parts) + f". {kept_text(path)} From pageable memory {len(never)} of the "
            f"{len(device)} device "
            f"variants beat the CPU reference at no tested size up to {largest:,} rows (one-shot, Holm over each "
            "variant's sizes)."]


@generator("headline_plain_baseline", "README: the best scoring kernel against the 15-line one (plain_baseline.h5)")
def headline_plain_baseline(block):
    pairs, _, families = pair_families(block, "fused_cuda_feature_major@cuda:plain_minimal_cuda_feature_major@cuda")
    lines = []
    for (a, b), family in zip(pairs, families):
        if len(family):
            text, counts = pair_summary(a, b, family)
            others = len(counts["tie"]) + len(counts["inconclusive"])
            lines.append(f"{text}; tied or inconclusive at {others} (each interval in docs/results.md), in the same "
                         "run.")
    return lines


@generator("headline_energy", "README: energy per call at the memory roof (energy.h5)")
def headline_energy(block):
    s = S.samples(block.paths[0])
    S.use(block.paths[0], s)
    s = s[(s.timer == ENERGY_TIMER) & s.on_device & s.operation.str.startswith("stream_")]
    if s.empty:
        raise ResultsError(f"{block.where}: no STREAM sample of timer energy")
    per = s.groupby(["operation", "variant", "implementation"]).agg(
        seconds=("seconds", "median"), joules=("energy_joules", "median"),
        bytes=("essential_bytes", "first")).reset_index()
    per["watts"] = per.joules / per.seconds
    per["gbj"] = per.bytes / per.joules / 1e9
    roof = per[per.implementation != "kokkos_kernels"]
    lines = [f"At the memory roof energy per call follows time per call: {roof.gbj.min():.1f}–{roof.gbj.max():.1f} "
             f"essential GB/J for the handwritten CUDA and Kokkos variants of {', '.join(sorted(set(roof.operation)))}"]
    kk = []
    for row in per[per.implementation == "kokkos_kernels"].itertuples():
        cuda = per[(per.operation == row.operation) & (per.implementation == "handwritten_cuda")]
        if len(cuda):
            c = cuda.iloc[0]
            kk.append((row.operation.removeprefix("stream_"), row.watts / c.watts, row.seconds / c.seconds,
                       row.joules / c.joules))
    slow = [k for k in kk if k[2] > 1.5]  # the ones that miss the roof
    if slow:
        ops = " and ".join(k[0] for k in slow)
        lo_hi = (lambda i: f"{min(k[i] for k in slow):.1f}–{max(k[i] for k in slow):.1f}×")
        lines[0] += (f"; the Kokkos Kernels {ops} draw {lo_hi(1)} the power of the CUDA variant but run {lo_hi(2)} "
                     f"as long and cost {lo_hi(3)} the energy per call")
    lines[0] += " (medians over the trials; timer `energy`)."
    return lines


SUMMARY = re.compile(r"^- (?P<label>[^:]+): (?P<n>\d+) predictions, median error (?P<median>[+-][\d.]+)%, median "
                     r"\|error\| (?P<abs>[\d.]+)%, max \|error\| (?P<max>[\d.]+)%, within (?P<within>\d+) of \d+$")


@generator("headline_advise", "README: how far kstudy advise's predictions were off (advise_check.md, written by "
                              "scripts/advise_check.py from advise_check.h5)")
def headline_advise(block):
    path = next((p for p in block.paths if p.suffix == ".md"), None)
    if path is None:
        raise ResultsError(f"{block.where}: headline_advise reads the advise_check.md scripts/advise_check.py wrote")
    found = [m for m in (SUMMARY.match(line) for line in path.read_text().splitlines()) if m]
    if not found:
        raise ResultsError(f"{block.where}: {path.name} has no summary line per boundary")
    parts = [f"{m['label']} off by {m['abs']}% at the median (at most {m['max']}%, {m['n']} predictions, the "
             f"measured median inside the predicted quartiles at {m['within']})" for m in found]
    return ["Predicted against measured medians at shapes the sweeps did not measure: " + "; ".join(parts) + "."]
