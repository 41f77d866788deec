"""`kstudy compare BASE NEW --gate 5%`: a FASTER / SLOWER / SAME / UNCERTAIN verdict per point, from the samples.

A verdict needs two things to agree: a statistical test that the two sample sets differ (Mann-Whitney U, two-sided,
level `alpha`) and a practical one that the change matters (the median ratio NEW/BASE beyond the gate). Timing
samples of one build differ between runs by more than their within-run spread suggests (clock states, other
tenants), so significance alone calls identical builds faster or slower too often; a ratio alone calls noise a
change. Each median also gets an approximate 95% interval, median +- 1.57 IQR / sqrt(n) (the notch of McGill,
Tukey and Larsen 1978: robust, no normality assumed), and the ratio the interval those two bound. Samples of one
process agree with each other better than two processes of one build agree (a busy neighbour, a frequency
state held for a whole run), so where an archive has several replications (fresh processes) with at least
REPLICATION_SAMPLES samples each, the spread of their medians (largest / smallest - 1) widens the ratio interval
by that factor on each side: a shift between runs no larger than the archive's own run-to-run shift is not a
change. With one replication the interval has no run-to-run term: a single run says nothing about it.


  UNCERTAIN  fewer than `min_samples` samples on either side, or the ratio interval is too wide to say either way
             (a significant change whose interval reaches 1, or no change whose interval reaches past the gate:
             the IQRs are too wide for the gate at this many samples)
  SLOWER     significant, ratio > 1 + gate and the ratio interval entirely above 1
  FASTER     significant, ratio < 1 - gate and the ratio interval entirely below 1
  SAME       not significant or within the gate, and the ratio interval within [1 - gate, 1 + gate]
"""
import json
import math
import sys

import numpy as np

from . import archive as A
from .effects import holm

ALPHA = 0.01
MIN_SAMPLES = 5
NOTCH = 1.57  # McGill et al.: median +- 1.57 IQR / sqrt(n) is about a 95% interval for the median
REPLICATION_SAMPLES = 3  # fewer samples in a replication: its median is too rough to compare with another's
VERDICTS = ("SLOWER", "FASTER", "UNCERTAIN", "SAME")
EXIT_SLOWER = 4


def parse_gate(text):
    """'5%' -> 0.05, '0.05' -> 0.05; anything else (a bare 5, a negative, 100% or more) is refused."""
    value = str(text).strip()
    try:
        gate = float(value[:-1]) / 100 if value.endswith("%") else float(value)
    except ValueError:
        raise ValueError(f"--gate {text!r} is not a number (write 5% or 0.05)")
    if not value.endswith("%") and gate >= 1:
        raise ValueError(f"--gate {text!r} is ambiguous: write {value}% for a percentage, or a fraction below 1")
    if not (0 < gate < 1) or not math.isfinite(gate):
        raise ValueError(f"--gate {text!r} must lie strictly between 0% and 100%")
    return gate


def median_interval(x):
    """(median, q1, q3, lo, hi): lo..hi the notch interval of the median."""
    q1, median, q3 = np.percentile(x, [25, 50, 75])
    half = NOTCH * (q3 - q1) / math.sqrt(len(x))
    return float(median), float(q1), float(q3), max(0.0, float(median - half)), float(median + half)


def replication_spread(replications):
    """Largest over smallest median of the replications with REPLICATION_SAMPLES samples or more, minus 1; 0 with
    fewer than two such replications."""
    medians = [float(np.median(r)) for r in replications or () if len(r) >= REPLICATION_SAMPLES]
    medians = [m for m in medians if m > 0]
    return max(medians) / min(medians) - 1 if len(medians) >= 2 else 0.0


def verdict(base, new, gate, alpha=ALPHA, min_samples=MIN_SAMPLES, base_replications=None, new_replications=None):
    """The verdict on two sample arrays (seconds) and the numbers behind it, as a dict; *_replications: the
    same samples split by replication (fresh process), for the run-to-run term of the interval."""
    base, new = np.asarray(base, dtype=float), np.asarray(new, dtype=float)
    spread_base, spread_new = replication_spread(base_replications), replication_spread(new_replications)
    out = dict(n_base=len(base), n_new=len(new), median_base=np.nan, median_new=np.nan, ratio=np.nan,
               ratio_lo=np.nan, ratio_hi=np.nan, iqr_base=np.nan, iqr_new=np.nan, runs_base=spread_base,
               runs_new=spread_new, p_value=np.nan)
    if len(base) == 0 or len(new) == 0:
        return dict(out, verdict="UNCERTAIN", reason="no samples on one side")
    mb, q1b, q3b, lob, hib = median_interval(base)
    mn, q1n, q3n, lon, hin = median_interval(new)
    out.update(median_base=mb, median_new=mn, iqr_base=(q3b - q1b) / mb if mb > 0 else np.nan,
               iqr_new=(q3n - q1n) / mn if mn > 0 else np.nan)
    if mb <= 0:
        return dict(out, verdict="UNCERTAIN", reason="base median is not positive")
    ratio = mn / mb
    runs = (1 + spread_base) * (1 + spread_new)
    lo = lon / hib / runs if hib > 0 else 0.0
    hi = hin / lob * runs if lob > 0 else math.inf
    out.update(ratio=ratio, ratio_lo=lo, ratio_hi=hi)
    if len(base) < min_samples or len(new) < min_samples:
        return dict(out, verdict="UNCERTAIN", reason=f"too few samples (under {min_samples} on a side)")
    if np.array_equal(np.sort(base), np.sort(new)):
        p = 1.0
    else:
        from scipy.stats import mannwhitneyu
        p = float(mannwhitneyu(base, new, alternative="two-sided").pvalue)
    out["p_value"] = p
    significant = p < alpha
    if significant and ratio > 1 + gate and lo > 1:
        return dict(out, verdict="SLOWER", reason=f"median +{(ratio - 1) * 100:.1f}%, beyond the gate")
    if significant and ratio < 1 - gate and hi < 1:
        return dict(out, verdict="FASTER", reason=f"median {(ratio - 1) * 100:.1f}%, beyond the gate")
    if (not significant or abs(ratio - 1) <= gate) and lo >= 1 - gate and hi <= 1 + gate:
        return dict(out, verdict="SAME", reason="not significant" if not significant else "within the gate")
    why = ("replications disagree by " + f"{max(spread_base, spread_new) * 100:.0f}%" if runs - 1 > gate / 2 else
           "IQR too wide for the gate")
    if significant and abs(ratio - 1) > gate:
        return dict(out, verdict="UNCERTAIN", reason=f"shift past the gate, but {why}: ratio could be "
                                                     f"{lo:.3f}..{hi:.3f}")
    return dict(out, verdict="UNCERTAIN", reason=f"{why}: ratio could be {lo:.3f}..{hi:.3f}")


def point_label(key):
    """A readable point from the compare key: ROWSxFEATURES[xDEPTH], then what else tells points apart."""
    k = dict(key)
    if int(k["rows"]) == 0:
        label = f"{int(k['size_bytes'])}B" if int(k["size_bytes"]) else "-"
    else:
        label = f"{int(k['rows'])}x{int(k['features'])}"
        if int(k.get("depth", 1)) > 1:
            label += f"x{int(k['depth'])}"
    if int(k["block_size"]) > 0:
        label += f"/b{int(k['block_size'])}"
    if k["memory_kind"] in ("pinned", "pageable"):
        label += f"/{k['memory_kind']}"
    if k["direction"]:
        label += f"/{k['direction']}"
    # Warm caches are what every run before schema 9 timed: only another mode is named (a label history stores).
    if k.get("cache", "warm") != "warm":
        label += f"/{k['cache']}"
    return label


def verdicts(base, new, keys, accepted, gate, alpha, min_samples):
    """One verdict row per point both archives measured, sorted worst first; plus counts of unaligned points."""
    sa, sb = accepted(base), accepted(new)
    ga = {k: g for k, g in sa.groupby(keys)}
    gb = {k: g for k, g in sb.groupby(keys)}
    rows = []
    for key in sorted(set(ga) & set(gb)):
        named = dict(zip(keys, key))
        a, b = ga[key], gb[key]
        v = verdict(a.seconds.to_numpy(), b.seconds.to_numpy(), gate, alpha, min_samples,
                    [g.seconds.to_numpy() for _, g in a.groupby("replication")],
                    [g.seconds.to_numpy() for _, g in b.groupby("replication")])
        rows.append(dict(experiment=named["experiment"], variant=named["variant"], point=point_label(named),
                         timer=named["timer"], **v))
    # Holm over the aligned points, shown beside each verdict (the verdict itself keeps its own rule: the gate
    # also needs the ratio beyond the gate and its interval past 1, which a chance p alone does not pass).
    for r, p_holm in zip(rows, holm([r["p_value"] for r in rows])):
        r["p_holm"] = float(p_holm)
    order = {v: i for i, v in enumerate(VERDICTS)}
    rows.sort(key=lambda r: (order[r["verdict"]], r["experiment"], r["variant"], r["point"], r["timer"]))
    return rows, len(set(ga) - set(gb)), len(set(gb) - set(ga))


def summary_line(rows, gate, alpha):
    counts = {v: sum(r["verdict"] == v for r in rows) for v in VERDICTS}
    worst = max((r for r in rows if r["verdict"] == "SLOWER"), key=lambda r: r["ratio"], default=None)
    text = (f"gate {gate * 100:g}%, alpha {alpha:g}: {len(rows)} points: " +
            ", ".join(f"{counts[v]} {v}" for v in ("SLOWER", "FASTER", "SAME", "UNCERTAIN")))
    if worst:
        text += f"; worst {worst['variant']} {worst['point']} {worst['timer']} x{worst['ratio']:.3f}"
    return ("REGRESSION: " if counts["SLOWER"] else "ok: ") + text, counts


def finite(v):
    return None if isinstance(v, float) and not math.isfinite(v) else v


def main(args, base, new, keys, accepted):
    try:
        gate = parse_gate(args.gate)
    except ValueError as error:
        print(f"kstudy compare: {error}", file=sys.stderr)
        return 2
    if not (0 < args.alpha < 1):
        print(f"kstudy compare: --alpha {args.alpha:g} must lie strictly between 0 and 1", file=sys.stderr)
        return 2
    if args.min_samples < 2:
        print(f"kstudy compare: --min-samples {args.min_samples} must be at least 2", file=sys.stderr)
        return 2
    rows, only_base, only_new = verdicts(base, new, keys, accepted, gate, args.alpha, args.min_samples)
    print(f"compare: {base.label} vs {new.label}: {len(rows)} aligned points, {only_base} only in {base.label}, "
          f"{only_new} only in {new.label}", file=sys.stderr)
    if not rows:
        print("kstudy compare: no aligned point (same experiment, variant, point, timer)",
              file=sys.stderr)
        return 1
    line, counts = summary_line(rows, gate, args.alpha)
    print(f"Verdict per point, {base.label} (base) -> {new.label} (new): ratio = median new / median base; "
          f"Mann-Whitney U two-sided at alpha {args.alpha:g} and a {gate * 100:g}% gate on the ratio; interval = "
          f"from the medians' notches (1.57 IQR/sqrt n), widened by the spread of the replications' medians "
          f"(runs); IQR = relative to the median; p_Holm = p Holm-adjusted over the {len(rows)} points (shown; the "
          f"verdict's test is p against alpha); under {args.min_samples} samples a side: UNCERTAIN.")
    header = ["verdict", "experiment", "variant", "point", "timer", "n", "median base", "median new", "ratio",
              "interval", "IQR base", "IQR new", "runs base", "runs new", "p", "p_Holm", "reason"]
    table = [[r["verdict"], r["experiment"], r["variant"], r["point"], r["timer"], f"{r['n_base']}/{r['n_new']}",
              A.fmt_seconds(r["median_base"]), A.fmt_seconds(r["median_new"]),
              "" if not math.isfinite(r["ratio"]) else f"{r['ratio']:.3f}",
              "" if not math.isfinite(r["ratio_lo"]) else f"{r['ratio_lo']:.3f}..{r['ratio_hi']:.3f}",
              "" if not math.isfinite(r["iqr_base"]) else f"{r['iqr_base'] * 100:.1f}%",
              "" if not math.isfinite(r["iqr_new"]) else f"{r['iqr_new'] * 100:.1f}%",
              f"{r['runs_base'] * 100:.1f}%", f"{r['runs_new'] * 100:.1f}%",
              "" if not math.isfinite(r["p_value"]) else f"{r['p_value']:.2g}",
              "" if not math.isfinite(r["p_holm"]) else f"{r['p_holm']:.2g}", r["reason"]] for r in rows]
    widths = [max(len(str(c)) for c in col) for col in zip(header, *table)]
    for line_cells in [header] + table:
        print("  ".join(str(c).ljust(w) for c, w in zip(line_cells, widths)).rstrip())
    print(line)
    if args.gate_json:
        document = dict(base=str(base.path), new=str(new.path), gate=gate, alpha=args.alpha,
                        min_samples=args.min_samples, counts=counts, regression=counts["SLOWER"] > 0,
                        summary=line, verdicts=[{k: finite(v) for k, v in r.items()} for r in rows])
        try:
            with open(args.gate_json, "w") as f:
                json.dump(document, f, indent=1)
        except OSError as error:
            print(f"kstudy compare: cannot write --gate-json {args.gate_json}: {error.strerror}", file=sys.stderr)
            return 2
        print(f"compare: wrote {args.gate_json}", file=sys.stderr)
    return EXIT_SLOWER if counts["SLOWER"] else 0
