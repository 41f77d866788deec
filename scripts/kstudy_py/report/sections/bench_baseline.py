"""Device timings of the archives against the CPU reference of a kstudy_bench Google Benchmark JSON
(`--cpu-baseline`), at the shapes both hold."""
from ... import archive as A
from .. import section

COLUMNS = ["archive", "experiment", "variant", *A.point_key("samples", without=("block_size",)), "timer", "boundary",
           "n", "median", "q1", "q3", "baseline", "cpu_n", "cpu_median", "cpu_q1", "cpu_q3", "speedup", "beats_cpu_iqr"]
EXPLANATION = ("CPU reference from `{name}` (each sample = one Google Benchmark repetition's mean time) against the "
               "archives' device timings; only shapes present in both files (host variants of the archives are left "
               "out: they ran in another process). Crossover brackets need a CPU baseline at every tested row count, "
               "so they stay with the archive's own baseline.")


def separation(best):
    if best.beats_cpu_iqr:
        return "yes, GPU faster"
    return "yes, CPU faster" if best.q1 > best.cpu_q3 else "no"


@section("bench_baseline", "Against an external CPU baseline{inputs.cpu_baseline_in_title}", order=20)
def bench_baseline(inputs, sec):
    if not inputs.cpu_baseline_path:
        return sec.skip("no `--cpu-baseline` benchmark file given")
    base = inputs.bench_baseline
    if base.empty:
        return sec.skip("no CPU reference repetitions in that benchmark file")
    s = inputs.points[(inputs.points.block_size == 0) & inputs.points.timer.map(A.is_device_timer)]
    renamed = base.rename(columns={"median": "cpu_median", "q1": "cpu_q1", "q3": "cpu_q3", "n": "cpu_n"})
    # The same operation only: another operation's point may share the benchmark's extents.
    shape = ["operation", *A.EXTENTS]  # the benchmark names its points by their extents
    df = s.merge(renamed[["baseline", *shape, "cpu_median", "cpu_q1", "cpu_q3", "cpu_n"]], on=shape)
    if df.empty:
        shapes = ", ".join("x".join(str(x) for x in (r, f, d)[:3 if d > 1 else 2])
                           for r, f, d in zip(base.rows, base.features, base.depth))
        return sec.skip(f"the benchmark's CPU shapes ({shapes}) are not in the archives")
    df["speedup"] = df.cpu_median / df["median"]
    df["beats_cpu_iqr"] = df.q3 < df.cpu_q1
    df = df.sort_values([*A.EXTENTS, "boundary", "median"])
    inputs.write_csv(df[COLUMNS], "speedup_vs_bench_cpu.csv", sec,
                     "speedups against the benchmark file's CPU reference repetitions (same shapes only)")
    sec.lines += [EXPLANATION.format(name=inputs.cpu_baseline_name), "",
                  "| shape | boundary | best variant | experiment | median | CPU median | speedup | IQRs separate |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for (r, f, d, b), g in df.groupby([*A.EXTENTS, "boundary"]):
        best = g.loc[g["median"].idxmin()]
        point = A.point_label(r, f, best["axes"], d)
        sec.lines.append(f"| {point} | {b} | `{best.variant}` | {best.archive}/{best.experiment} | "
                         f"{A.fmt_seconds(best['median'])} | {A.fmt_seconds(best.cpu_median)} | {best.speedup:.2f}× | "
                         f"{separation(best)} |")
    return sec.done(df)
