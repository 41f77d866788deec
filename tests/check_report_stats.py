#!/usr/bin/python3
"""The report's verdicts and throttle notes (issue 44), in process, on synthetic frames:

1. A ladder table of six rungs and a vendor (report/sections/ladder.py verdicts()): its rung family holds the five
   steps and the best rung against the first. Three comparisons and a fourth, nominally significant (raw p 0.021,
   interval clear of 1), would be "faster" alone; Holm over the six (hand-computed below) keeps the first three and
   makes the fourth inconclusive; the two steps within noise are ties printed with their intervals.
2. The throttle note (report/throttle.py): how many of a table's samples ran throttled, at which points, why and at
   which sampled SM clocks; samples of rows not in the table are not counted.
3. The sections that print medians beside a CPU reference or each other, through build_report on an archive built
   here with some samples flagged throttled: *Against an external CPU baseline* prints both medians with their IQR
   and the speedup with its interval, verdict and family (Holm over the table); *Crossover brackets* the first win's
   margin with its interval, verdict and family; *Block size* the best and worst block's medians with their IQR;
   each with the throttle note over its own table's samples, the CPU reference's counted where the table rests on
   them.

Exit 77 (ctest: skipped) when this python lacks h5py, pandas, numpy, matplotlib or scipy.
"""
import json
import math
import re
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

sys.dont_write_bytecode = True
from report_fixture import A, check, h5py, np, pd, report, write_tables  # noqa: E402  (exits 77 without them)

try:
    from scipy.stats import mannwhitneyu
except ImportError as error:
    print(f"skipped: {error}")
    sys.exit(77)

from kstudy_py.report import throttle  # noqa: E402
from kstudy_py.report.inputs import POINT_KEYS  # noqa: E402
from kstudy_py.report.sections import ladder  # noqa: E402
from kstudy_py.report.sections.speedups import median_cell  # noqa: E402

BASE = np.array([1.00, 1.01, 1.02, 1.03, 1.04, 1.05, 1.06, 1.07])  # eight samples, no two alike
# Each rung's samples: the previous rung's times a factor (rung 1 and 2 apart entirely; 2 -> 3 and 3 -> 4 partly
# overlapping; 4 -> 5 and 5 -> 6 within the noise).
RUNGS = {1: 10 * BASE, 2: 5 * BASE}
RUNGS[3] = RUNGS[2] * 0.955
RUNGS[4] = RUNGS[3] * 0.965
RUNGS[5] = RUNGS[4] * 0.995
RUNGS[6] = RUNGS[5] * 1.005
VENDOR = RUNGS[5] * 1.002
# Two-sided exact Mann-Whitney p of each claim (8 against 8, no ties): 2 / C(16, 8) where the samples separate.
SEPARATE = 2 / 12870
RAW = {(2, 1): SEPARATE, (3, 2): 0.004662004662004662, (4, 3): 0.020668220668220667, (5, 4): 0.7209013209013208,
       (6, 5): 0.7209013209013208, (5, 1): SEPARATE}
# Holm by hand over the six: sorted p1 = p2 = SEPARATE, p3 = 0.004662, p4 = 0.020668, p5 = p6 = 0.7209, multiplied
# by 6, 5, 4, 3, 2, 1, then made non-decreasing and capped at 1.
HOLM = {(2, 1): 6 * SEPARATE, (5, 1): 6 * SEPARATE, (3, 2): 4 * 0.004662004662004662,
        (4, 3): 3 * 0.020668220668220667, (5, 4): 1.0, (6, 5): 1.0}
VERDICT = {(2, 1): "beats", (5, 1): "beats", (3, 2): "beats", (4, 3): "inconclusive", (5, 4): "tie", (6, 5): "tie"}


def ladder_table():
    """The rows verdicts() reads, as ladder_rows() leaves them: rungs in order, then the vendor."""
    rows = []
    for rung, seconds in RUNGS.items():
        rows.append({"kind": "rung", "rung": rung, "variant": f"rung{rung}@cuda", "median_s": np.median(seconds),
                     "vendor_variant": "vendor@cuda", ladder.SECONDS: seconds,
                     ladder.PREVIOUS: f"rung{rung - 1}@cuda" if rung > 1 else None})
    rows.append({"kind": "vendor", "rung": 0, "variant": "vendor@cuda", "median_s": np.median(VENDOR),
                 "vendor_variant": "vendor@cuda", ladder.SECONDS: VENDOR, ladder.PREVIOUS: None})
    return pd.DataFrame(rows)


def check_ladder_family():
    t = ladder_table()
    found = ladder.verdicts(t)
    label = {rung: t.index[t.rung == rung][0] for rung in RUNGS}
    steps = {(rung, earlier): found[ladder.STEPS][(label[rung], label[earlier])] for rung, earlier in RAW}
    check(len(found[ladder.STEPS]) == 6, f"the rung family: five steps and best against first, {found[ladder.STEPS]}")
    for key, c in steps.items():
        a, b = RUNGS[key[0]], RUNGS[key[1]]
        check(math.isclose(mannwhitneyu(a, b, alternative="two-sided").pvalue, RAW[key], rel_tol=1e-9), key)
        check(math.isclose(c.p, RAW[key], rel_tol=1e-9), (key, c.p, RAW[key]))
        check(math.isclose(c.p_holm, HOLM[key], rel_tol=1e-9), (key, c.p_holm, HOLM[key]))
        check(c.verdict == VERDICT[key], (key, c.verdict, VERDICT[key]))
    # Rung 4's step: significant alone (raw p < 0.05, interval clear of 1), not after the correction.
    lost = steps[(4, 3)]
    check(lost.p < 0.05 and lost.high < 1 and lost.p_holm >= 0.05, (lost.p, lost.high, lost.p_holm))
    cell = ladder.step_cell(found, label[4], t)
    check(cell.startswith("1.036× (1.00") and cell.endswith(") inconclusive"), cell)
    # A tie prints its ratio and interval, the interval reaching 1.
    for rung in (5, 6):
        cell = ladder.step_cell(found, label[rung], t)
        m = re.fullmatch(r"(\d\.\d+)× \((\d\.\d+)–(\d\.\d+)\) tie", cell)
        check(m is not None and float(m[2]) <= 1 <= float(m[3]), cell)
    check(ladder.step_cell(found, label[3], t).endswith(") faster"), ladder.step_cell(found, label[3], t))
    check(ladder.step_cell(found, label[1], t) == "", "rung 1 is no step")
    # The vendor column: six rows against the vendor, its own row says it is the vendor.
    check(len(found[ladder.VENDOR]) == 6 and ladder.vendor_cell(found, t.index[-1], t) == "(the vendor)",
          found[ladder.VENDOR])
    lines = ladder.family_lines(found)
    check(lines[0].startswith("*Family: 6 comparisons (this table's rung claims") and "Holm-corrected at α = 0.05"
          in lines[0], lines)
    csv = ladder.with_verdicts(t.assign(**{c: np.nan for c in ("x_previous_rung_low", "x_previous_rung_high",
                                                               "previous_rung_p_holm", "x_vendor_low",
                                                               "x_vendor_high", "vendor_p_holm")},
                                        previous_rung_verdict="", vendor_verdict=""), found)
    check(csv.previous_rung_verdict.tolist()[:6] == ["", "beats", "beats", "inconclusive", "tie", "tie"],
          csv.previous_rung_verdict.tolist())


def samples(variant, rows, n, throttled=0, clock=1980, reasons=-1):
    """n accepted samples of one variant at rows^3, the first `throttled` of them flagged, at clock + i MHz."""
    out = []
    for i in range(n):
        hot = i < throttled
        out.append({"archive": "a", "experiment": "gemm", "variant": variant, "layout": "row_major",
                    "memory_kind": "", "direction": "", "rows": rows, "features": rows, "depth": rows,
                    "block_size": 0, "cache": "warm", "timer": "device_events", "seconds": 1e-3,
                    "throttled": int(hot), "min_sm_clock_mhz": clock + 15 * i if hot else 1980,
                    "throttle_reasons": reasons if hot else 0})
    return out


def check_throttle_note():
    frame = pd.DataFrame(samples("a@cuda", 4096, 21) + samples("b@cuda", 4096, 21)
                         + samples("a@cuda", 8192, 21, throttled=6, clock=1800, reasons=0x4)
                         + samples("b@cuda", 8192, 21, throttled=6, clock=1815, reasons=0x4)
                         + samples("c@cuda", 16384, 21, throttled=21, clock=1200, reasons=0x40))
    inputs = SimpleNamespace(samples=frame, variants=pd.DataFrame({"variant": ["a@cuda", "b@cuda", "c@cuda"],
                                                                   "axes": ["m,n,k"] * 3}))
    table = frame[frame.variant != "c@cuda"][POINT_KEYS].drop_duplicates()  # the table's rows: not c's
    note = throttle.note(inputs, table)
    want = ("*Throttled: 12 of 84 samples (at 8192×8192×8192) ran throttled (sw_power_cap), SM clock 1,800–1,890 "
            "MHz; they stay in the medians above.*")
    check(note == [want, ""], note)
    calm = table[table.rows == 4096]
    check(throttle.note(inputs, calm) == [], "no note under a table without throttled samples")
    both = frame[POINT_KEYS].drop_duplicates()
    note = throttle.note(inputs, both)[0]
    check(note.startswith("*Throttled: 33 of 105 samples (at 8192×8192×8192, 16384×16384×16384) ran throttled "
                          "(hw_thermal, sw_power_cap), SM clock 1,200–1,890 MHz"), note)
    unread = frame.assign(min_sm_clock_mhz=-1)
    note = throttle.note(SimpleNamespace(samples=unread, variants=inputs.variants), table)[0]
    check("no SM clock reading recorded for them" in note, note)


# An archive for the sections of item 3: a CPU reference (host_wall) and one device variant timed one-shot from
# pageable memory and resident (device events) at three row counts, the resident one also at three explicit block
# sizes; eight samples a point, ±2% around the point's median (no two alike, so every median's IQR is visible).
SWEEP_ROWS = (1024, 4096, 16384)
SWEEP_FEATURES = 8
TRIALS = 8
BLOCKS = {64: 1.5, 128: 1.0, 256: 1.2}  # block size: its time over the best block's
BENCH_SCALE = 0.9  # the benchmark file's CPU repetitions against the archive's CPU reference
# Throttled samples, (variant, timer, rows, block size): (trials flagged, first clock, NVML reasons bitmask). The
# device variant's one-shot win and the CPU reference one size below it, both in the crossover table; two samples
# of the slowest block, in the block-size table only.
THROTTLED = {("toy_fused@cuda", "one_shot", 16384, 0): (3, 1500, 0x4),
             ("toy_reference@openmp", "host_wall", 4096, 0): (1, 1560, 0x4),
             ("toy_fused@cuda", "device_events", 16384, 64): (2, 1700, 0x40)}


def sweep_seconds(variant, timer, rows, block):
    """The point's median: the CPU reference linear in rows; one-shot 50 µs of transfers and launches plus the
    kernel (beats the CPU from 16384 rows only); the resident kernel, times its block's factor."""
    if variant == "toy_reference@openmp":
        return rows * 1e-8
    if timer == "one_shot":
        return 5e-5 + rows * 1e-9
    return rows * 1e-10 * BLOCKS.get(block, 1.0)


def spread(median):
    """A point's TRIALS samples around `median`, evenly over ±2%."""
    return median * (1 + 0.02 * (np.arange(TRIALS) - 3.5) / 3.5)


def sweep_points():
    """(variant, timer, memory kind, rows, block size) of every timed point."""
    points = [("toy_reference@openmp", "host_wall", "", r, 0) for r in SWEEP_ROWS]
    points += [("toy_fused@cuda", "one_shot", "pageable", r, 0) for r in SWEEP_ROWS]
    points += [("toy_fused@cuda", "device_events", "device", r, 0) for r in SWEEP_ROWS]
    return points + [("toy_fused@cuda", "device_events", "device", SWEEP_ROWS[-1], b) for b in BLOCKS]


def write_sweep_archive(path):
    samples, variants = [], []
    for index, (variant, timer, memory, rows, block) in enumerate(sweep_points()):
        flagged, clock, reasons = THROTTLED.get((variant, timer, rows, block), (0, 0, 0))
        for trial, seconds in enumerate(spread(sweep_seconds(variant, timer, rows, block))):
            hot = trial < flagged
            samples.append({"experiment": "sweep", "variant": variant, "layout": "row_major", "memory_kind": memory,
                            "direction": "", "rows": rows, "features": SWEEP_FEATURES, "depth": 1,
                            "pitch": SWEEP_FEATURES, "block_size": block, "bytes": rows * SWEEP_FEATURES * 4,
                            "point": index, "replication": 0, "trial": trial, "timer": timer, "seconds": seconds,
                            "gate": "passed", "throttled": int(hot), "status": "ok", "occupancy": 0.0,
                            "cache": "warm", "min_sm_clock_mhz": clock + 20 * trial if hot else 1980,
                            "throttle_reasons": reasons if hot else 0})
    for variant, rows, block in dict.fromkeys((v, r, b) for v, _, _, r, b in sweep_points()):  # one per timer
        device = variant.endswith("@cuda")
        variants.append({"variant": variant, "operation": "toy", "axes": "rows,features",
                         "family": "toy_fused" if device else "cpu_reference", "fusion_level": "full",
                         "implementation": "kokkos" if device else "reference", "layout": "row_major",
                         "backend": "cuda" if device else "openmp", "on_device": int(device), "kernels_launched": 1,
                         "rows": rows, "features": SWEEP_FEATURES, "block_size": block,
                         "modelled_bytes_read": rows * SWEEP_FEATURES * 4, "modelled_bytes_written": rows * 4,
                         "essential_bytes": rows * (SWEEP_FEATURES + 1) * 4,
                         "essential_flops": 3 * rows * SWEEP_FEATURES})
    with h5py.File(path, "w") as f:
        f.attrs["schema_version"] = "9"
        e = f.create_group("experiments/sweep")
        e.attrs["definition"] = json.dumps({"kind": "sweep", "operation": ["toy"], "name": "sweep",
                                            "rows": list(SWEEP_ROWS), "features": [SWEEP_FEATURES]})
        write_tables(e, {"samples": pd.DataFrame(samples), "variants": pd.DataFrame(variants)})


def write_bench(path):
    """kstudy_bench's CPU reference at every row count: six repetitions a shape, BENCH_SCALE of the archive's."""
    cpu = {rows: spread(BENCH_SCALE * sweep_seconds("toy_reference@openmp", "", rows, 0))[:6] for rows in SWEEP_ROWS}
    bench = [{"run_name": f"toy_reference@openmp/{rows}x{SWEEP_FEATURES}", "run_type": "iteration",
              "real_time": t * 1e9, "time_unit": "ns"} for rows, times in cpu.items() for t in times]
    path.write_text(json.dumps({"context": {}, "benchmarks": bench}))


SPEED_CELL = r"(\d+\.\d+)× \((\d+\.\d+)–(\d+\.\d+)\) (faster|slower|tie|inconclusive)"


def section_text(md, title):
    return md.split(f"## {title}", 1)[1].split("\n## ", 1)[0]


def throttle_line(count, total, points, reasons, clocks):
    return (f"*Throttled: {count} of {total} samples (at {points}) ran throttled ({reasons}), SM clock {clocks}; they "
            "stay in the medians above.*")


def iqr_cell(seconds):
    values = np.asarray(seconds)
    return median_cell(np.median(values), *np.quantile(values, [0.25, 0.75]))


def check_bench_section(md, out):
    text = section_text(md, "Against an external CPU baseline")
    check("| median (IQR) | CPU median (IQR) | speedup (95% interval) verdict | IQRs separate |" in text, text)
    # The one-shot win at 16384 rows: both medians with their IQR, the speedup with its interval and verdict.
    variant = spread(sweep_seconds("toy_fused@cuda", "one_shot", 16384, 0))
    cpu = spread(BENCH_SCALE * sweep_seconds("toy_reference@openmp", "", 16384, 0))[:6]
    row = next((line for line in text.splitlines() if line.startswith("| 16,384×8 | one_shot pageable |")), "")
    check(f"| {iqr_cell(variant)} | {iqr_cell(cpu)} | " in row, (row, iqr_cell(variant), iqr_cell(cpu)))
    m = re.search(r"\| " + SPEED_CELL + r" \| yes, GPU faster \|$", row)
    want = np.median(cpu) / np.median(variant)
    check(m is not None and m[4] == "faster" and float(m[2]) <= round(want, 2) <= float(m[3])
          and math.isclose(float(m[1]), want, abs_tol=0.005), (row, want))
    rows = [line for line in text.splitlines() if line.startswith("| 1") or line.startswith("| 4")]
    check(len(rows) == 6 and all(re.search(SPEED_CELL, line) for line in rows), rows)
    check("*Family: 6 comparisons (this table's speedups" in text, text)
    # The table's rows: the best of each shape and boundary, 6 points of 8 samples; the CPU's are the benchmark's.
    check(throttle_line(3, 48, "16,384×8", "sw_power_cap", "1,500–1,540 MHz") in text, text)
    csv = pd.read_csv(out / "speedup_vs_bench_cpu.csv", keep_default_na=False)
    shown = csv[csv.verdict != ""]
    check(len(shown) == 6 and (shown.speedup_low <= shown.speedup).all() and (shown.speedup <= shown.speedup_high)
          .all(), shown.to_dict("records"))


def check_crossover_section(md, out):
    text = section_text(md, "Crossover brackets")
    row = next((line for line in text.splitlines() if line.startswith("| `toy_fused@cuda` |")), "")
    want = sweep_seconds("toy_reference@openmp", "", 16384, 0) / sweep_seconds("toy_fused@cuda", "one_shot", 16384, 0)
    m = re.search(r"\| \(4096, 16384\), " + SPEED_CELL + r", stays ahead \|$", row)
    check(m is not None and m[4] == "faster" and math.isclose(float(m[1]), want, abs_tol=0.005)
          and float(m[2]) <= round(want, 2) <= float(m[3]), (row, want))
    check("*Family: 1 comparison (this table's first-win margins" in text, text)
    # The table rests on the one-shot series at every row count and the CPU reference there: 6 points of 8.
    check(throttle_line(4, 48, "4,096×8, 16,384×8", "sw_power_cap", "1,500–1,560 MHz") in text, text)
    csv = pd.read_csv(out / "crossover.csv")
    r = csv[csv.timer == "one_shot"].iloc[0]
    check(r.first_win_verdict == "beats" and r.first_win_margin_low <= r.first_win_margin <= r.first_win_margin_high,
          r.to_dict())


def check_block_size_section(md):
    text = section_text(md, "Block size")
    best = spread(sweep_seconds("toy_fused@cuda", "device_events", 16384, 128))
    worst = spread(sweep_seconds("toy_fused@cuda", "device_events", 16384, 64))
    cell = f"best 128: {iqr_cell(best)}, worst 64: {iqr_cell(worst)} (×1.50)"
    check(f"| `toy_fused@cuda` | {cell} |" in text, (cell, text))
    # Every block's samples, not only the best's and worst's: 3 points of 8.
    check(throttle_line(2, 24, "16,384×8", "hw_thermal", "1,700–1,720 MHz") in text, text)


def check_section_spreads():
    with tempfile.TemporaryDirectory(prefix="kstudy_report_stats_") as tmp:
        tmp = Path(tmp)
        write_sweep_archive(tmp / "toy.h5")
        write_bench(tmp / "bench.json")
        sections = report.build_report(A.load([tmp / "toy.h5"]), tmp / "out", cpu_baseline=tmp / "bench.json")
        by_key = {s.key: s for s in sections}
        for key in ("bench_baseline", "crossover", "block_size"):
            check(not by_key[key].skipped, (key, by_key[key].skipped))
        md = (tmp / "out" / "report.md").read_text()
        check_bench_section(md, tmp / "out")
        check_crossover_section(md, tmp / "out")
        check_block_size_section(md)


def main():
    check_ladder_family()
    check_throttle_note()
    check_section_spreads()
    print("report statistics checks passed")


if __name__ == "__main__":
    main()
