"""The scoring ladder's baseline (plain_baseline.h5): each fused kernel against the plain kernel of its family at
every shape the archive measured, judged by Mann-Whitney on the same archive's samples."""
from . import ResultsError, generator, stats as S

# (faster candidate, baseline): rung 2 against rung 1 of the CUDA ladder, and the Kokkos pair the seed compared.
PAIRS = ("fused_cuda_feature_major@cuda:plain_cuda_feature_major@cuda,"
         "fused_kokkos_feature_major@cuda:plain_kokkos_feature_major@cuda")


def pair_families(block, default=PAIRS):
    """(pairs, table lines, families) of the block's pairs (option pairs=A:B,...): one family per pair over every
    shape the archive measured both at (the claim "faster at k of n shapes" rests on all n tests of its column); the
    table's cells are resolved."""
    path = block.paths[0]
    s = S.samples(path)
    pairs = [p.split(":") for p in block.option("pairs", default).split(",")]
    for pair in pairs:
        missing = [v for v in pair if v not in set(s.variant)]
        if len(pair) != 2 or missing:
            raise ResultsError(f"{block.where}: pair {':'.join(pair)} is not two variants of "
                               f"{block.archive_names[0]} (missing: {', '.join(missing) or 'a second variant'})")
    # Every point the archive measured, by features, then rows.
    shapes = sorted(set(zip(s.rows, s.features, s.depth)), key=lambda x: (x[1], x[0], x[2]))
    head = "| rows × features | " + " | ".join(f"`{a.split('@')[0]}` ÷ `{b.split('@')[0]}` (time)" for a, b in pairs)
    lines = [head + " |", "| --- |" + " --- |" * len(pairs)]
    families = [S.Family() for _ in pairs]
    for rows, features, depth in shapes:
        cells = []
        for family, (a, b) in zip(families, pairs):
            ma, mb = S.measure(path, a, rows, features, depth), S.measure(path, b, rows, features, depth)
            if ma is None or mb is None:
                cells.append("")
                continue
            cells.append(family.add(ma.seconds, mb.seconds, ma.point()).token)
        if any(cells):  # an archive may hold other operations' shapes too
            lines.append(f"| {rows:,}×{features} | " + " | ".join(cells) + " |")
    for family in families:
        lines = family.fill(lines)
    return pairs, lines, families


def pair_summary(a, b, family):
    """'- `a` against `b` over all n shapes: geometric mean ...; faster at **k of n** after Holm's correction (...)'"""
    n = len(family)
    counts = family.counts()
    raw = sum(c.p < S.ALPHA for c in family.members)
    text = (f"`{a.split('@')[0]}` against `{b.split('@')[0]}` over all {n} shapes: {family.summary()}; "
            f"faster at **{len(counts['beats'])} of {n}** after Holm's correction ({raw} of {n} by {n} "
            f"uncorrected tests at {S.ALPHA})")
    if counts["loses"]:
        text += f", slower at **{len(counts['loses'])}** ({', '.join(c.label for c in counts['loses'])})"
    else:
        text += ", slower at none"
    return text, counts


@generator("plain_baseline", "fused scoring kernels against the plain kernels at every shape (plain_baseline.h5)")
def plain_baseline(block):
    pairs, lines, families = pair_families(block)
    lines.append("")
    for (a, b), family in zip(pairs, families):
        if not len(family):
            continue
        text, counts = pair_summary(a, b, family)
        text = "- " + text
        for verdict in ("tie", "inconclusive"):
            if counts[verdict]:
                text += f"; {verdict} at {len(counts[verdict])}: " + ", ".join(
                    f"{c.label} ({c.interval()})" for c in counts[verdict])
        lines.append(text + ".")
    lines += ["", f"Cells: {S.effects.rules_text()}; the family is the column's shapes. Samples: every "
              "accepted sample (all replications) of each variant at the shape."]
    return lines
