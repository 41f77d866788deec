"""Kernel ladders (the kernel lab's method: write the kernel naively, change one thing at a time, and prove with
counters why it got faster). For every operation whose variants table has rungs (`variants.rung` > 0, schema 6), one
table at its headline point: the rungs in order, then the portable (Kokkos) variants, then the vendor libraries;
each row's resident median, essential GB/s (bandwidth-bound operations) or TFLOP/s (compute-bound ones: the
operation names a compute ceiling, schema 7), % of the roof measured in the same archive, × the previous rung and ×
the vendor, and, where a profile archive (`kstudy profile`) has the same variant and point, its counters beside the
stopwatch.

Rules (every number from the archives, none from names except the vendor rule; the classification, the vendor and
the headline point are kstudy_py/ladder.py's, which the published results share):
- Headline point: the operation's headline point as the archive stores it (operation_info::headline_point, the
  experiment's `headline_points` attribute; ladder.LEGACY_HEADLINE_POINTS for archives written before it) where the
  experiment measured it, else its largest point (most essential bytes), taken in the experiment holding most of
  the operation's rung points.
- Time: the resident median, device events before the resident wall clock for device variants, host_wall for
  host variants (bandwidth.resident_points), default block size.
- Roof: a compute-bound operation's device variants against its compute ceiling (variants.compute_ceiling: a
  cuBLAS GEMM or the FMA probe of the same run); otherwise read-only traffic (the variant's modelled writes under
  1% of its modelled traffic) against device_read, the rest against device_copy; host variants against host_read.
- Vendor: variants whose implementation is `vendor_library` (cuBLAS, CUB, cuDNN called directly, nothing else); the
  vendor of an operation is its fastest such variant at the point, of any layout (ladder.vendor_of without a layout;
  the published results hold each rung against the vendor of its own layout). Portable: `kokkos`, `kokkos_kernels` and
  `kokkos_mixed` variants (variants.implementation); a rung whose kernels include a vendor call (`mixed`) is still a
  rung, and its row says so.
- × previous rung = previous rung's time / this rung's time (above 1: the change paid); × vendor = the vendor's
  time / this time (above 1: faster than the vendor).
"""
import numpy as np
import pandas as pd

from ... import archive as A
from ... import ladder as L
from .. import section
from ..variants import tuned_choice
from .bandwidth import resident_points

READ_ONLY_SHARE = 0.01
# Summed over a call's kernels, except the last three: the L2 hit rate and achieved occupancy weighted by each
# kernel's profiled duration, registers per thread the most any kernel of the call uses.
COUNTERS = ["dram_bytes_read", "dram_bytes_written", "shared_bank_conflicts_load", "shared_bank_conflicts_store",
            "l2_hit_rate_pct", "achieved_occupancy_pct", "registers_per_thread"]
SUMMED = COUNTERS[:4]
WEIGHTED = ("l2_hit_rate_pct", "achieved_occupancy_pct")
COLUMNS = ["archive", "experiment", "operation", "point", *A.EXTENTS, "order", "kind", "rung",
           "variant", "family", "backend", "timer", "median_s", "essential_GB_per_s", "tflop_per_s", "compute_bound",
           "roof", "roof_GB_per_s", "roof_tflop_per_s", "pct_of_roof", "x_previous_rung", "vendor_variant", "x_vendor",
           "peak_device_bytes", "tuned_parameters", "implementation", "tuner_candidates",
           "tuner_same_as_rung"] + COUNTERS


def roof_of(row, modelled):
    """The roof a variant is held against: its operation's compute ceiling (compute-bound, on a device), else by
    its own modelled traffic (read-only: device_read)."""
    if not bool(row.on_device):
        return "host_read"
    if isinstance(row.compute_ceiling, str) and row.compute_ceiling:
        return row.compute_ceiling
    m = modelled.get((row.archive, row.experiment, row.variant, row.rows, row.features, row.depth))
    if m is not None and m[0] + m[1] > 0 and m[1] < READ_ONLY_SHARE * (m[0] + m[1]):
        return "device_read"
    return "device_copy"


def profile_counters(archives):
    """Per (variant, rows, features, depth): the counters over the profiled call's kernels (COUNTERS says how
    each is combined); NaN where no profile measured them."""
    frames = [e.profile for a in archives for e in a.experiments.values() if not e.profile.empty]
    if not frames:
        return {}
    prof = pd.concat(frames, ignore_index=True)
    prof = prof[prof.status.isin(["ok", "rejected"]) & (prof.launch >= 0)]
    out = {}
    for key, k in prof.groupby(["variant", *A.EXTENTS]):
        values = {}
        for c in SUMMED:
            values[c] = k[c].sum(min_count=1) if c in k.columns else np.nan
        for c in WEIGHTED:
            if c in k.columns:
                w = k.profiled_duration_s.where(k[c].notna(), 0.0)
                values[c] = (k[c].fillna(0) * w).sum() / w.sum() if w.sum() > 0 else np.nan
            else:
                values[c] = np.nan
        registers = k.registers_per_thread[k.registers_per_thread >= 0] if "registers_per_thread" in k else k[[]]
        values["registers_per_thread"] = float(registers.max()) if len(registers) else np.nan
        out[key] = values
    return out


def ladder_rows(at, operation, modelled, archive, counters):
    """The ladder table's rows at one point: rungs by rung (then backend), portable, vendor."""
    at = at.assign(rung=at.rung.fillna(0).astype(int))
    at = at.assign(kind=[L.kind_of(i, r) for i, r in zip(at.implementation, at.rung)]).dropna(subset=["kind"])
    order = {"rung": 0, "portable": 1, "vendor": 2}
    at = at.assign(order=at.kind.map(order)).sort_values(
        ["order", "rung", "on_device", "backend", "median"], ascending=[True, True, False, True, True])
    best_vendor = L.vendor_of(list(at[at.kind == "vendor"].itertuples()))
    rows, previous = [], None
    for r in at.itertuples():
        roof = roof_of(r, modelled)
        compute = roof not in ("device_read", "device_copy", "host_read")
        clock = A.clock_of(r.timer)  # a roof of the number's own clock only
        roof_bw = np.nan if compute else (archive.ceiling(roof, clock) or np.nan) / 1e9
        roof_tflops = (archive.compute_ceiling(roof, clock) or np.nan) / 1e12 if compute else np.nan
        gbps = r.essential_bytes / r.median / 1e9
        tflops = r.essential_flops / r.median / 1e12
        row = {"archive": r.archive, "experiment": r.experiment, "operation": operation,
               "point": A.point_label(r.rows, r.features, r.axes, r.depth), "rows": r.rows, "features": r.features,
               "depth": r.depth, "order": r.order, "kind": r.kind, "rung": int(r.rung), "variant": r.variant,
               "family": r.family, "backend": r.backend, "timer": r.timer, "median_s": r.median,
               "essential_GB_per_s": gbps, "tflop_per_s": tflops, "compute_bound": compute, "roof": roof,
               "roof_GB_per_s": roof_bw, "roof_tflop_per_s": roof_tflops,
               "pct_of_roof": 100 * (tflops / roof_tflops if compute else gbps / roof_bw),
               "x_previous_rung": np.nan, "vendor_variant": "", "x_vendor": np.nan,
               "peak_device_bytes": r.peak_device_bytes, "tuned_parameters": r.tuned_parameters or "",
               "implementation": r.implementation}
        _, row["tuner_candidates"], row["tuner_same_as_rung"] = tuned_choice(r.tuned_parameters)
        if r.kind == "rung":
            if previous is not None and previous.backend == r.backend:
                row["x_previous_rung"] = previous.median / r.median
            previous = r
        if best_vendor is not None:
            row["vendor_variant"] = best_vendor.variant
            row["x_vendor"] = best_vendor.median / r.median
        row.update(counters.get((r.variant, r.rows, r.features, r.depth),
                                {c: np.nan for c in COUNTERS}))
        rows.append(row)
    return rows


def number(v, spec, suffix=""):
    return "" if v is None or not np.isfinite(v) else f"{v:{spec}}{suffix}"


def kept_rung(same_as_rung):
    """The earlier rung whose configuration a tuner chose, or None (none, or not recorded)."""
    return int(same_as_rung) if same_as_rung is not None and np.isfinite(same_as_rung) and same_as_rung > 0 else None


def tuned_text(tuned_parameters):
    """A variant's tuned parameters in its table cell: the choice, how many candidates it was chosen from, and
    whether it is an earlier rung's configuration."""
    shown, candidates, same_as_rung = tuned_choice(tuned_parameters)
    if not shown and candidates is None:
        return ""
    text = f" ({shown}"
    if candidates is not None:
        text += f"; fastest of {candidates} candidates"
    if kept_rung(same_as_rung):
        text += f"; **rung {same_as_rung}'s configuration**"
    return text + ")"


def markdown(table, with_counters):
    compute = bool(table.compute_bound.any())
    rate = "TFLOP/s" if compute else "GB/s"
    head = f"| | variant | time | {rate} | % of roof | × prev. rung | × vendor |"
    rule = "| --- | --- | --- | --- | --- | --- | --- |"
    memory = table.peak_device_bytes.fillna(-1).max() > 0 and compute
    if memory:
        head += " peak device memory |"
        rule += " --- |"
    if with_counters:
        head += " DRAM read / written (MB) | smem bank conflicts ld / st | L2 hit | occupancy | regs |"
        rule += " --- | --- | --- | --- | --- |"
    lines = [head, rule]
    for r in table.itertuples():
        label = f"rung {r.rung}" if r.kind == "rung" else r.kind
        if r.implementation == "mixed":
            label += " (mixed: own kernels + vendor call)"
        value = f"{r.tflop_per_s:,.1f}" if compute else f"{r.essential_GB_per_s:,.1f}"
        line = (f"| {label} | `{r.variant}`{tuned_text(r.tuned_parameters)} | "
                f"{A.fmt_seconds(r.median_s)} | {value} | "
                f"{A.roof_share(r.pct_of_roof)} of {r.roof} | {number(r.x_previous_rung, '.2f', '×')} | "
                f"{number(r.x_vendor, '.2f', '×')} |")
        if memory:
            line += f" {number(r.peak_device_bytes / 2**20, ',.0f', ' MiB') if r.peak_device_bytes >= 0 else ''} |"
        if with_counters:
            dram = (f"{number(r.dram_bytes_read / 1e6, ',.1f')} / {number(r.dram_bytes_written / 1e6, ',.1f')}"
                    if np.isfinite(r.dram_bytes_read) else "")
            banks = (f"{number(r.shared_bank_conflicts_load, ',.0f')} / {number(r.shared_bank_conflicts_store, ',.0f')}"
                     if np.isfinite(r.shared_bank_conflicts_load) or np.isfinite(r.shared_bank_conflicts_store) else "")
            line += (f" {dram} | {banks} | {number(r.l2_hit_rate_pct, '.1f', '%')} | "
                     f"{number(r.achieved_occupancy_pct, '.0f', '%')} | {number(r.registers_per_thread, '.0f')} |")
        lines.append(line)
    return lines


EXPLANATION = ("Rows: the rungs in order (each changes one thing), then the portable Kokkos variants, then the vendor "
               "libraries (implementation vendor_library). Time: resident median (device events where measured, else "
               "the resident wall clock; host_wall on a host). GB/s: essential bytes / time. Roof: device_read for "
               "read-only traffic, device_copy otherwise, host_read on a host, measured in the same archive. × prev. "
               "rung: the previous rung's time over this one's; × vendor: the fastest vendor variant's time over this "
               "one's (above 1: faster). Compute-bound operations (GEMM, attention) show essential TFLOP/s against "
               "their compute ceiling (a cuBLAS GEMM or the FMA probe, measured in the same archive), the variant's "
               "peak device memory and an autotuned rung's chosen parameters (with the number of candidates it timed, "
               "and when its choice is an earlier rung's configuration: then that row re-measures the earlier rung's "
               "kernel). A rung labelled mixed runs its own kernels around a vendor library call. Counters, where "
               "`kstudy profile` measured the same variant and point: summed over the call's kernels (L2 hit rate and "
               "achieved occupancy weighted by kernel duration; registers: the most any kernel uses).")


@section("ladder", "Kernel ladders", order=6)
def ladder(inputs, sec):
    points = inputs.points
    if points.empty or "rung" not in points.columns or not L.is_rung(points).any():
        return sec.skip("no variant of the archives is a ladder rung (variants.rung > 0, schema 6; the rungs are "
                        "handwritten CUDA kernels, so a CPU build has none)")
    resident = resident_points(points)
    v = inputs.variants
    modelled = {k: (r, w) for k, r, w in zip(zip(v.archive, v.experiment, v.variant, v.rows, v.features, v.depth),
                                             v.modelled_bytes_read, v.modelled_bytes_written)}
    counters = profile_counters(inputs.archives)
    archives = {a.label: a for a in inputs.archives}
    rows = []
    for operation in sorted(resident[L.is_rung(resident)].operation.unique()):
        op = resident[resident.operation == operation]
        arch, exp = L.by_rung_points(op, ["archive", "experiment"])[0]
        g = op[(op.archive == arch) & (op.experiment == exp)]
        point = L.headline_point(g[L.is_rung(g)], operation, archives[arch].experiments[exp])
        at = g[L.at(g, point)]
        rows += ladder_rows(at, operation, modelled, archives[arch], counters)
    df = pd.DataFrame(rows, columns=COLUMNS)
    inputs.write_csv(df, "ladder.csv", sec,
                     "per operation with rungs, at its headline point: rungs, portable and vendor variants with time, "
                     "essential GB/s, % of roof, × previous rung, × vendor and profile counters")
    sec.lines += [EXPLANATION, ""]
    for (operation, arch, exp, point), t in df.groupby(["operation", "archive", "experiment", "point"], sort=False):
        with_counters = t[COUNTERS].notna().any().any()
        sec.lines += [f"**{operation}** at {point} ({arch}/{exp}):", ""] + markdown(t, with_counters) + [""]
        rungs = t[t.kind == "rung"]
        top = rungs.loc[rungs.median_s.idxmin()]
        rate = f"{top.tflop_per_s:,.1f} TFLOP/s" if top.compute_bound else f"{top.essential_GB_per_s:,.0f} GB/s"
        text = (f"{operation} ladder ({arch}/{exp}, {point}): best rung `{top.variant}` {rate} "
                f"= {A.roof_share(top.pct_of_roof)} of {top.roof}, "
                f"{rungs.median_s.iloc[0] / top.median_s:.1f}× rung {int(rungs.rung.iloc[0])}")
        if np.isfinite(top.x_vendor):
            text += f", {top.x_vendor:.2f}× `{top.vendor_variant}`"
        for r in rungs.itertuples():
            earlier = kept_rung(r.tuner_same_as_rung)
            if earlier:
                note = (f"`{r.variant}` (rung {r.rung}): its tuner chose rung {earlier}'s configuration"
                        + (f" (fastest of {int(r.tuner_candidates)} candidates)"
                           if r.tuner_candidates is not None and np.isfinite(r.tuner_candidates) else "")
                        + f", so it re-measures rung {earlier}'s kernel rather than a configuration of its own")
                sec.lines += [note + ".", ""]
                text += f"; {note}"
        sec.headlines.append(text + ".")
    return sec.done(df)
