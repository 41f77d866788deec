#!/usr/bin/python3
"""Whether a conclusion carries over between two cards (scripts/kstudy_py/carry_over.py, issue 45), on synthetic
samples with known answers: the same ratios on both cards hold; a memory-bound variant that follows the bandwidth
roofs' ratio beside a compute-bound reference moves its ratio and is explained by bandwidth; two variants whose order
flips, each order resolved, do not carry over; a winner that changes within the noise still holds; throttled samples
are reported as power with their counts and NVML reasons; a call whose traffic fits one card's L2 only is classed L2;
a move no class predicts is said to be unexplained; too few samples are refused. Then `kstudy compare --by machine`
(through scripts/kstudy_report.py) on the committed H100 and H200 attention archives: the verdicts it prints are the
ones carry_over.compare gives, which the carries_over block of docs/results.md shows.

    tests/check_carry_over.py REPOSITORY
Exit 77 (ctest: skipped) when this python lacks h5py, pandas, numpy or scipy.
"""
import subprocess
import sys

from check_support import Cases, repository, require

np = require("h5py", "numpy", "pandas", "scipy")[1]  # h5py: the archive reader needs it
REPO = repository()
sys.path.insert(0, str(REPO / "scripts"))
from kstudy_py import carry_over as C  # noqa: E402

cases = Cases()
check = cases.check


MIB = 1 << 20
H100 = C.Card("H100", "NVIDIA H100 80GB HBM3", sms=132, clock_mhz=1980, l2_bytes=50 * MIB)
H200 = C.Card("H200", "NVIDIA H200", sms=132, clock_mhz=1980, l2_bytes=60 * MIB)
ROOF_A, ROOF_B = 3.0e12, 4.2e12  # bandwidth roofs, B/s: a 1.40x ratio
rng = np.random.default_rng(45)


def times(median, n=18, spread=0.005):
    return median * rng.lognormal(0.0, spread, n)


def compute_bound(name, t_a, t_b, share=0.7, **a_side):
    """A variant at `share` of its compute roof on both cards (its traffic far below the bandwidth roof)."""
    return C.Entry(name, C.Side(times(t_a), compute_share=share, bandwidth_share=0.05, bandwidth_roof=ROOF_A,
                                **a_side),
                   C.Side(times(t_b), compute_share=share * t_a / t_b, bandwidth_share=0.05, bandwidth_roof=ROOF_B),
                   working_set=2e9)


def memory_bound(name, t_a, t_b, working_set=4e9, share_a=0.9):
    return C.Entry(name, C.Side(times(t_a), bandwidth_share=share_a, bandwidth_roof=ROOF_A),
                   C.Side(times(t_b), bandwidth_share=share_a * (t_a / t_b) * ROOF_A / ROOF_B,
                          bandwidth_roof=ROOF_B),
                   working_set=working_set)


def entries(*items):
    return {e.variant: e for e in items}


# Holds: the same ratios (1.3x, 2x the reference) on both cards, compute-bound, time equal across the cards.
j = C.judge(entries(compute_bound("fast@cuda", 1e-3, 1e-3), compute_bound("mid@cuda", 1.3e-3, 1.3e-3),
                    compute_bound("slow@cuda", 2e-3, 2e-3)), H100, H200)
check(j.verdict == "holds", f"same ratios on both cards: holds (got {j.verdict})")
check(j.reference == "fast@cuda" and j.winner_a == j.winner_b == "fast@cuda",
      "the reference is the first card's fastest")
check(j.moved == [] and j.reversals == [], "nothing moved, nothing reversed")
check("compute-bound: same SMs and clocks" in j.reason, f"compute-bound reason names the cards' SMs ({j.reason})")
check(j.rank_b == {"fast@cuda": 1, "mid@cuda": 2, "slow@cuda": 3}, "ranks by median on the second card")
check(abs(j.ratio_a["mid@cuda"][0] - 1.3) < 0.02 and j.ratio_a["mid@cuda"][1] < 1.3 < j.ratio_a["mid@cuda"][2],
      "the ratio to the reference with an interval around it")

# A named reference (by family) replaces the fastest.
j = C.judge(entries(compute_bound("fast@cuda", 1e-3, 1e-3), compute_bound("mid@cuda", 1.3e-3, 1.3e-3)),
            H100, H200, reference="mid")
check(j.reference == "mid@cuda" and abs(j.ratio_a["fast@cuda"][0] - 1 / 1.3) < 0.02,
      "reference=mid: every ratio against mid@cuda")

# Ranking holds, ratio moves: the memory-bound variant speeds up by the roof ratio (1.4x), the compute-bound
# reference does not; the order stays.
j = C.judge(entries(compute_bound("tensor@cuda", 1e-3, 1e-3), memory_bound("streaming@cuda", 3e-3, 3e-3 / 1.4)),
            H100, H200)
check(j.verdict == "ranking holds, ratio moves", f"a memory-bound ratio that moves: ratio moves (got {j.verdict})")
check(j.moved == ["streaming@cuda"] and not j.reversals, "the memory-bound variant is the one that moved")
check(j.kinds == {"tensor@cuda": "compute", "streaming@cuda": "bandwidth"}, f"classes {j.kinds}")
check("bandwidth (1.40× roof ratio)" in j.reason and "not explained" not in j.reason,
      f"the move is explained by the roofs' ratio ({j.reason})")

# Does not carry over: the compute-bound winner of the first card is 15% slower than the memory-bound variant on
# the second, which the bandwidth ratio explains.
j = C.judge(entries(compute_bound("tensor@cuda", 1.0e-3, 1.0e-3), memory_bound("streaming@cuda", 1.15e-3, 0.85e-3)),
            H100, H200)
check(j.verdict == "does not carry over", f"a resolved reversal: does not carry over (got {j.verdict})")
check(j.reversals == [("tensor@cuda", "streaming@cuda")], f"the reversed pair, first card's order first "
      f"({j.reversals})")
check(j.winner_a == "tensor@cuda" and j.winner_b == "streaming@cuda", "the winners of each card")
check("not explained" not in j.reason, "a reversal the bandwidth ratio predicts is explained")

# The same reversal between two compute-bound variants on cards of the same SMs and clocks: nothing in the archives
# predicts it, and the reason says so.
j = C.judge(entries(compute_bound("a@cuda", 1.0e-3, 1.2e-3), compute_bound("b@cuda", 1.1e-3, 1.0e-3)), H100, H200)
check(j.verdict == "does not carry over", f"a compute-bound reversal: does not carry over (got {j.verdict})")
check("not explained by bandwidth, L2 or power" in j.reason, f"an unexplained reversal is said to be ({j.reason})")

# A class explains a move only where it predicts at least half of it: a roof ratio 1.45x beside 1.40x predicts 3.6%,
# not the 29% this variant gained.
big = C.Entry("big@cuda", C.Side(times(2e-3), bandwidth_share=0.5, bandwidth_roof=3.0e12),
              C.Side(times(2e-3 / 1.8), bandwidth_share=0.62, bandwidth_roof=4.35e12), working_set=4e9)
j = C.judge(entries(memory_bound("ref@cuda", 1e-3, 1e-3 / 1.4), big), H100, H200)
check(j.moved == ["big@cuda"] and "not explained by bandwidth, L2 or power: `big`" in j.reason,
      f"a 1.45x roof beside 1.40x does not explain a 29% move ({j.reason})")

# A winner that changes within the noise is no reversal: 0.5% apart with 3% spread.
noisy = entries(C.Entry("a@cuda", C.Side(times(1.000e-3, spread=0.03), compute_share=0.7),
                        C.Side(times(1.005e-3, spread=0.03), compute_share=0.7)),
                C.Entry("b@cuda", C.Side(times(1.005e-3, spread=0.03), compute_share=0.7),
                        C.Side(times(1.000e-3, spread=0.03), compute_share=0.7)))
j = C.judge(noisy, H100, H200)
check(j.verdict == "holds" and not j.reversals, f"a tie whose order flips holds (got {j.verdict}, {j.reversals})")

# Throttled samples: every sample of the first card's reference ran under sw_power_cap.
hot = compute_bound("tensor@cuda", 1e-3, 1e-3, throttled=18, reasons=("sw_power_cap",))
j = C.judge(entries(hot, compute_bound("other@cuda", 1.5e-3, 1.5e-3)), H100, H200)
check("power (sw_power_cap): 18 of 36 H100 samples" in j.reason, f"throttled samples reported as power ({j.reason})")
check("H200 samples" not in j.reason, "no throttled sample claimed for the second card")
thermal = compute_bound("tensor@cuda", 1e-3, 1e-3, throttled=4, reasons=("sw_thermal",))
j = C.judge(entries(thermal, compute_bound("other@cuda", 1.5e-3, 1.5e-3)), H100, H200)
check("throttled (sw_thermal): 4 of 36 H100 samples" in j.reason,
      f"a thermal slowdown is not called power ({j.reason})")
text = C.power_text(entries(hot), H100, H200)
check(text == "power (sw_power_cap): 18 of 18 H100 samples", f"power_text alone ({text})")

# L2: 55 MiB a call fits the H200's 60 MiB L2, not the H100's 50 MiB; 20 MiB fits both; 2 GB neither.
for working_set, expected in ((55 * MIB, "l2_one"), (20 * MIB, "l2_both"), (2e9, "bandwidth")):
    got = C.kind(memory_bound("x@cuda", 1e-4, 0.7e-4, working_set=working_set), H100, H200)
    check(got == expected, f"{working_set / MIB:.0f} MiB a call: {expected} (got {got})")
text = C.kind_text("l2_one", memory_bound("x@cuda", 1e-4, 0.7e-4, working_set=55 * MIB), H100, H200)
check(text == "L2 (55 MiB a call fits the H200's 60 MiB L2, not the H100's 50 MiB)", f"the L2 reason ({text})")

# Neither roof: under 10% of both.
tiny = C.Entry("t@cuda", C.Side(times(5e-6), bandwidth_share=0.01, compute_share=0.02, bandwidth_roof=ROOF_A),
               C.Side(times(5e-6), bandwidth_share=0.008, compute_share=0.02, bandwidth_roof=ROOF_B), working_set=1e3)
check(C.kind(tiny, H100, H200) == "latency", "a 5 µs call under 10% of both roofs: neither roof")
check(C.kind(C.Entry("u@cuda", C.Side(times(1e-3)), C.Side(times(1e-3))), H100, H200) == "unknown",
      "no roof on the timer's clock: unknown")

# Too few samples: 3 a side.
few = entries(C.Entry("a@cuda", C.Side(times(1e-3, n=3), compute_share=0.7), C.Side(times(1e-3), compute_share=0.7)),
              C.Entry("b@cuda", C.Side(times(2e-3), compute_share=0.7), C.Side(times(2e-3), compute_share=0.7)))
check(C.judge(few, H100, H200).verdict == "too few samples", "3 samples on a card: too few samples")

# Cards that differ in SMs or clocks are not said to share them.
other = C.Card("X", "Some GPU", sms=108, clock_mhz=1410, l2_bytes=40 * MIB)
check("SMs and clocks differ (132 × 1,980 MHz vs 108 × 1,410 MHz)" in C.kind_text("compute", tiny, H100, other),
      "another card's SMs and clocks are named, not assumed equal")
check(C.short_label("NVIDIA H100 80GB HBM3") == "H100" and C.short_label("NVIDIA H200") == "H200", "card labels")

# On the committed archives: kstudy compare --by machine prints what carry_over.compare judges.
h100 = REPO / "data/h100-2026-12-06-s20/hopper_attention.h5"
h200 = REPO / "data/h200-2026-12-02-s16/hopper_attention.h5"
if h100.exists() and h200.exists():
    pair = C.compare(h100, h200, operations=["attention_bf16"])
    verdicts = {p.label: p.judgement.verdict for p in pair.points}
    check(verdicts.get("16×4096×64") == "does not carry over",
          f"bf16 attention at 16×4096×64: cuDNN first on the H100, wgmma_pingpong on the H200 ({verdicts})")
    check(pair.card_a.label == "H100" and pair.card_b.label == "H200", "the cards from the archives' environments")
    differ, _ = C.not_one_run(pair.card_a, pair.card_b)
    check(any(d.startswith("commit 5b28668 (H100) vs 644da0e (H200)") for d in differ),
          f"the two runs' commits are disclosed ({differ})")
    run = subprocess.run([sys.executable, str(REPO / "scripts/kstudy_report.py"), "compare", str(h100), str(h200),
                          "--by", "machine"], capture_output=True, text=True, timeout=240)
    check(run.returncode == 0, f"kstudy compare --by machine exits 0 (got {run.returncode}: {run.stderr[-400:]})")
    lines = [line for line in run.stdout.splitlines() if line.strip().startswith("attention_bf16 ")
             and "16×4096×64" in line]
    check(len(lines) >= 1 and "does not carry over" in lines[0], "the CLI's verdict at 16×4096×64 is the block's")
    check("Not one run: commit 5b28668 (H100) vs 644da0e (H200)" in run.stdout, "the CLI discloses the two runs")
else:
    print("note: the committed attention archives are missing; the CLI check is skipped")

cases.finish("all checks passed")
