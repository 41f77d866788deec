"""Roofline from counters: every profiled variant (every rung of a ladder) at the arithmetic intensity and the
throughput its Nsight Compute counters measured (`kstudy profile`, schema 11), against the memory and compute
roofs measured in the same run.

Rules (every number from the archives):
- A point is one profiled call: the counters of its kernels summed (instructions, ops, bytes), the pipe
  utilisation, IPC and stall reasons weighted by each kernel's profiled duration.
- Flops are the executed ones (kstudy_py.archive.executed_flops: the one formula); intensity = flops / DRAM bytes
  read and written. Where the archive has no flop counter (before schema 11, or ncu refused them all) the point
  falls back to the model, essential flops / modelled traffic, and says `modelled`.
- Time: the measured resident median of the same variant and point (device events, else the resident wall
  clock) from a timing archive, the same experiment preferred; the profiled duration only where no timing
  archive has the point, and the table says so (an instrumented duration puts counters in proportion, it is
  not a timing).
- Roofs come from the archive that timed the point (its run), on the device-events clock where it has one: the
  memory roof is the faster of device_read and device_copy, the compute roof the one measured for the precision
  of most of the call's flops (PRECISION_ROOFS), else the operation's compute ceiling. % of roof = the larger of
  DRAM bytes / time / memory roof and flops / time / compute roof (the roof that binds at that intensity). A
  point above a roof by more than archive.ROOF_TOLERANCE is reported as such, never clipped.
"""
import numpy as np
import pandas as pd

from ... import archive as A
from .. import section
from ..figures import colours, grid, save
from .bandwidth import resident_points

KEYS = ["profile_archive", "experiment", "variant", *A.point_key("profile"), "point"]
SUMMED = (["profiled_duration_s", "dram_bytes_read", "dram_bytes_written", "tensor_hmma_inst", "tensor_gmma_inst",
           "local_load_bytes", "local_store_bytes"] + list(A.FLOP_WEIGHTS))
STALLS = [f"stall_{r}" for r in A.STALL_REASONS]
WEIGHTED = list(A.PIPES) + ["ipc"] + STALLS
# `selected` is the cycle an instruction issues in (1 per instruction by definition): not a reason to wait.
RANKED_STALLS = [s for s in STALLS if s != "stall_selected"]
# The measured compute roofs of each precision, first found wins (ceilings of a CUDA build, schema 7): the FMA
# probe for CUDA-core float32; for each tensor-core input type the best of cuBLAS and a wgmma peak probe
# (device_*_tensor, since a handwritten wgmma GEMM beat cuBLAS), cuBLAS alone in older archives. Other
# precisions have none measured: the operation's ceiling.
PRECISION_ROOFS = {"fp32": ("device_fp32_fma",), "tensor_tf32": ("device_tf32_tensor", "cublas_tf32_gemm"),
                   "tensor_bf16": ("device_bf16_tensor", "cublas_bf16_gemm"),
                   "tensor_fp16": ("device_fp16_tensor", "cublas_fp16_gemm")}
# An archive older than a variant's ceiling name has cuBLAS's roof of that type only.
OLDER_ROOFS = {"device_bf16_tensor": ("cublas_bf16_gemm",), "device_tf32_tensor": ("cublas_tf32_gemm",),
               "device_fp16_tensor": ("cublas_fp16_gemm",)}
MEMORY_ROOFS = ("device_read", "device_copy")
VARIANT_COLUMNS = ["operation", "family", "rung", "implementation", "compute_ceiling", "essential_flops",
                   "modelled_bytes_read", "modelled_bytes_written"]
COLUMNS = (KEYS + ["operation", "family", "rung", "kernels", "intensity_source", "flops", "bytes", "intensity",
                   "seconds", "time_source", "timing_archive", "tflop_per_s", "roof_archive", "memory_roof",
                   "memory_roof_GB_per_s", "compute_roof", "compute_roof_tflop_per_s", "binding_roof",
                   "pct_of_roof", "above_roof", "traffic_model_high", "dominant_precision", "achieved_flop_per_s",
                   "top_stalls"]
           + [f"flops_{p}" for p in A.PRECISIONS] + SUMMED + ["spill_bytes"] + WEIGHTED)


def profiled_calls(archives):
    """One row per profiled call (variant at a point) with its kernels' counters combined; None without profiles."""
    frames = [e.profile.assign(profile_archive=a.label) for a in archives for e in a.experiments.values()
              if not e.profile.empty]
    if not frames:
        return None
    prof = pd.concat(frames, ignore_index=True)
    prof = prof[prof.status.isin(["ok", "rejected"]) & (prof.launch >= 0)]
    rows = []
    for key, k in prof.groupby(KEYS, sort=False):
        r = dict(zip(KEYS, key))
        r["kernels"] = len(k)
        r.update({c: k[c].sum(min_count=1) for c in SUMMED})
        for c in WEIGHTED:
            w = k.profiled_duration_s.where(k[c].notna(), 0.0).fillna(0.0)
            r[c] = (k[c].fillna(0) * w).sum() / w.sum() if w.sum() > 0 else np.nan
        rows.append(r)
    return A.with_derived_counters(pd.DataFrame(rows, columns=KEYS + ["kernels"] + SUMMED + WEIGHTED))


def with_variants(calls, variants):
    """The variants table's model beside each call: the profile archive's own (kstudy profile stores the variants
    it profiled), else a timing archive's for the same experiment, variant and point."""
    keys = ["experiment", "variant", *A.point_key("variants")]
    if variants.empty:
        return calls
    v = variants.assign(own=variants.archive.isin(set(calls.profile_archive))).sort_values("own", ascending=False)
    v = v.drop_duplicates(keys)[keys + [c for c in VARIANT_COLUMNS if c in v.columns]]
    return calls.merge(v, on=keys, how="left")


def with_timings(calls, points):
    """The measured resident median of the same variant and point (the same experiment preferred)."""
    timed = resident_points(points) if len(points) else points
    out = []
    for r in calls.itertuples(index=False):
        c = timed[(timed.variant == r.variant) & (timed.rows == r.rows) & (timed.features == r.features)
                  & (timed.depth == r.depth)] if len(timed) else timed
        same = c[c.experiment == r.experiment] if len(c) else c
        pick = (same if len(same) else c).iloc[0] if len(c) else None
        out.append({"timing_archive": pick.archive if pick is not None else "",
                    "median_s": pick["median"] if pick is not None else np.nan,
                    "timer": pick.timer if pick is not None else ""})
    return pd.concat([calls.reset_index(drop=True), pd.DataFrame(out)], axis=1)


def roof_value(archive, name, compute):
    """A roof of the archive on the device-events clock, else on any clock (before schema 8 every roof was timed
    on the host clock); None when the archive did not measure it."""
    if archive is None or not name:
        return None
    read = archive.compute_ceiling if compute else archive.ceiling
    value = read(name, "device_events")
    return value if value is not None else read(name)


def place(r, inputs):
    """Intensity, throughput and roofs of one call (the module's rules)."""
    measured = np.isfinite(r.flops) and np.isfinite(r.dram_bytes) and r.dram_bytes > 0
    modelled_bytes = r.modelled_bytes_read + r.modelled_bytes_written
    flops, nbytes = (r.flops, r.dram_bytes) if measured else (r.essential_flops, modelled_bytes)
    timed = np.isfinite(r.median_s) and r.median_s > 0
    seconds = r.median_s if timed else r.profiled_duration_s
    roof_label = r.timing_archive if timed else r.profile_archive
    archive = next((a for a in inputs.archives if a.label == roof_label), None)
    memory = {n: roof_value(archive, n, False) for n in MEMORY_ROOFS}
    memory = {n: v for n, v in memory.items() if v}
    memory_roof = max(memory, key=memory.get) if memory else ""
    older = OLDER_ROOFS.get(r.compute_ceiling, ())
    candidates = PRECISION_ROOFS.get(r.dominant_precision, ()) + (r.compute_ceiling,) + older
    compute_roof = next((n for n in candidates if isinstance(n, str) and n and roof_value(archive, n, True)), "")
    compute = roof_value(archive, compute_roof, True)
    ok = np.isfinite(seconds) and seconds > 0
    shares = {}
    if ok and memory_roof and np.isfinite(nbytes):
        shares[memory_roof] = nbytes / seconds / memory[memory_roof]
    if ok and compute and np.isfinite(flops):
        shares[compute_roof] = flops / seconds / compute
    binding = max(shares, key=shares.get) if shares else ""
    pct = 100 * shares[binding] if binding else np.nan
    over = bool(np.isfinite(pct) and pct > 100 * (1 + A.ROOF_TOLERANCE))
    # Modelled bytes count no cache reuse: a kernel "over" the memory roof on them moved fewer DRAM bytes than the
    # model says. That is the model's error, not a beaten roof, so it is said as such and never as a finding.
    model_high = over and not measured and binding == memory_roof
    return {"intensity_source": "measured" if measured else "modelled", "flops": flops, "bytes": nbytes,
            "intensity": flops / nbytes if nbytes and np.isfinite(nbytes) and nbytes > 0 else np.nan,
            "seconds": seconds, "time_source": f"median ({r.timer})" if timed else "profiled duration",
            "tflop_per_s": flops / seconds / 1e12 if ok else np.nan, "roof_archive": roof_label if shares else "",
            "memory_roof": memory_roof, "memory_roof_GB_per_s": memory[memory_roof] / 1e9 if memory_roof else np.nan,
            "compute_roof": compute_roof, "compute_roof_tflop_per_s": compute / 1e12 if compute else np.nan,
            "binding_roof": binding, "pct_of_roof": pct,
            "above_roof": over and not model_high, "traffic_model_high": model_high}


def top_stalls(r, n=3):
    """The n reasons a warp waited longest per issued instruction, 'reason cycles' each."""
    ranked = sorted(((getattr(r, s), s) for s in RANKED_STALLS if np.isfinite(getattr(r, s))), reverse=True)
    return ", ".join(f"{s[len('stall_'):]} {v:.2f}" for v, s in ranked[:n] if v > 0)


def roofline_table(inputs):
    calls = profiled_calls(inputs.archives)
    if calls is None or calls.empty:
        return None
    calls = with_timings(with_variants(calls, inputs.variants), inputs.points)
    for c, default in (("operation", ""), ("family", ""), ("rung", 0), ("compute_ceiling", ""),
                       ("essential_flops", np.nan), ("modelled_bytes_read", np.nan),
                       ("modelled_bytes_written", np.nan)):
        calls[c] = calls[c].fillna(default) if c in calls.columns else default
    placed = pd.DataFrame([place(r, inputs) for r in calls.itertuples(index=False)], index=calls.index)
    df = pd.concat([calls.drop(columns=["flops"]), placed], axis=1)
    df["top_stalls"] = [top_stalls(r) for r in df.itertuples(index=False)]
    return df.sort_values(["operation", "experiment", "point", "rung", "variant"], kind="stable")[COLUMNS]


def number(v, spec):
    return "n/a" if v is None or not np.isfinite(v) else format(v, spec)


def pct_text(r):
    share = A.roof_share(r.pct_of_roof)
    if r.above_roof:
        return f"**{r.pct_of_roof:.0f}% of {r.binding_roof}: {A.ROOF_EXCEEDED}**"
    if r.traffic_model_high:
        return f"{r.pct_of_roof:.0f}% of {r.binding_roof} by the traffic model (cache reuse: DRAM moved less)"
    return f"{share} of {r.binding_roof}" if share else "no roof measured"


def point_text(r):
    return f"{int(r.rows)}×{int(r.features)}" + (f"×{int(r.depth)}" if r.depth > 1 else "")


def table_lines(df):
    lines = ["| variant | point | flops | DRAM bytes | intensity (flop/B) | TFLOP/s | % of the binding roof | "
             "pipes FMA / tensor / LSU | top stalls (cycles per issued instruction) | spill bytes |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in df.itertuples(index=False):
        modelled = r.intensity_source == "modelled"
        lines.append(
            f"| `{r.variant}`{f' (rung {r.rung})' if r.rung else ''} | "
            f"{point_text(r)} | "
            f"{number(r.flops, '.3e')}{' (modelled)' if modelled else ''} | {number(r.bytes, '.3e')}"
            f"{' (modelled)' if modelled else ''} | {number(r.intensity, '.3g')}"
            f"{' **modelled**' if modelled else ''} | "
            f"{number(r.tflop_per_s, '.3g')}{'' if r.time_source.startswith('median') else ' (profiled duration)'} | "
            f"{pct_text(r)} | {number(r.fma_pipe_pct, '.0f')}% / {number(r.tensor_pipe_pct, '.0f')}% / "
            f"{number(r.lsu_pipe_pct, '.0f')}% | {r.top_stalls or 'n/a'} | {number(r.spill_bytes, ',.0f')} |")
    return lines


def above_lines(df):
    return [f"**Above the roof:** `{r.variant}` at {point_text(r)} "
            f"({r.profile_archive}/{r.experiment}) measures {number(r.tflop_per_s, '.3g')} TFLOP/s at "
            f"{number(r.intensity, '.3g')} flop/B ({r.intensity_source}), {r.pct_of_roof:.0f}% of {r.binding_roof} "
            f"measured in {r.roof_archive}: a real kernel cannot beat a roof, so the roof is understated or the "
            "counters or the timing are wrong." for r in df[df.above_roof].itertuples(index=False)]


def model_high_lines(df):
    return [f"`{r.variant}` at {point_text(r)} ({r.profile_archive}/{r.experiment}): its modelled traffic over the "
            f"measured time would be {r.pct_of_roof:.0f}% of {r.binding_roof}; no kernel beats that roof, so it moved "
            "fewer DRAM bytes than the model counts (reuse through the caches). Its archive has no DRAM counters: "
            "profile it again to place it by measurement." for r in df[df.traffic_model_high].itertuples(index=False)]


def draw_panel(ax, operation, g, inputs, colour):
    shown = g[np.isfinite(g.intensity) & (g.intensity > 0) & np.isfinite(g.tflop_per_s) & (g.tflop_per_s > 0)]
    if shown.empty:
        ax.set_title(f"{operation}: no point with arithmetic to place", fontsize=9)
        return
    x = np.logspace(np.log10(shown.intensity.min() / 4), np.log10(max(shown.intensity.max() * 4, 10.0)), 60)
    roofs = g[g.roof_archive != ""]
    label = roofs.roof_archive.mode().iloc[0] if len(roofs) else ""
    archive = next((a for a in inputs.archives if a.label == label), None)
    for name in MEMORY_ROOFS:
        bw = roof_value(archive, name, False)
        if bw:
            ax.plot(x, x * bw / 1e12, color="black", lw=0.9, ls="-" if name == "device_read" else "--",
                    label=f"{name} {bw / 1e9:,.0f} GB/s ({label})")
    for name in dict.fromkeys(g.compute_roof[g.compute_roof != ""]):
        flops = roof_value(archive, name, True)
        if flops:
            ax.axhline(flops / 1e12, color="grey", lw=0.9, ls="-.", label=f"{name} {flops / 1e12:,.1f} TFLOP/s")
    for r in shown.itertuples(index=False):
        measured = r.intensity_source == "measured"
        ax.plot(r.intensity, r.tflop_per_s, marker="o", ls="none", ms=7, color=colour[r.variant],
                markerfacecolor=colour[r.variant] if measured else "none", markeredgecolor=colour[r.variant],
                label=f"{r.variant}" + ("" if measured else " (modelled intensity)"))
        if r.above_roof:
            ax.plot(r.intensity, r.tflop_per_s, marker="o", ms=15, ls="none", markerfacecolor="none",
                    markeredgecolor="red", markeredgewidth=1.5)
            ax.annotate("ABOVE ROOF", (r.intensity, r.tflop_per_s), color="red", fontsize=7, fontweight="bold",
                        xytext=(6, 6), textcoords="offset points")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (executed flop / DRAM byte)")
    ax.set_ylabel("TFLOP/s")
    ax.set_title(f"{operation}: every profiled variant and point", fontsize=9)
    ax.grid(True, which="major", alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles))
    ax.legend(unique.values(), unique.keys(), fontsize=6, loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=2,
              frameon=False)


def roofline_figure(df, inputs):
    operations = list(dict.fromkeys(df.operation.replace("", "(no variants table)")))
    fig, axes = grid(len(operations), 2, width=6.0, height=5.5)
    colour = colours(df.variant)
    for ax, operation in zip(axes, operations):
        draw_panel(ax, operation, df[df.operation.replace("", "(no variants table)") == operation], inputs, colour)
    fig.suptitle("Roofline from counters: executed flops over DRAM bytes (filled; hollow: modelled where the archive "
                 "has no flop counters) against the roofs measured in the same run", fontsize=10)
    return save(fig, inputs.out, "roofline_counters.png")


@section("roofline_counters", "Roofline from counters", order=66, findings=True)
def roofline_counters(inputs, sec):
    df = roofline_table(inputs)
    if df is None:
        return sec.skip("no profile table in the archives (`kstudy profile` writes one)")
    inputs.write_csv(df, "roofline_counters.csv", sec,
                     "per profiled call: executed flops per precision (archive.FLOP_WEIGHTS), DRAM bytes, intensity "
                     "(measured, or modelled where no flop counter was recorded), TFLOP/s over the measured median "
                     "(else the profiled duration, as time_source says), % of the binding roof measured in the same "
                     "run, pipe utilisation, IPC, stall reasons and spill bytes")
    above = above_lines(df)
    sec.lines += above + ([""] if above else [])
    sec.findings += above
    sec.no_finding = None if above else "no profiled point lies above a roof measured in its own run"
    sec.headlines += [f"Roofline from counters: {len(above)} profiled point(s) above a roof measured in their own "
                      "run (see *Roofline from counters*)."] if above else []
    model_high = model_high_lines(df)
    sec.lines += model_high + ([""] if model_high else [])
    modelled = int((df.intensity_source == "modelled").sum())
    sec.lines += [f"{len(df)} profiled call(s); {modelled} placed at the **modelled** intensity (no flop counters in "
                  "their archive)." if modelled else f"{len(df)} profiled call(s), every one at its measured "
                  "intensity.", ""]
    sec.figures.append((roofline_figure(df, inputs),
                        "Roofline from counters: each profiled variant at its executed flops over DRAM bytes and its "
                        "measured TFLOP/s, under the memory and compute roofs measured in the same run (a red ring: "
                        "above a roof)"))
    sec.lines += table_lines(df)
    return sec.done(df)
