"""Kernel lab I (memory-bound ladders) and II (compute-bound ladders): per operation, the rungs, the portable
(Kokkos) device variants and the vendor libraries at its headline point (the archive's: kstudy_py/ladder.py, which
`kstudy report`'s ladder section shares) and the points the issues' targets were set at, then those targets judged
from the same archive's samples (stats: Mann-Whitney for beats / ties, median and IQR for a fixed target)."""
import numpy as np

from .. import archive as A
from .. import ladder as L
from . import generator, stats as S

# Points shown beside an operation's headline point (rows, features, depth), after it: where the issues' targets
# were set (larger GEMMs, longer attention sequences, head_dim 128); a point the archive lacks is left out.
EXTRA_POINTS = {**{op: [(8192, 8192, 8192)] for op in ("gemm", "gemm_tf32", "gemm_bf16", "gemm_fp16")},
                "attention": [(16, 8192, 64), (16, 16384, 64)],
                "attention_bf16": [(16, 8192, 64), (16, 16384, 64), (16, 16384, 128)],
                **{op: [(16, 16384, 64), (16, 16384, 128)]
                   for op in ("attention_fp16", "attention_bf16_causal", "attention_fp16_causal")}}
# Operations whose published tables (lab III) show only their target points, not the headline point the archive
# stores (16 x 4,096 x 64): kept so that docs/results.md stays as published; without this line their tables would
# gain a 4,096-token column, as attention_bf16's has.
TARGET_POINTS_ONLY = ("attention_fp16", "attention_bf16_causal", "attention_fp16_causal")


class Target:
    """One issue target. kind: rate (best rung's essential rate ≥ threshold, GB/s or TFLOP/s), roof (best rung's
    share of `roof` ≥ threshold), vendor (best rung's vendor ratio ≥ threshold), beats_vendor (best rung against
    the vendor, Mann-Whitney), kokkos (the best Kokkos device variant's best-rung-time ratio ≥ threshold), or
    variant_vendor (`variant`'s vendor ratio ≥ threshold)."""

    def __init__(self, kind, operation, label, threshold=None, roof=None, variant=None, points=None):
        self.kind, self.operation, self.label = kind, operation, label
        self.threshold, self.roof, self.variant, self.points = threshold, roof, variant, points


def at_point(path, operation, point):
    """(rungs by rung, portable device variants, vendor variants) at one point (ladder.split)."""
    return L.split(S.measures(path, operation, *point))


def vendor_of(m, vendors):
    """The vendor variant `m` is compared with (ladder.vendor_of: the fastest of its layout, else of any)."""
    return L.vendor_of(vendors, m.layout)


best = L.fastest


def headline(path, operation):
    """The operation's headline point as the archive stores it (ladder.archived_headline), read from the
    experiment holding most of its rung points first; None where no experiment names it."""
    s = S.samples(path)
    at = s[s.operation == operation]
    order = L.by_rung_points(at, ["experiment"])
    order += [e for e in dict.fromkeys(at.experiment) if e not in order]
    experiments = S.archive(path).experiments
    return L.archived_headline(operation, [experiments[e] for e in order])


def named_points(path, operation):
    """The operation's headline point, then its EXTRA_POINTS, those the archive measured."""
    head = headline(path, operation)
    points = ([] if head is None or operation in TARGET_POINTS_ONLY else [head]) + EXTRA_POINTS.get(operation, [])
    return [p for p in dict.fromkeys(points) if S.measures(path, operation, *p)]


def rate_of(m, compute):
    return float(np.median(m.rate(compute)))


def roof_text(m, compute):
    roof, is_compute = S.pick_roof(m)
    value = S.roof_value(m.path, roof, m.timer, compute=is_compute)
    return S.roof_cell(rate_of(m, compute), value), roof


def ladder_table(path, operation, points, compute, notes):
    unit = "TFLOP/s" if compute else "GB/s"
    per_point = [at_point(path, operation, p) for p in points]
    labels = [S.measure(path, (r + pv + v)[0].variant, *p).point() for p, (r, pv, v) in zip(points, per_point)]
    columns = [f"{unit} at {lab}: median (IQR; × prev. rung [its 95% interval]) | % of roof" for lab in labels]
    head = "| | variant | " + " | ".join(columns) + " |"
    lines = [head, "| --- | --- |" + " --- | --- |" * len(points)]
    variants = []
    for rungs, portable, vendors in per_point:
        for m in rungs + portable + vendors:
            if m.variant not in [v for v, _ in variants]:
                kind = (f"rung {m.rung}" if m.rung > 0 else
                        "vendor" if m.implementation == L.VENDOR else m.implementation)
                variants.append((m.variant, kind))
    for variant, kind in variants:
        cells = []
        for point, (rungs, portable, vendors) in zip(points, per_point):
            m = next((x for x in rungs + portable + vendors if x.variant == variant), None)
            if m is None:
                cells += ["", ""]
                continue
            text = f"{S.number(rate_of(m, compute))} ({S.iqr_text(m.rate(compute))}"
            if m.rung > 1:
                previous = next((r for r in rungs if r.rung == m.rung - 1), None)
                if previous is not None:
                    _, low, high = L.step(previous.seconds, m.seconds)
                    text += f"; {S.ratio(previous.median / m.median)} [{low:.2f}–{high:.2f}]"
            text += ")"
            share, roof = roof_text(m, compute)
            if share == S.OTHER_CLOCK:
                notes.add(S.OTHER_CLOCK_NOTE)
            cells += [text, f"{share} of {roof}" if share not in ("", S.OTHER_CLOCK) else share]
        name = variant.split("@")[0] + ("" if variant.endswith("@cuda") else f"@{variant.split('@')[1]}")
        lines.append(f"| {kind} | `{name}` | " + " | ".join(cells) + " |")
    return lines


def summary_rows(path, operation, points, compute, family):
    """Rows of the summary table; the verdict cells are tokens of `family` (the whole summary table)."""
    unit = "TFLOP/s" if compute else "GB/s"
    out = []
    for point in points:
        rungs, portable, vendors = at_point(path, operation, point)
        top = best(rungs)
        if top is None:
            continue
        vendor = vendor_of(top, vendors)
        kokkos = best(portable)
        cells = [f"{operation} at {top.point()}", f"`{top.variant.split('@')[0]}`",
                 f"{S.number(rate_of(top, compute))} ({S.iqr_text(top.rate(compute))})"]
        if vendor is not None:
            cells += [f"`{vendor.variant.split('@')[0]}` {S.number(rate_of(vendor, compute))} "
                      f"({S.iqr_text(vendor.rate(compute))})",
                      S.ratio(float(np.median(S.vendor_ratio(top, vendor)))),
                      L.against_vendor(family, top, vendor, f"{operation} at {top.point()}").token]
        else:
            cells += ["—", "", ""]
        if kokkos is not None:
            cells += [f"`{kokkos.variant.split('@')[0]}` ({kokkos.implementation}) "
                      f"{S.number(rate_of(kokkos, compute))} ({S.iqr_text(kokkos.rate(compute))})",
                      S.ratio(top.median / kokkos.median)]
        else:
            cells += ["—", ""]
        out.append("| " + " | ".join(cells) + " |")
    if not out:
        return []
    return [f"| point | best rung | {unit}: median (IQR) | vendor, same layout ({unit}: median (IQR)) | best rung's "
            "speed ÷ vendor's | best rung vs vendor (time ratio, its interval; p_Holm) | best portable variant on the "
            f"device ({unit}: median (IQR)) | its speed ÷ best rung's |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |"] + out


def shapes_of(path, operation):
    """Every point of the archive at which the operation has a ladder rung, by essential work."""
    s = S.samples(path)
    at = s[(s.operation == operation) & (s.rung > 0)]
    at = at.sort_values(["essential_flops", "essential_bytes", *A.EXTENTS])
    return list(dict.fromkeys(zip(at.rows.astype(int), at.features.astype(int), at.depth.astype(int))))


OF_VENDOR = "the vendor's speed"


def operation_summary(path, operation, compute):
    """(headline, table lines, family) of the best rung against the vendor at every shape the archive measured for
    the operation: the headline summarises all of them (geometric-mean speed ratio, range, the lowest shape, the
    Holm-corrected tally), the table gives each shape with its spread."""
    unit = "TFLOP/s" if compute else "GB/s"
    family, table = S.Family(), []
    for point in shapes_of(path, operation):
        rungs, _, vendors = at_point(path, operation, point)
        top = best(rungs)
        vendor = vendor_of(top, vendors) if top is not None else None
        if vendor is None:
            continue
        c = L.against_vendor(family, top, vendor, top.point())
        throttled = " ⚠" if top.throttled or vendor.throttled else ""
        table.append(f"| {top.point()}{throttled} | `{top.variant.split('@')[0]}` {S.number(rate_of(top, compute))} "
                     f"({S.iqr_text(top.rate(compute))}) | `{vendor.variant.split('@')[0]}` "
                     f"{S.number(rate_of(vendor, compute))} ({S.iqr_text(vendor.rate(compute))}) | "
                     f"{c.token} |")
    if not len(family):
        return "", [], family
    table = family.fill(table, "speed_short")
    vendor_names = sorted({line.split("| `")[2].split("`")[0] for line in table})
    headline = (f"the best rung at each of the {len(family)} measured shapes against the vendor "
                f"({', '.join(f'`{v}`' for v in vendor_names)}): {family.summary(speed=True, of=OF_VENDOR)}; "
                f"{family.tally()} after Holm's correction over the {len(family)} shapes")
    head = [f"| shape | best rung: {unit} median (IQR) | vendor: {unit} median (IQR) | best rung vs vendor (speed "
            "ratio, interval; p_Holm) |", "| --- | --- | --- | --- |"]
    return headline, head + table, family


def judge(path, t, compute):
    unit = "TFLOP/s" if compute else "GB/s"
    # Targets were set at the headline and named points: an archive without them is not judged against them.
    points = t.points or named_points(path, t.operation)
    results, family, pending = [], S.Family(), []
    for point in points:
        rungs, portable, vendors = at_point(path, t.operation, point)
        top = best(rungs)
        if top is None:
            continue
        where = top.point()
        if t.kind == "rate":
            values = top.rate(compute)
            results.append((S.target(values, t.threshold), f"{where}: `{top.variant.split('@')[0]}` "
                            f"{S.number(np.median(values))} {unit} (IQR {S.iqr_text(values)})"))
        elif t.kind == "roof":
            roof = S.roof_value(path, t.roof, top.timer)
            if roof is None:
                results.append(("not judged", f"{where}: no {t.roof} roof on the variant's clock"))
            else:
                values = 100 * top.gbps() / roof
                results.append((S.target(values / 100, t.threshold), f"{where}: "
                                f"{S.roof_cell(np.median(top.gbps()), roof)} of {t.roof}"))
        elif t.kind in ("vendor", "beats_vendor", "variant_vendor"):
            m = top if t.kind != "variant_vendor" else next(
                (x for x in portable + rungs if x.variant == t.variant), None)
            vendor = vendor_of(m, vendors) if m is not None else None
            if m is None or vendor is None:
                continue
            if t.kind == "beats_vendor":
                c = L.against_vendor(family, m, vendor, where)
                pending.append((len(results), c, m, vendor))
                results.append(None)  # decided once the family (every point of the target) is in
            else:
                values = S.vendor_ratio(m, vendor)
                # One decimal more where whole percent would print the target itself (60% "missed").
                spec = ".1f" if round(100 * float(np.median(values))) == round(100 * t.threshold) else ".0f"
                q1, q3 = (100 * np.quantile(values, q) for q in (0.25, 0.75))
                results.append((S.target(values, t.threshold), f"{where}: `{m.variant.split('@')[0]}` at "
                                f"{100 * np.median(values):{spec}}% of `{vendor.variant.split('@')[0]}` "
                                f"(IQR {q1:{spec}}–{q3:{spec}}%)"))
        elif t.kind == "kokkos":
            kokkos = best(portable)
            if kokkos is not None:
                values = top.median / kokkos.seconds
                results.append((S.target(values, t.threshold), f"{where}: `{kokkos.variant.split('@')[0]}` at "
                                f"{100 * np.median(values):.0f}% of the best rung's speed"))
    family.resolve()
    for i, c, m, vendor in pending:
        if c.verdict == "too few samples":
            results[i] = ("not judged", f"{c.label}: {c.verdict}")
            continue
        results[i] = ({"beats": "met", "loses": "missed"}.get(c.verdict, c.verdict),
                      f"{c.label}: `{m.variant.split('@')[0]}` {c.verdict} `{vendor.variant.split('@')[0]}` "
                      f"(time ratio {c.ratio:.2f}×, interval {c.interval()}; {c.p_text()} over "
                      f"{family.tested()} point(s))")
    if not results:
        return []
    verdicts = {v for v, _ in results}
    overall = verdicts.pop() if len(verdicts) == 1 else "mixed"
    details = [f"{detail} ({v})" if overall == "mixed" else detail for v, detail in results]
    return [f"- {t.label}: **{overall}** — " + "; ".join(details) + "."]


RULES = ("Verdicts: a fixed target is **met** or **missed** by the median of the per-sample metric, and "
         "**borderline** when the target lies inside the metric's interquartile range; *beats / loses / tie*: "
         f"{S.effects.rules_text()}; the family is the summary table's rows (a target: its points), over the two "
         "variants' samples at the same point in the same archive; ratios against a vendor use the median of all "
         "that vendor variant's samples at the point.")


def points_of(path, operation, compute):
    """The operation's headline and named points the archive measured; where it measured none of them (a smaller
    study), its largest rung point (most essential flops or bytes)."""
    points = named_points(path, operation)
    if points:
        return points
    s = S.samples(path)
    return [L.largest_point(s[(s.operation == operation) & (s.rung > 0)], compute)]


def lab(block, operations, targets, compute_of):
    path = block.paths[0]
    s = S.samples(path)
    present = [op for op in operations if ((s.operation == op) & (s.rung > 0)).any()]
    if not present:
        raise S.ResultsError(f"{block.where}: {block.archive_names[0]} has no ladder rung of "
                             f"{', '.join(operations)}")
    lines, notes = [], set()
    throttle_mark = False
    for op in present:
        points = points_of(path, op, compute_of(op))
        lines += [f"**{op}**", ""] + ladder_table(path, op, points, compute_of(op), notes) + [""]
        headline, table, _ = operation_summary(path, op, compute_of(op))
        if headline:
            lines += [f"Every shape of {op}: {headline}:", ""] + table + [""]
            throttle_mark = throttle_mark or any(" ⚠ |" in row for row in table)
    if throttle_mark:
        notes.add("⚠: the archive flags samples of this shape throttled (the block's last note says how many and "
                  "at which clocks).")
    lines += ["Summary (best rung = the fastest rung at the point):", ""]
    summary, family = [], S.Family()
    for op in present:
        points = points_of(path, op, compute_of(op))
        rows = summary_rows(path, op, points, compute_of(op), family)
        summary += rows if not summary else rows[2:]
    summary = family.fill(summary, "short")
    judged = [line for t in targets if t.operation in present for line in judge(path, t, compute_of(t.operation))]
    lines += summary + ["", "**Targets**:", ""]
    lines += judged or ["- none: the archive measured no point a target was set at."]
    lines += ["", RULES]
    return lines + [f"\n{n}" for n in sorted(notes)]


LAB1 = ["reduce_sum", "transpose", "softmax", "layernorm", "residual_layernorm"]
LAB1_TARGETS = [
    Target("rate", "reduce_sum", "Sum ≥ 4,120 GB/s", threshold=4120),
    Target("beats_vendor", "reduce_sum", "Sum faster than the vendor (CUB)"),
    Target("roof", "transpose", "Transpose ≥ 85% of the device copy roof", threshold=0.85, roof="device_copy"),
    Target("beats_vendor", "transpose", "Transpose faster than the vendor (cuBLAS geam)"),
    Target("rate", "softmax", "Softmax ≥ 3,400 GB/s", threshold=3400),
    Target("rate", "layernorm", "LayerNorm ≥ 3,600 GB/s", threshold=3600),
    Target("rate", "residual_layernorm", "Fused residual + LayerNorm ≥ 3,950 GB/s (the 4-pass byte model)",
           threshold=3950),
] + [Target("kokkos", op, f"{op}: the best portable (Kokkos) device variant within 10% of the best rung's speed",
            threshold=0.9) for op in LAB1]


@generator("lab1", "kernel lab I: the memory-bound ladders (lab.h5) and their targets")
def lab1(block):
    return lab(block, LAB1, LAB1_TARGETS, lambda op: False)


LAB2 = ["gemm", "gemm_tf32", "gemm_bf16", "attention", "attention_bf16"]
LAB2_TARGETS = [
    Target("vendor", "gemm", "SGEMM best rung ≥ 90% of cuBLAS", threshold=0.9),
    Target("variant_vendor", "gemm", "Kokkos tiled SGEMM ≥ 60% of cuBLAS", threshold=0.6,
           variant="gemm_kokkos_tiled@cuda"),
    Target("vendor", "gemm_tf32", "TF32 tensor cores ≥ 50% of cuBLAS TF32", threshold=0.5),
    Target("vendor", "gemm_bf16", "BF16 tensor cores ≥ 50% of cuBLAS BF16", threshold=0.5),
    Target("rate", "attention", "Fused attention fp32 ≥ 35 TFLOP/s at 4K–16K tokens", threshold=35),
    Target("rate", "attention_bf16", "Fused attention bf16 ≥ 250 TFLOP/s at 4K–16K tokens", threshold=250),
]


@generator("lab2", "kernel lab II: the compute-bound ladders (lab2.h5) and their targets")
def lab2(block):
    return lab(block, LAB2, LAB2_TARGETS, lambda op: True)


LAB3 = ["gemm", "gemm_bf16", "gemm_fp16", "gemm_tf32", "attention_bf16", "attention_fp16", "attention_bf16_causal",
        "attention_fp16_causal"]
LAB3_TARGETS = [
    Target("vendor", "gemm", "SGEMM (float32 on CUDA cores) ≥ 95% of cuBLAS SGEMM", threshold=0.95),
    Target("vendor", "gemm_bf16", "BF16 GEMM on Hopper's wgmma ≥ 90% of cuBLAS BF16", threshold=0.9),
    Target("vendor", "gemm_fp16", "FP16 GEMM on Hopper's wgmma ≥ 90% of cuBLAS FP16", threshold=0.9),
    Target("vendor", "gemm_tf32", "TF32 GEMM on Hopper's wgmma ≥ 85% of cuBLAS TF32", threshold=0.85),
] + [t for op in ("attention_bf16", "attention_fp16") for t in (
    Target("rate", op, f"{op} ≥ 450 TFLOP/s at 16K tokens, head_dim 64", threshold=450, points=[(16, 16384, 64)]),
    Target("rate", op, f"{op} ≥ 550 TFLOP/s at 16K tokens, head_dim 128", threshold=550,
           points=[(16, 16384, 128)]),
    Target("vendor", op, f"{op} ≥ cuDNN's fused attention at 16K tokens", threshold=1.0,
           points=[(16, 16384, 64), (16, 16384, 128)]))]


@generator("lab3", "kernel lab III: the GEMM ladders on wgmma + TMA (hopper_gemm*.h5), the SGEMM frontier "
                   "(sgemm_frontier.h5), the attention ladders on wgmma (hopper_attention*.h5) and their targets")
def lab3(block):
    return lab(block, LAB3, LAB3_TARGETS, lambda op: True)
