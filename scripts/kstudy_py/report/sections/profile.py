"""Hardware counters (Nsight Compute, `kstudy profile`) beside the measured medians of the timing archives."""
import numpy as np
import pandas as pd

from ... import archive as A
from .. import section

KEYS = ["variant", *A.point_key("profile")]  # a profiled call's point, as the profile table stores it
TIMING_COLUMNS = ["timing_archive", "timing_experiment", "timing_timer", "timing_n", "median_s", "q1_s", "q3_s"]
NO_TIMING = {"timing_archive": "", "timing_experiment": "", "timing_timer": "", "timing_n": 0, "median_s": np.nan,
             "q1_s": np.nan, "q3_s": np.nan}
IDENTITY_COLUMNS = ["profile_archive", "experiment", *KEYS, "point", "status"]
KERNEL_COLUMNS = IDENTITY_COLUMNS + [
    "launch", "label", "kernel", "grid_size", "launch_block_size", "registers_per_thread", "profiled_duration_s",
    "dram_bytes_read", "dram_bytes_written", "profiled_dram_GBps", "dram_throughput_pct", "achieved_occupancy_pct",
    "theoretical_occupancy_pct", "sectors_per_load_request", "sectors_per_store_request", "global_load_sectors",
    "global_load_requests", "global_store_sectors", "global_store_requests"] + TIMING_COLUMNS
VARIANT_COLUMNS = ["profile_archive", "experiment", "variant", "axes", *KEYS[1:], "point", "status", "kernels",
                   "profiled_duration_s", "profiled_dram_GBps", "dram_throughput_pct", "achieved_occupancy_pct",
                   "theoretical_occupancy_pct", "registers_per_thread", "longest_kernel", "sectors_per_load_request",
                   "dram_bytes_per_essential_byte"] + TIMING_COLUMNS + ["measured_effective_GBps"]
EXPLANATION = ("one instrumented call per variant and point after a warm-up. *Profiled* GB/s divide DRAM bytes by the "
               "kernels' duration under the profiler, which only puts the counters in proportion; the *measured* "
               "column is the median of the timing archives (device events, else resident wall clock), never an "
               "instrumented duration. Sectors/request: 32-byte sectors per global load request (4 for coalesced "
               "4-byte loads by a warp, 16 for float4; more means scattered).")


def ratio(a, b):
    return np.where((b > 0) & np.isfinite(b), a / b.where(b > 0, 1.0), np.nan)


def resident_timings(points):
    """Measured resident medians, device_events before resident_wall (host_wall for host variants), warm caches
    before a --cache cold run of the same point (the profiled call follows a warm-up)."""
    rank = {"device_events": 0, "resident_wall": 1, "host_wall": 2}
    t = points[points.timer.isin(list(rank))].copy()
    t["timer_rank"] = t.timer.map(rank)
    t["cold"] = t["cache"] != "warm"
    return t.sort_values(["timer_rank", "cold", "archive", "experiment"], kind="stable")


def join_timings(prof, points):
    """The measured median of the same variant, layout, shape and block size; the same experiment preferred.
    Instrumented durations never stand in for it."""
    timings = resident_timings(points)
    joined = []
    for key, g in prof.groupby(KEYS + ["experiment"], sort=False):
        k = dict(zip(KEYS + ["experiment"], key))
        c = timings
        for column in KEYS:
            c = c[c[column] == k[column]]
        same = c[c.experiment == k["experiment"]]
        pick = (same if len(same) else c).iloc[0] if len(c) else None
        timing = NO_TIMING if pick is None else dict(zip(TIMING_COLUMNS, (
            pick.archive, pick.experiment, pick.timer, pick.n, pick["median"], pick.q1, pick.q3)))
        joined.append({**k, **timing})
    return prof.merge(pd.DataFrame(joined), on=KEYS + ["experiment"], how="left")


def kernel_table(inputs):
    frames, versions = [], {}
    for a in inputs.archives:
        for e in a.experiments.values():
            if not e.profile.empty:
                frames.append(e.profile.assign(profile_archive=a.label))
                versions[f"{a.label}/{e.name}"] = e.profile_attrs.get("ncu_version", "ncu (version not recorded)")
    if not frames:
        return None, versions
    prof = pd.concat(frames, ignore_index=True)
    prof["dram_bytes"] = prof.dram_bytes_read + prof.dram_bytes_written
    prof["profiled_dram_GBps"] = ratio(prof.dram_bytes, prof.profiled_duration_s) / 1e9
    prof["sectors_per_load_request"] = ratio(prof.global_load_sectors, prof.global_load_requests)
    prof["sectors_per_store_request"] = ratio(prof.global_store_sectors, prof.global_store_requests)
    prof = join_timings(prof, inputs.points)
    # Within a point, the order the profiling child ran the variants (the experiment's), kernels in launch order.
    return prof.sort_values(["profile_archive", "experiment", "point"], kind="stable"), versions


def counters(k, essential):
    """Counters summed over a call's kernels; occupancy and registers of its longest kernel."""
    duration = k.profiled_duration_s.sum()
    longest = k.loc[k.profiled_duration_s.fillna(-1).idxmax()]
    return {"profiled_duration_s": duration,
            "profiled_dram_GBps": k.dram_bytes.sum() / duration / 1e9 if duration > 0 else np.nan,
            "dram_throughput_pct": (k.dram_throughput_pct * k.profiled_duration_s).sum() / duration
            if duration > 0 else np.nan,
            "achieved_occupancy_pct": longest.achieved_occupancy_pct,
            "theoretical_occupancy_pct": longest.theoretical_occupancy_pct,
            "registers_per_thread": longest.registers_per_thread,
            "longest_kernel": longest.label if longest.label else longest.kernel,
            "sectors_per_load_request": k.global_load_sectors.sum() / k.global_load_requests.sum()
            if k.global_load_requests.sum() > 0 else np.nan,
            "dram_bytes_per_essential_byte": k.dram_bytes.sum() / essential}


def variant_table(prof, variants):
    modelled = ["variant", *A.point_key("variants")]  # the variants table's point of a variant
    essential = variants.drop_duplicates(modelled).set_index(modelled).essential_bytes
    axes = dict(zip(variants.variant, variants["axes"]))
    rows = []
    for _, g in prof.groupby(["profile_archive", "experiment", "point", "variant"], sort=False):
        first = g.iloc[0]
        k = g[g.launch >= 0]
        eb = essential.get(tuple(first[c] for c in modelled), np.nan)
        r = {c: first[c] for c in IDENTITY_COLUMNS + TIMING_COLUMNS}
        r["axes"] = axes.get(first.variant, "")
        r["kernels"] = len(k)
        if len(k):
            r.update(counters(k, eb))
        r["measured_effective_GBps"] = eb / r["median_s"] / 1e9 if r["median_s"] > 0 else np.nan
        rows.append(r)
    return pd.DataFrame(rows).reindex(columns=VARIANT_COLUMNS)


def number(v, fmt):
    return "n/a" if v is None or (isinstance(v, float) and not np.isfinite(v)) else format(v, fmt)


def table_row(r):
    measured = f"{A.fmt_seconds(r.median_s)} ({r.timing_timer})" if np.isfinite(r.median_s) else "no timing"
    point = A.point_label(r.rows, r.features, r.axes, r.depth)
    if r.kernels == 0:
        return f"| `{r.variant}` | {point} | 0 | {measured} | — | — | — | — | — | {r.status} |"
    return (f"| `{r.variant}` | {point}{f' b{r.block_size}' if r.block_size else ''} | "
            f"{r.kernels} | {measured} | {number(r.profiled_dram_GBps, ',.0f')} "
            f"({number(r.dram_throughput_pct, '.0f')}%) | {number(r.achieved_occupancy_pct, '.0f')}% / "
            f"{number(r.theoretical_occupancy_pct, '.0f')}% | {number(r.registers_per_thread, '.0f')} | "
            f"{number(r.sectors_per_load_request, '.2f')} | {number(r.dram_bytes_per_essential_byte, '.2f')} | "
            f"{r.status} |")


def shape_lines(by):
    lines = []
    for (rows, feats, depth), g in by[by.kernels > 0].groupby(list(A.EXTENTS)):
        best = g.loc[g.profiled_dram_GBps.fillna(-1).idxmax()]
        most = g.loc[g.dram_bytes_per_essential_byte.fillna(-1).idxmax()]
        point = A.point_label(rows, feats, g["axes"].iloc[0], depth)
        lines += ["", f"- {point}: highest profiled DRAM throughput `{best.variant}` "
                      f"{number(best.profiled_dram_GBps, ',.0f')} GB/s ({number(best.dram_throughput_pct, '.0f')}% of "
                      f"peak); most DRAM traffic per essential byte `{most.variant}` "
                      f"({number(g.dram_bytes_per_essential_byte.max(), '.2f')}×)."]
    return lines


@section("profile", "Hardware counters (Nsight Compute)", order=70)
def profile(inputs, sec):
    prof, versions = kernel_table(inputs)
    if prof is None:
        return sec.skip("no profile table in the archives (`kstudy profile` writes one)")
    inputs.write_csv(prof[KERNEL_COLUMNS], "profile.csv", sec,
                     "one row per profiled kernel launch: Nsight Compute counters (DRAM bytes and % of peak, "
                     "occupancy, registers, sectors per request) beside the measured median of the variant at that "
                     "point (median_s; blank where no timing archive has it)")
    by = variant_table(prof, inputs.variants)
    inputs.write_csv(by, "profile_by_variant.csv", sec,
                     "per variant and point: DRAM GB/s over the profiled kernels, duration-weighted % of peak, "
                     "occupancy and registers of the longest kernel, sectors per load request, DRAM bytes per "
                     "essential byte, and the measured median with its effective GB/s")
    sec.lines += ["Counters from Nsight Compute " + "; ".join(f"{v} (`{k}`)" for k, v in versions.items()) + ", "
                  + EXPLANATION, "",
                  "| variant | point | kernels | measured median | profiled DRAM GB/s (% of peak) | occupancy "
                  "achieved / theoretical | registers | sectors / load request | DRAM bytes / essential | status |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    sec.lines += [table_row(r) for r in by.itertuples()] + shape_lines(by)
    return sec.done(by)
