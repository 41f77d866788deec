"""What each timed variant is: one table per archive experiment, read from the archive.

Schema 4 and later archives store it as `/experiments/<name>/variants` (one row per variant and measured
shape; schema 5 adds the operation's `axes`, schema 6 the variant's ladder `rung`, schema 7 the third extent
`depth`, the operation's `compute_ceiling`, `peak_device_bytes` and `tuned_parameters`). For older archives,
`legacy_variant_table` builds the same table once; it is the only place in the report that derives anything from a
variant's name. Every section reads the table, never the names.
"""
import numpy as np
import pandas as pd

from .. import archive as A

FIELDS = A.COLUMNS["variants"]  # the archive's variants table, as kstudy schema declares it
# A variant's modelled point (the variants table's point key, its layout apart); legacy (schema <= 3) archives have
# two axes, and the reader fills in depth 1.
SHAPE_KEYS = ["variant", *A.point_key("variants", without=("layout",))]
# The family of every operation's CPU baseline (the C++ variants' `implementation`).
REFERENCE_FAMILY = "cpu_reference"
# Kernels written without Kokkos (variant_info::implementation, stored since schema 6): kstudy's handwritten
# CUDA escape paths, vendor libraries, and handwritten kernels around a vendor call (`mixed`). "What Kokkos costs"
# compares every other device variant (`kokkos`, `kokkos_kernels`, `kokkos_mixed`) with them.
HANDWRITTEN = ("handwritten_cuda", "vendor_library", "mixed")
PORTABLE = ("kokkos", "kokkos_kernels", "kokkos_mixed")
# Archives before schema 6 stored no implementation: what their families ran (the scoring families composed and
# partial_fusion: their own Kokkos kernels around KokkosBlas::gemv).
LEGACY_IMPLEMENTATION = {"fused_cuda": "handwritten_cuda", "stream_cuda": "handwritten_cuda",
                         "cublas": "vendor_library", "cub": "vendor_library", "cpu_reference": "reference",
                         "composed": "kokkos_mixed", "partial_fusion": "kokkos_mixed",
                         "stream_kokkos_kernels": "kokkos_kernels"}
# Labels archived before `mixed` and `kokkos_mixed` existed that did not say what ran: variant name
# (without @backend) -> (the label stored then, what runs). Applied only where the archive stores the old label,
# so an archive written since keeps its own.
RELABELLED = {"attention_textbook": ("handwritten_cuda", "mixed"),
              "attention_bf16_textbook": ("handwritten_cuda", "mixed"),
              "composed_feature_major": ("kokkos_kernels", "kokkos_mixed"),
              "composed_row_major": ("kokkos_kernels", "kokkos_mixed"),
              "partial_fusion_feature_major": ("kokkos", "kokkos_mixed"),
              "partial_fusion_row_major": ("kokkos", "kokkos_mixed")}


def legacy_implementation(family):
    return LEGACY_IMPLEMENTATION.get(family, "kokkos")


def relabelled(variant, implementation):
    """What an archived variant runs, where its stored label predates `mixed` / `kokkos_mixed`."""
    old_new = RELABELLED.get(variant.split("@")[0])
    return old_new[1] if old_new and implementation == old_new[0] else implementation


def is_handwritten(implementation):
    return implementation in HANDWRITTEN


# Two of an autotuned variant's tuned_parameters say how it chose rather than what: `candidates`, the number of
# configurations it timed at the point, and `same_as_rung`, the earlier rung whose configuration (kernel and launch
# parameters) it chose, 0 for one of its own. Archives before them carry neither.
TUNER_KEYS = ("candidates", "same_as_rung")


def tuned_choice(text):
    """(the chosen parameters without the tuner's own keys, candidates or None, same_as_rung or None) of one
    variants.tuned_parameters string ("name=value,...")."""
    pairs = [p.split("=", 1) for p in (text if isinstance(text, str) else "").split(",") if "=" in p]
    values = {k: v for k, v in pairs}

    def integer(key):
        try:
            return int(values[key])
        except (KeyError, ValueError):
            return None
    shown = ",".join(f"{k}={v}" for k, v in pairs if k not in TUNER_KEYS)
    return shown, integer("candidates"), integer("same_as_rung")


def stored_variant_table(experiment):
    """The archive's own variants table for the experiment (axes filled in for schema 4), or None when the
    archive predates it."""
    if experiment.variants.empty:
        return None
    table = experiment.variants.copy()
    table["on_device"] = table.on_device.astype(bool)
    stored = table["implementation"].fillna("") if "implementation" in table else pd.Series("", index=table.index)
    table["implementation"] = [relabelled(v, i) if i else legacy_implementation(f)
                               for v, i, f in zip(table.variant, stored, table.family)]
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
