"""What every results generator shares: samples of one variant at one point, pooled over the archive's
experiments and replications; same-run verdicts; roofs on the variant's own clock; number formats; provenance.

Rules (docs/results.md states them for the reader):
- A variant at a point is every accepted sample (kstudy's own acceptance: status ok, gate not failed, a measured
  trial) of that variant and point in the archive, whatever experiment or replication took it; device variants by
  CUDA events where measured (else the resident wall clock), host variants by the host clock, default block size.
- "beats" / "loses" / "tie" / "inconclusive": effects.Family over the comparisons one claim rests on (a column of
  shapes, a table's verdict column, a target's points): two-sided Mann-Whitney U p-values Holm-adjusted over the
  family, the ratio of medians with its seeded bootstrap interval; beats / loses only where both agree, tie where
  the interval reaches 1, inconclusive where only the interval excludes 1.
- Throttled samples: every sample a block's numbers rest on is recorded (use(), a Measure records its own), and
  throttle_lines() discloses those the archive flags throttled, with their NVML reasons and sampled SM clocks.
- A fixed target ("≥ 3.4 TB/s", "≥ 90% of cuBLAS"): "met" / "missed" from the median of the per-sample metric,
  "borderline" when the target lies inside the metric's interquartile range.
- A ratio against a vendor library: that vendor variant's median over all its samples at the point (never a pick
  between measurements of the same call).
- A share of a roof: only against a roof timed on the same clock as the variant's timer (schema 8 records
  ceilings.clock; older roofs were all timed on the host clock); above 100% it reads "roof exceeded".
"""
import json
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd

from .. import archive as A
from .. import effects  # also S.effects: the rules' text for the generators
from ..effects import ALPHA  # noqa: F401  (S.ALPHA: the level every verdict uses)
from ..effects import Family  # noqa: F401  (the generators' families of comparisons)
from ..report.variants import variant_table
from . import ResultsError

DEVICE_TIMERS = ("device_events", "resident_wall")  # preferred first
HOST_TIMER = "host_wall"
OTHER_CLOCK = "—"
OTHER_CLOCK_NOTE = ("— : no roof on the variant's clock. The archive's roofs were timed on another clock than the "
                    "variant (archives before schema 8 timed every roof on the host clock, device variants on CUDA "
                    "events), and a share is never computed across clocks.")
ATTRIBUTES = ["operation", "axes", "family", "implementation", "layout", "backend", "on_device", "rung",
              "essential_bytes", "essential_flops", "compute_ceiling", "modelled_bytes_read", "modelled_bytes_written"]


@lru_cache(maxsize=None)
def archive(path):
    try:
        return A.load([Path(path)])[0]
    except A.ArchiveError as error:
        raise ResultsError(str(error))


@lru_cache(maxsize=None)
def samples(path):
    """Every accepted sample of the archive with its variant's attributes (the archive's variants table)."""
    a = archive(path)
    frames = [e.accepted().assign(experiment=e.name) for e in a.experiments.values() if not e.accepted().empty]
    if not frames:
        raise ResultsError(f"{path}: no accepted sample")
    s = pd.concat(frames, ignore_index=True)
    s = s[s.block_size == 0]
    # A variant's attributes at its point: the variants table's point key less the layout (the samples' own) and
    # the block size (the samples here are the default block size's; the table has a row per block size tried).
    keys = ["variant", *A.point_key("variants", without=("layout", "block_size"))]
    v = variant_table([a]).drop_duplicates(keys)
    s = s.drop(columns=[c for c in ATTRIBUTES if c in s.columns]).merge(v[keys + ATTRIBUTES], on=keys, how="left")
    s["on_device"] = s.on_device.fillna(False).astype(bool)
    s["rung"] = s.rung.fillna(0).astype(int)
    return s


# --- what a block's numbers rest on: throttled samples are disclosed -------------------------------------------

USED = {}  # path -> set of row labels of samples(path) the current block's numbers rest on (generate() resets it)


def use(path, rows):
    """Records that the block's numbers rest on these rows of samples(path) (a Measure records its own)."""
    USED.setdefault(str(path), set()).update(rows.index)


def throttle_lines():
    """The disclosure of the samples recorded by use() that the archive flags throttled (samples.throttled, set
    when NVML reported a slowdown reason during the point): how many, where, why and at which SM clocks (each
    sample's lowest sampled SM clock, else the health table's readings of its point); [] when none is."""
    total, flagged, clocks, reasons, where, maxima = 0, 0, [], set(), [], set()
    names = [Path(path).name for path in USED]
    for path, index in sorted(USED.items()):
        s = samples(path).loc[sorted(index)]
        total += len(s)
        if "throttled" not in s.columns:
            continue
        hot = s[s.throttled.astype(bool)]
        if hot.empty:
            continue
        flagged += len(hot)
        a = archive(path)
        maxima.add(int(a.environment.get("gpu_max_sm_clock_khz", 0) or 0) // 1000)
        read = hot.min_sm_clock_mhz.astype(int)
        clocks += list(read[read > 0])
        for bits in hot.throttle_reasons.astype(int):
            reasons.update(A.slowdown_reasons(bits))
        for e in a.experiments.values():
            h = e.health
            if h.empty or "throttled" not in h.columns:
                continue
            keys = set(zip(hot[hot.experiment == e.name].point, hot[hot.experiment == e.name].replication))
            rows = h[[k in keys for k in zip(h.point, h.replication)] & h.throttled.astype(bool)]
            reasons.update(r for text in rows.reasons for r in str(text).split(",") if r)
            if not len(read[read > 0]):
                for column in ("sampled_min_sm_clock_mhz", "before_sm_clock_mhz", "after_sm_clock_mhz"):
                    clocks += [int(c) for c in rows[column] if int(c) > 0]
        # By the archive's own point identity (experiment, point index), labelled as the tables label points.
        counts = {}
        for (experiment, point), at in hot.groupby(["experiment", "point"], sort=True):
            first = at.iloc[0]
            shape = A.point_label(first["rows"], first["features"], first["axes"], first["depth"])
            label = f"{first['operation']} at {shape}"
            n_at = int(((s.experiment == experiment) & (s.point == point)).sum())
            flagged_at, total_at = counts.get(label, (0, 0))
            counts[label] = (flagged_at + len(at), total_at + n_at)
        # The file's name; with its folder where two archives of the block share a name (one run per card).
        name = Path(path).name if names.count(Path(path).name) == 1 else f"{Path(path).parent.name}/{Path(path).name}"
        where += [f"{label} in `{name}`: {n:,} of {total:,}" for label, (n, total) in sorted(counts.items())]
    if not flagged:
        return []
    maximum = max(maxima) if maxima and max(maxima) > 0 else None
    below = (f"; {sum(c < maximum for c in clocks):,} of the {len(clocks):,} readings below the maximum"
             if maximum else "")
    clock = (f"the lowest SM clock sampled during each of their timed regions {min(clocks):,}–{max(clocks):,} MHz "
             f"(median {int(np.median(clocks)):,}{below})" if clocks else "no SM clock reading recorded for them")
    return [f"**Throttled samples**: {flagged:,} of the {total:,} samples this block rests on ran while NVML reported "
            f"a clocks-event slowdown ({', '.join(sorted(reasons)) or 'reason not recorded'}) — {'; '.join(where)}; "
            f"{clock}" + (f", against the GPU's {maximum:,} MHz maximum" if maximum else "") + ". Their times are "
            "kept (they are what the GPU did under the load), but read them as the kernel at a reduced clock, not at "
            "full clock."]


class Measure:
    """One variant at one point of one archive: its samples (seconds) and what the archive says about it."""

    def __init__(self, path, rows):
        use(path, rows)
        first = rows.iloc[0]
        self.path = path
        self.variant = first.variant
        self.timer = first.timer
        self.seconds = np.sort(rows.seconds.to_numpy(dtype=float))
        for attribute in ATTRIBUTES + list(A.EXTENTS):
            setattr(self, attribute, first[attribute])
        self.throttled = int(rows.throttled.astype(bool).sum()) if "throttled" in rows.columns else 0
        self.median = float(np.median(self.seconds))
        self.q1, self.q3 = (float(q) for q in np.quantile(self.seconds, [0.25, 0.75]))

    @property
    def clock(self):
        return A.clock_of(self.timer)

    def gbps(self):
        """Essential GB/s per sample (the archive's essential bytes over each sample's time)."""
        return self.essential_bytes / self.seconds / 1e9

    def tflops(self):
        return self.essential_flops / self.seconds / 1e12

    def rate(self, compute):
        return self.tflops() if compute else self.gbps()

    def point(self):
        return A.point_label(self.rows, self.features, self.axes, self.depth)


def measure(path, variant, rows, features=1, depth=1):
    """The Measure of `variant` at a point, or None when the archive has no accepted sample of it there."""
    s = samples(path)
    at = s[(s.variant == variant) & (s.rows == rows) & (s.features == features) & (s.depth == depth)]
    if at.empty:
        return None
    timers = DEVICE_TIMERS if bool(at.on_device.iloc[0]) else (HOST_TIMER,)
    for timer in timers:
        hit = at[at.timer == timer]
        if len(hit):
            return Measure(path, hit)
    return None


def measures(path, operation, rows, features=1, depth=1):
    """Every variant of an operation at a point, as Measures."""
    s = samples(path)
    at = s[(s.operation == operation) & (s.rows == rows) & (s.features == features) & (s.depth == depth)]
    out = [measure(path, v, rows, features, depth) for v in sorted(at.variant.unique())]
    return [m for m in out if m is not None]


def target(values, threshold):
    """'met' / 'missed' from the median of per-sample values (higher is better), 'borderline' when the
    threshold lies inside their interquartile range."""
    values = np.asarray(values, dtype=float)
    q1, median, q3 = np.quantile(values, [0.25, 0.5, 0.75])
    if q1 <= threshold <= q3:
        return "borderline"
    return "met" if median >= threshold else "missed"


def vendor_ratio(m, vendor):
    """Per-sample ratios vendor median time / this variant's time (above 1: faster than the vendor)."""
    return np.median(vendor.seconds) / m.seconds


def roof_value(path, roof, timer, compute=False):
    """A roof of the archive on the timer's clock (GB/s or TFLOP/s), or None where none was timed on it."""
    a = archive(path)
    clock = A.clock_of(timer)
    if compute:
        value = a.compute_ceiling(roof, clock)
        return value / 1e12 if value else None
    value = a.ceiling(roof, clock)
    return value / 1e9 if value else None


def roof_cell(rate, roof_rate):
    """A share of a roof as a table cell: OTHER_CLOCK where no roof of the variant's clock exists."""
    if roof_rate is None:
        return OTHER_CLOCK
    return A.roof_share(100 * rate / roof_rate) if rate == rate else ""


def pick_roof(m):
    """The roof a variant is held against: its operation's compute ceiling; else device_read for read-only
    traffic (modelled writes under 1% of the traffic), device_copy otherwise; on a host, the roof of the cache level
    its modelled traffic fits (host_read_l1 ...), else host_read (Archive.host_roof)."""
    if not m.on_device:
        return archive(m.path).host_roof(m.modelled_bytes_read + m.modelled_bytes_written, A.clock_of(m.timer)), False
    if isinstance(m.compute_ceiling, str) and m.compute_ceiling:
        return m.compute_ceiling, True
    return device_bandwidth_roof(m), False


def device_bandwidth_roof(m):
    """The device bandwidth roof a variant's traffic is held against, whatever its compute roof: device_read for
    read-only traffic (modelled writes under 1% of the traffic), device_copy otherwise."""
    read, written = m.modelled_bytes_read, m.modelled_bytes_written
    if read == read and written == written and read + written > 0 and written < 0.01 * (read + written):
        return "device_read"
    return "device_copy"


def number(value, digits=None):
    """A rate or ratio for a table: thousands separators; 3 significant digits below 100 unless told."""
    if value is None or not np.isfinite(value):
        return ""
    if digits is not None:
        return f"{value:,.{digits}f}"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}" if abs(value) >= 1 else f"{value:.2g}"


def ratio(value):
    if value is None or not np.isfinite(value):
        return ""
    return f"{value:,.0f}×" if value >= 100 else f"{value:.2f}×"


def micro(seconds):
    us = seconds * 1e6
    return f"{us:,.0f}" if us >= 100 else f"{us:.3g}"


def iqr_text(values, digits=None):
    return effects.iqr(values, lambda v: number(v, digits))


# --- kstudy_bench JSON (Google Benchmark) ----------------------------------------------------------------------

UNITS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}


@lru_cache(maxsize=None)
def bench(path):
    """A kstudy_bench JSON: (context, DataFrame of its per-repetition samples: variant, shape, seconds, bytes).
    `bytes` is the operation's essential bytes, which the JSON stores as its rate counter "GB/s" (essential bytes
    per second of the repetition; modelled_MB is the variant's own modelled traffic)."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError) as error:
        raise ResultsError(f"{path}: not a kstudy_bench JSON ({error})")
    rows = []
    for b in doc.get("benchmarks", []):
        if b.get("run_type") != "iteration" or b.get("error_occurred"):
            continue
        parts = b["run_name"].split("/")
        seconds = b["real_time"] * UNITS[b["time_unit"]]
        rows.append({"variant": parts[0], "shape": parts[1], "seconds": seconds,
                     "bytes": b["GB/s"] * 1e9 * seconds if "GB/s" in b else np.nan})
    if not rows:
        raise ResultsError(f"{path}: no benchmark repetition")
    return doc.get("context", {}), pd.DataFrame(rows)


def bench_roof(context, name, clock="device_events"):
    """A bench JSON's roof in GB/s on `clock`, or None: schema 8 keys roofs by clock; an older JSON's
    ceiling_<name>_GBps was timed on the host clock."""
    for key, key_clock in ((f"ceiling_{name}_{clock}_GBps", clock), (f"ceiling_{name}_GBps", "host_wall")):
        if key in context:
            return float(context[key]) if key_clock == clock else None
    return None


def shape_label(shape):
    parts = shape.split("x")
    return "×".join(f"{int(p):,}" for p in parts)


# --- provenance --------------------------------------------------------------------------------------------------

def recorded(path):
    """(commit, dirty, diff sha256) an archive or bench JSON records about the tree that built it."""
    path = Path(path)
    if path.suffix not in (".json", ".h5"):  # a file a script wrote from archives (the block names them too)
        return None, None, None
    if path.suffix == ".json":
        attrs = {k: str(v) for k, v in json.loads(path.read_text()).get("context", {}).items()}
    else:
        attrs = archive(path).attrs
    return attrs.get("git_commit"), attrs.get("git_dirty"), attrs.get("git_diff_sha256")


def describe(path):
    commit, dirty, diff = recorded(path)
    if not commit:
        return "commit not recorded" if Path(path).suffix in (".json", ".h5") else "written from the archives beside it"
    if commit == "unknown":
        return "commit unknown"
    if dirty == "true":
        return f"dirty tree at `{commit[:7]}`" + (f", diff sha256 `{diff[:16]}`" if diff else "")
    return f"`{commit[:7]}`" + ("" if dirty == "false" else " (dirty flag not recorded)")


def provenance_line(block):
    parts = [f"`{name}` ({describe(path)})" for name, path in zip(block.archive_names, block.paths)]
    return (f"*Generated by `scripts/results.py` ({block.name}) from " + "; ".join(parts) + ".*")
