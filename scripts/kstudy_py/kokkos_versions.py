"""`kstudy compare A.h5 B.h5 --by kokkos`: the same study built against different Kokkos versions.

Per variant and point: the median under each Kokkos version, the ratio newest / oldest with a
Mann-Whitney U flag, and each Kokkos variant's time as a multiple of the handwritten CUDA escape path's
best time at the same point in the same archive (what Kokkos costs against CUDA, per version)."""
import sys

import numpy as np
import pandas as pd

from . import archive as A

POINT = ["experiment", "rows", "features", "timer", "memory_kind", "block_size", "direction", "size_bytes"]
ESCAPE_FAMILY = "fused_cuda"


def version_key(text):
    return tuple(int(p) for p in text.split(".") if p.isdigit())


def kokkos_version(archive):
    return archive.environment.get("kokkos_version", "unknown")


def is_escape_path(variant):
    # The handwritten CUDA variants' family (variant_info::implementation) is fused_cuda.
    return A.family(variant).startswith(ESCAPE_FAMILY)


def medians(archive, accepted):
    s = accepted(archive)
    s = s[s.rows > 0]
    if s.empty:
        return s, {}
    groups = {k: g.seconds.to_numpy() for k, g in s.groupby(POINT + ["variant"])}
    return s, groups


def escape_best(groups):
    """Best median of the CUDA escape path per point."""
    best = {}
    for key, values in groups.items():
        if is_escape_path(key[-1]):
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
        _, groups = medians(by_version[v][0], accepted)
        per_version[v] = (groups, escape_best(groups))
    oldest, newest = versions[0], versions[-1]
    common = set.intersection(*(set(per_version[v][0]) for v in versions))
    rows = []
    for key in sorted(common):
        point, variant = key[:-1], key[-1]
        row = dict(zip(POINT, point), variant=variant)
        for v in versions:
            groups, best = per_version[v]
            m = float(np.median(groups[key]))
            row[f"median[{v}]"] = m
            row[f"x_cuda[{v}]"] = m / best[point] if point in best and not is_escape_path(variant) else np.nan
        a, b = per_version[oldest][0][key], per_version[newest][0][key]
        row["ratio_new_over_old"] = float(np.median(b)) / float(np.median(a))
        row["p_value"], row["significance"] = significance(a, b)
        rows.append(row)
    return pd.DataFrame(rows), versions
