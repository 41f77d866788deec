"""`kstudy compare A.h5 B.h5 --by kokkos`: the same study built against different Kokkos versions.

Per variant and point: the median under each Kokkos version, the ratio newest / oldest with a
Mann-Whitney U flag, and each Kokkos variant's time as a multiple of the best handwritten CUDA (escape path or
vendor library) time at the same point of the same operation in the same archive (what Kokkos costs against
CUDA, per version). Any operation: the variants table says each variant's operation and family."""
import sys

import numpy as np
import pandas as pd

from . import archive as A
from .effects import Family
from .report.variants import HANDWRITTEN, is_handwritten

# A point compared across Kokkos versions: the archive's point key (GEMM's k, the cache mode among it) less the
# layout (x_cuda compares a variant with the best handwritten one at the point, whatever their layouts), its
# operation and timer, and the size that tells calibration points apart (size_bytes: compare.accepted's).
POINT = ["experiment", "operation", *A.point_key("samples", without=("layout",)), "timer", "size_bytes"]
ESCAPE_FAMILY = "/".join(HANDWRITTEN)  # how the table names them (variant implementations)


def version_key(text):
    return tuple(int(p) for p in text.split(".") if p.isdigit())


def kokkos_version(archive):
    return archive.environment.get("kokkos_version", "unknown")


def medians(archive, accepted):
    """Samples per (point, variant), and the variants that are handwritten CUDA or a vendor library."""
    s = accepted(archive)
    s = s[s.rows > 0]
    if s.empty:
        return {}, set()
    groups = {k: g.seconds.to_numpy() for k, g in s.groupby(POINT + ["variant"])}
    escapes = set(s[s.implementation.map(is_handwritten)].variant)
    return groups, escapes


def escape_best(groups, escapes):
    """Best median of the handwritten CUDA variants per point."""
    best = {}
    for key, values in groups.items():
        if key[-1] in escapes:
            m = float(np.median(values))
            best[key[:-1]] = min(best.get(key[:-1], np.inf), m)
    return best


def compare(archives, accepted, significance):
    """One row per (point, variant) measured under every Kokkos version, oldest version first."""
    by_version = {}
    for a in archives:
        by_version.setdefault(kokkos_version(a), []).append(a)
    versions = sorted(by_version, key=version_key)
    if len(versions) < 2:
        return None, versions
    per_version = {}
    for v in versions:
        if len(by_version[v]) > 1:
            print(f"compare --by kokkos: {len(by_version[v])} archives use Kokkos {v}; the first ("
                  f"{by_version[v][0].label}) stands for it", file=sys.stderr)
        groups, escapes = medians(by_version[v][0], accepted)
        per_version[v] = (groups, escape_best(groups, escapes), escapes)
    oldest, newest = versions[0], versions[-1]
    common = set.intersection(*(set(per_version[v][0]) for v in versions))
    rows, family = [], Family()  # every common point, Holm-adjusted together (effects.py)
    for key in sorted(common):
        point, variant = key[:-1], key[-1]
        row = dict(zip(POINT, point), variant=variant)
        for v in versions:
            groups, best, escapes = per_version[v]
            m = float(np.median(groups[key]))
            row[f"median[{v}]"] = m
            row[f"x_cuda[{v}]"] = m / best[point] if point in best and variant not in escapes else np.nan
        a, b = per_version[oldest][0][key], per_version[newest][0][key]
        row["ratio_new_over_old"] = float(np.median(b)) / float(np.median(a))
        c = family.add(b, a)
        row["ratio_lo"], row["ratio_hi"], row["p_value"] = c.low, c.high, c.p
        rows.append((row, c))
    family.resolve()
    for row, c in rows:
        row["p_holm"] = c.p_holm
        row["significance"] = (c.flag if c.flag == "too few samples" else
                               "significant" if c.verdict in ("beats", "loses") else "not significant")
    return pd.DataFrame([row for row, _ in rows]), versions
