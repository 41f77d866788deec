"""What carries over between two cards: per operation and point that both cards' archives measured, the ranking of
the variants and each one's ratio to the reference on each card, a verdict per point and its reason, computed by
kstudy_py/carry_over.py (the same function `kstudy compare --by machine` prints).

    <!-- kstudy:results carries_over archives=FIRST_CARD.h5,SECOND_CARD.h5[,FIRST.h5,SECOND.h5 ...]
         [operations=OP,OP] [reference=VARIANT] -->

The archives go in pairs, the first card's first; each pair must name two different GPUs (environment gpu_name).
operations= keeps those operations only; reference= holds every ratio against that variant (its name or family)
wherever a point has it, else against the fastest on the first card.
"""
from .. import carry_over as C
from . import ResultsError, generator


def table(rows, columns=None):
    """A markdown table of dicts (the keys of the first, or `columns`, in order)."""
    if not rows:
        return []
    columns = columns or list(rows[0])
    out = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        out.append("| " + " | ".join(str(row[c]).replace("|", "\\|") for c in columns) + " |")
    return out


def rules(a="the first card", b="the second"):
    return (f"Per point, the variants both archives measured (device variants, CUDA events where both have them, "
            f"else the resident wall clock; every accepted sample of the archive). *time ÷ ref*: the variant's median "
            f"over the reference's on the same card, with its 95% interval (seeded bootstrap of both medians); the "
            f"reference is the fastest on the {a} unless named. *{b} speed-up*: median time on the {a} ÷ median "
            f"time on the {b} (above 1: faster on the {b}), with its interval. *{b} order by {a} rank*: the "
            f"{a}'s ranks listed fastest first on the {b} (1,2,3: the same order). **holds**: no ratio's intervals "
            f"disjoint between the cards and no pair reversed; **ranking holds, ratio moves**: a ratio's intervals "
            f"disjoint; **does not carry over**: a pair of variants ordered one way on one card and the other way on "
            f"the other, each order resolved (the pair's interval clear of 1 on both). No correction for the number "
            f"of ratios compared: the intervals say by how much each moved. *Reason*: each variant involved (the "
            f"reference, the ratios that moved, the reversed pairs) classed from its archive's own roofs on the "
            f"timer's clock: its modelled traffic and flops per median time against the bandwidth and compute roofs "
            f"(under {C.LATENCY_SHARE:.0%} of both: neither roof), its traffic a call against each card's L2 "
            f"(environment `gpu_l2_bytes`); *power* where samples ran throttled (NVML reasons per sample); *not "
            f"explained* where no class predicts the direction of a move and at least {C.EXPLAINED_SHARE:.0%} of its "
            f"size (log scale). Roof shares: modelled traffic per "
            f"median time over the card's bandwidth roof (above 100%: the model counts re-reads a cache serves).")


def pair_lines(pair, tally):
    a, b = pair.card_a.label, pair.card_b.label
    lines = [f"**{a} → {b}**: `{pair.card_a.path}` against `{pair.card_b.path}`", ""] + C.header_lines(pair) + [""]
    for operation in sorted({p.operation for p in pair.points}):
        points = [p for p in pair.points if p.operation == operation]
        timers = sorted({p.timer for p in points})
        counts = tally.setdefault((operation, a, b, pair.card_a.path, pair.card_b.path),
                                  {v: 0 for v in C.VERDICTS})
        for p in points:
            counts[p.judgement.verdict] += 1
        summary = [C.summary_row(p, pair) for p in points]
        for row in summary:
            row.pop("timer")
        lines += [f"**{operation}** ({', '.join(timers)}):", ""] + table(summary) + [""]
        moved = [row for p in points for row in C.moved_rows(p, pair)]
        if moved:
            lines += [f"*{operation}: the ratios that moved and the pairs that reversed*", ""] + table(moved) + [""]
    return lines


@generator("carries_over", "what carries over between two cards: per operation and point both archives measured, "
                           "the ranking and ratios on each card, a verdict (holds / ranking holds, ratio moves / "
                           "does not carry over) and its reason from the archives' roofs, L2 and throttle records")
def carries_over(block):
    if len(block.paths) % 2:
        raise ResultsError(f"{block.where}: carries_over takes archives in pairs (first card, second card), got "
                           f"{len(block.paths)}")
    operations = [o for o in block.option("operations", "").split(",") if o] or None
    reference = block.option("reference")
    tally, body, labels = {}, [], None
    for i in range(0, len(block.paths), 2):
        pair = C.compare(block.paths[i], block.paths[i + 1], operations, reference)
        pair.card_a.path, pair.card_b.path = block.archive_names[i], block.archive_names[i + 1]
        if not pair.card_a.name or pair.card_a.name == pair.card_b.name:
            raise ResultsError(f"{block.where}: {pair.card_a.path} and {pair.card_b.path} do not name two different "
                               f"GPUs ({pair.card_a.name or 'none'} / {pair.card_b.name or 'none'})")
        if not pair.points:
            raise ResultsError(f"{block.where}: {pair.card_a.path} and {pair.card_b.path} hold no point with two "
                               "device variants in common")
        labels = labels or (pair.card_a.label, pair.card_b.label)
        body += pair_lines(pair, tally)
    overview = [{"operation": op, "archives": f"`{pa.split('/')[-2]}` / `{pb.split('/')[-2]}`",
                 "points": sum(counts.values()), **{v: counts[v] for v in C.VERDICTS if v != "too few samples"},
                 **({"too few samples": counts["too few samples"]} if counts["too few samples"] else {})}
                for (op, _, _, pa, pb), counts in tally.items()]
    columns = list(dict.fromkeys(k for row in overview for k in row))
    for row in overview:
        for c in columns:
            row.setdefault(c, 0)
    return [rules(*labels), "", "Verdicts per operation (points):", ""] + table(overview, columns) + [""] + body
