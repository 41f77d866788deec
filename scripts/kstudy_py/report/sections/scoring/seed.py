"""The seed article's conclusions (../shared/seeds/000_35d2bc83c86599ac.txt, as README links it; its numbers
quoted as constants) beside the archives' numbers for the same claims."""
import pandas as pd

from .... import archive as A
from ... import section

SEED_BASELINE = ("The seed's baseline was NumPy, which took 59.27 ms at 1,048,576×16 (“At 1,048,576 rows and 16 "
                 "features, NumPy took 59.27 ms”) with each process pinned to eight CPU threads (“Each process was "
                 "pinned to eight CPU threads”); kstudy's is the multi-threaded Kokkos OpenMP `cpu_reference`{here}, "
                 "so speedups are smaller by design and crossovers move to larger tables.")
# "the fully fused raw kernels were 323–324× faster than NumPy with data already resident on the GPU. The one-shot
# result, including a host upload and host-visible outputs, was about 10.4×."
SEED_ONE_SHOT = "3.2% kept (324× → 10.4×, NumPy arrays in and out)"
# "The raw kernels and partial fusion first beat NumPy at the tested 4,096-row point. Composed CuPy first won at
# 16,384."
SEED_FIRST_WIN = (("fused_cuda", 4096), ("partial_fusion", 4096), ("composed", 16384))
SEED_FIRST_WIN_MARGIN = (1.1, 1.6)  # "The first measured win was only 1.1–1.6×."
SEED_ROW_OVER_FEATURE = "1.83× (plain row-major kernel)"       # 262,144 x 256: 1.210 vs 0.661 ms
ROW_MAJOR_VARIANTS = ("fused_cuda_row_major@cuda", "fused_cuda_row_major_tiled@cuda", "fused_kokkos_row_major@cuda")
SEED_VARIANT = "fused_cuda_row_major@cuda"                    # the seed's one-thread-per-row kernel
SEED_BREAK_EVEN = {(262144, 256): ("5.4 reuses", 5.4), (1048576, 16): ("≈1,450 reuses", 1450.0),
                   (4194304, 16): ("> 10,000 reuses", 10000.0)}


def claim(text, seed, here, verdict):
    return {"claim": text, "seed": seed, "here": here, "verdict": verdict}


def one_shot_claims(wf):
    out = []
    for memory, variant, kernel, total in wf.totals():
        kept = kernel / total
        out.append(claim(f"one-shot ({memory}) keeps a few % of the resident speedup at 1,048,576×16", SEED_ONE_SHOT,
                         f"{100 * kept:.1f}% kept (`{variant}`: kernel {A.fmt_seconds(kernel)}, one-shot "
                         f"{A.fmt_seconds(total)})", "holds" if kept < 0.1 else "changes: transfers erase less"))
    return out


def crossover_claims(cr, families):
    tested = cr[(cr.timer == "one_shot") & (cr.memory_kind == "pageable")]
    tested = tested.assign(family=tested.variant.map(families))
    won = tested[tested.bracket != "never"]
    out, margins = [], []
    for family, seed_rows in SEED_FIRST_WIN:
        text = f"{family} first beats the CPU one-shot from pageable memory"
        h, t = won[won.family == family], tested[tested.family == family]
        if len(h):
            best = h.loc[h.first_winning_rows.astype(int).idxmin()]
            first, margin = int(best.first_winning_rows), float(best.first_win_margin)
            margins.append((family, margin))
            verdict = ("holds (within one doubling)" if seed_rows / 2 <= first <= seed_rows * 2 else
                       "changes: " + ("earlier" if first < seed_rows else "later"))
            out.append(claim(text, f"at {seed_rows:,} rows (vs NumPy)",
                             f"at {first:,} rows by {margin:.2f}× (`{best.variant}` vs `{best.baseline}`, separate "
                             "IQRs)", verdict))
        elif len(t):
            out.append(claim(text, f"at {seed_rows:,} rows (vs NumPy)",
                             f"never up to {int(tested.tested_rows_max.max()):,} rows (vs `{t.baseline.iloc[0]}`)",
                             "changes: from pageable memory the multi-threaded CPU wins at every tested size"))
    if margins:
        high = max(m for _, m in margins)
        lo_seed, hi_seed = SEED_FIRST_WIN_MARGIN
        out.append(claim("the first measured one-shot win (pageable) is small", f"{lo_seed}–{hi_seed}×",
                         ", ".join(f"{f} {m:.2f}×" for f, m in margins),
                         "holds" if high <= 2 * hi_seed else "changes: the first win is larger"))
    return out


STAGE_CEILING = "host_stage_pageable_to_pinned"


def pageable_pipeline_claims(inputs):
    """From pageable memory (the plain-kernel target): does the pipelined one-shot, which stages pageable input into
    reused pinned chunks with host threads while earlier chunks upload and compute, beat the CPU reference at
    1,048,576×16 and above? The bound is the measured host staging copy: the table's bytes / its bandwidth."""
    sp = inputs.speedups
    sp = sp[(sp.timer == "pipelined") & (sp.memory_kind == "pageable") & (sp.features == 16) & (sp.rows >= 1048576)]
    out = []
    stage = {a.label: a.ceiling(STAGE_CEILING) for a in inputs.archives}
    for (arch, exp), h in sp.groupby(["archive", "experiment"]):
        for rows in sorted({1048576, int(h.rows.max())} & set(h.rows.astype(int))):
            g = h[h.rows == rows]
            best = g.loc[g["median"].idxmin()]
            ratio = best["median"] / best.cpu_median
            bound, verdict = "", "GPU wins" if ratio < 1 else "CPU wins"
            if stage.get(arch):
                bound_s = rows * 16 * 4 / stage[arch]
                bound = (f"; staging alone ({stage[arch] / 1e9:.1f} GB/s host copy, measured) takes "
                         f"{A.fmt_seconds(bound_s)} = {bound_s / best.cpu_median:.2f}× the CPU")
                if ratio >= 1:
                    verdict += (": the host staging copy alone is slower than the CPU" if bound_s >= best.cpu_median
                                else ": staging alone would fit; uploads and kernels do not hide behind it")
            out.append(claim(f"pipelined one-shot from pageable memory vs the CPU reference at {A.fmt_rows(rows)}×16 "
                             f"({arch}/{exp})", "not measured (NumPy arrays were pageable; no pipeline)",
                             f"`{best.variant}` {A.fmt_seconds(best['median'])} vs `{best.baseline}` "
                             f"{A.fmt_seconds(best.cpu_median)}: {ratio:.2f}× the CPU time" + bound,
                             verdict))
    return out


def break_even_claim(k, r, f):
    seed_text, seed_value = SEED_BREAK_EVEN[(r, f)]
    value = k.break_even_reuses.iloc[0]
    try:
        reuses = float(value)
        here, verdict = f"{reuses:.3g} reuses", ("holds (same order)" if seed_value / 3 <= reuses <= seed_value * 3 else
                                                 "changes: pays back " + ("sooner" if reuses < seed_value else "later"))
    except (TypeError, ValueError):
        here, verdict = str(value), "changes" if value == "never" else "not comparable"
    return claim(f"transpose break-even at {r:,}×{f} (`{SEED_VARIANT}`)", seed_text, here, verdict)


def layout_claims(lay):
    res = lay[lay.timer == "resident_wall"]
    out = []
    for variant in ROW_MAJOR_VARIANTS:
        h = res[(res.row_variant == variant) & (res.rows == 262144) & (res.features == 256)]
        if len(h):
            ratio = float(h.row_over_feature.iloc[0])
            out.append(claim(f"feature-major beats row-major at 262,144×256 (`{variant}`)", SEED_ROW_OVER_FEATURE,
                             f"row-major / feature-major = {ratio:.2f}",
                             "holds" if ratio > 1.5 else ("changes: row-major coalesced, ratio near 1" if ratio < 1.2
                                                          else "changes: smaller gap")))
    h = res[res.row_variant == SEED_VARIANT]
    for r, f in SEED_BREAK_EVEN:
        k = h[(h.rows == r) & (h.features == f)]
        if len(k):
            out.append(break_even_claim(k, r, f))
    k = h[(h.rows == 4194304) & (h.features == 16)]
    if len(k) and k.t_padded_s.notna().iloc[0]:
        ratio = float(k.t_padded_s.iloc[0] / k.t_row_s.iloc[0])
        out.append(claim("padded stride is slower than row-major at 4,194,304×16 (`fused_cuda`)", "up to 1.16×",
                         f"{ratio:.2f}×", "holds" if 1.0 < ratio <= 1.3 else "changes"))
    return out


def occupancy_claims(bs):
    if "occupancy" not in bs.columns:
        return []
    if (bs.timer == "device_events").any():
        bs = bs[bs.timer == "device_events"]
    out = []
    # One point of one variant over the block sizes it ran at: the point key less the block size.
    keys = ["variant", *A.point_key("samples", without=("block_size",)), "timer"]
    for key, g in bs.groupby(keys):
        k = dict(zip(keys, key))
        v, r, f = k["variant"], k["rows"], k["features"]
        g = g[g.occupancy > 0]
        if len(g) < 2 or g.occupancy.max() < 2 * g.occupancy.min():
            continue
        lo, hi = g.loc[g.occupancy.idxmin()], g.loc[g.occupancy.idxmax()]
        change = lo["median"] / hi["median"]
        out.append(claim(f"doubling calculated occupancy changes little (`{v}` {A.fmt_rows(r)}×{f})",
                         "almost no change (feature-major 262,144×256)",
                         f"occupancy {lo.occupancy:.2f} → {hi.occupancy:.2f}: time × {1 / change:.2f}",
                         "holds" if 0.9 <= change <= 1.1 else "changes"))
    return out


@section("seed", "The seed's conclusions on this machine", order=120, operation="scoring",
         needs=("waterfall", "crossover", "layout", "block_size"))  # point-key names: the sections this one reads
def seed(inputs, sec, waterfall, crossover, layout, block_size):
    families = dict(zip(inputs.variants.variant, inputs.variants.family))
    rows = []
    rows += one_shot_claims(waterfall.value) if waterfall.value else []
    rows += crossover_claims(crossover.value, families) if crossover.value is not None else []
    rows += pageable_pipeline_claims(inputs) if not inputs.speedups.empty else []
    rows += layout_claims(layout.value) if layout.value is not None and len(layout.value) else []
    rows += occupancy_claims(block_size.value) if block_size.value is not None else []
    if not rows:
        return sec.skip("none of the seed's measured points is in these archives")
    df = pd.DataFrame(rows)
    inputs.write_csv(df, "seed_comparison.csv", sec, "the seed article's claims beside this archive's numbers")
    wf = waterfall.value
    here = ""
    if wf and wf.cpu:
        timed = inputs.archive_of(wf.archive).experiments.get(wf.experiment)
        threads = timed.openmp_threads if timed is not None else None
        here = (f" ({f'{threads} OpenMP threads, ' if threads else ''}{A.fmt_seconds(wf.cpu)} at "
                f"{inputs.shape_label()} in {wf.archive}/{wf.experiment})")
    sec.lines += [SEED_BASELINE.format(here=here), "", "| claim | seed | here | verdict |", "| --- | --- | --- | --- |"]
    sec.lines += [f"| {r['claim']} | {r['seed']} | {r['here']} | {r['verdict']} |" for r in rows]
    return sec.done(df)
