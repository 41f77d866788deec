"""A kernel ladder's rules, once for both readers of the archives: `kstudy report`'s ladder section
(report/sections/ladder.py) and the published results (results/ladders.py, results/kokkos_costs.py).

- Classification: a variant at a point is a rung (a handwritten ladder's step, variants.rung > 0), portable (a Kokkos
  implementation: its own ladder, whatever its rung) or vendor (implementation `vendor_library`, not a rung); anything
  else (the CPU reference, another ladder's helper) is not shown.
- Vendor of a variant: the fastest vendor variant of its layout (a feature-major cuBLAS call computes another
  product), or of any layout where none shares it.
- Headline point of an operation: the one its archive stores (operation_info::headline_point, the experiment's
  `headline_points` attribute); LEGACY_HEADLINE_POINTS only for an experiment that stores none (archives written
  before them). Where the experiment did not measure it: its largest rung point (most essential flops or bytes).
- Significance (effects.py, no copy of its statistics here): a rung's step is the previous rung's time over its own
  with the bootstrap interval of that ratio; the best rung against the vendor is one comparison of a Family
  (Mann-Whitney U, Holm over the family, the ratio interval).
"""
import numpy as np

from . import archive as A
from . import effects
from .report.variants import PORTABLE

VENDOR = "vendor_library"  # variant_info::implementation
# The operations' headline points as the code declared them when archives stopped being written without them
# (operation_info::headline_point): read only for an experiment whose archive stores none.
LEGACY_HEADLINE_POINTS = {"reduce_sum": (1 << 28, 1, 1), "transpose": (8192, 8192, 1), "softmax": (65536, 4096, 1),
                          "layernorm": (65536, 4096, 1), "residual_layernorm": (65536, 4096, 1),
                          # the seed's 4096^3 SGEMM, attention at 1 x 16 heads x 4,096 tokens x 64 (where
                          # profile_attention measures its counters; every tokens count is in Compute by operation)
                          "gemm": (4096, 4096, 4096), "gemm_tf32": (4096, 4096, 4096), "gemm_bf16": (4096, 4096, 4096),
                          "attention": (16, 4096, 64), "attention_bf16": (16, 4096, 64)}


# --- classification -------------------------------------------------------------------------------------------------

def kind_of(implementation, rung):
    """'rung', 'portable', 'vendor', or None (not shown) for a variant of that implementation and rung."""
    if implementation in PORTABLE:  # the portable ladder (0: the first attempt, 1+: tuned) is not the CUDA one
        return "portable"
    if rung > 0:
        return "rung"
    if implementation == VENDOR:
        return "vendor"
    return None  # handwritten but not a rung (another ladder's helper), or the CPU reference: not shown


def is_rung(frame):
    """Rows of handwritten ladder rungs (a portable variant's rung is its own ladder's)."""
    return (frame.rung.fillna(0) > 0) & ~frame.implementation.isin(PORTABLE)


def split(measures):
    """(rungs by rung, portable device variants, vendor variants) of one point's measures (objects with variant,
    rung, implementation and on_device): the handwritten ladder and the portable one are two ladders, so a tuned
    Kokkos variant (rung 1 of the Kokkos ladder) is portable, never a CUDA rung."""
    kinds = [(m, kind_of(m.implementation, m.rung)) for m in measures]
    rungs = sorted([m for m, k in kinds if k == "rung" and m.on_device], key=lambda m: (m.rung, m.variant))
    portable = [m for m, k in kinds if k == "portable" and m.on_device]
    vendors = [m for m, k in kinds if k == "vendor"]
    return rungs, portable, vendors


def fastest(measures):
    """The one of least median, or None."""
    return min(measures, key=lambda m: m.median) if measures else None


def vendor_of(vendors, layout=None):
    """The vendor variant a variant of `layout` is compared with (objects with layout and median): the fastest of its
    layout, or of any layout where none shares it (layout None: of any layout)."""
    same = [v for v in vendors if layout is not None and v.layout == layout] or list(vendors)
    return fastest(same)


# --- the headline point -----------------------------------------------------------------------------------------------

def archived_headline(operation, experiments):
    """The operation's headline point (rows, features, depth) as the first of `experiments` that names one stores it;
    LEGACY_HEADLINE_POINTS stands in for an experiment that stores none. None where none names the operation."""
    for experiment in experiments:
        point = (experiment.headline_points or LEGACY_HEADLINE_POINTS).get(operation)
        if point is not None:
            return tuple(int(x) for x in point)
    return None


def at(frame, point):
    """The mask of `frame`'s rows at `point` (its extents, first axis first)."""
    return np.logical_and.reduce([frame[c] == v for c, v in zip(A.EXTENTS, point)])


def is_compute_bound(rows):
    """Whether the rows' operation names a compute ceiling (a GEMM or attention: judged in flops, not bytes)."""
    return bool((rows.compute_ceiling.fillna("") != "").any()) if "compute_ceiling" in rows.columns else False


def largest_point(rows, compute):
    """The point of most essential flops (compute-bound) or bytes among `rows`, the most rows on a tie."""
    largest = rows.sort_values(["essential_flops" if compute else "essential_bytes", "rows"]).iloc[-1]
    return tuple(int(largest[c]) for c in A.EXTENTS)


def headline_point(rows, operation, experiment, compute=None):
    """(rows, features, depth): the operation's archived headline point where `rows` (one experiment's rows of the
    operation) measured it, else their largest point; compute None: as is_compute_bound(rows) says."""
    wanted = archived_headline(operation, [experiment])
    if wanted is not None and at(rows, wanted).any():
        return wanted
    return largest_point(rows, is_compute_bound(rows) if compute is None else compute)


def by_rung_points(rows, by):
    """The groups `by` (e.g. archive and experiment) of one operation's rows, most rung points first (ties in key
    order): the first is where its ladder was measured, the experiment whose headline point stands."""
    counts = rows[is_rung(rows)].drop_duplicates([*by, *A.EXTENTS]).groupby(list(by)).size()
    return list(counts.sort_values(ascending=False, kind="stable").index)


# --- significance (effects.py) ----------------------------------------------------------------------------------------

def step(previous, current):
    """× previous rung: (the previous rung's median time over this rung's, low, high), the interval the seeded
    bootstrap of both medians gives (effects.ratio_interval); above 1 the step paid."""
    return effects.ratio_interval(previous, current)


def against_vendor(family, rung, vendor, label):
    """The best rung's samples against the vendor's as one comparison of `family` (effects.Family: Mann-Whitney U,
    Holm over the family, the time ratio's interval); its token stands in the table until the family is filled."""
    return family.add(rung.seconds, vendor.seconds, label)
