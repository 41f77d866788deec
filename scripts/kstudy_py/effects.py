"""Verdicts at a stated precision: a Mann-Whitney U test per point, Holm's correction over the family of points a
claim rests on, and the effect with its confidence interval (the ratio of the two medians, by a seeded bootstrap).

One comparison is `a` against `b` (two arrays of seconds): ratio = median(a) / median(b) (below 1: a is faster),
its CONFIDENCE interval by the percentile bootstrap (RESAMPLES resamples of each side, independently, from a
generator seeded with SEED: the same interval on every run and every machine, and the one
scipy.stats.bootstrap(method="percentile") gives with that generator), and the two-sided Mann-Whitney U p-value.

Over a family (every point of one table column, every shape of one claim) the p-values are Holm-adjusted (Holm 1979:
the k-th smallest of m p-values is multiplied by m - k + 1, then made non-decreasing, at most 1), which keeps the
chance of any false "faster" in the family at alpha, where m uncorrected tests at alpha would call about alpha * m
of them by chance. A verdict:

  beats / loses   Holm-adjusted p < alpha and the ratio's interval entirely below / above 1
  tie             the interval reaches 1: no difference is claimed, and the interval says how large one could hide
                  (a significant test whose interval still reaches 1 is an effect smaller than its own uncertainty,
                  and claims nothing either)
  inconclusive    the interval excludes 1 but the test does not survive Holm's correction (with few samples a side
                  a rank test cannot reach a small p: five against five, exactly, never goes below 0.008, which a
                  family of seven or more points does not pass); neither a difference nor a tie is claimed
  too few samples under MIN_SAMPLES samples on a side
"""
import itertools

import numpy as np

ALPHA = 0.05
MIN_SAMPLES = 5
CONFIDENCE = 0.95
RESAMPLES = 2000
SEED = 44  # any fixed number: the interval must not change between runs of the same archive
VERDICTS = ("beats", "loses", "tie", "inconclusive", "too few samples")
# A verdict of `a` against `b` as a speed table reads it (the other verdicts read as they are).
WORDS = {"beats": "faster", "loses": "slower"}


def significance(a, b, alpha=ALPHA):
    """(two-sided Mann-Whitney U p-value, 'significant' / 'not significant' / 'too few samples') of one point, not
    corrected for any family."""
    from scipy.stats import mannwhitneyu
    if len(a) < MIN_SAMPLES or len(b) < MIN_SAMPLES:
        return np.nan, "too few samples"
    if np.array_equal(np.sort(a), np.sort(b)):
        return 1.0, "not significant"
    p = float(mannwhitneyu(a, b, alternative="two-sided").pvalue)
    return p, "significant" if p < alpha else "not significant"


def holm(pvalues):
    """Holm's step-down adjusted p-values, in the input's order; a NaN (no test) stays NaN and is not counted in the
    family."""
    p = np.asarray(pvalues, dtype=float).ravel()
    out = np.full(p.shape, np.nan)
    tested = np.flatnonzero(np.isfinite(p))
    m = len(tested)
    if m:
        order = tested[np.argsort(p[tested], kind="stable")]
        out[order] = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * p[order]))
    return out


def ratio_interval(a, b, confidence=CONFIDENCE, resamples=RESAMPLES, seed=SEED):
    """(median(a) / median(b), low, high): the percentile bootstrap interval of the ratio of medians, `a` and `b`
    resampled independently (a's indices drawn first) from numpy's default generator seeded with `seed`."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if not len(a) or not len(b):
        return np.nan, np.nan, np.nan
    ratio = float(np.median(a) / np.median(b))
    rng = np.random.default_rng(seed)
    ia = rng.integers(0, len(a), (resamples, len(a)))
    ib = rng.integers(0, len(b), (resamples, len(b)))
    medians = []
    for start in range(0, resamples, 500):  # bounded memory for large sample sets; the draws are made above
        stop = start + 500
        medians.append(np.median(a[ia[start:stop]], axis=1) / np.median(b[ib[start:stop]], axis=1))
    tail = (1 - confidence) / 2
    low, high = np.percentile(np.concatenate(medians), [100 * tail, 100 * (1 - tail)])
    return ratio, float(low), float(high)


def iqr(values, form=str):
    """'q1–q3' of `values` (linear interpolation, as archive.stats and the C++ summary), each through `form`: the
    spread printed beside a median wherever one is."""
    q1, q3 = np.quantile(np.asarray(values, dtype=float), [0.25, 0.75])
    return f"{form(q1)}–{form(q3)}"


def number(value, digits=2):
    """A ratio with `digits` decimals; two significant digits below 0.1 (0.017, not 0.02)."""
    return f"{value:.{digits}f}" if abs(value) >= 0.1 else f"{value:.2g}"


def geometric_mean(values):
    values = np.asarray(values, dtype=float)
    return float(np.exp(np.mean(np.log(values)))) if len(values) else np.nan


class Comparison:
    """`a` against `b` at one point: n, medians, ratio with its interval, raw and (once its family is resolved)
    Holm-adjusted p, and the verdict."""

    _ids = itertools.count()

    def __init__(self, a, b, label=""):
        a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
        self.label = label
        self.n_a, self.n_b = len(a), len(b)
        self.median_a = float(np.median(a)) if len(a) else np.nan
        self.median_b = float(np.median(b)) if len(b) else np.nan
        self.ratio, self.low, self.high = ratio_interval(a, b)
        self.p, self.flag = significance(a, b)
        self.p_holm = np.nan
        self.verdict = None
        self.token = f"\x00cmp{next(self._ids)}\x00"

    def decide(self, p_holm, alpha=ALPHA):
        self.p_holm = float(p_holm)
        if self.flag == "too few samples":
            self.verdict = "too few samples"
        elif self.p_holm < alpha and self.high < 1:
            self.verdict = "beats"
        elif self.p_holm < alpha and self.low > 1:
            self.verdict = "loses"
        elif self.low > 1 or self.high < 1:
            self.verdict = "inconclusive"
        else:
            self.verdict = "tie"
        return self.verdict

    def digits(self, digits=None):
        """Two decimals, three where the ratio is within 5% of 1 (0.998 and 1.002 would both print 1.00)."""
        if digits is not None:
            return digits
        return 3 if np.isfinite(self.ratio) and abs(self.ratio - 1) < 0.05 else 2

    def interval(self, digits=None):
        digits = self.digits(digits)
        return f"{number(self.low, digits)}–{number(self.high, digits)}" if np.isfinite(self.low) else ""

    def p_text(self):
        return f"p_Holm = {self.p_holm:.2g}" if np.isfinite(self.p_holm) else "no test"

    def cell(self, digits=None):
        """'0.71× (0.62–0.80) beats': the ratio, its interval and the verdict, for a table cell."""
        digits = self.digits(digits)
        if self.verdict == "too few samples":
            return f"{number(self.ratio, digits)}× (too few samples)"
        return f"{number(self.ratio, digits)}× ({self.interval(digits)}) {self.verdict}"

    def short(self, digits=None):
        """'beats (0.97×, 0.96–0.98; p_Holm = 2e-05)': the verdict first, for a verdict column."""
        digits = self.digits(digits)
        if self.verdict == "too few samples":
            return self.verdict
        return f"{self.verdict} ({number(self.ratio, digits)}×, {self.interval(digits)}; {self.p_text()})"

    def speed(self):
        """(median(b) / median(a), low, high): the same comparison as a speed ratio (above 1: a is faster)."""
        return 1 / self.ratio, 1 / self.high, 1 / self.low

    def speed_digits(self, digits=None):
        """As digits(), for the speed ratio: three decimals within 5% of 1."""
        speed = self.speed()[0]
        return digits if digits is not None else (3 if np.isfinite(speed) and abs(speed - 1) < 0.05 else 2)

    def speed_interval(self, digits=None):
        _, low, high = self.speed()
        digits = self.speed_digits(digits)
        return f"{number(low, digits)}–{number(high, digits)}" if np.isfinite(low) else ""

    def speed_short(self, digits=None):
        """'beats (1.08× the speed, 1.04–1.17; p_Holm = 2e-05)': the verdict of a, its speed over b's."""
        digits = self.speed_digits(digits)
        if self.verdict == "too few samples":
            return self.verdict
        return f"{self.verdict} ({number(self.speed()[0], digits)}×, {self.speed_interval(digits)}; {self.p_text()})"

    def speed_cell(self, digits=None):
        """'1.60× (1.55–1.66) faster': a's speed over b's (above 1: a is faster), its interval and the verdict in a
        reader's words (WORDS), for a table column of speed ratios; a tie prints its interval like any other."""
        digits = self.speed_digits(digits)
        speed = number(self.speed()[0], digits) if np.isfinite(self.ratio) else "n/a"
        if self.verdict == "too few samples":
            return f"{speed}× (too few samples)"
        return f"{speed}× ({self.speed_interval(digits)}) {WORDS.get(self.verdict, self.verdict)}"

    def text(self, digits=None):
        """'beats (ratio 0.71×, 95% CI 0.62–0.80; p_Holm = 0.002)'."""
        digits = self.digits(digits)
        if self.verdict == "too few samples":
            return self.verdict
        return f"{self.verdict} ({number(self.ratio, digits)}×, CI {self.interval(digits)}; {self.p_text()})"


class Family:
    """The comparisons one claim rests on. add() computes each point; resolve() Holm-adjusts the family's p-values
    and decides every verdict; fill() does that for the comparisons whose tokens appear in generated lines (the
    family is what the table shows) and replaces each token by its cell or text."""

    def __init__(self, alpha=ALPHA):
        self.alpha = alpha
        self.members = []

    def add(self, a, b, label=""):
        c = Comparison(a, b, label)
        self.members.append(c)
        return c

    def resolve(self, members=None):
        members = self.members if members is None else members
        for c, p in zip(members, holm([c.p for c in members])):
            c.decide(p, self.alpha)
        return members

    def __len__(self):
        return len(self.members)

    def tested(self):
        return sum(np.isfinite(c.p) for c in self.members)

    def fill(self, lines, form="cell"):
        """`lines` with every token of this family replaced by its comparison's `form` (cell or text); the family
        resolved over the comparisons that appear."""
        text = "\n".join(lines)
        shown = [c for c in self.members if c.token in text]
        self.resolve(shown)
        for c in shown:
            text = text.replace(c.token, getattr(c, form)())
        return text.split("\n") if lines else []

    def counts(self, members=None):
        members = self.members if members is None else members
        return {v: [c for c in members if c.verdict == v] for v in VERDICTS}

    def summary(self, members=None, speed=False, of=""):
        """'geometric mean 0.78× (range 0.52–0.97×), the highest at LABEL (0.97×)': over the members' time ratios
        (the highest is the least favourable to a); with `speed`, over their speed ratios, naming the lowest."""
        members = [c for c in (self.members if members is None else members) if np.isfinite(c.ratio)]
        if not members:
            return ""
        ratios = [1 / c.ratio if speed else c.ratio for c in members]
        worst = int(np.argmin(ratios) if speed else np.argmax(ratios))
        return (f"geometric mean {geometric_mean(ratios):.2f}×{' ' + of if of else ''} (range "
                f"{min(ratios):.2f}–{max(ratios):.2f}×, the {'lowest' if speed else 'highest'} at "
                f"{members[worst].label}: {ratios[worst]:.2f}×)")

    def tally(self, members=None):
        """'faster at 2, tie at 1, slower at 1 of 4': the resolved verdicts, counted."""
        members = self.members if members is None else members
        counts = self.counts(members)
        words = [("beats", "faster"), ("tie", "tie"), ("inconclusive", "inconclusive"), ("loses", "slower"),
                 ("too few samples", "too few samples")]
        parts = [f"{word} at {len(counts[v])}" for v, word in words if counts[v] or v in ("beats", "loses")]
        return ", ".join(parts) + f" of {len(members)}"


def rules_text(alpha=ALPHA):
    """The rule as a reader needs it under a table."""
    return (f"ratio = median time ÷ median time, with its {100 * CONFIDENCE:.0f}% interval (percentile bootstrap of "
            f"both medians, {RESAMPLES:,} resamples, seeded); **beats** / **loses**: two-sided Mann-Whitney U "
            f"significant at {alpha} after Holm's correction over the family of points named, and the interval "
            "entirely below / above 1; **tie** where the interval reaches 1 (no difference claimed; the interval "
            "bounds the one that could hide); **inconclusive** where the interval excludes 1 but the test does not "
            "survive the correction (too few samples for the family: nothing claimed)")


def family_line(members, of, alpha=ALPHA):
    """The one line under a table of verdicts: how many comparisons its family holds (`of` says which) and the
    correction, so that a reader can tell how much each verdict was discounted for the others."""
    members = list(members)
    tested = sum(np.isfinite(c.p) for c in members)
    return (f"*Family: {len(members)} comparison{'s' if len(members) != 1 else ''} ({of}; {tested} tested), "
            f"Holm-corrected at α = {alpha}; ratios of medians with {100 * CONFIDENCE:.0f}% bootstrap intervals.*")


def words_text(alpha=ALPHA):
    """What the verdicts of speed_cell() mean, once per section that prints them."""
    return (f"Verdicts: **faster** / **slower** where the two-sided Mann-Whitney U test is significant at {alpha} "
            "after Holm's correction over the family named under the table and the ratio's interval (percentile "
            f"bootstrap of both medians, {RESAMPLES:,} resamples, seeded) clears 1; **tie** where the interval "
            "reaches 1 (it bounds the difference that could hide); **inconclusive** where the interval clears 1 but "
            f"the test does not survive the correction; too few samples under {MIN_SAMPLES} a side.")
