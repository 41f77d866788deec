"""`kstudy compare A.h5 B.h5 [...]`: medians, ratio B/A with its 95% interval (seeded bootstrap of the medians),
a Mann-Whitney U p-value and its Holm adjustment over every aligned point of the pair, and a flag per point
(effects.py: significant only where the Holm-adjusted p is under ALPHA and the ratio's interval excludes 1);
`--by backend|machine`: efficiency per platform and the Pennycook performance-portability metric; with --by machine,
per pair of archives from two GPUs, whether each point's conclusion carries over (carry_over.py, the function the
carries_over block of docs/results.md calls);
`--by kokkos`: one study built against several Kokkos versions (kokkos_versions.py);
`--by device`: device-to-device spread of the same variant at the same point (devices.py)."""
import sys

import numpy as np
import pandas as pd

from . import archive as A
from . import kokkos_versions
from .effects import ALPHA, MIN_SAMPLES, Family, significance  # noqa: F401  (significance: the per-point test)
from .report.variants import variant_table

# What tells two points apart: the archive's point key (kstudy schema's point_key), per experiment, variant and
# timer, and a calibration point's size. Spelled by hand, it lost `depth` (until issue #44: attention at head_dim 64
# pooled with 128, GEMMs of one m x n) and `cache` (until issue #42: a sweep's cold- and warm-cache samples pooled).
KEYS = ["experiment", "variant", *A.point_key("samples"), "timer", "size_bytes"]
EFFICIENCY = ("efficiency eff = t_best / t_variant: t_best is the fastest median of any variant observed on that "
              "platform at that point, t_variant the variant family's median there (application efficiency); "
              "PP = harmonic mean of eff over the platforms {platforms} (Pennycook et al.), 0 where the family is "
              "missing on any of them")


def check(archives):
    """Problems that make a comparison meaningless; returns the list (empty: fine)."""
    problems = []
    versions = {a.label: a.schema_version for a in archives}
    if len({A.SAMPLES_SCHEMA.get(v, v) for v in versions.values()}) > 1:
        problems.append("schema versions differ: " + ", ".join(f"{k} has {v!r}" for k, v in versions.items()))
    names = sorted({n for a in archives for n in a.experiments})
    for name in names:
        prints = {a.label: a.experiments[name].fingerprint for a in archives if name in a.experiments}
        if len(set(prints.values())) > 1:
            problems.append(f"experiment '{name}' was defined differently (fingerprints "
                            + ", ".join(f"{k}: {v}" for k, v in prints.items()) + ")")
    return problems


def variant_identities(archive):
    """(experiment, variant) -> operation, family and implementation, as the archive's variants table says (the
    legacy table for schema 1 to 3); what lets a comparison keep operations apart without reading variant names."""
    table = variant_table([archive])
    return table[["experiment", "variant", "operation", "family", "implementation"]].drop_duplicates(
        ["experiment", "variant"])


def accepted(archive):
    frames = [e.accepted() for e in archive.experiments.values()]
    frames = [f for f in frames if not f.empty]
    if not frames:
        return pd.DataFrame(columns=KEYS + ["seconds", "operation", "family", "implementation"])
    s = pd.concat(frames, ignore_index=True)
    # Calibration points (transfers, probes) have no shape: their size is what tells them apart.
    s["size_bytes"] = np.where(s.rows == 0, s.bytes, 0)
    # Probes and calibrations implement no operation: "" keeps them in every grouping.
    s = s.merge(variant_identities(archive), on=["experiment", "variant"], how="left")
    s["operation"] = s.operation.fillna("")
    s["family"] = s.family.fillna("")
    s["implementation"] = s.implementation.fillna("")
    return s


def pairwise(archives):
    base = archives[0]
    sa = accepted(base)
    ga = {k: g.seconds.to_numpy() for k, g in sa.groupby(KEYS)}
    rows = []
    for other in archives[1:]:
        sb = accepted(other)
        gb = {k: g.seconds.to_numpy() for k, g in sb.groupby(KEYS)}
        only_a = len(set(ga) - set(gb))
        only_b = len(set(gb) - set(ga))
        # The family: every aligned point of this pair of archives, Holm-adjusted together.
        family = Family()
        for key in sorted(set(ga) & set(gb)):
            a, b = ga[key], gb[key]
            c = family.add(b, a)
            ma, mb = float(np.median(a)), float(np.median(b))
            rows.append(dict(zip(KEYS, key), A=base.label, B=other.label, n_A=len(a), n_B=len(b), median_A=ma,
                             median_B=mb, ratio_B_over_A=mb / ma if ma > 0 else np.nan, ratio_lo=c.low,
                             ratio_hi=c.high, p_value=c.p, p_holm=np.nan, significance=c.flag, comparison=c))
        family.resolve()
        for row in rows[len(rows) - len(family):]:
            c = row.pop("comparison")
            row["p_holm"] = c.p_holm
            if c.flag != "too few samples":
                row["significance"] = "significant" if c.verdict in ("beats", "loses") else "not significant"
        print(f"compare: {base.label} vs {other.label}: {len(set(ga) & set(gb))} aligned points, "
              f"{only_a} only in {base.label}, {only_b} only in {other.label}", file=sys.stderr)
    return pd.DataFrame(rows)


def regimes(s):
    """Timing regimes that are comparable across platforms. Resident: a host variant's host_wall, a device
    variant's resident_wall. Host-in/host-out (per memory kind): a device variant's one_shot, a host
    variant's host_wall (its input already is where it computes)."""
    out = []
    host = s[s.timer == "host_wall"]
    out.append(pd.concat([host, s[s.timer == "resident_wall"]]).assign(regime="resident"))
    for memory in ("pinned", "pageable"):
        one = s[(s.timer == "one_shot") & (s.memory_kind == memory)]
        if len(one):
            out.append(pd.concat([host, one]).assign(regime=f"host-in/host-out ({memory})"))
    return pd.concat(out, ignore_index=True)


def portability(archives, by):
    frames = []
    for a in archives:
        s = accepted(a)
        s = s[(s.rows > 0) & (s.variant.str.contains("@"))]
        if s.empty:
            continue
        s = s.assign(family=s.variant.map(A.family))  # the variant across backends: its id without @backend
        s = s.assign(platform=s.variant.map(A.backend) if by == "backend" else f"{a.label} ({a.platform()})",
                     archive=a.label)
        frames.append(s)
    if not frames:
        return None, []
    s = regimes(pd.concat(frames, ignore_index=True))
    # The operation is part of the point: a stream experiment times copy, triad, dot, ... at one size. Of the point
    # key, the regime stands for the host memory kind (a host variant's and a device variant's differ), a family's
    # layout is its own (in its name) and copies (direction) are not compared (rows > 0).
    point = ["experiment", "operation", *A.point_key("samples", without=("layout", "memory_kind", "direction")),
             "regime"]
    if by == "backend":
        point = ["archive"] + point
    med = s.groupby(point + ["platform", "family", "variant"]).seconds.median().reset_index()
    # A family on a platform: its best backend there (only one when by=backend).
    fam = med.groupby(point + ["platform", "family"]).seconds.min().rename("t").reset_index()
    best = fam.groupby(point + ["platform"]).t.min().rename("t_best").reset_index()
    fam = fam.merge(best, on=point + ["platform"])
    fam["eff"] = fam.t_best / fam.t
    platforms = sorted(fam.platform.unique())
    out = []
    dropped = 0
    for key, g in fam.groupby(point):
        if set(g.platform) != set(platforms):
            dropped += 1
            continue
        for f, h in g.groupby("family"):
            effs = {p: float(h[h.platform == p].eff.iloc[0]) if p in set(h.platform) else 0.0 for p in platforms}
            pp = 0.0 if min(effs.values()) == 0 else len(effs) / sum(1 / e for e in effs.values())
            row = dict(zip(point, key), family=f)
            row.update({f"eff[{p}]": e for p, e in effs.items()})
            row["PP"] = pp
            out.append(row)
    if dropped:
        print(f"compare: {dropped} point(s) skipped: not every platform has data there", file=sys.stderr)
    return pd.DataFrame(out), platforms


def show(df, columns):
    with pd.option_context("display.width", 250, "display.max_rows", 100000, "display.max_columns", 50,
                           "display.max_colwidth", 60):
        print(df[columns].to_string(index=False))


def show_kokkos_versions(archives, out):
    df, versions = kokkos_versions.compare(archives, accepted, significance)
    if df is None or df.empty:
        print("kstudy compare --by kokkos: needs archives of at least two Kokkos versions with common points "
              f"(found: {', '.join(versions) or 'none'})", file=sys.stderr)
        return 1
    if out:
        df.to_csv(out, index=False, float_format="%.9g")
        print(f"compare: wrote {out}", file=sys.stderr)
    print(f"Kokkos {', '.join(versions)}: median per version; ratio = median under {versions[-1]} / median under "
          f"{versions[0]}, ratio_lo..ratio_hi its 95% interval (seeded bootstrap of both medians); Mann-Whitney U "
          f"two-sided, p_holm Holm-adjusted over the {len(df)} points, significant if p_holm < {ALPHA} and the "
          "interval excludes 1; x_cuda = the variant's median over "
          f"the best {kokkos_versions.ESCAPE_FAMILY} (handwritten CUDA) median at the same point in the same archive.")
    shown = df.copy()
    for c in shown.columns:
        if c.startswith("median["):
            shown[c] = shown[c].map(A.fmt_seconds)
        elif c.startswith("x_cuda[") or c in ("ratio_new_over_old", "ratio_lo", "ratio_hi"):
            shown[c] = shown[c].map(lambda v: "" if not np.isfinite(v) else f"{v:.3f}")
    for c in ("p_value", "p_holm"):
        shown[c] = shown[c].map(lambda v: "" if not np.isfinite(v) else f"{v:.3g}")
    varying = [k for k in kokkos_versions.POINT if shown[k].astype(str).nunique() > 1 or k == "experiment"]
    show(shown, varying + [c for c in shown.columns if c not in kokkos_versions.POINT])
    return 0


def show_carry_over(archives):
    """`--by machine`: for every pair of archives from two different GPUs (the first named first), whether each
    point's ranking and ratios carry over (carry_over.compare). Returns how many points were judged."""
    from . import carry_over
    from .results import ResultsError
    judged = 0
    for i, first in enumerate(archives):
        for second in archives[i + 1:]:
            names = (first.environment.get("gpu_name"), second.environment.get("gpu_name"))
            if not all(names) or names[0] == names[1]:
                continue
            try:
                pair = carry_over.compare(str(first.path), str(second.path))
            except ResultsError as error:
                print(f"kstudy compare: {error}", file=sys.stderr)
                continue
            if not pair.points:
                continue
            judged += len(pair.points)
            a, b = pair.card_a.label, pair.card_b.label
            print(f"\nWhat carries over, {a} -> {b}: {first.label} against {second.label}")
            for line in carry_over.header_lines(pair):
                print(line.replace("**", "").replace("`", ""))
            print("Per point: holds / ranking holds, ratio moves (a ratio to the reference with disjoint intervals "
                  "on the two cards) / does not carry over (a pair's order resolved both ways); "
                  f"{b} speed-up = median time on the {a} / on the {b} (scripts/kstudy_py/carry_over.py).")
            rows = []
            for p in pair.points:
                row = {"operation": p.operation, **carry_over.summary_row(p, pair)}
                rows.append({k: str(v).replace("`", "") for k, v in row.items()})
            df = pd.DataFrame(rows)
            show(df, [c for c in df.columns if c != "reason"])
            print("\nReasons (from the archives' roofs, L2 sizes and throttle records):")
            for row in rows:
                print(f"  {row['operation']} at {row['point']}: {row['reason']}")
            moved = [{"operation": p.operation, **row} for p in pair.points for row in carry_over.moved_rows(p, pair)]
            if moved:
                print("\nThe ratios that moved and the pairs that reversed:")
                df = pd.DataFrame([{k: str(v).replace("`", "") for k, v in row.items()} for row in moved])
                show(df, list(df.columns))
    return judged


def main(args):
    archives = A.load(args.archives, check_schema=False)
    if len(archives) < 2 and not args.by:
        print("kstudy compare: needs at least two archives (or --by backend with one)", file=sys.stderr)
        return 2
    if getattr(args, "gate", None) is not None and (len(archives) != 2 or args.by):
        print("kstudy compare: --gate compares exactly two archives, BASE NEW (and takes no --by)", file=sys.stderr)
        return 2
    problems = check(archives)
    if problems:
        for p in problems:
            print(f"kstudy compare: {'warning' if args.force else 'refusing'}: {p}", file=sys.stderr)
        if not args.force:
            print("kstudy compare: these archives do not measure the same thing; pass --force to compare anyway",
                  file=sys.stderr)
            return 2
    if getattr(args, "gate", None) is not None:
        from . import gate
        return gate.main(args, archives[0], archives[1], KEYS, accepted)
    if args.by == "kokkos":
        return show_kokkos_versions(archives, args.out)
    if args.by == "device":
        from . import devices
        return devices.main(archives, KEYS, args.out, show)
    if args.by:
        df, platforms = portability(archives, args.by)
        judged = show_carry_over(archives) if args.by == "machine" else 0
        if df is None or df.empty:
            if judged:
                return 0
            print(f"kstudy compare: no point is measured on every {args.by} ({', '.join(platforms) or 'none found'})",
                  file=sys.stderr)
            return 1
        if judged:
            print("\nPerformance portability:")
        if args.out:
            df.to_csv(args.out, index=False, float_format="%.9g")
            print(f"compare: wrote {args.out}", file=sys.stderr)
        print(EFFICIENCY.format(platforms=", ".join(platforms)))
        print("regimes: resident = a host variant's host_wall or a device variant's resident_wall; host-in/host-out "
              "(memory kind) = a device variant's one_shot from that host memory or a host variant's host_wall; "
              "families: variant name without @backend"
              + ("; on each machine a family takes its fastest backend" if args.by == "machine" else ""))
        print()
        order = [c for c in ("archive", "experiment", "operation", "regime", *A.EXTENTS) if c in df.columns]
        df = df.sort_values(order + ["PP"], ascending=[True] * len(order) + [False])
        cols = [c for c in df.columns]
        shown = df.copy()
        for c in cols:
            if c.startswith("eff[") or c == "PP":
                shown[c] = shown[c].map(lambda v: f"{v:.3f}")
        show(shown, cols)
        return 0
    df = pairwise(archives)
    if df.empty:
        print("kstudy compare: no aligned point (same experiment, variant, point, timer)",
              file=sys.stderr)
        return 1
    if args.out:
        df.to_csv(args.out, index=False, float_format="%.9g")
        print(f"compare: wrote {args.out}", file=sys.stderr)
    shown = df.copy()
    shown["median_A"] = shown.median_A.map(A.fmt_seconds)
    shown["median_B"] = shown.median_B.map(A.fmt_seconds)
    shown["ratio_B_over_A"] = shown.ratio_B_over_A.map(lambda v: f"{v:.3f}")
    for c in ("ratio_lo", "ratio_hi"):
        shown[c] = shown[c].map(lambda v: "" if not np.isfinite(v) else f"{v:.3f}")
    for c in ("p_value", "p_holm"):
        shown[c] = shown[c].map(lambda v: "" if not np.isfinite(v) else f"{v:.3g}")
    print(f"Aligned on (experiment, variant, {', '.join(A.point_key('samples'))}, timer; size for calibration "
          "points). Ratio = median B / median A, ratio_lo..ratio_hi its 95% interval (percentile "
          "bootstrap of both medians, seeded); p_value: Mann-Whitney U two-sided; p_holm: Holm-adjusted over the "
          f"aligned points of each pair; significant if p_holm < {ALPHA} and the interval excludes 1; "
          f"under {MIN_SAMPLES} samples per side: too few samples.")
    show(shown, ["A", "B"] + [k for k in KEYS if shown[k].astype(str).nunique() > 1 or k in ("experiment", "variant")]
         + ["n_A", "n_B", "median_A", "median_B", "ratio_B_over_A", "ratio_lo", "ratio_hi", "p_value", "p_holm",
            "significance"])
    return 0
