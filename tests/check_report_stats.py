#!/usr/bin/python3
"""The report's verdicts and throttle notes (issue 44), in process, on synthetic frames:

1. A ladder table of six rungs and a vendor (report/sections/ladder.py verdicts()): its rung family holds the five
   steps and the best rung against the first. Three comparisons and a fourth, nominally significant (raw p 0.021,
   interval clear of 1), would be "faster" alone; Holm over the six (hand-computed below) keeps the first three and
   makes the fourth inconclusive; the two steps within noise are ties printed with their intervals.
2. The throttle note (report/throttle.py): how many of a table's samples ran throttled, at which points, why and at
   which sampled SM clocks; samples of rows not in the table are not counted.

Exit 77 (ctest: skipped) when this python lacks h5py, pandas, numpy, matplotlib or scipy.
"""
import math
import re
import sys
from types import SimpleNamespace

sys.dont_write_bytecode = True
from report_fixture import check, np, pd  # noqa: E402  (exits 77 without the report's modules)

try:
    from scipy.stats import mannwhitneyu
except ImportError as error:
    print(f"skipped: {error}")
    sys.exit(77)

from kstudy_py.report import throttle  # noqa: E402
from kstudy_py.report.inputs import POINT_KEYS  # noqa: E402
from kstudy_py.report.sections import ladder  # noqa: E402

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


def main():
    check_ladder_family()
    check_throttle_note()
    print("report statistics checks passed")


if __name__ == "__main__":
    main()
