"""What every section reads: the archives, the options, the variants table and the per-point statistics."""
import json
from functools import cached_property
from pathlib import Path

import pandas as pd

from .. import archive as A
from .variants import REFERENCE_FAMILY, variant_table

# A timed point: the archive's point key (kstudy schema's point_key) within an experiment, per variant and timer.
POINT_KEYS = ["archive", "experiment", "variant", *A.point_key("samples"), "timer"]
# The problem a speedup compares at: the point key less the columns that say how a variant ran rather than which
# problem it solved. A variant is compared with its experiment's CPU reference at the same problem (extents, cache
# mode), whatever its layout, host memory and copy direction (the reference's are its own) and at the default block
# size (both 0).
PROBLEM = ["operation", *A.point_key("samples", without=("layout", "memory_kind", "direction", "block_size"))]
# The report's reference shape (--shape ROWSxFEATURES): the first two axes.
SHAPE = list(A.EXTENTS[:2])
VARIANT_ATTRIBUTES = ["operation", "axes", "family", "fusion_level", "implementation", "backend", "on_device",
                      "kernels_launched", "rung", "essential_bytes", "essential_flops", "compute_ceiling",
                      "peak_device_bytes", "tuned_parameters"]
HOST_IN_HOST_OUT = A.HOST_IN_HOST_OUT
BACKEND_PREFERENCE = {"openmp": 0, "threads": 1, "serial": 2}  # which CPU reference is the baseline


class ReportInputs:
    def __init__(self, archives, out, shape, cpu_baseline, notes, command):
        self.archives = archives
        self.out = Path(out)
        self._shape = tuple(shape) if shape else None
        self.cpu_baseline_path = Path(cpu_baseline) if cpu_baseline else None
        self.cpu_baseline_name = self.cpu_baseline_path.name if cpu_baseline else ""
        self.cpu_baseline_in_title = f" ({self.cpu_baseline_name})" if cpu_baseline else ""
        self.notes = list(notes)
        self.command = command
        self.variants = variant_table(archives)
        self.operations = set(self.variants.operation)

    def experiments(self, kind):
        for a in self.archives:
            for e in a.experiments.values():
                if e.kind == kind:
                    yield a, e

    def archive_of(self, label):
        return next(a for a in self.archives if a.label == label)

    def write_csv(self, df, name, sec, description):
        df.to_csv(self.out / name, index=False, float_format="%.9g")
        sec.tables.append((name, description))

    def timed_experiments(self):
        """(archive, experiment) of every experiment whose samples the per-point statistics are computed from:
        a variants table names its variants, it is a steady-state experiment, and it has accepted samples."""
        timed = set(zip(self.variants.archive, self.variants.experiment))
        for a in self.archives:
            for e in a.experiments.values():
                if (a.label, e.name) in timed and e.steady_state and not e.accepted().empty:
                    yield a, e

    @cached_property
    def samples(self):
        """Every accepted sample `points` is computed from, with its archive: what a verdict tests and a throttle
        note counts, by the same POINT_KEYS as the medians it stands under."""
        frames = [e.accepted() for _, e in self.timed_experiments()]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=POINT_KEYS + ["seconds"])

    @cached_property
    def _sample_groups(self):
        return self.samples.groupby(POINT_KEYS, dropna=False).indices if len(self.samples) else {}

    def rows_of(self, point):
        """The accepted samples under one row of `points` (anything with its POINT_KEYS as attributes or keys)."""
        get = point.get if isinstance(point, dict) else lambda k: getattr(point, k)
        index = self._sample_groups.get(tuple(get(k) for k in POINT_KEYS))
        return self.samples.iloc[index] if index is not None else self.samples.iloc[:0]

    def seconds(self, point):
        """The seconds of the samples under one row of `points`: what its median is the median of."""
        return self.rows_of(point).seconds.to_numpy(dtype=float)

    def reference_points(self, rows):
        """The CPU reference's rows of `points` that `rows` (rows of `speedups`, which name their `baseline`) are
        compared with: the same experiment and problem, host_wall, default block size."""
        ref = self.points[(self.points.timer == "host_wall") & (self.points.block_size == 0)]
        keys = ["archive", "experiment", *PROBLEM]
        wanted = rows[keys + ["baseline"]].drop_duplicates().rename(columns={"baseline": "variant"})
        return ref.merge(wanted, on=keys + ["variant"], how="inner")

    @cached_property
    def points(self):
        """Median, quartiles, count per timed point of every experiment with a variants table, beside what the
        table says about the variant (family, backend, on_device, essential bytes, ...) and its boundary."""
        frames = []
        for _, e in self.timed_experiments():
            s = e.accepted()
            aggs = {"pitch": ("pitch", "max"), "bytes": ("bytes", "max")}
            if "occupancy" in s.columns:  # calculated occupancy (added to samples after the first archives)
                aggs["occupancy"] = ("occupancy", "max")
            extra = s.groupby(POINT_KEYS, dropna=False).agg(**aggs).reset_index()
            frames.append(A.stats(s, POINT_KEYS).merge(extra, on=POINT_KEYS))
        if not frames:
            return pd.DataFrame(columns=POINT_KEYS + ["n", "median", "q1", "q3", "min", "max", "pitch", "bytes",
                                                      "boundary"] + VARIANT_ATTRIBUTES)
        df = pd.concat(frames, ignore_index=True)
        df["boundary"] = [A.boundary(t, m) for t, m in zip(df.timer, df.memory_kind)]
        keys = ["archive", "experiment", "variant", *A.point_key("variants")]
        return df.merge(self.variants[keys + VARIANT_ATTRIBUTES], on=keys, how="left")

    def points_of(self, operation):
        """The timed points of one operation's variants (what a section registered for it reads)."""
        return self.points[self.points.operation == operation]

    @cached_property
    def baselines(self):
        """CPU reference per archive, experiment and problem (PROBLEM: the operation and its point): the reference
        family's host_wall median, the OpenMP backend preferred. Per operation: an experiment of several operations
        (stream) has a CPU reference for each."""
        out = []
        for _, group in self.points.groupby(["archive", "experiment", "operation"]):
            ref = group[(group.family == REFERENCE_FAMILY) & (group.timer == "host_wall") & (group.block_size == 0)]
            if ref.empty:
                continue
            backends = dict(zip(ref.variant, ref.backend))
            chosen = sorted(backends, key=lambda v: (BACKEND_PREFERENCE.get(backends[v], 9), v))[0]
            r = ref[ref.variant == chosen][["archive", "experiment", *PROBLEM, "median", "q1", "q3", "n"]]
            out.append(r.rename(columns={"median": "cpu_median", "q1": "cpu_q1", "q3": "cpu_q3", "n": "cpu_n"})
                       .assign(baseline=chosen))
        if not out:
            return pd.DataFrame(columns=["archive", "experiment", *PROBLEM, "cpu_median", "cpu_q1", "cpu_q3", "cpu_n",
                                         "baseline"])
        return pd.concat(out, ignore_index=True)

    @cached_property
    def speedups(self):
        """Every default-block point beside its experiment's CPU reference at the same shape."""
        s = self.points[self.points.block_size == 0]
        df = s.merge(self.baselines, on=["archive", "experiment", *PROBLEM], how="inner")
        df["speedup"] = df.cpu_median / df["median"]
        return df

    def primary_operation(self):
        """The operation the speedup summaries describe: the one with the most measured points (the others are in
        speedups.csv and, per operation, in the bandwidth section)."""
        sp = self.speedups.drop_duplicates(PROBLEM)
        if sp.empty:
            return None
        counts = sp.groupby("operation").size()
        return counts[counts == counts.max()].index[0]

    def primary_sweep(self, features=None, operation=None):
        """(archive, experiment) of the speedups with the most row counts (at `features`, of `operation` if
        given): the one experiment a rows-dependent headline or figure is computed within."""
        sp = self.speedups if features is None else self.speedups[self.speedups.features == features]
        sp = sp if operation is None else sp[sp.operation == operation]
        if sp.empty:
            return None
        counts = sp.groupby(["archive", "experiment"]).rows.nunique()
        return counts[counts == counts.max()].index[0]

    @cached_property
    def bench_repetitions(self):
        """The reference family's per-repetition times in a Google Benchmark JSON (kstudy_bench), one row per
        repetition (baseline, operation, extents, seconds), of one CPU reference (OpenMP preferred); the variants
        table says which benchmark names are CPU references. What a comparison with the benchmark's CPU tests."""
        if not self.cpu_baseline_path:
            return pd.DataFrame()
        reference = self.variants[self.variants.family == REFERENCE_FAMILY]
        backends = dict(zip(reference.variant, reference.backend))
        operations = dict(zip(reference.variant, reference.operation))
        doc = json.loads(self.cpu_baseline_path.read_text())
        scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
        rows = []
        for b in doc.get("benchmarks", []):
            if b.get("run_type") != "iteration" or b.get("error_occurred"):
                continue
            parts = b["run_name"].split("/")
            if parts[0] not in backends or len(parts) < 2 or "x" not in parts[1]:
                continue
            r, f, d = ([int(x) for x in parts[1].split("x")] + [1, 1])[:3]  # 2 or 3 extents: GEMM's m x n x k
            rows.append({"baseline": parts[0], "operation": operations[parts[0]], "rows": r, "features": f,
                         "depth": d, "seconds": b["real_time"] * scale[b.get("time_unit", "ns")]})
        df = pd.DataFrame(rows)
        if df.empty:
            return df
        return df[df.baseline == sorted(df.baseline.unique(), key=lambda v: (backends[v] != "openmp", v))[0]]

    @cached_property
    def bench_baseline(self):
        """bench_repetitions as stats per shape (median, quartiles, count)."""
        df = self.bench_repetitions
        return A.stats(df, ["baseline", "operation", *A.EXTENTS]) if len(df) else df

    def bench_seconds(self, point):
        """The benchmark's CPU repetitions at one point's operation and extents (a row of `points`): what its
        `bench_baseline` median is the median of."""
        b = self.bench_repetitions
        at = b.operation == point["operation"]
        for k in A.EXTENTS:
            at &= b[k] == point[k]
        return b[at].seconds.to_numpy(dtype=float)

    def bench_cpu_at(self, rows, features, operation, depth=1):
        b = self.bench_baseline
        hit = (b[(b.operation == operation) & (b.rows == rows) & (b.features == features) & (b.depth == depth)]
               if len(b) else b)
        return float(hit["median"].iloc[0]) if len(hit) else None

    @property
    def shape(self):
        """The reference point of the speedup table, waterfall and roofline: the one asked for, else the shape
        measured with the most variants beside a CPU reference (the largest of those: the farthest from launch
        overhead). Read from the archives: no operation's shape is a default here."""
        if self._shape is None:
            s = self.speedups if len(self.speedups) else self.points
            if len(s) == 0:
                self._shape = (0, 0)
            else:
                counts = s.groupby(SHAPE).variant.nunique().reset_index()
                counts["size"] = counts.rows * counts.features
                best = counts.sort_values(["variant", "size"]).iloc[-1]
                self._shape = (int(best.rows), int(best.features))
        return self._shape

    def shape_label(self, rows=None, features=None):
        rows, features = (rows, features) if rows is not None else self.shape
        return f"{A.fmt_rows(rows)}×{features}"
