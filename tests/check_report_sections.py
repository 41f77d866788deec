#!/usr/bin/python3
"""`kstudy report`'s section registry, in process: every section module registers itself, the scoring-only
sections are registered for the scoring operation, a section registered for another operation does not run on a
scoring archive, and an archive holding only a toy operation's variants (a tiny h5 built here, with its own
variants table) still renders the generic sections from that table.

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
GENERIC = {"speedups", "bench_baseline", "crossover", "roofline", "profile", "block_size", "transfer", "overhead",
           "health"}
TOY_ROWS = (1024, 65536)
TOY_FLOPS_PER_ELEMENT = 3  # the toy operation's own essential model, unlike scoring's 5
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
                             "seconds": scale * n * 1e-9 * (1 + 0.01 * trial), "gate_passed": 1, "throttled": 0,
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


def write_toy_archive(path):
    """Schema 3 (what archive.py reads today) plus the variants table schema 4 adds; the report reads that
    table wherever it is present."""
    with h5py.File(path, "w") as f:
        f.attrs["schema_version"] = "3"
        f.attrs["git_commit"] = "toy"
        e = f.create_group("experiments/toy_sweep")
        e.attrs["definition"] = json.dumps({"kind": "toy", "name": "toy_sweep", "rows": list(TOY_ROWS)})
        for name, df in (("samples", toy_samples()), ("variants", toy_variants())):
            e.create_dataset(name, data=compound({c: df[c].tolist() for c in df.columns}))


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


def check_scoring_archive(fixture, out):
    calls.clear()
    sections = report.build_report(A.load([fixture]), out)
    keys = {s.key for s in sections}
    check("toy_probe" not in keys and not calls, "a section registered for `toy` ran on a scoring archive")
    check(SCORING_ONLY <= keys, f"scoring sections missing: {sorted(SCORING_ONLY - keys)}")
    check("Toy operation probe" not in (out / "report.md").read_text(), "toy section rendered")


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


def main():
    fixture = Path(sys.argv[1])
    check_registry()
    with tempfile.TemporaryDirectory(prefix="kstudy_report_sections_") as tmp:
        check_scoring_archive(fixture, Path(tmp) / "scoring")
        check_toy_archive(Path(tmp) / "toy")
    print("report section checks passed")


if __name__ == "__main__":
    main()
