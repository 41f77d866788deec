#!/usr/bin/python3
"""`kstudy report`'s section registry, in process: every section module registers itself, the scoring-only
sections are registered for the scoring operation, a section registered for another operation does not run on a
scoring archive, and a schema 5 archive holding only toy operations' variants (a tiny h5 built here, with its
own variants table and `axes` column: a rows x features operation and two one-axis vector operations) still
renders the generic sections from that table, the per-operation bandwidth and roofline among them, while the
scoring sections stay off it. The committed legacy fixture (schema 1, kind "scoring") still renders them all.

usage: check_report_sections.py FIXTURE.h5   (the committed scoring fixture, tests/fixtures/cpu_small.h5)
Exit 77 (ctest: skipped) when this python lacks h5py, pandas, numpy or matplotlib.
"""
import json
import math
import sys
import tempfile
from pathlib import Path

try:
    import h5py
    import matplotlib  # noqa: F401  (the report needs it)
    import numpy as np
    import pandas as pd
except ImportError as error:
    print(f"skipped: {error}")
    sys.exit(77)

sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
from kstudy_py import archive as A  # noqa: E402
from kstudy_py import report  # noqa: E402

SCORING_ONLY = {"layout", "waterfall", "seed"}
GENERIC = {"speedups", "bench_baseline", "crossover", "roofline", "roofline_counters", "profile", "block_size",
           "transfer", "overhead", "health", "bandwidth_by_operation", "roofline_by_operation", "ladder",
           "compute_by_operation", "energy", "devices", "sampling", "not_run", "study_time"}
PER_OPERATION = {"bandwidth_by_operation", "roofline_by_operation"}
# What the legacy fixture renders (besides the skipped ones); it must keep rendering exactly these.
FIXTURE_RENDERED = {"speedups", "crossover", "layout", "roofline", "overhead", "transfer", "health"}
TOY_ROWS = (1024, 65536)
TOY_FLOPS_PER_ELEMENT = 3  # the toy operation's own essential model, unlike scoring's 5
# The one-axis toy operations: n elements; copy moves 8 B per element and does no arithmetic, dot reads 8 B
# and does 2 flops per element. Kokkos takes KOKKOS_COST times the handwritten CUDA variant's time.
VECTOR_N = (1 << 10, 1 << 16, 1 << 20)
VECTOR_OPERATIONS = {"toy_copy": (8, 0), "toy_dot": (8, 2)}  # operation: (essential bytes, flops) per element
CEILINGS = {"device_read": 4e12, "device_copy": 3e12, "host_read": 1e11}  # bytes per second
KOKKOS_COST = 1.25
calls = []


@report.section("toy_probe", "Toy operation probe", order=200, operation="toy", needs=("speedups",))
def toy_probe(inputs, sec, speedups):
    """Runs only where the archives hold toy variants; receives the speedups section's result."""
    calls.append(speedups)
    return sec.done(len(speedups.value) if speedups.value is not None else 0)


def check(condition, message):
    if not condition:
        raise AssertionError(message)


def strings(values):
    return np.array(values, dtype=h5py.string_dtype())


def compound(columns):
    """A compound dataset's rows from {name: values}; strings stored variable-length, as kstudy writes them."""
    dtype = [(k, h5py.string_dtype() if isinstance(v[0], str) else np.asarray(v).dtype) for k, v in columns.items()]
    rows = np.empty(len(next(iter(columns.values()))), dtype=dtype)
    for k, v in columns.items():
        rows[k] = strings(v) if isinstance(v[0], str) else v
    return rows


def toy_samples():
    rows = []
    for variant, scale in (("toy_reference@openmp", 2.0), ("toy_fused@openmp", 1.0)):
        for n in TOY_ROWS:
            for trial in range(5):
                rows.append({"experiment": "toy_sweep", "variant": variant, "layout": "row_major", "memory_kind": "",
                             "direction": "", "rows": n, "features": 8, "pitch": 8, "block_size": 0, "bytes": n * 32,
                             "point": TOY_ROWS.index(n), "replication": 0, "trial": trial, "timer": "host_wall",
                             "seconds": scale * n * 1e-9 * (1 + 0.01 * trial), "gate": "passed", "throttled": 0,
                             "status": "ok", "occupancy": 0.0})
    return pd.DataFrame(rows)


def toy_variants():
    rows = []
    for variant, family in (("toy_reference@openmp", "cpu_reference"), ("toy_fused@openmp", "toy_fused")):
        for n in TOY_ROWS:
            rows.append({"variant": variant, "operation": "toy", "family": family, "fusion_level": "full",
                         "layout": "row_major", "backend": "openmp", "on_device": 0, "kernels_launched": 1, "rows": n,
                         "features": 8, "block_size": 0, "modelled_bytes_read": n * 32, "modelled_bytes_written": n * 4,
                         "essential_bytes": n * 36, "essential_flops": TOY_FLOPS_PER_ELEMENT * n * 8})
    return pd.DataFrame(rows)


def vector_variants():
    """Per toy vector operation: a CPU reference and a Kokkos variant on the host, a Kokkos and a handwritten
    CUDA variant on the device (family stream_cuda: one of the handwritten families the report knows)."""
    rows = []
    for operation, (bytes_per_element, flops_per_element) in VECTOR_OPERATIONS.items():
        for variant, family, backend in ((f"{operation}_reference@openmp", "cpu_reference", "openmp"),
                                         (f"{operation}_kokkos@openmp", "stream_kokkos", "openmp"),
                                         (f"{operation}_kokkos@cuda", "stream_kokkos", "cuda"),
                                         (f"{operation}_cuda@cuda", "stream_cuda", "cuda")):
            for n in VECTOR_N:
                rows.append({"variant": variant, "operation": operation, "axes": "n", "family": family,
                             "fusion_level": "full", "layout": "row_major", "backend": backend,
                             "on_device": int(backend == "cuda"), "kernels_launched": 1, "rows": n, "features": 1,
                             "block_size": 0, "modelled_bytes_read": n * bytes_per_element,
                             "modelled_bytes_written": 0, "essential_bytes": n * bytes_per_element,
                             "essential_flops": n * flops_per_element})
    return pd.DataFrame(rows)


VECTOR_JOULES = 2e-3  # per resident call of a device variant


def vector_seconds(v, timer):
    """Device variants run at 80% of device_copy (Kokkos at that / KOKKOS_COST), host ones at half host_read;
    resident_wall adds 1 µs to the device events."""
    seconds = v.essential_bytes / (0.8 * CEILINGS["device_copy"] if v.on_device else 0.5 * CEILINGS["host_read"])
    seconds *= KOKKOS_COST if v.on_device and v.family == "stream_kokkos" else 1.0
    return seconds + (1e-6 if timer == "resident_wall" else 0.0)


def vector_samples(variants):
    rows = []
    for v in variants.itertuples():
        timers = ("device_events", "resident_wall") if v.on_device else ("host_wall",)
        for timer in timers:
            for trial in range(5):
                rows.append({"experiment": "toy_vector", "variant": v.variant, "layout": v.layout,
                             "memory_kind": "", "direction": "", "rows": v.rows, "features": 1, "pitch": 1,
                             "block_size": 0, "bytes": v.essential_bytes, "point": VECTOR_N.index(v.rows),
                             "replication": 0, "trial": trial, "timer": timer,
                             "seconds": vector_seconds(v, timer) * (1 + 0.001 * (trial - 2)), "gate": "passed",
                             "throttled": 0, "status": "ok", "occupancy": 0.0,
                             # Schema 9: the GPU's energy counter around each device variant's resident region.
                             "energy_joules": VECTOR_JOULES if v.on_device and timer == "resident_wall" else np.nan,
                             "cache": "warm"})
    return pd.DataFrame(rows)


def ceilings():
    """The roofs as kstudy writes them (schema 8): the device roofs on both clocks (CUDA events and the host
    clock), the host roof on the host clock; a number is divided only by a roof of its timer's clock."""
    rows = [{"name": n, "bytes": 1 << 30, "seconds": (1 << 30) / bw, "bytes_per_second": bw, "clock": clock}
            for n, bw in CEILINGS.items()
            for clock in (("device_events", "host_wall") if n.startswith("device_") else ("host_wall",))]
    return pd.DataFrame(rows)


def write_tables(group, tables):
    for name, df in tables.items():
        group.create_dataset(name, data=compound({c: df[c].tolist() for c in df.columns}))


def write_toy_archive(path):
    """Schema 5: sweeps name their operations and axes in the definition, the variants table has `axes`."""
    with h5py.File(path, "w") as f:
        f.attrs["schema_version"] = "5"
        f.attrs["git_commit"] = "toy"
        e = f.create_group("experiments/toy_sweep")
        e.attrs["definition"] = json.dumps({"kind": "sweep", "operation": ["toy"], "name": "toy_sweep",
                                            "rows": list(TOY_ROWS), "features": [8]})
        variants = toy_variants()
        variants.insert(2, "axes", "rows,features")
        write_tables(e, {"samples": toy_samples(), "variants": variants})
        e = f.create_group("experiments/toy_vector")
        e.attrs["definition"] = json.dumps({"kind": "sweep", "operation": list(VECTOR_OPERATIONS),
                                            "name": "toy_vector", "n": list(VECTOR_N)})
        variants = vector_variants()
        write_tables(e, {"samples": vector_samples(variants), "variants": variants, "ceilings": ceilings()})


def check_registry():
    report.load_sections()
    registered = {key: r for key, r in report.REGISTRY.items() if key != "toy_probe"}
    check(set(registered) == SCORING_ONLY | GENERIC, sorted(registered))
    for key, r in registered.items():
        want = "scoring" if key in SCORING_ONLY else None
        check(r.operation == want, (key, r.operation))
        check(r.build.__module__.startswith("kstudy_py.report.sections."), (key, r.build.__module__))
        where = r.build.__module__.split(".")
        check(("scoring" in where) == (key in SCORING_ONLY), (key, "module outside its operation's package"))


def rendered(sections):
    return {s.key for s in sections if not s.skipped}


def check_scoring_archive(fixture, out):
    """The legacy fixture (schema 1, kind "scoring", no operation anywhere) is the scoring operation."""
    archive = A.load([fixture])[0]
    quick = archive.experiments["quick"]
    check(quick.kind == "sweep" and quick.operations == ["scoring"] and quick.axes == ["rows", "features"],
          (quick.kind, quick.operations, quick.axes))
    check(archive.experiments["transfer_calibration"].operations == [], "a transfer experiment with an operation")
    calls.clear()
    sections = report.build_report([archive], out)
    keys = {s.key for s in sections}
    check("toy_probe" not in keys and not calls, "a section registered for `toy` ran on a scoring archive")
    check(SCORING_ONLY <= keys, f"scoring sections missing: {sorted(SCORING_ONLY - keys)}")
    check(rendered(sections) == FIXTURE_RENDERED | PER_OPERATION, sorted(rendered(sections)))
    md = (out / "report.md").read_text()
    check("Toy operation probe" not in md, "toy section rendered")
    summary = md.split("## Summary\n\n", 1)[1].split("\n\n", 1)[0].splitlines()
    check(summary[0].startswith("- scoring (cpu_small/"), f"no scoring line opens the summary: {summary[0]}")
    bw = pd.read_csv(out / "bandwidth_by_operation.csv")
    check(set(bw.operation) == {"scoring"} and (bw.essential_GB_per_s > 0).all(), "scoring bandwidth table")


def check_schema4_reading(tmp):
    """A schema 4 sweep: kind "scoring", no operation in its definition, a variants table without `axes`."""
    path = tmp / "v4.h5"
    with h5py.File(path, "w") as f:
        f.attrs["schema_version"] = "4"
        e = f.create_group("experiments/quick")
        e.attrs["definition"] = json.dumps({"kind": "scoring", "name": "quick", "rows": list(TOY_ROWS)})
        write_tables(e, {"samples": toy_samples(), "variants": toy_variants()})
    quick = A.load([path])[0].experiments["quick"]
    check(quick.kind == "sweep" and quick.operations == ["scoring"], (quick.kind, quick.operations))
    check(list(quick.variants["axes"].unique()) == ["rows,features"] and quick.axes == ["rows", "features"],
          "schema 4 variants table not read as rows,features")
    # The variants table, not the definition, says which operation each variant implements.
    check(set(op for op, _ in quick.variant_operations().values()) == {"toy"}, quick.variant_operations())


def check_toy_archive(out):
    calls.clear()
    path = out.parent / "toy.h5"
    write_toy_archive(path)
    sections = report.build_report(A.load([path]), out, shape=(65536, 8))
    keys = {s.key for s in sections}
    check("toy_probe" in keys and len(calls) == 1, "the toy section did not run on a toy archive")
    check(calls[0].key == "speedups" and calls[0].value is not None, "toy section did not get speedups' result")
    check(not (SCORING_ONLY & keys), f"scoring sections ran on a toy archive: {sorted(SCORING_ONLY & keys)}")
    md = (out / "report.md").read_text()
    check(md.index("## Summary") < md.index("## Archives"), "report.md does not open with its summary")
    check("## Speedups against the CPU reference\n\n![" in md, "no speedup figure for the toy operation")
    sp = pd.read_csv(out / "speedups.csv")
    fused = sp[sp.variant == "toy_fused@openmp"]
    check(len(fused) == 2 and np.allclose(fused.speedup, 2.0, rtol=1e-9), fused.speedup.tolist())
    # Intensity from the toy's own variants table (3 × 8 flops over 36 bytes per row), not the scoring model's.
    roof = pd.read_csv(out / "roofline.csv")
    check(len(roof) > 0 and all(math.isclose(r.ai_flop_per_byte, TOY_FLOPS_PER_ELEMENT * 8 / 36) for r in
                                roof.itertuples()), roof.ai_flop_per_byte.tolist())
    check("the toy operation moves" in md, "roofline does not name the toy operation")
    check_vector_operations(out, sections, md, sp)


def check_vector_operations(out, sections, md, sp):
    """The one-axis operations: read from the definition and the `axes` column, each against its own CPU
    reference, in the per-operation bandwidth table, Kokkos-vs-CUDA ratio, roofline and summary."""
    # Energy: the device variants' resident samples carry NVML readings of single calls (0 or a whole counter
    # update each); without timer `energy` samples the section reports no energy and says why.
    energy = next(s for s in sections if s.key == "energy")
    single = len(VECTOR_OPERATIONS) * 2 * len(VECTOR_N) * 5
    check(energy.skipped and "energy per call not measured" in energy.skipped
          and f"{single} single-call regions" in energy.skipped, energy.skipped)
    check(not (out / "energy.csv").exists() and "mJ/call" not in md and "per joule" not in md,
          "energy reported from single-call regions")
    vector = A.load([out.parent / "toy.h5"])[0].experiments["toy_vector"]
    check(vector.operations == list(VECTOR_OPERATIONS) and vector.axes == ["n"], (vector.operations, vector.axes))
    check(PER_OPERATION <= rendered(sections), f"per-operation sections not rendered: {sorted(rendered(sections))}")
    mine = sp[sp.experiment == "toy_vector"]
    check(len(mine) and all(b.startswith(v.split("_")[0] + "_" + v.split("_")[1] + "_") for v, b in
                            zip(mine.variant, mine.baseline)), "a speedup against another operation's reference")
    bw = pd.read_csv(out / "bandwidth_by_operation.csv")
    check(set(bw.operation) == {"toy"} | set(VECTOR_OPERATIONS), set(bw.operation))
    for operation in VECTOR_OPERATIONS:
        g = bw[bw.operation == operation]
        check(set(g.point) == {"n=2^10", "n=2^16", "n=2^20"}, set(g.point))
        cuda = g[g.family == "stream_cuda"]
        check((cuda.timer == "device_events").all(), "device events not preferred for a device variant")
        check(np.allclose(cuda.pct_of_device_copy, 80) and np.allclose(cuda.pct_of_device_read, 60), cuda.to_string())
        check(cuda.pct_of_host_read.isna().all(), "a device variant measured against the host roof")
        kokkos = g[(g.family == "stream_kokkos") & (g.backend == "cuda")]
        check(np.allclose(kokkos.pct_of_device_copy, 80 / KOKKOS_COST), kokkos.pct_of_device_copy.tolist())
        host = g[g.backend == "openmp"]
        check(np.allclose(host.pct_of_host_read, 50) and host.pct_of_device_read.isna().all(), host.to_string())
    ratios = pd.read_csv(out / "kokkos_vs_handwritten.csv")
    check(set(ratios.operation) == set(VECTOR_OPERATIONS) and len(ratios) == 2 * len(VECTOR_N), ratios.to_string())
    check(np.allclose(ratios.kokkos_over_handwritten, KOKKOS_COST) and (ratios.timer == "device_events").all(),
          ratios.kokkos_over_handwritten.tolist())
    roof = pd.read_csv(out / "roofline_by_operation.csv")
    check(np.allclose(roof[roof.operation == "toy_dot"].ai_flop_per_byte, 2 / 8)
          and (roof[roof.operation == "toy_copy"].ai_flop_per_byte == 0).all(), "intensities of the vector toys")
    data = (out / "roofline_by_operation.png").read_bytes()
    check(data.startswith(b"\x89PNG") and "No compute roof" in md, "roofline by operation not drawn")
    # The summary opens with one line per operation, naming its experiment, best family and the Kokkos cost.
    summary = md.split("## Summary\n\n", 1)[1].split("\n\n", 1)[0].splitlines()
    for k, operation in enumerate(["toy"] + list(VECTOR_OPERATIONS)):
        check(summary[k].startswith(f"- {operation} (toy/"), (k, summary[k]))
    copy_line = summary[1]
    check("best `stream_cuda@cuda`" in copy_line and "80% of device_copy" in copy_line and "n=2^20" in copy_line
          and "1.25×" in copy_line, copy_line)


def check_energy_boundary():
    """Energy comes from timer `energy` samples with a reading only (already per call: their median): never from
    the single-call regions beside them, nor from an experiment that has only those, nor from an `energy` sample
    whose reading is NaN (not measured)."""
    from types import SimpleNamespace
    from kstudy_py.report.sections import energy
    keys = {"variant": "v@cuda", "layout": "row_major", "memory_kind": "", "direction": "", "rows": 1 << 20,
            "features": 1, "depth": 1, "block_size": 0, "cache": "warm", "power_watts": 300.0, "throttled": 0}

    def experiment(rows):
        return SimpleNamespace(name="x", accepted=lambda: pd.DataFrame(rows), variants=pd.DataFrame())
    # One call read as 0 or a whole update: 0 to 3 kW over 100 µs.
    single = [dict(keys, timer="resident_wall", seconds=1e-4, energy_joules=j) for j in (0.0, 0.0, 0.3)]
    per_call = [dict(keys, timer="energy", seconds=1e-4, energy_joules=j) for j in (0.031, 0.030, 0.032)]
    unread = [dict(keys, timer="energy", seconds=1e-4, energy_joules=np.nan)] * 3
    df = energy.experiment_energy(SimpleNamespace(label="a"), experiment(single + per_call + unread))
    check(len(df) == 1 and math.isclose(df.joules_per_call.iloc[0], 0.031) and df.calls.iloc[0] == 3,
          f"timer energy only, its median per call: {df.to_dict('records')}")
    for rows in (single, single + unread):
        check(energy.experiment_energy(SimpleNamespace(label="a"), experiment(rows)).empty,
              f"energy from samples that measured none per call: {rows}")
    # The headline ranks positive J/call only: a row that read 0 has no work per joule to rank.
    table = pd.DataFrame([
        dict(keys, archive="a", experiment="x", variant="slow@cuda", calls=3, joules_per_call=0.02, GB_per_J=5.0,
             GFLOP_per_J=np.nan),
        dict(keys, archive="a", experiment="x", variant="fast@cuda", calls=3, joules_per_call=0.01, GB_per_J=10.0,
             GFLOP_per_J=np.nan),
        dict(keys, archive="a", experiment="y", variant="zero@cuda", calls=3, joules_per_call=0.0, GB_per_J=np.nan,
             GFLOP_per_J=np.nan),
        dict(keys, archive="a", experiment="x", variant="gemm@cuda", calls=3, joules_per_call=0.5, GB_per_J=0.1,
             GFLOP_per_J=300.0)])
    text = energy.headline(table)
    check("zero@cuda" not in text and "most essential bytes per joule fast@cuda" in text and "(10 GB/J)" in text
          and "most flops per joule gemm@cuda" in text and "3 of the 4" in text, text)
    check("median of 3 regions" in energy.line(next(df.assign(
        GB_per_J=np.nan, GFLOP_per_J=np.nan, archive="a", experiment="x").itertuples())), "the line says how many")


def check_thread_counts(tmp):
    """The archive table states the OpenMP threads the timings ran with: each replication's process gets the
    protocol's threads, at most the machine's cores, whatever the parent process (environment openmp_threads) had:
    8 of 16 cores for toy_sweep, 16 (the cores) for toy_vector's 32."""
    path = tmp / "threads.h5"
    write_toy_archive(path)
    with h5py.File(path, "r+") as f:
        f.create_group("environment").attrs.update(cpu_model="Synthetic CPU", cpu_cores="16", openmp_threads="16")
        f["experiments/toy_sweep"].attrs["protocol"] = json.dumps({"threads": 8, "trials": 5})
        f["experiments/toy_vector"].attrs["protocol"] = json.dumps({"threads": 32, "trials": 5})
    archive = A.load([path])[0]
    check([archive.experiments[n].openmp_threads for n in ("toy_sweep", "toy_vector")] == [8, 16],
          "threads = min(protocol threads, cores)")
    report.build_report([archive], tmp / "threads")
    table = (tmp / "threads" / "report.md").read_text().split("## Archives", 1)[1].split("\n\n", 2)[1]
    check("| Synthetic CPU (16 cores; OpenMP threads 8 in toy_sweep, 16 in toy_vector) |" in table, table)
    with h5py.File(path, "r+") as f:
        f["experiments/toy_vector"].attrs["protocol"] = json.dumps({"threads": 8})
    report.build_report(A.load([path]), tmp / "threads8")
    table = (tmp / "threads8" / "report.md").read_text().split("## Archives", 1)[1].split("\n\n", 2)[1]
    check("| Synthetic CPU (16 cores; 8 OpenMP threads) |" in table and "16 OpenMP" not in table, table)


def check_empty_findings(fixture, tmp):
    """A findings section that ran and found nothing says what its finding needed, never a bare "nothing to report"
    nor a reference shape of 0×0: the layout pairs at a --shape no pair was timed at (the fixture has them at
    4,099, 262,144 and 1,048,576 × 16), and an archive whose sweeps accepted no sample (only the transposes timed)."""
    from kstudy_py.report.markdown import no_finding_lines
    sections = {s.key: s for s in report.build_report(A.load([fixture]), tmp / "unmeasured", shape=(4099, 64))}
    layout = sections["layout"]
    check(not layout.skipped and not layout.findings and layout.no_finding
          and "at the reference shape 4,099×64" in layout.no_finding and "1,048,576×16" in layout.no_finding
          and "(host_wall)" in layout.no_finding, layout.no_finding)
    path = tmp / "no_points.h5"
    path.write_bytes(fixture.read_bytes())
    with h5py.File(path, "r+") as f:
        for name in ("quick", "feature_small"):
            samples = f[f"experiments/{name}/samples"]
            table = samples[...]
            table["status"] = b"error"
            samples[...] = table
    sections = report.build_report(A.load([path]), tmp / "no_points")
    text = "\n".join(no_finding_lines(sections))
    waterfall = next(s for s in sections if s.key == "waterfall")
    check("0×0" not in text and "no accepted sample of a timed scoring point" in (waterfall.skipped or ""), text)
    check("nothing to report" not in text and "only the `layout_transpose` conversion" in text, text)


def check_point_key():
    """kstudy schema's point_key (what the report joins points on) names columns both the samples and the summary
    tables store, the extents among them, and the reader fills each in for every schema version."""
    check(set(A.POINT_KEY) <= set(A.COLUMNS["samples"]) and set(A.POINT_KEY) <= set(A.COLUMNS["summary"]),
          (A.POINT_KEY, "not columns of samples and summary"))
    in_variants = [c for c in A.POINT_KEY if c in A.COLUMNS["variants"]]
    check(set(A.EXTENTS) <= set(A.POINT_KEY) and A.point_key("variants") == in_variants, A.POINT_KEY)
    legacy = A.load([Path(sys.argv[1])])[0].experiments["quick"].samples  # schema 1: no depth, no cache
    check(set(A.POINT_KEY) <= set(legacy.columns), sorted(set(A.POINT_KEY) - set(legacy.columns)))


def check_host_level_roofs():
    """A host point is held against the roof of the first cache level that holds its working set (each level's
    roof measured at A.HOST_CACHE_FILL of it), else host_read; an archive without level roofs has host_read
    alone. The same cases as the C++ HostRoof tests (tests/test_ceilings.cpp)."""
    class Fake:
        def __init__(self, rows):
            self.rows = pd.DataFrame(rows, columns=["name", "bytes", "bytes_per_second", "clock"])

        def ceilings(self):
            return self.rows

    levels = Fake([("host_read", 1 << 30, 50e9, "host_wall"), ("host_read_l3", 16 << 20, 150e9, "host_wall"),
                   ("host_read_l1", 32 << 10, 600e9, "host_wall"), ("host_read_l2", 1 << 20, 300e9, "host_wall"),
                   ("device_read", 1 << 30, 3e12, "device_events")])
    for working_set, expected in ((1024, "host_read_l1"), (64 << 10, "host_read_l1"), ((64 << 10) + 4, "host_read_l2"),
                                  (2 << 20, "host_read_l2"), (4 << 20, "host_read_l3"), (32 << 20, "host_read_l3"),
                                  (64 << 20, "host_read"), (float("nan"), "host_read")):
        got = A.Archive.host_roof(levels, working_set)
        check(got == expected, f"host roof for {working_set} bytes: {got}, expected {expected}")
    check(A.Archive.host_roof(levels, 1024, "device_events") == "host_read", "a level roof of another clock")
    dram = Fake([("host_read", 1 << 30, 50e9, "host_wall")])
    check(A.Archive.host_roof(dram, 1024) == "host_read", "no level roofs: host_read")
    check(A.is_host_roof("host_read_l2") and A.is_host_roof("host_read") and not A.is_host_roof("device_read"),
          "is_host_roof")


def main():
    fixture = Path(sys.argv[1])
    check_point_key()
    check_host_level_roofs()
    check_registry()
    check_energy_boundary()
    with tempfile.TemporaryDirectory(prefix="kstudy_report_sections_") as tmp:
        check_scoring_archive(fixture, Path(tmp) / "scoring")
        check_schema4_reading(Path(tmp))
        check_toy_archive(Path(tmp) / "toy")
        check_thread_counts(Path(tmp))
        check_empty_findings(fixture, Path(tmp))
    print("report section checks passed")


if __name__ == "__main__":
    main()
