"""What each timed variant is: one table per archive experiment, read from the archive.

Schema 4 and later archives store it as `/experiments/<name>/variants` (one row per variant and measured
shape; schema 5 adds the operation's `axes`, schema 6 the variant's ladder `rung`, schema 7 the third extent
`depth`, the operation's `compute_ceiling`, `peak_device_bytes` and `tuned_parameters`). For older archives, `legacy_variant_table` builds the same table
once; it is the only place in the report that derives anything from a variant's name. Every section reads the
table, never the names.
"""
import numpy as np
import pandas as pd

from .. import archive as A

FIELDS = ["variant", "operation", "axes", "family", "fusion_level", "implementation", "layout", "backend", "on_device",
          "kernels_launched", "rung", "rows", "features", "depth", "block_size", "modelled_bytes_read",
          "modelled_bytes_written", "essential_bytes", "essential_flops", "compute_ceiling", "peak_device_bytes",
          "tuned_parameters"]
SHAPE_KEYS = ["variant", "rows", "features", "block_size"]  # of legacy (schema <= 3) archives: two axes
# The family of every operation's CPU baseline (the C++ variants' `implementation`).
REFERENCE_FAMILY = "cpu_reference"
# Kernels written without Kokkos (variant_info::implementation, stored since schema 6): kstudy's handwritten
# CUDA escape paths and vendor libraries. "What Kokkos costs" compares every other device variant with them.
HANDWRITTEN = ("handwritten_cuda", "vendor_library")
# Archives before schema 6 stored no implementation: what their families' registrations said.
LEGACY_IMPLEMENTATION = {"fused_cuda": "handwritten_cuda", "stream_cuda": "handwritten_cuda",
                         "cublas": "vendor_library", "cub": "vendor_library", "cpu_reference": "reference",
                         "composed": "kokkos_kernels", "stream_kokkos_kernels": "kokkos_kernels"}


def legacy_implementation(family):
    return LEGACY_IMPLEMENTATION.get(family, "kokkos")


def is_handwritten(implementation):
    return implementation in HANDWRITTEN


def stored_variant_table(experiment):
    """The archive's own variants table for the experiment (axes filled in for schema 4), or None when the
    archive predates it."""
    if experiment.variants.empty:
        return None
    table = experiment.variants.copy()
    table["on_device"] = table.on_device.astype(bool)
    stored = table["implementation"].fillna("") if "implementation" in table else pd.Series("", index=table.index)
    table["implementation"] = [i or legacy_implementation(f) for i, f in zip(stored, table.family)]
    return table[FIELDS]


# Schema <= 3: what the scoring variants' registrations said (variants/*.cpp, *.cu), keyed by family.
LEGACY_OPERATION = A.LEGACY_OPERATION
LEGACY_FUSION_LEVEL = {"composed": "none", "partial_fusion": "partial"}  # every other scoring family: full
LEGACY_KERNELS = {"composed": 5, "partial_fusion": 3}                   # every other scoring family: 1
HOST_BACKENDS = ("serial", "openmp", "threads")


def legacy_variant_table(experiment):
    """The variants table of a schema <= 3 archive, where only `scoring` experiments timed variants: family and
    backend from the variant's name (`<family>_<layout>[_<flavour>]@<backend>`), layout from the samples (the
    profile table for a profile archive), essential bytes and flops from the scoring model. Those archives
    stored no modelled read/written split (NaN here); their samples' `bytes` is per timer and stays there."""
    if experiment.kind != "sweep" or experiment.operations != [LEGACY_OPERATION]:
        return None
    frames = []
    if not experiment.samples.empty:
        frames.append(experiment.samples[SHAPE_KEYS + ["layout"]].drop_duplicates())
    if not experiment.profile.empty:
        frames.append(experiment.profile[SHAPE_KEYS + ["layout"]].drop_duplicates())
    if not frames:
        return None
    table = pd.concat(frames, ignore_index=True).drop_duplicates(SHAPE_KEYS)
    table["family"] = [A.split_layout(v)[0] for v in table.variant]
    table["backend"] = table.variant.map(A.backend)
    table["operation"] = LEGACY_OPERATION
    table["axes"] = ",".join(A.LEGACY_AXES)
    table["fusion_level"] = table.family.map(lambda f: LEGACY_FUSION_LEVEL.get(f, "full"))
    table["implementation"] = table.family.map(legacy_implementation)
    table["on_device"] = ~table.backend.isin(HOST_BACKENDS)
    table["kernels_launched"] = table.family.map(lambda f: LEGACY_KERNELS.get(f, 1))
    table["rung"] = 0  # no ladders before schema 6
    table["modelled_bytes_read"] = np.nan
    table["modelled_bytes_written"] = np.nan
    table["essential_bytes"] = A.essential_bytes(table.rows, table.features)
    table["essential_flops"] = A.flops(table.rows, table.features)
    for column, default in A.SCHEMA7_DEFAULTS["variants"].items():
        table[column] = default
    return table[FIELDS]


def variant_table(archives):
    """Every experiment's variants table, with its archive and experiment; empty when no experiment has one."""
    frames = []
    for a in archives:
        for e in a.experiments.values():
            table = stored_variant_table(e)
            if table is None:
                table = legacy_variant_table(e)
            if table is not None and len(table):
                frames.append(table.assign(archive=a.label, experiment=e.name))
    if not frames:
        return pd.DataFrame(columns=["archive", "experiment"] + FIELDS)
    return pd.concat(frames, ignore_index=True)
