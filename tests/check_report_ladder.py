#!/usr/bin/python3
"""The report's kernel-ladder section (scripts/kstudy_py/report/sections/ladder.py), in process:

1. A real CPU archive: `kstudy run reduce_sum_quick transpose_quick` with the CPU build. Its variants table
   (schema 6) has the `rung` column, every CPU variant is rung 0 (the rungs are CUDA kernels), and the ladder
   section skips with its reason while the per-operation bandwidth section covers both operations.
2. A schema 6 archive built here with invented round numbers, as a GPU run of the two operations would leave
   it (rungs 1-4, Kokkos and vendor variants, measured roofs), plus a profile archive with the counters: the
   ladder table's order, GB/s, % of roof (device_read for the read-only sum, device_copy for transpose),
   × previous rung, × vendor, the headline point (2^28 and 8192², not the largest measured), and the counters
   beside the stopwatch, all recomputed here.

usage: check_report_ladder.py KSTUDY   (the CPU build's kstudy binary)
Exit 77 (ctest: skipped) when this python lacks h5py, pandas, numpy or matplotlib.
"""
import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path

sys.dont_write_bytecode = True
# Exits 77 (skipped) when this python lacks h5py, pandas, numpy or matplotlib.
from report_fixture import A, check, h5py, np, pd, report, write_tables  # noqa: E402

CEILINGS = {"device_read": 4.0e12, "device_copy": 3.2e12, "host_read": 1.0e11}
# (variant, family, backend, rung): time per essential byte relative to the device_read roof's.
REDUCE = [("reduce_sum_atomic@cuda", "reduce_cuda", "cuda", 1, 100.0),
          ("reduce_sum_block_tree@cuda", "reduce_cuda", "cuda", 2, 2.0),
          ("reduce_sum_warp_shuffle@cuda", "reduce_cuda", "cuda", 3, 1.6),
          ("reduce_sum_float4_wave@cuda", "reduce_cuda", "cuda", 4, 1.0),
          ("reduce_sum_cub@cuda", "cub", "cuda", 0, 1.05),
          ("reduce_sum_kokkos@cuda", "reduce_kokkos", "cuda", 0, 1.25),
          ("reduce_sum_kokkos@openmp", "reduce_kokkos", "openmp", 0, 40.0)]
TRANSPOSE = [("transpose_naive@cuda", "transpose_cuda", "cuda", 1, 4.0),
             ("transpose_tiled@cuda", "transpose_cuda", "cuda", 2, 2.0),
             ("transpose_padded@cuda", "transpose_cuda", "cuda", 3, 1.25),
             ("transpose_tile64_vector@cuda", "transpose_cuda", "cuda", 4, 1.0),
             ("transpose_cublas@cuda", "cublas", "cuda", 0, 1.1),
             ("transpose_kokkos_team@cuda", "transpose_kokkos_team", "cuda", 0, 1.5),
             ("transpose_kokkos_mdrange@cuda", "transpose_kokkos_mdrange", "cuda", 0, 3.0)]
REDUCE_POINTS = [(1 << 20, 1), (1 << 28, 1), (1 << 30, 1)]       # headline 2^28, not the largest
TRANSPOSE_POINTS = [(1024, 1024), (8192, 8192), (16384, 16384)]  # headline 8192²
# Counters of the transpose ladder at 8192² (two kernels for the padded rung, to check the sums).
BANK_CONFLICTS = {"transpose_tiled@cuda": 16252928.0, "transpose_padded@cuda": 0.0}


def essential(operation, rows, features):
    return 4 * rows + 8 if operation == "reduce_sum" else 8 * rows * features


def seconds(operation, rows, features, cost):
    return cost * essential(operation, rows, features) / CEILINGS["device_read"]


def implementation_of(family):
    """What the registrations say (variant_info::implementation)."""
    if family in ("cub", "cublas"):
        return "vendor_library"
    return "handwritten_cuda" if family.endswith("_cuda") else "kokkos"


def experiment_tables(operation, ladder, points):
    variants, samples = [], []
    for variant, family, backend, rung, cost in ladder:
        device = backend == "cuda"
        for index, (rows, features) in enumerate(points):
            e = essential(operation, rows, features)
            written = 8 if operation == "reduce_sum" else e // 2
            variants.append({"variant": variant, "operation": operation,
                             "axes": "n" if operation == "reduce_sum" else "rows,cols", "family": family,
                             "fusion_level": "full", "implementation": implementation_of(family),
                             "layout": "row_major", "backend": backend,
                             "on_device": int(device), "kernels_launched": 1, "rung": np.int32(rung), "rows": rows,
                             "features": features, "block_size": 0, "modelled_bytes_read": e - written,
                             "modelled_bytes_written": written, "essential_bytes": e, "essential_flops": 0})
            for timer in (("device_events", "resident_wall") if device else ("host_wall",)):
                for trial in range(3):
                    t = seconds(operation, rows, features, cost) * (1 + 0.01 * (trial - 1))
                    samples.append({"experiment": operation, "variant": variant, "layout": "row_major",
                                    "memory_kind": "", "direction": "", "rows": rows, "features": features,
                                    "pitch": features, "block_size": 0, "bytes": e, "point": index,
                                    "replication": 0, "trial": trial, "timer": timer,
                                    "seconds": t * (2.0 if timer == "resident_wall" else 1.0), "gate": "passed",
                                    "throttled": 0, "status": "ok", "occupancy": 0.0})
    variants = pd.DataFrame(variants)
    variants["rung"] = variants.rung.astype(np.int32)
    return {"samples": pd.DataFrame(samples), "variants": variants}


def ceilings():
    """The roofs as kstudy writes them (schema 8): the device roofs on both clocks (CUDA events and the host
    clock), the host roof on the host clock; a number is divided only by a roof of its timer's clock."""
    rows = [{"name": n, "bytes": 1 << 30, "seconds": (1 << 30) / bw, "bytes_per_second": bw, "clock": clock}
            for n, bw in CEILINGS.items()
            for clock in (("device_events", "host_wall") if n.startswith("device_") else ("host_wall",))]
    return pd.DataFrame(rows)


def write_gpu_archive(path):
    with h5py.File(path, "w") as f:
        f.attrs["schema_version"] = "6"
        for operation, ladder, points, axes in (("reduce_sum", REDUCE, REDUCE_POINTS, ["n"]),
                                                ("transpose", TRANSPOSE, TRANSPOSE_POINTS, ["rows", "cols"])):
            e = f.create_group(f"experiments/{operation}")
            definition = {"kind": "sweep", "operation": [operation], "name": operation,
                          "shapes": [list(p[:len(axes)]) for p in points]}
            e.attrs["definition"] = json.dumps(definition)
            write_tables(e, {**experiment_tables(operation, ladder, points), "ceilings": ceilings()})


def profile_rows():
    """Profiled calls of the transpose rungs at 8192²: one kernel each, two for the padded rung."""
    rows = []
    for variant, _, _, rung, cost in TRANSPOSE[:4]:
        kernels = 2 if variant == "transpose_padded@cuda" else 1
        for launch in range(kernels):
            rows.append({"experiment": "transpose", "variant": variant, "layout": "row_major", "rows": 8192,
                         "features": 8192, "block_size": 0, "point": 1, "status": "ok", "gate_passed": 1,
                         "launch": np.int32(launch), "kernel": f"kernel_{rung}_{launch}", "label": "",
                         "grid_size": 1024, "launch_block_size": 256, "registers_per_thread": 32,
                         "profiled_duration_s": 1e-4 * (launch + 1), "dram_bytes_read": 268435456.0 / kernels,
                         "dram_bytes_written": 268435456.0 * (2.0 if rung == 1 else 1.0) / kernels,
                         "dram_throughput_pct": 80.0, "achieved_occupancy_pct": 90.0,
                         "theoretical_occupancy_pct": 100.0, "global_load_sectors": 1e7, "global_load_requests": 1e6,
                         "global_store_sectors": 1e7, "global_store_requests": 1e6,
                         "shared_bank_conflicts_load": BANK_CONFLICTS.get(variant, 0.0) / kernels,
                         "shared_bank_conflicts_store": 0.0,
                         "l2_hit_rate_pct": 50.0 + 10 * launch})
    df = pd.DataFrame(rows)
    df["launch"] = df.launch.astype(np.int32)
    return df


def write_profile_archive(path):
    with h5py.File(path, "w") as f:
        f.attrs["schema_version"] = "6"
        e = f.create_group("experiments/transpose")
        e.attrs["definition"] = json.dumps({"kind": "sweep", "operation": ["transpose"], "name": "transpose",
                                            "shapes": [[8192, 8192]]})
        write_tables(e, {"profile": profile_rows()})


def check_cpu_archive(kstudy, tmp):
    path = tmp / "cpu.h5"
    run = subprocess.run([kstudy, "run", "reduce_sum_quick", "transpose_quick", "--out", str(path)],
                         capture_output=True, text=True, env={"OMP_NUM_THREADS": "2", "OMP_PROC_BIND": "false",
                                                              "PATH": "/usr/bin:/bin"})
    print(run.stdout[-2000:], run.stderr[-2000:])
    check(run.returncode == 0, f"kstudy run exited {run.returncode}")
    archive = A.load([path])[0]
    check(archive.schema_version == "14", archive.schema_version)
    for name, operation in (("reduce_sum_quick", "reduce_sum"), ("transpose_quick", "transpose")):
        e = archive.experiments[name]
        check(e.operations == [operation], (name, e.operations))
        # A CPU build has no handwritten rungs; the portable ladder's tuned rungs (Kokkos, rung 1) it has.
        portable = e.variants.implementation.isin(["kokkos", "kokkos_kernels", "kokkos_mixed"])
        check("rung" in e.variants.columns and ((e.variants.rung == 0) | portable).all()
              and (e.variants.rung[portable] > 0).any(), e.variants[["variant", "implementation", "rung"]])
        check(set(e.variants.family) >= {f"{operation.split('_')[0]}_kokkos" if operation == "reduce_sum"
                                         else "transpose_kokkos_team"}, set(e.variants.family))
        check((e.samples.gate != "failed").all(), "a CPU variant failed its gate")
    sections = report.build_report([archive], tmp / "cpu_report")
    by_key = {s.key: s for s in sections}
    check(by_key["ladder"].skipped and "rung" in by_key["ladder"].skipped, by_key["ladder"].skipped)
    bw = pd.read_csv(tmp / "cpu_report" / "bandwidth_by_operation.csv")
    check({"reduce_sum", "transpose"} <= set(bw.operation), set(bw.operation))


def check_gpu_archive(tmp):
    timing, profile = tmp / "gpu.h5", tmp / "gpu_profile.h5"
    write_gpu_archive(timing)
    write_profile_archive(profile)
    sections = report.build_report(A.load([timing, profile]), tmp / "gpu_report")
    by_key = {s.key: s for s in sections}
    check(not by_key["ladder"].skipped, by_key["ladder"].skipped)
    df = pd.read_csv(tmp / "gpu_report" / "ladder.csv")
    for operation, ladder, point, roof in (("reduce_sum", REDUCE, (1 << 28, 1), "device_read"),
                                           ("transpose", TRANSPOSE, (8192, 8192), "device_copy")):
        t = df[df.operation == operation]
        check(set(zip(t.rows, t.features)) == {point}, f"{operation}: headline {set(zip(t.rows, t.features))}")
        shown = [v for v, _, backend, rung, _ in ladder if rung > 0] + \
                [v for v, family, _, rung, _ in ladder if rung == 0 and family not in ("cub", "cublas")] + \
                [v for v, family, _, _, _ in ladder if family in ("cub", "cublas")]
        check(list(t.variant) == shown, (operation, list(t.variant), shown))
        costs = {v: c for v, _, _, _, c in ladder}
        vendor = [v for v, family, _, _, _ in ladder if family in ("cub", "cublas")][0]
        e = essential(operation, *point)
        for r in t.itertuples():
            s = seconds(operation, *point, costs[r.variant])
            check(math.isclose(r.median_s, s, rel_tol=1e-6), (r.variant, r.median_s, s))  # device events, not wall
            check(math.isclose(r.essential_GB_per_s, e / s / 1e9, rel_tol=1e-6), r.variant)
            want_roof = roof if r.backend == "cuda" else "host_read"
            check(r.roof == want_roof, (r.variant, r.roof))
            check(math.isclose(r.pct_of_roof, 100 * e / s / CEILINGS[want_roof], rel_tol=1e-6),
                  (r.variant, r.pct_of_roof))
            check(math.isclose(r.x_vendor, costs[vendor] / costs[r.variant], rel_tol=1e-6), (r.variant, r.x_vendor))
            if r.kind == "rung" and r.rung > 1:
                previous = [v for v, _, _, rung, _ in ladder if rung == r.rung - 1][0]
                check(math.isclose(r.x_previous_rung, costs[previous] / costs[r.variant], rel_tol=1e-6), r.variant)
            else:
                check(math.isnan(r.x_previous_rung), (r.variant, r.x_previous_rung))
    # Counters: summed over the call's kernels, L2 hit rate weighted by duration; none for unprofiled variants.
    tr = df[df.operation == "transpose"].set_index("variant")
    check(tr.loc["transpose_tiled@cuda", "shared_bank_conflicts_load"] == 16252928.0, tr.shared_bank_conflicts_load)
    check(tr.loc["transpose_padded@cuda", "shared_bank_conflicts_load"] == 0.0, tr.shared_bank_conflicts_load)
    check(math.isclose(tr.loc["transpose_naive@cuda", "dram_bytes_written"], 2 * 268435456.0), "naive DRAM writes")
    check(math.isclose(tr.loc["transpose_padded@cuda", "dram_bytes_read"], 268435456.0), "padded: two kernels summed")
    check(math.isclose(tr.loc["transpose_padded@cuda", "l2_hit_rate_pct"], (50 * 1 + 60 * 2) / 3), "L2 weighting")
    check(tr.loc[["transpose_cublas@cuda", "transpose_kokkos_team@cuda"], "dram_bytes_read"].isna().all(), "invented")
    md = (tmp / "gpu_report" / "report.md").read_text()
    check("**transpose** at 8,192×8192" in md and "smem bank conflicts ld / st" in md, "transpose ladder table")
    check("16,252,928 / 0" in md, "bank conflicts not beside the stopwatch")
    check("**reduce_sum** at n=2^28" in md, "reduce_sum ladder table")
    reduce_md = md.split("**reduce_sum** at n=2^28", 1)[1].split("\n\n", 2)[1]
    check("smem bank conflicts" not in reduce_md, "counter columns on an unprofiled ladder")
    # Three samples a variant: every ratio is printed, none is judged (effects.MIN_SAMPLES); the spreads are shown.
    check("| rung 2 | `reduce_sum_block_tree@cuda` | 537 µs (534 µs–540 µs) |" in reduce_md
          and "| 50.00× (too few samples) |" in reduce_md and "| (the vendor) |" in reduce_md, reduce_md)
    under = md.split("**reduce_sum** at n=2^28", 1)[1].split("**transpose** at", 1)[0]
    check("*Family: 4 comparisons (this table's rung claims" in under
          and "*Family: 6 comparisons (this table's × vendor column" in under and "Throttled" not in under, under)
    summary = md.split("## Summary\n\n", 1)[1].split("\n\n", 1)[0]
    check("reduce_sum ladder (gpu/reduce_sum, n=2^28): best rung `reduce_sum_float4_wave@cuda`" in summary
          and "against rung 1: 100.00× (too few samples)" in summary
          and "against `reduce_sum_cub@cuda`: 1.05× (too few samples)" in summary, summary)


def check_headline_point_from_the_archive():
    """The ladder's headline point is the one the archive stores for the operation (the writer's
    operation_info::headline_point); only an archive that stores none falls back to the legacy table, and a point
    the experiment did not measure falls back to its largest one. kstudy_py/ladder.py holds the rule for the report
    and the published results alike: results/ladders.py reads the headline of a committed archive from it."""
    from types import SimpleNamespace
    from kstudy_py import ladder
    from kstudy_py.report.sections import ladder as section
    from kstudy_py.results import ladders as results
    g = pd.DataFrame({"rows": [65536, 65536, 1024], "features": [4096, 1024, 1024], "depth": [1, 1, 1],
                      "essential_bytes": [2e9, 5e8, 8e6], "compute_ceiling": ["", "", ""]})
    stored = SimpleNamespace(headline_points={"softmax": (65536, 1024, 1)})
    check(ladder.headline_point(g, "softmax", stored) == (65536, 1024, 1), "the archive's headline point")
    legacy = SimpleNamespace(headline_points={})
    check(ladder.headline_point(g, "softmax", legacy) == (65536, 4096, 1), "legacy archives: the legacy table")
    unmeasured = SimpleNamespace(headline_points={"softmax": (3, 3, 1)})
    check(ladder.headline_point(g, "softmax", unmeasured) == (65536, 4096, 1), "not measured: the largest point")
    other = SimpleNamespace(headline_points={"gemm": (4096, 4096, 4096)})
    check(ladder.archived_headline("softmax", [other]) is None
          and ladder.archived_headline("softmax", [other, stored]) == (65536, 1024, 1),
          "an experiment that stores headline points but none for the operation: no legacy stand-in, the next one")
    check(not hasattr(section, "LEGACY_HEADLINE_POINTS") and not hasattr(results, "POINTS"),
          "one legacy table (kstudy_py/ladder.py), no list of headline points in the report or the results")
    # hopper_gemm.h5 stores gemm_bf16's headline (4096^3); the results add their named 8192^3 after it.
    path = str(Path(__file__).resolve().parent.parent / "data/h200-2026-12-02-s17/hopper_gemm.h5")
    check(results.headline(path, "gemm_bf16") == (4096, 4096, 4096)
          and results.named_points(path, "gemm_bf16") == [(4096, 4096, 4096), (8192, 8192, 8192)],
          f"the results' headline from the archive: {results.named_points(path, 'gemm_bf16')}")
    vendors = [SimpleNamespace(variant="cublas_row", layout="row_major", median=2.0),
               SimpleNamespace(variant="cublas_feature", layout="feature_major", median=1.0)]
    check(ladder.vendor_of(vendors, "row_major").variant == "cublas_row"
          and ladder.vendor_of(vendors, "padded").variant == "cublas_feature"
          and ladder.vendor_of(vendors).variant == "cublas_feature" and ladder.vendor_of([]) is None,
          "vendor of a layout: its own layout's fastest, else any layout's")


def main():
    kstudy = sys.argv[1]
    with tempfile.TemporaryDirectory(prefix="kstudy_report_ladder_") as tmp:
        check_cpu_archive(kstudy, Path(tmp))
        check_gpu_archive(Path(tmp))
    check_headline_point_from_the_archive()
    print("ladder report checks passed")


if __name__ == "__main__":
    main()
