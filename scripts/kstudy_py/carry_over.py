"""Whether what one card's archive concludes carries over to another card (issue 45): one implementation for
`kstudy compare A.h5 B.h5 --by machine` and the `carries_over` block of docs/results.md.

A conclusion is what an archive says at one point of one operation: the ranking of the variants by median time and
each variant's time ratio to a reference (the named reference variant where the point has it, else the fastest on
the first card), with its 95% interval (effects.ratio_interval: the seeded percentile bootstrap of both medians).
Both cards' archives are read the same way (results.stats.samples: accepted samples, default block size, every
experiment of the archive pooled); device variants only, on the first timer of DEVICE_TIMERS both archives hold for
every variant compared at the point. Per point, the verdict:

  does not carry over          a pair of variants is ordered one way on one card and the other way on the other,
                               each order resolved (the pair's ratio interval clear of 1 on both cards)
  ranking holds, ratio moves   no reversed pair, but a variant's ratio to the reference has disjoint intervals on
                               the two cards
  holds                        neither: the same ranking (the winners the same variant, or a tie no card resolves)
                               and every ratio within the other card's interval
  too few samples              a variant with fewer than effects.MIN_SAMPLES samples on a card

No correction is made for the number of ratios compared: with many variants at a point, one pair of 95% intervals
can miss each other by chance; the tables give the intervals, so a reader sees by how much.

The reason column is computed from what the archives know, never typed: each variant involved (the reference, the
ratios that moved, the pairs that reversed) is classed by its modelled traffic and flops per median time against the
roofs its own archive measured on the timer's clock (results.stats.device_bandwidth_roof, the compute roof its
variants table names):

  latency     under LATENCY_SHARE of both roofs on both cards (launch latency, synchronisation, serialised
              atomics: what no roof bounds)
  compute     a larger share of its compute roof than of its bandwidth roof
  L2          memory-side, its modelled traffic of one call within a card's L2 (environment gpu_l2_bytes): on both
              cards, or on the larger L2 only
  bandwidth   memory-side otherwise: the time should follow the cards' bandwidth roof ratio
  power       added where samples at the point ran throttled (samples.throttled; the NVML reasons
              samples.throttle_reasons records, sw_power_cap on Hopper at the large points)

Each class predicts a speed-up from the first card to the second (expected(): the bandwidth roofs' ratio; 1 where
the SMs and clocks set the time and both cards have the same; a direction only where one card's L2 holds the call).
A moved ratio, or a reversed pair, is "not explained" where the two variants' classes do not predict its direction
and at least EXPLAINED_SHARE of its size (log scale); "by bandwidth, L2 or power", or "by bandwidth or L2" where
samples at the point ran throttled (power may be the cause, and the note says where). What is left is what the two
archives do not record alike: they were not one run, and the header of each comparison says how they differ (commit,
Kokkos version, build architecture, CUDA, schema, experiment definitions, date).
"""
import itertools
from dataclasses import dataclass, field

import numpy as np

from . import archive as A
from .effects import MIN_SAMPLES, ratio_interval
from .results import stats as S

VERDICTS = ("holds", "ranking holds, ratio moves", "does not carry over", "too few samples")
DEVICE_TIMERS = ("device_events", "resident_wall")  # preferred first (results.stats.DEVICE_TIMERS)
LATENCY_SHARE = 0.10  # below this share of both roofs on both cards a variant waits on latency, not on a roof
# A class explains a moved ratio where it predicts the direction and at least this share of the move (log scale):
# the read roof's ratio beside the copy roof's predicts a few percent, not a 30% move.
EXPLAINED_SHARE = 0.5
POWER_REASONS = ("sw_power_cap", "hw_power_brake")
MIB = 1 << 20
# What the header compares between the two archives' environments and attributes: (label, where, key).
FACTS = (("commit", "attrs", "git_commit"), ("dirty tree", "attrs", "git_dirty"),
         ("Kokkos", "environment", "kokkos_version"), ("Kokkos architecture", "environment", "kokkos_gpu_arch"),
         ("CUDA architecture", "environment", "kstudy_cuda_arch"),
         ("CUDA runtime", "environment", "cuda_runtime_version"), ("driver", "environment", "cuda_driver_version"),
         ("schema", "attrs", "schema_version"))


# --- the cards -----------------------------------------------------------------------------------------------------

@dataclass
class Card:
    """One archive's GPU and build, as its environment and root attributes record them."""
    label: str  # a short name: "H100", "H200"
    name: str = ""  # gpu_name
    sms: int = 0
    clock_mhz: int = 0
    l2_bytes: int = 0
    path: str = ""
    facts: dict = field(default_factory=dict)  # FACTS label -> value ("" where not recorded)
    uuid: str = ""
    created: str = ""
    experiments: dict = field(default_factory=dict)  # name -> fingerprint
    throttle_recorded: bool = True  # whether samples carry NVML's slowdown reasons (schema 9 on)

    def same_cores(self, other):
        return self.sms > 0 and self.sms == other.sms and self.clock_mhz == other.clock_mhz


def short_label(gpu_name):
    """'NVIDIA H100 80GB HBM3' -> 'H100': the first word after the vendor."""
    words = [w for w in str(gpu_name).split() if w.upper() not in ("NVIDIA", "AMD", "INTEL", "TESLA")]
    return words[0] if words else str(gpu_name)


def _int(value):
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def card_of(archive, path=""):
    env, attrs = archive.environment, archive.attrs
    name = env.get("gpu_name", "")
    facts = {}
    for label, where, key in FACTS:
        value = (attrs if where == "attrs" else env).get(key, "")
        facts[label] = str(value) if value is not None else ""
    return Card(label=short_label(name) if name else archive.label, name=name, sms=_int(env.get("gpu_sm_count")),
                clock_mhz=_int(env.get("gpu_max_sm_clock_khz")) // 1000, l2_bytes=_int(env.get("gpu_l2_bytes")),
                path=str(path), facts=facts, uuid=env.get("gpu_uuid", "") or "",
                created=attrs.get("created_utc", ""),
                experiments={n: e.fingerprint for n, e in archive.experiments.items() if not e.accepted().empty})


def not_one_run(a, b):
    """(differences, the same): what the two archives' records say about how they were made."""
    differ, same = [], []
    for label, _, _ in FACTS:
        x, y = a.facts.get(label, ""), b.facts.get(label, "")
        if label == "commit":
            x, y = x[:7], y[:7]
        if not x and not y:
            continue
        shown_x, shown_y = x or "not recorded", y or "not recorded"
        (same if x == y else differ).append(f"{label} {shown_x}" if x == y else
                                            f"{label} {shown_x} ({a.label}) vs {shown_y} ({b.label})")
    common = sorted(set(a.experiments) & set(b.experiments))
    redefined = [n for n in common if a.experiments[n] != b.experiments[n]]
    if not common:
        differ.append(f"experiments {', '.join(sorted(a.experiments))} ({a.label}) vs "
                      f"{', '.join(sorted(b.experiments))} ({b.label}): no experiment of the same name")
    elif redefined:
        differ.append(f"experiment definitions of {', '.join(redefined)} (fingerprints differ)")
    else:
        same.append(f"experiment definitions of {', '.join(common)}")
    if a.created[:10] != b.created[:10]:
        differ.append(f"dates {a.created[:10]} vs {b.created[:10]}")
    return differ, same


# --- one point: the verdict ----------------------------------------------------------------------------------------

@dataclass
class Side:
    """One variant at one point on one card: its samples and what its archive says about them."""
    seconds: np.ndarray
    throttled: int = 0  # samples flagged throttled (NVML reported a clocks-event slowdown during the point)
    reasons: tuple = ()  # those samples' NVML slowdown reasons
    bandwidth_share: float = np.nan  # modelled traffic per median time over the card's bandwidth roof
    compute_share: float = np.nan  # essential flops per median time over the card's compute roof
    bandwidth_roof: float = np.nan  # that roof in B/s

    def __post_init__(self):
        self.seconds = np.asarray(self.seconds, dtype=float)

    @property
    def median(self):
        return float(np.median(self.seconds))


@dataclass
class Entry:
    """One variant at one point on both cards."""
    variant: str
    a: Side
    b: Side
    working_set: float = np.nan  # modelled bytes moved by one call


@dataclass
class Judgement:
    verdict: str
    reference: str
    winner_a: str
    winner_b: str
    rank_a: dict  # variant -> 1-based rank by median on the first card
    rank_b: dict
    ratio_a: dict  # variant -> (time ratio to the reference, low, high) on the first card
    ratio_b: dict
    speedup: dict  # variant -> (median time on the first card / on the second, low, high)
    moved: list  # variants whose ratio intervals are disjoint between the cards
    reversals: list  # (faster on the first card, faster on the second) pairs, each order resolved
    kinds: dict  # variant -> class (latency, compute, l2_both, l2_one, bandwidth, unknown)
    reason: str


def overlap(x, y):
    """Whether two (value, low, high) intervals share a point."""
    return x[1] <= y[2] and y[1] <= x[2]


def order(interval):
    """-1 where the ratio's interval lies below 1 (the first faster), 1 above, 0 where it reaches 1."""
    _, low, high = interval
    return -1 if high < 1 else (1 if low > 1 else 0)


def ranking(entries, side):
    return sorted(entries, key=lambda v: (getattr(entries[v], side).median, v))


def judge(entries, card_a, card_b, reference=None, operation=""):
    """The verdict at one point. `entries`: variant -> Entry (two or more); `reference`: a variant name or family
    (the name without @backend) to hold every ratio against, else the fastest variant on the first card; `operation`
    only shortens the names the reason gives."""
    names = sorted(entries)
    rank_a, rank_b = ranking(entries, "a"), ranking(entries, "b")
    ref = next((v for v in names if reference and (v == reference or A.family(v) == reference)), rank_a[0])
    ratio_a = {v: ratio_interval(entries[v].a.seconds, entries[ref].a.seconds) for v in names}
    ratio_b = {v: ratio_interval(entries[v].b.seconds, entries[ref].b.seconds) for v in names}
    speedup = {v: ratio_interval(entries[v].a.seconds, entries[v].b.seconds) for v in names}
    moved = [v for v in rank_a if v != ref and not overlap(ratio_a[v], ratio_b[v])]
    position_b = {v: i for i, v in enumerate(rank_b)}
    reversals = []
    for u, v in itertools.combinations(rank_a, 2):  # u ahead of v on the first card
        if position_b[u] < position_b[v]:
            continue  # the same order by median: no reversal to resolve
        on_a = order(ratio_interval(entries[u].a.seconds, entries[v].a.seconds))
        on_b = order(ratio_interval(entries[u].b.seconds, entries[v].b.seconds))
        if on_a == -1 and on_b == 1:
            reversals.append((u, v))
    few = any(len(e.a.seconds) < MIN_SAMPLES or len(e.b.seconds) < MIN_SAMPLES for e in entries.values())
    if few:
        verdict = "too few samples"
    elif reversals:
        verdict = "does not carry over"
    elif moved:
        verdict = "ranking holds, ratio moves"
    else:
        verdict = "holds"
    kinds = {v: kind(entries[v], card_a, card_b) for v in names}
    judgement = Judgement(verdict, ref, rank_a[0], rank_b[0], {v: i + 1 for i, v in enumerate(rank_a)},
                          {v: i + 1 for i, v in enumerate(rank_b)}, ratio_a, ratio_b, speedup, moved, reversals,
                          kinds, "")
    judgement.reason = reason(judgement, entries, card_a, card_b, operation)
    return judgement


# --- one point: the reason -----------------------------------------------------------------------------------------

def _largest(*values):
    finite = [v for v in values if v is not None and np.isfinite(v)]
    return max(finite) if finite else np.nan


def kind(entry, card_a, card_b):
    """What a variant's time at the point waits on, from its shares of its roofs on both cards (module doc)."""
    bandwidth = _largest(entry.a.bandwidth_share, entry.b.bandwidth_share)
    compute = _largest(entry.a.compute_share, entry.b.compute_share)
    if not np.isfinite(bandwidth) and not np.isfinite(compute):
        return "unknown"
    if _largest(bandwidth, compute) < LATENCY_SHARE:
        return "latency"
    if np.isfinite(compute) and (not np.isfinite(bandwidth) or compute > bandwidth):
        return "compute"
    w = entry.working_set
    l2 = [c.l2_bytes for c in (card_a, card_b) if c.l2_bytes > 0]
    if l2 and np.isfinite(w) and w <= min(l2):
        return "l2_both"
    if len(l2) == 2 and np.isfinite(w) and w <= max(l2):
        return "l2_one"
    return "bandwidth"


def _mib(n):
    return f"{n / MIB:,.0f}" if n >= 10 * MIB else f"{n / MIB:.2g}"


def kind_text(k, entry, card_a, card_b):
    """The class of a variant as a reason says it, with the numbers behind it."""
    cores = ("same SMs and clocks" if card_a.same_cores(card_b) else
             f"SMs and clocks differ ({card_a.sms} × {card_a.clock_mhz:,} MHz vs {card_b.sms} × "
             f"{card_b.clock_mhz:,} MHz)")
    if k == "compute":
        return f"compute-bound: {cores}"
    if k == "latency":
        return f"neither roof (under {LATENCY_SHARE:.0%} of both: latency or overhead)"
    if k == "l2_both":
        return f"L2-resident on both ({_mib(entry.working_set)} MiB a call): {cores}"
    if k == "l2_one":
        big, small = (card_a, card_b) if card_a.l2_bytes > card_b.l2_bytes else (card_b, card_a)
        return (f"L2 ({_mib(entry.working_set)} MiB a call fits the {big.label}'s {_mib(big.l2_bytes)} MiB L2, not "
                f"the {small.label}'s {_mib(small.l2_bytes)} MiB)")
    if k == "bandwidth":
        roofs = entry.b.bandwidth_roof / entry.a.bandwidth_roof
        return f"bandwidth ({roofs:.2f}× roof ratio)" if np.isfinite(roofs) else "bandwidth"
    return "no roof on the timer's clock"


def share_text(entry, k):
    """'81% → 79% of roof' for a memory-side class, the compute roof's shares for a compute one."""
    if k == "compute":
        x, y, what = entry.a.compute_share, entry.b.compute_share, "compute roof"
    else:
        x, y, what = entry.a.bandwidth_share, entry.b.bandwidth_share, "bandwidth roof"
    if not (np.isfinite(x) and np.isfinite(y)):
        return ""
    return f"{100 * x:.0f}% → {100 * y:.0f}% of {what}"


def power_text(entries, card_a, card_b):
    """'power (sw_power_cap): 144 of 144 H100 samples, 72 of 144 H200 samples' where any sample at the point ran
    throttled; '' where none did."""
    counts, reasons = [], set()
    for side, card in (("a", card_a), ("b", card_b)):
        sides = [getattr(e, side) for e in entries.values()]
        hot, total = sum(s.throttled for s in sides), sum(len(s.seconds) for s in sides)
        for s in sides:
            reasons.update(s.reasons)
        if hot:
            counts.append(f"{hot:,} of {total:,} {card.label} samples")
    if not counts:
        return ""
    label = "power" if reasons & set(POWER_REASONS) else "throttled"
    return f"{label} ({', '.join(sorted(reasons)) or 'reason not recorded'}): {', '.join(counts)}"


def short(variant, operation=""):
    """The variant as a table of its operation names it: without @backend and without the operation's prefix."""
    name = A.family(variant)
    return name[len(operation) + 1:] if operation and name.startswith(operation + "_") else name


def expected(k, entry, card_a, card_b):
    """The speed-up from the first card to the second a class predicts: the bandwidth roofs' ratio, 1 where the
    cards' SMs and clocks set the time, +inf / 0 where only the second / first card's L2 holds the call's traffic;
    NaN where the archives do not say."""
    if k == "bandwidth":
        return entry.b.bandwidth_roof / entry.a.bandwidth_roof
    if k == "l2_one":
        return np.inf if card_b.l2_bytes > card_a.l2_bytes else 0.0
    if k in ("compute", "latency", "l2_both"):
        return 1.0 if card_a.same_cores(card_b) else np.nan
    return np.nan


def explained(j, entries, card_a, card_b, gainer, other):
    """Whether the classes of two variants predict the way their ratio moved: `gainer` sped up more than `other`
    from the first card to the second, and the classes' predicted speed-ups differ by at least EXPLAINED_SHARE of
    that move (log scale; an L2 that holds the call on one card only predicts a direction, no size)."""
    e_gain = expected(j.kinds[gainer], entries[gainer], card_a, card_b)
    e_other = expected(j.kinds[other], entries[other], card_a, card_b)
    if np.isnan(e_gain) or np.isnan(e_other) or not e_gain > e_other:
        return False
    if np.isinf(e_gain) or e_other == 0:
        return True
    observed = np.log(j.speedup[gainer][0] / j.speedup[other][0])
    return bool(np.log(e_gain / e_other) >= EXPLAINED_SHARE * observed)


def unexplained(j, entries, card_a, card_b):
    """The variants whose move no class explains: a moved ratio against the reference, a reversed pair against
    each other, where neither class predicts the direction the times moved."""
    out = []
    for v in j.moved:
        gainer, other = (v, j.reference) if j.speedup[v][0] > j.speedup[j.reference][0] else (j.reference, v)
        if not explained(j, entries, card_a, card_b, gainer, other):
            out.append(v)
    for u, v in j.reversals:  # v overtook u on the second card
        if not explained(j, entries, card_a, card_b, v, u):
            out += [x for x in (u, v) if x not in out and x != j.reference]
    return out


def reason(j, entries, card_a, card_b, operation=""):
    """The reason column: each class among the reference and the variants that moved or reversed, with their
    speed-ups from the first card to the second (median time there / median time here; the reference, and at most
    two more by name, the rest as a range), then power, then the moves no class explains."""
    involved = [j.reference] + list(j.moved)
    for u, v in j.reversals:
        involved += [x for x in (u, v) if x not in involved]
    groups = {}
    for v in involved:
        k = j.kinds[v]
        groups.setdefault(kind_text(k, entries[v], card_a, card_b), []).append(v)
    parts = []
    for text, members in groups.items():
        named = [v for v in members if v == j.reference] + [v for v in members if v != j.reference]
        shown, rest = (named, []) if len(named) <= 3 else (named[:2], named[2:])
        cells = []
        for v in shown:
            k = j.kinds[v]
            share = share_text(entries[v], k) if k in ("bandwidth", "l2_one") else ""
            cells.append(f"`{short(v, operation)}`{' (ref)' if v == j.reference else ''} {j.speedup[v][0]:.2f}×"
                         + (f" ({share})" if share else ""))
        if rest:
            low, high = min(j.speedup[v][0] for v in rest), max(j.speedup[v][0] for v in rest)
            spread = f"{low:.2f}×" if f"{low:.2f}" == f"{high:.2f}" else f"{low:.2f}–{high:.2f}×"
            cells.append(f"{len(rest)} more {spread}")
        parts.append(f"{text}: {', '.join(cells)}")
    power = power_text(entries, card_a, card_b)
    if power:
        parts.append(power)
    lost = unexplained(j, entries, card_a, card_b)
    if lost:
        causes = "bandwidth or L2" if power else "bandwidth, L2 or power"
        more = f" and {len(lost) - 3} more" if len(lost) > 3 else ""
        names = ", ".join(f"`{short(v, operation)}`" for v in lost[:3]) + more
        parts.append(f"not explained by {causes}: {names}")
    return "; ".join(parts)


# --- two archives --------------------------------------------------------------------------------------------------

@dataclass
class PointResult:
    operation: str
    label: str  # the point as the tables write it
    key: tuple
    timer: str
    entries: dict
    judgement: Judgement


@dataclass
class Pair:
    card_a: Card
    card_b: Card
    points: list
    roof_ratios: dict  # roof name -> (the first card's GB/s, the second card's), timed on CUDA events


def _side(path, rows, timer):
    """A Side from one variant's rows at one point of an archive (results.stats.Measure: its samples count as
    used by the block, so that throttled ones are disclosed under it)."""
    m = S.Measure(path, rows)
    median = m.median
    traffic = m.modelled_bytes_read + m.modelled_bytes_written
    if not (np.isfinite(traffic) and traffic > 0):
        traffic = float(m.essential_bytes)
    roof = S.roof_value(path, S.device_bandwidth_roof(m), timer)
    bandwidth = traffic / median / (roof * 1e9) if roof and median > 0 else np.nan
    compute = np.nan
    if isinstance(m.compute_ceiling, str) and m.compute_ceiling:
        peak = S.roof_value(path, m.compute_ceiling, timer, compute=True)
        if peak and median > 0 and np.isfinite(m.essential_flops):
            compute = float(m.essential_flops) / median / (peak * 1e12)
    reasons = set()
    if "throttle_reasons" in rows.columns:
        hot = rows[rows.throttled.astype(bool)] if "throttled" in rows.columns else rows.iloc[:0]
        for bits in hot.throttle_reasons.astype(int):
            reasons.update(A.slowdown_reasons(bits))
    side = Side(m.seconds, throttled=m.throttled, reasons=tuple(sorted(reasons)), bandwidth_share=bandwidth,
                compute_share=compute, bandwidth_roof=roof * 1e9 if roof else np.nan)
    return side, traffic


def compare(path_a, path_b, operations=None, reference=None, timers=DEVICE_TIMERS):
    """Every operation and point both archives measured with two or more device variants in common, judged
    (judge()); the first archive's card first. Raises results.ResultsError where an archive cannot be read."""
    sa, sb = S.samples(path_a), S.samples(path_b)
    sa, sb = sa[sa.on_device & sa.timer.isin(timers)], sb[sb.on_device & sb.timer.isin(timers)]
    if operations:
        sa, sb = sa[sa.operation.isin(operations)], sb[sb.operation.isin(operations)]
    card_a, card_b = card_of(S.archive(path_a), path_a), card_of(S.archive(path_b), path_b)
    for card, path in ((card_a, path_a), (card_b, path_b)):
        reasons = S.samples(path).throttle_reasons
        card.throttle_recorded = bool((reasons.astype(int) >= 0).any())
    point = ["operation", *A.point_key("samples", without=("layout",))]
    held_a = {k: g for k, g in sa.groupby(point + ["timer"], dropna=False)}
    held_b = {k: g for k, g in sb.groupby(point + ["timer"], dropna=False)}
    points = []
    for key in sorted({k[:-1] for k in held_a} & {k[:-1] for k in held_b}, key=str):
        for timer in timers:
            ga, gb = held_a.get(key + (timer,)), held_b.get(key + (timer,))
            if ga is None or gb is None:
                continue
            common = sorted(set(ga.variant) & set(gb.variant))
            if len(common) < 2:
                continue
            entries = {}
            for v in common:
                side_a, traffic = _side(path_a, ga[ga.variant == v], timer)
                side_b, _ = _side(path_b, gb[gb.variant == v], timer)
                entries[v] = Entry(v, side_a, side_b, working_set=traffic)
            first = ga.iloc[0]
            label = A.point_label(first["rows"], first["features"], first["axes"], first["depth"])
            points.append(PointResult(key[0], label, key, timer, entries,
                                      judge(entries, card_a, card_b, reference, key[0])))
            break
    points.sort(key=lambda p: (p.operation, _extents(p, point)))
    roofs = {}
    for name in ("device_read", "device_copy"):
        x, y = S.roof_value(path_a, name, "device_events"), S.roof_value(path_b, name, "device_events")
        if x and y:
            roofs[name] = (x, y)
    return Pair(card_a, card_b, points, roofs)


def _extents(p, point):
    """The point's extents, first axis first, for ordering the points of an operation."""
    at = dict(zip(point, p.key))
    return tuple(int(at[e]) for e in A.EXTENTS)


# --- what both renderings show -------------------------------------------------------------------------------------

def ratio_cell(interval):
    value, low, high = interval
    digits = 3 if abs(value - 1) < 0.05 else 2
    return f"{value:.{digits}f}× ({low:.{digits}f}–{high:.{digits}f})"


def samples_cell(entries):
    """'18 / 18' or '7–9 / 18': samples per variant on each card."""
    out = []
    for side in ("a", "b"):
        n = [len(getattr(e, side).seconds) for e in entries.values()]
        out.append(f"{min(n)}" if min(n) == max(n) else f"{min(n)}–{max(n)}")
    return " / ".join(out)


def summary_row(p, pair):
    """One point's summary cells, as both renderings show them (column -> text)."""
    j = p.judgement
    a, b = pair.card_a.label, pair.card_b.label
    order_b = ",".join(str(j.rank_a[v]) for v in ranking(p.entries, "b"))
    moved = f"{len(j.moved)} of {len(p.entries) - 1}"
    if j.reversals:
        moved += f"; {len(j.reversals)} pair{'s' if len(j.reversals) != 1 else ''} reversed"
    op = p.operation
    second = " on both" if j.winner_a == j.winner_b else f" / `{short(j.winner_b, op)}`"
    fastest = f"`{short(j.winner_a, op)}`" + second
    return {"point": p.label, "timer": p.timer,
            f"variants, samples each ({a} / {b})": f"{len(p.entries)}, {samples_cell(p.entries)}",
            f"fastest ({a} / {b})": fastest,
            f"{b} order by {a} rank": order_b,
            f"reference, {b} speed-up": f"`{short(j.reference, op)}` {ratio_cell(j.speedup[j.reference])}",
            "ratios moved": moved, "verdict": j.verdict, "reason": j.reason}


def moved_rows(p, pair):
    """A row per variant whose ratio moved or whose order reversed, as both renderings show them."""
    j = p.judgement
    a, b = pair.card_a.label, pair.card_b.label
    shown = list(j.moved) + [v for pair_ in j.reversals for v in pair_ if v not in j.moved]
    rows = []
    for v in sorted(dict.fromkeys(shown), key=lambda v: j.rank_a[v]):
        e, k = p.entries[v], j.kinds[v]
        rows.append({"point": p.label, "variant": f"`{short(v, p.operation)}`",
                     f"{a}: rank, time ÷ ref": f"{j.rank_a[v]}, {ratio_cell(j.ratio_a[v])}",
                     f"{b}: rank, time ÷ ref": f"{j.rank_b[v]}, {ratio_cell(j.ratio_b[v])}",
                     f"{b} speed-up": ratio_cell(j.speedup[v]),
                     "share of roof": share_text(e, k) or "—",
                     "class": {"l2_both": "L2 (both)", "l2_one": "L2 (one)"}.get(k, k),
                     "reversed against": ", ".join(f"`{short(x if y == v else y, p.operation)}`" for x, y in j.reversals
                                                   if v in (x, y)) or "—"})
    return rows


def header_lines(pair):
    """What the two archives are, how their cards differ, and how the two runs differ: the honesty note."""
    a, b = pair.card_a, pair.card_b
    lines = []
    for c in (a, b):
        lines.append(f"- **{c.label}**: `{c.path}` — {c.name or 'GPU not recorded'}"
                     + (f" (`{c.uuid[:12]}`)" if c.uuid else "")
                     + (f", {c.sms} SMs at up to {c.clock_mhz:,} MHz" if c.sms else "")
                     + (f", {_mib(c.l2_bytes)} MiB L2" if c.l2_bytes else "") + ".")
    if pair.roof_ratios:
        lines.append(f"- Bandwidth roofs measured in the two runs (CUDA events), {a.label} → {b.label}: " + "; ".join(
            f"`{name}` {x:,.0f} → {y:,.0f} GB/s ({y / x:.2f}×)" for name, (x, y) in pair.roof_ratios.items()) + ".")
    for c in (a, b):
        if not c.throttle_recorded:
            lines.append(f"- `{c.path}` records no NVML slowdown reason per sample (schema "
                         f"{c.facts.get('schema') or 'unknown'}): a throttle note there rests on its points' health "
                         "readings before and after them.")
    differ, same = not_one_run(a, b)
    lines.append("- **Not one run**: " + ("; ".join(differ) if differ else "no recorded difference") + "."
                 + (f" The same: {'; '.join(same)}." if same else ""))
    return lines
