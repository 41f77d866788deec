#!/usr/bin/python3
"""The report on compute-bound operations (schema 7), in process, on an archive built here with invented round
numbers as a GPU run of kernel lab II would leave it: a GEMM ladder (rungs, an autotuned rung with its chosen
parameters, Kokkos, cuBLAS) at 1024³ and 4096³ and attention at 1,024 and 4,096 tokens (a textbook variant whose
peak device memory grows with tokens², a fused one whose memory grows with tokens), with compute roofs among the
ceilings. Checks, all recomputed here:
- the ladder section quotes GEMM in TFLOP/s against the operation's compute ceiling (cublas_fp32_gemm), at the
  headline point 4096³, with × previous rung, × vendor and the autotuned rung's parameters;
- the compute section's TFLOP/s and % of roof per family and point, the Kokkos ÷ handwritten ratio, the peak
  memory table and the memory-scaling exponents (2 and 1) in its headline;
- the roofline overview draws the compute roofs;
- the roofline from counters (schema 11 profile archives) places each profiled GEMM at its executed flops over
  DRAM bytes against the roofs of the run that timed it, flags a point above a roof loudly, and places a schema 10
  profile (no flop counters) at the modelled intensity, labelled so; executed flops use archive.FLOP_WEIGHTS;
- a schema 6 archive (no depth, no compute roofs) still reads, with depth 1 and no compute ceiling;
- two GEMM points that differ only in k (depth) stay two points where the report joins points: each speedup is
  against the CPU reference at its own k, and each profiled call sits beside the median of its own k (issue 42).

usage: check_report_compute.py
Exit 77 (ctest: skipped) when this python lacks h5py, pandas, numpy or matplotlib.
"""
import json
import math
import re
import sys
import tempfile
from pathlib import Path

sys.dont_write_bytecode = True
# Exits 77 (skipped) when this python lacks h5py, pandas, numpy or matplotlib.
from report_fixture import A, check, h5py, np, pd, report, write_tables  # noqa: E402

BANDWIDTH = {"device_read": 4.0e12, "device_copy": 3.2e12, "host_read": 1.0e11}
COMPUTE = {"device_fp32_fma": 64.0e12, "cublas_fp32_gemm": 50.0e12, "cublas_bf16_gemm": 700.0e12}
# The autotuned rung's choice, with the tuner's own keys (issue 24): candidates timed, and the earlier rung whose
# configuration it chose (here rung 2's, as the attention bf16 tuner keeps rung 3's on the H200).
TUNED = "block_m=128,block_n=128,block_k=16,candidates=17,same_as_rung=2"
TUNED_SHOWN = "block_m=128,block_n=128,block_k=16; fastest of 17 candidates; **rung 2's configuration**"
# (variant, family, implementation, backend, rung, fraction of the operation's compute ceiling)
GEMM = [("gemm_naive@cuda", "gemm_cuda", "handwritten_cuda", "cuda", 1, 0.02),
        ("gemm_coalesced@cuda", "gemm_cuda", "handwritten_cuda", "cuda", 2, 0.16),
        ("gemm_autotuned@cuda", "gemm_cuda", "handwritten_cuda", "cuda", 3, 0.95),
        ("gemm_kokkos_tiled@cuda", "gemm_kokkos", "kokkos", "cuda", 0, 0.5),
        ("gemm_cublas@cuda", "cublas", "vendor_library", "cuda", 0, 1.0)]
GEMM_POINTS = [(1024, 1024, 1024), (4096, 4096, 4096)]
# The textbook as archives before `mixed` stored it (handwritten_cuda): the reader relabels it (cuBLAS GEMMs).
ATTENTION = [("attention_textbook@cuda", "attention_cuda", "handwritten_cuda", "cuda", 1, 0.25),
             ("attention_fused@cuda", "attention_cuda", "handwritten_cuda", "cuda", 2, 0.5),
             ("attention_kokkos_fused@cuda", "attention_kokkos", "kokkos", "cuda", 0, 0.2)]
ATTENTION_POINTS = [(16, 1024, 64), (16, 4096, 64)]


def flops(operation, point):
    a, b, c = point
    return 2 * a * b * c if operation == "gemm" else 4 * a * b * b * c


def essential_bytes(operation, point):
    a, b, c = point
    return 4 * (a * c + c * b + a * b) if operation == "gemm" else 16 * a * b * c


def peak_memory(variant, point):
    heads, tokens, dim = point
    base = 16 * heads * tokens * dim
    return base + (4 * heads * tokens * tokens if "textbook" in variant else 0)


def seconds(operation, point, fraction):
    roof = COMPUTE["cublas_fp32_gemm"] if operation == "gemm" else COMPUTE["device_fp32_fma"]
    return flops(operation, point) / (fraction * roof)


def ceilings():
    """As kstudy writes them (schema 8): device bandwidth roofs on both clocks, the host roof on the host clock,
    compute roofs on CUDA events (the clock of the device_events timer the samples use)."""
    rows = [{"name": n, "bytes": 1 << 30, "seconds": (1 << 30) / bw, "bytes_per_second": bw, "flops": 0,
             "flops_per_second": 0.0, "clock": clock} for n, bw in BANDWIDTH.items()
            for clock in (("device_events", "host_wall") if n.startswith("device_") else ("host_wall",))]
    rows += [{"name": n, "bytes": 0, "seconds": 1e12 / f, "bytes_per_second": 0.0, "flops": int(1e12),
              "flops_per_second": f, "clock": "device_events"} for n, f in COMPUTE.items()]
    return pd.DataFrame(rows)


def experiment_tables(operation, ladder, points, axes, ceiling):
    variants, samples = [], []
    for variant, family, implementation, backend, rung, fraction in ladder:
        for index, point in enumerate(points):
            rows, features, depth = point
            variants.append({"variant": variant, "operation": operation, "compute_ceiling": ceiling, "axes": axes,
                             "family": family, "fusion_level": "full", "implementation": implementation,
                             "layout": "row_major", "backend": backend, "on_device": 1, "kernels_launched": 1,
                             "rung": np.int32(rung), "rows": rows, "features": features, "depth": depth,
                             "block_size": 0, "modelled_bytes_read": essential_bytes(operation, point),
                             "modelled_bytes_written": 0, "essential_bytes": essential_bytes(operation, point),
                             "essential_flops": flops(operation, point),
                             "peak_device_bytes": peak_memory(variant, point) if operation != "gemm" else 1 << 28,
                             "tuned_parameters": TUNED if "autotuned" in variant else ""})
            for trial in range(3):
                samples.append({"experiment": operation, "variant": variant, "layout": "row_major",
                                "memory_kind": "device", "direction": "", "rows": rows, "features": features,
                                "depth": depth, "pitch": features, "block_size": 0,
                                "bytes": essential_bytes(operation, point), "point": index, "replication": 0,
                                "trial": trial, "timer": "device_events",
                                "seconds": seconds(operation, point, fraction) * (1 + 0.01 * (trial - 1)),
                                "gate": "passed", "throttled": 0, "status": "ok", "occupancy": 0.0})
    variants = pd.DataFrame(variants)
    variants["rung"] = variants.rung.astype(np.int32)
    return {"samples": pd.DataFrame(samples), "variants": variants, "ceilings": ceilings()}


def write_archive(path):
    with h5py.File(path, "w") as f:
        f.attrs["schema_version"] = "7"
        for operation, ladder, points, axes, ceiling in (
                ("gemm", GEMM, GEMM_POINTS, "m,n,k", "cublas_fp32_gemm"),
                ("attention", ATTENTION, ATTENTION_POINTS, "heads,tokens,head_dim", "device_fp32_fma")):
            e = f.create_group(f"experiments/{operation}")
            e.attrs["definition"] = json.dumps({"kind": "sweep", "operation": [operation], "name": operation,
                                                "shapes": [list(p) for p in points]})
            write_tables(e, experiment_tables(operation, ladder, points, axes, ceiling))


def check_ladder(out):
    df = pd.read_csv(out / "ladder.csv")
    g = df[df.operation == "gemm"]
    check(set(zip(g.rows, g.features, g.depth)) == {(4096, 4096, 4096)}, set(zip(g.rows, g.features, g.depth)))
    fractions = {v: f for v, *_, f in GEMM}
    for r in g.itertuples():
        want = fractions[r.variant] * COMPUTE["cublas_fp32_gemm"] / 1e12
        check(math.isclose(r.tflop_per_s, want, rel_tol=1e-6), (r.variant, r.tflop_per_s, want))
        check(r.roof == "cublas_fp32_gemm" and math.isclose(r.pct_of_roof, 100 * fractions[r.variant], rel_tol=1e-6),
              (r.variant, r.roof, r.pct_of_roof))
        check(math.isclose(r.x_vendor, fractions[r.variant], rel_tol=1e-6), (r.variant, r.x_vendor))
    auto = g.set_index("variant").loc["gemm_autotuned@cuda"]
    check(math.isclose(auto.x_previous_rung, 0.95 / 0.16, rel_tol=1e-6), auto.x_previous_rung)
    check(auto.tuned_parameters == TUNED, auto.tuned_parameters)
    check(auto.tuner_candidates == 17 and auto.tuner_same_as_rung == 2,
          (auto.tuner_candidates, auto.tuner_same_as_rung))
    md = (out / "report.md").read_text()
    check("**gemm** at 4096×4096×4096" in md and "| TFLOP/s (IQR) |" in md, "the GEMM ladder table in TFLOP/s")
    check(f"`gemm_autotuned@cuda` ({TUNED_SHOWN})" in md, "the autotuned rung's parameters")
    check("`gemm_autotuned@cuda` (rung 3): its tuner chose rung 2's configuration (fastest of 17 candidates)" in md,
          "the ladder says the tuner kept an earlier rung's configuration")
    a = df[df.operation == "attention"].set_index("variant")
    check(a.loc["attention_textbook@cuda", "implementation"] == "mixed", a.implementation)
    check(a.loc["attention_fused@cuda", "implementation"] == "handwritten_cuda", a.implementation)
    check("| rung 1 (mixed: own kernels + vendor call) | `attention_textbook@cuda` |" in md, "the mixed rung's label")


def check_compute(out):
    df = pd.read_csv(out / "compute_by_operation.csv")
    a = df[(df.operation == "attention") & (df.features == 4096)].set_index("family")
    check(math.isclose(a.loc["attention_cuda", "tflop_per_s"], 0.5 * 64.0, rel_tol=1e-6), a.tflop_per_s)
    check(math.isclose(a.loc["attention_cuda", "pct_of_roof"], 50.0, rel_tol=1e-6), a.pct_of_roof)
    memory = pd.read_csv(out / "peak_device_memory.csv")
    t = memory[memory.variant == "attention_textbook@cuda"].sort_values("features")
    check(list(t.peak_device_bytes) == [peak_memory("textbook", p) for p in ATTENTION_POINTS], t)
    md = (out / "report.md").read_text()
    summary = md.split("## Summary\n\n", 1)[1].split("\n\n", 1)[0]
    check("`attention_fused@cuda` tokens^1.00" in summary and "`attention_textbook@cuda` tokens^1.8" in summary,
          summary)
    check("best Kokkos takes 2.50× the best handwritten/vendor time" in summary, summary)
    check("The overview also draws the compute roofs" in md, "compute roofs in the roofline")
    check((out / "compute_by_operation.png").exists(), "the compute figure")


def check_only_what_was_measured(out):
    """Issue 46 item 6: a compute roof is printed in TFLOP/s, never as 0.0 GB/s; a roof timed on two clocks says
    which; without a finding, the Findings part says per section that reports findings what it missed."""
    md = (out / "report.md").read_text()
    roofs = md.split("Ceilings measured in the same runs:", 1)[1].split("\n\n", 2)[1]
    for name, flops in COMPUTE.items():
        check(f"{name} {flops / 1e12:,.1f} TFLOP/s" in roofs, (name, roofs))
    check(not re.search(r"(?<![\d,.])0\.0 GB/s", roofs), roofs)
    check(f"device_read {BANDWIDTH['device_read'] / 1e9:,.1f} GB/s (device_events)" in roofs
          and f"host_read {BANDWIDTH['host_read'] / 1e9:,.1f} GB/s;" in roofs + ";", roofs)
    findings = md.split("## Findings\n\n", 1)[1].split("\n## ", 1)[0]
    check("No finding could be computed" not in findings, findings)
    check("- Speedups against the CPU reference: skipped, no `cpu_reference` host_wall samples" in findings
          and "- Roofline from counters: skipped, no profile table in the archives" in findings, findings)


N = 4096 ** 3
# Profiled calls at 4096^3 (schema 11): FFMA instructions, DRAM bytes, stalls and spills per kernel. The autotuned
# rung runs two kernels (counts summed, stalls weighted by duration); cuBLAS's counters say 1.5 N FFMAs, which at
# its measured median is 117% of the FMA probe: above the roof, as the report must say.
PROFILED = {"gemm_naive@cuda": [{"fp32_ffma_inst": N, "dram_bytes_read": 64e9, "profiled_duration_s": 0.1}],
            "gemm_autotuned@cuda": [
                {"fp32_ffma_inst": 0.75 * N, "fp32_fadd_inst": 1e6, "dram_bytes_read": 1.5e8,
                 "profiled_duration_s": 3e-3, "stall_long_scoreboard": 3.0, "stall_barrier": 6.0, "stall_wait": 1.0,
                 "stall_selected": 1.0, "local_load_bytes": 1000.0, "local_store_bytes": 24.0, "fma_pipe_pct": 80.0},
                {"fp32_ffma_inst": 0.25 * N, "fp32_fadd_inst": 1e6, "dram_bytes_read": 0.5e8,
                 "profiled_duration_s": 1e-3, "stall_long_scoreboard": 3.0, "stall_barrier": 2.0, "stall_wait": 1.0,
                 "stall_selected": 1.0, "local_load_bytes": 0.0, "local_store_bytes": 0.0, "fma_pipe_pct": 40.0}],
            "gemm_cublas@cuda": [{"fp32_ffma_inst": 1.5 * N, "dram_bytes_read": 2e8, "profiled_duration_s": 2e-3}]}


def profile_table(calls, schema11):
    rows = []
    for variant, kernels in calls.items():
        for launch, counters in enumerate(kernels):
            row = {"experiment": "gemm", "variant": variant, "layout": "row_major", "rows": 4096, "features": 4096,
                   "depth": 4096, "block_size": 0, "point": 1, "status": "ok", "gate_passed": 1,
                   "launch": np.int32(launch), "kernel": f"k{launch}", "label": "", "grid_size": 1024,
                   "launch_block_size": 256, "registers_per_thread": 64, "profiled_duration_s": 1e-3,
                   "dram_bytes_read": 1e8, "dram_bytes_written": 1.6e7 / len(kernels), "dram_throughput_pct": 50.0,
                   "achieved_occupancy_pct": 40.0, "theoretical_occupancy_pct": 50.0, "global_load_sectors": 1e6,
                   "global_load_requests": 2.5e5, "global_store_sectors": 1e5, "global_store_requests": 2.5e4,
                   "shared_bank_conflicts_load": 0.0, "shared_bank_conflicts_store": 0.0, "l2_hit_rate_pct": 90.0}
            if schema11:
                row.update({c: 0.0 for c in A.PROFILE_SCHEMA11})
            row.update({k: v for k, v in counters.items() if schema11 or k not in A.PROFILE_SCHEMA11})
            rows.append(row)
    df = pd.DataFrame(rows)
    df["launch"] = df.launch.astype(np.int32)
    return df


def write_profile(path, calls, schema):
    with h5py.File(path, "w") as f:
        f.attrs["schema_version"] = schema
        e = f.create_group("experiments/gemm")
        e.attrs["definition"] = json.dumps({"kind": "sweep", "operation": ["gemm"], "name": "gemm"})
        write_tables(e, {"profile": profile_table(calls, schema == "11")})


def check_executed_flops():
    counters = pd.DataFrame([{"fp32_ffma_inst": 10.0, "fp32_fadd_inst": 1.0, "fp16_hfma_inst": 2.0,
                              "fp16_hadd_inst": 1.0, "tensor_bf16_ops": 100.0},
                             {c: np.nan for c in ("fp32_ffma_inst", "fp32_fadd_inst", "fp16_hfma_inst",
                                                  "fp16_hadd_inst", "tensor_bf16_ops")}])
    f = A.executed_flops(counters)
    check(f.flops_fp32.iloc[0] == 21 and f.flops_fp16.iloc[0] == 10 and f.flops_tensor_bf16.iloc[0] == 100,
          f.iloc[0])  # an FMA 2 flops, a half2 instruction its two lanes
    check(f.flops.iloc[0] == 131 and np.isnan(f.flops.iloc[1]) and np.isnan(f.flops_fp64.iloc[0]), f)


def check_roofline_counters(tmp):
    write_profile(tmp / "prof11.h5", PROFILED, "11")
    write_profile(tmp / "prof10.h5", {"gemm_coalesced@cuda": [{}]}, "10")
    out = tmp / "counters_report"
    sections = report.build_report(A.load([tmp / "lab2.h5", tmp / "prof11.h5", tmp / "prof10.h5"]), out)
    check(not {s.key: s for s in sections}["roofline_counters"].skipped, "roofline_counters skipped")
    df = pd.read_csv(out / "roofline_counters.csv").set_index("variant")
    check(set(df.index) == set(PROFILED) | {"gemm_coalesced@cuda"}, df.index)
    fractions = {v: f for v, *_, f in GEMM}
    median = {v: flops("gemm", GEMM_POINTS[1]) / (fractions[v] * COMPUTE["cublas_fp32_gemm"]) for v in fractions}
    naive = df.loc["gemm_naive@cuda"]
    nbytes = 64e9 + 1.6e7
    check(naive.intensity_source == "measured" and math.isclose(naive.intensity, 2 * N / nbytes, rel_tol=1e-9),
          naive)
    check(math.isclose(naive.tflop_per_s, 2 * N / median["gemm_naive@cuda"] / 1e12, rel_tol=1e-6), naive.tflop_per_s)
    check(naive.time_source == "median (device_events)" and naive.timing_archive == "lab2", naive.time_source)
    # The naive rung moves 64 GB at its median: its binding roof is DRAM (device_read), not the FMA probe.
    check(naive.binding_roof == "device_read" and math.isclose(
        naive.pct_of_roof, 100 * nbytes / median["gemm_naive@cuda"] / BANDWIDTH["device_read"], rel_tol=1e-6),
        (naive.binding_roof, naive.pct_of_roof))
    auto = df.loc["gemm_autotuned@cuda"]
    check(auto.kernels == 2 and math.isclose(auto.flops, 2 * N + 2 * 1e6, rel_tol=1e-8), auto.flops)
    check(auto.compute_roof == "device_fp32_fma" and auto.binding_roof == "device_fp32_fma", auto.compute_roof)
    check(math.isclose(auto.pct_of_roof, 100 * auto.flops / median["gemm_autotuned@cuda"]
                       / COMPUTE["device_fp32_fma"], rel_tol=1e-6) and not auto.above_roof, auto.pct_of_roof)
    check(auto.top_stalls == "barrier 5.00, long_scoreboard 3.00, wait 1.00", auto.top_stalls)  # duration-weighted
    check(auto.spill_bytes == 1024 and math.isclose(auto.fma_pipe_pct, 70.0), (auto.spill_bytes, auto.fma_pipe_pct))
    cublas = df.loc["gemm_cublas@cuda"]
    want = 100 * 3 * N / median["gemm_cublas@cuda"] / COMPUTE["device_fp32_fma"]
    check(bool(cublas.above_roof) and math.isclose(cublas.pct_of_roof, want, rel_tol=1e-6), cublas.pct_of_roof)
    modelled = df.loc["gemm_coalesced@cuda"]
    check(modelled.intensity_source == "modelled" and math.isclose(
        modelled.intensity, flops("gemm", GEMM_POINTS[1]) / essential_bytes("gemm", GEMM_POINTS[1]), rel_tol=1e-9),
        modelled)
    md = (out / "report.md").read_text()
    check("**Above the roof:** `gemm_cublas@cuda` at 4096×4096×4096 (prof11/gemm) measures" in md,
          "the point above the roof is not reported")
    check("1 profiled point(s) above a roof" in md.split("## Summary", 1)[1][:3000], "no headline for it")
    check(f"**{want:.0f}% of device_fp32_fma: {A.ROOF_EXCEEDED}**" in md, "the table hides the exceeded roof")
    check("| `gemm_coalesced@cuda` (rung 2) |" in md and "**modelled**" in md, "the modelled point's label")
    check((out / "roofline_counters.png").read_bytes().startswith(b"\x89PNG"), "the figure")


def check_schema6_defaults(tmp):
    path = tmp / "v6.h5"
    with h5py.File(path, "w") as f:
        f.attrs["schema_version"] = "6"
        e = f.create_group("experiments/gemm")
        e.attrs["definition"] = json.dumps({"kind": "sweep", "operation": ["gemm"], "name": "gemm"})
        tables = experiment_tables("gemm", GEMM[:1], GEMM_POINTS[:1], "m,n,k", "cublas_fp32_gemm")
        tables["variants"] = tables["variants"].drop(columns=["depth", "compute_ceiling", "peak_device_bytes",
                                                              "tuned_parameters"])
        tables["samples"] = tables["samples"].drop(columns=["depth"])
        tables["ceilings"] = tables["ceilings"].drop(columns=["flops", "flops_per_second", "clock"])
        write_tables(e, tables)
    archive = A.load([path])[0]
    e = archive.experiments["gemm"]
    check((e.samples.depth == 1).all() and (e.variants.peak_device_bytes == -1).all(), "schema 6 defaults")
    check(archive.compute_ceilings() == {}, archive.compute_ceilings())


def check_modelled_traffic_over_memory_roof():
    """A point placed by the traffic model (no DRAM counters) that would move more than the memory roof allows is
    the model's error (cache reuse), not a beaten roof: never above_roof, never a finding; measured bytes over the
    same roof, or modelled flops over the compute roof, are."""
    from types import SimpleNamespace
    from kstudy_py.report.sections import roofline_counters as rc

    class Roofs:
        label = "run"

        def ceiling(self, name, timer=None):
            return {"device_read": 4e12}.get(name)

        def compute_ceiling(self, name, timer=None):
            return {"device_fp32_fma": 60e12}.get(name)

    inputs = SimpleNamespace(archives=[Roofs()])

    def row(**over):
        r = dict(flops=np.nan, dram_bytes=np.nan, modelled_bytes_read=8e9, modelled_bytes_written=0.0,
                 essential_flops=2e9, median_s=1e-3, profiled_duration_s=np.nan, timer="device_events",
                 timing_archive="run", profile_archive="run", compute_ceiling="device_fp32_fma",
                 dominant_precision="fp32")
        r.update(over)
        return SimpleNamespace(**r)

    model = rc.place(row(), inputs)  # 8 GB in 1 ms: 8 TB/s, twice the 4 TB/s roof, by the model only
    check(model["binding_roof"] == "device_read" and model["traffic_model_high"] and not model["above_roof"], model)
    measured = rc.place(row(flops=2e9, dram_bytes=8e9), inputs)  # the same bytes counted by ncu: a real excess
    check(measured["above_roof"] and not measured["traffic_model_high"], measured)
    compute = rc.place(row(modelled_bytes_read=1e6, essential_flops=1.2e11), inputs)  # 120 TFLOP/s of exact flops
    check(compute["binding_roof"] == "device_fp32_fma" and compute["above_roof"]
          and not compute["traffic_model_high"], compute)
    under = rc.place(row(modelled_bytes_read=2e9), inputs)  # 2 TB/s: under the roof, nothing to say
    check(not under["above_roof"] and not under["traffic_model_high"], under)


# Two GEMM points that differ only in k (issue 42): m = n = 512, k = 512 and 2048. A CPU reference (host_wall) and
# cuBLAS (device_events), cuBLAS DEPTH_SPEEDUP[k] times faster at each k; a profile of cuBLAS at both.
DEPTH_POINTS = [(512, 512, 512), (512, 512, 2048)]
DEPTH_SPEEDUP = {512: 4.0, 2048: 16.0}


def write_depth_archives(tmp):
    variants, samples, profile = [], [], []
    for variant, family, implementation, backend, timer in (
            ("gemm_cpu_reference@openmp", "cpu_reference", "reference", "openmp", "host_wall"),
            ("gemm_cublas@cuda", "cublas", "vendor_library", "cuda", "device_events")):
        for index, point in enumerate(DEPTH_POINTS):
            rows, features, depth = point
            cpu = flops("gemm", point) / 1e11
            median = cpu if backend == "openmp" else cpu / DEPTH_SPEEDUP[depth]
            variants.append({"variant": variant, "operation": "gemm", "compute_ceiling": "cublas_fp32_gemm",
                             "axes": "m,n,k", "family": family, "fusion_level": "full",
                             "implementation": implementation, "layout": "row_major", "backend": backend,
                             "on_device": int(backend == "cuda"), "kernels_launched": 1, "rung": np.int32(0),
                             "rows": rows, "features": features, "depth": depth, "block_size": 0,
                             "modelled_bytes_read": essential_bytes("gemm", point), "modelled_bytes_written": 0,
                             "essential_bytes": essential_bytes("gemm", point), "essential_flops": flops("gemm", point),
                             "peak_device_bytes": -1, "tuned_parameters": ""})
            # At k = 512 a --cache cold run too, both variants twice as slow: another point (cache), not pooled.
            for cache, scale in (("warm", 1.0), ("cold", 2.0)) if depth == 512 else (("warm", 1.0),):
                for trial in range(3):
                    samples.append({"experiment": "gemm_k", "variant": variant, "layout": "row_major",
                                    "memory_kind": "device" if backend == "cuda" else "", "direction": "",
                                    "rows": rows, "features": features, "depth": depth, "pitch": features,
                                    "block_size": 0, "bytes": essential_bytes("gemm", point), "point": index,
                                    "replication": 0, "trial": trial, "timer": timer,
                                    "seconds": scale * median * (1 + 0.01 * (trial - 1)), "gate": "passed",
                                    "throttled": 0, "status": "ok", "occupancy": 0.0, "cache": cache})
            if backend == "cuda":
                profile.append({"experiment": "gemm_k", "variant": variant, "layout": "row_major", "rows": rows,
                                "features": features, "depth": depth, "block_size": 0, "point": index,
                                "status": "ok", "gate_passed": 1, "launch": np.int32(0), "kernel": "sgemm",
                                "label": "", "grid_size": 64, "launch_block_size": 256, "registers_per_thread": 64,
                                "profiled_duration_s": median, "dram_bytes_read": essential_bytes("gemm", point),
                                "dram_bytes_written": 0.0, "dram_throughput_pct": 50.0,
                                "achieved_occupancy_pct": 40.0, "theoretical_occupancy_pct": 50.0,
                                "global_load_sectors": 1e6, "global_load_requests": 2.5e5,
                                "global_store_sectors": 1e5, "global_store_requests": 2.5e4,
                                "shared_bank_conflicts_load": 0.0, "shared_bank_conflicts_store": 0.0,
                                "l2_hit_rate_pct": 90.0})
    variants, profile = pd.DataFrame(variants), pd.DataFrame(profile)
    variants["rung"] = variants.rung.astype(np.int32)
    profile["launch"] = profile.launch.astype(np.int32)
    definition = json.dumps({"kind": "sweep", "operation": ["gemm"], "name": "gemm_k",
                             "shapes": [list(p) for p in DEPTH_POINTS]})
    with h5py.File(tmp / "gemm_k.h5", "w") as f:
        f.attrs["schema_version"] = "7"
        e = f.create_group("experiments/gemm_k")
        e.attrs["definition"] = definition
        write_tables(e, {"samples": pd.DataFrame(samples), "variants": variants, "ceilings": ceilings()})
    with h5py.File(tmp / "gemm_k_profile.h5", "w") as f:
        f.attrs["schema_version"] = "7"
        e = f.create_group("experiments/gemm_k")
        e.attrs["definition"] = definition
        write_tables(e, {"profile": profile})


def check_depth_join(tmp):
    """Points that differ only in depth (GEMM's k) are never joined together (issue 42)."""
    write_depth_archives(tmp)
    # kstudy_bench's CPU reference at both points, named m x n x k, at 1/3 of the archive's CPU medians.
    bench = [{"run_name": f"gemm_cpu_reference@openmp/{'x'.join(map(str, p))}", "run_type": "iteration",
              "real_time": flops("gemm", p) / 1e11 / 3 * 1e9 * (1 + 0.01 * (i - 1)), "time_unit": "ns"}
             for p in DEPTH_POINTS for i in range(3)]
    (tmp / "bench.json").write_text(json.dumps({"context": {}, "benchmarks": bench}))
    out = tmp / "depth_report"
    sections = report.build_report(A.load([tmp / "gemm_k.h5", tmp / "gemm_k_profile.h5"]), out,
                                   cpu_baseline=tmp / "bench.json")
    by_key = {s.key: s for s in sections}
    check(not by_key["speedups"].skipped and not by_key["profile"].skipped,
          (by_key["speedups"].skipped, by_key["profile"].skipped))
    sp = pd.read_csv(out / "speedups.csv")
    cublas = sp[sp.variant == "gemm_cublas@cuda"]
    check(len(cublas) == len(DEPTH_POINTS) + 1,
          f"a speedup per k and cache, not k x k pairs: {cublas.to_dict('records')}")
    for r in cublas.itertuples():
        check(math.isclose(r.speedup, DEPTH_SPEEDUP[r.depth], rel_tol=1e-9), (r.depth, r.cache, r.speedup))
    cold = cublas[cublas.cache == "cold"]
    check(len(cold) == 1 and cold.depth.iloc[0] == 512 and math.isclose(
        cold["median"].iloc[0], 2 * flops("gemm", DEPTH_POINTS[0]) / 1e11 / DEPTH_SPEEDUP[512], rel_tol=1e-7),
        "the cold run pooled with the warm one")
    bw = pd.read_csv(out / "bandwidth_by_operation.csv")  # one resident median per point: the warm one
    bw = bw[bw.variant == "gemm_cublas@cuda"].set_index("depth")
    check(len(bw) == len(DEPTH_POINTS) and math.isclose(
        bw.median_s[512], flops("gemm", DEPTH_POINTS[0]) / 1e11 / DEPTH_SPEEDUP[512], rel_tol=1e-7), bw.median_s)
    bench = pd.read_csv(out / "speedup_vs_bench_cpu.csv")
    bench = bench[bench.cache == "warm"]
    check(len(bench) == len(DEPTH_POINTS), f"a bench speedup per k: {bench.to_dict('records')}")
    for r in bench.itertuples():
        check(math.isclose(r.speedup, DEPTH_SPEEDUP[r.depth] / 3, rel_tol=1e-7), (r.depth, r.speedup))
    by = pd.read_csv(out / "profile_by_variant.csv")
    check(len(by) == len(DEPTH_POINTS), by.to_dict("records"))
    for r in by.itertuples():
        point = (r.rows, r.features, r.depth)
        want = flops("gemm", point) / 1e11 / DEPTH_SPEEDUP[r.depth]
        check(math.isclose(r.median_s, want, rel_tol=1e-9), (point, r.median_s, want))
        check(math.isclose(r.dram_bytes_per_essential_byte, 1.0, rel_tol=1e-9),
              (point, r.dram_bytes_per_essential_byte))
    md = (out / "report.md").read_text()
    check("| `gemm_cublas@cuda` | 512×512×2048 |" in md, "the profile table names the point with its k")


def main():
    with tempfile.TemporaryDirectory(prefix="kstudy_report_compute_") as tmp:
        tmp = Path(tmp)
        write_archive(tmp / "lab2.h5")
        sections = report.build_report(A.load([tmp / "lab2.h5"]), tmp / "report")
        by_key = {s.key: s for s in sections}
        for key in ("ladder", "compute_by_operation", "roofline_by_operation"):
            check(not by_key[key].skipped, (key, by_key[key].skipped))
        check_ladder(tmp / "report")
        check_only_what_was_measured(tmp / "report")
        check_compute(tmp / "report")
        check_schema6_defaults(tmp)
        check_executed_flops()
        check_roofline_counters(tmp)
        check_depth_join(tmp)
    check_modelled_traffic_over_memory_roof()
    print("compute report checks passed")


if __name__ == "__main__":
    main()
