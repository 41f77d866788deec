"""Device timings of the archives against the CPU reference of a kstudy_bench Google Benchmark JSON
(`--cpu-baseline`), at the shapes both hold.

Each speedup the table states is a comparison of the variant's samples with the benchmark's repetitions
(effects.py): the ratio of medians with its bootstrap interval and a Mann-Whitney U verdict, Holm-corrected over
the table's speedups; both medians are printed with their IQR, and the throttled samples they rest on are
disclosed (report/throttle.py)."""
from ... import archive as A
from ... import effects
from .. import section, throttle
from .speedups import median_cell, with_verdicts

COLUMNS = ["archive", "experiment", "variant", *A.point_key("samples", without=("block_size",)), "timer", "boundary",
           "n", "median", "q1", "q3", "baseline", "cpu_n", "cpu_median", "cpu_q1", "cpu_q3", "speedup",
           "speedup_low", "speedup_high", "verdict", "p_holm", "beats_cpu_iqr"]
EXPLANATION = ("CPU reference from `{name}` (each sample = one Google Benchmark repetition's mean time) against the "
               "archives' device timings; only shapes present in both files (host variants of the archives are left "
               "out: they ran in another process). Crossover brackets need a CPU baseline at every tested row count, "
               "so they stay with the archive's own baseline. Medians with their interquartile range (the CPU's over "
               "the repetitions); the speedup (CPU median ÷ variant median) with its 95% bootstrap interval and "
               "verdict, Holm-corrected over the table's speedups; *IQRs separate* is the older criterion (the "
               "variant's third quartile below the CPU's first, or the reverse), kept beside it.")


def separation(best):
    if best.beats_cpu_iqr:
        return "yes, GPU faster"
    return "yes, CPU faster" if best.q1 > best.cpu_q3 else "no"


def against_bench(inputs, best):
    """{row of `best`: Comparison of its samples with the benchmark's repetitions at its shape}, one Holm family."""
    family, found = effects.Family(), {}
    for i, r in best.iterrows():
        found[i] = family.add(inputs.seconds(r), inputs.bench_seconds(r),
                              f"{A.point_label(r.rows, r.features, r['axes'], r.depth)} {r.boundary}")
    family.resolve()
    return found


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
    best = df.loc[df.groupby([*A.EXTENTS, "boundary"], sort=True)["median"].idxmin()]
    found = against_bench(inputs, best)
    df = with_verdicts(df, found)  # the interval and verdict of the rows the table shows; the others' stay empty
    inputs.write_csv(df[COLUMNS], "speedup_vs_bench_cpu.csv", sec,
                     "speedups against the benchmark file's CPU reference repetitions (same shapes only); the best "
                     "variant per shape and boundary with the speedup's 95% interval, Holm-corrected verdict and p")
    sec.lines += [EXPLANATION.format(name=inputs.cpu_baseline_name), "",
                  "| shape | boundary | best variant | experiment | median (IQR) | CPU median (IQR) | "
                  "speedup (95% interval) verdict | IQRs separate |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for i, r in best.iterrows():
        point = A.point_label(r.rows, r.features, r["axes"], r.depth)
        sec.lines.append(f"| {point} | {r.boundary} | `{r.variant}` | {r.archive}/{r.experiment} | "
                         f"{median_cell(r['median'], r.q1, r.q3)} | {median_cell(r.cpu_median, r.cpu_q1, r.cpu_q3)} | "
                         f"{found[i].speed_cell()} | {separation(r)} |")
    # The benchmark's repetitions carry no throttle flag: the note counts the archives' samples of the table.
    sec.lines += ["", effects.family_line(found.values(), "this table's speedups: each shape and boundary's best "
                                          "variant against the benchmark's CPU repetitions"), ""]
    sec.lines += throttle.note(inputs, best) + [effects.words_text()]
    return sec.done(df)
