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
  1% of its modelled traffic) against device_read, the rest against device_copy; host variants against the roof of
  the cache level their modelled traffic fits (host_read_l1 ...), else host_read.
- Vendor: variants whose implementation is `vendor_library` (cuBLAS, CUB, cuDNN called directly, nothing else); the
  vendor of an operation is its fastest such variant at the point, of any layout (ladder.vendor_of without a layout;
  the published results hold each rung against the vendor of its own layout). Portable: `kokkos`, `kokkos_kernels` and
  `kokkos_mixed` variants (variants.implementation); a rung whose kernels include a vendor call (`mixed`) is still a
  rung, and its row says so.
- × previous rung = previous rung's time / this rung's time (above 1: the change paid); × vendor = the vendor's
  time / this time (above 1: faster than the vendor).
- Verdicts (effects.py, as the published results state theirs): each ratio is the ratio of the two medians with its
  seeded bootstrap interval and a Mann-Whitney U verdict, Holm-corrected over the family it belongs to. A table has
  two: its rung claims (every step, and the best rung against the first) and its vendor claims (every other row
  against the vendor); each family's size and the correction are stated under the table, the throttled samples its
  medians rest on too (report/throttle.py).
"""
import numpy as np
import pandas as pd

from ... import archive as A
from ... import effects
from ... import ladder as L
from .. import section, throttle
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
           "variant", "family", "backend", "timer", "n", "median_s", "q1_s", "q3_s", "essential_GB_per_s",
           "tflop_per_s", "compute_bound", "roof", "roof_GB_per_s", "roof_tflop_per_s", "pct_of_roof",
           "x_previous_rung", "x_previous_rung_low", "x_previous_rung_high", "previous_rung_verdict",
           "previous_rung_p_holm",
           "vendor_variant", "x_vendor", "x_vendor_low", "x_vendor_high", "vendor_verdict", "vendor_p_holm",
           "peak_device_bytes", "tuned_parameters", "implementation", "tuner_candidates",
           "tuner_same_as_rung"] + COUNTERS


def roof_of(row, modelled, archive):
    """The roof a variant is held against: its operation's compute ceiling (compute-bound, on a device), else by
    its own modelled traffic (read-only: device_read); on a host, the roof of the cache level that traffic fits
    (host_read_l1 ..., else host_read: Archive.host_roof)."""
    m = modelled.get((row.archive, row.experiment, row.variant, row.rows, row.features, row.depth))
    if not bool(row.on_device):
        return archive.host_roof(m[0] + m[1] if m is not None else row.bytes, A.clock_of(row.timer))
    if isinstance(row.compute_ceiling, str) and row.compute_ceiling:
        return row.compute_ceiling
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


def ladder_rows(at, operation, modelled, archive, counters, seconds):
    """The ladder table's rows at one point: rungs by rung (then backend), portable, vendor. `seconds(row)`: the
    samples under a row of `at`, which the verdicts (verdicts()) test; they ride along in the internal columns."""
    at = at.assign(rung=at.rung.fillna(0).astype(int))
    at = at.assign(kind=[L.kind_of(i, r) for i, r in zip(at.implementation, at.rung)]).dropna(subset=["kind"])
    order = {"rung": 0, "portable": 1, "vendor": 2}
    at = at.assign(order=at.kind.map(order)).sort_values(
        ["order", "rung", "on_device", "backend", "median"], ascending=[True, True, False, True, True])
    best_vendor = L.vendor_of(list(at[at.kind == "vendor"].itertuples()))
    rows, previous = [], None
    for r in at.itertuples():
        roof = roof_of(r, modelled, archive)
        compute = roof not in ("device_read", "device_copy") and not A.is_host_roof(roof)
        clock = A.clock_of(r.timer)  # a roof of the number's own clock only
        roof_bw = np.nan if compute else (archive.ceiling(roof, clock) or np.nan) / 1e9
        roof_tflops = (archive.compute_ceiling(roof, clock) or np.nan) / 1e12 if compute else np.nan
        gbps = r.essential_bytes / r.median / 1e9
        tflops = r.essential_flops / r.median / 1e12
        row = {"archive": r.archive, "experiment": r.experiment, "operation": operation,
               "point": A.point_label(r.rows, r.features, r.axes, r.depth), "rows": r.rows, "features": r.features,
               "depth": r.depth, "order": r.order, "kind": r.kind, "rung": int(r.rung), "variant": r.variant,
               "family": r.family, "backend": r.backend, "timer": r.timer, "n": r.n, "median_s": r.median,
               "q1_s": r.q1, "q3_s": r.q3,
               "essential_GB_per_s": gbps, "tflop_per_s": tflops, "compute_bound": compute, "roof": roof,
               "roof_GB_per_s": roof_bw, "roof_tflop_per_s": roof_tflops,
               "pct_of_roof": 100 * (tflops / roof_tflops if compute else gbps / roof_bw),
               "x_previous_rung": np.nan, "x_previous_rung_low": np.nan, "x_previous_rung_high": np.nan,
               "previous_rung_verdict": "", "previous_rung_p_holm": np.nan, "vendor_variant": "", "x_vendor": np.nan,
               "x_vendor_low": np.nan, "x_vendor_high": np.nan, "vendor_verdict": "", "vendor_p_holm": np.nan,
               "peak_device_bytes": r.peak_device_bytes, "tuned_parameters": r.tuned_parameters or "",
               "implementation": r.implementation, SECONDS: seconds(r), PREVIOUS: None}
        _, row["tuner_candidates"], row["tuner_same_as_rung"] = tuned_choice(r.tuned_parameters)
        if r.kind == "rung":
            if previous is not None and previous.backend == r.backend:
                row["x_previous_rung"] = previous.median / r.median
                row[PREVIOUS] = previous.variant
            previous = r
        if best_vendor is not None:
            row["vendor_variant"] = best_vendor.variant
            row["x_vendor"] = best_vendor.median / r.median
        row.update(counters.get((r.variant, r.rows, r.features, r.depth),
                                {c: np.nan for c in COUNTERS}))
        rows.append(row)
    return rows


SECONDS, PREVIOUS = "_seconds", "_previous"  # internal columns: a row's samples, the rung its step is from
STEPS = "rung claims"  # the two families of a table: every step and the best rung against the first,
VENDOR = "vendor claims"  # every row but the vendor's against the vendor


def rung_claims(t):
    """The pairs (row label, earlier row label) a ladder table claims a rung against: each step from the previous
    rung of its backend, and the best rung against the first where that is not a step already."""
    rungs = t[t.kind == "rung"]
    pairs = [(i, rungs.index[rungs.variant == r[PREVIOUS]][0]) for i, r in rungs.iterrows()
             if isinstance(r[PREVIOUS], str)]
    if len(rungs) > 1:
        best, first = rungs.median_s.idxmin(), rungs.index[0]
        if best != first and (best, first) not in pairs:
            pairs.append((best, first))
    return pairs


def verdicts(t):
    """The comparisons of one ladder table (one operation at one point), each family Holm-resolved:
    {STEPS: {(row, earlier row): Comparison}, VENDOR: {row: Comparison}} (effects.Family; a comparison of the row
    against the earlier rung or the vendor, so its speed() is the table's × column)."""
    steps, vendor = effects.Family(), effects.Family()
    by_step = {(i, j): steps.add(t.at[i, SECONDS], t.at[j, SECONDS], f"{t.at[i, 'variant']} vs {t.at[j, 'variant']}")
               for i, j in rung_claims(t)}
    by_row = {}
    reference = t.index[t.variant == t.vendor_variant.iloc[0]] if t.vendor_variant.iloc[0] else []
    if len(reference):
        for i in t.index.drop(reference[0]):
            by_row[i] = vendor.add(t.at[i, SECONDS], t.at[reference[0], SECONDS], t.at[i, "variant"])
    steps.resolve()
    vendor.resolve()
    return {STEPS: by_step, VENDOR: by_row}


def with_verdicts(t, found):
    """`t` with the verdicts' columns (the ratio's interval in speed terms, the verdict, p_Holm) filled."""
    t = t.copy()
    for (i, j), c in found[STEPS].items():
        if t.at[i, PREVIOUS] == t.at[j, "variant"]:
            _, t.at[i, "x_previous_rung_low"], t.at[i, "x_previous_rung_high"] = c.speed()
            t.at[i, "previous_rung_verdict"], t.at[i, "previous_rung_p_holm"] = c.verdict, c.p_holm
    for i, c in found[VENDOR].items():
        _, t.at[i, "x_vendor_low"], t.at[i, "x_vendor_high"] = c.speed()
        t.at[i, "vendor_verdict"], t.at[i, "vendor_p_holm"] = c.verdict, c.p_holm
    return t


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


def time_cell(r):
    """The median time with its interquartile range."""
    return f"{A.fmt_seconds(r.median_s)} ({A.fmt_seconds(r.q1_s)}–{A.fmt_seconds(r.q3_s)})"


def rate_cell(r, compute):
    """The median's essential rate with the rates of the time's quartiles (the slower quartile first)."""
    rate = r.tflop_per_s if compute else r.essential_GB_per_s
    return f"{rate:,.1f} ({rate * r.median_s / r.q3_s:,.1f}–{rate * r.median_s / r.q1_s:,.1f})"


def step_cell(found, label, table):
    """× prev. rung: the step's speed ratio, interval and verdict; '' for a row that is no step."""
    previous = table.at[label, PREVIOUS]
    if not isinstance(previous, str):
        return ""
    j = table.index[table.variant == previous][0]
    return found[STEPS][(label, j)].speed_cell()


def vendor_cell(found, label, table):
    """× vendor: the row's speed over the vendor's, interval and verdict; the vendor's own row says it is."""
    if label in found[VENDOR]:
        return found[VENDOR][label].speed_cell()
    return "(the vendor)" if table.at[label, "vendor_variant"] == table.at[label, "variant"] else ""


def markdown(table, with_counters, found):
    compute = bool(table.compute_bound.any())
    rate = "TFLOP/s" if compute else "GB/s"
    head = (f"| | variant | time: median (IQR) | {rate} (IQR) | % of roof | × prev. rung (95% interval) verdict | "
            "× vendor (95% interval) verdict |")
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
        line = (f"| {label} | `{r.variant}`{tuned_text(r.tuned_parameters)} | "
                f"{time_cell(r)} | {rate_cell(r, compute)} | "
                f"{A.roof_share(r.pct_of_roof)} of {r.roof} | {step_cell(found, r.Index, table)} | "
                f"{vendor_cell(found, r.Index, table)} |")
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
               "read-only traffic, device_copy otherwise, on a host the roof of the cache level its traffic fits "
               "(host_read_l1 ...) or host_read, measured in the same archive. × prev. "
               "rung: the previous rung's time over this one's; × vendor: the fastest vendor variant's time over this "
               "one's (above 1: faster); each with its 95% interval and verdict, and the spread of every median (its "
               "interquartile range) beside it. Compute-bound operations (GEMM, attention) show essential TFLOP/s "
               "against their compute ceiling (a cuBLAS GEMM or the FMA probe, measured in the same archive), the "
               "variant's peak device memory and an autotuned rung's chosen parameters (with the number of candidates "
               "it timed, and when its choice is an earlier rung's configuration: then that row re-measures the "
               "earlier rung's kernel). A rung labelled mixed runs its own kernels around a vendor library call. "
               "Counters, where `kstudy profile` measured the same variant and point: summed over the call's kernels "
               "(L2 hit rate and achieved occupancy weighted by kernel duration; registers: the most any kernel "
               "uses).")


def family_lines(found):
    """The line under a ladder table per family it holds (its size and the correction)."""
    lines = []
    if found[STEPS]:
        lines += [effects.family_line(found[STEPS].values(), "this table's rung claims: each step from the "
                                      "previous rung, and the best rung against the first"), ""]
    if found[VENDOR]:
        lines += [effects.family_line(found[VENDOR].values(), "this table's × vendor column: every other row "
                                      "against the vendor"), ""]
    return lines


def headline(t, found, operation, arch, exp, point):
    """The summary's sentence of one ladder: the best rung's rate and share of its roof, then its claims against
    the first rung and the vendor, each as its table states it (ratio, interval, Holm-corrected verdict)."""
    rungs = t[t.kind == "rung"]
    best, first = rungs.median_s.idxmin(), rungs.index[0]
    top = rungs.loc[best]
    rate = f"{top.tflop_per_s:,.1f} TFLOP/s" if top.compute_bound else f"{top.essential_GB_per_s:,.0f} GB/s"
    text = (f"{operation} ladder ({arch}/{exp}, {point}): best rung `{top.variant}` {rate} "
            f"= {A.roof_share(top.pct_of_roof)} of {top.roof}")
    if (best, first) in found[STEPS]:
        text += f"; against rung {int(rungs.rung.loc[first])}: {found[STEPS][(best, first)].speed_cell()}"
    if best in found[VENDOR]:
        text += f"; against `{top.vendor_variant}`: {found[VENDOR][best].speed_cell()}"
    return text


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
    tables = []
    for operation in sorted(resident[L.is_rung(resident)].operation.unique()):
        op = resident[resident.operation == operation]
        arch, exp = L.by_rung_points(op, ["archive", "experiment"])[0]
        g = op[(op.archive == arch) & (op.experiment == exp)]
        point = L.headline_point(g[L.is_rung(g)], operation, archives[arch].experiments[exp])
        at = g[L.at(g, point)]
        t = pd.DataFrame(ladder_rows(at, operation, modelled, archives[arch], counters, inputs.seconds),
                         columns=COLUMNS + [SECONDS, PREVIOUS])
        t = t.set_index(pd.RangeIndex(len(t)))
        found = verdicts(t)
        tables.append((operation, arch, exp, at, with_verdicts(t, found), found))
    df = (pd.concat([t[COLUMNS] for *_, t, _ in tables], ignore_index=True) if tables
          else pd.DataFrame(columns=COLUMNS))
    inputs.write_csv(df, "ladder.csv", sec,
                     "per operation with rungs, at its headline point: rungs, portable and vendor variants with time "
                     "(median, IQR), essential GB/s, % of roof, × previous rung and × vendor (each with its 95% "
                     "interval, Holm-corrected verdict and p) and profile counters")
    sec.lines += [EXPLANATION, "", effects.words_text(), ""]
    for operation, arch, exp, at, t, found in tables:
        point = t.point.iloc[0]
        with_counters = t[COUNTERS].notna().any().any()
        sec.lines += [f"**{operation}** at {point} ({arch}/{exp}):", ""] + markdown(t, with_counters, found) + [""]
        sec.lines += family_lines(found) + throttle.note(inputs, at)
        text = headline(t, found, operation, arch, exp, point)
        for r in t[t.kind == "rung"].itertuples():
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
