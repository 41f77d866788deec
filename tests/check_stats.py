#!/usr/bin/python3
"""The statistics behind every verdict (scripts/kstudy_py/effects.py), against known values: Holm's adjustment
against hand-computed ones, the Mann-Whitney p-value against scipy.stats.mannwhitneyu, the ratio-of-medians interval
against scipy.stats.bootstrap (percentile, the same seeded generator: the same interval to the last bit), the
verdict rules (a significant test whose interval reaches 1 claims nothing), and `kstudy compare`'s Holm column and
ratio interval on committed archives, plain, --by kokkos and --gate (whose verdicts and exit codes stay its own),
through scripts/kstudy_report.py: no kstudy binary needed.

    tests/check_stats.py REPOSITORY
Exit 77 (ctest: skipped) when this python lacks h5py, pandas, numpy or scipy.
"""
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from check_support import Cases, repository, require

_, np, pd, stats = require("h5py", "numpy", "pandas", "scipy.stats")  # h5py: the archive reader needs it
REPO = repository()
sys.path.insert(0, str(REPO / "scripts"))
from kstudy_py import effects as E  # noqa: E402

cases = Cases()
check = cases.check


# Holm, by hand: p = 0.01, 0.04, 0.03, 0.005 (m = 4). Sorted: 0.005 * 4 = 0.02, 0.01 * 3 = 0.03, 0.03 * 2 = 0.06,
# 0.04 * 1 = 0.04 -> 0.06 (never below the step before). A NaN is no test and does not count in m.
check(np.allclose(E.holm([0.01, 0.04, 0.03, 0.005]), [0.03, 0.06, 0.06, 0.02]), "Holm, four p-values by hand")
got = E.holm([0.01, np.nan, 0.04, 0.03, 0.005])
check(np.isnan(got[1]) and np.allclose(np.delete(got, 1), [0.03, 0.06, 0.06, 0.02]), "Holm ignores a NaN")
# 0.02, 0.03, 0.04: 3 * 0.02 = 0.06, 2 * 0.03 = 0.06, 1 * 0.04 = 0.04 -> 0.06 (monotone): all three 0.06.
check(np.allclose(E.holm([0.02, 0.03, 0.04]), [0.06, 0.06, 0.06]), "Holm made monotone: 0.06 for all three")
check(np.allclose(E.holm([0.2, 0.5, 0.9]), [0.6, 1.0, 1.0]), "Holm: 3 * 0.2, then 2 * 0.5 = 1 and 0.9 raised to 1")
check(np.allclose(E.holm([0.6, 0.7]), [1.0, 1.0]), "Holm is at most 1")
check(np.allclose(E.holm([0.04]), [0.04]), "a family of one is not adjusted")
# Ties between p-values: 0.01, 0.01, 0.02 -> 0.03, 0.03, 0.03 (3 * 0.01, max(2 * 0.01, 0.03), max(1 * 0.02, 0.03)).
check(np.allclose(E.holm([0.01, 0.01, 0.02]), [0.03, 0.03, 0.03]), "Holm with tied p-values")
# The 21 tests at alpha 0.05 that pass with p up to 0.036 are not 21 after the correction.
p21 = np.linspace(0.0001, 0.036, 21)
check((p21 < 0.05).sum() == 21 and (E.holm(p21) < 0.05).sum() < 21, "Holm removes what m tests find by chance")

rng = np.random.default_rng(7)
a = rng.lognormal(0.0, 0.1, 31)
b = rng.lognormal(0.08, 0.1, 27)
p, flag = E.significance(a, b)
check(np.isclose(p, stats.mannwhitneyu(a, b, alternative="two-sided").pvalue, rtol=0, atol=0),
      f"Mann-Whitney p = scipy's ({p:.3g})")
check(E.significance(a[:4], b)[1] == "too few samples", "under 5 samples a side: no test")
check(E.significance(a, a.copy()) == (1.0, "not significant"), "identical samples: p = 1")

ratio, low, high = E.ratio_interval(a, b)
ref = stats.bootstrap((a, b), lambda x, y, axis: np.median(x, axis=axis) / np.median(y, axis=axis), vectorized=True,
                      paired=False, confidence_level=E.CONFIDENCE, n_resamples=E.RESAMPLES, method="percentile",
                      random_state=np.random.default_rng(E.SEED)).confidence_interval
check(np.isclose(ratio, np.median(a) / np.median(b), rtol=1e-15) and np.isclose(low, ref.low, rtol=1e-12)
      and np.isclose(high, ref.high, rtol=1e-12),
      f"ratio interval = scipy.stats.bootstrap percentile ({low:.4f}-{high:.4f} vs {ref.low:.4f}-{ref.high:.4f})")
check(E.ratio_interval(a, b) == (ratio, low, high), "the interval is the same on a second call (seeded)")
big = rng.lognormal(0.0, 0.1, 1200)
ratio, low, high = E.ratio_interval(big, b)
ref = stats.bootstrap((big, b), lambda x, y, axis: np.median(x, axis=axis) / np.median(y, axis=axis),
                      vectorized=True, paired=False, confidence_level=E.CONFIDENCE, n_resamples=E.RESAMPLES,
                      method="percentile", random_state=np.random.default_rng(E.SEED)).confidence_interval
check(np.isclose(low, ref.low, rtol=1e-12) and np.isclose(high, ref.high, rtol=1e-12),
      "the chunked medians of a large sample set give scipy's interval too")

# Verdicts: a clear shift is 'beats' with an interval below 1; the same samples against themselves a tie with 1
# inside; a family of many marginal points loses its marginal ones to Holm.
family = E.Family()
clear = family.add(rng.lognormal(0.0, 0.02, 30), rng.lognormal(0.2, 0.02, 30), "clear")
same = family.add(a, a.copy(), "same")
slower = family.add(rng.lognormal(0.2, 0.02, 30), rng.lognormal(0.0, 0.02, 30), "slower")
family.resolve()
check(clear.verdict == "beats" and clear.high < 1, f"a clear shift beats: {clear.text()}")
check(slower.verdict == "loses" and slower.low > 1, f"a clear slowdown loses: {slower.text()}")
check(same.verdict == "tie" and same.low <= 1 <= same.high, f"identical samples tie: {same.text()}")
check(np.allclose([c.p_holm for c in family.members], E.holm([c.p for c in family.members])),
      "the family's p_Holm is holm() of its p-values")
# A significant test whose interval reaches 1 claims nothing.
c = E.Comparison(a, b)
c.low, c.high = 0.9, 1.01
check(c.decide(0.001) == "tie", "significant but the interval reaches 1: tie")
c.low, c.high = 0.9, 0.99
check(c.decide(0.001) == "beats", "significant and the interval below 1: beats")
check(c.decide(0.2) == "inconclusive", "the interval below 1 but not significant after Holm: inconclusive")
c.low, c.high = 1.01, 1.2
check(c.decide(0.001) == "loses" and c.decide(0.06) == "inconclusive", "above 1: loses, or inconclusive")
c.low, c.high = 0.95, 1.05
check(c.decide(0.2) == "tie", "the interval reaches 1 and not significant: tie")
# Five samples against five, entirely apart: the exact two-sided p is 2 / C(10, 5) = 0.0079, which Holm over a family
# of seven (7 * 0.0079 = 0.056) no longer passes: inconclusive, never a tie, however far apart the medians are.
five = E.Family()
for _ in range(7):
    five.add(np.arange(1.0, 6.0), np.arange(10.0, 15.0))
five.resolve()
check(np.isclose(five.members[0].p, 2 / 252) and all(c.verdict == "inconclusive" for c in five.members),
      f"5 vs 5 apart, a family of 7: p = {five.members[0].p:.4f}, {five.members[0].verdict}")
# fill(): the family is what the lines show; a comparison computed but not shown is not counted.
family = E.Family()
shown = [family.add(rng.lognormal(0.0, 0.05, 20), rng.lognormal(0.1, 0.05, 20)) for _ in range(3)]
hidden = family.add(a, b)
lines = family.fill([f"| {c.token} |" for c in shown])
check(all("\x00" not in line for line in lines) and np.isnan(hidden.p_holm)
      and np.allclose([c.p_holm for c in shown], E.holm([c.p for c in shown])), "fill() resolves what it shows")
check(E.geometric_mean([0.5, 2.0]) == 1.0, "geometric mean of 0.5 and 2 is 1")

# kstudy compare (python side) on two committed archives of the same build: the Holm column and the interval.
with tempfile.TemporaryDirectory() as scratch:
    out = Path(scratch) / "compare.csv"
    run = subprocess.run([sys.executable, str(REPO / "scripts/kstudy_report.py"), "compare",
                          str(REPO / "data/h200-2026-12-02-s12/quick10_a.h5"),
                          str(REPO / "data/h200-2026-12-02-s12/quick10_b.h5"), "--out", str(out)],
                         capture_output=True, text=True)
    check(run.returncode == 0 and "p_holm" in run.stdout and "ratio_lo" in run.stdout,
          f"kstudy compare prints p_holm and the ratio interval (exit {run.returncode}) {run.stderr[-300:]}")
    df = pd.read_csv(out)
    tested = df[np.isfinite(df.p_value)]
    check(np.allclose(tested.p_holm, E.holm(tested.p_value)) and (tested.p_holm >= tested.p_value - 1e-15).all(),
          "compare's p_holm is Holm over the pair's aligned points")
    check(((df.ratio_lo <= df.ratio_B_over_A + 1e-12) & (df.ratio_B_over_A <= df.ratio_hi + 1e-12)).all(),
          "compare's ratio lies inside its interval")
    significant = df.significance == "significant"
    check(((tested.p_holm < E.ALPHA) & ((tested.ratio_hi < 1) | (tested.ratio_lo > 1))).sum() == significant.sum(),
          "compare calls significant exactly where p_holm < alpha and the interval excludes 1")
    raw = (tested.p_value < E.ALPHA).sum()
    print(f"     (quick10_a vs quick10_b: {raw} point(s) under alpha uncorrected, {significant.sum()} after Holm "
          f"and the interval, of {len(tested)})")

    # A point is all its axes: attention at head_dim 64 and 128 (16 x 16,384 x 64 and x 128) are two points, not one.
    out = Path(scratch) / "depth.csv"
    s16 = REPO / "data/h200-2026-12-02-s16"
    run = subprocess.run([sys.executable, str(REPO / "scripts/kstudy_report.py"), "compare",
                          str(s16 / "hopper_attention.h5"), str(s16 / "hopper_attention_first.h5"), "--out", str(out)],
                         capture_output=True, text=True)
    df = pd.read_csv(out) if run.returncode == 0 else pd.DataFrame(columns=["rows", "features", "depth"])
    at = df[(df.rows == 16) & (df.features == 16384)]
    check(sorted(set(at.depth)) == [64, 128] and (df.n_A == df.n_B).all(),
          f"compare keeps points apart by depth (exit {run.returncode}; depths {sorted(set(at.depth))})")
    # ... and its cache mode (issue 42): a sweep timed with cold and with warm caches has a cold and a warm point
    # per variant, never their pooled samples; the gate's point label names the cold one.
    out = Path(scratch) / "cache.csv"
    cache_modes = str(REPO / "data/h200-2026-12-02-s12/cache_modes.h5")
    run = subprocess.run([sys.executable, str(REPO / "scripts/kstudy_report.py"), "compare", cache_modes, cache_modes,
                          "--out", str(out)], capture_output=True, text=True)
    df = pd.read_csv(out) if run.returncode == 0 else pd.DataFrame(columns=["variant", "rows", "cache", "n_A"])
    modes = (df.groupby(["variant", "rows", "timer"]).cache.agg(lambda c: tuple(sorted(c))) if "cache" in df and len(df)
             else pd.Series([()]))
    check(len(df) > 0 and (modes == ("cold", "warm")).all(),
          f"compare keeps cold- and warm-cache points apart (exit {run.returncode}; {len(df)} aligned point(s))")
    run = subprocess.run([sys.executable, str(REPO / "scripts/kstudy_report.py"), "compare", cache_modes, cache_modes,
                          "--gate", "5%"], capture_output=True, text=True)
    check(run.returncode == 0 and "x16/cold " in run.stdout,
          f"compare --gate labels the cold-cache points (exit {run.returncode})")
    # --by kokkos: the newest version against the oldest, the same columns and rule.
    out = Path(scratch) / "kokkos.csv"
    s13 = REPO / "data/h200-2026-12-02-s13"
    run = subprocess.run([sys.executable, str(REPO / "scripts/kstudy_report.py"), "compare",
                          str(s13 / "kokkos_costs_memory_k34.h5"), str(s13 / "kokkos_costs_memory_k46.h5"), "--by",
                          "kokkos", "--out", str(out)], capture_output=True, text=True)
    df = pd.read_csv(out) if run.returncode == 0 else pd.DataFrame()
    tested = df[np.isfinite(df.p_value)] if len(df) else df
    check(len(tested) and np.allclose(tested.p_holm, E.holm(tested.p_value))
          and ((df.ratio_lo <= df.ratio_new_over_old + 1e-12) & (df.ratio_new_over_old <= df.ratio_hi + 1e-12)).all(),
          f"compare --by kokkos: p_holm is Holm over its points, the ratio inside its interval (exit {run.returncode})")
    # --gate keeps its verdicts and exit codes (4 on SLOWER) and shows p_Holm beside p.
    for base, new, want in (("quick10_a", "quick10_b", 0), ("slowed_clean", "slowed_slow", 4)):
        verdicts = Path(scratch) / f"{new}.json"
        run = subprocess.run([sys.executable, str(REPO / "scripts/kstudy_report.py"), "compare",
                              str(REPO / f"data/h200-2026-12-02-s12/{base}.h5"),
                              str(REPO / f"data/h200-2026-12-02-s12/{new}.h5"), "--gate", "5%", "--gate-json",
                              str(verdicts)], capture_output=True, text=True)
        rows = pd.DataFrame(json.loads(verdicts.read_text())["verdicts"]) if verdicts.exists() else pd.DataFrame()
        p = rows.p_value.astype(float) if len(rows) else pd.Series(dtype=float)
        check(run.returncode == want and "p_Holm" in run.stdout and len(rows)
              and np.allclose(rows.p_holm.astype(float)[np.isfinite(p)], E.holm(p[np.isfinite(p)])),
              f"compare --gate {base} {new}: exit {run.returncode} (want {want}), p_Holm shown and Holm over the "
              "points")

cases.finish("stats checks passed")
